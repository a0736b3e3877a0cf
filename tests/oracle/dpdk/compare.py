#!/usr/bin/env python3
"""Compare `mlx5dp decode cq` with DPDK 22.11's own mlx5 Rx burst code on
random CQ rings (see RX.md).

usage: compare.py --rx-gen BUILD/rx_gen --tool TARGET/debug/mlx5dp
                  [--seeds 1,2,3] [--configs N] [--mprq-configs M] [--rounds R]
                  [--out DIR] [--selftest]

For every seed, N random queue configurations (path scalar|vec, mini format,
ring size, starting consumer index, flow mark on/off), and with
--mprq-configs M more on a striding RQ (path mprq|mprq-vec), are run
through `rx_gen`, R rings ("rounds") each.  Every ring `rx_gen` prints is the CQ as
the NIC left it before DPDK polled it, with what DPDK's burst routine
derived per mbuf.  The same bytes go to `mlx5dp decode cq --json` from the
same consumer index, and the two are compared completion by completion
under the mapping below.  Differences are counted by class; for every class
the smallest ring showing it is saved under --out with both outputs.

Mapping (DPDK 22.11 source, drivers/net/mlx5 unless stated):
  pkt_len   = byte_cnt (crc_present = 0; rxq_cq_to_mbuf / mlx5_rx_poll_len
              mlx5_rx.c:1031, 1056; SSE shuffles in mlx5_rxtx_vec_sse.h);
              data_len = pkt_len and nb_segs = 1 (buffers of 2048, lengths <= 2048).
  packet_type = mlx5_ptype_table[(pkt_info & 3) << 6 | l4_l3_hdr_type >> 2]
              (rxq_cq_to_pkt_type, mlx5_rx.c:330-352; rxq->tunnel = 0); the
              table is dumped from the linked object (rx_gen tables).
  checksum  IP_CKSUM_GOOD iff l3_ok, L4_CKSUM_GOOD iff l4_ok, else neither bit
              (rxq_cq_to_ol_flags mlx5_rx.c:857-871 called at :936-937, TRANSPOSE of
              MLX5_CQE_RX_L3/L4_HDR_VALID = CQE byte 28 bits 1, 2).
  vlan      VLAN|VLAN_STRIPPED iff cvlan_stripped (byte 29 bit 0), then
              vlan_tci = vlan_info (rxq_cq_to_mbuf mlx5_rx.c:938-951, vlan_strip=1).
  rss       hash.rss = rx_hash when RTE_MBUF_F_RX_RSS_HASH is set.  The flag:
              scalar: iff the hash is not 0 (mlx5_rx.c:894-907);
              vec: always, except minis of a non-HASH format, for which the SSE
              code writes hash.rss = 0 and clears the flag
              (rxq_cq_decompress_v, mlx5_rxtx_vec_sse.h:302-323).
  mark      (rxq->mark = 1 only) flow tag ft = CQE sop_drop_qpn[23:0], or the
              mini's tag in FTAG_STRIDX: FDIR iff ft != 0, FDIR_ID iff also
              ft != MLX5_FLOW_MARK_DEFAULT, then hash.fdir.hi =
              mlx5_flow_mark_get(raw) = (LE-loaded raw word >> 8) - 1
              (mlx5_rx.c:908-925, common/mlx5/mlx5_prm.h:243-245, 5041-5053).
  count     one mbuf per completion; final DPDK cq_ci = mlx5dp's closing ci.
Not comparable (DPDK keeps no trace in the mbuf): the mini's checksum and
stride index, wqe_counter (cyclic RQ: DPDK takes the next WQE, not the CQE's
counter), timestamp, opcode/owner, user index, flow metadata (dynf_meta off).
"""
import argparse, json, os, random, subprocess, sys
from collections import defaultdict, Counter

FMTS = ["hash", "csum", "ftag-stridx", "csum-stridx", "l34h-stridx"]
# On a striding RQ the scalar MPRQ routine takes the stride index from the
# mini (mlx5_rx_burst_mprq, mlx5_rx.c:1479-1481), which only the *_STRIDX
# formats carry; mlx5_devx.c:385-390 picks CSUM_STRIDX for it, and HASH for
# the vector MPRQ routine, which counts strides itself
# (rxq_copy_mprq_mbuf_v, mlx5_rxtx_vec.c:196-255).  compare.py runs HASH on
# the vector MPRQ routine only.
MPRQ_FMTS = ["csum-stridx", "ftag-stridx", "l34h-stridx", "hash"]


def sample_mprq_configs(seed, n):
    r = random.Random(seed * 7919 + 1)
    out = []
    for k in range(n):
        fmt = MPRQ_FMTS[k % len(MPRQ_FMTS)]
        log_n = r.randint(3, 8)
        q = 1 << log_n
        ci0 = r.choice([0, q - r.randint(1, min(q, 8)), r.randrange(1 << 16),
                        65536 - r.randint(1, 2 * q), (1 << 32) - r.randint(1, 3 * q),
                        r.randrange(1 << 32)])
        path = "mprq-vec" if fmt == "hash" else r.choice(["mprq", "mprq-vec"])
        out.append((path, fmt, log_n, ci0 & 0xffffffff, r.randint(0, 1)))
    return out


def sample_configs(seed, n):
    r = random.Random(seed)
    out = []
    for k in range(n):
        path = r.choice(["scalar", "vec"])
        fmt = FMTS[k % len(FMTS)] if k < 2 * len(FMTS) else r.choice(FMTS)
        log_n = r.randint(5, 8) if path == "vec" else r.randint(3, 8)
        q = 1 << log_n
        ci0 = r.choice([
            0, r.randrange(q), q - r.randint(1, min(q, 8)),
            r.randint(1, 7) * q - r.randint(0, 8) % q,
            r.randrange(1 << 16), 65536 - r.randint(1, 2 * q),
            (1 << 24) - r.randint(1, 2 * q), (1 << 32) - r.randint(1, 3 * q),
            r.randrange(1 << 32)])
        out.append((path, fmt, log_n, ci0 & 0xffffffff, r.randint(0, 1)))
    return out


def run_tool(tool, ring_hex, n, ci, fmt, striding=False):
    args = [tool, "decode", "cq", "--cqe-size", "64", "--cqe-cnt", str(n), "--ci", str(ci),
            "--layout", "basic", "--mini-format", fmt, "--json", "-"]
    if striding:
        args.insert(-2, "--striding-rq")
    p = subprocess.run(args, input=ring_hex, capture_output=True, text=True)
    lines = [json.loads(l) for l in p.stdout.splitlines() if l.strip()]
    comps = [l for l in lines if list(l.keys()) != ["ci"]]
    fin = [l["ci"] for l in lines if list(l.keys()) == ["ci"]]
    return comps, (fin[0] if fin else None), (p.stderr.strip() if p.returncode else None), args


def le32(b):
    return int.from_bytes(b, "little")


def expect(T, path, fmt, mark, c):
    """What DPDK's mbuf should hold for mlx5dp completion c (the mapping above)."""
    e = {}
    e["pkt_len"] = c["byte_cnt"]
    idx = ((c["pkt_info"] & 3) << 6) | (c["l4_l3_hdr_type"] >> 2)
    e["ptype"] = T["ptype_table"][idx]
    ck = 0
    if c["l3_ok"]:
        ck |= T["IP_CKSUM_GOOD"]
    if c["l4_ok"]:
        ck |= T["L4_CKSUM_GOOD"]
    e["cksum"] = ck
    e["vlan"] = (T["VLAN"] | T["VLAN_STRIPPED"]) if c["cvlan_stripped"] else 0
    e["vlan_tci"] = c["vlan_info"]
    if path in ("scalar", "mprq"):      # rxq_cq_to_mbuf
        e["rss_flag"] = T["RSS_HASH"] if c["rx_hash"] != 0 else 0
    else:
        e["rss_flag"] = 0 if (c["compressed"] and fmt != "hash") else T["RSS_HASH"]
    e["rss"] = c["rx_hash"]
    if mark:
        ft = c["flow_tag"] & 0xffffff
        # the raw 32-bit word DPDK loads (sop_drop_qpn, or for an FTAG mini
        # the word it rebuilds) as a little-endian CPU sees it
        hi = (c["sop_drop_qpn"] >> 24) & 0xff if not (c["compressed"] and fmt == "ftag-stridx") else 0
        raw = le32(bytes([hi, (ft >> 16) & 0xff, (ft >> 8) & 0xff, ft & 0xff]))
        f = 0
        if raw & 0xffffff00:
            f |= T["FDIR"]
            if raw != le32(bytes([0, 0xff, 0xff, 0xff])):
                f |= T["FDIR_ID"]
        e["mark_flags"] = f
        e["fdir"] = ((raw >> 8) - 1) & 0xffffffff
    else:
        e["mark_flags"] = 0
    return e


def compare_ring(T, d, comps, fin, err):
    """Return a list of (class, detail) for one ring."""
    diffs = []
    path, fmt, mark = d["path"], d["fmt"], d["mark"]
    if err:
        return [("tool-error", err[:300])]
    pk = d["pkts"]
    if len(pk) != len(comps):
        diffs.append(("count", f"dpdk {len(pk)} mbufs, mlx5dp {len(comps)} completions"))
    if fin != d["ci_after"]:
        cls = "ci-after-high-bits" if fin is not None and (fin - d["ci_after"]) % 65536 == 0 else "ci-after"
        diffs.append((cls, f"dpdk cq_ci {d['ci_after']}, mlx5dp ci {fin}"))
    allflags = (T["RSS_HASH"] | T["FDIR"] | T["FDIR_ID"] | T["VLAN"] | T["VLAN_STRIPPED"]
                | T["IP_CKSUM_MASK"] | T["L4_CKSUM_MASK"])
    for i, (p, c) in enumerate(zip(pk, comps)):
        plen, dlen, segs, olf, pt, rss, fdir, vtci, data = p
        kind = "mini" if c["compressed"] else "regular"
        e = expect(T, path, fmt, mark, c)

        def bad(field, dp, mx):
            diffs.append((f"{field}/{kind}", f"completion {i} (slot {c['slot']}): dpdk {dp}, mlx5dp-derived {mx}"))
        if c.get("opcode_raw") != 2:
            bad("opcode", 2, c.get("opcode_raw"))
        if path.startswith("mprq"):
            # MPRQ: the length is byte_cnt[15:0] (MLX5_MPRQ_LEN_MASK); the
            # data DPDK copied starts with the NIC's (WQE, stride) marker,
            # so its low half is the stride index DPDK used
            # (mprq_buf_to_pkt, mlx5_rx.h:489-514)
            if plen != c.get("mprq_byte_cnt"):
                bad("pkt_len", plen, c.get("mprq_byte_cnt"))
            if data & 0xffff != c.get("stride_idx"):
                bad("stride_idx", data & 0xffff, c.get("stride_idx"))
        elif plen != e["pkt_len"]:
            bad("pkt_len", plen, e["pkt_len"])
        if dlen != plen or segs != 1:
            bad("dpdk-data_len", (dlen, segs), (plen, 1))
        if pt != e["ptype"]:
            bad("packet_type", hex(pt), hex(e["ptype"]) + f" (pkt_info {c['pkt_info']}, l4_l3_hdr_type {c['l4_l3_hdr_type']:#x})")
        if olf & (T["IP_CKSUM_MASK"] | T["L4_CKSUM_MASK"]) != e["cksum"]:
            bad("cksum-flags", hex(olf & (T["IP_CKSUM_MASK"] | T["L4_CKSUM_MASK"])), hex(e["cksum"]))
        if olf & (T["VLAN"] | T["VLAN_STRIPPED"]) != e["vlan"]:
            bad("vlan-flags", hex(olf & (T["VLAN"] | T["VLAN_STRIPPED"])), hex(e["vlan"]))
        elif e["vlan"] and vtci != e["vlan_tci"]:
            bad("vlan_tci", vtci, e["vlan_tci"])
        if olf & T["RSS_HASH"] != e["rss_flag"]:
            bad("rss-flag", hex(olf & T["RSS_HASH"]), hex(e["rss_flag"]) + f" (rx_hash {c['rx_hash']:#x})")
        elif olf & T["RSS_HASH"] and rss != e["rss"]:
            bad("rss", hex(rss), hex(e["rss"]))
        if olf & (T["FDIR"] | T["FDIR_ID"]) != e["mark_flags"]:
            bad("mark-flags", hex(olf & (T["FDIR"] | T["FDIR_ID"])), hex(e["mark_flags"]) + f" (flow_tag {c['flow_tag']:#x})")
        elif olf & T["FDIR_ID"] and fdir != e["fdir"]:
            bad("mark-id", hex(fdir), hex(e["fdir"]) + f" (flow_tag {c['flow_tag']:#x})")
        if olf & ~allflags:
            bad("ol_flags-other", hex(olf & ~allflags), 0)
    return diffs


MUTATIONS = ["pkt_len+1", "packet_type^L4", "rss^1 (flag forced on)", "ip_cksum_good^",
             "vlan flag^", "drop last mbuf", "cq_ci+1", "mprq stride^1"]


def selftest_ring(T, d, comps, fin, err, classes, compare=None):
    compare = compare or compare_ring
    """Every mutation of DPDK's record must add a difference."""
    import copy
    base = compare(T, d, comps, fin, err)
    if not d["pkts"]:
        return
    for name in MUTATIONS:
        if name == "mprq stride^1" and not d["path"].startswith("mprq"):
            continue
        m = copy.deepcopy(d)
        p = m["pkts"][len(m["pkts"]) // 2]
        if name == "pkt_len+1":
            p[0] += 1; p[1] += 1
        elif name == "packet_type^L4":
            p[4] ^= 0x300
        elif name == "rss^1 (flag forced on)":
            p[3] |= T["RSS_HASH"]; p[5] = comps[len(m["pkts"]) // 2]["rx_hash"] ^ 1 if comps else 1
        elif name == "ip_cksum_good^":
            p[3] ^= T["IP_CKSUM_GOOD"]
        elif name == "vlan flag^":
            p[3] ^= T["VLAN"] | T["VLAN_STRIPPED"]
        elif name == "drop last mbuf":
            m["pkts"].pop()
        elif name == "cq_ci+1":
            m["ci_after"] += 1
        elif name == "mprq stride^1":
            p[8] ^= 1
        if compare(T, m, comps, fin, err) == base:
            classes[f"SELFTEST-MISSED/{name}"] += 1
        else:
            classes_selftest[name] += 1


classes_selftest = Counter()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rx-gen", required=True)
    ap.add_argument("--tool", required=True)
    ap.add_argument("--seeds", default="1")
    ap.add_argument("--configs", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--mprq-configs", type=int, default=0,
                    help="striding-RQ configurations per seed (mlx5_rx_burst_mprq), after the others")
    ap.add_argument("--out", default="/tmp/rx-oracle")
    ap.add_argument("--selftest", action="store_true",
                    help="also corrupt one DPDK value per ring in each of several ways "
                         "and require the comparison to notice every one")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    T = json.loads(subprocess.run([a.rx_gen, "tables"], capture_output=True, text=True, check=True).stdout)
    rings = 0
    rings_by = Counter()
    comps_total = 0
    classes = Counter()          # class -> rings showing it
    per_cfg = defaultdict(Counter)
    best = {}                    # class -> (size key, record)
    for seed in [int(s) for s in a.seeds.split(",")]:
        cfgs = sample_configs(seed, a.configs) + sample_mprq_configs(seed, a.mprq_configs)
        for k, (path, fmt, log_n, ci0, mark) in enumerate(cfgs):
            cseed = seed * 100003 + k
            args = [a.rx_gen, str(cseed), path, fmt, str(log_n), str(ci0), str(mark), str(a.rounds)]
            p = subprocess.run(args, capture_output=True, text=True)
            if p.returncode != 0:
                classes["rx_gen-crash"] += 1
                print("rx_gen failed:", " ".join(args), p.stderr.strip()[-400:], file=sys.stderr)
            for line in p.stdout.splitlines():
                d = json.loads(line)
                n = 1 << d["log_n"]
                comps, fin, err, targs = run_tool(a.tool, d["ring"], n, d["ci"], fmt,
                                                  path.startswith("mprq"))
                rings += 1
                rings_by[(path, fmt)] += 1
                comps_total += len(comps)
                diffs = compare_ring(T, d, comps, fin, err)
                if a.selftest:
                    selftest_ring(T, d, comps, fin, err, classes)
                seen = set()
                for cls, detail in diffs:
                    key = f"{path}/{fmt}/{cls}"
                    if key in seen:
                        continue
                    seen.add(key)
                    classes[key] += 1
                    size = (n, d["written"])
                    if key not in best or size < best[key][0]:
                        best[key] = (size, {"class": key, "detail": detail, "rx_gen": args,
                                            "round": d["round"], "tool": targs, "ci": d["ci"],
                                            "ring": d["ring"], "dpdk_pkts": d["pkts"],
                                            "dpdk_ci_after": d["ci_after"],
                                            "mlx5dp": comps, "mlx5dp_ci": fin,
                                            "all_diffs": diffs[:20]})
    for key, (size, rec) in best.items():
        with open(os.path.join(a.out, key.replace("/", "_") + ".json"), "w") as f:
            json.dump(rec, f, indent=1)
    print(f"rings compared: {rings}, completions compared: {comps_total}")
    for (path, fmt), v in sorted(rings_by.items()):
        print(f"  {path:6} {fmt:12} {v} rings")
    if a.selftest:
        print("selftest: corruptions detected: " + ", ".join(f"{k} {v}" for k, v in sorted(classes_selftest.items())))
    print("difference classes (rings showing each):" if classes else "no differences")
    for key, v in sorted(classes.items()):
        s = best.get(key, ((0, 0), {}))
        print(f"  {key}: {v} rings; smallest ring {s[0][0]} slots, {s[0][1]} written; e.g. {s[1].get('detail', '')}")
    return 1 if classes else 0


if __name__ == "__main__":
    sys.exit(main())
