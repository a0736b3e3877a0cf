//! Faults caused by one work request (bad keys, bounds, access rights,
//! lengths, RNR, a peer in error), seen through the core's poll API as the
//! error completion, then flushes, every wr_id completing exactly once:
//! on every backend (the emulator also injects faults and checks its
//! vendor syndromes).

use crate::e2e::check::{check_all, Ledger};
use crate::e2e::{pattern, Fabric, QpSpec, Queues};
use mlx5dp::prm::{Syndrome, WcStatus};
use mlx5dp::rq::Sge as RSge;
use mlx5dp::sq::{Batch, BlueFlamePreferred, PostError};
use mlx5dp_setup::backend::{Backend, Buffer, ConnectAttr, QpHandle};
use mlx5dp_setup::emu::{Access, CqeSize, EmuEvent, Fault, QpState, QpType, VendorSyndrome};

type P = BlueFlamePreferred;

/// The faults, each caused by one work request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bad {
    /// Send gathering through an unknown lkey.
    Lkey,
    /// Send SGE past the end of its memory region.
    Bounds,
    /// RDMA write to an unknown rkey.
    Rkey,
    /// RDMA read past the end of the remote region.
    ReadBounds,
    /// Atomic on a QP that does not grant remote atomics.
    NoQpAccess,
    /// Atomic at an address that is not 8-byte aligned.
    Misaligned,
    /// Send larger than the receive WQE.
    RecvTooSmall,
    /// Send with no receive posted, RNR retries finite.
    Rnr,
    /// The peer QP is in the error state: transport retries exhausted.
    PeerDown,
    /// An injected failure of the next WQE.
    Injected,
    /// RDMA read into memory without local write access.
    LocalNoWrite,
    /// Local invalidate of a key that does not exist.
    LocalInvBadKey,
}

impl Bad {
    /// The faults a ConnectX produces on its own, with the status IBA
    /// gives them. `Injected` needs the emulator's fault injection;
    /// `LocalInvBadKey`'s status on mlx5 is not documented.
    pub const ON_HARDWARE: [Bad; 10] = [
        Bad::Lkey,
        Bad::Bounds,
        Bad::Rkey,
        Bad::ReadBounds,
        Bad::NoQpAccess,
        Bad::Misaligned,
        Bad::RecvTooSmall,
        Bad::Rnr,
        Bad::PeerDown,
        Bad::LocalNoWrite,
    ];
}

/// The status of the error completion `bad` causes, and the emulator's
/// vendor syndrome for it (checked on the emulated device only: the
/// hardware's are not public).
pub fn expected(bad: Bad) -> (WcStatus, u8) {
    use VendorSyndrome as V;
    match bad {
        Bad::Lkey => (WcStatus::LocProtErr, V::BadKey as u8),
        Bad::Bounds => (WcStatus::LocProtErr, V::Bounds as u8),
        Bad::Rkey => (WcStatus::RemAccessErr, V::BadKey as u8),
        Bad::ReadBounds => (WcStatus::RemAccessErr, V::Bounds as u8),
        Bad::NoQpAccess => (WcStatus::RemInvReqErr, V::AccessRight as u8),
        Bad::Misaligned => (WcStatus::RemInvReqErr, V::Misaligned as u8),
        Bad::RecvTooSmall => (WcStatus::RemInvReqErr, V::Length as u8),
        Bad::Rnr => (WcStatus::RnrRetryExcErr, V::Rnr as u8),
        Bad::PeerDown => (WcStatus::RetryExcErr, V::Transport as u8),
        Bad::Injected => (WcStatus::LocProtErr, V::Injected as u8),
        Bad::LocalNoWrite => (WcStatus::LocProtErr, V::AccessRight as u8),
        Bad::LocalInvBadKey => (WcStatus::MwBindErr, V::BadKey as u8),
    }
}

struct Bufs {
    local: Buffer,
    remote: Buffer,
    read_only: Buffer,
}

fn post_bad(
    b: &mut Batch<'_, 'static, P>,
    bad: Bad,
    wr_id: u64,
    m: &Bufs,
) -> Result<(), PostError> {
    let (l, r) = (&m.local, &m.remote);
    match bad {
        Bad::Lkey => b.send(wr_id)?.signaled().sge(0x00de_ad00, l.addr(0), 64),
        Bad::Bounds => b
            .send(wr_id)?
            .signaled()
            .sge(l.key, l.addr(l.len() - 16), 64),
        Bad::Rkey => {
            b.rdma_write(wr_id, 0x00be_ef00, r.addr(0))?
                .signaled()
                .sge(l.key, l.addr(0), 64)
        }
        Bad::ReadBounds => b
            .rdma_read(wr_id, r.key, r.addr(r.len() - 8))?
            .signaled()
            .sge(l.key, l.addr(0), 64),
        Bad::NoQpAccess | Bad::Injected => {
            if bad == Bad::Injected {
                b.rdma_write(wr_id, r.key, r.addr(0))?
                    .signaled()
                    .sge(l.key, l.addr(0), 64)
            } else {
                b.atomic_fetch_add(wr_id, r.key, r.addr(0x100), 1)?
                    .signaled()
                    .sge(l.key, l.addr(0x100), 8)
            }
        }
        Bad::Misaligned => b
            .atomic_fetch_add(wr_id, r.key, r.addr(0x104), 1)?
            .signaled()
            .sge(l.key, l.addr(0x100), 8),
        Bad::RecvTooSmall | Bad::Rnr | Bad::PeerDown => {
            b.send(wr_id)?.signaled().sge(l.key, l.addr(0), 512)
        }
        Bad::LocalNoWrite => b.rdma_read(wr_id, r.key, r.addr(0))?.signaled().sge(
            m.read_only.key,
            m.read_only.addr(0),
            64,
        ),
        Bad::LocalInvBadKey => b.local_inv(wr_id, 0x00ab_cd00)?.signaled().post(),
    }
}

/// Good work requests: RDMA writes (no receive needed), signalled or not.
fn post_good(b: &mut Batch<'_, 'static, P>, wr_id: u64, signaled: bool, m: &Bufs) {
    b.rdma_write(
        wr_id,
        m.remote.key,
        m.remote.addr(0x1000 + 64 * (wr_id as usize % 32)),
    )
    .expect("write")
    .signaled_if(signaled)
    .sge(m.local.key, m.local.addr(0), 64)
    .expect("sge");
}

/// One fault in the middle of a batch on an RC connection: good work
/// requests complete before it, the error completion carries the status
/// (and, on the emulator, the vendor syndrome) `expected` says, everything
/// after it is flushed (posts after the error too), the QP ends in ERR,
/// and every work request completes exactly once.
pub fn fault_case<B: Backend>(be: B, bad: Bad) {
    let mut f = Fabric::new(be);
    let mut cq_a = f.cq(256, CqeSize::B64, None, false);
    let mut cq_b = f.cq(256, CqeSize::B64, None, false);
    let a: &'static QpHandle = f.qp(QpSpec::new(QpType::Rc), &cq_a, Some(&cq_a));
    let b: &'static QpHandle = f.qp(QpSpec::new(QpType::Rc), &cq_b, Some(&cq_b));
    let attr = ConnectAttr {
        access: if bad == Bad::NoQpAccess {
            Access::REMOTE_WRITE | Access::REMOTE_READ
        } else {
            Access::ALL
        },
        retry_cnt: 7,
        rnr_retry: if bad == Bad::Rnr { 3 } else { 7 },
    };
    f.be.connect(a.qpn, b.qpn, attr).expect("connect");
    let m = Bufs {
        local: f.buffer(1 << 14),
        remote: f.buffer(1 << 14),
        read_only: f
            .be
            .reg_buffer(f.pd, 4096, Access::REMOTE_READ)
            .expect("read-only MR"),
    };
    m.local.write(0, &pattern(1, 4096));
    let mut q: Queues<P> = Queues::default();
    q.sqs.insert(a.qpn.0, f.send_queue(a));
    q.rqs.insert(b.qpn.0, f.recv_queue(b));
    q.rqs.insert(a.qpn.0, f.recv_queue(a));
    let mut ledger = Ledger::default();
    // Receives on both sides: the responder's get flushed when a remote
    // fault moves it to error; the requester's when it does.
    let recv_len = if bad == Bad::RecvTooSmall { 256 } else { 4096 };
    let recvs = if bad == Bad::Rnr { 0 } else { 4 };
    for (qp, n) in [(b, recvs), (a, 2)] {
        let rq = q.rq(qp.qpn.0);
        for i in 0..n {
            let wr = 0x1000 * u64::from(qp.qpn.0) + i;
            rq.post(
                wr,
                &[RSge {
                    addr: m.remote.addr(0x2000),
                    length: recv_len,
                    lkey: m.remote.key,
                }],
            )
            .expect("post recv");
            ledger.recv(qp.qpn.0, wr);
        }
        rq.commit();
    }

    // Phase 1: good work requests, completed.
    {
        let mut batch = q.sq(a.qpn).start();
        for wr in 1..=4 {
            post_good(&mut batch, wr, wr != 4 && wr % 2 == 1, &m);
            ledger.send(a.qpn.0, wr);
        }
        // A signalled last one retires the unsignalled before it.
        post_good(&mut batch, 5, true, &m);
        ledger.send(a.qpn.0, 5);
        batch.complete();
    }
    let n = ledger.len();
    let initial_recvs = n - 5;
    f.run_until(&mut [&mut cq_a, &mut cq_b], &mut q, |q| {
        q.retired.len() + initial_recvs >= n
    });

    // Phase 2: the fault, in the middle of a batch.
    match bad {
        Bad::PeerDown => f.be.to_error(b.qpn).expect("peer to error"),
        Bad::Injected => {
            f.be.inject(Fault::FailWqe {
                qpn: a.qpn,
                skip: 1,
                syndrome: Syndrome::LocalProt,
            })
            .expect("inject")
        }
        _ => {}
    }
    {
        let mut batch = q.sq(a.qpn).start();
        // (Against a peer in error every work request fails: no good one first.)
        if bad != Bad::PeerDown {
            post_good(&mut batch, 6, false, &m);
            ledger.send(a.qpn.0, 6);
        }
        post_bad(&mut batch, bad, 7, &m).expect("post the bad work request");
        ledger.send(a.qpn.0, 7);
        for wr in 8..=11 {
            post_good(&mut batch, wr, wr >= 10, &m);
            ledger.send(a.qpn.0, wr);
        }
        batch.complete();
    }
    f.run_until(&mut [&mut cq_a, &mut cq_b], &mut q, |q| {
        q.polled.iter().any(|p| p.wr_id == 11 && p.qpn == a.qpn.0)
    });
    // Phase 3: posts after the error are flushed too.
    {
        let mut batch = q.sq(a.qpn).start();
        for wr in 12..=14 {
            post_good(&mut batch, wr, wr != 13, &m);
            ledger.send(a.qpn.0, wr);
        }
        batch.complete();
    }
    // Everything left on the peer is flushed once it is in error.
    if f.be.qp_state(b.qpn) != Some(QpState::Err) {
        f.be.to_error(b.qpn).expect("peer to error");
    }
    let total = ledger.len();
    f.run_until(&mut [&mut cq_a, &mut cq_b], &mut q, |q| {
        q.retired.len() >= total
    });

    // The error completion, as the core reports it.
    let (status, vendor) = expected(bad);
    let sent = q.sent(a.qpn);
    let err = sent
        .iter()
        .find(|p| p.wr_id == 7)
        .unwrap_or_else(|| panic!("{bad:?}: no completion for the bad WR: {sent:?}"));
    assert_eq!(err.status, status, "{bad:?}: {err:?}");
    if f.be.emulated() {
        assert_eq!(err.vendor_err as u8, vendor, "{bad:?}: {err:?}");
    }
    assert_eq!(err.syndrome.map(|s| s.wc_status()), Some(status));
    // Before it: success; after it: flushes only (and each exactly once).
    for r in q.retired.iter().filter(|r| r.requester) {
        match r.wr_id {
            1..=6 => assert_eq!(r.status, WcStatus::Success, "{bad:?}: {r:?}"),
            7 => assert_eq!(r.status, status),
            _ => assert_eq!(r.status, WcStatus::WrFlushErr, "{bad:?}: {r:?}"),
        }
    }
    if bad == Bad::RecvTooSmall {
        let resp = q
            .received()
            .into_iter()
            .find(|p| p.qpn == b.qpn.0 && p.status != WcStatus::WrFlushErr)
            .cloned()
            .expect("the responder's error completion");
        assert_eq!(resp.status, WcStatus::LocLenErr);
        if f.be.emulated() {
            assert_eq!(resp.vendor_err as u8, VendorSyndrome::Length as u8);
        }
    }
    assert_eq!(f.be.qp_state(a.qpn), Some(QpState::Err));
    check_all(&ledger, &q.retired);
    let log = cq_a.error_log();
    assert_eq!(log.first.map(|e| e.status()), Some(status), "{bad:?}");
    assert!(log.flushes >= 8, "{bad:?}: flushes {}", log.flushes);
    // The responder's asynchronous event (the emulator reports it; the
    // verbs backend does not read the async event channel yet).
    if f.be.emulated()
        && matches!(
            bad,
            Bad::Rkey | Bad::ReadBounds | Bad::NoQpAccess | Bad::Misaligned
        )
    {
        assert!(f
            .be
            .take_events()
            .iter()
            .any(|e| matches!(e, EmuEvent::QpAccessErr { qpn } if *qpn == b.qpn)));
    }
}
