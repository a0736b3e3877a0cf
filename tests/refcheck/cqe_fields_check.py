#!/usr/bin/env python3
"""Independent field-by-field check of `mlx5dp decode cqe`.

An independent decoder of `struct mlx5_cqe64` and `struct mlx5_err_cqe`,
written from the public headers (not from mlx5dp's code):

  RC  rdma-core v44 providers/mlx5/mlx5dv.h (struct mlx5_cqe64, mlx5_err_cqe,
      MLX5_CQE_* opcodes, syndromes, L2/L3/L4_OK, L3 header types,
      mlx5dv_get_cqe_{owner,se,format,opcode}), providers/mlx5/cq.c
      (mlx5_parse_cqe, handle_good_req, handle_responder, get_csum_ok,
      mlx5_handle_error_cqe: the ibv_wc fields ibv_poll_cq writes),
      libibverbs/verbs.h + enum_strs.c (ibv_wc_opcode/flags/status, names)
  LK  Linux include/linux/mlx5/device.h (struct mlx5_cqe64 with lro/shampo,
      check_sum, srqn [31:24] lro_num_seg, get_cqe_l4_hdr_type,
      get_cqe_l3_hdr_type, cqe_has_vlan, get_cqe_opcode, mlx5_get_cqe_format,
      get_cqe_lro_*, mpwrq_get_cqe_*, get_cqe_flow_tag, CQE_L4_HDR_TYPE_*),
      drivers/infiniband/core/verbs.c (ib_wc_status_msg strings)
  DP  DPDK drivers/common/mlx5/mlx5_prm.h (struct mlx5_cqe: pkt_info,
      hdr_type_etc, lro_num_seg/user_index, flow_table_metadata;
      struct mlx5_err_cqe: eth_wqe_id, ib_stride_index, byte_cnt,
      hw_err_synd, hw_synd_type; MLX5_MPRQ_* masks), drivers/net/mlx5/mlx5_rx.c
      (ptype index: l4_l3 byte bits [7:2], bit 7 = IP fragment)
  PF  /work/shared/PRM-FACTS.md sections 8, 9, 10

Random CQEs (every opcode nibble incl. error CQEs, every format, random
field values, 64- and 128-byte slots, several --wr-data values) are run
through the tool; every JSON key the tool prints is mapped to a field of
this decoder and compared (value and derived name). Keys that cannot be
mapped are listed, never guessed. The human (non-JSON) output is checked
against the JSON.

Where the anchors disagree with one another the decoder accepts each
anchor's reading and the disagreement is reported as an interpretation
difference (class c), not a failure.

Usage: cqe_fields_check.py N SEED --tool PATH [--verbose]
Exit status 1 on any disagreement of class a/b (unexplained).
"""
import argparse
import json
import random
import subprocess
import sys
from collections import Counter, defaultdict


def be16(b, o):
    return (b[o] << 8) | b[o + 1]


def be32(b, o):
    return int.from_bytes(b[o:o + 4], "big")


def be64(b, o):
    return int.from_bytes(b[o:o + 8], "big")


# RC mlx5dv.h enum (MLX5_CQE_*); several spellings accepted for one meaning.
CQE_OPCODES = {
    0: {"req"},
    1: {"resp_wr_imm", "resp_rdma_write_imm"},
    2: {"resp_send"},
    3: {"resp_send_imm"},
    4: {"resp_send_inv"},
    5: {"resize_cq"},
    6: {"no_packet"},
    12: {"sig_err"},
    13: {"req_err"},
    14: {"resp_err"},
    15: {"invalid"},
}
# LK enum {MLX5_NO_INLINE_DATA, MLX5_INLINE_DATA32_SEG, MLX5_INLINE_DATA64_SEG,
# MLX5_COMPRESSED}; RC MLX5_INLINE_SCATTER_32/64.
FORMATS = {
    0: {"no_inline", "no_inline_data"},
    1: {"inline_scatter_32", "inline_data32_seg"},
    2: {"inline_scatter_64", "inline_data64_seg"},
    3: {"compressed"},
}
# LK CQE_L4_HDR_TYPE_*
L4_TYPES = {0: {"none"}, 1: {"tcp_no_ack"}, 2: {"udp"}, 3: {"tcp_ack_no_data"}, 4: {"tcp_ack_and_data"}}
# RC MLX5_CQE_L3_HDR_TYPE_* / LK CQE_L3_HDR_TYPE_*
L3_TYPES = {0: {"none"}, 1: {"ipv6"}, 2: {"ipv4"}}
# RC mlx5dv.h MLX5_CQE_SYNDROME_* -> (name, ibv_wc_status per cq.c mlx5_handle_error_cqe)
SYNDROMES = {
    0x01: ("local_length_err", 1),
    0x02: ("local_qp_op_err", 2),
    0x04: ("local_prot_err", 4),
    0x05: ("wr_flush_err", 5),
    0x06: ("mw_bind_err", 6),
    0x10: ("bad_resp_err", 7),
    0x11: ("local_access_err", 8),
    0x12: ("remote_inval_req_err", 9),
    0x13: ("remote_access_err", 10),
    0x14: ("remote_op_err", 11),
    0x15: ("transport_retry_exc_err", 12),
    0x16: ("rnr_retry_exc_err", 13),
    0x22: ("remote_aborted_err", 16),
}
GENERAL_ERR = 21
# libibverbs enum_strs.c ibv_wc_status_str
IBV_STATUS_STR = {
    0: "success", 1: "local length error", 2: "local QP operation error",
    3: "local EE context operation error", 4: "local protection error",
    5: "Work Request Flushed Error", 6: "memory management operation error",
    7: "bad response error", 8: "local access error",
    9: "remote invalid request error", 10: "remote access error",
    11: "remote operation error", 12: "transport retry counter exceeded",
    13: "RNR retry counter exceeded", 14: "local RDD violation error",
    15: "remote invalid RD request", 16: "aborted error",
    17: "invalid EE context number", 18: "invalid EE context state",
    19: "fatal error", 20: "response timeout error", 21: "general error",
}
# LK drivers/infiniband/core/verbs.c wc_statuses[] (ib_wc_status_msg)
IB_STATUS_MSG = dict(IBV_STATUS_STR)
IB_STATUS_MSG.update({5: "WR flushed", 6: "memory bind operation error", 16: "operation aborted"})
# Send WQE opcodes: RC mlx5dv.h MLX5_OPCODE_*, LK qp.h, DP mlx5_prm.h (PF section 4)
SEND_OPCODES = {
    0x00: {"nop"}, 0x01: {"send_inv", "send_inval"}, 0x08: {"rdma_write"},
    0x09: {"rdma_write_imm"}, 0x0a: {"send"}, 0x0b: {"send_imm"},
    0x0e: {"tso", "lso"}, 0x0f: {"wait"}, 0x10: {"rdma_read"},
    0x11: {"atomic_cs"}, 0x12: {"atomic_fa"}, 0x14: {"atomic_masked_cs"},
    0x15: {"atomic_masked_fa"}, 0x17: {"send_en"}, 0x18: {"bind_mw"},
    0x19: {"fmr"}, 0x1b: {"local_inv", "local_inval"}, 0x1f: {"config_cmd"},
    0x20: {"set_psv"}, 0x21: {"get_psv"}, 0x22: {"check_psv"}, 0x23: {"dump"},
    0x25: {"umr"}, 0x26: {"rget_psv"}, 0x27: {"rcheck_psv"},
    0x28: {"tag_matching"}, 0x29: {"enhanced_mpsw", "empw"},
    0x2c: {"flow_tbl_access"}, 0x2d: {"access_aso"}, 0x2f: {"mmo"},
}
# libibverbs verbs.h enum ibv_wc_opcode (rdma-core HEAD names FLUSH = 8)
WC_OPCODES = {
    0: "send", 1: "rdma_write", 2: "rdma_read", 3: "comp_swap", 4: "fetch_add",
    5: "bind_mw", 6: "local_inv", 7: "tso", 8: "flush", 9: "atomic_write",
    128: "recv", 129: "recv_rdma_with_imm", 130: "tm_add", 131: "tm_del",
    132: "tm_sync", 133: "tm_recv", 134: "tm_no_tag", 135: "driver1",
    136: "driver2", 137: "driver3",
}
WC_FLAG_NAMES = [(1, "grh"), (2, "with_imm"), (4, "ip_csum_ok"), (8, "with_inv"),
                 (16, "tm_sync_req"), (32, "tm_match"), (64, "tm_data_valid")]


class Exp:
    """One expected field: accepted values (a set) and provenance."""

    def __init__(self, vals, src, interp=None):
        self.vals = vals if isinstance(vals, set) else {vals}
        self.src = src
        # interp: {value: "anchor reading"} when anchors disagree (class c)
        self.interp = interp or {}


def decode(slot, wr_data):
    """Expected field values for one CQE slot (64 or 128 bytes)."""
    size = len(slot)
    c = slot[size - 64:]
    e = {}

    def put(k, v, src, interp=None):
        e[k] = Exp(v, src, interp)

    op_own = c[63]
    opcode = op_own >> 4
    fmt = (op_own >> 2) & 3
    put("cqe_size", size, "RC cq.c get_sw_cqe: cqe64 = cqe + cqe_sz - 64")
    put("opcode_raw", opcode, "RC mlx5dv_get_cqe_opcode: op_own >> 4")
    put("opcode", CQE_OPCODES.get(opcode, {"unknown"}), "RC mlx5dv.h MLX5_CQE_*")
    put("format_raw", fmt, "RC mlx5dv_get_cqe_format: (op_own >> 2) & 3")
    put("format", FORMATS[fmt], "LK MLX5_NO_INLINE_DATA.. MLX5_COMPRESSED")
    put("owner", op_own & 1, "RC mlx5dv_get_cqe_owner")
    put("se", (op_own >> 1) & 1, "RC mlx5dv_get_cqe_se")
    put("signature", c[62], "RC signature / LK validity_iteration_count (byte 62)")
    sop = be32(c, 56)
    put("sop_drop_qpn", sop, "RC sop_drop_qpn (56-59)")
    put("qpn", sop & 0xffffff, "RC cq.c qpn = sop_drop_qpn & 0xffffff")
    put("flow_tag", sop & 0xffffff, "RC MLX5_FLOW_TAG_MASK 0x00ffffff",
        {sop & 0xfff: "LK get_cqe_flow_tag: sop_drop_qpn & 0xFFF"})
    put("wqe_counter", be16(c, 60), "RC wqe_counter (60-61)")
    bc = be32(c, 44)
    put("byte_cnt", bc, "RC byte_cnt (44-47)")
    put("timestamp", be64(c, 48), "RC timestamp (48-55); LK timestamp_h/l")
    put("pkt_info", c[0], "DP pkt_info / LK tls_outer_l3_tunneled (byte 0)")
    put("wqe_id", be16(c, 2), "RC/LK/DP wqe_id (2-3)")
    put("lro_tcppsh_abort_dupack", c[4], "LK lro.tcppsh_abort_dupack (byte 4)")
    put("lro_min_ttl", c[5], "LK lro.min_ttl (byte 5)")
    put("lro_tcp_win", be16(c, 6), "LK lro.tcp_win (6-7)")
    put("lro_ack_seq_num", be32(c, 8), "LK lro.ack_seq_num (8-11)")
    put("rss_hash_result", be32(c, 12), "LK rss_hash_result (12-15)")
    put("rss_hash_type", c[16], "LK rss_hash_type (16)")
    put("ml_path", c[17], "RC/LK ml_path (17)")
    put("dlid_path_bits", c[17] & 0x7f, "RC cq.c dlid_path_bits = ml_path & 0x7f")
    put("check_sum", be16(c, 20), "LK check_sum / DP csum (20-21)")
    put("slid", be16(c, 22), "RC slid (22-23)")
    fr = be32(c, 24)
    put("flags_rqpn", fr, "RC flags_rqpn (24-27)")
    put("rqpn", fr & 0xffffff, "RC cq.c src_qp = flags_rqpn & 0xffffff")
    put("sl", (fr >> 24) & 0xf, "RC cq.c sl = (flags_rqpn >> 24) & 0xf")
    put("grh", (fr >> 28) & 3, "RC cq.c g = (flags_rqpn >> 28) & 3")
    put("hds_ip_ext", c[28], "RC hds_ip_ext (28)")
    put("l2_ok", bool(c[28] & 1), "RC MLX5_CQE_L2_OK 1<<0")
    put("l3_ok", bool(c[28] & 2), "RC MLX5_CQE_L3_OK 1<<1")
    put("l4_ok", bool(c[28] & 4), "RC MLX5_CQE_L4_OK 1<<2")
    put("l4_l3_hdr_type", c[29], "LK l4_l3_hdr_type / RC l4_hdr_type_etc (29)")
    l3 = (c[29] >> 2) & 3
    l4 = (c[29] >> 4) & 7
    put("l3_hdr_type_raw", l3, "LK get_cqe_l3_hdr_type: (>> 2) & 3")
    put("l3_hdr_type", L3_TYPES.get(l3, {"unknown", "reserved"}), "RC/LK L3_HDR_TYPE_*")
    put("l4_hdr_type_raw", l4, "LK get_cqe_l4_hdr_type: (>> 4) & 7")
    put("l4_hdr_type", L4_TYPES.get(l4, {"unknown", "reserved"}), "LK CQE_L4_HDR_TYPE_*")
    put("ip_frag", bool(c[29] & 0x80), "DP ptype index bit 5 = byte 29 bit 7 (IP fragment)")
    put("cvlan_stripped", bool(c[29] & 1), "LK cqe_has_vlan: l4_l3_hdr_type & 1")
    vi = be16(c, 30)
    put("vlan_info", vi, "RC vlan_info (30-31)")
    put("vlan_id", vi & 0xfff, "LK get_cqe_vlan: & 0xfff")
    put("vlan_pcp", vi >> 13, "802.1Q TCI [15:13]")
    put("vlan_dei", bool(vi & 0x1000), "802.1Q TCI [12]")
    put("srqn_uidx", be32(c, 32) & 0xffffff, "RC cq.c srqn_uidx & 0xffffff; LK srqn [23:0]")
    put("lro_num_seg", c[32], "LK srqn [31:24] lro_num_seg / DP lro_num_seg (32)")
    imm = be32(c, 36)
    put("imm_inval_pkey", imm, "RC imm_inval_pkey (36-39)")
    put("pkey_index", imm & 0xffff, "RC cq.c pkey_index = imm_inval_pkey & 0xffff")
    put("app", c[40], "RC app (40)")
    put("app_op", c[41], "RC app_op (41)")
    put("app_info", be16(c, 42), "RC app_info (42-43)")
    put("mprq_byte_cnt", bc & 0xffff, "DP MLX5_MPRQ_LEN_MASK / LK mpwrq_get_cqe_byte_cnt")
    put("mprq_strides", (bc >> 16) & 0x3fff, "DP MLX5_MPRQ_STRIDE_NUM_MASK 0x3fff0000",
        {(bc >> 16) & 0x7fff: "LK mpwrq_get_cqe_bc_consumed_strides: 0x7fff & filler_consumed_strides"})
    put("mprq_filler", bool(bc >> 31), "DP MLX5_MPRQ_FILLER_MASK / LK mpwrq_is_filler_cqe")
    if size == 128:
        put("cqe128_first_half", slot[:64].hex(), "PF 9: 128-B slot, first half = inline data / GRH")
    # RC cq.c: mlx5_copy_to_{send,recv}_wqe(.., cqe or cqe - 1, wc->byte_len):
    # the copy length is the completion's byte_len (8 for atomics, byte_cnt
    # otherwise), within the 32 / 64 B region.
    so = sop >> 24
    ilen = 8 if (opcode == 0 and so in (0x11, 0x12)) else bc
    if fmt == 1:
        put("inline_data", c[:min(ilen, 32)].hex(), "RC cq.c copy_to_* from cqe (<= 32 B at CQE offset 0)",
            {c[:32].hex(): "whole 32-B region"})
    elif fmt == 2 and size == 128:
        put("inline_data", slot[:min(ilen, 64)].hex(),
            "RC cq.c copy_to_* from cqe - 1 (first half of 128-B slot)",
            {slot[:64].hex(): "whole 64-B region"})
    if fmt == 3:
        put("title_mini_cqe_count", bc, "PF 10.4 / LK mlx5e_read_title_slot: byte_cnt = minis")
        if opcode + 1 <= 7:
            # at most 7: 7 minis fill bytes 0-55 (PF 10.5; UX asserts block_size <= 7)
            put("enhanced_mini_cqe_count", opcode + 1, "LK get_cqe_enhanced_num_mini_cqes: opcode + 1")
    if opcode == 0:
        so = sop >> 24
        put("send_opcode_raw", so, "RC cq.c handle_good_req: sop_drop_qpn >> 24")
        put("send_opcode", SEND_OPCODES.get(so, {"unknown"}), "RC MLX5_OPCODE_* / LK / DP")
    if opcode in (13, 14):
        s = c[55]
        put("syndrome", s, "RC mlx5_err_cqe.syndrome (55)")
        put("syndrome_name", {SYNDROMES[s][0]} if s in SYNDROMES else {"unknown"},
            "RC MLX5_CQE_SYNDROME_*")
        put("vendor_syndrome", c[54], "RC vendor_err_synd (54)")
        put("hw_syndrome", c[52], "DP hw_err_synd (52)")
        put("hw_syndrome_type", c[53], "DP hw_synd_type (53)")
        put("s_wqe_opcode", c[56], "RC s_wqe_opcode_qpn [31:24]")
        put("s_wqe_opcode_name", SEND_OPCODES.get(c[56], {"unknown"}), "RC MLX5_OPCODE_*")
        put("srqn", be32(c, 32) & 0xffffff, "RC mlx5_err_cqe.srqn (32-35) [23:0]",
            {be32(c, 32): "RC/LK __be32 srqn read whole"})
        put("eth_wqe_id", be16(c, 2), "DP eth_wqe_id (2-3)")
        put("ib_stride_index", be16(c, 20), "DP ib_stride_index (20-21)")
    # ---- ibv_poll_cq (RC cq.c v44 mlx5_parse_cqe, non-lazy path) ----------
    # Context (the tool's --help): QP with the receive checksum capability,
    # no SRQ, the send slot recorded wr_data, scatter copies succeed.
    # Compressed (format 3) entries are not something libmlx5 parses
    # (PF 10.1); they are not modelled here (see SKIP_WC_FMT3).
    # libmlx5 dispatches on the opcode nibble alone (no format check), so a
    # format-3 entry is modelled like any other; the tool may leave these
    # keys out for compressed entries (OPTIONAL_FMT3, class c).
    if opcode in (6, 12, 15):
        return e
    put("wc_qp_num", sop & 0xffffff, "RC cq.c wc->qp_num = qpn")
    flags = 0
    wc = {}
    if opcode == 0:
        so = sop >> 24
        wc["status"] = 0
        if so == 0x09:
            flags |= 2
            wc["opcode"] = 1
        elif so == 0x08:
            wc["opcode"] = 1
        elif so == 0x0b:
            flags |= 2
            wc["opcode"] = 0
        elif so in (0x0a, 0x01):
            wc["opcode"] = 0
        elif so == 0x10:
            wc["opcode"] = 2
            wc["byte_len"] = bc
        elif so == 0x11:
            wc["opcode"] = 3
            wc["byte_len"] = 8
        elif so == 0x12:
            wc["opcode"] = 4
            wc["byte_len"] = 8
        elif so in (0x25, 0x20, 0x00, 0x2f):
            wc["opcode"] = wr_data
        elif so == 0x0e:
            wc["opcode"] = 7
        if wr_data == 136:
            wc["opcode"] = 136
    elif opcode in (1, 2, 3, 4):
        wc["status"] = 0
        wc["byte_len"] = bc
        if (c[28] & 6) == 6 and l3 == 2:
            flags |= 4
        if opcode == 1:
            wc["opcode"] = 129
            flags |= 2
            wc["imm"] = imm
        elif opcode == 2:
            wc["opcode"] = 128
        elif opcode == 3:
            wc["opcode"] = 128
            flags |= 2
            wc["imm"] = imm
        else:
            wc["opcode"] = 128
            flags |= 8
            wc["imm"] = imm
        wc["slid"] = be16(c, 22)
        wc["sl"] = (fr >> 24) & 0xf
        wc["src_qp"] = fr & 0xffffff
        wc["dlid_path_bits"] = c[17] & 0x7f
        if (fr >> 28) & 3:
            flags |= 1
        wc["pkey_index"] = imm & 0xffff
    elif opcode in (13, 14):
        st = SYNDROMES[c[55]][1] if c[55] in SYNDROMES else GENERAL_ERR
        wc["status"] = st
        wc["vendor_err"] = c[54]
    put("wc_flags", flags, "RC cq.c wc_flags")
    put("wc_flags_names", {"|".join(n for m, n in WC_FLAG_NAMES if flags & m),
                           ",".join(n for m, n in WC_FLAG_NAMES if flags & m),
                           " ".join(n for m, n in WC_FLAG_NAMES if flags & m)},
        "libibverbs IBV_WC_* flags")
    if "status" in wc:
        put("wc_status", wc["status"], "RC cq.c mlx5_handle_error_cqe / success")
        put("wc_status_name", IBV_STATUS_STR[wc["status"]], "libibverbs ibv_wc_status_str")
        put("wc_status_kernel_name", IB_STATUS_MSG[wc["status"]], "LK ib_wc_status_msg")
    if "opcode" in wc:
        put("wc_opcode_raw", wc["opcode"], "RC cq.c handle_good_req / handle_responder")
        put("wc_opcode", WC_OPCODES.get(wc["opcode"], "unknown"), "libibverbs IBV_WC_* names")
    if "byte_len" in wc:
        put("wc_byte_len", wc["byte_len"], "RC cq.c wc->byte_len")
    if "imm" in wc:
        if opcode == 4:
            sw = int.from_bytes(imm.to_bytes(4, "big"), "little")
            put("wc_imm_data", imm, "RC cq.c handle_responder: invalidated_rkey = be32toh(imm_inval_pkey)",
                {sw: "be32toh() of the __be32 union holding the host-order rkey on a little-endian host "
                     "(RC cq.c mlx5_cq_read_wc_imm_data comment)"})
        else:
            put("wc_imm_data", imm, "RC cq.c imm_data = imm_inval_pkey (as sent; host order = BE32 value)")
    for k in ("slid", "sl", "src_qp", "dlid_path_bits", "pkey_index", "vendor_err"):
        if k in wc:
            put("wc_" + k, wc[k], "RC cq.c handle_responder / error path")
    return e


# Keys the tool prints that are not fields (free text); checked elsewhere.
NON_FIELDS = {"warnings"}
ALLOWED_MISSING = set()


def gen_slot(rng):
    size = 128 if rng.random() < 0.3 else 64
    b = bytearray(rng.getrandbits(8) for _ in range(size))
    c0 = size - 64
    r = rng.random()
    if r < 0.25:
        opcode = rng.choice([13, 14])
    elif r < 0.5:
        opcode = rng.choice([0, 0, 1, 2, 3, 4])
    else:
        opcode = rng.randrange(16)
    fmt = rng.randrange(4)
    b[c0 + 63] = (opcode << 4) | (fmt << 2) | rng.randrange(4)
    if rng.random() < 0.7:
        b[c0 + 56] = rng.choice(sorted(SEND_OPCODES))
    if opcode in (13, 14) and rng.random() < 0.7:
        b[c0 + 55] = rng.choice(sorted(SYNDROMES))
    if rng.random() < 0.5:
        # realistic checksum / header-type combinations
        b[c0 + 28] = rng.choice([0, 7, 6, 3, 2, 4]) | (b[c0 + 28] & 0xf8)
        b[c0 + 29] = (rng.randrange(8) << 4) | (rng.randrange(4) << 2) | (b[c0 + 29] & 0x83)
    if rng.random() < 0.3:
        b[c0 + 24] &= 0x0f  # no GRH
    return bytes(b)


WR_DATA = [("send", 0), ("local_inv", 6), ("bind_mw", 5), ("driver2", 136), ("flush", 8),
           ("7", 7), ("recv", 128), ("tm_no_tag", 134)]


def norm_human(v):
    v = v.strip()
    if v in ("true", "false"):
        return v == "true"
    if v.startswith("0x"):
        parts = v.split()
        hv = int(parts[0], 16)
        if len(parts) > 1:
            dv = int(parts[1].strip("()"))
            if dv != hv:
                return ("BADHEX", v)
        return hv
    try:
        return int(v)
    except ValueError:
        return v


def check_human(j, text):
    """Every JSON key must appear in the human output with the same value."""
    probs = []
    lines = text.splitlines()
    kv = {}
    for ln in lines[1:]:
        parts = ln.split(None, 1)
        if not parts:
            continue
        kv[parts[0]] = parts[1] if len(parts) > 1 else ""
    for k, v in j.items():
        if k == "warnings":
            if not v:
                if kv.get(k, "").strip() != "(none)":
                    probs.append((k, "(none)", kv.get(k)))
            elif not all(w in text for w in v):
                probs.append((k, v, kv.get(k)))
            continue
        if k not in kv:
            probs.append((k, v, "<absent>"))
            continue
        hv = norm_human(kv[k])
        if isinstance(v, str):
            if kv[k].strip() != v:
                probs.append((k, v, kv[k]))
        elif hv != v:
            probs.append((k, v, kv[k]))
    for k in kv:
        if k not in j:
            probs.append((k, "<not in JSON>", kv[k]))
    if not lines or not lines[0].startswith("CQE (%d bytes)" % j["cqe_size"]):
        probs.append(("header", j["cqe_size"], lines[0] if lines else ""))
    return probs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("n", type=int)
    ap.add_argument("seed", type=int)
    ap.add_argument("--tool", required=True)
    ap.add_argument("--human-every", type=int, default=1,
                    help="check the human output on every k-th CQE")
    ap.add_argument("--verbose", action="store_true")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    fields = 0
    bad = Counter()
    interp = Counter()
    unmapped = Counter()
    missing = Counter()
    examples = {}
    human_bad = Counter()
    for i in range(a.n):
        slot = gen_slot(rng)
        wname, wval = rng.choice(WR_DATA)
        cmd = [a.tool, "decode", "cqe", "--json", "--wr-data", wname, slot.hex()]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            bad[("<exit>", r.returncode)] += 1
            examples.setdefault(("<exit>", r.returncode), (slot.hex(), wname, r.stderr[:200]))
            continue
        j = json.loads(r.stdout)
        exp = decode(slot, wval)
        for k, v in j.items():
            if k in NON_FIELDS:
                continue
            if k not in exp:
                unmapped[k] += 1
                examples.setdefault(("unmapped", k), (slot.hex(), wname, v))
                continue
            fields += 1
            x = exp[k]
            if v in x.vals:
                continue
            if v in x.interp:
                interp[(k, x.interp[v])] += 1
                continue
            bad[k] += 1
            examples.setdefault(k, (slot.hex(), wname, v, sorted(x.vals, key=str), x.src))
        fmt3 = (slot[-1] >> 2) & 3 == 3
        for k in exp:
            if k not in j:
                if fmt3 and k.startswith("wc_"):
                    interp[(k, "not printed for a compressed (format 3) entry: the tool's wc model "
                                "is the core's poller, which takes no lone compressed entry")] += 1
                    continue
                missing[k] += 1
                examples.setdefault(("missing", k), (slot.hex(), wname))
        if a.human_every and i % a.human_every == 0:
            h = subprocess.run(cmd[:3] + cmd[4:], capture_output=True, text=True)
            for p in check_human(j, h.stdout):
                human_bad[p[0]] += 1
                examples.setdefault(("human", p[0]), (slot.hex(), wname) + tuple(map(str, p[1:])))
    print("cqes %d  fields compared %d  disagreements %d  interpretation %d  unmapped keys %d  missing %d  human %d"
          % (a.n, fields, sum(bad.values()), sum(interp.values()), len(unmapped),
             sum(missing.values()), sum(human_bad.values())))
    for k, n in sorted(bad.items(), key=str):
        print("DISAGREE %-24s x%d  e.g. %s" % (k, n, examples.get(k)))
    for (k, why), n in sorted(interp.items()):
        print("INTERP   %-24s x%d  tool follows: %s" % (k, n, why))
    for k, n in sorted(unmapped.items()):
        print("UNMAPPED %-24s x%d  e.g. %s" % (k, n, examples.get(("unmapped", k))))
    for k, n in sorted(missing.items()):
        print("MISSING  %-24s x%d  e.g. %s" % (k, n, examples.get(("missing", k))))
    for k, n in sorted(human_bad.items()):
        print("HUMAN    %-24s x%d  e.g. %s" % (k, n, examples.get(("human", k))))
    return 1 if (bad or human_bad or unmapped or missing) else 0


if __name__ == "__main__":
    sys.exit(main())
