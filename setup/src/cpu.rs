//! What the CPU running `setup` can do, for the choices `core` (`no_std`,
//! no CPUID) leaves to its caller: the mini-CQE decoder of a CQ
//! ([`mlx5dp::cq::CqConfig::unzip`]) and the segment builder of a receive
//! queue's list posts ([`mlx5dp::rq::Rq::set_sse41`]).

use mlx5dp::cq::UnzipPath;

/// The fastest mini-CQE decoder this CPU runs, detected at run time: AVX2,
/// then SSE4.1 on x86-64 (`is_x86_feature_detected!`); NEON on aarch64
/// (part of the base architecture); scalar elsewhere. Never worse than the
/// compile-time default ([`UnzipPath::compile_time`]); every path decodes
/// bit for bit the same.
pub fn best_unzip() -> UnzipPath {
    #[cfg(target_arch = "x86_64")]
    {
        use mlx5dp::cq::zip_x86::{Avx2, Sse41};
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: AVX2 was detected on this CPU just above; the token
            // is only used by code running on it.
            return UnzipPath::Avx2(unsafe { Avx2::new_unchecked() });
        }
        if std::is_x86_feature_detected!("sse4.1") {
            // SAFETY: SSE4.1 was detected on this CPU just above.
            return UnzipPath::Sse41(unsafe { Sse41::new_unchecked() });
        }
    }
    #[cfg(target_arch = "aarch64")]
    {
        use mlx5dp::cq::zip_neon::Neon;
        if std::arch::is_aarch64_feature_detected!("neon") {
            // SAFETY: NEON was detected on this CPU just above (it is part
            // of every aarch64 CPU Linux runs on).
            return UnzipPath::Neon(unsafe { Neon::new_unchecked() });
        }
    }
    UnzipPath::compile_time()
}

/// The SSE4.1 proof if this CPU has SSE4.1 (`is_x86_feature_detected!`),
/// for [`mlx5dp::rq::Rq::set_sse41`] (x86-64 only).
#[cfg(target_arch = "x86_64")]
pub fn sse41() -> Option<mlx5dp::cpu::Sse41> {
    if std::is_x86_feature_detected!("sse4.1") {
        // SAFETY: SSE4.1 was detected on this CPU just above; the token is
        // only used by code running on it.
        return Some(unsafe { mlx5dp::cpu::Sse41::new_unchecked() });
    }
    mlx5dp::cpu::Sse41::compile_time()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn best_is_at_least_the_compile_time_path() {
        let best = best_unzip();
        let rank = |p: UnzipPath| match p.name() {
            "avx2" => 2,
            "sse4.1" | "neon" => 1,
            _ => 0,
        };
        assert!(
            rank(best) >= rank(UnzipPath::compile_time()),
            "{}",
            best.name()
        );
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("avx2") {
            assert_eq!(best.name(), "avx2");
        }
    }
}
