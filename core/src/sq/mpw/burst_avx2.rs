//! The burst path's loops of 64-byte inline frames compiled with AVX2,
//! for a queue given the proof that the CPU has it
//! ([`TxQueue::set_avx2`](super::TxQueue::set_avx2)): the counted loop of
//! `TxBatch::fresh` (`fill64`, a function of its own, so that the
//! session's offload values stay in registers) and `Run::sessions` with
//! its counted loop inlined. Each frame is copied as two 32-byte moves
//! instead of four 16-byte ones. The same code, so the same bytes
//! (`tests::burst_path_matches_push_avx2`). One of the few modules with
//! `unsafe` code (the target-feature functions and their calls).
#![expect(
    unsafe_code,
    reason = "a target-feature function, called under the AVX2 proof"
)]

use super::burst::Run;
use super::{DoorbellPolicy, Packet, QpKind, TxMode};
use crate::cpu::Avx2;

/// `Run::sessions` of 64-byte frames compiled with AVX2 (its counted loop
/// inlined: the copies become 32-byte moves).
///
/// # Safety
///
/// The CPU must support AVX2.
#[target_feature(enable = "avx2")]
unsafe fn sessions64_avx2<M: TxMode, P: DoorbellPolicy, Q: QpKind>(
    run: &mut Run<'_, '_, '_, P, Q>,
    pkts: &[Packet<'_>],
    ids: &mut [u64],
) -> (usize, bool) {
    run.sessions_as::<M, 80, true>(pkts, ids, 64)
}

/// `Run::sessions` of 64-byte frames with AVX2, under the proof `_avx2`
/// that the CPU has it.
#[inline(always)]
pub(super) fn sessions64<M: TxMode, P: DoorbellPolicy, Q: QpKind>(
    _avx2: Avx2,
    run: &mut Run<'_, '_, '_, P, Q>,
    pkts: &[Packet<'_>],
    ids: &mut [u64],
) -> (usize, bool) {
    // SAFETY: `_avx2` exists, so the CPU has AVX2 (its constructors'
    // contract); that is all `sessions64_avx2` requires.
    unsafe { sessions64_avx2::<M, P, Q>(run, pkts, ids) }
}

/// `fill64` compiled with AVX2 (the frame copied as two 32-byte moves).
///
/// # Safety
///
/// The CPU must support AVX2.
#[target_feature(enable = "avx2")]
#[inline(never)]
unsafe fn fill64_avx2(
    region: &mut [u8],
    pkts: &[Packet<'_>],
    ids: &mut [u64],
    key: (u64, u16),
) -> usize {
    super::burst::fill64(region, pkts, ids, key)
}

/// `fill64` with AVX2, under the proof `_avx2` that the CPU has it.
#[inline(always)]
pub(super) fn fill64(
    _avx2: Avx2,
    region: &mut [u8],
    pkts: &[Packet<'_>],
    ids: &mut [u64],
    key: (u64, u16),
) -> usize {
    // SAFETY: `_avx2` exists, so the CPU has AVX2 (its constructors'
    // contract); that is all `fill64_avx2` requires.
    unsafe { fill64_avx2(region, pkts, ids, key) }
}
