//! The core's `Cq` over an arbitrary ring in ordinary memory: polled until
//! empty or error through every polling API, it must never panic, never
//! read or write outside the ring, doorbell record and UAR page (the
//! address sanitizer watches), and must terminate. Polled once more with
//! the scalar mini decoder and once with the best path this CPU runs, it
//! must report the same completions bit for bit. Polled with `poll` and
//! with `poll_burst` in the same (input-chosen) batch sizes, with each
//! decoder, every call must report the same summaries, result, consumer
//! index, doorbell record and broken state. On a striding RQ's CQ, polled
//! with `poll_strided` and with `poll` through `StridingWorkQueues` over
//! twin striding RQs (the WQE count, strides and the WQE being filled
//! chosen by byte 6, the consumer index's top byte, which only the
//! enhanced layout's iteration count of rings of 2^17 entries or more
//! would read), every call must report the same packets, result,
//! consumer index, doorbell record, CQ ring bytes and RQ state.
//!
//! Input: byte 0 = CQE size (bit 0), compression (bits 1–2: none, basic,
//! enhanced, enhanced), striding RQ (bit 3), polling API (bits 4–5: `poll`,
//! `poll_wc`, `start_poll`/`next_poll`, a mix), arm (bit 6), mini decoder
//! of the API run (bit 7: the scalar reference, else the best path); byte
//! 1 = log2 of the CQE count (bits 0–6, mod 9) and padding (bit 7: the
//! initial pattern, opcode INVALID and validity 0xff in every slot, else
//! zeros, which read as valid REQ CQEs); byte 2 = mini format (raw PRM
//! value, unknown ones included); bytes 3–6 = consumer index (byte 3 also
//! seeds the batch sizes of the `poll`/`poll_burst` comparison); the rest
//! = ring bytes from slot 0.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mlx5dp::cq::{
    CompletionSummary, Cq, CqConfig, CqParts, CqeSize, Layout, Origin, PollError, RawCounters,
    StridedPacket, UnzipPath, Wc,
};
use mlx5dp::index::RingSize;
use mlx5dp::mmio::DeviceWord;
use mlx5dp::prm::{Cqe64, MiniCqeFormat, WcStatus};
use mlx5dp::ring::RingBuf;
use mlx5dp::rq::{MprqSlot, NoOtherQueues, StridingParams, StridingRq, StridingWorkQueues};
use std::ptr::NonNull;

/// One 64-byte CQ slot, 64-byte aligned (`Cq::from_raw_parts` requires a
/// ring aligned to 64 bytes).
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([u8; 64]);

/// Ring, doorbell record and UAR page, held as raw pointers only.
struct Mem {
    ring: *mut [Line],
    dbrec: *mut [u32; 2],
    uar: *mut [u64; 512],
}

impl Mem {
    fn new(bytes: Vec<u8>) -> Self {
        // The ring's bytes in 64-byte aligned lines (its length is a
        // multiple of 64: CQE count times 64 or 128).
        let mut lines = vec![Line([0; 64]); bytes.len().div_ceil(64)];
        for (line, chunk) in lines.iter_mut().zip(bytes.chunks(64)) {
            line.0[..chunk.len()].copy_from_slice(chunk);
        }
        Self {
            ring: Box::into_raw(lines.into_boxed_slice()),
            dbrec: Box::into_raw(Box::new([0u32; 2])),
            uar: Box::into_raw(Box::new([0u64; 512])),
        }
    }

    /// Builds a CQ over this memory and runs `f` on it; the CQ is dropped
    /// before `f`'s result is returned, so it never outlives the memory.
    fn with_cq<R>(
        &mut self,
        cqe_cnt: u32,
        cqe_size: CqeSize,
        cfg: CqConfig,
        ci: u32,
        f: impl FnOnce(&mut Cq) -> R,
    ) -> R {
        assert_eq!(self.ring.len() * 64, cqe_cnt as usize * cqe_size.bytes());
        let parts = CqParts {
            buf: NonNull::new(self.ring.cast::<u8>()).expect("boxed slice"),
            cqe_cnt,
            cqe_size,
            dbrec: NonNull::new(self.dbrec.cast::<u32>()).expect("box"),
            uar: NonNull::new(self.uar.cast::<u8>()),
            cqn: 0x1234,
        };
        // SAFETY: the ring is exactly cqe_cnt * cqe_size bytes (asserted),
        // the record 8 aligned bytes, the UAR page 4 KiB, all owned by
        // `self` (borrowed mutably for the CQ's whole life) and freed only
        // in `Drop`; the CQ is a local of this function.
        let mut cq = unsafe { Cq::from_raw_parts(parts, cfg, ci) }.expect("valid parts");
        f(&mut cq)
    }
}

/// A doorbell record, readable while a CQ over it is alive.
#[derive(Clone, Copy)]
struct Rec(*mut [u32; 2]);

impl Rec {
    fn get(self) -> [u32; 2] {
        // SAFETY: from `Mem::rec`: the record lives as long as its `Mem`,
        // which outlives the CQs built over it in `compare_burst`; read
        // between CQ calls, never during one.
        unsafe { self.0.read() }
    }
}

impl Mem {
    fn rec(&self) -> Rec {
        Rec(self.dbrec)
    }
}

impl Drop for Mem {
    fn drop(&mut self) {
        // SAFETY: each pointer came from Box::into_raw in `new`, no CQ over
        // them is alive (`with_cq` drops its CQ), freed once.
        unsafe {
            drop(Box::from_raw(self.ring));
            drop(Box::from_raw(self.dbrec));
            drop(Box::from_raw(self.uar));
        }
    }
}

/// The best mini decoder this CPU runs.
fn best_path() -> UnzipPath {
    #[cfg(target_arch = "x86_64")]
    {
        use mlx5dp::cq::zip_x86::{Avx2, Sse41};
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: AVX2 detected just above.
            return UnzipPath::Avx2(unsafe { Avx2::new_unchecked() });
        }
        if std::is_x86_feature_detected!("sse4.1") {
            // SAFETY: SSE4.1 detected just above.
            return UnzipPath::Sse41(unsafe { Sse41::new_unchecked() });
        }
    }
    UnzipPath::compile_time()
}

/// A static ring cannot yield unboundedly many completions: each slot is
/// owned for one pass parity (basic) or one iteration count in 256
/// (enhanced), and a session stands for at most one ring of indices.
fn bound(cqe_cnt: u32) -> usize {
    16 * cqe_cnt as usize + 64
}

/// Everything a poll reported, for comparing two decoders.
#[derive(Debug, PartialEq)]
struct Trace {
    completions: Vec<(Cqe64, Origin, u64, [u8; 64])>,
    error: Option<PollError>,
    ci: u32,
}

fn trace(cq: &mut Cq, cqe_cnt: u32) -> Trace {
    let mut wqs = RawCounters::default();
    let mut completions = Vec::new();
    let error = cq
        .poll(&mut wqs, bound(cqe_cnt) + 1, |c| {
            let mut inline = [0u8; 64];
            if let Some(d) = c.inline_data() {
                inline[..d.len()].copy_from_slice(d);
            }
            completions.push((*c.cqe(), c.origin(), c.wr_id(), inline));
        })
        .err();
    assert!(
        completions.len() <= bound(cqe_cnt),
        "poller did not terminate"
    );
    Trace {
        completions,
        error,
        ci: cq.consumer_index(),
    }
}

/// What a CQ is built with.
#[derive(Clone, Copy)]
struct Setup {
    cqe_cnt: u32,
    cqe_size: CqeSize,
    cfg: CqConfig,
    ci: u32,
}

/// Batch sizes of the `poll` / `poll_burst` comparison: short ones (a
/// session's minis carried from one call to the next) and up to 64 (whole
/// arrays and blocks), in an order `seed` picks.
fn batch(seed: u8, call: usize) -> usize {
    const SIZES: [usize; 8] = [1, 7, 32, 3, 64, 2, 9, 16];
    SIZES[(usize::from(seed) + call * usize::from(seed | 1)) % SIZES.len()]
}

/// Polls `a` with `poll` and `b` (over a copy of the same ring) with
/// `poll_burst` in the same batch sizes until empty or broken; after every
/// call both must have reported the same completions (as summaries) and
/// result and left the same consumer index, doorbell record and state.
fn compare_burst(a: &mut Mem, b: &mut Mem, c: Setup, seed: u8) {
    let Setup {
        cqe_cnt,
        cqe_size,
        cfg,
        ci,
    } = c;
    // Both CQs live across calls: built once, in nested closures; the
    // records are read through copies of the raw pointers.
    let (rec_a, rec_b) = (Mem::rec(a), Mem::rec(b));
    a.with_cq(cqe_cnt, cqe_size, cfg, ci, |ca| {
        b.with_cq(cqe_cnt, cqe_size, cfg, ci, |cb| {
            let (mut wa, mut wb) = (RawCounters::default(), RawCounters::default());
            let mut out = [CompletionSummary::default(); 64];
            let mut total = 0usize;
            for call in 0.. {
                assert!(call <= bound(cqe_cnt) + 1, "poller did not terminate");
                let n = batch(seed, call);
                let mut want = Vec::new();
                let r_poll = ca.poll(&mut wa, n, |x| want.push(x.summary()));
                let r_burst = cb.poll_burst(&mut wb, &mut out[..n]);
                assert_eq!(r_burst, r_poll, "call {call} batch {n}");
                assert_eq!(&out[..want.len()], &want[..], "call {call} batch {n}");
                assert_eq!(cb.consumer_index(), ca.consumer_index(), "call {call}");
                assert_eq!(cb.in_session(), ca.in_session(), "call {call}");
                assert_eq!(cb.is_broken(), ca.is_broken(), "call {call}");
                assert_eq!(cb.error_log(), ca.error_log(), "call {call}");
                assert_eq!(rec_b.get(), rec_a.get(), "call {call}");
                total += want.len();
                assert!(
                    total <= bound(cqe_cnt),
                    "{total} completions from a static ring"
                );
                if r_poll == Ok(0) || ca.is_broken() {
                    break;
                }
            }
        })
    });
}

/// A striding RQ's memory: ring of 32-byte WQEs, doorbell record, shadow.
struct RqMem {
    ring: *mut [u128],
    db: DeviceWord<u32>,
    slots: Vec<MprqSlot>,
}

impl RqMem {
    fn new(wqes: u32) -> Self {
        Self {
            ring: Box::into_raw(vec![0u128; wqes as usize * 2].into_boxed_slice()),
            db: DeviceWord::new(0),
            slots: vec![MprqSlot::EMPTY; wqes as usize],
        }
    }

    /// A striding RQ over this memory, `wqes` WQEs posted (WQE `i` on
    /// buffer `i`, its wr_id the buffer's address) and published, then
    /// `skip` strides of WQE 0 consumed by one packet.
    fn rq(&mut self, wqes: u32, params: StridingParams, skip: u16) -> StridingRq<'_> {
        let len = self.ring.len() * 16;
        // SAFETY: the boxed slice is `len` bytes, freed only in `Drop`;
        // the RQ borrows `self` mutably for its whole life, and nothing
        // else touches the ring meanwhile.
        let ring = unsafe { RingBuf::new(self.ring.cast::<u8>(), len) }.expect("power of two");
        let size = RingSize::new(wqes).expect("power of two");
        let mut rq =
            StridingRq::new(ring, size, params, &self.db, &mut self.slots).expect("striding rq");
        for i in 0..wqes {
            let buf = 0x10_0000 + 0x1_0000 * u64::from(i);
            rq.post(buf, buf, 0x77).expect("room");
        }
        rq.commit();
        if skip > 0 {
            let c = mlx5dp::cq::StrideCompletion {
                wqe_id: 0,
                stride_index: 0,
                strides: skip,
                filler: false,
            };
            rq.retire_strides(c, false).expect("in range");
        }
        rq
    }

    fn ring_bytes(&self) -> Vec<u128> {
        // SAFETY: live until `Drop`; read between RQ calls, never during one.
        unsafe { (*self.ring).to_vec() }
    }
}

impl Drop for RqMem {
    fn drop(&mut self) {
        // SAFETY: from Box::into_raw in `new`, no RQ over it alive, freed once.
        unsafe { drop(Box::from_raw(self.ring)) }
    }
}

/// The packet `poll` reports through `StridingWorkQueues` (wr_id = the
/// WQE's buffer), fields as `poll_strided` writes them, its WQE-done flag
/// left out (compared through the RQ's state instead).
fn strided_reference(
    c: &mlx5dp::cq::Completion,
    shift: u8,
) -> (u64, u16, u16, u16, WcStatus, bool) {
    let stride_index = c.stride_index().unwrap_or(0);
    (
        c.wr_id() + (u64::from(stride_index) << shift),
        c.mprq_byte_cnt().byte_cnt(),
        stride_index,
        c.consumed_strides().unwrap_or(0),
        c.status(),
        c.origin() == Origin::Mini,
    )
}

/// Polls `a` with `poll_strided` and `b` (over a copy of the same ring)
/// with `poll` through `StridingWorkQueues`, each on its own striding RQ
/// set up alike, in the same batch sizes until empty or broken; after
/// every call both must agree on everything the caller can see.
fn compare_strided(a: &mut Mem, b: &mut Mem, c: Setup, seed: u8, rq_seed: u8) {
    let Setup {
        cqe_cnt,
        cqe_size,
        cfg,
        ci,
    } = c;
    let wqes = 1u32 << (rq_seed & 3);
    let params = StridingParams {
        log_num_strides: 3 + ((rq_seed >> 2) & 3),
        log_stride_bytes: 6,
    };
    let skip = u16::from(rq_seed >> 4) % params.num_strides() as u16;
    let (mut ma, mut mb) = (RqMem::new(wqes), RqMem::new(wqes));
    let (rec_a, rec_b) = (Mem::rec(a), Mem::rec(b));
    let (ring_a, ring_b) = (a.ring, b.ring);
    // SAFETY (both): the rings live as long as their `Mem`s, which outlive
    // the CQs; read between CQ calls, never during one.
    let cq_bytes = |r: *mut [Line]| unsafe { (*r).iter().map(|l| l.0).collect::<Vec<_>>() };
    {
        let mut rq_a = ma.rq(wqes, params, skip);
        let mut rq_b = mb.rq(wqes, params, skip);
        a.with_cq(cqe_cnt, cqe_size, cfg, ci, |ca| {
            b.with_cq(cqe_cnt, cqe_size, cfg, ci, |cb| {
                let mut out = [StridedPacket::default(); 64];
                let mut total = 0usize;
                for call in 0.. {
                    assert!(call <= bound(cqe_cnt) + 1, "poller did not terminate");
                    let n = batch(seed, call);
                    let r_strided = ca.poll_strided(&mut rq_a, &mut out[..n]);
                    let mut want = Vec::new();
                    let r_poll = {
                        let mut rest = NoOtherQueues;
                        let mut wqs = StridingWorkQueues::new(&mut rq_b, &mut rest);
                        cb.poll(&mut wqs, n, |x| {
                            want.push(strided_reference(x, params.log_stride_bytes))
                        })
                    };
                    assert_eq!(r_strided, r_poll, "call {call} batch {n}");
                    let got: Vec<_> = out[..r_strided.unwrap_or(0)]
                        .iter()
                        .map(|p| {
                            (
                                p.addr,
                                p.len,
                                p.stride_index,
                                p.strides,
                                p.status(),
                                p.flags & StridedPacket::MINI != 0,
                            )
                        })
                        .collect();
                    if r_poll.is_ok() {
                        assert_eq!(got, want, "call {call} batch {n}");
                    }
                    assert_eq!(ca.consumer_index(), cb.consumer_index(), "call {call}");
                    assert_eq!(ca.in_session(), cb.in_session(), "call {call}");
                    assert_eq!(ca.is_broken(), cb.is_broken(), "call {call}");
                    assert_eq!(ca.error_log(), cb.error_log(), "call {call}");
                    assert_eq!(rec_a.get(), rec_b.get(), "call {call}");
                    assert_eq!(cq_bytes(ring_a), cq_bytes(ring_b), "call {call}");
                    assert_eq!(
                        (
                            rq_a.head(),
                            rq_a.tail(),
                            rq_a.consumed_strides(),
                            rq_a.is_error()
                        ),
                        (
                            rq_b.head(),
                            rq_b.tail(),
                            rq_b.consumed_strides(),
                            rq_b.is_error()
                        ),
                        "call {call}"
                    );
                    total += want.len();
                    assert!(
                        total <= bound(cqe_cnt),
                        "{total} completions from a static ring"
                    );
                    if r_poll == Ok(0) || ca.is_broken() {
                        break;
                    }
                }
            })
        });
        rq_a.commit();
        rq_b.commit();
    }
    assert_eq!(ma.ring_bytes(), mb.ring_bytes());
    assert_eq!(ma.db.read(), mb.db.read());
}

fn exercise_apis(cq: &mut Cq, cqe_cnt: u32, api: u8, arm: bool) {
    let mut wqs = RawCounters::default();
    let bound = bound(cqe_cnt);
    let mut total = 0usize;
    let mut calls = 0usize;
    loop {
        calls += 1;
        assert!(calls <= bound + 1, "poller did not terminate");
        let step = match if api == 3 { calls as u8 % 4 } else { api } {
            0 => cq.poll(&mut wqs, 3, |c| {
                let _ = c.to_wc();
                let _ = c.inline_data();
                let _ = c.stride_index();
            }),
            1 => {
                let mut wc = [Wc::default(); 4];
                cq.poll_wc(&mut wqs, &mut wc)
            }
            3 => {
                let mut out = [CompletionSummary::default(); 8];
                cq.poll_burst(&mut wqs, &mut out[..1 + calls % 8])
            }
            _ => match cq.start_poll(&mut wqs) {
                Ok(None) => Ok(0),
                Ok(Some(mut batch)) => {
                    let mut n = 1;
                    let _ = batch.completion().to_wc();
                    while n < 5 {
                        match batch.next_poll() {
                            Ok(true) => {
                                let _ = batch.completion().wc_flags();
                                n += 1;
                            }
                            Ok(false) | Err(_) => break,
                        }
                    }
                    batch.end_poll();
                    Ok(n)
                }
                Err(e) => Err(e),
            },
        };
        match step {
            Ok(0) => break,
            Ok(n) => {
                total += n;
                assert!(total <= bound, "{total} completions from a static ring");
            }
            // A broken CQ stays broken; others may go on.
            Err(_) if cq.is_broken() => break,
            Err(_) => {}
        }
        if arm {
            cq.arm(calls.is_multiple_of(2));
            cq.ack_events(1);
        }
    }
    let _ = cq.error_log();
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 7 {
        return;
    }
    let (head, body) = data.split_at(7);
    let cqe_size = if head[0] & 1 == 0 {
        CqeSize::B64
    } else {
        CqeSize::B128
    };
    let format = MiniCqeFormat::from_raw(head[2]);
    let compression = match (head[0] >> 1) & 3 {
        0 => None,
        1 => Some((Layout::Basic, format)),
        _ => Some((Layout::Enhanced, format)),
    };
    let cfg = CqConfig {
        compression,
        striding_rq: head[0] & 8 != 0,
        ..CqConfig::default()
    };
    let cqe_cnt = 1u32 << ((head[1] & 0x7f) % 9);
    let ci = u32::from_le_bytes([head[3], head[4], head[5], head[6]]);
    let stride = cqe_size.bytes();
    let len = cqe_cnt as usize * stride;
    let mut ring = body.to_vec();
    let from = ring.len().min(len);
    ring.resize(len, 0);
    if head[1] & 0x80 != 0 {
        for (off, b) in ring.iter_mut().enumerate().skip(from) {
            *b = match off % stride {
                o if o == stride - 1 => 0xf1,
                o if o == stride - 2 => 0xff,
                _ => 0,
            };
        }
    }

    // Every API, with the decoder bit 7 picks.
    let api_cfg = CqConfig {
        unzip: if head[0] & 128 != 0 {
            UnzipPath::Scalar
        } else {
            best_path()
        },
        ..cfg
    };
    let mut mem = Mem::new(ring.clone());
    mem.with_cq(cqe_cnt, cqe_size, api_cfg, ci, |cq| {
        exercise_apis(cq, cqe_cnt, (head[0] >> 4) & 3, head[0] & 64 != 0)
    });
    drop(mem);

    // The scalar reference and the best path agree.
    let scalar_cfg = CqConfig {
        unzip: UnzipPath::Scalar,
        ..cfg
    };
    let best_cfg = CqConfig {
        unzip: best_path(),
        ..cfg
    };
    let mut a = Mem::new(ring.clone());
    let scalar = a.with_cq(cqe_cnt, cqe_size, scalar_cfg, ci, |cq| trace(cq, cqe_cnt));
    let mut b = Mem::new(ring.clone());
    let best = b.with_cq(cqe_cnt, cqe_size, best_cfg, ci, |cq| trace(cq, cqe_cnt));
    assert_eq!(
        scalar,
        best,
        "scalar and {} disagree",
        best_cfg.unzip.name()
    );
    drop((a, b));

    // `poll_burst` reports what `poll` does, call by call, with each
    // decoder.
    for cfg in [scalar_cfg, best_cfg] {
        let mut a = Mem::new(ring.clone());
        let mut b = Mem::new(ring.clone());
        let setup = Setup {
            cqe_cnt,
            cqe_size,
            cfg,
            ci,
        };
        compare_burst(&mut a, &mut b, setup, head[3]);
    }

    // `poll_strided` reports what `poll` does through the striding RQ's
    // adaptor, call by call.
    if cfg.striding_rq {
        let mut a = Mem::new(ring.clone());
        let mut b = Mem::new(ring);
        let setup = Setup {
            cqe_cnt,
            cqe_size,
            cfg: best_cfg,
            ci,
        };
        compare_strided(&mut a, &mut b, setup, head[3], head[6]);
    }
});
