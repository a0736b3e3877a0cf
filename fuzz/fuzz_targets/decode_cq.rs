//! `decode cq` on arbitrary ring bytes and parameters.
//!
//! Input: byte 0 = CQE size (bit 0), layout (bit 1), striding RQ (bit 2),
//! exact ring length (bit 3 clear) or the raw remainder (bit 3 set, to
//! reach the length errors); byte 1 = log2 of the CQE count (bits 0–6, mod
//! 9; 0x7f = a count that is not a power of two) and padding (bit 7: the
//! initial pattern, opcode INVALID and validity 0xff in every slot, else
//! zeros, which read as valid REQ CQEs); byte 2 = mini format; bytes 3–6 =
//! consumer index; the rest = ring bytes from slot 0.
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
    let cqe_cnt = if head[1] & 0x7f == 0x7f {
        12
    } else {
        1u32 << ((head[1] & 0x7f) % 9)
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
        let stride = cqe_size.bytes();
        let len = cqe_cnt as usize * stride;
        let from = ring.len().min(len);
        ring.resize(len, 0);
        if head[1] & 0x80 != 0 {
            for (off, b) in ring.iter_mut().enumerate().skip(from) {
                *b = match off % stride {
                    o if o == stride - 1 => 0xf1,
                    o if o == stride - 2 => 0xff,
                    _ => 0,
                };
            }
        }
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
