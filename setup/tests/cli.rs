//! The `mlx5dp decode` command line, run as a process: every input style,
//! `--json` output that parses and carries the required keys, and bad input
//! that ends with exit status 2 and a one-line message.

#![expect(
    clippy::unwrap_used,
    reason = "test helpers: a failed read or spawn is a test failure"
)]

use mlx5dp_setup::decode::hex_string;
use mlx5dp_setup::decode::published::{CQE_KEYS, ERR_CQE_KEYS};
use mlx5dp_setup::decode::trace::{parse_records, TraceRecord};
use mlx5dp_setup::hexdump;
use serde_json::Value;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_mlx5dp");

/// Runs `mlx5dp args...` with `stdin` as standard input.
fn run(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(BIN)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A process that exits before reading its input closes the pipe: fine.
    let _ = child.stdin.take().unwrap().write_all(stdin);
    child.wait_with_output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).unwrap()
}

/// Asserts success and returns the JSON printed.
fn json(o: &Output) -> Value {
    assert!(o.status.success(), "exit {:?}: {}", o.status, stderr(o));
    serde_json::from_str(&stdout(o)).unwrap_or_else(|e| panic!("{e}: {}", stdout(o)))
}

/// Asserts the bad-input contract: exit status 2, one line on stderr, no panic.
fn assert_bad_input(o: &Output, what: &str) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(2), "{what}: {err}");
    assert_eq!(err.lines().count(), 1, "{what}: {err:?}");
    assert!(err.starts_with("mlx5dp: "), "{what}: {err:?}");
    assert!(!err.contains("panicked"), "{what}: {err:?}");
    assert!(o.stdout.is_empty(), "{what}");
}

/// The files of `hw-traces/captured/`, sorted.
fn captured_files() -> Vec<std::path::PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../hw-traces/captured");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .collect();
    files.sort();
    files
}

fn captured() -> Vec<TraceRecord> {
    captured_files()
        .iter()
        .flat_map(|f| parse_records(&std::fs::read_to_string(f).unwrap()).unwrap())
        .collect()
}

/// The `decode` arguments for a record: subcommand and options.
fn decode_args(rec: &TraceRecord) -> Vec<String> {
    let mut args = vec!["decode".to_string()];
    if rec.kind == "wqe" {
        args.push("wqe".into());
        if let Some(qp) = &rec.qp {
            args.extend(["--qp".into(), qp.clone()]);
        }
    } else {
        args.push("cqe".into());
    }
    args.push("--json".into());
    args
}

/// `text` in the quoted-printable transfer encoding (RFC 2045 §6.7) as a
/// mailer writes it: `=` escaped, every line cut into pieces of at most 75
/// characters joined by soft line breaks (`=` at the end of a line).
fn quoted_printable(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        let escaped = line.replace('=', "=3D");
        let mut piece = String::new();
        let mut chars = escaped.chars().peekable();
        while let Some(c) = chars.next() {
            // An escape stays whole on one line.
            let unit: String = if c == '=' {
                [c, chars.next().unwrap(), chars.next().unwrap()]
                    .iter()
                    .collect()
            } else {
                c.to_string()
            };
            if piece.len() + unit.len() > 75 {
                out.push_str(&piece);
                out.push_str("=\n");
                piece.clear();
            }
            piece.push_str(&unit);
        }
        out.push_str(&piece);
        out.push('\n');
    }
    out
}

#[test]
fn every_captured_record_in_every_input_style() {
    let recs = captured();
    assert!(recs.len() >= 15, "only {} records", recs.len());
    for rec in &recs {
        let reference = rec.decode().unwrap().to_json();
        let args = decode_args(rec);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();

        // Plain hex as arguments, one byte per argument.
        let bytes: Vec<String> = rec.bytes.iter().map(|b| format!("{b:02x}")).collect();
        let mut with_bytes = args.clone();
        with_bytes.extend(bytes.iter().map(String::as_str));
        let j = json(&run(&with_bytes, b""));
        assert_eq!(j, reference, "[{}] plain hex arguments", rec.id);

        // One unbroken hex string as a single argument.
        let one = hex_string(&rec.bytes);
        let mut with_one = args.clone();
        with_one.push(&one);
        assert_eq!(
            json(&run(&with_one, b"")),
            reference,
            "[{}] one string",
            rec.id
        );

        // Kernel print_hex_dump lines with a dmesg prefix and ASCII column, on stdin.
        let dmesg = hexdump::to_print_hex_dump(
            &rec.bytes,
            "[ 8410.417062] mlx5_core 0000:3b:00.1 eth1: ",
            true,
        );
        assert_eq!(
            json(&run(&args, dmesg.as_bytes())),
            reference,
            "[{}] print_hex_dump",
            rec.id
        );

        // The same lines as a raw message from a mail archive holds them:
        // quoted-printable, lines broken at 76 characters.
        assert_eq!(
            json(&run(&args, quoted_printable(&dmesg).as_bytes())),
            reference,
            "[{}] print_hex_dump, quoted-printable",
            rec.id
        );

        // rdma-core word dump, on stdin through `-`.
        let mut with_dash = args.clone();
        with_dash.push("-");
        let words = hexdump::to_word_dump(&rec.bytes);
        assert_eq!(
            json(&run(&with_dash, words.as_bytes())),
            reference,
            "[{}] word dump",
            rec.id
        );

        // The same rows as they are logged: libmlx5's header line before
        // them, a `dmesg -H` stamp on each, the application's line after.
        let logged = format!(
            "mlx5: node-01: got completion with error:\n{}[  +0.000005] app: CQ error (10): remote access error\n",
            words
                .lines()
                .map(|l| format!("[  +0.000001] {l}\n"))
                .collect::<String>()
        );
        assert_eq!(
            json(&run(&args, logged.as_bytes())),
            reference,
            "[{}] logged word dump",
            rec.id
        );

        if rec.kind != "wqe" {
            for key in CQE_KEYS {
                assert!(reference.get(*key).is_some(), "[{}] {key}", rec.id);
            }
            if rec.expects_error_cqe() {
                for key in ERR_CQE_KEYS {
                    assert!(reference.get(*key).is_some(), "[{}] {key}", rec.id);
                }
            }
        }
    }
}

/// openucx/ucx#1770 as the issue shows it: a CI timestamp on every line,
/// libmlx5's header, the rows and UCX's own error line, which printed the
/// QP number, the status and the vendor syndrome.
#[test]
fn a_logged_word_dump_decodes_as_its_source_printed_it() {
    let log = "\
19:34:56 [1502987696.852541] [hpc-test-node2:36589:3]      ib_device.c:171  UCX  ERROR IB Async event on mlx5_0: DCT access error on DCTN 0x2a8a3
19:34:56 mlx5: hpc-test-node2: got completion with error:
19:34:56 00000000 00000000 00000000 00000000
19:34:56 00000000 00000000 00000000 00000000
19:34:56 00000002 00000000 00000000 00000000
19:34:56 00000000 00008a12 1002a8af 0001a2d2
19:34:56 [1502987696.853057] [hpc-test-node2:36589:4]       dc_verbs.c:593  UCX  ERROR Send completion with error on qp 0x2a8af: remote invalid request error syndrome 0x8a
";
    let j = json(&run(&["decode", "cqe", "--json"], log.as_bytes()));
    assert_eq!(j["opcode"], "req_err");
    assert_eq!(j["qpn"], 0x2a8af);
    assert_eq!(j["vendor_syndrome"], 0x8a);
    assert_eq!(j["wc_status"], 9);
    assert_eq!(j["wc_status_name"], "remote invalid request error");
    // A row run into the next log line is refused, not skipped.
    let glued = log.replace("0001a2d2\n19:34:56 [", "0001a2d2[");
    assert_bad_input(&run(&["decode", "cqe"], glued.as_bytes()), "glued row");
}

/// `mlx5dp trace replay` on every file of `hw-traces/captured/`: exit 0 and
/// a summary that counts the values the sources printed; a value changed
/// in one record fails with that record named.
#[test]
fn trace_replay_checks_every_captured_file() {
    let files = captured_files();
    assert!(files.len() > 30, "{files:?}");
    for file in &files {
        let path = file.to_str().unwrap();
        let o = run(&["trace", "replay", path], b"");
        assert!(o.status.success(), "{path}: {}", stderr(&o));
        assert!(stdout(&o).contains("stored values checked"), "{path}");
    }
    // u-ucx-6414: the status text UCX printed, changed.
    let file = files
        .iter()
        .find(|f| f.ends_with("u-ucx-6414.txt"))
        .unwrap();
    let text = std::fs::read_to_string(file).unwrap();
    let wrong = text.replace(
        "wc_status_msg=local_protection_error",
        "wc_status_msg=remote_access_error",
    );
    assert_ne!(wrong, text);
    let tmp = std::env::temp_dir().join(format!("mlx5dp-cli-replay-{}.txt", std::process::id()));
    std::fs::write(&tmp, wrong).unwrap();
    let o = run(&["trace", "replay", tmp.to_str().unwrap()], b"");
    let _ = std::fs::remove_file(&tmp);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("[u-ucx-6414]"), "{}", stderr(&o));
    assert!(stderr(&o).contains("wc_status_msg"), "{}", stderr(&o));
}

#[test]
fn error_cqe_json_keys_and_values() {
    // [u-ucx-1569], as libmlx5 prints it (four words a line).
    let dump = "00000000 00000000 00000000 00000000\n00000000 00000000 00000000 00000000\n\
                00000000 00000000 00000000 00000000\n00000000 00008813 08006214 0000f6d2\n";
    let j = json(&run(&["decode", "cqe", "--json"], dump.as_bytes()));
    for key in CQE_KEYS.iter().chain(ERR_CQE_KEYS) {
        assert!(j.get(*key).is_some(), "{key}");
    }
    assert_eq!(j["opcode"], "req_err");
    assert_eq!(j["opcode_raw"], 13);
    assert_eq!(j["qpn"], 0x6214);
    assert_eq!(j["vendor_syndrome"], 0x88);
    assert_eq!(j["syndrome"], 0x13);
    assert_eq!(j["syndrome_name"], "remote_access_err");
    assert_eq!(j["wc_status"], 10);
    assert_eq!(j["wc_status_name"], "remote access error");
    assert_eq!(j["s_wqe_opcode"], 8);
    assert_eq!(j["s_wqe_opcode_name"], "rdma_write");
    assert_eq!(j["owner"], 0);
    assert_eq!(j["se"], 1);
    // Integers are JSON numbers.
    assert!(j["timestamp"].is_u64());
    assert!(j["byte_cnt"].is_u64());
}

#[test]
fn human_output_is_a_field_list() {
    let dump = "00000030: 00 00 00 00 0f 00 78 06 25 00 00 58 00 da ac d2";
    let mut text = String::new();
    for off in [0, 0x10, 0x20] {
        text.push_str(&format!("{off:08x}: {}\n", ["00"; 16].join(" ")));
    }
    text.push_str(dump);
    let o = run(&["decode", "cqe"], text.as_bytes());
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.starts_with("CQE (64 bytes): req_err"), "{out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("wc_status_name")
                && l.ends_with("memory management operation error")),
        "{out}"
    );
    assert!(
        out.lines()
            .any(|l| l.starts_with("s_wqe_opcode_name") && l.ends_with("umr")),
        "{out}"
    );
}

#[test]
fn cqe_size_128() {
    let mut bytes = vec![0u8; 128];
    bytes[127] = 0x20; // RESP_SEND, owner 0
    bytes[64 + 44..64 + 48].copy_from_slice(&[0, 0, 0, 60]);
    let hex = hex_string(&bytes);
    let j = json(&run(
        &["decode", "cqe", "--cqe-size", "128", "--json", &hex],
        b"",
    ));
    assert_eq!(j["cqe_size"], 128);
    assert_eq!(j["opcode"], "resp_send");
    assert_eq!(j["byte_cnt"], 60);
    // Without --cqe-size the length decides.
    let j = json(&run(&["decode", "cqe", "--json", &hex], b""));
    assert_eq!(j["cqe_size"], 128);
    // A size that does not match the input is bad input.
    assert_bad_input(
        &run(&["decode", "cqe", "--cqe-size", "64", &hex], b""),
        "64 with 128 bytes",
    );
}

/// `--wr-data`: the opcode libmlx5 recorded at post time (`sq.wr_data`) is
/// the `wc_opcode` of a NOP, UMR, SET_PSV or MMO requester CQE (default
/// send, 0: a slot nothing was recorded in), and of every requester CQE
/// when it is driver2 (a raw WQE); other send opcodes name their own.
#[test]
fn wr_data_is_the_opcode_of_the_requester_cqes_libmlx5_takes_it_for() {
    let cqe = |sop: u8| {
        let mut b = vec![0u8; 64];
        b[56] = sop; // sop_drop_qpn's send opcode; op_own 0: REQ
        hex_string(&b)
    };
    let opcode = |sop: u8, wr_data: Option<&str>| {
        let hex = cqe(sop);
        let mut args = vec!["decode", "cqe", "--json", hex.as_str()];
        if let Some(w) = wr_data {
            args.extend(["--wr-data", w]);
        }
        let j = json(&run(&args, b""));
        (j["wc_opcode"].clone(), j["wc_opcode_raw"].clone())
    };
    let (nop, umr, send, rdma_write) = (0x00, 0x25, 0x0a, 0x08);
    assert_eq!(opcode(nop, None), ("send".into(), 0.into()));
    assert_eq!(
        opcode(umr, Some("local_inv")),
        ("local_inv".into(), 6.into())
    );
    assert_eq!(opcode(umr, Some("6")), ("local_inv".into(), 6.into()));
    assert_eq!(
        opcode(rdma_write, Some("local_inv")),
        ("rdma_write".into(), 1.into())
    );
    assert_eq!(opcode(send, Some("0x88")), ("driver2".into(), 136.into()));
    assert_bad_input(
        &run(&["decode", "cqe", "--wr-data", "bogus", &cqe(nop)], b""),
        "an unknown opcode",
    );
}

#[test]
fn wqe_json_has_ctrl_and_segments() {
    let wqe = "00 00 0f 0a 00 1d bb 03 00 00 00 08 00 00 00 00\n\
               00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00\n\
               00 00 00 2b 00 08 00 00 00 00 00 05 9e e3 08 00\n\
               00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00\n";
    for qp in ["rc", "uc", "ud", "xrc", "raw"] {
        let j = json(&run(
            &["decode", "wqe", "--qp", qp, "--json"],
            wqe.as_bytes(),
        ));
        assert_eq!(j["qp_type"], qp);
        assert_eq!(j["opcode"], "send");
        assert_eq!(j["wqe_index"], 0x0f);
        assert_eq!(j["qpn"], 0x1dbb);
        assert_eq!(j["ds"], 3);
        assert_eq!(j["wqebbs"], 1);
        assert_eq!(j["len"], 64);
        assert!(j["segments"].is_array());
    }
    let j = json(&run(&["decode", "wqe", "--json"], wqe.as_bytes()));
    assert_eq!(j["qp_type"], "raw");
    assert_eq!(j["qp_type_source"], "inferred");
    let o = run(&["decode", "wqe", "--qp", "raw"], wqe.as_bytes());
    assert!(
        stdout(&o).starts_with("WQE: send on a raw QP"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn mini_cqe_json_is_one_array() {
    let minis = "12 34 00 05 ab 00 00 40 00 07 0a 00 00 00 01 00";
    for format in [
        "hash",
        "csum",
        "ftag-stridx",
        "csum-stridx",
        "l34h-stridx",
        "req",
    ] {
        let j = json(&run(
            &["decode", "mini-cqe", "--format", format, "--json", minis],
            b"",
        ));
        let arr = j.as_array().unwrap();
        assert_eq!(arr.len(), 2, "{format}");
        assert_eq!(arr[1]["index"], 1);
        assert_eq!(arr[0]["format"], format);
        assert!(arr[0]["byte_cnt"].is_u64(), "{format}");
    }
    let j = json(&run(
        &[
            "decode",
            "mini-cqe",
            "0000000100000040",
            // Options may follow the bytes.
            "--format",
            "hash",
            "--json",
        ],
        b"",
    ));
    assert_eq!(j.as_array().unwrap().len(), 1);
    assert_eq!(j[0]["byte_cnt"], 0x40);
}

#[test]
fn bad_input_exits_2_with_one_line() {
    let cqe63 = "00 ".repeat(63);
    let cases: Vec<(Vec<&str>, &[u8], &str)> = vec![
        (vec!["decode", "cqe", "0"], b"", "odd digit count"),
        (vec!["decode", "cqe", "00", "1"], b"", "odd token"),
        (vec!["decode", "cqe", "zz"], b"", "non-hex argument"),
        (vec!["decode", "cqe"], b"00 11 xyz\n", "non-hex stdin"),
        (vec!["decode", "cqe", &cqe63], b"", "63-byte CQE"),
        (vec!["decode", "cqe"], b"", "empty stdin"),
        (vec!["decode", "cqe", "-"], b"\xff\xfe", "binary stdin"),
        (vec!["decode", "wqe", "00112233"], b"", "4-byte WQE"),
        (vec!["decode", "wqe"], &[b'0'; 40], "20-byte WQE"),
        (
            vec!["decode", "mini-cqe", "--format", "req", "001122334455"],
            b"",
            "6-byte mini",
        ),
        (
            vec!["decode", "cqe"],
            b"00000000: 00 00\n00000004: 00 00\n",
            "offset gap",
        ),
        (
            vec!["decode", "cqe"],
            b"00000000: 00 00\n00 00\n",
            "mixed styles",
        ),
    ];
    for (args, stdin, what) in cases {
        assert_bad_input(&run(&args, stdin), what);
    }
}

#[test]
fn usage_errors_are_clap_errors() {
    // Unknown subcommand or option value: clap's usage error, status 2.
    assert_eq!(run(&["decode", "tlp"], b"").status.code(), Some(2));
    assert_eq!(
        run(&["decode", "wqe", "--qp", "dc", "00"], b"")
            .status
            .code(),
        Some(2)
    );
    assert_eq!(
        run(&["decode", "mini-cqe", "00"], b"").status.code(),
        Some(2),
        "--format is required"
    );
    assert!(run(&["decode", "--help"], b"").status.success());
}
