#!/usr/bin/env python3
"""Random Rx cases in the format of specs/golden/dpdk/rx-cases.txt.

Lays CQ rings out the way the DPDK oracle harness describes them (plans of
rN / rmN / sN[:pK][@len,..] tokens, basic and enhanced layouts, hash / csum /
csum_stridx minis, profiles 0-8, warm-up that moves the counters, possibly
across the ring end, cyclic or striding RQ, burst cycles, queue flags) and
fills in the outputs with rx_model.py's model of DPDK 26.07 (scalar and SSE
paths). The CQE bytes are this generator's reading of the PRM, so the hash
values, checksums and profile encodings differ from the harness's.

Usage:
  rx_gen.py OUT SEED N [--kind K]   K: sprq | mprq | any (default any)
"""

import random
import sys

import rx_model as M

# profile -> (hdr_type_etc, vlan_info, hash is zero)
#   hdr_type_etc (big-endian 16 bits): [10] l4_ok [9] l3_ok [8] l2_ok,
#   [7] ip_frag [6:4] l4_hdr_type [3:2] l3_hdr_type [0] cv (VLAN stripped)
PROFILES = {
    0: (0x0728, 0, False),  # IPv4/UDP, checksums ok
    1: (0x0718, 0, False),  # IPv4/TCP (l4_hdr_type 1), ok
    2: (0x0724, 0, False),  # IPv6/UDP, ok
    3: (0x0714, 0, False),  # IPv6/TCP, ok
    4: (0x0328, 0, False),  # IPv4/UDP, L4 checksum bad
    5: (0x0528, 0, False),  # IPv4/UDP, L3 checksum bad
    6: (0x0388, 0, False),  # IPv4 fragment (no L4)
    7: (0x0100, 0, True),   # L2 only, hash 0
    8: (0x0729, 0x2064, False),  # IPv4/UDP, VLAN 100 prio 1 stripped
}
TS = bytes.fromhex("0123456789abcdef")


class Layout:
    def __init__(self, rnd, log_cq, enh, fmt, mprq, strd=None):
        self.rnd = rnd
        self.log_cq = log_cq
        self.n = 1 << log_cq
        self.enh = enh
        self.fmt = fmt
        self.mprq = mprq
        self.strd = strd  # (log_strd_num, log_strd_sz)
        self.slots = {}
        self.ci = 0  # hardware CQ index
        self.rq = 0  # RQ WQE counter (cyclic) / WQE index (striding)
        self.stride = 0  # strides consumed in the current WQE
        self.packets = 0
        self.straddles = False

    def hash(self, prof):
        if PROFILES[prof][2]:
            return 0
        return self.rnd.getrandbits(32) | 1

    def owner(self, idx):
        return (idx >> self.log_cq) & 1

    def vic(self, idx):
        return (idx >> self.log_cq) & 0xFF

    def strides_for(self, ln):
        """Striding RQ: strides of a frame; shrinks it to fit the WQE."""
        num, sz = 1 << self.strd[0], 1 << self.strd[1]
        left = num - self.stride
        cnt = -(-ln // sz)
        if cnt > left:
            ln = left * sz
            cnt = left
        return ln, cnt

    def take_strides(self, cnt):
        idx, wqe = self.stride, self.rq
        self.stride += cnt
        if self.stride == (1 << self.strd[0]):
            self.stride = 0
            self.rq += 1
        return idx, wqe

    def regular(self, prof, ln, h):
        hdr, vlan, _ = PROFILES[prof]
        b = bytearray(64)
        b[12:16] = h.to_bytes(4, "big")
        b[20:22] = b"\xff\xff"
        b[28:30] = hdr.to_bytes(2, "big")
        b[30:32] = vlan.to_bytes(2, "big")
        if self.mprq:
            ln, cnt = self.strides_for(ln)
            idx, wqe = self.take_strides(cnt)
            b[2:4] = (wqe & 0xFFFF).to_bytes(2, "big")
            b[44:48] = ((cnt << 16) | ln).to_bytes(4, "big")
            b[60:62] = idx.to_bytes(2, "big")
        else:
            b[44:48] = ln.to_bytes(4, "big")
            b[60:62] = (self.rq & 0xFFFF).to_bytes(2, "big")
            self.rq += 1
        b[48:56] = TS
        return b

    def put(self, idx, b):
        self.slots[idx] = bytes(b)

    def reg(self, prof, ln):
        b = self.regular(prof, ln, self.hash(prof))
        b[62] = self.vic(self.ci)
        b[63] = 0x20 | self.owner(self.ci)
        self.put(self.ci, b)
        self.ci += 1
        self.packets += 1

    def mini(self, prof, ln):
        """One mini CQE (8 bytes) and the packet's RQ bookkeeping."""
        h = self.hash(prof)
        m = bytearray(8)
        if self.mprq:
            ln, cnt = self.strides_for(ln)
            idx, _ = self.take_strides(cnt)
            bc = (cnt << 16) | ln
        else:
            idx = self.rq & 0xFFFF
            self.rq += 1
            bc = ln
        if self.fmt == "hash":
            m[0:4] = h.to_bytes(4, "big")
        else:
            m[0:2] = self.rnd.getrandbits(16).to_bytes(2, "big")
            m[2:4] = (idx if self.fmt == "csum_stridx" else 0).to_bytes(2, "big")
        m[4:8] = bc.to_bytes(4, "big")
        return m, h, idx

    def session(self, n, prof, lens):
        t = self.ci
        rq0, st0, wqe0 = self.rq, self.stride, self.rq
        minis = []
        for k in range(n):
            minis.append(self.mini(prof, lens[k % len(lens)]))
        self.packets += n
        if (t & ~(self.n - 1)) != ((t + n - 1) & ~(self.n - 1)):
            self.straddles = True
        if self.enh:
            k = 0
            while k < n:
                blk = minis[k:k + 7]
                b = bytearray(64)
                for j, (m, _, _) in enumerate(blk):
                    b[8 * j:8 * j + 8] = m
                b[62] = self.vic(self.ci)
                b[63] = ((len(blk) - 1) << 4) | 0x0C | self.owner(self.ci)
                self.put(self.ci, b)
                self.ci += len(blk)
                k += len(blk)
            return
        # basic: title CQE (format 3, byte_cnt = n), mini arrays at t+1, t+8k
        first_h, first_idx = minis[0][1], minis[0][2]
        hdr, vlan, _ = PROFILES[prof]
        b = bytearray(64)
        b[12:16] = first_h.to_bytes(4, "big")
        b[20:22] = b"\xff\xff"
        b[28:30] = hdr.to_bytes(2, "big")
        b[30:32] = vlan.to_bytes(2, "big")
        b[44:48] = n.to_bytes(4, "big")
        b[48:56] = TS
        if self.mprq:
            b[2:4] = (wqe0 & 0xFFFF).to_bytes(2, "big")
        b[60:62] = (first_idx & 0xFFFF).to_bytes(2, "big")
        b[62] = self.vic(t)
        b[63] = 0x2C | self.owner(t)
        self.put(t, b)
        arr = 0
        while 8 * arr < n:
            a = bytearray(64)
            for j, (m, _, _) in enumerate(minis[8 * arr:8 * arr + 8]):
                a[8 * j:8 * j + 8] = m
            self.put(t + (1 if arr == 0 else 8 * arr), a)
            arr += 1
        self.ci = t + n


def parse_token(tok):
    prof, lens = None, [64]
    if "@" in tok:
        tok, l = tok.split("@")
        lens = [int(x) for x in l.split(",")]
    if ":p" in tok:
        tok, p = tok.split(":p")
        prof = int(p)
    return tok[0] + ("m" if tok[1:2] == "m" else ""), int(tok[2:] if tok[1:2] == "m" else tok[1:]), prof, lens


def lay_plan(L, plan):
    for tok in plan.split():
        kind, n, prof, lens = parse_token(tok)
        if kind == "r":
            for k in range(n):
                L.reg(prof or 0, lens[k % len(lens)])
        elif kind == "rm":
            for k in range(n):
                L.reg(k % 9, lens[k % len(lens)])
        else:
            L.session(n, prof or 0, lens)


def rand_lens(rnd, mprq, crc):
    pool = [64, 60, 128, 129, 200, 256, 300, 512, 640, 1000, 1500]
    if not mprq:
        pool += [9000 % 2049, 2048]
    if rnd.random() < 0.5:
        return None
    return [rnd.choice(pool) for _ in range(rnd.randint(1, 3))]


def rand_plan(rnd, enh, mprq, budget, vec_only, warm_title):
    toks = []
    used = 0
    first = True
    while used < budget:
        left = budget - used
        r = rnd.random()
        # a plan may open with a session when a warm-up CQE can serve as
        # the enhanced layout's title (the basic layout carries its own)
        lead_session = first and (not enh or warm_title) and rnd.random() < 0.2
        if (first and not lead_session) or r < 0.35 or left < 2:
            n = rnd.randint(1, min(left, 6))
            kind = "rm" if (not mprq and rnd.random() < 0.3) else "r"
            tok = "%s%d" % (kind, n)
            if kind == "r" and rnd.random() < 0.3:
                tok += ":p%d" % rnd.randrange(9)
        else:
            hi = min(left, rnd.choice([7, 9, 16, 24, 40, 70, 200]))
            n = rnd.randint(1 if enh else 2, max(2, hi))
            tok = "s%d" % n
            if rnd.random() < 0.5:
                tok += ":p%d" % rnd.randrange(9)
        lens = rand_lens(rnd, mprq, False)
        if lens:
            tok += "@" + ",".join(map(str, lens))
        toks.append(tok)
        used += n
        first = False
    return " ".join(toks)


def warm(c, kv, path, W, bursts, warm_cqes):
    """Runs W warm-up packets through the path. The hardware writes a CQE
    only into a slot the consumer has freed, so the CQEs go in as polling
    moves on."""
    if path == "scalar":
        m = M.Scalar(c, kv)
    else:
        m = M.Vec(c, kv)
    got = 0
    k = 0
    zeros = 0
    written = 0
    while got < W:
        while written < W and written < m.cq_ci + c.cqn:
            m.ring[written & (c.cqn - 1)] = bytearray(warm_cqes[written])
            written += 1
        req = 64 if zeros >= 2 else min(bursts[k % len(bursts)], 64)
        n = len(m.burst(req))
        zeros = 0 if n else zeros + 1
        got += n
        k += 1
        if k > 10000:
            raise M.Model("warm-up stuck")
    return m


def make_case(rnd, name, kind):
    mprq = kind == "mprq"
    enh = rnd.random() < 0.5
    if mprq:
        fmt = rnd.choice(["csum_stridx", "csum_stridx", "hash"])
        log_cq = rnd.choice([6, 8, 10])
        log_wqe = rnd.choice([2, 3, 4])
        log_strd_num = rnd.choice([3, 4, 6])
        log_strd_sz = rnd.choice([6, 8, 11])
        strd = (log_strd_num, log_strd_sz)
    else:
        fmt = rnd.choice(["hash", "hash", "csum"])
        log_cq = rnd.choice([4, 5, 6, 7, 8])
        strd = None
    n = 1 << log_cq
    vec_only = mprq and fmt == "hash"
    cfg = {
        "csum": rnd.choice([1, 1, 0]), "rss_hash": rnd.choice([1, 1, 0]),
        "vlan_strip": rnd.choice([1, 1, 0]),
        "crc_present": 0 if mprq else rnd.choice([0, 0, 1]), "mark": rnd.choice([0, 0, 1]),
    }
    bursts = rnd.choice([[64], [32], [1, 3, 5, 2], [4], [7], [16, 1], [2], [64, 8], [5, 11]])
    W = rnd.choice([0, 0, n - rnd.randint(1, 12), rnd.randint(1, 3 * n), n + rnd.randint(0, 4) - 2])
    W = max(0, W)
    if mprq:
        W = min(W, (1 << log_wqe) * (1 << log_strd_num) - 200) if W else 0
        W = max(W, 0)
    budget = rnd.randint(1, max(1, min(n - 2, rnd.choice([40, 140, 400]))))
    plan = rand_plan(rnd, enh, mprq, budget, vec_only, W > 0)
    # lay out the warm-up (regular 64-byte packets, profile 0) and the plan
    L = Layout(rnd, log_cq, enh, fmt, mprq, strd)
    for _ in range(W):
        L.reg(0, 64)
    warm_slots = dict(L.slots)
    L.slots = {}
    start = L.ci
    lay_plan(L, plan)
    if L.ci - start > n - 1:
        return None
    script = L.slots
    kv = {"desc": "generated: %s %s %s" % (kind, "enhanced" if enh else "basic", fmt),
          "dpdk": "model of DPDK 26.07 (tests/refcheck/rx_model.py)"}
    if mprq:
        kv["rq_type"] = "mprq"
    kv["layout"] = "enhanced" if enh else "basic"
    kv["mcqe_format"] = fmt
    if mprq:
        kv.update({"cfg.log_wqe": log_wqe, "cfg.log_strd_num": log_strd_num,
                   "cfg.log_strd_sz": log_strd_sz, "cfg.log_cq": log_cq,
                   "cfg.mprq_max_memcpy_len": 128, "cfg.strd_shift_en": 0,
                   "cfg.strd_scatter_en": 0})
    else:
        kv.update({"cfg.log_rq": log_cq, "cfg.log_cq": log_cq})
    for k, v in cfg.items():
        kv["cfg." + k] = v
    kv["cfg.warmup"] = W
    kv["cfg.plan"] = plan
    kv["cfg.bursts"] = ",".join(map(str, bursts))
    kv = {k: str(v) for k, v in kv.items()}
    kv["in.packets"] = str(L.packets - W)
    # the ring before the warm-up: the warm-up's CQEs only
    wkv = dict(kv)
    wkv["in.packets"] = str(W)
    wc = M.Case(wkv)
    paths = ["vec"] if vec_only else (["scalar"] if L.straddles else ["scalar", "vec"])
    if vec_only and L.straddles:
        return None
    out = {}
    for path in paths:
        init = init_state(path, mprq, log_cq, log_wqe if mprq else 0, log_strd_num if mprq else 0)
        for k, v in init.items():
            wkv["%s.in.%s" % (path, k)] = str(v)
        m = warm(wc, wkv, path, W, bursts, warm_slots)
        st = {}
        m.outputs(st)
        state = {}
        for k, v in st.items():
            state[k[4:]] = str(v)
        ring_after_warm = m.ring
        # the case's ring: warm-up leftovers, then the script
        ring = [bytearray(s) for s in ring_after_warm]
        for s, b in script.items():
            ring[s & (n - 1)] = bytearray(b)
        out[path] = (state, ring)
    # both paths must see the same ring (warm-up leaves no invalidation)
    rings = [r for _, r in out.values()]
    if any(r != rings[0] for r in rings):
        return None
    ring = rings[0]
    cq_first = start
    kv["in.cq_first"] = str(cq_first)
    kv["in.cq_end"] = str(L.ci)
    script_idx = {s & (n - 1) for s in script}
    init = bytearray(64)
    init[62], init[63] = 0xFF, 0xF1
    for s in range(n):
        if s in script_idx:
            kv["in.cqe.%d" % s] = ring[s].hex()
        elif ring[s] != init:
            kv["in.stale.%d" % s] = ring[s].hex()
    c = M.Case(kv)
    res = {}
    for path in paths:
        state = out[path][0]
        pkv = dict(kv)
        pkv["%s.func" % path] = FUNCS[(path, mprq)]
        for k, v in state.items():
            key = k
            pkv["%s.in.%s" % (path, key)] = v
        o = M.run_path(c, pkv, path, recorded=False)
        if int(o["received"]) != c.packets:
            return None
        res[path] = (state, o)
    return kv, res


FUNCS = {("scalar", False): "mlx5_rx_burst", ("vec", False): "mlx5_rx_burst_vec",
         ("scalar", True): "mlx5_rx_burst_mprq", ("vec", True): "mlx5_rx_burst_mprq_vec"}


def init_state(path, mprq, log_cq, log_wqe, log_strd_num):
    """mlx5_rxq_initialize's counters (and a zeroed doorbell record)."""
    if mprq:
        wqe_n = 1 << log_wqe
        s = {"cq_ci": 0, "rq_ci": wqe_n, "rq_pi": 0, "elts_ci": wqe_n << log_strd_num,
             "consumed_strd": 0, "cq_dbrec": "00000000", "rq_dbrec": "%08x" % wqe_n}
        if path == "scalar":
            s.update({"zip.ai": 0, "zip.cqe_cnt": 0})
        else:
            s["decompressed"] = 0
        return s
    q = 1 << log_cq
    s = {"cq_ci": 0, "rq_ci": q, "rq_pi": 0, "cq_dbrec": "00000000", "rq_dbrec": "%08x" % q}
    if path == "scalar":
        s.update({"zip.ai": 0, "zip.cqe_cnt": 0, "zip.ca": 0, "zip.na": 0, "zip.cq_ci": 0})
    else:
        s["decompressed"] = 0
    return s


IN_ORDER = {
    "scalar": ["cq_ci", "rq_ci", "rq_pi", "elts_ci", "consumed_strd", "zip.ai", "zip.cqe_cnt",
               "zip.ca", "zip.na", "zip.cq_ci", "cq_dbrec", "rq_dbrec"],
    "vec": ["cq_ci", "rq_ci", "rq_pi", "elts_ci", "consumed_strd", "decompressed", "cq_dbrec",
            "rq_dbrec"],
}


def write_case(f, name, kv, res):
    f.write("case=%s\n" % name)
    head = [k for k in kv if not k.startswith("in.")]
    for k in head:
        f.write("%s=%s\n" % (k, kv[k]))
    first = True
    for path in ("scalar", "vec"):
        if path not in res:
            continue
        state, o = res[path]
        mprq = kv.get("rq_type") == "mprq"
        f.write("%s.func=%s\n" % (path, FUNCS[(path, mprq)]))
        for k in IN_ORDER[path]:
            if k in state:
                f.write("%s.in.%s=%s\n" % (path, k, state[k]))
        if first:
            for k in ("in.cq_first", "in.cq_end", "in.packets"):
                f.write("%s=%s\n" % (k, kv[k]))
            for k in sorted((k for k in kv if k.startswith("in.cqe.") or k.startswith("in.stale.")),
                            key=lambda k: (k.split(".")[1], int(k.split(".")[2]))):
                f.write("%s=%s\n" % (k, kv[k]))
            first = False
        for k in sorted((k for k in o if k.startswith("call.")), key=lambda k: int(k[5:])):
            f.write("%s.%s=%s\n" % (path, k, o[k]))
        pk = sorted({int(k.split(".")[1]) for k in o if k.startswith("pkt.")})
        for i in pk:
            for fld in M.PKT_FIELDS:
                k = "pkt.%d.%s" % (i, fld)
                if k in o:
                    f.write("%s.%s=%s\n" % (path, k, o[k]))
        f.write("%s.received=%s\n" % (path, o["received"]))
        for k in o:
            if k.startswith("out."):
                f.write("%s.%s=%s\n" % (path, k, o[k]))
        for k in sorted((k for k in o if k.startswith("cq_after.")), key=lambda k: int(k[9:])):
            f.write("%s.%s=%s\n" % (path, k, o[k]))
    f.write("end\n\n")


def main(argv):
    if len(argv) < 4:
        print(__doc__)
        return 2
    out, seed, count = argv[1], int(argv[2]), int(argv[3])
    kind = "any"
    if "--kind" in argv:
        kind = argv[argv.index("--kind") + 1]
    rnd = random.Random(seed)
    cases = []
    tries = 0
    while len(cases) < count and tries < count * 20:
        tries += 1
        k = kind if kind != "any" else rnd.choice(["sprq", "sprq", "sprq", "mprq"])
        name = "gen%d_%d_%s" % (seed, len(cases), k)
        r = make_case(rnd, name, k)
        if r is None:
            continue
        cases.append((name, r))
    with open(out, "w") as f:
        f.write("# generated by tests/refcheck/rx_gen.py %s %d %d (kind %s): outputs from\n"
                "# rx_model.py, the model of DPDK 26.07's mlx5 Rx bursts; format as in\n"
                "# specs/golden/dpdk/rx-cases.txt. Requests replay the poller the generator\n"
                "# ran (burst cycle; after two empty calls a 64-packet request).\n"
                % (out, seed, count, kind))
        f.write("ncases=%d\n\n" % len(cases))
        for name, (kv, res) in cases:
            write_case(f, name, kv, res)
    kinds = {}
    for name, (kv, res) in cases:
        key = "%s/%s/%s/%s" % (kv.get("rq_type", "sprq"), kv["layout"], kv["mcqe_format"],
                               "+".join(sorted(res)))
        kinds[key] = kinds.get(key, 0) + 1
    print("rx_gen: %d cases (%d tries) -> %s" % (len(cases), tries, out))
    for k in sorted(kinds):
        print("  %4d %s" % (kinds[k], k))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
