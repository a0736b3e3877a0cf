//! A raw Ethernet transmit loop with enhanced multi-packet WQEs (DPDK
//! testpmd `txonly` in miniature), on the emulated ConnectX: 64-byte
//! UDP/IPv4 frames in bursts of 32 through the core's `TxQueue<Empw>`, one
//! CQE per session, completions retired as they come.
//!
//! `cargo run --release -p mlx5dp-setup --example raw_tx_empw [PACKETS]`

use mlx5dp::cq::{Cq, LookupError, RecvRetired, SendRetired, WorkQueues, WqRef};
use mlx5dp::prm::WcStatus;
use mlx5dp::sq::mpw::{CqePolicy, Empw, Packet, PacketBuf, TxConfig, TxQueue};
use mlx5dp::sq::{DoorbellOnly, FrameSge, RawPacketQp};
use mlx5dp_setup::backend::{Backend, ConnectAttr, EmuBackend};
use mlx5dp_setup::emu::{Access, Cqn, DeviceConfig, QpInit, QpType, RqInit};
use mlx5dp_setup::perf::raw::udp_frame;
use mlx5dp_setup::perf::rig;
use std::time::{Duration, Instant};

/// What the loop did.
#[derive(Debug)]
pub struct Summary {
    /// Packets sent and retired.
    pub packets: u64,
    /// eMPW sessions (WQEs) they took.
    pub sessions: u64,
    /// Wall time.
    pub elapsed: Duration,
}

/// The send CQ's work queue: the Tx queue, retiring packets by session.
struct Tx {
    q: TxQueue<'static, DoorbellOnly, RawPacketQp, Empw>,
    retired: u64,
}

impl WorkQueues for Tx {
    fn retire_send(
        &mut self,
        _: WqRef,
        wqe_counter: u16,
        _: WcStatus,
    ) -> Result<SendRetired, LookupError> {
        let n = self
            .q
            .retire(wqe_counter, |_id| {})
            .map_err(|_| LookupError::NotInFlight)?;
        self.retired += u64::from(n);
        Ok(SendRetired {
            wr_id: u64::from(wqe_counter),
            wr_opcode: None,
        })
    }

    fn retire_recv(&mut self, _: WqRef, _: u16, _: WcStatus) -> Result<RecvRetired, LookupError> {
        Err(LookupError::Unsupported)
    }
}

/// Sends `packets` 64-byte frames.
pub fn run(packets: u64) -> Result<Summary, String> {
    let e = |e: &dyn std::fmt::Display| e.to_string();
    let mut be = EmuBackend::threaded(DeviceConfig::default()).map_err(|x| e(&x))?;
    let pd = be.alloc_pd().map_err(|x| e(&x))?;
    let mut cq: Cq = rig::cq(&mut be, 1024, None, false).map_err(|x| e(&x))?;
    let qp = rig::qp(
        &mut be,
        QpInit {
            qp_type: QpType::RawPacket,
            pd,
            send_cq: Some(Cqn(cq.cqn())),
            recv_cq: Some(Cqn(cq.cqn())),
            sq_wqebbs: 1024,
            max_send_sge: 1,
            max_inline: 256,
            rq: RqInit::None,
            xrcd: None,
            vlan_strip: false,
        },
    )
    .map_err(|x| e(&x))?;
    be.bring_up(qp.qpn, None, 0, ConnectAttr::default())
        .map_err(|x| e(&x))?;
    let sq = rig::send_queue(&be, qp, |_| {}).map_err(|x| e(&x))?;
    // Frames of up to 64 bytes are inlined into the sessions.
    let cfg = TxConfig {
        inline_max: 64,
        cqe: CqePolicy::EverySessions(1),
        ..TxConfig::new()
    };
    let ids = rig::leak(vec![0u64; 1 << 14]).as_mut_slice();
    let q = TxQueue::new(sq, ids, cfg).map_err(|x| format!("{x:?}"))?;
    let mut tx = Tx { q, retired: 0 };

    // 32 frames in registered memory (the device reads them only when a
    // frame is sent by pointer; inlined frames are copied into the WQE).
    let buf = be.reg_buffer(pd, 32 * 64, Access::ALL).map_err(|x| e(&x))?;
    let frames: Vec<Vec<u8>> = (0..32).map(|i| udp_frame(64, i)).collect();
    for (i, f) in frames.iter().enumerate() {
        buf.write(i * 64, f);
    }
    let burst: Vec<Packet<'_>> = frames
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let sge = FrameSge::with_addr(buf.key, buf.addr(i * 64), f);
            Packet::from_buf(i as u64, PacketBuf::Frame(sge))
        })
        .collect();

    let start = Instant::now();
    let mut sent = 0u64;
    while tx.retired < packets {
        if sent < packets {
            let k = burst.len().min((packets - sent) as usize);
            sent += tx.q.tx_burst(&burst[..k]) as u64;
        }
        cq.poll(&mut tx, 64, |c| assert_eq!(c.status(), WcStatus::Success))
            .map_err(|x| format!("poll: {x:?}"))?;
        if start.elapsed() > Duration::from_secs(30) {
            return Err("no progress".into());
        }
    }
    let elapsed = start.elapsed();
    // Every frame left the port (no receiver: dropped by steering, counted).
    let _ = be.take_events();
    Ok(Summary {
        packets: tx.retired,
        sessions: tx.q.stats().sessions,
        elapsed,
    })
}

fn main() {
    let n = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    match run(n) {
        Ok(s) => println!(
            "{} packets in {} eMPW sessions, {:.3} s: {:.2} Mpps (emulated device)",
            s.packets,
            s.sessions,
            s.elapsed.as_secs_f64(),
            s.packets as f64 / s.elapsed.as_secs_f64() / 1e6
        ),
        Err(e) => {
            eprintln!("raw_tx_empw: {e}");
            std::process::exit(1);
        }
    }
}
