#!/usr/bin/env python3
"""Independent reference poller/decompressor for an mlx5 CQ ring snapshot.

Written from the public sources only (Linux mlx5e en_rx.c / wq.h / device.h,
DPDK mlx5_rx.c / mlx5_prm.h / mlx5_common.h, rdma-core cq.c / mlx5dv.h, UCX
ib_mlx5.c) and the PRM facts (sections 9-11: CQEs, compression, both
layouts), without reading mlx5dp's own code.

poll(ring, cqe_size, cnt, ci, layout, fmt, striding, enh_title=None)
  -> (list of completion dicts, final ci, error string or None)

Each completion dict holds the decoded fields of the effective 64-byte CQE
(title with the mini's fields patched in, like the kernel's cqd->title);
key names follow the tool's JSON keys so a harness can compare them.
"""
import struct, sys, json

# Behaviour switches for points where the sources leave room (see REPORT.md):
ERR_TITLE_SKIP = False   # True: an error CQE does not become the enhanced title (DPDK mlx5_rx_poll_len,
                         # = the tool); False: any regular CQE does (kernel
                         # mlx5e_rx_cq_process_enhanced_cqe_comp, UCX title = cq_ci-1)
SKIP_FILLER = True       # striding RQ filler CQEs/minis (byte_cnt bit 31) give no line (kernel
                         # mpwrq_is_filler_cqe, DPDK MLX5_MPRQ_FILLER_MASK `continue`)
STRICT_OPCODES = True    # tool's policy: opcode 5 RESIZE_CQ consumed silently, 6..12 = error;
                         # (kernel mlx5e treats every non-error opcode as a packet)
OK_OPCODES = (0, 1, 2, 3, 4, 13, 14)
ENH_INVALID_STOPS = True # enhanced: opcode 0xF is HW-owned (DPDK check_cqe_iteration); kernel checks byte 62 only
KERNEL_OWNER = True      # owner/SE of an expanded mini: kernel mlx5e_decompress_cqe
                         # (op_own &= 0xf0; |= pass parity of the mini's own index)

MINI_FORMATS = ("hash", "csum", "ftag-stridx", "csum-stridx", "l34h-stridx", "req")
STRIDX_FORMATS = ("ftag-stridx", "csum-stridx", "l34h-stridx")

be16 = lambda b, o: struct.unpack_from(">H", b, o)[0]
be32 = lambda b, o: struct.unpack_from(">I", b, o)[0]
be64 = lambda b, o: struct.unpack_from(">Q", b, o)[0]


def cqe64(ring, cqe_size, idx):
    # 128-byte CQE: the mlx5_cqe64 is the second half (kernel mlx5_cqwq_get_wqe
    # `cqe += wq->fbc.log_stride == 7`; rdma-core get_cqe + cqe_sz - 64).
    base = idx * cqe_size + (cqe_size - 64)
    return bytes(ring[base:base + 64])


def fields(c, striding, compressed, slot, extra=None):
    """Decode the fields we compare from an (effective) 64-byte CQE."""
    op = c[63] >> 4
    d = {
        "slot": slot,
        "compressed": compressed,
        "owner": c[63] & 1,
        "se": (c[63] >> 1) & 1,
        "format_raw": (c[63] >> 2) & 3,
        "opcode_raw": op,
        "wqe_counter": be16(c, 60),
        "byte_cnt": be32(c, 44),
        "sop_drop_qpn": be32(c, 56),
        "qpn": be32(c, 56) & 0xffffff,
        "timestamp": be64(c, 48),
        "vlan_info": be16(c, 30),
        "srqn_uidx": be32(c, 32) & 0xFFFFFF,
        "imm_inval_pkey": be32(c, 36),
        "wqe_id": be16(c, 2),
        "hds_ip_ext": c[28],
        "l4_l3_hdr_type": c[29],
        "l3_hdr_type_raw": (c[29] >> 2) & 3,
        "l4_hdr_type_raw": (c[29] >> 4) & 7,
        "ip_frag": bool(c[29] & 0x80),
        "cvlan_stripped": bool(c[29] & 1),
        "rx_hash": be32(c, 12),
        "rss_hash_result": be32(c, 12),
        "checksum": be16(c, 20),
        "flow_tag": be32(c, 56) & 0xffffff,
    }
    if op in (13, 14):
        d["syndrome"] = c[55]
        d["vendor_syndrome"] = c[54]
        d["hw_syndrome"] = c[52]
        d["hw_syndrome_type"] = c[53]
    if striding and op not in (0, 13, 14):
        bc = be32(c, 44)
        d["stride_idx"] = be16(c, 60)
        d["strides"] = (bc >> 16) & 0x3FFF   # DPDK MLX5_MPRQ_STRIDE_NUM_MASK [29:16]
        d["mprq_byte_cnt"] = bc & 0xFFFF
    if extra:
        d.update(extra)
    return d


def is_filler(c, striding):
    return SKIP_FILLER and striding and (c[63] >> 4) not in (0, 13, 14) and bool(c[44] & 0x80)


def mini_apply(title, mini, fmt, striding, run_wc, req):
    """Effective CQE for one mini (kernel mlx5e_decompress_cqe semantics,
    DPDK rxq_cq_to_mbuf for the formats the kernel does not use).
    Returns (cqe bytes, extra fields, wc used)."""
    c = bytearray(title)
    extra = {}
    if req:
        # requester mini: wqe_counter BE16, s_wqe_opcode byte 2 (kernel/UCX),
        # byte_cnt. UCX uct_ib_mlx5_iface_cqe_unzip_fill_unique.
        c[60:62] = mini[0:2]
        c[44:48] = mini[4:8]
        c[56] = mini[2]
        return bytes(c), extra
    c[44:48] = mini[4:8]
    if fmt == "hash":
        c[12:16] = mini[0:4]
    elif fmt == "csum":
        c[20:22] = mini[0:2]
    elif fmt == "csum-stridx":
        c[20:22] = mini[0:2]
    elif fmt == "ftag-stridx":
        ftag = (mini[4] << 16) | be16(mini, 0)
        c[44] = 0                      # 24-bit byte count
        extra["flow_tag"] = ftag
        # flow tag lives in sop_drop_qpn[23:0] for an Eth RQ (DPDK rebuilds mark from it)
        c[57:60] = struct.pack(">I", ftag)[1:]
    elif fmt == "l34h-stridx":
        c[29] = mini[0]
    if fmt in STRIDX_FORMATS:
        c[60:62] = mini[2:4]           # HW stride index
    else:
        c[60:62] = struct.pack(">H", run_wc & 0xFFFF)
    return bytes(c), extra


def poll(ring, cqe_size, cnt, ci, layout="basic", fmt="hash", striding=False, enh_title=None):
    log = cnt.bit_length() - 1
    assert 1 << log == cnt
    mask = cnt - 1
    if fmt in STRIDX_FORMATS:
        striding = True
    out = []
    start_ci = ci

    def take_mini(e, mini, req, at, extra):
        """A mini's expanded CQE `e`, standing for index `at`: its line
        appended unless it is a filler; returns the running counter's step
        after it (none for requester minis, which carry their own)."""
        if not is_filler(e, striding and not req):
            out.append(fields(bytes(e), striding and not req, True, at & mask, extra))
        if req:
            return 0
        return (be32(mini, 4) >> 16) & 0x3FFF if striding else 1

    def take_regular(c, idx):
        """A regular (uncompressed) CQE: its line appended unless it is a
        filler or RESIZE_CQ (consumed, no line); an error string for an
        opcode the policy refuses."""
        op = c[63] >> 4
        if STRICT_OPCODES and op == 5:
            return None
        if STRICT_OPCODES and op not in OK_OPCODES:
            return "opcode %d not handled" % op
        if not is_filler(c, striding and fmt != "req"):
            out.append(fields(c, striding and fmt != "req", False, idx))
        return None
    limit = ci + cnt  # never poll more than one ring's worth
    if layout == "basic":
        while ci - start_ci < cnt:
            idx = ci & mask
            c = cqe64(ring, cqe_size, idx)
            op, own = c[63] >> 4, c[63] & 1
            if op == 0xF or own != ((ci >> log) & 1):
                break
            form = (c[63] >> 2) & 3
            if form != 3:
                err = take_regular(c, idx)
                if err:
                    return out, ci, err
                ci += 1
                continue
            n = be32(c, 44)
            if n < 2:
                # judgement: a 1-mini session would have its mini array outside
                # the session (array 0 is at title+1); kernel/DPDK would not check.
                return out, ci, "title with %d minis" % n
            if ci + n - start_ci > cnt:
                return out, ci, "session of %d minis overruns the ring (%d slots from ci)" % (n, start_ci + cnt - ci)
            req = (op == 0) or fmt == "req"
            run_wc = be16(c, 60)
            for i in range(n):
                arr = ci + 1 if i < 8 else ci + 8 * (i // 8)
                a = cqe64(ring, cqe_size, arr & mask)
                mini = a[(i % 8) * 8:(i % 8) * 8 + 8]
                e, extra = mini_apply(c, mini, fmt, striding, run_wc, req)
                e = bytearray(e)
                if KERNEL_OWNER:
                    # kernel mlx5e_decompress_cqe: op_own &= 0xf0; |= pass parity of cqcc
                    e[63] = (e[63] & 0xF0) | (((ci + i) >> log) & 1)
                else:
                    e[63] = c[63]
                run_wc += take_mini(e, mini, req, ci + i, extra)
            ci += n
        return out, ci, None
    # enhanced
    title = enh_title
    run_wc = None
    def set_title(t):
        nonlocal title, run_wc
        title = t
        if striding:
            run_wc = be16(t, 60) + ((be32(t, 44) >> 16) & 0x3FFF)
        else:
            run_wc = be16(t, 60) + 1
    if title is not None:
        set_title(title)
    while ci - start_ci < cnt:
        idx = ci & mask
        c = cqe64(ring, cqe_size, idx)
        if c[62] != ((ci >> log) & 0xFF):
            break
        # DPDK check_cqe_iteration also treats opcode INVALID as HW-owned
        # (kernel mlx5_cqwq_get_cqe_enhanced_comp checks only byte 62)
        if ENH_INVALID_STOPS and (c[63] >> 4) == 0xF and ((c[63] >> 2) & 3) != 3:
            break
        form = (c[63] >> 2) & 3
        if form != 3:
            op = c[63] >> 4
            if STRICT_OPCODES and op == 5:
                ci += 1
                continue
            err = take_regular(c, idx)
            if err:
                return out, ci, err
            if not (ERR_TITLE_SKIP and op in (13, 14)):
                set_title(c)
            ci += 1
            continue
        n = (c[63] >> 4) + 1
        if n > 7:
            return out, ci, "compressed CQE with %d minis (max 7)" % n
        if title is None:
            return out, ci, "compressed CQE without a title"
        if ci + n - start_ci > cnt:
            return out, ci, "compressed CQE of %d minis overruns the ring" % n
        req = ((title[63] >> 4) == 0) or fmt == "req"
        for i in range(n):
            mini = c[8 * i:8 * i + 8]
            e, extra = mini_apply(title, mini, fmt, striding, run_wc, req)
            if KERNEL_OWNER:
                e = bytearray(e)
                e[63] = (e[63] & 0xF0) | (((ci + i) >> log) & 1)
                e = bytes(e)
            run_wc += take_mini(e, mini, req, ci + i, extra)
        ci += n
    return out, ci, None


def parse_hex(text):
    import re
    b = bytearray()
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        b += bytes.fromhex(re.sub(r"\s+", "", line))
    return bytes(b)


if __name__ == "__main__":
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("--cqe-size", type=int, required=True)
    ap.add_argument("--cqe-cnt", type=int, required=True)
    ap.add_argument("--ci", type=int, required=True)
    ap.add_argument("--layout", default="basic")
    ap.add_argument("--mini-format", default="hash")
    ap.add_argument("--striding-rq", action="store_true")
    ap.add_argument("--dpdk-title", action="store_true", help="error CQEs never become the enhanced title (DPDK/tool)")
    ap.add_argument("--title-owner", action="store_true", help="minis keep the title's owner/SE bits (tool)")
    ap.add_argument("file")
    a = ap.parse_args()
    ERR_TITLE_SKIP = a.dpdk_title
    KERNEL_OWNER = not a.title_owner
    txt = sys.stdin.read() if a.file == "-" else open(a.file).read()
    ring = parse_hex(txt)
    assert len(ring) == a.cqe_size * a.cqe_cnt, "ring size"
    out, ci, err = poll(ring, a.cqe_size, a.cqe_cnt, a.ci, a.layout, a.mini_format, a.striding_rq)
    for d in out:
        print(json.dumps(d))
    if err:
        print("error:", err)
    print(json.dumps({"ci": ci}))
