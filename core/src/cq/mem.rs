//! Raw access to the memory the device shares with the completion queue:
//! the CQE ring, the CQ doorbell record and the CQ doorbell register in the
//! UAR page. This is the only module of `cq` with `unsafe` code; every
//! access is volatile and every block says why it is sound.
//!
//! Ordering comes from [`crate::barrier`]; the arm doorbell register is a
//! [`crate::mmio::Register`].

use crate::prm::{CqArmWord, Cqe64, CQ_CI_MASK};
use core::ptr::NonNull;

/// Alignment the ring base must have: the width of the widest load
/// [`CqRing::copy_cqe`] issues. (mlx5dv CQ buffers are page-aligned.)
pub(crate) const RING_ALIGN: usize = 16;

/// One load of [`CqRing::copy_cqe`]: a 16-byte vector (`movdqa`).
#[cfg(target_arch = "x86_64")]
type Chunk = core::arch::x86_64::__m128i;
/// One load of [`CqRing::copy_cqe`]: a 16-byte vector (`ldr q`).
#[cfg(target_arch = "aarch64")]
type Chunk = core::arch::aarch64::uint8x16_t;
/// One load of [`CqRing::copy_cqe`]: 8 bytes elsewhere.
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
type Chunk = u64;
const CHUNKS: usize = Cqe64::SIZE / core::mem::size_of::<Chunk>();

/// Offset of the 64-byte CQE proper inside a slot, and offsets of the bytes
/// polled before the barrier.
const OP_OWN: usize = 63;
const VALIDITY: usize = 62;

/// The CQE ring: `entries` slots of `stride` bytes (64 or 128); the
/// [`Cqe64`] is the last 64 bytes of a slot.
///
/// `Copy` so that a burst loop can hold the geometry in registers (a local
/// copy is not reloaded after a barrier, a field of `&mut Cq` may be); every
/// copy is the same view of the same memory.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CqRing {
    base: NonNull<u8>,
    /// log2 of the slot size (6 or 7).
    stride_log2: u8,
    mask: u32,
    /// Offset of the [`Cqe64`] in a slot: 0, or 64 in a 128-byte slot.
    cqe_off: usize,
}

impl CqRing {
    /// # Safety
    /// `base` must be valid for volatile reads and writes of
    /// `entries << stride_log2` bytes for the lifetime of the ring, shared
    /// only with the device, aligned to [`RING_ALIGN`], and `entries` must
    /// be a power of two.
    pub(crate) unsafe fn new(base: NonNull<u8>, entries: u32, stride_log2: u8) -> Self {
        Self {
            base,
            stride_log2,
            mask: entries - 1,
            cqe_off: (1usize << stride_log2) - Cqe64::SIZE,
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
        // (`slot_ptr` masks `slot`.)
        // The CQE proper is the second half of a 128-byte slot.
        self.slot_ptr(slot).wrapping_add(self.cqe_off)
    }

    /// The CQE at consumer index `index` (taken modulo the ring size):
    /// the address is computed once and reused for the ownership byte, the
    /// copy and the inline half.
    #[inline(always)]
    pub(crate) fn entry(&self, index: u32) -> Entry {
        Entry {
            cqe: self.cqe64_ptr(index as usize),
        }
    }

    /// Reads the `op_own` byte of an entry once (volatile).
    #[inline(always)]
    pub(crate) fn read_op_own(&self, e: Entry) -> u8 {
        // SAFETY: in bounds of the ring (`entry` masks the index), valid for
        // reads by the constructor contract; u8 has no alignment need.
        unsafe { e.cqe.add(OP_OWN).read_volatile() }
    }

    /// Reads the validity iteration count byte of an entry once (volatile).
    #[inline(always)]
    pub(crate) fn read_validity(&self, e: Entry) -> u8 {
        // SAFETY: as in `read_op_own`.
        unsafe { e.cqe.add(VALIDITY).read_volatile() }
    }

    /// Copies the 64-byte CQE of an entry out of device-written memory,
    /// once, into `dst`. The caller has checked ownership and issued the
    /// from-device barrier.
    ///
    /// Four aligned 16-byte volatile loads (x86-64 `movdqa`, aarch64
    /// `ldr q`; elsewhere eight 8-byte loads) and as many stores: a CQE is
    /// 64-byte aligned in a ring whose base is at least
    /// [`RING_ALIGN`]-aligned (checked by [`super::Cq::from_raw_parts`]).
    /// Only the ownership byte, read before the barrier, decides; the copy
    /// is decoded, never re-checked (STYLE point 8). A plain
    /// `read_volatile` of the align-1 [`Cqe64`] would be 64 byte loads.
    #[inline(always)]
    pub(crate) fn copy_cqe_to(&self, e: Entry, dst: &mut Cqe64) {
        let src = e.cqe.cast::<Chunk>();
        let out = (dst as *mut Cqe64).cast::<Chunk>();
        for i in 0..CHUNKS {
            // SAFETY: the 64 source bytes are in bounds (constructor
            // contract) and `src + i` is `Chunk`-aligned: the slot offset is
            // a multiple of 64 and the base of `RING_ALIGN` (constructor
            // contract, checked by the CQ). `Chunk` is plain integers: any
            // bits are valid. The destination is the 64 bytes of `dst`
            // (`Cqe64` is align 1: unaligned store), and any bits are a
            // valid `Cqe64` (zerocopy `FromBytes`).
            unsafe { out.add(i).write_unaligned(src.add(i).read_volatile()) }
        }
    }

    /// Copies bytes 32–63 of the CQE of an entry (`srqn_uidx` to
    /// `op_own`: every field a plain completion is decoded from) into the
    /// same bytes of `dst`, once. Same contract and loads as
    /// [`Self::copy_cqe_to`], for half the CQE; [`Self::copy_cqe_head_to`]
    /// copies the other half if the entry turns out to need it, so each
    /// byte is still read once.
    #[inline(always)]
    pub(crate) fn copy_cqe_tail_to(&self, e: Entry, dst: &mut Cqe64) {
        self.copy_chunks(e, dst, CHUNKS / 2, CHUNKS);
    }

    /// Chunks `first..last` of the CQE of an entry into the same chunks of
    /// `dst`.
    #[inline(always)]
    fn copy_chunks(&self, e: Entry, dst: &mut Cqe64, first: usize, last: usize) {
        let src = e.cqe.cast::<Chunk>();
        let out = (dst as *mut Cqe64).cast::<Chunk>();
        for i in first..last.min(CHUNKS) {
            // SAFETY: as in `copy_cqe_to`: `i < CHUNKS`, so source and
            // destination chunks lie inside the entry's 64 bytes and the
            // 64 bytes of `dst`; the source is `Chunk`-aligned; any bits
            // are valid on both sides.
            unsafe { out.add(i).write_unaligned(src.add(i).read_volatile()) }
        }
    }

    /// [`Self::copy_cqe_to`], returning the copy.
    #[inline(always)]
    pub(crate) fn copy_cqe(&self, e: Entry) -> Cqe64 {
        let mut cqe = Cqe64::default();
        self.copy_cqe_to(e, &mut cqe);
        cqe
    }

    /// Copies the first 64 bytes of a 128-byte slot (inline-scattered data)
    /// into `dst`. Leaves `dst` alone for 64-byte slots.
    #[inline(always)]
    pub(crate) fn copy_first_half(&self, e: Entry, dst: &mut [u8; 64]) {
        if self.cqe_off == 0 {
            return;
        }
        let src = e.cqe.wrapping_sub(self.cqe_off).cast::<Chunk>();
        let out = dst.as_mut_ptr().cast::<Chunk>();
        for i in 0..CHUNKS {
            // SAFETY: the slot is 128 bytes, its first 64 (64 bytes before
            // the CQE) are in bounds and `Chunk`-aligned as in
            // `copy_cqe_to`; `dst` is 64 bytes (unaligned stores).
            unsafe { out.add(i).write_unaligned(src.add(i).read_volatile()) }
        }
    }

    /// Overwrites the `op_own` byte of the consumed slots `index + first`
    /// to `index + last` (modulo the ring size) with `value`: the
    /// invalidation of a basic compressed session's arrays and holes. The
    /// ring geometry is read once for the whole range.
    #[inline(always)]
    pub(crate) fn write_op_own_range(&self, index: u32, first: u32, last: u32, value: u8) {
        let (mask, log2) = (self.mask, self.stride_log2);
        let stride = 1usize << log2;
        let mut slot = (index.wrapping_add(first) & mask) as usize;
        let mut left = last.wrapping_sub(first) as usize + 1;
        // At most two runs of consecutive slots: up to the ring's end, then
        // from slot 0.
        while left > 0 {
            let run = left.min(mask as usize + 1 - slot);
            let mut p = self
                .base
                .as_ptr()
                .wrapping_add((slot << log2) + self.cqe_off + OP_OWN);
            for _ in 0..run {
                // SAFETY: `slot + run <= mask + 1`, so every byte written is
                // the `op_own` byte of a slot in bounds and valid for writes
                // (constructor contract). The device does not write these
                // slots: they lie before the consumer index the doorbell
                // record will publish.
                unsafe { p.write_volatile(value) };
                p = p.wrapping_add(stride);
            }
            left -= run;
            slot = 0;
        }
    }
}

/// The address of one CQE of a [`CqRing`] (from [`CqRing::entry`]): in
/// bounds by construction, only usable with the ring's accessors.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Entry {
    cqe: *mut u8,
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
