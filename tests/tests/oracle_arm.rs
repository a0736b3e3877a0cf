//! Replays `specs/golden/libmlx5-oracle/arm-random.txt` (written by
//! `tests/oracle/libmlx5/arm_gen`, which runs Debian 12's libmlx5.a's own
//! `mlx5_arm_cq` and `mlx5_cq_event` on a fabricated CQ; see
//! `tests/oracle/libmlx5/ARM-SRQ.md`) through `mlx5dp::cq::Cq`: `arm`
//! for `armS`, `ack_events(1)` for `event`.
//!
//! Per case the CQ starts at the case's consumer index (`from_raw_parts`)
//! and arm sequence number (`ack_events(arm_sn_before)` from 0). Before
//! every call the doorbell record and the UAR page are re-filled with
//! `0xa5`, as the generator does; after it all 8 record bytes, all 4096 UAR
//! bytes (written ones and untouched ones) and `arm_sn` are compared.
//!
//! `MLX5DP_ARM_CASES=/abs/path` replays that file (same format) instead.
#![allow(
    clippy::unwrap_used,
    reason = "test harness: a malformed case file should stop the test"
)]

use mlx5dp::cq::{Cq, CqConfig, CqParts, CqeSize};
use std::collections::BTreeMap;
use std::ptr::NonNull;

const GOLDEN: &str = include_str!("../../specs/golden/libmlx5-oracle/arm-random.txt");

/// The pre-fill of the generator's first run, whose bytes it prints.
const FILL: u8 = 0xa5;
const UAR_SIZE: usize = 4096;

struct Case {
    name: String,
    kv: BTreeMap<String, String>,
}

fn parse(text: &str) -> Vec<Case> {
    let mut out = Vec::new();
    let mut cur: Option<Case> = None;
    for line in text.lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        if let Some(name) = line.strip_prefix("case ") {
            cur = Some(Case {
                name: name.trim().into(),
                kv: BTreeMap::new(),
            });
        } else if line == "end" {
            out.extend(cur.take());
        } else {
            let (k, v) = line.split_once('=').unwrap();
            cur.as_mut().unwrap().kv.insert(k.into(), v.into());
        }
    }
    out
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn num(s: &str) -> u64 {
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).unwrap(),
        None => s.parse().unwrap(),
    }
}

/// One 64-byte line, 64-byte aligned (the CQE ring must be).
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([u8; 64]);

/// The CQ's memory, held as raw pointers only, so that the queue's writes
/// and the test's reads and re-fills share one provenance.
struct Mem {
    ring: *mut Line,
    dbrec: *mut [u32; 2],
    uar: *mut [u64; UAR_SIZE / 8],
}

impl Mem {
    fn new() -> Self {
        // Two invalid CQEs: never polled here.
        let mut ring = [Line([0; 64]); 2];
        ring[0].0[63] = 0xf0;
        ring[1].0[63] = 0xf0;
        Self {
            ring: Box::into_raw(Box::new(ring)).cast::<Line>(),
            dbrec: Box::into_raw(Box::new([0u32; 2])),
            uar: Box::into_raw(Box::new([0u64; UAR_SIZE / 8])),
        }
    }
    /// Every byte of the record and of the UAR page set to `FILL`.
    fn refill(&self) {
        // SAFETY: the live record and page; the queue does not run while
        // the test writes (one thread).
        unsafe {
            self.dbrec
                .write_volatile([u32::from_ne_bytes([FILL; 4]); 2]);
            self.uar
                .write_volatile([u64::from_ne_bytes([FILL; 8]); UAR_SIZE / 8]);
        }
    }
    fn dbrec(&self) -> [u8; 8] {
        // SAFETY: the live 8-byte record.
        unsafe { self.dbrec.cast::<[u8; 8]>().read_volatile() }
    }
    fn uar(&self) -> Vec<u8> {
        // SAFETY: the live 4 KiB page.
        unsafe { self.uar.cast::<[u8; UAR_SIZE]>().read_volatile() }.to_vec()
    }
}

impl Drop for Mem {
    fn drop(&mut self) {
        // SAFETY: from `Box::into_raw` with these types.
        unsafe {
            drop(Box::from_raw(self.ring.cast::<[Line; 2]>()));
            drop(Box::from_raw(self.dbrec));
            drop(Box::from_raw(self.uar));
        }
    }
}

/// Replays one case; the differences found, one line each.
fn replay(case: &Case) -> Vec<String> {
    let kv = &case.kv;
    let get = |k: &str| kv.get(k).unwrap_or_else(|| panic!("{}: no {k}", case.name));
    let mut diffs = Vec::new();
    let mem = Mem::new();
    let parts = CqParts {
        buf: NonNull::new(mem.ring.cast::<u8>()).unwrap(),
        cqe_cnt: 2,
        cqe_size: CqeSize::B64,
        dbrec: NonNull::new(mem.dbrec.cast::<u32>()).unwrap(),
        uar: NonNull::new(mem.uar.cast::<u8>()),
        cqn: num(get("cqn")) as u32,
    };
    let ci = num(get("cons_index")) as u32;
    // SAFETY: `mem` outlives `cq` (declared first, dropped last); the test
    // writes the record and the page only between the queue's calls.
    #[expect(unsafe_code, reason = "builds the CQ over test memory")]
    let mut cq = unsafe { Cq::from_raw_parts(parts, CqConfig::default(), ci) }.unwrap();
    cq.ack_events(num(get("arm_sn_before")) as u32);
    for (k, op) in get("ops").split(',').enumerate() {
        mem.refill();
        match op {
            "arm0" => cq.arm(false),
            "arm1" => cq.arm(true),
            "event" => cq.ack_events(1),
            _ => panic!("{}: op {op}", case.name),
        }
        let step = |key: &str| get(&format!("out.step{k}.{key}"));
        assert_eq!(step("op"), op, "{}", case.name);
        let want = hex(step("dbrec_bytes"));
        let got = mem.dbrec();
        if got[..] != want[..] {
            diffs.push(format!(
                "{} step {k} ({op}): dbrec {}, libmlx5 {}",
                case.name,
                hexs(&got),
                step("dbrec_bytes")
            ));
        }
        let mut want = vec![FILL; UAR_SIZE];
        if step("uar_write") != "none" {
            let off = num(step("uar_offset")) as usize;
            let bytes = hex(step("uar_bytes"));
            assert_eq!(bytes.len() as u64, num(step("uar_len")), "{}", case.name);
            want[off..off + bytes.len()].copy_from_slice(&bytes);
        }
        let got = mem.uar();
        if got != want {
            let first = (0..UAR_SIZE).find(|&i| got[i] != want[i]).unwrap();
            let last = (0..UAR_SIZE).rev().find(|&i| got[i] != want[i]).unwrap();
            diffs.push(format!(
                "{} step {k} ({op}): UAR bytes {first:#x}..={last:#x} {}, libmlx5 {}",
                case.name,
                hexs(&got[first..=last]),
                hexs(&want[first..=last])
            ));
        }
        let sn = num(step("arm_sn")) as u32;
        if cq.arm_sn() != sn {
            diffs.push(format!(
                "{} step {k} ({op}): arm_sn {:#010x}, libmlx5 {sn:#010x}",
                case.name,
                cq.arm_sn()
            ));
        }
        if cq.consumer_index() != ci {
            diffs.push(format!(
                "{} step {k} ({op}): consumer index moved",
                case.name
            ));
        }
    }
    if cq.arm_sn() != num(get("out.arm_sn_after")) as u32 {
        diffs.push(format!("{}: arm_sn_after {:#010x}", case.name, cq.arm_sn()));
    }
    diffs
}

fn hexs(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[test]
fn arm_matches_libmlx5() {
    let text = std::env::var("MLX5DP_ARM_CASES").map_or_else(
        |_| GOLDEN.to_string(),
        |p| std::fs::read_to_string(p).unwrap(),
    );
    let cases = parse(&text);
    assert!(
        cases.len() >= 100,
        "only {} cases: a truncated file?",
        cases.len()
    );
    let (mut steps, mut arms) = (0, 0);
    let mut diffs = Vec::new();
    for case in &cases {
        let ops = case.kv["ops"].split(',').count();
        steps += ops;
        arms += case.kv["ops"].matches("arm").count();
        diffs.extend(replay(case));
    }
    println!(
        "oracle_arm: {} cases, {steps} calls ({arms} arms), {} differences",
        cases.len(),
        diffs.len()
    );
    for d in diffs.iter().take(20) {
        println!("  {d}");
    }
    assert!(diffs.is_empty(), "{} differences from libmlx5", diffs.len());
}
