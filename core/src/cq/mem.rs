//! Raw access to the memory the device shares with the completion queue:
//! the CQE ring, the CQ doorbell record and the CQ doorbell register in the
//! UAR page; every access is volatile and every block says why it is sound.
//! Besides the SIMD decoders (`zip_x86`, `zip_neon`), the only module of
//! `cq` with `unsafe` code (which also holds the one raw store of a
//! [`CompletionSummary`] as two quadwords, [`store_summary`]).
//!
//! Ordering comes from [`crate::barrier`]; the arm doorbell register is a
//! [`crate::mmio::Register`].

use super::CompletionSummary;
use crate::prm::{
    Be32, CqArmWord, Cqe64, MiniCqeArray, SopDropQpn, SrqnUidx, CQE_INVALIDATE, CQ_CI_MASK,
    ENHANCED_FULL_BLOCK, ENHANCED_MAX_MINIS, ENHANCED_NUM_AND_TYPE_MASK, MINI_CQE_ARRAY_SIZE,
};
use core::marker::PhantomData;
use core::ptr::NonNull;

/// Alignment the ring base must have: a CQE's size, so that every CQE
/// proper is 64-byte aligned and may be copied with aligned loads as wide
/// as 32 bytes ([`copy_at`]'s `wide`: a mini array as two `vmovdqa ymm`
/// for the AVX2 writer). mlx5dv (rdma-core) and DPDK CQ buffers are
/// page-aligned.
pub(crate) const RING_ALIGN: usize = 64;

/// A quarter of a [`CqeCopy`]: one load of [`CqRing::copy_cqe`], a
/// 16-byte vector (`movdqa`; [`copy_at`]'s wide copy loads two at once).
#[cfg(target_arch = "x86_64")]
type Chunk = core::arch::x86_64::__m128i;
/// One load of [`CqRing::copy_cqe`]: a 16-byte vector (`ldr q`).
#[cfg(target_arch = "aarch64")]
type Chunk = core::arch::aarch64::uint8x16_t;
/// One load of [`CqRing::copy_cqe`]: 8 bytes elsewhere.
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
type Chunk = u64;
const CHUNKS: usize = Cqe64::SIZE / core::mem::size_of::<Chunk>();

/// Offsets (in the 64-byte CQE proper) of the bytes polled before the
/// barrier: the ownership byte of the basic layout and of the enhanced one.
pub(crate) const OP_OWN: usize = 63;
pub(crate) const VALIDITY: usize = 62;
/// Offsets of the fields [`Run::decode_plain`] copies (PRM-FACTS §9).
const SRQN_UIDX: usize = 32;
const BYTE_CNT: usize = 44;
const WQE_ID: usize = 2;
const SOP_DROP_QPN: usize = 56;
const WQE_COUNTER: usize = 60;

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

    /// Bytes per slot (64 or 128).
    #[inline(always)]
    pub(crate) fn stride(&self) -> usize {
        1 << self.stride_log2
    }

    /// This ring as a [`SizedRing`] of slot size `S`, if that is its slot
    /// size: checked once, then every address is a constant shift.
    #[inline(always)]
    pub(crate) fn sized<const S: usize>(self) -> Option<SizedRing<S>> {
        (S == self.stride()).then_some(SizedRing { ring: self })
    }

    /// Copies the 64-byte CQE of an entry out of device-written memory,
    /// once, into registers: the loads of [`Self::copy_cqe_to`] without the
    /// stores (for decoders that work on the loaded vectors). `wide`: as
    /// in [`copy_at`].
    #[inline(always)]
    pub(crate) fn copy_out(&self, e: Entry, wide: bool) -> CqeCopy {
        // SAFETY: as in `copy_cqe_to`: the 64 source bytes of the entry
        // are in bounds and 64-byte aligned.
        unsafe { copy_at(e.cqe, wide) }
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

/// A [`CqRing`] of slot size `S` (from [`CqRing::sized`], which checked
/// it): the burst poller's view, with constant slot offsets.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SizedRing<const S: usize> {
    ring: CqRing,
}

impl<const S: usize> SizedRing<S> {
    /// The ring.
    #[inline(always)]
    pub(crate) fn ring(&self) -> &CqRing {
        &self.ring
    }

    /// [`CqRing::entry`], with the slot size a constant.
    #[inline(always)]
    pub(crate) fn entry(&self, index: u32) -> Entry {
        let slot = (index & self.ring.mask) as usize;
        // In bounds: `slot <= mask`, the ring holds `mask + 1` slots of `S`
        // bytes (`S` checked by `CqRing::sized`); the CQE proper is the
        // last 64 bytes of its slot.
        Entry {
            cqe: self
                .ring
                .base
                .as_ptr()
                .wrapping_add(slot * S + (S - Cqe64::SIZE)),
        }
    }

    /// The run of at most `max` consecutive entries from consumer index
    /// `ci` up to the ring's end (the part of a burst with one owner
    /// phase).
    #[inline(always)]
    pub(crate) fn run(&self, ci: u32, max: usize) -> Run<S> {
        let slot = (ci & self.ring.mask) as usize;
        let room = self.ring.mask as usize + 1 - slot;
        Run {
            first: self.entry(ci).cqe,
            len: max.min(room),
        }
    }

    /// [`CqRing::write_op_own_range`] of [`CQE_INVALIDATE`] for the
    /// `count` slots (1 to 8: one mini array and the holes after it) from
    /// consumer index `index`: one store per slot at a constant offset when
    /// the slots do not wrap the ring (else the general loop).
    #[inline(always)]
    pub(crate) fn invalidate_array(&self, index: u32, count: u32) {
        let slot = (index & self.ring.mask) as usize;
        let count = count as usize;
        if count <= 8 && slot + count <= self.ring.mask as usize + 1 {
            let p = self.entry(index).cqe.wrapping_add(OP_OWN);
            let store = |j: usize| {
                // SAFETY: `j < count` at every call below and
                // `slot + count <= entries` with slot size `S` (checked by
                // `CqRing::sized`): the `op_own` byte of slot `slot + j` is
                // in bounds and valid for writes; the device does not write
                // consumed slots (as in `write_op_own_range`).
                unsafe { p.add(j * S).write_volatile(CQE_INVALIDATE) }
            };
            // (Seven: the first array of a session, from the title's next
            // slot.)
            if count == 8 {
                (0..8).for_each(store);
            } else if count == 7 {
                (0..7).for_each(store);
            } else {
                (0..count).for_each(store);
            }
        } else if count > 0 {
            self.ring
                .write_op_own_range(index, 0, count as u32 - 1, CQE_INVALIDATE);
        }
    }
}

/// `len` consecutive whole mini arrays of a basic session (from
/// [`SizedRing::arrays`]): array `i`'s slot is the CQE proper at `first +
/// i * 8 * S`, followed by its seven holes, and none of the `8 * len` slots
/// wraps the ring. The burst poller's array loop walks them with a
/// pointer, no index masking.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ArrayRun<const S: usize> {
    /// The CQE proper of the first array's slot.
    first: *mut u8,
    len: usize,
}

impl<const S: usize> SizedRing<S> {
    /// The whole mini arrays (each eight slots: the array's slot and the
    /// seven holes after it) from consumer index `index`, at most `count`,
    /// up to the ring's end: empty if the first one wraps.
    #[inline(always)]
    pub(crate) fn arrays(&self, index: u32, count: usize) -> ArrayRun<S> {
        let slot = (index & self.ring.mask) as usize;
        let room = (self.ring.mask as usize + 1 - slot) / MINI_CQE_ARRAY_SIZE;
        ArrayRun {
            first: self.entry(index).cqe,
            len: count.min(room),
        }
    }
}

impl<const S: usize> ArrayRun<S> {
    /// How many arrays.
    #[inline(always)]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Array `i`'s slot copied out once ([`CqRing::copy_out`]); `None`
    /// past the run.
    #[inline(always)]
    /// `wide`: as in [`copy_at`].
    pub(crate) fn copy(&self, i: usize, wide: bool) -> Option<CqeCopy> {
        if i >= self.len {
            return None;
        }
        let src = self.first.wrapping_add(i * MINI_CQE_ARRAY_SIZE * S);
        // SAFETY: `i < len`: the array's slot is in bounds (`arrays` clamps
        // the run to the ring's end) and its CQE proper is 64-byte aligned
        // (as in `copy_cqe_to`).
        Some(unsafe { copy_at(src, wide) })
    }

    /// Invalidates array `i`'s slot and its seven holes (as
    /// [`SizedRing::invalidate_array`]: eight constant-offset stores); no
    /// effect past the run.
    #[inline(always)]
    pub(crate) fn invalidate(&self, i: usize) {
        if i >= self.len {
            return;
        }
        let p = self
            .first
            .wrapping_add(i * MINI_CQE_ARRAY_SIZE * S + OP_OWN);
        for j in 0..MINI_CQE_ARRAY_SIZE {
            // SAFETY: the eight slots of array `i < len` lie before the
            // ring's end (`arrays`), so the `op_own` byte of slot `j < 8`
            // after the array's is in bounds and valid for writes; the
            // device does not write consumed slots (as in
            // `write_op_own_range`).
            unsafe { p.add(j * S).write_volatile(CQE_INVALIDATE) }
        }
    }
}

/// Basic layout: the entries from a session title up to the ring's end
/// (from [`SizedRing::sessions`]), walked by the burst poller one session
/// of one mini array at a time (the title, the array, its holes): a
/// pointer and the entries left, no index masking.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SessionWalk<const S: usize> {
    /// The CQE proper of the entry at the walk's position.
    at: *mut u8,
    /// Entries from `at` to the ring's end (0: the walk is over).
    left: usize,
}

impl<const S: usize> SizedRing<S> {
    /// The entries from consumer index `ci` up to the ring's end, as a
    /// [`SessionWalk`].
    #[inline(always)]
    pub(crate) fn sessions(&self, ci: u32) -> SessionWalk<S> {
        let slot = (ci & self.ring.mask) as usize;
        SessionWalk {
            at: self.entry(ci).cqe,
            left: self.ring.mask as usize + 1 - slot,
        }
    }
}

impl<const S: usize> SessionWalk<S> {
    /// The entry at the position if its `op_own` byte, read once
    /// (volatile), is `b0` (for a caller that classified `b0` in this
    /// pass: an owned session title): then the from-device barrier, then
    /// the entry copied out once. `None` at the ring's end or for another
    /// byte, nothing else read.
    #[inline(always)]
    /// `wide`: as in [`copy_at`].
    pub(crate) fn next_title(&self, b0: u8, wide: bool) -> Option<CqeCopy> {
        if self.left == 0 {
            return None;
        }
        // SAFETY: `left > 0`: the entry is in bounds (`sessions` counts the
        // entries up to the ring's end, `take` moves past no more than it
        // counted); u8 has no alignment need.
        if unsafe { self.at.add(OP_OWN).read_volatile() } != b0 {
            return None;
        }
        // The copy reads the body the ownership byte just published: not
        // before it (PRM-FACTS §9.2).
        crate::barrier::from_device();
        // SAFETY: as above, and the CQE proper is `Chunk`-aligned (as in
        // `copy_cqe_to`); any bits are a valid `Chunk`.
        Some(unsafe { copy_at(self.at, wide) })
    }

    /// [`Self::next_title`] for a caller that needs only the title's
    /// minis count and first counter: if the entry at the position has
    /// `op_own` byte `b0` (read once, volatile), the from-device barrier,
    /// then its `byte_cnt` and `wqe_counter` copied once (two loads),
    /// returned in host order. The rest of the title is read only if the
    /// caller needs it after all ([`Self::title_rest`]). `None` at the
    /// ring's end or for another byte, nothing else read.
    #[inline(always)]
    pub(crate) fn next_title_fields(&self, b0: u8) -> Option<(u32, u16)> {
        if self.left == 0 {
            return None;
        }
        // SAFETY: as in `next_title`.
        if unsafe { self.at.add(OP_OWN).read_volatile() } != b0 {
            return None;
        }
        // The fields read the body the ownership byte just published: not
        // before it (PRM-FACTS §9.2).
        crate::barrier::from_device();
        // SAFETY: `left > 0`: the entry is in bounds; both fields are
        // naturally aligned in the `Chunk`-aligned CQE proper.
        let (count, counter) = unsafe {
            (
                self.at.add(BYTE_CNT).cast::<u32>().read_volatile(),
                self.at.add(WQE_COUNTER).cast::<u16>().read_volatile(),
            )
        };
        Some((u32::from_be(count), u16::from_be(counter)))
    }

    /// The whole title at the position, whose ownership byte `op_own`,
    /// `byte_cnt` `count` and `wqe_counter` `counter` (host order)
    /// [`Self::next_title_fields`] read (the walk not moved since): as
    /// [`CqRing::copy_out`] would have copied it, the bytes not read yet
    /// copied once now (after the barrier `next_title_fields` issued), the
    /// others as read then. Every byte of the entry is read once. `None`
    /// at the ring's end (not after `next_title_fields`).
    #[cold]
    #[inline(never)]
    pub(crate) fn title_rest(self, op_own: u8, count: u32, counter: u16) -> Option<CqeCopy> {
        if self.left == 0 {
            return None;
        }
        let mut bytes = [0u8; Cqe64::SIZE];
        for off in (0..BYTE_CNT).chain(BYTE_CNT + 4..WQE_COUNTER).step_by(4) {
            // SAFETY: `left > 0`: the CQE proper at `at` is in bounds;
            // `off + 4 <= 60`, word-aligned.
            let w = unsafe { self.at.add(off).cast::<u32>().read_volatile() };
            if let Some(dst) = bytes.get_mut(off..off + 4) {
                dst.copy_from_slice(&w.to_ne_bytes());
            }
        }
        bytes[BYTE_CNT..BYTE_CNT + 4].copy_from_slice(&count.to_be_bytes());
        bytes[WQE_COUNTER..WQE_COUNTER + 2].copy_from_slice(&counter.to_be_bytes());
        // SAFETY: byte 62 of the in-bounds CQE proper (as above).
        bytes[WQE_COUNTER + 2] = unsafe { self.at.add(WQE_COUNTER + 2).read_volatile() };
        bytes[OP_OWN] = op_own;
        let src = bytes.as_ptr().cast::<Chunk>();
        // SAFETY: `CHUNKS` chunks cover the 64 bytes of `bytes` (unaligned
        // reads of a local array); any bits are a valid `Chunk`.
        Some(CqeCopy(core::array::from_fn(|i| unsafe {
            src.add(i).read_unaligned()
        })))
    }

    /// The session of `count` minis titled by the entry at the position, if
    /// it has one mini array (`count` 2 to 8) and its `count` entries lie
    /// before the ring's end: its array (the next entry) copied once, that
    /// entry and the holes after it (`count - 1` entries) invalidated, the
    /// position moved past the session.
    #[inline(always)]
    /// `wide`: as in [`copy_at`].
    pub(crate) fn take(&mut self, count: u32, wide: bool) -> Option<CqeCopy> {
        let count = count as usize;
        if !(2..=MINI_CQE_ARRAY_SIZE).contains(&count) || count > self.left {
            return None;
        }
        let array = self.at.wrapping_add(S);
        // SAFETY: `2 <= count <= left`: the array's entry (1 from the
        // position) is in bounds and `Chunk`-aligned (as in `next_title`).
        let copy = unsafe { copy_at(array, wide) };
        let p = array.wrapping_add(OP_OWN);
        let store = |j: usize| {
            // SAFETY: `j < count - 1` at every call below: the `op_own`
            // byte of entry `1 + j < count <= left` from the position, in
            // bounds and valid for writes; the device does not write
            // consumed slots (as in `CqRing::write_op_own_range`).
            unsafe { p.add(j * S).write_volatile(CQE_INVALIDATE) }
        };
        // (Seven: a session of eight.)
        if count == MINI_CQE_ARRAY_SIZE {
            (0..MINI_CQE_ARRAY_SIZE - 1).for_each(store);
        } else {
            (0..count - 1).for_each(store);
        }
        self.at = self.at.wrapping_add(count * S);
        self.left -= count;
        Some(copy)
    }
}

impl<const S: usize> SessionWalk<S> {
    /// Moves the position `i` entries on (at most to the ring's end).
    #[inline(always)]
    pub(crate) fn skip(&mut self, i: usize) {
        let i = i.min(self.left);
        self.at = self.at.wrapping_add(i * S);
        self.left -= i;
    }
}

/// Bytes of a [`CompletionSummary`].
const SUMMARY: usize = core::mem::size_of::<CompletionSummary>();

/// Basic layout: the start of a [`SessionWalk`] and of the `out` of a
/// burst, walked together by the burst poller one session of one mini
/// array at a time while both have room for eight (a session of `c`
/// minis takes `c` entries and writes `c` summaries, eight stored): one
/// index and one bound for both, no index masking (from
/// [`SessionWalk::short_run`]). Below, `i` is the run's index (entries
/// taken, `off / SUMMARY`) and `left` the walk's entries to the ring's end
/// when the run began.
#[derive(Debug)]
pub(crate) struct ShortRun<'a, const S: usize> {
    /// The CQE proper of the walk's entry at index 0.
    at: *mut u8,
    /// `out[0]`.
    dst: *mut CompletionSummary,
    /// Entries (= summaries) taken, times [`SUMMARY`] (the summaries'
    /// offset in bytes; the entries' is a multiple of it, `S / SUMMARY`).
    off: usize,
    /// The last `off` with room for eight: the smaller of `out.len()` and
    /// the entries to the ring's end, less eight, times [`SUMMARY`].
    last: usize,
    /// `dst` borrows `out` mutably.
    _out: PhantomData<&'a mut [CompletionSummary]>,
}

impl<const S: usize> SessionWalk<S> {
    /// The walk (not moved) and `out` as a [`ShortRun`], if both have room
    /// for eight.
    #[inline(always)]
    pub(crate) fn short_run<'a>(
        &self,
        out: &'a mut [CompletionSummary],
    ) -> Option<ShortRun<'a, S>> {
        let last = out.len().min(self.left).checked_sub(MINI_CQE_ARRAY_SIZE)?;
        Some(ShortRun {
            at: self.at,
            dst: out.as_mut_ptr(),
            off: 0,
            last: last * SUMMARY,
            _out: PhantomData,
        })
    }
}

impl<const S: usize> ShortRun<'_, S> {
    /// An entry's offset is `S / SUMMARY` times its summary's.
    const ENTRY_PER_SUMMARY: usize = {
        assert!(S % SUMMARY == 0);
        S / SUMMARY
    };

    /// Entries taken (= summaries written).
    #[inline(always)]
    pub(crate) fn taken(&self) -> usize {
        self.off / SUMMARY
    }

    /// The title at the run's index (`i`), if the run has room for eight
    /// more:
    /// `Some(None)` if its `op_own` byte, read once (volatile), is not
    /// `b0` (nothing else read); else (for a caller that classified `b0`
    /// in this pass: an owned session title) the from-device barrier,
    /// then its `byte_cnt` and `wqe_counter` copied once (two loads), the
    /// count as read (big-endian: [`ShortRun::session`] takes it so), the
    /// counter in host order (as [`SessionWalk::next_title_fields`]).
    /// `None`, nothing read, with less room.
    #[inline(always)]
    pub(crate) fn title(&self, b0: u8) -> Option<Option<(u32, u16)>> {
        if self.off > self.last {
            return None;
        }
        let at = self.at.wrapping_add(self.off * Self::ENTRY_PER_SUMMARY);
        // SAFETY: `off <= last`, so `i + 8 <= left`: the entry is in bounds;
        // u8 has no alignment need.
        if unsafe { at.add(OP_OWN).read_volatile() } != b0 {
            return Some(None);
        }
        // The fields read the body the ownership byte just published: not
        // before it (PRM-FACTS §9.2).
        crate::barrier::from_device();
        // SAFETY: as above; both fields are naturally aligned in the
        // `Chunk`-aligned CQE proper.
        let (count, counter) = unsafe {
            (
                at.add(BYTE_CNT).cast::<u32>().read_volatile(),
                at.add(WQE_COUNTER).cast::<u16>().read_volatile(),
            )
        };
        Some(Some((count, u16::from_be(counter))))
    }

    /// The session of `count` minis (`count_be`: `byte_cnt` as read,
    /// big-endian; a session of eight, the usual one, needs no swap)
    /// titled by the entry at the run's index, if it has one mini array
    /// (`count` 2 to 8) and the run room for eight: its array (the next
    /// entry) copied once, that entry and the holes after it (`count - 1`
    /// entries) invalidated (as [`SessionWalk::take`]), the index moved
    /// past the session; with the eight summaries of `out` from the
    /// session's first (lanes past `count` land on later summaries, which
    /// the next session or the caller's count covers). `None`, nothing
    /// read or written, otherwise.
    /// `wide`: as in [`copy_at`].
    #[inline(always)]
    pub(crate) fn session(
        &mut self,
        count_be: u32,
        wide: bool,
    ) -> Option<(CqeCopy, &mut [CompletionSummary; MINI_CQE_ARRAY_SIZE])> {
        if self.off > self.last {
            return None;
        }
        let array = self.at.wrapping_add(self.off * Self::ENTRY_PER_SUMMARY + S);
        let p = array.wrapping_add(OP_OWN);
        let store = |j: usize| {
            // SAFETY: `j < count - 1 <= 7` at every call below: the
            // `op_own` byte of entry `i + 1 + j < i + 8 <= left` (`off <=
            // last`), in bounds and valid for writes; the device does not
            // write consumed slots (as in `CqRing::write_op_own_range`).
            unsafe { p.add(j * S).write_volatile(CQE_INVALIDATE) }
        };
        // SAFETY: `off <= last`, so `i + 8 <= out.len()`: `out[i..i + 8]`
        // (`off` bytes on), in bounds, `CompletionSummary`-aligned, borrowed
        // mutably for `'a` through `dst` (`out` is not used while the run
        // lives) and handed out only for as long as `self` is borrowed
        // mutably, so not aliased.
        let dst = unsafe {
            &mut *self
                .dst
                .byte_add(self.off)
                .cast::<[CompletionSummary; MINI_CQE_ARRAY_SIZE]>()
        };
        // (Seven: a session of eight.)
        let copy = if count_be == (MINI_CQE_ARRAY_SIZE as u32).to_be() {
            // SAFETY: `off <= last`, so `i + 8 <= left`: the array's entry
            // (`i + 1`) is in bounds and `Chunk`-aligned (as in
            // `SessionWalk::next_title`).
            let copy = unsafe { copy_at(array, wide) };
            (0..MINI_CQE_ARRAY_SIZE - 1).for_each(store);
            self.off += MINI_CQE_ARRAY_SIZE * SUMMARY;
            copy
        } else {
            let count = u32::from_be(count_be) as usize;
            if !(2..MINI_CQE_ARRAY_SIZE).contains(&count) {
                return None;
            }
            // SAFETY: as above.
            let copy = unsafe { copy_at(array, wide) };
            (0..count - 1).for_each(store);
            self.off += count * SUMMARY;
            copy
        };
        Some((copy, dst))
    }
}

impl<const S: usize> SessionWalk<S> {
    /// The session of `count` minis titled by the entry at the position,
    /// if it has more than one mini array (`count` above 8) and its
    /// `count` entries lie before the ring's end: where its arrays are
    /// ([`SessionArrays`]; nothing read or written yet), the position
    /// moved past the session.
    #[inline(always)]
    pub(crate) fn take_arrays(&mut self, count: u32) -> Option<SessionArrays<S>> {
        let count = count as usize;
        if count <= MINI_CQE_ARRAY_SIZE || count > self.left {
            return None;
        }
        let title = self.at;
        self.at = self.at.wrapping_add(count * S);
        self.left -= count;
        Some(SessionArrays { title, count })
    }
}

/// Basic layout: the mini arrays of a session of more than one array
/// whose entries (the title, the arrays, the holes) all lie before the
/// ring's end (from [`SessionWalk::take_arrays`]): the first array at
/// entry 1 (its entry and the six holes after it), array `k >= 1` at entry
/// `8k` (its entry and the holes up to entry `8k + 7` or the session's
/// end), with constant offsets from the title's entry, no index masking.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SessionArrays<const S: usize> {
    /// The CQE proper of the title's entry.
    title: *mut u8,
    /// Minis (= entries) of the session: above 8, at most the entries from
    /// the title to the ring's end.
    count: usize,
}

impl<const S: usize> SessionArrays<S> {
    /// The first array (entry 1) copied out once, then its entry and the
    /// six holes after it invalidated (as [`SessionWalk::take`] of a
    /// session of eight).
    #[inline(always)]
    /// `wide`: as in [`copy_at`].
    pub(crate) fn first(&self, wide: bool) -> CqeCopy {
        let array = self.title.wrapping_add(S);
        // SAFETY: `count > 8`: entry 1 is in bounds (`take_arrays` checked
        // `count` entries from the title before the ring's end) and
        // `Chunk`-aligned (as in `SessionWalk::next_title`).
        let copy = unsafe { copy_at(array, wide) };
        let p = array.wrapping_add(OP_OWN);
        for j in 0..MINI_CQE_ARRAY_SIZE - 1 {
            // SAFETY: entry `1 + j <= 7 < count` from the title: in bounds
            // and valid for writes; the device does not write consumed
            // slots (as in `CqRing::write_op_own_range`).
            unsafe { p.add(j * S).write_volatile(CQE_INVALIDATE) }
        }
        copy
    }

    /// The whole arrays after the first (array `k` at entry `8k`, all
    /// eight of its entries in the session), at most `max`.
    #[inline(always)]
    pub(crate) fn whole(&self, max: usize) -> ArrayRun<S> {
        ArrayRun {
            first: self.title.wrapping_add(MINI_CQE_ARRAY_SIZE * S),
            // Arrays 1 to `count / 8 - 1`: entries `8 .. 8 * (count / 8)`,
            // below `count`.
            len: (self.count / MINI_CQE_ARRAY_SIZE - 1).min(max),
        }
    }

    /// The number of minis in the session's last array if it is partial
    /// (`count % 8`, 0 if not).
    #[inline(always)]
    pub(crate) fn last_len(&self) -> usize {
        self.count % MINI_CQE_ARRAY_SIZE
    }

    /// The session's last array if it is partial (array `count / 8`, with
    /// `count % 8` minis and entries) copied out once, then its entries
    /// invalidated; `None` if the last array is whole.
    #[inline(always)]
    /// `wide`: as in [`copy_at`].
    pub(crate) fn last(&self, wide: bool) -> Option<CqeCopy> {
        let len = self.count % MINI_CQE_ARRAY_SIZE;
        if len == 0 {
            return None;
        }
        let array = self
            .title
            .wrapping_add(self.count / MINI_CQE_ARRAY_SIZE * MINI_CQE_ARRAY_SIZE * S);
        // SAFETY: entry `8 * (count / 8) < count` from the title: in bounds
        // and `Chunk`-aligned (as in `first`).
        let copy = unsafe { copy_at(array, wide) };
        let p = array.wrapping_add(OP_OWN);
        for j in 0..len {
            // SAFETY: entry `8 * (count / 8) + j < count` from the title
            // (`j < count % 8`): in bounds and valid for writes; the device
            // does not write consumed slots (as in `first`).
            unsafe { p.add(j * S).write_volatile(CQE_INVALIDATE) }
        }
        Some(copy)
    }
}

/// Enhanced layout: the entries at consumer indexes `ci`, `ci + 7`, `ci +
/// 14`… up to the ring's end (from [`SizedRing::blocks`]): where a run of
/// full compressed CQEs (seven minis each, PRM-FACTS §10.5) has its
/// entries, all of one pass (one validity iteration count, `vic`). The
/// burst poller's block loop walks them with a pointer.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BlockRun<const S: usize> {
    /// The CQE proper of entry `ci`.
    first: *mut u8,
    /// Slots after `ci`'s before the ring's end: entry `k` is in the run
    /// iff `7k <= last`.
    last: usize,
    /// The validity iteration count of this pass.
    vic: u8,
}

/// The entry step of a [`BlockRun`]: a full enhanced compressed CQE's
/// minis.
const BLOCK_STEP: usize = ENHANCED_MAX_MINIS;

/// Bytes 62–63 of a CQE read as one little-endian `u16`: the validity byte
/// low, `num_and_type` (`op_own`) high. A full block's `num_and_type` (N −
/// 1 = 6, format 3; PRM-FACTS §10.5), before the pass's validity byte is
/// or-ed in.
const FULL_HEAD: u16 = (ENHANCED_FULL_BLOCK as u16) << 8;
/// The bits of [`FULL_HEAD`] compared: the validity byte and the bits of
/// `num_and_type` the layout defines.
const HEAD_MASK: u16 = ((ENHANCED_NUM_AND_TYPE_MASK as u16) << 8) | 0xff;

/// An entry of a [`BlockRun`] by its ownership bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Head {
    /// Owned, a full compressed CQE.
    Full,
    /// Owned, anything else.
    Other,
    /// Not owned.
    NotOwned,
}

impl<const S: usize> SizedRing<S> {
    /// The entries `ci + 7k` before the ring's end ([`BlockRun`]), owned
    /// when their validity byte is `vic` (the iteration count of `ci`'s
    /// pass, the same for all of them).
    #[inline(always)]
    pub(crate) fn blocks(&self, ci: u32, vic: u8) -> BlockRun<S> {
        let slot = (ci & self.ring.mask) as usize;
        BlockRun {
            first: self.entry(ci).cqe,
            last: self.ring.mask as usize - slot,
            vic,
        }
    }
}

impl<const S: usize> BlockRun<S> {
    /// The run's first entries whose seven minis' summaries fit in `room`
    /// places ([`FitBlocks`]: one bound, no division).
    #[cfg_attr(
        not(all(target_arch = "x86_64", target_feature = "sse2")),
        expect(dead_code, reason = "only the AVX2 block writer bounds its run ahead")
    )]
    #[inline(always)]
    pub(crate) fn fit(self, room: usize) -> FitBlocks<S> {
        FitBlocks {
            // Entry `k` is in iff `7k <= last` (before the ring's end) and
            // `7k + 7 <= room` (its summaries fit): `7k < end`, no
            // division; kept as `16 end`.
            end16: (self.last + 1).min(room.saturating_sub(BLOCK_STEP - 1)) * 16,
            run: self,
        }
    }

    /// Step 1 for the entries `from..to` (those in the run): each one's
    /// validity byte and `num_and_type` read once, together (as in
    /// [`Self::read_in`]), in order, while they are owned full blocks.
    /// Returns how many were and whether the entry that ended the scan
    /// (inside `from..to` and the run) is owned, not a full block. The
    /// caller issues the from-device barrier before copying any of them
    /// ([`Self::copy`]).
    #[inline(always)]
    pub(crate) fn scan_heads(&self, from: usize, to: usize) -> (usize, bool) {
        let mut k = from;
        while k < to && k * BLOCK_STEP <= self.last {
            // SAFETY: `7k <= last`, just checked.
            match unsafe { self.head(k) } {
                Head::Full => k += 1,
                Head::Other => return (k - from, true),
                Head::NotOwned => break,
            }
        }
        (k.saturating_sub(from), false)
    }

    /// Entry `k` copied out once, if in the run. The caller read its
    /// ownership bytes ([`Self::scan_heads`]: owned) and then issued the
    /// from-device barrier.
    #[inline(always)]
    pub(crate) fn copy(&self, k: usize) -> Option<CqeCopy> {
        if k * BLOCK_STEP > self.last {
            return None;
        }
        // SAFETY: `7k <= last`: an in-bounds entry of a ring aligned to
        // `RING_ALIGN`.
        Some(unsafe { copy_at(self.first.wrapping_add(k * BLOCK_STEP * S), false) })
    }

    /// The class of entry `k` by its validity byte and `num_and_type`, read
    /// once together (one aligned 16-bit volatile load).
    ///
    /// # Safety
    /// `7k <= self.last` (the entry lies before the ring's end).
    #[inline(always)]
    unsafe fn head(&self, k: usize) -> Head {
        let cqe = self.first.wrapping_add(k * BLOCK_STEP * S);
        // SAFETY: `7k <= last` (caller contract): slot `ci + 7k` is in
        // bounds; bytes 62–63 of a CQE of a ring aligned to `RING_ALIGN`
        // are 2-byte aligned.
        let head = unsafe { cqe.add(VALIDITY).cast::<u16>().read_volatile() };
        let diff = u16::from_le(head) ^ (FULL_HEAD | u16::from(self.vic));
        if diff & HEAD_MASK == 0 {
            Head::Full
        } else if diff as u8 == 0 {
            Head::Other
        } else {
            Head::NotOwned
        }
    }

    /// The entry at slot offset `o` from the run's first if owned
    /// (PRM-FACTS §9.2), its class decided before the
    /// barrier: the validity byte and `num_and_type` (`op_own`, byte 63:
    /// PRM-FACTS §10.5) read together, once, by one aligned 16-bit
    /// volatile load (single-copy atomic), as the basic layout reads its
    /// owner bit with the opcode and format. Not owned: `None`,
    /// nothing else read; owned: the from-device barrier, then the entry
    /// copied out once, a full block (seven minis) or not by the bytes read
    /// before the barrier. The offset is given as `o16 = 16 o` (see
    /// [`FitBlocks::read_block`]).
    ///
    /// # Safety
    /// `o16 = 16 o` with `o <= self.last` (the entry lies before the
    /// ring's end).
    #[inline(always)]
    unsafe fn read_in(&self, o16: usize) -> Option<Block> {
        const { assert!(S % 16 == 0) };
        // `o16 * (S / 16) = o * S` (`o16 = 16 o`: caller contract).
        let cqe = self.first.wrapping_add(o16 * (S / 16));
        // SAFETY: `o <= last` (caller contract): slot `ci + o` is in
        // bounds (at most the ring's last); bytes 62–63 of a CQE of a ring
        // aligned to `RING_ALIGN` are 2-byte aligned.
        let head = unsafe { cqe.add(VALIDITY).cast::<u16>().read_volatile() };
        // Zero where the bytes are a full block's of this pass: the usual
        // entry by one test.
        let diff = u16::from_le(head) ^ (FULL_HEAD | u16::from(self.vic));
        let full = diff & HEAD_MASK == 0;
        if full {
            // The copy reads the body the validity byte just published:
            // not before it (PRM-FACTS §9.2, §10.5).
            crate::barrier::from_device();
            // SAFETY: `cqe` is in bounds (caller contract).
            let copy = unsafe { copy_at(cqe, true) };
            return Some(Block { copy, full });
        }
        if diff as u8 != 0 {
            return None;
        }
        // The copy reads the body the validity byte just published: not
        // before it (PRM-FACTS §9.2, §10.5).
        crate::barrier::from_device();
        // SAFETY: as above.
        let copy = unsafe { copy_at(cqe, true) };
        Some(Block { copy, full })
    }
}

/// The 64-byte CQE proper at `cqe` copied out once (as
/// [`CqRing::copy_out`]). The caller read its ownership byte and issued
/// the from-device barrier.
///
/// `wide` (x86-64; ignored elsewhere): two 32-byte volatile loads, for
/// callers compiled with AVX (one `vmovdqa ymm` each; the AVX2 block
/// writer shuffles each half as loaded, within its 16-byte lanes, no
/// permute or insert); otherwise four 16-byte loads, what a caller without AVX
/// handles best. Either way each byte is read once.
///
/// # Safety
/// `cqe` is the CQE proper of an in-bounds entry of a ring aligned to
/// [`RING_ALIGN`].
#[inline(always)]
unsafe fn copy_at(cqe: *mut u8, wide: bool) -> CqeCopy {
    #[cfg(target_arch = "x86_64")]
    if wide {
        use core::arch::x86_64::__m256i;
        let src = cqe.cast::<__m256i>();
        // SAFETY: the 64 bytes of an in-bounds CQE (caller contract), 64-byte
        // aligned (a multiple of 64 from a `RING_ALIGN`-aligned base), so
        // both 32-byte halves are `__m256i`-aligned (one `vmovdqa ymm` each
        // in a caller compiled with AVX); any bits are a valid `__m256i`.
        let halves = unsafe { [src.read_volatile(), src.add(1).read_volatile()] };
        // SAFETY: two `__m256i` are the four `Chunk`s of a copy, in order
        // (same size, plain integers: any bits are valid).
        return CqeCopy(unsafe { core::mem::transmute::<[__m256i; 2], [Chunk; CHUNKS]>(halves) });
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = wide;
    let src = cqe.cast::<Chunk>();
    // SAFETY: the 64 bytes of an in-bounds CQE (caller contract),
    // `Chunk`-aligned; any bits are a valid `Chunk`.
    CqeCopy(core::array::from_fn(|i| unsafe {
        src.add(i).read_volatile()
    }))
}

/// The entries of a [`BlockRun`] whose summaries fit in the room given to
/// [`BlockRun::fit`]: a loop over them needs no other bound
/// ([`Self::read_block`] tests the one bound, `16 o < 16 end` for the
/// entry at slot offset `o` = 7k).
#[derive(Clone, Copy, Debug)]
pub(crate) struct FitBlocks<const S: usize> {
    run: BlockRun<S>,
    /// Sixteen times the bound `end`: entry `k` is in iff `7k < end`;
    /// `end <= run.last + 1`.
    end16: usize,
}

#[cfg_attr(
    not(all(target_arch = "x86_64", target_feature = "sse2")),
    expect(dead_code, reason = "only the AVX2 block writer bounds its run ahead")
)]
impl<const S: usize> FitBlocks<S> {
    /// The entry at slot offset `o = o16 / 16` (consumer index `ci + o`;
    /// the run's entry `o / 7` for `o` a multiple of seven), if in (`o16 <
    /// 16 end`) and owned ([`BlockRun::read_in`]). Given as `o16 = 16 o`,
    /// the byte offset of its first summary in the block writer's `out`,
    /// so that one register indexes the ring and `out`.
    ///
    /// # Safety
    /// `o16` is a multiple of 16.
    #[inline(always)]
    pub(crate) unsafe fn read_block(&self, o16: usize) -> Option<Block> {
        if o16 >= self.end16 {
            return None;
        }
        // SAFETY: `o16 = 16 o` (caller contract) with `16 o < 16 end <=
        // 16 (run.last + 1)`, so `o <= run.last`.
        unsafe { self.run.read_in(o16) }
    }
}

/// An owned entry of a [`BlockRun`], copied by [`FitBlocks::read_block`].
#[cfg_attr(
    not(all(target_arch = "x86_64", target_feature = "sse2")),
    expect(dead_code, reason = "only the AVX2 block writer reads entry by entry")
)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct Block {
    /// The entry, copied out once.
    pub(crate) copy: CqeCopy,
    /// Whether it is a full compressed CQE (seven minis), by the bytes
    /// read before the barrier.
    pub(crate) full: bool,
}

/// The address of one CQE of a [`CqRing`] (from [`CqRing::entry`]): in
/// bounds by construction, only usable with the ring's accessors.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Entry {
    cqe: *mut u8,
}

/// One CQE copied out by [`CqRing::copy_out`]: its 64 bytes as loaded.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CqeCopy(pub(crate) [Chunk; CHUNKS]);

impl CqeCopy {
    /// The copy as a [`Cqe64`].
    #[inline(always)]
    pub(crate) fn to_cqe(self) -> Cqe64 {
        let mut cqe = Cqe64::default();
        self.store_to(&mut cqe);
        cqe
    }

    /// Stores the copy into `dst`: one store per chunk (where assigning
    /// [`Self::to_cqe`] may be split field by field).
    #[inline(always)]
    pub(crate) fn store_to(self, dst: &mut Cqe64) {
        let out = (dst as *mut Cqe64).cast::<Chunk>();
        for (i, chunk) in self.0.into_iter().enumerate() {
            // SAFETY: `i < CHUNKS`, so the store lies inside the 64 bytes of
            // `dst` (align 1: unaligned store); any bits are a valid
            // `Cqe64` (zerocopy `FromBytes`).
            unsafe { out.add(i).write_unaligned(chunk) }
        }
    }

    /// The copy as a mini array (bytes 0–63 of the CQE).
    #[inline(always)]
    pub(crate) fn to_minis(self) -> MiniCqeArray {
        zerocopy::transmute!(self.to_cqe())
    }
}

/// Stores a summary as its two little-endian quadwords: `wr_id`, then
/// `hi` = [`CompletionSummary::high_word`]. Two 8-byte stores, where a
/// field-by-field store is five (the compiler does not merge the constant
/// status and origin bytes with a variable opcode byte). Bits 57–63 of `hi`
/// are cleared, so byte 15 is always a valid [`super::Origin`].
#[inline(always)]
pub(crate) fn store_summary(slot: &mut CompletionSummary, wr_id: u64, hi: u64) {
    let hi = hi & !(0xfe << 56);
    let p = (slot as *mut CompletionSummary).cast::<u64>();
    // SAFETY: `slot` is a valid, exclusive `CompletionSummary`: 16 bytes,
    // 16-byte aligned (`repr(C, align(16))`), so both 8-byte stores are in
    // bounds and aligned. The bytes written are a valid summary: `wr_id`
    // (bytes 0–7), `byte_len`, `status` and `opcode` (8–14) are plain
    // integers in their `repr(C)` places (layout asserted in
    // `completion.rs`), and byte 15 (`origin`) is 0 or 1 (masked above).
    unsafe {
        p.write(wr_id.to_le());
        p.add(1).write(hi.to_le());
    }
}

/// Entries per loop test in [`Run::scan_same`] and [`Run::decode_plain`].
const UNROLL: usize = 8;

/// [`Run::decode_plain`]: `byte_cnt` and `wqe_counter` only.
pub(crate) const FIELDS_COUNTER: u8 = 0;
/// [`Run::decode_plain`]: also `op_own`.
pub(crate) const FIELDS_OPCODE: u8 = 1;
/// [`Run::decode_plain`]: also `sop_drop_qpn` and `srqn_uidx` (not
/// `op_own`: a caller that fixed the run's opcode from its scanned
/// ownership byte needs no second copy of it).
pub(crate) const FIELDS_QUEUE: u8 = 2;
/// [`Run::decode_plain`]: `op_own`, `sop_drop_qpn` and `srqn_uidx`.
pub(crate) const FIELDS_IDS: u8 = FIELDS_OPCODE | FIELDS_QUEUE;

#[cfg(test)]
impl CqeCopy {
    /// A copy of `bytes`, as [`CqRing::copy_out`] would have made it (tests
    /// of the writers).
    pub(crate) fn from_bytes(bytes: &[u8; 64]) -> Self {
        let src = bytes.as_ptr().cast::<Chunk>();
        // SAFETY: `i < CHUNKS`: each unaligned load reads 16 (or 8) of the
        // 64 bytes of `bytes`; any bits are a valid `Chunk`.
        Self(core::array::from_fn(|i| unsafe {
            src.add(i).read_unaligned()
        }))
    }
}

/// The fields a plain completion is decoded from, as
/// [`Run::decode_plain`] copied them (host order).
#[derive(Clone, Copy, Debug)]
pub(crate) struct PlainFields {
    /// `byte_cnt`.
    pub(crate) byte_cnt: u32,
    /// `wqe_counter`.
    pub(crate) wqe_counter: u16,
    /// `op_own` (0 unless [`FIELDS_OPCODE`] was asked for).
    pub(crate) op_own: u8,
    /// `sop_drop_qpn` (0 unless the queues were asked for).
    pub(crate) sop_drop_qpn: SopDropQpn,
    /// `srqn_uidx` (0 unless the queues were asked for).
    pub(crate) srqn_uidx: SrqnUidx,
}

/// `len` consecutive entries of a [`CqRing`] (no wrap inside), from
/// [`SizedRing::run`], with the slot size `S` as a constant: the burst
/// poller walks them with constant offsets. In bounds by construction;
/// every access is checked against `len` or iterates below it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Run<const S: usize> {
    /// The CQE proper of the first entry.
    first: *mut u8,
    len: usize,
}

impl<const S: usize> Run<S> {
    /// The first `len` entries of the run (all of them if it is shorter).
    #[inline(always)]
    pub(crate) fn prefix(self, len: usize) -> Self {
        Self {
            first: self.first,
            len: len.min(self.len),
        }
    }

    /// Entries in the run.
    #[inline(always)]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Entry `i`, if inside the run.
    #[inline(always)]
    pub(crate) fn entry(&self, i: usize) -> Option<Entry> {
        (i < self.len).then(|| Entry {
            cqe: self.first.wrapping_add(i * S),
        })
    }

    /// The byte at `OFF` ([`OP_OWN`] or [`VALIDITY`]: the ownership byte)
    /// of entry `i`, read once (volatile); `None` past the run.
    #[inline(always)]
    pub(crate) fn read_byte<const OFF: usize>(&self, i: usize) -> Option<u8> {
        const { assert!(OFF < Cqe64::SIZE) };
        // SAFETY: entry `i < len` is in bounds (constructor of the ring,
        // `run`'s clamp to the ring's end) and `OFF` lies inside its 64-byte
        // CQE; u8 has no alignment need.
        (i < self.len).then(|| unsafe { self.first.add(i * S + OFF).read_volatile() })
    }

    /// A striding RQ's packet fields of entry `i`: `wqe_id`, `wqe_counter`
    /// (the stride index) and `byte_cnt` (the [`crate::prm::MprqByteCnt`]
    /// word), each read once (volatile), in host order; `None` past the
    /// run. The caller read the entry's ownership byte and issued the
    /// from-device barrier.
    #[inline(always)]
    pub(crate) fn stride_fields(&self, i: usize) -> Option<(u16, u16, u32)> {
        (i < self.len).then(|| {
            let cqe = self.first.wrapping_add(i * S);
            // SAFETY: entry `i < len` is in bounds (constructor of the
            // ring, `run`'s clamp to the ring's end); each field lies
            // inside its 64-byte CQE at an offset aligned for its type (the
            // CQE is 64-byte aligned from a `RING_ALIGN`-aligned base); any
            // bits are a valid integer.
            unsafe {
                (
                    u16::from_be(cqe.add(WQE_ID).cast::<u16>().read_volatile()),
                    u16::from_be(cqe.add(WQE_COUNTER).cast::<u16>().read_volatile()),
                    u32::from_be(cqe.add(BYTE_CNT).cast::<u32>().read_volatile()),
                )
            }
        })
    }

    /// Reads the byte at `OFF` (the ownership byte) of entry 0 once and, if
    /// `first` accepts it, the bytes of the following entries once each
    /// while they equal it (eight per loop test, aligned on entry 0).
    /// Returns entry 0's byte, the index of the first entry that did not
    /// pass (0 if `first` refused entry 0; the run's length if all passed)
    /// and that entry's byte. `None` for an empty run.
    #[inline(always)]
    pub(crate) fn scan_same<const OFF: usize>(
        &self,
        first: impl FnOnce(u8) -> bool,
    ) -> Option<(u8, usize, Option<u8>)> {
        let b0 = self.read_byte::<OFF>(0)?;
        if !first(b0) {
            return Some((b0, 0, Some(b0)));
        }
        let len = self.len;
        let base = self.first.wrapping_add(OFF);
        let read = |i: usize| -> u8 {
            // SAFETY: every caller below has `0 < i < len`: the byte at
            // `OFF` of an entry of the run, in bounds (constructor of the
            // ring, `run`'s clamp to the ring's end); no alignment need.
            unsafe { base.add(i * S).read_volatile() }
        };
        let mut i = 1;
        if len >= UNROLL {
            // The first group: entries 1 to 7.
            for j in 1..UNROLL {
                let b = read(j);
                if b != b0 {
                    return Some((b0, j, Some(b)));
                }
            }
            i = UNROLL;
            for _ in 0..(len - UNROLL) / UNROLL {
                for j in 0..UNROLL {
                    let b = read(i + j);
                    if b != b0 {
                        return Some((b0, i + j, Some(b)));
                    }
                }
                i += UNROLL;
            }
        }
        while i < len {
            let b = read(i);
            if b != b0 {
                return Some((b0, i, Some(b)));
            }
            i += 1;
        }
        Some((b0, len, None))
    }

    /// Reads the byte at `OFF` ([`OP_OWN`] or [`VALIDITY`]: the ownership
    /// byte) of each entry from `start` on once (volatile), in order, while
    /// `pass` accepts it. Returns the index of the first entry that did not
    /// pass (the run's length if all did) and, if one did not, its byte.
    #[inline(always)]
    pub(crate) fn scan_from<const OFF: usize>(
        &self,
        start: usize,
        mut pass: impl FnMut(u8) -> bool,
    ) -> (usize, Option<u8>) {
        const { assert!(OFF < Cqe64::SIZE) };
        let len = self.len;
        let start = start.min(len);
        let base = self.first.wrapping_add(OFF);
        let mut p = base.wrapping_add(start * S);
        let read = |p: *mut u8| -> u8 {
            // SAFETY: every caller below passes the byte at `OFF` of an
            // entry below `len`: in bounds (constructor of the ring, `run`'s
            // clamp to the ring's end); u8 has no alignment need.
            unsafe { p.read_volatile() }
        };
        // Four at a time: one loop test per four ownership bytes.
        let mut i = start;
        for _ in 0..(len - start) / 4 {
            for j in 0..4 {
                let b = read(p.wrapping_add(j * S));
                if !pass(b) {
                    return (i + j, Some(b));
                }
            }
            p = p.wrapping_add(4 * S);
            i += 4;
        }
        while i < len {
            let b = read(p);
            if !pass(b) {
                return (i, Some(b));
            }
            p = p.wrapping_add(S);
            i += 1;
        }
        (len, None)
    }

    /// Copies the fields of a plain completion from each of the first
    /// `out.len()` entries (at most `len`), each field once (volatile
    /// loads: `byte_cnt` and `wqe_counter`; with [`FIELDS_OPCODE`] `op_own`
    /// too, in one load with `wqe_counter`; with [`FIELDS_QUEUE`]
    /// `sop_drop_qpn` and `srqn_uidx`), and hands them with the matching
    /// slot of `out` to `f`, in order. Stops at the first error, returning
    /// its index. The caller read the entries' ownership bytes and issued
    /// the from-device barrier.
    #[inline(always)]
    pub(crate) fn decode_plain<const FIELDS: u8, T, E>(
        &self,
        out: &mut [T],
        mut f: impl FnMut(PlainFields, &mut T) -> Result<(), E>,
    ) -> Result<(), (usize, E)> {
        let n = out.len().min(self.len);
        let first = self.first;
        let fields = |i: usize| {
            let cqe = first.wrapping_add(i * S);
            // SAFETY: `i < n <= len` at every call below: the entry is in
            // bounds; every field lies inside its 64-byte CQE at an offset
            // aligned for its type (the CQE is 64-byte aligned from a
            // `RING_ALIGN`-aligned base); any bits are a valid integer.
            unsafe {
                let be32 = |off: usize| u32::from_be(cqe.add(off).cast::<u32>().read_volatile());
                let (wqe_counter, op_own) = if FIELDS & FIELDS_OPCODE == 0 {
                    let w = cqe.add(WQE_COUNTER).cast::<u16>().read_volatile();
                    (u16::from_be(w), 0)
                } else {
                    // `wqe_counter`, `signature`, `op_own`: one load.
                    let tail = be32(WQE_COUNTER);
                    ((tail >> 16) as u16, tail as u8)
                };
                let ids = |off: usize| {
                    Be32::new(if FIELDS & FIELDS_QUEUE != 0 {
                        be32(off)
                    } else {
                        0
                    })
                };
                PlainFields {
                    byte_cnt: be32(BYTE_CNT),
                    wqe_counter,
                    op_own,
                    sop_drop_qpn: SopDropQpn::from_bits(ids(SOP_DROP_QPN)),
                    srqn_uidx: SrqnUidx::from_bits(ids(SRQN_UIDX)),
                }
            }
        };
        let out = &mut out[..n];
        let mut chunks = out.chunks_exact_mut(UNROLL);
        let mut i = 0;
        // Eight at a time (one loop test per eight entries), then the rest.
        for group in &mut chunks {
            for (j, slot) in group.iter_mut().enumerate() {
                if let Err(e) = f(fields(i + j), slot) {
                    return Err((i + j, e));
                }
            }
            i += UNROLL;
        }
        for (j, slot) in chunks.into_remainder().iter_mut().enumerate() {
            if let Err(e) = f(fields(i + j), slot) {
                return Err((i + j, e));
            }
        }
        Ok(())
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
