//! The SSE4.1 writers of [`Rq::post_list`](super::Rq::post_list)'s runs of
//! one-segment WQEs and of [`Srq::post_list`]'s data segments, on a queue
//! given the SSE4.1 proof ([`Rq::set_sse41`](super::Rq::set_sse41),
//! [`Srq::set_sse41`]): one of the few modules with `unsafe` code (the
//! target-feature functions and their one 16-byte load per element).
//!
//! Per element: one 16-byte load of its SGE, one `pshufb` that puts the
//! length, the lkey and the address in the data segment's order and byte
//! swaps each (PRM-FACTS §8: `byte_count`, `lkey`, `addr`, big-endian) and
//! one 16-byte store, where the scalar path has three loads, three byte
//! swaps and three stores; and one `pminud` into a running minimum instead
//! of a test and branch per element. A zero-length SGE gives the
//! terminator segment, as [`Rq::post`](super::Rq::post) writes it: if the
//! run's smallest length is zero, a second pass over the run writes the
//! terminator over each zero-length element's segment (before the list's
//! commit, so the device never sees the first bytes). An SRQ writes every
//! SGE as given, zero length included (`mlx5_post_srq_recv`): no minimum.

#![allow(unsafe_code)]

use super::{RecvWr, Sge, Srq, TERMINATOR_SEG};
use crate::cpu::Sse41;
use crate::prm::DataSeg;
use crate::ring::RingBuf;

// The byte offsets of `Sge` the vector path reads: 16 initialised bytes
// (no padding), the address first, the length in 32-bit lane 2.
const _: () = {
    assert!(core::mem::offset_of!(Sge, addr) == 0);
    assert!(core::mem::offset_of!(Sge, length) == 8);
    assert!(core::mem::offset_of!(Sge, lkey) == 12);
    assert!(core::mem::size_of::<Sge>() == 16);
};

/// The `pshufb` control that makes an SGE's 16 bytes its data segment:
/// segment byte i takes SGE byte `SEG_ORDER[i]`, the length (SGE bytes
/// 8..12) and the lkey (12..16) byte-swapped, then the 64-bit address
/// (0..8) byte-swapped.
const SEG_ORDER: core::arch::x86_64::__m128i =
    // SAFETY: `__m128i` is 16 bytes of plain integer data, for which every
    // bit pattern is valid; the array is 16 bytes.
    unsafe {
        core::mem::transmute::<[u8; 16], core::arch::x86_64::__m128i>([
            11, 10, 9, 8, 15, 14, 13, 12, 7, 6, 5, 4, 3, 2, 1, 0,
        ])
    };

/// Writes the run of one-segment WQEs `wrs` from byte `offset` of `ring`
/// and their wr_ids into `shadow` ([`RingBuf::write16_run`]: the run must
/// not pass the ring's end; returns `false`, writing nothing, if it
/// would), with the SSE4.1 segment builder. The token proves the CPU has
/// SSE4.1.
#[inline(always)]
pub(super) fn write_run(
    _sse41: Sse41,
    ring: &mut RingBuf<'_>,
    offset: usize,
    wrs: &[RecvWr],
    shadow: &mut [u64],
) -> bool {
    // SAFETY: a `Sse41` value exists only where the CPU running this code
    // supports SSE4.1 (its constructors' contract), the one feature
    // `run_sse41` enables (with the SSSE3 it implies).
    unsafe { run_sse41(ring, offset, wrs, shadow) }
}

/// [`write_run`] compiled with SSE4.1.
///
/// # Safety
///
/// The CPU must support SSE4.1.
#[target_feature(enable = "sse4.1")]
unsafe fn run_sse41(
    ring: &mut RingBuf<'_>,
    offset: usize,
    wrs: &[RecvWr],
    shadow: &mut [u64],
) -> bool {
    use core::arch::x86_64::{_mm_extract_epi32, _mm_min_epu32, _mm_set1_epi32};
    let mut min = _mm_set1_epi32(-1);
    let written = ring.write16_run(offset, wrs, shadow, |wr, w| {
        *w = wr.wr_id;
        let v = load_sge(&wr.sge);
        min = _mm_min_epu32(min, v);
        seg_bytes(v)
    });
    // Lane 2 of the minimum: the run's smallest length.
    if written && _mm_extract_epi32::<2>(min) == 0 {
        terminate_empty(ring, offset, wrs);
    }
    written
}

/// The terminator over the segment of each zero-length element of the run
/// at `offset` (which [`write_run`] wrote: it lies inside the ring).
#[cold]
fn terminate_empty(ring: &mut RingBuf<'_>, offset: usize, wrs: &[RecvWr]) {
    for (k, wr) in wrs.iter().enumerate() {
        if wr.sge.length == 0 {
            ring.write16(offset + k * DataSeg::SIZE, TERMINATOR_SEG);
        }
    }
}

/// The 16 bytes of `sge` in a register (one unaligned load).
#[inline(always)]
fn load_sge(sge: &Sge) -> core::arch::x86_64::__m128i {
    // SAFETY: `sge` is a live `Sge`, 16 bytes with every byte initialised
    // (the asserts above: three integer fields, no padding), so valid for
    // a 16-byte unaligned read; SSE2 is in this module's build (its `cfg`).
    unsafe { core::arch::x86_64::_mm_loadu_si128((&raw const *sge).cast()) }
}

/// The data segment of the SGE whose bytes `v` holds ([`super::data_seg`]'s
/// bytes): one `pshufb` by [`SEG_ORDER`].
#[target_feature(enable = "ssse3")]
#[inline]
fn seg_bytes(v: core::arch::x86_64::__m128i) -> [u8; 16] {
    let s = core::arch::x86_64::_mm_shuffle_epi8(v, SEG_ORDER);
    // SAFETY: `__m128i` and `[u8; 16]` are both 16 bytes of plain data,
    // every bit pattern valid for either.
    unsafe { core::mem::transmute::<core::arch::x86_64::__m128i, [u8; 16]>(s) }
}

/// [`Srq::post_list`]'s writes ([`Srq::write_list`], with or without the
/// terminator by the SGE capacity) with the SSE4.1 segment builder.
/// Returns the new head and counter.
#[inline(always)]
pub(super) fn srq_write_list(_sse41: Sse41, srq: &mut Srq<'_>, wrs: &[RecvWr]) -> (u16, u32) {
    // SAFETY: a `Sse41` value exists only where the CPU running this code
    // supports SSE4.1 (its constructors' contract), the one feature
    // `srq_list_sse41` enables.
    unsafe {
        if srq.max_sge() == 1 {
            srq_list_sse41::<false>(srq, wrs)
        } else {
            srq_list_sse41::<true>(srq, wrs)
        }
    }
}

/// [`srq_write_list`] compiled with SSE4.1.
///
/// # Safety
///
/// The CPU must support SSE4.1.
#[target_feature(enable = "sse4.1")]
unsafe fn srq_list_sse41<const TERMINATOR: bool>(srq: &mut Srq<'_>, wrs: &[RecvWr]) -> (u16, u32) {
    srq.write_list::<TERMINATOR>(wrs, |sge| seg_bytes(load_sge(sge)))
}
