//! End-to-end receive paths: CQE compression sessions (basic and enhanced
//! layouts, every mini format) polled through the core transparently, the
//! shared receive queue, the striding RQ, and XRC across two domains.
//!
//! The SRQ and XRC scenarios are shared (`mlx5dp_tests::scenarios::rx`)
//! and run on a ConnectX in `hw_scenarios.rs`. The compression and
//! striding-RQ scenarios here are emulator only: they force compression
//! (hardware compresses only under load, so "more than 100 minis" cannot
//! be asked of it) or use the enhanced layout (DevX), and a striding RQ on
//! a QP that also sends (verbs builds a striding RQ as a WQ behind an RSS
//! QP, which has no send queue). The receive-only striding RQ scenario is
//! shared (`scenarios::rx::striding_rq_receive_only`).

use mlx5dp::cq::{Cq, Origin, StridedPacket};
use mlx5dp::prm::{MiniCqeFormat, WcStatus};
use mlx5dp::rq::Sge as RSge;
use mlx5dp::sq::BlueFlamePreferred;
use mlx5dp_setup::backend::{Backend, EmuBackend, QpHandle};
use mlx5dp_setup::emu::device::FlowRule;
use mlx5dp_setup::emu::{CompressionCfg, CompressionLayout, CqeSize, DeviceConfig, QpType, RqInit};
use mlx5dp_tests::e2e::check::{check_all, Ledger};
use mlx5dp_tests::e2e::{pattern, Fabric, QpSpec, Queues, TestStridingRq};
use mlx5dp_tests::scenarios::rx::{
    srq_shared_by_two_qps, striding_rq_receive_only, xrc_across_two_domains,
};

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

/// The fabric of the striding-RQ tests: a raw sender `a` on `cq_a`, a
/// raw receiver `b` with a striding RQ of 8 WQEs × 16 strides × 64 bytes
/// on `cq_b` (`compression`), a steering rule sending every frame to `b`.
struct StridingRig {
    f: Fabric<EmuBackend>,
    cq_a: Cq,
    cq_b: Cq,
    a: &'static QpHandle,
    b: &'static QpHandle,
    rq: TestStridingRq,
}

fn striding_rig(compression: Option<CompressionCfg>) -> StridingRig {
    let mut f = Fabric::new(step());
    let cq_a = f.cq(64, CqeSize::B64, None, false);
    let cq_b = f.cq(64, CqeSize::B64, compression, true);
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
    let rq = TestStridingRq::new(b.rq.as_ref().expect("rq"), rbuf);
    StridingRig {
        f,
        cq_a,
        cq_b,
        a,
        b,
        rq,
    }
}

fn striding(compression: Option<CompressionCfg>) {
    let StridingRig {
        mut f,
        mut cq_a,
        mut cq_b,
        a,
        b,
        mut rq,
    } = striding_rig(compression);
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
        q.assert_strided_received(b.qpn, &sent, want - 6);
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

#[test]
fn striding_rq_zip_enhanced_ftag_stridx() {
    striding(zip(CompressionLayout::Enhanced, MiniCqeFormat::FtagStridx));
}

#[test]
fn striding_rq_zip_basic_l34h_stridx() {
    striding(zip(CompressionLayout::Basic, MiniCqeFormat::L34hStridx));
}

/// The striding RQ of [`striding`], its CQ polled with `Cq::poll_strided`
/// in bursts of `burst` packets: each packet's address, length and strides
/// checked against the frame sent, its bytes read at that address (before
/// the WQE is re-posted and published); one WQE-done flag per WQE.
fn striding_poll_strided(compression: Option<CompressionCfg>, burst: usize) {
    let StridingRig {
        mut f,
        mut cq_a,
        mut cq_b,
        a,
        b,
        mut rq,
    } = striding_rig(compression);
    let mut next = 0u64;
    while rq.outstanding() < 8 {
        rq.post(0x100 + next).expect("post");
        next += 1;
    }
    rq.commit();
    let src = f.buffer(1 << 14);
    let mut q: Queues<P> = Queues::default();
    q.sqs.insert(a.qpn.0, f.send_queue(a));
    let mut out = vec![StridedPacket::default(); burst];
    let (mut packets, mut minis, mut done) = (0usize, 0usize, 0usize);
    for round in 0..12u64 {
        let mut batch = q.sq(a.qpn).start();
        let mut sent = Vec::new();
        for k in 0..6u64 {
            let id = round * 6 + k;
            let len = 60 + ((id * 71) % 250) as usize;
            let fr = eth_frame(len, id);
            let off = 512 * (id as usize % 32);
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
        let mut got = 0;
        for _ in 0..100_000 {
            f.be.progress();
            q.poll(&mut cq_a).expect("send cq");
            let n = cq_b.poll_strided(rq.rq(), &mut out).expect("poll_strided");
            for p in &out[..n] {
                let fr = sent.get(got).expect("more packets than frames sent");
                assert_eq!(p.status(), WcStatus::Success, "{p:?}");
                assert_eq!(usize::from(p.len), fr.len(), "{p:?}");
                assert_eq!(usize::from(p.strides), fr.len().div_ceil(64), "{p:?}");
                let off = (p.addr - rq.buf.addr(0)) as usize;
                assert_eq!(&rq.buf.read(off, fr.len()), fr, "{p:?}");
                minis += usize::from(p.flags & StridedPacket::MINI != 0);
                done += usize::from(p.flags & StridedPacket::WQE_DONE != 0);
                got += 1;
            }
            packets += n;
            if got == sent.len() && q.sqs.values().all(|s| s.outstanding() == 0) {
                break;
            }
        }
        assert_eq!(got, sent.len(), "round {round}: packets missing");
        // Refill the WQEs the packets used up (the packets were read).
        while rq.outstanding() < 8 {
            rq.post(0x100 + next).expect("post");
            next += 1;
        }
        rq.commit();
    }
    assert_eq!(packets, 72);
    // A WQE ended by a packet flags it; one ended by a filler flags none.
    assert!(done > 0 && done as u32 <= rq.rq().tail(), "{done}");
    if compression.is_some() {
        assert!(minis > 0, "no minis");
    } else {
        assert_eq!(minis, 0);
    }
    f.be.to_error(b.qpn).expect("to error");
}

#[test]
fn striding_rq_poll_strided() {
    striding_poll_strided(None, 32);
    striding_poll_strided(None, 1);
}

#[test]
fn striding_rq_poll_strided_zip_basic_csum_stridx() {
    for burst in [32, 8, 5, 1] {
        striding_poll_strided(
            zip(CompressionLayout::Basic, MiniCqeFormat::CsumStridx),
            burst,
        );
    }
}

#[test]
fn striding_rq_poll_strided_zip_basic_l34h_stridx() {
    striding_poll_strided(zip(CompressionLayout::Basic, MiniCqeFormat::L34hStridx), 32);
}

#[test]
fn striding_rq_poll_strided_zip_basic_ftag_stridx() {
    // Not a fast-step format: every mini through the general steps.
    striding_poll_strided(zip(CompressionLayout::Basic, MiniCqeFormat::FtagStridx), 32);
}

#[test]
fn striding_rq_poll_strided_zip_enhanced_csum_stridx() {
    striding_poll_strided(
        zip(CompressionLayout::Enhanced, MiniCqeFormat::CsumStridx),
        32,
    );
}

#[test]
fn striding_rq_receive_only_step() {
    striding_rq_receive_only(step());
}

#[test]
fn striding_rq_receive_only_thread() {
    striding_rq_receive_only(EmuBackend::threaded(DeviceConfig::default()).expect("thread"));
}
// ---------------------------------------------------------------------------
// SRQ and XRC (shared scenarios)
// ---------------------------------------------------------------------------

#[test]
fn srq_shared_by_two_qps_step() {
    srq_shared_by_two_qps(step());
}

#[test]
fn srq_shared_by_two_qps_thread() {
    srq_shared_by_two_qps(EmuBackend::threaded(DeviceConfig::default()).expect("thread"));
}

#[test]
fn xrc_across_two_domains_step() {
    xrc_across_two_domains(step());
}
