#!/usr/bin/env python3
"""Minimal hand-made ENHANCED-layout rings, one per new class of difference
compare_new.py found, polled by the recent DPDK (`rx_gen_new replay ...
enhanced`, a freshly fabricated queue: DPDK holds no title yet) and by
`mlx5dp decode cq --layout enhanced --json`.  Only the ring bytes are made
by hand; both outputs are printed as the programs give them (a few fields).

usage: minimal_new.py --rx-gen BUILD/rx_gen_new --tool TARGET/debug/mlx5dp
"""
import argparse, json, struct, subprocess, sys

INIT = bytes(62) + b"\xff\xf1"     # mlx5_cq_init: vic 0xff, op_own 0xf1


def ring_of(log_n, entries):
    n = 1 << log_n
    r = bytearray(INIT * n)
    for idx, b in entries.items():
        r[(idx % n) * 64:(idx % n) * 64 + 64] = b
    return bytes(r)


def regular(idx, log_n, length, pkt_info=0, hdr=(0, 0), rss=0, vlan=0, tag=0):
    c = bytearray(64)
    c[0] = pkt_info
    c[12:16] = struct.pack(">I", rss)
    c[28], c[29] = hdr
    c[30:32] = struct.pack(">H", vlan)
    c[44:48] = struct.pack(">I", length)
    c[56:60] = struct.pack(">I", tag)
    c[62] = (idx >> log_n) & 0xff
    c[63] = 2 << 4 | (idx >> log_n) & 1          # RESP_SEND, format 0, owner
    return bytes(c)


def compressed(idx, log_n, minis, fill=0):
    c = bytearray([fill] * 64)
    for i, m in enumerate(minis):
        c[8 * i:8 * i + 8] = m
    c[62] = (idx >> log_n) & 0xff
    c[63] = (len(minis) - 1) << 4 | 3 << 2 | (idx >> log_n) & 1
    return bytes(c)


def csum(length):
    return b"\0\0\0\0" + struct.pack(">I", length)


def l34h(b0, length):
    return bytes([b0, 0, 0, 0]) + struct.pack(">I", length)


def case_title():
    # 32 slots, ci 28: regular CQEs 28..31 (the last one is the title), then a
    # compressed CQE of 2 minis at index 32 = slot 0 of the next pass.
    e = {i: regular(i, 5, 100 + i, pkt_info=1, hdr=(7, 0x29), rss=0x1234, vlan=0x123)
         for i in range(28, 32)}
    e[32] = compressed(32, 5, [csum(60), csum(61)])
    return ring_of(5, e)


def case_l34h_pkt_info():
    # 32 slots, ci 0: the title (pkt_info 0) at 0, a compressed CQE at 1 whose
    # mini 0 has hdr_type 0x2b (IPv4 UDP | bits 1:0 = 3), mini 1 0x28.
    e = {0: regular(0, 5, 64, pkt_info=0, hdr=(7, 0x28))}
    e[1] = compressed(1, 5, [l34h(0x2b, 60), l34h(0x28, 61)])
    return ring_of(5, e)


def case_overrun():
    # 32 slots, ci 29: regular 29, 30, 31; then title 32 (slot 0) and
    # compressed CQEs at 33 (7 minis), 40 (7), 47 (7), 54 (6), 60 (1): 28
    # minis, the last one at slot 28.  Its group of 4 stores elts 28..31; 29..31
    # still hold the mbufs of indices 29..31, returned earlier in the same call.
    e = {i: regular(i, 5, 1000 + i) for i in (29, 30, 31)}
    e[32] = regular(32, 5, 500)
    at = 33
    for m in (7, 7, 7, 6, 1):
        e[at] = compressed(at, 5, [csum(200 + at + k) for k in range(m)], fill=0x11)
        at += m
    return ring_of(5, e)


def case_overrun_basic():
    # The same in the BASIC layout: 32 slots, ci 29, regular 29..31, then a
    # basic session of 29 minis (title at slot 0, arrays at 1, 8, 16, 24)
    # ending at slot 28; unused array entries are 0x11 bytes.
    n = 32
    r = bytearray((bytes(63) + b"\xf1") * n)
    for i in (29, 30, 31):
        c = bytearray(64)
        c[44:48] = struct.pack(">I", 1000 + i)
        c[63] = 2 << 4 | (i >> 5) & 1
        r[i * 64:i * 64 + 64] = c
    t = bytearray(64)
    t[44:48] = struct.pack(">I", 29)
    t[63] = 2 << 4 | 3 << 2 | 1
    r[0:64] = t
    k = 0
    for arr, cnt in ((1, 8), (8, 8), (16, 8), (24, 5)):
        a = bytearray([0x11] * 64)
        for j in range(cnt):
            a[8 * j:8 * j + 8] = csum(200 + k)
            k += 1
        r[arr * 64:arr * 64 + 64] = a
    return bytes(r)


CASES = [
    ("T: title_pkt not saved when the vector pass ends at the ring end; the next compressed CQE at slot 0 uses a zero title_pkt",
     "vec", "csum", 5, 28, 1, case_title),
    ("P: L34H vector: pkt_info taken from the compressed CQE's byte 0 (mini 0's hdr_type), not from the title",
     "vec", "l34h-stridx", 5, 0, 0, case_l34h_pkt_info),
    ("O: the last compressed CQE's group of 4 overwrites mbufs the same call already returned",
     "vec", "csum", 5, 29, 0, case_overrun),
    ("O (basic layout): a basic session of 29 minis ending at slot 28 overwrites the 3 mbufs returned first",
     "vec", "csum", 5, 29, 0, case_overrun_basic),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rx-gen", required=True)
    ap.add_argument("--tool", required=True)
    ap.add_argument("--rx-gen-22", help="also replay the basic-layout case on DPDK 22.11's rx_gen (RX.md)")
    a = ap.parse_args()
    for desc, path, fmt, log_n, ci, mark, mk in CASES:
        ring = mk().hex()
        layout = "basic" if "basic layout" in desc else "enhanced"
        r = subprocess.run([a.rx_gen, "replay", path, fmt, str(log_n), str(ci), str(mark), layout],
                           input=ring, capture_output=True, text=True)
        t = subprocess.run([a.tool, "decode", "cq", "--cqe-size", "64", "--cqe-cnt", str(1 << log_n),
                            "--ci", str(ci), "--layout", layout, "--mini-format", fmt, "--json", "-"],
                           input=ring, capture_output=True, text=True)
        if layout == "basic" and a.rx_gen_22:
            r22 = subprocess.run([a.rx_gen_22, "replay", path, fmt, str(log_n), str(ci), str(mark)],
                                 input=ring, capture_output=True, text=True)
            pk22 = [p[0] for p in json.loads(r22.stdout)["pkts"]]
        else:
            pk22 = None
        print(f"== {desc}\n   {path} {fmt} ring {1 << log_n} ci {ci} mark {mark}")
        if r.returncode:
            print("   rx_gen_new failed:", r.stderr.strip()[-300:])
            continue
        d = json.loads(r.stdout)
        print("   DPDK [pkt_len, data_len, nb_segs, ol_flags, packet_type, hash.rss, fdir.hi, vlan_tci, data, refcnt, data_off]:")
        for p in d["pkts"]:
            print("     ", p)
        print("   DPDK cq_ci after:", d["ci_after"])
        print("   mlx5dp (slot, compressed, byte_cnt, pkt_info, l4_l3_hdr_type, l3_ok, l4_ok, cvlan_stripped, vlan_info, rx_hash):")
        for l in t.stdout.splitlines():
            c = json.loads(l)
            if list(c) == ["ci"]:
                print("   mlx5dp ci after:", c["ci"])
                continue
            print("     ", [c[k] for k in ("slot", "compressed", "byte_cnt", "pkt_info", "l4_l3_hdr_type",
                                         "l3_ok", "l4_ok", "cvlan_stripped", "vlan_info", "rx_hash")])
        if t.returncode:
            print("   mlx5dp error:", t.stderr.strip())
        if pk22 is not None:
            print("   DPDK 22.11 (RX.md's rx_gen, Debian's librte_net_mlx5.a) on the same ring, pkt_len:", pk22)
    return 0


if __name__ == "__main__":
    sys.exit(main())
