//! Replays every case of `specs/golden/dpdk/rx-cases.txt` (CQ rings with
//! regular CQEs and compressed sessions in, what DPDK 26.07's mlx5 Rx burst
//! returned out) through `mlx5dp::cq` and compares what the API exposes:
//! per packet the byte count, RSS hash, checksum-OK bits, L3/L4 types, VLAN,
//! RQ slot (cyclic RQ) or stride index (striding RQ); the burst sizes; the
//! consumer index and doorbell record after; and (scalar path, basic layout)
//! exactly which slots were invalidated and how.
//!
//! DPDK's scalar path is the reference; a case with only the vector path is
//! replayed against the vector results, except for slot invalidation (the
//! vector path also invalidates the title): a known gap, printed and counted.
#![allow(
    clippy::unwrap_used,
    reason = "test harness: a malformed golden file should stop the test"
)]

use mlx5dp::cq::{
    Cq, CqConfig, CqParts, CqeSize, Layout, LookupError, RecvRetired, SendRetired,
    StrideCompletion, WorkQueues, WqRef,
};
use mlx5dp::prm::{L3HdrType, L4HdrType, MiniCqeFormat, WcStatus};
use std::collections::BTreeMap;
use std::ptr::NonNull;

const GOLDEN: &str = include_str!("../../specs/golden/dpdk/rx-cases.txt");

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn num(s: &str) -> u64 {
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).unwrap(),
        None => s.parse().unwrap(),
    }
}

fn parse(text: &str) -> Vec<(String, BTreeMap<String, String>)> {
    let mut out = Vec::new();
    let mut cur: Option<(String, BTreeMap<String, String>)> = None;
    for line in text.lines() {
        if line.starts_with('#') {
            continue;
        }
        if let Some(name) = line.strip_prefix("case=") {
            cur = Some((name.into(), BTreeMap::new()));
        } else if line == "end" {
            out.extend(cur.take());
        } else if let (Some(c), Some((k, v))) = (cur.as_mut(), line.split_once('=')) {
            c.1.insert(k.into(), v.into());
        }
    }
    out
}

struct Mem {
    ring: *mut u8,
    len: usize,
    dbrec: *mut u32,
}

/// One 64-byte ring line, 64-byte aligned.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([u8; 64]);

impl Mem {
    fn new(slots: usize) -> Self {
        // 64-byte aligned, as the CQ requires (mlx5dv buffers are
        // page-aligned).
        let mut v = vec![Line([0u8; 64]); slots];
        for line in &mut v {
            line.0[62] = 0xff;
            line.0[63] = 0xf1;
        }
        let len = slots * 64;
        let ring = Box::into_raw(v.into_boxed_slice()).cast::<u8>();
        let dbrec = Box::into_raw(Box::new([0u32; 2])).cast::<u32>();
        Self { ring, len, dbrec }
    }
    fn write(&self, slot: usize, bytes: &[u8]) {
        assert!(slot * 64 + bytes.len() <= self.len);
        // SAFETY: in bounds (asserted) of the live ring; no references exist.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.ring.add(slot * 64), bytes.len())
        }
    }
    fn slot(&self, slot: usize) -> Vec<u8> {
        let mut v = vec![0u8; 64];
        // SAFETY: in bounds of the live ring.
        unsafe { std::ptr::copy_nonoverlapping(self.ring.add(slot * 64), v.as_mut_ptr(), 64) }
        v
    }
    fn dbrec0(&self) -> [u8; 4] {
        // SAFETY: 4 live bytes.
        unsafe { self.dbrec.cast::<[u8; 4]>().read_volatile() }
    }
}

impl Drop for Mem {
    fn drop(&mut self) {
        // SAFETY: from `Box::into_raw` with these types.
        unsafe {
            drop(Box::from_raw(std::ptr::slice_from_raw_parts_mut(
                self.ring.cast::<Line>(),
                self.len / 64,
            )));
            drop(Box::from_raw(self.dbrec.cast::<[u32; 2]>()));
        }
    }
}

/// The receive side as DPDK models it: a cyclic RQ consumed in order, or a
/// striding RQ whose strides are counted per WQE (`consumed_strd`).
struct Rx {
    strd_n: u32,
    consumed: u32,
    /// Stride index DPDK would assert for each packet (consumed before it).
    expected_stride: Vec<u32>,
}

impl WorkQueues for Rx {
    fn retire_send(&mut self, _: WqRef, _: u16, _: WcStatus) -> Result<SendRetired, LookupError> {
        Err(LookupError::Unsupported)
    }
    fn retire_recv(
        &mut self,
        _: WqRef,
        wqe_counter: u16,
        _: WcStatus,
    ) -> Result<RecvRetired, LookupError> {
        Ok(RecvRetired {
            wr_id: u64::from(wqe_counter),
            rx_csum_valid: false,
        })
    }
    fn retire_strides(
        &mut self,
        _: WqRef,
        c: StrideCompletion,
        _: WcStatus,
    ) -> Result<RecvRetired, LookupError> {
        if self.consumed == self.strd_n {
            self.consumed = 0;
        }
        if !c.filler {
            self.expected_stride.push(self.consumed);
        }
        self.consumed += u32::from(c.strides);
        Ok(RecvRetired {
            wr_id: u64::from(c.stride_index),
            rx_csum_valid: false,
        })
    }
}

fn run(name: &str, kv: &BTreeMap<String, String>, gaps: &mut Vec<String>) -> Vec<String> {
    let mut errs = Vec::new();
    let prefix = if kv.contains_key("scalar.func") {
        "scalar"
    } else {
        "vec"
    };
    let g = |k: &str| kv.get(k).map(|v| num(v));
    let striding = kv.get("rq_type").map(String::as_str) == Some("mprq");
    let log_cq = g("cfg.log_cq").unwrap() as u32;
    let slots = 1usize << log_cq;
    let layout = match kv["layout"].as_str() {
        "basic" => Layout::Basic,
        _ => Layout::Enhanced,
    };
    let format = match kv["mcqe_format"].as_str() {
        "hash" => MiniCqeFormat::Hash,
        "csum" => MiniCqeFormat::Csum,
        "csum_stridx" => MiniCqeFormat::CsumStridx,
        "ftag_stridx" => MiniCqeFormat::FtagStridx,
        other => panic!("{name}: format {other}"),
    };
    let mem = Mem::new(slots);
    let mut input = BTreeMap::new();
    for (k, v) in kv {
        if let Some(s) = k
            .strip_prefix("in.cqe.")
            .or_else(|| k.strip_prefix("in.stale."))
        {
            let s: usize = s.parse().unwrap();
            mem.write(s, &hex(v));
            input.insert(s, hex(v));
        }
    }
    let before: Vec<Vec<u8>> = (0..slots).map(|s| mem.slot(s)).collect();
    let parts = CqParts {
        buf: NonNull::new(mem.ring).unwrap(),
        cqe_cnt: slots as u32,
        cqe_size: CqeSize::B64,
        dbrec: NonNull::new(mem.dbrec).unwrap(),
        uar: None,
        cqn: 0,
    };
    let cfg = CqConfig {
        compression: Some((layout, format)),
        striding_rq: striding,
        ..CqConfig::default()
    };
    let ci0 = g(&format!("{prefix}.in.cq_ci")).unwrap() as u32;
    // SAFETY: `mem` outlives `cq` (declared first, dropped last).
    let mut cq = unsafe { Cq::from_raw_parts(parts, cfg, ci0) }.unwrap();
    let strd_n = g("cfg.log_strd_num").map_or(0, |l| 1u32 << l);
    let mut rx = Rx {
        strd_n,
        consumed: g(&format!("{prefix}.in.consumed_strd")).unwrap_or(0) as u32,
        expected_stride: vec![],
    };
    let rq_mask = g("cfg.log_rq").map_or(0, |l| (1u64 << l) - 1);
    let mut pkt = 0usize;
    for call in 0.. {
        let Some(c) = kv.get(&format!("{prefix}.call.{call}")) else {
            break;
        };
        let (req, ret) = c.split_once(' ').unwrap();
        let req: usize = req.trim_start_matches("req:").parse().unwrap();
        let ret: usize = ret.trim_start_matches("ret:").parse().unwrap();
        let mut got = Vec::new();
        let r = cq.poll(&mut rx, req, |c| got.push(c.clone()));
        if let Err(e) = r {
            errs.push(format!("call {call}: {e:?}"));
            break;
        }
        if got.len() != ret {
            errs.push(format!(
                "call {call}: expected {ret} packets, got {}",
                got.len()
            ));
        }
        for c in &got {
            let p = |f: &str| kv.get(&format!("{prefix}.pkt.{pkt}.{f}")).map(|v| num(v));
            let cmp = |errs: &mut Vec<String>, what: &str, e: Option<u64>, got: u64| {
                if let Some(e) = e {
                    if e != got {
                        errs.push(format!("pkt {pkt} {what}: expected {e:#x}, got {got:#x}"));
                    }
                }
            };
            cmp(
                &mut errs,
                "pkt_len",
                p("pkt_len"),
                u64::from(c.packet_len()),
            );
            let ol = p("ol_flags").unwrap_or(0);
            if ol & 0x2 != 0 {
                cmp(
                    &mut errs,
                    "hash_rss",
                    p("hash_rss"),
                    u64::from(c.rss_hash()),
                );
            } else if c.rss_hash() != 0 {
                errs.push(format!(
                    "pkt {pkt}: DPDK saw no hash, we have {:#x}",
                    c.rss_hash()
                ));
            }
            let ck = p("cksum_flags").unwrap_or(0);
            cmp(
                &mut errs,
                "l3_ok",
                Some(u64::from(ck & 0x80 != 0)),
                u64::from(c.l3_ok()),
            );
            cmp(
                &mut errs,
                "l4_ok",
                Some(u64::from(ck & 0x100 != 0)),
                u64::from(c.l4_ok()),
            );
            if let Some(pt) = p("packet_type") {
                let l3 = match pt & 0xf0 {
                    0x10 | 0x90 | 0x30 => L3HdrType::Ipv4,
                    0x40 | 0xe0 | 0xc0 => L3HdrType::Ipv6,
                    _ => L3HdrType::None,
                };
                let tcp = matches!(
                    c.l4_hdr_type(),
                    L4HdrType::TcpNoAck | L4HdrType::TcpAckNoData | L4HdrType::TcpAckAndData
                );
                let l4 = match pt & 0xf00 {
                    0x100 => tcp,
                    0x200 => c.l4_hdr_type() == L4HdrType::Udp,
                    0x300 => c.ip_frag(),
                    _ => !tcp && c.l4_hdr_type() != L4HdrType::Udp,
                };
                if c.l3_hdr_type() != l3 || !l4 {
                    errs.push(format!(
                        "pkt {pkt} ptype {pt:#x}: we have {:?}/{:?}",
                        c.l3_hdr_type(),
                        c.l4_hdr_type()
                    ));
                }
            }
            let vlan = if ol & 0x1 != 0 { p("vlan_tci") } else { None };
            if vlan != c.vlan().map(u64::from) {
                errs.push(format!(
                    "pkt {pkt} vlan: expected {vlan:?}, got {:?}",
                    c.vlan()
                ));
            }
            if striding {
                let e = rx.expected_stride.get(pkt).copied().map(u64::from);
                cmp(
                    &mut errs,
                    "stride_index",
                    e,
                    u64::from(c.stride_index().unwrap_or(u16::MAX)),
                );
            } else {
                cmp(&mut errs, "rq_idx", p("rq_idx"), c.wr_id() & rq_mask);
            }
            pkt += 1;
        }
    }
    if let Some(n) = g(&format!("{prefix}.received")) {
        if n != pkt as u64 {
            errs.push(format!("received: expected {n}, got {pkt}"));
        }
    }
    if let Some(e) = g(&format!("{prefix}.out.cq_ci")) {
        if e != u64::from(cq.consumer_index()) {
            errs.push(format!("cq_ci: expected {e}, got {}", cq.consumer_index()));
        }
    }
    if let Some(e) = kv.get(&format!("{prefix}.out.cq_dbrec")) {
        if hex(e) != mem.dbrec0() {
            errs.push(format!("cq_dbrec: expected {e}, got {:02x?}", mem.dbrec0()));
        }
    }
    if striding {
        if let Some(e) = g(&format!("{prefix}.out.consumed_strd")) {
            if e != u64::from(rx.consumed) {
                errs.push(format!("consumed_strd: expected {e}, got {}", rx.consumed));
            }
        }
    }
    if prefix == "scalar" && layout == Layout::Basic {
        for (s, old) in before.iter().enumerate() {
            let now = mem.slot(s);
            let expect = kv
                .get(&format!("scalar.cq_after.{s}"))
                .map(|v| hex(v))
                .unwrap_or_else(|| old.clone());
            if now != expect {
                errs.push(format!(
                    "slot {s} after: expected {:02x?}, got {:02x?}",
                    &expect[56..],
                    &now[56..]
                ));
            }
        }
    } else if prefix == "vec" {
        gaps.push(format!("{name}: vector-only case; slot invalidation not compared (DPDK's vector path also invalidates the title)"));
    }
    errs
}

#[test]
fn golden_rx_cases() {
    let cases = parse(GOLDEN);
    assert!(!cases.is_empty());
    let (mut pass, mut fail) = (0, 0);
    let mut gaps = Vec::new();
    for (name, kv) in &cases {
        let errs = run(name, kv, &mut gaps);
        if errs.is_empty() {
            pass += 1;
        } else {
            fail += 1;
            eprintln!("FAIL {name}:\n  {}", errs.join("\n  "));
        }
    }
    for g in &gaps {
        eprintln!("GAP  {g}");
    }
    eprintln!(
        "golden_rx: {pass} passed ({} with a known gap), {fail} failed, of {}",
        gaps.len(),
        cases.len()
    );
    assert_eq!(fail, 0);
}
