//! `mlx5dp decode cqe`'s `wc_*` fields against libmlx5's golden vectors
//! (`specs/golden/libmlx5/cqe-cases.txt`: rdma-core 44.0-2's own
//! `ibv_poll_cq` on CQEs in ordinary memory). For every `ibv_poll_cq` case
//! that polled exactly one CQE, the fields libmlx5 wrote must be printed
//! with its values, and the ones it left unwritten must not be printed.
//! (`wr_id` comes from the work queue, not the CQE: not compared.)
//!
//! `MLX5DP_CQE_CASES=/abs/path` replays that file (same format) instead,
//! e.g. one `tests/refcheck/poll_ref.py gen` wrote (a requester CQE of NOP,
//! UMR, SET_PSV or MMO takes its `wc_opcode` from the QP's `sq.wr_data`,
//! 0 in the fabricated QP: `decode cqe`'s default `--wr-data`). Gaps there
//! (counted, not failures): scatter-to-CQE cases whose status comes from
//! copying into the posted SGEs (`IBV_WC_LOC_LEN_ERR` and others from
//! `mlx5_copy_to_send_wqe`).

mod common;

use common::{num, unhex, IP_CSUM_OK, RX_CSUM_VALID, WC_FIELDS};
use std::collections::BTreeMap;

use mlx5dp_setup::decode::cqe::decode_cqe;
use serde_json::Value;

const GOLDEN: &str = include_str!("../../specs/golden/libmlx5/cqe-cases.txt");

/// Why a case is a gap rather than a comparison (see the module docs).
fn gap(kv: &BTreeMap<String, String>, cqe: &[u8]) -> Option<&'static str> {
    let scatter = kv.contains_key("prepost_send_nwr") || cqe[63] & 0x0c != 0;
    if scatter && kv.get("wc0.status").is_some_and(|s| s != "0") {
        return Some("scatter-to-CQE status from the copy into the SGEs");
    }
    None
}

#[test]
fn wc_fields_are_what_libmlx5_wrote() {
    // The golden file, or the file `MLX5DP_CQE_CASES` names.
    let text = std::env::var("MLX5DP_CQE_CASES").map_or_else(
        |_| GOLDEN.to_string(),
        |p| std::fs::read_to_string(p).unwrap(),
    );
    let (mut checked, mut gaps, mut failed) = (0, 0, 0);
    // (A newline first: a file may start with its first case.)
    for block in format!("\n{text}").split("\ncase ").skip(1) {
        let name = block.lines().next().unwrap().trim();
        let mut kv = BTreeMap::new();
        let mut cqes = Vec::new();
        for line in block.lines().skip(1) {
            if let Some(rest) = line.strip_prefix("cqe ") {
                cqes.push(unhex(rest.split_whitespace().nth(1).unwrap()));
            } else if let Some((k, v)) = line.split_once('=') {
                kv.insert(k.to_string(), v.to_string());
            }
        }
        let polled_one = kv.get("api").is_some_and(|a| a.starts_with("ibv_poll_cq"))
            && cqes.len() == 1
            && kv.get("out.ret").map(String::as_str) == Some("1");
        if !polled_one {
            continue;
        }
        if let Some(why) = gap(&kv, &cqes[0]) {
            eprintln!("GAP  {name}: {why}");
            gaps += 1;
            continue;
        }
        let json = decode_cqe(&cqes[0], None).unwrap().fields().to_json();
        let csum_cap = num(&kv["qp_cap_cache"]) & RX_CSUM_VALID != 0;
        let unwritten: Vec<&str> = kv["wc0.unwritten"].split(',').collect();
        let mut errs = Vec::new();
        for (theirs, ours) in WC_FIELDS {
            let got = json.get(*ours).and_then(Value::as_u64);
            if unwritten.contains(theirs) {
                if got.is_some() {
                    errs.push(format!("{ours} printed, libmlx5 left it unwritten"));
                }
                continue;
            }
            let want = num(&kv[&format!("wc0.{theirs}")]);
            let Some(mut got) = got else {
                errs.push(format!("{ours} missing (libmlx5: {want:#x})"));
                continue;
            };
            if *theirs == "wc_flags" && !csum_cap {
                got &= !IP_CSUM_OK;
            }
            if got != want {
                errs.push(format!("{ours}: libmlx5 {want:#x}, decode {got:#x}"));
            }
        }
        if errs.is_empty() {
            checked += 1;
        } else {
            failed += 1;
            eprintln!("FAIL {name}:\n  {}", errs.join("\n  "));
        }
    }
    eprintln!("decode_cqe_wc: {checked} agree, {gaps} gaps, {failed} failed");
    assert_eq!(failed, 0);
    // The visible sample holds 14 such cases; the full set more.
    assert!(checked >= 14, "only {checked} cases checked");
}
