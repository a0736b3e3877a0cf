//! Shared receive queue (PRM-FACTS §8; rdma-core `providers/mlx5/srq.c`).
//!
//! An SRQ WQE is an [`SrqNextSeg`] followed by data segments, `1 <<
//! wqe_shift` bytes (`roundup_pow2(16 + 16 × max_sge)`, at least 32:
//! `mlx5_alloc_srq_buf`). The WQEs form a singly linked list through
//! `next_wqe_index` (BE16): `head` is the next free WQE to post, `tail` the
//! last free one, which is never posted, so `head == tail` means full and
//! at most `wqe_cnt - 1` receives are outstanding. The device takes posted
//! WQEs in list order, as many as the doorbell record (one BE32 word, the
//! 16-bit count of WQEs posted) allows.
//!
//! Posting (`mlx5_post_srq_recv`) writes every SGE of the list (zero-length
//! ones too, unlike the cyclic RQ), then a terminator (`lkey
//! MLX5_INVALID_LKEY`) if fewer SGEs than the WQE holds, and moves `head`
//! to the WQE's link. Nothing is visible to the device before
//! [`Srq::commit`] (to-device barrier, then the doorbell record).
//!
//! Retiring (`mlx5_free_srq_wqe` of rdma-core up to v47): a completion
//! names a WQE by index; it is checked against the shadow (a WQE this SRQ
//! posted, published and has not retired) and appended to the free list
//! after `tail`. rdma-core v48 (`mlx5: Enhance SRQ performance`) defers
//! this through a bitmap and a wait queue for ODP page faults; the list the
//! device walks is equally valid either way, and the core has no ODP.
//!
//! The SRQ limit (`ibv_modify_srq(IBV_SRQ_LIMIT)`) is a low-water mark the
//! device arms and reports as the `IBV_EVENT_SRQ_LIMIT_REACHED` async event
//! through the kernel; the core sees no async events, so [`Srq::arm_limit`]
//! and [`Srq::limit_reached`] keep a software mirror for polling loops,
//! computed from completions (it lags the device, which counts a WQE gone
//! when it consumes it, not when software polls its CQE).

use super::{RecvWr, RqError, Sge};
use crate::barrier;
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
use crate::cpu::Sse41;
use crate::cq::{LookupError, RecvRetired, SendRetired, StrideCompletion, WorkQueues, WqRef};
use crate::index::{in_flight, wq_counter16, RingSize};
use crate::mmio::DeviceWord;
use crate::prm::{Be16, DataSeg, SrqNextSeg, WcStatus};
use crate::ring::RingBuf;
use core::ptr::NonNull;

/// Byte offset of `next_wqe_index` in a WQE (`mlx5_wqe_srq_next_seg`).
const NEXT_WQE_INDEX: usize = core::mem::offset_of!(SrqNextSeg, next_wqe_index);

/// Smallest SRQ WQE: the next segment and one data segment
/// (`mlx5_alloc_srq_buf`: `max(32, size)`).
const MIN_WQE_SHIFT: u8 = 5;

/// One WQE of the SRQ's private shadow (libmlx5 `srq->wrid`, plus what
/// the core needs to validate a completion).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SrqSlot {
    /// wr_id of the receive posted here.
    wr_id: u64,
    /// The post counter when it was posted (to tell published from not).
    seq: u32,
    /// Our trusted copy of the WQE's `next_wqe_index`.
    next: u16,
    /// Posted and not retired.
    posted: bool,
}

impl SrqSlot {
    /// An unused slot, to initialise shadow arrays.
    pub const EMPTY: Self = Self {
        wr_id: 0,
        seq: 0,
        next: 0,
        posted: false,
    };
}

/// The raw parts of an SRQ, as `mlx5dv_init_obj` (`struct mlx5dv_srq`) or
/// the emulated device hands them over.
#[derive(Clone, Copy, Debug)]
pub struct SrqParts {
    /// WQE buffer (`mlx5dv_srq.buf`): `wqe_cnt * stride` bytes.
    pub buf: NonNull<u8>,
    /// Number of WQEs, a power of two (at least 2, at most 2^16).
    pub wqe_cnt: u32,
    /// Bytes per WQE (`mlx5dv_srq.stride`), a power of two of at least 32.
    pub stride: u32,
    /// Doorbell record (`mlx5dv_srq.dbrec`): one BE32 word, 4-byte aligned.
    pub dbrec: NonNull<u32>,
}

/// A shared receive queue. One owner (`Send`, not `Sync`).
#[derive(Debug)]
pub struct Srq<'a> {
    ring: RingBuf<'a>,
    dbrec: &'a DeviceWord<u32>,
    slots: &'a mut [SrqSlot],
    size: RingSize,
    wqe_shift: u8,
    /// Next free WQE to post (libmlx5 `srq->head`).
    head: u16,
    /// Last free WQE, never posted (libmlx5 `srq->tail`).
    tail: u16,
    /// WQEs posted (free-running; libmlx5 `srq->counter`).
    counter: u32,
    /// `counter` as last published in the doorbell record.
    published: u32,
    /// Posted and not retired.
    outstanding: u32,
    /// Armed SRQ limit (0: disarmed, as `srq_limit = 0` in verbs).
    limit: u32,
    /// The SSE4.1 proof: [`Srq::post_list`] builds segments with SSE4.1.
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    sse41: Option<Sse41>,
}

impl<'a> Srq<'a> {
    /// An SRQ over `ring` (`size.entries() << wqe_shift` bytes), its
    /// doorbell-record word and a shadow of `size.entries()` slots, as
    /// created: links every WQE to the next (`i → i + 1`, the last to 0:
    /// `mlx5_alloc_srq_buf`), `head = 0`, `tail = wqe_cnt - 1`, counter 0.
    ///
    /// For a new SRQ only: nothing may have been posted to it (the device
    /// reads no WQE before a doorbell record publishes one).
    pub fn new(
        mut ring: RingBuf<'a>,
        size: RingSize,
        wqe_shift: u8,
        dbrec: &'a DeviceWord<u32>,
        slots: &'a mut [SrqSlot],
    ) -> Result<Self, RqError> {
        let n = size.entries();
        if !(2..=1 << 16).contains(&n) {
            return Err(RqError::BadWqeCount(n));
        }
        if wqe_shift < MIN_WQE_SHIFT || ring.len() != (n as usize) << wqe_shift {
            return Err(RqError::BadStride);
        }
        let slots = slots.get_mut(..n as usize).ok_or(RqError::ShadowTooSmall)?;
        for (i, slot) in slots.iter_mut().enumerate() {
            let next = wq_counter16(i as u32 + 1) & size.mask() as u16;
            let seg = SrqNextSeg {
                next_wqe_index: Be16::new(next),
                ..SrqNextSeg::default()
            };
            ring.write_wrapping(i << wqe_shift, zerocopy::IntoBytes::as_bytes(&seg));
            *slot = SrqSlot {
                next,
                ..SrqSlot::EMPTY
            };
        }
        Ok(Self {
            ring,
            dbrec,
            slots,
            size,
            wqe_shift,
            head: 0,
            tail: (n - 1) as u16,
            counter: 0,
            published: 0,
            outstanding: 0,
            limit: 0,
            #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
            sse41: Sse41::compile_time(),
        })
    }

    /// Lets [`Self::post_list`] build its data segments with SSE4.1 (one
    /// 16-byte load, one byte shuffle and one store per segment instead of
    /// three loads, three byte swaps and three stores; the same bytes), or
    /// not (`None`). The default is [`Sse41::compile_time`]; with `std`,
    /// turn it on after `is_x86_feature_detected!("sse4.1")` with
    /// [`Sse41::new_unchecked`]. (x86-64 only.)
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    pub fn set_sse41(&mut self, sse41: Option<Sse41>) {
        self.sse41 = sse41;
    }

    /// Builds a new SRQ (see [`Self::new`]) from its raw parts.
    ///
    /// # Safety
    ///
    /// For the lifetime `'a`:
    /// - `parts.buf` points to `wqe_cnt * stride` bytes valid for reads and
    ///   writes, written by nothing else in this process (the device only
    ///   reads it);
    /// - `parts.dbrec` points to a 4-byte word valid for volatile reads and
    ///   writes, accessed by nothing else in this process (the device reads
    ///   it).
    #[expect(
        unsafe_code,
        reason = "turns the SRQ's raw pointers into a ring and a doorbell word"
    )]
    // `DeviceWord::from_ptr` does not exist under loom (the word is a loom
    // atomic there); the loom models build queues from owned words.
    #[cfg(not(loom))]
    pub unsafe fn from_raw_parts(
        parts: SrqParts,
        slots: &'a mut [SrqSlot],
    ) -> Result<Self, RqError> {
        let size = RingSize::new(parts.wqe_cnt).ok_or(RqError::BadWqeCount(parts.wqe_cnt))?;
        if !parts.stride.is_power_of_two() {
            return Err(RqError::BadStride);
        }
        if parts.dbrec.as_ptr() as usize % 4 != 0 {
            return Err(RqError::MisalignedDbrec);
        }
        let len = (parts.wqe_cnt as usize)
            .checked_mul(parts.stride as usize)
            .ok_or(RqError::BadStride)?;
        // SAFETY: the caller guarantees `buf` is `len` valid bytes with no
        // other writer in this process for `'a`.
        let ring = unsafe { RingBuf::new(parts.buf.as_ptr(), len) }.ok_or(RqError::BadStride)?;
        // SAFETY: non-null (NonNull), 4-aligned (checked), valid and
        // accessed only through this word and by the device for `'a`
        // (caller's contract).
        let dbrec = unsafe { DeviceWord::from_ptr(parts.dbrec.as_ptr()) };
        Self::new(
            ring,
            size,
            parts.stride.trailing_zeros() as u8,
            dbrec,
            slots,
        )
    }

    /// SGEs one WQE holds (`(stride - 16) / 16`, libmlx5 `srq->max_gs`).
    pub fn max_sge(&self) -> usize {
        ((1usize << self.wqe_shift) - SrqNextSeg::SIZE) / DataSeg::SIZE
    }

    /// Receives that can be outstanding at once (`wqe_cnt - 1`: the tail
    /// WQE is never posted).
    pub fn capacity(&self) -> u32 {
        self.size.entries() - 1
    }

    /// Posted receives not yet retired.
    pub fn outstanding(&self) -> u32 {
        self.outstanding
    }

    /// The next WQE to post (libmlx5 `srq->head`).
    pub fn head(&self) -> u16 {
        self.head
    }

    /// The last free WQE (libmlx5 `srq->tail`).
    pub fn tail(&self) -> u16 {
        self.tail
    }

    /// WQEs posted since creation (free-running; its low 16 bits are what
    /// the doorbell record publishes).
    pub fn counter(&self) -> u32 {
        self.counter
    }

    /// The free-list link of WQE `ind` as this SRQ keeps it (its
    /// `next_wqe_index`); `None` past the ring. Following it from
    /// [`Self::head`] gives the WQEs the next posts take, in order.
    pub fn next_of(&self, ind: u16) -> Option<u16> {
        self.slots.get(usize::from(ind)).map(|s| s.next)
    }

    /// The wr_ids of the outstanding receives, by WQE index.
    pub fn outstanding_wr_ids(&self) -> impl Iterator<Item = u64> + '_ {
        self.slots.iter().filter(|s| s.posted).map(|s| s.wr_id)
    }

    /// Writes one receive WQE at `head`; invisible to the device until
    /// [`Self::commit`]. Returns the WQE index it took.
    #[inline]
    pub fn post(&mut self, wr_id: u64, sges: &[Sge]) -> Result<u16, RqError> {
        let max = self.max_sge();
        if sges.len() > max {
            return Err(RqError::TooManySges {
                given: sges.len(),
                max,
            });
        }
        // The tail WQE is never posted: the list would lose its end.
        if self.head == self.tail {
            return Err(RqError::QueueFull);
        }
        let ind = self.head;
        let Some(slot) = self.slots.get_mut(usize::from(ind)) else {
            return Err(RqError::QueueFull);
        };
        // The next head first: the load the next post depends on, issued
        // ahead of this post's stores.
        let next = slot.next;
        let base = (usize::from(ind) << self.wqe_shift) + SrqNextSeg::SIZE;
        // Every SGE, zero-length ones included (`mlx5_post_srq_recv`), at
        // most `max`: inside this WQE's `1 << wqe_shift` bytes.
        for (i, sge) in sges.iter().enumerate() {
            self.ring
                .write16(base + i * DataSeg::SIZE, super::data_seg(sge));
        }
        if sges.len() < max {
            self.ring
                .write16(base + sges.len() * DataSeg::SIZE, super::TERMINATOR_SEG);
        }
        slot.wr_id = wr_id;
        slot.seq = self.counter;
        slot.posted = true;
        self.head = next;
        self.counter = self.counter.wrapping_add(1);
        self.outstanding += 1;
        Ok(ind)
    }

    /// Posts a list of one-SGE receives and publishes them
    /// (`ibv_post_srq_recv` with a chain of work requests), all or nothing:
    /// the WQEs, links taken, shadow and doorbell record are those of
    /// [`Self::post`] for each element in order, then [`Self::commit`].
    ///
    /// A list longer than the free WQEs (`capacity - outstanding`) is
    /// refused with [`RqError::QueueFull`] before anything is written
    /// (libmlx5 posts the work requests that fit and names the first that
    /// does not). An empty list writes nothing, not even the doorbell
    /// record (as libmlx5 with no work request): receives posted earlier
    /// with [`Self::post`] still wait for their [`Self::commit`].
    #[inline]
    pub fn post_list(&mut self, wrs: &[RecvWr]) -> Result<(), RqError> {
        if wrs.is_empty() {
            return Ok(());
        }
        let free = self.capacity() - self.outstanding;
        if wrs.len() > free as usize {
            return Err(RqError::QueueFull);
        }
        let (ind, counter) = self.write_list_any(wrs);
        self.outstanding += counter.wrapping_sub(self.counter);
        self.counter = counter;
        self.head = ind;
        self.commit();
        Ok(())
    }

    /// [`Self::write_list`] with or without the terminator (by the SGE
    /// capacity) and with the segment builder the queue may use.
    #[inline(always)]
    fn write_list_any(&mut self, wrs: &[RecvWr]) -> (u16, u32) {
        #[cfg(all(target_arch = "x86_64", target_feature = "sse2", not(loom)))]
        if let Some(t) = self.sse41 {
            return super::list_sse41::srq_write_list(t, self, wrs);
        }
        if self.max_sge() == 1 {
            self.write_list::<false>(wrs, super::data_seg)
        } else {
            self.write_list::<true>(wrs, super::data_seg)
        }
    }

    /// [`Self::post_list`]'s writes, from `head` along the free list (which
    /// holds the whole list): each WQE's data segment (`seg` of its SGE:
    /// [`super::data_seg`]'s bytes) and terminator, if the WQE holds more
    /// than one SGE, and shadow slot. Returns the new head and counter.
    #[inline(always)]
    pub(super) fn write_list<const TERMINATOR: bool>(
        &mut self,
        wrs: &[RecvWr],
        seg: impl Fn(&Sge) -> [u8; 16],
    ) -> (u16, u32) {
        let shift = self.wqe_shift;
        let mut ind = self.head;
        let mut counter = self.counter;
        for wr in wrs {
            // Every link in the free list names a WQE of the ring, and the
            // list holds the whole list before `tail`: never `None`.
            let Some(slot) = self.slots.get_mut(usize::from(ind)) else {
                break;
            };
            // The next index first: the load the next element depends on,
            // issued before the stores to the same 8 bytes of the slot (as
            // `post` does; after them it waits for them).
            let next = slot.next;
            let base = (usize::from(ind) << shift) + SrqNextSeg::SIZE;
            // The SGE as given, zero length included (`mlx5_post_srq_recv`).
            self.ring.write16(base, seg(&wr.sge));
            if TERMINATOR {
                self.ring
                    .write16(base + DataSeg::SIZE, super::TERMINATOR_SEG);
            }
            slot.wr_id = wr.wr_id;
            slot.seq = counter;
            slot.posted = true;
            ind = next;
            counter = counter.wrapping_add(1);
        }
        (ind, counter)
    }

    /// Publishes every posted WQE: to-device barrier, then
    /// `dbrec = BE32(counter & 0xffff)`.
    #[inline]
    pub fn commit(&mut self) {
        if self.published == self.counter {
            return;
        }
        self.published = self.counter;
        // The WQE and link stores reach the device before the record that
        // publishes them (rdma-core `udma_to_device_barrier`).
        barrier::to_device();
        self.dbrec.write_be(u32::from(wq_counter16(self.counter)));
    }

    /// Retires the WQE a responder CQE names by index (`wqe_counter`) and
    /// appends it to the free list after `tail` (`mlx5_free_srq_wqe`).
    /// Refuses, changing nothing, an index that does not name a WQE this
    /// SRQ posted, published and has not retired. Error completions retire
    /// the same way: an SRQ has no error state (its QPs do).
    pub fn retire(&mut self, wqe_counter: u16) -> Result<u64, LookupError> {
        let ind = usize::from(wqe_counter);
        let unpublished = in_flight(self.counter, self.published);
        let slot = match self.slots.get(ind) {
            Some(s) if s.posted && in_flight(s.seq, self.published) >= unpublished => *s,
            _ => return Err(LookupError::NotInFlight),
        };
        // Link the tail to it, in the ring (what the device follows) and in
        // the shadow; it becomes the new tail. The next doorbell record's
        // barrier orders the link before any post that exposes it.
        let link = (usize::from(self.tail) << self.wqe_shift) + NEXT_WQE_INDEX;
        self.ring.write_wrapping(link, &wqe_counter.to_be_bytes());
        if let Some(t) = self.slots.get_mut(usize::from(self.tail)) {
            t.next = wqe_counter;
        }
        if let Some(s) = self.slots.get_mut(ind) {
            s.posted = false;
        }
        self.tail = wqe_counter;
        self.outstanding -= 1;
        Ok(slot.wr_id)
    }

    /// Arms the SRQ limit at `limit` receives (`ibv_modify_srq` with
    /// `IBV_SRQ_LIMIT`; 0 disarms). Mirror only: the device's own limit is
    /// armed through the kernel.
    pub fn arm_limit(&mut self, limit: u32) {
        self.limit = limit;
    }

    /// The armed limit, if any.
    pub fn limit(&self) -> Option<u32> {
        (self.limit != 0).then_some(self.limit)
    }

    /// Whether the limit is armed and fewer receives than it are
    /// outstanding (when the device would raise
    /// `IBV_EVENT_SRQ_LIMIT_REACHED`, as seen from completions). The
    /// device disarms its limit when it fires; call
    /// [`Self::arm_limit`]`(0)` to do the same here.
    pub fn limit_reached(&self) -> bool {
        self.limit != 0 && self.outstanding < self.limit
    }
}

/// A [`WorkQueues`] for a CQ whose responder completions may come from QPs
/// attached to an SRQ: those whose `srqn_uidx` is one of `keys` (the SRQN
/// with CQE version 0; with CQE version 1 the user indices of the attached
/// QPs) are retired on the SRQ, everything else goes to `inner`.
#[derive(Debug)]
pub struct SrqWorkQueues<'q, 'a, S: WorkQueues + ?Sized> {
    srq: &'q mut Srq<'a>,
    keys: &'q [u32],
    rx_csum_valid: bool,
    inner: &'q mut S,
}

impl<'q, 'a, S: WorkQueues + ?Sized> SrqWorkQueues<'q, 'a, S> {
    /// Routes completions whose `srqn_uidx` is in `keys` to `srq`.
    pub fn new(srq: &'q mut Srq<'a>, keys: &'q [u32], inner: &'q mut S) -> Self {
        Self {
            srq,
            keys,
            rx_csum_valid: false,
            inner,
        }
    }

    /// Reports `IBV_WC_IP_CSUM_OK` where libmlx5 would for QPs that
    /// validate receive checksums (`MLX5_RX_CSUM_VALID`).
    pub fn with_rx_csum_valid(mut self, valid: bool) -> Self {
        self.rx_csum_valid = valid;
        self
    }

    /// The SRQ (to re-post between polls).
    pub fn srq(&mut self) -> &mut Srq<'a> {
        self.srq
    }
}

impl<S: WorkQueues + ?Sized> WorkQueues for SrqWorkQueues<'_, '_, S> {
    fn retire_send(
        &mut self,
        wq: WqRef,
        wqe_counter: u16,
        status: WcStatus,
    ) -> Result<SendRetired, LookupError> {
        self.inner.retire_send(wq, wqe_counter, status)
    }

    fn retire_recv(
        &mut self,
        wq: WqRef,
        wqe_counter: u16,
        status: WcStatus,
    ) -> Result<RecvRetired, LookupError> {
        if !self.keys.contains(&wq.srqn_uidx) {
            return self.inner.retire_recv(wq, wqe_counter, status);
        }
        let wr_id = self.srq.retire(wqe_counter)?;
        Ok(RecvRetired {
            wr_id,
            rx_csum_valid: self.rx_csum_valid,
        })
    }

    fn retire_strides(
        &mut self,
        wq: WqRef,
        completion: StrideCompletion,
        status: WcStatus,
    ) -> Result<RecvRetired, LookupError> {
        self.inner.retire_strides(wq, completion, status)
    }
}

#[cfg(test)]
#[cfg(not(loom))]
mod tests {
    //! SRQ layout from libmlx5 (rdma-core 44 `mlx5_alloc_srq_buf`,
    //! `mlx5_post_srq_recv`, `mlx5_free_srq_wqe`); the golden file
    //! `specs/golden/libmlx5/rq-cases.txt` has no SRQ case, so the bytes
    //! below are derived from those functions.
    #[cfg(target_arch = "x86_64")]
    use super::super::test_mem::detected_sse41;
    use super::super::test_mem::{hex, resp_cqe, CqMem, Mem, Rng};
    use super::super::NoOtherQueues;
    use super::*;
    use crate::cq::PollError;
    use std::collections::VecDeque;
    use std::vec::Vec;

    fn sge(addr: u64, length: u32, lkey: u32) -> Sge {
        Sge { addr, length, lkey }
    }

    /// `n` WQEs of `1 << shift` bytes.
    fn setup(n: u32, shift: u8) -> (Mem, DeviceWord<u32>, Vec<SrqSlot>) {
        (
            Mem::new((n as usize) << shift),
            DeviceWord::new(0xa5a5_a5a5u32),
            std::vec![SrqSlot::EMPTY; n as usize],
        )
    }

    fn srq<'a>(
        mem: &'a Mem,
        n: u32,
        shift: u8,
        db: &'a DeviceWord<u32>,
        slots: &'a mut [SrqSlot],
    ) -> Srq<'a> {
        Srq::new(mem.ring(), RingSize::new(n).unwrap(), shift, db, slots).unwrap()
    }

    /// `post_list` writes what `post` for each element and `commit`
    /// write (WQEs, links, shadow, doorbell record, counters), and a list
    /// longer than the free WQEs changes nothing: strides of one SGE (no
    /// terminator) and more, free lists reordered by out-of-order retires,
    /// the 16-bit counter's wrap, zero-length SGEs (written as given), an
    /// empty list (which writes no record, even with posts unpublished);
    /// half the rounds through the SSE4.1 segment builder where the CPU has
    /// SSE4.1.
    #[test]
    fn post_list_equals_posts_then_commit() {
        let mut rng = Rng(0x0123_4567_89ab_cdef);
        let rounds = if cfg!(miri) { 30 } else { 1500 };
        #[cfg_attr(not(target_arch = "x86_64"), allow(unused_mut))]
        let mut vector = 0;
        for round in 0..rounds {
            let n = 2u32 << rng.below(6);
            let shift = 5 + rng.below(3) as u8;
            let len = (n as usize) << shift;
            let (ma, da, mut sa) = setup(n, shift);
            let (mb, db, mut sb) = setup(n, shift);
            {
                let mut a = srq(&ma, n, shift, &da, &mut sa);
                let mut b = srq(&mb, n, shift, &db, &mut sb);
                // Half the rounds through the SSE4.1 segment builder,
                // where the CPU has it (the model, `b`, posts one by one).
                #[cfg(target_arch = "x86_64")]
                if let Some(t) = detected_sse41().filter(|_| rng.below(2) == 0) {
                    a.set_sse41(Some(t));
                    vector += 1;
                }
                let mut posted: Vec<u16> = Vec::new();
                // A history: posts and out-of-order retires, identical on
                // both queues, so that the free list is shuffled (and the
                // counter sometimes past 2^16).
                for _ in 0..rng.below(3 * u64::from(n)) {
                    if rng.below(2) == 0 && a.outstanding() < a.capacity() {
                        let g = sge(rng.next(), 1, 2);
                        let i = a.post(7, &[g]).unwrap();
                        assert_eq!(b.post(7, &[g]), Ok(i));
                        posted.push(i);
                        a.commit();
                        b.commit();
                    } else if !posted.is_empty() {
                        let i = posted.swap_remove(rng.below(posted.len() as u64) as usize);
                        assert_eq!(a.retire(i), b.retire(i));
                    }
                }
                // Now and then (not under Miri: tens of thousands of
                // posts) the counter is taken to just below 2^16, so that
                // the list crosses the doorbell record's wrap.
                if !cfg!(miri) && rng.below(16) == 0 {
                    let target = 65_536 - rng.below(u64::from(n)) as u32;
                    while a.counter() < target && a.outstanding() < a.capacity() {
                        let i = a.post(1, &[]).unwrap();
                        assert_eq!(b.post(1, &[]), Ok(i));
                        a.commit();
                        b.commit();
                        assert_eq!(a.retire(i), b.retire(i));
                    }
                }
                // Sometimes a post or two left unpublished: the list's
                // commit publishes them too, and an empty list leaves them
                // for a later commit.
                for _ in 0..rng.below(3) {
                    if a.outstanding() < a.capacity() {
                        let g = sge(rng.next(), 1, 2);
                        let i = a.post(9, &[g]).unwrap();
                        assert_eq!(b.post(9, &[g]), Ok(i));
                    }
                }
                let k = rng.below(u64::from(n) + 2) as usize;
                let wrs: Vec<RecvWr> = (0..k)
                    .map(|_| RecvWr {
                        wr_id: rng.next(),
                        sge: sge(
                            rng.next(),
                            if rng.below(5) == 0 {
                                0
                            } else {
                                rng.next() as u32
                            },
                            rng.next() as u32,
                        ),
                    })
                    .collect();
                // The record poisoned: a list writes it only if it posts.
                da.write(0xa5a5_a5a5);
                db.write(0xa5a5_a5a5);
                // Everything a refused list must leave as it was.
                let state = |a: &Srq<'_>| {
                    (
                        ma.bytes(0, len),
                        da.read(),
                        a.head(),
                        a.counter(),
                        a.outstanding(),
                    )
                };
                let before = state(&a);
                let fits = k <= (a.capacity() - a.outstanding()) as usize;
                let got = a.post_list(&wrs);
                if fits {
                    assert_eq!(got, Ok(()), "round {round}");
                    for wr in &wrs {
                        b.post(wr.wr_id, &[wr.sge]).unwrap();
                    }
                    // libmlx5 writes no record for an empty chain.
                    if k > 0 {
                        b.commit();
                    }
                } else {
                    assert_eq!(got, Err(RqError::QueueFull), "round {round}");
                    assert!(
                        before == state(&a),
                        "round {round}: a refused list changed the queue"
                    );
                }
                assert_eq!(ma.bytes(0, len), mb.bytes(0, len), "round {round}: ring");
                assert_eq!(da.read(), db.read(), "round {round}: doorbell record");
                assert_eq!(
                    (a.head(), a.tail(), a.counter(), a.outstanding()),
                    (b.head(), b.tail(), b.counter(), b.outstanding()),
                    "round {round}"
                );
            }
            assert_eq!(sa, sb, "round {round}: shadow");
        }
        #[cfg(target_arch = "x86_64")]
        if detected_sse41().is_some() {
            assert!(vector > rounds / 4, "{vector} rounds through SSE4.1");
        }
        let _ = vector;
    }

    /// The `next_wqe_index` the ring holds for WQE `i`.
    fn link(mem: &Mem, shift: u8, i: u16) -> u16 {
        let b = mem.bytes((usize::from(i) << shift) + 2, 2);
        u16::from_be_bytes([b[0], b[1]])
    }

    #[test]
    fn srq_layout_terminator_and_doorbell() {
        // max_sge 2: stride roundup_pow2(16 + 32) = 64, which holds 3.
        let (mem, db, mut slots) = setup(4, 6);
        let mut s = srq(&mem, 4, 6, &db, &mut slots);
        assert_eq!(
            (s.max_sge(), s.capacity(), s.head(), s.tail()),
            (3, 3, 0, 3)
        );
        for i in 0..4u16 {
            assert_eq!(link(&mem, 6, i), (i + 1) % 4);
        }
        assert_eq!(s.post(0x7300, &[sge(0x2_0000_1000, 4096, 0x3000)]), Ok(0));
        assert_eq!(db.read(), 0xa5a5_a5a5, "nothing published before commit");
        s.commit();
        assert_eq!(db.read().to_ne_bytes(), [0, 0, 0, 1]);
        assert_eq!(
            mem.bytes(0, 64),
            hex(concat!(
                "00000001000000000000000000000000", // next seg: next_wqe_index 1
                "00001000000030000000000200001000", // data seg
                "00000000000001000000000000000000", // terminator (lkey 0x100)
                "a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5", // untouched
            ))
        );
        // Full list: no terminator. A zero-length SGE is written as given
        // (the SRQ path does not skip it, unlike `mlx5_post_recv`).
        let full = [sge(1, 0, 2), sge(3, 4, 5), sge(6, 7, 8)];
        assert_eq!(s.post(0x7301, &full), Ok(1));
        assert_eq!(
            mem.bytes(64 + 16, 48),
            hex(concat!(
                "00000000000000020000000000000001",
                "00000004000000050000000000000003",
                "00000007000000080000000000000006",
            ))
        );
        assert_eq!(
            s.post(9, &[sge(0, 1, 0); 4]),
            Err(RqError::TooManySges { given: 4, max: 3 })
        );
        assert_eq!(s.post(0x7302, &[]), Ok(2));
        // An empty list is all terminator.
        assert_eq!(
            mem.bytes(128 + 16, 16),
            hex("00000000000001000000000000000000")
        );
        // WQE 3 is the tail: never posted.
        assert_eq!(s.post(9, &[]), Err(RqError::QueueFull));
        s.commit();
        assert_eq!(db.read().to_ne_bytes(), [0, 0, 0, 3]);
        assert_eq!(s.outstanding(), 3);
    }

    #[test]
    fn srq_free_list_reuse_across_many_cycles() {
        const N: u32 = 8;
        let (mem, db, mut slots) = setup(N, 5);
        let mut s = srq(&mem, N, 5, &db, &mut slots);
        // The model: the free list in order (front = head, back = tail)
        // and the posted WQEs with their wr_ids.
        let mut free: VecDeque<u16> = (0..N as u16).collect();
        let mut posted: Vec<(u16, u64)> = Vec::new();
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let mut next = |m: usize| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            (rng % m as u64) as usize
        };
        let cycles = if cfg!(miri) { 40 } else { 2000 };
        let mut wr_id = 0u64;
        for _ in 0..cycles {
            // Post a random number of receives (up to full).
            for _ in 0..=next(N as usize) {
                if free.len() == 1 {
                    assert_eq!(s.post(1, &[]), Err(RqError::QueueFull));
                    break;
                }
                let want = free.pop_front().unwrap();
                let got = s.post(wr_id, &[sge(wr_id, 64, 1)]).unwrap();
                assert_eq!(got, want, "post takes the head of the free list");
                posted.push((got, wr_id));
                wr_id += 1;
            }
            s.commit();
            assert_eq!(db.read_be(), s.counter() & 0xffff);
            // Retire a random number, in random order.
            for _ in 0..next(posted.len() + 1) {
                let (ind, id) = posted.swap_remove(next(posted.len()));
                assert_eq!(s.retire(ind), Ok(id));
                assert_eq!(s.retire(ind), Err(LookupError::NotInFlight));
                let old_tail = *free.back().unwrap();
                assert_eq!(
                    link(&mem, 5, old_tail),
                    ind,
                    "freed WQE linked after the tail"
                );
                free.push_back(ind);
            }
            assert_eq!((s.head(), s.tail()), (free[0], *free.back().unwrap()));
            assert_eq!(s.outstanding() as usize, posted.len());
            // The device's view: the free list is linked in the ring.
            for w in free.iter().collect::<Vec<_>>().windows(2) {
                assert_eq!(link(&mem, 5, *w[0]), *w[1]);
            }
        }
        let mut ids: Vec<u64> = s.outstanding_wr_ids().collect();
        ids.sort_unstable();
        let mut want: Vec<u64> = posted.iter().map(|p| p.1).collect();
        want.sort_unstable();
        assert_eq!(ids, want);
    }

    #[test]
    fn srq_bad_index_rejected_without_touching_state() {
        let (mem, db, mut slots) = setup(8, 5);
        let mut s = srq(&mem, 8, 5, &db, &mut slots);
        for i in 0..4 {
            s.post(i, &[sge(i, 8, 1)]).unwrap();
        }
        s.commit();
        s.post(4, &[sge(4, 8, 1)]).unwrap(); // WQE 4: posted, not published
        assert_eq!(s.retire(2), Ok(2));
        let before = (
            mem.bytes(0, 8 * 32),
            s.head(),
            s.tail(),
            s.outstanding(),
            db.read(),
        );
        for bad in [2, 4, 5, 7, 8, 0xffff] {
            assert_eq!(s.retire(bad), Err(LookupError::NotInFlight), "{bad}");
        }
        let after = (
            mem.bytes(0, 8 * 32),
            s.head(),
            s.tail(),
            s.outstanding(),
            db.read(),
        );
        assert_eq!(before, after);
        s.commit();
        assert_eq!(s.retire(4), Ok(4), "published now");
    }

    #[test]
    fn srq_limit() {
        let (mem, db, mut slots) = setup(8, 5);
        let mut s = srq(&mem, 8, 5, &db, &mut slots);
        assert_eq!(s.limit(), None);
        assert!(!s.limit_reached(), "disarmed");
        for i in 0..7 {
            s.post(i, &[]).unwrap();
        }
        s.commit();
        s.arm_limit(4);
        assert_eq!(s.limit(), Some(4));
        for (i, reached) in [(0, false), (1, false), (2, false), (3, true)] {
            assert_eq!(s.retire(i), Ok(u64::from(i)));
            assert_eq!(s.limit_reached(), reached, "after {i}");
        }
        s.arm_limit(0);
        assert!(!s.limit_reached());
    }

    #[test]
    fn srq_raw_parts_are_checked() {
        let mut slots = [SrqSlot::EMPTY; 8];
        let mut ring = [0u64; 32];
        let mut dbrec = [0u32; 2];
        // One raw pointer each, every other derived from it (Miri).
        let ring_p = ring.as_mut_ptr();
        let dbrec_p = dbrec.as_mut_ptr();
        let parts = SrqParts {
            buf: NonNull::new(ring_p.cast::<u8>()).unwrap(),
            wqe_cnt: 8,
            stride: 32,
            dbrec: NonNull::new(dbrec_p).unwrap(),
        };
        #[expect(unsafe_code, reason = "the raw-parts constructor under test")]
        let build = |p: SrqParts, slots: &mut [SrqSlot]| {
            // SAFETY: `ring` and `dbrec` outlive every SRQ built here, which
            // is dropped at once; nothing else touches them meanwhile.
            unsafe { Srq::from_raw_parts(p, slots) }.map(|s| s.max_sge())
        };
        assert_eq!(build(parts, &mut slots), Ok(1));
        let p = SrqParts {
            wqe_cnt: 6,
            ..parts
        };
        assert_eq!(build(p, &mut slots), Err(RqError::BadWqeCount(6)));
        let p = SrqParts {
            wqe_cnt: 1,
            stride: 256,
            ..parts
        };
        assert_eq!(build(p, &mut slots), Err(RqError::BadWqeCount(1)));
        let p = SrqParts {
            stride: 48,
            wqe_cnt: 4,
            ..parts
        };
        assert_eq!(build(p, &mut slots), Err(RqError::BadStride));
        let p = SrqParts {
            stride: 16,
            wqe_cnt: 16,
            ..parts
        };
        assert_eq!(build(p, &mut slots), Err(RqError::BadStride));
        let p = SrqParts {
            dbrec: NonNull::new(dbrec_p.cast::<u8>().wrapping_add(2).cast()).unwrap(),
            ..parts
        };
        assert_eq!(build(p, &mut slots), Err(RqError::MisalignedDbrec));
        assert_eq!(build(parts, &mut slots[..4]), Err(RqError::ShadowTooSmall));
    }

    #[test]
    fn srq_cq_adaptor_retires_through_the_srq() {
        let (mem, db, mut slots) = setup(8, 5);
        let mut s = srq(&mem, 8, 5, &db, &mut slots);
        for i in 0..5u64 {
            s.post(0x100 + i, &[sge(0x1000 * i, 256, 1)]).unwrap();
        }
        s.commit();
        let cqm = CqMem::new(16);
        let mut cq = cqm.cq(false);
        // Two QPs on SRQ 0x21 complete WQEs 3, 0 (out of order); WQE 1
        // with an error (the SRQ frees it all the same).
        cqm.put(0, &resp_cqe(false, 0x11, 0x21, 3, 100));
        cqm.put(1, &resp_cqe(false, 0x12, 0x21, 0, 200));
        cqm.put(2, &resp_cqe(true, 0x12, 0x21, 1, 0));
        let mut got = Vec::new();
        let mut rest = NoOtherQueues;
        let keys = [0x21];
        let mut wqs = SrqWorkQueues::new(&mut s, &keys, &mut rest);
        let n = cq
            .poll(&mut wqs, 16, |c| got.push((c.wr_id(), c.status())))
            .unwrap();
        assert_eq!(n, 3);
        assert_eq!(
            got,
            [
                (0x103, WcStatus::Success),
                (0x100, WcStatus::Success),
                (0x101, WcStatus::LocLenErr)
            ]
        );
        assert_eq!(wqs.srq().outstanding(), 2);
        // Another SRQN goes to the inner queues (none here); an index the
        // SRQ does not have outstanding is refused.
        cqm.put(3, &resp_cqe(false, 0x13, 0x22, 2, 1));
        assert!(matches!(
            cq.poll(&mut wqs, 16, |_| {}),
            Err(PollError::Lookup {
                error: LookupError::UnknownQueue,
                ..
            })
        ));
        cqm.put(4, &resp_cqe(false, 0x11, 0x21, 3, 1));
        assert!(matches!(
            cq.poll(&mut wqs, 16, |_| {}),
            Err(PollError::Lookup {
                error: LookupError::NotInFlight,
                wqe_counter: 3,
                ..
            })
        ));
        // The freed WQEs come back after the original tail (7): 3, 0, 1.
        assert_eq!(s.tail(), 1);
        assert_eq!(
            (link(&mem, 5, 7), link(&mem, 5, 3), link(&mem, 5, 0)),
            (3, 0, 1)
        );
        for want in [5, 6, 7, 3, 0] {
            assert_eq!(s.post(9, &[]), Ok(want));
        }
        assert_eq!(s.post(9, &[]), Err(RqError::QueueFull));
    }
}
