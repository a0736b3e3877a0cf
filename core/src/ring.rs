//! Raw ring memory: the one place the send queue touches the SQ buffer
//! through a raw pointer.
//!
//! The SQ buffer is host memory that the device reads by DMA. It does not
//! belong to Rust: rdma-core (or the emulated device) allocated it, and the
//! device reads it at any time after a doorbell. So it is held as a raw
//! pointer plus a length, never as a `&mut [u8]` that would claim exclusive
//! access, and every access goes through the few methods below.
//!
//! Accesses are ordinary (non-volatile) copies: the device only reads bytes
//! that a later doorbell record publishes, and the to-device barrier before
//! that doorbell record orders these stores before it
//! ([`crate::barrier::to_device`]).
//!
//! Panic policy: nothing here panics. Offsets are reduced modulo the ring
//! length and copies longer than the ring are refused.

use core::marker::PhantomData;
use core::ptr::NonNull;

/// A power-of-two ring of bytes at a fixed address, written with wrap-around.
///
/// Owned by one queue (`Send`, not `Sync`).
#[derive(Debug)]
pub struct RingBuf<'a> {
    base: NonNull<u8>,
    /// Length in bytes minus one (the length is a power of two).
    mask: usize,
    _memory: PhantomData<&'a mut [u8]>,
}

// SAFETY: a `RingBuf` is the only handle through which the core writes the
// ring (the constructor's contract), so moving it to another thread moves
// the only writer; it has no shared state and is not `Sync`.
unsafe impl Send for RingBuf<'_> {}

impl<'a> RingBuf<'a> {
    /// Wraps `len` bytes of ring memory at `base`; `None` if `base` is null
    /// or `len` is not a power of two.
    ///
    /// # Safety
    ///
    /// For the whole lifetime `'a`:
    /// - `base .. base + len` is valid for reads and writes, and
    /// - nothing else in this process writes it (the device may read it;
    ///   other Rust code must not hold references into it).
    pub unsafe fn new(base: *mut u8, len: usize) -> Option<Self> {
        if !len.is_power_of_two() {
            return None;
        }
        let base = NonNull::new(base)?;
        Some(Self {
            base,
            mask: len - 1,
            _memory: PhantomData,
        })
    }

    /// Length of the ring in bytes.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.mask + 1
    }

    /// Always false: a ring has at least one byte.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Copies `src` into the ring starting at byte `offset` (taken modulo the
    /// ring length), continuing at byte 0 when it reaches the end, as a WQE
    /// that crosses the end of the SQ buffer does. Returns `false` and writes
    /// nothing if `src` is longer than the ring.
    #[inline(always)]
    pub fn write_wrapping(&mut self, offset: usize, src: &[u8]) -> bool {
        let len = self.len();
        if src.len() > len {
            return false;
        }
        let start = offset & self.mask;
        let first = core::cmp::min(src.len(), len - start);
        let (head, tail) = src.split_at(first);
        // SAFETY: `start + head.len() <= len` and `tail.len() <= start` (the
        // total is at most `len`), so both destination ranges lie inside the
        // ring, which is valid for writes (constructor contract); `src` is a
        // Rust slice and cannot overlap ring memory that no Rust reference
        // points into.
        unsafe {
            core::ptr::copy_nonoverlapping(
                head.as_ptr(),
                self.base.as_ptr().add(start),
                head.len(),
            );
            core::ptr::copy_nonoverlapping(tail.as_ptr(), self.base.as_ptr(), tail.len());
        }
        true
    }

    /// Writes one 16-byte segment at byte `offset` rounded down to a
    /// multiple of 16 (taken modulo the ring length): a receive WQE's data
    /// segment. Returns `false` and writes nothing if the ring is shorter
    /// than 16 bytes.
    #[inline(always)]
    pub fn write16(&mut self, offset: usize, seg: [u8; 16]) -> bool {
        if self.mask < 15 {
            return false;
        }
        let at = offset & self.mask & !15;
        // SAFETY: the length (`mask + 1`) is a power of two of at least
        // 16, so `at`, a multiple of 16 below it, leaves 16 bytes before
        // the ring's end, valid for writes (constructor contract); `seg` is
        // a local value, which cannot overlap ring memory.
        unsafe {
            self.base
                .as_ptr()
                .add(at)
                .cast::<[u8; 16]>()
                .write_unaligned(seg);
        }
        true
    }

    /// Writes one 16-byte segment per pair of elements of `src` and
    /// `side` (as many as the shorter holds), `seg(x, y)`, at consecutive
    /// 16-byte positions from byte `offset` (taken modulo the ring
    /// length): a run of one-segment receive WQEs, `side` being where each
    /// one's wr_id is kept. The run does not wrap: returns `false` and
    /// writes nothing (and calls `seg` on nothing) if `offset` is not a
    /// multiple of 16 or `src.len()` segments would pass the ring's end.
    #[inline(always)]
    pub fn write16_run<T, U>(
        &mut self,
        offset: usize,
        src: &[T],
        side: &mut [U],
        mut seg: impl FnMut(&T, &mut U) -> [u8; 16],
    ) -> bool {
        let at = offset & self.mask;
        if at % 16 != 0 || src.len() > (self.len() - at) / 16 {
            return false;
        }
        let dst = self.base.as_ptr().wrapping_add(at).cast::<[u8; 16]>();
        for (k, (x, y)) in src.iter().zip(side).enumerate() {
            // SAFETY: `k < src.len() <= (len - at) / 16`, so bytes
            // `at + 16 k .. at + 16 k + 16` lie inside the ring, valid for
            // writes (constructor contract); the segment is a local value,
            // which cannot overlap ring memory.
            unsafe { dst.add(k).write_unaligned(seg(x, y)) }
        }
        true
    }

    /// Copies whole 64-byte blocks (WQEBBs) into the ring from byte `offset`
    /// (taken modulo the ring length, a multiple of 64), wrapping at the end
    /// between blocks: one fixed-size copy per block, no `memcpy` call.
    /// Returns `false` and writes nothing if `src` is longer than the ring,
    /// `src.len()` or `offset` is not a multiple of 64, or the ring is
    /// shorter than 64 bytes.
    #[inline(always)]
    pub fn write_wrapping_64(&mut self, offset: usize, src: &[u8]) -> bool {
        let len = self.len();
        if src.len() > len || src.len() % 64 != 0 || offset % 64 != 0 || len < 64 {
            return false;
        }
        if let Ok(block) = <&[u8; 64]>::try_from(src) {
            // One block (the one-WQEBB batch): no loop.
            let at = offset & self.mask;
            // SAFETY: as in the loop below.
            unsafe {
                core::ptr::copy_nonoverlapping(
                    block,
                    self.base.as_ptr().add(at).cast::<[u8; 64]>(),
                    1,
                );
            }
            return true;
        }
        for (i, block) in src.chunks_exact(64).enumerate() {
            let at = offset.wrapping_add(64 * i) & self.mask;
            // SAFETY: `len` is a power of two of at least 64, so `at` (a
            // multiple of 64 below `len`) leaves 64 bytes before the ring's
            // end, valid for writes (constructor contract); `block` is 64
            // bytes of a Rust slice, which cannot overlap ring memory.
            unsafe {
                core::ptr::copy_nonoverlapping(
                    block.as_ptr().cast::<[u8; 64]>(),
                    self.base.as_ptr().add(at).cast::<[u8; 64]>(),
                    1,
                );
            }
        }
        true
    }

    /// Copies `dst.len()` bytes out of the ring starting at byte `offset`
    /// (modulo the ring length), wrapping at the end. Returns `false` and
    /// reads nothing if `dst` is longer than the ring.
    pub fn read_wrapping(&self, offset: usize, dst: &mut [u8]) -> bool {
        let len = self.len();
        if dst.len() > len {
            return false;
        }
        let start = offset & self.mask;
        let first = core::cmp::min(dst.len(), len - start);
        let (head, tail) = dst.split_at_mut(first);
        // SAFETY: as in `write_wrapping`, both source ranges lie inside the
        // ring, which is valid for reads; `dst` is a Rust slice outside it.
        unsafe {
            core::ptr::copy_nonoverlapping(
                self.base.as_ptr().add(start),
                head.as_mut_ptr(),
                head.len(),
            );
            core::ptr::copy_nonoverlapping(self.base.as_ptr(), tail.as_mut_ptr(), tail.len());
        }
        true
    }
}

/// A ring of whole 64-byte blocks (send-queue WQEBBs) over a [`RingBuf`]
/// of at least one block: the send queue's view of the SQ buffer.
///
/// Its size is checked once, at construction, so that the per-WQE writes
/// below need no test at all: a free-running block counter is reduced by the
/// mask and every block it names lies inside the ring.
///
/// Under `cfg(loom)` every block also has a `loom` cell that records the
/// writes to it, and `WqebbRing::device_reader` hands a model's device
/// thread the matching reads, so that a model of the real send queue sees a
/// "Causality violation" if the device reads a block not ordered after its
/// last write (`core/tests/loom_sq.rs`).
///
/// It dereferences to the [`RingBuf`] it was built from, for byte-wise
/// access.
#[derive(Debug)]
pub struct WqebbRing<'a> {
    ring: RingBuf<'a>,
    /// Number of blocks minus one (the number is a power of two).
    mask: u32,
    #[cfg(loom)]
    track: std::sync::Arc<std::vec::Vec<crate::sync::UnsafeCell<()>>>,
}

impl<'a> core::ops::Deref for WqebbRing<'a> {
    type Target = RingBuf<'a>;
    #[inline(always)]
    fn deref(&self) -> &RingBuf<'a> {
        &self.ring
    }
}

impl<'a> core::ops::DerefMut for WqebbRing<'a> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut RingBuf<'a> {
        &mut self.ring
    }
}

impl<'a> WqebbRing<'a> {
    /// Views `ring` as 64-byte blocks; `None` if it is shorter than one
    /// block or holds more than `2^32` blocks.
    pub fn new(ring: RingBuf<'a>) -> Option<Self> {
        let blocks = ring.len() / 64;
        if blocks == 0 {
            return None;
        }
        let mask = u32::try_from(blocks - 1).ok()?;
        // `loom` runs a model's threads one at a time on one OS thread, so
        // sharing its (not `Sync`) cells through an `Arc` is sound there.
        #[cfg(loom)]
        #[expect(clippy::arc_with_non_send_sync, reason = "loom cells, one OS thread")]
        let track = std::sync::Arc::new(
            (0..blocks)
                .map(|_| crate::sync::UnsafeCell::new(()))
                .collect::<std::vec::Vec<_>>(),
        );
        Some(Self {
            ring,
            mask,
            #[cfg(loom)]
            track,
        })
    }

    /// The first block.
    #[inline(always)]
    fn base(&self) -> NonNull<[u8; 64]> {
        self.ring.base.cast()
    }

    /// Number of blocks minus one: a free-running block counter ANDed with
    /// it is the block's index.
    #[inline(always)]
    pub fn mask(&self) -> u32 {
        self.mask
    }

    /// Number of blocks.
    #[inline(always)]
    pub fn blocks(&self) -> u32 {
        self.mask + 1
    }

    /// Writes one block at the free-running block counter `at` (reduced
    /// modulo the number of blocks). No test: every reduced counter names a
    /// block inside the ring.
    #[inline(always)]
    pub fn write(&mut self, at: u32, block: &[u8; 64]) {
        let slot = (at & self.mask) as usize;
        #[cfg(loom)]
        self.track_write(slot, 1);
        // SAFETY: `slot <= mask` and the ring holds `mask + 1` blocks (checked
        // by `new`), valid for writes (`RingBuf::new`'s contract); `block` is
        // a Rust value and cannot overlap ring memory, which no Rust reference
        // points into.
        unsafe { self.base().as_ptr().add(slot).write(*block) }
    }

    /// Copies `src` (whole blocks) into the ring from the free-running block
    /// counter `at`, continuing at block 0 when it reaches the end: at most
    /// two copies, the wrap split once. Returns `false` and writes nothing if
    /// `src` holds more blocks than the ring.
    #[inline(always)]
    pub fn write_run(&mut self, at: u32, src: &[[u8; 64]]) -> bool {
        if let [one] = src {
            // The one-WQEBB batch: one copy.
            self.write(at, one);
            return true;
        }
        if src.len() <= 4 {
            // A short batch (one WQE of up to 4 WQEBBs, typically): one
            // fixed-size copy per block, no `memcpy` call.
            for (k, block) in src.iter().enumerate() {
                self.write(at.wrapping_add(k as u32), block);
            }
            return true;
        }
        let blocks = self.blocks() as usize;
        if src.len() > blocks {
            return false;
        }
        let slot = (at & self.mask) as usize;
        let first = core::cmp::min(src.len(), blocks - slot);
        let (head, tail) = src.split_at(first);
        #[cfg(loom)]
        {
            self.track_write(slot, head.len());
            self.track_write(0, tail.len());
        }
        // SAFETY: `slot + head.len() <= blocks` and `tail.len() <= slot` (the
        // total is at most `blocks`), so both destination runs lie inside the
        // ring, valid for writes (constructor contracts); `src` is a Rust
        // slice and cannot overlap ring memory.
        unsafe {
            core::ptr::copy_nonoverlapping(
                head.as_ptr(),
                self.base().as_ptr().add(slot),
                head.len(),
            );
            core::ptr::copy_nonoverlapping(tail.as_ptr(), self.base().as_ptr(), tail.len());
        }
        true
    }

    /// Writes `n` blocks from the free-running block counter `at`, block `k`
    /// being `f(k)` (called in order, `k = 0..n`), when they fit before the
    /// ring end: one bounds test for the run, none per block. Returns
    /// `false`, calling `f` never and writing nothing, if the run would
    /// cross the end (the caller splits there, once).
    #[inline(always)]
    pub fn write_contiguous(
        &mut self,
        at: u32,
        n: usize,
        mut f: impl FnMut(usize) -> [u8; 64],
    ) -> bool {
        let slot = (at & self.mask) as usize;
        if n > self.blocks() as usize - slot {
            return false;
        }
        #[cfg(loom)]
        self.track_write(slot, n);
        // SAFETY: `slot + n <= blocks` (the test above, with `slot <= mask`),
        // so `dst` and the `n` blocks after it lie inside the ring, valid for
        // writes (constructor contracts).
        let dst = unsafe { self.base().as_ptr().add(slot) };
        for k in 0..n {
            let block = f(k);
            // SAFETY: `k < n`: inside the run checked above; `block` is a
            // Rust value, which cannot overlap ring memory (no Rust
            // reference points into it).
            unsafe { dst.add(k).write(block) }
        }
        true
    }

    /// The `n` blocks from the free-running block counter `at`, as bytes
    /// the caller writes in place (a WQE built straight into the ring), when
    /// they lie before the ring end; `None` if they would cross it (the
    /// caller stages the WQE and copies it with [`WqebbRing::write_run`],
    /// which wraps). One bounds test for the window, none per write: the
    /// caller's writes are slice accesses inside it.
    ///
    /// The caller passes blocks it has reserved and not yet published
    /// (between its producer counter and the ring's free room): the device
    /// reads none of them until a later doorbell, which cannot be rung
    /// while the window borrows the ring.
    #[inline(always)]
    pub fn window(&mut self, at: u32, n: u32) -> Option<&mut [u8]> {
        let slot = (at & self.mask) as usize;
        let n = n as usize;
        if n > self.blocks() as usize - slot {
            return None;
        }
        #[cfg(loom)]
        self.track_write(slot, n);
        // SAFETY: `slot + n <= blocks` (the test above, with `slot <= mask`),
        // so the `n * 64` bytes from block `slot` lie inside the ring, valid
        // for reads and writes for `'a` (constructor contracts). The slice
        // borrows `self` mutably, and `RingBuf` is the only Rust handle to
        // the ring memory (`RingBuf::new`'s contract), so nothing in this
        // process accesses those bytes while it lives. The device reads ring
        // memory by DMA, outside Rust's model, and only blocks that a
        // doorbell record has published, which these are not (the caller's
        // reservation, above); a doorbell needs `&mut` on the send queue,
        // not available while the slice lives.
        Some(unsafe {
            core::slice::from_raw_parts_mut(self.base().as_ptr().add(slot).cast::<u8>(), n * 64)
        })
    }

    /// The `n` blocks from the free-running block counter `at` as two
    /// runs of bytes the caller writes in place, for a WQE that crosses
    /// the ring end: the blocks up to the end, then those from block 0 (the
    /// second run is empty if the `n` blocks lie before the end). `None` if
    /// `n` is more blocks than the ring holds. The caller passes blocks it
    /// has reserved and not yet published, as for [`WqebbRing::window`].
    #[inline(always)]
    pub fn window_wrapping(&mut self, at: u32, n: u32) -> Option<(&mut [u8], &mut [u8])> {
        let slot = (at & self.mask) as usize;
        let (n, blocks) = (n as usize, self.blocks() as usize);
        if n > blocks {
            return None;
        }
        let first = core::cmp::min(n, blocks - slot);
        let second = n - first;
        #[cfg(loom)]
        {
            self.track_write(slot, first);
            self.track_write(0, second);
        }
        let base = self.base().as_ptr();
        // SAFETY: `slot + first <= blocks` and `second <= slot` (`n <=
        // blocks`, and `second > 0` only if `first == blocks - slot`), so
        // the two runs, blocks `slot..slot + first` and `0..second`, lie
        // inside the ring and do not overlap; valid for reads and writes
        // for `'a` (constructor contracts). Both borrow `self` mutably, the
        // only Rust handle to the ring memory, and the device reads none
        // of these reserved, unpublished blocks while they live (as in
        // `window`).
        Some(unsafe {
            (
                core::slice::from_raw_parts_mut(base.add(slot).cast::<u8>(), first * 64),
                core::slice::from_raw_parts_mut(base.cast::<u8>(), second * 64),
            )
        })
    }

    /// Reads the block at the free-running block counter `at`.
    #[inline(always)]
    pub fn read(&self, at: u32) -> [u8; 64] {
        let slot = (at & self.mask) as usize;
        // SAFETY: as in `write`, the block lies inside the ring, valid for
        // reads; nothing writes it concurrently (`&self`, single owner).
        unsafe { self.base().as_ptr().add(slot).read() }
    }

    #[cfg(loom)]
    fn track_write(&self, from: usize, n: usize) {
        for cell in self.track.iter().skip(from).take(n) {
            cell.with_mut(|_| ());
        }
    }

    /// The device's side of the ring in a `loom` model: reads that `loom`
    /// checks against the queue's writes.
    #[cfg(loom)]
    #[doc(hidden)]
    pub fn device_reader(&self) -> WqebbReader {
        WqebbReader {
            base: self.base(),
            mask: self.mask,
            track: std::sync::Arc::clone(&self.track),
        }
    }
}

/// A `loom` model's device view of a [`WqebbRing`] (see
/// [`WqebbRing::device_reader`]).
#[cfg(loom)]
#[doc(hidden)]
#[derive(Debug)]
pub struct WqebbReader {
    base: NonNull<[u8; 64]>,
    mask: u32,
    track: std::sync::Arc<std::vec::Vec<crate::sync::UnsafeCell<()>>>,
}

// SAFETY: `loom` runs a model's threads one at a time on one OS thread; the
// reader only reads, and `loom` checks each read against the writes.
#[cfg(loom)]
unsafe impl Send for WqebbReader {}

#[cfg(loom)]
impl WqebbReader {
    /// Reads block `at` (free-running) as the device's DMA read would;
    /// `loom` panics ("Causality violation") if the read is not ordered
    /// after the block's last write.
    ///
    /// # Safety
    ///
    /// The ring's memory is still alive (the model keeps it until the
    /// device thread has joined).
    pub unsafe fn read(&self, at: u32) -> [u8; 64] {
        let slot = (at & self.mask) as usize;
        if let Some(cell) = self.track.get(slot) {
            cell.with(|_| ());
        }
        // SAFETY: `slot` is inside the ring; the caller keeps it alive.
        unsafe { self.base.as_ptr().add(slot).read() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec;

    #[test]
    fn wraps_at_the_end() {
        let mut mem = vec![0u8; 64];
        let p = mem.as_mut_ptr();
        // SAFETY: `mem` outlives the ring and is only accessed through it.
        let mut r = unsafe { RingBuf::new(p, 64) }.unwrap();
        assert!(r.write_wrapping(60, &[1, 2, 3, 4, 5, 6]));
        let mut out = [0u8; 8];
        assert!(r.read_wrapping(124, &mut out));
        assert_eq!(out, [1, 2, 3, 4, 5, 6, 0, 0]);
        assert!(!r.write_wrapping(0, &[0; 65]));
        assert_eq!(&mem[60..64], &[1, 2, 3, 4]);
        assert_eq!(&mem[0..2], &[5, 6]);
    }

    #[test]
    fn blocks_wrap_between_blocks() {
        let mut mem = vec![0u8; 256];
        let p = mem.as_mut_ptr();
        // SAFETY: `mem` outlives the ring and is only accessed through it.
        let mut r = unsafe { RingBuf::new(p, 256) }.unwrap();
        let src: std::vec::Vec<u8> = (0..128u8).collect();
        assert!(r.write_wrapping_64(192 + 256, &src));
        assert!(!r.write_wrapping_64(0, &src[..65]));
        assert!(!r.write_wrapping_64(8, &src[..64]));
        assert!(!r.write_wrapping_64(0, &[0; 320]));
        let mut out = [0u8; 128];
        assert!(r.read_wrapping(192, &mut out));
        assert_eq!(&out[..], &src[..]);
        assert_eq!(&mem[64..192], &[0; 128][..]);
    }

    #[test]
    fn contiguous_runs_stop_at_the_ring_end() {
        let mut mem = vec![0u8; 256];
        let p = mem.as_mut_ptr();
        // SAFETY: `mem` outlives the ring and is only accessed through it.
        let ring = unsafe { RingBuf::new(p, 256) }.unwrap();
        let mut r = WqebbRing::new(ring).unwrap();
        assert_eq!(r.mask(), 3);
        // Slots 1..4 of counter 5: fits, blocks in order.
        assert!(r.write_contiguous(5, 3, |k| [k as u8 + 1; 64]));
        assert_eq!(
            (r.read(1), r.read(2), r.read(3)),
            ([1; 64], [2; 64], [3; 64])
        );
        // Crossing the end: refused, nothing written, `f` not called.
        assert!(!r.write_contiguous(6, 3, |_| unreachable!()));
        assert_eq!(r.read(0), [0; 64]);
        assert!(r.write_contiguous(4, 0, |_| unreachable!()));
        assert_eq!(mem[64], 1);
    }

    #[test]
    fn windows_stop_at_the_ring_end() {
        let mut mem = vec![0u8; 256];
        let p = mem.as_mut_ptr();
        // SAFETY: `mem` outlives the ring and is only accessed through it.
        let ring = unsafe { RingBuf::new(p, 256) }.unwrap();
        let mut r = WqebbRing::new(ring).unwrap();
        // Counter 6 is slot 2: two blocks fit, three would cross the end.
        assert!(r.window(6, 3).is_none());
        let w = r.window(6, 2).unwrap();
        assert_eq!(w.len(), 128);
        w[0] = 7;
        w[127] = 9;
        assert_eq!(r.window(7, 0).map(|w| w.len()), Some(0));
        assert_eq!(r.window(0, 4).map(|w| w.len()), Some(256));
        assert_eq!((r.read(2)[0], r.read(3)[63]), (7, 9));
        assert_eq!((mem[128], mem[255], mem[127]), (7, 9, 0));
    }

    #[test]
    fn wrapping_windows_split_at_the_ring_end() {
        let mut mem = vec![0u8; 256];
        let p = mem.as_mut_ptr();
        // SAFETY: `mem` outlives the ring and is only accessed through it.
        let ring = unsafe { RingBuf::new(p, 256) }.unwrap();
        let mut r = WqebbRing::new(ring).unwrap();
        // Counter 6 is slot 2: two blocks before the end, one after.
        let (a, b) = r.window_wrapping(6, 3).unwrap();
        assert_eq!((a.len(), b.len()), (128, 64));
        a[0] = 7;
        a[127] = 8;
        b[0] = 9;
        b[63] = 10;
        assert_eq!(
            (r.read(2)[0], r.read(3)[63], r.read(0)[0], r.read(0)[63]),
            (7, 8, 9, 10)
        );
        assert_eq!(r.read(1), [0; 64]);
        // Before the end: the second part is empty.
        let (a, b) = r.window_wrapping(5, 2).unwrap();
        assert_eq!((a.len(), b.len()), (128, 0));
        // The whole ring from any slot; more is refused.
        let (a, b) = r.window_wrapping(3, 4).unwrap();
        assert_eq!((a.len(), b.len()), (64, 192));
        assert!(r.window_wrapping(0, 5).is_none());
        assert_eq!((mem[128], mem[255], mem[0], mem[63]), (7, 8, 9, 10));
    }

    #[test]
    fn wqebb_ring_writes_blocks_and_runs_with_one_wrap() {
        let mut mem = vec![0u8; 256];
        let p = mem.as_mut_ptr();
        // SAFETY: `mem` outlives the ring and is only accessed through it.
        let ring = unsafe { RingBuf::new(p, 256) }.unwrap();
        let mut r = WqebbRing::new(ring).unwrap();
        assert_eq!(r.blocks(), 4);
        r.write(5, &[1; 64]);
        assert_eq!(r.read(1), [1; 64]);
        let run: std::vec::Vec<[u8; 64]> = (10..16u8).map(|b| [b; 64]).collect();
        assert!(!r.write_run(0, &run[..]));
        // Three blocks from slot 3: the run wraps after the first.
        assert!(r.write_run(3, &run[..3]));
        assert_eq!(
            (r.read(3), r.read(4), r.read(5)),
            ([10; 64], [11; 64], [12; 64])
        );
        assert!(r.write_run(6, &run[3..5]));
        assert_eq!((r.read(6), r.read(7)), ([13; 64], [14; 64]));
        let five: std::vec::Vec<[u8; 64]> = (20..24u8).map(|b| [b; 64]).collect();
        assert!(r.write_run(2, &five[..]));
        assert_eq!(r.read(1), [23; 64]);
        assert_eq!(mem[64], 23);
        // Shorter than one block: refused.
        let mut small = [0u8; 32];
        // SAFETY: `small` outlives the ring and is not accessed meanwhile.
        let ring = unsafe { RingBuf::new(small.as_mut_ptr(), 32) }.unwrap();
        assert!(WqebbRing::new(ring).is_none());
    }

    #[test]
    fn rejects_bad_sizes() {
        let mut mem = [0u8; 48];
        // SAFETY: not used for access.
        assert!(unsafe { RingBuf::new(mem.as_mut_ptr(), 48) }.is_none());
        // SAFETY: null is rejected before any access.
        assert!(unsafe { RingBuf::new(core::ptr::null_mut(), 64) }.is_none());
    }
}
