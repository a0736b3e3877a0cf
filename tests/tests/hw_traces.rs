//! Replays every captured hardware trace in `hw-traces/captured/`: each
//! record is decoded with `mlx5dp_setup::decode` (as `mlx5dp decode` does)
//! and every value its source printed (`# expect:`) is checked against the
//! decoded fields. The bytes are also re-read through all three input
//! styles (plain hex, kernel `print_hex_dump` lines, rdma-core word dumps),
//! which must give the same bytes and the same decoded JSON.
//!
//! Expect keys are mapped explicitly (see [`check_key`]). Keys that describe
//! the queue rather than the entry cannot be checked from the bytes; they
//! are listed in [`CONTEXT_ONLY`] with the reason. A key that is neither
//! mapped, nor context-only, nor the name of a decoded field FAILS the test:
//! a new key must be given a meaning, never skipped silently.

#![expect(
    clippy::unwrap_used,
    reason = "test helpers: a failed read or spawn is a test failure"
)]

use mlx5dp::prm::WcStatus;
use mlx5dp_setup::decode::cqe::wc_status_spellings;
use mlx5dp_setup::decode::trace::{parse_records, DecodedRecord, TraceRecord};
use mlx5dp_setup::hexdump;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// Keys that describe the queue (software state printed beside the dump),
/// not the bytes of the entry, with why they cannot be checked.
const CONTEXT_ONLY: &[(&str, &str)] = &[
    (
        "cqn",
        "CQ number: the driver prints its own cq->mcq.cqn; no CQE field holds it",
    ),
    (
        "ci",
        "CQ consumer index when the error was seen: queue state",
    ),
    (
        "wq_size",
        "number of WQEBBs in the send ring: queue state (used only to reduce the WQE counter to a ring slot)",
    ),
    (
        "wq_cur_size",
        "WQEs outstanding in the ring: queue state",
    ),
    ("cq_ci", "DPDK's CQ consumer index: queue state"),
    ("wq_ci", "DPDK's send-ring producer index: queue state"),
    ("rq_ci", "DPDK's receive-ring index: queue state"),
];

/// Other names sources use for decoded fields: the C struct member names
/// of rdma-core (`ibv_wc.vendor_err`, `mlx5_err_cqe.vendor_err_synd`) and
/// DPDK (`hw_err_synd`, `hw_synd_type`), and `ibv_wc.byte_len`.
const ALIASES: &[(&str, &str)] = &[
    ("vendor_err", "vendor_syndrome"),
    ("vendor_err_synd", "vendor_syndrome"),
    ("hw_err_synd", "hw_syndrome"),
    ("hw_synd_type", "hw_syndrome_type"),
    ("byte_len", "byte_cnt"),
];

/// The records every checkout must hold (from the project's collection of public dumps).
const KNOWN: &[&str] = &[
    "k-umr-odp-iova",
    "k-nvmeof-mt28908",
    "k-dustli-remote-access",
    "k-kumlien-roce55",
    "k-nfsordma-1",
    "e-cx4lx-nolinear-cqe",
    "e-cx4lx-nolinear-wqe",
    "e-shampo-64k-rq",
    "dpdk-warp17-1",
    "u-libfabric-4283",
    "u-ucx-1569",
    "u-spdk-264",
    "u-spdk-500",
    "u-ali-send-wqe",
    "u-ali-send-cqe",
    // Collected for this project from public issue threads (not in the shared collection).
    "dpdk-warp17-2",
    "u-ucx-857",
    "u-ucx-1770",
    "u-charm-2532-gatech",
    "u-charm-2532-frontera",
    "u-spdk-264-waikiki",
    "u-spdk-507",
    "u-spdk-961",
    "u-spdk-1387",
    "k-spdk-964",
    "k-nvmeof-ruijter-cx6",
    "k-odp-mr-race",
    "e-shampo-resv-rq",
    "u-rdma-cn-rnr",
    "u-fluent-dapl",
    "k-nfsordma-2",
    "k-nfsordma-3",
    "u-caffe2-616-node006",
    "u-caffe2-616-node016",
    "u-caffe2-2365",
    "u-ucxpy-421",
    "u-ucx-6414",
    "u-ucx-935",
];

/// Keys every decoded CQE has, and every decoded error CQE adds.
const CQE_KEYS: &[&str] = &[
    "opcode",
    "opcode_raw",
    "format",
    "owner",
    "se",
    "byte_cnt",
    "qpn",
    "wqe_counter",
    "timestamp",
    "signature",
];
const ERR_CQE_KEYS: &[&str] = &[
    "syndrome",
    "syndrome_name",
    "vendor_syndrome",
    "hw_syndrome",
    "hw_syndrome_type",
    "s_wqe_opcode",
    "wc_status",
    "wc_status_name",
];
/// Keys every decoded WQE has.
const WQE_KEYS: &[&str] = &[
    "opcode",
    "opcode_raw",
    "opmod",
    "wqe_index",
    "qpn",
    "ds",
    "wqebbs",
    "len",
    "signature",
    "fm",
    "ce",
    "se",
    "imm",
    "segments",
];

fn captured_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../hw-traces/captured")
}

/// Every record of every `*.txt` file in `hw-traces/captured/`, with its file.
fn records() -> Vec<(PathBuf, TraceRecord)> {
    let dir = captured_dir();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .collect();
    files.sort();
    let mut out = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let recs = parse_records(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        out.extend(recs.into_iter().map(|r| (file.clone(), r)));
    }
    out
}

/// A number as the sources print them: `0x1dbb` or decimal `1024`.
fn number(s: &str) -> Option<u64> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => s.parse().ok(),
    }
}

/// `remote access error` and `remote_access_error` compare equal.
fn normalise(s: &str) -> String {
    s.trim().to_lowercase().replace([' ', '-'], "_")
}

/// What a checked key turned out to be.
enum Outcome {
    /// Compared with the decoded bytes, and equal.
    Checked,
    /// Not in the bytes; why.
    ContextOnly(String),
}

fn json_u64(j: &Value, key: &str) -> Result<u64, String> {
    j.get(key)
        .and_then(Value::as_u64)
        .ok_or_else(|| format!("decoded output has no integer `{key}`"))
}

fn expect_eq(what: &str, got: u64, want: u64) -> Result<Outcome, String> {
    if got == want {
        Ok(Outcome::Checked)
    } else {
        Err(format!(
            "{what}: decoded {got:#x}, source printed {want:#x}"
        ))
    }
}

/// The QP/queue number: a CQE's `qpn` (bytes 57–59), a WQE's control-segment QPN.
///
/// The kernel's `qn` (and DPDK's SQN/RQN) is the number of the software
/// queue. A requester error CQE carries the SQ/QP number, so it must match.
/// A responder error CQE of an Ethernet RQ carries none (an RQ is not a QP;
/// the field is zero), so there the number is context only, and the check
/// says so; a non-zero field must still match.
fn check_queue_number(j: &Value, want: u64, responder_may_omit: bool) -> Result<Outcome, String> {
    let got = json_u64(j, "qpn")?;
    if got == want {
        return Ok(Outcome::Checked);
    }
    if responder_may_omit && got == 0 && j["opcode"] == "resp_err" {
        return Ok(Outcome::ContextOnly(format!(
            "{want:#x} is the driver's RQ number; this responder error CQE carries no QPN (bytes 56-59 zero)"
        )));
    }
    Err(format!("qpn: decoded {got:#x}, source printed {want:#x}"))
}

/// Checks one `key=value` the source printed against the decoded JSON.
fn check_key(rec: &TraceRecord, j: &Value, key: &str, value: &str) -> Result<Outcome, String> {
    if let Some((_, why)) = CONTEXT_ONLY.iter().find(|(k, _)| *k == key) {
        return Ok(Outcome::ContextOnly((*why).to_string()));
    }
    let num = || number(value).ok_or_else(|| format!("`{key}={value}` is not a number"));
    match key {
        // The numeric ibv_wc_status / ib_wc_status (same numbering).
        "wc_status" => expect_eq("wc_status", json_u64(j, "wc_status")?, num()?),
        // The status text: libibverbs' ibv_wc_status_str or the kernel's
        // ib_wc_status_msg (older or newer spelling), normalised.
        "wc_status_msg" => {
            let status = WcStatus::from_raw(
                u32::try_from(json_u64(j, "wc_status")?).map_err(|e| e.to_string())?,
            );
            let name = j["wc_status_name"].as_str().unwrap_or_default();
            let spellings: Vec<String> = wc_status_spellings(status)
                .iter()
                .map(|s| normalise(s))
                .collect();
            if normalise(name) == normalise(value) || spellings.contains(&normalise(value)) {
                Ok(Outcome::Checked)
            } else {
                Err(format!(
                    "wc_status_msg: decoded `{name}` (or {spellings:?}), source printed `{value}`"
                ))
            }
        }
        "qpn" | "sqn" => check_queue_number(j, num()?, false),
        "qn" | "rqn" => check_queue_number(j, num()?, true),
        // The kernel prints the CQE opcode number (get_cqe_opcode).
        "opcode" => expect_eq("opcode_raw", json_u64(j, "opcode_raw")?, num()?),
        // "ERR CQE on SQ/RQ: 0x…": a requester / responder error CQE of that queue.
        "err_sq" | "err_rq" => {
            let kind = if key == "err_sq" {
                "req_err"
            } else {
                "resp_err"
            };
            if j["opcode"] != kind {
                return Err(format!(
                    "{key}: the source says a {kind} CQE, decoded {}",
                    j["opcode"]
                ));
            }
            match check_queue_number(j, num()?, key == "err_rq")? {
                Outcome::Checked => Ok(Outcome::Checked),
                Outcome::ContextOnly(why) => Ok(Outcome::ContextOnly(format!(
                    "kind {kind} checked; queue number: {why}"
                ))),
            }
        }
        // The kernel's "WQE index" is the ring slot: the control segment's
        // 16-bit counter modulo the ring size (mlx5_wq_cyc_wqe_dump).
        "wqe_index" => {
            let counter = json_u64(j, "wqe_index")?;
            let slot = match rec
                .expect
                .iter()
                .find(|(k, _)| k == "wq_size")
                .and_then(|(_, v)| number(v))
            {
                Some(size) if size.is_power_of_two() => counter & (size - 1),
                _ => counter,
            };
            expect_eq("wqe_index", slot, num()?)
        }
        // The kernel's WQE dump length: WQEBBs × 64.
        "len" => expect_eq("len", json_u64(j, "len")?, num()?),
        // Any other key must name a decoded field (syndrome,
        // vendor_syndrome, hw_syndrome, wqe_counter, ...), directly or by
        // one of the ALIASES.
        other => {
            let field = ALIASES
                .iter()
                .find(|(alias, _)| *alias == other)
                .map_or(other, |(_, field)| *field);
            match j.get(field) {
                Some(Value::Number(n)) => {
                    let got = n.as_u64().ok_or("not an unsigned integer")?;
                    expect_eq(field, got, num()?)
                }
                Some(Value::String(s)) if normalise(s) == normalise(value) => Ok(Outcome::Checked),
                Some(Value::String(s)) => {
                    Err(format!("{other}: decoded `{s}`, source printed `{value}`"))
                }
                Some(Value::Bool(b)) if b.to_string() == value => Ok(Outcome::Checked),
                _ => Err(format!(
                    "unknown expect key `{other}`: map it in check_key or list it in CONTEXT_ONLY"
                )),
            }
        }
    }
}

fn has_keys(j: &Value, keys: &[&str]) -> Result<(), String> {
    let missing: Vec<&&str> = keys.iter().filter(|k| j.get(**k).is_none()).collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!("decoded JSON lacks {missing:?}"))
    }
}

/// Decodes a record and checks it; returns (checked, context-only) counts.
fn check_record(rec: &TraceRecord) -> Result<(usize, Vec<String>), String> {
    let decoded = rec.decode().map_err(|e| e.to_string())?;
    let j = decoded.to_json();
    match &decoded {
        DecodedRecord::Cqe(c) => {
            has_keys(&j, CQE_KEYS)?;
            if c.is_error() {
                has_keys(&j, ERR_CQE_KEYS)?;
            }
            if rec.expects_error_cqe() && !c.is_error() {
                return Err(format!(
                    "kind {} but the CQE opcode is {}",
                    rec.kind,
                    c.opcode().name()
                ));
            }
        }
        DecodedRecord::Wqe(_) => has_keys(&j, WQE_KEYS)?,
        DecodedRecord::Minis(_) => {}
    }
    let mut checked = 0;
    let mut context = Vec::new();
    for (key, value) in &rec.expect {
        match check_key(rec, &j, key, value).map_err(|e| format!("{key}={value}: {e}"))? {
            Outcome::Checked => checked += 1,
            Outcome::ContextOnly(why) => context.push(format!("{key}={value} ({why})")),
        }
    }
    Ok((checked, context))
}

#[test]
fn every_captured_record_decodes_and_matches_its_source() {
    let recs = records();
    for id in KNOWN {
        assert!(
            recs.iter().any(|(_, r)| r.id == *id),
            "record [{id}] is missing from {}",
            captured_dir().display()
        );
    }
    let mut failures = Vec::new();
    let mut checked = 0;
    for (file, rec) in &recs {
        assert_eq!(
            rec.origin,
            "captured",
            "{}: captured/ holds real-hardware dumps only",
            file.display()
        );
        match check_record(rec) {
            Ok((n, context)) => {
                checked += n;
                for c in context {
                    println!("[{}] context only: {c}", rec.id);
                }
            }
            Err(e) => failures.push(format!("[{}] {}: {e}", rec.id, file.display())),
        }
    }
    println!(
        "{} records, {checked} expect values checked against the bytes",
        recs.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_three_input_styles_agree() {
    for (_, rec) in records() {
        let reference = rec.decode().unwrap().to_json();
        let styles = [
            ("plain hex", hexdump::to_plain_hex(&rec.bytes)),
            (
                "one plain hex string",
                mlx5dp_setup::decode::hex_string(&rec.bytes),
            ),
            (
                "print_hex_dump",
                hexdump::to_print_hex_dump(&rec.bytes, "", false),
            ),
            (
                "print_hex_dump with dmesg prefix and ASCII",
                hexdump::to_print_hex_dump(
                    &rec.bytes,
                    "[  123.456789] mlx5_core 0000:3b:00.1 eth1: ",
                    true,
                ),
            ),
            ("rdma-core words", hexdump::to_word_dump(&rec.bytes)),
            (
                "rdma-core words as libmlx5 logs them",
                format!(
                    "mlx5: node-01: got completion with error:\n{}app: CQ error (4): local protection error\n",
                    hexdump::to_word_dump(&rec.bytes)
                ),
            ),
        ];
        for (style, text) in styles {
            let bytes = hexdump::parse(&text)
                .unwrap_or_else(|e| panic!("[{}] {style}: {e}\n{text}", rec.id));
            assert_eq!(bytes, rec.bytes, "[{}] {style}", rec.id);
            let mut again = rec.clone();
            again.bytes = bytes;
            assert_eq!(
                again.decode().unwrap().to_json(),
                reference,
                "[{}] {style}",
                rec.id
            );
        }
    }
}

/// A synthetic record: [k-umr-odp-iova]'s bytes with the given expect line.
fn synthetic(expect: &str) -> TraceRecord {
    let text = format!(
        "# source: [synthetic] a test\n# kind: error_cqe64\n# expect: {expect}\n\
         00000000: {zeros}\n00000010: {zeros}\n00000020: {zeros}\n\
         00000030: 00 00 00 00 0f 00 78 06 25 00 00 58 00 da ac d2\n",
        zeros = ["00"; 16].join(" ")
    );
    parse_records(&text).unwrap().remove(0)
}

#[test]
fn expect_keys_map_or_fail() {
    let rec = synthetic(
        "wc_status=6 wc_status_msg=memory_bind_operation_error qpn=0x58 opcode=0xd \
         err_sq=0x58 syndrome=0x6 vendor_err=0x78 hw_err_synd=0xf wqe_counter=218 cqn=0x1 ci=0x2",
    );
    let (checked, context) = check_record(&rec).unwrap();
    assert_eq!((checked, context.len()), (9, 2));
    for bad in [
        "frobnication=3",
        "wc_status=5",
        "err_rq=0x58",
        "qn=0x59",
        "wc_status_msg=remote_access_error",
    ] {
        let err = check_record(&synthetic(bad)).unwrap_err();
        assert!(err.starts_with(bad), "{bad}: {err}");
    }
    let err = check_record(&synthetic("frobnication=3")).unwrap_err();
    assert!(err.contains("unknown expect key"), "{err}");
}

#[test]
fn specific_decodings_of_the_captured_records() {
    let recs = records();
    let json = |id: &str| {
        let (_, rec) = recs.iter().find(|(_, r)| r.id == id).unwrap();
        rec.decode().unwrap().to_json()
    };
    // UMR requester error: syndrome MW_BIND (0x06) → IBV_WC_MW_BIND_ERR.
    let j = json("k-umr-odp-iova");
    assert_eq!(j["s_wqe_opcode_name"], "umr");
    assert_eq!(j["syndrome_name"], "mw_bind_err");
    // Kernel Ethernet SQ: LOCAL_LENGTH on SEND, SQN in the CQE.
    let j = json("e-cx4lx-nolinear-cqe");
    assert_eq!(j["opcode"], "req_err");
    assert_eq!(j["s_wqe_opcode_name"], "send");
    assert_eq!(j["wc_status_name"], "local length error");
    // The raw-packet WQE: cs_flags 0xc0 in the Ethernet segment.
    let j = json("u-ali-send-wqe");
    assert_eq!(j["qp_type"], "raw");
    assert_eq!(j["segments"][0]["type"], "eth");
    assert_eq!(j["segments"][0]["cs_flags"], 0xc0);
    assert_eq!(j["segments"][0]["l3_csum"], true);
    assert_eq!(j["segments"][0]["l4_csum"], true);
    assert_eq!(j["segments"][1]["byte_count"], 554);
    // Its completion: a requester CQE for the same QP, SEND.
    let j = json("u-ali-send-cqe");
    assert_eq!(j["opcode"], "req");
    assert_eq!(j["send_opcode"], "send");
    assert_eq!(j["qpn"], 0x1150);
    assert_eq!(j["wc_status"], 0);
    // The SHAMPO responder error: LOCAL_PROT on an Ethernet RQ.
    let j = json("e-shampo-64k-rq");
    assert_eq!(j["opcode"], "resp_err");
    assert_eq!(j["wc_status"], 4);
    // DPDK wrote "seen" into bytes 1-5; the hardware fields still decode.
    let j = json("dpdk-warp17-1");
    assert_eq!(j["syndrome_name"], "local_prot_err");
    assert_eq!(j["qpn"], 0x1542);
    // The older kernel dump_cqe of an nvmet RDMA READ: the CQE names the read.
    let j = json("k-spdk-964");
    assert_eq!(j["s_wqe_opcode_name"], "rdma_read");
    assert_eq!(j["qpn"], 0x1af37);
    // A DCI's RDMA READ refused by the DCT: remote invalid request, vendor 0x8a.
    let j = json("u-ucx-1770");
    assert_eq!(j["syndrome_name"], "remote_inval_req_err");
    assert_eq!(j["s_wqe_opcode_name"], "rdma_read");
    // Local QP operation error on an RDMA WRITE, hw_error_syndrome 0x01.
    let j = json("u-ucx-857");
    assert_eq!(j["wc_status"], 2);
    assert_eq!(j["s_wqe_opcode_name"], "rdma_write");
    assert_eq!(j["hw_syndrome"], 1);
    // A 6.12 kernel printed "Message: memory bind operation error" for this
    // UMR error CQE: the kernel spelling since Linux 5.13.
    let j = json("k-odp-mr-race");
    assert_eq!(j["s_wqe_opcode_name"], "umr");
    assert_eq!(j["wc_status_kernel_name"], "memory bind operation error");
    // RNR retry exceeded (syndrome 0x16) on a SEND: libmlx5 dumps it.
    let j = json("u-rdma-cn-rnr");
    assert_eq!(j["syndrome_name"], "rnr_retry_exc_err");
    // SHAMPO: the same NIC failure as e-shampo-64k-rq, another CQ.
    let j = json("e-shampo-resv-rq");
    assert_eq!(j["opcode"], "resp_err");
    assert_eq!(j["wc_status"], 4);
    // A SEND refused for local protection; UCX printed vendor_err 0x52 and
    // the hardware syndrome byte is 0x92.
    let j = json("u-ucx-6414");
    assert_eq!(j["s_wqe_opcode_name"], "send");
    assert_eq!(j["hw_syndrome"], 0x92);
    // An RDMA READ answered with a remote access error (syndrome 0x13).
    let j = json("u-ucx-935");
    assert_eq!(j["syndrome_name"], "remote_access_err");
    assert_eq!(j["s_wqe_opcode_name"], "rdma_read");
    assert_eq!(j["qpn"], 0x864);
}
