//! End-to-end faults: every fault the emulated device models, seen
//! through the core's poll API as the error completion the hardware would
//! write (status and vendor syndrome), then flushes, with every wr_id
//! completing exactly once and nothing but flushes after the error.
//!
//! `fault_case` is shared (`mlx5dp_tests::scenarios::faults`) and runs on a
//! ConnectX in `hw_scenarios.rs` for the faults hardware makes by itself;
//! the tests defined below it here are emulator only.

use mlx5dp::prm::WcStatus;
use mlx5dp::rq::Sge as RSge;
use mlx5dp::sq::BlueFlamePreferred;
use mlx5dp_setup::backend::{Backend, EmuBackend};
use mlx5dp_setup::emu::{CqeSize, DeviceConfig, Fault, QpType, VendorSyndrome};
use mlx5dp_tests::e2e::{Fabric, QpSpec, Queues};
use mlx5dp_tests::scenarios::faults::{fault_case, Bad};

type P = BlueFlamePreferred;

fn step() -> EmuBackend {
    EmuBackend::step_mode(DeviceConfig::default())
}

macro_rules! fault_tests {
    ($($name:ident => $bad:expr),* $(,)?) => {$(
        #[test]
        fn $name() {
            fault_case(step(), $bad);
        }
    )*};
}

fault_tests! {
    fault_bad_lkey => Bad::Lkey,
    fault_sge_out_of_bounds => Bad::Bounds,
    fault_bad_rkey => Bad::Rkey,
    fault_remote_read_out_of_bounds => Bad::ReadBounds,
    fault_qp_without_remote_atomic => Bad::NoQpAccess,
    fault_misaligned_atomic => Bad::Misaligned,
    fault_receive_too_small => Bad::RecvTooSmall,
    fault_rnr_retries_exhausted => Bad::Rnr,
    fault_peer_in_error => Bad::PeerDown,
    fault_injected => Bad::Injected,
    fault_read_into_memory_without_local_write => Bad::LocalNoWrite,
    fault_local_invalidate_unknown_key => Bad::LocalInvBadKey,
}

#[test]
fn faults_on_the_device_thread() {
    for bad in [Bad::Lkey, Bad::Rkey, Bad::RecvTooSmall, Bad::Injected] {
        fault_case(
            EmuBackend::threaded(DeviceConfig::default()).expect("thread"),
            bad,
        );
    }
}

/// UD: a datagram beyond the port MTU fails locally (LOCAL_LENGTH_ERR).
/// Emulator only: the vendor syndrome (`scenarios::ud` checks the status
/// on every backend).
#[test]
fn fault_ud_beyond_mtu() {
    let mut f = Fabric::new(step());
    let mut cq = f.cq(64, CqeSize::B64, None, false);
    let mut spec = QpSpec::new(QpType::Ud);
    spec.max_send_sge = 2;
    let a = f.qp(spec, &cq, Some(&cq));
    f.ud_up(a.qpn, 1);
    let buf = f.buffer(8192);
    let mut q: Queues<P> = Queues::default();
    q.sqs.insert(a.qpn.0, f.send_queue(a));
    let av =
        f.be.create_ah(f.pd, mlx5dp_setup::backend::AhAttr::default())
            .expect("create_ah");
    let mut batch = q.sq(a.qpn).start();
    batch
        .send(1)
        .expect("send")
        .signaled()
        .ud_addr(&av, a.qpn.0, 1)
        .expect("av")
        .sge(buf.key, buf.addr(0), 5000)
        .expect("sge");
    batch
        .send(2)
        .expect("send")
        .signaled()
        .ud_addr(&av, a.qpn.0, 1)
        .expect("av")
        .inline_data(b"x")
        .expect("inline");
    batch.complete();
    f.run_for(&mut [&mut cq], &mut q, 2);
    let s = q.sent(a.qpn);
    assert_eq!(
        (s[0].status, s[0].vendor_err as u8),
        (WcStatus::LocLenErr, VendorSyndrome::Length as u8)
    );
    assert_eq!(s[1].status, WcStatus::WrFlushErr);
}

/// RNR with infinite retries: the send waits until a receive is posted.
/// Emulator only: the RNR is injected, and step mode.
#[test]
fn fault_rnr_then_receive_posted() {
    let mut f = Fabric::new(step());
    let mut cq = f.cq(64, CqeSize::B64, None, false);
    let a = f.qp(QpSpec::new(QpType::Rc), &cq, Some(&cq));
    let b = f.qp(QpSpec::new(QpType::Rc), &cq, Some(&cq));
    f.connect(a.qpn, b.qpn);
    let buf = f.buffer(8192);
    let mut q: Queues<P> = Queues::default();
    q.sqs.insert(a.qpn.0, f.send_queue(a));
    q.rqs.insert(b.qpn.0, f.recv_queue(b));
    f.be.inject(Fault::Rnr {
        qpn: b.qpn,
        count: 3,
    })
    .expect("inject");
    let mut batch = q.sq(a.qpn).start();
    batch
        .send(1)
        .expect("send")
        .signaled()
        .inline_data(b"patience")
        .expect("inline");
    batch.complete();
    f.settle(&mut [&mut cq], &mut q, 5);
    assert!(q.polled.is_empty(), "no receive posted: the send waits");
    q.rq(b.qpn.0)
        .post(
            9,
            &[RSge {
                addr: buf.addr(0),
                length: 64,
                lkey: buf.key,
            }],
        )
        .expect("recv");
    q.rq(b.qpn.0).commit();
    f.run_for(&mut [&mut cq], &mut q, 2);
    assert!(q.polled.iter().all(|p| p.status == WcStatus::Success));
    assert_eq!(buf.read(0, 8), b"patience");
}

/// Delayed completions arrive late and in order; a stalled QP runs again
/// after `resume`. Emulator only: injected delays and stalls.
#[test]
fn fault_delay_and_stall() {
    let mut f = Fabric::new(step());
    let mut cq = f.cq(64, CqeSize::B64, None, false);
    let a = f.qp(QpSpec::new(QpType::Rc), &cq, Some(&cq));
    let b = f.qp(QpSpec::new(QpType::Rc), &cq, Some(&cq));
    f.connect(a.qpn, b.qpn);
    let buf = f.buffer(8192);
    let mut q: Queues<P> = Queues::default();
    q.sqs.insert(a.qpn.0, f.send_queue(a));
    f.be.inject(Fault::DelayCompletions {
        cqn: mlx5dp_setup::emu::Cqn(cq.cqn()),
        steps: 5,
    })
    .expect("inject");
    let post = |q: &mut Queues<P>, wr: u64| {
        let mut batch = q.sq(a.qpn).start();
        batch
            .rdma_write(wr, buf.key, buf.addr(64 * wr as usize))
            .expect("write")
            .signaled()
            .inline_data(&wr.to_ne_bytes())
            .expect("inline");
        batch.complete();
    };
    post(&mut q, 1);
    f.settle(&mut [&mut cq], &mut q, 3);
    assert!(q.polled.is_empty(), "delayed");
    assert_eq!(
        buf.read(64, 8),
        1u64.to_ne_bytes(),
        "executed, not completed"
    );
    f.settle(&mut [&mut cq], &mut q, 4);
    assert_eq!(q.polled.len(), 1, "released after the delay");
    f.be.inject(Fault::DelayCompletions {
        cqn: mlx5dp_setup::emu::Cqn(cq.cqn()),
        steps: 0,
    })
    .expect("inject");
    f.be.inject(Fault::StallQp { qpn: a.qpn }).expect("inject");
    post(&mut q, 2);
    f.settle(&mut [&mut cq], &mut q, 5);
    assert_eq!(buf.read(128, 8), [0; 8], "stalled: not executed");
    f.be.resume();
    // The doorbell was consumed while stalled: ring it again with a NOP,
    // as a stalled engine would pick up on its next doorbell.
    let mut batch = q.sq(a.qpn).start();
    batch.nop(3).expect("nop").signaled().post().expect("post");
    batch.complete();
    f.run_until(&mut [&mut cq], &mut q, |q| q.polled.len() >= 3);
    assert_eq!(buf.read(128, 8), 2u64.to_ne_bytes());
    assert!(q.polled.iter().all(|p| p.status == WcStatus::Success));
}
