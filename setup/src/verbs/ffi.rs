//! The mlx5dv (libmlx5) declarations rdma-sys lacks: exactly the structs,
//! constants and functions this backend uses, written by hand from the
//! installed `/usr/include/infiniband/mlx5dv.h` (rdma-core 44, Debian 12).
//!
//! Every struct here is `#[repr(C)]` with the header's member names and
//! order; `super::tests::layout_matches_mlx5dv_h` compiles a C probe with
//! gcc against the header and compares `sizeof`/`offsetof` of each struct
//! and member with this file, so a header that moves a field fails the test
//! instead of corrupting memory. Structs we only pass by pointer
//! (`mlx5dv_dm`, `mlx5dv_ah`, `mlx5dv_pd`) are opaque.
//!
//! Linked against libmlx5 (`#[link(name = "mlx5")]`); libibverbs comes
//! through rdma-sys.

use core::ffi::{c_int, c_void};
use rdma_sys::{ibv_context, ibv_cq, ibv_cq_ex, ibv_cq_init_attr_ex, ibv_qp, ibv_qp_init_attr_ex};
use rdma_sys::{ibv_srq, ibv_wq, ibv_wq_init_attr};

// ---------------------------------------------------------------------------
// mlx5dv_query_device: `struct mlx5dv_context` and its caps.

/// `enum mlx5dv_context_comp_mask` (request and answer bits of
/// [`mlx5dv_context::comp_mask`]).
pub mod context_mask {
    /// `MLX5DV_CONTEXT_MASK_CQE_COMPRESION` (sic).
    pub const CQE_COMPRESION: u64 = 1 << 0;
    /// `MLX5DV_CONTEXT_MASK_SWP`.
    pub const SWP: u64 = 1 << 1;
    /// `MLX5DV_CONTEXT_MASK_STRIDING_RQ`.
    pub const STRIDING_RQ: u64 = 1 << 2;
    /// `MLX5DV_CONTEXT_MASK_TUNNEL_OFFLOADS`.
    pub const TUNNEL_OFFLOADS: u64 = 1 << 3;
    /// `MLX5DV_CONTEXT_MASK_DYN_BFREGS`.
    pub const DYN_BFREGS: u64 = 1 << 4;
    /// `MLX5DV_CONTEXT_MASK_CLOCK_INFO_UPDATE`.
    pub const CLOCK_INFO_UPDATE: u64 = 1 << 5;
    /// `MLX5DV_CONTEXT_MASK_HCA_CORE_CLOCK`.
    pub const HCA_CORE_CLOCK: u64 = 1 << 8;
    /// `MLX5DV_CONTEXT_MASK_NUM_LAG_PORTS`.
    pub const NUM_LAG_PORTS: u64 = 1 << 9;
}

/// `enum mlx5dv_context_flags` (bits of [`mlx5dv_context::flags`]).
pub mod context_flags {
    /// `MLX5DV_CONTEXT_FLAGS_CQE_V1`.
    pub const CQE_V1: u64 = 1 << 0;
    /// `MLX5DV_CONTEXT_FLAGS_MPW_ALLOWED`.
    pub const MPW_ALLOWED: u64 = 1 << 2;
    /// `MLX5DV_CONTEXT_FLAGS_ENHANCED_MPW`.
    pub const ENHANCED_MPW: u64 = 1 << 3;
    /// `MLX5DV_CONTEXT_FLAGS_CQE_128B_COMP`.
    pub const CQE_128B_COMP: u64 = 1 << 4;
    /// `MLX5DV_CONTEXT_FLAGS_CQE_128B_PAD`.
    pub const CQE_128B_PAD: u64 = 1 << 5;
    /// `MLX5DV_CONTEXT_FLAGS_PACKET_BASED_CREDIT_MODE`.
    pub const PACKET_BASED_CREDIT_MODE: u64 = 1 << 6;
    /// `MLX5DV_CONTEXT_FLAGS_REAL_TIME_TS`.
    pub const REAL_TIME_TS: u64 = 1 << 7;
}

/// `struct mlx5dv_cqe_comp_caps`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct mlx5dv_cqe_comp_caps {
    /// Largest number of CQEs one compressed session covers.
    pub max_num: u32,
    /// `MLX5DV_CQE_RES_FORMAT_*` bitmask.
    pub supported_format: u32,
}

/// `struct mlx5dv_sw_parsing_caps`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct mlx5dv_sw_parsing_caps {
    /// `MLX5DV_SW_PARSING*` bitmask.
    pub sw_parsing_offloads: u32,
    /// QP types (bit per `IBV_QPT_*`).
    pub supported_qpts: u32,
}

/// `struct mlx5dv_striding_rq_caps`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct mlx5dv_striding_rq_caps {
    /// Smallest log2 stride size in bytes.
    pub min_single_stride_log_num_of_bytes: u32,
    /// Largest log2 stride size in bytes.
    pub max_single_stride_log_num_of_bytes: u32,
    /// Smallest log2 strides per WQE.
    pub min_single_wqe_log_num_of_strides: u32,
    /// Largest log2 strides per WQE.
    pub max_single_wqe_log_num_of_strides: u32,
    /// QP types (bit per `IBV_QPT_*`).
    pub supported_qpts: u32,
}

/// `struct mlx5dv_sig_caps` (only here for the size of `mlx5dv_context`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct mlx5dv_sig_caps {
    /// `enum mlx5dv_block_size_caps`.
    pub block_size: u64,
    /// `enum mlx5dv_sig_prot_caps`.
    pub block_prot: u32,
    /// `enum mlx5dv_sig_t10dif_bg_caps`.
    pub t10dif_bg: u16,
    /// `enum mlx5dv_sig_crc_type_caps`.
    pub crc_type: u16,
}

/// `struct mlx5dv_dci_streams_caps` (only here for the size of
/// `mlx5dv_context`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct mlx5dv_dci_streams_caps {
    /// log2 of concurrent streams (sic, header spelling).
    pub max_log_num_concurent: u8,
    /// log2 of errored streams.
    pub max_log_num_errored: u8,
}

/// `struct mlx5dv_crypto_caps` (only here for the size of `mlx5dv_context`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct mlx5dv_crypto_caps {
    /// Non-zero: some crypto self tests failed.
    pub failed_selftests: u16,
    /// `enum mlx5dv_crypto_engines_caps`.
    pub crypto_engines: u8,
    /// `enum mlx5dv_crypto_wrapped_import_method_caps`.
    pub wrapped_import_method: u8,
    /// log2 of data encryption keys.
    pub log_max_num_deks: u8,
    /// `enum mlx5dv_crypto_caps_flags`.
    pub flags: u32,
}

/// `struct mlx5dv_context`: what `mlx5dv_query_device` fills in.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct mlx5dv_context {
    /// CQE version.
    pub version: u8,
    /// [`context_flags`] bits.
    pub flags: u64,
    /// In: the [`context_mask`] bits asked for; out: those filled in.
    pub comp_mask: u64,
    /// CQE compression.
    pub cqe_comp_caps: mlx5dv_cqe_comp_caps,
    /// Software parsing.
    pub sw_parsing_caps: mlx5dv_sw_parsing_caps,
    /// Striding RQ.
    pub striding_rq_caps: mlx5dv_striding_rq_caps,
    /// `MLX5DV_RAW_PACKET_CAP_TUNNELED_OFFLOAD_*` bits.
    pub tunnel_offloads_caps: u32,
    /// Dynamic BlueFlame registers.
    pub max_dynamic_bfregs: u32,
    /// How long `mlx5dv_clock_info` stays valid, in ns.
    pub max_clock_info_update_nsec: u64,
    /// `enum mlx5dv_flow_action_cap_flags`.
    pub flow_action_flags: u32,
    /// `enum ibv_odp_transport_cap_bits` for DC.
    pub dc_odp_caps: u32,
    /// The mapped HCA core clock register (big-endian 64-bit), or null.
    pub hca_core_clock: *mut c_void,
    /// LAG ports.
    pub num_lag_ports: u8,
    /// Signature offload.
    pub sig_caps: mlx5dv_sig_caps,
    /// DCI streams.
    pub dci_streams_caps: mlx5dv_dci_streams_caps,
    /// Largest memcpy work request.
    pub max_wr_memcpy_length: usize,
    /// Crypto offload.
    pub crypto_caps: mlx5dv_crypto_caps,
}

// ---------------------------------------------------------------------------
// mlx5dv_create_cq.

/// `enum mlx5dv_cq_init_attr_mask`.
pub mod cq_init_attr_mask {
    /// `MLX5DV_CQ_INIT_ATTR_MASK_COMPRESSED_CQE`.
    pub const COMPRESSED_CQE: u64 = 1 << 0;
    /// `MLX5DV_CQ_INIT_ATTR_MASK_FLAGS`.
    pub const FLAGS: u64 = 1 << 1;
    /// `MLX5DV_CQ_INIT_ATTR_MASK_CQE_SIZE`.
    pub const CQE_SIZE: u64 = 1 << 2;
}

/// `MLX5DV_CQ_INIT_ATTR_FLAGS_CQE_PAD`.
pub const MLX5DV_CQ_INIT_ATTR_FLAGS_CQE_PAD: u32 = 1 << 0;

/// `enum mlx5dv_cqe_comp_res_format` (bitmask).
pub mod cqe_res_format {
    /// `MLX5DV_CQE_RES_FORMAT_HASH`.
    pub const HASH: u8 = 1 << 0;
    /// `MLX5DV_CQE_RES_FORMAT_CSUM`.
    pub const CSUM: u8 = 1 << 1;
    /// `MLX5DV_CQE_RES_FORMAT_CSUM_STRIDX`.
    pub const CSUM_STRIDX: u8 = 1 << 2;
}

/// `struct mlx5dv_cq_init_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct mlx5dv_cq_init_attr {
    /// [`cq_init_attr_mask`] bits.
    pub comp_mask: u64,
    /// One [`cqe_res_format`] bit.
    pub cqe_comp_res_format: u8,
    /// `MLX5DV_CQ_INIT_ATTR_FLAGS_*`.
    pub flags: u32,
    /// 64 or 128, with `CQE_SIZE` in `comp_mask`.
    pub cqe_size: u16,
}

// ---------------------------------------------------------------------------
// mlx5dv_create_qp (only to pass no mlx5-specific attributes today) and
// mlx5dv_create_wq (striding RQ).

/// `struct mlx5dv_dci_streams`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct mlx5dv_dci_streams {
    /// log2 of concurrent streams (sic).
    pub log_num_concurent: u8,
    /// log2 of errored streams.
    pub log_num_errored: u8,
}

/// The anonymous union of `struct mlx5dv_dc_init_attr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union mlx5dv_dc_init_attr_u {
    /// DCT access key.
    pub dct_access_key: u64,
    /// DCI streams.
    pub dci_streams: mlx5dv_dci_streams,
}

/// `struct mlx5dv_dc_init_attr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct mlx5dv_dc_init_attr {
    /// `enum mlx5dv_dc_type`.
    pub dc_type: c_int,
    /// DCT key or DCI streams.
    pub u: mlx5dv_dc_init_attr_u,
}

/// `struct mlx5dv_qp_init_attr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct mlx5dv_qp_init_attr {
    /// `MLX5DV_QP_INIT_ATTR_MASK_*`.
    pub comp_mask: u64,
    /// `MLX5DV_QP_CREATE_*`.
    pub create_flags: u32,
    /// DC attributes.
    pub dc_init_attr: mlx5dv_dc_init_attr,
    /// `MLX5DV_QP_EX_WITH_*`.
    pub send_ops_flags: u64,
}

/// `MLX5DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS`.
pub const MLX5DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS: u64 = 1 << 0;
/// `MLX5DV_QP_CREATE_TUNNEL_OFFLOADS`.
pub const MLX5DV_QP_CREATE_TUNNEL_OFFLOADS: u32 = 1 << 0;

/// `struct mlx5dv_striding_rq_init_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct mlx5dv_striding_rq_init_attr {
    /// log2 of the stride size in bytes.
    pub single_stride_log_num_of_bytes: u32,
    /// log2 of strides per WQE.
    pub single_wqe_log_num_of_strides: u32,
    /// Shift packets by two bytes (IP alignment).
    pub two_byte_shift_en: u8,
}

/// `struct mlx5dv_wq_init_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct mlx5dv_wq_init_attr {
    /// `MLX5DV_WQ_INIT_ATTR_MASK_*`.
    pub comp_mask: u64,
    /// Striding RQ attributes.
    pub striding_rq_attrs: mlx5dv_striding_rq_init_attr,
}

/// `MLX5DV_WQ_INIT_ATTR_MASK_STRIDING_RQ`.
pub const MLX5DV_WQ_INIT_ATTR_MASK_STRIDING_RQ: u64 = 1 << 0;

// ---------------------------------------------------------------------------
// mlx5dv_init_obj.

/// `enum mlx5dv_obj_type`.
pub mod obj_type {
    /// `MLX5DV_OBJ_QP`.
    pub const QP: u64 = 1 << 0;
    /// `MLX5DV_OBJ_CQ`.
    pub const CQ: u64 = 1 << 1;
    /// `MLX5DV_OBJ_SRQ`.
    pub const SRQ: u64 = 1 << 2;
    /// `MLX5DV_OBJ_RWQ`.
    pub const RWQ: u64 = 1 << 3;
    /// `MLX5DV_OBJ_AH`.
    pub const AH: u64 = 1 << 5;
}

/// `mlx5dv_qp.sq` / `mlx5dv_qp.rq`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct mlx5dv_qp_wq {
    /// Ring buffer.
    pub buf: *mut c_void,
    /// Number of WQEs (SQ: WQEBBs).
    pub wqe_cnt: u32,
    /// Bytes per WQE (SQ: 64).
    pub stride: u32,
}

/// `mlx5dv_qp.bf`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct mlx5dv_qp_bf {
    /// Doorbell/BlueFlame register (UAR + 0x800 + k * bf_reg_size).
    pub reg: *mut c_void,
    /// Size of one BlueFlame half; 0 = doorbell only.
    pub size: u32,
}

/// `struct mlx5dv_qp`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct mlx5dv_qp {
    /// Doorbell record: `[MLX5_RCV_DBR]`, `[MLX5_SND_DBR]`, big-endian.
    pub dbrec: *mut u32,
    /// Send queue.
    pub sq: mlx5dv_qp_wq,
    /// Receive queue.
    pub rq: mlx5dv_qp_wq,
    /// BlueFlame register.
    pub bf: mlx5dv_qp_bf,
    /// `MLX5DV_QP_MASK_*` asked for / filled.
    pub comp_mask: u64,
    /// mmap offset of the UAR (with `MLX5DV_QP_MASK_UAR_MMAP_OFFSET`).
    pub uar_mmap_offset: libc::off_t,
    /// TIR number (raw packet, with `MLX5DV_QP_MASK_RAW_QP_HANDLES`).
    pub tirn: u32,
    /// TIS number.
    pub tisn: u32,
    /// RQ number.
    pub rqn: u32,
    /// SQ number.
    pub sqn: u32,
    /// TIR ICM address.
    pub tir_icm_addr: u64,
}

/// `struct mlx5dv_cq`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct mlx5dv_cq {
    /// CQE ring.
    pub buf: *mut c_void,
    /// Doorbell record: consumer index, arm word (big-endian).
    pub dbrec: *mut u32,
    /// Number of CQEs.
    pub cqe_cnt: u32,
    /// 64 or 128.
    pub cqe_size: u32,
    /// UAR page base (CQ doorbell at 0x20).
    pub cq_uar: *mut c_void,
    /// CQ number.
    pub cqn: u32,
    /// `MLX5DV_CQ_MASK_*`.
    pub comp_mask: u64,
}

/// `struct mlx5dv_srq`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct mlx5dv_srq {
    /// WQE ring (a linked list through `next_wqe_index`).
    pub buf: *mut c_void,
    /// Doorbell record (one big-endian word).
    pub dbrec: *mut u32,
    /// Bytes per WQE.
    pub stride: u32,
    /// First free WQE.
    pub head: u32,
    /// Last free WQE.
    pub tail: u32,
    /// `MLX5DV_SRQ_MASK_*` (`SRQN` = 1 << 0).
    pub comp_mask: u64,
    /// SRQ number (with `MLX5DV_SRQ_MASK_SRQN`).
    pub srqn: u32,
}

/// `MLX5DV_SRQ_MASK_SRQN`.
pub const MLX5DV_SRQ_MASK_SRQN: u64 = 1 << 0;

/// `struct mlx5dv_rwq`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct mlx5dv_rwq {
    /// WQE ring.
    pub buf: *mut c_void,
    /// Doorbell record (one big-endian word).
    pub dbrec: *mut u32,
    /// Number of WQEs.
    pub wqe_cnt: u32,
    /// Bytes per WQE.
    pub stride: u32,
    /// Reserved for extensions.
    pub comp_mask: u64,
}

/// One `{ in, out }` pair of `struct mlx5dv_obj`.
#[repr(C)]
pub struct mlx5dv_obj_pair<I, O> {
    /// The verbs object.
    pub in_: *mut I,
    /// Where to write its mlx5 view.
    pub out: *mut O,
}

impl<I, O> Clone for mlx5dv_obj_pair<I, O> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<I, O> Copy for mlx5dv_obj_pair<I, O> {}

impl<I, O> core::fmt::Debug for mlx5dv_obj_pair<I, O> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("mlx5dv_obj_pair")
            .field("in", &self.in_)
            .field("out", &self.out)
            .finish()
    }
}

/// Opaque: `struct ibv_dm`, `struct mlx5dv_dm`, `struct ibv_pd`,
/// `struct mlx5dv_pd` as far as this backend is concerned (never asked
/// for).
#[repr(C)]
#[derive(Debug)]
pub struct Opaque {
    _private: [u8; 0],
}

/// `struct mlx5dv_ah`: where libmlx5 keeps the address vector of an
/// address handle (`mlx5dv_get_av` in `mlx5.c` points `av` at
/// `struct mlx5_ah`'s own `av`, valid until `ibv_destroy_ah`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct mlx5dv_ah {
    /// The 48-byte `struct mlx5_wqe_av` (`mlx5dp::prm::Av`).
    pub av: *mut mlx5dp::prm::Av,
    /// Reserved for extensions (libmlx5 writes 0).
    pub comp_mask: u64,
}

/// `struct mlx5dv_obj`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct mlx5dv_obj {
    /// QP.
    pub qp: mlx5dv_obj_pair<ibv_qp, mlx5dv_qp>,
    /// CQ.
    pub cq: mlx5dv_obj_pair<ibv_cq, mlx5dv_cq>,
    /// SRQ.
    pub srq: mlx5dv_obj_pair<ibv_srq, mlx5dv_srq>,
    /// Striding (or plain) RQ work queue.
    pub rwq: mlx5dv_obj_pair<ibv_wq, mlx5dv_rwq>,
    /// Device memory (unused).
    pub dm: mlx5dv_obj_pair<Opaque, Opaque>,
    /// Address handle ([`super::ah::Ah`] reads its address vector).
    pub ah: mlx5dv_obj_pair<rdma_sys::ibv_ah, mlx5dv_ah>,
    /// Protection domain (unused).
    pub pd: mlx5dv_obj_pair<Opaque, Opaque>,
}

impl mlx5dv_obj {
    /// Every pointer null (`obj_type` says which pairs are read).
    pub fn empty() -> Self {
        fn none<I, O>() -> mlx5dv_obj_pair<I, O> {
            mlx5dv_obj_pair {
                in_: core::ptr::null_mut(),
                out: core::ptr::null_mut(),
            }
        }
        Self {
            qp: none(),
            cq: none(),
            srq: none(),
            rwq: none(),
            dm: none(),
            ah: none(),
            pd: none(),
        }
    }
}

// ---------------------------------------------------------------------------
// Clock.

/// `struct mlx5dv_clock_info`: converts free-running HCA ticks to ns
/// (see [`super::device::ts_to_ns`], the port of `mlx5dv_ts_to_ns`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct mlx5dv_clock_info {
    /// ns at `last_cycles`.
    pub nsec: u64,
    /// Tick count of the last update.
    pub last_cycles: u64,
    /// Fractional ns carried over.
    pub frac: u64,
    /// Multiplier.
    pub mult: u32,
    /// Shift.
    pub shift: u32,
    /// Valid bits of the counter.
    pub mask: u64,
}

#[link(name = "mlx5")]
extern "C" {
    /// `mlx5dv_is_supported`: whether the device is driven by libmlx5.
    pub fn mlx5dv_is_supported(device: *mut rdma_sys::ibv_device) -> bool;
    /// `mlx5dv_query_device`: 0 on success.
    pub fn mlx5dv_query_device(ctx_in: *mut ibv_context, attrs_out: *mut mlx5dv_context) -> c_int;
    /// `mlx5dv_create_cq`: null (errno set) on failure.
    pub fn mlx5dv_create_cq(
        context: *mut ibv_context,
        cq_attr: *mut ibv_cq_init_attr_ex,
        mlx5_cq_attr: *mut mlx5dv_cq_init_attr,
    ) -> *mut ibv_cq_ex;
    /// `mlx5dv_create_qp`: null (errno set) on failure.
    pub fn mlx5dv_create_qp(
        context: *mut ibv_context,
        qp_attr: *mut ibv_qp_init_attr_ex,
        mlx5_qp_attr: *mut mlx5dv_qp_init_attr,
    ) -> *mut ibv_qp;
    /// `mlx5dv_create_wq`: null (errno set) on failure.
    pub fn mlx5dv_create_wq(
        context: *mut ibv_context,
        wq_init_attr: *mut ibv_wq_init_attr,
        mlx5_wq_attr: *mut mlx5dv_wq_init_attr,
    ) -> *mut ibv_wq;
    /// `mlx5dv_init_obj`: 0 on success.
    pub fn mlx5dv_init_obj(obj: *mut mlx5dv_obj, obj_type: u64) -> c_int;
    /// `mlx5dv_get_clock_info`: 0 or an errno value.
    pub fn mlx5dv_get_clock_info(
        context: *mut ibv_context,
        clock_info: *mut mlx5dv_clock_info,
    ) -> c_int;
}
