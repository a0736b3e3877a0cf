//! The AVX2 writer of list posts of RDMA writes and reads
//! ([`SendQueue::post_rdma_write_list`] on a queue given the AVX2 proof,
//! [`SendQueue::set_avx2`]): one of the few modules with `unsafe` code
//! (the target-feature functions and their one 32-byte load per element).

use super::list::{self, RdmaWr};
use super::Sge;
use super::{DoorbellPolicy, QpKind, SendQueue, SqShadowEntry};
use crate::cpu::Avx2;
use crate::ring::WqebbRing;

// The byte offsets of `RdmaWr` the vector path reads (`rdma_run_avx2`).
const _: () = {
    assert!(core::mem::offset_of!(RdmaWr, wr_id) == 0);
    assert!(core::mem::offset_of!(RdmaWr, remote_addr) == 8);
    assert!(core::mem::offset_of!(RdmaWr, sge) == 16);
    assert!(core::mem::offset_of!(Sge, addr) == 0);
    assert!(core::mem::offset_of!(Sge, length) == 8);
    assert!(core::mem::offset_of!(Sge, lkey) == 12);
    assert!(core::mem::size_of::<Sge>() == 16);
    assert!(core::mem::offset_of!(RdmaWr, rkey) == 32);
    assert!(core::mem::size_of::<RdmaWr>() == 40);
};

/// `list::write_list_fast` for a list of RDMA writes or reads, compiled
/// with AVX2 (everything it calls inlines, [`rdma_run_avx2`] too).
///
/// # Safety
///
/// The CPU must support AVX2.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn rdma_list_avx2<P: DoorbellPolicy, Q: QpKind>(
    sq: &mut SendQueue<'_, P, Q>,
    avx2: Avx2,
    shape: (u64, u8, bool),
    wrs: &[RdmaWr],
) {
    sq.write_list_fast(shape, wrs, list::Runs::Avx2(avx2));
}

/// Writes the WQEs and shadow entries of a plain run of RDMA writes or
/// reads (see [`SendQueue::write_rdma_run_avx2`]); returns whether an
/// element was not plain, or `None` when nothing was written (a run that
/// would cross the ring end, or a shadow shorter than the run: the caller
/// never passes one).
///
/// Per WQE: one 32-byte load of the element's bytes 4..36 (every field but
/// the flags: all initialised, no padding), one `vpermd` that puts its
/// 32-bit words where the WQE wants them (data segment: length, lkey,
/// address high, address low; remote address segment: address high, low,
/// rkey) and one `vpshufb` that byte-swaps every word and zeroes the
/// reserved one; the control segment is a 16-byte register whose WQE index
/// a `vpaddq` advances. Bytes 48..64 are zero.
///
/// # Safety
///
/// The CPU must support AVX2.
#[target_feature(enable = "avx2")]
#[inline]
pub(super) unsafe fn rdma_run_avx2(
    ring: &mut WqebbRing<'_>,
    shadow: &mut [SqShadowEntry],
    at: u32,
    run: &[RdmaWr],
    w0: u64,
    ctrl1: u64,
    meta: u64,
) -> Option<bool> {
    if run.len() != shadow.len() {
        return None;
    }
    use core::arch::x86_64::{
        __m256i, _mm256_blend_epi32, _mm256_castsi128_si256, _mm256_castsi256_si128,
        _mm256_cvtsi256_si32, _mm256_loadu_si256, _mm256_min_epu32, _mm256_permutevar8x32_epi32,
        _mm256_set1_epi32, _mm256_setr_epi32, _mm256_setr_epi8, _mm256_shuffle_epi8,
        _mm256_zextsi128_si256, _mm_add_epi64, _mm_set_epi64x,
    };
    let n = run.len();
    // Not plain: a flag (ORed), a zero-length SGE (the smallest length,
    // byte-swapped: word 0 of `min_len`, the other words are not used).
    let (mut meta, mut flags) = (meta, 0u8);
    // SAFETY: AVX2 is enabled for this function and available (caller
    // contract). The only memory access is the load of bytes 4..36 of an
    // element of `run`, inside the element (40 bytes) and initialised (the
    // layout is asserted above: `wr_id`, `remote_addr`, `sge`, `rkey`, no
    // padding before byte 36); the transmute is between two 64-byte plain
    // values.
    unsafe {
        // Element words (bytes 4..36): 0 wr_id high, 1-2 remote address
        // low/high, 3-4 SGE address low/high, 5 length, 6 lkey, 7 rkey.
        // Low lane: the data segment; high lane: the remote address segment
        // (its last word is the reserved one, zeroed by the shuffle).
        let perm = _mm256_setr_epi32(5, 6, 4, 3, 2, 1, 7, 7);
        #[rustfmt::skip]
        let swap = _mm256_setr_epi8(
            3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12,
            3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, -1, -1, -1, -1,
        );
        let one = _mm_set_epi64x(0, list::INDEX_LOW_ONE as i64);
        let mut ctrl = _mm_set_epi64x(ctrl1 as i64, w0 as i64);
        let mut min_len = _mm256_set1_epi32(-1);
        let written = ring.write_contiguous(at, n, |k| {
            let (Some(wr), Some(e)) = (run.get(k), shadow.get_mut(k)) else {
                return [0; 64];
            };
            flags |= wr.flags.0;
            *e = SqShadowEntry::from_meta(wr.wr_id, meta);
            meta += 1;
            let src = (wr as *const RdmaWr).cast::<u8>().add(4).cast::<__m256i>();
            let w = _mm256_shuffle_epi8(
                _mm256_permutevar8x32_epi32(_mm256_loadu_si256(src), perm),
                swap,
            );
            min_len = _mm256_min_epu32(min_len, w);
            // [control | remote address], [data | zeros].
            let h0 = _mm256_blend_epi32::<0b1111_0000>(_mm256_castsi128_si256(ctrl), w);
            let h1 = _mm256_zextsi128_si256(_mm256_castsi256_si128(w));
            ctrl = _mm_add_epi64(ctrl, one);
            core::mem::transmute::<[__m256i; 2], [u8; 64]>([h0, h1])
        });
        written.then_some(flags != 0 || _mm256_cvtsi256_si32(min_len) == 0)
    }
}
