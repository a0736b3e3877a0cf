#!/usr/bin/env python3
"""Independent model of the send side of rdma-core v44.0 libmlx5.

Written from providers/mlx5/qp.c (_mlx5_post_send, post_send_db,
mlx5_bf_copy, set_data_inl_seg, copy_eth_inline_headers, set_tso_eth_seg,
set_bind_wr, the mlx5_send_wr_* family filled in by mlx5_qp_fill_wr_pfns),
providers/mlx5/mlx5dv.h / wqe.h (segment layouts, constants) and
providers/mlx5/verbs.c (the sizes QP creation computes).  Standard library
only; it shares no code with mlx5dp.

Usage:
  send_ref.py check FILE        replay every case of a golden file
                                (wqe-cases.txt format) and compare all outputs
  send_ref.py gen N SEED [--keep-quirks]
                                print N random cases in the same format;
                                cases hitting one of three libmlx5 bugs
                                (README: stale sg_copy_ptr, re-sent Ethernet
                                header, TSO wrap inside a list) are left out
                                unless --keep-quirks (their names then end
                                in _quirk_<which>)
  send_ref.py show FILE NAME    print the model's rendering of one case

Two output conventions the 30 visible cases do not settle, chosen here:
out.bad_wr is -1 when ibv_wr_complete fails (it names no work request), and
out.sq_slot<idx> lines are printed for the WQEs posted (none after
ibv_wr_complete rolled a batch back).

The model keeps the SQ as a byte ring pre-filled with 0xa5 plus a "written"
mask; pointers are byte offsets into that ring, so the provider's own quirks
(stale pointers after an error inside a wr_* batch, the TSO wrap, the
sg_copy_ptr kept across WRs of one ibv_post_send list) are reproduced as they
happen rather than special-cased.
"""

import random
import sys

# ---------------------------------------------------------------- constants
EINVAL, ENOMEM, EOPNOTSUPP = 22, 12, 95

# enum ibv_wr_opcode (libibverbs/verbs.h)
WR_RDMA_WRITE, WR_RDMA_WRITE_IMM, WR_SEND, WR_SEND_IMM, WR_RDMA_READ = 0, 1, 2, 3, 4
WR_CAS, WR_FAA, WR_LOCAL_INV, WR_BIND_MW, WR_SEND_INV, WR_TSO, WR_DRIVER1 = 5, 6, 7, 8, 9, 10, 11
OPC_NAMES = {
    0: "RDMA_WRITE", 1: "RDMA_WRITE_WITH_IMM", 2: "SEND", 3: "SEND_WITH_IMM",
    4: "RDMA_READ", 5: "ATOMIC_CMP_AND_SWP", 6: "ATOMIC_FETCH_AND_ADD",
    7: "LOCAL_INV", 8: "BIND_MW", 9: "SEND_WITH_INV", 10: "TSO", 11: "DRIVER1",
}
OPC_NUMS = {v: k for k, v in OPC_NAMES.items()}

# qp.c mlx5_ib_opcode[] -> MLX5_OPCODE_* (mlx5dv.h)
MLX5_OPCODE = {
    WR_SEND: 0x0a, WR_SEND_INV: 0x01, WR_SEND_IMM: 0x0b, WR_RDMA_WRITE: 0x08,
    WR_RDMA_WRITE_IMM: 0x09, WR_RDMA_READ: 0x10, WR_CAS: 0x11, WR_FAA: 0x12,
    WR_BIND_MW: 0x25, WR_LOCAL_INV: 0x25, WR_TSO: 0x0e, WR_DRIVER1: 0x25,
}
N_OPCODES = 12  # sizeof mlx5_ib_opcode / sizeof [0]

# enum ibv_send_flags
F_FENCE, F_SIGNALED, F_SOLICITED, F_INLINE, F_IP_CSUM = 1, 2, 4, 8, 16
FLAG_NAMES = [(F_SIGNALED, "SIGNALED"), (F_FENCE, "FENCE"), (F_SOLICITED, "SOLICITED"),
              (F_INLINE, "INLINE"), (F_IP_CSUM, "IP_CSUM")]

# enum ibv_wc_opcode
WC_BIND_MW, WC_LOCAL_INV, WC_DRIVER1 = 5, 6, 0x80 + 7

CTRL_CQ_UPDATE, CTRL_SOLICITED = 0x08, 0x02
CTRL_FENCE, CTRL_SMALL_FENCE = 0x80, 0x20
INLINE_SEG = 0x80000000
EXTENDED_UD_AV = 0x80000000
ETH_L3_CSUM, ETH_L4_CSUM = 0x40, 0x80
CSUM_SUPPORT_RAW_OVER_ETH = 1
ETH_L2_INLINE_HEADER_SIZE = 18
ETH_L2_MIN_HEADER_SIZE = 14
WQE_REQ_SETTERS_UD_XRC_DC = 2

# segment sizes
CTRL_SZ, RADDR_SZ, ATOMIC_SZ, DGRAM_SZ, ETH_SZ, DSEG_SZ = 16, 16, 16, 48, 32, 16
ETH_INLINE_HDR_OFF = 16   # offsetof(struct mlx5_wqe_eth_seg, inline_hdr)
ETH_INLINE_START_OFF = 14  # offsetof(..., inline_hdr_start)
UMR_CTRL_SZ, MKEY_CTX_SZ = 48, 64


class ModelError(Exception):
    """The provider would read/write outside the SQ ring (not a valid case)."""


def be(v, n):
    return (v & ((1 << (8 * n)) - 1)).to_bytes(n, "big")


def align(x, a):
    return (x + a - 1) & ~(a - 1)


def div_round_up(a, b):
    return (a + b - 1) // b


# ---------------------------------------------------------------- state
class QP:
    def __init__(self, c):
        self.qp_type = c["qp_type"]
        self.qpn = c["qpn"]
        self.cnt = c["sq_wqe_cnt"]
        self.qend = self.cnt * 64
        self.max_post = c["sq_max_post"]
        self.max_gs = c["sq_max_gs"]
        self.max_inline = c["max_inline_data"]
        self.sig_bits = CTRL_CQ_UPDATE if c["sq_sig_all"] else 0
        self.eth_min_inline = c["eth_min_inline"]
        self.cap_cache = c["qp_cap_cache"]
        self.max_tso = c["max_tso"]
        self.max_tso_header = c["max_tso_header"]
        self.atomics = c["atomics_enabled"]
        self.cur_post = c["start_cur_post"]
        self.head = c["start_head"]
        self.tail = c["start_tail"]
        self.fm_cache = c["start_fm_cache"]
        self.bf_reg = c["bf_reg_offset"]
        self.bf_buf_size = c["bf_buf_size"]
        self.bf_offset = c["bf_offset_before"]
        self.bf_uuarn = c["bf_uuarn"]
        self.prefer_bf = c["prefer_bf"]
        self.shut_up_bf = c["shut_up_bf"]
        self.mem = bytearray(b"\xa5" * self.qend)
        self.wr = bytearray(self.qend)
        self.wrid, self.wqe_head, self.wr_data = {}, {}, {}
        self.posted = []  # slot indexes of WQEs that completed
        # libmlx5 quirks the generator steers clear of (see README):
        self.tso_wrapped = False   # a TSO header wrapped the ring end
        self.stale_sgcp = False    # a TSO WR used another WR's sg_copy_ptr
        self.eth_dup_hdr = False   # wr_* eth setter re-sent a consumed header
        self.dbrec = None
        self.uar = None  # (kind, offset, bytes, mask)
        # wr_* API state (fabricated QP: zeroed)
        self.cur_ctrl = None
        self.cur_data = None
        self.cur_eth = None
        self.cur_size = 0
        self.cur_setters_cnt = 0
        self.nreq = 0
        self.err = 0
        self.inl_wqe = 0
        self.cur_post_rb = 0
        self.fm_cache_rb = 0

    # -- memory
    def w(self, off, data):
        if off is None or off < 0 or off + len(data) > self.qend:
            raise ModelError("write outside the SQ at %r+%d" % (off, len(data)))
        self.mem[off:off + len(data)] = data
        for i in range(off, off + len(data)):
            self.wr[i] = 1

    def wqe(self, n):
        return n * 64

    def overflow(self, nreq):
        cur = (self.head - self.tail) & 0xffffffff
        return cur + nreq >= self.max_post


# ---------------------------------------------------------------- shared helpers
def set_raddr(qp, off, raddr, rkey):
    qp.w(off, be(raddr, 8) + be(rkey, 4) + be(0, 4))


def set_atomic(qp, off, op, swap, cmp_add):
    if op == WR_CAS:
        qp.w(off, be(swap, 8) + be(cmp_add, 8))
    else:
        qp.w(off, be(cmp_add, 8))


def set_datagram(qp, off, av, rqpn, qkey):
    qp.w(off, bytes(av))
    qp.w(off + 8, be(rqpn | EXTENDED_UD_AV, 4))
    qp.w(off, be(qkey, 4))


def set_bind_wr_local_inv(qp, seg, size, qpn):
    """set_bind_wr(qp, IBV_MW_TYPE_2, rkey=0, bind_info={}) (length 0)."""
    # set_umr_control_seg
    flags = 0x10 | 0x80 | 0x08  # TRNSLATION_OFFSET | INLINE | CHECK_QPN
    mask = (1 << 29) | (1 << 13) | (1 << 14)  # FREE | MKEY | QPN
    ctrl = bytes([flags]) + b"\0" * 3 + be(0, 2) + be(0, 2) + be(mask, 8) + b"\0" * 32
    qp.w(seg, ctrl)
    seg += UMR_CTRL_SZ
    size += UMR_CTRL_SZ // 16
    if seg == qp.qend:
        seg = 0
    # set_umr_mkey_seg, length 0: qpn_mkey and free only
    qp.w(seg + 4, be(0xFFFFFF00 | 0, 4))
    qp.w(seg, bytes([0x40]))
    seg += MKEY_CTX_SZ
    size += MKEY_CTX_SZ // 16
    return seg, size


def copy_eth_inline_headers(qp, bufs, eseg, data_of):
    """Returns (err, index, offset). bufs: list of (addr, length, data)."""
    inl_hdr_size = qp.eth_min_inline
    if len(bufs) < 1:
        return EINVAL, 0, 0
    j = 0
    length = bufs[0][1]
    if length >= ETH_L2_INLINE_HEADER_SIZE:
        copy = inl_hdr_size
        if copy:
            qp.w(eseg + ETH_INLINE_START_OFF, data_of(bufs[0])[:copy])
    else:
        left = inl_hdr_size
        copy = 0
        while j < len(bufs) and left > 0:
            length = bufs[j][1]
            copy = min(length, left)
            if copy:
                qp.w(eseg + ETH_INLINE_START_OFF + (ETH_L2_INLINE_HEADER_SIZE - left),
                     data_of(bufs[j])[:copy])
            left -= copy
            j += 1
        if left:
            return EINVAL, 0, 0
        if j:
            j -= 1
    qp.w(eseg + 12, be(inl_hdr_size, 2))
    if length == copy:
        j += 1
        copy = 0
    return 0, j, copy


def set_tso_eth_seg(qp, seg, hdr, hdr_sz, mss, size):
    """Returns (err, seg, size); seg is the eth segment pointer (advanced)."""
    if hdr_sz < ETH_L2_MIN_HEADER_SIZE or hdr_sz > qp.max_tso_header:
        return EINVAL, seg, size
    left = hdr_sz
    qp.w(seg + 6, be(mss, 2))
    qp.w(seg + 12, be(hdr_sz, 2))
    start = seg + ETH_INLINE_START_OFF
    left_len = qp.qend - start
    copy_sz = min(left_len, left)
    if copy_sz:
        qp.w(start, hdr[:copy_sz])
    seg += align(copy_sz - 2, 16) - 16
    size += align(copy_sz - 2, 16) // 16 - 1
    if copy_sz < left:
        qp.tso_wrapped = True
        seg = 0
        left -= copy_sz
        qp.w(seg, hdr[copy_sz:copy_sz + left])
        seg += align(left, 16)
        size += align(left, 16) // 16
    return 0, seg, size


def bf_copy_and_doorbell(qp, nreq, inl, size, ctrl):
    """post_send_db()"""
    if not nreq:
        return
    qp.head = (qp.head + nreq) & 0xffffffff
    qp.dbrec = qp.cur_post & 0xffff
    if ctrl is None:
        raise ModelError("doorbell with NULL ctrl")
    off = qp.bf_reg + qp.bf_offset
    if (not qp.shut_up_bf and nreq == 1 and qp.bf_uuarn and (inl or qp.prefer_bf)
            and size > 1 and size <= qp.bf_buf_size // 16):
        n = align(size * 16, 64)
        src = ctrl
        data, mask = bytearray(), []
        while True:
            data += qp.mem[src:src + 64]
            mask += ["x" if qp.wr[i] else "s" for i in range(src, src + 64)]
            n -= 64
            src += 64
            if src == qp.qend:
                src = 0
            if n <= 0:
                break
        qp.uar = ("blueflame", off, bytes(data), "".join(mask))
    else:
        data = qp.mem[ctrl:ctrl + 8]
        mask = "".join("x" if qp.wr[i] else "s" for i in range(ctrl, ctrl + 8))
        qp.uar = ("doorbell64", off, bytes(data), mask)
    qp.bf_offset ^= qp.bf_buf_size


# ---------------------------------------------------------------- ibv_post_send
def send_ieth(wr):
    op = wr["opcode_num"]
    if op in (WR_SEND_IMM, WR_RDMA_WRITE_IMM):
        return wr.get("imm_data_host", 0)
    if op == WR_SEND_INV:
        return wr.get("invalidate_rkey", 0)
    return 0


def sge_data(sge):
    d = sge.get("data")
    if d is None:
        raise ModelError("sge data needed but absent")
    return d


def post_send(qp, wrs):
    """_mlx5_post_send(); returns (err, bad_wr index or -1)."""
    nreq = 0
    inl = 0
    err = 0
    size = 0
    ctrl = None
    bad = -1
    next_fence = qp.fm_cache
    sgcp = [0, 0]  # sg_copy_ptr: initialised once per call, not per WR
    max_tso = 0
    for k, wr in enumerate(wrs):
        op = wr["opcode_num"]
        flags = wr["send_flags_num"]
        sges = wr["sges"]
        if op < 0 or op >= N_OPCODES:
            err, bad = EINVAL, k
            break
        if qp.overflow(nreq):
            err, bad = ENOMEM, k
            break
        if len(sges) > qp.max_gs:
            err, bad = ENOMEM, k
            break
        fence = CTRL_FENCE if flags & F_FENCE else next_fence
        next_fence = 0
        idx = qp.cur_post & (qp.cnt - 1)
        ctrl = seg = qp.wqe(idx)
        qp.w(seg + 8, be(0, 4))
        qp.w(ctrl + 12, be(send_ieth(wr), 4))
        fm = qp.sig_bits | fence | (CTRL_CQ_UPDATE if flags & F_SIGNALED else 0) | \
            (CTRL_SOLICITED if flags & F_SOLICITED else 0)
        qp.w(ctrl + 11, bytes([fm]))
        seg += CTRL_SZ
        size = 1
        qp.wr_data[idx] = 0

        t = qp.qp_type
        if t == "RC":
            if op in (WR_RDMA_READ, WR_RDMA_WRITE, WR_RDMA_WRITE_IMM):
                set_raddr(qp, seg, wr["remote_addr"], wr["rkey"])
                seg += RADDR_SZ
                size += 1
            elif op in (WR_CAS, WR_FAA):
                if not qp.atomics:
                    err, bad = EOPNOTSUPP, k
                    break
                set_raddr(qp, seg, wr["remote_addr"], wr["rkey"])
                seg += RADDR_SZ
                set_atomic(qp, seg, op, wr.get("swap", 0), wr.get("compare_add", 0))
                seg += ATOMIC_SZ
                size += 2
            elif op == WR_BIND_MW:
                raise ModelError("BIND_MW is not expressible in this format")
            elif op == WR_LOCAL_INV:
                next_fence = CTRL_SMALL_FENCE
                qp.w(ctrl + 12, be(wr.get("invalidate_rkey", 0), 4))
                seg, size = set_bind_wr_local_inv(qp, seg, size, qp.qpn)
                qp.wr_data[idx] = WC_LOCAL_INV
        elif t == "UD":
            set_datagram(qp, seg, wr["ud.ah_av"], wr["ud.remote_qpn"], wr["ud.remote_qkey"])
            seg += DGRAM_SZ
            size += DGRAM_SZ // 16
            if seg == qp.qend:
                seg = 0
        elif t == "RAW_PACKET":
            qp.w(seg, bytes(ETH_SZ))
            eseg = seg
            if flags & F_IP_CSUM:
                if not (qp.cap_cache & CSUM_SUPPORT_RAW_OVER_ETH):
                    err, bad = EINVAL, k
                    break
                qp.w(eseg + 4, bytes([ETH_L3_CSUM | ETH_L4_CSUM]))
            if op == WR_TSO:
                if sgcp != [0, 0]:
                    qp.stale_sgcp = True
                max_tso = qp.max_tso
                e, seg, size = set_tso_eth_seg(qp, seg, wr["tso.hdr"], wr["tso.hdr_sz"],
                                               wr["tso.mss"], size)
                if e:
                    err, bad = e, k
                    break
                seg += ETH_SZ
                size += ETH_SZ // 16
            else:
                bufs = [(s["addr"], s["length"], s) for s in sges]
                e, j, o = copy_eth_inline_headers(qp, bufs, seg, lambda b: sge_data(b[2]))
                if e:
                    err, bad = e, k
                    break
                sgcp = [j, o]
                seg += (ETH_INLINE_HDR_OFF + qp.eth_min_inline) & ~0xf
                size += (ETH_INLINE_HDR_OFF + qp.eth_min_inline) >> 4
        else:
            raise ModelError("qp type %s not modelled" % t)

        if flags & F_INLINE and len(sges):
            # set_data_inl_seg
            hdr = seg
            wqe = seg + 4
            tot = 0
            offset = sgcp[1]
            e = 0
            for i in range(sgcp[0], len(sges)):
                s = sges[i]
                ln = s["length"] - offset
                tot += ln
                data_off = offset
                offset = 0
                if tot > qp.max_inline:
                    e = ENOMEM
                    break
                data = sge_data(s)[data_off:data_off + ln] if ln else b""
                if wqe + ln > qp.qend:
                    copy = qp.qend - wqe
                    qp.w(wqe, data[:copy])
                    data = data[copy:]
                    ln -= copy
                    wqe = 0
                qp.w(wqe, data)
                wqe += ln
            if e:
                err, bad = e, k
                break
            if tot:
                qp.w(hdr, be(tot | INLINE_SEG, 4))
                sz = align(tot + 4, 16) // 16
            else:
                sz = 0
            inl = 1
            size += sz
        else:
            dp = seg
            failed = False
            for i in range(sgcp[0], len(sges)):
                if dp == qp.qend:
                    seg = dp = 0
                s = sges[i]
                if s["length"]:
                    if op in (WR_CAS, WR_FAA):
                        qp.w(dp, be(8, 4) + be(s["lkey"], 4) + be(s["addr"], 8))
                    else:
                        if op == WR_TSO:
                            if max_tso < s["length"]:
                                failed = True
                                break
                            max_tso -= s["length"]
                        o = sgcp[1]
                        qp.w(dp, be(s["length"] - o, 4) + be(s["lkey"], 4) + be(s["addr"] + o, 8))
                    sgcp[1] = 0
                    dp += 16
                    size += 1
            if failed:
                err, bad = EINVAL, k
                break

        opc = MLX5_OPCODE[op]
        qp.w(ctrl, be(((qp.cur_post & 0xffff) << 8) | opc, 4))
        qp.w(ctrl + 4, be(size | (qp.qpn << 8), 4))
        qp.wrid[idx] = wr["wr_id"]
        qp.wqe_head[idx] = (qp.head + nreq) & 0xffffffff
        qp.posted.append(idx)
        qp.cur_post = (qp.cur_post + div_round_up(size * 16, 64)) & 0xffffffff
        nreq += 1

    qp.fm_cache = next_fence
    bf_copy_and_doorbell(qp, nreq, inl, size, ctrl)
    return err, bad


# ---------------------------------------------------------------- ibv_wr_* API
def set_err(qp, e):
    if not qp.err:
        qp.err = e


def common_wqe_init(qp, wr, ib_op):
    if qp.overflow(qp.nreq):
        set_err(qp, ENOMEM)
        return
    idx = qp.cur_post & (qp.cnt - 1)
    qp.wrid[idx] = wr["wr_id"]
    qp.wqe_head[idx] = (qp.head + qp.nreq) & 0xffffffff
    if ib_op == WR_BIND_MW:
        qp.wr_data[idx] = WC_BIND_MW
    elif ib_op == WR_LOCAL_INV:
        qp.wr_data[idx] = WC_LOCAL_INV
    elif ib_op == WR_DRIVER1:
        qp.wr_data[idx] = WC_DRIVER1
    else:
        qp.wr_data[idx] = 0
    ctrl = qp.wqe(idx)
    qp.w(ctrl + 8, be(0, 4))
    flags = wr["send_flags_num"]
    fence = CTRL_FENCE if flags & F_FENCE else qp.fm_cache
    qp.fm_cache = 0
    fm = qp.sig_bits | fence | (CTRL_CQ_UPDATE if flags & F_SIGNALED else 0) | \
        (CTRL_SOLICITED if flags & F_SOLICITED else 0)
    qp.w(ctrl + 11, bytes([fm]))
    qp.w(ctrl, be(((qp.cur_post & 0xffff) << 8) | MLX5_OPCODE[ib_op], 4))
    qp.cur_ctrl = ctrl
    qp.pending_idx = idx


def need(p):
    if p is None:
        raise ModelError("NULL pointer dereference in the provider")
    return p


def wqe_finalize(qp):
    qp.w(need(qp.cur_ctrl) + 4, be(qp.cur_size | (qp.qpn << 8), 4))
    qp.cur_post = (qp.cur_post + div_round_up(qp.cur_size, 4)) & 0xffffffff


def wr_send(qp, wr, ib_op):
    common_wqe_init(qp, wr, ib_op)
    tseg = DGRAM_SZ if qp.qp_type == "UD" else 0
    qp.cur_data = need(qp.cur_ctrl) + CTRL_SZ + tseg
    if qp.cur_data == qp.qend:
        qp.cur_data = 0
    qp.cur_size = (CTRL_SZ + tseg) // 16
    qp.nreq += 1
    qp.cur_setters_cnt = 0


def wr_send_eth(qp, wr):
    common_wqe_init(qp, wr, WR_SEND)
    eseg = need(qp.cur_ctrl) + CTRL_SZ
    qp.w(eseg, bytes(ETH_SZ))
    if qp.eth_min_inline:
        qp.cur_eth = eseg
    if wr["send_flags_num"] & F_IP_CSUM:
        if not (qp.cap_cache & CSUM_SUPPORT_RAW_OVER_ETH):
            set_err(qp, EINVAL)
            return
        qp.w(eseg + 4, bytes([ETH_L3_CSUM | ETH_L4_CSUM]))
    esz = (ETH_INLINE_HDR_OFF + qp.eth_min_inline) & ~0xf
    qp.cur_data = eseg + esz
    qp.cur_size = (CTRL_SZ + esz) >> 4
    qp.nreq += 1


def wr_send_tso(qp, wr):
    common_wqe_init(qp, wr, WR_TSO)
    eseg = need(qp.cur_ctrl) + CTRL_SZ
    qp.w(eseg, bytes(ETH_SZ))
    if wr["send_flags_num"] & F_IP_CSUM:
        if not (qp.cap_cache & CSUM_SUPPORT_RAW_OVER_ETH):
            set_err(qp, EINVAL)
            return
        qp.w(eseg + 4, bytes([ETH_L3_CSUM | ETH_L4_CSUM]))
    e, eseg, size = set_tso_eth_seg(qp, eseg, wr["tso.hdr"], wr["tso.hdr_sz"], wr["tso.mss"], 0)
    if e:
        set_err(qp, e)
        return
    qp.cur_data = eseg + ETH_SZ
    qp.cur_size = size + ((CTRL_SZ + ETH_SZ) >> 4)
    qp.cur_eth = None
    qp.nreq += 1


def wr_rdma(qp, wr, ib_op):
    common_wqe_init(qp, wr, ib_op)
    r = need(qp.cur_ctrl) + CTRL_SZ
    if r == qp.qend:
        r = 0
    set_raddr(qp, r, wr["remote_addr"], wr["rkey"])
    qp.cur_data = r + RADDR_SZ
    qp.cur_size = (CTRL_SZ + RADDR_SZ) // 16
    qp.nreq += 1
    qp.cur_setters_cnt = 0


def wr_atomic(qp, wr, ib_op):
    common_wqe_init(qp, wr, ib_op)
    r = need(qp.cur_ctrl) + CTRL_SZ
    if r == qp.qend:
        r = 0
    set_raddr(qp, r, wr["remote_addr"], wr["rkey"])
    swap = wr.get("swap", 0) if ib_op == WR_CAS else 0
    set_atomic(qp, r + RADDR_SZ, ib_op, swap, wr.get("compare_add", 0))
    qp.cur_data = r + RADDR_SZ + ATOMIC_SZ
    if qp.cur_data == qp.qend:
        qp.cur_data = 0
    qp.cur_size = (CTRL_SZ + RADDR_SZ + ATOMIC_SZ) // 16
    qp.nreq += 1
    qp.cur_setters_cnt = 0


def wr_local_inv(qp, wr):
    common_wqe_init(qp, wr, WR_LOCAL_INV)
    qp.w(need(qp.cur_ctrl) + 12, be(wr.get("invalidate_rkey", 0), 4))
    seg, size = set_bind_wr_local_inv(qp, qp.cur_ctrl + CTRL_SZ, 1, qp.qpn)
    qp.cur_size = size
    qp.fm_cache = CTRL_SMALL_FENCE
    qp.nreq += 1
    wqe_finalize(qp)


def _set_sge(qp, lkey, addr, length):
    if not length:
        return
    qp.w(need(qp.cur_data), be(length, 4) + be(lkey, 4) + be(addr, 8))
    qp.cur_size += 1


def ud_count_or_finalize(qp):
    if qp.cur_setters_cnt == WQE_REQ_SETTERS_UD_XRC_DC - 1:
        wqe_finalize(qp)
    else:
        qp.cur_setters_cnt += 1


def _set_sge_list(qp, sges):
    d = need(qp.cur_data)
    if len(sges) > qp.max_gs:
        set_err(qp, ENOMEM)
        return
    for s in sges:
        if d == qp.qend:
            d = 0
        if not s["length"]:
            continue
        qp.w(d, be(s["length"], 4) + be(s["lkey"], 4) + be(s["addr"], 8))
        d += 16
        qp.cur_size += 1


def memcpy_to_wqe(qp, dest, data):
    n = len(data)
    if dest + n > qp.qend:
        copy = qp.qend - dest
        qp.w(dest, data[:copy])
        data = data[copy:]
        dest = 0
    qp.w(dest, data)
    return dest + len(data)


def _set_inline(qp, data):
    d = need(qp.cur_data)
    if len(data) > qp.max_inline:
        set_err(qp, ENOMEM)
        return
    qp.inl_wqe = 1
    if not data:
        return
    memcpy_to_wqe(qp, d + 4, data)
    qp.w(d, be(len(data) | INLINE_SEG, 4))
    qp.cur_size += div_round_up(len(data) + 4, 16)


def _set_inline_list(qp, bufs):
    d = need(qp.cur_data)
    wqe = d + 4
    tot = 0
    for b in bufs:
        tot += len(b)
        if tot > qp.max_inline:
            set_err(qp, ENOMEM)
            return
        wqe = memcpy_to_wqe(qp, wqe, b)
    qp.inl_wqe = 1
    if not tot:
        return
    qp.w(d, be(tot | INLINE_SEG, 4))
    qp.cur_size += div_round_up(tot + 4, 16)


def sge_bytes(s, off=0):
    if not s["length"] - off:
        return b""
    return sge_data(s)[off:s["length"]]


def wr_setter(qp, wr, setter):
    t = qp.qp_type
    sges = wr["sges"]
    if setter == "none":
        return
    if t == "RAW_PACKET":
        if setter == "set_sge":
            s = sges[0]
            addr, length = s["addr"], s["length"]
            if qp.cur_eth is not None:
                e, j, o = copy_eth_inline_headers(qp, [(addr, length, s)], qp.cur_eth,
                                                  lambda b: sge_data(b[2]))
                if e:
                    set_err(qp, e)
                    return
                if j:
                    qp.eth_dup_hdr = True
                addr += o
                length -= o
            _set_sge(qp, s["lkey"], addr, length)
            wqe_finalize(qp)
        elif setter == "set_sge_list":
            d = need(qp.cur_data)
            if len(sges) > qp.max_gs:
                set_err(qp, ENOMEM)
                return
            j, o = 0, 0
            if qp.cur_eth is not None:
                e, j, o = copy_eth_inline_headers(qp, [(s["addr"], s["length"], s) for s in sges],
                                                  qp.cur_eth, lambda b: sge_data(b[2]))
                if e:
                    set_err(qp, e)
                    return
            for i in range(j, len(sges)):
                s = sges[i]
                length = (s["length"] - o) & 0xffffffff
                if not length:
                    continue
                if d == qp.qend:
                    d = 0
                qp.w(d, be(length, 4) + be(s["lkey"], 4)
                     + be(s["addr"] + o, 8))
                d += 16
                qp.cur_size += 1
                o = 0
            wqe_finalize(qp)
        elif setter == "set_inline_data":
            s = sges[0]
            off = 0
            if qp.cur_eth is not None:
                e, j, o = copy_eth_inline_headers(qp, [(s["addr"], s["length"], s)], qp.cur_eth,
                                                  lambda b: sge_data(b[2]))
                if e:
                    set_err(qp, e)
                    return
                if j:
                    qp.eth_dup_hdr = True
                off = o
            _set_inline(qp, sge_bytes(s, off) if s["length"] - off else b"")
            wqe_finalize(qp)
        elif setter == "set_inline_data_list":
            d = need(qp.cur_data)
            wqe = d + 4
            j, o = 0, 0
            if qp.cur_eth is not None:
                e, j, o = copy_eth_inline_headers(qp, [(s["addr"], s["length"], s) for s in sges],
                                                  qp.cur_eth, lambda b: sge_data(b[2]))
                if e:
                    set_err(qp, e)
                    return
            tot = 0
            for i in range(j, len(sges)):
                s = sges[i]
                ln = s["length"] - o
                tot += ln
                if tot > qp.max_inline:
                    set_err(qp, EINVAL)
                    return
                wqe = memcpy_to_wqe(qp, wqe, sge_bytes(s, o))
                o = 0
            if tot:
                qp.w(d, be(tot | INLINE_SEG, 4))
                qp.cur_size += div_round_up(tot + 4, 16)
            qp.inl_wqe = 1
            wqe_finalize(qp)
        else:
            raise ModelError("setter %s" % setter)
        return
    ud = t == "UD"
    if setter == "set_sge":
        s = sges[0]
        _set_sge(qp, s["lkey"], s["addr"], s["length"])
    elif setter == "set_sge_list":
        _set_sge_list(qp, sges)
    elif setter == "set_inline_data":
        _set_inline(qp, sge_bytes(sges[0]))
    elif setter == "set_inline_data_list":
        _set_inline_list(qp, [sge_bytes(s) for s in sges])
    else:
        raise ModelError("setter %s" % setter)
    if ud:
        ud_count_or_finalize(qp)
    else:
        wqe_finalize(qp)


def wr_api(qp, wrs):
    # wr_start
    qp.cur_post_rb = qp.cur_post
    qp.fm_cache_rb = qp.fm_cache
    qp.err = 0
    qp.nreq = 0
    qp.inl_wqe = 0
    done = []
    for wr in wrs:
        op = wr["opcode_num"]
        t = qp.qp_type
        qp.pending_idx = None
        if t == "RAW_PACKET":
            if op == WR_SEND:
                wr_send_eth(qp, wr)
            elif op == WR_TSO:
                wr_send_tso(qp, wr)
            else:
                raise ModelError("no wr_* builder for opcode %d on RAW_PACKET" % op)
        elif op in (WR_SEND, WR_SEND_IMM) or (t == "RC" and op == WR_SEND_INV):
            wr_send(qp, wr, op)
            if op == WR_SEND_IMM:
                qp.w(need(qp.cur_ctrl) + 12, be(wr.get("imm_data_host", 0), 4))
            elif op == WR_SEND_INV:
                qp.w(need(qp.cur_ctrl) + 12, be(wr.get("invalidate_rkey", 0), 4))
        elif t == "RC" and op in (WR_RDMA_WRITE, WR_RDMA_WRITE_IMM, WR_RDMA_READ):
            wr_rdma(qp, wr, op)
            if op == WR_RDMA_WRITE_IMM:
                qp.w(need(qp.cur_ctrl) + 12, be(wr.get("imm_data_host", 0), 4))
        elif t == "RC" and op in (WR_CAS, WR_FAA):
            wr_atomic(qp, wr, op)
        elif t == "RC" and op == WR_LOCAL_INV:
            wr_local_inv(qp, wr)
        else:
            raise ModelError("no wr_* builder for opcode %d on %s" % (op, t))
        if qp.pending_idx is not None:
            done.append(qp.pending_idx)
        setter = wr.get("wr_api_setter", "none")
        if t == "UD":
            if wr.get("wr_api_ud_addr_first", 0):
                set_datagram(qp, need(qp.cur_ctrl) + CTRL_SZ, wr["ud.ah_av"], wr["ud.remote_qpn"],
                             wr["ud.remote_qkey"])
                ud_count_or_finalize(qp)
                wr_setter(qp, wr, setter)
            else:
                wr_setter(qp, wr, setter)
                set_datagram(qp, need(qp.cur_ctrl) + CTRL_SZ, wr["ud.ah_av"], wr["ud.remote_qpn"],
                             wr["ud.remote_qkey"])
                ud_count_or_finalize(qp)
        else:
            wr_setter(qp, wr, setter)
    # wr_complete
    if qp.err:
        qp.cur_post = qp.cur_post_rb
        qp.fm_cache = qp.fm_cache_rb
        return qp.err, -1
    qp.posted = done
    bf_copy_and_doorbell(qp, qp.nreq, qp.inl_wqe, qp.cur_size, qp.cur_ctrl)
    return 0, -1


# ---------------------------------------------------------------- case I/O
def parse_value(k, v):
    if k.endswith((".data", "tso.hdr", "ud.ah_av")):
        return bytes.fromhex(v)
    if k in ("api", "qp_type", "note") or k.endswith(".opcode") or k.endswith(".send_flags") \
            or k.endswith("wr_api_setter"):
        return v
    try:
        return int(v, 0)
    except ValueError:
        return v


def parse_file(path):
    cases = []
    cur = None
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            if line.startswith("case "):
                cur = {"name": line[5:].strip(), "in": [], "out": [], "lines": []}
                continue
            if line == "end":
                cases.append(cur)
                cur = None
                continue
            if cur is None:
                continue
            if line.startswith("wqebb ") or line.startswith("mask "):
                cur["out"].append(line)
                continue
            k, _, v = line.partition("=")
            if k.startswith("out."):
                cur["out"].append(line)
            else:
                cur["in"].append((k, v))
    return cases


def build_inputs(pairs):
    c = {}
    wrs = {}
    for k, v in pairs:
        if k.startswith("wr") and "." in k and k[2].isdigit():
            head, _, rest = k.partition(".")
            i = int(head[2:])
            wr = wrs.setdefault(i, {"sges": {}})
            if rest.startswith("sge") and "." in rest:
                sh, _, sk = rest.partition(".")
                j = int(sh[3:])
                wr["sges"].setdefault(j, {})[sk] = parse_value(sk if sk != "data" else ".data", v)
            else:
                wr[rest] = parse_value(rest, v)
        else:
            c[k] = parse_value(k, v)
    lst = []
    for i in sorted(wrs):
        wr = wrs[i]
        n = wr.get("num_sge", len(wr["sges"]))
        wr["sges"] = [wr["sges"].get(j, {"addr": 0, "length": 0, "lkey": 0}) for j in range(n)]
        if "opcode_num" not in wr:
            wr["opcode_num"] = OPC_NUMS.get(wr.get("opcode"), 0)
        wr.setdefault("send_flags_num", 0)
        lst.append(wr)
    c["wrs"] = lst
    return c


def run_case(c, with_qp=False):
    qp = QP(c)
    start = c["start_cur_post"]
    if c["api"] == "wr_api":
        ret, bad = wr_api(qp, c["wrs"])
    else:
        ret, bad = post_send(qp, c["wrs"])
    out = []
    out.append("out.ret=%d" % ret)
    out.append("out.bad_wr=%d" % bad)
    out.append("out.sq_cur_post=%d" % qp.cur_post)
    out.append("out.sq_head=%d" % qp.head)
    out.append("out.fm_cache=0x%02x" % qp.fm_cache)
    out.append("out.bf_offset_after=%d" % qp.bf_offset)
    if not ret or c["api"] != "wr_api":
        for idx in qp.posted:
            out.append("out.sq_slot%d=wrid:0x%016x,wqe_head:%d,wr_data:%d" % (
                idx, qp.wrid[idx], qp.wqe_head[idx], qp.wr_data[idx]))
    if qp.dbrec is not None:
        out.append("out.dbrec_written=1")
        out.append("out.dbrec_snd_offset=4")
        out.append("out.dbrec_bytes=a5a5a5a5%08x" % qp.dbrec)
        out.append("out.dbrec_mask=....xxxx")
        out.append("out.dbrec_snd_value=0x%08x" % qp.dbrec)
    else:
        out.append("out.dbrec_written=0")
        out.append("out.dbrec_snd_offset=4")
        out.append("out.dbrec_bytes=a5a5a5a5a5a5a5a5")
        out.append("out.dbrec_mask=........")
    if qp.uar is None:
        out.append("out.uar_write=none")
    else:
        kind, off, data, mask = qp.uar
        out.append("out.uar_write=%s" % kind)
        out.append("out.uar_offset=0x%x" % off)
        out.append("out.uar_len=%d" % len(data))
        out.append("out.uar_stale_bytes=%d" % mask.count("s"))
        out.append("out.uar_bytes=%s" % data.hex())
        out.append("out.uar_mask=%s" % mask)
    touched = 0
    cnt = qp.cnt
    for n in range(cnt):
        idx = (start + n) & (cnt - 1)
        o = idx * 64
        if any(qp.wr[o:o + 64]):
            touched += 1
            out.append("wqebb %d %s" % (idx, qp.mem[o:o + 64].hex()))
            out.append("mask %d %s" % (idx, "".join("x" if b else "." for b in qp.wr[o:o + 64])))
    out.append("out.touched_wqebbs=%d" % touched)
    return (out, qp) if with_qp else out


def cmd_check(path):
    cases = parse_file(path)
    bad = 0
    for cs in cases:
        c = build_inputs(cs["in"])
        try:
            got = run_case(c)
        except ModelError as e:
            print("FAIL %s: model error: %s" % (cs["name"], e))
            bad += 1
            continue
        exp = cs["out"]
        if got != exp:
            bad += 1
            print("FAIL %s" % cs["name"])
            ge, gg = set(exp), set(got)
            for line in exp:
                if line not in gg:
                    print("  expected: %s" % line)
            for line in got:
                if line not in ge:
                    print("  model:    %s" % line)
    print("%d/%d cases reproduced" % (len(cases) - bad, len(cases)))
    return 1 if bad else 0


def cmd_show(path, name):
    for cs in parse_file(path):
        if cs["name"] == name:
            print("\n".join(run_case(build_inputs(cs["in"]))))
            return 0
    return 1



# ---------------------------------------------------------------- generator
OVERHEAD = {"RC": 192, "UD": 64, "RAW_PACKET": 48}  # verbs.c _sq_overhead, default ops
MAX_SQ_DESC_SZ = 512

STD = {
    "RC": dict(qpn=0x000123, sq_wqe_cnt=64, sq_max_post=9, sq_max_gs=4, max_inline_data=252,
               eth_min_inline=0, qp_cap_cache=0, max_tso=0, max_tso_header=0, atomics_enabled=1),
    "UD": dict(qpn=0x000456, sq_wqe_cnt=64, sq_max_post=16, sq_max_gs=4, max_inline_data=188,
               eth_min_inline=0, qp_cap_cache=0, max_tso=0, max_tso_header=0, atomics_enabled=0),
    "RAW_PACKET": dict(qpn=0x000789, sq_wqe_cnt=64, sq_max_post=12, sq_max_gs=4,
                       max_inline_data=268, eth_min_inline=18, qp_cap_cache=0x10001,
                       max_tso=262144, max_tso_header=128, atomics_enabled=0),
}


def pow2_roundup(x):
    p = 1
    while p < x:
        p <<= 1
    return p


def create_qp(rng, t):
    """Sizes the way mlx5_calc_sq_size() would for a random ibv_qp_cap."""
    for _ in range(1000):
        ov = OVERHEAD[t]
        gs = rng.choice([1, 1, 2, 3, 4, 4, 5, 6, 8, 12, 16])
        inl = rng.choice([0, 0, 16, 28, 32, 60, 64, 100, 124, 188, 220, 252, 316])
        tso_hdr = rng.choice([0, 64, 96, 128, 128]) if t == "RAW_PACKET" else 0
        size = ov + align(tso_hdr, 16)
        if gs > (MAX_SQ_DESC_SZ - size) // 16:
            continue
        size += gs * 16
        inl_size = ov + align(4 + inl, 16) if inl else 0
        tot = max(size, inl_size)
        if tot > MAX_SQ_DESC_SZ:
            continue
        wqe_size = align(tot, 64)
        msw = rng.choice([1, 2, 4, 8, 8, 16, 16, 20, 32, 50, 64, 100, 128])
        wq = pow2_roundup(msw * wqe_size)
        cnt = wq // 64
        if cnt < 4 or cnt > 512:
            continue
        c = dict(STD[t])
        c.update(qpn=rng.randrange(1, 1 << 24), sq_wqe_cnt=cnt, sq_max_post=wq // wqe_size,
                 sq_max_gs=gs, max_inline_data=wqe_size - ov - 4)
        if t == "RAW_PACKET":
            c["max_tso_header"] = tso_hdr
            c["max_tso"] = rng.choice([262144, 262144, 65536]) if tso_hdr else rng.choice([0, 262144])
            c["eth_min_inline"] = rng.choice([18, 18, 0])
            c["qp_cap_cache"] = rng.choice([0x10001, 0x10001, 0x0])
        if t == "RC":
            c["atomics_enabled"] = rng.choice([1, 1, 1, 0])
        return c
    raise RuntimeError("no QP config")


def pattern(rng, n):
    a = rng.randrange(256)
    st = rng.choice([1, 3, 7, 11, 13])
    return bytes((a + st * i) & 0xff for i in range(n))


def eth_frame(rng, n, vlan=False, tcp=None):
    """A plausible Ethernet/IPv4 frame of n bytes (truncated/padded)."""
    dst = bytes([0x00, 0x11, 0x22, 0x33, 0x44, rng.randrange(256)])
    src = bytes([0x02, 0xaa, 0xbb, 0xcc, 0xdd, rng.randrange(256)])
    eh = dst + src + ((b"\x81\x00" + be(rng.randrange(4096), 2)) if vlan else b"") + b"\x08\x00"
    if tcp is None:
        tcp = rng.random() < 0.5
    l4 = (be(rng.randrange(1024, 65535), 2) + be(80, 2) + be(rng.randrange(1 << 32), 4)
          + be(0, 4) + b"\x50\x18\xff\xff" + b"\0\0\0\0") if tcp else \
        (be(rng.randrange(1024, 65535), 2) + be(4791, 2) + be(max(8, n - 34), 2) + b"\0\0")
    ip = b"\x45\x00" + be(max(20, n - len(eh)), 2) + be(rng.randrange(65536), 2) + b"\x40\x00" \
        + b"\x40" + (b"\x06" if tcp else b"\x11") + b"\0\0" + b"\x0a\x00\x00\x01\x0a\x00\x00\x02"
    f = eh + ip + l4
    if len(f) < n:
        f += pattern(rng, n - len(f))
    return f[:n]


def rand_av(rng, grh):
    av = bytearray(48)
    av[12] = rng.choice([0x00, 0x03, 0x30, 0x0e])  # stat_rate_sl
    av[13] = rng.randrange(0x80)                    # fl_mlid (src path bits)
    av[14:16] = be(rng.randrange(1, 0xc000), 2)     # rlid
    if grh:
        av[14:16] = be(rng.choice([0, rng.randrange(0xc000, 0x10000)]), 2)
        av[20:26] = bytes([0x00, 0x11, 0x22, rng.randrange(256), rng.randrange(256), rng.randrange(256)]) \
            if rng.random() < 0.5 else bytes(6)
        av[26] = rng.randrange(256)                 # tclass
        av[27] = rng.choice([64, 255, 1])           # hop_limit
        av[28:32] = be((1 << 30) | (rng.randrange(4) << 20) | rng.randrange(1 << 20), 4)
        av[32:48] = b"\xfe\x80" + bytes(6) + bytes(rng.randrange(256) for _ in range(8)) \
            if rng.random() < 0.5 else bytes(10) + b"\xff\xff" + bytes([10, 0, 0, rng.randrange(256)])
    return bytes(av)


class Gen:
    def __init__(self, seed):
        self.rng = random.Random(seed)
        self.addr = 0x0000000200001000
        self.wrid = 0x2000000000000000 | (seed & 0xffff) << 32

    def next_addr(self, n):
        a = self.addr
        self.addr += align(max(n, 1), 64)
        return a

    def sge(self, length, data=None, lkey=None, need_data=False):
        r = self.rng
        s = {"addr": self.next_addr(length), "length": length,
             "lkey": r.randrange(1, 1 << 32) if lkey is None else lkey}
        if data is not None:
            s["data"] = data
        elif need_data or length < 1024:
            s["data"] = pattern(r, length)
        return s

    def split(self, total, n, allow_zero=True):
        """Split total bytes into n pieces (some may be zero)."""
        r = self.rng
        if n <= 1:
            return [total]
        cuts = sorted(r.randrange(total + 1) for _ in range(n - 1))
        parts = [b - a for a, b in zip([0] + cuts, cuts + [total])]
        if not allow_zero and total >= n:
            parts = [max(1, p) for p in parts]
            parts[-1] = total - sum(parts[:-1])
            if parts[-1] < 1:
                return self.split(total, n, allow_zero)
        return parts


def flags_str(f):
    names = [n for b, n in FLAG_NAMES if f & b]
    return "|".join(names) if names else "NONE"


def fmt_case(name, note, c, wrs):
    L = ["case " + name]
    if note:
        L.append("note=" + note)
    L.append("api=" + c["api"])
    L.append("qp_type=" + c["qp_type"])
    L.append("qpn=0x%06x" % c["qpn"])
    for k in ("sq_wqe_cnt", "sq_max_post", "sq_max_gs", "max_inline_data", "sq_sig_all",
              "eth_min_inline"):
        L.append("%s=%d" % (k, c[k]))
    L.append("qp_cap_cache=0x%x" % c["qp_cap_cache"])
    for k in ("max_tso", "max_tso_header", "atomics_enabled", "start_cur_post", "start_head",
              "start_tail"):
        L.append("%s=%d" % (k, c[k]))
    L.append("start_fm_cache=0x%02x" % c["start_fm_cache"])
    L.append("bf_reg_offset=0x%x" % c["bf_reg_offset"])
    for k in ("bf_buf_size", "bf_offset_before", "bf_uuarn", "prefer_bf", "shut_up_bf"):
        L.append("%s=%d" % (k, c[k]))
    L.append("nwr=%d" % len(wrs))
    for i, w in enumerate(wrs):
        p = "wr%d." % i
        L.append(p + "opcode=" + OPC_NAMES.get(w["opcode_num"], "INVALID"))
        L.append(p + "opcode_num=%d" % w["opcode_num"])
        L.append(p + "wr_id=0x%016x" % w["wr_id"])
        L.append(p + "send_flags=" + flags_str(w["send_flags_num"]))
        L.append(p + "send_flags_num=0x%x" % w["send_flags_num"])
        if "imm_data_host" in w:
            L.append(p + "imm_data_host=0x%08x" % w["imm_data_host"])
        if "invalidate_rkey" in w:
            L.append(p + "invalidate_rkey=0x%08x" % w["invalidate_rkey"])
        if "remote_addr" in w:
            L.append(p + "remote_addr=0x%016x" % w["remote_addr"])
            L.append(p + "rkey=0x%08x" % w["rkey"])
        if "compare_add" in w:
            L.append(p + "compare_add=0x%016x" % w["compare_add"])
            L.append(p + "swap=0x%016x" % w["swap"])
        if "ud.ah_av" in w:
            L.append(p + "ud.remote_qpn=0x%06x" % w["ud.remote_qpn"])
            L.append(p + "ud.remote_qkey=0x%08x" % w["ud.remote_qkey"])
            L.append(p + "ud.ah_av=" + w["ud.ah_av"].hex())
        if "tso.hdr" in w:
            L.append(p + "tso.mss=%d" % w["tso.mss"])
            L.append(p + "tso.hdr_sz=%d" % w["tso.hdr_sz"])
            L.append(p + "tso.hdr=" + w["tso.hdr"].hex())
        if c["api"] == "wr_api":
            L.append(p + "wr_api_setter=" + w["wr_api_setter"])
            if c["qp_type"] == "UD":
                L.append(p + "wr_api_ud_addr_first=%d" % w["wr_api_ud_addr_first"])
        L.append(p + "num_sge=%d" % len(w["sges"]))
        for j, s in enumerate(w["sges"]):
            q = p + "sge%d." % j
            L.append(q + "addr=0x%016x" % s["addr"])
            L.append(q + "length=%d" % s["length"])
            L.append(q + "lkey=0x%08x" % s["lkey"])
            if "data" in s:
                L.append(q + "data=" + s["data"].hex())
    return L


def gen_one(g, i):
    r = g.rng
    api = "wr_api" if r.random() < 0.38 else "ibv_post_send"
    t = r.choices(["RC", "UD", "RAW_PACKET"], [45, 25, 30])[0]
    c = dict(STD[t]) if r.random() < 0.6 else create_qp(r, t)
    if t == "RAW_PACKET" and r.random() < 0.2:
        c["eth_min_inline"] = 0
    if t == "RAW_PACKET" and r.random() < 0.12:
        c["qp_cap_cache"] = 0
    if t == "RC" and r.random() < 0.12:
        c["atomics_enabled"] = 0
    c["api"] = api
    c["qp_type"] = t
    c["sq_sig_all"] = 1 if r.random() < 0.15 else 0
    tags = []
    if c["sq_sig_all"]:
        tags.append("sig_all")
    cnt, mp = c["sq_wqe_cnt"], c["sq_max_post"]

    # --- BlueFlame register
    kind = r.choices(["std", "odd", "uuar", "nc", "big", "small"], [45, 20, 12, 8, 8, 7])[0]
    c.update(bf_reg_offset=0x800, bf_buf_size=256, bf_offset_before=0, bf_uuarn=1)
    if kind == "odd":
        c["bf_offset_before"] = 256
        tags.append("bf_odd")
    elif kind == "uuar":
        u = r.randrange(1, 8)
        c.update(bf_uuarn=u, bf_reg_offset=0x800 + (u % 4) * 0x200,
                 bf_offset_before=r.choice([0, 256]))
        tags.append("uuar%d" % u)
    elif kind == "nc":
        c.update(bf_uuarn=0, bf_buf_size=0, bf_reg_offset=r.choice([0x800, 0xa00]))
        tags.append("nc_uar")
    elif kind == "big":
        c.update(bf_buf_size=512, bf_reg_offset=r.choice([0x800, 0xc00]),
                 bf_offset_before=r.choice([0, 512]))
        tags.append("bf512")
    elif kind == "small":
        c.update(bf_buf_size=128, bf_reg_offset=0x800 + r.randrange(4) * 0x100,
                 bf_offset_before=r.choice([0, 128]))
        tags.append("bf128")
    c["prefer_bf"] = 1 if r.random() < 0.25 else 0
    c["shut_up_bf"] = 1 if r.random() < 0.1 else 0
    if c["prefer_bf"]:
        tags.append("prefer_bf")
    if c["shut_up_bf"]:
        tags.append("shut_up_bf")

    # --- producer state
    pos = r.choices(["zero", "mid", "end", "w16", "w32", "big"], [30, 25, 22, 12, 3, 8])[0]
    if pos == "zero":
        cp = 0
    elif pos == "mid":
        cp = r.randrange(cnt)
    elif pos == "end":
        cp = cnt * r.randrange(0, 1000) + cnt - r.randrange(1, 4)
        tags.append("ring_end")
    elif pos == "w16":
        cp = 0x10000 * r.randrange(1, 3) - r.randrange(1, 4)
        tags.append("idx16_wrap")
    elif pos == "w32":
        cp = 0x100000000 - r.randrange(1, 4)
        tags.append("idx32_wrap")
    else:
        cp = r.randrange(1 << 31)
    head = cp if r.random() < 0.4 else max(0, cp - r.randrange(0, cnt))
    nwr = r.choices([1, 2, 3, 4, 5, 6, 8], [55, 12, 10, 9, 6, 4, 4])[0]
    o = r.choices([0, r.randrange(max(1, mp - nwr)), mp - nwr, mp - nwr + 1, mp - 1, mp],
                  [50, 38, 5, 3, 2, 2])[0]
    o = max(0, o)
    if o + nwr > mp:
        tags.append("sq_full" if o >= mp else "sq_fills")
    c["start_cur_post"] = cp
    c["start_head"] = head & 0xffffffff
    c["start_tail"] = (head - o) & 0xffffffff
    c["start_fm_cache"] = CTRL_SMALL_FENCE if (t != "RAW_PACKET" and r.random() < 0.1) else 0
    if c["start_fm_cache"]:
        tags.append("fm_cache")

    # --- work requests
    wrs = []
    err_at = r.randrange(nwr) if r.random() < 0.28 else -1
    for k in range(nwr):
        wrs.append(gen_wr(g, c, k == err_at, k))
    first = wrs[0]
    main = first["_tag"]
    if nwr > 1:
        tags.insert(0, "list%d" % nwr)
    pre = ("wr_" if api == "wr_api" else "") + {"RC": "rc", "UD": "ud", "RAW_PACKET": "raw"}[t]
    notes = [w["_note"] for w in wrs if w.get("_note")]
    name = "_".join([pre, main] + tags + ["r%04d" % i])
    for w in wrs:
        w.pop("_tag", None)
        w.pop("_note", None)
    return name, "; ".join(notes), c, wrs


OPS_POST = {
    "RC": [(WR_SEND, 22), (WR_SEND_IMM, 10), (WR_SEND_INV, 6), (WR_RDMA_WRITE, 16),
           (WR_RDMA_WRITE_IMM, 8), (WR_RDMA_READ, 10), (WR_CAS, 6), (WR_FAA, 6),
           (WR_LOCAL_INV, 4), (WR_DRIVER1, 1)],
    "UD": [(WR_SEND, 70), (WR_SEND_IMM, 30)],
    "RAW_PACKET": [(WR_SEND, 75), (WR_TSO, 25)],
}
OPS_WR = {
    "RC": [(WR_SEND, 22), (WR_SEND_IMM, 10), (WR_SEND_INV, 6), (WR_RDMA_WRITE, 16),
           (WR_RDMA_WRITE_IMM, 8), (WR_RDMA_READ, 10), (WR_CAS, 6), (WR_FAA, 6),
           (WR_LOCAL_INV, 4)],
    "UD": [(WR_SEND, 70), (WR_SEND_IMM, 30)],
    "RAW_PACKET": [(WR_SEND, 75), (WR_TSO, 25)],
}
SHORT = {WR_SEND: "send", WR_SEND_IMM: "send_imm", WR_SEND_INV: "send_inv",
         WR_RDMA_WRITE: "rdma_write", WR_RDMA_WRITE_IMM: "rdma_write_imm",
         WR_RDMA_READ: "rdma_read", WR_CAS: "atomic_cmp_swp", WR_FAA: "atomic_fetch_add",
         WR_LOCAL_INV: "local_inv", WR_TSO: "tso", WR_DRIVER1: "driver1"}


def gen_wr(g, c, make_err, k):
    r = g.rng
    t, api = c["qp_type"], c["api"]
    table = OPS_WR[t] if api == "wr_api" else OPS_POST[t]
    op = r.choices([o for o, _ in table], [w for _, w in table])[0]
    if api == "wr_api" and op in (WR_CAS, WR_FAA) and not c["atomics_enabled"]:
        # mlx5_qp_fill_wr_pfns refuses atomic send_ops_flags without
        # atomics: calling ibv_wr_atomic_* then is outside the API.
        op = WR_SEND
    g.wrid += 1
    w = {"opcode_num": op, "wr_id": g.wrid, "sges": []}
    f = 0
    if r.random() < 0.6:
        f |= F_SIGNALED
    if r.random() < 0.1:
        f |= F_FENCE
    if r.random() < 0.1:
        f |= F_SOLICITED
    if t == "RAW_PACKET" and r.random() < 0.4:
        f |= F_IP_CSUM
    tag = SHORT[op]
    note = None
    errkind = None
    setter = "set_sge"
    if make_err:
        choices = ["max_gs", "inline_long"]
        if api == "ibv_post_send":
            choices += ["opcode"]
        if t == "RC" and op in (WR_CAS, WR_FAA) and api == "ibv_post_send":
            choices += ["atomics"] * 3
        if t == "RAW_PACKET":
            choices += ["csum", "short"] if op == WR_SEND else ["csum", "tso_hdr"]
            if op == WR_TSO and api == "ibv_post_send":
                choices += ["tso_big"]  # the ibv_wr_* path never checks max_tso
        errkind = r.choice(choices)
    if op in (WR_SEND_IMM, WR_RDMA_WRITE_IMM):
        w["imm_data_host"] = r.randrange(1 << 32)
    if op in (WR_SEND_INV, WR_LOCAL_INV):
        w["invalidate_rkey"] = r.randrange(1 << 32)
    if op in (WR_RDMA_WRITE, WR_RDMA_WRITE_IMM, WR_RDMA_READ, WR_CAS, WR_FAA):
        w["remote_addr"] = r.choice([0x00007f1234560000, r.randrange(1 << 48) & ~7])
        w["rkey"] = r.randrange(1 << 32)
    if op in (WR_CAS, WR_FAA):
        w["compare_add"] = r.randrange(1 << 64)
        w["swap"] = r.randrange(1 << 64) if op == WR_CAS else 0
    if t == "UD":
        w["ud.remote_qpn"] = r.randrange(1 << 24)
        w["ud.remote_qkey"] = r.choice([0x11111111, r.randrange(1 << 32), 0x80010000])
        grh = r.random() < 0.5
        w["ud.ah_av"] = rand_av(r, grh)
        tag += "_grh" if grh else ""
        w["wr_api_ud_addr_first"] = r.randrange(2)
    if errkind == "opcode":
        w["opcode_num"] = r.choice([12, 15, 100])
        note = "opcode %d is past DRIVER1: EINVAL" % w["opcode_num"]
        tag = "bad_opcode"
    if errkind == "atomics":
        c["atomics_enabled"] = 0
        note = "QP created without atomic support: EOPNOTSUPP"
        tag += "_atomics_disabled"
    if errkind == "csum":
        c["qp_cap_cache"] = 0
        f |= F_IP_CSUM
        note = "IP_CSUM without checksum caps: EINVAL"
        tag += "_csum_unsupported"
    maxgs, maxinl = c["sq_max_gs"], c["max_inline_data"]

    # payload shape
    if op == WR_LOCAL_INV:
        setter = "none"
        sges = []
    elif op in (WR_CAS, WR_FAA):
        setter = "set_sge"
        sges = [g.sge(8)]
        if api == "wr_api" and r.random() < 0.3:
            setter = "set_sge_list"
    elif op == WR_TSO:
        hmax = c["max_tso_header"]
        vlan = r.random() < 0.3
        hs = r.choice([54, 58, 66, 14, 42, hmax, 120]) if hmax else 54
        if vlan and hs == 54:
            hs = 58
        if errkind == "tso_hdr" or hmax < 14:
            hs = r.choice([10, hmax + 1, 13]) if hmax >= 14 else 54
            note = "TSO header size %d outside [14, %d]: EINVAL" % (hs, hmax)
            tag += "_bad_hdr"
        hs = max(1, hs)
        w["tso.hdr"] = eth_frame(r, hs, vlan=vlan, tcp=True)
        w["tso.hdr_sz"] = hs
        w["tso.mss"] = r.choice([1460, 1448, 536, 8960, 9000])
        tag += "_hdr%d" % hs
        n = r.choice([1, 1, 2, 3, maxgs])
        mt = c["max_tso"]
        lens = [r.choice([1460 * r.randrange(1, 7), r.randrange(1, 9000), 4096, 0 if n > 1 else 100])
                for _ in range(n)]
        if errkind == "tso_big":
            lens[-1] = mt + 1 + r.randrange(64)
            note = "payload larger than max_tso: EINVAL"
            tag += "_over_max_tso"
        sges = [g.sge(x) for x in lens]
        setter = r.choice(["set_sge", "set_sge_list"]) if n == 1 else "set_sge_list"
        if api == "ibv_post_send" and r.random() < 0.08 and sum(lens) <= maxinl:
            f |= F_INLINE
    elif t == "RAW_PACKET":
        inline = r.random() < 0.35
        emi = c["eth_min_inline"]
        if inline:
            limit = maxinl + (emi if emi else 0)
            tot = r.choice([64, 60, 42, 18, 19, 34, 100, limit, limit - 1,
                            r.randrange(min(18, limit), limit + 1)])
        else:
            tot = r.choice([60, 64, 64, 128, 256, 1514, 512, 18, 14, 42, 9000, r.randrange(18, 1515)])
        if errkind == "inline_long":
            inline = True
            tot = maxinl + (emi if emi else 0) + r.randrange(1, 40)
            note = "inline frame beyond max_inline_data"
            tag += "_inline_too_long"
        if errkind == "short":
            tot = r.choice([12, 14, 17, 0 if emi else 12])
            if emi == 0:
                c["eth_min_inline"] = 18
            note = "%d-byte frame < 18-byte inline header: EINVAL" % tot
            tag += "_frame_too_short"
        n = r.choices([1, 2, 3, maxgs], [60, 20, 10, 10])[0]
        n = max(1, min(n, maxgs))
        frame = eth_frame(r, tot, vlan=r.random() < 0.15)
        if n == 1:
            parts = [tot]
        else:
            shape = r.choice(["hdr_split", "rand", "first_small"])
            if shape == "hdr_split" and tot >= 18:
                parts = [r.choice([14, 18, 6, 10, 34])]
                parts = [min(parts[0], tot)] + g.split(tot - min(parts[0], tot), n - 1)
            elif shape == "first_small":
                parts = g.split(min(tot, 17), n - 1) + [tot - min(tot, 17)]
            else:
                parts = g.split(tot, n)
        sges = []
        p = 0
        for x in parts:
            sges.append(g.sge(x, data=frame[p:p + x], lkey=r.choice([0x3579, r.randrange(1 << 32)])))
            p += x
        tag += "_frame%d" % tot
        if api == "wr_api":
            if inline:
                setter = "set_inline_data" if n == 1 else "set_inline_data_list"
            else:
                setter = "set_sge" if n == 1 else "set_sge_list"
            if n == 1 and r.random() < 0.3:
                setter = "set_sge_list" if not inline else "set_inline_data_list"
            for s in sges:
                if inline:
                    s["lkey"] = 0
        elif inline:
            f |= F_INLINE
        if inline:
            tag += "_inline"
        if n > 1:
            tag += "_sge%d" % n
    else:
        inline = op != WR_RDMA_READ and r.random() < 0.4
        if op == WR_DRIVER1:
            inline = False
        if inline:
            tot = r.choice([0, 1, 4, 12, 16, 28, 44, 60, 64, maxinl, maxinl - 1, maxinl - 12,
                            r.randrange(0, maxinl + 1)])
            tot = max(0, min(tot, maxinl))
            if errkind == "inline_long":
                tot = maxinl + r.choice([1, 4, 16, 100])
                note = "inline data beyond max_inline_data: ENOMEM"
                tag += "_inline_too_long"
            n = r.choices([1, 2, 3, 4], [60, 20, 10, 10])[0]
            n = max(1, min(n, maxgs))
            sges = [g.sge(x, need_data=True, lkey=0 if api == "wr_api" else None)
                    for x in g.split(tot, n)]
            tag += "_inline%d" % tot
            if n > 1:
                tag += "_sge%d" % n
            if api == "wr_api":
                setter = "set_inline_data" if n == 1 else "set_inline_data_list"
                if n == 1 and r.random() < 0.3:
                    setter = "set_inline_data_list"
            else:
                f |= F_INLINE
        else:
            n = r.choices([0, 1, 2, 3, maxgs, maxgs], [6, 45, 15, 10, 12, 12])[0]
            n = min(n, maxgs)
            if errkind in ("max_gs", "inline_long"):
                n = maxgs + r.choice([1, 1, 2])
                note = "%d SGEs > max_gs %d: ENOMEM" % (n, maxgs)
                tag += "_too_many_sges"
                errkind = "max_gs"
            lens = [r.choice([0, 1, 8, 64, 100, 256, 512, 1024, 4096, 65536, r.randrange(1, 9000)])
                    if r.random() < 0.9 else 0 for _ in range(n)]
            sges = [g.sge(x) for x in lens]
            tag += "_sge%d" % n
            if 0 in lens:
                tag += "_zero_len"
            if api == "wr_api":
                setter = "set_sge" if n == 1 and r.random() < 0.6 else "set_sge_list"
                if n == 0:
                    setter = "set_sge_list"
    if errkind == "max_gs" and t == "RAW_PACKET" and not note:
        pass
    if errkind == "max_gs" and "too_many" not in tag and op not in (WR_LOCAL_INV,):
        extra = maxgs + 1 - len(sges)
        for _ in range(max(0, extra)):
            sges.append(g.sge(r.choice([64, 128, 0])))
        if api == "wr_api":
            setter = "set_inline_data_list" if setter.startswith("set_inline") else "set_sge_list"
        note = "%d SGEs > max_gs %d: ENOMEM" % (len(sges), maxgs)
        tag += "_too_many_sges"
    if api == "wr_api" and setter == "set_sge" and not sges:
        setter = "set_sge_list"
    if api == "wr_api" and setter in ("set_inline_data", "set_sge") and len(sges) != 1:
        setter = setter + "_list" if setter == "set_inline_data" else "set_sge_list"
    w["send_flags_num"] = f
    w["sges"] = sges
    w["wr_api_setter"] = setter
    w["_tag"] = tag
    w["_note"] = note
    return w


HEADER = """# mlx5 send-side cases generated by tests/refcheck/send_ref.py gen %d %d
# (an independent model of rdma-core v44.0 libmlx5's send path, NOT libmlx5
# itself).  Same format as /work/shared/libmlx5-sample/wqe-cases.txt:
#
# Format: line oriented. Lines starting with '#' are comments.
# A case starts with 'case <name>' and ends with 'end'; blank line between.
#   key=value  inputs (no 'out.' prefix) and outputs ('out.' prefix)
#   wqebb <idx> <hex128> / mask <idx> <64 chars>  ('x' written, '.' untouched;
#   the SQ is pre-filled with 0xa5). UAR masks: 's' = written, value copied
#   from an untouched SQ byte (shown as a5).
"""


def cmd_gen(n, seed, keep_quirks=False):
    g = Gen(seed)
    out = [HEADER % (n, seed)]
    made = 0
    tries = 0
    while made < n:
        tries += 1
        if tries > n * 50:
            raise RuntimeError("generator keeps producing invalid cases")
        name, note, c, wrs = gen_one(g, made)
        lines = fmt_case(name, note, c, wrs)
        # re-parse what we print so the model sees exactly the file's inputs
        pairs = [tuple(l.split("=", 1)) for l in lines[1:]]
        cc = build_inputs([p for p in pairs if p[0] != "note"])
        try:
            res, qp = run_case(cc, with_qp=True)
        except ModelError:
            continue
        quirk = []
        if qp.stale_sgcp:
            quirk.append("stale_sgcp")
        if qp.eth_dup_hdr:
            quirk.append("eth_dup_hdr")
        if qp.tso_wrapped and len(wrs) > 1:
            quirk.append("tso_wrap_in_list")
        if quirk and not keep_quirks:
            continue
        if quirk:
            lines[0] += "_quirk_" + "_".join(quirk)
        out.append("\n".join(lines + res + ["end"]) + "\n")
        made += 1
    sys.stdout.write("\n".join(out))
    return 0


def main(argv):
    if len(argv) >= 3 and argv[1] == "check":
        return cmd_check(argv[2])
    if len(argv) >= 4 and argv[1] == "show":
        return cmd_show(argv[2], argv[3])
    if len(argv) >= 4 and argv[1] == "gen":
        return cmd_gen(int(argv[2]), int(argv[3]), "--keep-quirks" in argv[4:])
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
