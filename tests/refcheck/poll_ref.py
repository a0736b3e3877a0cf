#!/usr/bin/env python3
"""Independent model of the completion side of rdma-core v44.0 libmlx5.

Models, from the public rdma-core v44.0 sources (providers/mlx5/cq.c, qp.c,
mlx5dv.h, libibverbs/verbs.h), what libmlx5 does when it polls a CQ:

  * mlx5_poll_cq / mlx5_poll_cq_v1 -> poll_cq -> mlx5_poll_one ->
    mlx5_get_next_cqe (owner bit / INVALID opcode test, cons_index++) ->
    mlx5_parse_cqe (handle_good_req, handle_responder, error CQEs through
    mlx5_handle_error_cqe, QP lookup by QPN for cqe_version 0 and by user
    index for cqe_version 1, sq.tail = wqe_head[idx] + 1, ++rq.tail,
    scatter-to-CQE via mlx5_copy_to_send_wqe), update_cons_index.
  * the ibv_cq_ex API installed by mlx5_cq_fill_pfns: start_poll / next_poll
    / end_poll (lazy parse) and the read_* accessors.
  * a minimal ibv_post_send (RC: SEND, RDMA_WRITE, RDMA_READ, atomics) for
    the 'prepost_send' inputs of scatter-to-CQE cases: WQE layout that
    mlx5_copy_to_send_wqe walks, sq bookkeeping, doorbell64 bytes.

Usage:
  poll_ref.py check FILE        re-derive every output of every case in FILE
  poll_ref.py gen N SEED        print N random cases in the golden format

Standard library only. The golden format is documented in the header of
/work/shared/libmlx5-sample/cqe-cases.txt (copied into tests/golden).
"""

import random
import sys

# ---------------------------------------------------------------- constants
MASK24 = 0xFFFFFF
U32 = 0xFFFFFFFF

# CQE opcodes (op_own >> 4)
CQE_REQ, CQE_RESP_WR_IMM, CQE_RESP_SEND, CQE_RESP_SEND_IMM, CQE_RESP_SEND_INV = 0, 1, 2, 3, 4
CQE_RESIZE_CQ, CQE_NO_PACKET, CQE_SIG_ERR = 5, 6, 12
CQE_REQ_ERR, CQE_RESP_ERR, CQE_INVALID = 13, 14, 15
INLINE_SCATTER_32, INLINE_SCATTER_64 = 0x4, 0x8

# WQE opcodes (sop_drop_qpn >> 24 of a requester CQE)
OP_NOP, OP_SEND_INVAL, OP_RDMA_WRITE, OP_RDMA_WRITE_IMM = 0x00, 0x01, 0x08, 0x09
OP_SEND, OP_SEND_IMM, OP_TSO, OP_RDMA_READ = 0x0A, 0x0B, 0x0E, 0x10
OP_ATOMIC_CS, OP_ATOMIC_FA, OP_MASKED_CS, OP_MASKED_FA = 0x11, 0x12, 0x14, 0x15
OP_BIND_MW, OP_LOCAL_INVAL, OP_SET_PSV, OP_UMR, OP_MMO = 0x18, 0x1B, 0x20, 0x25, 0x2F

# ibv_wc_opcode
WC_SEND, WC_RDMA_WRITE, WC_RDMA_READ, WC_COMP_SWAP, WC_FETCH_ADD = 0, 1, 2, 3, 4
WC_BIND_MW, WC_LOCAL_INV, WC_TSO, WC_RECV, WC_RECV_RDMA_WITH_IMM = 5, 6, 7, 128, 129
WC_DRIVER2 = 136
WC_OPCODE_NAMES = {
    0: "SEND", 1: "RDMA_WRITE", 2: "RDMA_READ", 3: "COMP_SWAP", 4: "FETCH_ADD",
    5: "BIND_MW", 6: "LOCAL_INV", 7: "TSO", 9: "ATOMIC_WRITE", 128: "RECV",
    129: "RECV_RDMA_WITH_IMM", 130: "TM_ADD", 131: "TM_DEL", 132: "TM_SYNC",
    133: "TM_RECV", 134: "TM_NO_TAG", 135: "DRIVER1", 136: "DRIVER2", 137: "DRIVER3",
}

# ibv_wc_flags
WC_GRH, WC_WITH_IMM, WC_IP_CSUM_OK, WC_WITH_INV = 1, 2, 4, 8
WC_FLAG_NAMES = [(1, "GRH"), (2, "WITH_IMM"), (4, "IP_CSUM_OK"), (8, "WITH_INV"),
                 (16, "TM_SYNC_REQ"), (32, "TM_MATCH"), (64, "TM_DATA_VALID")]

# ibv_wc_status
ST_SUCCESS, ST_LOC_LEN, ST_LOC_QP_OP, ST_LOC_PROT, ST_FLUSH = 0, 1, 2, 4, 5
ST_MW_BIND, ST_BAD_RESP, ST_LOC_ACCESS, ST_REM_INV_REQ = 6, 7, 8, 9
ST_REM_ACCESS, ST_REM_OP, ST_RETRY_EXC, ST_RNR_RETRY_EXC = 10, 11, 12, 13
ST_REM_ABORT, ST_GENERAL = 16, 21
STATUS_NAMES = [
    "success", "local length error", "local QP operation error",
    "local EE context operation error", "local protection error",
    "Work Request Flushed Error", "memory management operation error",
    "bad response error", "local access error", "remote invalid request error",
    "remote access error", "remote operation error",
    "transport retry counter exceeded", "RNR retry counter exceeded",
    "local RDD violation error", "remote invalid RD request", "aborted error",
    "invalid EE context number", "invalid EE context state", "fatal error",
    "response timeout error", "general error", "TM error", "TM software rendezvous",
]

# CQE error syndromes (mlx5_err_cqe.syndrome) -> ibv_wc_status
SYNDROMES = {
    0x01: ST_LOC_LEN, 0x02: ST_LOC_QP_OP, 0x04: ST_LOC_PROT, 0x05: ST_FLUSH,
    0x06: ST_MW_BIND, 0x10: ST_BAD_RESP, 0x11: ST_LOC_ACCESS, 0x12: ST_REM_INV_REQ,
    0x13: ST_REM_ACCESS, 0x14: ST_REM_OP, 0x15: ST_RETRY_EXC, 0x16: ST_RNR_RETRY_EXC,
    0x22: ST_REM_ABORT,
}
SYNDROME_NAMES = {
    0x01: "local_length", 0x02: "local_qp_op", 0x04: "local_prot", 0x05: "wr_flush",
    0x06: "mw_bind", 0x10: "bad_resp", 0x11: "local_access", 0x12: "remote_inval_req",
    0x13: "remote_access", 0x14: "remote_op", 0x15: "transport_retry_exc",
    0x16: "rnr_retry_exc", 0x22: "remote_aborted",
}

MLX5_RX_CSUM_VALID = 1 << 16  # mlx5.h: qp_cap_cache bit (not 0x4)
CQ_OK, CQ_EMPTY, CQ_POLL_ERR, ENOENT = 0, -1, -2, 2

# struct ibv_wc field order, offset, size (x86-64)
WC_FIELDS = [("wr_id", 0, 8), ("status", 8, 4), ("opcode", 12, 4), ("vendor_err", 16, 4),
             ("byte_len", 20, 4), ("imm_data", 24, 4), ("qp_num", 28, 4), ("src_qp", 32, 4),
             ("wc_flags", 36, 4), ("pkey_index", 40, 2), ("slid", 42, 2), ("sl", 44, 1),
             ("dlid_path_bits", 45, 1)]

# ibv_wr_opcode names used by prepost_send, -> mlx5 opcode
WR_OPCODES = {"SEND": OP_SEND, "SEND_WITH_IMM": OP_SEND_IMM, "RDMA_WRITE": OP_RDMA_WRITE,
              "RDMA_WRITE_WITH_IMM": OP_RDMA_WRITE_IMM, "RDMA_READ": OP_RDMA_READ,
              "ATOMIC_CMP_AND_SWP": OP_ATOMIC_CS, "ATOMIC_FETCH_AND_ADD": OP_ATOMIC_FA}


def bswap32(v):
    return int.from_bytes((v & U32).to_bytes(4, "little"), "big")


def be(b, off, n):
    return int.from_bytes(bytes(b[off:off + n]), "big")


def num(s):
    s = s.strip()
    return int(s, 0) if s.lower().startswith(("0x", "-0x")) else int(s)


class Cqe:
    """Field view of a 64-byte struct mlx5_cqe64 / mlx5_err_cqe."""

    def __init__(self, b):
        self.b = bytes(b)

    ml_path = property(lambda s: s.b[17])
    slid = property(lambda s: be(s.b, 22, 2))
    flags_rqpn = property(lambda s: be(s.b, 24, 4))
    hds_ip_ext = property(lambda s: s.b[28])
    l4_hdr_type_etc = property(lambda s: s.b[29])
    vlan_info = property(lambda s: be(s.b, 30, 2))
    srqn_uidx = property(lambda s: be(s.b, 32, 4))
    imm_be = property(lambda s: be(s.b, 36, 4))  # be32toh(imm_inval_pkey)
    app = property(lambda s: s.b[40])
    app_op = property(lambda s: s.b[41])
    byte_cnt = property(lambda s: be(s.b, 44, 4))
    timestamp = property(lambda s: be(s.b, 48, 8))
    sop_drop_qpn = property(lambda s: be(s.b, 56, 4))
    wqe_counter = property(lambda s: be(s.b, 60, 2))
    op_own = property(lambda s: s.b[63])
    opcode = property(lambda s: s.b[63] >> 4)
    vendor_err_synd = property(lambda s: s.b[54])
    syndrome = property(lambda s: s.b[55])


def csum_ok(c):
    ok = (c.hds_ip_ext & 0x6) == 0x6 and ((c.l4_hdr_type_etc >> 2) & 3) == 2
    return WC_IP_CSUM_OK if ok else 0


# ---------------------------------------------------------------- the model
class Model:
    def __init__(self, inp, cqes, prepost):
        self.inp = inp
        g = lambda k, d=None: num(inp[k]) if k in inp else d
        self.cqe_ver = g("cqe_version")
        self.ncqe = g("cq_ncqe")
        self.cqe_sz = g("cqe_size", 64)
        self.cqn = g("cqn")
        self.ci = g("cons_index_before") & U32
        self.qp_type = inp["qp_type"]
        self.qpn = g("qpn")
        self.uidx = g("qp_uidx")
        self.cap = g("qp_cap_cache")
        self.sq_cnt = g("sq_wqe_cnt")
        self.sq_wrid = [(g("sq_wrid_base") + i) & (2**64 - 1) for i in range(self.sq_cnt)]
        self.sq_wqe_head = [(g("sq_wqe_head_base") + i) & U32 for i in range(self.sq_cnt)]
        self.sq_wr_data = [0] * self.sq_cnt
        self.sq_tail = g("sq_tail_before") & U32
        self.rq_cnt = g("rq_wqe_cnt")
        self.rq_wrid = [(g("rq_wrid_base") + i) & (2**64 - 1) for i in range(self.rq_cnt)]
        self.rq_tail = g("rq_tail_before") & U32
        self.ne = g("ne")
        # ring: 64-byte cqe64 per slot (cqe_size 64 only is modelled)
        self.ring = [bytes(63) + b"\xf0" for _ in range(self.ncqe)]
        for slot, b in cqes:
            self.ring[slot] = b
        # send queue WQE memory (64-byte WQEBBs), scatter buffers
        self.sqbuf = {}
        self.mem = {}  # addr -> bytearray (sge buffers)
        self.uar = None
        self.prepost = prepost
        if prepost:
            self.post_send(prepost)

    # -- a minimal mlx5_post_send for the prepost_send inputs
    def post_send(self, pp):
        cur_post = pp["start_cur_post"]
        head = pp["start_cur_post"]  # harness: sq.head starts equal to cur_post
        ctrl_bytes = None
        for nreq, wr in enumerate(pp["wrs"]):
            idx = cur_post & (self.sq_cnt - 1)
            op = WR_OPCODES[wr["opcode"]]
            segs = []  # list of 16-byte segment descriptors after ctrl
            if op in (OP_RDMA_READ, OP_RDMA_WRITE, OP_RDMA_WRITE_IMM):
                segs.append(("raddr",))
            elif op in (OP_ATOMIC_CS, OP_ATOMIC_FA):
                segs.append(("raddr",))
                segs.append(("atomic",))
            for (addr, length, lkey) in wr["sges"]:
                if length:
                    bc = 8 if op in (OP_ATOMIC_CS, OP_ATOMIC_FA) else length
                    segs.append(("data", addr, bc, lkey))
            size = 1 + len(segs)
            # lay the segments out in the ring with wrap at qend
            pos = idx * 4  # in 16-byte units
            opmod_idx_opcode = ((cur_post & 0xFFFF) << 8) | op
            qpn_ds = size | (self.qpn << 8)
            self.sqbuf[pos % (self.sq_cnt * 4)] = ("ctrl", opmod_idx_opcode, qpn_ds)
            p = pos + 1
            for s in segs:
                if s[0] == "data" and p == self.sq_cnt * 4:
                    p = 0
                self.sqbuf[p % (self.sq_cnt * 4)] = s
                p += 1
            self.sq_wrid[idx] = wr["wr_id"]
            self.sq_wqe_head[idx] = (head + nreq) & U32
            self.sq_wr_data[idx] = 0
            cur_post += (size * 16 + 63) // 64
            ctrl_bytes = opmod_idx_opcode.to_bytes(4, "big") + qpn_ds.to_bytes(4, "big")
            for (addr, length, lkey) in wr["sges"]:
                self.mem.setdefault(addr, None)
        if pp["wrs"]:
            self.uar = ("doorbell64", 0x800, ctrl_bytes)

    def copy_to_scat(self, start, src, size, maxn, wrap_len):
        """copy_to_scat over data segments at sq positions start..; returns (status, left)."""
        if size == 0:
            return ST_SUCCESS, 0
        p = start
        for _ in range(maxn):
            s = self.sqbuf.get(p % wrap_len)
            if s is None or s[0] != "data":
                raise Unmodelled("scatter to an unknown WQE segment")
            _, addr, bc, lkey = s
            copy = min(size, bc)
            self.mem[addr] = bytes(src[:copy]) + (b"" if self.mem.get(addr) is None
                                                  else self.mem[addr][copy:])
            size -= copy
            if size == 0:
                return ST_SUCCESS, 0
            src = src[copy:]
            p += 1
        return ST_LOC_LEN, size

    def copy_to_send_wqe(self, wqe_ctr, src, size):
        idx = wqe_ctr & (self.sq_cnt - 1)
        if self.qp_type != "RC":
            return ST_GENERAL
        ctrl = self.sqbuf.get(idx * 4)
        if ctrl is None or ctrl[0] != "ctrl":
            raise Unmodelled("scatter-to-CQE without a posted WQE")
        op = ctrl[1] & 0xFF
        if op == OP_RDMA_READ:
            off = 2
        elif op in (OP_ATOMIC_CS, OP_ATOMIC_FA):
            off = 3
        else:
            return ST_REM_INV_REQ
        maxn = (ctrl[2] & 0x3F) - off
        qend = self.sq_cnt * 4
        scat = idx * 4 + off
        if scat + maxn > qend:
            tmp = qend - scat
            st, left = self.copy_to_scat(scat, src, size, tmp, qend)
            if st == ST_SUCCESS:
                return st
            src = src[size - left:]
            size = left
            maxn -= tmp
            scat = 0
        st, _ = self.copy_to_scat(scat, src, size, maxn, qend)
        return st

    def scatter_src(self, slot, op_own):
        """Bytes a scatter copy reads: from the CQE start (32) or cqe - 1 (64)."""
        if self.cqe_sz != 64:
            # 128-byte CQEs: the requester path copies from the slot's first
            # half (32) or from one byte before the slot (64, `void *cqe - 1`)
            raise Unmodelled("scatter-to-CQE with 128-byte CQEs")
        flat = b"".join(self.ring)
        start = slot * 64
        if op_own & INLINE_SCATTER_32:
            return flat[start:] + flat[:start]
        raise Unmodelled("INLINE_SCATTER_64 needs 128-byte CQEs")

    # -- CQ access
    def get_sw_cqe(self, n):
        c = Cqe(self.ring[n & (self.ncqe - 1)])
        if c.opcode != CQE_INVALID and not ((c.op_own & 1) ^ (1 if n & self.ncqe else 0)):
            return c
        return None

    def get_next_cqe(self):
        slot = self.ci & (self.ncqe - 1)
        c = self.get_sw_cqe(self.ci)
        if c is None:
            return None, None
        self.ci = (self.ci + 1) & U32
        return c, slot

    def find_qp(self, key, by_uidx):
        if by_uidx:
            return key == self.uidx
        return key == self.qpn

    # -- mlx5_parse_cqe; wc is a dict (non lazy) or None (lazy, returns state)
    def parse(self, c, slot, wc, lazy, ex):
        qpn = c.sop_drop_qpn & MASK24
        if lazy:
            ex["cqe"] = c
            ex["csum"] = False
        else:
            wc["wc_flags"] = 0
            wc["qp_num"] = qpn
        op = c.opcode
        if op == CQE_REQ:
            key = (c.srqn_uidx & MASK24) if self.cqe_ver else qpn
            if not self.find_qp(key, self.cqe_ver):
                return CQ_POLL_ERR
            wqe_ctr = c.wqe_counter
            idx = wqe_ctr & (self.sq_cnt - 1)
            sop = c.sop_drop_qpn >> 24
            if lazy:
                err = 0
                if sop in (OP_UMR, OP_SET_PSV, OP_NOP, OP_MMO):
                    ex["cached_opcode"] = self.sq_wr_data[idx]
                elif sop in (OP_RDMA_READ, OP_ATOMIC_CS, OP_ATOMIC_FA):
                    blen = c.byte_cnt if sop == OP_RDMA_READ else 8
                    if c.op_own & (INLINE_SCATTER_32 | INLINE_SCATTER_64):
                        err = self.copy_to_send_wqe(wqe_ctr, self.scatter_src(slot, c.op_own), blen)
                ex["wr_id"] = self.sq_wrid[idx]
                ex["status"] = err
                ex["raw_wqe"] = self.sq_wr_data[idx] == WC_DRIVER2
            else:
                self.handle_good_req(wc, c, idx)
                err = 0
                if c.op_own & (INLINE_SCATTER_32 | INLINE_SCATTER_64):
                    if "byte_len" not in wc:
                        # size argument is the uninitialised wc->byte_len; only
                        # harmless when the copy fails before using it
                        if self.qp_type != "RC" or self.sq_ctrl_op(idx) not in (
                                OP_RDMA_READ, OP_ATOMIC_CS, OP_ATOMIC_FA):
                            err = self.copy_to_send_wqe(wqe_ctr, b"", 0)
                        else:
                            raise Unmodelled("scatter size from an unwritten byte_len")
                    else:
                        err = self.copy_to_send_wqe(wqe_ctr, self.scatter_src(slot, c.op_own),
                                                    wc["byte_len"])
                wc["wr_id"] = self.sq_wrid[idx]
                wc["status"] = err
            self.sq_tail = (self.sq_wqe_head[idx] + 1) & U32
            return CQ_OK
        if op in (CQE_RESP_WR_IMM, CQE_RESP_SEND, CQE_RESP_SEND_IMM, CQE_RESP_SEND_INV):
            if not self.resp_ctx(c, qpn):
                return CQ_POLL_ERR
            if lazy:
                if c.app == 1:  # tag matching needs an SRQ
                    return CQ_POLL_ERR
                if self.cap & MLX5_RX_CSUM_VALID:
                    ex["csum"] = True
                ex["wr_id"] = self.rq_pop()
                if c.op_own & (INLINE_SCATTER_32 | INLINE_SCATTER_64):
                    raise Unmodelled("responder scatter-to-CQE (RQ WQE contents)")
                ex["status"] = 0
            else:
                wc["status"] = self.handle_responder(wc, c)
            return CQ_OK
        if op == CQE_NO_PACKET:
            if c.app != 1:
                return CQ_POLL_ERR
            if not self.resp_ctx(c, qpn):
                return CQ_POLL_ERR
            return CQ_POLL_ERR  # not an SRQ
        if op == CQE_SIG_ERR:
            return CQ_POLL_ERR  # no mkey registered
        if op in (CQE_REQ_ERR, CQE_RESP_ERR):
            srqn_uidx = c.srqn_uidx & MASK24
            st = SYNDROMES.get(c.syndrome, ST_GENERAL)
            if lazy:
                ex["status"] = st
            else:
                wc["status"] = st
                wc["vendor_err"] = c.vendor_err_synd
            if op == CQE_REQ_ERR:
                key = srqn_uidx if self.cqe_ver else qpn
                if not self.find_qp(key, self.cqe_ver):
                    return CQ_POLL_ERR
                idx = c.wqe_counter & (self.sq_cnt - 1)
                (ex if lazy else wc)["wr_id"] = self.sq_wrid[idx]
                self.sq_tail = (self.sq_wqe_head[idx] + 1) & U32
            else:
                if not self.resp_ctx(c, qpn):
                    return CQ_POLL_ERR
                (ex if lazy else wc)["wr_id"] = self.rq_pop()
            return CQ_OK
        # RESIZE_CQ and reserved opcodes: nothing else written
        return CQ_OK

    def sq_ctrl_op(self, idx):
        ctrl = self.sqbuf.get(idx * 4)
        return None if ctrl is None else ctrl[1] & 0xFF

    def resp_ctx(self, c, qpn):
        srqn_uidx = c.srqn_uidx & MASK24
        if self.cqe_ver:
            return srqn_uidx == self.uidx
        if srqn_uidx:
            return False  # would look up an SRQ; none exists
        return qpn == self.qpn

    def rq_pop(self):
        w = self.rq_wrid[self.rq_tail & (self.rq_cnt - 1)]
        self.rq_tail = (self.rq_tail + 1) & U32
        return w

    def handle_good_req(self, wc, c, idx):
        sop = c.sop_drop_qpn >> 24
        if sop == OP_RDMA_WRITE_IMM:
            wc["wc_flags"] |= WC_WITH_IMM
            wc["opcode"] = WC_RDMA_WRITE
        elif sop == OP_RDMA_WRITE:
            wc["opcode"] = WC_RDMA_WRITE
        elif sop == OP_SEND_IMM:
            wc["wc_flags"] |= WC_WITH_IMM
            wc["opcode"] = WC_SEND
        elif sop in (OP_SEND, OP_SEND_INVAL):
            wc["opcode"] = WC_SEND
        elif sop == OP_RDMA_READ:
            wc["opcode"] = WC_RDMA_READ
            wc["byte_len"] = c.byte_cnt
        elif sop == OP_ATOMIC_CS:
            wc["opcode"] = WC_COMP_SWAP
            wc["byte_len"] = 8
        elif sop == OP_ATOMIC_FA:
            wc["opcode"] = WC_FETCH_ADD
            wc["byte_len"] = 8
        elif sop in (OP_UMR, OP_SET_PSV, OP_NOP, OP_MMO):
            wc["opcode"] = self.sq_wr_data[idx]
        elif sop == OP_TSO:
            wc["opcode"] = WC_TSO
        if self.sq_wr_data[idx] == WC_DRIVER2:
            wc["opcode"] = WC_DRIVER2

    def handle_responder(self, wc, c):
        wc["byte_len"] = c.byte_cnt
        if self.cap & MLX5_RX_CSUM_VALID:
            wc["wc_flags"] |= csum_ok(c)
        wc["wr_id"] = self.rq_pop()
        if c.op_own & (INLINE_SCATTER_32 | INLINE_SCATTER_64):
            raise Unmodelled("responder scatter-to-CQE (RQ WQE contents)")
        op = c.opcode
        if op == CQE_RESP_WR_IMM:
            wc["opcode"] = WC_RECV_RDMA_WITH_IMM
            wc["wc_flags"] |= WC_WITH_IMM
            wc["imm_data"] = c.imm_be
        elif op == CQE_RESP_SEND:
            wc["opcode"] = WC_RECV
        elif op == CQE_RESP_SEND_IMM:
            wc["opcode"] = WC_RECV
            wc["wc_flags"] |= WC_WITH_IMM
            wc["imm_data"] = c.imm_be
        elif op == CQE_RESP_SEND_INV:
            wc["opcode"] = WC_RECV
            wc["wc_flags"] |= WC_WITH_INV
            wc["imm_data"] = bswap32(c.imm_be)  # invalidated_rkey in host order
        wc["slid"] = c.slid
        wc["sl"] = (c.flags_rqpn >> 24) & 0xF
        wc["src_qp"] = c.flags_rqpn & MASK24
        wc["dlid_path_bits"] = c.ml_path & 0x7F
        if (c.flags_rqpn >> 28) & 3:
            wc["wc_flags"] |= WC_GRH
        wc["pkey_index"] = c.imm_be & 0xFFFF
        return ST_SUCCESS

    # -- the two APIs
    def poll_cq(self):
        wcs = []
        err = CQ_OK
        npolled = 0
        while npolled < self.ne:
            c, slot = self.get_next_cqe()
            if c is None:
                err = CQ_EMPTY
                break
            wc = {}
            err = self.parse(c, slot, wc, False, None)
            if err != CQ_OK:
                break
            wcs.append(wc)
            npolled += 1
        dbrec = self.ci & MASK24
        ret = err if err == CQ_POLL_ERR else npolled
        return ret, wcs, dbrec

    def ex_reads(self, ex):
        c = ex["cqe"]
        op = c.opcode
        sop = c.sop_drop_qpn >> 24
        # read_opcode
        if op == CQE_RESP_WR_IMM:
            rop = WC_RECV_RDMA_WITH_IMM
        elif op in (CQE_RESP_SEND, CQE_RESP_SEND_IMM, CQE_RESP_SEND_INV):
            rop = WC_RECV
        elif op == CQE_REQ:
            if ex.get("raw_wqe"):
                rop = WC_DRIVER2
            else:
                rop = {OP_RDMA_WRITE_IMM: WC_RDMA_WRITE, OP_RDMA_WRITE: WC_RDMA_WRITE,
                       OP_SEND_IMM: WC_SEND, OP_SEND: WC_SEND, OP_SEND_INVAL: WC_SEND,
                       OP_RDMA_READ: WC_RDMA_READ, OP_ATOMIC_CS: WC_COMP_SWAP,
                       OP_ATOMIC_FA: WC_FETCH_ADD, OP_TSO: WC_TSO}.get(sop, 0)
                if sop in (OP_UMR, OP_SET_PSV, OP_NOP, OP_MMO):
                    rop = ex.get("cached_opcode", 0)
        else:
            rop = 0
        flags = csum_ok(c) if ex.get("csum") else 0
        if op in (CQE_RESP_WR_IMM, CQE_RESP_SEND_IMM):
            flags |= WC_WITH_IMM
        elif op == CQE_RESP_SEND_INV:
            flags |= WC_WITH_INV
        # mlx5_cq_read_wc_flags: the tag-matching flags from app/app_op,
        # whatever the CQE opcode (found by tests/oracle/libmlx5/cqe_gen).
        if c.app == 1:
            if c.app_op in (0xA, 0xB, 0xC):
                flags |= 32 | 64
            elif c.app_op in (0x1, 0x9):
                flags |= 32
            elif c.app_op == 0x2:
                flags |= 64
        if (c.flags_rqpn >> 28) & 3:
            flags |= WC_GRH
        imm = bswap32(c.imm_be) if op == CQE_RESP_SEND_INV else c.imm_be
        return [
            ("read_opcode", str(rop)), ("read_opcode_name", opname(rop)),
            ("read_vendor_err", "0x%02x" % c.vendor_err_synd),
            ("read_wc_flags", "0x%x" % flags), ("read_wc_flags_names", flagnames(flags)),
            ("read_byte_len", str(c.byte_cnt)), ("read_imm_data", "0x%08x" % imm),
            ("read_qp_num", "0x%06x" % (c.sop_drop_qpn & MASK24)),
            ("read_src_qp", "0x%06x" % (c.flags_rqpn & MASK24)),
            ("read_slid", "0x%04x" % c.slid), ("read_sl", str((c.flags_rqpn >> 24) & 0xF)),
            ("read_dlid_path_bits", str(c.ml_path & 0x7F)),
            ("read_completion_ts", "0x%016x" % c.timestamp),
            ("read_cvlan", "0x%04x" % c.vlan_info),
            ("read_flow_tag", "0x%06x" % (c.sop_drop_qpn & MASK24)),
        ]

    def run(self):
        out = []
        api = self.inp["api"]
        if api.startswith("ibv_poll_cq"):
            ret, wcs, dbrec = self.poll_cq()
            out.append("out.ret=%d" % ret)
            if ret > 0:
                for i, wc in enumerate(wcs):
                    out += render_wc(i, wc)
            dbrec_written = True
        elif api.startswith("cq_ex"):
            ex = {}
            entries = []
            c, slot = self.get_next_cqe()
            if c is None:
                sret = ENOENT
            else:
                sret = self.parse(c, slot, None, True, ex)
            out.append("out.start_poll_ret=%d" % sret)
            if sret == 0:
                entries.append(("start_poll_ret", 0, self.ex_snapshot(ex)))
                while len(entries) < self.ne:
                    c, slot = self.get_next_cqe()
                    r = ENOENT if c is None else self.parse(c, slot, None, True, ex)
                    entries.append(("next_poll_ret", r, self.ex_snapshot(ex) if r == 0 else None))
                    if r != 0:
                        break
            out.append("out.n_entries=%d" % len(entries))
            for i, (k, r, snap) in enumerate(entries):
                out.append("ex%d.%s=%d" % (i, k, r))
                if snap is not None:
                    out += ["ex%d.%s=%s" % (i, a, b) for a, b in snap]
            out.append("out.end_poll_called=%d" % (1 if sret == 0 else 0))
            dbrec_written = sret == 0
            dbrec = self.ci & MASK24
        else:
            raise Unmodelled("api " + api)
        if self.prepost:
            for k, wr in enumerate(self.prepost["wrs"]):
                for j, (addr, length, lkey) in enumerate(wr["sges"]):
                    v = self.mem.get(addr)
                    if v is None or len(v) < length:
                        raise Unmodelled("sge buffer not fully written by the scatter")
                    out.append("out.buf.send%d.sge%d=%s" % (k, j, v[:length].hex()))
        out.append("out.cons_index_after=0x%x" % self.ci)
        out.append("out.sq_tail_after=%d" % self.sq_tail)
        out.append("out.rq_tail_after=%d" % self.rq_tail)
        if dbrec_written:
            out.append("out.cq_dbrec_written=1")
            out.append("out.cq_dbrec_bytes=%08xa5a5a5a5" % dbrec)
            out.append("out.cq_dbrec_mask=xxxx....")
        else:
            out.append("out.cq_dbrec_written=0")
            out.append("out.cq_dbrec_bytes=a5a5a5a5a5a5a5a5")
            out.append("out.cq_dbrec_mask=........")
        if self.uar:
            out.append("out.uar_write=%s" % self.uar[0])
            out.append("out.uar_offset=0x%x" % self.uar[1])
            out.append("out.uar_len=%d" % len(self.uar[2]))
            out.append("out.uar_bytes=%s" % self.uar[2].hex())
        else:
            out.append("out.uar_write=none")
        return out

    def ex_snapshot(self, ex):
        if "status" not in ex:
            # RESIZE / reserved opcode first: libmlx5's cq_ex leaves wr_id
            # and status as an earlier poll left them (the oracle's fill).
            raise Unmodelled("cq_ex completion without wr_id/status (stale in libmlx5)")
        st = ex["status"]
        return [("wr_id", "0x%016x" % ex["wr_id"]), ("status", str(st)),
                ("status_name", STATUS_NAMES[st])] + self.ex_reads(ex)


class Unmodelled(Exception):
    pass


def opname(op):
    return WC_OPCODE_NAMES.get(op, "UNKNOWN")


def flagnames(f):
    n = [name for bit, name in WC_FLAG_NAMES if f & bit]
    return "|".join(n) if n else "NONE"


def render_wc(i, wc):
    out = []
    for name, _, _ in WC_FIELDS:
        if name not in wc:
            continue
        v = wc[name]
        if name == "wr_id":
            s = "0x%016x" % v
        elif name in ("qp_num", "src_qp"):
            s = "0x%06x" % v
        elif name == "vendor_err":
            s = "0x%02x" % v
        elif name == "imm_data":
            s = "0x%08x" % v
        elif name == "wc_flags":
            s = "0x%x" % v
        elif name == "slid":
            s = "0x%04x" % v
        else:
            s = str(v)
        out.append("wc%d.%s=%s" % (i, name, s))
        if name == "status":
            out.append("wc%d.status_name=%s" % (i, STATUS_NAMES[v]))
        if name == "opcode":
            out.append("wc%d.opcode_name=%s" % (i, opname(v)))
        if name == "wc_flags":
            out.append("wc%d.wc_flags_names=%s" % (i, flagnames(v)))
    unw = [n for n, _, _ in WC_FIELDS if n not in wc]
    out.append("wc%d.unwritten=%s" % (i, ",".join(unw) if unw else "none"))
    raw = bytearray(b"\xa5" * 48)
    for name, off, size in WC_FIELDS:
        if name in wc:
            v = wc[name]
            if name == "imm_data":  # stored big endian (imm) / host (inv rkey, swapped back)
                raw[off:off + 4] = v.to_bytes(4, "big")
            else:
                raw[off:off + size] = (v & ((1 << (8 * size)) - 1)).to_bytes(size, "little")
    out.append("wc%d.raw=%s" % (i, raw.hex()))
    return out


# ---------------------------------------------------------------- file format
INPUT_ORDER = ["api", "cqe_version", "cq_ncqe", "cqe_size", "cqn", "cons_index_before",
               "qp_type", "qpn", "qp_uidx", "qp_cap_cache", "sq_wqe_cnt", "sq_wrid_base",
               "sq_wqe_head_base", "sq_tail_before", "rq_wqe_cnt", "rq_wrid_base",
               "rq_tail_before", "ne"]


def parse_file(text):
    cases = []
    cur = None
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        if line.startswith("case "):
            cur = {"name": line[5:].strip(), "lines": [], "inp": {}, "cqes": [], "out": []}
            continue
        if cur is None:
            continue
        if line == "end":
            cases.append(cur)
            cur = None
            continue
        cur["lines"].append(line)
        if line.startswith("cqe "):
            _, slot, hx = line.split()
            cur["cqes"].append((int(slot), bytes.fromhex(hx)))
        elif line.startswith(("out.", "wc", "ex")):
            cur["out"].append(line)
        else:
            k, v = line.split("=", 1)
            cur["inp"][k] = v
    return cases


def parse_prepost(inp):
    if "prepost_send_nwr" not in inp:
        return None
    wrs = []
    for k in range(num(inp["prepost_send_nwr"])):
        p = "prepost_send%d." % k
        sges = []
        for j in range(num(inp[p + "num_sge"])):
            d = dict(kv.split(":", 1) for kv in inp[p + "sge%d" % j].split(","))
            sges.append((num(d["addr"]), num(d["length"]), num(d["lkey"])))
        wrs.append({"opcode": inp[p + "opcode"], "wr_id": num(inp[p + "wr_id"]), "sges": sges})
    return {"start_cur_post": num(inp["prepost_send_start_cur_post"]), "wrs": wrs}


def run_case(case):
    m = Model(case["inp"], case["cqes"], parse_prepost(case["inp"]))
    return m.run()


def check(path):
    with open(path) as f:
        cases = parse_file(f.read())
    bad = 0
    for c in cases:
        try:
            got = run_case(c)
        except Unmodelled as e:
            print("UNMODELLED %s: %s" % (c["name"], e))
            bad += 1
            continue
        if got != c["out"]:
            bad += 1
            print("FAIL %s" % c["name"])
            for i in range(max(len(got), len(c["out"]))):
                a = c["out"][i] if i < len(c["out"]) else "<none>"
                b = got[i] if i < len(got) else "<none>"
                if a != b:
                    print("  want %s\n  got  %s" % (a, b))
    print("%d/%d cases reproduced" % (len(cases) - bad, len(cases)))
    return 1 if bad else 0


# ---------------------------------------------------------------- generator
QPS = {
    "RC": dict(qpn=0x000123, uidx=0x000007, cap=0x0),
    "UD": dict(qpn=0x000456, uidx=0x000008, cap=0x0),
    "RAW_PACKET": dict(qpn=0x000789, uidx=0x000009, cap=0x10001),
}

REQ_OPS = {  # name -> (mlx5 opcode, allowed qp types)
    "send": (OP_SEND, ("RC", "UD", "RAW_PACKET")),
    "send_imm": (OP_SEND_IMM, ("RC", "UD")),
    "send_inv": (OP_SEND_INVAL, ("RC",)),
    "rdma_write": (OP_RDMA_WRITE, ("RC",)),
    "rdma_write_imm": (OP_RDMA_WRITE_IMM, ("RC",)),
    "rdma_read": (OP_RDMA_READ, ("RC",)),
    "atomic_cmp_swp": (OP_ATOMIC_CS, ("RC",)),
    "atomic_fetch_add": (OP_ATOMIC_FA, ("RC",)),
    "masked_atomic_cmp_swp": (OP_MASKED_CS, ("RC",)),
    "masked_atomic_fetch_add": (OP_MASKED_FA, ("RC",)),
    "bind_mw": (OP_UMR, ("RC",)),
    "local_inv": (OP_UMR, ("RC",)),
    "nop": (OP_NOP, ("RC", "UD", "RAW_PACKET")),
    "tso": (OP_TSO, ("RAW_PACKET",)),
}
RESP_OPS = {"send": CQE_RESP_SEND, "send_imm": CQE_RESP_SEND_IMM,
            "send_inv": CQE_RESP_SEND_INV, "rdma_write_imm": CQE_RESP_WR_IMM}
RESP_OPS_BY_QP = {"RC": ["send", "send_imm", "send_inv", "rdma_write_imm"],
                  "UD": ["send", "send_imm"], "RAW_PACKET": ["send"]}


class Gen:
    def __init__(self, rnd):
        self.r = rnd

    def base(self, api="v1", qp="RC"):
        q = QPS[qp]
        cap = q["cap"]
        if qp == "RAW_PACKET" and self.r.random() < 0.3:
            cap = 0x1  # raw QP without MLX5_RX_CSUM_VALID
        if qp != "RAW_PACKET" and self.r.random() < 0.1:
            cap = 0x10000
        inp = {
            "api": {"v1": "ibv_poll_cq(mlx5_poll_cq_v1)", "v0": "ibv_poll_cq(mlx5_poll_cq)",
                    "ex": "cq_ex(start_poll/next_poll/end_poll)"}[api],
            "cqe_version": "0" if api == "v0" else "1",
            "cq_ncqe": "64", "cqe_size": "128" if self.r.random() < 0.12 else "64",
            "cqn": "0x0000a1", "cons_index_before": "0x0",
            "qp_type": qp, "qpn": "0x%06x" % q["qpn"], "qp_uidx": "0x%06x" % q["uidx"],
            "qp_cap_cache": "0x%x" % cap, "sq_wqe_cnt": "64",
            "sq_wrid_base": "0x5100000000000000", "sq_wqe_head_base": "1000",
            "sq_tail_before": "0", "rq_wqe_cnt": "64", "rq_wrid_base": "0x5200000000000000",
            "rq_tail_before": "0", "ne": "4",
        }
        return inp

    def ts(self):
        return 0x0000123456789A00 | self.r.randrange(256) if self.r.random() < 0.7 \
            else self.r.getrandbits(64)

    def cqe(self, opcode, owner, sop_op, qpn, uidx, wqe_counter, byte_cnt=0, imm=0,
            flags_rqpn=0, slid=0, ml_path=0, hds=0, l4=0, vlan=0, app=0, app_op=0,
            scatter=0, junk=False, vendor=None, syndrome=None, data32=None):
        b = bytearray(64)
        if junk:  # arbitrary bytes in fields that the completion type ignores
            for i in list(range(0, 17)) + [18, 19, 20, 21, 42, 43]:
                b[i] = self.r.randrange(256)
        if data32 is not None:
            b[0:32] = data32
        b[17] = ml_path
        b[22:24] = slid.to_bytes(2, "big")
        b[24:28] = flags_rqpn.to_bytes(4, "big")
        b[28] = hds
        b[29] = l4
        b[30:32] = vlan.to_bytes(2, "big")
        b[32:36] = uidx.to_bytes(4, "big")
        if self.r.random() < 0.1:
            b[32] = self.r.randrange(1, 256)  # lro_num_seg: not part of srqn_uidx
        b[36:40] = imm.to_bytes(4, "big")
        b[40] = app
        b[41] = app_op
        b[44:48] = byte_cnt.to_bytes(4, "big")
        b[48:56] = self.ts().to_bytes(8, "big")
        if vendor is not None:
            b[54] = vendor
            b[55] = syndrome
        b[56:60] = ((sop_op << 24) | qpn).to_bytes(4, "big")
        b[60:62] = wqe_counter.to_bytes(2, "big")
        b[63] = (opcode << 4) | scatter | owner
        return bytes(b)

    # ---- pieces
    def req_cqe(self, inp, opname, wqe_counter, owner=0, uidx=None, qpn=None):
        r = self.r
        sop = REQ_OPS[opname][0]
        q_qpn = num(inp["qpn"]) if qpn is None else qpn
        q_uidx = num(inp["qp_uidx"]) if uidx is None else uidx
        if inp["cqe_version"] == "0":
            q_uidx = 0 if r.random() < 0.7 else r.randrange(1 << 24)
        elif qpn is None and r.random() < 0.08:
            q_qpn = r.randrange(1 << 24)  # found by user index: any QPN is reported
        byte_cnt = 0
        if sop == OP_RDMA_READ:
            byte_cnt = r.choice([0, 1, 64, 128, 4096, 65536, r.randrange(1 << 31)])
        elif r.random() < 0.3:
            byte_cnt = r.randrange(1 << 16)
        junk = r.random() < 0.3
        flags = r.getrandbits(32) if junk else 0
        return self.cqe(CQE_REQ, owner, sop, q_qpn, q_uidx, wqe_counter, byte_cnt=byte_cnt,
                        flags_rqpn=flags, slid=r.getrandbits(16) if junk else 0,
                        ml_path=r.getrandbits(8) if junk else 0,
                        vlan=r.getrandbits(16) if junk else 0, junk=junk)

    def resp_cqe(self, inp, opname, owner=0, uidx=None, qpn=None):
        r = self.r
        qp = inp["qp_type"]
        q_qpn = num(inp["qpn"]) if qpn is None else qpn
        q_uidx = num(inp["qp_uidx"]) if uidx is None else uidx
        if inp["cqe_version"] == "0":
            q_uidx = 0
        grh = r.random() < 0.5
        g = r.choice([1, 2, 3]) if grh else 0
        sl = r.randrange(16)
        src = r.randrange(1 << 24) if qp == "UD" else (0 if r.random() < 0.7 else r.randrange(1 << 24))
        flags_rqpn = (g << 28) | (sl << 24) | src
        if qp == "RC" and r.random() < 0.5:
            flags_rqpn = (sl << 24) if r.random() < 0.5 else 0
        hds = 0
        l4 = 0
        if qp == "RAW_PACKET" or r.random() < 0.2:
            l3t = r.choice([0, 1, 2, 2, 3])
            ok = r.choice([0, 2, 4, 6, 6])
            hds = ok | (r.randrange(256) & 0xF9 if r.random() < 0.3 else 0)
            l4 = (r.randrange(8) << 4) | (l3t << 2) | r.randrange(4)
        imm = r.getrandbits(32)
        wc = r.getrandbits(16) if r.random() < 0.2 else 0
        app = 1 if r.random() < 0.03 else 0  # TM app: cq_ex refuses it without an SRQ
        sop = r.randrange(256) if r.random() < 0.15 else 0  # not part of the QPN
        return self.cqe(RESP_OPS[opname], owner, sop, q_qpn, q_uidx, wc, app=app,
                        app_op=r.randrange(16) if app else 0,
                        byte_cnt=r.choice([0, 1, 60, 72, 100, 256, 1500, 4096, r.randrange(1 << 31)]),
                        imm=imm, flags_rqpn=flags_rqpn, slid=r.getrandbits(16),
                        ml_path=r.getrandbits(8), hds=hds, l4=l4,
                        vlan=r.getrandbits(16) if r.random() < 0.3 else 0)

    def err_cqe(self, inp, side, syndrome, wqe_counter, owner=0):
        r = self.r
        q_qpn = num(inp["qpn"])
        q_uidx = num(inp["qp_uidx"])
        if inp["cqe_version"] == "0":
            q_uidx = 0
        vendor = r.choice([0x80, 0x81, 0x84, 0x88, 0x8c, 0x42, 0x46, 0x4a, 0x68, 0x93, 0x00,
                           0x05, r.randrange(256)])
        opcode = CQE_REQ_ERR if side == "req" else CQE_RESP_ERR
        sop = r.choice([0x0a, 0x08, 0x10, 0x00]) if side == "req" else 0
        b = bytearray(self.cqe(opcode, owner, sop, q_qpn, q_uidx, wqe_counter,
                               vendor=vendor, syndrome=syndrome))
        b[48:54] = bytes(6)
        if r.random() < 0.2:
            b[44:48] = r.getrandbits(32).to_bytes(4, "big")
        return bytes(b)

    def pick_syndrome(self):
        r = self.r
        if r.random() < 0.85:
            return r.choice(sorted(SYNDROMES))
        return r.choice([0x00, 0x03, 0x07, 0x15 + 2, 0x20, 0x21, 0x23, 0x93, 0xff,
                         r.randrange(256)])

    # ---- case kinds
    def finish(self, name, inp, cqes, note=None, prepost=None):
        lines = []
        if note:
            lines.append("note=" + note)
        for k in INPUT_ORDER:
            lines.append("%s=%s" % (k, inp[k]))
        pp = None
        if prepost:
            lines += prepost[0]
            pp = prepost[1]
        lines.append("ncqe_in=%d" % len(cqes))
        for slot, b in cqes:
            lines.append("cqe %d %s" % (slot, b.hex()))
        m = Model(inp, cqes, pp)
        out = m.run()
        return "case %s\n%s\n%s\nend\n" % (name, "\n".join(lines), "\n".join(out))

    def owner_for(self, ncqe, ci):
        return 1 if ci & ncqe else 0

    def k_req(self, api="v1"):
        r = self.r
        opname = r.choice(list(REQ_OPS))
        qp = r.choice(REQ_OPS[opname][1])
        inp = self.base(api, qp)
        self.vary_sq(inp)
        wqe = self.pick_wqe_counter(inp)
        c = self.req_cqe(inp, opname, wqe)
        pre = {"v1": "req", "v0": "v0_req", "ex": "ex_req"}[api]
        return self.finish("%s_%s%s" % (pre, opname, "" if qp == "RC" else "_" + qp.lower()),
                           inp, [(0, c)])

    def vary_sq(self, inp):
        r = self.r
        if r.random() < 0.5:
            inp["sq_tail_before"] = str(r.choice([0, 3, 60, 63, 1000, 1060, 65535, 0xfffffffe]))
        if r.random() < 0.3:
            inp["sq_wqe_head_base"] = str(r.choice([0, 1000, 65530, 0xfffffff0]))
        if r.random() < 0.2:
            inp["sq_wqe_cnt"] = str(r.choice([8, 16, 256]))

    def pick_wqe_counter(self, inp):
        r = self.r
        cnt = num(inp["sq_wqe_cnt"])
        return r.choice([0, 1, 5, cnt - 1, cnt, cnt + 3, 40 % cnt, r.randrange(65536), 65535])

    def k_resp(self, api="v1"):
        r = self.r
        qp = r.choice(["RC", "RC", "UD", "RAW_PACKET"])
        opname = r.choice(RESP_OPS_BY_QP[qp])
        inp = self.base(api, qp)
        inp["rq_tail_before"] = str(r.choice([0, 3, 5, 13, 21, 63, 64, 65535, 0xffffffff]))
        if r.random() < 0.15:
            inp["rq_wqe_cnt"] = str(r.choice([1, 16, 256]))
        c = self.resp_cqe(inp, opname)
        pre = {"v1": "resp", "v0": "v0_resp", "ex": "ex_resp"}[api]
        return self.finish("%s_%s_%s" % (pre, opname, qp.lower()), inp, [(0, c)])

    def k_err(self, api="v1"):
        r = self.r
        side = r.choice(["req", "resp"])
        qp = r.choice(["RC", "RC", "UD", "RAW_PACKET"])
        inp = self.base(api, qp)
        syn = self.pick_syndrome()
        if side == "req":
            self.vary_sq(inp)
            wqe = self.pick_wqe_counter(inp)
        else:
            inp["rq_tail_before"] = str(r.choice([0, 21, 63, 64, 0xffffffff]))
            wqe = r.choice([0, r.randrange(65536)])
        c = self.err_cqe(inp, side, syn, wqe)
        sname = SYNDROME_NAMES.get(syn, "unknown_0x%02x" % syn)
        pre = {"v1": "", "v0": "v0_", "ex": "ex_"}[api]
        return self.finish("%s%s_err_%s" % (pre, side, sname), inp, [(0, c)])

    def k_empty(self):
        r = self.r
        api = r.choice(["v1", "ex", "v0"])
        inp = self.base(api, "RC")
        ncqe = r.choice([8, 64, 256])
        inp["cq_ncqe"] = str(ncqe)
        ci = r.choice([0, 1, ncqe - 1, ncqe, ncqe + 5, 2 * ncqe - 1, 0xffffffff & ~(ncqe - 1)])
        inp["cons_index_before"] = "0x%x" % ci
        cqes = []
        note = "freshly initialised ring: nothing consumed"
        if r.random() < 0.6:
            # stale CQE at the CI slot: previous lap's owner bit, or INVALID opcode
            slot = ci & (ncqe - 1)
            own = self.owner_for(ncqe, ci)
            if r.random() < 0.5:
                c = self.req_cqe(inp, "send", 0, owner=own ^ 1)
                note = "CQE at the CI slot has the previous lap's owner bit"
            else:
                c = bytearray(self.req_cqe(inp, "send", 0, owner=own))
                c[63] = 0xf0 | own
                c = bytes(c)
                note = "CQE at the CI slot has opcode INVALID"
            cqes.append((slot, c))
        pre = {"v1": "empty", "v0": "empty_v0", "ex": "ex_empty"}[api]
        return self.finish("%s_ci_0x%x" % (pre, ci), inp, cqes, note=note)

    def k_multi(self, kind):
        """mixed / wrap cases: several CQEs from ci, optional stale one after."""
        r = self.r
        api = r.choice(["v1", "v1", "ex", "v0"])
        qp = r.choice(["RC", "RC", "UD", "RAW_PACKET"])
        inp = self.base(api, qp)
        ncqe = 64
        ci = 0
        if kind == "wrap":
            ncqe = r.choice([8, 16, 64])
            ci = r.choice([ncqe - 1, ncqe - 2, 2 * ncqe - 2, 3 * ncqe - 1, 0xffffffff,
                           0xfffffffe, 0x00ffffff, 0x00fffffe])
        inp["cq_ncqe"] = str(ncqe)
        inp["cons_index_before"] = "0x%x" % ci
        inp["ne"] = str(r.choice([1, 2, 3, 4, 4, 8] + ([0] if api != "ex" else [])))
        inp["rq_tail_before"] = str(r.choice([0, 4, 62, 63]))
        sq_cnt = num(inp["sq_wqe_cnt"])
        nav = r.randrange(1, 7)
        cqes = []
        wqe = r.randrange(sq_cnt)
        for k in range(nav):
            n = (ci + k) & U32
            own = self.owner_for(ncqe, n)
            t = r.random()
            if t < 0.4:
                ops = [o for o, (_, qps) in REQ_OPS.items() if qp in qps]
                wqe = (wqe + r.randrange(1, 5)) & 0xFFFF
                c = self.req_cqe(inp, r.choice(ops), wqe, owner=own)
            elif t < 0.75:
                c = self.resp_cqe(inp, r.choice(RESP_OPS_BY_QP[qp]), owner=own)
            else:
                side = r.choice(["req", "resp"])
                wqe = (wqe + 1) & 0xFFFF
                c = self.err_cqe(inp, side, self.pick_syndrome(), wqe, owner=own)
            cqes.append((n & (ncqe - 1), c))
            if len(cqes) >= ncqe:
                break
        # what stops polling after the last one (if ne allows reaching it)
        n = (ci + len(cqes)) & U32
        if len(cqes) < ncqe and r.random() < 0.5:
            own = self.owner_for(ncqe, n)
            c = bytearray(self.req_cqe(inp, "send", 0, owner=own ^ 1))
            if r.random() < 0.3:
                c[63] = 0xf0 | own
            cqes.append((n & (ncqe - 1), bytes(c)))
        pre = {"v1": kind, "v0": "v0_" + kind, "ex": "ex_" + kind}[api]
        return self.finish("%s_%d_cqes_ne%s_ci_0x%x" % (pre, nav, inp["ne"], ci), inp, cqes)

    def k_poll_err(self):
        r = self.r
        api = r.choice(["v1", "v0", "ex"])
        inp = self.base(api, "RC")
        cqes = []
        ok_first = r.random() < 0.5
        if ok_first:
            cqes.append((0, self.req_cqe(inp, "send", 1)))
        t = r.randrange(4)
        slot = len(cqes)
        if t == 0:  # unknown user index / QPN
            if api == "v0":
                c = self.req_cqe(inp, "send", 2, qpn=0x000124)
            else:
                c = self.req_cqe(inp, "send", 2, uidx=0x000011)
            what = "unknown_qp"
        elif t == 1:
            c = bytearray(self.resp_cqe(inp, "send"))
            if api == "v0":
                c[32:36] = (0x000055).to_bytes(4, "big")  # SRQ number: no SRQ
            else:
                c[32:36] = (0x000031).to_bytes(4, "big")
            c = bytes(c)
            what = "resp_unknown_rsc"
        elif t == 2:
            c = bytearray(64)
            c[56:60] = (0x000123).to_bytes(4, "big")
            c[32:36] = (0x7).to_bytes(4, "big")
            c[63] = (CQE_NO_PACKET << 4)
            c = bytes(c)
            what = "no_packet"
        else:
            c = bytearray(64)
            c[56:60] = (0x000123).to_bytes(4, "big")
            c[63] = (CQE_SIG_ERR << 4)
            c = bytes(c)
            what = "sig_err_no_mkey"
        cqes.append((slot, c))
        pre = {"v1": "poll_err", "v0": "v0_poll_err", "ex": "ex_poll_err"}[api]
        return self.finish("%s_%s%s" % (pre, what, "_after_ok" if ok_first else ""), inp, cqes)

    def k_scatter(self):
        r = self.r
        api = r.choice(["v1", "ex"])
        inp = self.base(api, "RC")
        inp["cqe_size"] = "64"
        op = r.choice(["RDMA_READ", "ATOMIC_FETCH_AND_ADD", "ATOMIC_CMP_AND_SWP", "RDMA_READ"])
        wr_id = 0x7100000000000000 | r.randrange(1, 16)
        if op == "RDMA_READ":
            total = r.randrange(1, 33)
            nsge = r.randrange(1, min(4, total) + 1)
            cuts = sorted(r.sample(range(1, total), nsge - 1)) if nsge > 1 else []
            lens = [b - a for a, b in zip([0] + cuts, cuts + [total])]
            byte_cnt = total
            if r.random() < 0.2 and total < 32:
                byte_cnt = r.randrange(total + 1, 33)  # local length error
        else:
            lens = [8]
            byte_cnt = r.choice([0, 8, 16])
        sges = [(0x0000000200001000 + 0x40 * j, ln, 0x1111 * (j + 1)) for j, ln in enumerate(lens)]
        lines = ["prepost_send_nwr=1", "prepost_send_start_cur_post=0",
                 "prepost_send0.opcode=%s" % op, "prepost_send0.wr_id=0x%016x" % wr_id,
                 "prepost_send0.num_sge=%d" % len(sges)]
        for j, (a, ln, lk) in enumerate(sges):
            lines.append("prepost_send0.sge%d=addr:0x%016x,length:%d,lkey:0x%08x" % (j, a, ln, lk))
        pp = {"start_cur_post": 0, "wrs": [{"opcode": op, "wr_id": wr_id, "sges": sges}]}
        data = bytes(r.randrange(256) for _ in range(32))
        sop = WR_OPCODES[op]
        c = self.cqe(CQE_REQ, 0, sop, 0x123, 0x7, 0, byte_cnt=byte_cnt, scatter=INLINE_SCATTER_32,
                     data32=data)
        name = {"RDMA_READ": "rdma_read_%dsge" % len(sges), "ATOMIC_FETCH_AND_ADD": "atomic_fetch_add",
                "ATOMIC_CMP_AND_SWP": "atomic_cmp_swp"}[op]
        if op == "RDMA_READ" and byte_cnt > total:
            name += "_len_err"
        pre = "ex_scatter32_req_" if api == "ex" else "scatter32_req_"
        return self.finish(pre + name, inp, [(0, c)], prepost=(lines, pp))

    def k_retire(self):
        """wqe_counter far ahead of tail: retires unsignalled WQEs, wraps the SQ."""
        r = self.r
        api = r.choice(["v1", "v0", "ex"])
        inp = self.base(api, "RC")
        cnt = r.choice([8, 64, 256])
        inp["sq_wqe_cnt"] = str(cnt)
        tail = r.choice([0, cnt - 2, 65530, 0xfffffff8])
        inp["sq_tail_before"] = str(tail)
        inp["sq_wqe_head_base"] = str(r.choice([tail, 1000, 0xfffffff0]))
        wqe = (tail + r.randrange(1, 3 * cnt)) & 0xFFFF
        c = self.req_cqe(inp, r.choice(["send", "rdma_write", "rdma_read"]), wqe)
        pre = {"v1": "req", "v0": "v0_req", "ex": "ex_req"}[api]
        return self.finish("%s_retire_wqe_counter_%d_sq%d" % (pre, wqe, cnt), inp, [(0, c)])

    def k_odd_opcode(self):
        r = self.r
        inp = self.base(r.choice(["v1", "v0"]), "RC")
        op = r.choice([CQE_RESIZE_CQ, 7, 8, 9, 10, 11])
        c = bytearray(self.req_cqe(inp, "send", 3))
        c[63] = op << 4
        pre = "v0_" if inp["cqe_version"] == "0" else ""
        return self.finish("%smixed_cqe_opcode_%d" % (pre, op), inp, [(0, bytes(c))],
                           note="CQE opcode the provider ignores: only qp_num/wc_flags written")

    def case(self):
        r = self.r
        kinds = [(self.k_req, 14), (self.k_resp, 12), (self.k_err, 14), (self.k_empty, 4),
                 (lambda: self.k_multi("mixed"), 10), (lambda: self.k_multi("wrap"), 8),
                 (self.k_poll_err, 4), (self.k_scatter, 8), (self.k_retire, 6),
                 (lambda: self.k_req("ex"), 6), (lambda: self.k_resp("ex"), 6),
                 (lambda: self.k_err("ex"), 5), (lambda: self.k_req("v0"), 3),
                 (lambda: self.k_resp("v0"), 3), (lambda: self.k_err("v0"), 3),
                 (self.k_odd_opcode, 2)]
        tot = sum(w for _, w in kinds)
        x = r.randrange(tot)
        for f, w in kinds:
            if x < w:
                return f()
            x -= w
        raise AssertionError


HEADER_NOTE = """# Generated by tests/refcheck/poll_ref.py gen %d %d: an independent model of
# rdma-core v44.0 libmlx5's completion side (not produced by libmlx5 itself).
# Same format as the golden cqe-cases.txt (header below).
"""


def gen(n, seed, golden_header):
    r = random.Random(seed)
    g = Gen(r)
    sys.stdout.write(HEADER_NOTE % (n, seed))
    sys.stdout.write(golden_header)
    i = 0
    names = {}
    while i < n:
        try:
            text = g.case()
        except Unmodelled:
            continue
        name = text.split("\n", 1)[0][5:]
        k = names.get(name, 0)
        names[name] = k + 1
        if k:
            text = text.replace("case %s\n" % name, "case %s_%d\n" % (name, k + 1), 1)
        sys.stdout.write("\n" + text)
        i += 1


GOLDEN_HEADER = """#
# Format: 'case <name>' ... 'end', key=value lines, and
#   cqe <slot> <hex128>   64-byte CQE placed in ring slot <slot> before polling.
# All other slots hold a fresh CQE (op_own=0xf0: opcode INVALID, owner 0).
# Inputs: api, cqe_version (0: QP found by QPN; 1: by user index in srqn_uidx),
#   cq_ncqe (ring entries), cqn, cons_index_before, qp_type, qpn, qp_uidx,
#   qp_cap_cache (bit 0x10000 = MLX5_RX_CSUM_VALID), sq_wqe_cnt, ne (wc array size
#   or max entries read through cq_ex).
#   QP bookkeeping before polling: sq.wrid[i]=sq_wrid_base+i,
#   sq.wqe_head[i]=sq_wqe_head_base+i, sq.tail=sq_tail_before,
#   rq.wrid[i]=rq_wrid_base+i, rq.tail=rq_tail_before (rq_wqe_cnt entries).
#   prepost_send*: work requests posted with ibv_post_send before polling
#   (scatter-to-CQE cases).
# Outputs (poll_cq): out.ret (npolled, or -2 = CQ_POLL_ERR), for each returned wc:
#   wc<i>.<field> for every field the provider wrote, wc<i>.unwritten,
#   wc<i>.raw = the 48-byte struct ibv_wc prefilled with a5 (x86-64 layout).
# Outputs (cq_ex): out.start_poll_ret, ex<i>.{start_poll_ret|next_poll_ret},
#   ex<i>.wr_id/status and ex<i>.read_* (read_imm_data printed as be32toh()).
# Common outputs: out.cons_index_after, out.sq_tail_after, out.rq_tail_after,
#   out.cq_dbrec_bytes (set_ci dbrec at +0, arm dbrec at +4, big endian;
#   untouched bytes read a5), out.cq_dbrec_mask, out.uar_write.
"""


def main(argv):
    if len(argv) >= 3 and argv[1] == "check":
        return check(argv[2])
    if len(argv) >= 4 and argv[1] == "gen":
        gen(int(argv[2]), int(argv[3]), GOLDEN_HEADER)
        return 0
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
