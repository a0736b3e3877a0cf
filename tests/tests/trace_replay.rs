//! Replays every trace in `hw-traces/`: each record is decoded with
//! `mlx5dp_setup::decode` — WQEs and CQEs with the entry decoders, whole
//! compressed sessions with `decode::cq::decode_ring` (the core's own
//! poller over a ring rebuilt from the record), doorbell records and UAR
//! writes through the `prm` layouts — and every value the record stores
//! is checked against the decoded fields. The decoding and checking are
//! `mlx5dp_setup::trace_record` (`decode`, `check_record`): the same code
//! `mlx5dp trace replay` runs on a trace from a ConnectX.
//!
//! - `captured/` (real hardware): every file must replay here as
//!   `mlx5dp trace replay` replays it, the values their sources printed
//!   checked with the sources' own key names
//!   (`mlx5dp_setup::decode::published`, which `tests/tests/hw_traces.rs`
//!   also runs, with more checks of its own).
//! - `emulated/` (recorded from the emulated device, `# recorded-by:
//!   mlx5dp emulated device`): every `# expect:` value is the device's own
//!   view (what it meant to post or complete), checked strictly here: an
//!   unknown key, a missing field or a different value fails.
//!
//! The `record_emulated_traces` test (ignored by default) is the tool that
//! writes `hw-traces/emulated/`:
//! `cargo test -p mlx5dp-tests --test trace_replay -- --ignored record_emulated_traces`.

#![expect(
    clippy::unwrap_used,
    reason = "test helpers: a failed read is a test failure"
)]

use mlx5dp::prm::{Av, MiniCqeFormat};
use mlx5dp::rq::Sge as RSge;
use mlx5dp::sq::{BlueFlamePreferred, DoorbellOnly, Sge};
use mlx5dp_setup::backend::{AhAttr, Backend, EmuBackend};
use mlx5dp_setup::decode::trace::{parse_records, TraceRecord};
use mlx5dp_setup::emu::device::FlowRule;
use mlx5dp_setup::emu::{
    CompressionCfg, CompressionLayout, CqeSize, DeviceConfig, Fault, QpType, Recorder, RqInit,
};
use mlx5dp_setup::trace_record::{check_record, decode, number, param, replay};
use mlx5dp_tests::e2e::frames;
use mlx5dp_tests::e2e::{leak, pattern, Fabric, QpSpec, Queues, TestStridingRq};
use std::path::{Path, PathBuf};

fn traces_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../hw-traces")
}

/// Every record of every `*.txt` file under `hw-traces/<sub>/`.
fn records_in(sub: &str) -> Vec<(PathBuf, TraceRecord)> {
    let dir = traces_dir().join(sub);
    let Ok(rd) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = rd
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .collect();
    files.sort();
    let mut out = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let recs = parse_records(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        out.extend(recs.into_iter().map(|r| (file.clone(), r)));
    }
    out
}

/// [`check_record`] (the replay `mlx5dp trace replay` runs), for a record
/// that must be the emulator's: `origin: emulator`, marked
/// `# recorded-by: mlx5dp emulated device`, with expect values.
fn check_emulated(rec: &TraceRecord) -> Result<usize, String> {
    if rec.origin != "emulator" {
        return Err(format!("origin `{}`, not `emulator`", rec.origin));
    }
    check_record(rec)
}

#[test]
fn every_record_in_hw_traces_replays() {
    let captured = records_in("captured");
    assert!(!captured.is_empty(), "hw-traces/captured/ is empty");
    let emulated = records_in("emulated");
    let mut failures = Vec::new();
    for (file, rec) in &captured {
        if param(rec, "recorded-by").is_some() || rec.origin != "captured" {
            failures.push(format!(
                "[{}] {}: captured/ holds hardware dumps only",
                rec.id,
                file.display()
            ));
        }
        if let Err(e) = decode(rec) {
            failures.push(format!("[{}] {}: {e}", rec.id, file.display()));
        }
    }
    // Every captured file through `mlx5dp trace replay`'s own function,
    // which checks published dumps with the sources' key names.
    let mut files: Vec<&PathBuf> = captured.iter().map(|(f, _)| f).collect();
    files.dedup();
    let (mut published_checked, mut context_only) = (0, 0);
    for file in files {
        match replay(&std::fs::read_to_string(file).unwrap()) {
            Ok(s) => {
                published_checked += s.checked;
                context_only += s.context_only;
            }
            Err(e) => failures.push(format!("{}: {}", file.display(), e.join("; "))),
        }
    }
    let mut checked = 0;
    let mut kinds = std::collections::BTreeMap::<String, usize>::new();
    for (file, rec) in &emulated {
        *kinds.entry(rec.kind.clone()).or_default() += 1;
        match check_emulated(rec) {
            Ok(n) => checked += n,
            Err(e) => failures.push(format!("[{}] {}: {e}", rec.id, file.display())),
        }
    }
    println!(
        "{} captured records replayed, {published_checked} values their sources printed checked, \
         {context_only} context only; {} emulated records, {checked} stored values checked; kinds {kinds:?}",
        captured.len(),
        emulated.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Every scenario family has its recorded trace, and every record kind
/// appears somewhere.
#[test]
fn emulated_traces_cover_every_family_and_kind() {
    let emulated = records_in("emulated");
    for family in FAMILIES {
        let file = traces_dir().join("emulated").join(format!("{family}.txt"));
        assert!(
            emulated.iter().any(|(f, _)| *f == file),
            "no records in {}",
            file.display()
        );
    }
    for kind in [
        "wqe",
        "cqe64",
        "cqe128",
        "error_cqe64",
        "cqe_session",
        "dbrec",
        "mmio_write",
    ] {
        assert!(
            emulated.iter().any(|(_, r)| r.kind == kind),
            "no emulated record of kind {kind}"
        );
    }
    for fmt in [
        "hash",
        "csum",
        "ftag-stridx",
        "csum-stridx",
        "l34h-stridx",
        "req",
    ] {
        for layout in ["basic", "enhanced"] {
            assert!(
                emulated.iter().any(|(_, r)| r.kind == "cqe_session"
                    && r.mini_format.as_deref() == Some(fmt)
                    && param(r, "layout") == Some(layout)),
                "no {layout} session in mini format {fmt}"
            );
        }
    }
}

/// A wrong expectation fails: each record kind, one value changed.
#[test]
fn a_wrong_expectation_fails() {
    let emulated = records_in("emulated");
    let mut tried = std::collections::BTreeSet::new();
    for (_, rec) in &emulated {
        if !tried.insert(rec.kind.clone()) {
            continue;
        }
        check_emulated(rec).unwrap();
        for i in 0..rec.expect.len() {
            let mut bad = rec.clone();
            let (k, v) = bad.expect[i].clone();
            bad.expect[i].1 = match v.as_str() {
                "true" => "false".into(),
                "false" => "true".into(),
                _ => match number(&v) {
                    Some(n) => format!("{:#x}", n ^ 1),
                    None => format!("{v}_not"),
                },
            };
            let err = check_emulated(&bad).unwrap_err();
            assert!(err.starts_with(&k), "[{}] {k}: {err}", rec.id);
        }
        // An unknown key fails too.
        let mut bad = rec.clone();
        bad.expect.push(("frobnication".into(), "1".into()));
        assert!(check_emulated(&bad).is_err());
        // And so does a record that is not marked as the emulator's.
        let mut bad = rec.clone();
        bad.other.retain(|(k, _)| k != "recorded-by");
        assert!(check_emulated(&bad).is_err());
    }
    assert!(tried.len() >= 5, "only kinds {tried:?}");
}

/// The device records in memory, and what it records checks.
#[test]
fn recording_in_memory_round_trips() {
    let mut be = step();
    be.with(|d| d.start_recording_to(Recorder::new("memory", None)));
    let mut be = rc_send_recv(be, 4);
    let rec = be.with(|d| d.take_recorder()).unwrap();
    assert!(rec.stats().total() > 10, "{:?}", rec.stats());
    let recs = parse_records(rec.text()).unwrap();
    assert_eq!(recs.len() as u32, rec.stats().total());
    for r in &recs {
        check_emulated(r).unwrap_or_else(|e| panic!("[{}] {e}", r.id));
    }
    // Off again: nothing more is recorded.
    assert!(be.with(|d| d.recorder().is_none()));
}

// ---------------------------------------------------------------------------
// The recording tool: one scenario per family
// ---------------------------------------------------------------------------

/// Scenario families with a file in `hw-traces/emulated/`.
const FAMILIES: &[&str] = &[
    "rc-send-recv",
    "rdma-write-read",
    "atomics",
    "ud",
    "raw-ethernet",
    "faults-flushes",
    "striding-rq",
    "zip-basic-hash",
    "zip-basic-csum",
    "zip-basic-ftag-stridx",
    "zip-basic-csum-stridx",
    "zip-basic-l34h-stridx",
    "zip-enhanced-hash",
    "zip-enhanced-csum",
    "zip-enhanced-ftag-stridx",
    "zip-enhanced-csum-stridx",
    "zip-enhanced-l34h-stridx",
];

fn step() -> EmuBackend {
    EmuBackend::step_mode(DeviceConfig::default())
}

type P = BlueFlamePreferred;

/// RC sends of every shape into a receive queue, `rounds` batches.
fn rc_send_recv(be: EmuBackend, rounds: u64) -> EmuBackend {
    rc_pair(be, rounds, None, CqeSize::B64)
}

fn rc_pair(be: EmuBackend, rounds: u64, zip: Option<CompressionCfg>, size: CqeSize) -> EmuBackend {
    let mut f = Fabric::new(be);
    let mut cq_a = f.cq(64, size, zip, false);
    let mut cq_b = f.cq(64, size, zip, false);
    let a = f.qp(QpSpec::new(QpType::Rc), &cq_a, Some(&cq_a));
    let b = f.qp(QpSpec::new(QpType::Rc), &cq_b, Some(&cq_b));
    f.connect(a.qpn, b.qpn);
    let buf = f.buffer(1 << 16);
    let mut q: Queues<P> = Queues::default();
    q.sqs.insert(a.qpn.0, f.send_queue(a));
    q.rqs.insert(b.qpn.0, f.recv_queue(b));
    let mut id = 0u64;
    for _ in 0..rounds {
        for k in 0..6u64 {
            q.rq(b.qpn.0)
                .post(
                    id + k,
                    &[RSge {
                        addr: buf.addr(0x8000 + 1024 * ((id + k) as usize % 16)),
                        length: 1024,
                        lkey: buf.key,
                    }],
                )
                .unwrap();
        }
        q.rq(b.qpn.0).commit();
        let mut batch = q.sq(a.qpn).start();
        for k in 0..6u64 {
            let n = id + k;
            let len = 1 + (n as usize * 37) % 900;
            buf.write(1024 * (n as usize % 16), &pattern(n, len));
            let wr = if k == 2 {
                batch.send_imm(n, 0x1234_0000 | n as u32).unwrap()
            } else {
                batch.send(n).unwrap()
            };
            let wr = wr.signaled();
            if k == 4 {
                wr.inline_data(&pattern(n, 40)).unwrap();
            } else if k == 5 {
                wr.sge_list(&[
                    Sge::new(buf.key, buf.addr(1024 * (n as usize % 16)), 10),
                    Sge::new(buf.key, buf.addr(1024 * (n as usize % 16) + 10), len as u32),
                ])
                .unwrap();
            } else {
                wr.sge(buf.key, buf.addr(1024 * (n as usize % 16)), len as u32)
                    .unwrap();
            }
        }
        batch.complete();
        id += 6;
        let want = 2 * id as usize;
        f.run_until(&mut [&mut cq_a, &mut cq_b], &mut q, |q| {
            q.polled.len() >= want
        });
        cq_b.arm(false);
        f.settle(&mut [&mut cq_a, &mut cq_b], &mut q, 1);
    }
    f.be
}

fn rdma_write_read(be: EmuBackend) -> EmuBackend {
    let mut f = Fabric::new(be);
    let mut cq = f.cq(64, CqeSize::B64, None, false);
    let a = f.qp(QpSpec::new(QpType::Rc), &cq, Some(&cq));
    let b = f.qp(QpSpec::new(QpType::Rc), &cq, Some(&cq));
    f.connect(a.qpn, b.qpn);
    let local = f.buffer(1 << 15);
    let remote = f.buffer(1 << 15);
    local.write(0, &pattern(1, 4000));
    let mut q: Queues<DoorbellOnly> = Queues::default();
    q.sqs.insert(a.qpn.0, f.send_queue(a));
    q.rqs.insert(b.qpn.0, f.recv_queue(b));
    q.rq(b.qpn.0).post(0x900, &[]).unwrap();
    q.rq(b.qpn.0).commit();
    let mut batch = q.sq(a.qpn).start();
    batch
        .rdma_write(1, remote.key, remote.addr(0x100))
        .unwrap()
        .signaled()
        .sge_list(&[
            Sge::new(local.key, local.addr(0), 3000),
            Sge::new(local.key, local.addr(3000), 1000),
        ])
        .unwrap();
    batch
        .rdma_write(2, remote.key, remote.addr(0x3000))
        .unwrap()
        .signaled()
        .inline_data(b"inline write!")
        .unwrap();
    batch
        .rdma_read(3, remote.key, remote.addr(0x100))
        .unwrap()
        .fence()
        .signaled()
        .sge(local.key, local.addr(0x2000), 4000)
        .unwrap();
    batch
        .rdma_write_imm(4, remote.key, remote.addr(0x5000), 0x0bad_cafe)
        .unwrap()
        .signaled()
        .sge(local.key, local.addr(0), 64)
        .unwrap();
    batch.complete();
    f.run_until(&mut [&mut cq], &mut q, |q| q.polled.len() >= 5);
    assert_eq!(local.read(0x2000, 4000), pattern(1, 4000));
    f.be
}

fn atomics(be: EmuBackend) -> EmuBackend {
    let mut f = Fabric::new(be);
    let mut cq = f.cq(64, CqeSize::B128, None, false);
    let a = f.qp(QpSpec::new(QpType::Rc), &cq, Some(&cq));
    let b = f.qp(QpSpec::new(QpType::Rc), &cq, Some(&cq));
    f.connect(a.qpn, b.qpn);
    let local = f.buffer(1 << 12);
    let remote = f.buffer(1 << 12);
    let mut q: Queues<P> = Queues::default();
    q.sqs.insert(a.qpn.0, f.send_queue(a));
    let mut batch = q.sq(a.qpn).start();
    let r = |off| remote.addr(off);
    let l = |off| local.addr(off);
    batch
        .atomic_cmp_swp(1, remote.key, r(0), 0, 7)
        .unwrap()
        .signaled()
        .sge(local.key, l(0), 8)
        .unwrap();
    batch
        .atomic_fetch_add(2, remote.key, r(8), 5)
        .unwrap()
        .signaled()
        .sge(local.key, l(8), 8)
        .unwrap();
    batch
        .masked_cmp_swp_u64(3, remote.key, r(16), 0, 0xff, 0xabcd, 0xffff)
        .unwrap()
        .signaled()
        .sge(local.key, l(16), 8)
        .unwrap();
    batch
        .masked_cmp_swp_u32(4, remote.key, r(24), 0, 0xf0, 0x55, 0xff)
        .unwrap()
        .signaled()
        .sge(local.key, l(24), 4)
        .unwrap();
    batch
        .masked_fetch_add_u64(5, remote.key, r(32), 0x0101_0101, 0x8080_8080)
        .unwrap()
        .signaled()
        .sge(local.key, l(32), 8)
        .unwrap();
    batch
        .masked_fetch_add_u32(6, remote.key, r(40), 3, 0x8000)
        .unwrap()
        .signaled()
        .sge(local.key, l(40), 4)
        .unwrap();
    batch.complete();
    f.run_until(&mut [&mut cq], &mut q, |q| q.polled.len() >= 6);
    f.be
}

fn ud(be: EmuBackend) -> EmuBackend {
    let mut f = Fabric::new(be);
    let mut cq = f.cq(64, CqeSize::B64, None, false);
    let a = f.qp(QpSpec::new(QpType::Ud), &cq, Some(&cq));
    let b = f.qp(QpSpec::new(QpType::Ud), &cq, Some(&cq));
    f.ud_up(a.qpn, 0x1111);
    f.ud_up(b.qpn, 0x2222);
    let buf = f.buffer(1 << 14);
    let mut q: Queues<P> = Queues::default();
    q.sqs.insert(a.qpn.0, f.send_queue(a));
    q.rqs.insert(b.qpn.0, f.recv_queue(b));
    for i in 0..3u64 {
        q.rq(b.qpn.0)
            .post(
                0x50 + i,
                &[RSge {
                    addr: buf.addr(0x1000 * (i as usize + 1)),
                    length: 40 + 1024,
                    lkey: buf.key,
                }],
            )
            .unwrap();
    }
    q.rq(b.qpn.0).commit();
    buf.write(0, &pattern(3, 700));
    let av: &'static Av = leak(f.be.create_ah(f.pd, AhAttr::default()).unwrap());
    let mut batch = q.sq(a.qpn).start();
    batch
        .send(1)
        .unwrap()
        .signaled()
        .ud_addr(av, b.qpn.0, 0x2222)
        .unwrap()
        .sge(buf.key, buf.addr(0), 700)
        .unwrap();
    batch
        .send_imm(2, 42)
        .unwrap()
        .signaled()
        .ud_addr(av, b.qpn.0, 0x2222)
        .unwrap()
        .inline_data(b"hello ud")
        .unwrap();
    batch
        .send(3)
        .unwrap()
        .signaled()
        .ud_addr(av, b.qpn.0, 0x3333)
        .unwrap()
        .inline_data(b"dropped: wrong qkey")
        .unwrap();
    batch.complete();
    f.run_until(&mut [&mut cq], &mut q, |q| q.polled.len() >= 5);
    f.be
}

fn raw_ethernet(be: EmuBackend) -> EmuBackend {
    let mut f = Fabric::new(be);
    let mut cq = f.cq(64, CqeSize::B64, None, false);
    let a = f.qp(QpSpec::new(QpType::RawPacket), &cq, Some(&cq));
    let b = f.qp(QpSpec::new(QpType::RawPacket), &cq, Some(&cq));
    f.ud_up(a.qpn, 0);
    f.ud_up(b.qpn, 0);
    f.be.add_flow(FlowRule {
        qpn: b.qpn,
        dmac: Some(frames::DMAC),
        ethertype: None,
        flow_tag: b.qpn.0,
    })
    .unwrap();
    let buf = f.buffer(1 << 16);
    let mut q: Queues<P> = Queues::default();
    q.sqs.insert(a.qpn.0, f.send_queue(a));
    q.rqs.insert(b.qpn.0, f.recv_queue(b));
    for i in 0..8u64 {
        q.rq(b.qpn.0)
            .post(
                0x70 + i,
                &[RSge {
                    addr: buf.addr(0x8000 + 0x800 * i as usize),
                    length: 0x800,
                    lkey: buf.key,
                }],
            )
            .unwrap();
    }
    q.rq(b.qpn.0).commit();
    let udp = frames::ipv4_udp(&pattern(1, 300), 1);
    let tcp = frames::ipv4_tcp(&pattern(2, 500), 100, 2);
    let payload = pattern(3, 2500);
    let hdr: &'static [u8] = leak(frames::ipv4_tcp(&[], 1000, 3)).as_slice();
    buf.write(0, &udp);
    buf.write(0x1000, &tcp);
    buf.write(0x2000, &payload);
    let mut batch = q.sq(a.qpn).start();
    batch
        .send(1)
        .unwrap()
        .signaled()
        .ip_csum()
        .unwrap()
        .frame(buf.key, buf.addr(0), &udp)
        .unwrap();
    batch
        .send(2)
        .unwrap()
        .signaled()
        .ip_csum()
        .unwrap()
        .inline_data(&tcp[..200])
        .unwrap();
    batch
        .tso(3, hdr, 1000)
        .unwrap()
        .signaled()
        .sge(buf.key, buf.addr(0x2000), 2500)
        .unwrap();
    batch.complete();
    f.run_until(&mut [&mut cq], &mut q, |q| q.polled.len() >= 3 + 2 + 3);
    f.be
}

fn faults_flushes(be: EmuBackend) -> EmuBackend {
    let mut f = Fabric::new(be);
    let mut cq = f.cq(64, CqeSize::B64, None, false);
    let a = f.qp(QpSpec::new(QpType::Rc), &cq, Some(&cq));
    let b = f.qp(QpSpec::new(QpType::Rc), &cq, Some(&cq));
    f.connect(a.qpn, b.qpn);
    let buf = f.buffer(1 << 14);
    let mut q: Queues<P> = Queues::default();
    q.sqs.insert(a.qpn.0, f.send_queue(a));
    q.rqs.insert(a.qpn.0, f.recv_queue(a));
    q.rqs.insert(b.qpn.0, f.recv_queue(b));
    for i in 0..3u64 {
        q.rq(a.qpn.0)
            .post(
                0x100 + i,
                &[RSge {
                    addr: buf.addr(0x2000),
                    length: 64,
                    lkey: buf.key,
                }],
            )
            .unwrap();
    }
    q.rq(a.qpn.0).commit();
    // One good send, one with a bad lkey (LOCAL_PROT), three behind it.
    q.rq(b.qpn.0)
        .post(
            0x200,
            &[RSge {
                addr: buf.addr(0x3000),
                length: 64,
                lkey: buf.key,
            }],
        )
        .unwrap();
    q.rq(b.qpn.0).commit();
    let mut batch = q.sq(a.qpn).start();
    batch
        .send(1)
        .unwrap()
        .signaled()
        .inline_data(b"fine")
        .unwrap();
    batch
        .send(2)
        .unwrap()
        .signaled()
        .sge(0xdead_beef, buf.addr(0), 16)
        .unwrap();
    for i in 3..6 {
        batch
            .send(i)
            .unwrap()
            .signaled()
            .inline_data(b"flushed")
            .unwrap();
    }
    batch.complete();
    // 1 send + 1 recv + error + 3 flushes + 3 RQ flushes of `a`.
    f.run_until(&mut [&mut cq], &mut q, |q| q.polled.len() >= 9);
    // An injected fault on a fresh pair: REMOTE_ACCESS-like syndrome chosen by the test.
    let mut spec = QpSpec::new(QpType::Rc);
    spec.rq = RqInit::None;
    let c = f.qp(spec, &cq, None);
    let d = f.qp(spec, &cq, None);
    f.connect(c.qpn, d.qpn);
    q.sqs.insert(c.qpn.0, f.send_queue(c));
    f.be.inject(Fault::FailWqe {
        qpn: c.qpn,
        skip: 1,
        syndrome: mlx5dp::prm::Syndrome::RemoteAccess,
    })
    .unwrap();
    let mut batch = q.sq(c.qpn).start();
    for i in 10..13 {
        batch
            .rdma_write(i, buf.key, buf.addr(0x100))
            .unwrap()
            .signaled()
            .inline_data(b"w")
            .unwrap();
    }
    batch.complete();
    f.run_until(&mut [&mut cq], &mut q, |q| q.polled.len() >= 12);
    f.be
}

fn striding(be: EmuBackend, zip: Option<CompressionCfg>) -> EmuBackend {
    let mut f = Fabric::new(be);
    let mut cq_a = f.cq(64, CqeSize::B64, None, false);
    let mut cq_b = f.cq(64, CqeSize::B64, zip, true);
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
    .unwrap();
    let mut rq = TestStridingRq::new(b.rq.as_ref().unwrap(), f.buffer(8 * 1024));
    for i in 0..8 {
        rq.post(0x100 + i).unwrap();
    }
    rq.commit();
    let src = f.buffer(1 << 14);
    let mut q: Queues<P> = Queues::default();
    q.sqs.insert(a.qpn.0, f.send_queue(a));
    q.strided.insert(b.qpn.0, rq);
    let mut sent = 0;
    for round in 0..3u64 {
        let mut batch = q.sq(a.qpn).start();
        for k in 0..6u64 {
            let id = round * 6 + k;
            let len = 60 + ((id * 71) % 250) as usize;
            let payload = pattern(id, len - frames::UDP_HDR_LEN);
            let fr = frames::ipv4_udp(&payload, id as u16);
            src.write(512 * (id as usize % 32), &fr);
            batch
                .send(id)
                .unwrap()
                .signaled_if(k == 5)
                .ip_csum()
                .unwrap()
                .frame(src.key, src.addr(512 * (id as usize % 32)), &fr)
                .unwrap();
        }
        batch.complete();
        sent += 6;
        f.run_until(&mut [&mut cq_a, &mut cq_b], &mut q, |q| {
            q.received().len() >= sent && q.sqs.values().all(|s| s.outstanding() == 0)
        });
        let srq = q.strided.get_mut(&b.qpn.0).unwrap();
        let mut n = 0x200 + round * 8;
        while srq.outstanding() < 8 {
            srq.post(n).unwrap();
            n += 1;
        }
        srq.commit();
    }
    // The WQEs still posted are flushed with the QP.
    f.be.to_error(b.qpn).unwrap();
    f.settle(&mut [&mut cq_a, &mut cq_b], &mut q, 3);
    f.be
}

fn zip(layout: CompressionLayout, format: MiniCqeFormat) -> Option<CompressionCfg> {
    Some(CompressionCfg {
        format,
        layout,
        max_session: 16,
        force: true,
    })
}

/// Runs `family`'s scenario with the device recording into `path`.
fn record_family(family: &str, path: &Path) -> u32 {
    let mut be = step();
    be.with(|d| d.start_recording_to(Recorder::new(family, Some(path)).with_cap(14)));
    let be0 = be;
    let fmt = |name: &str| match name {
        "hash" => MiniCqeFormat::Hash,
        "csum" => MiniCqeFormat::Csum,
        "ftag-stridx" => MiniCqeFormat::FtagStridx,
        "csum-stridx" => MiniCqeFormat::CsumStridx,
        _ => MiniCqeFormat::L34hStridx,
    };
    let mut be = match family {
        "rc-send-recv" => rc_send_recv(be0, 3),
        "rdma-write-read" => rdma_write_read(be0),
        "atomics" => atomics(be0),
        "ud" => ud(be0),
        "raw-ethernet" => raw_ethernet(be0),
        "faults-flushes" => faults_flushes(be0),
        "striding-rq" => striding(be0, None),
        z => {
            let (layout, name) = if let Some(n) = z.strip_prefix("zip-basic-") {
                (CompressionLayout::Basic, n)
            } else {
                (
                    CompressionLayout::Enhanced,
                    z.strip_prefix("zip-enhanced-").unwrap(),
                )
            };
            let cfg = zip(layout, fmt(name));
            if name.ends_with("stridx") {
                striding(be0, cfg)
            } else {
                let size = if name == "csum" {
                    CqeSize::B128
                } else {
                    CqeSize::B64
                };
                rc_pair(be0, 4, cfg, size)
            }
        }
    };
    let stats = be.with(|d| d.stop_recording()).unwrap().unwrap();
    println!("{family}: {} records {:?}", stats.total(), stats.by_kind);
    stats.total()
}

/// The tool: rewrites `hw-traces/emulated/<family>.txt` for every family.
#[test]
#[ignore = "a tool: writes hw-traces/emulated/ (run with --ignored)"]
fn record_emulated_traces() {
    let dir = traces_dir().join("emulated");
    for family in FAMILIES {
        let n = record_family(family, &dir.join(format!("{family}.txt")));
        assert!(n > 0, "{family}: nothing recorded");
    }
}
