//! [`Cq::poll_strided`]: a striding RQ's packets in bursts, the shape of
//! DPDK's `mlx5_rx_burst_mprq` (one CQ per striding RQ, the packet located
//! from its WQE and stride index, the WQE re-posted once its last stride is
//! consumed, the RQ doorbell after the burst).
//!
//! The usual entries are decoded here, without the general steps' copy of
//! each CQE into the current completion and its dispatch on the opcode:
//! - runs of successful responder CQEs of one ownership byte (owner bit of
//!   this pass, format 0 or 1): each entry's ownership byte read once, one
//!   from-device barrier per run, then per entry its `wqe_id`, stride index
//!   (`wqe_counter`) and byte count (the [`MprqByteCnt`] word), each read
//!   once, accounted on the WQE being filled with the checks of
//!   [`StridingRq::retire_strides`] (built on the same code), its state
//!   held in registers and written back once per WQE or run;
//! - basic-layout sessions of successful responder titles whose minis carry
//!   the stride index and the whole byte-count word (CSUM_STRIDX,
//!   L34H_STRIDX): the session is opened by the general steps' own code,
//!   then each mini array is copied once and its minis accounted in order,
//!   the array's slots invalidated as the general steps invalidate them;
//! - enhanced-layout compressed CQEs of such minis after a successful
//!   responder title: each copied once after its validity byte and one
//!   barrier, its minis accounted in order (the title itself, a regular
//!   CQE, takes the general steps, which keep it for the blocks).
//!
//! Everything else (error CQEs, requester CQEs, other mini formats, an
//! array or block with more minis than `out` has room for, a session the
//! general steps left open) goes through
//! [`Cq::poll`] with a [`WorkQueues`] that accounts on the same RQ and
//! records what it retired: the same completions, consumer index, slot
//! invalidations, doorbell-record writes and errors as the fast steps (the
//! property test `poll_strided_matches_poll_on_random_streams` in
//! `cq::strided_tests` compares the two on random streams).

use super::mem::{SizedRing, OP_OWN};
use super::zip::{self, MiniKind};
use super::{
    barrier, lookup_error, Completion, Cq, Layout, LookupError, Origin, PollError, RecvRetired,
    SendRetired, StrideCompletion, Title, WorkQueues, WqRef, BASIC, ENHANCED, FORMAT_COMPRESSED,
    FORMAT_INLINE64, FORMAT_MASK, NO_ZIP, OP_RESP_SEND_INV, OP_RESP_WR_IMM,
};
use crate::prm::{
    MiniCqe, MiniCqeArray, MprqByteCnt, WcStatus, CQE_INVALIDATE, ENHANCED_MAX_MINIS,
    MINI_CQE_ARRAY_SIZE,
};
use crate::rq::{StrideRetired, StridingRq};
use core::cell::Cell;

/// One packet of a striding RQ, as [`Cq::poll_strided`] hands it out: where
/// it is, how long it is, the strides it took. 16 bytes, 16-aligned.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C, align(16))]
pub struct StridedPacket {
    /// Address of the packet's first byte: its WQE's buffer plus
    /// `stride_index` strides.
    pub addr: u64,
    /// Bytes of the packet (the byte count's bits 15–0).
    pub len: u16,
    /// Its first stride in the WQE.
    pub stride_index: u16,
    /// Strides it consumed.
    pub strides: u16,
    /// The raw completion status ([`WcStatus::raw`]; 0: success).
    pub(super) status: u8,
    /// [`Self::WQE_DONE`], [`Self::MINI`].
    pub flags: u8,
}

const _: () = assert!(core::mem::size_of::<StridedPacket>() == 16);

impl StridedPacket {
    /// The packet's WQE is finished: its last stride was consumed (or an
    /// error ended it). With re-posting on ([`StridingRq::set_reuse`]) the
    /// WQE was written again and the device may overwrite its buffer once
    /// [`StridingRq::commit`] publishes it: read the WQE's packets before.
    pub const WQE_DONE: u8 = 1;
    /// The packet came from a mini-CQE of a compressed session.
    pub const MINI: u8 = 2;

    /// The completion status.
    pub fn status(&self) -> WcStatus {
        WcStatus::from_raw(u32::from(self.status))
    }

    /// A successful packet of completion `c`, at `addr`, `len` bytes;
    /// `done`: it finished its WQE.
    #[inline(always)]
    fn ok(addr: u64, len: u16, c: &StrideCompletion, done: bool, mini: bool) -> Self {
        Self {
            addr,
            len,
            stride_index: c.stride_index,
            strides: c.strides,
            status: 0,
            flags: u8::from(done) | (u8::from(mini) << 1),
        }
    }

    /// The packet of a completion the general steps reported, from what
    /// the RQ retired for it.
    fn of(c: &Completion, r: &StrideRetired) -> Self {
        let status = c.status().raw();
        Self {
            addr: r.addr,
            len: c.mprq_byte_cnt().byte_cnt(),
            stride_index: r.stride_index,
            strides: r.strides,
            // (Every `ibv_wc_status` is below 256.)
            status: status.min(0xff) as u8,
            flags: u8::from(r.done.is_some()) | (u8::from(c.origin() == Origin::Mini) << 1),
        }
    }
}

/// The [`WorkQueues`] of the general steps: striding completions accounted
/// on the RQ, each retirement recorded for the packet it reports; no other
/// queue.
struct Recorder<'q, 'a> {
    rq: &'q mut StridingRq<'a>,
    last: &'q Cell<Option<StrideRetired>>,
}

impl WorkQueues for Recorder<'_, '_> {
    fn retire_send(&mut self, _: WqRef, _: u16, _: WcStatus) -> Result<SendRetired, LookupError> {
        Err(LookupError::UnknownQueue)
    }

    fn retire_recv(&mut self, _: WqRef, _: u16, _: WcStatus) -> Result<RecvRetired, LookupError> {
        Err(LookupError::UnknownQueue)
    }

    fn retire_strides(
        &mut self,
        _: WqRef,
        completion: StrideCompletion,
        status: WcStatus,
    ) -> Result<RecvRetired, LookupError> {
        let r = self
            .rq
            .retire_strides(completion, status != WcStatus::Success)?;
        self.last.set(Some(r));
        Ok(RecvRetired {
            wr_id: r.addr,
            rx_csum_valid: false,
        })
    }
}

/// Whether a session title of CQE opcode `opcode` on a CQ of mini kind
/// `kind` has minis the fast steps decode: a successful receive's, each
/// mini with its stride index and whole byte-count word.
#[inline(always)]
fn fast_minis(opcode: u8, kind: MiniKind) -> bool {
    (OP_RESP_WR_IMM..=OP_RESP_SEND_INV).contains(&opcode)
        && matches!(kind, MiniKind::CsumStridx | MiniKind::L34hStridx)
}

/// A stride mini's completion (stride index in bytes 2–3, the byte-count
/// word in bytes 4–7: CSUM_STRIDX, L34H_STRIDX) and its packet's length.
#[inline(always)]
fn stride_mini(m: &MiniCqe, wqe_id: u16) -> (StrideCompletion, u16) {
    let [_, _, s0, s1, w0, w1, w2, w3] = m.bytes;
    stride_completion(
        wqe_id,
        u16::from_be_bytes([s0, s1]),
        u32::from_be_bytes([w0, w1, w2, w3]),
    )
}

/// The completion of a packet of WQE `wqe_id` at stride `stride_index`
/// with byte-count word `word` ([`MprqByteCnt`]), and its length.
#[inline(always)]
fn stride_completion(wqe_id: u16, stride_index: u16, word: u32) -> (StrideCompletion, u16) {
    let b = MprqByteCnt::from_bits(word);
    let c = StrideCompletion {
        wqe_id,
        stride_index,
        strides: b.strides(),
        filler: b.filler(),
    };
    (c, b.byte_cnt())
}

/// Accounts completions `item(0..k)` in order on the WQE `rq` is filling
/// (its state in registers, written back once per WQE and at the end),
/// each packet (not a filler) written to `out` from `*n` (flagged `mini`);
/// `Err(i)` if completion `i` was refused (those before it accounted, the
/// queue as [`StridingRq::retire_strides`] leaves it: unchanged by `i`).
#[inline(always)]
fn account(
    rq: &mut StridingRq<'_>,
    out: &mut [StridedPacket],
    n: &mut usize,
    k: usize,
    mini: bool,
    mut item: impl FnMut(usize) -> (StrideCompletion, u16),
) -> Result<(), usize> {
    if k == 0 {
        return Ok(());
    }
    // Only a published WQE can be reported: else the first is refused.
    let Some(mut f) = rq.filling() else {
        return Err(0);
    };
    for i in 0..k {
        let (c, len) = item(i);
        let Some(addr) = f.take(c) else {
            rq.settle(&f);
            return Err(i);
        };
        let done = f.is_done();
        if !c.filler {
            if let Some(slot) = out.get_mut(*n) {
                *slot = StridedPacket::ok(addr, len, &c, done, mini);
            }
            *n += 1;
        }
        if done {
            // Once per WQE: its end, then the next one (none published:
            // the next completion is refused).
            rq.settle(&f);
            match rq.filling() {
                Some(next) => f = next,
                None if i + 1 < k => return Err(i + 1),
                None => return Ok(()),
            }
        }
    }
    rq.settle(&f);
    Ok(())
}

/// What the fast steps left to the general ones.
enum Next {
    /// Nothing: `out` is full or the CQ is empty.
    Done,
    /// The entry at the consumer index (or the open session's next mini).
    General,
}

impl Cq {
    /// Polls up to `out.len()` packets of the striding RQ `rq` this CQ
    /// serves ([`super::CqConfig::striding_rq`]; one RQ per CQ, as DPDK
    /// pairs them): each completion is accounted on `rq` as
    /// [`crate::rq::StridingWorkQueues`] accounts it (WQE and stride
    /// checked, the WQE re-posted when its last stride is consumed; call
    /// [`StridingRq::commit`] after reading the packets), fillers are
    /// consumed unreported, and each packet is written to `out` with its
    /// address, length and strides. The doorbell record is written once if
    /// anything was consumed. Returns the count; entries of `out` past it
    /// are unspecified.
    ///
    /// The same completions, in the same order, with the same consumer
    /// index, slot invalidations, RQ state and errors as [`Self::poll`]
    /// with such an adaptor (the module documentation of `cq::strided`
    /// says which entries take the fast steps). On an error the packets
    /// before it are accounted but not counted, as in [`Self::poll_burst`].
    ///
    /// # Errors
    /// [`PollError::NotStriding`] on a CQ not created for a striding RQ
    /// (nothing consumed); a requester or cyclic-receive completion is a
    /// [`PollError::Lookup`] ([`LookupError::UnknownQueue`]); otherwise as
    /// [`Self::poll`].
    #[inline]
    pub fn poll_strided(
        &mut self,
        rq: &mut StridingRq<'_>,
        out: &mut [StridedPacket],
    ) -> Result<usize, PollError> {
        if self.broken {
            return Err(PollError::Broken);
        }
        if !self.cfg.striding_rq {
            return Err(PollError::NotStriding);
        }
        let wide = self.ring.stride() == 128;
        match (self.cfg.compression, wide) {
            (None, false) => self.strided_in::<NO_ZIP, 64>(rq, out),
            (None, true) => self.strided_in::<NO_ZIP, 128>(rq, out),
            (Some((Layout::Basic, _)), false) => self.strided_in::<BASIC, 64>(rq, out),
            (Some((Layout::Basic, _)), true) => self.strided_in::<BASIC, 128>(rq, out),
            (Some((Layout::Enhanced, _)), _) => self.strided_in::<ENHANCED, 64>(rq, out),
        }
    }

    /// [`Self::poll_strided`] for layout `M` and slot size `S`.
    #[inline(always)]
    fn strided_in<const M: u8, const S: usize>(
        &mut self,
        rq: &mut StridingRq<'_>,
        out: &mut [StridedPacket],
    ) -> Result<usize, PollError> {
        let start = self.ci;
        let max = out.len();
        let mut n = 0;
        let result = loop {
            if n >= max {
                break Ok(());
            }
            let next = if M == ENHANCED {
                self.strided_enhanced(rq, out, &mut n)
            } else {
                match self.ring.sized::<S>() {
                    Some(ring) => self.strided_fast::<M, S>(ring, rq, out, &mut n),
                    None => Ok(Next::General),
                }
            };
            match next {
                Ok(Next::Done) => break Ok(()),
                Ok(Next::General) => {
                    let ci = self.ci;
                    let open = self.session.map(|s| s.next);
                    // At most one completion: the fast steps take over
                    // again after it.
                    let Some(room) = out.get_mut(n..n + 1) else {
                        break Ok(());
                    };
                    match self.strided_general(rq, room) {
                        Ok(k) => {
                            n += k;
                            let moved = self.ci != ci || self.session.map(|s| s.next) != open;
                            if k == 0 && !moved {
                                break Ok(());
                            }
                        }
                        Err(e) => break Err(e),
                    }
                }
                Err(e) => break Err(e),
            }
        };
        // As `poll_in`: publish whatever was consumed, error or not.
        if n > 0 || self.ci != start {
            self.update_ci();
        }
        result.map(|()| n)
    }

    /// The fast steps from the consumer index: runs of successful
    /// responder CQEs and (basic layout) sessions of stride minis, until
    /// `out` is full, the CQ is empty or an entry needs the general steps.
    #[inline(always)]
    fn strided_fast<const M: u8, const S: usize>(
        &mut self,
        ring: SizedRing<S>,
        rq: &mut StridingRq<'_>,
        out: &mut [StridedPacket],
        n: &mut usize,
    ) -> Result<Next, PollError> {
        let max = out.len();
        let entries = self.size.entries();
        // Successful responder CQEs are plain in this table (and REQ,
        // which is left to the general steps).
        let classes = &super::burst::CLASSES[0];
        loop {
            if *n >= max {
                return Ok(Next::Done);
            }
            if M == BASIC {
                if let Some(s) = self.session {
                    let opcode = self.cur.cqe.op_own.into_bits() >> 4;
                    if s.next % MINI_CQE_ARRAY_SIZE as u32 != 0 || !fast_minis(opcode, s.unzip.kind)
                    {
                        return Ok(Next::General);
                    }
                    if !self.strided_array(rq, out, n)? {
                        return Ok(Next::General);
                    }
                    continue;
                }
            }
            let ci0 = self.ci;
            let run = ring.run(ci0, max - *n);
            let class = &classes[usize::from(ci0 & entries != 0)];
            // Step 1: the ownership byte of each entry, once.
            let Some((b0, k, stop)) =
                run.scan_same::<OP_OWN>(|b| class[usize::from(b)] == super::burst::PLAIN)
            else {
                return Ok(Next::Done);
            };
            let odd = matches!(stop, Some(b) if class[usize::from(b)] == super::burst::ODD);
            if k == 0 || b0 >> 4 < OP_RESP_WR_IMM {
                if !odd && k == 0 {
                    // Not owned: the CQ is empty.
                    return Ok(Next::Done);
                }
                let title = stop.filter(|b| b & FORMAT_MASK == FORMAT_COMPRESSED);
                if M == BASIC && k == 0 && title.is_some() {
                    // Step 2: the title's body after its ownership byte.
                    barrier::from_device();
                    // Opened by the general steps' code, on the copy in
                    // `cur` (as `advance_in` does); a bad count breaks the
                    // CQ there.
                    let e = ring.ring().entry(ci0);
                    ring.ring().copy_cqe_to(e, &mut self.cur.cqe);
                    self.open_basic::<BASIC>()?;
                    continue;
                }
                // A requester run, an error, a resize…
                return Ok(Next::General);
            }
            // Step 2: every read of the run's bodies after its ownership
            // bytes.
            barrier::from_device();
            // Step 3: each entry's three fields, once; accounted in order
            // on the WQE being filled, in registers.
            let run = run.prefix(k);
            let k = run.len();
            let accounted = account(rq, out, n, k, false, |i| {
                // (`i < k`: always inside the run.)
                let (wqe_id, stride_index, word) = run.stride_fields(i).unwrap_or_default();
                stride_completion(wqe_id, stride_index, word)
            });
            if let Err(i) = accounted {
                // The refused CQE is consumed (as by `advance_in`).
                self.ci = ci0.wrapping_add(i as u32 + 1);
                return Err(self.plain_refused(ring, ci0.wrapping_add(i as u32)));
            }
            self.ci = ci0.wrapping_add(k as u32);
        }
    }

    /// Enhanced layout, from the consumer index: successful responder
    /// CQEs (each the new title, kept in `cur` as `track_title` keeps it)
    /// and compressed CQEs of stride minis of such a title, each copied
    /// once after its validity byte and one barrier, their packets
    /// accounted in order; a block larger than the room left is taken in
    /// part and left open as the general steps leave it (its minis
    /// decoded into the current batch), and an open session of stride
    /// minis goes on from that batch. Until `out` is full, the CQ is empty
    /// or an entry needs the general steps.
    #[inline(always)]
    fn strided_enhanced(
        &mut self,
        rq: &mut StridingRq<'_>,
        out: &mut [StridedPacket],
        n: &mut usize,
    ) -> Result<Next, PollError> {
        let Some((_, format)) = self.cfg.compression else {
            return Ok(Next::General);
        };
        let max = out.len();
        loop {
            if *n >= max {
                return Ok(Next::Done);
            }
            if let Some(s) = self.session {
                let opcode = self.cur.cqe.op_own.into_bits() >> 4;
                if s.carried || !fast_minis(opcode, s.unzip.kind) {
                    return Ok(Next::General);
                }
                self.strided_batch(s, rq, out, n)?;
                continue;
            }
            let ci = self.ci;
            let entry = self.ring.entry(ci);
            // Step 1: the ownership byte (the validity iteration count),
            // once (PRM-FACTS §9.2).
            if self.ring.read_validity(entry) != self.size.iteration(ci) {
                return Ok(Next::Done);
            }
            // Step 2: the body after it; step 3: one copy.
            barrier::from_device();
            let cqe = self.ring.copy_cqe(entry);
            let op_own = cqe.op_own.into_bits();
            if op_own & FORMAT_MASK != FORMAT_COMPRESSED {
                // A regular CQE: a successful receive (not inline-64) is
                // the new title and one packet.
                if !(OP_RESP_WR_IMM..=OP_RESP_SEND_INV).contains(&(op_own >> 4))
                    || op_own & FORMAT_MASK == FORMAT_INLINE64
                {
                    return Ok(Next::General);
                }
                self.set_title(&cqe);
                self.cur.cqe = cqe;
                self.cur.set_regular();
                self.ci = ci.wrapping_add(1);
                let b = MprqByteCnt::from_bits(cqe.byte_cnt.get());
                let c = StrideCompletion {
                    wqe_id: cqe.wqe_id.get(),
                    stride_index: cqe.wqe_counter.get(),
                    strides: b.strides(),
                    filler: b.filler(),
                };
                let Ok(r) = rq.retire_strides(c, false) else {
                    return Err(self.refused(c.stride_index));
                };
                if !c.filler {
                    if let Some(slot) = out.get_mut(*n) {
                        *slot =
                            StridedPacket::ok(r.addr, b.byte_cnt(), &c, r.done.is_some(), false);
                    }
                    *n += 1;
                }
                continue;
            }
            let count = zip::enhanced_count(cqe.op_own);
            let title = &self.cur.cqe;
            let kind = MiniKind::of(title, format);
            if self.title != Title::InCur
                || count as usize > ENHANCED_MAX_MINIS
                || !fast_minis(title.op_own.into_bits() >> 4, kind)
            {
                return Ok(Next::General);
            }
            let wqe_id = title.wqe_id.get();
            // The minis fill the CQE from byte 0 (lane 7 never used).
            let array: MiniCqeArray = zerocopy::transmute!(cqe);
            let take = (count as usize).min(max - *n);
            let minis = &array.minis;
            let accounted = account(rq, out, n, take, true, |j| {
                stride_mini(&minis[j % MINI_CQE_ARRAY_SIZE], wqe_id)
            });
            if let Err(j) = accounted {
                self.open_block(ci, count, j as u32 + 1, &array);
                let (c, _) = stride_mini(&minis[j % MINI_CQE_ARRAY_SIZE], wqe_id);
                return Err(self.refused(c.stride_index));
            }
            if take < count as usize {
                // Room for part of the block: its session left open.
                self.open_block(ci, count, take as u32, &array);
                return Ok(Next::Done);
            }
            // As `MiniBatch::end_counter`: after the last mini (read only
            // by formats without a stride index, which a new title resets;
            // kept as the general steps leave it).
            let (last, _) = stride_mini(&minis[(take - 1) % MINI_CQE_ARRAY_SIZE], wqe_id);
            self.running = last.stride_index.wrapping_add(last.strides);
            self.ci = ci.wrapping_add(count);
        }
    }

    /// Enhanced layout, session `s` of stride minis open (its block
    /// decoded into the current batch): its next minis, as many as `out`
    /// has room for, accounted from the batch; the session closed (the
    /// consumer index past it) after its last, as `next_mini` leaves it.
    #[inline(always)]
    fn strided_batch(
        &mut self,
        mut s: zip::Session,
        rq: &mut StridingRq<'_>,
        out: &mut [StridedPacket],
        n: &mut usize,
    ) -> Result<(), PollError> {
        let wqe_id = self.cur.cqe.wqe_id.get();
        let end = s.count.min(s.next + (out.len() - *n) as u32);
        let batch = &self.cur.batch;
        let lane = |i: usize| (s.next as usize + i) % MINI_CQE_ARRAY_SIZE;
        let item = |i: usize| {
            let l = lane(i);
            stride_completion(wqe_id, batch.wqe_counter[l], batch.byte_cnt[l])
        };
        let accounted = account(rq, out, n, (end - s.next) as usize, true, item);
        if let Err(i) = accounted {
            let (c, _) = item(i);
            s.next += i as u32 + 1;
            self.leave_session(s);
            return Err(self.refused(c.stride_index));
        }
        s.next = end;
        self.leave_session(s);
        Ok(())
    }

    /// Enhanced layout: the session of the compressed CQE at `ci` (`count`
    /// minis, copied in `array`) as `decode_enhanced` opens it (the block
    /// decoded into the current completion's batch), its minis before
    /// `next` consumed.
    #[cold]
    #[inline(never)]
    fn open_block(&mut self, ci: u32, count: u32, next: u32, array: &MiniCqeArray) {
        let Some((_, format)) = self.cfg.compression else {
            return;
        };
        let unzip = zip::Unzip::new(&self.cur.cqe, self.mini_view(format));
        self.decode_block(unzip, array, count);
        self.leave_session(zip::Session {
            base: ci,
            count,
            next,
            unzip,
            fused: None,
            carried: false,
        });
    }

    /// Session `s` after its mini `s.next - 1`: kept open, or closed with
    /// the consumer index past it after its last (as `next_mini`).
    #[inline(always)]
    fn leave_session(&mut self, s: zip::Session) {
        if s.next == s.count {
            self.ci = s.base.wrapping_add(s.count);
            self.session = None;
        } else {
            self.session = Some(s);
        }
    }

    /// The error of a completion the RQ refused (`NotInFlight`, its only
    /// refusal) at stride `stride_index`: the CQE in `cur` (the refused
    /// CQE, or the title of the refused mini) names the queue.
    #[cold]
    #[inline(never)]
    fn refused(&self, stride_index: u16) -> PollError {
        let cqe = &self.cur.cqe;
        let wq = WqRef {
            qpn: cqe.sop_drop_qpn.qpn(),
            srqn_uidx: cqe.srqn_uidx.srqn_uidx(),
        };
        lookup_error(LookupError::NotInFlight, false, wq, stride_index)
    }

    /// Basic layout, the open session at an array boundary, its minis
    /// stride minis of a successful receive: the next mini array, copied
    /// once, each mini accounted in order, its slots invalidated (and the
    /// session closed after its last array) as `next_mini` does. `false`
    /// (nothing done) if `out` has no room for every mini of the array.
    #[inline(always)]
    fn strided_array(
        &mut self,
        rq: &mut StridingRq<'_>,
        out: &mut [StridedPacket],
        n: &mut usize,
    ) -> Result<bool, PollError> {
        let Some(mut s) = self.session else {
            return Ok(false);
        };
        let k = s.next / MINI_CQE_ARRAY_SIZE as u32;
        let count = (s.count - s.next).min(MINI_CQE_ARRAY_SIZE as u32);
        if out.len() - *n < count as usize {
            return Ok(false);
        }
        let entry = self
            .ring
            .entry(s.base.wrapping_add(zip::basic_array_offset(k)));
        // (Read after the title's barrier: an array is the title's.)
        let array: MiniCqeArray = zerocopy::transmute!(self.ring.copy_cqe(entry));
        let wqe_id = self.cur.cqe.wqe_id.get();
        let minis = &array.minis;
        let accounted = account(rq, out, n, count as usize, true, |j| {
            stride_mini(&minis[j % MINI_CQE_ARRAY_SIZE], wqe_id)
        });
        if let Err(j) = accounted {
            s.next += j as u32 + 1;
            let (c, _) = stride_mini(&minis[j % MINI_CQE_ARRAY_SIZE], wqe_id);
            return Err(self.mini_refused(s, &array, c.stride_index));
        }
        s.next += count;
        self.close_array(s);
        Ok(true)
    }

    /// After mini `s.next - 1` of session `s` (array `(s.next - 1) / 8`):
    /// the array's slots invalidated if it was its last mini, the session
    /// closed (consumer index past it) if it was the session's, as
    /// `next_mini` leaves them.
    #[inline(always)]
    fn close_array(&mut self, s: zip::Session) {
        let done = s.next == s.count;
        if s.next % MINI_CQE_ARRAY_SIZE as u32 == 0 || done {
            let (first, last) =
                zip::basic_invalidate_range((s.next - 1) / MINI_CQE_ARRAY_SIZE as u32, s.count);
            self.ring
                .write_op_own_range(s.base, first, last, CQE_INVALIDATE);
        }
        self.leave_session(s);
    }

    /// The error of a plain CQE at `ci` the RQ refused (consumed): its copy
    /// in `cur`, as the general steps leave it, and the queue it named
    /// (`NotInFlight`: the RQ's only refusal).
    #[cold]
    #[inline(never)]
    fn plain_refused<const S: usize>(&mut self, ring: SizedRing<S>, ci: u32) -> PollError {
        ring.ring()
            .copy_cqe_to(ring.ring().entry(ci), &mut self.cur.cqe);
        self.cur.set_regular();
        self.refused(self.cur.cqe.wqe_counter.get())
    }

    /// The error of a refused mini (consumed: `s.next` is past it), with
    /// the session left as the general steps leave it: the array decoded
    /// into the current completion's batch (the next mini of the array is
    /// read there: `next_mini` decodes only at an array's first), the
    /// array's slots invalidated and the session closed if the mini was
    /// the last of either.
    #[cold]
    #[inline(never)]
    fn mini_refused(
        &mut self,
        s: zip::Session,
        array: &MiniCqeArray,
        stride_index: u16,
    ) -> PollError {
        let i = s.next - 1;
        let count = (s.count - (i / 8) * 8).min(MINI_CQE_ARRAY_SIZE as u32);
        self.decode_block(s.unzip, array, count);
        self.close_array(s);
        self.refused(stride_index)
    }

    /// The first `count` minis of `array` decoded into the current
    /// completion's batch (its title fields first, once), the running
    /// counter after them: what `next_mini` and `decode_enhanced` do.
    fn decode_block(&mut self, unzip: zip::Unzip, array: &MiniCqeArray, count: u32) {
        self.ensure_batch_title();
        self.running = self.cfg.unzip.decode_count(
            unzip,
            &array.minis,
            count as usize,
            self.running,
            &mut self.cur.batch,
        );
    }

    /// The general steps ([`Self::poll`]) for up to `out.len()` packets,
    /// each written from the completion and what the RQ retired for it.
    #[cold]
    #[inline(never)]
    fn strided_general(
        &mut self,
        rq: &mut StridingRq<'_>,
        out: &mut [StridedPacket],
    ) -> Result<usize, PollError> {
        let last = Cell::new(None);
        let mut wqs = Recorder { rq, last: &last };
        let mut n = 0;
        self.poll(&mut wqs, out.len(), |c| {
            if let (Some(slot), Some(r)) = (out.get_mut(n), last.get()) {
                *slot = StridedPacket::of(c, &r);
            }
            n += 1;
        })?;
        Ok(n)
    }
}
