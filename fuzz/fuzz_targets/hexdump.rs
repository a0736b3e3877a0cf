//! `mlx5dp_setup::hexdump` on arbitrary text: never panics, and whatever it
//! accepts it reads back the same way from its own plain-hex rendering.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mlx5dp_setup::decode::hex_string;
use mlx5dp_setup::hexdump;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(dump) = hexdump::parse_dump(text) else {
        return;
    };
    assert!(!dump.bytes.is_empty(), "an accepted dump holds bytes");
    assert_eq!(hexdump::parse(text).ok().as_ref(), Some(&dump.bytes));
    // Round trip through plain hex.
    let again = hexdump::parse(&hex_string(&dump.bytes)).expect("plain hex of accepted bytes");
    assert_eq!(again, dump.bytes);
});
