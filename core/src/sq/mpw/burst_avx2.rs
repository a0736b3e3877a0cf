//! The burst path's loops of 64-byte inline frames compiled with AVX2,
//! for a queue given the proof that the CPU has it
//! ([`TxQueue::set_avx2`](super::TxQueue::set_avx2)): `TxBatch::fresh`
//! with its counted loop (`fill64`) inlined (no call per session),
//! `Run::sessions` with its counted loop inlined, and `tx_frames` and
//! `tx_burst` of 64-byte frames whole (`TxQueue::frames64_as`,
//! `TxQueue::packets64_as`, with `TxQueue::inline64_run`), with its
//! out-of-line session (`inline64_step`). Each frame is copied as two 32-byte moves instead
//! of four 16-byte ones. The same code, so the same bytes
//! (`tests::burst_path_matches_push_avx2`,
//! `tests::frames_match_packets_avx2`). One of the few modules with
//! `unsafe` code (the target-feature functions and their calls).
#![expect(
    unsafe_code,
    reason = "a target-feature function, called under the AVX2 proof"
)]

use super::burst::{FillRun, FreshPkt, Inline64, Run, StepAt};
use super::{
    DoorbellPolicy, Open, Packet, QpKind, Tally, TxBatch, TxFrame, TxMode, TxOffload, TxQueue,
};
use crate::cpu::Avx2;
use crate::ring::WqebbRing;

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
/// (`burst::keyed`, [`FillRun`]); for frames (`TxFrame`, whose test reads
/// none), two a turn (`fill64_pairs`; for packets, measured: 59.4
/// instructions per packet instead of 49.6 in
/// `tx/empw_inline64_burst32`).
struct Fill64;

impl FillRun for Fill64 {
    #[inline(always)]
    fn fill<T: FreshPkt>(region: &mut [u8], pkts: &[T], ids: &mut [u64], key: (u64, u16)) -> usize {
        if T::KEYED {
            super::burst::fill64(region, pkts, ids, super::burst::keyed::<T>(key))
        } else {
            // Frames (`TxFrame`, `burst::inline64_step`): two a turn.
            super::burst::fill64_pairs(region, pkts, ids, key)
        }
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

/// `TxQueue::frames64_as` compiled with AVX2, its counted loop
/// (`fill64_pairs`) inlined.
///
/// # Safety
///
/// The CPU must support AVX2.
#[target_feature(enable = "avx2")]
#[inline(never)]
unsafe fn tx_frames64_avx2<P: DoorbellPolicy, Q: QpKind, M: TxMode>(
    avx2: Avx2,
    q: &mut TxQueue<'_, P, Q, M>,
    offload: &TxOffload,
    frames: &[TxFrame<'_>],
) -> usize {
    q.frames64_as::<Fill64>(offload, frames, Some(avx2))
}

/// `TxQueue::frames64_as` with AVX2, under the proof `avx2` that the CPU
/// has it.
#[inline(always)]
pub(super) fn tx_frames64<P: DoorbellPolicy, Q: QpKind, M: TxMode>(
    avx2: Avx2,
    q: &mut TxQueue<'_, P, Q, M>,
    offload: &TxOffload,
    frames: &[TxFrame<'_>],
) -> usize {
    // SAFETY: `avx2` exists, so the CPU has AVX2 (its constructors'
    // contract); that is all `tx_frames64_avx2` requires.
    unsafe { tx_frames64_avx2::<P, Q, M>(avx2, q, offload, frames) }
}

/// `TxQueue::packets64_as` compiled with AVX2, its counted loop
/// (`fill64`) inlined.
///
/// # Safety
///
/// The CPU must support AVX2.
#[target_feature(enable = "avx2")]
#[inline(never)]
unsafe fn tx_packets64_avx2<P: DoorbellPolicy, Q: QpKind, M: TxMode>(
    avx2: Avx2,
    q: &mut TxQueue<'_, P, Q, M>,
    pkts: &[Packet<'_>],
) -> usize {
    q.packets64_as::<Fill64>(pkts, Some(avx2))
}

/// `TxQueue::packets64_as` with AVX2, under the proof `avx2` that the CPU
/// has it.
#[inline(always)]
pub(super) fn tx_packets64<P: DoorbellPolicy, Q: QpKind, M: TxMode>(
    avx2: Avx2,
    q: &mut TxQueue<'_, P, Q, M>,
    pkts: &[Packet<'_>],
) -> usize {
    // SAFETY: `avx2` exists, so the CPU has AVX2 (its constructors'
    // contract); that is all `tx_packets64_avx2` requires.
    unsafe { tx_packets64_avx2::<P, Q, M>(avx2, q, pkts) }
}

/// `burst::inline64_step` compiled with AVX2, its counted loop
/// (`fill64_pairs`) inlined.
///
/// # Safety
///
/// The CPU must support AVX2.
#[target_feature(enable = "avx2")]
#[inline(never)]
unsafe fn step64_avx2<T: FreshPkt, const END: bool, P: DoorbellPolicy, Q: QpKind, M: TxMode>(
    q: &mut TxQueue<'_, P, Q, M>,
    c: &mut Tally,
    open: &mut Option<Open>,
    pkts: &[T],
    offload: &TxOffload,
    at: StepAt,
) -> (usize, bool) {
    super::burst::inline64_step_as::<T, Fill64, END, P, Q, M>(q, c, open, pkts, offload, at)
}

/// `burst::inline64_step` with AVX2, under the proof `_avx2` that the
/// CPU has it.
#[inline(always)]
pub(super) fn step64<T: FreshPkt, const END: bool, P: DoorbellPolicy, Q: QpKind, M: TxMode>(
    _avx2: Avx2,
    q: &mut TxQueue<'_, P, Q, M>,
    c: &mut Tally,
    open: &mut Option<Open>,
    pkts: &[T],
    offload: &TxOffload,
    at: StepAt,
) -> (usize, bool) {
    // SAFETY: `_avx2` exists, so the CPU has AVX2 (its constructors'
    // contract); that is all `step64_avx2` requires.
    unsafe { step64_avx2::<T, END, P, Q, M>(q, c, open, pkts, offload, at) }
}

/// `burst::fill_crossing` compiled with AVX2, its counted loop
/// (`fill64`, [`Fill64One`]) inlined.
///
/// # Safety
///
/// The CPU must support AVX2.
#[target_feature(enable = "avx2")]
#[inline(never)]
unsafe fn crossing64_avx2<T: FreshPkt>(
    ring: &mut WqebbRing<'_>,
    pi: u32,
    pkts: &[T],
    ids: &mut [u64],
    key: (u64, u16),
    eth: [u8; 16],
) -> usize {
    super::burst::fill_crossing_as::<T, Fill64One>(ring, pi, pkts, ids, key, eth)
}

/// `burst::fill_crossing` with AVX2, under the proof `_avx2` that the CPU
/// has it.
#[inline(always)]
pub(super) fn crossing64<T: FreshPkt>(
    _avx2: Avx2,
    ring: &mut WqebbRing<'_>,
    pi: u32,
    pkts: &[T],
    ids: &mut [u64],
    key: (u64, u16),
    eth: [u8; 16],
) -> usize {
    // SAFETY: `_avx2` exists, so the CPU has AVX2 (its constructors'
    // contract); that is all `crossing64_avx2` requires.
    unsafe { crossing64_avx2::<T>(ring, pi, pkts, ids, key, eth) }
}

/// `fill64`, one a turn, for frames too: the counted loop of the crossing
/// session (`crossing64`), which runs it twice on a few frames each (the
/// parts before and after the ring end), where two a turn costs more in
/// set-up than it saves (measured: 31.0 instructions per packet in
/// `tx/empw_inline64_frames32` instead of 31.6 with `fill64_pairs`).
struct Fill64One;

impl FillRun for Fill64One {
    #[inline(always)]
    fn fill<T: FreshPkt>(region: &mut [u8], pkts: &[T], ids: &mut [u64], key: (u64, u16)) -> usize {
        super::burst::fill64(region, pkts, ids, super::burst::keyed::<T>(key))
    }
}
