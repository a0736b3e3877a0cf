//! A BlueFlame register shared by several send queues (several threads):
//! a spinlock over the register and its toggle state.
//!
//! libmlx5 hands a QP a *shared* bfreg when it runs out of low-latency
//! ones (`MLX5_NUM_LOW_LAT_UUARS`, PRM-FACTS §7): then every doorbell takes
//! the bfreg's spinlock around the 8-byte or BlueFlame write, flushes the
//! write-combining buffer *inside* the lock and toggles the half before
//! unlocking (rdma-core `qp.c` `post_send_db`: `mmio_wc_spinlock`, copy,
//! `mmio_flush_writes`, `bf->offset ^= bf->buf_size`, `mmio_wc_spinunlock`).
//! Without the lock two CPUs could copy into the same half at once and the
//! device would take a WQE made of both; without the flush inside the lock
//! the second CPU's write-combined stores could reach the device before the
//! first CPU's.
//!
//! [`SharedBlueFlame`] is that handle: `Sync`, built from a [`Register`]
//! over one bfreg, its lock and toggle taken from the [`crate::sync`] shim so
//! that `loom` models it (`core/tests/loom_sq.rs`). One call does the whole
//! locked sequence, so the flush cannot be left outside the lock.
//!
//! This module holds `unsafe` for the interior mutability of the locked
//! state and the register writes without range tests; each block says why.

use crate::barrier;
use crate::mmio::{BfHalves, Register};
use crate::prm::{SEND_WQE_BB, SEND_WQE_DS};
use crate::sync::{AtomicBool, Ordering, UnsafeCell};

use super::Wqebb;

/// The register and the toggle, guarded by the lock.
#[derive(Debug)]
struct Locked {
    /// The register's halves and the one the next write uses (rdma-core
    /// `bf->reg + bf->offset`).
    halves: BfHalves,
    /// Size of one half (rdma-core `bf->buf_size`); 0 without BlueFlame.
    buf_size: usize,
}

/// A doorbell/BlueFlame register shared between threads, behind a spinlock
/// (see the module documentation).
#[derive(Debug)]
pub struct SharedBlueFlame {
    /// The spinlock: `true` while a thread writes the register.
    locked: AtomicBool,
    state: UnsafeCell<Locked>,
    /// A fault a `loom` model injects to show that it is not vacuous.
    #[cfg(loom)]
    fault: LoomFault,
    /// The write-combining buffer of the `loom` model: `true` between a
    /// copy and its flush (the stores may not have left the CPU yet).
    #[cfg(loom)]
    wc_pending: AtomicBool,
    /// One `loom` cell per half, written around each copy into it.
    #[cfg(loom)]
    halves: [UnsafeCell<()>; 2],
}

/// A fault a `loom` model injects into [`SharedBlueFlame`] (test builds
/// only: `cfg(loom)`).
#[cfg(loom)]
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoomFault {
    /// The real sequence.
    None,
    /// No lock at all.
    NoLock,
    /// The write-combining flush after the unlock instead of before.
    FlushAfterUnlock,
}

// SAFETY: the state behind the `UnsafeCell` (the register and the toggle)
// is only reached by the thread that holds the spinlock (`with_lock`), whose
// Acquire / Release pair orders one holder's accesses before the next's;
// `Register` is `Send`, so the state may be used from any thread.
unsafe impl Sync for SharedBlueFlame {}

impl SharedBlueFlame {
    /// Wraps one bfreg: `reg` spans both halves of `buf_size` bytes (8 bytes
    /// if `buf_size` is 0), and the first write uses the second half if
    /// `second_half` (rdma-core's `bf->offset`, 0 for a fresh bfreg).
    /// `None` if `buf_size` is not a multiple of 64 or the register is too
    /// short for both halves.
    pub fn new(reg: Register, buf_size: usize, second_half: bool) -> Option<Self> {
        let halves = BfHalves::new(reg, buf_size, second_half)?;
        Some(Self {
            locked: AtomicBool::new(false),
            state: UnsafeCell::new(Locked { halves, buf_size }),
            #[cfg(loom)]
            fault: LoomFault::None,
            #[cfg(loom)]
            wc_pending: AtomicBool::new(false),
            #[cfg(loom)]
            halves: [UnsafeCell::new(()), UnsafeCell::new(())],
        })
    }

    /// [`SharedBlueFlame::new`] with a fault injected, for `loom` models.
    #[cfg(loom)]
    #[doc(hidden)]
    pub fn with_loom_fault(
        reg: Register,
        buf_size: usize,
        second_half: bool,
        fault: LoomFault,
    ) -> Option<Self> {
        let mut bf = Self::new(reg, buf_size, second_half)?;
        bf.fault = fault;
        Some(bf)
    }

    /// Rings the 8-byte doorbell (the first 8 bytes of the last WQE's control
    /// segment) in the current half, under the lock; returns the offset it
    /// used. The caller has written the doorbell record before.
    pub fn doorbell(&self, ctrl: [u8; 8]) -> usize {
        self.with_lock(|s| {
            s.halves.write64(ctrl);
            true
        })
        .unwrap_or(0)
    }

    /// Copies the WQE `wqe` (whole WQEBBs, `ds` DS of it in use) into the
    /// current half as a BlueFlame write, under the lock; returns the offset
    /// it used, or `None` (nothing written) if the WQE does not fit a half.
    pub fn blueflame(&self, wqe: &[Wqebb], ds: u8) -> Option<usize> {
        let chunks = usize::from(ds).div_ceil(SEND_WQE_BB / SEND_WQE_DS);
        if chunks == 0 || chunks > wqe.len() {
            return None;
        }
        self.with_lock(|s| {
            if usize::from(ds) * SEND_WQE_DS > s.buf_size {
                return false;
            }
            for (i, chunk) in wqe.iter().take(chunks).enumerate() {
                // SAFETY: `i < chunks` and `chunks * 64 <= buf_size`
                // (`ds * 16 <= buf_size`, tested above, with `buf_size` a
                // multiple of 64, checked by `BfHalves::new`): the chunk
                // lies inside the current half.
                unsafe { s.halves.write_chunk64(i, &chunk.0) };
            }
            true
        })
    }

    /// The offset of the half the next write uses (takes the lock).
    pub fn offset(&self) -> usize {
        self.with_lock(|_| false).unwrap_or(0)
    }

    /// rdma-core's locked doorbell sequence around `write` (which returns
    /// whether it wrote): lock, [`barrier::wc_start`], `write`,
    /// [`barrier::wc_flush`], toggle, unlock. Returns the offset written,
    /// or `None` if `write` wrote nothing (no flush, no toggle).
    #[inline]
    fn with_lock(&self, write: impl FnOnce(&Locked) -> bool) -> Option<usize> {
        #[cfg(loom)]
        let lock = self.fault != LoomFault::NoLock;
        #[cfg(not(loom))]
        let lock = true;
        if lock {
            // Acquire: pairs with the Release store of the previous holder's
            // unlock below, so its writes and toggle happen before ours.
            while self
                .locked
                .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
            {
                crate::sync::spin_loop();
            }
        }
        #[cfg(loom)]
        assert!(
            !lock || !self.wc_pending.load(Ordering::Relaxed),
            "BlueFlame copy started before the previous holder's WC flush"
        );
        // The doorbell record (written by the caller) before the register
        // write (rdma-core `mmio_wc_spinlock` = lock + `mmio_wc_start`).
        barrier::wc_start();
        let wrote = self.state.with_mut(|p| {
            // SAFETY: we hold the lock (or a `loom` model removed it to show
            // the race), so no other reference to the state is live.
            let s = unsafe { &mut *p };
            let at = s.halves.offset();
            #[cfg(loom)]
            let half = &self.halves[usize::from(at != 0)];
            #[cfg(loom)]
            let wrote = half.with_mut(|_| write(s));
            #[cfg(not(loom))]
            let wrote = write(s);
            if !wrote {
                return None;
            }
            #[cfg(loom)]
            self.wc_pending.store(true, Ordering::Relaxed);
            #[cfg(loom)]
            let flush_now = self.fault != LoomFault::FlushAfterUnlock;
            #[cfg(not(loom))]
            let flush_now = true;
            if flush_now {
                Self::flush(self);
            }
            // Alternate halves (rdma-core `bf->offset ^= bf->buf_size`).
            s.halves.toggle();
            Some(at)
        });
        if lock {
            // Release: pairs with the Acquire of the next holder's
            // compare_exchange above.
            self.locked.store(false, Ordering::Release);
        }
        #[cfg(loom)]
        if wrote.is_some() && self.fault == LoomFault::FlushAfterUnlock {
            Self::flush(self);
        }
        wrote
    }

    /// The write-combining flush: the copy leaves the CPU before the lock
    /// is handed on (rdma-core `mmio_flush_writes` inside the lock).
    #[inline(always)]
    fn flush(&self) {
        barrier::wc_flush();
        #[cfg(loom)]
        self.wc_pending.store(false, Ordering::Relaxed);
    }
}
