//! The posting batch and its work-request builders: validation, then WQE
//! formatting into the staging area (see the parent module for the design).
#![forbid(unsafe_code)]

use zerocopy::{FromBytes, IntoBytes};

use super::doorbell::{DoorbellPolicy, Publish};
use super::kind::{AnyQp, QpKind};
use super::{Limits, PostError, QpType, Recorded, SendQueue, SHADOW_CQE, SHADOW_SIGNALED};
use crate::index::{in_flight, wq_counter16};
use crate::prm::{
    umr, AtomicSeg, Av, Be16, Be32, Be64, CtrlSeg, DataSeg, DqpDct, EthCsFlags, EthSeg, FmCeSe,
    InlineByteCount, InlineSeg, MaskedAtomicSeg64, MaskedCs32Seg, MaskedFa32Seg, MaskedFa64Seg,
    MkeyContextSeg, OpmodIdxOpcode, RaddrSeg, SendOpcode, UmrCtrlSeg, UmrKlmSeg, VlanInsert,
    XrcSeg, ETH_L2_INLINE_HEADER_SIZE, ETH_L2_MIN_HEADER_SIZE, ETH_WQE_L3_CSUM, ETH_WQE_L4_CSUM,
    EXTENDED_UD_AV, MAX_DS, OPC_MOD_EXT_ATOMIC_4B, OPC_MOD_EXT_ATOMIC_8B, SEND_WQE_BB, SEND_WQE_DS,
    WQE_CTRL_CQ_UPDATE, WQE_CTRL_FENCE, WQE_CTRL_INITIATOR_SMALL_FENCE, WQE_CTRL_SOLICITED,
};

/// A scatter/gather entry (`struct ibv_sge`): local memory the device reads
/// (sends, writes) or writes (reads, atomic results) through `lkey`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sge {
    /// Virtual address.
    pub addr: u64,
    /// Length in bytes; zero-length entries are skipped, as libmlx5 does.
    pub length: u32,
    /// Local key of the memory region.
    pub lkey: u32,
}

impl Sge {
    /// An SGE of `length` bytes at `addr` in the region of `lkey`.
    pub const fn new(lkey: u32, addr: u64, length: u32) -> Self {
        Self { addr, length, lkey }
    }
}

/// A piece of a raw Ethernet frame in registered memory, with its bytes at
/// hand: the device needs the first bytes of the frame copied into the WQE
/// (the inline L2 header, [`super::SqConfig::eth_min_inline`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameSge<'d> {
    /// Local key of the memory region holding the piece.
    pub lkey: u32,
    /// Device-visible address of `data[0]`.
    pub addr: u64,
    /// The bytes of the piece (its length is the SGE length).
    pub data: &'d [u8],
}

impl<'d> FrameSge<'d> {
    /// A frame piece whose device address is its address in this process
    /// (memory registered with `ibv_reg_mr` on this process's addresses).
    pub fn new(lkey: u32, data: &'d [u8]) -> Self {
        Self {
            lkey,
            addr: data.as_ptr() as u64,
            data,
        }
    }

    /// A frame piece at an explicit device address (an IOVA, or memory
    /// mapped at another address).
    pub const fn with_addr(lkey: u32, addr: u64, data: &'d [u8]) -> Self {
        Self { lkey, addr, data }
    }

    fn len32(&self) -> u32 {
        u32::try_from(self.data.len()).unwrap_or(u32::MAX)
    }
}

/// The kind of a memory window (`enum ibv_mw_type`): which UMR a bind
/// builds ([`Batch::bind_mw`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MwType {
    /// `IBV_MW_TYPE_1`: bound to the protection domain; the mkey's QPN field
    /// stays all ones and the UMR checks neither the QPN nor the free bit.
    Type1,
    /// `IBV_MW_TYPE_2`: bound to this QP; the UMR writes the QPN and, for a
    /// bind of non-zero length, fails unless the window is free.
    Type2,
}

/// A memory-window bind (`IBV_WR_BIND_MW`, `ibv_wr_bind_mw`): the window,
/// its new rkey and what it grants (`struct ibv_mw_bind_info`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MwBind {
    /// The window's kind (`ibv_mw.type`). `ibv_wr_bind_mw` always builds a
    /// type 2 bind; `ibv_post_send` takes the window's own type.
    pub mw_type: MwType,
    /// The window's current rkey (`ibv_mw.rkey`): the mkey the UMR changes,
    /// carried in the control segment's immediate.
    pub mw_rkey: u32,
    /// The rkey after the bind (`bind_mw.rkey`); its low 8 bits become the
    /// mkey variant.
    pub new_rkey: u32,
    /// Local key of the memory region the window lies in (`bind_info.mr`).
    pub mr_lkey: u32,
    /// Start of the window (`bind_info.addr`).
    pub addr: u64,
    /// Length of the window in bytes (`bind_info.length`); 0 unbinds it, at
    /// most 2 GiB (one KLM): longer is [`PostError::BindTooLong`].
    pub length: u64,
    /// Access the window grants (`bind_info.mw_access_flags`, the
    /// `ibv_access_flags` bits `MwBind::LOCAL_WRITE`, `REMOTE_WRITE`,
    /// `REMOTE_READ`, `REMOTE_ATOMIC`, `ZERO_BASED`; other bits are
    /// ignored, as libmlx5 ignores them).
    pub access: u32,
}

impl MwBind {
    /// `IBV_ACCESS_LOCAL_WRITE`.
    pub const LOCAL_WRITE: u32 = 1 << 0;
    /// `IBV_ACCESS_REMOTE_WRITE`.
    pub const REMOTE_WRITE: u32 = 1 << 1;
    /// `IBV_ACCESS_REMOTE_READ`.
    pub const REMOTE_READ: u32 = 1 << 2;
    /// `IBV_ACCESS_REMOTE_ATOMIC`.
    pub const REMOTE_ATOMIC: u32 = 1 << 3;
    /// `IBV_ACCESS_ZERO_BASED`: remote addresses count from the window's
    /// start (the mkey's start address is 0).
    pub const ZERO_BASED: u32 = 1 << 5;
    /// The longest window one KLM describes (libmlx5 `set_bind_wr`).
    pub const MAX_LENGTH: u64 = 1 << 31;
}

/// The operation of a work request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Op {
    Send,
    SendImm,
    SendInv,
    Write,
    WriteImm,
    Read,
    CmpSwp,
    FetchAdd,
    MaskedCs32,
    MaskedCs64,
    MaskedFa32,
    MaskedFa64,
    LocalInv,
    Nop,
    Tso,
    Driver1,
    BindMw,
}

impl Op {
    /// Opcode and opmod of the control segment (libmlx5 `mlx5_ib_opcode`;
    /// masked atomics: UCX `UCT_IB_MLX5_OPMOD_EXT_ATOMIC`).
    pub(super) const fn opcode(self) -> (SendOpcode, u8) {
        match self {
            Op::Send => (SendOpcode::Send, 0),
            Op::SendImm => (SendOpcode::SendImm, 0),
            Op::SendInv => (SendOpcode::SendInval, 0),
            Op::Write => (SendOpcode::RdmaWrite, 0),
            Op::WriteImm => (SendOpcode::RdmaWriteImm, 0),
            Op::Read => (SendOpcode::RdmaRead, 0),
            Op::CmpSwp => (SendOpcode::AtomicCs, 0),
            Op::FetchAdd => (SendOpcode::AtomicFa, 0),
            Op::MaskedCs32 => (SendOpcode::AtomicMaskedCs, OPC_MOD_EXT_ATOMIC_4B),
            Op::MaskedCs64 => (SendOpcode::AtomicMaskedCs, OPC_MOD_EXT_ATOMIC_8B),
            Op::MaskedFa32 => (SendOpcode::AtomicMaskedFa, OPC_MOD_EXT_ATOMIC_4B),
            Op::MaskedFa64 => (SendOpcode::AtomicMaskedFa, OPC_MOD_EXT_ATOMIC_8B),
            // libmlx5 implements local invalidate as a UMR WQE.
            Op::LocalInv => (SendOpcode::Umr, 0),
            Op::Nop => (SendOpcode::Nop, 0),
            Op::Tso => (SendOpcode::Tso, 0),
            // libmlx5 `mlx5_ib_opcode[IBV_WR_DRIVER1]`.
            Op::Driver1 => (SendOpcode::Umr, 0),
            // libmlx5 binds a memory window with a UMR WQE.
            Op::BindMw => (SendOpcode::Umr, 0),
        }
    }

    /// Atomic operand size in bytes (the result SGE's byte count), 0 if not atomic.
    fn atomic_size(self) -> u32 {
        match self {
            Op::CmpSwp | Op::FetchAdd | Op::MaskedCs64 | Op::MaskedFa64 => 8,
            Op::MaskedCs32 | Op::MaskedFa32 => 4,
            _ => 0,
        }
    }

    /// DS of the operation's own segments (remote address, atomic, UMR).
    fn op_ds(self) -> u32 {
        match self {
            Op::Write | Op::WriteImm | Op::Read => 1,
            Op::CmpSwp | Op::FetchAdd | Op::MaskedCs32 | Op::MaskedFa32 | Op::MaskedFa64 => 2,
            Op::MaskedCs64 => 3,
            // (A bind of non-zero length adds its KLM, `BIND_KLM_DS`, in `encode`.)
            Op::LocalInv | Op::BindMw => UMR_CTRL_DS + MKEY_CTX_DS,
            _ => 0,
        }
    }

    /// Whether the QP type (and its capabilities) allows the operation
    /// (libmlx5 `MLX5_SUPPORTED_SEND_OPS_FLAGS_*`, plus NOP everywhere).
    #[inline(always)]
    pub(super) fn allowed(self, qp: QpType, lim: &Limits) -> bool {
        use QpType::*;
        match self {
            // `ibv_post_send` checks no QP type for IBV_WR_DRIVER1.
            Op::Send | Op::Nop | Op::Driver1 => true,
            Op::SendImm => qp != RawPacket,
            Op::SendInv | Op::Write | Op::WriteImm | Op::LocalInv | Op::BindMw => {
                matches!(qp, Rc | Uc | Xrc)
            }
            Op::Read => matches!(qp, Rc | Xrc),
            Op::CmpSwp
            | Op::FetchAdd
            | Op::MaskedCs32
            | Op::MaskedCs64
            | Op::MaskedFa32
            | Op::MaskedFa64 => matches!(qp, Rc | Xrc) && lim.atomics,
            Op::Tso => matches!(qp, RawPacket | Ud) && lim.max_tso_header > 0,
        }
    }
}

// UMR segments of libmlx5's local invalidate (`qp.c` `set_umr_control_seg`,
// `set_umr_mkey_seg` with a zero-length bind): `UmrCtrlSeg`, `MkeyContextSeg`.
/// DS of the UMR control segment (48 bytes).
const UMR_CTRL_DS: u32 = (UmrCtrlSeg::SIZE / SEND_WQE_DS) as u32;
/// DS of the mkey context segment (64 bytes).
const MKEY_CTX_DS: u32 = (MkeyContextSeg::SIZE / SEND_WQE_DS) as u32;
/// UMR control `flags` of a local invalidate.
const UMR_CTRL_FLAGS_LOCAL_INV: u8 =
    umr::CTRL_FLAG_INLINE | umr::CTRL_FLAG_TRANSLATION_OFFSET | umr::CTRL_FLAG_CHECK_QPN;
/// UMR control `mkey_mask` of a local invalidate: the free bit, the QPN and
/// the mkey variant.
const UMR_MKEY_MASK_LOCAL_INV: u64 = umr::MKEY_MASK_FREE | umr::MKEY_MASK_QPN | umr::MKEY_MASK_MKEY;
/// Mkey context `qpn_mkey` of a free: QPN field all ones, mkey variant 0.
const MKEY_QPN_FREE: u32 = umr::MKEY_QPN_NONE << 8;
/// DS of a bind's translation: one KLM padded to 64 bytes (libmlx5
/// `set_umr_data_seg`), `klm_octowords` 4 (`get_klm_octo(1)`).
const BIND_KLM_DS: u32 = 4;
/// UMR control `mkey_mask` bits of a bind of non-zero length, besides
/// [`UMR_MKEY_MASK_BIND_ANY`] (libmlx5 `set_umr_control_seg`).
const UMR_MKEY_MASK_BIND_RANGE: u64 = umr::MKEY_MASK_LEN
    | umr::MKEY_MASK_START_ADDR
    | umr::MKEY_MASK_ACCESS_LOCAL_WRITE
    | umr::MKEY_MASK_ACCESS_REMOTE_READ
    | umr::MKEY_MASK_ACCESS_REMOTE_WRITE
    | umr::MKEY_MASK_ACCESS_ATOMIC;
/// UMR control `mkey_mask` bits of every bind (type 2 adds the QPN).
const UMR_MKEY_MASK_BIND_ANY: u64 = umr::MKEY_MASK_FREE | umr::MKEY_MASK_MKEY;

// Work-request flags. The first three are the control segment's own bits
// (`fm_ce_se`), so that the fast paths move them into the WQE with a mask;
// the checksum flag uses a bit `fm_ce_se` leaves reserved (bit 0).
pub(super) const F_SIGNALED: u8 = WQE_CTRL_CQ_UPDATE;
pub(super) const F_SOLICITED: u8 = WQE_CTRL_SOLICITED;
pub(super) const F_FENCE: u8 = WQE_CTRL_FENCE;
pub(super) const F_CSUM: u8 = 1 << 0;
const _: () = assert!(F_CSUM & (F_SIGNALED | F_SOLICITED | F_FENCE) == 0);

/// Everything a work request's builder and setters collected.
#[derive(Debug, Clone, Copy)]
pub(super) struct Desc<'x> {
    pub(super) wr_id: u64,
    pub(super) op: Op,
    pub(super) flags: u8,
    pub(super) imm: u32,
    pub(super) raddr: u64,
    pub(super) rkey: u32,
    /// Atomic operands: CS `[swap, compare, swap_mask, compare_mask]`,
    /// FA `[add, field_boundary, 0, 0]`. A bind (`imm` the window's rkey,
    /// `rkey` the new one, `raddr` the start): `[length, mr_lkey, access,
    /// 1 or 2 (the window type)]`.
    args: [u64; 4],
    pub(super) ud: Option<(&'x Av, u32, u32)>,
    xrc_srqn: Option<u32>,
    tso_hdr: &'x [u8],
    mss: u16,
    /// The VLAN tag (TCI) to insert ([`Wr::vlan`]).
    pub(super) vlan: Option<u16>,
}

impl<'x> Desc<'x> {
    /// A field-by-field copy: a new value, built where it is needed (the
    /// cold path), so that the builder's own descriptor can stay in
    /// registers on the fast path.
    #[inline(always)]
    pub(super) fn copied(&self) -> Self {
        Self {
            wr_id: self.wr_id,
            op: self.op,
            flags: self.flags,
            imm: self.imm,
            raddr: self.raddr,
            rkey: self.rkey,
            args: [self.args[0], self.args[1], self.args[2], self.args[3]],
            ud: self.ud,
            xrc_srqn: self.xrc_srqn,
            tso_hdr: self.tso_hdr,
            mss: self.mss,
            vlan: self.vlan,
        }
    }

    pub(super) fn new(wr_id: u64, op: Op) -> Self {
        Self {
            wr_id,
            op,
            flags: 0,
            imm: 0,
            raddr: 0,
            rkey: 0,
            args: [0; 4],
            ud: None,
            xrc_srqn: None,
            tso_hdr: &[],
            mss: 0,
            vlan: None,
        }
    }
}

/// The data of a work request, as its last setter gave it.
#[derive(Clone, Copy)]
pub(super) enum Data<'d> {
    None,
    Sges(&'d [Sge]),
    Frames(&'d [FrameSge<'d>]),
    Inline(&'d [&'d [u8]]),
}

/// A posting batch (`ibv_wr_start` … `ibv_wr_complete` / `ibv_wr_abort`).
///
/// Work requests are validated and formatted into the staging area as they
/// are built; [`Batch::complete`] copies them into the ring and rings the
/// doorbell once. Dropping the batch (or [`Batch::abort`]) discards them:
/// ring, doorbell record and register are untouched.
#[derive(Debug)]
#[must_use = "a batch does nothing until complete(); dropping it aborts"]
pub struct Batch<'q, 'a, P: DoorbellPolicy, Q: QpKind = AnyQp> {
    pub(super) sq: &'q mut SendQueue<'a, P, Q>,
    pub(super) st: BatchState,
}

/// The counters of a batch, kept apart from the queue reference so that the
/// cold fallbacks take and return them by value: the hot path then keeps
/// them in registers (a `&mut Batch` escaping into an out-of-line call would
/// pin them in memory, two instructions per field per WQE).
///
/// (`repr(C)`, the four counters a new batch zeroes first: one store.)
#[derive(Debug, Clone, Copy)]
#[repr(C)]
pub(super) struct BatchState {
    /// WQEBBs staged.
    pub(super) used: u32,
    /// WQEs staged.
    pub(super) nreq: u32,
    /// Staging index of the last WQE.
    pub(super) last: u32,
    /// End of the batch's one-SGE credits (`Batch::push_sge`): while `used`
    /// is below it, a one-WQEBB WQE has room in the ring and the staging
    /// area, reaches no forced CQE even if unsignalled, and inherits no
    /// fence. WQEs staged otherwise keep it (they advance `used`, which the
    /// credits are counted against, by their WQEBBs, and can only reset
    /// the unsignalled count), except the generic encoder's, which may leave
    /// a fence to inherit (a local invalidate): it sets it to 0 (no credit).
    pub(super) credit_end: u32,
    /// WQEBBs since the last WQE that requested a CQE.
    pub(super) unsignaled: u32,
    /// DS of the last WQE.
    pub(super) last_ds: u8,
    /// Whether any WQE carried inline data (libmlx5 `inl_wqe`).
    pub(super) inline: bool,
    /// The fence the next WQE inherits.
    pub(super) fm_cache: u8,
}

/// One work request being built: returned by a [`Batch`] builder call,
/// finished by a data setter or [`Wr::post`]. Dropping it posts nothing.
#[derive(Debug)]
#[must_use = "a work request is posted only by a data setter or post()"]
pub struct Wr<'b, 'x, 'q, 'a, P: DoorbellPolicy, Q: QpKind = AnyQp> {
    batch: &'b mut Batch<'q, 'a, P, Q>,
    d: Desc<'x>,
}

impl<'q, 'a, P: DoorbellPolicy, Q: QpKind> Batch<'q, 'a, P, Q> {
    #[inline(always)]
    pub(super) fn new(sq: &'q mut SendQueue<'a, P, Q>) -> Self {
        let st = BatchState {
            used: 0,
            nreq: 0,
            last: 0,
            credit_end: 0,
            // (With `sig_all` the value does not matter: every WQE requests
            // a CQE anyway, and the first one resets the count. It stays
            // below the ring size: only the one-call fast path adds to it
            // without resetting it, at most its credits.)
            unsignaled: sq.unsignaled(),
            last_ds: 0,
            inline: false,
            fm_cache: sq.fm_cache,
        };
        Self { sq, st }
    }

    /// Number of work requests in the batch.
    pub fn len(&self) -> u32 {
        self.st.nreq
    }

    /// Whether the batch holds no work request.
    pub fn is_empty(&self) -> bool {
        self.st.nreq == 0
    }

    /// WQEBBs the batch occupies.
    pub fn wqebbs(&self) -> u32 {
        self.st.used
    }

    #[inline(always)]
    fn begin<'x>(&mut self, wr_id: u64, op: Op) -> Result<Wr<'_, 'x, 'q, 'a, P, Q>, PostError> {
        if !op.allowed(self.sq.qp_type(), &self.sq.lim) {
            return Err(PostError::UnsupportedOp);
        }
        Ok(Wr {
            batch: self,
            d: Desc::new(wr_id, op),
        })
    }

    /// A send (`ibv_wr_send`); on a raw Ethernet QP, a frame send.
    #[inline]
    pub fn send<'x>(&mut self, wr_id: u64) -> Result<Wr<'_, 'x, 'q, 'a, P, Q>, PostError> {
        self.begin(wr_id, Op::Send)
    }

    /// `IBV_WR_DRIVER1` as libmlx5 v44's `ibv_post_send` posts it: the
    /// control segment carries the UMR opcode (`mlx5_ib_opcode`), followed
    /// by exactly the segments a [`Self::send`] of the same data would have
    /// (datagram, Ethernet segment and inline header, data); no UMR
    /// segments and no immediate. For replaying libmlx5 traces and vectors
    /// byte for byte: the device sees a UMR WQE without its UMR segments.
    #[inline]
    pub fn driver1<'x>(&mut self, wr_id: u64) -> Result<Wr<'_, 'x, 'q, 'a, P, Q>, PostError> {
        self.begin(wr_id, Op::Driver1)
    }

    /// A send with immediate data (`ibv_wr_send_imm`). `imm` is the value
    /// in host order; the WQE carries it big-endian (ibverbs callers pass
    /// `htobe32(imm)` for the same bytes).
    #[inline]
    pub fn send_imm<'x>(
        &mut self,
        wr_id: u64,
        imm: u32,
    ) -> Result<Wr<'_, 'x, 'q, 'a, P, Q>, PostError> {
        let mut wr = self.begin(wr_id, Op::SendImm)?;
        wr.d.imm = imm;
        Ok(wr)
    }

    /// A send that invalidates `invalidate_rkey` at the responder (`ibv_wr_send_inv`).
    #[inline]
    pub fn send_inv<'x>(
        &mut self,
        wr_id: u64,
        invalidate_rkey: u32,
    ) -> Result<Wr<'_, 'x, 'q, 'a, P, Q>, PostError> {
        let mut wr = self.begin(wr_id, Op::SendInv)?;
        wr.d.imm = invalidate_rkey;
        Ok(wr)
    }

    /// An RDMA write to `remote_addr` in the region of `rkey` (`ibv_wr_rdma_write`).
    #[inline]
    pub fn rdma_write<'x>(
        &mut self,
        wr_id: u64,
        rkey: u32,
        remote_addr: u64,
    ) -> Result<Wr<'_, 'x, 'q, 'a, P, Q>, PostError> {
        self.remote(wr_id, Op::Write, rkey, remote_addr)
    }

    /// An RDMA write with immediate data (`ibv_wr_rdma_write_imm`); `imm` in host order.
    #[inline]
    pub fn rdma_write_imm<'x>(
        &mut self,
        wr_id: u64,
        rkey: u32,
        remote_addr: u64,
        imm: u32,
    ) -> Result<Wr<'_, 'x, 'q, 'a, P, Q>, PostError> {
        let mut wr = self.remote(wr_id, Op::WriteImm, rkey, remote_addr)?;
        wr.d.imm = imm;
        Ok(wr)
    }

    /// An RDMA read from `remote_addr` into the SGEs (`ibv_wr_rdma_read`).
    #[inline]
    pub fn rdma_read<'x>(
        &mut self,
        wr_id: u64,
        rkey: u32,
        remote_addr: u64,
    ) -> Result<Wr<'_, 'x, 'q, 'a, P, Q>, PostError> {
        self.remote(wr_id, Op::Read, rkey, remote_addr)
    }

    /// An 8-byte atomic compare-and-swap (`ibv_wr_atomic_cmp_swp`); the SGE
    /// receives the old value (its byte count is written as 8).
    #[inline]
    pub fn atomic_cmp_swp<'x>(
        &mut self,
        wr_id: u64,
        rkey: u32,
        remote_addr: u64,
        compare: u64,
        swap: u64,
    ) -> Result<Wr<'_, 'x, 'q, 'a, P, Q>, PostError> {
        let mut wr = self.remote(wr_id, Op::CmpSwp, rkey, remote_addr)?;
        wr.d.args = [swap, compare, 0, 0];
        Ok(wr)
    }

    /// An 8-byte atomic fetch-and-add (`ibv_wr_atomic_fetch_add`).
    #[inline]
    pub fn atomic_fetch_add<'x>(
        &mut self,
        wr_id: u64,
        rkey: u32,
        remote_addr: u64,
        add: u64,
    ) -> Result<Wr<'_, 'x, 'q, 'a, P, Q>, PostError> {
        let mut wr = self.remote(wr_id, Op::FetchAdd, rkey, remote_addr)?;
        wr.d.args = [add, 0, 0, 0];
        Ok(wr)
    }

    /// A masked ("extended") 8-byte compare-and-swap: the bits of
    /// `compare_mask` are compared, the bits of `swap_mask` swapped in
    /// (opcode `ATOMIC_MASKED_CS`, opmod 0x09).
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub fn masked_cmp_swp_u64<'x>(
        &mut self,
        wr_id: u64,
        rkey: u32,
        remote_addr: u64,
        compare: u64,
        compare_mask: u64,
        swap: u64,
        swap_mask: u64,
    ) -> Result<Wr<'_, 'x, 'q, 'a, P, Q>, PostError> {
        let mut wr = self.remote(wr_id, Op::MaskedCs64, rkey, remote_addr)?;
        wr.d.args = [swap, compare, swap_mask, compare_mask];
        Ok(wr)
    }

    /// A masked 4-byte compare-and-swap (opmod 0x08).
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub fn masked_cmp_swp_u32<'x>(
        &mut self,
        wr_id: u64,
        rkey: u32,
        remote_addr: u64,
        compare: u32,
        compare_mask: u32,
        swap: u32,
        swap_mask: u32,
    ) -> Result<Wr<'_, 'x, 'q, 'a, P, Q>, PostError> {
        let mut wr = self.remote(wr_id, Op::MaskedCs32, rkey, remote_addr)?;
        wr.d.args = [
            swap.into(),
            compare.into(),
            swap_mask.into(),
            compare_mask.into(),
        ];
        Ok(wr)
    }

    /// A masked 8-byte fetch-and-add: carries stop at the bits set in
    /// `field_boundary` (all ones turns the add into XOR) (opmod 0x09).
    #[inline]
    pub fn masked_fetch_add_u64<'x>(
        &mut self,
        wr_id: u64,
        rkey: u32,
        remote_addr: u64,
        add: u64,
        field_boundary: u64,
    ) -> Result<Wr<'_, 'x, 'q, 'a, P, Q>, PostError> {
        let mut wr = self.remote(wr_id, Op::MaskedFa64, rkey, remote_addr)?;
        wr.d.args = [add, field_boundary, 0, 0];
        Ok(wr)
    }

    /// A masked 4-byte fetch-and-add (opmod 0x08).
    #[inline]
    pub fn masked_fetch_add_u32<'x>(
        &mut self,
        wr_id: u64,
        rkey: u32,
        remote_addr: u64,
        add: u32,
        field_boundary: u32,
    ) -> Result<Wr<'_, 'x, 'q, 'a, P, Q>, PostError> {
        let mut wr = self.remote(wr_id, Op::MaskedFa32, rkey, remote_addr)?;
        wr.d.args = [add.into(), field_boundary.into(), 0, 0];
        Ok(wr)
    }

    /// A local invalidate of `invalidate_rkey` (`ibv_wr_local_inv`), built
    /// as libmlx5 builds it: a UMR WQE that frees the mkey. The next WQE
    /// gets the small-initiator fence. Finish it with [`Wr::post`].
    #[inline]
    pub fn local_inv<'x>(
        &mut self,
        wr_id: u64,
        invalidate_rkey: u32,
    ) -> Result<Wr<'_, 'x, 'q, 'a, P, Q>, PostError> {
        let mut wr = self.begin(wr_id, Op::LocalInv)?;
        wr.d.imm = invalidate_rkey;
        Ok(wr)
    }

    /// A memory-window bind (`IBV_WR_BIND_MW`, `ibv_wr_bind_mw`), built as
    /// libmlx5 builds it: a UMR WQE (UMR control segment, mkey context,
    /// and for a window of non-zero length one inline KLM) that points
    /// the window at `bind.addr .. + bind.length` of the region and gives it
    /// `bind.new_rkey` and `bind.access`. RC, UC and XRC QPs. The next WQE
    /// gets the small-initiator fence. Finish it with [`Wr::post`].
    #[inline]
    pub fn bind_mw<'x>(
        &mut self,
        wr_id: u64,
        bind: &MwBind,
    ) -> Result<Wr<'_, 'x, 'q, 'a, P, Q>, PostError> {
        let mut wr = self.begin(wr_id, Op::BindMw)?;
        if bind.length > MwBind::MAX_LENGTH {
            return Err(PostError::BindTooLong);
        }
        wr.d.imm = bind.mw_rkey;
        wr.d.rkey = bind.new_rkey;
        wr.d.raddr = bind.addr;
        let kind = match bind.mw_type {
            MwType::Type1 => 1,
            MwType::Type2 => 2,
        };
        wr.d.args = [bind.length, bind.mr_lkey.into(), bind.access.into(), kind];
        Ok(wr)
    }

    /// A NOP: a control segment alone (useful to fence, or to request a
    /// completion). Finish it with [`Wr::post`].
    #[inline]
    pub fn nop<'x>(&mut self, wr_id: u64) -> Result<Wr<'_, 'x, 'q, 'a, P, Q>, PostError> {
        self.begin(wr_id, Op::Nop)
    }

    /// A TSO (LSO) send (`ibv_wr_send_tso`): `hdr` (the L2–L4 headers, at
    /// least 14 and at most `max_tso_header` bytes) is inlined in the
    /// Ethernet segment, the payload follows as SGEs or inline data and is
    /// cut into `mss`-byte segments. Raw Ethernet QPs, and UD QPs created
    /// for LSO (IPoIB: datagram, 16-byte pad, Ethernet segment).
    #[inline]
    pub fn tso<'x>(
        &mut self,
        wr_id: u64,
        hdr: &'x [u8],
        mss: u16,
    ) -> Result<Wr<'_, 'x, 'q, 'a, P, Q>, PostError> {
        let max = usize::from(self.sq.lim.max_tso_header);
        let mut wr = self.begin(wr_id, Op::Tso)?;
        if hdr.len() < ETH_L2_MIN_HEADER_SIZE {
            return Err(PostError::TsoHeaderTooShort);
        }
        if hdr.len() > max {
            return Err(PostError::TsoHeaderTooLong);
        }
        wr.d.tso_hdr = hdr;
        wr.d.mss = mss;
        Ok(wr)
    }

    /// An RDMA write with one SGE, in one call (`ibv_wr_rdma_write` +
    /// `ibv_wr_set_sge`, with the `send_flags` of `flags`).
    ///
    /// The same WQE, checks and errors as
    /// `batch.rdma_write(wr_id, rkey, remote_addr)?` with the flags' setters
    /// and `.sge(sge.lkey, sge.addr, sge.length)`, without a builder: every
    /// value stays in registers, and an RC/UC write of a non-empty SGE is
    /// staged without a test of anything but the room. On error nothing is
    /// staged and the batch is unchanged.
    #[inline(always)]
    pub fn rdma_write_sge(
        &mut self,
        wr_id: u64,
        rkey: u32,
        remote_addr: u64,
        sge: Sge,
        flags: super::SendFlags,
    ) -> Result<(), PostError> {
        self.remote_sge(Op::Write, wr_id, rkey, remote_addr, sge, flags)
    }

    /// An RDMA read into one SGE, in one call (see [`Batch::rdma_write_sge`]).
    #[inline(always)]
    pub fn rdma_read_sge(
        &mut self,
        wr_id: u64,
        rkey: u32,
        remote_addr: u64,
        sge: Sge,
        flags: super::SendFlags,
    ) -> Result<(), PostError> {
        self.remote_sge(Op::Read, wr_id, rkey, remote_addr, sge, flags)
    }

    /// A send of one SGE, in one call (see [`Batch::rdma_write_sge`]); on
    /// UD, XRC and raw Ethernet QPs it takes the generic path (and fails
    /// there for want of an address, an SRQ number or frame bytes).
    #[inline(always)]
    pub fn send_sge(
        &mut self,
        wr_id: u64,
        sge: Sge,
        flags: super::SendFlags,
    ) -> Result<(), PostError> {
        self.remote_sge(Op::Send, wr_id, 0, 0, sge, flags)
    }

    /// The one-call posts: the fast path of RC/UC with a non-empty SGE,
    /// else the builder path, out of line.
    #[inline(always)]
    fn remote_sge(
        &mut self,
        op: Op,
        wr_id: u64,
        rkey: u32,
        raddr: u64,
        sge: Sge,
        flags: super::SendFlags,
    ) -> Result<(), PostError> {
        if self.sq.sge_fast_ok(op, sge.length) {
            return self.push_sge(wr_id, op, flags.0, rkey, raddr, sge);
        }
        let (st, r) = remote_sge_cold(
            self.sq, self.st, op, wr_id, rkey, raddr, sge.lkey, sge.addr, sge.length, flags,
        );
        self.st = st;
        r
    }

    #[inline(always)]
    fn remote<'x>(
        &mut self,
        wr_id: u64,
        op: Op,
        rkey: u32,
        raddr: u64,
    ) -> Result<Wr<'_, 'x, 'q, 'a, P, Q>, PostError> {
        let mut wr = self.begin(wr_id, op)?;
        wr.d.rkey = rkey;
        wr.d.raddr = raddr;
        Ok(wr)
    }

    /// Publishes the batch (`ibv_wr_complete`): copies its WQEs into the ring,
    /// writes the doorbell record after the to-device barrier, then one
    /// 8-byte doorbell or BlueFlame copy. Returns the number of WQEs posted.
    #[inline(always)]
    pub fn complete(self) -> u32 {
        let Batch {
            sq,
            st:
                BatchState {
                    used,
                    nreq,
                    last,
                    unsignaled,
                    last_ds,
                    inline,
                    fm_cache,
                    credit_end: _,
                },
        } = self;
        if nreq == 0 {
            return 0;
        }
        let staged = sq.staging.get(..used as usize).unwrap_or(&[]);
        // The WQEs go into the ring at the producer index, whole WQEBBs,
        // wrapping at its end once (at most two copies).
        let blocks = <[[u8; SEND_WQE_BB]]>::ref_from_bytes(staged.as_bytes()).unwrap_or(&[]);
        sq.ring.write_run(sq.pi, blocks);
        let pi = sq.pi.wrapping_add(used);
        let last_wqe = staged.get(last as usize..).unwrap_or(&[]);
        sq.db.ring::<P>(Publish {
            pi,
            last_wqe,
            last_ds,
            nreq,
            inline,
        });
        sq.pi = pi;
        sq.fm_cache = fm_cache;
        sq.set_unsignaled(unsignaled);
        // No fast-path credits left (the next one-call post refreshes them).
        sq.fast_end = pi;
        nreq
    }

    /// Discards the batch (`ibv_wr_abort`): nothing was written to the ring,
    /// the doorbell record or the register. Same as dropping it.
    pub fn abort(self) {}

    /// Validates a finished work request, then formats it into the staging
    /// area. On error nothing is written and the batch is unchanged.
    pub(super) fn encode(&mut self, d: &Desc<'_>, data: Data<'_>) -> Result<(), PostError> {
        let lim = self.sq.lim;
        let qp = self.sq.qp_type();
        let op = d.op;
        let nop = op == Op::Nop;

        // ---- layout of the segments before the data ----------------------
        let xrc = qp == QpType::Xrc && !matches!(op, Op::LocalInv | Op::BindMw | Op::Nop);
        if xrc && d.xrc_srqn.is_none() {
            return Err(PostError::MissingXrcSrqn);
        }
        let ud = qp == QpType::Ud && !nop;
        if ud && d.ud.is_none() {
            return Err(PostError::MissingUdAddress);
        }
        let tso = op == Op::Tso;
        let eth = tso || (qp == QpType::RawPacket && matches!(op, Op::Send | Op::Driver1));
        // VLAN insertion (`Wr::vlan`): by the device when the WQE inlines
        // no header (the VLAN-insert request shares bytes 12..16 of the
        // Ethernet segment with the header's size, PRM-FACTS §5.7); else in
        // software, the tag written into the inline header after the MAC
        // addresses, as DPDK does (`mlx5_tx_eseg_dmin`, `mlx5_tx_eseg_data`).
        let vlan = if eth { d.vlan } else { None };
        let eth_min = if eth && !tso {
            usize::from(lim.eth_min_inline)
        } else {
            0
        };
        let sw_tag = match vlan {
            Some(tci) if tso || eth_min > 0 => Some(vlan_tag(tci)),
            _ => None,
        };
        // The raw-send inline L2 header, taken from the frame's first bytes:
        // `eth_min` of them, or the Ethernet header alone (14) when the tag
        // makes up the other 4.
        let take = if sw_tag.is_some() && !tso {
            ETH_L2_MIN_HEADER_SIZE
        } else {
            eth_min
        };
        let mut l2 = [0u8; ETH_L2_INLINE_HEADER_SIZE];
        if take > 0 {
            let got = match data {
                Data::Frames(f) => gather(f.iter().map(|p| p.data), head_of(&mut l2, take)),
                Data::Inline(l) => gather(l.iter().copied(), head_of(&mut l2, take)),
                Data::Sges(_) => return Err(PostError::FrameBytesRequired),
                Data::None => 0,
            };
            if got < take {
                return Err(PostError::EthHeaderTooShort);
            }
        }
        let eth_hdr: &[u8] = if tso {
            d.tso_hdr
        } else {
            l2.get(..take).unwrap_or(&[])
        };
        let eth_hdr_len = eth_hdr.len() + if sw_tag.is_some() { 4 } else { 0 };
        if tso && eth_hdr_len > usize::from(lim.max_tso_header) {
            return Err(PostError::TsoHeaderTooLong);
        }

        let mut ds: u32 = 1;
        if xrc {
            ds += 1;
        }
        if ud {
            ds += 3;
            if tso {
                ds += 1; // the 16-byte pad before the Ethernet segment
            }
        }
        if eth {
            ds += EthSeg::ds_for(eth_hdr_len) as u32;
        }
        ds += op.op_ds();
        if op == Op::BindMw && d.args[0] != 0 {
            ds += BIND_KLM_DS;
        }

        // ---- the data -----------------------------------------------------
        let atomic = op.atomic_size();
        let skip = take;
        let mut inline_len = 0usize;
        let mut is_inline = false;
        match data {
            Data::None => {}
            Data::Sges(_) | Data::Frames(_)
                if matches!(op, Op::Nop | Op::LocalInv | Op::BindMw) =>
            {
                return Err(PostError::UnsupportedOp)
            }
            Data::Inline(_)
                if matches!(op, Op::Nop | Op::LocalInv | Op::BindMw | Op::Read) || atomic != 0 =>
            {
                return Err(PostError::UnsupportedOp)
            }
            Data::Sges(s) => {
                if s.len() > lim.max_sge as usize {
                    return Err(PostError::TooManySges);
                }
                let (n, total) = count_ptr(s.iter().map(|g| g.length), skip);
                if tso && lim.max_tso != 0 && total > u64::from(lim.max_tso) {
                    return Err(PostError::TsoPayloadTooLong);
                }
                ds += n;
            }
            Data::Frames(f) => {
                if f.len() > lim.max_sge as usize {
                    return Err(PostError::TooManySges);
                }
                let (n, total) = count_ptr(f.iter().map(FrameSge::len32), skip);
                if tso && lim.max_tso != 0 && total > u64::from(lim.max_tso) {
                    return Err(PostError::TsoPayloadTooLong);
                }
                ds += n;
            }
            Data::Inline(l) => {
                is_inline = true;
                let total: usize = l
                    .iter()
                    .map(|b| b.len())
                    .fold(0usize, usize::saturating_add);
                inline_len = total.saturating_sub(skip);
                if inline_len > lim.max_inline as usize {
                    return Err(PostError::InlineTooLong);
                }
                if inline_len > 0 {
                    ds += InlineSeg::ds_for(inline_len) as u32;
                }
            }
        }
        if ds > u32::from(MAX_DS) {
            return Err(PostError::WqeTooLarge);
        }
        let wqebbs = ds.div_ceil((SEND_WQE_BB / SEND_WQE_DS) as u32);

        // ---- room ---------------------------------------------------------
        let sq = &mut *self.sq;
        let pi = sq.pi.wrapping_add(self.st.used);
        if in_flight(pi, sq.ci) + wqebbs > sq.size.entries() {
            return Err(PostError::QueueFull);
        }
        let start = self.st.used as usize;
        let Some(region) = sq.staging.get_mut(start..start + wqebbs as usize) else {
            return Err(PostError::BatchFull);
        };

        // ---- from here on nothing fails -----------------------------------
        let mut ce = lim.sig_bits;
        if d.flags & F_SIGNALED != 0 {
            ce = WQE_CTRL_CQ_UPDATE;
        }
        if ce == 0 && lim.signal_every != 0 && self.st.unsignaled + wqebbs >= lim.signal_every {
            ce = WQE_CTRL_CQ_UPDATE;
        }
        let fence = if d.flags & F_FENCE != 0 {
            WQE_CTRL_FENCE
        } else {
            self.st.fm_cache
        };
        let se = if d.flags & F_SOLICITED != 0 {
            WQE_CTRL_SOLICITED
        } else {
            0
        };
        let imm = match op {
            Op::SendImm | Op::WriteImm | Op::SendInv | Op::LocalInv | Op::BindMw => d.imm,
            _ => 0,
        };
        let (opcode, opmod) = op.opcode();
        let index = wq_counter16(pi);

        let mut w = Writer {
            buf: region.as_mut_bytes(),
            pos: 0,
        };
        let ctrl = CtrlSeg {
            opmod_idx_opcode: OpmodIdxOpcode::new()
                .with_opcode(opcode.raw())
                .with_wqe_index(index)
                .with_opmod(opmod),
            qpn_ds: lim.qpn_ds.with_ds((ds as u8) & MAX_DS),
            signature: 0,
            dci_stream_channel_id: Be16::ZERO,
            fm_ce_se: FmCeSe::from_bits(fence | ce | se),
            imm: Be32::new(imm),
        };
        w.put(ctrl.as_bytes());
        if let (true, Some(srqn)) = (xrc, d.xrc_srqn) {
            w.put(
                XrcSeg {
                    xrc_srqn: Be32::new(srqn),
                    reserved: [0; 12],
                }
                .as_bytes(),
            );
        }
        if let (true, Some((av, remote_qpn, qkey))) = (ud, d.ud) {
            // libmlx5 `_set_datagram_seg`: the AH's AV, then the remote QPN
            // with the extended-AV bit and the Q_Key written over it.
            let mut dg = *av;
            dg.dqp_dct = DqpDct::from_bits(Be32::new(remote_qpn | EXTENDED_UD_AV));
            dg.qkey = Be32::new(qkey);
            w.put(dg.as_bytes());
            if tso {
                w.put(&[0; SEND_WQE_DS]);
            }
        }
        if eth {
            let mut e = EthSeg::default();
            if d.flags & F_CSUM != 0 {
                e.cs_flags = EthCsFlags::from_bits(ETH_WQE_L3_CSUM | ETH_WQE_L4_CSUM);
            }
            e.mss = Be16::new(d.mss);
            e.inline_hdr_sz = Be16::new(eth_hdr_len as u16);
            let (first, rest) = eth_hdr.split_at(core::cmp::min(2, eth_hdr.len()));
            if let [a, b] = *first {
                e.inline_hdr_start = [a, b];
            }
            if let (Some(tci), None) = (vlan, sw_tag) {
                // No inline header: the device inserts the tag.
                e.set_vlan_insert(VlanInsert::new().with_vlan_tci(tci).with_insert(true));
            }
            w.put(e.as_bytes());
            match sw_tag {
                Some(tag) => {
                    // The rest of the MAC addresses, the tag, the rest.
                    let (macs, after) = rest.split_at(core::cmp::min(ETH_ALEN2 - 2, rest.len()));
                    w.put(macs);
                    w.put(&tag);
                    w.put(after);
                }
                None => w.put(rest),
            }
            w.pad16();
        }
        match op {
            Op::Write | Op::WriteImm | Op::Read => {
                w.put(raddr_seg(d).as_bytes());
            }
            Op::CmpSwp | Op::FetchAdd => {
                w.put(raddr_seg(d).as_bytes());
                w.put(
                    AtomicSeg {
                        swap_add: Be64::new(d.args[0]),
                        compare: Be64::new(d.args[1]),
                    }
                    .as_bytes(),
                );
            }
            Op::MaskedCs64 => {
                w.put(raddr_seg(d).as_bytes());
                let [swap, compare, swap_mask, compare_mask] = d.args.map(Be64::new);
                w.put(
                    MaskedAtomicSeg64 {
                        swap_add: swap,
                        compare,
                        swap_add_mask: swap_mask,
                        compare_mask,
                    }
                    .as_bytes(),
                );
            }
            Op::MaskedFa64 => {
                w.put(raddr_seg(d).as_bytes());
                w.put(
                    MaskedFa64Seg {
                        add: Be64::new(d.args[0]),
                        field_boundary: Be64::new(d.args[1]),
                    }
                    .as_bytes(),
                );
            }
            Op::MaskedCs32 => {
                w.put(raddr_seg(d).as_bytes());
                let [swap, compare, swap_mask, compare_mask] = d.args.map(|v| Be32::new(v as u32));
                w.put(
                    MaskedCs32Seg {
                        swap,
                        compare,
                        swap_mask,
                        compare_mask,
                    }
                    .as_bytes(),
                );
            }
            Op::MaskedFa32 => {
                w.put(raddr_seg(d).as_bytes());
                let seg = MaskedFa32Seg {
                    add: Be32::new(d.args[0] as u32),
                    field_boundary: Be32::new(d.args[1] as u32),
                    reserved: [0; 8],
                };
                w.put(seg.as_bytes());
            }
            Op::LocalInv => {
                let ctrl = UmrCtrlSeg {
                    flags: UMR_CTRL_FLAGS_LOCAL_INV,
                    mkey_mask: Be64::new(UMR_MKEY_MASK_LOCAL_INV),
                    ..UmrCtrlSeg::default()
                };
                w.put(ctrl.as_bytes());
                let mkey = MkeyContextSeg {
                    free: umr::MKEY_CONTEXT_FREE,
                    qpn_mkey: Be32::new(MKEY_QPN_FREE),
                    ..MkeyContextSeg::default()
                };
                w.put(mkey.as_bytes());
            }
            Op::BindMw => put_bind(&mut w, d, lim.qpn_ds.qpn()),
            _ => {}
        }
        match data {
            Data::None => {}
            Data::Sges(s) => put_ptr(
                &mut w,
                s.iter().map(|g| (g.lkey, g.addr, g.length)),
                skip,
                atomic,
            ),
            Data::Frames(f) => put_ptr(
                &mut w,
                f.iter().map(|p| (p.lkey, p.addr, p.len32())),
                skip,
                atomic,
            ),
            Data::Inline(l) => {
                if inline_len > 0 {
                    let hdr = InlineByteCount::new()
                        .with_byte_count((inline_len as u32) & 0x7fff_ffff)
                        .with_inline(true);
                    w.put(InlineSeg { byte_count: hdr }.as_bytes());
                    let mut to_skip = skip;
                    for piece in l {
                        let cut = core::cmp::min(to_skip, piece.len());
                        to_skip -= cut;
                        w.put(piece.get(cut..).unwrap_or(&[]));
                    }
                    w.pad16();
                }
            }
        }
        w.zero_rest();

        // ---- bookkeeping ----------------------------------------------------
        let mut flags = 0;
        if d.flags & F_SIGNALED != 0 {
            flags |= SHADOW_SIGNALED;
        }
        if ce != 0 {
            flags |= SHADOW_CQE;
        }
        let mask = sq.size.mask();
        for k in 0..wqebbs {
            if let Some(e) = sq.shadow.get_mut(((pi.wrapping_add(k)) & mask) as usize) {
                *e = if k == 0 {
                    let entry = super::SqShadowEntry::new(d.wr_id, index, wqebbs as u8, flags);
                    match op {
                        Op::LocalInv => entry.with_wr_opcode(Recorded::LocalInv),
                        Op::BindMw => entry.with_wr_opcode(Recorded::BindMw),
                        _ => entry,
                    }
                } else {
                    super::SqShadowEntry::EMPTY
                };
            }
        }
        self.st.credit_end = 0;
        self.st.last = self.st.used;
        self.st.used += wqebbs;
        self.st.nreq += 1;
        self.st.last_ds = ds as u8;
        self.st.inline |= is_inline;
        self.st.fm_cache = if matches!(op, Op::LocalInv | Op::BindMw) {
            WQE_CTRL_INITIATOR_SMALL_FENCE
        } else {
            0
        };
        self.st.unsignaled = if ce != 0 {
            0
        } else {
            self.st.unsignaled + wqebbs
        };
        Ok(())
    }
}

impl<'x, P: DoorbellPolicy, Q: QpKind> Wr<'_, 'x, '_, '_, P, Q> {
    /// Asks for a completion (`IBV_SEND_SIGNALED`).
    #[inline(always)]
    pub fn signaled(mut self) -> Self {
        self.d.flags |= F_SIGNALED;
        self
    }

    /// Asks for a completion if `yes`.
    #[inline(always)]
    pub fn signaled_if(mut self, yes: bool) -> Self {
        if yes {
            self.d.flags |= F_SIGNALED;
        }
        self
    }

    /// Sets the solicited-event bit (`IBV_SEND_SOLICITED`).
    #[inline(always)]
    pub fn solicited(mut self) -> Self {
        self.d.flags |= F_SOLICITED;
        self
    }

    /// Waits for earlier RDMA reads and atomics before this WQE
    /// (`IBV_SEND_FENCE`; libmlx5 `MLX5_WQE_CTRL_FENCE`).
    #[inline(always)]
    pub fn fence(mut self) -> Self {
        self.d.flags |= F_FENCE;
        self
    }

    /// Adds the one-call posts' flags ([`super::SendFlags`]: the same bits).
    #[inline(always)]
    pub(super) fn with_flags(mut self, flags: super::SendFlags) -> Self {
        self.d.flags |= flags.0;
        self
    }

    /// Requests L3 and L4 checksum offload (`IBV_SEND_IP_CSUM`): raw
    /// Ethernet QPs with checksum offload only.
    #[inline]
    pub fn ip_csum(mut self) -> Result<Self, PostError> {
        if self.batch.sq.qp_type() != QpType::RawPacket || !self.batch.sq.lim.raw_csum {
            return Err(PostError::UnsupportedOp);
        }
        self.d.flags |= F_CSUM;
        Ok(self)
    }

    /// Inserts a VLAN tag (C-VLAN, TPID 0x8100, tag control information
    /// `tci`) after the frame's MAC addresses (DPDK `RTE_MBUF_F_TX_VLAN`):
    /// raw Ethernet sends and TSO only.
    ///
    /// When the WQE inlines no header (a queue with
    /// [`SqConfig::eth_min_inline`](super::SqConfig::eth_min_inline) 0, not
    /// TSO), the device inserts it: the Ethernet segment carries the
    /// VLAN-insert request (`MLX5_ETH_WQE_VLAN_INSERT`, [`VlanInsert`]).
    /// Otherwise the request cannot be made (it shares its bytes with the
    /// inline header's size) and the tag is written into the inline header
    /// instead: 12 bytes of MAC addresses, the tag, then the frame's
    /// EtherType (a raw send then inlines 14 bytes of the frame, not 18); a
    /// TSO header grows by 4 bytes and must still fit
    /// [`SqConfig::max_tso_header`](super::SqConfig::max_tso_header)
    /// ([`PostError::TsoHeaderTooLong`]). The frame on the wire is the same.
    #[inline]
    pub fn vlan(mut self, tci: u16) -> Result<Self, PostError> {
        if self.batch.sq.qp_type() != QpType::RawPacket || !matches!(self.d.op, Op::Send | Op::Tso)
        {
            return Err(PostError::UnsupportedOp);
        }
        self.d.vlan = Some(tci);
        Ok(self)
    }

    /// The UD destination (`ibv_wr_set_ud_addr`): the address vector of the
    /// address handle, the remote QPN and Q_Key. UD QPs only.
    #[inline]
    pub fn ud_addr(
        mut self,
        av: &'x Av,
        remote_qpn: u32,
        remote_qkey: u32,
    ) -> Result<Self, PostError> {
        if self.batch.sq.qp_type() != QpType::Ud {
            return Err(PostError::UnsupportedOp);
        }
        self.d.ud = Some((av, remote_qpn, remote_qkey));
        Ok(self)
    }

    /// The remote XRC SRQ number (`ibv_wr_set_xrc_srqn`). XRC QPs only.
    #[inline]
    pub fn xrc_srqn(mut self, remote_srqn: u32) -> Result<Self, PostError> {
        if self.batch.sq.qp_type() != QpType::Xrc {
            return Err(PostError::UnsupportedOp);
        }
        self.d.xrc_srqn = Some(remote_srqn);
        Ok(self)
    }

    /// Posts the work request without data (zero-length send or write, NOP,
    /// local invalidate).
    #[inline]
    pub fn post(self) -> Result<(), PostError> {
        self.batch.encode(&self.d, Data::None)
    }

    /// Posts with one SGE (`ibv_wr_set_sge`).
    #[inline(always)]
    pub fn sge(self, lkey: u32, addr: u64, length: u32) -> Result<(), PostError> {
        if let Some(r) = self.batch.sge_fast(&self.d, lkey, addr, length) {
            return r;
        }
        let d = self.d.copied();
        let batch = self.batch;
        let (st, r) = Self::sge_generic(batch.sq, batch.st, d, Sge { addr, length, lkey });
        batch.st = st;
        r
    }

    /// [`Wr::sge`] through the generic encoder, out of line. The descriptor
    /// comes as a copy made on the way here ([`Desc::copied`]) and the
    /// batch counters by value, returned: had the builder's own descriptor
    /// or the batch been passed by reference, they would live in memory on
    /// the fast path too (17 and 8 instructions per work request in
    /// `sq/rc_write_batch32`, measured; `benches/README.md`, session 18).
    /// [`Wr::inline_data`] and [`Wr::frame`] fall back the same way.
    #[cold]
    #[inline(never)]
    fn sge_generic(
        sq: &mut SendQueue<'_, P, Q>,
        st: BatchState,
        d: Desc<'x>,
        sge: Sge,
    ) -> (BatchState, Result<(), PostError>) {
        let mut batch = Batch { sq, st };
        let r = batch.encode(&d, Data::Sges(core::slice::from_ref(&sge)));
        (batch.st, r)
    }

    /// Posts with an SGE list (`ibv_wr_set_sge_list`); zero-length entries
    /// are skipped.
    #[inline]
    pub fn sge_list(self, sges: &[Sge]) -> Result<(), PostError> {
        self.batch.encode(&self.d, Data::Sges(sges))
    }

    /// Posts with the data copied into the WQE (`ibv_wr_set_inline_data`).
    #[inline(always)]
    pub fn inline_data(self, data: &[u8]) -> Result<(), PostError> {
        if let Some(r) = self.batch.inline_fast(&self.d, data) {
            return r;
        }
        let d = self.d.copied();
        let batch = self.batch;
        let (st, r) = Self::inline_generic(batch.sq, batch.st, d, data);
        batch.st = st;
        r
    }

    /// [`Wr::inline_data`] through the generic encoder, out of line (not
    /// marked cold: inline data past the fast path's 44 bytes, or on UD,
    /// is ordinary use).
    #[inline(never)]
    fn inline_generic(
        sq: &mut SendQueue<'_, P, Q>,
        st: BatchState,
        d: Desc<'x>,
        data: &[u8],
    ) -> (BatchState, Result<(), PostError>) {
        let mut batch = Batch { sq, st };
        let r = batch.encode(&d, Data::Inline(core::slice::from_ref(&data)));
        (batch.st, r)
    }

    /// Posts with the buffers copied into the WQE, concatenated
    /// (`ibv_wr_set_inline_data_list`).
    #[inline]
    pub fn inline_data_list(self, bufs: &[&[u8]]) -> Result<(), PostError> {
        self.batch.encode(&self.d, Data::Inline(bufs))
    }

    /// Posts a raw Ethernet frame in one piece of registered memory; its
    /// first bytes become the inline L2 header.
    #[inline(always)]
    pub fn frame(self, lkey: u32, addr: u64, data: &[u8]) -> Result<(), PostError> {
        if let Some(r) = self.batch.frame_fast(&self.d, lkey, addr, data) {
            return r;
        }
        let d = self.d.copied();
        let batch = self.batch;
        let (st, r) = Self::frame_generic(batch.sq, batch.st, d, FrameSge { lkey, addr, data });
        batch.st = st;
        r
    }

    /// [`Wr::frame`] through the generic encoder, out of line.
    #[cold]
    #[inline(never)]
    fn frame_generic(
        sq: &mut SendQueue<'_, P, Q>,
        st: BatchState,
        d: Desc<'x>,
        piece: FrameSge<'_>,
    ) -> (BatchState, Result<(), PostError>) {
        let mut batch = Batch { sq, st };
        let r = batch.encode(&d, Data::Frames(core::slice::from_ref(&piece)));
        (batch.st, r)
    }

    /// Posts a raw Ethernet frame in several pieces.
    #[inline]
    pub fn frame_list(self, pieces: &[FrameSge<'_>]) -> Result<(), PostError> {
        self.batch.encode(&self.d, Data::Frames(pieces))
    }
}

/// The one-call posts' fallback: the builder path, out of line, with the
/// batch's counters passed and returned by value (see [`BatchState`]).
#[cold]
#[inline(never)]
#[allow(clippy::too_many_arguments)]
pub(super) fn remote_sge_cold<P: DoorbellPolicy, Q: QpKind>(
    sq: &mut SendQueue<'_, P, Q>,
    st: BatchState,
    op: Op,
    wr_id: u64,
    rkey: u32,
    raddr: u64,
    lkey: u32,
    addr: u64,
    length: u32,
    flags: super::SendFlags,
) -> (BatchState, Result<(), PostError>) {
    let sge = Sge { addr, length, lkey };
    let mut batch = Batch { sq, st };
    let r = match batch.begin(wr_id, op) {
        Ok(mut wr) => {
            wr.d.rkey = rkey;
            wr.d.raddr = raddr;
            wr.d.flags = flags.0;
            wr.sge(sge.lkey, sge.addr, sge.length)
        }
        Err(e) => Err(e),
    };
    (batch.st, r)
}

fn raddr_seg(d: &Desc<'_>) -> RaddrSeg {
    RaddrSeg {
        raddr: Be64::new(d.raddr),
        rkey: Be32::new(d.rkey),
        reserved: Be32::ZERO,
    }
}

/// The UMR segments of a memory-window bind (libmlx5 `set_bind_wr`: UMR
/// control, mkey context, and for a window of non-zero length its one KLM,
/// zero-padded to 64 bytes). `qpn` is this QP's: a type 2 window is bound
/// to it.
fn put_bind(w: &mut Writer<'_>, d: &Desc<'_>, qpn: u32) {
    let [length, mr_lkey, access, kind] = d.args;
    let type2 = kind == 2;
    let range = length != 0;
    let mut flags = umr::CTRL_FLAG_INLINE | umr::CTRL_FLAG_TRANSLATION_OFFSET;
    let mut mkey_mask = UMR_MKEY_MASK_BIND_ANY;
    if type2 {
        mkey_mask |= umr::MKEY_MASK_QPN;
        // A bind must find the window free; an unbind must find it ours.
        flags |= if range {
            umr::CTRL_FLAG_CHECK_FREE
        } else {
            umr::CTRL_FLAG_CHECK_QPN
        };
    }
    if range {
        mkey_mask |= UMR_MKEY_MASK_BIND_RANGE;
    }
    let ctrl = UmrCtrlSeg {
        flags,
        klm_octowords: Be16::new(if range { BIND_KLM_DS as u16 } else { 0 }),
        mkey_mask: Be64::new(mkey_mask),
        ..UmrCtrlSeg::default()
    };
    w.put(ctrl.as_bytes());
    // The QPN field: this QP for a type 2 bind, all ones otherwise (type 1,
    // or an unbind); the new rkey's low byte is the mkey variant.
    let qpn_field = if type2 && range {
        qpn << 8
    } else {
        MKEY_QPN_FREE
    };
    let mut mkey = MkeyContextSeg {
        qpn_mkey: Be32::new(qpn_field | (d.rkey & 0xff)),
        ..MkeyContextSeg::default()
    };
    if range {
        let access = access as u32;
        let grant = |bit: u32, flag: u8| if access & bit != 0 { flag } else { 0 };
        // (Local read is granted by the kernel, not by the bind.)
        mkey.access_flags = grant(MwBind::LOCAL_WRITE, umr::ACCESS_LOCAL_WRITE)
            | grant(MwBind::REMOTE_WRITE, umr::ACCESS_REMOTE_WRITE)
            | grant(MwBind::REMOTE_READ, umr::ACCESS_REMOTE_READ)
            | grant(MwBind::REMOTE_ATOMIC, umr::ACCESS_ATOMIC);
        if access & MwBind::ZERO_BASED == 0 {
            mkey.start_addr = Be64::new(d.raddr);
        }
        mkey.len = Be64::new(length);
    } else {
        mkey.free = umr::MKEY_CONTEXT_FREE;
    }
    w.put(mkey.as_bytes());
    if range {
        let klm = UmrKlmSeg {
            byte_count: Be32::new(length as u32),
            mkey: Be32::new(mr_lkey as u32),
            address: Be64::new(d.raddr),
        };
        w.put(klm.as_bytes());
        w.put(&[0; BIND_KLM_DS as usize * SEND_WQE_DS - UmrKlmSeg::SIZE]);
    }
}

/// Bytes of the two MAC addresses that precede an inserted VLAN tag.
const ETH_ALEN2: usize = 12;
/// TPID of an 802.1Q (C-VLAN) tag.
const ETH_P_8021Q: u16 = 0x8100;

/// The 4 bytes of a C-VLAN tag with `tci`, as they go on the wire.
fn vlan_tag(tci: u16) -> [u8; 4] {
    let [t0, t1] = ETH_P_8021Q.to_be_bytes();
    let [c0, c1] = tci.to_be_bytes();
    [t0, t1, c0, c1]
}

/// The first `n` bytes of `buf` (all of it if shorter).
fn head_of(buf: &mut [u8], n: usize) -> &mut [u8] {
    let n = core::cmp::min(n, buf.len());
    buf.split_at_mut(n).0
}

/// Copies the first bytes of `pieces` into `out`; returns how many it got.
fn gather<'d>(pieces: impl Iterator<Item = &'d [u8]>, out: &mut [u8]) -> usize {
    let mut got = 0;
    for piece in pieces {
        let Some(dst) = out.get_mut(got..) else { break };
        let n = core::cmp::min(dst.len(), piece.len());
        if let (Some(d), Some(s)) = (dst.get_mut(..n), piece.get(..n)) {
            d.copy_from_slice(s);
        }
        got += n;
        if got == out.len() {
            break;
        }
    }
    got
}

/// Counts the pointer segments of a list after `skip` bytes went into the
/// inline header (zero-length remainders are skipped) and their total length.
fn count_ptr(lengths: impl Iterator<Item = u32>, mut skip: usize) -> (u32, u64) {
    let mut n = 0;
    let mut total = 0u64;
    for len in lengths {
        let cut = core::cmp::min(skip, len as usize);
        skip -= cut;
        let rest = len as usize - cut;
        if rest > 0 {
            n += 1;
            total += rest as u64;
        }
    }
    (n, total)
}

/// Writes the pointer segments of a list after `skip` bytes; atomics write
/// their operand size as the byte count (libmlx5 `set_data_ptr_seg_atomic`).
fn put_ptr(
    w: &mut Writer<'_>,
    pieces: impl Iterator<Item = (u32, u64, u32)>,
    mut skip: usize,
    atomic: u32,
) {
    for (lkey, addr, len) in pieces {
        let cut = core::cmp::min(skip, len as usize);
        skip -= cut;
        let rest = len - cut as u32;
        if rest == 0 {
            continue;
        }
        let byte_count = if atomic != 0 { atomic } else { rest };
        let seg = DataSeg {
            byte_count: Be32::new(byte_count),
            lkey: Be32::new(lkey),
            addr: Be64::new(addr.wrapping_add(cut as u64)),
        };
        w.put(seg.as_bytes());
    }
}

/// A cursor over the staged WQE. Writes past the end are dropped (they
/// cannot happen: the WQE's size was computed before the region was taken).
struct Writer<'s> {
    buf: &'s mut [u8],
    pos: usize,
}

impl Writer<'_> {
    #[inline(always)]
    fn put(&mut self, bytes: &[u8]) {
        let end = self.pos + bytes.len();
        if let Some(dst) = self.buf.get_mut(self.pos..end) {
            dst.copy_from_slice(bytes);
        }
        self.pos = end;
    }

    /// Zero-fills to the next 16-byte boundary (segment padding).
    #[inline(always)]
    fn pad16(&mut self) {
        let end = self.pos.next_multiple_of(SEND_WQE_DS);
        if let Some(dst) = self.buf.get_mut(self.pos..end) {
            dst.fill(0);
        }
        self.pos = end;
    }

    /// Zero-fills to the end of the last WQEBB.
    #[inline(always)]
    fn zero_rest(&mut self) {
        if let Some(dst) = self.buf.get_mut(self.pos..) {
            dst.fill(0);
        }
    }
}
