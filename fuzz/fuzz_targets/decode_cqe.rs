//! `decode cqe` on arbitrary bytes: any length with the size inferred, and
//! the input cut or padded to 64 and 128 bytes with the size given.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mlx5dp_setup::decode::cqe::{decode_cqe, CqeSize};

fn exercise(bytes: &[u8], size: Option<CqeSize>) {
    if let Ok(d) = decode_cqe(bytes, size) {
        let _ = d.to_json();
        let _ = d.to_human();
        let _ = d.wc_status();
        if let Some(inline) = d.inline_data() {
            assert!(inline.len() <= 64);
        }
    }
}

fuzz_target!(|data: &[u8]| {
    exercise(data, None);
    for size in [CqeSize::B64, CqeSize::B128] {
        let mut fixed = data.to_vec();
        fixed.resize(size.bytes(), 0);
        exercise(&fixed, Some(size));
        exercise(data, Some(size));
    }
});
