#!/usr/bin/env python3
"""Independent check of `mlx5dp decode mini-cqe` and of `mlx5dp decode cqe`
on compressed entries.

An independent decoder of the 8-byte mini-CQE (`struct mlx5_mini_cqe8`) and
of the bytes of a compressed CQE, written from the public sources only (not
from mlx5dp's code):

  DP  DPDK drivers/common/mlx5/mlx5_prm.h @38f72e50: struct mlx5_mini_cqe8
      (rx_hash_result | checksum/flow_tag_high/{hdr_type, reserved} +
      stride_idx | s_wqe_info{wqe_counter, validity_iteration_count,
      s_wqe_opcode}; byte_cnt_flow/byte_cnt), MLX5_CQE_RESP_FORMAT_HASH 0,
      CSUM 1, FTAG_STRIDX 2, CSUM_STRIDX 3, L34H_STRIDX 4,
      MLX5_LEN_WITH_MARK_MASK 0xffffff00, MLX5_CQE_VLAN_STRIPPED 1,
      MLX5_CQE_NUM_MINIS(op_own) = op_own >> 4, MLX5_CQE_FORMAT,
      mlx5_flow_mark_get; drivers/net/mlx5/mlx5_rx.c: mlx5_rx_poll_len
      (byte_cnt & byte_mask; enhanced count = NUM_MINIS + 1; basic count =
      title byte_cnt), rxq_cq_to_mbuf (hash from rx_hash_result; mark =
      (byte_cnt_flow & 0xff) << 8 | flow_tag_high << 16 read as the CQE's
      sop_drop_qpn; VLAN stripped = hdr_type & 1), rxq_cq_to_pkt_type
      (ptype = hdr_type >> 2: bits [1:0] L3 type, [4:2] L4 type, [5] IP
      fragment); mlx5_rxtx_vec_sse.h rxq_cq_decompress_v (same fields,
      flow_mark_shuf takes bytes 4, 0, 1; pkt_hdr = mini byte 0)
  LK  Linux include/linux/mlx5/device.h: struct mlx5_mini_cqe8
      (rx_hash_result | {checksum, stridx} | s_wqe_info{wqe_counter,
      s_wqe_opcode, reserved}; byte_cnt), mlx5_get_cqe_format,
      get_cqe_enhanced_num_mini_cqes (opcode nibble + 1),
      CQE_L4_HDR_TYPE_*, MLX5_OPCODE_* (send opcodes);
      drivers/net/ethernet/mellanox/mlx5/core/en_rx.c mlx5e_decompress_cqe,
      mlx5e_decompress_enhanced_cqe (minis from byte 0 of the compressed
      CQE), mlx5e_read_title_slot (title byte_cnt = number of minis)
  RC  rdma-core @691953d8 providers/mlx5/mlx5dv.h: MLX5_CQE_L3_HDR_TYPE_*,
      MLX5_CQE_* opcodes, MLX5DV_CQE_RES_FORMAT_* (bitmask; no mini-CQE
      struct in rdma-core: libmlx5 does not decompress), cq.c dump_cqe
      (word dumps: "%08x %08x %08x %08x" of be32toh words) and the
      "got completion with error" line
  UX  UCX src/uct/ib/mlx5/ib_mlx5.h uct_ib_mlx5_mini_cqe8_t (wqe_counter,
      s_wqe_opcode at byte 2, reserved2, byte_cnt); ib_mlx5.c
      uct_ib_mlx5_iface_cqe_unzip_init (block_size = nibble + 1, asserted
      <= UCT_IB_MLX5_MINICQE_ARR_MAX_SIZE 7)
  PF  /work/shared/PRM-FACTS.md sections 9.1, 10.2-10.5

Part A (`decode mini-cqe --format F --json`): random mini arrays of every
format with edge values (all-zero, all-ones, big byte counts, every send
opcode of the requester format, every header-type byte of L34H, stride
index edges), in every hex form `--help` names (plain, spaced, several
arguments, stdin, kernel print_hex_dump rows with prefixes and an ASCII
column, rdma-core word dumps, with the log lines around them). Every JSON
key is mapped to a field of this decoder and compared; an unmapped key or
a missing field is a failure. The human output is checked against the JSON.

Part B (`decode cqe --json` on compressed entries, format bits 3): enhanced
compressed CQEs (N = 1..7 minis from byte 0, byte 62 validity count,
op_own = (N-1) << 4 | 0xc), basic-layout titles (a regular CQE with
byte_cnt = number of minis) and impossible nibbles, 64-byte CQEs and
128-byte slots. Checked: the fields that belong to a compressed entry
(format, counts, op_own bits, byte 62), that the entry is flagged as
compressed, that no `wc_*` completion field is printed where the bytes may
be an enhanced mini array (the opcode nibble is then a count and the rest
are mini bytes), that no enhanced count above 7 is claimed, that every
other field equals what the tool prints for the same bytes with format
bits 0 (a regular CQE, whose fields cqe_fields_check.py checks), that
`decode mini-cqe` on the first N*8 bytes decodes the minis, and that every
hex form gives the same JSON.

Usage: mini_fields_check.py N SEED --tool BIN [-v]
Exit status 1 on any disagreement, unmapped key, missing field, failed run
or human/JSON mismatch; 0 otherwise.
"""
import argparse
import json
import random
import re
import subprocess
import sys
from collections import Counter

FORMATS = ["hash", "csum", "ftag-stridx", "csum-stridx", "l34h-stridx", "req"]

# LK device.h MLX5_OPCODE_*, RC mlx5dv.h MLX5_OPCODE_*, DP mlx5_prm.h
# (WAIT 0x0f, SEND_EN 0x17, ENHANCED_MPSW 0x29, MMO 0x2f), PF section 4.
# Each value: the accepted spellings (lower case, prefix dropped).
SEND_OPCODES = {
    0x00: {"nop"},
    0x01: {"send_inval", "send_inv"},
    0x08: {"rdma_write"},
    0x09: {"rdma_write_imm"},
    0x0A: {"send"},
    0x0B: {"send_imm"},
    0x0E: {"tso", "lso"},
    0x0F: {"wait"},
    0x10: {"rdma_read"},
    0x11: {"atomic_cs"},
    0x12: {"atomic_fa"},
    0x14: {"atomic_masked_cs"},
    0x15: {"atomic_masked_fa"},
    0x17: {"send_en"},
    0x18: {"bind_mw"},
    0x19: {"fmr"},
    0x1B: {"local_inval", "local_inv"},
    0x1F: {"config_cmd"},
    0x20: {"set_psv"},
    0x21: {"get_psv"},
    0x22: {"check_psv"},
    0x23: {"dump"},
    0x25: {"umr"},
    0x26: {"rget_psv"},
    0x27: {"rcheck_psv"},
    0x28: {"tag_matching"},
    0x29: {"enhanced_mpsw", "empw"},
    0x2C: {"flow_tbl_access"},
    0x2D: {"access_aso"},
    0x2F: {"mmo"},
}
UNKNOWN = {"unknown", "reserved"}
# RC mlx5dv.h MLX5_CQE_L3_HDR_TYPE_*; LK CQE_L4_HDR_TYPE_*
L3_TYPES = {0: {"none"}, 1: {"ipv6"}, 2: {"ipv4"}}
L4_TYPES = {0: {"none"}, 1: {"tcp_no_ack"}, 2: {"udp"}, 3: {"tcp_ack_no_data"},
            4: {"tcp_ack_and_data"}}


def be16(b, o):
    return int.from_bytes(b[o:o + 2], "big")


def be24(b, o):
    return int.from_bytes(b[o:o + 3], "big")


def be32(b, o):
    return int.from_bytes(b[o:o + 4], "big")


def be64(b, o):
    return int.from_bytes(b[o:o + 8], "big")


class Exp:
    """Accepted values of one field, with the source; interp: values an
    other anchor's reading gives (reported, not failures)."""

    def __init__(self, vals, src, interp=None):
        self.vals = vals if isinstance(vals, set) else {vals}
        self.src = src
        self.interp = interp or {}


def reserved_forms(bs):
    """A reserved byte range may be printed as a number or as hex text."""
    v = int.from_bytes(bs, "big")
    return {v, bs.hex(), bs.hex().upper(), "0x" + bs.hex(), "%#x" % v}


def decode_mini(fmt, m, index):
    """Expected fields of one 8-byte mini-CQE in format `fmt`."""
    assert len(m) == 8
    e = {}

    def put(k, v, src, interp=None):
        e[k] = Exp(v, src, interp)

    put("index", index, "position in the array")
    put("format", fmt, "--format")
    if fmt == "hash":
        put("rx_hash_result", be32(m, 0), "LK/DP rx_hash_result BE32 bytes 0-3")
        put("byte_cnt", be32(m, 4), "LK/DP byte_cnt BE32 bytes 4-7")
    elif fmt == "csum":
        put("checksum", be16(m, 0), "LK/DP checksum BE16 bytes 0-1")
        put("reserved", reserved_forms(m[2:4]), "LK stridx / DP stride_idx unused in CSUM (bytes 2-3)")
        put("byte_cnt", be32(m, 4), "LK/DP byte_cnt BE32 bytes 4-7")
    elif fmt == "ftag-stridx":
        tag = (m[4] << 16) | be16(m, 0)
        put("flow_tag", tag,
            "DP rxq_cq_to_mbuf: mark = (byte_cnt_flow & 0xff) << 8 | flow_tag_high << 16 stands "
            "for sop_drop_qpn, whose bytes 57-59 are the BE 24-bit flow tag: byte 4, bytes 0, 1")
        put("flow_tag_low", be16(m, 0), "flow tag [15:0] = bytes 0-1 (DP flow_tag_high, LE naming)")
        put("flow_tag_high", m[4], "flow tag [23:16] = byte 4 (DP byte_cnt_flow & 0xff)")
        put("stride_idx", be16(m, 2), "DP stride_idx BE16 bytes 2-3")
        put("byte_cnt", be24(m, 5), "DP byte_cnt & MLX5_LEN_WITH_MARK_MASK: bytes 5-7")
    elif fmt == "csum-stridx":
        put("checksum", be16(m, 0), "LK/DP checksum BE16 bytes 0-1")
        put("stride_idx", be16(m, 2), "LK stridx / DP stride_idx BE16 bytes 2-3")
        put("byte_cnt", be32(m, 4), "LK/DP byte_cnt BE32 bytes 4-7")
    elif fmt == "l34h-stridx":
        h = m[0]
        put("hdr_type", h, "DP hdr_type (byte 0)")
        l3 = (h >> 2) & 3
        l4 = (h >> 4) & 7
        put("l3_hdr_type_raw", l3, "DP ptype = hdr_type >> 2, bits [1:0]")
        put("l3_hdr_type", L3_TYPES.get(l3, UNKNOWN), "RC MLX5_CQE_L3_HDR_TYPE_*")
        put("l4_hdr_type_raw", l4, "DP ptype bits [4:2]")
        put("l4_hdr_type", L4_TYPES.get(l4, UNKNOWN), "LK CQE_L4_HDR_TYPE_*")
        put("ip_frag", bool(h & 0x80), "DP ptype bit 5 (= hdr_type bit 7) IP fragment")
        put("cvlan_stripped", bool(h & 1), "DP hdr_type & MLX5_CQE_VLAN_STRIPPED")
        put("reserved", reserved_forms(m[1:2]), "DP reserved (byte 1)")
        put("stride_idx", be16(m, 2), "DP stride_idx BE16 bytes 2-3")
        put("byte_cnt", be32(m, 4), "DP byte_cnt BE32 bytes 4-7")
    elif fmt == "req":
        put("wqe_counter", be16(m, 0), "LK/UX/DP s_wqe_info.wqe_counter BE16 bytes 0-1")
        put("s_wqe_opcode", m[2], "LK s_wqe_info.s_wqe_opcode / UX s_wqe_opcode: byte 2",
            {m[3]: "DP s_wqe_info.s_wqe_opcode at byte 3"} if m[3] != m[2] else None)
        put("s_wqe_opcode_name", SEND_OPCODES.get(m[2], UNKNOWN), "LK/RC/DP MLX5_OPCODE_* of byte 2",
            {nm: "DP: the name of byte 3" for nm in SEND_OPCODES.get(m[3], UNKNOWN)}
            if m[3] != m[2] else None)
        put("reserved", reserved_forms(m[3:4]), "LK reserved / UX reserved2 (byte 3)",
            {m[2]: "DP validity_iteration_count at byte 2"} if m[3] != m[2] else None)
        put("byte_cnt", be32(m, 4), "LK/UX/DP byte_cnt BE32 bytes 4-7")
    else:
        raise ValueError(fmt)
    return e


# --------------------------------------------------------------------------
# hex renderings of the input (`--help`: plain hex, print_hex_dump rows with
# any prefix and an optional ASCII column, rdma-core word dumps, as logged)

DMESG_PREFIXES = ["", "[  123.456789] ", "[1234567.000001] ", "kernel: ",
                  "Nov 30 16:00:00 host kernel: ", "mlx5_core 0000:08:00.0: ",
                  "[   12.345678] mlx5_core 0000:3b:00.1 enp59s0f1: ",
                  "[Mon Nov 30 16:00:00 2026] ", "<4>[    1.000000] "]


def ascii_col(row):
    return "".join(chr(x) if 0x20 <= x < 0x7F else "." for x in row)


def render(data, form, rng):
    """Returns (argv list, stdin text or None, description)."""
    if form == "plain":
        return [data.hex()], None, form
    if form == "upper":
        return [data.hex().upper()], None, form
    if form == "spaced":
        return [" ".join("%02x" % x for x in data)], None, form
    if form == "args":
        cuts = sorted(rng.sample(range(1, len(data)), min(len(data) - 1, rng.randint(1, 4))))
        parts, last = [], 0
        for c in cuts + [len(data)]:
            parts.append(data[last:c].hex())
            last = c
        return parts, None, form
    if form == "stdin":
        return (["-"] if rng.random() < 0.5 else []), data.hex() + "\n", form
    if form == "kernel":
        pre = rng.choice(DMESG_PREFIXES)
        asc = rng.random() < 0.5
        lines = []
        head = rng.random() < 0.5
        if head:
            lines.append(pre + "mlx5_0:mlx5_handle_error_cqe:278:(pid 4242): dump error cqe")
        for off in range(0, len(data), 16):
            row = data[off:off + 16]
            hx = " ".join("%02x" % x for x in row)
            ln = "%s%08x: %s" % (pre, off, hx)
            if asc:
                # hex_dump_to_buffer: ASCII column at rowsize*2 + rowsize/groupsize + 1
                ln = "%s%08x: %s%s" % (pre, off, hx.ljust(16 * 3 + 1), ascii_col(row))
            lines.append(ln)
        if head and rng.random() < 0.5:
            lines.append(pre + "infiniband mlx5_0: WC error: 4, Message: local protection error")
        txt = "\n".join(lines) + "\n"
        desc = "kernel(prefix=%r,ascii=%s,head=%s)" % (pre, asc, head)
        if rng.random() < 0.5:
            return ["-"], txt, desc
        return [txt], None, desc + ",arg"
    if form == "rdma":
        words = [data[i:i + 4].hex() for i in range(0, len(data), 4)]
        lines = [" ".join(words[i:i + 4]) for i in range(0, len(words), 4)]
        # libmlx5 logs only whole 64-byte CQEs (cq.c dump_cqe): log line
        # around it only then
        head = len(data) % 16 == 0 and rng.random() < 0.5
        if head:
            lines.insert(0, "mlx5: myhost: got completion with error:")
        return ["-"], "\n".join(lines) + "\n", "rdma(head=%s)" % head
    raise ValueError(form)


FORMS = ["plain", "upper", "spaced", "args", "stdin", "kernel", "rdma"]


def run(tool, sub, argv, stdin):
    cmd = [tool, "decode"] + sub + argv
    return subprocess.run(cmd, input=stdin, capture_output=True, text=True)


# --------------------------------------------------------------------------
# generators

EDGE_BC = [0, 1, 0xFFFFFFFF, 0x80000000, 0x7FFFFFFF, 0x00FFFFFF, 0x01000000,
           0x0000FFFF, 0x00010000, 0x3FFF0000, 0xC0000000]
EDGE_16 = [0, 1, 0xFFFF, 0x8000, 0x7FFF, 0x00FF, 0xFF00, 511, 512]


def gen_mini(rng, fmt, sweep):
    """One mini; `sweep` (an int or None) forces the opcode / header byte."""
    r = rng.random()
    if r < 0.08:
        m = bytearray(8)
    elif r < 0.16:
        m = bytearray(b"\xff" * 8)
    elif r < 0.22:
        # printable hex-digit characters: stresses the ASCII column parsing
        m = bytearray(rng.choice(b"0123456789abcdefABCDEF:. ") for _ in range(8))
    else:
        m = bytearray(rng.getrandbits(8) for _ in range(8))
    if rng.random() < 0.3:
        m[4:8] = rng.choice(EDGE_BC).to_bytes(4, "big")
    if fmt.endswith("stridx") and rng.random() < 0.3:
        m[2:4] = rng.choice(EDGE_16).to_bytes(2, "big")
    if fmt == "req":
        if rng.random() < 0.3:
            m[0:2] = rng.choice(EDGE_16).to_bytes(2, "big")
        if sweep is not None:
            m[2] = sweep
        elif rng.random() < 0.6:
            m[2] = rng.choice(sorted(SEND_OPCODES))
        if rng.random() < 0.5:
            m[3] = 0
    if fmt == "l34h-stridx" and sweep is not None:
        m[0] = sweep
    return bytes(m)


def gen_mini_case(rng, i):
    fmt = FORMATS[i % len(FORMATS)]
    n = rng.choice([1, 1, 2, 3, 4, 7, 8, 8, 16, 64])
    sweep_base = (i // len(FORMATS)) * 8
    minis = []
    for k in range(n):
        sw = None
        if fmt in ("req", "l34h-stridx") and k < 8:
            sw = (sweep_base + k) & 0xFF
        minis.append(gen_mini(rng, fmt, sw))
    return fmt, b"".join(minis)


def gen_compressed(rng):
    """A compressed entry: (slot bytes, kind, nibble)."""
    size = 128 if rng.random() < 0.3 else 64
    first = bytes(rng.getrandbits(8) for _ in range(size - 64))
    r = rng.random()
    if r < 0.5:
        kind = "enhanced"
        n = rng.randint(1, 7)
        fmt = rng.choice(FORMATS)
        c = bytearray(b"".join(gen_mini(rng, fmt, None) for _ in range(7)))
        # bytes 56-61: the unused part of an 8th entry (PF 10.5)
        c += bytes(rng.getrandbits(8) for _ in range(6)) if rng.random() < 0.7 else bytes(6)
        c.append(rng.getrandbits(8))  # 62: validity_iteration_count
        c.append(((n - 1) << 4) | 0x0C | rng.randrange(4) * (rng.random() < 0.3))
        nib = n - 1
    elif r < 0.85:
        kind = "title"
        c = bytearray(rng.getrandbits(8) for _ in range(64))
        c[44:48] = rng.choice([2, 3, 8, 9, 64, 65, 1, 0, 0xFFFF, rng.getrandbits(32)]).to_bytes(4, "big")
        op = rng.choice([0, 1, 2, 3, 4, 0, 2, 2])
        c[63] = (op << 4) | 0x0C | rng.randrange(4)
        nib = op
    else:
        kind = "nibble>=7"
        c = bytearray(rng.getrandbits(8) for _ in range(64))
        nib = rng.randint(7, 15)
        c[63] = (nib << 4) | 0x0C | rng.randrange(4)
    return first + bytes(c), kind, nib


# --------------------------------------------------------------------------

def norm_human(v):
    v = v.strip()
    if v in ("true", "false"):
        return v == "true"
    m = re.fullmatch(r"0x([0-9a-fA-F]+)(?: \((\d+)\))?", v)
    if m:
        hv = int(m.group(1), 16)
        if m.group(2) is not None and int(m.group(2)) != hv:
            return ("BADHEX", v)
        return hv
    try:
        return int(v)
    except ValueError:
        return v


def check_human_minis(arr, text):
    """Every JSON key/value of every mini must appear in the human output."""
    probs = []
    blocks, cur = [], None
    lines = text.splitlines()
    if not lines or not re.match(r"%d mini-CQE" % len(arr), lines[0]):
        probs.append(("header", len(arr), lines[0] if lines else ""))
    for ln in lines[1:]:
        parts = ln.split(None, 1)
        if not parts:
            continue
        if parts[0] == "index":
            cur = {}
            blocks.append(cur)
        if cur is not None:
            cur[parts[0]] = parts[1] if len(parts) > 1 else ""
    if len(blocks) != len(arr):
        probs.append(("blocks", len(arr), len(blocks)))
        return probs
    for j, kv in zip(arr, blocks):
        for k, v in j.items():
            if k not in kv:
                probs.append((k, v, "<absent>"))
                continue
            if isinstance(v, str):
                if kv[k].strip() != v and norm_human(kv[k]) != norm_human(v):
                    probs.append((k, v, kv[k]))
            elif norm_human(kv[k]) != v:
                probs.append((k, v, kv[k]))
        for k in kv:
            if k not in j:
                probs.append((k, "<not in JSON>", kv[k]))
    return probs


def check_human_cqe(j, text):
    """Every JSON key/value must appear in the human output of `decode cqe`."""
    probs = []
    lines = text.splitlines()
    if not lines or not lines[0].startswith("CQE (%d bytes)" % j.get("cqe_size", 0)):
        probs.append(("header", j.get("cqe_size"), lines[0] if lines else ""))
    kv, warns = {}, []
    for ln in lines[1:]:
        parts = ln.split(None, 1)
        if not parts:
            continue
        if parts[0] == "warnings":
            warns.append(parts[1].strip() if len(parts) > 1 else "")
            continue
        kv[parts[0]] = parts[1] if len(parts) > 1 else ""
    for k, v in j.items():
        if k == "warnings":
            if [w for w in v] != [w for w in warns if w != "(none)"]:
                probs.append((k, v, warns))
            continue
        if k not in kv:
            probs.append((k, v, "<absent>"))
        elif isinstance(v, str):
            if kv[k].strip() != v:
                probs.append((k, v, kv[k]))
        elif norm_human(kv[k]) != v:
            probs.append((k, v, kv[k]))
    for k in kv:
        if k not in j:
            probs.append((k, "<not in JSON>", kv[k]))
    return probs


class Tally:
    def __init__(self, verbose):
        self.fields = 0
        self.bad = Counter()
        self.interp = Counter()
        self.ex = {}
        self.verbose = verbose

    def fail(self, key, example):
        self.bad[key] += 1
        if key not in self.ex:
            self.ex[key] = example
            if self.verbose:
                print("FAIL", key, example, file=sys.stderr)

    def note(self, key, example=None):
        self.interp[key] += 1
        self.ex.setdefault(("interp",) + tuple(key), example)


def compare_minis(t, fmt, data, arr, where):
    if not isinstance(arr, list):
        t.fail((where, "not a JSON array"), (fmt, data.hex()))
        return
    n = len(data) // 8
    if len(arr) != n:
        t.fail((where, "count"), (fmt, data.hex(), len(arr), n))
        return
    for i in range(n):
        exp = decode_mini(fmt, data[8 * i:8 * i + 8], i)
        got = arr[i]
        for k, v in got.items():
            if k not in exp:
                t.fail((where, fmt, "unmapped:" + k), (data.hex(), i, v))
                continue
            t.fields += 1
            x = exp[k]
            if v in x.vals:
                continue
            if v in x.interp:
                t.note((fmt, k, x.interp[v]), data[8 * i:8 * i + 8].hex())
                continue
            t.fail((where, fmt, k), (data[8 * i:8 * i + 8].hex(), v, sorted(map(str, x.vals))[:4], x.src))
        for k in exp:
            if k not in got:
                t.fail((where, fmt, "missing:" + k), (data[8 * i:8 * i + 8].hex(), i))


def part_a(a, rng, t):
    n_cases = 0
    n_minis = 0
    forms = Counter()
    for i in range(a.n):
        fmt, data = gen_mini_case(rng, i)
        n_cases += 1
        n_minis += len(data) // 8
        sub = ["mini-cqe", "--format", fmt, "--json"]
        r = run(a.tool, sub, [data.hex()], None)
        if r.returncode != 0:
            t.fail(("mini", "exit %d" % r.returncode), (fmt, data.hex(), r.stderr.strip()[:200]))
            continue
        try:
            arr = json.loads(r.stdout)
        except ValueError:
            t.fail(("mini", "bad json"), (fmt, data.hex(), r.stdout[:200]))
            continue
        compare_minis(t, fmt, data, arr, "mini")
        # the same bytes in another hex form give the same JSON
        form = FORMS[1 + i % (len(FORMS) - 1)]
        argv, stdin, desc = render(data, form, rng)
        forms[desc.split("(")[0]] += 1
        r2 = run(a.tool, sub, argv, stdin)
        if r2.returncode != 0:
            t.fail(("mini-form", form, "exit %d" % r2.returncode),
                   (fmt, desc, (stdin or " ".join(argv))[:300], r2.stderr.strip()[:200]))
        elif r2.stdout != r.stdout:
            t.fail(("mini-form", form, "differs"), (fmt, desc, (stdin or " ".join(argv))[:300]))
        if a.human_every and i % a.human_every == 0:
            h = run(a.tool, sub[:-1], [data.hex()], None)
            for p in check_human_minis(arr, h.stdout):
                t.fail(("mini-human", fmt, p[0]), (data.hex(),) + tuple(map(str, p[1:])))
    return n_cases, n_minis, forms


def part_b(a, rng, t):
    kinds = Counter()
    for i in range(a.n_cqe):
        slot, kind, nib = gen_compressed(rng)
        kinds[kind] += 1
        c = slot[-64:]
        sub = ["cqe", "--json"]
        r = run(a.tool, sub, [slot.hex()], None)
        if r.returncode != 0:
            t.fail(("cqe", kind, "exit %d" % r.returncode), (slot.hex(), r.stderr.strip()[:200]))
            continue
        j = json.loads(r.stdout)
        exp = {
            "cqe_size": ({len(slot)}, "input length (RC cq.c get_sw_cqe: cqe64 = cqe + cqe_sz - 64)"),
            "format": ({"compressed"}, "LK MLX5_COMPRESSED = 3"),
            "format_raw": ({3}, "LK mlx5_get_cqe_format: (op_own >> 2) & 3"),
            "opcode_raw": ({c[63] >> 4}, "op_own >> 4 (LK get_cqe_opcode; DP MLX5_CQE_NUM_MINIS)"),
            "owner": ({c[63] & 1}, "op_own bit 0"),
            "se": ({(c[63] >> 1) & 1}, "op_own bit 1"),
            "signature": ({c[62]}, "byte 62 (LK signature / validity_iteration_count)"),
            "title_mini_cqe_count": ({be32(c, 44)}, "LK mlx5e_read_title_slot / DP: title byte_cnt"),
            "byte_cnt": ({be32(c, 44)}, "byte_cnt 44-47"),
            "wqe_counter": ({be16(c, 60)}, "wqe_counter 60-61"),
            "timestamp": ({be64(c, 48)}, "timestamp 48-55"),
        }
        for k, (vals, src) in exp.items():
            if k not in j:
                t.fail(("cqe", kind, "missing:" + k), slot.hex())
                continue
            t.fields += 1
            if j[k] not in vals:
                t.fail(("cqe", kind, k), (slot.hex(), j[k], sorted(vals), src))
        # enhanced count: LK get_cqe_enhanced_num_mini_cqes = nibble + 1,
        # at most 7 (UX assert; 7 minis fill bytes 0-55, 62/63 are taken)
        if nib <= 6:
            t.fields += 1
            if j.get("enhanced_mini_cqe_count") != nib + 1:
                t.fail(("cqe", kind, "enhanced_mini_cqe_count"),
                       (slot.hex(), j.get("enhanced_mini_cqe_count"), nib + 1))
        else:
            if "enhanced_mini_cqe_count" in j:
                t.fail(("cqe", kind, "enhanced_mini_cqe_count > 7 claimed"),
                       (c[63], j["enhanced_mini_cqe_count"]))
        warns = j.get("warnings", [])
        if not any("compress" in w.lower() for w in warns):
            t.fail(("cqe", kind, "not flagged as compressed"), (slot.hex(), warns))
        for w in warns:
            for mm in re.finditer(r"=\s*(\d+) mini", w):
                before = w[max(0, mm.start() - 60):mm.start()]
                if "enhanced" in before and "not an enhanced" not in before and int(mm.group(1)) > 7:
                    t.fail(("cqe", kind, "warning claims an enhanced array of > 7 minis"), w)
        # wc_*: where the bytes may be an enhanced mini array (nibble <= 6)
        # the opcode nibble is a count and bytes 0-61 are minis: no
        # completion can be read from them (libmlx5 does not decompress:
        # RC cq.c has no mini-CQE code; LK/DP/UX expand the minis with a
        # title CQE first).
        wc = sorted(k for k in j if k.startswith("wc_"))
        if wc:
            if nib <= 6:
                t.fail(("cqe", kind, "wc_* printed for a possible mini array (nibble <= 6)",
                        ",".join(wc)), slot.hex())
            else:
                t.note(("cqe", "wc_* printed where the nibble (%d) cannot be an enhanced count" % nib,
                        ",".join(wc)))
        # every other field: what the tool prints for the same bytes read as a
        # regular CQE (format bits 0); regular CQEs: cqe_fields_check.py
        reg = bytearray(slot)
        reg[-1] &= 0xF3
        r0 = run(a.tool, sub, [bytes(reg).hex()], None)
        j0 = json.loads(r0.stdout) if r0.returncode == 0 else {}
        skip = set(exp) | {"enhanced_mini_cqe_count", "warnings", "inline_data"}
        for k, v in j.items():
            if k in skip or k.startswith("wc_"):
                continue
            t.fields += 1
            if k not in j0:
                t.fail(("cqe", kind, "unmapped:" + k), (slot.hex(), v))
            elif j0[k] != v:
                t.fail(("cqe", kind, "differs from the regular reading:" + k), (slot.hex(), v, j0[k]))
        for k in j0:
            if k not in j and k not in skip and not k.startswith("wc_"):
                t.fail(("cqe", kind, "missing:" + k), slot.hex())
        # what a user does next: the minis of an enhanced CQE
        if kind == "enhanced":
            fmt = rng.choice(FORMATS)
            data = c[:8 * (nib + 1)]
            rm = run(a.tool, ["mini-cqe", "--format", fmt, "--json"], [data.hex()], None)
            if rm.returncode != 0:
                t.fail(("cqe-minis", "exit %d" % rm.returncode), data.hex())
            else:
                compare_minis(t, fmt, data, json.loads(rm.stdout), "cqe-minis")
        if a.human_every and i % a.human_every == 0:
            h = run(a.tool, ["cqe"], [slot.hex()], None)
            for p in check_human_cqe(j, h.stdout):
                t.fail(("cqe-human", kind, p[0]), (slot.hex(),) + tuple(map(str, p[1:])))
        # hex forms
        form = FORMS[1 + i % (len(FORMS) - 1)]
        argv, stdin, desc = render(slot, form, rng)
        r2 = run(a.tool, sub, argv, stdin)
        if r2.returncode != 0:
            t.fail(("cqe-form", form, "exit %d" % r2.returncode),
                   (desc, (stdin or " ".join(argv))[:300], r2.stderr.strip()[:200]))
        elif r2.stdout != r.stdout:
            t.fail(("cqe-form", form, "differs"), (desc, (stdin or " ".join(argv))[:300]))
    return kinds


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("n", type=int, help="mini-CQE cases (and compressed CQEs, unless --cqe)")
    ap.add_argument("seed", type=int)
    ap.add_argument("--tool", required=True, help="the mlx5dp binary")
    ap.add_argument("--cqe", type=int, default=None, dest="n_cqe",
                    help="number of compressed CQEs (default: N)")
    ap.add_argument("--human-every", type=int, default=4,
                    help="check the human output of every k-th case (0: never)")
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args()
    if a.n_cqe is None:
        a.n_cqe = a.n
    rng = random.Random(a.seed)
    t = Tally(a.verbose)
    n_cases, n_minis, forms = part_a(a, rng, t)
    kinds = part_b(a, rng, t)
    print("mini cases %d (%d minis)  compressed CQEs %d %s  fields compared %d  "
          "disagreements %d  other-anchor readings %d"
          % (n_cases, n_minis, a.n_cqe, dict(kinds), t.fields, sum(t.bad.values()),
             sum(t.interp.values())))
    print("hex forms: %s" % dict(forms))
    for k, n in sorted(t.bad.items(), key=str):
        print("DISAGREE %s x%d  e.g. %s" % (" / ".join(map(str, k)), n, t.ex.get(k)))
    for k, n in sorted(t.interp.items(), key=str):
        print("READING  %s x%d" % (" / ".join(map(str, k)), n))
    return 1 if t.bad else 0


if __name__ == "__main__":
    sys.exit(main())
