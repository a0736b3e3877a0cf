//! `mlx5dp decode cq` through the binary: the DPDK Rx oracle rings
//! (`specs/golden/dpdk/rx-cases.txt`) must poll to what the real DPDK mlx5
//! PMD returned for them, and malformed rings must fail cleanly.

use serde_json::Value;
use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Output, Stdio};

fn mlx5dp(args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_mlx5dp"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn mlx5dp");
    let mut input = child.stdin.take().expect("stdin");
    input.write_all(stdin.as_bytes()).expect("write stdin");
    drop(input);
    child.wait_with_output().expect("wait mlx5dp")
}

/// Runs `decode cq ... --json -` and returns the completion objects and the final ci.
fn decode_cq_json(args: &[&str], ring_hex: &str) -> (Vec<Value>, u64) {
    let mut all = vec!["decode", "cq", "--json"];
    all.extend_from_slice(args);
    all.push("-");
    let out = mlx5dp(&all, ring_hex);
    assert!(
        out.status.success(),
        "{all:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("utf-8");
    let mut lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect();
    let last = lines.pop().expect("the final {\"ci\":N} line");
    assert_eq!(last.as_object().map(|o| o.len()), Some(1), "{last}");
    let ci = last["ci"].as_u64().expect("ci");
    (lines, ci)
}

fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 3);
    for (i, b) in bytes.iter().enumerate() {
        s.push_str(&format!("{b:02x}"));
        s.push(if i % 16 == 15 { '\n' } else { ' ' });
    }
    s
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

fn num(s: &str) -> u64 {
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).expect("hex number"),
        None => s.parse().expect("decimal number"),
    }
}

/// The oracle's cases, each as key → value.
fn dpdk_cases() -> Vec<BTreeMap<String, String>> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../specs/golden/dpdk/rx-cases.txt"
    );
    let text = std::fs::read_to_string(path).expect("rx-cases.txt");
    let mut cases = Vec::new();
    let mut cur: Option<BTreeMap<String, String>> = None;
    for line in text.lines() {
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        if line == "end" {
            cases.extend(cur.take());
            continue;
        }
        if let Some((k, v)) = line.split_once('=') {
            if k == "case" {
                cur = Some(BTreeMap::new());
            }
            if let Some(c) = cur.as_mut() {
                c.insert(k.to_string(), v.to_string());
            }
        }
    }
    cases
}

#[test]
fn dpdk_oracle_rings_poll_to_what_dpdk_returned() {
    let cases = dpdk_cases();
    assert!(cases.len() >= 9, "{} cases", cases.len());
    for c in &cases {
        let name = &c["case"];
        let get = |k: &str| c.get(k).map(String::as_str);
        // The scalar path when the oracle ran it, else the vector path.
        let p = if get("scalar.func").is_some() {
            "scalar"
        } else {
            "vec"
        };
        let log_cq = num(&c["cfg.log_cq"]) as u32;
        let cqe_cnt = 1usize << log_cq;
        // The PMD's initial pattern, then every slot the script wrote.
        let mut ring = vec![0u8; cqe_cnt * 64];
        for s in 0..cqe_cnt {
            ring[s * 64 + 62] = 0xff;
            ring[s * 64 + 63] = 0xf1;
        }
        for (k, v) in c {
            let slot = k
                .strip_prefix("in.cqe.")
                .or_else(|| k.strip_prefix("in.stale."));
            if let Some(slot) = slot {
                let slot: usize = slot.parse().expect("slot");
                ring[slot * 64..slot * 64 + 64].copy_from_slice(&unhex(v));
            }
        }
        let mprq = get("rq_type") == Some("mprq");
        let format = match get("mcqe_format").expect("mcqe_format") {
            "hash" => "hash",
            "csum" => "csum",
            "csum_stridx" => "csum-stridx",
            other => panic!("{name}: mcqe_format {other}"),
        };
        let ci_in = c[&format!("{p}.in.cq_ci")].clone();
        let cnt = cqe_cnt.to_string();
        let mut args = vec![
            "--cqe-size",
            "64",
            "--cqe-cnt",
            &cnt,
            "--ci",
            &ci_in,
            "--layout",
            get("layout").expect("layout"),
            "--mini-format",
            format,
        ];
        if mprq {
            args.push("--striding-rq");
        }
        let (got, ci) = decode_cq_json(&args, &hex(&ring));

        let received = num(&c[&format!("{p}.received")]) as usize;
        assert_eq!(got.len(), received, "{name}: completions");
        assert_eq!(ci, num(&c[&format!("{p}.out.cq_ci")]), "{name}: ci");

        let flag = |k: &str| get(k).map(num) == Some(1);
        let crc = if flag("cfg.crc_present") { 4 } else { 0 };
        let mut strides_before = get(&format!("{p}.in.consumed_strd")).map_or(0, num);
        for (i, j) in got.iter().enumerate() {
            let pkt = |f: &str| get(&format!("{p}.pkt.{i}.{f}")).map(num);
            let at = format!("{name}: packet {i} ({j})");
            // Byte count: the packet length (a striding RQ's low 16 bits).
            let len = if mprq {
                j["mprq_byte_cnt"].as_u64().unwrap()
            } else {
                j["byte_cnt"].as_u64().unwrap()
            };
            assert_eq!(Some(len - crc), pkt("pkt_len"), "{at}: length");
            // RSS hash.
            if flag("cfg.rss_hash") {
                assert_eq!(j["rx_hash"].as_u64(), pkt("hash_rss"), "{at}: hash");
            }
            // Checksum verdicts: DPDK `rxq_cq_to_ol_flags` transposes the
            // CQE's L3/L4 OK bits into IP_CKSUM_GOOD / L4_CKSUM_GOOD.
            if flag("cfg.csum") {
                let want = u64::from(j["l3_ok"] == true) << 7 | u64::from(j["l4_ok"] == true) << 8;
                assert_eq!(Some(want), pkt("cksum_flags"), "{at}: checksum flags");
            }
            // Packet type: L3 and L4 nibbles of the PMD's ptype.
            if let Some(ptype) = pkt("packet_type") {
                let l3 = match j["l3_hdr_type"].as_str().unwrap() {
                    "ipv4" => 0x90,
                    "ipv6" => 0xe0,
                    _ => 0,
                };
                let l4 = match j["l4_hdr_type"].as_str().unwrap() {
                    "udp" => 0x200,
                    "none" => 0,
                    _ => 0x100,
                };
                assert_eq!(ptype & 0xff0, l3 | l4, "{at}: packet type");
            }
            // VLAN.
            if let (true, Some(tci)) = (flag("cfg.vlan_strip"), pkt("vlan_tci")) {
                let want = if j["cvlan_stripped"] == true {
                    j["vlan_info"].as_u64().unwrap()
                } else {
                    0
                };
                assert_eq!(want, tci, "{at}: vlan");
            }
            // Striding RQ: the stride index is where DPDK's consumed-stride
            // counter stood, and the buffer it attached.
            if mprq {
                let idx = j["stride_idx"].as_u64().expect("stride_idx");
                let strides = j["strides"].as_u64().expect("strides");
                let strd_num = 1u64 << num(&c["cfg.log_strd_num"]);
                assert_eq!(idx, strides_before % strd_num, "{at}: stride index");
                if let Some(stride) = pkt("attached_stride") {
                    assert_eq!(idx, stride, "{at}: attached stride");
                }
                strides_before += strides;
            } else {
                assert!(j.get("stride_idx").is_none(), "{at}");
                // Cyclic RQ: the WQE counter names the RQ slot DPDK took
                // the buffer from (title + i for minis, PRM-FACTS §10.4/§10.5).
                let rq_mask = (1u64 << num(&c["cfg.log_rq"])) - 1;
                let wqe = j["wqe_counter"].as_u64().unwrap();
                assert_eq!(Some(wqe & rq_mask), pkt("rq_idx"), "{at}: rq_idx");
            }
            assert_eq!(j["wc_status"], 0, "{at}");
        }
        if mprq {
            assert_eq!(
                Some(strides_before),
                get(&format!("{p}.out.consumed_strd")).map(num),
                "{name}: strides consumed"
            );
        }
        // Every returned packet has a slot, in CQ order from ci.
        let slots: Vec<u64> = got.iter().map(|j| j["slot"].as_u64().unwrap()).collect();
        let ci0 = num(&ci_in);
        let want: Vec<u64> = (0..got.len() as u64)
            .map(|k| (ci0 + k) % cqe_cnt as u64)
            .collect();
        assert_eq!(slots, want, "{name}: slots");
    }
}

/// A small basic-layout ring: r1, a session of 3 hash minis, r1.
fn small_ring() -> Vec<u8> {
    let mut ring = vec![0u8; 8 * 64];
    for s in 0..8 {
        ring[s * 64 + 62] = 0xff;
        ring[s * 64 + 63] = 0xf1;
    }
    let regular = |ring: &mut [u8], slot: usize, len: u32, wqe: u16| {
        let b = &mut ring[slot * 64..slot * 64 + 64];
        b.fill(0);
        b[44..48].copy_from_slice(&len.to_be_bytes());
        b[56..60].copy_from_slice(&0x0000_0456u32.to_be_bytes());
        b[60..62].copy_from_slice(&wqe.to_be_bytes());
        b[63] = 0x20; // RESP_SEND, no inline, owner 0
    };
    regular(&mut ring, 0, 60, 0);
    regular(&mut ring, 1, 3, 1);
    ring[64 + 63] = 0x2c; // title: format 3
    for m in 0..3u32 {
        let off = 2 * 64 + m as usize * 8;
        ring[off..off + 4].copy_from_slice(&(0xa0 + m).to_be_bytes());
        ring[off + 4..off + 8].copy_from_slice(&(100 + m).to_be_bytes());
    }
    regular(&mut ring, 4, 1500, 4);
    ring
}

#[test]
fn json_lines_and_human_lines() {
    let ring = hex(&small_ring());
    let args = ["--cqe-size", "64", "--cqe-cnt", "8", "--ci", "0"];
    let (got, ci) = decode_cq_json(&args, &ring);
    assert_eq!(ci, 5);
    let summary: Vec<(u64, bool, u64, u64)> = got
        .iter()
        .map(|j| {
            (
                j["slot"].as_u64().unwrap(),
                j["compressed"].as_bool().unwrap(),
                j["byte_cnt"].as_u64().unwrap(),
                j["wqe_counter"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        vec![
            (0, false, 60, 0),
            (1, true, 100, 1),
            (2, true, 101, 2),
            (3, true, 102, 3),
            (4, false, 1500, 4)
        ]
    );
    // The keys of `decode cqe --json`, and the mini ones.
    for key in [
        "opcode",
        "opcode_raw",
        "qpn",
        "timestamp",
        "wc_status",
        "rx_hash",
        "checksum",
        "flow_tag",
        "l3_hdr_type",
        "l4_hdr_type",
    ] {
        assert!(got[1].get(key).is_some(), "{key}: {}", got[1]);
    }
    assert_eq!(got[2]["rx_hash"], 0xa1);
    assert_eq!(got[2]["qpn"], 0x456);

    let mut all = vec!["decode", "cq"];
    all.extend_from_slice(&args);
    let out = mlx5dp(&all, &ring);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.lines().count(), 6, "{text}");
    assert!(text.lines().nth(2).unwrap().contains("mini"), "{text}");
    assert!(text.lines().last().unwrap().starts_with("ci 5"), "{text}");
}

#[test]
fn file_argument_and_kernel_dump_style() {
    let ring = small_ring();
    let mut dump = String::new();
    for (row, chunk) in ring.chunks(16).enumerate() {
        let bytes: Vec<String> = chunk.iter().map(|b| format!("{b:02x}")).collect();
        dump.push_str(&format!(
            "[  12.345678] mlx5_core 0000:3b:00.1: {:08x}: {}\n",
            row * 16,
            bytes.join(" ")
        ));
    }
    let path = std::env::temp_dir().join(format!("mlx5dp-decode-cq-{}.txt", std::process::id()));
    std::fs::write(&path, dump).unwrap();
    let p = path.to_str().unwrap();
    let out = mlx5dp(
        &[
            "decode",
            "cq",
            "--json",
            "--cqe-size",
            "64",
            "--cqe-cnt",
            "8",
            "--ci",
            "0",
            p,
        ],
        "",
    );
    let _ = std::fs::remove_file(&path);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.lines().last(), Some(r#"{"ci":5}"#));

    let out = mlx5dp(
        &[
            "decode",
            "cq",
            "--cqe-size",
            "64",
            "--cqe-cnt",
            "8",
            "--ci",
            "0",
            "/nonexistent/ring.txt",
        ],
        "",
    );
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn ownership_comes_from_ci() {
    let ring = hex(&small_ring());
    // Second pass: every entry still has owner 0 → nothing to poll.
    let (got, ci) = decode_cq_json(&["--cqe-size", "64", "--cqe-cnt", "8", "--ci", "8"], &ring);
    assert!(got.is_empty());
    assert_eq!(ci, 8);
    // Starting after the session.
    let (got, ci) = decode_cq_json(&["--cqe-size", "64", "--cqe-cnt", "8", "--ci", "4"], &ring);
    assert_eq!(got.len(), 1);
    assert_eq!(ci, 5);
}

#[test]
fn malformed_rings_fail_cleanly() {
    let run = |args: &[&str], ring: &[u8]| {
        let mut all = vec!["decode", "cq"];
        all.extend_from_slice(args);
        mlx5dp(&all, &hex(ring))
    };
    let base = ["--cqe-size", "64", "--cqe-cnt", "8", "--ci", "0"];
    let check = |out: Output, want: &str| {
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains(want), "{err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(!err.contains("panicked"), "{err}");
    };

    // Wrong length, bad count.
    check(run(&base, &small_ring()[..448]), "is 512 bytes, got 448");
    check(
        run(
            &["--cqe-size", "64", "--cqe-cnt", "6", "--ci", "0"],
            &[0; 384],
        ),
        "power of two",
    );
    check(
        run(
            &["--cqe-size", "128", "--cqe-cnt", "8", "--ci", "0"],
            &small_ring(),
        ),
        "is 1024 bytes",
    );

    // A title declaring more minis than the ring.
    let mut r = small_ring();
    r[64 + 44..64 + 48].copy_from_slice(&9u32.to_be_bytes());
    check(run(&base, &r), "9 mini-CQEs");

    // A session that runs past the ring: title at slot 6 of 7 minis,
    // polled from ci 0 with slots 0..5 valid.
    let mut r = small_ring();
    for s in [2usize, 3, 5] {
        r[s * 64..s * 64 + 64].copy_from_slice(&small_ring()[..64]);
    }
    r[6 * 64..7 * 64].copy_from_slice(&small_ring()[64..128]);
    r[6 * 64 + 44..6 * 64 + 48].copy_from_slice(&7u32.to_be_bytes());
    check(run(&base, &r), "runs past the ring");

    // Enhanced: a compressed CQE first, no title before it.
    let mut r = vec![0u8; 8 * 64];
    for s in 0..8 {
        r[s * 64 + 62] = 0xff;
        r[s * 64 + 63] = 0xf1;
    }
    r[62] = 0;
    r[63] = 0x1c;
    let mut args = base.to_vec();
    args.extend(["--layout", "enhanced"]);
    check(run(&args, &r), "no regular CQE");

    // An opcode the poller does not handle.
    let mut r = small_ring();
    r[63] = 0x60; // NO_PACKET
    check(run(&base, &r), "not a completion the poller handles");

    // Not hex.
    let out = mlx5dp(
        &[
            "decode",
            "cq",
            "--cqe-size",
            "64",
            "--cqe-cnt",
            "8",
            "--ci",
            "0",
            "-",
        ],
        "zz",
    );
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn requester_and_stride_formats() {
    // A send CQ: REQ title with two requester minis.
    let mut r = vec![0u8; 4 * 64];
    for s in 0..4 {
        r[s * 64 + 62] = 0xff;
        r[s * 64 + 63] = 0xf1;
    }
    r[44..48].copy_from_slice(&2u32.to_be_bytes());
    r[56..60].copy_from_slice(&0x0a00_0077u32.to_be_bytes());
    r[63] = 0x0c; // REQ, compressed, owner 0
    r[64..72].copy_from_slice(&[0x00, 0x05, 0x0a, 0, 0, 0, 0, 0]);
    r[72..80].copy_from_slice(&[0x00, 0x09, 0x08, 0, 0, 0, 0, 0x10]);
    let (got, ci) = decode_cq_json(
        &[
            "--cqe-size",
            "64",
            "--cqe-cnt",
            "4",
            "--ci",
            "0",
            "--mini-format",
            "req",
        ],
        &hex(&r),
    );
    assert_eq!(ci, 2);
    assert_eq!(got.len(), 2);
    assert_eq!(got[0]["opcode"], "req");
    assert_eq!(got[0]["wqe_counter"], 5);
    assert_eq!(got[0]["send_opcode"], "send");
    assert_eq!(got[1]["wqe_counter"], 9);
    assert_eq!(got[1]["send_opcode"], "rdma_write");
    assert_eq!(got[1]["qpn"], 0x77);

    // FTAG_STRIDX: flow tag and stride index from the mini.
    let mut r = small_ring();
    r[2 * 64..2 * 64 + 8].copy_from_slice(&[0x34, 0x56, 0x00, 0x07, 0x12, 0x00, 0x00, 0x40]);
    let (got, _) = decode_cq_json(
        &[
            "--cqe-size",
            "64",
            "--cqe-cnt",
            "8",
            "--ci",
            "0",
            "--mini-format",
            "ftag-stridx",
        ],
        &hex(&r),
    );
    assert_eq!(got[1]["flow_tag"], 0x12_3456);
    assert_eq!(got[1]["stride_idx"], 7);
    assert_eq!(got[1]["byte_cnt"], 0x40);
}

/// The option values other tools' spellings use (PRM numbers, rdma-core and
/// DPDK names, any case, hex counters) select the same decoding as the
/// canonical names.
#[test]
fn option_spellings_select_the_same_decoding() {
    let ring = hex(&small_ring());
    let run = |ci: &str, cnt: &str, layout: &str, format: &str| {
        let args = [
            "--cqe-size",
            "64",
            "--cqe-cnt",
            cnt,
            "--ci",
            ci,
            "--layout",
            layout,
            "--mini-format",
            format,
        ];
        decode_cq_json(&args, &ring)
    };
    let groups: [(&str, &[&str]); 5] = [
        ("hash", &["0", "HASH", "rx_hash"]),
        ("csum", &["1", "checksum", "CSUM"]),
        ("ftag-stridx", &["2", "FTAG_STRIDX", "flow_tag"]),
        ("csum-stridx", &["3", "csum_stridx", "Csum-Stridx"]),
        ("l34h-stridx", &["4", "L34H_STRIDX", "l3l4"]),
    ];
    for (name, spellings) in groups {
        let want = run("0", "8", "basic", name);
        assert!(!want.0.is_empty(), "{name}: the ring polls to completions");
        for s in spellings {
            assert_eq!(run("0x0", "0x8", "Legacy", s), want, "{s} for {name}");
        }
    }
    let want = run("0", "8", "basic", "req");
    assert_eq!(run("0", "8", "0", "requester"), want);
    let enhanced = |layout: &str| {
        let out = mlx5dp(
            &[
                "decode",
                "cq",
                "--json",
                "--cqe-size",
                "64",
                "--cqe-cnt",
                "8",
                "--ci",
                "0",
                "--layout",
                layout,
                "-",
            ],
            &ring,
        );
        (out.status.code(), out.stdout, out.stderr)
    };
    assert_eq!(enhanced("1"), enhanced("enhanced"));
    assert_eq!(enhanced("ENHANCED"), enhanced("enhanced"));
    // An unknown spelling is still refused (exit status 2).
    let out = mlx5dp(
        &[
            "decode",
            "cq",
            "--cqe-size",
            "64",
            "--cqe-cnt",
            "8",
            "--ci",
            "0",
            "--mini-format",
            "l2",
            "-",
        ],
        &ring,
    );
    assert_eq!(out.status.code(), Some(2));
}
