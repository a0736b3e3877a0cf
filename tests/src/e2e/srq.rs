//! Receive queues the core has no poster for yet: the shared receive
//! queue (libmlx5 `mlx5_post_srq_recv` / `mlx5_free_srq_wqe`) and the
//! striding RQ (DPDK `mlx5_rxq_mprq`), written over the same raw parts the
//! backend hands out.

use mlx5dp::barrier;
use mlx5dp::cq::{LookupError, StrideCompletion};
use mlx5dp::prm::{Be32, Be64, DataSeg, INVALID_LKEY};
use mlx5dp_setup::backend::Buffer;
use mlx5dp_setup::emu::{CoreRq, EmuRqKind, RqRawParts};
use zerocopy::IntoBytes;

/// Bytes of the SRQ next segment that precedes the data segments.
const NEXT_SEG: usize = 16;

fn data_seg(addr: u64, lkey: u32, len: u32) -> DataSeg {
    DataSeg {
        byte_count: Be32::new(len),
        lkey: Be32::new(lkey),
        addr: Be64::new(addr),
    }
}

/// A shared receive queue: a linked list of WQEs; `head` is the next free
/// WQE to post, `tail` the last free one (never posted, so `head == tail`
/// means full), freed WQEs are linked after `tail`.
#[derive(Debug)]
pub struct TestSrq {
    parts: RqRawParts<'static>,
    stride: usize,
    head: u16,
    tail: u16,
    counter: u16,
    wrid: Vec<Option<u64>>,
}

/// Why a receive could not be posted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecvPostError {
    /// No free WQE.
    Full,
    /// More SGEs than a WQE holds.
    TooManySges,
}

impl TestSrq {
    /// An SRQ poster over `rq` (leaked: the parts borrow it for `'static`).
    pub fn new(rq: &'static CoreRq) -> Self {
        // SAFETY: called once per SRQ; the owner is leaked.
        let parts = unsafe { rq.raw_parts() }.expect("SRQ parts");
        assert_eq!(parts.kind, EmuRqKind::Srq);
        let n = parts.size.entries();
        Self {
            stride: 1 << parts.wqe_shift,
            head: 0,
            tail: (n - 1) as u16,
            counter: 0,
            wrid: vec![None; n as usize],
            parts,
        }
    }

    /// The SRQ number.
    pub fn srqn(&self) -> u32 {
        self.parts.num
    }

    /// SGEs per WQE.
    pub fn max_sge(&self) -> usize {
        (self.stride - NEXT_SEG) / DataSeg::SIZE
    }

    /// Posted WQEs not yet completed.
    pub fn outstanding(&self) -> usize {
        self.wrid.iter().filter(|w| w.is_some()).count()
    }

    /// The wr_ids posted and not yet completed.
    pub fn posted_ids(&self) -> Vec<u64> {
        self.wrid.iter().flatten().copied().collect()
    }

    /// Writes one receive WQE (published by [`Self::commit`]).
    pub fn post(&mut self, wr_id: u64, sges: &[(u64, u32, u32)]) -> Result<(), RecvPostError> {
        if self.head == self.tail {
            return Err(RecvPostError::Full);
        }
        if sges.len() > self.max_sge() {
            return Err(RecvPostError::TooManySges);
        }
        let ind = usize::from(self.head);
        let base = ind * self.stride;
        let mut next = [0u8; 2];
        self.parts.ring.read_wrapping(base + 2, &mut next);
        let mut off = base + NEXT_SEG;
        for &(addr, lkey, len) in sges {
            self.parts
                .ring
                .write_wrapping(off, data_seg(addr, lkey, len).as_bytes());
            off += DataSeg::SIZE;
        }
        if sges.len() < self.max_sge() {
            self.parts
                .ring
                .write_wrapping(off, data_seg(0, INVALID_LKEY, 0).as_bytes());
        }
        self.wrid[ind] = Some(wr_id);
        self.head = u16::from_be_bytes(next) & self.parts.size.mask() as u16;
        self.counter = self.counter.wrapping_add(1);
        Ok(())
    }

    /// Publishes the posted WQEs: the WQE counter in the doorbell record.
    pub fn commit(&mut self) {
        barrier::to_device();
        self.parts.dbrec.write_be(u32::from(self.counter));
    }

    /// Retires the WQE a completion names and links it after the tail.
    pub fn retire(&mut self, wqe_counter: u16) -> Result<u64, LookupError> {
        let ind = usize::from(wqe_counter) & self.parts.size.mask() as usize;
        let wr_id = self
            .wrid
            .get_mut(ind)
            .and_then(Option::take)
            .ok_or(LookupError::NotInFlight)?;
        let tail = usize::from(self.tail) * self.stride;
        self.parts
            .ring
            .write_wrapping(tail + 2, &(ind as u16).to_be_bytes());
        self.tail = ind as u16;
        Ok(wr_id)
    }
}

/// A striding RQ: each WQE is one buffer of `2^log_num_strides` strides;
/// packets take consecutive strides; a WQE is done when all its strides
/// were consumed (by packets or a filler).
#[derive(Debug)]
pub struct TestStridingRq {
    parts: RqRawParts<'static>,
    /// The receive buffer: one region of `wqe_bytes` per ring slot.
    pub buf: Buffer,
    num_strides: u32,
    stride_bytes: u32,
    head: u32,
    tail: u32,
    consumed: u32,
    wrid: Vec<u64>,
}

impl TestStridingRq {
    /// A striding-RQ poster over `rq`, receiving into `buf` (at least
    /// `wqe_cnt * strides * stride_bytes` bytes).
    pub fn new(rq: &'static CoreRq, buf: Buffer) -> Self {
        // SAFETY: called once per RQ; the owner is leaked.
        let parts = unsafe { rq.raw_parts() }.expect("striding RQ parts");
        let EmuRqKind::Striding {
            log_num_strides,
            log_stride_bytes,
        } = parts.kind
        else {
            panic!("not a striding RQ");
        };
        let n = parts.size.entries() as usize;
        let me = Self {
            num_strides: 1 << log_num_strides,
            stride_bytes: 1 << log_stride_bytes,
            head: 0,
            tail: 0,
            consumed: 0,
            wrid: vec![0; n],
            parts,
            buf,
        };
        assert!(
            me.buf.len() >= n * me.wqe_bytes(),
            "striding buffer too small"
        );
        me
    }

    /// Bytes of one WQE's buffer.
    pub fn wqe_bytes(&self) -> usize {
        (self.num_strides * self.stride_bytes) as usize
    }

    /// Bytes per stride.
    pub fn stride_bytes(&self) -> usize {
        self.stride_bytes as usize
    }

    /// WQEs posted and not done.
    pub fn outstanding(&self) -> u32 {
        self.head.wrapping_sub(self.tail)
    }

    /// Posts one WQE (published by [`Self::commit`]).
    pub fn post(&mut self, wr_id: u64) -> Result<(), RecvPostError> {
        if self.outstanding() >= self.parts.size.entries() {
            return Err(RecvPostError::Full);
        }
        let slot = self.parts.size.slot(self.head);
        let mut wqe = [0u8; 32];
        let seg = data_seg(
            self.buf.addr(slot * self.wqe_bytes()),
            self.buf.key,
            self.wqe_bytes() as u32,
        );
        wqe[16..].copy_from_slice(seg.as_bytes());
        self.parts.ring.write_wrapping(slot * 32, &wqe);
        self.wrid[slot] = wr_id;
        self.head = self.head.wrapping_add(1);
        Ok(())
    }

    /// Publishes: the 16-bit WQE counter in the doorbell record.
    pub fn commit(&mut self) {
        barrier::to_device();
        self.parts.dbrec.write_be(self.head & 0xffff);
    }

    /// Accounts for a stride completion; returns the WQE's wr_id and, when
    /// the WQE is now done, its wr_id again as retired.
    pub fn retire(
        &mut self,
        c: StrideCompletion,
        error: bool,
    ) -> Result<(u64, Option<u64>), LookupError> {
        if self.outstanding() == 0 {
            return Err(LookupError::NotInFlight);
        }
        let slot = self.parts.size.slot(self.tail);
        if !error && c.wqe_id != self.tail as u16 {
            return Err(LookupError::NotInFlight);
        }
        let wr_id = self.wrid[slot];
        self.consumed += u32::from(c.strides);
        if error || self.consumed >= self.num_strides {
            self.consumed = 0;
            self.tail = self.tail.wrapping_add(1);
            return Ok((wr_id, Some(wr_id)));
        }
        Ok((wr_id, None))
    }

    /// The bytes of a packet: `len` bytes at stride `stride_index` of WQE
    /// `wqe_id`.
    pub fn packet(&self, wqe_id: u16, stride_index: u16, len: usize) -> Vec<u8> {
        let slot = usize::from(wqe_id) & self.parts.size.mask() as usize;
        self.buf.read(
            slot * self.wqe_bytes() + usize::from(stride_index) * self.stride_bytes(),
            len,
        )
    }
}
