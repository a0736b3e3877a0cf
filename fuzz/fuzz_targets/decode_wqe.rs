//! `decode wqe` on arbitrary bytes, for every QP type and with the type
//! inferred.
#![no_main]

use clap::ValueEnum;
use libfuzzer_sys::fuzz_target;
use mlx5dp_setup::decode::wqe::{decode_wqe, QpType};

fuzz_target!(|data: &[u8]| {
    let types = QpType::value_variants().iter().copied().map(Some);
    for qp in std::iter::once(None).chain(types) {
        if let Ok(d) = decode_wqe(data, qp) {
            let _ = d.to_json();
            let _ = d.to_human();
        }
    }
});
