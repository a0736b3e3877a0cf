//! End-to-end extras for the emulated ConnectX (issue 5), over the core.
//!
//! UC send with invalidate, posted with the core's `Batch::send_inv`:
//! libmlx5 installs `wr_send_inv` on UC QPs (`fill_wr_builders_uc`; man
//! ibv_wr_post lists SEND_WITH_INV for UC, RC and XRC_SEND), so the
//! emulator executes it and the responder invalidates the key as on RC.

use mlx5dp::cq::WcOpcode;
use mlx5dp::prm::{CqeOpcode, WcStatus};
use mlx5dp::rq::Sge as RSge;
use mlx5dp::sq::BlueFlamePreferred;
use mlx5dp_setup::backend::{Backend, EmuBackend};
use mlx5dp_setup::emu::{Access, CqeSize, DeviceConfig, QpType};
use mlx5dp_tests::e2e::check::{check_all, Ledger};
use mlx5dp_tests::e2e::{Fabric, QpSpec, Queues};

type P = BlueFlamePreferred;

/// A UC send with invalidate with no receive posted (dropped: the key
/// stays valid), then one with a receive (delivered: the key is
/// invalidated and the receive completion says so).
fn uc_send_inv(be: EmuBackend) {
    let mut f = Fabric::new(be);
    let mut cq = f.cq(64, CqeSize::B64, None, false);
    let a = f.qp(QpSpec::new(QpType::Uc), &cq, Some(&cq));
    let b = f.qp(QpSpec::new(QpType::Uc), &cq, Some(&cq));
    f.connect(a.qpn, b.qpn);
    let buf = f.buffer(4096);
    let inv =
        f.be.reg_buffer(f.pd, 64, Access::ALL | Access::INVALIDATE)
            .expect("invalidatable MR");
    let mut q: Queues<P> = Queues::default();
    let mut ledger = Ledger::default();
    q.sqs.insert(a.qpn.0, f.send_queue::<P>(a));
    q.rqs.insert(b.qpn.0, f.recv_queue(b));

    let send_inv = |q: &mut Queues<P>, ledger: &mut Ledger, wr_id: u64, data: &[u8]| {
        let mut batch = q.sq(a.qpn).start();
        batch
            .send_inv(wr_id, inv.key)
            .expect("send_inv on UC")
            .signaled()
            .inline_data(data)
            .expect("inline");
        batch.complete();
        ledger.send(a.qpn.0, wr_id);
    };

    // No receive: UC has no RNR, the message is dropped, the sender
    // completes, the key stays valid.
    send_inv(&mut q, &mut ledger, 1, b"dropped");
    f.run_until(&mut [&mut cq], &mut q, |q| !q.retired.is_empty());
    let s = q.sent(a.qpn);
    assert_eq!((s[0].wr_id, s[0].status), (1, WcStatus::Success));
    assert!(
        f.be.with(|d| d.mr_valid(inv.key)),
        "a dropped message invalidated the key"
    );

    // A receive posted: the message lands and the key is invalidated.
    let rq = q.rq(b.qpn.0);
    rq.post(
        0x100,
        &[RSge {
            addr: buf.addr(0),
            length: 256,
            lkey: buf.key,
        }],
    )
    .expect("post recv");
    rq.commit();
    ledger.recv(b.qpn.0, 0x100);
    send_inv(&mut q, &mut ledger, 2, b"invalidate me");
    f.run_until(&mut [&mut cq], &mut q, |q| q.retired.len() >= 3);

    let s = q.sent(a.qpn);
    assert_eq!(
        (s[1].wr_id, s[1].status, s[1].opcode),
        (2, WcStatus::Success, WcOpcode::Send)
    );
    let r = q.received();
    assert_eq!(r.len(), 1);
    assert_eq!(
        (r[0].wr_id, r[0].status, r[0].cqe_opcode, r[0].len),
        (0x100, WcStatus::Success, CqeOpcode::RespSendInv, 13)
    );
    assert_eq!(buf.read(0, 13), b"invalidate me");
    assert!(
        !f.be.with(|d| d.mr_valid(inv.key)),
        "the key is still valid"
    );
    check_all(&ledger, &q.retired);
}

#[test]
fn uc_send_with_invalidate_step() {
    uc_send_inv(EmuBackend::step_mode(DeviceConfig::default()));
}

#[test]
fn uc_send_with_invalidate_thread() {
    uc_send_inv(EmuBackend::threaded(DeviceConfig::default()).expect("device thread"));
}
