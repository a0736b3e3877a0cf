//! The burst path's loops of 64-byte inline frames compiled with AVX2,
//! for a queue given the proof that the CPU has it
//! ([`TxQueue::set_avx2`](super::TxQueue::set_avx2)): `TxBatch::fresh`
//! with its counted loop (`fill64`) inlined (no call per session), and
//! `Run::sessions` with its counted loop inlined. Each frame is copied as
//! two 32-byte moves instead of four 16-byte ones. The same code, so the same bytes
//! (`tests::burst_path_matches_push_avx2`). One of the few modules with
//! `unsafe` code (the target-feature functions and their calls).
#![expect(
    unsafe_code,
    reason = "a target-feature function, called under the AVX2 proof"
)]

use super::burst::{FillRun, FreshPkt, Inline64, Run};
use super::{DoorbellPolicy, Packet, QpKind, TxBatch, TxMode, TxOffload};
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

/// `fill64` inlined into its caller (compiled with AVX2 there), the
/// offload words through `black_box` where the packets' test reads them
/// (`burst::keyed`, [`FillRun`]).
struct Fill64;

impl FillRun for Fill64 {
    #[inline(always)]
    fn fill<T: FreshPkt>(region: &mut [u8], pkts: &[T], ids: &mut [u64], key: (u64, u16)) -> usize {
        super::burst::fill64(region, pkts, ids, super::burst::keyed::<T>(key))
    }
}

/// `TxBatch::fresh` of 64-byte frames compiled with AVX2, its counted
/// loop (`fill64`) inlined (the frame copied as two 32-byte moves).
///
/// # Safety
///
/// The CPU must support AVX2.
#[target_feature(enable = "avx2")]
#[inline(never)]
unsafe fn fresh64_avx2<T: FreshPkt, const END: bool, P: DoorbellPolicy, Q: QpKind, M: TxMode>(
    b: &mut TxBatch<'_, '_, P, Q, M>,
    pkts: &[T],
    offload: &TxOffload,
) -> usize {
    b.fresh_as::<T, Inline64, Fill64, END>(pkts, offload)
}

/// `TxBatch::fresh` of 64-byte frames with AVX2, under the proof `_avx2`
/// that the CPU has it.
#[inline(always)]
pub(super) fn fresh64<T: FreshPkt, const END: bool, P: DoorbellPolicy, Q: QpKind, M: TxMode>(
    _avx2: Avx2,
    b: &mut TxBatch<'_, '_, P, Q, M>,
    pkts: &[T],
    offload: &TxOffload,
) -> usize {
    // SAFETY: `_avx2` exists, so the CPU has AVX2 (its constructors'
    // contract); that is all `fresh64_avx2` requires.
    unsafe { fresh64_avx2::<T, END, P, Q, M>(b, pkts, offload) }
}
