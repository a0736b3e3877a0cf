//! The send queue: WQEs into the SQ ring, the doorbell, and the bookkeeping
//! that turns requester completions back into free WQEBBs.
//!
//! # Building one
//!
//! A [`SendQueue`] is built once from raw parts ([`SqRawParts`]: the SQ
//! buffer, its WQEBB count, the doorbell record, the BlueFlame register) and
//! plain settings ([`SqConfig`]: QP type, QPN, inline and SGE limits, …) in
//! one `unsafe` constructor, [`SendQueue::new`]. Everything after that is
//! safe. The caller also lends two pieces of ordinary memory, because the
//! core allocates nothing:
//!
//! - the **shadow** (`&mut [SqShadowEntry]`, one entry per WQEBB slot):
//!   our trusted copy of what was posted (wr_id, WQEBB count, signalled or
//!   not), against which every completion is checked before it is used as
//!   an index (STYLE point 8);
//! - the **staging area** (`&mut [Wqebb]`): where a batch's WQEs are
//!   formatted before [`Batch::complete`] copies them into the ring.
//!
//! # Posting: start, build, complete or abort
//!
//! Modelled on the ibverbs "new post send" API (`ibv_wr_start`, `ibv_wr_*`,
//! `ibv_wr_set_*`, `ibv_wr_complete` / `ibv_wr_abort`):
//!
//! ```ignore
//! let mut batch = sq.start();
//! batch.rdma_write(wr_id, rkey, raddr)?.signaled().sge(lkey, addr, len)?;
//! batch.send(wr_id2)?.inline_data(b"hello")?;
//! batch.complete(); // one doorbell for both
//! ```
//!
//! A builder call ([`Batch::send`], [`Batch::rdma_write`], …) checks the
//! operation against the QP type at the call and returns a [`Wr`] handle;
//! its setters add the flags, the UD address or the XRC SRQ number; a data
//! setter ([`Wr::sge`], [`Wr::sge_list`], [`Wr::inline_data`],
//! [`Wr::inline_data_list`], or [`Wr::post`] for none) ends the work request.
//!
//! # One work request, one call
//!
//! The commonest single work requests have a call of their own that checks
//! everything first and then writes the WQE, built in registers, straight
//! into the ring (no staging copy: nothing can fail after the first byte),
//! with the doorbell: [`SendQueue::post_rdma_write`],
//! [`SendQueue::post_rdma_read`] and [`SendQueue::post_send`] (one SGE),
//! [`SendQueue::post_send_inline`] (RC/UC, up to 44 bytes inline),
//! [`SendQueue::post_ud_send`] (UD, one SGE) and
//! [`SendQueue::post_raw_frame`] (raw Ethernet, 18-byte inline header).
//! Same bytes, shadow, doorbell and errors as a batch of that one work
//! request; any case they do not cover goes through such a batch.
//!
//! # Lists: one call, no staging
//!
//! [`SendQueue::post_rdma_write_list`], [`SendQueue::post_rdma_read_list`]
//! and [`SendQueue::post_send_list`] take a slice of one-SGE work requests
//! ([`RdmaWr`], [`SendWr`]), the shape of `ibv_post_send` with a chain of
//! WRs, but all or nothing: the list is checked as a whole (operation,
//! SGEs allowed, room for every element) before the first byte is written,
//! then every WQE goes straight into the ring, one shadow entry each, one
//! doorbell. There is no abort (it is one call), and an error means that
//! nothing was written. Same bytes as a batch of the same work requests.
//! On x86-64 the RDMA lists can format their WQEs with AVX2, when the
//! queue is given the proof that the CPU has it ([`SendQueue::set_avx2`]).
//!
//! # Why staging (the design choice)
//!
//! The rules are: nothing reaches the device before `complete`; `abort`
//! (or dropping the batch) leaves the ring bytes, the doorbell record and the
//! register exactly as they were; a work request that fails leaves no
//! partial WQE. Writing WQEs straight into the ring past the producer index
//! would be invisible to the device but would still change ring bytes, so
//! an abort could not restore them without an undo copy of the same size.
//! Instead each work request is **validated completely first** (sizes, SGE
//! count, inline length, TSO header, free WQEBBs) and only then formatted,
//! in one pass, into the staging area; `complete` copies the batch into the
//! ring with one `memcpy` (two when it wraps the ring end) and rings the
//! doorbell. Costs: one extra copy of the batch's bytes, amortised over the
//! batch and done from L1; gains: abort is free (nothing to undo), a failed
//! work request never writes a byte, the BlueFlame copy reads a contiguous,
//! cache-hot source even when the WQE wraps the ring, and formatting needs
//! no wrap test per segment. Give the staging area as many WQEBBs as the
//! ring (then [`PostError::BatchFull`] cannot happen before
//! [`PostError::QueueFull`]), or fewer to bound memory and batch size.
//!
//! # Byte compatibility with libmlx5
//!
//! For the same work request, the bytes within the WQE's DS count are the
//! ones rdma-core's libmlx5 (v44) writes: control segment (WQE index, DS,
//! `fm_ce_se` with libmlx5's fence policy: `FENCE` gives
//! [`WQE_CTRL_FENCE`](crate::prm::WQE_CTRL_FENCE), and the WQE after a local
//! invalidate gets the small-initiator fence), immediate / invalidate key,
//! inline segments, Ethernet segment with its inline L2 header taken from
//! the packet (the pointer segments then start past it), datagram segment
//! (the AV with the remote QPN, the extended-AV bit and the Q_Key written
//! over it), XRC segment, atomic result SGE of the operand size, and WQEs
//! that cross the ring end continue at its start. Where libmlx5 leaves a byte
//! *inside* the DS count untouched (inline padding, the `imm` word of
//! operations without one when built through `ibv_wr_*`, the unused fields
//! of a local-invalidate mkey context), this queue writes zero. Bytes after
//! the DS count up to the end of the last WQEBB are zero too.
//! Two deliberate differences: a failing work request writes nothing
//! (libmlx5 leaves a partial control segment past the producer index), and
//! a TSO header that wraps the ring end is followed by its data segment at
//! the right place (libmlx5 v44 `set_tso_eth_seg` puts it 32 bytes too far,
//! outside the WQE's DS count).
//!
//! # Completions and draining
//!
//! A requester CQE's `wqe_counter` names the first WQEBB of the last WQE it
//! completes; that WQE and every unsignalled one before it are done.
//! [`SendQueue::retire`] checks the counter against the shadow (it must
//! name the start of a WQE in flight) before moving the consumer index, and
//! [`SendQueue::retire_each`] also reports every retired wr_id. The queue
//! never overwrites an un-retired WQE: a full queue is [`PostError::QueueFull`].
//!
//! **The draining rule.** Only a signalled WQE produces a CQE, so a queue
//! whose WQEs are all unsignalled fills up and can never be drained. As
//! libmlx5 (whose users must signal periodically or create the QP with
//! `sq_sig_all`) and DPDK (a CQE every `MLX5_TX_COMP_THRESH` = 32 packets)
//! do, this queue forces a CQE: when the WQEBBs posted since the last
//! signalled WQE reach [`SqConfig::signal_every`] (default: half the ring),
//! the next WQE asks for a CQE even if its work request did not. The shadow
//! records both what the user asked ([`SqShadowEntry::signaled`]) and what
//! the device was asked ([`SqShadowEntry::cqe_requested`]), so a poller can
//! hide forced completions. Set `signal_every` to 0 to turn this off (then
//! the caller must signal at least once every `wqe_cnt` WQEBBs).
//!
//! # Memory the device reads
//!
//! Work requests carry raw addresses and keys (`lkey`, `rkey`), as in
//! ibverbs. The device reaches memory only through registered memory
//! regions, and registering memory for DMA (in `mlx5dp-setup`) is where the
//! lifetime the types cannot track is promised; posting an address is
//! therefore a safe call here.
//!
//! Panic policy: nothing on the posting, doorbell or retire paths panics on
//! user data; every check returns a typed error.

mod batch;
mod doorbell;
mod fast;
mod kind;
mod list;
#[cfg(all(target_arch = "x86_64", target_feature = "sse2", not(loom)))]
mod list_avx2;
pub mod mpw;
mod shared_bf;
#[cfg(test)]
#[cfg(not(loom))]
mod tests;

pub use batch::{Batch, FrameSge, MwBind, MwType, Sge, Wr};
pub use doorbell::{BlueFlameInline, BlueFlamePreferred, DoorbellOnly, DoorbellPolicy};
pub use kind::{AnyQp, QpKind, RawPacketQp, RcQp, UcQp, UdQp, XrcQp};
pub use list::{RdmaWr, SendWr};
#[cfg(loom)]
#[doc(hidden)]
pub use shared_bf::LoomFault;
pub use shared_bf::SharedBlueFlame;

use core::marker::PhantomData;
use core::ptr::NonNull;

#[cfg(all(target_arch = "x86_64", target_feature = "sse2", not(loom)))]
use crate::cpu::Avx2;
use crate::cq::WcOpcode;
use crate::index::{in_flight, RingSize};
use crate::mmio::{DeviceWord, Register};
use crate::prm::{Av, QpnDs, SEND_WQE_BB, SEND_WQE_MAX_WQEBBS, WQE_CTRL_CQ_UPDATE};
use crate::ring::{RingBuf, WqebbRing};
use doorbell::Doorbell;

/// The transport of the QP that owns the send queue; it decides which
/// segments follow the control segment and which operations are allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QpType {
    /// Reliable connected (`IBV_QPT_RC`).
    Rc,
    /// Unreliable connected (`IBV_QPT_UC`).
    Uc,
    /// Unreliable datagram (`IBV_QPT_UD`): a datagram segment (AV) per WQE.
    Ud,
    /// XRC initiator (`IBV_QPT_XRC_SEND`): an XRC segment per WQE.
    Xrc,
    /// Raw Ethernet (`IBV_QPT_RAW_PACKET`): an Ethernet segment per WQE.
    RawPacket,
}

/// Plain settings of a send queue (no pointers; checked by the constructor).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SqConfig {
    /// The QP's transport.
    pub qp_type: QpType,
    /// QP number (or SQ number), 24 bits: goes into every control segment.
    pub qpn: u32,
    /// Largest inline payload of one WQE (`ibv_qp_cap.max_inline_data`).
    pub max_inline_data: u32,
    /// Largest SGE list of one WQE (`ibv_qp_cap.max_send_sge`).
    pub max_sge: u32,
    /// Every WQE requests a CQE (the QP was created with `sq_sig_all`).
    pub sig_all: bool,
    /// Atomic operations are allowed (libmlx5 `atomics_enabled`).
    pub atomics: bool,
    /// Raw Ethernet checksum offload is supported
    /// (libmlx5 `qp_cap_cache & MLX5_CSUM_SUPPORT_RAW_OVER_ETH`).
    pub raw_csum: bool,
    /// Bytes of L2 header a raw Ethernet send must inline: 0 or 18
    /// (libmlx5 `eth_min_inline_size`).
    pub eth_min_inline: u8,
    /// Largest TSO header; 0 when the QP has no TSO (`max_tso_header`).
    pub max_tso_header: u16,
    /// Largest TSO payload in pointer segments; 0 for no limit (`max_tso`).
    pub max_tso: u32,
    /// Force a CQE once this many WQEBBs were posted since the last
    /// signalled WQE (see the module documentation); 0 never forces;
    /// `u32::MAX` (what [`SqConfig::new`] sets) means half the ring.
    pub signal_every: u32,
    /// The producer counter to start from (the QP's `sq.cur_post` when the
    /// queue takes over a QP that was used before; 0 for a fresh QP).
    pub start_pi: u32,
    /// The BlueFlame half the first doorbell uses (rdma-core `bf->offset`
    /// is 0 for a fresh bfreg): false for the first, true for the second.
    pub start_bf_second_half: bool,
    /// The fence the first WQE inherits (rdma-core `qp->fm_cache` when the
    /// queue takes over a QP whose last WQE was a local invalidate: the
    /// small-initiator fence, [`crate::prm::WQE_CTRL_INITIATOR_SMALL_FENCE`]);
    /// 0 for a fresh QP. A fence mode in `fm_ce_se` bits 7:5: a value with
    /// any of bits 4:0 set is refused ([`SqConfigError::BadFmCache`]).
    pub start_fm_cache: u8,
}

impl SqConfig {
    /// Settings for a fresh QP of `qp_type` with the given limits; every
    /// capability off, `signal_every` = half the ring.
    pub fn new(qp_type: QpType, qpn: u32, max_inline_data: u32, max_sge: u32) -> Self {
        Self {
            qp_type,
            qpn,
            max_inline_data,
            max_sge,
            sig_all: false,
            atomics: false,
            raw_csum: false,
            eth_min_inline: 0,
            max_tso_header: 0,
            max_tso: 0,
            signal_every: u32::MAX,
            start_pi: 0,
            start_bf_second_half: false,
            start_fm_cache: 0,
        }
    }
}

/// The raw parts of a send queue, as `mlx5dv_init_obj` (or the emulated
/// device) hands them out.
#[derive(Debug)]
pub struct SqRawParts<'a> {
    /// First byte of the SQ buffer (`mlx5dv_qp.sq.buf`), 64-byte aligned.
    pub buf: NonNull<u8>,
    /// Number of WQEBBs in the SQ buffer (`mlx5dv_qp.sq.wqe_cnt`), a power
    /// of two.
    pub wqe_cnt: u32,
    /// The SQ word of the doorbell record (`&mlx5dv_qp.dbrec[MLX5_SND_DBR]`).
    pub dbrec: &'a DeviceWord<u32>,
    /// The doorbell/BlueFlame register (`mlx5dv_qp.bf.reg`), 8-byte aligned.
    pub bf_reg: NonNull<u8>,
    /// Size of one BlueFlame half in bytes (`mlx5dv_qp.bf.size`); 0 when the
    /// register has no BlueFlame buffer (then only 8 bytes are written).
    pub bf_buf_size: u32,
}

/// One WQEBB of staging memory (64 bytes, 64-byte aligned).
#[repr(C, align(64))]
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    zerocopy::FromBytes,
    zerocopy::IntoBytes,
    zerocopy::KnownLayout,
    zerocopy::Immutable,
)]
pub struct Wqebb(pub [u8; SEND_WQE_BB]);

impl Wqebb {
    /// A zeroed WQEBB.
    pub const ZERO: Self = Self([0; SEND_WQE_BB]);
}

impl Default for Wqebb {
    fn default() -> Self {
        Self::ZERO
    }
}

/// Our trusted copy of one SQ slot (one per WQEBB).
///
/// Two words, so that a post writes it with two stores: the wr_id, and a
/// packed word of the WQE index, the WQEBB count and the flags (fields
/// declared once below, read by one accessor each).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SqShadowEntry {
    wr_id: u64,
    /// `index` (bits 0..16: the 16-bit WQEBB counter of the WQE starting
    /// here), `wqebbs` (bits 16..24: its WQEBBs, 0 if no WQE starts here),
    /// `flags` (bits 24..32: `SHADOW_SIGNALED`, `SHADOW_CQE`), the
    /// completion opcode recorded at post time (bits 32..40: a [`Recorded`],
    /// 0 for none: libmlx5 `sq.wr_data`); bits 40..64 are zero.
    meta: u64,
}

/// Position of `index` in [`SqShadowEntry::meta`].
const META_INDEX_SHIFT: u32 = 0;
/// Position of `wqebbs` in [`SqShadowEntry::meta`].
const META_WQEBBS_SHIFT: u32 = 16;
/// Position of `flags` in [`SqShadowEntry::meta`].
const META_FLAGS_SHIFT: u32 = 24;
/// Position of the recorded completion opcode in [`SqShadowEntry::meta`].
const META_WR_OPCODE_SHIFT: u32 = 32;

/// The completion opcodes a WQE records at post time (libmlx5 `sq.wr_data`
/// for the UMR WQEs it builds), as stored in [`SqShadowEntry::meta`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Recorded {
    /// `IBV_WC_LOCAL_INV`.
    LocalInv = 1,
    /// `IBV_WC_BIND_MW`.
    BindMw = 2,
}

const SHADOW_SIGNALED: u8 = 1 << 0;
const SHADOW_CQE: u8 = 1 << 1;

impl SqShadowEntry {
    /// An empty slot.
    pub const EMPTY: Self = Self { wr_id: 0, meta: 0 };

    /// The entry of a WQE of `wqebbs` WQEBBs with WQE index `index` and
    /// shadow `flags` (`SHADOW_*`).
    #[inline(always)]
    pub(crate) const fn new(wr_id: u64, index: u16, wqebbs: u8, flags: u8) -> Self {
        Self {
            wr_id,
            meta: Self::meta_of(index, wqebbs, flags),
        }
    }

    /// The packed word of an entry (see [`SqShadowEntry::meta`]).
    #[inline(always)]
    pub(crate) const fn meta_of(index: u16, wqebbs: u8, flags: u8) -> u64 {
        ((index as u64) << META_INDEX_SHIFT)
            | ((wqebbs as u64) << META_WQEBBS_SHIFT)
            | ((flags as u64) << META_FLAGS_SHIFT)
    }

    /// An entry from its wr_id and packed word (the fast paths, which
    /// build the word incrementally).
    #[inline(always)]
    pub(crate) const fn from_meta(wr_id: u64, meta: u64) -> Self {
        Self { wr_id, meta }
    }

    /// The entry with `op` recorded as its completion opcode: the one
    /// a completion of a UMR WQE reports (libmlx5 records `IBV_WC_LOCAL_INV`
    /// and `IBV_WC_BIND_MW` in `sq.wr_data` and `handle_good_req` reports
    /// it, since the CQE's UMR opcode names neither).
    #[inline(always)]
    pub(crate) const fn with_wr_opcode(mut self, op: Recorded) -> Self {
        self.meta |= (op as u64) << META_WR_OPCODE_SHIFT;
        self
    }

    /// The work request id posted in this slot.
    pub fn wr_id(&self) -> u64 {
        self.wr_id
    }
    /// The completion opcode recorded at post time for a WQE whose CQE
    /// opcode cannot name it (a local invalidate, a memory-window bind);
    /// `None` for every other WQE.
    #[inline(always)]
    pub fn wr_opcode(&self) -> Option<WcOpcode> {
        match (self.meta >> META_WR_OPCODE_SHIFT) as u8 {
            c if c == Recorded::LocalInv as u8 => Some(WcOpcode::LocalInv),
            c if c == Recorded::BindMw as u8 => Some(WcOpcode::BindMw),
            _ => None,
        }
    }
    /// WQE index (16-bit WQEBB counter) of the WQE starting in this slot.
    pub fn index(&self) -> u16 {
        (self.meta >> META_INDEX_SHIFT) as u16
    }
    /// WQEBBs of the WQE starting in this slot; 0 if none starts here.
    pub fn wqebbs(&self) -> u8 {
        (self.meta >> META_WQEBBS_SHIFT) as u8
    }
    /// The shadow flags (`SHADOW_*`).
    fn flags(&self) -> u8 {
        (self.meta >> META_FLAGS_SHIFT) as u8
    }
    /// Whether the work request asked for a completion.
    pub fn signaled(&self) -> bool {
        self.flags() & SHADOW_SIGNALED != 0
    }
    /// Whether the WQE asked the device for a CQE (signalled, `sig_all`, or
    /// forced by [`SqConfig::signal_every`]).
    pub fn cqe_requested(&self) -> bool {
        self.flags() & SHADOW_CQE != 0
    }
    /// Marks the WQE as asking for a CQE (the forced-CQE rule applied
    /// after the entry was written: the list posts).
    pub(crate) fn mark_cqe(&mut self) {
        self.meta |= u64::from(SHADOW_CQE) << META_FLAGS_SHIFT;
    }
    /// Marks the WQE signalled and asking for a CQE (a CQE requested after
    /// the WQE was recorded: `mpw`).
    pub(crate) fn mark_signaled(&mut self) {
        self.meta |= u64::from(SHADOW_SIGNALED | SHADOW_CQE) << META_FLAGS_SHIFT;
    }
}

/// A work request that could not be posted. The WQE was not written, the
/// batch is unchanged and may go on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PostError {
    /// Not enough free WQEBBs: retire completions first.
    QueueFull,
    /// The staging area is full: complete this batch and start another.
    BatchFull,
    /// The SGE list is longer than [`SqConfig::max_sge`].
    TooManySges,
    /// The inline data is longer than [`SqConfig::max_inline_data`].
    InlineTooLong,
    /// The TSO header is longer than [`SqConfig::max_tso_header`].
    TsoHeaderTooLong,
    /// The TSO header is shorter than an Ethernet header (14 bytes).
    TsoHeaderTooShort,
    /// The TSO payload is longer than [`SqConfig::max_tso`].
    TsoPayloadTooLong,
    /// A raw Ethernet frame is shorter than the inline L2 header the device
    /// needs ([`SqConfig::eth_min_inline`]).
    EthHeaderTooShort,
    /// A raw Ethernet send must inline its first bytes: give the data as
    /// frames ([`Wr::frame`], [`Wr::frame_list`]) or inline, not as bare SGEs.
    FrameBytesRequired,
    /// The QP type (or its capabilities) does not support this operation,
    /// setter or flag.
    UnsupportedOp,
    /// A UD work request without [`Wr::ud_addr`].
    MissingUdAddress,
    /// An XRC work request without [`Wr::xrc_srqn`].
    MissingXrcSrqn,
    /// The WQE would exceed 63 DS (1008 bytes).
    WqeTooLarge,
    /// A memory-window bind longer than 2 GiB ([`MwBind::MAX_LENGTH`]:
    /// one KLM; libmlx5 refuses it with `EOPNOTSUPP`).
    BindTooLong,
}

/// Why [`SendQueue::new`] refused its parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SqConfigError {
    /// `wqe_cnt` is not a power of two, is above 65536 (the 16-bit WQE
    /// counters, [`crate::prm::WQ_PI_MASK`], could not name every WQEBB),
    /// or the ring is larger than the address space.
    BadWqeCount,
    /// The shadow has fewer entries than `wqe_cnt`.
    ShadowTooSmall,
    /// The staging area cannot hold one largest WQE (16 WQEBBs).
    StagingTooSmall,
    /// The QPN does not fit 24 bits.
    BadQpn,
    /// `eth_min_inline` is neither 0 nor 18.
    BadEthMinInline,
    /// `bf_buf_size` is not a multiple of 64.
    BadBlueFlameSize,
    /// `config.qp_type` is not the QP type the queue's [`QpKind`] fixes.
    QpTypeMismatch,
    /// `start_fm_cache` has bits outside the fence mode (bits 7:5).
    BadFmCache,
}

/// Why a completion's WQE counter was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetireError {
    /// The counter is not within the WQEBBs in flight.
    NotInFlight {
        /// The counter the device reported.
        wqe_counter: u16,
    },
    /// The counter is in flight but does not name the first WQEBB of a WQE.
    NotWqeStart {
        /// The counter the device reported.
        wqe_counter: u16,
    },
}

/// What one completion retired.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retired {
    /// wr_id of the WQE the completion names (the last one retired).
    pub wr_id: u64,
    /// WQEBBs returned to the free pool.
    pub wqebbs: u32,
    /// The completion opcode recorded for that WQE when it was posted
    /// ([`SqShadowEntry::wr_opcode`]): what [`crate::cq::SendRetired`]
    /// passes on, for the CQE's UMR opcode.
    pub wr_opcode: Option<WcOpcode>,
}

/// One retired work request, as [`SendQueue::retire_each`] reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetiredWr {
    /// Its work request id.
    pub wr_id: u64,
    /// Whether the work request asked for a completion.
    pub signaled: bool,
    /// Whether it is the WQE the completion names.
    pub last: bool,
}

/// Limits and fixed per-WQE values, read by every work request.
#[derive(Debug, Clone, Copy)]
struct Limits {
    qp_type: QpType,
    qpn_ds: QpnDs,
    /// `qpn_ds` with DS 0, as the host-order value of the big-endian field
    /// (the fast paths add the DS count: [`fast::ds_bits`]).
    qpn_ds_bits: u32,
    max_inline: u32,
    max_sge: u32,
    sig_bits: u8,
    atomics: bool,
    raw_csum: bool,
    eth_min_inline: u8,
    max_tso_header: u16,
    max_tso: u32,
    signal_every: u32,
    /// `signal_every`, or `u32::MAX` when it is 0: a CQE is forced once the
    /// WQEBBs since the last CQE reach it (never, at `u32::MAX`: they are
    /// fewer than the ring's 2^31 WQEBBs).
    force_at: u32,
    /// The queue has SGEs (`max_sge > 0`).
    has_sge: bool,
    /// First 8 bytes of the control segment of the one-SGE shapes with WQE
    /// index 0 (`fast::ctrl0_const`): RDMA write and read (3 DS), send (2 DS).
    ctrl0_write: u64,
    ctrl0_read: u64,
    ctrl0_send: u64,
    /// Bytes 8..16 of a control segment whose `fm_ce_se` is `sig_bits`
    /// (`fast::ctrl1_of`): the word the fast paths OR the flags into.
    ctrl1_sig: u64,
    /// The shadow word of a one-WQEBB WQE with WQE index 0 and no flag
    /// of its own: 1 WQEBB, `SHADOW_CQE` if `sig_all`.
    meta_one: u64,
}

impl Limits {
    /// The control constant, DS and "has a remote address" of the one-SGE
    /// shape of `op` (write, read or send).
    #[inline(always)]
    fn sge_shape(&self, op: batch::Op) -> (u64, u8, bool) {
        match op {
            batch::Op::Write => (self.ctrl0_write, 3, true),
            batch::Op::Read => (self.ctrl0_read, 3, true),
            _ => (self.ctrl0_send, 2, false),
        }
    }
}

/// The data of a one-call send that takes the batch path
/// ([`SendQueue::post_send_cold`]).
enum SendData<'x> {
    /// [`SendQueue::post_send_inline`]'s bytes.
    Inline(&'x [u8]),
    /// [`SendQueue::post_ud_send`]'s address, remote QPN, Q_Key and SGE.
    Ud(&'x Av, u32, u32, Sge),
    /// [`SendQueue::post_raw_frame`]'s lkey, address and frame.
    Frame(u32, u64, &'x [u8]),
}

/// The `send_flags` of a work request posted in one call
/// ([`SendQueue::post_rdma_write`], [`Batch::rdma_write_sge`], …):
/// `IBV_SEND_SIGNALED`, `IBV_SEND_SOLICITED`, `IBV_SEND_FENCE`, combined
/// with `|`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SendFlags(pub(crate) u8);

impl SendFlags {
    /// No flag: an unsignalled, unfenced work request.
    pub const NONE: Self = Self(0);
    /// Ask for a completion (`IBV_SEND_SIGNALED`).
    pub const SIGNALED: Self = Self(batch::F_SIGNALED);
    /// Set the solicited-event bit (`IBV_SEND_SOLICITED`).
    pub const SOLICITED: Self = Self(batch::F_SOLICITED);
    /// Wait for earlier reads and atomics (`IBV_SEND_FENCE`).
    pub const FENCE: Self = Self(batch::F_FENCE);

    /// Whether every flag of `other` is set.
    pub const fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }
}

impl core::ops::BitOr for SendFlags {
    type Output = Self;
    #[inline(always)]
    fn bitor(self, rhs: Self) -> Self {
        Self(self.0 | rhs.0)
    }
}

/// A send queue over raw parts; one owner (`Send`, not `Sync`).
///
/// `P` fixes the doorbell policy at compile time (see [`DoorbellPolicy`]);
/// `Q` the QP type, when it is known at compile time (see [`QpKind`]: with
/// [`AnyQp`], the default, every work request tests [`SqConfig::qp_type`]).
#[derive(Debug)]
pub struct SendQueue<'a, P: DoorbellPolicy = BlueFlamePreferred, Q: QpKind = AnyQp> {
    ring: WqebbRing<'a>,
    size: RingSize,
    /// `size.entries()`, kept for the hot paths.
    entries: u32,
    /// `size.mask()`, kept for the hot paths.
    mask: u32,
    /// `entries` if the queue has SGEs, else 0: the one-SGE fast paths test
    /// the room and `max_sge` in one comparison.
    post_limit: u32,
    /// Free-running WQEBB producer counter of published WQEs.
    pi: u32,
    /// Free-running WQEBB consumer counter: everything before it is retired.
    ci: u32,
    /// Fence the next WQE inherits (libmlx5 `fm_cache`).
    fm_cache: u8,
    /// The producer counter just after the last WQE that requested a CQE:
    /// `pi - sig_pi` WQEBBs were posted since ([`SendQueue::unsignaled`]).
    /// (With `sig_all` every WQE requests one and the count is never read:
    /// the fast paths leave it, [`SendQueue::refresh_credits`] resets it.)
    sig_pi: u32,
    /// End of the fast-path credits: the fast paths ([`SendQueue::post_rdma_write`]
    /// and friends, the list posts) may post one-WQEBB WQEs up to this
    /// producer counter without testing the room, the forced-CQE rule or
    /// the inherited fence.
    ///
    /// Invariant: with `c = fast_end - pi > 0` credits, `fm_cache == 0`
    /// (no fence to inherit), `outstanding() + c <= post_limit` (room, and
    /// SGEs allowed), and, unless `sig_all`, `unsignaled() + c < force_at`
    /// (none of the next `c` WQEBBs reaches the forced CQE, even if none is
    /// signalled). A fast-path post of one WQEBB leaves `c - 1`; retiring
    /// only adds room; everything else that moves the producer or the fence
    /// (batches, the full paths, `mpw`) recomputes it
    /// ([`SendQueue::refresh_credits`]) or sets it to `pi` (no credit). A
    /// fast path that finds too few credits takes the full path, which
    /// refreshes them.
    fast_end: u32,
    lim: Limits,
    shadow: &'a mut [SqShadowEntry],
    staging: &'a mut [Wqebb],
    db: Doorbell<'a>,
    /// Proof that the CPU has AVX2, when the list posts may use it
    /// ([`SendQueue::set_avx2`]).
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2", not(loom)))]
    avx2: Option<Avx2>,
    _policy: PhantomData<(P, Q)>,
}

impl<'a, P: DoorbellPolicy> SendQueue<'a, P, AnyQp> {
    /// Builds a send queue from its raw parts; the QP type is the one of
    /// `config`, tested per work request ([`AnyQp`]).
    ///
    /// `shadow` needs `wqe_cnt` entries; `staging` at least 16 WQEBBs (one
    /// largest WQE), ideally `wqe_cnt` (see the module documentation).
    ///
    /// # Safety
    ///
    /// As for [`SendQueue::new_typed`].
    pub unsafe fn new(
        raw: SqRawParts<'a>,
        config: SqConfig,
        shadow: &'a mut [SqShadowEntry],
        staging: &'a mut [Wqebb],
    ) -> Result<Self, SqConfigError> {
        // SAFETY: the caller upholds `new_typed`'s contract.
        unsafe { Self::new_typed(raw, config, shadow, staging) }
    }
}

impl<'a, P: DoorbellPolicy, Q: QpKind> SendQueue<'a, P, Q> {
    /// Builds a send queue whose QP type is fixed at compile time by `Q`
    /// (STYLE point 10: the per-work-request tests of the QP type vanish).
    /// `config.qp_type` must be `Q`'s type ([`SqConfigError::QpTypeMismatch`]).
    ///
    /// `shadow` needs `wqe_cnt` entries; `staging` at least 16 WQEBBs (one
    /// largest WQE), ideally `wqe_cnt` (see the module documentation).
    ///
    /// # Safety
    ///
    /// For the whole lifetime `'a`:
    /// - `raw.buf` points to `raw.wqe_cnt * 64` bytes of SQ buffer, valid for
    ///   reads and writes, that nothing else in this process writes or
    ///   references (the device may read it);
    /// - `raw.bf_reg` points to `2 * raw.bf_buf_size` bytes (8 bytes if
    ///   `bf_buf_size` is 0) of doorbell/BlueFlame register, 8-byte aligned,
    ///   mapped and valid for volatile 8-byte writes, not used by anyone
    ///   else (no other queue on the same bfreg, no Rust references);
    /// - `raw.dbrec` is this SQ's doorbell-record word, and nothing else
    ///   writes it;
    /// - the QP is a `config.qp_type` QP with the limits of `config`, and
    ///   no other software posts to its SQ.
    pub unsafe fn new_typed(
        raw: SqRawParts<'a>,
        config: SqConfig,
        shadow: &'a mut [SqShadowEntry],
        staging: &'a mut [Wqebb],
    ) -> Result<Self, SqConfigError> {
        if Q::TYPE.is_some_and(|t| t != config.qp_type) {
            return Err(SqConfigError::QpTypeMismatch);
        }
        // (The control segment's WQE index, the doorbell record's producer
        // counter and a completion's `wqe_counter` are 16 bits: a larger
        // ring cannot be driven, and `check_counter` relies on the bound.)
        let size = RingSize::new(raw.wqe_cnt)
            .filter(|s| s.mask() <= crate::prm::WQ_PI_MASK)
            .ok_or(SqConfigError::BadWqeCount)?;
        let ring_len = (raw.wqe_cnt as usize)
            .checked_mul(SEND_WQE_BB)
            .ok_or(SqConfigError::BadWqeCount)?;
        if shadow.len() < raw.wqe_cnt as usize {
            return Err(SqConfigError::ShadowTooSmall);
        }
        if staging.len() < SEND_WQE_MAX_WQEBBS {
            return Err(SqConfigError::StagingTooSmall);
        }
        let qpn_ds = QpnDs::new()
            .with_qpn_checked(config.qpn)
            .map_err(|()| SqConfigError::BadQpn)?;
        if config.eth_min_inline != 0
            && usize::from(config.eth_min_inline) != crate::prm::ETH_L2_INLINE_HEADER_SIZE
        {
            return Err(SqConfigError::BadEthMinInline);
        }
        if raw.bf_buf_size % SEND_WQE_BB as u32 != 0 {
            return Err(SqConfigError::BadBlueFlameSize);
        }
        if config.start_fm_cache & 0x1f != 0 {
            return Err(SqConfigError::BadFmCache);
        }
        let buf_size = raw.bf_buf_size as usize;
        let reg_size = core::cmp::max(2 * buf_size, 8);
        // SAFETY: the caller promises `ring_len` bytes at `raw.buf`, valid
        // for reads and writes and written by nothing else for `'a`.
        let ring = unsafe { RingBuf::new(raw.buf.as_ptr(), ring_len) }
            .and_then(WqebbRing::new)
            .ok_or(SqConfigError::BadWqeCount)?;
        // SAFETY: the caller promises `reg_size` bytes of register at
        // `raw.bf_reg`, 8-byte aligned, valid for volatile 8-byte writes and
        // used by no one else for `'a` (`Register::new`'s contract).
        let reg = unsafe { Register::new(raw.bf_reg, reg_size) };
        let signal_every = if config.signal_every == u32::MAX {
            raw.wqe_cnt / 2
        } else {
            config.signal_every
        };
        let qpn_ds_bits = qpn_ds.with_ds(0).into_bits().get();
        let sig_bits = if config.sig_all {
            WQE_CTRL_CQ_UPDATE
        } else {
            0
        };
        let lim = Limits {
            qp_type: config.qp_type,
            qpn_ds,
            qpn_ds_bits,
            max_inline: config.max_inline_data,
            max_sge: config.max_sge,
            sig_bits,
            atomics: config.atomics,
            raw_csum: config.raw_csum,
            eth_min_inline: config.eth_min_inline,
            max_tso_header: config.max_tso_header,
            max_tso: config.max_tso,
            signal_every,
            force_at: if signal_every == 0 {
                u32::MAX
            } else {
                signal_every
            },
            has_sge: config.max_sge > 0,
            ctrl0_write: fast::ctrl0_const(batch::Op::Write, qpn_ds_bits, 3),
            ctrl0_read: fast::ctrl0_const(batch::Op::Read, qpn_ds_bits, 3),
            ctrl0_send: fast::ctrl0_const(batch::Op::Send, qpn_ds_bits, 2),
            ctrl1_sig: fast::ctrl1_of(sig_bits),
            meta_one: SqShadowEntry::meta_of(0, 1, fast::shadow_flags(0, sig_bits)),
        };
        Ok(Self {
            ring,
            size,
            entries: size.entries(),
            mask: size.mask(),
            post_limit: if config.max_sge > 0 {
                size.entries()
            } else {
                0
            },
            pi: config.start_pi,
            ci: config.start_pi,
            // No fast-path credits yet (`fast_end == pi`), so the credit
            // invariant holds with any inherited fence.
            fm_cache: config.start_fm_cache,
            sig_pi: config.start_pi,
            fast_end: config.start_pi,
            lim,
            shadow,
            staging,
            db: Doorbell::new(raw.dbrec, reg, buf_size, config.start_bf_second_half),
            #[cfg(all(target_arch = "x86_64", target_feature = "sse2", not(loom)))]
            avx2: Avx2::compile_time(),
            _policy: PhantomData,
        })
    }

    /// Starts a posting batch (`ibv_wr_start`). Nothing reaches the device
    /// until [`Batch::complete`]; dropping the batch aborts it.
    #[inline]
    pub fn start(&mut self) -> Batch<'_, 'a, P, Q> {
        Batch::new(self)
    }

    /// Lets the list posts of RDMA writes and reads
    /// ([`SendQueue::post_rdma_write_list`], [`SendQueue::post_rdma_read_list`])
    /// format their WQEs with AVX2 (`Some`), or not (`None`). The bytes are
    /// the same either way. A queue starts with AVX2 when the crate was
    /// compiled with it ([`Avx2::compile_time`]); with `std`, a caller turns
    /// it on after `is_x86_feature_detected!("avx2")` with
    /// [`Avx2::new_unchecked`].
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2", not(loom)))]
    pub fn set_avx2(&mut self, avx2: Option<Avx2>) {
        self.avx2 = avx2;
    }

    /// The AVX2 proof the list posts use, if any ([`SendQueue::set_avx2`]).
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2", not(loom)))]
    pub fn avx2(&self) -> Option<Avx2> {
        self.avx2
    }

    /// The fast path of a list post of RDMA writes or reads
    /// (`list::write_list_fast`) compiled with AVX2, its runs written with
    /// AVX2 ([`list_avx2::rdma_run_avx2`]): one call per list.
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2", not(loom)))]
    #[inline(always)]
    fn write_rdma_list_avx2(&mut self, avx2: Avx2, shape: (u64, u8, bool), wrs: &[RdmaWr]) {
        // SAFETY: `avx2` exists, so the CPU has AVX2 (its constructors'
        // contract); that is all `rdma_list_avx2` requires.
        unsafe { list_avx2::rdma_list_avx2(self, avx2, shape, wrs) }
    }

    /// A plain run of a list post of RDMA writes or reads
    /// (`list::write_plain_run`'s contract: `run` neither crosses the ring
    /// end nor a multiple of 256 WQEBBs), formatted with AVX2; `w0` is the
    /// first control word of its first WQE, `ctrl1` the second, `meta` its
    /// shadow word. Returns how many leading elements are plain (as
    /// `list::write_plain_run`).
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2", not(loom)))]
    #[inline(always)]
    fn write_rdma_run_avx2(
        &mut self,
        avx2: Avx2,
        at: u32,
        run: &[RdmaWr],
        w0: u64,
        ctrl1: u64,
        meta: u64,
    ) -> usize {
        let _ = avx2;
        let start = (at & self.mask) as usize;
        let Some(shadow) = self.shadow.get_mut(start..start + run.len()) else {
            // Cannot happen: the shadow holds `entries` slots and the run
            // ends at the ring end (the caller then writes the elements one
            // by one).
            return 0;
        };
        // SAFETY: `avx2` exists, so the CPU has AVX2 (its constructors'
        // contract); that is all `rdma_run_avx2` requires.
        match unsafe { list_avx2::rdma_run_avx2(&mut self.ring, shadow, at, run, w0, ctrl1, meta) }
        {
            Some(false) => run.len(),
            Some(true) => list::plain_prefix(run),
            // Cannot happen either (nothing written).
            None => 0,
        }
    }

    /// Posts an RDMA write of one SGE as a batch of one, in one call: the
    /// same WQE, shadow entry, doorbell and errors as
    /// `let mut b = sq.start(); b.rdma_write_sge(…)?; b.complete();`.
    ///
    /// On an RC or UC queue with a non-empty SGE the work request is checked
    /// completely first (operation, room) and then written straight into
    /// the ring, followed by the doorbell: with nothing left that could fail
    /// after the first byte is written, the rule that a failed work request
    /// leaves the ring untouched holds without the staging copy. Every other
    /// case takes the batch path, out of line.
    #[inline(always)]
    pub fn post_rdma_write(
        &mut self,
        wr_id: u64,
        rkey: u32,
        remote_addr: u64,
        sge: Sge,
        flags: SendFlags,
    ) -> Result<(), PostError> {
        self.post_sge(batch::Op::Write, wr_id, rkey, remote_addr, sge, flags)
    }

    /// Posts an RDMA read into one SGE in one call (see
    /// [`SendQueue::post_rdma_write`]).
    #[inline(always)]
    pub fn post_rdma_read(
        &mut self,
        wr_id: u64,
        rkey: u32,
        remote_addr: u64,
        sge: Sge,
        flags: SendFlags,
    ) -> Result<(), PostError> {
        self.post_sge(batch::Op::Read, wr_id, rkey, remote_addr, sge, flags)
    }

    /// Posts a send of one SGE in one call (see
    /// [`SendQueue::post_rdma_write`]; UD, XRC and raw Ethernet queues
    /// take the batch path, and fail there for want of an address, an SRQ
    /// number or frame bytes).
    #[inline(always)]
    pub fn post_send(&mut self, wr_id: u64, sge: Sge, flags: SendFlags) -> Result<(), PostError> {
        self.post_sge(batch::Op::Send, wr_id, 0, 0, sge, flags)
    }

    /// Posts an RC or UC send of `data` inline in one call: the same WQE,
    /// shadow entry, doorbell (the policy's choice for an inline WQE) and
    /// errors as `let mut b = sq.start();` then `b.send(wr_id)` with the
    /// flags and `.inline_data(data)`, then `b.complete()`.
    ///
    /// With 1 to 44 bytes (one WQEBB), no more than the QP's
    /// `max_inline_data`, and a fast-path credit in hand, the WQE is built
    /// in registers and written straight into the ring (nothing can fail
    /// after the checks); every other case takes the batch path, out of
    /// line.
    #[inline(always)]
    pub fn post_send_inline(
        &mut self,
        wr_id: u64,
        data: &[u8],
        flags: SendFlags,
    ) -> Result<(), PostError> {
        let pi = self.pi;
        let len = data.len();
        if !self.inline_fast_ok(len) || pi == self.fast_end {
            return self.post_send_cold(wr_id, flags, SendData::Inline(data));
        }
        let f = flags.0;
        let index = crate::index::wq_counter16(pi);
        let ds = fast::inline_ds(len);
        // The send shape's constant holds DS 2; this WQE's count replaces it.
        let w0 = fast::with_ds(self.lim.ctrl0_send, ds as u8) | fast::index_word(index);
        let ctrl1 = self.lim.ctrl1_sig | fast::ctrl1_of(f);
        let wqe = fast::inline_wqebb(w0, ctrl1, data);
        self.commit_one(&wqe, wr_id, index, f, ds as u8, true);
        Ok(())
    }

    /// Posts a UD send of one SGE to `av` (`remote_qpn`, `qkey`) in one
    /// call: the same WQE (two WQEBBs), shadow entries, doorbell and errors
    /// as `let mut b = sq.start();` then `b.send(wr_id)` with the flags,
    /// `.ud_addr(av, remote_qpn, qkey)` and `.sge(…)`, then `b.complete()`.
    ///
    /// On a UD queue with SGEs, a non-empty SGE and two fast-path credits,
    /// the WQE is built and written straight into the ring; every other
    /// case takes the batch path, out of line.
    #[inline(always)]
    pub fn post_ud_send(
        &mut self,
        wr_id: u64,
        av: &Av,
        remote_qpn: u32,
        qkey: u32,
        sge: Sge,
        flags: SendFlags,
    ) -> Result<(), PostError> {
        let pi = self.pi;
        if self.qp_type() != QpType::Ud
            || sge.length == 0
            || self.lim.max_sge == 0
            || self.fast_end.wrapping_sub(pi) < 2
        {
            return self.post_send_cold(wr_id, flags, SendData::Ud(av, remote_qpn, qkey, sge));
        }
        let f = flags.0;
        let index = crate::index::wq_counter16(pi);
        // Control, datagram (3 DS) and pointer segments: DS 5 in place of
        // the send shape's 2.
        let w0 = fast::with_ds(self.lim.ctrl0_send, 5) | fast::index_word(index);
        let ctrl1 = self.lim.ctrl1_sig | fast::ctrl1_of(f);
        let wqes = fast::ud_wqebbs(w0, ctrl1, av, remote_qpn, qkey, sge);
        self.ring.write(pi, &wqes[0].0);
        self.ring.write(pi.wrapping_add(1), &wqes[1].0);
        self.record(
            pi,
            wr_id,
            index,
            2,
            fast::shadow_flags(f, self.lim.sig_bits),
        );
        let pi = pi.wrapping_add(2);
        self.pi = pi;
        if f & batch::F_SIGNALED != 0 {
            self.sig_pi = pi;
        }
        self.db.ring::<P>(doorbell::Publish {
            pi,
            last_wqe: &wqes,
            last_ds: 5,
            nreq: 1,
            inline: false,
        });
        Ok(())
    }

    /// Posts a raw Ethernet send of `frame` (its bytes at `addr` under
    /// `lkey`) in one call: the same WQE, shadow entry, doorbell and errors
    /// as `let mut b = sq.start();` then `b.send(wr_id)` with the flags and
    /// `.frame(lkey, addr, frame)`, then `b.complete()`.
    ///
    /// On a raw packet queue that inlines exactly the 18-byte L2 header
    /// (`eth_min_inline` 18), with SGEs, a frame longer than that header and
    /// a fast-path credit, the WQE (one WQEBB: the header in the Ethernet
    /// segment, the rest by pointer) is built and written straight into the
    /// ring; every other case takes the batch path, out of line.
    #[inline(always)]
    pub fn post_raw_frame(
        &mut self,
        wr_id: u64,
        lkey: u32,
        addr: u64,
        frame: &[u8],
        flags: SendFlags,
    ) -> Result<(), PostError> {
        let pi = self.pi;
        if self.qp_type() != QpType::RawPacket
            || usize::from(self.lim.eth_min_inline) != crate::prm::ETH_L2_INLINE_HEADER_SIZE
            || self.lim.max_sge == 0
            || frame.len() <= crate::prm::ETH_L2_INLINE_HEADER_SIZE
            || u32::try_from(frame.len()).is_err()
            || pi == self.fast_end
        {
            return self.post_send_cold(wr_id, flags, SendData::Frame(lkey, addr, frame));
        }
        let f = flags.0;
        let index = crate::index::wq_counter16(pi);
        // Control, Ethernet (2 DS with the inline header) and pointer
        // segments: DS 4 in place of the send shape's 2.
        let w0 = fast::with_ds(self.lim.ctrl0_send, 4) | fast::index_word(index);
        let ctrl1 = self.lim.ctrl1_sig | fast::ctrl1_of(f);
        let wqe = fast::raw_wqebb(w0, ctrl1, lkey, addr, frame);
        self.commit_one(&wqe, wr_id, index, f, 4, false);
        Ok(())
    }

    /// Whether [`SendQueue::post_send_inline`]'s fast path takes `len`
    /// bytes: RC/UC, one WQEBB's worth, within `max_inline_data`.
    #[inline(always)]
    fn inline_fast_ok(&self, len: usize) -> bool {
        matches!(self.qp_type(), QpType::Rc | QpType::Uc)
            && len != 0
            && len <= fast::INLINE_FAST_MAX
            && len <= self.lim.max_inline as usize
    }

    /// The one-call sends ([`SendQueue::post_send_inline`],
    /// [`SendQueue::post_ud_send`], [`SendQueue::post_raw_frame`]) their
    /// fast path does not take: through a batch of one, out of line, then
    /// credits for the next one-call posts (the batch left none).
    #[cold]
    #[inline(never)]
    fn post_send_cold(
        &mut self,
        wr_id: u64,
        flags: SendFlags,
        data: SendData<'_>,
    ) -> Result<(), PostError> {
        let mut b = self.start();
        let w = b.send(wr_id)?.with_flags(flags);
        match data {
            SendData::Inline(bytes) => w.inline_data(bytes),
            SendData::Ud(av, remote_qpn, qkey, sge) => w
                .ud_addr(av, remote_qpn, qkey)
                .and_then(|w| w.sge(sge.lkey, sge.addr, sge.length)),
            SendData::Frame(lkey, addr, frame) => w.frame(lkey, addr, frame),
        }?;
        b.complete();
        self.refresh_credits();
        Ok(())
    }

    /// Writes a one-WQEBB WQE `wqe` (index `index`, `ds` DS, work request
    /// flags `f`) built by a one-call fast path at the producer counter,
    /// its shadow entry, the counters, and rings the doorbell.
    #[inline(always)]
    fn commit_one(&mut self, wqe: &Wqebb, wr_id: u64, index: u16, f: u8, ds: u8, inline: bool) {
        let pi = self.pi;
        // The ring's mask is the shadow's too (one load, one AND for both).
        let slot = (pi & self.ring.mask()) as usize;
        self.ring.write(pi, &wqe.0);
        let meta = self.lim.meta_one | SqShadowEntry::meta_of(index, 0, fast::shadow_flags(f, 0));
        self.record_one(slot, SqShadowEntry::from_meta(wr_id, meta));
        // ---- the queue's own state (not device-visible) -----------------
        let pi = pi.wrapping_add(1);
        self.pi = pi;
        // (With `sig_all` the count is never read: no test of it here.)
        if f & batch::F_SIGNALED != 0 {
            self.sig_pi = pi;
        }
        // ---- publish ------------------------------------------------------
        self.db.ring::<P>(doorbell::Publish {
            pi,
            last_wqe: core::slice::from_ref(wqe),
            last_ds: ds,
            nreq: 1,
            inline,
        });
    }

    /// Whether the one-SGE fast path formats `op` with an SGE of `length`
    /// bytes: RC/UC, an operation the QP allows, a non-empty SGE (libmlx5
    /// skips empty ones: another DS count). (A queue without SGEs fails the
    /// room test: `post_limit`.)
    #[inline(always)]
    fn sge_fast_ok(&self, op: batch::Op, length: u32) -> bool {
        let qp = self.qp_type();
        matches!(qp, QpType::Rc | QpType::Uc)
            && matches!(op, batch::Op::Write | batch::Op::Read | batch::Op::Send)
            && op.allowed(qp, &self.lim)
            && length != 0
    }

    /// Records a WQE of `wqebbs` WQEBBs at producer counter `pi` in the
    /// shadow: its entry in the first slot, empty entries in the others.
    #[inline(always)]
    fn record(&mut self, pi: u32, wr_id: u64, index: u16, wqebbs: u32, flags: u8) {
        let mask = self.mask;
        let slot = (pi & mask) as usize;
        debug_assert!(slot < self.shadow.len());
        // SAFETY: `slot <= mask = wqe_cnt - 1`, and the constructor refused
        // a shadow of fewer than `wqe_cnt` entries (`ShadowTooSmall`); the
        // shadow is never replaced. (The test would cost every WQE two
        // instructions.)
        let e = unsafe { self.shadow.get_unchecked_mut(slot) };
        *e = SqShadowEntry::new(wr_id, index, wqebbs as u8, flags);
        for k in 1..wqebbs {
            if let Some(e) = self.shadow.get_mut((pi.wrapping_add(k) & mask) as usize) {
                *e = SqShadowEntry::EMPTY;
            }
        }
    }

    /// WQEBBs posted since the last WQE that requested a CQE (meaningless
    /// with `sig_all`, where every WQE requests one).
    #[inline(always)]
    pub(super) fn unsignaled(&self) -> u32 {
        self.pi.wrapping_sub(self.sig_pi)
    }

    /// Sets the unsignalled count at the current producer counter.
    #[inline(always)]
    pub(super) fn set_unsignaled(&mut self, unsignaled: u32) {
        self.sig_pi = self.pi.wrapping_sub(unsignaled);
    }

    /// Recomputes the fast-path credits from the queue's state (see
    /// [`SendQueue::fast_end`] for the invariant), and resets the
    /// unsignalled count of a `sig_all` queue (never read there).
    #[inline]
    pub(super) fn refresh_credits(&mut self) {
        let room = self.post_limit.saturating_sub(in_flight(self.pi, self.ci));
        let unforced = if self.lim.sig_bits != 0 {
            self.sig_pi = self.pi;
            u32::MAX
        } else {
            // `force_at` is at least 1, and `unsignaled < force_at` after
            // every post (the rule resets it when it reaches `force_at`).
            self.lim
                .force_at
                .saturating_sub(1)
                .saturating_sub(self.unsignaled())
        };
        let credits = if self.fm_cache != 0 {
            0
        } else {
            core::cmp::min(room, unforced)
        };
        self.fast_end = self.pi.wrapping_add(credits);
    }

    /// The one-call posts of one SGE (see [`SendQueue::post_rdma_write`]).
    ///
    /// The fast path spends one credit ([`SendQueue::fast_end`]): with one
    /// in hand there is room, no CQE to force and no fence to inherit, so
    /// `fm_ce_se` is the work request's own flag bits (they are the
    /// control segment's: `batch::F_SIGNALED`) plus `sig_all`'s, as
    /// [`fast::ctrl_flags`] would compute it. Without a credit, the full
    /// path (out of line) posts and refreshes the credits.
    #[inline(always)]
    fn post_sge(
        &mut self,
        op: batch::Op,
        wr_id: u64,
        rkey: u32,
        raddr: u64,
        sge: Sge,
        flags: SendFlags,
    ) -> Result<(), PostError> {
        // ---- checks: operation and SGE, then one credit (room, no forced
        //      CQE, no inherited fence); nothing fails after them ----------
        let pi = self.pi;
        if !self.sge_fast_ok(op, sge.length) || pi == self.fast_end {
            return self.post_sge_full(
                op, wr_id, rkey, raddr, sge.lkey, sge.addr, sge.length, flags,
            );
        }
        // ---- the WQE, built in registers, straight into the ring ----------
        let f = flags.0;
        let index = crate::index::wq_counter16(pi);
        let (ctrl0, ds, remote) = self.lim.sge_shape(op);
        let ctrl1 = self.lim.ctrl1_sig | fast::ctrl1_of(f);
        let wqe = fast::sge_wqebb(ctrl0, index, ctrl1, remote, rkey, raddr, sge);
        self.commit_one(&wqe, wr_id, index, f, ds, false);
        Ok(())
    }

    /// Writes the shadow entry of a one-WQEBB WQE in ring slot `slot`, a
    /// producer counter ANDed with the ring's mask.
    #[inline(always)]
    fn record_one(&mut self, slot: usize, e: SqShadowEntry) {
        debug_assert!(slot <= self.ring.mask() as usize && slot < self.shadow.len());
        // SAFETY: `slot <= ring.mask() = wqe_cnt - 1` (the caller ANDs with
        // it; the ring holds the `wqe_cnt` WQEBBs of `SqRawParts`), and the
        // constructor refused a shadow of fewer than `wqe_cnt` entries
        // (`ShadowTooSmall`); the shadow is never replaced.
        *unsafe { self.shadow.get_unchecked_mut(slot) } = e;
    }

    /// The one-call post without credits: every test ([`fast::ctrl_flags`]:
    /// forced CQE, inherited fence; room), then the credits are refreshed.
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn post_sge_full(
        &mut self,
        op: batch::Op,
        wr_id: u64,
        rkey: u32,
        raddr: u64,
        lkey: u32,
        addr: u64,
        length: u32,
        flags: SendFlags,
    ) -> Result<(), PostError> {
        let sge = Sge { addr, length, lkey };
        let pi = self.pi;
        if !self.sge_fast_ok(op, sge.length) || in_flight(pi, self.ci) >= self.post_limit {
            return self.post_sge_cold(
                op, wr_id, rkey, raddr, sge.lkey, sge.addr, sge.length, flags,
            );
        }
        let unsignaled = if self.lim.sig_bits != 0 {
            0
        } else {
            self.unsignaled()
        };
        let (fm_ce_se, shadow_flags) =
            fast::ctrl_flags(flags.0, &self.lim, self.fm_cache, unsignaled, 1);
        let index = crate::index::wq_counter16(pi);
        let (ctrl0, ds, remote) = self.lim.sge_shape(op);
        let ctrl1 = fast::ctrl1_of(fm_ce_se);
        let wqe = fast::sge_wqebb(ctrl0, index, ctrl1, remote, rkey, raddr, sge);
        self.ring.write(pi, &wqe.0);
        self.record(pi, wr_id, index, 1, shadow_flags);
        let pi = pi.wrapping_add(1);
        self.pi = pi;
        self.fm_cache = 0;
        self.set_unsignaled(if shadow_flags & SHADOW_CQE != 0 {
            0
        } else {
            unsignaled + 1
        });
        self.refresh_credits();
        self.db.ring::<P>(doorbell::Publish {
            pi,
            last_wqe: core::slice::from_ref(&wqe),
            last_ds: ds,
            nreq: 1,
            inline: false,
        });
        Ok(())
    }

    /// [`SendQueue::post_sge`] through a batch, out of line.
    #[cold]
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn post_sge_cold(
        &mut self,
        op: batch::Op,
        wr_id: u64,
        rkey: u32,
        raddr: u64,
        lkey: u32,
        addr: u64,
        length: u32,
        flags: SendFlags,
    ) -> Result<(), PostError> {
        let sge = Sge { addr, length, lkey };
        let mut b = self.start();
        let (st, r) = batch::remote_sge_cold(
            b.sq, b.st, op, wr_id, rkey, raddr, sge.lkey, sge.addr, sge.length, flags,
        );
        b.st = st;
        r?;
        b.complete();
        Ok(())
    }

    /// `loom` models only: leaves out the to-device barrier before the
    /// doorbell record (to show a model is not vacuous).
    #[cfg(loom)]
    #[doc(hidden)]
    pub fn loom_break_to_device(&mut self) {
        self.db.loom.skip_to_device = true;
    }

    /// `loom` models only: leaves out the barrier between the doorbell
    /// record and the register write.
    #[cfg(loom)]
    #[doc(hidden)]
    pub fn loom_break_wc_start(&mut self) {
        self.db.loom.skip_wc_start = true;
    }

    /// `loom` models only: a `loom` atomic that receives the first 8 bytes
    /// of every later register write (the doorbell as the device sees it).
    #[cfg(loom)]
    #[doc(hidden)]
    pub fn loom_register_mirror(&mut self) -> std::sync::Arc<DeviceWord<u64>> {
        let m = std::sync::Arc::new(DeviceWord::new(0));
        self.db.loom.mirror = Some(std::sync::Arc::clone(&m));
        m
    }

    /// The device's view of the ring, for a `loom` model.
    #[cfg(loom)]
    #[doc(hidden)]
    pub fn loom_ring_reader(&self) -> crate::ring::WqebbReader {
        self.ring.device_reader()
    }

    /// The QP type: a constant when `Q` fixes it.
    #[inline(always)]
    pub fn qp_type(&self) -> QpType {
        match Q::TYPE {
            Some(t) => t,
            None => self.lim.qp_type,
        }
    }

    /// Number of WQEBBs in the ring.
    pub fn wqe_cnt(&self) -> u32 {
        self.size.entries()
    }

    /// The free-running producer counter (next WQEBB to post; the doorbell
    /// record holds its low 16 bits).
    pub fn producer(&self) -> u32 {
        self.pi
    }

    /// The free-running consumer counter (first WQEBB not yet retired).
    pub fn consumer(&self) -> u32 {
        self.ci
    }

    /// WQEBBs posted and not yet retired.
    pub fn outstanding(&self) -> u32 {
        in_flight(self.pi, self.ci)
    }

    /// WQEBBs free for posting.
    pub fn free_wqebbs(&self) -> u32 {
        self.size.entries().saturating_sub(self.outstanding())
    }

    /// Byte offset, within the BlueFlame register, of the half the next
    /// doorbell writes (rdma-core `bf->offset`).
    pub fn bf_offset(&self) -> usize {
        self.db.offset()
    }

    /// The fence the next WQE inherits (rdma-core `fm_cache`).
    pub fn fm_cache(&self) -> u8 {
        self.fm_cache
    }

    /// The shadow entry of ring slot `slot` (`None` past the ring).
    ///
    /// This queue's own posts write every slot of a WQE (the others with
    /// size 0); a [`TxQueue`](mpw::TxQueue) writes a WQE's first slot only,
    /// so a slot inside one of its WQEs may hold a stale entry of an
    /// earlier ring pass: find its WQEs by walking from the consumer, WQE
    /// by WQE ([`SqShadowEntry::wqebbs`]).
    pub fn shadow(&self, slot: usize) -> Option<&SqShadowEntry> {
        if slot < self.size.entries() as usize {
            self.shadow.get(slot)
        } else {
            None
        }
    }

    /// Checks a requester completion's `wqe_counter` against the shadow and
    /// returns the WQEBB offset (from the consumer) of the WQE it names and
    /// that WQE's shadow entry.
    #[inline(always)]
    fn check_counter(&self, wqe_counter: u16) -> Result<(u32, SqShadowEntry), RetireError> {
        let dist = u32::from(wqe_counter.wrapping_sub(self.ci as u16));
        let flight = self.outstanding();
        // The slot from the counter alone: `ci + dist` and `wqe_counter`
        // agree in their low 16 bits, and `mask < 2^16` (the constructor
        // refused larger rings), so they name the same slot. Not through
        // `ci`: the load of the entry, whose size gives the next `ci`, then
        // does not wait for the previous completion's (a burst of
        // requester completions is a chain through `ci` otherwise).
        let slot = (u32::from(wqe_counter) & self.mask) as usize;
        debug_assert_eq!(slot, (self.ci.wrapping_add(dist) & self.mask) as usize);
        debug_assert!(slot < self.shadow.len());
        // SAFETY: `slot <= mask = wqe_cnt - 1`, and the constructor refused
        // a shadow of fewer than `wqe_cnt` entries (`ShadowTooSmall`); the
        // shadow is never replaced.
        let entry = *unsafe { self.shadow.get_unchecked(slot) };
        // This queue's own posts write every slot in flight (middles with
        // size 0), so a non-zero size marks a real WQE start. (A Tx queue,
        // `mpw`, writes first slots only and checks its entries' tag on
        // top: `TxQueue::retire`.) A WQE of at least one WQEBB that ends
        // within the flight starts inside it: `dist < flight` follows.
        let wqebbs = u32::from(entry.wqebbs());
        if wqebbs == 0 || entry.index() != wqe_counter || dist + wqebbs > flight {
            return Err(Self::counter_error(wqe_counter, dist, flight));
        }
        Ok((dist, entry))
    }

    /// The error of a `wqe_counter` [`Self::check_counter`] refused.
    #[cold]
    #[inline(never)]
    fn counter_error(wqe_counter: u16, dist: u32, flight: u32) -> RetireError {
        if dist >= flight {
            RetireError::NotInFlight { wqe_counter }
        } else {
            RetireError::NotWqeStart { wqe_counter }
        }
    }

    /// Retires the WQE a requester completion names (its `wqe_counter`)
    /// and every WQE before it, returning their WQEBBs. O(1).
    pub fn retire(&mut self, wqe_counter: u16) -> Result<Retired, RetireError> {
        let (dist, entry) = self.check_counter(wqe_counter)?;
        let freed = dist + u32::from(entry.wqebbs());
        self.ci = self.ci.wrapping_add(freed);
        Ok(Retired {
            wr_id: entry.wr_id,
            wqebbs: freed,
            wr_opcode: entry.wr_opcode(),
        })
    }

    /// Like [`SendQueue::retire`], and calls `f` for every retired work
    /// request, oldest first.
    pub fn retire_each(
        &mut self,
        wqe_counter: u16,
        mut f: impl FnMut(RetiredWr),
    ) -> Result<Retired, RetireError> {
        let (dist, entry) = self.check_counter(wqe_counter)?;
        let end = self.ci.wrapping_add(dist);
        let mut at = self.ci;
        while at != end {
            let e = match self.shadow.get(self.size.slot(at)) {
                Some(e) if e.wqebbs() != 0 && in_flight(end, at) >= u32::from(e.wqebbs()) => *e,
                // Cannot happen with a consistent shadow; stop rather than
                // report garbage (the counter itself was valid).
                _ => break,
            };
            f(RetiredWr {
                wr_id: e.wr_id,
                signaled: e.signaled(),
                last: false,
            });
            at = at.wrapping_add(u32::from(e.wqebbs()));
        }
        f(RetiredWr {
            wr_id: entry.wr_id,
            signaled: entry.signaled(),
            last: true,
        });
        let freed = dist + u32::from(entry.wqebbs());
        self.ci = self.ci.wrapping_add(freed);
        Ok(Retired {
            wr_id: entry.wr_id,
            wqebbs: freed,
            wr_opcode: entry.wr_opcode(),
        })
    }
}
