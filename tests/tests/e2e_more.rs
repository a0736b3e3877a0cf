//! More end-to-end coverage: masked ("extended") atomics checked on the
//! data (remote memory after, original value returned), flushes and
//! errors on a shared receive queue, flushes of a striding RQ, and the
//! completion opcode of a local invalidate.
//!
//! The SRQ scenario is shared (`mlx5dp_tests::scenarios::rx`) and runs on
//! a ConnectX in `hw_scenarios.rs`. Emulator only here: masked atomics
//! (the verbs backend does not create QPs with
//! `MLX5DV_QP_EX_WITH_MASKED_ATOMIC` yet) and the striding RQ flush (its
//! QP also sends, and 2^4 strides per WQE is below a ConnectX-5's
//! minimum; the verbs backend builds a striding RQ as a WQ behind an RSS
//! QP, receive only: `scenarios::rx::striding_rq_receive_only`).

use mlx5dp::prm::WcStatus;
use mlx5dp::sq::BlueFlamePreferred;
use mlx5dp_setup::backend::{Backend, EmuBackend};
use mlx5dp_setup::emu::device::FlowRule;
use mlx5dp_setup::emu::{CqeSize, DeviceConfig, QpType, RqInit};
use mlx5dp_tests::e2e::check::{check_all, Ledger};
use mlx5dp_tests::e2e::{pattern, Fabric, QpSpec, Queues, TestStridingRq};
use mlx5dp_tests::scenarios::rx::srq_error_and_flush_keep_the_shared_queue;

type P = BlueFlamePreferred;

fn step() -> EmuBackend {
    EmuBackend::step_mode(DeviceConfig::default())
}

// ---------------------------------------------------------------------------
// Masked atomics
// ---------------------------------------------------------------------------

/// Masked fetch-and-add, written from the definition: the operand is cut
/// into fields, each ending at a bit set in `boundary` (and at the top
/// bit); each field is added on its own, its carry dropped.
fn masked_add(v: u64, add: u64, boundary: u64, bits: u32) -> u64 {
    let mut out = 0u64;
    let mut lo = 0u32;
    for hi in 0..bits {
        if (boundary >> hi) & 1 == 1 || hi == bits - 1 {
            let width = hi - lo + 1;
            let mask = if width == 64 {
                u64::MAX
            } else {
                (1u64 << width) - 1
            };
            let s = ((v >> lo) & mask).wrapping_add((add >> lo) & mask) & mask;
            out |= s << lo;
            lo = hi + 1;
        }
    }
    out
}

#[test]
fn masked_add_reference() {
    // All-ones boundaries: XOR (UCX's use).
    assert_eq!(masked_add(0b1100, 0b1010, u64::MAX, 64), 0b0110);
    // Bytes as fields: 0xff + 1 wraps inside its byte.
    assert_eq!(masked_add(0x01ff, 0x0001, 0x8080, 16), 0x0100);
    // No boundary: a plain add.
    assert_eq!(masked_add(0xffff, 1, 0, 32), 0x1_0000);
}

#[test]
fn masked_atomics_change_the_right_bits() {
    let mut f = Fabric::new(step());
    let mut cq = f.cq(64, CqeSize::B64, None, false);
    let a = f.qp(QpSpec::new(QpType::Rc), &cq, Some(&cq));
    let b = f.qp(QpSpec::new(QpType::Rc), &cq, Some(&cq));
    f.connect(a.qpn, b.qpn);
    let local = f.buffer(4096);
    let remote = f.buffer(4096);
    let mut q: Queues<P> = Queues::default();
    q.sqs.insert(a.qpn.0, f.send_queue(a));
    let mut ledger = Ledger::default();
    // Masked atomics operate on big-endian memory (the 8-byte endianness
    // mode covers only the standard atomics).
    let w64 = [
        0x1122_3344_5566_7788u64,
        0x1122_3344_5566_7788,
        0x00ff_00ff_00ff_00ff,
        0xffff_ffff_ffff_ffff,
    ];
    let w32 = [0xa5a5_5a5au32, 0xa5a5_5a5a, 0x00ff_ff00, 0x7fff_ffff];
    for (i, v) in w64.iter().enumerate() {
        remote.write(8 * i, &v.to_be_bytes());
    }
    for (i, v) in w32.iter().enumerate() {
        remote.write(0x100 + 4 * i, &v.to_be_bytes());
    }
    // (wr, remote off, result off)
    {
        let mut batch = q.sq(a.qpn).start();
        let (rk, lk) = (remote.key, local.key);
        // CS64: low byte compares equal → swap the low 16 bits.
        batch
            .masked_cmp_swp_u64(1, rk, remote.addr(0), 0x88, 0xff, 0xabcd, 0xffff)
            .expect("mcs")
            .signaled()
            .sge(lk, local.addr(0), 8)
            .expect("sge");
        // CS64: the compared bits differ → memory unchanged.
        batch
            .masked_cmp_swp_u64(2, rk, remote.addr(8), 0x00, 0xff, 0xabcd, 0xffff)
            .expect("mcs")
            .signaled()
            .sge(lk, local.addr(8), 8)
            .expect("sge");
        // FA64 with byte fields: every byte + 1, carries dropped.
        batch
            .masked_fetch_add_u64(
                3,
                rk,
                remote.addr(16),
                0x0101_0101_0101_0101,
                0x8080_8080_8080_8080,
            )
            .expect("mfa")
            .signaled()
            .sge(lk, local.addr(16), 8)
            .expect("sge");
        // FA64 with all-ones boundaries: XOR.
        batch
            .masked_fetch_add_u64(4, rk, remote.addr(24), 0x0f0f_0000_0000_f0f0, u64::MAX)
            .expect("mfa")
            .signaled()
            .sge(lk, local.addr(24), 8)
            .expect("sge");
        // CS32: compare the top nibble (0xa), swap the low byte.
        batch
            .masked_cmp_swp_u32(
                5,
                rk,
                remote.addr(0x100),
                0xa000_0000,
                0xf000_0000,
                0x0000_0011,
                0xff,
            )
            .expect("mcs32")
            .signaled()
            .sge(lk, local.addr(0x100), 4)
            .expect("sge");
        // CS32: mismatch.
        batch
            .masked_cmp_swp_u32(6, rk, remote.addr(0x104), 0, 0xf000_0000, 0x0000_0011, 0xff)
            .expect("mcs32")
            .signaled()
            .sge(lk, local.addr(0x104), 4)
            .expect("sge");
        // FA32 with 16-bit fields.
        batch
            .masked_fetch_add_u32(7, rk, remote.addr(0x108), 0x0101_0101, 0x8000_8000)
            .expect("mfa32")
            .signaled()
            .sge(lk, local.addr(0x108), 4)
            .expect("sge");
        // FA32 plain (no boundary): carries run through.
        batch
            .masked_fetch_add_u32(8, rk, remote.addr(0x10c), 1, 0)
            .expect("mfa32")
            .signaled()
            .sge(lk, local.addr(0x10c), 4)
            .expect("sge");
        batch.complete();
        for i in 1..=8 {
            ledger.send(a.qpn.0, i);
        }
    }
    f.run_until(&mut [&mut cq], &mut q, |q| q.polled.len() >= 8);
    let r64 = |off| u64::from_be_bytes(remote.read(off, 8).try_into().expect("8"));
    let l64 = |off| u64::from_be_bytes(local.read(off, 8).try_into().expect("8"));
    let r32 = |off| u32::from_be_bytes(remote.read(off, 4).try_into().expect("4"));
    let l32 = |off| u32::from_be_bytes(local.read(off, 4).try_into().expect("4"));
    // The original values come back, big-endian, in the result buffers.
    for (i, v) in w64.iter().enumerate() {
        assert_eq!(l64(8 * i), *v, "64-bit op {i}: returned value");
    }
    for (i, v) in w32.iter().enumerate() {
        assert_eq!(l32(0x100 + 4 * i), *v, "32-bit op {i}: returned value");
    }
    assert_eq!(r64(0), (w64[0] & !0xffff) | 0xabcd);
    assert_eq!(r64(8), w64[1]);
    assert_eq!(
        r64(16),
        masked_add(w64[2], 0x0101_0101_0101_0101, 0x8080_8080_8080_8080, 64)
    );
    assert_eq!(r64(16), 0x0100_0100_0100_0100);
    assert_eq!(r64(24), w64[3] ^ 0x0f0f_0000_0000_f0f0);
    assert_eq!(r32(0x100), (w32[0] & !0xff) | 0x11);
    assert_eq!(r32(0x104), w32[1]);
    assert_eq!(
        u64::from(r32(0x108)),
        masked_add(u64::from(w32[2]), 0x0101_0101, 0x8000_8000, 32)
    );
    assert_eq!(r32(0x10c), 0x8000_0000);
    let sent = q.sent(a.qpn);
    assert!(sent.iter().all(|p| p.status == WcStatus::Success));
    let lens: Vec<u32> = sent.iter().map(|p| p.len).collect();
    assert_eq!(lens, [8, 8, 8, 8, 4, 4, 4, 4], "byte_len = operand size");
    check_all(&ledger, &q.retired);
}

#[test]
fn srq_error_and_flush_keep_the_shared_queue_step() {
    srq_error_and_flush_keep_the_shared_queue(step());
}

// ---------------------------------------------------------------------------
// Striding RQ flush
// ---------------------------------------------------------------------------

#[test]
fn striding_rq_flush_completes_every_posted_wqe_once() {
    let mut f = Fabric::new(step());
    let mut cq_a = f.cq(64, CqeSize::B64, None, false);
    let mut cq_b = f.cq(64, CqeSize::B64, None, true);
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
    let mut rq = TestStridingRq::new(b.rq.as_ref().expect("rq"), f.buffer(8 * 1024));
    let mut ledger = Ledger::default();
    for i in 0..6u64 {
        rq.post(0x100 + i).expect("post");
        ledger.recv(b.qpn.0, 0x100 + i);
    }
    rq.commit();
    let src = f.buffer(1 << 14);
    let mut q: Queues<P> = Queues::default();
    q.sqs.insert(a.qpn.0, f.send_queue(a));
    q.strided.insert(b.qpn.0, rq);
    // Three packets of 300 bytes (5 strides each) into the first WQE of
    // 16 strides: it is left partly used.
    {
        let mut batch = q.sq(a.qpn).start();
        for id in 0..3u64 {
            let mut fr = pattern(id, 300);
            fr[..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
            fr[12..14].copy_from_slice(&0x88b5u16.to_be_bytes());
            src.write(512 * id as usize, &fr);
            batch
                .send(id)
                .expect("send")
                .signaled()
                .frame(src.key, src.addr(512 * id as usize), &fr)
                .expect("frame");
            ledger.send(a.qpn.0, id);
        }
        batch.complete();
    }
    f.run_until(&mut [&mut cq_a, &mut cq_b], &mut q, |q| {
        q.received().len() >= 3
    });
    assert_eq!(q.strided.get(&b.qpn.0).expect("rq").outstanding(), 6);
    // To error: the partly used WQE and the five untouched ones are flushed,
    // one flush CQE each.
    f.be.to_error(b.qpn).expect("to error");
    f.run_until(&mut [&mut cq_a, &mut cq_b], &mut q, |q| {
        q.received().len() >= 3 + 6
    });
    f.settle(&mut [&mut cq_a, &mut cq_b], &mut q, 3);
    let recv = q.received();
    assert_eq!(recv.len(), 9, "{recv:?}");
    assert!(recv[..3].iter().all(|p| p.status == WcStatus::Success));
    assert!(recv[3..].iter().all(|p| p.status == WcStatus::WrFlushErr));
    assert_eq!(q.strided.get(&b.qpn.0).expect("rq").outstanding(), 0);
    let retired_recv: Vec<u64> = q
        .retired
        .iter()
        .filter(|r| !r.requester)
        .map(|r| r.wr_id)
        .collect();
    assert_eq!(retired_recv, (0x100..0x106).collect::<Vec<_>>());
    check_all(&ledger, &q.retired);
}

// ---------------------------------------------------------------------------
// Local invalidate
// ---------------------------------------------------------------------------

/// A local invalidate's completion reports `IBV_WC_LOCAL_INV` with its
/// wr_id: the CQE's UMR opcode cannot name it, so the send queue records
/// it at post time (libmlx5 `sq.wr_data`, `handle_good_req`) and the
/// retire passes it to the poller. The invalidation took effect: a write
/// from that key afterwards fails with a local protection error.
#[test]
fn local_invalidate_completion_reports_its_opcode() {
    use mlx5dp::cq::WcOpcode;
    use mlx5dp_setup::emu::Access;
    let mut f = Fabric::new(step());
    let mut cq = f.cq(64, CqeSize::B64, None, false);
    let a = f.qp(QpSpec::new(QpType::Rc), &cq, Some(&cq));
    let b = f.qp(QpSpec::new(QpType::Rc), &cq, Some(&cq));
    f.connect(a.qpn, b.qpn);
    let pd = f.pd;
    let local =
        f.be.reg_buffer(pd, 4096, Access::ALL | Access::INVALIDATE)
            .expect("reg_buffer");
    let remote = f.buffer(4096);
    let mut q: Queues<P> = Queues::default();
    q.sqs.insert(a.qpn.0, f.send_queue(a));
    let mut batch = q.sq(a.qpn).start();
    batch
        .local_inv(0x11, local.key)
        .expect("local_inv")
        .signaled()
        .post()
        .expect("post");
    batch
        .rdma_write(0x12, remote.key, remote.addr(0))
        .expect("write")
        .signaled()
        .sge(local.key, local.addr(0), 64)
        .expect("sge");
    batch.complete();
    f.run_for(&mut [&mut cq], &mut q, 2);
    let sent = q.sent(a.qpn);
    assert_eq!(sent.len(), 2, "{sent:?}");
    assert_eq!(
        (sent[0].wr_id, sent[0].status, sent[0].opcode),
        (0x11, WcStatus::Success, WcOpcode::LocalInv)
    );
    assert_eq!(
        (sent[1].wr_id, sent[1].status),
        (0x12, WcStatus::LocProtErr)
    );
}
