//! Raw access to the memory the device shares with the completion queue:
//! the CQE ring, the CQ doorbell record and the CQ doorbell register in the
//! UAR page. This is the only module of `cq` with `unsafe` code; every
//! access is volatile and every block says why it is sound.
//!
//! Ordering comes from [`crate::barrier`]; the arm doorbell register is a
//! [`crate::mmio::Register`].

use crate::prm::{CqArmWord, Cqe64, CQ_CI_MASK};
use core::ptr::NonNull;

/// Offset of the 64-byte CQE proper inside a slot, and offsets of the bytes
/// polled before the barrier.
const OP_OWN: usize = 63;
const VALIDITY: usize = 62;

/// The CQE ring: `entries` slots of `stride` bytes (64 or 128); the
/// [`Cqe64`] is the last 64 bytes of a slot.
#[derive(Debug)]
pub(crate) struct CqRing {
    base: NonNull<u8>,
    /// log2 of the slot size (6 or 7).
    stride_log2: u8,
    mask: u32,
}

impl CqRing {
    /// # Safety
    /// `base` must be valid for volatile reads and writes of
    /// `entries << stride_log2` bytes for the lifetime of the ring, shared
    /// only with the device, and `entries` must be a power of two.
    pub(crate) unsafe fn new(base: NonNull<u8>, entries: u32, stride_log2: u8) -> Self {
        Self {
            base,
            stride_log2,
            mask: entries - 1,
        }
    }

    #[inline(always)]
    fn slot_ptr(&self, slot: usize) -> *mut u8 {
        let slot = slot & self.mask as usize;
        // In bounds: `slot <= mask` and the ring holds `mask + 1` slots of
        // `1 << stride_log2` bytes (constructor contract). Plain address
        // arithmetic on an in-bounds offset.
        self.base.as_ptr().wrapping_add(slot << self.stride_log2)
    }

    #[inline(always)]
    fn cqe64_ptr(&self, slot: usize) -> *mut u8 {
        // The CQE proper is the second half of a 128-byte slot.
        self.slot_ptr(slot)
            .wrapping_add((1usize << self.stride_log2) - Cqe64::SIZE)
    }

    /// Reads the `op_own` byte of a slot once (volatile).
    #[inline(always)]
    pub(crate) fn read_op_own(&self, slot: usize) -> u8 {
        // SAFETY: in bounds of the ring (slot_ptr masks the slot), valid for
        // reads by the constructor contract; u8 has no alignment need.
        unsafe { self.cqe64_ptr(slot).add(OP_OWN).read_volatile() }
    }

    /// Reads the validity iteration count byte of a slot once (volatile).
    #[inline(always)]
    pub(crate) fn read_validity(&self, slot: usize) -> u8 {
        // SAFETY: as in `read_op_own`.
        unsafe { self.cqe64_ptr(slot).add(VALIDITY).read_volatile() }
    }

    /// Copies the 64-byte CQE of a slot out of device-written memory, once.
    /// The caller has checked ownership and issued the from-device barrier.
    #[inline(always)]
    pub(crate) fn copy_cqe(&self, slot: usize) -> Cqe64 {
        // SAFETY: 64 in-bounds bytes (constructor contract); `Cqe64` has
        // alignment 1 and every bit pattern is valid (zerocopy FromBytes).
        unsafe { self.cqe64_ptr(slot).cast::<Cqe64>().read_volatile() }
    }

    /// Copies the first 64 bytes of a 128-byte slot (inline-scattered data).
    /// Returns zeros for 64-byte slots.
    #[inline(always)]
    pub(crate) fn copy_first_half(&self, slot: usize) -> [u8; 64] {
        if self.stride_log2 == 6 {
            return [0; 64];
        }
        // SAFETY: the slot is 128 bytes, its first 64 are in bounds;
        // `[u8; 64]` has alignment 1.
        unsafe { self.slot_ptr(slot).cast::<[u8; 64]>().read_volatile() }
    }

    /// Overwrites the `op_own` byte of a consumed slot (compressed-session
    /// invalidation, DPDK `MLX5_CQE_INVALIDATE`).
    #[inline(always)]
    pub(crate) fn write_op_own(&self, slot: usize, value: u8) {
        // SAFETY: in bounds, valid for writes (constructor contract). The
        // device does not write the slot: it lies before the consumer index
        // the doorbell record will publish.
        unsafe { self.cqe64_ptr(slot).add(OP_OWN).write_volatile(value) }
    }
}

/// The CQ doorbell record: two big-endian 32-bit words the device reads
/// (`MLX5_CQ_SET_CI` at +0, `MLX5_CQ_ARM_DB` at +4).
#[derive(Debug)]
pub(crate) struct DbRec {
    ptr: NonNull<u32>,
}

impl DbRec {
    /// # Safety
    /// `ptr` must be 4-byte aligned and valid for volatile writes of 8 bytes
    /// for the lifetime of the record.
    pub(crate) unsafe fn new(ptr: NonNull<u32>) -> Self {
        Self { ptr }
    }

    /// Publishes the consumer index: `dbrec[0] = BE32(ci & 0xffffff)`.
    #[inline(always)]
    pub(crate) fn set_ci(&self, ci: u32) {
        let value = (ci & CQ_CI_MASK).to_be();
        // SAFETY: aligned and valid for writes (constructor contract).
        unsafe { self.ptr.as_ptr().write_volatile(value) }
    }

    /// Records the last arm command: `dbrec[1] = BE32(word)`.
    #[inline(always)]
    pub(crate) fn set_arm(&self, word: CqArmWord) {
        let value = u32::from_ne_bytes(zerocopy::transmute!(word));
        // SAFETY: word 1 of the 8-byte record; aligned and valid for writes.
        unsafe { self.ptr.as_ptr().add(1).write_volatile(value) }
    }
}

// SAFETY: the ring and the record are plain device-shared memory
// owned by one `Cq`; moving that owner to another thread is sound because
// all access goes through `&mut Cq` (the type is not `Sync`).
unsafe impl Send for CqRing {}
// SAFETY: as for `CqRing`.
unsafe impl Send for DbRec {}
