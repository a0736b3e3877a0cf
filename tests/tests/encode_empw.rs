//! `mlx5dp encode wqe` with `op=empw` / `op=mpw` bursts against DPDK 26.07's
//! mlx5 eMPW / legacy MPW golden vectors (`specs/golden/dpdk/empw-cases.txt`).
//!
//! Every case of the sample becomes encode input: one `op=empw` (or
//! `op=mpw`) line per burst, one `pkt=ptr:ADDR:LEN:LKEY[:CS]` per mbuf
//! with its bytes in `mem=` (so the queue may inline it, as the PMD does;
//! CS the checksum offload DPDK derives from the mbuf's flags when the
//! routine has `MLX5_TXOFF_CONFIG_CSUM`: `csum`, `l3csum` or `l4csum`),
//! and the case's queue: `--qpn`, `--sq-wqebbs`, `--pi`, no BlueFlame,
//! `--empw-dpdk` with `--empw-inline-max` = `inlen_empw`,
//! `--empw-inline-send` = `inlen_send`, `--empw-wqe-thres` = `wqe_thres`
//! (only with inlining compiled in, as `golden_empw` does),
//! `--no-completions` (DPDK found no CQE between the bursts). The printed
//! WQEs must cover exactly the WQEBBs DPDK wrote, hold DPDK's value in
//! every byte DPDK wrote and 00 elsewhere; the doorbell record and the
//! doorbell must be DPDK's. (WQEBBs DPDK wrote past what a burst published,
//! the title of a frame its inline routine then refuses as too short, are
//! never read by the device and not printed: not compared.) A burst whose
//! packet the tool refuses (`--keep-going`: the next burst goes on) must
//! be one DPDK's `tx_burst` took fewer packets of, and the other way round.
//!
//! `MLX5DP_EMPW_CASES=/path` replays that file instead (e.g. cases from
//! `tests/refcheck/empw_gen.py`); there a case whose packets the tool cannot
//! express (multi-segment mbufs, TSO, VLAN insertion, tunnels) is a gap.

use std::collections::{BTreeMap, BTreeSet};

use mlx5dp::sq::QpType;
use mlx5dp_setup::encode::{encode, EncodeConfig, Event};

const GOLDEN: &str = include_str!("../../specs/golden/dpdk/empw-cases.txt");

const OLX_TSO: u64 = 1 << 1;
const OLX_SWP: u64 = 1 << 2;
const OLX_CSUM: u64 = 1 << 3;
const OLX_INLINE: u64 = 1 << 4;
const OLX_VLAN: u64 = 1 << 5;
const OLX_MPW: u64 = 1 << 9;
const TX_TUNNEL_MASK: u64 = 0xf << 45;
const TX_TCP_SEG: u64 = 1 << 50;
const TX_L4_MASK: u64 = 3 << 52;
const TX_IP_CKSUM: u64 = 1 << 54;
const TX_VLAN: u64 = 1 << 57;

/// Environment variable naming a case file to replay instead of the sample.
const CASES_ENV: &str = "MLX5DP_EMPW_CASES";
/// How the reason a case cannot be expressed starts.
const UNEXPRESSED: &str = "not expressed: ";

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

/// The case as encode input and queue settings, or why the tool cannot
/// express its packets.
fn to_input(c: &Case) -> Result<(EncodeConfig, String), String> {
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
    // DPDK's completion handler found no CQE between the bursts (each
    // burst's `in.wqe_pi` is the last one's `out.wqe_pi`): the device
    // completes nothing, and a later burst finds the ring fuller.
    cfg.no_completions = true;
    cfg.keep_going = true;
    for b in 1..num(c, "bursts") {
        let (pi, before) = (
            num(c, &format!("b{b}.in.wqe_pi")),
            num(c, &format!("b{}.out.wqe_pi", b - 1)),
        );
        if pi != before {
            return Err(format!(
                "{UNEXPRESSED}burst {b}: DPDK completed WQEs before it (wqe_pi {before} -> {pi})"
            ));
        }
    }
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
            if num(c, &k("nb_segs")) != 1 {
                return Err(format!("{UNEXPRESSED}packet {i}: multi-segment mbuf"));
            }
            let fl = num(c, &k("ol_flags"));
            if (olx & OLX_TSO != 0 && fl & TX_TCP_SEG != 0)
                || (olx & OLX_VLAN != 0 && fl & TX_VLAN != 0)
                || (olx & OLX_SWP != 0 && fl & TX_TUNNEL_MASK != 0)
            {
                return Err(format!(
                    "{UNEXPRESSED}packet {i}: ol_flags {fl:#x} (TSO, VLAN insertion, tunnel)"
                ));
            }
            // DPDK's `txq_ol_cksum_to_cs`, with the checksum offload
            // compiled in: L3 for IP_CKSUM, L4 for a TCP/UDP checksum (or
            // a TSO request the routine otherwise ignores).
            let csum = olx & OLX_CSUM != 0;
            let l3 = csum && fl & TX_IP_CKSUM != 0;
            let l4 = csum && fl & (TX_L4_MASK | TX_TCP_SEG) != 0;
            let cs = match (l3, l4) {
                (true, true) => ":csum",
                (true, false) => ":l3csum",
                (false, true) => ":l4csum",
                (false, false) => "",
            };
            let addr = num(c, &k("addr"));
            let data = c.1.get(&k("data")).expect("data");
            text.push_str(&format!(
                " pkt=ptr:{addr:#x}:{}:{lkey:#x}{cs} mem={addr:#x}:{data}",
                data.len() / 2,
            ));
        }
        text.push('\n');
    }
    Ok((cfg, text))
}

fn check(c: &Case) -> Result<(), String> {
    let (cfg, text) = to_input(c)?;
    let enc = encode(&cfg, &text).map_err(|e| format!("encode: {e}"))?;
    let bursts = num(c, "bursts");
    let wqe_cnt = cfg.sq_wqebbs;
    let mut errs = Vec::new();
    // A burst the tool refused a packet of (`--keep-going`: it goes on with
    // the next burst) is one DPDK's `tx_burst` returned fewer packets for,
    // and the other way round.
    let refused: BTreeSet<u64> = enc
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Refused(r) => Some(r.line as u64 - 1),
            _ => None,
        })
        .collect();
    for b in 0..bursts {
        let short = num(c, &format!("b{b}.out.ret")) < num(c, &format!("b{b}.n"));
        if short != refused.contains(&b) {
            errs.push(format!(
                "b{b}: DPDK took {} of {} packets, the tool refused {}",
                num(c, &format!("b{b}.out.ret")),
                num(c, &format!("b{b}.n")),
                if refused.contains(&b) { "one" } else { "none" }
            ));
        }
    }
    let mut ours = BTreeSet::new();
    let (mut burst, mut rang) = (0, 0);
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
            // The refused burst's doorbell (if it posted any packet) came
            // first; the next event is the next burst's.
            Event::Refused(r) => burst = r.line as u32,
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
                rang += 1;
            }
        }
    }
    for (k, _) in c.1.iter().filter(|(k, _)| k.contains(".sqmask.")) {
        let (b, slot) = k.split_once(".sqmask.").expect("key");
        let b: u32 = b.trim_start_matches('b').parse().expect("burst");
        let slot: u32 = slot.parse().expect("slot");
        // Only what the burst published (`in.wqe_ci` to `out.wqe_ci`).
        let from = num(c, &format!("b{b}.in.wqe_ci")) as u32 & 0xffff;
        let to = num(c, &format!("b{b}.out.wqe_ci")) as u32 & 0xffff;
        let published = (slot.wrapping_sub(from) % wqe_cnt) < (to.wrapping_sub(from) & 0xffff)
            || to.wrapping_sub(from) & 0xffff >= wqe_cnt;
        if published && !ours.contains(&(b, slot)) {
            errs.push(format!("b{b}: DPDK wrote WQEBB {slot}, not printed"));
        }
    }
    // Every burst rings once, but one that posted nothing (a refused first
    // packet: DPDK writes no doorbell either).
    let rung = (0..bursts)
        .filter(|b| num(c, &format!("b{b}.out.db_count")) > 0)
        .count();
    if rang != rung {
        errs.push(format!("{rang} doorbells, DPDK {rung} for {bursts} bursts"));
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
    let file = std::env::var_os(CASES_ENV);
    let text = match &file {
        None => GOLDEN.to_string(),
        Some(p) => std::fs::read_to_string(p)
            .unwrap_or_else(|e| panic!("{CASES_ENV}={}: {e}", p.to_string_lossy())),
    };
    let cases = parse(&text);
    assert!(cases.len() >= 5, "{} cases", cases.len());
    let (mut fails, mut gaps) = (Vec::new(), 0);
    let mut kinds = BTreeSet::new();
    for c in &cases {
        match check(c) {
            Ok(()) => {
                println!("PASS {}", c.0);
                kinds.insert(num(c, "olx") & OLX_MPW != 0);
            }
            Err(e) if file.is_some() && e.starts_with(UNEXPRESSED) => {
                println!("GAP  {}: {e}", c.0);
                gaps += 1;
            }
            Err(e) => {
                println!("FAIL {}:\n    {e}", c.0);
                fails.push(c.0.clone());
            }
        }
    }
    println!(
        "encode wqe, eMPW/MPW: {} pass, {gaps} gaps, {} fail of {}",
        cases.len() - gaps - fails.len(),
        fails.len(),
        cases.len()
    );
    assert!(fails.is_empty(), "failing cases: {fails:?}");
    if file.is_none() {
        assert_eq!(kinds.len(), 2, "both eMPW and legacy MPW cases replayed");
    }
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
