//! Cyclic receive queue (PRM-FACTS §8; rdma-core `mlx5_post_recv`).
//!
//! A receive WQE is an array of data segments, `1 << wqe_shift` bytes
//! (16 × the SGE capacity); zero-length SGEs are skipped and, when fewer
//! SGEs than the stride holds are posted, the next segment is a terminator
//! (`byte_count 0`, `lkey MLX5_INVALID_LKEY`, `addr 0`). The doorbell record
//! (`dbrec[MLX5_RCV_DBR]`) gets the 16-bit producer counter after a
//! to-device barrier, on commit only: a posted WQE is invisible to the
//! device until [`Rq::commit`].
//!
//! The wr_id shadow is caller-provided memory (the core does not allocate);
//! completions are retired against it with the device-reported
//! `wqe_counter` checked to be in flight first.

use super::{RecvWr, RqError, Sge};
use crate::barrier;
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
use crate::cpu::Sse41;
use crate::cq::LookupError;
use crate::index::{in_flight, wq_counter16, RingSize};
use crate::mmio::DeviceWord;
use crate::prm::DataSeg;
use crate::ring::RingBuf;

/// A cyclic receive queue.
#[derive(Debug)]
pub struct Rq<'a> {
    ring: RingBuf<'a>,
    dbrec: &'a DeviceWord<u32>,
    wrid: &'a mut [u64],
    size: RingSize,
    /// `size.mask()`, kept (the hot paths' slot computation).
    mask: u32,
    wqe_shift: u8,
    /// Next WQE to post (free-running).
    head: u32,
    /// Posted and published to the device.
    published: u32,
    /// Oldest WQE not yet completed.
    tail: u32,
    /// Write the doorbell record on commit (false for a RAW_PACKET QP
    /// before RTR, as libmlx5 does).
    doorbell_enabled: bool,
    error: bool,
    /// The SSE4.1 proof: [`Rq::post_list`] builds segments with SSE4.1.
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    sse41: Option<Sse41>,
}

impl<'a> Rq<'a> {
    /// A receive queue over `ring` (`size.entries() << wqe_shift` bytes),
    /// the RQ doorbell-record word and a wr_id shadow of `size.entries()`
    /// slots. Counters start at `head` (libmlx5 `rq.head`, normally 0).
    pub fn new(
        ring: RingBuf<'a>,
        size: RingSize,
        wqe_shift: u8,
        dbrec: &'a DeviceWord<u32>,
        wrid: &'a mut [u64],
        head: u32,
    ) -> Result<Self, RqError> {
        if wqe_shift < 4 || ring.len() != (size.entries() as usize) << wqe_shift {
            return Err(RqError::BadStride);
        }
        if wrid.len() < size.entries() as usize {
            return Err(RqError::ShadowTooSmall);
        }
        Ok(Self {
            ring,
            dbrec,
            wrid,
            size,
            mask: size.mask(),
            wqe_shift,
            head,
            published: head,
            tail: head,
            doorbell_enabled: true,
            error: false,
            #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
            sse41: Sse41::compile_time(),
        })
    }

    /// Lets [`Self::post_list`] build its data segments with SSE4.1 (one
    /// 16-byte load and one byte shuffle per segment instead of three
    /// loads, three byte swaps and three stores; the same bytes), or not
    /// (`None`). The default is [`Sse41::compile_time`]; with `std`, turn
    /// it on after `is_x86_feature_detected!("sse4.1")` with
    /// [`Sse41::new_unchecked`]. (x86-64 only.)
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    pub fn set_sse41(&mut self, sse41: Option<Sse41>) {
        self.sse41 = sse41;
    }

    /// SGEs one WQE holds (`1 << (wqe_shift - 4)`).
    pub fn max_sge(&self) -> usize {
        1 << (self.wqe_shift - 4)
    }

    /// Enables or disables the doorbell-record write on commit (disable
    /// for a RAW_PACKET QP before RTR).
    pub fn set_doorbell_enabled(&mut self, enabled: bool) {
        self.doorbell_enabled = enabled;
    }

    /// Posted WQEs not yet completed.
    pub fn outstanding(&self) -> u32 {
        in_flight(self.head, self.tail)
    }

    /// The producer counter (libmlx5 `rq.head`).
    pub fn head(&self) -> u32 {
        self.head
    }

    /// The consumer counter (libmlx5 `rq.tail`).
    pub fn tail(&self) -> u32 {
        self.tail
    }

    /// Writes one receive WQE; invisible to the device until [`Self::commit`].
    #[inline]
    pub fn post(&mut self, wr_id: u64, sges: &[Sge]) -> Result<(), RqError> {
        let head = self.head;
        if in_flight(head, self.tail) >= self.size.entries() {
            return Err(RqError::QueueFull);
        }
        let max = self.max_sge();
        if sges.len() > max {
            return Err(RqError::TooManySges {
                given: sges.len(),
                max,
            });
        }
        let slot = self.size.slot(head);
        let base = slot << self.wqe_shift;
        // Zero-length SGEs are skipped (as libmlx5 does); at most `max`
        // segments, inside this WQE's `1 << wqe_shift` bytes.
        let mut written = 0;
        for sge in sges {
            if sge.length != 0 {
                self.ring
                    .write16(base + written * DataSeg::SIZE, super::data_seg(sge));
                written += 1;
            }
        }
        if written < max {
            self.ring
                .write16(base + written * DataSeg::SIZE, super::TERMINATOR_SEG);
        }
        if let Some(w) = self.wrid.get_mut(slot) {
            *w = wr_id;
        }
        self.head = head.wrapping_add(1);
        Ok(())
    }

    /// Posts a list of one-SGE receives and publishes them
    /// (`ibv_post_recv` with a chain of work requests), all or nothing: the
    /// WQEs, shadow entries and doorbell record are those of [`Self::post`]
    /// for each element in order, then [`Self::commit`].
    ///
    /// If the list does not fit in the free entries it is refused with
    /// [`RqError::QueueFull`] before anything is written (libmlx5 posts the
    /// work requests that fit and names the first that does not). An empty
    /// list writes nothing, not even the doorbell record (as libmlx5 with
    /// no work request): receives posted earlier with [`Self::post`] still
    /// wait for their [`Self::commit`].
    ///
    /// On a queue of one SGE per WQE (`wqe_shift` 4, libmlx5's
    /// `max_recv_sge = 1`) the list is written as at most two runs of
    /// 16-byte segments (one at the ring's end, one at its start), with one
    /// queue-space check and one producer-counter update for the whole list.
    #[inline]
    pub fn post_list(&mut self, wrs: &[RecvWr]) -> Result<(), RqError> {
        if wrs.is_empty() {
            return Ok(());
        }
        let head = self.head;
        let free = self.size.entries() - in_flight(head, self.tail);
        if wrs.len() > free as usize {
            return Err(RqError::QueueFull);
        }
        if self.wqe_shift == 4 {
            self.write_runs(head, wrs);
        } else {
            self.write_each(head, wrs);
        }
        // `wrs.len() <= free <= entries <= 2^31`, so the count fits.
        self.head = head.wrapping_add(wrs.len() as u32);
        self.commit();
        Ok(())
    }

    /// [`Self::post_list`]'s writes on a queue of one segment per WQE: the
    /// run to the ring's end, then the rest from slot 0 (the list fits).
    #[inline(always)]
    fn write_runs(&mut self, head: u32, wrs: &[RecvWr]) {
        let slot = self.size.slot(head);
        let to_end = (self.size.entries() as usize) - slot;
        let (first, rest) = wrs.split_at(wrs.len().min(to_end));
        self.write_run(slot, first);
        if !rest.is_empty() {
            self.write_run(0, rest);
        }
    }

    /// One run of one-segment WQEs from `slot` that does not wrap: each
    /// data segment (a zero length gives the terminator, as [`Self::post`]
    /// writes it) and its wr_id in the shadow.
    #[inline(always)]
    fn write_run(&mut self, slot: usize, wrs: &[RecvWr]) {
        let shadow = self.wrid.get_mut(slot..).unwrap_or_default();
        #[cfg(all(target_arch = "x86_64", target_feature = "sse2", not(loom)))]
        if let Some(t) = self.sse41 {
            super::list_sse41::write_run(t, &mut self.ring, slot * DataSeg::SIZE, wrs, shadow);
            return;
        }
        self.ring
            .write16_run(slot * DataSeg::SIZE, wrs, shadow, |wr, w| {
                *w = wr.wr_id;
                list_seg(&wr.sge)
            });
    }

    /// [`Self::post_list`]'s writes on a queue of several segments per
    /// WQE: each element as [`Self::post`] writes it (the list fits).
    #[cold]
    fn write_each(&mut self, head: u32, wrs: &[RecvWr]) {
        for (i, wr) in wrs.iter().enumerate() {
            let slot = self.size.slot(head.wrapping_add(i as u32));
            let base = slot << self.wqe_shift;
            if wr.sge.length != 0 {
                self.ring.write16(base, super::data_seg(&wr.sge));
                self.ring
                    .write16(base + DataSeg::SIZE, super::TERMINATOR_SEG);
            } else {
                self.ring.write16(base, super::TERMINATOR_SEG);
            }
            if let Some(w) = self.wrid.get_mut(slot) {
                *w = wr.wr_id;
            }
        }
    }

    /// Publishes every posted WQE: to-device barrier, then
    /// `dbrec = BE32(head & 0xffff)` (skipped while the doorbell is disabled).
    #[inline]
    pub fn commit(&mut self) {
        if self.published == self.head {
            return;
        }
        self.published = self.head;
        if self.doorbell_enabled {
            // The WQE stores reach the device before the record that
            // publishes them (rdma-core `udma_to_device_barrier`).
            barrier::to_device();
            self.dbrec.write_be(u32::from(wq_counter16(self.head)));
        }
    }

    /// Retires the WQE a responder CQE names. `wqe_counter` must be in
    /// flight (between tail and head); the wr_id comes from the shadow.
    #[inline]
    pub fn retire(&mut self, wqe_counter: u16, error: bool) -> Result<u64, LookupError> {
        let tail = self.tail;
        let ahead = wqe_counter.wrapping_sub(wq_counter16(tail));
        if u32::from(ahead) >= in_flight(self.head, tail) {
            return Err(LookupError::NotInFlight);
        }
        let idx = (tail.wrapping_add(u32::from(ahead)) & self.mask) as usize;
        let wr_id = self
            .wrid
            .get(idx)
            .copied()
            .ok_or(LookupError::NotInFlight)?;
        self.tail = tail.wrapping_add(1);
        if error {
            self.error = true;
        }
        Ok(wr_id)
    }

    /// Whether an error completion moved the queue to its error state.
    pub fn is_error(&self) -> bool {
        self.error
    }

    /// Software flush (device gone, no flush CQEs coming): reports every
    /// outstanding wr_id in posting order, once, and empties the queue.
    pub fn flush(&mut self, mut f: impl FnMut(u64)) {
        while self.tail != self.head {
            if let Some(&w) = self.wrid.get(self.size.slot(self.tail)) {
                f(w);
            }
            self.tail = self.tail.wrapping_add(1);
        }
        self.error = true;
    }
}

/// The one segment of a WQE of one SGE: the data segment, or the
/// terminator for a zero length ([`Rq::post`] skips zero-length SGEs).
#[inline(always)]
fn list_seg(sge: &Sge) -> [u8; 16] {
    if sge.length == 0 {
        super::TERMINATOR_SEG
    } else {
        super::data_seg(sge)
    }
}

#[cfg(test)]
#[cfg(not(loom))]
mod tests {
    //! Mirrors `specs/golden/libmlx5/rq-cases.txt` (libmlx5 44 `mlx5_post_recv`).
    #[cfg(target_arch = "x86_64")]
    use super::super::test_mem::detected_sse41;
    use super::super::test_mem::{hex, Mem, Rng};
    use super::*;
    use std::vec::Vec;

    #[test]
    fn one_sge_of_two_with_terminator() {
        let mem = Mem::new(64 * 32);
        let db = DeviceWord::new(0xa5a5_a5a5u32);
        let mut wrid = [0u64; 64];
        let mut rq = Rq::new(mem.ring(), RingSize::new(64).unwrap(), 5, &db, &mut wrid, 0).unwrap();
        rq.post(
            0x7300_0000_0000_0000,
            &[Sge {
                addr: 0x2_0000_1000,
                length: 4096,
                lkey: 0x3000,
            }],
        )
        .unwrap();
        rq.commit();
        assert_eq!(db.read().to_ne_bytes(), [0, 0, 0, 1]);
        assert_eq!(
            mem.bytes(0, 32),
            hex("0000100000003000000000020000100000000000000001000000000000000000")
        );
        assert_eq!(wrid[0], 0x7300_0000_0000_0000);
    }

    #[test]
    fn list_of_two_wraps_the_ring() {
        let mem = Mem::new(64 * 32);
        let db = DeviceWord::new(0xa5a5_a5a5u32);
        let mut wrid = [0u64; 64];
        let mut rq = Rq::new(
            mem.ring(),
            RingSize::new(64).unwrap(),
            5,
            &db,
            &mut wrid,
            63,
        )
        .unwrap();
        rq.post(
            1,
            &[Sge {
                addr: 0x2_0000_1000,
                length: 256,
                lkey: 0x3000,
            }],
        )
        .unwrap();
        rq.post(
            2,
            &[Sge {
                addr: 0x2_0000_1100,
                length: 512,
                lkey: 0x3010,
            }],
        )
        .unwrap();
        assert_eq!(db.read(), 0xa5a5_a5a5, "nothing published before commit");
        rq.commit();
        assert_eq!(db.read().to_ne_bytes(), [0, 0, 0, 0x41]);
        assert_eq!(rq.retire(63, false), Ok(1));
        assert_eq!(rq.retire(7, false), Err(LookupError::NotInFlight));
        assert_eq!(rq.retire(64, false), Ok(2));
        assert_eq!(
            mem.bytes(63 * 32, 32),
            hex("0000010000003000000000020000100000000000000001000000000000000000")
        );
        assert_eq!(
            mem.bytes(0, 32),
            hex("0000020000003010000000020000110000000000000001000000000000000000")
        );
    }

    #[test]
    fn stride_16_no_terminator_and_raw_qp_before_rtr() {
        let mem = Mem::new(64 * 16);
        let db = DeviceWord::new(0xa5a5_a5a5u32);
        let mut wrid = [0u64; 64];
        let mut rq = Rq::new(mem.ring(), RingSize::new(64).unwrap(), 4, &db, &mut wrid, 0).unwrap();
        rq.set_doorbell_enabled(false);
        rq.post(
            9,
            &[Sge {
                addr: 0x2_0000_1000,
                length: 2048,
                lkey: 0x3000,
            }],
        )
        .unwrap();
        rq.commit();
        assert_eq!(db.read(), 0xa5a5_a5a5);
        assert_eq!(
            rq.post(
                9,
                &[Sge {
                    addr: 0,
                    length: 1,
                    lkey: 0
                }; 2]
            ),
            Err(RqError::TooManySges { given: 2, max: 1 })
        );
        assert_eq!(mem.bytes(0, 16), hex("00000800000030000000000200001000"));
    }

    /// `post_list` writes what `post` for each element and `commit` write
    /// (ring bytes, shadow, doorbell record, counters), and a list that
    /// does not fit changes nothing: every stride, ring sizes 1 to 64,
    /// counters near the 16- and 32-bit wraps, lists that wrap the ring,
    /// zero-length SGEs, an empty list (which writes no record, even with
    /// earlier posts unpublished), the doorbell disabled; half the rounds
    /// through the SSE4.1 segment builder where the CPU has SSE4.1.
    #[test]
    fn post_list_equals_posts_then_commit() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let rounds = if cfg!(miri) { 40 } else { 3000 };
        #[cfg_attr(not(target_arch = "x86_64"), allow(unused_mut))]
        let mut vector = 0;
        for round in 0..rounds {
            let entries = 1u32 << rng.below(7);
            let shift = 4 + rng.below(3) as u8;
            let start = match rng.below(3) {
                0 => rng.next() as u32,
                1 => 0xffff_u32.wrapping_sub(rng.below(70) as u32),
                _ => u32::MAX.wrapping_sub(rng.below(70) as u32),
            };
            let size = RingSize::new(entries).unwrap();
            let len = (entries as usize) << shift;
            let (ma, mb) = (Mem::new(len), Mem::new(len));
            let (da, db) = (
                DeviceWord::new(0xa5a5_a5a5u32),
                DeviceWord::new(0xa5a5_a5a5u32),
            );
            let mut wa = std::vec![0u64; entries as usize];
            let mut wb = std::vec![0u64; entries as usize];
            let mut a = Rq::new(ma.ring(), size, shift, &da, &mut wa, start).unwrap();
            let mut b = Rq::new(mb.ring(), size, shift, &db, &mut wb, start).unwrap();
            // Half the rounds through the SSE4.1 segment builder, where
            // the CPU has it (the model, `b`, posts one by one).
            #[cfg(target_arch = "x86_64")]
            if let Some(t) = detected_sse41().filter(|_| rng.below(2) == 0) {
                a.set_sse41(Some(t));
                vector += 1;
            }
            let enabled = rng.below(8) != 0;
            a.set_doorbell_enabled(enabled);
            b.set_doorbell_enabled(enabled);
            // Some WQEs already in flight, some retired: the list starts
            // anywhere in the ring.
            let before = rng.below(u64::from(entries) + 1);
            for i in 0..before {
                let sge = Sge {
                    addr: i,
                    length: 1,
                    lkey: 2,
                };
                a.post(i, &[sge]).unwrap();
                b.post(i, &[sge]).unwrap();
            }
            // Sometimes left unpublished: the list's commit publishes them
            // too, and an empty list leaves them for a later commit.
            if rng.below(3) != 0 {
                a.commit();
                b.commit();
            }
            for _ in 0..rng.below(before + 1) {
                let c = a.tail() as u16;
                assert_eq!(a.retire(c, false), b.retire(c, false));
            }
            let n = rng.below(u64::from(entries) + 3) as usize;
            let wrs: Vec<RecvWr> = (0..n)
                .map(|_| RecvWr {
                    wr_id: rng.next(),
                    sge: Sge {
                        addr: rng.next(),
                        length: if rng.below(6) == 0 {
                            0
                        } else {
                            rng.next() as u32 | 1
                        },
                        lkey: rng.next() as u32,
                    },
                })
                .collect();
            // The record poisoned: a list writes it only if it posts.
            da.write(0xa5a5_a5a5);
            db.write(0xa5a5_a5a5);
            let ring_before = ma.bytes(0, len);
            let (head, dbrec) = (a.head(), da.read());
            let fits = n <= (entries - a.outstanding()) as usize;
            let got = a.post_list(&wrs);
            if fits {
                assert_eq!(got, Ok(()), "round {round}");
                for wr in &wrs {
                    b.post(wr.wr_id, &[wr.sge]).unwrap();
                }
                // libmlx5 writes no record for an empty chain.
                if n > 0 {
                    b.commit();
                }
            } else {
                assert_eq!(got, Err(RqError::QueueFull), "round {round}");
                assert_eq!(
                    ma.bytes(0, len),
                    ring_before,
                    "round {round}: refused list wrote"
                );
                assert_eq!((a.head(), da.read()), (head, dbrec), "round {round}");
            }
            assert_eq!(ma.bytes(0, len), mb.bytes(0, len), "round {round}: ring");
            assert_eq!(da.read(), db.read(), "round {round}: doorbell record");
            assert_eq!((a.head(), a.tail()), (b.head(), b.tail()), "round {round}");
            // Every posted wr_id comes back in order, from either queue.
            while b.outstanding() > 0 {
                let c = b.tail() as u16;
                assert_eq!(a.retire(c, false), b.retire(c, false), "round {round}");
            }
            assert_eq!(wa, wb, "round {round}: shadow");
        }
        #[cfg(target_arch = "x86_64")]
        if detected_sse41().is_some() {
            assert!(vector > rounds / 4, "{vector} rounds through SSE4.1");
        }
        let _ = vector;
    }

    /// The bytes of a list on a 16-byte-stride queue, checked by value: a
    /// data segment, a zero-length element's terminator, the wrap to slot
    /// 0, the doorbell record written once.
    #[test]
    fn post_list_wraps_with_terminator_for_zero_length() {
        let mem = Mem::new(4 * 16);
        let db = DeviceWord::new(0xa5a5_a5a5u32);
        let mut wrid = [0u64; 4];
        let mut rq = Rq::new(
            mem.ring(),
            RingSize::new(4).unwrap(),
            4,
            &db,
            &mut wrid,
            0xfffe,
        )
        .unwrap();
        let wr = |wr_id, length| RecvWr {
            wr_id,
            sge: Sge {
                addr: 0x2_0000_1000,
                length,
                lkey: 0x3000,
            },
        };
        rq.post_list(&[wr(7, 2048), wr(8, 0), wr(9, 64)]).unwrap();
        assert_eq!(
            db.read().to_ne_bytes(),
            [0, 0, 0, 1],
            "head 0x10001 as 16 bits"
        );
        assert_eq!(mem.bytes(32, 16), hex("00000800000030000000000200001000"));
        assert_eq!(mem.bytes(48, 16), hex("00000000000001000000000000000000"));
        assert_eq!(mem.bytes(0, 16), hex("00000040000030000000000200001000"));
        assert_eq!(mem.bytes(16, 16), [0xa5; 16], "slot 1 untouched");
        assert_eq!(
            rq.post_list(&[wr(10, 1), wr(11, 1)]),
            Err(RqError::QueueFull)
        );
        assert_eq!(rq.post_list(&[]), Ok(()));
        assert_eq!(rq.retire(0xfffe, false), Ok(7));
        assert_eq!(rq.retire(0xffff, false), Ok(8));
        assert_eq!(rq.retire(0, false), Ok(9));
    }

    #[test]
    fn full_queue_and_software_flush() {
        let mem = Mem::new(4 * 16);
        let db = DeviceWord::new(0u32);
        let mut wrid = [0u64; 4];
        let mut rq = Rq::new(mem.ring(), RingSize::new(4).unwrap(), 4, &db, &mut wrid, 0).unwrap();
        for i in 0..4 {
            rq.post(
                i,
                &[Sge {
                    addr: 0,
                    length: 1,
                    lkey: 0,
                }],
            )
            .unwrap();
        }
        assert_eq!(rq.post(9, &[]), Err(RqError::QueueFull));
        assert_eq!(rq.retire(0, true), Ok(0));
        assert!(rq.is_error());
        let mut flushed = Vec::new();
        rq.flush(|w| flushed.push(w));
        assert_eq!(flushed, [1, 2, 3]);
        assert_eq!(rq.outstanding(), 0);
    }
}
