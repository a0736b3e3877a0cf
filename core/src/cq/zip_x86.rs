//! SSE4.1 and AVX2 mini-array decoders: [`super::zip::decode_scalar`],
//! vectorised, bit for bit the same [`MiniBatch`].
//!
//! The idea is DPDK's (`mlx5_rxtx_vec_sse.h`: a `pshufb` mask moves and
//! byte-swaps mini-CQE fields in one instruction); the code is not. Every
//! mini is two big-endian words: `first` (bytes 0–3: hash, checksum, flow
//! tag low, stride index, header type, requester counter and opcode) and
//! `second` (bytes 4–7: byte count, flow tag high). One shuffle per pair of
//! minis byte-swaps both words and groups them (`[first a, first b,
//! second a, second b]`); 64-bit unpacks (and, for AVX2, a cross-lane
//! `vpermq`) then give one vector of the eight `first` words and one of the
//! eight `second` words. Everything after is shifts, masks, packs and, for
//! the running `wqe_counter` on a striding RQ, a prefix sum of the strides
//! over 16-bit lanes (three shift-and-adds).
//!
//! Availability is proved by a token ([`Sse41`], [`Avx2`]): built at compile
//! time when the crate is compiled with the feature
//! (`cfg(target_feature)`), or by the caller after runtime detection
//! (`core` is `no_std`; `is_x86_feature_detected!` needs `std`) through an
//! `unsafe` constructor. The decoders are `#[target_feature]` functions;
//! the only `unsafe` here is calling them (the token is the proof) and the
//! intrinsic loads and stores inside them.

use super::burst::Stashed;
use super::mem::{store_summary, ArrayRun, Block, BlockRun, CqeCopy, FitBlocks};
use super::zip::{
    BlocksTaken, Fused, MiniBatch, MiniKind, Prepared, SummaryShape, SummaryWriter, Unzip,
    FLOW_TAG_BITS, PLAN_OPCODES, SHAPE_MASKS, SOP_MASK,
};
use super::{
    zip, CompletionSummary, Cq, Origin, PollError, WorkQueues, FORMAT_COMPRESSED, FORMAT_MASK,
};
use crate::prm::{Cqe64, MiniCqe, OpOwn, WcStatus, ENHANCED_MAX_MINIS, MINI_CQE_ARRAY_SIZE};
use core::arch::x86_64::{
    __m128i, __m256i, _mm256_add_epi16, _mm256_and_si256, _mm256_broadcastsi128_si256,
    _mm256_castsi256_si128, _mm256_extracti128_si256, _mm256_load_si256, _mm256_loadu_si256,
    _mm256_or_si256, _mm256_permute2x128_si256, _mm256_permute4x64_epi64, _mm256_set1_epi16,
    _mm256_set1_epi32, _mm256_set_m128i, _mm256_setzero_si256, _mm256_shuffle_epi8,
    _mm256_slli_epi32, _mm256_srli_epi32, _mm256_storeu_si256, _mm256_unpackhi_epi64,
    _mm256_unpacklo_epi64, _mm_add_epi16, _mm_and_si128, _mm_cvtsi32_si128, _mm_loadu_si128,
    _mm_or_si128, _mm_packus_epi16, _mm_packus_epi32, _mm_set1_epi16, _mm_set1_epi32,
    _mm_setr_epi16, _mm_setr_epi32, _mm_setr_epi8, _mm_setzero_si128, _mm_shuffle_epi8,
    _mm_slli_epi32, _mm_slli_si128, _mm_srli_epi32, _mm_store_si128, _mm_storel_epi64,
    _mm_storeu_si128, _mm_unpackhi_epi16, _mm_unpackhi_epi32, _mm_unpackhi_epi64,
    _mm_unpacklo_epi16, _mm_unpacklo_epi32, _mm_unpacklo_epi64,
};

pub use crate::cpu::{Avx2, Sse41};

impl Sse41 {
    /// Decodes one mini array ([`super::zip::decode_scalar`]'s contract).
    #[inline]
    pub fn decode(
        self,
        unzip: Unzip,
        minis: &[MiniCqe; MINI_CQE_ARRAY_SIZE],
        start: u16,
        out: &mut MiniBatch,
    ) {
        // SAFETY: `self` exists, so SSE4.1 is available (the contract of
        // its constructors); that is all `decode_sse41` requires.
        unsafe {
            decode_sse41::<false>(unzip, minis, MINI_CQE_ARRAY_SIZE, start, out);
        }
    }

    /// Decodes the first `n` minis and returns the running counter after
    /// them ([`super::zip::UnzipPath::decode_count`]'s contract).
    #[inline]
    pub fn decode_count(
        self,
        unzip: Unzip,
        minis: &[MiniCqe; MINI_CQE_ARRAY_SIZE],
        n: usize,
        start: u16,
        out: &mut MiniBatch,
    ) -> u16 {
        // SAFETY: `self` exists, so SSE4.1 is available (the contract of
        // its constructors); that is all `decode_count_sse41` requires.
        unsafe { decode_count_sse41(unzip, minis, n, start, out) }
    }
}

impl Avx2 {
    /// Decodes one mini array ([`super::zip::decode_scalar`]'s contract).
    #[inline]
    pub fn decode(
        self,
        unzip: Unzip,
        minis: &[MiniCqe; MINI_CQE_ARRAY_SIZE],
        start: u16,
        out: &mut MiniBatch,
    ) {
        // SAFETY: `self` exists, so AVX2 is available (the contract of its
        // constructors); that is all `decode_avx2` requires.
        unsafe {
            decode_avx2(unzip, minis, MINI_CQE_ARRAY_SIZE, start, out);
        }
    }

    /// Decodes the first `n` minis and returns the running counter after
    /// them ([`super::zip::UnzipPath::decode_count`]'s contract).
    #[inline]
    pub fn decode_count(
        self,
        unzip: Unzip,
        minis: &[MiniCqe; MINI_CQE_ARRAY_SIZE],
        n: usize,
        start: u16,
        out: &mut MiniBatch,
    ) -> u16 {
        // SAFETY: `self` exists, so AVX2 is available (the contract of its
        // constructors); that is all `decode_count_avx2` requires.
        unsafe { decode_count_avx2(unzip, minis, n, start, out) }
    }
}

/// [`Sse41::decode_count`]: entries of one or two minis decode the first
/// pair only.
///
/// # Safety
/// The CPU must support SSE4.1.
#[target_feature(enable = "sse4.1")]
unsafe fn decode_count_sse41(
    unzip: Unzip,
    minis: &[MiniCqe; MINI_CQE_ARRAY_SIZE],
    n: usize,
    start: u16,
    out: &mut MiniBatch,
) -> u16 {
    // SAFETY: SSE4.1 is enabled here and available (caller contract).
    unsafe {
        if n <= 2 {
            decode_sse41::<true>(unzip, minis, n, start, out)
        } else {
            decode_sse41::<false>(unzip, minis, n, start, out)
        }
    }
}

/// [`Avx2::decode_count`]: entries of one or two minis decode the first
/// pair only, with 128-bit vectors.
///
/// # Safety
/// The CPU must support AVX2.
#[target_feature(enable = "avx2")]
unsafe fn decode_count_avx2(
    unzip: Unzip,
    minis: &[MiniCqe; MINI_CQE_ARRAY_SIZE],
    n: usize,
    start: u16,
    out: &mut MiniBatch,
) -> u16 {
    // SAFETY: AVX2 (hence SSE4.1) is enabled here and available (caller
    // contract).
    unsafe {
        if n <= 2 {
            decode_sse41::<true>(unzip, minis, n, start, out)
        } else {
            decode_avx2(unzip, minis, n, start, out)
        }
    }
}

/// Per 16-byte pair of minis `a, b`: `[first a, first b, second a,
/// second b]`, each word byte-swapped to host order.
macro_rules! pair_shuffle {
    () => {
        _mm_setr_epi8(3, 2, 1, 0, 11, 10, 9, 8, 7, 6, 5, 4, 15, 14, 13, 12)
    };
}

/// 0, 1, … 7: the running counter of a cyclic RQ advances by one.
macro_rules! iota16 {
    () => {
        _mm_setr_epi16(0, 1, 2, 3, 4, 5, 6, 7)
    };
}

/// Decodes one mini array with 128-bit vectors and returns the running
/// counter after its first `n` lanes (`n` at most 8). `PAIR`: only the
/// first two minis are decoded (`n` at most 2; lanes 2–7 of the fields
/// written are then unspecified).
///
/// # Safety
/// The CPU must support SSE4.1.
#[target_feature(enable = "sse4.1")]
unsafe fn decode_sse41<const PAIR: bool>(
    unzip: Unzip,
    minis: &[MiniCqe; MINI_CQE_ARRAY_SIZE],
    n: usize,
    start: u16,
    out: &mut MiniBatch,
) -> u16 {
    let src = minis.as_ptr().cast::<__m128i>();
    // SAFETY: SSE4.1 (and SSSE3) are enabled for this function and
    // available (caller contract). Loads: four (`PAIR`: one) 16-byte
    // unaligned loads inside the 64-byte array. Stores: each writes 16 (or
    // 8) bytes inside one array field of `out` (32-byte u32 arrays take
    // two, or one for `PAIR`, the 16-byte u16 arrays one, the 8-byte u8
    // array a low-half store).
    unsafe {
        let pair = pair_shuffle!();
        let p0 = _mm_shuffle_epi8(_mm_loadu_si128(src), pair);
        // Lanes 0–3 and 4–7 of the `first` and `second` words (`PAIR`:
        // lanes 0–1 of both halves are minis 0–1, the rest unspecified).
        let (first, second) = if PAIR {
            let hi = _mm_unpackhi_epi64(p0, p0);
            ([p0, p0], [hi, hi])
        } else {
            let p1 = _mm_shuffle_epi8(_mm_loadu_si128(src.add(1)), pair);
            let p2 = _mm_shuffle_epi8(_mm_loadu_si128(src.add(2)), pair);
            let p3 = _mm_shuffle_epi8(_mm_loadu_si128(src.add(3)), pair);
            (
                [_mm_unpacklo_epi64(p0, p1), _mm_unpacklo_epi64(p2, p3)],
                [_mm_unpackhi_epi64(p0, p1), _mm_unpackhi_epi64(p2, p3)],
            )
        };

        let store32 = |dst: &mut [u32; MINI_CQE_ARRAY_SIZE], v: [__m128i; 2]| {
            let d = dst.as_mut_ptr().cast::<__m128i>();
            _mm_storeu_si128(d, v[0]);
            if !PAIR {
                _mm_storeu_si128(d.add(1), v[1]);
            }
        };
        let store16 = |dst: &mut [u16; MINI_CQE_ARRAY_SIZE], v: __m128i| {
            _mm_storeu_si128(dst.as_mut_ptr().cast::<__m128i>(), v);
        };
        // Eight u32 lanes to eight u16 lanes; every value is below 2^16.
        let pack16 = |v: [__m128i; 2]| _mm_packus_epi32(v[0], v[1]);
        let shr8 = |v: [__m128i; 2]| [_mm_srli_epi32::<8>(v[0]), _mm_srli_epi32::<8>(v[1])];
        let shr16 = |v: [__m128i; 2]| [_mm_srli_epi32::<16>(v[0]), _mm_srli_epi32::<16>(v[1])];
        let shr24 = |v: [__m128i; 2]| [_mm_srli_epi32::<24>(v[0]), _mm_srli_epi32::<24>(v[1])];
        let and = |v: [__m128i; 2], m: u32| {
            let m = _mm_set1_epi32(m as i32);
            [_mm_and_si128(v[0], m), _mm_and_si128(v[1], m)]
        };
        let or =
            |a: [__m128i; 2], b: [__m128i; 2]| [_mm_or_si128(a[0], b[0]), _mm_or_si128(a[1], b[1])];
        let splat = |x: u32| {
            let v = _mm_set1_epi32(x as i32);
            [v, v]
        };

        let title_sop = unzip.title_sop_drop_qpn;
        let mut byte_cnt = second;
        // The fields the minis carry (PRM-FACTS §10.2, §10.3); the others
        // keep the title's values (`MiniBatch::new`).
        match unzip.kind {
            MiniKind::Req => {
                // Byte 2: the send opcode, into `sop_drop_qpn[31:24]`.
                let sop = [
                    _mm_slli_epi32::<16>(first[0]),
                    _mm_slli_epi32::<16>(first[1]),
                ];
                let sop = or(and(sop, SOP_MASK), splat(title_sop & !SOP_MASK));
                store32(&mut out.sop_drop_qpn, sop);
            }
            MiniKind::Hash => store32(&mut out.rss_hash_result, first),
            MiniKind::Csum | MiniKind::CsumStridx => {
                store16(&mut out.check_sum, pack16(shr16(first)));
            }
            MiniKind::ByteCnt => {}
            MiniKind::FtagStridx => {
                // Tag [15:0] in bytes 0–1, [23:16] in byte 4; count in 5–7.
                byte_cnt = and(second, FLOW_TAG_BITS);
                let tag = or(and(shr8(second), 0x00ff_0000), shr16(first));
                let sop = or(tag, splat(title_sop & !FLOW_TAG_BITS));
                store32(&mut out.sop_drop_qpn, sop);
            }
            MiniKind::L34hStridx => {
                let hdr = _mm_packus_epi16(pack16(shr24(first)), _mm_setzero_si128());
                _mm_storel_epi64(out.l4_l3_hdr_type.as_mut_ptr().cast::<__m128i>(), hdr);
            }
        }
        store32(&mut out.byte_cnt, byte_cnt);
        let wqe_counter = match (unzip.kind, unzip.striding) {
            // Requester: bytes 0–1.
            (MiniKind::Req, _) => pack16(shr16(first)),
            // Stride index: bytes 2–3.
            (MiniKind::FtagStridx | MiniKind::CsumStridx | MiniKind::L34hStridx, _) => {
                pack16(and(first, 0xffff))
            }
            // Running counter, striding RQ: `start` plus the exclusive
            // prefix sum of the strides (`byte_cnt[29:16]`).
            (MiniKind::Hash | MiniKind::Csum | MiniKind::ByteCnt, true) => {
                let steps = pack16(and(shr16(byte_cnt), 0x3fff));
                let mut sum = _mm_slli_si128::<2>(steps);
                sum = _mm_add_epi16(sum, _mm_slli_si128::<2>(sum));
                sum = _mm_add_epi16(sum, _mm_slli_si128::<4>(sum));
                sum = _mm_add_epi16(sum, _mm_slli_si128::<8>(sum));
                _mm_add_epi16(_mm_set1_epi16(start as i16), sum)
            }
            // Running counter, cyclic RQ: `start` plus the lane number.
            (MiniKind::Hash | MiniKind::Csum | MiniKind::ByteCnt, false) => {
                let v = _mm_add_epi16(_mm_set1_epi16(start as i16), iota16!());
                store16(&mut out.wqe_counter, v);
                return start.wrapping_add(n as u16);
            }
        };
        store16(&mut out.wqe_counter, wqe_counter);
        out.end_counter(unzip, n, start)
    }
}

/// Decodes one mini array with 256-bit vectors (eight u32 lanes) and
/// returns the running counter after its first `n` lanes (`n` at most 8).
///
/// # Safety
/// The CPU must support AVX2.
#[target_feature(enable = "avx2")]
unsafe fn decode_avx2(
    unzip: Unzip,
    minis: &[MiniCqe; MINI_CQE_ARRAY_SIZE],
    n: usize,
    start: u16,
    out: &mut MiniBatch,
) -> u16 {
    let src = minis.as_ptr().cast::<__m256i>();
    // SAFETY: AVX2 (and SSE4.1) are enabled for this function and
    // available (caller contract). Loads: two 32-byte unaligned loads
    // cover exactly the 64-byte array. Stores: each writes 32, 16 or 8
    // bytes inside one array field of `out` of at least that size.
    unsafe {
        // `vpshufb` shuffles within each 128-bit lane: the same mask twice.
        let pair = _mm256_broadcastsi128_si256(pair_shuffle!());
        // Per 128-bit lane: [first a, first b, second a, second b].
        let p0 = _mm256_shuffle_epi8(_mm256_loadu_si256(src), pair);
        let p1 = _mm256_shuffle_epi8(_mm256_loadu_si256(src.add(1)), pair);
        // The unpacks give quadwords of lanes [01, 45, 23, 67]; `vpermq`
        // (0, 2, 1, 3) puts them in order.
        let first = _mm256_permute4x64_epi64::<0b11_01_10_00>(_mm256_unpacklo_epi64(p0, p1));
        let second = _mm256_permute4x64_epi64::<0b11_01_10_00>(_mm256_unpackhi_epi64(p0, p1));

        let store32 = |dst: &mut [u32; MINI_CQE_ARRAY_SIZE], v: __m256i| {
            _mm256_storeu_si256(dst.as_mut_ptr().cast::<__m256i>(), v);
        };
        let store16 = |dst: &mut [u16; MINI_CQE_ARRAY_SIZE], v: __m128i| {
            _mm_storeu_si128(dst.as_mut_ptr().cast::<__m128i>(), v);
        };
        // Eight u32 lanes to eight u16 lanes; every value is below 2^16.
        let pack16 = |v: __m256i| {
            _mm_packus_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v))
        };
        let and = |v: __m256i, m: u32| _mm256_and_si256(v, _mm256_set1_epi32(m as i32));
        let splat = |x: u32| _mm256_set1_epi32(x as i32);

        let title_sop = unzip.title_sop_drop_qpn;
        let mut byte_cnt = second;
        // The fields the minis carry (PRM-FACTS §10.2, §10.3); the others
        // keep the title's values (`MiniBatch::new`).
        match unzip.kind {
            MiniKind::Req => {
                // Byte 2: the send opcode, into `sop_drop_qpn[31:24]`.
                let sop = and(_mm256_slli_epi32::<16>(first), SOP_MASK);
                let sop = _mm256_or_si256(sop, splat(title_sop & !SOP_MASK));
                store32(&mut out.sop_drop_qpn, sop);
            }
            MiniKind::Hash => store32(&mut out.rss_hash_result, first),
            MiniKind::Csum | MiniKind::CsumStridx => {
                store16(&mut out.check_sum, pack16(_mm256_srli_epi32::<16>(first)));
            }
            MiniKind::ByteCnt => {}
            MiniKind::FtagStridx => {
                // Tag [15:0] in bytes 0–1, [23:16] in byte 4; count in 5–7.
                byte_cnt = and(second, FLOW_TAG_BITS);
                let tag = _mm256_or_si256(
                    and(_mm256_srli_epi32::<8>(second), 0x00ff_0000),
                    _mm256_srli_epi32::<16>(first),
                );
                let sop = _mm256_or_si256(tag, splat(title_sop & !FLOW_TAG_BITS));
                store32(&mut out.sop_drop_qpn, sop);
            }
            MiniKind::L34hStridx => {
                let hdr = pack16(_mm256_srli_epi32::<24>(first));
                let hdr = _mm_packus_epi16(hdr, _mm_setzero_si128());
                _mm_storel_epi64(out.l4_l3_hdr_type.as_mut_ptr().cast::<__m128i>(), hdr);
            }
        }
        store32(&mut out.byte_cnt, byte_cnt);
        let wqe_counter = match (unzip.kind, unzip.striding) {
            // Requester: bytes 0–1.
            (MiniKind::Req, _) => pack16(_mm256_srli_epi32::<16>(first)),
            // Stride index: bytes 2–3.
            (MiniKind::FtagStridx | MiniKind::CsumStridx | MiniKind::L34hStridx, _) => {
                pack16(and(first, 0xffff))
            }
            // Running counter, striding RQ: `start` plus the exclusive
            // prefix sum of the strides (`byte_cnt[29:16]`).
            (MiniKind::Hash | MiniKind::Csum | MiniKind::ByteCnt, true) => {
                let steps = pack16(and(_mm256_srli_epi32::<16>(byte_cnt), 0x3fff));
                let mut sum = _mm_slli_si128::<2>(steps);
                sum = _mm_add_epi16(sum, _mm_slli_si128::<2>(sum));
                sum = _mm_add_epi16(sum, _mm_slli_si128::<4>(sum));
                sum = _mm_add_epi16(sum, _mm_slli_si128::<8>(sum));
                _mm_add_epi16(_mm_set1_epi16(start as i16), sum)
            }
            // Running counter, cyclic RQ: `start` plus the lane number.
            (MiniKind::Hash | MiniKind::Csum | MiniKind::ByteCnt, false) => {
                let v = _mm_add_epi16(_mm_set1_epi16(start as i16), iota16!());
                store16(&mut out.wqe_counter, v);
                return start.wrapping_add(n as u16);
            }
        };
        store16(&mut out.wqe_counter, wqe_counter);
        out.end_counter(unzip, n, start)
    }
}

/// Writes the summaries of all eight lanes of a decoded mini array whose
/// wr_ids are their `wqe_counter`s ([`super::WorkQueues::WR_ID_IS_WQE_COUNTER`]):
/// summary `i` is `wqe_counter[i]` zero-extended, then `byte_cnt[i]`, then
/// `upper` (status, opcode, origin; [`CompletionSummary::upper_word`]).
/// SSE2 only (the x86-64 baseline): 3 loads, 14 shuffles, 8 stores.
#[inline(always)]
pub(crate) fn summaries_sse2(
    batch: &MiniBatch,
    upper: u32,
    out: &mut [CompletionSummary; MINI_CQE_ARRAY_SIZE],
) {
    let dst = out.as_mut_ptr().cast::<__m128i>();
    // SAFETY: SSE2 is part of every x86-64 target this module is compiled
    // for (`cfg(target_feature = "sse2")`). Loads: 16 bytes of the
    // `wqe_counter` array and 2 × 16 bytes of the `byte_cnt` array, all
    // inside `batch` (unaligned loads). Stores: eight 16-byte stores, one
    // per summary of `out` (16 bytes each, 16-aligned); every byte pattern
    // written is a valid `CompletionSummary` (`upper` holds a valid
    // `Origin`, the other fields are plain integers).
    unsafe {
        let zero = _mm_setzero_si128();
        let counters = _mm_loadu_si128(batch.wqe_counter.as_ptr().cast::<__m128i>());
        let lens = batch.byte_cnt.as_ptr().cast::<__m128i>();
        let upper = _mm_set1_epi32(upper as i32);
        // wqe_counter lanes 0–3 and 4–7 as u32, then pairs as u64.
        let c32 = [
            _mm_unpacklo_epi16(counters, zero),
            _mm_unpackhi_epi16(counters, zero),
        ];
        for (h, c) in c32.into_iter().enumerate() {
            // `byte_cnt | upper << 32`, lanes 4h to 4h+3, as u64 pairs.
            let len = _mm_loadu_si128(lens.add(h));
            let hi = [
                _mm_unpacklo_epi32(len, upper),
                _mm_unpackhi_epi32(len, upper),
            ];
            let lo = [_mm_unpacklo_epi32(c, zero), _mm_unpackhi_epi32(c, zero)];
            for q in 0..2 {
                let base = 4 * h + 2 * q;
                _mm_store_si128(dst.add(base), _mm_unpacklo_epi64(lo[q], hi[q]));
                _mm_store_si128(dst.add(base + 1), _mm_unpackhi_epi64(lo[q], hi[q]));
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Whole mini arrays straight into summaries (`SummaryWriter`), and the burst
// poller instantiated inside functions compiled for the feature, so that
// the writers inline into its loops (one dispatch per `poll_burst` call).
// The AVX2 writer also takes whole runs (of a basic session's arrays, of
// full enhanced compressed CQEs) with each pair's constant part and running
// counter in a register across the run; the SSSE3 one takes runs array by
// array (the trait's default).

/// The SSSE3 [`SummaryWriter`] (the [`Sse41`] token: SSE4.1 implies SSSE3).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Sse41Writer(pub(crate) Sse41);

impl SummaryWriter for Sse41Writer {
    type Prepared = Prepared;

    #[inline(always)]
    fn prepare(self, plan: Fused) -> Prepared {
        Prepared::new(plan)
    }

    #[inline(always)]
    fn write<const L: usize>(
        self,
        p: &Prepared,
        copy: CqeCopy,
        running: u16,
        out: &mut [CompletionSummary; L],
    ) {
        // SAFETY: `self` holds the token, so SSE4.1 is available.
        unsafe { write_sse41::<L>(p, copy, running, out) }
    }

    #[inline(always)]
    fn burst_loop<const M: u8, const S: usize, W: WorkQueues>(
        self,
        cq: &mut Cq,
        wqs: &mut W,
        out: &mut [CompletionSummary],
    ) -> (usize, Result<(), PollError>) {
        // SAFETY: `self` holds the token, so SSE4.1 is available.
        unsafe { burst_loop_sse41::<M, S, W>(self, cq, wqs, out) }
    }

    #[inline(always)]
    fn enhanced_loop<const S: usize, W: WorkQueues>(
        self,
        cq: &mut Cq,
        wqs: &mut W,
        out: &mut [CompletionSummary],
        pending: Option<CqeCopy>,
    ) -> (usize, Result<(), PollError>) {
        // SAFETY: `self` holds the token, so SSE4.1 is available.
        unsafe { enhanced_loop_sse41::<S, W>(self, cq, wqs, out, pending) }
    }

    #[inline(always)]
    fn long_titles<const S: usize, W: WorkQueues>(
        self,
        cq: &mut Cq,
        b0: u8,
        title: CqeCopy,
        out: &mut [CompletionSummary],
    ) -> (usize, Result<(), PollError>) {
        // SAFETY: `self` holds the token, so SSE4.1 is available.
        unsafe { long_titles_sse41::<S, W>(self, cq, b0, title, out) }
    }
}

/// [`SummaryWriter::write`] with 128-bit vectors: per mini one `pshufb`
/// (its index and byte count, byte-swapped, into place), one add (the
/// constant part: status, opcode and origin in the top word; for the
/// running shape, the counter plus the lane in the wr_id's low 16 bits,
/// wrapping as the counter does), one store.
///
/// Not a `#[target_feature]` function (those cannot be
/// `inline(always)`): it is only instantiated inside the burst functions
/// compiled for the feature, where its intrinsics inline.
///
/// # Safety
/// The CPU must support SSE4.1.
#[inline(always)]
unsafe fn write_sse41<const L: usize>(
    p: &Prepared,
    copy: CqeCopy,
    running: u16,
    out: &mut [CompletionSummary; L],
) {
    const { assert!(L <= MINI_CQE_ARRAY_SIZE) };
    let dst = out.as_mut_ptr().cast::<__m128i>();
    let start = i32::from(running & p.run_mask);
    let step = i32::from(p.run_mask & 1);
    // SAFETY: SSE4.1 is enabled for this function and available (caller
    // contract). Loads: the two 16-byte halves of a 32-byte static mask.
    // Stores: lane `i < L` writes the 16 bytes of `out[i]` (a summary is 16
    // bytes), and the bytes are a valid summary (the upper word holds
    // `Origin::Mini`, the rest plain integers).
    unsafe {
        let mask = [
            _mm_loadu_si128(p.mask.as_ptr().cast::<__m128i>()),
            _mm_loadu_si128(p.mask.as_ptr().add(16).cast::<__m128i>()),
        ];
        let mut add = _mm_setr_epi32(start, 0, 0, p.upper as i32);
        let step = _mm_cvtsi32_si128(step);
        for i in 0..L {
            let s = _mm_shuffle_epi8(copy.0[i / 2], mask[i % 2]);
            _mm_storeu_si128(dst.add(i), _mm_add_epi16(s, add));
            add = _mm_add_epi16(add, step);
        }
    }
}

/// The AVX2 [`SummaryWriter`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct Avx2Writer(pub(crate) Avx2);

impl SummaryWriter for Avx2Writer {
    type Prepared = Avx2Prepared;

    // Its loops are compiled with AVX2: a copy is two `vmovdqa ymm`.
    const WIDE_COPY: bool = true;

    #[inline(always)]
    fn prepare(self, plan: Fused) -> Avx2Prepared {
        // SAFETY: `self` holds the token, so AVX2 is available.
        unsafe { Avx2Prepared::new(plan) }
    }

    #[inline(always)]
    fn write<const L: usize>(
        self,
        p: &Avx2Prepared,
        copy: CqeCopy,
        running: u16,
        out: &mut [CompletionSummary; L],
    ) {
        // SAFETY: `self` holds the token, so AVX2 is available.
        unsafe { write_avx2::<L>(p, copy, running, out) }
    }

    #[inline(always)]
    fn write_arrays<const S: usize>(
        self,
        p: &Avx2Prepared,
        _plan: Fused,
        arrays: ArrayRun<S>,
        running: u16,
        out: &mut [CompletionSummary],
    ) -> usize {
        // SAFETY: `self` holds the token, so AVX2 is available.
        unsafe { write_arrays_avx2::<S, false>(p, arrays, running, out) }
    }

    #[inline(always)]
    fn resume_arrays<const S: usize>(
        self,
        p: &Avx2Prepared,
        _plan: Fused,
        arrays: ArrayRun<S>,
        running: u16,
        out: &mut [CompletionSummary],
    ) -> usize {
        // SAFETY: `self` holds the token, so AVX2 is available.
        unsafe { write_arrays_avx2::<S, true>(p, arrays, running, out) }
    }

    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn write_blocks<const S: usize>(
        self,
        p: &Avx2Prepared,
        plan: Fused,
        blocks: BlockRun<S>,
        first: CqeCopy,
        running: u16,
        out: &mut [CompletionSummary],
        titles: Option<&mut Cqe64>,
    ) -> BlocksTaken {
        // SAFETY: `self` holds the token, so AVX2 is available.
        unsafe { write_blocks_avx2::<S>(p, plan, blocks, first, running, out, titles) }
    }

    #[inline(always)]
    fn burst_loop<const M: u8, const S: usize, W: WorkQueues>(
        self,
        cq: &mut Cq,
        wqs: &mut W,
        out: &mut [CompletionSummary],
    ) -> (usize, Result<(), PollError>) {
        // SAFETY: `self` holds the token, so AVX2 is available.
        unsafe { burst_loop_avx2::<M, S, W>(self, cq, wqs, out) }
    }

    #[inline(always)]
    fn enhanced_loop<const S: usize, W: WorkQueues>(
        self,
        cq: &mut Cq,
        wqs: &mut W,
        out: &mut [CompletionSummary],
        pending: Option<CqeCopy>,
    ) -> (usize, Result<(), PollError>) {
        // SAFETY: `self` holds the token, so AVX2 is available.
        unsafe { enhanced_loop_avx2::<S, W>(self, cq, wqs, out, pending) }
    }

    #[inline(always)]
    fn long_titles<const S: usize, W: WorkQueues>(
        self,
        cq: &mut Cq,
        b0: u8,
        title: CqeCopy,
        out: &mut [CompletionSummary],
    ) -> (usize, Result<(), PollError>) {
        // SAFETY: `self` holds the token, so AVX2 is available.
        unsafe { long_titles_avx2::<S, W>(self, cq, b0, title, out) }
    }
}

/// One plan's [`Avx2Prepared`] vectors as stored (each 32 bytes, aligned),
/// padded to 256 bytes: a row's offset is one shift of its index.
#[repr(C, align(256))]
struct Avx2Consts {
    /// The shape's two masks ([`SHAPE_MASKS`]).
    mask: [u8; 32],
    /// Per pair `j`: the summaries' upper word in each half, plus (running
    /// shape only) the lane numbers `2j`, `2j + 1` in the wr_id's low word.
    lanes: [[i32; 8]; 4],
    /// [`Fused::run_mask`] in the wr_id's low word of each half.
    run: [i32; 8],
}

/// Rows of [`AVX2_PLANS`]: every plan's (4 × [`PLAN_OPCODES`]) and zero
/// rows up to a power of two, so that [`plan_index`] bounds a row by one
/// mask.
const AVX2_ROWS: usize = (4 * PLAN_OPCODES).next_power_of_two();

/// Every plan's AVX2 constants, built at compile time and indexed by
/// [`plan_index`]: a title's writer constants are six aligned loads, for
/// every title (nothing is rebuilt per session, per call or per array).
static AVX2_PLANS: [Avx2Consts; AVX2_ROWS] = {
    const SHAPES: [SummaryShape; 4] = [
        SummaryShape::Requester,
        SummaryShape::StrideIndex,
        SummaryShape::FlowTag,
        SummaryShape::Running,
    ];
    let mut t = [const {
        Avx2Consts {
            mask: [0; 32],
            lanes: [[0; 8]; 4],
            run: [0; 8],
        }
    }; AVX2_ROWS];
    let mut i = 0;
    while i < 4 * PLAN_OPCODES {
        let plan = Fused {
            shape: SHAPES[i / PLAN_OPCODES],
            opcode: (i % PLAN_OPCODES) as u8,
            row: i as u8,
        };
        let m = plan.run_mask() as i32;
        let upper = plan.upper() as i32;
        t[i].mask = SHAPE_MASKS[plan.shape as usize];
        let mut j = 0;
        while j < 4 {
            let lane = 2 * j as i32;
            t[i].lanes[j] = [lane & m, 0, 0, upper, (lane + 1) & m, 0, 0, upper];
            j += 1;
        }
        t[i].run = [m, 0, 0, 0, m, 0, 0, 0];
        i += 1;
    }
    t
};

/// `plan`'s row of [`AVX2_PLANS`] ([`Fused::row`], the shape × opcode index
/// [`Fused::new`] computed once: always below 4 × [`PLAN_OPCODES`], as it
/// pairs the shapes with opcodes 0 to 4 only; masked all the same, one
/// `and`, to the table's power-of-two length).
#[inline(always)]
fn plan_index(plan: Fused) -> usize {
    usize::from(plan.row) & (AVX2_ROWS - 1)
}

/// A plan's constants for [`write_avx2`], loaded from [`AVX2_PLANS`] once
/// per plan (per call of the burst poller's array loop or per title's
/// blocks) and kept in registers across its arrays: nothing of the plan is
/// re-derived per array.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Avx2Prepared {
    /// The shape's two masks (first mini of a pair in the low half).
    mask: __m256i,
    /// Per pair `j`: status, opcode and origin in each summary's top word,
    /// plus (running shape only) the lane numbers `2j`, `2j + 1` in the
    /// wr_id's low word: the whole constant part of the pair's summaries.
    lanes: [__m256i; 4],
    /// [`Fused::run_mask`] in the wr_id's low word of each half (words 0
    /// and 8), zero elsewhere: `running` broadcast and masked by it is the
    /// running counter's part.
    run: __m256i,
    /// [`Fused::run_mask`], loaded with the vectors (for the block run's
    /// scalar running counter: one `and`, not a test of the shape).
    run_mask: u16,
}

impl Avx2Prepared {
    /// The constants of `plan`.
    ///
    /// # Safety
    /// The CPU must support AVX2.
    #[inline(always)]
    unsafe fn new(plan: Fused) -> Self {
        let c = &AVX2_PLANS[plan_index(plan)];
        let at = |v: &[i32; 8]| v.as_ptr().cast::<__m256i>();
        // SAFETY: AVX2 is available (caller contract). Loads: 32-byte
        // aligned 32-byte fields of a static row.
        unsafe {
            Self {
                mask: _mm256_load_si256(c.mask.as_ptr().cast::<__m256i>()),
                lanes: [
                    _mm256_load_si256(at(&c.lanes[0])),
                    _mm256_load_si256(at(&c.lanes[1])),
                    _mm256_load_si256(at(&c.lanes[2])),
                    _mm256_load_si256(at(&c.lanes[3])),
                ],
                run: _mm256_load_si256(at(&c.run)),
                run_mask: c.run[0] as u16,
            }
        }
    }
}

/// [`SummaryWriter::write`] with 256-bit vectors: per pair of minis one
/// broadcast of their 16 bytes to both halves, one `vpshufb` (first mini's
/// mask in the low half, second's in the high half: the two summaries in
/// order), two adds (the pair's constant part from [`Avx2Prepared`]; the
/// running counter, broadcast and masked once per array), one 32-byte
/// store.
///
/// Not a `#[target_feature]` function (those cannot be
/// `inline(always)`): it is only instantiated inside the burst functions
/// compiled for the feature, where its intrinsics inline.
///
/// # Safety
/// The CPU must support AVX2.
#[inline(always)]
unsafe fn write_avx2<const L: usize>(
    p: &Avx2Prepared,
    copy: CqeCopy,
    running: u16,
    out: &mut [CompletionSummary; L],
) {
    const { assert!(L <= MINI_CQE_ARRAY_SIZE) };
    let dst = out.as_mut_ptr().cast::<__m128i>();
    // SAFETY: AVX2 is enabled for this function and available (caller
    // contract). Stores: pair `j` writes `out[2j]` and `out[2j + 1]` (32
    // bytes) only if `2j + 1 < L`, else `out[2j]` alone (16 bytes); every
    // byte pattern is a valid summary (as in `write_sse41`).
    unsafe {
        // The running counter in the wr_id's low word of each half (zero
        // but for the running shape).
        let run = _mm256_and_si256(_mm256_set1_epi16(running as i16), p.run);
        for (j, lane) in p.lanes.iter().enumerate().take(L.div_ceil(2)) {
            let pair = _mm256_broadcastsi128_si256(copy.0[j]);
            let s = _mm256_add_epi16(_mm256_shuffle_epi8(pair, p.mask), *lane);
            let s = _mm256_add_epi16(s, run);
            if 2 * j + 1 < L {
                _mm256_storeu_si256(dst.add(2 * j).cast::<__m256i>(), s);
            } else {
                _mm_storeu_si128(dst.add(2 * j), _mm256_castsi256_si128(s));
            }
        }
    }
}

/// [`SummaryWriter::write_arrays`] with 256-bit vectors: [`write_avx2`]
/// array after array, with each pair's constant part and running counter
/// (the sum `write_avx2` forms per array) kept in a register and advanced
/// by eight lanes per array (running shape; zero otherwise): per pair one
/// broadcast, one `vpshufb`, one add, one store, one add for the next
/// array. `RESUME`: the loop of [`SummaryWriter::resume_arrays`], one
/// counter for the run's arrays and `out`'s chunks (the general loop
/// keeps its own form: its registers are laid out around it).
///
/// # Safety
/// The CPU must support AVX2.
#[inline(always)]
unsafe fn write_arrays_avx2<const S: usize, const RESUME: bool>(
    p: &Avx2Prepared,
    arrays: ArrayRun<S>,
    running: u16,
    out: &mut [CompletionSummary],
) -> usize {
    // SAFETY: AVX2 is enabled for this function and available (caller
    // contract); `array_avx2` has the same contract.
    unsafe {
        // The counter's step per array: eight lanes, in its word only.
        let step = _mm256_and_si256(_mm256_set1_epi16(MINI_CQE_ARRAY_SIZE as i16), p.run);
        let mut acc = accumulators(p, running);
        let mut done = 0;
        if RESUME {
            let chunks = out.chunks_exact_mut(MINI_CQE_ARRAY_SIZE);
            for (i, dst) in (0..arrays.len()).zip(chunks) {
                let (Some(copy), Ok(dst)) = (arrays.copy(i, true), dst.try_into()) else {
                    break;
                };
                array_avx2(p, &mut acc, step, copy, dst);
                arrays.invalidate(i);
                done = i + 1;
            }
        } else {
            for (i, dst) in out
                .chunks_exact_mut(MINI_CQE_ARRAY_SIZE)
                .take(arrays.len())
                .enumerate()
            {
                let (Some(copy), Ok(dst)) = (arrays.copy(i, true), dst.try_into()) else {
                    break;
                };
                array_avx2(p, &mut acc, step, copy, dst);
                arrays.invalidate(i);
                done = i + 1;
            }
        }
        done
    }
}

/// One array of [`write_arrays_avx2`]: its copy written into `dst` (eight
/// summaries, 128 bytes, in four 32-byte stores), the accumulators
/// advanced by `step`.
///
/// # Safety
/// The CPU must support AVX2.
#[inline(always)]
unsafe fn array_avx2(
    p: &Avx2Prepared,
    acc: &mut [__m256i; 4],
    step: __m256i,
    copy: CqeCopy,
    dst: &mut [CompletionSummary; MINI_CQE_ARRAY_SIZE],
) {
    // SAFETY: AVX2 is available (caller contract). Stores: `dst`, eight
    // summaries (128 bytes), written in four 32-byte stores (`j` < 4);
    // every byte pattern is a valid summary (as in `write_sse41`).
    unsafe {
        let d = dst.as_mut_ptr().cast::<__m256i>();
        for (j, a) in acc.iter_mut().enumerate() {
            let pair = _mm256_broadcastsi128_si256(copy.0[j]);
            let s = _mm256_add_epi16(_mm256_shuffle_epi8(pair, p.mask), *a);
            _mm256_storeu_si256(d.add(j), s);
            *a = _mm256_add_epi16(*a, step);
        }
    }
}

/// The four per-pair accumulators of [`write_arrays_avx2`] and
/// [`write_blocks_avx2`]: each pair's constant part plus the running
/// counter before the first array.
///
/// # Safety
/// The CPU must support AVX2.
#[inline(always)]
unsafe fn accumulators(p: &Avx2Prepared, running: u16) -> [__m256i; 4] {
    // SAFETY: AVX2 is available (caller contract); register operations
    // only.
    unsafe {
        let run = _mm256_and_si256(_mm256_set1_epi16(running as i16), p.run);
        [
            _mm256_add_epi16(p.lanes[0], run),
            _mm256_add_epi16(p.lanes[1], run),
            _mm256_add_epi16(p.lanes[2], run),
            _mm256_add_epi16(p.lanes[3], run),
        ]
    }
}

/// [`SummaryWriter::write_blocks`] with 256-bit vectors: [`write_avx2`]
/// of seven lanes block after block, from the accumulators of
/// [`write_arrays_avx2`] advanced by seven lanes before each block after
/// the first of a run. Entry by entry ([`super::mem::FitBlocks::read_block`]:
/// the validity byte and `num_and_type` read together, one test for
/// "owned full block", the from-device barrier, one copy): on x86-64 the
/// barrier is a compiler fence, so a separate pass over the ownership
/// bytes (as [`SummaryWriter::write_blocks`] makes for the real barrier of
/// aarch64) would only add a loop. The run is bounded once, in slots (an
/// entry at slot offset `o` is read only if `o` lies before the ring's end
/// and seven places from `o` on lie in `out`), and walked by one offset,
/// kept as `q = 16 o` (the byte offset of the entry's summaries in `out`;
/// the ring's entry at `S / 16` times it): one register indexes both.
/// Each block is written from its copy's two 32-byte halves as loaded
/// ([`write_block_avx2`]: two masks, the accumulators in
/// [`block_layout`], no permute of the copy).
///
/// Past the full blocks, from the same running state: a shorter
/// compressed CQE (the last block of a session, [`tail_block_avx2`]) and,
/// with `titles`, each next title of the plan's opcode
/// ([`plain_title`]: its summary, its copy into `titles`, its running
/// counter) and the blocks after it, so that a stream of sessions of one
/// opcode stays in this loop. Any other owned entry ends the run, returned
/// as `pending`. Two nested loops: the blocks (`full_run`), then the
/// entries after them, where a full block read goes straight back to the
/// first (no "full" flag carried from one entry to the next); the running
/// counter at offset `o` is `rb + o` (one register; `rb` set by each
/// title).
///
/// # Safety
/// The CPU must support AVX2.
#[inline(always)]
unsafe fn write_blocks_avx2<const S: usize>(
    p: &Avx2Prepared,
    plan: Fused,
    blocks: BlockRun<S>,
    first: CqeCopy,
    running: u16,
    out: &mut [CompletionSummary],
    mut titles: Option<&mut Cqe64>,
) -> BlocksTaken {
    const B: usize = ENHANCED_MAX_MINIS;
    // The run bounded by room: the entry at slot offset `o` is read (and
    // written) only if `fit` has it, i.e. the seven places at `base + o`
    // lie in `out`.
    let fit = blocks.fit(out.len());
    let run_mask = p.run_mask;
    if out.len() < B {
        return BlocksTaken::none(running);
    }
    let base = out.as_mut_ptr();
    // Offsets kept as `q = 16 o` (slot offset `o`): the byte offset of the
    // entry's first summary in `out`, so that one register indexes the
    // ring and `out` ([`FitBlocks::read_block`]); always a multiple of 16.
    // The running counter at offset `o`: `rb + o` (running shape; `rb`
    // otherwise): `running` at offset 0, then each title's next counter
    // at the offset after it; one slot per mini from there.
    let mut rb = running;
    let at = |rb: u16, q: usize| rb.wrapping_add((q / 16) as u16 & run_mask);
    let mut titled = false;
    let mut q = 0;
    let mut copy = first;
    // SAFETY: AVX2 is enabled for this function and available (caller
    // contract). Each entry written is at an offset `o = q / 16` that
    // `fit` has (block 0: after the room test): seven places at `base + o`
    // (`base.byte_add(q)`: a summary is 16 bytes) inside
    // `out` (`write_block_avx2`'s and `tail_block_avx2`'s contract; a
    // title's summary is one of them). `q` stays a multiple of 16 (steps
    // of `16 n`): `read_block`'s and `full_run`'s contract.
    unsafe {
        let step = _mm256_and_si256(_mm256_set1_epi16(B as i16), p.run);
        let masks = block_masks(p);
        // Each turn: `copy`, the owned full block at `q`, copied; its
        // blocks, then the entries after them that are not full blocks.
        'blocks: loop {
            let mut acc = block_layout(&accumulators(p, at(rb, q)));
            write_block_avx2(&masks, &acc, copy, base.byte_add(q));
            // Each next block written right after its copy.
            let mut next;
            (q, next) = full_run(&masks, &fit, &mut acc, step, base, q + 16 * B);
            // The first entry after them: a shorter block from the
            // accumulators (advanced by one block); the next ones from the
            // running counter at their offset.
            let mut first_after = true;
            loop {
                // `next`: the owned entry at `q`, copied, not a full block.
                let Some(Block { copy: c, .. }) = next else {
                    break 'blocks;
                };
                copy = c;
                let op_own = copy.to_cqe().op_own;
                let dst = base.byte_add(q);
                let count = if first_after {
                    tail_block_avx2(p, &masks, &acc, step, copy, op_own, dst)
                } else {
                    let acc = block_layout(&accumulators(p, at(rb, q)));
                    let zero = _mm256_setzero_si256();
                    tail_block_avx2(p, &masks, &acc, zero, copy, op_own, dst)
                };
                first_after = false;
                if let Some(count) = count {
                    q += 16 * count as usize;
                } else if let Some(after) = take_title(&mut titles, plan, copy, op_own, dst) {
                    titled = true;
                    q += 16;
                    rb = after.wrapping_sub((q / 16) as u16 & run_mask);
                } else {
                    return BlocksTaken {
                        taken: q / 16,
                        running: at(rb, q),
                        titled,
                        pending: Some(copy),
                    };
                }
                // The next entry: its ownership bytes, the barrier, one
                // copy.
                match fit.read_block(q) {
                    Some(Block {
                        copy: c,
                        full: true,
                    }) => {
                        copy = c;
                        continue 'blocks;
                    }
                    other => next = other,
                }
            }
        }
    }
    BlocksTaken {
        taken: q / 16,
        running: at(rb, q),
        titled,
        pending: None,
    }
}

/// The full blocks of a run of [`write_blocks_avx2`] from slot offset `o`
/// on (given as `q = 16 o`, a multiple of 16, as returned), each written
/// at `base + o` right after its copy, `acc` advanced by
/// `step` before each; returns the offset after them and the entry there
/// if owned (copied: not a full block).
///
/// # Safety
/// The CPU must support AVX2; `base` must be valid for writes of the
/// places `fit` has (seven from each offset it reads); `q` is a multiple
/// of 16.
#[inline(always)]
unsafe fn full_run<const S: usize>(
    masks: &[__m256i; 2],
    fit: &FitBlocks<S>,
    acc: &mut [__m256i; 4],
    step: __m256i,
    base: *mut CompletionSummary,
    mut q: usize,
) -> (usize, Option<Block>) {
    const B: usize = ENHANCED_MAX_MINIS;
    loop {
        // SAFETY: `q` is a multiple of 16 (caller contract; steps of 16 B).
        match unsafe { fit.read_block(q) } {
            Some(Block { copy, full: true }) => {
                // SAFETY: AVX2 is available; `fit` has `o = q / 16`: seven
                // places at `base + o` (caller contract).
                unsafe {
                    advance(acc, step);
                    write_block_avx2(masks, acc, copy, base.byte_add(q));
                }
            }
            next => return (q, next),
        }
        q += 16 * B;
    }
}

/// A title inside a run of [`write_blocks_avx2`]: if `titles` is given and
/// `copy` is a plain CQE of the plan's opcode ([`plain_title`]), its
/// summary written at `dst`, its copy stored into `titles`; returns the
/// running counter after it if it was.
///
/// # Safety
/// `dst` must be valid for a write of one summary.
#[inline(always)]
unsafe fn take_title(
    titles: &mut Option<&mut Cqe64>,
    plan: Fused,
    copy: CqeCopy,
    op_own: OpOwn,
    dst: *mut CompletionSummary,
) -> Option<u16> {
    let t = titles.as_deref_mut()?;
    let (wr_id, hi, after) = plain_title(copy, op_own, plan.opcode)?;
    // SAFETY: `dst` is valid for a write of one summary (caller contract),
    // exclusive: a place of the caller's `out`.
    store_summary(unsafe { &mut *dst }, wr_id, hi);
    copy.store_to(t);
    Some(after)
}

/// Enhanced layout, a burst run's next title: if `copy` (an owned entry,
/// copied; `op_own`, its `op_own` byte, from the copy) is a plain CQE of CQE opcode `opcode` (format 0 or 1, an
/// opcode the burst loop decodes itself), its summary's two quadwords
/// (wr_id = `wqe_counter`: [`WorkQueues::WR_ID_IS_WQE_COUNTER`]) and the
/// running counter after it on a CQ that is not a striding RQ
/// ([`zip::running_after`]), as the burst poller's block loop reports and
/// commits such a CQE.
#[inline(always)]
fn plain_title(copy: CqeCopy, op_own: OpOwn, opcode: u8) -> Option<(u64, u64, u16)> {
    let cqe = copy.to_cqe();
    let op_own = op_own.into_bits();
    // The opcode and format bit 3 (format 0 or 1) in one compare (as the
    // burst loop's `plain_of`).
    if op_own & (super::OPCODE_MASK | super::FORMAT_INLINE64) != opcode << 4 {
        return None;
    }
    let counter = cqe.wqe_counter.get();
    // (Its opcode is `opcode`, just compared: the upper part a constant
    // of the plan.)
    let hi = CompletionSummary::high_word(
        cqe.byte_cnt.get(),
        WcStatus::Success.raw() as u16,
        opcode,
        Origin::Regular,
    );
    Some((u64::from(counter), hi, zip::running_after(&cqe, false)))
}

/// The four accumulators of [`write_blocks_avx2`] advanced by `step` (one
/// block's lanes).
///
/// # Safety
/// The CPU must support AVX2.
#[inline(always)]
unsafe fn advance(acc: &mut [__m256i; 4], step: __m256i) {
    for a in acc.iter_mut() {
        // SAFETY: AVX2 is available (caller contract): register operations.
        *a = unsafe { _mm256_add_epi16(*a, step) };
    }
}

/// A shorter compressed CQE in a run of [`write_blocks_avx2`] (the last
/// block of a session): if `copy` (an owned entry, not a full block by its
/// ownership bytes; `op_own`, its `op_own` byte, from the copy) is a
/// compressed CQE of fewer than seven minis, written
/// at `dst` (the run's next seven places) from the accumulators `acc`
/// (block layout, [`block_layout`]) advanced by `step` (the running
/// counter at its first mini): one pair for one or two minis, else seven
/// lanes as a full block ([`write_block_avx2`]; those past its count land
/// in `out` past the burst's count, where [`Cq::poll_burst`] may leave
/// anything); returns its count. Anything else (a plain CQE, a malformed
/// block): `None`, nothing written.
///
/// # Safety
/// The CPU must support AVX2; `dst` must be valid for writes of seven
/// summaries.
#[inline(always)]
unsafe fn tail_block_avx2(
    p: &Avx2Prepared,
    masks: &[__m256i; 2],
    acc: &[__m256i; 4],
    step: __m256i,
    copy: CqeCopy,
    op_own: OpOwn,
    dst: *mut CompletionSummary,
) -> Option<u32> {
    const B: usize = ENHANCED_MAX_MINIS;
    let count = zip::enhanced_count(op_own);
    let compressed = op_own.into_bits() & FORMAT_MASK == FORMAT_COMPRESSED;
    if compressed && count <= 2 {
        // SAFETY: AVX2 is available and `dst` valid for writes of seven
        // summaries (caller contract): register operations, then one
        // store, 32 bytes, `dst[0..2]`; every byte pattern is a valid
        // summary (as in `write_sse41`). Pair 0's accumulator is `[a0 |
        // a1]`: the low halves of the first two in block layout.
        unsafe {
            let a = _mm256_add_epi16(_mm256_permute2x128_si256::<0x20>(acc[0], acc[1]), step);
            let v = _mm256_broadcastsi128_si256(copy.0[0]);
            let s = _mm256_add_epi16(_mm256_shuffle_epi8(v, p.mask), a);
            _mm256_storeu_si256(dst.cast::<__m256i>(), s);
        }
    } else if compressed && (count as usize) < B {
        let mut a = *acc;
        // SAFETY: AVX2 is available and `dst` valid for writes of seven
        // summaries (caller contract).
        unsafe {
            advance(&mut a, step);
            write_block_avx2(masks, &a, copy, dst);
        }
    } else {
        return None;
    }
    // `count`, written `(num_and_type + 16) >> 4`: with `N - 1 + 1` the
    // compiler carries the run's offset plus one through the block loop
    // (two more instructions per full block).
    Some((u32::from(op_own.into_bits()) + 16) >> 4)
}

/// One block of [`write_blocks_avx2`]: the seven summaries of `copy`
/// into `dst` (112 bytes), from the accumulators `acc` in block layout
/// ([`block_layout`]) and `masks` ([`block_masks`]). The copy's two
/// 32-byte halves are shuffled as loaded, no permute across halves:
/// minis 0–3 (`[m0 m1 | m2 m3]`) by the shape's mask into `[s0 | s3]` and
/// by the mask with its halves swapped into `[s1 | s2]`; minis 4–6 (`[m4
/// m5 | m6 ·]`) likewise into `[s4 | ·]` and `[s5 | s6]`. Stores: `s0`
/// (16 bytes), `s1 s2` (32), `s3` (the upper half, 16), `s4` (16), `s5
/// s6` (32): the 112 bytes once each.
///
/// # Safety
/// The CPU must support AVX2; `dst` must be valid for writes of seven
/// summaries.
#[inline(always)]
unsafe fn write_block_avx2(
    masks: &[__m256i; 2],
    acc: &[__m256i; 4],
    copy: CqeCopy,
    dst: *mut CompletionSummary,
) {
    let [c0, c1, c2, c3] = copy.0;
    let d = dst.cast::<__m128i>();
    // SAFETY: AVX2 is available and `dst` valid for writes of seven
    // summaries (caller contract): the stores write `dst[0]`, `dst[1..3]`,
    // `dst[3]`, `dst[4]`, `dst[5..7]`; every byte pattern is a valid
    // summary (as in `write_sse41`).
    unsafe {
        let lo = _mm256_set_m128i(c1, c0);
        let hi = _mm256_set_m128i(c3, c2);
        let s03 = _mm256_add_epi16(_mm256_shuffle_epi8(lo, masks[0]), acc[0]);
        let s12 = _mm256_add_epi16(_mm256_shuffle_epi8(lo, masks[1]), acc[1]);
        let s4 = _mm256_add_epi16(_mm256_shuffle_epi8(hi, masks[0]), acc[2]);
        let s56 = _mm256_add_epi16(_mm256_shuffle_epi8(hi, masks[1]), acc[3]);
        _mm_storeu_si128(d, _mm256_castsi256_si128(s03));
        _mm256_storeu_si256(d.add(1).cast::<__m256i>(), s12);
        _mm_storeu_si128(d.add(3), _mm256_extracti128_si256::<1>(s03));
        _mm_storeu_si128(d.add(4), _mm256_castsi256_si128(s4));
        _mm256_storeu_si256(d.add(5).cast::<__m256i>(), s56);
    }
}

/// The shape's mask and the same with its halves swapped, as
/// [`write_block_avx2`] takes them.
///
/// # Safety
/// The CPU must support AVX2.
#[inline(always)]
unsafe fn block_masks(p: &Avx2Prepared) -> [__m256i; 2] {
    // SAFETY: AVX2 is available (caller contract): register operations.
    unsafe { [p.mask, _mm256_permute4x64_epi64::<0x4e>(p.mask)] }
}

/// Per-pair accumulators (`[a01, a23, a45, a67]`, each `[low | high]`
/// the constant part and running counter of minis `2j`, `2j + 1`) in the
/// layout of [`write_block_avx2`]: `[a0 | a3]`, `[a1 | a2]`, `[a4 | ·]`,
/// `[a5 | a6]`.
///
/// # Safety
/// The CPU must support AVX2.
#[inline(always)]
unsafe fn block_layout(acc: &[__m256i; 4]) -> [__m256i; 4] {
    // SAFETY: AVX2 is available (caller contract): register operations.
    unsafe {
        [
            _mm256_permute2x128_si256::<0x30>(acc[0], acc[1]),
            _mm256_permute2x128_si256::<0x21>(acc[0], acc[1]),
            acc[2],
            _mm256_permute2x128_si256::<0x21>(acc[2], acc[3]),
        ]
    }
}

/// `cq.burst_loop` with the SSE4.1 writer, compiled for the feature.
///
/// # Safety
/// The CPU must support SSE4.1.
#[target_feature(enable = "sse4.1")]
#[inline(never)]
unsafe fn burst_loop_sse41<const M: u8, const S: usize, W: WorkQueues>(
    d: Sse41Writer,
    cq: &mut Cq,
    wqs: &mut W,
    out: &mut [CompletionSummary],
) -> (usize, Result<(), PollError>) {
    cq.burst_loop_out::<M, S, W, Sse41Writer>(d, wqs, out)
}

/// `cq.long_titles` with the SSE4.1 writer, compiled for the feature.
///
/// # Safety
/// The CPU must support SSE4.1.
#[target_feature(enable = "sse4.1")]
#[inline(never)]
unsafe fn long_titles_sse41<const S: usize, W: WorkQueues>(
    d: Sse41Writer,
    cq: &mut Cq,
    b0: u8,
    title: CqeCopy,
    out: &mut [CompletionSummary],
) -> (usize, Result<(), PollError>) {
    cq.long_titles::<S, W, Sse41Writer>(d, b0, title, out)
}

/// `cq.enhanced_loop` with the SSE4.1 writer, compiled for the feature.
///
/// # Safety
/// The CPU must support SSE4.1.
#[target_feature(enable = "sse4.1")]
#[inline(never)]
unsafe fn enhanced_loop_sse41<const S: usize, W: WorkQueues>(
    d: Sse41Writer,
    cq: &mut Cq,
    wqs: &mut W,
    out: &mut [CompletionSummary],
    pending: Option<CqeCopy>,
) -> (usize, Result<(), PollError>) {
    cq.enhanced_loop_out::<S, W, Sse41Writer>(d, wqs, out, pending)
}

/// `cq.burst_loop` with the AVX2 writer, compiled for the feature.
///
/// # Safety
/// The CPU must support AVX2.
#[target_feature(enable = "avx2")]
#[inline(never)]
unsafe fn burst_loop_avx2<const M: u8, const S: usize, W: WorkQueues>(
    d: Avx2Writer,
    cq: &mut Cq,
    wqs: &mut W,
    out: &mut [CompletionSummary],
) -> (usize, Result<(), PollError>) {
    cq.burst_loop_out::<M, S, W, Avx2Writer>(d, wqs, out)
}

/// `cq.long_titles` with the AVX2 writer, compiled for the feature.
///
/// # Safety
/// The CPU must support AVX2.
#[target_feature(enable = "avx2")]
#[inline(never)]
unsafe fn long_titles_avx2<const S: usize, W: WorkQueues>(
    d: Avx2Writer,
    cq: &mut Cq,
    b0: u8,
    title: CqeCopy,
    out: &mut [CompletionSummary],
) -> (usize, Result<(), PollError>) {
    cq.long_titles::<S, W, Avx2Writer>(d, b0, title, out)
}

/// `cq.enhanced_loop` with the AVX2 writer, compiled for the feature.
///
/// # Safety
/// The CPU must support AVX2.
#[target_feature(enable = "avx2")]
#[inline(never)]
unsafe fn enhanced_loop_avx2<const S: usize, W: WorkQueues>(
    d: Avx2Writer,
    cq: &mut Cq,
    wqs: &mut W,
    out: &mut [CompletionSummary],
    pending: Option<CqeCopy>,
) -> (usize, Result<(), PollError>) {
    cq.enhanced_loop_out::<S, W, Avx2Writer>(d, wqs, out, pending)
}

/// `Cq::poll_burst` for layout `M` with the SSSE3 writer (the token
/// proves the feature, so the call is safe).
#[inline]
pub(crate) fn burst_sse41<const M: u8, W: WorkQueues>(
    t: Sse41,
    cq: &mut Cq,
    wqs: &mut W,
    out: &mut [CompletionSummary],
) -> Result<usize, Stashed> {
    // SAFETY: the token proves SSE4.1, all `burst_sse41_in` requires.
    unsafe { burst_sse41_in::<M, W>(t, cq, wqs, out) }
}

/// # Safety
/// The CPU must support SSE4.1.
#[target_feature(enable = "sse4.1")]
unsafe fn burst_sse41_in<const M: u8, W: WorkQueues>(
    t: Sse41,
    cq: &mut Cq,
    wqs: &mut W,
    out: &mut [CompletionSummary],
) -> Result<usize, Stashed> {
    cq.burst_stashed::<M, W, Sse41Writer>(Sse41Writer(t), wqs, out)
}

/// `Cq::poll_burst` for layout `M` with the AVX2 writer (the token proves
/// the feature, so the call is safe).
#[inline]
pub(crate) fn burst_avx2<const M: u8, W: WorkQueues>(
    t: Avx2,
    cq: &mut Cq,
    wqs: &mut W,
    out: &mut [CompletionSummary],
) -> Result<usize, Stashed> {
    // SAFETY: the token proves AVX2, all `burst_avx2_in` requires.
    unsafe { burst_avx2_in::<M, W>(t, cq, wqs, out) }
}

/// # Safety
/// The CPU must support AVX2.
#[target_feature(enable = "avx2")]
unsafe fn burst_avx2_in<const M: u8, W: WorkQueues>(
    t: Avx2,
    cq: &mut Cq,
    wqs: &mut W,
    out: &mut [CompletionSummary],
) -> Result<usize, Stashed> {
    cq.burst_stashed::<M, W, Avx2Writer>(Avx2Writer(t), wqs, out)
}

#[cfg(test)]
mod tests {
    use super::super::zip::{prop, UnzipPath};
    use super::*;

    fn rounds() -> usize {
        if cfg!(miri) {
            8
        } else {
            20_000
        }
    }

    #[test]
    fn sse41_matches_scalar_and_reference() {
        if !std::is_x86_feature_detected!("sse4.1") {
            std::eprintln!("SSE4.1 not available: skipped");
            return;
        }
        // SAFETY: detected just above.
        let path = UnzipPath::Sse41(unsafe { Sse41::new_unchecked() });
        let n = prop::check_path(path, 0x5eed_5e41, rounds(), 512);
        std::eprintln!("sse4.1: {n} minis checked");
    }

    #[test]
    fn sse41_writer_matches_the_decoder() {
        if !std::is_x86_feature_detected!("sse4.1") {
            std::eprintln!("SSE4.1 not available: skipped");
            return;
        }
        // SAFETY: detected just above.
        let d = Sse41Writer(unsafe { Sse41::new_unchecked() });
        let n = prop::check_writer(d, 0x5eed_5e42, 8 * rounds());
        std::eprintln!("sse4.1 writer: {n} arrays checked");
    }

    #[test]
    fn avx2_writer_matches_the_decoder() {
        if !std::is_x86_feature_detected!("avx2") {
            std::eprintln!("AVX2 not available: skipped");
            return;
        }
        // SAFETY: detected just above.
        let d = Avx2Writer(unsafe { Avx2::new_unchecked() });
        let n = prop::check_writer(d, 0x5eed_a0c3, 8 * rounds());
        std::eprintln!("avx2 writer: {n} arrays checked");
    }

    #[test]
    fn avx2_matches_scalar_and_reference() {
        if !std::is_x86_feature_detected!("avx2") {
            std::eprintln!("AVX2 not available: skipped");
            return;
        }
        // SAFETY: detected just above.
        let path = UnzipPath::Avx2(unsafe { Avx2::new_unchecked() });
        let n = prop::check_path(path, 0x5eed_a0c2, rounds(), 512);
        std::eprintln!("avx2: {n} minis checked");
    }
}
