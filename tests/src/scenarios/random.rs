//! A long seeded randomised run of posts, polls and faults over the core
//! and any backend, checking the invariants of issue 5:
//! - every posted wr_id completes exactly once;
//! - successful data arrives byte-exact (sends, RDMA writes and reads,
//!   fetch-and-add totals);
//! - nothing is delivered after an error except flushes (per queue, in
//!   order; and every message a receiver got came from a send that
//!   completed successfully).
//!
//! The seed is printed; set `E2E_SEED` to replay a run, `E2E_OPS` to change
//! its length (default 12 000 operations in step mode).

use crate::e2e::check::{check_all, Ledger};
use crate::e2e::rng::Rng;
use crate::e2e::{pattern, Fabric, QpSpec, Queues};
use mlx5dp::cq::Cq;
use mlx5dp::prm::{Syndrome, WcStatus};
use mlx5dp::rq::Sge as RSge;
use mlx5dp::sq::{BlueFlamePreferred, PostError, Sge};
use mlx5dp_setup::backend::{Backend, BackendError, Buffer, QpHandle};
use mlx5dp_setup::emu::{
    CompressionCfg, CompressionLayout, CqeSize, EmuEvent, Fault, QpState, QpType, RqInit,
};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

type P = BlueFlamePreferred;

/// Bytes per send/write/read slot.
const SLOT: usize = 512;
/// Slots per buffer (more than WRs that can be in flight).
const SLOTS: usize = 256;
/// RQ size.
const RQ: u32 = 32;

#[derive(Clone, Copy, Debug)]
enum Wr {
    Send { len: usize },
    Write { slot: usize, len: usize },
    Read { slot: usize, src: usize, len: usize },
    FetchAdd { add: u64 },
    Bad,
    Nop,
}

struct Pair {
    a: &'static QpHandle,
    b: &'static QpHandle,
    local: Buffer,
    remote: Buffer,
    /// Receive buffers: one slot per RQ WQE.
    rbuf: Buffer,
    /// Next receive wr_id.
    next_recv: u64,
    /// Sum of successful fetch-and-adds on the remote counter.
    fa_total: u64,
    /// The sender saw an error: retire everything, then replace the pair.
    failed: bool,
}

/// Offset of the fetch-and-add counter in the remote buffer.
const COUNTER: usize = SLOT * SLOTS;
/// The read source region (fixed pattern) in the remote buffer.
const READ_SRC: usize = COUNTER + 64;

fn new_pair<B: Backend>(f: &mut Fabric<B>, scq: &Cq, rcq: &Cq) -> Pair {
    let mut sa = QpSpec::new(QpType::Rc);
    sa.rq = RqInit::None;
    sa.max_send_sge = 3;
    sa.max_inline = 200;
    let mut sb = QpSpec::new(QpType::Rc);
    sb.sq_wqebbs = 0;
    sb.rq = RqInit::Cyclic {
        wqe_cnt: RQ,
        max_sge: 2,
    };
    let a = f.qp(sa, scq, None);
    let b = f.qp(sb, scq, Some(rcq));
    f.connect(a.qpn, b.qpn);
    let remote = f.buffer(READ_SRC + SLOT * 4);
    remote.write(READ_SRC, &pattern(0x5eed, SLOT * 4));
    Pair {
        a,
        b,
        local: f.buffer(SLOT * SLOTS),
        remote,
        rbuf: f.buffer(SLOT * RQ as usize),
        next_recv: 0,
        fa_total: 0,
        failed: false,
    }
}

fn send_payload(wr_id: u64, len: usize) -> Vec<u8> {
    let mut p = pattern(wr_id, len.max(8));
    p[..8].copy_from_slice(&wr_id.to_le_bytes());
    p.truncate(len);
    p
}

struct Run<B: Backend> {
    f: Fabric<B>,
    scq: Cq,
    rcq: Cq,
    q: Queues<P>,
    ledger: Ledger,
    pairs: Vec<Pair>,
    wrs: BTreeMap<u64, (usize, Wr)>,
    /// wr_id → pair index, for receives.
    recv_pair: BTreeMap<(u32, u64), usize>,
    /// Sends whose message some receiver got.
    delivered: BTreeSet<u64>,
    /// Requester statuses by wr_id.
    status: BTreeMap<u64, WcStatus>,
    retired_seen: usize,
    next_wr: u64,
    rng: Rng,
    ops: u64,
    faults: u64,
    errors: u64,
}

impl<B: Backend> Run<B> {
    fn top_up(&mut self, i: usize) {
        let p = &mut self.pairs[i];
        if p.failed {
            return;
        }
        let rq = self.q.rqs.get_mut(&p.b.qpn.0).expect("rq");
        while rq.outstanding() < RQ {
            let id = p.next_recv;
            let slot = (id % u64::from(RQ)) as usize * SLOT;
            // Two SGEs: the split point varies.
            let cut = 8 + (id as usize * 29) % (SLOT - 16);
            rq.post(
                id,
                &[
                    RSge {
                        addr: p.rbuf.addr(slot),
                        length: cut as u32,
                        lkey: p.rbuf.key,
                    },
                    RSge {
                        addr: p.rbuf.addr(slot + cut),
                        length: (SLOT - cut) as u32,
                        lkey: p.rbuf.key,
                    },
                ],
            )
            .expect("post recv");
            self.ledger.recv(p.b.qpn.0, id);
            self.recv_pair.insert((p.b.qpn.0, id), i);
            p.next_recv += 1;
            self.ops += 1;
        }
        rq.commit();
    }

    /// Posts a batch of 1–4 random work requests on pair `i`.
    fn post_batch(&mut self, i: usize) {
        let n = self.rng.range(1, 4);
        let p = &self.pairs[i];
        let sq = self.q.sqs.get_mut(&p.a.qpn.0).expect("sq");
        let mut batch = sq.start();
        for _ in 0..n {
            let id = self.next_wr;
            let sig = self.rng.chance(1, 2);
            let kind = self.rng.below(100);
            let slot = (id as usize % SLOTS) * SLOT;
            let (l, r) = (&p.local, &p.remote);
            let res = if kind < 45 {
                let len = self.rng.range(1, SLOT as u64) as usize;
                let data = send_payload(id, len);
                if len <= 200 && self.rng.chance(1, 2) {
                    let (x, y) = data.split_at(len / 3);
                    batch
                        .send(id)
                        .map(|w| w.signaled_if(sig))
                        .and_then(|w| w.inline_data_list(&[x, y]))
                        .map(|()| Wr::Send { len })
                } else {
                    l.write(slot, &data);
                    let parts = self.rng.range(1, 3) as usize;
                    let chunk = len.div_ceil(parts);
                    let sges: Vec<Sge> = (0..len)
                        .step_by(chunk)
                        .map(|o| Sge::new(l.key, l.addr(slot + o), (chunk.min(len - o)) as u32))
                        .collect();
                    batch
                        .send(id)
                        .map(|w| w.signaled_if(sig))
                        .and_then(|w| w.sge_list(&sges))
                        .map(|()| Wr::Send { len })
                }
            } else if kind < 70 {
                let len = self.rng.range(1, SLOT as u64) as usize;
                l.write(slot, &pattern(id, len));
                batch
                    .rdma_write(id, r.key, r.addr(slot))
                    .map(|w| w.signaled_if(sig))
                    .and_then(|w| w.sge(l.key, l.addr(slot), len as u32))
                    .map(|()| Wr::Write { slot, len })
            } else if kind < 85 {
                let len = self.rng.range(1, SLOT as u64) as usize;
                let src = self.rng.below((SLOT * 3) as u64) as usize;
                batch
                    .rdma_read(id, r.key, r.addr(READ_SRC + src))
                    .map(|w| w.signaled_if(sig))
                    .and_then(|w| w.sge(l.key, l.addr(slot), len as u32))
                    .map(|()| Wr::Read { slot, src, len })
            } else if kind < 97 {
                let add = self.rng.range(1, 1000);
                batch
                    .atomic_fetch_add(id, r.key, r.addr(COUNTER), add)
                    .map(|w| w.signaled_if(sig))
                    .and_then(|w| w.sge(l.key, l.addr(slot), 8))
                    .map(|()| Wr::FetchAdd { add })
            } else {
                // A fault the device must catch: a bad lkey.
                self.faults += 1;
                batch
                    .send(id)
                    .map(|w| w.signaled_if(sig))
                    .and_then(|w| w.sge(0x00dd_0000, l.addr(0), 16))
                    .map(|()| Wr::Bad)
            };
            match res {
                Ok(wr) => {
                    self.ledger.send(p.a.qpn.0, id);
                    self.wrs.insert(id, (i, wr));
                    self.next_wr += 1;
                    self.ops += 1;
                }
                Err(PostError::QueueFull) => break,
                Err(e) => panic!("post: {e:?}"),
            }
        }
        batch.complete();
    }

    /// Progress, poll both CQs, check what completed.
    fn poll(&mut self) {
        self.f.be.progress();
        for cq in [&mut self.scq, &mut self.rcq] {
            if let Err(e) = self.q.poll(cq) {
                panic!("poll: {e:?}");
            }
        }
        self.ops += 1;
        while self.retired_seen < self.q.retired.len() {
            let r = self.q.retired[self.retired_seen];
            self.retired_seen += 1;
            if r.requester {
                self.status.insert(r.wr_id, r.status);
                let (i, wr) = self.wrs[&r.wr_id];
                let p = &mut self.pairs[i];
                if r.status != WcStatus::Success {
                    if !p.failed && r.status != WcStatus::WrFlushErr {
                        self.errors += 1;
                    }
                    p.failed = true;
                    continue;
                }
                match wr {
                    Wr::Write { slot, len } => {
                        assert_eq!(
                            p.remote.read(slot, len),
                            pattern(r.wr_id, len),
                            "write {:#x}",
                            r.wr_id
                        );
                    }
                    Wr::Read { slot, src, len } => {
                        let want = &pattern(0x5eed, SLOT * 4)[src..src + len];
                        assert_eq!(p.local.read(slot, len), want, "read {:#x}", r.wr_id);
                    }
                    Wr::FetchAdd { add } => p.fa_total += add,
                    Wr::Bad => panic!("a bad lkey completed successfully"),
                    Wr::Send { .. } | Wr::Nop => {}
                }
            } else if r.status == WcStatus::Success {
                let i = self.recv_pair[&(r.qpn, r.wr_id)];
                let p = &self.pairs[i];
                let polled = self
                    .q
                    .polled
                    .iter()
                    .rev()
                    .find(|x| x.wr_id == r.wr_id && x.qpn == r.qpn)
                    .expect("the receive completion");
                let len = polled.len as usize;
                let slot = (r.wr_id % u64::from(RQ)) as usize * SLOT;
                let got = p.rbuf.read(slot, len);
                let from = u64::from_le_bytes(
                    p.rbuf
                        .read(slot, 8.min(len))
                        .iter()
                        .chain([0u8; 8].iter())
                        .take(8)
                        .copied()
                        .collect::<Vec<_>>()
                        .try_into()
                        .expect("8"),
                );
                if len >= 8 {
                    assert_eq!(got, send_payload(from, len), "receive {:#x}", r.wr_id);
                    assert!(
                        matches!(self.wrs.get(&from), Some((j, Wr::Send { len: l })) if *j == i && *l == len),
                        "received a message that was not sent on this pair: {from:#x}"
                    );
                    assert!(self.delivered.insert(from), "{from:#x} delivered twice");
                }
            }
        }
    }

    /// Replaces pairs whose sender failed, once all their WRs retired.
    fn recycle(&mut self) {
        for i in 0..self.pairs.len() {
            if !self.pairs[i].failed {
                continue;
            }
            let (a, b) = (self.pairs[i].a, self.pairs[i].b);
            if self.f.be.qp_state(b.qpn) != Some(QpState::Err) {
                self.f.be.to_error(b.qpn).expect("peer to error");
            }
            let sq_done = self.q.sqs[&a.qpn.0].outstanding() == 0;
            let rq_done = self.q.rqs[&b.qpn.0].outstanding() == 0;
            if sq_done && rq_done {
                // Fetch-and-add: the counter holds exactly the successful adds.
                let p = &self.pairs[i];
                let c = u64::from_ne_bytes(p.remote.read(COUNTER, 8).try_into().expect("8"));
                assert_eq!(c, p.fa_total, "fetch-and-add total");
                self.q.sqs.remove(&a.qpn.0);
                self.q.rqs.remove(&b.qpn.0);
                let np = new_pair(&mut self.f, &self.scq, &self.rcq);
                self.q.sqs.insert(np.a.qpn.0, self.f.send_queue(np.a));
                self.q.rqs.insert(np.b.qpn.0, self.f.recv_queue(np.b));
                self.pairs[i] = np;
                self.top_up(i);
            }
        }
    }
}

/// The run: three RC pairs on two CQs (compressed with the hash format
/// when `compression`, the layout by the seed's parity), `target_ops`
/// operations chosen by `seed`: batches of sends, RDMA writes and reads,
/// fetch-and-adds, NOPs and bad-lkey sends; injected failures where the
/// backend can inject (the emulator); polls; pairs replaced after errors.
/// Then everything drains and the invariants of the module documentation
/// are checked.
pub fn randomised<B: Backend>(be: B, seed: u64, target_ops: u64, compression: bool) {
    let started = Instant::now();
    let mut f = Fabric::new(be);
    let comp = compression.then_some(CompressionCfg {
        format: mlx5dp::prm::MiniCqeFormat::Hash,
        layout: if seed % 2 == 0 {
            CompressionLayout::Basic
        } else {
            CompressionLayout::Enhanced
        },
        max_session: 64,
        force: false,
    });
    let scq = f.cq(512, CqeSize::B64, comp, false);
    let rcq = f.cq(512, CqeSize::B64, comp, false);
    let mut run = Run {
        f,
        scq,
        rcq,
        q: Queues::default(),
        ledger: Ledger::default(),
        pairs: Vec::new(),
        wrs: BTreeMap::new(),
        recv_pair: BTreeMap::new(),
        delivered: BTreeSet::new(),
        status: BTreeMap::new(),
        retired_seen: 0,
        next_wr: 1,
        rng: Rng::new(seed),
        ops: 0,
        faults: 0,
        errors: 0,
    };
    for i in 0..3 {
        let p = new_pair(&mut run.f, &run.scq, &run.rcq);
        run.q.sqs.insert(p.a.qpn.0, run.f.send_queue(p.a));
        run.q.rqs.insert(p.b.qpn.0, run.f.recv_queue(p.b));
        run.pairs.push(p);
        run.top_up(i);
    }
    while run.ops < target_ops {
        let i = run.rng.below(run.pairs.len() as u64) as usize;
        match run.rng.below(100) {
            0..=49 => {
                if !run.pairs[i].failed {
                    run.post_batch(i);
                }
            }
            50..=51 => {
                // Inject a device-side failure a few WQEs ahead.
                if !run.pairs[i].failed {
                    let skip = run.rng.below(4) as u32;
                    let syndrome = [
                        Syndrome::LocalProt,
                        Syndrome::LocalQpOp,
                        Syndrome::RemoteAccess,
                    ][run.rng.below(3) as usize];
                    match run.f.be.inject(Fault::FailWqe {
                        qpn: run.pairs[i].a.qpn,
                        skip,
                        syndrome,
                    }) {
                        Ok(()) => run.faults += 1,
                        // Hardware: only the bad-lkey work requests fail.
                        Err(BackendError::Unsupported(_)) => {}
                        Err(e) => panic!("inject: {e}"),
                    }
                    run.ops += 1;
                }
            }
            _ => {
                run.poll();
                run.top_up(i);
                run.recycle();
            }
        }
    }
    // Drain. Unsignalled WQEs at the tail of an SQ complete only with a
    // later signalled one (the draining rule of `mlx5dp::sq`): close each
    // live SQ with a signalled NOP, then move every pair to error so the
    // receives still posted are flushed.
    for i in 0..run.pairs.len() {
        if run.pairs[i].failed {
            continue;
        }
        let qpn = run.pairs[i].a.qpn.0;
        let id = run.next_wr;
        run.next_wr += 1;
        let sq = run.q.sqs.get_mut(&qpn).expect("sq");
        let mut batch = sq.start();
        if batch.nop(id).and_then(|w| w.signaled().post()).is_ok() {
            batch.complete();
            run.ledger.send(qpn, id);
            run.wrs.insert(id, (i, Wr::Nop));
        }
    }
    let start = Instant::now();
    while run.q.sqs.values().any(|s| s.outstanding() > 0) && start.elapsed() < crate::e2e::DEADLINE
    {
        run.poll();
    }
    for p in &run.pairs {
        run.f.be.to_error(p.a.qpn).expect("to error");
        run.f.be.to_error(p.b.qpn).expect("to error");
    }
    for p in &mut run.pairs {
        p.failed = true;
    }
    let deadline = Instant::now();
    while run.ledger.outstanding(&run.q.retired) > 0 {
        run.poll();
        if deadline.elapsed() > crate::e2e::DEADLINE / 4 {
            let ev = run.f.be.take_events();
            let ev: Vec<_> = ev
                .iter()
                .filter(|e| {
                    !matches!(
                        e,
                        EmuEvent::QpFatal { .. }
                            | EmuEvent::QpAccessErr { .. }
                            | EmuEvent::BlueFlameMismatch { .. }
                    )
                })
                .collect();
            let miss = run.ledger.missing(&run.q.retired);
            if let Some(&(_, qpn, w)) = miss.first() {
                let sq = &run.q.sqs[&qpn];
                eprintln!(
                    "sq {qpn:#x}: pi {} ci {}; wr {:?}",
                    sq.producer(),
                    sq.consumer(),
                    run.wrs.get(&w)
                );
                for p in run.q.polled.iter().filter(|p| p.qpn == qpn) {
                    eprintln!(
                        "  {:#x} {:?} ctr {} {:?}",
                        p.wr_id, p.status, p.wqe_counter, p.origin
                    );
                }
                for r in run.q.retired.iter().filter(|r| r.qpn == qpn) {
                    eprintln!("  retired {:#x} {:?} {}", r.wr_id, r.status, r.reported);
                }
            }
            panic!(
                "seed {seed:#x}: missing {:x?}; events: {ev:?}",
                run.ledger.missing(&run.q.retired)
            );
        }
        assert!(
            deadline.elapsed() < crate::e2e::DEADLINE,
            "seed {seed:#x}: work requests never completed: {:x?}; CQs in session {} {}, broken {} {}; last polled {:?}",
            run.ledger.missing(&run.q.retired),
            run.scq.in_session(),
            run.rcq.in_session(),
            run.scq.is_broken(),
            run.rcq.is_broken(),
            run.q.polled.iter().rev().take(3).collect::<Vec<_>>()
        );
    }
    check_all(&run.ledger, &run.q.retired);
    // The device saw no core mistake. (With the device on its own thread a
    // BlueFlame copy can be read while the core is still writing it: the
    // comparison is only meaningful in step mode.)
    let step = run.f.be.is_step_mode();
    let mistakes: Vec<EmuEvent> = run
        .f
        .be
        .take_events()
        .into_iter()
        .filter(|e| match e {
            EmuEvent::BlueFlameMismatch { .. } => step,
            EmuEvent::CqCiAhead { .. }
            | EmuEvent::SqDoorbellOverrun { .. }
            | EmuEvent::WqeBeyondDoorbell { .. }
            | EmuEvent::UarBeforeDbrec { .. }
            | EmuEvent::UarUnknownTarget { .. }
            | EmuEvent::RqDoorbellOverrun { .. }
            | EmuEvent::CqOverrun { .. } => true,
            _ => false,
        })
        .collect();
    assert!(mistakes.is_empty(), "seed {seed:#x}: {mistakes:?}");
    // Nothing delivered after an error: every delivered message's send
    // completed successfully.
    for w in &run.delivered {
        assert_eq!(
            run.status.get(w),
            Some(&WcStatus::Success),
            "seed {seed:#x}: message {w:#x} was delivered but its send did not succeed"
        );
    }
    eprintln!(
        "{}: seed {seed:#x}: {} operations ({} work requests, {} delivered messages, {} faults, {} QP errors, {} minis) in {:?}",
        run.f.be.name(),
        run.ops,
        run.ledger.len(),
        run.delivered.len(),
        run.faults,
        run.errors,
        run.q.polled.iter().filter(|p| p.origin == mlx5dp::cq::Origin::Mini).count(),
        started.elapsed()
    );
    assert!(run.errors > 0, "the run saw no error");
}

/// The run's seed: `E2E_SEED` (hexadecimal), or a fixed default.
pub fn seed() -> u64 {
    std::env::var("E2E_SEED")
        .ok()
        .and_then(|s| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok())
        .unwrap_or(0x6d6c_7835_6470)
}

/// Operations per run: `E2E_OPS`, or `default`.
pub fn ops(default: u64) -> u64 {
    std::env::var("E2E_OPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}
