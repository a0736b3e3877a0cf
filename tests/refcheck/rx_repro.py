#!/usr/bin/env python3
"""Picks, from cases rx_gen.py generates, the smallest one for each way the
replay (tests/tests/golden_rx.rs) had to map DPDK's outputs onto mlx5dp's
API, and writes them to rx-repro-cases.txt (replayed by golden_rx's
`model_repro_rx_cases`). Outputs come from rx_model.py, not the real PMD.

Usage: rx_repro.py OUT [SEEDS...]   (default seeds 1..6, 400 cases each)
"""

import random
import sys

import rx_gen as G


def has_vlan_profile(kv):
    return ":p8" in kv["cfg.plan"] or any(
        t.startswith("rm") and int(t[2:].split("@")[0]) >= 9 for t in kv["cfg.plan"].split())


FLAGS = {"cfg.crc_present": "0", "cfg.rss_hash": "1", "cfg.csum": "1", "cfg.vlan_strip": "1"}


def base(kv, *except_):
    """Every queue flag at its usual value but those named."""
    lead = kv["layout"] == "enhanced" and kv["cfg.warmup"] != "0" and kv["cfg.plan"].startswith("s")
    if lead and "lead" not in except_:
        return False
    return all(kv.get(k, v) == v for k, v in FLAGS.items() if k not in except_)


def vec_only(res):
    return list(res) == ["vec"]


CLASSES = [
    ("crc_present: DPDK subtracts the FCS", lambda kv, res: kv["cfg.crc_present"] == "1" and base(kv, "cfg.crc_present")),
    ("rss_hash off: DPDK reports no hash", lambda kv, res: kv["cfg.rss_hash"] == "0" and base(kv, "cfg.rss_hash")),
    ("csum off: the scalar path reports no checksum flags",
     lambda kv, res: kv["cfg.csum"] == "0" and "scalar" in res and base(kv, "cfg.csum")),
    ("vlan_strip off: the scalar path reports no VLAN",
     lambda kv, res: kv["cfg.vlan_strip"] == "0" and has_vlan_profile(kv) and "scalar" in res
     and base(kv, "cfg.vlan_strip")),
    ("striding RQ: VLAN flag without a TCI key",
     lambda kv, res: kv.get("rq_type") == "mprq" and kv["cfg.vlan_strip"] == "1"
     and ":p8" in kv["cfg.plan"] and "scalar" in res and base(kv)),
    ("striding RQ: a fully consumed WQE counted as 0 by DPDK",
     lambda kv, res: "scalar" in res and kv.get("rq_type") == "mprq"
     and res["scalar"][1].get("out.consumed_strd") == "0" and kv["in.packets"] != "0"
     and base(kv)),
    ("enhanced: a compressed CQE right after the warm-up (title from it)",
     lambda kv, res: kv["layout"] == "enhanced" and kv["cfg.warmup"] != "0"
     and kv["cfg.plan"].startswith("s") and base(kv, "lead")),
    ("vector-only: DPDK's per-call counts (4-aligned bursts)",
     lambda kv, res: vec_only(res) and any(
         v.split()[0][4:] != v.split()[1][4:] for k, v in res["vec"][1].items()
         if k.startswith("call.")) and base(kv)),
    ("vector-only: DPDK's doorbell record behind its cq_ci",
     lambda kv, res: vec_only(res) and int(res["vec"][1]["out.cq_dbrec"], 16)
     != int(res["vec"][1]["out.cq_ci"]) and base(kv)),
]


def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 2
    seeds = [int(x) for x in argv[2:]] or list(range(1, 13))
    best = {}
    for seed in seeds:
        rnd = random.Random(seed)
        for i in range(400):
            kind = rnd.choice(["sprq", "sprq", "sprq", "mprq"])
            r = G.make_case(rnd, "x", kind)
            if r is None:
                continue
            kv, res = r
            size = int(kv["in.packets"]) + len(kv["cfg.plan"])
            for ci, (what, pred) in enumerate(CLASSES):
                if pred(kv, res) and (ci not in best or size < best[ci][0]):
                    best[ci] = (size, seed, i, kv, res)
    with open(argv[1], "w") as f:
        f.write("# Model repro cases for tests/tests/golden_rx.rs (written by\n"
                "# tests/refcheck/rx_repro.py): outputs from rx_model.py, the model of\n"
                "# DPDK 26.07's mlx5 Rx bursts (not the real PMD); CQE bytes from rx_gen.py.\n"
                "# Each case is the smallest generated one needing one of the replay's\n"
                "# mappings (named in its desc).\n")
        f.write("ncases=%d\n\n" % len(best))
        for ci in sorted(best):
            size, seed, i, kv, res = best[ci]
            kv = dict(kv)
            kv["desc"] = "%s (rx_gen seed %d case %d)" % (CLASSES[ci][0], seed, i)
            G.write_case(f, "repro_%d" % ci, kv, res)
            print("repro_%d: %s: seed %d case %d, %d packets" % (ci, CLASSES[ci][0], seed, i,
                                                               int(kv["in.packets"])))
    missing = [CLASSES[c][0] for c in range(len(CLASSES)) if c not in best]
    if missing:
        print("no case for:", missing)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
