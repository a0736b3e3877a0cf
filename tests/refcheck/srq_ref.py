#!/usr/bin/env python3
"""Independent model of rdma-core v44.0 libmlx5's shared receive queue in
memory: mlx5_create_srq / mlx5_alloc_srq_buf (verbs.c, srq.c), mlx5_post_srq_recv
and mlx5_free_srq_wqe (srq.c), and the wr_id a responder completion on an SRQ
returns (cq.c: handle_responder / handle_responder_lazy: wr_id =
srq->wrid[be16toh(cqe->wqe_counter)], then mlx5_free_srq_wqe(srq, wqe_ctr)).

Written from rdma-core v44.0's providers/mlx5/{srq,verbs,cq}.c, mlx5.h and
mlx5dv.h only, without reading mlx5dp's code (see README.md in this folder).

Usage:
  srq_ref.py gen N SEED > FILE   the hand-written scenarios, then N random ones
                                 (inputs + model outputs)
  srq_ref.py fixed > FILE        the hand-written scenarios only
                                 (srq-repro-cases.txt)
  srq_ref.py check FILE          re-derive every expectation line of FILE from
                                 its inputs and report the lines that differ

Facts modelled (v44.0 file:function):
- verbs.c:mlx5_create_srq: srq->max_gs = max_sge, srq->counter = 0 (uint16_t),
  *srq->db = 0.
- srq.c:mlx5_alloc_srq_buf: size = roundup_pow_of_two(max(32, 16 + 16 * max_gs));
  max_gs = (size - 16) / 16 (posts are checked against this rounded-up value,
  not the max_sge asked for); wqe_shift = ilog32(size - 1) = log2(size); the
  buffer is zeroed; head = 0, tail = roundup_pow_of_two(max_wr + 1) - 1;
  set_srq_buf_ll(0, tail): WQE i's next_wqe_index = htobe16(i + 1) for
  0 <= i < tail (the tail WQE's stays 0).  Here wqe_cnt = tail + 1 (a power
  of two).  When the device allows it libmlx5 allocates a wait queue after
  those WQEs (WQEs wqe_cnt .. max-1, used only by ODP page-fault handling,
  mlx5_complete_odp_fault); it is not modelled: nothing here touches it.
- WQE layout (mlx5dv.h): struct mlx5_wqe_srq_next_seg (16 bytes: rsvd0[2],
  __be16 next_wqe_index at byte 2, signature, rsvd1[11]) then max_gs
  struct mlx5_wqe_data_seg (__be32 byte_count, __be32 lkey, __be64 addr).
  MLX5_INVALID_LKEY = 0x100.
- srq.c:mlx5_post_srq_recv, per WR in list order:
    num_sge > max_gs          -> err = EINVAL (22), *bad_wr = wr, stop;
    head == tail (SRQ full)   -> err = ENOMEM (12), *bad_wr = wr, stop;
    wrid[head] = wr_id; WQE = head; head = be16toh(WQE.next_wqe_index);
    data segment i = (len, lkey, addr) for every SGE (zero-length ones too);
    if num_sge < max_gs: data segment num_sge = (0, 0x100, 0).
    Nothing else of the WQE is written (next segment, later data segments
    keep whatever they held).
  After the loop, if nreq > 0: counter += nreq (16 bits), write barrier,
  *db = htobe32(counter): once per call.  Returns err (0 on success).
- srq.c:mlx5_free_srq_wqe(ind): WQE[tail].next_wqe_index = htobe16(ind);
  tail = ind.  (The freed WQE's own next_wqe_index is not touched.)

Not from libmlx5: the `srq` line's COUNTER0 lets a scenario start the 16-bit
counter at a value other than 0.  libmlx5 always starts at 0 (and writes a
doorbell record of 0); the counter is only ever read to compute the doorbell
record.  A start of c stands for c earlier WRs each posted (with max_gs SGEs of
address 0, length 0, lkey 0: all-zero data segments, no terminator) and
completed at once, one call each: the doorbell record then holds htobe32(c),
and since the generator picks c as a multiple of WQE_CNT, the free list, the
links and the WQE bytes are back to their state at creation.  A harness can
get there the same way.

Scenario format (one token per field, numbers decimal unless 0x-prefixed;
'#' lines and blank lines are ignored):

  case NAME
  srq WQE_CNT MAX_SGE COUNTER0       inputs: WQEs in the free list (power of 2),
                                     max_sge asked for, starting counter (a
                                     multiple of WQE_CNT below 2^16, see above)
  layout WQE_SHIFT MAX_GS HEAD TAIL  expected after creation; every WQE is then
                                     all zero except next_wqe_index = i + 1 for
                                     i < TAIL; doorbell record htobe32(COUNTER0)
  post K                             one mlx5_post_srq_recv call of a K-WR list,
  wr WR_ID NSGE ADDR:LEN:LKEY ...    followed by K wr lines (WR_ID, ADDR, LEN,
                                     LKEY hex); NSGE may exceed MAX_GS
  ret ERRNO BAD                      expected return (0, 12 ENOMEM, 22 EINVAL) and
                                     bad_wr index into the list (-1 if none)
  complete IDX                       a responder completion with wqe_counter IDX
                                     (always a WQE posted and not yet completed)
  wrid WR_ID                         expected wr_id of that completion (hex)
  wqe IDX HEX                        (after ret or wrid) the full bytes of a WQE
                                     whose bytes changed in this operation; a
                                     replay keeps a shadow of the buffer, applies
                                     these lines and compares every WQE
  db HEX                             doorbell record's 4 bytes in memory order
  state HEAD TAIL COUNTER            expected head, tail and 16-bit counter
  end

Every operation's expectations appear in the order ret|wrid, wqe*, db, state.
"""
import random
import sys

INVALID_LKEY = 0x100
EINVAL = 22
ENOMEM = 12


def roundup_pow2(n):
    p = 1
    while p < n:
        p <<= 1
    return p


class Srq:
    def __init__(self, wqe_cnt, max_sge, counter0=0):
        assert wqe_cnt >= 2 and wqe_cnt & (wqe_cnt - 1) == 0
        assert 0 <= counter0 < 0x10000 and counter0 % wqe_cnt == 0
        size = roundup_pow2(max(32, 16 + 16 * max_sge))
        self.size = size
        self.max_gs = (size - 16) // 16
        self.wqe_shift = size.bit_length() - 1
        self.wqe_cnt = wqe_cnt
        self.buf = bytearray(wqe_cnt * size)
        self.head = 0
        self.tail = wqe_cnt - 1
        for i in range(0, self.tail):
            self._set_next(i, i + 1)
        self.wrid = [0] * wqe_cnt
        self.counter = counter0 & 0xFFFF
        self.db = bytearray(self.counter.to_bytes(4, "big"))

    def _off(self, n):
        return n << self.wqe_shift

    def _set_next(self, i, nxt):
        o = self._off(i) + 2
        self.buf[o:o + 2] = (nxt & 0xFFFF).to_bytes(2, "big")

    def _get_next(self, i):
        o = self._off(i) + 2
        return int.from_bytes(self.buf[o:o + 2], "big")

    def wqe(self, i):
        return bytes(self.buf[self._off(i):self._off(i) + self.size])

    def post(self, wrs):
        """wrs: list of (wr_id, [(addr, len, lkey)...]).  Returns (err, bad_index)."""
        err, bad, nreq = 0, -1, 0
        for wr_id, sges in wrs:
            if len(sges) > self.max_gs:
                err, bad = EINVAL, nreq
                break
            if self.head == self.tail:
                err, bad = ENOMEM, nreq
                break
            self.wrid[self.head] = wr_id
            w = self.head
            self.head = self._get_next(w)
            scat = self._off(w) + 16
            for i, (addr, ln, lkey) in enumerate(sges):
                o = scat + 16 * i
                self.buf[o:o + 4] = ln.to_bytes(4, "big")
                self.buf[o + 4:o + 8] = lkey.to_bytes(4, "big")
                self.buf[o + 8:o + 16] = addr.to_bytes(8, "big")
            if len(sges) < self.max_gs:
                o = scat + 16 * len(sges)
                self.buf[o:o + 4] = (0).to_bytes(4, "big")
                self.buf[o + 4:o + 8] = INVALID_LKEY.to_bytes(4, "big")
                self.buf[o + 8:o + 16] = (0).to_bytes(8, "big")
            nreq += 1
        if nreq:
            self.counter = (self.counter + nreq) & 0xFFFF
            self.db[:] = self.counter.to_bytes(4, "big")
        return err, bad

    def complete(self, ind):
        wr_id = self.wrid[ind]
        self._set_next(self.tail, ind)
        self.tail = ind
        return wr_id


# ---------------------------------------------------------------- format I/O

def fmt_wr(wr_id, nsge_sges):
    parts = ["wr", "0x%x" % wr_id, str(len(nsge_sges))]
    parts += ["0x%x:0x%x:0x%x" % s for s in nsge_sges]
    return " ".join(parts)


def expect_lines(srq, before):
    out = []
    for i in range(srq.wqe_cnt):
        w = srq.wqe(i)
        if w != before[i]:
            out.append("wqe %d %s" % (i, w.hex()))
    out.append("db %s" % srq.db.hex())
    out.append("state %d %d %d" % (srq.head, srq.tail, srq.counter))
    return out


def snapshot(srq):
    return [srq.wqe(i) for i in range(srq.wqe_cnt)]


def run_case(name, wqe_cnt, max_sge, counter0, ops):
    """ops: list of ('post', [(wr_id, sges)]) | ('complete', idx).
    Returns the scenario's lines."""
    srq = Srq(wqe_cnt, max_sge, counter0)
    lines = ["case " + name, "srq %d %d %d" % (wqe_cnt, max_sge, counter0),
             "layout %d %d %d %d" % (srq.wqe_shift, srq.max_gs, srq.head, srq.tail)]
    for op in ops:
        before = snapshot(srq)
        if op[0] == "post":
            lines.append("post %d" % len(op[1]))
            lines += [fmt_wr(wid, sg) for wid, sg in op[1]]
            err, bad = srq.post(op[1])
            lines.append("ret %d %d" % (err, bad))
        else:
            lines.append("complete %d" % op[1])
            lines.append("wrid 0x%x" % srq.complete(op[1]))
        lines += expect_lines(srq, before)
    lines.append("end")
    return lines


def parse(text):
    """Yields (name, wqe_cnt, max_sge, counter0, ops, expected_lines)."""
    cur = None
    pending = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        w = line.split()
        if w[0] == "case":
            cur = {"name": w[1], "ops": [], "lines": [line]}
        elif w[0] == "srq":
            cur["cfg"] = tuple(int(x, 0) for x in w[1:4])
            cur["lines"].append(line)
        elif w[0] == "post":
            pending = int(w[1])
            cur["ops"].append(("post", []))
            cur["lines"].append(line)
        elif w[0] == "wr":
            sges = []
            for s in w[3:]:
                a, ln, k = s.split(":")
                sges.append((int(a, 0), int(ln, 0), int(k, 0)))
            assert len(sges) == int(w[2])
            cur["ops"][-1][1].append((int(w[1], 0), sges))
            pending -= 1
            cur["lines"].append(line)
        elif w[0] == "complete":
            cur["ops"].append(("complete", int(w[1], 0)))
            cur["lines"].append(line)
        elif w[0] == "end":
            cur["lines"].append(line)
            yield cur
            cur = None
        else:
            cur["lines"].append(line)


def check(path):
    with open(path) as f:
        text = f.read()
    n = bad = 0
    for c in parse(text):
        n += 1
        mine = run_case(c["name"], *c["cfg"], c["ops"])
        if mine != c["lines"]:
            bad += 1
            for i, (a, b) in enumerate(zip(mine, c["lines"])):
                if a != b:
                    print("%s: line %d: file %r, model %r" % (c["name"], i, b[:120], a[:120]))
                    break
            else:
                print("%s: %d lines in file, %d from the model" % (c["name"], len(c["lines"]), len(mine)))
    print("%d scenarios, %d differ" % (n, bad), file=sys.stderr)
    return 1 if bad else 0


# ---------------------------------------------------------------- generator

def rand_sge(rng):
    r = rng.random()
    if r < 0.2:
        ln = 0
    elif r < 0.3:
        ln = 0xFFFFFFFF
    else:
        ln = rng.choice([rng.randrange(1, 65536), rng.randrange(1, 1 << 32)])
    r = rng.random()
    if r < 0.05:
        lkey = INVALID_LKEY
    elif r < 0.1:
        lkey = rng.choice([0, 0xFFFFFFFF])
    else:
        lkey = rng.randrange(1 << 32)
    addr = rng.choice([0, rng.randrange(1 << 64), rng.randrange(1 << 48), (1 << 64) - 1])
    return (addr, ln, lkey)


def max_gs_of(max_sge):
    size = roundup_pow2(max(32, 16 + 16 * max_sge))
    return (size - 16) // 16


def rand_wr(rng, max_gs, allow_too_many):
    r = rng.random()
    if allow_too_many and r < 0.04:
        n = max_gs + rng.randrange(1, 4)
    elif r < 0.15:
        n = 0
    elif r < 0.3:
        n = max_gs
    else:
        n = rng.randrange(0, max_gs + 1)
    wr_id = rng.choice([rng.randrange(1 << 64), rng.randrange(1 << 16), (1 << 64) - 1, 0])
    return (wr_id, [rand_sge(rng) for _ in range(n)])


def gen_case(rng, k):
    wqe_cnt = rng.choice([2, 2, 4, 4, 8, 8, 16, 32, 64, 128, 256, 512, 1024])
    max_sge = rng.choice(list(range(1, 17)) + [1, 1, 2, 3])
    # keep the output size bounded: big queues get small WQEs
    if wqe_cnt >= 256:
        max_sge = rng.choice([1, 1, 2, 3])
    elif wqe_cnt >= 64:
        max_sge = min(max_sge, 7)
    max_gs = max_gs_of(max_sge)
    r = rng.random()
    if r < 0.5:
        counter0 = 0
    elif r < 0.8:   # the 16-bit wrap within reach of the scenario's posts
        counter0 = 0x10000 - wqe_cnt * rng.randrange(1, 4 if wqe_cnt <= 64 else 2)
    else:
        counter0 = wqe_cnt * rng.randrange(0x10000 // wqe_cnt)
    # model (shadow) of which WQEs are posted, to pick legal completions
    sim = Srq(wqe_cnt, max_sge, counter0)
    posted = []
    ops = []
    nops = rng.randrange(4, 14) if wqe_cnt <= 64 else rng.randrange(3, 8)
    style = rng.choice(["mixed", "fill", "churn"])
    for _ in range(nops):
        free_slots = wqe_cnt - 1 - len(posted)
        do_post = rng.random() < (0.55 if style != "fill" else 0.75) or not posted
        if do_post:
            r = rng.random()
            if r < 0.25:
                n = free_slots + rng.randrange(1, 3)     # overflow mid-list
            elif r < 0.35:
                n = 0 if rng.random() < 0.3 else free_slots  # exactly fill
            elif r < 0.4:
                n = 1
            else:
                n = rng.randrange(1, min(8, wqe_cnt) + 1)
            if wqe_cnt > 64 and style == "churn":
                n = min(n, rng.randrange(1, 24))
            n = max(0, n)
            wrs = [rand_wr(rng, max_gs, True) for _ in range(n)]
            sim.post(wrs)
            ops.append(("post", wrs))
            posted = sorted(posted_set(sim))
        else:
            m = rng.randrange(1, min(len(posted), 6 if wqe_cnt <= 64 else 40) + 1)
            for _ in range(m):
                live = sorted(posted_set(sim))
                if not live:
                    break
                idx = rng.choice(live)
                sim.complete(idx)
                ops.append(("complete", idx))
            posted = sorted(posted_set(sim))
    return run_case("r%d_c%d_s%d" % (k, wqe_cnt, max_sge), wqe_cnt, max_sge, counter0, ops)


def posted_set(sim):
    """WQEs not on the free list (head .. tail following next_wqe_index)."""
    free = set()
    i = sim.head
    while True:
        free.add(i)
        if i == sim.tail:
            break
        i = sim._get_next(i)
    return set(range(sim.wqe_cnt)) - free


def fixed_cases():
    """A few hand-written scenarios that pin the documented corners."""
    out = []
    s = (0x1000, 0x40, 0x11)
    z = (0x2000, 0, 0x22)
    # 2 WQEs: one usable; the second post is refused as full
    out += run_case("two_wqes_full", 2, 1, 0, [
        ("post", [(1, [s]), (2, [s])]),
        ("post", [(3, [])]),
        ("complete", 0),
        ("post", [(4, []), (5, [z])]),
        ("complete", 1),
        ("post", [(6, [z])]),
    ])
    # max_sge 2 rounds up to max_gs 3: 3 SGEs accepted, 4 refused EINVAL
    out += run_case("maxgs_roundup", 4, 2, 0, [
        ("post", [(7, [s, z, s])]),
        ("post", [(8, [s]), (9, [s, s, s, s]), (10, [s])]),
        ("complete", 1),
        ("complete", 0),
        ("post", [(11, []), (12, [z, z])]),
    ])
    # counter wrap at 16 bits, doorbell record 0
    out += run_case("counter_wrap", 8, 1, 0xFFF8, [
        ("post", [(i, [s]) for i in range(6)]),
        ("complete", 2),
        ("complete", 0),
        ("post", [(40 + i, []) for i in range(5)]),
        ("complete", 3),
        ("post", [(50, [z])]),
    ])
    # out-of-order completions and reuse
    out += run_case("out_of_order", 8, 3, 0, [
        ("post", [(i, [s] * (i % 4)) for i in range(7)]),
        ("complete", 5), ("complete", 1), ("complete", 6), ("complete", 0),
        ("post", [(100 + i, [z]) for i in range(5)]),
        ("complete", 3), ("complete", 5),
        ("post", [(200, [s, s, s])]),
    ])
    # an empty list: nothing written, no doorbell
    out += run_case("empty_list", 4, 1, 4, [("post", []), ("post", [(1, [s])]), ("post", [])])
    return out


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "check":
        sys.exit(check(sys.argv[2]))
    if len(sys.argv) == 4 and sys.argv[1] == "gen":
        n, seed = int(sys.argv[2]), int(sys.argv[3])
        rng = random.Random(seed)
        print("# srq_ref.py gen %d %d: rdma-core v44.0 libmlx5 SRQ model (format: see srq_ref.py)" % (n, seed))
        for line in fixed_cases():
            print(line)
        for k in range(n):
            for line in gen_case(rng, k):
                print(line)
        return
    if len(sys.argv) == 2 and sys.argv[1] == "fixed":
        print("# srq_ref.py fixed: the hand-written scenarios of srq_ref.py (rdma-core v44.0")
        print("# libmlx5 SRQ model; format: see srq_ref.py). Replayed by tests/tests/srq_ref.rs.")
        for line in fixed_cases():
            print(line)
        return
    print(__doc__, file=sys.stderr)
    sys.exit(2)


if __name__ == "__main__":
    main()
