//! Send WQE segments (PRM "Send WQE Format"; rdma-core `mlx5dv.h`, kernel
//! `include/linux/mlx5/qp.h`, DPDK `mlx5_prm.h`).
//!
//! A send WQE is a sequence of 16-byte units ("DS"): one [`CtrlSeg`], then
//! the segments its opcode and QP type need, in the order the PRM fixes
//! (PRM-FACTS §2–§6):
//!
//! | QP type / operation | segments after the control segment |
//! |---|---|
//! | RC/UC send, write | [`RaddrSeg`] (write/read only), data or inline |
//! | RC atomic | [`RaddrSeg`], [`AtomicSeg`] (or masked), one 8-byte [`DataSeg`] for the result |
//! | UD | [`Av`] (the datagram segment), data or inline |
//! | XRC | [`XrcSeg`], then as RC |
//! | raw Ethernet | [`EthSeg`] (+ inline header), data or inline |

use super::{wire_struct, Be16, Be32, Be64};
use bitfield_struct::bitfield;

/// `opmod_idx_opcode` of the control segment: opcode, WQE index, opmod.
#[bitfield(u32, repr = Be32, from = Be32::new, into = Be32::get)]
#[derive(
    zerocopy::FromBytes,
    zerocopy::IntoBytes,
    zerocopy::KnownLayout,
    zerocopy::Immutable,
    zerocopy::Unaligned,
    PartialEq,
    Eq,
)]
pub struct OpmodIdxOpcode {
    /// Send opcode (`MLX5_OPCODE_*`), bits [7:0].
    #[bits(8)]
    pub opcode: u8,
    /// WQEBB counter of this WQE's first basic block, bits [23:8]; wraps at
    /// 0xffff whatever the SQ size.
    #[bits(16)]
    pub wqe_index: u16,
    /// Opcode modifier, bits [31:24].
    #[bits(8)]
    pub opmod: u8,
}

/// `qpn_ds` of the control segment: QP/SQ number and DS count.
#[bitfield(u32, repr = Be32, from = Be32::new, into = Be32::get)]
#[derive(
    zerocopy::FromBytes,
    zerocopy::IntoBytes,
    zerocopy::KnownLayout,
    zerocopy::Immutable,
    zerocopy::Unaligned,
    PartialEq,
    Eq,
)]
pub struct QpnDs {
    /// WQE size in 16-byte units including the control segment, bits [5:0].
    #[bits(6)]
    pub ds: u8,
    #[bits(2)]
    __: u8,
    /// QP number (or SQ number), bits [31:8].
    #[bits(24)]
    pub qpn: u32,
}

/// `fm_ce_se` of the control segment: fence, completion and solicited bits.
#[bitfield(u8)]
#[derive(
    zerocopy::FromBytes,
    zerocopy::IntoBytes,
    zerocopy::KnownLayout,
    zerocopy::Immutable,
    zerocopy::Unaligned,
    PartialEq,
    Eq,
)]
pub struct FmCeSe {
    #[bits(1)]
    __: u8,
    /// Solicited event, bit 1 (`MLX5_WQE_CTRL_SOLICITED`).
    #[bits(1)]
    pub se: bool,
    /// Completion mode, bits [3:2] ([`super::CompletionMode`]).
    #[bits(2)]
    pub ce: u8,
    #[bits(1)]
    __: u8,
    /// Fence mode, bits [7:5] ([`super::FenceMode`]).
    #[bits(3)]
    pub fm: u8,
}

wire_struct! {
    /// Control segment `mlx5_wqe_ctrl_seg`: the first 16 bytes of every send WQE.
    pub struct CtrlSeg(16) {
        /// Opcode, WQE index and opmod.
        pub opmod_idx_opcode: OpmodIdxOpcode,
        /// QPN and DS count.
        pub qpn_ds: QpnDs,
        /// WQE signature (0 unless the QP was created with signatures).
        pub signature: u8,
        /// DCI stream channel id (rdma-core, UCX); reserved in the kernel.
        pub dci_stream_channel_id: Be16,
        /// Fence, completion-event and solicited bits.
        pub fm_ce_se: FmCeSe,
        /// Immediate data (already big-endian as the user gave it), the rkey
        /// to invalidate, the UMR mkey, or the TIS number.
        pub imm: Be32,
    }
}

wire_struct! {
    /// Data (pointer) segment `mlx5_wqe_data_seg`: a scatter/gather entry.
    pub struct DataSeg(16) {
        /// Byte count; bit 31 must be clear (else it is an inline segment).
        pub byte_count: Be32,
        /// Local key of the memory region.
        pub lkey: Be32,
        /// Virtual address.
        pub addr: Be64,
    }
}

/// The 4-byte header of an inline data segment: length and the inline bit.
#[bitfield(u32, repr = Be32, from = Be32::new, into = Be32::get)]
#[derive(
    zerocopy::FromBytes,
    zerocopy::IntoBytes,
    zerocopy::KnownLayout,
    zerocopy::Immutable,
    zerocopy::Unaligned,
    PartialEq,
    Eq,
)]
pub struct InlineByteCount {
    /// Number of inline bytes that follow, bits [30:0].
    #[bits(31)]
    pub byte_count: u32,
    /// `MLX5_INLINE_SEG` (bit 31): the segment carries its data inline.
    #[bits(1)]
    pub inline: bool,
}

/// `MLX5_INLINE_SEG`: bit 31 of an inline segment's byte count.
pub const INLINE_SEG: u32 = 0x8000_0000;

wire_struct! {
    /// Inline data segment header `mlx5_wqe_inl_data_seg`; the data follows
    /// immediately and the whole segment is padded to 16 bytes.
    pub struct InlineSeg(4) {
        /// Length with the inline bit.
        pub byte_count: InlineByteCount,
    }
}

impl InlineSeg {
    /// DS units an inline segment of `len` data bytes occupies: `ceil((4 + len) / 16)`.
    pub const fn ds_for(len: usize) -> usize {
        (Self::SIZE + len).div_ceil(super::SEND_WQE_DS)
    }
}

wire_struct! {
    /// Remote address segment `mlx5_wqe_raddr_seg` (RDMA write/read, atomics).
    pub struct RaddrSeg(16) {
        /// Remote virtual address.
        pub raddr: Be64,
        /// Remote key.
        pub rkey: Be32,
        /// Reserved.
        pub reserved: Be32,
    }
}

wire_struct! {
    /// Atomic segment `mlx5_wqe_atomic_seg` (8-byte compare-and-swap and fetch-and-add).
    pub struct AtomicSeg(16) {
        /// Swap value (CS) or add value (FA).
        pub swap_add: Be64,
        /// Compare value (CS); unused by FA.
        pub compare: Be64,
    }
}

wire_struct! {
    /// Masked 64-bit atomic segment `mlx5_wqe_masked_atomic_seg` (kernel
    /// `qp.h`; two DS): masked compare-and-swap with 8-byte operands.
    pub struct MaskedAtomicSeg64(32) {
        /// Swap (CS) or add (FA) value.
        pub swap_add: Be64,
        /// Compare value.
        pub compare: Be64,
        /// Bits of `swap_add` that are swapped in.
        pub swap_add_mask: Be64,
        /// Bits that take part in the compare.
        pub compare_mask: Be64,
    }
}

wire_struct! {
    /// Masked compare-and-swap with 4-byte operands (UCX `uct_ib_mlx5_atomic_masked_cswap32_seg`).
    pub struct MaskedCs32Seg(16) {
        /// Swap value.
        pub swap: Be32,
        /// Compare value.
        pub compare: Be32,
        /// Bits of `swap` that are swapped in.
        pub swap_mask: Be32,
        /// Bits that take part in the compare.
        pub compare_mask: Be32,
    }
}

wire_struct! {
    /// Masked fetch-and-add with 4-byte operands (UCX `uct_ib_mlx5_atomic_masked_fadd32_seg`).
    pub struct MaskedFa32Seg(16) {
        /// Add value.
        pub add: Be32,
        /// Field boundary: bits where a carry stops (all ones for XOR emulation).
        pub field_boundary: Be32,
        /// Reserved.
        pub reserved: [u8; 8],
    }
}

wire_struct! {
    /// Masked fetch-and-add with 8-byte operands (UCX `uct_ib_mlx5_atomic_masked_fadd64_seg`).
    pub struct MaskedFa64Seg(16) {
        /// Add value.
        pub add: Be64,
        /// Field boundary.
        pub field_boundary: Be64,
    }
}

wire_struct! {
    /// XRC segment `mlx5_wqe_xrc_seg`: the remote XRC SRQ number.
    pub struct XrcSeg(16) {
        /// Remote XRC SRQ number.
        pub xrc_srqn: Be32,
        /// Reserved.
        pub reserved: [u8; 12],
    }
}

wire_struct! {
    /// UMR control segment `mlx5_wqe_umr_ctrl_seg` (48 bytes, after the
    /// control segment of a UMR WQE): what the UMR changes in the mkey
    /// ([`umr::CTRL_FLAG_INLINE`] and the other flags, the `mkey_mask`
    /// bits `umr::MKEY_MASK_*`) and the size of the translation that
    /// follows. libmlx5 builds a LOCAL_INV and a BIND_MW as UMR WQEs.
    pub struct UmrCtrlSeg(48) {
        /// `umr::CTRL_FLAG_*`.
        pub flags: u8,
        /// Reserved.
        pub rsvd0: [u8; 3],
        /// Size of the translation entries (KLMs) in 16-byte units.
        pub klm_octowords: Be16,
        /// Translation offset (or BSF size in 16-byte units).
        pub translation_offset: Be16,
        /// The mkey context fields the UMR writes (`umr::MKEY_MASK_*`).
        pub mkey_mask: Be64,
        /// Reserved.
        pub rsvd1: [u8; 32],
    }
}

wire_struct! {
    /// Mkey context segment `mlx5_wqe_mkey_context_seg` (64 bytes, after
    /// the UMR control segment): the mkey's new state, of which the UMR
    /// control segment's `mkey_mask` selects the fields that apply.
    pub struct MkeyContextSeg(64) {
        /// [`umr::MKEY_CONTEXT_FREE`]: the mkey is free (invalidated).
        pub free: u8,
        /// Reserved.
        pub reserved1: u8,
        /// `umr::ACCESS_*` bits.
        pub access_flags: u8,
        /// Signature / BSF flags.
        pub sf: u8,
        /// QPN (bits 31:8) and mkey variant (bits 7:0).
        pub qpn_mkey: Be32,
        /// Reserved.
        pub reserved2: Be32,
        /// Flags (bits 31:24) and PD (bits 23:0).
        pub flags_pd: Be32,
        /// Start address.
        pub start_addr: Be64,
        /// Length.
        pub len: Be64,
        /// BSF size in 16-byte units.
        pub bsf_octword_size: Be32,
        /// Reserved.
        pub reserved3: [u8; 16],
        /// Translation size in 16-byte units.
        pub translations_octword_size: Be32,
        /// Reserved.
        pub reserved4: [u8; 3],
        /// log2 of the page size.
        pub log_page_size: u8,
        /// Reserved.
        pub reserved: Be32,
    }
}

wire_struct! {
    /// UMR translation entry `mlx5_wqe_umr_klm_seg` (16 bytes, inline
    /// after the mkey context when [`umr::CTRL_FLAG_INLINE`] is set): one
    /// range of a memory region, up to 2 GiB. libmlx5's BIND_MW writes one,
    /// zero-padded to 64 bytes.
    pub struct UmrKlmSeg(16) {
        /// Length of the range in bytes.
        pub byte_count: Be32,
        /// The key of the region the range lies in.
        pub mkey: Be32,
        /// Start of the range.
        pub address: Be64,
    }
}

/// UMR flags and masks (rdma-core `mlx5dv.h`), for [`UmrCtrlSeg`] and
/// [`MkeyContextSeg`].
pub mod umr {
    /// `MLX5_WQE_UMR_CTRL_FLAG_INLINE`: the translation is inline.
    pub const CTRL_FLAG_INLINE: u8 = 1 << 7;
    /// `MLX5_WQE_UMR_CTRL_FLAG_CHECK_FREE`: fail unless the mkey is free.
    pub const CTRL_FLAG_CHECK_FREE: u8 = 1 << 5;
    /// `MLX5_WQE_UMR_CTRL_FLAG_TRNSLATION_OFFSET`: `translation_offset`
    /// is an offset (not a BSF size).
    pub const CTRL_FLAG_TRANSLATION_OFFSET: u8 = 1 << 4;
    /// `MLX5_WQE_UMR_CTRL_FLAG_CHECK_QPN`: fail unless the mkey's QPN is
    /// this QP.
    pub const CTRL_FLAG_CHECK_QPN: u8 = 1 << 3;
    /// `MLX5_WQE_UMR_CTRL_MKEY_MASK_LEN`.
    pub const MKEY_MASK_LEN: u64 = 1 << 0;
    /// `MLX5_WQE_UMR_CTRL_MKEY_MASK_START_ADDR`.
    pub const MKEY_MASK_START_ADDR: u64 = 1 << 6;
    /// `MLX5_WQE_UMR_CTRL_MKEY_MASK_SIG_ERR`.
    pub const MKEY_MASK_SIG_ERR: u64 = 1 << 9;
    /// `MLX5_WQE_UMR_CTRL_MKEY_MASK_BSF_ENABLE`.
    pub const MKEY_MASK_BSF_ENABLE: u64 = 1 << 12;
    /// `MLX5_WQE_UMR_CTRL_MKEY_MASK_MKEY`.
    pub const MKEY_MASK_MKEY: u64 = 1 << 13;
    /// `MLX5_WQE_UMR_CTRL_MKEY_MASK_QPN`.
    pub const MKEY_MASK_QPN: u64 = 1 << 14;
    /// `MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_LOCAL_WRITE`.
    pub const MKEY_MASK_ACCESS_LOCAL_WRITE: u64 = 1 << 18;
    /// `MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_REMOTE_READ`.
    pub const MKEY_MASK_ACCESS_REMOTE_READ: u64 = 1 << 19;
    /// `MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_REMOTE_WRITE`.
    pub const MKEY_MASK_ACCESS_REMOTE_WRITE: u64 = 1 << 20;
    /// `MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_ATOMIC`.
    pub const MKEY_MASK_ACCESS_ATOMIC: u64 = 1 << 21;
    /// `MLX5_WQE_UMR_CTRL_MKEY_MASK_FREE`.
    pub const MKEY_MASK_FREE: u64 = 1 << 29;
    /// [`super::MkeyContextSeg::qpn_mkey`]'s QPN field (bits 31:8) of a key
    /// bound to no QP: all ones (libmlx5 `set_umr_mkey_seg` writes it for a
    /// type-1 bind and for every free).
    pub const MKEY_QPN_NONE: u32 = 0x00ff_ffff;
    /// `MLX5_WQE_MKEY_CONTEXT_FREE`: [`super::MkeyContextSeg::free`].
    pub const MKEY_CONTEXT_FREE: u8 = 1 << 6;
    /// `MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_ATOMIC`.
    pub const ACCESS_ATOMIC: u8 = 1 << 6;
    /// `MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_REMOTE_WRITE`.
    pub const ACCESS_REMOTE_WRITE: u8 = 1 << 5;
    /// `MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_REMOTE_READ`.
    pub const ACCESS_REMOTE_READ: u8 = 1 << 4;
    /// `MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_LOCAL_WRITE`.
    pub const ACCESS_LOCAL_WRITE: u8 = 1 << 3;
    /// `MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_LOCAL_READ`.
    pub const ACCESS_LOCAL_READ: u8 = 1 << 2;
}

/// `dqp_dct` of the address vector: remote QPN / DCT number and the extended-AV bit.
#[bitfield(u32, repr = Be32, from = Be32::new, into = Be32::get)]
#[derive(
    zerocopy::FromBytes,
    zerocopy::IntoBytes,
    zerocopy::KnownLayout,
    zerocopy::Immutable,
    zerocopy::Unaligned,
    PartialEq,
    Eq,
)]
pub struct DqpDct {
    /// Remote QPN (UD) or DCT number (DC), bits [23:0].
    #[bits(24)]
    pub dqp_dct: u32,
    #[bits(7)]
    __: u8,
    /// `MLX5_EXTENDED_UD_AV` (bit 31): the full 48-byte AV follows.
    #[bits(1)]
    pub extended: bool,
}

/// `MLX5_EXTENDED_UD_AV`: bit 31 of `dqp_dct`.
pub const EXTENDED_UD_AV: u32 = 0x8000_0000;

/// `stat_rate_sl` of the address vector.
#[bitfield(u8)]
#[derive(
    zerocopy::FromBytes,
    zerocopy::IntoBytes,
    zerocopy::KnownLayout,
    zerocopy::Immutable,
    zerocopy::Unaligned,
    PartialEq,
    Eq,
)]
pub struct StatRateSl {
    /// Service level, bits \[3:0\] (RoCE: priority in \[3:1\]).
    #[bits(4)]
    pub sl: u8,
    /// Static rate, bits [7:4].
    #[bits(4)]
    pub stat_rate: u8,
}

impl StatRateSl {
    /// The SL of a RoCE address vector: bits \[3:1\] (rdma-core `verbs.c`
    /// `mlx5_create_ah` writes `(sl & 7) << 1` for an Ethernet port;
    /// PRM-FACTS §5.6). An InfiniBand AV's is [`Self::sl`], bits \[3:0\].
    pub const fn roce_sl(self) -> u8 {
        (self.into_bits() >> 1) & 0x7
    }
}

/// `fl_mlid` of the address vector.
#[bitfield(u8)]
#[derive(
    zerocopy::FromBytes,
    zerocopy::IntoBytes,
    zerocopy::KnownLayout,
    zerocopy::Immutable,
    zerocopy::Unaligned,
    PartialEq,
    Eq,
)]
pub struct FlMlid {
    /// Source path bits, bits [6:0].
    #[bits(7)]
    pub mlid: u8,
    /// Force loopback, bit 7.
    #[bits(1)]
    pub fl: bool,
}

/// `grh_gid_fl` of the address vector.
#[bitfield(u32, repr = Be32, from = Be32::new, into = Be32::get)]
#[derive(
    zerocopy::FromBytes,
    zerocopy::IntoBytes,
    zerocopy::KnownLayout,
    zerocopy::Immutable,
    zerocopy::Unaligned,
    PartialEq,
    Eq,
)]
pub struct GrhGidFl {
    /// Flow label, bits [19:0].
    #[bits(20)]
    pub flow_label: u32,
    /// Source GID index, bits [27:20].
    #[bits(8)]
    pub sgid_index: u8,
    #[bits(2)]
    __: u8,
    /// GRH present, bit 30 (InfiniBand only; RoCE keeps it clear).
    #[bits(1)]
    pub grh: bool,
    #[bits(1)]
    __: u8,
}

wire_struct! {
    /// Address vector `mlx5_wqe_av`, which is also the UD datagram segment
    /// `mlx5_wqe_datagram_seg` (48 bytes, 3 DS). The first 16 bytes alone
    /// are the "base AV" ([`AvBase`]) when `dqp_dct.extended` is clear.
    pub struct Av(48) {
        /// Q_Key (UD); with `key_reserved`, the 64-bit DC access key.
        pub qkey: Be32,
        /// Low half of the DC key; reserved for UD.
        pub key_reserved: Be32,
        /// Remote QPN/DCT and the extended bit.
        pub dqp_dct: DqpDct,
        /// Static rate and SL.
        pub stat_rate_sl: StatRateSl,
        /// Force-loopback and path bits.
        pub fl_mlid: FlMlid,
        /// Remote LID (RoCEv2: UDP source port).
        pub rlid: Be16,
        /// Reserved.
        pub reserved0: [u8; 4],
        /// Destination MAC (RoCE).
        pub rmac: [u8; 6],
        /// Traffic class.
        pub tclass: u8,
        /// Hop limit.
        pub hop_limit: u8,
        /// GRH flag, SGID index, flow label.
        pub grh_gid_fl: GrhGidFl,
        /// Remote GID.
        pub rgid: [u8; 16],
    }
}

impl Av {
    /// The 64-bit DC access key (bytes 0–7).
    pub fn dc_key(&self) -> u64 {
        (u64::from(self.qkey.get()) << 32) | u64::from(self.key_reserved.get())
    }

    /// Sets the 64-bit DC access key (bytes 0–7).
    pub fn set_dc_key(&mut self, key: u64) {
        self.qkey.set((key >> 32) as u32);
        self.key_reserved.set(key as u32);
    }
}

wire_struct! {
    /// The compact 16-byte base address vector (UCX `mlx5_base_av`), valid
    /// when `dqp_dct.extended` is clear.
    pub struct AvBase(16) {
        /// Q_Key (UD) or high half of the DC key.
        pub qkey: Be32,
        /// Low half of the DC key; reserved for UD.
        pub key_reserved: Be32,
        /// Remote QPN/DCT and the extended bit.
        pub dqp_dct: DqpDct,
        /// Static rate and SL.
        pub stat_rate_sl: StatRateSl,
        /// Force-loopback and path bits.
        pub fl_mlid: FlMlid,
        /// Remote LID.
        pub rlid: Be16,
    }
}

/// `cs_flags` of the Ethernet segment: checksum offload requests.
#[bitfield(u8)]
#[derive(
    zerocopy::FromBytes,
    zerocopy::IntoBytes,
    zerocopy::KnownLayout,
    zerocopy::Immutable,
    zerocopy::Unaligned,
    PartialEq,
    Eq,
)]
pub struct EthCsFlags {
    #[bits(4)]
    __: u8,
    /// Inner L3 checksum, bit 4 (`MLX5_ETH_WQE_L3_INNER_CSUM`).
    #[bits(1)]
    pub l3_inner_csum: bool,
    /// Inner L4 checksum, bit 5 (`MLX5_ETH_WQE_L4_INNER_CSUM`).
    #[bits(1)]
    pub l4_inner_csum: bool,
    /// L3 checksum, bit 6 (`MLX5_ETH_WQE_L3_CSUM`).
    #[bits(1)]
    pub l3_csum: bool,
    /// L4 checksum, bit 7 (`MLX5_ETH_WQE_L4_CSUM`).
    #[bits(1)]
    pub l4_csum: bool,
}

/// `swp_flags` of the Ethernet segment: software-parser header kinds.
#[bitfield(u8)]
#[derive(
    zerocopy::FromBytes,
    zerocopy::IntoBytes,
    zerocopy::KnownLayout,
    zerocopy::Immutable,
    zerocopy::Unaligned,
    PartialEq,
    Eq,
)]
pub struct SwpFlags {
    /// Inner L3 is IPv6, bit 0.
    #[bits(1)]
    pub inner_l3_ipv6: bool,
    /// Inner L4 is UDP, bit 1.
    #[bits(1)]
    pub inner_l4_udp: bool,
    #[bits(2)]
    __: u8,
    /// Outer L3 is IPv6, bit 4.
    #[bits(1)]
    pub outer_l3_ipv6: bool,
    /// Outer L4 is UDP, bit 5.
    #[bits(1)]
    pub outer_l4_udp: bool,
    #[bits(2)]
    __: u8,
}

/// Bytes 12–15 of the Ethernet segment read as a VLAN-insert request
/// (kernel `insert.type` / `insert.vlan_tci`; DPDK `MLX5_ETH_WQE_VLAN_INSERT`).
/// Mutually exclusive with an inline header.
#[bitfield(u32, repr = Be32, from = Be32::new, into = Be32::get)]
#[derive(
    zerocopy::FromBytes,
    zerocopy::IntoBytes,
    zerocopy::KnownLayout,
    zerocopy::Immutable,
    zerocopy::Unaligned,
    PartialEq,
    Eq,
)]
pub struct VlanInsert {
    /// The VLAN tag control information to insert, bits [15:0].
    #[bits(16)]
    pub vlan_tci: u16,
    /// Insert an S-VLAN rather than a C-VLAN, bit 16 (`MLX5_ETH_WQE_SVLAN`).
    #[bits(1)]
    pub svlan: bool,
    #[bits(14)]
    __: u16,
    /// Insert a VLAN tag, bit 31 (`MLX5_ETH_WQE_INSERT_VLAN`).
    #[bits(1)]
    pub insert: bool,
}

wire_struct! {
    /// Ethernet segment `mlx5_wqe_eth_seg`, the 16-byte base (kernel layout;
    /// rdma-core's struct is 32 bytes because it embeds 16 more bytes of
    /// inline header). The inline header starts in `inline_hdr_start` and
    /// continues in the following 16-byte units.
    pub struct EthSeg(16) {
        /// Software parser: outer L4 offset in 2-byte units.
        pub swp_outer_l4_offset: u8,
        /// Software parser: outer L3 offset in 2-byte units.
        pub swp_outer_l3_offset: u8,
        /// Software parser: inner L4 offset in 2-byte units.
        pub swp_inner_l4_offset: u8,
        /// Software parser: inner L3 offset in 2-byte units.
        pub swp_inner_l3_offset: u8,
        /// Checksum offload flags.
        pub cs_flags: EthCsFlags,
        /// Software-parser header kinds.
        pub swp_flags: SwpFlags,
        /// LSO maximum segment size; legacy MPW: the (common) packet length.
        pub mss: Be16,
        /// Tx metadata for steering (rdma-core `rsvd2`).
        pub flow_table_metadata: Be32,
        /// Bytes of packet header inlined (0 when `vlan_insert` is used).
        pub inline_hdr_sz: Be16,
        /// First two inline header bytes.
        pub inline_hdr_start: [u8; 2],
    }
}

impl EthSeg {
    /// Byte offset of `inline_hdr_start` within the segment.
    pub const INLINE_HDR_OFFSET: usize = 14;

    /// Bytes 12–15 read as a VLAN-insert request.
    pub fn vlan_insert(&self) -> VlanInsert {
        let [s0, s1] = self.inline_hdr_sz.to_bytes();
        let [h0, h1] = self.inline_hdr_start;
        zerocopy::transmute!([s0, s1, h0, h1])
    }

    /// Writes bytes 12–15 as a VLAN-insert request.
    pub fn set_vlan_insert(&mut self, v: VlanInsert) {
        let [s0, s1, h0, h1]: [u8; 4] = zerocopy::transmute!(v);
        self.inline_hdr_sz = Be16::from_bytes([s0, s1]);
        self.inline_hdr_start = [h0, h1];
    }

    /// DS units the segment occupies with `inline_hdr_sz` header bytes:
    /// `1 + ceil((inline_hdr_sz - 2) / 16)` (the first two bytes live in the base).
    pub const fn ds_for(inline_hdr_sz: usize) -> usize {
        1 + inline_hdr_sz.saturating_sub(2).div_ceil(super::SEND_WQE_DS)
    }
}

/// Inline L2 header rdma-core copies into the Ethernet segment of a raw
/// packet send (`MLX5_ETH_L2_INLINE_HEADER_SIZE`: Ethernet 14 + VLAN 4).
pub const ETH_L2_INLINE_HEADER_SIZE: usize = 18;
/// Smallest inline L2 header: the Ethernet header (`MLX5_ETH_L2_MIN_HEADER_SIZE`).
pub const ETH_L2_MIN_HEADER_SIZE: usize = 14;
/// DPDK's largest TSO header (`MLX5_MAX_TSO_HEADER`).
pub const MAX_TSO_HEADER: usize = 192;

/// Multi-packet send WQE rules (PRM-FACTS §6).
///
/// A session is a control segment (opcode [`super::SendOpcode::EnhancedMpsw`],
/// or [`super::SendOpcode::Tso`] with opmod [`super::OPC_MOD_MPW`] for the
/// legacy MPW), an [`EthSeg`] without inline header that all packets share
/// (checksum flags, software-parser offsets, metadata; for legacy MPW `mss`
/// holds the common packet length), then one descriptor per packet. The
/// session is closed by writing its final DS count into the control segment.
pub mod mpw {
    /// DS of the session title: control + Ethernet segment.
    pub const TITLE_DS: usize = 2;
    /// Largest WQE DPDK builds (`MLX5_WQE_SIZE_MAX`, 60 DS = 960 bytes).
    pub const WQE_SIZE_MAX: usize = 960;
    /// Packets in a legacy MPW session (DPDK `MLX5_MPW_MAX_PACKETS`).
    pub const MPW_MAX_PACKETS: usize = 6;
    /// Packets DPDK puts in one eMPW session (`MLX5_EMPW_MAX_PACKETS`).
    pub const EMPW_MAX_PACKETS: usize = 32;
    /// Largest inline payload of one eMPW (`MLX5_EMPW_MAX_INLINE_LEN`).
    pub const EMPW_MAX_INLINE_LEN: usize = 924;
    /// DPDK's default eMPW inline threshold (`MLX5_EMPW_DEF_INLINE_LEN`).
    pub const EMPW_DEF_INLINE_LEN: usize = 268;
}
