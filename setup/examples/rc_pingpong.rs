//! An RC ping-pong in the shape of rdma-core's `ibv_rc_pingpong`, on the
//! emulated ConnectX (its own thread): two RC QPs connected to each other,
//! receives posted on both, then `iters` round trips of `size` bytes, each
//! message checked on arrival.
//!
//! `cargo run --release -p mlx5dp-setup --example rc_pingpong [ITERS [SIZE]]`
//!
//! Objects come from the backend (`mlx5dp_setup::backend`); the core's
//! queues are built over their raw parts (`mlx5dp_setup::perf::rig` holds
//! the `unsafe` constructors); posting and polling are the core's alone.

use mlx5dp::rq::Sge as RSge;
use mlx5dp::sq::BlueFlamePreferred;
use mlx5dp_setup::backend::{Backend, ConnectAttr, EmuBackend};
use mlx5dp_setup::emu::{Access, Cqn, DeviceConfig, QpInit, QpType, RqInit};
use mlx5dp_setup::perf::pair::{drain, Side, Sides};
use mlx5dp_setup::perf::rig;
use std::time::{Duration, Instant};

/// What the ping-pong did.
#[derive(Debug)]
pub struct Summary {
    /// Round trips completed.
    pub round_trips: u64,
    /// Median round trip / 2, microseconds.
    pub median_us: f64,
    /// Total time.
    pub elapsed: Duration,
}

/// Runs `iters` round trips of `size` bytes.
pub fn run(iters: u64, size: usize) -> Result<Summary, String> {
    let mut be = EmuBackend::threaded(DeviceConfig::default()).map_err(|e| e.to_string())?;
    let pd = be.alloc_pd().map_err(|e| e.to_string())?;
    // One CQ per side for its sends and receives, as ibv_rc_pingpong does.
    let mut cq = [
        rig::cq(&mut be, 64, None, false).map_err(|e| e.to_string())?,
        rig::cq(&mut be, 64, None, false).map_err(|e| e.to_string())?,
    ];
    let mut qps = Vec::new();
    for c in &cq {
        qps.push(
            rig::qp(
                &mut be,
                QpInit {
                    qp_type: QpType::Rc,
                    pd,
                    send_cq: Some(Cqn(c.cqn())),
                    recv_cq: Some(Cqn(c.cqn())),
                    sq_wqebbs: 64,
                    max_send_sge: 1,
                    max_inline: 0,
                    rq: RqInit::Cyclic {
                        wqe_cnt: 16,
                        max_sge: 1,
                    },
                    xrcd: None,
                    vlan_strip: false,
                },
            )
            .map_err(|e| e.to_string())?,
        );
    }
    be.connect(qps[0].qpn, qps[1].qpn, ConnectAttr::default())
        .map_err(|e| e.to_string())?;
    let side = |i: usize| -> Result<Side<BlueFlamePreferred>, String> {
        Ok(Side {
            qpn: qps[i].qpn.0,
            sq: rig::send_queue(&be, qps[i], |_| {}).map_err(|e| e.to_string())?,
            rq: rig::recv_queue(qps[i]).map_err(|e| e.to_string())?,
        })
    };
    let mut q = Sides {
        a: side(0)?,
        b: side(1)?,
    };
    // Each side: a send buffer and a receive buffer.
    let mut bufs = Vec::new();
    for _ in 0..2 {
        let tx = be
            .reg_buffer(pd, size, Access::ALL)
            .map_err(|e| e.to_string())?;
        let rx = be
            .reg_buffer(pd, size, Access::ALL)
            .map_err(|e| e.to_string())?;
        bufs.push((tx, rx));
    }
    let post_recv = |s: &mut Side<BlueFlamePreferred>, rx: &mlx5dp_setup::backend::Buffer, id| {
        s.rq.post(
            id,
            &[RSge {
                addr: rx.addr(0),
                length: size as u32,
                lkey: rx.key,
            }],
        )
        .map_err(|e| format!("post_recv: {e:?}"))?;
        s.rq.commit();
        Ok::<_, String>(())
    };
    post_recv(&mut q.a, &bufs[0].1, 0)?;
    post_recv(&mut q.b, &bufs[1].1, 0)?;

    let mut rtts = Vec::new();
    let start = Instant::now();
    for i in 0..iters {
        let t0 = Instant::now();
        for (from, to) in [(0, 1), (1, 0)] {
            // The message: the iteration number over the whole buffer.
            let msg = vec![(i as u8) ^ (from as u8); size];
            bufs[from].0.write(0, &msg);
            let s = if from == 0 { &mut q.a } else { &mut q.b };
            let mut batch = s.sq.start();
            batch
                .send(i)
                .and_then(|wr| {
                    wr.signaled()
                        .sge(bufs[from].0.key, bufs[from].0.addr(0), size as u32)
                })
                .map_err(|e| format!("post_send: {e:?}"))?;
            batch.complete();
            // Wait for the receive at `to` (and retire the send at `from`).
            let t = Instant::now();
            loop {
                drain(&mut cq[from], &mut q, 16).map_err(|e| e.to_string())?;
                if drain(&mut cq[to], &mut q, 16)
                    .map_err(|e| e.to_string())?
                    .recvs
                    > 0
                {
                    break;
                }
                if t.elapsed() > Duration::from_secs(10) {
                    return Err(format!("round trip {i}: no receive completion"));
                }
            }
            if bufs[to].1.read(0, size) != msg {
                return Err(format!("round trip {i}: wrong data"));
            }
            let r = if to == 0 { &mut q.a } else { &mut q.b };
            post_recv(r, &bufs[to].1, i + 1)?;
        }
        rtts.push(t0.elapsed());
    }
    let elapsed = start.elapsed();
    rtts.sort();
    let median_us = rtts
        .get(rtts.len() / 2)
        .map_or(0.0, |d| d.as_secs_f64() * 1e6 / 2.0);
    Ok(Summary {
        round_trips: iters,
        median_us,
        elapsed,
    })
}

fn main() {
    let mut args = std::env::args().skip(1);
    let iters = args.next().and_then(|a| a.parse().ok()).unwrap_or(1000);
    let size = args.next().and_then(|a| a.parse().ok()).unwrap_or(4096);
    match run(iters, size) {
        Ok(s) => println!(
            "{} round trips of {size} bytes in {:.3} s: median one-way {:.2} us (emulated device)",
            s.round_trips,
            s.elapsed.as_secs_f64(),
            s.median_us
        ),
        Err(e) => {
            eprintln!("rc_pingpong: {e}");
            std::process::exit(1);
        }
    }
}
