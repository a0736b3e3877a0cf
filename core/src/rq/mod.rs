//! Receive queues (PRM-FACTS §8): the cyclic RQ, the shared receive queue
//! and the striding (multi-packet) RQ.
//!
//! - [`Rq`] ([`cyclic`]): a ring of data-segment arrays (rdma-core
//!   `mlx5_post_recv`).
//! - [`Srq`] ([`srq`]): a linked list of WQEs, each a
//!   [`SrqNextSeg`](crate::prm::SrqNextSeg) and data segments, recycled
//!   through a free list (rdma-core `mlx5_post_srq_recv`,
//!   `mlx5_free_srq_wqe`).
//! - [`StridingRq`] ([`mprq`]): a cyclic ring of
//!   [`MprqWqe`](crate::prm::MprqWqe)s, each one buffer of strides that
//!   several packets share; a WQE is re-posted once all its strides are
//!   consumed (DPDK `mlx5_rx_burst_mprq`).
//!
//! Each queue is built from raw parts `mlx5dp-setup` extracted, keeps a
//! private shadow of what it posted in caller-provided memory (the core
//! does not allocate), publishes on `commit` only (to-device barrier, then
//! the doorbell record), and validates every device-reported index against
//! that shadow before using it (STYLE point 8).
//!
//! A CQ maps responder completions to wr_ids through
//! [`WorkQueues`]; [`SrqWorkQueues`] and
//! [`StridingWorkQueues`] route the SRQ's and the striding RQ's completions
//! to them and everything else to an inner [`WorkQueues`]
//! ([`NoOtherQueues`] if there is none).
//!
//! Panic policy: nothing here panics on device data or caller input.
// `deny`, not `forbid`: the raw-parts constructor of the SRQ and the striding
// RQ, the SSE4.1 list writer (`list_sse41`) and the unit tests' ring memory
// opt in.
#![deny(unsafe_code)]

pub mod cyclic;
#[cfg(all(target_arch = "x86_64", target_feature = "sse2", not(loom)))]
mod list_sse41;
pub mod mprq;
pub mod srq;
#[cfg(test)]
#[cfg(not(loom))]
pub(crate) mod test_mem;

pub use cyclic::Rq;
pub use mprq::{
    MprqParts, MprqSlot, StrideRetired, StridingParams, StridingRq, StridingWorkQueues,
};
pub use srq::{Srq, SrqParts, SrqSlot, SrqWorkQueues};

use crate::cq::{LookupError, RecvRetired, SendRetired, StrideCompletion, WorkQueues, WqRef};
use crate::prm::{WcStatus, INVALID_LKEY};

/// One scatter entry (`struct ibv_sge`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sge {
    /// Buffer address.
    pub addr: u64,
    /// Length in bytes.
    pub length: u32,
    /// Local key.
    pub lkey: u32,
}

/// One receive work request of one scatter entry: an element of the list
/// [`Rq::post_list`] posts (`struct ibv_recv_wr` with `num_sge = 1`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecvWr {
    /// Returned with the completion.
    pub wr_id: u64,
    /// Where the message lands (a zero length posts a WQE of no segment,
    /// as [`Rq::post`] does when it skips a zero-length SGE).
    pub sge: Sge,
}

/// The data segment of `sge`: `byte_count`, `lkey`, `addr`, big-endian.
#[inline(always)]
pub(crate) fn data_seg(sge: &Sge) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[..4].copy_from_slice(&sge.length.to_be_bytes());
    b[4..8].copy_from_slice(&sge.lkey.to_be_bytes());
    b[8..].copy_from_slice(&sge.addr.to_be_bytes());
    b
}

/// The segment ending a WQE with fewer SGEs than its stride holds:
/// `byte_count 0`, `lkey MLX5_INVALID_LKEY`, `addr 0`.
pub(crate) const TERMINATOR_SEG: [u8; 16] = {
    let mut b = [0u8; 16];
    let k = INVALID_LKEY.to_be_bytes();
    b[4] = k[0];
    b[5] = k[1];
    b[6] = k[2];
    b[7] = k[3];
    b
};

/// Why a receive queue could not be built or a receive posted (nothing
/// was written).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RqError {
    /// Every WQE is in flight.
    QueueFull,
    /// More SGEs than a WQE holds.
    TooManySges {
        /// SGEs given.
        given: usize,
        /// SGEs a WQE holds.
        max: usize,
    },
    /// The wr_id shadow is shorter than the ring.
    ShadowTooSmall,
    /// The WQE stride is below the queue's minimum or does not fit the ring.
    BadStride,
    /// The WQE count is zero, not a power of two, or beyond what the
    /// queue's 16-bit indices can name.
    BadWqeCount(u32),
    /// The doorbell record is not 4-byte aligned.
    MisalignedDbrec,
    /// Striding parameters out of range (strides per WQE beyond 2^16, or a
    /// WQE buffer of 2^31 bytes or more).
    BadStriding,
}

/// A [`WorkQueues`] that knows no queue: every completion is refused with
/// [`LookupError::UnknownQueue`]. The inner queues of an adaptor whose CQ
/// serves only that adaptor's queue.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoOtherQueues;

impl WorkQueues for NoOtherQueues {
    fn retire_send(&mut self, _: WqRef, _: u16, _: WcStatus) -> Result<SendRetired, LookupError> {
        Err(LookupError::UnknownQueue)
    }

    fn retire_recv(&mut self, _: WqRef, _: u16, _: WcStatus) -> Result<RecvRetired, LookupError> {
        Err(LookupError::UnknownQueue)
    }

    fn retire_strides(
        &mut self,
        _: WqRef,
        _: StrideCompletion,
        _: WcStatus,
    ) -> Result<RecvRetired, LookupError> {
        Err(LookupError::UnknownQueue)
    }
}
