//! The burst poller, [`Cq::poll_burst`]: DPDK's vectorised Rx shape
//! (`mlx5_rx_burst_vec`, `mlx5_rxtx_vec_*.h`) on the state of the general
//! poller of `mod.rs`. Specialised once per call for the layout, the slot
//! size (`S`, a constant) and the mini writer of the CQ's decoder path
//! (each SIMD instantiation compiled with its target feature).
//!
//! Regular CQEs (basic layout or none), per run of consecutive entries up
//! to the ring's end (one owner phase):
//! 1. the ownership byte of each entry is read once (volatile), eight per
//!    loop test. The first is classified by one table lookup ("plain": REQ
//!    or a successful responder opcode, format 0 or 1, owner bit of this
//!    pass; "owned, not plain": a title, error, resize…, ends the group;
//!    "not owned": ends the scan; PRM-FACTS §9.1–§9.2); the next ones only
//!    compared with it while equal (the usual stream), classified one by
//!    one after that;
//! 2. one from-device barrier for the whole group;
//! 3. each plain entry's fields (`byte_cnt`, `wqe_counter`; `op_own` unless
//!    the group shares the first byte; `sop_drop_qpn` and `srqn_uidx` when
//!    a work queue maps the wr_id) are copied once and decoded into a
//!    [`CompletionSummary`], two quadword stores. The entry that ended the
//!    group is copied whole: a session title opens its session, anything
//!    else goes to the general steps ([`Cq::take_copied`], the tail of
//!    `advance_in`). After a session written whole, the next entry's
//!    ownership byte is read at once: another title (sessions of a few
//!    minis) is taken the same way, without a new group.
//!
//! Compressed sessions, when the work queue's wr_id is the reported
//! `wqe_counter` ([`WorkQueues::WR_ID_IS_WQE_COUNTER`]) and the title is a
//! successful requester or (cyclic RQ) responder CQE: each mini array (a
//! basic array slot, an enhanced compressed CQE) is copied once into
//! registers and written straight into eight (enhanced: seven) summaries
//! by a [`SummaryWriter`] (per mini or pair of minis one byte shuffle, an
//! add or two, a store), a basic array's slot and holes invalidated in one
//! unrolled pass. With a vector writer ([`SummaryWriter::RUNS`]) the whole
//! arrays of a session up to the ring's end are one run
//! ([`SummaryWriter::write_arrays`]: a pointer walk, no index masking, the
//! writer's constants and running counter in registers across the arrays;
//! the array whose holes wrap the ring goes alone). Everything else (a
//! basic array `out` has no room for,
//! other work queues, striding RQs, error titles) goes through the
//! session's [`super::MiniBatch`] as the general poller decodes it. With a
//! vector writer, a call that resumes an open basic session in the middle
//! of its arrays (the usual call while a long session is in progress)
//! starts with `Cq::basic_resume`: the session's whole arrays from the next
//! one on, up to the ring's end, straight into
//! [`SummaryWriter::resume_arrays`], without the first-array, wrap and
//! last-array steps; the general loop (out of line) takes whatever it
//! leaves. A call with no session open starts with `Cq::basic_start`: if
//! the entry at the consumer index is a session title, sessions of one
//! array (two to eight minis, a stream of short sessions) go through a
//! loop of their own (`Cq::short_sessions`: the plan looked up once by
//! the title's opcode, one index and one bound for the ring up to its end
//! and for `out` (a session of `c` minis takes `c` entries and `c`
//! summaries), two sessions per turn, each next title taken if its
//! ownership byte equals the first's, then only its count and counter
//! read, the rest of it only if the loop leaves it to the general steps;
//! no session stored, no title copied into `cur`); a
//! title of more arrays goes out
//! of line to `Cq::long_titles`: the sessions from it in a loop of their
//! own (`Cq::long_sessions`: the plan looked up once, a pointer walk up
//! to the ring's end, each session's first array, whole arrays in one run
//! of the writer, last partial array; no session stored unless the call
//! ends inside one); other titles go to the title steps of the general
//! loop (`Cq::basic_titles`), and the general loop (out of line) is not
//! called at all when the sessions fill `out`.
//!
//! The enhanced layout goes entry by entry (`Cq::enhanced_loop`): validity
//! bytes for a group at a time, one barrier per group, each entry copied
//! whole and decoded from the copy; a run of compressed CQEs of one title
//! in a tight loop (`Cq::enhanced_blocks`: index and running counter in
//! registers, the next block's validity byte read once, one barrier; a
//! plain CQE of the title's opcode right after a block, the next title of
//! short sessions, reported and committed there too, the plan kept), its
//! full blocks (seven minis) up to the ring's end, with a vector writer,
//! one run ([`SummaryWriter::write_blocks`]: a pointer walk; each entry's
//! validity byte and `num_and_type` read together by one 16-bit load, so
//! that "owned, a full block" is one test before the barrier; AVX2 entry
//! by entry, one barrier per block (a compiler fence on x86-64), and the
//! shorter compressed CQE that ends such a run, the last block of a
//! session, from the same running state, then, but on a striding RQ, each
//! next title of the plan's opcode (its summary, its copy into `cur`, its
//! running counter) and its blocks, while each entry has room for seven
//! summaries and lies before the ring's end: a stream of sessions of one
//! opcode is one run, the last title committed once after it; the other
//! writers the ownership bytes of all the blocks with room first, one
//! barrier, then one copy and seven summaries per block). A
//! block that straddles the end of `out` is written whole into the CQ's
//! carry buffer: the minis that fit are handed out, the rest at the start
//! of the next call. The consumer index stays on the block until its last
//! mini is handed out (as for the general poller's session), so the
//! doorbell record never covers a completion not handed out; `poll` or
//! `start_poll` on a carried block decode it from its kept copy. With a
//! vector writer, a call that resumes a compressed stream (the usual call
//! while a long session is in progress) starts with `Cq::enhanced_resume`:
//! the carried minis, then, if the entry at the consumer index is a
//! compressed CQE of the committed title (or a plain CQE of its opcode),
//! straight into `Cq::enhanced_blocks` (its validity byte, the barrier,
//! one copy), without the group scan; `Cq::enhanced_loop` takes whatever
//! it leaves (out of line, from the copy it took, if any).
//!
//! STYLE point 8 holds per entry: its ownership byte is read once before
//! the barrier (in a block run, with `num_and_type`, as the basic layout's
//! owner bit comes with the opcode and format), the bytes it is decoded
//! from copied once after it, and only the copy is decoded (a block run's
//! minis; whether the entry is a full block was read with its validity
//! byte).
//!
//! The result is the general poller's, completion for completion: same
//! summaries, consumer index, invalidated slots, doorbell-record writes,
//! errors and error log (property test `burst_matches_poll_on_random_streams`,
//! against `poll` and against `start_poll`/`next_poll`/`end_poll`).
#![forbid(unsafe_code)]

use super::completion::{write_req_wc, write_resp_wc};
use super::mem::{
    store_summary, CqeCopy, PlainFields, Run, SizedRing, FIELDS_COUNTER, FIELDS_IDS, FIELDS_OPCODE,
    FIELDS_QUEUE, OP_OWN, VALIDITY,
};
use super::zip::{self, Fused, ScalarWriter, Session, SummaryWriter, Unzip};
use super::{
    lookup_error, Completion, CompletionSummary, Cq, Layout, MiniBatch, Origin, PollError, Title,
    UnzipPath, Wc, WorkQueues, WqRef, BASIC, ENHANCED, FORMAT_COMPRESSED, FORMAT_INLINE64,
    FORMAT_MASK, NO_ZIP, OPCODE_MASK, OP_REQ, OP_RESP_SEND_INV, QPN_MASK,
};
use crate::barrier;
use crate::prm::{
    CqeOpcode, MiniCqeArray, MiniCqeFormat, WcStatus, ENHANCED_MAX_MINIS, MINI_CQE_ARRAY_SIZE,
};
use core::convert::Infallible;

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

/// How the burst poller writes the compressed CQEs (enhanced layout) of
/// the titles of one opcode whole: the plan, the writer's constants.
struct BlockPlan<D: SummaryWriter> {
    plan: Fused,
    p: D::Prepared,
}

impl<D: SummaryWriter> Clone for BlockPlan<D> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<D: SummaryWriter> Copy for BlockPlan<D> {}

/// The error of an out-of-line burst poller, kept in the CQ
/// (`Cq::burst_error`) for [`Cq::poll_burst`] to return: with it the
/// pollers' result is two words, returned in registers.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Stashed;

/// Basic layout: a session title at the consumer index as the burst
/// poller took it: its ownership byte, read once before the from-device
/// barrier (owned, a compressed CQE), and its copy, made after it.
#[derive(Clone, Copy, Debug)]
struct TitleCopy {
    /// The `op_own` byte read before the barrier.
    op_own: u8,
    /// The entry, copied once after the barrier.
    copy: CqeCopy,
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

/// Why the loop of one bound of [`Cq::short_sessions`] stopped.
#[derive(Clone, Copy)]
enum Stop {
    /// No next title of the first's ownership byte: the sessions are done.
    Done,
    /// `out` has room for fewer than eight or the ring's end is fewer than
    /// eight entries on (or the first title was not taken): `out` full, or
    /// the rest one session at a time.
    Bound,
    /// A next title (its count, host order, and first counter read) not of
    /// one array: for the general steps.
    Other(u32, u16),
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

/// Whether `op_own` is a [`plain`] CQE of CQE opcode `opcode`, for an
/// opcode [`plain`] accepts (that of a [`Fused`] plan): the opcode and
/// format bit 3 (format 0 or 1) in one compare; bits 2–0 are not
/// compared, as in [`plain`].
#[inline(always)]
const fn plain_of(op_own: u8, opcode: u8) -> bool {
    // (Format bit 3 is `FORMAT_INLINE64`'s bit.)
    op_own & (OPCODE_MASK | FORMAT_INLINE64) == opcode << OPCODE_MASK.trailing_zeros()
}

/// Marks the path that calls it as the one to pay for the code around it
/// (the branch hint of hashbrown's `cold`; `core::hint::cold_path` needs
/// Rust 1.95, above the crate's MSRV): the register allocator then puts
/// its spills and reloads on that path rather than on the block loops
/// it joins. Used on the title paths the burst loops gained, where it
/// measurably lowers the instruction counts (even where the path is the
/// usual one, as for sessions of a few minis); it changes no result.
#[cold]
#[inline(always)]
fn rare() {}

/// Whether `op_own` is an owned compressed CQE (a session title) in a
/// pass of parity `phase`: [`ODD`] in [`CLASSES`] (on any RQ: a compressed
/// format is never [`plain`]) and of format [`FORMAT_COMPRESSED`], without
/// the table (PRM-FACTS §9.2: owned iff the opcode is not INVALID and the
/// owner bit equals the parity).
#[inline(always)]
const fn compressed_title(op_own: u8, phase: bool) -> bool {
    (op_own ^ phase as u8) & (FORMAT_MASK | 1) == FORMAT_COMPRESSED
        && op_own >> 4 != CqeOpcode::Invalid.raw()
}

// `compressed_title` is `CLASSES`' `ODD` of format `FORMAT_COMPRESSED`,
// for every byte, parity and RQ kind (checked at compile time).
const _: () = {
    let mut s = 0;
    while s < 2 {
        let mut phase = 0;
        while phase < 2 {
            let t = classes(plain_limit(s == 1), phase);
            let mut b = 0;
            while b < 256 {
                let op_own = b as u8;
                let odd = t[b] == ODD && op_own & FORMAT_MASK == FORMAT_COMPRESSED;
                assert!(compressed_title(op_own, phase == 1) == odd);
                b += 1;
            }
            phase += 1;
        }
        s += 1;
    }
};

/// Classes of a basic-layout ownership byte ([`CLASSES`]).
const NOT_OWNED: u8 = 0;
/// Owned and [`plain`].
pub(super) const PLAIN: u8 = 1;
/// Owned, not plain: decoded by the general steps.
pub(super) const ODD: u8 = 2;

/// The class of every `op_own` value for a pass of parity `phase`, when
/// opcodes below `limit` are plain (PRM-FACTS §9.2: owned iff the opcode
/// is not INVALID and the owner bit equals the parity).
const fn classes(limit: u8, phase: u8) -> [u8; 256] {
    let mut t = [NOT_OWNED; 256];
    let mut b = 0;
    while b < 256 {
        let op_own = b as u8;
        t[b] = if plain(op_own ^ phase, limit) {
            PLAIN
        } else if op_own >> 4 != CqeOpcode::Invalid.raw() && op_own & 1 == phase {
            ODD
        } else {
            NOT_OWNED
        };
        b += 1;
    }
    t
}

/// Opcodes decoded inline: REQ and the four successful responder opcodes;
/// REQ only on a striding RQ (strides, fillers).
const fn plain_limit(striding_rq: bool) -> u8 {
    if striding_rq {
        OP_REQ + 1
    } else {
        OP_RESP_SEND_INV + 1
    }
}

/// `CLASSES[striding_rq][phase][op_own]`: step 1's whole decision in one
/// load (1 KiB, read-only).
pub(super) static CLASSES: [[[u8; 256]; 2]; 2] = [
    [
        classes(plain_limit(false), 0),
        classes(plain_limit(false), 1),
    ],
    [classes(plain_limit(true), 0), classes(plain_limit(true), 1)],
];

impl Cq {
    /// DPDK-style burst: fills `out` with up to `out.len()` completions as
    /// small `Copy` values and writes the doorbell record once if anything
    /// was consumed. Returns the count; entries of `out` past it may have
    /// been overwritten (whole mini arrays are written at once).
    ///
    /// A [`CompletionSummary`] carries the wr_id (from the work queue's
    /// shadow through [`WorkQueues`], e.g. the send queue for requester
    /// completions; with [`super::RawCounters`] the reported
    /// `wqe_counter`), the byte count as reported (striding RQ: the
    /// [`crate::prm::MprqByteCnt`] word), the status, the CQE opcode and
    /// whether it came from a mini-CQE. Everything else is on the
    /// [`super::Completion`] the other APIs hand out.
    ///
    /// Equivalent to [`Self::poll`] with `out.len()` as the maximum and
    /// [`super::Completion::summary`] of each completion (the same
    /// completions, consumer index, slot invalidations, doorbell writes and
    /// errors), but with one from-device barrier per group of owned CQEs,
    /// and whole mini arrays per step (module documentation). The loop is
    /// specialised (once per call) for the compression layout, the CQE
    /// size and the CQ's [`UnzipPath`].
    // (Always inline: the dispatch is a few tests, and the out-of-line
    // pollers' results are two registers, their error kept in the CQ
    // (`Stashed`), mapped back here.)
    #[inline(always)]
    pub fn poll_burst<W: WorkQueues>(
        &mut self,
        wqs: &mut W,
        out: &mut [CompletionSummary],
    ) -> Result<usize, PollError> {
        let r = match self.cfg.compression {
            None => self.burst_scalar_stashed::<NO_ZIP, W>(wqs, out),
            Some((Layout::Basic, _)) => self.burst_zip::<BASIC, W>(wqs, out),
            Some((Layout::Enhanced, _)) => self.burst_zip::<ENHANCED, W>(wqs, out),
        };
        r.map_err(|Stashed| self.burst_error)
    }

    /// [`Self::poll_wc`] on a CQ without compression: the runs of plain
    /// CQEs (successful requester or, not on a striding RQ, responder
    /// ones, format 0 or 1, one `op_own` byte per run) from the consumer
    /// index, each entry's ownership byte read once, one barrier per run,
    /// each entry's fields read once (a requester's five, a responder's
    /// whole CQE), retired through its work queue and written as the `Wc`
    /// [`super::Completion::to_wc`] gives. Stops before any other entry
    /// (left to the general steps), when the CQ is empty or `out` is full.
    /// Returns the count and the error that stopped it, if any (its CQE
    /// consumed, as by the general steps).
    #[inline(always)]
    pub(super) fn wc_runs<const S: usize, W: WorkQueues>(
        &mut self,
        wqs: &mut W,
        out: &mut [Wc],
    ) -> (usize, Result<(), PollError>) {
        let Some(ring) = self.ring.sized::<S>() else {
            return (0, Ok(()));
        };
        let entries = self.size.entries();
        let classes = &CLASSES[usize::from(self.cfg.striding_rq)];
        let max = out.len();
        let mut n = 0;
        while n < max {
            let ci0 = self.ci;
            let run = ring.run(ci0, max - n);
            let class = &classes[usize::from(ci0 & entries != 0)];
            let Some((b0, k, stop)) = run.scan_same::<OP_OWN>(|b| class[usize::from(b)] == PLAIN)
            else {
                break;
            };
            if k == 0 {
                break;
            }
            // Every read of the run's bodies after its ownership bytes.
            barrier::from_device();
            let group = run.prefix(k);
            // The lookup error, set on the closures' error path only (the
            // loops test a unit error; see `burst_loop`).
            let mut failed = None;
            let decoded = if b0 >> 4 == OP_REQ {
                // (The opcode is `b0`'s; the row comes from the send opcode.)
                group.decode_plain::<FIELDS_QUEUE, _, ()>(&mut out[n..], |f, slot| {
                    let wq = WqRef {
                        qpn: f.sop_drop_qpn.qpn(),
                        srqn_uidx: f.srqn_uidx.srqn_uidx(),
                    };
                    match wqs.retire_send(wq, f.wqe_counter, WcStatus::Success) {
                        Ok(r) => {
                            let word = f.sop_drop_qpn.into_bits().get();
                            write_req_wc(slot, r, word, f.byte_cnt);
                            Ok(())
                        }
                        Err(e) => {
                            failed = Some(lookup_error(e, true, wq, f.wqe_counter));
                            Err(())
                        }
                    }
                })
            } else {
                Self::resp_wcs(ring, wqs, group, &mut out[n..]).map_err(|(i, e)| {
                    failed = Some(e);
                    (i, ())
                })
            };
            if let Err((i, ())) = decoded {
                // The failing CQE is consumed (as by `advance_in`).
                self.ci = ci0.wrapping_add(i as u32 + 1);
                // (`failed` is set whenever a closure fails; the fallback
                // is never taken.)
                return (n + i, Err(failed.unwrap_or(PollError::Broken)));
            }
            n += k;
            self.ci = ci0.wrapping_add(k as u32);
            if stop.is_some() {
                break;
            }
        }
        (n, Ok(()))
    }

    /// [`Self::poll`] on a CQ without compression: the runs of plain CQEs
    /// (as [`Self::wc_runs`] takes them, and on a striding RQ successful
    /// responder ones too) from the consumer index, each
    /// entry's ownership byte read once, one barrier per run, then per
    /// entry the general steps after the barrier: one copy into the
    /// current completion, the consumer index, the work queue's lookup,
    /// `f`. Stops before any other entry, when the CQ is empty or after
    /// `max` completions. Returns the count and the error that stopped it,
    /// if any (its CQE consumed, as by the general steps).
    #[inline(always)]
    pub(super) fn poll_runs<const S: usize, W: WorkQueues, F: FnMut(&Completion)>(
        &mut self,
        wqs: &mut W,
        max: usize,
        f: &mut F,
    ) -> (usize, Result<(), PollError>) {
        let Some(ring) = self.ring.sized::<S>() else {
            return (0, Ok(()));
        };
        let entries = self.size.entries();
        // Each entry is resolved by the general steps' resolution
        // (`resolve`), which takes striding completions and fillers too:
        // here successful responder CQEs are plain on a striding RQ as
        // well (the burst and `Wc` runs, which retire them as cyclic
        // receives, use the striding table).
        let classes = &CLASSES[0];
        let mut n = 0;
        while n < max {
            let ci0 = self.ci;
            let run = ring.run(ci0, max - n);
            let class = &classes[usize::from(ci0 & entries != 0)];
            let Some((_, k, stop)) = run.scan_same::<OP_OWN>(|b| class[usize::from(b)] == PLAIN)
            else {
                break;
            };
            if k == 0 {
                break;
            }
            // Every read of the run's bodies after its ownership bytes.
            barrier::from_device();
            for i in 0..k {
                let Some(entry) = run.entry(i) else {
                    break;
                };
                ring.ring().copy_cqe_to(entry, &mut self.cur.cqe);
                self.ci = ci0.wrapping_add(i as u32 + 1);
                self.cur.set_regular();
                match self.resolve::<W, false>(wqs) {
                    Ok(true) => {
                        f(&self.cur);
                        n += 1;
                    }
                    // A striding RQ's filler: consumed, not reported.
                    Ok(false) => {}
                    Err(e) => return (n, Err(e)),
                }
            }
            if stop.is_some() {
                break;
            }
        }
        (n, Ok(()))
    }

    /// [`Self::wc_runs`] on a run of successful responder CQEs: each
    /// copied once, retired through the receive queue, written as its
    /// `Wc`. Stops at the first lookup error, returning its index.
    #[inline(always)]
    fn resp_wcs<const S: usize, W: WorkQueues>(
        ring: SizedRing<S>,
        wqs: &mut W,
        group: Run<S>,
        out: &mut [Wc],
    ) -> Result<(), (usize, PollError)> {
        for (i, slot) in out.iter_mut().enumerate() {
            let Some(entry) = group.entry(i) else {
                break;
            };
            let cqe = ring.ring().copy_cqe(entry);
            let wq = WqRef {
                qpn: cqe.sop_drop_qpn.qpn(),
                srqn_uidx: cqe.srqn_uidx.srqn_uidx(),
            };
            let wqe_counter = cqe.wqe_counter.get();
            match wqs.retire_recv(wq, wqe_counter, WcStatus::Success) {
                Ok(r) => write_resp_wc(slot, r.wr_id, r.rx_csum_valid, &cqe),
                Err(e) => return Err((i, lookup_error(e, false, wq, wqe_counter))),
            }
        }
        Ok(())
    }

    /// [`Self::poll_burst`] on a compressed CQ: picks the mini writer of
    /// the CQ's [`UnzipPath`] (only used with
    /// [`WorkQueues::WR_ID_IS_WQE_COUNTER`]).
    #[inline(always)]
    fn burst_zip<const M: u8, W: WorkQueues>(
        &mut self,
        wqs: &mut W,
        out: &mut [CompletionSummary],
    ) -> Result<usize, Stashed> {
        if !W::WR_ID_IS_WQE_COUNTER {
            return self.burst_scalar_stashed::<M, W>(wqs, out);
        }
        match self.cfg.unzip {
            UnzipPath::Scalar => self.burst_scalar_stashed::<M, W>(wqs, out),
            #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
            UnzipPath::Sse41(t) => super::zip_x86::burst_sse41::<M, W>(t, self, wqs, out),
            #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
            UnzipPath::Avx2(t) => super::zip_x86::burst_avx2::<M, W>(t, self, wqs, out),
            #[cfg(target_arch = "aarch64")]
            UnzipPath::Neon(t) => super::zip_neon::burst_neon::<M, W>(t, self, wqs, out),
        }
    }

    /// [`Self::poll_burst`] with the scalar mini writer: out of line, so
    /// that each layout's loop gets the registers to itself.
    #[inline(never)]
    fn burst_scalar<const M: u8, W: WorkQueues>(
        &mut self,
        wqs: &mut W,
        out: &mut [CompletionSummary],
    ) -> Result<usize, PollError> {
        self.burst_sized::<M, W, _>(ScalarWriter, wqs, out)
    }

    /// [`Self::burst_scalar`], its error kept as the vector pollers keep
    /// theirs ([`Stashed`]; the scalar poller itself returns it: so its
    /// loops keep the registers they had).
    #[inline(always)]
    fn burst_scalar_stashed<const M: u8, W: WorkQueues>(
        &mut self,
        wqs: &mut W,
        out: &mut [CompletionSummary],
    ) -> Result<usize, Stashed> {
        self.burst_scalar::<M, W>(wqs, out)
            .map_err(|e| self.stash(e))
    }

    /// [`Self::burst_sized`] for the out-of-line pollers (one per writer),
    /// its error kept in `burst_error` ([`Stashed`]): a result of two
    /// words, returned in registers rather than through memory.
    #[cfg(any(
        all(target_arch = "x86_64", target_feature = "sse2"),
        target_arch = "aarch64"
    ))]
    #[inline(always)]
    pub(super) fn burst_stashed<const M: u8, W: WorkQueues, D: SummaryWriter>(
        &mut self,
        d: D,
        wqs: &mut W,
        out: &mut [CompletionSummary],
    ) -> Result<usize, Stashed> {
        self.burst_sized::<M, W, D>(d, wqs, out)
            .map_err(|e| self.stash(e))
    }

    /// Keeps `e` for [`Self::poll_burst`] ([`Stashed`]).
    #[inline(always)]
    fn stash(&mut self, e: PollError) -> Stashed {
        self.burst_error = e;
        Stashed
    }

    /// [`Self::burst_in`] on the ring of the CQ's slot size (64 or 128
    /// bytes), picked here, inside each writer's instantiation: the test
    /// that picks it is the one that makes the ring a [`SizedRing`], read
    /// once (the dispatch in [`Self::poll_burst`] does not look at the
    /// ring).
    #[inline(always)]
    pub(super) fn burst_sized<const M: u8, W: WorkQueues, D: SummaryWriter>(
        &mut self,
        d: D,
        wqs: &mut W,
        out: &mut [CompletionSummary],
    ) -> Result<usize, PollError> {
        if let Some(ring) = self.ring.sized::<64>() {
            self.burst_in::<M, 64, W, D>(ring, d, wqs, out)
        } else if let Some(ring) = self.ring.sized::<128>() {
            self.burst_in::<M, 128, W, D>(ring, d, wqs, out)
        } else {
            // (Never: a ring's slots are 64 or 128 bytes.)
            Ok(0)
        }
    }

    /// [`Self::poll_burst`] for layout `M`, slot size `S` (`ring`, the
    /// CQ's ring as [`Self::burst_sized`] found it) and mini writer `D`
    /// (inlined into each instantiation: the SIMD ones are compiled with
    /// their target feature). With wr_ids that are the reported
    /// `wqe_counter`, the basic layout starts in [`Self::burst_basic`] and
    /// the enhanced one (run writers) in [`Self::burst_enhanced`];
    /// everything else goes to [`Self::burst_loop`], out of line on a
    /// compressed CQ.
    #[inline(always)]
    pub(super) fn burst_in<const M: u8, const S: usize, W: WorkQueues, D: SummaryWriter>(
        &mut self,
        ring: SizedRing<S>,
        d: D,
        wqs: &mut W,
        out: &mut [CompletionSummary],
    ) -> Result<usize, PollError> {
        if self.broken {
            return Err(PollError::Broken);
        }
        if M == ENHANCED && W::WR_ID_IS_WQE_COUNTER && D::RUNS {
            return self.burst_enhanced::<S, W, D>(ring, d, wqs, out);
        }
        if M == BASIC && W::WR_ID_IS_WQE_COUNTER {
            return self.burst_basic::<S, W, D>(ring, d, wqs, out);
        }
        if M == NO_ZIP && W::WR_ID_IS_WQE_COUNTER {
            return self.burst_counters::<S, W, D>(ring, d, wqs, out);
        }
        let start = self.ci;
        let mut n = 0;
        let mut result = Ok(());
        if let Some(rest) = out.get_mut(n..).filter(|r| !r.is_empty()) {
            let (k, r) = if M == NO_ZIP || M == ENHANCED {
                self.burst_loop::<M, S, W, D>(ring, d, wqs, rest)
            } else {
                d.burst_loop::<M, S, W>(self, wqs, rest)
            };
            n += k;
            result = r;
        }
        // As `poll_in`: publish whatever was consumed, error or not.
        if n > 0 || self.ci != start {
            self.update_ci();
        }
        result.map(|()| n)
    }

    /// [`Self::burst_in`] on the basic layout with wr_ids that are the
    /// reported `wqe_counter`: an open session's arrays
    /// ([`Self::basic_resume`]) or, none open, the sessions from the title
    /// at the consumer index ([`Self::basic_start`]; a title of more than
    /// one array, out of line: [`Self::long_titles`]) first, then the
    /// general loop (out of line) for whatever they leave.
    #[inline(always)]
    fn burst_basic<const S: usize, W: WorkQueues, D: SummaryWriter>(
        &mut self,
        ring: SizedRing<S>,
        d: D,
        wqs: &mut W,
        out: &mut [CompletionSummary],
    ) -> Result<usize, PollError> {
        let start = self.ci;
        let mut n = 0;
        let mut result = Ok(());
        if self.session.is_some() {
            n = if D::RUNS {
                self.basic_resume::<S, D>(ring, d, out)
            } else {
                self.basic_arrays::<S, D>(ring, d, out)
            };
            if n > 0 && n == out.len() {
                // `out` full (the usual resume): published at once.
                self.update_ci();
                return Ok(n);
            }
        } else if !out.is_empty() {
            let long;
            (n, result, long) = self.basic_start::<S, W, D>(ring, d, out);
            if let Some(t) = long {
                rare();
                (n, result) = d.long_titles::<S, W>(self, t.op_own, t.copy, out);
                if n == out.len() && result.is_ok() {
                    // `out` full (the usual call that opens a long
                    // session): published at once.
                    self.update_ci();
                    return Ok(n);
                }
            } else if n == out.len() {
                // `out` full (the usual call in a stream of short
                // sessions): published at once. (`result` is `Ok`: the
                // title steps stop with an error only when opening a
                // session, with room left in `out`.)
                self.update_ci();
                return Ok(n);
            }
        }
        if n < out.len() && result.is_ok() {
            let (k, r) = d.burst_loop::<BASIC, S, W>(self, wqs, &mut out[n..]);
            n += k;
            result = r;
        }
        // As `poll_in`: publish whatever was consumed, error or not.
        if n > 0 || self.ci != start {
            self.update_ci();
        }
        result.map(|()| n)
    }

    /// [`Self::burst_in`] on the enhanced layout with a run writer and
    /// wr_ids that are the reported `wqe_counter`: the resume of a
    /// compressed stream ([`Self::enhanced_resume`]) inline, anything it
    /// leaves to the general loop out of line (compiled with the writer's
    /// target feature).
    #[inline(always)]
    fn burst_enhanced<const S: usize, W: WorkQueues, D: SummaryWriter>(
        &mut self,
        ring: SizedRing<S>,
        d: D,
        wqs: &mut W,
        out: &mut [CompletionSummary],
    ) -> Result<usize, PollError> {
        // (The resume moves the consumer index only past what it hands
        // out: with `n` = 0 it has not moved.)
        let (mut n, pending, more) = self.enhanced_resume::<S, D>(ring, d, out);
        if let Some(rest) = out.get_mut(n..).filter(|r| more && !r.is_empty()) {
            let start = self.ci;
            let (k, result) = d.enhanced_loop::<S, W>(self, wqs, rest, pending);
            n += k;
            // As `poll_in`: publish whatever was consumed, error or not.
            if n > 0 || self.ci != start {
                self.update_ci();
            }
            return result.map(|()| n);
        }
        if n > 0 {
            self.update_ci();
        }
        Ok(n)
    }

    /// Basic layout, run writer: the call that resumes an open session in
    /// the middle of its arrays (the usual one while a long session is in
    /// progress): its whole arrays from the next one on, while `out` has
    /// room for eight and up to the ring's end, straight into
    /// [`SummaryWriter::resume_arrays`], without the first-array,
    /// wrap and last-array steps of [`Self::session_arrays`] (the general
    /// loop takes whatever is left). Returns the number of completions
    /// written.
    #[inline(always)]
    fn basic_resume<const S: usize, D: SummaryWriter>(
        &mut self,
        ring: SizedRing<S>,
        d: D,
        out: &mut [CompletionSummary],
    ) -> usize {
        const A: u32 = MINI_CQE_ARRAY_SIZE as u32;
        let Some(s) = self.session.as_mut() else {
            return 0;
        };
        let Some(plan) = s.fused else {
            return 0;
        };
        // (`next` = 0: the first array, at slot offset 1, is the loop's.)
        if s.next == 0 || s.next % A != 0 {
            return 0;
        }
        let room = (out.len() / MINI_CQE_ARRAY_SIZE) as u32;
        let whole = ((s.count - s.next) / A).min(room);
        // Array `k` at slot offset `8k`, covering 8 slots; up to the
        // ring's end: a pointer walk, no index masking.
        let arrays = ring.arrays(s.base.wrapping_add(s.next), whole as usize);
        if arrays.len() == 0 {
            return 0;
        }
        let running = self.running;
        let k = d.resume_arrays(&d.prepare(plan), plan, arrays, running, out) as u32;
        self.running = plan.end_running(running, k * A);
        s.next += k * A;
        if s.next == s.count {
            self.ci = s.base.wrapping_add(s.count);
            self.session = None;
        }
        (k * A) as usize
    }

    /// [`Self::burst_loop`] on the ring of slot size `S`, for the writers'
    /// out-of-line calls ([`SummaryWriter::burst_loop`]): the ring is
    /// looked up here rather than passed (as an argument it would be
    /// copied to the stack, and every use of it in the caller read from
    /// there).
    #[inline(always)]
    pub(super) fn burst_loop_out<const M: u8, const S: usize, W: WorkQueues, D: SummaryWriter>(
        &mut self,
        d: D,
        wqs: &mut W,
        out: &mut [CompletionSummary],
    ) -> (usize, Result<(), PollError>) {
        // (`burst_sized` picked `S` from the ring: never `None`.)
        let Some(ring) = self.ring.sized::<S>() else {
            return (0, Ok(()));
        };
        self.burst_loop::<M, S, W, D>(ring, d, wqs, out)
    }

    /// [`Self::enhanced_loop`] on the CQ's ring of slot size `S`, looked up
    /// here: the entry of the writers' out-of-line enhanced loops
    /// ([`SummaryWriter::enhanced_loop`]; a ring passed as an argument
    /// lives on the caller's stack, and so does every use of it there).
    #[inline(always)]
    pub(super) fn enhanced_loop_out<const S: usize, W: WorkQueues, D: SummaryWriter>(
        &mut self,
        d: D,
        wqs: &mut W,
        out: &mut [CompletionSummary],
        pending: Option<CqeCopy>,
    ) -> (usize, Result<(), PollError>) {
        // (`burst_sized` picked `S` from the ring: never `None`.)
        let Some(ring) = self.ring.sized::<S>() else {
            return (0, Ok(()));
        };
        self.enhanced_loop::<S, W, D>(ring, d, wqs, out, pending)
    }

    /// Fills `out`; returns the count and why it stopped early, if it did
    /// with an error.
    #[inline(always)]
    pub(super) fn burst_loop<const M: u8, const S: usize, W: WorkQueues, D: SummaryWriter>(
        &mut self,
        ring: SizedRing<S>,
        d: D,
        wqs: &mut W,
        out: &mut [CompletionSummary],
    ) -> (usize, Result<(), PollError>) {
        if M == ENHANCED {
            return self.enhanced_loop::<S, W, D>(ring, d, wqs, out, None);
        }
        let max = out.len();
        let mut n = 0;
        // The ring geometry, in registers for the burst (a local copy is
        // not reloaded after a barrier).
        let size = self.size;
        let entries = size.entries();
        let classes = &CLASSES[usize::from(self.cfg.striding_rq)];
        while n < max {
            if M != NO_ZIP && self.session.is_some() {
                let (k, r) = self.burst_session::<M, S, W, D>(ring, d, wqs, &mut out[n..]);
                n += k;
                match r {
                    Ok(true) => continue,
                    Ok(false) => break,
                    Err(e) => return (n, Err(e)),
                }
            }
            let ci0 = self.ci;
            let run = ring.run(ci0, max - n);
            // Step 1: the ownership byte of each entry, once, classified
            // by one table lookup (`ci & entries` is the pass parity). While
            // the bytes equal the first one (the usual stream: one opcode,
            // one owner phase) an equality test does; a group of equal bytes
            // is then decoded with its opcode fixed.
            let class = &classes[usize::from(ci0 & entries != 0)];
            let Some((b0, k, stop)) = run.scan_same::<OP_OWN>(|b| class[usize::from(b)] == PLAIN)
            else {
                break;
            };
            let (plain_n, stop) = match stop {
                Some(b) if k > 0 && class[usize::from(b)] == PLAIN => {
                    // Plain entries with other bytes follow: out of line.
                    match Self::mixed_group::<S, W>(wqs, &mut out[n..], run, k, class) {
                        Ok(r) => r,
                        Err((i, e)) => {
                            // The failing CQE is consumed (as by `advance_in`).
                            self.ci = ci0.wrapping_add(i as u32 + 1);
                            return (n + i, Err(e));
                        }
                    }
                }
                stop => {
                    if k == 0 && !matches!(stop, Some(b) if class[usize::from(b)] == ODD) {
                        break;
                    }
                    // Step 2: every read of the group's bodies after its
                    // ownership bytes.
                    barrier::from_device();
                    // Step 3: the plain entries' fields, copied once,
                    // decoded; every entry's opcode is `b0`'s.
                    let group = run.prefix(k);
                    // A lookup's error, set by the closures below on their
                    // (cold) error path only: the loop tests a unit error,
                    // not a whole `PollError` carried through every entry.
                    let mut failed = None;
                    let decoded = if k == 0 {
                        // (The odd entry alone: a title, the stream's
                        // usual group of short sessions.)
                        Ok(())
                    } else if W::WR_ID_IS_WQE_COUNTER {
                        counter_group(group, b0, &mut out[n..]);
                        Ok(())
                    } else if b0 >> 4 == OP_REQ {
                        // (One opcode per group, `b0`'s: the send queue's
                        // lookup alone in the loop, or the receive queue's;
                        // the summaries' upper half from `b0`, built once.)
                        let hi = regular_high_word(0, b0);
                        group.decode_plain::<FIELDS_QUEUE, _, ()>(&mut out[n..], |f, slot| {
                            let wr_id = resolve_plain_as::<W, true>(wqs, &f)
                                .map_err(|e| failed = Some(e))?;
                            store_summary(slot, wr_id, hi | u64::from(f.byte_cnt));
                            Ok(())
                        })
                    } else {
                        let hi = regular_high_word(0, b0);
                        group.decode_plain::<FIELDS_QUEUE, _, ()>(&mut out[n..], |f, slot| {
                            let wr_id = resolve_plain_as::<W, false>(wqs, &f)
                                .map_err(|e| failed = Some(e))?;
                            store_summary(slot, wr_id, hi | u64::from(f.byte_cnt));
                            Ok(())
                        })
                    };
                    if let Err((i, ())) = decoded {
                        // The failing CQE is consumed (as by `advance_in`).
                        self.ci = ci0.wrapping_add(i as u32 + 1);
                        // (`failed` is set whenever a closure fails; the
                        // fallback is never taken.)
                        return (n + i, Err(failed.unwrap_or(PollError::Broken)));
                    }
                    (k, stop)
                }
            };
            let odd = matches!(stop, Some(b) if class[usize::from(b)] == ODD);
            n += plain_n;
            self.ci = ci0.wrapping_add(plain_n as u32);
            if !odd {
                if stop.is_some() {
                    // Not owned: the CQ is empty.
                    break;
                }
                // The run ended (ring's end or `out` full).
                continue;
            }
            // The entry that ended the group: owned (its byte was read
            // before the barrier), the general steps.
            let Some(entry) = run.entry(plain_n) else {
                break;
            };
            let Some(slot) = out.get_mut(n) else {
                break;
            };
            if let Some(b) = stop.filter(|b| M == BASIC && b & FORMAT_MASK == FORMAT_COMPRESSED) {
                // A session's title (the stream's usual odd entry; owned:
                // its byte was read before the barrier), copied once.
                let t = TitleCopy {
                    op_own: b,
                    copy: ring.ring().copy_out(entry, D::WIDE_COPY),
                };
                let (k, r) = self.basic_titles::<M, S, W, D, true>(ring, d, t, &mut out[n..]);
                n += k;
                if let Err(e) = r {
                    return (n, Err(e));
                }
                continue;
            }
            match self.take_odd::<M, W>(wqs, entry, slot) {
                Ok(reported) => n += usize::from(reported),
                Err(e) => return (n, Err(e)),
            }
        }
        (n, Ok(()))
    }

    /// [`Self::burst_in`] on a CQ without compression, wr_id = the reported
    /// `wqe_counter` (the DPDK-style receive path): the first group of plain
    /// entries of one ownership byte from the consumer index (the usual
    /// call: it fills `out` or empties the CQ), decoded here with the
    /// set-up it needs and nothing else; whatever follows it (an entry of
    /// another kind or byte, the ring's end) in [`Self::burst_loop`], out
    /// of line (the writer's [`SummaryWriter::burst_loop`], which reads
    /// the ownership byte of the entry that ended the group again: owned
    /// once, it stays owned until the consumer index passes it). The same
    /// completions, consumer index, doorbell writes and errors as the loop
    /// alone (`burst_matches_poll_on_random_streams`); about 40
    /// instructions less per call than the loop's set-up.
    #[inline(always)]
    fn burst_counters<const S: usize, W: WorkQueues, D: SummaryWriter>(
        &mut self,
        ring: SizedRing<S>,
        d: D,
        wqs: &mut W,
        out: &mut [CompletionSummary],
    ) -> Result<usize, PollError> {
        let start = self.ci;
        let max = out.len();
        let run = ring.run(start, max);
        let class = &CLASSES[usize::from(self.cfg.striding_rq)]
            [usize::from(start & self.size.entries() != 0)];
        // Steps 1 to 3 of `burst_loop`, for its first group.
        let Some((b0, k, stop)) = run.scan_same::<OP_OWN>(|b| class[usize::from(b)] == PLAIN)
        else {
            return Ok(0);
        };
        if k > 0 {
            // Every read of the group's bodies after its ownership bytes.
            barrier::from_device();
            counter_group(run.prefix(k), b0, out);
            self.ci = start.wrapping_add(k as u32);
        }
        let mut n = k;
        let done = match stop {
            // `out` is full (a run cut by the ring's end goes on).
            None => n == max,
            // The CQ is empty.
            Some(b) => class[usize::from(b)] == NOT_OWNED,
        };
        let mut result = Ok(());
        if !done {
            let (k, r) = d.burst_loop::<NO_ZIP, S, W>(self, wqs, &mut out[n..]);
            n += k;
            result = r;
        }
        // As `poll_in`: publish whatever was consumed, error or not.
        if self.ci != start {
            self.update_ci();
        }
        result.map(|()| n)
    }

    /// Basic layout, wr_id = `wqe_counter`, no session open, `out` not
    /// empty: if the entry at the consumer index is an owned session title
    /// (its ownership byte once, classified as in step 1, the barrier, one
    /// copy), the title steps of [`Self::basic_titles`] from it at once,
    /// without the group scan and the set-up of [`Self::burst_loop`] (not
    /// called at all when the sessions fill `out`, the usual call while a
    /// stream of sessions is in progress). A title of more than one array
    /// is handed back untouched past its copy (with its ownership byte),
    /// for [`Self::long_titles`]. Returns the count, the error that
    /// stopped it, if any, and that title.
    #[inline(always)]
    fn basic_start<const S: usize, W: WorkQueues, D: SummaryWriter>(
        &mut self,
        ring: SizedRing<S>,
        d: D,
        out: &mut [CompletionSummary],
    ) -> (usize, Result<(), PollError>, Option<TitleCopy>) {
        let ci = self.ci;
        let e = ring.entry(ci);
        // Step 1: the ownership byte (PRM-FACTS §9.2), once.
        let b = ring.ring().read_op_own(e);
        if !compressed_title(b, ci & self.size.entries() != 0) {
            return (0, Ok(()), None);
        }
        // Step 2: the copy reads the body the byte just published.
        barrier::from_device();
        // Step 3: one copy.
        let copy = ring.ring().copy_out(e, D::WIDE_COPY);
        if !one_array(copy) {
            // A session of more arrays: the caller's, out of line
            // (`long_titles`).
            return (0, Ok(()), Some(TitleCopy { op_own: b, copy }));
        }
        // (Here, not through `basic_titles`: the loop of its other steps
        // stays out of this path.)
        let mut copy = copy;
        let (n, left) = self.short_sessions::<S, D>(ring, d, b, &mut copy, out);
        if !left {
            return (n, Ok(()), None);
        }
        rare();
        let t = TitleCopy { op_own: b, copy };
        let (k, r) = self.basic_titles::<BASIC, S, W, D, false>(ring, d, t, &mut out[n..]);
        (n + k, r, None)
    }

    /// [`Self::basic_start`]'s title `title` (its ownership byte `b0`)
    /// when it is not a session of one array: the sessions of
    /// [`Self::long_sessions`], then the title steps of
    /// [`Self::basic_titles`] for a title they do not take. Out of line
    /// (through [`SummaryWriter::long_titles`], with the writer's target
    /// feature), so that the short sessions' path keeps its registers.
    /// Returns the count and the error that stopped it, if any.
    #[inline(always)]
    pub(super) fn long_titles<const S: usize, W: WorkQueues, D: SummaryWriter>(
        &mut self,
        d: D,
        b0: u8,
        title: CqeCopy,
        out: &mut [CompletionSummary],
    ) -> (usize, Result<(), PollError>) {
        // (`burst_sized` picked `S` from the ring: never `None`.)
        let Some(ring) = self.ring.sized::<S>() else {
            return (0, Ok(()));
        };
        let (n, left) = self.long_sessions::<S, D>(ring, d, b0, title, out);
        let Some(copy) = left else {
            return (n, Ok(()));
        };
        rare();
        let t = TitleCopy { op_own: b0, copy };
        let rest = out.get_mut(n..).unwrap_or_default();
        let (k, r) = self.basic_titles::<BASIC, S, W, D, false>(ring, d, t, rest);
        (n + k, r)
    }

    /// Basic layout: the session title `t` at the consumer index (owned,
    /// copied) and, each time a session is written whole, the next entry
    /// if it is a title too (its ownership byte once, classified; the
    /// barrier; one copy): with `SHORT`, sessions of one array in a loop
    /// of their own ([`Self::short_sessions`]; without, from
    /// [`Self::basic_start`], which ran it already: the general steps keep
    /// their registers); others opened from `cur` as `take_copied` does,
    /// their arrays written at once ([`Self::session_arrays`]; other work
    /// queues: left open). Returns the count and the error that stopped
    /// it, if any.
    #[inline(always)]
    fn basic_titles<
        const M: u8,
        const S: usize,
        W: WorkQueues,
        D: SummaryWriter,
        const SHORT: bool,
    >(
        &mut self,
        ring: SizedRing<S>,
        d: D,
        t: TitleCopy,
        out: &mut [CompletionSummary],
    ) -> (usize, Result<(), PollError>) {
        let max = out.len();
        let entries = self.size.entries();
        let classes = &CLASSES[usize::from(self.cfg.striding_rq)];
        let TitleCopy {
            op_own: mut b,
            mut copy,
        } = t;
        let mut n = 0;
        loop {
            if SHORT && W::WR_ID_IS_WQE_COUNTER && one_array(copy) {
                let (k, left) = self.short_sessions::<S, D>(ring, d, b, &mut copy, &mut out[n..]);
                n += k;
                if !left {
                    break;
                }
            }
            // Into `cur`, the session opened (as `take_copied`).
            copy.store_to(&mut self.cur.cqe);
            match self.basic_session::<M>() {
                Ok(s) if W::WR_ID_IS_WQE_COUNTER => {
                    // Its arrays at once, the session in registers (stored
                    // only if it stays open).
                    n += self.session_arrays::<S, D>(ring, d, s, &mut out[n..]);
                }
                Ok(s) => {
                    self.session = Some(s);
                    break;
                }
                Err(e) => return (n, Err(e)),
            }
            if n < max && self.session.is_none() {
                rare();
                // The session done, the next entry (short sessions: the
                // next title) straight away: its ownership byte once,
                // classified; if a title, the barrier, then the same steps;
                // anything else is step 1's.
                let ci = self.ci;
                let next = ring.entry(ci);
                b = ring.ring().read_op_own(next);
                let class = &classes[usize::from(ci & entries != 0)];
                if class[usize::from(b)] == ODD && b & FORMAT_MASK == FORMAT_COMPRESSED {
                    // The copy reads the body the ownership byte just
                    // published: not before it (PRM-FACTS §9.2).
                    barrier::from_device();
                    copy = ring.ring().copy_out(next, D::WIDE_COPY);
                    continue;
                }
            }
            break;
        }
        (n, Ok(()))
    }

    /// Basic layout, wr_id = `wqe_counter`: the sessions of one mini
    /// array (two to eight minis: the title, the array at slot offset 1,
    /// its holes up to the next title), from the title at `self.ci`
    /// (`first`: its copy, its ownership byte `b0` read and classified a
    /// compressed title before the barrier), while `out` has room for
    /// eight and the next title's ownership byte is `b0` in the same pass
    /// (so owned, of the same opcode: the same plan, looked up once in
    /// `plans`). Each written whole as [`Self::session_arrays`] does, with
    /// no session stored: its title is not copied into `cur` (nothing
    /// reads it once the session is done; `batch_has_title` is cleared as
    /// when it opens). Of each next title only `byte_cnt` and
    /// `wqe_counter` are read after the barrier
    /// ([`super::mem::ShortRun::title`]: two loads where the whole copy is
    /// four vector loads and two extracts). While `out` has room for eight
    /// and the ring's end is eight entries on or more, the sessions go
    /// through a loop of one index and one bound for both (a session of
    /// `c` minis takes `c` entries and writes `c` summaries:
    /// [`super::mem::ShortRun`]), two sessions per turn (the last session's
    /// count and first counter change registers instead of being moved),
    /// each count kept as read (big-endian: a session of eight is one
    /// compare, no swap); the last sessions before the ring's end one at a
    /// time, each bound tested ([`super::mem::SessionWalk`]). Returns the
    /// count and whether the title at the new `self.ci` was read but is not
    /// such a session (more minis, a malformed count, no plan, its entries
    /// wrap the ring, less room): then `first` holds its whole copy for the
    /// general steps (the bytes not read yet read then,
    /// [`super::mem::SessionWalk::title_rest`]; `first` itself if it is
    /// that title). (A flag and the caller's copy rather than an
    /// `Option<CqeCopy>`: the usual `None` is then no store of a 64-byte
    /// value to the stack.)
    #[inline(always)]
    fn short_sessions<const S: usize, D: SummaryWriter>(
        &mut self,
        ring: SizedRing<S>,
        d: D,
        b0: u8,
        first: &mut CqeCopy,
        out: &mut [CompletionSummary],
    ) -> (usize, bool) {
        const A: usize = MINI_CQE_ARRAY_SIZE;
        let Some(plan) = self.plans[usize::from(b0 >> 4)].0 else {
            return (0, true);
        };
        let p = d.prepare(plan);
        // Up to the ring's end (one pass: `b0` means owned): a pointer
        // walk, no index masking.
        let mut walk = ring.sessions(self.ci);
        let title = first.to_cqe();
        let (mut count, mut start) = (title.byte_cnt.get(), title.wqe_counter.get());
        let total = out.len();
        // The sessions while `out` has room for eight and the ring's end
        // is eight entries on or more (a session of `c` minis takes `c`
        // entries and `c` summaries: one index and one bound for both), in
        // a loop of their own, the last session's count and first counter
        // in its registers.
        let mut fast = Stop::Bound;
        let mut i = 0;
        if let Some(mut run) = walk.short_run(out) {
            // (`count`, `c1`, `c2` as read: big-endian, until the loop is
            // over.)
            count = count.to_be();
            // The array at slot offset 1 (its slot and the holes up to the
            // next title invalidated: as the first array of
            // `session_arrays`), if one array (else `Stop::Bound` with no
            // session taken: the steps below).
            if let Some((array, dst)) = run.session(count, D::WIDE_COPY) {
                d.write(&p, array, start, dst);
                // The next title, if `out` and the ring have room for
                // eight more: its ownership byte once (`b0` in this pass is
                // an owned title of the same opcode: the same plan), the
                // barrier, its count and first counter; its session as the
                // first's, if of one array (`None`: not of one array;
                // `title` tested the room). Each break gives the last
                // session written (its count and first counter).
                macro_rules! next_session {
                    ($last_c:ident, $last_s:ident, $c:ident, $s:ident) => {
                        let ($c, $s) = match run.title(b0) {
                            Some(Some(t)) => t,
                            Some(None) => break (Stop::Done, $last_c, $last_s),
                            None => break (Stop::Bound, $last_c, $last_s),
                        };
                        let Some((array, dst)) = run.session($c, D::WIDE_COPY) else {
                            break (Stop::Other(u32::from_be($c), $s), $last_c, $last_s);
                        };
                        d.write(&p, array, $s, dst);
                    };
                }
                // (Two sessions per turn: the last one's count and counter
                // change registers without a move.)
                (fast, count, start) = loop {
                    next_session!(count, start, c1, s1);
                    next_session!(c1, s1, c2, s2);
                    (count, start) = (c2, s2);
                };
            }
            count = u32::from_be(count);
            i = run.taken();
        }
        // The last session written (its first counter and count): the
        // running counter after it, once the loops are over.
        let mut last = (i > 0).then_some((start, count));
        // (`first` is still the first title's copy until one of the rare
        // branches below puts another title's there.)
        let leave = |first: &mut CqeCopy, title: Option<CqeCopy>| match title {
            Some(t) => {
                *first = t;
                true
            }
            None => false,
        };
        let (n, left) = match fast {
            Stop::Done => (i, false),
            Stop::Other(c, s) => {
                rare();
                // (Only its two fields were read: the rest now.)
                walk.skip(i);
                (i, leave(first, walk.title_rest(b0, c, s)))
            }
            Stop::Bound if i > 0 && i + A > total => (i, false),
            Stop::Bound => {
                // The first title not taken above, or the ring's end less
                // than eight entries on: one session at a time, each bound
                // tested.
                rare();
                walk.skip(i);
                let mut rest = out.get_mut(i..).unwrap_or_default();
                let rest0 = rest.len();
                let mut next = if i > 0 {
                    // (Room for eight: the test above.)
                    walk.next_title_fields(b0)
                } else {
                    Some((count, start))
                };
                let left = loop {
                    let Some((c, s)) = next else {
                        break false;
                    };
                    let Some(dst) = rest.first_chunk_mut::<A>() else {
                        break last.is_none() || leave(first, walk.title_rest(b0, c, s));
                    };
                    // The array at slot offset 1 (its slot and the holes up
                    // to the next title invalidated: as the first array of
                    // `session_arrays`), if one array and before the
                    // ring's end.
                    let Some(array) = walk.take(c, D::WIDE_COPY) else {
                        // (After the first title, only its two fields were
                        // read: the rest now. Never `None` there: the walk
                        // is on it.)
                        break last.is_none() || leave(first, walk.title_rest(b0, c, s));
                    };
                    d.write(&p, array, s, dst);
                    last = Some((s, c));
                    // (`c` is at most 8: `take` took it.)
                    rest = rest.get_mut(c as usize..).unwrap_or_default();
                    if rest.len() < A {
                        break false;
                    }
                    next = walk.next_title_fields(b0);
                };
                (i + rest0 - rest.len(), left)
            }
        };
        if let Some((start, count)) = last {
            // (Entries taken = summaries written.)
            self.ci = self.ci.wrapping_add(n as u32);
            self.running = plan.end_running(start, count);
            self.batch_has_title = false;
        }
        (n, left)
    }

    /// Basic layout, wr_id = `wqe_counter`: the sessions from the title at
    /// `self.ci` (`title`: its copy, its ownership byte `b0` read and
    /// classified a compressed title before the barrier), while `out` has
    /// room for eight and the next title's ownership byte is `b0` in the
    /// same pass (so owned, of the same opcode: the same plan, looked up
    /// once in `plans`), each up to the ring's end (a pointer walk, no
    /// index masking). A session of more than one mini array is written
    /// as far as `out` has room for its arrays: its first array (slot
    /// offset 1, its slot and six holes invalidated), its whole arrays in
    /// one run of the writer, its last partial array, with the writes and
    /// invalidations of [`Self::session_arrays`]; a session of one array
    /// as in [`Self::short_sessions`]. No session is stored and no title
    /// copied into `cur` unless the call ends inside a session (then it is
    /// stored as [`Self::basic_titles`] leaves it). Out of line (through
    /// [`SummaryWriter::long_titles`], with the writer's target feature),
    /// so that the short sessions' loop of [`Self::basic_start`] keeps its
    /// registers. Returns the count and, if the title at the new `self.ci`
    /// was copied but is not such a session (a malformed count, no plan,
    /// its entries wrap the ring, less room), its copy for the general
    /// steps.
    #[inline(always)]
    pub(super) fn long_sessions<const S: usize, D: SummaryWriter>(
        &mut self,
        ring: SizedRing<S>,
        d: D,
        b0: u8,
        title: CqeCopy,
        out: &mut [CompletionSummary],
    ) -> (usize, Option<CqeCopy>) {
        const A: usize = MINI_CQE_ARRAY_SIZE;
        let Some(plan) = self.plans[usize::from(b0 >> 4)].0 else {
            return (0, Some(title));
        };
        let p = d.prepare(plan);
        // Up to the ring's end (one pass: `b0` means owned).
        let mut walk = ring.sessions(self.ci);
        let mut copy = title;
        let mut running = self.running;
        let mut n = 0;
        let left = loop {
            let Some(dst) = out.get_mut(n..).and_then(|o| o.first_chunk_mut::<A>()) else {
                break Some(copy);
            };
            let cqe = copy.to_cqe();
            let count = cqe.byte_cnt.get();
            let start = cqe.wqe_counter.get();
            if let Some(arrays) = walk.take_arrays(count) {
                // More arrays, all before the ring's end: the first one.
                d.write(&p, arrays.first(D::WIDE_COPY), start, dst);
                running = plan.end_running(start, A as u32);
                // Its whole arrays while `out` has room for eight.
                let rest = out.get_mut(n + A..).unwrap_or_default();
                let whole = arrays.whole(rest.len() / A);
                let k = d.resume_arrays(&p, plan, whole, running, rest);
                running = plan.end_running(running, (k * A) as u32);
                let mut next = A + k * A;
                let last = arrays.last_len();
                if next == count as usize - last && last > 0 {
                    // The last, partial array, if there is room for eight.
                    if let Some(dst) = out
                        .get_mut(n + next..)
                        .and_then(|o| o.first_chunk_mut::<A>())
                    {
                        if let Some(array) = arrays.last(D::WIDE_COPY) {
                            d.write(&p, array, running, dst);
                            running = plan.end_running(running, last as u32);
                            next = count as usize;
                        }
                    }
                }
                if next < count as usize {
                    // The call ends inside the session: stored (as
                    // `basic_titles` leaves it), its title into `cur`.
                    self.ci = self.ci.wrapping_add(n as u32);
                    self.store_session(copy, plan, next as u32, running);
                    return (n + next, None);
                }
            } else if let Some(array) = walk.take(count, D::WIDE_COPY) {
                // One array (as in `short_sessions`).
                d.write(&p, array, start, dst);
                running = plan.end_running(start, count);
            } else {
                break Some(copy);
            }
            n += count as usize;
            // The next title, if `out` has room for eight more: its
            // ownership byte once (`b0` in this pass is an owned title of
            // the same opcode: the same plan), the barrier, one copy.
            if out.len() - n < A {
                break None;
            }
            let Some(c) = walk.next_title(b0, D::WIDE_COPY) else {
                break None;
            };
            copy = c;
        };
        if n > 0 {
            self.ci = self.ci.wrapping_add(n as u32);
            self.running = running;
            self.batch_has_title = false;
        }
        (n, left)
    }

    /// [`Self::long_sessions`] ending inside the session titled by `title`
    /// (at `self.ci`, its plan `plan` from `plans`): opened as
    /// `basic_session` opens it, with its first `next` minis written and the
    /// running counter `running` after them.
    #[inline(always)]
    fn store_session(&mut self, title: CqeCopy, plan: Fused, next: u32, running: u16) {
        title.store_to(&mut self.cur.cqe);
        let cqe = &self.cur.cqe;
        // (A plan in `plans` means a compressed CQ: the format is there.)
        let format = self.cfg.compression.map_or(MiniCqeFormat::Hash, |(_, f)| f);
        let unzip = Unzip::new(cqe, self.mini_view(format));
        self.running = running;
        self.batch_has_title = false;
        self.session = Some(Session {
            base: self.ci,
            count: cqe.byte_cnt.get(),
            next,
            unzip,
            fused: Some(plan),
            carried: false,
        });
    }

    /// Steps 1 to 3 for a group whose first `k` entries share one
    /// ownership byte and whose entry `k` (read) is plain with another: the
    /// rest of the group's bytes classified one by one, one barrier, each
    /// entry's opcode from its copy. Returns the group's length and the
    /// byte that ended it, or the index of a failing entry and its error.
    #[inline(never)]
    fn mixed_group<const S: usize, W: WorkQueues>(
        wqs: &mut W,
        out: &mut [CompletionSummary],
        run: Run<S>,
        k: usize,
        class: &[u8; 256],
    ) -> Result<(usize, Option<u8>), (usize, PollError)> {
        // Step 1, continued after entry `k`.
        let (plain_n, stop) = run.scan_from::<OP_OWN>(k + 1, |b| class[usize::from(b)] == PLAIN);
        // Step 2: the bodies of the entries just scanned are read after
        // their ownership bytes.
        barrier::from_device();
        // Step 3.
        let group = run.prefix(plain_n);
        if W::WR_ID_IS_WQE_COUNTER {
            group.decode_plain::<FIELDS_OPCODE, _, PollError>(out, |f, slot| {
                let hi = regular_high_word(f.byte_cnt, f.op_own);
                store_summary(slot, u64::from(f.wqe_counter), hi);
                Ok(())
            })?;
        } else {
            group.decode_plain::<FIELDS_IDS, _, _>(out, |f, slot| {
                let wr_id = resolve_plain(wqs, &f)?;
                store_summary(slot, wr_id, regular_high_word(f.byte_cnt, f.op_own));
                Ok(())
            })?;
        }
        Ok((plain_n, stop))
    }

    /// Basic layout (or none): the owned entry that ended a group of plain
    /// ones, copied whole and decoded by the general steps; its summary
    /// into `slot` if it is reported (`Ok(true)`).
    #[inline(never)]
    fn take_odd<const M: u8, W: WorkQueues>(
        &mut self,
        wqs: &mut W,
        entry: super::Entry,
        slot: &mut CompletionSummary,
    ) -> Result<bool, PollError> {
        let cqe = self.ring.copy_cqe(entry);
        Ok(match self.take_copied::<M, W>(wqs, cqe, self.ci)? {
            Taken::Reported => {
                *slot = self.cur.summary();
                true
            }
            Taken::Skipped | Taken::Session | Taken::Stop => false,
        })
    }

    /// Enhanced layout (PRM-FACTS §10.5), entry by entry: ownership by the
    /// validity byte, read for a group of entries at a time with one
    /// from-device barrier per group; each entry copied once, whole, and
    /// decoded from the copy: plain CQEs inline (the last one kept as the
    /// title of following minis), compressed CQEs written whole when they
    /// can be (else a session of the general poller), anything else by
    /// the general steps.
    #[inline(always)]
    pub(super) fn enhanced_loop<const S: usize, W: WorkQueues, D: SummaryWriter>(
        &mut self,
        ring: SizedRing<S>,
        d: D,
        wqs: &mut W,
        out: &mut [CompletionSummary],
        pending: Option<CqeCopy>,
    ) -> (usize, Result<(), PollError>) {
        let max = out.len();
        let size = self.size;
        let limit = plain_limit(self.cfg.striding_rq);
        let mut n = 0;
        // Entries from `self.ci` on whose validity bytes were read (and
        // matched) before the last barrier.
        let mut owned = usize::from(pending.is_some());
        // The entry at `self.ci`, already copied (owned: counted in
        // `owned`), when a block run ended on it.
        let mut pending = pending;
        // The last plain CQE reported: the title once committed.
        let mut title: Option<CqeCopy> = None;
        // The whole-block plan of the committed title and the writer's
        // constants for it (`None` inside: not known yet).
        let mut plan: Option<Option<BlockPlan<D>>> = None;
        let result = loop {
            if let Some(s) = self.session {
                let (k, r) = if s.carried && W::WR_ID_IS_WQE_COUNTER {
                    (self.carry_out(s, &mut out[n..]), Ok(true))
                } else {
                    if s.carried {
                        // (Summaries of another work queue's mapping.)
                        self.decode_carried();
                    }
                    self.session_lanes::<ENHANCED, W>(wqs, &mut out[n..])
                };
                n += k;
                match r {
                    Ok(true) => {}
                    Ok(false) => break Ok(()),
                    Err(e) => break Err(e),
                }
                if n >= max {
                    break Ok(());
                }
                continue;
            }
            if n >= max {
                break Ok(());
            }
            let ci = self.ci;
            let copy = match pending.take() {
                Some(copy) => copy,
                None => {
                    if owned == 0 {
                        // Step 1: the validity bytes (PRM-FACTS §9.2) of up
                        // to the rest of the burst; the format is decoded
                        // from each copy.
                        let run = ring.run(ci, max - n);
                        let vic = size.iteration(ci);
                        owned = run.scan_from::<VALIDITY>(0, |v| v == vic).0;
                        if owned == 0 {
                            break Ok(());
                        }
                        // Step 2: every read of the group's bodies after
                        // them.
                        barrier::from_device();
                    }
                    // Step 3: one copy, decoded.
                    ring.ring().copy_out(ring.entry(ci), D::WIDE_COPY)
                }
            };
            let cqe = copy.to_cqe();
            let op_own = cqe.op_own.into_bits();
            // (The owner bit is not used in this layout.)
            if plain(op_own & !1, limit) {
                let f = plain_fields(&cqe);
                title = Some(copy);
                self.ci = ci.wrapping_add(1);
                owned -= 1;
                let wr_id = if W::WR_ID_IS_WQE_COUNTER {
                    u64::from(f.wqe_counter)
                } else {
                    match resolve_plain(wqs, &f) {
                        Ok(wr_id) => wr_id,
                        Err(e) => break Err(e),
                    }
                };
                if let Some(slot) = out.get_mut(n) {
                    store_summary(slot, wr_id, regular_high_word(f.byte_cnt, f.op_own));
                }
                n += 1;
                continue;
            }
            // Minis decode against the latest title: commit it first.
            if let Some(t) = title.take() {
                self.commit_title(t);
                // A plan depends on the title's opcode only (the CQ's mini
                // format given; the title's `sop_drop_qpn` is read when a
                // block is carried): kept from one title to the next of
                // the same opcode.
                match plan {
                    Some(Some(b)) if b.plan.opcode == self.cur.cqe.op_own.into_bits() >> 4 => {}
                    _ => plan = None,
                }
            }
            if op_own & FORMAT_MASK == FORMAT_COMPRESSED {
                let count = zip::enhanced_count(cqe.op_own) as usize;
                if W::WR_ID_IS_WQE_COUNTER
                    && self.title == Title::InCur
                    && count <= ENHANCED_MAX_MINIS
                {
                    // (No closure: the writer's constants must be built
                    // with the caller's target feature, inline.)
                    let blocks = match plan {
                        Some(b) => b,
                        None => {
                            let b = self.block_plan(d);
                            plan = Some(b);
                            b
                        }
                    };
                    if let Some(b) = blocks {
                        // This block and the compressed CQEs after it (and
                        // the titles between them), straight into the
                        // summaries.
                        let (k, next) = self.enhanced_blocks(ring, d, &b, copy, out, n);
                        n = k;
                        if n >= max {
                            // (`out` full: a block carried, if any, waits
                            // for the next call.)
                            break Ok(());
                        }
                        (owned, pending) = match next {
                            Some(copy) => (1, Some(copy)),
                            None => (0, None),
                        };
                        continue;
                    }
                }
                // The general steps: a session of this CQE's minis (or a
                // malformed block: an error).
                match self.decode_enhanced(&cqe) {
                    Ok(_) => {
                        // (Its holes are not owned.)
                        owned = 0;
                        continue;
                    }
                    Err(e) => break Err(e),
                }
            }
            // Anything else: the general steps (they consume it, or not).
            let taken = self.take_copied::<ENHANCED, W>(wqs, cqe, ci);
            let consumed = self.ci.wrapping_sub(ci) as usize;
            owned = owned.saturating_sub(consumed);
            match taken {
                Ok(Taken::Reported) => {
                    if let Some(slot) = out.get_mut(n) {
                        *slot = self.cur.summary();
                    }
                    n += 1;
                }
                Ok(Taken::Skipped | Taken::Session) => {}
                Ok(Taken::Stop) => break Ok(()),
                Err(e) => break Err(e),
            }
            // The title in `cur` may have changed.
            plan = None;
        };
        if let Some(t) = title {
            self.commit_title(t);
        }
        (n, result)
    }

    /// Enhanced layout: the whole-block plan of the committed title (in
    /// `cur`) and the writer's constants for it, if its minis take that
    /// path. (No closure: the constants must be built with the caller's
    /// target feature, inline.)
    #[inline(always)]
    fn block_plan<D: SummaryWriter>(&self, d: D) -> Option<BlockPlan<D>> {
        // (`Fused::new` of the title's decoding: by its opcode, one load.)
        let plan = self.plans[usize::from(self.cur.cqe.op_own.opcode())].0?;
        Some(BlockPlan {
            plan,
            p: d.prepare(plan),
        })
    }

    /// Enhanced layout, [`WorkQueues::WR_ID_IS_WQE_COUNTER`]: the call that
    /// resumes a compressed stream (the usual one while a long session is
    /// in progress): the carried block's minis, then, if the entry at the
    /// consumer index is a compressed CQE of the committed title (or a
    /// plain CQE of its opcode: the next title of short sessions), the
    /// block loop from there, without the group scan and the tests of
    /// `enhanced_loop`. Returns the count, the copy of the entry at
    /// `self.ci` if it was read and is left to `enhanced_loop`, and
    /// whether `enhanced_loop` has anything to do (`false`: `out` is full
    /// or the next entry is not owned yet).
    #[inline(always)]
    fn enhanced_resume<const S: usize, D: SummaryWriter>(
        &mut self,
        ring: SizedRing<S>,
        d: D,
        out: &mut [CompletionSummary],
    ) -> (usize, Option<CqeCopy>, bool) {
        let max = out.len();
        let mut n = 0;
        if let Some(s) = self.session {
            if !s.carried {
                return (0, None, true);
            }
            n = self.carry_out(s, out);
            if n >= max {
                return (n, None, false);
            }
        }
        if self.title != Title::InCur {
            return (n, None, true);
        }
        let ci = self.ci;
        let e = ring.entry(ci);
        // Step 1: its validity byte (PRM-FACTS §9.2), once.
        if ring.ring().read_validity(e) != self.size.iteration(ci) {
            return (n, None, false);
        }
        // Step 2: the copy reads the body the validity byte just
        // published: not before it.
        barrier::from_device();
        // Step 3: one copy, decoded.
        let copy = ring.ring().copy_out(e, D::WIDE_COPY);
        let op_own = copy.to_cqe().op_own;
        let bits = op_own.into_bits();
        let blocks = if bits & FORMAT_MASK == FORMAT_COMPRESSED {
            // (One that declares more than seven minis is left by
            // `enhanced_blocks` at once.)
            self.block_plan(d)
        } else {
            // (As `enhanced_blocks` takes it after a block.)
            self.block_plan(d).filter(|b| plain_of(bits, b.plan.opcode))
        };
        match blocks {
            Some(b) => {
                let (k, next) = self.enhanced_blocks(ring, d, &b, copy, out, n);
                let more = next.is_some();
                (k, next, more)
            }
            None => (n, Some(copy), true),
        }
    }

    /// Enhanced layout: the compressed CQE at `self.ci` (`copy`: its
    /// validity byte read before the barrier, copied once) and the
    /// compressed CQEs right after it, minis of the committed title, each
    /// written whole into `out` from `n` on by `d` (seven summaries at a
    /// time; with fewer than seven places left, through the carry buffer).
    /// The consumer index and running counter stay in registers; each next
    /// entry's validity byte is read once, then the barrier, then its copy
    /// (whether a group scan of the caller read it too is not tracked: the
    /// scan reads consecutive slots, the next entry after a block is
    /// `count` slots on).
    ///
    /// A plain CQE of the plan's opcode after a block (the next title, as
    /// in sessions of a few minis) is reported and committed here too, as
    /// `enhanced_loop` does (wr_id = `wqe_counter`: only called with
    /// [`WorkQueues::WR_ID_IS_WQE_COUNTER`]; there the commit waits for
    /// the next entry that is not plain, to the same state): the plan
    /// holds for the minis of the compressed CQEs after it.
    ///
    /// Returns the new count and, if an owned entry that is neither ended
    /// the run, its copy (at the new `self.ci`); `None` when `out` is full
    /// or the next entry is not owned yet.
    #[inline(always)]
    fn enhanced_blocks<const S: usize, D: SummaryWriter>(
        &mut self,
        ring: SizedRing<S>,
        d: D,
        b: &BlockPlan<D>,
        mut copy: CqeCopy,
        out: &mut [CompletionSummary],
        mut n: usize,
    ) -> (usize, Option<CqeCopy>) {
        let max = out.len();
        let size = self.size;
        let plan = b.plan;
        let mut ci = self.ci;
        let mut running = self.running;
        let next = loop {
            if D::RUNS && zip::is_full_block(copy) && max - n >= ENHANCED_MAX_MINIS {
                // A run of full blocks up to the ring's end: a pointer walk,
                // the writer's state in registers.
                let blocks = ring.blocks(ci, size.iteration(ci));
                // (Titles taken by the writer too, but not on a striding
                // RQ: their running counter is not one past theirs.)
                let titles = Some(&mut self.cur.cqe).filter(|_| !self.cfg.striding_rq);
                let r = d.write_blocks(&b.p, plan, blocks, copy, running, &mut out[n..], titles);
                // (The full blocks, then what the writer took after them:
                // as many slots as summaries.)
                running = r.running;
                ci = ci.wrapping_add(r.taken as u32);
                n += r.taken;
                if r.titled {
                    // The last title taken is in `cur`: committed as
                    // `commit_plain_title` does (the running counter is
                    // stored below).
                    self.title = Title::InCur;
                    self.batch_has_title = false;
                }
                if let Some(c) = r.pending {
                    // Owned (read before a barrier), not a full block.
                    copy = c;
                    continue;
                }
            } else {
                let op_own = copy.to_cqe().op_own;
                let count = zip::enhanced_count(op_own);
                let bits = op_own.into_bits();
                if bits & FORMAT_MASK != FORMAT_COMPRESSED {
                    // (The owner bit is not used in this layout.)
                    if !plain_of(bits, plan.opcode) {
                        break Some(copy);
                    }
                    rare();
                    // The next title: reported and committed as
                    // `enhanced_loop` does (there, lazily: the same state).
                    let f = plain_fields(&copy.to_cqe());
                    if let Some(slot) = out.get_mut(n) {
                        // (Its opcode is the plan's, just compared.)
                        let hi = regular_high_word(f.byte_cnt, plan.opcode << 4);
                        store_summary(slot, u64::from(f.wqe_counter), hi);
                    }
                    running = self.commit_plain_title(copy);
                    ci = ci.wrapping_add(1);
                    n += 1;
                } else if count as usize > ENHANCED_MAX_MINIS {
                    break Some(copy);
                } else {
                    let pair = D::RUNS && count <= 2;
                    if let Some(dst) = out
                        .get_mut(n..)
                        .and_then(|o| o.first_chunk_mut::<2>())
                        .filter(|_| pair)
                    {
                        // (One or two minis, as after the full blocks of a
                        // session of eight: one pair of a vector writer.)
                        d.write(&b.p, copy, running, dst);
                    } else if let Some(dst) = out
                        .get_mut(n..)
                        .and_then(|o| o.first_chunk_mut::<ENHANCED_MAX_MINIS>())
                    {
                        d.write(&b.p, copy, running, dst);
                    } else {
                        // Fewer than seven places: the whole block into the
                        // carry buffer, as many minis as fit handed out.
                        if let Some(sums) = self.carry.sums.first_chunk_mut::<ENHANCED_MAX_MINIS>()
                        {
                            d.write(&b.p, copy, running, sums);
                        }
                        let take = (count as usize).min(max - n);
                        copy_few(&mut out[n..n + take], &self.carry.sums);
                        if take < count as usize {
                            // The rest next call: the consumer index stays on
                            // the block until its last mini is handed out.
                            self.carry.block = copy.to_cqe();
                            self.carry.running = running;
                            self.session = Some(Session {
                                base: ci,
                                count,
                                next: take as u32,
                                // (Built from the title in `cur` when the
                                // general poller decodes the block.)
                                unzip: Unzip::CARRIED,
                                fused: None,
                                carried: true,
                            });
                            self.ci = ci;
                            self.running = plan.end_running(running, count);
                            return (max, None);
                        }
                    }
                    running = plan.end_running(running, count);
                    ci = ci.wrapping_add(count);
                    n += count as usize;
                }
            }
            if n >= max {
                break None;
            }
            // The next entry: its validity byte once, the barrier, one
            // copy.
            let e = ring.entry(ci);
            if ring.ring().read_validity(e) != size.iteration(ci) {
                break None;
            }
            // The copy below reads the body the validity byte just
            // published: not before it (PRM-FACTS §9.2, §10.5).
            barrier::from_device();
            copy = ring.ring().copy_out(e, D::WIDE_COPY);
        };
        self.ci = ci;
        self.running = running;
        (n, next)
    }

    /// Hands out the carried minis of the session `s` (the compressed CQE
    /// at `self.ci`, written whole by an earlier call) into `out`; closes
    /// the session after the last.
    #[inline(always)]
    fn carry_out(&mut self, mut s: Session, out: &mut [CompletionSummary]) -> usize {
        let i = s.next as usize;
        let take = (s.count as usize).saturating_sub(i).min(out.len());
        if let Some(src) = self.carry.sums.get(i..) {
            match (
                out.first_chunk_mut::<ENHANCED_MAX_MINIS>(),
                src.first_chunk::<ENHANCED_MAX_MINIS>(),
            ) {
                // Room for seven (the usual case): one fixed-size copy;
                // places past `take` may be overwritten.
                (Some(dst), Some(src)) => *dst = *src,
                _ => copy_few(&mut out[..take], src),
            }
        }
        s.next += take as u32;
        if s.next >= s.count {
            self.ci = s.base.wrapping_add(s.count);
            self.session = None;
        } else {
            self.session = Some(s);
        }
        take
    }

    /// Enhanced layout: `copy`, a plain CQE just reported, becomes the
    /// title (as `track_title` and the copy into `cur` in `advance_in`).
    #[inline(always)]
    fn commit_title(&mut self, copy: CqeCopy) {
        self.track_title(&copy.to_cqe());
        copy.store_to(&mut self.cur.cqe);
    }

    /// [`Self::commit_title`] for a plain CQE (never an error CQE, so
    /// always the new title): returns the running counter after it, in a
    /// register for the block loop (as `track_title` sets it).
    #[inline(always)]
    fn commit_plain_title(&mut self, copy: CqeCopy) -> u16 {
        let running = self.set_title(&copy.to_cqe());
        copy.store_to(&mut self.cur.cqe);
        running
    }

    /// The general steps for a CQE copied whole into `cqe` from the entry at
    /// `ci` (= `self.ci`): the tail of `advance_in` after its copy.
    #[inline(never)]
    fn take_copied<const M: u8, W: WorkQueues>(
        &mut self,
        wqs: &mut W,
        cqe: crate::prm::Cqe64,
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
        if format == super::FORMAT_INLINE64 {
            self.copy_inline(self.ring.entry(ci));
        }
        Ok(if self.resolve::<W, false>(wqs)? {
            Taken::Reported
        } else {
            Taken::Skipped
        })
    }

    /// Hands out minis of the open session into `out` (not empty): whole
    /// arrays at a time by the writer `d` where the session allows it
    /// (basic layout), the rest through the session's [`MiniBatch`].
    /// `Ok(false)`: the CQ is empty.
    #[inline(always)]
    fn burst_session<const M: u8, const S: usize, W: WorkQueues, D: SummaryWriter>(
        &mut self,
        ring: SizedRing<S>,
        d: D,
        wqs: &mut W,
        out: &mut [CompletionSummary],
    ) -> (usize, Result<bool, PollError>) {
        let mut n = 0;
        while self.session.is_some() && n < out.len() {
            if M == BASIC && W::WR_ID_IS_WQE_COUNTER {
                let k = self.basic_arrays::<S, D>(ring, d, &mut out[n..]);
                n += k;
                if k > 0 {
                    continue;
                }
            }
            let (k, r) = self.session_lanes::<M, W>(wqs, &mut out[n..]);
            n += k;
            match r {
                Ok(true) => {}
                other => return (n, other),
            }
        }
        (n, Ok(true))
    }

    /// Basic layout: writes whole mini arrays of the open session while
    /// `out` has room for eight summaries, if the session's minis take the
    /// whole-array path and the next mini starts an array. Returns the
    /// number of completions written.
    #[inline(always)]
    fn basic_arrays<const S: usize, D: SummaryWriter>(
        &mut self,
        ring: SizedRing<S>,
        d: D,
        out: &mut [CompletionSummary],
    ) -> usize {
        let Some(s) = self.session else {
            return 0;
        };
        self.session_arrays::<S, D>(ring, d, s, out)
    }

    /// [`Self::basic_arrays`] for the open session `s`, passed in
    /// registers (a session just opened is not stored and reloaded):
    /// `self.session` is what is left of it after (`None` once done).
    #[inline(always)]
    fn session_arrays<const S: usize, D: SummaryWriter>(
        &mut self,
        ring: SizedRing<S>,
        d: D,
        mut s: Session,
        out: &mut [CompletionSummary],
    ) -> usize {
        const A: u32 = MINI_CQE_ARRAY_SIZE as u32;
        let plan = match s.fused {
            Some(plan) if s.next % A == 0 && out.len() >= MINI_CQE_ARRAY_SIZE => plan,
            _ => {
                self.session = Some(s);
                return 0;
            }
        };
        let p = d.prepare(plan);
        let mut running = self.running;
        let mut n = 0;
        if s.next == 0 {
            // The first array is at slot offset 1 and covers the slots up to
            // 7 (`zip::basic_array_offset`, `zip::basic_invalidate_range`).
            let Some(dst) = out.first_chunk_mut::<MINI_CQE_ARRAY_SIZE>() else {
                self.session = Some(s);
                return 0;
            };
            let len = s.count.min(A);
            let index = s.base.wrapping_add(1);
            running = write_array::<S, D>(ring, d, &p, plan, index, len, len - 1, dst, running);
            n = len as usize;
            s.next = len;
        }
        // Whole arrays: array `k` at slot offset `8k`, covering 8 slots.
        let room = out.len() - n;
        let whole = ((s.count - s.next) / A).min((room / MINI_CQE_ARRAY_SIZE) as u32);
        if D::RUNS && whole > 0 {
            (running, n) =
                self.whole_arrays::<S, D>(ring, d, &p, plan, &mut s, whole, running, out, n);
        } else {
            let region = &mut out[n..n + (whole * A) as usize];
            for dst in region.chunks_exact_mut(MINI_CQE_ARRAY_SIZE) {
                let Ok(dst) = <&mut [CompletionSummary; MINI_CQE_ARRAY_SIZE]>::try_from(dst) else {
                    break;
                };
                let index = s.base.wrapping_add(s.next);
                running = write_array::<S, D>(ring, d, &p, plan, index, A, A, dst, running);
                s.next += A;
            }
            n += (whole * A) as usize;
        }
        // The session's last, partial array, if there is room for eight.
        let left = s.count - s.next;
        if left > 0 && left < A {
            if let Some(dst) = out
                .get_mut(n..)
                .and_then(|o| o.first_chunk_mut::<MINI_CQE_ARRAY_SIZE>())
            {
                let index = s.base.wrapping_add(s.next);
                running = write_array::<S, D>(ring, d, &p, plan, index, left, left, dst, running);
                n += left as usize;
                s.next = s.count;
            }
        }
        self.running = running;
        if s.next == s.count {
            self.ci = s.base.wrapping_add(s.count);
            self.session = None;
        } else {
            self.session = Some(s);
        }
        n
    }

    /// [`Self::session_arrays`]' whole arrays with a run writer
    /// ([`SummaryWriter::RUNS`]): `whole` (at least one) arrays of the
    /// session `s` from its next mini on, into `out` from `n`. Returns the
    /// running counter after them and the new count.
    #[expect(
        clippy::too_many_arguments,
        reason = "the array loop's state, all in registers"
    )]
    #[inline(always)]
    fn whole_arrays<const S: usize, D: SummaryWriter>(
        &mut self,
        ring: SizedRing<S>,
        d: D,
        p: &D::Prepared,
        plan: Fused,
        s: &mut Session,
        whole: u32,
        mut running: u16,
        out: &mut [CompletionSummary],
        n: usize,
    ) -> (u16, usize) {
        const A: u32 = MINI_CQE_ARRAY_SIZE as u32;
        // Up to the ring's end: a pointer walk, no index masking.
        let index = s.base.wrapping_add(s.next);
        let mut k = d.write_arrays(
            p,
            plan,
            ring.arrays(index, whole as usize),
            running,
            &mut out[n..],
        );
        running = plan.end_running(running, k as u32 * A);
        if k < whole as usize {
            // The array whose holes wrap the ring (if the run stopped short
            // of it), then the arrays from the ring's start.
            let index = s.base.wrapping_add(s.next + k as u32 * A);
            if ring.arrays(index, 1).len() == 0 {
                if let Some(dst) = out
                    .get_mut(n + k * MINI_CQE_ARRAY_SIZE..)
                    .and_then(|o| o.first_chunk_mut::<MINI_CQE_ARRAY_SIZE>())
                {
                    running = write_array::<S, D>(ring, d, p, plan, index, A, A, dst, running);
                    k += 1;
                }
            }
            let index = s.base.wrapping_add(s.next + k as u32 * A);
            let rest = ring.arrays(index, (whole as usize).saturating_sub(k));
            let j = d.write_arrays(
                p,
                plan,
                rest,
                running,
                out.get_mut(n + k * MINI_CQE_ARRAY_SIZE..)
                    .unwrap_or_default(),
            );
            running = plan.end_running(running, j as u32 * A);
            k += j;
        }
        s.next += k as u32 * A;
        (running, n + k * MINI_CQE_ARRAY_SIZE)
    }

    /// Hands out minis of the open session through its [`MiniBatch`], up
    /// to the end of the current array: lane by lane, with the work
    /// queue's mapping, when the title is a plain requester or (cyclic RQ)
    /// responder CQE; else one by one through the general poller.
    /// `Ok(false)`: the CQ is empty.
    #[inline(never)]
    fn session_lanes<const M: u8, W: WorkQueues>(
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
        let responder = (super::OP_RESP_WR_IMM..=OP_RESP_SEND_INV).contains(&opcode);
        if !(requester || responder && !self.cfg.striding_rq) {
            return self.session_by_one::<M, W>(wqs, out);
        }
        // The queue (but for FTAG_STRIDX flow tags, per lane below) is the
        // title's.
        let srqn_uidx = title.srqn_uidx.srqn_uidx();
        let i = s.next;
        let k = i / MINI_CQE_ARRAY_SIZE as u32;
        if M == BASIC && i % MINI_CQE_ARRAY_SIZE as u32 == 0 {
            // Mini array k: copied once, decoded whole (as `next_mini`).
            let entry = self
                .ring
                .entry(s.base.wrapping_add(zip::basic_array_offset(k)));
            let array: MiniCqeArray = zerocopy::transmute!(self.ring.copy_cqe(entry));
            let len = (s.count - i).min(MINI_CQE_ARRAY_SIZE as u32) as usize;
            self.ensure_batch_title();
            self.cfg
                .unzip
                .decode(s.unzip, &array.minis, self.running, &mut self.cur.batch);
            self.running = self.cur.batch.end_counter(s.unzip, len, self.running);
        }
        // The lanes of this array to hand out now.
        let lane0 = i as usize % MINI_CQE_ARRAY_SIZE;
        let take = (MINI_CQE_ARRAY_SIZE - lane0)
            .min((s.count - i) as usize)
            .min(out.len());
        let batch = &self.cur.batch;
        let mut taken = take;
        let mut result = Ok(true);
        if W::WR_ID_IS_WQE_COUNTER {
            // Nothing to call per mini: write the lanes at once.
            identity_lanes(batch, lane0, take, opcode, out);
        } else {
            for (l, slot) in out[..take].iter_mut().enumerate() {
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
        let n = if result.is_err() { taken - 1 } else { taken };
        s.next = i + taken as u32;
        let done = s.next == s.count;
        if M == BASIC && (s.next % MINI_CQE_ARRAY_SIZE as u32 == 0 || done) {
            // The array's slot and the holes after it, in one pass.
            let (first, last) = zip::basic_invalidate_range(k, s.count);
            self.ring
                .write_op_own_range(s.base, first, last, crate::prm::CQE_INVALIDATE);
        }
        if done {
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

/// One mini array of a basic session: `len` minis at consumer index
/// `index` (in the session: its offset is below the count, at most the ring
/// size), copied once into registers and written whole into `dst` by `d`;
/// then its slot and the holes after it, `slots` in all, invalidated.
/// Returns the running counter after it.
#[expect(
    clippy::too_many_arguments,
    reason = "one array's place, plan and state, all in registers"
)]
#[inline(always)]
fn write_array<const S: usize, D: SummaryWriter>(
    ring: SizedRing<S>,
    d: D,
    p: &D::Prepared,
    plan: Fused,
    index: u32,
    len: u32,
    slots: u32,
    dst: &mut [CompletionSummary; MINI_CQE_ARRAY_SIZE],
    running: u16,
) -> u16 {
    d.write(
        p,
        ring.ring().copy_out(ring.entry(index), D::WIDE_COPY),
        running,
        dst,
    );
    ring.invalidate_array(index, slots);
    plan.end_running(running, len)
}

/// Whether the basic session title `copy` declares the minis of one array
/// (two to eight).
#[inline(always)]
fn one_array(copy: CqeCopy) -> bool {
    copy.to_cqe().byte_cnt.get().wrapping_sub(2) < MINI_CQE_ARRAY_SIZE as u32 - 1
}

/// Copies `src[..dst.len()]` (fewer than eight summaries) into `dst` in
/// at most two fixed-size pieces, overlapping when the length is not one
/// (the first and last four, or two, or the one; no call to `memcpy`).
#[inline(always)]
fn copy_few(dst: &mut [CompletionSummary], src: &[CompletionSummary]) {
    debug_assert!(dst.len() < 8 && dst.len() <= src.len());
    let len = dst.len();
    let Some(src) = src.get(..len) else {
        return;
    };
    if len >= 4 {
        if let (Some(d), Some(s)) = (dst.first_chunk_mut::<4>(), src.first_chunk::<4>()) {
            *d = *s;
        }
        if let (Some(d), Some(s)) = (dst.last_chunk_mut::<4>(), src.last_chunk::<4>()) {
            *d = *s;
        }
    } else if len >= 2 {
        if let (Some(d), Some(s)) = (dst.first_chunk_mut::<2>(), src.first_chunk::<2>()) {
            *d = *s;
        }
        if let (Some(d), Some(s)) = (dst.last_chunk_mut::<2>(), src.last_chunk::<2>()) {
            *d = *s;
        }
    } else if let (Some(d), Some(s)) = (dst.first_mut(), src.first()) {
        *d = *s;
    }
}

/// Step 3 of [`Cq::burst_loop`] with wr_id = the reported `wqe_counter`:
/// the summaries of `group`, plain entries whose ownership bytes were all
/// `b0` (read, then the from-device barrier), into `out`; their upper
/// half from `b0`, built once.
#[inline(always)]
fn counter_group<const S: usize>(group: Run<S>, b0: u8, out: &mut [CompletionSummary]) {
    let hi = regular_high_word(0, b0);
    let r = group.decode_plain::<FIELDS_COUNTER, _, Infallible>(out, |f, slot| {
        store_summary(slot, u64::from(f.wqe_counter), hi | u64::from(f.byte_cnt));
        Ok(())
    });
    if let Err((_, never)) = r {
        match never {}
    }
}

/// The fields of a plain CQE from its whole copy (enhanced layout).
#[inline(always)]
fn plain_fields(cqe: &crate::prm::Cqe64) -> PlainFields {
    PlainFields {
        byte_cnt: cqe.byte_cnt.get(),
        wqe_counter: cqe.wqe_counter.get(),
        op_own: cqe.op_own.into_bits(),
        sop_drop_qpn: cqe.sop_drop_qpn,
        srqn_uidx: cqe.srqn_uidx,
    }
}

/// The second quadword of the summary of a successful regular completion
/// ([`CompletionSummary::high_word`]) of CQE `op_own`.
#[inline(always)]
const fn regular_high_word(byte_cnt: u32, op_own: u8) -> u64 {
    CompletionSummary::high_word(byte_cnt, SUCCESS, op_own >> 4, Origin::Regular)
}

/// The wr_id of a plain CQE (opcode REQ or a successful responder one,
/// format 0 or 1, not on a striding RQ for responders) from the work
/// queue.
#[inline(always)]
fn resolve_plain<W: WorkQueues>(wqs: &mut W, f: &PlainFields) -> Result<u64, PollError> {
    if f.op_own >> 4 == OP_REQ {
        resolve_plain_as::<W, true>(wqs, f)
    } else {
        resolve_plain_as::<W, false>(wqs, f)
    }
}

/// [`resolve_plain`] for a CQE known to be a requester one (`REQUESTER`)
/// or a responder one.
#[inline(always)]
fn resolve_plain_as<W: WorkQueues, const REQUESTER: bool>(
    wqs: &mut W,
    f: &PlainFields,
) -> Result<u64, PollError> {
    let wq = WqRef {
        qpn: f.sop_drop_qpn.qpn(),
        srqn_uidx: f.srqn_uidx.srqn_uidx(),
    };
    let wr_id = if REQUESTER {
        wqs.retire_send(wq, f.wqe_counter, WcStatus::Success)
            .map(|r| r.wr_id)
    } else {
        wqs.retire_recv(wq, f.wqe_counter, WcStatus::Success)
            .map(|r| r.wr_id)
    };
    wr_id.map_err(|e| lookup_error(e, REQUESTER, wq, f.wqe_counter))
}
