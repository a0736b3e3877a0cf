//! The host side of `mlx5dp trace record` on hardware: a
//! [`crate::trace_record::Tap`] that reads, around each post and poll, the
//! memory the core and the device share, and writes it as
//! [`HostTrace`] records.
//!
//! - after `complete`: each WQE posted (exactly its `ds` 16-byte units,
//!   from the send ring), the SQ doorbell-record word, and the 8-byte
//!   doorbell value (the last WQE's first control-segment bytes: the
//!   register itself cannot be read back);
//! - after an RQ `commit`: the RQ doorbell-record word;
//! - around each poll: before it, the slots from the consumer index that
//!   software owns (owner bit of the current pass, opcode not INVALID);
//!   after it, those the poll consumed are written as CQE records.
//!
//! Compressed sessions are not split out (the host sees a title and
//! mini-CQE arrays): the scenario creates its CQs without compression.
//!
//! The reads are volatile byte loads, the accesses the core itself makes to
//! device-written memory; they run on the thread that posts and polls, so
//! the core's own writes are not concurrent. Without a device this runs on
//! the emulated one in step mode (the tests below), where nothing else
//! touches the rings between two calls.

use crate::emu::{CoreCq, CoreRq, CoreSq, EmuRqKind};
use crate::trace_record::{HostTrace, Tap};

/// Reads `out.len()` bytes at `off` of the `len`-byte ring at `base`,
/// wrapping at its end.
///
/// # Safety
///
/// `base..base + len` is a live ring (kept alive by the owner the caller
/// borrows) that no thread of this process writes during the call except
/// with atomics or volatile stores of whole bytes; `len > 0`.
unsafe fn read_ring(base: *const u8, len: usize, off: usize, out: &mut [u8]) {
    for (i, b) in out.iter_mut().enumerate() {
        let at = (off + i) % len;
        // SAFETY: `at < len`, inside the ring (caller); volatile because
        // the device writes it behind the compiler's back.
        *b = unsafe { base.add(at).read_volatile() };
    }
}

/// Reads one 4-byte doorbell-record word as it is in memory (big-endian).
///
/// # Safety
///
/// `word` points to a live, 4-aligned doorbell-record word.
unsafe fn read_word(word: *const u32) -> [u8; 4] {
    // SAFETY: forwarded to the caller; volatile: device-shared memory.
    unsafe { word.read_volatile() }.to_ne_bytes()
}

/// A [`Tap`] that writes what it reads into a [`HostTrace`].
#[derive(Debug)]
pub struct HostTap {
    /// The records so far.
    pub trace: HostTrace,
    /// The CQ slots software owned before the current poll: (CQN, first
    /// index, slot bytes).
    pending: Option<(u32, u32, Vec<Vec<u8>>)>,
    /// Slots looked at before each poll, at most.
    pub window: u32,
}

impl HostTap {
    /// A tap writing into `trace`.
    pub fn new(trace: HostTrace) -> Self {
        Self {
            trace,
            pending: None,
            window: 16,
        }
    }
}

impl Tap for HostTap {
    fn posted(&mut self, sq: &CoreSq, from: u32, to: u32, bf_offset: usize) {
        let p = sq.emu_parts();
        let ring = p.wqe_cnt as usize * 64;
        if ring == 0 {
            return;
        }
        let mut at = from;
        let mut last = None;
        while at != to {
            let off = (at as usize % p.wqe_cnt as usize) * 64;
            let mut ctrl = [0u8; 16];
            // SAFETY: the SQ ring of `sq` (alive while borrowed: the
            // `CoreSq` contract), `wqe_cnt` WQEBBs; the core wrote these
            // WQEs on this thread before the call and the device only
            // reads them.
            unsafe { read_ring(p.buf, ring, off, &mut ctrl) };
            // DS: the low 6 bits of the control segment's second word.
            let ds = usize::from(ctrl[7] & 0x3f).max(1);
            let mut wqe = vec![0u8; ds * 16];
            // SAFETY: as above.
            unsafe { read_ring(p.buf, ring, off, &mut wqe) };
            self.trace.wqe(sq.qp_type(), p.qpn, p.wqe_cnt, at, &wqe);
            last = Some(ctrl);
            at = at.wrapping_add(ds.div_ceil(4) as u32);
            if at.wrapping_sub(from) > p.wqe_cnt {
                break;
            }
        }
        // SAFETY: word 1 (MLX5_SND_DBR) of the QP's 4-aligned doorbell
        // record, alive while `sq` is borrowed.
        let word = unsafe { read_word(p.dbrec.wrapping_add(1)) };
        self.trace.dbrec("sq", p.qpn, 1, word);
        if let Some(ctrl) = last {
            self.trace
                .doorbell(sq.qp_type(), p.qpn, 0x800 + bf_offset, &ctrl[..8]);
        }
    }

    fn recv_published(&mut self, rq: &CoreRq) {
        let p = rq.emu_parts();
        let queue = match p.kind {
            EmuRqKind::Srq => "srq",
            _ => "rq",
        };
        // SAFETY: the 4-aligned doorbell-record word of the live queue `rq`
        // owns (alive while borrowed).
        let word = unsafe { read_word(p.dbrec) };
        self.trace.dbrec(queue, p.num, 0, word);
    }

    fn before_poll(&mut self, cq: &CoreCq, ci: u32) {
        let p = cq.emu_parts();
        let (cnt, stride) = (p.cqe_cnt, p.cqe_size as usize);
        if cnt == 0 || stride == 0 {
            return;
        }
        let ring = cnt as usize * stride;
        let mut slots = Vec::new();
        for k in 0..self.window.min(cnt) {
            let idx = ci.wrapping_add(k);
            let mut slot = vec![0u8; stride];
            // SAFETY: the CQ ring of `cq` (alive while borrowed: the
            // `CoreCq` contract); the device writes it by DMA, the core
            // polls it on this thread, not during this call.
            unsafe { read_ring(p.buf, ring, (idx % cnt) as usize * stride, &mut slot) };
            // Software's: the owner bit of this pass, a valid opcode
            // (libmlx5 `get_sw_cqe`). The op_own byte ends the slot.
            let op_own = slot[stride - 1];
            let pass = (idx / cnt) & 1;
            if op_own >> 4 == 0xf || u32::from(op_own & 1) != pass {
                break;
            }
            slots.push(slot);
        }
        self.pending = Some((p.cqn, ci, slots));
    }

    fn after_poll(&mut self, cq: &CoreCq, before: u32, after: u32) {
        let Some((cqn, ci, slots)) = self.pending.take() else {
            return;
        };
        let p = cq.emu_parts();
        if cqn != p.cqn || ci != before {
            return;
        }
        let consumed = after.wrapping_sub(before) as usize;
        for (k, slot) in slots.iter().take(consumed).enumerate() {
            self.trace.cqe(
                p.cqn,
                p.cqe_cnt,
                ci.wrapping_add(k as u32),
                p.cqe_size as usize,
                slot,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::{Backend, EmuBackend};
    use crate::emu::DeviceConfig;
    use crate::trace_record::{header, replay, run_scenario, FAMILY};

    /// The host-side recorder over the emulated device in step mode: every
    /// record it writes decodes, WQE indices and QPNs and CQE owner bits
    /// agree with what the host knew.
    #[test]
    fn host_capture_on_the_emulated_device_replays() {
        let mut be = EmuBackend::step_mode(DeviceConfig::default());
        let info = be.device_info();
        let mut tap = HostTap::new(HostTrace::new(&info, FAMILY));
        let rep = run_scenario(&mut be, &mut tap).expect("scenario");
        assert_eq!(rep.completions, 16);
        let c = tap.trace.counts().clone();
        // 3 + 2 RC WQEs, 8 raw ones; two RC doorbells and one raw.
        assert_eq!(c.get("wqe"), Some(&13), "{c:?}");
        assert_eq!(c.get("mmio_write"), Some(&3), "{c:?}");
        // Three SQ words and one RQ word.
        assert_eq!(c.get("dbrec"), Some(&4), "{c:?}");
        assert_eq!(c.get("cqe64"), Some(&16), "{c:?}");
        let text =
            header(&info, "captured (host side, over the emulated device)") + tap.trace.text();
        let s = replay(&text).unwrap_or_else(|e| panic!("{e:#?}"));
        assert_eq!(s.captured, 36);
        // Per WQE: qpn, wqe_index and the index `ci` implies; per CQE the
        // owner bit.
        assert_eq!(s.checked, 13 * 3 + 16);
    }
}
