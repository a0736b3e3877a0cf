#!/usr/bin/env python3
"""Independent model of DPDK 26.07's mlx5 Rx burst routines on a CQ ring.

Models, for the case file format of specs/golden/dpdk/rx-cases.txt:
- scalar: mlx5_rx_burst / mlx5_rx_burst_mprq (drivers/net/mlx5/mlx5_rx.c:
  mlx5_rx_poll_len, rxq_cq_to_mbuf, rxq_cq_to_pkt_type, rxq_cq_to_ol_flags;
  mlx5_rx.h: mprq_buf_to_pkt);
- vector: mlx5_rx_burst_vec / mlx5_rx_burst_mprq_vec (mlx5_rxtx_vec.c:
  rxq_burst_v, rxq_burst_mprq_v, rxq_copy_mprq_mbuf_v,
  mlx5_rx_replenish_bulk_mbuf, mlx5_rx_mprq_replenish_bulk_mbuf;
  mlx5_rxtx_vec_sse.h: rxq_cq_process_v, rxq_cq_to_ptype_oflags_v,
  rxq_cq_decompress_v);
- check_cqe / check_cqe_iteration (common/mlx5/mlx5_common.h), the ptype
  table of mlx5_set_ptype_table (mlx5_rxtx.c), mbuf flag values
  (lib/mbuf/rte_mbuf_core.h, rte_mbuf_ptype.h).
Written from DPDK's source, not from mlx5dp's code.

Not modelled (never in the harness's plans): error CQEs, LRO, timestamps,
flow metadata, tunnels, multi-segment packets, L34H/FTAG mini formats on
the vector path beyond what the code shares, mbuf allocation failures.

Usage:
  rx_model.py check FILE [-v]   replay every case's inputs, compare outputs
"""

import sys

PTYPE = {0x00: 0x00000001, 0x01: 0x000006e1, 0x02: 0x00000691, 0x05: 0x000001e1, 0x06: 0x00000191, 0x09: 0x000002e1, 0x0a: 0x00000291, 0x0d: 0x000001e1, 0x0e: 0x00000191, 0x11: 0x000001e1, 0x12: 0x00000191, 0x21: 0x000003e1, 0x22: 0x00000391, 0x25: 0x000003e1, 0x26: 0x00000391, 0x29: 0x000003e1, 0x2a: 0x00000391, 0x2d: 0x000003e1, 0x2e: 0x00000391, 0x31: 0x000003e1, 0x32: 0x00000391, 0x40: 0x00000091, 0x41: 0x06600091, 0x42: 0x06400091, 0x45: 0x01600091, 0x46: 0x01400091, 0x49: 0x02600091, 0x4a: 0x02400091, 0x4d: 0x01600091, 0x4e: 0x01400091, 0x51: 0x01600091, 0x52: 0x01400091, 0x61: 0x03600091, 0x62: 0x03400091, 0x65: 0x03600091, 0x66: 0x03400091, 0x69: 0x03600091, 0x6a: 0x03400091, 0x6d: 0x03600091, 0x6e: 0x03400091, 0x71: 0x03600091, 0x72: 0x03400091, 0x81: 0x000006e1, 0x82: 0x00000691, 0x85: 0x000001e1, 0x86: 0x00000191, 0x89: 0x000002e1, 0x8a: 0x00000291, 0x8d: 0x000001e1, 0x8e: 0x00000191, 0x91: 0x000001e1, 0x92: 0x00000191, 0xa1: 0x000003e1, 0xa2: 0x00000391, 0xa5: 0x000003e1, 0xa6: 0x00000391, 0xa9: 0x000003e1, 0xaa: 0x00000391, 0xad: 0x000003e1, 0xae: 0x00000391, 0xb1: 0x000003e1, 0xb2: 0x00000391, 0xc0: 0x000000e1, 0xc1: 0x066000e1, 0xc2: 0x064000e1, 0xc5: 0x016000e1, 0xc6: 0x014000e1, 0xc9: 0x026000e1, 0xca: 0x024000e1, 0xcd: 0x016000e1, 0xce: 0x014000e1, 0xd1: 0x016000e1, 0xd2: 0x014000e1, 0xe1: 0x036000e1, 0xe2: 0x034000e1, 0xe5: 0x036000e1, 0xe6: 0x034000e1, 0xe9: 0x036000e1, 0xea: 0x034000e1, 0xed: 0x036000e1, 0xee: 0x034000e1, 0xf1: 0x036000e1, 0xf2: 0x034000e1}

# rte_mbuf_core.h
F_VLAN, F_RSS, F_FDIR, F_VLAN_STRIPPED = 1 << 0, 1 << 1, 1 << 2, 1 << 6
F_IP_GOOD, F_L4_GOOD, F_FDIR_ID, F_EXTERNAL = 1 << 7, 1 << 8, 1 << 13, 1 << 61
CKSUM_MASK = (1 << 4) | (1 << 7) | (1 << 3) | (1 << 8)
HEADROOM = 128
MBUF_DATA_ROOM = 2048  # mbuf buffer past the headroom
INVALIDATE = 0xF0  # MLX5_CQE_INVALIDATE
FMT = {"hash": 0, "csum": 1, "ftag_stridx": 2, "csum_stridx": 3, "l34h_stridx": 4}
DESCS = 4  # MLX5_VPMD_DESCS_PER_LOOP
VMAX = 64  # MLX5_VPMD_RX_MAX_BURST
M24 = (1 << 24) - 1
M32 = (1 << 32) - 1


def be16(b, o):
    return (b[o] << 8) | b[o + 1]


def be32(b, o):
    return int.from_bytes(bytes(b[o:o + 4]), "big")


def le32(b, o):
    return int.from_bytes(bytes(b[o:o + 4]), "little")


def num(s):
    return int(s, 16) if s.startswith("0x") else int(s)


def parse(path):
    cases, cur = [], None
    for line in open(path):
        line = line.rstrip("\n")
        if line.startswith("#"):
            continue
        if line.startswith("case="):
            cur = (line[5:], {})
        elif line == "end":
            if cur:
                cases.append(cur)
            cur = None
        elif cur is not None and "=" in line:
            k, v = line.split("=", 1)
            cur[1][k] = v
    return cases


SW, HW, ERR = 0, 1, 2


def check_cqe(b, log_cq, ci):
    op = b[63]
    if (op & 1) != ((ci >> log_cq) & 1) or (op >> 4) == 0xF:
        return HW
    return ERR if (op >> 4) in (0xD, 0xE) else SW


def check_cqe_iteration(b, log_cq, ci):
    op = b[63]
    if b[62] != ((ci >> log_cq) & 0xFF) or (op >> 4) == 0xF:
        return HW
    return ERR if (op >> 4) in (0xD, 0xE) else SW


def fmt3(b):
    return ((b[63] >> 2) & 3) == 3


class Model(Exception):
    pass


class Case:
    """Ring and queue configuration of one case."""

    def __init__(self, kv):
        self.kv = kv
        g = lambda k, d=0: num(kv[k]) if k in kv else d
        self.mprq = kv.get("rq_type") == "mprq"
        self.enh = kv["layout"] == "enhanced"
        self.fmt = FMT[kv["mcqe_format"]]
        self.log_cq = g("cfg.log_cq")
        self.cqn = 1 << self.log_cq
        if self.mprq:
            self.log_wqe = g("cfg.log_wqe")
            self.log_strd_num = g("cfg.log_strd_num")
            self.log_strd_sz = g("cfg.log_strd_sz")
            self.memcpy_len = g("cfg.mprq_max_memcpy_len", 128)
            self.strd_scatter = g("cfg.strd_scatter_en")
            self.strd_shift = g("cfg.strd_shift_en")
        else:
            self.log_rq = g("cfg.log_rq")
        self.csum = g("cfg.csum")
        self.rss = g("cfg.rss_hash")
        self.vlan = g("cfg.vlan_strip")
        self.crc = g("cfg.crc_present")
        self.mark = g("cfg.mark")
        self.packets = g("in.packets")
        self.bursts = [int(x) for x in kv["cfg.bursts"].split(",")]
        self.byte_mask = M32
        if self.mark and self.fmt == FMT["ftag_stridx"]:
            self.byte_mask = 0x00FFFFFF  # MLX5_LEN_WITH_MARK_MASK (not exercised)
        ring = []
        for _ in range(self.cqn):
            s = bytearray(64)
            s[62], s[63] = 0xFF, 0xF1
            ring.append(s)
        for k, v in kv.items():
            for p in ("in.cqe.", "in.stale."):
                if k.startswith(p):
                    ring[int(k[len(p):])] = bytearray(bytes.fromhex(v))
        self.ring0 = ring

    def ring(self):
        return [bytearray(s) for s in self.ring0]


class Pkt(dict):
    pass


def title_from_ring(c, ring, cq_ci):
    """Title the warm-up left behind: the regular CQE before cq_ci."""
    if cq_ci == 0:
        return bytearray(64)
    return bytearray(ring[(cq_ci - 1) & (c.cqn - 1)])


# ---------------------------------------------------------------- scalar --


class Path:
    """What both paths keep of the queue: the ring, the counters before the
    call (`<prefix>.in.*`) and the doorbell records."""

    def __init__(self, c, kv, prefix):
        self.c = c
        self.g = lambda k, d=0: num(kv[prefix + k]) if prefix + k in kv else d
        self.ring = c.ring()
        self.cq_ci = self.g(".in.cq_ci")
        self.rq_ci = self.g(".in.rq_ci")
        self.rq_pi = self.g(".in.rq_pi")
        self.elts_ci = self.g(".in.elts_ci")
        self.consumed = self.g(".in.consumed_strd")
        self.cq_db = bytes.fromhex(kv.get(prefix + ".in.cq_dbrec", "00000000"))
        self.rq_db = bytes.fromhex(kv.get(prefix + ".in.rq_dbrec", "00000000"))
        self.mask = c.cqn - 1

    def slot(self, i):
        return self.ring[i & self.mask]

    def common_outputs(self, o):
        o["out.cq_ci"] = self.cq_ci
        o["out.rq_ci"] = self.rq_ci
        o["out.rq_pi"] = self.rq_pi
        if self.c.mprq:
            o["out.elts_ci"] = self.elts_ci
            o["out.consumed_strd"] = self.consumed


class Scalar(Path):
    def __init__(self, c, kv):
        super().__init__(c, kv, "scalar")
        self.ai = self.g(".in.zip.ai")
        self.cqe_cnt = self.g(".in.zip.cqe_cnt")
        self.ca = self.g(".in.zip.ca")
        self.na = self.g(".in.zip.na")
        self.zcq = self.g(".in.zip.cq_ci")
        self.title = title_from_ring(c, self.ring, self.cq_ci) if c.enh else bytearray(64)

    def poll_len(self):
        c = self.c
        if self.ai:
            mc = self.slot(self.ca)
            k = (self.ai & 7) * 8
            mcqe = bytes(mc[k:k + 8])
            ln = be32(mcqe, 4) & c.byte_mask
            if c.enh:
                self.ai = (self.ai + 1) & 0xFFFF
                if self.ai == self.cqe_cnt:
                    self.cq_ci = self.zcq & M24
                    self.ai = 0
            else:
                self.ai = (self.ai + 1) & 0xFFFF
                if (self.ai & 7) == 0:
                    i = self.ca
                    while i != self.na:
                        self.slot(i)[63] = INVALIDATE
                        i = (i + 1) & M32
                    self.ca = self.na
                    self.na = (self.na + 8) & M32
                if self.ai == self.cqe_cnt:
                    i = self.ca
                    while i != self.zcq:
                        self.slot(i)[63] = INVALIDATE
                        i = (i + 1) & M32
                    self.cq_ci = self.zcq & M24
                    self.ai = 0
            return ln, mcqe
        cqe = self.slot(self.cq_ci)
        st = (check_cqe_iteration if c.enh else check_cqe)(cqe, c.log_cq, self.cq_ci)
        if st == ERR:
            raise Model("error CQE not modelled")
        if st != SW:
            return 0, None
        cq_ci = self.cq_ci + (0 if c.enh else 1)
        op = cqe[63]
        if fmt3(cqe):
            mc = self.slot(cq_ci)
            self.cqe_cnt = ((op >> 4) + 1) if c.enh else (be32(cqe, 44) & 0xFFFF)
            self.ca = cq_ci & M32
            self.na = (self.ca + 7) & M32
            self.zcq = (self.cq_ci + self.cqe_cnt) & M32
            mcqe = bytes(mc[0:8])
            ln = be32(mcqe, 4) & c.byte_mask
            if c.enh:
                if op >> 4:
                    self.ai = 1
                else:
                    self.cq_ci = self.zcq & M24
            else:
                self.ai = 1
            return ln, mcqe
        self.cq_ci = (self.cq_ci + 1) & M24
        ln = be32(cqe, 44)
        if c.enh:
            nxt = self.slot(self.cq_ci)
            if check_cqe_iteration(nxt, c.log_cq, self.cq_ci) != SW or fmt3(nxt):
                self.title = bytearray(cqe)
        return ln, None

    def to_mbuf(self, p, cqe, mcqe):
        c = self.c
        pinfo = (cqe[0] & 3) << 6
        if mcqe is None or c.fmt != FMT["l34h_stridx"]:
            idx = cqe[29] >> 2
        else:
            idx = mcqe[0] >> 2
        p["packet_type"] = PTYPE.get(idx | pinfo, 0)
        ol = p["ol_flags"]
        if c.rss:
            h = be32(cqe, 12) if (mcqe is None or c.fmt != FMT["hash"]) else be32(mcqe, 0)
            if h:
                p["hash_rss"] = h
                ol |= F_RSS
        if c.mark:
            if mcqe is None or c.fmt != FMT["ftag_stridx"]:
                mark = le32(cqe, 56)
            else:
                mark = ((le32(mcqe, 4) & 0xFF) << 8) | (int.from_bytes(mcqe[0:2], "little") << 16)
            if mark & 0xFFFFFF00:
                ol |= F_FDIR
                if mark != 0xFFFFFF00:
                    ol |= F_FDIR_ID
        if c.csum:
            f = be16(cqe, 28)
            ol |= (F_IP_GOOD if f & 0x200 else 0) | (F_L4_GOOD if f & 0x400 else 0)
        if c.vlan:
            if mcqe is None or c.fmt != FMT["l34h_stridx"]:
                v = cqe[29] & 1
            else:
                v = mcqe[0] & 1
            if v:
                ol |= F_VLAN | F_VLAN_STRIPPED
                p["vlan_tci"] = be16(cqe, 30)
        p["ol_flags"] = ol

    def burst(self, n):
        return self.burst_mprq(n) if self.c.mprq else self.burst_sprq(n)

    def burst_sprq(self, n):
        c = self.c
        wmask = (1 << c.log_rq) - 1
        out = []
        rq_ci = self.rq_ci
        while n:
            cqe_i = self.cq_ci
            ln, mcqe = self.poll_len()
            if ln == 0:
                break
            if c.crc:
                ln -= 4
            cqe = self.title if (c.enh and mcqe is not None) else self.slot(cqe_i)
            p = Pkt(rq_idx=rq_ci & wmask, pkt_len=ln, data_len=ln, nb_segs=1,
                    data_off=HEADROOM, port=0, hash_rss=0, ol_flags=0, vlan_tci=0)
            self.to_mbuf(p, cqe, mcqe)
            if ln > MBUF_DATA_ROOM:
                raise Model("multi-segment packet not modelled")
            out.append(p)
            n -= 1
            rq_ci = (rq_ci + 1) & M32
        if not out and rq_ci == self.rq_ci:
            return out
        self.rq_ci = rq_ci
        self.cq_db = self.cq_ci.to_bytes(4, "big")
        self.rq_db = self.rq_ci.to_bytes(4, "big")
        return out

    def burst_mprq(self, n):
        c = self.c
        strd_n = 1 << c.log_strd_num
        strd_sz = 1 << c.log_strd_sz
        wmask = (1 << c.log_wqe) - 1
        out = []
        rq_ci = self.rq_ci
        consumed = self.consumed
        while len(out) < n:
            if consumed == strd_n:
                consumed = 0
                rq_ci = (rq_ci + 1) & M32
            cqe_i = self.cq_ci
            ret, mcqe = self.poll_len()
            if ret == 0:
                break
            ln = ret & 0xFFFF
            if c.crc:
                ln -= 4
            if mcqe is not None and c.fmt == FMT["ftag_stridx"]:
                strd_cnt = ln // strd_sz + (1 if ln % strd_sz else 0)
            else:
                strd_cnt = (ret & 0x3FFF0000) >> 16
            consumed = (consumed + strd_cnt) & 0xFFFF
            if ret & 0x80000000:
                continue
            cqe = self.title if (c.enh and mcqe is not None) else self.slot(cqe_i)
            strd_idx = be16(cqe, 60) if mcqe is None else be16(mcqe, 2)
            p = Pkt(pkt_len=ln, data_len=ln, nb_segs=1, data_off=HEADROOM, port=0,
                    hash_rss=0, ol_flags=0, vlan_tci=0, external=0)
            if not buf_to_pkt(c, p, ln, rq_ci & wmask, strd_idx, strd_cnt):
                continue
            self.to_mbuf(p, cqe, mcqe)
            out.append(p)
        self.consumed = consumed
        self.cq_db = self.cq_ci.to_bytes(4, "big")
        if rq_ci != self.rq_ci:
            self.rq_ci = rq_ci
            self.rq_db = self.rq_ci.to_bytes(4, "big")
        return out

    def outputs(self, o):
        self.common_outputs(o)
        if self.c.mprq:
            o["out.zip.ai"] = self.ai
            o["out.zip.cqe_cnt"] = self.cqe_cnt
        else:
            o["out.zip.ai"] = self.ai
            o["out.zip.cqe_cnt"] = self.cqe_cnt
            o["out.zip.ca"] = self.ca
            o["out.zip.na"] = self.na
            o["out.zip.cq_ci"] = self.zcq
        o["out.cq_dbrec"] = self.cq_db.hex()
        o["out.rq_dbrec"] = self.rq_db.hex()


def buf_to_pkt(c, p, ln, wqe, strd_idx, strd_cnt):
    """mprq_buf_to_pkt: False if the packet is dropped."""
    strd_sz = 1 << c.log_strd_sz
    hdrm_overlap = ln + HEADROOM - strd_cnt * strd_sz
    if ln <= c.memcpy_len or (hdrm_overlap > 0 and not c.strd_scatter):
        if ln <= MBUF_DATA_ROOM:
            p["data_len"] = ln
            return True
        if c.strd_scatter:
            raise Model("scattered MPRQ copy not modelled")
        return False
    if hdrm_overlap > 0:
        raise Model("MPRQ headroom overlap with scatter not modelled")
    p["external"] = 1
    p["ol_flags"] |= F_EXTERNAL
    p["attached_wqe"] = wqe
    p["attached_stride"] = strd_idx
    p["data_len"] = ln
    return True


# ---------------------------------------------------------------- vector --


class Vec(Path):
    def __init__(self, c, kv):
        super().__init__(c, kv, "vec")
        self.decompressed = self.g(".in.decompressed")
        if c.mprq:
            self.e_n = (1 << c.log_wqe) << c.log_strd_num
            self.thresh = min(VMAX, self.e_n >> 2)
        else:
            self.e_n = 1 << c.log_rq
            # rq_repl_thresh = MLX5_VPMD_RXQ_RPLNSH_THRESH(desc + DESCS)
            self.thresh = min(VMAX, (self.e_n + DESCS) >> 2)
        self.elts = {}  # ring position -> Pkt prepared by the CQE processing
        self.title = None
        if c.enh:
            t = title_from_ring(c, self.ring, self.cq_ci)
            self.title = self.regular(t)

    def regular(self, cqe):
        """rxq_cq_process_v + rxq_cq_to_ptype_oflags_v for one CQE."""
        c = self.c
        ln = (be16(cqe, 46) - 4 * c.crc) & 0xFFFF
        pinfo = (cqe[0] & 3) << 6
        idx = (cqe[29] >> 2) | pinfo
        ol = F_RSS if c.rss else 0
        if c.mark:
            ft = int.from_bytes(bytes([cqe[0], cqe[57], cqe[58], cqe[59]]), "little") & 0xFFFFFF00
            if ft:
                ol |= F_FDIR
                if ft != 0xFFFFFF00:
                    ol |= F_FDIR_ID
        f = cqe[28]
        ol |= (F_IP_GOOD if f & 2 else 0) | (F_L4_GOOD if f & 4 else 0)
        if cqe[29] & 1:
            ol |= F_VLAN | F_VLAN_STRIPPED
        return Pkt(pkt_len=ln, data_len=ln, nb_segs=1, data_off=HEADROOM, port=0,
                   hash_rss=be32(cqe, 12), ol_flags=ol, packet_type=PTYPE.get(idx, 0),
                   vlan_tci=be16(cqe, 30))

    def process(self, base, pkts_n, pos0):
        """rxq_cq_process_v: returns (nocmp_n, comp_idx)."""
        c = self.c
        own = 0 if (self.cq_ci & c.cqn) else 1
        vic = (self.cq_ci >> c.log_cq) & 0xFF
        nocmp = 0
        comp_idx, n = DESCS, 0
        pos = 0
        while pos < pkts_n:
            comp_idx = DESCS
            n = DESCS
            for j in range(DESCS):
                if pos + j >= pkts_n:
                    n = min(n, j)
                    break
                b = self.slot(base + pos + j)
                if c.enh:
                    bad = b[62] != vic
                else:
                    bad = (b[63] & 1) == own
                bad = bad or (b[63] >> 4) == 0xF
                if bad:
                    n = min(n, j)
                    break
                if fmt3(b):
                    comp_idx = j
                    n = min(n, j)
                    break
            # build the mbufs of every slot of the group that might be used
            for j in range(min(DESCS, pkts_n - pos)):
                b = self.slot(base + pos + j)
                self.elts[pos0 + pos + j] = self.regular(b)
            nocmp += n
            if n != DESCS:
                break
            pos += DESCS
        return nocmp, (comp_idx if comp_idx == n else DESCS)

    def decompress(self, cqi, pos0, keep):
        """rxq_cq_decompress_v at CQ index cqi into elts[pos0...]."""
        c = self.c
        cq = self.slot(cqi)
        if c.enh:
            t = self.title
        else:
            t = self.elts[pos0]
        mcqe_n = ((cq[63] >> 4) + 1) if c.enh else (be32(cq, 44) & 0xFFFF)
        pkts_n = mcqe_n
        t = Pkt(t)
        base_cq = cqi
        while True:
            mbase = base_cq if c.enh else base_cq + 1
            for k in range(mcqe_n):
                if c.enh:
                    arr = self.slot(mbase)
                else:
                    arr = self.slot(mbase + (0 if k < 8 else (k // 8) * 8 - 1))
                m = arr[(k % 8) * 8:(k % 8) * 8 + 8]
                ln = (be16(m, 6) - 4 * c.crc) & 0xFFFF
                p = Pkt(t)
                p["pkt_len"] = ln
                p["data_len"] = ln
                p["hash_rss"] = be32(m, 0)
                if c.fmt != FMT["hash"]:
                    p["ol_flags"] = t["ol_flags"] & ~F_RSS & 0xFFFFFFFF
                    p["hash_rss"] = 0
                self.elts[pos0 + (pkts_n - mcqe_n) + k] = p
            if not c.enh:
                # invalidation: blocks of 8 while more minis follow, then the rest
                inv = 0
                pos = 0
                while pos < mcqe_n:
                    pos += DESCS
                    if not (pos & 7) and pos < mcqe_n:
                        for _ in range(8):
                            self.slot(base_cq + inv)[63] = INVALIDATE
                            inv += 1
                while inv < pkts_n:
                    self.slot(base_cq + inv)[63] = INVALIDATE
                    inv += 1
                break
            if keep:
                nxt_i = base_cq + mcqe_n
                nxt = self.slot(nxt_i)
                if check_cqe_iteration(nxt, c.log_cq, self.cq_ci + pkts_n) == SW and fmt3(nxt):
                    base_cq = nxt_i
                    mcqe_n = (nxt[63] >> 4) + 1
                    pkts_n += mcqe_n
                    continue
                break
            for inv in range(pkts_n):
                self.slot(cqi + inv)[63] = INVALIDATE
            break
        return pkts_n

    def take(self, n):
        """rxq_copy_mbuf_v: n packets from elts[rq_pi]."""
        out = []
        for _ in range(n):
            p = self.elts.pop(self.rq_pi & M32)
            p["rq_idx"] = self.rq_pi & (self.e_n - 1)
            out.append(p)
            self.rq_pi = (self.rq_pi + 1) & M32
        return out

    def copy_mprq(self, n):
        """rxq_copy_mprq_mbuf_v."""
        c = self.c
        strd_n = 1 << c.log_strd_num
        strd_sz = 1 << c.log_strd_sz
        wmask = (1 << c.log_wqe) - 1
        rq_ci = self.rq_ci
        out = []
        for i in range(n):
            if self.consumed == strd_n:
                self.consumed = 0
                rq_ci = (rq_ci + 1) & M32
            p = self.elts.pop((self.rq_pi + i) & M32)
            ln = p["pkt_len"]
            if not ln:
                self.consumed = strd_n
                continue
            strd_cnt = ln // strd_sz + (1 if ln % strd_sz else 0)
            ok = buf_to_pkt(c, p, ln, rq_ci & wmask, self.consumed, strd_cnt)
            self.consumed = (self.consumed + strd_cnt) & 0xFFFF
            if ok:
                out.append(p)
        self.rq_pi = (self.rq_pi + n) & M32
        self.cq_ci = (self.cq_ci + n) & M24
        if rq_ci != self.rq_ci:
            self.rq_ci = rq_ci
            self.rq_db = self.rq_ci.to_bytes(4, "big")
        return out

    def title_copy(self, first_i, nocmp_n):
        c = self.c
        cq = self.slot(first_i)
        if check_cqe_iteration(cq, c.log_cq, self.cq_ci) == SW and not fmt3(cq):
            nxt = self.slot(self.cq_ci)
            if fmt3(nxt) or check_cqe_iteration(nxt, c.log_cq, self.cq_ci) != SW:
                self.title = Pkt(self.elts_prev[nocmp_n - 1])

    def burst_v(self, pkts_n):
        c = self.c
        q_n = c.cqn
        e_mask = self.e_n - 1
        cq_i = self.cq_ci
        cq_idx = cq_i & self.mask
        pkts_n = min(pkts_n, VMAX)
        # mlx5_rx_replenish_bulk_mbuf
        nrep = (self.e_n - (self.rq_ci - self.rq_pi)) & 0xFFFF
        if nrep >= self.thresh:
            eidx = self.rq_ci & e_mask
            nrep = min(nrep - DESCS, self.e_n - eidx)
            self.rq_ci = (self.rq_ci + nrep) & M32
            self.rq_db = self.rq_ci.to_bytes(4, "big")
        out = []
        rcvd = self.decompressed
        if rcvd > 0:
            rcvd = min(rcvd, pkts_n)
            out += self.take(rcvd)
            self.decompressed -= rcvd
        elts_idx = self.rq_pi & e_mask
        pkts_n = (pkts_n - rcvd) & ~(DESCS - 1)
        pkts_n = min(pkts_n, q_n - elts_idx, q_n - cq_idx)
        pkts_n = min(pkts_n, ((self.rq_ci - self.rq_pi) & M32) & ~(DESCS - 1))
        if not pkts_n:
            return out, not rcvd
        base_pos = self.rq_pi
        nocmp_n, comp_idx = 0, DESCS
        go_dec = False
        if c.enh:
            b = self.slot(cq_i)
            if check_cqe_iteration(b, c.log_cq, self.cq_ci) == SW and fmt3(b):
                comp_idx = 0
                go_dec = True
        if not go_dec:
            nocmp_n, comp_idx = self.process(cq_i, pkts_n, base_pos)
            if not nocmp_n and comp_idx == DESCS:
                return out, True
            self.cq_ci = (self.cq_ci + nocmp_n) & M24
            self.elts_prev = [self.elts[base_pos + k] for k in range(nocmp_n)]
            out += self.take(nocmp_n)
            rcvd += nocmp_n
            if c.enh:
                self.title_copy(cq_i, nocmp_n)
        if comp_idx < DESCS:
            self.decompressed = self.decompress(cq_i + nocmp_n, base_pos + nocmp_n, True)
            self.cq_ci = (self.cq_ci + self.decompressed) & M24
            if nocmp_n < pkts_n:
                n = min(self.decompressed, pkts_n - nocmp_n)
                out += self.take(n)
                rcvd += n
                self.decompressed -= n
        return out, not rcvd

    def burst_mprq_v(self, pkts_n):
        c = self.c
        q_n = c.cqn
        e_n = self.e_n
        e_mask = e_n - 1
        cq_i = self.cq_ci
        cq_idx = cq_i & self.mask
        pkts_n = min(pkts_n, VMAX)
        # mlx5_rx_mprq_replenish_bulk_mbuf
        nrep = (e_n - (self.elts_ci - self.rq_pi)) & M32
        if nrep >= self.thresh and ((self.elts_ci - self.rq_pi) & M32) <= self.thresh + VMAX:
            eidx = self.elts_ci & e_mask
            nrep = min(nrep - DESCS, e_n - eidx, self.thresh)
            self.elts_ci = (self.elts_ci + nrep) & M32
        pkts_n = min(pkts_n, (self.elts_ci - self.rq_pi) & M32)
        out = []
        rcvd = self.decompressed
        cp = 0
        if rcvd > 0:
            rcvd = min(rcvd, pkts_n)
            got = self.copy_mprq(rcvd)
            cp = len(got)
            out += got
            self.decompressed -= rcvd
        elts_idx = self.rq_pi & e_mask
        pkts_n = (pkts_n - cp) & ~(DESCS - 1)
        pkts_n = min(pkts_n, e_n - elts_idx, q_n - cq_idx)
        if not pkts_n:
            return out, not cp
        # DPDK keeps the CQ pointer taken before the copies above moved cq_ci
        base_pos = self.rq_pi
        nocmp_n, comp_idx = 0, DESCS
        go_dec = False
        if c.enh:
            b = self.slot(cq_i)
            if check_cqe_iteration(b, c.log_cq, self.cq_ci) == SW and fmt3(b):
                comp_idx = 0
                go_dec = True
        if not go_dec:
            nocmp_n, comp_idx = self.process(cq_i, pkts_n, base_pos)
            if not nocmp_n and comp_idx == DESCS:
                return out, True
            self.elts_prev = [self.elts[base_pos + k] for k in range(nocmp_n)]
            got = self.copy_mprq(nocmp_n)  # mutates the mbufs elts_prev holds
            cp = len(got)
            out += got
            rcvd += cp
            if c.enh:
                self.title_copy(cq_i, nocmp_n)
        if comp_idx < DESCS:
            self.decompressed = self.decompress(cq_i + nocmp_n, base_pos + nocmp_n, False)
            if nocmp_n < pkts_n:
                n = min(self.decompressed, pkts_n - nocmp_n)
                got = self.copy_mprq(n)
                cp = len(got)
                out += got
                rcvd += cp
                self.decompressed -= n
        return out, not rcvd

    def burst(self, n):
        out = []
        tn = 0
        while True:
            if self.c.mprq:
                got, no_cq = self.burst_mprq_v(n - tn)
            else:
                got, no_cq = self.burst_v(n - tn)
            out += got
            tn += len(got)
            if no_cq:
                break
            self.cq_db = self.cq_ci.to_bytes(4, "big")
            if tn == n:
                break
        return out

    def outputs(self, o):
        self.common_outputs(o)
        o["out.decompressed"] = self.decompressed
        o["out.cq_dbrec"] = self.cq_db.hex()
        o["out.rq_dbrec"] = self.rq_db.hex()


PKT_FIELDS = ("rq_idx", "pkt_len", "data_len", "nb_segs", "data_off", "port", "hash_rss",
              "ol_flags", "cksum_flags", "packet_type", "vlan_tci", "external",
              "attached_wqe", "attached_stride")


def fmt_pkt(k, v):
    if k == "hash_rss":
        return "0x%08x" % v
    if k == "ol_flags":
        return "0x%016x" % v
    if k == "cksum_flags":
        return "0x%x" % v
    if k == "packet_type":
        return "0x%08x" % v
    if k == "vlan_tci":
        return "0x%04x" % v
    return str(v)


MAX_CALLS = 64


def run_path(c, kv, path, recorded=True, max_calls=MAX_CALLS):
    """Replays the case's burst cycle; returns {key: value string} (prefix-less)."""
    m = Scalar(c, kv) if path == "scalar" else Vec(c, kv)
    o = {}
    got = 0
    call = 0
    zeros = 0
    while call < max_calls:
        key = "%s.call.%d" % (path, call)
        if recorded:
            # the requests are inputs of the case: replay them as recorded
            if key not in kv:
                break
            req = int(kv[key].split()[0][4:])
        else:
            if got >= c.packets:
                break
            # the generator's poller: cycle the burst sizes; after two empty
            # calls in a row ask for a full vector burst (the vector path
            # returns nothing for fewer than 4 unless minis are left over)
            req = VMAX if zeros >= 2 else c.bursts[call % len(c.bursts)]
        pk = m.burst(req)
        zeros = 0 if pk else zeros + 1
        o["call.%d" % call] = "req:%d ret:%d" % (req, len(pk))
        for p in pk:
            p = dict(p)
            p["cksum_flags"] = p["ol_flags"] & CKSUM_MASK
            if c.mprq:
                p["external"] = 1 if p["ol_flags"] & F_EXTERNAL else 0
                p.pop("rq_idx", None)
                p.pop("vlan_tci", None)
            for f in PKT_FIELDS:
                if f in p:
                    o["pkt.%d.%s" % (got, f)] = fmt_pkt(f, p[f])
            got += 1
        call += 1
    o["received"] = str(got)
    m.outputs(o)
    for s in range(c.cqn):
        if m.ring[s] != c.ring0[s]:
            o["cq_after.%d" % s] = m.ring[s].hex()
    return {k: (v if isinstance(v, str) else str(v)) for k, v in o.items()}


def compare(name, kv, verbose=False):
    c = Case(kv)
    diffs = []
    for path in ("scalar", "vec"):
        if path + ".func" not in kv:
            continue
        try:
            o = run_path(c, kv, path)
        except Model as e:
            diffs.append("%s: not modelled: %s" % (path, e))
            continue
        want = {k[len(path) + 1:]: v for k, v in kv.items()
                if k.startswith(path + ".") and not k.startswith(path + ".in.")
                and k[len(path) + 1:] not in ("func", "check_same_cq_input")
                and not k[len(path) + 1:].startswith("check_")}
        for k in sorted(set(want) | set(o)):
            w, g = want.get(k), o.get(k)
            if w is None or g is None or num_eq(w, g) is False:
                diffs.append("%s.%s: dpdk %s model %s" % (path, k, w, g))
    return diffs


def num_eq(a, b):
    try:
        return num(a) == num(b)
    except ValueError:
        return a == b


def main(argv):
    if len(argv) < 3 or argv[1] != "check":
        print(__doc__)
        return 2
    verbose = "-v" in argv
    cases = parse(argv[2])
    bad = 0
    for name, kv in cases:
        d = compare(name, kv, verbose)
        if d:
            bad += 1
            print("DIFF %s (%d)" % (name, len(d)))
            for x in d[: (1000 if verbose else 12)]:
                print("   ", x)
        elif verbose:
            print("OK   %s" % name)
    print("rx_model: %d/%d cases reproduced" % (len(cases) - bad, len(cases)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
