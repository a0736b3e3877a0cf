//! Striding (multi-packet) receive queue (PRM-FACTS §8, §9; DPDK
//! `mlx5_rx_burst_mprq`, `mlx5_rxq_initialize`; rdma-core `mlx5_mprq_wqe`).
//!
//! A cyclic ring of [`MprqWqe`]s (32 bytes: a next segment, unused by a
//! cyclic striding RQ and left zero, and one data segment). Each WQE posts
//! one buffer of `num_strides` strides of `stride_bytes`; the data
//! segment's byte count is `num_strides × stride_bytes`. The device places
//! each packet in consecutive strides of the WQE at the consumer position
//! and reports, per CQE, the WQE (`wqe_id`), the first stride
//! (`wqe_counter` = stride index) and the strides consumed
//! (`byte_cnt[29:16]`); a packet that does not fit in the WQE's remaining strides is
//! preceded by a filler CQE (`byte_cnt` bit 31) that consumes them without
//! a packet. A WQE is done once all its strides are consumed.
//!
//! [`StridingRq::retire_strides`] checks every report against the shadow
//! (the WQE at the consumer position, the stride right after the ones
//! already consumed, no more strides than the WQE has left) and hands back
//! where the packet is ([`StrideRetired`]: buffer address of its first
//! stride). When the WQE is done it is re-posted at once with the same
//! buffer and wr_id (DPDK's model: the ring stays full and `rq_ci` moves by
//! one), but only written to the ring: the doorbell record publishing it is
//! written by [`StridingRq::commit`], which the caller issues once it is
//! done with the packet bytes of the burst (DPDK writes `rq_db` at the end
//! of `mlx5_rx_burst_mprq`). Until then the device cannot reuse the buffer.

use super::RqError;
use crate::barrier;
use crate::cq::{LookupError, RecvRetired, SendRetired, StrideCompletion, WorkQueues, WqRef};
use crate::index::{in_flight, wq_counter16, RingSize};
use crate::mmio::DeviceWord;
use crate::prm::{Be32, Be64, DataSeg, MprqWqe, WcStatus};
use crate::ring::RingBuf;
use core::ptr::NonNull;

/// Strides per WQE and bytes per stride, as log2 (the WQ context's
/// `single_wqe_log_num_of_strides` + 9 and `single_stride_log_num_of_bytes`
/// + 6: [`crate::prm::striding`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StridingParams {
    /// log2 of the strides per WQE (at most 16).
    pub log_num_strides: u8,
    /// log2 of the bytes per stride.
    pub log_stride_bytes: u8,
}

impl StridingParams {
    /// Strides per WQE.
    pub const fn num_strides(self) -> u32 {
        1 << self.log_num_strides
    }

    /// Bytes per stride.
    pub const fn stride_bytes(self) -> u32 {
        1 << self.log_stride_bytes
    }

    /// Bytes of one WQE's buffer (the data segment's byte count).
    pub const fn wqe_bytes(self) -> u32 {
        1 << (self.log_num_strides + self.log_stride_bytes)
    }

    /// Whether a WQE of these parameters can be posted: stride indices fit
    /// 16 bits, the buffer's byte count 31 bits.
    const fn valid(self) -> bool {
        self.log_num_strides <= 16
            && self.log_num_strides as u32 + self.log_stride_bytes as u32 <= 30
    }
}

/// One WQE of the striding RQ's private shadow.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MprqSlot {
    /// wr_id of the WQE.
    wr_id: u64,
    /// Its buffer.
    addr: u64,
    /// The buffer's lkey.
    lkey: u32,
}

impl MprqSlot {
    /// An unused slot, to initialise shadow arrays.
    pub const EMPTY: Self = Self {
        wr_id: 0,
        addr: 0,
        lkey: 0,
    };
}

/// The raw parts of a striding RQ (`mlx5dv_rwq` of a striding WQ, or the
/// emulated device's).
#[derive(Clone, Copy, Debug)]
pub struct MprqParts {
    /// WQE buffer: `wqe_cnt` [`MprqWqe`]s of 32 bytes.
    pub buf: NonNull<u8>,
    /// Number of WQEs, a power of two (at most 2^16).
    pub wqe_cnt: u32,
    /// Strides per WQE and stride size.
    pub params: StridingParams,
    /// Doorbell record (`dbrec[MLX5_RCV_DBR]`): one BE32 word, 4-byte aligned.
    pub dbrec: NonNull<u32>,
}

/// Where a striding-RQ completion puts its packet, and what it retired.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StrideRetired {
    /// wr_id of the WQE the packet landed in.
    pub wr_id: u64,
    /// Index of that WQE in the ring.
    pub wqe_index: u16,
    /// First stride of the packet.
    pub stride_index: u16,
    /// Strides consumed.
    pub strides: u16,
    /// Address of the packet: the WQE's buffer + `stride_index × stride_bytes`.
    pub addr: u64,
    /// lkey of the WQE's buffer.
    pub lkey: u32,
    /// A filler: strides skipped, no packet.
    pub filler: bool,
    /// The completion finished its WQE (all strides consumed, or an error
    /// ended it): the WQE's wr_id.
    pub done: Option<u64>,
    /// The finished WQE was re-posted (written at the producer position;
    /// published by the next [`StridingRq::commit`]).
    pub reposted: bool,
}

/// The WQE a striding RQ is filling, copied out of the queue so that a
/// burst accounts its packets in registers ([`StridingRq::filling`], then
/// [`Self::take`] per completion, then [`StridingRq::settle`]): the same
/// checks and accounting as [`StridingRq::retire_strides`], which is built
/// on it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Filling {
    /// The WQE's slot.
    slot: MprqSlot,
    /// Its index in the ring.
    at: u32,
    /// Ring entries − 1.
    mask: u32,
    /// Strides consumed so far.
    consumed: u32,
    /// Strides per WQE.
    num: u32,
    /// log2 of the stride's bytes.
    shift: u32,
}

impl Filling {
    /// Accounts the successful completion `c`: it must name this WQE
    /// (`wqe_id` modulo the ring: DPDK's check), start at the first stride
    /// not yet consumed, and consume at least one stride and no more than
    /// the WQE has left. The packet's address; `None` (nothing changed) if
    /// refused.
    #[inline(always)]
    pub(crate) fn take(&mut self, c: StrideCompletion) -> Option<u64> {
        let strides = u32::from(c.strides);
        if u32::from(c.wqe_id) & self.mask != self.at
            || u32::from(c.stride_index) != self.consumed
            || strides == 0
            || strides > self.num - self.consumed
        {
            return None;
        }
        self.consumed += strides;
        Some(
            self.slot
                .addr
                .wrapping_add(u64::from(c.stride_index) << self.shift),
        )
    }

    /// Every stride of the WQE is consumed: [`StridingRq::settle`] ends it.
    #[inline(always)]
    pub(crate) fn is_done(&self) -> bool {
        self.consumed == self.num
    }
}

/// A cyclic striding RQ. One owner (`Send`, not `Sync`).
#[derive(Debug)]
pub struct StridingRq<'a> {
    ring: RingBuf<'a>,
    dbrec: &'a DeviceWord<u32>,
    slots: &'a mut [MprqSlot],
    size: RingSize,
    params: StridingParams,
    /// Next WQE to post (free-running; DPDK `rq_ci` as the doorbell sees it).
    head: u32,
    /// Posted and published to the device.
    published: u32,
    /// The WQE the device is filling (oldest not done).
    tail: u32,
    /// Strides of the `tail` WQE already consumed (DPDK `consumed_strd`).
    consumed: u32,
    /// Re-post a WQE once all its strides are consumed.
    reuse: bool,
    /// Write the doorbell record on commit (false for a RAW_PACKET QP
    /// before RTR).
    doorbell_enabled: bool,
    error: bool,
}

impl<'a> StridingRq<'a> {
    /// A striding RQ over `ring` (`size.entries()` × 32 bytes), the RQ
    /// doorbell-record word and a shadow of `size.entries()` slots;
    /// counters start at 0, reuse on.
    pub fn new(
        ring: RingBuf<'a>,
        size: RingSize,
        params: StridingParams,
        dbrec: &'a DeviceWord<u32>,
        slots: &'a mut [MprqSlot],
    ) -> Result<Self, RqError> {
        let n = size.entries();
        if n > 1 << 16 {
            return Err(RqError::BadWqeCount(n));
        }
        if ring.len() != n as usize * MprqWqe::SIZE {
            return Err(RqError::BadStride);
        }
        if !params.valid() {
            return Err(RqError::BadStriding);
        }
        let slots = slots.get_mut(..n as usize).ok_or(RqError::ShadowTooSmall)?;
        Ok(Self {
            ring,
            dbrec,
            slots,
            size,
            params,
            head: 0,
            published: 0,
            tail: 0,
            consumed: 0,
            reuse: true,
            doorbell_enabled: true,
            error: false,
        })
    }

    /// Builds a striding RQ (see [`Self::new`]) from its raw parts.
    ///
    /// # Safety
    ///
    /// For the lifetime `'a`:
    /// - `parts.buf` points to `wqe_cnt * 32` bytes valid for reads and
    ///   writes, written by nothing else in this process (the device only
    ///   reads it);
    /// - `parts.dbrec` points to a 4-byte word valid for volatile reads and
    ///   writes, accessed by nothing else in this process (the device reads
    ///   it).
    #[expect(
        unsafe_code,
        reason = "turns the RQ's raw pointers into a ring and a doorbell word"
    )]
    // `DeviceWord::from_ptr` does not exist under loom (the word is a loom
    // atomic there); the loom models build queues from owned words.
    #[cfg(not(loom))]
    pub unsafe fn from_raw_parts(
        parts: MprqParts,
        slots: &'a mut [MprqSlot],
    ) -> Result<Self, RqError> {
        let size = RingSize::new(parts.wqe_cnt).ok_or(RqError::BadWqeCount(parts.wqe_cnt))?;
        if parts.dbrec.as_ptr() as usize % 4 != 0 {
            return Err(RqError::MisalignedDbrec);
        }
        let len = (parts.wqe_cnt as usize)
            .checked_mul(MprqWqe::SIZE)
            .ok_or(RqError::BadWqeCount(parts.wqe_cnt))?;
        // SAFETY: the caller guarantees `buf` is `len` valid bytes with no
        // other writer in this process for `'a`.
        let ring = unsafe { RingBuf::new(parts.buf.as_ptr(), len) }.ok_or(RqError::BadStride)?;
        // SAFETY: non-null (NonNull), 4-aligned (checked), valid and
        // accessed only through this word and by the device for `'a`
        // (caller's contract).
        let dbrec = unsafe { DeviceWord::from_ptr(parts.dbrec.as_ptr()) };
        Self::new(ring, size, parts.params, dbrec, slots)
    }

    /// The striding parameters.
    pub fn params(&self) -> StridingParams {
        self.params
    }

    /// Re-post WQEs once all their strides are consumed (the default), or
    /// leave them retired for the caller to post new buffers.
    pub fn set_reuse(&mut self, reuse: bool) {
        self.reuse = reuse;
    }

    /// Enables or disables the doorbell-record write on commit (disable
    /// for a RAW_PACKET QP before RTR).
    pub fn set_doorbell_enabled(&mut self, enabled: bool) {
        self.doorbell_enabled = enabled;
    }

    /// WQEs in the ring.
    pub fn entries(&self) -> u32 {
        self.size.entries()
    }

    /// Posted WQEs not yet done.
    pub fn outstanding(&self) -> u32 {
        in_flight(self.head, self.tail)
    }

    /// The producer counter.
    pub fn head(&self) -> u32 {
        self.head
    }

    /// The consumer counter: the WQE the device is filling.
    pub fn tail(&self) -> u32 {
        self.tail
    }

    /// Strides of the WQE at [`Self::tail`] already consumed.
    pub fn consumed_strides(&self) -> u32 {
        self.consumed
    }

    /// Whether an error completion moved the queue to its error state.
    pub fn is_error(&self) -> bool {
        self.error
    }

    /// The address of stride `stride_index` of the buffer WQE `wqe_id`
    /// (taken modulo the ring) was last posted with; `None` past the last
    /// stride.
    pub fn stride_addr(&self, wqe_id: u16, stride_index: u16) -> Option<u64> {
        if u32::from(stride_index) >= self.params.num_strides() {
            return None;
        }
        let slot = self.slots.get(self.size.slot(u32::from(wqe_id)))?;
        Some(
            slot.addr
                .wrapping_add(u64::from(stride_index) << self.params.log_stride_bytes),
        )
    }

    /// Writes one WQE posting the buffer at `addr` (`num_strides ×
    /// stride_bytes` bytes, lkey `lkey`); invisible to the device until
    /// [`Self::commit`].
    pub fn post(&mut self, wr_id: u64, addr: u64, lkey: u32) -> Result<(), RqError> {
        if self.outstanding() >= self.size.entries() {
            return Err(RqError::QueueFull);
        }
        self.write_wqe(MprqSlot { wr_id, addr, lkey });
        Ok(())
    }

    /// Writes `slot`'s WQE at `head` and advances it (room checked by the
    /// caller).
    fn write_wqe(&mut self, slot: MprqSlot) {
        let at = self.size.slot(self.head);
        let wqe = MprqWqe {
            dseg: DataSeg {
                byte_count: Be32::new(self.params.wqe_bytes()),
                lkey: Be32::new(slot.lkey),
                addr: Be64::new(slot.addr),
            },
            ..MprqWqe::default()
        };
        self.ring
            .write_wrapping(at * MprqWqe::SIZE, zerocopy::IntoBytes::as_bytes(&wqe));
        if let Some(s) = self.slots.get_mut(at) {
            *s = slot;
        }
        self.head = self.head.wrapping_add(1);
    }

    /// Publishes every posted (and re-posted) WQE: to-device barrier, then
    /// `dbrec = BE32(head & 0xffff)` (skipped while the doorbell is
    /// disabled).
    pub fn commit(&mut self) {
        if self.published == self.head {
            return;
        }
        self.published = self.head;
        if self.doorbell_enabled {
            // The WQE stores reach the device before the record that
            // publishes them (DPDK `rte_io_wmb` before `*rq_db`).
            barrier::to_device();
            self.dbrec.write_be(u32::from(wq_counter16(self.head)));
        }
    }

    /// Accounts for a striding-RQ completion `c`. A successful one must
    /// name the WQE being filled (`wqe_id`, modulo the ring: DPDK's check),
    /// start at the first stride not yet consumed, and consume at least one
    /// stride and no more than the WQE has left; otherwise it is refused
    /// and nothing changes. When the WQE is then fully consumed it is done
    /// and, with reuse on, re-posted. An error completion (`error`) ends
    /// the WQE being filled, whatever it reports, and the queue enters its
    /// error state (no re-post).
    #[inline(always)]
    pub fn retire_strides(
        &mut self,
        c: StrideCompletion,
        error: bool,
    ) -> Result<StrideRetired, LookupError> {
        if error {
            return self.retire_error(c);
        }
        let mut f = self.filling().ok_or(LookupError::NotInFlight)?;
        let addr = f.take(c).ok_or(LookupError::NotInFlight)?;
        let done = f.is_done();
        let reposted = self.settle(&f);
        Ok(StrideRetired {
            wr_id: f.slot.wr_id,
            wqe_index: f.at as u16,
            stride_index: c.stride_index,
            strides: c.strides,
            addr,
            lkey: f.slot.lkey,
            filler: c.filler,
            done: done.then_some(f.slot.wr_id),
            reposted,
        })
    }

    /// The WQE being filled, for [`Filling::take`]: `None` if the doorbell
    /// record published none (only a published WQE can be reported).
    #[inline(always)]
    pub(crate) fn filling(&self) -> Option<Filling> {
        if in_flight(self.published, self.tail) == 0 {
            return None;
        }
        let at = self.size.slot(self.tail);
        let slot = *self.slots.get(at)?;
        Some(Filling {
            slot,
            at: at as u32,
            mask: self.size.entries() - 1,
            consumed: self.consumed,
            num: self.params.num_strides(),
            shift: u32::from(self.params.log_stride_bytes),
        })
    }

    /// Writes back what [`Filling::take`] accounted on `f` (taken from
    /// [`Self::filling`], no other change to the queue since): its consumed
    /// strides, or, the WQE done, its end ([`Self::wqe_done`]). Whether
    /// the WQE was re-posted.
    #[inline(always)]
    pub(crate) fn settle(&mut self, f: &Filling) -> bool {
        if f.is_done() {
            // Once per WQE, out of line.
            self.wqe_done()
        } else {
            self.consumed = f.consumed;
            false
        }
    }

    /// The WQE at `tail` is finished: it leaves the queue and, with reuse
    /// on and no error, is written again at `head`. Whether it was.
    #[inline(never)]
    fn wqe_done(&mut self) -> bool {
        let at = self.size.slot(self.tail);
        self.tail = self.tail.wrapping_add(1);
        self.consumed = 0;
        match self.slots.get(at) {
            // The ring had room for this WQE when it was posted and it has
            // just left: there is room at `head`.
            Some(&slot) if self.reuse && !self.error => {
                self.write_wqe(slot);
                true
            }
            _ => false,
        }
    }

    /// [`Self::retire_strides`] of an error completion: whatever it
    /// reports, it ends the WQE being filled (if one was published) and
    /// the queue enters its error state.
    #[cold]
    #[inline(never)]
    fn retire_error(&mut self, c: StrideCompletion) -> Result<StrideRetired, LookupError> {
        if in_flight(self.published, self.tail) == 0 {
            return Err(LookupError::NotInFlight);
        }
        let at = self.size.slot(self.tail);
        let Some(&slot) = self.slots.get(at) else {
            return Err(LookupError::NotInFlight);
        };
        self.error = true;
        self.wqe_done();
        Ok(StrideRetired {
            wr_id: slot.wr_id,
            wqe_index: at as u16,
            stride_index: c.stride_index,
            strides: c.strides,
            addr: slot
                .addr
                .wrapping_add(u64::from(c.stride_index) << self.params.log_stride_bytes),
            lkey: slot.lkey,
            filler: false,
            done: Some(slot.wr_id),
            reposted: false,
        })
    }

    /// Software flush (device gone, no flush CQEs coming): reports every
    /// outstanding wr_id in posting order, once, and empties the queue.
    pub fn flush(&mut self, mut f: impl FnMut(u64)) {
        while self.tail != self.head {
            if let Some(s) = self.slots.get(self.size.slot(self.tail)) {
                f(s.wr_id);
            }
            self.tail = self.tail.wrapping_add(1);
        }
        self.consumed = 0;
        self.error = true;
    }
}

/// A [`WorkQueues`] for a CQ created for a striding RQ
/// ([`crate::cq::CqConfig::striding_rq`]): every striding completion is
/// accounted on `rq` (one striding RQ per CQ, as DPDK pairs each Rx queue
/// with its CQ) and reported with the WQE's wr_id; the packet is at
/// [`StridingRq::stride_addr`]`(wqe_id, stride_index)` of the completion.
/// Send and cyclic-receive completions go to `inner`.
#[derive(Debug)]
pub struct StridingWorkQueues<'q, 'a, S: WorkQueues + ?Sized> {
    rq: &'q mut StridingRq<'a>,
    rx_csum_valid: bool,
    inner: &'q mut S,
}

impl<'q, 'a, S: WorkQueues + ?Sized> StridingWorkQueues<'q, 'a, S> {
    /// Routes striding completions to `rq`.
    pub fn new(rq: &'q mut StridingRq<'a>, inner: &'q mut S) -> Self {
        Self {
            rq,
            rx_csum_valid: false,
            inner,
        }
    }

    /// Reports `IBV_WC_IP_CSUM_OK` where libmlx5 would for a
    /// checksum-capable queue.
    pub fn with_rx_csum_valid(mut self, valid: bool) -> Self {
        self.rx_csum_valid = valid;
        self
    }

    /// The striding RQ.
    pub fn rq(&mut self) -> &mut StridingRq<'a> {
        self.rq
    }
}

impl<S: WorkQueues + ?Sized> WorkQueues for StridingWorkQueues<'_, '_, S> {
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
        self.inner.retire_recv(wq, wqe_counter, status)
    }

    #[inline]
    fn retire_strides(
        &mut self,
        _: WqRef,
        completion: StrideCompletion,
        status: WcStatus,
    ) -> Result<RecvRetired, LookupError> {
        let r = self
            .rq
            .retire_strides(completion, status != WcStatus::Success)?;
        Ok(RecvRetired {
            wr_id: r.wr_id,
            rx_csum_valid: self.rx_csum_valid,
        })
    }
}

#[cfg(test)]
#[cfg(not(loom))]
mod tests {
    //! Stride accounting as DPDK `mlx5_rx_burst_mprq` does it.
    use super::super::test_mem::{hex, resp_cqe, CqMem, Mem};
    use super::super::NoOtherQueues;
    use super::*;
    use crate::prm::{Be16, MprqByteCnt};
    use std::vec::Vec;

    /// 16 strides of 64 bytes per WQE.
    const P: StridingParams = StridingParams {
        log_num_strides: 4,
        log_stride_bytes: 6,
    };

    fn setup(n: u32) -> (Mem, DeviceWord<u32>, Vec<MprqSlot>) {
        (
            Mem::new(n as usize * 32),
            DeviceWord::new(0xa5a5_a5a5u32),
            std::vec![MprqSlot::EMPTY; n as usize],
        )
    }

    fn rq<'a>(
        mem: &'a Mem,
        n: u32,
        db: &'a DeviceWord<u32>,
        slots: &'a mut [MprqSlot],
    ) -> StridingRq<'a> {
        StridingRq::new(mem.ring(), RingSize::new(n).unwrap(), P, db, slots).unwrap()
    }

    fn sc(wqe_id: u16, stride_index: u16, strides: u16, filler: bool) -> StrideCompletion {
        StrideCompletion {
            wqe_id,
            stride_index,
            strides,
            filler,
        }
    }

    /// WQE `i` buffers at 0x10_0000 + 0x1000 * i.
    fn buf(i: u64) -> u64 {
        0x10_0000 + 0x1000 * i
    }

    #[test]
    fn mprq_wqe_layout_and_doorbell() {
        let (mem, db, mut slots) = setup(4);
        let mut r = rq(&mem, 4, &db, &mut slots);
        r.post(7, 0x2_0000_1000, 0x3000).unwrap();
        assert_eq!(db.read(), 0xa5a5_a5a5);
        r.commit();
        assert_eq!(db.read().to_ne_bytes(), [0, 0, 0, 1]);
        // Next segment zero, data segment of 16 × 64 = 1024 bytes.
        assert_eq!(
            mem.bytes(0, 32),
            hex("0000000000000000000000000000000000000400000030000000000200001000")
        );
        for i in 1..4 {
            r.post(i, buf(i), 1).unwrap();
        }
        assert_eq!(r.post(9, 0, 0), Err(RqError::QueueFull));
    }

    #[test]
    fn mprq_stride_accounting_and_validation() {
        let (mem, db, mut slots) = setup(4);
        let mut r = rq(&mem, 4, &db, &mut slots);
        r.post(0x100, buf(0), 1).unwrap();
        // Not published yet: nothing can complete.
        assert_eq!(
            r.retire_strides(sc(0, 0, 3, false), false),
            Err(LookupError::NotInFlight)
        );
        r.commit();
        let a = r.retire_strides(sc(0, 0, 3, false), false).unwrap();
        assert_eq!(
            a,
            StrideRetired {
                wr_id: 0x100,
                wqe_index: 0,
                stride_index: 0,
                strides: 3,
                addr: buf(0),
                lkey: 1,
                filler: false,
                done: None,
                reposted: false,
            }
        );
        let b = r.retire_strides(sc(0, 3, 5, false), false).unwrap();
        assert_eq!((b.addr, b.done), (buf(0) + 3 * 64, None));
        assert_eq!(r.stride_addr(0, 3), Some(buf(0) + 192));
        assert_eq!(r.stride_addr(0, 16), None);
        // Refused, nothing changes: a stride other than the next one, the
        // wrong WQE, no strides, more strides than are left.
        for bad in [
            sc(0, 7, 1, false),
            sc(0, 9, 1, false),
            sc(1, 8, 1, false),
            sc(0, 8, 0, false),
            sc(0, 8, 9, false),
        ] {
            assert_eq!(
                r.retire_strides(bad, false),
                Err(LookupError::NotInFlight),
                "{bad:?}"
            );
            assert_eq!((r.consumed_strides(), r.tail(), r.head()), (8, 0, 1));
        }
        // The wqe_id is compared modulo the ring (a 16-bit counter).
        let c = r.retire_strides(sc(4, 8, 8, false), false).unwrap();
        assert_eq!((c.done, c.reposted), (Some(0x100), true));
        assert_eq!((r.tail(), r.head(), r.consumed_strides()), (1, 2, 0));
    }

    #[test]
    fn mprq_filler_skips_strides_and_reuses_the_wqe() {
        let (mem, db, mut slots) = setup(2);
        let mut r = rq(&mem, 2, &db, &mut slots);
        r.post(0x100, buf(0), 1).unwrap();
        r.post(0x101, buf(1), 1).unwrap();
        r.commit();
        r.retire_strides(sc(0, 0, 10, false), false).unwrap();
        // A packet of 8 strides does not fit in the 6 left: filler first.
        let f = r.retire_strides(sc(0, 10, 6, true), false).unwrap();
        assert!(f.filler);
        assert_eq!((f.done, f.reposted), (Some(0x100), true));
        let p = r.retire_strides(sc(1, 0, 8, false), false).unwrap();
        assert_eq!((p.wr_id, p.addr, p.done), (0x101, buf(1), None));
        // WQE 0 was re-posted at slot 0 (the ring was full): same bytes,
        // published on commit only.
        assert_eq!(db.read_be(), 2);
        r.commit();
        assert_eq!(db.read_be(), 3);
        assert_eq!(
            mem.bytes(0, 32),
            hex("0000000000000000000000000000000000000400000000010000000000100000")
        );
        assert_eq!(r.outstanding(), 2);
    }

    #[test]
    fn mprq_reuse_wraps_the_ring() {
        let (mem, db, mut slots) = setup(4);
        let mut r = rq(&mem, 4, &db, &mut slots);
        for i in 0..4 {
            r.post(0x100 + i, buf(i), 1).unwrap();
        }
        r.commit();
        let rounds: u32 = if cfg!(miri) { 10 } else { 70_000 };
        let mut done = Vec::new();
        for w in 0..rounds {
            let id = w as u16;
            // 5 + 5 + 6 strides: the last finishes the WQE.
            for (at, n) in [(0, 5), (5, 5), (10, 6)] {
                let x = r.retire_strides(sc(id, at, n, false), false).unwrap();
                assert_eq!(x.addr, buf(u64::from(w % 4)) + u64::from(at) * 64);
                if let Some(d) = x.done {
                    assert!(x.reposted);
                    done.push(d);
                }
            }
            r.commit();
            assert_eq!(db.read_be(), (w + 5) & 0xffff);
        }
        assert_eq!(done.len() as u32, rounds);
        assert!(done
            .iter()
            .enumerate()
            .all(|(i, &d)| d == 0x100 + (i % 4) as u64));
        assert_eq!(
            (r.outstanding(), r.tail(), r.head()),
            (4, rounds, rounds + 4)
        );
    }

    #[test]
    fn mprq_error_ends_the_wqe_without_reuse_and_flush() {
        let (mem, db, mut slots) = setup(4);
        let mut r = rq(&mem, 4, &db, &mut slots);
        for i in 0..3 {
            r.post(0x100 + i, buf(i), 1).unwrap();
        }
        r.commit();
        r.retire_strides(sc(0, 0, 4, false), false).unwrap();
        // Flush CQEs carry nothing to check: each ends the WQE at the tail.
        let e = r.retire_strides(sc(0x77, 0x55, 0, false), true).unwrap();
        assert_eq!(
            (e.wr_id, e.done, e.reposted, e.filler),
            (0x100, Some(0x100), false, false)
        );
        assert!(r.is_error());
        assert_eq!(
            r.retire_strides(sc(1, 0, 1, false), true).unwrap().done,
            Some(0x101)
        );
        let mut flushed = Vec::new();
        r.flush(|w| flushed.push(w));
        assert_eq!(flushed, [0x102]);
        assert_eq!(
            r.retire_strides(sc(3, 0, 1, false), true),
            Err(LookupError::NotInFlight)
        );
    }

    #[test]
    fn mprq_reuse_off_and_parameters() {
        let (mem, db, mut slots) = setup(2);
        let mut r = rq(&mem, 2, &db, &mut slots);
        r.set_reuse(false);
        r.post(1, buf(0), 1).unwrap();
        r.commit();
        let x = r.retire_strides(sc(0, 0, 16, false), false).unwrap();
        assert_eq!((x.done, x.reposted, r.outstanding()), (Some(1), false, 0));
        let bad = StridingParams {
            log_num_strides: 17,
            log_stride_bytes: 6,
        };
        let (mem, db, mut slots) = setup(2);
        assert_eq!(
            StridingRq::new(mem.ring(), RingSize::new(2).unwrap(), bad, &db, &mut slots).err(),
            Some(RqError::BadStriding)
        );
        let (mem, db, mut slots) = setup(2);
        assert_eq!(
            StridingRq::new(mem.ring(), RingSize::new(4).unwrap(), P, &db, &mut slots).err(),
            Some(RqError::BadStride)
        );
    }

    #[test]
    fn mprq_cq_adaptor_reports_packets_and_hides_fillers() {
        let (mem, db, mut slots) = setup(2);
        let mut r = rq(&mem, 2, &db, &mut slots);
        r.post(0x100, buf(0), 1).unwrap();
        r.post(0x101, buf(1), 1).unwrap();
        r.commit();
        let cqm = CqMem::new(8);
        let mut cq = cqm.cq(true);
        let stride_cqe = |slot: usize, wqe_id: u16, stride: u16, strides: u16, len: u16, filler| {
            let bc = MprqByteCnt::new()
                .with_byte_cnt(len)
                .with_strides(strides)
                .with_filler(filler);
            let mut c = resp_cqe(false, 0x11, 0, stride, bc.into_bits());
            c.wqe_id = Be16::new(wqe_id);
            cqm.put(slot, &c);
        };
        stride_cqe(0, 0, 0, 9, 540, false);
        stride_cqe(1, 0, 9, 7, 0, true);
        stride_cqe(2, 1, 0, 2, 100, false);
        let mut rest = NoOtherQueues;
        let mut wqs = StridingWorkQueues::new(&mut r, &mut rest);
        let mut got = Vec::new();
        let n = cq
            .poll(&mut wqs, 8, |c| {
                got.push((
                    c.wr_id(),
                    c.packet_len(),
                    c.stride_index(),
                    c.consumed_strides(),
                ))
            })
            .unwrap();
        assert_eq!(n, 2, "the filler is not reported");
        assert_eq!(
            got,
            [
                (0x100, 540, Some(0), Some(9)),
                (0x101, 100, Some(0), Some(2))
            ]
        );
        // WQE 0 was filled (9 + 7 filler) and re-posted.
        let rq = wqs.rq();
        assert_eq!((rq.tail(), rq.head(), rq.consumed_strides()), (1, 3, 2));
        assert_eq!(rq.stride_addr(1, 0), Some(buf(1)));
        rq.commit();
        assert_eq!(db.read_be(), 3);
    }
}
