//! `send-bw`, `write-bw`, `read-bw`, `atomic-bw`: message rate and
//! bandwidth with a window of outstanding work (perftest `ib_*_bw`).
//!
//! A keeps up to `--tx-depth` work requests in flight, posting `--batch` of
//! them per doorbell, and asks for a completion every `--cq-mod` (and on
//! the last one): one completion retires the unsignalled work requests
//! before it. For `send-bw` B keeps its receive queue full, reposting as
//! receives complete. Messages cycle over 16 buffer slots on each side.
#![forbid(unsafe_code)]

use super::output::Report;
use super::pair::{drain, post_recv, Deadline, Pair, PairSpec, GRH, QKEY};
use super::runner::{Goal, Run};
use super::stats::{PeakMeter, Throughput};
use super::{Opts, PerfError, Test};
use crate::backend::Backend;
use mlx5dp::sq::{DoorbellOnly, PostError};
use serde_json::json;

type P = DoorbellOnly;

/// Buffer slots each side cycles over.
const SLOTS: usize = 16;

/// Runs a bandwidth test.
pub fn run(be: Box<dyn Backend>, o: &Opts) -> Result<Report, PerfError> {
    let size = o.size as usize;
    let inline = o.size <= o.inline && matches!(o.test, Test::SendBw | Test::WriteBw);
    // WQEBBs of one work request: control + remote address (or datagram)
    // + data segment fit in one; inline data may need more.
    let per_wr = if inline {
        (48 + 4 + size).div_ceil(64)
    } else {
        2
    };
    let sq_wqebbs = (o.tx_depth as usize * per_wr).next_power_of_two().max(64) as u32;
    let rq_wqes = (o.tx_depth * 2).next_power_of_two().max(64);
    let mut p: Pair<P> = Pair::new(
        be,
        o,
        PairSpec {
            sq_wqebbs,
            rq_wqes,
            max_inline: o.inline,
            cqes: (rq_wqes * 4).max(1024),
        },
    )?;
    let slot = if p.ud { size + GRH } else { size }.next_multiple_of(64);
    let src = p.buffer(slot * SLOTS)?;
    let dst = p.buffer(slot * SLOTS)?;
    // Something recognisable to move.
    let pattern: Vec<u8> = (0..slot * SLOTS).map(|i| (i * 7 + 3) as u8).collect();
    match o.test {
        Test::ReadBw => dst.write(0, &pattern),
        Test::AtomicBw => {}
        _ => src.write(0, &pattern),
    }
    if o.test == Test::SendBw {
        for i in 0..rq_wqes {
            let off = (i as usize % SLOTS) * slot;
            post_recv(&mut p.sides.b.rq, u64::from(i), &dst, off, slot)?;
        }
        p.sides.b.rq.commit();
    }
    let av = p.ud_av()?;
    let dest_qpn = p.sides.b.qpn;
    let total = match o.goal {
        Goal::Iters(n) => Some(n),
        Goal::Time(_) => None,
    };
    let depth = u64::from(o.tx_depth);
    let cq_mod = u64::from(o.cq_mod);
    let mut posted = 0u64;
    let mut completed = 0u64;
    let mut received = 0u64;
    let mut minis = 0u64;
    let mut peak = PeakMeter::new();
    let mut run = Run::start(o.goal, o.test.name());
    let mut deadline = Deadline::start();
    let mut spins = 0u64;
    let mut last_completed = 0;
    while !run.done(completed) {
        let room = depth - (posted - completed);
        let k = u64::from(o.batch).min(room).min(run.remaining(posted));
        if k > 0 && (k == u64::from(o.batch) || k == run.remaining(posted) || room == depth) {
            let mut b = p.sides.a.sq.start();
            let mut r: Result<(), PostError> = Ok(());
            for _ in 0..k {
                let seq = posted;
                let sig = (seq + 1) % cq_mod == 0 || Some(seq + 1) == total;
                let off = (seq as usize % SLOTS) * slot;
                r = (|| match o.test {
                    Test::SendBw => {
                        let wr = b.send(seq)?.signaled_if(sig);
                        let wr = if p.ud {
                            wr.ud_addr(&av, dest_qpn, QKEY)?
                        } else {
                            wr
                        };
                        if inline {
                            wr.inline_data(&pattern[off..off + size])
                        } else {
                            wr.sge(src.key, src.addr(off), o.size)
                        }
                    }
                    Test::WriteBw => {
                        let wr = b.rdma_write(seq, dst.key, dst.addr(off))?.signaled_if(sig);
                        if inline {
                            wr.inline_data(&pattern[off..off + size])
                        } else {
                            wr.sge(src.key, src.addr(off), o.size)
                        }
                    }
                    Test::ReadBw => b
                        .rdma_read(seq, dst.key, dst.addr(off))?
                        .signaled_if(sig)
                        .sge(src.key, src.addr(off), o.size),
                    _ => b
                        .atomic_fetch_add(seq, dst.key, dst.addr(0), 1)?
                        .signaled_if(sig)
                        .sge(src.key, src.addr(off), 8),
                })();
                if r.is_err() {
                    break;
                }
                posted += 1;
            }
            b.complete();
            match r {
                // The ring is full of WQEs not yet retired: poll first.
                Ok(()) | Err(PostError::QueueFull) => {}
                Err(e) => return Err(PerfError::run(format!("post: {e:?}"))),
            }
        }
        let seen = drain(&mut p.cq_a, &mut p.sides, 64)?;
        minis += u64::from(seen.minis);
        if let Some(m) = seen.max_send {
            completed = completed.max(m + 1);
        }
        if o.test == Test::SendBw {
            let seen = drain(&mut p.cq_b, &mut p.sides, rq_wqes as usize)?;
            minis += u64::from(seen.minis);
            for _ in 0..seen.recvs {
                let k = p.sides.b.rq.head();
                let off = (k as usize % SLOTS) * slot;
                post_recv(&mut p.sides.b.rq, u64::from(k), &dst, off, slot)?;
                received += 1;
            }
            if seen.recvs > 0 {
                p.sides.b.rq.commit();
            }
        }
        peak.sample(run.elapsed(), completed);
        if completed == last_completed {
            deadline.check(spins, "completions")?;
            spins += 1;
        } else {
            last_completed = completed;
            spins = 0;
        }
    }
    let elapsed = run.finish();
    // The run ends when the sender's last CQE arrived; the receiver's CQEs
    // for the last messages may still be on their way (the device writes
    // them independently, on its own thread in thread mode). Drain them so
    // the receive count is complete: all of them on a reliable QP (RC/UC
    // here deliver every message or fail the run), and on UD until no more
    // arrive for a while (UD may drop a message when no receive is posted).
    if o.test == Test::SendBw {
        let mut settle = Deadline::start();
        let mut idle = std::time::Instant::now();
        let mut spins = 0u64;
        while received < posted {
            let seen = drain(&mut p.cq_b, &mut p.sides, rq_wqes as usize)?;
            minis += u64::from(seen.minis);
            for _ in 0..seen.recvs {
                let k = p.sides.b.rq.head();
                let off = (k as usize % SLOTS) * slot;
                post_recv(&mut p.sides.b.rq, u64::from(k), &dst, off, slot)?;
                received += 1;
            }
            if seen.recvs > 0 {
                p.sides.b.rq.commit();
                idle = std::time::Instant::now();
                spins = 0;
            } else if p.ud {
                if idle.elapsed() > std::time::Duration::from_millis(200) {
                    break;
                }
                std::hint::spin_loop();
            } else {
                settle.check(spins, "receive completions")?;
                spins += 1;
            }
        }
    }
    // The data moved must be the data posted (slot 0 was used first).
    let check = match o.test {
        Test::WriteBw | Test::SendBw => Some((&dst, &pattern)),
        Test::ReadBw => Some((&src, &pattern)),
        _ => None,
    };
    if let Some((buf, want)) = check {
        let at = if o.test == Test::SendBw && p.ud {
            GRH
        } else {
            0
        };
        if buf.read(at, size) != want[..size] {
            return Err(PerfError::run(
                "the data moved differs from the data posted",
            ));
        }
    }
    if o.test == Test::AtomicBw {
        let raw = dst.read(0, 8);
        let v = u64::from_ne_bytes(raw.as_slice().try_into().unwrap_or([0; 8]));
        if v < completed || v > posted {
            return Err(PerfError::run(format!(
                "atomic counter {v}, expected {completed}..={posted}"
            )));
        }
    }
    let device = p.finish()?;
    let mut params = vec![
        ("transport", json!(format!("{:?}", o.qp).to_uppercase())),
        ("message size", json!(o.size)),
        ("tx depth", json!(o.tx_depth)),
        ("cq moderation", json!(o.cq_mod)),
        ("batch (WRs/doorbell)", json!(o.batch)),
        ("inline", json!(inline)),
        ("doorbell", json!("doorbell only")),
        ("cqe compression", json!(o.compression_name())),
    ];
    if o.test == Test::SendBw {
        params.push(("receive queue", json!(rq_wqes)));
    }
    let mut extra = vec![("minis polled", json!(minis))];
    if o.test == Test::SendBw {
        extra.push(("messages received", json!(received)));
    }
    Ok(Report {
        test: o.test.name(),
        title: match o.test {
            Test::SendBw => "Send BW Test",
            Test::WriteBw => "RDMA Write BW Test",
            Test::ReadBw => "RDMA Read BW Test",
            _ => "Atomic Fetch&Add BW Test",
        },
        device,
        params,
        bytes: u64::from(o.size),
        iterations: completed,
        elapsed,
        latency: None,
        throughput: Some(Throughput {
            messages: completed,
            bytes: u64::from(o.size),
            elapsed,
            peak_rate: peak.peak(),
        }),
        extra,
    })
}
