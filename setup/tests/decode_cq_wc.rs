//! `mlx5dp decode cq` against libmlx5's own `ibv_poll_cq`, completion by
//! completion: every `ibv_poll_cq` case of the golden sample
//! (`specs/golden/libmlx5/cqe-cases.txt`) and of the random oracle
//! (`specs/golden/libmlx5-oracle/cqe-random.txt`, produced by running
//! libmlx5.a's poll code: `tests/oracle/libmlx5/CQE.md`) is turned into
//! the ring snapshot it describes and polled by [`decode_ring`], the
//! function behind `mlx5dp decode cq`, with `--ci cons_index_before`, the
//! case's CQE size and the default layout (basic) and mini format; its
//! JSON Lines output is what is compared.
//!
//! The ring: `cq_ncqe` entries of `cqe_size` bytes, all zero but `op_own`
//! = `0xf0` (INVALID, owner 0) in each entry's last byte, as
//! `mlx5_alloc_cq_buf` and the oracle's `cqe_gen.c` lay it out; each `cqe`
//! line's 64 bytes fill the last 64 bytes of its slot (the CQE proper of a
//! 128-byte entry is its second half, rdma-core `get_sw_cqe`).
//!
//! Compared, per case:
//!
//! * **Fields** of every `ibv_wc` libmlx5 returned (`wc<i>`, the CQE at
//!   consumer index `cons_index_before + i`: libmlx5's `poll_cq` consumes
//!   exactly one CQE per `wc`, cq.c:549, 1022-1026) with the completion
//!   `decode cq` printed for that slot, under the mapping of
//!   `decode_cqe_wc.rs`: values libmlx5 wrote must be printed equal,
//!   fields it left unwritten (`wc<i>.unwritten`) must not be printed.
//!   `wr_id` comes from the work queue, not from the ring: not compared.
//! * **Count**: `decode cq` runs to the first hardware-owned entry, so only
//!   its completions for the first `out.ret` consumer indices are compared
//!   with `out.ret` (less the RESIZE_CQ entries among them, see below).
//!   When libmlx5 stopped before `ne`, the CQ was empty (`CQ_EMPTY` from
//!   `mlx5_get_next_cqe`, cq.c:545, ends the loop at cq.c:1024): then
//!   `decode cq` must print nothing more and end at
//!   `{"ci": out.cons_index_after}`.
//! * **Failed polls** (`out.ret=-2`, `CQ_POLL_ERR`): the failing CQE is
//!   the one at `out.cons_index_after - 1` (consumed before it is parsed,
//!   cq.c:549). A NO_PACKET CQE without tag matching (cq.c:840-841) or a
//!   SIG_ERR CQE with no such mkey (cq.c:857-859) fails libmlx5; `decode
//!   cq` must refuse the same entry (an error naming its consumer index)
//!   after the same completions. A failed QP or SRQ lookup (a wrong user
//!   index or QPN, cq.c:756/818/910/923) depends on libmlx5's QP table,
//!   which a ring dump does not hold: a gap, `decode cq` must print that
//!   completion.
//!
//! `decode cq` prints only an error when the poller refuses an entry; the
//! completions before it are taken from the same ring with that entry
//! turned hardware-owned (`op_own` INVALID), which `decode cq` polls up to.
//!
//! Gaps, per `wc` (counted and listed with `--nocapture`, not failures):
//!
//! * RESIZE_CQ: libmlx5 v44 returns it as a completion (cq.c:878-879
//!   `break`, then `CQ_OK` at cq.c:963, having written only `wc_flags = 0`
//!   and `qp_num`, cq.c:744-745); `decode cq` consumes it without printing
//!   it (the core's `OP_RESIZE_CQ` arm). Checked: nothing is printed for
//!   its slot.
//! * Reserved opcodes 7-11: libmlx5's switch has no case for them, so they
//!   too are `CQ_OK` completions with only `wc_flags` and `qp_num`;
//!   `decode cq` refuses them (`PollError::UnsupportedOpcode`). Checked:
//!   the refusal names that consumer index. The `wc`s after it, and that
//!   case's count and final index, cannot be compared (a gap each).
//! * A `wc` before a failed poll: libmlx5 wrote it, but the oracle prints
//!   no `wc` when `out.ret=-2`.
//! * A non-zero status of a scatter-to-CQE completion (inline-scatter bits
//!   in `op_own`, or a pre-posted WR): it comes from copying into the
//!   WQE's SGEs (`mlx5_copy_to_send_wqe`, `mlx5_copy_to_recv_wqe`), which
//!   a ring dump does not hold, as in `decode_cqe_wc.rs`.
//! * A whole case with a CQE in the compressed format (3): libmlx5's poll
//!   does not decompress; `decode cq` reads it as a session title.
//!   (`cqe_gen` never writes one.)
//!
//! `MLX5DP_CQE_CASES=/abs/path` replays that file (same format, e.g. one
//! `cqe_gen` wrote, `--edge` too) instead of both committed ones; at least
//! 80 % of the `wc`s of successful polls must be compared, and the
//! committed files must give at least the comparisons they give today.

mod common;

use common::{num, unhex, IP_CSUM_OK, RX_CSUM_VALID, WC_FIELDS};
use mlx5dp_setup::decode::cq::{decode_ring, CqLayout, RingError, RingParams};
use mlx5dp_setup::decode::cqe::CqeSize;
use mlx5dp_setup::decode::mini::MiniFormat;
use serde_json::Value;
use std::collections::BTreeMap;

const SAMPLE: &str = include_str!("../../specs/golden/libmlx5/cqe-cases.txt");
const RANDOM: &str = include_str!("../../specs/golden/libmlx5-oracle/cqe-random.txt");

/// CQE opcodes (`op_own[7:4]`, `MLX5_CQE_*` of `mlx5dv.h`).
const OP_RESIZE_CQ: u8 = 5;
const OP_NO_PACKET: u8 = 6;
const OP_SIG_ERR: u8 = 12;
/// `op_own[3:2]`: the inline-scatter bits (`MLX5_INLINE_SCATTER_32/64`),
/// both set = compressed.
const FORMAT_MASK: u8 = 0x0c;

/// One case: its name, its key=value lines, its `cqe` lines (slot, bytes).
struct Case {
    name: String,
    kv: BTreeMap<String, String>,
    cqes: Vec<(usize, Vec<u8>)>,
}

impl Case {
    fn get(&self, k: &str) -> u64 {
        num(&self.kv[k])
    }
}

fn parse(text: &str) -> Vec<Case> {
    // (A file may open with its first case, without header lines.)
    format!("\n{text}")
        .split("\ncase ")
        .skip(1)
        .map(|block| {
            let name = block.lines().next().expect("case name").trim().to_string();
            let mut kv = BTreeMap::new();
            let mut cqes = Vec::new();
            for line in block.lines().skip(1) {
                if let Some(rest) = line.strip_prefix("cqe ") {
                    let mut it = rest.split_whitespace();
                    let slot = it.next().and_then(|v| v.parse().ok()).expect("cqe slot");
                    cqes.push((slot, unhex(it.next().expect("cqe bytes"))));
                } else if let Some((k, v)) = line.split_once('=') {
                    kv.insert(k.to_string(), v.to_string());
                }
            }
            Case { name, kv, cqes }
        })
        .collect()
}

/// What a run over the cases found.
#[derive(Default)]
struct Tally {
    cases: usize,
    /// `wc`s libmlx5 returned (out of a successful poll).
    wcs: usize,
    completions: usize,
    counts: usize,
    final_ci: usize,
    refusals: usize,
    gaps: BTreeMap<&'static str, usize>,
    failures: Vec<String>,
}

impl Tally {
    fn gap(&mut self, case: &str, why: &'static str) {
        eprintln!("GAP  {case}: {why}");
        *self.gaps.entry(why).or_default() += 1;
    }
}

/// `decode cq`'s output: the completion objects by slot, the final index,
/// and the consumer index of the entry it refused, if it refused one.
struct Polled {
    by_slot: BTreeMap<u64, Value>,
    printed: usize,
    ci: Option<u32>,
    refused: Option<(u32, usize)>,
}

/// Polls `ring` as `mlx5dp decode cq --json --ci ci` would. On a refused
/// entry the CLI prints only the error; the completions before it are the
/// ones `decode cq` prints for the same ring with that entry still
/// hardware-owned (op_own INVALID), which is how they are obtained here.
fn poll(mut ring: Vec<u8>, params: &RingParams) -> Result<Polled, String> {
    let stride = match params.cqe_size {
        CqeSize::B64 => 64,
        CqeSize::B128 => 128,
    };
    let mut refused = None;
    let d = loop {
        match decode_ring(&ring, params) {
            Ok(d) => break d,
            Err(RingError::Poll {
                error: mlx5dp::cq::PollError::UnsupportedOpcode { ci, .. },
                decoded,
                ..
            }) if refused.is_none() => {
                refused = Some((ci, decoded));
                let slot = (ci & (params.cqe_cnt - 1)) as usize;
                ring[slot * stride + stride - 1] = 0xf0;
            }
            Err(e) => return Err(e.to_string()),
        }
    };
    let mut lines: Vec<Value> = d
        .to_json_lines()
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect();
    let last = lines.pop().expect("the final {\"ci\":N} line");
    let printed = lines.len();
    let by_slot = lines
        .into_iter()
        .map(|v| (v["slot"].as_u64().expect("slot"), v))
        .collect();
    Ok(Polled {
        by_slot,
        printed,
        ci: refused.is_none().then(|| {
            last["ci"]
                .as_u64()
                .and_then(|c| u32::try_from(c).ok())
                .expect("ci")
        }),
        refused,
    })
}

/// Compares one `wc<i>` with `decode cq`'s completion `got`.
fn compare_wc(case: &Case, i: usize, got: &Value) -> Vec<String> {
    let csum_cap = case.get("qp_cap_cache") & RX_CSUM_VALID != 0;
    let unwritten: Vec<&str> = case.kv[&format!("wc{i}.unwritten")].split(',').collect();
    let mut errs = Vec::new();
    for (theirs, ours) in WC_FIELDS {
        let value = got.get(*ours).and_then(Value::as_u64);
        if unwritten.contains(theirs) {
            if value.is_some() {
                errs.push(format!("wc{i}: {ours} printed, libmlx5 left it unwritten"));
            }
            continue;
        }
        let want = case.get(&format!("wc{i}.{theirs}"));
        let Some(mut value) = value else {
            errs.push(format!("wc{i}: {ours} missing (libmlx5: {want:#x})"));
            continue;
        };
        if *theirs == "wc_flags" && !csum_cap {
            value &= !IP_CSUM_OK;
        }
        if value != want {
            errs.push(format!(
                "wc{i}: {ours}: libmlx5 {want:#x}, decode cq {value:#x}"
            ));
        }
    }
    errs
}

fn check_case(case: &Case, t: &mut Tally) {
    let name = case.name.as_str();
    let n = u32::try_from(case.get("cq_ncqe")).expect("cq_ncqe");
    let (cqe_size, stride) = match case.get("cqe_size") {
        64 => (CqeSize::B64, 64),
        128 => (CqeSize::B128, 128),
        other => panic!("{name}: cqe_size {other}"),
    };
    let before = u32::try_from(case.get("cons_index_before")).expect("cons_index_before");
    let after = u32::try_from(case.get("out.cons_index_after")).expect("cons_index_after");
    let ret: i64 = case.kv["out.ret"].parse().expect("out.ret");
    let ne = case.get("ne");

    let mut ring = vec![0u8; n as usize * stride];
    for e in ring.chunks_mut(stride) {
        e[stride - 1] = 0xf0;
    }
    for (slot, bytes) in &case.cqes {
        ring[slot * stride + stride - 64..(slot + 1) * stride].copy_from_slice(bytes);
    }
    let op_own_at = |ci: u32| ring[(ci & (n - 1)) as usize * stride + stride - 1];
    if case
        .cqes
        .iter()
        .any(|(_, b)| b[63] & FORMAT_MASK == FORMAT_MASK)
    {
        return t.gap(name, "compressed-format CQE: libmlx5 does not decompress");
    }

    let params = RingParams {
        cqe_size,
        cqe_cnt: n,
        ci: before,
        layout: CqLayout::Basic,
        mini_format: MiniFormat::Hash,
        striding_rq: false,
    };
    let polled = match poll(ring.clone(), &params) {
        Ok(p) => p,
        Err(e) => {
            t.failures.push(format!("{name}: decode cq failed: {e}"));
            return;
        }
    };
    let mut errs = Vec::new();

    // The consumer indices libmlx5 returned a `wc` for (`wcs`), and the
    // one it failed at.
    let (wcs, failed_at) = if ret == -2 {
        (
            after.wrapping_sub(before).wrapping_sub(1),
            Some(after.wrapping_sub(1)),
        )
    } else {
        (u32::try_from(ret).expect("out.ret"), None)
    };
    let mut resizes = 0;
    let mut comparable = true;
    for i in 0..wcs {
        let ci = before.wrapping_add(i);
        let slot = u64::from(ci & (n - 1));
        let op_own = op_own_at(ci);
        let opcode = op_own >> 4;
        // `decode cq`'s documented behaviour for entries libmlx5 returns
        // and it does not print is checked before the `wc` is counted.
        let gap = if !comparable {
            Some("wc after a reserved opcode: decode cq stopped before it")
        } else if polled.refused.is_some_and(|(r, _)| r == ci) {
            if !(7..=11).contains(&opcode) {
                errs.push(format!("ci {ci}: decode cq refused opcode {opcode:#x}"));
            }
            comparable = false;
            Some("reserved CQE opcode: a completion to libmlx5, refused by decode cq")
        } else if opcode == OP_RESIZE_CQ {
            resizes += 1;
            if polled.by_slot.contains_key(&slot) {
                errs.push(format!("ci {ci}: decode cq printed a RESIZE_CQ entry"));
            }
            Some("RESIZE_CQ: a completion to libmlx5, consumed unprinted by decode cq")
        } else {
            None
        };
        if ret == -2 {
            // libmlx5 wrote this `wc`, but a failed poll returns no count
            // and the oracle prints no `wc` then.
            t.gap(name, "wc before a CQ_POLL_ERR: the oracle prints none");
            continue;
        }
        t.wcs += 1;
        let scatter =
            op_own & FORMAT_MASK != 0 || (i == 0 && case.kv.contains_key("prepost_send_nwr"));
        let gap = gap.or_else(|| {
            (scatter && case.kv[&format!("wc{i}.status")] != "0")
                .then_some("scatter-to-CQE status from the copy into the SGEs")
        });
        if let Some(why) = gap {
            t.gap(name, why);
            continue;
        }
        let Some(got) = polled.by_slot.get(&slot) else {
            errs.push(format!(
                "wc{i} (slot {slot}): decode cq printed no completion"
            ));
            continue;
        };
        let e = compare_wc(case, i as usize, got);
        if e.is_empty() {
            t.completions += 1;
        }
        errs.extend(e);
    }

    if comparable {
        // Completions `decode cq` printed for the first `wcs` indices.
        let first: usize = (0..wcs)
            .filter(|&i| {
                let slot = u64::from(before.wrapping_add(i) & (n - 1));
                polled.by_slot.contains_key(&slot)
            })
            .count();
        if first != (wcs - resizes) as usize {
            errs.push(format!(
                "count: libmlx5 {wcs} ({resizes} RESIZE_CQ), decode cq {first}"
            ));
        } else if ret != -2 {
            t.counts += 1;
        }
        match failed_at {
            Some(ci) => {
                let opcode = op_own_at(ci) >> 4;
                if matches!(opcode, OP_NO_PACKET | OP_SIG_ERR) {
                    // Both refuse the entry, after the same completions.
                    if polled.refused.map(|(r, _)| r) == Some(ci) && polled.printed == first {
                        t.refusals += 1;
                    } else {
                        errs.push(format!(
                            "libmlx5 fails at ci {ci} (opcode {opcode:#x}); decode cq refused {:?} after {} completion(s)",
                            polled.refused, polled.printed
                        ));
                    }
                } else if (opcode <= 4 || opcode == 13 || opcode == 14)
                    && polled.by_slot.contains_key(&u64::from(ci & (n - 1)))
                {
                    // A completion whose QP or SRQ libmlx5 did not find;
                    // `decode cq` has no QP table and prints it.
                    t.gap(
                        name,
                        "CQ_POLL_ERR from libmlx5's QP/SRQ lookup: no QP table in a ring dump",
                    );
                } else {
                    errs.push(format!(
                        "libmlx5 fails at ci {ci} (opcode {opcode:#x}); decode cq printed no completion for it"
                    ));
                }
            }
            None if u64::try_from(ret).expect("out.ret") < ne => {
                // libmlx5 found the CQ empty: decode cq stops there too.
                if polled.printed != first || polled.ci != Some(after) {
                    errs.push(format!(
                        "CQ empty at ci {after} for libmlx5; decode cq printed {} completion(s), ci {:?}",
                        polled.printed, polled.ci
                    ));
                } else {
                    t.final_ci += 1;
                }
            }
            None => {}
        }
    }
    t.cases += 1;
    if !errs.is_empty() {
        t.failures.push(format!("{name}:\n  {}", errs.join("\n  ")));
    }
}

#[test]
fn decode_cq_polls_what_libmlx5_polled() {
    let files: Vec<(String, String)> = match std::env::var("MLX5DP_CQE_CASES") {
        Ok(p) => vec![(p.clone(), std::fs::read_to_string(&p).unwrap())],
        Err(_) => vec![
            ("sample".to_string(), SAMPLE.to_string()),
            ("random".to_string(), RANDOM.to_string()),
        ],
    };
    let mut t = Tally::default();
    for (label, text) in &files {
        for case in parse(text) {
            if !case.kv["api"].starts_with("ibv_poll_cq") {
                continue;
            }
            let case = Case {
                name: format!("{label}/{}", case.name),
                ..case
            };
            check_case(&case, &mut t);
        }
    }
    for f in &t.failures {
        eprintln!("FAIL {f}");
    }
    let gaps: usize = t.gaps.values().sum();
    eprintln!(
        "decode_cq_wc: {} cases, {} of {} wcs agree, {} counts, {} final ci, {} shared refusals, {gaps} gaps {:?}, {} failed",
        t.cases,
        t.completions,
        t.wcs,
        t.counts,
        t.final_ci,
        t.refusals,
        t.gaps,
        t.failures.len()
    );
    assert!(t.failures.is_empty(), "{} case(s) failed", t.failures.len());
    // Most `wc`s are compared, not gaps (`cqe_gen --edge` files: about
    // 91 %); the committed files give 587 `wc`s of 419 cases, 562 compared.
    assert!(
        t.completions > 0 && t.completions * 10 >= t.wcs * 8,
        "only {} of {} wcs compared",
        t.completions,
        t.wcs
    );
    if files.len() == 2 {
        assert!(
            t.completions >= 550 && t.counts >= 300 && t.final_ci >= 180 && t.refusals >= 50,
            "fewer comparisons than the committed files give"
        );
    }
}
