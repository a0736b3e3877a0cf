#!/usr/bin/env python3
"""Test, on every ring compare.py would run, a hypothesis about each class of
difference found between DPDK 22.11 and `mlx5dp decode cq` (see RX.md).

usage: explain.py --rx-gen BUILD/rx_gen [--seeds 1,2,3] [--configs N] [--rounds R]

It walks each ring on its own (basic layout: title + arrays at t+1, t+8k),
so that every mbuf DPDK returned is tied to the raw bytes of its title and
mini-CQE, then counts, per hypothesis, the mbufs that follow it and the
ones that do not.  A hypothesis "holds" only with zero exceptions.
"""
import argparse, json, subprocess, sys
from collections import Counter
from compare import sample_configs, sample_mprq_configs


COV = Counter()


def walk(ring, n, ci, count, mprq=False):
    """[(title bytes, mini bytes or None, session index, index in session)]"""
    out, s, start = [], 0, ci
    COV["rings"] += 1
    while len(out) < count:
        c = ring[(ci % n) * 64:(ci % n) * 64 + 64]
        if (c[63] >> 2) & 3 == 3:
            cnt = int.from_bytes(c[44:48], "big")
            COV["sessions"] += 1
            COV["minis"] += cnt
            COV["max session length"] = max(COV["max session length"], cnt)
            COV["sessions of 2..8 minis (one array)"] += cnt <= 8
            COV["sessions of more than 8 (several arrays)"] += cnt > 8
            COV["sessions of more than 64"] += cnt > 64
            COV["sessions crossing the ring end"] += (ci % n) + cnt > n
            for i in range(cnt):
                a = ci + 1 if i < 8 else ci + (i // 8) * 8
                arr = ring[(a % n) * 64:(a % n) * 64 + 64]
                out.append((c, arr[(i % 8) * 8:(i % 8) * 8 + 8], s, i))
            ci += cnt
            s += 1
        elif mprq and c[44] & 0x80:
            COV["MPRQ filler CQEs (no packet)"] += 1   # MLX5_MPRQ_FILLER_MASK
            ci += 1
        else:
            out.append((c, None, None, None))
            COV["regular CQEs"] += 1
            ci += 1
    if (start % n) + (ci - start) > n:
        COV["rings whose consumed part crosses the ring end"] += 1
    return out[:count]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rx-gen", required=True)
    ap.add_argument("--seeds", default="1")
    ap.add_argument("--configs", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--mprq-configs", type=int, default=0)
    a = ap.parse_args()
    T = json.loads(subprocess.run([a.rx_gen, "tables"], capture_output=True, text=True, check=True).stdout)
    VL = T["VLAN"] | T["VLAN_STRIPPED"]
    res = Counter()
    for seed in [int(s) for s in a.seeds.split(",")]:
        cfgs = sample_configs(seed, a.configs) + sample_mprq_configs(seed, a.mprq_configs)
        for k, (path, fmt, log_n, ci0, mark) in enumerate(cfgs):
            args = [a.rx_gen, str(seed * 100003 + k), path, fmt, str(log_n), str(ci0), str(mark), str(a.rounds)]
            p = subprocess.run(args, capture_output=True, text=True)
            for line in p.stdout.splitlines():
                d = json.loads(line)
                n = 1 << d["log_n"]
                ring = bytes.fromhex(d["ring"])
                w = walk(ring, n, d["ci"], len(d["pkts"]), path.startswith("mprq"))
                COV[f"{path} rings"] += 1
                COV["rings at ci >= 2^16"] += d["ci"] >= 1 << 16
                COV["rings on pass >= 2"] += d["ci"] >> d["log_n"] >= 2
                # H-ci: DPDK's final cq_ci is the true index modulo 2^16
                # after a session (struct rxq_zip.cq_ci is uint16_t).
                true_ci = (d["ci"] + d["written"]) & 0xffffffff
                if path in ("scalar", "mprq"):
                    key = "H-ci16 scalar/mprq: cq_ci == true ci mod 2^16"
                    res[(key, d["ci_after"] % 65536 == true_ci % 65536)] += 1
                    if d["ci_after"] != true_ci:
                        res[("H-ci16 scalar/mprq: differs only after a session", any(x[1] is not None for x in w))] += 1
                else:
                    res[("H-ci vec: cq_ci == true ci (32 bits)", d["ci_after"] == true_ci)] += 1
                # group the minis of each session by 4 (the SSE loop)
                for j, (pk, (t, m, s, i)) in enumerate(zip(d["pkts"], w)):
                    olf, pt = pk[3], pk[4]
                    if m is None:
                        continue
                    if fmt == "l34h-stridx":
                        pinfo = (t[0] & 3) << 6
                        if path in ("scalar", "mprq"):
                            res[("H-l34h scalar/mprq ptype from mini byte 1", pt == T["ptype_table"][pinfo | m[1] >> 2])] += 1
                            res[("H-l34h scalar/mprq ptype from mini byte 0", pt == T["ptype_table"][pinfo | m[0] >> 2])] += 1
                            res[("H-l34h scalar/mprq VLAN never set on minis", olf & VL == 0)] += 1
                        else:
                            res[("H-l34h vec ptype from mini byte 0", pt == T["ptype_table"][pinfo | m[0] >> 2])] += 1
                            # SSE: pkt_cv = _mm_set_epi32(h0, h1, h2, h3) puts
                            # h3 in lane 0 (reversed), and ol_flags is ORed
                            # over every group of the session, never cleared.
                            sess = [x for x in w if x[2] == s]
                            g, lane = i // 4, i % 4
                            own = m[0] & 1
                            rev = 0
                            for gg in range(g + 1):
                                q = gg * 4 + (3 - lane)
                                mm = sess[q][1] if q < len(sess) else arr_entry(ring, n, d, sess, q)
                                rev |= mm[0] & 1
                            res[("H-l34h vec VLAN = own mini bit 0", bool(olf & VL) == bool(own))] += 1
                            res[("H-l34h vec VLAN = OR over groups<=g of lane 3-j bit 0", bool(olf & VL) == bool(rev))] += 1
                    if fmt == "ftag-stridx" and mark and path in ("vec", "mprq-vec"):
                        sess = [x for x in w if x[2] == s]
                        g, lane = i // 4, i % 4
                        tag = lambda mm: mm[4] << 16 | mm[0] << 8 | mm[1]
                        own = tag(m) != 0
                        acc = False
                        for gg in range(g + 1):
                            q = gg * 4 + lane
                            mm = sess[q][1] if q < len(sess) else arr_entry(ring, n, d, sess, q)
                            acc |= tag(mm) != 0
                        res[("H-ftag vec FDIR = own tag != 0", bool(olf & T["FDIR"]) == own)] += 1
                        res[("H-ftag vec FDIR = OR over groups<=g, same lane", bool(olf & T["FDIR"]) == acc)] += 1
                        res[("H-ftag vec FDIR_ID == FDIR (default mark not excluded)",
                             bool(olf & T["FDIR_ID"]) == bool(olf & T["FDIR"]))] += 1
    print("coverage:", ", ".join(f"{k} {v}" for k, v in COV.items()))
    hyps = sorted({h for h, _ in res})
    for h in hyps:
        yes, no = res[(h, True)], res[(h, False)]
        print(f"{'HOLDS ' if no == 0 else 'fails '} {h}: {yes} follow, {no} do not")


def arr_entry(ring, n, d, sess, q):
    """Entry q of the session's mini arrays beyond its last mini (the SSE
    loop reads whole groups of 4): the title's arrays at t+1, t+8k."""
    # the title index: the session's first packet sits at the title slot
    t_bytes = sess[0][0]
    # find the title slot by content (sessions are distinct random titles)
    for ti in range(n):
        if ring[ti * 64:ti * 64 + 64] == t_bytes:
            a = ti + 1 if q < 8 else ti + (q // 8) * 8
            arr = ring[(a % n) * 64:(a % n) * 64 + 64]
            return arr[(q % 8) * 8:(q % 8) * 8 + 8]
    raise RuntimeError("title not found")


if __name__ == "__main__":
    sys.exit(main())
