//! A receive loop on a CQ with CQE compression, on the emulated ConnectX:
//! a raw Ethernet QP sends 64-byte frames to another whose cyclic RQ
//! completes on a CQ compressing runs of CQEs into mini-CQE arrays
//! (enhanced layout, hash format). The core unpacks them transparently;
//! the loop counts how many completions came from minis.
//!
//! `cargo run --release -p mlx5dp-setup --example rx_compressed [PACKETS]`

use mlx5dp::cq::{Cq, LookupError, Origin, RecvRetired, SendRetired, WorkQueues, WqRef};
use mlx5dp::prm::{MiniCqeFormat, WcStatus};
use mlx5dp::rq::{Rq, Sge as RSge};
use mlx5dp::sq::mpw::{Empw, Packet, PacketBuf, TxConfig, TxQueue};
use mlx5dp::sq::{DoorbellOnly, FrameSge, RawPacketQp};
use mlx5dp_setup::backend::{Backend, Buffer, ConnectAttr, EmuBackend};
use mlx5dp_setup::emu::device::FlowRule;
use mlx5dp_setup::emu::{
    Access, CompressionCfg, CompressionLayout, Cqn, DeviceConfig, QpInit, QpType, RqInit,
};
use mlx5dp_setup::perf::raw::udp_frame;
use mlx5dp_setup::perf::rig;
use std::time::{Duration, Instant};

/// Receive WQEs (and buffer slots of 64 bytes).
const RQ: u32 = 1024;

/// What the loop saw.
#[derive(Debug)]
pub struct Summary {
    /// Packets received.
    pub received: u64,
    /// Completions the core unpacked from mini-CQEs.
    pub from_minis: u64,
    /// Wall time.
    pub elapsed: Duration,
}

/// Both CQs' work queues.
struct Queues {
    tx: TxQueue<'static, DoorbellOnly, RawPacketQp, Empw>,
    rx: Rq<'static>,
}

impl WorkQueues for Queues {
    fn retire_send(&mut self, _: WqRef, c: u16, _: WcStatus) -> Result<SendRetired, LookupError> {
        self.tx
            .retire(c, |_| {})
            .map_err(|_| LookupError::NotInFlight)?;
        Ok(SendRetired {
            wr_id: u64::from(c),
            wr_opcode: None,
        })
    }

    fn retire_recv(&mut self, _: WqRef, c: u16, s: WcStatus) -> Result<RecvRetired, LookupError> {
        let wr_id = self.rx.retire(c, s != WcStatus::Success)?;
        Ok(RecvRetired {
            wr_id,
            rx_csum_valid: true,
        })
    }
}

fn post(rx: &mut Rq<'static>, buf: &Buffer, k: u32) -> Result<(), String> {
    let off = (k % RQ) as usize * 64;
    rx.post(
        u64::from(k),
        &[RSge {
            addr: buf.addr(off),
            length: 64,
            lkey: buf.key,
        }],
    )
    .map_err(|e| format!("post receive: {e:?}"))
}

/// Sends and receives `packets` frames.
pub fn run(packets: u64) -> Result<Summary, String> {
    let e = |e: &dyn std::fmt::Display| e.to_string();
    let mut be = EmuBackend::threaded(DeviceConfig::default()).map_err(|x| e(&x))?;
    let pd = be.alloc_pd().map_err(|x| e(&x))?;
    let mut tx_cq: Cq = rig::cq(&mut be, 1024, None, false).map_err(|x| e(&x))?;
    let zip = CompressionCfg {
        format: MiniCqeFormat::Hash,
        layout: CompressionLayout::Enhanced,
        max_session: 64,
        force: false,
    };
    let mut rx_cq: Cq = rig::cq(&mut be, 4096, Some(zip), false).map_err(|x| e(&x))?;
    let raw = |send: Option<&Cq>, recv: &Cq, rq: RqInit| QpInit {
        qp_type: QpType::RawPacket,
        pd,
        send_cq: send.map(|c| Cqn(c.cqn())),
        recv_cq: Some(Cqn(recv.cqn())),
        sq_wqebbs: if send.is_some() { 1024 } else { 0 },
        max_send_sge: 1,
        max_inline: 256,
        rq,
        xrcd: None,
        vlan_strip: false,
    };
    let a = rig::qp(&mut be, raw(Some(&tx_cq), &tx_cq, RqInit::None)).map_err(|x| e(&x))?;
    let cyclic = RqInit::Cyclic {
        wqe_cnt: RQ,
        max_sge: 1,
    };
    let b = rig::qp(&mut be, raw(None, &rx_cq, cyclic)).map_err(|x| e(&x))?;
    for h in [a, b] {
        be.bring_up(h.qpn, None, 0, ConnectAttr::default())
            .map_err(|x| e(&x))?;
    }
    // Every frame to B; the flow tag (B's QPN) names its RQ in the CQE.
    let rule = FlowRule {
        qpn: b.qpn,
        dmac: None,
        ethertype: None,
        flow_tag: b.qpn.0,
    };
    be.add_flow(rule).map_err(|x| e(&x))?;

    let sq = rig::send_queue(&be, a, |_| {}).map_err(|x| e(&x))?;
    let ids = rig::leak(vec![0u64; 1 << 13]).as_mut_slice();
    let tx = TxQueue::new(sq, ids, TxConfig::new()).map_err(|x| format!("{x:?}"))?;
    let rbuf = be
        .reg_buffer(pd, RQ as usize * 64, Access::ALL)
        .map_err(|x| e(&x))?;
    let mut q = Queues {
        tx,
        rx: rig::recv_queue(b).map_err(|x| e(&x))?,
    };
    for k in 0..RQ {
        post(&mut q.rx, &rbuf, k)?;
    }
    q.rx.commit();

    let tbuf = be.reg_buffer(pd, 64, Access::ALL).map_err(|x| e(&x))?;
    let frame = udp_frame(64, 7);
    tbuf.write(0, &frame);
    let one = Packet::from_buf(
        0,
        PacketBuf::Frame(FrameSge::with_addr(tbuf.key, tbuf.addr(0), &frame)),
    );
    let burst = vec![one; 32];

    let start = Instant::now();
    let (mut sent, mut received, mut minis) = (0u64, 0u64, 0u64);
    while received < packets {
        // Never more in flight than receives posted: nothing is dropped.
        let room = u64::from(RQ / 2).saturating_sub(sent - received);
        let k = (packets - sent).min(room).min(burst.len() as u64) as usize;
        if k > 0 {
            sent += q.tx.tx_burst(&burst[..k]) as u64;
        }
        tx_cq
            .poll(&mut q, 64, |_| {})
            .map_err(|x| format!("poll: {x:?}"))?;
        let mut got = 0;
        rx_cq
            .poll(&mut q, 64, |c| {
                got += 1;
                minis += u64::from(c.origin() == Origin::Mini);
            })
            .map_err(|x| format!("poll: {x:?}"))?;
        for _ in 0..got {
            let k = q.rx.head();
            post(&mut q.rx, &rbuf, k)?;
        }
        q.rx.commit();
        received += got;
        if start.elapsed() > Duration::from_secs(30) {
            return Err("no progress".into());
        }
    }
    Ok(Summary {
        received,
        from_minis: minis,
        elapsed: start.elapsed(),
    })
}

fn main() {
    let n = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    match run(n) {
        Ok(s) => println!(
            "{} packets received in {:.3} s ({:.2} Mpps), {:.1}% of completions from mini-CQEs (emulated device)",
            s.received,
            s.elapsed.as_secs_f64(),
            s.received as f64 / s.elapsed.as_secs_f64() / 1e6,
            100.0 * s.from_minis as f64 / s.received.max(1) as f64
        ),
        Err(e) => {
            eprintln!("rx_compressed: {e}");
            std::process::exit(1);
        }
    }
}
