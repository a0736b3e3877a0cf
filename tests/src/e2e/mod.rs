//! Shared pieces of the end-to-end scenarios (`tests/tests/e2e_*.rs`).
//!
//! A scenario takes a [`Backend`] (the emulated device in step mode or on
//! its own thread, or a ConnectX through `verbs`), creates its objects
//! through it, then posts and polls through the core only: [`SendQueue`] for
//! sends, [`Rq`] for cyclic receives, [`Cq`] for completions;
//! [`TestSrq`] and [`TestStridingRq`] are thin wrappers over the core's
//! `Srq` and `StridingRq` that keep the scenarios' bookkeeping.
//!
//! [`Queues`] is the [`WorkQueues`] the CQs map completions through; it
//! records every work request a completion retires ([`Retired`], the
//! unsignalled ones included) and every completion polled ([`Polled`]),
//! which the invariant checks in [`check`] read.
//!
//! Queue memory (shadows, staging areas, the parts' owners) is leaked:
//! the core's queues borrow it for `'static`, a few kilobytes per queue
//! for the life of a test process.

pub mod check;
pub mod frames;
pub mod rng;
pub mod srq;

use mlx5dp::cq::{Completion, Cq, CqConfig, Origin, PollError, WcOpcode, WorkQueues};
use mlx5dp::cq::{LookupError, RecvRetired, SendRetired, StrideCompletion, WqRef};
use mlx5dp::prm::{CqeOpcode, Syndrome, WcStatus};
use mlx5dp::rq::Rq;
use mlx5dp::sq::{DoorbellPolicy, SendQueue, SqShadowEntry, Wqebb};
use mlx5dp_setup::backend::{Backend, Buffer, ConnectAttr, QpHandle};
use mlx5dp_setup::emu::{
    Access, CompressionCfg, CoreCq, CqInit, CqeSize, Pdn, QpInit, QpType, Qpn, RqInit,
};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

pub use srq::{TestSrq, TestStridingRq};

/// Moves `t` to the heap for the rest of the process.
pub fn leak<T>(t: T) -> &'static mut T {
    Box::leak(Box::new(t))
}

/// One work request a completion retired.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retired {
    /// QP (send) or QP/SRQ/flow tag (receive) it belonged to.
    pub qpn: u32,
    /// Its wr_id.
    pub wr_id: u64,
    /// Its status: the completion's for the WQE it names, success for the
    /// unsignalled WQEs before it.
    pub status: WcStatus,
    /// Send (true) or receive.
    pub requester: bool,
    /// Whether it is the WQE the completion names.
    pub reported: bool,
}

/// One completion as the core reported it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Polled {
    /// The CQ.
    pub cqn: u32,
    /// Its wr_id.
    pub wr_id: u64,
    /// Status.
    pub status: WcStatus,
    /// CQE opcode.
    pub cqe_opcode: CqeOpcode,
    /// `ibv_wc_opcode`.
    pub opcode: WcOpcode,
    /// Byte count (packet length on a striding RQ).
    pub len: u32,
    /// Immediate data.
    pub imm: Option<u32>,
    /// QPN field.
    pub qpn: u32,
    /// Source QP (responder).
    pub src_qp: u32,
    /// Error syndrome.
    pub syndrome: Option<Syndrome>,
    /// Vendor syndrome.
    pub vendor_err: u32,
    /// Regular CQE or mini.
    pub origin: Origin,
    /// WQE counter (stride index on a striding RQ).
    pub wqe_counter: u16,
    /// WQE id (striding RQ).
    pub wqe_id: u16,
    /// First stride (striding RQ).
    pub stride_index: Option<u16>,
    /// Strides consumed (striding RQ).
    pub strides: Option<u16>,
    /// `IBV_WC_IP_CSUM_OK`-relevant bits: L3 and L4 OK.
    pub l3_l4_ok: (bool, bool),
    /// The GRH flag.
    pub grh: bool,
    /// The rkey a send with invalidate invalidated
    /// (`ibv_wc_read_invalidated_rkey`).
    pub invalidated: Option<u32>,
}

impl Polled {
    fn new(cqn: u32, c: &Completion) -> Self {
        Self {
            cqn,
            wr_id: c.wr_id(),
            status: c.status(),
            cqe_opcode: c.cqe_opcode(),
            opcode: c.opcode(),
            len: c.packet_len(),
            imm: c.immediate(),
            qpn: c.qp_num(),
            src_qp: c.src_qp(),
            syndrome: c.syndrome(),
            vendor_err: c.vendor_err(),
            origin: c.origin(),
            wqe_counter: c.wqe_counter(),
            wqe_id: c.cqe().wqe_id.get(),
            stride_index: c.stride_index(),
            strides: c.consumed_strides(),
            l3_l4_ok: (c.l3_ok(), c.l4_ok()),
            grh: c.wc_flags().contains(mlx5dp::cq::WcFlags::GRH),
            invalidated: c.invalidated_rkey(),
        }
    }
}

/// The work queues behind the scenario's CQs.
#[derive(Debug)]
pub struct Queues<P: DoorbellPolicy> {
    /// Send queues by QPN.
    pub sqs: BTreeMap<u32, SendQueue<'static, P>>,
    /// Cyclic receive queues by the CQE's QPN field (the flow tag on raw
    /// Ethernet QPs: scenarios use the QPN as the tag).
    pub rqs: BTreeMap<u32, Rq<'static>>,
    /// SRQs by SRQ number.
    pub srqs: BTreeMap<u32, TestSrq>,
    /// The SRQ each QP receives through, by QPN ([`Queues::attach_srq`]).
    pub srq_of_qp: BTreeMap<u32, u32>,
    /// Striding RQs by flow tag.
    pub strided: BTreeMap<u32, TestStridingRq>,
    /// Every retired work request, in order.
    pub retired: Vec<Retired>,
    /// Every completion polled, in order.
    pub polled: Vec<Polled>,
}

impl<P: DoorbellPolicy> Default for Queues<P> {
    fn default() -> Self {
        Self {
            sqs: BTreeMap::new(),
            rqs: BTreeMap::new(),
            srqs: BTreeMap::new(),
            srq_of_qp: BTreeMap::new(),
            strided: BTreeMap::new(),
            retired: Vec::new(),
            polled: Vec::new(),
        }
    }
}

impl<P: DoorbellPolicy> Queues<P> {
    /// The send queue of `qpn` (panics if absent: a scenario bug).
    pub fn sq(&mut self, qpn: Qpn) -> &mut SendQueue<'static, P> {
        self.sqs.get_mut(&qpn.0).expect("no such send queue")
    }

    /// Says that `qpn` receives through SRQ `srqn`. With CQE version 1
    /// (every ConnectX-5 and later) libmlx5 puts the QP's user index, not
    /// the SRQ number, in a responder CQE's `srqn_uidx`, so a hardware
    /// completion is mapped to its SRQ through the QPN; the emulator writes
    /// the SRQ number, which maps directly.
    pub fn attach_srq(&mut self, qpn: u32, srqn: u32) {
        self.srq_of_qp.insert(qpn, srqn);
    }

    /// The receive queue filed under `key`.
    pub fn rq(&mut self, key: u32) -> &mut Rq<'static> {
        self.rqs.get_mut(&key).expect("no such receive queue")
    }

    /// Polls up to 64 completions of `cq` into [`Self::polled`].
    pub fn poll(&mut self, cq: &mut Cq) -> Result<usize, PollError> {
        let cqn = cq.cqn();
        let mut got = Vec::new();
        let r = cq.poll(self, 64, |c| got.push(Polled::new(cqn, c)));
        self.polled.extend(got);
        r
    }

    /// Polls with `start_poll` / `next_poll` / `end_poll` instead.
    pub fn poll_batch(&mut self, cq: &mut Cq) -> Result<usize, PollError> {
        let cqn = cq.cqn();
        let mut got = Vec::new();
        if let Some(mut b) = cq.start_poll(self)? {
            got.push(Polled::new(cqn, b.completion()));
            while b.next_poll()? {
                got.push(Polled::new(cqn, b.completion()));
            }
            b.end_poll();
        }
        let n = got.len();
        self.polled.extend(got);
        Ok(n)
    }

    /// Completions polled for `qpn` as requester (send CQ).
    pub fn sent(&self, qpn: Qpn) -> Vec<&Polled> {
        self.polled
            .iter()
            .filter(|p| p.qpn == qpn.0 && is_requester(p.cqe_opcode))
            .collect()
    }

    /// Completions polled on the responder side.
    pub fn received(&self) -> Vec<&Polled> {
        self.polled
            .iter()
            .filter(|p| !is_requester(p.cqe_opcode))
            .collect()
    }

    /// Asserts the receive completions from the `from`-th on against the
    /// frames `sent[from..]`, for the striding RQ of `qpn`: success, the
    /// frame's length and stride count, and its bytes read back through
    /// the stride shadow (call it before those strides are reused).
    pub fn assert_strided_received(&self, qpn: Qpn, sent: &[Vec<u8>], from: usize) {
        let srq = self.strided.get(&qpn.0).expect("no such striding RQ");
        for (p, fr) in self.received().iter().zip(sent).skip(from) {
            assert_eq!(p.status, WcStatus::Success, "{p:?}");
            assert_eq!(p.len as usize, fr.len(), "{p:?}");
            let stride = p.stride_index.expect("stride index");
            assert_eq!(
                p.strides,
                Some(fr.len().div_ceil(srq.stride_bytes()) as u16),
                "{p:?}"
            );
            assert_eq!(&srq.packet(p.wqe_id, stride, fr.len()), fr, "{p:?}");
        }
    }
}

/// Whether a CQE opcode is a requester one.
pub fn is_requester(op: CqeOpcode) -> bool {
    matches!(op, CqeOpcode::Req | CqeOpcode::ReqErr)
}

impl<P: DoorbellPolicy> WorkQueues for Queues<P> {
    fn retire_send(
        &mut self,
        wq: WqRef,
        wqe_counter: u16,
        status: WcStatus,
    ) -> Result<SendRetired, LookupError> {
        let sq = self.sqs.get_mut(&wq.qpn).ok_or(LookupError::UnknownQueue)?;
        let log = &mut self.retired;
        let r = sq
            .retire_each(wqe_counter, |w| {
                log.push(Retired {
                    qpn: wq.qpn,
                    wr_id: w.wr_id,
                    status: if w.last { status } else { WcStatus::Success },
                    requester: true,
                    reported: w.last,
                });
            })
            .map_err(|_| LookupError::NotInFlight)?;
        Ok(SendRetired {
            wr_id: r.wr_id,
            wr_opcode: r.wr_opcode,
        })
    }

    fn retire_recv(
        &mut self,
        wq: WqRef,
        wqe_counter: u16,
        status: WcStatus,
    ) -> Result<RecvRetired, LookupError> {
        let error = status != WcStatus::Success;
        let srqn = match self.srq_of_qp.get(&wq.qpn) {
            Some(&n) => Some(n),
            None => self
                .srqs
                .contains_key(&wq.srqn_uidx)
                .then_some(wq.srqn_uidx),
        };
        let srq = srqn.and_then(|n| Some((n, self.srqs.get_mut(&n)?)));
        let (key, wr_id) = if let Some((n, srq)) = srq {
            (n, srq.retire(wqe_counter)?)
        } else {
            let rq = self.rqs.get_mut(&wq.qpn).ok_or(LookupError::UnknownQueue)?;
            (wq.qpn, rq.retire(wqe_counter, error)?)
        };
        self.retired.push(Retired {
            qpn: key,
            wr_id,
            status,
            requester: false,
            reported: true,
        });
        Ok(RecvRetired {
            wr_id,
            rx_csum_valid: true,
        })
    }

    fn retire_strides(
        &mut self,
        wq: WqRef,
        c: StrideCompletion,
        status: WcStatus,
    ) -> Result<RecvRetired, LookupError> {
        let rq = self
            .strided
            .get_mut(&wq.qpn)
            .ok_or(LookupError::UnknownQueue)?;
        let (wr_id, done) = rq.retire(c, status != WcStatus::Success)?;
        if let Some(done) = done {
            self.retired.push(Retired {
                qpn: wq.qpn,
                wr_id: done,
                status,
                requester: false,
                reported: true,
            });
        }
        Ok(RecvRetired {
            wr_id,
            rx_csum_valid: true,
        })
    }
}

/// The shape of a QP a scenario asks for.
#[derive(Clone, Copy, Debug)]
pub struct QpSpec {
    /// Transport.
    pub qp_type: QpType,
    /// SQ size in WQEBBs (0: none).
    pub sq_wqebbs: u32,
    /// Gather entries per send WQE.
    pub max_send_sge: u32,
    /// Inline bytes per send WQE.
    pub max_inline: u32,
    /// Receive side.
    pub rq: RqInit,
}

impl QpSpec {
    /// A QP of `qp_type` with a 64-WQEBB SQ (4 SGEs, 256 inline bytes) and
    /// a 64-WQE cyclic RQ of 4 SGEs.
    pub fn new(qp_type: QpType) -> Self {
        Self {
            qp_type,
            sq_wqebbs: 64,
            max_send_sge: 4,
            max_inline: 256,
            rq: RqInit::Cyclic {
                wqe_cnt: 64,
                max_sge: 4,
            },
        }
    }
}

/// A scenario's device and protection domain.
#[derive(Debug)]
pub struct Fabric<B: Backend> {
    /// The backend.
    pub be: B,
    /// The protection domain everything is created in.
    pub pd: Pdn,
}

/// How long a scenario waits for completions before it fails.
pub const DEADLINE: Duration = Duration::from_secs(20);

impl<B: Backend> Fabric<B> {
    /// A fabric over `be` with one protection domain.
    pub fn new(mut be: B) -> Self {
        let pd = be.alloc_pd().expect("alloc_pd");
        Self { be, pd }
    }

    /// A registered, zeroed buffer with every right.
    pub fn buffer(&mut self, len: usize) -> Buffer {
        self.be
            .reg_buffer(self.pd, len, Access::ALL)
            .expect("reg_buffer")
    }

    /// A CQ as the core polls it.
    pub fn cq(
        &mut self,
        cqe_cnt: u32,
        size: CqeSize,
        compression: Option<CompressionCfg>,
        striding: bool,
    ) -> Cq {
        let parts: &'static CoreCq = leak(
            self.be
                .create_cq(CqInit {
                    cqe_cnt,
                    cqe_size: size,
                    compression,
                    ignore_overrun: false,
                })
                .expect("create_cq"),
        );
        let cfg: CqConfig = parts.config(striding);
        // SAFETY: the parts' memory is kept alive by `parts`, leaked for the
        // life of the process; only this `Cq` (and the device) uses them.
        unsafe { Cq::from_raw_parts(parts.raw_parts(), cfg, 0) }.expect("Cq::from_raw_parts")
    }

    /// Creates a QP on `send_cq` / `recv_cq`.
    pub fn qp(&mut self, spec: QpSpec, send_cq: &Cq, recv_cq: Option<&Cq>) -> &'static QpHandle {
        let h = self
            .be
            .create_qp(QpInit {
                qp_type: spec.qp_type,
                pd: self.pd,
                send_cq: (spec.sq_wqebbs > 0).then_some(mlx5dp_setup::emu::Cqn(send_cq.cqn())),
                recv_cq: recv_cq.map(|c| mlx5dp_setup::emu::Cqn(c.cqn())),
                sq_wqebbs: spec.sq_wqebbs,
                max_send_sge: spec.max_send_sge,
                max_inline: spec.max_inline,
                rq: spec.rq,
                xrcd: None,
                vlan_strip: false,
            })
            .expect("create_qp");
        leak(h)
    }

    /// The core's send queue of `h`, with a full-ring staging area.
    pub fn send_queue<P: DoorbellPolicy>(&self, h: &'static QpHandle) -> SendQueue<'static, P> {
        self.send_queue_with(h, |_| {})
    }

    /// Like [`Self::send_queue`], adjusting the configuration first.
    pub fn send_queue_with<P: DoorbellPolicy>(
        &self,
        h: &'static QpHandle,
        adjust: impl FnOnce(&mut mlx5dp::sq::SqConfig),
    ) -> SendQueue<'static, P> {
        let sq = h.sq.as_ref().expect("the QP has an SQ");
        let n = sq.emu_parts().wqe_cnt as usize;
        let shadow = leak(vec![SqShadowEntry::EMPTY; n]).as_mut_slice();
        let staging = leak(vec![Wqebb::ZERO; n.max(16)]).as_mut_slice();
        let mut cfg = sq.config(&self.be.caps());
        adjust(&mut cfg);
        // SAFETY: the parts come from the device for this QP and stay alive
        // (the handle is leaked); this is the only queue built on them.
        unsafe { SendQueue::new(sq.raw_parts(), cfg, shadow, staging) }.expect("SendQueue::new")
    }

    /// The core's cyclic receive queue of `h`.
    pub fn recv_queue(&self, h: &'static QpHandle) -> Rq<'static> {
        let rq = h.rq.as_ref().expect("the QP has an RQ");
        // SAFETY: called once per QP; the handle (and the memory) is leaked.
        let p = unsafe { rq.raw_parts() }.expect("RQ parts");
        let wrid = leak(vec![0u64; p.size.entries() as usize]).as_mut_slice();
        Rq::new(p.ring, p.size, p.wqe_shift, p.dbrec, wrid, 0).expect("Rq::new")
    }

    /// Connects two QPs (RC, UC) with every right and infinite RNR retries.
    pub fn connect(&mut self, a: Qpn, b: Qpn) {
        self.be
            .connect(a, b, ConnectAttr::default())
            .expect("connect");
    }

    /// Brings a UD QP up with `qkey`.
    pub fn ud_up(&mut self, qpn: Qpn, qkey: u32) {
        self.be
            .bring_up(qpn, None, qkey, ConnectAttr::default())
            .expect("bring_up UD");
    }

    /// Lets the device run and polls `cqs` until `done` holds; panics after
    /// [`DEADLINE`].
    pub fn run_until<P: DoorbellPolicy>(
        &mut self,
        cqs: &mut [&mut Cq],
        q: &mut Queues<P>,
        mut done: impl FnMut(&Queues<P>) -> bool,
    ) {
        let start = Instant::now();
        loop {
            self.be.progress();
            for cq in cqs.iter_mut() {
                if let Err(e) = q.poll(cq) {
                    panic!("poll: {e:?}");
                }
            }
            if done(q) {
                return;
            }
            if start.elapsed() > DEADLINE {
                panic!(
                    "{}: no progress after {:?}: {} completions polled, last {:?}",
                    self.be.name(),
                    DEADLINE,
                    q.polled.len(),
                    q.polled.last()
                );
            }
        }
    }

    /// Runs until `n` more completions have been polled.
    pub fn run_for<P: DoorbellPolicy>(&mut self, cqs: &mut [&mut Cq], q: &mut Queues<P>, n: usize) {
        let target = q.polled.len() + n;
        self.run_until(cqs, q, |q| q.polled.len() >= target);
    }

    /// Lets the device run for a while (step mode: `steps` steps) and polls.
    pub fn settle<P: DoorbellPolicy>(
        &mut self,
        cqs: &mut [&mut Cq],
        q: &mut Queues<P>,
        steps: u32,
    ) {
        let rounds = if self.be.is_step_mode() {
            steps
        } else {
            steps * 200
        };
        for _ in 0..rounds {
            self.be.progress();
            for cq in cqs.iter_mut() {
                if let Err(e) = q.poll(cq) {
                    panic!("poll: {e:?}");
                }
            }
        }
    }
}

/// Deterministic bytes for a payload: `len` bytes seeded by `seed`.
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut r = rng::Rng::new(seed ^ 0x9e37_79b9_7f4a_7c15);
    (0..len).map(|_| r.next_u64() as u8).collect()
}

/// The QP type a scenario names in its messages.
pub fn qp_type_name(t: QpType) -> &'static str {
    match t {
        QpType::Rc => "rc",
        QpType::Uc => "uc",
        QpType::Ud => "ud",
        QpType::XrcIni => "xrc-ini",
        QpType::XrcTgt => "xrc-tgt",
        QpType::RawPacket => "raw",
    }
}
