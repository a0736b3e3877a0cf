//! The core's decompressors on arbitrary sessions: `expand_session` never
//! panics, writes exactly `min(minis, out)` entries, and equals `expand`
//! applied one mini at a time; every batched path (`expand_session_with`:
//! scalar, the compile-time default, and SSE4.1/AVX2 when this CPU has
//! them) equals it bit for bit.
//!
//! Input: byte 0 = striding RQ (bit 0), short output buffer (bit 1);
//! byte 1 = mini format (raw PRM value, unknown ones included); bytes 2–3 =
//! start counter; bytes 4–67 = title CQE; the rest = minis (8 bytes each).
#![no_main]

use libfuzzer_sys::fuzz_target;
use mlx5dp::cq::zip::{expand, expand_session, expand_session_with, MiniView, UnzipPath};
use mlx5dp::prm::{Cqe64, MiniCqe, MiniCqeFormat};
use zerocopy::FromBytes;

fuzz_target!(|data: &[u8]| {
    if data.len() < 68 {
        return;
    }
    let view = MiniView {
        format: MiniCqeFormat::from_raw(data[1]),
        striding: data[0] & 1 != 0,
    };
    let start = u16::from_be_bytes([data[2], data[3]]);
    let title = Cqe64::read_from_bytes(&data[4..68]).expect("64 bytes");
    let minis: Vec<MiniCqe> = data[68..]
        .chunks_exact(8)
        .map(|c| MiniCqe::read_from_bytes(c).expect("8 bytes"))
        .collect();
    let out_len = if data[0] & 2 != 0 {
        minis.len() / 2
    } else {
        minis.len() + 1
    };
    let sentinel = Cqe64::read_from_bytes(&[0xa5u8; 64][..]).expect("64 bytes");
    let mut out = vec![sentinel; out_len];
    let end = expand_session(&title, &minis, view, start, &mut out);

    let mut running = start;
    let n = minis.len().min(out_len);
    for (i, mini) in minis.iter().take(n).enumerate() {
        let (cqe, next) = expand(&title, mini, view, running);
        assert_eq!(out[i], cqe, "mini {i}");
        running = next;
    }
    assert_eq!(end, running);
    for extra in &out[n..] {
        assert_eq!(*extra, sentinel, "entries past the minis are left alone");
    }

    for path in paths() {
        let mut other = vec![sentinel; out_len];
        let end_other = expand_session_with(path, &title, &minis, view, start, &mut other);
        assert_eq!(other, out, "path {}", path.name());
        assert_eq!(end_other, end, "path {} end counter", path.name());
    }
});

/// Every batched path this CPU can run.
fn paths() -> Vec<UnzipPath> {
    let mut v = vec![UnzipPath::Scalar, UnzipPath::compile_time()];
    #[cfg(target_arch = "x86_64")]
    {
        use mlx5dp::cq::zip_x86::{Avx2, Sse41};
        if std::is_x86_feature_detected!("sse4.1") {
            // SAFETY: SSE4.1 detected just above.
            v.push(UnzipPath::Sse41(unsafe { Sse41::new_unchecked() }));
        }
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: AVX2 detected just above.
            v.push(UnzipPath::Avx2(unsafe { Avx2::new_unchecked() }));
        }
    }
    v
}
