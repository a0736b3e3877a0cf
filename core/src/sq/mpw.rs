//! Multi-packet send WQEs on a raw Ethernet send queue: enhanced MPW
//! (ConnectX-5 and later), legacy MPW (ConnectX-4 Lx), and the one-WQE-per-
//! packet fallback, behind a poll-mode-driver style burst API
//! ([`TxQueue::tx_burst`]) (PRM-FACTS §5.7, §6, §7, §11; DPDK
//! `drivers/net/mlx5/mlx5_tx.h`).
//!
//! # Where this lives (the design choice)
//!
//! A [`TxQueue`] is built by *consuming* a [`SendQueue`] of a raw Ethernet QP
//! ([`TxQueue::new`]): the ring, the doorbell (with its barrier sequence and
//! the [`DoorbellPolicy`]), the per-WQEBB shadow and the staging area are the
//! send queue's own, so this module adds no `unsafe` and no second copy of
//! the doorbell code. It is a child module of `sq` for that reason only: it
//! reads the send queue's private parts (ring, counters, shadow, staging,
//! doorbell) and uses [`SendQueue::retire`] for completion checking; it does
//! not change `sq`'s own posting API.
//!
//! # Sessions
//!
//! An eMPW session is one WQE: a title (control segment, opcode
//! `ENHANCED_MPSW`; an [`EthSeg`] without inline header carrying the
//! checksum flags, software-parser offsets and metadata every packet of the
//! session shares), then one descriptor per packet: a pointer [`DataSeg`],
//! or an inline segment (length with the inline bit, the frame, padded to
//! 16 bytes) for frames up to [`TxConfig::inline_max`]. The two mix freely.
//! A legacy MPW session (opcode TSO, opmod [`OPC_MOD_MPW`]) carries packets
//! of one length (in the Ethernet segment's `mss`), at most
//! [`mpw::MPW_MAX_PACKETS`], and is either all pointers or one inline
//! segment holding the concatenated frames.
//!
//! A session closes ([`CloseReason`]) when the next packet does not fit
//! (DS limit, WQE size, packet count, inline bytes), needs other offload
//! values (or, legacy MPW, has another length or descriptor kind), or needs
//! something a session cannot carry (several segments, TSO, VLAN insertion
//! unless the frame is inlined, with the tag inserted in software): such a
//! packet goes out as its own SEND (or TSO) WQE. Closing writes the final DS
//! count into the control segment; there is no "close" opcode.
//!
//! The mode is a compile-time marker ([`Empw`], [`LegacyMpw`], [`SingleWqe`]);
//! [`TxKind::from_caps`] and [`AnyTxQueue`] choose it once at construction
//! from the device capabilities. No packet tests a mode flag.
//!
//! # Completions
//!
//! The shadow entry of each WQE holds the packet counter at its end; a
//! requester CQE names a WQE ([`TxQueue::retire`]), the send queue checks the
//! counter against the shadow, and every packet up to that counter is
//! returned by its id, oldest first. Which WQEs ask for a CQE is the
//! [`CqePolicy`]: one per `n` sessions, or DPDK's rule (on the last WQE of a
//! burst once enough packets or WQEBBs went unsignalled). Either way a CQE is
//! forced once half the ring or half the id ring is unsignalled, so the
//! queue always drains.
//!
//! # Ring writes and aborts
//!
//! A session is built in the send queue's staging area and copied into the
//! ring (wrapping at its end) when it closes, past the producer index; only
//! [`TxBatch::complete`] moves the producer index and rings the doorbell
//! (one doorbell record write and one register write per burst). Dropping a
//! batch unpublished discards its packets: ring bytes past the producer
//! index may have changed, which the device never reads.
//!
//! Panic policy: nothing here panics on user data; refusals are [`TxError`].
//!
//! No `unsafe` outside the unit tests' fixture (ordinary memory standing in
//! for the device's), hence `deny` rather than `forbid`.
#![deny(unsafe_code)]

use core::marker::PhantomData;

use zerocopy::{FromBytes, IntoBytes};

use super::batch::{FrameSge, Sge};
use super::doorbell::{DoorbellPolicy, Publish};
use super::kind::QpKind;
use super::{QpType, RetireError, SendQueue, SqShadowEntry, Wqebb, SHADOW_CQE, SHADOW_SIGNALED};
use crate::index::{in_flight, wq_counter16};
use crate::prm::{
    mpw, Be16, Be32, Be64, CompletionMode, CtrlSeg, DataSeg, EthCsFlags, EthSeg, FmCeSe,
    InlineByteCount, OpmodIdxOpcode, SendOpcode, SwpFlags, VlanInsert, ETH_L2_INLINE_HEADER_SIZE,
    ETH_L2_MIN_HEADER_SIZE, MAX_DS, OPC_MOD_MPW, SEND_WQE_BB, SEND_WQE_DS, SEND_WQE_MAX_WQEBBS,
};

/// Byte offset of `fm_ce_se` in the control segment.
const CTRL_FM_CE_SE: usize = 11;

// ---------------------------------------------------------------------------
// Mode markers
// ---------------------------------------------------------------------------

mod sealed {
    pub trait Sealed {}
}

/// Which Tx path a queue uses, chosen from the device capabilities.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxKind {
    /// Enhanced multi-packet send WQEs (`MLX5DV_CONTEXT_FLAGS_ENHANCED_MPW`).
    Empw,
    /// Legacy MPW (`MLX5DV_CONTEXT_FLAGS_MPW_ALLOWED` without enhanced).
    LegacyMpw,
    /// One SEND WQE per packet.
    Single,
}

impl TxKind {
    /// The path the capabilities allow, best first: enhanced MPW, legacy
    /// MPW, else one WQE per packet (DPDK `mlx5_os.c` capability choice).
    pub const fn from_caps(enhanced_mpw: bool, mpw_allowed: bool) -> Self {
        if enhanced_mpw {
            TxKind::Empw
        } else if mpw_allowed {
            TxKind::LegacyMpw
        } else {
            TxKind::Single
        }
    }
}

/// The Tx path as a compile-time choice (STYLE point 10).
pub trait TxMode: sealed::Sealed {
    /// The path.
    const KIND: TxKind;
}

/// Enhanced MPW sessions.
#[derive(Debug, Clone, Copy, Default)]
pub struct Empw;
/// Legacy MPW sessions (ConnectX-4 Lx).
#[derive(Debug, Clone, Copy, Default)]
pub struct LegacyMpw;
/// One WQE per packet (no multi-packet capability).
#[derive(Debug, Clone, Copy, Default)]
pub struct SingleWqe;

impl sealed::Sealed for Empw {}
impl sealed::Sealed for LegacyMpw {}
impl sealed::Sealed for SingleWqe {}
impl TxMode for Empw {
    const KIND: TxKind = TxKind::Empw;
}
impl TxMode for LegacyMpw {
    const KIND: TxKind = TxKind::LegacyMpw;
}
impl TxMode for SingleWqe {
    const KIND: TxKind = TxKind::Single;
}

// ---------------------------------------------------------------------------
// Configuration
// ---------------------------------------------------------------------------

/// Which WQEs request a CQE.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CqePolicy {
    /// A CQE on every `n`-th WQE (session or single-packet WQE); 0 acts as 1.
    EverySessions(u16),
    /// DPDK's rule (`mlx5_tx_request_completion`): at the end of each burst,
    /// the last WQE requests a CQE if, since the last request, at least
    /// `packets` pointer packets (buffers the device still reads) or at least
    /// `wqebbs` WQEBBs (0: not counted) were posted.
    BurstEnd {
        /// Pointer packets (DPDK `MLX5_TX_COMP_THRESH` = 32).
        packets: u16,
        /// WQEBBs (DPDK `txq->wqe_thres`, counted with inlining on); 0 off.
        wqebbs: u16,
    },
}

/// Session limits and policies of a [`TxQueue`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxConfig {
    /// Frames (with bytes at hand) up to this length are inlined into
    /// sessions (DPDK `inlen_empw`); 0 never inlines.
    pub inline_max: u16,
    /// Largest number of packets in one session (legacy MPW: at most
    /// [`mpw::MPW_MAX_PACKETS`] whatever this says).
    pub max_packets: u16,
    /// Largest sum of inlined frame bytes in one session.
    pub max_inline_bytes: u16,
    /// Largest session WQE in bytes (a multiple of 16, at most 63 DS).
    pub max_wqe_bytes: u16,
    /// A single-packet WQE inlines a whole one-segment frame up to this
    /// length (DPDK `inlen_send`); 0 never (beyond the required L2 header).
    pub single_inline_max: u16,
    /// Which WQEs request a CQE.
    pub cqe: CqePolicy,
    /// Completion mode of WQEs that request no CQE: 0 (`ONLY_ERR`) or 1
    /// (`ONLY_FIRST_ERR`, DPDK's choice).
    pub unsignaled_ce: CompletionMode,
}

impl TxConfig {
    /// This crate's defaults: inline frames up to
    /// [`mpw::EMPW_DEF_INLINE_LEN`] (268) bytes, 32 packets per session,
    /// sessions up to 63 DS, a CQE per session.
    pub const fn new() -> Self {
        Self {
            inline_max: mpw::EMPW_DEF_INLINE_LEN as u16,
            max_packets: mpw::EMPW_MAX_PACKETS as u16,
            max_inline_bytes: mpw::EMPW_MAX_INLINE_LEN as u16,
            max_wqe_bytes: (MAX_DS as u16) * SEND_WQE_DS as u16,
            single_inline_max: 0,
            cqe: CqePolicy::EverySessions(1),
            unsignaled_ce: CompletionMode::OnlyErr,
        }
    }

    /// DPDK 26.07's eMPW policy: `inlen_empw` / `inlen_send` thresholds,
    /// 32 packets, 960-byte WQEs, CE = "only first error" on every WQE and
    /// a CQE at burst end past 32 pointer packets or `wqe_thres` WQEBBs
    /// (`wqe_thres` counts only with inlining on: pass 0 otherwise).
    pub const fn dpdk_empw(inlen_empw: u16, inlen_send: u16, wqe_thres: u16) -> Self {
        Self {
            inline_max: inlen_empw,
            max_packets: mpw::EMPW_MAX_PACKETS as u16,
            max_inline_bytes: mpw::EMPW_MAX_INLINE_LEN as u16,
            max_wqe_bytes: mpw::WQE_SIZE_MAX as u16,
            single_inline_max: inlen_send,
            cqe: CqePolicy::BurstEnd {
                packets: mpw::EMPW_MAX_PACKETS as u16,
                wqebbs: wqe_thres,
            },
            unsignaled_ce: CompletionMode::OnlyFirstErr,
        }
    }

    /// DPDK 26.07's legacy MPW policy: as [`TxConfig::dpdk_empw`], with
    /// 6 packets per session and the inline room of a session limited to
    /// `inlen_empw` bytes (DPDK `mlx5_tx_burst_empw_inline`, MPW branch).
    pub const fn dpdk_mpw(inlen_empw: u16, inlen_send: u16, wqe_thres: u16) -> Self {
        let inline_max = if inlen_send < inlen_empw {
            inlen_send
        } else {
            inlen_empw
        };
        Self {
            inline_max,
            max_packets: mpw::MPW_MAX_PACKETS as u16,
            max_inline_bytes: inlen_empw,
            max_wqe_bytes: mpw::WQE_SIZE_MAX as u16,
            single_inline_max: inlen_send,
            cqe: CqePolicy::BurstEnd {
                packets: mpw::EMPW_MAX_PACKETS as u16,
                wqebbs: wqe_thres,
            },
            unsignaled_ce: CompletionMode::OnlyFirstErr,
        }
    }
}

impl Default for TxConfig {
    fn default() -> Self {
        Self::new()
    }
}

// ---------------------------------------------------------------------------
// Packets
// ---------------------------------------------------------------------------

/// Where a packet's (first) segment is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PacketBuf<'d> {
    /// A borrowed frame in registered memory, bytes at hand: may be inlined.
    Frame(FrameSge<'d>),
    /// Pointer and key only: always sent by pointer.
    Ptr(Sge),
}

/// Offload values a session shares (its Ethernet segment).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxOffload {
    /// Checksum offload flags.
    pub cs_flags: EthCsFlags,
    /// Software-parser offsets in 2-byte units: outer L4, outer L3, inner
    /// L4, inner L3 (Ethernet segment bytes 0–3).
    pub swp_offsets: [u8; 4],
    /// Software-parser header kinds.
    pub swp_flags: SwpFlags,
    /// Tx metadata for steering.
    pub metadata: u32,
}

impl TxOffload {
    /// No offload.
    pub const NONE: Self = Self {
        cs_flags: EthCsFlags::new(),
        swp_offsets: [0; 4],
        swp_flags: SwpFlags::new(),
        metadata: 0,
    };
}

impl Default for TxOffload {
    fn default() -> Self {
        Self::NONE
    }
}

/// One packet of a burst.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet<'d> {
    /// Returned by [`TxQueue::retire`] once the device is done with it.
    pub id: u64,
    /// The frame, or its first segment.
    pub buf: PacketBuf<'d>,
    /// Further segments (a multi-segment packet never joins a session).
    pub more: &'d [Sge],
    /// Checksum, software-parser and metadata values.
    pub offload: TxOffload,
    /// Insert this VLAN tag (TCI).
    pub vlan_tci: Option<u16>,
    /// TSO: the MSS (0: no TSO).
    pub tso_mss: u16,
    /// TSO: bytes of L2–L4 header at the start of the frame.
    pub tso_hdr_len: u16,
}

impl<'d> Packet<'d> {
    /// A one-segment frame at its own address in the region of `lkey`.
    pub fn frame(id: u64, lkey: u32, data: &'d [u8]) -> Self {
        Self::from_buf(id, PacketBuf::Frame(FrameSge::new(lkey, data)))
    }

    /// A frame whose bytes are not at hand (pointer + key).
    pub fn ptr(id: u64, lkey: u32, addr: u64, length: u32) -> Self {
        Self::from_buf(id, PacketBuf::Ptr(Sge::new(lkey, addr, length)))
    }

    /// A packet of `buf`, no offload.
    pub const fn from_buf(id: u64, buf: PacketBuf<'d>) -> Self {
        Self {
            id,
            buf,
            more: &[],
            offload: TxOffload::NONE,
            vlan_tci: None,
            tso_mss: 0,
            tso_hdr_len: 0,
        }
    }

    /// With these offload values.
    pub const fn with_offload(mut self, offload: TxOffload) -> Self {
        self.offload = offload;
        self
    }

    /// With L3 and L4 checksum offload.
    pub const fn with_csum(mut self) -> Self {
        self.offload.cs_flags = self.offload.cs_flags.with_l3_csum(true).with_l4_csum(true);
        self
    }

    /// With further segments.
    pub const fn with_segments(mut self, more: &'d [Sge]) -> Self {
        self.more = more;
        self
    }

    /// With VLAN insertion.
    pub const fn with_vlan(mut self, tci: u16) -> Self {
        self.vlan_tci = Some(tci);
        self
    }

    /// With TSO.
    pub const fn with_tso(mut self, mss: u16, hdr_len: u16) -> Self {
        self.tso_mss = mss;
        self.tso_hdr_len = hdr_len;
        self
    }

    /// Frame length in bytes (all segments), before VLAN insertion.
    pub fn len(&self) -> u64 {
        let first = match self.buf {
            PacketBuf::Frame(f) => f.data.len() as u64,
            PacketBuf::Ptr(s) => u64::from(s.length),
        };
        self.more.iter().fold(first, |a, s| a + u64::from(s.length))
    }

    /// Whether the frame is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn bytes(&self) -> Option<&'d [u8]> {
        match self.buf {
            PacketBuf::Frame(f) => Some(f.data),
            PacketBuf::Ptr(_) => None,
        }
    }

    fn first_sge(&self) -> Sge {
        match self.buf {
            PacketBuf::Frame(f) => Sge::new(f.lkey, f.addr, f.data.len() as u32),
            PacketBuf::Ptr(s) => s,
        }
    }
}

/// Why a packet could not be queued. The packet was not queued; the batch
/// goes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxError {
    /// Not enough free WQEBBs or packet ids: retire completions first.
    QueueFull,
    /// The frame is too short (at most 18 bytes: DPDK refuses those,
    /// `MLX5_ESEG_MIN_INLINE_SIZE`) or too long.
    BadLength,
    /// The queue needs the frame's first bytes (inline L2 header, TSO
    /// header, software VLAN insertion): give it as [`PacketBuf::Frame`].
    FrameBytesRequired,
    /// TSO on a queue without TSO, or a TSO header outside 14..=max.
    BadTso,
    /// The packet's single WQE would exceed 63 DS.
    WqeTooLarge,
}

/// Why a session closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum CloseReason {
    /// The next descriptor would pass the 63-DS field.
    DsLimit = 0,
    /// The next descriptor would pass [`TxConfig::max_wqe_bytes`] or the
    /// free room of the ring.
    WqeSize,
    /// [`TxConfig::max_packets`] reached.
    MaxPackets,
    /// [`TxConfig::max_inline_bytes`] would be passed.
    MaxInlineBytes,
    /// The next packet needs other checksum / parser / metadata values.
    OffloadMismatch,
    /// Legacy MPW: the next packet has another length.
    LengthMismatch,
    /// Legacy MPW: the next packet needs the other descriptor kind (inline
    /// vs pointer).
    DescriptorKind,
    /// The next packet needs a feature sessions cannot carry.
    Unsupported,
    /// The batch completed.
    Complete,
}

impl CloseReason {
    /// Number of reasons.
    pub const COUNT: usize = 9;
}

/// Counters of a [`TxQueue`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TxStats {
    /// Multi-packet sessions posted.
    pub sessions: u64,
    /// Single-packet WQEs posted.
    pub single_wqes: u64,
    /// Packets posted.
    pub packets: u64,
    /// Sessions closed, by [`CloseReason`] (index `reason as usize`).
    pub closes: [u64; CloseReason::COUNT],
}

// ---------------------------------------------------------------------------
// The queue
// ---------------------------------------------------------------------------

/// Why [`TxQueue::new`] refused its parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxConfigError {
    /// The send queue is not a raw Ethernet one.
    NotRawPacket,
    /// The id ring's length is not a power of two (or is 0, or > 2^31).
    BadIdRing,
    /// `max_wqe_bytes` is not a multiple of 16 within 48..=1008, or
    /// `max_packets` is 0.
    BadLimits,
}

/// Tx counters that only a completed batch commits.
#[derive(Debug, Clone, Copy, Default)]
struct Pending {
    /// Free-running WQEBB producer counter.
    pi: u32,
    /// Free-running packet counter.
    head: u32,
    /// Since the last WQE that requested a CQE: WQEs, WQEBBs, pointer
    /// packets, all packets.
    wqes: u32,
    wqebbs: u32,
    ptr_pkts: u32,
    pkts: u32,
}

/// A raw Ethernet Tx queue with multi-packet sessions; `M` fixes the path.
#[derive(Debug)]
pub struct TxQueue<'a, P: DoorbellPolicy, Q: QpKind, M: TxMode> {
    sq: SendQueue<'a, P, Q>,
    ids: &'a mut [u64],
    /// Packets retired (free-running).
    tail: u32,
    /// Committed counters.
    done: Pending,
    cfg: TxConfig,
    stats: TxStats,
    _mode: PhantomData<M>,
}

impl<'a, P: DoorbellPolicy, Q: QpKind, M: TxMode> TxQueue<'a, P, Q, M> {
    /// Builds a Tx queue over a raw Ethernet send queue; `ids` (a power of
    /// two long) holds the id of every packet in flight.
    pub fn new(
        sq: SendQueue<'a, P, Q>,
        ids: &'a mut [u64],
        cfg: TxConfig,
    ) -> Result<Self, TxConfigError> {
        if sq.qp_type() != QpType::RawPacket {
            return Err(TxConfigError::NotRawPacket);
        }
        if !ids.len().is_power_of_two() || ids.len() > 1 << 31 {
            return Err(TxConfigError::BadIdRing);
        }
        let w = usize::from(cfg.max_wqe_bytes);
        if w % SEND_WQE_DS != 0
            || !(3 * SEND_WQE_DS..=usize::from(MAX_DS) * SEND_WQE_DS).contains(&w)
            || cfg.max_packets == 0
        {
            return Err(TxConfigError::BadLimits);
        }
        let done = Pending {
            pi: sq.pi,
            ..Pending::default()
        };
        Ok(Self {
            sq,
            ids,
            tail: 0,
            done,
            cfg,
            stats: TxStats::default(),
            _mode: PhantomData,
        })
    }

    /// The path of this queue.
    pub const fn kind(&self) -> TxKind {
        M::KIND
    }

    /// The underlying send queue (counters, shadow).
    pub fn send_queue(&self) -> &SendQueue<'a, P, Q> {
        &self.sq
    }

    /// The configuration.
    pub fn config(&self) -> &TxConfig {
        &self.cfg
    }

    /// Counters.
    pub fn stats(&self) -> &TxStats {
        &self.stats
    }

    /// Changes which WQEs request a CQE from the next batch on (e.g. a
    /// CQE per session for one burst); the drain guarantee still applies.
    pub fn set_cqe_policy(&mut self, cqe: CqePolicy) {
        self.cfg.cqe = cqe;
    }

    /// Packets posted and not yet retired.
    pub fn packets_in_flight(&self) -> u32 {
        in_flight(self.done.head, self.tail)
    }

    /// Starts a batch; nothing reaches the device before
    /// [`TxBatch::complete`].
    pub fn start(&mut self) -> TxBatch<'_, 'a, P, Q, M> {
        let p = self.done;
        TxBatch {
            q: self,
            p,
            open: None,
            wqes: 0,
            inline: false,
            last: None,
        }
    }

    /// Queues as many of `pkts` as fit, in order, with one doorbell;
    /// returns how many were queued (DPDK `rte_eth_tx_burst`).
    pub fn tx_burst(&mut self, pkts: &[Packet<'_>]) -> usize {
        let mut b = self.start();
        let mut n = 0;
        for p in pkts {
            if b.push(p).is_err() {
                break;
            }
            n += 1;
        }
        b.complete();
        n
    }

    /// Retires the WQE a requester CQE names (its `wqe_counter`) and every
    /// one before it, calling `f` with the id of each packet they carried,
    /// oldest first; returns the number of packets.
    pub fn retire(&mut self, wqe_counter: u16, mut f: impl FnMut(u64)) -> Result<u32, RetireError> {
        let r = self.sq.retire(wqe_counter)?;
        // The shadow holds the packet counter at the WQE's end; it was
        // written by us, but check it against the ids in flight anyway.
        let end = r.wr_id as u32;
        let n = in_flight(end, self.tail);
        if n > in_flight(self.done.head, self.tail) {
            return Err(RetireError::NotInFlight { wqe_counter });
        }
        let mask = self.ids.len() - 1;
        for i in 0..n {
            let slot = self.tail.wrapping_add(i) as usize & mask;
            if let Some(id) = self.ids.get(slot) {
                f(*id);
            }
        }
        self.tail = end;
        Ok(n)
    }
}

/// The open session.
#[derive(Debug, Clone, Copy)]
struct Open {
    /// Producer counter of its first WQEBB.
    pi: u32,
    /// DS so far (title included); legacy MPW inline: title + header word.
    ds: u32,
    /// Largest DS for this session.
    max_ds: u32,
    pkts: u32,
    ptr_pkts: u32,
    inline_bytes: u32,
    offload: TxOffload,
    /// Legacy MPW: the common length, and whether the session is inline.
    len: u32,
    mpw_inline: bool,
}

/// How one packet goes into a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Desc {
    /// Inline, this many bytes (VLAN tag included).
    Inline(u32),
    /// One pointer segment.
    Pointer,
}

/// A burst in progress: [`TxBatch::push`] packets, then
/// [`TxBatch::complete`]. Dropping it discards its packets.
#[derive(Debug)]
pub struct TxBatch<'q, 'a, P: DoorbellPolicy, Q: QpKind, M: TxMode> {
    q: &'q mut TxQueue<'a, P, Q, M>,
    p: Pending,
    open: Option<Open>,
    /// WQEs closed in this batch.
    wqes: u32,
    /// Whether any WQE of the batch carries inline data.
    inline: bool,
    /// The last closed WQE: its first WQEBB's counter, WQEBBs, DS.
    last: Option<(u32, u32, u32)>,
}

/// The staging area as bytes (one largest WQE).
fn stage(staging: &mut [Wqebb]) -> &mut [u8] {
    let n = core::cmp::min(staging.len(), SEND_WQE_MAX_WQEBBS);
    staging
        .get_mut(..n)
        .map(IntoBytes::as_mut_bytes)
        .unwrap_or_default()
}

/// Writes `src` at `at` in `buf`, if it fits (it always does: every caller
/// checked the DS count against the staging size first). Inlined, so that
/// fixed-size sources (segments, padding) become plain stores, not calls.
#[inline(always)]
fn put(buf: &mut [u8], at: usize, src: &[u8]) {
    if let Some(d) = buf.get_mut(at..at + src.len()) {
        d.copy_from_slice(src);
    }
}

/// Zeroes `buf[from..to]`.
fn zero(buf: &mut [u8], from: usize, to: usize) {
    if let Some(d) = buf.get_mut(from..to) {
        d.fill(0);
    }
}

/// Copies `frame` with an 802.1Q tag inserted after the MAC addresses
/// (software VLAN insertion of an inlined frame, DPDK `mlx5_tx_dseg_vlan`).
fn put_vlan(buf: &mut [u8], at: usize, frame: &[u8], tci: u16) {
    let (macs, rest) = frame.split_at(core::cmp::min(12, frame.len()));
    put(buf, at, macs);
    let [t0, t1] = tci.to_be_bytes();
    put(buf, at + macs.len(), &[0x81, 0x00, t0, t1]);
    put(buf, at + macs.len() + 4, rest);
}

impl<P: DoorbellPolicy, Q: QpKind, M: TxMode> TxBatch<'_, '_, P, Q, M> {
    /// Free WQEBBs after what this batch has built.
    fn free_wqebbs(&self) -> u32 {
        let sq = &self.q.sq;
        sq.size
            .entries()
            .saturating_sub(in_flight(self.p.pi, sq.ci))
    }

    /// Whether the id ring has room for one more packet.
    fn ids_room(&self) -> bool {
        (in_flight(self.p.head, self.q.tail) as usize) < self.q.ids.len()
    }

    fn max_packets(&self) -> u32 {
        let m = u32::from(self.q.cfg.max_packets);
        match M::KIND {
            TxKind::LegacyMpw => core::cmp::min(m, mpw::MPW_MAX_PACKETS as u32),
            _ => m,
        }
    }

    /// How `p` would go into a session, or `None` if it cannot.
    fn classify(&self, p: &Packet<'_>, len: u32) -> Option<Desc> {
        if !p.more.is_empty() || p.tso_mss != 0 {
            return None;
        }
        let cfg = &self.q.cfg;
        let vlan = u32::from(p.vlan_tci.is_some()) * 4;
        let fresh_ds = u32::from(cfg.max_wqe_bytes) / SEND_WQE_DS as u32 - mpw::TITLE_DS as u32;
        let inline_ok = p.bytes().is_some()
            && len + vlan <= u32::from(cfg.inline_max)
            && len + vlan <= u32::from(cfg.max_inline_bytes)
            && (4 + len + vlan).div_ceil(SEND_WQE_DS as u32) <= fresh_ds;
        match (M::KIND, inline_ok, p.vlan_tci.is_some()) {
            (TxKind::Single, _, _) => None,
            // The title has no VLAN insert: a tagged frame joins a session
            // only inlined, with the tag inserted in software.
            (_, false, true) => None,
            (TxKind::LegacyMpw, _, true) => None,
            (_, true, _) => Some(Desc::Inline(len + vlan)),
            (_, false, false) => Some(Desc::Pointer),
        }
    }

    /// Queues one packet. On error nothing of it was queued.
    pub fn push(&mut self, p: &Packet<'_>) -> Result<(), TxError> {
        let len64 = p.len();
        if len64 <= ETH_L2_INLINE_HEADER_SIZE as u64 || len64 > u64::from(u32::MAX >> 1) {
            return Err(TxError::BadLength);
        }
        let len = len64 as u32;
        if !self.ids_room() {
            return Err(TxError::QueueFull);
        }
        let Some(desc) = self.classify(p, len) else {
            self.close(CloseReason::Unsupported);
            return self.single(p, len);
        };
        // Does it join the open session? (By reference: `Open` is a few
        // dozen bytes, copied out and back per packet otherwise.)
        if let Some(r) = self
            .open
            .as_ref()
            .and_then(|o| self.misfit(o, p, len, desc))
        {
            self.close(r);
        }
        if self.open.is_none() {
            self.open_session(p, len, desc)?;
        }
        self.add(p, desc);
        Ok(())
    }

    /// Why the open session `o` cannot take `p`, if it cannot.
    fn misfit(&self, o: &Open, p: &Packet<'_>, len: u32, desc: Desc) -> Option<CloseReason> {
        let cfg = &self.q.cfg;
        if o.offload != p.offload {
            return Some(CloseReason::OffloadMismatch);
        }
        let legacy = M::KIND == TxKind::LegacyMpw;
        if legacy && o.len != len {
            return Some(CloseReason::LengthMismatch);
        }
        if legacy && o.mpw_inline != matches!(desc, Desc::Inline(_)) {
            return Some(CloseReason::DescriptorKind);
        }
        if o.pkts >= self.max_packets() {
            return Some(CloseReason::MaxPackets);
        }
        let need = match desc {
            Desc::Inline(n) => {
                if o.inline_bytes + n > u32::from(cfg.max_inline_bytes) {
                    return Some(CloseReason::MaxInlineBytes);
                }
                if legacy {
                    // One inline segment: the DS count follows the total.
                    (4 + o.inline_bytes + n).div_ceil(SEND_WQE_DS as u32) + mpw::TITLE_DS as u32
                        - o.ds
                } else {
                    (4 + n).div_ceil(SEND_WQE_DS as u32)
                }
            }
            Desc::Pointer => 1,
        };
        let ds = o.ds + need;
        if ds > u32::from(MAX_DS) {
            Some(CloseReason::DsLimit)
        } else if ds > o.max_ds {
            Some(CloseReason::WqeSize)
        } else {
            None
        }
    }

    /// Opens a session for `p` (whose descriptor fits a fresh one).
    fn open_session(&mut self, p: &Packet<'_>, len: u32, desc: Desc) -> Result<(), TxError> {
        let cfg = &self.q.cfg;
        let room_ds = self
            .free_wqebbs()
            .saturating_mul((SEND_WQE_BB / SEND_WQE_DS) as u32);
        let max_ds = core::cmp::min(u32::from(cfg.max_wqe_bytes) / SEND_WQE_DS as u32, room_ds);
        let first = match desc {
            Desc::Inline(n) => (4 + n).div_ceil(SEND_WQE_DS as u32),
            Desc::Pointer => 1,
        };
        if mpw::TITLE_DS as u32 + first > max_ds {
            return Err(TxError::QueueFull);
        }
        let legacy = M::KIND == TxKind::LegacyMpw;
        let o = Open {
            pi: self.p.pi,
            ds: mpw::TITLE_DS as u32,
            max_ds,
            pkts: 0,
            ptr_pkts: 0,
            inline_bytes: 0,
            offload: p.offload,
            len,
            mpw_inline: matches!(desc, Desc::Inline(_)),
        };
        // Title: the Ethernet segment now (the control segment at close).
        let mut eth = EthSeg {
            swp_outer_l4_offset: p.offload.swp_offsets[0],
            swp_outer_l3_offset: p.offload.swp_offsets[1],
            swp_inner_l4_offset: p.offload.swp_offsets[2],
            swp_inner_l3_offset: p.offload.swp_offsets[3],
            cs_flags: p.offload.cs_flags,
            swp_flags: p.offload.swp_flags,
            mss: Be16::ZERO,
            flow_table_metadata: Be32::new(p.offload.metadata),
            inline_hdr_sz: Be16::ZERO,
            inline_hdr_start: [0; 2],
        };
        if legacy {
            // Legacy MPW: the common packet length in `mss` (DPDK
            // `mlx5_tx_burst_empw_*`, "Store the packet length for legacy MPW").
            eth.mss = Be16::new(len as u16);
        }
        let buf = stage(self.q.sq.staging);
        put(buf, SEND_WQE_DS, eth.as_bytes());
        self.open = Some(o);
        Ok(())
    }

    /// Adds `p` to the open session (it fits: checked by `misfit`).
    fn add(&mut self, p: &Packet<'_>, desc: Desc) {
        let Some(o) = self.open.as_mut() else { return };
        let buf = stage(self.q.sq.staging);
        let at = o.ds as usize * SEND_WQE_DS;
        match desc {
            Desc::Inline(n) => {
                let frame = p.bytes().unwrap_or_default();
                if M::KIND == TxKind::LegacyMpw {
                    // Frames concatenated after one 4-byte header, written at
                    // close (DPDK `mlx5_tx_idone_empw`).
                    let hdr = mpw::TITLE_DS * SEND_WQE_DS;
                    let dst = hdr + 4 + o.inline_bytes as usize;
                    put(buf, dst, frame);
                    o.inline_bytes += n;
                    let end = hdr + 4 + o.inline_bytes as usize;
                    o.ds = mpw::TITLE_DS as u32 + (end - hdr).div_ceil(SEND_WQE_DS) as u32;
                    zero(buf, end, o.ds as usize * SEND_WQE_DS);
                } else {
                    let units = (4 + n).div_ceil(SEND_WQE_DS as u32);
                    // Padding: zero the last 16-byte unit first (one fixed
                    // store, no `memset` call), then the segment header and
                    // the frame over it (the frame ends inside that unit).
                    let last = at + (units as usize - 1) * SEND_WQE_DS;
                    put(buf, last, &[0u8; SEND_WQE_DS]);
                    let seg = InlineByteCount::new().with_byte_count(n).with_inline(true);
                    put(buf, at, seg.into_bits().as_bytes());
                    match p.vlan_tci {
                        Some(tci) => put_vlan(buf, at + 4, frame, tci),
                        None => put(buf, at + 4, frame),
                    }
                    o.ds += units;
                    o.inline_bytes += n;
                }
                self.inline = true;
            }
            Desc::Pointer => {
                let s = p.first_sge();
                let d = DataSeg {
                    byte_count: Be32::new(s.length),
                    lkey: Be32::new(s.lkey),
                    addr: Be64::new(s.addr),
                };
                put(buf, at, d.as_bytes());
                o.ds += 1;
                o.ptr_pkts += 1;
            }
        }
        o.pkts += 1;
        self.record_id(p.id);
    }

    fn record_id(&mut self, id: u64) {
        let mask = self.q.ids.len() - 1;
        if let Some(slot) = self.q.ids.get_mut(self.p.head as usize & mask) {
            *slot = id;
        }
        self.p.head = self.p.head.wrapping_add(1);
        self.p.pkts += 1;
        self.q.stats.packets += 1;
    }

    /// Closes the open session, if any: final DS into the control segment,
    /// the WQE into the ring, the shadow.
    fn close(&mut self, reason: CloseReason) {
        let Some(o) = self.open.take() else { return };
        let (opcode, opmod) = match M::KIND {
            TxKind::LegacyMpw => (SendOpcode::Tso, OPC_MOD_MPW),
            _ => (SendOpcode::EnhancedMpsw, 0),
        };
        if M::KIND == TxKind::LegacyMpw && o.mpw_inline {
            let buf = stage(self.q.sq.staging);
            let seg = InlineByteCount::new()
                .with_byte_count(o.inline_bytes)
                .with_inline(true);
            put(buf, mpw::TITLE_DS * SEND_WQE_DS, seg.into_bits().as_bytes());
        }
        self.p.ptr_pkts += o.ptr_pkts;
        self.q.stats.sessions += 1;
        if let Some(c) = self.q.stats.closes.get_mut(reason as usize) {
            *c += 1;
        }
        self.finish(o.pi, o.ds, opcode, opmod);
    }

    /// Writes the control segment of the staged WQE (starting at producer
    /// counter `pi`, `ds` DS), copies it into the ring and records it.
    fn finish(&mut self, pi: u32, ds: u32, opcode: SendOpcode, opmod: u8) {
        let bbs = ds.div_ceil((SEND_WQE_BB / SEND_WQE_DS) as u32);
        self.p.wqes += 1;
        self.p.wqebbs += bbs;
        let signal = self.signal_now();
        let ce = if signal {
            CompletionMode::Always
        } else {
            self.q.cfg.unsignaled_ce
        };
        let sq = &mut self.q.sq;
        let ctrl = CtrlSeg {
            opmod_idx_opcode: OpmodIdxOpcode::new()
                .with_opcode(opcode.raw())
                .with_wqe_index(wq_counter16(pi))
                .with_opmod(opmod),
            qpn_ds: sq.lim.qpn_ds.with_ds(ds as u8),
            signature: 0,
            dci_stream_channel_id: Be16::ZERO,
            fm_ce_se: FmCeSe::new().with_ce(ce.raw()),
            imm: Be32::ZERO,
        };
        let buf = stage(sq.staging);
        put(buf, 0, ctrl.as_bytes());
        let end = bbs as usize * SEND_WQE_BB;
        zero(buf, ds as usize * SEND_WQE_DS, end);
        // Into the ring at the session's first WQEBB, wrapping at its end.
        let staged = buf.get(..end).unwrap_or_default();
        let blocks = <[[u8; SEND_WQE_BB]]>::ref_from_bytes(staged).unwrap_or_default();
        sq.ring.write_run(pi, blocks);
        // Shadow: the packet counter at the WQE's end, for `retire`.
        for i in 0..bbs {
            if let Some(e) = sq.shadow.get_mut(sq.size.slot(pi.wrapping_add(i))) {
                *e = SqShadowEntry::EMPTY;
            }
        }
        if let Some(e) = sq.shadow.get_mut(sq.size.slot(pi)) {
            *e = SqShadowEntry::new(
                u64::from(self.p.head),
                wq_counter16(pi),
                bbs as u8,
                if signal {
                    SHADOW_SIGNALED | SHADOW_CQE
                } else {
                    0
                },
            );
        }
        self.p.pi = pi.wrapping_add(bbs);
        self.wqes += 1;
        self.last = Some((pi, bbs, ds));
        if signal {
            self.reset_since();
        }
    }

    fn reset_since(&mut self) {
        self.p.wqes = 0;
        self.p.wqebbs = 0;
        self.p.ptr_pkts = 0;
        self.p.pkts = 0;
    }

    /// Whether the WQE being finished requests a CQE (the per-WQE part of
    /// the policy, and the drain guarantee).
    fn signal_now(&self) -> bool {
        let sq = &self.q.sq;
        if self.p.wqebbs >= sq.size.entries() / 2 || self.p.pkts as usize >= self.q.ids.len() / 2 {
            return true;
        }
        match self.q.cfg.cqe {
            CqePolicy::EverySessions(n) => self.p.wqes >= u32::from(n.max(1)),
            CqePolicy::BurstEnd { .. } => false,
        }
    }

    /// Sends `p` as its own SEND (or TSO) WQE.
    fn single(&mut self, p: &Packet<'_>, len: u32) -> Result<(), TxError> {
        let lim = self.q.sq.lim;
        let cfg = self.q.cfg;
        let frame = p.bytes();
        let min_inline = usize::from(lim.eth_min_inline);
        // The inline header: TSO header, or the required L2 header (with
        // the VLAN tag inserted in software when one is asked for).
        let mut hdr = [0u8; crate::prm::MAX_TSO_HEADER + 4];
        let (hdr_len, consumed, vlan_insert) = if p.tso_mss != 0 {
            let h = usize::from(p.tso_hdr_len);
            if lim.max_tso_header == 0
                || h < ETH_L2_MIN_HEADER_SIZE
                || h > usize::from(lim.max_tso_header)
                || h > crate::prm::MAX_TSO_HEADER
            {
                return Err(TxError::BadTso);
            }
            let f = frame.ok_or(TxError::FrameBytesRequired)?;
            let src = f.get(..h).ok_or(TxError::BadTso)?;
            put(&mut hdr, 0, src);
            (h, h, None)
        } else if min_inline > 0 {
            let f = frame.ok_or(TxError::FrameBytesRequired)?;
            match p.vlan_tci {
                Some(tci) => {
                    // 12 bytes of MACs, the tag, 2 bytes of EtherType.
                    let src = f.get(..ETH_L2_MIN_HEADER_SIZE).ok_or(TxError::BadLength)?;
                    put_vlan(&mut hdr, 0, src, tci);
                    (ETH_L2_MIN_HEADER_SIZE + 4, ETH_L2_MIN_HEADER_SIZE, None)
                }
                None => {
                    let src = f.get(..min_inline).ok_or(TxError::BadLength)?;
                    put(&mut hdr, 0, src);
                    (min_inline, min_inline, None)
                }
            }
        } else {
            (0, 0, p.vlan_tci)
        };
        let first = p.first_sge();
        let rest_len = first.length.saturating_sub(consumed as u32);
        let whole_inline = frame.is_some()
            && p.more.is_empty()
            && p.tso_mss == 0
            && len <= u32::from(cfg.single_inline_max);
        let eth_ds = EthSeg::ds_for(hdr_len) as u32;
        let body_ds = if whole_inline {
            if rest_len == 0 {
                0
            } else {
                (4 + rest_len).div_ceil(SEND_WQE_DS as u32)
            }
        } else {
            u32::from(rest_len != 0) + p.more.iter().filter(|s| s.length != 0).count() as u32
        };
        let ds = 1 + eth_ds + body_ds;
        if ds > u32::from(MAX_DS) {
            return Err(TxError::WqeTooLarge);
        }
        let bbs = ds.div_ceil((SEND_WQE_BB / SEND_WQE_DS) as u32);
        if bbs > self.free_wqebbs() {
            return Err(TxError::QueueFull);
        }
        // ---- from here on nothing fails -----------------------------------
        let buf = stage(self.q.sq.staging);
        let mut eth = EthSeg {
            swp_outer_l4_offset: p.offload.swp_offsets[0],
            swp_outer_l3_offset: p.offload.swp_offsets[1],
            swp_inner_l4_offset: p.offload.swp_offsets[2],
            swp_inner_l3_offset: p.offload.swp_offsets[3],
            cs_flags: p.offload.cs_flags,
            swp_flags: p.offload.swp_flags,
            mss: Be16::new(p.tso_mss),
            flow_table_metadata: Be32::new(p.offload.metadata),
            inline_hdr_sz: Be16::new(hdr_len as u16),
            inline_hdr_start: [0; 2],
        };
        if let Some(tci) = vlan_insert {
            eth.set_vlan_insert(VlanInsert::new().with_vlan_tci(tci).with_insert(true));
        }
        put(buf, SEND_WQE_DS, eth.as_bytes());
        // The header: 2 bytes in the segment, the rest in the next units.
        let hdr_bytes = hdr.get(..hdr_len).unwrap_or_default();
        put(buf, SEND_WQE_DS + EthSeg::INLINE_HDR_OFFSET, hdr_bytes);
        let mut at = SEND_WQE_DS * (1 + eth_ds as usize);
        // Pad the header's last unit (bytes 12-15 of the segment stay
        // whatever the header or the VLAN request made them).
        zero(
            buf,
            SEND_WQE_DS + EthSeg::INLINE_HDR_OFFSET + hdr_len.max(2),
            at,
        );
        if whole_inline {
            if rest_len != 0 {
                let rest = frame.and_then(|f| f.get(consumed..)).unwrap_or_default();
                let seg = InlineByteCount::new()
                    .with_byte_count(rest_len)
                    .with_inline(true);
                put(buf, at, seg.into_bits().as_bytes());
                put(buf, at + 4, rest);
                let end = at + 4 + rest.len();
                at += body_ds as usize * SEND_WQE_DS;
                zero(buf, end, at);
                self.inline = true;
            }
        } else {
            let firsts = [Sge::new(
                first.lkey,
                first.addr.wrapping_add(consumed as u64),
                rest_len,
            )];
            for s in firsts.iter().chain(p.more).filter(|s| s.length != 0) {
                let d = DataSeg {
                    byte_count: Be32::new(s.length),
                    lkey: Be32::new(s.lkey),
                    addr: Be64::new(s.addr),
                };
                put(buf, at, d.as_bytes());
                at += SEND_WQE_DS;
            }
            self.p.ptr_pkts += 1;
        }
        if hdr_len > 0 {
            self.inline = true;
        }
        self.record_id(p.id);
        self.q.stats.single_wqes += 1;
        let opcode = if p.tso_mss != 0 {
            SendOpcode::Tso
        } else {
            SendOpcode::Send
        };
        let pi = self.p.pi;
        self.finish(pi, ds, opcode, 0);
        Ok(())
    }

    /// Closes the open session, applies the burst-end CQE rule and
    /// publishes the batch: one doorbell record write and one doorbell (or
    /// BlueFlame) write. Returns the number of WQEs published.
    pub fn complete(mut self) -> u32 {
        self.close(CloseReason::Complete);
        let Some((last_pi, bbs, ds)) = self.last else {
            return 0;
        };
        if let CqePolicy::BurstEnd { packets, wqebbs } = self.q.cfg.cqe {
            let by_pkts = self.p.ptr_pkts >= u32::from(packets);
            let by_bbs = wqebbs != 0 && self.p.wqebbs >= u32::from(wqebbs);
            if (by_pkts || by_bbs) && self.p.wqes != 0 {
                self.request_cqe(last_pi);
            }
        }
        let wqes = self.wqes;
        let sq = &mut self.q.sq;
        // The unsignalled count of the send queue's own posts is kept (these
        // WQEs follow their own signalling), and the fast paths' credits,
        // computed for the old producer counter, are dropped.
        let unsignaled = sq.unsignaled();
        sq.pi = self.p.pi;
        sq.set_unsignaled(unsignaled);
        sq.fast_end = sq.pi;
        self.q.done = self.p;
        let n = core::cmp::min(bbs as usize, sq.staging.len());
        let last_wqe = sq.staging.get(..n).unwrap_or_default();
        sq.db.ring::<P>(Publish {
            pi: self.p.pi,
            last_wqe,
            last_ds: ds as u8,
            nreq: wqes,
            inline: self.inline,
        });
        wqes
    }

    /// Turns the CE bits of the WQE at `pi` (already in the ring and, as
    /// the last one, in the staging area) into "always".
    fn request_cqe(&mut self, pi: u32) {
        let sq = &mut self.q.sq;
        let fm_ce_se = FmCeSe::new().with_ce(CompletionMode::Always.raw());
        // `fm_ce_se` is byte 11 of the control segment, in the WQE's first
        // WQEBB (not yet published: the doorbell has not been rung).
        let mut block = sq.ring.read(pi);
        put(&mut block, CTRL_FM_CE_SE, &[fm_ce_se.into_bits()]);
        sq.ring.write(pi, &block);
        put(stage(sq.staging), CTRL_FM_CE_SE, &[fm_ce_se.into_bits()]);
        if let Some(e) = sq.shadow.get_mut(sq.size.slot(pi)) {
            e.mark_signaled();
        }
        self.reset_since();
    }
}

// ---------------------------------------------------------------------------
// Choosing the mode once, at construction
// ---------------------------------------------------------------------------

/// A Tx queue whose path was chosen at construction from the device
/// capabilities ([`TxKind::from_caps`]); the choice is matched once per
/// burst, never per packet.
#[derive(Debug)]
pub enum AnyTxQueue<'a, P: DoorbellPolicy, Q: QpKind> {
    /// Enhanced MPW.
    Empw(TxQueue<'a, P, Q, Empw>),
    /// Legacy MPW.
    LegacyMpw(TxQueue<'a, P, Q, LegacyMpw>),
    /// One WQE per packet.
    Single(TxQueue<'a, P, Q, SingleWqe>),
}

impl<'a, P: DoorbellPolicy, Q: QpKind> AnyTxQueue<'a, P, Q> {
    /// Builds the queue of the best path the capabilities allow.
    pub fn from_caps(
        sq: SendQueue<'a, P, Q>,
        ids: &'a mut [u64],
        cfg: TxConfig,
        enhanced_mpw: bool,
        mpw_allowed: bool,
    ) -> Result<Self, TxConfigError> {
        Ok(match TxKind::from_caps(enhanced_mpw, mpw_allowed) {
            TxKind::Empw => AnyTxQueue::Empw(TxQueue::new(sq, ids, cfg)?),
            TxKind::LegacyMpw => AnyTxQueue::LegacyMpw(TxQueue::new(sq, ids, cfg)?),
            TxKind::Single => AnyTxQueue::Single(TxQueue::new(sq, ids, cfg)?),
        })
    }

    /// The chosen path.
    pub fn kind(&self) -> TxKind {
        match self {
            AnyTxQueue::Empw(_) => TxKind::Empw,
            AnyTxQueue::LegacyMpw(_) => TxKind::LegacyMpw,
            AnyTxQueue::Single(_) => TxKind::Single,
        }
    }

    /// [`TxQueue::tx_burst`] of the chosen path.
    pub fn tx_burst(&mut self, pkts: &[Packet<'_>]) -> usize {
        match self {
            AnyTxQueue::Empw(q) => q.tx_burst(pkts),
            AnyTxQueue::LegacyMpw(q) => q.tx_burst(pkts),
            AnyTxQueue::Single(q) => q.tx_burst(pkts),
        }
    }

    /// [`TxQueue::retire`] of the chosen path.
    pub fn retire(&mut self, wqe_counter: u16, f: impl FnMut(u64)) -> Result<u32, RetireError> {
        match self {
            AnyTxQueue::Empw(q) => q.retire(wqe_counter, f),
            AnyTxQueue::LegacyMpw(q) => q.retire(wqe_counter, f),
            AnyTxQueue::Single(q) => q.retire(wqe_counter, f),
        }
    }

    /// [`TxQueue::stats`] of the chosen path.
    pub fn stats(&self) -> &TxStats {
        match self {
            AnyTxQueue::Empw(q) => q.stats(),
            AnyTxQueue::LegacyMpw(q) => q.stats(),
            AnyTxQueue::Single(q) => q.stats(),
        }
    }
}

#[cfg(test)]
#[cfg(not(loom))]
#[expect(
    unsafe_code,
    reason = "test fixture: ordinary memory standing in for the SQ buffer, doorbell record and UAR"
)]
mod tests {
    use core::ptr::NonNull;
    use std::boxed::Box;
    use std::vec;
    use std::vec::Vec;

    use super::*;
    use crate::mmio::DeviceWord;
    use crate::sq::{DoorbellOnly, RawPacketQp, SqConfig, SqRawParts};

    const UAR: usize = 4096;
    const QPN: u32 = 0xd0e;
    const LKEY: u32 = 0xc0ffee;

    struct Mem {
        ring: *mut [Wqebb],
        dbrec: *mut [u32; 2],
        uar: *mut [u64; UAR / 8],
        wqe_cnt: usize,
    }

    impl Mem {
        fn new(wqe_cnt: usize) -> Self {
            Mem {
                ring: Box::into_raw(vec![Wqebb([0xa5; 64]); wqe_cnt].into_boxed_slice()),
                dbrec: Box::into_raw(Box::new([0xa5a5_a5a5; 2])),
                uar: Box::into_raw(Box::new([0x3c3c_3c3c_3c3c_3c3c; UAR / 8])),
                wqe_cnt,
            }
        }
        fn read(p: *const u8, len: usize) -> Vec<u8> {
            let mut v = vec![0u8; len];
            // SAFETY: `p` points into a live allocation of this `Mem` of at
            // least `len` bytes; the queue is not running concurrently.
            unsafe { core::ptr::copy_nonoverlapping(p, v.as_mut_ptr(), len) };
            v
        }
        fn ring(&self) -> Vec<u8> {
            Self::read(self.ring.cast::<u8>(), self.wqe_cnt * 64)
        }
        fn dbrec(&self) -> u32 {
            let b = Self::read(self.dbrec.cast::<u8>(), 8);
            u32::from_be_bytes([b[4], b[5], b[6], b[7]])
        }
        fn db(&self) -> Vec<u8> {
            Self::read(self.uar.cast::<u8>(), 8)
        }
        fn raw(&self) -> SqRawParts<'_> {
            // SAFETY: the SQ word of the doorbell record is a live, aligned
            // u32 that only the queue writes while it lives.
            let dbrec = unsafe { DeviceWord::from_ptr(self.dbrec.cast::<u32>().add(1)) };
            SqRawParts {
                buf: NonNull::new(self.ring.cast::<u8>()).expect("ring"),
                wqe_cnt: self.wqe_cnt as u32,
                dbrec,
                bf_reg: NonNull::new(self.uar.cast::<u8>()).expect("uar"),
                bf_buf_size: 0,
            }
        }
    }

    impl Drop for Mem {
        fn drop(&mut self) {
            // SAFETY: from `Box::into_raw` in `new`; every queue over this
            // memory borrowed `self` and is gone.
            unsafe {
                drop(Box::from_raw(self.ring));
                drop(Box::from_raw(self.dbrec));
                drop(Box::from_raw(self.uar));
            }
        }
    }

    struct Lent {
        shadow: Vec<SqShadowEntry>,
        staging: Vec<Wqebb>,
        ids: Vec<u64>,
    }

    impl Lent {
        fn new(wqe_cnt: usize) -> Self {
            Lent {
                shadow: vec![SqShadowEntry::EMPTY; wqe_cnt],
                staging: vec![Wqebb::ZERO; 16],
                ids: vec![0; 1024],
            }
        }
    }

    type Q<'a, M> = TxQueue<'a, DoorbellOnly, RawPacketQp, M>;

    fn sq<'a>(
        mem: &'a Mem,
        shadow: &'a mut [SqShadowEntry],
        staging: &'a mut [Wqebb],
        start_pi: u32,
        min_inline: u8,
    ) -> SendQueue<'a, DoorbellOnly, RawPacketQp> {
        let mut c = SqConfig::new(QpType::RawPacket, QPN, 256, 4);
        c.start_pi = start_pi;
        c.eth_min_inline = min_inline;
        c.signal_every = 0;
        // SAFETY: `mem` outlives the queue and nothing else touches it.
        unsafe { SendQueue::new_typed(mem.raw(), c, shadow, staging) }.expect("send queue")
    }

    fn txq<'a, M: TxMode>(
        mem: &'a Mem,
        lent: &'a mut Lent,
        start_pi: u32,
        cfg: TxConfig,
    ) -> Q<'a, M> {
        let Lent {
            shadow,
            staging,
            ids,
        } = lent;
        TxQueue::new(sq(mem, shadow, staging, start_pi, 0), ids, cfg).expect("tx queue")
    }

    /// A frame whose bytes start with `seed`.
    fn frame(len: usize, seed: u8) -> Vec<u8> {
        (0..len).map(|i| seed.wrapping_add(i as u8)).collect()
    }

    /// One decoded WQE of the ring.
    #[derive(Debug)]
    struct Wqe {
        opcode: u8,
        opmod: u8,
        index: u16,
        ds: usize,
        ce: u8,
        eth: Vec<u8>,
        /// Inline(data) or Ptr(len, lkey, addr).
        descs: Vec<D>,
    }

    #[derive(Debug, PartialEq, Eq)]
    enum D {
        Inline(Vec<u8>),
        Ptr(u32, u32, u64),
    }

    fn wqe_at(ring: &[u8], pi: u32) -> Wqe {
        let n = ring.len();
        let at = |i: usize| ring[((pi as usize) * 64 + i) % n];
        let bytes: Vec<u8> = (0..64).map(at).collect();
        let ds = (bytes[7] & 0x3f) as usize;
        let w: Vec<u8> = (0..ds * 16).map(at).collect();
        let mut descs = Vec::new();
        // Sessions: no inline header; a SEND may carry one (unless bytes
        // 12-15 of its Ethernet segment are a VLAN-insert request).
        let hdr = usize::from(u16::from_be_bytes([w[28], w[29]]));
        let mut pos = if bytes[3] == 0x0a && w[28] & 0x80 == 0 {
            16 + 16 * (1 + hdr.saturating_sub(2).div_ceil(16))
        } else {
            32
        };
        while pos < ds * 16 {
            let bc = u32::from_be_bytes([w[pos], w[pos + 1], w[pos + 2], w[pos + 3]]);
            if bc & 0x8000_0000 != 0 {
                let len = (bc & 0x7fff_ffff) as usize;
                descs.push(D::Inline(w[pos + 4..pos + 4 + len].to_vec()));
                pos += (4 + len).div_ceil(16) * 16;
            } else {
                let lkey = u32::from_be_bytes([w[pos + 4], w[pos + 5], w[pos + 6], w[pos + 7]]);
                let addr = u64::from_be_bytes(w[pos + 8..pos + 16].try_into().expect("8"));
                descs.push(D::Ptr(bc, lkey, addr));
                pos += 16;
            }
        }
        Wqe {
            opcode: bytes[3],
            opmod: bytes[0],
            index: u16::from_be_bytes([bytes[1], bytes[2]]),
            ds,
            ce: (bytes[11] >> 2) & 3,
            eth: bytes[16..32].to_vec(),
            descs,
        }
    }

    /// Every WQE from `from` to the producer.
    fn wqes(mem: &Mem, from: u32, to: u32) -> Vec<Wqe> {
        let ring = mem.ring();
        let mut out = Vec::new();
        let mut pi = from;
        while pi != to {
            let w = wqe_at(&ring, pi);
            pi = pi.wrapping_add(w.ds.div_ceil(4) as u32);
            out.push(w);
        }
        out
    }

    fn closes(s: &TxStats, r: CloseReason) -> u64 {
        s.closes[r as usize]
    }

    #[test]
    fn mixed_inline_and_pointer_in_one_session() {
        let mem = Mem::new(64);
        let mut lent = Lent::new(64);
        let mut q: Q<'_, Empw> = txq(&mem, &mut lent, 0, TxConfig::new());
        let small = frame(60, 1);
        let big = frame(600, 2);
        let mid = frame(200, 3);
        let pkts = [
            Packet::frame(10, LKEY, &small),
            Packet::frame(11, LKEY, &big),
            Packet::ptr(12, LKEY, 0x1000, 100),
            Packet::frame(13, LKEY, &mid),
        ];
        assert_eq!(q.tx_burst(&pkts), 4);
        let w = wqes(&mem, 0, q.send_queue().producer());
        assert_eq!(w.len(), 1);
        let s = &w[0];
        assert_eq!((s.opcode, s.opmod, s.index), (0x29, 0, 0));
        assert_eq!(s.eth, vec![0; 16], "title: no inline header, no offload");
        assert_eq!(
            s.descs,
            vec![
                D::Inline(small.clone()),
                D::Ptr(600, LKEY, big.as_ptr() as u64),
                D::Ptr(100, LKEY, 0x1000),
                D::Inline(mid.clone()),
            ]
        );
        // 2 + ceil(64/16) + 1 + 1 + ceil(204/16)
        assert_eq!(s.ds, 2 + 4 + 1 + 1 + 13);
        assert_eq!(s.ce, 2, "one CQE per session by default");
        assert_eq!(mem.dbrec(), q.send_queue().producer());
        assert_eq!(
            &mem.db()[..8],
            &mem.ring()[..8],
            "doorbell = first 8 bytes of the last WQE"
        );
        assert_eq!(closes(q.stats(), CloseReason::Complete), 1);
    }

    #[test]
    fn each_close_reason() {
        let f64b = frame(64, 7);
        // DS limit: 63-DS sessions of pointer packets hold 61.
        {
            let mem = Mem::new(256);
            let mut lent = Lent::new(256);
            let cfg = TxConfig {
                max_packets: 100,
                inline_max: 0,
                ..TxConfig::new()
            };
            let mut q: Q<'_, Empw> = txq(&mem, &mut lent, 0, cfg);
            let pkts: Vec<_> = (0..62)
                .map(|i| Packet::ptr(i, LKEY, 0x1000 * i, 64))
                .collect();
            assert_eq!(q.tx_burst(&pkts), 62);
            let w = wqes(&mem, 0, q.send_queue().producer());
            assert_eq!(
                w.iter().map(|w| w.descs.len()).collect::<Vec<_>>(),
                vec![61, 1]
            );
            assert_eq!(w[0].ds, 63);
            assert_eq!(closes(q.stats(), CloseReason::DsLimit), 1);
        }
        // WQE size: DPDK's 960-byte sessions of 64-byte inline frames hold 11.
        {
            let mem = Mem::new(256);
            let mut lent = Lent::new(256);
            let mut q: Q<'_, Empw> = txq(&mem, &mut lent, 0, TxConfig::dpdk_empw(268, 290, 32));
            let pkts: Vec<_> = (0..12).map(|i| Packet::frame(i, LKEY, &f64b)).collect();
            assert_eq!(q.tx_burst(&pkts), 12);
            let w = wqes(&mem, 0, q.send_queue().producer());
            assert_eq!(
                w.iter().map(|w| w.descs.len()).collect::<Vec<_>>(),
                vec![11, 1]
            );
            assert_eq!(closes(q.stats(), CloseReason::WqeSize), 1);
        }
        // Maximum packets.
        {
            let mem = Mem::new(256);
            let mut lent = Lent::new(256);
            let cfg = TxConfig {
                inline_max: 0,
                ..TxConfig::new()
            };
            let mut q: Q<'_, Empw> = txq(&mem, &mut lent, 0, cfg);
            let pkts: Vec<_> = (0..33)
                .map(|i| Packet::ptr(i, LKEY, 0x1000 * i, 64))
                .collect();
            assert_eq!(q.tx_burst(&pkts), 33);
            let w = wqes(&mem, 0, q.send_queue().producer());
            assert_eq!(
                w.iter().map(|w| w.descs.len()).collect::<Vec<_>>(),
                vec![32, 1]
            );
            assert_eq!(closes(q.stats(), CloseReason::MaxPackets), 1);
        }
        // Maximum inline bytes.
        {
            let mem = Mem::new(256);
            let mut lent = Lent::new(256);
            let cfg = TxConfig {
                max_inline_bytes: 200,
                ..TxConfig::new()
            };
            let mut q: Q<'_, Empw> = txq(&mem, &mut lent, 0, cfg);
            let pkts: Vec<_> = (0..4).map(|i| Packet::frame(i, LKEY, &f64b)).collect();
            assert_eq!(q.tx_burst(&pkts), 4);
            let w = wqes(&mem, 0, q.send_queue().producer());
            assert_eq!(
                w.iter().map(|w| w.descs.len()).collect::<Vec<_>>(),
                vec![3, 1]
            );
            assert_eq!(closes(q.stats(), CloseReason::MaxInlineBytes), 1);
        }
        // Offload mismatch, then a packet a session cannot carry (two
        // segments), then a VLAN frame too long to inline.
        {
            let mem = Mem::new(256);
            let mut lent = Lent::new(256);
            let mut q: Q<'_, Empw> = txq(&mem, &mut lent, 0, TxConfig::new());
            let more = [Sge::new(LKEY, 0x9000, 30)];
            let big = frame(400, 9);
            let pkts = [
                Packet::frame(0, LKEY, &f64b),
                Packet::frame(1, LKEY, &f64b).with_csum(),
                Packet::frame(2, LKEY, &f64b).with_csum(),
                Packet::frame(3, LKEY, &f64b)
                    .with_csum()
                    .with_segments(&more),
                Packet::frame(4, LKEY, &f64b).with_csum(),
                Packet::frame(5, LKEY, &big).with_csum().with_vlan(0x123),
            ];
            assert_eq!(q.tx_burst(&pkts), 6);
            let w = wqes(&mem, 0, q.send_queue().producer());
            let shape: Vec<_> = w.iter().map(|w| (w.opcode, w.descs.len())).collect();
            assert_eq!(
                shape,
                vec![(0x29, 1), (0x29, 2), (0x0a, 2), (0x29, 1), (0x0a, 1)]
            );
            assert_eq!(w[0].eth[4], 0);
            assert_eq!(w[1].eth[4], 0xc0, "checksum flags in the title");
            // The VLAN frame: a SEND with the VLAN-insert request.
            assert_eq!(&w[4].eth[12..16], &[0x80, 0x00, 0x01, 0x23]);
            let s = q.stats();
            assert_eq!(closes(s, CloseReason::OffloadMismatch), 1);
            assert_eq!(closes(s, CloseReason::Unsupported), 2);
            assert_eq!(s.single_wqes, 2);
        }
        // A VLAN frame short enough is inlined with its tag, in the session.
        {
            let mem = Mem::new(64);
            let mut lent = Lent::new(64);
            let mut q: Q<'_, Empw> = txq(&mem, &mut lent, 0, TxConfig::new());
            let pkts = [
                Packet::frame(0, LKEY, &f64b),
                Packet::frame(1, LKEY, &f64b).with_vlan(0x0abc),
            ];
            assert_eq!(q.tx_burst(&pkts), 2);
            let w = wqes(&mem, 0, q.send_queue().producer());
            assert_eq!(w.len(), 1);
            let mut tagged = f64b[..12].to_vec();
            tagged.extend_from_slice(&[0x81, 0x00, 0x0a, 0xbc]);
            tagged.extend_from_slice(&f64b[12..]);
            assert_eq!(w[0].descs[1], D::Inline(tagged));
        }
    }

    #[test]
    fn ring_wrap_inside_a_session() {
        let mem = Mem::new(64);
        let mut lent = Lent::new(64);
        let mut q: Q<'_, Empw> = txq(&mem, &mut lent, 62, TxConfig::new());
        let a = frame(100, 0x10);
        let b = frame(150, 0x20);
        let pkts = [
            Packet::frame(1, LKEY, &a),
            Packet::ptr(2, LKEY, 0x4000, 1500),
            Packet::frame(3, LKEY, &b),
        ];
        assert_eq!(q.tx_burst(&pkts), 3);
        let end = q.send_queue().producer();
        let w = wqes(&mem, 62, end);
        assert_eq!(w.len(), 1);
        assert!(end > 64, "the session crosses the ring end");
        assert_eq!(w[0].index, 62);
        assert_eq!(
            w[0].descs,
            vec![D::Inline(a), D::Ptr(1500, LKEY, 0x4000), D::Inline(b)]
        );
        assert_eq!(mem.dbrec(), end & 0xffff);
        // The completion names the session: every packet comes back.
        let mut got = Vec::new();
        assert_eq!(q.retire(62, |id| got.push(id)), Ok(3));
        assert_eq!(got, vec![1, 2, 3]);
        assert_eq!(q.send_queue().consumer(), end);
    }

    #[test]
    fn checksum_flags_and_metadata_are_shared() {
        let mem = Mem::new(64);
        let mut lent = Lent::new(64);
        let mut q: Q<'_, Empw> = txq(&mem, &mut lent, 0, TxConfig::new());
        let f = frame(80, 3);
        let off = TxOffload {
            cs_flags: EthCsFlags::new().with_l3_csum(true).with_l4_csum(true),
            swp_offsets: [1, 2, 3, 4],
            swp_flags: SwpFlags::new().with_outer_l4_udp(true),
            metadata: 0xdead_beef,
        };
        let pkts: Vec<_> = (0..3)
            .map(|i| Packet::frame(i, LKEY, &f).with_offload(off))
            .collect();
        assert_eq!(q.tx_burst(&pkts), 3);
        let w = wqes(&mem, 0, q.send_queue().producer());
        assert_eq!(w.len(), 1);
        assert_eq!(
            w[0].eth,
            vec![1, 2, 3, 4, 0xc0, 0x20, 0, 0, 0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 0]
        );
    }

    #[test]
    fn legacy_mpw_equal_lengths() {
        let mem = Mem::new(64);
        let mut lent = Lent::new(64);
        let mut q: Q<'_, LegacyMpw> = txq(&mem, &mut lent, 0, TxConfig::dpdk_mpw(268, 290, 32));
        let a: Vec<Vec<u8>> = (0..7).map(|i| frame(64, i * 16)).collect();
        let c = frame(100, 0x77);
        let mut pkts: Vec<_> = a
            .iter()
            .enumerate()
            .map(|(i, f)| Packet::frame(i as u64, LKEY, f))
            .collect();
        pkts.push(Packet::frame(7, LKEY, &c));
        pkts.push(Packet::ptr(8, LKEY, 0x5000, 100));
        pkts.push(Packet::ptr(9, LKEY, 0x6000, 100));
        assert_eq!(q.tx_burst(&pkts), 10);
        let w = wqes(&mem, 0, q.send_queue().producer());
        let shape: Vec<_> = w
            .iter()
            .map(|w| (w.opcode, w.opmod, w.eth[6], w.eth[7], w.descs.len()))
            .collect();
        // 4 x 64 B inline (268-byte inline room), 3 x 64 B, 1 x 100 B
        // inline, then a pointer session of the two 100-byte pointers.
        assert_eq!(
            shape,
            vec![
                (0x0e, 1, 0, 64, 1),
                (0x0e, 1, 0, 64, 1),
                (0x0e, 1, 0, 100, 1),
                (0x0e, 1, 0, 100, 2)
            ]
        );
        assert_eq!(w[0].descs, vec![D::Inline(a[..4].concat())]);
        assert_eq!(w[0].ds, 2 + 17);
        assert_eq!(w[1].descs, vec![D::Inline(a[4..].concat())]);
        assert_eq!(
            w[3].descs,
            vec![D::Ptr(100, LKEY, 0x5000), D::Ptr(100, LKEY, 0x6000)]
        );
        let s = q.stats();
        assert_eq!(closes(s, CloseReason::MaxInlineBytes), 1);
        assert_eq!(closes(s, CloseReason::LengthMismatch), 1);
        assert_eq!(closes(s, CloseReason::DescriptorKind), 1);
        // At most six packets per session.
        let pkts: Vec<_> = (0..7)
            .map(|i| Packet::ptr(i, LKEY, 0x1000 * i, 64))
            .collect();
        let from = q.send_queue().producer();
        assert_eq!(q.tx_burst(&pkts), 7);
        let w = wqes(&mem, from, q.send_queue().producer());
        assert_eq!(
            w.iter().map(|w| w.descs.len()).collect::<Vec<_>>(),
            vec![6, 1]
        );
        assert_eq!(closes(q.stats(), CloseReason::MaxPackets), 1);
    }

    #[test]
    fn fallback_without_capabilities() {
        assert_eq!(TxKind::from_caps(true, true), TxKind::Empw);
        assert_eq!(TxKind::from_caps(false, true), TxKind::LegacyMpw);
        assert_eq!(TxKind::from_caps(false, false), TxKind::Single);
        let mem = Mem::new(64);
        let mut lent = Lent::new(64);
        let Lent {
            shadow,
            staging,
            ids,
        } = &mut lent;
        let sq = sq(&mem, shadow, staging, 0, 18);
        let mut q = AnyTxQueue::from_caps(sq, ids, TxConfig::new(), false, false).expect("tx");
        assert_eq!(q.kind(), TxKind::Single);
        let f = frame(64, 5);
        let pkts = [
            Packet::frame(1, LKEY, &f),
            Packet::frame(2, LKEY, &f).with_csum(),
            Packet::ptr(3, LKEY, 0x1000, 64),
        ];
        // The pointer-only packet needs its L2 header inlined: refused.
        assert_eq!(q.tx_burst(&pkts), 2);
        let AnyTxQueue::Single(inner) = &q else {
            panic!("single")
        };
        let w = wqes(&mem, 0, inner.send_queue().producer());
        assert_eq!(w.len(), 2);
        for (i, w) in w.iter().enumerate() {
            assert_eq!((w.opcode, w.ds), (0x0a, 4));
            assert_eq!(&w.eth[12..14], &[0, 18], "18-byte inline L2 header");
            assert_eq!(&w.eth[14..16], &f[..2]);
            assert_eq!(w.descs, vec![D::Ptr(46, LKEY, f.as_ptr() as u64 + 18)]);
            assert_eq!(w.eth[4], if i == 1 { 0xc0 } else { 0 });
        }
        let mut got = Vec::new();
        assert_eq!(q.retire(1, |id| got.push(id)), Ok(2));
        assert_eq!(got, vec![1, 2]);
        assert_eq!(q.stats().sessions, 0);
    }

    #[test]
    fn cqe_every_n_sessions_and_burst_end() {
        let mem = Mem::new(256);
        let mut lent = Lent::new(256);
        let cfg = TxConfig {
            max_packets: 2,
            cqe: CqePolicy::EverySessions(3),
            ..TxConfig::new()
        };
        let mut q: Q<'_, Empw> = txq(&mem, &mut lent, 0, cfg);
        let f = frame(64, 1);
        let pkts: Vec<_> = (0..12).map(|i| Packet::frame(i, LKEY, &f)).collect();
        assert_eq!(q.tx_burst(&pkts), 12);
        let w = wqes(&mem, 0, q.send_queue().producer());
        assert_eq!(
            w.iter().map(|w| w.ce).collect::<Vec<_>>(),
            vec![0, 0, 2, 0, 0, 2]
        );
        // A CQE for the third session retires six packets; a stale counter
        // or one in the middle of a WQE is refused.
        let mut got = Vec::new();
        assert_eq!(q.retire(w[2].index, |id| got.push(id)), Ok(6));
        assert_eq!(got, (0..6).collect::<Vec<_>>());
        assert!(q.retire(w[2].index, |_| {}).is_err());
        assert!(q.retire(w[3].index + 1, |_| {}).is_err());
        assert_eq!(q.packets_in_flight(), 6);

        // DPDK's rule: the burst's last WQE, once 32 pointer packets went by.
        let mem = Mem::new(256);
        let mut lent = Lent::new(256);
        let mut q: Q<'_, Empw> = txq(&mem, &mut lent, 0, TxConfig::dpdk_empw(0, 0, 0));
        let pkts: Vec<_> = (0..20)
            .map(|i| Packet::ptr(i, LKEY, 0x100 * i, 64))
            .collect();
        assert_eq!(q.tx_burst(&pkts), 20);
        assert_eq!(q.tx_burst(&pkts), 20);
        let w = wqes(&mem, 0, q.send_queue().producer());
        assert_eq!(w.iter().map(|w| w.ce).collect::<Vec<_>>(), vec![1, 2]);
        let mut n = 0;
        assert_eq!(q.retire(w[1].index, |_| n += 1), Ok(40));
    }

    #[test]
    fn queue_full_stops_the_burst_and_one_doorbell_per_burst() {
        let mem = Mem::new(8);
        let mut lent = Lent::new(8);
        let cfg = TxConfig {
            inline_max: 0,
            ..TxConfig::new()
        };
        let mut q: Q<'_, Empw> = txq(&mem, &mut lent, 0, cfg);
        // 8 WQEBBs = 32 DS: 30 pointer packets in one session, then full.
        let pkts: Vec<_> = (0..40)
            .map(|i| Packet::ptr(i, LKEY, 0x100 * i, 64))
            .collect();
        assert_eq!(q.tx_burst(&pkts), 30);
        assert_eq!(q.send_queue().producer(), 8);
        assert_eq!(mem.dbrec(), 8);
        assert_eq!(q.tx_burst(&pkts), 0, "nothing fits until a CQE is retired");
        let mut n = 0;
        assert_eq!(q.retire(0, |_| n += 1), Ok(30));
        assert_eq!(q.tx_burst(&pkts[..3]), 3);
        assert_eq!(mem.dbrec(), 10, "2 + 3 DS: two WQEBBs");
        {
            // A batch never completed publishes nothing.
            let mut b = q.start();
            assert_eq!(
                b.push(&Packet::ptr(0, LKEY, 0, 10)),
                Err(TxError::BadLength)
            );
            assert_eq!(b.push(&Packet::ptr(1, LKEY, 0, 100)), Ok(()));
        }
        assert_eq!(mem.dbrec(), 10, "an abandoned batch rings nothing");
    }
}
