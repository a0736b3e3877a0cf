//! The send doorbell: doorbell record, then an 8-byte doorbell or a
//! BlueFlame copy, with the barriers between them (PRM-FACTS §7, §14;
//! rdma-core `providers/mlx5/qp.c` `post_send_db`).
//!
//! Which of the two register writes a batch uses is a policy fixed at compile
//! time by a marker type, not a flag tested per WQE (STYLE point 10):
//!
//! | policy | rdma-core equivalent | BlueFlame when |
//! |---|---|---|
//! | [`DoorbellOnly`] | `MLX5_SHUT_UP_BF=1`, or a bfreg without BlueFlame (`uuarn == 0`) | never |
//! | [`BlueFlameInline`] | `MLX5_POST_SEND_PREFER_BF=0` | the batch is one WQE that carries inline data |
//! | [`BlueFlamePreferred`] | the default (`MLX5_POST_SEND_PREFER_BF` unset) | the batch is one WQE |
//!
//! and in both BlueFlame cases only if the WQE has more than one DS and fits
//! the BlueFlame buffer (`1 < ds <= bf_buf_size / 16`), exactly libmlx5's
//! test. A queue built with `bf_buf_size == 0` never uses BlueFlame.
//!
//! The one `unsafe` here is the BlueFlame copy without its range test
//! ([`BfHalves::write_chunk64`]): [`Doorbell::new`] checks once that both
//! halves fit the register, and the test before the copy that it fits a
//! half.
#![deny(unsafe_code)]

use crate::barrier;
use crate::mmio::{BfHalves, DeviceWord, Register};
use crate::prm::{SEND_WQE_BB, SEND_WQE_DS};

use super::Wqebb;

mod sealed {
    pub trait Sealed {}
}

/// How a batch's doorbell is rung: a compile-time choice (see the module
/// documentation for the table).
pub trait DoorbellPolicy: sealed::Sealed {
    /// Whether BlueFlame is ever used.
    const BLUEFLAME: bool;
    /// Whether BlueFlame needs the WQE to carry inline data.
    const BLUEFLAME_ONLY_INLINE: bool;
}

/// Always the 8-byte doorbell (rdma-core `MLX5_SHUT_UP_BF`).
#[derive(Debug, Clone, Copy, Default)]
pub struct DoorbellOnly;
/// BlueFlame for a single-WQE batch with inline data
/// (rdma-core with `MLX5_POST_SEND_PREFER_BF=0`).
#[derive(Debug, Clone, Copy, Default)]
pub struct BlueFlameInline;
/// BlueFlame for every single-WQE batch that fits (rdma-core's default).
#[derive(Debug, Clone, Copy, Default)]
pub struct BlueFlamePreferred;

impl sealed::Sealed for DoorbellOnly {}
impl sealed::Sealed for BlueFlameInline {}
impl sealed::Sealed for BlueFlamePreferred {}

impl DoorbellPolicy for DoorbellOnly {
    const BLUEFLAME: bool = false;
    const BLUEFLAME_ONLY_INLINE: bool = false;
}
impl DoorbellPolicy for BlueFlameInline {
    const BLUEFLAME: bool = true;
    const BLUEFLAME_ONLY_INLINE: bool = true;
}
impl DoorbellPolicy for BlueFlamePreferred {
    const BLUEFLAME: bool = true;
    const BLUEFLAME_ONLY_INLINE: bool = false;
}

/// Marks the path it is called on as the unusual one for the compiler's
/// block layout (a BlueFlame policy's 8-byte doorbell).
#[cold]
#[inline(never)]
fn unusual() {}

/// What a completed batch hands to the doorbell.
pub(super) struct Publish<'s> {
    /// The new producer counter (next free WQEBB), free-running.
    pub pi: u32,
    /// The last WQE of the batch, whole WQEBBs, from the staging area.
    pub last_wqe: &'s [Wqebb],
    /// DS count of the last WQE.
    pub last_ds: u8,
    /// Number of WQEs in the batch (at least 1).
    pub nreq: u32,
    /// Whether the batch carried inline data.
    pub inline: bool,
}

/// The doorbell record word and the BlueFlame register of one SQ.
#[derive(Debug)]
pub(super) struct Doorbell<'a> {
    /// `dbrec[MLX5_SND_DBR]`: the SQ producer counter, big-endian.
    dbrec: &'a DeviceWord<u32>,
    /// The doorbell/BlueFlame register: two halves of `buf_size` bytes
    /// (or one 8-byte doorbell when `buf_size == 0`), and the half the next
    /// write goes to (rdma-core `bf->reg + bf->offset`).
    halves: BfHalves,
    /// Size of one BlueFlame half in bytes (rdma-core `bf->buf_size`).
    buf_size: usize,
    /// `loom` models only: faults to inject, and a `loom` atomic that
    /// mirrors the first 8 bytes of every register write, so that a model's
    /// device thread can wake on the doorbell (the register itself is MMIO,
    /// invisible to `loom`).
    #[cfg(loom)]
    pub(super) loom: LoomHooks,
}

/// See [`Doorbell::loom`].
#[cfg(loom)]
#[derive(Debug, Default)]
pub(super) struct LoomHooks {
    pub(super) skip_to_device: bool,
    pub(super) skip_wc_start: bool,
    pub(super) mirror: Option<std::sync::Arc<DeviceWord<u64>>>,
}

impl<'a> Doorbell<'a> {
    /// # Panics
    ///
    /// If `buf_size` is not a multiple of 64 or the register is shorter
    /// than `max(2 * buf_size, 8)` bytes (the send queue's constructor
    /// checks both before: this is the invariant the register writes rely
    /// on, checked where it is established).
    pub(super) fn new(
        dbrec: &'a DeviceWord<u32>,
        reg: Register,
        buf_size: usize,
        second_half: bool,
    ) -> Self {
        let Some(halves) = BfHalves::new(reg, buf_size, second_half) else {
            panic!("BlueFlame halves do not fit the register")
        };
        Self {
            dbrec,
            halves,
            buf_size,
            #[cfg(loom)]
            loom: LoomHooks::default(),
        }
    }

    /// Byte offset, within the register, of the half the next write uses.
    pub(super) fn offset(&self) -> usize {
        self.halves.offset()
    }

    /// Publishes a batch whose WQEs are already in the ring: one doorbell
    /// record write and one register write per batch.
    #[inline(always)]
    pub(super) fn ring<P: DoorbellPolicy>(&mut self, p: Publish<'_>) {
        // 1. The WQE stores (already done, by the caller) must reach memory
        //    before the device can learn of them from the doorbell record.
        #[cfg(loom)]
        let skip = self.loom.skip_to_device;
        #[cfg(not(loom))]
        let skip = false;
        if !skip {
            barrier::to_device();
        }
        // 2. Doorbell record: the 16-bit producer counter, big-endian
        //    (rdma-core `qp->db[MLX5_SND_DBR] = htobe32(cur_post & 0xffff)`).
        self.dbrec
            .write_be(u32::from(crate::index::wq_counter16(p.pi)));
        // 3. The doorbell record must be visible before the register write
        //    that makes the device fetch (rdma-core `mmio_wc_start`).
        #[cfg(loom)]
        let skip = self.loom.skip_wc_start;
        #[cfg(not(loom))]
        let skip = false;
        if !skip {
            barrier::wc_start();
        }
        // 4. BlueFlame copy of the single WQE, or the 8-byte doorbell: the
        //    first 8 bytes of the last WQE's control segment.
        let ds = usize::from(p.last_ds);
        let use_bf = P::BLUEFLAME
            && p.nreq == 1
            && (p.inline || !P::BLUEFLAME_ONLY_INLINE)
            && ds > 1
            && ds * SEND_WQE_DS <= self.buf_size;
        if use_bf {
            let chunks = ds.div_ceil(SEND_WQE_BB / SEND_WQE_DS);
            if let (1, Some(chunk)) = (chunks, p.last_wqe.first()) {
                // The one-WQEBB WQE (most single work requests): one copy,
                // no loop.
                // SAFETY: chunk 0 of the half: `0 < ds * 16 <= buf_size`
                // (the test above) and `buf_size` is a multiple of 64
                // (checked by `BfHalves::new`), so `64 <= buf_size`.
                #[allow(unsafe_code)]
                unsafe {
                    self.halves.write_chunk64(0, &chunk.0);
                }
            } else {
                for (i, chunk) in p.last_wqe.iter().take(chunks).enumerate() {
                    // SAFETY: `i < chunks`, and `chunks * 64 <= buf_size`
                    // because `ds * 16 <= buf_size` (the test above) and
                    // `buf_size` (the halves' size) is a multiple of 64
                    // (checked by `BfHalves::new`): `(i + 1) * 64 <= buf_size`.
                    #[allow(unsafe_code)]
                    unsafe {
                        self.halves.write_chunk64(i, &chunk.0);
                    }
                }
            }
        } else if let Some(first) = p.last_wqe.first() {
            if P::BLUEFLAME {
                unusual();
            }
            let [b0, b1, b2, b3, b4, b5, b6, b7, ..] = first.0;
            self.halves.write64([b0, b1, b2, b3, b4, b5, b6, b7]);
        }
        #[cfg(loom)]
        if let (Some(m), Some(first)) = (&self.loom.mirror, p.last_wqe.first()) {
            let [b0, b1, b2, b3, b4, b5, b6, b7, ..] = first.0;
            m.write(u64::from_ne_bytes([b0, b1, b2, b3, b4, b5, b6, b7]));
        }
        // 5. Flush the write-combining buffer before the next doorbell can
        //    reuse it, so two doorbells never reach the device out of order
        //    (rdma-core: `mmio_flush_writes()` before toggling `bf->offset`).
        barrier::wc_flush();
        // 6. Alternate BlueFlame halves, after plain doorbells too (rdma-core
        //    `bf->offset ^= bf->buf_size`).
        self.halves.toggle();
    }
}
