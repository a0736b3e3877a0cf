//! A hardware scenario: RC loopback through the core.
//!
//! Two RC QPs on one port of one device, connected to each other; the
//! core's `SendQueue`, `Rq` and `Cq` are built on the raw parts
//! `mlx5dv_init_obj` handed out, and a message with an SGE and inline data
//! goes from one to the other. It exercises the whole seam (device, caps,
//! PD, MR, CQ, QP, state transitions, raw parts, doorbell/BlueFlame, CQE
//! polling) and is what `MLX5DP_DEVICE=mlx5_0` runs first. Without a device
//! it returns [`VerbsError::NoDevice`] at once.

use super::device::Context;
use super::resources::{ConnectOptions, Cq, CqOptions, Mr, Pd, Qp, QpKind, QpOn, QpOptions};
use super::VerbsError;
use mlx5dp::cq::{self, LookupError, RecvRetired, SendRetired, WorkQueues, WqRef};
use mlx5dp::prm::WcStatus;
use mlx5dp::rq::{Rq, Sge as RSge};
use mlx5dp::sq::{BlueFlamePreferred, SendQueue, SqShadowEntry, Wqebb};
use std::time::{Duration, Instant};

/// What the scenario saw.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SmokeReport {
    /// Device name.
    pub device: String,
    /// Firmware version.
    pub fw_ver: String,
    /// Bytes the receiver got.
    pub received: u32,
    /// Whether they were the bytes sent.
    pub data_ok: bool,
    /// BlueFlame half size the SQ got (0: doorbell only).
    pub bf_size: u32,
}

/// Why the scenario failed.
#[derive(Debug)]
pub enum SmokeError {
    /// A verbs call failed (including no device).
    Verbs(VerbsError),
    /// The core refused the parts or a post, or a completion was wrong.
    Core(String),
    /// No completion within the deadline.
    Timeout,
}

impl From<VerbsError> for SmokeError {
    fn from(e: VerbsError) -> Self {
        SmokeError::Verbs(e)
    }
}

impl From<super::PartsError> for SmokeError {
    fn from(e: super::PartsError) -> Self {
        SmokeError::Verbs(e.into())
    }
}

impl std::fmt::Display for SmokeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SmokeError::Verbs(e) => write!(f, "{e}"),
            SmokeError::Core(e) => write!(f, "core: {e}"),
            SmokeError::Timeout => f.write_str("no completion within 2 s"),
        }
    }
}

impl std::error::Error for SmokeError {}

/// The sender's SQ and the receiver's RQ, as the CQ poller retires them.
struct Pair<'a> {
    sq_qpn: u32,
    sq: SendQueue<'a, BlueFlamePreferred>,
    rq_qpn: u32,
    rq: Rq<'a>,
}

impl WorkQueues for Pair<'_> {
    fn retire_send(
        &mut self,
        wq: WqRef,
        wqe_counter: u16,
        _status: WcStatus,
    ) -> Result<SendRetired, LookupError> {
        if wq.qpn != self.sq_qpn {
            return Err(LookupError::UnknownQueue);
        }
        let r = self
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
        if wq.qpn != self.rq_qpn {
            return Err(LookupError::UnknownQueue);
        }
        let wr_id = self.rq.retire(wqe_counter, status != WcStatus::Success)?;
        Ok(RecvRetired {
            wr_id,
            rx_csum_valid: false,
        })
    }
}

/// Runs the RC loopback on the device `MLX5DP_DEVICE` names (default: the
/// first), port 1, GID index 0 (`MLX5DP_GID_INDEX` to change it).
pub fn rc_loopback() -> Result<SmokeReport, SmokeError> {
    let ctx = Context::open_from_env()?;
    let caps = ctx.query_caps()?;
    let gid_index = std::env::var("MLX5DP_GID_INDEX")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let port = ctx.query_port(1, gid_index)?;
    let pd = Pd::alloc(&ctx)?;
    let access = ConnectOptions::default().access;
    let mr = Mr::alloc(&pd, 1 << 16, access)?;
    let cq_a = Cq::create(&ctx, CqOptions::new(64))?;
    let cq_b = Cq::create(&ctx, CqOptions::new(64))?;
    let on_a = QpOn {
        send_cq: Some(&cq_a),
        recv_cq: Some(&cq_a),
        ..QpOn::default()
    };
    let on_b = QpOn {
        send_cq: Some(&cq_b),
        recv_cq: Some(&cq_b),
        ..QpOn::default()
    };
    let mut a = Qp::create(&ctx, &pd, QpOptions::new(QpKind::Rc), on_a, port)?;
    let mut b = Qp::create(&ctx, &pd, QpOptions::new(QpKind::Rc), on_b, port)?;
    let (ea, eb) = (a.endpoint(0x100), b.endpoint(0x200));
    a.connect(eb, ea.psn, ConnectOptions::default())?;
    b.connect(ea, eb.psn, ConnectOptions::default())?;

    // The core's queues on the raw parts.
    let raw = a.sq_raw_parts()?;
    let bf_size = raw.bf_buf_size;
    let n = raw.wqe_cnt as usize;
    let mut shadow = vec![SqShadowEntry::EMPTY; n];
    let mut staging = vec![Wqebb::ZERO; n.max(16)];
    // SAFETY: the parts are this QP's (kept alive by `a`, which outlives
    // the queue: it is declared earlier in this function); no other
    // software posts to the QP; the config is the QP's own.
    let sq = unsafe { SendQueue::new(raw, a.sq_config(&caps)?, &mut shadow, &mut staging) }
        .map_err(|e| SmokeError::Core(format!("SendQueue::new: {e:?}")))?;
    // SAFETY: called once for `b`; nothing else posts receives to it.
    let rp = unsafe { b.recv_parts() }?;
    let mut wrid = vec![0u64; rp.size.entries() as usize];
    let rq = Rq::new(rp.ring, rp.size, rp.wqe_shift, rp.dbrec, &mut wrid, 0)
        .map_err(|e| SmokeError::Core(format!("Rq::new: {e:?}")))?;
    // SAFETY: the CQs' memory is kept alive by `cq_a`/`cq_b`, which outlive
    // the core's CQs (declared earlier); only these `Cq`s consume them.
    let mut ca =
        unsafe { cq::Cq::from_raw_parts(cq_a.raw_parts()?, cq_a.config(&caps, false)?, 0) }
            .map_err(|e| SmokeError::Core(format!("Cq::from_raw_parts: {e:?}")))?;
    // SAFETY: as above, for `cq_b`.
    let mut cb =
        unsafe { cq::Cq::from_raw_parts(cq_b.raw_parts()?, cq_b.config(&caps, false)?, 0) }
            .map_err(|e| SmokeError::Core(format!("Cq::from_raw_parts: {e:?}")))?;
    let mut pair = Pair {
        sq_qpn: a.qpn(),
        sq,
        rq_qpn: b.qpn(),
        rq,
    };

    // One receive of 4 KiB at 32 KiB; one send of 1000 bytes at 0.
    let msg: Vec<u8> = (0..1000u32).map(|i| (i * 7 + 3) as u8).collect();
    mr.write(0, &msg);
    let sge = RSge {
        addr: mr.addr(32 << 10),
        length: 4096,
        lkey: mr.lkey(),
    };
    pair.rq
        .post(0xb0, &[sge])
        .map_err(|e| SmokeError::Core(format!("post recv: {e:?}")))?;
    pair.rq.commit();
    {
        let mut batch = pair.sq.start();
        batch
            .send(0xa0)
            .map_err(|e| SmokeError::Core(format!("send: {e:?}")))?
            .signaled()
            .sge(mr.lkey(), mr.addr(0), msg.len() as u32)
            .map_err(|e| SmokeError::Core(format!("sge: {e:?}")))?;
        batch.complete();
    }

    let deadline = Instant::now() + Duration::from_secs(2);
    let (mut sent, mut received) = (None, None);
    while sent.is_none() || received.is_none() {
        if Instant::now() > deadline {
            return Err(SmokeError::Timeout);
        }
        let mut bad = None;
        ca.poll(&mut pair, 8, |c| {
            if c.is_error() {
                bad = Some(format!("send completion {:?}", c.status()));
            }
            sent = Some(c.wr_id());
        })
        .map_err(|e| SmokeError::Core(format!("poll: {e:?}")))?;
        cb.poll(&mut pair, 8, |c| {
            if c.is_error() {
                bad = Some(format!("receive completion {:?}", c.status()));
            }
            received = Some(c.byte_len());
        })
        .map_err(|e| SmokeError::Core(format!("poll: {e:?}")))?;
        if let Some(b) = bad {
            return Err(SmokeError::Core(b));
        }
    }
    let got = received.unwrap_or(0);
    Ok(SmokeReport {
        device: ctx.name().to_owned(),
        fw_ver: caps.fw_ver,
        received: got,
        data_ok: got as usize == msg.len() && mr.read(32 << 10, msg.len()) == msg,
        bf_size,
    })
}
