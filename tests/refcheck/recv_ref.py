#!/usr/bin/env python3
"""Independent model of rdma-core v44.0 providers/mlx5/qp.c:mlx5_post_recv
(wq_sig=0) on a fabricated QP, emitting rq-cases.txt-format cases.

Written from rdma-core v44.0's providers/mlx5/{qp,verbs}.c, mlx5.h and
mlx5dv.h without reading mlx5dp's code (see README.md in this folder).

Usage:
  recv_ref.py check FILE            re-derive every out.* / rqwqe / mask line of FILE's
                                    cases from their inputs and diff
  recv_ref.py gen N SEED > FILE     N random cases (inputs + model outputs)
Environment: RQ_BIG=1 allows rings up to 65536 WQEs and strides up to 2048 B;
RQ_UNREACHABLE=1 adds the class rq_max_post > rq_wqe_cnt, which libmlx5 never
sets up (verbs.c: max_post = wqe_cnt) and mlx5dp refuses as an option.
Option --reset-maxgs: model a harness that left rq.qp_state_max_gs = rq_max_gs
in RESET (default: libmlx5's own value there, -1, verbs.c:set_qp_operational_state).
"""
import os
import random
import sys

QP_STATES = ["RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"]  # enum ibv_qp_state order
M32 = 0xFFFFFFFF
RESET_MAXGS = False


def parse(text):
    cases = []
    cur = None
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        if line.startswith("case "):
            cur = {"name": line[5:].strip(), "kv": {}, "order": [], "wqes": {}, "masks": {}}
            continue
        if line.strip() == "end":
            cases.append(cur)
            cur = None
            continue
        w = line.split()
        if w[0] == "rqwqe":
            cur["wqes"][int(w[1])] = w[2]
            cur["order"].append(("rqwqe", int(w[1])))
        elif w[0] == "mask":
            cur["masks"][int(w[1])] = w[2]
            cur["order"].append(("mask", int(w[1])))
        else:
            k, v = line.split("=", 1)
            cur["kv"][k] = v
            cur["order"].append(("kv", k, v))
    return cases


def num(s):
    return int(s, 0)


def post_recv(kv):
    """Returns the list of output lines (out.* keys, rqwqe/mask lines, in file order)."""
    state = QP_STATES.index(kv["qp_state"])
    qp_type = kv["qp_type"]
    cnt = num(kv["rq_wqe_cnt"])
    shift = num(kv["rq_wqe_shift"])
    max_gs = num(kv["rq_max_gs"])
    max_post = num(kv["rq_max_post"]) & M32
    head = num(kv["start_rq_head"]) & M32
    tail = num(kv["start_rq_tail"]) & M32
    assert num(kv["wq_sig"]) == 0
    # rq.qp_state_max_gs: -1 after create/modify to RESET, max_gs from INIT on
    if state == 0 and not RESET_MAXGS:
        qs_max_gs = -1
    else:
        qs_max_gs = max_gs
    stride = 1 << shift
    mem = {}  # slot -> (bytearray, bytearray mask)
    touched_order = []
    slots = []
    ind = head & (cnt - 1)
    nwr = num(kv["nwr"])
    err = 0
    bad = -1
    nreq = 0
    for i in range(nwr):
        nreq = i
        # mlx5_wq_overflow: unsigned cur = head - tail; cur + nreq >= max_post
        cur = (head - tail) & M32
        if ((cur + nreq) & M32) >= max_post:
            err, bad = 12, i
            break
        nsge = num(kv[f"wr{i}.num_sge"])
        if nsge > qs_max_gs:
            err, bad = 22, i
            break
        if ind not in mem:
            mem[ind] = (bytearray(b"\xa5" * stride), bytearray(b"." * stride))
            touched_order.append(ind)
        buf, mask = mem[ind]

        def put(j, bc, lkey, addr):
            o = 16 * j
            buf[o:o + 16] = bc.to_bytes(4, "big") + lkey.to_bytes(4, "big") + addr.to_bytes(8, "big")
            mask[o:o + 16] = b"x" * 16

        j = 0
        for s in range(nsge):
            ln = num(kv[f"wr{i}.sge{s}.length"]) & M32
            if ln == 0:
                continue
            put(j, ln, num(kv[f"wr{i}.sge{s}.lkey"]) & M32, num(kv[f"wr{i}.sge{s}.addr"]) & ((1 << 64) - 1))
            j += 1
        if j < max_gs:
            put(j, 0, 0x100, 0)
        slots.append((ind, num(kv[f"wr{i}.wr_id"])))
        ind = (ind + 1) & (cnt - 1)
        nreq = i + 1
    else:
        nreq = nwr
    out = []
    dbrec = bytearray(b"\xa5" * 8)
    dmask = bytearray(b"." * 8)
    written = 0
    if nreq:
        head = (head + nreq) & M32
        if not (qp_type == "RAW_PACKET" and state < 2):
            dbrec[0:4] = (head & 0xFFFF).to_bytes(4, "big")
            dmask[0:4] = b"xxxx"
            written = 1
    out.append(("kv", "out.ret", str(err)))
    out.append(("kv", "out.bad_wr", str(bad)))
    out.append(("kv", "out.rq_head", str(head)))
    for slot, wrid in slots:
        out.append(("kv", f"out.rq_slot{slot}", f"wrid:0x{wrid:016x}"))
    out.append(("kv", "out.dbrec_written", str(written)))
    out.append(("kv", "out.dbrec_rcv_offset", "0"))
    out.append(("kv", "out.dbrec_bytes", dbrec.hex()))
    out.append(("kv", "out.dbrec_mask", dmask.decode()))
    # listed in ring order from start_rq_head
    h0 = num(kv["start_rq_head"]) & (cnt - 1)
    for slot in sorted(mem, key=lambda s: (s - h0) % cnt):
        out.append(("rqwqe", slot, mem[slot][0].hex()))
        out.append(("mask", slot, mem[slot][1].decode()))
    out.append(("kv", "out.touched_rq_wqes", str(len(mem))))
    return out


def render_out(o):
    if o[0] == "kv":
        return f"{o[1]}={o[2]}"
    return f"{o[0]} {o[1]} {o[2]}"


def file_out_lines(case):
    res = []
    for kind, k, *v in case["order"]:
        if kind == "kv":
            if k.startswith("out."):
                res.append(f"{k}={v[0]}")
        elif kind == "rqwqe":
            res.append(f"rqwqe {k} {case['wqes'][k]}")
        else:
            res.append(f"mask {k} {case['masks'][k]}")
    return res


def check(path):
    cases = parse(open(path).read())
    bad = 0
    for c in cases:
        want = file_out_lines(c)
        got = [render_out(o) for o in post_recv(c["kv"])]
        if want != got:
            bad += 1
            print(f"MISMATCH {c['name']}")
            for w, g in zip(want + [""] * 99, got + [""] * 99):
                if w != g:
                    print(f"  want {w!r}\n  got  {g!r}")
        else:
            print(f"ok {c['name']}")
    print(f"{len(cases) - bad}/{len(cases)} reproduced")
    return bad


def gen_case(rng, n):
    classes = ["basic", "zero_len", "too_many", "full", "wrap16", "wrap32", "nwr0",
               "small_max_post", "long_list", "states"]
    if os.environ.get("RQ_UNREACHABLE") == "1":
        classes.append("big_max_post")
    cls = rng.choice(classes)
    qp_type = rng.choice(["RC", "UC", "UD", "RAW_PACKET", "XRC_SEND"])
    state = rng.choice(["INIT", "RTR", "RTS"]) if cls != "states" else rng.choice(QP_STATES)
    if rng.random() < 0.08:
        state = rng.choice(QP_STATES)
    big = os.environ.get("RQ_BIG") == "1"  # rings to 65536 WQEs, strides to 2048 B
    shift = rng.randint(4, 11 if big else 9)
    max_gs = 1 << (shift - 4)
    cnt = 1 << rng.randint(0 if cls != "long_list" else 4, 16 if big else 8)
    max_post = cnt
    if cls == "small_max_post":
        max_post = rng.randint(0, cnt)
    if cls == "big_max_post":
        max_post = cnt * rng.randint(1, 4) + rng.randint(0, 3)
    outstanding = rng.randint(0, max(0, max_post - 1)) if max_post else 0
    if cls == "full":
        outstanding = rng.randint(max(0, max_post - 6), max_post + 1)
    head = rng.randint(0, 4 * cnt)
    if cls == "wrap16":
        head = 0x10000 - rng.randint(0, 40) + rng.choice([0, 0x10000, 0x50000])
    if cls == "wrap32":
        head = (1 << 32) - rng.randint(1, 40)
    tail = (head - outstanding) & M32
    if rng.random() < 0.02:
        tail = (head + rng.randint(1, 3)) & M32  # tail ahead of head: huge cur
    nwr = rng.randint(1, 8)
    if cls == "long_list":
        nwr = rng.randint(10, 40)
    if cls in ("full", "small_max_post", "wrap16", "wrap32"):
        nwr = rng.randint(1, 20)
    if cls == "nwr0":
        nwr = 0
    kv = [("api", "ibv_post_recv"), ("qp_type", qp_type), ("qp_state", state),
          ("qpn", f"0x{rng.randint(0, 0xFFFFFF):06x}"), ("rq_wqe_cnt", str(cnt)),
          ("rq_wqe_shift", str(shift)), ("rq_max_gs", str(max_gs)), ("rq_max_post", str(max_post)),
          ("start_rq_head", str(head)), ("start_rq_tail", str(tail)), ("wq_sig", "0"), ("nwr", str(nwr))]
    too_many_at = rng.randint(0, nwr - 1) if cls == "too_many" and nwr else -1
    for i in range(nwr):
        nsge = rng.randint(0, max_gs)
        if i == too_many_at or (cls != "too_many" and rng.random() < 0.02):
            nsge = max_gs + rng.randint(1, 3)
        kv.append((f"wr{i}.wr_id", f"0x{rng.getrandbits(64):016x}"))
        kv.append((f"wr{i}.num_sge", str(nsge)))
        for j in range(nsge):
            zl = 0.4 if cls == "zero_len" else 0.05
            ln = 0 if rng.random() < zl else rng.choice([rng.randint(1, 65536), rng.getrandbits(32) or 1, 0xFFFFFFFF, 1])
            kv.append((f"wr{i}.sge{j}.addr", f"0x{rng.getrandbits(64):016x}"))
            kv.append((f"wr{i}.sge{j}.length", str(ln)))
            kv.append((f"wr{i}.sge{j}.lkey", f"0x{rng.getrandbits(32):08x}"))
    d = dict(kv)
    lines = [f"case gen{n}_{cls}", f"note=class {cls}"] + [f"{k}={v}" for k, v in kv]
    lines += [render_out(o) for o in post_recv(d)]
    lines.append("end")
    return "\n".join(lines) + "\n"


def main():
    global RESET_MAXGS
    args = sys.argv[1:]
    if "--reset-maxgs" in args:
        RESET_MAXGS = True
        args.remove("--reset-maxgs")
    if args[0] == "check":
        sys.exit(1 if check(args[1]) else 0)
    if args[0] == "gen":
        rng = random.Random(int(args[2]))
        print("# generated by tests/refcheck/recv_ref.py (model of rdma-core v44.0 mlx5_post_recv)\n")
        for n in range(int(args[1])):
            print(gen_case(rng, n))


if __name__ == "__main__":
    main()
