//! Completion queues: the CQE writer, CQE compression sessions, overrun
//! detection and arming (PRM-FACTS §9, §10).
//!
//! Completions are produced during a step into the CQ's pending list, then
//! written when the step ends (the end of a step stands in for the
//! hardware's compression timeout). A CQE is written as the hardware writes
//! it: the body first, then the byte that hands it to software with a
//! release store — `op_own` (owner bit = pass parity), or, on a CQ with the
//! enhanced compression layout, bytes 62–63 together (validity iteration
//! count = pass modulo 256, and `op_own`).
//!
//! Compression ("zipping") turns runs of compatible completions into
//! sessions, exactly as the layouts say:
//! - basic layout: a title CQE (format 3, `byte_cnt` = N minis, the first
//!   completion's fields) at slot s, mini-CQE arrays of eight at s+1, s+8,
//!   s+16, ...; the session covers N slots and the device writes only the
//!   title and the arrays (the other slots keep whatever they held, so a
//!   consumer that does not neutralise consumed slots trips over them on
//!   the next pass); the arrays first, the title's `op_own` last;
//! - enhanced layout: the title is the last regular CQE written to the CQ;
//!   a compressed CQE holds up to seven minis from byte 0, byte 62 the
//!   iteration count, `op_own` = (N − 1) << 4 | 3 << 2 | owner; N slots are
//!   consumed and the N − 1 holes are not written. The title may serve
//!   several consecutive compressed CQEs, across steps.
//!
//! A run is compatible when every field the mini format does not carry is
//! equal to the title's (the timestamp, checksum and hash excepted: minis
//! inherit the title's timestamp and lose what their format does not carry),
//! and the WQE counters follow the rule the consumer reconstructs them by
//! (responder: title + i on a cyclic RQ/SRQ; title + strides consumed on a
//! striding RQ without a stride-index format; requester: carried by the mini).
#![forbid(unsafe_code)]

use super::mem::DmaBlock;
use super::{Cqn, EmuEvent};
use mlx5dp::index::RingSize;
use mlx5dp::prm::{
    Be16, Cqe64, CqeOpcode, FtagByteCnt, MiniCqeCsum, MiniCqeCsumStridx, MiniCqeFormat,
    MiniCqeFtagStridx, MiniCqeHash, MiniCqeL34hStridx, MiniCqeReq, OpOwn, CQ_DB_REQ_NOT_SOL,
    ENHANCED_MAX_MINIS,
};
use std::collections::VecDeque;
use std::sync::Arc;
use zerocopy::IntoBytes;

/// CQE size of a CQ (`cqe_sz` in the CQ context).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CqeSize {
    /// 64-byte CQEs.
    B64,
    /// 128-byte CQEs: the 64-byte CQE is the second half.
    B128,
}

impl CqeSize {
    /// Bytes per slot.
    pub fn bytes(self) -> usize {
        match self {
            CqeSize::B64 => 64,
            CqeSize::B128 => 128,
        }
    }
}

/// CQE compression layout (`cqe_comp_layout`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompressionLayout {
    /// Title + mini-CQE arrays (`MLX5_CQE_COMPRESS_LAYOUT_BASIC`).
    Basic,
    /// Compressed CQEs of up to seven minis after a regular title
    /// (`MLX5_CQE_COMPRESS_LAYOUT_ENHANCED`).
    Enhanced,
}

/// How a CQ compresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompressionCfg {
    /// Responder mini-CQE format (requester sessions always use the
    /// requester mini format).
    pub format: MiniCqeFormat,
    /// Layout.
    pub layout: CompressionLayout,
    /// Most completions in one session, title included.
    pub max_session: u16,
    /// Compress every run of two or more compatible completions (tests use
    /// this to provoke sessions); otherwise only runs of four or more, the
    /// emulator's stand-in for the hardware's load-dependent choice.
    pub force: bool,
}

/// Which receive queue a responder completion came from (for the WQE
/// counter rule of compression).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RqClass {
    /// Cyclic RQ.
    Cyclic,
    /// SRQ (linked list).
    Srq,
    /// Striding RQ; the completion consumed `strides`.
    Striding {
        /// Strides consumed.
        strides: u16,
    },
}

/// What kind of completion a CQE is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CqeClass {
    /// Requester success.
    Req,
    /// Responder success.
    Resp(RqClass),
    /// Error (never compressed).
    Error,
}

/// One completion, as a full CQE before the device gives it a slot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Completion {
    /// The CQE (`op_own` holds opcode and SE; the owner bit and the
    /// validity byte are set when it is written).
    pub cqe: Cqe64,
    /// Its class.
    pub class: CqeClass,
}

/// What a CQ wrote, kept for the recorder ([`super::record`]) while
/// [`Cq::trace`] is on: the bytes as left in the ring right after the
/// write, and the completions the device meant them to carry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CqTrace {
    /// A regular CQE.
    Regular {
        /// Its consumer index (free-running).
        ci: u32,
        /// The whole slot (64 or 128 bytes).
        bytes: Vec<u8>,
        /// The completion, before owner and validity were stamped.
        completion: Completion,
        /// The owner bit written.
        owner: bool,
        /// The validity iteration count written (enhanced layout), else 0.
        signature: u8,
    },
    /// A compressed session: a basic title with its arrays, or an enhanced
    /// title (the last regular CQE) followed by its compressed CQEs up to
    /// and including the one just written.
    Session {
        /// Consumer index of the first slot in `bytes` (the title).
        ci: u32,
        /// The slots from the title to the last one the session covers.
        bytes: Vec<u8>,
        /// Every completion those slots stand for, title first.
        completions: Vec<Completion>,
        /// The mini-CQE format, by its `mlx5dp decode` name.
        mini_format: &'static str,
        /// Whether responder completions are striding-RQ ones.
        striding: bool,
    },
}

/// The enhanced-layout title currently in force.
#[derive(Clone, Debug)]
struct Title {
    key: Cqe64,
    class: CqeClass,
    /// Its consumer index.
    ci: u32,
    /// The completions it and its minis stand for so far (kept only while
    /// tracing).
    members: Vec<Completion>,
    /// The last completion the title (or a mini after it) stood for.
    last_counter: u16,
    last_class: CqeClass,
    /// Completions so far in this session, title included.
    count: u32,
}

/// Counters of what a CQ has written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CqStats {
    /// Regular CQEs written.
    pub regular: u64,
    /// Compression sessions (basic) or compressed CQEs (enhanced) written.
    pub compressed_blocks: u64,
    /// Completions carried by minis.
    pub minis: u64,
    /// Completions lost to an overrun.
    pub lost: u64,
}

/// An emulated completion queue.
#[derive(Debug)]
pub struct Cq {
    /// CQ number.
    pub cqn: Cqn,
    /// The CQE ring.
    pub ring: Arc<DmaBlock>,
    /// Number of slots.
    pub size: RingSize,
    /// Slot size.
    pub cqe_size: CqeSize,
    /// Doorbell record: `[0]` consumer index, `[1]` arm word.
    pub dbrec: Arc<DmaBlock>,
    /// Slots produced so far (free-running).
    pub pi: u32,
    /// Compression, if enabled.
    pub comp: Option<CompressionCfg>,
    /// The CQ context's overrun-ignore bit.
    pub ignore_overrun: bool,
    /// Completions of the current step.
    pub pending: VecDeque<Completion>,
    /// Completions held back by an injected delay: (release step, completion).
    pub delayed: VecDeque<(u64, Completion)>,
    /// Injected delay for new completions, in steps.
    pub delay_steps: u32,
    /// In error after an overrun: nothing more is written.
    pub overrun: bool,
    /// Armed: (command, sequence number).
    pub armed: Option<(u8, u8)>,
    /// Counters.
    pub stats: CqStats,
    /// What was written, while tracing (`None`: not tracing, nothing kept).
    pub trace: Option<Vec<CqTrace>>,
    title: Option<Title>,
}

/// Which bytes hand a CQE to software.
fn handover_enhanced(comp: Option<CompressionCfg>) -> bool {
    matches!(
        comp,
        Some(CompressionCfg {
            layout: CompressionLayout::Enhanced,
            ..
        })
    )
}

impl Cq {
    /// A new CQ over `ring` (already initialised by the creator) and `dbrec`.
    pub fn new(
        cqn: Cqn,
        ring: Arc<DmaBlock>,
        size: RingSize,
        cqe_size: CqeSize,
        dbrec: Arc<DmaBlock>,
        comp: Option<CompressionCfg>,
        ignore_overrun: bool,
    ) -> Self {
        Self {
            cqn,
            ring,
            size,
            cqe_size,
            dbrec,
            pi: 0,
            comp,
            ignore_overrun,
            pending: VecDeque::new(),
            delayed: VecDeque::new(),
            delay_steps: 0,
            overrun: false,
            armed: None,
            stats: CqStats::default(),
            trace: None,
            title: None,
        }
    }

    /// Queues a completion produced at step `now`.
    pub fn push(&mut self, now: u64, c: Completion) {
        if self.delay_steps > 0 || !self.delayed.is_empty() {
            // Keep order: once anything is delayed, everything after it waits too.
            self.delayed
                .push_back((now + u64::from(self.delay_steps), c));
        } else {
            self.pending.push_back(c);
        }
    }

    /// Moves delayed completions whose time has come to the pending list.
    pub fn release_delayed(&mut self, now: u64) {
        while let Some((at, _)) = self.delayed.front() {
            if *at > now {
                break;
            }
            if let Some((_, c)) = self.delayed.pop_front() {
                self.pending.push_back(c);
            }
        }
    }

    /// Slots software has not yet given back, from the doorbell record.
    fn free_slots(&self, events: &mut Vec<EmuEvent>) -> u32 {
        if self.ignore_overrun {
            return u32::MAX;
        }
        let ci = self.dbrec.load_be32_acquire(0).unwrap_or(0) & 0x00ff_ffff;
        let used = self.pi.wrapping_sub(ci) & 0x00ff_ffff;
        if used > self.size.entries() {
            events.push(EmuEvent::CqCiAhead {
                cqn: self.cqn,
                ci,
                pi: self.pi & 0x00ff_ffff,
            });
            return 0;
        }
        self.size.entries() - used
    }

    /// Writes every pending completion: regular CQEs and compression
    /// sessions. Reports overruns and completion events into `events`.
    pub fn flush(&mut self, events: &mut Vec<EmuEvent>) {
        while let Some(first) = self.pending.front().cloned() {
            if self.overrun {
                self.stats.lost += self.pending.len() as u64;
                self.pending.clear();
                return;
            }
            let free = self.free_slots(events);
            if free == 0 {
                self.overrun = true;
                events.push(EmuEvent::CqOverrun { cqn: self.cqn });
                continue;
            }
            let written = match self.comp {
                Some(cfg) if cfg.layout == CompressionLayout::Basic => self.try_basic(cfg, free),
                Some(cfg) => self.try_enhanced(cfg, free),
                None => 0,
            };
            if written == 0 {
                self.pending.pop_front();
                self.write_regular(&first);
                self.notify(&first.cqe, events);
            } else {
                let solicited = self.pending.iter().take(written).any(|c| c.cqe.op_own.se());
                self.pending.drain(..written);
                if self.armed.is_some() {
                    let mut probe = first.cqe;
                    probe.op_own.set_se(solicited);
                    self.notify(&probe, events);
                }
            }
        }
    }

    /// Raises a completion event if the CQ is armed for this CQE.
    fn notify(&mut self, cqe: &Cqe64, events: &mut Vec<EmuEvent>) {
        if let Some((cmd, _)) = self.armed {
            let error = matches!(cqe.opcode(), CqeOpcode::ReqErr | CqeOpcode::RespErr);
            if cmd != CQ_DB_REQ_NOT_SOL || cqe.op_own.se() || error {
                self.armed = None;
                events.push(EmuEvent::Completion { cqn: self.cqn });
            }
        }
    }

    /// Arms the CQ (a doorbell at UAR + 0x20); an event fires at once when
    /// completions beyond `ci` already exist.
    pub fn arm(&mut self, cmd: u8, sn: u8, ci: u32, events: &mut Vec<EmuEvent>) {
        if (self.pi & 0x00ff_ffff) != (ci & 0x00ff_ffff) {
            events.push(EmuEvent::Completion { cqn: self.cqn });
            self.armed = None;
        } else {
            self.armed = Some((cmd, sn));
        }
    }

    /// Byte offset of the 64-byte CQE part of slot `counter`.
    fn cqe_offset(&self, counter: u32) -> usize {
        let stride = self.cqe_size.bytes();
        self.size.slot(counter) * stride + (stride - 64)
    }

    /// Writes 64 bytes into the CQE part of `counter`'s slot, the hand-over
    /// byte(s) last with release ordering.
    fn write_cqe_bytes(&self, counter: u32, bytes: &[u8; 64]) {
        let off = self.cqe_offset(counter);
        if self.cqe_size == CqeSize::B128 {
            // No inline scatter: the first half is padding.
            let _ = self.ring.fill(off - 64, 64, 0);
        }
        // Offsets come from the ring mask and the fixed slot size, so they
        // are always inside the ring; a failure would be an emulator bug and
        // leaves the slot unpublished.
        if handover_enhanced(self.comp) {
            let _ = self.ring.write(off, &bytes[..62]);
            let _ = self.ring.store_2_release(off + 62, [bytes[62], bytes[63]]);
        } else {
            let _ = self.ring.write(off, &bytes[..63]);
            let _ = self.ring.store_u8_release(off + 63, bytes[63]);
        }
    }

    /// Stamps owner/validity for slot `counter` and writes a CQE there.
    fn publish(&self, counter: u32, mut cqe: Cqe64) {
        cqe.op_own.set_owner(self.size.owner_parity(counter));
        if handover_enhanced(self.comp) {
            cqe.signature = self.size.iteration(counter);
        }
        let mut bytes = [0u8; 64];
        bytes.copy_from_slice(cqe.as_bytes());
        self.write_cqe_bytes(counter, &bytes);
    }

    fn write_regular(&mut self, c: &Completion) {
        let ci = self.pi;
        self.publish(ci, c.cqe);
        if self.trace.is_some() {
            let t = CqTrace::Regular {
                ci,
                bytes: self.slot_bytes(ci, 1),
                completion: c.clone(),
                owner: self.size.owner_parity(ci),
                signature: if handover_enhanced(self.comp) {
                    self.size.iteration(ci)
                } else {
                    0
                },
            };
            if let Some(v) = self.trace.as_mut() {
                v.push(t);
            }
        }
        self.pi = self.pi.wrapping_add(1);
        self.stats.regular += 1;
        let members = if self.trace.is_some() {
            vec![c.clone()]
        } else {
            Vec::new()
        };
        self.title = match c.class {
            CqeClass::Error => None,
            class => Some(Title {
                key: compat_key(self.mini_format(class), &c.cqe),
                class,
                ci,
                members,
                last_counter: c.cqe.wqe_counter.get(),
                last_class: class,
                count: 1,
            }),
        };
    }

    /// The bytes of `n` whole slots from consumer index `ci` (wrapping).
    fn slot_bytes(&self, ci: u32, n: u32) -> Vec<u8> {
        let stride = self.cqe_size.bytes();
        let mut out = vec![0u8; stride * n as usize];
        for k in 0..n {
            let off = self.size.slot(ci.wrapping_add(k)) * stride;
            let dst = &mut out[stride * k as usize..stride * (k as usize + 1)];
            let _ = self.ring.read(off, dst);
        }
        out
    }

    fn trace_session(&mut self, ci: u32, n: u32, completions: Vec<Completion>, fmt: MiniFormat) {
        let striding = completions
            .iter()
            .any(|c| matches!(c.class, CqeClass::Resp(RqClass::Striding { .. })));
        let t = CqTrace::Session {
            ci,
            bytes: self.slot_bytes(ci, n),
            completions,
            mini_format: fmt.name(),
            striding,
        };
        if let Some(v) = self.trace.as_mut() {
            v.push(t);
        }
    }

    /// The mini format a completion of `class` would use on this CQ.
    fn mini_format(&self, class: CqeClass) -> MiniFormat {
        match (class, self.comp) {
            (CqeClass::Req, _) => MiniFormat::Req,
            (_, Some(cfg)) => MiniFormat::Resp(cfg.format),
            (_, None) => MiniFormat::Resp(MiniCqeFormat::Hash),
        }
    }

    /// Length of the compatible run at the front of `pending`, starting
    /// after `prev` (class, counter) with key `key`, at most `max`.
    fn run_len(
        &self,
        fmt: MiniFormat,
        key: &Cqe64,
        mut prev: (CqeClass, u16),
        skip: usize,
        max: usize,
    ) -> usize {
        let mut n = 0;
        for c in self.pending.iter().skip(skip) {
            if n >= max
                || !same_class(c.class, prev.0)
                || mini_bytes(fmt, c).is_none()
                || compat_key(fmt, &c.cqe) != *key
                || !counter_follows(fmt, prev, c)
            {
                break;
            }
            prev = (c.class, c.cqe.wqe_counter.get());
            n += 1;
        }
        n
    }

    /// Tries a basic-layout session at the front; returns completions written.
    fn try_basic(&mut self, cfg: CompressionCfg, free: u32) -> usize {
        let Some(first) = self.pending.front() else {
            return 0;
        };
        if first.class == CqeClass::Error {
            return 0;
        }
        let fmt = self.mini_format(first.class);
        if mini_bytes(fmt, first).is_none() {
            return 0;
        }
        let key = compat_key(fmt, &first.cqe);
        let max = usize::from(cfg.max_session).min(free as usize);
        let n = 1 + self.run_len(
            fmt,
            &key,
            (first.class, first.cqe.wqe_counter.get()),
            1,
            max.saturating_sub(1),
        );
        let min_run = if cfg.force { 2 } else { 4 };
        if n < min_run {
            return 0;
        }
        let minis: Vec<[u8; 8]> = self
            .pending
            .iter()
            .take(n)
            .filter_map(|c| mini_bytes(fmt, c))
            .collect();
        let s = self.pi;
        // Arrays: minis 0..8 at s+1, then 8j.. at s+8j (PRM-FACTS §10.4).
        for (j, chunk) in minis.chunks(8).enumerate() {
            let slot = if j == 0 {
                s.wrapping_add(1)
            } else {
                s.wrapping_add(8 * j as u32)
            };
            let mut arr = [0u8; 64];
            for (i, m) in chunk.iter().enumerate() {
                arr[i * 8..i * 8 + 8].copy_from_slice(m);
            }
            let off = self.cqe_offset(slot);
            let _ = self.ring.write(off, &arr);
        }
        // The title last: the first completion's CQE, byte_cnt = N, format 3.
        let mut title = first.cqe;
        title.byte_cnt.set(n as u32);
        title.op_own.set_format(3);
        self.publish(s, title);
        if self.trace.is_some() {
            let members: Vec<Completion> = self.pending.iter().take(n).cloned().collect();
            self.trace_session(s, n as u32, members, fmt);
        }
        self.pi = s.wrapping_add(n as u32);
        self.stats.compressed_blocks += 1;
        self.stats.minis += n as u64;
        self.title = None;
        n
    }

    /// Tries an enhanced-layout compressed CQE at the front.
    fn try_enhanced(&mut self, cfg: CompressionCfg, free: u32) -> usize {
        let Some(t) = self.title.clone() else {
            return 0;
        };
        let fmt = self.mini_format(t.class);
        let left = u32::from(cfg.max_session).saturating_sub(t.count) as usize;
        let max = ENHANCED_MAX_MINIS.min(left).min(free as usize);
        let n = self.run_len(fmt, &t.key, (t.last_class, t.last_counter), 0, max);
        let min = if cfg.force || t.count > 1 { 1 } else { 3 };
        if n == 0 || n < min {
            return 0;
        }
        let mut bytes = [0u8; 64];
        for (i, c) in self.pending.iter().take(n).enumerate() {
            if let Some(m) = mini_bytes(fmt, c) {
                bytes[i * 8..i * 8 + 8].copy_from_slice(&m);
            }
        }
        let s = self.pi;
        bytes[62] = self.size.iteration(s);
        let op_own = OpOwn::new()
            .with_opcode((n - 1) as u8)
            .with_format(3)
            .with_owner(self.size.owner_parity(s));
        bytes[63] = op_own.into_bits();
        self.write_cqe_bytes(s, &bytes);
        let last = self
            .pending
            .get(n - 1)
            .map(|c| (c.class, c.cqe.wqe_counter.get()));
        if let (Some(title), Some((class, counter))) = (self.title.as_mut(), last) {
            title.last_class = class;
            title.last_counter = counter;
            title.count += n as u32;
        }
        if self.trace.is_some() {
            let block: Vec<Completion> = self.pending.iter().take(n).cloned().collect();
            if let Some(title) = self.title.as_mut() {
                title.members.extend(block);
                let members = title.members.clone();
                let tci = title.ci;
                let span = s.wrapping_add(n as u32).wrapping_sub(tci);
                self.trace_session(tci, span, members, fmt);
            }
        }
        self.pi = s.wrapping_add(n as u32);
        self.stats.compressed_blocks += 1;
        self.stats.minis += n as u64;
        n
    }
}

/// The mini format of a session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum MiniFormat {
    Req,
    Resp(MiniCqeFormat),
}

impl MiniFormat {
    /// The `mlx5dp decode` name of the format.
    fn name(self) -> &'static str {
        match self {
            MiniFormat::Req => "req",
            MiniFormat::Resp(MiniCqeFormat::Hash) => "hash",
            MiniFormat::Resp(MiniCqeFormat::Csum) => "csum",
            MiniFormat::Resp(MiniCqeFormat::FtagStridx) => "ftag-stridx",
            MiniFormat::Resp(MiniCqeFormat::CsumStridx) => "csum-stridx",
            MiniFormat::Resp(MiniCqeFormat::L34hStridx) => "l34h-stridx",
            MiniFormat::Resp(MiniCqeFormat::Unknown(_)) => "unknown",
        }
    }

    fn has_stride_index(self) -> bool {
        matches!(
            self,
            MiniFormat::Resp(
                MiniCqeFormat::FtagStridx | MiniCqeFormat::CsumStridx | MiniCqeFormat::L34hStridx
            )
        )
    }
}

fn same_class(a: CqeClass, b: CqeClass) -> bool {
    match (a, b) {
        (CqeClass::Req, CqeClass::Req) => true,
        (CqeClass::Resp(x), CqeClass::Resp(y)) => {
            std::mem::discriminant(&x) == std::mem::discriminant(&y)
        }
        _ => false,
    }
}

/// Whether `c`'s WQE counter is the one a consumer reconstructs after `prev`.
fn counter_follows(fmt: MiniFormat, prev: (CqeClass, u16), c: &Completion) -> bool {
    let got = c.cqe.wqe_counter.get();
    match (fmt, c.class, prev.0) {
        (MiniFormat::Req, _, _) => true,
        (f, CqeClass::Resp(RqClass::Striding { .. }), _) if f.has_stride_index() => true,
        (
            _,
            CqeClass::Resp(RqClass::Striding { .. }),
            CqeClass::Resp(RqClass::Striding { strides }),
        ) => got == prev.1.wrapping_add(strides),
        _ => got == prev.1.wrapping_add(1),
    }
}

/// The CQE with every field the mini carries (or the consumer rebuilds)
/// cleared: two completions with equal keys may share a session.
fn compat_key(fmt: MiniFormat, cqe: &Cqe64) -> Cqe64 {
    let mut k = *cqe;
    k.timestamp.set(0);
    k.wqe_counter.set(0);
    k.byte_cnt.set(0);
    k.op_own.set_owner(false);
    k.signature = 0;
    // The checksum and the hash are not session keys: a format that does
    // not carry them loses them (consumers of such formats take checksum
    // validity from the L3/L4 OK bits, DPDK `rxq_cq_to_mbuf`; the kernel
    // uses a CSUM format because it needs the sum). Emulator reading.
    k.check_sum.set(0);
    k.rss_hash_result.set(0);
    k.rss_hash_type = 0;
    match fmt {
        MiniFormat::Req => k.sop_drop_qpn.set_sop(0),
        MiniFormat::Resp(MiniCqeFormat::Hash | MiniCqeFormat::Csum | MiniCqeFormat::CsumStridx) => {
        }
        MiniFormat::Resp(MiniCqeFormat::FtagStridx) => k.sop_drop_qpn.set_qpn(0),
        MiniFormat::Resp(MiniCqeFormat::L34hStridx) => {
            k.l4_l3_hdr_type = Default::default();
        }
        MiniFormat::Resp(MiniCqeFormat::Unknown(_)) => {}
    }
    k
}

/// The eight bytes of `c`'s mini-CQE in `fmt`, built through the `prm`
/// mini-CQE layouts (pinned by `specs/`); `None` when a field does not fit
/// or `c` is an error (then `c` cannot be compressed).
fn mini_bytes(fmt: MiniFormat, c: &Completion) -> Option<[u8; 8]> {
    if c.class == CqeClass::Error {
        return None;
    }
    let q = &c.cqe;
    let byte_cnt = q.byte_cnt;
    let stride_idx = q.wqe_counter;
    let mut m = [0u8; 8];
    match fmt {
        MiniFormat::Req => {
            let r = MiniCqeReq {
                wqe_counter: q.wqe_counter,
                s_wqe_opcode: q.sop_drop_qpn.sop(),
                rsvd: 0,
                byte_cnt,
            };
            m.copy_from_slice(r.as_bytes());
        }
        MiniFormat::Resp(MiniCqeFormat::Hash) => {
            let r = MiniCqeHash {
                rx_hash_result: q.rss_hash_result,
                byte_cnt,
            };
            m.copy_from_slice(r.as_bytes());
        }
        MiniFormat::Resp(MiniCqeFormat::Csum) => {
            let r = MiniCqeCsum {
                checksum: q.check_sum,
                rsvd: [0; 2],
                byte_cnt,
            };
            m.copy_from_slice(r.as_bytes());
        }
        MiniFormat::Resp(MiniCqeFormat::FtagStridx) => {
            let tag = q.sop_drop_qpn.qpn();
            let count = byte_cnt.get();
            if count > 0x00ff_ffff {
                return None;
            }
            let r = MiniCqeFtagStridx {
                flow_tag_low: Be16::new(tag as u16),
                stride_idx,
                ftag_byte_cnt: FtagByteCnt::new()
                    .with_byte_cnt(count)
                    .with_flow_tag_high((tag >> 16) as u8),
            };
            m.copy_from_slice(r.as_bytes());
        }
        MiniFormat::Resp(MiniCqeFormat::CsumStridx) => {
            let r = MiniCqeCsumStridx {
                checksum: q.check_sum,
                stride_idx,
                byte_cnt,
            };
            m.copy_from_slice(r.as_bytes());
        }
        MiniFormat::Resp(MiniCqeFormat::L34hStridx) => {
            let r = MiniCqeL34hStridx {
                hdr_type: q.l4_l3_hdr_type,
                rsvd: 0,
                stride_idx,
                byte_cnt,
            };
            m.copy_from_slice(r.as_bytes());
        }
        MiniFormat::Resp(MiniCqeFormat::Unknown(_)) => return None,
    }
    Some(m)
}
