//! Checking a published hardware dump against the values its source
//! printed beside it (`hw-traces/captured/`, `hw-traces/README.md`): the
//! `# expect:` keys of such a record are what a kernel, rdma-core, UCX or
//! DPDK log line printed (`wc_status_msg`, the kernel's `qn` and CQE
//! `opcode` number, a WQE's ring slot as `wqe_index`, C struct member
//! names), not the names of decoded fields. Each key is mapped explicitly
//! ([`check_key`]); keys that describe the queue rather than the entry
//! cannot be checked from the bytes and are listed in [`CONTEXT_ONLY`] with
//! the reason. A key that is neither mapped, nor context-only, nor the name
//! of a decoded field fails: a new key must be given a meaning, never
//! skipped silently.
//!
//! `mlx5dp trace replay` and `tests/tests/hw_traces.rs` both check with
//! [`check_record`]. Records written by `mlx5dp trace record` (`# recorded-by:`
//! or `# captured-by:` lines) name decoded fields and are checked by
//! `trace_record::check_record` instead ([`is_published`] tells them apart).

use super::cqe::wc_status_spellings;
use super::trace::{DecodedRecord, TraceRecord};
use crate::trace_record::number;
use mlx5dp::prm::WcStatus;
use serde_json::Value;

/// Keys that describe the queue (software state printed beside the dump),
/// not the bytes of the entry, with why they cannot be checked.
pub const CONTEXT_ONLY: &[(&str, &str)] = &[
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
pub const ALIASES: &[(&str, &str)] = &[
    ("vendor_err", "vendor_syndrome"),
    ("vendor_err_synd", "vendor_syndrome"),
    ("vendor_error", "vendor_syndrome"),
    ("hw_err_synd", "hw_syndrome"),
    ("hw_synd_type", "hw_syndrome_type"),
    ("byte_len", "byte_cnt"),
];

/// Keys every decoded CQE has.
pub const CQE_KEYS: &[&str] = &[
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
/// Keys every decoded error CQE adds.
pub const ERR_CQE_KEYS: &[&str] = &[
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
pub const WQE_KEYS: &[&str] = &[
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

/// `remote access error` and `remote_access_error` compare equal.
fn normalise(s: &str) -> String {
    s.trim().to_lowercase().replace([' ', '-'], "_")
}

/// What a checked key turned out to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
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
pub fn check_key(rec: &TraceRecord, j: &Value, key: &str, value: &str) -> Result<Outcome, String> {
    if let Some((_, why)) = CONTEXT_ONLY.iter().find(|(k, _)| *k == key) {
        return Ok(Outcome::ContextOnly((*why).to_string()));
    }
    let num = || number(value).ok_or_else(|| format!("`{key}={value}` is not a number"));
    match key {
        // The numeric ibv_wc_status / ib_wc_status (same numbering).
        "wc_status" => expect_eq("wc_status", json_u64(j, "wc_status")?, num()?),
        // `ibv_wc.status` as an application prints it: the number, or
        // libibverbs' / the kernel's text.
        "status" if number(value).is_some() => {
            expect_eq("wc_status", json_u64(j, "wc_status")?, num()?)
        }
        "status" => check_key(rec, j, "wc_status_msg", value),
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
        // `ibv_wc.qp_num` is the CQE's QPN too.
        "qpn" | "sqn" | "qp_num" => check_queue_number(j, num()?, false),
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

/// Decodes a published record and checks it: the keys every decoded entry
/// of its kind has, the error opcode an `error_*` kind asserts, and every
/// expect value ([`check_key`]). Returns how many values were checked
/// against the bytes and, for each context-only one, `key=value (why)`; the
/// first failure as `key=value: what` (or what the record lacks).
pub fn check_record(rec: &TraceRecord) -> Result<(usize, Vec<String>), String> {
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

/// Whether a record is a published dump (checked with [`check_record`]):
/// of origin `captured` and not written by `mlx5dp trace record`, whose
/// records say `# recorded-by:` (the emulated device) or `# captured-by:`
/// (a device the host traced) and name decoded fields in `# expect:`.
pub fn is_published(rec: &TraceRecord) -> bool {
    rec.origin == "captured"
        && !rec
            .other
            .iter()
            .any(|(k, _)| k == "recorded-by" || k == "captured-by")
}
