//! RC send/receive with SGE lists and inline data, RDMA write / read /
//! write with immediate and atomics, raw Ethernet between two QPs of a
//! port, ring wraps under every doorbell policy, and completions without
//! compression: on every backend.

use super::no_core_mistakes;
use crate::e2e::check::{check_all, Ledger};
use crate::e2e::{pattern, Fabric, QpSpec, Queues};
use mlx5dp::cq::{Origin, WcOpcode};
use mlx5dp::prm::{CqeOpcode, WcStatus};
use mlx5dp::rq::Sge as RSge;
use mlx5dp::sq::{BlueFlamePreferred, DoorbellPolicy, PostError, Sge};
use mlx5dp_setup::backend::{Backend, FlowRule};
use mlx5dp_setup::emu::{CqeSize, QpType, RqInit};

/// RC: eight receives of two SGEs; sends of 1–4 SGEs, inline data, an
/// inline list and immediate data, in two batches; every byte checked.
pub fn rc_send_recv<B: Backend>(be: B) {
    let mut f = Fabric::new(be);
    let mut cq_a = f.cq(256, CqeSize::B64, None, false);
    let mut cq_b = f.cq(256, CqeSize::B64, None, false);
    let a = f.qp(QpSpec::new(QpType::Rc), &cq_a, Some(&cq_a));
    let b = f.qp(QpSpec::new(QpType::Rc), &cq_b, Some(&cq_b));
    f.connect(a.qpn, b.qpn);
    let src = f.buffer(1 << 16);
    let dst = f.buffer(1 << 16);
    let mut q: Queues<BlueFlamePreferred> = Queues::default();
    q.sqs.insert(a.qpn.0, f.send_queue(a));
    q.rqs.insert(b.qpn.0, f.recv_queue(b));
    let mut ledger = Ledger::default();

    // Eight receives of two SGEs each (1000 + 3000 bytes).
    for i in 0..8u64 {
        let base = i as usize * 4096;
        let sges = [
            RSge {
                addr: dst.addr(base),
                length: 1000,
                lkey: dst.key,
            },
            RSge {
                addr: dst.addr(base + 1000),
                length: 3000,
                lkey: dst.key,
            },
        ];
        q.rq(b.qpn.0).post(0x100 + i, &sges).expect("post recv");
        ledger.recv(b.qpn.0, 0x100 + i);
    }
    q.rq(b.qpn.0).commit();

    // Messages: SGE lists of 1..=4 entries, inline, an inline list, imm.
    let msgs: Vec<Vec<u8>> = (0..8).map(|i| pattern(i, 100 + 450 * i as usize)).collect();
    let mut off = 0;
    let mut places = Vec::new();
    for m in &msgs {
        src.write(off, m);
        places.push(off);
        off += m.len().next_multiple_of(64);
    }
    {
        let sq = q.sq(a.qpn);
        let mut batch = sq.start();
        for (i, m) in msgs.iter().enumerate().take(4) {
            // Split message i into i + 1 SGEs.
            let n = i + 1;
            let chunk = m.len().div_ceil(n);
            let sges: Vec<Sge> = m
                .chunks(chunk)
                .enumerate()
                .map(|(k, c)| Sge::new(src.key, src.addr(places[i] + k * chunk), c.len() as u32))
                .collect();
            batch
                .send(i as u64)
                .expect("send")
                .signaled()
                .sge_list(&sges)
                .expect("sge_list");
            ledger.send(a.qpn.0, i as u64);
        }
        batch.complete();
    }
    {
        let sq = q.sq(a.qpn);
        let mut batch = sq.start();
        batch
            .send(4)
            .expect("send")
            .signaled()
            .inline_data(&msgs[4][..200])
            .expect("inline");
        let (x, y) = msgs[5][..250].split_at(77);
        batch
            .send(5)
            .expect("send")
            .inline_data_list(&[x, y])
            .expect("inline list");
        batch
            .send_imm(6, 0xdead_beef)
            .expect("send_imm")
            .signaled()
            .sge(src.key, src.addr(places[6]), msgs[6].len() as u32)
            .expect("sge");
        batch
            .send(7)
            .expect("send")
            .signaled()
            .sge(src.key, src.addr(places[7]), msgs[7].len() as u32)
            .expect("sge");
        batch.complete();
        for i in 4..8 {
            ledger.send(a.qpn.0, i);
        }
    }
    f.run_until(&mut [&mut cq_a, &mut cq_b], &mut q, |q| {
        q.retired.len() >= 16
    });
    let expect: Vec<&[u8]> = vec![
        &msgs[0],
        &msgs[1],
        &msgs[2],
        &msgs[3],
        &msgs[4][..200],
        &msgs[5][..250],
        &msgs[6],
        &msgs[7],
    ];
    let recvs = q.received();
    assert_eq!(recvs.len(), 8);
    for (i, r) in recvs.iter().enumerate() {
        assert_eq!(r.status, WcStatus::Success);
        assert_eq!(r.wr_id, 0x100 + i as u64);
        assert_eq!(r.len as usize, expect[i].len(), "message {i}");
        assert_eq!(r.src_qp, a.qpn.0);
        assert_eq!(
            dst.read(i * 4096, expect[i].len()),
            expect[i],
            "message {i}"
        );
        if i == 6 {
            assert_eq!(r.imm, Some(0xdead_beef));
            assert_eq!(r.cqe_opcode, CqeOpcode::RespSendImm);
        } else {
            assert_eq!(r.imm, None);
        }
        assert_eq!(r.opcode, WcOpcode::Recv);
    }
    for s in q.sent(a.qpn) {
        assert_eq!((s.status, s.opcode), (WcStatus::Success, WcOpcode::Send));
    }
    check_all(&ledger, &q.retired);
    no_core_mistakes(&mut f);
}

/// RC: RDMA writes (SGE list and inline), a fenced read back, compare-
/// and-swap and fetch-and-add (8-byte, host byte order), a write with
/// immediate data; remote and local memory checked.
pub fn rdma_and_atomics<B: Backend>(be: B) {
    let mut f = Fabric::new(be);
    let mut cq_a = f.cq(128, CqeSize::B64, None, false);
    let mut cq_b = f.cq(128, CqeSize::B64, None, false);
    let a = f.qp(QpSpec::new(QpType::Rc), &cq_a, Some(&cq_a));
    let b = f.qp(QpSpec::new(QpType::Rc), &cq_b, Some(&cq_b));
    f.connect(a.qpn, b.qpn);
    let local = f.buffer(1 << 15);
    let remote = f.buffer(1 << 15);
    let mut q: Queues<BlueFlamePreferred> = Queues::default();
    q.sqs.insert(a.qpn.0, f.send_queue(a));
    q.rqs.insert(b.qpn.0, f.recv_queue(b));
    let mut ledger = Ledger::default();
    q.rq(b.qpn.0).post(0x900, &[]).expect("post recv");
    q.rq(b.qpn.0).commit();
    ledger.recv(b.qpn.0, 0x900);

    let data = pattern(7, 5000);
    local.write(0, &data);
    remote.write(0x4000, &0x1111_2222_3333_4444u64.to_ne_bytes());
    remote.write(0x4008, &100u64.to_ne_bytes());
    {
        let sq = q.sq(a.qpn);
        let mut b1 = sq.start();
        // Write 5000 bytes from two SGEs to remote + 0x100.
        b1.rdma_write(1, remote.key, remote.addr(0x100))
            .expect("write")
            .sge_list(&[
                Sge::new(local.key, local.addr(0), 3000),
                Sge::new(local.key, local.addr(3000), 2000),
            ])
            .expect("sges");
        // Inline write.
        b1.rdma_write(2, remote.key, remote.addr(0x3000))
            .expect("write")
            .inline_data(b"inline write!")
            .expect("inline");
        // Read them back (fenced after the writes, as an app would).
        b1.rdma_read(3, remote.key, remote.addr(0x100))
            .expect("read")
            .fence()
            .signaled()
            .sge(local.key, local.addr(0x2000), 5000)
            .expect("sge");
        b1.atomic_cmp_swp(4, remote.key, remote.addr(0x4000), 0x1111_2222_3333_4444, 7)
            .expect("cs")
            .signaled()
            .sge(local.key, local.addr(0x6000), 8)
            .expect("sge");
        b1.atomic_fetch_add(5, remote.key, remote.addr(0x4008), 23)
            .expect("fa")
            .signaled()
            .sge(local.key, local.addr(0x6008), 8)
            .expect("sge");
        b1.atomic_cmp_swp(6, remote.key, remote.addr(0x4000), 99, 1)
            .expect("cs")
            .signaled()
            .sge(local.key, local.addr(0x6010), 8)
            .expect("sge");
        b1.rdma_write_imm(7, remote.key, remote.addr(0x5000), 0x0bad_cafe)
            .expect("write imm")
            .signaled()
            .sge(local.key, local.addr(0), 64)
            .expect("sge");
        b1.complete();
        for i in 1..=7 {
            ledger.send(a.qpn.0, i);
        }
    }
    f.run_until(&mut [&mut cq_a, &mut cq_b], &mut q, |q| {
        q.retired.len() >= 8
    });
    assert_eq!(remote.read(0x100, 5000), data);
    assert_eq!(remote.read(0x3000, 13), b"inline write!");
    assert_eq!(local.read(0x2000, 5000), data);
    let word = |b: &mlx5dp_setup::backend::Buffer, off| {
        u64::from_ne_bytes(b.read(off, 8).try_into().expect("8 bytes"))
    };
    assert_eq!(word(&local, 0x6000), 0x1111_2222_3333_4444);
    assert_eq!(word(&local, 0x6008), 100);
    assert_eq!(word(&local, 0x6010), 7);
    assert_eq!(word(&remote, 0x4000), 7);
    assert_eq!(word(&remote, 0x4008), 123);
    assert_eq!(remote.read(0x5000, 64), &data[..64]);
    let sent = q.sent(a.qpn);
    let ops: Vec<(u64, WcOpcode)> = sent.iter().map(|p| (p.wr_id, p.opcode)).collect();
    assert_eq!(
        ops,
        [
            (3, WcOpcode::RdmaRead),
            (4, WcOpcode::CompSwap),
            (5, WcOpcode::FetchAdd),
            (6, WcOpcode::CompSwap),
            (7, WcOpcode::RdmaWrite),
        ]
    );
    assert_eq!(sent[0].len, 5000, "read byte count");
    let r = q.received();
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].cqe_opcode, CqeOpcode::RespWrImm);
    assert_eq!(r[0].opcode, WcOpcode::RecvRdmaWithImm);
    assert_eq!(r[0].imm, Some(0x0bad_cafe));
    assert_eq!(r[0].len, 64);
    check_all(&ledger, &q.retired);
    no_core_mistakes(&mut f);
}

/// A raw frame of `len` bytes to `dmac` (EtherType 0x88b5, local
/// experimental), payload seeded by `seed`.
pub fn frame(dmac: [u8; 6], len: usize, seed: u64) -> Vec<u8> {
    let mut f = pattern(seed, len);
    f[..6].copy_from_slice(&dmac);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
    f[12..14].copy_from_slice(&0x88b5u16.to_be_bytes());
    f
}

/// Raw Ethernet: four frames (gathered, and one inline) from one
/// RAW_PACKET QP to another through a steering rule on the destination
/// MAC. On a ConnectX the frames must come back to the port: local
/// loopback on the transport domain, or a looped cable / switch hairpin.
pub fn raw_loopback<B: Backend>(be: B) {
    let mut f = Fabric::new(be);
    let mut cq = f.cq(128, CqeSize::B64, None, false);
    let a = f.qp(QpSpec::new(QpType::RawPacket), &cq, Some(&cq));
    let b = f.qp(QpSpec::new(QpType::RawPacket), &cq, Some(&cq));
    f.ud_up(a.qpn, 0);
    f.ud_up(b.qpn, 0);
    let mac = [2, 0, 0, 0, 0, 2];
    f.be.add_flow(FlowRule {
        qpn: b.qpn,
        dmac: Some(mac),
        ethertype: None,
        flow_tag: b.qpn.0,
    })
    .expect("flow");
    let buf = f.buffer(1 << 15);
    let mut q: Queues<BlueFlamePreferred> = Queues::default();
    q.sqs.insert(a.qpn.0, f.send_queue(a));
    q.rqs.insert(b.qpn.0, f.recv_queue(b));
    let mut ledger = Ledger::default();
    for i in 0..4u64 {
        q.rq(b.qpn.0)
            .post(
                0x70 + i,
                &[RSge {
                    addr: buf.addr(0x4000 + 0x800 * i as usize),
                    length: 0x800,
                    lkey: buf.key,
                }],
            )
            .expect("post recv");
        ledger.recv(b.qpn.0, 0x70 + i);
    }
    q.rq(b.qpn.0).commit();
    // The last one is sent inline: within max_inline (256).
    let frames: Vec<Vec<u8>> = [64, 364, 1400, 200]
        .into_iter()
        .enumerate()
        .map(|(i, len)| frame(mac, len, i as u64))
        .collect();
    {
        let sq = q.sq(a.qpn);
        let mut batch = sq.start();
        for (i, fr) in frames.iter().enumerate() {
            buf.write(0x1000 * i, fr);
            if i == 3 {
                batch
                    .send(i as u64)
                    .expect("send")
                    .signaled()
                    .inline_data(fr)
                    .expect("inline frame");
            } else {
                batch
                    .send(i as u64)
                    .expect("send")
                    .signaled()
                    .frame(buf.key, buf.addr(0x1000 * i), fr)
                    .expect("frame");
            }
            ledger.send(a.qpn.0, i as u64);
        }
        batch.complete();
    }
    f.run_until(&mut [&mut cq], &mut q, |q| q.retired.len() >= 8);
    let r = q.received();
    assert_eq!(r.len(), 4);
    for (i, p) in r.iter().enumerate() {
        assert_eq!(p.status, WcStatus::Success);
        assert_eq!(p.len as usize, frames[i].len());
        assert_eq!(
            buf.read(0x4000 + 0x800 * i, frames[i].len()),
            frames[i],
            "frame {i}"
        );
    }
    check_all(&ledger, &q.retired);
    no_core_mistakes(&mut f);
}

/// Many iterations over small rings: every ring (SQ, RQ, CQ) wraps many
/// times; message sizes vary so WQEs of 1–4 WQEBBs cross the SQ end;
/// batches of 1–5 work requests share one doorbell.
pub fn wraps<B: Backend, P: DoorbellPolicy>(be: B, iterations: usize) {
    let mut f = Fabric::new(be);
    let mut cq_a = f.cq(16, CqeSize::B64, None, false);
    let mut cq_b = f.cq(16, CqeSize::B128, None, false);
    let mut spec = QpSpec::new(QpType::Rc);
    spec.sq_wqebbs = 16;
    spec.rq = RqInit::Cyclic {
        wqe_cnt: 8,
        max_sge: 1,
    };
    let a = f.qp(spec, &cq_a, Some(&cq_a));
    let b = f.qp(spec, &cq_b, Some(&cq_b));
    f.connect(a.qpn, b.qpn);
    let src = f.buffer(1 << 14);
    let dst = f.buffer(1 << 14);
    let mut q: Queues<P> = Queues::default();
    q.sqs.insert(a.qpn.0, f.send_queue(a));
    q.rqs.insert(b.qpn.0, f.recv_queue(b));
    let mut ledger = Ledger::default();
    let mut next_recv = 0u64;
    let mut wr = 0u64;
    let mut expect = std::collections::VecDeque::new();
    let mut checked = 0;
    for it in 0..iterations {
        // Keep the RQ full.
        while q.rq(b.qpn.0).outstanding() < 8 {
            let slot = (next_recv % 8) as usize;
            q.rq(b.qpn.0)
                .post(
                    next_recv,
                    &[RSge {
                        addr: dst.addr(slot * 1024),
                        length: 1024,
                        lkey: dst.key,
                    }],
                )
                .expect("post recv");
            ledger.recv(b.qpn.0, next_recv);
            next_recv += 1;
        }
        q.rq(b.qpn.0).commit();
        let n = 1 + it % 5;
        {
            let sq = q.sqs.get_mut(&a.qpn.0).expect("sq");
            let mut batch = sq.start();
            for k in 0..n {
                let len = 1 + (wr as usize * 37) % 200;
                let msg = pattern(wr, len);
                let inline = wr % 3 != 0;
                let res = if inline {
                    batch
                        .send(wr)
                        .expect("send")
                        .signaled_if(k == n - 1)
                        .inline_data(&msg)
                } else {
                    src.write((wr as usize % 16) * 256, &msg);
                    batch.send(wr).expect("send").signaled_if(k == n - 1).sge(
                        src.key,
                        src.addr((wr as usize % 16) * 256),
                        len as u32,
                    )
                };
                match res {
                    Ok(()) => {
                        ledger.send(a.qpn.0, wr);
                        expect.push_back(msg);
                        wr += 1;
                    }
                    Err(PostError::QueueFull) => break,
                    Err(e) => panic!("post: {e:?}"),
                }
            }
            batch.complete();
        }
        // Receive everything posted so far; check each message as it lands.
        f.run_until(&mut [&mut cq_a, &mut cq_b], &mut q, |q| {
            q.retired.iter().filter(|r| !r.requester).count() as u64 == wr
                && q.sqs.values().all(|s| s.outstanding() == 0)
        });
        let recvs = q.received();
        for p in &recvs[checked..] {
            let msg = expect.pop_front().expect("an expected message");
            let slot = (p.wr_id % 8) as usize;
            assert_eq!(p.len as usize, msg.len());
            assert_eq!(dst.read(slot * 1024, msg.len()), msg, "message {}", p.wr_id);
        }
        checked = recvs.len();
    }
    assert!(wr > 16 * 8, "the SQ wrapped many times");
    // The receives still posted are flushed when the QP goes to error.
    f.be.to_error(b.qpn).expect("to error");
    let posted = ledger.len();
    f.run_until(&mut [&mut cq_a, &mut cq_b], &mut q, |q| {
        q.retired.len() == posted
    });
    check_all(&ledger, &q.retired);
    no_core_mistakes(&mut f);
}

/// Without compression every completion is a regular CQE (a mini is
/// reported like any other completion; `e2e_rx` checks those).
pub fn origin_regular_without_compression<B: Backend>(be: B) {
    let mut f = Fabric::new(be);
    let mut cq = f.cq(64, CqeSize::B64, None, false);
    let a = f.qp(QpSpec::new(QpType::Rc), &cq, Some(&cq));
    let b = f.qp(QpSpec::new(QpType::Rc), &cq, Some(&cq));
    f.connect(a.qpn, b.qpn);
    let mut q: Queues<BlueFlamePreferred> = Queues::default();
    q.sqs.insert(a.qpn.0, f.send_queue(a));
    let sq = q.sq(a.qpn);
    let mut batch = sq.start();
    for i in 0..4 {
        batch.nop(i).expect("nop").signaled().post().expect("post");
    }
    batch.complete();
    f.run_for(&mut [&mut cq], &mut q, 4);
    assert!(q.polled.iter().all(|p| p.origin == Origin::Regular));
}
