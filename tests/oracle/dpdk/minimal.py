#!/usr/bin/env python3
"""Minimal hand-made rings, one per class of difference compare.py found,
polled by DPDK 22.11 (`rx_gen replay`) and by `mlx5dp decode cq --json`.
Only the ring bytes are made by hand here; both outputs are printed as the
two programs give them (a few fields selected, nothing retyped).

usage: minimal.py --rx-gen BUILD/rx_gen --tool TARGET/debug/mlx5dp
"""
import argparse, json, struct, subprocess, sys

INIT = bytes(63) + b"\xf1"      # mlx5_devx_cq_create's pattern: INVALID, owner 1


def ring_of(log_n, slots):
    n = 1 << log_n
    r = bytearray(INIT * n)
    for s, b in slots.items():
        r[(s % n) * 64:(s % n) * 64 + 64] = b
    return bytes(r)


def title(n, ci, log_n, sop_drop_qpn=0, hdr=(0, 0), rss=0):
    c = bytearray(64)
    c[12:16] = struct.pack(">I", rss)
    c[28], c[29] = hdr
    c[44:48] = struct.pack(">I", n)
    c[56:60] = struct.pack(">I", sop_drop_qpn)
    c[63] = 2 << 4 | 3 << 2 | (ci >> log_n) & 1     # RESP_SEND, compressed, owner
    return bytes(c)


def array(minis):
    a = bytearray(64)
    for i, m in enumerate(minis):
        a[8 * i:8 * i + 8] = m
    return bytes(a)


def l34h(b0, b1, length):
    return bytes([b0, b1, 0, 0]) + struct.pack(">I", length)


def ftag(tag, length):
    return struct.pack(">H", tag & 0xffff) + b"\0\0" + bytes([tag >> 16]) + struct.pack(">I", length)[1:]


def hashm(h, length):
    return struct.pack(">II", h, length)


CASES = [
    ("ci-after-high-bits (scalar): a session that ends at index 65536",
     "scalar", "hash", 3, 65534, 0,
     lambda: ring_of(3, {65534: title(2, 65534, 3, hdr=(7, 0x28)),
                         65535: array([hashm(0x11111111, 60), hashm(0x22222222, 61)])})),
    ("l34h-stridx (scalar): header type in mini byte 0 (mini 0) or byte 1 (mini 1); 0x29 = UDP, IPv4, CVLAN stripped",
     "scalar", "l34h-stridx", 3, 0, 0,
     lambda: ring_of(3, {0: title(2, 0, 3), 1: array([l34h(0x29, 0, 60), l34h(0, 0x29, 61)])})),
    ("l34h-stridx (vec): same session, 4 minis, CVLAN bit only in mini 0",
     "vec", "l34h-stridx", 5, 0, 0,
     lambda: ring_of(5, {0: title(4, 0, 5), 1: array([l34h(0x29, 0, 60), l34h(0x28, 0, 61),
                                                      l34h(0x28, 0, 62), l34h(0x28, 0, 63)])})),
    ("l34h-stridx (vec): 8 minis, CVLAN bit only in mini 3",
     "vec", "l34h-stridx", 5, 0, 0,
     lambda: ring_of(5, {0: title(8, 0, 5), 1: array([l34h(0x28, 0, 60 + i) if i != 3 else l34h(0x29, 0, 63)
                                                      for i in range(8)])})),
    ("ftag-stridx (vec, mark on): tags 5, 0, 0, 0xffffff (MLX5_FLOW_MARK_DEFAULT), then 0 x4",
     "vec", "ftag-stridx", 5, 0, 1,
     lambda: ring_of(5, {0: title(8, 0, 5), 1: array([ftag(t, 60 + i) for i, t in
                                                      enumerate([5, 0, 0, 0xffffff, 0, 0, 0, 0])])})),
    ("ftag-stridx (scalar, mark on): the same session",
     "scalar", "ftag-stridx", 3, 0, 1,
     lambda: ring_of(3, {0: title(8, 0, 3), 1: array([ftag(t, 60 + i) for i, t in
                                                      enumerate([5, 0, 0, 0xffffff, 0, 0, 0, 0])])})),
]


def flag_names(T, olf):
    names = [k for k in ("RSS_HASH", "FDIR", "FDIR_ID", "VLAN", "VLAN_STRIPPED", "IP_CKSUM_GOOD",
                         "L4_CKSUM_GOOD") if olf & T[k] == T[k]]
    return "|".join(names) or "0"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rx-gen", required=True)
    ap.add_argument("--tool", required=True)
    a = ap.parse_args()
    T = json.loads(subprocess.run([a.rx_gen, "tables"], capture_output=True, text=True, check=True).stdout)
    for name, path, fmt, log_n, ci, mark, mk in CASES:
        ring = mk()
        n = 1 << log_n
        print(f"=== {name}")
        print(f"ring: {n} slots of 64 B, ci {ci}; slots other than these hold {INIT.hex()[-4:]} (init pattern)")
        for s in range(n):
            b = ring[s * 64:s * 64 + 64]
            if b != INIT:
                print(f"  slot {s}: {b.hex()}")
        dp = subprocess.run([a.rx_gen, "replay", path, fmt, str(log_n), str(ci), str(mark)],
                            input=ring.hex(), capture_output=True, text=True)
        if dp.returncode:
            print("rx_gen failed:", dp.stderr)
            continue
        d = json.loads(dp.stdout)
        args = [a.tool, "decode", "cq", "--cqe-size", "64", "--cqe-cnt", str(n), "--ci", str(ci),
                "--layout", "basic", "--mini-format", fmt, "--json", "-"]
        t = subprocess.run(args, input=ring.hex(), capture_output=True, text=True)
        lines = [json.loads(l) for l in t.stdout.splitlines() if l.strip()]
        comps = [l for l in lines if list(l.keys()) != ["ci"]]
        fin = [l["ci"] for l in lines if list(l.keys()) == ["ci"]]
        print(f"DPDK {'mlx5_rx_burst_vec' if path == 'vec' else 'mlx5_rx_burst'}: {len(d['pkts'])} mbufs, cq_ci after {d['ci_after']}")
        for i, p in enumerate(d["pkts"]):
            print(f"  mbuf {i}: pkt_len {p[0]} ol_flags {flag_names(T, p[3])} packet_type {p[4]:#x}"
                  f" hash.rss {p[5]:#x} fdir.hi {p[6]:#x}")
        print(f"mlx5dp ({' '.join(args[1:])}): {len(comps)} completions, ci after {fin[0] if fin else None}")
        for c in comps:
            print(f"  slot {c['slot']}: byte_cnt {c['byte_cnt']} l4_l3_hdr_type {c['l4_l3_hdr_type']:#04x}"
                  f" cvlan_stripped {c['cvlan_stripped']} l3_ok {c['l3_ok']} l4_ok {c['l4_ok']}"
                  f" rx_hash {c['rx_hash']:#x} flow_tag {c['flow_tag']:#x} pkt_info {c['pkt_info']}"
                  f" -> DPDK table entry {T['ptype_table'][((c['pkt_info'] & 3) << 6) | (c['l4_l3_hdr_type'] >> 2)]:#x}")
        print()


if __name__ == "__main__":
    sys.exit(main())
