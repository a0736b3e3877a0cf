//! The SSE4.1 writer of [`Rq::post_list`](super::Rq::post_list)'s runs of
//! one-segment WQEs, on a queue given the SSE4.1 proof
//! ([`Rq::set_sse41`](super::Rq::set_sse41)): one of the few modules with
//! `unsafe` code (the target-feature function and its one 16-byte load per
//! element).
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
//! commit, so the device never sees the first bytes).

#![allow(unsafe_code)]

use super::{RecvWr, Sge, TERMINATOR_SEG};
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
    use core::arch::x86_64::{
        _mm_extract_epi32, _mm_loadu_si128, _mm_min_epu32, _mm_set1_epi32, _mm_setr_epi8,
        _mm_shuffle_epi8, _mm_storeu_si128,
    };
    // Segment byte i takes SGE byte `order[i]`: the length (SGE bytes
    // 8..12) and the lkey (12..16) byte-swapped, then the 64-bit address
    // (0..8) byte-swapped.
    let order = _mm_setr_epi8(11, 10, 9, 8, 15, 14, 13, 12, 7, 6, 5, 4, 3, 2, 1, 0);
    let mut min = _mm_set1_epi32(-1);
    let written = ring.write16_run(offset, wrs, shadow, |wr, w| {
        *w = wr.wr_id;
        let mut seg = [0u8; 16];
        // SAFETY: `wr.sge` is a live `Sge`, 16 bytes with every byte
        // initialised (the asserts above: three integer fields, no
        // padding), so valid for a 16-byte unaligned read; `seg` is a
        // local array of 16 bytes, valid for a 16-byte unaligned write.
        unsafe {
            let v = _mm_loadu_si128((&raw const wr.sge).cast());
            min = _mm_min_epu32(min, v);
            _mm_storeu_si128(seg.as_mut_ptr().cast(), _mm_shuffle_epi8(v, order));
        }
        seg
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
