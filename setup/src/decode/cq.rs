//! `mlx5dp decode cq`: a whole CQ ring snapshot, polled the way the data
//! path polls it (PRM-FACTS §9.2, §10.4, §10.5).
//!
//! The snapshot is copied into ordinary memory and handed to the core's
//! own poller ([`mlx5dp::cq::Cq`]) with the consumer index the user gives:
//! ownership (owner bit and pass parity, or the enhanced layout's validity
//! iteration count), session opening, mini-CQE expansion and the consumer
//! index all come from the data path itself, not from a second reading of
//! the layouts. Polling stops at the first entry hardware still owns.
//!
//! Each completion is reported as the expanded 64-byte CQE, decoded by
//! [`super::cqe`] (so the JSON keys are those of `mlx5dp decode cqe`),
//! plus its ring slot, whether it came from a compressed session, and the
//! mini-format fields under their mini-CQE names (`rx_hash`, `checksum`,
//! and `stride_idx`/`strides` on a striding RQ).
//!
//! Slots: every completion stands for one consumer index, minis included
//! (a basic session of N minis covers N slots from its title, an enhanced
//! compressed CQE of N minis covers N slots from itself); `slot` is that
//! index modulo the ring size.
//!
//! Panic policy: any bytes and parameters give a [`DecodedRing`] or a
//! [`RingError`]; nothing panics. A snapshot holds at most one ring's
//! worth of consumer indices from `ci`: a session reaching beyond that
//! ran past the ring and is an error, as is every [`PollError`].

use super::cqe::{CqeSize, DecodedCqe};
use super::mini::MiniFormat;
use super::{Fields, Value};
use mlx5dp::cq::{
    zip::has_stride_index, Cq, CqConfig, CqInitError, Layout, LookupError, Origin, PollError,
    RawCounters, RecvRetired, SendRetired, StrideCompletion, WcOpcode, WorkQueues, WqRef,
};
use mlx5dp::prm::{Cqe64, CqeFormat, CqeOpcode, MiniCqeFormat, MprqByteCnt, OpOwn, WcStatus};
use std::fmt;
use std::fmt::Write as _;
use zerocopy::FromBytes;

/// The CQ's compression layout (`cqe_comp_layout`), which also decides
/// the ownership rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum CqLayout {
    /// Basic: title + arrays of eight minis; ownership by the owner bit.
    #[default]
    #[value(aliases = ["0", "legacy"])]
    Basic,
    /// Enhanced: compressed CQEs of up to seven minis after a regular
    /// title; ownership by the validity iteration count (byte 62).
    #[value(aliases = ["1"])]
    Enhanced,
}

impl CqLayout {
    /// The name used on the command line.
    pub const fn name(self) -> &'static str {
        match self {
            CqLayout::Basic => "basic",
            CqLayout::Enhanced => "enhanced",
        }
    }

    const fn core(self) -> Layout {
        match self {
            CqLayout::Basic => Layout::Basic,
            CqLayout::Enhanced => Layout::Enhanced,
        }
    }
}

/// How the CQ was created, and where software stood.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingParams {
    /// CQE size (`cqe_sz`).
    pub cqe_size: CqeSize,
    /// Number of CQEs (a power of two).
    pub cqe_cnt: u32,
    /// Consumer index (free-running): the first slot to poll and, with
    /// `cqe_cnt`, the expected owner parity / iteration count.
    pub ci: u32,
    /// Compression layout.
    pub layout: CqLayout,
    /// Mini-CQE format. `req` reads the CQ as a send CQ; the poller reads
    /// minis of a REQ title as requester minis whatever the format.
    pub mini_format: MiniFormat,
    /// The responder completions come from a striding RQ. Implied by the
    /// `*-stridx` formats.
    pub striding_rq: bool,
}

impl RingParams {
    /// Whether responder completions are read as striding-RQ completions.
    pub fn striding(&self) -> bool {
        self.striding_rq || has_stride_index(self.core_format())
    }

    /// The responder format the CQ context carries (a send CQ has none;
    /// its title's REQ opcode selects the requester layout).
    fn core_format(&self) -> MiniCqeFormat {
        match self.mini_format {
            MiniFormat::Hash | MiniFormat::Req => MiniCqeFormat::Hash,
            MiniFormat::Csum => MiniCqeFormat::Csum,
            MiniFormat::FtagStridx => MiniCqeFormat::FtagStridx,
            MiniFormat::CsumStridx => MiniCqeFormat::CsumStridx,
            MiniFormat::L34hStridx => MiniCqeFormat::L34hStridx,
        }
    }

    fn ring_bytes(&self) -> Option<usize> {
        usize::try_from(self.cqe_cnt)
            .ok()?
            .checked_mul(self.cqe_size.bytes())
    }

    fn slot(&self, ci: u32) -> u32 {
        ci & self.cqe_cnt.wrapping_sub(1)
    }
}

/// One completion, as the poller reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RingCompletion {
    /// The consumer index it stands for (free-running).
    pub ci: u32,
    /// `ci` modulo the ring size.
    pub slot: u32,
    /// Unpacked from a compressed session.
    pub compressed: bool,
    /// The CQE the poller reported (a mini: the title with the mini's
    /// fields applied); a regular 128-byte CQE keeps its first half.
    pub cqe: DecodedCqe,
    /// Read as a striding-RQ responder completion.
    pub striding: bool,
}

/// A polled ring snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodedRing {
    /// The parameters it was polled with.
    pub params: RingParams,
    /// The completions, in poll order.
    pub completions: Vec<RingCompletion>,
    /// The consumer index after the last completion (free-running).
    pub ci: u32,
}

/// Why a ring snapshot could not be polled. `Display` is one line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RingError {
    /// `--cqe-cnt` is not a power of two the poller accepts.
    CqeCount(u32),
    /// The input is not `cqe_cnt` CQEs.
    Length {
        /// Number of CQEs.
        cqe_cnt: u32,
        /// CQE size in bytes.
        cqe_size: usize,
        /// Bytes given.
        got: usize,
    },
    /// The poller refused an entry; `decoded` completions came before it.
    Poll {
        /// What the poller said.
        error: PollError,
        /// Ring size, for the message.
        cqe_cnt: u32,
        /// Completions decoded before the error.
        decoded: usize,
    },
    /// A compressed session stands for consumer indices beyond the one
    /// ring's worth a snapshot can hold.
    PastRing {
        /// The consumer index the offending mini stands for.
        ci: u32,
        /// The consumer index polling started at.
        start: u32,
        /// Ring size.
        cqe_cnt: u32,
        /// Completions decoded before it.
        decoded: usize,
    },
}

impl fmt::Display for RingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RingError::CqeCount(n) => write!(
                f,
                "--cqe-cnt must be a power of two from 1 to {}, got {n}",
                1u32 << 23
            ),
            RingError::Length {
                cqe_cnt,
                cqe_size,
                got,
            } => write!(
                f,
                "a ring of {cqe_cnt} {cqe_size}-byte CQEs is {} bytes, got {got} bytes",
                u64::from(*cqe_cnt) * *cqe_size as u64
            ),
            RingError::Poll {
                error,
                cqe_cnt,
                decoded,
            } => {
                let slot = |ci: u32| ci & cqe_cnt.wrapping_sub(1);
                match error {
                    PollError::BadSessionLength { ci, count } => write!(
                        f,
                        "slot {} (ci {ci}): basic-layout title declares {count} mini-CQEs; a session holds 2 to {cqe_cnt} (the ring size): truncated or corrupt session",
                        slot(*ci)
                    ),
                    PollError::BadEnhancedBlock { ci, count } if *count as usize > 7 => write!(
                        f,
                        "slot {} (ci {ci}): enhanced compressed CQE declares {count} mini-CQEs, at most 7",
                        slot(*ci)
                    ),
                    PollError::BadEnhancedBlock { ci, .. } => write!(
                        f,
                        "slot {} (ci {ci}): enhanced compressed CQE with no regular CQE polled before it to serve as its title (start --ci at a regular CQE)",
                        slot(*ci)
                    ),
                    PollError::UnsupportedOpcode { opcode, ci } => write!(
                        f,
                        "slot {} (ci {ci}): CQE opcode {:#x} ({}) is not a completion the poller handles",
                        slot(*ci),
                        opcode.raw(),
                        opcode.name()
                    ),
                    PollError::UnexpectedCompressed { ci } => write!(
                        f,
                        "slot {} (ci {ci}): compressed CQE on a CQ without compression",
                        slot(*ci)
                    ),
                    PollError::Lookup { wqe_counter, .. } => write!(
                        f,
                        "the work queue refused wqe_counter {wqe_counter:#06x}"
                    ),
                    PollError::Broken => write!(f, "the CQ is broken"),
                    PollError::NotStriding => write!(f, "the CQ serves no striding RQ"),
                }?;
                write!(f, " (after {decoded} completion(s))")
            }
            RingError::PastRing {
                ci,
                start,
                cqe_cnt,
                decoded,
            } => write!(
                f,
                "slot {} (ci {ci}): the compressed session runs past the ring: a snapshot polled from ci {start} holds ci {start} to {} at most (after {decoded} completion(s))",
                ci & cqe_cnt.wrapping_sub(1),
                start.wrapping_add(cqe_cnt.wrapping_sub(1))
            ),
        }
    }
}

impl std::error::Error for RingError {}

/// Polls a ring snapshot (`params.cqe_cnt` CQEs of `params.cqe_size`
/// bytes) from `params.ci` until the first hardware-owned entry.
pub fn decode_ring(bytes: &[u8], params: &RingParams) -> Result<DecodedRing, RingError> {
    let cqe_cnt = params.cqe_cnt;
    if !cqe_cnt.is_power_of_two() || cqe_cnt > 1 << 23 {
        return Err(RingError::CqeCount(cqe_cnt));
    }
    if params.ring_bytes() != Some(bytes.len()) {
        return Err(RingError::Length {
            cqe_cnt,
            cqe_size: params.cqe_size.bytes(),
            got: bytes.len(),
        });
    }
    let cfg = CqConfig {
        compression: Some((params.layout.core(), params.core_format())),
        striding_rq: params.striding(),
        unzip: crate::cpu::best_unzip(),
        ..CqConfig::default()
    };
    let core_size = match params.cqe_size {
        CqeSize::B64 => mlx5dp::cq::CqeSize::B64,
        CqeSize::B128 => mlx5dp::cq::CqeSize::B128,
    };
    let start = match params.layout {
        CqLayout::Basic => basic_title_start(bytes, params),
        CqLayout::Enhanced => enhanced_title_start(bytes, params),
    };
    let mut ring = ring_copy::RingCopy::new(bytes);
    let polled = ring.with_cq(cqe_cnt, core_size, cfg, start, |cq| {
        poll_all(cq, bytes, params, start)
    });
    match polled {
        Ok(result) => result,
        Err(ring_copy::CopyError::Length) => Err(RingError::Length {
            cqe_cnt,
            cqe_size: params.cqe_size.bytes(),
            got: bytes.len(),
        }),
        Err(ring_copy::CopyError::Init(CqInitError::CqeCountNotPowerOfTwo(n)))
        | Err(ring_copy::CopyError::Init(CqInitError::CqeCountTooLarge(n))) => {
            Err(RingError::CqeCount(n))
        }
        // No doorbell or UAR problem can arise with our own allocations
        // and CQN 0; report it as the count the user controls.
        Err(ring_copy::CopyError::Init(_)) => Err(RingError::CqeCount(cqe_cnt)),
    }
}

/// The `ibv_wc` the core's poller reports for one CQE (64 bytes, or a
/// 128-byte slot) polled alone, as `ibv_poll_cq` would on a QP with the
/// receive checksum capability (a raw Ethernet QP: `IBV_WC_IP_CSUM_OK` is
/// reported where libmlx5 reports it for one) and no SRQ; the wr_id is
/// the `wqe_counter`. `None` when the poller reports no completion for it:
/// an entry hardware still owns (opcode INVALID), a compressed CQE, a
/// RESIZE_CQ CQE, an opcode the poller refuses.
pub fn wc_of(bytes: &[u8], size: CqeSize, wr_data: WcOpcode) -> Option<mlx5dp::cq::Wc> {
    let core_size = match size {
        CqeSize::B64 => mlx5dp::cq::CqeSize::B64,
        CqeSize::B128 => mlx5dp::cq::CqeSize::B128,
    };
    // (`op_own` is the slot's last byte.)
    let owner = bytes
        .last()
        .is_some_and(|&b| mlx5dp::prm::OpOwn::from_bits(b).owner());
    let mut ring = ring_copy::RingCopy::new(bytes);
    // A ring of one entry polled at the index whose pass expects the CQE's
    // own owner bit.
    let ci = u32::from(owner);
    ring.with_cq(1, core_size, CqConfig::default(), ci, |cq| {
        let mut wqs = OneSlot { wr_data };
        let mut wc = None;
        cq.poll(&mut wqs, 1, |c| wc = Some(c.to_wc())).ok()?;
        wc
    })
    .ok()
    .flatten()
}

/// The work queues of [`wc_of`]: a send slot whose recorded completion
/// opcode (libmlx5 `sq.wr_data`) is `wr_data`, a receive queue with the
/// checksum capability (as [`RawCounters`] with `rx_csum_valid`).
struct OneSlot {
    wr_data: WcOpcode,
}

impl WorkQueues for OneSlot {
    fn retire_send(
        &mut self,
        _: WqRef,
        wqe_counter: u16,
        _: WcStatus,
    ) -> Result<SendRetired, LookupError> {
        Ok(SendRetired {
            wr_id: u64::from(wqe_counter),
            wr_opcode: Some(self.wr_data),
        })
    }

    fn retire_recv(
        &mut self,
        wq: WqRef,
        wqe_counter: u16,
        status: WcStatus,
    ) -> Result<RecvRetired, LookupError> {
        recv().retire_recv(wq, wqe_counter, status)
    }

    fn retire_strides(
        &mut self,
        wq: WqRef,
        c: StrideCompletion,
        status: WcStatus,
    ) -> Result<RecvRetired, LookupError> {
        recv().retire_strides(wq, c, status)
    }
}

/// [`OneSlot`]'s receive side.
fn recv() -> RawCounters {
    RawCounters {
        rx_csum_valid: true,
    }
}

/// Whether a CQE's opcode can head a compressed session (a completion of
/// a send or a receive: the minis take its opcode).
fn title_opcode(op_own: OpOwn) -> bool {
    matches!(
        CqeOpcode::from_raw(op_own.opcode()),
        CqeOpcode::Req
            | CqeOpcode::RespWrImm
            | CqeOpcode::RespSend
            | CqeOpcode::RespSendImm
            | CqeOpcode::RespSendInv
    )
}

/// Basic layout, `--ci` inside a compressed session (a consumer that
/// stopped between two minis: the kernel's `cqd->left`, this core's
/// `poll_burst`; the CQ doorbell record then holds such an index): the
/// slot at `--ci` is a mini array or a slot the session skipped, which
/// says nothing by itself (an array's last byte is a mini's, and may look
/// like any `op_own`). The nearest title before `params.ci` of its own pass
/// (owner bit) whose session of `byte_cnt` minis (2 up to the ring size)
/// covers `params.ci` is returned: the ring is polled from there and
/// reported from `params.ci`, so the minis keep their title's fields and
/// indices. `params.ci` itself when there is none.
///
/// The slots before `params.ci` may hold the next pass's entries (a full
/// ring), whose mini arrays can read as a title of this pass. So when the
/// slot at `params.ci` is itself a valid entry of its pass (the owner bit
/// of its pass, an opcode other than INVALID), it is polled as one unless
/// `params.ci` is exactly one of the covering session's array slots (1, 8,
/// 16, … after the title), the one place inside a session where a
/// valid-looking `op_own` is expected (an array's last byte is a mini's): a
/// hole of a session holds the previous pass's entry or an invalidated
/// slot. For the same reason the nearest such title is taken only if the
/// holes of its session before `params.ci` hold no entry hardware wrote in
/// their pass (a real session's holes hold the previous pass's entries or
/// slots a consumer invalidated: DPDK's and this core's 0xF0, the kernel's
/// owner byte); DPDK 22.11's own Rx code, polling full rings, showed next-
/// pass arrays reading as titles (`tests/oracle/dpdk`). A title two passes
/// old in a slot the last pass skipped is not told from a current one (its
/// owner bit is the same).
fn basic_title_start(bytes: &[u8], params: &RingParams) -> u32 {
    let stride = params.cqe_size.bytes();
    let log2 = params.cqe_cnt.trailing_zeros();
    let op_own_at = |t: u32| {
        let off = params.slot(t) as usize * stride + stride - 1;
        bytes.get(off).map(|&b| OpOwn::from_bits(b))
    };
    // Whether the slot at `params.ci` reads as an entry of its own pass.
    let valid_at_ci = op_own_at(params.ci).is_some_and(|op_own| {
        u32::from(op_own.owner()) == (params.ci >> log2) & 1
            && CqeOpcode::from_raw(op_own.opcode()) != CqeOpcode::Invalid
    });
    // Whether the CQE proper at index `t` is a title of `t`'s pass (owner
    // bit) whose session covers `params.ci` (at one of its array slots if
    // the slot at `params.ci` is valid).
    let covering_title = |t: u32| {
        let off = params.slot(t) as usize * stride + stride - 64;
        let Some(cqe) = bytes
            .get(off..off + 64)
            .and_then(|b| Cqe64::read_from_bytes(b).ok())
        else {
            return false;
        };
        let (op_own, count) = (cqe.op_own, cqe.byte_cnt.get());
        let offset = params.ci.wrapping_sub(t);
        u32::from(op_own.owner()) == (t >> log2) & 1
            && op_own.format() == CqeFormat::Compressed.raw()
            && title_opcode(op_own)
            && (2..=params.cqe_cnt).contains(&count)
            && offset < count
            && (!valid_at_ci || offset == 1 || offset % 8 == 0)
    };
    // Whether the slot at index `i` reads as an entry hardware wrote in
    // `i`'s pass: its owner bit, an opcode other than INVALID, and not the
    // kernel's consumed-slot mark (`op_own` = the owner bit alone,
    // `mlx5e_cqes_update_owner`).
    let written_in_pass = |i: u32| {
        op_own_at(i).is_some_and(|op_own| {
            u32::from(op_own.owner()) == (i >> log2) & 1
                && CqeOpcode::from_raw(op_own.opcode()) != CqeOpcode::Invalid
                && op_own.into_bits() > 1
        })
    };
    // The nearest candidate only: its session's holes before `params.ci`
    // (not its array slots, whose last byte is a mini's) must hold no entry
    // of their own pass, as a real session's holes do (the previous pass's
    // entries, or slots a consumer invalidated). A hole that does is an
    // entry hardware wrote after the "title", which is then an older
    // pass's bytes (or the next pass's array in a full ring).
    let Some(t) = (1..params.cqe_cnt)
        .map(|back| params.ci.wrapping_sub(back))
        .find(|&t| covering_title(t))
    else {
        return params.ci;
    };
    let hole_written = (2..params.ci.wrapping_sub(t))
        .filter(|offset| offset % 8 != 0)
        .any(|offset| written_in_pass(t.wrapping_add(offset)));
    if hole_written {
        params.ci
    } else {
        t
    }
}

/// Enhanced layout, `--ci` at a compressed CQE: its title is the regular
/// CQE the consumer polled before it, still in the ring (DPDK keeps a copy
/// in `rxq->title_cqe`, the kernel in `cqd->title`; a dump taken mid-stream
/// holds it in an earlier slot). The nearest regular CQE before `params.ci`
/// from which the entries of its validity run (compressed CQEs, each
/// standing for its minis' indices, and error CQEs, which are no title)
/// lead exactly to `params.ci` is returned: the ring is polled from there
/// and reported from `params.ci`, so the minis carry the title's fields and
/// the running counter the consumer had. `params.ci` itself in every other
/// case (also when no such CQE is found: the poller then reports the
/// missing title).
fn enhanced_title_start(bytes: &[u8], params: &RingParams) -> u32 {
    if params.layout != CqLayout::Enhanced {
        return params.ci;
    }
    let stride = params.cqe_size.bytes();
    let log2 = params.cqe_cnt.trailing_zeros();
    // The CQE proper at index `ci`, if its validity byte says it is of
    // `ci`'s pass: its `op_own`.
    let entry = |ci: u32| {
        let off = params.slot(ci) as usize * stride + stride - 64;
        bytes
            .get(off + 62..off + 64)
            .filter(|b| b[0] == (ci >> log2) as u8)
            .map(|b| OpOwn::from_bits(b[1]))
    };
    let compressed = |op_own: OpOwn| op_own.format() == CqeFormat::Compressed.raw();
    let title = |op_own: OpOwn| !compressed(op_own) && title_opcode(op_own);
    if !entry(params.ci).is_some_and(compressed) {
        return params.ci;
    }
    // Whether the entries after a title at `from` lead to `params.ci`.
    let leads_to_ci = |from: u32| {
        let mut at = from.wrapping_add(1);
        while at.wrapping_sub(from) < params.ci.wrapping_sub(from) {
            let Some(op_own) = entry(at) else {
                return false;
            };
            at = at.wrapping_add(if compressed(op_own) {
                u32::from(op_own.opcode()) + 1
            } else if matches!(
                CqeOpcode::from_raw(op_own.opcode()),
                CqeOpcode::ReqErr | CqeOpcode::RespErr
            ) {
                1
            } else {
                return false;
            });
        }
        at == params.ci
    };
    (1..params.cqe_cnt)
        .map(|back| params.ci.wrapping_sub(back))
        .find(|&ci| entry(ci).is_some_and(title) && leads_to_ci(ci))
        .unwrap_or(params.ci)
}

/// The poll loop: one completion per call, as `ibv_poll_cq(cq, 1, wc)`,
/// from `polled_from` (at most `params.ci`: see [`basic_title_start`] and
/// [`enhanced_title_start`]); what comes before `params.ci` is not
/// reported.
fn poll_all(
    cq: &mut Cq,
    bytes: &[u8],
    params: &RingParams,
    polled_from: u32,
) -> Result<DecodedRing, RingError> {
    let start = params.ci;
    let primed = start.wrapping_sub(polled_from);
    let stride = params.cqe_size.bytes();
    let mut wqs = RawCounters::default();
    let mut completions = Vec::new();
    // A snapshot holds at most `cqe_cnt` consumer indices, so at most that
    // many completions; the bound only guards the loop.
    let max = u64::from(params.cqe_cnt) + 1;
    while (completions.len() as u64) < max {
        let mut got: Option<(mlx5dp::prm::Cqe64, Origin, bool)> = None;
        let polled = cq.poll(&mut wqs, 1, |c| {
            got = Some((*c.cqe(), c.origin(), c.stride_index().is_some()));
        });
        match polled {
            Ok(_) => {}
            Err(error) => {
                return Err(RingError::Poll {
                    error,
                    cqe_cnt: params.cqe_cnt,
                    decoded: completions.len(),
                })
            }
        }
        let Some((mut cqe, origin, striding)) = got else {
            break;
        };
        // The index the completion stands for: a regular CQE's own; a
        // mini's, its title's (compressed CQE's) plus its place, whatever
        // the entries before it were (fillers, RESIZE_CQ).
        let ci = cq.reported_index();
        if ci.wrapping_sub(polled_from) < primed {
            // Polled before `--ci` to hold the title: not reported.
            continue;
        }
        if ci.wrapping_sub(start) >= params.cqe_cnt {
            return Err(RingError::PastRing {
                ci,
                start,
                cqe_cnt: params.cqe_cnt,
                decoded: completions.len(),
            });
        }
        let compressed = origin == Origin::Mini;
        if compressed {
            // The owner bit of the mini's own index, as the kernel rebuilds
            // an expanded CQE (`mlx5e_decompress_cqe`; the core leaves it
            // clear: it does not know the index when it expands).
            let owner = (ci >> params.cqe_cnt.trailing_zeros()) & 1 != 0;
            cqe.op_own = cqe.op_own.with_owner(owner);
        }
        let slot = params.slot(ci);
        let first_half = match params.cqe_size {
            CqeSize::B128 if !compressed => {
                let off = slot as usize * stride;
                bytes
                    .get(off..off + 64)
                    .and_then(|h| <[u8; 64]>::try_from(h).ok())
            }
            _ => None,
        };
        completions.push(RingCompletion {
            ci,
            slot,
            compressed,
            cqe: DecodedCqe {
                size: params.cqe_size,
                cqe,
                first_half,
                wr_data: WcOpcode::Send,
            },
            striding,
        });
    }
    Ok(DecodedRing {
        params: *params,
        completions,
        ci: cq.consumer_index(),
    })
}

impl RingCompletion {
    /// The fields of one output line: `slot`, `compressed`, every field of
    /// `mlx5dp decode cqe`, then the mini-format fields.
    pub fn fields(&self) -> Fields {
        let c = &self.cqe.cqe;
        let mut f = Fields::new();
        f.dec("slot", self.slot).flag("compressed", self.compressed);
        f.0.extend(self.cqe.fields().0);
        f.hex("rx_hash", c.rss_hash_result.get(), 8)
            .hex("checksum", c.check_sum.get(), 4);
        if let Some((idx, strides)) = self.stride() {
            f.dec("stride_idx", idx).dec("strides", strides);
        }
        f
    }

    /// Striding RQ responder: the stride index and strides consumed.
    pub fn stride(&self) -> Option<(u16, u16)> {
        self.striding.then(|| {
            let c = &self.cqe.cqe;
            (
                c.wqe_counter.get(),
                MprqByteCnt::from_bits(c.byte_cnt.get()).strides(),
            )
        })
    }

    /// One readable line (no newline).
    pub fn to_line(&self) -> String {
        let c = &self.cqe.cqe;
        let d = &self.cqe;
        let mut s = format!(
            "slot {:>5}  ci {:>10}  {}  {}",
            self.slot,
            self.ci,
            if self.compressed { "mini" } else { "cqe " },
            d.opcode().name()
        );
        if d.is_error() {
            let e = d.err();
            let _ = write!(
                s,
                " syndrome={:#04x} ({}) vendor={:#04x}",
                e.syndrome,
                e.syndrome().name(),
                e.vendor_err_synd
            );
        }
        let _ = write!(
            s,
            " byte_cnt={} qpn={:#08x} wqe_counter={:#06x}",
            c.byte_cnt.get(),
            d.qpn(),
            c.wqe_counter.get()
        );
        match d.opcode() {
            CqeOpcode::Req => {
                let _ = write!(s, " send_opcode={}", c.send_opcode().name());
            }
            CqeOpcode::ReqErr | CqeOpcode::RespErr => {}
            _ => {
                let _ = write!(
                    s,
                    " rx_hash={:#010x} checksum={:#06x} l3={} l4={} ok={}{}{}",
                    c.rss_hash_result.get(),
                    c.check_sum.get(),
                    c.l3_hdr_type().name(),
                    c.l4_hdr_type().name(),
                    if c.hds_ip_ext.l2_ok() { "L2" } else { "-" },
                    if c.hds_ip_ext.l3_ok() { "L3" } else { "-" },
                    if c.hds_ip_ext.l4_ok() { "L4" } else { "-" },
                );
                if c.l4_l3_hdr_type.cvlan_stripped() {
                    let _ = write!(s, " vlan={:#06x}", c.vlan_info.get());
                }
                let _ = write!(
                    s,
                    " flow_tag={:#08x}",
                    c.sop_drop_qpn.into_bits().get() & mlx5dp::prm::FLOW_TAG_MASK
                );
                if let Some((idx, strides)) = self.stride() {
                    let b = MprqByteCnt::from_bits(c.byte_cnt.get());
                    let _ = write!(
                        s,
                        " stride_idx={idx} strides={strides} len={}",
                        b.byte_cnt()
                    );
                }
            }
        }
        s
    }
}

impl DecodedRing {
    /// JSON Lines: one compact object per completion, then `{"ci":N}`.
    pub fn to_json_lines(&self) -> String {
        let mut out = String::new();
        for c in &self.completions {
            out.push_str(&c.fields().to_json().to_string());
            out.push('\n');
        }
        let mut last = Fields::new();
        last.push("ci", Value::Uint(u64::from(self.ci), super::Radix::Dec));
        out.push_str(&last.to_json().to_string());
        out.push('\n');
        out
    }

    /// One line per completion, then the consumer index.
    pub fn to_human(&self) -> String {
        let mut out = String::new();
        for c in &self.completions {
            out.push_str(&c.to_line());
            out.push('\n');
        }
        let _ = writeln!(
            out,
            "ci {} (slot {} next; {} completion(s), layout {}, mini format {})",
            self.ci,
            self.params.slot(self.ci),
            self.completions.len(),
            self.params.layout.name(),
            self.params.mini_format.name()
        );
        out
    }
}

/// The one place `decode` holds `unsafe`: a private copy of the ring in
/// ordinary heap memory that a core [`Cq`] polls for the length of one
/// closure call.
mod ring_copy {
    #![expect(
        unsafe_code,
        reason = "the core's Cq is built from raw parts; this copy owns them"
    )]

    use mlx5dp::cq::{Cq, CqConfig, CqInitError, CqParts, CqeSize};
    use std::ptr::NonNull;

    /// Why no CQ could be built over the copy.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub(super) enum CopyError {
        /// The copy is not `cqe_cnt` CQEs.
        Length,
        /// The core refused the parts.
        Init(CqInitError),
    }

    /// One 64-byte line of the copy, 64-byte aligned (the alignment the
    /// core requires of a CQ buffer, `CqInitError::MisalignedBuf`).
    #[derive(Debug, Clone, Copy)]
    #[repr(C, align(64))]
    struct Line([u8; 64]);

    /// A heap copy of the ring bytes (64-byte aligned, in whole lines) and
    /// an 8-byte doorbell record, held only as raw pointers so the CQ's
    /// accesses and ours share one provenance.
    #[derive(Debug)]
    pub(super) struct RingCopy {
        ring: NonNull<u8>,
        /// The bytes copied (the lines hold `len.div_ceil(64) * 64`).
        len: usize,
        dbrec: NonNull<[u32; 2]>,
    }

    impl RingCopy {
        /// Copies `bytes`.
        pub(super) fn new(bytes: &[u8]) -> Self {
            let len = bytes.len();
            let mut lines = vec![Line([0; 64]); len.div_ceil(64)];
            for (line, chunk) in lines.iter_mut().zip(bytes.chunks(64)) {
                line.0[..chunk.len()].copy_from_slice(chunk);
            }
            let ring = NonNull::from(Box::leak(lines.into_boxed_slice())).cast::<u8>();
            let dbrec = NonNull::from(Box::leak(Box::new([0u32; 2])));
            Self { ring, len, dbrec }
        }

        /// Builds a CQ over the copy, runs `f` on it and drops it before
        /// returning, so it never outlives the memory.
        pub(super) fn with_cq<R>(
            &mut self,
            cqe_cnt: u32,
            cqe_size: CqeSize,
            cfg: CqConfig,
            ci: u32,
            f: impl FnOnce(&mut Cq) -> R,
        ) -> Result<R, CopyError> {
            let want = usize::try_from(cqe_cnt)
                .ok()
                .and_then(|n| n.checked_mul(cqe_size.bytes()));
            if want != Some(self.len) {
                return Err(CopyError::Length);
            }
            let parts = CqParts {
                buf: self.ring,
                cqe_cnt,
                cqe_size,
                dbrec: self.dbrec.cast::<u32>(),
                uar: None,
                cqn: 0,
            };
            // SAFETY: `buf` points to `self.len == cqe_cnt * cqe_size`
            // bytes (checked above) that this struct owns and frees only in
            // `Drop`; the doorbell record is a 4-byte-aligned `[u32; 2]` it
            // owns too. `&mut self` keeps anyone else from touching either
            // while the CQ exists, and the CQ is dropped before this
            // function returns (the closure only borrows it, and no other
            // `Cq` exists to swap it with), so it never outlives them. No
            // UAR: the CQ is never armed.
            let mut cq = unsafe { Cq::from_raw_parts(parts, cfg, ci) }.map_err(CopyError::Init)?;
            // `cq` is dropped when this function returns: it never escapes.
            let result = f(&mut cq);
            Ok(result)
        }
    }

    impl Drop for RingCopy {
        fn drop(&mut self) {
            let ring = std::ptr::slice_from_raw_parts_mut(
                self.ring.as_ptr().cast::<Line>(),
                self.len.div_ceil(64),
            );
            // SAFETY: both pointers came from `Box::leak` in `new` with
            // exactly these types and lengths, no CQ over them is alive
            // (`with_cq` drops its CQ before returning), and they are
            // freed once, here.
            unsafe {
                drop(Box::from_raw(ring));
                drop(Box::from_raw(self.dbrec.as_ptr()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mlx5dp::prm::{Cqe64, OpOwn, CQE_OP_OWN_INIT, CQE_VIC_INIT};

    const N: usize = 16;

    /// A 64-byte-CQE ring in its initial state (opcode INVALID, owner 1,
    /// validity 0xff), as rdma-core / DPDK initialise it.
    fn ring(n: usize, stride: usize) -> Vec<u8> {
        let mut v = vec![0u8; n * stride];
        for s in 0..n {
            v[s * stride + stride - 1] = CQE_OP_OWN_INIT;
            v[s * stride + stride - 2] = CQE_VIC_INIT;
        }
        v
    }

    fn put(ring: &mut [u8], stride: usize, slot: usize, cqe: &Cqe64) {
        let b: [u8; 64] = zerocopy::transmute!(*cqe);
        ring[slot * stride + stride - 64..(slot + 1) * stride].copy_from_slice(&b);
    }

    fn resp(wqe_counter: u16, byte_cnt: u32, hash: u32, owner: bool, vic: u8) -> Cqe64 {
        let mut c = Cqe64 {
            op_own: OpOwn::new()
                .with_opcode(CqeOpcode::RespSend.raw())
                .with_owner(owner),
            signature: vic,
            ..Cqe64::default()
        };
        c.wqe_counter.set(wqe_counter);
        c.byte_cnt.set(byte_cnt);
        c.rss_hash_result.set(hash);
        c.sop_drop_qpn = c.sop_drop_qpn.with_qpn(0x123);
        c
    }

    fn params(layout: CqLayout, ci: u32) -> RingParams {
        RingParams {
            cqe_size: CqeSize::B64,
            cqe_cnt: N as u32,
            ci,
            layout,
            mini_format: MiniFormat::Hash,
            striding_rq: false,
        }
    }

    fn hash_mini(hash: u32, len: u32) -> [u8; 8] {
        let mut m = [0u8; 8];
        m[..4].copy_from_slice(&hash.to_be_bytes());
        m[4..].copy_from_slice(&len.to_be_bytes());
        m
    }

    /// An enhanced-layout compressed CQE of pass 0 holding `n` minis
    /// (`mini(i)` each).
    fn enhanced_cqe(n: usize, mini: impl Fn(usize) -> [u8; 8]) -> [u8; 64] {
        let mut zb = [0u8; 64];
        for i in 0..n {
            zb[i * 8..i * 8 + 8].copy_from_slice(&mini(i));
        }
        zb[62] = 0;
        zb[63] = (((n - 1) as u8) << 4) | (CqeFormat::Compressed.raw() << 2);
        zb
    }

    /// r1, basic session of 9 (title at 1, arrays at 2 and 9), r1.
    fn basic_ring() -> Vec<u8> {
        let mut r = ring(N, 64);
        put(&mut r, 64, 0, &resp(0, 64, 0xaaaa, false, 0));
        let mut title = resp(1, 9, 0xbbbb, false, 0);
        title.op_own = title.op_own.with_format(3);
        put(&mut r, 64, 1, &title);
        for (k, slot) in [2usize, 9].into_iter().enumerate() {
            for i in 0..8 {
                let m = k * 8 + i;
                if m < 9 {
                    let off = slot * 64 + i * 8;
                    r[off..off + 8].copy_from_slice(&hash_mini(0x100 + m as u32, 100 + m as u32));
                }
            }
        }
        put(&mut r, 64, 10, &resp(10, 1500, 0xcccc, false, 0));
        r
    }

    #[test]
    fn basic_session_in_poll_order() {
        let d = decode_ring(&basic_ring(), &params(CqLayout::Basic, 0)).unwrap();
        assert_eq!(d.completions.len(), 11);
        assert_eq!(d.ci, 11);
        let slots: Vec<u32> = d.completions.iter().map(|c| c.slot).collect();
        assert_eq!(slots, (0..11).collect::<Vec<_>>());
        assert!(!d.completions[0].compressed);
        for (i, c) in d.completions[1..10].iter().enumerate() {
            assert!(c.compressed);
            assert_eq!(c.cqe.cqe.byte_cnt.get(), 100 + i as u32);
            assert_eq!(c.cqe.cqe.rss_hash_result.get(), 0x100 + i as u32);
            assert_eq!(c.cqe.cqe.wqe_counter.get(), 1 + i as u16);
            assert_eq!(c.cqe.qpn(), 0x123);
        }
        assert_eq!(d.completions[10].cqe.cqe.byte_cnt.get(), 1500);
        let lines = d.to_json_lines();
        let last: serde_json::Value = serde_json::from_str(lines.lines().last().unwrap()).unwrap();
        assert_eq!(last, serde_json::json!({"ci": 11}));
        let first: serde_json::Value = serde_json::from_str(lines.lines().nth(1).unwrap()).unwrap();
        assert_eq!(first["slot"], 1);
        assert_eq!(first["compressed"], true);
        assert_eq!(first["rx_hash"], 0x100);
        assert_eq!(first["byte_cnt"], 100);
        assert_eq!(first["opcode"], "resp_send");
        assert!(first.get("stride_idx").is_none());
        assert_eq!(d.to_human().lines().count(), 12);
    }

    #[test]
    fn the_snapshot_is_not_modified_and_polling_is_repeatable() {
        let r = basic_ring();
        let a = decode_ring(&r, &params(CqLayout::Basic, 0)).unwrap();
        let b = decode_ring(&r, &params(CqLayout::Basic, 0)).unwrap();
        assert_eq!(a, b);
    }

    #[test]
    fn ownership_follows_ci() {
        let r = basic_ring();
        // Second pass: owner 1 expected, every entry has owner 0.
        let d = decode_ring(&r, &params(CqLayout::Basic, N as u32)).unwrap();
        assert!(d.completions.is_empty());
        assert_eq!(d.ci, N as u32);
        // Starting at slot 10 of the first pass: one completion.
        let d = decode_ring(&r, &params(CqLayout::Basic, 10)).unwrap();
        assert_eq!(d.completions.len(), 1);
        assert_eq!(d.ci, 11);
    }

    #[test]
    fn enhanced_layout() {
        let mut r = ring(N, 64);
        put(&mut r, 64, 0, &resp(5, 64, 0xaaaa, false, 0));
        let zb = enhanced_cqe(3, |i| hash_mini(0x200 + i as u32, 60 + i as u32));
        r[64..128].copy_from_slice(&zb);
        put(&mut r, 64, 4, &resp(9, 80, 0xdddd, false, 0));
        let d = decode_ring(&r, &params(CqLayout::Enhanced, 0)).unwrap();
        let got: Vec<(u32, bool, u16, u32)> = d
            .completions
            .iter()
            .map(|c| {
                (
                    c.slot,
                    c.compressed,
                    c.cqe.cqe.wqe_counter.get(),
                    c.cqe.cqe.byte_cnt.get(),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (0, false, 5, 64),
                (1, true, 6, 60),
                (2, true, 7, 61),
                (3, true, 8, 62),
                (4, false, 9, 80)
            ]
        );
        assert_eq!(d.ci, 5);
    }

    #[test]
    fn bad_sessions_are_errors() {
        // Basic title declaring more minis than the ring.
        let mut r = ring(N, 64);
        let mut title = resp(0, 100, 0, false, 0);
        title.op_own = title.op_own.with_format(3);
        put(&mut r, 64, 0, &title);
        let e = decode_ring(&r, &params(CqLayout::Basic, 0)).unwrap_err();
        assert!(matches!(e, RingError::Poll { .. }), "{e}");
        assert!(e.to_string().contains("100 mini-CQEs"), "{e}");

        // A session that fits the ring but starts too late: runs past it.
        let mut r = ring(N, 64);
        for s in 0..14 {
            put(&mut r, 64, s, &resp(s as u16, 64, 0, false, 0));
        }
        let mut title = resp(14, 4, 0, false, 0);
        title.op_own = title.op_own.with_format(3);
        put(&mut r, 64, 14, &title);
        // From ci 14 the session (14..17) fits the snapshot's window.
        let d = decode_ring(&r, &params(CqLayout::Basic, 14)).unwrap();
        assert_eq!(d.completions.len(), 4);
        assert_eq!(d.ci, 18);
        // From ci 0 it covers ci 16 and 17, which the snapshot cannot hold.
        let e = decode_ring(&r, &params(CqLayout::Basic, 0)).unwrap_err();
        assert!(
            matches!(
                e,
                RingError::PastRing {
                    ci: 16,
                    decoded: 16,
                    ..
                }
            ),
            "{e}"
        );
        assert!(e.to_string().contains("runs past the ring"), "{e}");

        // Enhanced compressed CQE without a title.
        let mut r = ring(N, 64);
        r[..64].copy_from_slice(&enhanced_cqe(2, |_| [0; 8]));
        let e = decode_ring(&r, &params(CqLayout::Enhanced, 0)).unwrap_err();
        assert!(e.to_string().contains("no regular CQE"), "{e}");
    }

    /// Enhanced layout, `--ci` at a compressed CQE: the title is the regular
    /// CQE before it (over earlier compressed CQEs, each standing for its
    /// minis' indices, and an error CQE), and the minis from `--ci` carry its
    /// fields and the running counter, as when the ring is polled from the
    /// title; with no regular CQE leading to it, the missing title is still
    /// an error.
    #[test]
    fn a_compressed_cqe_at_ci_takes_the_title_before_it() {
        // An enhanced compressed CQE of `n` hash minis at `slot`.
        fn block(r: &mut [u8], slot: usize, n: usize, base: u32) {
            let zb = enhanced_cqe(n, |i| hash_mini(base + i as u32, 100 + i as u32));
            r[slot * 64..slot * 64 + 64].copy_from_slice(&zb);
        }
        // Title at 0; minis at 1-3 (one CQE) and 4-5; an error CQE at 6;
        // minis at 7-8. Slots 2, 3 and 5 are holes holding junk.
        let mut r = ring(N, 64);
        put(&mut r, 64, 0, &resp(40, 64, 0x11, false, 0));
        block(&mut r, 1, 3, 0x100);
        block(&mut r, 4, 2, 0x200);
        let mut err = resp(0, 0, 0, false, 0);
        err.op_own = OpOwn::new().with_opcode(CqeOpcode::RespErr.raw());
        put(&mut r, 64, 6, &err);
        block(&mut r, 7, 2, 0x300);
        put(&mut r, 64, 2, &resp(9, 9, 9, false, 0));
        r[3 * 64..4 * 64].fill(0x5a);
        r[5 * 64 + 62] = 0;
        r[5 * 64 + 63] = CqeFormat::Compressed.raw() << 2;
        let all = decode_ring(&r, &params(CqLayout::Enhanced, 0)).unwrap();
        let counters: Vec<_> = all
            .completions
            .iter()
            .map(|c| (c.ci, c.cqe.cqe.wqe_counter.get()))
            .collect();
        assert_eq!(
            counters,
            [
                (0, 40),
                (1, 41),
                (2, 42),
                (3, 43),
                (4, 44),
                (5, 45),
                (6, 0),
                (7, 46),
                (8, 47)
            ]
        );
        for from in [1u32, 4, 7] {
            let mid = decode_ring(&r, &params(CqLayout::Enhanced, from)).unwrap();
            let want: Vec<_> = all.completions.iter().filter(|c| c.ci >= from).collect();
            assert_eq!(
                mid.completions.iter().collect::<Vec<_>>(),
                want,
                "--ci {from}"
            );
            assert_eq!(mid.ci, all.ci);
        }
        // No regular CQE leading to it: the title is missing.
        let mut r2 = r.clone();
        r2[..64].copy_from_slice(&ring(1, 64));
        let e = decode_ring(&r2, &params(CqLayout::Enhanced, 4)).unwrap_err();
        assert!(e.to_string().contains("no regular CQE"), "{e}");
    }

    /// Basic layout, `--ci` inside a session: polled from the session's
    /// title, reported from `--ci`, whatever the slot at `--ci` looks like
    /// (an array whose last mini byte reads as a valid `op_own`); a title of
    /// the other pass, or one whose session ends before `--ci`, is no title
    /// for it.
    #[test]
    fn a_basic_ci_inside_a_session_polls_from_its_title() {
        let mut r = basic_ring();
        // The second array's last byte (its eighth mini, absent: the session
        // holds 9) as a RESP_SEND CQE of pass 0.
        r[9 * 64 + 63] = CqeOpcode::RespSend.raw() << 4;
        let all = decode_ring(&r, &params(CqLayout::Basic, 0)).unwrap();
        assert_eq!(all.completions.len(), 11);
        for from in 2..=10u32 {
            let mid = decode_ring(&r, &params(CqLayout::Basic, from)).unwrap();
            let want: Vec<_> = all.completions.iter().filter(|c| c.ci >= from).collect();
            assert_eq!(
                mid.completions.iter().collect::<Vec<_>>(),
                want,
                "--ci {from}"
            );
            assert_eq!(mid.ci, all.ci, "--ci {from}");
        }
        // At the end of the session's reach nothing changes: slot 11 is
        // hardware's.
        let end = decode_ring(&r, &params(CqLayout::Basic, 11)).unwrap();
        assert!(end.completions.is_empty());
        assert_eq!(end.ci, 11);
        // The title with the other pass's owner bit covers nothing: slot 9
        // is then polled as the CQE it looks like.
        let mut other = r.clone();
        other[64 + 63] |= 1;
        let d = decode_ring(&other, &params(CqLayout::Basic, 9)).unwrap();
        assert!(!d.completions[0].compressed);
        assert_eq!(d.completions[0].slot, 9);
        // A session of 8 from slot 1 ends before 9: no title for --ci 9.
        let mut short = r.clone();
        short[64 + 0x2c..64 + 0x30].copy_from_slice(&8u32.to_be_bytes());
        let d = decode_ring(&short, &params(CqLayout::Basic, 9)).unwrap();
        assert!(!d.completions[0].compressed);
        // A valid entry of its pass at a hole of the session (slot 5, title
        // + 4): the "title" before it is the next pass's array of a full
        // ring as far as the poller can tell, and --ci 5 is polled from
        // slot 5 as a ring started there is.
        let mut hole = r.clone();
        put(&mut hole, 64, 5, &resp(5, 700, 0xdddd, false, 0));
        let d = decode_ring(&hole, &params(CqLayout::Basic, 5)).unwrap();
        assert!(!d.completions[0].compressed);
        assert_eq!(
            (
                d.completions[0].slot,
                d.completions[0].cqe.cqe.byte_cnt.get()
            ),
            (5, 700)
        );
        let mut started = hole.clone();
        started[..5 * 64].copy_from_slice(&ring(5, 64));
        let plain = decode_ring(&started, &params(CqLayout::Basic, 5)).unwrap();
        assert_eq!((d.completions, d.ci), (plain.completions, plain.ci));
        // Its hole invalid again (INVALID opcode, or the other pass's owner
        // bit): polled from the title.
        for op_own in [0xf0u8, 0x21] {
            hole[5 * 64 + 63] = op_own;
            let d = decode_ring(&hole, &params(CqLayout::Basic, 5)).unwrap();
            assert!(d.completions[0].compressed, "op_own {op_own:#x}");
            assert_eq!(d.completions[0].ci, 5);
        }
    }

    /// Basic layout, `--ci` at a title with regular CQEs of its pass before
    /// it, and further back a slot that reads as a title of this pass whose
    /// session would cover `--ci` at one of its array slots (in a full ring,
    /// the next pass's mini array: DPDK 22.11's own Rx code found this,
    /// tests/oracle/dpdk): the regular CQEs in that "session's" holes show
    /// hardware wrote past it, so `--ci` is polled as a ring started there.
    #[test]
    fn a_title_whose_holes_hold_entries_of_its_pass_covers_nothing() {
        let mut r = ring(N, 64);
        let mut fake = resp(0, 12, 0, false, 0);
        fake.op_own = fake.op_own.with_format(3);
        put(&mut r, 64, 0, &fake);
        for s in 1..8 {
            put(&mut r, 64, s, &resp(s as u16, 64 + s as u32, 0, false, 0));
        }
        let mut title = resp(8, 3, 0xbbbb, false, 0);
        title.op_own = title.op_own.with_format(3);
        put(&mut r, 64, 8, &title);
        for i in 0..3 {
            let off = 9 * 64 + i * 8;
            r[off..off + 8].copy_from_slice(&hash_mini(0x100 + i as u32, 100 + i as u32));
        }
        put(&mut r, 64, 11, &resp(11, 1500, 0xcccc, false, 0));
        let d = decode_ring(&r, &params(CqLayout::Basic, 8)).unwrap();
        let mut started = r.clone();
        started[..8 * 64].copy_from_slice(&ring(8, 64));
        let plain = decode_ring(&started, &params(CqLayout::Basic, 8)).unwrap();
        assert_eq!(d.completions.len(), 4);
        assert_eq!(d.ci, 12);
        assert_eq!((&d.completions, d.ci), (&plain.completions, plain.ci));
        // The same holes invalidated (a consumer's 0xf0, the kernel's owner
        // byte) or of the other pass: --ci 8 is then inside the session
        // from slot 0, at its first array slot after the first.
        for hole in [0xf0u8, 0x00, 0x21] {
            let mut mid = r.clone();
            for s in 2..8 {
                mid[s * 64 + 63] = hole;
            }
            let d = decode_ring(&mid, &params(CqLayout::Basic, 8)).unwrap();
            assert!(d.completions[0].compressed, "hole {hole:#x}");
            assert_eq!(d.completions[0].ci, 8);
            assert_eq!(d.ci, 12, "hole {hole:#x}");
        }
    }

    /// A RESIZE_CQ CQE (consumed, not printed) before a session whose
    /// first mini is a filler: every later mini still names its own slot.
    #[test]
    fn minis_after_a_resize_and_a_filler_name_their_slots() {
        let mut r = ring(N, 64);
        let mut resize = resp(0, 0, 0, false, 0);
        resize.op_own = resize.op_own.with_opcode(CqeOpcode::ResizeCq.raw());
        put(&mut r, 64, 0, &resize);
        let mut title = resp(1, 3, 0, false, 0);
        title.op_own = title.op_own.with_format(3);
        put(&mut r, 64, 1, &title);
        let minis: [[u8; 8]; 3] = [
            [0, 1, 0, 0, 0x80, 0x02, 0x00, 0x00],
            [0, 2, 0, 3, 0x00, 0x01, 0x00, 0x40],
            [0, 3, 0, 4, 0x00, 0x01, 0x00, 0x40],
        ];
        for (i, m) in minis.iter().enumerate() {
            r[2 * 64 + i * 8..2 * 64 + i * 8 + 8].copy_from_slice(m);
        }
        let p = RingParams {
            mini_format: MiniFormat::CsumStridx,
            ..params(CqLayout::Basic, 0)
        };
        let d = decode_ring(&r, &p).unwrap();
        let got: Vec<(u32, u32)> = d.completions.iter().map(|c| (c.slot, c.ci)).collect();
        assert_eq!(got, [(2, 2), (3, 3)]);
        assert_eq!(d.ci, 4);
    }

    /// A session title with an opcode the poller does not handle (or
    /// RESIZE_CQ's): an error naming the first mini's slot, not the slot
    /// before it (nor, at ci 0, a wrapped index); nothing dropped.
    #[test]
    fn a_title_that_is_no_completion_is_an_error_at_its_slot() {
        for (opcode, at) in [(8u8, 0usize), (6, 3), (CqeOpcode::ResizeCq.raw(), 0)] {
            let mut r = ring(N, 64);
            for s in 0..at {
                put(&mut r, 64, s, &resp(s as u16, 64, 0, false, 0));
            }
            let mut title = resp(at as u16, 3, 0, false, 0);
            title.op_own = title.op_own.with_format(3).with_opcode(opcode);
            put(&mut r, 64, at, &title);
            for i in 0..3 {
                let off = (at + 1) * 64 + i * 8;
                r[off..off + 8].copy_from_slice(&hash_mini(i as u32, 60));
            }
            let e = decode_ring(&r, &params(CqLayout::Basic, 0)).unwrap_err();
            match e {
                RingError::Poll {
                    error: PollError::UnsupportedOpcode { ci, .. },
                    decoded,
                    ..
                } => {
                    assert_eq!((ci, decoded), (at as u32, at), "opcode {opcode}");
                }
                other => panic!("opcode {opcode}: {other}"),
            }
            let msg = e.to_string();
            assert!(msg.starts_with(&format!("slot {at} (ci {at}):")), "{msg}");
        }
    }

    /// A mini's owner bit is its own slot's (the kernel's expanded CQE),
    /// across the ring's end; its solicited-event bit is clear.
    #[test]
    fn minis_carry_the_owner_bit_of_their_own_slot() {
        let mut r = ring(N, 64);
        // Pass 0 ends at slot N - 1: a session of 4 from slot N - 2 runs
        // into pass 1 (owner 1) at slots 0 and 1.
        let at = N - 2;
        let mut title = resp(0, 4, 0, false, 0);
        title.op_own = OpOwn::from_bits(title.op_own.with_format(3).into_bits() | 0x02);
        put(&mut r, 64, at, &title);
        for i in 0..4 {
            let off = (at + 1) * 64 + i * 8;
            r[off..off + 8].copy_from_slice(&hash_mini(i as u32, 60));
        }
        let d = decode_ring(&r, &params(CqLayout::Basic, at as u32)).unwrap();
        let got: Vec<(u32, bool, bool)> = d
            .completions
            .iter()
            .map(|c| {
                let b = c.cqe.cqe.op_own.into_bits();
                (c.slot, b & 1 != 0, b & 2 != 0)
            })
            .collect();
        let n = N as u32;
        assert_eq!(
            got,
            [
                (n - 2, false, false),
                (n - 1, false, false),
                (0, true, false),
                (1, true, false)
            ]
        );
    }

    #[test]
    fn striding_fillers_keep_their_slot() {
        // Basic session of 4 CSUM_STRIDX minis at slot 0; mini 1 is a
        // filler (byte_cnt bit 31): the poller skips it, but it still
        // stands for one consumer index.
        let mut r = ring(N, 64);
        let mut title = resp(0, 4, 0, false, 0);
        title.op_own = title.op_own.with_format(3);
        put(&mut r, 64, 0, &title);
        let minis: [[u8; 8]; 4] = [
            [0, 1, 0, 0, 0x00, 0x01, 0x00, 0x40],
            [0, 2, 0, 1, 0x80, 0x02, 0x00, 0x00],
            [0, 3, 0, 3, 0x00, 0x01, 0x00, 0x40],
            [0, 4, 0, 4, 0x00, 0x01, 0x00, 0x40],
        ];
        for (i, m) in minis.iter().enumerate() {
            r[64 + i * 8..64 + i * 8 + 8].copy_from_slice(m);
        }
        put(&mut r, 64, 4, &resp(5, 0x0001_0040, 0, false, 0));
        let p = RingParams {
            mini_format: MiniFormat::CsumStridx,
            ..params(CqLayout::Basic, 0)
        };
        let d = decode_ring(&r, &p).unwrap();
        type Row = (u32, bool, Option<(u16, u16)>);
        let got: Vec<Row> = d
            .completions
            .iter()
            .map(|c| (c.slot, c.compressed, c.stride()))
            .collect();
        assert_eq!(
            got,
            vec![
                (0, true, Some((0, 1))),
                (2, true, Some((3, 1))),
                (3, true, Some((4, 1))),
                (4, false, Some((5, 1)))
            ]
        );
        assert_eq!(d.ci, 5);
        let j = d.completions[1].fields().to_json();
        assert_eq!(j["checksum"], 3);
        assert_eq!(j["stride_idx"], 3);
        assert_eq!(j["strides"], 1);
    }

    #[test]
    fn enhanced_block_larger_than_the_ring_runs_past_it() {
        let mut r = ring(4, 64);
        put(&mut r, 64, 0, &resp(0, 64, 0, false, 0));
        r[64..128].copy_from_slice(&enhanced_cqe(7, |_| [0; 8]));
        let p = RingParams {
            cqe_cnt: 4,
            ..params(CqLayout::Enhanced, 0)
        };
        let e = decode_ring(&r, &p).unwrap_err();
        assert!(matches!(e, RingError::PastRing { ci: 4, .. }), "{e}");
    }

    #[test]
    fn parameters_are_checked() {
        let r = ring(N, 64);
        let mut p = params(CqLayout::Basic, 0);
        p.cqe_cnt = 12;
        assert_eq!(decode_ring(&r, &p), Err(RingError::CqeCount(12)));
        p.cqe_cnt = 0;
        assert_eq!(decode_ring(&r, &p), Err(RingError::CqeCount(0)));
        p.cqe_cnt = 8;
        assert!(matches!(
            decode_ring(&r, &p),
            Err(RingError::Length { got: 1024, .. })
        ));
        p.cqe_cnt = N as u32;
        p.cqe_size = CqeSize::B128;
        assert!(decode_ring(&r, &p).is_err());
    }

    #[test]
    fn cqe128_keeps_the_first_half_of_regular_cqes() {
        let mut r = ring(4, 128);
        put(&mut r, 128, 0, &resp(0, 64, 0, false, 0));
        r[..4].copy_from_slice(b"head");
        let p = RingParams {
            cqe_size: CqeSize::B128,
            cqe_cnt: 4,
            ..params(CqLayout::Basic, 0)
        };
        let d = decode_ring(&r, &p).unwrap();
        assert_eq!(d.completions.len(), 1);
        let j = d.completions[0].fields().to_json();
        assert_eq!(j["cqe_size"], 128);
        assert!(j["cqe128_first_half"]
            .as_str()
            .unwrap()
            .starts_with("68656164"));
    }

    #[test]
    fn arbitrary_rings_never_panic() {
        // A cheap deterministic sweep; the fuzz target `decode_cq` goes further.
        let mut x = 0x1234_5678u32;
        for round in 0..300 {
            let mut r = vec![0u8; 8 * 64];
            for b in r.iter_mut() {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                *b = x as u8;
            }
            for layout in [CqLayout::Basic, CqLayout::Enhanced] {
                for fmt in [
                    MiniFormat::Hash,
                    MiniFormat::Csum,
                    MiniFormat::FtagStridx,
                    MiniFormat::CsumStridx,
                    MiniFormat::L34hStridx,
                    MiniFormat::Req,
                ] {
                    let p = RingParams {
                        cqe_cnt: 8,
                        ci: round,
                        mini_format: fmt,
                        ..params(layout, 0)
                    };
                    if let Ok(d) = decode_ring(&r, &p) {
                        let _ = d.to_human();
                        let _ = d.to_json_lines();
                        assert!(d.completions.len() <= 8);
                    }
                }
            }
        }
    }
}
