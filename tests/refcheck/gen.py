#!/usr/bin/env python3
"""Random CQ-ring generator + differential harness: ref.py vs mlx5dp decode cq --json.

usage: python3 gen.py N [seed] --tool PATH/TO/mlx5dp [--only CFGSUBSTR] [--save DIR]
       [--no-owner] [--kernel-title]

N random rings per configuration (CQE size x layout x mini format x striding);
exits 1 if any ring decodes differently (the rings are saved under --save, a
fresh temporary directory by default).
"""
import random, struct, subprocess, json, sys, os, tempfile
import ref
ref.ERR_TITLE_SKIP = '--kernel-title' not in sys.argv

TOOL = sys.argv[sys.argv.index("--tool") + 1] if "--tool" in sys.argv else os.environ.get("MLX5DP")
CMP_KEYS = ["slot", "compressed", "owner", "se", "format_raw", "opcode_raw", "wqe_counter", "byte_cnt", "qpn", "sop_drop_qpn",
            "timestamp", "vlan_info", "srqn_uidx", "imm_inval_pkey", "wqe_id", "hds_ip_ext",
            "l4_l3_hdr_type", "l3_hdr_type_raw", "l4_hdr_type_raw", "ip_frag", "cvlan_stripped",
            "rx_hash", "checksum", "flow_tag", "syndrome", "vendor_syndrome", "hw_syndrome",
            "stride_idx", "strides", "mprq_byte_cnt"]


def run_tool(ring, size, cnt, ci, layout, fmt, striding):
    args = [TOOL, "decode", "cq", "--cqe-size", str(size), "--cqe-cnt", str(cnt), "--ci", str(ci),
            "--layout", layout, "--mini-format", fmt, "--json", "-"]
    if striding:
        args.insert(-2, "--striding-rq")
    p = subprocess.run(args, input=ring.hex(), capture_output=True, text=True)
    lines = [json.loads(l) for l in p.stdout.splitlines() if l.strip()]
    comps = [l for l in lines if "ci" not in l or len(l) > 1]
    fin = [l["ci"] for l in lines if list(l.keys()) == ["ci"]]
    return comps, (fin[0] if fin else None), (p.stderr.strip() if p.returncode else None), args


def rnd_bytes(r, n):
    return bytes(r.getrandbits(8) for _ in range(n))


class RingBuilder:
    def __init__(self, r, size, cnt, layout):
        self.r, self.size, self.cnt, self.layout = r, size, cnt, layout
        self.log = cnt.bit_length() - 1
        self.ring = bytearray(size * cnt)

    def put(self, ci, c64, first_half=None):
        idx = ci & (self.cnt - 1)
        base = idx * self.size
        if self.size == 128:
            self.ring[base:base + 64] = first_half if first_half is not None else rnd_bytes(self.r, 64)
        self.ring[base + self.size - 64: base + self.size] = c64

    def stamp(self, c, ci, op, form):
        """Set op_own / validity for a CQE that HW wrote at counter ci."""
        c = bytearray(c)
        if self.layout == "basic":
            c[63] = (op << 4) | (form << 2) | (c[63] & 2) | ((ci >> self.log) & 1)
        else:
            c[63] = (op << 4) | (form << 2) | (c[63] & 2) | (c[63] & 1)
            c[62] = (ci >> self.log) & 0xFF
        return bytes(c)


def gen_regular(r, opcode, striding):
    c = bytearray(rnd_bytes(r, 64))
    c[29] = r.choice([0x00, 0x08, 0x04, 0x28, 0x18, 0x2c, 0x1c, 0x88, 0x29, 0x39, r.getrandbits(8)])
    c[28] = r.choice([7, 3, 0, r.getrandbits(8)])
    if striding:
        strides = r.randint(1, 16) if r.random() < 0.9 else r.randint(0, 0x3fff)
        bc = (strides << 16) | r.randint(1, 0xffff)
        if r.random() < 0.03:
            bc |= 1 << 30
        if r.random() < 0.05:
            bc |= 1 << 31  # filler
        c[44:48] = struct.pack(">I", bc)
    else:
        c[44:48] = struct.pack(">I", r.randint(0, 9000) if r.random() < 0.9 else r.getrandbits(32))
    if opcode in (13, 14):
        c[55] = r.choice([1, 2, 4, 5, 6, 0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x22])
    return bytes(c)


def gen_mini(r, fmt, striding, stride_hint):
    m = bytearray(rnd_bytes(r, 8))
    if fmt == "req":
        m[2] = r.choice([0x08, 0x0a, 0x0e, 0x10, 0x11, 0x18, 0x01, r.getrandbits(8)])
        return bytes(m)
    if striding or fmt in ref.STRIDX_FORMATS:
        strides = r.randint(1, 8)
        filler = r.random() < 0.05
        if fmt == "ftag-stridx":
            m[5:8] = struct.pack(">I", (strides << 16) | r.randint(60, 0xffff))[1:]
        else:
            m[4:8] = struct.pack(">I", (strides << 16) | r.randint(60, 0xffff) | (filler << 31))
        if fmt in ref.STRIDX_FORMATS:
            m[2:4] = struct.pack(">H", stride_hint & 0xffff)
    else:
        if fmt == "ftag-stridx":
            m[5:8] = struct.pack(">I", r.randint(60, 9000))[1:]
        else:
            m[4:8] = struct.pack(">I", r.randint(60, 9000) if r.random() < 0.95 else r.getrandbits(32))
    if fmt == "l34h-stridx":
        m[0] = r.choice([0x00, 0x08, 0x04, 0x28, 0x18, 0x2c, 0x1c, 0x88, 0x29, r.getrandbits(8)])
    return bytes(m)


def build(r, cfg):
    size, cnt, layout, fmt, striding = cfg
    striding = striding or fmt in ref.STRIDX_FORMATS
    b = RingBuilder(r, size, cnt, layout)
    log = b.log
    # starting pass and offset: bias toward ring end / later passes
    p = r.choice([0, 0, 1, 2, 3, r.randint(0, 600), 255, 256, r.randint(0, 1 << (24 - log) - 1)])
    off = r.choice([0, cnt - 1, cnt - 2, cnt - 3, r.randrange(cnt)])
    ci0 = (p << log) + off
    ci0 &= 0xFFFFFF
    # fill every slot with stale content from the previous pass (or init pattern)
    for k in range(cnt):
        sci = ci0 - cnt + k  # the previous pass's counter for this slot
        if sci < 0 or r.random() < 0.2:
            c = bytearray(rnd_bytes(r, 64))
            c[63] = 0xF1
            c[62] = 0xFF
            if layout == "basic" and r.random() < 0.3:
                c[63] = 0xF0  # DPDK invalidation pattern
            if sci >= 0 and r.random() < 0.1:  # kernel style: opcode 0 owner = that pass's owner
                c[63] = (sci >> log) & 1
                c[62] = (sci >> log) & 0xff
            b.put(ci0 + k, bytes(c))
        else:
            c = gen_regular(r, 2, striding)
            b.put(ci0 + k, b.stamp(c, sci, 2, 0))
    # write a plan of HW entries from ci0
    req = fmt == "req"
    fill = r.choice([cnt, cnt, r.randint(0, cnt)])
    ci = ci0
    end = ci0 + fill
    have_title = False
    sessions = []  # basic layout: (title index, minis)
    stride = r.randint(0, 200)
    while ci < end:
        room = end - ci
        want_sess = r.random() < 0.5 and (layout == "enhanced" and have_title or layout == "basic")
        if want_sess and room >= 1:
            if layout == "basic":
                if room < 2:
                    want_sess = False
                else:
                    n = r.randint(2, min(room, 70))
                    opc = 0 if req else (r.choice([2, 2, 2, 0]) if r.random() < 0.1 else 2)
                    t = gen_regular(r, opc, striding)
                    t = bytearray(t)
                    t[44:48] = struct.pack(">I", n)
                    t[60:62] = struct.pack(">H", r.getrandbits(16) if r.random() < 0.5 else 0xfffe)
                    b.put(ci, b.stamp(t, ci, opc, 3))
                    sessions.append((ci, n))
                    # holes: junk
                    for k in range(1, n):
                        hc = bytearray(rnd_bytes(r, 64))
                        b.put(ci + k, bytes(hc))
                    narr = (n + 7) // 8
                    minis = []
                    for i in range(n):
                        minis.append(gen_mini(r, fmt if not (opc == 0) else "req", striding, stride + i))
                    for a in range(narr):
                        slot = ci + 1 if a == 0 else ci + 8 * a
                        arr = bytearray(rnd_bytes(r, 64))
                        for j in range(8):
                            i = a * 8 + j
                            if i < n:
                                arr[j * 8:j * 8 + 8] = minis[i]
                        b.put(slot, bytes(arr))
                    ci += n
                    continue
            else:
                n = r.randint(1, min(room, 7))
                c = bytearray(rnd_bytes(r, 64))
                for i in range(n):
                    c[8 * i:8 * i + 8] = gen_mini(r, fmt, striding, stride + i)
                b.put(ci, b.stamp(c, ci, n - 1, 3))
                for k in range(1, n):
                    hc = bytearray(rnd_bytes(r, 64))
                    hc[62] = r.choice([(ci + k >> log) & 0xff, r.getrandbits(8)])
                    b.put(ci + k, bytes(hc))
                ci += n
                continue
        # regular CQE
        if req:
            opc = r.choice([0, 0, 0, 0, 13])
        else:
            opc = r.choice([2, 2, 2, 2, 2, 1, 3, 4, 14, 0 if r.random() < 0.2 else 2,
                            r.choice([5, 6, 12, 7, 8] if layout == "basic" else [6, 12, 7, 8]) if r.random() < 0.2 else 2])
        c = gen_regular(r, opc, striding and not req)
        form = 0 if r.random() < 0.9 else r.choice([1, 2])
        b.put(ci, b.stamp(c, ci, opc, form))
        have_title = True
        ci += 1
    return b.ring, ci0, sessions


CFGS = []
for size in (64, 128):
    for layout in ("basic", "enhanced"):
        for fmt in ref.MINI_FORMATS:
            for striding in ((False, True) if fmt in ("hash", "csum") else (False,)):
                CFGS.append((size, layout, fmt, striding))


OWNER_OFF = "--no-owner" in sys.argv


def compare(ring, size, cnt, ci0, layout, fmt, striding):
    rout, rci, rerr = ref.poll(ring, size, cnt, ci0, layout, fmt, striding)
    tout, tci, terr, args = run_tool(ring, size, cnt, ci0, layout, fmt, striding)
    diffs = []
    if bool(rerr) != bool(terr):
        diffs.append(("error", rerr, terr))
    if not rerr and not terr and rci != tci:
        diffs.append(("ci", rci, tci))
    n = min(len(rout), len(tout))
    if not rerr and not terr and len(rout) != len(tout):
        diffs.append(("count", len(rout), len(tout)))
    for i in range(n):
        a, t = rout[i], tout[i]
        for k in CMP_KEYS:
            if k in a and k in t and a[k] != t[k]:
                diffs.append((i, k, a[k], t[k]))
            elif k in a and k not in t and k in ("stride_idx", "strides", "syndrome", "vendor_syndrome"):
                diffs.append((i, k, a[k], "<missing>"))
        if diffs:
            break
    if OWNER_OFF:
        diffs = [d for d in diffs if d[1] not in ("owner", "se")]
    return diffs, args, (rout, rci, rerr), (tout, tci, terr)


def compare_mid(r, ring, size, cnt, title, mid, layout, fmt, striding):
    """--ci inside a basic session: the tool from `mid` against the reference
    polled from the session's title (known to the generator, not searched
    for), its first mid - title completions (that session's minis) dropped.

    A hole at or before `mid` in the array being consumed (not one of the
    session's array slots) is given what a real ring holds there, not the
    generator's junk: the previous pass's
    entry (the other owner bit) or a slot a consumer invalidated (DPDK's
    0xF0, the init pattern 0xF1). A valid-looking entry of this pass at a
    hole is polled as itself (mlx5dp's decode cq rule: a full ring's slots
    before --ci hold the next pass's arrays, which can read as a title).

    The arrays the consumer finished before `mid`, with the holes after
    each, are written as a consumer writes them: DPDK's and mlx5dp's 0xF0,
    or the kernel's owner bit of their pass with opcode 0
    (mlx5e_cqes_update_owner), so none of them reads as a title."""
    off = mid - title
    ring = bytearray(ring)

    def op_own_at(i):
        return (i % cnt) * size + size - 1

    kernel = r.random() < 0.3
    k = 0
    while 8 * k + 8 <= off:
        first = 1 if k == 0 else 8 * k
        for i in range(title + first, title + 8 * k + 8):
            ring[op_own_at(i)] = ((i // cnt) & 1) if kernel else 0xF0
        k += 1
    # The holes of the current array before `mid`, and `mid` itself if it is
    # a hole: what a real ring holds there.
    for i in range(title + max(2, 8 * k + 1), mid + 1):
        o = i - title
        if o != 1 and o % 8 != 0:
            at = op_own_at(i)
            owner = (i // cnt) & 1
            ring[at] = r.choice([0xF0, 0xF1, (ring[at] & 0xFE) | (owner ^ 1)])
    ring = bytes(ring)
    rout, rci, rerr = ref.poll(ring, size, cnt, title, layout, fmt, striding)
    rout = rout[mid - title:]
    tout, tci, terr, args = run_tool(ring, size, cnt, mid, layout, fmt, striding)
    diffs = []
    if bool(rerr) != bool(terr):
        diffs.append(("error", rerr, terr))
    if not rerr and not terr and rci != tci:
        diffs.append(("ci", rci, tci))
    if not rerr and not terr and len(rout) != len(tout):
        diffs.append(("count", len(rout), len(tout)))
    for i in range(min(len(rout), len(tout))):
        for k in CMP_KEYS:
            if k in rout[i] and k in tout[i] and rout[i][k] != tout[i][k]:
                diffs.append((i, k, rout[i][k], tout[i][k]))
        if diffs:
            break
    if OWNER_OFF:
        diffs = [d for d in diffs if d[1] not in ("owner", "se")]
    return diffs, args


def main():
    N = int(sys.argv[1])
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else None
    if not TOOL:
        sys.exit("gen.py: give the mlx5dp binary with --tool PATH (or MLX5DP=PATH)")
    savedir = (sys.argv[sys.argv.index("--save") + 1] if "--save" in sys.argv
               else tempfile.mkdtemp(prefix="refcheck-"))
    os.makedirs(savedir, exist_ok=True)
    r = random.Random(seed)
    stats = {}
    kinds = {}
    mids = 0
    for cfg in CFGS:
        size, layout, fmt, striding = cfg
        name = "%d-%s-%s%s" % (size, layout, fmt, "-strq" if striding else "")
        if only and only not in name:
            continue
        nd = 0
        for it in range(N):
            cnt = r.choice([8, 16, 32, 64, 128])
            ring, ci0, sessions = build(r, (size, cnt, layout, fmt, striding))
            diffs, args, R, T = compare(ring, size, cnt, ci0, layout, fmt, striding)
            # A basic session entered in the middle (no striding: a filler
            # mini has no line, so dropping lines would not count minis).
            long = [(t, n) for t, n in sessions if n >= 3]
            if not diffs and long and not striding and fmt not in ref.STRIDX_FORMATS:
                t, n = r.choice(long)
                mid = t + r.randint(1, n - 1)
                diffs, args = compare_mid(r, ring, size, cnt, t, mid, layout, fmt, striding)
                mids += 1
                if diffs:
                    diffs = [("mid-session",) + tuple(d) if isinstance(d, tuple) else d for d in diffs]
            if diffs:
                nd += 1
                key = (name, str(diffs[0][:2]) if diffs[0][0] != "error" else "error")
                kinds.setdefault(key, 0)
                kinds[key] += 1
                if kinds[key] <= 2:
                    fn = "%s/%s-%d.hex" % (savedir, name, it)
                    open(fn, "w").write(ring.hex())
                    print("DIFF", name, "cnt", cnt, "ci", ci0, diffs[:4], fn)
        stats[name] = (N, nd)
        print("CFG", name, "rings", N, "with-diffs", nd, flush=True)
    print("KINDS")
    for k, v in sorted(kinds.items()):
        print(k, v)
    total = sum(n for n, _ in stats.values())
    bad = sum(d for _, d in stats.values())
    print("rings", total, "configurations", len(stats), "with differences", bad,
          "(of them entered mid-session:", mids, ")")
    if bad:
        print("differing rings saved in", savedir)
        sys.exit(1)


if __name__ == "__main__":
    main()
