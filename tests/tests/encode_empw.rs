//! `mlx5dp encode wqe` with `op=empw` / `op=mpw` bursts against DPDK 26.07's
//! mlx5 eMPW / legacy MPW golden vectors (`specs/golden/dpdk/empw-cases.txt`).
//!
//! Every case of the sample becomes encode input: one `op=empw` (or
//! `op=mpw`) line per burst, one `pkt=ptr:ADDR:LEN:LKEY[:csum]` per mbuf
//! with its bytes in `mem=` (so the queue may inline it, as the PMD does),
//! and the case's queue: `--qpn`, `--sq-wqebbs`, `--pi`, no BlueFlame,
//! `--empw-dpdk` with `--empw-inline-max` = `inlen_empw`,
//! `--empw-inline-send` = `inlen_send`, `--empw-wqe-thres` = `wqe_thres`
//! (only with inlining compiled in, as `golden_empw` does). The printed
//! WQEs must cover exactly the WQEBBs DPDK wrote, hold DPDK's value in
//! every byte DPDK wrote and 00 elsewhere; the doorbell record and the
//! doorbell must be DPDK's.

use std::collections::{BTreeMap, BTreeSet};

use mlx5dp::sq::QpType;
use mlx5dp_setup::encode::{encode, EncodeConfig, Event};

const GOLDEN: &str = include_str!("../../specs/golden/dpdk/empw-cases.txt");

const OLX_INLINE: u64 = 1 << 4;
const OLX_MPW: u64 = 1 << 9;
const TX_L4_MASK: u64 = 3 << 52;
const TX_IP_CKSUM: u64 = 1 << 54;

type Case = (String, BTreeMap<String, String>);

fn parse(text: &str) -> Vec<Case> {
    let mut out = Vec::new();
    let mut cur: Option<Case> = None;
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if line == "end" {
            out.extend(cur.take());
            continue;
        }
        let Some((k, v)) = line.split_once('=') else {
            continue;
        };
        if k == "case" {
            cur = Some((v.to_string(), BTreeMap::new()));
        } else if let Some(c) = cur.as_mut() {
            c.1.insert(k.to_string(), v.to_string());
        }
    }
    out
}

fn num(c: &Case, k: &str) -> u64 {
    let s = c.1.get(k).map_or("0", String::as_str).trim();
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).expect("hex"),
        None => s.parse().expect("number"),
    }
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).expect("hex byte"))
        .collect()
}

/// The case as encode input and queue settings.
fn to_input(c: &Case) -> (EncodeConfig, String) {
    let olx = num(c, "olx");
    let mpw = olx & OLX_MPW != 0;
    let mut cfg = EncodeConfig::new(
        QpType::RawPacket,
        (num(c, "cfg.qp_num_8s") >> 8) as u32,
        1 << num(c, "cfg.wqe_n"),
    );
    cfg.pi = num(c, "b0.in.wqe_ci") as u32;
    cfg.bf_size = 0;
    cfg.bf_reg = 0;
    cfg.empw_dpdk = true;
    cfg.empw_inline_max = Some(num(c, "cfg.inlen_empw") as u16);
    cfg.empw_inline_send = num(c, "cfg.inlen_send") as u16;
    cfg.empw_wqe_thres = if olx & OLX_INLINE != 0 {
        num(c, "cfg.wqe_thres") as u16
    } else {
        0
    };
    let lkey = num(c, "cfg.lkey");
    let mut text = String::new();
    for b in 0..num(c, "bursts") {
        text.push_str(if mpw { "op=mpw" } else { "op=empw" });
        for i in 0..num(c, &format!("b{b}.n")) {
            let k = |f: &str| format!("b{b}.pkt.{i}.{f}");
            assert_eq!(num(c, &k("nb_segs")), 1, "{}: multi-segment", c.0);
            let fl = num(c, &k("ol_flags"));
            let csum = fl & (TX_IP_CKSUM | TX_L4_MASK) != 0;
            let addr = num(c, &k("addr"));
            let data = c.1.get(&k("data")).expect("data");
            text.push_str(&format!(
                " pkt=ptr:{addr:#x}:{}:{lkey:#x}{} mem={addr:#x}:{data}",
                data.len() / 2,
                if csum { ":csum" } else { "" }
            ));
        }
        text.push('\n');
    }
    (cfg, text)
}

fn check(c: &Case) -> Result<(), String> {
    let (cfg, text) = to_input(c);
    let enc = encode(&cfg, &text).map_err(|e| format!("encode: {e}"))?;
    if let Some(r) = enc.refusal {
        return Err(format!("refused: {r}"));
    }
    let wqe_cnt = cfg.sq_wqebbs;
    let mut errs = Vec::new();
    let mut ours = BTreeSet::new();
    let mut burst = 0;
    for e in &enc.events {
        match e {
            Event::Wqe(w) => {
                for (k, bb) in w.bytes.chunks(64).enumerate() {
                    let slot = (u32::from(w.wqe_index) + k as u32) % wqe_cnt;
                    ours.insert((burst, slot));
                    let key = |f: &str| format!("b{burst}.{f}.{slot}");
                    let (Some(want), Some(mask)) = (c.1.get(&key("sq")), c.1.get(&key("sqmask")))
                    else {
                        errs.push(format!("b{burst}: WQEBB {slot} printed, DPDK wrote none"));
                        continue;
                    };
                    let want = hex(want);
                    for (j, m) in mask.bytes().enumerate() {
                        let ok = if m == b'x' {
                            bb[j] == want[j]
                        } else {
                            bb[j] == 0
                        };
                        if !ok {
                            errs.push(format!(
                                "b{burst}: WQEBB {slot} byte {j}: printed {:02x}, DPDK {} {:02x}",
                                bb[j], m as char, want[j]
                            ));
                        }
                    }
                }
            }
            Event::Doorbell(d) => {
                let k = |f: &str| format!("b{burst}.{f}");
                let want = c.1.get(&k("out.dbrec")).map(|h| hex(h));
                if want.as_deref() != Some(&d.dbrec.to_be_bytes()[..]) {
                    errs.push(format!("b{burst}: dbrec {:#x}, DPDK {want:02x?}", d.dbrec));
                }
                let n = num(c, &k("out.db_count"));
                let want = c.1.get(&k(&format!("out.db.{}", n.saturating_sub(1))));
                let got = d.mmio.as_ref().map(|m| m.bytes.clone());
                if n > 0 && got != want.map(|h| hex(h)) {
                    errs.push(format!("b{burst}: doorbell {got:02x?}, DPDK {want:?}"));
                }
                burst += 1;
            }
        }
    }
    for (k, _) in c.1.iter().filter(|(k, _)| k.contains(".sqmask.")) {
        let (b, slot) = k.split_once(".sqmask.").expect("key");
        let b: u32 = b.trim_start_matches('b').parse().expect("burst");
        let slot: u32 = slot.parse().expect("slot");
        if !ours.contains(&(b, slot)) {
            errs.push(format!("b{b}: DPDK wrote WQEBB {slot}, not printed"));
        }
    }
    if burst as u64 != num(c, "bursts") {
        errs.push(format!("{burst} doorbells for {} bursts", num(c, "bursts")));
    }
    if errs.is_empty() {
        Ok(())
    } else {
        errs.truncate(10);
        Err(errs.join("\n    "))
    }
}

#[test]
fn encode_reproduces_dpdk_empw_cases() {
    let cases = parse(GOLDEN);
    assert!(cases.len() >= 5, "sample has {} cases", cases.len());
    let mut fails = Vec::new();
    let mut kinds = BTreeSet::new();
    for c in &cases {
        match check(c) {
            Ok(()) => {
                println!("PASS {}", c.0);
                kinds.insert(num(c, "olx") & OLX_MPW != 0);
            }
            Err(e) => {
                println!("FAIL {}:\n    {e}", c.0);
                fails.push(c.0.clone());
            }
        }
    }
    assert!(fails.is_empty(), "failing cases: {fails:?}");
    assert_eq!(kinds.len(), 2, "both eMPW and legacy MPW cases replayed");
}

#[test]
fn inline_only_packets_and_mixing_rules() {
    let cfg = EncodeConfig::new(QpType::RawPacket, 0x44, 64);
    // An inline: packet longer than the inline limit has no address.
    let long = "00".repeat(300);
    let e = encode(&cfg, &format!("op=empw pkt=inline:{long}\n")).unwrap_err();
    assert!(e.to_string().contains("line 1"), "{e}");
    // empw and ordinary work requests do not mix.
    let e = encode(
        &cfg,
        "op=empw pkt=ptr:0x1000:64:1\nop=send sge=0x1000:64:1 mem=0x1000:000000000000000000000000000000000000\n",
    )
    .unwrap_err();
    assert!(e.to_string().contains("line 2"), "{e}");
    // A short frame is refused by the queue after the earlier packets.
    let enc = encode(
        &cfg,
        "op=empw pkt=ptr:0x1000:64:1 pkt=inline:00112233445566778899aabbccddeeff0011\n",
    )
    .expect("encode");
    assert!(enc.refusal.is_some());
    assert_eq!(
        enc.events
            .iter()
            .filter(|e| matches!(e, Event::Wqe(_)))
            .count(),
        1
    );
}
