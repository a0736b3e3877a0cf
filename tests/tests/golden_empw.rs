//! Golden vectors of DPDK 26.07's mlx5 eMPW / legacy MPW Tx burst routines,
//! replayed through `mlx5dp::sq::mpw` over ordinary memory.
//!
//! Source: `specs/golden/dpdk/empw-cases.txt` (a sample of vectors produced
//! by running the PMD's `mlx5_tx_burst_*_empw` / `*_mpw` on queues in
//! ordinary memory; see that file's header for the format). Every case runs
//! through a [`TxQueue`] configured with DPDK's policy knobs
//! ([`TxConfig::dpdk_empw`] / [`TxConfig::dpdk_mpw`] with the case's
//! `inlen_empw`, `inlen_send` and `wqe_thres`), twice from identical fresh
//! state (SQ filled a5 then 5a) so that we get our own written mask. Then:
//!
//! - every byte DPDK wrote (`x`: since the case began, the file's mask)
//!   must be one we wrote since then, with DPDK's value;
//! - a byte we wrote and DPDK did not is allowed only inside the WQEBBs DPDK
//!   wrote and only as zero (a single-packet SEND WQE zeroes its padding;
//!   sessions write none, as DPDK);
//! - the producer counter, the doorbell record, the doorbell (the last
//!   8-byte store to the UAR), the number of packets accepted and the
//!   number of CQE requests must match.
//!
//! Cases our packet model cannot express are printed and counted as known
//! gaps, never skipped silently.

use std::collections::BTreeMap;

use mlx5dp::mmio::DeviceWord;
use mlx5dp::prm::{EthCsFlags, SwpFlags};
use mlx5dp::sq::mpw::{Empw, LegacyMpw, Packet, PacketBuf, TxConfig, TxMode, TxOffload, TxQueue};
use mlx5dp::sq::{
    DoorbellOnly, FrameSge, QpType, RawPacketQp, SendQueue, SqConfig, SqRawParts, SqShadowEntry,
    Wqebb,
};

const GOLDEN: &str = include_str!("../../specs/golden/dpdk/empw-cases.txt");
const UAR_SIZE: usize = 4096;

/// DPDK `MLX5_TXOFF_CONFIG_*` bits of the case's `olx`.
const OLX_TSO: u64 = 1 << 1;
const OLX_SWP: u64 = 1 << 2;
const OLX_CSUM: u64 = 1 << 3;
const OLX_INLINE: u64 = 1 << 4;
const OLX_VLAN: u64 = 1 << 5;
const OLX_MPW: u64 = 1 << 9;
/// `RTE_MBUF_F_TX_*` bits of a packet's `ol_flags`.
const TX_TUNNEL_MASK: u64 = 0xf << 45;
const TX_TUNNEL_IP: u64 = 0xd << 45;
const TX_TUNNEL_UDP: u64 = 0xe << 45;
const TX_TCP_SEG: u64 = 1 << 50;
const TX_TCP_CKSUM: u64 = 1 << 52;
const TX_UDP_CKSUM: u64 = 3 << 52;
const TX_L4_MASK: u64 = 3 << 52;
const TX_IP_CKSUM: u64 = 1 << 54;
const TX_IPV4: u64 = 1 << 55;
const TX_IPV6: u64 = 1 << 56;
const TX_VLAN: u64 = 1 << 57;
const TX_OUTER_IP_CKSUM: u64 = 1 << 58;
const TX_OUTER_IPV6: u64 = 1 << 60;

/// DPDK's `txq_mbuf_to_swp` (`mlx5_swp_types_table`,
/// `mlx5_set_swp_types_table` in `mlx5_rxtx.c`): software-parser offsets
/// (2-byte units: outer L4, outer L3, inner L4, inner L3) and header kinds
/// of a custom IP or UDP tunnel packet, from its outer L2 / L3 and inner
/// L2 / L3 lengths (`lens`; the case format has no outer lengths: 0);
/// none for any other packet.
fn dpdk_swp(fl: u64, lens: [u32; 4]) -> ([u8; 4], SwpFlags) {
    let tunnel = fl & TX_TUNNEL_MASK;
    if tunnel != TX_TUNNEL_IP && tunnel != TX_TUNNEL_UDP {
        return ([0; 4], SwpFlags::new());
    }
    let [outer_l2, outer_l3, l2, l3] = lens;
    let udp = tunnel == TX_TUNNEL_UDP;
    let l4 = fl & TX_L4_MASK;
    let flags = SwpFlags::new()
        .with_outer_l3_ipv6(fl & TX_OUTER_IPV6 != 0)
        .with_outer_l4_udp(udp)
        .with_inner_l3_ipv6(fl & TX_IPV6 != 0)
        .with_inner_l4_udp(l4 == TX_UDP_CKSUM);
    let mut off = outer_l2;
    let mut set = (off >> 1) << 8;
    off += outer_l3;
    if udp {
        set |= off >> 1;
    }
    if fl & (TX_IPV4 | TX_IPV6) != 0 {
        off += l2;
        set |= (off >> 1) << 24;
        // (No TSO in these routines: `MLX5_TXOFF_CONFIG_TSO` is off.)
        if l4 == TX_TCP_CKSUM || l4 == TX_UDP_CKSUM {
            off += l3;
            set |= (off >> 1) << 16;
        }
    }
    (set.to_le_bytes(), flags)
}

/// DPDK's `txq_ol_cksum_to_cs` (`mlx5_cksum_table`, `mlx5_set_cksum_table`
/// in `mlx5_rxtx.c`): a TSO request counts as L4 checksum; with a tunnel
/// the outer IP flag sets the L3 bit and the inner flags the inner bits.
fn dpdk_cs_flags(fl: u64) -> EthCsFlags {
    let l4 = fl & (TX_L4_MASK | TX_TCP_SEG) != 0;
    let ip = fl & TX_IP_CKSUM != 0;
    if fl & TX_TUNNEL_MASK != 0 {
        EthCsFlags::new()
            .with_l3_csum(fl & TX_OUTER_IP_CKSUM != 0)
            .with_l3_inner_csum(ip)
            .with_l4_inner_csum(l4)
    } else {
        EthCsFlags::new().with_l3_csum(ip).with_l4_csum(l4)
    }
}

#[derive(Debug, Default)]
struct Case {
    name: String,
    kv: BTreeMap<String, String>,
}

impl Case {
    fn get(&self, k: &str) -> Option<&str> {
        self.kv.get(k).map(String::as_str)
    }
    fn num(&self, k: &str) -> u64 {
        self.get(k).map(parse_num).unwrap_or(0)
    }
    fn hex(&self, k: &str) -> Option<Vec<u8>> {
        self.get(k).map(parse_hex)
    }
}

fn parse_num(s: &str) -> u64 {
    let s = s.trim();
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).expect("hex number"),
        None => s.parse().expect("number"),
    }
}

fn parse_hex(s: &str) -> Vec<u8> {
    let s = s.trim();
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).expect("hex byte"))
        .collect()
}

fn parse(text: &str) -> (Vec<Case>, usize) {
    let mut cases = Vec::new();
    let mut cur: Option<Case> = None;
    let mut declared = 0;
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if line == "end" {
            cases.push(cur.take().expect("end without case"));
            continue;
        }
        let (k, v) = line.split_once('=').expect("key=value");
        if k == "case" {
            cur = Some(Case {
                name: v.to_string(),
                ..Case::default()
            });
        } else if let Some(c) = cur.as_mut() {
            c.kv.insert(k.to_string(), v.to_string());
        } else if k == "ncases" {
            declared = parse_num(v) as usize;
        }
    }
    (cases, declared)
}

/// Ordinary memory standing in for the SQ buffer, doorbell record and UAR page.
struct Mem {
    ring: *mut [Wqebb],
    dbrec: *mut [u32; 2],
    uar: *mut [u64; UAR_SIZE / 8],
    ring_len: usize,
}

impl Mem {
    fn new(wqe_cnt: usize, fill: u8) -> Self {
        Mem {
            ring: Box::into_raw(vec![Wqebb([fill; 64]); wqe_cnt].into_boxed_slice()),
            // Doorbell records start zeroed, as the harness's do (the
            // cases' `out.cq_dbrec`, which no Tx routine writes, reads 0).
            dbrec: Box::into_raw(Box::new([0u32; 2])),
            uar: Box::into_raw(Box::new([u64::from_ne_bytes([fill; 8]); UAR_SIZE / 8])),
            ring_len: wqe_cnt * 64,
        }
    }
    fn bytes(p: *const u8, len: usize) -> Vec<u8> {
        let mut v = vec![0u8; len];
        // SAFETY: `p` points to a live allocation of this `Mem` of at least
        // `len` bytes; the queue writing it is not running (one thread).
        unsafe { std::ptr::copy_nonoverlapping(p, v.as_mut_ptr(), len) };
        v
    }
    fn ring_bytes(&self) -> Vec<u8> {
        Self::bytes(self.ring.cast::<u8>(), self.ring_len)
    }
    fn dbrec_bytes(&self) -> Vec<u8> {
        Self::bytes(self.dbrec.cast::<u8>().wrapping_add(4), 4)
    }
    fn db_bytes(&self) -> Vec<u8> {
        Self::bytes(self.uar.cast::<u8>(), 8)
    }
}

impl Drop for Mem {
    fn drop(&mut self) {
        // SAFETY: the pointers came from `Box::into_raw` in `new`; queues
        // over this memory are dropped before it.
        unsafe {
            drop(Box::from_raw(self.ring));
            drop(Box::from_raw(self.dbrec));
            drop(Box::from_raw(self.uar));
        }
    }
}

/// What one burst left behind.
struct Burst {
    ret: usize,
    producer: u32,
    cqe_requests: u64,
    ring: Vec<u8>,
    dbrec: Vec<u8>,
    db: Vec<u8>,
}

/// How the reason a case's packets cannot be expressed starts.
const UNEXPRESSED: &str = "not expressed: ";

/// The packets of burst `b`, or why our model cannot express them.
fn packets<'d>(
    c: &Case,
    olx: u64,
    b: usize,
    data: &'d [Vec<u8>],
    lkey: u32,
) -> Result<Vec<Packet<'d>>, String> {
    let mut out = Vec::new();
    for (i, d) in data.iter().enumerate() {
        let k = |f: &str| format!("b{b}.pkt.{i}.{f}");
        if c.num(&k("nb_segs")) != 1 {
            return Err(format!("{UNEXPRESSED}packet {i}: multi-segment mbuf"));
        }
        let fl = c.num(&k("ol_flags"));
        // TSO and VLAN insertion, which the routine acts on only if
        // compiled in (`MLX5_TXOFF_CONFIG_TSO` / `_VLAN`; else it ignores
        // the flags, and a TSO request is one more L4 checksum bit).
        if (olx & OLX_TSO != 0 && fl & TX_TCP_SEG != 0)
            || (olx & OLX_VLAN != 0 && fl & TX_VLAN != 0)
        {
            return Err(format!(
                "{UNEXPRESSED}packet {i}: ol_flags {fl:#x} (TSO/VLAN insertion)"
            ));
        }
        if c.num(&k("len")) != d.len() as u64 {
            return Err(format!("packet {i}: len differs from its data"));
        }
        // The checksum flags DPDK's `txq_ol_cksum_to_cs` derives, only with
        // `MLX5_TXOFF_CONFIG_CSUM` compiled in (the routine ignores them
        // otherwise).
        let cs = if olx & OLX_CSUM != 0 {
            dpdk_cs_flags(fl)
        } else {
            EthCsFlags::new()
        };
        let (swp_offsets, swp_flags) = if olx & OLX_SWP != 0 {
            let lens = |f: &str| c.num(&k(f)) as u32;
            dpdk_swp(
                fl,
                [
                    lens("outer_l2_len"),
                    lens("outer_l3_len"),
                    lens("l2_len"),
                    lens("l3_len"),
                ],
            )
        } else {
            ([0; 4], SwpFlags::new())
        };
        let off = TxOffload {
            cs_flags: cs,
            swp_offsets,
            swp_flags,
            ..TxOffload::NONE
        };
        let addr = c.num(&k("addr"));
        out.push(
            Packet::from_buf(
                i as u64,
                PacketBuf::Frame(FrameSge::with_addr(lkey, addr, d)),
            )
            .with_offload(off),
        );
    }
    Ok(out)
}

fn run<M: TxMode>(c: &Case, fill: u8) -> Result<Vec<Burst>, String> {
    let wqe_cnt = 1usize << c.num("cfg.wqe_n");
    let olx = c.num("olx");
    let inline = olx & OLX_INLINE != 0;
    let inlen_empw = c.num("cfg.inlen_empw") as u16;
    let inlen_send = c.num("cfg.inlen_send") as u16;
    // DPDK counts WQEBBs towards a completion only with inlining compiled in.
    let thres = if inline {
        c.num("cfg.wqe_thres") as u16
    } else {
        0
    };
    let tx_cfg = if olx & OLX_MPW != 0 {
        TxConfig::dpdk_mpw(inlen_empw, inlen_send, thres)
    } else {
        TxConfig::dpdk_empw(inlen_empw, inlen_send, thres)
    };
    let lkey = c.num("cfg.lkey") as u32;
    let mut cfg = SqConfig::new(
        QpType::RawPacket,
        (c.num("cfg.qp_num_8s") >> 8) as u32,
        512,
        1,
    );
    cfg.start_pi = c.num("b0.in.wqe_ci") as u32;
    cfg.signal_every = 0;
    let mem = Mem::new(wqe_cnt, fill);
    let mut shadow = vec![SqShadowEntry::EMPTY; wqe_cnt];
    let mut staging = vec![Wqebb::ZERO; 16];
    let mut ids = vec![0u64; 1 << 12];
    // SAFETY: the SQ word of the doorbell record is a live, aligned u32 that
    // only the queue writes while it lives.
    let dbrec = unsafe { DeviceWord::from_ptr(mem.dbrec.cast::<u32>().add(1)) };
    let raw = SqRawParts {
        buf: std::ptr::NonNull::new(mem.ring.cast::<u8>()).expect("ring"),
        wqe_cnt: wqe_cnt as u32,
        dbrec,
        bf_reg: std::ptr::NonNull::new(mem.uar.cast::<u8>()).expect("uar"),
        bf_buf_size: 0,
    };
    // SAFETY: the ring, UAR and dbrec memory outlive the queue and are
    // touched by nothing else while it runs.
    let sq = unsafe {
        SendQueue::<DoorbellOnly, RawPacketQp>::new_typed(raw, cfg, &mut shadow, &mut staging)
    }
    .map_err(|e| format!("send queue refused: {e:?}"))?;
    let mut q: TxQueue<'_, DoorbellOnly, RawPacketQp, M> =
        TxQueue::new(sq, &mut ids, tx_cfg).map_err(|e| format!("tx queue refused: {e:?}"))?;
    let mut out = Vec::new();
    for b in 0..c.num("bursts") as usize {
        let n = c.num(&format!("b{b}.n")) as usize;
        let data: Vec<Vec<u8>> = (0..n)
            .map(|i| c.hex(&format!("b{b}.pkt.{i}.data")).unwrap_or_default())
            .collect();
        let pkts = packets(c, olx, b, &data, lkey)?;
        let from = q.send_queue().producer();
        let ret = q.tx_burst(&pkts);
        let producer = q.send_queue().producer();
        let ring = mem.ring_bytes();
        // CQE requests: WQEs of this burst whose CE bits say "always".
        let mut cqe_requests = 0;
        let mut pi = from;
        while pi != producer {
            let at = (pi as usize % wqe_cnt) * 64;
            if (ring[at + 11] >> 2) & 3 == 2 {
                cqe_requests += 1;
            }
            let ds = u32::from(ring[at + 7] & 0x3f);
            pi = pi.wrapping_add(ds.div_ceil(4).max(1));
        }
        if std::env::var_os("MLX5DP_EMPW_VERBOSE").is_some() && fill == 0xa5 {
            // Our WQE chain of this burst: index, opcode byte, DS count.
            let mut chain = Vec::new();
            let mut pi = from;
            while pi != producer {
                let at = (pi as usize % wqe_cnt) * 64;
                let ds = u32::from(ring[at + 7] & 0x3f);
                chain.push(format!("{pi}:{:02x}/{ds}", ring[at + 3]));
                pi = pi.wrapping_add(ds.div_ceil(4).max(1));
            }
            println!("    ours b{b}: ret {ret} wqes {}", chain.join(" "));
        }
        out.push(Burst {
            ret,
            producer,
            cqe_requests,
            ring,
            dbrec: mem.dbrec_bytes(),
            db: mem.db_bytes(),
        });
    }
    Ok(out)
}

fn check(c: &Case) -> Result<(), String> {
    let mpw = c.num("olx") & OLX_MPW != 0;
    let (a, z) = if mpw {
        (run::<LegacyMpw>(c, 0xa5)?, run::<LegacyMpw>(c, 0x5a)?)
    } else {
        (run::<Empw>(c, 0xa5)?, run::<Empw>(c, 0x5a)?)
    };
    let wqe_cnt = 1usize << c.num("cfg.wqe_n");
    let mut errs = Vec::new();
    let mut before = vec![0xa5u8; wqe_cnt * 64];
    let mut before_z = vec![0x5au8; wqe_cnt * 64];
    // WQEBBs inside the ranges the bursts so far wrote (`in.wqe_ci` to
    // `out.wqe_ci`, the file's `sq_from` to `sq_to`). Bytes DPDK wrote
    // outside them lie past the producer index, where the device never
    // reads: the title DPDK's inline routine writes for a frame it then
    // refuses as too short (`mlx5_tx_burst_empw_inline`). mlx5dp refuses
    // such a frame without writing (a refused packet leaves the ring as it
    // was), so those bytes are not compared; ours must be unwritten there.
    let mut covered = vec![false; wqe_cnt];
    for (b, (ra, rz)) in a.iter().zip(&z).enumerate() {
        let k = |f: &str| format!("b{b}.{f}");
        let from = c.num(&k("in.wqe_ci")) & 0xffff;
        let written = (c.num(&k("out.wqe_ci")).wrapping_sub(from) & 0xffff) as usize;
        for i in 0..written.min(wqe_cnt) {
            covered[(from as usize + i) % wqe_cnt] = true;
        }
        if ra.ret as u64 != c.num(&k("out.ret")) {
            errs.push(format!(
                "b{b}: accepted {} packets, DPDK {}",
                ra.ret,
                c.num(&k("out.ret"))
            ));
        }
        if u64::from(ra.producer) & 0xffff != c.num(&k("out.wqe_ci")) & 0xffff {
            errs.push(format!(
                "b{b}: producer {} vs wqe_ci {}",
                ra.producer,
                c.num(&k("out.wqe_ci"))
            ));
        }
        let want_cqes = c.num(&k("out.cq_pi")).wrapping_sub(c.num(&k("in.cq_pi")));
        if ra.cqe_requests != want_cqes {
            errs.push(format!(
                "b{b}: {} CQE requests, DPDK {want_cqes}",
                ra.cqe_requests
            ));
        }
        if Some(ra.dbrec.clone()) != c.hex(&k("out.dbrec")) {
            errs.push(format!("b{b}: dbrec {:02x?}", ra.dbrec));
        }
        let ndb = c.num(&k("out.db_count"));
        if ndb > 0 && Some(ra.db.clone()) != c.hex(&k(&format!("out.db.{}", ndb - 1))) {
            errs.push(format!("b{b}: doorbell {:02x?}", ra.db));
        }
        // Ring bytes, WQEBB by WQEBB.
        for (idx, &in_range) in covered.iter().enumerate() {
            let r = idx * 64..idx * 64 + 64;
            // Ours: written in this burst if both runs hold the same value
            // and that value is not the fill of the run before.
            let ours: Vec<bool> = r
                .clone()
                .map(|i| {
                    ra.ring[i] == rz.ring[i]
                        && (ra.ring[i] != before[i] || rz.ring[i] != before_z[i])
                })
                .collect();
            // The file's mask: written since the case began (differs from
            // the fill in either run), whichever burst wrote it (a WQEBB
            // may be written again with the same bytes).
            let since_start: Vec<bool> = r
                .clone()
                .map(|i| ra.ring[i] == rz.ring[i] && (ra.ring[i] != 0xa5 || rz.ring[i] != 0x5a))
                .collect();
            match (
                c.hex(&k(&format!("sq.{idx}"))),
                c.get(&k(&format!("sqmask.{idx}"))),
            ) {
                (Some(_), Some(_)) if !in_range => {
                    if ours.iter().any(|&o| o) {
                        errs.push(format!(
                            "b{b}: WQEBB {idx} (past the producer index) written by us"
                        ));
                    }
                }
                (Some(want), Some(mask)) => {
                    for (j, m) in mask.bytes().enumerate() {
                        let (got, w) = (ra.ring[idx * 64 + j], want[j]);
                        if m == b'x' && (!since_start[j] || got != w) {
                            errs.push(format!(
                                "b{b}: WQEBB {idx} byte {j}: ours {got:02x}, DPDK {w:02x}"
                            ));
                        } else if m != b'x' && ours[j] && got != 0 {
                            errs.push(format!(
                                "b{b}: WQEBB {idx} byte {j}: we wrote {got:02x}, DPDK nothing"
                            ));
                        }
                    }
                }
                _ => {
                    if ours.iter().any(|&o| o) {
                        errs.push(format!("b{b}: WQEBB {idx} written by us, not by DPDK"));
                    }
                }
            }
        }
        before.clone_from(&ra.ring);
        before_z.clone_from(&rz.ring);
    }
    if errs.is_empty() {
        Ok(())
    } else {
        errs.truncate(12);
        Err(errs.join("\n    "))
    }
}

/// Cases known not to replay, with the reason (none so far).
const KNOWN_GAPS: &[(&str, &str)] = &[];

/// Environment variable naming a case file (same format) to replay instead
/// of the built-in sample, e.g. cases generated by `tests/refcheck/empw_gen.py`
/// (there, a case whose packets our model cannot express counts as a gap).
const CASES_ENV: &str = "MLX5DP_EMPW_CASES";

/// Cases in the sample's format whose outputs come from the independent
/// model of DPDK 26.07 (`tests/refcheck/empw_model.py`, not the real PMD),
/// each reproducing a disagreement mlx5dp had with it
/// (`tests/refcheck/empw_repro.py` writes the file).
const MODEL_REPRO: &str = include_str!("../refcheck/empw-repro-cases.txt");

/// Replays every case of `text`; returns the failing cases' names.
fn replay(text: &str, source: &str, unexpressed_is_gap: bool) -> Vec<String> {
    let (cases, declared) = parse(text);
    assert!(!cases.is_empty());
    println!("{} cases in {source} (it declares {declared})", cases.len());
    let (mut pass, mut gaps, mut fails) = (0, 0, Vec::new());
    for c in &cases {
        match check(c) {
            Ok(()) => {
                pass += 1;
                println!("PASS {}", c.name);
            }
            Err(e) => {
                if let Some((_, why)) = KNOWN_GAPS.iter().find(|(n, _)| *n == c.name) {
                    gaps += 1;
                    println!("GAP  {}: {why}\n    {e}", c.name);
                } else if unexpressed_is_gap && e.starts_with(UNEXPRESSED) {
                    gaps += 1;
                    println!("GAP  {}: {e}", c.name);
                } else {
                    println!("FAIL {}:\n    {e}", c.name);
                    fails.push(c.name.clone());
                }
            }
        }
    }
    println!(
        "golden eMPW/MPW: {pass} pass, {gaps} known gaps, {} fail of {}",
        fails.len(),
        cases.len()
    );
    fails
}

#[test]
fn dpdk_empw_cases() {
    let fails = match std::env::var_os(CASES_ENV) {
        None => replay(GOLDEN, "the sample", false),
        Some(p) => {
            let text = std::fs::read_to_string(&p)
                .unwrap_or_else(|e| panic!("{CASES_ENV}={}: {e}", p.to_string_lossy()));
            let source = format!("{} ({CASES_ENV} override)", p.to_string_lossy());
            replay(&text, &source, true)
        }
    };
    assert!(fails.is_empty(), "failing cases: {fails:?}");
}

#[test]
fn model_repro_cases() {
    let fails = replay(MODEL_REPRO, "tests/refcheck/empw-repro-cases.txt", false);
    assert!(fails.is_empty(), "failing cases: {fails:?}");
}
