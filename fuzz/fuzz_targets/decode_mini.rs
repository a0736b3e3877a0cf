//! `decode mini-cqe` on arbitrary bytes, in every format.
#![no_main]

use clap::ValueEnum;
use libfuzzer_sys::fuzz_target;
use mlx5dp_setup::decode::mini::{decode_minis, MiniFormat};

fuzz_target!(|data: &[u8]| {
    for &format in MiniFormat::value_variants() {
        match decode_minis(data, format) {
            Ok(d) => {
                assert_eq!(d.minis.len(), data.len() / 8);
                let _ = d.to_json();
                let _ = d.to_human();
            }
            Err(_) => assert!(data.is_empty() || !data.len().is_multiple_of(8)),
        }
    }
});
