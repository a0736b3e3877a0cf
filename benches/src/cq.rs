//! Completion-queue scenarios: polling uncompressed 64-byte CQEs in batches
//! of 32, polling compressed sessions (basic and enhanced layouts) through
//! the same `Cq::poll` (with the compile-time decoder, and with the best
//! one this CPU runs: `*_best`), the burst API (`Cq::poll_burst`; with the
//! best path and, `*_scalar`, the scalar one), the scalar session expansion
//! alone (`zip::expand_session`), and the mini
//! array decoders alone, per path (`cq/unzip_*`: `UnzipPath::decode` into
//! a `MiniBatch`, as the poller runs them).
//!
//! `cq/mprq_poll32_*`: a striding RQ's CQ (16 WQEs of 64 strides of
//! 2 KiB, DPDK's defaults; one 64-byte packet per stride) polled with
//! `Cq::poll` through `StridingWorkQueues` (stride checks, WQE re-posted
//! when its last stride is consumed, `StridingRq::commit` after each
//! call), each packet located from its WQE and stride index: regular CQEs,
//! or basic sessions of 8 or 64 CSUM_STRIDX minis. Unit: packet.
//! `cq/mprq_strided32_*`: the same streams polled with `Cq::poll_strided`
//! (the same accounting and re-posting), each packet's address and length
//! read from the `StridedPacket` array. `*_enhanced_*`: the same packets in
//! the enhanced layout (a title and 7 or 63 minis in compressed CQEs).
//!
//! Measured per completion: `Cq::poll` (or `start_poll`/`next_poll`/
//! `end_poll`) with at most 32 completions per call, each resolved through
//! [`RawCounters`] (the shadow-free `WorkQueues`: wr_id = `wqe_counter`, no
//! per-queue lookup; the `*_sq` scenarios instead through a real send
//! queue's shadow or its receive queue's wr_ids, [`OneQp`], as an
//! `ibv_poll_cq` user's completions are) and handed to a closure that sums the wr_ids
//! (`poll_burst`: written to an array of 32 `CompletionSummary`, whose
//! wr_ids are then summed, ≈ 1.8 instructions per completion); the
//! consumer-index doorbell record write once per call. Not measured: the
//! device model writing CQEs ahead of the consumer ([`CqDevice`]).
//!
//! The CQE ring has 512 slots of 64 bytes (32 KiB): it stays in L1 (the
//! device model wrote it last), where a real CQE written by DMA would be a
//! cache miss (or an LLC hit with DDIO). The figures are the CPU cost of
//! the poll code, not of the memory traffic.

use core::ptr::NonNull;

use mlx5dp::cq::zip::{self, MiniBatch, MiniView, Unzip, UnzipPath};
use mlx5dp::cq::{
    CompletionSummary, Cq, CqConfig, CqParts, CqeSize, Layout, PollError, RawCounters,
    StridedPacket, Wc,
};
use mlx5dp::index::RingSize;
use mlx5dp::prm::{
    Be16, Be32, Cqe64, CqeOpcode, EnhancedCompressedCqe, MiniCqe, MiniCqeFormat, MprqByteCnt,
    OpOwn, SopDropQpn, CQE_OP_OWN_INIT, CQE_VIC_INIT, ENHANCED_MAX_MINIS, MINI_CQE_ARRAY_SIZE,
};

use mlx5dp::cq::{LookupError, RecvRetired, SendRetired, WorkQueues, WqRef};
use mlx5dp::mmio::DeviceWord;
use mlx5dp::prm::WcStatus;
use mlx5dp::ring::RingBuf;
use mlx5dp::rq::{MprqSlot, Rq, StridingParams, StridingRq, StridingWorkQueues};
use mlx5dp::sq::{DoorbellOnly, QpType, RcQp, SendFlags, SendQueue, Sge, SqConfig};

use crate::{leak_raw, rq, sq, Scenario};

/// CQEs in every benchmark CQ.
pub const CQE_CNT: u32 = 512;
/// Completions per poll call.
pub const POLL_BATCH: usize = 32;

/// WQEs of the striding RQ of the `cq/mprq_*` scenarios.
pub const MPRQ_WQES: u32 = 16;
/// log2 of its strides per WQE (DPDK's default `mprq_log_stride_num`, 6).
pub const MPRQ_LOG_STRIDES: u8 = 6;
/// Its strides per WQE.
pub const MPRQ_STRIDES: u32 = 1 << MPRQ_LOG_STRIDES;
/// log2 of its stride size (DPDK's default, 2 KiB).
pub const MPRQ_LOG_STRIDE_BYTES: u8 = 11;
/// The (never touched) address of the striding RQ's first buffer.
const MPRQ_BASE: u64 = 0x0004_0000_0000;

/// What the device model writes, repeatedly.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stream {
    /// Requester CQEs (opcode REQ), one per slot.
    Uncompressed,
    /// Basic-layout sessions of `n` HASH minis (title + arrays, `n` slots).
    Basic(u32),
    /// Enhanced layout: a regular responder CQE (the title), then `n` HASH
    /// minis in compressed CQEs of up to seven (`1 + n` slots).
    Enhanced(u32),
    /// Striding-RQ completions of 64-byte packets, one stride each, in WQE
    /// and stride order ([`MPRQ_STRIDES`] per WQE): `0`, one regular CQE
    /// per packet; `n` (8 or 64), basic-layout sessions of `n` CSUM_STRIDX
    /// minis (`n` slots; a session never spans two WQEs).
    Mprq(u32),
    /// The same packets in the enhanced layout: a regular CQE (the title,
    /// one packet) and `n` CSUM_STRIDX minis in compressed CQEs of up to
    /// seven (`1 + n` slots, all in one WQE: `n` is 7 or 63).
    MprqEnhanced(u32),
}

impl Stream {
    /// Slots one item of the stream occupies.
    fn slots(self) -> u32 {
        match self {
            Stream::Uncompressed | Stream::Mprq(0) => 1,
            Stream::Basic(n) | Stream::Mprq(n) => n,
            Stream::Enhanced(n) | Stream::MprqEnhanced(n) => 1 + n,
        }
    }
    /// Completions one item yields.
    fn completions(self) -> u64 {
        u64::from(self.slots())
    }
}

/// The device side of a benchmark CQ: writes CQEs into the ring ahead of
/// the consumer, with the owner bit (basic) or validity count (enhanced)
/// of their pass.
pub struct CqDevice {
    ring: *mut u8,
    size: RingSize,
    stream: Stream,
    /// Free-running producer slot counter.
    pi: u32,
    /// Completions written so far.
    produced: u64,
}

impl CqDevice {
    fn put(&mut self, index: u32, bytes: &[u8; 64]) {
        let slot = self.size.slot(index);
        // SAFETY: the ring is `CQE_CNT * 64` leaked bytes and `slot` is
        // below `CQE_CNT`; the CQ only reads it while this runs on the same
        // thread between polls.
        unsafe {
            core::ptr::copy_nonoverlapping(bytes.as_ptr(), self.ring.add(slot * 64), 64);
        }
    }

    fn title(&self, index: u32, opcode: CqeOpcode, format: u8) -> Cqe64 {
        let mut c = Cqe64 {
            op_own: OpOwn::new()
                .with_opcode(opcode.raw())
                .with_format(format)
                .with_owner(self.size.owner_parity(index)),
            signature: self.size.iteration(index),
            ..Cqe64::default()
        };
        c.wqe_counter = Be16::new(index as u16);
        c.sop_drop_qpn = SopDropQpn::new().with_qpn(0x123);
        c.byte_cnt = Be32::new(64);
        c.rss_hash_result = Be32::new(0x1234_5678);
        c
    }

    fn hash_mini(k: u32) -> MiniCqe {
        let mut bytes = [0u8; 8];
        bytes[..4].copy_from_slice(&k.wrapping_mul(0x9e37_79b9).to_be_bytes());
        bytes[4..].copy_from_slice(&(64 + (k & 0x3ff)).to_be_bytes());
        MiniCqe { bytes }
    }

    /// A CSUM_STRIDX mini of one 64-byte packet in one stride at `stride`.
    fn stride_mini(stride: u16) -> MiniCqe {
        let one = MprqByteCnt::new().with_byte_cnt(64).with_strides(1);
        let mut bytes = [0u8; 8];
        bytes[..2].copy_from_slice(&0x1234u16.to_be_bytes());
        bytes[2..4].copy_from_slice(&stride.to_be_bytes());
        bytes[4..].copy_from_slice(&one.into_bits().to_be_bytes());
        MiniCqe { bytes }
    }

    /// Writes whole items while they fit in front of consumer index `ci`;
    /// returns the completions written so far.
    pub fn fill(&mut self, ci: u32) -> u64 {
        let entries = self.size.entries();
        let slots = self.stream.slots();
        while self.pi.wrapping_sub(ci) + slots <= entries {
            let p = self.pi;
            match self.stream {
                Stream::Uncompressed => {
                    let c = self.title(p, CqeOpcode::Req, 0);
                    self.put(p, zerocopy::transmute_ref!(&c));
                }
                Stream::Basic(n) => {
                    let mut t = self.title(p, CqeOpcode::RespSend, 3);
                    t.byte_cnt = Be32::new(n);
                    self.put(p, zerocopy::transmute_ref!(&t));
                    for k in 0..n.div_ceil(MINI_CQE_ARRAY_SIZE as u32) {
                        let mut array = [0u8; 64];
                        for (j, m) in array.chunks_exact_mut(8).enumerate() {
                            m.copy_from_slice(&Self::hash_mini(8 * k + j as u32).bytes);
                        }
                        self.put(p.wrapping_add(zip::basic_array_offset(k)), &array);
                    }
                }
                Stream::Mprq(0) => {
                    let mut c = self.title(p, CqeOpcode::RespSend, 0);
                    let k = self.produced;
                    c.wqe_id = Be16::new((k >> MPRQ_LOG_STRIDES) as u16);
                    c.wqe_counter = Be16::new((k & u64::from(MPRQ_STRIDES - 1)) as u16);
                    c.set_mprq_byte_cnt(MprqByteCnt::new().with_byte_cnt(64).with_strides(1));
                    self.put(p, zerocopy::transmute_ref!(&c));
                }
                Stream::Mprq(n) => {
                    let k = self.produced;
                    let mut t = self.title(p, CqeOpcode::RespSend, 3);
                    t.byte_cnt = Be32::new(n);
                    t.wqe_id = Be16::new((k >> MPRQ_LOG_STRIDES) as u16);
                    self.put(p, zerocopy::transmute_ref!(&t));
                    for a in 0..n.div_ceil(MINI_CQE_ARRAY_SIZE as u32) {
                        let mut array = [0u8; 64];
                        for (j, m) in array.chunks_exact_mut(8).enumerate() {
                            let stride =
                                (k + u64::from(8 * a) + j as u64) & u64::from(MPRQ_STRIDES - 1);
                            m.copy_from_slice(&Self::stride_mini(stride as u16).bytes);
                        }
                        self.put(p.wrapping_add(zip::basic_array_offset(a)), &array);
                    }
                }
                Stream::MprqEnhanced(n) => {
                    let k = self.produced;
                    let one = MprqByteCnt::new().with_byte_cnt(64).with_strides(1);
                    let mask = u64::from(MPRQ_STRIDES - 1);
                    let mut c = self.title(p, CqeOpcode::RespSend, 0);
                    c.wqe_id = Be16::new((k >> MPRQ_LOG_STRIDES) as u16);
                    c.wqe_counter = Be16::new((k & mask) as u16);
                    c.set_mprq_byte_cnt(one);
                    self.put(p, zerocopy::transmute_ref!(&c));
                    let mut q = p.wrapping_add(1);
                    let mut next = k + 1;
                    let mut left = n;
                    while left > 0 {
                        let b = left.min(ENHANCED_MAX_MINIS as u32);
                        let mut z = EnhancedCompressedCqe::default();
                        for (j, m) in z.minis.iter_mut().take(b as usize).enumerate() {
                            *m = Self::stride_mini(((next + j as u64) & mask) as u16);
                        }
                        z.validity_iteration_count = self.size.iteration(q);
                        z.op_own = OpOwn::new().with_opcode((b - 1) as u8).with_format(3);
                        self.put(q, zerocopy::transmute_ref!(&z));
                        q = q.wrapping_add(b);
                        next += u64::from(b);
                        left -= b;
                    }
                }
                Stream::Enhanced(n) => {
                    let t = self.title(p, CqeOpcode::RespSend, 0);
                    self.put(p, zerocopy::transmute_ref!(&t));
                    let mut q = p.wrapping_add(1);
                    let mut left = n;
                    while left > 0 {
                        let k = left.min(ENHANCED_MAX_MINIS as u32);
                        let mut z = EnhancedCompressedCqe::default();
                        for (j, m) in z.minis.iter_mut().take(k as usize).enumerate() {
                            *m = Self::hash_mini(n - left + j as u32);
                        }
                        z.validity_iteration_count = self.size.iteration(q);
                        z.op_own = OpOwn::new().with_opcode((k - 1) as u8).with_format(3);
                        self.put(q, zerocopy::transmute_ref!(&z));
                        q = q.wrapping_add(k);
                        left -= k;
                    }
                }
            }
            self.pi = p.wrapping_add(slots);
            self.produced += self.stream.completions();
        }
        self.produced
    }
}

/// One 64-byte CQ slot, 64-byte aligned.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([u8; 64]);

/// A CQ over a leaked ring and doorbell record (no UAR: never armed), and
/// its device model.
fn leak_cq(stream: Stream, unzip: UnzipPath) -> (Cq, CqDevice) {
    let n = CQE_CNT as usize;
    let enhanced = matches!(stream, Stream::Enhanced(_) | Stream::MprqEnhanced(_));
    // 64-byte aligned slots, as a CQ buffer from mlx5dv (page-aligned).
    let mut lines = vec![Line([0u8; 64]); n];
    for Line(slot) in lines.iter_mut() {
        slot[63] = CQE_OP_OWN_INIT;
        if enhanced {
            slot[62] = CQE_VIC_INIT;
        }
    }
    let ring = leak_raw(lines).cast::<u8>();
    let dbrec = leak_raw(vec![0u32; 2]);
    let compression = match stream {
        Stream::Uncompressed | Stream::Mprq(0) => None,
        Stream::Basic(_) => Some((Layout::Basic, MiniCqeFormat::Hash)),
        Stream::Enhanced(_) => Some((Layout::Enhanced, MiniCqeFormat::Hash)),
        Stream::Mprq(_) => Some((Layout::Basic, MiniCqeFormat::CsumStridx)),
        Stream::MprqEnhanced(_) => Some((Layout::Enhanced, MiniCqeFormat::CsumStridx)),
    };
    let parts = CqParts {
        buf: NonNull::new(ring).expect("ring"),
        cqe_cnt: CQE_CNT,
        cqe_size: CqeSize::B64,
        dbrec: NonNull::new(dbrec).expect("dbrec"),
        uar: None,
        cqn: 0x0a1,
    };
    let config = CqConfig {
        compression,
        unzip,
        striding_rq: matches!(stream, Stream::Mprq(_) | Stream::MprqEnhanced(_)),
        ..CqConfig::default()
    };
    // SAFETY: ring and doorbell record are leaked (they live for the rest
    // of the process) and only this CQ and its device model touch them, on
    // one thread.
    let cq = unsafe { Cq::from_raw_parts(parts, config, 0) }.expect("cq");
    let dev = CqDevice {
        ring,
        size: RingSize::new(CQE_CNT).expect("size"),
        stream,
        pi: 0,
        produced: 0,
    };
    (cq, dev)
}

#[cold]
#[inline(never)]
fn poll_failed(e: Option<PollError>) -> ! {
    panic!("poll failed or found the CQ empty: {e:?}")
}

/// Polls `n` completions with `Cq::poll`, at most 32 per call; returns the
/// sum of their wr_ids.
#[inline(never)]
pub fn measured_cq_poll32<W: WorkQueues>(cq: &mut Cq, wqs: &mut W, n: u64) -> u64 {
    let mut acc = 0u64;
    let mut left = n;
    while left > 0 {
        let max = left.min(POLL_BATCH as u64) as usize;
        let got = match cq.poll(wqs, max, |c| acc = acc.wrapping_add(c.wr_id())) {
            Ok(0) => poll_failed(None),
            Ok(got) => got,
            Err(e) => poll_failed(Some(e)),
        };
        left -= got as u64;
    }
    acc
}

/// Polls `n` completions with `Cq::poll_burst`, at most 32 per call into
/// an array of `CompletionSummary`; returns the sum of their wr_ids.
#[inline(never)]
pub fn measured_cq_poll_burst32<W: WorkQueues>(cq: &mut Cq, wqs: &mut W, n: u64) -> u64 {
    let mut out = [CompletionSummary::default(); POLL_BATCH];
    poll_bursts(cq, wqs, &mut out, n)
}

/// [`measured_cq_poll_burst32`] with at most [`LONG_BATCH`] completions
/// per call (a poller that drains the CQ in bigger bursts: the per-call
/// cost spread over more completions), into `out` (the caller's, not
/// cleared per measurement).
#[inline(never)]
pub fn measured_cq_poll_burst256(
    cq: &mut Cq,
    wqs: &mut RawCounters,
    out: &mut [CompletionSummary; LONG_BATCH],
    n: u64,
) -> u64 {
    poll_bursts(cq, wqs, out, n)
}

/// Completions per call of the `burst256_*` scenarios.
pub const LONG_BATCH: usize = 256;

/// Polls `n` completions with `Cq::poll_burst`, at most `B` per call;
/// returns the sum of their wr_ids.
#[inline(always)]
fn poll_bursts<const B: usize, W: WorkQueues>(
    cq: &mut Cq,
    wqs: &mut W,
    out: &mut [CompletionSummary; B],
    n: u64,
) -> u64 {
    let mut acc = 0u64;
    let mut left = n;
    while left > 0 {
        let max = left.min(B as u64) as usize;
        let got = match cq.poll_burst(wqs, &mut out[..max]) {
            Ok(0) => poll_failed(None),
            Ok(got) => got,
            Err(e) => poll_failed(Some(e)),
        };
        acc = acc.wrapping_add(if got == B {
            // (Whole bursts of 32: no loop.)
            out.chunks_exact(POLL_BATCH)
                .filter_map(|c| <&[CompletionSummary; POLL_BATCH]>::try_from(c).ok())
                .fold(0u64, |a, c| a.wrapping_add(sum_wr_ids_full(c)))
        } else {
            sum_wr_ids(&out[..got.min(max)])
        });
        left -= got as u64;
    }
    acc
}

/// The sum of the wr_ids of `summaries`: what a burst's consumer does at
/// the least (reads every completion), four at a time (≈ 1.75 instructions
/// per completion).
#[inline(always)]
fn sum_wr_ids(summaries: &[CompletionSummary]) -> u64 {
    let mut sum = [0u64; 4];
    let mut chunks = summaries.chunks_exact(4);
    for c in &mut chunks {
        for (s, c) in sum.iter_mut().zip(c) {
            *s = s.wrapping_add(c.wr_id);
        }
    }
    for c in chunks.remainder() {
        sum[0] = sum[0].wrapping_add(c.wr_id);
    }
    sum.iter().fold(0, |a, &s| a.wrapping_add(s))
}

/// [`sum_wr_ids`] of a full burst (no loop for 32: ≈ 1 instruction per
/// completion).
#[inline(always)]
fn sum_wr_ids_full<const B: usize>(summaries: &[CompletionSummary; B]) -> u64 {
    summaries.iter().fold(0u64, |a, c| a.wrapping_add(c.wr_id))
}

/// Polls `n` completions with `Cq::poll_wc` (whole `ibv_wc`-like values),
/// at most 32 per call; returns the sum of their wr_ids.
#[inline(never)]
pub fn measured_cq_poll_wc32<W: WorkQueues>(cq: &mut Cq, wqs: &mut W, n: u64) -> u64 {
    let mut out = [Wc::default(); POLL_BATCH];
    let mut acc = 0u64;
    let mut left = n;
    while left > 0 {
        let max = left.min(POLL_BATCH as u64) as usize;
        let got = match cq.poll_wc(wqs, &mut out[..max]) {
            Ok(0) => poll_failed(None),
            Ok(got) => got,
            Err(e) => poll_failed(Some(e)),
        };
        acc = out[..got.min(max)]
            .iter()
            .fold(acc, |a, wc| a.wrapping_add(wc.wr_id));
        left -= got as u64;
    }
    acc
}

/// Polls `n` completions with `start_poll`, `next_poll` and `end_poll`, at
/// most 32 per batch; returns the sum of their wr_ids.
#[inline(never)]
pub fn measured_cq_start_poll32<W: WorkQueues>(cq: &mut Cq, wqs: &mut W, n: u64) -> u64 {
    let mut acc = 0u64;
    let mut left = n;
    while left > 0 {
        let max = left.min(POLL_BATCH as u64);
        let mut batch = match cq.start_poll(wqs) {
            Ok(Some(b)) => b,
            Ok(None) => poll_failed(None),
            Err(e) => poll_failed(Some(e)),
        };
        acc = acc.wrapping_add(batch.completion().wr_id());
        let mut got = 1;
        while got < max {
            match batch.next_poll() {
                Ok(true) => {}
                Ok(false) => poll_failed(None),
                Err(e) => poll_failed(Some(e)),
            }
            acc = acc.wrapping_add(batch.completion().wr_id());
            got += 1;
        }
        batch.end_poll();
        left -= got;
    }
    acc
}

/// Expands one session of minis into `out` (`zip::expand_session`, the
/// scalar reference), `times` times.
#[inline(never)]
pub fn measured_expand_session(
    title: &Cqe64,
    minis: &[MiniCqe],
    view: MiniView,
    out: &mut [Cqe64],
    times: u64,
) -> u16 {
    let mut running = title.wqe_counter.get();
    for _ in 0..times {
        running = zip::expand_session(title, minis, view, running, out);
        core::hint::black_box(&mut *out);
    }
    running
}

/// Polls `n` striding-RQ completions with `Cq::poll`, at most 32 per call,
/// each accounted on `rq` (`StridingWorkQueues`: stride checks, the WQE
/// re-posted when its last stride is consumed) and its packet located
/// (buffer of WQE `wqe_id`, stride `stride_index`, the packet length), as
/// DPDK's `mlx5_rx_burst_mprq` finds each packet; then `rq.commit()`
/// publishes the re-posted WQEs (DPDK's RQ doorbell after the burst).
/// Returns the sum of the packets' addresses and lengths.
#[inline(never)]
pub fn measured_cq_mprq_poll32(
    cq: &mut Cq,
    rq: &mut StridingRq<'static>,
    inner: &mut RawCounters,
    n: u64,
) -> u64 {
    let mut acc = 0u64;
    let mut left = n;
    while left > 0 {
        let max = left.min(POLL_BATCH as u64) as usize;
        let mut wqs = StridingWorkQueues::new(rq, inner);
        let got = match cq.poll(&mut wqs, max, |c| {
            let wqe = u64::from(c.wqe_id().unwrap_or(0)) & u64::from(MPRQ_WQES - 1);
            let stride = u64::from(c.stride_index().unwrap_or(0));
            let addr = MPRQ_BASE
                + (wqe << (MPRQ_LOG_STRIDES + MPRQ_LOG_STRIDE_BYTES))
                + (stride << MPRQ_LOG_STRIDE_BYTES);
            acc = acc.wrapping_add(addr + u64::from(c.packet_len()));
        }) {
            Ok(0) => poll_failed(None),
            Ok(got) => got,
            Err(e) => poll_failed(Some(e)),
        };
        rq.commit();
        left -= got as u64;
    }
    acc
}

/// Polls `n` striding-RQ packets with `Cq::poll_strided`, at most 32 per
/// call (the same accounting and re-posting as `measured_cq_mprq_poll32`,
/// each packet's address and length handed out in a `StridedPacket`); then
/// `rq.commit()`. Returns the sum of the packets' addresses and lengths.
#[inline(never)]
pub fn measured_cq_mprq_strided32(cq: &mut Cq, rq: &mut StridingRq<'static>, n: u64) -> u64 {
    let mut out = [StridedPacket::default(); POLL_BATCH];
    let mut acc = 0u64;
    let mut left = n;
    while left > 0 {
        let max = left.min(POLL_BATCH as u64) as usize;
        let got = match cq.poll_strided(rq, &mut out[..max]) {
            Ok(0) => poll_failed(None),
            Ok(got) => got,
            Err(e) => poll_failed(Some(e)),
        };
        for p in &out[..got] {
            acc = acc.wrapping_add(p.addr + u64::from(p.len));
        }
        rq.commit();
        left -= got as u64;
    }
    acc
}

/// Polling a striding RQ's CQ that the device model keeps full
/// (`cq/mprq_*`), with `Cq::poll` (`strided` false) or `Cq::poll_strided`.
struct MprqScenario {
    name: &'static str,
    strided: bool,
    cq: Cq,
    dev: CqDevice,
    rq: StridingRq<'static>,
    inner: RawCounters,
    consumed: u64,
    sink: u64,
}

impl Scenario for MprqScenario {
    fn name(&self) -> &'static str {
        self.name
    }
    fn symbol(&self) -> &'static str {
        if self.strided {
            "*measured_cq_mprq_strided32*"
        } else {
            "*measured_cq_mprq_poll32*"
        }
    }
    fn unit(&self) -> &'static str {
        "packet"
    }
    fn prepare(&mut self) -> u64 {
        self.dev.fill(self.cq.consumer_index()) - self.consumed
    }
    fn measured(&mut self, n: u64) {
        let acc = if self.strided {
            measured_cq_mprq_strided32(&mut self.cq, &mut self.rq, n)
        } else {
            measured_cq_mprq_poll32(&mut self.cq, &mut self.rq, &mut self.inner, n)
        };
        self.sink = self.sink.wrapping_add(acc);
        self.consumed += n;
    }
}

/// A `cq/mprq_*` scenario: the CQ of `stream` (`Stream::Mprq` or
/// `Stream::MprqEnhanced`) and a striding RQ of [`MPRQ_WQES`] WQEs, all
/// posted and published, polled by `Cq::poll_strided` if `strided`, else
/// by `Cq::poll`.
fn mprq_scenario(
    name: &'static str,
    stream: Stream,
    unzip: UnzipPath,
    strided: bool,
) -> Box<dyn Scenario> {
    let (cq, dev) = leak_cq(stream, unzip);
    // 32-byte WQEs (`MprqWqe`).
    let bytes = MPRQ_WQES as usize * 32;
    let ring = leak_raw(vec![0u128; bytes / 16]).cast::<u8>();
    let dbrec = leak_raw(vec![0u32; 2]);
    let slots: &'static mut [MprqSlot] =
        Box::leak(vec![MprqSlot::EMPTY; MPRQ_WQES as usize].into_boxed_slice());
    // SAFETY: `ring` is `bytes` leaked bytes (live for the rest of the
    // process), a power of two, touched only by this queue.
    let ring = unsafe { RingBuf::new(ring, bytes) }.expect("ring");
    // SAFETY: `dbrec` is a leaked, aligned `[u32; 2]`; its first word is
    // the RQ doorbell record, written only by this queue.
    let dbrec = unsafe { DeviceWord::from_ptr(dbrec) };
    let params = StridingParams {
        log_num_strides: MPRQ_LOG_STRIDES,
        log_stride_bytes: MPRQ_LOG_STRIDE_BYTES,
    };
    let size = RingSize::new(MPRQ_WQES).expect("size");
    let mut rq = StridingRq::new(ring, size, params, dbrec, slots).expect("striding rq");
    for i in 0..MPRQ_WQES {
        let addr = MPRQ_BASE + (u64::from(i) << (MPRQ_LOG_STRIDES + MPRQ_LOG_STRIDE_BYTES));
        rq.post(u64::from(i), addr, 0x4321).expect("post");
    }
    rq.commit();
    Box::new(MprqScenario {
        name,
        strided,
        cq,
        dev,
        rq,
        inner: RawCounters::default(),
        consumed: 0,
        sink: 0,
    })
}

/// Which measured poll function a [`PollScenario`] calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Api {
    Poll,
    /// `Cq::poll_wc` into an array of 32 `Wc` (the `ibv_poll_cq` analogue).
    PollWc,
    StartPoll,
    Burst,
    /// `poll_burst` with at most [`LONG_BATCH`] per call.
    Burst256,
}

/// Polling a CQ that the device model keeps full.
struct PollScenario {
    name: &'static str,
    symbol: &'static str,
    api: Api,
    cq: Cq,
    dev: CqDevice,
    wqs: RawCounters,
    consumed: u64,
    sink: u64,
    /// The burst's array ([`Api::Burst256`]).
    out: Box<[CompletionSummary; LONG_BATCH]>,
}

impl Scenario for PollScenario {
    fn name(&self) -> &'static str {
        self.name
    }
    fn symbol(&self) -> &'static str {
        self.symbol
    }
    fn unit(&self) -> &'static str {
        "completion"
    }
    fn prepare(&mut self) -> u64 {
        self.dev.fill(self.cq.consumer_index()) - self.consumed
    }
    fn measured(&mut self, n: u64) {
        let acc = match self.api {
            Api::Poll => measured_cq_poll32(&mut self.cq, &mut self.wqs, n),
            Api::PollWc => measured_cq_poll_wc32(&mut self.cq, &mut self.wqs, n),
            Api::StartPoll => measured_cq_start_poll32(&mut self.cq, &mut self.wqs, n),
            Api::Burst => measured_cq_poll_burst32(&mut self.cq, &mut self.wqs, n),
            Api::Burst256 => {
                measured_cq_poll_burst256(&mut self.cq, &mut self.wqs, &mut self.out, n)
            }
        };
        self.sink = self.sink.wrapping_add(acc);
        self.consumed += n;
    }
}

fn poll_scenario(
    name: &'static str,
    symbol: &'static str,
    api: Api,
    stream: Stream,
) -> Box<dyn Scenario> {
    poll_scenario_with(name, symbol, api, stream, UnzipPath::compile_time())
}

fn poll_scenario_with(
    name: &'static str,
    symbol: &'static str,
    api: Api,
    stream: Stream,
    unzip: UnzipPath,
) -> Box<dyn Scenario> {
    let (cq, dev) = leak_cq(stream, unzip);
    Box::new(PollScenario {
        name,
        symbol,
        api,
        cq,
        dev,
        wqs: RawCounters::default(),
        consumed: 0,
        sink: 0,
        out: Box::new([CompletionSummary::default(); LONG_BATCH]),
    })
}

/// The work queues of the `*_sq` and `*_rq` scenarios: one RC QP, found
/// by its QPN, each completion retired through its send queue's shadow or
/// its receive queue's wr_ids (the work libmlx5's `mlx5_poll_cq` does
/// with its resource table, `sq.wrid[]` and `rq.wrid[]`).
pub struct OneQp {
    qpn: u32,
    sq: SendQueue<'static, DoorbellOnly, RcQp>,
    rq: Rq<'static>,
}

impl WorkQueues for OneQp {
    fn retire_send(
        &mut self,
        wq: WqRef,
        wqe_counter: u16,
        _: WcStatus,
    ) -> Result<SendRetired, LookupError> {
        if wq.qpn != self.qpn {
            return Err(LookupError::UnknownQueue);
        }
        let r = self
            .sq
            .retire(wqe_counter)
            .map_err(|_| LookupError::NotInFlight)?;
        Ok(SendRetired {
            wr_id: r.wr_id,
            wr_opcode: None,
        })
    }

    fn retire_recv(
        &mut self,
        wq: WqRef,
        wqe_counter: u16,
        status: WcStatus,
    ) -> Result<RecvRetired, LookupError> {
        if wq.qpn != self.qpn {
            return Err(LookupError::UnknownQueue);
        }
        let wr_id = self.rq.retire(wqe_counter, status != WcStatus::Success)?;
        Ok(RecvRetired {
            wr_id,
            rx_csum_valid: false,
        })
    }
}

/// Polling completions of work requests posted on a real QP: untimed,
/// `prepare` posts signalled RDMA WRITEs (`*_sq`) or receives of one SGE
/// (`*_rq`; wr_id = a running count) and writes one CQE per WQE (REQ, or
/// RESP_SEND with a byte count), with its `wqe_counter` and the QP's
/// number; timed, the poll resolves each through [`OneQp`].
struct ShadowScenario {
    name: &'static str,
    symbol: &'static str,
    api: Api,
    recv: bool,
    cq: Cq,
    dev: CqDevice,
    wqs: OneQp,
    posted: u64,
    consumed: u64,
    sink: u64,
}

impl Scenario for ShadowScenario {
    fn name(&self) -> &'static str {
        self.name
    }
    fn symbol(&self) -> &'static str {
        self.symbol
    }
    fn unit(&self) -> &'static str {
        "completion"
    }
    fn prepare(&mut self) -> u64 {
        let ci = self.cq.consumer_index();
        loop {
            let room = if self.recv {
                self.wqs.rq.outstanding() < rq::RQ_WQE_CNT
            } else {
                self.wqs.sq.free_wqebbs() > 0
            };
            if !room || self.dev.pi.wrapping_sub(ci) >= CQE_CNT {
                break;
            }
            let p = self.dev.pi;
            let mut c = if self.recv {
                let index = self.wqs.rq.head() as u16;
                if let Err(e) = self.wqs.rq.post(self.posted, &[rq::recv_sge(self.posted)]) {
                    panic!("receive post failed: {e:?}");
                }
                self.wqs.rq.commit();
                let mut c = self.dev.title(p, CqeOpcode::RespSend, 0);
                c.wqe_counter = Be16::new(index);
                c.byte_cnt = Be32::new(64 + (self.posted & 0x3ff) as u32);
                c
            } else {
                let index = self.wqs.sq.producer() as u16;
                let off = (self.posted & 0xff) * 64;
                let sge = Sge::new(sq::LKEY, 0x2_0000_1000 + off, 64);
                if let Err(e) = self.wqs.sq.post_rdma_write(
                    self.posted,
                    0x00ab_cd01,
                    0x7f12_3456_0000 + off,
                    sge,
                    SendFlags::SIGNALED,
                ) {
                    panic!("post failed: {e:?}");
                }
                let mut c = self.dev.title(p, CqeOpcode::Req, 0);
                c.wqe_counter = Be16::new(index);
                c.byte_cnt = Be32::new(0);
                c
            };
            self.posted += 1;
            c.sop_drop_qpn = SopDropQpn::new().with_qpn(self.wqs.qpn);
            self.dev.put(p, zerocopy::transmute_ref!(&c));
            self.dev.pi = p.wrapping_add(1);
        }
        self.posted - self.consumed
    }
    fn measured(&mut self, n: u64) {
        let acc = match self.api {
            Api::Poll => measured_cq_poll32(&mut self.cq, &mut self.wqs, n),
            Api::PollWc => measured_cq_poll_wc32(&mut self.cq, &mut self.wqs, n),
            Api::StartPoll => measured_cq_start_poll32(&mut self.cq, &mut self.wqs, n),
            Api::Burst | Api::Burst256 => measured_cq_poll_burst32(&mut self.cq, &mut self.wqs, n),
        };
        self.sink = self.sink.wrapping_add(acc);
        self.consumed += n;
    }
}

fn shadow_scenario(
    name: &'static str,
    symbol: &'static str,
    api: Api,
    recv: bool,
) -> Box<dyn Scenario> {
    let (cq, dev) = leak_cq(Stream::Uncompressed, UnzipPath::compile_time());
    let sq = sq::leak_queue(SqConfig::new(QpType::Rc, sq::QPN, 64, 4));
    Box::new(ShadowScenario {
        name,
        symbol,
        api,
        recv,
        cq,
        dev,
        wqs: OneQp {
            qpn: sq::QPN,
            sq,
            rq: rq::leak_rq(),
        },
        posted: 0,
        consumed: 0,
        sink: 0,
    })
}

/// `zip::expand_session` on one session of `minis.len()` HASH minis.
struct ExpandScenario {
    name: &'static str,
    title: Cqe64,
    minis: Vec<MiniCqe>,
    out: Vec<Cqe64>,
}

impl Scenario for ExpandScenario {
    fn name(&self) -> &'static str {
        self.name
    }
    fn symbol(&self) -> &'static str {
        "*measured_expand_session*"
    }
    fn unit(&self) -> &'static str {
        "mini"
    }
    fn granule(&self) -> u64 {
        self.minis.len() as u64
    }
    fn prepare(&mut self) -> u64 {
        // Any number of sessions: nothing to refill.
        self.minis.len() as u64 * 1024
    }
    fn measured(&mut self, n: u64) {
        let view = MiniView {
            format: MiniCqeFormat::Hash,
            striding: false,
        };
        let times = n / self.minis.len() as u64;
        core::hint::black_box(measured_expand_session(
            &self.title,
            &self.minis,
            view,
            &mut self.out,
            times,
        ));
    }
}

fn expand_scenario(name: &'static str, n: u32) -> Box<dyn Scenario> {
    let dev = CqDevice {
        ring: core::ptr::null_mut(),
        size: RingSize::new(CQE_CNT).expect("size"),
        stream: Stream::Basic(n),
        pi: 0,
        produced: 0,
    };
    let mut title = dev.title(0, CqeOpcode::RespSend, 3);
    title.byte_cnt = Be32::new(n);
    Box::new(ExpandScenario {
        name,
        title,
        minis: (0..n).map(CqDevice::hash_mini).collect(),
        out: vec![Cqe64::default(); n as usize],
    })
}

/// Decodes one session of minis with `path` the way `Cq` does: mini array
/// by mini array (eight minis per array in the basic layout, seven per
/// compressed CQE in the enhanced one) into a [`MiniBatch`], chaining the
/// running counter; `times` times. Only the decode: no ring, no poll.
#[inline(never)]
pub fn measured_unzip_session(
    path: UnzipPath,
    unzip: Unzip,
    arrays: &[[MiniCqe; MINI_CQE_ARRAY_SIZE]],
    lens: &[usize],
    batch: &mut MiniBatch,
    times: u64,
) -> u16 {
    let mut running = 0u16;
    for _ in 0..times {
        for (array, &n) in arrays.iter().zip(lens) {
            running = path.decode_count(unzip, array, n, running, batch);
            core::hint::black_box(&mut *batch);
        }
    }
    running
}

/// Every decoder path this CPU runs, with its short name.
pub fn unzip_paths() -> Vec<UnzipPath> {
    #[cfg_attr(
        not(any(target_arch = "x86_64", target_arch = "aarch64")),
        expect(unused_mut, reason = "no vector path on this target")
    )]
    let mut paths = vec![UnzipPath::Scalar];
    #[cfg(target_arch = "x86_64")]
    {
        use mlx5dp::cq::zip_x86::{Avx2, Sse41};
        if std::is_x86_feature_detected!("sse4.1") {
            // SAFETY: detected just above.
            paths.push(UnzipPath::Sse41(unsafe { Sse41::new_unchecked() }));
        }
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: detected just above.
            paths.push(UnzipPath::Avx2(unsafe { Avx2::new_unchecked() }));
        }
    }
    #[cfg(target_arch = "aarch64")]
    if let Some(t) = mlx5dp::cq::zip_neon::Neon::compile_time() {
        paths.push(UnzipPath::Neon(t));
    }
    paths
}

/// The best decoder path this CPU runs (the last of [`unzip_paths`]).
pub fn best_unzip() -> UnzipPath {
    unzip_paths().pop().unwrap_or_else(UnzipPath::compile_time)
}

/// `measured_unzip_session`: one session of HASH minis, one layout, one
/// decoder path.
struct UnzipScenario {
    name: &'static str,
    path: UnzipPath,
    unzip: Unzip,
    arrays: Vec<[MiniCqe; MINI_CQE_ARRAY_SIZE]>,
    lens: Vec<usize>,
    minis: u64,
    batch: MiniBatch,
}

impl Scenario for UnzipScenario {
    fn name(&self) -> &'static str {
        self.name
    }
    fn symbol(&self) -> &'static str {
        "*measured_unzip_session*"
    }
    fn unit(&self) -> &'static str {
        "mini"
    }
    fn granule(&self) -> u64 {
        self.minis
    }
    fn prepare(&mut self) -> u64 {
        self.minis * 1024
    }
    fn measured(&mut self, n: u64) {
        core::hint::black_box(measured_unzip_session(
            self.path,
            self.unzip,
            &self.arrays,
            &self.lens,
            &mut self.batch,
            n / self.minis,
        ));
    }
}

/// A session of `n` HASH minis in `layout` decoded with `path`; `None`
/// if this CPU cannot run the path named `want`.
fn unzip_scenario(
    name: &'static str,
    want: &str,
    layout: Layout,
    n: u32,
) -> Option<Box<dyn Scenario>> {
    let path = unzip_paths().into_iter().find(|p| p.name() == want)?;
    let per = match layout {
        Layout::Basic => MINI_CQE_ARRAY_SIZE,
        Layout::Enhanced => ENHANCED_MAX_MINIS,
    };
    let minis: Vec<MiniCqe> = (0..n).map(CqDevice::hash_mini).collect();
    let mut arrays = Vec::new();
    let mut lens = Vec::new();
    for chunk in minis.chunks(per) {
        let mut array = [MiniCqe::default(); MINI_CQE_ARRAY_SIZE];
        array[..chunk.len()].copy_from_slice(chunk);
        arrays.push(array);
        lens.push(chunk.len());
    }
    let dev = CqDevice {
        ring: core::ptr::null_mut(),
        size: RingSize::new(CQE_CNT).expect("size"),
        stream: Stream::Basic(n),
        pi: 0,
        produced: 0,
    };
    let title = dev.title(0, CqeOpcode::RespSend, 3);
    let view = MiniView {
        format: MiniCqeFormat::Hash,
        striding: false,
    };
    Some(Box::new(UnzipScenario {
        name,
        path,
        unzip: Unzip::new(&title, view),
        arrays,
        lens,
        minis: u64::from(n),
        batch: MiniBatch::new(&title),
    }))
}

/// The decoder scenarios: sessions of 8, 64 and max minis, both layouts,
/// every path (those this CPU cannot run are left out).
fn unzip_scenarios() -> Vec<Box<dyn Scenario>> {
    let max = CQE_CNT;
    [
        ("cq/unzip_basic8_scalar", "scalar", Layout::Basic, 8),
        ("cq/unzip_basic64_scalar", "scalar", Layout::Basic, 64),
        ("cq/unzip_basic_max_scalar", "scalar", Layout::Basic, max),
        ("cq/unzip_enhanced8_scalar", "scalar", Layout::Enhanced, 8),
        ("cq/unzip_enhanced64_scalar", "scalar", Layout::Enhanced, 64),
        (
            "cq/unzip_enhanced_max_scalar",
            "scalar",
            Layout::Enhanced,
            max - 1,
        ),
        ("cq/unzip_basic8_sse41", "sse4.1", Layout::Basic, 8),
        ("cq/unzip_basic64_sse41", "sse4.1", Layout::Basic, 64),
        ("cq/unzip_basic_max_sse41", "sse4.1", Layout::Basic, max),
        ("cq/unzip_enhanced8_sse41", "sse4.1", Layout::Enhanced, 8),
        ("cq/unzip_enhanced64_sse41", "sse4.1", Layout::Enhanced, 64),
        (
            "cq/unzip_enhanced_max_sse41",
            "sse4.1",
            Layout::Enhanced,
            max - 1,
        ),
        ("cq/unzip_basic8_avx2", "avx2", Layout::Basic, 8),
        ("cq/unzip_basic64_avx2", "avx2", Layout::Basic, 64),
        ("cq/unzip_basic_max_avx2", "avx2", Layout::Basic, max),
        ("cq/unzip_enhanced8_avx2", "avx2", Layout::Enhanced, 8),
        ("cq/unzip_enhanced64_avx2", "avx2", Layout::Enhanced, 64),
        (
            "cq/unzip_enhanced_max_avx2",
            "avx2",
            Layout::Enhanced,
            max - 1,
        ),
        ("cq/unzip_basic8_neon", "neon", Layout::Basic, 8),
        ("cq/unzip_basic64_neon", "neon", Layout::Basic, 64),
        ("cq/unzip_basic_max_neon", "neon", Layout::Basic, max),
        ("cq/unzip_enhanced8_neon", "neon", Layout::Enhanced, 8),
        ("cq/unzip_enhanced64_neon", "neon", Layout::Enhanced, 64),
        (
            "cq/unzip_enhanced_max_neon",
            "neon",
            Layout::Enhanced,
            max - 1,
        ),
    ]
    .into_iter()
    .filter_map(|(name, path, layout, n)| unzip_scenario(name, path, layout, n))
    .collect()
}

/// Every completion-queue scenario.
pub fn all() -> Vec<Box<dyn Scenario>> {
    let max_basic = CQE_CNT;
    let max_enhanced = CQE_CNT - 1;
    let mut v = vec![
        poll_scenario(
            "cq/poll32_uncompressed",
            "*measured_cq_poll32*",
            Api::Poll,
            Stream::Uncompressed,
        ),
        poll_scenario(
            "cq/poll_wc32_uncompressed",
            "*measured_cq_poll_wc32*",
            Api::PollWc,
            Stream::Uncompressed,
        ),
        poll_scenario(
            "cq/start_poll32_uncompressed",
            "*measured_cq_start_poll32*",
            Api::StartPoll,
            Stream::Uncompressed,
        ),
        poll_scenario(
            "cq/poll32_basic8",
            "*measured_cq_poll32*",
            Api::Poll,
            Stream::Basic(8),
        ),
        poll_scenario(
            "cq/poll32_basic64",
            "*measured_cq_poll32*",
            Api::Poll,
            Stream::Basic(64),
        ),
        poll_scenario(
            "cq/poll32_basic_max",
            "*measured_cq_poll32*",
            Api::Poll,
            Stream::Basic(max_basic),
        ),
        poll_scenario(
            "cq/poll32_enhanced8",
            "*measured_cq_poll32*",
            Api::Poll,
            Stream::Enhanced(8),
        ),
        poll_scenario(
            "cq/poll32_enhanced64",
            "*measured_cq_poll32*",
            Api::Poll,
            Stream::Enhanced(64),
        ),
        poll_scenario(
            "cq/poll32_enhanced_max",
            "*measured_cq_poll32*",
            Api::Poll,
            Stream::Enhanced(max_enhanced),
        ),
        shadow_scenario("cq/poll32_sq", "*measured_cq_poll32*", Api::Poll, false),
        shadow_scenario(
            "cq/poll_wc32_sq",
            "*measured_cq_poll_wc32*",
            Api::PollWc,
            false,
        ),
        shadow_scenario(
            "cq/start_poll32_sq",
            "*measured_cq_start_poll32*",
            Api::StartPoll,
            false,
        ),
        shadow_scenario(
            "cq/burst32_sq",
            "*measured_cq_poll_burst32*",
            Api::Burst,
            false,
        ),
        shadow_scenario("cq/poll32_rq", "*measured_cq_poll32*", Api::Poll, true),
        shadow_scenario(
            "cq/poll_wc32_rq",
            "*measured_cq_poll_wc32*",
            Api::PollWc,
            true,
        ),
        shadow_scenario(
            "cq/start_poll32_rq",
            "*measured_cq_start_poll32*",
            Api::StartPoll,
            true,
        ),
        shadow_scenario(
            "cq/burst32_rq",
            "*measured_cq_poll_burst32*",
            Api::Burst,
            true,
        ),
        expand_scenario("cq/expand_session8", 8),
        expand_scenario("cq/expand_session64", 64),
        expand_scenario("cq/expand_session_max", max_basic),
    ];
    // The same streams through `poll_burst`, and the compressed ones with
    // the best decoder this CPU runs (the ones above use the compile-time
    // default: scalar for the baseline x86-64 target).
    let burst = "*measured_cq_poll_burst32*";
    let poll = "*measured_cq_poll32*";
    let best = best_unzip();
    v.extend([
        poll_scenario(
            "cq/burst32_uncompressed",
            burst,
            Api::Burst,
            Stream::Uncompressed,
        ),
        poll_scenario_with(
            "cq/burst32_basic64_best",
            burst,
            Api::Burst,
            Stream::Basic(64),
            best,
        ),
        poll_scenario_with(
            "cq/burst32_enhanced64_best",
            burst,
            Api::Burst,
            Stream::Enhanced(64),
            best,
        ),
        poll_scenario_with(
            "cq/burst32_basic8_best",
            burst,
            Api::Burst,
            Stream::Basic(8),
            best,
        ),
        poll_scenario_with(
            "cq/burst32_basic_max_best",
            burst,
            Api::Burst,
            Stream::Basic(max_basic),
            best,
        ),
        poll_scenario_with(
            "cq/burst32_enhanced8_best",
            burst,
            Api::Burst,
            Stream::Enhanced(8),
            best,
        ),
        poll_scenario_with(
            "cq/burst32_enhanced_max_best",
            burst,
            Api::Burst,
            Stream::Enhanced(max_enhanced),
            best,
        ),
        poll_scenario_with(
            "cq/burst32_basic64_scalar",
            burst,
            Api::Burst,
            Stream::Basic(64),
            UnzipPath::Scalar,
        ),
        poll_scenario_with(
            "cq/burst32_enhanced64_scalar",
            burst,
            Api::Burst,
            Stream::Enhanced(64),
            UnzipPath::Scalar,
        ),
    ]);
    // The same bursts with room for 256 completions per call (DPDK PMDs
    // poll 32 to 64; a drain loop may ask for more).
    let long = "*measured_cq_poll_burst256*";
    v.extend([
        poll_scenario(
            "cq/burst256_uncompressed",
            long,
            Api::Burst256,
            Stream::Uncompressed,
        ),
        poll_scenario_with(
            "cq/burst256_basic8_best",
            long,
            Api::Burst256,
            Stream::Basic(8),
            best,
        ),
        poll_scenario_with(
            "cq/burst256_basic64_best",
            long,
            Api::Burst256,
            Stream::Basic(64),
            best,
        ),
        poll_scenario_with(
            "cq/burst256_basic_max_best",
            long,
            Api::Burst256,
            Stream::Basic(max_basic),
            best,
        ),
        poll_scenario_with(
            "cq/burst256_enhanced8_best",
            long,
            Api::Burst256,
            Stream::Enhanced(8),
            best,
        ),
        poll_scenario_with(
            "cq/burst256_enhanced64_best",
            long,
            Api::Burst256,
            Stream::Enhanced(64),
            best,
        ),
        poll_scenario_with(
            "cq/burst256_enhanced_max_best",
            long,
            Api::Burst256,
            Stream::Enhanced(max_enhanced),
            best,
        ),
        poll_scenario_with(
            "cq/burst256_basic64_scalar",
            long,
            Api::Burst256,
            Stream::Basic(64),
            UnzipPath::Scalar,
        ),
        poll_scenario_with(
            "cq/burst256_enhanced64_scalar",
            long,
            Api::Burst256,
            Stream::Enhanced(64),
            UnzipPath::Scalar,
        ),
    ]);
    v.extend([
        poll_scenario_with(
            "cq/poll32_basic8_best",
            poll,
            Api::Poll,
            Stream::Basic(8),
            best,
        ),
        poll_scenario_with(
            "cq/poll32_basic64_best",
            poll,
            Api::Poll,
            Stream::Basic(64),
            best,
        ),
        poll_scenario_with(
            "cq/poll32_basic_max_best",
            poll,
            Api::Poll,
            Stream::Basic(max_basic),
            best,
        ),
        poll_scenario_with(
            "cq/poll32_enhanced8_best",
            poll,
            Api::Poll,
            Stream::Enhanced(8),
            best,
        ),
        poll_scenario_with(
            "cq/poll32_enhanced64_best",
            poll,
            Api::Poll,
            Stream::Enhanced(64),
            best,
        ),
        poll_scenario_with(
            "cq/poll32_enhanced_max_best",
            poll,
            Api::Poll,
            Stream::Enhanced(max_enhanced),
            best,
        ),
    ]);
    v.extend([
        mprq_scenario(
            "cq/mprq_poll32_uncompressed",
            Stream::Mprq(0),
            UnzipPath::Scalar,
            false,
        ),
        mprq_scenario(
            "cq/mprq_poll32_csum_stridx8_best",
            Stream::Mprq(8),
            best,
            false,
        ),
        mprq_scenario(
            "cq/mprq_poll32_csum_stridx64_best",
            Stream::Mprq(64),
            best,
            false,
        ),
        mprq_scenario(
            "cq/mprq_poll32_csum_stridx64_scalar",
            Stream::Mprq(64),
            UnzipPath::Scalar,
            false,
        ),
        // (`poll_strided` decodes stride minis itself: no decoder path.)
        mprq_scenario(
            "cq/mprq_strided32_uncompressed",
            Stream::Mprq(0),
            UnzipPath::Scalar,
            true,
        ),
        mprq_scenario(
            "cq/mprq_strided32_csum_stridx8",
            Stream::Mprq(8),
            best,
            true,
        ),
        mprq_scenario(
            "cq/mprq_strided32_csum_stridx64",
            Stream::Mprq(64),
            best,
            true,
        ),
        mprq_scenario(
            "cq/mprq_poll32_enhanced_csum_stridx8_best",
            Stream::MprqEnhanced(7),
            best,
            false,
        ),
        mprq_scenario(
            "cq/mprq_strided32_enhanced_csum_stridx8",
            Stream::MprqEnhanced(7),
            best,
            true,
        ),
        mprq_scenario(
            "cq/mprq_poll32_enhanced_csum_stridx64_best",
            Stream::MprqEnhanced(63),
            best,
            false,
        ),
        mprq_scenario(
            "cq/mprq_strided32_enhanced_csum_stridx64",
            Stream::MprqEnhanced(63),
            best,
            true,
        ),
    ]);
    v.extend(unzip_scenarios());
    v
}
