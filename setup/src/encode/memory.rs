//! The ordinary memory that stands in for a send queue's SQ buffer,
//! doorbell record and UAR page (and a receive queue's RQ buffer and
//! record), and the one `unsafe` of the encoder: handing that memory to
//! [`SendQueue::new`] (and to the receive queue's [`RingBuf::new`] and
//! doorbell-record word).
//!
//! The blocks are [`DmaBlock`]s (aligned, zeroed heap memory that is read
//! and written only through raw pointers and atomics, never references), so
//! the core may hold raw pointers into them while this module reads them
//! back between batches. Everything runs on one thread: the core's plain
//! and volatile stores and our atomic loads never overlap in time.

use crate::emu::mem::{DmaBlock, MemError};
use mlx5dp::index::RingSize;
use mlx5dp::mmio::DeviceWord;
use mlx5dp::prm::SEND_WQE_BB;
use mlx5dp::ring::RingBuf;
use mlx5dp::rq::{Rq, RqError};
use mlx5dp::sq::{
    DoorbellPolicy, SendQueue, SqConfig, SqConfigError, SqRawParts, SqShadowEntry, Wqebb,
};
use std::ptr::NonNull;

/// Size of a UAR page: the register offsets printed are offsets in it.
pub const UAR_PAGE: usize = 4096;

/// Why the memory or the queue could not be set up.
#[derive(Debug)]
pub enum SetupError {
    /// Allocating a block failed.
    Mem(MemError),
    /// The core refused the parts or settings.
    Config(SqConfigError),
    /// The BlueFlame register does not fit the UAR page, or is misaligned.
    Register,
    /// The core refused the receive queue's parts.
    Recv(RqError),
}

/// The SQ buffer, doorbell record and UAR page of one simulated queue.
#[derive(Debug)]
pub struct Memory {
    ring: DmaBlock,
    dbrec: DmaBlock,
    uar: DmaBlock,
    wqe_cnt: u32,
    uar_fill: u8,
}

impl Memory {
    /// A zero-filled ring of `wqe_cnt` WQEBBs, a zeroed doorbell record and
    /// a UAR page filled with `uar_fill`.
    pub fn new(wqe_cnt: u32, uar_fill: u8) -> Result<Self, SetupError> {
        let ring_len = (wqe_cnt as usize)
            .checked_mul(SEND_WQE_BB)
            .ok_or(SetupError::Mem(MemError::Alloc))?;
        let ring = DmaBlock::new(ring_len, UAR_PAGE).map_err(SetupError::Mem)?;
        let dbrec = DmaBlock::new(8, 8).map_err(SetupError::Mem)?;
        let uar = DmaBlock::new(UAR_PAGE, UAR_PAGE).map_err(SetupError::Mem)?;
        let mem = Self {
            ring,
            dbrec,
            uar,
            wqe_cnt,
            uar_fill,
        };
        mem.refill_uar()?;
        Ok(mem)
    }

    /// Builds the send queue over this memory: the BlueFlame register at
    /// `bf_reg` in the UAR page with halves of `bf_buf_size` bytes.
    pub fn queue<'m, P: DoorbellPolicy>(
        &'m self,
        config: SqConfig,
        bf_reg: usize,
        bf_buf_size: u32,
        shadow: &'m mut [SqShadowEntry],
        staging: &'m mut [Wqebb],
    ) -> Result<SendQueue<'m, P>, SetupError> {
        let reg_len = std::cmp::max(2 * bf_buf_size as usize, 8);
        if bf_reg % 64 != 0 || bf_reg.checked_add(reg_len).is_none_or(|end| end > UAR_PAGE) {
            return Err(SetupError::Register);
        }
        let buf = NonNull::new(self.ring.as_ptr()).ok_or(SetupError::Mem(MemError::Alloc))?;
        let bf = NonNull::new(self.uar.as_ptr().wrapping_add(bf_reg))
            .ok_or(SetupError::Mem(MemError::Alloc))?;
        // SAFETY: the SQ word of the doorbell record is bytes 4..8 of the
        // 8-byte, 8-aligned `dbrec` block, so the pointer is aligned and
        // valid for a `u32` for `'m` (the block lives as long as `self`).
        // Nothing else writes it; this module only reads it back with
        // atomic loads from the same thread, never concurrently.
        let dbrec = unsafe { DeviceWord::from_ptr(self.dbrec.as_ptr().cast::<u32>().add(1)) };
        let raw = SqRawParts {
            buf,
            wqe_cnt: self.wqe_cnt,
            dbrec,
            bf_reg: bf,
            bf_buf_size,
        };
        // SAFETY: for `'m`:
        // - `buf` is `wqe_cnt * 64` bytes of the `ring` block, 4096-aligned,
        //   valid for reads and writes; nothing else writes it (this module
        //   only reads it back, from the same thread, between batches) and
        //   no Rust reference to it exists (`DmaBlock` hands out pointers);
        // - `bf` is `reg_len` bytes inside the 4096-byte `uar` block (checked
        //   above), 64-aligned, ordinary memory valid for volatile 8-byte
        //   writes; the only other accesses are this module's atomic fills
        //   and reads between batches, on the same thread;
        // - `dbrec` is this queue's doorbell-record word (see above);
        // - no other software posts to this "QP": it exists only here.
        unsafe { SendQueue::<P>::new(raw, config, shadow, staging) }.map_err(SetupError::Config)
    }

    /// Fills the UAR page with the fill byte again (before each batch, so
    /// that the bytes a batch's register write leaves can be found).
    pub fn refill_uar(&self) -> Result<(), SetupError> {
        self.uar
            .fill(0, UAR_PAGE, self.uar_fill)
            .map_err(SetupError::Mem)
    }

    /// The UAR page as it is now.
    pub fn uar(&self) -> Result<Vec<u8>, SetupError> {
        let mut page = vec![0; UAR_PAGE];
        self.uar.read(0, &mut page).map_err(SetupError::Mem)?;
        Ok(page)
    }

    /// The SQ doorbell-record word (`dbrec[MLX5_SND_DBR]`), host order.
    pub fn dbrec(&self) -> Result<u32, SetupError> {
        let mut word = [0; 4];
        self.dbrec.read(4, &mut word).map_err(SetupError::Mem)?;
        Ok(u32::from_be_bytes(word))
    }

    /// `n` WQEBBs of the ring from slot `slot`, continuing at slot 0 after
    /// the last one.
    pub fn wqebbs(&self, slot: u32, n: u32) -> Result<Vec<u8>, SetupError> {
        let mut out = vec![0; n as usize * SEND_WQE_BB];
        let mask = self.wqe_cnt.wrapping_sub(1);
        for (k, chunk) in out.chunks_mut(SEND_WQE_BB).enumerate() {
            let s = slot.wrapping_add(k as u32) & mask;
            self.ring
                .read(s as usize * SEND_WQE_BB, chunk)
                .map_err(SetupError::Mem)?;
        }
        Ok(out)
    }
}

/// The RQ buffer and doorbell record of one simulated receive queue
/// (`mlx5dp encode recv`).
#[derive(Debug)]
pub struct RecvMemory {
    ring: DmaBlock,
    dbrec: DmaBlock,
    wqe_cnt: u32,
    wqe_shift: u8,
}

impl RecvMemory {
    /// A zero-filled ring of `wqe_cnt` WQEs of `1 << wqe_shift` bytes and a
    /// zeroed doorbell record.
    pub fn new(wqe_cnt: u32, wqe_shift: u8) -> Result<Self, SetupError> {
        let ring_len = (wqe_cnt as usize)
            .checked_shl(u32::from(wqe_shift))
            .filter(|&n| n >> wqe_shift == wqe_cnt as usize)
            .ok_or(SetupError::Mem(MemError::Alloc))?;
        let ring = DmaBlock::new(ring_len, UAR_PAGE).map_err(SetupError::Mem)?;
        let dbrec = DmaBlock::new(8, 8).map_err(SetupError::Mem)?;
        Ok(Self {
            ring,
            dbrec,
            wqe_cnt,
            wqe_shift,
        })
    }

    /// The core's cyclic receive queue over this memory, its head counter
    /// at `head`, its wr_id shadow `wrid` (`wqe_cnt` entries).
    pub fn rq<'m>(&'m self, wrid: &'m mut [u64], head: u32) -> Result<Rq<'m>, SetupError> {
        let size = RingSize::new(self.wqe_cnt).ok_or(SetupError::Mem(MemError::Alloc))?;
        // SAFETY: the receive word of the doorbell record is bytes 0..4 of
        // the 8-byte, 8-aligned `dbrec` block: aligned and valid for a `u32`
        // for `'m` (the block lives as long as `self`). Nothing else writes
        // it; this module only reads and refills it with the block's atomic
        // accesses from the same thread, between batches.
        let dbrec = unsafe { DeviceWord::from_ptr(self.dbrec.as_ptr().cast::<u32>()) };
        // SAFETY: `ring` is `wqe_cnt << wqe_shift` bytes (checked in `new`),
        // valid for reads and writes for `'m`; no Rust reference to it
        // exists (`DmaBlock` hands out pointers) and nothing else writes it
        // while the queue lives (this module only reads it back, from the
        // same thread, between posts).
        let ring = unsafe { RingBuf::new(self.ring.as_ptr(), self.ring.len()) }
            .ok_or(SetupError::Mem(MemError::Alloc))?;
        Rq::new(ring, size, self.wqe_shift, dbrec, wrid, head).map_err(SetupError::Recv)
    }

    /// The doorbell-record word (`dbrec[MLX5_RCV_DBR]`), host order.
    pub fn dbrec(&self) -> Result<u32, SetupError> {
        let mut word = [0; 4];
        self.dbrec.read(0, &mut word).map_err(SetupError::Mem)?;
        Ok(u32::from_be_bytes(word))
    }

    /// Sets the doorbell-record word (host order, stored big-endian).
    pub fn set_dbrec(&self, value: u32) -> Result<(), SetupError> {
        self.dbrec
            .write(0, &value.to_be_bytes())
            .map_err(SetupError::Mem)
    }

    /// The `stride` bytes of WQE slot `slot`.
    pub fn wqe(&self, slot: u32, stride: u32) -> Result<Vec<u8>, SetupError> {
        let mut out = vec![0; stride as usize];
        self.ring
            .read(slot as usize * stride as usize, &mut out)
            .map_err(SetupError::Mem)?;
        Ok(out)
    }
}
