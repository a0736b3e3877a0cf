//! The `mlx5dp encode wqe` command line, run as a process: every operation,
//! `--json` lines that parse, one golden vector end to end, malformed lines
//! that end with `line N: ...` and exit status 2, and no panic on random
//! input.

#![expect(
    clippy::unwrap_used,
    reason = "test helpers: a failed spawn or read is a test failure"
)]

use serde_json::Value;
use std::io::Write;
use std::process::{Command, Output, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_mlx5dp");

/// Runs `mlx5dp encode wqe args...` with `stdin` as standard input.
fn run(args: &[&str], stdin: &str) -> Output {
    run_sub("wqe", args, stdin)
}

/// `mlx5dp encode SUB ARGS` with `stdin` as its input.
fn run_sub(sub: &str, args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(BIN)
        .args(["encode", sub])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A process that exits before reading its input closes the pipe: fine.
    let _ = child.stdin.take().unwrap().write_all(stdin.as_bytes());
    child.wait_with_output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).unwrap()
}

/// Asserts success and returns the JSON objects printed, one per line.
fn json_lines(o: &Output) -> Vec<Value> {
    assert!(o.status.success(), "exit {:?}: {}", o.status, stderr(o));
    stdout(o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// Asserts the contract of every WQE and doorbell object.
fn assert_shapes(v: &[Value]) {
    for o in v {
        let obj = o.as_object().unwrap();
        if obj.contains_key("wqe_index") {
            let keys: Vec<&str> = obj.keys().map(String::as_str).collect();
            assert_eq!(keys, ["wqe_index", "wqebbs", "ds", "hex"], "{o}");
            let wqebbs = o["wqebbs"].as_u64().unwrap();
            let ds = o["ds"].as_u64().unwrap();
            assert!(
                (1..=16).contains(&wqebbs) && ds >= 1 && ds.div_ceil(4) == wqebbs,
                "{o}"
            );
            assert_eq!(o["hex"].as_str().unwrap().len() as u64, wqebbs * 128, "{o}");
        } else {
            assert!(o["dbrec"].is_u64(), "{o}");
            let m = &o["mmio"];
            let hex = m["hex"].as_str().unwrap();
            match m["kind"].as_str().unwrap() {
                "db" => assert_eq!(hex.len(), 16, "{o}"),
                "bf" => assert_eq!(hex.len() % 128, 0, "{o}"),
                k => panic!("kind {k}"),
            }
            assert!(m["offset"].as_u64().unwrap() >= 0x800, "{o}");
        }
    }
}

/// Asserts the bad-input contract: exit 2, one `mlx5dp: line N: ` line.
fn assert_bad_line(o: &Output, line: usize, what: &str) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(2), "{what}: {err}");
    assert_eq!(err.lines().count(), 1, "{what}: {err:?}");
    assert!(
        err.starts_with(&format!("mlx5dp: line {line}: ")),
        "{what}: {err:?}"
    );
    assert!(!err.contains("panicked"), "{what}: {err:?}");
}

/// [`assert_bad_line`] for a work request libmlx5 would refuse: the line's
/// message names the errno.
fn assert_refused(o: &Output, line: usize, errno: &str, what: &str) {
    assert_bad_line(o, line, what);
    let err = stderr(o);
    assert!(err.contains(&format!("({errno})")), "{what}: {err}");
}

const AV: &str = "000000000000000000000000030100120000000000000000000000000000000000000000000000000000000000000000";

/// Every operation on a QP type that takes it, as one batch each.
const OPS: &[(&str, &str)] = &[
    ("rc", "op=send flags=signaled sge=0x1000:64:1"),
    ("rc", "op=send_imm imm=0x11223344 sge=0x1000:64:1"),
    ("rc", "op=send_inv invalidate_rkey=0x55 sge=0x1000:64:1"),
    ("rc", "op=rdma_write raddr=0x9000 rkey=7 sge=0x1000:64:1"),
    ("uc", "op=rdma_write_imm imm=1 raddr=0x9000 rkey=7 sge=0x1000:64:1"),
    ("rc", "op=rdma_read raddr=0x9000 rkey=7 sge=0x1000:64:1"),
    ("rc", "op=atomic_cs raddr=0x9000 rkey=7 compare=1 swap_add=2 sge=0x1000:8:1"),
    ("rc", "op=atomic_fa raddr=0x9000 rkey=7 swap_add=5 sge=0x1000:8:1"),
    ("rc", "op=local_inv invalidate_rkey=0x1234"),
    ("rc", "op=nop flags=signaled"),
    ("xrc", "op=send xrc_srqn=0x77 sge=0x1000:64:1"),
    ("ud", "op=send remote_qpn=0xabc remote_qkey=0x11111111 av=AV inline=00112233"),
    ("raw", "op=tso mss=1460 hdr=00112233445502aabbccddee0800 sge=0x1000:3000:1"),
    ("raw", "op=raw_send flags=ip_csum sge=0x1000:64:1 mem=0x1000:00112233445502aabbccddee08004500000000"),
];

fn base(qp: &str) -> Vec<&str> {
    vec![
        "--qp",
        qp,
        "--qpn",
        "0x123",
        "--sq-wqebbs",
        "64",
        "--pi",
        "0",
        "--json",
    ]
}

#[test]
fn every_op_posts_one_wqe_and_one_doorbell() {
    for (qp, line) in OPS {
        let line = line.replace("AV", AV);
        let o = run(&base(qp), &line);
        let v = json_lines(&o);
        assert_eq!(v.len(), 2, "{line}: {v:?}");
        assert_shapes(&v);
        // The control segment carries the QPN and the WQE index 0.
        let hex = v[0]["hex"].as_str().unwrap();
        assert_eq!(&hex[..4], "0000", "{line}");
        assert_eq!(&hex[8..14], "000123", "{line}");
        assert_eq!(v[1]["dbrec"], v[0]["wqebbs"], "{line}");
    }
}

#[test]
fn human_output_and_json_agree() {
    let input = "op=send flags=signaled sge=0x200001000:256:0x1234\n";
    let mut args = base("rc");
    args.pop();
    let human = stdout(&run(&args, input));
    let v = json_lines(&run(&base("rc"), input));
    assert!(
        human.starts_with("wqe_index=0 wqebbs=1 ds=2\n  wqebb 0 "),
        "{human}"
    );
    assert!(human.contains(v[0]["hex"].as_str().unwrap()), "{human}");
    assert!(
        human.contains("dbrec=0x00000001 mmio=db offset=0x800 len=8"),
        "{human}"
    );
}

/// `rc_send_sge1_signaled` of specs/golden/libmlx5/wqe-cases.txt, through the
/// binary; and its inline twin, which libmlx5 rings with BlueFlame.
#[test]
fn golden_rc_send_through_the_binary() {
    let v = json_lines(&run(
        &base("rc"),
        "op=send wr_id=0x1000000000010001 flags=signaled sge=0x0000000200001000:256:0x00001234\n",
    ));
    assert_eq!(
        v[0]["hex"].as_str().unwrap()[..64],
        *"0000000a00012302000000080000000000000100000012340000000200001000"
    );
    assert_eq!(v[1]["dbrec"], 1);
    assert_eq!(v[1]["mmio"]["kind"], "db");
    assert_eq!(v[1]["mmio"]["offset"], 0x800);
    assert_eq!(v[1]["mmio"]["hex"], "0000000a00012302");

    let v = json_lines(&run(
        &base("rc"),
        "op=send flags=signaled,inline sge=0x10:16:1 mem=0x10:000102030405060708090a0b0c0d0e0f\n",
    ));
    assert_eq!(v[1]["mmio"]["kind"], "bf");
    assert_eq!(v[1]["mmio"]["hex"], v[0]["hex"]);
}

#[test]
fn batches_toggle_blueflame_halves_and_wrap() {
    let mut args = base("rc");
    args[7] = "65534";
    let input = "op=send sge=1:1:1\n\nop=send sge=1:1:1\nop=send sge=1:1:1\n\nop=nop\n";
    let v = json_lines(&run(&args, input));
    assert_shapes(&v);
    let idx: Vec<u64> = v.iter().filter_map(|o| o["wqe_index"].as_u64()).collect();
    assert_eq!(idx, [65534, 65535, 0, 1]);
    let offsets: Vec<u64> = v
        .iter()
        .filter_map(|o| o["mmio"]["offset"].as_u64())
        .collect();
    assert_eq!(offsets, [0x800, 0x900, 0x800]);
}

/// `--fm-cache`: the fence a QP taken over after a local invalidate (or
/// bind) hands its next WQE (libmlx5 `fm_cache`): the small-initiator fence
/// in the first WQE's `fm_ce_se`, spent by it (the second has none); a
/// value with bits outside the fence mode (7:5) is refused.
#[test]
fn fm_cache_option_fences_the_first_wqe() {
    let mut args = base("rc");
    args.extend(["--fm-cache", "0x20"]);
    let v = json_lines(&run(&args, "op=send sge=1:1:1\nop=send sge=1:1:1\n"));
    let fm: Vec<&str> = v
        .iter()
        .filter_map(|o| o["hex"].as_str())
        .map(|h| &h[22..24])
        .collect();
    assert_eq!(fm, ["20", "00"], "{v:?}");

    let mut args = base("rc");
    args.extend(["--fm-cache", "0x21"]);
    let o = run(&args, "op=nop\n");
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--fm-cache"), "{}", stderr(&o));
}

#[test]
fn refused_work_request_prints_what_was_posted_before_it() {
    let input = "op=send sge=1:1:1\nop=atomic_fa raddr=1 rkey=1 sge=1:8:1\n";
    let mut args = base("rc");
    args.push("--no-atomics");
    let o = run(&args, input);
    assert_bad_line(&o, 2, "atomics disabled");
    assert!(stderr(&o).contains("refused"), "{}", stderr(&o));
    let v: Vec<Value> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(v.len(), 2, "the first WQE and its doorbell");

    args.push("--abort-on-error");
    let o = run(&args, input);
    assert_bad_line(&o, 2, "abort");
    assert!(o.stdout.is_empty());
}

/// A numeric `op=` is the `ibv_wr_opcode`; one past `IBV_WR_DRIVER1` is
/// refused with EINVAL when its turn comes (after the work requests before
/// it are posted), before the queue test (`--max-post 1` would refuse the
/// second work request with ENOMEM otherwise), as libmlx5's
/// `_mlx5_post_send` tests the opcode first. An unknown name is still bad
/// input: nothing posted. `IBV_WR_DRIVER1` (11) itself is posted.
#[test]
fn an_opcode_past_driver1_is_refused_in_its_turn() {
    let v = json_lines(&run(&base("rc"), "op=2 sge=1:1:1\n"));
    let sent = json_lines(&run(&base("rc"), "op=send sge=1:1:1\n"));
    assert_eq!(v, sent, "op=2 is IBV_WR_SEND");

    let input = "op=send sge=1:1:1\nop=12 sge=1:1:1\nop=send sge=1:1:1\n";
    let mut args = base("rc");
    args.extend(["--max-post", "1"]);
    let o = run(&args, input);
    assert_refused(&o, 2, "EINVAL", "opcode 12");
    assert!(stderr(&o).contains("opcode 12"), "{}", stderr(&o));
    let v: Vec<Value> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(v.len(), 2, "the first WQE and its doorbell: {v:?}");

    let o = run(&base("rc"), "op=send sge=1:1:1\nop=bogus sge=1:1:1\n");
    assert_bad_line(&o, 2, "unknown name");
    assert!(o.stdout.is_empty());
    let by_number = json_lines(&run(&base("rc"), "op=8 mw_rkey=0x100 rkey=0x1ff\n"));
    let by_name = json_lines(&run(&base("rc"), "op=bind_mw mw_rkey=0x100 rkey=0x1ff\n"));
    assert_eq!(by_number, by_name, "op=8 is IBV_WR_BIND_MW");

    // IBV_WR_DRIVER1 (11) is posted as libmlx5 posts it: a send's segments
    // under the UMR opcode (0x25).
    let d1 = json_lines(&run(&base("rc"), "op=11 sge=1:1:1\n"));
    let by_name = json_lines(&run(&base("rc"), "op=driver1 sge=1:1:1\n"));
    assert_eq!(d1, by_name, "op=11 is IBV_WR_DRIVER1");
    let wqe = |v: &[Value]| v[0]["hex"].as_str().unwrap().to_string();
    let (d, s) = (wqe(&d1), wqe(&sent));
    assert_eq!(&d[6..8], "25", "UMR opcode: {d}");
    assert_eq!(&s[6..8], "0a", "SEND opcode: {s}");
    assert_eq!(
        (&d[..6], &d[8..]),
        (&s[..6], &s[8..]),
        "the rest is the send's"
    );
}

/// `op=bind_mw`: the UMR WQE of a memory-window bind (3 WQEBBs with its
/// KLM, 2 for an unbind), the window's rkey in the immediate, the range
/// and key in the KLM; the next WQE is fenced. A window over 2 GiB is
/// refused with EOPNOTSUPP after the work requests before it; a bad
/// `mw_type=`, `bind=` or `access=` is bad input; a UD QP refuses it.
#[test]
fn bind_mw_lines() {
    let input = "op=bind_mw wr_id=7 mw_rkey=0x11223344 rkey=0x556677a9 \
                 bind=0x7f0012345000:4096:0xbadcafe access=remote_read,remote_write\n\
                 op=bind_mw mw_rkey=0x11223344 rkey=0x55667700 mw_type=1\n\
                 op=send sge=1:1:1\n";
    let v = json_lines(&run(&base("rc"), input));
    assert_shapes(&v);
    let hex = |i: usize| v[i]["hex"].as_str().unwrap().to_string();
    assert_eq!(
        (v[0]["wqebbs"].as_u64(), v[0]["ds"].as_u64()),
        (Some(3), Some(12))
    );
    assert_eq!(
        (v[1]["wqebbs"].as_u64(), v[1]["ds"].as_u64()),
        (Some(2), Some(8))
    );
    let bind = hex(0);
    assert_eq!(&bind[6..8], "25", "UMR opcode");
    assert_eq!(&bind[24..32], "11223344", "imm: the window's rkey");
    assert_eq!(
        &bind[32..34],
        "b0",
        "inline, check free, translation offset"
    );
    // The mkey context: remote read and write, QPN 0x000123 and variant a9.
    assert_eq!(&bind[128 + 4..128 + 6], "30");
    assert_eq!(&bind[128 + 8..128 + 16], "000123a9");
    // The KLM: 4096 bytes of lkey 0x0badcafe at 0x7f0012345000.
    assert_eq!(&bind[256..288], "000010000badcafe00007f0012345000");
    let unbind = hex(1);
    assert_eq!(&unbind[32..34], "90", "type 1: inline, translation offset");
    assert_eq!(&unbind[128..130], "40", "free");
    assert_eq!(&unbind[128 + 8..128 + 16], "ffffff00");
    assert_eq!(&hex(2)[22..24], "20", "the send after the binds is fenced");

    let o = run(
        &base("rc"),
        "op=send sge=1:1:1\nop=bind_mw bind=0:0x80000001:1\n",
    );
    assert_refused(&o, 2, "EOPNOTSUPP", "a window over 2 GiB");
    assert_eq!(stdout(&o).lines().count(), 2, "the send and its doorbell");
    for bad in [
        "op=bind_mw mw_type=3",
        "op=bind_mw bind=1:2",
        "op=bind_mw access=remote_bogus",
    ] {
        let o = run(&base("rc"), &format!("{bad}\n"));
        assert_bad_line(&o, 1, bad);
        assert!(o.stdout.is_empty(), "{bad}");
    }
    let o = run(
        &base("ud"),
        &format!("op=bind_mw remote_qpn=1 av={}\n", "00".repeat(48)),
    );
    assert_refused(&o, 1, "EOPNOTSUPP or EINVAL", "bind_mw on a UD QP");
}

/// More SGEs than `--max-sge` are refused with ENOMEM (libmlx5's
/// `_mlx5_post_send` tests `num_sge` first), also with `flags=inline`,
/// where the bytes would be copied into the WQE, and before an opcode's own
/// checks (a TSO header over `--max-tso-header`, EINVAL otherwise).
#[test]
fn more_sges_than_max_sge_are_refused_first_even_inline() {
    let inline = "op=send flags=inline sge=0x2000:4:1 mem=0x2000:01020304 sge=0x3000:4:1 mem=0x3000:05060708\n";
    let mut args = base("rc");
    args.extend(["--max-sge", "1"]);
    let o = run(&args, inline);
    assert_refused(&o, 1, "ENOMEM", "inline, two SGEs, max 1");
    assert!(o.stdout.is_empty());
    let mut args = base("rc");
    args.extend(["--max-sge", "2"]);
    let o = run(&args, inline);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));

    let tso = "op=tso mss=100 hdr=00112233445502aabbccddee0800AABBCCDDEEFF00112233445566778899AABBCCDDEEFF00112233445566778899 sge=0x1000:300:1 sge=0x2000:300:1\n";
    let mut args = base("raw");
    args.extend(["--max-sge", "1", "--max-tso-header", "40"]);
    let o = run(&args, tso);
    assert_refused(&o, 1, "ENOMEM", "tso, header too long, two SGEs, max 1");
}

/// `vlan=`: on a raw queue that inlines the 18-byte L2 header (the
/// default, as libmlx5), the tag goes into the inline header after the MAC
/// addresses; the WQE grows by no DS. A QP type without Ethernet refuses it.
#[test]
fn vlan_key_tags_the_inline_header() {
    let frame = "mem=0x1000:00112233445502aabbccddee080045000000000000000000";
    let plain = run(
        &base("raw"),
        &format!("op=raw_send sge=0x1000:64:1 {frame}"),
    );
    let tagged = run(
        &base("raw"),
        &format!("op=raw_send sge=0x1000:64:1 vlan=0x0123 {frame}"),
    );
    let (p, t) = (json_lines(&plain), json_lines(&tagged));
    assert_shapes(&t);
    let (ph, th) = (p[0]["hex"].as_str().unwrap(), t[0]["hex"].as_str().unwrap());
    assert!(!ph.contains("8100"), "{ph}");
    assert!(th.contains("02aabbccddee81000123"), "{th}");
    assert_eq!(p[0]["ds"], t[0]["ds"]);

    let o = run(&base("rc"), "op=send sge=0x1000:64:1 vlan=5");
    assert_bad_line(&o, 1, "");
}

#[test]
fn malformed_lines_are_line_numbered_exit_2() {
    let cases: &[(&str, usize)] = &[
        ("op=send foo=1", 1),
        ("op=send\nop=frobnicate", 2),
        ("op=send\n\n# c\nsge=1:1:1", 4),
        ("op=send sge=1:2", 1),
        ("op=send sge=1:2:3:4", 1),
        ("op=send wr_id=0x", 1),
        ("op=send imm=0x100000000", 1),
        ("op=send flags=signalled", 1),
        ("op=send inline=abc", 1),
        ("op=send av=0011", 1),
        ("op=send op=send", 1),
        ("op=send novalue", 1),
        ("op=send flags=inline sge=0x10:4:1 mem=0x10:0011", 1),
        ("op=send inline=00 sge=1:1:1", 1),
        ("op=raw_send sge=1:1:1", 1),
        ("\n\nop=atomic_fa compare=1 swap_add=2", 3),
    ];
    for (input, line) in cases {
        let o = run(&base("rc"), input);
        assert_bad_line(&o, *line, input);
        assert!(o.stdout.is_empty(), "{input}");
    }
    // Raw sends need their header bytes.
    let o = run(&base("raw"), "op=send sge=0x1000:64:1");
    assert_bad_line(&o, 1, "raw without mem");
}

#[test]
fn bad_options_exit_2() {
    for args in [
        vec!["--qp", "rc", "--qpn", "1", "--sq-wqebbs", "48", "--pi", "0"],
        vec![
            "--qp",
            "rc",
            "--qpn",
            "0x1000000",
            "--sq-wqebbs",
            "64",
            "--pi",
            "0",
        ],
        vec![
            "--qp",
            "rc",
            "--qpn",
            "1",
            "--sq-wqebbs",
            "64",
            "--pi",
            "0",
            "--bf-offset",
            "64",
        ],
        vec![
            "--qp",
            "rc",
            "--qpn",
            "1",
            "--sq-wqebbs",
            "64",
            "--pi",
            "0",
            "--bf-size",
            "100",
        ],
        vec![
            "--qp",
            "rc",
            "--qpn",
            "1",
            "--sq-wqebbs",
            "64",
            "--pi",
            "0",
            "--bf-reg",
            "0xf00",
        ],
        vec!["--qp", "rc", "--qpn", "1", "--sq-wqebbs", "64", "--pi", "x"],
        vec!["--qp", "ib", "--qpn", "1", "--sq-wqebbs", "64", "--pi", "0"],
    ] {
        let o = run(&args, "op=nop\n");
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(!stderr(&o).contains("panicked"));
    }
}

#[test]
fn file_argument_and_dash() {
    let dir = std::env::temp_dir().join(format!("mlx5dp-encode-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("wrs.txt");
    std::fs::write(&path, "op=nop\n").unwrap();
    let mut args = base("rc");
    let p = path.to_str().unwrap().to_string();
    args.push(&p);
    let from_file = stdout(&run(&args, ""));
    args.pop();
    args.push("-");
    let from_dash = stdout(&run(&args, "op=nop\n"));
    assert_eq!(from_file, from_dash);
    assert!(!from_file.is_empty());
    let _ = std::fs::remove_dir_all(&dir);
    let mut missing = base("rc");
    missing.push("/nonexistent/mlx5dp/wrs.txt");
    assert_eq!(run(&missing, "").status.code(), Some(1));
}

/// A small xorshift generator: deterministic, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[(self.next() % xs.len() as u64) as usize]
    }
}

/// Random lines built from real keys and awkward values: the command must
/// always exit 0 or 2 with a one-line message, never panic.
#[test]
fn random_input_never_panics() {
    let ops = [
        "send",
        "send_imm",
        "send_inv",
        "rdma_write",
        "rdma_write_imm",
        "rdma_read",
        "atomic_cs",
        "atomic_fa",
        "local_inv",
        "nop",
        "tso",
        "raw_send",
        "bogus",
    ];
    let keys = [
        "wr_id",
        "flags",
        "imm",
        "invalidate_rkey",
        "raddr",
        "rkey",
        "compare",
        "swap_add",
        "sge",
        "inline",
        "mem",
        "remote_qpn",
        "remote_qkey",
        "av",
        "xrc_srqn",
        "mss",
        "hdr",
        "zz",
    ];
    let values = [
        "0",
        "1",
        "0xffffffff",
        "0xffffffffffffffff",
        "18446744073709551616",
        "-1",
        "",
        "x",
        "signaled,inline",
        "inline,ip_csum,fence",
        "0x10:64:1",
        "0x10:4294967295:1",
        "0xffffffffffffffff:64:1",
        "0x10:0011223344",
        "0x10:",
        "00",
        AV,
        "001122",
        "00112233445502aabbccddee0800450000000000000000000000000000",
        "0x10:300:1",
    ];
    let qps = ["rc", "uc", "ud", "xrc", "raw"];
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for round in 0..200 {
        let mut input = String::new();
        for _ in 0..(rng.next() % 6) {
            if rng.next() % 5 == 0 {
                input.push('\n');
            }
            input.push_str(&format!("op={}", rng.pick(&ops)));
            for _ in 0..(rng.next() % 6) {
                input.push_str(&format!(" {}={}", rng.pick(&keys), rng.pick(&values)));
            }
            input.push('\n');
        }
        let qp = rng.pick(&qps);
        let wqebbs = ["1", "2", "16", "64"][(rng.next() % 4) as usize];
        let pi = ["0", "63", "65535", "4294967295"][(rng.next() % 4) as usize];
        let mut args = vec!["--qp", qp, "--qpn", "1", "--sq-wqebbs", wqebbs, "--pi", pi];
        if rng.next() % 2 == 0 {
            args.push("--json");
        }
        if rng.next() % 3 == 0 {
            args.extend(["--max-inline", "0", "--prefer-bf", "--max-post", "2"]);
        }
        let o = run(&args, &input);
        let code = o.status.code();
        assert!(
            code == Some(0) || code == Some(2),
            "round {round}: {args:?} {input:?}: {code:?} {}",
            stderr(&o)
        );
        assert!(
            !stderr(&o).contains("panicked"),
            "{input:?}: {}",
            stderr(&o)
        );
        if code == Some(2) {
            assert_eq!(stderr(&o).lines().count(), 1, "{input:?}: {}", stderr(&o));
        }
        if args.contains(&"--json") {
            for l in stdout(&o).lines() {
                let v: Value = serde_json::from_str(l).unwrap();
                assert_shapes(&[v]);
            }
        }
    }
    // Raw bytes that are not text.
    let o = run(&base("rc"), "\u{0}\u{1}op=send");
    assert_eq!(o.status.code(), Some(2));
}

/// `encode recv`: libmlx5's `mlx5_post_recv` refusals, after the work
/// requests before the refused one in its batch were posted (and the
/// record updated for them): ENOMEM at --max-post outstanding, EINVAL with
/// more SGEs than the stride holds (zero-length ones included); a
/// zero-length SGE is skipped and the terminator follows the others.
#[test]
fn encode_recv_refusals_and_terminator() {
    let o = run_sub("recv", 
        &["--rq-wqes", "8", "--wqe-shift", "5", "--max-post", "2", "--json"],
        "wr_id=1 sge=0x1000:0:1 sge=0x2000:64:2\nwr_id=2 sge=0x3000:64:3\nwr_id=3 sge=0x4000:64:4\n",
    );
    assert_refused(&o, 3, "ENOMEM", "max-post");
    let v: Vec<Value> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(v.len(), 3, "two WQEs and the record: {v:?}");
    assert_eq!(
        v[0]["hex"], "0000004000000002000000000000200000000000000001000000000000000000",
        "the zero-length SGE skipped, then the terminator"
    );
    assert_eq!(v[2]["dbrec"], 2);

    let o = run_sub(
        "recv",
        &["--rq-wqes", "8", "--wqe-shift", "4"],
        "wr_id=1 sge=0x1000:0:1 sge=0x2000:64:2\n",
    );
    assert_refused(&o, 1, "EINVAL", "two SGEs in a 16-byte WQE");
    assert!(o.stdout.is_empty());
}

/// `encode recv` on the QP states libmlx5 treats apart (rdma-core v44.0):
/// in RESET `rq.qp_state_max_gs` is -1 (verbs.c
/// `set_qp_operational_state`), so `mlx5_post_recv` refuses the first work
/// request with EINVAL, even without SGEs, and writes nothing, unless its
/// ENOMEM test comes first; SQD, SQE and ERR post as RTS does, and a raw
/// Ethernet QP there updates the record (the state is not before RTR).
/// `--max-post 0` and more outstanding than `--max-post` are ENOMEM at the
/// first work request (`mlx5_wq_overflow`), not bad options.
#[test]
fn encode_recv_qp_states_and_overfull_queue() {
    for qp in ["rc", "raw"] {
        let o = run_sub(
            "recv",
            &[
                "--qp",
                qp,
                "--state",
                "reset",
                "--rq-wqes",
                "8",
                "--wqe-shift",
                "5",
            ],
            "wr_id=1 sge=0x1000:64:1\nwr_id=2\n",
        );
        assert_refused(&o, 1, "EINVAL", "RESET");
        assert!(o.stdout.is_empty(), "{}", stdout(&o));
    }
    let o = run_sub(
        "recv",
        &[
            "--state",
            "reset",
            "--rq-wqes",
            "8",
            "--wqe-shift",
            "5",
            "--outstanding",
            "8",
        ],
        "wr_id=2\n",
    );
    assert_refused(&o, 1, "ENOMEM", "RESET and full");
    for state in ["sqd", "sqe", "err"] {
        for (qp, want) in [("rc", "1"), ("raw", "1"), ("ud", "1")] {
            let o = run_sub(
                "recv",
                &[
                    "--qp",
                    qp,
                    "--state",
                    state,
                    "--rq-wqes",
                    "8",
                    "--wqe-shift",
                    "4",
                    "--json",
                ],
                "wr_id=1 sge=0x1000:64:1\n",
            );
            assert_eq!(o.status.code(), Some(0), "{qp} {state}: {}", stderr(&o));
            let v: Vec<Value> = stdout(&o)
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
            assert_eq!(
                v[0]["hex"], "00000040000000010000000000001000",
                "{qp} {state}"
            );
            assert_eq!(v[1]["dbrec"].to_string(), want, "{qp} {state}");
        }
    }
    for args in [
        &["--max-post", "0"][..],
        &["--max-post", "2", "--outstanding", "3"],
        &["--outstanding", "0xffffffff", "--head", "5"],
    ] {
        let mut a = vec!["--rq-wqes", "4", "--wqe-shift", "4"];
        a.extend_from_slice(args);
        let o = run_sub("recv", &a, "wr_id=1 sge=0x1000:64:1\n");
        assert_refused(&o, 1, "ENOMEM", &format!("{args:?}"));
        assert!(o.stdout.is_empty(), "{args:?}: {}", stdout(&o));
    }
}
