//! `raw-tx` and `raw-rx`: raw Ethernet packet rates (DPDK testpmd
//! `txonly` / `rxonly`).
//!
//! `raw-tx` sends UDP/IPv4 frames through the core's [`TxQueue`]: enhanced
//! MPW sessions with the frames inlined (`--mode inline`, the default) or
//! as pointer descriptors (`--mode pointer`), or one SEND WQE per packet
//! (`--mode single`); one CQE per session; the frames handed over as
//! `Packet`s (`tx_burst`) or, with `--frames`, as `TxFrame`s
//! (`tx_frames`). The emulated device parses every
//! WQE, gathers every frame, applies the offloads and steers it; with no
//! receiver on the port every frame is dropped by steering and counted,
//! and the run checks that count against the packets sent.
//!
//! `raw-rx` adds a receiving raw QP with a steering rule: a striding RQ
//! (`--rq striding`, the default) or a cyclic one, on a CQ with CQE
//! compression (`--cqe-compression`, on by default). The sender is held
//! back to the receive credit, so no packet is dropped; the rate is the
//! receiver's, and the decompression share is the fraction of completions
//! the core unpacked from mini-CQEs.
#![forbid(unsafe_code)]

use super::output::Report;
use super::pair::Deadline;
use super::rig::{self, StridingRq};
use super::runner::Run;
use super::stats::{PeakMeter, Throughput};
use super::{Opts, PerfError, RawMode, RqArg};
use crate::backend::{Backend, Buffer, ConnectAttr, QpHandle};
use crate::emu::device::FlowRule;
use crate::emu::{Access, Cqn, EmuEvent, Pdn, QpInit, QpType, RqInit};
use mlx5dp::cq::{Cq, LookupError, RecvRetired, SendRetired, StridedPacket, WorkQueues, WqRef};
use mlx5dp::prm::{CqeOpcode, WcStatus};
use mlx5dp::rq::{RecvWr, Rq, Sge as RSge};
use mlx5dp::sq::mpw::{
    CqePolicy, Empw, Packet, PacketBuf, SingleWqe, TxConfig, TxFrame, TxMode, TxOffload, TxQueue,
};
use mlx5dp::sq::{DoorbellOnly, FrameSge, RawPacketQp};
use serde_json::json;

type Txq<M> = TxQueue<'static, DoorbellOnly, RawPacketQp, M>;

/// SQ size of the sender, WQEBBs.
const SQ_WQEBBS: u32 = 4096;
/// Packet ids in flight at most.
const IDS: usize = 1 << 15;
/// Distinct frames the sender cycles over.
const FRAMES: usize = 64;
/// CQEs of the send CQ.
const TX_CQES: u32 = 4096;
/// CQEs of the receive CQ.
const RX_CQES: u32 = 1 << 14;
/// Loop iterations between two reads of the device's events.
const EVENTS_EVERY: u64 = 2048;

/// A UDP/IPv4 frame of `len` bytes (testpmd txonly's shape), source port
/// varied by `seed`.
pub fn udp_frame(len: usize, seed: u16) -> Vec<u8> {
    let mut f = vec![0u8; len];
    f[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x02]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x01]);
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let ip_len = (len - 14) as u16;
    let ip = &mut f[14..34];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&ip_len.to_be_bytes());
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&[198, 18, 0, 1]);
    ip[16..20].copy_from_slice(&[198, 18, 0, 2]);
    let sum = ip
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum::<u32>();
    let sum = (sum & 0xffff) + (sum >> 16);
    let csum = !(((sum & 0xffff) + (sum >> 16)) as u16);
    ip[10..12].copy_from_slice(&csum.to_be_bytes());
    let udp = &mut f[34..42];
    udp[0..2].copy_from_slice(&(1024 + seed).to_be_bytes());
    udp[2..4].copy_from_slice(&9u16.to_be_bytes());
    udp[4..6].copy_from_slice(&(ip_len - 20).to_be_bytes());
    for (i, b) in f[42..].iter_mut().enumerate() {
        *b = (i as u8).wrapping_add(seed as u8);
    }
    f
}

/// The sender's completions, and the cyclic receiver's when there is one
/// (a striding RQ's CQ is polled with `Cq::poll_strided`: its completions
/// never come here, and the trait's default refuses them).
#[derive(Debug)]
struct Queues<M: TxMode> {
    txq: Txq<M>,
    /// Packets the send CQEs retired.
    tx_done: u64,
    striding: Option<StridingRq>,
    cyclic: Option<Rq<'static>>,
    /// Packets received.
    rx_packets: u64,
}

impl<M: TxMode> WorkQueues for Queues<M> {
    fn retire_send(
        &mut self,
        _: WqRef,
        wqe_counter: u16,
        _: WcStatus,
    ) -> Result<SendRetired, LookupError> {
        let n = self
            .txq
            .retire(wqe_counter, |_| {})
            .map_err(|_| LookupError::NotInFlight)?;
        self.tx_done += u64::from(n);
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
        let rq = self.cyclic.as_mut().ok_or(LookupError::UnknownQueue)?;
        let wr_id = rq.retire(wqe_counter, status != WcStatus::Success)?;
        self.rx_packets += 1;
        Ok(RecvRetired {
            wr_id,
            rx_csum_valid: true,
        })
    }
}

/// What a poll of the CQs saw beyond the counters.
#[derive(Clone, Copy, Debug, Default)]
struct RxSeen {
    completions: u64,
    minis: u64,
    /// The first packet: its offset in the receive buffer.
    first: Option<usize>,
    /// The first packet's bytes were checked.
    checked: bool,
}

/// Polls the striding RQ's CQ `cq` with `Cq::poll_strided` (bursts of
/// `out.len()`); error completions and lengths other than `len` fail the
/// run. The re-posted WQEs are published after the caller read what it
/// reads of the packets ([`StridingRq::refill`]).
fn poll_strided<M: TxMode>(
    cq: &mut Cq,
    q: &mut Queues<M>,
    out: &mut [StridedPacket],
    len: u32,
    seen: &mut RxSeen,
) -> Result<(), PerfError> {
    let Some(srq) = q.striding.as_mut() else {
        return Ok(());
    };
    let n = cq
        .poll_strided(srq.core(), out)
        .map_err(|e| PerfError::run(format!("poll CQ {:#x}: {e:?}", cq.cqn())))?;
    for p in &out[..n] {
        if p.status() != WcStatus::Success {
            return Err(PerfError::run(format!("error completion {:?}", p.status())));
        }
        if u32::from(p.len) != len {
            return Err(PerfError::run(format!(
                "received {} bytes, sent {len}",
                p.len
            )));
        }
        seen.completions += 1;
        seen.minis += u64::from(p.flags & StridedPacket::MINI != 0);
        if !seen.checked && seen.first.is_none() {
            seen.first = Some(srq.offset_of(p.addr));
        }
    }
    q.rx_packets += n as u64;
    Ok(())
}

/// Polls `cq` (`slot`: bytes per cyclic receive buffer); error completions
/// and receive lengths other than `len` fail the run.
fn poll<M: TxMode>(
    cq: &mut Cq,
    q: &mut Queues<M>,
    len: u32,
    slot: usize,
    seen: &mut RxSeen,
) -> Result<(), PerfError> {
    let mut bad = None;
    let r = cq.poll(q, 64, |c| {
        if c.status() != WcStatus::Success {
            bad.get_or_insert_with(|| {
                format!("error completion {:?} {:?}", c.status(), c.syndrome())
            });
            return;
        }
        if c.cqe_opcode() == CqeOpcode::Req {
            return;
        }
        if c.consumed_strides().is_some() && c.mprq_byte_cnt().filler() {
            return;
        }
        seen.completions += 1;
        if c.origin() == mlx5dp::cq::Origin::Mini {
            seen.minis += 1;
        }
        if c.packet_len() != len {
            bad.get_or_insert_with(|| format!("received {} bytes, sent {len}", c.packet_len()));
        }
        if !seen.checked && seen.first.is_none() {
            // A cyclic receive's wr_id is its producer counter.
            seen.first = Some((c.wr_id() as usize % 4096) * slot);
        }
    });
    if let Err(e) = r {
        return Err(PerfError::run(format!("poll CQ {:#x}: {e:?}", cq.cqn())));
    }
    bad.map_or(Ok(()), |m| Err(PerfError::run(m)))
}

/// Counts the frames the device dropped; fails on any core mistake.
/// (Only the emulated device reports either.)
fn count_drops(be: &mut Box<dyn Backend>) -> Result<u64, PerfError> {
    let events = be.take_events();
    if let Some(m) = super::core_mistakes(&events) {
        return Err(PerfError::run(m));
    }
    Ok(events
        .iter()
        .filter(|e| matches!(e, EmuEvent::FrameDropped { .. }))
        .count() as u64)
}

/// The sender: device, PD, send CQ, raw QP and its Tx queue.
struct Sender<M: TxMode> {
    be: Box<dyn Backend>,
    pd: Pdn,
    cq: Cq,
    txq: Txq<M>,
    frames: Vec<Vec<u8>>,
    buf: Buffer,
    slot: usize,
}

fn sender<M: TxMode>(
    mut be: Box<dyn Backend>,
    o: &Opts,
    inline: bool,
) -> Result<Sender<M>, PerfError> {
    let pd = be
        .alloc_pd()
        .map_err(|e| rig::backend_error("alloc_pd", e))?;
    let cq = rig::cq(&mut be, TX_CQES, None, false)?;
    let h: &'static QpHandle = rig::qp(
        &mut be,
        QpInit {
            qp_type: QpType::RawPacket,
            pd,
            send_cq: Some(Cqn(cq.cqn())),
            recv_cq: Some(Cqn(cq.cqn())),
            sq_wqebbs: SQ_WQEBBS,
            max_send_sge: 1,
            max_inline: 256,
            rq: RqInit::None,
            xrcd: None,
            vlan_strip: false,
        },
    )?;
    be.bring_up(h.qpn, None, 0, ConnectAttr::default())
        .map_err(|e| rig::backend_error("bring_up", e))?;
    let sq = rig::send_queue(&be, h, |_| {})?;
    let ids = rig::leak(vec![0u64; IDS]).as_mut_slice();
    let cfg = TxConfig {
        inline_max: if inline { o.size as u16 } else { 0 },
        cqe: CqePolicy::EverySessions(1),
        ..TxConfig::new()
    };
    let txq = TxQueue::new(sq, ids, cfg)
        .map_err(|e| PerfError::setup("TxQueue::new", format!("{e:?}")))?;
    let size = o.size as usize;
    let slot = size.next_multiple_of(64);
    let buf = be
        .reg_buffer(pd, slot * FRAMES, Access::ALL)
        .map_err(|e| rig::backend_error("reg_mr", e))?;
    let frames: Vec<Vec<u8>> = (0..FRAMES).map(|i| udp_frame(size, i as u16)).collect();
    for (i, f) in frames.iter().enumerate() {
        buf.write(i * slot, f);
    }
    Ok(Sender {
        be,
        pd,
        cq,
        txq,
        frames,
        buf,
        slot,
    })
}

/// The packets the sender cycles over: `FRAMES` frames, and `batch` more
/// so that a burst starting at any of the first `FRAMES` is contiguous.
fn packets<'f>(
    frames: &'f [Vec<u8>],
    buf: &Buffer,
    slot: usize,
    pointer: bool,
    batch: usize,
) -> Vec<Packet<'f>> {
    (0..FRAMES + batch)
        .map(|i| {
            let i = i % FRAMES;
            let f = &frames[i];
            let addr = buf.addr(i * slot);
            if pointer {
                Packet::ptr(i as u64, buf.key, addr, f.len() as u32)
            } else {
                Packet::from_buf(
                    i as u64,
                    PacketBuf::Frame(FrameSge::with_addr(buf.key, addr, f)),
                )
            }
        })
        .collect()
}

/// Runs `raw-tx` on `be`. The emulated device drops every frame by
/// steering and counts them, which the run checks; a ConnectX puts them on
/// the wire, uncounted.
pub fn run_tx(be: Box<dyn Backend>, o: &Opts) -> Result<Report, PerfError> {
    match o.mode {
        RawMode::Inline => tx::<Empw>(be, o, true),
        RawMode::Pointer => tx::<Empw>(be, o, false),
        RawMode::Single => tx::<SingleWqe>(be, o, false),
    }
}

fn tx<M: TxMode>(be: Box<dyn Backend>, o: &Opts, inline: bool) -> Result<Report, PerfError> {
    let Sender {
        mut be,
        mut cq,
        txq,
        frames,
        buf,
        slot,
        ..
    } = sender::<M>(be, o, inline)?;
    let counted = be.emulated();
    let pointer = !inline && o.mode == RawMode::Pointer;
    let pkts = packets(&frames, &buf, slot, pointer, o.batch as usize);
    // The same frames as `TxFrame`s (`--frames`; a pointer queue sends
    // them by pointer all the same).
    let tx_frames: Vec<TxFrame<'_>> = (0..FRAMES + o.batch as usize)
        .map(|i| {
            let i = i % FRAMES;
            TxFrame {
                id: i as u64,
                sge: FrameSge::with_addr(buf.key, buf.addr(i * slot), &frames[i]),
            }
        })
        .collect();
    let mut q = Queues {
        txq,
        tx_done: 0,
        striding: None,
        cyclic: None,
        rx_packets: 0,
    };
    let batch = o.batch as usize;
    let mut seen = RxSeen::default();
    let mut sent = 0u64;
    let mut dropped = 0u64;
    let mut at = 0usize;
    let mut loops = 0u64;
    let mut peak = PeakMeter::new();
    let mut deadline = Deadline::start();
    let mut spins = 0u64;
    let mut run = Run::start(o.goal, o.test.name());
    // Sending stops at the goal; the run ends when every packet is retired.
    let mut sending = true;
    loop {
        if sending {
            let k = batch.min(run.remaining(sent).min(batch as u64) as usize);
            let n = if o.frames {
                q.txq.tx_frames(&TxOffload::NONE, &tx_frames[at..at + k])
            } else {
                q.txq.tx_burst(&pkts[at..at + k])
            };
            sent += n as u64;
            at = (at + n) % FRAMES;
            if run.done(sent) {
                sending = false;
            }
        }
        let before = q.tx_done;
        poll(&mut cq, &mut q, o.size, 0, &mut seen)?; // (sends only)
        loops += 1;
        if loops % EVENTS_EVERY == 0 {
            dropped += count_drops(&mut be)?;
            peak.sample(run.elapsed(), q.tx_done);
        }
        if !sending && q.tx_done == sent {
            break;
        }
        if q.tx_done == before {
            deadline.check(spins, "send completions")?;
            spins += 1;
        } else {
            spins = 0;
        }
    }
    let elapsed = run.finish();
    dropped += count_drops(&mut be)?;
    if counted && dropped != sent {
        return Err(PerfError::run(format!(
            "sent {sent} frames, the device put {dropped} on the port"
        )));
    }
    let st = *q.txq.stats();
    let device = be.name().to_string();
    Ok(Report {
        test: "raw-tx",
        title: "Raw Ethernet TX (testpmd txonly)",
        device,
        params: vec![
            ("frame size", json!(o.size)),
            (
                "mode",
                json!(match o.mode {
                    RawMode::Inline => "eMPW, frames inline",
                    RawMode::Pointer => "eMPW, pointer descriptors",
                    RawMode::Single => "one SEND WQE per packet",
                }),
            ),
            ("burst", json!(o.batch)),
            (
                "handed over as",
                json!(if o.frames {
                    "TxFrame (tx_frames)"
                } else {
                    "Packet (tx_burst)"
                }),
            ),
            ("completion", json!("one CQE per WQE (session)")),
            ("doorbell", json!("doorbell only")),
        ],
        bytes: u64::from(o.size),
        iterations: sent,
        elapsed,
        latency: None,
        throughput: Some(Throughput {
            messages: sent,
            bytes: u64::from(o.size),
            elapsed,
            peak_rate: peak.peak(),
        }),
        extra: vec![
            ("sessions (eMPW WQEs)", json!(st.sessions)),
            ("single-packet WQEs", json!(st.single_wqes)),
            (
                "packets per WQE",
                json!(st.packets as f64 / (st.sessions + st.single_wqes).max(1) as f64),
            ),
            (
                "frames out of the port",
                if counted {
                    json!(dropped)
                } else {
                    json!("not counted (hardware)")
                },
            ),
            ("Mpps", json!(sent as f64 / elapsed.as_secs_f64() / 1e6)),
        ],
    })
}

/// Runs `raw-rx` on `be` (the sender and the receiver on one port: the
/// emulated device's loopback fabric).
pub fn run_rx(be: Box<dyn Backend>, o: &Opts) -> Result<Report, PerfError> {
    let inline = o.size <= 256;
    let Sender {
        mut be,
        pd,
        cq: mut cq_tx,
        txq,
        frames,
        buf,
        slot: tx_slot,
    } = sender::<Empw>(be, o, inline)?;
    let pkts = packets(&frames, &buf, tx_slot, !inline, o.batch as usize);
    let size = o.size as usize;
    let striding = o.rq == RqArg::Striding;
    let mut cq_rx = rig::cq(&mut be, RX_CQES, o.compression, striding)?;
    let log_stride = (size.next_power_of_two().trailing_zeros() as u8).clamp(6, 13);
    let log_num = 15u8.saturating_sub(log_stride).max(3);
    let slot = size.next_multiple_of(64);
    let rq_init = if striding {
        RqInit::Striding {
            wqe_cnt: 64,
            log_num_strides: log_num,
            log_stride_bytes: log_stride,
        }
    } else {
        RqInit::Cyclic {
            wqe_cnt: 4096,
            max_sge: 1,
        }
    };
    let h: &'static QpHandle = rig::qp(
        &mut be,
        QpInit {
            qp_type: QpType::RawPacket,
            pd,
            send_cq: None,
            recv_cq: Some(Cqn(cq_rx.cqn())),
            sq_wqebbs: 0,
            max_send_sge: 0,
            max_inline: 0,
            rq: rq_init,
            xrcd: None,
            vlan_strip: false,
        },
    )?;
    be.bring_up(h.qpn, None, 0, ConnectAttr::default())
        .map_err(|e| rig::backend_error("bring_up", e))?;
    be.add_flow(FlowRule {
        qpn: h.qpn,
        dmac: None,
        ethertype: None,
        flow_tag: h.qpn.0,
    })
    .map_err(|e| rig::backend_error("add_flow", e))?;
    let rx_len = if striding {
        64 << (log_num + log_stride)
    } else {
        4096 * slot
    };
    let rbuf = be
        .reg_buffer(pd, rx_len, Access::ALL)
        .map_err(|e| rig::backend_error("reg_mr", e))?;
    let mut q = Queues {
        txq,
        tx_done: 0,
        striding: None,
        cyclic: None,
        rx_packets: 0,
    };
    let strides_per_pkt = size.div_ceil(1 << log_stride) as u64;
    if striding {
        let mut srq = StridingRq::new(h, rbuf.addr(0), rbuf.key, rbuf.len())?;
        srq.refill();
        q.striding = Some(srq);
    } else {
        let mut rq = rig::recv_queue(h)?;
        repost(&mut rq, &rbuf, 4096, slot)?;
        q.cyclic = Some(rq);
    }
    let batch = o.batch as usize;
    let mut out = vec![StridedPacket::default(); batch.max(1)];
    let mut seen = RxSeen::default();
    let mut sent = 0u64;
    let mut at = 0usize;
    let mut loops = 0u64;
    let mut dropped = 0u64;
    let mut peak = PeakMeter::new();
    let mut deadline = Deadline::start();
    let mut spins = 0u64;
    let mut run = Run::start(o.goal, o.test.name());
    loop {
        // Receive credit: packets the posted receive buffers still hold,
        // and room in the receive CQ even without compression.
        let in_flight = sent - q.rx_packets;
        let credit = match (&q.striding, &q.cyclic) {
            (Some(srq), _) => {
                let strides = u64::from(srq.free_strides());
                // A packet that does not fit a WQE's rest costs a filler.
                (strides / strides_per_pkt).saturating_sub(u64::from(srq.outstanding()))
            }
            (_, Some(rq)) => u64::from(rq.outstanding()),
            _ => 0,
        }
        .min(u64::from(RX_CQES) / 2)
        .saturating_sub(in_flight);
        let over = run.done(q.rx_packets);
        if !over && credit >= batch as u64 {
            let k = batch.min(run.remaining(sent).min(batch as u64) as usize);
            let n = q.txq.tx_burst(&pkts[at..at + k]);
            sent += n as u64;
            at = (at + n) % FRAMES;
        }
        let before = q.rx_packets;
        poll(&mut cq_tx, &mut q, o.size, slot, &mut seen)?;
        if striding {
            poll_strided(&mut cq_rx, &mut q, &mut out, o.size, &mut seen)?;
        } else {
            poll(&mut cq_rx, &mut q, o.size, slot, &mut seen)?;
        }
        if let Some(off) = seen.first.take() {
            // The first packet's bytes, once: what was sent arrived.
            if rbuf.read(off, size) != frames[0] {
                return Err(PerfError::run(
                    "the first packet received differs from the one sent",
                ));
            }
            seen.checked = true;
        }
        let got = q.rx_packets - before;
        if let Some(srq) = q.striding.as_mut() {
            // The WQEs the core re-posted, published (DPDK's RQ doorbell
            // after the burst).
            srq.refill();
        } else if let Some(rq) = q.cyclic.as_mut() {
            repost(rq, &rbuf, got, slot)?;
        }
        loops += 1;
        if loops % EVENTS_EVERY == 0 {
            dropped += count_drops(&mut be)?;
            peak.sample(run.elapsed(), q.rx_packets);
        }
        if over && q.rx_packets == sent && q.tx_done == sent {
            break;
        }
        if q.rx_packets == before {
            deadline.check(spins, "receive completions")?;
            spins += 1;
        } else {
            spins = 0;
        }
    }
    let elapsed = run.finish();
    dropped += count_drops(&mut be)?;
    if dropped != 0 {
        return Err(PerfError::run(format!(
            "the device dropped {dropped} frames"
        )));
    }
    let stats = be
        .as_emu()
        .and_then(|e| e.with(|d| d.cq_stats(Cqn(cq_rx.cqn()))));
    let device = be.name().to_string();
    let share = seen.minis as f64 / seen.completions.max(1) as f64;
    let mut extra = vec![
        ("packets received", json!(q.rx_packets)),
        ("completions from mini-CQEs", json!(seen.minis)),
        ("decompression share", json!(share)),
        (
            "Mpps",
            json!(q.rx_packets as f64 / elapsed.as_secs_f64() / 1e6),
        ),
    ];
    if let Some(st) = stats {
        extra.push(("device: regular CQEs", json!(st.regular)));
        extra.push(("device: compressed blocks", json!(st.compressed_blocks)));
    }
    Ok(Report {
        test: "raw-rx",
        title: "Raw Ethernet RX (testpmd rxonly)",
        device,
        params: vec![
            ("frame size", json!(o.size)),
            (
                "receive queue",
                json!(if striding {
                    format!(
                        "striding, {} x {} B strides per WQE",
                        1u32 << log_num,
                        1u32 << log_stride
                    )
                } else {
                    "cyclic, 4096 WQEs".to_string()
                }),
            ),
            ("cqe compression", json!(o.compression_name())),
            ("burst", json!(o.batch)),
            (
                "sender",
                json!(if inline {
                    "eMPW, frames inline"
                } else {
                    "eMPW, pointers"
                }),
            ),
        ],
        bytes: u64::from(o.size),
        iterations: q.rx_packets,
        elapsed,
        latency: None,
        throughput: Some(Throughput {
            messages: q.rx_packets,
            bytes: u64::from(o.size),
            elapsed,
            peak_rate: peak.peak(),
        }),
        extra,
    })
}

/// Posts the next `n` cyclic receives, receive `k` (the producer counter
/// it is posted at, also its wr_id) into slot `k % 4096` of `buf`, as
/// lists of at most 64 (`Rq::post_list`: one space check and one doorbell
/// record per list, as testpmd's refill posts its burst).
fn repost(rq: &mut Rq<'static>, buf: &Buffer, n: u64, slot: usize) -> Result<(), PerfError> {
    const LIST: usize = 64;
    let mut wrs = [RecvWr {
        wr_id: 0,
        sge: RSge {
            addr: 0,
            length: 0,
            lkey: 0,
        },
    }; LIST];
    let mut left = n;
    while left > 0 {
        let len = left.min(LIST as u64) as usize;
        let head = rq.head();
        for (i, wr) in wrs.iter_mut().take(len).enumerate() {
            let k = head.wrapping_add(i as u32);
            *wr = RecvWr {
                wr_id: u64::from(k),
                sge: RSge {
                    addr: buf.addr((k as usize % 4096) * slot),
                    length: slot as u32,
                    lkey: buf.key,
                },
            };
        }
        rq.post_list(&wrs[..len])
            .map_err(|e| PerfError::run(format!("post receive: {e:?}")))?;
        left -= len as u64;
    }
    Ok(())
}
