//! The completion queue (DESIGN `cq`; PRM-FACTS §9–§12).
//!
//! A [`Cq`] is built once from the raw parts `mlx5dp-setup` extracted (CQE
//! buffer, CQE count and size, doorbell record, UAR page, CQN); everything
//! after that unsafe constructor is safe. Polling follows STYLE point 8: read
//! the ownership byte once, issue the from-device barrier, copy the entry
//! out once and decode the copy; device-reported indices are checked before
//! use (session lengths here, `wqe_counter` by the owning work queue through
//! [`WorkQueues`]).
//!
//! The batch API mirrors `ibv_cq_ex`: [`Cq::start_poll`] positions a
//! [`PollBatch`] on the first completion, [`PollBatch::next_poll`] advances,
//! [`PollBatch::end_poll`] (or drop) writes the consumer-index doorbell
//! record once. [`Cq::poll_wc`] is the `ibv_poll_cq` equivalent.
//! Compressed sessions (both layouts, every mini format) are unpacked
//! transparently: each mini array is decoded at once by the path in
//! [`CqConfig::unzip`] (scalar, SSE4.1, AVX2 or NEON; [`zip::UnzipPath`]),
//! all bit for bit equal to the scalar reference [`zip::expand`].
//!
//! Panic policy: nothing here panics on device data; malformed input is a
//! [`PollError`].

mod burst;
mod completion;
mod mem;
mod strided;
pub mod zip;
#[cfg(target_arch = "aarch64")]
pub mod zip_neon;
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
pub mod zip_x86;

pub use completion::{
    Completion, CompletionSummary, Origin, TimestampFormat, Wc, WcFlags, WcOpcode,
};
pub use strided::StridedPacket;
pub use zip::{Layout, MiniView, UnzipPath};

use crate::barrier;
use crate::index::RingSize;
use crate::mmio::Register;
use crate::prm::{
    cq_arm_doorbell, CqArmWord, Cqe64, CqeOpcode, MiniCqeArray, MiniCqeFormat, MprqByteCnt,
    Syndrome, WcStatus, CQE_INVALIDATE, CQ_DB_REQ_NOT, CQ_DB_REQ_NOT_SOL, ENHANCED_MAX_MINIS,
    MINI_CQE_ARRAY_SIZE, UAR_CQ_DOORBELL_OFFSET,
};
use core::ptr::NonNull;
use mem::{CqRing, DbRec, Entry};
use zip::{Fused, MiniBatch, PlanSlot, Session, Unzip};

/// CQE size (`cqe_sz`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CqeSize {
    /// 64-byte CQEs.
    B64,
    /// 128-byte CQEs (the CQE proper in the second half).
    B128,
}

impl CqeSize {
    /// Bytes per slot.
    pub const fn bytes(self) -> usize {
        match self {
            Self::B64 => 64,
            Self::B128 => 128,
        }
    }

    const fn log2(self) -> u8 {
        match self {
            Self::B64 => 6,
            Self::B128 => 7,
        }
    }
}

/// The raw parts of a CQ, as `mlx5dv_init_obj` (`struct mlx5dv_cq`) or the
/// emulated device hands them over.
#[derive(Clone, Copy, Debug)]
pub struct CqParts {
    /// CQE buffer (`mlx5dv_cq.buf`): `cqe_cnt * cqe_size` bytes.
    pub buf: NonNull<u8>,
    /// Number of CQEs (`mlx5dv_cq.cqe_cnt`), a power of two.
    pub cqe_cnt: u32,
    /// CQE size (`mlx5dv_cq.cqe_size`).
    pub cqe_size: CqeSize,
    /// Doorbell record (`mlx5dv_cq.dbrec`): two big-endian words, 4-byte aligned.
    pub dbrec: NonNull<u32>,
    /// Base of the UAR page (`mlx5dv_cq.cq_uar`) for arming; `None` for a
    /// CQ that is never armed. The doorbell is at offset 0x20.
    pub uar: Option<NonNull<u8>>,
    /// CQ number (`mlx5dv_cq.cqn`, 24 bits).
    pub cqn: u32,
}

/// Receive-side and compression configuration of a CQ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CqConfig {
    /// Compression: `None` if off, else the layout and the responder
    /// mini-CQE format.
    pub compression: Option<(Layout, MiniCqeFormat)>,
    /// Responder completions come from a striding RQ (`byte_cnt` carries
    /// strides, `wqe_counter` is the stride index).
    pub striding_rq: bool,
    /// Timestamp format of the CQ.
    pub timestamp: TimestampFormat,
    /// Decoder of compressed sessions. Defaults to the best path the crate
    /// was compiled for ([`UnzipPath::compile_time`]); a caller with `std`
    /// may pick a better one after runtime detection (see [`UnzipPath`]).
    pub unzip: UnzipPath,
}

impl Default for CqConfig {
    fn default() -> Self {
        Self {
            compression: None,
            striding_rq: false,
            timestamp: TimestampFormat::RealTime,
            unzip: UnzipPath::compile_time(),
        }
    }
}

/// Why [`Cq::from_raw_parts`] refused the parts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CqInitError {
    /// The CQE count is not a power of two (or is zero).
    CqeCountNotPowerOfTwo(u32),
    /// The CQE count exceeds 2^23 (the 24-bit consumer index must span
    /// at least two passes).
    CqeCountTooLarge(u32),
    /// The doorbell record is not 4-byte aligned.
    MisalignedDbrec,
    /// The CQE buffer is not 64-byte aligned (each CQE is copied with
    /// aligned vector loads as wide as 32 bytes, and a mini array's two
    /// 32-byte halves must not straddle; mlx5dv and DPDK CQ buffers are
    /// page-aligned).
    MisalignedBuf,
    /// The UAR page is not 8-byte aligned.
    MisalignedUar,
    /// The CQN does not fit in 24 bits.
    CqnTooLarge(u32),
}

/// Identifies the work queue a CQE belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WqRef {
    /// `sop_drop_qpn[23:0]`: QP/SQ number (Ethernet RQ: the flow tag).
    pub qpn: u32,
    /// `srqn_uidx[23:0]`: SRQ number, or the user index (CQE version 1).
    pub srqn_uidx: u32,
}

/// A striding-RQ completion as the receive queue must account for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StrideCompletion {
    /// WQE index from the CQE (`wqe_id`; for minis the title's).
    pub wqe_id: u16,
    /// First stride of the packet.
    pub stride_index: u16,
    /// Strides consumed.
    pub strides: u16,
    /// Filler CQE: strides skipped, no packet.
    pub filler: bool,
}

/// What the send queue reports when it retires WQEs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SendRetired {
    /// wr_id of the WQE the CQE names.
    pub wr_id: u64,
    /// The completion opcode recorded at post time, for send opcodes the CQE
    /// cannot name (NOP, UMR, SET_PSV, MMO: libmlx5 `wr_data`). Ignored for
    /// every other send opcode, as libmlx5 v44 does, except
    /// [`WcOpcode::Driver2`] (a raw WQE), which is reported whatever the
    /// send opcode.
    pub wr_opcode: Option<WcOpcode>,
}

/// What a receive queue reports when it retires a receive WQE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecvRetired {
    /// wr_id of the receive WQE.
    pub wr_id: u64,
    /// The QP validates receive checksums (libmlx5 `MLX5_RX_CSUM_VALID`):
    /// enables `IBV_WC_IP_CSUM_OK`.
    pub rx_csum_valid: bool,
}

/// Why a work queue refused a device-reported index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LookupError {
    /// No queue with this QPN / SRQN / user index is attached.
    UnknownQueue,
    /// The index does not name a WQE in flight.
    NotInFlight,
    /// The queue cannot take this kind of completion.
    Unsupported,
}

/// The work queues behind a CQ: they map device-reported indices to wr_ids
/// through their private shadows, validating them first.
pub trait WorkQueues {
    /// `true` only if every `retire_send` and `retire_recv` succeeds, does
    /// nothing else, and returns the reported `wqe_counter` as the wr_id
    /// ([`RawCounters`]). The burst poller then writes whole mini arrays of
    /// summaries with vector stores instead of calling them per mini. An
    /// implementation that sets it wrongly gets wrong wr_ids from
    /// [`Cq::poll_burst`], never undefined behaviour.
    const WR_ID_IS_WQE_COUNTER: bool = false;

    /// Requester completion: retire the send WQE whose first WQEBB index is
    /// `wqe_counter` and every unsignalled WQE before it; `status` is not
    /// success for error and flush completions (the queue enters its error
    /// state).
    fn retire_send(
        &mut self,
        wq: WqRef,
        wqe_counter: u16,
        status: WcStatus,
    ) -> Result<SendRetired, LookupError>;

    /// Responder completion on a cyclic RQ or SRQ: retire the receive WQE
    /// `wqe_counter` (SRQ: its index).
    fn retire_recv(
        &mut self,
        wq: WqRef,
        wqe_counter: u16,
        status: WcStatus,
    ) -> Result<RecvRetired, LookupError>;

    /// Responder completion on a striding RQ.
    fn retire_strides(
        &mut self,
        wq: WqRef,
        completion: StrideCompletion,
        status: WcStatus,
    ) -> Result<RecvRetired, LookupError> {
        let _ = (wq, completion, status);
        Err(LookupError::Unsupported)
    }
}

/// A [`WorkQueues`] without shadows: wr_id is the reported `wqe_counter`
/// (stride index on a striding RQ). For DPDK-style receive paths that track
/// their own ring, and for tests.
#[derive(Clone, Copy, Debug, Default)]
pub struct RawCounters {
    /// Report `IBV_WC_IP_CSUM_OK` where libmlx5 would for a checksum-capable QP.
    pub rx_csum_valid: bool,
}

impl WorkQueues for RawCounters {
    const WR_ID_IS_WQE_COUNTER: bool = true;

    fn retire_send(
        &mut self,
        _: WqRef,
        wqe_counter: u16,
        _: WcStatus,
    ) -> Result<SendRetired, LookupError> {
        Ok(SendRetired {
            wr_id: u64::from(wqe_counter),
            wr_opcode: None,
        })
    }

    fn retire_recv(
        &mut self,
        _: WqRef,
        wqe_counter: u16,
        _: WcStatus,
    ) -> Result<RecvRetired, LookupError> {
        Ok(RecvRetired {
            wr_id: u64::from(wqe_counter),
            rx_csum_valid: self.rx_csum_valid,
        })
    }

    fn retire_strides(
        &mut self,
        _: WqRef,
        c: StrideCompletion,
        _: WcStatus,
    ) -> Result<RecvRetired, LookupError> {
        Ok(RecvRetired {
            wr_id: u64::from(c.stride_index),
            rx_csum_valid: self.rx_csum_valid,
        })
    }
}

/// A decoded error CQE (STYLE point 14).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CqeError {
    /// The syndrome.
    pub syndrome: Syndrome,
    /// The vendor syndrome (`vendor_err_synd`).
    pub vendor_syndrome: u8,
    /// The hardware syndrome (`hw_err_synd`) and its type.
    pub hw_syndrome: (u8, u8),
    /// `wqe_counter` of the failed WQE.
    pub wqe_counter: u16,
    /// QP number.
    pub qpn: u32,
    /// Requester (`REQ_ERR`) or responder (`RESP_ERR`).
    pub requester: bool,
}

impl CqeError {
    /// The `ibv_wc_status` libmlx5 reports.
    pub fn status(&self) -> WcStatus {
        self.syndrome.wc_status()
    }

    /// Whether this is a flush (the queue was already in error).
    pub fn is_flush(&self) -> bool {
        self.syndrome == Syndrome::WrFlush
    }
}

/// Why polling failed. The offending CQE is consumed, except where noted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PollError {
    /// The work queue refused the CQE's index.
    Lookup {
        /// The error.
        error: LookupError,
        /// Requester (send queue) or responder.
        requester: bool,
        /// Which queue.
        wq: WqRef,
        /// The reported `wqe_counter`.
        wqe_counter: u16,
    },
    /// A CQE opcode this CQ does not handle (signature error, tag matching).
    UnsupportedOpcode {
        /// The opcode.
        opcode: CqeOpcode,
        /// Consumer index of the CQE.
        ci: u32,
    },
    /// A compressed CQE on a CQ created without compression. The CQ is
    /// broken (its position in the ring is unknown).
    UnexpectedCompressed {
        /// Consumer index.
        ci: u32,
    },
    /// A basic-layout title whose mini count is below 2 or beyond the ring;
    /// the CQ is broken.
    BadSessionLength {
        /// Consumer index.
        ci: u32,
        /// The count the title reported.
        count: u32,
    },
    /// An enhanced compressed CQE with more than seven minis, or with no
    /// title CQE before it; the CQ is broken.
    BadEnhancedBlock {
        /// Consumer index.
        ci: u32,
        /// The count it declared.
        count: u32,
    },
    /// An earlier error left the CQ's position unknown; it must be recreated.
    Broken,
    /// [`Cq::poll_strided`] on a CQ not created for a striding RQ
    /// ([`CqConfig::striding_rq`]). Nothing is consumed.
    NotStriding,
}

/// Error state the CQ exposes (item 4 of the issue).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ErrorLog {
    /// The first non-flush error CQE seen.
    pub first: Option<CqeError>,
    /// The last error CQE seen (flushes included).
    pub last: Option<CqeError>,
    /// Error CQEs seen (flushes included).
    pub errors: u64,
    /// Flush CQEs seen.
    pub flushes: u64,
}

/// A completion queue. One owner (`Send`, not `Sync`).
#[derive(Debug)]
pub struct Cq {
    ring: CqRing,
    dbrec: DbRec,
    arm_reg: Option<Register>,
    cqn: u32,
    size: RingSize,
    cfg: CqConfig,
    /// Consumer index: the next slot to poll, or the start of the open
    /// compressed session (what the doorbell record publishes).
    ci: u32,
    arm_sn: u32,
    session: Option<Session>,
    /// Enhanced layout: where the title of following minis (the last
    /// regular, non-error CQE) is kept.
    title: Title,
    /// Enhanced layout: the title, while an error CQE occupies `cur`.
    saved_title: Cqe64,
    /// `cur.batch` holds the current title's fields in the lanes minis do
    /// not overwrite ([`MiniBatch::new`] of it; [`Self::ensure_batch_title`]).
    batch_has_title: bool,
    /// Running `wqe_counter` for minis without their own index. Only
    /// meaningful while the current title's minis use it
    /// ([`zip::MiniKind::uses_running_counter`]): the burst poller leaves
    /// it alone for minis that carry their own index.
    running: u16,
    /// The whole-array plan ([`Fused::new`]) of the minis after a title
    /// of each CQE opcode (the index), for the CQ's mini format: the burst
    /// poller's one load per title run instead of the format's decoding.
    plans: [PlanSlot; 16],
    /// The current completion: the one copy of the last CQE read (or the
    /// session's title) and the decoded mini array.
    cur: Completion,
    log: ErrorLog,
    broken: bool,
    /// The error of the last [`Self::poll_burst`] call that failed, as
    /// its out-of-line poller left it ([`burst::Stashed`]): read only
    /// when that call returns it.
    burst_error: PollError,
    /// Enhanced layout: the compressed CQE the burst poller took whole
    /// while `out` had no room for all its minis (the open session is
    /// [`Session::carried`]).
    carry: Carry,
}

/// A compressed CQE (enhanced layout) written whole by the burst poller,
/// its minis handed out over more than one call: the consumer index stays
/// on it until the last one is (as for the general poller's session), so
/// the doorbell record never covers a completion not handed out.
#[derive(Clone, Copy, Debug, Default)]
struct Carry {
    /// The summaries of its minis, lane by lane, then room for six more
    /// (never read as minis): the rest of a block, from any lane, is then
    /// one fixed-size copy of seven.
    sums: [CompletionSummary; 2 * ENHANCED_MAX_MINIS - 1],
    /// Its copy (taken once, after its validity byte and the barrier), for
    /// the general poller's [`MiniBatch`].
    block: Cqe64,
    /// The running counter before its first mini.
    running: u16,
}

impl Cq {
    /// Builds a CQ from its raw parts. The consumer index starts at
    /// `ci` (0 for a new CQ).
    ///
    /// # Safety
    /// - `parts.buf` must point to `cqe_cnt * cqe_size` bytes (64-byte
    ///   aligned, else [`CqInitError::MisalignedBuf`]), valid for
    ///   volatile reads and writes for the life of the `Cq`, written only by
    ///   the device (and this `Cq`).
    /// - `parts.dbrec` must be valid for volatile writes of 8 bytes for the
    ///   life of the `Cq`, and not written by anyone else.
    /// - `parts.uar`, if given, must map the CQ's UAR page (at least
    ///   `0x28` bytes) for the life of the `Cq`.
    pub unsafe fn from_raw_parts(
        parts: CqParts,
        cfg: CqConfig,
        ci: u32,
    ) -> Result<Self, CqInitError> {
        let size = RingSize::new(parts.cqe_cnt)
            .ok_or(CqInitError::CqeCountNotPowerOfTwo(parts.cqe_cnt))?;
        if size.log2() > 23 {
            return Err(CqInitError::CqeCountTooLarge(parts.cqe_cnt));
        }
        if parts.dbrec.as_ptr() as usize % 4 != 0 {
            return Err(CqInitError::MisalignedDbrec);
        }
        if parts.buf.as_ptr() as usize % mem::RING_ALIGN != 0 {
            return Err(CqInitError::MisalignedBuf);
        }
        if parts.cqn > 0x00ff_ffff {
            return Err(CqInitError::CqnTooLarge(parts.cqn));
        }
        let arm_reg = match parts.uar {
            None => None,
            Some(uar) => {
                if uar.as_ptr() as usize % 8 != 0 {
                    return Err(CqInitError::MisalignedUar);
                }
                let reg = uar.as_ptr().wrapping_add(UAR_CQ_DOORBELL_OFFSET);
                let reg = NonNull::new(reg).ok_or(CqInitError::MisalignedUar)?;
                // SAFETY: the caller guarantees the UAR page is mapped; the
                // 8-byte register lies at +0x20 inside it and is 8-byte
                // aligned (checked above), so `Register::new` cannot panic.
                Some(unsafe { Register::new(reg, 8) })
            }
        };
        // SAFETY: buffer size and validity are the caller's contract; the
        // count is a power of two (checked above).
        let ring = unsafe { CqRing::new(parts.buf, parts.cqe_cnt, parts.cqe_size.log2()) };
        // SAFETY: validity is the caller's contract; alignment checked above.
        let dbrec = unsafe { DbRec::new(parts.dbrec) };
        Ok(Self {
            ring,
            dbrec,
            arm_reg,
            cqn: parts.cqn,
            size,
            cfg,
            ci,
            arm_sn: 0,
            session: None,
            title: Title::None,
            saved_title: Cqe64::default(),
            batch_has_title: false,
            running: 0,
            plans: cfg.compression.map_or([PlanSlot(None); 16], |(_, format)| {
                Fused::by_opcode(MiniView {
                    format,
                    striding: cfg.striding_rq,
                })
                .map(PlanSlot)
            }),
            cur: Completion::empty(),
            log: ErrorLog::default(),
            broken: false,
            burst_error: PollError::Broken,
            carry: Carry::default(),
        })
    }

    /// The consumer index the doorbell record publishes (free-running;
    /// the record holds its low 24 bits).
    pub fn consumer_index(&self) -> u32 {
        self.ci
    }

    /// CQ number.
    pub fn cqn(&self) -> u32 {
        self.cqn
    }

    /// Configuration.
    pub fn config(&self) -> &CqConfig {
        &self.cfg
    }

    /// Error CQEs seen so far.
    pub fn error_log(&self) -> &ErrorLog {
        &self.log
    }

    /// Whether a malformed compressed session left the CQ unusable.
    pub fn is_broken(&self) -> bool {
        self.broken
    }

    /// Whether a compressed session is open (its minis not all reported).
    pub fn in_session(&self) -> bool {
        self.session.is_some()
    }

    /// The consumer index of the completion the last [`Cq::poll`] (or
    /// `start_poll`/`next_poll`) step reported or refused: a regular CQE's
    /// own index; a mini's, the index it stands for (its session's title
    /// or compressed CQE plus its place there; PRM-FACTS §10.4, §10.5),
    /// while [`Cq::consumer_index`] stays at the session's base until the
    /// session closes. Meaningful right after such a step; `poll_burst`
    /// reports many at once and does not set it.
    pub fn reported_index(&self) -> u32 {
        match self.session {
            Some(s) => s.base.wrapping_add(s.next).wrapping_sub(1),
            None => self.ci.wrapping_sub(1),
        }
    }

    /// `ibv_cq_ex` `start_poll`: positions a batch on the first completion,
    /// or returns `None` (nothing written) when the CQ is empty. On an
    /// error the failing CQE stays consumed but, as in libmlx5, the
    /// doorbell record is not written: the next poll or `end_poll`
    /// publishes it.
    pub fn start_poll<'a, W: WorkQueues>(
        &'a mut self,
        wqs: &'a mut W,
    ) -> Result<Option<PollBatch<'a, W>>, PollError> {
        match self.advance(wqs) {
            Ok(true) => Ok(Some(PollBatch {
                cq: self,
                wqs,
                ended: false,
            })),
            Ok(false) => Ok(None),
            // The failing CQE was consumed, but as in libmlx5 the record
            // is left to the next `end_poll` or poll (the caller makes no
            // `end_poll` after a failed `start_poll`).
            Err(e) => Err(start_failed(e)),
        }
    }

    /// `ibv_poll_cq`: fills `out` with up to `out.len()` completions and
    /// writes the consumer-index doorbell record (always, as libmlx5 does).
    ///
    /// The loop is specialised for the CQ's compression layout, as
    /// [`Self::poll`]'s is.
    #[inline]
    pub fn poll_wc<W: WorkQueues>(
        &mut self,
        wqs: &mut W,
        out: &mut [Wc],
    ) -> Result<usize, PollError> {
        match self.cfg.compression {
            None => self.poll_wc_in::<NO_ZIP, W>(wqs, out),
            Some((Layout::Basic, _)) => self.poll_wc_in::<BASIC, W>(wqs, out),
            Some((Layout::Enhanced, _)) => self.poll_wc_in::<ENHANCED, W>(wqs, out),
        }
    }

    /// [`Self::poll_wc`] for layout `M`. Without compression, runs of
    /// successful requester and responder CQEs go through
    /// [`Self::wc_runs`] (the usual completions, as `poll_burst` takes
    /// them); every other entry through the general steps.
    #[inline(always)]
    fn poll_wc_in<const M: u8, W: WorkQueues>(
        &mut self,
        wqs: &mut W,
        out: &mut [Wc],
    ) -> Result<usize, PollError> {
        let mut n = 0;
        let mut result = if self.broken {
            Err(PollError::Broken)
        } else {
            Ok(())
        };
        let wide = self.ring.stride() == 128;
        while result.is_ok() {
            if M == NO_ZIP {
                let rest = out.get_mut(n..).unwrap_or_default();
                let (k, r) = if wide {
                    self.wc_runs::<128, W>(wqs, rest)
                } else {
                    self.wc_runs::<64, W>(wqs, rest)
                };
                n += k;
                if let Err(e) = r {
                    result = Err(e);
                    break;
                }
            }
            let Some(slot) = out.get_mut(n) else {
                break;
            };
            match self.advance_in::<M, W>(wqs) {
                Ok(true) => {
                    self.cur.write_wc(slot);
                    n += 1;
                }
                Ok(false) => break,
                Err(e) => result = Err(e),
            }
        }
        self.update_ci();
        result.map(|()| n)
    }

    /// Polls up to `max` completions, handing each to `f`, then writes the
    /// doorbell record once if anything was consumed. Returns the count.
    ///
    /// The loop is specialised for the CQ's compression layout (STYLE
    /// point 10): the layout is tested once per call, not per CQE.
    #[inline]
    pub fn poll<W: WorkQueues, F: FnMut(&Completion)>(
        &mut self,
        wqs: &mut W,
        max: usize,
        f: F,
    ) -> Result<usize, PollError> {
        match self.cfg.compression {
            None => self.poll_in::<NO_ZIP, W, F>(wqs, max, f),
            Some((Layout::Basic, _)) => self.poll_in::<BASIC, W, F>(wqs, max, f),
            Some((Layout::Enhanced, _)) => self.poll_in::<ENHANCED, W, F>(wqs, max, f),
        }
    }

    /// [`Self::poll`] for layout `M`. Without compression, runs of plain
    /// CQEs go through [`Self::poll_runs`] (one ownership scan and one
    /// barrier per run); every other entry through the general steps.
    #[inline(always)]
    fn poll_in<const M: u8, W: WorkQueues, F: FnMut(&Completion)>(
        &mut self,
        wqs: &mut W,
        max: usize,
        mut f: F,
    ) -> Result<usize, PollError> {
        if self.broken {
            return Err(PollError::Broken);
        }
        let start = self.ci;
        let wide = self.ring.stride() == 128;
        let mut n = 0;
        let mut result = Ok(());
        while n < max {
            if M == NO_ZIP {
                let (k, r) = if wide {
                    self.poll_runs::<128, W, F>(wqs, max - n, &mut f)
                } else {
                    self.poll_runs::<64, W, F>(wqs, max - n, &mut f)
                };
                n += k;
                if let Err(e) = r {
                    result = Err(e);
                    break;
                }
                if n >= max {
                    break;
                }
            }
            match self.advance_in::<M, W>(wqs) {
                Ok(true) => {
                    f(&self.cur);
                    n += 1;
                }
                Ok(false) => break,
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        if n > 0 || self.ci != start {
            self.update_ci();
        }
        result.map(|()| n)
    }

    /// Requests an event for the next completion (`solicited = false`) or
    /// the next solicited one (rdma-core `mlx5_arm_cq`): records the arm
    /// word in the doorbell record, then writes `arm word | CQN` to the
    /// UAR doorbell. Does nothing but the record without a UAR.
    pub fn arm(&mut self, solicited: bool) {
        let cmd = if solicited {
            CQ_DB_REQ_NOT_SOL
        } else {
            CQ_DB_REQ_NOT
        };
        let word = self.arm_word(cmd);
        // Step 1: the record first (the device reads it when the event fires).
        self.dbrec.set_arm(word);
        if let Some(reg) = &self.arm_reg {
            // Step 2: record before doorbell (rdma-core `mmio_wc_start`).
            barrier::wc_start();
            // Step 3: one 64-bit store, arm word then CQN, both big-endian.
            reg.write64(cq_arm_doorbell(word, self.cqn));
            // Step 4: push the write out (rdma-core `mmio_flush_writes`).
            barrier::wc_flush();
        }
    }

    /// The arm word `arm(…)` would write now.
    pub fn arm_word(&self, cmd: u8) -> CqArmWord {
        CqArmWord::new()
            .with_ci(crate::index::cq_ci24(self.ci))
            .with_cmd(cmd)
            .with_arm_sn((self.arm_sn & 3) as u8)
    }

    /// Acknowledges `events` completion events (`ibv_ack_cq_events` after
    /// `ibv_get_cq_event`; libmlx5 `mlx5_cq_event`): advances the arm
    /// sequence number.
    pub fn ack_events(&mut self, events: u32) {
        self.arm_sn = self.arm_sn.wrapping_add(events);
    }

    /// The arm sequence number.
    pub fn arm_sn(&self) -> u32 {
        self.arm_sn
    }

    /// Publishes the consumer index in the doorbell record.
    #[inline(always)]
    fn update_ci(&mut self) {
        // Reads of consumed CQEs happen before the device may reuse their
        // slots (`from_device_done`); slot invalidations (stores) before
        // the record store (`to_device`).
        barrier::from_device_done();
        barrier::to_device();
        self.dbrec.set_ci(self.ci);
    }

    /// Positions `self.cur` on the next completion; `false` if none.
    /// Dispatches on the layout once per call.
    #[inline]
    fn advance<W: WorkQueues>(&mut self, wqs: &mut W) -> Result<bool, PollError> {
        if self.broken {
            return Err(PollError::Broken);
        }
        match self.cfg.compression {
            None => self.advance_in::<NO_ZIP, W>(wqs),
            Some((Layout::Basic, _)) => self.advance_in::<BASIC, W>(wqs),
            Some((Layout::Enhanced, _)) => self.advance_in::<ENHANCED, W>(wqs),
        }
    }

    /// [`Self::advance`] for layout `M` (the CQ is not broken).
    #[inline(always)]
    fn advance_in<const M: u8, W: WorkQueues>(&mut self, wqs: &mut W) -> Result<bool, PollError> {
        loop {
            if M != NO_ZIP && self.session.is_some() {
                self.next_mini::<M>()?;
                if self.resolve::<W, true>(wqs)? {
                    return Ok(true);
                }
                continue;
            }
            let ci = self.ci;
            let entry = self.ring.entry(ci);
            // Step 1: the ownership byte, once (PRM-FACTS §9.2).
            if !self.owned::<M>(entry, ci) {
                return Ok(false);
            }
            // Step 2: everything else of the entry is read after it.
            barrier::from_device();
            // Step 3: one copy. Enhanced: onto the stack (a compressed CQE
            // must not displace the title in `cur`); else straight into
            // `cur` (a basic compressed CQE is the title).
            if M == ENHANCED {
                let cqe = self.ring.copy_cqe(entry);
                if self.decode_enhanced(&cqe)? {
                    continue;
                }
                // A slot software invalidated can carry a matching
                // iteration count only through corruption; never report it.
                if cqe.op_own.into_bits() >> 4 == CqeOpcode::Invalid.raw() {
                    return Ok(false);
                }
                self.track_title(&cqe);
                self.cur.cqe = cqe;
            } else {
                self.ring.copy_cqe_to(entry, &mut self.cur.cqe);
                // (The owner test already excluded INVALID.)
                if self.cur.cqe.op_own.into_bits() & FORMAT_MASK == FORMAT_COMPRESSED {
                    self.open_basic::<M>()?;
                    continue;
                }
            }
            // Step 4: decode the copy.
            self.ci = ci.wrapping_add(1);
            self.cur.set_regular();
            if self.cur.cqe.op_own.into_bits() & FORMAT_MASK == FORMAT_INLINE64 {
                self.copy_inline(entry);
            }
            if self.resolve::<W, false>(wqs)? {
                return Ok(true);
            }
        }
    }

    /// Whether `entry` (at consumer index `ci`) is software-owned, from
    /// its ownership byte read once.
    #[inline(always)]
    fn owned<const M: u8>(&self, entry: Entry, ci: u32) -> bool {
        if M == ENHANCED {
            // Enhanced layout: the validity iteration count is the
            // ownership byte (PRM-FACTS §9.2).
            self.ring.read_validity(entry) == self.size.iteration(ci)
        } else {
            // Basic: opcode not INVALID and owner bit = pass parity.
            let op_own = self.ring.read_op_own(entry);
            op_own >> 4 != CqeOpcode::Invalid.raw()
                && (op_own & 1) == self.size.owner_parity(ci) as u8
        }
    }

    /// Enhanced layout, before a regular CQE replaces `cur.cqe`: a
    /// non-error CQE becomes the title (PRM-FACTS §10.5) and restarts the
    /// running counter after it; an error CQE does not, so the title it
    /// displaces is saved.
    #[inline(always)]
    fn track_title(&mut self, cqe: &Cqe64) {
        let opcode = cqe.op_own.into_bits() >> 4;
        if opcode == CqeOpcode::ReqErr.raw() || opcode == CqeOpcode::RespErr.raw() {
            if self.title == Title::InCur {
                self.saved_title = self.cur.cqe;
                self.title = Title::Saved;
            }
        } else {
            self.set_title(cqe);
        }
    }

    /// A regular (not error) CQE becomes the title (the caller keeps it in
    /// `cur`): the running counter after it, returned too.
    #[inline(always)]
    pub(super) fn set_title(&mut self, cqe: &Cqe64) -> u16 {
        let running = zip::running_after(cqe, self.cfg.striding_rq);
        self.running = running;
        self.title = Title::InCur;
        self.batch_has_title = false;
        running
    }

    /// The inline-scattered first half of a 128-byte slot (rare: only for
    /// `InlineScatter64` CQEs).
    #[cold]
    #[inline(never)]
    fn copy_inline(&mut self, entry: Entry) {
        self.ring.copy_first_half(entry, &mut self.cur.inline);
    }

    /// Basic layout (or none): opens the session whose title was just
    /// copied into `cur.cqe` at `self.ci`.
    #[inline(always)]
    fn open_basic<const M: u8>(&mut self) -> Result<(), PollError> {
        let session = self.basic_session::<M>()?;
        self.session = Some(session);
        Ok(())
    }

    /// [`Self::open_basic`] but for storing the session: returns it (the
    /// caller makes it `self.session`).
    #[inline(always)]
    fn basic_session<const M: u8>(&mut self) -> Result<Session, PollError> {
        let ci = self.ci;
        let format = match self.cfg.compression {
            Some((Layout::Basic, format)) if M == BASIC => format,
            _ => {
                self.broken = true;
                return Err(PollError::UnexpectedCompressed { ci });
            }
        };
        let title = &self.cur.cqe;
        let count = title.byte_cnt.get();
        if count < 2 || count > self.size.entries() {
            self.broken = true;
            return Err(PollError::BadSessionLength { ci, count });
        }
        // The title stays the view's CQE for the whole session.
        self.running = title.wqe_counter.get();
        let unzip = Unzip::new(title, self.mini_view(format));
        let fused = Fused::new(unzip, title.op_own.opcode());
        // The arrays are decoded as they are reached (`next_mini`), into
        // a batch holding this title's fields (`ensure_batch_title`).
        self.batch_has_title = false;
        Ok(Session {
            base: ci,
            count,
            next: 0,
            unzip,
            fused,
            carried: false,
        })
    }

    /// Enhanced layout: if `cqe` is a compressed CQE, decodes its minis
    /// against the title and opens its session (`Ok(true)`).
    #[inline(always)]
    fn decode_enhanced(&mut self, cqe: &Cqe64) -> Result<bool, PollError> {
        if cqe.op_own.into_bits() & FORMAT_MASK != FORMAT_COMPRESSED {
            return Ok(false);
        }
        let ci = self.ci;
        let count = zip::enhanced_count(cqe.op_own);
        let format = match self.cfg.compression {
            Some((Layout::Enhanced, format))
                if self.title != Title::None && count as usize <= ENHANCED_MAX_MINIS =>
            {
                format
            }
            _ => {
                self.broken = true;
                return Err(PollError::BadEnhancedBlock { ci, count });
            }
        };
        if self.title == Title::Saved {
            self.cur.cqe = self.saved_title;
            self.title = Title::InCur;
        }
        let unzip = Unzip::new(&self.cur.cqe, self.mini_view(format));
        self.ensure_batch_title();
        // The minis fill the CQE from byte 0: decode all `count` of them
        // now (lane 7, bytes 56–63, is never reported).
        let array: MiniCqeArray = zerocopy::transmute!(*cqe);
        self.running = self.cfg.unzip.decode_count(
            unzip,
            &array.minis,
            count as usize,
            self.running,
            &mut self.cur.batch,
        );
        self.session = Some(Session {
            base: ci,
            count,
            next: 0,
            unzip,
            fused: None,
            carried: false,
        });
        Ok(true)
    }

    /// The [`MiniBatch`] of the carried compressed CQE, from its copy (the
    /// decode [`Self::decode_enhanced`] would have done when it was read).
    #[cold]
    #[inline(never)]
    fn decode_carried(&mut self) {
        // The burst poller left the session's decoding to this step
        // ([`Unzip::CARRIED`]): from the title, in `cur` (as
        // `decode_enhanced` builds it when it opens a session).
        let decoding = self
            .cfg
            .compression
            .map(|(_, format)| Unzip::new(&self.cur.cqe, self.mini_view(format)));
        let Some(session) = self.session.as_mut() else {
            return;
        };
        session.carried = false;
        if let Some(u) = decoding {
            session.unzip = u;
        }
        let unzip = session.unzip;
        self.ensure_batch_title();
        let array: MiniCqeArray = zerocopy::transmute!(self.carry.block);
        self.cfg
            .unzip
            .decode(unzip, &array.minis, self.carry.running, &mut self.cur.batch);
    }

    /// Makes `cur.batch` hold the current title's (`cur.cqe`) fields in
    /// the lanes minis do not overwrite ([`MiniBatch::new`]), once per
    /// title: before the first mini array of a session is decoded into it.
    #[inline(always)]
    fn ensure_batch_title(&mut self) {
        if !self.batch_has_title {
            self.cur.batch = MiniBatch::new(&self.cur.cqe);
            self.batch_has_title = true;
        }
    }

    /// How minis of format `format` read on this CQ.
    fn mini_view(&self, format: MiniCqeFormat) -> MiniView {
        MiniView {
            format,
            striding: self.cfg.striding_rq,
        }
    }

    /// Positions the view on the next mini of the open session; closes the
    /// session (invalidating its slots in the basic layout) after the last.
    #[inline(always)]
    fn next_mini<const M: u8>(&mut self) -> Result<(), PollError> {
        if M == ENHANCED && self.session.is_some_and(|s| s.carried) {
            // The burst poller took this CQE whole.
            self.decode_carried();
        }
        let Some(session) = self.session.as_mut() else {
            self.broken = true;
            return Err(PollError::Broken);
        };
        let i = session.next;
        let basic = M == BASIC;
        if basic && i % 8 == 0 {
            // Load mini array k: in the session (its offset < count, which
            // is at most the ring size). Copy it once, decode it whole: the
            // path and the session's format were fixed before (no per-mini
            // test).
            let k = i / 8;
            let entry = self
                .ring
                .entry(session.base.wrapping_add(zip::basic_array_offset(k)));
            let array: MiniCqeArray = zerocopy::transmute!(self.ring.copy_cqe(entry));
            let n = (session.count - i).min(MINI_CQE_ARRAY_SIZE as u32) as usize;
            if !self.batch_has_title {
                self.cur.batch = MiniBatch::new(&self.cur.cqe);
                self.batch_has_title = true;
            }
            self.running = self.cfg.unzip.decode_count(
                session.unzip,
                &array.minis,
                n,
                self.running,
                &mut self.cur.batch,
            );
        }
        self.cur.set_mini(i as usize);
        session.next = i + 1;
        let done = session.next == session.count;
        if basic && (session.next % 8 == 0 || done) {
            let (first, last) = zip::basic_invalidate_range(i / 8, session.count);
            self.ring
                .write_op_own_range(session.base, first, last, CQE_INVALIDATE);
        }
        if done {
            self.ci = session.base.wrapping_add(session.count);
            self.session = None;
        }
        Ok(())
    }

    /// Maps the current completion (a regular CQE, or a mini if `MINI`) to
    /// its work request and fills the rest of `self.cur`. `Ok(false)` for
    /// CQEs that are not reported (filler, resize).
    #[inline(always)]
    fn resolve<W: WorkQueues, const MINI: bool>(&mut self, wqs: &mut W) -> Result<bool, PollError> {
        let lane = usize::from(self.cur.lane) % MINI_CQE_ARRAY_SIZE;
        let cqe = &self.cur.cqe;
        let (sop_drop_qpn, wqe_counter, byte_cnt) = if MINI {
            let b = &self.cur.batch;
            (b.sop_drop_qpn[lane], b.wqe_counter[lane], b.byte_cnt[lane])
        } else {
            (
                cqe.sop_drop_qpn.into_bits().get(),
                cqe.wqe_counter.get(),
                cqe.byte_cnt.get(),
            )
        };
        let wq = WqRef {
            qpn: sop_drop_qpn & QPN_MASK,
            srqn_uidx: cqe.srqn_uidx.srqn_uidx(),
        };
        let opcode = cqe.op_own.into_bits() >> 4;
        let ci = self.ci;
        // Each arm stores every per-completion field of `cur` once.
        match opcode {
            OP_REQ | OP_REQ_ERR => {
                let status = if opcode == OP_REQ {
                    WcStatus::Success
                } else {
                    self.log_error(true)
                };
                let r = match wqs.retire_send(wq, wqe_counter, status) {
                    Ok(r) => r,
                    Err(e) => return Err(lookup_error(e, true, wq, wqe_counter)),
                };
                self.cur.wr_id = r.wr_id;
                self.cur.wr_opcode = r.wr_opcode;
                self.cur.status = status;
                self.cur.rx_csum_valid = false;
                self.cur.striding = false;
            }
            OP_RESP_WR_IMM | OP_RESP_SEND | OP_RESP_SEND_IMM | OP_RESP_SEND_INV | OP_RESP_ERR => {
                let error = opcode == OP_RESP_ERR;
                let status = if error {
                    self.log_error(false)
                } else {
                    WcStatus::Success
                };
                let r = if self.cfg.striding_rq {
                    let b = MprqByteCnt::from_bits(byte_cnt);
                    let c = StrideCompletion {
                        wqe_id: self.cur.cqe.wqe_id.get(),
                        stride_index: wqe_counter,
                        strides: b.strides(),
                        filler: b.filler() && !error,
                    };
                    let r = match wqs.retire_strides(wq, c, status) {
                        Ok(r) => r,
                        Err(e) => return Err(lookup_error(e, false, wq, wqe_counter)),
                    };
                    if c.filler {
                        return Ok(false);
                    }
                    r
                } else {
                    match wqs.retire_recv(wq, wqe_counter, status) {
                        Ok(r) => r,
                        Err(e) => return Err(lookup_error(e, false, wq, wqe_counter)),
                    }
                };
                self.cur.wr_id = r.wr_id;
                self.cur.wr_opcode = None;
                // An error CQE's checksum bits are reserved: libmlx5 sets
                // its checksum flag only for a successful receive
                // (`handle_responder_lazy`), so `read_wc_flags` never
                // reports IP_CSUM_OK on RESP_ERR.
                self.cur.rx_csum_valid = r.rx_csum_valid && !error;
                self.cur.status = status;
                self.cur.striding = self.cfg.striding_rq;
            }
            // (A RESIZE_CQ CQE is consumed unreported; minis of a title
            // with its opcode are not completions of anything: refused,
            // below, rather than dropped.)
            OP_RESIZE_CQ if !MINI => return Ok(false),
            other => {
                // (A mini's own index: the session's consumer index holds
                // its base until it closes.)
                let ci = if MINI {
                    self.reported_index()
                } else {
                    ci.wrapping_sub(1)
                };
                return Err(PollError::UnsupportedOpcode {
                    opcode: CqeOpcode::from_raw(other),
                    ci,
                });
            }
        }
        Ok(true)
    }

    /// The current completion is an error CQE: logs it, returns its status.
    #[cold]
    #[inline(never)]
    fn log_error(&mut self, requester: bool) -> WcStatus {
        let e = self.cur.cqe().as_err();
        let err = CqeError {
            syndrome: e.syndrome(),
            vendor_syndrome: e.vendor_err_synd,
            hw_syndrome: (e.hw_err_synd, e.hw_synd_type),
            wqe_counter: e.wqe_counter.get(),
            qpn: e.s_wqe_opcode_qpn.qpn(),
            requester,
        };
        self.log.errors += 1;
        if err.is_flush() {
            self.log.flushes += 1;
        } else if self.log.first.is_none() {
            self.log.first = Some(err);
        }
        self.log.last = Some(err);
        err.status()
    }
}

/// A [`PollError::Lookup`] (cold: a work queue refused an index).
#[cold]
#[inline(never)]
fn lookup_error(error: LookupError, requester: bool, wq: WqRef, wqe_counter: u16) -> PollError {
    PollError::Lookup {
        error,
        requester,
        wq,
        wqe_counter,
    }
}

/// Compression layouts the poll loop is specialised for (`advance_in::<M>`).
const NO_ZIP: u8 = 0;
const BASIC: u8 = 1;
const ENHANCED: u8 = 2;

/// `op_own[7:4]`, the CQE opcode, in place (PRM-FACTS §9.1).
const OPCODE_MASK: u8 = 0xf0;
/// `op_own[3:2]`, the CQE format, in place (PRM-FACTS §9.1).
const FORMAT_MASK: u8 = 0x0c;
/// Format 3: compressed.
const FORMAT_COMPRESSED: u8 = 0x0c;
/// Format 2: 64 bytes scattered into the first half of a 128-byte slot.
const FORMAT_INLINE64: u8 = 0x08;
/// `sop_drop_qpn[23:0]`.
const QPN_MASK: u32 = 0x00ff_ffff;
/// CQE opcodes as `op_own[7:4]` values (PRM-FACTS §9.3).
const OP_REQ: u8 = CqeOpcode::Req.raw();
const OP_RESP_WR_IMM: u8 = CqeOpcode::RespWrImm.raw();
const OP_RESP_SEND: u8 = CqeOpcode::RespSend.raw();
const OP_RESP_SEND_IMM: u8 = CqeOpcode::RespSendImm.raw();
const OP_RESP_SEND_INV: u8 = CqeOpcode::RespSendInv.raw();
const OP_RESIZE_CQ: u8 = CqeOpcode::ResizeCq.raw();
const OP_REQ_ERR: u8 = CqeOpcode::ReqErr.raw();
const OP_RESP_ERR: u8 = CqeOpcode::RespErr.raw();

/// Where the enhanced layout's title is kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Title {
    /// No regular CQE yet: a compressed CQE is an error.
    None,
    /// In `cur.cqe` (the last CQE read was the title, or minis of it).
    InCur,
    /// In `saved_title` (an error CQE occupies `cur.cqe`).
    Saved,
}

/// An open polling batch (`ibv_cq_ex` between `start_poll` and
/// `end_poll`). Dropping it ends it.
#[derive(Debug)]
pub struct PollBatch<'a, W: WorkQueues> {
    cq: &'a mut Cq,
    wqs: &'a mut W,
    ended: bool,
}

impl<W: WorkQueues> PollBatch<'_, W> {
    /// The current completion.
    pub fn completion(&self) -> &Completion {
        &self.cq.cur
    }

    /// `next_poll`: advances to the next completion; `false` when the CQ
    /// is empty (the batch stays open until `end_poll`).
    pub fn next_poll(&mut self) -> Result<bool, PollError> {
        self.cq.advance(self.wqs)
    }

    /// `end_poll`: writes the consumer-index doorbell record once.
    pub fn end_poll(mut self) {
        self.end();
    }

    fn end(&mut self) {
        if !self.ended {
            self.ended = true;
            self.cq.update_ci();
        }
    }
}

impl<W: WorkQueues> Drop for PollBatch<'_, W> {
    fn drop(&mut self) {
        self.end();
    }
}

/// A failed `start_poll`'s error, out of line: keeps the error path out of
/// the poll loop `advance` is inlined into (with the error returned in
/// place, LLVM laid out `start_poll`/`next_poll` 3-9 instructions per
/// completion longer, `cq/start_poll32_*`).
#[cold]
#[inline(never)]
fn start_failed(e: PollError) -> PollError {
    e
}

#[cfg(test)]
#[cfg(not(loom))]
mod strided_tests;
#[cfg(test)]
mod tests;
