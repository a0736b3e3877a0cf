//! End-to-end over the core and a backend: RC send/receive with SGE lists
//! and inline data, RDMA write / read / write-with-immediate, atomics,
//! UD with an address vector and Q_Key, raw Ethernet loopback, every
//! opcode × QP type, batches, BlueFlame policies and ring wraps.
//!
//! The scenarios that run on every backend live in
//! `mlx5dp_tests::scenarios::rc` (and run on a ConnectX in
//! `hw_scenarios.rs`); here they run on the emulated device in step mode,
//! and the main ones with the device on its own thread too. The tests
//! defined here are emulator only, each saying why.

use mlx5dp::cq::WcOpcode;
use mlx5dp::prm::{Av, WcStatus};
use mlx5dp::rq::Sge as RSge;
use mlx5dp::sq::{
    BlueFlameInline, BlueFlamePreferred, DoorbellOnly, DoorbellPolicy, PostError, QpType as CoreQp,
};
use mlx5dp_setup::backend::{AhAttr, Backend, EmuBackend};
use mlx5dp_setup::emu::device::FlowRule;
use mlx5dp_setup::emu::{Access, CqeSize, DeviceConfig, DropReason, EmuEvent, QpType, RqInit};
use mlx5dp_tests::e2e::check::{check_all, Ledger};
use mlx5dp_tests::e2e::{pattern, Fabric, QpSpec, Queues};
use mlx5dp_tests::scenarios::no_core_mistakes;
use mlx5dp_tests::scenarios::rc::{
    origin_regular_without_compression, raw_loopback, rc_send_recv, rdma_and_atomics, wraps,
};

fn step() -> EmuBackend {
    EmuBackend::step_mode(DeviceConfig::default())
}

fn threaded() -> EmuBackend {
    EmuBackend::threaded(DeviceConfig::default()).expect("device thread")
}

#[test]
fn rc_send_recv_step() {
    rc_send_recv(step());
}

#[test]
fn rc_send_recv_thread() {
    rc_send_recv(threaded());
}

#[test]
fn rdma_and_atomics_step() {
    rdma_and_atomics(step());
}

#[test]
fn rdma_and_atomics_thread() {
    rdma_and_atomics(threaded());
}

// ---------------------------------------------------------------------------
// UD with an address vector and a Q_Key
// ---------------------------------------------------------------------------

/// Emulator only: the dropped datagram is seen through the emulator's
/// event (the shared UD scenarios, `mlx5dp_tests::scenarios::ud`, run on
/// hardware too).
fn ud_send<B: Backend>(be: B) {
    let mut f = Fabric::new(be);
    let mut cq = f.cq(128, CqeSize::B64, None, false);
    let a = f.qp(QpSpec::new(QpType::Ud), &cq, Some(&cq));
    let b = f.qp(QpSpec::new(QpType::Ud), &cq, Some(&cq));
    f.ud_up(a.qpn, 0x1111);
    f.ud_up(b.qpn, 0x2222);
    let buf = f.buffer(1 << 14);
    let mut q: Queues<BlueFlamePreferred> = Queues::default();
    q.sqs.insert(a.qpn.0, f.send_queue(a));
    q.rqs.insert(b.qpn.0, f.recv_queue(b));
    let mut ledger = Ledger::default();
    for i in 0..2u64 {
        q.rq(b.qpn.0)
            .post(
                0x50 + i,
                &[RSge {
                    addr: buf.addr(0x1000 * (i as usize + 1)),
                    length: 40 + 1024,
                    lkey: buf.key,
                }],
            )
            .expect("post recv");
        ledger.recv(b.qpn.0, 0x50 + i);
    }
    q.rq(b.qpn.0).commit();
    let msg = pattern(3, 700);
    buf.write(0, &msg);
    let av = f.be.create_ah(f.pd, AhAttr::default()).expect("create_ah");
    {
        let sq = q.sq(a.qpn);
        let mut batch = sq.start();
        // Right Q_Key: delivered.
        batch
            .send(1)
            .expect("send")
            .signaled()
            .ud_addr(&av, b.qpn.0, 0x2222)
            .expect("ud_addr")
            .sge(buf.key, buf.addr(0), 700)
            .expect("sge");
        // Wrong Q_Key: dropped silently (the sender still succeeds).
        batch
            .send(2)
            .expect("send")
            .signaled()
            .ud_addr(&av, b.qpn.0, 0x3333)
            .expect("ud_addr")
            .inline_data(b"dropped")
            .expect("inline");
        // Right Q_Key, inline.
        batch
            .send_imm(3, 42)
            .expect("send")
            .signaled()
            .ud_addr(&av, b.qpn.0, 0x2222)
            .expect("ud_addr")
            .inline_data(b"hello ud")
            .expect("inline");
        batch.complete();
        for i in 1..=3 {
            ledger.send(a.qpn.0, i);
        }
    }
    f.run_until(&mut [&mut cq], &mut q, |q| q.retired.len() >= 5);
    let r = q.received();
    assert_eq!(r.len(), 2);
    assert_eq!((r[0].wr_id, r[0].len, r[0].src_qp), (0x50, 740, a.qpn.0));
    assert_eq!(buf.read(0x1000 + 40, 700), msg);
    assert_eq!((r[1].wr_id, r[1].len, r[1].imm), (0x51, 48, Some(42)));
    assert_eq!(buf.read(0x2000 + 40, 8), b"hello ud");
    assert!(f.be.take_events().iter().any(|e| matches!(
        e,
        EmuEvent::DatagramDropped {
            reason: DropReason::QKey,
            ..
        }
    )));
    check_all(&ledger, &q.retired);
}

#[test]
fn ud_send_with_av_and_qkey() {
    ud_send(step());
}

// ---------------------------------------------------------------------------
// Raw Ethernet loopback
// ---------------------------------------------------------------------------

#[test]
fn raw_ethernet_loopback_step() {
    raw_loopback(step());
}

#[test]
fn raw_ethernet_loopback_thread() {
    raw_loopback(threaded());
}

// ---------------------------------------------------------------------------
// Every opcode × QP type
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Opx {
    Send,
    SendImm,
    SendInv,
    Write,
    WriteImm,
    Read,
    Cs,
    Fa,
    MaskedCs32,
    MaskedCs64,
    MaskedFa32,
    MaskedFa64,
    Nop,
}

const ALL_OPS: [Opx; 13] = [
    Opx::Send,
    Opx::SendImm,
    Opx::SendInv,
    Opx::Write,
    Opx::WriteImm,
    Opx::Read,
    Opx::Cs,
    Opx::Fa,
    Opx::MaskedCs32,
    Opx::MaskedCs64,
    Opx::MaskedFa32,
    Opx::MaskedFa64,
    Opx::Nop,
];

/// libmlx5's `MLX5_SUPPORTED_SEND_OPS_FLAGS_*` plus NOP.
fn allowed(t: CoreQp, op: Opx) -> bool {
    use Opx::*;
    match op {
        Send | Nop => true,
        SendImm => t != CoreQp::RawPacket,
        SendInv | Write | WriteImm => matches!(t, CoreQp::Rc | CoreQp::Uc | CoreQp::Xrc),
        Read | Cs | Fa | MaskedCs32 | MaskedCs64 | MaskedFa32 | MaskedFa64 => {
            matches!(t, CoreQp::Rc | CoreQp::Xrc)
        }
    }
}

fn expected_wc(op: Opx) -> Option<WcOpcode> {
    use Opx::*;
    match op {
        Send | SendImm | SendInv => Some(WcOpcode::Send),
        Write | WriteImm => Some(WcOpcode::RdmaWrite),
        Read => Some(WcOpcode::RdmaRead),
        Cs => Some(WcOpcode::CompSwap),
        Fa => Some(WcOpcode::FetchAdd),
        // Masked atomics and NOP: the CQE's opcode has no ibv_wc value.
        _ => None,
    }
}

/// Posts `op` on a queue of type `t`; `Ok(false)` when the core refused it
/// as unsupported.
#[allow(clippy::too_many_arguments)]
fn post_op<P: DoorbellPolicy>(
    sq: &mut mlx5dp::sq::SendQueue<'static, P>,
    t: CoreQp,
    op: Opx,
    wr_id: u64,
    buf: &mlx5dp_setup::backend::Buffer,
    rkey: u32,
    av: &Av,
    dest: u32,
    xrc_srqn: u32,
    inv_key: u32,
) -> Result<bool, PostError> {
    let mut b = sq.start();
    let raddr = buf.addr(0x8000 + 64 * (wr_id as usize % 64));
    let wr = match op {
        Opx::Send => b.send(wr_id),
        Opx::SendImm => b.send_imm(wr_id, 5),
        Opx::SendInv => b.send_inv(wr_id, inv_key),
        Opx::Write => b.rdma_write(wr_id, rkey, raddr),
        Opx::WriteImm => b.rdma_write_imm(wr_id, rkey, raddr, 6),
        Opx::Read => b.rdma_read(wr_id, rkey, raddr),
        Opx::Cs => b.atomic_cmp_swp(wr_id, rkey, raddr, 0, 1),
        Opx::Fa => b.atomic_fetch_add(wr_id, rkey, raddr, 1),
        Opx::MaskedCs32 => b.masked_cmp_swp_u32(wr_id, rkey, raddr, 0, 0, 1, 1),
        Opx::MaskedCs64 => b.masked_cmp_swp_u64(wr_id, rkey, raddr, 0, 0, 1, 1),
        Opx::MaskedFa32 => b.masked_fetch_add_u32(wr_id, rkey, raddr, 1, 0),
        Opx::MaskedFa64 => b.masked_fetch_add_u64(wr_id, rkey, raddr, 1, 0),
        Opx::Nop => b.nop(wr_id),
    };
    let wr = match wr {
        Ok(w) => w.signaled(),
        Err(PostError::UnsupportedOp) => return Ok(false),
        Err(e) => return Err(e),
    };
    let wr = match t {
        CoreQp::Ud if op != Opx::Nop => wr.ud_addr(av, dest, 0x77)?,
        CoreQp::Xrc if op != Opx::Nop => wr.xrc_srqn(xrc_srqn)?,
        _ => wr,
    };
    let atomic = match op {
        Opx::MaskedCs32 | Opx::MaskedFa32 => 4,
        Opx::Cs | Opx::Fa | Opx::MaskedCs64 | Opx::MaskedFa64 => 8,
        _ => 0,
    };
    let f = [2, 0, 0, 0, 0, 9, 2, 0, 0, 0, 0, 1, 0x88, 0xb5, 1, 2, 3, 4];
    match op {
        Opx::Nop => wr.post()?,
        _ if atomic > 0 => wr.sge(buf.key, buf.addr(0x100 * (wr_id as usize % 16)), atomic)?,
        Opx::Read => wr.sge(buf.key, buf.addr(0x2000), 32)?,
        _ if t == CoreQp::RawPacket => wr.inline_data(&f)?,
        _ => wr.inline_data(b"opcode matrix payload")?,
    }
    b.complete();
    Ok(true)
}

/// Emulator only: an invalidatable key, masked atomics.
#[test]
fn every_opcode_on_every_qp_type() {
    use mlx5dp_setup::emu::SrqInit;
    let mut f = Fabric::new(step());
    let mut cq = f.cq(1024, CqeSize::B64, None, false);
    let buf = f.buffer(1 << 16);
    let av = f.be.create_ah(f.pd, AhAttr::default()).expect("create_ah");
    for t in [
        QpType::Rc,
        QpType::Uc,
        QpType::Ud,
        QpType::XrcIni,
        QpType::RawPacket,
    ] {
        let mut q: Queues<BlueFlamePreferred> = Queues::default();
        let mut ledger = Ledger::default();
        let mut spec = QpSpec::new(t);
        if t == QpType::XrcIni {
            spec.rq = RqInit::None;
        }
        let a = f.qp(spec, &cq, Some(&cq));
        // The peer: same type (XRC: a target and an XRC SRQ).
        let (dest, srqn) = match t {
            QpType::XrcIni => {
                let xrcd = f.be.alloc_xrcd().expect("xrcd");
                let srq =
                    f.be.create_srq(SrqInit {
                        pd: f.pd,
                        wqe_cnt: 64,
                        max_sge: 1,
                        cq: Some(mlx5dp_setup::emu::Cqn(cq.cqn())),
                        xrcd: Some(xrcd),
                    })
                    .expect("xrc srq");
                let tgt =
                    f.be.create_qp(mlx5dp_setup::emu::QpInit {
                        qp_type: QpType::XrcTgt,
                        pd: f.pd,
                        send_cq: None,
                        recv_cq: None,
                        sq_wqebbs: 0,
                        max_send_sge: 0,
                        max_inline: 0,
                        rq: RqInit::None,
                        xrcd: Some(xrcd),
                        vlan_strip: false,
                    })
                    .expect("xrc tgt");
                let srq_h = mlx5dp_tests::e2e::leak(srq);
                let mut s = mlx5dp_tests::e2e::TestSrq::new(&srq_h.rq);
                for i in 0..32 {
                    s.post(0x5000 + i, &[(buf.addr(0x4000), buf.key, 1024)])
                        .expect("srq post");
                }
                s.commit();
                q.srqs.insert(srq_h.srqn.0, s);
                f.be.connect(a.qpn, tgt.qpn, Default::default())
                    .expect("xrc connect");
                (tgt.qpn.0, srq_h.srqn.0)
            }
            _ => {
                let b = f.qp(QpSpec::new(t), &cq, Some(&cq));
                match t {
                    QpType::Ud => {
                        f.ud_up(a.qpn, 0x77);
                        f.ud_up(b.qpn, 0x77);
                    }
                    QpType::RawPacket => {
                        f.ud_up(a.qpn, 0);
                        f.ud_up(b.qpn, 0);
                        f.be.add_flow(FlowRule {
                            qpn: b.qpn,
                            dmac: None,
                            ethertype: None,
                            flow_tag: b.qpn.0,
                        })
                        .expect("flow");
                    }
                    _ => f.connect(a.qpn, b.qpn),
                }
                let mut rq = f.recv_queue(b);
                for i in 0..32 {
                    rq.post(
                        0x5000 + i,
                        &[RSge {
                            addr: buf.addr(0x4000),
                            length: 1024,
                            lkey: buf.key,
                        }],
                    )
                    .expect("post recv");
                }
                rq.commit();
                q.rqs.insert(b.qpn.0, rq);
                (b.qpn.0, 0)
            }
        };
        // A key the responder may invalidate (send with invalidate).
        let inv =
            f.be.reg_buffer(f.pd, 64, Access::ALL | Access::INVALIDATE)
                .expect("invalidatable MR");
        let mut sq = f.send_queue::<BlueFlamePreferred>(a);
        let ct = sq.qp_type();
        let mut posted = Vec::new();
        // UC send-with-invalidate too: libmlx5 installs it on UC QPs
        // (`fill_wr_builders_uc`), and the emulator executes it as on RC
        // (`e2e_emu_extra` checks the invalidation).
        for (i, &op) in ALL_OPS.iter().enumerate() {
            let wr_id = i as u64;
            let ok = post_op(
                &mut sq, ct, op, wr_id, &buf, buf.key, &av, dest, srqn, inv.key,
            )
            .unwrap_or_else(|e| panic!("{t:?} {op:?}: {e:?}"));
            assert_eq!(ok, allowed(ct, op), "{t:?} {op:?}: core acceptance");
            if ok {
                posted.push((wr_id, op));
                ledger.send(a.qpn.0, wr_id);
            }
        }
        q.sqs.insert(a.qpn.0, sq);
        let n = posted.len();
        f.run_until(&mut [&mut cq], &mut q, |q| {
            q.retired.iter().filter(|r| r.requester).count() >= n
        });
        let sent = q.sent(a.qpn);
        assert_eq!(sent.len(), n, "{t:?}");
        for (s, (wr_id, op)) in sent.iter().zip(&posted) {
            assert_eq!(s.wr_id, *wr_id);
            assert_eq!(s.status, WcStatus::Success, "{t:?} {op:?}: {s:?}");
            if let Some(wc) = expected_wc(*op) {
                assert_eq!(s.opcode, wc, "{t:?} {op:?}");
            }
        }
        if let Err(e) = ledger.check_exactly_once(
            &q.retired
                .iter()
                .filter(|r| r.requester)
                .copied()
                .collect::<Vec<_>>(),
        ) {
            panic!("{t:?}: {e}");
        }
        // Drain the peer's receive completions of this round.
        f.settle(&mut [&mut cq], &mut q, 2);
    }
    no_core_mistakes(&mut f);
}

// ---------------------------------------------------------------------------
// Batches, BlueFlame, wraps
// ---------------------------------------------------------------------------

#[test]
fn ring_wraps_doorbell_only() {
    wraps::<_, DoorbellOnly>(step(), 300);
}

#[test]
fn ring_wraps_blueflame_preferred() {
    wraps::<_, BlueFlamePreferred>(step(), 300);
}

#[test]
fn ring_wraps_blueflame_inline_thread() {
    wraps::<_, BlueFlameInline>(threaded(), 200);
}

/// A batch of work requests is published by one doorbell: nothing reaches
/// the device before `complete`, everything after one step. Emulator only:
/// step mode.
#[test]
fn batch_with_one_doorbell() {
    let mut f = Fabric::new(step());
    let mut cq = f.cq(64, CqeSize::B64, None, false);
    let mut spec = QpSpec::new(QpType::Rc);
    spec.rq = RqInit::Cyclic {
        wqe_cnt: 16,
        max_sge: 1,
    };
    let a = f.qp(spec, &cq, Some(&cq));
    let b = f.qp(spec, &cq, Some(&cq));
    f.connect(a.qpn, b.qpn);
    let buf = f.buffer(1 << 14);
    let mut q: Queues<BlueFlamePreferred> = Queues::default();
    q.sqs.insert(a.qpn.0, f.send_queue(a));
    let mut rq = f.recv_queue(b);
    for i in 0..8 {
        rq.post(
            i,
            &[RSge {
                addr: buf.addr(512 * i as usize),
                length: 512,
                lkey: buf.key,
            }],
        )
        .expect("recv");
    }
    rq.commit();
    q.rqs.insert(b.qpn.0, rq);
    let sq = q.sq(a.qpn);
    let mut batch = sq.start();
    for i in 0..8u64 {
        batch
            .send(i)
            .expect("send")
            .signaled()
            .inline_data(&pattern(i, 30))
            .expect("inline");
    }
    // Dropped batch: nothing happens.
    {
        let sq2 = q.sq(a.qpn);
        let _ = sq2.producer();
    }
    f.settle(&mut [&mut cq], &mut q, 1);
    assert!(q.polled.is_empty(), "nothing before complete");
    let sq = q.sq(a.qpn);
    let mut batch = sq.start();
    for i in 0..8u64 {
        batch
            .send(i)
            .expect("send")
            .signaled()
            .inline_data(&pattern(i, 30))
            .expect("inline");
    }
    assert_eq!(batch.complete(), 8);
    // One step: one doorbell rang, all eight executed.
    f.settle(&mut [&mut cq], &mut q, 1);
    assert_eq!(q.sent(a.qpn).len(), 8);
    assert_eq!(q.received().len(), 8);
    for i in 0..8 {
        assert_eq!(buf.read(512 * i, 30), pattern(i as u64, 30));
    }
    no_core_mistakes(&mut f);
}

/// BlueFlame: single-WQE batches of 1–4 WQEBBs under each policy; the
/// device compares every BlueFlame copy with the ring and checks that the
/// doorbell record was written first; the halves alternate. Emulator only:
/// the device's comparison, and step mode.
fn blueflame<P: DoorbellPolicy>() {
    let mut f = Fabric::new(step());
    let mut cq = f.cq(64, CqeSize::B64, None, false);
    let a = f.qp(QpSpec::new(QpType::Rc), &cq, Some(&cq));
    let b = f.qp(QpSpec::new(QpType::Rc), &cq, Some(&cq));
    f.connect(a.qpn, b.qpn);
    let buf = f.buffer(1 << 14);
    let mut q: Queues<P> = Queues::default();
    q.sqs.insert(a.qpn.0, f.send_queue(a));
    let mut halves = Vec::new();
    for (i, len) in [8usize, 40, 100, 200, 230].into_iter().enumerate() {
        let msg = pattern(i as u64, len);
        let sq = q.sq(a.qpn);
        halves.push(sq.bf_offset());
        let mut batch = sq.start();
        batch
            .rdma_write(i as u64, buf.key, buf.addr(1024 * i))
            .expect("write")
            .signaled()
            .inline_data(&msg)
            .expect("inline");
        batch.complete();
        f.run_for(&mut [&mut cq], &mut q, 1);
        assert_eq!(buf.read(1024 * i, len), msg);
    }
    assert_eq!(halves, [0, 256, 0, 256, 0], "BlueFlame halves alternate");
    assert!(q.polled.iter().all(|p| p.status == WcStatus::Success));
    no_core_mistakes(&mut f);
}

#[test]
fn blueflame_preferred() {
    blueflame::<BlueFlamePreferred>();
}

#[test]
fn blueflame_inline_only() {
    blueflame::<BlueFlameInline>();
}

#[test]
fn doorbell_only() {
    blueflame::<DoorbellOnly>();
}

/// Compressed completions are unpacked transparently: a mini is reported
#[test]
fn origin_regular_without_compression_step() {
    origin_regular_without_compression(step());
}
