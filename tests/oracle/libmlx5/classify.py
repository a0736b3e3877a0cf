#!/usr/bin/env python3
"""classify.py CASES LOG [--pass]: sort the FAIL cases of a golden_wqe or
encode_golden log (run with --nocapture) of a send_gen file into the libmlx5
v44 behaviours they hit, from the case inputs (conditions derived from
rdma-core v44.0 providers/mlx5/qp.c; see SEND.md):
  A_wr_atomic_len    ibv_wr_atomic_* + an SGE of length != 0, 8 (qp.c:1640 vs 283)
  B_wr_eth_dup_hdr   raw ibv_wr_send + set_sge/set_inline_data of exactly 18 bytes
                     (qp.c:483-489 vs 1691, 1916)
  C_stale_sg_copy_ptr ibv_post_send raw list, TSO after a SEND that left
                     sg_copy_ptr != {0, 0} (qp.c:811, 1029-1046, 1093-1114)
  D_tso_wrap_in_list TSO header crossing the ring end, another WR after it
                     (qp.c:689 + 1045)
  E_...              encode_golden: no byte differs, but a TSO-wrap case must fail
--pass classifies the PASS cases instead (to see how specific the conditions are).
Prints one line per case and a count per class on stderr."""
import re, sys

def parse(path):
    cases, cur = {}, None
    for line in open(path):
        line = line.rstrip("\n")
        if line.startswith("case "):
            cur = {"name": line[5:], "_order": []}
        elif line == "end" and cur is not None:
            cases[cur["name"]] = cur; cur = None
        elif cur is not None and "=" in line and not line.startswith(("wqebb", "mask")):
            k, v = line.split("=", 1); cur[k] = v; cur["_order"].append(k)
    return cases

def n(c, k, d=0):
    v = c.get(k)
    return d if v is None else int(v, 0)

def classes(c):
    out = []
    api, t = c["api"], c["qp_type"]
    nwr = n(c, "nwr"); emi = n(c, "eth_min_inline"); cnt = n(c, "sq_wqe_cnt")
    # where each WR starts, from the out.sq_slot lines (posted WRs only)
    slots = [int(k[len("out.sq_slot"):]) for k in c["_order"] if k.startswith("out.sq_slot")]
    for i in range(nwr):
        op = n(c, f"wr{i}.opcode_num"); ns = n(c, f"wr{i}.num_sge")
        lens = [n(c, f"wr{i}.sge{j}.length") for j in range(ns)]
        setter = c.get(f"wr{i}.wr_api_setter", "")
        posted = i < len(slots)
        if api == "wr_api" and posted and op in (5, 6) and any(l not in (0, 8) for l in lens):
            out.append("A_wr_atomic_len")
        if (api == "wr_api" and posted and t == "RAW_PACKET" and op == 2 and emi == 18
                and setter in ("set_sge", "set_inline_data") and lens and lens[0] == 18):
            out.append("B_wr_eth_dup_hdr")
        if op == 10 and i < len(slots):
            hs = n(c, f"wr{i}.tso.hdr_sz")
            if slots[i] * 64 + 30 + hs > cnt * 64 and i + 1 < nwr:
                out.append("D_tso_wrap_in_list(hdr %d at slot %d)" % (hs, slots[i]))
    if api == "ibv_post_send" and t == "RAW_PACKET":
        idx, off = 0, 0
        for i in range(nwr):
            op = n(c, f"wr{i}.opcode_num"); ns = n(c, f"wr{i}.num_sge")
            lens = [n(c, f"wr{i}.sge{j}.length") for j in range(ns)]
            fl = n(c, f"wr{i}.send_flags_num")
            if op == 10:
                if (idx, off) != (0, 0) and ns and i < len(slots):
                    out.append("C_stale_sg_copy_ptr(idx %d off %d)" % (idx, off))
                for l in lens[idx:]:
                    if l:
                        off = 0; break
                continue
            if op != 2 or not ns:
                continue
            # copy_eth_inline_headers (qp.c 421-488)
            length = lens[0]
            if lens[0] >= 18:
                j, copy = 0, emi
            else:
                left, j, copy = emi, 0, 0
                while j < ns and left > 0:
                    copy = min(lens[j], left); left -= copy; length = lens[j]; j += 1
                if left:
                    break  # EINVAL: list stops
                if j: j -= 1
            if length == copy:
                j += 1; copy = 0
            idx, off = j, copy
            if not (fl & 8):
                for l in lens[idx:]:
                    if l:
                        off = 0; break
    return out

cases = parse(sys.argv[1])
log = open(sys.argv[2]).read()
fails = re.findall(r"^FAIL (\S+):", log, re.M)
if len(sys.argv) > 3:   # --pass: classify the passing cases instead
    fails = re.findall(r"^PASS (\S+)", log, re.M)
from collections import Counter
cnt = Counter()
empty = set(re.findall(r"^FAIL (\S+):\n  \n", log, re.M))
for f in fails:
    cl = classes(cases[f])
    if f in empty:   # encode_golden: no byte differs; a TSO-wrap case must "fail as explained"
        cl = ["E_no_mismatch_but_tso_wrap_expected_to_fail"] + cl
    key = ",".join(sorted(set(x.split("(")[0] for x in cl))) or "UNCLASSIFIED"
    cnt[key] += 1
    print(f, key, " ".join(cl))
print(cnt, file=sys.stderr)
