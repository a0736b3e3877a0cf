//! `mlx5dp decode cqe`'s `wc_*` fields against libmlx5's golden vectors
//! (`specs/golden/libmlx5/cqe-cases.txt`: rdma-core 44.0-2's own
//! `ibv_poll_cq` on CQEs in ordinary memory). For every `ibv_poll_cq` case
//! that polled exactly one CQE, the fields libmlx5 wrote must be printed
//! with its values, and the ones it left unwritten must not be printed.
//! (`wr_id` comes from the work queue, not the CQE: not compared.)

mod common;

use common::{num, unhex};
use std::collections::BTreeMap;

use mlx5dp_setup::decode::cqe::decode_cqe;
use serde_json::Value;

const GOLDEN: &str = include_str!("../../specs/golden/libmlx5/cqe-cases.txt");

/// `IBV_WC_IP_CSUM_OK`: `decode cqe` reports it as for a QP with the
/// receive checksum capability (`qp_cap_cache` bit 0x4).
const IP_CSUM_OK: u64 = 1 << 2;
const RX_CSUM_VALID: u64 = 0x4;

/// The case's `wc0.<field>` names and our keys.
const FIELDS: &[(&str, &str)] = &[
    ("status", "wc_status"),
    ("opcode", "wc_opcode_raw"),
    ("vendor_err", "wc_vendor_err"),
    ("byte_len", "wc_byte_len"),
    ("imm_data", "wc_imm_data"),
    ("qp_num", "wc_qp_num"),
    ("src_qp", "wc_src_qp"),
    ("wc_flags", "wc_flags"),
    ("pkey_index", "wc_pkey_index"),
    ("slid", "wc_slid"),
    ("sl", "wc_sl"),
    ("dlid_path_bits", "wc_dlid_path_bits"),
];

#[test]
fn wc_fields_are_what_libmlx5_wrote() {
    let mut checked = 0;
    for block in GOLDEN.split("\ncase ").skip(1) {
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
        let json = decode_cqe(&cqes[0], None).unwrap().fields().to_json();
        let csum_cap = num(&kv["qp_cap_cache"]) & RX_CSUM_VALID != 0;
        let unwritten: Vec<&str> = kv["wc0.unwritten"].split(',').collect();
        for (theirs, ours) in FIELDS {
            let got = json.get(*ours).and_then(Value::as_u64);
            if unwritten.contains(theirs) {
                assert_eq!(
                    got, None,
                    "{name}: {ours} printed, libmlx5 left it unwritten"
                );
                continue;
            }
            let want = num(&kv[&format!("wc0.{theirs}")]);
            let mut got = got.unwrap_or_else(|| panic!("{name}: {ours} missing: {json}"));
            if *theirs == "wc_flags" && !csum_cap {
                got &= !IP_CSUM_OK;
            }
            assert_eq!(got, want, "{name}: {ours}");
        }
        checked += 1;
    }
    // The visible sample holds 14 such cases; the full set more.
    assert!(checked >= 14, "only {checked} cases checked");
}
