//! `decode cq` on arbitrary ring bytes and parameters.
//!
//! Input: byte 0 = CQE size (bit 0), layout (bit 1), striding RQ (bit 2),
//! exact ring length (bit 3 clear) or the raw remainder (bit 3 set, to
//! reach the length errors); byte 1 = log2 of the CQE count (mod 9; 255 =
//! a count that is not a power of two); byte 2 = mini format; bytes 3–6 =
//! consumer index; the rest = ring bytes (zero-padded to the ring size).
#![no_main]

use clap::ValueEnum;
use libfuzzer_sys::fuzz_target;
use mlx5dp_setup::decode::cq::{decode_ring, CqLayout, RingParams};
use mlx5dp_setup::decode::cqe::CqeSize;
use mlx5dp_setup::decode::mini::MiniFormat;

fuzz_target!(|data: &[u8]| {
    if data.len() < 7 {
        return;
    }
    let (head, body) = data.split_at(7);
    let cqe_size = if head[0] & 1 == 0 {
        CqeSize::B64
    } else {
        CqeSize::B128
    };
    let layout = if head[0] & 2 == 0 {
        CqLayout::Basic
    } else {
        CqLayout::Enhanced
    };
    let formats = MiniFormat::value_variants();
    let cqe_cnt = if head[1] == 255 {
        12
    } else {
        1u32 << (head[1] % 9)
    };
    let params = RingParams {
        cqe_size,
        cqe_cnt,
        ci: u32::from_le_bytes([head[3], head[4], head[5], head[6]]),
        layout,
        mini_format: formats[usize::from(head[2]) % formats.len()],
        striding_rq: head[0] & 4 != 0,
    };
    let mut ring = body.to_vec();
    if head[0] & 8 == 0 {
        ring.resize(cqe_cnt as usize * cqe_size.bytes(), 0);
    }
    let Ok(d) = decode_ring(&ring, &params) else {
        return;
    };
    assert!(d.completions.len() <= cqe_cnt as usize);
    assert!(d.ci.wrapping_sub(params.ci) <= cqe_cnt);
    for c in &d.completions {
        assert!(c.slot < cqe_cnt);
        assert!(c.ci.wrapping_sub(params.ci) < cqe_cnt);
    }
    let _ = d.to_human();
    let lines = d.to_json_lines();
    assert_eq!(lines.lines().count(), d.completions.len() + 1);
});
