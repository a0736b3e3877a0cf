//! End-to-end receive paths: CQE compression sessions (basic and enhanced
//! layouts, every mini format) polled through the core transparently, the
//! shared receive queue, the striding RQ, and XRC across two domains.

use mlx5dp::cq::Origin;
use mlx5dp::prm::{MiniCqeFormat, WcStatus};
use mlx5dp::rq::Sge as RSge;
use mlx5dp::sq::BlueFlamePreferred;
use mlx5dp_setup::backend::{Backend, EmuBackend, SrqHandle};
use mlx5dp_setup::emu::device::FlowRule;
use mlx5dp_setup::emu::{
    CompressionCfg, CompressionLayout, CqeSize, Cqn, DeviceConfig, QpInit, QpType, RqInit, SrqInit,
    VendorSyndrome,
};
use mlx5dp_tests::e2e::check::{check_all, Ledger};
use mlx5dp_tests::e2e::{leak, pattern, Fabric, QpSpec, Queues, TestSrq, TestStridingRq};

type P = BlueFlamePreferred;

fn step() -> EmuBackend {
    EmuBackend::step_mode(DeviceConfig::default())
}

fn zip(layout: CompressionLayout, format: MiniCqeFormat) -> Option<CompressionCfg> {
    Some(CompressionCfg {
        format,
        layout,
        max_session: 64,
        force: true,
    })
}

/// RC sends into a compressed receive CQ, and a compressed send CQ
/// (requester minis); rounds wrap the CQs.
fn zipped_rc<B: Backend>(be: B, layout: CompressionLayout, format: MiniCqeFormat, size: CqeSize) {
    let mut f = Fabric::new(be);
    let mut cq_a = f.cq(64, size, zip(layout, format), false);
    let mut cq_b = f.cq(64, size, zip(layout, format), false);
    let mut spec = QpSpec::new(QpType::Rc);
    spec.rq = RqInit::Cyclic {
        wqe_cnt: 32,
        max_sge: 1,
    };
    let mut spec_a = spec;
    spec_a.rq = RqInit::None;
    let a = f.qp(spec_a, &cq_a, None);
    let b = f.qp(spec, &cq_b, Some(&cq_b));
    f.connect(a.qpn, b.qpn);
    let src = f.buffer(1 << 15);
    let dst = f.buffer(1 << 15);
    let mut q: Queues<P> = Queues::default();
    q.sqs.insert(a.qpn.0, f.send_queue(a));
    q.rqs.insert(b.qpn.0, f.recv_queue(b));
    let mut ledger = Ledger::default();
    let mut wr = 0u64;
    for _round in 0..6 {
        let first = wr;
        for k in 0..24u64 {
            let id = first + k;
            q.rq(b.qpn.0)
                .post(
                    id,
                    &[RSge {
                        addr: dst.addr(1024 * (id as usize % 32)),
                        length: 1024,
                        lkey: dst.key,
                    }],
                )
                .expect("recv");
            ledger.recv(b.qpn.0, id);
        }
        q.rq(b.qpn.0).commit();
        let mut batch = q.sq(a.qpn).start();
        for k in 0..24u64 {
            let id = first + k;
            let len = 1 + (id as usize * 13) % 1000;
            src.write(1024 * (id as usize % 32), &pattern(id, len));
            batch
                .send(id)
                .expect("send")
                .signaled()
                .sge(src.key, src.addr(1024 * (id as usize % 32)), len as u32)
                .expect("sge");
            ledger.send(a.qpn.0, id);
        }
        batch.complete();
        wr += 24;
        let target = 2 * wr as usize;
        f.run_until(&mut [&mut cq_a, &mut cq_b], &mut q, |q| {
            q.retired.len() >= target
        });
        for p in q.received().iter().filter(|p| p.wr_id >= first) {
            let len = 1 + (p.wr_id as usize * 13) % 1000;
            assert_eq!(p.status, WcStatus::Success);
            assert_eq!(p.len as usize, len, "wr {}", p.wr_id);
            assert_eq!(
                dst.read(1024 * (p.wr_id as usize % 32), len),
                pattern(p.wr_id, len)
            );
        }
    }
    let minis = q.polled.iter().filter(|p| p.origin == Origin::Mini).count();
    let req_minis = q
        .sent(a.qpn)
        .iter()
        .filter(|p| p.origin == Origin::Mini)
        .count();
    assert!(minis > 100, "{layout:?}/{format:?}: {minis} minis");
    assert!(
        req_minis > 50,
        "{layout:?}/{format:?}: {req_minis} requester minis"
    );
    // Completions come back in posting order on each side.
    let ids: Vec<u64> = q.received().iter().map(|p| p.wr_id).collect();
    assert_eq!(ids, (0..wr).collect::<Vec<_>>());
    let ids: Vec<u64> = q.sent(a.qpn).iter().map(|p| p.wr_id).collect();
    assert_eq!(ids, (0..wr).collect::<Vec<_>>());
    check_all(&ledger, &q.retired);
    assert!(!cq_a.is_broken() && !cq_b.is_broken());
}

#[test]
fn zip_basic_hash() {
    zipped_rc(
        step(),
        CompressionLayout::Basic,
        MiniCqeFormat::Hash,
        CqeSize::B64,
    );
}

#[test]
fn zip_basic_csum_128b() {
    zipped_rc(
        step(),
        CompressionLayout::Basic,
        MiniCqeFormat::Csum,
        CqeSize::B128,
    );
}

#[test]
fn zip_enhanced_hash() {
    zipped_rc(
        step(),
        CompressionLayout::Enhanced,
        MiniCqeFormat::Hash,
        CqeSize::B64,
    );
}

#[test]
fn zip_enhanced_csum() {
    zipped_rc(
        step(),
        CompressionLayout::Enhanced,
        MiniCqeFormat::Csum,
        CqeSize::B64,
    );
}

#[test]
fn zip_basic_hash_thread() {
    zipped_rc(
        EmuBackend::threaded(DeviceConfig::default()).expect("thread"),
        CompressionLayout::Basic,
        MiniCqeFormat::Hash,
        CqeSize::B64,
    );
}

// ---------------------------------------------------------------------------
// Striding RQ (with the stride-index mini formats)
// ---------------------------------------------------------------------------

fn eth_frame(len: usize, seed: u64) -> Vec<u8> {
    let mut f = pattern(seed, len);
    f[..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
    f[12..14].copy_from_slice(&0x88b5u16.to_be_bytes());
    f
}

fn striding(compression: Option<CompressionCfg>) {
    let mut f = Fabric::new(step());
    let mut cq_a = f.cq(64, CqeSize::B64, None, false);
    let mut cq_b = f.cq(64, CqeSize::B64, compression, true);
    let a = f.qp(QpSpec::new(QpType::RawPacket), &cq_a, Some(&cq_a));
    let mut spec = QpSpec::new(QpType::RawPacket);
    spec.rq = RqInit::Striding {
        wqe_cnt: 8,
        log_num_strides: 4,
        log_stride_bytes: 6,
    };
    let b = f.qp(spec, &cq_b, Some(&cq_b));
    f.ud_up(a.qpn, 0);
    f.ud_up(b.qpn, 0);
    f.be.add_flow(FlowRule {
        qpn: b.qpn,
        dmac: None,
        ethertype: None,
        flow_tag: b.qpn.0,
    })
    .expect("flow");
    let rbuf = f.buffer(8 * 1024);
    let mut rq = TestStridingRq::new(b.rq.as_ref().expect("rq"), rbuf);
    let src = f.buffer(1 << 14);
    let mut ledger = Ledger::default();
    let mut next = 0u64;
    for _ in 0..8 {
        rq.post(0x100 + next).expect("post");
        ledger.recv(b.qpn.0, 0x100 + next);
        next += 1;
    }
    rq.commit();
    let mut q: Queues<P> = Queues::default();
    q.sqs.insert(a.qpn.0, f.send_queue(a));
    q.strided.insert(b.qpn.0, rq);
    let mut sent = Vec::new();
    for round in 0..10u64 {
        let mut batch = q.sq(a.qpn).start();
        for k in 0..6u64 {
            let id = round * 6 + k;
            let len = 60 + ((id * 71) % 250) as usize;
            let fr = eth_frame(len, id);
            src.write(512 * (id as usize % 32), &fr);
            batch
                .send(id)
                .expect("send")
                .signaled_if(k == 5)
                .frame(src.key, src.addr(512 * (id as usize % 32)), &fr)
                .expect("frame");
            ledger.send(a.qpn.0, id);
            sent.push(fr);
        }
        batch.complete();
        let want = sent.len();
        f.run_until(&mut [&mut cq_a, &mut cq_b], &mut q, |q| {
            q.received().len() >= want && q.sqs.values().all(|s| s.outstanding() == 0)
        });
        // Check this round's packets before their strides are reused.
        let srq = q.strided.get(&b.qpn.0).expect("strided");
        for (p, fr) in q.received().iter().zip(&sent).skip(want - 6) {
            assert_eq!(p.status, WcStatus::Success);
            assert_eq!(p.len as usize, fr.len());
            let stride = p.stride_index.expect("stride index");
            assert_eq!(
                p.strides,
                Some(fr.len().div_ceil(srq.stride_bytes()) as u16)
            );
            assert_eq!(&srq.packet(p.wqe_id, stride, fr.len()), fr, "{p:?}");
        }
        // Refill the WQEs the packets used up.
        let srq = q.strided.get_mut(&b.qpn.0).expect("strided");
        while srq.outstanding() < 8 {
            srq.post(0x100 + next).expect("post");
            ledger.recv(b.qpn.0, 0x100 + next);
            next += 1;
        }
        srq.commit();
    }
    let recvs = q.received();
    assert_eq!(recvs.len(), sent.len());
    if compression.is_some() {
        assert!(recvs.iter().any(|p| p.origin == Origin::Mini), "no minis");
    }
    // The WQEs still posted are flushed with the QP.
    f.be.to_error(b.qpn).expect("to error");
    let _ = ledger;
}

#[test]
fn striding_rq() {
    striding(None);
}

#[test]
fn striding_rq_zip_basic_ftag_stridx() {
    striding(zip(CompressionLayout::Basic, MiniCqeFormat::FtagStridx));
}

#[test]
fn striding_rq_zip_basic_csum_stridx() {
    striding(zip(CompressionLayout::Basic, MiniCqeFormat::CsumStridx));
}

#[test]
fn striding_rq_zip_enhanced_l34h_stridx() {
    striding(zip(CompressionLayout::Enhanced, MiniCqeFormat::L34hStridx));
}

#[test]
fn striding_rq_zip_enhanced_csum_stridx() {
    striding(zip(CompressionLayout::Enhanced, MiniCqeFormat::CsumStridx));
}

// ---------------------------------------------------------------------------
// SRQ
// ---------------------------------------------------------------------------

/// Two RC connections share one SRQ on the receive side; the free list is
/// recycled many times over.
#[test]
fn srq_shared_by_two_qps() {
    let mut f = Fabric::new(step());
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
    assert_eq!(
        s.post(99, &[]),
        Err(mlx5dp_tests::e2e::srq::RecvPostError::Full)
    );
    let mut q: Queues<P> = Queues::default();
    q.sqs.insert(a1.qpn.0, f.send_queue(a1));
    q.sqs.insert(a2.qpn.0, f.send_queue(a2));
    q.srqs.insert(srq.srqn.0, s);
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

#[test]
fn xrc_across_two_domains() {
    let mut f = Fabric::new(step());
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
        for i in 0..8u64 {
            let id = u64::from(d) * 0x100 + i;
            s.post(
                id,
                &[(
                    buf.addr(0x8000 * d as usize + 1024 * i as usize),
                    buf.key,
                    1024,
                )],
            )
            .expect("srq post");
            ledger.recv(srq.srqn.0, id);
        }
        s.commit();
        q.srqs.insert(srq.srqn.0, s);
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
    assert_eq!(
        (e.status, e.vendor_err as u8),
        (WcStatus::RemInvReqErr, VendorSyndrome::BadSegment as u8)
    );
    let fl = s.iter().find(|p| p.wr_id == 0x2001).expect("flush");
    assert_eq!(fl.status, WcStatus::WrFlushErr);
    check_all(&ledger, &q.retired);
}
