//! The burst poller, [`Cq::poll_burst`]: DPDK's vectorised Rx shape
//! (`mlx5_rx_burst_vec`) on top of the general poller of `mod.rs`.
//!
//! Per group of regular CQEs:
//! 1. the ownership byte of each of up to `out.len()` entries is read once
//!    (volatile), with the ring geometry, the consumer index and the owner
//!    phase (`ci & entries`) in registers; the scan stops at the first
//!    entry that is not owned, or after the first owned one that is not a
//!    plain CQE (basic layout: opcode, format and owner bit are all in the
//!    ownership byte `op_own`, PRM-FACTS §9.1–§9.2);
//! 2. one from-device barrier for the whole group;
//! 3. each entry is copied out once (bytes 32–63 first, the rest only if
//!    the entry needs it) and the copy decoded straight into a
//!    [`CompletionSummary`], its wr_id resolved through [`WorkQueues`].
//!
//! STYLE point 8 holds per entry: its ownership byte is read once before
//! the barrier, its body copied once after it, and only the copy is
//! decoded. Anything that is not a plain successful completion (error
//! CQEs, resize, inline-64 scatter, unknown opcodes, compressed titles,
//! striding-RQ responders) is decoded from the same copy by the general
//! steps ([`Cq::take_copied`], the tail of `advance_in`).
//!
//! Compressed sessions are handed out a mini array at a time: the title's
//! opcode and queue are resolved once per session, the array decoded once
//! by the CQ's [`super::UnzipPath`] into the current [`super::MiniBatch`],
//! the summaries written lane by lane from it, and the array's slots
//! invalidated in one pass (basic layout). Sessions the fast path does not
//! cover (striding RQ responders, error or resize titles) go through the
//! general poller one mini at a time.
//!
//! The result is the general poller's, completion for completion: same
//! summaries, consumer index, invalidated slots, doorbell-record writes,
//! errors and error log (property test `burst_matches_poll_on_random_streams`).
#![forbid(unsafe_code)]

use super::{
    lookup_error, zip, CompletionSummary, Cq, Layout, MiniBatch, Origin, PollError, WorkQueues,
    WqRef, BASIC, ENHANCED, FORMAT_COMPRESSED, FORMAT_INLINE64, FORMAT_MASK, NO_ZIP, OP_REQ,
    OP_RESP_SEND_INV, OP_RESP_WR_IMM, QPN_MASK,
};
use crate::barrier;
use crate::prm::{Cqe64, CqeOpcode, MiniCqeArray, WcStatus, MINI_CQE_ARRAY_SIZE};

/// `IBV_WC_SUCCESS`, raw.
const SUCCESS: u16 = WcStatus::Success.raw() as u16;

/// Summaries of lanes `lane0..lane0 + take` of a decoded mini array whose
/// wr_ids are their `wqe_counter`s ([`WorkQueues::WR_ID_IS_WQE_COUNTER`]),
/// all successful completions of CQE opcode `opcode`, into
/// `out[..take]`: from lane 0 with room for eight, all eight lanes in
/// vector stores (lanes past `take` land in `out` past the burst's count,
/// where [`Cq::poll_burst`] may leave anything); lane by lane otherwise.
#[inline(always)]
fn identity_lanes(
    batch: &MiniBatch,
    lane0: usize,
    take: usize,
    opcode: u8,
    out: &mut [CompletionSummary],
) {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    if lane0 == 0 {
        if let Some(all) = out.first_chunk_mut::<MINI_CQE_ARRAY_SIZE>() {
            let upper = CompletionSummary::upper_word(SUCCESS, opcode, Origin::Mini);
            super::zip_x86::summaries_sse2(batch, upper, all);
            return;
        }
    }
    for (l, slot) in out[..take].iter_mut().enumerate() {
        let lane = (lane0 + l) % MINI_CQE_ARRAY_SIZE;
        *slot = CompletionSummary::from_parts(
            u64::from(batch.wqe_counter[lane]),
            batch.byte_cnt[lane],
            SUCCESS,
            opcode,
            Origin::Mini,
        );
    }
}

/// What the general steps made of one copied entry.
enum Taken {
    /// A completion, in `cur`.
    Reported,
    /// Consumed, not reported (resize, striding filler).
    Skipped,
    /// A compressed session opened (its minis are next).
    Session,
    /// Not a CQE after all (enhanced: an invalidated slot): the CQ is empty.
    Stop,
}

/// Whether `op_own`, with the owner bit folded to 0 for "ours", is a plain
/// CQE the burst loop decodes itself: opcode below `limit`, format 0 or 1
/// (format bit 3 clear: no data in a 128-byte slot's first half, not
/// compressed), owner bit 0 (PRM-FACTS §9.1). One rotate puts the opcode
/// nibble low and the format-high and owner bits at 7 and 4, so the three
/// tests are one compare.
#[inline(always)]
const fn plain(op_own: u8, limit: u8) -> bool {
    (op_own.rotate_right(4) & 0x9f) < limit
}

impl Cq {
    /// DPDK-style burst: fills `out` with up to `out.len()` completions as
    /// small `Copy` values and writes the doorbell record once if anything
    /// was consumed. Returns the count; entries of `out` past it may have
    /// been overwritten (whole mini arrays are written at once).
    ///
    /// Equivalent to [`Self::poll`] with `out.len()` as the maximum and
    /// [`super::Completion::summary`] of each completion (the same
    /// completions, consumer index, slot invalidations, doorbell writes and
    /// errors), but with one from-device barrier per group of owned CQEs,
    /// and whole mini arrays per step (module documentation).
    #[inline]
    pub fn poll_burst<W: WorkQueues>(
        &mut self,
        wqs: &mut W,
        out: &mut [CompletionSummary],
    ) -> Result<usize, PollError> {
        match self.cfg.compression {
            None => self.burst_in::<NO_ZIP, W>(wqs, out),
            Some((Layout::Basic, _)) => self.burst_in::<BASIC, W>(wqs, out),
            Some((Layout::Enhanced, _)) => self.burst_in::<ENHANCED, W>(wqs, out),
        }
    }

    /// [`Self::poll_burst`] for layout `M`: out of line, so that each
    /// layout's loop gets the registers to itself.
    #[inline(never)]
    fn burst_in<const M: u8, W: WorkQueues>(
        &mut self,
        wqs: &mut W,
        out: &mut [CompletionSummary],
    ) -> Result<usize, PollError> {
        if self.broken {
            return Err(PollError::Broken);
        }
        let start = self.ci;
        let (n, result) = self.burst_loop::<M, W>(wqs, out);
        // As `poll_in`: publish whatever was consumed, error or not.
        if n > 0 || self.ci != start {
            self.update_ci();
        }
        result.map(|()| n)
    }

    /// Fills `out`; returns the count and why it stopped early, if it did
    /// with an error.
    #[inline(always)]
    fn burst_loop<const M: u8, W: WorkQueues>(
        &mut self,
        wqs: &mut W,
        out: &mut [CompletionSummary],
    ) -> (usize, Result<(), PollError>) {
        let max = out.len();
        let mut n = 0;
        // The ring geometry and owner phase, in registers for the burst.
        let ring = self.ring;
        let size = self.size;
        let entries = size.entries();
        // Opcodes decoded inline: REQ and the four successful responder
        // opcodes; REQ only on a striding RQ (strides, fillers).
        let limit = if self.cfg.striding_rq {
            OP_REQ + 1
        } else {
            OP_RESP_SEND_INV + 1
        };
        while n < max {
            if M != NO_ZIP && self.session.is_some() {
                let (k, r) = self.burst_session::<M, W>(wqs, &mut out[n..]);
                n += k;
                match r {
                    Ok(true) => continue,
                    Ok(false) => break,
                    Err(e) => return (n, Err(e)),
                }
            }
            // Step 1: the ownership byte of each entry, once (PRM-FACTS
            // §9.2). `ci & entries` is the pass parity. Basic layout (or
            // none): `plain` entries, then at most one owned entry that is
            // not plain (`odd`: a title, error, resize…; a title's arrays
            // carry no ownership byte, so the scan stops there).
            let ci0 = self.ci;
            let want = (max - n).min(entries as usize) as u32;
            let mut plain_n = 0u32;
            let mut odd = false;
            while plain_n < want {
                let ci = ci0.wrapping_add(plain_n);
                let entry = ring.entry(ci);
                if M == ENHANCED {
                    // The validity byte; the format is decoded from the copy.
                    if ring.read_validity(entry) != size.iteration(ci) {
                        break;
                    }
                } else {
                    let op_own = ring.read_op_own(entry);
                    let phase = u8::from(ci & entries != 0);
                    if !plain(op_own ^ phase, limit) {
                        odd = op_own >> 4 != CqeOpcode::Invalid.raw() && op_own & 1 == phase;
                        break;
                    }
                }
                plain_n += 1;
            }
            if plain_n == 0 && !odd {
                break;
            }
            // Step 2: every read of the group's bodies after their
            // ownership bytes.
            barrier::from_device();
            // Step 3: one copy per entry, decoded.
            if M == ENHANCED {
                let (k, r) = self.enhanced_group::<W>(wqs, &mut out[n..], plain_n, limit);
                n += k;
                match r {
                    Ok(true) => continue,
                    Ok(false) => break,
                    Err(e) => return (n, Err(e)),
                }
            }
            let mut ci = ci0;
            let group = &mut out[n..n + plain_n as usize];
            for (i, slot) in group.iter_mut().enumerate() {
                // Plain by its ownership byte: the tail of the copy is all
                // the summary needs.
                let entry = ring.entry(ci);
                let mut cqe = Cqe64::default();
                ring.copy_cqe_tail_to(entry, &mut cqe);
                ci = ci.wrapping_add(1);
                match resolve_plain(wqs, &cqe) {
                    Ok(s) => *slot = s,
                    Err(e) => {
                        self.ci = ci;
                        return (n + i, Err(e));
                    }
                }
            }
            n += plain_n as usize;
            self.ci = ci;
            if odd && n < max {
                // The whole copy, the general steps.
                let mut cqe = Cqe64::default();
                ring.copy_cqe_to(ring.entry(ci), &mut cqe);
                match self.take_copied::<M, W>(wqs, cqe, ci) {
                    Ok(Taken::Reported) => {
                        out[n] = self.cur.summary();
                        n += 1;
                    }
                    Ok(Taken::Skipped | Taken::Session) => {}
                    // (Enhanced only.)
                    Ok(Taken::Stop) => break,
                    Err(e) => return (n, Err(e)),
                }
            }
        }
        (n, Ok(()))
    }

    /// Enhanced layout, step 3 for `owned` entries whose validity bytes
    /// matched: plain CQEs decoded inline (each kept as the title of
    /// following minis), anything else by the general steps. `Ok(false)`:
    /// the CQ is empty.
    #[inline(always)]
    fn enhanced_group<W: WorkQueues>(
        &mut self,
        wqs: &mut W,
        out: &mut [CompletionSummary],
        owned: u32,
        limit: u8,
    ) -> (usize, Result<bool, PollError>) {
        let ring = self.ring;
        let mut n = 0;
        let mut ci = self.ci;
        let end = ci.wrapping_add(owned);
        while ci != end && n < out.len() {
            let entry = ring.entry(ci);
            let mut cqe = Cqe64::default();
            ring.copy_cqe_to(entry, &mut cqe);
            // (The owner bit is not used in this layout.)
            if plain(cqe.op_own.into_bits() & !1, limit) {
                // The title of following minis.
                self.track_title(&cqe);
                self.cur.cqe = cqe;
                ci = ci.wrapping_add(1);
                match resolve_plain(wqs, &cqe) {
                    Ok(s) => {
                        out[n] = s;
                        n += 1;
                    }
                    Err(e) => {
                        self.ci = ci;
                        return (n, Err(e));
                    }
                }
                continue;
            }
            self.ci = ci;
            // A compressed CQE: its minis decoded against the title now.
            match self.decode_enhanced(&cqe) {
                Ok(true) => return (n, Ok(true)),
                Ok(false) => {}
                Err(e) => return (n, Err(e)),
            }
            match self.take_copied::<ENHANCED, W>(wqs, cqe, ci) {
                Ok(Taken::Reported) => {
                    out[n] = self.cur.summary();
                    n += 1;
                }
                Ok(Taken::Skipped) => {}
                // The rest of the group is re-read after the session.
                Ok(Taken::Session) => return (n, Ok(true)),
                Ok(Taken::Stop) => return (n, Ok(false)),
                Err(e) => return (n, Err(e)),
            }
            ci = self.ci;
        }
        self.ci = ci;
        (n, Ok(true))
    }

    /// The general steps for a CQE copied whole into `cqe` from the entry at
    /// `ci` (= `self.ci`): the tail of `advance_in` after its copy.
    #[inline(never)]
    fn take_copied<const M: u8, W: WorkQueues>(
        &mut self,
        wqs: &mut W,
        cqe: Cqe64,
        ci: u32,
    ) -> Result<Taken, PollError> {
        let format = cqe.op_own.into_bits() & FORMAT_MASK;
        if M == ENHANCED {
            if self.decode_enhanced(&cqe)? {
                return Ok(Taken::Session);
            }
            if cqe.op_own.into_bits() >> 4 == CqeOpcode::Invalid.raw() {
                return Ok(Taken::Stop);
            }
            self.track_title(&cqe);
            self.cur.cqe = cqe;
        } else {
            self.cur.cqe = cqe;
            if format == FORMAT_COMPRESSED {
                self.open_basic::<M>()?;
                return Ok(Taken::Session);
            }
        }
        self.ci = ci.wrapping_add(1);
        self.cur.set_regular();
        if format == FORMAT_INLINE64 {
            self.copy_inline(self.ring.entry(ci));
        }
        Ok(if self.resolve::<W, false>(wqs)? {
            Taken::Reported
        } else {
            Taken::Skipped
        })
    }

    /// Hands out minis of the open session into `out` (not empty): whole
    /// arrays at a time when the session's title is a plain requester or
    /// (cyclic RQ) responder CQE, else one by one through the general
    /// poller. `Ok(false)`: the CQ is empty.
    #[inline(always)]
    fn burst_session<const M: u8, W: WorkQueues>(
        &mut self,
        wqs: &mut W,
        out: &mut [CompletionSummary],
    ) -> (usize, Result<bool, PollError>) {
        let Some(mut s) = self.session else {
            return (0, Ok(true));
        };
        let title = &self.cur.cqe;
        let opcode = title.op_own.into_bits() >> 4;
        let requester = opcode == OP_REQ;
        let responder = (OP_RESP_WR_IMM..=OP_RESP_SEND_INV).contains(&opcode);
        if !(requester || responder && !self.cfg.striding_rq) {
            return self.session_by_one::<M, W>(wqs, out);
        }
        // Resolved once per session: the queue (but for FTAG_STRIDX flow
        // tags, per lane below) and the summary's fixed fields.
        let srqn_uidx = title.srqn_uidx.srqn_uidx();
        let max = out.len();
        let mut n = 0;
        let mut result = Ok(true);
        while n < max && s.next < s.count {
            let i = s.next;
            let k = i / MINI_CQE_ARRAY_SIZE as u32;
            if M == BASIC && i % MINI_CQE_ARRAY_SIZE as u32 == 0 {
                // Mini array k: copied once, decoded whole (as `next_mini`).
                let entry = self
                    .ring
                    .entry(s.base.wrapping_add(zip::basic_array_offset(k)));
                let array: MiniCqeArray = zerocopy::transmute!(self.ring.copy_cqe(entry));
                let len = (s.count - i).min(MINI_CQE_ARRAY_SIZE as u32) as usize;
                self.cfg
                    .unzip
                    .decode(s.unzip, &array.minis, self.running, &mut self.cur.batch);
                self.running = self.cur.batch.end_counter(s.unzip, len, self.running);
            }
            // The lanes of this array to hand out now.
            let lane0 = i as usize % MINI_CQE_ARRAY_SIZE;
            let take = (MINI_CQE_ARRAY_SIZE - lane0)
                .min((s.count - i) as usize)
                .min(max - n);
            let batch = &self.cur.batch;
            let mut taken = take;
            if W::WR_ID_IS_WQE_COUNTER {
                // Nothing to call per mini: write the lanes at once.
                identity_lanes(batch, lane0, take, opcode, &mut out[n..]);
            } else {
                let dst = &mut out[n..n + take];
                for (l, slot) in dst.iter_mut().enumerate() {
                    let lane = (lane0 + l) % MINI_CQE_ARRAY_SIZE;
                    let wqe_counter = batch.wqe_counter[lane];
                    let wq = WqRef {
                        qpn: batch.sop_drop_qpn[lane] & QPN_MASK,
                        srqn_uidx,
                    };
                    let wr_id = if requester {
                        wqs.retire_send(wq, wqe_counter, WcStatus::Success)
                            .map(|r| r.wr_id)
                    } else {
                        wqs.retire_recv(wq, wqe_counter, WcStatus::Success)
                            .map(|r| r.wr_id)
                    };
                    match wr_id {
                        Ok(wr_id) => {
                            *slot = CompletionSummary::from_parts(
                                wr_id,
                                batch.byte_cnt[lane],
                                SUCCESS,
                                opcode,
                                Origin::Mini,
                            )
                        }
                        Err(e) => {
                            // The mini is consumed, as by `next_mini`.
                            taken = l + 1;
                            result = Err(lookup_error(e, requester, wq, wqe_counter));
                            break;
                        }
                    }
                }
            }
            n += if result.is_err() { taken - 1 } else { taken };
            s.next = i + taken as u32;
            let done = s.next == s.count;
            if M == BASIC && (s.next % MINI_CQE_ARRAY_SIZE as u32 == 0 || done) {
                // The array's slot and the holes after it, in one pass.
                let (first, last) = zip::basic_invalidate_range(k, s.count);
                self.ring
                    .write_op_own_range(s.base, first, last, crate::prm::CQE_INVALIDATE);
            }
            if result.is_err() {
                break;
            }
        }
        if s.next == s.count {
            self.ci = s.base.wrapping_add(s.count);
            self.session = None;
        } else {
            self.session = Some(s);
        }
        (n, result)
    }

    /// The session's minis one at a time through the general poller (which
    /// may go on past the session's end while minis are not reported).
    #[cold]
    #[inline(never)]
    fn session_by_one<const M: u8, W: WorkQueues>(
        &mut self,
        wqs: &mut W,
        out: &mut [CompletionSummary],
    ) -> (usize, Result<bool, PollError>) {
        let mut n = 0;
        while n < out.len() && self.session.is_some() {
            match self.advance_in::<M, W>(wqs) {
                Ok(true) => {
                    out[n] = self.cur.summary();
                    n += 1;
                }
                Ok(false) => return (n, Ok(false)),
                Err(e) => return (n, Err(e)),
            }
        }
        (n, Ok(true))
    }
}

/// The summary of a plain CQE (opcode REQ or a successful responder one,
/// format 0 or 1, not on a striding RQ for responders): its wr_id from the
/// work queue, the rest from the copy.
#[inline(always)]
fn resolve_plain<W: WorkQueues>(wqs: &mut W, cqe: &Cqe64) -> Result<CompletionSummary, PollError> {
    let opcode = cqe.op_own.into_bits() >> 4;
    let wq = WqRef {
        qpn: cqe.sop_drop_qpn.into_bits().get() & QPN_MASK,
        srqn_uidx: cqe.srqn_uidx.srqn_uidx(),
    };
    let wqe_counter = cqe.wqe_counter.get();
    let requester = opcode == OP_REQ;
    let wr_id = if requester {
        wqs.retire_send(wq, wqe_counter, WcStatus::Success)
            .map(|r| r.wr_id)
    } else {
        wqs.retire_recv(wq, wqe_counter, WcStatus::Success)
            .map(|r| r.wr_id)
    };
    match wr_id {
        Ok(wr_id) => Ok(CompletionSummary::from_parts(
            wr_id,
            cqe.byte_cnt.get(),
            SUCCESS,
            opcode,
            Origin::Regular,
        )),
        Err(e) => Err(lookup_error(e, requester, wq, wqe_counter)),
    }
}
