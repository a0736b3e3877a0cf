//! Replays scenarios of `tests/refcheck/srq_ref.py` (an independent model of
//! rdma-core v44.0 libmlx5's SRQ: `mlx5_alloc_srq_buf`, `mlx5_post_srq_recv`,
//! `mlx5_free_srq_wqe`) through `mlx5dp::rq::Srq` over ordinary memory laid
//! out as libmlx5 leaves it (zeroed WQE buffer, doorbell record 0).
//!
//! Per `post K` line the K work requests are posted one by one as
//! `mlx5_post_srq_recv` walks its list (stopping at the first refusal:
//! `TooManySges` is its `EINVAL`, `QueueFull` its `ENOMEM`), then
//! [`Srq::commit`] once, as libmlx5 rings once per call. Per `complete IDX`
//! line the WQE is retired ([`Srq::retire`]). After every operation it
//! compares the return code and `bad_wr` index, the WQE index each post took
//! (the head before it), the wr_id a completion returns, every byte of
//! every WQE (against a shadow kept from the scenario's `wqe` lines), the
//! doorbell record, head, tail and the low 16 bits of the counter.
//!
//! A scenario's starting counter `COUNTER0` (a multiple of the WQE count)
//! is reached as the model describes it: that many WRs of all-zero SGEs,
//! each posted, committed and retired at once, which leaves the free list,
//! the links and the WQE bytes as created.
//!
//! Not compared, by design (see `tests/refcheck/README.md`): completions
//! naming a WQE that is not outstanding (the core refuses them, libmlx5
//! trusts the device; the scenarios never contain one), and what creation
//! writes outside the links (libmlx5 zeroes the buffer and the doorbell
//! record when it allocates them; the core takes over memory libmlx5 or the
//! kernel already set up and writes only each WQE's next segment).
//!
//! `MLX5DP_SRQ_CASES=/path` replays that file instead of the checked-in
//! `tests/refcheck/srq-repro-cases.txt`.
//!
//! A second test replays `specs/golden/libmlx5-oracle/srq-random.txt`:
//! scenarios in the same format whose expectations come from libmlx5.a's
//! own code rather than the model (`tests/oracle/libmlx5/srq_gen`, which
//! runs `mlx5_alloc_srq_buf`, `mlx5_post_srq_recv` and the poll path's
//! `mlx5_free_srq_wqe` on a fabricated SRQ; see
//! `tests/oracle/libmlx5/ARM-SRQ.md`).
#![allow(
    clippy::unwrap_used,
    reason = "test harness: a malformed scenario file should stop the test"
)]

use mlx5dp::cq::LookupError;
use mlx5dp::rq::{RecvWr, RqError, Sge, Srq, SrqParts, SrqSlot};
use std::ptr::NonNull;

const REPRO: &str = include_str!("../refcheck/srq-repro-cases.txt");
const ORACLE: &str = include_str!("../../specs/golden/libmlx5-oracle/srq-random.txt");

/// Environment variable naming a scenario file to replay instead.
const CASES_ENV: &str = "MLX5DP_SRQ_CASES";

const EINVAL: i64 = 22;
const ENOMEM: i64 = 12;

fn num(s: &str) -> u64 {
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).unwrap(),
        None => s.parse().unwrap(),
    }
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// One 64-byte line, 64-byte aligned (every SRQ buffer here is a multiple
/// of 64 bytes: at least 2 WQEs of at least 32).
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([u8; 64]);

/// The SRQ's memory: WQE buffer and doorbell record, held as raw pointers
/// so that the queue's writes and the test's reads share one provenance.
struct Mem {
    ring: *mut u8,
    len: usize,
    dbrec: *mut u32,
}

impl Mem {
    /// `len` bytes and a doorbell word, every byte `fill` (0: as libmlx5
    /// leaves them at creation).
    fn new(len: usize, fill: u8) -> Self {
        assert!(len % 64 == 0 && len > 0);
        let v = vec![Line([fill; 64]); len / 64];
        let ring = Box::into_raw(v.into_boxed_slice()).cast::<u8>();
        let dbrec = Box::into_raw(Box::new(u32::from_ne_bytes([fill; 4])));
        Self { ring, len, dbrec }
    }
    fn bytes(&self) -> Vec<u8> {
        let mut v = vec![0u8; self.len];
        // SAFETY: `len` live bytes of the ring; the queue does not write
        // while the test reads (one thread).
        unsafe { std::ptr::copy_nonoverlapping(self.ring, v.as_mut_ptr(), self.len) }
        v
    }
    fn dbrec(&self) -> [u8; 4] {
        // SAFETY: the live 4-byte doorbell word.
        unsafe { self.dbrec.cast::<[u8; 4]>().read_volatile() }
    }
}

impl Drop for Mem {
    fn drop(&mut self) {
        // SAFETY: from `Box::into_raw` with these types and lengths.
        unsafe {
            drop(Box::from_raw(std::ptr::slice_from_raw_parts_mut(
                self.ring.cast::<Line>(),
                self.len / 64,
            )));
            drop(Box::from_raw(self.dbrec));
        }
    }
}

/// One scenario's lines after the `case` line, split into words.
struct Scenario {
    name: String,
    lines: Vec<Vec<String>>,
}

fn scenarios(text: &str) -> Vec<Scenario> {
    let mut out = Vec::new();
    let mut cur: Option<Scenario> = None;
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let words: Vec<String> = line.split_whitespace().map(str::to_string).collect();
        match words[0].as_str() {
            "case" => {
                cur = Some(Scenario {
                    name: words[1].clone(),
                    lines: Vec::new(),
                });
            }
            "end" => out.extend(cur.take()),
            _ => cur.as_mut().unwrap().lines.push(words),
        }
    }
    out
}

/// Totals over a replay.
#[derive(Default, Debug)]
struct Tally {
    scenarios: usize,
    posts: usize,
    wrs: usize,
    completions: usize,
    /// Completions naming a free WQE, refused by the core (libmlx5 would
    /// return a stale wr_id and relink it: a deliberate difference).
    refused_free: usize,
    /// Lists mode: chains posted whole by `Srq::post_list`, and refused
    /// whole (then posted one by one as libmlx5 did).
    lists_posted: usize,
    lists_refused: usize,
    /// Scenarios whose lists went through the SSE4.1 segment builder.
    lists_vector: usize,
    diffs: Vec<String>,
}

/// Replays one scenario; `lists`: chains of one-SGE work requests go
/// through `Srq::post_list` (all or nothing) instead of one post each, in
/// every other scenario with the SSE4.1 segment builder where the CPU has
/// SSE4.1.
fn replay(sc: &Scenario, t: &mut Tally, lists: bool) {
    let mut it = sc.lines.iter().peekable();
    let cfg = it.next().unwrap();
    assert_eq!(cfg[0], "srq", "{}", sc.name);
    let (wqe_cnt, counter0) = (num(&cfg[1]) as u32, num(&cfg[3]) as u32);
    let layout = it.next().unwrap();
    assert_eq!(layout[0], "layout", "{}", sc.name);
    let [shift, max_gs, head0, tail0] = [1, 2, 3, 4].map(|i| num(&layout[i]) as usize);
    let stride = 1usize << shift;
    let mem = Mem::new(wqe_cnt as usize * stride, 0);
    let mut slots = vec![SrqSlot::EMPTY; wqe_cnt as usize];
    let parts = SrqParts {
        buf: NonNull::new(mem.ring).unwrap(),
        wqe_cnt,
        stride: stride as u32,
        dbrec: NonNull::new(mem.dbrec).unwrap(),
    };
    // SAFETY: `mem` outlives `srq` (declared before it) and nothing else
    // writes the ring or the doorbell word while `srq` lives; the test only
    // reads them between calls.
    #[expect(unsafe_code, reason = "builds the SRQ over test memory")]
    let mut srq = unsafe { Srq::from_raw_parts(parts, &mut slots) }.unwrap();
    #[cfg(target_arch = "x86_64")]
    if lists && t.scenarios % 2 == 1 {
        srq.set_sse41(mlx5dp_setup::cpu::sse41());
        t.lists_vector += usize::from(mlx5dp_setup::cpu::sse41().is_some());
    }
    let mut diffs = Vec::new();
    let mut diff = |what: String| diffs.push(format!("{}: {what}", sc.name));

    // The shadow of the buffer: as created (zeroed, links i -> i + 1 below
    // the tail), then every `wqe` line applied.
    let mut shadow = vec![0u8; wqe_cnt as usize * stride];
    for i in 0..tail0 {
        shadow[(i << shift) + 2..(i << shift) + 4].copy_from_slice(&(i as u16 + 1).to_be_bytes());
    }
    // Warm-up to COUNTER0 (see the module docs).
    let zero = Sge {
        addr: 0,
        length: 0,
        lkey: 0,
    };
    let zeros = vec![zero; srq.max_sge()];
    for _ in 0..counter0 {
        let ind = srq.post(0, &zeros).unwrap();
        srq.commit();
        srq.retire(ind).unwrap();
    }
    let got = (srq.max_sge(), srq.head() as usize, srq.tail() as usize);
    if got != (max_gs, head0, tail0) {
        diff(format!(
            "layout: max_gs/head/tail {got:?}, model {max_gs} {head0} {tail0}"
        ));
    }
    if mem.bytes() != shadow {
        diff("creation: WQE bytes differ".into());
    }
    if mem.dbrec() != (counter0 & 0xffff).to_be_bytes() {
        diff(format!("creation: dbrec {:02x?}", mem.dbrec()));
    }

    let mut op = 0usize;
    while let Some(w) = it.next() {
        op += 1;
        match w[0].as_str() {
            "post" => {
                t.posts += 1;
                let k = num(&w[1]) as usize;
                let mut wrs = Vec::new();
                for _ in 0..k {
                    let wr = it.next().unwrap();
                    assert_eq!(wr[0], "wr");
                    let sges: Vec<Sge> = wr[3..]
                        .iter()
                        .map(|s| {
                            let mut f = s.split(':').map(num);
                            let (addr, length, lkey) =
                                (f.next().unwrap(), f.next().unwrap(), f.next().unwrap());
                            Sge {
                                addr,
                                length: length as u32,
                                lkey: lkey as u32,
                            }
                        })
                        .collect();
                    assert_eq!(sges.len() as u64, num(&wr[2]));
                    wrs.push((num(&wr[1]), sges));
                }
                t.wrs += k;
                let (mut err, mut bad) = (0i64, -1i64);
                // Lists mode: a chain of one-SGE work requests goes through
                // `Srq::post_list`; refused (the SRQ has too few free WQEs),
                // it must change nothing, and libmlx5's partial post is then
                // reproduced one by one below.
                let mut listed = false;
                if lists && wrs.iter().all(|(_, g)| g.len() == 1) {
                    let list: Vec<RecvWr> = wrs
                        .iter()
                        .map(|(wr_id, g)| RecvWr {
                            wr_id: *wr_id,
                            sge: g[0],
                        })
                        .collect();
                    let before = (mem.bytes(), mem.dbrec(), srq.head(), srq.counter());
                    match srq.post_list(&list) {
                        Ok(()) => {
                            t.lists_posted += 1;
                            listed = true;
                        }
                        Err(RqError::QueueFull) => {
                            t.lists_refused += 1;
                            let after = (mem.bytes(), mem.dbrec(), srq.head(), srq.counter());
                            if after != before {
                                diff(format!("op {op}: a refused list changed the SRQ"));
                            }
                            if it.peek().is_some_and(|r| r[0] == "ret" && r[1] == "0") {
                                diff(format!("op {op}: list refused, libmlx5 posted it whole"));
                            }
                        }
                        Err(e) => diff(format!("op {op}: list: unexpected {e:?}")),
                    }
                }
                // mlx5_post_srq_recv: in list order, stop at the first refusal.
                for (i, (wr_id, sges)) in wrs.iter().enumerate().filter(|_| !listed) {
                    let head = srq.head();
                    match srq.post(*wr_id, sges) {
                        Ok(ind) if ind == head => {}
                        Ok(ind) => diff(format!("op {op}: wr {i} took WQE {ind}, head was {head}")),
                        Err(e) => {
                            err = match e {
                                RqError::TooManySges { .. } => EINVAL,
                                RqError::QueueFull => ENOMEM,
                                other => {
                                    diff(format!("op {op}: wr {i}: unexpected {other:?}"));
                                    -1
                                }
                            };
                            bad = i as i64;
                            break;
                        }
                    }
                }
                srq.commit();
                let ret = it.next().unwrap();
                assert_eq!(ret[0], "ret");
                let want = (
                    ret[1].parse::<i64>().unwrap(),
                    ret[2].parse::<i64>().unwrap(),
                );
                if (err, bad) != want {
                    diff(format!(
                        "op {op}: post returned {err} at {bad}, model {want:?}"
                    ));
                }
            }
            "complete" => {
                t.completions += 1;
                let idx = num(&w[1]) as u16;
                let got = srq.retire(idx);
                let wrid = it.next().unwrap();
                assert_eq!(wrid[0], "wrid");
                if got != Ok(num(&wrid[1])) {
                    diff(format!(
                        "op {op}: retire({idx}) = {got:x?}, model {}",
                        wrid[1]
                    ));
                }
            }
            other => panic!("{}: unexpected line {other}", sc.name),
        }
        // Expectations: wqe*, db, state.
        while it.peek().is_some_and(|l| l[0] == "wqe") {
            let l = it.next().unwrap();
            let i = num(&l[1]) as usize;
            shadow[i << shift..(i + 1) << shift].copy_from_slice(&hex(&l[2]));
        }
        let bytes = mem.bytes();
        if bytes != shadow {
            let wqes: Vec<usize> = (0..wqe_cnt as usize)
                .filter(|&i| {
                    bytes[i << shift..(i + 1) << shift] != shadow[i << shift..(i + 1) << shift]
                })
                .collect();
            diff(format!("op {op}: WQE bytes differ in WQEs {wqes:?}"));
            shadow = bytes;
        }
        let db = it.next().unwrap();
        assert_eq!(db[0], "db");
        if mem.dbrec() != hex(&db[1])[..] {
            diff(format!(
                "op {op}: dbrec {:02x?}, model {}",
                mem.dbrec(),
                db[1]
            ));
        }
        let st = it.next().unwrap();
        assert_eq!(st[0], "state");
        let want = (num(&st[1]), num(&st[2]), num(&st[3]));
        let got = (
            u64::from(srq.head()),
            u64::from(srq.tail()),
            u64::from(srq.counter() & 0xffff),
        );
        if got != want {
            diff(format!(
                "op {op}: head/tail/counter {got:?}, model {want:?}"
            ));
        }
    }
    // A completion naming a free WQE (the tail, and an index beyond the
    // ring): libmlx5 trusts the device's wqe_counter and would relink it
    // (reading `srq->wrid` out of bounds for the second); the core refuses
    // it and changes nothing.
    let before = (
        mem.bytes(),
        mem.dbrec(),
        srq.head(),
        srq.tail(),
        srq.counter(),
    );
    let mut bogus = vec![srq.tail()];
    bogus.extend(u16::try_from(wqe_cnt).ok());
    for idx in bogus {
        match srq.retire(idx) {
            Err(LookupError::NotInFlight) => t.refused_free += 1,
            other => diff(format!("retire of free WQE {idx}: {other:x?}")),
        }
        let after = (
            mem.bytes(),
            mem.dbrec(),
            srq.head(),
            srq.tail(),
            srq.counter(),
        );
        if after != before {
            diff(format!("refused retire of {idx} changed the queue"));
        }
    }
    t.scenarios += 1;
    t.diffs.append(&mut diffs);
}

fn run(text: &str, lists: bool) -> Tally {
    let mut t = Tally::default();
    for sc in scenarios(text) {
        replay(&sc, &mut t, lists);
    }
    println!(
        "srq_ref: {} scenarios, {} posts ({} WRs), {} completions, {} differences; \
         gap: {} completions naming a free WQE refused (libmlx5 relinks them)",
        t.scenarios,
        t.posts,
        t.wrs,
        t.completions,
        t.diffs.len(),
        t.refused_free
    );
    if lists {
        println!(
            "srq_ref lists: {} one-SGE chains posted by post_list, {} refused whole; \
             {} scenarios with the SSE4.1 segment builder",
            t.lists_posted, t.lists_refused, t.lists_vector
        );
    }
    for d in t.diffs.iter().take(40) {
        println!("  {d}");
    }
    t
}

#[test]
fn srq_matches_the_libmlx5_model() {
    let text = std::env::var(CASES_ENV).map_or_else(
        |_| REPRO.to_string(),
        |p| std::fs::read_to_string(p).unwrap(),
    );
    let t = run(&text, false);
    assert!(t.scenarios > 0, "no scenario");
    assert!(t.diffs.is_empty(), "{} differences", t.diffs.len());
}

/// The scenarios libmlx5.a's own code computed (`srq_gen`), always replayed.
#[test]
fn srq_matches_libmlx5_object_code() {
    let t = run(ORACLE, false);
    assert!(t.scenarios >= 100, "only {} scenarios", t.scenarios);
    assert!(t.diffs.is_empty(), "{} differences", t.diffs.len());
}

/// The same scenarios (model's and libmlx5.a's, or `MLX5DP_SRQ_CASES`)
/// with every chain of one-SGE work requests posted by `Srq::post_list`:
/// the same WQEs, links, doorbell records and wr_ids where libmlx5 posted
/// the chain whole, the SRQ untouched where it refused part of it.
#[test]
fn srq_lists_match_libmlx5() {
    let t = match std::env::var(CASES_ENV) {
        Ok(p) => run(&std::fs::read_to_string(p).unwrap(), true),
        Err(_) => {
            let mut t = run(REPRO, true);
            let o = run(ORACLE, true);
            t.lists_posted += o.lists_posted;
            t.lists_refused += o.lists_refused;
            t.lists_vector += o.lists_vector;
            t.diffs.extend(o.diffs);
            t
        }
    };
    assert!(t.diffs.is_empty(), "{} differences", t.diffs.len());
    assert!(
        t.lists_posted > 0 && t.lists_refused > 0,
        "no list compared: {} posted, {} refused",
        t.lists_posted,
        t.lists_refused
    );
    #[cfg(target_arch = "x86_64")]
    if mlx5dp_setup::cpu::sse41().is_some() {
        assert!(t.lists_vector > 0, "no scenario through SSE4.1");
    }
}

/// Creation over memory libmlx5 did not zero: the core writes each WQE's
/// 16-byte next segment (the link, the rest zero) and nothing else; libmlx5
/// (`mlx5_alloc_srq_buf`, `mlx5_create_srq`) zeroes the whole buffer and
/// the doorbell record. A deliberate difference: the core takes over an
/// SRQ whose memory libmlx5 already zeroed, and the device reads no data
/// segment of a WQE before a post writes it (up to its terminator).
#[test]
fn creation_writes_only_the_next_segments() {
    let (wqe_cnt, shift) = (8u32, 6usize);
    let mem = Mem::new((wqe_cnt as usize) << shift, 0xa5);
    let mut slots = vec![SrqSlot::EMPTY; wqe_cnt as usize];
    let parts = SrqParts {
        buf: NonNull::new(mem.ring).unwrap(),
        wqe_cnt,
        stride: 1 << shift,
        dbrec: NonNull::new(mem.dbrec).unwrap(),
    };
    // SAFETY: `mem` outlives `srq` and nothing else writes it meanwhile.
    #[expect(unsafe_code, reason = "builds the SRQ over test memory")]
    let srq = unsafe { Srq::from_raw_parts(parts, &mut slots) }.unwrap();
    let bytes = mem.bytes();
    for i in 0..wqe_cnt as usize {
        let w = &bytes[i << shift..(i + 1) << shift];
        let mut next = [0u8; 16];
        next[2..4].copy_from_slice(&((i as u16 + 1) % wqe_cnt as u16).to_be_bytes());
        assert_eq!(w[..16], next, "WQE {i}: next segment");
        assert!(
            w[16..].iter().all(|&b| b == 0xa5),
            "WQE {i}: data segments untouched"
        );
    }
    assert_eq!(mem.dbrec(), [0xa5; 4], "doorbell record untouched");
    assert_eq!((srq.head(), srq.tail(), srq.counter()), (0, 7, 0));
}
