#!/usr/bin/env python3
"""Check the `mlx5dp decode wqe --json` output (stdin) of one WQE the UCX
harness dumped (`harness SCENARIO dump`: the first WQE of a fresh queue)
against the work request the scenario posted (harness.c constants)."""
import json
import sys

scen = sys.argv[1]
d = json.load(sys.stdin)
short = scen.startswith("put_short")
want = dict(qp_type="rc", opcode="rdma_write", opmod=0, wqe_index=0, qpn=0xA1B,
            ds=5 if short else 3, wqebbs=2 if short else 1, signature=0,
            dci_stream_channel_id=0, fm="none", se=False, imm=0,
            # put_zcopy: always CQ_UPDATE; put_short: the first WQE is
            # unsignalled (tx_moderation)
            ce="only_err" if short else "always")
bad = ["%s=%r (want %r)" % (k, d.get(k), v) for k, v in want.items() if d.get(k) != v]
seg = d["segments"]
if seg[0] != dict(type="raddr", offset=16, size=16, raddr=0x7F0000001000,
                  rkey=0x5678, reserved=0):
    bad.append("raddr segment %r" % seg[0])
if short:
    data = bytes((r + 1) & 0xFF for r in range(32)).hex()  # short_bufs[0]
    if (len(seg) != 2 or seg[1].get("type") != "inline"
            or seg[1].get("byte_count") != 32 or seg[1].get("data") != data):
        bad.append("inline segment %r" % seg[1:])
else:
    if len(seg) != 2 or seg[1] != dict(type="data", offset=32, size=16,
                                       byte_count=64, lkey=0x1234, addr=0x10000000):
        bad.append("data segment %r" % seg[1:])
if d.get("warnings"):
    bad.append("warnings %r" % d["warnings"])
if bad:
    print("  decode wqe: MISMATCH " + "; ".join(bad))
    sys.exit(1)
print("  decode wqe (%d WQEBB, ds %d, %s, ce %s, segments %s): fields as intended, decode=OK"
      % (d["wqebbs"], d["ds"], d["opcode"], d["ce"], "+".join(s["type"] for s in seg)))
