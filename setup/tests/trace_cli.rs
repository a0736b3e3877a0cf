//! `mlx5dp trace record` and `mlx5dp trace replay` through the binary, and
//! the refusal of a device that is not there (`trace record`, `perf`,
//! `info`): one line naming the emulated device, status 2, at once.

use mlx5dp_setup::decode::trace::{parse_records, DecodedRecord};
use mlx5dp_setup::trace_record::{decode, replay};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mlx5dp"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .expect("spawn mlx5dp")
}

fn tmp(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("mlx5dp-{}-{name}", std::process::id()))
}

/// Records on the emulated device, then reads the file back three ways:
/// `mlx5dp trace replay`, the library's replay (every expect value), and
/// the plain record decoder on every CQE and WQE record.
#[test]
fn record_on_emu_then_replay() {
    let path = tmp("trace.txt");
    let p = path.to_str().expect("utf-8 temp path");
    let o = run(&["trace", "record", "--device", "emu", "-o", p]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "exit {:?}: {err}", o.status);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("records from emu"), "{out}");
    assert!(out.contains("16 completions"), "{out}");

    let text = std::fs::read_to_string(&path).expect("the trace file");
    // The header: device, firmware, capabilities.
    let head: Vec<&str> = text.lines().take_while(|l| !l.is_empty()).collect();
    assert!(head.contains(&"# Device: emu"), "{head:?}");
    assert!(
        head.iter().any(|l| l.starts_with("# Firmware: ")),
        "{head:?}"
    );
    assert!(
        head.iter().any(|l| l.starts_with("#   max_inline = ")),
        "{head:?}"
    );

    let o = run(&["trace", "replay", p]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "replay exit {:?}: {err}", o.status);
    assert!(String::from_utf8_lossy(&o.stdout).contains("stored values checked"));

    let s = replay(&text).unwrap_or_else(|e| panic!("{e:#?}"));
    assert_eq!(s.captured, 0);
    assert!(s.checked > 100, "{s:?}");

    let recs = parse_records(&text).expect("records");
    let (mut cqes, mut wqes) = (0, 0);
    for r in &recs {
        assert_eq!(r.origin, "emulator");
        match r.kind.as_str() {
            "cqe64" | "error_cqe64" | "wqe" => match r.decode().expect("decode") {
                DecodedRecord::Cqe(_) => cqes += 1,
                DecodedRecord::Wqe(_) => wqes += 1,
                DecodedRecord::Minis(_) => {}
            },
            _ => {
                decode(r).unwrap_or_else(|e| panic!("[{}] {e}", r.id));
            }
        }
    }
    // 13 WQEs posted (5 RC, 8 raw); 16 completions.
    assert_eq!((wqes, cqes), (13, 16), "{:?}", recs.len());
    let _ = std::fs::remove_file(&path);
}

/// A corrupted value is caught by `mlx5dp trace replay` (status 1).
#[test]
fn replay_catches_a_wrong_value() {
    let path = tmp("bad.txt");
    let p = path.to_str().expect("utf-8 temp path");
    let o = run(&["trace", "record", "-o", p]);
    assert!(o.status.success());
    let text = std::fs::read_to_string(&path).expect("the trace file");
    let bad = text.replacen("# expect: opcode_raw=0xa", "# expect: opcode_raw=0xb", 1);
    assert_ne!(bad, text);
    std::fs::write(&path, bad).expect("write");
    let o = run(&["trace", "replay", p]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("opcode_raw"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    let _ = std::fs::remove_file(&path);
}

/// One line on stderr naming the emulated device, status 2, quickly.
fn refused(args: &[&str]) {
    let t = Instant::now();
    let o = run(args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
    assert!(err.contains("--device emu"), "{args:?}: {err}");
    assert!(o.stdout.is_empty(), "{args:?}");
    assert!(
        t.elapsed() < Duration::from_secs(10),
        "{args:?}: not at once"
    );
}

/// Without a ConnectX (there is none on the development machines; skipped
/// when `MLX5DP_DEVICE` says there is one), naming a device fails at once:
/// "no RDMA device" with the `verbs` feature, "needs the `verbs` feature"
/// without it.
#[test]
fn a_missing_device_is_refused_at_once() {
    if std::env::var("MLX5DP_DEVICE").is_ok() {
        return;
    }
    let path = tmp("never.txt");
    let p = path.to_str().expect("utf-8 temp path");
    refused(&["trace", "record", "--device", "mlx5_0", "-o", p]);
    assert!(!path.exists(), "nothing written");
    refused(&["perf", "write-bw", "--device", "mlx5_0"]);
    refused(&["perf", "send-lat", "--device", "mlx5_0", "--iters", "10"]);
    refused(&["info", "--device", "mlx5_0"]);
    let o = run(&["perf", "write-bw", "--device", "mlx5_0"]);
    let err = String::from_utf8_lossy(&o.stderr);
    if cfg!(feature = "verbs") {
        assert!(err.contains("no RDMA device"), "{err}");
    } else {
        assert!(err.contains("`verbs` feature"), "{err}");
    }
}

/// What needs the emulator is refused on a device name before anything is
/// opened.
#[test]
fn emulator_only_perf_options_are_refused_on_a_device() {
    refused(&["perf", "raw-rx", "--device", "mlx5_0"]);
    refused(&["perf", "send-lat", "--qp", "ud", "--device", "mlx5_0"]);
}
