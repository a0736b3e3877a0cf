//! List posts: a slice of one-SGE work requests of one operation, checked
//! as a whole, then written straight into the ring with one doorbell
//! (`ibv_post_send` with a linked list of WRs, all or nothing).
//!
//! ```ignore
//! let wrs = [RdmaWr::new(1, rkey, raddr, Sge::new(lkey, a, 64), SendFlags::NONE), /* … */];
//! sq.post_rdma_write_list(&wrs)?; // one doorbell for all of them
//! ```
//!
//! # Why no staging (and no abort)
//!
//! A list post is one call: the caller hands over every work request at
//! once, so there is nothing to abort half-way. Everything that can fail is
//! known before the first byte is written: the operation against the QP
//! type, SGEs allowed at all (`max_sge > 0`), and room for the whole list
//! (a one-SGE WQE is one WQEBB, whatever the element). No element can be
//! invalid on its own: a zero-length SGE is skipped, as libmlx5 and the
//! builder do (one DS less). So after the checks nothing fails, and the
//! rules "a failed post leaves the ring, the doorbell record and the
//! register untouched" and "no partial WQE" hold without the staging copy.
//! On error nothing is written at all: `Err` means no element was posted.
//!
//! # The fast and the full path
//!
//! With room for the whole list and no fence to inherit (the fast path;
//! the test is one per list), the WQEs are written in runs that stop at
//! the ring end and at every multiple of 256 WQEBBs (one run for a list
//! that crosses neither): within a run the first control word and the
//! shadow word are the previous ones plus a constant (the WQE index's low
//! byte, big-endian, never carries inside a run), and the shadow slots
//! follow the ring slots, so there is no wrap test, no index computation
//! and no bounds test per WQE.
//!
//! A run is written as if every element were *plain* (no flag, a
//! non-empty SGE, no forced CQE): per WQE nothing is tested; the flags are
//! ORed and the smallest SGE length kept, and both are checked once, after
//! the run. When they say every element was plain, the only thing left is
//! the forced-CQE rule, whose positions are known from the unsignalled
//! count (at most one per `signal_every` WQEBBs): those WQEs get the
//! CQ-update bit and `SHADOW_CQE`, one byte of the ring and one shadow word
//! each. Otherwise the first element that was not plain and everything
//! after it are written again, out of line: that element with every test
//! (flags, a zero-length SGE: one DS less), then the next runs. Nothing of
//! this is visible to the device before the doorbell, and every slot holds
//! its final bytes by then.
//!
//! The plain runs of RDMA writes and reads ([`RdmaWr`]) are written with
//! AVX2 when the queue may use it ([`SendQueue::set_avx2`]; the whole fast
//! path is then compiled with AVX2, one call per list): one 32-byte load of
//! each element, a `vpermd` and a `vpshufb` put every field, byte-swapped,
//! where the WQE wants it, and the control segment is a register that one
//! `vpaddq` moves to the next WQE index (`SendQueue::write_rdma_run_avx2`).
//! The bytes are the same.
//!
//! Without room, nothing is written ([`PostError::QueueFull`]); with a
//! fence to inherit (after a local invalidate) the full path writes the
//! same WQEs with every test per WQE, still straight into the ring; UD,
//! XRC and raw Ethernet queues, operations the QP refuses and queues
//! without SGEs take the builder (a batch), which reports the error of the
//! first element that fails and writes nothing then.
//!
//! The bytes, shadow entries, doorbell record and register write are the
//! builder's for the same work requests posted as one batch, with and
//! without AVX2 (`tests::list_posts_match_the_builder`,
//! `tests::list_equals_one_call_posts_in_the_ring`).
#![forbid(unsafe_code)]

use super::batch::{Op, Sge};
use super::doorbell::{self, DoorbellPolicy};
use super::fast;
use super::kind::QpKind;
use super::{PostError, QpType, SendFlags, SendQueue, SqShadowEntry, Wqebb, SHADOW_CQE};
use crate::index::{in_flight, wq_counter16};
use crate::prm::{CtrlSeg, WQE_CTRL_CQ_UPDATE};

/// An RDMA write or read of one SGE, an element of
/// [`SendQueue::post_rdma_write_list`] / [`SendQueue::post_rdma_read_list`]
/// (`struct ibv_send_wr` with `num_sge = 1` and `wr.rdma`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RdmaWr {
    /// Work request id, reported by the completion.
    pub wr_id: u64,
    /// Remote virtual address.
    pub remote_addr: u64,
    /// The local memory (a zero-length SGE is skipped, as libmlx5 does).
    pub sge: Sge,
    /// Remote key.
    pub rkey: u32,
    /// `IBV_SEND_SIGNALED`, `IBV_SEND_SOLICITED`, `IBV_SEND_FENCE`.
    pub flags: SendFlags,
}

impl RdmaWr {
    /// An RDMA write or read of `sge` to or from `remote_addr`.
    pub const fn new(wr_id: u64, rkey: u32, remote_addr: u64, sge: Sge, flags: SendFlags) -> Self {
        Self {
            wr_id,
            remote_addr,
            sge,
            rkey,
            flags,
        }
    }
}

/// A send of one SGE, an element of [`SendQueue::post_send_list`].
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SendWr {
    /// Work request id, reported by the completion.
    pub wr_id: u64,
    /// The local memory (a zero-length SGE is skipped, as libmlx5 does).
    pub sge: Sge,
    /// `IBV_SEND_SIGNALED`, `IBV_SEND_SOLICITED`, `IBV_SEND_FENCE`.
    pub flags: SendFlags,
}

impl SendWr {
    /// A send of `sge`.
    pub const fn new(wr_id: u64, sge: Sge, flags: SendFlags) -> Self {
        Self { wr_id, sge, flags }
    }
}

/// The fields of a list element (the two element types share the code).
pub(super) trait ListWr: Copy {
    fn wr_id(&self) -> u64;
    fn rkey(&self) -> u32;
    fn raddr(&self) -> u64;
    fn sge(&self) -> Sge;
    fn flags(&self) -> u8;
    /// The list as [`RdmaWr`]s (the layout the vector path reads), if it
    /// is one.
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2", not(loom)))]
    #[inline(always)]
    fn as_rdma(list: &[Self]) -> Option<&[RdmaWr]> {
        let _ = list;
        None
    }
}

impl ListWr for RdmaWr {
    #[inline(always)]
    fn wr_id(&self) -> u64 {
        self.wr_id
    }
    #[inline(always)]
    fn rkey(&self) -> u32 {
        self.rkey
    }
    #[inline(always)]
    fn raddr(&self) -> u64 {
        self.remote_addr
    }
    #[inline(always)]
    fn sge(&self) -> Sge {
        self.sge
    }
    #[inline(always)]
    fn flags(&self) -> u8 {
        self.flags.0
    }
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2", not(loom)))]
    #[inline(always)]
    fn as_rdma(list: &[Self]) -> Option<&[RdmaWr]> {
        Some(list)
    }
}

impl ListWr for SendWr {
    #[inline(always)]
    fn wr_id(&self) -> u64 {
        self.wr_id
    }
    #[inline(always)]
    fn rkey(&self) -> u32 {
        0
    }
    #[inline(always)]
    fn raddr(&self) -> u64 {
        0
    }
    #[inline(always)]
    fn sge(&self) -> Sge {
        self.sge
    }
    #[inline(always)]
    fn flags(&self) -> u8 {
        self.flags.0
    }
}

/// One in the low byte of the WQE index in the first control word (bytes
/// 1..3, big-endian: the low byte is byte 2), as a native word.
pub(super) const INDEX_LOW_ONE: u64 = u64::from_ne_bytes([0, 0, 1, 0, 0, 0, 0, 0]);
/// One DS in the first control word (the low bits of byte 7).
const DS_ONE: u64 = u64::from_ne_bytes([0, 0, 0, 0, 0, 0, 0, 1]);
/// Byte offset of `fm_ce_se` in a WQE (its control segment's).
const FM_CE_SE_OFFSET: usize = core::mem::offset_of!(CtrlSeg, fm_ce_se);
/// Runs of the fast path stop at multiples of this many WQEBBs, so that the
/// low byte of the WQE index never carries inside a run.
const RUN_ALIGN: u32 = 256;

/// How the plain runs of a list post are written
/// (`SendQueue::write_plain_run`).
#[derive(Clone, Copy)]
pub(super) enum Runs {
    /// With general-purpose registers.
    Scalar,
    /// With AVX2 (RDMA writes and reads; others as `Scalar`), with its proof.
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2", not(loom)))]
    Avx2(crate::cpu::Avx2),
}

/// How many leading elements of `run` are plain: no flag, a non-empty SGE.
#[cold]
pub(super) fn plain_prefix<W: ListWr>(run: &[W]) -> usize {
    run.iter()
        .position(|w| w.flags() != 0 || w.sge().length == 0)
        .unwrap_or(run.len())
}

/// The one-WQEBB WQE of a one-SGE work request, a zero-length SGE skipped
/// (one DS less, its words zero): `fast::sge_wqebb` for both cases.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn one_sge_wqe(
    ctrl0: u64,
    index: u16,
    ctrl1: u64,
    remote: bool,
    rkey: u32,
    raddr: u64,
    sge: Sge,
) -> Wqebb {
    if sge.length != 0 {
        return fast::sge_wqebb(ctrl0, index, ctrl1, remote, rkey, raddr, sge);
    }
    let mut wqe = fast::sge_wqebb(ctrl0 - DS_ONE, index, ctrl1, remote, rkey, raddr, sge);
    let at = if remote { 32 } else { 16 };
    if let Some(data) = wqe.0.get_mut(at..at + 16) {
        data.fill(0);
    }
    wqe
}

impl<P: DoorbellPolicy, Q: QpKind> SendQueue<'_, P, Q> {
    /// Posts a list of RDMA writes of one SGE each, with one doorbell
    /// (`ibv_post_send` with a chain of `IBV_WR_RDMA_WRITE` work requests),
    /// all or nothing.
    ///
    /// The list is checked as a whole before anything is written (see the
    /// module documentation of `list`); on error nothing was posted, and
    /// the ring, the doorbell record and the register are untouched. The
    /// WQEs, shadow entries, doorbell record and register write are the
    /// ones of the same work requests posted through one batch
    /// (`start`, `rdma_write_sge` for each, `complete`); unlike a batch a
    /// list needs no staging area ([`PostError::BatchFull`] is only
    /// possible on queues the fast paths do not serve: UD, XRC, raw
    /// Ethernet, no SGEs). An empty list posts nothing and rings no
    /// doorbell.
    #[inline(always)]
    pub fn post_rdma_write_list(&mut self, wrs: &[RdmaWr]) -> Result<(), PostError> {
        self.post_list(Op::Write, wrs)
    }

    /// Posts a list of RDMA reads into one SGE each, with one doorbell (see
    /// [`SendQueue::post_rdma_write_list`]).
    #[inline(always)]
    pub fn post_rdma_read_list(&mut self, wrs: &[RdmaWr]) -> Result<(), PostError> {
        self.post_list(Op::Read, wrs)
    }

    /// Posts a list of sends of one SGE each, with one doorbell (see
    /// [`SendQueue::post_rdma_write_list`]; UD, XRC and raw Ethernet queues
    /// fail, for want of an address, an SRQ number or frame bytes).
    #[inline(always)]
    pub fn post_send_list(&mut self, wrs: &[SendWr]) -> Result<(), PostError> {
        self.post_list(Op::Send, wrs)
    }

    /// Whether the list paths write `op` straight into the ring: RC/UC, an
    /// operation the QP allows, SGEs allowed.
    #[inline(always)]
    fn list_direct_ok(&self, op: Op) -> bool {
        let qp = self.qp_type();
        matches!(qp, QpType::Rc | QpType::Uc)
            && matches!(op, Op::Write | Op::Read | Op::Send)
            && op.allowed(qp, &self.lim)
            && self.lim.has_sge
    }

    /// The list posts: the fast path when the whole list fits and no fence
    /// is inherited (with AVX2 for RDMA lists when the queue may use it:
    /// [`SendQueue::set_avx2`]), else the full path, out of line.
    #[inline(always)]
    fn post_list<W: ListWr>(&mut self, op: Op, wrs: &[W]) -> Result<(), PostError> {
        if wrs.is_empty() {
            return Ok(());
        }
        // Room for the whole list (`post_limit` is 0 without SGEs), one
        // WQEBB per element, and no fence to inherit.
        let room = self.post_limit.saturating_sub(in_flight(self.pi, self.ci));
        if !self.list_direct_ok(op) || wrs.len() > room as usize || self.fm_cache != 0 {
            return self.post_list_full(op, wrs);
        }
        let shape = self.lim.sge_shape(op);
        #[cfg(all(target_arch = "x86_64", target_feature = "sse2", not(loom)))]
        if let (Some(avx2), Some(rdma)) = (self.avx2, W::as_rdma(wrs)) {
            self.write_rdma_list_avx2(avx2, shape, rdma);
            return Ok(());
        }
        self.write_list_fast(shape, wrs, Runs::Scalar);
        Ok(())
    }

    /// Writes a non-empty list that has room, with no fence to inherit,
    /// then rings the doorbell. Nothing fails. `shape`: the operation's
    /// first control word, DS and remote-address segment
    /// (`Limits::sge_shape`); `runs`: how the plain runs are written.
    ///
    /// The common list goes through in one run and at most a few patches:
    /// the WQEs from the producer index to the ring end (or the next
    /// multiple of 256 WQEBBs) are written as if every element were plain
    /// ([`SendQueue::write_plain_run`]: no flag, a non-empty SGE, no forced
    /// CQE), which tells how many leading elements really were. If all
    /// were and the list fits the run, the WQEs the forced-CQE rule reaches
    /// (at most one per `signal_every` WQEBBs) get their CQE bit
    /// ([`SendQueue::mark_forced`]) and the list is done. Anything else (an
    /// element with flags or a zero-length SGE, a list that crosses the
    /// ring end) continues out of line ([`SendQueue::write_list_rest`]).
    /// Every slot of the list holds its final bytes before the doorbell;
    /// nothing before it is visible to the device.
    #[inline(always)]
    pub(super) fn write_list_fast<W: ListWr>(
        &mut self,
        shape: (u64, u8, bool),
        wrs: &[W],
        runs: Runs,
    ) {
        let pi0 = self.pi;
        let (ctrl0, ds, remote) = shape;
        let n = wrs.len();
        // ---- the first run ----------------------------------------------------
        let slot = pi0 & self.mask;
        let room = core::cmp::min(self.entries - slot, RUN_ALIGN - (pi0 % RUN_ALIGN));
        let run = wrs.get(..room as usize).unwrap_or(wrs);
        let done = self.write_plain_run(pi0, run, ctrl0, remote, runs);
        // ---- forced CQEs, or the rest out of line ------------------------------
        // (`sig_all`: every WQE requests a CQE; the count is not used.)
        let sig_all = self.lim.sig_bits != 0;
        let force_at = self.lim.force_at as usize;
        let u0 = if sig_all {
            0
        } else {
            self.unsignaled() as usize
        };
        let unsignaled = if done != n {
            self.write_list_rest(pi0, wrs, (done, run.len()), ctrl0, remote, u0, runs)
        } else if sig_all || u0 + n < force_at {
            u0 + n
        } else {
            // A plain WQE at count `u` is forced when `u + 1 >= force_at`:
            // the first at `force_at - 1 - u0` (`u0 < force_at` after every
            // post), then every `force_at`.
            let mut p = (force_at - 1).saturating_sub(u0);
            let mut last = p;
            while p < n {
                self.mark_forced(pi0.wrapping_add(p as u32));
                last = p;
                p += force_at;
            }
            n - 1 - last
        };
        // ---- the queue's own state, then the doorbell ----------------------
        let pi = pi0.wrapping_add(n as u32);
        self.pi = pi;
        if sig_all {
            // Every WQE requested a CQE.
            self.sig_pi = pi;
        } else {
            self.set_unsignaled(unsignaled as u32);
        }
        // No fast-path credits left (the next one-call post refreshes them).
        self.fast_end = pi;
        let last = Wqebb(self.ring.read(pi.wrapping_sub(1)));
        let last_ds = match wrs.last() {
            Some(w) if w.sge().length == 0 => ds - 1,
            _ => ds,
        };
        self.db.ring::<P>(doorbell::Publish {
            pi,
            last_wqe: core::slice::from_ref(&last),
            last_ds,
            nreq: n as u32,
            inline: false,
        });
    }

    /// Gives the plain WQE at producer counter `at` (written by
    /// [`SendQueue::write_plain_run`]) the CQE the forced-CQE rule asks
    /// for: the CQ-update bit of its `fm_ce_se` (which was 0: no flag, no
    /// `sig_all`) and `SHADOW_CQE` in its shadow entry; the same bytes as
    /// [`fast::ctrl_flags`] gives a forced WQE.
    #[inline(always)]
    fn mark_forced(&mut self, at: u32) {
        let mut wqe = self.ring.read(at);
        if let Some(b) = wqe.get_mut(FM_CE_SE_OFFSET) {
            *b |= WQE_CTRL_CQ_UPDATE;
        }
        self.ring.write(at, &wqe);
        if let Some(e) = self.shadow.get_mut((at & self.mask) as usize) {
            e.mark_cqe();
        }
    }

    /// The rest of a list after its first run wrote `done` plain WQEs of
    /// the `run_len` it was given (`done < run_len`: an element with flags
    /// or a zero-length SGE; or `done == run_len < wrs.len()`: the list
    /// crosses the ring end or a multiple of 256 WQEBBs): the forced CQEs
    /// in each plain prefix, the element a run stopped at through
    /// [`SendQueue::write_list_one`], and the next runs. `unsignaled` is the
    /// count before the list; returns the count after it.
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn write_list_rest<W: ListWr>(
        &mut self,
        pi0: u32,
        wrs: &[W],
        (mut done, mut run_len): (usize, usize),
        ctrl0: u64,
        remote: bool,
        mut unsignaled: usize,
        runs: Runs,
    ) -> usize {
        let sig_all = self.lim.sig_bits != 0;
        let force_at = self.lim.force_at as usize;
        // The run being finished starts at `start`.
        let mut start = 0usize;
        loop {
            // ---- forced CQEs in the plain prefix [start, start + done) ------
            if !sig_all {
                let mut p = (force_at - 1).saturating_sub(unsignaled);
                unsignaled += done;
                while p < done {
                    self.mark_forced(pi0.wrapping_add((start + p) as u32));
                    unsignaled = done - 1 - p;
                    p += force_at;
                }
            }
            // ---- the element the run stopped at ------------------------------
            let mut next = start + done;
            if done < run_len {
                let Some(wr) = wrs.get(next) else {
                    break;
                };
                let at = pi0.wrapping_add(next as u32);
                unsignaled = self.write_list_one(at, wr, ctrl0, remote, unsignaled as u32) as usize;
                next += 1;
            }
            // ---- the next run -----------------------------------------------
            let Some(rest) = wrs.get(next..).filter(|r| !r.is_empty()) else {
                break;
            };
            let at = pi0.wrapping_add(next as u32);
            let room = core::cmp::min(
                self.entries - (at & self.mask),
                RUN_ALIGN - (at % RUN_ALIGN),
            );
            let run = rest.get(..room as usize).unwrap_or(rest);
            start = next;
            run_len = run.len();
            done = self.write_plain_run(at, run, ctrl0, remote, runs);
        }
        unsignaled
    }

    /// Writes the WQEs of `run` from producer counter `at`, as if every
    /// element were *plain*: no flag, a non-empty SGE, no forced CQE
    /// (`fm_ce_se` is `sig_all`'s bit alone, the shadow flags are
    /// `Limits::meta_one`'s). Returns how many leading elements really are
    /// plain (0 if nothing was written); the WQEs and shadow entries of the
    /// elements after them are wrong, and the caller writes those slots
    /// again.
    ///
    /// `run` must not cross the ring end nor a multiple of 256 WQEBBs (the
    /// low byte of the WQE index, big-endian, then never carries: the
    /// control word is the previous one plus a constant), so that the ring
    /// and shadow slots follow each other: no wrap test, no index
    /// computation, no bounds test per WQE. The tests are folded into two
    /// words (the ORed flags, the smallest length) and checked once, after
    /// the run.
    #[inline(always)]
    fn write_plain_run<W: ListWr>(
        &mut self,
        at: u32,
        run: &[W],
        ctrl0: u64,
        remote: bool,
        runs: Runs,
    ) -> usize {
        let index = wq_counter16(at);
        let w0 = ctrl0 | fast::index_word(index);
        let ctrl1 = self.lim.ctrl1_sig;
        let meta = self.lim.meta_one | SqShadowEntry::meta_of(index, 0, 0);
        #[cfg(all(target_arch = "x86_64", target_feature = "sse2", not(loom)))]
        if let (Runs::Avx2(avx2), Some(rdma)) = (runs, W::as_rdma(run)) {
            // (`RdmaWr` lists are RDMA writes and reads: remote address.)
            debug_assert!(remote);
            return self.write_rdma_run_avx2(avx2, at, rdma, w0, ctrl1, meta);
        }
        let _ = runs;
        let start = (at & self.mask) as usize;
        let Some(shadow) = self.shadow.get_mut(start..start + run.len()) else {
            // Cannot happen: the shadow holds `entries` slots
            // (`ShadowTooSmall`) and the run ends at the ring end; the
            // caller then writes the elements one by one.
            return 0;
        };
        let (mut w0, mut meta, mut flags, mut min_len) = (w0, meta, 0u8, u32::MAX);
        let written = self.ring.write_contiguous(at, run.len(), |k| {
            let (Some(wr), Some(e)) = (run.get(k), shadow.get_mut(k)) else {
                return [0; 64];
            };
            let sge = wr.sge();
            flags |= wr.flags();
            min_len = core::cmp::min(min_len, sge.length);
            *e = SqShadowEntry::from_meta(wr.wr_id(), meta);
            // The data segment's first word: length and lkey, big-endian
            // each (one 8-byte load, one swap, one rotate).
            let len_lkey = (u64::from(sge.length) | (u64::from(sge.lkey) << 32))
                .swap_bytes()
                .rotate_left(32);
            let data = [len_lkey, sge.addr.to_be()];
            let raddr = [wr.raddr().to_be(), fast::rkey_word(wr.rkey())];
            let wqe = fast::words_wqebb(w0, ctrl1, remote, raddr, data);
            w0 = w0.wrapping_add(INDEX_LOW_ONE);
            meta += 1;
            wqe.0
        });
        match (written, flags != 0 || min_len == 0) {
            (false, _) => 0, // cannot happen: the run ends at the ring end
            (true, false) => run.len(),
            (true, true) => plain_prefix(run),
        }
    }

    /// Writes an element of a list that is not plain (flags, a zero-length
    /// SGE: one DS less, no data segment) with every test
    /// ([`fast::ctrl_flags`] with the running `unsignaled` count, so the
    /// forced-CQE rule too; no fence inherited). Returns the new
    /// `unsignaled` count.
    #[inline(never)]
    fn write_list_one<W: ListWr>(
        &mut self,
        at: u32,
        wr: &W,
        ctrl0: u64,
        remote: bool,
        unsignaled: u32,
    ) -> u32 {
        let (fm_ce_se, shadow_flags) = fast::ctrl_flags(wr.flags(), &self.lim, 0, unsignaled, 1);
        let index = wq_counter16(at);
        let wqe = one_sge_wqe(
            ctrl0,
            index,
            fast::ctrl1_of(fm_ce_se),
            remote,
            wr.rkey(),
            wr.raddr(),
            wr.sge(),
        );
        self.ring.write(at, &wqe.0);
        self.record(at, wr.wr_id(), index, 1, shadow_flags);
        if shadow_flags & SHADOW_CQE != 0 {
            0
        } else {
            unsignaled + 1
        }
    }

    /// The list post the fast path does not take: a fence to inherit (every
    /// test per WQE, still straight into the ring), no room
    /// ([`PostError::QueueFull`], nothing written), or a queue or operation
    /// the direct paths do not serve (the builder).
    #[inline(never)]
    fn post_list_full<W: ListWr>(&mut self, op: Op, wrs: &[W]) -> Result<(), PostError> {
        if !self.list_direct_ok(op) {
            return self.post_list_batch(op, wrs);
        }
        // Room for the whole list (one WQEBB per element) or nothing.
        let room = self.post_limit.saturating_sub(in_flight(self.pi, self.ci));
        if wrs.len() > room as usize {
            return Err(PostError::QueueFull);
        }
        // ---- from here on nothing fails ------------------------------------
        let (ctrl0, ds, remote) = self.lim.sge_shape(op);
        let mut unsignaled = if self.lim.sig_bits != 0 {
            0
        } else {
            self.unsignaled()
        };
        let mut fm_cache = self.fm_cache;
        let mut pi = self.pi;
        let mut last = Wqebb::ZERO;
        let mut last_ds = ds;
        for wr in wrs {
            let (fm_ce_se, shadow_flags) =
                fast::ctrl_flags(wr.flags(), &self.lim, fm_cache, unsignaled, 1);
            let index = wq_counter16(pi);
            let sge = wr.sge();
            last = one_sge_wqe(
                ctrl0,
                index,
                fast::ctrl1_of(fm_ce_se),
                remote,
                wr.rkey(),
                wr.raddr(),
                sge,
            );
            last_ds = if sge.length == 0 { ds - 1 } else { ds };
            self.ring.write(pi, &last.0);
            self.record(pi, wr.wr_id(), index, 1, shadow_flags);
            fm_cache = 0;
            unsignaled = if shadow_flags & SHADOW_CQE != 0 {
                0
            } else {
                unsignaled + 1
            };
            pi = pi.wrapping_add(1);
        }
        self.pi = pi;
        self.fm_cache = 0;
        self.set_unsignaled(unsignaled);
        self.refresh_credits();
        self.db.ring::<P>(doorbell::Publish {
            pi,
            last_wqe: core::slice::from_ref(&last),
            last_ds,
            nreq: wrs.len() as u32,
            inline: false,
        });
        Ok(())
    }

    /// The list through a batch (the builder's checks and errors); the
    /// first failing element aborts it, so nothing is written.
    #[cold]
    #[inline(never)]
    fn post_list_batch<W: ListWr>(&mut self, op: Op, wrs: &[W]) -> Result<(), PostError> {
        let mut b = self.start();
        for wr in wrs {
            let flags = SendFlags(wr.flags());
            let r = match op {
                Op::Write => b.rdma_write_sge(wr.wr_id(), wr.rkey(), wr.raddr(), wr.sge(), flags),
                Op::Read => b.rdma_read_sge(wr.wr_id(), wr.rkey(), wr.raddr(), wr.sge(), flags),
                _ => b.send_sge(wr.wr_id(), wr.sge(), flags),
            };
            if let Err(e) = r {
                b.abort();
                return Err(e);
            }
        }
        b.complete();
        Ok(())
    }
}
