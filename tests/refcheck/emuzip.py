#!/usr/bin/env python3
"""The emulated device's CQE compression against the independent reference.

usage: python3 emuzip.py DUMP [--tool PATH/TO/mlx5dp] [--tool-every N] [--only SUBSTR]
       [--max-report K]
       python3 emuzip.py --traces hw-traces/emulated

DUMP is the JSON Lines file (each record the slots changed since the stream's previous one) written by the Rust test
`setup/tests/emu_zip_dump.rs` (MLX5DP_EMUZIP_OUT=DUMP cargo test -p
mlx5dp-setup --test emu_zip_dump): one record per ring state the emulated
CQ left, with the consumer index to poll from, where the device stopped
writing (pi) and the completions it meant (its CqTrace), each at its
consumer index.

Every ring is polled with ref.poll from the consumer index (on the
enhanced layout with the title the consumer kept from its previous polls,
its running counter patched in, as the kernel's cqd state and UCX's
title_cqe carry it). Every field the reference produces is compared with
the meant completion: the meant CQE with the pass's owner bit and, for a
completion a mini carries, the fields no mini format carries taken from its
title (timestamp; hash unless the format carries it; checksum unless it
carries it) and, as the kernel's mlx5e_decompress_cqe rebuilds op_own, the
solicited bit cleared. Polling must end exactly at pi, without an error.

With --tool, `mlx5dp decode cq --json` decodes the same ring from the
same consumer index (an enhanced ring that starts at a compressed CQE is
decoded from there when its title is still in the ring: the tool finds it
before --ci; such rings are skipped otherwise) and is compared with
the same expectations (every N-th ring with --tool-every N).

With --traces DIR (e.g. hw-traces/emulated) it checks instead every
`cqe_session` record the emulated device recorded (through its whole
engine: QPs, SQ/RQ/SRQ/striding RQ, see hw-traces/README.md): the
session's slots are put back into a ring whose other slots hold the
initial pattern (op_own 0xF0, validity 0xFF), ref.poll runs from the
record's ci, and every `cN.*` expect value the device wrote is compared
with the reference's completion N; polling must stop right after the
session (N completions, the session's slots).

Exit status 1 if anything differs.
"""
import json, subprocess, sys, os
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ref

CMP_KEYS = ["slot", "compressed", "owner", "se", "format_raw", "opcode_raw", "wqe_counter", "byte_cnt",
            "qpn", "sop_drop_qpn", "timestamp", "vlan_info", "srqn_uidx", "imm_inval_pkey", "wqe_id",
            "hds_ip_ext", "l4_l3_hdr_type", "l3_hdr_type_raw", "l4_hdr_type_raw", "ip_frag",
            "cvlan_stripped", "rx_hash", "rss_hash_result", "checksum", "flow_tag", "syndrome",
            "vendor_syndrome", "hw_syndrome", "hw_syndrome_type", "stride_idx", "strides",
            "mprq_byte_cnt"]


def arg(name, default=None):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


def is_filler(m, striding):
    """A striding-RQ filler (byte_cnt bit 31): consumed, no line (ref.SKIP_FILLER)."""
    c = bytes.fromhex(m["cqe"])
    return ref.is_filler(c, striding and not m["req"])


def expected(m, fmt, striding, mask, log):
    """The fields a correct decompressor must produce for meant completion m."""
    c = bytearray(bytes.fromhex(m["cqe"]))
    ci = m["ci"]
    c[63] = (c[63] & 0xF2) | ((ci >> log) & 1)        # pass owner, format 0
    if m["compressed"]:
        t = bytes.fromhex(m["inherit"])              # title bytes 12..16, 20..22, 48..56
        c[48:56] = t[6:14]                           # minis inherit the timestamp
        mf = "req" if m["req"] else fmt
        if mf != "hash":
            c[12:16] = t[0:4]
        if mf not in ("csum", "csum-stridx"):
            c[20:22] = t[4:6]
        if ref.KERNEL_OWNER:
            c[63] &= 0xF1                            # kernel: op_own &= 0xf0 | parity
    return ref.fields(bytes(c), striding, m["compressed"], ci & mask)


def cmp_lines(got, want, keys_of_got):
    diffs = []
    if len(got) != len(want):
        diffs.append(("count", len(want), len(got)))
    for i, (g, w) in enumerate(zip(got, want)):
        for k in CMP_KEYS:
            if k in g and k in w and g[k] != w[k]:
                diffs.append((i, k, w[k], g[k]))
            elif k in w and k not in g and keys_of_got and k in ("stride_idx", "strides", "syndrome"):
                diffs.append((i, k, w[k], "<missing>"))
        if diffs:
            break
    return diffs


def run_tool(tool, ring, rec, ci):
    args = [tool, "decode", "cq", "--cqe-size", str(rec["cqe_size"]), "--cqe-cnt", str(rec["cnt"]),
            "--ci", str(ci), "--layout", rec["layout"], "--mini-format", rec["fmt"], "--json"]
    if rec["striding"] and rec["fmt"] in ("hash", "csum", "req"):
        args.append("--striding-rq")
    args.append("-")
    p = subprocess.run(args, input=ring.hex(), capture_output=True, text=True)
    lines = [json.loads(l) for l in p.stdout.splitlines() if l.strip()]
    comps = [l for l in lines if list(l.keys()) != ["ci"]]
    fin = [l["ci"] for l in lines if list(l.keys()) == ["ci"]]
    return comps, (fin[0] if fin else None), (p.stderr.strip() if p.returncode else None), args


# expect key of a recorded session -> how to read it from a ref completion
TRACE_KEYS = {
    "compressed": lambda d: d["compressed"],
    "opcode_raw": lambda d: d["opcode_raw"],
    "qpn": lambda d: d["qpn"],
    "wqe_counter": lambda d: d["wqe_counter"],
    "byte_cnt": lambda d: d["byte_cnt"],
    "send_opcode_raw": lambda d: d["sop_drop_qpn"] >> 24,
    "rss_hash_result": lambda d: d["rss_hash_result"],
    "check_sum": lambda d: d["checksum"],
}


def parse_records(path):
    rec = None
    for line in open(path):
        line = line.rstrip("\n")
        if not line.strip():
            if rec:
                yield rec
            rec = None
            continue
        if rec is None:
            rec = {"params": {}, "hex": []}
        if line.startswith("# "):
            k, _, v = line[2:].partition(": ")
            rec["params"].setdefault(k, v)
        elif not line.startswith("#"):
            rec["hex"].append(line)
    if rec:
        yield rec


def check_traces(d):
    import glob
    n_rec = n_comp = bad = 0
    unknown = set()
    for path in sorted(glob.glob(os.path.join(d, "*.txt"))):
        for rec in parse_records(path):
            pr = rec["params"]
            if pr.get("kind") != "cqe_session":
                continue
            n_rec += 1
            size, cnt, ci = int(pr["cqe-size"]), int(pr["ring-size"]), int(pr["ci"])
            layout, fmt = pr["layout"], pr["mini-format"]
            striding = pr["striding-rq"] == "true" or fmt in ref.STRIDX_FORMATS
            body = bytes.fromhex("".join(rec["hex"]).replace(" ", ""))
            ring = bytearray(size * cnt)
            for k in range(cnt):
                ring[k * size + size - 2] = 0xFF
                ring[k * size + size - 1] = 0xF0
            nslots = len(body) // size
            for k in range(nslots):
                at = ((ci + k) % cnt) * size
                ring[at:at + size] = body[k * size:(k + 1) * size]
            exp = dict(kv.split("=", 1) for kv in pr["expect"].split())
            want_n = int(exp["completions"])
            out, rci, err = ref.poll(bytes(ring), size, cnt, ci, layout, fmt, striding)
            diffs = []
            if err:
                diffs.append(("error", err))
            if len(out) != want_n:
                diffs.append(("count", want_n, len(out)))
            if rci != ci + nslots:
                diffs.append(("ci", ci + nslots, rci))
            for key, v in exp.items():
                if key == "completions":
                    continue
                i, _, f = key.partition(".")
                i = int(i[1:])
                if f not in TRACE_KEYS:
                    unknown.add(f)
                    continue
                if i >= len(out):
                    continue
                want = v == "true" if v in ("true", "false") else int(v, 0)
                got = TRACE_KEYS[f](out[i])
                if got != want:
                    diffs.append((i, f, want, got))
            n_comp += want_n
            if diffs:
                bad += 1
                print("TRACE-DIFF", path, pr.get("source", "")[:40], diffs[:4])
    print("trace sessions %d completions %d differ %d%s" % (
        n_rec, n_comp, bad, (" (keys not compared: %s)" % sorted(unknown)) if unknown else ""))
    return bad


def main():
    if "--traces" in sys.argv:
        sys.exit(1 if check_traces(arg("--traces")) else 0)
    path = sys.argv[1]
    tool = arg("--tool", os.environ.get("MLX5DP"))
    every = int(arg("--tool-every", "1"))
    only = arg("--only")
    max_report = int(arg("--max-report", "3"))
    state = {}          # stream -> consumer state for the enhanced layout
    rings = {}          # stream -> ring bytes (records carry the changed slots)
    stats = {}
    kinds = {}
    n_rec = 0
    tool_runs = tool_skipped = 0
    for line in open(path):
        rec = json.loads(line)
        name = rec["stream"]
        if only and only not in name:
            continue
        n_rec += 1
        size, cnt, layout, fmt = rec["cqe_size"], rec["cnt"], rec["layout"], rec["fmt"]
        striding = rec["striding"] or fmt in ref.STRIDX_FORMATS
        log = cnt.bit_length() - 1
        mask = cnt - 1
        if name not in rings:
            rings[name] = bytearray(size * cnt)
        buf = rings[name]
        for k, h in rec["slots"]:
            buf[k * size:(k + 1) * size] = bytes.fromhex(h)
        ring = bytes(buf)
        ci, pi = rec["ci"], rec["pi"]
        meant = rec["meant"]
        st = stats.setdefault(name, {"rings": 0, "ref_ok": 0, "tool_ok": 0, "tool": 0, "completions": 0, "fillers": 0})
        st["rings"] += 1
        # --- the reference, from the consumer index, with the consumer's title
        s = state.setdefault(name, {"title": None})
        title = None
        if layout == "enhanced" and s["title"] is not None:
            title = bytearray(s["title"])
            if s.get("last") is not None and (title[63] >> 4) != 0:
                wc, bc = s["last"]
                title[60:62] = wc.to_bytes(2, "big")
                title[44:48] = bc.to_bytes(4, "big")
            title = bytes(title)
        rout, rci, rerr = ref.poll(ring, size, cnt, ci, layout, fmt, striding, enh_title=title)
        want = [expected(m, fmt, striding, mask, log) for m in meant
                if (m["ci"] - ci) & 0xFFFFFFFF < (pi - ci) & 0xFFFFFFFF and not is_filler(m, striding)]
        fillers = sum(1 for m in meant if (m["ci"] - ci) & 0xFFFFFFFF < (pi - ci) & 0xFFFFFFFF
                      and is_filler(m, striding))
        st["fillers"] += fillers
        st["completions"] += len(want)
        diffs = []
        if rerr:
            diffs.append(("error", rerr))
        if rci & 0xFFFFFFFF != pi:
            diffs.append(("ci", pi, rci))
        diffs += cmp_lines(rout, want, True)
        if diffs:
            key = (name.split("-n")[0], "ref", str(diffs[0][:2]) if diffs[0][0] not in ("error",) else "error")
            kinds[key] = kinds.get(key, 0) + 1
            if kinds[key] <= max_report:
                print("REF-DIFF", name, "ci", ci, "pi", pi, diffs[:4])
        else:
            st["ref_ok"] += 1
        # consumer state: the last regular CQE polled becomes the title; the
        # running counter continues from the last line after it
        if layout == "enhanced":
            for d in rout:
                if not d["compressed"]:
                    s["title"] = ref.cqe64(ring, size, d["slot"])
                    s["last"] = None
                else:
                    s["last"] = (d["wqe_counter"], d["byte_cnt"])
        # --- the tool
        if tool and (n_rec % every == 0):
            start = ci
            if layout == "enhanced":
                c = ref.cqe64(ring, size, ci & mask)
                if pi != ci and (c[63] >> 2) & 3 == 3:
                    # decode cq finds the title before --ci in the ring
                    # itself (the consumer polled it already)
                    t = rec["enh_title_ci"]
                    start = ci if (t is not None and (pi - t) & 0xFFFFFFFF <= cnt) else None
            if start is None:
                tool_skipped += 1
            else:
                tool_runs += 1
                st["tool"] += 1
                tout, tci, terr, args = run_tool(tool, ring, rec, start)
                twant = [expected(m, fmt, striding, mask, log) for m in meant
                         if (m["ci"] - start) & 0xFFFFFFFF < (pi - start) & 0xFFFFFFFF
                         and not is_filler(m, striding)]
                tdiffs = []
                if terr:
                    tdiffs.append(("error", terr))
                if tci != pi:
                    tdiffs.append(("ci", pi, tci))
                tdiffs += cmp_lines(tout, twant, True)
                if tdiffs:
                    key = (name.split("-n")[0], "tool", str(tdiffs[0][:2]) if tdiffs[0][0] != "error" else "error")
                    kinds[key] = kinds.get(key, 0) + 1
                    if kinds[key] <= max_report:
                        print("TOOL-DIFF", name, "start", start, "pi", pi, tdiffs[:4], " ".join(args))
                else:
                    st["tool_ok"] += 1
    agg = {}
    for name, st in stats.items():
        k = name.split("-n")[0]
        a = agg.setdefault(k, {"rings": 0, "ref_ok": 0, "tool": 0, "tool_ok": 0, "completions": 0, "fillers": 0})
        for f in a:
            a[f] += st[f]
    for k, a in sorted(agg.items()):
        print("CFG %-40s rings %5d lines %7d fillers %4d ref-agree %5d tool-run %5d tool-agree %5d"
              % (k, a["rings"], a["completions"], a["fillers"], a["ref_ok"], a["tool"], a["tool_ok"]))
    print("KINDS")
    for k, v in sorted(kinds.items()):
        print(k, v)
    tot = sum(a["rings"] for a in agg.values())
    ref_bad = sum(a["rings"] - a["ref_ok"] for a in agg.values())
    tool_bad = sum(a["tool"] - a["tool_ok"] for a in agg.values())
    comps = sum(a["completions"] for a in agg.values())
    fills = sum(a["fillers"] for a in agg.values())
    print("rings %d lines %d fillers %d ref-differ %d tool-run %d tool-skipped %d tool-differ %d"
          % (tot, comps, fills, ref_bad, tool_runs, tool_skipped, tool_bad))
    if ref_bad or tool_bad:
        sys.exit(1)


if __name__ == "__main__":
    main()
