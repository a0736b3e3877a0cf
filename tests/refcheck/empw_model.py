#!/usr/bin/env python3
"""Independent model of DPDK 26.07's mlx5 eMPW / legacy MPW Tx burst routines.

Models mlx5_tx_burst_tmpl() (drivers/net/mlx5/mlx5_tx.h, tag v26.07) for the
olx masks of mlx5_tx_burst_{i,none,sci,sc}_empw (mlx5_tx_empw.c) and
mlx5_tx_burst_{i,none,mci}_mpw (mlx5_tx_mpw.c), single-segment mbufs only,
on a txq in ordinary memory: CQ empty (mlx5_tx_handle_completion finds
nothing), no trace points, no TXPP, no NOINLINE dynflag, no metadata dynflag.

Written from DPDK's source (mlx5_tx.h: mlx5_tx_burst_tmpl,
mlx5_tx_burst_single, mlx5_tx_burst_empw_simple, mlx5_tx_burst_empw_inline,
mlx5_tx_cseg_init, mlx5_tx_eseg_none, mlx5_tx_dseg_ptr, mlx5_tx_dseg_empw,
mlx5_tx_sdone_empw, mlx5_tx_idone_empw, mlx5_tx_match_empw,
mlx5_tx_able_to_empw, mlx5_tx_request_completion, txq_ol_cksum_to_cs;
mlx5_rxtx.c: mlx5_set_cksum_table; common/mlx5/mlx5_common.h:
mlx5_doorbell_ring), not from mlx5dp's code.

Usage:
  empw_model.py check FILE            replay FILE's inputs, compare every output
  empw_model.py gen OUT SEED N [FUNC] generate N random cases (see gen_cases)
"""

import random
import struct
import sys

# MLX5_TXOFF_CONFIG_* (mlx5_tx.h)
MULTI, TSO, SWP, CSUM, INLINE, VLAN, METADATA = 1, 2, 4, 8, 0x10, 0x20, 0x40
EMPW, MPW, TXPP = 0x100, 0x200, 0x400

FUNCS = {
    "i_empw": INLINE | METADATA | EMPW,
    "none_empw": EMPW,
    "sci_empw": SWP | CSUM | INLINE | METADATA | EMPW,
    "sc_empw": SWP | CSUM | METADATA | EMPW,
    "i_mpw": INLINE | EMPW | MPW,
    "none_mpw": EMPW | MPW,
    "mci_mpw": MULTI | CSUM | INLINE | EMPW | MPW,
}

# mlx5_prm.h / mlx5_defs.h
WSEG = 16
WQE_SIZE = 64
WQE_SIZE_MAX = 60 * WSEG
CSEG_SIZE = ESEG_SIZE = DSEG_SIZE = 16
ESEG_MIN_INLINE = 18
EMPW_MIN_PACKETS = 2 + 3 * 4
TX_COMP_THRESH = 32
EMPW_MAX_PACKETS = TX_COMP_THRESH
MPW_MAX_PACKETS = 6
MPW_INLINE_MAX_PACKETS = 6
OPCODE_EMPW = 0x29
OPCODE_TSO = 0x0E
OPC_MOD_MPW = 0x01
COMP_ONLY_FIRST_ERR = 1
COMP_ALWAYS = 2
COMP_MODE_OFFSET = 2
DATA_INLINE = 1 << 31
ETH_L3_CSUM = 1 << 6
ETH_L4_CSUM = 1 << 7
ETH_L3_INNER_CSUM = 1 << 4
ETH_L4_INNER_CSUM = 1 << 5

# rte_mbuf_core.h
F_TUNNEL_MASK = 0xF << 45
F_TUNNEL_IP = 0xD << 45
F_TUNNEL_UDP = 0xE << 45
F_TCP_SEG = 1 << 50
F_L4_MASK = 3 << 52
F_TCP_CKSUM = 1 << 52
F_UDP_CKSUM = 3 << 52
F_IP_CKSUM = 1 << 54
F_IPV4 = 1 << 55
F_IPV6 = 1 << 56
F_OUTER_IP_CKSUM = 1 << 58
F_OUTER_IPV6 = 1 << 60

EXIT, ERROR, SINGLE, EMPW_C, MULTI_C, TSO_C = range(6)

M16 = 0xFFFF


def cksum_table(i):
    """mlx5_set_cksum_table() entry i."""
    v = 0
    if i & (1 << 9):
        if i & (1 << 8):
            v |= ETH_L3_CSUM
        if i & (1 << 4):
            v |= ETH_L3_INNER_CSUM
        if i & (3 << 2 | 1):
            v |= ETH_L4_INNER_CSUM
    else:
        if i & (1 << 4):
            v |= ETH_L3_CSUM
        if i & (3 << 2 | 1):
            v |= ETH_L4_CSUM
    return v


def swp_types_table(i):
    """mlx5_set_swp_types_table() entry i (mlx5_rxtx.c)."""
    v = 0
    if i & (1 << 8):
        v |= 1 << 4  # MLX5_ETH_WQE_L3_OUTER_IPV6
    if i & (1 << 9):
        v |= 1 << 5  # MLX5_ETH_WQE_L4_OUTER_UDP
    if i & (1 << 4):
        v |= 1 << 0  # MLX5_ETH_WQE_L3_INNER_IPV6
    if (i & 3) == (F_UDP_CKSUM >> 52):
        v |= 1 << 1  # MLX5_ETH_WQE_L4_INNER_UDP
    return v


def ol_cksum_to_cs(ol):
    """txq_ol_cksum_to_cs()."""
    is_tunnel = 1 if ol & F_TUNNEL_MASK else 0
    mask = F_TCP_SEG | F_L4_MASK | F_IP_CKSUM | F_OUTER_IP_CKSUM
    return cksum_table(((ol & mask) >> 50) | (is_tunnel << 9))


class Unsupported(Exception):
    pass


class Pkt:
    def __init__(self, data, addr, ol_flags=0, nb_segs=1, l2=0, l3=0, l4=0,
                 outer_l2=0, outer_l3=0):
        self.data = bytes(data)
        self.addr = addr
        self.ol = ol_flags
        self.nb_segs = nb_segs
        self.l2, self.l3, self.l4 = l2, l3, l4
        self.outer_l2, self.outer_l3 = outer_l2, outer_l3

    @property
    def dlen(self):
        return len(self.data)


class Txq:
    def __init__(self, cfg, start):
        self.wqe_n = cfg["wqe_n"]
        self.elts_n = cfg["elts_n"]
        self.cqe_n = cfg["cqe_n"]
        self.wqe_s = 1 << self.wqe_n
        self.wqe_m = self.wqe_s - 1
        self.elts_s = 1 << self.elts_n
        self.elts_m = self.elts_s - 1
        self.cqe_m = (1 << self.cqe_n) - 1
        self.inlen_send = cfg["inlen_send"]
        self.inlen_empw = cfg["inlen_empw"]
        self.wqe_thres = cfg["wqe_thres"]
        self.qp_num_8s = cfg["qp_num_8s"]
        self.lkey = cfg["lkey"]
        self.db_nc = cfg.get("db_nc", 0)
        self.db_heu = cfg.get("db_heu", 0)
        c = dict(start)
        self.wqe_ci = c["wqe_ci"]
        self.wqe_pi = c["wqe_pi"]
        self.wqe_comp = c["wqe_comp"]
        self.elts_head = c["elts_head"]
        self.elts_tail = c["elts_tail"]
        self.elts_comp = c["elts_comp"]
        self.cq_ci = c["cq_ci"]
        self.cq_pi = c["cq_pi"]
        self.ring = bytearray(self.wqe_s * 64)
        self.written = bytearray(self.wqe_s * 64)  # 1 = written ever
        self.burst_written = set()  # WQEBB indices written in this burst
        self.fcqs = {}
        self.dbrec = None
        self.db = []
        self.end = self.wqe_s * 64

    def counters(self):
        return dict(wqe_ci=self.wqe_ci, wqe_pi=self.wqe_pi,
                    wqe_comp=self.wqe_comp, elts_head=self.elts_head,
                    elts_tail=self.elts_tail, elts_comp=self.elts_comp,
                    cq_ci=self.cq_ci, cq_pi=self.cq_pi)

    # memory writes (offsets are byte offsets in the ring, no wrap)
    def w(self, off, b):
        assert 0 <= off and off + len(b) <= self.end, (off, len(b))
        self.ring[off:off + len(b)] = b
        for i in range(off, off + len(b)):
            self.written[i] = 1
        for i in range(off // 64, (off + len(b) + 63) // 64):
            self.burst_written.add(i)

    def w32be(self, off, v):
        self.w(off, struct.pack(">I", v & 0xFFFFFFFF))

    def r32be(self, off):
        return struct.unpack(">I", bytes(self.ring[off:off + 4]))[0]

    def wqe_off(self, ci):
        return (ci & self.wqe_m) * 64


class Loc:
    pass


class Model:
    def __init__(self, txq, olx):
        self.q = txq
        self.olx = olx
        self.events = set()

    def ev(self, name):
        self.events.add(name)

    def cfg(self, bit):
        return bool(self.olx & bit)

    # ---- segment builders -------------------------------------------------
    def cseg_init(self, wqe, ds, opcode):
        q = self.q
        if self.cfg(MPW) and opcode == OPCODE_EMPW:
            opcode = OPCODE_TSO | OPC_MOD_MPW << 24
        q.w32be(wqe, ((q.wqe_ci << 8) | opcode) & 0xFFFFFFFF)
        q.w32be(wqe + 4, q.qp_num_8s | ds)
        q.w32be(wqe + 8, COMP_ONLY_FIRST_ERR << COMP_MODE_OFFSET)
        q.w32be(wqe + 12, 0)

    def swp(self, m):
        """txq_mbuf_to_swp(): (offs as the LE dword, flags or None if not
        written). The case format has no outer_l2_len / outer_l3_len: 0
        unless the packet carries them."""
        if not self.cfg(SWP):
            return 0, None
        ol = m.ol
        tunnel = ol & F_TUNNEL_MASK
        if tunnel != F_TUNNEL_UDP and tunnel != F_TUNNEL_IP:
            return 0, None
        idx = (ol & (F_L4_MASK | F_IPV6 | F_OUTER_IPV6)) >> 52
        if tunnel == F_TUNNEL_UDP:
            idx |= 1 << 9
        flags = swp_types_table(idx)
        off = m.outer_l2
        sset = (off >> 1) << 8
        off += m.outer_l3
        if tunnel == F_TUNNEL_UDP:
            sset |= off >> 1
        if ol & (F_IPV4 | F_IPV6):
            csum = ol & F_L4_MASK
            off += m.l2
            sset |= (off >> 1) << 24
            if csum == F_TCP_CKSUM or csum == F_UDP_CKSUM or (
                    self.cfg(TSO) and ol & F_TCP_SEG):
                off += m.l3
                sset |= (off >> 1) << 16
        return sset & 0xFFFFFFFF, flags

    def eseg_none(self, wqe, m):
        q = self.q
        es = wqe + 16
        csum = ol_cksum_to_cs(m.ol) if self.cfg(CSUM) else 0
        q.w(es + 4, struct.pack("<I", csum))
        offs, flags = self.swp(m)
        q.w(es, struct.pack("<I", offs))
        if flags is not None:
            q.w(es + 5, bytes([flags]))
        q.w(es + 8, b"\0\0\0\0")  # metadata (dynflag not registered)
        q.w(es + 12, b"\0\0\0\0")  # inline_hdr (no VLAN in these variants)

    def dseg_ptr(self, dseg, m):
        q = self.q
        q.w32be(dseg, m.dlen)
        q.w32be(dseg + 4, q.lkey)
        q.w(dseg + 8, struct.pack(">Q", m.addr))

    def dseg_empw(self, dseg, m):
        """mlx5_tx_dseg_empw(): returns the next (unwrapped) position."""
        q = self.q
        if not self.cfg(MPW):
            q.w32be(dseg, m.dlen | DATA_INLINE)
            pdst = dseg + 4
        else:
            pdst = dseg
        ln = m.dlen
        buf = m.data
        part = min(q.end - pdst, ln)
        while True:
            q.w(pdst, buf[:part])
            ln -= part
            if not ln:
                pdst += part
                if not self.cfg(MPW):
                    pdst = (pdst + WSEG - 1) // WSEG * WSEG
                return pdst
            pdst = 0
            buf = buf[part:]
            part = ln

    # ---- helpers ------------------------------------------------------------
    def able_to_empw(self, m, newp):
        if newp and self.cfg(MULTI) and m.nb_segs > 1:
            return MULTI_C
        if newp and self.cfg(TSO) and m.ol & F_TCP_SEG:
            return TSO_C
        if not self.cfg(EMPW):
            return SINGLE
        return EMPW_C

    def match_empw(self, es_cs, es_swp, m, dlen):
        if self.cfg(CSUM) and ol_cksum_to_cs(m.ol) != es_cs:
            return False
        if self.cfg(SWP):
            offs, flags = self.swp(m)
            if offs != es_swp[0] or (flags or 0) != es_swp[1]:
                return False
        if self.cfg(MPW) and dlen != m.dlen:
            return False
        return True

    def es_fields(self, wqe):
        q = self.q
        es = wqe + 16
        return (q.ring[es + 4],
                (struct.unpack("<I", bytes(q.ring[es:es + 4]))[0],
                 q.ring[es + 5]))

    def sdone_empw(self, loc, ds):
        q = self.q
        loc.elts_free -= ds
        loc.pkts_sent += ds
        ds += 2
        q.w32be(loc.wqe_last + 4, q.qp_num_8s | ds)
        q.wqe_ci = (q.wqe_ci + (ds + 3) // 4) & M16
        loc.wqe_free -= (ds + 3) // 4

    def idone_empw(self, loc, ln, wqem):
        q = self.q
        dseg = wqem + 32
        if self.cfg(MPW) and q.r32be(dseg) == 0:
            q.w32be(dseg, (ln - 4) | DATA_INLINE)
            ln = (ln + WSEG - 1) // WSEG + 2
        else:
            assert ln % WSEG == 0, ln
            ln = ln // WSEG + 2
        q.w32be(wqem + 4, q.qp_num_8s | ln)
        q.wqe_ci = (q.wqe_ci + (ln + 3) // 4) & M16
        loc.wqe_free -= (ln + 3) // 4
        loc.wqe_last = wqem

    # ---- eMPW without inlining ----------------------------------------------
    def burst_empw_simple(self, pkts, pkts_n, loc):
        q = self.q
        pi = loc.pkts_sent + 1
        pkts_n -= loc.pkts_sent
        while True:
            # next_empw:
            while True:
                part = min(pkts_n, MPW_MAX_PACKETS if self.cfg(MPW)
                           else EMPW_MAX_PACKETS)
                if loc.elts_free < part:
                    if loc.elts_free < EMPW_MIN_PACKETS:
                        self.ev("simple_elts_exit")
                        return EXIT
                    self.ev("simple_elts_part")
                    part = loc.elts_free
                if loc.wqe_free < (2 + part + 3) // 4:
                    if loc.wqe_free < (2 + EMPW_MIN_PACKETS + 3) // 4:
                        self.ev("simple_wqe_exit")
                        return EXIT
                    self.ev("simple_wqe_part")
                    part = loc.wqe_free * 4 - 2
                loc.wqe_last = q.wqe_off(q.wqe_ci)
                self.cseg_init(loc.wqe_last, part + 2, OPCODE_EMPW)
                self.eseg_none(loc.wqe_last, loc.mbuf)
                es_cs, es_swp = self.es_fields(loc.wqe_last)
                dseg = loc.wqe_last + 32
                loop = part
                if self.cfg(MPW):
                    q.w(loc.wqe_last + 16 + 6,
                        struct.pack(">H", loc.mbuf.dlen & M16))
                restart = False
                while True:
                    dlen = loc.mbuf.dlen
                    if dlen <= ESEG_MIN_INLINE:
                        self.ev("simple_short_frame")
                    self.dseg_ptr(dseg, loc.mbuf)
                    loop -= 1
                    if loop == 0:
                        break
                    loc.mbuf = pkts[pi]
                    pi += 1
                    ret = self.able_to_empw(loc.mbuf, True)
                    if ret in (MULTI_C, TSO_C, SINGLE):
                        part -= loop
                        self.sdone_empw(loc, part)
                        if not loc.elts_free or not loc.wqe_free:
                            return EXIT
                        return ret
                    if not self.match_empw(es_cs, es_swp, loc.mbuf, dlen):
                        part -= loop
                        self.sdone_empw(loc, part)
                        if not loc.elts_free or not loc.wqe_free:
                            return EXIT
                        pkts_n -= part
                        restart = True
                        break
                    dseg += 16
                    if dseg >= q.end:
                        dseg = 0
                if not restart:
                    break
            loc.elts_free -= part
            loc.pkts_sent += part
            q.wqe_ci = (q.wqe_ci + (2 + part + 3) // 4) & M16
            loc.wqe_free -= (2 + part + 3) // 4
            pkts_n -= part
            if not pkts_n or not loc.elts_free or not loc.wqe_free:
                return EXIT
            loc.mbuf = pkts[pi]
            pi += 1
            ret = self.able_to_empw(loc.mbuf, True)
            if ret != EMPW_C:
                return ret

    # ---- eMPW with inlining -------------------------------------------------
    def burst_empw_inline(self, pkts, pkts_n, loc):
        q = self.q
        pi = loc.pkts_sent + 1
        pkts_n -= loc.pkts_sent
        mpw = self.cfg(MPW)
        while True:
            nlim = min(pkts_n, MPW_INLINE_MAX_PACKETS if mpw
                       else EMPW_MAX_PACKETS)
            if loc.wqe_free < (2 + EMPW_MIN_PACKETS + 3) // 4:
                self.ev("inline_wqe_exit")
                return EXIT
            if loc.wqe_free < 15:
                self.ev("inline_room_by_wqe")
            wqem = q.wqe_off(q.wqe_ci)
            self.cseg_init(wqem, 0, OPCODE_EMPW)
            self.eseg_none(wqem, loc.mbuf)
            es_cs, es_swp = self.es_fields(wqem)
            dseg = wqem + 32
            if mpw:
                q.w(wqem + 16 + 6, struct.pack(">H", loc.mbuf.dlen & M16))
            room = (min(WQE_SIZE_MAX // WQE_SIZE, loc.wqe_free) * WQE_SIZE
                    - CSEG_SIZE - ESEG_SIZE)
            if mpw:
                room = min(room, max(q.inlen_empw + 4,
                                     MPW_INLINE_MAX_PACKETS * DSEG_SIZE))
            part = room
            while True:
                m = loc.mbuf
                dlen = m.dlen
                if dlen <= ESEG_MIN_INLINE:
                    self.ev("inline_short_error" + ("_first" if part == room else ""))
                    part -= room
                    if not part:
                        return ERROR
                    self.idone_empw(loc, part, wqem)
                    return ERROR
                is_ptr = dlen > q.inlen_empw
                brk = False
                if not is_ptr:
                    if mpw:
                        if dlen > q.inlen_send:
                            is_ptr = True
                        else:
                            tlen = dlen
                            if part == room:
                                tlen += 4
                                q.w32be(dseg, 0)
                                dseg += 4
                            elif q.r32be(wqem + 32):
                                brk = True
                    else:
                        tlen = 4 + dlen
                if brk:
                    break
                if not is_ptr:
                    if room < tlen:
                        break
                    dseg = self.dseg_empw(dseg, m)
                    if not mpw:
                        tlen = (tlen + WSEG - 1) // WSEG * WSEG
                    room -= tlen
                    if loc.pkts_sent == loc.mbuf_free:
                        loc.mbuf_free += 1
                    else:
                        q.elts_head = (q.elts_head + 1) & M16
                        loc.elts_free -= 1
                else:
                    # pointer_empw:
                    if mpw and part != room and q.r32be(wqem + 32) == 0:
                        break
                    self.dseg_ptr(dseg, m)
                    q.elts_head = (q.elts_head + 1) & M16
                    loc.elts_free -= 1
                    room -= DSEG_SIZE
                    dseg += 16
                # next_mbuf:
                loc.pkts_sent += 1
                pkts_n -= 1
                if not pkts_n or not loc.elts_free:
                    if pkts_n:
                        self.ev("inline_elts_exit")
                    part -= room
                    self.idone_empw(loc, part, wqem)
                    return EXIT
                loc.mbuf = pkts[pi]
                pi += 1
                ret = self.able_to_empw(loc.mbuf, True)
                if ret in (MULTI_C, TSO_C, SINGLE):
                    part -= room
                    self.idone_empw(loc, part, wqem)
                    if not loc.elts_free or not loc.wqe_free:
                        return EXIT
                    return ret
                nlim -= 1
                if not nlim or room < DSEG_SIZE:
                    break
                if not self.match_empw(es_cs, es_swp, loc.mbuf, dlen):
                    break
                if dseg >= q.end:
                    dseg = 0
            part -= room
            if not part:
                self.ev("inline_nothing_fits_exit")
                return EXIT
            self.idone_empw(loc, part, wqem)
            if not loc.elts_free or not loc.wqe_free:
                return EXIT

    def burst_single(self, pkts, pkts_n, loc):
        ret = self.able_to_empw(loc.mbuf, False)
        assert ret == EMPW_C
        if self.cfg(INLINE):
            ret = self.burst_empw_inline(pkts, pkts_n, loc)
        else:
            ret = self.burst_empw_simple(pkts, pkts_n, loc)
        if ret == SINGLE:
            raise Unsupported("ordinary SEND path")
        return ret

    def request_completion(self, loc):
        q = self.q
        head = q.elts_head
        part = 0 if self.cfg(INLINE) else loc.pkts_sent - loc.pkts_copy
        head = (head + part) & M16
        if (((head - q.elts_comp) & M16) >= TX_COMP_THRESH or
                (self.cfg(INLINE) and
                 ((q.wqe_ci - q.wqe_comp) & M16) >= q.wqe_thres)):
            q.elts_comp = head
            if self.cfg(INLINE):
                q.wqe_comp = q.wqe_ci
            q.w32be(loc.wqe_last + 8, COMP_ALWAYS << COMP_MODE_OFFSET)
            q.fcqs[q.cq_pi & q.cqe_m] = head
            q.cq_pi = (q.cq_pi + 1) & M16

    def copy_elts(self, n):
        self.q.elts_head = (self.q.elts_head + n) & M16

    def tx_burst(self, pkts):
        """mlx5_tx_burst_tmpl(); returns the number of packets sent."""
        q = self.q
        pkts_n = len(pkts)
        q.burst_written = set()
        if not pkts_n:
            return 0
        for p in pkts:
            if p.nb_segs > 1 and self.cfg(MULTI):
                raise Unsupported("multi-segment mbuf (mlx5_tx_burst_mseg)")
        loc = Loc()
        loc.mbuf_free = 0
        loc.pkts_sent = 0
        loc.pkts_copy = 0
        loc.wqe_last = None
        while True:  # send_loop
            loc.pkts_loop = loc.pkts_sent
            loc.elts_free = q.elts_s - ((q.elts_head - q.elts_tail) & M16)
            loc.wqe_free = q.wqe_s - ((q.wqe_ci - q.wqe_pi) & M16)
            if not loc.elts_free or not loc.wqe_free:
                self.ev("loop_elts_full" if not loc.elts_free else "loop_wqe_full")
                break
            loc.mbuf = pkts[loc.pkts_sent]
            ret = self.burst_single(pkts, pkts_n, loc)
            if ret not in (EXIT, ERROR):
                raise Unsupported("return code %d" % ret)
            if loc.pkts_sent == loc.pkts_loop:
                break
            self.request_completion(loc)
            # mlx5_doorbell_ring(): dbrec first, then the 8-byte UAR store
            q.dbrec = q.wqe_ci
            q.db.append(bytes(q.ring[loc.wqe_last:loc.wqe_last + 8]))
            part = 0 if self.cfg(INLINE) else loc.pkts_sent - loc.pkts_copy
            if part:
                self.copy_elts(part)
                loc.pkts_copy = loc.pkts_sent
            if pkts_n > loc.pkts_sent:
                continue
            break
        return loc.pkts_sent


# ---------------------------------------------------------------------------
# case file I/O

COUNTERS = ["wqe_ci", "wqe_pi", "wqe_comp", "elts_head", "elts_tail",
            "elts_comp", "cq_ci", "cq_pi"]


def parse_num(s):
    s = s.strip()
    return int(s, 16) if s.startswith("0x") else int(s)


def parse_file(path):
    cases, cur, header = [], None, []
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            t = line.strip()
            if cur is None and (t.startswith("#") or t.startswith("ncases")):
                header.append(line)
            if not t or t.startswith("#"):
                continue
            if t == "end":
                cases.append(cur)
                cur = None
                continue
            k, v = t.split("=", 1)
            if k == "case":
                cur = {"case": v, "_order": [("case", v)]}
            elif cur is not None:
                cur[k] = v
                cur["_order"].append((k, v))
    return header, cases


def case_cfg(c):
    return dict(wqe_n=parse_num(c["cfg.wqe_n"]),
                elts_n=parse_num(c["cfg.elts_n"]),
                cqe_n=parse_num(c["cfg.cqe_n"]),
                inlen_send=parse_num(c["cfg.inlen_send"]),
                inlen_empw=parse_num(c["cfg.inlen_empw"]),
                wqe_thres=parse_num(c["cfg.wqe_thres"]),
                qp_num_8s=parse_num(c["cfg.qp_num_8s"]),
                lkey=parse_num(c["cfg.lkey"]),
                db_nc=parse_num(c["cfg.db_nc"]),
                db_heu=parse_num(c["cfg.db_heu"]))


def case_pkts(c, b):
    n = parse_num(c["b%d.n" % b])
    out = []
    for i in range(n):
        k = lambda f: c["b%d.pkt.%d.%s" % (b, i, f)]
        data = bytes.fromhex(k("data"))
        assert len(data) == parse_num(k("len"))
        opt = lambda f: parse_num(c.get("b%d.pkt.%d.%s" % (b, i, f), "0"))
        out.append(Pkt(data, parse_num(k("addr")), parse_num(k("ol_flags")),
                       parse_num(k("nb_segs")), parse_num(k("l2_len")),
                       parse_num(k("l3_len")), parse_num(k("l4_len")),
                       opt("outer_l2_len"), opt("outer_l3_len")))
    return out


def run_case(c):
    """Run a case's inputs through the model; returns the list of output
    key/value pairs per burst (the keys DPDK's file has after the pkts)."""
    olx = parse_num(c["olx"])
    cfg = case_cfg(c)
    start = {k: parse_num(c["b0.in." + k]) for k in COUNTERS}
    q = Txq(cfg, start)
    model = Model(q, olx)
    c["_model"] = model
    nb = parse_num(c["bursts"])
    res = []
    for b in range(nb):
        pkts = case_pkts(c, b)
        inc = q.counters()
        q.db = []
        q.fcqs = {}
        ret = model.tx_burst(pkts)
        out = [("b%d.in.%s" % (b, k), str(inc[k])) for k in COUNTERS]
        o = [("out.ret", str(ret))]
        cnt = q.counters()
        o += [("out." + k, str(cnt[k])) for k in COUNTERS]
        for slot in sorted(q.fcqs):
            o.append(("out.fcqs.%d" % slot, str(q.fcqs[slot])))
        # WQEBBs written by this call, from in.wqe_ci on
        frm = inc["wqe_ci"] & q.wqe_m
        span = 0
        for i in q.burst_written:
            span = max(span, ((i - frm) & q.wqe_m) + 1)
        to = (frm + span) & q.wqe_m
        o.append(("out.sq_from", str(frm)))
        o.append(("out.sq_to", str(to)))
        for j in range(span):
            idx = (frm + j) & q.wqe_m
            fill = bytearray(b"\xa5" * 64)
            mask = ""
            for k in range(64):
                if q.written[idx * 64 + k]:
                    fill[k] = q.ring[idx * 64 + k]
                    mask += "x"
                else:
                    mask += "."
            o.append(("sq.%d" % idx, fill.hex()))
            o.append(("sqmask.%d" % idx, mask))
        dbv = q.dbrec if q.dbrec is not None else None
        if dbv is None:
            o.append(("out.dbrec", "a5a5a5a5"))
            o.append(("out.dbrec_index", str(0xA5A5A5A5)))
        else:
            o.append(("out.dbrec", struct.pack(">I", dbv).hex()))
            o.append(("out.dbrec_index", str(dbv)))
        o.append(("out.cq_dbrec", "00000000"))
        o.append(("out.db_count", str(len(q.db))))
        for k, d in enumerate(q.db):
            o.append(("out.db.%d" % k, d.hex()))
        res.append(out + [("b%d.%s" % (b, k), v) for k, v in o])
    return res


def check_file(path, verbose=True):
    _, cases = parse_file(path)
    npass = nfail = nuns = 0
    for c in cases:
        try:
            res = run_case(c)
        except Unsupported as e:
            nuns += 1
            if verbose:
                print("UNSUPPORTED %s: %s" % (c["case"], e))
            continue
        errs = []
        want_keys = set()
        for b, kvs in enumerate(res):
            for k, v in kvs:
                want_keys.add(k)
                got = c.get(k)
                if k.endswith("dbrec_index") or k.endswith("out.dbrec"):
                    if v.startswith("a5a5") or v == str(0xA5A5A5A5):
                        continue  # no doorbell: the file's value is the fill
                if got is None:
                    errs.append("missing in file: %s=%s" % (k, v))
                elif got != v:
                    errs.append("%s: file %s model %s" % (k, got, v))
        for k in c:
            if k.startswith("_") or k in want_keys:
                continue
            if ".out." in k or ".sq." in k or ".sqmask." in k:
                if "dbrec" in k:
                    continue
                errs.append("not produced by model: %s" % k)
        if errs:
            nfail += 1
            if verbose:
                print("DIFF %s:\n  %s" % (c["case"], "\n  ".join(errs[:20])))
        else:
            npass += 1
            if verbose:
                print("SAME %s" % c["case"])
    print("model vs %s: %d same, %d differ, %d unsupported"
          % (path, npass, nfail, nuns))
    return nfail == 0


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "check":
        ok = check_file(sys.argv[2])
        sys.exit(0 if ok else 1)
    if len(sys.argv) >= 5 and sys.argv[1] == "gen":
        import empw_gen
        empw_gen.main(sys.argv[2:])
        sys.exit(0)
    print(__doc__)
    sys.exit(2)
