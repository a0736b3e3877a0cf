#!/usr/bin/env python3
"""Compare `mlx5dp decode cq` with a recent DPDK's own mlx5 Rx burst code
(DPDK 26.07 + 4 commits, built from source by build-rx-new.sh) on random CQ
rings in the basic or the ENHANCED compression layout (see RX-ENHANCED.md).
This is compare.py (the DPDK 22.11 driver, RX.md) with a --layout option:
the layout goes to rx_gen_new and to `mlx5dp decode cq --layout`, and the
final index is compared modulo 2^24 as well (rxq->cq_ci is a 24-bit field
in this DPDK, mlx5_rx.h:133).  The mapping below is unchanged; the line
numbers are those of DPDK 22.11 (RX.md), RX-ENHANCED.md gives the recent
tree's.

usage: compare_new.py --rx-gen BUILD/rx_gen_new --tool TARGET/debug/mlx5dp
                  [--layout basic|enhanced] [--seeds 1,2,3] [--configs N]
                  [--mprq-configs M] [--rounds R] [--out DIR] [--selftest]

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

# What this script shares with compare.py, the DPDK 22.11 check: the
# formats, the configurations, the field expectations and the selftest's
# mutations are the same; the ring comparison and the tool call differ.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import (FMTS, MPRQ_FMTS, MUTATIONS, expect, le32,  # noqa: E402
                     sample_configs, sample_mprq_configs)
from compare import classes_selftest  # noqa: E402  (the selftest's tally)
from compare import selftest_ring as _selftest_ring  # noqa: E402


def selftest_ring(T, d, comps, fin, err, classes):
    return _selftest_ring(T, d, comps, fin, err, classes, compare=compare_ring)


def run_tool(tool, ring_hex, n, ci, fmt, striding=False, layout="basic"):
    args = [tool, "decode", "cq", "--cqe-size", "64", "--cqe-cnt", str(n), "--ci", str(ci),
            "--layout", layout, "--mini-format", fmt, "--json", "-"]
    if striding:
        args.insert(-2, "--striding-rq")
    p = subprocess.run(args, input=ring_hex, capture_output=True, text=True)
    lines = [json.loads(l) for l in p.stdout.splitlines() if l.strip()]
    comps = [l for l in lines if list(l.keys()) != ["ci"]]
    fin = [l["ci"] for l in lines if list(l.keys()) == ["ci"]]
    return comps, (fin[0] if fin else None), (p.stderr.strip() if p.returncode else None), args


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
        # rxq->cq_ci is 24 bits wide in this DPDK (mlx5_rx.h:133), as the
        # CQ doorbell record's counter; mlx5dp keeps 32
        cls = ("ci-after-24bit" if fin is not None and (fin - d["ci_after"]) % (1 << 24) == 0 else
               "ci-after-high-bits" if fin is not None and (fin - d["ci_after"]) % 65536 == 0 else "ci-after")
        diffs.append((cls, f"dpdk cq_ci {d['ci_after']}, mlx5dp ci {fin}"))
    allflags = (T["RSS_HASH"] | T["FDIR"] | T["FDIR_ID"] | T["VLAN"] | T["VLAN_STRIPPED"]
                | T["IP_CKSUM_MASK"] | T["L4_CKSUM_MASK"])
    for i, (p, c) in enumerate(zip(pk, comps)):
        plen, dlen, segs, olf, pt, rss, fdir, vtci, data, refcnt, doff = p
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
        if refcnt != 1 or doff != T["HEADROOM"]:
            bad("dpdk-mbuf-rearm", ("refcnt", refcnt, "data_off", doff), ("refcnt", 1, "data_off", T["HEADROOM"]))
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
    ap.add_argument("--layout", default="basic", choices=["basic", "enhanced"])
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
            args = [a.rx_gen, str(cseed), path, fmt, str(log_n), str(ci0), str(mark), str(a.rounds),
                    a.layout]
            p = subprocess.run(args, capture_output=True, text=True)
            if p.returncode != 0:
                classes[f"{a.layout}/{path}/{fmt}/rx_gen-crash"] += 1
                print("rx_gen failed:", " ".join(args), p.stderr.strip()[-400:], file=sys.stderr)
            for line in p.stdout.splitlines():
                try:
                    d = json.loads(line)
                except ValueError:      # the line rx_gen was printing when it failed
                    classes[f"{a.layout}/{path}/{fmt}/rx_gen-partial-line"] += 1
                    continue
                n = 1 << d["log_n"]
                assert d["layout"] == a.layout
                comps, fin, err, targs = run_tool(a.tool, d["ring"], n, d["ci"], fmt,
                                                  path.startswith("mprq"), a.layout)
                rings += 1
                rings_by[(path, fmt)] += 1
                comps_total += len(comps)
                diffs = compare_ring(T, d, comps, fin, err)
                if a.selftest and not err:
                    selftest_ring(T, d, comps, fin, err, classes)
                seen = set()
                for cls, detail in diffs:
                    key = f"{a.layout}/{path}/{fmt}/{cls}"
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
