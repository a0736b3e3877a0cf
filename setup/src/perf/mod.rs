//! `mlx5dp perf`: perftest- and testpmd-style measurements of the core's
//! data path, on the emulated ConnectX (its own thread) by default, or on a
//! ConnectX with `--device NAME` (feature `verbs`; both QPs on one port,
//! connected to each other, as perftest's loopback runs).
//!
//! - [`lat`]: `send-lat`, `write-lat`: ping-pong between two QPs;
//! - [`bw`]: `send-bw`, `write-bw`, `read-bw`, `atomic-bw`: a window of
//!   outstanding work with selective signalling;
//! - [`raw`]: `raw-tx` (eMPW, inline or pointer, or one WQE per packet) and
//!   `raw-rx` (striding or cyclic RQ, CQE compression on or off);
//! - [`runner`]: iterations or duration, and the progress bar (stderr, only
//!   on a terminal); [`stats`]: percentiles, histogram, rates;
//!   [`output`]: the table and the JSON; [`rig`]: the core's queues over a
//!   backend's raw parts (the one module with `unsafe`).
//!
//! Every figure is end to end: the core posts and polls on this thread,
//! the device (the emulated one on its own thread, or the NIC) parses every
//! WQE, moves every byte and writes every CQE. On the emulated device the
//! figures measure this software pair on this machine, never a ConnectX.
//! Every test runs through [`crate::backend::Backend`], so the same code
//! drives both; what needs the emulator (`raw-rx`: the frames it sends
//! looped back into its receive queue on the same port) is refused on a
//! verbs device. UD runs take their address vector from
//! [`crate::backend::Backend::create_ah`] on either.
//!
//! Errors: bad arguments and an unavailable device exit with status 2
//! ([`PerfError::exit_code`]); a failure during the run with 1.
#![deny(unsafe_code)]

pub mod bw;
pub mod lat;
pub mod output;
pub mod pair;
pub mod raw;
#[expect(
    unsafe_code,
    reason = "the core's constructors over the backend's raw parts"
)]
pub mod rig;
pub mod runner;
pub mod stats;

use crate::backend::Backend;
use crate::emu::{CompressionCfg, CompressionLayout};
use clap::{Args, ValueEnum};
use mlx5dp::prm::MiniCqeFormat;
use std::fmt;
use std::time::Duration;

use self::output::Report;
use self::runner::Goal;

/// A perf test.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Test {
    /// Send/receive ping-pong latency.
    SendLat,
    /// RDMA write ping-pong latency (polling memory, as perftest does).
    WriteLat,
    /// Send/receive bandwidth and message rate.
    SendBw,
    /// RDMA write bandwidth and message rate.
    WriteBw,
    /// RDMA read bandwidth and message rate.
    ReadBw,
    /// Atomic fetch-and-add rate.
    AtomicBw,
    /// Raw Ethernet transmit rate (testpmd txonly).
    RawTx,
    /// Raw Ethernet receive rate (testpmd rxonly).
    RawRx,
}

impl Test {
    /// Every test, in the order of the help text.
    pub const ALL: [Test; 8] = [
        Test::SendLat,
        Test::WriteLat,
        Test::SendBw,
        Test::WriteBw,
        Test::ReadBw,
        Test::AtomicBw,
        Test::RawTx,
        Test::RawRx,
    ];

    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Test::SendLat => "send-lat",
            Test::WriteLat => "write-lat",
            Test::SendBw => "send-bw",
            Test::WriteBw => "write-bw",
            Test::ReadBw => "read-bw",
            Test::AtomicBw => "atomic-bw",
            Test::RawTx => "raw-tx",
            Test::RawRx => "raw-rx",
        }
    }

    fn is_lat(self) -> bool {
        matches!(self, Test::SendLat | Test::WriteLat)
    }

    fn is_raw(self) -> bool {
        matches!(self, Test::RawTx | Test::RawRx)
    }
}

/// Transport of the verbs tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum QpArg {
    /// Reliable connected.
    Rc,
    /// Unreliable connected.
    Uc,
    /// Unreliable datagram (send tests only).
    Ud,
}

/// How `raw-tx` puts packets into WQEs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum RawMode {
    /// Enhanced MPW sessions with the frames inlined.
    Inline,
    /// Enhanced MPW sessions of pointer descriptors.
    Pointer,
    /// One SEND WQE per packet (no multi-packet WQE).
    Single,
}

/// Receive queue of `raw-rx`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum RqArg {
    /// Striding (multi-packet) RQ.
    Striding,
    /// Cyclic RQ, one WQE per packet.
    Cyclic,
}

/// `--cqe-compression`: off, or the responder mini-CQE format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum CompArg {
    /// No compression.
    Off,
    /// Hash + byte count.
    Hash,
    /// Checksum + byte count.
    Csum,
    /// Flow tag + stride index (striding RQ).
    FtagStridx,
    /// Checksum + stride index (striding RQ).
    CsumStridx,
    /// L3/L4 header type + stride index (striding RQ).
    L34hStridx,
}

impl CompArg {
    fn format(self) -> Option<MiniCqeFormat> {
        Some(match self {
            CompArg::Off => return None,
            CompArg::Hash => MiniCqeFormat::Hash,
            CompArg::Csum => MiniCqeFormat::Csum,
            CompArg::FtagStridx => MiniCqeFormat::FtagStridx,
            CompArg::CsumStridx => MiniCqeFormat::CsumStridx,
            CompArg::L34hStridx => MiniCqeFormat::L34hStridx,
        })
    }

    fn name(self) -> &'static str {
        match self {
            CompArg::Off => "off",
            CompArg::Hash => "hash",
            CompArg::Csum => "csum",
            CompArg::FtagStridx => "ftag-stridx",
            CompArg::CsumStridx => "csum-stridx",
            CompArg::L34hStridx => "l34h-stridx",
        }
    }

    fn strided(self) -> bool {
        matches!(
            self,
            CompArg::FtagStridx | CompArg::CsumStridx | CompArg::L34hStridx
        )
    }
}

/// Layout of compressed sessions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LayoutArg {
    /// Title CQE + mini-CQE arrays (ConnectX-4 onward).
    Basic,
    /// Enhanced compression (ConnectX-6 Dx onward).
    Enhanced,
}

/// Arguments of `mlx5dp perf`.
#[derive(Debug, Args)]
pub struct PerfArgs {
    /// The test.
    #[arg(value_enum)]
    pub test: Test,
    /// `emu` (the emulated ConnectX, on its own thread) or an RDMA device
    /// name (needs the `verbs` feature).
    #[arg(long, short = 'd', default_value = "emu")]
    pub device: String,
    /// How the emulated device's thread waits when it finds no work
    /// (`emu` only): `throughput` (spin ≈ 13 ms, then yield, then short
    /// naps), `busy` (never gives the CPU away) or `frugal` (yields and
    /// naps at once).
    #[arg(long, value_enum, default_value = "throughput")]
    pub emu_idle: EmuIdle,
    /// Message size in bytes (frame length for raw tests). Defaults: 2
    /// (latency), 65536 (bandwidth), 8 (atomic), 64 (raw).
    #[arg(long, short = 's')]
    pub size: Option<u32>,
    /// Iterations: round trips, messages or packets.
    #[arg(long, short = 'n', conflicts_with = "duration")]
    pub iters: Option<u64>,
    /// Run for this many seconds instead of a number of iterations.
    #[arg(long, short = 'D')]
    pub duration: Option<f64>,
    /// Work requests per doorbell (bandwidth tests), packets per burst (raw).
    #[arg(long)]
    pub batch: Option<u32>,
    /// Outstanding work requests (bandwidth tests; perftest `--tx-depth`).
    #[arg(long)]
    pub tx_depth: Option<u32>,
    /// Request a completion every N work requests (perftest `--cq-mod`).
    #[arg(long)]
    pub cq_mod: Option<u32>,
    /// Inline messages up to this many bytes (0: never).
    #[arg(long)]
    pub inline: Option<u32>,
    /// CQE compression on the test's CQs: off or the mini-CQE format.
    #[arg(long, value_enum)]
    pub cqe_compression: Option<CompArg>,
    /// Layout of compressed sessions (default: enhanced on `emu`, basic on
    /// a verbs device, the only one `mlx5dv_create_cq` can ask for).
    #[arg(long, value_enum)]
    pub cqe_layout: Option<LayoutArg>,
    /// Transport (verbs tests).
    #[arg(long, value_enum, default_value = "rc")]
    pub qp: QpArg,
    /// How raw-tx builds WQEs.
    #[arg(long, value_enum, default_value = "inline")]
    pub mode: RawMode,
    /// raw-tx: hand the frames over as `TxFrame`s (`TxQueue::tx_frames`:
    /// no per-packet offload) instead of `Packet`s (`tx_burst`).
    #[arg(long)]
    pub frames: bool,
    /// Receive queue of raw-rx.
    #[arg(long, value_enum, default_value = "striding")]
    pub rq: RqArg,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Why `mlx5dp perf` (or `info`) failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PerfError {
    code: u8,
    message: String,
}

impl PerfError {
    /// Bad arguments, or an unavailable device (exit status 2).
    pub fn usage(message: impl Into<String>) -> Self {
        Self {
            code: 2,
            message: message.into(),
        }
    }

    /// Creating the test's objects failed (exit status 1).
    pub fn setup(verb: &str, e: impl fmt::Display) -> Self {
        Self {
            code: 1,
            message: format!("{verb}: {e}"),
        }
    }

    /// The run went wrong: an error completion, a device complaint, wrong
    /// data (exit status 1).
    pub fn run(message: impl Into<String>) -> Self {
        Self {
            code: 1,
            message: message.into(),
        }
    }

    /// The process exit status.
    pub fn exit_code(&self) -> u8 {
        self.code
    }
}

impl fmt::Display for PerfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // One line, whatever the cause said.
        f.write_str(&self.message.replace('\n', " "))
    }
}

impl std::error::Error for PerfError {}

/// The arguments with each test's defaults filled in and checked.
#[derive(Clone, Copy, Debug)]
pub struct Opts {
    /// The test.
    pub test: Test,
    /// Message size.
    pub size: u32,
    /// When the run ends.
    pub goal: Goal,
    /// WQEs per doorbell / packets per burst.
    pub batch: u32,
    /// Outstanding work requests.
    pub tx_depth: u32,
    /// Completion every N work requests.
    pub cq_mod: u32,
    /// Inline threshold.
    pub inline: u32,
    /// Compression of the test's CQs.
    pub compression: Option<CompressionCfg>,
    /// The compression argument as given (or defaulted).
    pub comp_arg: CompArg,
    /// Transport.
    pub qp: QpArg,
    /// raw-tx mode.
    pub mode: RawMode,
    /// raw-tx: `tx_frames` of `TxFrame`s instead of `tx_burst`.
    pub frames: bool,
    /// raw-rx receive queue.
    pub rq: RqArg,
}

/// The device's largest inline payload the tests ask for.
const MAX_INLINE: u32 = 512;

impl Opts {
    /// Fills in defaults and checks the combination.
    pub fn resolve(a: &PerfArgs) -> Result<Self, PerfError> {
        let t = a.test;
        let size = a.size.unwrap_or(match t {
            Test::SendLat | Test::WriteLat => 2,
            Test::AtomicBw => 8,
            Test::RawTx | Test::RawRx => 64,
            _ => 65536,
        });
        let goal = match (a.iters, a.duration) {
            (Some(0), _) => return Err(PerfError::usage("--iters must be at least 1")),
            (Some(n), _) => Goal::Iters(n),
            (None, Some(d)) if d.is_finite() && d > 0.0 && d <= 86_400.0 => {
                Goal::Time(Duration::from_secs_f64(d))
            }
            (None, Some(d)) => {
                return Err(PerfError::usage(format!(
                    "--duration {d}: give a number of seconds in (0, 86400]"
                )))
            }
            (None, None) => Goal::Iters(match t {
                Test::SendLat | Test::WriteLat => 10_000,
                Test::RawTx | Test::RawRx => 2_000_000,
                Test::AtomicBw => 200_000,
                _ => 20_000,
            }),
        };
        let batch = a.batch.unwrap_or(if t.is_raw() { 32 } else { 16 });
        let tx_depth = a.tx_depth.unwrap_or(128);
        let cq_mod = a.cq_mod.unwrap_or(32);
        let inline = a.inline.unwrap_or(if t.is_lat() { 236 } else { 0 });
        let comp_arg = a.cqe_compression.unwrap_or(match (t, a.rq) {
            (Test::RawRx, RqArg::Striding) => CompArg::CsumStridx,
            (Test::RawRx, RqArg::Cyclic) => CompArg::Csum,
            _ => CompArg::Off,
        });
        if batch == 0 || batch > 1024 {
            return Err(PerfError::usage("--batch must be in 1..=1024"));
        }
        if tx_depth == 0 || tx_depth > 4096 {
            return Err(PerfError::usage("--tx-depth must be in 1..=4096"));
        }
        if cq_mod == 0 || cq_mod > tx_depth {
            return Err(PerfError::usage("--cq-mod must be in 1..=--tx-depth"));
        }
        if inline > MAX_INLINE {
            return Err(PerfError::usage(format!(
                "--inline {inline}: at most {MAX_INLINE}"
            )));
        }
        match t {
            Test::AtomicBw if size != 8 => {
                return Err(PerfError::usage("atomic-bw: --size must be 8"))
            }
            Test::RawTx | Test::RawRx if !(42..=9000).contains(&size) => {
                return Err(PerfError::usage(format!(
                    "{}: --size {size}: frames of 42..=9000 bytes",
                    t.name()
                )))
            }
            _ if size == 0 || size > 1 << 24 => {
                return Err(PerfError::usage(format!(
                    "--size {size}: messages of 1..=16777216 bytes"
                )))
            }
            _ => {}
        }
        if a.qp == QpArg::Ud && t != Test::SendLat && t != Test::SendBw {
            return Err(PerfError::usage(format!(
                "{}: --qp ud only applies to send-lat and send-bw",
                t.name()
            )));
        }
        if a.qp == QpArg::Ud && size > 4096 {
            return Err(PerfError::usage(
                "--qp ud: --size at most the 4096-byte MTU",
            ));
        }
        if a.qp == QpArg::Uc && matches!(t, Test::ReadBw | Test::AtomicBw) {
            return Err(PerfError::usage(format!(
                "{}: UC has no RDMA read or atomics; use --qp rc",
                t.name()
            )));
        }
        if t == Test::RawTx && a.mode == RawMode::Inline && size > 256 {
            return Err(PerfError::usage(
                "raw-tx --mode inline: frames up to 256 bytes; use --mode pointer",
            ));
        }
        if t == Test::RawRx {
            let strided = a.rq == RqArg::Striding;
            if comp_arg != CompArg::Off && comp_arg.strided() != strided {
                return Err(PerfError::usage(format!(
                    "raw-rx --rq {}: --cqe-compression {} does not fit; use {}",
                    if strided { "striding" } else { "cyclic" },
                    comp_arg.name(),
                    if strided {
                        "ftag-stridx, csum-stridx or l34h-stridx"
                    } else {
                        "hash or csum"
                    }
                )));
            }
        } else if comp_arg.strided() {
            return Err(PerfError::usage(format!(
                "--cqe-compression {}: stride-index formats need raw-rx --rq striding",
                comp_arg.name()
            )));
        }
        let emu = a.device == "emu";
        if !emu && t == Test::RawRx {
            return Err(PerfError::usage(format!(
                "device {}: raw-rx needs the frames it sends looped back on the same port (the emulated fabric; a ConnectX's raw-QP self-loopback is not set up here); use --device emu",
                a.device
            )));
        }
        let layout = a.cqe_layout.unwrap_or(if emu {
            LayoutArg::Enhanced
        } else {
            LayoutArg::Basic
        });
        let compression = comp_arg.format().map(|format| CompressionCfg {
            format,
            layout: match layout {
                LayoutArg::Basic => CompressionLayout::Basic,
                LayoutArg::Enhanced => CompressionLayout::Enhanced,
            },
            max_session: 64,
            force: false,
        });
        Ok(Self {
            test: t,
            size,
            goal,
            batch,
            tx_depth,
            cq_mod,
            inline,
            compression,
            comp_arg,
            qp: a.qp,
            mode: a.mode,
            frames: a.frames,
            rq: a.rq,
        })
    }

    /// The `--cqe-compression` value as run.
    pub fn compression_name(&self) -> &'static str {
        self.comp_arg.name()
    }
}

/// The one-line refusal (status 2) of an RDMA device name in a build
/// without the `verbs` feature; it names the emulated device.
pub fn device_error(name: &str) -> PerfError {
    PerfError::usage(
        crate::backend::BackendError::NeedsVerbs {
            device: name.to_string(),
        }
        .to_string(),
    )
}

/// `--emu-idle`: the emulated device thread's [`crate::emu::IdlePolicy`]
/// (`THROUGHPUT`, `BUSY`, `FRUGAL`; the variants' docs are the help text).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum EmuIdle {
    /// Spins about 13 ms, then yields, then naps 50 µs.
    Throughput,
    /// Never gives the CPU away, as a PMD on a dedicated core.
    Busy,
    /// Yields a little, then naps at once: for a shared machine.
    Frugal,
}

impl EmuIdle {
    /// The policy.
    pub fn policy(self) -> crate::emu::IdlePolicy {
        match self {
            EmuIdle::Throughput => crate::emu::IdlePolicy::THROUGHPUT,
            EmuIdle::Busy => crate::emu::IdlePolicy::BUSY,
            EmuIdle::Frugal => crate::emu::IdlePolicy::FRUGAL,
        }
    }
}

/// Opens the device a run asks for: `emu` (on its own thread) or an RDMA
/// device; one line and status 2 when it cannot be opened.
pub fn open_device(name: &str, idle: EmuIdle) -> Result<Box<dyn Backend>, PerfError> {
    crate::backend::open_with_idle(name, idle.policy()).map_err(|e| PerfError::usage(e.to_string()))
}

/// Runs `mlx5dp perf` and returns what to print on stdout.
pub fn run(a: &PerfArgs) -> Result<String, PerfError> {
    let opts = Opts::resolve(a)?;
    let be = open_device(&a.device, a.emu_idle)?;
    let report = run_on(be, &opts)?;
    Ok(if a.json {
        format!("{}\n", report.json())
    } else {
        report.table()
    })
}

/// Runs a test on `be`.
pub fn run_on(be: Box<dyn Backend>, o: &Opts) -> Result<Report, PerfError> {
    match o.test {
        Test::SendLat | Test::WriteLat => lat::run(be, o),
        Test::SendBw | Test::WriteBw | Test::ReadBw | Test::AtomicBw => bw::run(be, o),
        Test::RawTx => raw::run_tx(be, o),
        Test::RawRx => raw::run_rx(be, o),
    }
}

/// Runs a test on the emulated device on its own thread.
pub fn run_emu(o: &Opts) -> Result<Report, PerfError> {
    run_on(Box::new(emu_device()?), o)
}

/// A threaded emulated device, as every perf test uses.
pub fn emu_device() -> Result<crate::backend::EmuBackend, PerfError> {
    crate::backend::EmuBackend::threaded(crate::emu::DeviceConfig::default())
        .map_err(|e| PerfError::setup("device thread", e))
}

/// The device's complaints about the core (none may appear in a run).
pub fn core_mistakes(events: &[crate::emu::EmuEvent]) -> Option<String> {
    use crate::emu::EmuEvent as E;
    let bad: Vec<&E> = events
        .iter()
        .filter(|e| !matches!(e, E::Completion { .. } | E::FrameDropped { .. }))
        .collect();
    (!bad.is_empty()).then(|| {
        format!(
            "the device reported {} problem(s), first {:?}",
            bad.len(),
            bad[0]
        )
    })
}
