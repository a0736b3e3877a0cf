//! `mlx5dp trace record` and `mlx5dp trace replay`: a short scenario run on
//! a chosen backend, written as `hw-traces/` records (`hw-traces/README.md`),
//! and the replay of such a file.
//!
//! The scenario ([`run_scenario`]) is one RC connection (three sends, one
//! with immediate data, into posted receives; an RDMA write from a gather
//! entry and an inline one) and a burst of eight raw Ethernet frames, all
//! posted and polled through the core, every payload checked.
//!
//! - `--device emu` (the default): the emulated device, in step mode, with
//!   its own recorder attached (`emu::record`): every WQE it read, every CQE
//!   it wrote, every doorbell-record value and UAR write it saw, each with
//!   the device's own view as `# expect:` and `# origin: emulator` — the
//!   format of `hw-traces/emulated/`.
//! - `--device NAME` (feature `verbs`): a ConnectX. The device records
//!   nothing, so the host does ([`Tap`], implemented by
//!   `verbs::capture::HostTap`): the WQEs posted (bytes from the ring after
//!   `complete`), the doorbell-record words and the 8-byte doorbell value
//!   written, and the CQ ring around each poll (the slots software owned
//!   before the poll that the poll consumed), as `# origin: captured`
//!   records whose `# expect:` holds only what the host knew without the
//!   bytes (the QPN and ring index of a WQE it posted).
//!
//! Either file starts with a header naming the device, its firmware and its
//! capabilities (comment lines before the first record). [`replay`] reads
//! a file back: every record is decoded (entries with
//! [`crate::decode`], compressed sessions with the core's poller through
//! [`crate::decode::cq::decode_ring`], doorbell words through the `prm`
//! layouts), every expect value must match the decoded field, and the owner
//! bit and WQE index a record's `# ci:` implies must be there.
//!
//! [`write_record`] is the one formatter of a record; the emulator's
//! recorder (`emu::record::Recorder::record`) writes the same lines and
//! could call it.
#![forbid(unsafe_code)]

use crate::backend::{
    Access, Backend, BackendError, ConnectAttr, CoreCq, CoreRq, CoreSq, Cqn, DeviceInfo, QpHandle,
    QpInit, QpType, RqInit,
};
use crate::decode::cq::{decode_ring, CqLayout, RingParams};
use crate::decode::cqe::CqeSize as DCqeSize;
use crate::decode::mini::MiniFormat;
use crate::decode::trace::{parse_records, TraceRecord};
use crate::decode::wqe::{decode_wqe, QpType as DQp};
use crate::perf::pair::{drain, Side, Sides};
use crate::perf::raw::udp_frame;
use crate::perf::{rig, PerfError};
use clap::{Args, Subcommand};
use mlx5dp::cq::{Cq, LookupError, RecvRetired, SendRetired, WorkQueues, WqRef};
use mlx5dp::prm::{CqArmWord, WcStatus};
use mlx5dp::rq::Sge as RSge;
use mlx5dp::sq::{AnyQp, DoorbellOnly, SendQueue, Sge};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::{self, Write as _};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The scenario family name records carry.
pub const FAMILY: &str = "trace-record";

/// What the host-side recorder says it is, on every record it writes
/// (never `recorded-by`, which marks emulator records).
pub const CAPTURED_BY: &str = "mlx5dp trace record (host side)";

// ---------------------------------------------------------------------------
// The command line
// ---------------------------------------------------------------------------

/// `mlx5dp trace`: record a short scenario's rings, or replay a trace file.
#[derive(Debug, Args)]
pub struct TraceArgs {
    /// Record or replay.
    #[command(subcommand)]
    pub what: TraceWhat,
}

/// The `mlx5dp trace` subcommands.
#[derive(Debug, Subcommand)]
pub enum TraceWhat {
    /// Run a short scenario (RC send/receive, RDMA write, a raw Ethernet
    /// burst) and write what the rings held as hw-traces/ records.
    Record(RecordArgs),
    /// Decode every record of a trace file and check its stored values.
    Replay(ReplayArgs),
}

/// Arguments of `mlx5dp trace record`.
#[derive(Debug, Args)]
pub struct RecordArgs {
    /// `emu` (the emulated ConnectX, recording its own view) or an RDMA
    /// device name (needs the `verbs` feature; the host records).
    #[arg(long, short = 'd', default_value = "emu")]
    pub device: String,
    /// The file to write.
    #[arg(long, short = 'o')]
    pub output: PathBuf,
}

/// Arguments of `mlx5dp trace replay`.
#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// The trace file.
    pub file: PathBuf,
}

/// Why `mlx5dp trace` failed. `Display` is one line.
#[derive(Debug)]
pub enum TraceCmdError {
    /// The device is missing or cannot run the scenario (exit status 2).
    Unavailable(BackendError),
    /// A backend call failed during the scenario.
    Backend(BackendError),
    /// The scenario went wrong (an error completion, wrong data, a timeout).
    Run(String),
    /// The file could not be read or written.
    Io {
        /// The file.
        path: PathBuf,
        /// What happened.
        error: std::io::Error,
    },
    /// Records that did not replay, one message each.
    Replay(Vec<String>),
}

impl TraceCmdError {
    /// The process exit status: 2 for an unavailable device, 1 otherwise.
    pub fn exit_code(&self) -> u8 {
        match self {
            TraceCmdError::Unavailable(_) => 2,
            _ => 1,
        }
    }
}

impl fmt::Display for TraceCmdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TraceCmdError::Unavailable(e) | TraceCmdError::Backend(e) => write!(f, "{e}"),
            TraceCmdError::Run(m) => write!(f, "{}", m.replace('\n', " ")),
            TraceCmdError::Io { path, error } => write!(f, "{}: {error}", path.display()),
            TraceCmdError::Replay(v) => write!(
                f,
                "{} record(s) did not replay; first: {}",
                v.len(),
                v.first().map_or("", String::as_str)
            ),
        }
    }
}

impl std::error::Error for TraceCmdError {}

impl From<BackendError> for TraceCmdError {
    fn from(e: BackendError) -> Self {
        if e.is_unavailable() {
            TraceCmdError::Unavailable(e)
        } else {
            TraceCmdError::Backend(e)
        }
    }
}

impl From<PerfError> for TraceCmdError {
    fn from(e: PerfError) -> Self {
        TraceCmdError::Run(e.to_string())
    }
}

/// Runs `mlx5dp trace` and returns what to print.
pub fn run(a: &TraceArgs) -> Result<String, TraceCmdError> {
    match &a.what {
        TraceWhat::Record(r) => record(r),
        TraceWhat::Replay(r) => {
            let text = std::fs::read_to_string(&r.file).map_err(|error| TraceCmdError::Io {
                path: r.file.clone(),
                error,
            })?;
            let s = replay(&text).map_err(TraceCmdError::Replay)?;
            Ok(format!(
                "{}: {} records ({} emulated, {} captured) decoded, {} stored values checked{}\n",
                r.file.display(),
                s.records,
                s.emulated,
                s.captured,
                s.checked,
                if s.context_only > 0 {
                    format!(
                        ", {} context only (queue state printed beside the dump)",
                        s.context_only
                    )
                } else {
                    String::new()
                }
            ))
        }
    }
}

/// Runs `mlx5dp trace record`: the scenario on the chosen backend, the
/// trace written to `a.output`; returns the summary line.
pub fn record(a: &RecordArgs) -> Result<String, TraceCmdError> {
    let (text, report) = if a.device == "emu" {
        record_emu()?
    } else {
        record_device(&a.device)?
    };
    std::fs::write(&a.output, &text).map_err(|error| TraceCmdError::Io {
        path: a.output.clone(),
        error,
    })?;
    let records = text.lines().filter(|l| l.starts_with("# source:")).count();
    Ok(format!(
        "{}: {records} records from {} ({} sends, {} RDMA writes, {} frames, {} completions)\n",
        a.output.display(),
        a.device,
        report.sends,
        report.writes,
        report.frames,
        report.completions
    ))
}

/// The emulated device in step mode with its recorder attached.
fn record_emu() -> Result<(String, ScenarioReport), TraceCmdError> {
    use crate::emu::{DeviceConfig, Recorder};
    let mut be = crate::backend::EmuBackend::step_mode(DeviceConfig::default());
    be.with(|d| d.start_recording_to(Recorder::new(FAMILY, None)));
    let report = run_scenario(&mut be, &mut NoTap)?;
    let body = be
        .with(|d| d.recorder().map(|r| r.text().to_string()))
        .unwrap_or_default();
    be.with(|d| d.stop_recording());
    let origin = "emulator: records written by the emulated device, its own view as `# expect:` \
                  (NOT hardware)";
    Ok((header(&be.device_info(), origin) + &body, report))
}

/// A ConnectX, the host recording.
#[cfg(feature = "verbs")]
fn record_device(name: &str) -> Result<(String, ScenarioReport), TraceCmdError> {
    let mut be = crate::verbs::VerbsBackend::open(name).map_err(BackendError::from)?;
    let info = be.device_info();
    let mut tap = crate::verbs::capture::HostTap::new(HostTrace::new(&info, FAMILY));
    let report = run_scenario(&mut be, &mut tap)?;
    let origin = "captured: ring bytes the device wrote (and WQEs the core posted), read by the \
                  host around each post and poll";
    Ok((header(&info, origin) + tap.trace.text(), report))
}

/// Without the `verbs` feature only `emu` exists.
#[cfg(not(feature = "verbs"))]
fn record_device(name: &str) -> Result<(String, ScenarioReport), TraceCmdError> {
    Err(TraceCmdError::Unavailable(BackendError::NeedsVerbs {
        device: name.to_string(),
    }))
}

// ---------------------------------------------------------------------------
// The format
// ---------------------------------------------------------------------------

/// The comment lines a recorded file starts with: device name, model,
/// firmware, where the bytes come from, and every capability.
pub fn header(info: &DeviceInfo, origin: &str) -> String {
    let mut t = String::new();
    let _ = writeln!(t, "# mlx5dp trace record, scenario family `{FAMILY}`");
    let _ = writeln!(t, "# Device: {}", info.name);
    let _ = writeln!(t, "# Model: {}", info.model);
    let _ = writeln!(t, "# Firmware: {}", info.fw_ver);
    let _ = writeln!(t, "# Origin: {origin}");
    let _ = writeln!(t, "# Capabilities:");
    for (k, v) in &info.caps {
        let _ = writeln!(t, "#   {k} = {v}");
    }
    let _ = writeln!(
        t,
        "# Format: hw-traces/README.md. Addresses and keys differ from run to run."
    );
    let _ = writeln!(t);
    t
}

/// One record, as [`write_record`] formats it.
#[derive(Debug, Clone)]
pub struct RecordLines<'a> {
    /// The id in brackets.
    pub id: String,
    /// The rest of the `# source:` line.
    pub source: String,
    /// `# recorded-by:` (emulator) or `# captured-by:` (host), and its value.
    pub by: (&'static str, &'static str),
    /// `emulator` or `captured`.
    pub origin: &'static str,
    /// `wqe`, `cqe64`, `dbrec`, `mmio_write`, ...
    pub kind: &'static str,
    /// The `# device:` line.
    pub device: &'a str,
    /// The queue parameters, in order.
    pub params: &'a [(&'static str, String)],
    /// `key=value` pairs of the `# expect:` line.
    pub expect: &'a [(String, String)],
    /// Notes (written with the `(mlx5dp)` prefix).
    pub notes: &'a [String],
    /// The bytes, in memory order.
    pub bytes: &'a [u8],
}

/// Appends one record to `out` in the `hw-traces/` format.
pub fn write_record(out: &mut String, r: &RecordLines<'_>) {
    let _ = writeln!(out);
    let _ = writeln!(out, "# source: [{}] {}", r.id, r.source);
    let _ = writeln!(out, "# {}: {}", r.by.0, r.by.1);
    let _ = writeln!(out, "# origin: {}", r.origin);
    let _ = writeln!(out, "# kind: {}", r.kind);
    let _ = writeln!(out, "# device: {}", r.device);
    for (k, v) in r.params {
        let _ = writeln!(out, "# {k}: {v}");
    }
    let expect: Vec<String> = r.expect.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let _ = writeln!(out, "# expect: {}", expect.join(" "));
    for n in r.notes {
        let _ = writeln!(out, "# note: (mlx5dp) {n}");
    }
    out.push_str(&crate::hexdump::to_plain_hex(r.bytes));
}

/// The records the host writes on hardware (`# origin: captured`).
#[derive(Debug, Clone)]
pub struct HostTrace {
    device: String,
    label: String,
    family: String,
    text: String,
    seq: u32,
    by_kind: BTreeMap<&'static str, u32>,
}

/// The `# qp:` name of a QP type.
pub fn qp_name(t: QpType) -> &'static str {
    match t {
        QpType::Rc => "rc",
        QpType::Uc => "uc",
        QpType::Ud => "ud",
        QpType::XrcIni | QpType::XrcTgt => "xrc",
        QpType::RawPacket => "raw",
    }
}

impl HostTrace {
    /// An empty trace of `info`'s device for scenario family `family`.
    pub fn new(info: &DeviceInfo, family: &str) -> Self {
        Self {
            label: info.name.clone(),
            device: format!("{} {}, firmware {}", info.name, info.model, info.fw_ver),
            family: family.to_string(),
            text: String::new(),
            seq: 0,
            by_kind: BTreeMap::new(),
        }
    }

    /// The records so far.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Records written, by kind.
    pub fn counts(&self) -> &BTreeMap<&'static str, u32> {
        &self.by_kind
    }

    fn push(
        &mut self,
        kind: &'static str,
        params: Vec<(&'static str, String)>,
        expect: Vec<(String, String)>,
        note: String,
        bytes: &[u8],
    ) {
        self.seq += 1;
        *self.by_kind.entry(kind).or_default() += 1;
        let r = RecordLines {
            id: format!("hw-{}-{}-{:04}", self.label, self.family, self.seq),
            source: format!(
                "mlx5dp trace record on {}, scenario family `{}`, record {}",
                self.label, self.family, self.seq
            ),
            by: ("captured-by", CAPTURED_BY),
            origin: "captured",
            kind,
            device: &self.device,
            params: &params,
            expect: &expect,
            notes: &[note],
            bytes,
        };
        write_record(&mut self.text, &r);
    }

    /// A send WQE the core posted at free-running WQEBB index `index` of
    /// `qpn`'s ring of `ring_size` WQEBBs, as read back after `complete`.
    pub fn wqe(&mut self, qp: QpType, qpn: u32, ring_size: u32, index: u32, bytes: &[u8]) {
        self.push(
            "wqe",
            vec![
                ("queue", format!("sq {qpn:#x}")),
                ("qp", qp_name(qp).to_string()),
                ("ring-size", ring_size.to_string()),
                ("ci", index.to_string()),
            ],
            vec![
                ("qpn".to_string(), format!("{qpn:#x}")),
                ("wqe_index".to_string(), format!("{:#x}", index & 0xffff)),
            ],
            "a WQE as the core left it in the send ring (read back by the host after complete)"
                .to_string(),
            bytes,
        );
    }

    /// A doorbell-record word (`queue` is `sq`, `rq` or `srq`), as in memory.
    pub fn dbrec(&mut self, queue: &'static str, num: u32, word: u8, bytes: [u8; 4]) {
        self.push(
            "dbrec",
            vec![
                ("queue", format!("{queue} {num:#x}")),
                ("word", word.to_string()),
            ],
            Vec::new(),
            "the doorbell-record word after the core published it".to_string(),
            &bytes,
        );
    }

    /// The 8-byte doorbell the core wrote to the UAR at `offset` for `qpn`.
    pub fn doorbell(&mut self, qp: QpType, qpn: u32, offset: usize, bytes: &[u8]) {
        self.push(
            "mmio_write",
            vec![
                ("queue", format!("sq {qpn:#x}")),
                ("qp", qp_name(qp).to_string()),
                ("offset", format!("{offset:#x}")),
            ],
            Vec::new(),
            "the 8-byte doorbell value (the last WQE's first control-segment bytes); the \
             register itself cannot be read back"
                .to_string(),
            bytes,
        );
    }

    /// A CQE slot of CQ `cqn` (ring of `ring_size` slots of `slot_bytes`)
    /// at free-running index `ci`, as the device left it.
    pub fn cqe(&mut self, cqn: u32, ring_size: u32, ci: u32, slot_bytes: usize, bytes: &[u8]) {
        let opcode = bytes.last().map_or(0, |b| b >> 4);
        let error = matches!(opcode, 0xd | 0xe);
        let kind = match (error, slot_bytes) {
            (true, 128) => "error_cqe128",
            (false, 128) => "cqe128",
            (true, _) => "error_cqe64",
            (false, _) => "cqe64",
        };
        self.push(
            kind,
            vec![
                ("queue", format!("cq {cqn:#x}")),
                ("cqe-size", slot_bytes.to_string()),
                ("layout", "none".to_string()),
                ("ring-size", ring_size.to_string()),
                ("ci", ci.to_string()),
            ],
            Vec::new(),
            "a CQE software owned when the poll began and the poll consumed (read by the host \
             before the poll)"
                .to_string(),
            bytes,
        );
    }
}

// ---------------------------------------------------------------------------
// The scenario
// ---------------------------------------------------------------------------

/// The host's hooks around each post and poll of [`run_scenario`]. The
/// default does nothing (the emulator records from the device side).
pub trait Tap {
    /// `complete` published WQEBBs `from..to` (free-running) of `sq` and
    /// rang the doorbell at BlueFlame offset `bf_offset`.
    fn posted(&mut self, sq: &CoreSq, from: u32, to: u32, bf_offset: usize) {
        let _ = (sq, from, to, bf_offset);
    }

    /// A receive queue's `commit` wrote its doorbell record.
    fn recv_published(&mut self, rq: &CoreRq) {
        let _ = rq;
    }

    /// A poll of `cq` is about to start at consumer index `ci`.
    fn before_poll(&mut self, cq: &CoreCq, ci: u32) {
        let _ = (cq, ci);
    }

    /// The poll moved the consumer index from `before` to `after`.
    fn after_poll(&mut self, cq: &CoreCq, before: u32, after: u32) {
        let _ = (cq, before, after);
    }
}

/// A [`Tap`] that records nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoTap;

impl Tap for NoTap {}

/// What the scenario did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ScenarioReport {
    /// Sends (all delivered and checked).
    pub sends: u32,
    /// RDMA writes (all checked in the remote buffer).
    pub writes: u32,
    /// Raw Ethernet frames sent.
    pub frames: u32,
    /// Completions polled.
    pub completions: u32,
}

/// A raw QP's send queue as the poller retires it.
#[derive(Debug)]
struct RawSq {
    qpn: u32,
    sq: SendQueue<'static, DoorbellOnly, AnyQp>,
}

impl WorkQueues for RawSq {
    fn retire_send(
        &mut self,
        wq: WqRef,
        wqe_counter: u16,
        _: WcStatus,
    ) -> Result<SendRetired, LookupError> {
        if wq.qpn != self.qpn {
            return Err(LookupError::UnknownQueue);
        }
        let r = self
            .sq
            .retire(wqe_counter)
            .map_err(|_| LookupError::NotInFlight)?;
        Ok(SendRetired {
            wr_id: r.wr_id,
            wr_opcode: r.wr_opcode,
        })
    }

    fn retire_recv(&mut self, _: WqRef, _: u16, _: WcStatus) -> Result<RecvRetired, LookupError> {
        Err(LookupError::UnknownQueue)
    }
}

/// How long the scenario waits for its completions.
const DEADLINE: Duration = Duration::from_secs(10);

/// Polls `cq` (tapping around each poll) until `want` completions came.
fn poll_until<B: Backend + ?Sized, W: WorkQueues>(
    be: &mut B,
    cq: &mut Cq,
    owner: &CoreCq,
    w: &mut W,
    tap: &mut dyn Tap,
    want: u32,
) -> Result<u32, TraceCmdError> {
    let start = Instant::now();
    let mut got = 0;
    while got < want {
        be.progress();
        let ci = cq.consumer_index();
        tap.before_poll(owner, ci);
        let seen = drain(cq, w, 16)?;
        tap.after_poll(owner, ci, cq.consumer_index());
        got += seen.sends + seen.recvs;
        if start.elapsed() > DEADLINE {
            return Err(TraceCmdError::Run(format!(
                "CQ {:#x}: {got} of {want} completions after {DEADLINE:?}",
                cq.cqn()
            )));
        }
    }
    Ok(got)
}

fn post_err(e: impl fmt::Debug) -> TraceCmdError {
    TraceCmdError::Run(format!("post: {e:?}"))
}

/// Runs the scenario on `be`, calling `tap` around every post and poll.
pub fn run_scenario<B: Backend + ?Sized>(
    be: &mut B,
    tap: &mut dyn Tap,
) -> Result<ScenarioReport, TraceCmdError> {
    let mut rep = ScenarioReport::default();
    let pd = be.alloc_pd()?;
    // RC: a sends and writes to b.
    let (cq_a_owner, mut cq_a) = rig::cq_with_owner(be, 64, None, false)?;
    let (cq_b_owner, mut cq_b) = rig::cq_with_owner(be, 64, None, false)?;
    let rc = |cq: &Cq| QpInit {
        qp_type: QpType::Rc,
        pd,
        send_cq: Some(Cqn(cq.cqn())),
        recv_cq: Some(Cqn(cq.cqn())),
        sq_wqebbs: 64,
        max_send_sge: 2,
        max_inline: 64,
        rq: RqInit::Cyclic {
            wqe_cnt: 16,
            max_sge: 1,
        },
        xrcd: None,
        vlan_strip: false,
    };
    let a = rig::qp(be, rc(&cq_a))?;
    let b = rig::qp(be, rc(&cq_b))?;
    be.connect(a.qpn, b.qpn, ConnectAttr::default())?;
    let src = be.reg_buffer(pd, 1 << 14, Access::ALL)?;
    let dst = be.reg_buffer(pd, 1 << 14, Access::ALL)?;
    let side = |be: &B, h: &'static QpHandle| -> Result<Side<DoorbellOnly>, TraceCmdError> {
        Ok(Side {
            qpn: h.qpn.0,
            sq: rig::send_queue(be, h, |_| {})?,
            rq: rig::recv_queue(h)?,
        })
    };
    let mut q = Sides {
        a: side(be, a)?,
        b: side(be, b)?,
    };
    let (a_sq, b_rq) = match (a.sq.as_ref(), b.rq.as_ref()) {
        (Some(s), Some(r)) => (s, r),
        _ => return Err(TraceCmdError::Run("the RC QPs lack a queue".into())),
    };

    // Three receives of 1 KiB on b.
    for i in 0..3u64 {
        let sge = RSge {
            addr: dst.addr(1024 * i as usize),
            length: 1024,
            lkey: dst.key,
        };
        q.b.rq.post(0x100 + i, &[sge]).map_err(post_err)?;
    }
    q.b.rq.commit();
    tap.recv_published(b_rq);

    // Sends: a gather list of two entries, inline data, and immediate data.
    let msgs: Vec<Vec<u8>> = [300usize, 48, 200]
        .iter()
        .enumerate()
        .map(|(i, &n)| (0..n).map(|k| (k * 7 + i * 31 + 1) as u8).collect())
        .collect();
    src.write(0, &msgs[0]);
    src.write(0x400, &msgs[2]);
    let from = q.a.sq.producer();
    let bf = q.a.sq.bf_offset();
    {
        let mut batch = q.a.sq.start();
        batch
            .send(1)
            .map_err(post_err)?
            .signaled()
            .sge_list(&[
                Sge::new(src.key, src.addr(0), 100),
                Sge::new(src.key, src.addr(100), 200),
            ])
            .map_err(post_err)?;
        batch
            .send(2)
            .map_err(post_err)?
            .signaled()
            .inline_data(&msgs[1])
            .map_err(post_err)?;
        batch
            .send_imm(3, 0x1234_5678)
            .map_err(post_err)?
            .signaled()
            .sge(src.key, src.addr(0x400), 200)
            .map_err(post_err)?;
        batch.complete();
    }
    tap.posted(a_sq, from, q.a.sq.producer(), bf);
    rep.sends = 3;

    // RDMA writes: from a gather entry, and inline.
    let payload: Vec<u8> = (0..256u32).map(|k| (k * 13 + 5) as u8).collect();
    src.write(0x800, &payload);
    let from = q.a.sq.producer();
    let bf = q.a.sq.bf_offset();
    {
        let mut batch = q.a.sq.start();
        batch
            .rdma_write(4, dst.key, dst.addr(0x2000))
            .map_err(post_err)?
            .signaled()
            .sge(src.key, src.addr(0x800), 256)
            .map_err(post_err)?;
        batch
            .rdma_write(5, dst.key, dst.addr(0x3000))
            .map_err(post_err)?
            .signaled()
            .inline_data(b"mlx5dp trace record")
            .map_err(post_err)?;
        batch.complete();
    }
    tap.posted(a_sq, from, q.a.sq.producer(), bf);
    rep.writes = 2;

    rep.completions += poll_until(be, &mut cq_b, cq_b_owner, &mut q, tap, 3)?;
    rep.completions += poll_until(be, &mut cq_a, cq_a_owner, &mut q, tap, 5)?;
    let expect: [(usize, &[u8]); 5] = [
        (0, &msgs[0]),
        (1024, &msgs[1]),
        (2048, &msgs[2]),
        (0x2000, &payload),
        (0x3000, b"mlx5dp trace record"),
    ];
    for (off, want) in expect {
        if dst.read(off, want.len()) != want {
            return Err(TraceCmdError::Run(format!(
                "the data at {off:#x} of the receiver differs from what was sent"
            )));
        }
    }

    // A raw Ethernet burst of eight frames (no receiver: the emulator drops
    // them by steering, a ConnectX puts them on the wire).
    let (cq_r_owner, mut cq_r) = rig::cq_with_owner(be, 64, None, false)?;
    let r = rig::qp(
        be,
        QpInit {
            qp_type: QpType::RawPacket,
            pd,
            send_cq: Some(Cqn(cq_r.cqn())),
            recv_cq: Some(Cqn(cq_r.cqn())),
            sq_wqebbs: 64,
            max_send_sge: 1,
            max_inline: 128,
            rq: RqInit::None,
            xrcd: None,
            vlan_strip: false,
        },
    )?;
    be.bring_up(r.qpn, None, 0, ConnectAttr::default())?;
    let r_sq =
        r.sq.as_ref()
            .ok_or_else(|| TraceCmdError::Run("the raw QP has no send queue".into()))?;
    let mut raw = RawSq {
        qpn: r.qpn.0,
        sq: rig::send_queue(be, r, |_| {})?,
    };
    let frames: Vec<Vec<u8>> = (0..8u16)
        .map(|i| udp_frame(64 + 16 * usize::from(i), i))
        .collect();
    let fbuf = be.reg_buffer(pd, 8 * 256, Access::ALL)?;
    for (i, f) in frames.iter().enumerate() {
        fbuf.write(256 * i, f);
    }
    let from = raw.sq.producer();
    let bf = raw.sq.bf_offset();
    {
        let mut batch = raw.sq.start();
        for (i, f) in frames.iter().enumerate() {
            batch
                .send(0x200 + i as u64)
                .map_err(post_err)?
                .signaled()
                .frame(fbuf.key, fbuf.addr(256 * i), f)
                .map_err(post_err)?;
        }
        batch.complete();
    }
    tap.posted(r_sq, from, raw.sq.producer(), bf);
    rep.frames = 8;
    rep.completions += poll_until(be, &mut cq_r, cq_r_owner, &mut raw, tap, 8)?;
    Ok(rep)
}

// ---------------------------------------------------------------------------
// Replay
// ---------------------------------------------------------------------------

/// What [`replay`] checked.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ReplaySummary {
    /// Records read.
    pub records: usize,
    /// Of which recorded by the emulated device.
    pub emulated: usize,
    /// Of which captured (hardware, or the host-side recorder).
    pub captured: usize,
    /// Expect values and `# ci:` implications checked.
    pub checked: usize,
    /// Expect values of published dumps that describe the queue, not the
    /// entry (`decode::published::CONTEXT_ONLY`): read, not checkable.
    pub context_only: usize,
}

/// A `# key: value` line of a record that the parser keeps in `other`.
pub fn param<'a>(rec: &'a TraceRecord, key: &str) -> Option<&'a str> {
    rec.other
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

fn need<'a>(rec: &'a TraceRecord, key: &str) -> Result<&'a str, String> {
    param(rec, key).ok_or_else(|| format!("no `# {key}:` line"))
}

/// A number as trace records and their sources write it: decimal (`1024`)
/// or hex (`0x1dbb`, `0X1DBB`).
pub fn number(s: &str) -> Option<u64> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

fn need_num(rec: &TraceRecord, key: &str) -> Result<u64, String> {
    let v = need(rec, key)?;
    number(v).ok_or_else(|| format!("`# {key}: {v}` is not a number"))
}

/// What a record decodes to: one object, or a session's completions.
#[derive(Debug, Clone)]
pub enum Decoded {
    /// A CQE, WQE, mini-CQE list, doorbell word or UAR write.
    One(Value),
    /// The completions the core's poller reported from a session.
    Session(Vec<Value>),
}

fn cqe_size(rec: &TraceRecord) -> Result<DCqeSize, String> {
    match need(rec, "cqe-size")? {
        "64" => Ok(DCqeSize::B64),
        "128" => Ok(DCqeSize::B128),
        v => Err(format!("cqe-size {v}")),
    }
}

/// Rebuilds a ring of `ring-size` slots around a session's bytes (at the
/// slots from `ci`), every other slot one software must not poll, and polls
/// it with the core's poller through `decode_ring`.
fn decode_session(rec: &TraceRecord) -> Result<Vec<Value>, String> {
    let size = cqe_size(rec)?;
    let stride = size.bytes();
    let cnt = u32::try_from(need_num(rec, "ring-size")?).map_err(|e| e.to_string())?;
    let ci = u32::try_from(need_num(rec, "ci")?).map_err(|e| e.to_string())?;
    if !cnt.is_power_of_two() {
        return Err(format!("ring-size {cnt} is not a power of two"));
    }
    let layout = match need(rec, "layout")? {
        "basic" => CqLayout::Basic,
        "enhanced" => CqLayout::Enhanced,
        v => return Err(format!("layout {v} has no sessions")),
    };
    let fname = rec.mini_format.as_deref().ok_or("no `# mini-format:`")?;
    let mini_format = [
        MiniFormat::Hash,
        MiniFormat::Csum,
        MiniFormat::FtagStridx,
        MiniFormat::CsumStridx,
        MiniFormat::L34hStridx,
        MiniFormat::Req,
    ]
    .into_iter()
    .find(|f| f.name() == fname)
    .ok_or_else(|| format!("mini-format {fname}"))?;
    let striding_rq = need(rec, "striding-rq")? == "true";
    if rec.bytes.len() % stride != 0 || rec.bytes.len() / stride > cnt as usize {
        return Err(format!(
            "{} bytes are not whole {stride}-byte slots within a ring of {cnt}",
            rec.bytes.len()
        ));
    }
    let used = (rec.bytes.len() / stride) as u32;
    let mut ring = vec![0u8; stride * cnt as usize];
    for k in 0..cnt {
        let idx = ci.wrapping_add(k);
        let slot = (idx & (cnt - 1)) as usize * stride;
        let dst = &mut ring[slot..slot + stride];
        if k < used {
            dst.copy_from_slice(&rec.bytes[k as usize * stride..(k as usize + 1) * stride]);
        } else {
            // Not software's: INVALID opcode, the other pass's owner bit,
            // a validity count off by 128.
            let parity = (idx / cnt) & 1 == 1;
            let iteration = (idx / cnt) as u8;
            dst[stride - 1] = 0xf0 | u8::from(!parity);
            dst[stride - 2] = iteration.wrapping_add(0x80);
        }
    }
    let params = RingParams {
        cqe_size: size,
        cqe_cnt: cnt,
        ci,
        layout,
        mini_format,
        striding_rq,
    };
    let d = decode_ring(&ring, &params).map_err(|e| e.to_string())?;
    Ok(d.completions.iter().map(|c| c.fields().to_json()).collect())
}

fn arm_json(word: u32) -> Value {
    let w = CqArmWord::from_bits(mlx5dp::prm::Be32::new(word));
    serde_json::json!({ "raw": word, "cmd": w.cmd(), "arm_sn": w.arm_sn(), "ci": w.ci() })
}

fn dqp(rec: &TraceRecord) -> Result<Option<DQp>, String> {
    rec.qp_type().map_err(|e| e.to_string())
}

/// Decodes a record of any kind `hw-traces/` holds.
pub fn decode(rec: &TraceRecord) -> Result<Decoded, String> {
    match rec.kind.as_str() {
        "cqe_session" => decode_session(rec).map(Decoded::Session),
        "dbrec" => {
            let b: [u8; 4] = rec.bytes.as_slice().try_into().map_err(|_| {
                format!("a doorbell record word is 4 bytes, got {}", rec.bytes.len())
            })?;
            let v = u32::from_be_bytes(b);
            let queue = need(rec, "queue")?.split_whitespace().next().unwrap_or("");
            let word = need_num(rec, "word")?;
            let j = match (queue, word) {
                // CQ record word 0: the 24-bit consumer index.
                ("cq", 0) => serde_json::json!({ "raw": v, "ci": v & 0x00ff_ffff }),
                // CQ record word 1: the arm word (rdma-core `mlx5_arm_cq`).
                ("cq", 1) => arm_json(v),
                // SQ word 1, RQ/SRQ word 0: the 16-bit WQE counter.
                ("sq", 1) | ("rq", 0) | ("srq", 0) => {
                    serde_json::json!({ "raw": v, "counter": v & 0xffff })
                }
                _ => return Err(format!("no doorbell-record word {word} on a {queue}")),
            };
            Ok(Decoded::One(j))
        }
        "mmio_write" => {
            let queue = need(rec, "queue")?.split_whitespace().next().unwrap_or("");
            match queue {
                "cq" => {
                    let b: [u8; 8] = rec.bytes.as_slice().try_into().map_err(|_| {
                        format!("a CQ arm doorbell is 8 bytes, got {}", rec.bytes.len())
                    })?;
                    let mut j = arm_json(u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
                    j["cqn"] = Value::from(u32::from_be_bytes([b[4], b[5], b[6], b[7]]));
                    Ok(Decoded::One(j))
                }
                "sq" => {
                    // An 8-byte doorbell is the control segment's first 8
                    // bytes; a BlueFlame copy is the WQE's first bytes.
                    let mut b = rec.bytes.clone();
                    let whole = b.len().div_ceil(16).max(1) * 16;
                    b.resize(whole, 0);
                    decode_wqe(&b, dqp(rec)?)
                        .map(|w| Decoded::One(w.to_json()))
                        .map_err(|e| e.to_string())
                }
                q => Err(format!("no UAR write for queue `{q}`")),
            }
        }
        _ => rec
            .decode()
            .map(|d| Decoded::One(d.to_json()))
            .map_err(|e| e.to_string()),
    }
}

/// Looks a key up: a field name; `seg.<type>[#k].<field>` (the k-th
/// segment of that type); `payload_bytes` / `sges` (data and inline
/// segments); `completions` / `c<i>.<field>` (a session).
pub fn lookup(d: &Decoded, key: &str) -> Result<Value, String> {
    match d {
        Decoded::Session(cs) => {
            if key == "completions" {
                return Ok(Value::from(cs.len()));
            }
            let (ci, field) = key
                .strip_prefix('c')
                .and_then(|k| k.split_once('.'))
                .ok_or_else(|| format!("session key `{key}` is not c<i>.<field>"))?;
            let i: usize = ci.parse().map_err(|_| format!("bad index in `{key}`"))?;
            let c = cs
                .get(i)
                .ok_or_else(|| format!("completion {i} not decoded ({} were)", cs.len()))?;
            c.get(field)
                .cloned()
                .ok_or_else(|| format!("completion {i} has no field `{field}`"))
        }
        Decoded::One(j) => {
            let segs = || j["segments"].as_array().cloned().unwrap_or_default();
            let data = |s: &Value| matches!(s["type"].as_str(), Some("data" | "inline"));
            match key {
                "payload_bytes" => Ok(Value::from(
                    segs()
                        .iter()
                        .filter(|s| data(s))
                        .map(|s| s["byte_count"].as_u64().unwrap_or(0))
                        .sum::<u64>(),
                )),
                "sges" => Ok(Value::from(segs().iter().filter(|s| data(s)).count())),
                _ => match key.strip_prefix("seg.") {
                    Some(rest) => {
                        let (ty, field) = rest
                            .split_once('.')
                            .ok_or_else(|| format!("`{key}` is not seg.<type>.<field>"))?;
                        let (ty, k) = match ty.split_once('#') {
                            Some((t, k)) => (t, k.parse::<usize>().map_err(|e| e.to_string())?),
                            None => (ty, 0),
                        };
                        let s = segs()
                            .into_iter()
                            .filter(|s| s["type"] == ty)
                            .nth(k)
                            .ok_or_else(|| format!("no segment {ty}#{k}"))?;
                        s.get(field)
                            .cloned()
                            .ok_or_else(|| format!("segment {ty}#{k} has no field `{field}`"))
                    }
                    None => j
                        .get(key)
                        .cloned()
                        .ok_or_else(|| format!("decoded output has no field `{key}`")),
                },
            }
        }
    }
}

fn matches(got: &Value, want: &str) -> bool {
    match got {
        Value::Number(n) => n.as_u64().is_some() && n.as_u64() == number(want),
        Value::Bool(b) => b.to_string() == want,
        Value::String(s) => s.to_lowercase().replace(' ', "_") == want.to_lowercase(),
        _ => false,
    }
}

/// The owner bit / validity count a CQE at `# ci:` must carry and the WQE
/// index a WQE at `# ci:` must carry, when the record has those lines.
fn check_params(rec: &TraceRecord, d: &Decoded) -> Result<usize, String> {
    let Decoded::One(j) = d else { return Ok(0) };
    if param(rec, "ci").is_none() {
        return Ok(0);
    }
    match rec.kind.as_str() {
        "cqe64" | "cqe128" | "error_cqe64" | "error_cqe128" => {
            let cnt = need_num(rec, "ring-size")?;
            let ci = need_num(rec, "ci")?;
            if cnt == 0 {
                return Err("ring-size 0".into());
            }
            if need(rec, "layout")? == "enhanced" {
                let want = (ci / cnt) & 0xff;
                if j["signature"].as_u64() != Some(want) {
                    return Err(format!(
                        "ci {ci} of a ring of {cnt}: validity count {want:#x}, decoded {}",
                        j["signature"]
                    ));
                }
            } else {
                let want = (ci / cnt) & 1;
                if j["owner"].as_u64() != Some(want) {
                    return Err(format!(
                        "ci {ci} of a ring of {cnt}: owner bit {want}, decoded {}",
                        j["owner"]
                    ));
                }
            }
            Ok(1)
        }
        "wqe" => {
            let ci = need_num(rec, "ci")?;
            if j["wqe_index"].as_u64() != Some(ci & 0xffff) {
                return Err(format!(
                    "ci {ci}: wqe_index {:#x}, decoded {}",
                    ci & 0xffff,
                    j["wqe_index"]
                ));
            }
            Ok(1)
        }
        _ => Ok(0),
    }
}

/// Decodes one record written by `mlx5dp trace record` and checks its
/// stored values (decoded field names, `seg.*`, `c<i>.*`); returns how
/// many. Published dumps are checked by
/// [`crate::decode::published::check_record`] instead ([`replay`] chooses
/// with [`crate::decode::published::is_published`]). Emulated records must
/// say `# recorded-by: mlx5dp emulated device` and carry expect values;
/// captured ones must not say `recorded-by`.
pub fn check_record(rec: &TraceRecord) -> Result<usize, String> {
    let emulated = rec.origin == "emulator";
    if emulated && param(rec, "recorded-by") != Some(crate::emu::record::RECORDED_BY) {
        return Err("an emulator record without `# recorded-by: mlx5dp emulated device`".into());
    }
    if !emulated && param(rec, "recorded-by").is_some() {
        return Err(format!(
            "origin `{}` but `# recorded-by:` (emulator records say `origin: emulator`)",
            rec.origin
        ));
    }
    if emulated && rec.expect.is_empty() {
        return Err("no expect values".into());
    }
    let d = decode(rec)?;
    if let Decoded::One(j) = &d {
        if rec.kind.starts_with("error_cqe")
            && !j["opcode"].as_str().is_some_and(|o| o.ends_with("err"))
        {
            return Err(format!(
                "kind {} but decoded opcode {}",
                rec.kind, j["opcode"]
            ));
        }
    }
    let mut n = check_params(rec, &d)?;
    for (k, v) in &rec.expect {
        let got = lookup(&d, k).map_err(|e| format!("{k}={v}: {e}"))?;
        if !matches(&got, v) {
            return Err(format!("{k}: the record says {v}, decoded {got}"));
        }
        n += 1;
    }
    Ok(n)
}

/// Reads a trace file and replays every record; the failures, one line
/// each (`[id] what`), if any.
pub fn replay(text: &str) -> Result<ReplaySummary, Vec<String>> {
    let recs = parse_records(text).map_err(|e| vec![e.to_string()])?;
    let mut s = ReplaySummary {
        records: recs.len(),
        ..ReplaySummary::default()
    };
    let mut failures = Vec::new();
    for rec in &recs {
        if rec.origin == "emulator" {
            s.emulated += 1;
        } else {
            s.captured += 1;
        }
        let checked = if crate::decode::published::is_published(rec) {
            crate::decode::published::check_record(rec).map(|(n, context)| {
                s.context_only += context.len();
                n
            })
        } else {
            check_record(rec)
        };
        match checked {
            Ok(n) => s.checked += n,
            Err(e) => failures.push(format!("[{}] (line {}): {e}", rec.id, rec.line)),
        }
    }
    if failures.is_empty() {
        Ok(s)
    } else {
        Err(failures)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emulated_record_replays() {
        let (text, rep) = record_emu().expect("record");
        assert_eq!(
            rep,
            ScenarioReport {
                sends: 3,
                writes: 2,
                frames: 8,
                completions: 16
            }
        );
        assert!(text.starts_with("# mlx5dp trace record"));
        assert!(text.contains("# Device: emu"));
        assert!(text.contains("# Firmware: "));
        assert!(text.contains("#   max_inline = 912"));
        let s = replay(&text).unwrap_or_else(|e| panic!("{e:#?}"));
        assert_eq!(s.captured, 0);
        assert!(s.emulated > 20, "{s:?}");
        assert!(s.checked > 100, "{s:?}");
        for kind in ["wqe", "cqe64", "dbrec", "mmio_write"] {
            assert!(
                text.contains(&format!("# kind: {kind}\n")),
                "no {kind} record"
            );
        }
    }

    #[test]
    fn a_wrong_value_fails_replay() {
        let (text, _) = record_emu().expect("record");
        let bad = text.replacen("# expect: opcode_raw=0xa", "# expect: opcode_raw=0xb", 1);
        assert_ne!(bad, text);
        let e = replay(&bad).expect_err("a wrong expectation must fail");
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(e[0].contains("opcode_raw"), "{e:?}");
    }

    #[test]
    fn host_records_format() {
        let info = DeviceInfo {
            name: "mlx5_9".into(),
            fw_ver: "1.2.3".into(),
            model: "ConnectX-5 (PCI part 0x1017)".into(),
            caps: vec![("max_sge".into(), "30".into())],
        };
        let mut t = HostTrace::new(&info, FAMILY);
        // A NOP at index 5 of QP 0x42: opmod 0, opcode NOP, ds 1.
        let mut wqe = [0u8; 64];
        wqe[..8].copy_from_slice(&[0, 0, 5, 0, 0, 0, 0x42, 1]);
        t.wqe(QpType::Rc, 0x42, 64, 5, &wqe);
        t.dbrec("sq", 0x42, 1, 6u32.to_be_bytes());
        t.doorbell(QpType::Rc, 0x42, 0x800, &wqe[..8]);
        let text = header(&info, "captured") + t.text();
        assert!(text.contains("# Firmware: 1.2.3"));
        let s = replay(&text).unwrap_or_else(|e| panic!("{e:#?}\n{text}"));
        assert_eq!((s.records, s.captured), (3, 3));
        // qpn, wqe_index and the index `ci` implies.
        assert_eq!(s.checked, 3);
        let wrong = text.replace("wqe_index=0x5", "wqe_index=0x6");
        assert!(replay(&wrong).is_err());
    }
}
