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
//! [`fill`] appends such packets to the session in a loop that nothing is
//! called from (it keeps its state in registers): one test each for the
//! shape (the offload values compared as two words), the length class, the
//! inline bytes and the DS room; the descriptor written into the staging
//! area with fixed-size moves; the id stored into a contiguous run of the
//! id ring. The loop has one descriptor shape per queue, chosen once per
//! run: inline frames of 32..=64 bytes (the minimum-size Ethernet frames:
//! header word, two overlapping 32-byte moves, one 16-byte zero store for
//! the padding, into a fixed 96-byte window), or pointers on a queue that
//! never inlines. The packet it stops at goes to [`fill_one`] (any other
//! common shape, out of the loop); when that one finds the session full,
//! the session is closed for the reason `push` would give and the next one
//! opened, with the same offload values, without leaving the burst path.
//! Everything else (another offload value, several segments, TSO, VLAN, a
//! refused length, a full ring or id ring) goes to `push`, which closes,
//! opens, sends as a single WQE or refuses as it always does. The counters
//! (session, batch, statistics) are written back once per run.
//!
//! # One WQE per packet
//!
//! [`TxBatch::single_run`] builds the SEND WQE of a plain frame (inline L2
//! header if the queue needs one, the rest by pointer: one WQEBB) as a
//! 64-byte value and writes it straight into the ring, with its shadow
//! entry; anything else goes to `push`.
//!
//! # Same bytes
//!
//! Within each descriptor, the bytes are `push`'s: header, frame, zero
//! padding. Bytes written past the descriptor (the zero store, the
//! window's slack) lie past the DS count, where the next descriptor or the
//! session close overwrites them before the session is copied into the
//! ring. `tests::burst_path_matches_push` runs both paths on random bursts
//! (mixed shapes, lengths, offload values, limits, ring and id-ring wraps,
//! full queues, refusals, every mode) and compares ring, doorbell, shadow,
//! counters and completions.
#![forbid(unsafe_code)]

use super::{
    copy_frame, ctrl_bits, data_seg, in_flight, inline_header, mpw, wq_counter16, CloseReason,
    Desc, DoorbellPolicy, Open, Out, Packet, PacketBuf, QpKind, SqShadowEntry, TxBatch, TxKind,
    TxMode, TxQueue, FM_CE_ALWAYS, MAX_DS, SEND_WQE_BB, SEND_WQE_DS, SHADOW_CQE, SHADOW_SIGNALED,
    STAGE_BYTES, STAGE_MASK,
};
use crate::prm::ETH_L2_INLINE_HEADER_SIZE;

/// Longest frame [`TxBatch::push`] accepts (`TxError::BadLength` beyond).
const MAX_LEN: usize = (u32::MAX >> 1) as usize;

impl<P: DoorbellPolicy, Q: QpKind, M: TxMode> TxBatch<'_, '_, P, Q, M> {
    /// Queues as many of `pkts` as fit, in order, stopping at the first one
    /// [`TxBatch::push`] refuses; returns how many were queued. The WQEs
    /// are the ones [`TxBatch::push`] would build packet by packet.
    pub fn push_burst(&mut self, pkts: &[Packet<'_>]) -> usize {
        let mut done = 0;
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
        }
        done
    }

    /// The packet `p` is next and the open session (if any) did not take
    /// it: if `p` is a plain one-segment packet that [`TxBatch::push`]
    /// would put first into a new session, closes the open one (with the
    /// reason `push` gives) and opens that session, empty, and returns
    /// true; else changes nothing and returns false (`p` takes `push`).
    #[inline(never)]
    fn next_session(&mut self, p: &Packet<'_>) -> bool {
        if !p.more.is_empty() | (p.tso_mss != 0) | p.vlan_tci.is_some() {
            return false;
        }
        let (len, frame) = match p.buf {
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
        let max_pk = self.max_packets();
        let max_inline = u32::from(self.q.cfg.max_inline_bytes);
        let cfg_ds = u32::from(self.q.cfg.max_wqe_bytes) / SEND_WQE_DS as u32;
        let sig = self.q.signal();
        let TxBatch {
            q,
            p: pend,
            open,
            wqes,
            inline,
            last,
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
            ..
        } = &mut **q;
        // The packets this run may take: the free ids, up to the end of
        // the id ring (a contiguous run, so that no id needs the mask).
        let cap = ids.len();
        let slot0 = pend.head as usize & (cap - 1);
        let free = cap.saturating_sub(in_flight(pend.head, *tail) as usize);
        let Some(ids) = ids.get_mut(slot0..) else {
            return 0;
        };
        let n = pkts.len().min(free).min(ids.len());
        let (Some(pkts), Some(ids)) = (pkts.get(..n), ids.get_mut(..n)) else {
            return 0;
        };
        let mut out = Out {
            sig,
            sq,
            stage,
            stats,
            p: pend,
            wqes,
            last,
        };
        let key = o.offload.words();
        let mut sess = Sess::of(o, max_pk, max_inline);
        // Packets of `pkts` counted in `out.p` (and the session).
        let mut counted = 0usize;
        let mut k = 0usize;
        loop {
            // The loop takes what fits the session (at most its packets
            // left); the packet it stops at, one descriptor out of it.
            let m = (n - k).min(sess.left);
            let (Some(rest), Some(rest_ids)) = (pkts.get(k..k + m), ids.get_mut(k..k + m)) else {
                break;
            };
            k += fill::<MODE>(&mut out.stage.0, rest, rest_ids, key, &mut sess);
            let (Some(p), Some(id)) = (pkts.get(k), ids.get_mut(k)) else {
                break;
            };
            let exit = match fill_one(&mut out.stage.0, p, key, inline_lim, &mut sess) {
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
            };
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
    /// Each WQE is one WQEBB, built as a value and written straight into
    /// the ring (a failed packet writes nothing: the tests come first);
    /// the bytes, shadow entry and counters are [`TxBatch::push`]'s
    /// (`single`). Returns how many.
    #[inline(never)]
    fn single_run(&mut self, pkts: &[Packet<'_>]) -> usize {
        let inline_max = usize::from(self.q.cfg.single_inline_max);
        let sig = self.q.signal();
        let TxBatch {
            q,
            p: pend,
            wqes,
            inline,
            last,
            ..
        } = self;
        let TxQueue {
            sq,
            ids,
            stage,
            stats,
            tail,
            ..
        } = &mut **q;
        let min18 = match sq.lim.eth_min_inline {
            0 => false,
            18 => true,
            _ => return 0,
        };
        // As many as the ring, the free ids and the ids up to the id
        // ring's end take.
        let cap = ids.len();
        let slot0 = pend.head as usize & (cap - 1);
        let free_ids = cap.saturating_sub(in_flight(pend.head, *tail) as usize);
        let free_bbs = sq.size.entries().saturating_sub(in_flight(pend.pi, sq.ci)) as usize;
        let Some(ids) = ids.get_mut(slot0..) else {
            return 0;
        };
        let n = pkts.len().min(free_ids).min(free_bbs).min(ids.len());
        let (Some(pkts), Some(ids)) = (pkts.get(..n), ids.get_mut(..n)) else {
            return 0;
        };
        // The constant words: DS, control segment's second word (QPN and
        // DS), inline header size.
        let (ds, hdr_sz) = if min18 {
            (4u32, ETH_L2_INLINE_HEADER_SIZE as u16)
        } else {
            (3, 0)
        };
        let qpn_ds = (sq.lim.qpn_ds_bits | (ds << ctrl_bits::DS_SHIFT)).to_be_bytes();
        let mask = sq.size.mask();
        let mut k = 0;
        for (p, id) in pkts.iter().zip(ids.iter_mut()) {
            let PacketBuf::Frame(f) = p.buf else { break };
            let len = f.data.len();
            if !p.more.is_empty() | (p.tso_mss != 0) | p.vlan_tci.is_some()
                || len <= inline_max
                || len.wrapping_sub(ETH_L2_INLINE_HEADER_SIZE + 1)
                    > MAX_LEN - ETH_L2_INLINE_HEADER_SIZE - 1
            {
                break;
            }
            let Some(l2) = f.data.first_chunk::<ETH_L2_INLINE_HEADER_SIZE>() else {
                break;
            };
            // `record_id`, then `finish`'s counters and CQE decision.
            pend.head = pend.head.wrapping_add(1);
            pend.pkts += 1;
            pend.ptr_pkts += 1;
            pend.wqes += 1;
            pend.wqebbs += 1;
            let signal = (pend.wqebbs >= sig.drain_wqebbs)
                | (pend.pkts >= sig.drain_pkts)
                | ((sig.every != 0) & (pend.wqes >= sig.every));
            let fm_ce_se = if signal {
                FM_CE_ALWAYS
            } else {
                sig.fm_unsignaled
            };
            let pi = pend.pi;
            let index = u32::from(wq_counter16(pi)) << ctrl_bits::WQE_INDEX_SHIFT;
            let mut w = [0u8; SEND_WQE_BB];
            // Control segment.
            w[..4].copy_from_slice(&(ctrl_bits::SEND | index).to_be_bytes());
            w[4..8].copy_from_slice(&qpn_ds);
            w[11] = fm_ce_se;
            // Ethernet segment: the packet's offload values, no MSS, the
            // inline header size and its first two bytes.
            let o = &p.offload;
            w[16..20].copy_from_slice(&o.swp_offsets);
            w[20] = o.cs_flags.into_bits();
            w[21] = o.swp_flags.into_bits();
            w[24..28].copy_from_slice(&o.metadata.to_be_bytes());
            w[28..30].copy_from_slice(&hdr_sz.to_be_bytes());
            if min18 {
                // The other 16 header bytes, then the rest by pointer.
                w[30..48].copy_from_slice(l2);
                w[48..64].copy_from_slice(&data_seg(
                    (len - ETH_L2_INLINE_HEADER_SIZE) as u32,
                    f.lkey,
                    f.addr.wrapping_add(ETH_L2_INLINE_HEADER_SIZE as u64),
                ));
            } else {
                w[32..48].copy_from_slice(&data_seg(len as u32, f.lkey, f.addr));
            }
            sq.ring.write(pi, &w);
            if let Some(e) = sq.shadow.get_mut((pi & mask) as usize) {
                *e = SqShadowEntry::new(
                    u64::from(pend.head),
                    wq_counter16(pi),
                    1,
                    if signal {
                        SHADOW_SIGNALED | SHADOW_CQE
                    } else {
                        0
                    },
                );
            }
            if signal {
                pend.reset_since();
            }
            pend.pi = pi.wrapping_add(1);
            *last = Some((pi, 1, ds));
            *id = p.id;
            k += 1;
        }
        if k > 0 {
            // The last WQE in the staging area, for the BlueFlame copy and
            // a CQE requested at burst end (`complete`).
            let lastw = sq.ring.read(pend.pi.wrapping_sub(1));
            if let Some(d) = stage.0.first_chunk_mut::<SEND_WQE_BB>() {
                *d = lastw;
            }
            *wqes += k as u32;
            *inline |= min18;
            stats.packets += k as u64;
            stats.single_wqes += k as u64;
        }
        k
    }
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
    p.more.is_empty() & (p.tso_mss == 0) & p.vlan_tci.is_none() && p.offload.words() == key
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
    st: &mut [u8; STAGE_BYTES],
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
        match p.buf {
            PacketBuf::Frame(f) if MODE == SMALL => {
                // 32..=64 bytes, inline: header, two overlapping 32-byte
                // moves, the padding by a zero store after the frame.
                let len = f.data.len();
                if len.wrapping_sub(32) > 32 || inl < len as u32 {
                    break;
                }
                let next = at + ((len + 4 + 15) & !15);
                if next > end {
                    break;
                }
                let x = at & STAGE_MASK;
                let (Some(w), Some(head), Some(tail)) = (
                    st.get_mut(x..x + 96),
                    f.data.first_chunk::<32>(),
                    f.data.last_chunk::<32>(),
                ) else {
                    break;
                };
                if let Some(d) = w.get_mut(len + 4..len + 20) {
                    d.fill(0);
                }
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
                let x = at & STAGE_MASK;
                if let Some(w) = st.get_mut(x..x + SEND_WQE_DS) {
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

/// One common packet of any shape into session `s` (out of [`fill`]'s
/// loop): an inline frame up to `inline_lim` bytes, else a pointer.
/// `Err` if it is no common packet, its length is refused, or the session
/// has no room for it (then the reason).
#[inline(never)]
fn fill_one(
    st: &mut [u8; STAGE_BYTES],
    p: &Packet<'_>,
    key: (u64, u16),
    inline_lim: u32,
    s: &mut Sess,
) -> Result<(), Exit> {
    if !common(p, key) {
        return Err(Exit::Other);
    }
    let (len, frame, lkey, addr) = match p.buf {
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
            if let Some(d) = w.get_mut(tlen - SEND_WQE_DS..) {
                d.fill(0);
            }
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

impl<P: DoorbellPolicy, Q: QpKind> Out<'_, '_, P, Q> {
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
