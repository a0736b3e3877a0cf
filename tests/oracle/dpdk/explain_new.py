#!/usr/bin/env python3
"""Test a hypothesis for every difference compare_new.py finds on the
ENHANCED layout (see RX-ENHANCED.md), mbuf by mbuf.

usage: explain_new.py --rx-gen BUILD/rx_gen_new[_probe] --tool TARGET/debug/mlx5dp
                      [--seeds 1,..] [--configs N] [--rounds R]

The same configurations as compare_new.py --layout enhanced.  Each ring is
walked from DPDK's starting index like a consumer does (regular CQE: one
completion; compressed CQE of n minis: n completions, from its byte 0), so
that every mbuf is tied to its CQE, its mini and its place.  A vector
"chain" is a run of consecutive compressed CQEs that one
rxq_cq_decompress_v call unzips (keep = true, mlx5_rxtx_vec_sse.h:362-373);
it ends at the ring end (the call follows cq[mcqe_n] without wrapping).
On the vector MPRQ routine each compressed CQE is its own chain: it unzips
with keep = false (mlx5_rxtx_vec.c:539-540), one call per compressed CQE.
MPRQ fillers give no completion and no mbuf.
Hypotheses (vector paths only; the scalar paths have no difference but the
24-bit index):
  T  title: the minis whose title (the regular CQE the compressed CQEs
     after it lead back to, found in the ring before DPDK's index) sits in
     the LAST slot of the ring (rxq_burst_v does not copy title_pkt when
     its pass ends at the ring end, mlx5_rxtx_vec.c:358-369) -- any field.
  P  L34H packet_type = mlx5_ptype_table[(byte 0 of the COMPRESSED CQE & 3)
     << 6 | mini hdr_type >> 2] (mlx5_rxtx_vec_sse.h:253-254, cq->pkt_info
     is the compressed CQE's byte 0 = mini 0's hdr_type in this layout).
  V  L34H VLAN flags of lane j of group g = OR over the groups <= g of the
     whole chain of bit 0 of lane 3 - j's hdr_type (_mm_set_epi32 reversal,
     :266-270; ol_flags zeroed once per call, :106, not at "goto cycle").
  F  FTAG FDIR flags of lane j = OR over the groups <= g of the chain of
     (lane j's tag != 0), FDIR_ID = FDIR (:204-239; RX.md).
  O  overrun: an mbuf whose pkt_len is the byte count of lane k
     (k >= n) of the last compressed CQE of a chain at n + ... positions
     after it modulo the ring: rxq_cq_decompress_v stores 4 mbufs per group
     whatever mcqe_n (:144-170), into elts entries whose mbufs the same
     call already returned (not replenished yet).
An mbuf is assigned to P/V/F when those rules explain all its differing
fields; else to T when it is a T mini and its length agrees (the fields P/V/F
explain are set aside); else to O when its length is an overrun lane's;
the rest are "unexplained".
"""
import argparse, json, subprocess, sys, os
from collections import Counter
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_new as C


def walk(ring, n, ci, striding=False, per_cqe_chain=False):
    """Completions from ci: (index, slot, kind, cqe_slot, k, n_minis, chain, group_in_chain)."""
    lg = n.bit_length() - 1
    out = []
    i = ci
    chain = -1
    chain_groups = 0
    prev_comp = False
    prev_slot_end = None
    while len(out) <= n:
        s = i % n
        e = ring[s * 64:(s + 1) * 64]
        if e[62] != (i >> lg) & 0xff or e[63] >> 4 == 0xf:
            break
        if (e[63] >> 2) & 3 == 3:
            m = (e[63] >> 4) + 1
            if not prev_comp or s == 0 or per_cqe_chain:
                chain += 1
                chain_groups = 0
                chain_start = (i, s)
            for k in range(m):
                out.append(dict(index=i + k, kind="mini", cqe=s, k=k, n=m, chain=chain,
                                chain_start=chain_start, group=chain_groups + k // 4))
            chain_groups += (m + 3) // 4
            prev_comp = True
            i += m
        elif striding and e[44] & 0x80:
            prev_comp = False   # an MPRQ filler: no packet, no completion
            i += 1
        else:
            out.append(dict(index=i, kind="regular", cqe=s))
            prev_comp = False
            i += 1
    return out


def title_index(ring, n, c):
    """The regular CQE that is the title of the compressed CQE at index c
    (the nearest one before c whose compressed CQEs lead to c), or None."""
    lg = n.bit_length() - 1

    def entry(i):
        e = ring[(i % n) * 64:(i % n) * 64 + 64]
        return e if e[62] == (i >> lg) & 0xff and e[63] >> 4 != 0xf else None
    for t in range(c - 1, c - n, -1):
        e = entry(t)
        if e is None or (e[63] >> 2) & 3 == 3:
            continue
        at = t + 1
        while at < c:
            f = entry(at)
            if f is None or (f[63] >> 2) & 3 != 3:
                break
            at += (f[63] >> 4) + 1
        if at == c:
            return t
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rx-gen", required=True)
    ap.add_argument("--tool", required=True)
    ap.add_argument("--seeds", default="1")
    ap.add_argument("--configs", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--mprq-configs", type=int, default=0)
    a = ap.parse_args()
    T = json.loads(subprocess.run([a.rx_gen, "tables"], capture_output=True, text=True, check=True).stdout)
    VL = T["VLAN"] | T["VLAN_STRIPPED"]
    FD = T["FDIR"] | T["FDIR_ID"]
    held = Counter(); failed = Counter(); assigned = Counter(); unexplained = Counter()
    cov = Counter(); examples = {}
    rings_with = Counter()      # (hypothesis, path, fmt) -> rings with >= 1 mbuf assigned
    for seed in [int(s) for s in a.seeds.split(",")]:
        for k, (path, fmt, log_n, ci0, mark) in enumerate(C.sample_configs(seed, a.configs) +
                                                         C.sample_mprq_configs(seed, a.mprq_configs)):
            args = [a.rx_gen, str(seed * 100003 + k), path, fmt, str(log_n), str(ci0), str(mark),
                    str(a.rounds), "enhanced"]
            p = subprocess.run(args, capture_output=True, text=True)
            for line in p.stdout.splitlines():
                d = json.loads(line)
                n = 1 << d["log_n"]
                ring = bytes.fromhex(d["ring"])
                mp = path.startswith("mprq")
                vec = path in ("vec", "mprq-vec")
                comps, fin, err, _ = C.run_tool(a.tool, d["ring"], n, d["ci"], fmt, mp, "enhanced")
                if err:
                    unexplained["tool-error"] += 1
                    continue
                w = walk(ring, n, d["ci"], mp, path == "mprq-vec")
                cov["rings"] += 1
                cov[f"{path} completions"] += len(w)
                cov[f"{path} minis"] += sum(1 for x in w if x["kind"] == "mini")
                cov[f"{path} compressed CQEs"] += sum(1 for x in w if x["kind"] == "mini" and x["k"] == 0)
                cov[f"{path} chains of 2+ CQEs"] += len({x["chain"] for x in w if x["kind"] == "mini" and x["k"] == 0 and x["index"] != x["chain_start"][0]})
                if len(w) != len(d["pkts"]) or len(w) != len(comps):
                    unexplained["walk-count"] += 1
                    continue
                # per-mbuf differences: reuse compare_ring on a one-mbuf ring
                diffs = C.compare_ring(T, d, comps, fin, err)
                before = Counter(assigned)
                bad_by_i = {}
                for cls, det in diffs:
                    if cls.startswith("ci-after"):
                        assigned["24bit ci" if cls == "ci-after-24bit" else cls] += 1
                        continue
                    i = int(det.split()[1])
                    bad_by_i.setdefault(i, set()).add(cls.split("/")[0])
                # chains and their groups, for V and F
                by_chain = {}
                for i, x in enumerate(w):
                    if x["kind"] == "mini":
                        by_chain.setdefault(x["chain"], []).append(i)
                pred_v = {}; pred_f = {}
                for ch, idxs in by_chain.items():
                    accv = [0, 0, 0, 0]; accf = [0, 0, 0, 0]
                    cqes = []
                    for i in idxs:
                        if w[i]["k"] == 0:
                            cqes.append(w[i]["cqe"])
                    gi = 0
                    for s in cqes:
                        m = (ring[s * 64 + 63] >> 4) + 1
                        for g in range((m + 3) // 4):
                            for j in range(4):
                                lane_v = 4 * g + 3 - j
                                accv[j] |= ring[s * 64 + 8 * lane_v] & 1
                                b = ring[s * 64 + 8 * (4 * g + j): s * 64 + 8 * (4 * g + j) + 8]
                                accf[j] |= 1 if (b[0] | b[1] | b[4]) else 0
                            for j in range(4):
                                key = (s, 4 * g + j)
                                pred_v[key] = accv[j]
                                pred_f[key] = accf[j]
                for i, x in enumerate(w):
                    pk = d["pkts"][i]
                    if vec and x["kind"] == "mini":
                        key = (x["cqe"], x["k"])
                        t = title_index(ring, n, x["chain_start"][0])
                        t_case = t is not None and t % n == n - 1
                        x["t_case"] = t_case
                        if fmt == "l34h-stridx":
                            m = ring[x["cqe"] * 64 + 8 * x["k"]: x["cqe"] * 64 + 8 * x["k"] + 8]
                            pt = T["ptype_table"][((ring[x["cqe"] * 64] & 3) << 6) | (m[0] >> 2)]
                            ok = pk[4] == pt
                            (held if ok else failed)["P l34h ptype"] += 1
                            okv = (pk[3] & VL) == (VL if pred_v[key] else 0)
                            (held if okv else failed)["V l34h vlan"] += 1
                        if fmt == "ftag-stridx" and d["mark"]:
                            okf = (pk[3] & FD) == (FD if pred_f[key] else 0)
                            (held if okf else failed)["F ftag fdir"] += 1
                        if t_case:
                            cov["vec minis whose title is in the last slot"] += 1
                    if i not in bad_by_i:
                        continue
                    fields = bad_by_i.pop(i)
                    rest = set(fields)
                    if vec and x["kind"] == "mini":
                        if fmt == "l34h-stridx":
                            m = ring[x["cqe"] * 64 + 8 * x["k"]: x["cqe"] * 64 + 8 * x["k"] + 8]
                            pt = T["ptype_table"][((ring[x["cqe"] * 64] & 3) << 6) | (m[0] >> 2)]
                            if pk[4] == pt:
                                rest.discard("packet_type")
                            if (pk[3] & VL) == (VL if pred_v[(x["cqe"], x["k"])] else 0):
                                rest.discard("vlan-flags")
                        if fmt == "ftag-stridx" and d["mark"]:
                            if (pk[3] & FD) == (FD if pred_f[(x["cqe"], x["k"])] else 0):
                                rest.discard("mark-flags")
                        if not rest:
                            assigned["P/V/F " + ",".join(sorted(fields))] += 1
                            continue
                        # T covers any field but the length (P/V/F fields
                        # whose rule holds are not counted against it)
                        if x.get("t_case") and "pkt_len" not in rest:
                            assigned["T title in the last slot"] += 1
                            continue
                    if path == "vec" and (fields == {"pkt_len"} or x["kind"] == "regular"):
                        # O: some later compressed CQE's lane k >= n lands on this elts position
                        pos = x["index"] % n
                        hit = False
                        for y in w:
                            if y["kind"] == "mini" and y["k"] == 0 and y["index"] > x["index"]:
                                mm = y["n"]
                                for kk in range(mm, 4 * ((mm + 3) // 4)):
                                    if (y["index"] + kk) % n == pos:
                                        b = ring[y["cqe"] * 64 + 8 * kk: y["cqe"] * 64 + 8 * kk + 8]
                                        if pk[0] == int.from_bytes(b[6:8], "big"):
                                            hit = True
                        if hit:
                            assigned["O overrun into a returned mbuf"] += 1
                            continue
                    unexplained[f"{path}/{fmt}/{x['kind']}/" + ",".join(sorted(rest))] += 1
                    examples.setdefault(f"{path}/{fmt}/{x['kind']}/" + ",".join(sorted(rest)),
                                        (args, d["round"], i))
                for hk in {h.split()[0] for h in assigned if assigned[h] != before[h]}:
                    rings_with[(hk, path, fmt)] += 1
    print("coverage:", dict(cov))
    print("rings with at least one mbuf (or index) assigned, per hypothesis, routine and format:")
    for k, v in sorted(rings_with.items()):
        print(f"  {k[0]} / {k[1]} / {k[2]}: {v}")
    print("hypotheses checked on every vector mini mbuf of their format (held/failed):")
    for h in sorted(set(held) | set(failed)):
        print(f"  {h}: held {held[h]}, failed {failed[h]}")
    print("differing mbufs (and ci differences) assigned:")
    for h, v in sorted(assigned.items()):
        print(f"  {h}: {v}")
    print("unexplained:", dict(unexplained) if unexplained else "none")
    for k, v in examples.items():
        print("  e.g.", k, v)
    return 1 if unexplained else 0


if __name__ == "__main__":
    sys.exit(main())
