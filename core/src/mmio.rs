//! Volatile access to device registers (MMIO) and to the words of host memory
//! that the device reads or writes by DMA.
//!
//! One of the few modules of the core allowed `unsafe`: every raw-pointer
//! access of the data path to a UAR page or to a doorbell record goes through
//! the types here, so the `// SAFETY:` arguments live in one place.
//!
//! - [`Register`]: a device register in a UAR page (the doorbell/BlueFlame
//!   register at `0x800 + k * bf_reg_size`, the CQ doorbell at `0x20`),
//!   written with single, ascending, volatile stores. Registers are only ever
//!   reached through raw pointers, never references, because a reference
//!   would let the compiler invent reads of MMIO.
//! - `BfHalves` (crate-private): a send queue's register as two BlueFlame
//!   halves written alternately, the current half kept as an address.
//! - [`DeviceWord`]: one naturally aligned scalar of host memory shared with
//!   the device (a doorbell-record counter, a CQE ownership byte), read and
//!   written with single `Relaxed` atomic accesses (plain loads and stores
//!   of the whole scalar, race-free against the emulated device's thread);
//!   under `cfg(loom)` a `loom` atomic, so that models check publication
//!   through it.
//!
//! Neither type orders anything: ordering is [`crate::barrier`]'s job, and a
//! doorbell sequence reads `barrier::to_device(); dbrec.write_be(pi);
//! barrier::wc_start(); bf.write64(ctrl); barrier::wc_flush();`.
//!
//! # Why volatile for registers, atomics for host words
//!
//! A volatile access is performed exactly once, at its width, in program
//! order with respect to other volatile accesses; LLVM does not split or
//! merge volatile accesses of a target-legal integer type (LangRef,
//! "Volatile Memory Accesses"). That is the contract of the kernel's
//! `writeq`/`WRITE_ONCE` and of rdma-core's `mmio_write64_be` (`util/mmio.h`).
//! MMIO registers keep volatile stores. Host-memory words shared with the
//! device use `Relaxed` atomics instead: on every target they compile to the
//! same single load or store as a volatile access, but they are defined in
//! the Rust memory model when a CPU thread plays the device (the emulated
//! device reads them with atomics on its own thread), and they make
//! `DeviceWord` `Sync`, so a queue holding one is `Send`. Ordering still
//! comes only from [`crate::barrier`] (and [`crate::barrier::peer`] on the
//! device side).

use core::ptr::NonNull;

/// A device register: a run of MMIO bytes in a mapped UAR page, written with
/// volatile stores only.
///
/// Built once by `mlx5dp-setup` (from `mlx5dv_qp.bf.reg` and `bf.size`, or
/// the UAR base plus `0x20` for the CQ doorbell) and owned by one queue. It
/// is [`Send`] (a queue may move to another thread) but not [`Sync`] and not
/// [`Clone`]: two CPUs writing the same BlueFlame half at once would
/// interleave their write-combining buffers, so a shared bfreg needs a lock
/// and a separate type.
#[derive(Debug)]
pub struct Register {
    /// First byte of the register; 8-byte aligned.
    base: NonNull<u8>,
    /// Bytes writable from `base`; a multiple of 8, at least 8.
    size: usize,
}

// SAFETY: a `Register` is an exclusive handle to device memory with no
// thread affinity: MMIO stores may be issued from any CPU. Moving it to
// another thread moves the exclusivity with it. It is deliberately not
// `Sync` (see the type's documentation).
unsafe impl Send for Register {}

impl Register {
    /// Wraps the `size` bytes of device register space starting at `base`.
    ///
    /// # Safety
    ///
    /// For as long as the returned `Register` (or anything moved out of it)
    /// lives:
    /// - `base .. base + size` is mapped (UAR page: write-combining or
    ///   uncached; in tests and in the emulated device: ordinary memory) and
    ///   valid for volatile 8-byte writes at every 8-byte-aligned offset;
    /// - `base` is 8-byte aligned and `size` is a multiple of 8, at least 8;
    /// - no Rust reference to those bytes exists, and no other `Register`
    ///   over the same bytes is used concurrently from another thread.
    ///
    /// # Panics
    ///
    /// If `base` is not 8-byte aligned or `size` is not a non-zero multiple
    /// of 8 (checked even in release builds: this runs once, at setup).
    #[inline]
    pub unsafe fn new(base: NonNull<u8>, size: usize) -> Self {
        assert!(
            base.as_ptr().addr() % 8 == 0,
            "register base not 8-byte aligned"
        );
        assert!(
            size >= 8 && size % 8 == 0,
            "register size not a multiple of 8"
        );
        Self { base, size }
    }

    /// The number of bytes this register spans.
    #[inline(always)]
    pub fn size(&self) -> usize {
        self.size
    }

    /// Writes `bytes` (in memory order: `bytes[0]` at the lowest address) to
    /// offset 0 as one 64-bit volatile store.
    ///
    /// This is the 8-byte doorbell: the first 8 bytes of the last WQE's
    /// control segment (`opmod_idx_opcode`, `qpn_ds`), or the CQ arm word and
    /// CQN (`prm::doorbell::cq_arm_doorbell`). See [`Register::write64_at`].
    #[inline(always)]
    pub fn write64(&self, bytes: [u8; 8]) {
        self.write64_at(0, bytes);
    }

    /// Writes `bytes` (memory order) at `offset` as one 64-bit volatile store
    /// (rdma-core `mmio_write64_be`; DPDK `rte_write64_relaxed`).
    ///
    /// On 64-bit targets it is a single store, so the device receives one
    /// 8-byte TLP. On 32-bit targets it is two 32-bit stores, `bytes[0..4]`
    /// then `bytes[4..8]` (ascending, as rdma-core does without 64-bit MMIO);
    /// the pair is not atomic, so callers there must not share the register.
    ///
    /// # Panics
    ///
    /// If `offset` is not a multiple of 8 or `offset + 8 > size`.
    #[inline(always)]
    pub fn write64_at(&self, offset: usize, bytes: [u8; 8]) {
        assert!(
            offset % 8 == 0 && offset <= self.size - 8,
            "64-bit register write out of range or misaligned"
        );
        // SAFETY: `offset + 8 <= size` and `offset` is a multiple of 8, so
        // with `new`'s contract (base 8-aligned, the span valid for volatile
        // 8-byte writes, no references to it) the destination is in bounds,
        // aligned and writable.
        unsafe { store64(self.base.as_ptr().add(offset), bytes) }
    }

    /// Writes a 64-byte chunk at `offset` as eight 64-bit volatile stores in
    /// ascending address order: the BlueFlame copy unit (rdma-core
    /// `mmio_memcpy_x64`, UCX `uct_ib_mlx5_bf_copy`).
    ///
    /// A BlueFlame write of a WQE is one call per 64-byte WQEBB, at offsets
    /// 0, 64, … of the current BlueFlame half, between [`wc_start`] and
    /// [`wc_flush`]. Ascending order matters: the write-combining buffer
    /// fills one 64-byte line, and the device expects the WQE's first bytes
    /// (the control segment) first.
    ///
    /// [`wc_start`]: crate::barrier::wc_start
    /// [`wc_flush`]: crate::barrier::wc_flush
    ///
    /// # Panics
    ///
    /// If `offset` is not a multiple of 64 or `offset + 64 > size`.
    #[inline(always)]
    pub fn write_chunk64(&self, offset: usize, chunk: &[u8; 64]) {
        assert!(
            offset % 64 == 0 && self.size >= 64 && offset <= self.size - 64,
            "64-byte register write out of range or misaligned"
        );
        let words: [[u8; 8]; 8] = zerocopy::transmute!(*chunk);
        for (i, word) in words.into_iter().enumerate() {
            // SAFETY: `offset + 64 <= size` and `offset` is a multiple of 64,
            // so `offset + 8 * i` (i < 8) is an 8-aligned offset with 8 bytes
            // in bounds; with `new`'s contract the store is valid.
            unsafe { store64(self.base.as_ptr().add(offset + 8 * i), word) }
        }
    }
}

/// A send queue's doorbell/BlueFlame register as rdma-core's `struct
/// mlx5_bf` uses it: two halves of `half` bytes (one 8-byte doorbell when
/// `half` is 0), each write to the half after the previous one's
/// (`bf->offset ^= bf->buf_size` after every doorbell, plain or BlueFlame).
///
/// The half the next write uses is kept as its address, and the toggle as
/// the XOR of the two halves' addresses: a write is one load of the address
/// and the store, the toggle one XOR (rdma-core's `bf->reg + bf->offset`
/// loads a base and an offset for every doorbell).
#[derive(Debug)]
pub(crate) struct BfHalves {
    /// The whole register (both halves); owns the exclusivity.
    reg: Register,
    /// The first byte of the half the next write uses: `reg.base` or
    /// `reg.base + half`.
    cur: *mut u8,
    /// `addr(base) ^ addr(base + half)`: XORed into `cur`'s address, it
    /// names the other half (0 when `half` is 0: one doorbell address).
    toggle: usize,
}

// SAFETY: as for `Register` (exclusive device memory, no thread affinity):
// `cur` points into the register this value owns.
unsafe impl Send for BfHalves {}

impl BfHalves {
    /// The halves of `reg`, each `half` bytes, the first write to the
    /// second half if `second_half`. `None` if `half` is not a multiple of
    /// 64 or `reg` is shorter than `max(2 * half, 8)` bytes.
    pub(crate) fn new(reg: Register, half: usize, second_half: bool) -> Option<Self> {
        let need = core::cmp::max(half.checked_mul(2)?, 8);
        if half % 64 != 0 || reg.size() < need {
            return None;
        }
        let base = reg.base.as_ptr();
        // `half < 2 * half <= size` (or `half == 0`): `base + half` lies in
        // the register's span.
        let other = base.wrapping_add(half);
        let toggle = base.addr() ^ other.addr();
        Some(Self {
            reg,
            cur: if second_half { other } else { base },
            toggle,
        })
    }

    /// Byte offset, within the register, of the half the next write uses
    /// (rdma-core `bf->offset`).
    pub(crate) fn offset(&self) -> usize {
        self.cur.addr() - self.reg.base.as_ptr().addr()
    }

    /// The 8-byte doorbell (`bytes` in memory order) at the start of the
    /// current half: one volatile 64-bit store.
    #[inline(always)]
    pub(crate) fn write64(&self, bytes: [u8; 8]) {
        // SAFETY: `cur` is `base` or `base + half` (set by `new`, then only
        // toggled between the two), 8-aligned (`base` is, `half` is a
        // multiple of 64), with `cur + 8 <= base + size` because
        // `size >= max(2 * half, 8)` (checked by `new`).
        unsafe { store64(self.cur, bytes) }
    }

    /// Writes 64-byte chunk `i` of a BlueFlame copy into the current half
    /// (eight ascending volatile 64-bit stores, as
    /// [`Register::write_chunk64`]).
    ///
    /// # Safety
    ///
    /// `(i + 1) * 64 <= half`: the chunk lies inside the current half.
    #[inline(always)]
    pub(crate) unsafe fn write_chunk64(&self, i: usize, chunk: &[u8; 64]) {
        let words: [[u8; 8]; 8] = zerocopy::transmute!(*chunk);
        for (k, word) in words.into_iter().enumerate() {
            // SAFETY: `cur` is the start of a half (see `write64`) and the
            // caller guarantees `(i + 1) * 64 <= half`, so `64 * i + 8 * k`
            // (k < 8) is an 8-aligned offset with 8 bytes inside that half,
            // inside the register (`Register::new`'s contract).
            unsafe { store64(self.cur.add(64 * i + 8 * k), word) }
        }
    }

    /// Moves to the other half (rdma-core `bf->offset ^= bf->buf_size`).
    #[inline(always)]
    pub(crate) fn toggle(&mut self) {
        let t = self.toggle;
        // The XOR of one half's address with `toggle` is the other half's
        // address, in the same allocation (`map_addr` keeps the
        // provenance).
        self.cur = self.cur.map_addr(|a| a ^ t);
    }
}

/// One 64-bit volatile store of `bytes` (memory order) to `dst`; two
/// ascending 32-bit stores on targets without 64-bit registers.
///
/// # Safety
///
/// `dst` is 8-byte aligned and valid for a volatile 8-byte write.
#[inline(always)]
unsafe fn store64(dst: *mut u8, bytes: [u8; 8]) {
    #[cfg(target_pointer_width = "64")]
    // SAFETY: the caller guarantees `dst` is 8-aligned and writable for 8
    // bytes. `from_ne_bytes` followed by a native store puts `bytes[0]` at
    // the lowest address on either endianness.
    unsafe {
        dst.cast::<u64>().write_volatile(u64::from_ne_bytes(bytes));
    }

    #[cfg(not(target_pointer_width = "64"))]
    {
        let [b0, b1, b2, b3, b4, b5, b6, b7] = bytes;
        // SAFETY: the caller guarantees 8 writable bytes at the 8-aligned
        // `dst`, so `dst` and `dst + 4` are 4-aligned and writable for 4
        // bytes each. Two volatile stores are never reordered with each
        // other: the low half reaches the device first.
        unsafe {
            dst.cast::<u32>()
                .write_volatile(u32::from_ne_bytes([b0, b1, b2, b3]));
            dst.add(4)
                .cast::<u32>()
                .write_volatile(u32::from_ne_bytes([b4, b5, b6, b7]));
        }
    }
}

mod sealed {
    /// Closes [`super::DeviceScalar`] to the four unsigned integers.
    pub trait Sealed {}
}

/// A scalar that the CPU and the device exchange through host memory:
/// `u8`, `u16`, `u32`, `u64`.
pub trait DeviceScalar: Copy + sealed::Sealed {
    /// The atomic of the same size (`AtomicU32` for `u32`, …): the storage
    /// of a [`DeviceWord`].
    #[cfg(not(loom))]
    #[doc(hidden)]
    type Atomic: Sync;

    /// Converts between the value as stored in big-endian memory order and
    /// the native value (`from_be` and `to_be` are the same involution).
    fn swap_be(self) -> Self;

    /// A new atomic holding `self`.
    #[cfg(not(loom))]
    #[doc(hidden)]
    fn atomic_new(self) -> Self::Atomic;

    /// One `Relaxed` load.
    #[cfg(not(loom))]
    #[doc(hidden)]
    fn atomic_load(a: &Self::Atomic) -> Self;

    /// One `Relaxed` store.
    #[cfg(not(loom))]
    #[doc(hidden)]
    fn atomic_store(a: &Self::Atomic, v: Self);

    /// Widens to `u64` (the storage of the `loom` build).
    #[cfg(loom)]
    #[doc(hidden)]
    fn to_u64(self) -> u64;

    /// Narrows from `u64` (the storage of the `loom` build).
    #[cfg(loom)]
    #[doc(hidden)]
    fn from_u64(v: u64) -> Self;
}

macro_rules! device_scalar {
    ($($t:ty => $atomic:ident),*) => {$(
        impl sealed::Sealed for $t {}
        impl DeviceScalar for $t {
            #[cfg(not(loom))]
            type Atomic = core::sync::atomic::$atomic;
            #[inline(always)]
            fn swap_be(self) -> Self {
                <$t>::from_be(self)
            }
            #[cfg(not(loom))]
            #[inline(always)]
            fn atomic_new(self) -> Self::Atomic {
                core::sync::atomic::$atomic::new(self)
            }
            #[cfg(not(loom))]
            #[inline(always)]
            fn atomic_load(a: &Self::Atomic) -> Self {
                // Relaxed: the ordering comes from the barrier module, as
                // the doc of `DeviceWord` says.
                a.load(core::sync::atomic::Ordering::Relaxed)
            }
            #[cfg(not(loom))]
            #[inline(always)]
            fn atomic_store(a: &Self::Atomic, v: Self) {
                // Relaxed: the ordering comes from the barrier module.
                a.store(v, core::sync::atomic::Ordering::Relaxed)
            }
            #[cfg(loom)]
            #[inline(always)]
            fn to_u64(self) -> u64 {
                u64::from(self)
            }
            #[cfg(loom)]
            #[inline(always)]
            fn from_u64(v: u64) -> Self {
                // Truncation is the intent: `v` came from `to_u64` of a `$t`.
                v as $t
            }
        }
    )*};
}
device_scalar!(u8 => AtomicU8, u16 => AtomicU16, u32 => AtomicU32, u64 => AtomicU64);

/// One naturally aligned scalar of host memory shared with the device: a
/// doorbell-record counter (`QpDbrec::snd`, `CqDbrec::set_ci`, written by the
/// CPU, DMA-read by the device) or an ownership byte (CQE `op_own`, written
/// by the device's DMA, read by the CPU).
///
/// Every access is a single `Relaxed` atomic load or store of the whole
/// scalar: one plain `mov`/`ldr`/`str` of the scalar, like rdma-core's
/// volatile accesses, and race-free against a peer thread. `DeviceWord` is
/// `Sync`, so a queue that holds one can move to another thread.
/// The `_be` methods convert to and from the big-endian layout of the PRM,
/// so `dbrec.write_be(pi & 0xffff)` is rdma-core's
/// `qp->db[MLX5_SND_DBR] = htobe32(pi & 0xffff)`.
///
/// It orders nothing: publish with [`barrier::to_device`] before
/// [`write_be`](Self::write_be), and follow an ownership
/// [`read`](Self::read) with [`barrier::from_device`].
///
/// Under `cfg(loom)` the word is a `loom` atomic accessed `Relaxed`, so a
/// model sees exactly the ordering the barriers provide and no more.
///
/// [`barrier::to_device`]: crate::barrier::to_device
/// [`barrier::from_device`]: crate::barrier::from_device
///
/// ```
/// use mlx5dp::mmio::DeviceWord;
///
/// let mut dbrec = [0u32; 2]; // MLX5_RCV_DBR, MLX5_SND_DBR
/// // SAFETY: `dbrec[1]` is aligned, lives to the end of the example and is
/// // accessed only through `snd` meanwhile.
/// let snd = unsafe { DeviceWord::from_ptr(&raw mut dbrec[1]) };
/// snd.write_be(0x0102);
/// assert_eq!(snd.read_be(), 0x0102);
/// assert_eq!(dbrec[1].to_ne_bytes(), [0, 0, 0x01, 0x02]);
/// ```
#[cfg(not(loom))]
#[repr(transparent)]
pub struct DeviceWord<T: DeviceScalar> {
    cell: T::Atomic,
}

#[cfg(not(loom))]
impl<T: DeviceScalar> DeviceWord<T> {
    /// A word in ordinary memory, holding `value` as stored (no byte swap);
    /// for the emulated device and tests. Real doorbell records come from
    /// [`DeviceWord::from_ptr`].
    #[inline(always)]
    pub fn new(value: T) -> Self {
        Self {
            cell: value.atomic_new(),
        }
    }

    /// Views the scalar at `ptr` (a doorbell record from `mlx5dv_qp.dbrec`,
    /// a CQE's `op_own` byte) as a `DeviceWord`.
    ///
    /// # Safety
    ///
    /// For the lifetime `'a`:
    /// - `ptr` is non-null, aligned for `T` and valid for reads and writes of
    ///   a `T`;
    /// - the memory is accessed only through `DeviceWord`s or other atomic
    ///   accesses, or by the device's DMA (no Rust reference to it and no
    ///   plain access racing with these atomic ones).
    #[inline(always)]
    pub unsafe fn from_ptr<'a>(ptr: *mut T) -> &'a Self {
        // SAFETY: `DeviceWord<T>` is `repr(transparent)` over `T::Atomic`,
        // which has the size of `T` and (for the four unsigned integers on
        // the targets this crate builds for) its alignment; the caller
        // guarantees validity, alignment, the lifetime and that every other
        // access is atomic or by the device.
        unsafe { &*ptr.cast::<Self>() }
    }

    /// The address of the scalar (to hand to the emulated device).
    #[inline(always)]
    pub fn as_ptr(&self) -> *mut T {
        (&raw const self.cell).cast_mut().cast::<T>()
    }

    /// One load of the scalar as stored in memory: a `Relaxed` atomic load,
    /// which is a single plain load instruction of the whole scalar (the
    /// access rdma-core makes with a volatile read) and, unlike a volatile
    /// read, free of data races with a peer thread (the emulated device).
    #[inline(always)]
    pub fn read(&self) -> T {
        T::atomic_load(&self.cell)
    }

    /// One store of `value` as it should appear in memory: a `Relaxed`
    /// atomic store, a single plain store instruction of the whole scalar.
    #[inline(always)]
    pub fn write(&self, value: T) {
        T::atomic_store(&self.cell, value)
    }
}

#[cfg(loom)]
/// `loom` build of `DeviceWord`: a `loom` atomic, accessed `Relaxed`.
pub struct DeviceWord<T: DeviceScalar> {
    cell: crate::sync::AtomicU64,
    _scalar: core::marker::PhantomData<T>,
}

#[cfg(loom)]
impl<T: DeviceScalar> DeviceWord<T> {
    /// A word holding `value` as stored (inside `loom::model` only).
    pub fn new(value: T) -> Self {
        Self {
            cell: crate::sync::AtomicU64::new(value.to_u64()),
            _scalar: core::marker::PhantomData,
        }
    }

    /// One `Relaxed` load (`loom` may return any store not yet ordered
    /// before this thread's view: the stale doorbell record of a real bus).
    pub fn read(&self) -> T {
        // Relaxed: the ordering under test comes from the barrier fences.
        T::from_u64(self.cell.load(crate::sync::Ordering::Relaxed))
    }

    /// One `Relaxed` store.
    pub fn write(&self, value: T) {
        // Relaxed: the ordering under test comes from the barrier fences.
        self.cell
            .store(value.to_u64(), crate::sync::Ordering::Relaxed);
    }
}

impl<T: DeviceScalar> DeviceWord<T> {
    /// Reads a big-endian scalar: [`read`](Self::read), then from big-endian.
    #[inline(always)]
    pub fn read_be(&self) -> T {
        self.read().swap_be()
    }

    /// Writes a scalar in big-endian order: to big-endian, then
    /// [`write`](Self::write) (e.g. `dbrec.write_be(pi & 0xffff)`).
    #[inline(always)]
    pub fn write_be(&self, value: T) {
        self.write(value.swap_be());
    }
}

impl<T: DeviceScalar + core::fmt::Debug> core::fmt::Debug for DeviceWord<T> {
    /// Shows the current value as stored (one read of the word).
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_tuple("DeviceWord").field(&self.read()).finish()
    }
}

#[cfg(test)]
#[cfg(not(loom))]
mod tests {
    use super::*;

    /// Ordinary memory standing in for a UAR page: 512 bytes = two 256-byte
    /// BlueFlame halves.
    #[repr(C, align(64))]
    struct FakeUar([u8; 512]);

    fn with_register(f: impl FnOnce(&Register)) -> [u8; 512] {
        let mut uar = FakeUar([0; 512]);
        {
            // SAFETY: `uar` is 64-aligned, 512 bytes, outlives `reg` (this
            // block) and is not referenced while `reg` lives.
            let reg = unsafe { Register::new(NonNull::from(&mut uar.0).cast(), 512) };
            f(&reg);
        }
        uar.0
    }

    #[test]
    fn write64_stores_bytes_in_memory_order() {
        let ctrl = [0x00, 0x00, 0x01, 0x0a, 0x00, 0x12, 0x34, 0x02];
        let mem = with_register(|reg| reg.write64(ctrl));
        assert_eq!(mem[..8], ctrl);
        assert!(mem[8..].iter().all(|&b| b == 0));
    }

    #[test]
    fn write64_at_second_blueflame_half() {
        let mem = with_register(|reg| reg.write64_at(256, *b"ABCDEFGH"));
        assert_eq!(&mem[256..264], b"ABCDEFGH");
        assert!(mem[..256].iter().chain(&mem[264..]).all(|&b| b == 0));
    }

    #[test]
    fn write_chunk64_copies_a_wqebb() {
        let mut wqebb = [0u8; 64];
        for (i, b) in wqebb.iter_mut().enumerate() {
            *b = i as u8 ^ 0xa5;
        }
        let mem = with_register(|reg| {
            reg.write_chunk64(256, &wqebb);
            reg.write_chunk64(448, &wqebb);
        });
        assert_eq!(mem[256..320], wqebb);
        assert_eq!(mem[448..512], wqebb);
        assert!(mem[..256].iter().chain(&mem[320..448]).all(|&b| b == 0));
    }

    /// Runs `f` on the [`BfHalves`] of a fresh 512-byte fake UAR (halves of
    /// `half` bytes, the first write to the second if `second`); returns
    /// the memory. `None` if `BfHalves::new` refused.
    fn with_halves(half: usize, second: bool, f: impl FnOnce(&mut BfHalves)) -> Option<[u8; 512]> {
        let mut uar = FakeUar([0; 512]);
        {
            // SAFETY: as in `with_register`.
            let reg = unsafe { Register::new(NonNull::from(&mut uar.0).cast(), 512) };
            let mut halves = BfHalves::new(reg, half, second)?;
            f(&mut halves);
        }
        Some(uar.0)
    }

    #[test]
    fn bf_halves_alternate_from_either_half() {
        let mut offsets = [0usize; 3];
        let mem = with_halves(256, false, |h| {
            for (k, tag) in [*b"AAAAAAAA", *b"BBBBBBBB", *b"CCCCCCCC"]
                .into_iter()
                .enumerate()
            {
                offsets[k] = h.offset();
                h.write64(tag);
                h.toggle();
            }
        });
        assert_eq!(offsets, [0, 256, 0]);
        let mem = mem.expect("two halves of 256 fit 512 bytes");
        assert_eq!(&mem[..8], b"CCCCCCCC");
        assert_eq!(&mem[256..264], b"BBBBBBBB");
        assert!(mem[8..256].iter().chain(&mem[264..]).all(|&b| b == 0));

        let mut first = usize::MAX;
        let mem = with_halves(256, true, |h| {
            first = h.offset();
            h.write64(*b"DDDDDDDD");
        })
        .expect("fits");
        assert_eq!(first, 256);
        assert_eq!(&mem[256..264], b"DDDDDDDD");
        assert!(mem[..256].iter().chain(&mem[264..]).all(|&b| b == 0));
    }

    #[test]
    fn bf_halves_chunks_land_in_the_current_half() {
        let mut wqebb = [0u8; 64];
        for (i, b) in wqebb.iter_mut().enumerate() {
            *b = i as u8 ^ 0x5a;
        }
        let mem = with_halves(256, true, |h| {
            // SAFETY: `(1 + 1) * 64 <= 256`.
            unsafe { h.write_chunk64(1, &wqebb) };
            h.toggle();
            // SAFETY: `(3 + 1) * 64 <= 256`.
            unsafe { h.write_chunk64(3, &wqebb) };
        })
        .expect("fits");
        assert_eq!(mem[320..384], wqebb);
        assert_eq!(mem[192..256], wqebb);
        assert!(mem[..192]
            .iter()
            .chain(&mem[256..320])
            .chain(&mem[384..])
            .all(|&b| b == 0));
    }

    #[test]
    fn bf_halves_without_blueflame_keep_one_address() {
        let mut offsets = [usize::MAX; 2];
        let mem = with_halves(0, false, |h| {
            h.write64(*b"EEEEEEEE");
            offsets[0] = h.offset();
            h.toggle();
            offsets[1] = h.offset();
            h.write64(*b"FFFFFFFF");
        })
        .expect("an 8-byte doorbell fits");
        assert_eq!(offsets, [0, 0]);
        assert_eq!(&mem[..8], b"FFFFFFFF");
        assert!(mem[8..].iter().all(|&b| b == 0));
    }

    #[test]
    fn bf_halves_refuse_what_does_not_fit() {
        assert!(
            with_halves(32, false, |_| {}).is_none(),
            "not a multiple of 64"
        );
        assert!(
            with_halves(320, false, |_| {}).is_none(),
            "two halves exceed 512 bytes"
        );
        assert!(
            with_halves(usize::MAX / 2 + 1, false, |_| {}).is_none(),
            "2 * half overflows"
        );
        assert!(with_halves(256, false, |_| {}).is_some());
    }

    #[test]
    #[should_panic(expected = "out of range or misaligned")]
    fn write64_past_the_end_panics() {
        with_register(|reg| reg.write64_at(512, [0; 8]));
    }

    #[test]
    #[should_panic(expected = "out of range or misaligned")]
    fn write64_misaligned_panics() {
        with_register(|reg| reg.write64_at(4, [0; 8]));
    }

    #[test]
    #[should_panic(expected = "out of range or misaligned")]
    fn write_chunk64_misaligned_panics() {
        with_register(|reg| reg.write_chunk64(32, &[0; 64]));
    }

    #[test]
    #[should_panic(expected = "out of range or misaligned")]
    fn write_chunk64_past_the_end_panics() {
        with_register(|reg| reg.write_chunk64(512, &[0; 64]));
    }

    #[test]
    #[should_panic(expected = "not 8-byte aligned")]
    fn register_rejects_misaligned_base() {
        let mut uar = FakeUar([0; 512]);
        // SAFETY: the span is valid memory; `new` panics on the alignment
        // check before the register could be used.
        let _ = unsafe { Register::new(NonNull::from(&mut uar.0[4]), 8) };
    }

    #[test]
    fn dbrec_word_is_big_endian_in_memory() {
        let mut dbrec = [0u32; 2];
        {
            // SAFETY: `dbrec[1]` is aligned, outlives `snd` (this block) and
            // is accessed only through `snd` meanwhile.
            let snd = unsafe { DeviceWord::from_ptr(&raw mut dbrec[1]) };
            snd.write_be(0x00_01_ff_fe & 0xffff);
            assert_eq!(snd.read_be(), 0xfffe);
            assert_eq!(snd.read(), 0xfffe_u32.to_be());
        }
        assert_eq!(dbrec[0], 0);
        assert_eq!(dbrec[1].to_ne_bytes(), [0x00, 0x00, 0xff, 0xfe]);
    }

    #[test]
    fn owner_byte_word() {
        // A CQE's last 8 bytes with `op_own` = 0xF1 (invalid, owner 1), the
        // value UCX and DPDK initialise every CQE to.
        let mut tail = [0u8; 8];
        tail[7] = 0xf1;
        // SAFETY: a `u8` is always aligned; `tail` outlives `op_own` and is
        // accessed only through it meanwhile.
        let op_own = unsafe { DeviceWord::from_ptr(&raw mut tail[7]) };
        assert_eq!(op_own.read() & 1, 1);
        op_own.write(0x00);
        assert_eq!(op_own.read_be(), 0);
    }

    #[test]
    fn owned_word_and_debug() {
        let w = DeviceWord::new(0x1234_5678_u32.to_be());
        assert_eq!(w.read_be(), 0x1234_5678);
        assert_eq!(w.as_ptr().cast_const(), w.cell.as_ptr().cast_const());
        use std::format;
        assert_eq!(
            format!("{w:?}"),
            format!("DeviceWord({})", 0x1234_5678_u32.to_be())
        );
        let w64 = DeviceWord::new(0_u64);
        w64.write_be(0x0102_0304_0506_0708);
        assert_eq!(w64.read().to_ne_bytes(), [1, 2, 3, 4, 5, 6, 7, 8]);
        let w16 = DeviceWord::new(0_u16);
        w16.write_be(0xabcd);
        assert_eq!(w16.read().to_ne_bytes(), [0xab, 0xcd]);
    }
}
