//! Recording what the device saw into `hw-traces/` records
//! (`hw-traces/README.md`, "Recorded traces").
//!
//! When a [`Recorder`] is attached ([`super::Device::start_recording`]),
//! the device writes one record for every WQE it reads (bytes as read from
//! the ring), every CQE it writes (regular or a whole compressed session,
//! bytes as left in the ring), every doorbell-record value it acts on and
//! every UAR register write it observes (SQ doorbell, BlueFlame copy, CQ
//! arm). Each record carries the queue parameters a decoder needs and, as
//! `# expect:`, the values the device itself meant (the opcode it
//! executed, the `byte_cnt` it completed with, the syndrome it chose, ...),
//! taken from its own structures, never from decoding its own bytes.
//! Every record says `# recorded-by: mlx5dp emulated device` and
//! `# origin: emulator`: these are not hardware results.
//!
//! Off by default. With no recorder the device pays one `Option` test per
//! hook and allocates nothing.
#![forbid(unsafe_code)]

use crate::trace_record::{write_record, RecordLines};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The line every recorded record carries.
pub const RECORDED_BY: &str = "mlx5dp emulated device";

/// One `key=value` of an `# expect:` line.
pub type Expect = (String, String);

/// Builds an expect list fluently.
#[derive(Debug, Default, Clone)]
pub struct Expects(pub Vec<Expect>);

impl Expects {
    /// An empty list.
    pub fn new() -> Self {
        Self(Vec::new())
    }

    /// A number, written in hexadecimal.
    pub fn hex(&mut self, key: impl Into<String>, v: impl Into<u64>) -> &mut Self {
        self.0.push((key.into(), format!("{:#x}", v.into())));
        self
    }

    /// A number, written in decimal.
    pub fn dec(&mut self, key: impl Into<String>, v: impl Into<u64>) -> &mut Self {
        self.0.push((key.into(), v.into().to_string()));
        self
    }

    /// A flag.
    pub fn flag(&mut self, key: impl Into<String>, v: bool) -> &mut Self {
        self.0.push((key.into(), v.to_string()));
        self
    }

    /// A name (no spaces).
    pub fn text(&mut self, key: impl Into<String>, v: &str) -> &mut Self {
        self.0.push((key.into(), v.replace(' ', "_")));
        self
    }
}

/// One record about to be written.
#[derive(Debug, Clone)]
pub struct Record<'a> {
    /// `wqe`, `cqe64`, `error_cqe64`, `cqe128`, `error_cqe128`,
    /// `cqe_session`, `dbrec` or `mmio_write`.
    pub kind: &'static str,
    /// The queue parameters, as `# key: value` lines, in order.
    pub params: Vec<(&'static str, String)>,
    /// What the device meant.
    pub expect: Expects,
    /// Notes.
    pub notes: Vec<String>,
    /// The bytes, in memory order.
    pub bytes: &'a [u8],
}

/// Counts of what a recorder wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecordStats {
    /// Records written, by kind.
    pub by_kind: BTreeMap<String, u32>,
    /// Records dropped because their kind reached the cap.
    pub dropped: u32,
}

impl RecordStats {
    /// Records written.
    pub fn total(&self) -> u32 {
        self.by_kind.values().sum()
    }
}

/// Writes records into a text buffer, saved to a file on [`Recorder::finish`].
#[derive(Debug)]
pub struct Recorder {
    family: String,
    path: Option<PathBuf>,
    text: String,
    seq: u32,
    stats: RecordStats,
    /// At most this many records of one kind (0: no cap).
    max_per_kind: u32,
    /// The last doorbell-record value recorded per (queue kind, number, word).
    last_dbrec: BTreeMap<(&'static str, u32, u8), u32>,
}

impl Recorder {
    /// A recorder for scenario family `family` that [`Recorder::finish`]
    /// saves to `path` (or keeps in memory when `path` is `None`).
    pub fn new(family: &str, path: Option<&Path>) -> Self {
        let mut text = String::new();
        let _ = writeln!(
            text,
            "# Recorded by the mlx5dp emulated device (a software model of a ConnectX),"
        );
        let _ = writeln!(
            text,
            "# scenario family `{family}`. NOT hardware: these records show what the"
        );
        let _ = writeln!(
            text,
            "# emulator did; the expect values are the device's own view, written when"
        );
        let _ = writeln!(
            text,
            "# the bytes were. Format: hw-traces/README.md. Addresses and keys differ"
        );
        let _ = writeln!(text, "# from run to run.");
        Self {
            family: family.to_string(),
            path: path.map(Path::to_path_buf),
            text,
            seq: 0,
            stats: RecordStats::default(),
            max_per_kind: 0,
            last_dbrec: BTreeMap::new(),
        }
    }

    /// Caps the records of each kind (0: no cap).
    pub fn with_cap(mut self, max_per_kind: u32) -> Self {
        self.max_per_kind = max_per_kind;
        self
    }

    /// What was written so far.
    pub fn stats(&self) -> &RecordStats {
        &self.stats
    }

    /// The text so far.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Whether a doorbell-record value differs from the last one recorded
    /// for that word (the device reads records far more often than they
    /// change; only changes are recorded). Remembers `value`.
    pub fn dbrec_changed(&mut self, queue: &'static str, num: u32, word: u8, value: u32) -> bool {
        self.last_dbrec.insert((queue, num, word), value) != Some(value)
    }

    /// Whether a record of `kind` would be written (the cap is not reached).
    pub fn wants(&self, kind: &str) -> bool {
        self.max_per_kind == 0
            || self.stats.by_kind.get(kind).copied().unwrap_or(0) < self.max_per_kind
    }

    /// Writes one record.
    pub fn record(&mut self, r: &Record<'_>) {
        if !self.wants(r.kind) {
            self.stats.dropped += 1;
            return;
        }
        *self.stats.by_kind.entry(r.kind.to_string()).or_default() += 1;
        self.seq += 1;
        let lines = RecordLines {
            id: format!("emu-{}-{:04}", self.family, self.seq),
            source: format!(
                "mlx5dp emulated device, scenario family `{}`, record {}",
                self.family, self.seq
            ),
            by: ("recorded-by", RECORDED_BY),
            origin: "emulator",
            kind: r.kind,
            device: "mlx5dp emulated ConnectX (software model, not hardware)",
            params: &r.params,
            expect: &r.expect.0,
            notes: &r.notes,
            bytes: r.bytes,
        };
        write_record(&mut self.text, &lines);
    }

    /// Saves the records (when a path was given) and returns the counts.
    pub fn finish(self) -> std::io::Result<RecordStats> {
        if let Some(p) = &self.path {
            if let Some(dir) = p.parent() {
                std::fs::create_dir_all(dir)?;
            }
            std::fs::write(p, &self.text)?;
        }
        Ok(self.stats)
    }
}

// ---------------------------------------------------------------------------
// What the device meant, as expect values
// ---------------------------------------------------------------------------

use super::cq::{CompressionCfg, CompressionLayout, CqTrace, CqeClass, CqeSize};
use super::wqe::{AtomicOp, Op, Sge, Wqe, WqeFault};
use super::QpType;
use mlx5dp::prm::{CqArmWord, Cqe64, ErrCqe};

/// The `# qp:` name of a QP type (`mlx5dp decode wqe --qp`).
pub fn qp_name(t: QpType) -> &'static str {
    match t {
        QpType::Rc => "rc",
        QpType::Uc => "uc",
        QpType::Ud => "ud",
        QpType::XrcIni | QpType::XrcTgt => "xrc",
        QpType::RawPacket => "raw",
    }
}

/// The `# layout:` name of a CQ's compression.
pub fn layout_name(comp: Option<CompressionCfg>) -> &'static str {
    match comp.map(|c| c.layout) {
        None => "none",
        Some(CompressionLayout::Basic) => "basic",
        Some(CompressionLayout::Enhanced) => "enhanced",
    }
}

/// The control-segment fields of a WQE or doorbell word, as the device read them.
pub fn ctrl_expects(e: &mut Expects, ctrl: (u8, u8, u16, u32, u8)) {
    let (opcode, opmod, idx, qpn, ds) = ctrl;
    e.hex("opcode_raw", opcode)
        .hex("opmod", opmod)
        .hex("wqe_index", idx)
        .hex("qpn", qpn)
        .dec("ds", ds);
}

fn sge_expects(e: &mut Expects, sges: &[Sge]) {
    let total: u64 = sges.iter().map(Sge::len).sum();
    e.dec("payload_bytes", total).dec("sges", sges.len() as u64);
    let mut data = 0;
    for s in sges {
        if let Sge::Ptr { addr, lkey, len } = s {
            let p = format!("seg.data#{data}.");
            e.dec(format!("{p}byte_count"), *len)
                .hex(format!("{p}lkey"), *lkey)
                .hex(format!("{p}addr"), *addr);
            data += 1;
        }
    }
}

/// The expect values of a WQE the device parsed (or rejected with `fault`,
/// when only the control segment is known).
pub fn wqe_expects(
    ctrl: (u8, u8, u16, u32, u8),
    parsed: Result<&Wqe, WqeFault>,
) -> (Expects, Vec<String>) {
    let mut e = Expects::new();
    ctrl_expects(&mut e, ctrl);
    let ds = u32::from(ctrl.4.max(1));
    e.dec("wqebbs", (ds * 16).div_ceil(64));
    let w = match parsed {
        Ok(w) => w,
        Err(f) => {
            return (
                e,
                vec![format!(
                    "the device rejected this WQE ({f:?}); only its control segment is expected"
                )],
            )
        }
    };
    e.dec("fm_raw", w.fm_ce_se.fm())
        .dec("ce_raw", w.fm_ce_se.ce())
        .flag("se", w.fm_ce_se.se());
    if let Some(s) = w.xrc_srqn {
        e.hex("seg.xrc.xrc_srqn", s);
    }
    if let Some(av) = w.av {
        e.hex("seg.av.qkey", av.qkey).hex("seg.av.dqp_dct", av.dqpn);
    }
    match &w.op {
        Op::Nop => {}
        Op::LocalInval { key } => {
            e.hex("imm", *key);
        }
        Op::BindMw { key, bind } => {
            e.hex("imm", *key)
                .flag("seg.umr_ctrl.check_free", bind.check_free)
                .flag("seg.umr_ctrl.check_qpn", bind.check_qpn)
                .flag("seg.mkey_context.free", bind.range.is_none());
            if let Some(q) = bind.qpn {
                e.hex("seg.mkey_context.qpn", q);
            }
            if let Some(v) = bind.variant {
                e.hex("seg.mkey_context.mkey", v);
            }
            if let Some(r) = bind.range {
                e.hex("seg.mkey_context.start_addr", r.start_addr)
                    .hex("seg.mkey_context.len", r.len)
                    .hex("seg.klm.mkey", r.klm_mkey)
                    .hex("seg.klm.address", r.klm_address);
            }
        }
        Op::Send { imm, inval, sges } => {
            if let Some(b) = imm {
                e.hex("imm", u32::from_be_bytes(*b));
            }
            if let Some(k) = inval {
                e.hex("imm", *k);
            }
            sge_expects(&mut e, sges);
        }
        Op::Write {
            raddr,
            rkey,
            imm,
            sges,
        } => {
            e.hex("seg.raddr.raddr", *raddr)
                .hex("seg.raddr.rkey", *rkey);
            if let Some(b) = imm {
                e.hex("imm", u32::from_be_bytes(*b));
            }
            sge_expects(&mut e, sges);
        }
        Op::Read { raddr, rkey, sges } => {
            e.hex("seg.raddr.raddr", *raddr)
                .hex("seg.raddr.rkey", *rkey);
            sge_expects(&mut e, sges);
        }
        Op::Atomic {
            raddr,
            rkey,
            op,
            result,
        } => {
            e.hex("seg.raddr.raddr", *raddr)
                .hex("seg.raddr.rkey", *rkey);
            match *op {
                AtomicOp::Cs { swap, compare } => {
                    e.hex("seg.atomic.swap_add", swap)
                        .hex("seg.atomic.compare", compare);
                }
                AtomicOp::Fa { add } => {
                    e.hex("seg.atomic.swap_add", add);
                }
                AtomicOp::MaskedCs {
                    size: 8,
                    swap,
                    compare,
                    swap_mask,
                    compare_mask,
                } => {
                    e.hex("seg.masked_atomic_64.swap_add", swap)
                        .hex("seg.masked_atomic_64.compare", compare)
                        .hex("seg.masked_atomic_64.swap_add_mask", swap_mask)
                        .hex("seg.masked_atomic_64.compare_mask", compare_mask);
                }
                AtomicOp::MaskedCs {
                    swap,
                    compare,
                    swap_mask,
                    compare_mask,
                    ..
                } => {
                    e.hex("seg.masked_cs_32.swap", swap)
                        .hex("seg.masked_cs_32.compare", compare)
                        .hex("seg.masked_cs_32.swap_mask", swap_mask)
                        .hex("seg.masked_cs_32.compare_mask", compare_mask);
                }
                AtomicOp::MaskedFa {
                    size: 8,
                    add,
                    boundary,
                } => {
                    e.hex("seg.masked_fa_64.add", add)
                        .hex("seg.masked_fa_64.field_boundary", boundary);
                }
                AtomicOp::MaskedFa { add, boundary, .. } => {
                    e.hex("seg.masked_fa_32.add", add)
                        .hex("seg.masked_fa_32.field_boundary", boundary);
                }
            }
            e.hex("seg.data.addr", result.0)
                .hex("seg.data.lkey", result.1)
                .dec("seg.data.byte_count", op.size());
        }
        Op::Eth { eth, sges, .. } => {
            e.hex("seg.eth.cs_flags", eth.cs_flags)
                .dec("seg.eth.mss", eth.mss)
                .flag("seg.eth.vlan_insert", eth.vlan.is_some());
            match eth.vlan {
                Some((tci, svlan)) => {
                    e.hex("seg.eth.vlan_tci", tci).flag("seg.eth.svlan", svlan);
                }
                None => {
                    e.dec("seg.eth.inline_hdr_sz", eth.inline_hdr.len() as u64);
                }
            }
            sge_expects(&mut e, sges);
        }
    }
    (e, Vec::new())
}

fn cqe_size_name(s: CqeSize) -> String {
    s.bytes().to_string()
}

/// The fields a regular CQE carries, from the device's own structure.
fn cqe_expects(e: &mut Expects, prefix: &str, c: &Cqe64, error: bool, mini: bool) {
    let k = |s: &str| format!("{prefix}{s}");
    e.hex(k("opcode_raw"), c.op_own.opcode())
        .hex(k("qpn"), c.sop_drop_qpn.qpn())
        .hex(k("wqe_counter"), c.wqe_counter.get());
    if error {
        let er: ErrCqe = zerocopy::transmute!(*c);
        e.hex(k("syndrome"), er.syndrome)
            .hex(k("vendor_syndrome"), er.vendor_err_synd)
            .hex(k("s_wqe_opcode"), er.s_wqe_opcode_qpn.s_wqe_opcode())
            .hex(k("srqn"), er.srqn.get());
        return;
    }
    e.hex(k("byte_cnt"), c.byte_cnt.get());
    if mini {
        return;
    }
    e.dec(k("se"), u8::from(c.op_own.se()))
        .hex(k("timestamp"), c.timestamp.get())
        .hex(k("imm_inval_pkey"), c.imm_inval_pkey.get())
        .hex(k("rqpn"), c.flags_rqpn.rqpn())
        .hex(k("srqn_uidx"), c.srqn_uidx.srqn_uidx())
        .hex(k("check_sum"), c.check_sum.get())
        .hex(k("rss_hash_result"), c.rss_hash_result.get())
        .hex(k("wqe_id"), c.wqe_id.get())
        .hex(k("vlan_info"), c.vlan_info.get());
}

/// The record of what a CQ wrote.
pub fn cq_record<'a>(
    cqn: u32,
    ring_size: u32,
    cqe_size: CqeSize,
    comp: Option<CompressionCfg>,
    t: &'a CqTrace,
) -> Record<'a> {
    let mut e = Expects::new();
    let mut params = vec![
        ("queue", format!("cq {cqn:#x}")),
        ("cqe-size", cqe_size_name(cqe_size)),
        ("layout", layout_name(comp).to_string()),
    ];
    match t {
        CqTrace::Regular {
            ci,
            bytes,
            completion,
            owner,
            signature,
        } => {
            let error = completion.class == CqeClass::Error;
            let kind = match (error, cqe_size) {
                (true, CqeSize::B64) => "error_cqe64",
                (false, CqeSize::B64) => "cqe64",
                (true, CqeSize::B128) => "error_cqe128",
                (false, CqeSize::B128) => "cqe128",
            };
            params.push(("ring-size", ring_size.to_string()));
            params.push(("ci", ci.to_string()));
            e.dec("owner", u8::from(*owner));
            if comp.is_some_and(|c| c.layout == CompressionLayout::Enhanced) {
                e.hex("signature", *signature);
            }
            cqe_expects(&mut e, "", &completion.cqe, error, false);
            Record {
                kind,
                params,
                expect: e,
                notes: Vec::new(),
                bytes,
            }
        }
        CqTrace::Session {
            ci,
            bytes,
            completions,
            mini_format,
            striding,
        } => {
            params.push(("mini-format", (*mini_format).to_string()));
            params.push(("striding-rq", striding.to_string()));
            params.push(("ring-size", ring_size.to_string()));
            params.push(("ci", ci.to_string()));
            e.dec("completions", completions.len() as u64);
            let enhanced = comp.is_some_and(|c| c.layout == CompressionLayout::Enhanced);
            for (i, c) in completions.iter().enumerate() {
                let p = format!("c{i}.");
                // Enhanced: the title is a regular CQE; basic: the title
                // slot carries the first mini too.
                let mini = !(enhanced && i == 0);
                e.flag(format!("{p}compressed"), mini);
                cqe_expects(&mut e, &p, &c.cqe, false, true);
                match *mini_format {
                    "req" => {
                        e.hex(format!("{p}send_opcode_raw"), c.cqe.sop_drop_qpn.sop());
                    }
                    "hash" => {
                        e.hex(format!("{p}rss_hash_result"), c.cqe.rss_hash_result.get());
                    }
                    "csum" | "csum-stridx" => {
                        e.hex(format!("{p}check_sum"), c.cqe.check_sum.get());
                    }
                    _ => {}
                }
            }
            Record {
                kind: "cqe_session",
                params,
                expect: e,
                notes: vec![format!(
                    "{} slot(s) from ci {ci}: the session as the device left it in the ring (slots it did not write keep older bytes)",
                    bytes.len() / cqe_size.bytes()
                )],
                bytes,
            }
        }
    }
}

/// The expect values of a CQ arm word (doorbell record word 1, or the
/// first half of the arm doorbell).
pub fn arm_expects(e: &mut Expects, word: u32) {
    let w = CqArmWord::from_bits(mlx5dp::prm::Be32::new(word));
    e.dec("cmd", w.cmd())
        .dec("arm_sn", w.arm_sn())
        .hex("ci", w.ci());
}
