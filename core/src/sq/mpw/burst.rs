//! The burst path of [`TxQueue::tx_burst`](super::TxQueue::tx_burst),
//! [`TxBatch::push_burst`]: the WQEs [`TxBatch::push`] builds packet by
//! packet, with the per-packet work of the common case cut to a tight loop.
//!
//! # eMPW
//!
//! "The common packet" is one that `push` would add to the open session
//! without any decision but the session's limits: one segment, no TSO, no
//! VLAN insertion, the session's offload values, a length that is no
//! [`TxError::BadLength`](super::TxError::BadLength), an id-ring slot.
//!
//! A session whose WQEBBs (as many as its largest DS count takes) lie
//! before the ring end is built straight into the ring
//! ([`WqebbRing::window`]): its title and descriptors are written in
//! place, its close writes the control segment ([`Out::finish`]), and
//! nothing is copied. A session that would cross the ring end is built in
//! the staging area and copied, wrapping, when it closes, as `push` does;
//! so that the bytes it does not write go back unchanged, the staging
//! area starts as a copy of its WQEBBs when it can hold inline segments
//! (`load_wrapping`), and takes the ring's tail of its last WQEBB before
//! the copy (`Out::keep_tail`). Either way its close writes one shadow
//! entry, for its first WQEBB (`tx_shadow`).
//!
//! No path writes padding (as DPDK, `mlx5_tx_dseg_empw`, and libmlx5
//! do not): the bytes of an inline segment past its byte count, up to its
//! last 16-byte unit, and those past a session's DS count in its last
//! WQEBB keep what the ring held (the device reads DS × 16 bytes of a
//! WQE and an inline segment's byte count of data;
//! `tests::padding_is_left_as_it_was`).
//!
//! With no session open and a run of alike common packets of one kind
//! (inline frames of 64 bytes, [`Inline64`], the common small packet; or,
//! on a queue that never inlines, frames or pointers by pointer,
//! [`Ptrs`]), [`TxBatch::fresh`] takes the run whole: one loop opens each
//! session (its Ethernet segment, built once per run from the first
//! packet's offload words in two stores, `title_eth`, written into the
//! session and the staging area as the session opens: not before, since
//! until then the staging area holds the batch's last WQE, the BlueFlame
//! source), fills it with a counted loop (`fill`:
//! [`fill64`], [`fill_ptr_run`]; the shape tests, the descriptor, the id
//! into a contiguous run of the id ring) and closes it for the reason
//! `push` gives when it is full and the next packet is alike: control
//! segment in place, one shadow entry (`finish_in_place`). A
//! session with the whole room (the free WQEBBs give it the configured
//! DS: the common case) takes its packet count, window and close reason
//! from the queue ([`FreshRuns`], computed at construction) and has a
//! copy of the session code of its own; one that would cross the ring
//! end is built in the staging area and copied, wrapping, at its close
//! (`finish`). On a queue with the AVX2 proof ([`TxQueue::set_avx2`])
//! the whole of `fresh` for 64-byte frames is compiled with AVX2
//! (`burst_avx2`), its counted loop inlined ([`FillRun`]: the frame
//! copied as two 32-byte moves, no call per session); the pointers'
//! counted loop is inlined too. The last session stays open, as `push`
//! leaves it; but under [`TxQueue::tx_burst`], which completes the batch
//! right after, a session holding the burst's last packet is closed at
//! once for [`CloseReason::Complete`] (`push_burst_as::<true>`), the
//! close `complete` would make.
//!
//! [`TxQueue::tx_frames`] hands `fresh` its frames themselves
//! ([`TxFrame`], read through [`FreshPkt`]): their type says one segment,
//! no TSO, no VLAN insertion and the burst's offload values, so the
//! counted loop tests a frame's length and nothing else (13 instructions
//! per 64-byte frame, two frames a turn, [`fill64_pairs`], instead of 24).
//! What `fresh` leaves goes through the packets' path, the frames built
//! into [`Packet`]s on the stack ([`TxBatch::frames_rest`]).
//!
//! 64-byte frames on a queue whose sessions have the largest window (63
//! DS, 16 WQEBBs: [`WIN64`], the default) take their own `fresh`,
//! [`TxQueue::inline64_run`]: the batch's counters are a value
//! ([`Tally`]) kept in registers and written back once, a session with
//! the whole room is built in a fixed-size window (no bounds to test;
//! its [`FULL64`] packets, when it takes that many, as a fixed-size
//! chunk) and closed with the counters in hand: in place before the ring end;
//! across it, its descriptors are written into the ring's two parts
//! (`fill_crossing`: the counted loop in each, the descriptor that
//! straddles the end split in 16-byte units) and its title and control
//! segment built in the staging area, the control segment copied into the
//! ring at close (nothing else is copied); and
//! the CQE decision is specialised at compile time for the policy
//! that requests one per WQE (`ALWAYS`: no counter to test). Any other
//! session (not the whole room) takes `fresh`'s session code out of line
//! (`inline64_step`). With the AVX2 proof,
//! `tx_frames` is one function for the whole burst
//! ([`TxQueue::frames_burst`], `burst_avx2::tx_frames64`: the counters,
//! the sessions, [`TxQueue::commit`]'s doorbell), chosen by one test of a
//! proof kept per queue (`frames64`); so is `tx_burst` on such a queue
//! ([`TxQueue::packets64_as`], `burst_avx2::tx_packets64`: the same
//! function for `Packet`s, the same counted loop, [`fill64_pairs`], with
//! the shape test of the packet's head; what it leaves goes to
//! [`TxBatch::push_burst_as`]).
//!
//! A [`Packet`]'s fields are private; it keeps a 16-byte head ([`Head`]:
//! its offload words, its shape, its first segment's length), written
//! by every constructor and builder (`Packet::fixed`), so that "a common
//! 64-byte frame of this session" is one comparison of the head with a
//! key ([`Head::key`] of the session's offload words and 64): as two
//! 8-byte words ([`Words`]), or with AVX2 one 16-byte vector compare
//! (`burst_avx2::Vec128`), which in [`fill64_pairs`] tests both heads of
//! a pair at once and then reads their 64 bytes without a test of their
//! length ([`HeadEq::pair64`]: the head says it; the one `unsafe` read
//! that rests on the head being right, `tests::head_follows_every_builder`).
//!
//! Other runs of alike packets (inline frames of one length of 32..=64
//! bytes, or pointers on a queue that never inlines), and whatever
//! `fresh` leaves, take counted loops ([`Run::sessions`]:
//! [`fill_same`], [`fill_ptrs`]): how many fit the session (packets, DS
//! room, inline bytes) is computed once per session, so the loop tests
//! only the packet (shape, offload values as two words, kind and length)
//! and writes the descriptor with fixed-size moves and the id into a
//! contiguous run of the id ring. When a session is full and the next
//! packet is alike, it is closed for the reason `push` gives and the next
//! one opened in the ring, without leaving the loop (the close in place
//! written out in the loop, with `ctrl_seg`'s two-word control segment).
//! 64-byte frames take a loop with the length a constant
//! ([`fill_same64`]); with the AVX2 proof the whole session loop of
//! 64-byte frames is compiled with AVX2 (`burst_avx2`). Other common
//! packets take [`fill`] (mixed lengths) and [`fill_one`] (any common
//! shape, one at a time); everything else (another offload value, several
//! segments, TSO, VLAN, a refused length, a full ring or id ring) goes to
//! `push`, which closes, opens, sends as a single WQE or refuses as it
//! always does (moving a session built in the ring back to the staging
//! area first if it adds to it). The counters (session, batch,
//! statistics) are written back once per session.
//!
//! The parts a session's close touches ([`Out`]: the send queue, the
//! staging area, the counters, and the queue's signalling constants,
//! borrowed, not copied) are never in memory as a struct in `fresh`: the
//! one out-of-line call that takes them (`finish`, a session that
//! crosses the ring end) gets a reborrowed copy (`Out::reborrow`), so
//! the loop keeps them in registers or rebuilds them from the batch's
//! address.
//!
//! Measured (`benches/icount.sh tx/empw_inline64_burst32`: 32 × 64-byte
//! frames per `tx_burst`, AVX2, 256-WQEBB ring; callgrind per
//! instruction, per burst, e587604): 1452 in `fresh`
//! (`burst_avx2::fresh64`) with its counted loop (24 per packet, 753 in
//! all; entering it: the first packet tested, the id run, the title; per
//! session in the ring: opened, filled, the next packet tested, closed in
//! place), about 47 for the sessions that cross the ring end (one in six:
//! staged and copied), 76 in `tx_burst` (the batch, the doorbell), 11 in
//! the scenario's loop: 49.6 per packet. The same frames as `TxFrame`s
//! (`tx/empw_inline64_frames32`): 950 in `burst_avx2::tx_frames64` (the
//! counted loop of 13 per frame, 392 in all; about 100 per session in
//! the ring; entering, the write-back and the doorbell), about 100 for
//! the session in six that crosses the ring end (then `inline64_step`:
//! staged in `stage`, copied at close), 18 in the scenario's loop: 33.3
//! per packet (37.5 before); with the crossing session built by the same
//! code in the staging area and copied without `memcpy` (about 270
//! instructions per crossing session instead of about 650), 32.3, and
//! 32.0 once the batch's counters came from `tally` / `batch_of`.
//! `tx_burst` in `burst_avx2::tx_packets64` (the frames' function for
//! `Packet`s, its loop `fill64`: 25 per packet, 800 in all): 48.3 per
//! packet instead of 49.6 (47.7 with `tally` / `batch_of`); its loop as two a turn (`fill64_pairs` with
//! the shape test) 50.9, the shape folded into one word per packet and
//! tested once per pair 52.7, or a scan of the burst's common packets
//! first (12 per packet) and a loop that tests only the length 54.7.
//! Pointers (`tx/empw_ptr64_burst32`, one session of 32 per burst, the
//! loop inlined too): 40.9; as `TxFrame`s 32.1.
//!
//! Without padding written (the pad store of each 64-byte frame, and the
//! zeroes after a session's DS count, gone) and with the crossing session
//! written into the ring in two parts (`fill_crossing`, about 280
//! instructions per crossing session with its frames; staged and copied,
//! once the staging area had to start as a copy of the ring, about 370):
//! frames 31.0 per packet (the pair loop 12.5 per frame; the crossing
//! session's loop two a turn 31.6), `tx_burst` 44.8 (its crossing
//! session inlined; out of line 47.3), pointers as `TxFrame`s 31.6,
//! pointers as packets 41.3 (41.6 before their id slice went through
//! `black_box`: the register allocation of their loop).
//!
//! Then: frames 30.1 per packet, `tx_burst` 43.3, from four changes to
//! `inline64_run` and `fill_crossing` (frames, packets): the sessions
//! of the whole room in an inner loop, a frames' session that is not in
//! an outer one (`inline64_step`; the values only it changes then stay
//! put through the inner loop: 30.6, 44.8); the queue's tests not made
//! again under the AVX2 proof, which implies them (`KNOWN`: 30.6, 43.5);
//! the doorbell's copy of the control segment written into the staging
//! area whatever the window, no test of which one it is (30.2, 43.3);
//! the straddling descriptor of a frames' crossing session copied as one
//! fixed-size move into each part, per split (`straddle`, 30.1; as
//! packets, inlined, 44.4: they keep the loop of 16-byte units).
//! Measured and rejected: the counters since the last CQE request not
//! carried through the loop under `ALWAYS` (reset once, when it ends:
//! 30.9 to 31.9), the session constants read from the queue where used
//! (30.9 instead of 30.2), no offload words kept for frames (31.0),
//! `fill64_pairs` in the crossing session (30.7), the remainder of the
//! crossing's split from its quotient (30.1, a few more).
//!
//! Then: frames 29.35 per packet (939 per burst instead of 963;
//! `tx_burst` 43.3, pointers unchanged), from three changes for frames:
//! the session's packet count bounded by what the window's region holds
//! (`cap`, at most 12), so that `fill64_pairs` is unrolled whole with no
//! loop counter (30.03 to 29.35); the whole room tested before the window
//! is computed, and one test (`k != n1`) after the first part of a
//! crossing session (30.08 to 30.03). Measured and rejected: the counters
//! since the last CQE request left out of the loop under `ALWAYS` again
//! (reset once at the end, from the sessions closed: 30.3).
//!
//! Then, `Packet`'s head (issue 7; `ITERS=20000 benches/icount.sh`,
//! instructions per packet): `tx_burst` 43.35 to 30.17
//! (`tx/empw_inline64_burst32`, 1387 to 966 per burst), frames 29.35 to
//! 29.39 (`tx/empw_inline64_frames32`, 939 to 940 per burst: register
//! allocation of `tx_frames64`, whose code is otherwise the same),
//! pointers as packets 41.3 to 40.6, one WQE per packet 92.7 to 89.7
//! (its shape test one test of the head), pointers as frames 31.6
//! unchanged. In steps, in the order measured: the shape test as the
//! head's words (offload words, then flags and shape as one 4-byte
//! word, then the length) in the one-a-turn loop (18 per packet instead
//! of 25): 36.9; the head compared with AVX2 as one 16-byte word
//! (`vpxor`, `vptest`; 17 per packet): 37.0; the packets' loop two a
//! turn with the frames' bound (`cap`) and their crossing session out
//! of line, as frames (`fill64_pairs`, `burst_avx2::crossing64`): 35.2
//! (one of the two alone: 37.9, 36.7; with the frames' outer loop for
//! sessions not the whole room too: 37.6); the key made once per run,
//! through `black_box` once per session (`keyed64`): 34.4 (not through
//! `black_box`: 36.9); the run's key straight from the first packet's
//! head (`FreshPkt::run_key`) instead of its offload values decoded and
//! encoded again: 33.6; both heads of a pair in one test: 33.3; their
//! bytes then read without a test of their length (`HeadEq::pair64`,
//! in a loop that leaves at the first pair not both common, the odd
//! one and the first of such a pair taken by the frames' code for the
//! odd one): 31.4 (32.8 with the pair's fallback in the loop, which is
//! then not unrolled; 32.3 with the rest one at a time after it); the
//! next packet's test at a session's close with the vector compare:
//! 31.3; the first packet's too: 30.29 (both had measured 34.3, and the
//! next one alone 34.0, at 33.6: the register allocation of the whole
//! function moves); the crossing session's loop reading the bytes on
//! its head's word too (`burst_avx2::Vec128Bytes`): 30.17. Measured and
//! rejected: the head compared as one `u128` in the one-a-turn loop
//! (LLVM compares it as two words and an `or`: 40.4); every one of the
//! frames' forms with the head tested as two words (38.5: the words
//! spilled in the unrolled loop); the key passed to `inline64_run` by
//! its callers (packets 33.6, but frames 29.8; as an `Option`, frames
//! 30.5); at 30.29: the bytes read on the head's word in
//! `inline64_run`'s loop too (the odd packet, the first, the next at a
//! close: 31.4), the next and the first packets tested by their heads
//! alone (31.5), the packets' offload values decoded only where a cold
//! path uses them (30.9), the key through `black_box` once per run
//! (30.8) or by reference per session (31.2), the crossing session's
//! packets two a turn (30.7); at 30.17, `Vec128Bytes` for the sessions'
//! loop of `fresh64` and `inline64_step` too (31.4), what
//! `packets64_as` leaves to `push_burst_as` out of line (31.0). (In
//! this function a change of a few instructions moves the register
//! allocation of the whole burst: the figures are the measure, not the
//! sum of their parts.)
//!
//! Then (`ITERS=20000 benches/icount.sh`, instructions per packet):
//! `tx_burst` 30.17 to 29.18 (`tx/empw_inline64_burst32`, 19,311,130 to
//! 18,672,442: 966 to 934 per burst), frames 29.39 to 27.92
//! (`tx/empw_inline64_frames32`, 18,808,384 to 17,866,290: 940 to 893
//! per burst), pointers as packets (40.64), pointers as frames (31.58)
//! and one WQE per packet (89.68) unchanged (the same counts). In steps:
//! the crossing session's key made once for its two loops and its
//! straddling descriptor (`FillRun::fill_of`, `fill64_of`; it was made
//! again, through `black_box`, for each loop): 30.04, frames 29.36; a
//! session of the whole room with all [`FULL64`] packets to take (12: the
//! common case) takes them as a fixed-size chunk, `fill64_pairs`
//! unrolled with no bound to test and no odd one: 29.73, frames 27.92;
//! then, packets, `k64` no longer through `black_box` per session
//! (`keyed64`, gone) and the next packet's test at a full session's close
//! its head alone ([`FreshPkt::is64`]; its bytes are tested by the next
//! session's loop): 29.18 (each alone: 30.06, 29.92). Measured and
//! rejected, at 30.04 (before `FULL64`; all 32 combinations of these
//! five measured, the best 30.03): the counters since the last CQE
//! request not carried through the loop under `ALWAYS`, for packets
//! (their values at the last `inline64_step`, or zero once `pi` has
//! moved, and the packets of a session left open: 30.20; 30.34 at
//! 30.17), packets' sessions not the whole room in the outer loop, as
//! frames (30.88), `k64` not through `black_box` (30.43), the next
//! packet's test its head alone (30.63), the first packet's too (31.60);
//! at 29.18, the same counters out of the loop (29.14: 1.2 per burst
//! for more code; alone at 29.73, 30.55).
//!
//! # One WQE per packet
//!
//! [`TxBatch::single_run`] builds the SEND WQE of a plain frame (inline L2
//! header if the queue needs one, the rest by pointer: one WQEBB) as eight
//! 8-byte words, straight into the ring up to its end, with its shadow
//! entry; the CQE decision is a countdown to the next threshold. Anything
//! else goes to `push`.
//!
//! # Same bytes
//!
//! Within each descriptor, the bytes are `push`'s: header and frame (no
//! padding), and nothing is written past a descriptor (the session may be
//! in the ring, where the bytes after its last WQEBB are not its own).
//! `tests::burst_path_matches_push` runs both paths on random bursts
//! (mixed shapes, lengths, offload values, limits, ring and id-ring wraps,
//! full queues, refusals, every mode; one burst in three uniform, as a
//! benchmark's, with now and then one odd packet) and compares ring,
//! doorbell, shadow, counters and completions; `_avx2` with the AVX2
//! proof, `_blueflame` on BlueFlame queues (the BlueFlame halves
//! compared too).
#![forbid(unsafe_code)]

use super::{
    copy_frame, ctrl_bits, ctrl_seg, data_seg, in_flight, inline_header, max_packets_of, mpw,
    tx_entry, tx_shadow, tx_wr_id, wq_counter16, wqebbs_of, CloseReason, Desc, DoorbellPolicy,
    Head, Open, Out, Packet, PacketBuf, Pending, QpKind, Tally, TxBatch, TxFrame, TxKind, TxMode,
    TxOffload, TxQueue, TxStats, CTRL_FM_CE_SE, FM_CE_ALWAYS, MAX_DS, SEND_WQE_BB, SEND_WQE_DS,
    STAGE_BYTES,
};
use crate::prm::ETH_L2_INLINE_HEADER_SIZE;
use crate::ring::WqebbRing;

/// Frames [`TxBatch::push_frames_as`] builds into packets at a time.
const FRAME_CHUNK: usize = 32;

/// Longest frame [`TxBatch::push`] accepts (`TxError::BadLength` beyond).
const MAX_LEN: usize = (u32::MAX >> 1) as usize;

/// The packets of `pkts` a run may take, at most `limit`, and their id
/// slots: as many as there are free ids (`head` and `tail` the id ring's
/// counters), up to the id ring's end, so that the slots are one
/// contiguous run and no id needs the mask. `None` if `ids` is not the
/// power-of-two id ring the queue checked at construction.
#[inline(always)]
fn id_run<'p, 'i, T>(
    pkts: &'p [T],
    ids: &'i mut [u64],
    head: u32,
    tail: u32,
    limit: usize,
) -> Option<(&'p [T], &'i mut [u64])> {
    let cap = ids.len();
    let slot0 = head as usize & cap.wrapping_sub(1);
    let free = cap.saturating_sub(in_flight(head, tail) as usize);
    let ids = ids.get_mut(slot0..)?;
    let n = pkts.len().min(free).min(limit).min(ids.len());
    Some((pkts.get(..n)?, ids.get_mut(..n)?))
}

impl<P: DoorbellPolicy, Q: QpKind, M: TxMode> TxBatch<'_, '_, P, Q, M> {
    /// Queues as many of `pkts` as fit, in order, stopping at the first one
    /// [`TxBatch::push`] refuses; returns how many were queued. The WQEs
    /// are the ones [`TxBatch::push`] would build packet by packet.
    pub fn push_burst(&mut self, pkts: &[Packet<'_>]) -> usize {
        self.push_burst_as::<false>(pkts)
    }

    /// [`TxBatch::push_burst`]; `END`: the batch completes right after
    /// ([`TxQueue::tx_burst`]), so that a session the last packet went
    /// into may be closed for [`CloseReason::Complete`] at once.
    #[inline(always)]
    pub(super) fn push_burst_as<const END: bool>(&mut self, pkts: &[Packet<'_>]) -> usize {
        // The common burst first, inlined into `tx_burst`: one run that
        // `fresh` (eMPW) or `single_run` (one WQE per packet) takes whole;
        // the general loop out of line.
        let done = match M::KIND {
            TxKind::Empw if self.open.is_none() => self.fresh_run::<END>(pkts),
            TxKind::Single => self.single_run(pkts),
            _ => 0,
        };
        if done == pkts.len() {
            return done;
        }
        self.push_rest::<END>(pkts, done)
    }

    /// With no session open, [`TxBatch::fresh`] for the run at the start
    /// of `pkts`, if its first packet is of a kind it takes (a cheap test
    /// first: the kind of run; 64-byte frames with AVX2 if the queue has
    /// the proof, `burst_avx2::fresh64`); returns how many packets it
    /// took.
    #[inline(always)]
    fn fresh_run<const END: bool>(&mut self, pkts: &[Packet<'_>]) -> usize {
        match pkts.first() {
            Some(p0) => self.fresh_run_of::<Packet<'_>, END>(pkts, &p0.offload()),
            None => 0,
        }
    }

    /// [`TxBatch::fresh_run`] of packets of type `T`, `offload` the run's
    /// offload values (`Packet`s: the first one's; `TxFrame`s: the
    /// burst's).
    #[inline(always)]
    pub(super) fn fresh_run_of<T: FreshPkt, const END: bool>(
        &mut self,
        pkts: &[T],
        offload: &TxOffload,
    ) -> usize {
        match (pkts.first().map(|p| p.buf()), self.inline_limit()) {
            (Some(PacketBuf::Frame(f)), lim) if f.data.len() == 64 && lim >= 64 => {
                // With AVX2 if the queue has the proof (`burst_avx2`).
                // Frames (`TxFrame`) whose sessions have the largest
                // window: `inline64_as` (with the proof, `tx_frames`
                // takes them before, `TxQueue::frames_burst`).
                let own = !T::KEYED && self.q.fresh.inline64.win as usize == WIN64 / SEND_WQE_BB;
                match avx2_of(&self.q.sq) {
                    #[cfg(all(target_arch = "x86_64", target_feature = "sse2", not(loom)))]
                    Some(t) => {
                        super::burst_avx2::fresh64::<T, END, P, Q, M>(t, self, pkts, offload)
                    }
                    _ if own => self.inline64::<T, END>(pkts, offload),
                    _ => self.fresh::<T, Inline64, END>(pkts, offload),
                }
            }
            (Some(PacketBuf::Frame(_)), 0) => self.fresh::<T, Ptrs<true>, END>(pkts, offload),
            (Some(PacketBuf::Ptr(_)), 0) => self.fresh::<T, Ptrs<false>, END>(pkts, offload),
            _ => 0,
        }
    }

    /// [`TxBatch::push_burst_as`] of `frames` as the packets of offload
    /// values `offload` ([`TxQueue::tx_frames`]): with no session open on
    /// an eMPW queue, [`TxBatch::fresh`] takes the frames themselves;
    /// the rest are built into packets on the stack, [`FRAME_CHUNK`] at a
    /// time, for `push_burst_as` (`END` for the chunk that ends the
    /// burst).
    #[inline(always)]
    pub(super) fn push_frames_as<const END: bool>(
        &mut self,
        offload: &TxOffload,
        frames: &[TxFrame<'_>],
    ) -> usize {
        let done = match M::KIND {
            TxKind::Empw if self.open.is_none() => {
                self.fresh_run_of::<TxFrame<'_>, END>(frames, offload)
            }
            _ => 0,
        };
        if done == frames.len() {
            return done;
        }
        self.frames_rest::<END>(offload, frames, done)
    }

    /// [`TxBatch::push_frames_as`] from frame `done` on (what `fresh`
    /// left): the frames built into packets on the stack,
    /// [`FRAME_CHUNK`] at a time, for `push_burst_as`. Returns how many
    /// frames of `frames` are queued in all.
    #[inline(never)]
    pub(super) fn frames_rest<const END: bool>(
        &mut self,
        offload: &TxOffload,
        frames: &[TxFrame<'_>],
        mut done: usize,
    ) -> usize {
        let filler = Packet::from_buf(0, PacketBuf::Ptr(super::Sge::new(0, 0, 0)));
        while let Some(rest) = frames.get(done..).filter(|r| !r.is_empty()) {
            let mut pkts = [filler; FRAME_CHUNK];
            let m = rest.len().min(FRAME_CHUNK);
            for (p, f) in pkts.iter_mut().zip(rest) {
                *p = f.packet(offload);
            }
            let chunk = pkts.get(..m).unwrap_or_default();
            let k = if END && m == rest.len() {
                self.push_burst_as::<true>(chunk)
            } else {
                self.push_burst_as::<false>(chunk)
            };
            done += k;
            if k < m {
                break;
            }
        }
        done
    }

    /// [`TxBatch::push_burst_as`] from packet `done` on: the counted
    /// loops of the open session, `push` for the packets they leave, and
    /// [`TxBatch::fresh`] again whenever no session is open. Returns how
    /// many packets of `pkts` are queued in all.
    #[inline(never)]
    fn push_rest<const END: bool>(&mut self, pkts: &[Packet<'_>], mut done: usize) -> usize {
        loop {
            if M::KIND == TxKind::Empw {
                done += self.append_empw(pkts.get(done..).unwrap_or_default());
                if pkts.get(done).is_some_and(|p| self.next_session(p)) {
                    continue;
                }
            }
            if M::KIND == TxKind::Single {
                done += self.single_run(pkts.get(done..).unwrap_or_default());
            }
            let Some(p) = pkts.get(done) else { break };
            if self.push(p).is_err() {
                break;
            }
            done += 1;
            if M::KIND == TxKind::Empw && self.open.is_none() {
                done += self.fresh_run::<END>(pkts.get(done..).unwrap_or_default());
                if done == pkts.len() {
                    break;
                }
            }
        }
        done
    }

    /// With no session open, the leading packets of `pkts` that are
    /// common packets of one kind `D` ([`Inline64`]: inline frames of 64
    /// bytes, the common small packet; [`Ptrs`]: frames, or pointers, by
    /// pointer on a queue that never inlines) with the first one's
    /// offload values: sessions opened, filled and closed by one loop,
    /// their title built once, the packets written by a counted loop
    /// ([`FillRun`]: inlined for pointers; out of line for 64-byte
    /// frames, [`Fresh::fill`], and on a queue with the AVX2 proof
    /// `fresh_run` calls `burst_avx2::fresh64` instead: this code
    /// compiled with AVX2, the loop inlined). Returns how many packets.
    /// The last session stays open, as `push` leaves it, unless `END`
    /// (the batch completes after the burst, [`TxQueue::tx_burst`]) and
    /// the burst's last packet went into it: then it is closed for
    /// [`CloseReason::Complete`], as `complete` would. Does nothing (0) if
    /// the first packet is no such packet or the ring has no room for a
    /// session: the general path takes over, as it does from wherever
    /// this loop stopped.
    #[inline(never)]
    fn fresh<T: FreshPkt, D: Fresh + FillRun, const END: bool>(
        &mut self,
        pkts: &[T],
        offload: &TxOffload,
    ) -> usize {
        self.fresh_as::<T, D, D, END>(pkts, offload)
    }

    /// [`TxBatch::inline64_as`] with its counted loop out of line
    /// ([`Fresh::fill`]).
    #[inline(never)]
    fn inline64<T: FreshPkt, const END: bool>(&mut self, pkts: &[T], offload: &TxOffload) -> usize {
        self.inline64_as::<T, Inline64, END>(pkts, offload, None)
    }

    /// The body of [`TxBatch::fresh`], `F` its counted loop
    /// ([`FillRun`]).
    #[inline(always)]
    pub(super) fn fresh_as<T: FreshPkt, D: Fresh, F: FillRun, const END: bool>(
        &mut self,
        pkts: &[T],
        offload: &TxOffload,
    ) -> usize {
        if M::KIND != TxKind::Empw || self.open.is_some() || !D::queue_takes(self.inline_limit()) {
            return 0;
        }
        let Some(p0) = pkts.first() else { return 0 };
        let key = offload.words();
        if !D::alike(p0, key) {
            return 0;
        }
        let TxBatch {
            q,
            p: pend,
            open,
            wqes,
            inline,
            last_ds,
        } = self;
        let TxQueue {
            sq,
            ids,
            stage,
            stats,
            tail,
            cfg,
            fresh,
            sig,
            ..
        } = &mut **q;
        let (cfg, full) = (&*cfg, D::full(fresh));
        // The packets this loop may take (free ids up to the id ring's end).
        let all = pkts.len();
        let Some((pkts, ids)) = id_run(pkts, ids, pend.head, *tail, usize::MAX) else {
            return 0;
        };
        let n = pkts.len();
        // The producer counter at which the ring is full (the consumer
        // does not move during a batch).
        let full_at = sq.ci.wrapping_add(sq.size.entries());
        // The title's Ethernet segment, built once per run; each session
        // writes it when it opens (`fresh_session`), not before: until a
        // session opens, the staging area holds the batch's last WQE (the
        // BlueFlame source).
        let eth = title_eth(key);
        let mut out = Out {
            sig,
            sq,
            stage,
            stats,
            p: &mut *pend,
            wqes: &mut *wqes,
            last_ds: &mut *last_ds,
        };
        let mut run = FreshRun {
            pkts,
            ids,
            key,
            eth,
            all,
            offload,
            k: 0,
        };
        while run.k < n {
            // `open_session`: the room of the ring. The common case, a
            // session with the whole room (the configured DS), has its
            // packets, window and close reason from the queue (its own
            // copy of the session's code, with those values).
            let free_bbs = full_at.wrapping_sub(out.p.pi);
            let whole = free_bbs >= full.need;
            let go_on = if whole && out.sq.ring.window(out.p.pi, full.win).is_some() {
                let room = full.room();
                fresh_session::<T, D, F, END, P, Q, true>(&mut out, &mut run, open, inline, room)
            } else if whole {
                let room = full.room();
                fresh_session::<T, D, F, END, P, Q, false>(&mut out, &mut run, open, inline, room)
            } else {
                let max_pk = max_packets_of(M::KIND, cfg);
                let max_inline = u32::from(cfg.max_inline_bytes);
                let max_ds = full
                    .max_ds
                    .min(free_bbs.saturating_mul((SEND_WQE_BB / SEND_WQE_DS) as u32));
                let cap = D::session_cap(max_pk, max_inline, max_ds);
                let at = mpw::TITLE_DS * SEND_WQE_DS + cap * D::TLEN;
                let room = Room {
                    max_ds,
                    cap,
                    win: window_bbs(max_ds),
                    reason: D::close_reason(cap as u32, max_pk, max_inline, at),
                };
                fresh_session::<T, D, F, END, P, Q, false>(&mut out, &mut run, open, inline, room)
            };
            if !go_on {
                break;
            }
        }
        run.k
    }

    /// The packet `p` is next and the open session (if any) did not take
    /// it: if `p` is a plain one-segment packet that [`TxBatch::push`]
    /// would put first into a new session, closes the open one (with the
    /// reason `push` gives) and opens that session, empty, and returns
    /// true; else changes nothing and returns false (`p` takes `push`).
    #[inline(never)]
    fn next_session(&mut self, p: &Packet<'_>) -> bool {
        if p.head().hi() & Head::ODD != 0 {
            return false;
        }
        let (len, frame) = match p.buf() {
            PacketBuf::Frame(f) => (f.data.len(), true),
            PacketBuf::Ptr(s) => (s.length as usize, false),
        };
        if len <= ETH_L2_INLINE_HEADER_SIZE || len > MAX_LEN || !self.ids_room() {
            return false;
        }
        let len = len as u32;
        let desc = if frame && len <= self.inline_limit() {
            Desc::Inline(len)
        } else {
            Desc::Pointer
        };
        if let Some(o) = self.open.as_ref() {
            // It fits (the run stopped for another reason): `push` adds it.
            let Some(r) = self.misfit(o, p, len, desc) else {
                return false;
            };
            self.close(r);
        }
        // No room for a session: `push` refuses `p` (`QueueFull`).
        self.open_session(p, len, desc).is_ok()
    }

    /// Appends the leading common packets of `pkts` to the open eMPW
    /// session, and to the sessions like it that follow; returns how many.
    #[inline(always)]
    fn append_empw(&mut self, pkts: &[Packet<'_>]) -> usize {
        // Once per run: the loop is specialised for the queue's inlining.
        let inline_lim = self.inline_limit();
        if inline_lim >= 64 {
            self.append_run::<SMALL>(pkts, inline_lim)
        } else if inline_lim > 0 {
            self.append_run::<NONE>(pkts, inline_lim)
        } else {
            self.append_run::<POINTER>(pkts, 0)
        }
    }

    /// The loop of [`TxBatch::append_empw`], [`fill`] in `MODE`; frames up
    /// to `inline_lim` bytes are inlined.
    ///
    /// A common packet that the session has no room for (packets, inline
    /// bytes, DS) closes it for that reason and opens the next one, with
    /// the same offload values, as [`TxBatch::push`] does, without leaving
    /// the loop.
    #[inline(always)]
    fn append_run<const MODE: u8>(&mut self, pkts: &[Packet<'_>], inline_lim: u32) -> usize {
        if self.open.is_none() {
            return 0;
        }
        let max_pk = self.max_packets();
        let max_inline = u32::from(self.q.cfg.max_inline_bytes);
        let cfg_ds = u32::from(self.q.cfg.max_wqe_bytes) / SEND_WQE_DS as u32;
        let TxBatch {
            q,
            p: pend,
            open,
            wqes,
            inline,
            last_ds,
        } = self;
        let Some(o) = open.as_mut() else {
            return 0;
        };
        let TxQueue {
            sq,
            ids,
            stage,
            stats,
            tail,
            sig,
            ..
        } = &mut **q;
        // The packets this run may take (free ids up to the id ring's end).
        let Some((pkts, ids)) = id_run(pkts, ids, pend.head, *tail, usize::MAX) else {
            return 0;
        };
        let n = pkts.len();
        let mut out = Out {
            sig,
            sq,
            stage,
            stats,
            p: pend,
            wqes,
            last_ds,
        };
        let key = o.offload.words();
        let mut sess = Sess::of(o, max_pk, max_inline);
        // Build the session in the ring from here on, if it does not
        // cross the ring end: what is staged so far (its Ethernet segment
        // and the descriptors `push` added) moves there once.
        if !o.direct {
            if let Some(w) = out.sq.ring.window(o.pi, max_bbs(o)) {
                let end = o.ds as usize * SEND_WQE_DS;
                let title = mpw::TITLE_DS * SEND_WQE_DS;
                if let (Some(d), Some(s)) = (
                    w.get_mut(SEND_WQE_DS..end),
                    out.stage.0.get(SEND_WQE_DS..end),
                ) {
                    if end == title {
                        // A fresh session (the common case): a fixed-size
                        // copy, no `memcpy` call.
                        if let (Ok(d), Ok(s)) = (
                            <&mut [u8; (mpw::TITLE_DS - 1) * SEND_WQE_DS]>::try_from(d),
                            <&[u8; (mpw::TITLE_DS - 1) * SEND_WQE_DS]>::try_from(s),
                        ) {
                            *d = *s;
                        }
                    } else {
                        d.copy_from_slice(s);
                    }
                    o.direct = true;
                }
            }
        }
        // Packets of `pkts` counted in `out.p` (and the session).
        let mut counted = 0usize;
        let mut k = 0usize;
        let lim = Limits {
            max_pk,
            max_inline,
            cfg_ds,
        };
        loop {
            // Runs of equal packets into sessions built in the ring, closed
            // and reopened without leaving the loop.
            if o.direct {
                if let (Some(rest), Some(rest_ids)) = (pkts.get(k..n), ids.get_mut(k..n)) {
                    let mut run = Run {
                        out: &mut out,
                        o: &mut *o,
                        s: &mut sess,
                        key,
                        lim,
                        counted: &mut counted,
                        base: k,
                        inline: &mut *inline,
                    };
                    let (j, gone) = match (MODE, rest.first().map(|p| p.buf())) {
                        (SMALL, Some(PacketBuf::Frame(f))) => match f.data.len() {
                            len @ 32..=44 => run.sessions::<M, 48>(rest, rest_ids, len),
                            len @ 45..=60 => run.sessions::<M, 64>(rest, rest_ids, len),
                            len @ 61..=64 => run.sessions80::<M>(rest, rest_ids, len),
                            _ => (0, false),
                        },
                        (POINTER, Some(_)) => run.sessions::<M, 16>(rest, rest_ids, 0),
                        _ => (0, false),
                    };
                    k += j;
                    if gone {
                        *open = None;
                        return k;
                    }
                    if k == n {
                        break;
                    }
                }
            }
            // The loop takes what fits the session (at most its packets
            // left); the packet it stops at, one descriptor out of it.
            let m = (n - k).min(sess.left);
            let (Some(rest), Some(rest_ids)) = (pkts.get(k..k + m), ids.get_mut(k..k + m)) else {
                break;
            };
            let dst = dest(&mut out.sq.ring, &mut out.stage.0, o);
            // The counted loop first; the general one where it stopped at
            // a packet (not at the session's limits: then the next packet
            // closes the session, `fill_one`).
            let (mut j, full) = match MODE {
                SMALL => same_run(dst, rest, rest_ids, key, &mut sess),
                POINTER => match rest.first().map(|p| p.buf()) {
                    Some(PacketBuf::Frame(_)) => {
                        fill_ptrs::<true>(dst, rest, rest_ids, key, &mut sess)
                    }
                    _ => fill_ptrs::<false>(dst, rest, rest_ids, key, &mut sess),
                },
                _ => (0, false),
            };
            if let (false, Some(rest), Some(rest_ids)) =
                (full, rest.get(j..), rest_ids.get_mut(j..))
            {
                j += fill::<MODE>(dst, rest, rest_ids, key, &mut sess);
            }
            k += j;
            let (Some(p), Some(id)) = (pkts.get(k), ids.get_mut(k)) else {
                break;
            };
            let exit = match fill_one(dst, p, key, inline_lim, &mut sess) {
                Ok(()) => {
                    *id = p.id;
                    k += 1;
                    continue;
                }
                Err(e) => e,
            };
            let Exit::Full(reason, tlen) = exit else {
                break;
            };
            // The session has no room for the next packet: close it for
            // `reason` and open the next one (`push`: `misfit`, `close`,
            // `open_session`), for which the packet fits; if the ring has
            // no room for that, end the run (`push` refuses the packet).
            sync(o, &mut out, &mut counted, k, &sess, max_inline, inline);
            out.close_session::<M>(o, reason);
            let room_ds = out
                .free_wqebbs()
                .saturating_mul((SEND_WQE_BB / SEND_WQE_DS) as u32);
            let max_ds = cfg_ds.min(room_ds);
            if mpw::TITLE_DS as u32 + (tlen / SEND_WQE_DS) as u32 > max_ds {
                *open = None;
                return k;
            }
            // The title: its Ethernet segment is still in the staging area
            // (same offload values; the close wrote the control segment
            // and bytes past the DS count only).
            *o = Open {
                pi: out.p.pi,
                ds: mpw::TITLE_DS as u32,
                max_ds,
                pkts: 0,
                ptr_pkts: 0,
                inline_bytes: 0,
                offload: o.offload,
                len: 0,
                mpw_inline: false,
                direct: false,
            };
            let title = SEND_WQE_DS..mpw::TITLE_DS * SEND_WQE_DS;
            if let Some(w) = out.sq.ring.window(o.pi, max_bbs(o)) {
                if let (Some(d), Some(s)) = (w.get_mut(title.clone()), out.stage.0.get(title)) {
                    d.copy_from_slice(s);
                    o.direct = true;
                }
            } else if MODE != POINTER {
                // Staged, on a queue that inlines: the staging area starts
                // as a copy of the session's WQEBBs (`load_wrapping`), the
                // title kept.
                let st = &mut out.stage.0;
                let eth = st
                    .get(title.clone())
                    .and_then(|t| <[u8; SEND_WQE_DS]>::try_from(t).ok());
                let bbs = max_bbs(o) as usize;
                load_wrapping(&mut out.sq.ring, o.pi, st.get_mut(..bbs * SEND_WQE_BB));
                if let (Some(d), Some(eth)) = (st.get_mut(title), eth) {
                    d.copy_from_slice(&eth);
                }
            }
            sess = Sess::of(o, max_pk, max_inline);
        }
        sync(o, &mut out, &mut counted, k, &sess, max_inline, inline);
        k
    }
}

impl<P: DoorbellPolicy, Q: QpKind, M: TxMode> TxBatch<'_, '_, P, Q, M> {
    /// One SEND WQE per packet, for the leading plain packets of `pkts`:
    /// one-segment frames, no TSO, no VLAN insertion, longer than
    /// [`TxConfig::single_inline_max`](super::TxConfig::single_inline_max)
    /// (the frame by pointer after the inline L2 header the queue needs).
    /// Each WQE is one WQEBB, built as eight 8-byte words and written
    /// straight into the ring, at most up to its end (a failed packet
    /// writes nothing: the tests come first); the bytes, shadow entry and
    /// counters are [`TxBatch::push`]'s (`single`). Returns how many.
    #[inline(never)]
    fn single_run(&mut self, pkts: &[Packet<'_>]) -> usize {
        match self.q.sq.lim.eth_min_inline {
            0 => self.single_run_as::<false>(pkts),
            18 => self.single_run_as::<true>(pkts),
            _ => 0,
        }
    }

    /// [`TxBatch::single_run`] on a queue that inlines the 18-byte L2
    /// header (`MIN18`) or no header.
    #[inline(always)]
    fn single_run_as<const MIN18: bool>(&mut self, pkts: &[Packet<'_>]) -> usize {
        let inline_max = usize::from(self.q.cfg.single_inline_max);
        let TxBatch {
            q,
            p: pend,
            wqes,
            inline,
            last_ds,
            ..
        } = self;
        let TxQueue {
            sq,
            ids,
            stage,
            stats,
            tail,
            sig,
            ..
        } = &mut **q;
        let min18 = MIN18;
        // The signalling constants in registers (the loop reads them per
        // packet).
        let sig = *sig;
        // As many as the ring, the free ids and the ids up to the id
        // ring's end take.
        let free_bbs = sq.entries.saturating_sub(in_flight(pend.pi, sq.ci)) as usize;
        let Some((pkts, ids)) = id_run(pkts, ids, pend.head, *tail, free_bbs) else {
            return 0;
        };
        let n = pkts.len();
        // The constant words: DS, control segment's second word (QPN and
        // DS), inline header size.
        let (ds, hdr_sz) = if min18 {
            (4u32, ETH_L2_INLINE_HEADER_SIZE as u16)
        } else {
            (3, 0)
        };
        let qpn_ds = sq.lim.qpn_ds_bits | (ds << ctrl_bits::DS_SHIFT);
        // Byte `i` of the WQE is byte `i % 8` of word `i / 8` taken
        // little-endian (`to_le_bytes` below), whatever the host's order.
        let qpn_ds_hi = u64::from(u32::from_le_bytes(qpn_ds.to_be_bytes())) << 32;
        let hdr_sz_word = u64::from(u16::from_le_bytes(hdr_sz.to_be_bytes())) << 32;
        let fm_word = |fm: u8| u64::from(fm) << ((CTRL_FM_CE_SE - 8) * 8);
        // Packets to the next CQE request: the counters since the last one
        // (WQEs, WQEBBs, packets) all grow by one per packet here, so the
        // first that reaches its threshold does it after this many.
        let until = |p: &Pending| {
            sig.drain_wqebbs
                .saturating_sub(p.wqebbs)
                .min(sig.drain_pkts.saturating_sub(p.pkts))
                .min(sig.every.saturating_sub(p.wqes))
                .max(1)
        };
        let fresh = Pending::default();
        let mut countdown = until(pend);
        let mut since = 0u32;
        let mut signaled = false;
        let mut pi = pend.pi;
        let mut head = pend.head;
        // The shadow tag (`tx_wr_id`): both counters grow by one per WQE,
        // and the entry takes `pi` before and `head` after its packet.
        let skew = tx_wr_id(pi, head.wrapping_add(1)) & !u64::from(u32::MAX);
        let mut k = 0;
        'runs: while k < n {
            // The WQEBBs from `pi` to the ring end (or `n`): one window.
            let to_end = (sq.ring.blocks() - (pi & sq.ring.mask())) as usize;
            let m = (n - k).min(to_end);
            let (Some(w), Some(run), Some(run_ids)) = (
                sq.ring.window(pi, m as u32),
                pkts.get(k..k + m),
                ids.get_mut(k..k + m),
            ) else {
                break;
            };
            let slot = sq.size.slot(pi);
            let Some(shadow) = sq.shadow.get_mut(slot..slot + m) else {
                break;
            };
            for (((d, p), id), e) in w
                .chunks_exact_mut(SEND_WQE_BB)
                .zip(run)
                .zip(run_ids.iter_mut())
                .zip(shadow.iter_mut())
            {
                let PacketBuf::Frame(f) = p.buf() else {
                    break 'runs;
                };
                let len = f.data.len();
                if p.head().hi() & Head::ODD != 0
                    || len <= inline_max
                    || len.wrapping_sub(ETH_L2_INLINE_HEADER_SIZE + 1)
                        > MAX_LEN - ETH_L2_INLINE_HEADER_SIZE - 1
                {
                    break 'runs;
                }
                let (Ok(d), Some(l2)) = (
                    <&mut [u8; SEND_WQE_BB]>::try_from(d),
                    f.data.first_chunk::<ETH_L2_INLINE_HEADER_SIZE>(),
                ) else {
                    break 'runs;
                };
                // `record_id`, then `finish`'s counters and CQE decision.
                head = head.wrapping_add(1);
                since += 1;
                countdown -= 1;
                let signal = countdown == 0;
                let fm_ce_se = if signal {
                    FM_CE_ALWAYS
                } else {
                    sig.fm_unsignaled
                };
                let index = u32::from(wq_counter16(pi)) << ctrl_bits::WQE_INDEX_SHIFT;
                // (The offload values as the head holds them.)
                let (o_lo, o_hi) = (p.head().lo(), p.head().hi());
                // Control segment; Ethernet segment: the packet's offload
                // values, no MSS, the inline header size (and with 18
                // header bytes, its first two).
                let w0 = u64::from(u32::from_le_bytes((ctrl_bits::SEND | index).to_be_bytes()))
                    | qpn_ds_hi;
                let w2 = (o_lo >> 32) | (o_hi & 0xffff) << 32;
                let w3 = u64::from((o_lo as u32).swap_bytes()) | hdr_sz_word;
                let (lo, hi) = d.split_at_mut(32);
                let w3 = if min18 {
                    w3 | u64::from(u16::from_le_bytes([l2[0], l2[1]])) << 48
                } else {
                    w3
                };
                let ctrl = (u128::from(w0) | u128::from(fm_word(fm_ce_se)) << 64).to_le_bytes();
                let eth = (u128::from(w2) | u128::from(w3) << 64).to_le_bytes();
                let (c, e2) = lo.split_at_mut(16);
                c.copy_from_slice(&ctrl);
                e2.copy_from_slice(&eth);
                let (h, t) = hi.split_at_mut(16);
                if min18 {
                    // The other 16 header bytes, then the rest by pointer.
                    h.copy_from_slice(l2.last_chunk::<16>().unwrap_or(&[0; 16]));
                    t.copy_from_slice(&data_seg(
                        (len - ETH_L2_INLINE_HEADER_SIZE) as u32,
                        f.lkey,
                        f.addr.wrapping_add(ETH_L2_INLINE_HEADER_SIZE as u64),
                    ));
                } else {
                    h.copy_from_slice(&data_seg(len as u32, f.lkey, f.addr));
                    t.fill(0);
                }
                // `tx_shadow(pi, head, 1, signal)`, its tag constant here.
                *e = tx_entry(skew | u64::from(head), pi, 1, signal);
                if signal {
                    signaled = true;
                    since = 0;
                    countdown = until(&fresh);
                }
                pi = pi.wrapping_add(1);
                *id = p.id;
                k += 1;
            }
        }
        if k > 0 {
            let k32 = k as u32;
            // The counters since the last CQE request.
            let (wqes0, wqebbs0, ptr0, pkts0) = if signaled {
                (0, 0, 0, 0)
            } else {
                (pend.wqes, pend.wqebbs, pend.ptr_pkts, pend.pkts)
            };
            pend.wqes = wqes0 + since;
            pend.wqebbs = wqebbs0 + since;
            pend.ptr_pkts = ptr0 + since;
            pend.pkts = pkts0 + since;
            pend.head = head;
            pend.pi = pi;
            *last_ds = ds;
            // The last WQE in the staging area, for the BlueFlame copy and
            // a CQE requested at burst end (`complete`).
            let lastw = sq.ring.read(pi.wrapping_sub(1));
            if let Some(d) = stage.0.first_chunk_mut::<SEND_WQE_BB>() {
                *d = lastw;
            }
            *wqes += k32;
            *inline |= min18;
            stats.packets += k as u64;
            stats.single_wqes += k as u64;
        }
        k
    }
}

/// The session limits of a queue.
#[derive(Debug, Clone, Copy)]
struct Limits {
    max_pk: u32,
    max_inline: u32,
    /// `max_wqe_bytes` in DS.
    cfg_ds: u32,
}

/// The parts [`Run::sessions`] works on: the batch's, the open session
/// (built in the ring) and the loop's state.
pub(super) struct Run<'r, 'x, 'a, P: DoorbellPolicy, Q: QpKind> {
    out: &'r mut Out<'x, 'a, P, Q>,
    o: &'r mut Open,
    s: &'r mut Sess,
    key: (u64, u16),
    lim: Limits,
    /// Packets counted in the batch ([`sync`]), as an index into the
    /// run of [`TxBatch::append_run`], whose packets start at `base` here.
    counted: &'r mut usize,
    base: usize,
    inline: &'r mut bool,
}

impl<P: DoorbellPolicy, Q: QpKind> Run<'_, '_, '_, P, Q> {
    /// Appends the leading packets of `pkts` that are all alike (inline
    /// frames of `len` bytes, `TLEN`-byte descriptors; or, `TLEN` 16,
    /// pointers) to the open session, built in the ring, their ids to
    /// `ids`; when a session is full and the next packet is alike, closes
    /// it (the reason `push` gives) and opens the next one in the ring,
    /// without leaving the loop. Returns how many packets, and whether the
    /// ring had no room for the next session (then none is open: `push`
    /// refuses the packet). Stops, with the session open and its state in
    /// `s`, at a packet that is not alike, or when the next session cannot
    /// be built in the ring (it crosses the ring end; then it is open in
    /// the staging area).
    #[inline(never)]
    fn sessions<M: TxMode, const TLEN: usize>(
        &mut self,
        pkts: &[Packet<'_>],
        ids: &mut [u64],
        len: usize,
    ) -> (usize, bool) {
        self.sessions_as::<M, TLEN, false>(pkts, ids, len)
    }

    /// [`Run::sessions`] of 80-byte descriptors (frames of 61..=64 bytes);
    /// with AVX2 for 64-byte frames if the queue has the proof
    /// (`burst_avx2`: the whole loop compiled with AVX2, the same bytes).
    #[inline(always)]
    fn sessions80<M: TxMode>(
        &mut self,
        pkts: &[Packet<'_>],
        ids: &mut [u64],
        len: usize,
    ) -> (usize, bool) {
        match (len, avx2_of(self.out.sq)) {
            #[cfg(all(target_arch = "x86_64", target_feature = "sse2", not(loom)))]
            (64, Some(t)) => super::burst_avx2::sessions64::<M, P, Q>(t, self, pkts, ids),
            _ => self.sessions::<M, 80>(pkts, ids, len),
        }
    }

    /// [`Run::sessions`], its counted loop of 64-byte frames inlined if
    /// `AVX` (the caller is compiled with AVX2).
    #[inline(always)]
    pub(super) fn sessions_as<M: TxMode, const TLEN: usize, const AVX: bool>(
        &mut self,
        pkts: &[Packet<'_>],
        ids: &mut [u64],
        len: usize,
    ) -> (usize, bool) {
        let mut k = 0;
        loop {
            let (Some(w), Some(rest), Some(rest_ids)) = (
                self.out.sq.ring.window(self.o.pi, max_bbs(self.o)),
                pkts.get(k..),
                ids.get_mut(k..),
            ) else {
                return (k, false);
            };
            let (j, full) = if TLEN == SEND_WQE_DS {
                match rest.first().map(|p| p.buf()) {
                    Some(PacketBuf::Frame(_)) => {
                        fill_ptrs::<true>(w, rest, rest_ids, self.key, self.s)
                    }
                    _ => fill_ptrs::<false>(w, rest, rest_ids, self.key, self.s),
                }
            } else {
                if TLEN == 80 && len == 64 {
                    if AVX {
                        fill_same_as::<80, 64>(w, rest, rest_ids, self.key, 64, self.s)
                    } else {
                        fill_same64(w, rest, rest_ids, self.key, self.s)
                    }
                } else {
                    fill_same::<TLEN>(w, rest, rest_ids, self.key, len, self.s)
                }
            };
            k += j;
            if !full {
                return (k, false);
            }
            // The session is full: the next packet closes it if it is
            // alike (else it takes the general loop).
            let Some(p) = pkts.get(k) else {
                return (k, false);
            };
            let alike = common(p, self.key)
                && match p.buf() {
                    PacketBuf::Frame(f) if TLEN != SEND_WQE_DS => f.data.len() == len,
                    PacketBuf::Frame(f) => ptr_len_ok(f.data.len()),
                    PacketBuf::Ptr(x) => TLEN == SEND_WQE_DS && ptr_len_ok(x.length as usize),
                };
            if !alike {
                return (k, false);
            }
            // `fill_one`'s reason (`misfit`'s order).
            let reason = if self.s.left == 0 {
                CloseReason::MaxPackets
            } else if TLEN != SEND_WQE_DS && (self.s.inl as usize) < len {
                CloseReason::MaxInlineBytes
            } else {
                no_room(self.s.at + TLEN)
            };
            if M::KIND != TxKind::Empw {
                // (Not reached: only eMPW runs take this loop.)
                return (k, false);
            }
            let title = match w.get(SEND_WQE_DS..mpw::TITLE_DS * SEND_WQE_DS) {
                Some(t) => <[u8; SEND_WQE_DS]>::try_from(t).unwrap_or_default(),
                None => return (k, false),
            };
            // Close it in place (`sync`, `close_session`, `finish_in_place`
            // in one, with the counters in hand: the same bytes, shadow
            // and counters).
            let (s, o) = (&*self.s, &*self.o);
            // `sync`: the packets since the last one, the inline flag.
            let new = (self.base + k - *self.counted) as u32;
            *self.counted = self.base + k;
            if self.lim.max_inline - s.inl != o.inline_bytes {
                *self.inline = true;
            }
            let p = &mut *self.out.p;
            p.head = p.head.wrapping_add(new);
            p.pkts += new;
            // `close_session`.
            p.ptr_pkts += s.ptrs;
            let stats = &mut *self.out.stats;
            stats.packets += u64::from(new);
            stats.sessions += 1;
            if let Some(c) = stats.closes.get_mut(reason as usize) {
                *c += 1;
            }
            // `finish_in_place`.
            let (pi, ds) = (o.pi, (s.at / SEND_WQE_DS) as u32);
            let bbs = wqebbs_of(ds);
            p.wqes += 1;
            p.wqebbs += bbs;
            let sig = &self.out.sig;
            let signal =
                (p.wqebbs >= sig.drain_wqebbs) | (p.pkts >= sig.drain_pkts) | (p.wqes >= sig.every);
            let fm_ce_se = if signal {
                FM_CE_ALWAYS
            } else {
                sig.fm_unsignaled
            };
            let ctrl = ctrl_seg(
                ctrl_bits::EMPW,
                pi,
                self.out.sq.lim.qpn_ds_bits,
                ds,
                fm_ce_se,
            );
            if let Some(c) = w.first_chunk_mut::<SEND_WQE_DS>() {
                *c = ctrl;
            }
            // (Nothing past the DS count: the ring keeps its bytes there.)
            let end = bbs as usize * SEND_WQE_BB;
            let st = &mut self.out.stage.0;
            if P::BLUEFLAME {
                // The BlueFlame copy is taken from the staging area.
                if let (Some(d), Some(src)) = (st.get_mut(..end), w.get(..end)) {
                    d.copy_from_slice(src);
                }
            } else if let Some(c) = st.first_chunk_mut::<SEND_WQE_DS>() {
                *c = ctrl;
            }
            let slot = self.out.sq.size.slot(pi);
            if let Some(e) = self.out.sq.shadow.get_mut(slot) {
                *e = tx_shadow(pi, p.head, bbs, signal);
            }
            p.pi = pi.wrapping_add(bbs);
            *self.out.wqes += 1;
            *self.out.last_ds = ds;
            if signal {
                p.reset_since();
            }
            // The next session (`open_session`), if the ring has room.
            let out = &mut *self.out;
            let room_ds = out
                .free_wqebbs()
                .saturating_mul((SEND_WQE_BB / SEND_WQE_DS) as u32);
            let max_ds = self.lim.cfg_ds.min(room_ds);
            if mpw::TITLE_DS as u32 + (TLEN / SEND_WQE_DS) as u32 > max_ds {
                return (k, true);
            }
            let o = &mut *self.o;
            o.pi = out.p.pi;
            o.ds = mpw::TITLE_DS as u32;
            o.max_ds = max_ds;
            o.pkts = 0;
            o.ptr_pkts = 0;
            o.inline_bytes = 0;
            o.direct = false;
            *self.s = Sess {
                at: mpw::TITLE_DS * SEND_WQE_DS,
                end: max_ds.min(u32::from(MAX_DS)) as usize * SEND_WQE_DS,
                inl: self.lim.max_inline,
                left: self.lim.max_pk as usize,
                ptrs: 0,
            };
            // Its title: the closed session's Ethernet segment (the same
            // offload values), if the session does not cross the ring
            // end; else it is open in the staging area, where `push` and
            // the general loop go on (the title is there too).
            let Some(d) = out
                .sq
                .ring
                .window(o.pi, max_bbs(o))
                .and_then(|w| w.get_mut(SEND_WQE_DS..mpw::TITLE_DS * SEND_WQE_DS))
            else {
                // Staged: for inline frames, the staging area starts as a
                // copy of the session's WQEBBs (`load_wrapping`), the title
                // over it.
                if TLEN != SEND_WQE_DS {
                    let bbs = max_bbs(o) as usize;
                    let st = &mut out.stage.0;
                    load_wrapping(&mut out.sq.ring, o.pi, st.get_mut(..bbs * SEND_WQE_BB));
                    if let Some(d) = st.get_mut(SEND_WQE_DS..mpw::TITLE_DS * SEND_WQE_DS) {
                        d.copy_from_slice(&title);
                    }
                }
                return (k, false);
            };
            d.copy_from_slice(&title);
            o.direct = true;
        }
    }
}

/// Whether a frame of `len` bytes goes by pointer (`push`: not too short,
/// not too long).
#[inline(always)]
fn ptr_len_ok(len: usize) -> bool {
    len.wrapping_sub(ETH_L2_INLINE_HEADER_SIZE + 1) < MAX_LEN - ETH_L2_INLINE_HEADER_SIZE
}

/// [`fill`] writes inline frames of 32..=64 bytes; others leave the loop.
const SMALL: u8 = 0;
/// [`fill`] writes pointers (a queue that never inlines).
const POINTER: u8 = 1;
/// [`fill`] writes nothing: every packet leaves the loop ([`fill_one`]).
const NONE: u8 = 2;

/// The open session in the burst loop's registers.
#[derive(Debug, Clone, Copy)]
struct Sess {
    /// Byte offset of the next descriptor in the staging area.
    at: usize,
    /// Byte offset of the session's end: 63 DS, or fewer
    /// (`max_wqe_bytes`, ring room).
    end: usize,
    /// Inline bytes left.
    inl: u32,
    /// Packets left.
    left: usize,
    /// Pointer packets in the session.
    ptrs: u32,
}

impl Sess {
    #[inline(always)]
    fn of(o: &Open, max_pk: u32, max_inline: u32) -> Self {
        Self {
            at: o.ds as usize * SEND_WQE_DS,
            end: o.max_ds.min(u32::from(MAX_DS)) as usize * SEND_WQE_DS,
            inl: max_inline.saturating_sub(o.inline_bytes),
            left: max_pk.saturating_sub(o.pkts) as usize,
            ptrs: o.ptr_pkts,
        }
    }
}

/// Why [`fill`] stopped.
#[derive(Debug, Clone, Copy)]
enum Exit {
    /// At a packet the loop does not write (or the end of the packets).
    Other,
    /// At a common packet the session has no room for: `push` closes the
    /// session for this reason; the packet's descriptor takes this many
    /// bytes.
    Full(CloseReason, usize),
}

/// Whether `p` is a common packet of the session whose offload values are
/// `key` (the burst path's shape test; its length is tested by the
/// descriptor's writer).
#[inline(always)]
fn common(p: &Packet<'_>, key: (u64, u16)) -> bool {
    // The head: the offload words, then no shape bit but `Head::PTR` (one
    // segment, no TSO, no VLAN insertion) with the flags, one 4-byte word.
    let h = p.head();
    h.lo() == key.0 && (h.hi() as u32 & !(Head::PTR as u32)) == Head::key32(key, 0)
}

/// A packet [`TxBatch::fresh`] reads: a [`Packet`], or a [`TxFrame`]
/// (a plain frame whose offload values are the burst's, so that it has
/// nothing to test but its length).
pub(super) trait FreshPkt {
    /// Whether [`FreshPkt::common`] reads the session's offload words
    /// (the counted loops keep them in registers only then: `FillRun`).
    const KEYED: bool;
    /// Whether it is a common packet ([`common`]) of the session whose
    /// offload values are `key`, its kind and length aside.
    fn common(&self, key: (u64, u16)) -> bool;
    /// The offload words of a run whose first packet is this one and
    /// whose offload values are `offload` (for a [`Packet`], its own:
    /// the callers pass them).
    fn run_key(&self, offload: &TxOffload) -> (u64, u16);
    /// Its (first) segment.
    fn buf(&self) -> PacketBuf<'_>;
    /// Its bytes if it is a frame of 64 bytes.
    fn frame64(&self) -> Option<&[u8; 64]>;
    /// Its bytes if it is a common frame of 64 bytes of the session whose
    /// key is `key` ([`FreshPkt::common`], [`FreshPkt::frame64`]; `key`
    /// made by [`HeadEq::key`] of [`Head::key`] of the session's offload
    /// words and 64).
    fn common64<E: HeadEq>(&self, key: E::Key) -> Option<&[u8; 64]>;
    /// Whether it is a common frame of 64 bytes of the session whose key
    /// is `key` ([`FreshPkt::common64`] without its bytes: for a
    /// [`Packet`], one comparison of its head, which says its length).
    fn is64<E: HeadEq>(&self, key: E::Key) -> bool;
    /// The bytes of `a` and `b` if both are common frames of 64 bytes of
    /// the session whose key is `key` (one test for both: [`HeadEq::pair64`]);
    /// `None` says nothing (then each is tested on its own,
    /// [`FreshPkt::common64`]).
    fn pair64<'p, E: HeadEq>(
        a: &'p Self,
        b: &'p Self,
        key: E::Key,
    ) -> Option<(&'p [u8; 64], &'p [u8; 64])>;
    /// Its id.
    fn id(&self) -> u64;
}

impl FreshPkt for Packet<'_> {
    const KEYED: bool = true;
    #[inline(always)]
    fn common(&self, key: (u64, u16)) -> bool {
        common(self, key)
    }
    /// Its own head words (`offload` is its offload values).
    #[inline(always)]
    fn run_key(&self, _: &TxOffload) -> (u64, u16) {
        self.offload_words()
    }
    #[inline(always)]
    fn buf(&self) -> PacketBuf<'_> {
        Packet::buf(self)
    }
    /// (A pointer's bytes are empty: no test of its kind.)
    #[inline(always)]
    fn frame64(&self) -> Option<&[u8; 64]> {
        self.data.try_into().ok()
    }
    #[inline(always)]
    fn pair64<'p, E: HeadEq>(
        a: &'p Self,
        b: &'p Self,
        key: E::Key,
    ) -> Option<(&'p [u8; 64], &'p [u8; 64])> {
        E::pair64(a, b, key)
    }
    /// One comparison of the head with the key (offload words, shape 0:
    /// a plain frame with its bytes at hand, length 64), then the length
    /// of the bytes (the same, but a slice's length to the compiler).
    #[inline(always)]
    fn common64<E: HeadEq>(&self, key: E::Key) -> Option<&[u8; 64]> {
        E::one64(self, key)
    }
    /// Its head alone: a head that is `key` (of 64 bytes) is that of a
    /// plain frame of 64 bytes (`Packet::fixed`), its bytes not read.
    #[inline(always)]
    fn is64<E: HeadEq>(&self, key: E::Key) -> bool {
        E::same(self.head(), key)
    }
    #[inline(always)]
    fn id(&self) -> u64 {
        self.id
    }
}

impl FreshPkt for TxFrame<'_> {
    const KEYED: bool = false;
    /// Always: a frame is plain by its type, its offload values are the
    /// burst's (the run's key).
    #[inline(always)]
    fn common(&self, _: (u64, u16)) -> bool {
        true
    }
    #[inline(always)]
    fn run_key(&self, offload: &TxOffload) -> (u64, u16) {
        offload.words()
    }
    #[inline(always)]
    fn buf(&self) -> PacketBuf<'_> {
        PacketBuf::Frame(self.sge)
    }
    /// (The frame's bytes directly: no variant to tell.)
    #[inline(always)]
    fn frame64(&self) -> Option<&[u8; 64]> {
        self.sge.data.try_into().ok()
    }
    /// Its length only (plain, the burst's offload values, by its type).
    #[inline(always)]
    fn common64<E: HeadEq>(&self, _: E::Key) -> Option<&[u8; 64]> {
        self.frame64()
    }
    /// Its length only.
    #[inline(always)]
    fn is64<E: HeadEq>(&self, key: E::Key) -> bool {
        self.common64::<E>(key).is_some()
    }
    /// `None`: a frame's test is its length only, each on its own.
    #[inline(always)]
    fn pair64<'p, E: HeadEq>(
        _: &'p Self,
        _: &'p Self,
        _: E::Key,
    ) -> Option<(&'p [u8; 64], &'p [u8; 64])> {
        None
    }
    #[inline(always)]
    fn id(&self) -> u64 {
        self.id
    }
}

/// How the counted loops of 64-byte frames compare a packet's [`Head`]
/// with the session's key ([`Head::key`]): [`Words`], or with AVX2 one
/// 16-byte vector compare (`burst_avx2`).
pub(super) trait HeadEq {
    /// The key, as the loop keeps it.
    type Key: Copy;
    /// The key of a session of offload words `words`: the head of its
    /// common 64-byte frames ([`Head::key`] of `words` and 64; the only
    /// keys there are).
    fn key(words: (u64, u16)) -> Self::Key;
    /// Whether `h` is `key`.
    fn same(h: &Head, key: Self::Key) -> bool;
    /// The bytes of `p` if its head is `key`, a key of 64-byte frames
    /// ([`Head::key`] of 64): it is then a plain frame of 64 bytes.
    #[inline(always)]
    fn one64<'p>(p: &'p Packet<'_>, key: Self::Key) -> Option<&'p [u8; 64]> {
        if Self::same(p.head(), key) {
            p.data.try_into().ok()
        } else {
            None
        }
    }
    /// The bytes of `a` and `b` if the heads of both are `key`, a key of
    /// 64-byte frames ([`Head::key`] of 64): both are then plain frames of
    /// 64 bytes; `None` says nothing.
    #[inline(always)]
    fn pair64<'p>(
        a: &'p Packet<'_>,
        b: &'p Packet<'_>,
        key: Self::Key,
    ) -> Option<(&'p [u8; 64], &'p [u8; 64])> {
        if Self::same(a.head(), key) && Self::same(b.head(), key) {
            Some((a.frame64()?, b.frame64()?))
        } else {
            None
        }
    }
}

/// [`HeadEq`] as two 8-byte words.
pub(super) struct Words;

impl HeadEq for Words {
    type Key = (u64, u64);
    #[inline(always)]
    fn key(words: (u64, u16)) -> (u64, u64) {
        let key = Head::key(words, 64);
        (key as u64, (key >> 64) as u64)
    }
    #[inline(always)]
    fn same(h: &Head, key: (u64, u64)) -> bool {
        h.lo() == key.0 && h.hi() == key.1
    }
}

/// The burst loop: appends the leading packets of `pkts` that `MODE`
/// writes and that fit, to the session `s` (staged in `st`), their ids to
/// `ids`; returns how many. The caller passes at most the session's
/// packets left; the packet the loop stops at goes to [`fill_one`].
///
/// Not inlined, and nothing called in the loop: it gets the registers to
/// itself.
#[inline(never)]
fn fill<const MODE: u8>(
    st: &mut [u8],
    pkts: &[Packet<'_>],
    ids: &mut [u64],
    key: (u64, u16),
    s: &mut Sess,
) -> usize {
    if MODE == NONE {
        return 0;
    }
    let Sess {
        mut at,
        end,
        mut inl,
        mut ptrs,
        ..
    } = *s;
    let mut k = 0;
    for (p, id) in pkts.iter().zip(ids.iter_mut()) {
        if !common(p, key) {
            break;
        }
        match p.buf() {
            PacketBuf::Frame(f) if MODE == SMALL => {
                // 32..=64 bytes, inline: header, two overlapping 32-byte
                // moves (the padding after the frame is not written).
                let len = f.data.len();
                if len.wrapping_sub(32) > 32 || inl < len as u32 {
                    break;
                }
                let tlen = (len + 4 + 15) & !15;
                let next = at + tlen;
                if next > end {
                    break;
                }
                let (Some(w), Some(head), Some(tail)) = (
                    st.get_mut(at..at + 80),
                    f.data.first_chunk::<32>(),
                    f.data.last_chunk::<32>(),
                ) else {
                    break;
                };
                // Nothing past the frame: the session may be in the
                // ring, where its last WQEBB ends the reservation.
                if let Some(d) = w.get_mut(..4) {
                    d.copy_from_slice(&inline_header(len as u32));
                }
                if let Some(d) = w.get_mut(4..36) {
                    d.copy_from_slice(head);
                }
                if let Some(d) = w.get_mut(len - 28..len + 4) {
                    d.copy_from_slice(tail);
                }
                inl -= len as u32;
                at = next;
            }
            PacketBuf::Ptr(_) if MODE == SMALL => break,
            buf => {
                // By pointer.
                let (len, lkey, addr) = match buf {
                    PacketBuf::Frame(f) => (f.data.len(), f.lkey, f.addr),
                    PacketBuf::Ptr(s) => (s.length as usize, s.lkey, s.addr),
                };
                if len.wrapping_sub(ETH_L2_INLINE_HEADER_SIZE + 1)
                    > MAX_LEN - ETH_L2_INLINE_HEADER_SIZE - 1
                    || at + SEND_WQE_DS > end
                {
                    break;
                }
                if let Some(w) = st.get_mut(at..at + SEND_WQE_DS) {
                    w.copy_from_slice(&data_seg(len as u32, lkey, addr));
                }
                ptrs += 1;
                at += SEND_WQE_DS;
            }
        }
        *id = p.id;
        k += 1;
    }
    *s = Sess {
        at,
        end,
        inl,
        left: s.left - k,
        ptrs,
    };
    k
}

/// Blocks session `o` may take: its largest DS count, in WQEBBs.
#[inline(always)]
fn max_bbs(o: &Open) -> u32 {
    o.max_ds
        .min(u32::from(MAX_DS))
        .div_ceil((SEND_WQE_BB / SEND_WQE_DS) as u32)
}

/// Where session `o` is built: its reserved WQEBBs in the ring, or the
/// staging area.
#[inline(always)]
fn dest<'s>(
    ring: &'s mut WqebbRing<'_>,
    stage: &'s mut [u8; STAGE_BYTES],
    o: &Open,
) -> &'s mut [u8] {
    match ring.window(o.pi, max_bbs(o)).filter(|_| o.direct) {
        Some(w) => w,
        None => stage,
    }
}

/// [`fill_same`] for the descriptor size of the run's first packet, if
/// it is an inline frame of 32..=64 bytes: the counted loop of a run of
/// equal frames (the common burst). Returns how many packets it took, and
/// whether it stopped at the session's limits.
#[inline(always)]
fn same_run(
    dst: &mut [u8],
    pkts: &[Packet<'_>],
    ids: &mut [u64],
    key: (u64, u16),
    s: &mut Sess,
) -> (usize, bool) {
    let Some(PacketBuf::Frame(f)) = pkts.first().map(|p| p.buf()) else {
        return (0, false);
    };
    match f.data.len() {
        32..=44 => fill_same::<48>(dst, pkts, ids, key, f.data.len(), s),
        45..=60 => fill_same::<64>(dst, pkts, ids, key, f.data.len(), s),
        61..=63 => fill_same::<80>(dst, pkts, ids, key, f.data.len(), s),
        64 => fill_same64(dst, pkts, ids, key, s),
        _ => (0, false),
    }
}

/// The counted loop of a queue that never inlines: appends the leading
/// common packets of `pkts` to session `s` in `dst` as pointer
/// descriptors, their ids to `ids`, at most as many as the session's
/// limits take (packets, DS room: computed once); returns how many, and
/// whether it stopped at those limits.
///
/// `FRAME`: the packets are [`PacketBuf::Frame`]s (else `Ptr`s; the
/// other kind leaves the loop).
#[inline(never)]
fn fill_ptrs<const FRAME: bool>(
    dst: &mut [u8],
    pkts: &[Packet<'_>],
    ids: &mut [u64],
    key: (u64, u16),
    s: &mut Sess,
) -> (usize, bool) {
    let room = s.end.saturating_sub(s.at) / SEND_WQE_DS;
    let n = pkts.len().min(s.left).min(room);
    let Some(region) = dst.get_mut(s.at..s.at + n * SEND_WQE_DS) else {
        return (0, false);
    };
    let k = fill_ptr_run::<Packet<'_>, FRAME>(region, pkts, ids, key);
    s.at += k * SEND_WQE_DS;
    s.left -= k;
    s.ptrs += k as u32;
    (k, k == n && n < pkts.len())
}

/// The counted loop: appends the leading packets of `pkts` that are
/// common inline frames of exactly `len` bytes (`TLEN`-byte descriptors,
/// 32..=64 bytes) to session `s` in `dst`, their ids to `ids`, at most as
/// many as the session's limits take (packets, DS room, inline bytes:
/// computed once, so that the loop tests nothing but the packet); returns
/// how many, and whether it stopped at those limits. The packet it stops
/// at goes to [`fill`] or [`fill_one`].
#[inline(never)]
fn fill_same<const TLEN: usize>(
    dst: &mut [u8],
    pkts: &[Packet<'_>],
    ids: &mut [u64],
    key: (u64, u16),
    len: usize,
    s: &mut Sess,
) -> (usize, bool) {
    fill_same_as::<TLEN, 0>(dst, pkts, ids, key, len, s)
}

/// [`fill_same`] of 64-byte frames (the shortest Ethernet frame with its
/// FCS stripped, the common small packet), the length a constant: the
/// loop keeps the session's offload values in registers and the frame's
/// last 32 bytes at a fixed offset.
#[inline(never)]
fn fill_same64(
    dst: &mut [u8],
    pkts: &[Packet<'_>],
    ids: &mut [u64],
    key: (u64, u16),
    s: &mut Sess,
) -> (usize, bool) {
    fill_same_as::<80, 64>(dst, pkts, ids, key, 64, s)
}

/// The queue's proof that the CPU has AVX2, if any (none on other
/// targets).
#[cfg(all(target_arch = "x86_64", target_feature = "sse2", not(loom)))]
type Avx2Opt = Option<crate::cpu::Avx2>;
/// The queue's proof that the CPU has AVX2, if any (none on other
/// targets).
#[cfg(not(all(target_arch = "x86_64", target_feature = "sse2", not(loom))))]
type Avx2Opt = Option<core::convert::Infallible>;

/// The AVX2 proof of `sq` ([`SendQueue::avx2`](crate::sq::SendQueue::avx2)).
#[inline(always)]
fn avx2_of<P: DoorbellPolicy, Q: QpKind>(sq: &crate::sq::SendQueue<'_, P, Q>) -> Avx2Opt {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2", not(loom)))]
    return sq.avx2();
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2", not(loom))))]
    {
        let _ = sq;
        None
    }
}

/// [`fill_same`] of frames of `len` bytes, or of `LEN` if not 0 (then
/// `len` is `LEN`).
#[inline(always)]
fn fill_same_as<const TLEN: usize, const LEN: usize>(
    dst: &mut [u8],
    pkts: &[Packet<'_>],
    ids: &mut [u64],
    key: (u64, u16),
    len: usize,
    s: &mut Sess,
) -> (usize, bool) {
    let len = if LEN != 0 { LEN } else { len };
    if len < 32 || len + 4 > TLEN || len + 4 + SEND_WQE_DS <= TLEN {
        return (0, false);
    }
    let room = s.end.saturating_sub(s.at) / TLEN;
    let by_inline = s.inl as usize / len;
    let n = pkts.len().min(s.left).min(room).min(by_inline);
    let Some(region) = dst.get_mut(s.at..s.at + n * TLEN) else {
        return (0, false);
    };
    let (key_lo, key_hi) = key;
    let hdr = inline_header(len as u32);
    // Where the frame's last 32 bytes go (`len - 28`, bounded for the
    // compiler).
    let tail_at = (len - 28).min(TLEN - 32);
    let mut k = 0;
    for ((d, p), id) in region.chunks_exact_mut(TLEN).zip(pkts).zip(ids.iter_mut()) {
        if !common(p, (key_lo, key_hi)) {
            break;
        }
        let PacketBuf::Frame(f) = p.buf() else { break };
        if f.data.len() != len {
            break;
        }
        let (Ok(d), Some(head), Some(tail)) = (
            <&mut [u8; TLEN]>::try_from(d),
            f.data.first_chunk::<32>(),
            f.data.last_chunk::<32>(),
        ) else {
            break;
        };
        // Header and frame (the padding after it is not written).
        if let Some(h) = d.first_chunk_mut::<4>() {
            *h = hdr;
        }
        if let Some(x) = d.get_mut(4..36) {
            x.copy_from_slice(head);
        }
        if let Some(x) = d.get_mut(tail_at..tail_at + 32) {
            x.copy_from_slice(tail);
        }
        *id = p.id;
        k += 1;
    }
    s.at += k * TLEN;
    s.inl -= (k * len) as u32;
    s.left -= k;
    (k, k == n && n < pkts.len())
}

/// One common packet of any shape into session `s` (out of [`fill`]'s
/// loop): an inline frame up to `inline_lim` bytes, else a pointer.
/// `Err` if it is no common packet, its length is refused, or the session
/// has no room for it (then the reason).
#[inline(never)]
fn fill_one(
    st: &mut [u8],
    p: &Packet<'_>,
    key: (u64, u16),
    inline_lim: u32,
    s: &mut Sess,
) -> Result<(), Exit> {
    if !common(p, key) {
        return Err(Exit::Other);
    }
    let (len, frame, lkey, addr) = match p.buf() {
        PacketBuf::Frame(f) => (f.data.len(), Some(f.data), f.lkey, f.addr),
        PacketBuf::Ptr(s) => (s.length as usize, None, s.lkey, s.addr),
    };
    if len.wrapping_sub(ETH_L2_INLINE_HEADER_SIZE + 1) > MAX_LEN - ETH_L2_INLINE_HEADER_SIZE - 1 {
        return Err(Exit::Other);
    }
    let inline = frame.filter(|_| len <= inline_lim as usize);
    let tlen = match inline {
        Some(_) => (len + 4 + 15) & !15,
        None => SEND_WQE_DS,
    };
    if s.left == 0 {
        return Err(Exit::Full(CloseReason::MaxPackets, tlen));
    }
    if inline.is_some() && s.inl < len as u32 {
        return Err(Exit::Full(CloseReason::MaxInlineBytes, tlen));
    }
    if s.at + tlen > s.end {
        return Err(Exit::Full(no_room(s.at + tlen), tlen));
    }
    let w = st.get_mut(s.at..s.at + tlen).ok_or(Exit::Other)?;
    match inline {
        Some(data) => {
            // Header and frame (the padding after it is not written).
            if let Some(d) = w.get_mut(..4) {
                d.copy_from_slice(&inline_header(len as u32));
            }
            if let Some(d) = w.get_mut(4..4 + len) {
                copy_frame(d, data);
            }
            s.inl -= len as u32;
        }
        None => {
            w.copy_from_slice(&data_seg(len as u32, lkey, addr));
            s.ptrs += 1;
        }
    }
    s.at += tlen;
    s.left -= 1;
    Ok(())
}

impl<'a, P: DoorbellPolicy, Q: QpKind> Out<'_, 'a, P, Q> {
    /// The same parts, reborrowed.
    #[inline(always)]
    fn reborrow(&mut self) -> Out<'_, 'a, P, Q> {
        Out {
            sig: self.sig,
            sq: &mut *self.sq,
            stage: &mut *self.stage,
            stats: &mut *self.stats,
            p: &mut *self.p,
            wqes: &mut *self.wqes,
            last_ds: &mut *self.last_ds,
        }
    }

    /// Free WQEBBs after the WQEs written out.
    #[inline(always)]
    fn free_wqebbs(&self) -> u32 {
        self.sq
            .size
            .entries()
            .saturating_sub(in_flight(self.p.pi, self.sq.ci))
    }
}

/// The reason a session has no room for a descriptor ending at byte
/// `next` (`misfit`: the 63-DS field first, then the session's limit).
#[inline(always)]
fn no_room(next: usize) -> CloseReason {
    if next > usize::from(MAX_DS) * SEND_WQE_DS {
        CloseReason::DsLimit
    } else {
        CloseReason::WqeSize
    }
}

/// [`session_eth`](super::session_eth) of the offload values whose words
/// ([`TxOffload::words`]) are `key`, no MSS: built from the two words
/// (two stores, not one per field). Byte `i` of the segment is byte
/// `i % 8` of word `i / 8` taken little-endian (`to_le_bytes`), whatever
/// the host's order: the parser offsets and the two flag bytes, the MSS
/// 0; the metadata big-endian, no inline header.
#[inline(always)]
fn title_eth(key: (u64, u16)) -> [u8; SEND_WQE_DS] {
    let lo = (key.0 >> 32) | (u64::from(key.1) << 32);
    let hi = u64::from((key.0 as u32).swap_bytes());
    (u128::from(lo) | (u128::from(hi) << 64)).to_le_bytes()
}

/// The state of a [`TxBatch::fresh`] run that its sessions share.
pub(super) struct FreshRun<'r, T> {
    /// The run's packets (as many as the free ids take).
    pkts: &'r [T],
    /// Their slots of the id ring.
    ids: &'r mut [u64],
    /// The session's offload values, as words.
    key: (u64, u16),
    /// The title's Ethernet segment ([`title_eth`] of `key`).
    eth: [u8; SEND_WQE_DS],
    /// The burst's packets from the run's first (`END`: the batch
    /// completes after them).
    all: usize,
    /// The session's offload values.
    offload: &'r TxOffload,
    /// Packets taken so far.
    k: usize,
}

/// The room of a [`TxBatch::fresh`] session: its largest DS count, how
/// many packets it takes, its window in WQEBBs, and why it closes, full,
/// for one more alike packet.
#[derive(Debug, Clone, Copy)]
struct Room {
    max_ds: u32,
    cap: usize,
    win: u32,
    reason: CloseReason,
}

/// One session of [`TxBatch::fresh`], of room `room` (at least one
/// packet) at the producer counter: opened (in the ring if its window
/// lies before the ring end, else in the staging area), filled by `fill`,
/// then closed (by the alike packet after it, the reason `push` gives;
/// or, `END`, for [`CloseReason::Complete`] after the burst's last packet)
/// or left open in `open`. Returns false where the run stops here
/// (nothing opened, the session left open, or the burst's last packet
/// taken); true after a close, and, for inline `TxFrame`s, after the
/// burst's last packet too: the caller's loop stops then all the same,
/// no packet being left.
#[inline(always)]
fn fresh_session<
    T: FreshPkt,
    D: Fresh,
    F: FillRun,
    const END: bool,
    P: DoorbellPolicy,
    Q: QpKind,
    const RING: bool,
>(
    out: &mut Out<'_, '_, P, Q>,
    run: &mut FreshRun<'_, T>,
    open: &mut Option<Open>,
    inline: &mut bool,
    room: Room,
) -> bool {
    if room.cap == 0 {
        // No room for a descriptor: `push` refuses the packet.
        return false;
    }
    let pi = out.p.pi;
    let k = run.k;
    let title = SEND_WQE_DS..mpw::TITLE_DS * SEND_WQE_DS;
    // The title in the staging area (where the general path finds the
    // open session's title, `append_run`) ...
    if let Some(t) = out.stage.0.get_mut(title.clone()) {
        t.copy_from_slice(&run.eth);
    }
    // ... and the session built in the ring if its WQEBBs lie before the
    // ring end (its title copied there), else in the staging area (copied
    // at close, as `push` does).
    let (w, direct) = match out.sq.ring.window(pi, room.win) {
        Some(w) => {
            if let Some(t) = w.get_mut(title) {
                t.copy_from_slice(&run.eth);
            }
            (w, true)
        }
        // (`RING`: not reached, the caller found the window.)
        None if RING => return false,
        None => {
            // Staged: for inline frames, the staging area starts as a copy
            // of the session's WQEBBs (the bytes it does not write go back
            // unchanged at close), the title over it again; pointers
            // leave only the last WQEBB's tail unwritten (`Out::finish`
            // keeps it).
            let st = &mut out.stage.0;
            if D::INLINE != 0 {
                load_wrapping(
                    &mut out.sq.ring,
                    pi,
                    st.get_mut(..room.win as usize * SEND_WQE_BB),
                );
                if let Some(t) = st.get_mut(title) {
                    t.copy_from_slice(&run.eth);
                }
            }
            (&mut st[..], false)
        }
    };
    // The room after the title, the packets the session takes, their
    // slots (`session_slices`).
    let Some((region, rest, rest_ids)) = session_slices::<T, D>(w, run.pkts, run.ids, k, room.cap)
    else {
        return false;
    };
    let j = F::fill(region, rest, rest_ids, run.key);
    if j == 0 {
        // (Not reached: the packet was tested.) Nothing opened.
        return false;
    }
    let len = rest.first().map_or(0, |p| D::len(p));
    let k = k + j;
    run.k = k;
    // `record_id` and `sync`: the session's packets counted.
    let j32 = j as u32;
    out.p.head = out.p.head.wrapping_add(j32);
    out.p.pkts += j32;
    out.stats.packets += j as u64;
    if D::INLINE != 0 {
        *inline = true;
    }
    let ds = ((mpw::TITLE_DS * SEND_WQE_DS + j * D::TLEN) / SEND_WQE_DS) as u32;
    // Closed by the next packet (the session is full and the packet
    // alike), by the end of the burst, or left open.
    let ends = END && k == run.all;
    let reason = if j == room.cap && run.pkts.get(k).is_some_and(|p| D::alike(p, run.key)) {
        room.reason
    } else if ends {
        CloseReason::Complete
    } else {
        *open = Some(Open {
            pi,
            ds,
            max_ds: room.max_ds,
            pkts: j32,
            ptr_pkts: if D::INLINE == 0 { j32 } else { 0 },
            inline_bytes: j32 * D::INLINE,
            offload: *run.offload,
            len,
            mpw_inline: D::INLINE != 0,
            direct,
        });
        return false;
    };
    // `close_session`: in place (`finish_in_place`), or staged (`finish`:
    // copied into the ring, wrapping).
    if D::INLINE == 0 {
        out.p.ptr_pkts += j32;
    }
    out.stats.sessions += 1;
    if let Some(c) = out.stats.closes.get_mut(reason as usize) {
        *c += 1;
    }
    if RING {
        out.finish_in_place(pi, ds, ctrl_bits::EMPW);
    } else if !(direct && out.finish_in_place(pi, ds, ctrl_bits::EMPW)) {
        // (A copy of the parts for the call, so that `out` itself is
        // never in memory: its parts stay in registers, or are rebuilt
        // from the batch's address.)
        out.reborrow().finish(pi, ds, ctrl_bits::EMPW, false);
    }
    // After the burst's last packet, `ends`, no packet of the run is left:
    // the caller's loop stops anyway. For inline frames whose loop keeps
    // no offload words (`TxFrame`), it does so without the flag kept
    // across the close (measured: 17 instructions less per burst of
    // three sessions; for packets and pointers, keeping it costs less).
    (D::INLINE != 0 && !T::KEYED) || !ends
}

/// The parts of a [`TxBatch::fresh`] session from packet `k` of the run
/// (`pkts`, their id slots `ids`) on: the room after the title in its
/// WQEBBs `w` (the window's rest: at least `cap` descriptors, so that no
/// end is tested here), the packets it takes (at most `cap`) and their id
/// slots. `None` if `w` holds no title or the run no packet `k` (not
/// reached).
#[inline(always)]
fn session_slices<'w, 'p, 'i, T, D: Fresh>(
    w: &'w mut [u8],
    pkts: &'p [T],
    ids: &'i mut [u64],
    k: usize,
    cap: usize,
) -> Option<(&'w mut [u8], &'p [T], &'i mut [u64])> {
    let region = mpw::TITLE_DS * SEND_WQE_DS..;
    if D::INLINE != 0 {
        // Inline frames: the rest of the run first, then its first `m`
        // (no `k + m` to test; measured: 3 to 8 instructions less per
        // session).
        let (region, rest, ids) = (w.get_mut(region)?, pkts.get(k..)?, ids.get_mut(k..)?);
        let m = rest.len().min(cap);
        Some((region, rest.get(..m)?, ids.get_mut(..m)?))
    } else {
        // Pointers: `k..k + m` (measured: the other form costs their
        // counted loop a register, one load per packet; and this one is
        // kept as it was, word for word: any other wording, even the
        // same code, changes their register allocation).
        let m = (pkts.len() - k).min(cap);
        match (w.get_mut(region), pkts.get(k..k + m), ids.get_mut(k..k + m)) {
            (Some(region), Some(rest), Some(ids)) => Some((region, rest, ids)),
            _ => None,
        }
    }
}

/// The session's offload words on their way into an inlined counted loop:
/// through [`core::hint::black_box`] if the packets' test reads them
/// ([`FreshPkt::KEYED`]; see [`FillRun`]), else as they are (a frame's
/// loop never reads them, and `black_box` would put them in memory once
/// per session for nothing).
#[inline(always)]
pub(super) fn keyed<T: FreshPkt>(key: (u64, u16)) -> (u64, u16) {
    if T::KEYED {
        core::hint::black_box(key)
    } else {
        key
    }
}

/// The counted loop of a [`TxBatch::fresh`] run: writes the leading
/// packets of `pkts` that are the run's into `region`, their ids into
/// `ids`; returns how many. Inlined into `fresh` for pointers (and, in
/// `burst_avx2`, for 64-byte frames with AVX2); out of line otherwise
/// ([`Fresh::fill`]).
///
/// Where it is inlined, the session's offload words go through
/// [`core::hint::black_box`] on the way in: an identity, it makes them
/// values defined just before the loop, which the register allocator
/// then keeps in registers there, instead of reloading them from the
/// stack slot they have across the session's out-of-line calls (one
/// load per word per packet; measured: 25 instructions per 64-byte
/// frame instead of 27). Only for packets whose test reads them
/// ([`keyed`]): for frames it would only store them once per session.
pub(super) trait FillRun {
    /// How its packets' heads are compared with the session's key (64-byte
    /// frames).
    type Eq: HeadEq;
    /// The loop (`key`: the session's offload values, as words).
    fn fill<T: FreshPkt>(region: &mut [u8], pkts: &[T], ids: &mut [u64], key: (u64, u16)) -> usize;
    /// [`FillRun::fill`] with the key of 64-byte frames made too (`k64`:
    /// [`HeadEq::key`] of `key`), for a caller that runs it more than once
    /// on one session (`fill_crossing`); by default `fill`.
    #[inline(always)]
    fn fill_of<T: FreshPkt>(
        region: &mut [u8],
        pkts: &[T],
        ids: &mut [u64],
        key: (u64, u16),
        k64: <Self::Eq as HeadEq>::Key,
    ) -> usize {
        let _ = k64;
        Self::fill(region, pkts, ids, key)
    }
}

impl FillRun for Inline64 {
    type Eq = Words;
    #[inline(always)]
    fn fill<T: FreshPkt>(region: &mut [u8], pkts: &[T], ids: &mut [u64], key: (u64, u16)) -> usize {
        <Self as Fresh>::fill(region, pkts, ids, key)
    }
}

impl<const FRAME: bool> FillRun for Ptrs<FRAME> {
    type Eq = Words;
    #[inline(always)]
    fn fill<T: FreshPkt>(region: &mut [u8], pkts: &[T], ids: &mut [u64], key: (u64, u16)) -> usize {
        fill_ptr_run::<T, FRAME>(region, pkts, ids, keyed::<T>(key))
    }
}

/// A kind of run [`TxBatch::fresh`] takes whole: its packets, their
/// descriptor and its counted loop.
pub(super) trait Fresh {
    /// Bytes of a descriptor.
    const TLEN: usize;
    /// Inline bytes a packet adds to its session (0: a pointer).
    const INLINE: u32;
    /// Whether a queue that inlines frames up to `inline_lim` bytes
    /// sends the run's packets as these descriptors.
    fn queue_takes(inline_lim: u32) -> bool;
    /// Whether `p` is one of the run's packets (a common packet, the
    /// session's offload values `key`, the run's kind and length).
    fn alike<T: FreshPkt>(p: &T, key: (u64, u16)) -> bool;
    /// The length of `p` (the packet `open_session` records).
    fn len<T: FreshPkt>(p: &T) -> u32;
    /// The counted loop: writes the leading packets of `pkts` that are
    /// the run's into `region`, their ids into `ids`; returns how many.
    fn fill<T: FreshPkt>(region: &mut [u8], pkts: &[T], ids: &mut [u64], key: (u64, u16)) -> usize;
    /// The queue's constants for a session of the run with the whole
    /// room.
    fn full(f: &FreshRuns) -> &FreshFull;

    /// How many of the run's packets a fresh session of at most `max_ds`
    /// DS takes (`misfit`'s limits): at most `max_pk` packets,
    /// `max_inline` inline bytes, and the DS after its title.
    #[inline(always)]
    fn session_cap(max_pk: u32, max_inline: u32, max_ds: u32) -> usize {
        let room = (max_ds.min(u32::from(MAX_DS)) as usize * SEND_WQE_DS)
            .saturating_sub(mpw::TITLE_DS * SEND_WQE_DS)
            / Self::TLEN;
        let by_inline = match Self::INLINE {
            0 => usize::MAX,
            b => (max_inline / b) as usize,
        };
        (max_pk as usize).min(by_inline).min(room)
    }

    /// Why a session of `j` of the run's packets (its descriptors ending
    /// at byte `at`) closes for one more: `fill_one`'s reason (`misfit`'s
    /// order: packets, inline bytes, DS room).
    #[inline(always)]
    fn close_reason(j: u32, max_pk: u32, max_inline: u32, at: usize) -> CloseReason {
        if j >= max_pk {
            CloseReason::MaxPackets
        } else if Self::INLINE != 0 && max_inline - j * Self::INLINE < Self::INLINE {
            CloseReason::MaxInlineBytes
        } else {
            no_room(at + Self::TLEN)
        }
    }
}

/// Runs of common inline frames of 64 bytes (80-byte descriptors).
pub(super) struct Inline64;

impl Fresh for Inline64 {
    const TLEN: usize = 80;
    const INLINE: u32 = 64;

    #[inline(always)]
    fn queue_takes(inline_lim: u32) -> bool {
        inline_lim >= 64
    }

    #[inline(always)]
    fn alike<T: FreshPkt>(p: &T, key: (u64, u16)) -> bool {
        p.common64::<Words>(Words::key(key)).is_some()
    }

    #[inline(always)]
    fn len<T: FreshPkt>(_: &T) -> u32 {
        64
    }

    #[inline(never)]
    fn fill<T: FreshPkt>(region: &mut [u8], pkts: &[T], ids: &mut [u64], key: (u64, u16)) -> usize {
        fill64::<T, Words>(region, pkts, ids, key)
    }

    #[inline(always)]
    fn full(f: &FreshRuns) -> &FreshFull {
        &f.inline64
    }
}

/// Runs of common packets by pointer (16-byte data segments) on a queue
/// that never inlines: frames (`FRAME`) or pointers.
pub(super) struct Ptrs<const FRAME: bool>;

impl<const FRAME: bool> Fresh for Ptrs<FRAME> {
    const TLEN: usize = SEND_WQE_DS;
    const INLINE: u32 = 0;

    #[inline(always)]
    fn queue_takes(inline_lim: u32) -> bool {
        inline_lim == 0
    }

    #[inline(always)]
    fn alike<T: FreshPkt>(p: &T, key: (u64, u16)) -> bool {
        let len = match p.buf() {
            PacketBuf::Frame(f) if FRAME => f.data.len(),
            PacketBuf::Ptr(s) if !FRAME => s.length as usize,
            _ => return false,
        };
        p.common(key) && ptr_len_ok(len)
    }

    #[inline(always)]
    fn len<T: FreshPkt>(p: &T) -> u32 {
        match p.buf() {
            PacketBuf::Frame(f) => f.data.len() as u32,
            PacketBuf::Ptr(s) => s.length,
        }
    }

    #[inline(never)]
    fn fill<T: FreshPkt>(region: &mut [u8], pkts: &[T], ids: &mut [u64], key: (u64, u16)) -> usize {
        fill_ptr_run::<T, FRAME>(region, pkts, ids, key)
    }

    #[inline(always)]
    fn full(f: &FreshRuns) -> &FreshFull {
        &f.ptrs
    }
}

/// The constants of [`TxBatch::fresh`]'s sessions with the whole room
/// (the free WQEBBs give them `max_wqe_bytes`), per kind of run, from the
/// queue's configuration: computed once per queue ([`TxQueue::new`]).
#[derive(Debug, Clone, Copy)]
pub(super) struct FreshRuns {
    inline64: FreshFull,
    ptrs: FreshFull,
}

impl FreshRuns {
    /// The constants for `cfg`, `max_pk` packets per session at most.
    pub(super) fn of(cfg: &super::TxConfig, max_pk: u32) -> Self {
        Self {
            inline64: FreshFull::of::<Inline64>(cfg, max_pk),
            ptrs: FreshFull::of::<Ptrs<true>>(cfg, max_pk),
        }
    }
}

/// A session with the whole room, of one kind of run ([`FreshRuns`]).
#[derive(Debug, Clone, Copy)]
pub(super) struct FreshFull {
    /// Its largest DS count: `max_wqe_bytes` in DS.
    max_ds: u32,
    /// Packets it takes (0: none fits).
    cap: usize,
    /// Free WQEBBs that give a session the whole room.
    need: u32,
    /// Its window: its largest DS count, in WQEBBs ([`max_bbs`]).
    win: u32,
    /// Why it closes, full, for one more alike packet.
    reason: CloseReason,
}

impl FreshFull {
    /// The [`Room`] of a session with the whole room.
    #[inline(always)]
    fn room(&self) -> Room {
        Room {
            max_ds: self.max_ds,
            cap: self.cap,
            win: self.win,
            reason: self.reason,
        }
    }

    fn of<D: Fresh>(cfg: &super::TxConfig, max_pk: u32) -> Self {
        let max_inline = u32::from(cfg.max_inline_bytes);
        let cfg_ds = u32::from(cfg.max_wqe_bytes) / SEND_WQE_DS as u32;
        let cap = D::session_cap(max_pk, max_inline, cfg_ds);
        Self {
            max_ds: cfg_ds,
            cap,
            need: cfg_ds.div_ceil((SEND_WQE_BB / SEND_WQE_DS) as u32),
            win: window_bbs(cfg_ds),
            reason: D::close_reason(
                cap as u32,
                max_pk,
                max_inline,
                mpw::TITLE_DS * SEND_WQE_DS + cap * D::TLEN,
            ),
        }
    }
}

/// The window of a session of at most `max_ds` DS: its largest DS count,
/// in WQEBBs ([`max_bbs`]).
#[inline(always)]
fn window_bbs(max_ds: u32) -> u32 {
    max_ds
        .min(u32::from(MAX_DS))
        .div_ceil((SEND_WQE_BB / SEND_WQE_DS) as u32)
}

/// The counted loop of [`TxBatch::fresh`] for pointers ([`Ptrs`]):
/// writes the leading packets of `pkts` that are common packets by
/// pointer (frames if `FRAME`, else pointers; a length `push` accepts)
/// with offload values `key` into `region` as data segments, their ids
/// into `ids`; returns how many.
#[inline(always)]
fn fill_ptr_run<T: FreshPkt, const FRAME: bool>(
    region: &mut [u8],
    pkts: &[T],
    ids: &mut [u64],
    key: (u64, u16),
) -> usize {
    let mut k = 0;
    // (Packets: the id ring's slice through `black_box`, as `keyed` does
    // the offload words: a value defined just before the loop, kept in a
    // register there; measured: 41.3 instructions per packet in
    // `tx/empw_ptr64_burst32` instead of 41.6. Frames: not, 31.6 instead
    // of 31.9 in `tx/empw_ptr64_frames32`.)
    let ids = if T::KEYED {
        core::hint::black_box(ids)
    } else {
        ids
    };
    for ((d, p), id) in region
        .chunks_exact_mut(SEND_WQE_DS)
        .zip(pkts)
        .zip(ids.iter_mut())
    {
        if !p.common(key) {
            break;
        }
        let (len, lkey, addr) = match p.buf() {
            PacketBuf::Frame(f) if FRAME => (f.data.len(), f.lkey, f.addr),
            PacketBuf::Ptr(s) if !FRAME => (s.length as usize, s.lkey, s.addr),
            _ => break,
        };
        if !ptr_len_ok(len) {
            break;
        }
        d.copy_from_slice(&data_seg(len as u32, lkey, addr));
        *id = p.id();
        k += 1;
    }
    k
}

/// The counted loop of [`TxBatch::fresh`] for [`Inline64`]: writes the
/// leading packets of `pkts` that are common 64-byte inline frames with
/// offload values `key` into `region` as 80-byte descriptors (header and
/// frame; the 12 bytes of padding after it not written), their ids into
/// `ids`; returns how many. `region` holds at least as many descriptors
/// as the session takes (`pkts` bounds the loop).
#[inline(always)]
pub(super) fn fill64<T: FreshPkt, E: HeadEq>(
    region: &mut [u8],
    pkts: &[T],
    ids: &mut [u64],
    key: (u64, u16),
) -> usize {
    fill64_of::<T, E>(region, pkts, ids, E::key(key))
}

/// [`fill64`] with the key made ([`HeadEq::key`]).
#[inline(always)]
pub(super) fn fill64_of<T: FreshPkt, E: HeadEq>(
    region: &mut [u8],
    pkts: &[T],
    ids: &mut [u64],
    key: E::Key,
) -> usize {
    let hdr = inline_header(64);
    let mut k = 0;
    for ((d, p), id) in region.chunks_exact_mut(80).zip(pkts).zip(ids.iter_mut()) {
        let (Ok(d), Some(frame)) = (<&mut [u8; 80]>::try_from(d), p.common64::<E>(key)) else {
            break;
        };
        // Header and frame (the padding after it is not written).
        if let Some(h) = d.first_chunk_mut::<4>() {
            *h = hdr;
        }
        if let Some(x) = d.get_mut(4..68) {
            x.copy_from_slice(frame);
        }
        *id = p.id();
        k += 1;
    }
    k
}

/// Writes the loop's counters back: session `o` is now `sess`, and the
/// packets `counted..k` of the run are added to it and to the batch's
/// counters.
#[inline(always)]
fn sync<P: DoorbellPolicy, Q: QpKind>(
    o: &mut Open,
    out: &mut Out<'_, '_, P, Q>,
    counted: &mut usize,
    k: usize,
    sess: &Sess,
    max_inline: u32,
    inline: &mut bool,
) {
    o.ds = (sess.at / SEND_WQE_DS) as u32;
    let new = (k - *counted) as u32;
    o.pkts += new;
    let used = max_inline - sess.inl;
    if used != o.inline_bytes {
        *inline = true;
    }
    o.inline_bytes = used;
    o.ptr_pkts = sess.ptrs;
    out.p.head = out.p.head.wrapping_add(new);
    out.p.pkts += new;
    out.stats.packets += u64::from(new);
    *counted = k;
}

/// Packets of a [`TxQueue::inline64_run`] session of the whole room
/// (16 WQEBBs: its title and this many 80-byte descriptors, 62 DS).
const FULL64: usize = (WIN64 - mpw::TITLE_DS * SEND_WQE_DS) / Inline64::TLEN;

/// Bytes of the window of a [`TxBatch::inline64_as`] session built in
/// place: the largest WQE (63 DS) in WQEBBs.
const WIN64: usize = 16 * SEND_WQE_BB;

impl<P: DoorbellPolicy, Q: QpKind, M: TxMode> TxBatch<'_, '_, P, Q, M> {
    /// [`TxBatch::fresh`] of 64-byte inline frames ([`Inline64`]) on a
    /// queue whose sessions have the largest window ([`WIN64`]), its
    /// counted loop `F`: [`TxQueue::inline64_run`] on the batch's
    /// counters.
    #[inline(always)]
    pub(super) fn inline64_as<T: FreshPkt, F: FillRun, const END: bool>(
        &mut self,
        pkts: &[T],
        offload: &TxOffload,
        avx2: Avx2Opt,
    ) -> usize {
        let mut t = self.tally();
        let k = self
            .q
            .run64::<T, F, END, false>(&mut t, &mut self.open, pkts, offload, avx2);
        (self.p, self.wqes, self.inline, self.last_ds) = (t.p, t.wqes, t.inline, t.last_ds);
        k
    }
}

impl<P: DoorbellPolicy, Q: QpKind, M: TxMode> TxQueue<'_, P, Q, M> {
    /// [`TxQueue::inline64_run`] on the batch's counters `t`, its CQE
    /// policy (`ALWAYS`) chosen here from the queue's; `KNOWN`: the
    /// caller holds the proof [`TxQueue::frames64_of`] gives (computed
    /// from the queue's constants), so that its sessions are known to
    /// inline 64-byte frames with the largest window (not tested again).
    #[inline(always)]
    fn run64<T: FreshPkt, F: FillRun, const END: bool, const KNOWN: bool>(
        &mut self,
        t: &mut Tally,
        open: &mut Option<Open>,
        pkts: &[T],
        offload: &TxOffload,
        avx2: Avx2Opt,
    ) -> usize {
        if self.sig.every <= 1 {
            self.inline64_run::<T, F, END, true, KNOWN>(t, open, pkts, offload, avx2)
        } else {
            self.inline64_run::<T, F, END, false, KNOWN>(t, open, pkts, offload, avx2)
        }
    }

    /// [`TxBatch::fresh`] of 64-byte inline frames ([`Inline64`]) with no
    /// session open (`open`), on a batch whose counters are `t`, its
    /// counted loop `F`: the same sessions, with the counters in
    /// registers (the caller keeps `t` as a value, never borrowed
    /// beyond this call). A session with the whole room of 16 WQEBBs (63
    /// DS: the queue's sessions have the largest window, [`WIN64`], the
    /// default) is opened, filled and closed here, its window a
    /// fixed-size array (no bounds to test): in the ring if the window
    /// lies before the ring end (the common case), else its descriptors
    /// in the ring's two parts ([`fill_crossing`]) and its title and
    /// control segment in the staging area, the control segment copied
    /// into the ring at close (a crossing session left open moves into the
    /// staging area whole, `load_wrapping`); any other one (not the whole
    /// room) takes `fresh`'s session code, out of line (`inline64_step`; with
    /// AVX2 if `avx2`; for frames, in an outer loop). `ALWAYS`: the
    /// queue requests a CQE for every WQE ([`CqePolicy::EverySessions`]
    /// of 1, the default), so that the close tests no counter. Returns
    /// how many packets; the last session stays open in `open`, as
    /// `fresh` leaves it (unless `END` and the burst's last packet went
    /// into it).
    ///
    /// [`CqePolicy::EverySessions`]: super::CqePolicy::EverySessions
    #[inline(always)]
    pub(super) fn inline64_run<
        T: FreshPkt,
        F: FillRun,
        const END: bool,
        const ALWAYS: bool,
        const KNOWN: bool,
    >(
        &mut self,
        t: &mut Tally,
        open: &mut Option<Open>,
        pkts: &[T],
        offload: &TxOffload,
        avx2: Avx2Opt,
    ) -> usize {
        if M::KIND != TxKind::Empw
            || open.is_some()
            || !(KNOWN
                || Inline64::queue_takes(self.inline_lim)
                    && self.fresh.inline64.win as usize == WIN64 / SEND_WQE_BB)
        {
            return 0;
        }
        let Some(p0) = pkts.first() else { return 0 };
        // (Packets: the first one's head words, not its offload values
        // encoded again.)
        let key = p0.run_key(offload);
        // (Packets: tested with the loop's compare, `F::Eq`.)
        let first = if T::KEYED {
            p0.common64::<F::Eq>(F::Eq::key(key)).is_some()
        } else {
            Inline64::alike(p0, key)
        };
        if !first {
            return 0;
        }
        let full = self.fresh.inline64;
        // (The session's packets: at most what the window's region holds,
        // which `full.cap` is for this window. The bound, known here, lets
        // `fill64_pairs` be unrolled whole, at most six pairs, no loop
        // counter: measured 29.35 instructions per packet in
        // `tx/empw_inline64_frames32` instead of 30.03; packets, with
        // their head compare, two a turn and their crossing session out
        // of line: 35.2 in `tx/empw_inline64_burst32` instead of 37.0 one
        // a turn with the queue's bound and the crossing inlined.)
        let (need, cap) = (
            full.need,
            full.cap
                .min((WIN64 - mpw::TITLE_DS * SEND_WQE_DS) / Inline64::TLEN),
        );
        let all = pkts.len();
        // The packets this loop may take (free ids up to the id ring's
        // end: `id_run`), their slots from `slot0` on.
        let ids_len = self.ids.len();
        let slot0 = t.p.head as usize & ids_len.wrapping_sub(1);
        let free = ids_len.saturating_sub(in_flight(t.p.head, self.tail) as usize);
        let n = all.min(free).min(ids_len.saturating_sub(slot0));
        let (Some(pkts), Some(mut ids)) = (pkts.get(..n), self.ids.get_mut(slot0..slot0 + n))
        else {
            return 0;
        };
        let full_at = self.sq.ci.wrapping_add(self.sq.size.entries());
        let eth = title_eth(key);
        let k64 = F::Eq::key(key);
        // The counters in registers: the producer counter, those since
        // the last CQE request (WQEs, WQEBBs, packets), the sessions
        // closed full; the packet counter is `head0 + k`.
        let mut pi = t.p.pi;
        let (mut since_wqes, mut since_bbs, mut since_pkts) = (t.p.wqes, t.p.wqebbs, t.p.pkts);
        let mut head0 = t.p.head;
        let mut closed_full = 0u32;
        // Packets counted in the statistics up to the last write-back,
        // and the DS count of a session closed for `Complete`.
        let mut counted = 0usize;
        let mut complete_ds = 0u32;
        let mut k = 0;
        // `fresh`'s session, not the whole room, then `$then` if the run
        // goes on, else the end of the run (a macro: the same code in the
        // inner loop for packets, in the outer one for frames).
        macro_rules! step {
            ($run:lifetime, $then:expr) => {{
                // Not the whole room of 63 DS: `fresh`'s session, out
                // of line, on a copy of the
                // counters written back (so that `t` itself is never
                // borrowed here).
                let mut c = *t;
                c.p.pi = pi;
                c.p.head = head0.wrapping_add(k as u32);
                (c.p.wqes, c.p.wqebbs, c.p.pkts) = (since_wqes, since_bbs, since_pkts);
                closed(&mut self.stats, &mut c, closed_full, &full, k - counted);
                closed_full = 0;
                let at = StepAt {
                    slot0,
                    k,
                    key,
                    eth,
                    all,
                    full_at,
                };
                let (k1, go_on) = match avx2 {
                    #[cfg(all(target_arch = "x86_64", target_feature = "sse2", not(loom)))]
                    Some(a) => super::burst_avx2::step64::<T, END, P, Q, M>(
                        a, self, &mut c, open, pkts, offload, at,
                    ),
                    _ => inline64_step::<T, F, END, P, Q, M>(self, &mut c, open, pkts, offload, at),
                };
                k = k1;
                counted = k;
                *t = c;
                pi = c.p.pi;
                (since_wqes, since_bbs, since_pkts) = (c.p.wqes, c.p.wqebbs, c.p.pkts);
                head0 = c.p.head.wrapping_sub(k as u32);
                // The id slots again (the queue was lent whole).
                match self.ids.get_mut(slot0..slot0 + n) {
                    Some(i) if go_on => {
                        ids = i;
                        $then
                    }
                    _ => break $run,
                }
            }};
        }
        // The sessions of the whole room (in the ring or across its end)
        // in the inner loop; for frames, any other session in the outer
        // one, so that the values only `inline64_step` changes (the
        // counters written back, the id slots) stay put through the inner
        // loop (measured: 30.6 instructions per packet in
        // `tx/empw_inline64_frames32` instead of 31.0; packets keep it in
        // the inner loop, 44.8 instead of 45.9).
        'run: loop {
            while k < n {
                let whole = full_at.wrapping_sub(pi) >= need;
                // Frames: not the whole room, the outer loop, tested before
                // the window is computed (measured, with the one test of
                // `fill_crossing_as`: 30.03 instructions per packet in
                // `tx/empw_inline64_frames32` instead of 30.08).
                if !T::KEYED && !whole {
                    break;
                }
                // The session's window: in the ring (`st`: the staging
                // area, for BlueFlame's copy and an open session's
                // title); or, across the ring end, its
                // descriptors written into the ring's two parts here
                // (`fill_crossing`: `crossed`, the packets taken) and its
                // title and control segment built in the staging area (`w`),
                // the control segment copied into the ring at close.
                let mut crossed = None;
                let (w, st) = match self.sq.ring.window(pi, (WIN64 / SEND_WQE_BB) as u32) {
                    Some(w) if whole => (w, Some(&mut self.stage)),
                    None if whole => {
                        if let (Some(rest), Some(rest_ids)) = (pkts.get(k..), ids.get_mut(k..)) {
                            let m = rest.len().min(cap);
                            if let (Some(rest), Some(rest_ids)) =
                                (rest.get(..m), rest_ids.get_mut(..m))
                            {
                                let ring = &mut self.sq.ring;
                                // (Out of line, with AVX2 in
                                // `burst_avx2::crossing64`; packets too, since
                                // their head compare: measured 35.2
                                // instructions per packet in
                                // `tx/empw_inline64_burst32`, 37.9 with the
                                // pair loop but the crossing inlined.)
                                crossed = Some(match avx2 {
                                    #[cfg(all(
                                        target_arch = "x86_64",
                                        target_feature = "sse2",
                                        not(loom)
                                    ))]
                                    Some(a) => super::burst_avx2::crossing64::<T>(
                                        a, ring, pi, rest, rest_ids, key, eth,
                                    ),
                                    _ => fill_crossing::<T, F>(ring, pi, rest, rest_ids, key, eth),
                                });
                            }
                        }
                        (&mut self.stage.0[..], None)
                    }
                    // Not the whole room of 63 DS: the outer loop (frames);
                    // packets, here.
                    _ if !T::KEYED => break,
                    _ => {
                        step!('run, continue);
                    }
                };
                let (Some(w), Some(rest), Some(rest_ids)) = (
                    w.first_chunk_mut::<WIN64>(),
                    pkts.get(k..),
                    ids.get_mut(k..),
                ) else {
                    break 'run;
                };
                let m = rest.len().min(cap);
                let (Some(rest), Some(rest_ids)) = (rest.get(..m), rest_ids.get_mut(..m)) else {
                    break 'run;
                };
                let (head, region) = w.split_at_mut(mpw::TITLE_DS * SEND_WQE_DS);
                if let Some(d) = head.last_chunk_mut::<SEND_WQE_DS>() {
                    *d = eth;
                }
                // Two a turn (`fill64_pairs`); packets with their head
                // compared with the key `k64` (made once per run). A
                // session with `FULL64` packets to take (the common case)
                // takes them as a fixed-size chunk: the loop unrolled with
                // no bound to test, no odd one (measured: 29.73
                // instructions per packet in `tx/empw_inline64_burst32`
                // instead of 30.04, frames 27.92 instead of 29.36; `k64`
                // was then still through `black_box` once per session:
                // without it, and with the next packet's test below,
                // 29.18).
                let j = if let Some(j) = crossed {
                    j
                } else if let (Some(r), Some(i)) = (
                    rest.first_chunk::<FULL64>(),
                    rest_ids.first_chunk_mut::<FULL64>(),
                ) {
                    fill64_pairs_of::<T, F::Eq>(region, r, i, k64)
                } else {
                    fill64_pairs_of::<T, F::Eq>(region, rest, rest_ids, k64)
                };
                if j == 0 {
                    // (Not reached: the packet was tested.)
                    break 'run;
                }
                k += j;
                let j32 = j as u32;
                since_pkts += j32;
                let ds = mpw::TITLE_DS as u32 + j32 * (Inline64::TLEN / SEND_WQE_DS) as u32;
                // Closed by the next packet (the session is full and the
                // packet alike), by the end of the burst, or left open.
                // (Packets: the next one's head alone, `is64`, its bytes
                // tested by the next session's loop: measured 29.18
                // instructions per packet in `tx/empw_inline64_burst32`
                // instead of 30.06 with its bytes' length tested too.)
                let is_full = j == cap && pkts.get(k).is_some_and(|p| p.is64::<F::Eq>(k64));
                if !(is_full || (END && k == all)) {
                    *open = Some(Open {
                        pi,
                        ds,
                        max_ds: full.max_ds,
                        pkts: j32,
                        ptr_pkts: 0,
                        inline_bytes: j32 * Inline64::INLINE,
                        offload: *offload,
                        len: 64,
                        mpw_inline: true,
                        direct: st.is_some(),
                    });
                    // The open session's title in the staging area too, where
                    // the general path finds it (`append_run`; a staged
                    // session's is there already).
                    if let Some(d) =
                        st.and_then(|s| s.0.get_mut(SEND_WQE_DS..mpw::TITLE_DS * SEND_WQE_DS))
                    {
                        d.copy_from_slice(&eth);
                    }
                    if crossed.is_some() {
                        // Across the ring end: the staging area takes the
                        // session, where the general path appends (the ring's
                        // bytes where it wrote none, `load_wrapping`).
                        load_wrapping(&mut self.sq.ring, pi, self.stage.0.get_mut(..WIN64));
                    }
                    break 'run;
                }
                // `finish_in_place`, the counters in hand.
                let bbs = wqebbs_of(ds);
                since_wqes += 1;
                since_bbs += bbs;
                let sig = &self.sig;
                let signal = ALWAYS
                    || (since_bbs >= sig.drain_wqebbs)
                        | (since_pkts >= sig.drain_pkts)
                        | (since_wqes >= sig.every);
                let fm_ce_se = if signal {
                    FM_CE_ALWAYS
                } else {
                    sig.fm_unsignaled
                };
                let ctrl = ctrl_seg(ctrl_bits::EMPW, pi, self.sq.lim.qpn_ds_bits, ds, fm_ce_se);
                if let Some(c) = head.first_chunk_mut::<SEND_WQE_DS>() {
                    *c = ctrl;
                }
                // (Nothing past the DS count: the ring keeps its bytes there.)
                let end = bbs as usize * SEND_WQE_BB;
                match st {
                    // The BlueFlame copy is taken from the staging area.
                    Some(st) if P::BLUEFLAME => {
                        if let (Some(d), Some(src)) = (st.0.get_mut(..end), w.get(..end)) {
                            d.copy_from_slice(src);
                        }
                    }
                    // The doorbell's copy: the control segment into the
                    // staging area, whichever the window (across the ring
                    // end, where the staging area is the window, again).
                    _ if !P::BLUEFLAME => {
                        if let Some(c) = self.stage.0.first_chunk_mut::<SEND_WQE_DS>() {
                            *c = ctrl;
                        }
                        if crossed.is_some() {
                            if let Some(c) = self
                                .sq
                                .ring
                                .window(pi, 1)
                                .and_then(|w| w.first_chunk_mut::<SEND_WQE_DS>())
                            {
                                *c = ctrl;
                            }
                        }
                    }
                    // BlueFlame across the ring end (its descriptors and
                    // title in the ring, `fill_crossing`): the control
                    // segment into the ring, the whole WQE into the staging
                    // area.
                    _ => {
                        if let Some(c) = self
                            .sq
                            .ring
                            .window(pi, 1)
                            .and_then(|w| w.first_chunk_mut::<SEND_WQE_DS>())
                        {
                            *c = ctrl;
                        }
                        load_wrapping(&mut self.sq.ring, pi, self.stage.0.get_mut(..end));
                    }
                }
                let head_now = head0.wrapping_add(k as u32);
                if let Some(e) = self.sq.shadow.get_mut((pi & self.sq.mask) as usize) {
                    *e = tx_shadow(pi, head_now, bbs, signal);
                }
                pi = pi.wrapping_add(bbs);
                if signal {
                    (since_wqes, since_bbs, since_pkts) = (0, 0, 0);
                    t.p.ptr_pkts = 0;
                }
                if !is_full {
                    complete_ds = ds;
                    break 'run;
                }
                closed_full += 1;
            }
            if k >= n {
                break;
            }
            step!('run, ());
        }
        if k != 0 {
            t.inline = true;
        }
        t.p.pi = pi;
        t.p.head = head0.wrapping_add(k as u32);
        (t.p.wqes, t.p.wqebbs, t.p.pkts) = (since_wqes, since_bbs, since_pkts);
        closed(&mut self.stats, t, closed_full, &full, k - counted);
        if complete_ds != 0 {
            t.wqes += 1;
            t.last_ds = complete_ds;
            self.stats.sessions += 1;
            if let Some(c) = self.stats.closes.get_mut(CloseReason::Complete as usize) {
                *c += 1;
            }
        }
        k
    }
}

/// The counters of `n` sessions [`TxQueue::inline64_run`] closed full
/// (their room `full`) and of `pkts` packets it took, written back: the
/// batch's WQE count and last DS count (`t`), the statistics.
#[inline(always)]
fn closed(stats: &mut TxStats, t: &mut Tally, n: u32, full: &FreshFull, pkts: usize) {
    stats.packets += pkts as u64;
    if n != 0 {
        t.wqes += n;
        t.last_ds = mpw::TITLE_DS as u32 + full.cap as u32 * (Inline64::TLEN / SEND_WQE_DS) as u32;
        stats.sessions += u64::from(n);
        if let Some(c) = stats.closes.get_mut(full.reason as usize) {
            *c += u64::from(n);
        }
    }
}

/// Where [`TxQueue::inline64_run`] hands a session to `inline64_step`:
/// the run's first id slot, the packets taken, the offload words and
/// title, the burst's packets (`END`), the producer counter at which the
/// ring is full.
#[derive(Debug, Clone, Copy)]
pub(super) struct StepAt {
    slot0: usize,
    k: usize,
    key: (u64, u16),
    eth: [u8; SEND_WQE_DS],
    all: usize,
    full_at: u32,
}

/// One session of [`TxQueue::inline64_run`] that is not its common case
/// (not the whole room of 63 DS), for the run
/// `pkts` from `at.k` on: `fresh`'s loop body, as `fresh_as` runs it, on
/// the counters `c`. Returns the packets taken in all and whether the
/// run goes on.
#[inline(never)]
fn inline64_step<
    T: FreshPkt,
    F: FillRun,
    const END: bool,
    P: DoorbellPolicy,
    Q: QpKind,
    M: TxMode,
>(
    q: &mut TxQueue<'_, P, Q, M>,
    c: &mut Tally,
    open: &mut Option<Open>,
    pkts: &[T],
    offload: &TxOffload,
    at: StepAt,
) -> (usize, bool) {
    inline64_step_as::<T, F, END, P, Q, M>(q, c, open, pkts, offload, at)
}

/// The body of `inline64_step` (inlined into `burst_avx2::step64`).
#[inline(always)]
pub(super) fn inline64_step_as<
    T: FreshPkt,
    F: FillRun,
    const END: bool,
    P: DoorbellPolicy,
    Q: QpKind,
    M: TxMode,
>(
    q: &mut TxQueue<'_, P, Q, M>,
    c: &mut Tally,
    open: &mut Option<Open>,
    pkts: &[T],
    offload: &TxOffload,
    at: StepAt,
) -> (usize, bool) {
    let TxQueue {
        sq,
        ids,
        stage,
        stats,
        cfg,
        fresh,
        sig,
        ..
    } = q;
    let full = &fresh.inline64;
    let Some(ids) = ids.get_mut(at.slot0..at.slot0 + pkts.len()) else {
        return (at.k, false);
    };
    let mut out = Out {
        sig,
        sq,
        stage,
        stats,
        p: &mut c.p,
        wqes: &mut c.wqes,
        last_ds: &mut c.last_ds,
    };
    let mut run = FreshRun {
        pkts,
        ids,
        key: at.key,
        eth: at.eth,
        all: at.all,
        offload,
        k: at.k,
    };
    // (The caller sets the batch's inline flag.)
    let mut inline = false;
    let free_bbs = at.full_at.wrapping_sub(out.p.pi);
    let room = if free_bbs >= full.need {
        full.room()
    } else {
        let max_pk = max_packets_of(M::KIND, cfg);
        let max_inline = u32::from(cfg.max_inline_bytes);
        let max_ds = full
            .max_ds
            .min(free_bbs.saturating_mul((SEND_WQE_BB / SEND_WQE_DS) as u32));
        let cap = Inline64::session_cap(max_pk, max_inline, max_ds);
        let at = mpw::TITLE_DS * SEND_WQE_DS + cap * Inline64::TLEN;
        Room {
            max_ds,
            cap,
            win: window_bbs(max_ds),
            reason: Inline64::close_reason(cap as u32, max_pk, max_inline, at),
        }
    };
    let go_on = fresh_session::<T, Inline64, F, END, P, Q, false>(
        &mut out,
        &mut run,
        open,
        &mut inline,
        room,
    );
    (run.k, go_on)
}

impl<'a, P: DoorbellPolicy, Q: QpKind, M: TxMode> TxQueue<'a, P, Q, M> {
    /// [`TxQueue::tx_frames`]: with the AVX2 proof, on an eMPW queue
    /// whose sessions inline 64-byte frames with the largest window
    /// ([`TxQueue::frames64_of`]), one function for the whole burst
    /// (`burst_avx2::tx_frames64`: the batch, [`TxQueue::inline64_run`],
    /// the doorbell); else the batch and [`TxBatch::push_frames_as`].
    #[inline(always)]
    pub(super) fn frames_burst(&mut self, offload: &TxOffload, frames: &[TxFrame<'_>]) -> usize {
        #[cfg(all(target_arch = "x86_64", target_feature = "sse2", not(loom)))]
        if let Some(t) = self.frames64 {
            return super::burst_avx2::tx_frames64(t, self, offload, frames);
        }
        let mut b = self.start();
        let n = b.push_frames_as::<true>(offload, frames);
        b.publish();
        n
    }

    /// The proof `avx2` if [`TxQueue::frames_burst`] may take its bursts
    /// in one function (an eMPW queue that inlines 64-byte frames, its
    /// sessions of the largest window, [`WIN64`]); computed when the
    /// proof is set.
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2", not(loom)))]
    pub(super) fn frames64_of(&self, avx2: Option<crate::cpu::Avx2>) -> Option<crate::cpu::Avx2> {
        avx2.filter(|_| {
            M::KIND == TxKind::Empw
                && Inline64::queue_takes(self.inline_lim)
                && self.fresh.inline64.win as usize == WIN64 / SEND_WQE_BB
        })
    }

    /// The burst of `frames` of [`TxQueue::frames_burst`] in one
    /// function: the batch, [`TxBatch::inline64_as`] (its counted loop
    /// `F`), what it leaves ([`TxBatch::frames_rest`]), the doorbell.
    /// (Only `burst_avx2::tx_frames64` runs it.)
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2", not(loom)))]
    #[inline(always)]
    pub(super) fn frames64_as<F: FillRun>(
        &mut self,
        offload: &TxOffload,
        frames: &[TxFrame<'_>],
        avx2: Avx2Opt,
    ) -> usize {
        // The batch's counters as a value (`start`), kept in registers.
        let mut t = self.tally();
        let mut open = None;
        let n = self.run64::<TxFrame<'_>, F, true, true>(&mut t, &mut open, frames, offload, avx2);
        if n < frames.len() || open.is_some() {
            // What it leaves: the batch, built from the counters.
            let mut b = self.batch_of(t, open);
            let n = b.frames_rest::<true>(offload, frames, n);
            b.publish();
            return n;
        }
        self.commit(t);
        n
    }

    /// A new batch's counters as a value ([`TxQueue::start`]'s).
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2", not(loom)))]
    #[inline(always)]
    fn tally(&self) -> Tally {
        Tally {
            p: self.done,
            wqes: 0,
            inline: false,
            last_ds: 0,
        }
    }

    /// The batch whose counters are `t` and whose open session is `open`
    /// (what a burst in registers leaves to the general path).
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2", not(loom)))]
    #[inline(always)]
    fn batch_of(&mut self, t: Tally, open: Option<Open>) -> TxBatch<'_, 'a, P, Q, M> {
        TxBatch {
            q: self,
            p: t.p,
            open,
            wqes: t.wqes,
            inline: t.inline,
            last_ds: t.last_ds,
        }
    }

    /// [`TxQueue::tx_burst`] of `pkts` in one function, as
    /// [`TxQueue::frames64_as`] takes frames: the counters as a value,
    /// the run of common 64-byte frames at the burst's start (the first
    /// one's offload values) through [`TxQueue::inline64_run`] (its
    /// counted loop the frames' `fill64_pairs`, with the test of the
    /// packets' heads), the rest
    /// through [`TxBatch::push_burst_as`], the doorbell. The same WQEs as
    /// `tx_burst`'s own path (`tests::tx_burst_matches_push_avx2`). (Only
    /// `burst_avx2::tx_packets64` runs it.)
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2", not(loom)))]
    #[inline(always)]
    pub(super) fn packets64_as<F: FillRun>(&mut self, pkts: &[Packet<'_>], avx2: Avx2Opt) -> usize {
        let mut t = self.tally();
        let mut open = None;
        let n = match pkts.first() {
            Some(p0) => {
                let offload = p0.offload();
                self.run64::<Packet<'_>, F, true, true>(&mut t, &mut open, pkts, &offload, avx2)
            }
            None => 0,
        };
        if n < pkts.len() || open.is_some() {
            // What it leaves: the batch, built from the counters.
            let mut b = self.batch_of(t, open);
            let n = n + b.push_burst_as::<true>(pkts.get(n..).unwrap_or_default());
            b.publish();
            return n;
        }
        self.commit(t);
        n
    }
}

/// The descriptors of a [`TxQueue::inline64_run`] session that crosses
/// the ring end (its window from the free-running counter `pi` on, of
/// [`WIN64`] bytes, wraps), written straight into the ring: the leading
/// packets of `pkts` (at most the session's packets) that its counted
/// loop `F` takes, their ids into `ids`, and the title `eth`; returns how
/// many. The descriptors wholly before the ring end and those wholly
/// after it take the counted loop in each part; the one that straddles
/// the end (when there is one: 16, 32, 48 or 64 of its bytes before it)
/// is built in a scratch descriptor and its written bytes (header and
/// frame, 68) copied into both parts. Nothing else is written: no
/// padding, nothing past the last descriptor. Out of line (it runs once
/// per ring pass); with AVX2 in `burst_avx2::crossing64`.
#[inline(never)]
fn fill_crossing<T: FreshPkt, F: FillRun>(
    ring: &mut WqebbRing<'_>,
    pi: u32,
    pkts: &[T],
    ids: &mut [u64],
    key: (u64, u16),
    eth: [u8; SEND_WQE_DS],
) -> usize {
    fill_crossing_as::<T, F>(ring, pi, pkts, ids, key, eth)
}

/// The body of [`fill_crossing`] (inlined into `burst_avx2::crossing64`).
#[inline(always)]
pub(super) fn fill_crossing_as<T: FreshPkt, F: FillRun>(
    ring: &mut WqebbRing<'_>,
    pi: u32,
    pkts: &[T],
    ids: &mut [u64],
    key: (u64, u16),
    eth: [u8; SEND_WQE_DS],
) -> usize {
    const TLEN: usize = Inline64::TLEN;
    const TITLE: usize = mpw::TITLE_DS * SEND_WQE_DS;
    let Some((w1, w2)) = ring.window_wrapping(pi, (WIN64 / SEND_WQE_BB) as u32) else {
        return 0;
    };
    let b = w1.len();
    if let Some(t) = w1.get_mut(SEND_WQE_DS..TITLE) {
        t.copy_from_slice(&eth);
    }
    // Descriptors wholly before the end (the counted loop stops at the
    // end of the first part), and the bytes of the next one before it (0:
    // it starts at the end).
    let split = (b - TITLE) % TLEN;
    let n1 = (b - TITLE) / TLEN;
    // The key made once for the session's two loops and its straddling
    // descriptor.
    let k64 = F::Eq::key(key);
    let mut k = match w1.get_mut(TITLE..) {
        Some(r1) => F::fill_of(r1, pkts, ids, key, k64),
        None => return 0,
    };
    // (`F::fill_of` takes at most `n1`: fewer, the run ended before the end.
    // All of `pkts` taken, the straddling descriptor finds none and the
    // second part's loop none (one test fewer: measured 29.35
    // instructions per packet in `tx/empw_inline64_frames32` instead of
    // 29.38).)
    if k != n1 {
        return k;
    }
    // Where the descriptors after the end start in the second part.
    let mut at2 = 0;
    if split != 0 {
        // The straddling descriptor: header and frame built in a scratch
        // descriptor (the test of `fill64`), its first four 16-byte units
        // and the frame's last 4 bytes (the descriptor's bytes 64..68)
        // each copied into the part it falls in (`split` bytes of it
        // before the end: a multiple of 16).
        let (Some(p), Some(id)) = (pkts.get(k), ids.get_mut(k)) else {
            return k;
        };
        let Some(f) = p.common64::<F::Eq>(k64) else {
            return k;
        };
        let mut d = [0u8; 4 * SEND_WQE_DS + 4];
        let (h, x) = d.split_at_mut(4);
        h.copy_from_slice(&inline_header(64));
        x.copy_from_slice(f);
        *id = p.id();
        // One fixed-size copy into each part per split, no loop
        // (measured: 30.1 instructions per packet in
        // `tx/empw_inline64_frames32` instead of 30.2).
        match split {
            16 => straddle::<16, 52>(w1, w2, &d),
            32 => straddle::<32, 36>(w1, w2, &d),
            48 => straddle::<48, 20>(w1, w2, &d),
            64 => straddle::<64, 4>(w1, w2, &d),
            // (Not reached: `b` is whole WQEBBs.)
            _ => return k,
        }
        k += 1;
        at2 = TLEN - split;
    }
    if let (Some(r2), Some(p), Some(i)) = (w2.get_mut(at2..), pkts.get(k..), ids.get_mut(k..)) {
        k += F::fill_of(r2, p, i, key, k64);
    }
    k
}

/// The straddling descriptor `d` (its 68 written bytes) of
/// [`fill_crossing`]: its first `S` bytes at the end of the ring's first
/// part `w1`, the other `R` (`S + R = 68`) at the start of its second
/// part `w2`.
#[inline(always)]
fn straddle<const S: usize, const R: usize>(
    w1: &mut [u8],
    w2: &mut [u8],
    d: &[u8; 4 * SEND_WQE_DS + 4],
) {
    if let (Some(a), Some(b), Some(x), Some(y)) = (
        w1.last_chunk_mut::<S>(),
        w2.first_chunk_mut::<R>(),
        d.first_chunk::<S>(),
        d.last_chunk::<R>(),
    ) {
        *a = *x;
        *b = *y;
    }
}

/// Copies the WQEBBs of `ring` from the free-running counter `pi` on,
/// wrapping at the ring end, into `dst` (whole WQEBBs: the staging area
/// of a session that is not built in the ring, which then holds the
/// ring's bytes wherever the session writes none, its padding and the
/// tail of its last WQEBB, and gives them back unchanged at close,
/// `Out::finish`; or the BlueFlame copy of a WQE built in the ring).
/// Nothing if `dst` is `None` or longer than the ring.
#[inline(always)]
pub(super) fn load_wrapping(ring: &mut WqebbRing<'_>, pi: u32, dst: Option<&mut [u8]>) {
    let Some(dst) = dst else { return };
    let bbs = (dst.len() / SEND_WQE_BB) as u32;
    if bbs > ring.blocks() {
        return;
    }
    let before = (ring.blocks() - (pi & ring.mask())).min(bbs);
    let (a, b) = dst.split_at_mut(before as usize * SEND_WQE_BB);
    if let Some(s) = ring.window(pi, before) {
        copy_blocks(a, s);
    }
    if let Some(s) = ring.window(pi.wrapping_add(before), bbs - before) {
        copy_blocks(b, s);
    }
}

/// Copies `src` into `dst`, whole 64-byte blocks, as fixed-size moves.
#[inline(always)]
fn copy_blocks(dst: &mut [u8], src: &[u8]) {
    for (d, s) in dst
        .chunks_exact_mut(SEND_WQE_BB)
        .zip(src.chunks_exact(SEND_WQE_BB))
    {
        // (Chunks of exactly one WQEBB: the conversions cannot fail.)
        if let (Ok(d), Ok(s)) = (
            <&mut [u8; SEND_WQE_BB]>::try_from(d),
            <&[u8; SEND_WQE_BB]>::try_from(s),
        ) {
            *d = *s;
        }
    }
}

/// One descriptor of [`fill64`] into `d`: header `hdr` and `frame` (the
/// 12 bytes of padding after it not written); `id` into its id slot
/// `slot`.
#[inline(always)]
fn put64(d: &mut [u8; 80], hdr: [u8; 4], frame: &[u8; 64], slot: &mut u64, id: u64) {
    if let Some(h) = d.first_chunk_mut::<4>() {
        *h = hdr;
    }
    if let Some(x) = d.get_mut(4..68) {
        x.copy_from_slice(frame);
    }
    *slot = id;
}

/// [`fill64`] two packets a turn (one loop test and one counter update
/// for two: 13 instructions per 64-byte frame instead of 15), then the
/// odd one: the same bytes, the same count.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2", not(loom)))]
#[inline(always)]
pub(super) fn fill64_pairs<T: FreshPkt, E: HeadEq>(
    region: &mut [u8],
    pkts: &[T],
    ids: &mut [u64],
    key: (u64, u16),
) -> usize {
    fill64_pairs_of::<T, E>(region, pkts, ids, E::key(key))
}

/// [`fill64_pairs`] with the key made ([`HeadEq::key`] of [`Head::key`]
/// of the session's offload words and 64).
#[inline(always)]
pub(super) fn fill64_pairs_of<T: FreshPkt, E: HeadEq>(
    region: &mut [u8],
    pkts: &[T],
    ids: &mut [u64],
    key: E::Key,
) -> usize {
    let hdr = inline_header(64);
    let mut k = 0;
    for ((d, p), id) in region
        .chunks_exact_mut(160)
        .zip(pkts.chunks_exact(2))
        .zip(ids.chunks_exact_mut(2))
    {
        let (Ok(d), [p0, p1], [i0, i1]) = (<&mut [u8; 160]>::try_from(d), p, id) else {
            return k;
        };
        let (d0, d1) = d.split_at_mut(80);
        let (Ok(d0), Ok(d1)) = (<&mut [u8; 80]>::try_from(d0), <&mut [u8; 80]>::try_from(d1))
        else {
            return k;
        };
        if T::KEYED {
            // Packets: both heads tested at once, their bytes then at
            // hand (`HeadEq::pair64`); if not, the first one on its own
            // (below).
            let Some((f0, f1)) = T::pair64::<E>(p0, p1, key) else {
                break;
            };
            put64(d0, hdr, f0, i0, p0.id());
            put64(d1, hdr, f1, i1, p1.id());
            k += 2;
            continue;
        }
        let Some(f0) = p0.common64::<E>(key) else {
            return k;
        };
        put64(d0, hdr, f0, i0, p0.id());
        let Some(f1) = p1.common64::<E>(key) else {
            return k + 1;
        };
        put64(d1, hdr, f1, i1, p1.id());
        k += 2;
    }
    // The odd one (packets: or the first of a pair not both common).
    if let (Some(d), Some(p), Some(i)) = (
        region
            .get_mut(k * 80..)
            .and_then(|r| r.first_chunk_mut::<80>()),
        pkts.get(k),
        ids.get_mut(k),
    ) {
        if let Some(f) = p.common64::<E>(key) {
            put64(d, hdr, f, i, p.id());
            k += 1;
        }
    }
    k
}
