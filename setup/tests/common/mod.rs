//! Helpers shared by the golden-vector tests (`specs/golden` number and
//! hex forms).

/// A decimal or `0x`-hex number of a golden file.
pub fn num(s: &str) -> u64 {
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).expect("hex number"),
        None => s.parse().expect("decimal number"),
    }
}

/// Plain hex bytes of a golden file.
pub fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex byte"))
        .collect()
}

/// `IBV_WC_IP_CSUM_OK`: `decode cqe` / `decode cq` report it as for a QP
/// with the receive checksum capability (`qp_cap_cache` bit
/// `MLX5_RX_CSUM_VALID`, `1 << 16` in rdma-core v44's
/// `providers/mlx5/mlx5.h`; the golden file's header says 0x4, which is
/// `IBV_WC_IP_CSUM_OK`'s value).
#[allow(dead_code, reason = "only the tests that compare wc fields use it")]
pub const IP_CSUM_OK: u64 = 1 << 2;
/// `MLX5_RX_CSUM_VALID` in `qp_cap_cache`.
#[allow(dead_code, reason = "only the tests that compare wc fields use it")]
pub const RX_CSUM_VALID: u64 = 1 << 16;

/// A libmlx5 case's `wc<i>.<field>` names and the `wc_*` keys `decode cqe`
/// and `decode cq` print for them (`wr_id` comes from the work queue, not
/// the CQE).
#[allow(dead_code, reason = "only the tests that compare wc fields use it")]
pub const WC_FIELDS: &[(&str, &str)] = &[
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
