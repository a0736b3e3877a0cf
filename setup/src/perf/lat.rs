//! `send-lat` and `write-lat`: ping-pong between two QPs (perftest
//! `ib_send_lat`, `ib_write_lat`).
//!
//! One thread plays both ends, as the device is the only other party: A
//! posts, B waits for the message (a receive completion, or for
//! `write-lat` the last byte of the buffer changing, as perftest polls
//! memory), answers, and A waits in turn. Each round trip is timed; the
//! figures are one-way latencies (half a round trip), as perftest reports.
//! Sends are unsignalled; the core requests a completion every half ring,
//! which each side retires while it waits.
#![forbid(unsafe_code)]

use super::output::Report;
use super::pair::{drain, post_recv, Deadline, Pair, PairSpec, Side, GRH, QKEY};
use super::runner::Run;
use super::stats::Latency;
use super::{Opts, PerfError, Test};
use crate::backend::{Backend, Buffer};
use mlx5dp::cq::Cq;
use mlx5dp::prm::Av;
use mlx5dp::sq::{BlueFlamePreferred, PostError};
use serde_json::json;
use std::time::Instant;

type P = BlueFlamePreferred;

/// Receive WQEs kept posted on each side.
const RQ_DEPTH: u32 = 64;

/// One side's buffers: what it sends from, where it receives into.
struct Bufs {
    src: Buffer,
    dst: Buffer,
}

/// Runs a latency test.
pub fn run(be: Box<dyn Backend>, o: &Opts) -> Result<Report, PerfError> {
    let size = o.size as usize;
    let inline = o.size <= o.inline;
    let mut p: Pair<P> = Pair::new(
        be,
        o,
        PairSpec {
            sq_wqebbs: 64,
            rq_wqes: RQ_DEPTH,
            max_inline: o.inline,
            cqes: 256,
        },
    )?;
    let slot = if p.ud { size + GRH } else { size }.next_multiple_of(64);
    let mut bufs = Vec::new();
    for _ in 0..2 {
        bufs.push(Bufs {
            src: p.buffer(size)?,
            dst: p.buffer(slot * RQ_DEPTH as usize)?,
        });
    }
    if o.test == Test::SendLat {
        for (side, b) in [&mut p.sides.a, &mut p.sides.b].into_iter().zip(&bufs) {
            for i in 0..RQ_DEPTH {
                post_recv(&mut side.rq, u64::from(i), &b.dst, i as usize * slot, slot)?;
            }
            side.rq.commit();
        }
    }
    let av = p.ud_av()?;
    let ends = Ends {
        qpn: [p.sides.a.qpn, p.sides.b.qpn],
        ud: p.ud,
        av: &av,
        size,
        inline,
        slot,
    };
    let warmup = match o.goal {
        super::runner::Goal::Iters(n) => n.min(100),
        super::runner::Goal::Time(_) => 100,
    };
    let mut payload = vec![0u8; size];
    for i in 0..warmup {
        round(o.test, &mut p, &bufs, &ends, &mut payload, i)?;
    }
    let mut samples = Vec::new();
    let mut run = Run::start(o.goal, o.test.name());
    let mut n = 0u64;
    while !run.done(n) {
        let t0 = Instant::now();
        round(o.test, &mut p, &bufs, &ends, &mut payload, warmup + n)?;
        samples.push(t0.elapsed().as_nanos() as u64 / 2);
        n += 1;
    }
    let elapsed = run.finish();
    let device = p.finish()?;
    let latency =
        Latency::from_samples(samples).ok_or_else(|| PerfError::run("no round trip completed"))?;
    Ok(Report {
        test: o.test.name(),
        title: if o.test == Test::SendLat {
            "Send Latency Test (one-way = round trip / 2)"
        } else {
            "RDMA Write Latency Test (one-way = round trip / 2)"
        },
        device,
        params: vec![
            ("transport", json!(format!("{:?}", o.qp).to_uppercase())),
            ("message size", json!(o.size)),
            ("inline", json!(inline)),
            ("doorbell", json!("BlueFlame preferred")),
            ("cqe compression", json!(o.compression_name())),
            ("warm-up round trips", json!(warmup)),
        ],
        bytes: u64::from(o.size),
        iterations: n,
        elapsed,
        latency: Some(latency),
        throughput: None,
        extra: Vec::new(),
    })
}

/// What does not change between round trips.
struct Ends<'a> {
    qpn: [u32; 2],
    ud: bool,
    av: &'a Av,
    size: usize,
    inline: bool,
    slot: usize,
}

/// One round trip: A to B, B to A.
fn round(
    test: Test,
    p: &mut Pair<P>,
    bufs: &[Bufs],
    e: &Ends<'_>,
    payload: &mut [u8],
    i: u64,
) -> Result<(), PerfError> {
    // A nonzero marker that changes every message (write-lat polls it).
    let mark = (i % 255) as u8 + 1;
    for (from, to) in [(0usize, 1usize), (1, 0)] {
        if let Some(last) = payload.last_mut() {
            *last = mark;
        }
        let side = if from == 0 {
            &mut p.sides.a
        } else {
            &mut p.sides.b
        };
        post(test, side, &bufs[from], &bufs[to], e, e.qpn[to], payload, i)?;
        // Wait at the receiver, retiring both sides' send completions.
        let mut deadline = Deadline::start();
        let mut spins = 0u64;
        loop {
            let (rx_cq, tx_cq) = if to == 1 {
                (&mut p.cq_b, &mut p.cq_a)
            } else {
                (&mut p.cq_a, &mut p.cq_b)
            };
            let got = wait_once(test, rx_cq, tx_cq, &mut p.sides, &bufs[to], e, mark)?;
            if got {
                break;
            }
            deadline.check(spins, "the ping-pong message")?;
            spins += 1;
        }
        if test == Test::SendLat {
            let side = if to == 1 {
                &mut p.sides.b
            } else {
                &mut p.sides.a
            };
            // Replace the receive just consumed (slots cycle with the ring).
            let k = side.rq.head();
            let off = (k as usize % RQ_DEPTH as usize) * e.slot;
            post_recv(&mut side.rq, u64::from(k), &bufs[to].dst, off, e.slot)?;
            side.rq.commit();
        }
    }
    Ok(())
}

/// One poll of the receiver (and the sender's CQ); whether the message
/// arrived.
fn wait_once(
    test: Test,
    rx_cq: &mut Cq,
    tx_cq: &mut Cq,
    sides: &mut super::pair::Sides<P>,
    to: &Bufs,
    e: &Ends<'_>,
    mark: u8,
) -> Result<bool, PerfError> {
    drain(tx_cq, sides, 16)?;
    if test == Test::SendLat {
        let seen = drain(rx_cq, sides, 16)?;
        Ok(seen.recvs > 0)
    } else {
        drain(rx_cq, sides, 16)?;
        Ok(to.dst.read(e.size - 1, 1).first() == Some(&mark))
    }
}

/// Posts the message of one direction.
#[expect(clippy::too_many_arguments, reason = "one call site, all plain data")]
fn post(
    test: Test,
    side: &mut Side<P>,
    from: &Bufs,
    to: &Bufs,
    e: &Ends<'_>,
    dest_qpn: u32,
    payload: &[u8],
    i: u64,
) -> Result<(), PerfError> {
    if !e.inline {
        if let Some(&last) = payload.last() {
            from.src.write(e.size - 1, &[last]);
        }
    }
    let mut b = side.sq.start();
    let r: Result<(), PostError> = (|| {
        let wr = if test == Test::SendLat {
            let wr = b.send(i)?;
            if e.ud {
                wr.ud_addr(e.av, dest_qpn, QKEY)?
            } else {
                wr
            }
        } else {
            b.rdma_write(i, to.dst.key, to.dst.addr(0))?
        };
        if e.inline {
            wr.inline_data(payload)
        } else {
            wr.sge(from.src.key, from.src.addr(0), e.size as u32)
        }
    })();
    match r {
        Ok(()) => {
            b.complete();
            Ok(())
        }
        Err(err) => {
            b.abort();
            Err(PerfError::run(format!("post: {err:?}")))
        }
    }
}
