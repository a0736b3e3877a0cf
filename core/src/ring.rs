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
    fn rejects_bad_sizes() {
        let mut mem = [0u8; 48];
        // SAFETY: not used for access.
        assert!(unsafe { RingBuf::new(mem.as_mut_ptr(), 48) }.is_none());
        // SAFETY: null is rejected before any access.
        assert!(unsafe { RingBuf::new(core::ptr::null_mut(), 64) }.is_none());
    }
}
