//! Two QPs of one transport connected to each other over one device (the
//! emulated one, or a ConnectX in loopback through one port), each with its
//! own CQ (sends and receives), as perftest's client and server are: the
//! rig of the latency and bandwidth tests.
#![forbid(unsafe_code)]

use super::{rig, Opts, PerfError, QpArg};
use crate::backend::{AhAttr, Backend, Buffer, ConnectAttr, QpHandle};
use crate::emu::{Access, Cqn, Pdn, QpInit, QpType, RqInit};
use mlx5dp::cq::{Cq, LookupError, RecvRetired, SendRetired, WorkQueues, WqRef};
use mlx5dp::prm::{Av, CqeOpcode, WcStatus};
use mlx5dp::rq::{Rq, Sge as RSge};
use mlx5dp::sq::{AnyQp, DoorbellPolicy, SendQueue};
use std::time::{Duration, Instant};

/// The Q_Key of UD tests.
pub const QKEY: u32 = 0x1111_2222;
/// Bytes of GRH a UD receive buffer starts with.
pub const GRH: usize = 40;
/// How long a wait for a completion may take before the run fails.
pub const DEADLINE: Duration = Duration::from_secs(20);

/// One QP's queues.
#[derive(Debug)]
pub struct Side<P: DoorbellPolicy> {
    /// QP number.
    pub qpn: u32,
    /// Its send queue.
    pub sq: SendQueue<'static, P, AnyQp>,
    /// Its receive queue.
    pub rq: Rq<'static>,
}

/// Both QPs' queues: the [`WorkQueues`] both CQs map completions through.
#[derive(Debug)]
pub struct Sides<P: DoorbellPolicy> {
    /// The client (requester of the bandwidth tests).
    pub a: Side<P>,
    /// The server.
    pub b: Side<P>,
}

impl<P: DoorbellPolicy> Sides<P> {
    fn side(&mut self, qpn: u32) -> Result<&mut Side<P>, LookupError> {
        if self.a.qpn == qpn {
            Ok(&mut self.a)
        } else if self.b.qpn == qpn {
            Ok(&mut self.b)
        } else {
            Err(LookupError::UnknownQueue)
        }
    }
}

impl<P: DoorbellPolicy> WorkQueues for Sides<P> {
    fn retire_send(
        &mut self,
        wq: WqRef,
        wqe_counter: u16,
        _: WcStatus,
    ) -> Result<SendRetired, LookupError> {
        let r = self
            .side(wq.qpn)?
            .sq
            .retire(wqe_counter)
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
        let wr_id = self
            .side(wq.qpn)?
            .rq
            .retire(wqe_counter, status != WcStatus::Success)?;
        Ok(RecvRetired {
            wr_id,
            rx_csum_valid: false,
        })
    }
}

/// What one poll of a CQ saw.
#[derive(Clone, Copy, Debug, Default)]
pub struct Seen {
    /// Receive completions, and the wr_id of the last.
    pub recvs: u32,
    /// The wr_id of the last receive.
    pub last_recv: u64,
    /// Send completions.
    pub sends: u32,
    /// The largest send wr_id completed.
    pub max_send: Option<u64>,
    /// Completions delivered as mini-CQEs.
    pub minis: u32,
}

/// Polls up to `max` completions of `cq`; an error completion or a poll
/// error fails the run.
pub fn drain<W: WorkQueues>(cq: &mut Cq, w: &mut W, max: usize) -> Result<Seen, PerfError> {
    let mut seen = Seen::default();
    let mut bad = None;
    let r = cq.poll(w, max, |c| {
        if c.status() != WcStatus::Success {
            if bad.is_none() {
                bad = Some(format!(
                    "error completion: {:?} (syndrome {:?}, vendor {:#x}) on QP {:#x}",
                    c.status(),
                    c.syndrome(),
                    c.vendor_err(),
                    c.qp_num()
                ));
            }
            return;
        }
        if c.origin() == mlx5dp::cq::Origin::Mini {
            seen.minis += 1;
        }
        if matches!(c.cqe_opcode(), CqeOpcode::Req) {
            seen.sends += 1;
            seen.max_send = Some(seen.max_send.map_or(c.wr_id(), |m| m.max(c.wr_id())));
        } else {
            seen.recvs += 1;
            seen.last_recv = c.wr_id();
        }
    });
    if let Err(e) = r {
        return Err(PerfError::run(format!("poll CQ {:#x}: {e:?}", cq.cqn())));
    }
    match bad {
        Some(m) => Err(PerfError::run(m)),
        None => Ok(seen),
    }
}

/// The shape of the pair.
#[derive(Clone, Copy, Debug)]
pub struct PairSpec {
    /// SQ size in WQEBBs.
    pub sq_wqebbs: u32,
    /// RQ size in WQEs.
    pub rq_wqes: u32,
    /// Inline bytes per send WQE.
    pub max_inline: u32,
    /// CQEs per CQ.
    pub cqes: u32,
}

/// Two connected QPs, their CQs and queues.
#[derive(Debug)]
pub struct Pair<P: DoorbellPolicy> {
    /// The device.
    pub be: Box<dyn Backend>,
    /// The protection domain.
    pub pd: Pdn,
    /// The client's CQ.
    pub cq_a: Cq,
    /// The server's CQ.
    pub cq_b: Cq,
    /// Both sides' queues.
    pub sides: Sides<P>,
    /// Whether the transport is UD.
    pub ud: bool,
}

impl<P: DoorbellPolicy> Pair<P> {
    /// Creates the CQs and the QPs on `be`, and connects them.
    pub fn new(mut be: Box<dyn Backend>, o: &Opts, spec: PairSpec) -> Result<Self, PerfError> {
        let pd = be
            .alloc_pd()
            .map_err(|e| rig::backend_error("alloc_pd", e))?;
        let cq_a = rig::cq(&mut be, spec.cqes, o.compression, false)?;
        let cq_b = rig::cq(&mut be, spec.cqes, o.compression, false)?;
        let qp_type = match o.qp {
            QpArg::Rc => QpType::Rc,
            QpArg::Uc => QpType::Uc,
            QpArg::Ud => QpType::Ud,
        };
        let mk = |be: &mut Box<dyn Backend>, cq: &Cq| -> Result<&'static QpHandle, PerfError> {
            rig::qp(
                be,
                QpInit {
                    qp_type,
                    pd,
                    send_cq: Some(Cqn(cq.cqn())),
                    recv_cq: Some(Cqn(cq.cqn())),
                    sq_wqebbs: spec.sq_wqebbs,
                    max_send_sge: 1,
                    max_inline: spec.max_inline,
                    rq: RqInit::Cyclic {
                        wqe_cnt: spec.rq_wqes,
                        max_sge: 1,
                    },
                    xrcd: None,
                    vlan_strip: false,
                },
            )
        };
        let a = mk(&mut be, &cq_a)?;
        let b = mk(&mut be, &cq_b)?;
        let attr = ConnectAttr::default();
        if qp_type == QpType::Ud {
            be.bring_up(a.qpn, None, QKEY, attr)
                .and_then(|()| be.bring_up(b.qpn, None, QKEY, attr))
                .map_err(|e| rig::backend_error("bring_up", e))?;
        } else {
            be.connect(a.qpn, b.qpn, attr)
                .map_err(|e| rig::backend_error("connect", e))?;
        }
        let side = |be: &dyn Backend, h: &'static QpHandle| -> Result<Side<P>, PerfError> {
            Ok(Side {
                qpn: h.qpn.0,
                sq: rig::send_queue(be, h, |_| {})?,
                rq: rig::recv_queue(h)?,
            })
        };
        let sides = Sides {
            a: side(&*be, a)?,
            b: side(&*be, b)?,
        };
        Ok(Self {
            be,
            pd,
            cq_a,
            cq_b,
            sides,
            ud: qp_type == QpType::Ud,
        })
    }

    /// The address vector UD sends carry: an address handle to the
    /// device's own port, where the peer QP lives
    /// ([`Backend::create_ah`]; on a ConnectX the route libmlx5 builds).
    /// Connected transports carry none: zero, never posted.
    pub fn ud_av(&mut self) -> Result<Av, PerfError> {
        if !self.ud {
            return Ok(Av::default());
        }
        self.be
            .create_ah(self.pd, AhAttr::default())
            .map_err(|e| rig::backend_error("create_ah", e))
    }

    /// A registered, zeroed buffer with every right.
    pub fn buffer(&mut self, len: usize) -> Result<Buffer, PerfError> {
        self.be
            .reg_buffer(self.pd, len.max(64), Access::ALL)
            .map_err(|e| rig::backend_error("reg_mr", e))
    }

    /// The device's name and a check that it saw no core mistake.
    pub fn finish(mut self) -> Result<String, PerfError> {
        let events = self.be.take_events();
        if let Some(m) = super::core_mistakes(&events) {
            return Err(PerfError::run(m));
        }
        Ok(self.be.name().to_string())
    }
}

/// Posts one receive of `len` bytes at `off` in `buf` (publishing it).
pub fn post_recv(
    rq: &mut Rq<'static>,
    wr_id: u64,
    buf: &Buffer,
    off: usize,
    len: usize,
) -> Result<(), PerfError> {
    rq.post(
        wr_id,
        &[RSge {
            addr: buf.addr(off),
            length: len as u32,
            lkey: buf.key,
        }],
    )
    .map_err(|e| PerfError::run(format!("post receive: {e:?}")))
}

/// A deadline check for waits: fails after [`DEADLINE`] without progress.
#[derive(Debug)]
pub struct Deadline(Instant);

impl Deadline {
    /// Starts now.
    pub fn start() -> Self {
        Self(Instant::now())
    }

    /// Fails once [`DEADLINE`] has passed since the wait began. `spins` is
    /// the caller's count of consecutive loops without progress (0 on the
    /// first: the clock restarts there, so a long run that keeps making
    /// progress never times out); checked every 4096 of them.
    pub fn check(&mut self, spins: u64, what: &str) -> Result<(), PerfError> {
        if spins == 0 {
            self.0 = Instant::now();
        }
        if spins % 4096 == 4095 && self.0.elapsed() > DEADLINE {
            return Err(PerfError::run(format!(
                "no progress after {DEADLINE:?} waiting for {what}"
            )));
        }
        Ok(())
    }
}
