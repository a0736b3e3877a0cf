//! Memory the emulated device shares with the core, and every `unsafe`
//! access the emulator makes to it.
//!
//! Rings, doorbell records and the UAR page are aligned, zeroed heap blocks
//! ([`DmaBlock`]); memory the user registers is a [`UserRegion`]. The core
//! writes rings and doorbell records through raw pointers from its own
//! thread while the device reads them, and reads CQEs while the device
//! writes them, so every access made from here is atomic:
//!
//! - data (WQEs, payloads, CQE bodies) with relaxed loads and stores, in
//!   8-byte words where aligned and bytes elsewhere, as a DMA engine would;
//! - the doorbell record with an **acquire** load, which pairs with the
//!   core's to-device barrier before its doorbell-record store (rdma-core
//!   `udma_to_device_barrier` then `dbrec[MLX5_SND_DBR]`): every WQE byte
//!   written before that store is visible after this load;
//! - the byte that hands a CQE to software (`op_own`, or the validity byte
//!   of the enhanced layout) with a **release** store after the body, which
//!   pairs with the core's owner check followed by its from-device barrier.
//!
//! Nothing else in `emu` contains `unsafe` but [`super::core_parts`], which
//! turns the parts' pointers into the core's typed views.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::fmt;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, AtomicU8, Ordering};

/// Why an access to shared memory was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemError {
    /// The range does not lie inside the region.
    OutOfBounds,
    /// A word access at an offset that is not a multiple of its size.
    Misaligned,
    /// The allocator refused the block (or the size/alignment is invalid).
    Alloc,
}

impl fmt::Display for MemError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MemError::OutOfBounds => "access outside the region",
            MemError::Misaligned => "misaligned word access",
            MemError::Alloc => "allocation failed",
        })
    }
}

impl std::error::Error for MemError {}

/// A range of process memory the device reads and writes atomically.
///
/// A `Region` is only ever created by a [`DmaBlock`] (which owns its memory)
/// or by the `unsafe` [`UserRegion::new`] (whose caller vouches for it), so
/// holding one means the memory is valid for its whole length.
#[derive(Debug)]
pub struct Region {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: a Region is a pointer and a length; every access through it is an
// atomic operation, so sharing it between threads cannot create a data race
// on the Rust side, and the memory's validity is guaranteed by its owner
// (DmaBlock) or by the caller of UserRegion::new for as long as it exists.
unsafe impl Send for Region {}
// SAFETY: as for Send: &Region only offers atomic accesses.
unsafe impl Sync for Region {}

impl Region {
    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the region is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The address of the first byte (the I/O virtual address the device
    /// uses for it: process addresses are used as-is).
    pub fn addr(&self) -> u64 {
        self.ptr.as_ptr() as usize as u64
    }

    /// The first byte, for handing to the core as a raw part.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// The pointer to `off`, after checking that `off..off + n` lies inside.
    fn at(&self, off: usize, n: usize) -> Result<*mut u8, MemError> {
        let end = off.checked_add(n).ok_or(MemError::OutOfBounds)?;
        if end > self.len {
            return Err(MemError::OutOfBounds);
        }
        // `wrapping_add` keeps this a safe computation; the result is in
        // bounds by the check above.
        Ok(self.ptr.as_ptr().wrapping_add(off))
    }

    /// The pointer to a naturally aligned word of `n` bytes at `off`.
    fn word_at(&self, off: usize, n: usize) -> Result<*mut u8, MemError> {
        let p = self.at(off, n)?;
        if (p as usize) % n != 0 {
            return Err(MemError::Misaligned);
        }
        Ok(p)
    }

    /// Copies `buf.len()` bytes from `off` into `buf` (relaxed loads).
    pub fn read(&self, off: usize, buf: &mut [u8]) -> Result<(), MemError> {
        let base = self.at(off, buf.len())?;
        let mut i = 0;
        while i < buf.len() {
            let p = base.wrapping_add(i);
            if (p as usize) % 8 == 0 && buf.len() - i >= 8 {
                // SAFETY: p..p+8 lies inside the region (checked by `at`),
                // is 8-aligned, and is only accessed atomically by the device.
                let w = unsafe { AtomicU64::from_ptr(p.cast::<u64>()) }.load(Ordering::Relaxed);
                buf[i..i + 8].copy_from_slice(&w.to_ne_bytes());
                i += 8;
            } else {
                // SAFETY: p lies inside the region (checked by `at`).
                buf[i] = unsafe { AtomicU8::from_ptr(p) }.load(Ordering::Relaxed);
                i += 1;
            }
        }
        Ok(())
    }

    /// Copies `data` to `off` (relaxed stores).
    pub fn write(&self, off: usize, data: &[u8]) -> Result<(), MemError> {
        let base = self.at(off, data.len())?;
        let mut i = 0;
        while i < data.len() {
            let p = base.wrapping_add(i);
            if (p as usize) % 8 == 0 && data.len() - i >= 8 {
                let mut w = [0u8; 8];
                w.copy_from_slice(&data[i..i + 8]);
                // SAFETY: p..p+8 lies inside the region and is 8-aligned.
                unsafe { AtomicU64::from_ptr(p.cast::<u64>()) }
                    .store(u64::from_ne_bytes(w), Ordering::Relaxed);
                i += 8;
            } else {
                // SAFETY: p lies inside the region (checked by `at`).
                unsafe { AtomicU8::from_ptr(p) }.store(data[i], Ordering::Relaxed);
                i += 1;
            }
        }
        Ok(())
    }

    /// Sets `len` bytes from `off` to `byte`.
    pub fn fill(&self, off: usize, len: usize, byte: u8) -> Result<(), MemError> {
        self.at(off, len)?;
        let chunk = [byte; 64];
        let mut done = 0;
        while done < len {
            let n = (len - done).min(chunk.len());
            self.write(off + done, &chunk[..n])?;
            done += n;
        }
        Ok(())
    }

    /// Reads a big-endian 32-bit doorbell-record word with acquire ordering:
    /// everything the core wrote before publishing this value is visible
    /// after it.
    pub fn load_be32_acquire(&self, off: usize) -> Result<u32, MemError> {
        let p = self.word_at(off, 4)?;
        // SAFETY: p is inside the region and 4-aligned (checked).
        let raw = unsafe { AtomicU32::from_ptr(p.cast::<u32>()) }.load(Ordering::Acquire);
        Ok(u32::from_be_bytes(raw.to_ne_bytes()))
    }

    /// Reads eight bytes at an 8-aligned offset with acquire ordering.
    pub fn load_u64_acquire(&self, off: usize) -> Result<[u8; 8], MemError> {
        let p = self.word_at(off, 8)?;
        // SAFETY: p is inside the region and 8-aligned (checked).
        let raw = unsafe { AtomicU64::from_ptr(p.cast::<u64>()) }.load(Ordering::Acquire);
        Ok(raw.to_ne_bytes())
    }

    /// Clears eight bytes at an 8-aligned offset if they still hold `seen`
    /// (a doorbell register the device has consumed); false if the core
    /// wrote a new value in between.
    pub fn clear_u64_if(&self, off: usize, seen: [u8; 8]) -> Result<bool, MemError> {
        let p = self.word_at(off, 8)?;
        // SAFETY: p is inside the region and 8-aligned (checked).
        let word = unsafe { AtomicU64::from_ptr(p.cast::<u64>()) };
        Ok(word
            .compare_exchange(
                u64::from_ne_bytes(seen),
                0,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_ok())
    }

    /// Stores one byte with release ordering: the hand-over of a CQE (its
    /// `op_own`) after its body.
    pub fn store_u8_release(&self, off: usize, value: u8) -> Result<(), MemError> {
        let p = self.at(off, 1)?;
        // SAFETY: p is inside the region (checked).
        unsafe { AtomicU8::from_ptr(p) }.store(value, Ordering::Release);
        Ok(())
    }

    /// Stores two bytes (memory order) at a 2-aligned offset with release
    /// ordering: bytes 62–63 of an enhanced-layout CQE, validity byte and
    /// `op_own` made visible together after the body.
    pub fn store_2_release(&self, off: usize, bytes: [u8; 2]) -> Result<(), MemError> {
        let p = self.word_at(off, 2)?;
        // SAFETY: p is inside the region and 2-aligned (checked).
        unsafe { AtomicU16::from_ptr(p.cast::<u16>()) }
            .store(u16::from_ne_bytes(bytes), Ordering::Release);
        Ok(())
    }

    /// Atomically replaces the 8-byte word at `off` (native byte order) by
    /// `f(old)` and returns `old`: an RDMA atomic executed by the device.
    pub fn update_u64(&self, off: usize, mut f: impl FnMut(u64) -> u64) -> Result<u64, MemError> {
        let p = self.word_at(off, 8)?;
        // SAFETY: p is inside the region and 8-aligned (checked).
        let word = unsafe { AtomicU64::from_ptr(p.cast::<u64>()) };
        let old = word.fetch_update(Ordering::AcqRel, Ordering::Acquire, |v| Some(f(v)));
        Ok(old.unwrap_or_else(|v| v))
    }

    /// Atomically replaces the 4-byte word at `off` by `f(old)`; returns `old`.
    pub fn update_u32(&self, off: usize, mut f: impl FnMut(u32) -> u32) -> Result<u32, MemError> {
        let p = self.word_at(off, 4)?;
        // SAFETY: p is inside the region and 4-aligned (checked).
        let word = unsafe { AtomicU32::from_ptr(p.cast::<u32>()) };
        let old = word.fetch_update(Ordering::AcqRel, Ordering::Acquire, |v| Some(f(v)));
        Ok(old.unwrap_or_else(|v| v))
    }
}

/// An aligned, zeroed heap block the device shares with the core: a ring, a
/// doorbell record, a UAR page, or a buffer for a memory region.
#[derive(Debug)]
pub struct DmaBlock {
    region: Region,
    layout: Layout,
}

impl DmaBlock {
    /// Allocates `len` zeroed bytes aligned to `align` (a power of two);
    /// `len` is rounded up to at least one byte.
    pub fn new(len: usize, align: usize) -> Result<Self, MemError> {
        let layout = Layout::from_size_align(len.max(1), align).map_err(|_| MemError::Alloc)?;
        // SAFETY: the layout has a non-zero size (len.max(1)).
        let raw = unsafe { alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).ok_or(MemError::Alloc)?;
        Ok(Self {
            region: Region { ptr, len },
            layout,
        })
    }
}

impl std::ops::Deref for DmaBlock {
    type Target = Region;
    fn deref(&self) -> &Region {
        &self.region
    }
}

impl Drop for DmaBlock {
    fn drop(&mut self) {
        // SAFETY: the pointer came from alloc_zeroed with exactly this layout
        // and is freed once, here.
        unsafe { dealloc(self.region.ptr.as_ptr(), self.layout) }
    }
}

/// Memory that belongs to the user, registered with the device (the
/// emulated `ibv_reg_mr` on an existing buffer).
#[derive(Debug)]
pub struct UserRegion {
    region: Region,
}

impl UserRegion {
    /// Wraps `len` bytes at `ptr`; `None` for a null pointer.
    ///
    /// # Safety
    ///
    /// `ptr..ptr + len` must be valid for reads and writes for as long as the
    /// returned value (and any memory region registered with it) exists, and
    /// may be read and written by the device at any time in that span, from
    /// any thread — the same promise `ibv_reg_mr` asks for.
    pub unsafe fn new(ptr: *mut u8, len: usize) -> Option<Self> {
        let ptr = NonNull::new(ptr)?;
        Some(Self {
            region: Region { ptr, len },
        })
    }
}

impl std::ops::Deref for UserRegion {
    type Target = Region;
    fn deref(&self) -> &Region {
        &self.region
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_zeroed_aligned_and_bounded() {
        let b = DmaBlock::new(100, 64).unwrap();
        assert_eq!(b.addr() % 64, 0);
        let mut buf = [0xffu8; 100];
        b.read(0, &mut buf).unwrap();
        assert!(buf.iter().all(|&x| x == 0));
        b.write(3, &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]).unwrap();
        let mut got = [0u8; 11];
        b.read(3, &mut got).unwrap();
        assert_eq!(got, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
        assert_eq!(b.write(95, &[0; 6]), Err(MemError::OutOfBounds));
        assert_eq!(b.load_be32_acquire(2), Err(MemError::Misaligned));
        b.write(8, &[0, 0, 1, 2]).unwrap();
        assert_eq!(b.load_be32_acquire(8).unwrap(), 0x0102);
        assert_eq!(b.update_u64(16, |v| v + 5).unwrap(), 0);
        assert_eq!(b.update_u64(16, |v| v + 5).unwrap(), 5);
        assert!(!b.clear_u64_if(16, [0; 8]).unwrap());
        assert!(b.clear_u64_if(16, 10u64.to_ne_bytes()).unwrap());
    }
}
