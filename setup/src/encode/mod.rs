//! `mlx5dp encode wqe`: the exact WQEs, doorbell-record values and register
//! writes the core's send queue produces for a list of work requests.
//!
//! The work requests are read as text ([`input`]), their data resolved as
//! `ibv_post_send` would read it ([`post::prepare`]), and then posted
//! through the real `mlx5dp::sq` API (`start`, one builder and its setters
//! per work request, `complete`) into a queue whose SQ buffer, doorbell
//! record and 4 KiB UAR page are ordinary memory ([`memory`]): nothing is
//! re-implemented here, what is printed is what the core wrote.
//!
//! # What is printed
//!
//! For every WQE of a batch: its WQE index (the 16-bit counter of its
//! control segment; its ring slot is that index modulo the ring size), its
//! WQEBB count, its DS count and the bytes of the WQEBBs it occupies, read
//! back from the ring (continuing at slot 0 when the WQE wraps). The ring
//! starts zero-filled. A work request's WQE (the `sq` path) has every byte
//! of those WQEBBs written (segment padding and the tail of the last WQEBB
//! as zero); an eMPW or legacy MPW session writes no padding (an inline
//! segment's bytes past its byte count, the tail after the DS count, as
//! DPDK): those bytes print what the ring held, `00` until it wraps.
//!
//! After each batch: the SQ doorbell-record value (`dbrec[MLX5_SND_DBR]`,
//! host order) and the one register write: the 8-byte doorbell (`db`) or
//! the BlueFlame copy (`bf`, whole 64-byte chunks), at its offset in the UAR
//! page (`--bf-reg` + the BlueFlame half in use). Which bytes were written is
//! found by running every batch twice, on UAR pages filled with `3c` and
//! with `c3`: a byte is written if it differs from the fill in either run.
//!
//! # Between batches
//!
//! After each batch the simulated device completes every WQE, so batches
//! never fill the queue; a batch larger than the ring is refused (`ENOMEM`).
//! The fence a local invalidate leaves for the next WQE (libmlx5
//! `fm_cache`) and the BlueFlame half carry over from batch to batch.
//!
//! # Refused work requests
//!
//! A work request the queue refuses ends the run. By default the work
//! requests before it in its batch are posted and the doorbell is rung, as
//! `ibv_post_send` does; with `abort_on_error` the batch is discarded, as
//! `ibv_wr_complete` rolls back after an error. With `keep_going` it ends
//! its batch (or burst) only: the refusal is printed where it happened
//! ([`Event::Refused`]) and the next batch goes on, as an application that
//! calls `ibv_post_send` or DPDK's `tx_burst` again does.
//!
//! Panic policy: nothing here panics on any input.
//!
//! `unsafe` is denied in this module and forbidden in its children except
//! [`memory`], which hands the memory to the core's `unsafe` constructor.
#![deny(unsafe_code)]

pub mod cli;
pub mod input;
#[expect(unsafe_code, reason = "the SendQueue constructor over our own memory")]
pub mod memory;
pub mod post;
pub mod recv;

use self::input::{LineError, OpKind};
use self::memory::{Memory, SetupError, UAR_PAGE};
use self::post::Prepared;
use mlx5dp::prm::EthCsFlags;
use mlx5dp::sq::mpw::{
    CqePolicy, Empw, LegacyMpw, Packet, PacketBuf, TxConfig, TxError, TxMode, TxOffload, TxQueue,
};
use mlx5dp::sq::{
    BlueFlameInline, BlueFlamePreferred, DoorbellOnly, DoorbellPolicy, FrameSge, PostError, QpType,
    SendQueue, Sge, SqConfig, SqShadowEntry, Wqebb,
};
use std::fmt;

/// The queue the work requests are posted to: the QP's type and limits and
/// the state libmlx5 would have left (producer counter, BlueFlame half).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EncodeConfig {
    /// The QP's transport.
    pub qp_type: QpType,
    /// QP number (24 bits).
    pub qpn: u32,
    /// Ring size in WQEBBs (a power of two, at most 65536).
    pub sq_wqebbs: u32,
    /// The producer counter before the first batch (libmlx5 `sq.cur_post`).
    pub pi: u32,
    /// `max_inline_data`.
    pub max_inline: u32,
    /// `max_send_sge` (libmlx5 `sq.max_gs`).
    pub max_sge: u32,
    /// Size of one BlueFlame half (`bf->buf_size`); 0 for a bfreg without
    /// BlueFlame (8-byte doorbells at `bf_reg`, no toggling).
    pub bf_size: u32,
    /// The BlueFlame half the first doorbell uses (`bf->offset`): 0 or
    /// `bf_size`.
    pub bf_offset: u32,
    /// Offset of the doorbell/BlueFlame register in the UAR page.
    pub bf_reg: u32,
    /// BlueFlame for every single-WQE batch that fits, not only for inline
    /// ones (libmlx5 `prefer_bf`, `MLX5_POST_SEND_PREFER_BF`).
    pub prefer_bf: bool,
    /// Never BlueFlame (`MLX5_SHUT_UP_BF=1`); the half still toggles.
    pub shut_up_bf: bool,
    /// Every WQE requests a CQE (`sq_sig_all`).
    pub sig_all: bool,
    /// Atomic operations are enabled on the QP.
    pub atomics: bool,
    /// Raw Ethernet checksum offload is available.
    pub raw_csum: bool,
    /// Inline L2 header of a raw Ethernet send: 0 or 18 bytes.
    pub eth_min_inline: u8,
    /// Largest TSO header (0: no TSO).
    pub max_tso_header: u16,
    /// Largest TSO payload.
    pub max_tso: u32,
    /// libmlx5's work-request limit (`sq.max_post`): a work request is
    /// refused when `wrs_in_flight` plus the work requests before it in its
    /// batch reach it. `None`: only the ring's size limits a batch.
    pub max_post: Option<u32>,
    /// Work requests posted before the first batch and not completed
    /// (libmlx5 `sq.head - sq.tail`), counted against `max_post`.
    pub wrs_in_flight: u32,
    /// The fence the first WQE inherits (libmlx5 `fm_cache`, e.g.
    /// [`mlx5dp::prm::WQE_CTRL_INITIATOR_SMALL_FENCE`] after a local
    /// invalidate): [`SqConfig::start_fm_cache`]; bits 7:5 only.
    pub fm_cache: u8,
    /// Discard a batch with a refused work request (`ibv_wr_complete`)
    /// instead of posting the work requests before it (`ibv_post_send`).
    pub abort_on_error: bool,
    /// `empw` / `mpw` bursts: frames up to this length are inlined into
    /// sessions ([`TxConfig::inline_max`], DPDK `inlen_empw`); `None`: 268.
    pub empw_inline_max: Option<u16>,
    /// `empw` / `mpw` bursts: packets per session; `None`: 32 (legacy MPW
    /// is capped at 6 whatever this says).
    pub empw_max_pkts: Option<u16>,
    /// `empw` / `mpw` bursts: a packet sent as its own WQE inlines a frame
    /// up to this length ([`TxConfig::single_inline_max`], DPDK `inlen_send`).
    pub empw_inline_send: u16,
    /// `empw` / `mpw` bursts: the burst-end CQE rule also counts this many
    /// WQEBBs (DPDK `wqe_thres`; 0: packets only).
    pub empw_wqe_thres: u16,
    /// `empw` / `mpw` bursts: DPDK 26.07's policy ([`TxConfig::dpdk_empw`],
    /// [`TxConfig::dpdk_mpw`]: 960-byte sessions, CE "only first error").
    pub empw_dpdk: bool,
    /// The device completes nothing: each batch or burst finds the ring as
    /// the ones before it left it, so the queue refuses what no longer fits
    /// and `max_post` counts every work request posted so far (as between
    /// two `tx_burst` calls of DPDK's PMD that found no CQE). `false`: the
    /// device completes each batch before the next.
    pub no_completions: bool,
    /// A refused work request ends its batch or burst, not the run: it is
    /// printed as an [`Event::Refused`] and the next batch goes on (as a
    /// caller of `ibv_post_send` or of DPDK's `tx_burst`, which returns
    /// fewer packets, does). [`Encoded::refusal`] holds the first.
    pub keep_going: bool,
}

impl EncodeConfig {
    /// A fresh QP of `qp_type` with the limits of the reference QPs of
    /// `specs/golden/libmlx5` (`max_send_sge` 4; `max_inline_data` 252 for
    /// RC, UC and XRC, 188 for UD, 268 for raw Ethernet; atomics on; raw
    /// Ethernet with checksum offload, an 18-byte inline header, TSO headers
    /// up to 128 bytes and payloads up to 256 KiB), a 256-byte BlueFlame
    /// buffer at 0x800 used for inline single-WQE batches.
    pub fn new(qp_type: QpType, qpn: u32, sq_wqebbs: u32) -> Self {
        let raw = qp_type == QpType::RawPacket;
        Self {
            qp_type,
            qpn,
            sq_wqebbs,
            pi: 0,
            max_inline: Self::default_max_inline(qp_type),
            max_sge: 4,
            bf_size: 256,
            bf_offset: 0,
            bf_reg: 0x800,
            prefer_bf: false,
            shut_up_bf: false,
            sig_all: false,
            atomics: true,
            raw_csum: raw,
            eth_min_inline: if raw { 18 } else { 0 },
            max_tso_header: if raw { 128 } else { 0 },
            max_tso: if raw { 256 << 10 } else { 0 },
            max_post: None,
            wrs_in_flight: 0,
            fm_cache: 0,
            abort_on_error: false,
            empw_inline_max: None,
            empw_max_pkts: None,
            empw_inline_send: 0,
            empw_wqe_thres: 0,
            empw_dpdk: false,
            no_completions: false,
            keep_going: false,
        }
    }

    /// The Tx queue settings of `empw` (`mpw`: `legacy`) bursts. Without
    /// `flags=signaled` a burst follows the burst-end rule: its last WQE
    /// requests a CQE once 32 pointer packets (or `--empw-wqe-thres`
    /// WQEBBs) went unsignalled; `flags=signaled` asks a CQE of every WQE
    /// of the burst.
    pub fn tx_config(&self, legacy: bool) -> TxConfig {
        let inl = self
            .empw_inline_max
            .unwrap_or(mlx5dp::prm::mpw::EMPW_DEF_INLINE_LEN as u16);
        let mut c = match (self.empw_dpdk, legacy) {
            (true, true) => TxConfig::dpdk_mpw(inl, self.empw_inline_send, self.empw_wqe_thres),
            (true, false) => TxConfig::dpdk_empw(inl, self.empw_inline_send, self.empw_wqe_thres),
            (false, _) => TxConfig {
                inline_max: inl,
                single_inline_max: self.empw_inline_send,
                cqe: CqePolicy::BurstEnd {
                    packets: mlx5dp::prm::mpw::EMPW_MAX_PACKETS as u16,
                    wqebbs: self.empw_wqe_thres,
                },
                ..TxConfig::new()
            },
        };
        if let Some(n) = self.empw_max_pkts {
            c.max_packets = n;
        }
        c
    }

    /// The default `max_inline_data` of a QP type (see [`EncodeConfig::new`]).
    pub fn default_max_inline(qp_type: QpType) -> u32 {
        match qp_type {
            QpType::Ud => 188,
            QpType::RawPacket => 268,
            QpType::Rc | QpType::Uc | QpType::Xrc => 252,
        }
    }

    /// Checks the settings; the message names the option.
    pub fn check(&self) -> Result<(), String> {
        if !self.sq_wqebbs.is_power_of_two() || self.sq_wqebbs > 1 << 16 {
            return Err(format!(
                "--sq-wqebbs {}: a power of two from 1 to 65536",
                self.sq_wqebbs
            ));
        }
        if self.qpn > 0x00ff_ffff {
            return Err(format!("--qpn {:#x}: a QPN has 24 bits", self.qpn));
        }
        if self.bf_size % 64 != 0 {
            return Err(format!("--bf-size {}: a multiple of 64", self.bf_size));
        }
        if self.bf_reg % 64 != 0 {
            return Err(format!("--bf-reg {:#x}: a multiple of 64", self.bf_reg));
        }
        let reg_len = std::cmp::max(2 * u64::from(self.bf_size), 8);
        if u64::from(self.bf_reg) + reg_len > UAR_PAGE as u64 {
            return Err(format!(
                "--bf-reg {:#x} with --bf-size {}: the register (two halves) must fit the 4 KiB UAR page",
                self.bf_reg, self.bf_size
            ));
        }
        if self.bf_offset != 0 && self.bf_offset != self.bf_size {
            return Err(format!(
                "--bf-offset {}: 0 or the BlueFlame size ({})",
                self.bf_offset, self.bf_size
            ));
        }
        if self.eth_min_inline != 0 && self.eth_min_inline != 18 {
            return Err(format!("--eth-min-inline {}: 0 or 18", self.eth_min_inline));
        }
        if self.fm_cache & 0x1f != 0 {
            return Err(format!(
                "--fm-cache {:#x}: a fence mode, bits 7:5 (0x20 after a local invalidate)",
                self.fm_cache
            ));
        }
        Ok(())
    }

    /// The core's settings for this queue.
    fn sq_config(&self) -> SqConfig {
        let mut c = SqConfig::new(self.qp_type, self.qpn, self.max_inline, self.max_sge);
        c.sig_all = self.sig_all;
        c.atomics = self.atomics;
        c.raw_csum = self.raw_csum;
        c.eth_min_inline = self.eth_min_inline;
        c.max_tso_header = self.max_tso_header;
        c.max_tso = self.max_tso;
        // libmlx5 never asks for a CQE the work request did not ask for.
        c.signal_every = 0;
        c.start_pi = self.pi;
        c.start_bf_second_half = self.bf_offset != 0;
        c.start_fm_cache = self.fm_cache;
        c
    }
}

/// Why the queue refused a work request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// The core refused it.
    Post(PostError),
    /// A raw Ethernet send with no data (libmlx5: `EINVAL`).
    NoFrame,
    /// The Tx queue refused a packet of an `empw` / `mpw` burst.
    Tx(TxError),
    /// An `ibv_wr_opcode` past `IBV_WR_DRIVER1` ([`OpKind::Invalid`]):
    /// libmlx5 `EINVAL`, before its queue and SGE tests.
    InvalidOpcode(u32),
}

impl Refused {
    /// The errno libmlx5 returns for the same work request.
    pub fn errno(&self) -> &'static str {
        match self {
            Refused::Post(e) => match e {
                PostError::QueueFull
                | PostError::BatchFull
                | PostError::TooManySges
                | PostError::InlineTooLong => "ENOMEM",
                PostError::UnsupportedOp => "EOPNOTSUPP or EINVAL",
                PostError::BindTooLong => "EOPNOTSUPP",
                PostError::TsoHeaderTooLong
                | PostError::TsoHeaderTooShort
                | PostError::TsoPayloadTooLong
                | PostError::EthHeaderTooShort
                | PostError::FrameBytesRequired
                | PostError::MissingUdAddress
                | PostError::MissingXrcSrqn
                | PostError::WqeTooLarge => "EINVAL",
            },
            Refused::NoFrame | Refused::InvalidOpcode(_) => "EINVAL",
            Refused::Tx(TxError::QueueFull) => "ENOMEM",
            Refused::Tx(_) => "EINVAL",
        }
    }
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let why = match self {
            Refused::Post(e) => match e {
                PostError::QueueFull => "the send queue is full (--sq-wqebbs, --max-post)",
                PostError::BatchFull => "the batch is larger than the staging area",
                PostError::TooManySges => "more SGEs than --max-sge",
                PostError::InlineTooLong => "inline data longer than --max-inline",
                PostError::TsoHeaderTooLong => "the TSO header is longer than --max-tso-header",
                PostError::TsoHeaderTooShort => "the TSO header is shorter than 14 bytes",
                PostError::TsoPayloadTooLong => "the TSO payload is longer than --max-tso",
                PostError::EthHeaderTooShort => {
                    "the frame is shorter than its inline L2 header (--eth-min-inline)"
                }
                PostError::FrameBytesRequired => "a raw send needs the frame's first bytes",
                PostError::UnsupportedOp => {
                    "the QP does not support this operation or flag (atomics: RC or XRC without --no-atomics; local_inv, bind_mw: RC, UC or XRC; ip_csum: raw without --no-raw-csum; tso: raw with --max-tso-header)"
                }
                PostError::MissingUdAddress => {
                    "a UD work request needs av= (and remote_qpn=, remote_qkey=)"
                }
                PostError::MissingXrcSrqn => "an XRC work request needs xrc_srqn=",
                PostError::WqeTooLarge => "the WQE would be larger than 63 DS (1008 bytes)",
                PostError::BindTooLong => "a memory window of more than 2 GiB (one KLM)",
            },
            Refused::NoFrame => "a raw Ethernet send needs at least one sge= (or inline=)",
            Refused::Tx(e) => match e {
                TxError::QueueFull => "a packet of the burst does not fit the send queue",
                TxError::BadLength => "a packet of the burst is 18 bytes or shorter, or too long",
                TxError::FrameBytesRequired => {
                    "a packet sent as its own WQE needs its first bytes: give them with mem="
                }
                TxError::BadTso => "TSO in a burst",
                TxError::WqeTooLarge => "a packet's WQE would be larger than 63 DS",
            },
            Refused::InvalidOpcode(n) => {
                return write!(
                    f,
                    "work request refused ({}): opcode {n} is past IBV_WR_DRIVER1 (11)",
                    self.errno()
                );
            }
        };
        write!(f, "work request refused ({}): {why}", self.errno())
    }
}

/// A refused work request and its line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refusal {
    /// 1-based input line of the work request.
    pub line: usize,
    /// Why.
    pub reason: Refused,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.reason)
    }
}

/// One WQE as posted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wqe {
    /// WQE index: the 16-bit WQEBB counter of its control segment.
    pub wqe_index: u16,
    /// WQEBBs it occupies.
    pub wqebbs: u32,
    /// DS count (16-byte units) of its control segment.
    pub ds: u8,
    /// The bytes of its WQEBBs, in posting order.
    pub bytes: Vec<u8>,
}

/// Which register write a doorbell made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MmioKind {
    /// The 8-byte doorbell: the first 8 bytes of the last WQE.
    Doorbell,
    /// A BlueFlame copy of the whole WQE in 64-byte chunks.
    BlueFlame,
}

impl MmioKind {
    /// `db` or `bf`.
    pub fn name(self) -> &'static str {
        match self {
            MmioKind::Doorbell => "db",
            MmioKind::BlueFlame => "bf",
        }
    }
}

/// A register write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mmio {
    /// Doorbell or BlueFlame.
    pub kind: MmioKind,
    /// Offset of the first byte written, in the 4 KiB UAR page.
    pub offset: u32,
    /// The bytes written.
    pub bytes: Vec<u8>,
}

/// The doorbell of one batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Doorbell {
    /// The SQ doorbell-record value (host order).
    pub dbrec: u32,
    /// The register write (`None` only if the core wrote no register byte).
    pub mmio: Option<Mmio>,
}

/// What the run produced, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A WQE.
    Wqe(Wqe),
    /// The end of a batch.
    Doorbell(Doorbell),
    /// A refused work request, where it happened (only with
    /// [`EncodeConfig::keep_going`]; otherwise it ends the run).
    Refused(Refusal),
}

impl Event {
    /// The event as one JSON object.
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            Event::Wqe(w) => serde_json::json!({
                "wqe_index": w.wqe_index,
                "wqebbs": w.wqebbs,
                "ds": w.ds,
                "hex": hex(&w.bytes),
            }),
            Event::Doorbell(d) => serde_json::json!({
                "dbrec": d.dbrec,
                "mmio": d.mmio.as_ref().map(|m| serde_json::json!({
                    "kind": m.kind.name(),
                    "offset": m.offset,
                    "hex": hex(&m.bytes),
                })),
            }),
            Event::Refused(r) => serde_json::json!({
                "refused": {
                    "line": r.line,
                    "errno": r.reason.errno(),
                    "error": r.reason.to_string(),
                },
            }),
        }
    }

    /// The event as text lines.
    pub fn to_human(&self, wqe_cnt: u32) -> String {
        let mut s = String::new();
        match self {
            Event::Wqe(w) => {
                s.push_str(&format!(
                    "wqe_index={} wqebbs={} ds={}\n",
                    w.wqe_index, w.wqebbs, w.ds
                ));
                let mask = wqe_cnt.wrapping_sub(1);
                for (k, bb) in w.bytes.chunks(64).enumerate() {
                    let slot = u32::from(w.wqe_index).wrapping_add(k as u32) & mask;
                    s.push_str(&format!("  wqebb {slot} {}\n", hex(bb)));
                }
            }
            Event::Doorbell(d) => {
                s.push_str(&format!("dbrec={:#010x}", d.dbrec));
                match &d.mmio {
                    Some(m) => {
                        s.push_str(&format!(
                            " mmio={} offset={:#x} len={}\n",
                            m.kind.name(),
                            m.offset,
                            m.bytes.len()
                        ));
                        for chunk in m.bytes.chunks(64) {
                            s.push_str(&format!("  {}\n", hex(chunk)));
                        }
                    }
                    None => s.push_str(" mmio=none\n"),
                }
            }
            Event::Refused(r) => {
                s.push_str(&format!("refused {r}\n"));
            }
        }
        s
    }
}

/// Lower-case hex, no separators.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Everything the run printed, and the refusal that ended it, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Encoded {
    /// WQEs and doorbells, in order.
    pub events: Vec<Event>,
    /// The work request that was refused (the run stopped there; with
    /// [`EncodeConfig::keep_going`], the first of the [`Event::Refused`]).
    pub refusal: Option<Refusal>,
}

impl Encoded {
    /// One JSON object per line.
    pub fn to_json_lines(&self) -> String {
        self.events
            .iter()
            .map(|e| format!("{}\n", e.to_json()))
            .collect()
    }

    /// The text output (`wqe_cnt` to print ring slots).
    pub fn to_human(&self, wqe_cnt: u32) -> String {
        self.events.iter().map(|e| e.to_human(wqe_cnt)).collect()
    }
}

/// Why nothing could be encoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EncodeError {
    /// A malformed or incomplete input line.
    Input(LineError),
    /// A bad option value.
    Config(String),
    /// The simulated queue could not be set up (an internal failure).
    Setup(String),
}

impl fmt::Display for EncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EncodeError::Input(e) => write!(f, "{e}"),
            EncodeError::Config(m) => write!(f, "bad option: {m}"),
            EncodeError::Setup(m) => write!(f, "cannot set up the queue: {m}"),
        }
    }
}

impl std::error::Error for EncodeError {}

impl From<LineError> for EncodeError {
    fn from(e: LineError) -> Self {
        EncodeError::Input(e)
    }
}

impl From<SetupError> for EncodeError {
    fn from(e: SetupError) -> Self {
        EncodeError::Setup(format!("{e:?}"))
    }
}

/// Encodes the work requests of `text` on a queue set up as `cfg`.
///
/// Every line is read and its data resolved before anything is posted: a
/// malformed line is an [`EncodeError::Input`] and nothing is printed. A
/// work request the queue refuses ends the run with
/// [`Encoded::refusal`] set, after whatever was posted before it (with
/// [`EncodeConfig::keep_going`], it ends its batch only).
pub fn encode(cfg: &EncodeConfig, text: &str) -> Result<Encoded, EncodeError> {
    cfg.check().map_err(EncodeError::Config)?;
    let batches = input::parse_input(text)?;
    let mut prepared = Vec::with_capacity(batches.len());
    for b in batches {
        let mut wrs = Vec::with_capacity(b.wrs.len());
        for wr in b.wrs {
            let line = wr.line;
            wrs.push(post::prepare(cfg, wr).map_err(|m| LineError::new(line, m))?);
        }
        prepared.push(wrs);
    }
    let sessions = prepared.iter().flatten().filter(|p| p.wr.op.is_session());
    if let Some(first) = sessions.clone().next() {
        let op = first.wr.op;
        if let Some(p) = prepared.iter().flatten().find(|p| p.wr.op != op) {
            return Err(LineError::new(
                p.wr.line,
                format!(
                    "op={} after op={} on line {}: an input with empw/mpw bursts holds bursts of that one op only",
                    p.wr.op.name(),
                    op.name(),
                    first.wr.line
                ),
            )
            .into());
        }
        let tx_cfg = cfg.tx_config(op == OpKind::Mpw);
        for p in sessions {
            check_inline_pkts(p, &tx_cfg)?;
        }
        let bursts: Vec<&Prepared> = prepared.iter().flatten().collect();
        return if op == OpKind::Mpw {
            run_sessions_p::<LegacyMpw>(cfg, tx_cfg, &bursts)
        } else {
            run_sessions_p::<Empw>(cfg, tx_cfg, &bursts)
        };
    }
    if cfg.bf_size == 0 || cfg.shut_up_bf {
        run::<DoorbellOnly>(cfg, &prepared)
    } else if cfg.prefer_bf {
        run::<BlueFlamePreferred>(cfg, &prepared)
    } else {
        run::<BlueFlameInline>(cfg, &prepared)
    }
}

/// An `inline:` packet has no address: it must be inlined, so it must fit
/// the session inline limits.
fn check_inline_pkts(p: &Prepared, tx: &TxConfig) -> Result<(), EncodeError> {
    let max = std::cmp::min(tx.inline_max, tx.max_inline_bytes);
    for (i, k) in p.pkts.iter().enumerate() {
        if k.inline_only && k.len > u32::from(max) {
            return Err(LineError::new(
                p.wr.line,
                format!(
                    "pkt {i}: inline:{} bytes, more than the session inline limit {max} (--empw-inline-max); give it as ptr: (with mem=)",
                    k.len
                ),
            )
            .into());
        }
    }
    Ok(())
}

/// [`run_sessions`] with the doorbell policy of `cfg`.
fn run_sessions_p<M: TxMode>(
    cfg: &EncodeConfig,
    tx: TxConfig,
    bursts: &[&Prepared],
) -> Result<Encoded, EncodeError> {
    if cfg.bf_size == 0 || cfg.shut_up_bf {
        run_sessions::<DoorbellOnly, M>(cfg, tx, bursts)
    } else if cfg.prefer_bf {
        run_sessions::<BlueFlamePreferred, M>(cfg, tx, bursts)
    } else {
        run_sessions::<BlueFlameInline, M>(cfg, tx, bursts)
    }
}

/// The core packets of a burst line.
fn packets(p: &Prepared) -> Vec<Packet<'_>> {
    p.pkts
        .iter()
        .enumerate()
        .map(|(i, k)| {
            let buf = match &k.data {
                Some(d) => PacketBuf::Frame(FrameSge::with_addr(k.lkey, k.addr, d)),
                None => PacketBuf::Ptr(Sge::new(k.lkey, k.addr, k.len)),
            };
            let offload = TxOffload {
                cs_flags: EthCsFlags::new()
                    .with_l3_csum(k.csum.l3)
                    .with_l4_csum(k.csum.l4),
                ..TxOffload::NONE
            };
            Packet::from_buf(p.wr.wr_id.wrapping_add(i as u64), buf).with_offload(offload)
        })
        .collect()
}

/// Posts one burst line: every packet, then `complete` (the packets before
/// a refused one are posted, as `tx_burst` does).
fn post_burst<P: DoorbellPolicy, M: TxMode>(
    q: &mut TxQueue<'_, P, mlx5dp::sq::AnyQp, M>,
    tx: &TxConfig,
    p: &Prepared,
) -> Option<Refusal> {
    q.set_cqe_policy(if p.wr.flags.signaled {
        CqePolicy::EverySessions(1)
    } else {
        tx.cqe
    });
    let pkts = packets(p);
    let mut b = q.start();
    let mut refusal = None;
    for k in &pkts {
        if let Err(e) = b.push(k) {
            refusal = Some(Refusal {
                line: p.wr.line,
                reason: Refused::Tx(e),
            });
            break;
        }
    }
    // A burst never rolls back: what was accepted is posted (`tx_burst`).
    b.complete();
    refusal
}

/// Like [`run`], through the core's [`TxQueue`]: each line one burst.
fn run_sessions<P: DoorbellPolicy, M: TxMode>(
    cfg: &EncodeConfig,
    tx: TxConfig,
    bursts: &[&Prepared],
) -> Result<Encoded, EncodeError> {
    let cnt = cfg.sq_wqebbs;
    let staging_len = std::cmp::max(cnt as usize, 16);
    let sq_cfg = cfg.sq_config();
    let [fill_a, fill_b] = UAR_FILLS;
    let (mem_a, mem_b) = (Memory::new(cnt, fill_a)?, Memory::new(cnt, fill_b)?);
    let mut shadow_a = vec![SqShadowEntry::EMPTY; cnt as usize];
    let mut shadow_b = shadow_a.clone();
    let mut staging_a = vec![Wqebb::ZERO; staging_len];
    let mut staging_b = staging_a.clone();
    let ids_len = (cnt as usize * 64).next_power_of_two();
    let mut ids_a = vec![0u64; ids_len];
    let mut ids_b = ids_a.clone();
    let bf_reg = cfg.bf_reg as usize;
    let sq_a = mem_a.queue::<P>(sq_cfg, bf_reg, cfg.bf_size, &mut shadow_a, &mut staging_a)?;
    let sq_b = mem_b.queue::<P>(sq_cfg, bf_reg, cfg.bf_size, &mut shadow_b, &mut staging_b)?;
    let tx_err = |e| EncodeError::Config(format!("the Tx queue refused its settings: {e:?}"));
    let mut q_a: TxQueue<'_, P, _, M> = TxQueue::new(sq_a, &mut ids_a, tx).map_err(tx_err)?;
    let mut q_b: TxQueue<'_, P, _, M> = TxQueue::new(sq_b, &mut ids_b, tx).map_err(tx_err)?;

    let mut out = Encoded {
        events: Vec::new(),
        refusal: None,
    };
    for p in bursts {
        mem_a.refill_uar()?;
        mem_b.refill_uar()?;
        let start = q_a.send_queue().producer();
        let refusal = post_burst(&mut q_a, &tx, p);
        let _same = post_burst(&mut q_b, &tx, p);
        let end = q_a.send_queue().producer();
        let mut at = start;
        let mut last = None;
        while at != end {
            let slot = at & (cnt - 1);
            let n = q_a
                .send_queue()
                .shadow(slot as usize)
                .map_or(0, |e| u32::from(e.wqebbs()));
            if n == 0 {
                return Err(EncodeError::Setup(format!(
                    "no WQE starts at slot {slot} of the shadow"
                )));
            }
            let bytes = mem_a.wqebbs(slot, n)?;
            let ds = bytes.get(7).map_or(0, |b| b & 0x3f);
            out.events.push(Event::Wqe(Wqe {
                wqe_index: at as u16,
                wqebbs: n,
                ds,
                bytes,
            }));
            last = Some(at as u16);
            at = at.wrapping_add(n);
        }
        if let Some(index) = last {
            out.events.push(Event::Doorbell(doorbell(&mem_a, &mem_b)?));
            // The device completes the burst (unless told it completes
            // nothing).
            if !cfg.no_completions {
                for r in [q_a.retire(index, |_| {}), q_b.retire(index, |_| {})] {
                    r.map_err(|e| EncodeError::Setup(format!("retire: {e:?}")))?;
                }
            }
        }
        if let Some(r) = refusal {
            out.refusal.get_or_insert(r);
            if !cfg.keep_going {
                break;
            }
            out.events.push(Event::Refused(r));
        }
    }
    Ok(out)
}

/// The doorbell record and the register write of the batch just posted.
fn doorbell(mem_a: &Memory, mem_b: &Memory) -> Result<Doorbell, EncodeError> {
    let [fill_a, fill_b] = UAR_FILLS;
    let (ua, ub) = (mem_a.uar()?, mem_b.uar()?);
    let written: Vec<usize> = (0..UAR_PAGE)
        .filter(|&i| ua.get(i) != Some(&fill_a) || ub.get(i) != Some(&fill_b))
        .collect();
    let mmio = match (written.first(), written.last()) {
        (Some(&lo), Some(&hi)) => Some(Mmio {
            kind: if hi + 1 - lo == 8 {
                MmioKind::Doorbell
            } else {
                MmioKind::BlueFlame
            },
            offset: lo as u32,
            bytes: ua.get(lo..=hi).unwrap_or(&[]).to_vec(),
        }),
        _ => None,
    };
    Ok(Doorbell {
        dbrec: mem_a.dbrec()?,
        mmio,
    })
}

/// UAR fills of the two runs (the golden vectors' fills).
const UAR_FILLS: [u8; 2] = [0x3c, 0xc3];

/// Posts every batch on two identical queues whose UAR pages hold different
/// fills, and reads back what the first one wrote.
fn run<P: DoorbellPolicy>(
    cfg: &EncodeConfig,
    batches: &[Vec<Prepared>],
) -> Result<Encoded, EncodeError> {
    let cnt = cfg.sq_wqebbs;
    let staging_len = std::cmp::max(cnt as usize, 16);
    let sq_cfg = cfg.sq_config();
    let [fill_a, fill_b] = UAR_FILLS;
    let (mem_a, mem_b) = (Memory::new(cnt, fill_a)?, Memory::new(cnt, fill_b)?);
    let mut shadow_a = vec![SqShadowEntry::EMPTY; cnt as usize];
    let mut shadow_b = shadow_a.clone();
    let mut staging_a = vec![Wqebb::ZERO; staging_len];
    let mut staging_b = staging_a.clone();
    let bf_reg = cfg.bf_reg as usize;
    let mut sq_a = mem_a.queue::<P>(sq_cfg, bf_reg, cfg.bf_size, &mut shadow_a, &mut staging_a)?;
    let mut sq_b = mem_b.queue::<P>(sq_cfg, bf_reg, cfg.bf_size, &mut shadow_b, &mut staging_b)?;

    let mut out = Encoded {
        events: Vec::new(),
        refusal: None,
    };
    let mut wrs_in_flight = cfg.wrs_in_flight;
    for batch in batches {
        mem_a.refill_uar()?;
        mem_b.refill_uar()?;
        let start = sq_a.producer();
        let refusal = post_batch(&mut sq_a, cfg, batch, wrs_in_flight);
        let _same = post_batch(&mut sq_b, cfg, batch, wrs_in_flight);
        let end = sq_a.producer();

        let mut at = start;
        let mut last = None;
        // Work requests posted (one WQE each).
        let mut posted = 0u32;
        while at != end {
            let slot = at & (cnt - 1);
            let n = sq_a
                .shadow(slot as usize)
                .map_or(0, |e| u32::from(e.wqebbs()));
            if n == 0 {
                return Err(EncodeError::Setup(format!(
                    "no WQE starts at slot {slot} of the shadow"
                )));
            }
            let bytes = mem_a.wqebbs(slot, n)?;
            let ds = bytes.get(7).map_or(0, |b| b & 0x3f);
            out.events.push(Event::Wqe(Wqe {
                wqe_index: at as u16,
                wqebbs: n,
                ds,
                bytes,
            }));
            last = Some(at as u16);
            posted += 1;
            at = at.wrapping_add(n);
        }
        if let Some(index) = last {
            out.events.push(Event::Doorbell(doorbell(&mem_a, &mem_b)?));
            if cfg.no_completions {
                wrs_in_flight = wrs_in_flight.saturating_add(posted);
            } else {
                // The device completes the batch: the last WQE's completion
                // retires it and everything before it.
                for sq in [&mut sq_a, &mut sq_b] {
                    sq.retire(index)
                        .map_err(|e| EncodeError::Setup(format!("retire: {e:?}")))?;
                }
                wrs_in_flight = 0;
            }
        }
        if let Some(r) = refusal {
            out.refusal.get_or_insert(r);
            if !cfg.keep_going {
                break;
            }
            out.events.push(Event::Refused(r));
        }
    }
    Ok(out)
}

/// Posts one batch: `start`, the work requests, then `complete` (or
/// `abort`, see [`EncodeConfig::abort_on_error`]).
fn post_batch<P: DoorbellPolicy>(
    sq: &mut SendQueue<'_, P>,
    cfg: &EncodeConfig,
    batch: &[Prepared],
    wrs_in_flight: u32,
) -> Option<Refusal> {
    let mut b = sq.start();
    let mut refusal = None;
    for (nreq, p) in batch.iter().enumerate() {
        // libmlx5 tests the opcode first, then the queue.
        if let OpKind::Invalid(n) = p.wr.op {
            refusal = Some(Refusal {
                line: p.wr.line,
                reason: Refused::InvalidOpcode(n),
            });
            break;
        }
        // libmlx5 `mlx5_wq_overflow`: `head - tail + nreq >= max_post`.
        if let Some(max) = cfg.max_post {
            if u64::from(wrs_in_flight) + nreq as u64 >= u64::from(max) {
                refusal = Some(Refusal {
                    line: p.wr.line,
                    reason: Refused::Post(PostError::QueueFull),
                });
                break;
            }
        }
        if let Err(reason) = post::post(&mut b, cfg.qp_type, p) {
            refusal = Some(Refusal {
                line: p.wr.line,
                reason,
            });
            break;
        }
    }
    if refusal.is_some() && cfg.abort_on_error {
        b.abort();
    } else {
        b.complete();
    }
    refusal
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wqebbs(enc: &Encoded) -> u32 {
        enc.events
            .iter()
            .map(|e| match e {
                Event::Wqe(w) => w.wqebbs,
                Event::Doorbell(_) | Event::Refused(_) => 0,
            })
            .sum()
    }

    /// Without completions the ring fills: the batch that no longer fits
    /// is refused, with every WQEBB before it printed; with them (the
    /// default) every batch fits.
    #[test]
    fn no_completions_fills_the_ring() {
        // Ten batches of one 2-WQEBB RDMA WRITE (48 bytes inline) on an
        // 8-WQEBB ring.
        let text =
            "op=rdma_write flags=inline raddr=0x1000 rkey=5 inline=000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f\n\n"
                .repeat(10);
        let mut cfg = EncodeConfig::new(QpType::Rc, 0x11, 8);
        let all = encode(&cfg, &text).unwrap();
        assert!(all.refusal.is_none());
        assert_eq!(wqebbs(&all), 20);
        cfg.no_completions = true;
        let full = encode(&cfg, &text).unwrap();
        let refusal = full.refusal.expect("the fifth batch does not fit");
        assert_eq!(refusal.line, 9);
        assert_eq!(wqebbs(&full), 8);
        // max_post counts the work requests of the earlier batches: the
        // fourth is refused (three outstanding).
        cfg.max_post = Some(3);
        let capped = encode(&cfg, &text).unwrap();
        assert_eq!(capped.refusal.expect("max_post").line, 7);
        assert_eq!(wqebbs(&capped), 6);
    }

    /// The same for bursts: a later burst finds the ring as the earlier
    /// ones left it.
    #[test]
    fn no_completions_fills_the_ring_with_bursts() {
        let text = "op=empw pkt=ptr:0x1000:64:7 pkt=ptr:0x2000:64:7\n".repeat(10);
        let mut cfg = EncodeConfig::new(QpType::RawPacket, 0x11, 8);
        let all = encode(&cfg, &text).unwrap();
        assert!(all.refusal.is_none());
        cfg.no_completions = true;
        let full = encode(&cfg, &text).unwrap();
        assert!(full.refusal.is_some());
        assert!(wqebbs(&full) <= 8);
        assert!(wqebbs(&full) < wqebbs(&all));
    }

    fn refused_lines(enc: &Encoded) -> Vec<usize> {
        enc.events
            .iter()
            .filter_map(|e| match e {
                Event::Refused(r) => Some(r.line),
                _ => None,
            })
            .collect()
    }

    /// With `keep_going` a refused work request ends its batch only: it is
    /// printed where it happened, the later batches are posted, and the
    /// first refusal is the run's. Without it the output stops there.
    #[test]
    fn keep_going_reports_each_refusal_and_goes_on() {
        // Batches of one WRITE, but the third (line 5) asks for 9 SGEs.
        let ok = "op=rdma_write raddr=0x1000 rkey=5 sge=0x2000:64:7\n\n";
        let bad = format!(
            "op=rdma_write raddr=0x1000 rkey=5{}\n\n",
            " sge=0x2000:8:7".repeat(9)
        );
        let text = format!("{ok}{ok}{bad}{ok}{bad}{ok}");
        let mut cfg = EncodeConfig::new(QpType::Rc, 0x11, 64);
        let stop = encode(&cfg, &text).unwrap();
        assert_eq!(stop.refusal.map(|r| r.line), Some(5));
        assert_eq!(wqebbs(&stop), 2);
        assert!(refused_lines(&stop).is_empty());
        cfg.keep_going = true;
        let on = encode(&cfg, &text).unwrap();
        assert_eq!(on.refusal, stop.refusal);
        assert_eq!(refused_lines(&on), [5, 9]);
        assert_eq!(wqebbs(&on), 4);
        // The refusal follows the doorbell of the batch before it, and the
        // WQEs after it continue the WQE counter.
        let kinds: Vec<char> = on
            .events
            .iter()
            .map(|e| match e {
                Event::Wqe(_) => 'w',
                Event::Doorbell(_) => 'd',
                Event::Refused(_) => 'r',
            })
            .collect();
        assert_eq!(kinds.iter().collect::<String>(), "wdwdrwdrwd");
        let idx: Vec<u16> = on
            .events
            .iter()
            .filter_map(|e| match e {
                Event::Wqe(w) => Some(w.wqe_index),
                _ => None,
            })
            .collect();
        assert_eq!(idx, [0, 1, 2, 3]);
        let json = on.to_json_lines();
        assert!(
            json.contains(r#"{"refused":{"line":9,"errno":"ENOMEM","error":"work request refused (ENOMEM): more SGEs than --max-sge"}}"#),
            "{json}"
        );
        assert!(on
            .to_human(64)
            .contains("refused line 9: work request refused (ENOMEM)"));
    }

    /// Bursts: a short frame refused in the second burst leaves the packet
    /// before it posted; the third burst goes on after it.
    #[test]
    fn keep_going_bursts_go_on_after_a_refused_packet() {
        let frame = "00".repeat(60);
        let short = "00".repeat(16);
        let line = |pkts: &[(u64, &str)]| {
            let mut l = String::from("op=empw");
            for (a, d) in pkts {
                l.push_str(&format!(" pkt=ptr:{a:#x}:{}:7 mem={a:#x}:{d}", d.len() / 2));
            }
            l + "\n"
        };
        let text = [
            line(&[(0x1000, &frame)]),
            line(&[(0x2000, &frame), (0x3000, &short), (0x4000, &frame)]),
            line(&[(0x5000, &frame)]),
        ]
        .concat();
        let mut cfg = EncodeConfig::new(QpType::RawPacket, 0x11, 64);
        let stop = encode(&cfg, &text).unwrap();
        assert_eq!(stop.refusal.map(|r| r.line), Some(2));
        cfg.keep_going = true;
        let on = encode(&cfg, &text).unwrap();
        assert_eq!(on.refusal.map(|r| r.line), Some(2));
        assert_eq!(refused_lines(&on), [2]);
        let doorbells = |e: &Encoded| {
            e.events
                .iter()
                .filter(|e| matches!(e, Event::Doorbell(_)))
                .count()
        };
        assert_eq!((doorbells(&stop), doorbells(&on)), (2, 3));
        assert!(wqebbs(&on) > wqebbs(&stop));
    }
}
