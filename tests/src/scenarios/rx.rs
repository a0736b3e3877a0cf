//! Shared receive queues (two RC connections on one SRQ; an error on one
//! of them neither flushes nor loses the shared WQEs), XRC across two
//! domains, and a striding RQ on a receive-only RAW_PACKET QP: on every
//! backend.

use super::no_core_mistakes;
use super::rc::frame;
use crate::e2e::check::{check_all, check_flush_after_error, Ledger};
use crate::e2e::{leak, pattern, Fabric, QpSpec, Queues, TestSrq, TestStridingRq};
use mlx5dp::prm::WcStatus;
use mlx5dp::sq::BlueFlamePreferred;
use mlx5dp_setup::backend::{Backend, FlowRule, QpState, SrqHandle};
use mlx5dp_setup::emu::{CqeSize, Cqn, QpInit, QpType, RqInit, SrqInit, VendorSyndrome};

type P = BlueFlamePreferred;

/// Two RC connections share one SRQ on the receive side; the free list is
/// recycled many times over.
pub fn srq_shared_by_two_qps<B: Backend>(be: B) {
    let mut f = Fabric::new(be);
    let mut cq = f.cq(256, CqeSize::B64, None, false);
    let srq: &'static SrqHandle = leak(
        f.be.create_srq(SrqInit {
            pd: f.pd,
            wqe_cnt: 16,
            max_sge: 2,
            cq: None,
            xrcd: None,
        })
        .expect("srq"),
    );
    let mut s = TestSrq::new(&srq.rq);
    let mut spec_r = QpSpec::new(QpType::Rc);
    spec_r.rq = RqInit::Srq(srq.srqn);
    let mut spec_s = QpSpec::new(QpType::Rc);
    spec_s.rq = RqInit::None;
    let a1 = f.qp(spec_s, &cq, None);
    let a2 = f.qp(spec_s, &cq, None);
    let b1 = f.qp(spec_r, &cq, Some(&cq));
    let b2 = f.qp(spec_r, &cq, Some(&cq));
    f.connect(a1.qpn, b1.qpn);
    f.connect(a2.qpn, b2.qpn);
    let buf = f.buffer(1 << 16);
    let mut ledger = Ledger::default();
    let mut next = 0u64;
    let mut post_recvs = |s: &mut TestSrq, ledger: &mut Ledger| {
        while s.outstanding() < 15 {
            let slot = (next % 16) as usize;
            s.post(
                next,
                &[
                    (buf.addr(0x8000 + 2048 * slot), buf.key, 1000),
                    (buf.addr(0x8000 + 2048 * slot + 1000), buf.key, 1048),
                ],
            )
            .expect("srq post");
            ledger.recv(srq.srqn.0, next);
            next += 1;
        }
        s.commit();
    };
    post_recvs(&mut s, &mut ledger);
    assert_eq!(s.post(99, &[]), Err(crate::e2e::srq::RecvPostError::Full));
    let mut q: Queues<P> = Queues::default();
    q.sqs.insert(a1.qpn.0, f.send_queue(a1));
    q.sqs.insert(a2.qpn.0, f.send_queue(a2));
    q.srqs.insert(srq.srqn.0, s);
    q.attach_srq(b1.qpn.0, srq.srqn.0);
    q.attach_srq(b2.qpn.0, srq.srqn.0);
    let mut id = 0u64;
    for _round in 0..12 {
        for qp in [a1, a2] {
            let mut batch = q.sq(qp.qpn).start();
            for _ in 0..5 {
                let len = 1 + (id as usize * 97) % 2048;
                src_write(&buf, id, len);
                batch
                    .send(id)
                    .expect("send")
                    .signaled()
                    .sge(buf.key, buf.addr(4096 * (id as usize % 8)), len as u32)
                    .expect("sge");
                ledger.send(qp.qpn.0, id);
                id += 1;
            }
            batch.complete();
        }
        let want = 2 * id as usize;
        f.run_until(&mut [&mut cq], &mut q, |q| q.retired.len() >= want);
        let s = q.srqs.get_mut(&srq.srqn.0).expect("srq");
        post_recvs(s, &mut ledger);
    }
    // Every message landed byte-exact in the buffers of the WQE that took
    // it: check through the receive completions, sender by sender.
    let recvs: Vec<_> = q.received().into_iter().cloned().collect();
    assert_eq!(recvs.len(), id as usize);
    let mut from: std::collections::BTreeMap<u32, Vec<u64>> = Default::default();
    for r in &recvs {
        assert_eq!(r.status, WcStatus::Success);
        from.entry(r.src_qp).or_default().push(r.wr_id);
    }
    assert_eq!(from.len(), 2);
    assert_eq!(from.values().map(Vec::len).sum::<usize>(), id as usize);
    // The receives still posted stay with the SRQ (QP errors do not flush
    // an SRQ): everything else completed exactly once.
    let s = q.srqs.get(&srq.srqn.0).expect("srq");
    assert_eq!(s.outstanding(), 15);
    ledger.withdraw_recv(srq.srqn.0, &s.posted_ids());
    check_all(&ledger, &q.retired);
}

fn src_write(buf: &mlx5dp_setup::backend::Buffer, id: u64, len: usize) {
    buf.write(4096 * (id as usize % 8), &pattern(id, len));
}

// ---------------------------------------------------------------------------
// XRC across two domains
// ---------------------------------------------------------------------------

/// XRC: two domains, each an XRC SRQ and a target QP; each initiator
/// sends to the SRQ of its own domain; naming the other domain's SRQ is a
/// remote invalid request, and the rest of the initiator's work is
/// flushed.
pub fn xrc_across_two_domains<B: Backend>(be: B) {
    let mut f = Fabric::new(be);
    let mut cq = f.cq(256, CqeSize::B64, None, false);
    let buf = f.buffer(1 << 16);
    let mut q: Queues<P> = Queues::default();
    let mut ledger = Ledger::default();
    let mut inis = Vec::new();
    let mut srqns = Vec::new();
    for d in 0..2u32 {
        let xrcd = f.be.alloc_xrcd().expect("xrcd");
        let srq: &'static SrqHandle = leak(
            f.be.create_srq(SrqInit {
                pd: f.pd,
                wqe_cnt: 32,
                max_sge: 1,
                cq: Some(Cqn(cq.cqn())),
                xrcd: Some(xrcd),
            })
            .expect("xrc srq"),
        );
        let tgt =
            f.be.create_qp(QpInit {
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
            .expect("tgt");
        let mut spec = QpSpec::new(QpType::XrcIni);
        spec.rq = RqInit::None;
        let ini = f.qp(spec, &cq, None);
        f.be.connect(ini.qpn, tgt.qpn, Default::default())
            .expect("connect");
        let mut s = TestSrq::new(&srq.rq);
        // One list of eight (`Srq::post_list`, which publishes it).
        let wrs: Vec<(u64, (u64, u32, u32))> = (0..8u64)
            .map(|i| {
                let id = u64::from(d) * 0x100 + i;
                ledger.recv(srq.srqn.0, id);
                (
                    id,
                    (
                        buf.addr(0x8000 * d as usize + 1024 * i as usize),
                        buf.key,
                        1024,
                    ),
                )
            })
            .collect();
        s.post_list(&wrs).expect("srq post");
        q.srqs.insert(srq.srqn.0, s);
        q.attach_srq(tgt.qpn.0, srq.srqn.0);
        q.sqs.insert(ini.qpn.0, f.send_queue(ini));
        inis.push(ini);
        srqns.push(srq.srqn.0);
    }
    // Each initiator sends to the SRQ of its own domain.
    for (d, ini) in inis.iter().enumerate() {
        let mut batch = q.sq(ini.qpn).start();
        for i in 0..8u64 {
            let id = 0x1000 * d as u64 + i;
            batch
                .send(id)
                .expect("send")
                .signaled()
                .xrc_srqn(srqns[d])
                .expect("srqn")
                .inline_data(&pattern(id, 40))
                .expect("inline");
            ledger.send(ini.qpn.0, id);
        }
        batch.complete();
    }
    f.run_until(&mut [&mut cq], &mut q, |q| q.retired.len() >= 32);
    for d in 0..2usize {
        for i in 0..8usize {
            let id = 0x1000 * d as u64 + i as u64;
            assert_eq!(buf.read(0x8000 * d + 1024 * i, 40), pattern(id, 40));
        }
    }
    check_all(&ledger, &q.retired);
    // Across domains: initiator 0 names the SRQ of domain 1 → the target
    // rejects it (REMOTE_INVAL_REQ), the initiator flushes the rest.
    let mut batch = q.sq(inis[0].qpn).start();
    for (k, srqn) in [srqns[1], srqns[0]].into_iter().enumerate() {
        batch
            .send(0x2000 + k as u64)
            .expect("send")
            .signaled()
            .xrc_srqn(srqn)
            .expect("srqn")
            .inline_data(b"wrong domain")
            .expect("inline");
        ledger.send(inis[0].qpn.0, 0x2000 + k as u64);
    }
    batch.complete();
    f.run_until(&mut [&mut cq], &mut q, |q| q.retired.len() >= 34);
    let s = q.sent(inis[0].qpn);
    let e = s.iter().find(|p| p.wr_id == 0x2000).expect("error");
    assert_eq!(e.status, WcStatus::RemInvReqErr);
    if f.be.emulated() {
        assert_eq!(e.vendor_err as u8, VendorSyndrome::BadSegment as u8);
    }
    let fl = s.iter().find(|p| p.wr_id == 0x2001).expect("flush");
    assert_eq!(fl.status, WcStatus::WrFlushErr);
    check_all(&ledger, &q.retired);
}

// ---------------------------------------------------------------------------
// SRQ: an error on one QP neither flushes nor loses the shared WQEs
// ---------------------------------------------------------------------------

/// An SRQ shared by two RC QPs: a message too long for its WQE fails on
/// one QP (responder LOCAL_LENGTH, requester REMOTE_INVAL_REQ, flushes
/// after it), and the other QP keeps receiving from the same SRQ, in
/// posting order.
pub fn srq_error_and_flush_keep_the_shared_queue<B: Backend>(be: B) {
    let mut f = Fabric::new(be);
    let mut cq = f.cq(128, CqeSize::B64, None, false);
    let srq: &'static SrqHandle = leak(
        f.be.create_srq(SrqInit {
            pd: f.pd,
            wqe_cnt: 16,
            max_sge: 1,
            cq: None,
            xrcd: None,
        })
        .expect("srq"),
    );
    let mut s = TestSrq::new(&srq.rq);
    let mut rspec = QpSpec::new(QpType::Rc);
    rspec.rq = RqInit::Srq(srq.srqn);
    let mut sspec = QpSpec::new(QpType::Rc);
    sspec.rq = RqInit::None;
    let a1 = f.qp(sspec, &cq, None);
    let a2 = f.qp(sspec, &cq, None);
    let b1 = f.qp(rspec, &cq, Some(&cq));
    let b2 = f.qp(rspec, &cq, Some(&cq));
    f.connect(a1.qpn, b1.qpn);
    f.connect(a2.qpn, b2.qpn);
    let buf = f.buffer(1 << 16);
    let mut ledger = Ledger::default();
    for i in 0..8u64 {
        s.post(
            0x100 + i,
            &[(buf.addr(0x8000 + 1024 * i as usize), buf.key, 1000)],
        )
        .expect("srq post");
        ledger.recv(srq.srqn.0, 0x100 + i);
    }
    s.commit();
    let mut q: Queues<P> = Queues::default();
    q.sqs.insert(a1.qpn.0, f.send_queue(a1));
    q.sqs.insert(a2.qpn.0, f.send_queue(a2));
    q.srqs.insert(srq.srqn.0, s);
    q.attach_srq(b1.qpn.0, srq.srqn.0);
    q.attach_srq(b2.qpn.0, srq.srqn.0);
    buf.write(0, &pattern(1, 3000));
    // a1: one good message, then one too long for an SRQ WQE (responder
    // LOCAL_LENGTH on the SRQ WQE, requester REMOTE_INVAL_REQ), then two
    // that are flushed on a1.
    {
        let mut batch = q.sq(a1.qpn).start();
        batch
            .send(1)
            .expect("send")
            .signaled()
            .sge(buf.key, buf.addr(0), 500)
            .expect("sge");
        batch
            .send(2)
            .expect("send")
            .signaled()
            .sge(buf.key, buf.addr(0), 3000)
            .expect("sge");
        for i in 3..5 {
            batch
                .send(i)
                .expect("send")
                .signaled()
                .inline_data(b"flushed")
                .expect("inline");
        }
        batch.complete();
        for i in 1..5 {
            ledger.send(a1.qpn.0, i);
        }
    }
    f.run_until(&mut [&mut cq], &mut q, |q| q.polled.len() >= 6);
    let recv: Vec<_> = q.received().into_iter().cloned().collect();
    assert_eq!(recv.len(), 2, "{recv:?}");
    assert_eq!(
        (recv[0].wr_id, recv[0].status, recv[0].len),
        (0x100, WcStatus::Success, 500)
    );
    // The error CQE names the SRQ WQE that took the message; the core
    // retires it on the SRQ.
    assert_eq!(
        (recv[1].wr_id, recv[1].status),
        (0x101, WcStatus::LocLenErr)
    );
    if f.be.emulated() {
        assert_eq!(recv[1].vendor_err as u8, VendorSyndrome::Length as u8);
    }
    let sent: Vec<(u64, WcStatus)> = q.sent(a1.qpn).iter().map(|p| (p.wr_id, p.status)).collect();
    assert_eq!(
        sent,
        [
            (1, WcStatus::Success),
            (2, WcStatus::RemInvReqErr),
            (3, WcStatus::WrFlushErr),
            (4, WcStatus::WrFlushErr)
        ]
    );
    // b1 is in error; the SRQ's other WQEs were not flushed with it.
    let s = q.srqs.get(&srq.srqn.0).expect("srq");
    assert_eq!(s.outstanding(), 6);
    // Moving b1 to error explicitly flushes nothing of the SRQ either.
    f.be.to_error(b1.qpn).expect("to error");
    f.settle(&mut [&mut cq], &mut q, 3);
    assert_eq!(q.received().len(), 2);
    // b2 keeps receiving from the same SRQ, in posting order.
    {
        let mut batch = q.sq(a2.qpn).start();
        for i in 10..16 {
            batch
                .send(i)
                .expect("send")
                .signaled()
                .sge(buf.key, buf.addr(i as usize), 100 + i as u32)
                .expect("sge");
            ledger.send(a2.qpn.0, i);
        }
        batch.complete();
    }
    f.run_until(&mut [&mut cq], &mut q, |q| q.received().len() >= 8);
    let recv: Vec<(u64, WcStatus, u32)> = q.received()[2..]
        .iter()
        .map(|p| (p.wr_id, p.status, p.len))
        .collect();
    let want: Vec<(u64, WcStatus, u32)> = (0..6u64)
        .map(|k| (0x102 + k, WcStatus::Success, 110 + k as u32))
        .collect();
    assert_eq!(recv, want);
    for k in 0..6usize {
        assert_eq!(
            buf.read(0x8000 + 1024 * (2 + k), 110 + k),
            pattern(1, 3000)[10 + k..20 + 2 * k + 100].to_vec()
        );
    }
    f.run_until(&mut [&mut cq], &mut q, |q| q.sent(a2.qpn).len() >= 6);
    assert_eq!(q.srqs.get(&srq.srqn.0).expect("srq").outstanding(), 0);
    // Exactly once everywhere; flush-after-error per send queue only: an
    // SRQ is shared, an error of one of its QPs does not end it (IBA
    // 10.2.9.5: the SRQ's WQEs are not flushed with a QP).
    if let Err(e) = ledger.check_exactly_once(&q.retired) {
        panic!("{e}");
    }
    let sends: Vec<_> = q.retired.iter().filter(|r| r.requester).copied().collect();
    if let Err(e) = check_flush_after_error(&sends) {
        panic!("{e}");
    }
}

/// A striding (multi-packet) RQ on a receive-only RAW_PACKET QP (no send
/// queue), fed by a second RAW_PACKET QP through a steering rule on the
/// destination MAC: 60 frames of 60 to 1360 bytes in rounds of six, so
/// packets take 1 to 22 strides, fill a WQE, make the device skip its
/// last strides with a filler and move on to the next WQE, which the
/// poster re-posts. Each packet is read back through the core's stride
/// shadow. Ends with the RQ moved to error.
///
/// 2^9 strides of 64 bytes per WQE: inside a ConnectX-5's
/// `mlx5dv_striding_rq_caps` (at least 2^9 strides without the extended
/// range) and the emulator's. On a ConnectX the receive side is a WQ
/// behind an RSS QP (`VerbsBackend`), and the frames must come back to the
/// port as in [`super::rc::raw_loopback`].
pub fn striding_rq_receive_only<B: Backend>(be: B) {
    let mut f = Fabric::new(be);
    let mut cq_a = f.cq(64, CqeSize::B64, None, false);
    let mut cq_b = f.cq(256, CqeSize::B64, None, true);
    let a = f.qp(QpSpec::new(QpType::RawPacket), &cq_a, Some(&cq_a));
    let mut spec = QpSpec::new(QpType::RawPacket);
    spec.sq_wqebbs = 0;
    spec.rq = RqInit::Striding {
        wqe_cnt: 4,
        log_num_strides: 9,
        log_stride_bytes: 6,
    };
    let b = f.qp(spec, &cq_b, Some(&cq_b));
    assert!(b.sq.is_none(), "a receive-only QP has no send queue");
    f.ud_up(a.qpn, 0);
    f.ud_up(b.qpn, 0);
    let mac = [2, 0, 0, 0, 0, 3];
    f.be.add_flow(FlowRule {
        qpn: b.qpn,
        dmac: Some(mac),
        ethertype: None,
        flow_tag: b.qpn.0,
    })
    .expect("flow");
    let rbuf = f.buffer(4 << 15);
    let mut rq = TestStridingRq::new(b.rq.as_ref().expect("striding rq"), rbuf);
    let mut next = 0u64;
    while rq.outstanding() < 4 {
        rq.post(0x100 + next).expect("post");
        next += 1;
    }
    rq.commit();
    let src = f.buffer(1 << 16);
    let mut q: Queues<P> = Queues::default();
    q.sqs.insert(a.qpn.0, f.send_queue(a));
    q.strided.insert(b.qpn.0, rq);
    let mut sent = Vec::new();
    for round in 0..10u64 {
        let mut batch = q.sq(a.qpn).start();
        for k in 0..6u64 {
            let id = round * 6 + k;
            let len = 60 + ((id * 233) % 1301) as usize;
            let fr = frame(mac, len, id);
            let off = 2048 * (id as usize % 32);
            src.write(off, &fr);
            batch
                .send(id)
                .expect("send")
                .signaled_if(k == 5)
                .frame(src.key, src.addr(off), &fr)
                .expect("frame");
            sent.push(fr);
        }
        batch.complete();
        let want = sent.len();
        f.run_until(&mut [&mut cq_a, &mut cq_b], &mut q, |q| {
            q.received().len() >= want && q.sqs.values().all(|s| s.outstanding() == 0)
        });
        // This round's packets, before their strides are reused.
        q.assert_strided_received(b.qpn, &sent, want - 6);
        // Keep four WQEs posted.
        let srq = q.strided.get_mut(&b.qpn.0).expect("strided");
        while srq.outstanding() < 4 {
            srq.post(0x100 + next).expect("post");
            next += 1;
        }
        srq.commit();
    }
    assert_eq!(q.received().len(), sent.len());
    f.be.to_error(b.qpn).expect("to error");
    assert_eq!(f.be.qp_state(b.qpn), Some(QpState::Err));
    no_core_mistakes(&mut f);
}
