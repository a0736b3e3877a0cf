//! Completion queue entries (PRM-FACTS §9, §10; rdma-core `mlx5dv.h`,
//! kernel `include/linux/mlx5/device.h`, DPDK `mlx5_prm.h`).
//!
//! [`Cqe64`] is the 64-byte CQE with every field; [`ErrCqe`] is the same 64
//! bytes as an error CQE; [`Cqe128`] puts a [`Cqe64`] in the second half of a
//! 128-byte slot. Compressed sessions use [`MiniCqe`]s (eight bytes each,
//! one view per format), packed eight to a slot ([`MiniCqeArray`], basic
//! layout) or seven to a compressed CQE ([`EnhancedCompressedCqe`],
//! enhanced layout).

use super::{
    wire_struct, Be16, Be32, Be64, CqeFormat, CqeOpcode, L3HdrType, L4HdrType, SendOpcode,
    Syndrome, WcStatus,
};
use bitfield_struct::bitfield;

/// `op_own`, the last byte of every CQE: owner, solicited, format, opcode.
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
pub struct OpOwn {
    /// Owner bit, bit 0 (`MLX5_CQE_OWNER_MASK`): equals the pass parity
    /// `(ci >> log2(cqe_cnt)) & 1` when the entry belongs to software.
    #[bits(1)]
    pub owner: bool,
    /// Solicited event, bit 1.
    #[bits(1)]
    pub se: bool,
    /// Format, bits \[3:2\] ([`CqeFormat`]); 3 = compressed.
    #[bits(2)]
    pub format: u8,
    /// CQE opcode, bits \[7:4\] ([`CqeOpcode`]); in an enhanced-layout
    /// compressed CQE, the number of mini-CQEs minus one.
    #[bits(4)]
    pub opcode: u8,
}

/// `flags_rqpn` (bytes 24–27): source QPN, SL, GRH/L3 location.
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
pub struct FlagsRqpn {
    /// Source QP number (UD), bits \[23:0\].
    #[bits(24)]
    pub rqpn: u32,
    /// Service level, bits \[27:24\] (RoCE: packet type in \[26:24\]).
    #[bits(4)]
    pub sl: u8,
    /// GRH location, bits \[29:28\]: 1 = in the data buffer, 2 = in the CQE;
    /// non-zero means a GRH was present (`IBV_WC_GRH`).
    #[bits(2)]
    pub grh: u8,
    #[bits(2)]
    __: u8,
}

/// `hds_ip_ext` (byte 28): header-validity bits.
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
pub struct HdsIpExt {
    /// L2 checksum/header OK, bit 0 (`MLX5_CQE_L2_OK`).
    #[bits(1)]
    pub l2_ok: bool,
    /// L3 checksum OK, bit 1 (`MLX5_CQE_L3_OK`).
    #[bits(1)]
    pub l3_ok: bool,
    /// L4 checksum OK, bit 2 (`MLX5_CQE_L4_OK`).
    #[bits(1)]
    pub l4_ok: bool,
    #[bits(5)]
    __: u8,
}

/// `l4_l3_hdr_type` (byte 29; rdma-core `l4_hdr_type_etc`).
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
pub struct L4L3HdrType {
    /// A C-VLAN tag was stripped into `vlan_info`, bit 0 (`MLX5_CQE_VLAN_STRIPPED`).
    #[bits(1)]
    pub cvlan_stripped: bool,
    #[bits(1)]
    __: u8,
    /// L3 header type, bits \[3:2\] ([`L3HdrType`]).
    #[bits(2)]
    pub l3_hdr_type: u8,
    /// L4 header type, bits \[6:4\] ([`L4HdrType`]).
    #[bits(3)]
    pub l4_hdr_type: u8,
    /// IP fragment, bit 7 (DPDK packet-type table).
    #[bits(1)]
    pub ip_frag: bool,
}

/// `srqn_uidx` (bytes 32–35): SRQ number or user index, LRO segment count.
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
pub struct SrqnUidx {
    /// SRQ number, or the QP's user index with CQE version 1, bits \[23:0\].
    #[bits(24)]
    pub srqn_uidx: u32,
    /// LRO: number of coalesced segments, bits \[31:24\] (kernel).
    #[bits(8)]
    pub lro_num_seg: u8,
}

/// `sop_drop_qpn` (bytes 56–59): QPN and the send opcode of a requester CQE.
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
pub struct SopDropQpn {
    /// QP/SQ number, bits \[23:0\]; on an Ethernet RQ the flow tag (mark).
    #[bits(24)]
    pub qpn: u32,
    /// Requester: opcode of the completed send WQE, bits \[31:24\].
    #[bits(8)]
    pub sop: u8,
}

/// Mask of the flow tag in `sop_drop_qpn` (rdma-core `MLX5_FLOW_TAG_MASK`).
pub const FLOW_TAG_MASK: u32 = 0x00ff_ffff;

/// [`Cqe64::rss_hash_type`]: which fields an RSS QP's hash covered (Linux
/// `include/linux/mlx5/device.h`, `CQE_RSS_HTYPE_IP` and `CQE_RSS_HTYPE_L4`
/// with their field values).
pub mod rss_hash {
    /// Bits 3:2, the L3 header hashed (`CQE_RSS_HTYPE_IP`; 00 none).
    pub const IP_MASK: u8 = 0x3 << 2;
    /// IPv4 addresses hashed (`CQE_RSS_IPV4` in bits 3:2).
    pub const IPV4: u8 = 0x1 << 2;
    /// IPv6 addresses hashed (`CQE_RSS_IPV6` in bits 3:2).
    pub const IPV6: u8 = 0x2 << 2;
    /// Bits 7:6, the L4 header hashed (`CQE_RSS_HTYPE_L4`; 00 none).
    pub const L4_MASK: u8 = 0x3 << 6;
    /// TCP ports hashed (`CQE_RSS_L4_TCP` in bits 7:6).
    pub const TCP: u8 = 0x1 << 6;
    /// UDP ports hashed (`CQE_RSS_L4_UDP` in bits 7:6).
    pub const UDP: u8 = 0x2 << 6;
    /// The IPsec SPI hashed (`CQE_RSS_L4_IPSEC` in bits 7:6).
    pub const IPSEC_SPI: u8 = 0x3 << 6;
}

/// `byte_cnt` of a striding-RQ CQE (DPDK `MLX5_MPRQ_*`).
#[bitfield(u32)]
#[derive(PartialEq, Eq)]
pub struct MprqByteCnt {
    /// Bytes of the packet, bits \[15:0\].
    #[bits(16)]
    pub byte_cnt: u16,
    /// Strides the packet consumed, bits \[29:16\].
    #[bits(14)]
    pub strides: u16,
    #[bits(1)]
    __: u8,
    /// Filler CQE (no packet; the strides are skipped), bit 31.
    #[bits(1)]
    pub filler: bool,
}

wire_struct! {
    /// 64-byte CQE `mlx5_cqe64`, every field (kernel and DPDK names where
    /// rdma-core says "reserved").
    pub struct Cqe64(64) {
        /// Tunnel/packet info bits for the packet type (DPDK `pkt_info`).
        pub pkt_info: u8,
        /// Reserved.
        pub rsvd1: u8,
        /// Ethernet WQE id (striding RQ: WQE index).
        pub wqe_id: Be16,
        /// LRO: TCP PSH/abort/dup-ACK flags.
        pub lro_tcppsh_abort_dupack: u8,
        /// LRO: minimum TTL.
        pub lro_min_ttl: u8,
        /// LRO: TCP window.
        pub lro_tcp_win: Be16,
        /// LRO: ACK sequence number.
        pub lro_ack_seq_num: Be32,
        /// RSS (Toeplitz) hash result.
        pub rss_hash_result: Be32,
        /// RSS hash type.
        pub rss_hash_type: u8,
        /// InfiniBand: DLID path bits in \[6:0\].
        pub ml_path: u8,
        /// Reserved.
        pub rsvd18: [u8; 2],
        /// Ethernet: L4 checksum; IB striding RQ: stride index.
        pub check_sum: Be16,
        /// Source LID (0 on RoCE).
        pub slid: Be16,
        /// Source QPN, SL, GRH location.
        pub flags_rqpn: FlagsRqpn,
        /// Header-validity bits.
        pub hds_ip_ext: HdsIpExt,
        /// L3/L4 header types and VLAN-stripped bit.
        pub l4_l3_hdr_type: L4L3HdrType,
        /// Stripped VLAN TCI.
        pub vlan_info: Be16,
        /// SRQ number or user index.
        pub srqn_uidx: SrqnUidx,
        /// Immediate data, invalidated rkey, P_Key index, or flow-table metadata.
        pub imm_inval_pkey: Be32,
        /// Tag matching: application id.
        pub app: u8,
        /// Tag matching: operation.
        pub app_op: u8,
        /// Tag matching: tag index.
        pub app_info: Be16,
        /// Bytes transferred; compressed title (basic layout): number of
        /// mini-CQEs; striding RQ: see [`MprqByteCnt`].
        pub byte_cnt: Be32,
        /// Completion timestamp (free-running ticks or real-time sec:ns).
        pub timestamp: Be64,
        /// QPN (or flow tag) and the requester's send opcode.
        pub sop_drop_qpn: SopDropQpn,
        /// Requester: first WQEBB index of the last completed WQE;
        /// responder: RQ WQE index; striding RQ: stride index.
        pub wqe_counter: Be16,
        /// Signature, or the enhanced-compression validity iteration count.
        pub signature: u8,
        /// Opcode, format, solicited and owner bits.
        pub op_own: OpOwn,
    }
}

impl Cqe64 {
    /// The CQE opcode (`op_own[7:4]`).
    pub fn opcode(&self) -> CqeOpcode {
        CqeOpcode::from_raw(self.op_own.opcode())
    }

    /// The CQE format (`op_own[3:2]`).
    pub fn format(&self) -> CqeFormat {
        CqeFormat::from_raw(self.op_own.format())
    }

    /// Whether this is a requester or responder error CQE.
    pub fn is_error(&self) -> bool {
        matches!(self.opcode(), CqeOpcode::ReqErr | CqeOpcode::RespErr)
    }

    /// The L3 header type of a received packet.
    pub fn l3_hdr_type(&self) -> L3HdrType {
        L3HdrType::from_raw(self.l4_l3_hdr_type.l3_hdr_type())
    }

    /// The L4 header type of a received packet.
    pub fn l4_hdr_type(&self) -> L4HdrType {
        L4HdrType::from_raw(self.l4_l3_hdr_type.l4_hdr_type())
    }

    /// The send opcode of a requester CQE (`sop_drop_qpn[31:24]`).
    pub fn send_opcode(&self) -> SendOpcode {
        SendOpcode::from_raw(self.sop_drop_qpn.sop())
    }

    /// `byte_cnt` (bytes 44–47) read as a striding-RQ byte count.
    pub fn mprq_byte_cnt(&self) -> MprqByteCnt {
        MprqByteCnt::from_bits(self.byte_cnt.get())
    }

    /// Writes `byte_cnt` (bytes 44–47) as a striding-RQ byte count.
    pub fn set_mprq_byte_cnt(&mut self, v: MprqByteCnt) {
        self.byte_cnt.set(v.into_bits());
    }

    /// The same 64 bytes viewed as an error CQE.
    pub fn as_err(&self) -> &ErrCqe {
        zerocopy::transmute_ref!(self)
    }
}

/// `s_wqe_opcode_qpn` of an error CQE.
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
pub struct SWqeOpcodeQpn {
    /// QP number, bits \[23:0\].
    #[bits(24)]
    pub qpn: u32,
    /// Opcode of the failed send WQE, bits \[31:24\].
    #[bits(8)]
    pub s_wqe_opcode: u8,
}

wire_struct! {
    /// Error CQE `mlx5_err_cqe` (opcodes `REQ_ERR`/`RESP_ERR`), with DPDK's
    /// names for the fields rdma-core leaves reserved.
    pub struct ErrCqe(64) {
        /// Reserved.
        pub rsvd0: [u8; 2],
        /// Ethernet WQE id.
        pub eth_wqe_id: Be16,
        /// Reserved.
        pub rsvd4: [u8; 16],
        /// IB striding RQ stride index.
        pub ib_stride_index: Be16,
        /// Reserved.
        pub rsvd22: [u8; 10],
        /// SRQ number (or user index).
        pub srqn: Be32,
        /// Reserved.
        pub rsvd36: [u8; 8],
        /// Byte count.
        pub byte_cnt: Be32,
        /// Reserved.
        pub rsvd48: [u8; 4],
        /// Hardware error syndrome (`MLX5_ERROR_CQE_SYNDROME_OFFSET` 52).
        pub hw_err_synd: u8,
        /// Hardware syndrome type.
        pub hw_synd_type: u8,
        /// Vendor error syndrome.
        pub vendor_err_synd: u8,
        /// Error syndrome ([`Syndrome`]).
        pub syndrome: u8,
        /// Opcode of the failed WQE and the QPN.
        pub s_wqe_opcode_qpn: SWqeOpcodeQpn,
        /// WQE counter of the failed WQE.
        pub wqe_counter: Be16,
        /// Signature.
        pub signature: u8,
        /// Opcode, format, solicited and owner bits.
        pub op_own: OpOwn,
    }
}

impl ErrCqe {
    /// The decoded syndrome.
    pub fn syndrome(&self) -> Syndrome {
        Syndrome::from_raw(self.syndrome)
    }

    /// The `ibv_wc_status` libmlx5 reports for this CQE.
    pub fn wc_status(&self) -> WcStatus {
        self.syndrome().wc_status()
    }

    /// The send opcode of the failed WQE.
    pub fn s_wqe_opcode(&self) -> SendOpcode {
        SendOpcode::from_raw(self.s_wqe_opcode_qpn.s_wqe_opcode())
    }
}

wire_struct! {
    /// A 128-byte CQE slot: inline-scattered data (up to 64 bytes) or
    /// padding, then the 64-byte CQE in the second half.
    pub struct Cqe128(128) {
        /// Inline scatter data or padding.
        pub inline_data: [u8; 64],
        /// The CQE proper.
        pub cqe: Cqe64,
    }
}

wire_struct! {
    /// One mini-CQE of a compressed session, raw; view it through the
    /// format the CQ was created with ([`MiniCqe::hash`] and friends).
    pub struct MiniCqe(8) {
        /// The eight bytes.
        pub bytes: [u8; 8],
    }
}

wire_struct! {
    /// Mini-CQE, HASH format (PRM value 0).
    pub struct MiniCqeHash(8) {
        /// RSS hash result.
        pub rx_hash_result: Be32,
        /// Byte count.
        pub byte_cnt: Be32,
    }
}

wire_struct! {
    /// Mini-CQE, CSUM format (PRM value 1).
    pub struct MiniCqeCsum(8) {
        /// L4 checksum.
        pub checksum: Be16,
        /// Reserved.
        pub rsvd: [u8; 2],
        /// Byte count.
        pub byte_cnt: Be32,
    }
}

/// Bytes 4–7 of an FTAG_STRIDX mini-CQE: flow tag high byte and 24-bit byte count.
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
pub struct FtagByteCnt {
    /// Byte count, bits \[23:0\] (DPDK masks with `MLX5_LEN_WITH_MARK_MASK`).
    #[bits(24)]
    pub byte_cnt: u32,
    /// Flow tag bits \[23:16\], bits \[31:24\].
    #[bits(8)]
    pub flow_tag_high: u8,
}

wire_struct! {
    /// Mini-CQE, FTAG_STRIDX format (PRM value 2).
    pub struct MiniCqeFtagStridx(8) {
        /// Flow tag bits \[15:0\].
        pub flow_tag_low: Be16,
        /// Stride index.
        pub stride_idx: Be16,
        /// Flow tag bits \[23:16\] and the byte count.
        pub ftag_byte_cnt: FtagByteCnt,
    }
}

impl MiniCqeFtagStridx {
    /// The 24-bit flow tag (mark).
    pub fn flow_tag(&self) -> u32 {
        (u32::from(self.ftag_byte_cnt.flow_tag_high()) << 16) | u32::from(self.flow_tag_low.get())
    }
}

wire_struct! {
    /// Mini-CQE, CSUM_STRIDX format (PRM value 3).
    pub struct MiniCqeCsumStridx(8) {
        /// L4 checksum.
        pub checksum: Be16,
        /// Stride index.
        pub stride_idx: Be16,
        /// Byte count.
        pub byte_cnt: Be32,
    }
}

wire_struct! {
    /// Mini-CQE, L34H_STRIDX format (PRM value 4: `res_format` 0 with the
    /// `ext` bit). Byte 0 carries CQE byte 29 (`l4_l3_hdr_type`), byte 1 is
    /// reserved (DPDK `struct mlx5_mini_cqe8` @38f72e50: `hdr_type`, `reserved`;
    /// since DPDK 5654f38eba, 2026-03-20: DPDK releases before it, 22.11
    /// included, read byte 1, see `tests/oracle/dpdk/RX.md`).
    pub struct MiniCqeL34hStridx(8) {
        /// L3/L4 header types and VLAN-stripped bit, as CQE byte 29.
        pub hdr_type: L4L3HdrType,
        /// Reserved.
        pub rsvd: u8,
        /// Stride index.
        pub stride_idx: Be16,
        /// Byte count.
        pub byte_cnt: Be32,
    }
}

wire_struct! {
    /// Requester (send-queue) mini-CQE. Kernel and UCX put the opcode in byte
    /// 2; DPDK's struct says byte 3 but its driver never reads it. This
    /// follows the kernel and UCX (PRM-FACTS §10.3).
    pub struct MiniCqeReq(8) {
        /// WQE counter of the completed WQE.
        pub wqe_counter: Be16,
        /// Send opcode of the completed WQE.
        pub s_wqe_opcode: u8,
        /// Reserved.
        pub rsvd: u8,
        /// Byte count.
        pub byte_cnt: Be32,
    }
}

impl MiniCqe {
    /// View as a HASH mini-CQE.
    pub fn hash(&self) -> &MiniCqeHash {
        zerocopy::transmute_ref!(self)
    }
    /// View as a CSUM mini-CQE.
    pub fn csum(&self) -> &MiniCqeCsum {
        zerocopy::transmute_ref!(self)
    }
    /// View as an FTAG_STRIDX mini-CQE.
    pub fn ftag_stridx(&self) -> &MiniCqeFtagStridx {
        zerocopy::transmute_ref!(self)
    }
    /// View as a CSUM_STRIDX mini-CQE.
    pub fn csum_stridx(&self) -> &MiniCqeCsumStridx {
        zerocopy::transmute_ref!(self)
    }
    /// View as an L34H_STRIDX mini-CQE.
    pub fn l34h_stridx(&self) -> &MiniCqeL34hStridx {
        zerocopy::transmute_ref!(self)
    }
    /// View as a requester mini-CQE.
    pub fn req(&self) -> &MiniCqeReq {
        zerocopy::transmute_ref!(self)
    }
}

/// Mini-CQEs in one 64-byte slot of the basic layout (`MLX5_MINI_CQE_ARRAY_SIZE`).
pub const MINI_CQE_ARRAY_SIZE: usize = 8;
/// Mini-CQEs in one enhanced-layout compressed CQE.
pub const ENHANCED_MAX_MINIS: usize = 7;
/// `num_and_type` (byte 63) of a full enhanced-layout compressed CQE: N − 1
/// = 6 in bits 7–4, format 3 (compressed) in bits 3–2 (PRM-FACTS §10.5).
pub(crate) const ENHANCED_FULL_BLOCK: u8 = ((ENHANCED_MAX_MINIS as u8 - 1) << 4) | (3 << 2);
/// The bits of an enhanced compressed CQE's `num_and_type` the layout
/// defines (bits 1–0 are not used).
pub(crate) const ENHANCED_NUM_AND_TYPE_MASK: u8 = 0xfc;
/// Initial value of the validity iteration count byte (`MLX5_CQE_VIC_INIT`).
pub const CQE_VIC_INIT: u8 = 0xff;
/// `op_own` software writes into fresh CQEs: opcode INVALID, owner 1, so the
/// first pass (owner 0) never sees them as valid.
pub const CQE_OP_OWN_INIT: u8 = 0xf1;
/// `op_own` DPDK writes into consumed slots of a basic-layout session (`MLX5_CQE_INVALIDATE`).
pub const CQE_INVALIDATE: u8 = 0xf0;
/// `app` of a tag-matching completion (`MLX5_CQE_APP_TAG_MATCHING`).
pub const CQE_APP_TAG_MATCHING: u8 = 1;
/// `app_op` of a tag-matching completion: the first of a rendezvous
/// (`MLX5_CQE_APP_OP_TM_CONSUMED`).
pub const CQE_APP_OP_TM_CONSUMED: u8 = 0x1;
/// `app_op`: the second, data in place (`MLX5_CQE_APP_OP_TM_EXPECTED`).
pub const CQE_APP_OP_TM_EXPECTED: u8 = 0x2;
/// `app_op`: consumed, software rendezvous (`MLX5_CQE_APP_OP_TM_CONSUMED_SW_RDNV`).
pub const CQE_APP_OP_TM_CONSUMED_SW_RDNV: u8 = 0x9;
/// `app_op`: a whole message (`MLX5_CQE_APP_OP_TM_CONSUMED_MSG`).
pub const CQE_APP_OP_TM_CONSUMED_MSG: u8 = 0xa;
/// `app_op`: a whole message, software rendezvous
/// (`MLX5_CQE_APP_OP_TM_CONSUMED_MSG_SW_RDNV`).
pub const CQE_APP_OP_TM_CONSUMED_MSG_SW_RDNV: u8 = 0xb;
/// `app_op`: a message completion cancelled
/// (`MLX5_CQE_APP_OP_TM_MSG_COMPLETION_CANCELED`).
pub const CQE_APP_OP_TM_MSG_COMPLETION_CANCELED: u8 = 0xc;

wire_struct! {
    /// A 64-byte slot of mini-CQEs in the basic ("legacy") layout.
    pub struct MiniCqeArray(64) {
        /// The eight mini-CQEs.
        pub minis: [MiniCqe; MINI_CQE_ARRAY_SIZE],
    }
}

wire_struct! {
    /// A compressed CQE of the enhanced layout: up to seven mini-CQEs from
    /// byte 0, the validity iteration count, and `op_own` whose opcode
    /// nibble is the mini count minus one (format 3).
    pub struct EnhancedCompressedCqe(64) {
        /// The mini-CQEs; `num_minis()` of them are valid.
        pub minis: [MiniCqe; ENHANCED_MAX_MINIS],
        /// Bytes 56–61: unused.
        pub rsvd: [u8; 6],
        /// Validity iteration count.
        pub validity_iteration_count: u8,
        /// Number of minis minus one, and the format.
        pub op_own: OpOwn,
    }
}

impl EnhancedCompressedCqe {
    /// Number of valid mini-CQEs (1 to 16 as encoded; at most 7 can be present).
    pub fn num_minis(&self) -> usize {
        usize::from(self.op_own.opcode()) + 1
    }
}
