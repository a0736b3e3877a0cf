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
//! the ring end and at every multiple of 256 WQEBBs (so at most twice for a
//! list shorter than 256 on a ring of 256 or more): within a run the first
//! control word and the shadow word are the previous ones plus a constant
//! (the WQE index's low byte, big-endian, never carries inside a run), and
//! the shadow slots follow the ring slots, so there is no wrap test, no
//! index computation and no bounds test per WQE. The forced-CQE rule runs
//! as a count-down per WQE. An element with flags, with a zero-length SGE
//! or reaching the forced CQE takes a short detour for its control word
//! and shadow flags. Without room, nothing is written
//! ([`PostError::QueueFull`]); with a fence to inherit (after a local
//! invalidate) the full path writes the same WQEs with every test per WQE,
//! still straight into the ring; UD, XRC and raw Ethernet queues,
//! operations the QP refuses and queues without SGEs take the builder (a
//! batch), which reports the error of the first element that fails and
//! writes nothing then.
//!
//! The bytes, shadow entries, doorbell record and register write are the
//! builder's for the same work requests posted as one batch
//! (`tests::list_posts_match_the_builder`).
#![forbid(unsafe_code)]

use super::batch::{Op, Sge, F_SIGNALED};
use super::doorbell::{self, DoorbellPolicy};
use super::fast;
use super::kind::QpKind;
use super::{PostError, QpType, SendFlags, SendQueue, SqShadowEntry, Wqebb, SHADOW_CQE};
use crate::index::{in_flight, wq_counter16};
use crate::prm::WQE_CTRL_CQ_UPDATE;

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
const INDEX_LOW_ONE: u64 = u64::from_ne_bytes([0, 0, 1, 0, 0, 0, 0, 0]);
/// One DS in the first control word (the low bits of byte 7).
const DS_ONE: u64 = u64::from_ne_bytes([0, 0, 0, 0, 0, 0, 0, 1]);
/// Runs of the fast path stop at multiples of this many WQEBBs, so that the
/// low byte of the WQE index never carries inside a run.
const RUN_ALIGN: u32 = 256;

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
    /// is inherited, else the full path, out of line.
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
        self.write_list_fast(op, wrs);
        Ok(())
    }

    /// Writes a non-empty list that has room, with no fence to inherit,
    /// then rings the doorbell. Nothing fails.
    #[inline(always)]
    fn write_list_fast<W: ListWr>(&mut self, op: Op, wrs: &[W]) {
        let pi0 = self.pi;
        let (ctrl0, ds, remote) = self.lim.sge_shape(op);
        let (ctrl1_sig, meta_one, sig_bits, force_at) = (
            self.lim.ctrl1_sig,
            self.lim.meta_one,
            self.lim.sig_bits,
            self.lim.force_at,
        );
        let entries = self.entries;
        let mask = self.mask;
        // WQEBBs before the forced CQE (`fast::ctrl_flags`' rule as a
        // count-down: the WQE that brings it to 0 is forced, and every WQE
        // that requests a CQE starts it again). At least 1: `unsignaled <
        // force_at` after every post. (`sig_all`: never reached.)
        let mut left = if sig_bits != 0 {
            u32::MAX
        } else {
            force_at - self.unsignaled()
        };
        let mut rest = wrs;
        let mut at = pi0;
        while !rest.is_empty() {
            // ---- one run: to the ring end or the next multiple of 256 ------
            let slot = at & mask;
            let to_end = core::cmp::min(entries - slot, RUN_ALIGN - (at % RUN_ALIGN));
            let (chunk, tail) = rest.split_at(core::cmp::min(rest.len(), to_end as usize));
            let start = slot as usize;
            let Some(shadow) = self.shadow.get_mut(start..start + chunk.len()) else {
                // Cannot happen: the shadow holds `entries` slots
                // (`ShadowTooSmall`) and the run ends at the ring end.
                break;
            };
            let index = wq_counter16(at);
            let mut w0 = ctrl0 | fast::index_word(index);
            let mut meta = meta_one | SqShadowEntry::meta_of(index, 0, 0);
            // (Cannot refuse: the run ends at the ring end at the latest.)
            let written = self.ring.write_contiguous(at, chunk.len(), |k| {
                let (Some(wr), Some(e)) = (chunk.get(k), shadow.get_mut(k)) else {
                    return [0; 64];
                };
                let mut sge = wr.sge();
                let f = wr.flags();
                let (mut c0, mut c1, mut m) = (w0, ctrl1_sig, meta);
                w0 = w0.wrapping_add(INDEX_LOW_ONE);
                meta += 1;
                left -= 1;
                if f != 0 || sge.length == 0 || left == 0 {
                    // The unusual element: flags, a forced CQE, or a
                    // zero-length SGE (one DS less, no data segment).
                    let forced = if left == 0 { WQE_CTRL_CQ_UPDATE } else { 0 };
                    let ce = sig_bits | forced;
                    c1 = fast::ctrl1_of(f | ce);
                    m = (m & !SqShadowEntry::meta_of(0, 0, u8::MAX))
                        | SqShadowEntry::meta_of(0, 0, fast::shadow_flags(f, ce));
                    if (f & F_SIGNALED) | forced != 0 {
                        left = force_at;
                    }
                    if sge.length == 0 {
                        c0 -= DS_ONE;
                        sge = Sge::new(0, 0, 0);
                    }
                }
                *e = SqShadowEntry::from_meta(wr.wr_id(), m);
                fast::sge_wqebb_raw(c0, c1, remote, wr.rkey(), wr.raddr(), sge).0
            });
            debug_assert!(written);
            at = at.wrapping_add(chunk.len() as u32);
            rest = tail;
        }
        // ---- the queue's own state, then the doorbell ----------------------
        let n = wrs.len() as u32;
        let pi = pi0.wrapping_add(n);
        self.pi = pi;
        if sig_bits == 0 {
            self.set_unsignaled(force_at - left);
        } else {
            // `sig_all`: every WQE requested a CQE.
            self.sig_pi = pi;
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
            nreq: n,
            inline: false,
        });
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
