#!/usr/bin/env python3
"""Checks `mlx5dp decode wqe` against the WQEs libmlx5 wrote.

Reads a send-side case file in the format of
specs/golden/libmlx5/wqe-cases.txt (the golden file, or the output of
`send_ref.py gen N SEED`), cuts every posted WQE out of the listed WQEBBs
the way the device reads it (control segment at the producer index, ds * 16
bytes, continuing at WQEBB 0 past the ring end), runs
`mlx5dp decode wqe --json` on it, and compares every field the tool prints
with what the work request put there.

The expectations come from the case's inputs (opcode, flags, immediate,
remote address, SGEs and their bytes, UD address vector, TSO header) and
the segment layouts of the PRM as the public headers give them (rdma-core
mlx5dv.h / kernel include/linux/mlx5/qp.h: control, raddr, atomic, UD
address vector, Ethernet, data and inline segments; libmlx5 qp.c for what it
puts where). Not from mlx5dp's code: only the JSON key names of
`decode wqe` are mapped here. Bytes libmlx5 leaves unwritten (the immediate
of a plain wr_* send, the compare half of a fetch-and-add, the mkey context
of a LOCAL_INV beyond free/qpn/mkey) are not compared.

Each WQE is decoded three ways: whole WQEBBs with the QP type inferred,
whole WQEBBs with --qp, and exactly ds * 16 bytes with the type inferred.

Usage:
  decode_wqe_check.py FILE... --tool PATH [-v] [--max-report N]

Exit status 1 if any field disagrees, the tool fails, a WQE cannot be cut
out of the case, or the inferred QP type is not the case's; the known
libmlx5 deviations (README.md: tso_wrap, driver1) are counted as gaps and
do not fail.
"""

import argparse
import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

# ibv_wr_opcode
WR_RDMA_WRITE, WR_RDMA_WRITE_IMM, WR_SEND, WR_SEND_IMM, WR_RDMA_READ = 0, 1, 2, 3, 4
WR_CAS, WR_FAA, WR_LOCAL_INV, WR_BIND_MW, WR_SEND_INV, WR_TSO, WR_DRIVER1 = range(5, 12)

# libmlx5 qp.c mlx5_ib_opcode[] -> MLX5_OPCODE_* (mlx5dv.h), and the
# PRM names of those opcodes.
MLX5_OPCODE = {
    WR_SEND: 0x0a, WR_SEND_INV: 0x01, WR_SEND_IMM: 0x0b, WR_RDMA_WRITE: 0x08,
    WR_RDMA_WRITE_IMM: 0x09, WR_RDMA_READ: 0x10, WR_CAS: 0x11, WR_FAA: 0x12,
    WR_BIND_MW: 0x25, WR_LOCAL_INV: 0x25, WR_TSO: 0x0e, WR_DRIVER1: 0x25,
}
OPCODE_NAME = {
    0x0a: "send", 0x01: "send_inv", 0x0b: "send_imm", 0x08: "rdma_write",
    0x09: "rdma_write_imm", 0x10: "rdma_read", 0x11: "atomic_cs", 0x12: "atomic_fa",
    0x25: "umr", 0x0e: "tso",
}
# fm_ce_se[7:5]: kernel enum mlx5_fence_mode; [3:2]: enum mlx5_completion_mode
FM_NAME = {0: "none", 1: "initiator_small", 2: "fence", 3: "strong_ordering",
           4: "small_and_fence"}
CE_NAME = {0: "only_err", 1: "only_first_err", 2: "always", 3: "always_and_eqe"}

# ibv_send_flags
F_FENCE, F_SIGNALED, F_SOLICITED, F_INLINE, F_IP_CSUM = 1, 2, 4, 8, 16
# mlx5dv.h
CTRL_CQ_UPDATE, CTRL_SOLICITED = 0x08, 0x02
CTRL_FENCE, CTRL_INITIATOR_SMALL_FENCE = 0x80, 0x20
ETH_L3_CSUM, ETH_L4_CSUM = 0x40, 0x80
# struct mlx5_wqe_umr_ctrl_seg flags and mkey mask libmlx5's set_bind_wr uses
UMR_CTRL_INLINE, UMR_CTRL_CHECK_FREE, UMR_CTRL_TRANSLATION_OFFSET, UMR_CTRL_CHECK_QPN = \
    0x80, 0x20, 0x10, 0x08
UMR_MKEY_MASK_FREE, UMR_MKEY_MASK_QPN, UMR_MKEY_MASK_MKEY = 1 << 29, 1 << 14, 1 << 13

QP_NAME = {"RC": "rc", "UD": "ud", "RAW_PACKET": "raw", "UC": "uc", "XRC": "xrc"}
SKIP = object()
# top-level keys compared apart from the control segment's fields
TOP_KEYS = ("qp_type", "qp_type_source", "qp_type_reason", "ds", "wqebbs", "len",
            "segments", "trailing_bytes", "warnings")  # a field the work request does not determine


def ceil16(n):
    return (n + 15) // 16 * 16


def be_int(b):
    return int.from_bytes(b, "big")


def mac(b):
    return ":".join("%02x" % x for x in b)


def gid(b):
    return ":".join(b[i:i + 2].hex() for i in range(0, 16, 2))


# ------------------------------------------------------------------ input
def parse_file(path):
    cases = []
    cur = None
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            if line.startswith("case "):
                cur = {"name": line[5:].strip(), "kv": {}, "wqebb": {}}
            elif line == "end":
                cases.append(cur)
                cur = None
            elif cur is None:
                continue
            elif line.startswith("wqebb "):
                _, idx, hx = line.split()
                cur["wqebb"][int(idx)] = bytes.fromhex(hx)
            elif line.startswith("mask "):
                continue
            elif "=" in line:
                k, v = line.split("=", 1)
                cur["kv"][k] = v
    return cases


def num(v):
    return int(v, 0)


def wrs_of(kv):
    wrs = []
    for i in range(num(kv["nwr"])):
        p = "wr%d." % i
        w = {"op": num(kv[p + "opcode_num"]), "flags": num(kv[p + "send_flags_num"]), "sges": []}
        for key in ("imm_data_host", "invalidate_rkey", "remote_addr", "rkey", "compare_add",
                    "swap", "ud.remote_qpn", "ud.remote_qkey", "tso.mss", "tso.hdr_sz"):
            if p + key in kv:
                w[key] = num(kv[p + key])
        for key in ("ud.ah_av", "tso.hdr"):
            if p + key in kv:
                w[key] = bytes.fromhex(kv[p + key])
        w["setter"] = kv.get(p + "wr_api_setter", "none")
        for j in range(num(kv.get(p + "num_sge", "0"))):
            q = p + "sge%d." % j
            s = {"addr": num(kv[q + "addr"]), "length": num(kv[q + "length"]),
                 "lkey": num(kv[q + "lkey"])}
            if q + "data" in kv:
                s["data"] = bytes.fromhex(kv[q + "data"])
            w["sges"].append(s)
        wrs.append(w)
    return wrs


# ------------------------------------------------------------------ expectations
class Unmodelled(Exception):
    """The case needs bytes the file does not give (an SGE's data)."""


def sge_bytes(s, off=0):
    if s["length"] - off <= 0:
        return b""
    if "data" not in s:
        raise Unmodelled("no data for an inlined SGE")
    return s["data"][off:s["length"]]


def data_seg(length, lkey, addr):
    return ("data", 16, {"byte_count": length, "lkey": lkey, "addr": addr & (2**64 - 1)})


def inline_seg(data):
    return ("inline", ceil16(4 + len(data)), {"byte_count": len(data), "data": data.hex()})


def skip_header(sges, n):
    """(index, offset) after the first n bytes of the frame the SGEs form,
    and those n bytes: libmlx5's copy_eth_inline_headers inlines the first
    eth_min_inline bytes into the Ethernet segment and sends the rest."""
    hdr = b""
    i = 0
    off = 0
    left = n
    while left and i < len(sges):
        take = min(sges[i]["length"], left)
        if take:
            hdr += sge_bytes(sges[i])[:take]
        left -= take
        if take == sges[i]["length"]:
            i += 1
            off = 0
        else:
            off = take
    return i, off, hdr


def data_after(sges, i, off, inline, atomic=False):
    """The data or inline segments libmlx5 writes for SGEs i.. (the first at
    offset off): zero-length pieces get no segment; an inline list is one
    segment (none if empty); an atomic's data segment counts 8 bytes."""
    if inline:
        data = b"".join(sge_bytes(s, off if k == i else 0)
                        for k, s in enumerate(sges) if k >= i)
        return [inline_seg(data)] if data else []
    out = []
    for k in range(i, len(sges)):
        s = sges[k]
        o = off if k == i else 0
        if s["length"] - o <= 0:
            continue
        out.append(data_seg(8 if atomic else s["length"] - o, s["lkey"], s["addr"] + o))
    return out


def wr_api_data(w, sges, i=0, off=0):
    """The data segments the wr_* setter writes."""
    st = w["setter"]
    if st == "none":
        return []
    if st == "set_sge":
        return data_after(sges[:1], i, off, False)
    if st == "set_sge_list":
        return data_after(sges, i, off, False)
    if st == "set_inline_data":
        return data_after(sges[:1], i, off, True)
    if st == "set_inline_data_list":
        return data_after(sges, i, off, True)
    raise Unmodelled("setter " + st)


def av_seg(w):
    av = bytearray(w["ud.ah_av"])
    av[0:4] = w["ud.remote_qkey"].to_bytes(4, "big")
    av[8:12] = (w["ud.remote_qpn"] | 0x80000000).to_bytes(4, "big")
    qkey, res = be_int(av[0:4]), be_int(av[4:8])
    dqp = be_int(av[8:12])
    srsl, flm = av[12], av[13]
    rmac = bytes(av[20:26])
    roce = any(rmac)  # mlx5_create_ah fills rmac only for an Ethernet port
    gfl = be_int(av[28:32])
    f = {"qkey": qkey, "key_reserved": res, "dc_key": (qkey << 32) | res,
         "dqp_dct": dqp & 0xffffff, "extended": bool(dqp >> 31),
         "link": "roce" if roce else "ib", "link_source": SKIP,
         "stat_rate": srsl >> 4, "sl": (srsl >> 1) & 7 if roce else srsl & 0xf,
         "fl": bool(flm & 0x80), "mlid": flm & 0x7f,
         ("udp_sport" if roce else "rlid"): be_int(av[14:16]),
         "rmac": mac(rmac), "tclass": av[26], "hop_limit": av[27],
         "grh": bool(gfl >> 30 & 1), "sgid_index": gfl >> 20 & 0xff,
         "flow_label": gfl & 0xfffff, "rgid": gid(bytes(av[32:48]))}
    return ("av", 48, f)


def eth_seg(csum, mss, hdr):
    f = {"swp_outer_l4_offset": 0, "swp_outer_l3_offset": 0, "swp_inner_l4_offset": 0,
         "swp_inner_l3_offset": 0, "cs_flags": (ETH_L3_CSUM | ETH_L4_CSUM) if csum else 0,
         "l3_csum": csum, "l4_csum": csum, "l3_inner_csum": False, "l4_inner_csum": False,
         "swp_flags": 0, "swp_outer_l3_ipv6": False, "swp_outer_l4_udp": False,
         "swp_inner_l3_ipv6": False, "swp_inner_l4_udp": False, "mss": mss,
         "flow_table_metadata": 0, "inline_hdr_sz": len(hdr), "vlan_insert": False,
         "inline_hdr": hdr.hex()}
    if len(hdr) >= 14:
        f["inline_hdr_dmac"] = mac(hdr[0:6])
        f["inline_hdr_smac"] = mac(hdr[6:12])
        f["inline_hdr_ethertype"] = be_int(hdr[12:14])
    # 14 bytes before the header's first byte, whole DS
    return ("eth", ceil16(14 + len(hdr)) if hdr else 16, f)


def expect(c, w, cur_post, fence_in):
    """What work request w, posted at producer index cur_post, put in its
    WQE. Returns (ctrl fields, segments, notes, next fm_cache)."""
    t, api, op, fl = c["qp_type"], c["api"], w["op"], w["flags"]
    post = api == "ibv_post_send"
    fence = CTRL_FENCE if fl & F_FENCE else fence_in
    fm = fence | (CTRL_CQ_UPDATE if (fl & F_SIGNALED or c["sq_sig_all"]) else 0) | \
        (CTRL_SOLICITED if fl & F_SOLICITED else 0)
    next_fence = CTRL_INITIATOR_SMALL_FENCE if op == WR_LOCAL_INV else 0
    if op in (WR_SEND_IMM, WR_RDMA_WRITE_IMM):
        imm = w.get("imm_data_host", 0)
    elif op in (WR_SEND_INV, WR_LOCAL_INV):
        imm = w.get("invalidate_rkey", 0)
    else:
        # _mlx5_post_send writes 0; the wr_* builders leave it
        imm = 0 if post else SKIP
    ctrl = {"opcode_raw": MLX5_OPCODE[op], "opcode": OPCODE_NAME[MLX5_OPCODE[op]],
            "opmod": 0, "wqe_index": cur_post & 0xffff, "qpn": c["qpn"],
            "signature": 0, "dci_stream_channel_id": 0, "fm_ce_se": fm,
            "fm_raw": fm >> 5, "fm": FM_NAME.get(fm >> 5), "ce_raw": fm >> 2 & 3,
            "ce": CE_NAME[fm >> 2 & 3], "se": bool(fm & CTRL_SOLICITED), "imm": imm}
    segs = []
    notes = []
    sges = w["sges"]
    inline = post and fl & F_INLINE and len(sges) > 0
    if t in ("RC", "UC", "XRC"):
        if op in (WR_RDMA_WRITE, WR_RDMA_WRITE_IMM, WR_RDMA_READ, WR_CAS, WR_FAA):
            segs.append(("raddr", 16, {"raddr": w["remote_addr"], "rkey": w["rkey"],
                                       "reserved": 0}))
        if op == WR_CAS:
            segs.append(("atomic", 16, {"swap_add": w["swap"], "compare": w["compare_add"]}))
        elif op == WR_FAA:
            segs.append(("atomic", 16, {"swap_add": w["compare_add"], "compare": SKIP}))
        elif op == WR_LOCAL_INV:
            # set_bind_wr for an invalidation: UMR control, the mkey freed
            flags = UMR_CTRL_INLINE | UMR_CTRL_TRANSLATION_OFFSET | UMR_CTRL_CHECK_QPN
            segs.append(("umr_ctrl", 48, {
                "flags": flags, "inline": True, "check_free": False,
                "translation_offset_valid": True, "check_qpn": True, "klm_octowords": 0,
                "translation_offset": 0,
                "mkey_mask": UMR_MKEY_MASK_FREE | UMR_MKEY_MASK_QPN | UMR_MKEY_MASK_MKEY}))
            segs.append(("mkey_context", 64, {
                "free": True, "qpn": 0xffffff, "mkey": 0, "access_flags": SKIP, "sf": SKIP,
                "flags_pd": SKIP, "start_addr": SKIP, "len": SKIP, "bsf_octword_size": SKIP,
                "translations_octword_size": SKIP, "log_page_size": SKIP}))
        elif op == WR_DRIVER1:
            notes.append("driver1")
        atomic = op in (WR_CAS, WR_FAA)
        segs += data_after(sges, 0, 0, inline, atomic and post) if post else wr_api_data(w, sges)
    elif t == "UD":
        segs.append(av_seg(w))
        segs += data_after(sges, 0, 0, inline) if post else wr_api_data(w, sges)
    elif t == "RAW_PACKET":
        csum = bool(fl & F_IP_CSUM)
        if op == WR_TSO:
            hdr = w["tso.hdr"][:w["tso.hdr_sz"]]
            segs.append(eth_seg(csum, w["tso.mss"], hdr))
            ctrl_off = (cur_post & (c["sq_wqe_cnt"] - 1)) * 64
            if ctrl_off + 16 + 14 + len(hdr) > c["sq_wqe_cnt"] * 64:
                # set_tso_eth_seg wraps the header but places what follows
                # it 32 bytes too far (README: the TSO wrap deviation)
                notes.append("tso_wrap")
            segs += data_after(sges, 0, 0, inline) if post else wr_api_data(w, sges)
        else:
            emi = c["eth_min_inline"]
            i, off, hdr = skip_header(sges, emi)
            segs.append(eth_seg(csum, 0, hdr))
            segs += data_after(sges, i, off, inline) if post else wr_api_data(w, sges, i, off)
    else:
        raise Unmodelled("qp type " + t)
    return ctrl, segs, notes, next_fence


# ------------------------------------------------------------------ the tool
def run_tool(tool, data, qp):
    args = [tool, "decode", "wqe", "--json"]
    if qp:
        args += ["--qp", qp]
    args.append(data.hex())
    p = subprocess.run(args, capture_output=True, text=True)
    if p.returncode != 0:
        kind = "panic" if (p.returncode == 101 or "panicked" in p.stderr) else "error"
        return None, "%s (exit %d): %s" % (kind, p.returncode, p.stderr.strip()[:300])
    try:
        return json.loads(p.stdout), None
    except ValueError as e:
        return None, "error: output is not JSON (%s)" % e


def compare(exp_ctrl, exp_segs, notes, got, given_len, out, label):
    """Appends (field, expected, got) for every disagreement to out."""
    def cmp(path, e, g):
        if e is SKIP:
            return
        if e != g:
            out.append((label + path, e, g))
    for k, e in exp_ctrl.items():
        cmp(k, e, got.get(k))
    ds = 1 + sum(size for _, size, _ in exp_segs) // 16
    cmp("ds", ds, got.get("ds"))
    wqebbs = (ds + 3) // 4
    cmp("wqebbs", wqebbs, got.get("wqebbs"))
    cmp("len", wqebbs * 64, got.get("len"))
    cmp("trailing_bytes", given_len - ds * 16, got.get("trailing_bytes"))
    for k in got:
        if k not in exp_ctrl and k not in TOP_KEYS:
            out.append((label + k, "(not a field of this WQE)", got[k]))
    segs = got.get("segments") or []
    tso_wrap = "tso_wrap" in notes
    driver1 = "driver1" in notes
    if driver1:
        return  # bytes of a UMR opcode that are not a UMR (README)
    if not tso_wrap:
        cmp("warnings", [], got.get("warnings"))
    n = len(exp_segs)
    if tso_wrap:
        n = 1  # the Ethernet segment; what follows it is stale (README)
        segs = segs[:1]
    elif len(segs) != n:
        out.append((label + "segments", [s[0] for s in exp_segs], [s.get("type") for s in segs]))
    off = 16
    for k, (typ, size, fields) in enumerate(exp_segs[:n]):
        if k >= len(segs):
            break
        g = segs[k]
        p = "segments[%d]." % k
        cmp(p + "type", typ, g.get("type"))
        if g.get("type") != typ:
            break
        cmp(p + "offset", off, g.get("offset"))
        cmp(p + "size", size, g.get("size"))
        for key, e in fields.items():
            cmp(p + key, e, g.get(key))
        for key in g:
            if key not in fields and key not in ("type", "offset", "size"):
                out.append((label + p + key, "(not a field of this segment)", g[key]))
        off += size


def cut(case, ring_cnt, cur_post):
    """The WQE at producer index cur_post as the device reads it: its DS
    count from the control segment, continuing at WQEBB 0 past the ring end
    (WQEBBs the file does not list hold the a5 fill)."""
    fill = b"\xa5" * 64
    idx = cur_post & (ring_cnt - 1)
    first = case["wqebb"].get(idx, fill)
    ds = first[7] & 0x3f
    nbb = max(1, (ds * 16 + 63) // 64)
    data = b"".join(case["wqebb"].get((idx + i) % ring_cnt, fill) for i in range(nbb))
    return data, ds, nbb


def check_case(case, tool):
    """Returns a dict: wqes, disagreements [(wqe, field, exp, got)], gaps."""
    kv = case["kv"]
    c = {"qp_type": kv["qp_type"], "api": kv["api"], "qpn": num(kv["qpn"]),
         "sq_wqe_cnt": num(kv["sq_wqe_cnt"]), "sq_sig_all": num(kv["sq_sig_all"]),
         "eth_min_inline": num(kv["eth_min_inline"])}
    res = {"name": case["name"], "wqes": 0, "bad": [], "gaps": [], "infer": []}
    wrs = wrs_of(kv)
    ret = num(kv["out.ret"])
    slots = sorted(int(k[len("out.sq_slot"):]) for k in kv if k.startswith("out.sq_slot"))
    if c["api"] == "ibv_post_send":
        posted = len(wrs) if ret == 0 else num(kv["out.bad_wr"])
    else:
        posted = len(wrs) if ret == 0 else 0
    if posted != len(slots):
        res["bad"].append(("-", "posted WQEs", posted, "%d sq_slot lines" % len(slots)))
        return res
    cnt = c["sq_wqe_cnt"]
    cur = num(kv["start_cur_post"])
    fence = num(kv["start_fm_cache"])
    jobs = []
    for k in range(posted):
        w = wrs[k]
        try:
            ctrl, segs, notes, fence = expect(c, w, cur, fence)
        except Unmodelled as e:
            res["gaps"].append(("wr%d" % k, "unmodelled: %s" % e))
            return res
        data, ds, nbb = cut(case, cnt, cur)
        if (cur & (cnt - 1)) not in slots:
            res["bad"].append(("wr%d" % k, "slot", cur & (cnt - 1), slots))
        jobs.append((k, ctrl, segs, notes, data, ds))
        cur = (cur + nbb) & 0xffffffff
    if posted and cur != num(kv["out.sq_cur_post"]):
        res["bad"].append(("-", "sq_cur_post after the cut WQEs", num(kv["out.sq_cur_post"]),
                           cur))
    qp = QP_NAME[c["qp_type"]]
    for k, ctrl, segs, notes, data, ds in jobs:
        res["wqes"] += 1
        tag = "wr%d" % k
        for n in notes:
            res["gaps"].append((tag, n))
        exact = data[:max(16, ds * 16)]
        for label, given, q in (("", data, None), ("--qp:", data, qp), ("exact:", exact, None)):
            got, err = run_tool(tool, given, q)
            if err:
                res["bad"].append((tag, label + "run", "JSON", err))
                continue
            if q is None:
                if got.get("qp_type") != qp or got.get("qp_type_source") != "inferred":
                    res["infer"].append((tag, label, qp, got.get("qp_type"),
                                         got.get("qp_type_reason")))
                    continue  # the fields are compared in the --qp run
            elif got.get("qp_type") != qp or got.get("qp_type_source") != "given":
                res["bad"].append((tag, label + "qp_type", qp, got.get("qp_type")))
                continue
            out = []
            compare(ctrl, segs, notes, got, len(given), out, label)
            for f, e, g in out:
                res["bad"].append((tag, f, e, g))
    return res


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--tool", required=True, help="the mlx5dp binary")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--max-report", type=int, default=40)
    ap.add_argument("-v", action="store_true", help="list the gaps and inference misses too")
    a = ap.parse_args(argv[1:])
    cases = []
    for path in a.files:
        cases += parse_file(path)
    with ThreadPoolExecutor(max_workers=max(1, a.jobs)) as ex:
        results = list(ex.map(lambda cs: check_case(cs, a.tool), cases))
    wqes = sum(r["wqes"] for r in results)
    bad = [(r["name"],) + b for r in results for b in r["bad"]]
    infer = [(r["name"],) + b for r in results for b in r["infer"]]
    gaps = {}
    for r in results:
        for tag, why in r["gaps"]:
            gaps.setdefault(why, []).append("%s %s" % (r["name"], tag))
    for b in bad[:a.max_report]:
        print("DIFF %s %s %s: expected %r, got %r" % b)
    if len(bad) > a.max_report:
        print("... %d more" % (len(bad) - a.max_report))
    for b in infer[:a.max_report if a.v else 10]:
        print("INFER %s %s %s expected %s, got %s (%s)" % b)
    if a.v:
        for why, where in sorted(gaps.items()):
            for w in where:
                print("GAP %s: %s" % (why, w))
    bad_cases = len({b[0] for b in bad})
    print("decode_wqe_check: %d cases, %d WQEs (x3 decodes): %d disagreements in %d cases, "
          "%d QP-type inferences missed; gaps: %s" % (
              len(cases), wqes, len(bad), bad_cases, len(infer),
              ", ".join("%s %d" % (k, len(v)) for k, v in sorted(gaps.items())) or "none"))
    return 1 if bad or infer else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
