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
//! the [`DoorbellPolicy`]) and the per-WQEBB shadow are the send queue's
//! own, so this module adds no `unsafe` and no second copy of the doorbell
//! code. It is a child module of `sq` for that reason only: it reads the
//! send queue's private parts (ring, counters, shadow, doorbell) and uses
//! the send queue's completion checks ([`SendQueue::retire`]); it does not
//! change `sq`'s own posting API. The staging area is the Tx queue's own:
//! one largest WQE plus the slack that lets the burst path write
//! fixed-size pieces without a bounds test.
//!
//! # Sessions
//!
//! An eMPW session is one WQE: a title (control segment, opcode
//! `ENHANCED_MPSW`; an [`EthSeg`] without inline header carrying the
//! checksum flags, software-parser offsets and metadata every packet of the
//! session shares), then one descriptor per packet: a pointer [`DataSeg`],
//! or an inline segment (length with the inline bit, the frame, taking
//! whole 16-byte units) for frames up to [`TxConfig::inline_max`]. The two
//! mix freely.
//! A legacy MPW session (opcode TSO, opmod
//! [`OPC_MOD_MPW`](crate::prm::OPC_MOD_MPW)) carries packets
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
//! A session writes no padding (DPDK's `mlx5_tx_dseg_empw` and libmlx5's
//! `set_data_inl_seg` write none either): the bytes of an inline segment
//! past its byte count up to its last 16-byte unit, and those past the DS
//! count in the session's last WQEBB, keep what the ring held before (the
//! device reads DS × 16 bytes of a WQE, and of an inline segment its byte
//! count), whether the session is built in the ring or in the staging area
//! (which then starts as a copy of the session's WQEBBs in the ring). A
//! single-packet WQE (SEND, TSO) keeps its own format: every byte of its
//! WQEBBs written, padding and tail as zero.
//!
//! The mode is a compile-time marker ([`Empw`], [`LegacyMpw`], [`SingleWqe`]);
//! [`TxKind::from_caps`] and [`AnyTxQueue`] choose it once at construction
//! from the device capabilities. No packet tests a mode flag.
//!
//! # Completions
//!
//! Each WQE has one shadow entry, in the slot of its first WQEBB (as in
//! rdma-core and DPDK: a CQE's `wqe_counter` names a WQE's first WQEBB);
//! the slots of its other WQEBBs are not written and may hold what an
//! earlier ring pass left there. The entry holds the packet counter at the
//! WQE's end and a tag that gives back the full 32-bit counter it was
//! written for (`tx_wr_id`). A requester CQE names a WQE
//! ([`TxQueue::retire`]): the send queue checks the counter against the
//! shadow (in flight, WQE index, size), the tag tells a stale entry from a
//! WQE start in flight, and every packet up to the entry's counter is
//! returned by its id, oldest first; a refused counter changes nothing.
//! Which WQEs ask for a CQE is the [`CqePolicy`]: one per `n` sessions, or
//! DPDK's rule (on the last WQE of a burst once enough packets or WQEBBs
//! went unsignalled). Either way a CQE is forced once half the ring or half
//! the id ring is unsignalled, so the queue always drains: on the WQE that
//! reaches it (one per `n` sessions), or, with DPDK's rule, on the batch's
//! last WQE (DPDK requests no CQE inside a burst: a burst that posts more
//! than half the ring gets one CQE, at its end).
//!
//! # Ring writes and aborts
//!
//! A session is built in the queue's own staging area ([`TxQueue`] holds
//! one largest WQE plus some slack) and copied into the ring (wrapping at
//! its end) when it closes, past the producer index; the burst path builds
//! a session that does not cross the ring end straight into its reserved
//! WQEBBs instead ([`crate::ring::WqebbRing::window`]); only
//! [`TxBatch::complete`] moves the producer index and rings the doorbell
//! (one doorbell record write and one register write per burst). Dropping a
//! batch unpublished discards its packets: ring bytes past the producer
//! index may have changed, which the device never reads.
//!
//! # The burst path
//!
//! [`TxQueue::tx_burst`] ([`TxBatch::push_burst`]) builds the WQEs that
//! [`TxBatch::push`] builds packet by packet, with the common case in a
//! tight loop (`burst.rs`): on an eMPW queue, packets with one segment and
//! the session's offload values are appended with one test per limit and
//! fixed-size copies, sessions built in the ring and closed and reopened
//! inside the loop (a run of 64-byte inline frames, or of pointers on a
//! queue that never inlines, with no session open: one loop that opens,
//! fills and closes its sessions, the burst's last one too under
//! `tx_burst`); on a
//! one-WQE-per-packet queue, each plain frame's SEND WQE is built as eight
//! words straight into the ring. Every other packet takes `push`. Both
//! paths write the same bytes (`tests::burst_path_matches_push`).
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
    InlineByteCount, SwpFlags, VlanInsert, ETH_L2_INLINE_HEADER_SIZE, ETH_L2_MIN_HEADER_SIZE,
    MAX_DS, SEND_WQE_BB, SEND_WQE_DS,
};

mod burst;
#[cfg(all(target_arch = "x86_64", target_feature = "sse2", not(loom)))]
mod burst_avx2;

/// Byte offset of `fm_ce_se` in the control segment.
const CTRL_FM_CE_SE: usize = 11;

/// WQEBBs of a queue's staging area: one largest WQE (63 DS, 1008 bytes)
/// plus the slack the fixed-size writes need (a write of up to 96 bytes at
/// any offset below 1024, [`STAGE_MASK`]).
const STAGE_BBS: usize = 18;
/// Bytes of the staging area.
const STAGE_BYTES: usize = STAGE_BBS * SEND_WQE_BB;
/// Offsets into the staging area are ANDed with this (a no-op: every WQE
/// ends by byte 1008) so that a fixed-size write of up to
/// `STAGE_BYTES - STAGE_MASK - 1` bytes needs no bounds test.
const STAGE_MASK: usize = 1023;
const _: () = assert!(MAX_DS as usize * SEND_WQE_DS <= STAGE_MASK + 1);
const _: () = assert!(STAGE_MASK + 1 + 96 <= STAGE_BYTES);

/// The staging area: the WQE being built (a session, or a single-packet
/// WQE) starts at byte 0.
#[repr(C, align(64))]
struct Stage([u8; STAGE_BYTES]);

impl core::fmt::Debug for Stage {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("Stage")
    }
}

/// Positions of the control-segment fields the session close writes,
/// read from the `prm` declarations at compile time (the generated
/// accessors are not `#[inline]`, and this code is compiled in the crate
/// that posts).
mod ctrl_bits {
    use crate::prm::{FmCeSe, OpmodIdxOpcode, QpnDs, SendOpcode, OPC_MOD_MPW};

    /// Position of `wqe_index` in `opmod_idx_opcode` (host order).
    pub(super) const WQE_INDEX_SHIFT: u32 = OpmodIdxOpcode::new()
        .with_wqe_index(1)
        .into_bits()
        .get()
        .trailing_zeros();
    /// Position of `ds` in `qpn_ds` (host order).
    pub(super) const DS_SHIFT: u32 = QpnDs::new().with_ds(1).into_bits().get().trailing_zeros();
    /// Position of `ce` in `fm_ce_se`.
    pub(super) const CE_SHIFT: u32 = FmCeSe::new().with_ce(1).into_bits().trailing_zeros();
    /// `opmod_idx_opcode` of an eMPW session with WQE index 0.
    pub(super) const EMPW: u32 = OpmodIdxOpcode::new()
        .with_opcode(SendOpcode::EnhancedMpsw.raw())
        .into_bits()
        .get();
    /// `opmod_idx_opcode` of a legacy MPW session with WQE index 0.
    pub(super) const MPW: u32 = OpmodIdxOpcode::new()
        .with_opcode(SendOpcode::Tso.raw())
        .with_opmod(OPC_MOD_MPW)
        .into_bits()
        .get();
    /// `opmod_idx_opcode` of a SEND with WQE index 0.
    pub(super) const SEND: u32 = OpmodIdxOpcode::new()
        .with_opcode(SendOpcode::Send.raw())
        .into_bits()
        .get();
    /// `opmod_idx_opcode` of a TSO WQE with WQE index 0.
    pub(super) const TSO: u32 = OpmodIdxOpcode::new()
        .with_opcode(SendOpcode::Tso.raw())
        .into_bits()
        .get();
}

/// The inline bit of an inline segment header (host order).
const INLINE_BIT: u32 = InlineByteCount::new().with_inline(true).into_bits().get();
const _: () = assert!(
    InlineByteCount::new().with_byte_count(1).into_bits().get() == 1,
    "the byte count is the low bits"
);

/// The 4-byte header of an inline segment of `n` bytes (`n < 2^31`).
#[inline(always)]
fn inline_header(n: u32) -> [u8; 4] {
    (n | INLINE_BIT).to_be_bytes()
}

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
    /// `packets` packets DPDK keeps until a completion (its `elts`: on a
    /// queue that inlines, every packet of a burst from its first one sent
    /// by pointer on; the leading inlined ones it frees at once) or at
    /// least `wqebbs` WQEBBs (0: not counted) were posted. No WQE inside a
    /// batch requests one (the drain guarantee applies at the batch's end).
    BurstEnd {
        /// Packets kept (DPDK `MLX5_TX_COMP_THRESH` = 32).
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
///
/// `repr(C)`, metadata and parser offsets first: the burst path compares a
/// packet's values with the session's as one 8-byte and one 2-byte word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub struct TxOffload {
    /// Tx metadata for steering.
    pub metadata: u32,
    /// Software-parser offsets in 2-byte units: outer L4, outer L3, inner
    /// L4, inner L3 (Ethernet segment bytes 0–3).
    pub swp_offsets: [u8; 4],
    /// Checksum offload flags.
    pub cs_flags: EthCsFlags,
    /// Software-parser header kinds.
    pub swp_flags: SwpFlags,
}

impl TxOffload {
    /// The values as two words (equal words, equal values): metadata and
    /// parser offsets, the two flag bytes. With the `repr(C)` layout each
    /// is one load.
    #[inline(always)]
    pub(super) const fn words(&self) -> (u64, u16) {
        let lo = self.metadata as u64 | ((u32::from_le_bytes(self.swp_offsets) as u64) << 32);
        let hi = u16::from_le_bytes([self.cs_flags.into_bits(), self.swp_flags.into_bits()]);
        (lo, hi)
    }

    /// The values whose [`TxOffload::words`] are `lo` and `hi`.
    #[inline(always)]
    const fn from_words(lo: u64, hi: u16) -> Self {
        let [cs, swp] = hi.to_le_bytes();
        Self {
            metadata: lo as u32,
            swp_offsets: ((lo >> 32) as u32).to_le_bytes(),
            cs_flags: EthCsFlags::from_bits(cs),
            swp_flags: SwpFlags::from_bits(swp),
        }
    }

    /// No offload.
    pub const NONE: Self = Self {
        cs_flags: EthCsFlags::new(),
        swp_offsets: [0; 4],
        swp_flags: SwpFlags::new(),
        metadata: 0,
    };

    /// With L3 and L4 checksum offload.
    pub const fn with_csum(mut self) -> Self {
        self.cs_flags = self.cs_flags.with_l3_csum(true).with_l4_csum(true);
        self
    }
}

impl Default for TxOffload {
    fn default() -> Self {
        Self::NONE
    }
}

/// One packet of a burst.
///
/// Built with [`Packet::frame`], [`Packet::ptr`] or [`Packet::from_buf`]
/// and the `with_*` builders, read through its accessors. Besides its
/// values it keeps a 16-byte summary, its head, which every constructor
/// and builder keeps up to date (nothing else can write it): the offload
/// values as two words, the shape (bytes at hand or not, further
/// segments, TSO, VLAN insertion) and the first segment's length. The
/// burst path's shape test (is this a plain one-segment frame with the
/// session's offload values?) is then one comparison of the head with a
/// key, not a test per field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub struct Packet<'d> {
    /// The summary (first, 16-byte aligned: two aligned 8-byte words).
    /// Always `Head::of` the other fields (every constructor and builder
    /// ends with [`Packet::fixed`], but `TxFrame::packet`, which builds
    /// a plain frame's head itself; nothing else writes a field):
    /// `burst_avx2`'s vector compare reads a frame's 64 bytes on the
    /// head's word, without a test of `data`'s length.
    head: Head,
    /// The frame's bytes (`PacketBuf::Frame`); empty for a pointer.
    data: &'d [u8],
    /// Device address of the (first) segment.
    addr: u64,
    /// Returned by [`TxQueue::retire`] once the device is done with it.
    id: u64,
    /// Further segments (a multi-segment packet never joins a session).
    more: &'d [Sge],
    /// Local key of the (first) segment.
    lkey: u32,
    /// TSO: the MSS (0: no TSO).
    tso_mss: u16,
    /// TSO: bytes of L2–L4 header at the start of the frame.
    tso_hdr_len: u16,
    /// Insert this VLAN tag (TCI).
    vlan_tci: Option<u16>,
}

/// A [`Packet`]'s summary, one 16-byte word (compared with a key as one
/// value: on x86-64, one 16-byte vector compare): its low half ([`Head::lo`])
/// the offload values' first word (metadata and parser offsets,
/// [`TxOffload::words`]); its high half ([`Head::hi`]) their second word
/// (the two flag bytes) in bits 0..16, the shape ([`Head::PTR`] …) in
/// bits 16..32 (0: a plain one-segment frame, bytes at hand, no TSO, no
/// VLAN insertion) and the first segment's length (saturated) in bits
/// 32..64.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C, align(16))]
pub(super) struct Head {
    /// `lo | hi << 64`.
    pub(super) w: u128,
}

impl Head {
    /// Shape: the bytes are not at hand ([`PacketBuf::Ptr`]).
    pub(super) const PTR: u64 = 1 << 16;
    /// Shape: further segments.
    pub(super) const MORE: u64 = 2 << 16;
    /// Shape: TSO.
    pub(super) const TSO: u64 = 4 << 16;
    /// Shape: VLAN insertion.
    pub(super) const VLAN: u64 = 8 << 16;
    /// The shape bits but [`Head::PTR`] (any of them: not a common
    /// packet of a session).
    pub(super) const ODD: u64 = Self::MORE | Self::TSO | Self::VLAN;

    /// The head of halves `lo` and `hi`.
    #[inline(always)]
    pub(super) const fn new(lo: u64, hi: u64) -> Self {
        Self {
            w: lo as u128 | (hi as u128) << 64,
        }
    }

    /// The low half: metadata | parser offsets << 32.
    #[inline(always)]
    pub(super) const fn lo(&self) -> u64 {
        self.w as u64
    }

    /// The high half: flags | shape << 16 | length << 32.
    #[inline(always)]
    pub(super) const fn hi(&self) -> u64 {
        (self.w >> 64) as u64
    }

    /// The head of a common plain frame (shape 0) of `len` bytes in a
    /// session of offload words `key`.
    #[inline(always)]
    pub(super) const fn key(key: (u64, u16), len: u32) -> u128 {
        Self::new(key.0, key.1 as u64 | (len as u64) << 32).w
    }

    /// The head of a packet of these values.
    const fn of(p: &Packet<'_>) -> Self {
        let (lo, flags) = p.offload_words();
        let hi0 = p.head.hi();
        let len = if hi0 & Self::PTR != 0 {
            hi0 >> 32
        } else if p.data.len() as u64 > u32::MAX as u64 {
            u32::MAX as u64
        } else {
            p.data.len() as u64
        };
        let shape = (hi0 & Self::PTR)
            | if p.more.is_empty() { 0 } else { Self::MORE }
            | if p.tso_mss != 0 { Self::TSO } else { 0 }
            | if p.vlan_tci.is_some() { Self::VLAN } else { 0 };
        Self::new(lo, flags as u64 | shape | len << 32)
    }

    /// The key of a common packet of a session of offload words `key`
    /// whose shape bits are `shape` (the length aside): what the low
    /// 32 bits of `hi` are then.
    #[inline(always)]
    pub(super) const fn key32(key: (u64, u16), shape: u64) -> u32 {
        key.1 as u32 | shape as u32
    }
}

// The layout the head needs: first in the packet, 16-byte aligned, two
// 8-byte words (the burst path compares them with a key; a layout that
// broke this would cost instructions, not correctness).
const _: () = {
    use core::mem::{align_of, offset_of, size_of};
    assert!(offset_of!(Packet<'_>, head) == 0);
    assert!(size_of::<Head>() == 16 && align_of::<Head>() == 16);
    assert!(offset_of!(Head, w) == 0);
    #[cfg(target_pointer_width = "64")]
    assert!(size_of::<Packet<'_>>() == 80);
};

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
        let (data, addr, lkey, hi): (&'d [u8], u64, u32, u64) = match buf {
            PacketBuf::Frame(f) => (f.data, f.addr, f.lkey, 0),
            PacketBuf::Ptr(s) => (&[], s.addr, s.lkey, Head::PTR | (s.length as u64) << 32),
        };
        Self {
            head: Head::new(0, hi),
            data,
            addr,
            id,
            more: &[],
            lkey,
            tso_mss: 0,
            tso_hdr_len: 0,
            vlan_tci: None,
        }
        .fixed()
    }

    /// With its head computed again from its values (every builder ends
    /// with it).
    const fn fixed(mut self) -> Self {
        self.head = Head::of(&self);
        self
    }

    /// With these offload values.
    pub const fn with_offload(mut self, offload: TxOffload) -> Self {
        let (lo, flags) = offload.words();
        self.head = Head::new(lo, (self.head.hi() & !0xffff) | flags as u64);
        self.fixed()
    }

    /// With L3 and L4 checksum offload.
    pub const fn with_csum(self) -> Self {
        let o = self.offload().with_csum();
        self.with_offload(o)
    }

    /// With further segments.
    pub const fn with_segments(mut self, more: &'d [Sge]) -> Self {
        self.more = more;
        self.fixed()
    }

    /// With VLAN insertion of the tag (TCI) `tci`.
    pub const fn with_vlan(mut self, tci: u16) -> Self {
        self.vlan_tci = Some(tci);
        self.fixed()
    }

    /// With TSO: segments of `mss` bytes of payload, after `hdr_len`
    /// bytes of L2–L4 header at the start of the frame (an `mss` of 0:
    /// no TSO).
    pub const fn with_tso(mut self, mss: u16, hdr_len: u16) -> Self {
        self.tso_mss = mss;
        self.tso_hdr_len = hdr_len;
        self.fixed()
    }

    /// The frame, or its first segment.
    #[inline(always)]
    pub const fn buf(&self) -> PacketBuf<'d> {
        if self.head.hi() & Head::PTR != 0 {
            PacketBuf::Ptr(Sge::new(
                self.lkey,
                self.addr,
                (self.head.hi() >> 32) as u32,
            ))
        } else {
            PacketBuf::Frame(FrameSge::with_addr(self.lkey, self.addr, self.data))
        }
    }

    /// Further segments (empty for a one-segment packet).
    pub const fn more(&self) -> &'d [Sge] {
        self.more
    }

    /// The id [`TxQueue::retire`] returns once the device is done with it.
    pub const fn id(&self) -> u64 {
        self.id
    }

    /// Checksum, software-parser and metadata values.
    #[inline(always)]
    pub const fn offload(&self) -> TxOffload {
        let (lo, hi) = self.offload_words();
        TxOffload::from_words(lo, hi)
    }

    /// The offload values as [`TxOffload::words`] gives them.
    #[inline(always)]
    const fn offload_words(&self) -> (u64, u16) {
        (self.head.lo(), self.head.hi() as u16)
    }

    /// TSO: the MSS (0: no TSO).
    pub const fn tso_mss(&self) -> u16 {
        self.tso_mss
    }

    /// TSO: bytes of L2–L4 header at the start of the frame (as
    /// [`Packet::with_tso`] gave it).
    pub const fn tso_hdr_len(&self) -> u16 {
        self.tso_hdr_len
    }

    /// The VLAN tag (TCI) to insert, if any.
    pub const fn vlan_tci(&self) -> Option<u16> {
        self.vlan_tci
    }

    /// The head (the burst path's shape test).
    #[inline(always)]
    pub(super) const fn head(&self) -> &Head {
        &self.head
    }

    /// Frame length in bytes (all segments), before VLAN insertion.
    pub fn len(&self) -> u64 {
        let first = match self.buf() {
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
        if self.head.hi() & Head::PTR != 0 {
            None
        } else {
            Some(self.data)
        }
    }

    fn first_sge(&self) -> Sge {
        match self.buf() {
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
    /// The frame is too short (empty; on a queue that inlines, or one WQE
    /// per packet, at most 18 bytes: DPDK's inline routines refuse those,
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

/// A plain frame of a burst: one segment, no TSO, no VLAN insertion, the
/// burst's offload values ([`TxQueue::tx_frames`]). What a poll-mode
/// application with no per-packet offload sends; the burst path has only
/// its length to test (DPDK picks its Tx routine by the offloads a queue
/// enables; here the type says it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxFrame<'d> {
    /// Returned by [`TxQueue::retire`] once the device is done with it.
    pub id: u64,
    /// The frame.
    pub sge: FrameSge<'d>,
}

impl<'d> TxFrame<'d> {
    /// A frame at its own address in the region of `lkey`.
    pub fn new(id: u64, lkey: u32, data: &'d [u8]) -> Self {
        Self {
            id,
            sge: FrameSge::new(lkey, data),
        }
    }

    /// The [`Packet`] it stands for in a burst of offload values
    /// `offload`.
    pub const fn packet(&self, offload: &TxOffload) -> Packet<'d> {
        // (Its head made once, not by each builder: `from_buf` and
        // `with_offload` in one.)
        let (lo, flags) = offload.words();
        let len = if self.sge.data.len() as u64 > u32::MAX as u64 {
            u32::MAX as u64
        } else {
            self.sge.data.len() as u64
        };
        Packet {
            head: Head::new(lo, flags as u64 | len << 32),
            data: self.sge.data,
            addr: self.sge.addr,
            id: self.id,
            more: &[],
            lkey: self.sge.lkey,
            tso_mss: 0,
            tso_hdr_len: 0,
            vlan_tci: None,
        }
    }
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
    /// packets (committed under [`CqePolicy::BurstEnd`]: the packets DPDK
    /// keeps, `TxQueue::commit`), all packets.
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
    /// The longest frame a session inlines ([`inline_limit`]).
    inline_lim: u32,
    /// The signalling constants (borrowed by the burst path, not copied).
    sig: Signal,
    /// The burst path's constants of a session with the whole room, per
    /// kind of run, from `cfg` (`burst::FreshRuns`).
    fresh: burst::FreshRuns,
    /// The AVX2 proof, if [`TxQueue::tx_frames`] takes a burst of
    /// 64-byte frames in one function (`TxQueue::frames64_of`, set with
    /// the proof).
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2", not(loom)))]
    frames64: Option<crate::cpu::Avx2>,
    /// The WQE being built.
    stage: Stage,
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
        let half_ring = sq.size.entries() / 2;
        let half_ids = (ids.len() / 2) as u32;
        let q = Self {
            sq,
            ids,
            tail: 0,
            done,
            cfg,
            stats: TxStats::default(),
            inline_lim: inline_limit(&cfg),
            sig: Signal::of(cfg.cqe, cfg.unsignaled_ce, half_ring, half_ids),
            fresh: burst::FreshRuns::of(&cfg, max_packets_of(M::KIND, &cfg)),
            #[cfg(all(target_arch = "x86_64", target_feature = "sse2", not(loom)))]
            frames64: None,
            stage: Stage([0; STAGE_BYTES]),
            _mode: PhantomData,
        };
        #[cfg(all(target_arch = "x86_64", target_feature = "sse2", not(loom)))]
        let q = Self {
            frames64: q.frames64_of(q.sq.avx2()),
            ..q
        };
        Ok(q)
    }

    /// The path of this queue.
    pub const fn kind(&self) -> TxKind {
        M::KIND
    }

    /// The underlying send queue (counters, shadow).
    pub fn send_queue(&self) -> &SendQueue<'a, P, Q> {
        &self.sq
    }

    /// Lets [`TxQueue::tx_burst`] copy inline frames with AVX2 (`Some`), or
    /// not (`None`): the send queue's proof ([`SendQueue::set_avx2`], which
    /// its list posts use too). The bytes are the same either way. A queue
    /// starts with AVX2 when the crate was compiled with it
    /// ([`Avx2::compile_time`](crate::cpu::Avx2::compile_time));
    /// with `std`, a caller turns it on after
    /// `is_x86_feature_detected!("avx2")`.
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2", not(loom)))]
    pub fn set_avx2(&mut self, avx2: Option<crate::cpu::Avx2>) {
        self.sq.set_avx2(avx2);
        self.frames64 = self.frames64_of(avx2);
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
        self.sig = Signal::of(
            cqe,
            self.cfg.unsignaled_ce,
            self.sq.size.entries() / 2,
            (self.ids.len() / 2) as u32,
        );
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
            last_ds: 0,
        }
    }

    /// Queues as many of `pkts` as fit, in order, with one doorbell;
    /// returns how many were queued (DPDK `rte_eth_tx_burst`).
    pub fn tx_burst(&mut self, pkts: &[Packet<'_>]) -> usize {
        // With the AVX2 proof, on an eMPW queue that inlines 64-byte
        // frames, in one function, as `tx_frames` takes frames
        // (`burst_avx2::tx_packets64`).
        #[cfg(all(target_arch = "x86_64", target_feature = "sse2", not(loom)))]
        if let Some(t) = self.frames64.filter(|_| M::KIND == TxKind::Empw) {
            return burst_avx2::tx_packets64(t, self, pkts);
        }
        let mut b = self.start();
        let n = b.push_burst_as::<true>(pkts);
        b.publish();
        n
    }

    /// Whether the queue refuses frames of at most 18 bytes
    /// ([`TxError::BadLength`]): one that inlines (DPDK's inline eMPW / MPW
    /// routine, `mlx5_tx_burst_empw_inline`, refuses a frame of at most
    /// `MLX5_ESEG_MIN_INLINE_SIZE` bytes, pointer or not), or one WQE per
    /// packet. A multi-packet queue that never inlines takes any non-empty
    /// frame, by pointer (`mlx5_tx_burst_empw_simple` has no such test).
    #[inline(always)]
    fn refuses_short(&self) -> bool {
        let never_inlines = self.inline_lim == 0 && self.cfg.single_inline_max == 0;
        !never_inlines || M::KIND == TxKind::Single
    }

    /// [`TxQueue::tx_burst`] of plain frames, all with offload values
    /// `offload`: the same WQEs, doorbell and counters as `tx_burst` of
    /// their [`TxFrame::packet`]s, with no per-packet test but the
    /// frame's length where the burst path takes the frames straight
    /// (eMPW, no session open: 64-byte inline frames, or frames by
    /// pointer on a queue that never inlines). Whatever it leaves goes
    /// through `tx_burst`'s path, as packets (built on the stack, 32 at a
    /// time).
    pub fn tx_frames(&mut self, offload: &TxOffload, frames: &[TxFrame<'_>]) -> usize {
        self.frames_burst(offload, frames)
    }

    /// Retires the WQE a requester CQE names (its `wqe_counter`) and every
    /// one before it, calling `f` with the id of each packet they carried,
    /// oldest first; returns the number of packets.
    ///
    /// A `wqe_counter` that names no WQE start in flight is refused
    /// ([`RetireError`]) and changes nothing. Only a WQE's first slot of
    /// the shadow is written (`tx_shadow`): the other slots of a WQE in
    /// flight may hold an entry an earlier ring pass left, whose 16-bit
    /// index can even equal `wqe_counter` (after a multiple of 65536
    /// WQEBBs). Such an entry is told apart by its tag (`tx_wr_id`):
    /// the full 32-bit counter it was written for differs from the one
    /// in flight by a non-zero multiple of the ring size (equal only
    /// after 2^32 WQEBBs, the width of the queue's own counters).
    pub fn retire(&mut self, wqe_counter: u16, mut f: impl FnMut(u64)) -> Result<u32, RetireError> {
        // The send queue's checks (in flight, index, size), changing
        // nothing yet.
        let (dist, entry) = self.sq.check_counter(wqe_counter)?;
        if tx_wr_id_pi(entry.wr_id()) != self.sq.ci.wrapping_add(dist) {
            return Err(RetireError::NotWqeStart { wqe_counter });
        }
        // The packet counter at the WQE's end: written by us, but check it
        // against the ids in flight anyway.
        let end = entry.wr_id() as u32;
        let n = in_flight(end, self.tail);
        if n > in_flight(self.done.head, self.tail) {
            return Err(RetireError::NotInFlight { wqe_counter });
        }
        self.sq.retire(wqe_counter)?;
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
    /// Built straight into the ring (the burst path,
    /// [`WqebbRing::window`](crate::ring::WqebbRing::window)), not in the
    /// staging area: bytes 16 up to the DS count are in the ring, the
    /// control segment is written at close.
    direct: bool,
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
    /// The DS count of the last closed WQE (0: none yet). It ends where
    /// the next one starts (`p.pi`, moved when a WQE closes, never else),
    /// so that its first WQEBB and WQEBB count follow (`TxQueue::commit`):
    /// one store per WQE closed, not four.
    last_ds: u32,
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
#[inline]
fn zero(buf: &mut [u8], from: usize, to: usize) {
    if let Some(d) = buf.get_mut(from..to) {
        d.fill(0);
    }
}

/// Copies `N` bytes at `off` from `src` to `dst` (fixed-size moves).
#[inline(always)]
fn copy_n<const N: usize>(dst: &mut [u8], src: &[u8], off: usize) {
    if let (Some(d), Some(s)) = (dst.get_mut(off..off + N), src.get(off..off + N)) {
        d.copy_from_slice(s);
    }
}

/// Copies `src` into `dst` (the same length; else nothing) with fixed-size
/// moves, no `memcpy` call: 64-byte pieces and a last one that overlaps the
/// one before it, or two overlapping 32- or 16-byte pieces; under 16 bytes,
/// a plain copy. (Frames are longer than 18 bytes here.)
#[inline(always)]
fn copy_frame(dst: &mut [u8], src: &[u8]) {
    let n = src.len();
    if dst.len() != n {
        return;
    }
    if n >= 64 {
        let mut off = 0;
        while off + 64 < n {
            copy_n::<64>(dst, src, off);
            off += 64;
        }
        copy_n::<64>(dst, src, n - 64);
    } else if n >= 32 {
        copy_n::<32>(dst, src, 0);
        copy_n::<32>(dst, src, n - 32);
    } else if n >= 16 {
        copy_n::<16>(dst, src, 0);
        copy_n::<16>(dst, src, n - 16);
    } else {
        dst.copy_from_slice(src);
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

/// A data (pointer) segment.
#[inline(always)]
fn data_seg(length: u32, lkey: u32, addr: u64) -> [u8; SEND_WQE_DS] {
    zerocopy::transmute!(DataSeg {
        byte_count: Be32::new(length),
        lkey: Be32::new(lkey),
        addr: Be64::new(addr),
    })
}

/// The signalling constants of a queue.
#[derive(Debug, Clone, Copy)]
struct Signal {
    /// The drain guarantee inside a batch: a CQE on the WQE that makes
    /// this many WQEBBs (half the ring) or packets (half the id ring)
    /// unsignalled; `u32::MAX` (never) under [`CqePolicy::BurstEnd`],
    /// whose WQEs request CQEs at the batch's end only (as DPDK's
    /// `mlx5_tx_request_completion`, once per doorbell), where
    /// [`TxQueue::commit`] applies the guarantee instead.
    drain_wqebbs: u32,
    drain_pkts: u32,
    /// [`CqePolicy::EverySessions`]: a CQE every this many WQEs;
    /// `u32::MAX` for [`CqePolicy::BurstEnd`] (never reached: the drain
    /// guarantee requests a CQE long before), so that the test is one
    /// comparison.
    every: u32,
    /// `fm_ce_se` of a WQE that requests no CQE.
    fm_unsignaled: u8,
}

impl Signal {
    /// The constants of policy `cqe` on a queue of `half_ring` × 2 WQEBBs
    /// and `half_ids` × 2 packet ids.
    const fn of(
        cqe: CqePolicy,
        unsignaled_ce: CompletionMode,
        half_ring: u32,
        half_ids: u32,
    ) -> Self {
        let (drain_wqebbs, drain_pkts) = match cqe {
            CqePolicy::BurstEnd { .. } => (u32::MAX, u32::MAX),
            CqePolicy::EverySessions(_) => (half_ring, half_ids),
        };
        Self {
            drain_wqebbs,
            drain_pkts,
            every: every_of(cqe),
            fm_unsignaled: FmCeSe::new().with_ce(unsignaled_ce.raw()).into_bits(),
        }
    }
}

impl Pending {
    fn reset_since(&mut self) {
        self.wqes = 0;
        self.wqebbs = 0;
        self.ptr_pkts = 0;
        self.pkts = 0;
    }
}

/// The parts of a batch that writing a WQE out touches: the send queue
/// (ring, shadow), the staging area, the counters. Borrowed apart from
/// the open session and the id ring, so that the burst loop can close a
/// session and go on.
struct Out<'x, 'a, P: DoorbellPolicy, Q: QpKind> {
    sig: &'x Signal,
    sq: &'x mut SendQueue<'a, P, Q>,
    stage: &'x mut Stage,
    stats: &'x mut TxStats,
    p: &'x mut Pending,
    /// [`TxBatch`]'s WQE count and last WQE's DS count.
    wqes: &'x mut u32,
    last_ds: &'x mut u32,
}

impl<P: DoorbellPolicy, Q: QpKind> Out<'_, '_, P, Q> {
    /// Closes session `o` (staged): the legacy MPW inline header, the
    /// counters, [`Out::finish`].
    #[inline(always)]
    fn close_session<M: TxMode>(&mut self, o: &Open, reason: CloseReason) {
        let opcode = match M::KIND {
            TxKind::LegacyMpw => ctrl_bits::MPW,
            _ => ctrl_bits::EMPW,
        };
        if M::KIND == TxKind::LegacyMpw && o.mpw_inline {
            put(
                &mut self.stage.0,
                mpw::TITLE_DS * SEND_WQE_DS,
                &inline_header(o.inline_bytes),
            );
        }
        self.p.ptr_pkts += o.ptr_pkts;
        self.stats.sessions += 1;
        if let Some(c) = self.stats.closes.get_mut(reason as usize) {
            *c += 1;
        }
        self.finish(o.pi, o.ds, opcode, o.direct);
    }

    /// The ring's bytes from the DS count `ds` to the end of the last
    /// WQEBB of the session at `pi` into the staging area, where the
    /// session is built (so that [`Out::finish`], which copies whole
    /// WQEBBs, gives them back unchanged, as a session built in the ring
    /// leaves them). Needed for a session staged without the copy of its
    /// WQEBBs (`burst::load_wrapping`: one that can hold no inline
    /// segment, whose only unwritten bytes are those); harmless after it.
    fn keep_tail(&mut self, pi: u32, ds: u32) {
        let written = ds as usize % (SEND_WQE_BB / SEND_WQE_DS) * SEND_WQE_DS;
        if written == 0 {
            return;
        }
        let last = wqebbs_of(ds) - 1;
        let old = self.sq.ring.read(pi.wrapping_add(last));
        let at = last as usize * SEND_WQE_BB;
        if let (Some(d), Some(s)) = (
            self.stage.0.get_mut(at + written..at + SEND_WQE_BB),
            old.get(written..),
        ) {
            d.copy_from_slice(s);
        }
    }

    /// Whether the WQE being finished requests a CQE (the per-WQE part of
    /// the policy, and the drain guarantee).
    #[inline(always)]
    fn signal_now(&self) -> bool {
        let s = &self.sig;
        (self.p.wqebbs >= s.drain_wqebbs) | (self.p.pkts >= s.drain_pkts) | (self.p.wqes >= s.every)
    }

    /// Writes the control segment of the staged WQE (starting at producer
    /// counter `pi`, `ds` DS, opcode and opmod `opcode` as the host-order
    /// `opmod_idx_opcode` of WQE index 0), copies it into the ring and
    /// records it (shadow, counters): the WQE's whole WQEBBs are copied,
    /// so the staging area holds, past what the WQE writes (padding, the
    /// last WQEBB's tail), the ring's own bytes for a session (loaded
    /// when it opened, `burst::load_wrapping`, and here, [`Out::keep_tail`])
    /// and zeroes for a single-packet WQE (`single`). A `direct` WQE is in the ring
    /// already but for its control segment: that is written in place
    /// (into the staging area too, for the doorbell; the whole WQE, for
    /// BlueFlame).
    #[inline(never)]
    fn finish(&mut self, pi: u32, ds: u32, opcode: u32, direct: bool) {
        if direct && self.finish_in_place(pi, ds, opcode) {
            return;
        }
        if opcode == ctrl_bits::EMPW || opcode == ctrl_bits::MPW {
            self.keep_tail(pi, ds);
        }
        let bbs = wqebbs_of(ds);
        self.p.wqes += 1;
        self.p.wqebbs += bbs;
        let signal = self.signal_now();
        let fm_ce_se = if signal {
            FM_CE_ALWAYS
        } else {
            self.sig.fm_unsignaled
        };
        let sq = &mut *self.sq;
        let index = u32::from(wq_counter16(pi)) << ctrl_bits::WQE_INDEX_SHIFT;
        let ctrl = CtrlSeg {
            opmod_idx_opcode: zerocopy::transmute!(Be32::new(opcode | index)),
            qpn_ds: zerocopy::transmute!(Be32::new(
                sq.lim.qpn_ds_bits | (ds << ctrl_bits::DS_SHIFT)
            )),
            signature: 0,
            dci_stream_channel_id: Be16::ZERO,
            fm_ce_se: zerocopy::transmute!(fm_ce_se),
            imm: Be32::ZERO,
        };
        let st = &mut self.stage.0;
        put(st, 0, ctrl.as_bytes());
        let end = bbs as usize * SEND_WQE_BB;
        // Into the ring at the session's first WQEBB, wrapping at its end.
        let staged = st.get(..end).unwrap_or_default();
        let blocks = <[[u8; SEND_WQE_BB]]>::ref_from_bytes(staged).unwrap_or_default();
        sq.ring.write_run(pi, blocks);
        // Shadow: the WQE's entry in its first slot only ([`tx_shadow`]).
        if let Some(e) = sq.shadow.get_mut(sq.size.slot(pi)) {
            *e = tx_shadow(pi, self.p.head, bbs, signal);
        }
        self.p.pi = pi.wrapping_add(bbs);
        *self.wqes += 1;
        *self.last_ds = ds;
        if signal {
            self.p.reset_since();
        }
    }

    /// [`Out::finish`] of a WQE built in the ring (its WQEBBs before the
    /// ring end): the control segment written in place (nothing past the
    /// DS count: the ring keeps its bytes there), also into the staging area
    /// (the doorbell's copy; the whole WQE, for BlueFlame), the same
    /// shadow and counters. Returns false, doing nothing, if the WQE's
    /// WQEBBs cross the ring end (it is not in the ring then).
    #[inline(always)]
    fn finish_in_place(&mut self, pi: u32, ds: u32, opcode: u32) -> bool {
        let bbs = wqebbs_of(ds);
        let sq = &mut *self.sq;
        let Some(w) = sq.ring.window(pi, bbs) else {
            return false;
        };
        let p = &mut *self.p;
        p.wqes += 1;
        p.wqebbs += bbs;
        let s = &self.sig;
        let signal = (p.wqebbs >= s.drain_wqebbs) | (p.pkts >= s.drain_pkts) | (p.wqes >= s.every);
        let fm_ce_se = if signal {
            FM_CE_ALWAYS
        } else {
            s.fm_unsignaled
        };
        let ctrl = ctrl_seg(opcode, pi, sq.lim.qpn_ds_bits, ds, fm_ce_se);
        let end = bbs as usize * SEND_WQE_BB;
        if let Some(c) = w.first_chunk_mut::<SEND_WQE_DS>() {
            *c = ctrl;
        }
        let st = &mut self.stage.0;
        if P::BLUEFLAME {
            // The BlueFlame copy is taken from the staging area.
            put(st, 0, w.get(..end.min(STAGE_BYTES)).unwrap_or_default());
        } else if let Some(c) = st.first_chunk_mut::<SEND_WQE_DS>() {
            *c = ctrl;
        }
        // Shadow: as `finish`.
        if let Some(e) = sq.shadow.get_mut((pi & sq.mask) as usize) {
            *e = tx_shadow(pi, p.head, bbs, signal);
        }
        p.pi = pi.wrapping_add(bbs);
        *self.wqes += 1;
        *self.last_ds = ds;
        if signal {
            p.reset_since();
        }
        true
    }
}

/// WQEBBs of a WQE of `ds` DS (`ds` rounded up to WQEBBs): an add and a
/// shift (DS per WQEBB, 4, is a power of two), done in 64 bits so that
/// no `ds` overflows (`div_ceil` tests the remainder instead: six
/// instructions).
#[inline(always)]
fn wqebbs_of(ds: u32) -> u32 {
    const UNITS: u64 = (SEND_WQE_BB / SEND_WQE_DS) as u64;
    ((u64::from(ds) + (UNITS - 1)) >> UNITS.trailing_zeros()) as u32
}

/// The shadow entry of a Tx WQE (session or single-packet WQE) whose
/// first WQEBB has the free-running counter `pi` and that ends at packet
/// counter `head`, written into that WQEBB's slot only (rdma-core and
/// DPDK record a WQE at its first WQEBB only; a CQE's `wqe_counter` names
/// a first WQEBB). Its work request id is [`tx_wr_id`].
#[inline(always)]
fn tx_shadow(pi: u32, head: u32, bbs: u32, signal: bool) -> SqShadowEntry {
    tx_entry(tx_wr_id(pi, head), pi, bbs, signal)
}

/// The work request id of a Tx WQE's shadow entry: the packet counter
/// at the WQE's end (`head`, low 32 bits) and the tag `pi - head` (high 32
/// bits), `pi` the free-running counter of the WQE's first WQEBB. The
/// other slots of a WQE keep whatever entry an earlier ring pass left
/// there; [`TxQueue::retire`] tells such a stale entry from a WQE start
/// in flight by its tag, which gives back the counter it was written for
/// (`tag + head`). (A difference rather than `pi` itself: in a run of
/// one-WQEBB WQEs of one packet each, it is the same for every WQE.)
#[inline(always)]
fn tx_wr_id(pi: u32, head: u32) -> u64 {
    (u64::from(pi.wrapping_sub(head)) << 32) | u64::from(head)
}

/// The WQEBB counter a Tx shadow entry's work request id ([`tx_wr_id`])
/// was written for.
#[inline(always)]
fn tx_wr_id_pi(wr_id: u64) -> u32 {
    ((wr_id >> 32) as u32).wrapping_add(wr_id as u32)
}

/// The shadow entry of a Tx WQE with work request id `wr_id`
/// ([`tx_wr_id`]; see [`tx_shadow`]).
#[inline(always)]
fn tx_entry(wr_id: u64, pi: u32, bbs: u32, signal: bool) -> SqShadowEntry {
    SqShadowEntry::new(
        wr_id,
        wq_counter16(pi),
        bbs as u8,
        if signal {
            SHADOW_SIGNALED | SHADOW_CQE
        } else {
            0
        },
    )
}

/// The Ethernet segment of a session's title: the offload values every
/// packet of the session shares, `mss` (legacy MPW: the packets' length;
/// else 0), no inline header.
#[inline(always)]
fn session_eth(offload: &TxOffload, mss: u16) -> [u8; SEND_WQE_DS] {
    let eth = EthSeg {
        swp_outer_l4_offset: offload.swp_offsets[0],
        swp_outer_l3_offset: offload.swp_offsets[1],
        swp_inner_l4_offset: offload.swp_offsets[2],
        swp_inner_l3_offset: offload.swp_offsets[3],
        cs_flags: offload.cs_flags,
        swp_flags: offload.swp_flags,
        mss: Be16::new(mss),
        flow_table_metadata: Be32::new(offload.metadata),
        inline_hdr_sz: Be16::ZERO,
        inline_hdr_start: [0; 2],
    };
    zerocopy::transmute!(eth)
}

/// The control segment of a WQE at producer counter `pi`: opcode and
/// opmod `opcode` (the host-order `opmod_idx_opcode` of WQE index 0),
/// `qpn_ds_bits` and `ds` DS, `fm_ce_se`; built as two 8-byte words
/// (`CtrlSeg`'s layout: the opcode word, the QPN/DS word, 3 zero bytes,
/// `fm_ce_se`, `imm` 0), so that it is two stores, not six.
#[inline(always)]
fn ctrl_seg(opcode: u32, pi: u32, qpn_ds_bits: u32, ds: u32, fm_ce_se: u8) -> [u8; SEND_WQE_DS] {
    let index = u32::from(wq_counter16(pi)) << ctrl_bits::WQE_INDEX_SHIFT;
    // Byte `i` of the segment is byte `i % 8` of word `i / 8` taken
    // little-endian (`to_le_bytes` below), whatever the host's order.
    let op = u32::from_le_bytes((opcode | index).to_be_bytes());
    let qpn_ds = u32::from_le_bytes((qpn_ds_bits | (ds << ctrl_bits::DS_SHIFT)).to_be_bytes());
    let lo = u64::from(op) | (u64::from(qpn_ds) << 32);
    let hi = u64::from(fm_ce_se) << ((CTRL_FM_CE_SE - 8) * 8);
    (u128::from(lo) | (u128::from(hi) << 64)).to_le_bytes()
}

/// The largest number of packets in one session of a `kind` queue
/// ([`TxConfig::max_packets`]; legacy MPW: at most
/// [`mpw::MPW_MAX_PACKETS`]).
#[inline(always)]
const fn max_packets_of(kind: TxKind, cfg: &TxConfig) -> u32 {
    let m = cfg.max_packets as u32;
    match kind {
        TxKind::LegacyMpw if m > mpw::MPW_MAX_PACKETS as u32 => mpw::MPW_MAX_PACKETS as u32,
        _ => m,
    }
}

/// The longest frame a session inlines: [`TxConfig::inline_max`],
/// [`TxConfig::max_inline_bytes`] and the room of a fresh session (VLAN
/// tag included).
const fn inline_limit(cfg: &TxConfig) -> u32 {
    let fresh_ds = cfg.max_wqe_bytes as u32 / SEND_WQE_DS as u32 - mpw::TITLE_DS as u32;
    let by_room = (fresh_ds * SEND_WQE_DS as u32).saturating_sub(4);
    let lim = if cfg.inline_max < cfg.max_inline_bytes {
        cfg.inline_max
    } else {
        cfg.max_inline_bytes
    } as u32;
    if lim < by_room {
        lim
    } else {
        by_room
    }
}

/// [`Signal::every`] of a policy.
const fn every_of(cqe: CqePolicy) -> u32 {
    match cqe {
        CqePolicy::EverySessions(0) => 1,
        CqePolicy::EverySessions(n) => n as u32,
        CqePolicy::BurstEnd { .. } => u32::MAX,
    }
}

/// `fm_ce_se` asking for a CQE.
const FM_CE_ALWAYS: u8 = CompletionMode::Always.raw() << ctrl_bits::CE_SHIFT;

impl<'a, P: DoorbellPolicy, Q: QpKind, M: TxMode> TxBatch<'_, 'a, P, Q, M> {
    /// Free WQEBBs after what this batch has built.
    #[inline(always)]
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

    #[inline(always)]
    fn max_packets(&self) -> u32 {
        max_packets_of(M::KIND, &self.q.cfg)
    }

    /// The longest frame a session inlines: [`TxConfig::inline_max`],
    /// [`TxConfig::max_inline_bytes`] and the room of a fresh session
    /// (VLAN tag included).
    #[inline(always)]
    fn inline_limit(&self) -> u32 {
        self.q.inline_lim
    }

    /// How `p` would go into a session, or `None` if it cannot.
    fn classify(&self, p: &Packet<'_>, len: u32) -> Option<Desc> {
        if !p.more.is_empty() || p.tso_mss != 0 {
            return None;
        }
        let vlan = u32::from(p.vlan_tci.is_some()) * 4;
        let inline_ok = p.bytes().is_some() && len + vlan <= self.inline_limit();
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

    /// The shortest frame [`TxBatch::push`] takes: 19 bytes if the queue
    /// refuses short frames ([`TxQueue::refuses_short`]), else 1.
    #[inline(always)]
    fn min_len(&self) -> u64 {
        if self.q.refuses_short() {
            ETH_L2_INLINE_HEADER_SIZE as u64 + 1
        } else {
            1
        }
    }

    /// Queues one packet. On error nothing of it was queued.
    pub fn push(&mut self, p: &Packet<'_>) -> Result<(), TxError> {
        let len64 = p.len();
        if len64 < self.min_len() || len64 > u64::from(u32::MAX >> 1) {
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
        self.stage_open();
        self.add(p, desc);
        Ok(())
    }

    /// Why the open session `o` cannot take `p`, if it cannot.
    fn misfit(&self, o: &Open, p: &Packet<'_>, len: u32, desc: Desc) -> Option<CloseReason> {
        let cfg = &self.q.cfg;
        if o.offload != p.offload() {
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
            offload: p.offload(),
            len,
            mpw_inline: matches!(desc, Desc::Inline(_)),
            direct: false,
        };
        // Title: the Ethernet segment now (the control segment at close).
        // Legacy MPW: the common packet length in `mss` (DPDK
        // `mlx5_tx_burst_empw_*`, "Store the packet length for legacy MPW").
        let mss = if legacy { len as u16 } else { 0 };
        // On a queue that inlines, the staging area starts as a copy of the
        // session's WQEBBs in the ring, so that the bytes the session does
        // not write (padding) go back unchanged at close, as in a session
        // built in the ring (the last WQEBB's tail: `Out::keep_tail`).
        let q = &mut *self.q;
        if q.inline_lim != 0 {
            let bbs = wqebbs_of(max_ds.min(u32::from(MAX_DS)));
            burst::load_wrapping(
                &mut q.sq.ring,
                o.pi,
                q.stage.0.get_mut(..bbs as usize * SEND_WQE_BB),
            );
        }
        put(&mut q.stage.0, SEND_WQE_DS, &session_eth(&p.offload(), mss));
        self.open = Some(o);
        Ok(())
    }

    /// Adds `p` to the open session (it fits: checked by `misfit`).
    fn add(&mut self, p: &Packet<'_>, desc: Desc) {
        let Some(o) = self.open.as_mut() else { return };
        let buf = &mut self.q.stage.0[..];
        let at = o.ds as usize * SEND_WQE_DS;
        match desc {
            Desc::Inline(n) => {
                let frame = p.bytes().unwrap_or_default();
                if M::KIND == TxKind::LegacyMpw {
                    // Frames concatenated after one 4-byte header, written at
                    // close (DPDK `mlx5_tx_idone_empw`).
                    let hdr = mpw::TITLE_DS * SEND_WQE_DS;
                    let dst = hdr + 4 + o.inline_bytes as usize;
                    if let Some(d) = buf.get_mut(dst..dst + frame.len()) {
                        copy_frame(d, frame);
                    }
                    o.inline_bytes += n;
                    let end = hdr + 4 + o.inline_bytes as usize;
                    // (The padding after the frames is not written.)
                    o.ds = mpw::TITLE_DS as u32 + (end - hdr).div_ceil(SEND_WQE_DS) as u32;
                } else {
                    // The segment header and the frame; the padding to the
                    // segment's last 16-byte unit is not written (the
                    // device reads `n` bytes of it; DPDK
                    // `mlx5_tx_dseg_empw` does not write it either).
                    let units = (4 + n).div_ceil(SEND_WQE_DS as u32);
                    put(buf, at, &inline_header(n));
                    match p.vlan_tci {
                        Some(tci) => put_vlan(buf, at + 4, frame, tci),
                        None => {
                            if let Some(d) = buf.get_mut(at + 4..at + 4 + frame.len()) {
                                copy_frame(d, frame);
                            }
                        }
                    }
                    o.ds += units;
                    o.inline_bytes += n;
                }
                self.inline = true;
            }
            Desc::Pointer => {
                let s = p.first_sge();
                put(buf, at, &data_seg(s.length, s.lkey, s.addr));
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
        self.out().close_session::<M>(&o, reason);
    }

    /// Writes the staged WQE out (see [`Out::finish`]).
    fn finish(&mut self, pi: u32, ds: u32, opcode: u32) {
        self.out().finish(pi, ds, opcode, false);
    }

    /// Moves the open session, if it is built in the ring, back into the
    /// staging area (its whole window: what it wrote and the ring's bytes
    /// around, `burst::load_wrapping`), where [`TxBatch::add`] appends.
    fn stage_open(&mut self) {
        let Some(o) = self.open.as_mut().filter(|o| o.direct) else {
            return;
        };
        o.direct = false;
        let bbs = wqebbs_of(o.max_ds.min(u32::from(MAX_DS)));
        let q = &mut *self.q;
        burst::load_wrapping(
            &mut q.sq.ring,
            o.pi,
            q.stage.0.get_mut(..bbs as usize * SEND_WQE_BB),
        );
    }

    /// The parts that writing a WQE out touches.
    #[inline(always)]
    fn out(&mut self) -> Out<'_, 'a, P, Q> {
        let q = &mut *self.q;
        Out {
            sig: &q.sig,
            sq: &mut q.sq,
            stage: &mut q.stage,
            stats: &mut q.stats,
            p: &mut self.p,
            wqes: &mut self.wqes,
            last_ds: &mut self.last_ds,
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
        let buf = &mut self.q.stage.0[..];
        let off = p.offload();
        let mut eth = EthSeg {
            swp_outer_l4_offset: off.swp_offsets[0],
            swp_outer_l3_offset: off.swp_offsets[1],
            swp_inner_l4_offset: off.swp_offsets[2],
            swp_inner_l3_offset: off.swp_offsets[3],
            cs_flags: off.cs_flags,
            swp_flags: off.swp_flags,
            mss: Be16::new(p.tso_mss),
            flow_table_metadata: Be32::new(off.metadata),
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
                put(buf, at, &data_seg(s.length, s.lkey, s.addr));
                at += SEND_WQE_DS;
            }
            self.p.ptr_pkts += 1;
        }
        if hdr_len > 0 {
            self.inline = true;
        }
        // A single-packet WQE keeps its own format: zeroes from the DS
        // count to the end of its last WQEBB (at most 3 units; the slack
        // of the staging area takes the rest).
        put(
            &mut self.q.stage.0,
            (ds as usize * SEND_WQE_DS) & STAGE_MASK,
            &[0u8; 3 * SEND_WQE_DS],
        );
        self.record_id(p.id);
        self.q.stats.single_wqes += 1;
        let opcode = if p.tso_mss != 0 {
            ctrl_bits::TSO
        } else {
            ctrl_bits::SEND
        };
        let pi = self.p.pi;
        self.finish(pi, ds, opcode);
        Ok(())
    }

    /// Closes the open session, applies the burst-end CQE rule and
    /// publishes the batch: one doorbell record write and one doorbell (or
    /// BlueFlame) write. Returns the number of WQEs published.
    pub fn complete(mut self) -> u32 {
        self.publish()
    }

    /// [`TxBatch::complete`] in place (no move of the batch: what
    /// [`TxQueue::tx_burst`] calls). The batch is done after it.
    #[inline(always)]
    fn publish(&mut self) -> u32 {
        self.close(CloseReason::Complete);
        let t = self.tally();
        self.q.commit(t)
    }

    /// The batch's counters as a value ([`Tally`]).
    #[inline(always)]
    fn tally(&self) -> Tally {
        Tally {
            p: self.p,
            wqes: self.wqes,
            inline: self.inline,
            last_ds: self.last_ds,
        }
    }
}

/// A batch's counters ([`TxBatch`] but its queue and open session), as a
/// value: what [`TxQueue::commit`] publishes. (The burst path keeps them
/// in registers, `TxQueue::inline64_run`.)
#[derive(Debug, Clone, Copy)]
struct Tally {
    p: Pending,
    wqes: u32,
    inline: bool,
    last_ds: u32,
}

impl<P: DoorbellPolicy, Q: QpKind, M: TxMode> TxQueue<'_, P, Q, M> {
    /// Publishes a batch whose counters are `t` and whose sessions are
    /// all closed ([`TxBatch::publish`]): the burst-end CQE rule, one
    /// doorbell record write and one doorbell (or BlueFlame) write.
    /// Returns the number of WQEs published.
    #[inline(always)]
    fn commit(&mut self, mut t: Tally) -> u32 {
        let ds = t.last_ds;
        if ds == 0 {
            return 0;
        }
        if let CqePolicy::BurstEnd { packets, wqebbs } = self.cfg.cqe {
            // The packets DPDK keeps since the last request (or a count
            // over any threshold when the drain guarantee asks for a CQE).
            // (The counters go by value: a reference to `t` would keep it
            // out of registers in the burst loops this is inlined into.)
            t.p.ptr_pkts = self.kept_packets(t.p.ptr_pkts, t.p.head, t.p.pi, t.p.pkts, t.p.wqebbs);
            let by_pkts = t.p.ptr_pkts >= u32::from(packets);
            let by_bbs = wqebbs != 0 && t.p.wqebbs >= u32::from(wqebbs);
            if (by_pkts || by_bbs) && t.p.wqes != 0 {
                // The last WQE: the one that ends at the producer counter.
                self.request_cqe(t.p.pi.wrapping_sub(wqebbs_of(ds)));
                t.p.reset_since();
            }
        }
        let sq = &mut self.sq;
        // The unsignalled count of the send queue's own posts is kept (these
        // WQEs follow their own signalling), and the fast paths' credits,
        // computed for the old producer counter, are dropped.
        let unsignaled = sq.unsignaled();
        sq.pi = t.p.pi;
        sq.set_unsignaled(unsignaled);
        sq.fast_end = sq.pi;
        self.done = t.p;
        // The staged copy of the last WQE: whole for a BlueFlame copy, else
        // its first WQEBB (the doorbell is its first 8 bytes).
        let bbs = if P::BLUEFLAME { wqebbs_of(ds) } else { 1 };
        let n = core::cmp::min(bbs as usize, STAGE_BBS) * SEND_WQE_BB;
        let staged = self.stage.0.get(..n).unwrap_or_default();
        let last_wqe = <[Wqebb]>::ref_from_bytes(staged).unwrap_or_default();
        sq.db.ring::<P>(Publish {
            pi: t.p.pi,
            last_wqe,
            last_ds: ds as u8,
            nreq: t.wqes,
            inline: t.inline,
        });
        t.wqes
    }

    /// [`CqePolicy::BurstEnd`] at the end of a batch (the counters after
    /// it: pointer packets since the last CQE request, the packet and
    /// producer counters, and all packets and WQEBBs since the last
    /// request): the packets DPDK keeps until a completion (its `elts`)
    /// since the last request. On a queue that inlines, that is not
    /// the batch's leading inlined ones (freed at the burst's end,
    /// `loc.mbuf_free`) but every one from its first packet sent by pointer
    /// on, inlined or not; else its pointer packets. `u32::MAX` when the
    /// drain guarantee asks for a CQE (half the ring or half the id ring
    /// unsignalled): under this policy no WQE inside a batch requests one,
    /// as DPDK's `mlx5_tx_request_completion` runs once per doorbell, so
    /// the guarantee is applied at the batch's last WQE. Out of line: the
    /// default policy never comes here.
    #[inline(never)]
    fn kept_packets(&self, ptr_pkts: u32, head: u32, pi: u32, pkts: u32, wqebbs: u32) -> u32 {
        if wqebbs != 0
            && (wqebbs >= self.sq.size.entries() / 2 || pkts >= (self.ids.len() / 2) as u32)
        {
            return u32::MAX;
        }
        let before = &self.done;
        if ptr_pkts == before.ptr_pkts || (self.inline_lim == 0 && self.cfg.single_inline_max == 0)
        {
            return ptr_pkts;
        }
        let batch = head.wrapping_sub(before.head);
        let lead = self.leading_inline(before.pi, pi);
        before.ptr_pkts.wrapping_add(batch.saturating_sub(lead))
    }

    /// The packets at the start of the WQEs from producer counter `from` to
    /// `to` (in the ring, not yet published) whose bytes are all in their
    /// WQE, up to the first one sent by pointer: inline descriptors of
    /// eMPW sessions, the frames of inline legacy MPW sessions, SEND WQEs
    /// without a pointer segment. Read back from the ring, so that no
    /// path that builds WQEs counts them.
    fn leading_inline(&self, from: u32, to: u32) -> u32 {
        let ring = &self.sq.ring;
        // The 4-byte word at DS `d` of the WQE at `pi`.
        let word = |pi: u32, d: u32| {
            let b = ring.read(pi.wrapping_add(d / 4));
            let at = (d % 4) as usize * SEND_WQE_DS;
            b.get(at..at + 4)
                .and_then(|w| w.try_into().ok())
                .map_or(0, u32::from_be_bytes)
        };
        let index_mask = u32::from(u16::MAX) << ctrl_bits::WQE_INDEX_SHIFT;
        let mut n = 0u32;
        let mut pi = from;
        let span = to.wrapping_sub(from);
        // Bounded by the span even if a DS count were not the one written.
        while pi.wrapping_sub(from) < span {
            let title = ring.read(pi);
            let op = word(pi, 0) & !index_mask;
            let ds = (u32::from_be_bytes([title[4], title[5], title[6], title[7]])
                >> ctrl_bits::DS_SHIFT)
                & u32::from(MAX_DS);
            let eth = title
                .get(SEND_WQE_DS..2 * SEND_WQE_DS)
                .and_then(|e| EthSeg::read_from_bytes(e).ok());
            let Some(eth) = eth.filter(|_| ds != 0) else {
                return n;
            };
            if op == ctrl_bits::EMPW {
                let mut d = mpw::TITLE_DS as u32;
                while d < ds {
                    let bc = word(pi, d);
                    if bc & INLINE_BIT == 0 {
                        return n;
                    }
                    n += 1;
                    d += (4 + (bc & !INLINE_BIT)).div_ceil(SEND_WQE_DS as u32);
                }
            } else if op == ctrl_bits::MPW {
                let bc = word(pi, mpw::TITLE_DS as u32);
                let mss = u32::from(eth.mss.get());
                if bc & INLINE_BIT == 0 || mss == 0 {
                    return n;
                }
                n += (bc & !INLINE_BIT) / mss;
            } else if op == ctrl_bits::SEND {
                let hdr = if eth.vlan_insert().insert() {
                    0
                } else {
                    usize::from(eth.inline_hdr_sz.get())
                };
                let body = 1 + EthSeg::ds_for(hdr) as u32;
                if body < ds && word(pi, body) & INLINE_BIT == 0 {
                    return n;
                }
                n += 1;
            } else {
                return n;
            }
            pi = pi.wrapping_add(wqebbs_of(ds));
        }
        n
    }

    /// Turns the CE bits of the WQE at `pi` (already in the ring and, as
    /// the last one, in the staging area) into "always" (the caller
    /// resets its counters since the last CQE request).
    fn request_cqe(&mut self, pi: u32) {
        let sq = &mut self.sq;
        // `fm_ce_se` is byte 11 of the control segment, in the WQE's first
        // WQEBB (not yet published: the doorbell has not been rung).
        let mut block = sq.ring.read(pi);
        put(&mut block, CTRL_FM_CE_SE, &[FM_CE_ALWAYS]);
        sq.ring.write(pi, &block);
        put(&mut self.stage.0, CTRL_FM_CE_SE, &[FM_CE_ALWAYS]);
        if let Some(e) = sq.shadow.get_mut(sq.size.slot(pi)) {
            e.mark_signaled();
        }
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

    /// [`TxQueue::tx_frames`] of the chosen path.
    pub fn tx_frames(&mut self, offload: &TxOffload, frames: &[TxFrame<'_>]) -> usize {
        match self {
            AnyTxQueue::Empw(q) => q.tx_frames(offload, frames),
            AnyTxQueue::LegacyMpw(q) => q.tx_frames(offload, frames),
            AnyTxQueue::Single(q) => q.tx_frames(offload, frames),
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
mod tests;
