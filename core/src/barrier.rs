//! Memory-ordering primitives for talking to the device, named by intent.
//!
//! This is the one file that knows which instruction each ordering needs on
//! each architecture. Call sites say *why* they order (`to_device`,
//! `from_device`, `wc_start`, …); this file says *how*. The contracts and the
//! instructions follow rdma-core's `util/udma_barrier.h`, with DPDK's
//! `rte_io_*` and UCX's `ucs_memory_*` fences as the second and third
//! opinions (PRM-FACTS §14 has the full table).
//!
//! # The two streams being ordered
//!
//! Every primitive orders the CPU's own accesses as the *device* sees them
//! over PCIe, not as another CPU sees them:
//!
//! - host memory the device reads by DMA (WQEs, doorbell records) or writes by
//!   DMA (CQEs), mapped write-back and cache-coherent;
//! - the UAR page (doorbell / BlueFlame registers), mapped either
//!   write-combining (WC, BlueFlame-capable) or uncached (UC/NC,
//!   `MLX5_SHUT_UP_BF`, DevX `MLX5DV_UAR_ALLOC_TYPE_NC`).
//!
//! # The sequences (PRM-FACTS §7, §9, §14)
//!
//! | sequence | steps |
//! | --- | --- |
//! | post send, WC UAR | write WQEs → [`to_device`] → SQ dbrec → [`wc_start`] → 8 B doorbell or BlueFlame copy → [`wc_flush`] → toggle BlueFlame half |
//! | post send, UC UAR | write WQEs → [`to_device`] → SQ dbrec → [`mmio_write_order`] → 8 B doorbell |
//! | post receive | write receive WQEs → [`to_device`] → RQ/SRQ dbrec |
//! | poll CQ | read ownership byte → [`from_device`] → copy the CQE out → … → [`from_device_done`] → CQ dbrec `set_ci` |
//! | arm CQ | CQ dbrec `arm` word → [`wc_start`] → 8 B write to `UAR + 0x20` → [`wc_flush`] |
//!
//! Each `Release` here names its `Acquire`: the device's side of every
//! handshake is written down in [`peer`], which the emulated device and the
//! `loom` models use to play the hardware.
//!
//! # Instructions
//!
//! | primitive | x86-64 | aarch64 | other (fallback) | `cfg(loom)` |
//! | --- | --- | --- | --- | --- |
//! | [`to_device`] | none (compiler barrier) | `dmb oshst` | `fence(SeqCst)` | `fence(Release)` |
//! | [`from_device`] | none (compiler barrier) | `dmb oshld` | `fence(SeqCst)` | `fence(Acquire)` |
//! | [`from_device_done`] | none (compiler barrier) | `dmb oshld` | `fence(SeqCst)` | `fence(Release)` |
//! | [`mmio_write_order`] | none (compiler barrier) | `dmb oshst` | `fence(SeqCst)` | `fence(Release)` |
//! | [`wc_start`] | `sfence` | `dsb st` | `fence(SeqCst)` | `fence(Release)` |
//! | [`wc_flush`] | `sfence` | `dsb st` | `fence(SeqCst)` | `fence(Release)` |
//!
//! Miri cannot execute inline assembly, so under `cfg(miri)` every primitive
//! is the fallback's `fence(SeqCst)`: Miri checks the code around the
//! barriers, not the choice of instruction.
//!
//! # The fallback
//!
//! On an architecture not listed, every primitive is
//! `core::sync::atomic::fence(SeqCst)`, the strongest ordering Rust can
//! express portably. That is enough for a CPU peer and on architectures whose
//! full fence also orders device accesses (`sync` on POWER), but it is
//! **not** proven for real devices everywhere: RISC-V, for one, needs the I/O
//! bits (`fence ow,ow` / `fence ir,ir`, as rdma-core writes them). Add an
//! arm here before trusting a new architecture on hardware.
//!
//! # A CPU playing the device
//!
//! On x86-64 four of the primitives are compiler barriers only: the hardware
//! (total store order, in-order loads from write-back memory) does the rest.
//! That is exactly right for a PCIe device. A second CPU thread that plays
//! the device (the emulated device of `mlx5dp-setup`) gets the same hardware
//! guarantees, but the Rust memory model only promises them through atomics;
//! such a peer should use the [`peer`] fences, and models that must *prove*
//! a handshake run under `loom`, where every primitive is a real fence.

/// Orders the CPU's writes to host memory that the device will DMA-read
/// (WQEs, receive WQEs) before the following write that publishes them (the
/// doorbell record).
///
/// Call it after the last byte of the last WQE of a batch and before the
/// doorbell-record write: without it the device may see the new producer
/// index and DMA-read a stale or half-written WQE.
///
/// - **x86-64**: no instruction; a compiler barrier (`compiler_fence(Release)`:
///   no earlier read or write moves past a later write). Stores to
///   write-back memory already reach the device in program order (Intel SDM
///   vol. 3A, "Memory Ordering in P6 and More Recent Processor Families":
///   "writes are not reordered with other writes").
/// - **aarch64**: `dmb oshst`: earlier stores are observed before later stores
///   by every observer in the outer-shareable domain, which includes the PCIe
///   root complex. (rdma-core used `dsb st` before 2024, commit 1ec72764a.)
/// - **other**: `fence(SeqCst)` (see the module doc).
/// - **loom**: `fence(Release)`; pairs with [`peer::acquire_doorbell`].
///
/// Corresponds to rdma-core `udma_to_device_barrier`, DPDK `rte_io_wmb`,
/// UCX `ucs_memory_cpu_store_fence` (which uses `dmb ishst`, the
/// inner-shareable domain, on aarch64), Linux `dma_wmb`.
///
/// It orders *normal* stores to *normal* memory only. Non-temporal stores
/// (`movnt*`) to a WQE would need an `sfence` (use [`wc_start`]).
#[inline(always)]
pub fn to_device() {
    imp::to_device();
}

/// After the CPU has seen a device-written ownership or validity byte (CQE
/// `op_own` owner bit, enhanced-compression `validity_iteration_count`),
/// orders that read before every following read of the rest of the entry.
///
/// Without it the CPU may read the CQE body from before the device's write
/// and combine it with the new owner bit: a completion with stale fields.
///
/// - **x86-64**: no instruction; a compiler barrier
///   (`compiler_fence(Acquire)`: no later read or write moves before an
///   earlier read).
///
///   *Decision: compiler barrier, not `lfence`.* rdma-core's
///   `udma_from_device_barrier` emits `lfence`; DPDK (`rte_io_rmb`, and
///   `rte_atomic_thread_fence(acquire)` in `check_cqe`), UCX
///   (`ucs_memory_cpu_load_fence`) and Linux (`dma_rmb`, since 2014 commit
///   1077fa36f23e) emit nothing. The CQ lives in write-back, cache-coherent
///   host memory and the device's DMA writes are coherent stores; x86 does
///   not reorder loads from write-back memory with other loads (Intel SDM
///   vol. 3A, same section: "reads are not reordered with other reads"), so the
///   body loads cannot pass the owner load. `lfence` only adds ordering for
///   weakly ordered loads (non-temporal `movntdqa` from WC memory) and
///   speculation control, neither of which applies, and it costs tens of
///   cycles per poll by waiting for every earlier instruction to complete.
///   Consequence for the rest of the core: CQE copies and the SIMD mini-CQE
///   decompression must use ordinary loads (`movdqu`, not `movntdqa`).
/// - **aarch64**: `dmb oshld`: earlier loads complete before later loads and
///   stores, for the outer-shareable domain (rdma-core; was `dsb ld` before
///   2024). DPDK's acquire fence and UCX use `dmb ishld`; `osh` is the
///   conservative choice for a DMA writer.
/// - **other**: `fence(SeqCst)`.
/// - **loom**: `fence(Acquire)`; pairs with [`peer::release_entry`].
///
/// Corresponds to rdma-core `udma_from_device_barrier`, DPDK `rte_io_rmb`,
/// UCX `ucs_memory_cpu_load_fence`, Linux `dma_rmb`.
#[inline(always)]
pub fn from_device() {
    imp::from_device();
}

/// Orders the CPU's reads of device-written entries (CQEs it has consumed)
/// before the following write that hands their slots back to the device (the
/// CQ doorbell record `set_ci`).
///
/// Once `set_ci` moves past a slot the device may overwrite it; a read of
/// that CQE still in flight would then return the *next* completion's bytes.
/// The reads are done in practice long before, and rdma-core
/// (`update_cons_index`) has no barrier here; we keep the ordering explicit
/// because on aarch64 a `dmb …st` does not order earlier loads.
///
/// - **x86-64**: no instruction; a compiler barrier
///   (`compiler_fence(Release)`). x86 never reorders a store before an
///   earlier load (Intel SDM vol. 3A, "Memory Ordering in P6 and More Recent
///   Processor Families": "writes are not reordered with older reads").
/// - **aarch64**: `dmb oshld`: earlier loads complete before later loads
///   *and stores* (Arm ARM, DMB with the LD type).
/// - **other**: `fence(SeqCst)`.
/// - **loom**: `fence(Release)`; pairs with [`peer::acquire_consumer_index`].
///
/// Corresponds to the read half of Linux `dma_mb`; DPDK `rte_io_rmb` where
/// it precedes the CQ doorbell; no rdma-core or UCX primitive.
#[inline(always)]
pub fn from_device_done() {
    imp::from_device_done();
}

/// Orders earlier writes to host memory (the doorbell record) before a
/// following write to an **uncached** (UC/NC-mapped) doorbell register.
///
/// Use it for the 8-byte doorbell when the UAR is not write-combining
/// (`MLX5_SHUT_UP_BF`, DevX NC UAR, `bf.size == 0`); use [`wc_start`] when it
/// is.
///
/// - **x86-64**: no instruction; a compiler barrier
///   (`compiler_fence(Release)`). UC accesses are strongly ordered and stores
///   are not reordered with other stores (Intel SDM vol. 3A, memory ordering
///   and "Methods of Caching Available"), so
///   the doorbell record is visible before the doorbell TLP. Linux `writel`
///   is a plain `mov` on x86 for the same reason.
/// - **aarch64**: `dmb oshst`: the normal-memory store completes, for the
///   outer-shareable domain, before the Device-memory store (Linux `writel`
///   = `__iowmb()` = `dmb oshst`, then `str`).
/// - **other**: `fence(SeqCst)`.
/// - **loom**: `fence(Release)`; pairs with [`peer::acquire_doorbell`].
///
/// Corresponds to DPDK `rte_io_wmb` before `rte_write64_relaxed` (DPDK's
/// mlx5 Tx uses the stronger `rte_wmb`), Linux `writel`'s implied barrier.
/// rdma-core always uses [`wc_start`] (`mmio_wc_start`) here, mapping or not.
#[inline(always)]
pub fn mmio_write_order() {
    imp::mmio_write_order();
}

/// Orders earlier writes (the doorbell record, and any other MMIO write)
/// before a following write to **write-combining** MMIO: the 8-byte
/// doorbell or the BlueFlame copy into a WC-mapped UAR, or the CQ arm
/// doorbell at `UAR + 0x20`.
///
/// WC stores are weakly ordered: without it the doorbell TLP may reach the
/// device before the doorbell record is visible, and the device then fetches
/// an old producer index (or, with BlueFlame, validates the WQE against it).
///
/// - **x86-64**: `sfence`: every earlier store, including WC stores still in
///   a fill buffer, is globally visible before any later store.
/// - **aarch64**: `dsb st`: earlier stores complete before any later
///   instruction executes; needed because the WC mapping (Normal
///   Non-cacheable) and the doorbell record (Normal write-back) are
///   different memory types.
/// - **other**: `fence(SeqCst)`.
/// - **loom**: `fence(Release)`; pairs with [`peer::acquire_doorbell`].
///
/// Corresponds to rdma-core `mmio_wc_start` (= `mmio_flush_writes`), DPDK
/// `rte_wmb`, UCX `ucs_memory_bus_store_fence` (`dmb oshst` on aarch64).
#[inline(always)]
pub fn wc_start() {
    imp::wc_barrier();
}

/// Makes write-combining stores (the doorbell or BlueFlame copy just
/// written) leave the CPU's WC buffer before the next step: toggling the
/// BlueFlame half, releasing a lock that guards a shared bfreg, or the next
/// doorbell.
///
/// Without it, two consecutive BlueFlame writes (possibly from two CPUs
/// taking turns under a lock) may combine or reach the device out of order,
/// and the device may see a torn WQE in one half.
///
/// - **x86-64**: `sfence`: drains the WC fill buffers.
/// - **aarch64**: `dsb st`: the WC stores complete before later
///   instructions. (UCX uses `dmb oshst`, or DGH `hint #6` as a flush hint
///   only; rdma-core's `dsb st` is the conservative one.)
/// - **other**: `fence(SeqCst)`.
/// - **loom**: `fence(Release)`.
///
/// Corresponds to rdma-core `mmio_flush_writes`, DPDK `rte_wmb` after the
/// doorbell when the UAR is WC, UCX `ucs_memory_cpu_wc_fence`.
#[inline(always)]
pub fn wc_flush() {
    imp::wc_barrier();
}

// ---------------------------------------------------------------------------
// The instructions, one module per architecture. Exactly one `imp` exists
// for any configuration; the public functions above only delegate to it.
// rdma-core uses one instruction for `mmio_wc_start` and `mmio_flush_writes`
// (the first is defined as the second), hence the single `wc_barrier`.
// ---------------------------------------------------------------------------

/// x86-64 (total store order): three compiler barriers and `sfence`.
#[cfg(all(not(loom), not(miri), target_arch = "x86_64"))]
mod imp {
    use core::arch::asm;
    use core::sync::atomic::{compiler_fence, Ordering};

    #[inline(always)]
    pub(super) fn to_device() {
        compiler_fence(Ordering::Release);
    }

    #[inline(always)]
    pub(super) fn from_device() {
        compiler_fence(Ordering::Acquire);
    }

    #[inline(always)]
    pub(super) fn from_device_done() {
        compiler_fence(Ordering::Release);
    }

    #[inline(always)]
    pub(super) fn mmio_write_order() {
        compiler_fence(Ordering::Release);
    }

    #[inline(always)]
    pub(super) fn wc_barrier() {
        // SAFETY: `sfence` exists on every x86-64 CPU (SSE is part of the
        // base ISA) and does not use the SSE register state, so it is also
        // valid on soft-float targets such as x86_64-unknown-none. It reads
        // and writes no register or flag and touches no stack
        // (`nostack, preserves_flags`); leaving out `nomem` makes it a
        // compiler memory barrier as well, like C's `"memory"` clobber.
        unsafe {
            asm!("sfence", options(nostack, preserves_flags));
        }
    }
}

/// aarch64: `dmb osh{st,ld}` for normal memory, `dsb st` around WC MMIO.
#[cfg(all(not(loom), not(miri), target_arch = "aarch64"))]
mod imp {
    use core::arch::asm;

    #[inline(always)]
    pub(super) fn to_device() {
        // SAFETY: `dmb oshst` is a data memory barrier available on every
        // Armv8-A CPU: it reads and writes no register or flag, touches no
        // stack and cannot fault. Without `nomem` it is also a compiler
        // memory barrier.
        unsafe {
            asm!("dmb oshst", options(nostack, preserves_flags));
        }
    }

    #[inline(always)]
    pub(super) fn from_device() {
        // SAFETY: `dmb oshld`: as for `dmb oshst` above, a barrier with no
        // register, flag, stack or fault effect; a compiler memory barrier
        // too because `nomem` is absent.
        unsafe {
            asm!("dmb oshld", options(nostack, preserves_flags));
        }
    }

    #[inline(always)]
    pub(super) fn from_device_done() {
        // SAFETY: `dmb oshld`, as in `from_device`.
        unsafe {
            asm!("dmb oshld", options(nostack, preserves_flags));
        }
    }

    #[inline(always)]
    pub(super) fn mmio_write_order() {
        // SAFETY: `dmb oshst`, as in `to_device`.
        unsafe {
            asm!("dmb oshst", options(nostack, preserves_flags));
        }
    }

    #[inline(always)]
    pub(super) fn wc_barrier() {
        // SAFETY: `dsb st` is a data synchronisation barrier available on
        // every Armv8-A CPU: no register, flag or stack effect, no fault; a
        // compiler memory barrier too because `nomem` is absent.
        unsafe {
            asm!("dsb st", options(nostack, preserves_flags));
        }
    }
}

/// Any other architecture, and Miri (which cannot execute inline assembly):
/// the strongest portable fence everywhere. See "The fallback" above.
#[cfg(all(
    not(loom),
    any(miri, not(any(target_arch = "x86_64", target_arch = "aarch64")))
))]
mod imp {
    use core::sync::atomic::{fence, Ordering};

    #[inline(always)]
    pub(super) fn to_device() {
        fence(Ordering::SeqCst);
    }

    #[inline(always)]
    pub(super) fn from_device() {
        fence(Ordering::SeqCst);
    }

    #[inline(always)]
    pub(super) fn from_device_done() {
        fence(Ordering::SeqCst);
    }

    #[inline(always)]
    pub(super) fn mmio_write_order() {
        fence(Ordering::SeqCst);
    }

    #[inline(always)]
    pub(super) fn wc_barrier() {
        fence(Ordering::SeqCst);
    }
}

/// `loom`: each primitive is the `loom` fence of its contract, so the models
/// fail if a call is missing or has the wrong direction.
#[cfg(loom)]
mod imp {
    use crate::sync::{fence, Ordering};

    #[inline(always)]
    pub(super) fn to_device() {
        fence(Ordering::Release);
    }

    #[inline(always)]
    pub(super) fn from_device() {
        fence(Ordering::Acquire);
    }

    #[inline(always)]
    pub(super) fn from_device_done() {
        fence(Ordering::Release);
    }

    #[inline(always)]
    pub(super) fn mmio_write_order() {
        fence(Ordering::Release);
    }

    #[inline(always)]
    pub(super) fn wc_barrier() {
        fence(Ordering::Release);
    }
}

/// The device's side of each handshake, for code that *plays* the device on
/// a CPU: the emulated device of `mlx5dp-setup` and the `loom` models.
///
/// The real data path never calls these. The hardware gives these orderings
/// itself (it reads the doorbell record before it DMA-reads the WQEs it
/// announces; it writes a CQE's body before, or in the same TLP as, its
/// ownership byte; it reads `set_ci` before it reuses a slot). A CPU thread
/// standing in for it must ask for them with real fences, and naming them
/// here lets every `Release` in [`crate::barrier`] name its `Acquire`.
///
/// Outside `loom` they are `core::sync::atomic::fence`; under `loom`, the
/// `loom` fence of the same ordering.
pub mod peer {
    use crate::sync::{fence, Ordering};

    /// The device has read a producer index (doorbell record or doorbell
    /// register value); orders that read before its reads of the WQEs the
    /// index announces.
    ///
    /// `Acquire`; pairs with [`to_device`](super::to_device) (and with
    /// [`wc_start`](super::wc_start) / [`mmio_write_order`](super::mmio_write_order)
    /// for the doorbell register).
    #[inline(always)]
    pub fn acquire_doorbell() {
        fence(Ordering::Acquire);
    }

    /// The device has written an entry's body (a CQE); orders those writes
    /// before its write of the entry's ownership/validity byte.
    ///
    /// `Release`; pairs with [`from_device`](super::from_device).
    #[inline(always)]
    pub fn release_entry() {
        fence(Ordering::Release);
    }

    /// The device has read a consumer index (CQ doorbell record `set_ci`);
    /// orders that read before it overwrites the slots the index frees.
    ///
    /// `Acquire`; pairs with [`from_device_done`](super::from_device_done).
    #[inline(always)]
    pub fn acquire_consumer_index() {
        fence(Ordering::Acquire);
    }
}

#[cfg(test)]
#[cfg(not(loom))]
mod tests {
    use super::*;
    use crate::mmio::DeviceWord;
    use crate::sync::UnsafeCell;

    /// The post-send sequence on ordinary memory, single-threaded: the
    /// barriers must not disturb the values (and Miri checks the accesses).
    #[test]
    fn post_and_poll_sequences_in_program_order() {
        let wqe = UnsafeCell::new([0u8; 64]);
        let snd = DeviceWord::new(0u32);
        // SAFETY: single-threaded; no other pointer to the cell is live.
        wqe.with_mut(|p| unsafe { (*p)[3] = 0x0a });
        to_device();
        snd.write_be(1);
        mmio_write_order();
        wc_start();
        wc_flush();
        assert_eq!(snd.read_be(), 1);

        let op_own = DeviceWord::new(0xd0u8);
        let owner = op_own.read() & 1;
        from_device();
        // SAFETY: as above.
        let opcode = wqe.with(|p| unsafe { (*p)[3] });
        from_device_done();
        assert_eq!((owner, opcode), (0, 0x0a));

        peer::acquire_doorbell();
        peer::release_entry();
        peer::acquire_consumer_index();
    }
}
