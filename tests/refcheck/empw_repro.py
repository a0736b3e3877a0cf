#!/usr/bin/env python3
"""Writes empw-repro-cases.txt: hand-picked cases, in the format of
specs/golden/dpdk/empw-cases.txt, whose outputs come from the independent
model empw_model.py (NOT from the real PMD). Each one reproduces a place
where mlx5dp disagreed with DPDK 26.07 (see each case's desc).

  python3 tests/refcheck/empw_repro.py > tests/refcheck/empw-repro-cases.txt
"""
import random
import sys

import empw_gen as eg
import empw_model as em

CS = 0x00F0000000000000  # IPv4 + IP + UDP checksum

# name, func, desc, start, bursts (list of [(len, ol_flags)])
CASES = [
    ("none_empw_short_frames", "none_empw",
     "pointer eMPW takes frames of <= 18 bytes (mlx5_tx_burst_empw_simple has no length test)",
     0, [[(64, 0), (12, 0), (18, 0), (1, 0), (60, 0)]]),
    ("sc_empw_short_frames_csum", "sc_empw",
     "pointer eMPW + csum, short frames with and without csum flags",
     250, [[(14, CS), (14, CS), (17, 0), (200, 0), (9, CS)]]),
    ("none_mpw_short_frames", "none_mpw",
     "legacy MPW pointer sessions of 10-byte frames (6 per session)",
     0, [[(10, 0)] * 8]),
    ("i_empw_b40_f256_one_cqe", "i_empw",
     "inline eMPW, 40 x 256B: 186 WQEBBs in one burst, one CQE request at its end (none at half the ring)",
     0, [[(256, 0)] * 40]),
    ("i_mpw_b40_f200_one_cqe", "i_mpw",
     "legacy MPW inline, 40 x 200B: 160 WQEBBs in one burst, one CQE request at its end",
     100, [[(200, 0)] * 40]),
    ("i_empw_short_first", "i_empw",
     "inline eMPW, a 12-byte frame first: nothing sent, DPDK's title (DS 0) left at wqe_ci",
     7, [[(12, 0), (64, 0)]]),
    ("sci_empw_short_mid_session", "sci_empw",
     "inline eMPW + csum, a 10-byte frame after two: session closed, title of the refused frame after it",
     0, [[(64, CS), (64, CS), (10, CS), (64, CS)]]),
    ("mci_mpw_short_18", "mci_mpw",
     "legacy MPW inline + csum, an 18-byte frame: title with mss 18 after the session",
     254, [[(64, CS), (64, CS), (18, CS)]]),
    ("i_empw_ptr_then_inline_cqe", "i_empw",
     "inline eMPW, 1500B then 31 x 28B: DPDK keeps all 32 mbufs (the first is by pointer), CQE at 32",
     0, [[(1500, 0)] + [(28, 0)] * 31]),
    ("sci_empw_kept_across_bursts", "sci_empw",
     "inline eMPW + csum: 20 then 12 mbufs kept (leading inline ones freed), CQE at the second burst's end",
     0, [[(600, CS)] + [(40, CS)] * 19, [(40, CS)] * 5 + [(700, CS)] + [(40, CS)] * 11]),
    ("i_empw_short_then_burst", "i_empw",
     "inline eMPW, burst 0 stops at a 5-byte frame (title left), burst 1 builds its session over it",
     0, [[(64, 0), (5, 0)], [(64, 0), (64, 0), (64, 0)]]),
]


def main():
    rnd = random.Random(7)
    out = []
    for name, func, desc, start, bursts in CASES:
        olx = em.FUNCS[func]
        inline = bool(olx & em.INLINE)
        c, order = {}, []

        def put(k, v):
            c[k] = v
            order.append((k, v))
        put("case", name)
        put("desc", "%s, start %d" % (desc, start))
        put("dpdk", "DPDK 26.07.0 (model)")
        put("func", "mlx5_tx_burst_" + func)
        put("olx", "0x%04x" % olx)
        for k, v in [("wqe_n", 8), ("elts_n", 8), ("cqe_n", 5),
                     ("inlen_send", 290 if inline else 0),
                     ("inlen_empw", 268 if inline else 0), ("inlen_mode", 0),
                     ("wqe_thres", 32), ("qp_num_8s", "0x000d0e00"),
                     ("lkey", "0x00c0ffee"), ("db_nc", 0), ("db_heu", 0),
                     ("vlan_en", 0), ("fast_free", 0), ("offloads", "0x0")]:
            put("cfg." + k, str(v))
        put("bursts", str(len(bursts)))
        pk = 0
        bl = []
        for b in bursts:
            pkts = []
            for ln, fl in b:
                l2, l3, l4 = (14, 20, 8) if fl else (0, 0, 0)
                pkts.append((ln, fl, l2, l3, l4, eg.MBUF_BASE + pk * 0x1000,
                             eg.frame(ln, rnd, pk + 1)))
                pk += 1
            bl.append(pkts)
        t = eg.emit(c, order, bl)
        assert t is not None
        out.append(t)
    sys.stdout.write(eg.HEADER.format(seed="none: hand-picked, empw_repro.py",
                                      n=len(out)))
    for t in out:
        sys.stdout.write("\n" + t)


if __name__ == "__main__":
    main()
