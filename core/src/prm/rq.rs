//! Receive WQE formats (PRM-FACTS §8; rdma-core `mlx5dv.h`, DPDK `mlx5_prm.h`).
//!
//! A cyclic RQ WQE is an array of [`super::DataSeg`]s only (no control
//! segment), of stride `roundup_pow2(16 * max_sge)`; an unused trailing slot
//! is terminated by [`INVALID_LKEY`] with a zero byte count. An SRQ WQE
//! starts with an [`SrqNextSeg`]. A striding-RQ WQE is an [`MprqWqe`].

use super::{wire_struct, Be16, DataSeg};

/// `MLX5_INVALID_LKEY`: the lkey that terminates a receive scatter list.
pub const INVALID_LKEY: u32 = 0x100;

wire_struct! {
    /// SRQ next segment `mlx5_wqe_srq_next_seg`: the link of the SRQ free list.
    pub struct SrqNextSeg(16) {
        /// Reserved.
        pub rsvd0: [u8; 2],
        /// Index of the next WQE in the list.
        pub next_wqe_index: Be16,
        /// WQE signature.
        pub signature: u8,
        /// Reserved.
        pub rsvd1: [u8; 11],
    }
}

wire_struct! {
    /// Striding (multi-packet) RQ WQE `mlx5_mprq_wqe`: a next segment and
    /// one data segment whose byte count is `stride_size * num_strides`.
    pub struct MprqWqe(32) {
        /// Next segment (unused by a cyclic striding RQ).
        pub nseg: SrqNextSeg,
        /// The buffer that holds all strides.
        pub dseg: DataSeg,
    }
}

/// Striding-RQ parameters as the WQ context encodes them (DPDK `mlx5_devx.c`).
pub mod striding {
    /// WQ type of a cyclic striding RQ (`MLX5_WQ_TYPE_CYCLIC_STRIDING_RQ`).
    pub const WQ_TYPE_CYCLIC_STRIDING_RQ: u8 = 3;
    /// `single_wqe_log_num_of_strides` is `log2(strides) - 9`.
    pub const LOG_NUM_STRIDES_BASE: u8 = 9;
    /// `single_stride_log_num_of_bytes` is `log2(stride_bytes) - 6`.
    pub const LOG_STRIDE_BYTES_BASE: u8 = 6;
}
