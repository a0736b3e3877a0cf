//! Completion-queue scenarios: polling uncompressed 64-byte CQEs in batches
//! of 32, polling compressed sessions (basic and enhanced layouts) through
//! the same `Cq::poll`, and the scalar session expansion alone
//! (`zip::expand_session`).
//!
//! Measured per completion: `Cq::poll` (or `start_poll`/`next_poll`/
//! `end_poll`) with at most 32 completions per call, each resolved through
//! [`RawCounters`] (the shadow-free `WorkQueues`: wr_id = `wqe_counter`, no
//! per-queue lookup) and handed to a closure that sums the wr_ids; the
//! consumer-index doorbell record write once per call. Not measured: the
//! device model writing CQEs ahead of the consumer ([`CqDevice`]).
//!
//! The CQE ring has 512 slots of 64 bytes (32 KiB): it stays in L1 (the
//! device model wrote it last), where a real CQE written by DMA would be a
//! cache miss (or an LLC hit with DDIO). The figures are the CPU cost of
//! the poll code, not of the memory traffic.

use core::ptr::NonNull;

use mlx5dp::cq::zip::{self, MiniView};
use mlx5dp::cq::{Cq, CqConfig, CqParts, CqeSize, Layout, PollError, RawCounters};
use mlx5dp::index::RingSize;
use mlx5dp::prm::{
    Be16, Be32, Cqe64, CqeOpcode, EnhancedCompressedCqe, MiniCqe, MiniCqeFormat, OpOwn, SopDropQpn,
    CQE_OP_OWN_INIT, CQE_VIC_INIT, ENHANCED_MAX_MINIS, MINI_CQE_ARRAY_SIZE,
};

use crate::{leak_raw, Scenario};

/// CQEs in every benchmark CQ.
pub const CQE_CNT: u32 = 512;
/// Completions per poll call.
pub const POLL_BATCH: usize = 32;

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
}

impl Stream {
    /// Slots one item of the stream occupies.
    fn slots(self) -> u32 {
        match self {
            Stream::Uncompressed => 1,
            Stream::Basic(n) => n,
            Stream::Enhanced(n) => 1 + n,
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

/// A CQ over a leaked ring and doorbell record (no UAR: never armed), and
/// its device model.
fn leak_cq(stream: Stream) -> (Cq, CqDevice) {
    let n = CQE_CNT as usize;
    let enhanced = matches!(stream, Stream::Enhanced(_));
    let mut bytes = vec![0u8; n * 64];
    for slot in bytes.chunks_exact_mut(64) {
        slot[63] = CQE_OP_OWN_INIT;
        if enhanced {
            slot[62] = CQE_VIC_INIT;
        }
    }
    let ring = leak_raw(bytes);
    let dbrec = leak_raw(vec![0u32; 2]);
    let compression = match stream {
        Stream::Uncompressed => None,
        Stream::Basic(_) => Some((Layout::Basic, MiniCqeFormat::Hash)),
        Stream::Enhanced(_) => Some((Layout::Enhanced, MiniCqeFormat::Hash)),
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
pub fn measured_cq_poll32(cq: &mut Cq, wqs: &mut RawCounters, n: u64) -> u64 {
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

/// Polls `n` completions with `start_poll`, `next_poll` and `end_poll`, at
/// most 32 per batch; returns the sum of their wr_ids.
#[inline(never)]
pub fn measured_cq_start_poll32(cq: &mut Cq, wqs: &mut RawCounters, n: u64) -> u64 {
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

/// Which measured poll function a [`PollScenario`] calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Api {
    Poll,
    StartPoll,
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
            Api::StartPoll => measured_cq_start_poll32(&mut self.cq, &mut self.wqs, n),
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
    let (cq, dev) = leak_cq(stream);
    Box::new(PollScenario {
        name,
        symbol,
        api,
        cq,
        dev,
        wqs: RawCounters::default(),
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

/// Every completion-queue scenario.
pub fn all() -> Vec<Box<dyn Scenario>> {
    let max_basic = CQE_CNT;
    let max_enhanced = CQE_CNT - 1;
    vec![
        poll_scenario(
            "cq/poll32_uncompressed",
            "*measured_cq_poll32*",
            Api::Poll,
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
        expand_scenario("cq/expand_session8", 8),
        expand_scenario("cq/expand_session64", 64),
        expand_scenario("cq/expand_session_max", max_basic),
    ]
}
