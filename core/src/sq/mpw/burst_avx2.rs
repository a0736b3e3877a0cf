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

use super::burst::{FillRun, FreshPkt, HeadEq, Inline64, Run, StepAt};
use super::{
    DoorbellPolicy, Head, Open, Packet, QpKind, Tally, TxBatch, TxFrame, TxMode, TxOffload, TxQueue,
};
use crate::cpu::Avx2;
use crate::ring::WqebbRing;
use core::arch::x86_64::{
    __m128i, _mm_load_si128, _mm_or_si128, _mm_set_epi64x, _mm_testz_si128, _mm_xor_si128,
};

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
/// none), two a turn (`fill64_pairs`; for packets, before their heads,
/// measured: 59.4 instructions per packet instead of 49.6 in
/// `tx/empw_inline64_burst32`; `TxQueue::inline64_run` takes them two a
/// turn now, this loop is that of `fresh64` and `inline64_step`). The
/// heads compared as 16-byte vectors ([`Vec128`]).
struct Fill64;

impl FillRun for Fill64 {
    type Eq = Vec128;
    #[inline(always)]
    fn fill<T: FreshPkt>(region: &mut [u8], pkts: &[T], ids: &mut [u64], key: (u64, u16)) -> usize {
        if T::KEYED {
            super::burst::fill64::<T, Vec128>(region, pkts, ids, super::burst::keyed::<T>(key))
        } else {
            // Frames (`TxFrame`, `burst::inline64_step`): two a turn.
            super::burst::fill64_pairs::<T, Vec128>(region, pkts, ids, key)
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
    type Eq = Vec128Bytes;
    #[inline(always)]
    fn fill<T: FreshPkt>(region: &mut [u8], pkts: &[T], ids: &mut [u64], key: (u64, u16)) -> usize {
        super::burst::fill64::<T, Vec128Bytes>(region, pkts, ids, super::burst::keyed::<T>(key))
    }
    /// The key as made once by `crossing64`, in a register through both
    /// loops and the straddling descriptor (no call between them to spill
    /// it across; made again through `black_box` for each loop, 30.17
    /// instructions per packet in `tx/empw_inline64_burst32` instead of
    /// 30.04, frames 29.39 instead of 29.36).
    #[inline(always)]
    fn fill_of<T: FreshPkt>(
        region: &mut [u8],
        pkts: &[T],
        ids: &mut [u64],
        _: (u64, u16),
        k64: Key64,
    ) -> usize {
        super::burst::fill64_of::<T, Vec128Bytes>(region, pkts, ids, k64)
    }
}

/// [`HeadEq`] as one 16-byte vector compare (`vpxor` of the head with the
/// key in a register, `vptest`: one test per packet instead of two). Used
/// only by the counted loops of this module ([`Fill64`], [`Fill64One`]),
/// which run only inlined into its functions compiled with AVX2, under
/// the proof that the CPU has it (the SSE4.1 of `_mm_testz_si128` is
/// implied).
struct Vec128;

/// The key of [`Vec128`]: a head of common 64-byte frames ([`Head::key`]
/// of a session's offload words and 64), made only by
/// [`HeadEq::key`] (its field is private to this module).
#[derive(Clone, Copy)]
struct Key64(__m128i);

impl HeadEq for Vec128 {
    type Key = Key64;
    #[inline(always)]
    fn key(words: (u64, u16)) -> Key64 {
        let key = Head::key(words, 64);
        // SAFETY: SSE2, part of the x86-64 baseline (this module is
        // compiled only with it).
        Key64(unsafe { _mm_set_epi64x((key >> 64) as i64, key as i64) })
    }
    #[inline(always)]
    fn same(h: &Head, key: Key64) -> bool {
        // SAFETY: `h` is a valid reference to a `Head`, 16 bytes aligned
        // at 16 (its `repr(align(16))`, asserted with its layout), so the
        // aligned 16-byte load reads only its bytes; `_mm_xor_si128` is
        // SSE2 (the baseline); `_mm_testz_si128` is SSE4.1, which the
        // CPU has: `Vec128` is used only under the AVX2 proof (above),
        // and AVX2 implies SSE4.1.
        unsafe {
            let v = _mm_load_si128(core::ptr::from_ref(h).cast::<__m128i>());
            let x = _mm_xor_si128(v, key.0);
            _mm_testz_si128(x, x) != 0
        }
    }
    /// Both heads in one test (`vpxor` each, `vpor`, `vptest`), and the
    /// bytes then without a test of their length: measured 31.4
    /// instructions per packet in `tx/empw_inline64_burst32`, 33.3 with
    /// their lengths tested, 33.6 with each head tested on its own.
    #[inline(always)]
    fn pair64<'p>(
        a: &'p Packet<'_>,
        b: &'p Packet<'_>,
        key: Key64,
    ) -> Option<(&'p [u8; 64], &'p [u8; 64])> {
        // SAFETY: as in `same`, for both heads (`_mm_or_si128`: SSE2).
        let equal = unsafe {
            let x = _mm_xor_si128(_mm_load_si128(core::ptr::from_ref(a.head()).cast()), key.0);
            let y = _mm_xor_si128(_mm_load_si128(core::ptr::from_ref(b.head()).cast()), key.0);
            let z = _mm_or_si128(x, y);
            _mm_testz_si128(z, z) != 0
        };
        if !equal {
            return None;
        }
        // SAFETY: a packet's head is always `Head::of` its values (the
        // invariant `Packet` keeps: its fields are private to `sq::mpw`,
        // every constructor and builder ends with `Packet::fixed`, and
        // `TxFrame::packet` builds a plain frame's head of `data.len()`
        // itself; `tests::head_follows_every_builder` covers both). `key` is a head of shape 0
        // and length 64 (`Key64` is made only by `Vec128::key`), so each
        // packet's shape is 0 (no `Head::PTR`: `data` is the frame's
        // bytes) and its length 64, which is `data.len()` (saturated at
        // `u32::MAX`): each `data` is 64 initialised bytes, borrowed for
        // `'p` (through the packet), and `[u8; 64]` has alignment 1.
        unsafe {
            Some((
                &*a.data.as_ptr().cast::<[u8; 64]>(),
                &*b.data.as_ptr().cast::<[u8; 64]>(),
            ))
        }
    }
}

/// [`Vec128`], a packet's bytes read without a test of their length once
/// its head is the key (as [`Vec128::pair64`] does for two): the crossing
/// session's loop ([`Fill64One`], out of line; measured: 30.17
/// instructions per packet in `tx/empw_inline64_burst32` instead of
/// 30.29; in `TxQueue::inline64_run`'s loops, where the heads are
/// compared for the odd packet, the first one and the next one at a
/// session's close, it measured 31.4: register allocation).
struct Vec128Bytes;

impl HeadEq for Vec128Bytes {
    type Key = Key64;
    #[inline(always)]
    fn key(words: (u64, u16)) -> Key64 {
        Vec128::key(words)
    }
    #[inline(always)]
    fn same(h: &Head, key: Key64) -> bool {
        Vec128::same(h, key)
    }
    #[inline(always)]
    fn one64<'p>(p: &'p Packet<'_>, key: Key64) -> Option<&'p [u8; 64]> {
        if !Vec128::same(p.head(), key) {
            return None;
        }
        // SAFETY: as in `Vec128::pair64`, for one packet.
        unsafe { Some(&*p.data.as_ptr().cast::<[u8; 64]>()) }
    }
    #[inline(always)]
    fn pair64<'p>(
        a: &'p Packet<'_>,
        b: &'p Packet<'_>,
        key: Key64,
    ) -> Option<(&'p [u8; 64], &'p [u8; 64])> {
        Vec128::pair64(a, b, key)
    }
}
