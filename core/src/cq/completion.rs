//! The current completion: a view of the one copy of a CQE (or of a
//! compressed session's title and one lane of its decoded mini array),
//! with lazy accessors modelled on `ibv_cq_ex`'s `read_*` functions, the
//! all-at-once [`Wc`] value and the burst [`CompletionSummary`].
//!
//! Every accessor reads the private copies, never device memory. Values of
//! accessors that are meaningless for the completion type are what libmlx5
//! returns for them (the raw CQE field), as rdma-core 44 does.
#![forbid(unsafe_code)]

use super::zip::{self, MiniBatch};
use super::SendRetired;
use crate::prm::{
    Be32, Cqe64, CqeFormat, CqeOpcode, L3HdrType, L4HdrType, L4L3HdrType, MprqByteCnt, SendOpcode,
    SopDropQpn, Syndrome, WcStatus, FLOW_TAG_MASK, MINI_CQE_ARRAY_SIZE,
};
use core::cell::OnceCell;

/// `enum ibv_wc_opcode` (libibverbs `verbs.h`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum WcOpcode {
    /// `IBV_WC_SEND`.
    Send = 0,
    /// `IBV_WC_RDMA_WRITE`.
    RdmaWrite = 1,
    /// `IBV_WC_RDMA_READ`.
    RdmaRead = 2,
    /// `IBV_WC_COMP_SWAP`.
    CompSwap = 3,
    /// `IBV_WC_FETCH_ADD`.
    FetchAdd = 4,
    /// `IBV_WC_BIND_MW`.
    BindMw = 5,
    /// `IBV_WC_LOCAL_INV`.
    LocalInv = 6,
    /// `IBV_WC_TSO`.
    Tso = 7,
    /// `IBV_WC_FLUSH`.
    Flush = 8,
    /// `IBV_WC_ATOMIC_WRITE`.
    AtomicWrite = 9,
    /// `IBV_WC_RECV`.
    Recv = 128,
    /// `IBV_WC_RECV_RDMA_WITH_IMM`.
    RecvRdmaWithImm = 129,
    /// `IBV_WC_TM_ADD`.
    TmAdd = 130,
    /// `IBV_WC_TM_DEL`.
    TmDel = 131,
    /// `IBV_WC_TM_SYNC`.
    TmSync = 132,
    /// `IBV_WC_TM_RECV`.
    TmRecv = 133,
    /// `IBV_WC_TM_NO_TAG`.
    TmNoTag = 134,
    /// `IBV_WC_DRIVER1` (UMR and friends in libmlx5).
    Driver1 = 135,
    /// `IBV_WC_DRIVER2` (raw WQE).
    Driver2 = 136,
    /// `IBV_WC_DRIVER3`.
    Driver3 = 137,
}

impl WcOpcode {
    /// Every opcode, in `verbs.h` order.
    pub const ALL: [Self; 20] = [
        Self::Send,
        Self::RdmaWrite,
        Self::RdmaRead,
        Self::CompSwap,
        Self::FetchAdd,
        Self::BindMw,
        Self::LocalInv,
        Self::Tso,
        Self::Flush,
        Self::AtomicWrite,
        Self::Recv,
        Self::RecvRdmaWithImm,
        Self::TmAdd,
        Self::TmDel,
        Self::TmSync,
        Self::TmRecv,
        Self::TmNoTag,
        Self::Driver1,
        Self::Driver2,
        Self::Driver3,
    ];

    /// The raw `ibv_wc_opcode` value.
    pub const fn raw(self) -> u32 {
        self as u32
    }

    /// The opcode of a raw `ibv_wc_opcode` value, if it names one.
    pub fn from_raw(raw: u32) -> Option<Self> {
        Self::ALL.into_iter().find(|op| op.raw() == raw)
    }

    /// The requester opcode libmlx5 derives from the CQE's send opcode
    /// (`handle_good_req`, `mlx5_cq_read_wc_opcode`); `None` for the send
    /// opcodes whose completion opcode was recorded at post time (NOP, UMR,
    /// SET_PSV, MMO) and for unknown ones.
    pub const fn from_send_opcode(op: SendOpcode) -> Option<Self> {
        match op {
            SendOpcode::RdmaWrite | SendOpcode::RdmaWriteImm => Some(Self::RdmaWrite),
            SendOpcode::Send | SendOpcode::SendImm | SendOpcode::SendInval => Some(Self::Send),
            SendOpcode::RdmaRead => Some(Self::RdmaRead),
            SendOpcode::AtomicCs => Some(Self::CompSwap),
            SendOpcode::AtomicFa => Some(Self::FetchAdd),
            SendOpcode::Tso => Some(Self::Tso),
            _ => None,
        }
    }
}

/// `ibv_wc_flags` bits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct WcFlags(pub u32);

impl WcFlags {
    /// `IBV_WC_GRH`: a GRH is present (in the buffer or the CQE).
    pub const GRH: u32 = 1 << 0;
    /// `IBV_WC_WITH_IMM`: immediate data is valid.
    pub const WITH_IMM: u32 = 1 << 1;
    /// `IBV_WC_IP_CSUM_OK`: IPv4 header and L4 checksums verified.
    pub const IP_CSUM_OK: u32 = 1 << 2;
    /// `IBV_WC_WITH_INV`: an rkey was invalidated.
    pub const WITH_INV: u32 = 1 << 3;
    /// `IBV_WC_TM_MATCH`: a tag was matched.
    pub const TM_MATCH: u32 = 1 << 5;
    /// `IBV_WC_TM_DATA_VALID`: the matched message's data is in place.
    pub const TM_DATA_VALID: u32 = 1 << 6;

    /// Whether every bit of `mask` is set.
    pub const fn contains(self, mask: u32) -> bool {
        self.0 & mask == mask
    }
}

/// How the CQ's timestamps are encoded (PRM-FACTS §12, §15.7).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimestampFormat {
    /// Free-running HCA core clock ticks; `hca_core_clock_khz` from
    /// `ibv_query_device_ex` (`hca_core_clock`, in kHz).
    FreeRunning {
        /// HCA core clock frequency in kHz (non-zero).
        hca_core_clock_khz: u64,
    },
    /// Real-time: bits \[63:32\] seconds, \[31:0\] nanoseconds (DPDK
    /// `mlx5_txpp_convert_rx_ts`; rdma-core returns such values raw).
    RealTime,
}

impl TimestampFormat {
    /// Converts a raw CQE timestamp to nanoseconds (saturating; `None` for
    /// a free-running clock of 0 kHz).
    pub fn to_ns(self, raw: u64) -> Option<u64> {
        match self {
            Self::FreeRunning {
                hca_core_clock_khz: 0,
            } => None,
            Self::FreeRunning { hca_core_clock_khz } => {
                let ns = u128::from(raw) * 1_000_000 / u128::from(hca_core_clock_khz);
                Some(u64::try_from(ns).unwrap_or(u64::MAX))
            }
            Self::RealTime => {
                let secs = raw >> 32;
                let nsecs = raw & 0xffff_ffff;
                Some(secs.saturating_mul(1_000_000_000).saturating_add(nsecs))
            }
        }
    }
}

/// Where a completion came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Origin {
    /// A regular CQE.
    Regular = 0,
    /// A mini-CQE of a compressed session (title fields inherited).
    Mini = 1,
}

/// The current completion (see the module documentation): a lazy view.
///
/// A regular completion reads the one copy of its CQE. A mini-CQE of a
/// compressed session is never expanded into a 64-byte CQE on the poll
/// path: the fields minis carry (`byte_cnt`, `rss_hash_result`,
/// `sop_drop_qpn`, `check_sum`, `wqe_counter`, `l4_l3_hdr_type`) are read
/// from lane `lane` of the session's decoded [`MiniBatch`], everything else
/// from the session's title copy. [`Self::cqe`] builds the expanded CQE on
/// first use only.
#[derive(Clone, Debug)]
pub struct Completion {
    /// Regular: the copy of the CQE. Mini: the session's title (basic: the
    /// compressed title CQE; enhanced: the last regular CQE), as written.
    pub(crate) cqe: Cqe64,
    /// Mini: the decoded array the completion is lane `lane` of.
    pub(crate) batch: MiniBatch,
    pub(crate) lane: u8,
    /// The first half of a 128-byte slot; written (never cleared) only for
    /// a regular `InlineScatter64` CQE, and read only for one.
    pub(crate) inline: [u8; 64],
    pub(crate) wr_id: u64,
    pub(crate) status: WcStatus,
    pub(crate) wr_opcode: Option<WcOpcode>,
    pub(crate) rx_csum_valid: bool,
    pub(crate) origin: Origin,
    pub(crate) striding: bool,
    /// Mini: the expanded CQE, built by [`Self::cqe`] on demand.
    expanded: OnceCell<Cqe64>,
}

impl Completion {
    pub(crate) fn empty() -> Self {
        Self {
            cqe: Cqe64::default(),
            batch: MiniBatch::default(),
            lane: 0,
            inline: [0; 64],
            wr_id: 0,
            status: WcStatus::Success,
            wr_opcode: None,
            rx_csum_valid: false,
            origin: Origin::Regular,
            striding: false,
            expanded: OnceCell::new(),
        }
    }

    /// Makes the view a regular completion (of `self.cqe`).
    #[inline(always)]
    pub(crate) fn set_regular(&mut self) {
        self.origin = Origin::Regular;
    }

    /// Makes the view mini `lane` of `self.batch` (title in `self.cqe`).
    #[inline(always)]
    pub(crate) fn set_mini(&mut self, lane: usize) {
        self.origin = Origin::Mini;
        self.lane = (lane % MINI_CQE_ARRAY_SIZE) as u8;
        self.expanded = OnceCell::new();
    }

    /// The lane of a mini completion.
    #[inline(always)]
    fn lane(&self) -> Option<usize> {
        match self.origin {
            Origin::Mini => Some(usize::from(self.lane) % MINI_CQE_ARRAY_SIZE),
            Origin::Regular => None,
        }
    }

    /// `byte_cnt`, host order (for a mini: the mini's).
    #[inline(always)]
    pub(crate) fn byte_cnt(&self) -> u32 {
        match self.lane() {
            Some(l) => self.batch.byte_cnt[l],
            None => self.cqe.byte_cnt.get(),
        }
    }

    /// `sop_drop_qpn` as a word, host order (for a mini: as reconstructed).
    #[inline(always)]
    pub(crate) fn sop_drop_qpn_word(&self) -> u32 {
        match self.lane() {
            Some(l) => self.batch.sop_drop_qpn[l],
            None => self.cqe.sop_drop_qpn.into_bits().get(),
        }
    }

    /// `l4_l3_hdr_type` (for a mini: as reconstructed).
    #[inline(always)]
    fn hdr_type(&self) -> L4L3HdrType {
        match self.lane() {
            Some(l) => L4L3HdrType::from_bits(self.batch.l4_l3_hdr_type[l]),
            None => self.cqe.l4_l3_hdr_type,
        }
    }

    /// The send opcode of a requester completion (`sop_drop_qpn[31:24]`).
    fn send_opcode(&self) -> SendOpcode {
        SendOpcode::from_raw((self.sop_drop_qpn_word() >> 24) as u8)
    }

    /// The opcode of a successful requester completion as libmlx5 v44
    /// reports it (`handle_good_req`, `mlx5_cq_read_wc_opcode`): the one
    /// the CQE's send opcode names; for NOP, UMR, SET_PSV and MMO only,
    /// the one recorded at post time (`sq.wr_data`); none for other send
    /// opcodes (masked atomics, ...: `ibv_wc.opcode` unwritten,
    /// `read_opcode` 0); and `IBV_WC_DRIVER2` whenever that was recorded
    /// (a raw WQE), whatever the send opcode.
    #[inline(always)]
    fn req_opcode(&self) -> Option<WcOpcode> {
        if self.wr_opcode == Some(WcOpcode::Driver2) {
            return Some(WcOpcode::Driver2);
        }
        let sop = self.send_opcode();
        match WcOpcode::from_send_opcode(sop) {
            Some(op) => Some(op),
            None if matches!(
                sop,
                SendOpcode::Nop | SendOpcode::Umr | SendOpcode::SetPsv | SendOpcode::Mmo
            ) =>
            {
                self.wr_opcode
            }
            None => None,
        }
    }

    /// The decoded copy of the CQE (for a mini-CQE: the title with the
    /// mini's fields applied and the format cleared, built on first call).
    pub fn cqe(&self) -> &Cqe64 {
        match self.lane() {
            None => &self.cqe,
            Some(l) => self
                .expanded
                .get_or_init(|| self.batch.cqe(&zip::template(&self.cqe), l)),
        }
    }

    /// Whether this completion was unpacked from a compressed session.
    pub fn origin(&self) -> Origin {
        self.origin
    }

    /// The work request id (from the send or receive queue's shadow).
    pub fn wr_id(&self) -> u64 {
        self.wr_id
    }

    /// The completion status (`ibv_wc_status`).
    pub fn status(&self) -> WcStatus {
        self.status
    }

    /// Whether this is an error completion (`REQ_ERR`/`RESP_ERR`).
    pub fn is_error(&self) -> bool {
        self.cqe.is_error()
    }

    /// The CQE opcode (`op_own[7:4]`).
    pub fn cqe_opcode(&self) -> CqeOpcode {
        self.cqe.opcode()
    }

    /// The error syndrome of an error completion.
    pub fn syndrome(&self) -> Option<Syndrome> {
        self.is_error().then(|| self.cqe.as_err().syndrome())
    }

    /// `read_vendor_err`: the vendor syndrome byte (CQE byte 54), whatever
    /// the completion type, as libmlx5 returns it.
    pub fn vendor_err(&self) -> u32 {
        u32::from(self.cqe.as_err().vendor_err_synd)
    }

    /// `read_opcode` (libmlx5 `mlx5_cq_read_wc_opcode`): 0 (`IBV_WC_SEND`)
    /// for opcodes it does not map, as libmlx5 does.
    pub fn opcode(&self) -> WcOpcode {
        match self.cqe.opcode() {
            CqeOpcode::RespWrImm => WcOpcode::RecvRdmaWithImm,
            CqeOpcode::RespSend | CqeOpcode::RespSendImm | CqeOpcode::RespSendInv => WcOpcode::Recv,
            CqeOpcode::Req => self.req_opcode().unwrap_or(WcOpcode::Send),
            _ => WcOpcode::Send,
        }
    }

    /// `read_wc_flags` (libmlx5 `mlx5_cq_read_wc_flags`): checksum-OK when
    /// the receive queue validates checksums, immediate/invalidate by CQE
    /// opcode, GRH from `flags_rqpn[29:28]`, and the tag-matching flags
    /// from the CQE's `app` / `app_op` bytes whatever the opcode (as
    /// libmlx5's cq_ex op reads them; [`Self::to_wc`], like `ibv_poll_cq`,
    /// ignores them).
    pub fn wc_flags(&self) -> WcFlags {
        WcFlags(self.poll_wc_flags().0 | self.tm_flags())
    }

    /// The tag-matching part of `read_wc_flags` (libmlx5 v44 `cq.c`,
    /// `mlx5_cq_read_wc_flags`): with `app` = TAG_MATCHING (1), `app_op`
    /// CONSUMED_MSG (0xA), CONSUMED_MSG_SW_RDNV (0xB) or
    /// MSG_COMPLETION_CANCELED (0xC): a full completion, TM_MATCH and
    /// TM_DATA_VALID; CONSUMED (1) or CONSUMED_SW_RDNV (9): TM_MATCH;
    /// EXPECTED (2): TM_DATA_VALID; any other: none.
    fn tm_flags(&self) -> u32 {
        use crate::prm::{
            CQE_APP_OP_TM_CONSUMED, CQE_APP_OP_TM_CONSUMED_MSG, CQE_APP_OP_TM_CONSUMED_MSG_SW_RDNV,
            CQE_APP_OP_TM_CONSUMED_SW_RDNV, CQE_APP_OP_TM_EXPECTED,
            CQE_APP_OP_TM_MSG_COMPLETION_CANCELED, CQE_APP_TAG_MATCHING,
        };
        if self.cqe.app != CQE_APP_TAG_MATCHING {
            return 0;
        }
        match self.cqe.app_op {
            CQE_APP_OP_TM_CONSUMED_MSG
            | CQE_APP_OP_TM_CONSUMED_MSG_SW_RDNV
            | CQE_APP_OP_TM_MSG_COMPLETION_CANCELED => WcFlags::TM_MATCH | WcFlags::TM_DATA_VALID,
            CQE_APP_OP_TM_CONSUMED | CQE_APP_OP_TM_CONSUMED_SW_RDNV => WcFlags::TM_MATCH,
            CQE_APP_OP_TM_EXPECTED => WcFlags::TM_DATA_VALID,
            _ => 0,
        }
    }

    /// `wc_flags` as `ibv_poll_cq` fills it (libmlx5 `handle_responder`):
    /// [`Self::wc_flags`] without the tag-matching flags.
    fn poll_wc_flags(&self) -> WcFlags {
        let mut flags = 0;
        if self.rx_csum_valid && self.ip_csum_ok() {
            flags |= WcFlags::IP_CSUM_OK;
        }
        match self.cqe.opcode() {
            CqeOpcode::RespWrImm | CqeOpcode::RespSendImm => flags |= WcFlags::WITH_IMM,
            CqeOpcode::RespSendInv => flags |= WcFlags::WITH_INV,
            _ => {}
        }
        if self.cqe.flags_rqpn.grh() != 0 {
            flags |= WcFlags::GRH;
        }
        WcFlags(flags)
    }

    /// libmlx5 `get_csum_ok`: L3 and L4 OK on an IPv4 packet.
    pub fn ip_csum_ok(&self) -> bool {
        self.l3_ok() && self.l4_ok() && self.l3_hdr_type() == L3HdrType::Ipv4
    }

    /// `read_byte_len`: the CQE byte count as is (for a striding RQ use
    /// [`Self::mprq_byte_cnt`]).
    pub fn byte_len(&self) -> u32 {
        self.byte_cnt()
    }

    /// `read_imm_data` as libmlx5 returns it, decoded from big endian: the
    /// immediate as sent; for SEND_INV the invalidated rkey byte-swapped
    /// (libmlx5 hands the host-order rkey back through a `__be32`).
    pub fn imm_data(&self) -> u32 {
        let raw = self.cqe.imm_inval_pkey.get();
        if self.cqe.opcode() == CqeOpcode::RespSendInv {
            raw.swap_bytes()
        } else {
            raw
        }
    }

    /// The immediate data of a `*_WITH_IMM` completion.
    pub fn immediate(&self) -> Option<u32> {
        matches!(
            self.cqe.opcode(),
            CqeOpcode::RespWrImm | CqeOpcode::RespSendImm
        )
        .then(|| self.cqe.imm_inval_pkey.get())
    }

    /// The invalidated rkey of a SEND_WITH_INV completion
    /// (`ibv_wc_read_invalidated_rkey`).
    pub fn invalidated_rkey(&self) -> Option<u32> {
        (self.cqe.opcode() == CqeOpcode::RespSendInv).then(|| self.cqe.imm_inval_pkey.get())
    }

    /// The P_Key index (UD; `imm_inval_pkey[15:0]`).
    pub fn pkey_index(&self) -> u16 {
        self.cqe.imm_inval_pkey.get() as u16
    }

    /// `read_qp_num`: `sop_drop_qpn[23:0]`.
    pub fn qp_num(&self) -> u32 {
        SopDropQpn::from_bits(Be32::new(self.sop_drop_qpn_word())).qpn()
    }

    /// `read_src_qp`: `flags_rqpn[23:0]`.
    pub fn src_qp(&self) -> u32 {
        self.cqe.flags_rqpn.rqpn()
    }

    /// `read_slid`.
    pub fn slid(&self) -> u16 {
        self.cqe.slid.get()
    }

    /// `read_sl`: `flags_rqpn[27:24]`.
    pub fn sl(&self) -> u8 {
        self.cqe.flags_rqpn.sl()
    }

    /// `read_dlid_path_bits`: `ml_path[6:0]`.
    pub fn dlid_path_bits(&self) -> u8 {
        self.cqe.ml_path & 0x7f
    }

    /// `read_completion_ts`: the raw 64-bit timestamp.
    pub fn timestamp_raw(&self) -> u64 {
        self.cqe.timestamp.get()
    }

    /// The timestamp in nanoseconds, for the CQ's clock format.
    pub fn timestamp_ns(&self, format: TimestampFormat) -> Option<u64> {
        format.to_ns(self.timestamp_raw())
    }

    /// `read_cvlan`: the stripped VLAN TCI field (whatever the strip bit).
    pub fn cvlan(&self) -> u16 {
        self.cqe.vlan_info.get()
    }

    /// The stripped VLAN TCI, if a C-VLAN tag was stripped.
    pub fn vlan(&self) -> Option<u16> {
        self.hdr_type()
            .cvlan_stripped()
            .then(|| self.cqe.vlan_info.get())
    }

    /// `read_flow_tag`: `sop_drop_qpn & MLX5_FLOW_TAG_MASK`.
    pub fn flow_tag(&self) -> u32 {
        self.sop_drop_qpn_word() & FLOW_TAG_MASK
    }

    /// The RSS (Toeplitz) hash result.
    pub fn rss_hash(&self) -> u32 {
        match self.lane() {
            Some(l) => self.batch.rss_hash_result[l],
            None => self.cqe.rss_hash_result.get(),
        }
    }

    /// The RSS hash type byte.
    pub fn rss_hash_type(&self) -> u8 {
        self.cqe.rss_hash_type
    }

    /// The L4 checksum field (Ethernet).
    pub fn checksum(&self) -> u16 {
        match self.lane() {
            Some(l) => self.batch.check_sum[l],
            None => self.cqe.check_sum.get(),
        }
    }

    /// L3 header type.
    pub fn l3_hdr_type(&self) -> L3HdrType {
        L3HdrType::from_raw(self.hdr_type().l3_hdr_type())
    }

    /// L4 header type.
    pub fn l4_hdr_type(&self) -> L4HdrType {
        L4HdrType::from_raw(self.hdr_type().l4_hdr_type())
    }

    /// IP fragment bit.
    pub fn ip_frag(&self) -> bool {
        self.hdr_type().ip_frag()
    }

    /// L2 header OK.
    pub fn l2_ok(&self) -> bool {
        self.cqe.hds_ip_ext.l2_ok()
    }

    /// L3 (IP header) checksum OK.
    pub fn l3_ok(&self) -> bool {
        self.cqe.hds_ip_ext.l3_ok()
    }

    /// L4 checksum OK.
    pub fn l4_ok(&self) -> bool {
        self.cqe.hds_ip_ext.l4_ok()
    }

    /// The CQE `wqe_counter` (for a mini-CQE: as reconstructed).
    pub fn wqe_counter(&self) -> u16 {
        match self.lane() {
            Some(l) => self.batch.wqe_counter[l],
            None => self.cqe.wqe_counter.get(),
        }
    }

    /// Striding RQ: the byte count word decoded.
    pub fn mprq_byte_cnt(&self) -> MprqByteCnt {
        MprqByteCnt::from_bits(self.byte_cnt())
    }

    /// Striding RQ: the WQE the packet landed in (the CQE's `wqe_id`, the
    /// WQE's ring index modulo 2^16; a mini-CQE's is its title's, as the
    /// poller retired it), without expanding a mini-CQE as [`Self::cqe`]
    /// does. With [`Self::stride_index`] it locates the packet
    /// ([`crate::rq::StridingRq::stride_addr`]).
    #[inline]
    pub fn wqe_id(&self) -> Option<u16> {
        self.striding.then(|| self.cqe.wqe_id.get())
    }

    /// Striding RQ: index of the first stride of the packet.
    pub fn stride_index(&self) -> Option<u16> {
        self.striding.then(|| self.wqe_counter())
    }

    /// Striding RQ: strides consumed by the packet.
    pub fn consumed_strides(&self) -> Option<u16> {
        self.striding.then(|| self.mprq_byte_cnt().strides())
    }

    /// The packet length: the byte count, or its low 16 bits on a striding RQ.
    pub fn packet_len(&self) -> u32 {
        if self.striding {
            u32::from(self.mprq_byte_cnt().byte_cnt())
        } else {
            self.byte_len()
        }
    }

    /// Data scattered into the CQE (`MLX5_INLINE_SCATTER_32/64`): the first
    /// `min(len, 32)` bytes of a 64-byte CQE or `min(len, 64)` bytes of the
    /// first half of a 128-byte slot, `len` the byte count libmlx5 copies
    /// (`ibv_wc.byte_len`): 8 for an atomic's result (`handle_good_req`),
    /// `byte_len` otherwise. Never for a mini.
    pub fn inline_data(&self) -> Option<&[u8]> {
        if self.origin == Origin::Mini {
            return None;
        }
        let atomic = self.cqe.opcode() == CqeOpcode::Req
            && matches!(
                self.send_opcode(),
                SendOpcode::AtomicCs | SendOpcode::AtomicFa
            );
        let len = if atomic { 8 } else { self.byte_len() as usize };
        match self.cqe.format() {
            CqeFormat::InlineScatter32 => {
                let bytes: &[u8; 64] = zerocopy::transmute_ref!(&self.cqe);
                bytes.get(..len.min(32))
            }
            CqeFormat::InlineScatter64 => self.inline.get(..len.min(64)),
            _ => None,
        }
    }

    /// The fields most receive and send loops need, as one small value
    /// (what [`super::Cq::poll_burst`] hands out).
    #[inline(always)]
    pub fn summary(&self) -> CompletionSummary {
        CompletionSummary::new(
            self.wr_id,
            self.byte_cnt(),
            self.status,
            self.cqe.op_own.opcode(),
            self.origin,
        )
    }

    /// All fields at once, as `ibv_poll_cq` (libmlx5 `mlx5_parse_cqe`,
    /// non-lazy) fills `struct ibv_wc`. Fields libmlx5 leaves unwritten
    /// are 0.
    pub fn to_wc(&self) -> Wc {
        let mut wc = Wc::default();
        self.write_wc(&mut wc);
        wc
    }

    /// [`Self::to_wc`] into `wc` (every field written).
    #[inline(always)]
    pub(crate) fn write_wc(&self, wc: &mut Wc) {
        use super::{
            OP_REQ, OP_REQ_ERR, OP_RESP_ERR, OP_RESP_SEND, OP_RESP_SEND_IMM, OP_RESP_SEND_INV,
            OP_RESP_WR_IMM,
        };
        let word = self.sop_drop_qpn_word();
        wc.wr_id = self.wr_id;
        wc.status = self.status;
        wc.qp_num = word & QPN_BITS;
        wc.vendor_err = 0;
        wc.imm_data = 0;
        wc.src_qp = 0;
        wc.pkey_index = 0;
        wc.slid = 0;
        wc.sl = 0;
        wc.dlid_path_bits = 0;
        let opcode = self.cqe.op_own.into_bits() >> 4;
        if opcode == OP_REQ {
            let retired = SendRetired {
                wr_id: self.wr_id,
                wr_opcode: self.wr_opcode,
            };
            write_req_wc(wc, retired, word, self.byte_len());
            return;
        }
        match opcode {
            OP_RESP_WR_IMM | OP_RESP_SEND | OP_RESP_SEND_IMM | OP_RESP_SEND_INV => {
                match self.origin {
                    Origin::Regular => {
                        write_resp_wc(wc, self.wr_id, self.rx_csum_valid, &self.cqe);
                    }
                    Origin::Mini => self.write_resp_wc_by_accessors(wc),
                }
            }
            OP_REQ_ERR | OP_RESP_ERR => {
                wc.opcode = None;
                wc.byte_len = 0;
                wc.wc_flags = WcFlags(0);
                wc.vendor_err = self.vendor_err();
            }
            _ => {
                wc.opcode = None;
                wc.byte_len = 0;
                wc.wc_flags = WcFlags(0);
            }
        }
    }

    /// The responder fields of [`Self::to_wc`] from the accessors (a mini's
    /// come from its lane); `wc` is otherwise as `write_wc` left it.
    pub(crate) fn write_resp_wc_by_accessors(&self, wc: &mut Wc) {
        wc.opcode = Some(self.opcode());
        wc.byte_len = self.byte_len();
        wc.imm_data = self.imm_data();
        wc.wc_flags = self.poll_wc_flags();
        wc.src_qp = self.src_qp();
        wc.pkey_index = self.pkey_index();
        wc.slid = self.slid();
        wc.sl = self.sl();
        wc.dlid_path_bits = self.dlid_path_bits();
    }
}

/// The `Wc` of a successful requester completion (what
/// [`Completion::to_wc`] gives for one): `retired` from the send queue,
/// `word` the CQE's `sop_drop_qpn`, `byte_cnt` its byte count.
#[inline(always)]
pub(crate) fn write_req_wc(wc: &mut Wc, retired: SendRetired, word: u32, byte_cnt: u32) {
    // One table row by send opcode (`sop_drop_qpn[31:24]`).
    let row = REQ_WC[(word >> 24) as usize];
    *wc = Wc {
        wr_id: retired.wr_id,
        status: WcStatus::Success,
        opcode: if retired.wr_opcode == Some(WcOpcode::Driver2) {
            Some(WcOpcode::Driver2)
        } else if row.recorded {
            retired.wr_opcode
        } else {
            row.opcode
        },
        vendor_err: 0,
        byte_len: (byte_cnt & row.len_mask) | row.len_const,
        imm_data: 0,
        qp_num: word & QPN_BITS,
        src_qp: 0,
        wc_flags: WcFlags(row.flags),
        pkey_index: 0,
        slid: 0,
        sl: 0,
        dlid_path_bits: 0,
    };
}

/// The `Wc` of a successful responder completion of a regular CQE `cqe`
/// (what [`Completion::to_wc`] gives for one): `wr_id` and
/// `rx_csum_valid` from the receive queue (libmlx5 `handle_responder`,
/// `mlx5_parse_cqe`: opcode, byte count, immediate or invalidated rkey,
/// flags, source QP, P_Key index, SLID, SL, path bits).
#[inline(always)]
pub(crate) fn write_resp_wc(wc: &mut Wc, wr_id: u64, rx_csum_valid: bool, cqe: &Cqe64) {
    let op = cqe.op_own.into_bits() >> 4;
    let raw_imm = cqe.imm_inval_pkey.get();
    let mut flags = if op == CqeOpcode::RespWrImm.raw() || op == CqeOpcode::RespSendImm.raw() {
        WcFlags::WITH_IMM
    } else if op == CqeOpcode::RespSendInv.raw() {
        WcFlags::WITH_INV
    } else {
        0
    };
    if rx_csum_valid
        && cqe.hds_ip_ext.l3_ok()
        && cqe.hds_ip_ext.l4_ok()
        && L3HdrType::from_raw(cqe.l4_l3_hdr_type.l3_hdr_type()) == L3HdrType::Ipv4
    {
        flags |= WcFlags::IP_CSUM_OK;
    }
    if cqe.flags_rqpn.grh() != 0 {
        flags |= WcFlags::GRH;
    }
    *wc = Wc {
        wr_id,
        status: WcStatus::Success,
        opcode: Some(if op == CqeOpcode::RespWrImm.raw() {
            WcOpcode::RecvRdmaWithImm
        } else {
            WcOpcode::Recv
        }),
        vendor_err: 0,
        byte_len: cqe.byte_cnt.get(),
        imm_data: if op == CqeOpcode::RespSendInv.raw() {
            raw_imm.swap_bytes()
        } else {
            raw_imm
        },
        qp_num: cqe.sop_drop_qpn.qpn(),
        src_qp: cqe.flags_rqpn.rqpn(),
        wc_flags: WcFlags(flags),
        pkey_index: raw_imm as u16,
        slid: cqe.slid.get(),
        sl: cqe.flags_rqpn.sl(),
        dlid_path_bits: cqe.ml_path & 0x7f,
    };
}

/// `sop_drop_qpn[23:0]`.
const QPN_BITS: u32 = 0x00ff_ffff;

/// What `ibv_poll_cq` reports for a successful requester CQE of one send
/// opcode.
#[derive(Clone, Copy, Debug)]
struct ReqWc {
    /// The opcode the send opcode names ([`WcOpcode::from_send_opcode`]).
    opcode: Option<WcOpcode>,
    /// NOP, UMR, SET_PSV, MMO: the opcode recorded at post time instead.
    recorded: bool,
    /// `wc_flags`: `IBV_WC_WITH_IMM` for RDMA WRITE with immediate and
    /// SEND with immediate.
    flags: u32,
    /// `byte_len = (byte_cnt & len_mask) | len_const` (libmlx5
    /// `handle_good_req`): the CQE's byte count for RDMA READ, 8 for the
    /// two atomics, else 0.
    len_mask: u32,
    /// See `len_mask`.
    len_const: u32,
}

/// [`ReqWc`] of a raw send opcode, as [`Completion::req_opcode`] and
/// [`Completion::to_wc`] define it.
const fn req_wc(raw: u8) -> ReqWc {
    let sop = SendOpcode::from_raw(raw);
    ReqWc {
        opcode: WcOpcode::from_send_opcode(sop),
        recorded: matches!(
            sop,
            SendOpcode::Nop | SendOpcode::Umr | SendOpcode::SetPsv | SendOpcode::Mmo
        ),
        flags: if matches!(sop, SendOpcode::RdmaWriteImm | SendOpcode::SendImm) {
            WcFlags::WITH_IMM
        } else {
            0
        },
        len_mask: if matches!(sop, SendOpcode::RdmaRead) {
            u32::MAX
        } else {
            0
        },
        len_const: if matches!(sop, SendOpcode::AtomicCs | SendOpcode::AtomicFa) {
            8
        } else {
            0
        },
    }
}

/// [`req_wc`] of every send opcode byte.
static REQ_WC: [ReqWc; 256] = {
    let mut t = [req_wc(0); 256];
    let mut i = 0;
    while i < 256 {
        t[i] = req_wc(i as u8);
        i += 1;
    }
    t
};

/// One completion as a small `Copy` value: what a burst loop needs
/// ([`super::Cq::poll_burst`]; DPDK's `rx_burst` hands out as much). Every
/// other field is on [`Completion`].
///
/// 16 bytes, 16-aligned: one vector store per completion. The status is
/// held as its raw `ibv_wc_status` value ([`Self::status`] decodes it;
/// every status a CQE can produce is below 2^16).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C, align(16))]
pub struct CompletionSummary {
    /// The work request id.
    pub wr_id: u64,
    /// `byte_cnt` as the CQE (or mini) reports it (striding RQ: the
    /// [`MprqByteCnt`] word).
    pub byte_len: u32,
    /// The raw completion status ([`WcStatus::raw`]).
    status: u16,
    /// The raw CQE opcode (`op_own[7:4]`; [`CqeOpcode::from_raw`]).
    pub opcode: u8,
    /// Regular CQE or mini-CQE.
    pub origin: Origin,
}

// The layout `upper_word` and the vector writers rely on.
const _: () = {
    use core::mem::{offset_of, size_of};
    assert!(size_of::<CompletionSummary>() == 16);
    assert!(offset_of!(CompletionSummary, wr_id) == 0);
    assert!(offset_of!(CompletionSummary, byte_len) == 8);
    assert!(offset_of!(CompletionSummary, status) == 12);
    assert!(offset_of!(CompletionSummary, opcode) == 14);
    assert!(offset_of!(CompletionSummary, origin) == 15);
};

impl CompletionSummary {
    /// A summary; `status` is kept as its raw value (saturated at 2^16 − 1,
    /// a value no CQE produces).
    #[inline(always)]
    pub const fn new(
        wr_id: u64,
        byte_len: u32,
        status: WcStatus,
        opcode: u8,
        origin: Origin,
    ) -> Self {
        let raw = status.raw();
        let status = if raw > 0xffff { 0xffff } else { raw as u16 };
        Self {
            wr_id,
            byte_len,
            status,
            opcode,
            origin,
        }
    }

    /// A summary from the raw status.
    #[inline(always)]
    pub(crate) const fn from_parts(
        wr_id: u64,
        byte_len: u32,
        status: u16,
        opcode: u8,
        origin: Origin,
    ) -> Self {
        Self {
            wr_id,
            byte_len,
            status,
            opcode,
            origin,
        }
    }

    /// The second quadword of a summary as it lies in memory (little
    /// endian): `byte_len | status << 32 | opcode << 48 | origin << 56`
    /// (see [`super::mem::store_summary`]).
    #[inline(always)]
    pub(crate) const fn high_word(byte_len: u32, status: u16, opcode: u8, origin: Origin) -> u64 {
        byte_len as u64 | (status as u64) << 32 | (opcode as u64) << 48 | (origin as u64) << 56
    }

    /// Bytes 12–15 of a summary (status, opcode, origin) as the high half
    /// of its second little-endian quadword, for vector writers: a summary
    /// is `wr_id`, then `byte_len | upper_word << 32`.
    pub(crate) const fn upper_word(status: u16, opcode: u8, origin: Origin) -> u32 {
        status as u32 | (opcode as u32) << 16 | (origin as u32) << 24
    }

    /// The completion status.
    #[inline(always)]
    pub const fn status(&self) -> WcStatus {
        WcStatus::from_raw(self.status as u32)
    }
}

impl Default for CompletionSummary {
    fn default() -> Self {
        Self::new(0, 0, WcStatus::Success, 0, Origin::Regular)
    }
}

/// A plain `struct ibv_wc`-like value, for users who want every field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Wc {
    /// `wr_id`.
    pub wr_id: u64,
    /// `status`.
    pub status: WcStatus,
    /// `opcode` (`None` where libmlx5 leaves it unwritten: error CQEs).
    pub opcode: Option<WcOpcode>,
    /// `vendor_err` (error completions).
    pub vendor_err: u32,
    /// `byte_len`.
    pub byte_len: u32,
    /// `imm_data` decoded from big endian (see [`Completion::imm_data`]).
    pub imm_data: u32,
    /// `qp_num`.
    pub qp_num: u32,
    /// `src_qp`.
    pub src_qp: u32,
    /// `wc_flags`.
    pub wc_flags: WcFlags,
    /// `pkey_index`.
    pub pkey_index: u16,
    /// `slid`.
    pub slid: u16,
    /// `sl`.
    pub sl: u8,
    /// `dlid_path_bits`.
    pub dlid_path_bits: u8,
}

impl Default for Wc {
    fn default() -> Self {
        Self {
            wr_id: 0,
            status: WcStatus::Success,
            opcode: None,
            vendor_err: 0,
            byte_len: 0,
            imm_data: 0,
            qp_num: 0,
            src_qp: 0,
            wc_flags: WcFlags(0),
            pkey_index: 0,
            slid: 0,
            sl: 0,
            dlid_path_bits: 0,
        }
    }
}
