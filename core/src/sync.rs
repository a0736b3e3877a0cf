//! The atomics shim: `core` normally, [`loom`](https://docs.rs/loom) under
//! `cfg(loom)`.
//!
//! Every lock-free handshake in the core (doorbell-record publication, the
//! CQ owner-bit handoff, BlueFlame alternation, any shared producer) takes
//! its atomics, fences and interior-mutable cells from here and never from
//! `core::sync` directly, so the same code runs under `loom`'s model checker
//! (`RUSTFLAGS="--cfg loom" cargo test -p mlx5dp --release --test 'loom_*'`).
//! This is the tokio/crossbeam arrangement: one file switches the
//! implementation, the rest of the crate does not know which it got.
//!
//! # Rules for users
//!
//! - **Each `Release` names its `Acquire`.** A store, fence or RMW with
//!   `Release` (or stronger) carries a comment naming the load or fence that
//!   acquires it, and the other way round, e.g.
//!   `// Release: pairs with the Acquire in Cq::poll (owner byte)`.
//!   A `Relaxed` access says why no ordering is needed.
//! - Device-visible ordering (PCIe) is not CPU-to-CPU ordering: use the
//!   intent-named primitives of [`crate::barrier`] for that; they are built
//!   on [`fence`] here under `loom`.
//! - [`UnsafeCell`] has `loom`'s closure API (`with` / `with_mut`) in both
//!   builds, so `loom` can see the start and end of every access to
//!   non-atomic shared memory (a WQE slot, a CQE body).
//! - Under `loom`, constructors are not `const` and every object must be
//!   created inside `loom::model`; keep modelled capacities tiny.

#[cfg(all(not(loom), target_has_atomic = "64"))]
pub use core::sync::atomic::AtomicU64;
#[cfg(not(loom))]
pub use core::sync::atomic::{
    fence, AtomicBool, AtomicU16, AtomicU32, AtomicU8, AtomicUsize, Ordering,
};

#[cfg(loom)]
pub use loom::sync::atomic::{
    fence, AtomicBool, AtomicU16, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
};

#[cfg(loom)]
pub use loom::cell::UnsafeCell;

/// Signals a busy-wait loop to the CPU (`pause` on x86-64, `yield` /
/// `isb` on aarch64); under `loom` it yields to the model's scheduler, which
/// a spinning model thread must do for the model to terminate.
#[inline(always)]
pub fn spin_loop() {
    #[cfg(not(loom))]
    core::hint::spin_loop();
    #[cfg(loom)]
    loom::hint::spin_loop();
}

/// A cell for non-atomic memory shared with another agent (a device, the
/// emulated device, a `loom` model thread), with `loom`'s access API.
///
/// Outside `loom` this is a transparent wrapper around
/// [`core::cell::UnsafeCell`] that hands the closure a raw pointer; it costs
/// nothing. Under `loom` it is `loom::cell::UnsafeCell`, which records each
/// access and panics with "Causality violation" when two accesses are not
/// ordered by a happens-before edge.
///
/// The closures receive raw pointers: dereferencing them is the caller's
/// `unsafe`, with the usual aliasing rules (no `with_mut` overlapping any
/// other access).
#[cfg(not(loom))]
#[derive(Debug, Default)]
#[repr(transparent)]
pub struct UnsafeCell<T: ?Sized>(core::cell::UnsafeCell<T>);

#[cfg(not(loom))]
impl<T> UnsafeCell<T> {
    /// Wraps `data`.
    #[inline(always)]
    pub const fn new(data: T) -> Self {
        Self(core::cell::UnsafeCell::new(data))
    }

    /// Unwraps the value.
    #[inline(always)]
    pub fn into_inner(self) -> T {
        self.0.into_inner()
    }
}

#[cfg(not(loom))]
impl<T: ?Sized> UnsafeCell<T> {
    /// Runs `f` with a pointer for reading the contents.
    #[inline(always)]
    pub fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        f(self.0.get())
    }

    /// Runs `f` with a pointer for writing the contents.
    #[inline(always)]
    pub fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}

#[cfg(test)]
#[cfg(not(loom))]
mod tests {
    use super::*;

    #[test]
    fn unsafe_cell_round_trip() {
        let cell = UnsafeCell::new([0u32; 4]);
        // SAFETY: the cell is local to this thread and no other pointer to
        // its contents is live during either closure.
        cell.with_mut(|p| unsafe { (*p)[2] = 7 });
        // SAFETY: as above.
        let v = cell.with(|p| unsafe { (*p)[2] });
        assert_eq!(v, 7);
        assert_eq!(cell.into_inner(), [0, 0, 7, 0]);
    }

    #[test]
    fn atomics_and_fence_are_core_outside_loom() {
        let a = AtomicU32::new(1);
        a.store(2, Ordering::Release);
        fence(Ordering::SeqCst);
        assert_eq!(a.load(Ordering::Acquire), 2);
        spin_loop();
    }
}
