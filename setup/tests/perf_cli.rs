//! `mlx5dp perf` and `mlx5dp info` through the binary: every test over a
//! short run on the emulated device, its JSON parsed and sanity-checked;
//! bad flags and unavailable devices refused in one line with status 2;
//! and the examples' main logic run over the emulated device.

use serde_json::Value;
use std::process::{Command, Output, Stdio};

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mlx5dp"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .expect("spawn mlx5dp")
}

fn json(o: &Output) -> Value {
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "exit {:?}: {err}", o.status);
    // Not a terminal: nothing but the report, no progress bar.
    assert!(err.is_empty(), "stderr: {err:?}");
    let out = String::from_utf8_lossy(&o.stdout);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

fn f(v: &Value, k: &str) -> f64 {
    v[k].as_f64()
        .unwrap_or_else(|| panic!("{k} missing in {v}"))
}

fn perf(test: &str, extra: &[&str]) -> Value {
    let mut args = vec!["perf", test, "--json"];
    args.extend_from_slice(extra);
    let j = json(&run(&args));
    assert_eq!(j["test"], test);
    assert_eq!(j["device"], "emu-thread");
    j
}

fn check_lat(j: &Value, iters: u64, size: u64) {
    assert_eq!(j["iterations"].as_u64(), Some(iters));
    assert_eq!(j["bytes"].as_u64(), Some(size));
    let l = &j["latency_us"];
    let (min, med, p99, p999, max) = (
        f(l, "min"),
        f(l, "median"),
        f(l, "p99"),
        f(l, "p99_9"),
        f(l, "max"),
    );
    assert!(min > 0.0, "{l}");
    assert!(
        min <= med && med <= p99 && p99 <= p999 && p999 <= max,
        "{l}"
    );
    let counted: u64 = l["histogram"]
        .as_array()
        .expect("histogram")
        .iter()
        .map(|b| b["count"].as_u64().expect("count"))
        .sum();
    assert_eq!(counted, iters);
}

fn check_bw(j: &Value, iters: u64, size: u64) {
    assert_eq!(j["iterations"].as_u64(), Some(iters), "{j}");
    assert_eq!(j["bytes"].as_u64(), Some(size));
    assert!(f(j, "msg_rate_mpps") > 0.0, "{j}");
    assert!(f(j, "bw_avg_mb_s") > 0.0, "{j}");
    assert!(f(j, "bw_peak_mb_s") >= f(j, "bw_avg_mb_s") * 0.999, "{j}");
}

#[test]
fn send_lat_rc_ud_uc() {
    for qp in ["rc", "ud", "uc"] {
        let j = perf("send-lat", &["--iters", "200", "--qp", qp]);
        check_lat(&j, 200, 2);
        assert_eq!(j["params"]["transport"], qp.to_uppercase());
    }
    // Larger than the inline threshold: an SGE.
    let j = perf("send-lat", &["--iters", "100", "--size", "1024"]);
    check_lat(&j, 100, 1024);
    assert_eq!(j["params"]["inline"], false);
}

#[test]
fn write_lat() {
    let j = perf("write-lat", &["--iters", "200", "--size", "300"]);
    check_lat(&j, 200, 300);
}

#[test]
fn send_bw() {
    let j = perf("send-bw", &["--iters", "500", "--size", "4096"]);
    check_bw(&j, 500, 4096);
    assert_eq!(j["messages received"].as_u64(), Some(500));
    let j = perf(
        "send-bw",
        &[
            "--iters", "300", "--size", "64", "--inline", "64", "--qp", "ud",
        ],
    );
    check_bw(&j, 300, 64);
}

#[test]
fn write_bw_with_compression() {
    let j = perf(
        "write-bw",
        &[
            "--iters",
            "1000",
            "--size",
            "1024",
            "--cqe-compression",
            "hash",
        ],
    );
    check_bw(&j, 1000, 1024);
    assert_eq!(j["params"]["cqe compression"], "hash");
}

#[test]
fn read_bw_and_atomic_bw() {
    let j = perf("read-bw", &["--iters", "500", "--size", "2048"]);
    check_bw(&j, 500, 2048);
    let j = perf("atomic-bw", &["--iters", "1000"]);
    check_bw(&j, 1000, 8);
}

#[test]
fn raw_tx_every_mode() {
    for mode in ["inline", "pointer", "single"] {
        let j = perf("raw-tx", &["--iters", "5000", "--mode", mode]);
        check_bw(&j, 5000, 64);
        assert_eq!(j["frames out of the port"].as_u64(), Some(5000));
        if mode != "single" {
            assert!(f(&j, "packets per WQE") > 1.0, "{j}");
        }
    }
    let j = perf(
        "raw-tx",
        &["--iters", "1000", "--size", "1500", "--mode", "pointer"],
    );
    check_bw(&j, 1000, 1500);
}

/// `--frames`: the same frames through `tx_frames`, every one out of the
/// port, in every mode.
#[test]
fn raw_tx_frames_every_mode() {
    for mode in ["inline", "pointer", "single"] {
        let j = perf("raw-tx", &["--iters", "5000", "--mode", mode, "--frames"]);
        check_bw(&j, 5000, 64);
        assert_eq!(j["frames out of the port"].as_u64(), Some(5000), "{mode}");
        if mode != "single" {
            assert!(f(&j, "packets per WQE") > 1.0, "{j}");
        }
    }
}

/// `--emu-idle` picks the emulated device thread's idle policy; every
/// policy delivers every frame.
#[test]
fn raw_tx_every_emu_idle_policy() {
    for idle in ["throughput", "busy", "frugal"] {
        let j = perf("raw-tx", &["--iters", "3000", "--emu-idle", idle]);
        check_bw(&j, 3000, 64);
        assert_eq!(j["frames out of the port"].as_u64(), Some(3000), "{idle}");
    }
}

#[test]
fn raw_rx_compressed_and_not() {
    let j = perf("raw-rx", &["--iters", "5000"]);
    check_bw(&j, 5000, 64);
    let share = f(&j, "decompression share");
    assert!(share > 0.0 && share <= 1.0, "{j}");
    let j = perf("raw-rx", &["--iters", "3000", "--cqe-compression", "off"]);
    check_bw(&j, 3000, 64);
    assert_eq!(f(&j, "decompression share"), 0.0);
    // Twice round the 4096-WQE ring: receives reposted as lists
    // (`Rq::post_list`), some crossing the ring's end.
    let j = perf(
        "raw-rx",
        &["--iters", "9000", "--rq", "cyclic", "--size", "300"],
    );
    check_bw(&j, 9000, 300);
}

#[test]
fn duration_runs_end() {
    let j = perf("raw-tx", &["--duration", "0.2"]);
    assert!(j["iterations"].as_u64().expect("iterations") > 0);
    assert!(f(&j, "duration_s") >= 0.2);
}

#[test]
fn table_output() {
    let o = run(&["perf", "write-bw", "--iters", "200", "--size", "256"]);
    assert!(o.status.success());
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("BW average[MB/sec]"), "{out}");
    let o = run(&["perf", "send-lat", "--iters", "50"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("99.9%[us]") && out.contains("histogram"),
        "{out}"
    );
}

#[test]
fn info_json() {
    let o = run(&["info", "--json"]);
    let j = json(&o);
    assert_eq!(j["devices"][0]["name"], "emu");
    assert_eq!(j["caps"]["enhanced_mpw"], true);
    assert!(j["caps"]["max_inline"].as_u64().expect("max_inline") > 0);
    assert_eq!(
        j["caps"]["port"],
        "1 (RoCE v2, mac 02:00:5e:00:00:01, gid index 3, gid ::ffff:10.0.0.1)"
    );
    let o = run(&["info"]);
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stdout).contains("enhanced_mpw"));
}

fn assert_bad(args: &[&str]) {
    let o = run(args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
    assert_eq!(err.lines().count(), 1, "{args:?}: {err:?}");
    assert!(err.starts_with("mlx5dp: "), "{args:?}: {err:?}");
    assert!(!err.contains("panicked"), "{args:?}");
    assert!(o.stdout.is_empty(), "{args:?}");
}

#[test]
fn bad_flags_exit_2_in_one_line() {
    assert_bad(&["perf", "nope"]);
    assert_bad(&["perf", "send-lat", "--bogus"]);
    assert_bad(&["perf", "send-lat", "--iters", "x"]);
    assert_bad(&["perf", "send-lat", "--iters", "0"]);
    assert_bad(&["perf", "send-lat", "--iters", "5", "--duration", "1"]);
    assert_bad(&["perf", "send-bw", "--duration", "-1"]);
    assert_bad(&["perf", "write-lat", "--qp", "ud"]);
    assert_bad(&["perf", "read-bw", "--qp", "uc"]);
    assert_bad(&["perf", "atomic-bw", "--size", "16"]);
    assert_bad(&["perf", "raw-tx", "--size", "10"]);
    assert_bad(&["perf", "raw-tx", "--size", "1500", "--mode", "inline"]);
    assert_bad(&["perf", "raw-rx", "--cqe-compression", "hash"]);
    assert_bad(&["perf", "send-bw", "--cqe-compression", "csum-stridx"]);
    assert_bad(&["perf", "send-bw", "--batch", "0"]);
    assert_bad(&["perf", "raw-tx", "--emu-idle", "lazy"]);
    assert_bad(&["info", "--bogus"]);
}

#[test]
fn unavailable_device_exits_2_in_one_line() {
    assert_bad(&["perf", "send-lat", "--device", "mlx5_9"]);
    assert_bad(&["info", "--device", "mlx5_9"]);
    if !cfg!(feature = "verbs") {
        let o = run(&["perf", "raw-tx", "--device", "mlx5_0"]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("needs the `verbs` feature"), "{err}");
        assert!(err.contains("--device emu"), "{err}");
    }
}

// The examples' main logic, run as the examples run it.

#[allow(dead_code, reason = "the example's main is not called here")]
#[path = "../examples/raw_tx_empw.rs"]
mod raw_tx_empw;
#[allow(dead_code, reason = "the example's main is not called here")]
#[path = "../examples/rc_pingpong.rs"]
mod rc_pingpong;
#[allow(dead_code, reason = "the example's main is not called here")]
#[path = "../examples/rx_compressed.rs"]
mod rx_compressed;

#[test]
fn example_rc_pingpong() {
    let s = rc_pingpong::run(200, 4096).expect("rc_pingpong");
    assert_eq!(s.round_trips, 200);
    assert!(s.median_us > 0.0);
}

#[test]
fn example_raw_tx_empw() {
    let s = raw_tx_empw::run(20_000).expect("raw_tx_empw");
    assert_eq!(s.packets, 20_000);
    assert!(s.sessions > 0 && s.sessions < 20_000);
}

#[test]
fn example_rx_compressed() {
    let s = rx_compressed::run(5_000).expect("rx_compressed");
    assert_eq!(s.received, 5_000);
    assert!(s.from_minis > 0);
}
