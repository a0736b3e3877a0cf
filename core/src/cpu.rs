//! CPU-feature proof tokens: a value of [`Sse41`] or [`Avx2`] exists only
//! where the CPU has that feature, so code holding one may call functions
//! compiled with `#[target_feature]`. Shared by the CQ's mini-CQE decoders
//! (`cq::zip_x86`), the send queue's list writer and the eMPW burst path.
//! (The decode methods are in `cq::zip_x86`; `cq::zip_x86` re-exports both
//! types under their old path.)

/// Proof that the CPU running this code has SSE4.1 (and the SSSE3 it
/// implies).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sse41(());

impl Sse41 {
    /// The token, if the crate was compiled with SSE4.1 enabled
    /// (`-C target-feature=+sse4.1`, or a `-C target-cpu` that has it).
    pub const fn compile_time() -> Option<Self> {
        if cfg!(target_feature = "sse4.1") {
            Some(Self(()))
        } else {
            None
        }
    }

    /// The token, unconditionally.
    ///
    /// # Safety
    /// Every CPU that runs code using the token must support SSE4.1 (with
    /// `std`: `is_x86_feature_detected!("sse4.1")` returned true).
    pub const unsafe fn new_unchecked() -> Self {
        Self(())
    }
}

/// Proof that the CPU running this code has AVX2 (and the SSE4.1 it
/// implies).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Avx2(());

impl Avx2 {
    /// The token, if the crate was compiled with AVX2 enabled
    /// (`-C target-feature=+avx2`, or a `-C target-cpu` that has it).
    pub const fn compile_time() -> Option<Self> {
        if cfg!(target_feature = "avx2") {
            Some(Self(()))
        } else {
            None
        }
    }

    /// The token, unconditionally.
    ///
    /// # Safety
    /// Every CPU that runs code using the token must support AVX2 (with
    /// `std`: `is_x86_feature_detected!("avx2")` returned true).
    pub const unsafe fn new_unchecked() -> Self {
        Self(())
    }
}
