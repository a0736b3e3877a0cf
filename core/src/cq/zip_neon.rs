//! NEON (AdvSIMD) mini-array decoder: [`super::zip::decode_scalar`],
//! vectorised, bit for bit the same [`MiniBatch`].
//!
//! Every mini is two big-endian words: `first` (bytes 0–3) and `second`
//! (bytes 4–7). `vld2q_u32` loads four minis de-interleaved (one vector of
//! their `first` words, one of their `second` words) and `vrev32q_u8`
//! byte-swaps each vector to host order, so eight minis cost two loads and
//! four swaps. The narrowing shifts (`vshrn`, `vmovn`) then cut the 16-
//! and 8-bit fields out; the running counter of a striding RQ is a prefix
//! sum of the strides over 16-bit lanes (`vext` shifts and adds). DPDK's
//! `mlx5_rxtx_vec_neon.h` has the idea (`vqtbl1q_u8` masks); the code is
//! not its.
//!
//! NEON is part of the base aarch64 targets (`cfg(target_feature =
//! "neon")`), so the token [`Neon`] is normally built at compile time; the
//! `unsafe` constructor covers targets built without it.

use super::burst::Stashed;
use super::mem::CqeCopy;
use super::zip::{
    Fused, MiniBatch, MiniKind, Prepared, SummaryWriter, Unzip, FLOW_TAG_BITS, SOP_MASK,
};
use super::{CompletionSummary, Cq, PollError, WorkQueues};
use crate::prm::{MiniCqe, MINI_CQE_ARRAY_SIZE};
use core::arch::aarch64::{
    uint16x8_t, uint32x4_t, vaddq_u16, vandq_u16, vandq_u32, vcombine_u16, vdupq_n_u16,
    vdupq_n_u32, vextq_u16, vld1q_u16, vld1q_u32, vld1q_u8, vld2q_u32, vmovn_u32, vorrq_u32,
    vqtbl1q_u8, vreinterpretq_u16_u32, vreinterpretq_u16_u8, vreinterpretq_u32_u8,
    vreinterpretq_u8_u16, vreinterpretq_u8_u32, vrev32q_u8, vshlq_n_u32, vshrn_n_u16, vshrn_n_u32,
    vshrq_n_u32, vst1_u8, vst1q_u16, vst1q_u32, vst1q_u8,
};

/// Proof that the CPU running this code has NEON.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Neon(());

impl Neon {
    /// The token, if the crate was compiled with NEON enabled (the default
    /// for aarch64 targets).
    pub const fn compile_time() -> Option<Self> {
        if cfg!(target_feature = "neon") {
            Some(Self(()))
        } else {
            None
        }
    }

    /// The token, unconditionally.
    ///
    /// # Safety
    /// Every CPU that runs code using the token must support NEON.
    pub const unsafe fn new_unchecked() -> Self {
        Self(())
    }

    /// Decodes one mini array ([`super::zip::decode_scalar`]'s contract).
    #[inline]
    pub fn decode(
        self,
        unzip: Unzip,
        minis: &[MiniCqe; MINI_CQE_ARRAY_SIZE],
        start: u16,
        out: &mut MiniBatch,
    ) {
        // SAFETY: `self` exists, so NEON is available (the contract of its
        // constructors); that is all `decode_neon` requires.
        unsafe { decode_neon(unzip, minis, start, out) }
    }
}

/// 0, 1, … 7: the running counter of a cyclic RQ advances by one.
const IOTA: [u16; 8] = [0, 1, 2, 3, 4, 5, 6, 7];

/// Decodes one mini array with 128-bit vectors (two per eight u32 lanes).
///
/// # Safety
/// The CPU must support NEON.
#[target_feature(enable = "neon")]
unsafe fn decode_neon(
    unzip: Unzip,
    minis: &[MiniCqe; MINI_CQE_ARRAY_SIZE],
    start: u16,
    out: &mut MiniBatch,
) {
    let src = minis.as_ptr().cast::<u32>();
    // SAFETY: NEON is enabled for this function and available (caller
    // contract). Loads: two de-interleaving loads of 8 u32 each cover
    // exactly the 64-byte array (`u32` loads need no alignment beyond the
    // element's for `ld2`; unaligned access is allowed on aarch64 Linux and
    // the intrinsic takes any `*const u32` the array provides); the `IOTA`
    // load reads 8 u16 of a static. Stores: each writes 16 (or 8) bytes
    // inside one array field of `out` of at least that size.
    unsafe {
        let lo = vld2q_u32(src);
        let hi = vld2q_u32(src.add(8));
        let bswap = |v: uint32x4_t| vreinterpretq_u32_u8(vrev32q_u8(vreinterpretq_u8_u32(v)));
        let first = [bswap(lo.0), bswap(hi.0)];
        let second = [bswap(lo.1), bswap(hi.1)];

        let store32 = |dst: &mut [u32; MINI_CQE_ARRAY_SIZE], v: [uint32x4_t; 2]| {
            vst1q_u32(dst.as_mut_ptr(), v[0]);
            vst1q_u32(dst.as_mut_ptr().add(4), v[1]);
        };
        let store16 = |dst: &mut [u16; MINI_CQE_ARRAY_SIZE], v: uint16x8_t| {
            vst1q_u16(dst.as_mut_ptr(), v);
        };
        let hi16 =
            |v: [uint32x4_t; 2]| vcombine_u16(vshrn_n_u32::<16>(v[0]), vshrn_n_u32::<16>(v[1]));
        let lo16 = |v: [uint32x4_t; 2]| vcombine_u16(vmovn_u32(v[0]), vmovn_u32(v[1]));
        let and = |v: [uint32x4_t; 2], m: u32| {
            let m = vdupq_n_u32(m);
            [vandq_u32(v[0], m), vandq_u32(v[1], m)]
        };
        let or =
            |a: [uint32x4_t; 2], b: [uint32x4_t; 2]| [vorrq_u32(a[0], b[0]), vorrq_u32(a[1], b[1])];
        let splat = |x: u32| {
            let v = vdupq_n_u32(x);
            [v, v]
        };

        let title_sop = unzip.title_sop_drop_qpn;
        let mut byte_cnt = second;
        // The fields the minis carry (PRM-FACTS §10.2, §10.3); the others
        // keep the title's values (`MiniBatch::new`).
        match unzip.kind {
            MiniKind::Req => {
                // Byte 2: the send opcode, into `sop_drop_qpn[31:24]`.
                let sop = [vshlq_n_u32::<16>(first[0]), vshlq_n_u32::<16>(first[1])];
                let sop = or(and(sop, SOP_MASK), splat(title_sop & !SOP_MASK));
                store32(&mut out.sop_drop_qpn, sop);
            }
            MiniKind::Hash => store32(&mut out.rss_hash_result, first),
            MiniKind::Csum | MiniKind::CsumStridx => store16(&mut out.check_sum, hi16(first)),
            MiniKind::ByteCnt => {}
            MiniKind::FtagStridx => {
                // Tag [15:0] in bytes 0–1, [23:16] in byte 4; count in 5–7.
                byte_cnt = and(second, FLOW_TAG_BITS);
                let tag_high = [vshrq_n_u32::<8>(second[0]), vshrq_n_u32::<8>(second[1])];
                let tag_low = [vshrq_n_u32::<16>(first[0]), vshrq_n_u32::<16>(first[1])];
                let tag = or(and(tag_high, 0x00ff_0000), tag_low);
                store32(
                    &mut out.sop_drop_qpn,
                    or(tag, splat(title_sop & !FLOW_TAG_BITS)),
                );
            }
            MiniKind::L34hStridx => {
                // Byte 0: the high byte of the high half.
                vst1_u8(
                    out.l4_l3_hdr_type.as_mut_ptr(),
                    vshrn_n_u16::<8>(hi16(first)),
                );
            }
        }
        store32(&mut out.byte_cnt, byte_cnt);
        let wqe_counter = match (unzip.kind, unzip.striding) {
            // Requester: bytes 0–1.
            (MiniKind::Req, _) => hi16(first),
            // Stride index: bytes 2–3.
            (MiniKind::FtagStridx | MiniKind::CsumStridx | MiniKind::L34hStridx, _) => lo16(first),
            // Running counter, striding RQ: `start` plus the exclusive
            // prefix sum of the strides (`byte_cnt[29:16]`);
            // `vextq_u16(zero, x, 8 - k)` shifts x up by k lanes.
            (MiniKind::Hash | MiniKind::Csum | MiniKind::ByteCnt, true) => {
                let steps = vandq_u16(hi16(byte_cnt), vdupq_n_u16(0x3fff));
                let zero = vdupq_n_u16(0);
                let mut sum = vextq_u16::<7>(zero, steps);
                sum = vaddq_u16(sum, vextq_u16::<7>(zero, sum));
                sum = vaddq_u16(sum, vextq_u16::<6>(zero, sum));
                sum = vaddq_u16(sum, vextq_u16::<4>(zero, sum));
                vaddq_u16(vdupq_n_u16(start), sum)
            }
            // Running counter, cyclic RQ: `start` plus the lane number.
            (MiniKind::Hash | MiniKind::Csum | MiniKind::ByteCnt, false) => {
                vaddq_u16(vdupq_n_u16(start), vld1q_u16(IOTA.as_ptr()))
            }
        };
        store16(&mut out.wqe_counter, wqe_counter);
    }
}

/// The NEON [`SummaryWriter`]: per mini one `tbl` (its index and byte
/// count, byte-swapped, into place), one add (the constant part; for the
/// running shape the counter plus the lane in the wr_id's low 16 bits,
/// wrapping as the counter does), one store.
#[derive(Clone, Copy, Debug)]
pub(crate) struct NeonWriter(pub(crate) Neon);

impl SummaryWriter for NeonWriter {
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
        // SAFETY: `self` holds the token, so NEON is available.
        unsafe { write_neon::<L>(p, copy, running, out) }
    }

    #[inline(always)]
    fn burst_loop<const M: u8, const S: usize, W: WorkQueues>(
        self,
        cq: &mut Cq,
        wqs: &mut W,
        out: &mut [CompletionSummary],
    ) -> (usize, Result<(), PollError>) {
        // SAFETY: `self` holds the token, so NEON is available.
        unsafe { burst_loop_neon::<M, S, W>(self, cq, wqs, out) }
    }

    #[inline(always)]
    fn enhanced_loop<const S: usize, W: WorkQueues>(
        self,
        cq: &mut Cq,
        wqs: &mut W,
        out: &mut [CompletionSummary],
        pending: Option<CqeCopy>,
    ) -> (usize, Result<(), PollError>) {
        // SAFETY: `self` holds the token, so NEON is available.
        unsafe { enhanced_loop_neon::<S, W>(self, cq, wqs, out, pending) }
    }

    #[inline(always)]
    fn long_titles<const S: usize, W: WorkQueues>(
        self,
        cq: &mut Cq,
        b0: u8,
        title: CqeCopy,
        out: &mut [CompletionSummary],
    ) -> (usize, Result<(), PollError>) {
        // SAFETY: `self` holds the token, so NEON is available.
        unsafe { long_titles_neon::<S, W>(self, cq, b0, title, out) }
    }
}

/// [`SummaryWriter::write`] with NEON.
///
/// Not a `#[target_feature]` function (those cannot be
/// `inline(always)`): it is only instantiated inside the burst functions
/// compiled for the feature, where its intrinsics inline.
///
/// # Safety
/// The CPU must support NEON.
#[inline(always)]
unsafe fn write_neon<const L: usize>(
    p: &Prepared,
    copy: CqeCopy,
    running: u16,
    out: &mut [CompletionSummary; L],
) {
    const { assert!(L <= MINI_CQE_ARRAY_SIZE) };
    let add0 = [u32::from(running & p.run_mask), 0, 0, p.upper];
    let step = [u32::from(p.run_mask & 1), 0, 0, 0];
    let dst = out.as_mut_ptr().cast::<u8>();
    // SAFETY: NEON is enabled for this function and available (caller
    // contract). Loads: the two 16-byte halves of a 32-byte static mask and
    // two 16-byte local arrays. Stores: lane `i < L` writes the 16 bytes of
    // `out[i]`, a valid summary (the upper word holds `Origin::Mini`, the
    // rest plain integers).
    unsafe {
        let mask = [vld1q_u8(p.mask.as_ptr()), vld1q_u8(p.mask.as_ptr().add(16))];
        let mut add = vreinterpretq_u16_u32(vld1q_u32(add0.as_ptr()));
        let step = vreinterpretq_u16_u32(vld1q_u32(step.as_ptr()));
        for i in 0..L {
            let s = vreinterpretq_u16_u8(vqtbl1q_u8(copy.0[i / 2], mask[i % 2]));
            vst1q_u8(dst.add(16 * i), vreinterpretq_u8_u16(vaddq_u16(s, add)));
            add = vaddq_u16(add, step);
        }
    }
}

/// `cq.burst_loop` with the NEON writer, compiled for the feature.
///
/// # Safety
/// The CPU must support NEON.
#[target_feature(enable = "neon")]
#[inline(never)]
unsafe fn burst_loop_neon<const M: u8, const S: usize, W: WorkQueues>(
    d: NeonWriter,
    cq: &mut Cq,
    wqs: &mut W,
    out: &mut [CompletionSummary],
) -> (usize, Result<(), PollError>) {
    cq.burst_loop_out::<M, S, W, NeonWriter>(d, wqs, out)
}

/// `cq.long_titles` with the NEON writer, compiled for the feature.
///
/// # Safety
/// The CPU must support NEON.
#[target_feature(enable = "neon")]
#[inline(never)]
unsafe fn long_titles_neon<const S: usize, W: WorkQueues>(
    d: NeonWriter,
    cq: &mut Cq,
    b0: u8,
    title: CqeCopy,
    out: &mut [CompletionSummary],
) -> (usize, Result<(), PollError>) {
    cq.long_titles::<S, W, NeonWriter>(d, b0, title, out)
}

/// `cq.enhanced_loop` with the NEON writer, compiled for the feature.
///
/// # Safety
/// The CPU must support NEON.
#[target_feature(enable = "neon")]
#[inline(never)]
unsafe fn enhanced_loop_neon<const S: usize, W: WorkQueues>(
    d: NeonWriter,
    cq: &mut Cq,
    wqs: &mut W,
    out: &mut [CompletionSummary],
    pending: Option<CqeCopy>,
) -> (usize, Result<(), PollError>) {
    cq.enhanced_loop_out::<S, W, NeonWriter>(d, wqs, out, pending)
}

/// `Cq::poll_burst` for layout `M` with the NEON writer (the token proves
/// the feature, so the call is safe).
#[inline]
pub(crate) fn burst_neon<const M: u8, W: WorkQueues>(
    t: Neon,
    cq: &mut Cq,
    wqs: &mut W,
    out: &mut [CompletionSummary],
) -> Result<usize, Stashed> {
    // SAFETY: the token proves NEON, all `burst_neon_in` requires.
    unsafe { burst_neon_in::<M, W>(t, cq, wqs, out) }
}

/// # Safety
/// The CPU must support NEON.
#[target_feature(enable = "neon")]
unsafe fn burst_neon_in<const M: u8, W: WorkQueues>(
    t: Neon,
    cq: &mut Cq,
    wqs: &mut W,
    out: &mut [CompletionSummary],
) -> Result<usize, Stashed> {
    cq.burst_stashed::<M, W, NeonWriter>(NeonWriter(t), wqs, out)
}

#[cfg(test)]
mod tests {
    use super::super::zip::{prop, UnzipPath};
    use super::*;

    #[test]
    fn neon_writer_matches_the_decoder() {
        let Some(token) = Neon::compile_time() else {
            std::eprintln!("NEON not enabled at compile time: skipped");
            return;
        };
        let rounds = if cfg!(miri) { 64 } else { 20_000 };
        let n = prop::check_writer(NeonWriter(token), 0x5eed_0e0f, rounds);
        std::eprintln!("neon writer: {n} arrays checked");
    }

    #[test]
    fn neon_matches_scalar_and_reference() {
        let Some(token) = Neon::compile_time() else {
            std::eprintln!("NEON not enabled at compile time: skipped");
            return;
        };
        let rounds = if cfg!(miri) { 8 } else { 20_000 };
        let n = prop::check_path(UnzipPath::Neon(token), 0x5eed_0e0e, rounds, 512);
        std::eprintln!("neon: {n} minis checked");
    }
}
