//! Drives the emulated CQ's compressor (`emu::cq::Cq`) through every layout,
//! mini format, CQE size and completion source, and dumps each written ring
//! state with the completions the device meant, for the independent
//! reference decompressor `tests/refcheck/ref.py` (driven by
//! `tests/refcheck/emuzip.py`, which also asks `mlx5dp decode cq --json`).
//!
//! Configurations: 64- and 128-byte CQEs × basic and enhanced layouts ×
//! (hash and csum on a cyclic RQ, an SRQ, a striding RQ, and a CQ shared
//! by a send queue with a cyclic or a striding RQ; ftag-stridx,
//! csum-stridx and l34h-stridx on a striding RQ, alone or shared with a
//! send queue; a send-only CQ with requester minis) × five rings (8 slots
//! and sessions of up to 8, run past 256 passes in a third of them; 16
//! with sessions of 3; 32 with sessions up to 64; 64 with 9; 128 with 200),
//! starting at consumer index 0, just below the doorbell record's 24-bit
//! wrap, or just below the 32-bit wrap; one ring in five compresses only
//! runs of four or more (`force` off).
//!
//! Each configuration is a stream of rounds: completions are pushed and
//! flushed (one to three flushes a round, the end of a flush standing for
//! the compression timeout), errors, other QPs, opcodes, VLANs, immediates
//! and counter gaps breaking runs, striding-RQ fillers among them; the ring
//! is dumped with the consumer index to poll from, then a consumer takes
//! everything written, alternating by stream:
//! - this harness, neutralising every slot of every basic-layout session
//!   as the kernel (`mlx5e_cqes_update_owner`: op_own = the slot's pass
//!   parity) or DPDK (`MLX5_CQE_INVALIDATE`, 0xF0) does, and writing the
//!   doorbell record;
//! - the core's poller (`mlx5dp::cq::Cq`, scalar or best unzip path) over
//!   the emulated ring and doorbell record, `poll` and `poll_burst` at
//!   random with random budgets (sessions resumed mid-way, titles kept
//!   across rounds), checked here, completion by completion, against the
//!   meant ones (`poll`: the expanded CQE byte for byte, owner and
//!   solicited bits aside, and the lazy accessors against it;
//!   `poll_burst`: wr_id = the counter, byte count, opcode, origin).
//!
//! The meant completions come from the CQ's trace (`CqTrace`), checked
//! here against the list pushed.
//!
//! Without `MLX5DP_EMUZIP_OUT` the test runs the generation, the core
//! consumer and the self-checks (about a second); with it, the dump (JSON
//! Lines, about 100 MB) is written to that path for the reference:
//!
//! ```sh
//! MLX5DP_EMUZIP_OUT=/tmp/emuzip.jsonl cargo test -p mlx5dp-setup --test emu_zip_dump
//! python3 tests/refcheck/emuzip.py /tmp/emuzip.jsonl --tool target/debug/mlx5dp
//! ```

use mlx5dp::cq::{
    CompletionSummary, Cq as CoreCq, CqConfig, CqParts, CqeSize as CoreCqeSize, Layout, Origin,
    RawCounters, UnzipPath,
};
use mlx5dp::index::RingSize;
use mlx5dp::prm::{Cqe64, MiniCqeFormat};
use mlx5dp_setup::emu::cq::{
    Completion, CompressionCfg, CompressionLayout, Cq, CqTrace, CqeClass, CqeSize, RqClass,
};
use mlx5dp_setup::emu::{Cqn, DmaBlock};
use serde_json::{json, Value};
use std::collections::{BTreeMap, VecDeque};
use std::io::Write;
use std::ptr::NonNull;
use std::sync::Arc;
use zerocopy::{FromBytes, IntoBytes};

/// xorshift64*: deterministic, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }
    fn chance(&mut self, p: f64) -> bool {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }
}

/// Where the completions of a stream come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Cyclic,
    Srq,
    Striding,
    Req,
    /// Requester and cyclic-RQ responder completions on one CQ.
    Mixed,
    /// Requester and striding-RQ responder completions on one CQ.
    MixedStriding,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Cyclic => "cyclic",
            Kind::Srq => "srq",
            Kind::Striding => "striding",
            Kind::Req => "req",
            Kind::Mixed => "mixed",
            Kind::MixedStriding => "mixed-striding",
        }
    }
    fn striding(self) -> bool {
        matches!(self, Kind::Striding | Kind::MixedStriding)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Consumer {
    Kernel,
    Dpdk,
    /// The core's poller with the scalar unzip path, or the best one.
    Core {
        scalar: bool,
    },
}

#[derive(Clone, Copy, Debug)]
struct StreamCfg {
    cqe_size: CqeSize,
    cnt: u32,
    layout: CompressionLayout,
    fmt: MiniCqeFormat,
    kind: Kind,
    max_session: u16,
    force: bool,
    rounds: u32,
    /// The consumer: the core's poller (`mlx5dp::cq::Cq`, polling with
    /// random budgets, neutralising slots itself), or this harness
    /// neutralising every session slot as the kernel
    /// (`mlx5e_cqes_update_owner`) or DPDK (`MLX5_CQE_INVALIDATE`) does.
    consumer: Consumer,
    /// The consumer index the stream starts at (as if that many
    /// completions had come before): 0, just below the doorbell record's
    /// 24-bit wrap, or just below the 32-bit wrap.
    start: u32,
}

fn fmt_name(f: MiniCqeFormat) -> &'static str {
    match f {
        MiniCqeFormat::Hash => "hash",
        MiniCqeFormat::Csum => "csum",
        MiniCqeFormat::FtagStridx => "ftag-stridx",
        MiniCqeFormat::CsumStridx => "csum-stridx",
        MiniCqeFormat::L34hStridx => "l34h-stridx",
        MiniCqeFormat::Unknown(_) => "unknown",
    }
}

/// The fields a run of completions shares (the session key).
#[derive(Clone, Copy, Debug)]
struct Base {
    opcode: u8,
    qpn: u32,
    se: bool,
    srqn: u32,
    flags_rqpn: u32,
    hds: u8,
    l4l3: u8,
    vlan: u16,
    imm: u32,
    hash_type: u8,
    pkt_info: u8,
}

/// Generator state of one stream.
struct Gen {
    rng: Rng,
    kind: Kind,
    fmt: MiniCqeFormat,
    resp: Base,
    req: Base,
    /// Responder WQE counter (cyclic RQ / SRQ).
    rwc: u16,
    /// Striding RQ: WQE id, next stride, strides a WQE has.
    wqe_id: u16,
    stride: u16,
    num_strides: u16,
    /// Send queue WQE counter.
    swc: u16,
    ts: u64,
    /// Next completion is a requester one (mixed streams).
    on_req: bool,
    /// This round has no errors, key changes or switches (long sessions).
    calm: bool,
}

impl Gen {
    fn new(seed: u64, kind: Kind, fmt: MiniCqeFormat) -> Self {
        let mut rng = Rng(seed | 1);
        let resp = Self::fresh_base(&mut rng, false);
        let req = Self::fresh_base(&mut rng, true);
        let rwc = rng.next() as u16;
        let swc = rng.next() as u16;
        let num_strides = [8u16, 64, 512][rng.below(3) as usize];
        Self {
            rng,
            kind,
            fmt,
            resp,
            req,
            rwc,
            wqe_id: 0,
            stride: 0,
            num_strides,
            swc,
            ts: 1_000_000,
            on_req: kind == Kind::Req,
            calm: false,
        }
    }

    fn fresh_base(rng: &mut Rng, req: bool) -> Base {
        let qpns = [0x000123, 0x00abcd, 0xfedcba, 0x000001];
        Base {
            opcode: if req {
                0
            } else {
                [2u8, 2, 2, 2, 3, 1, 4][rng.below(7) as usize]
            },
            qpn: qpns[rng.below(4) as usize],
            se: rng.chance(0.1),
            srqn: rng.next() as u32 & 0xff_ffff,
            flags_rqpn: rng.next() as u32,
            hds: [7u8, 3, 6, 0][rng.below(4) as usize],
            l4l3: [0x28u8, 0x2c, 0x18, 0x1c, 0x08, 0x04, 0x29, 0x00][rng.below(8) as usize],
            vlan: if rng.chance(0.3) {
                rng.next() as u16
            } else {
                0
            },
            imm: rng.next() as u32,
            hash_type: rng.next() as u8,
            pkt_info: rng.below(4) as u8,
        }
    }

    /// Changes something the session key holds (a new run that cannot
    /// join the previous one's session), or the counter.
    fn perturb(&mut self) {
        let req = self.on_req;
        let r = self.rng.below(6);
        let b = if req { &mut self.req } else { &mut self.resp };
        match r {
            0 => b.qpn ^= 0x10,
            1 if !req => b.opcode = if b.opcode == 2 { 3 } else { 2 },
            2 => b.vlan = b.vlan.wrapping_add(1),
            3 => b.se = !b.se,
            4 => {
                // A gap in the counter.
                if req {
                    self.swc = self.swc.wrapping_add(100);
                } else if self.kind.striding() {
                    self.stride = self.num_strides; // next WQE
                } else {
                    self.rwc = self.rwc.wrapping_add(3);
                }
            }
            _ => b.imm = b.imm.wrapping_add(1),
        }
    }

    fn next(&mut self) -> Completion {
        // Mixed streams switch between requester and responder runs.
        let calm = self.calm;
        if !calm && matches!(self.kind, Kind::Mixed | Kind::MixedStriding) && self.rng.chance(0.08)
        {
            self.on_req = !self.on_req;
        }
        if !calm && self.rng.chance(0.04) {
            return self.error();
        }
        if !calm && self.rng.chance(0.07) {
            self.perturb();
        }
        self.ts += self.rng.range(1, 5000);
        let mut c = [0u8; 64];
        let req = self.on_req;
        let b = if req { self.req } else { self.resp };
        c[0] = b.pkt_info;
        c[12..16].copy_from_slice(&(self.rng.next() as u32).to_be_bytes());
        c[16] = b.hash_type;
        c[20..22].copy_from_slice(&(self.rng.next() as u16).to_be_bytes());
        c[24..28].copy_from_slice(&b.flags_rqpn.to_be_bytes());
        c[28] = b.hds;
        c[29] = if self.fmt == MiniCqeFormat::L34hStridx && !req {
            [0x28u8, 0x2c, 0x18, 0x1c, 0x08, 0x04, 0x29, 0x00, 0x88][self.rng.below(9) as usize]
        } else {
            b.l4l3
        };
        c[30..32].copy_from_slice(&b.vlan.to_be_bytes());
        c[32..36].copy_from_slice(&b.srqn.to_be_bytes());
        c[36..40].copy_from_slice(&b.imm.to_be_bytes());
        c[48..56].copy_from_slice(&self.ts.to_be_bytes());
        c[63] = (b.opcode << 4) | (u8::from(b.se) << 1);
        let class;
        if req {
            let sop = [0x0au8, 0x08, 0x10, 0x0b, 0x09, 0x11][self.rng.below(6) as usize];
            let bc = self.rng.below(9000) as u32;
            c[44..48].copy_from_slice(&bc.to_be_bytes());
            c[56..60].copy_from_slice(&((u32::from(sop) << 24) | b.qpn).to_be_bytes());
            c[60..62].copy_from_slice(&self.swc.to_be_bytes());
            self.swc = self.swc.wrapping_add(self.rng.range(1, 4) as u16);
            class = CqeClass::Req;
        } else {
            // Ethernet RQ: sop_drop_qpn[23:0] is the flow tag (varies per
            // packet on the ftag-stridx format, else the QP's constant).
            let tag = if self.fmt == MiniCqeFormat::FtagStridx {
                self.rng.next() as u32 & 0xff_ffff
            } else {
                b.qpn
            };
            c[56..60].copy_from_slice(&tag.to_be_bytes());
            if self.kind.striding() {
                let mut strides = self.rng.range(1, 4) as u16;
                if self.stride + strides > self.num_strides
                    && self.stride < self.num_strides
                    && self.rng.chance(0.5)
                {
                    // A filler CQE for the rest of the WQE (byte_cnt bit
                    // 31), with the run's fields so that it may be
                    // compressed (hash and csum formats: the mini's 32-bit
                    // byte count keeps the filler bit).
                    let rest = self.num_strides - self.stride;
                    let bc = (1u32 << 31) | (u32::from(rest) << 16);
                    c[2..4].copy_from_slice(&self.wqe_id.to_be_bytes());
                    c[44..48].copy_from_slice(&bc.to_be_bytes());
                    c[60..62].copy_from_slice(&self.stride.to_be_bytes());
                    self.wqe_id = self.wqe_id.wrapping_add(1);
                    self.stride = 0;
                    return Completion {
                        cqe: Cqe64::read_from_bytes(&c).expect("64 bytes"),
                        class: CqeClass::Resp(RqClass::Striding { strides: rest }),
                    };
                }
                if self.stride + strides > self.num_strides {
                    self.wqe_id = self.wqe_id.wrapping_add(1);
                    self.stride = 0;
                    strides = strides.min(self.num_strides);
                }
                let bytes = self.rng.range(60, 0xffff) as u32;
                let bc = (u32::from(strides) << 16) | bytes;
                c[2..4].copy_from_slice(&self.wqe_id.to_be_bytes());
                c[44..48].copy_from_slice(&bc.to_be_bytes());
                c[60..62].copy_from_slice(&self.stride.to_be_bytes());
                self.stride += strides;
                class = CqeClass::Resp(RqClass::Striding { strides });
            } else {
                let bc = self.rng.range(60, 9000) as u32;
                c[44..48].copy_from_slice(&bc.to_be_bytes());
                c[60..62].copy_from_slice(&self.rwc.to_be_bytes());
                // An SRQ hands out WQEs in list order: mostly consecutive.
                let step = if self.kind == Kind::Srq && self.rng.chance(0.1) {
                    self.rng.range(2, 40) as u16
                } else {
                    1
                };
                self.rwc = self.rwc.wrapping_add(step);
                class = CqeClass::Resp(if self.kind == Kind::Srq {
                    RqClass::Srq
                } else {
                    RqClass::Cyclic
                });
            }
        }
        Completion {
            cqe: Cqe64::read_from_bytes(&c).expect("64 bytes"),
            class,
        }
    }

    fn error(&mut self) -> Completion {
        let req = self.on_req;
        let b = if req { self.req } else { self.resp };
        let mut c = [0u8; 64];
        c[54] = self.rng.next() as u8;
        c[55] = [0x01u8, 0x02, 0x04, 0x05, 0x10, 0x13, 0x15][self.rng.below(7) as usize];
        c[56..60].copy_from_slice(&((0x0au32 << 24) | b.qpn).to_be_bytes());
        let wc = if req { self.swc } else { self.rwc };
        c[60..62].copy_from_slice(&wc.to_be_bytes());
        c[63] = (if req { 13 } else { 14 }) << 4;
        if req {
            self.swc = self.swc.wrapping_add(1);
        } else if !self.kind.striding() {
            self.rwc = self.rwc.wrapping_add(1);
        }
        Completion {
            cqe: Cqe64::read_from_bytes(&c).expect("64 bytes"),
            class: CqeClass::Error,
        }
    }
}

/// One completion as the device meant it, at its consumer index.
#[derive(Clone, Debug)]
struct Meant {
    ci: u32,
    cqe: [u8; 64],
    compressed: bool,
    /// The CQE whose fields a mini inherits (basic: the session's first
    /// completion; enhanced: the title).
    title: Option<[u8; 64]>,
    req: bool,
}

impl Meant {
    /// A striding-RQ filler (`byte_cnt` bit 31): consumed, reported by no
    /// consumer (kernel `mpwrq_is_filler_cqe`, DPDK `MLX5_MPRQ_FILLER_MASK`).
    fn filler(&self, striding: bool) -> bool {
        let op = self.cqe[63] >> 4;
        striding && !self.req && !matches!(op, 0 | 13 | 14) && self.cqe[44] & 0x80 != 0
    }

    /// The CQE a decompressor must produce for this completion (owner and
    /// solicited bits aside): the meant CQE with format 0 and, for one a
    /// mini carries, the title's timestamp, and the title's hash and
    /// checksum where the format does not carry them.
    fn effective(&self, fmt: MiniCqeFormat) -> [u8; 64] {
        let mut c = self.cqe;
        c[63] &= 0xf0;
        c[62] = 0;
        if let (true, Some(t)) = (self.compressed, self.title) {
            c[48..56].copy_from_slice(&t[48..56]);
            let hash = !self.req && fmt == MiniCqeFormat::Hash;
            let csum = !self.req && matches!(fmt, MiniCqeFormat::Csum | MiniCqeFormat::CsumStridx);
            if !hash {
                c[12..16].copy_from_slice(&t[12..16]);
            }
            if !csum {
                c[20..22].copy_from_slice(&t[20..22]);
            }
        }
        c
    }
}

/// The core's poller over the emulated CQ's ring and doorbell record.
fn core_cq(cq: &Cq, cfg: &StreamCfg, scalar: bool) -> CoreCq {
    let parts = CqParts {
        buf: NonNull::new(cq.ring.as_ptr()).expect("ring"),
        cqe_cnt: cfg.cnt,
        cqe_size: match cfg.cqe_size {
            CqeSize::B64 => CoreCqeSize::B64,
            CqeSize::B128 => CoreCqeSize::B128,
        },
        dbrec: NonNull::new(cq.dbrec.as_ptr().cast::<u32>()).expect("dbrec"),
        uar: None,
        cqn: 7,
    };
    let layout = match cfg.layout {
        CompressionLayout::Basic => Layout::Basic,
        CompressionLayout::Enhanced => Layout::Enhanced,
    };
    let core_cfg = CqConfig {
        compression: Some((layout, cfg.fmt)),
        striding_rq: cfg.kind.striding(),
        unzip: if scalar {
            UnzipPath::Scalar
        } else {
            mlx5dp_setup::cpu::best_unzip()
        },
        ..CqConfig::default()
    };
    // SAFETY: the ring (`cnt` slots of the CQE size, page-aligned) and the
    // 64-byte doorbell block belong to `cq`, whose `Arc`s keep them alive
    // while `cq` lives; `run_stream` declares the core CQ after `cq`, so
    // it is dropped first. Only the emulated device (`cq`, on this thread,
    // between polls) and this CQ write them; no UAR: never armed.
    unsafe { CoreCq::from_raw_parts(parts, core_cfg, cfg.start) }.expect("core cq")
}

/// What the core reported for one completion: through `poll` (the
/// expanded CQE and the lazy accessors) or `poll_burst` (a summary).
enum Seen {
    Full(Box<Full>),
    Summary(CompletionSummary),
}

/// What `poll` reported.
struct Full {
    cqe: [u8; 64],
    mini: bool,
    wqe_counter: u16,
    byte_cnt: u32,
    hash: u32,
    csum: u16,
    flow_tag: u32,
    l4l3: u8,
    stride: Option<u16>,
}

/// Polls everything written, `poll` and `poll_burst` at random with
/// random budgets (1 to the ring size), and compares each completion with
/// the meant one.
fn core_poll_and_check(
    core: &mut CoreCq,
    rng: &mut Rng,
    want: &[&Meant],
    cfg: &StreamCfg,
    name: &str,
    counts: &mut Counts,
) {
    let mut wqs = RawCounters::default();
    let mut seen: Vec<Seen> = Vec::new();
    loop {
        let budget = if rng.chance(0.3) {
            1
        } else {
            rng.range(1, u64::from(cfg.cnt)) as usize
        };
        let before = seen.len();
        let n = if rng.chance(0.5) {
            let mut out = vec![CompletionSummary::default(); budget];
            let n = core
                .poll_burst(&mut wqs, &mut out)
                .unwrap_or_else(|e| panic!("{name}: core poll_burst: {e:?}"));
            seen.extend(out.into_iter().take(n).map(Seen::Summary));
            n
        } else {
            let n = core
                .poll(&mut wqs, budget, |c| {
                    let mut cqe = [0u8; 64];
                    cqe.copy_from_slice(c.cqe().as_bytes());
                    seen.push(Seen::Full(Box::new(Full {
                        cqe,
                        mini: c.origin() == Origin::Mini,
                        wqe_counter: c.wqe_counter(),
                        byte_cnt: c.mprq_byte_cnt().into_bits(),
                        hash: c.rss_hash(),
                        csum: c.checksum(),
                        flow_tag: c.flow_tag(),
                        l4l3: (c.l4_hdr_type().raw() << 4) | (c.l3_hdr_type().raw() << 2),
                        stride: c.stride_index(),
                    })))
                })
                .unwrap_or_else(|e| panic!("{name}: core poll: {e:?}"));
            if n == 1 && budget == 1 {
                if let Some(m) = want.get(before) {
                    assert_eq!(core.reported_index(), m.ci, "{name}: reported index");
                }
            }
            n
        };
        if n == 0 {
            break;
        }
    }
    assert_eq!(
        seen.len(),
        want.len(),
        "{name}: completions the core reported"
    );
    for (k, (s, m)) in seen.iter().zip(want).enumerate() {
        let e = m.effective(cfg.fmt);
        let s = match s {
            Seen::Summary(sum) => {
                let op = e[63] >> 4;
                assert_eq!(sum.opcode, op, "{name}: {k} (ci {}) summary opcode", m.ci);
                assert_eq!(
                    sum.origin == Origin::Mini,
                    m.compressed,
                    "{name}: {k} summary origin"
                );
                if !matches!(op, 13 | 14) {
                    let wc = u16::from_be_bytes([e[60], e[61]]);
                    let bc = u32::from_be_bytes([e[44], e[45], e[46], e[47]]);
                    assert_eq!(sum.wr_id, u64::from(wc), "{name}: {k} (ci {}) wr_id", m.ci);
                    assert_eq!(sum.byte_len, bc, "{name}: {k} (ci {}) byte_len", m.ci);
                }
                counts.core_checked += 1;
                continue;
            }
            Seen::Full(f) => f,
        };
        let mut got = s.cqe;
        got[63] &= 0xf0;
        got[62] = 0;
        assert_eq!(
            hex(&got),
            hex(&e),
            "{name}: completion {k} (ci {}) expanded CQE: got vs meant",
            m.ci
        );
        assert_eq!(s.mini, m.compressed, "{name}: completion {k} origin");
        // The lazy accessors agree with the expanded CQE.
        let c = Cqe64::read_from_bytes(&s.cqe).expect("64 bytes");
        assert_eq!(
            s.wqe_counter,
            c.wqe_counter.get(),
            "{name}: {k} wqe_counter"
        );
        assert_eq!(s.byte_cnt, c.byte_cnt.get(), "{name}: {k} byte_cnt");
        assert_eq!(s.hash, c.rss_hash_result.get(), "{name}: {k} hash");
        assert_eq!(s.csum, c.check_sum.get(), "{name}: {k} checksum");
        assert_eq!(s.flow_tag, c.sop_drop_qpn.qpn(), "{name}: {k} flow tag");
        assert_eq!(s.l4l3, s.cqe[29] & 0x7c, "{name}: {k} header types");
        // (Error CQEs: the core's choice, not compared.)
        if !matches!(s.cqe[63] >> 4, 13 | 14) {
            let striding = cfg.kind.striding() && s.cqe[63] >> 4 != 0;
            assert_eq!(
                s.stride,
                striding.then(|| c.wqe_counter.get()),
                "{name}: {k} stride index"
            );
        }
        counts.core_checked += 1;
    }
}

fn bytes64(c: &Cqe64) -> [u8; 64] {
    let mut b = [0u8; 64];
    b.copy_from_slice(c.as_bytes());
    b
}

/// A meant completion: its consumer index, its CQE, and for one a mini
/// carries, the title's fields it inherits when its format does not carry
/// them (bytes 12..16 hash, 20..22 checksum, 48..56 timestamp).
fn meant_json(m: &Meant) -> Value {
    let inherit = m.title.map(|t| {
        let mut v = Vec::with_capacity(14);
        v.extend_from_slice(&t[12..16]);
        v.extend_from_slice(&t[20..22]);
        v.extend_from_slice(&t[48..56]);
        hex(&v)
    });
    json!({
        "ci": m.ci,
        "cqe": hex(&m.cqe),
        "compressed": m.compressed,
        "inherit": inherit,
        "req": m.req,
    })
}

/// Where the records go.
struct Dump(std::io::BufWriter<std::fs::File>);

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[derive(Default, Debug)]
struct Counts {
    dumps: u64,
    completions: u64,
    minis: u64,
    sessions: u64,
    wrapping_sessions: u64,
    /// Session lengths seen (completions, title included).
    lengths: BTreeMap<usize, u64>,
    /// Most passes over its ring one stream made.
    max_passes: u32,
    /// Completions the core's poller reported and matched.
    core_checked: u64,
}

fn run_stream(cfg: &StreamCfg, seed: u64, out: &mut Option<Dump>, counts: &mut Counts) {
    let size = RingSize::new(cfg.cnt).expect("power of two");
    let stride = cfg.cqe_size.bytes();
    let ring = DmaBlock::new(stride * cfg.cnt as usize, 4096).expect("ring");
    let enhanced = cfg.layout == CompressionLayout::Enhanced;
    for i in 0..cfg.cnt as usize {
        let off = i * stride + stride - 64;
        ring.write(off + 63, &[0xf0]).expect("init");
        if enhanced {
            ring.write(off + 62, &[0xff]).expect("init");
        }
    }
    let dbrec = DmaBlock::new(64, 64).expect("dbrec");
    let comp = CompressionCfg {
        format: cfg.fmt,
        layout: cfg.layout,
        max_session: cfg.max_session,
        force: cfg.force,
    };
    let mut cq = Cq::new(
        Cqn(7),
        Arc::new(ring),
        size,
        cfg.cqe_size,
        Arc::new(dbrec),
        Some(comp),
        false,
    );
    cq.trace = Some(Vec::new());
    cq.pi = cfg.start;
    cq.dbrec
        .write(0, &(cfg.start & 0xff_ffff).to_be_bytes())
        .expect("dbrec");
    let mut core = match cfg.consumer {
        Consumer::Core { scalar } => Some(core_cq(&cq, cfg, scalar)),
        _ => None,
    };
    let mut g = Gen::new(seed, cfg.kind, cfg.fmt);
    let name = format!(
        "{}-{}-{}-{}-n{}-m{}{}",
        stride,
        if enhanced { "enhanced" } else { "basic" },
        if cfg.kind == Kind::Req {
            "req"
        } else {
            fmt_name(cfg.fmt)
        },
        cfg.kind.name(),
        cfg.cnt,
        cfg.max_session,
        if cfg.force { "" } else { "-noforce" }
    );
    let tool_fmt = if cfg.kind == Kind::Req {
        "req"
    } else {
        fmt_name(cfg.fmt)
    };
    let mut ci: u32 = cfg.start;
    let mut log: VecDeque<Meant> = VecDeque::new();
    let mut traced = 0usize;
    // Enhanced: the title in force (its ci) and how many of its members are logged.
    let mut enh_title: Option<(u32, usize)> = None;
    let mut events = Vec::new();
    let mut prev_ring = vec![0u8; stride * cfg.cnt as usize];
    for _round in 0..cfg.rounds {
        let free = cfg.cnt - cq.pi.wrapping_sub(ci);
        assert_eq!(free, cfg.cnt, "the consumer took everything");
        let budget = match g.rng.below(4) {
            0 => free,
            1 => g.rng.range(1, 3) as u32,
            _ => g.rng.range(1, u64::from(free)) as u32,
        };
        g.calm = g.rng.chance(0.3);
        let flushes = if g.calm { 1 } else { g.rng.range(1, 3) as u32 };
        let mut pushed: Vec<Completion> = Vec::new();
        let mut left = budget;
        for f in 0..flushes {
            let n = if f + 1 == flushes {
                left
            } else {
                g.rng.below(u64::from(left) + 1) as u32
            };
            for _ in 0..n {
                let c = g.next();
                pushed.push(c.clone());
                cq.push(0, c);
            }
            left -= n;
            cq.flush(&mut events);
        }
        assert!(!cq.overrun, "{name}: overrun");
        let title_ci_before = enh_title.map(|t| t.0);
        // What the device meant, from its trace.
        let traces: Vec<CqTrace> = cq.trace.as_ref().expect("tracing")[traced..].to_vec();
        traced += traces.len();
        let mut from_trace: Vec<Completion> = Vec::new();
        let mut sessions: Vec<(u32, u32)> = Vec::new();
        for t in &traces {
            match t {
                CqTrace::Regular {
                    ci: at, completion, ..
                } => {
                    from_trace.push(completion.clone());
                    log.push_back(Meant {
                        ci: *at,
                        cqe: bytes64(&completion.cqe),
                        compressed: false,
                        title: None,
                        req: completion.class == CqeClass::Req,
                    });
                    if enhanced {
                        enh_title = (completion.class != CqeClass::Error).then_some((*at, 1));
                    }
                }
                CqTrace::Session {
                    ci: at,
                    completions,
                    mini_format,
                    ..
                } => {
                    let title = bytes64(&completions[0].cqe);
                    let req = *mini_format == "req";
                    // Enhanced: the completions an earlier record of this
                    // session already logged (its title among them).
                    let logged = if enhanced {
                        let (tci, logged) = enh_title.expect("a compressed CQE has a title");
                        assert_eq!(tci, *at, "{name}: session starts at its title");
                        enh_title = Some((tci, completions.len()));
                        logged
                    } else {
                        0
                    };
                    for (k, c) in completions.iter().enumerate().skip(logged) {
                        from_trace.push(c.clone());
                        log.push_back(Meant {
                            ci: at.wrapping_add(k as u32),
                            cqe: bytes64(&c.cqe),
                            compressed: true,
                            title: Some(title),
                            req,
                        });
                    }
                    counts.minis += (completions.len() - logged) as u64;
                    if !enhanced {
                        sessions.push((*at, completions.len() as u32));
                        *counts.lengths.entry(completions.len()).or_default() += 1;
                        if size.slot(*at) + completions.len() > cfg.cnt as usize {
                            counts.wrapping_sessions += 1;
                        }
                    }
                    counts.sessions += 1;
                }
            }
        }
        // The trace tells the same story as the list pushed, in order.
        assert_eq!(from_trace, pushed, "{name}: trace vs pushed");
        while log
            .front()
            .is_some_and(|m| cq.pi.wrapping_sub(m.ci) > cfg.cnt)
        {
            log.pop_front();
        }
        counts.dumps += 1;
        counts.completions += pushed.len() as u64;
        if let Some(dump) = out.as_mut() {
            let mut ring_bytes = vec![0u8; stride * cfg.cnt as usize];
            cq.ring.read(0, &mut ring_bytes).expect("ring");
            // Only the slots that changed since the previous record of the
            // stream (the reader starts each stream from zeros).
            let slots: Vec<Value> = (0..cfg.cnt as usize)
                .filter(|&k| {
                    ring_bytes[k * stride..(k + 1) * stride]
                        != prev_ring[k * stride..(k + 1) * stride]
                })
                .map(|k| json!([k, hex(&ring_bytes[k * stride..(k + 1) * stride])]))
                .collect();
            prev_ring = ring_bytes;
            // From the consumer index, or (enhanced) from the title in
            // force when it is still in the ring: `mlx5dp decode cq` must
            // start at a regular CQE.
            let from = match title_ci_before {
                Some(t) if enhanced && cq.pi.wrapping_sub(t) <= cfg.cnt => t,
                _ => ci,
            };
            let meant: Vec<Value> = log
                .iter()
                .filter(|m| m.ci.wrapping_sub(from) < cq.pi.wrapping_sub(from))
                .map(meant_json)
                .collect();
            let rec = json!({
                "stream": name,
                "cqe_size": stride,
                "cnt": cfg.cnt,
                "layout": if enhanced { "enhanced" } else { "basic" },
                "fmt": tool_fmt,
                "striding": cfg.kind.striding(),
                "ci": ci,
                "pi": cq.pi,
                "enh_title_ci": title_ci_before,
                "slots": slots,
                "meant": meant,
            });
            serde_json::to_writer(&mut dump.0, &rec).expect("json");
            dump.0.write_all(b"\n").expect("write dump");
        }
        match cfg.consumer {
            Consumer::Kernel | Consumer::Dpdk => {
                // The consumer takes everything; on the basic layout it
                // neutralises every slot of every session.
                for (at, n) in sessions {
                    for k in 0..n {
                        let c = at.wrapping_add(k);
                        let off = size.slot(c) * stride + stride - 64 + 63;
                        let v = if cfg.consumer == Consumer::Kernel {
                            u8::from(size.owner_parity(c))
                        } else {
                            0xf0
                        };
                        cq.ring.write(off, &[v]).expect("invalidate");
                    }
                }
                cq.dbrec
                    .write(0, &(cq.pi & 0xff_ffff).to_be_bytes())
                    .expect("dbrec");
            }
            Consumer::Core { .. } => {
                let core = core.as_mut().expect("a core consumer");
                let want: Vec<&Meant> = log
                    .iter()
                    .filter(|m| m.ci.wrapping_sub(ci) < cq.pi.wrapping_sub(ci))
                    .filter(|m| !m.filler(cfg.kind.striding()))
                    .collect();
                core_poll_and_check(core, &mut g.rng, &want, cfg, &name, counts);
                assert_eq!(core.consumer_index(), cq.pi, "{name}: core ci");
            }
        }
        ci = cq.pi;
        counts.max_passes = counts.max_passes.max(ci.wrapping_sub(cfg.start) / cfg.cnt);
    }
}

fn streams() -> Vec<StreamCfg> {
    let mut v = Vec::new();
    let resp_fmts = [MiniCqeFormat::Hash, MiniCqeFormat::Csum];
    let stridx_fmts = [
        MiniCqeFormat::FtagStridx,
        MiniCqeFormat::CsumStridx,
        MiniCqeFormat::L34hStridx,
    ];
    let mut combos: Vec<(MiniCqeFormat, Kind)> = Vec::new();
    for f in resp_fmts {
        for k in [
            Kind::Cyclic,
            Kind::Srq,
            Kind::Striding,
            Kind::Mixed,
            Kind::MixedStriding,
        ] {
            combos.push((f, k));
        }
    }
    for f in stridx_fmts {
        combos.push((f, Kind::Striding));
        combos.push((f, Kind::MixedStriding));
    }
    combos.push((MiniCqeFormat::Hash, Kind::Req));
    let mut i = 0u32;
    for cqe_size in [CqeSize::B64, CqeSize::B128] {
        for layout in [CompressionLayout::Basic, CompressionLayout::Enhanced] {
            for &(fmt, kind) in &combos {
                // (ring size, max_session, rounds): a small ring through
                // more than 256 passes, the session cap below, at and
                // above the ring size.
                let long = if (i / 5) % 3 == 0 { 600 } else { 80 };
                for &(cnt, max_session, rounds) in &[
                    (8u32, 8u16, long),
                    (16, 3, 40),
                    (32, 64, 40),
                    (64, 9, 20),
                    (128, 200, 12),
                ] {
                    v.push(StreamCfg {
                        cqe_size,
                        cnt,
                        layout,
                        fmt,
                        kind,
                        max_session,
                        force: (i + i / 5) % 5 != 4,
                        rounds,
                        consumer: match i % 4 {
                            0 => Consumer::Kernel,
                            1 => Consumer::Dpdk,
                            2 => Consumer::Core { scalar: true },
                            _ => Consumer::Core { scalar: false },
                        },
                        start: match i % 3 {
                            0 => 0,
                            1 => 0x00ff_ffff - 37,
                            _ => u32::MAX - 300,
                        },
                    });
                    i += 1;
                }
            }
        }
    }
    v
}

#[test]
fn emulated_compression_dump() {
    let path = std::env::var_os("MLX5DP_EMUZIP_OUT");
    let mut out = path.as_ref().map(|p| {
        Dump(std::io::BufWriter::new(
            std::fs::File::create(p).expect("create dump"),
        ))
    });
    let mut counts = Counts::default();
    for (i, cfg) in streams().iter().enumerate() {
        run_stream(
            cfg,
            0x9e37_79b9_7f4a_7c15 ^ (i as u64 * 0x1000_0001),
            &mut out,
            &mut counts,
        );
    }
    eprintln!("{counts:?}");
    // Coverage the reference check relies on.
    assert!(counts.sessions > 1000);
    assert!(counts.wrapping_sessions > 50);
    assert!(counts.lengths.keys().any(|&n| n == 2));
    assert!(counts.lengths.keys().any(|&n| n >= 64));
    assert!(counts.max_passes > 256, "the iteration count wraps");
    assert!(counts.core_checked > 10_000);
    if let Some(mut d) = out {
        d.0.flush().expect("flush dump");
    }
}
