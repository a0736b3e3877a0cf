//! End-to-end multi-packet sends: bursts of mixed inline / pointer frames
//! through the core's `TxQueue` (enhanced MPW, legacy MPW, one WQE per
//! packet) over the emulated device (step mode and device thread),
//! looped back by a steering rule to a raw QP's cyclic RQ and checked
//! byte-exact; one CQE per session (CqePolicy::EverySessions(1)); checksum
//! offload verified with RFC 1071 here; the 64-WQEBB ring wraps inside
//! sessions; bursts of minimum-size frames take the burst path's loop
//! (inline, pointer-only, one WQE per packet). Malformed sessions (a DS
//! count cut inside an inline segment, an inline length past the WQE, a
//! title-only session) are rejected with the emulator's error CQE:
//! LOCAL_QP_OP_ERR with vendor syndrome 0xe1 (bad DS) or 0xe5 (bad
//! segment).

use mlx5dp::cq::{Cq, LookupError, RecvRetired, SendRetired, StrideCompletion, WorkQueues, WqRef};
use mlx5dp::prm::{CqeOpcode, Syndrome, WcStatus};
use mlx5dp::rq::{RecvWr, Rq, Sge as RSge};
use mlx5dp::sq::mpw::{
    CloseReason, CqePolicy, Empw, LegacyMpw, Packet, PacketBuf, SingleWqe, TxConfig, TxFrame,
    TxMode, TxOffload, TxQueue, TxStats,
};
use mlx5dp::sq::{AnyQp, DoorbellOnly, FrameSge};
use mlx5dp_setup::backend::{Backend, Buffer, EmuBackend, QpHandle};
use mlx5dp_setup::emu::device::FlowRule;
use mlx5dp_setup::emu::{CqeSize, DeviceConfig, QpType, VendorSyndrome};
use mlx5dp_tests::e2e::frames::{self, ipv4_header_ok, l4_check};
use mlx5dp_tests::e2e::{leak, pattern, Fabric, QpSpec, DEADLINE};
use std::time::Instant;

type Txq<M> = TxQueue<'static, DoorbellOnly, AnyQp, M>;

const RQ_WQES: usize = 64;
const SLOT: usize = 0x800;

#[derive(Debug)]
struct Qs<M: TxMode> {
    txq: Txq<M>,
    rq: Rq<'static>,
    tx_done: Vec<u64>,
    tx_cqes: usize,
    errors: Vec<(WcStatus, Option<Syndrome>, u32)>,
    /// Receive WQE ids with their lengths, in order.
    rx: Vec<(u64, u32)>,
}

impl<M: TxMode> WorkQueues for Qs<M> {
    fn retire_send(
        &mut self,
        _: WqRef,
        wqe_counter: u16,
        _: WcStatus,
    ) -> Result<SendRetired, LookupError> {
        let done = &mut self.tx_done;
        // A flush CQE past a corrupted session may name a WQEBB where, for
        // the queue, no WQE starts: nothing to retire then.
        let _ = self.txq.retire(wqe_counter, |id| done.push(id));
        Ok(SendRetired {
            wr_id: u64::from(wqe_counter),
            wr_opcode: None,
        })
    }

    fn retire_recv(
        &mut self,
        _: WqRef,
        wqe_counter: u16,
        status: WcStatus,
    ) -> Result<RecvRetired, LookupError> {
        let wr_id = self.rq.retire(wqe_counter, status != WcStatus::Success)?;
        Ok(RecvRetired {
            wr_id,
            rx_csum_valid: true,
        })
    }

    fn retire_strides(
        &mut self,
        _: WqRef,
        _: StrideCompletion,
        _: WcStatus,
    ) -> Result<RecvRetired, LookupError> {
        Err(LookupError::UnknownQueue)
    }
}

struct Rig<M: TxMode> {
    f: Fabric<EmuBackend>,
    cq: Cq,
    a: &'static QpHandle,
    txbuf: Buffer,
    rxbuf: Buffer,
    q: Qs<M>,
    /// Receive WQE ids posted so far.
    rx_posted: u64,
}

fn rig<M: TxMode>(be: EmuBackend, cfg: TxConfig) -> Rig<M> {
    let mut f = Fabric::new(be);
    let cq = f.cq(512, CqeSize::B64, None, false);
    let a = f.qp(
        QpSpec {
            rq: mlx5dp_setup::emu::RqInit::None,
            ..QpSpec::new(QpType::RawPacket)
        },
        &cq,
        Some(&cq),
    );
    // One SGE per receive WQE (16-byte stride): `Rq::post_list`'s run path
    // (scalar or SSE4.1, below).
    let b = f.qp(
        QpSpec {
            rq: mlx5dp_setup::emu::RqInit::Cyclic {
                wqe_cnt: RQ_WQES as u32,
                max_sge: 1,
            },
            ..QpSpec::new(QpType::RawPacket)
        },
        &cq,
        Some(&cq),
    );
    f.ud_up(a.qpn, 0);
    f.ud_up(b.qpn, 0);
    f.be.add_flow(FlowRule {
        qpn: b.qpn,
        dmac: Some(frames::DMAC),
        ethertype: None,
        flow_tag: b.qpn.0,
    })
    .expect("flow");
    let txbuf = f.buffer(SLOT * 64);
    let rxbuf = f.buffer(SLOT * RQ_WQES);
    let sq = f.send_queue::<DoorbellOnly>(a);
    let ids = leak(vec![0u64; 1024]).as_mut_slice();
    let txq = TxQueue::new(sq, ids, cfg).expect("TxQueue::new");
    #[cfg_attr(not(target_arch = "x86_64"), allow(unused_mut))]
    let mut rq = f.recv_queue(b);
    // The multi-packet rigs post their receive lists through the SSE4.1
    // segment builder where the CPU has it; the one-WQE-per-packet rig
    // through the scalar one.
    #[cfg(target_arch = "x86_64")]
    if M::KIND != mlx5dp::sq::mpw::TxKind::Single {
        rq.set_sse41(mlx5dp_setup::cpu::sse41());
    }
    let mut r = Rig {
        f,
        cq,
        a,
        txbuf,
        rxbuf,
        q: Qs {
            txq,
            rq,
            tx_done: Vec::new(),
            tx_cqes: 0,
            errors: Vec::new(),
            rx: Vec::new(),
        },
        rx_posted: 0,
    };
    r.post_recv(RQ_WQES);
    r
}

impl<M: TxMode> Rig<M> {
    /// Posts `n` receives as one list (`Rq::post_list`, which publishes
    /// them), a buffer slot each.
    fn post_recv(&mut self, n: usize) {
        let first = self.rx_posted;
        let wrs: Vec<RecvWr> = (first..first + n as u64)
            .map(|id| RecvWr {
                wr_id: id,
                sge: RSge {
                    addr: self.rxbuf.addr(id as usize % RQ_WQES * SLOT),
                    length: SLOT as u32,
                    lkey: self.rxbuf.key,
                },
            })
            .collect();
        self.q.rq.post_list(&wrs).expect("post recv");
        self.rx_posted += n as u64;
    }

    fn poll_until(&mut self, mut done: impl FnMut(&Qs<M>) -> bool) {
        let start = Instant::now();
        while !done(&self.q) {
            self.f.be.progress();
            let q = &mut self.q;
            let mut rx = Vec::new();
            let mut cqes = 0;
            let mut errs = Vec::new();
            self.cq
                .poll(q, 64, |c| {
                    if c.status() != WcStatus::Success {
                        errs.push((c.status(), c.syndrome(), c.vendor_err()));
                    } else if c.cqe_opcode() == CqeOpcode::Req {
                        cqes += 1;
                    } else {
                        rx.push((c.wr_id(), c.packet_len()));
                    }
                })
                .expect("poll");
            q.rx.extend(rx);
            q.tx_cqes += cqes;
            q.errors.extend(errs);
            assert!(
                start.elapsed() < DEADLINE,
                "{}: no progress",
                self.f.be.name()
            );
        }
    }
}

/// Frame `i` of a round: UDP/IPv4 of varied size.
fn frame(seed: u64, len: usize) -> Vec<u8> {
    frames::ipv4_udp(&pattern(seed, len - frames::UDP_HDR_LEN), seed as u16)
}

/// How a round hands its frames to the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Send {
    /// `tx_burst` of `Packet`s.
    Packets,
    /// `tx_frames` of `TxFrame`s (every frame the same checksum request).
    Frames,
}

/// Sends `frames` (pointer when `ptr[i]`, csum when `csum[i]`) in one
/// burst and checks what arrived; returns the WQEs the burst posted.
fn round<M: TxMode>(r: &mut Rig<M>, fr: &[Vec<u8>], ptr: &[bool], csum: &[bool]) -> u64 {
    round_as(r, fr, ptr, csum, Send::Packets)
}

/// [`round`], the frames handed over as `send` says.
fn round_as<M: TxMode>(
    r: &mut Rig<M>,
    fr: &[Vec<u8>],
    ptr: &[bool],
    csum: &[bool],
    send: Send,
) -> u64 {
    for (i, f) in fr.iter().enumerate() {
        r.txbuf.write(i * SLOT, f);
    }
    let pkts: Vec<Packet<'_>> = fr
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let addr = r.txbuf.addr(i * SLOT);
            let p = if ptr[i] {
                Packet::ptr(i as u64, r.txbuf.key, addr, f.len() as u32)
            } else {
                Packet::from_buf(
                    i as u64,
                    PacketBuf::Frame(FrameSge::with_addr(r.txbuf.key, addr, f)),
                )
            };
            if csum[i] {
                p.with_csum()
            } else {
                p
            }
        })
        .collect();
    let before = *r.q.txq.stats();
    let (done0, rx0, cqes0) = (r.q.tx_done.len(), r.q.rx.len(), r.q.tx_cqes);
    let n = match send {
        Send::Packets => r.q.txq.tx_burst(&pkts),
        Send::Frames => {
            // One offload value per burst: the frames' own.
            let offload = pkts.first().map_or(TxOffload::NONE, |p| p.offload());
            assert!(pkts
                .iter()
                .all(|p| p.offload() == offload && !ptr.contains(&true)));
            let frames: Vec<TxFrame<'_>> = pkts
                .iter()
                .map(|p| match p.buf() {
                    PacketBuf::Frame(sge) => TxFrame { id: p.id(), sge },
                    PacketBuf::Ptr(_) => unreachable!("frames only"),
                })
                .collect();
            r.q.txq.tx_frames(&offload, &frames)
        }
    };
    assert_eq!(n, fr.len(), "burst accepted");
    let st = *r.q.txq.stats();
    let wqes = st.sessions + st.single_wqes - before.sessions - before.single_wqes;
    r.poll_until(|q| {
        q.tx_done.len() == done0 + fr.len() && q.rx.len() == rx0 + fr.len() || !q.errors.is_empty()
    });
    assert!(r.q.errors.is_empty(), "errors: {:?}", r.q.errors);
    // One CQE per WQE (session or single), every packet retired in order.
    assert_eq!(r.q.tx_cqes - cqes0, wqes as usize, "one CQE per session");
    assert_eq!(
        &r.q.tx_done[done0..],
        &(0..fr.len() as u64).collect::<Vec<_>>()[..]
    );
    for (i, f) in fr.iter().enumerate() {
        let (id, len) = r.q.rx[rx0 + i];
        assert_eq!(len as usize, f.len(), "frame {i} length");
        let got = r.rxbuf.read(id as usize % RQ_WQES * SLOT, f.len());
        if csum[i] {
            assert!(ipv4_header_ok(&got), "frame {i}: IPv4 checksum");
            assert_eq!(l4_check(&got), 0, "frame {i}: UDP checksum");
            let mut g = got.clone();
            g[24..26].fill(0);
            g[40..42].fill(0);
            assert_eq!(&g, f, "frame {i} bytes (checksums aside)");
        } else {
            assert_eq!(&got, f, "frame {i} bytes");
        }
    }
    r.post_recv(fr.len());
    wqes
}

/// Whether some WQE of the ring wrapped: returns WQEBBs posted in total.
fn run_rounds<M: TxMode>(be: EmuBackend, cfg: TxConfig, same_len: bool) {
    let mut r = rig::<M>(be, cfg);
    let mut wrapped = false;
    let mut bbs = 0u32;
    for k in 0..12u64 {
        let n = 6 + (k as usize * 5) % 20;
        let mut fr = Vec::new();
        let (mut ptr, mut csum) = (Vec::new(), Vec::new());
        for i in 0..n {
            let len = if same_len {
                // Legacy MPW: runs of one length, inline (short) or pointer.
                [60, 60, 60, 300, 300, 1000][(i / 3 + k as usize) % 6]
            } else {
                [64, 200, 1400, 90, 600, 256, 1000][(i + k as usize) % 7]
            };
            fr.push(frame(k * 100 + i as u64, len));
            ptr.push(!same_len && (i + k as usize) % 5 == 2);
            csum.push(if same_len {
                (i / 3) % 2 == 1
            } else {
                (i / 4) % 2 == 1
            });
        }
        let from = r.q.txq.send_queue().producer();
        round(&mut r, &fr, &ptr, &csum);
        let to = r.q.txq.send_queue().producer();
        // Did a WQE of this burst cross the ring's end?
        let mut at = from;
        while at != to {
            let slot = at & 63;
            let w =
                r.q.txq
                    .send_queue()
                    .shadow(slot as usize)
                    .map_or(1, |e| u32::from(e.wqebbs()).max(1));
            wrapped |= w > 1 && slot + w > 64;
            at = at.wrapping_add(w);
        }
        bbs += to.wrapping_sub(from);
    }
    assert!(bbs > 128, "the ring went round ({bbs} WQEBBs)");
    if M::KIND != mlx5dp::sq::mpw::TxKind::Single {
        assert!(wrapped, "a session wrapped at the ring's end");
        assert!(r.q.txq.stats().sessions > 0);
    } else {
        assert_eq!(r.q.txq.stats().sessions, 0);
    }
    let _ = r.a;
}

fn every_session() -> TxConfig {
    TxConfig {
        cqe: CqePolicy::EverySessions(1),
        ..TxConfig::new()
    }
}

fn backends() -> Vec<EmuBackend> {
    vec![
        EmuBackend::step_mode(DeviceConfig::default()),
        EmuBackend::threaded(DeviceConfig::default()).expect("device thread"),
    ]
}

#[test]
fn empw_mixed_bursts_delivered() {
    for be in backends() {
        run_rounds::<Empw>(be, every_session(), false);
    }
}

#[test]
fn legacy_mpw_bursts_delivered() {
    for be in backends() {
        run_rounds::<LegacyMpw>(be, every_session(), true);
    }
}

#[test]
fn single_wqe_fallback_delivered() {
    for be in backends() {
        run_rounds::<SingleWqe>(be, every_session(), false);
    }
}

/// Bursts of 32 minimum-size frames (42..=64 bytes, now and then a longer
/// one): the burst path's common case. Inline, sessions close on the DS
/// limit inside the burst loop and the 64-WQEBB ring wraps inside them; a
/// checksum change in mid-burst closes a session for its offload values;
/// on a queue that never inlines, every frame goes by pointer; one WQE per
/// packet, each SEND built in one piece. Every frame is delivered
/// byte-exact, one CQE per WQE.
#[test]
fn small_frame_bursts_delivered() {
    let lens = [64, 60, 42, 64, 50, 64, 63, 64, 64, 128];
    let ptr_only = TxConfig {
        inline_max: 0,
        ..every_session()
    };
    for be in backends() {
        let st = small_rounds::<Empw>(be, every_session(), &lens);
        assert!(st.closes[CloseReason::DsLimit as usize] > 0, "{st:?}");
        assert!(
            st.closes[CloseReason::OffloadMismatch as usize] > 0,
            "{st:?}"
        );
    }
    for be in backends() {
        // One session per burst, two when the offload values change.
        let st = small_rounds::<Empw>(be, ptr_only, &lens);
        assert_eq!(st.sessions, 13, "{st:?}");
    }
    for be in backends() {
        let st = small_rounds::<SingleWqe>(be, every_session(), &lens);
        assert_eq!(st.sessions, 0);
    }
}

/// Ten bursts of 32 frames of `lens` (rotated), the second half of every
/// third one with checksum offload; returns the queue's counters.
fn small_rounds<M: TxMode>(be: EmuBackend, cfg: TxConfig, lens: &[usize]) -> TxStats {
    rounds_of::<M>(be, cfg, lens, Send::Packets)
}

/// Ten bursts of 32 frames of `lens` (rotated) handed over as `send` says;
/// every third burst asks for checksum offload: its second half as
/// packets, the whole burst as frames (one offload value per burst).
/// Returns the queue's counters.
fn rounds_of<M: TxMode>(be: EmuBackend, cfg: TxConfig, lens: &[usize], send: Send) -> TxStats {
    let mut r = rig::<M>(be, cfg);
    for k in 0..10u64 {
        let n = 32;
        let fr: Vec<Vec<u8>> = (0..n)
            .map(|i| frame(k * 100 + i as u64, lens[(i + k as usize) % lens.len()]))
            .collect();
        let from = if send == Send::Frames { 0 } else { n / 2 };
        let csum: Vec<bool> = (0..n).map(|i| k % 3 == 2 && i >= from).collect();
        round_as(&mut r, &fr, &vec![false; n], &csum, send);
    }
    *r.q.txq.stats()
}

/// Bursts of 32 frames through `TxQueue::tx_frames` (every third burst
/// with checksum offload): 64-byte frames (the frames' own loop, sessions
/// closing on the DS limit, the 64-WQEBB ring wrapping inside them),
/// then mixed lengths (the packets' path), inline, by pointer and one
/// WQE per packet. Every frame is delivered byte-exact, one CQE per WQE.
#[test]
fn frame_bursts_delivered() {
    let ptr_only = TxConfig {
        inline_max: 0,
        ..every_session()
    };
    for lens in [&[64usize][..], &[64, 60, 42, 64, 128, 300]] {
        for be in backends() {
            let st = rounds_of::<Empw>(be, every_session(), lens, Send::Frames);
            assert!(st.closes[CloseReason::DsLimit as usize] > 0, "{st:?}");
        }
        for be in backends() {
            let st = rounds_of::<Empw>(be, ptr_only, lens, Send::Frames);
            assert_eq!(st.sessions, 10, "one session per burst: {st:?}");
        }
        for be in backends() {
            let st = rounds_of::<SingleWqe>(be, every_session(), lens, Send::Frames);
            assert_eq!((st.sessions, st.single_wqes), (0, 320), "{st:?}");
        }
    }
}

// ---------------------------------------------------------------------------
// Malformed sessions
// ---------------------------------------------------------------------------

/// Posts one eMPW session (a pointer frame, then an inline one) in step
/// mode, lets `corrupt` change its bytes in the ring before the device
/// reads it, and returns the error completions.
fn malformed(corrupt: impl FnOnce(&mut [u8])) -> Vec<(WcStatus, Option<Syndrome>, u32)> {
    let mut r = rig::<Empw>(
        EmuBackend::step_mode(DeviceConfig::default()),
        every_session(),
    );
    let fr = [frame(1, 100), frame(2, 120)];
    r.txbuf.write(0, &fr[0]);
    let pkts = [
        Packet::ptr(0, r.txbuf.key, r.txbuf.addr(0), fr[0].len() as u32),
        Packet::from_buf(
            1,
            PacketBuf::Frame(FrameSge::with_addr(r.txbuf.key, 0, &fr[1])),
        ),
    ];
    assert_eq!(r.q.txq.tx_burst(&pkts), 2);
    let parts = r.a.sq.as_ref().expect("sq").emu_parts();
    let len = 4 * 64;
    let mut wqe = vec![0u8; len];
    // SAFETY: step mode: the device runs only inside `progress`, so nothing
    // else touches the ring now; the WQE (4 WQEBBs at slot 0 of a fresh
    // 64-WQEBB ring) lies inside the ring buffer the handle keeps alive.
    unsafe { std::ptr::copy_nonoverlapping(parts.buf, wqe.as_mut_ptr(), len) };
    assert_eq!(wqe[3], 0x29, "an eMPW session");
    corrupt(&mut wqe);
    // SAFETY: as above.
    unsafe { std::ptr::copy_nonoverlapping(wqe.as_ptr(), parts.buf, len) };
    r.poll_until(|q| !q.errors.is_empty());
    for _ in 0..8 {
        r.f.be.progress();
        r.poll_until(|_| true);
    }
    assert!(
        r.q.rx.is_empty(),
        "nothing delivered from a rejected session"
    );
    // The session's error CQE, then flushes of whatever the device took
    // for further WQEs.
    let (first, rest) = r.q.errors.split_first().expect("an error CQE");
    for e in rest {
        assert_eq!(e.0, WcStatus::WrFlushErr, "{:?}", r.q.errors);
    }
    vec![*first]
}

#[test]
fn malformed_sessions_get_error_cqes() {
    // Layout: ctrl, eth (DS 0-1), pointer (DS 2), inline 4+120 bytes (DS 3-10).
    let bad_ds = (
        WcStatus::LocQpOpErr,
        Some(Syndrome::LocalQpOp),
        VendorSyndrome::BadDs as u32,
    );
    // DS count cut inside the inline segment.
    let e = malformed(|w| {
        assert_eq!(w[7] & 0x3f, 11);
        w[7] = (w[7] & !0x3f) | 8;
    });
    assert_eq!(e, vec![bad_ds], "DS cut inside an inline segment");
    // An inline length past the WQE.
    let e = malformed(|w| {
        assert_eq!(&w[48..52], &(0x8000_0000u32 | 120).to_be_bytes());
        w[48..52].copy_from_slice(&(0x8000_0000u32 | 400).to_be_bytes());
    });
    assert_eq!(e, vec![bad_ds], "inline length past the WQE");
    // A title-only session (DS 2: no packet).
    let e = malformed(|w| w[7] = (w[7] & !0x3f) | 2);
    assert_eq!(
        e,
        vec![(
            WcStatus::LocQpOpErr,
            Some(Syndrome::LocalQpOp),
            VendorSyndrome::BadSegment as u32
        )],
        "empty session"
    );
}
