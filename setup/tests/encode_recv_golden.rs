//! `mlx5dp encode recv` against libmlx5's golden vectors
//! (`specs/golden/libmlx5/rq-cases.txt`: rdma-core 44.0-2's own
//! `mlx5_post_recv` on a QP in ordinary memory). Every case is converted
//! into the command's options and input (one batch: one `ibv_post_recv`
//! call) and run as the binary runs it (`--json`); compared: every RQ WQE
//! byte libmlx5 wrote (mask `x`), that no other WQE was written, the
//! doorbell record (written or not, and its value), the exit status and
//! the refused line.
//!
//! The default run also replays `specs/golden/libmlx5-oracle/rq-random.txt`
//! (random cases written by the real `libmlx5.a`'s `mlx5_post_recv` through
//! `tests/oracle/libmlx5/send_gen.c`; see `tests/oracle/libmlx5/SEND.md`).
//! A mismatch stops the test at that case; the counts are printed (run with
//! `--nocapture`).
//!
//! `post_list_matches_libmlx5_single_sge_chains` replays the same files'
//! chains of one-SGE work requests through the core's `Rq::post_list`
//! directly (all or nothing: a chain libmlx5 refused part of must be
//! refused whole and change nothing).
//!
//! `MLX5DP_RQ_CASES=/path` replays that file (same format) instead of the
//! sample (and of the random cases, in the list test).

#![expect(
    clippy::unwrap_used,
    reason = "test: a malformed golden file is a test failure"
)]

mod common;

use common::{num, unhex};
use std::collections::BTreeMap;

use mlx5dp_setup::encode::cli::{run_recv, QpArg, QpStateArg, RecvArgs};
use serde_json::Value;

const GOLDEN: &str = include_str!("../../specs/golden/libmlx5/rq-cases.txt");
const ORACLE_RANDOM: &str = include_str!("../../specs/golden/libmlx5-oracle/rq-random.txt");

struct Case {
    name: String,
    kv: BTreeMap<String, String>,
    /// RQ slot → (bytes, mask).
    wqes: BTreeMap<u64, (Vec<u8>, Vec<u8>)>,
}

fn cases(text: &str) -> Vec<Case> {
    text.split("\ncase ")
        .skip(1)
        .map(|block| {
            let mut c = Case {
                name: block.lines().next().unwrap().trim().to_string(),
                kv: BTreeMap::new(),
                wqes: BTreeMap::new(),
            };
            for line in block.lines().skip(1) {
                let mut words = line.split_whitespace();
                match words.next() {
                    Some("rqwqe") => {
                        let slot = num(words.next().unwrap());
                        c.wqes.entry(slot).or_default().0 = unhex(words.next().unwrap());
                    }
                    Some("mask") => {
                        let slot = num(words.next().unwrap());
                        c.wqes.entry(slot).or_default().1 = words.next().unwrap().bytes().collect();
                    }
                    _ => {
                        if let Some((k, v)) = line.split_once('=') {
                            c.kv.insert(k.to_string(), v.to_string());
                        }
                    }
                }
            }
            c
        })
        .collect()
}

fn args(c: &Case) -> RecvArgs {
    let qp = match c.kv["qp_type"].as_str() {
        "RC" => QpArg::Rc,
        "UC" => QpArg::Uc,
        "UD" => QpArg::Ud,
        "RAW_PACKET" => QpArg::Raw,
        "XRC_SEND" => QpArg::Xrc,
        other => panic!("{}: qp_type {other}", c.name),
    };
    let state = match c.kv["qp_state"].as_str() {
        "RESET" => QpStateArg::Reset,
        "INIT" => QpStateArg::Init,
        "RTR" => QpStateArg::Rtr,
        "RTS" => QpStateArg::Rts,
        "SQD" => QpStateArg::Sqd,
        "SQE" => QpStateArg::Sqe,
        "ERR" => QpStateArg::Err,
        other => panic!("{}: qp_state {other}", c.name),
    };
    assert_eq!(
        c.kv["wq_sig"], "0",
        "{}: signatures are not modelled",
        c.name
    );
    let head = num(&c.kv["start_rq_head"]) as u32;
    let tail = num(&c.kv["start_rq_tail"]) as u32;
    RecvArgs {
        qp,
        state,
        rq_wqes: num(&c.kv["rq_wqe_cnt"]) as u32,
        wqe_shift: num(&c.kv["rq_wqe_shift"]) as u8,
        head,
        outstanding: head.wrapping_sub(tail),
        max_post: Some(num(&c.kv["rq_max_post"]) as u32),
        json: true,
        file: None,
    }
}

fn input(c: &Case) -> String {
    let mut s = String::new();
    for i in 0..num(&c.kv["nwr"]) {
        s.push_str(&format!("wr_id={}", c.kv[&format!("wr{i}.wr_id")]));
        for j in 0..num(&c.kv[&format!("wr{i}.num_sge")]) {
            let g = |f: &str| num(&c.kv[&format!("wr{i}.sge{j}.{f}")]);
            s.push_str(&format!(
                " sge={:#x}:{}:{:#x}",
                g("addr"),
                g("length"),
                g("lkey")
            ));
        }
        s.push('\n');
    }
    s
}

/// Replays every case of `text` (panics at the first mismatch) and prints
/// the counts.
fn replay(label: &str, text: &str) {
    let all = cases(text);
    assert!(!all.is_empty(), "{label}: no cases");
    let mut refused = 0;
    for c in &all {
        let a = args(c);
        let o = run_recv(&a, &mut input(c).as_bytes());
        let lines: Vec<Value> = o
            .stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        // Exit status and the refused line.
        let ret = num(&c.kv["out.ret"]);
        match (&o.result, ret) {
            (Ok(()), 0) => {}
            (Err(e), r) if r != 0 => {
                refused += 1;
                let bad = num(&c.kv["out.bad_wr"]) + 1;
                assert!(
                    e.to_string().starts_with(&format!("line {bad}: ")),
                    "{}: {e}",
                    c.name
                );
            }
            (r, ret) => panic!("{}: libmlx5 returned {ret}, we {r:?}", c.name),
        }
        // The WQEs: every byte libmlx5 wrote, and no other WQE.
        let stride = 1usize << a.wqe_shift;
        let mut ours: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
        for l in &lines {
            if let Some(slot) = l.get("slot").and_then(Value::as_u64) {
                ours.insert(slot, unhex(l["hex"].as_str().unwrap()));
            }
        }
        for (slot, (bytes, mask)) in &c.wqes {
            let got = ours
                .get(slot)
                .unwrap_or_else(|| panic!("{}: RQ WQE {slot} not written", c.name));
            assert_eq!(got.len(), stride, "{}", c.name);
            for j in 0..bytes.len() {
                if mask[j] == b'x' {
                    assert_eq!(got[j], bytes[j], "{}: WQE {slot} byte {j}", c.name);
                }
            }
        }
        for slot in ours.keys() {
            assert!(c.wqes.contains_key(slot), "{}: we wrote WQE {slot}", c.name);
        }
        // The doorbell record.
        let dbrec: Vec<Option<u64>> = lines
            .iter()
            .filter_map(|l| l.get("dbrec").map(Value::as_u64))
            .collect();
        if c.kv["out.dbrec_written"] == "1" {
            let want = u32::from_be_bytes(unhex(&c.kv["out.dbrec_bytes"])[..4].try_into().unwrap());
            assert_eq!(
                dbrec.last().copied().flatten(),
                Some(u64::from(want)),
                "{}",
                c.name
            );
        } else {
            assert!(dbrec.iter().all(Option::is_none), "{}: {dbrec:?}", c.name);
        }
    }
    println!(
        "encode recv golden ({label}): {} cases, all match ({} accepted, {refused} refused at libmlx5's bad_wr)",
        all.len(),
        all.len() - refused
    );
}

/// The sample (or the file of `MLX5DP_RQ_CASES`).
#[test]
fn encode_recv_matches_libmlx5_golden_vectors() {
    match std::env::var("MLX5DP_RQ_CASES") {
        Ok(p) => replay(&p, &std::fs::read_to_string(&p).unwrap()),
        Err(_) => replay("specs/golden/libmlx5/rq-cases.txt", GOLDEN),
    }
}

/// The random cases `send_gen` produced with libmlx5.a.
#[test]
fn encode_recv_matches_libmlx5_oracle_random_cases() {
    replay("specs/golden/libmlx5-oracle/rq-random.txt", ORACLE_RANDOM);
}

/// What one case of `text` says of `Rq::post_list`, for the cases it can
/// express: every work request of at most one SGE (no SGE is a zero-length
/// one: both leave the terminator alone in the WQE), the QP not in RESET,
/// `rq_max_post` equal to the ring (the core's limit). libmlx5 accepted the
/// whole chain: the list must be accepted and write every byte libmlx5
/// wrote, the same wr_ids in the same slots and the same doorbell record.
/// libmlx5 refused a work request (the queue full): the list must be
/// refused whole, the ring, the record and the counters untouched.
/// Returns (accepted, refused) cases compared.
fn replay_list(label: &str, text: &str, vector: bool) -> (usize, usize) {
    use mlx5dp::rq::{RecvWr, RqError, Sge};
    use mlx5dp_setup::encode::memory::RecvMemory;
    const FILL: u32 = 0xa5a5_a5a5;
    let (mut accepted, mut refused) = (0, 0);
    for c in cases(text) {
        let kv = |k: &str| num(&c.kv[k]);
        let nwr = kv("nwr");
        let cnt = kv("rq_wqe_cnt") as u32;
        if c.kv["qp_state"] == "RESET"
            || kv("rq_max_post") as u32 != cnt
            || (0..nwr).any(|i| kv(&format!("wr{i}.num_sge")) > 1)
        {
            continue;
        }
        let a = args(&c);
        let shift = a.wqe_shift;
        let stride = 1u32 << shift;
        let mem = RecvMemory::new(cnt, shift).unwrap();
        let mut wrid = vec![0u64; cnt as usize];
        let prefill = a.outstanding.min(cnt);
        let mut rq = mem.rq(&mut wrid, a.head.wrapping_sub(prefill)).unwrap();
        rq.set_doorbell_enabled(a.config().doorbell);
        #[cfg(target_arch = "x86_64")]
        rq.set_sse41(if vector {
            mlx5dp_setup::cpu::sse41()
        } else {
            None
        });
        for _ in 0..prefill {
            rq.post(0, &[]).unwrap();
        }
        mem.set_dbrec(FILL).unwrap();
        let wrs: Vec<RecvWr> = (0..nwr)
            .map(|i| {
                let g = |f: &str| num(&c.kv[&format!("wr{i}.sge0.{f}")]);
                let one = kv(&format!("wr{i}.num_sge")) == 1;
                RecvWr {
                    wr_id: kv(&format!("wr{i}.wr_id")),
                    sge: if one {
                        Sge {
                            addr: g("addr"),
                            length: g("length") as u32,
                            lkey: g("lkey") as u32,
                        }
                    } else {
                        Sge {
                            addr: 0x1234,
                            length: 0,
                            lkey: 0x5678,
                        }
                    },
                }
            })
            .collect();
        let ring_before: Vec<Vec<u8>> = (0..cnt).map(|s| mem.wqe(s, stride).unwrap()).collect();
        let head = rq.head();
        let got = rq.post_list(&wrs);
        if kv("out.ret") == 0 {
            assert_eq!(got, Ok(()), "{label} {}", c.name);
            accepted += 1;
            for (slot, (bytes, mask)) in &c.wqes {
                let ours = mem.wqe(*slot as u32, stride).unwrap();
                for j in 0..bytes.len() {
                    if mask[j] == b'x' {
                        assert_eq!(ours[j], bytes[j], "{label} {}: WQE {slot} byte {j}", c.name);
                    }
                }
            }
            // Nothing outside the WQEs libmlx5 wrote.
            for s in 0..cnt {
                if !c.wqes.contains_key(&u64::from(s)) {
                    assert_eq!(
                        mem.wqe(s, stride).unwrap(),
                        ring_before[s as usize],
                        "{label} {}: slot {s}",
                        c.name
                    );
                }
            }
            let want = if c.kv["out.dbrec_written"] == "1" {
                u32::from_be_bytes(unhex(&c.kv["out.dbrec_bytes"])[..4].try_into().unwrap())
            } else {
                FILL
            };
            assert_eq!(
                mem.dbrec().unwrap(),
                want,
                "{label} {}: doorbell record",
                c.name
            );
            assert_eq!(
                rq.head(),
                head.wrapping_add(nwr as u32),
                "{label} {}",
                c.name
            );
            for (k, v) in &c.kv {
                if let Some(slot) = k.strip_prefix("out.rq_slot") {
                    let want = num(v.strip_prefix("wrid:").unwrap());
                    assert_eq!(
                        wrid[num(slot) as usize],
                        want,
                        "{label} {}: wr_id of slot {slot}",
                        c.name
                    );
                }
            }
        } else {
            assert_eq!(
                kv("out.ret"),
                12,
                "{label} {}: only ENOMEM is expressible",
                c.name
            );
            assert_eq!(got, Err(RqError::QueueFull), "{label} {}", c.name);
            refused += 1;
            for s in 0..cnt {
                assert_eq!(
                    mem.wqe(s, stride).unwrap(),
                    ring_before[s as usize],
                    "{label} {}: slot {s}",
                    c.name
                );
            }
            assert_eq!(mem.dbrec().unwrap(), FILL, "{label} {}", c.name);
            assert_eq!(rq.head(), head, "{label} {}", c.name);
        }
    }
    let path = if vector { "SSE4.1" } else { "scalar" };
    println!("post_list ({path}) against libmlx5 ({label}): {accepted} accepted and {refused} refused chains compared");
    (accepted, refused)
}

/// `Rq::post_list` against the chains of one-SGE work requests libmlx5
/// posted (the sample and the random cases, or the file of
/// `MLX5DP_RQ_CASES`), with the scalar segment builder and, where the CPU
/// has SSE4.1, with the vector one.
#[test]
fn post_list_matches_libmlx5_single_sge_chains() {
    #[cfg(target_arch = "x86_64")]
    let paths = [false, mlx5dp_setup::cpu::sse41().is_some()];
    #[cfg(not(target_arch = "x86_64"))]
    let paths = [false];
    for vector in paths {
        let (a, r) = match std::env::var("MLX5DP_RQ_CASES") {
            Ok(p) => replay_list(&p, &std::fs::read_to_string(&p).unwrap(), vector),
            Err(_) => {
                let s = replay_list("specs/golden/libmlx5/rq-cases.txt", GOLDEN, vector);
                let o = replay_list(
                    "specs/golden/libmlx5-oracle/rq-random.txt",
                    ORACLE_RANDOM,
                    vector,
                );
                (s.0 + o.0, s.1 + o.1)
            }
        };
        assert!(
            a > 0 && r > 0,
            "no chain compared: {a} accepted, {r} refused"
        );
    }
}
