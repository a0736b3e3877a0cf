//! `loom` models of the send queue's lock-free handshakes and of the shared
//! BlueFlame register (issue 3, item 7; PRM-FACTS §7, §14), on the real
//! code: a [`SendQueue`] built by its constructor, posting through
//! [`SendQueue::post_rdma_write`] (straight into the ring) and
//! [`Batch::rdma_write_sge`] + [`Batch::complete`] (staging, then the ring
//! copy), ringing its doorbell through the real `Doorbell`; and the real
//! [`SharedBlueFlame`].
//!
//! What `loom` sees of that code (everything else is the same in every
//! build): the doorbell record is a [`DeviceWord`] (a `loom` atomic under
//! `cfg(loom)`), every barrier is a `loom` fence, the ring's 64-byte blocks
//! carry `loom` cells written by every ring write of the queue and read by
//! the model's device (`WqebbRing::device_reader`), and the register's first
//! 8 bytes are mirrored into a `loom` atomic (the register itself is MMIO).
//!
//! Models:
//! 1. **Doorbell record → WQE** (a): the device reads the doorbell record,
//!    acquires, and reads every WQE it announces; it never sees a stale or
//!    half-written one (checked by `loom`'s causality tracking and by the
//!    bytes).
//! 2. **Doorbell register → doorbell record** (c): the device wakes on the
//!    register write, acquires, and must find the doorbell record already
//!    holding the producer index the doorbell rang for.
//! 3. **Shared BlueFlame** (b): two threads ring through one
//!    [`SharedBlueFlame`]; their copies never overlap in one half, the halves
//!    alternate, and each copy is flushed before the lock is handed on.
//!
//! Each model has `#[should_panic]` variants with one barrier, the lock or
//! the flush order broken through a test-only switch, so none is vacuous.
//!
//! Run: `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=3 cargo test -p mlx5dp --release --test loom_sq`.
#![cfg(loom)]

use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering as StdOrdering};

use loom::sync::Arc;
use loom::thread;
use mlx5dp::barrier;
use mlx5dp::mmio::{DeviceWord, Register};
use mlx5dp::ring::WqebbReader;
use mlx5dp::sq::{
    DoorbellOnly, LoomFault, QpType, RcQp, SendFlags, SendQueue, Sge, SharedBlueFlame, SqConfig,
    SqRawParts, SqShadowEntry, Wqebb,
};

/// WQEBBs of the modelled ring (the two posts never reuse a slot).
const WQE_CNT: u32 = 4;
const QPN: u32 = 0x1dbb;
const RKEY: u32 = 0xab01;
const LKEY: u32 = 0x4321;
const RADDR: u64 = 0x7f00_0000;
const LADDR: u64 = 0x2_0000;

/// Checks the WQE at WQE index `idx` as the device fetched it: the RDMA
/// WRITE the producer posted there, every field.
fn check_wqe(bb: &[u8; 64], idx: u16) {
    let be32 = |at: usize| u32::from_be_bytes([bb[at], bb[at + 1], bb[at + 2], bb[at + 3]]);
    let be64 = |at: usize| (u64::from(be32(at)) << 32) | u64::from(be32(at + 4));
    let fresh = bb[3] == 0x08 // RDMA_WRITE
        && u16::from_be_bytes([bb[1], bb[2]]) == idx
        && be32(4) == (QPN << 8) | 3
        && be64(16) == RADDR + u64::from(idx)
        && be32(24) == RKEY
        && be32(32) == 64
        && be32(36) == LKEY
        && be64(40) == LADDR + u64::from(idx);
    assert!(fresh, "device fetched a stale or torn WQE at index {idx}");
}

/// Device-side memory of the modelled queue (freed when the model ends,
/// after the device thread has joined).
struct Mem {
    ring: *mut [Wqebb],
    uar: *mut [u64],
}

impl Mem {
    fn new() -> Self {
        Self {
            ring: Box::into_raw(vec![Wqebb::ZERO; WQE_CNT as usize].into_boxed_slice()),
            // One 8-byte doorbell register (`bf_buf_size == 0`).
            uar: Box::into_raw(vec![0u64; 1].into_boxed_slice()),
        }
    }
}

impl Drop for Mem {
    fn drop(&mut self) {
        // SAFETY: from `Box::into_raw` in `new`; the queue and the device
        // reader that used them are gone.
        unsafe {
            drop(Box::from_raw(self.ring));
            drop(Box::from_raw(self.uar));
        }
    }
}

/// Which fault the producer side runs with.
#[derive(Clone, Copy, PartialEq)]
enum Fault {
    None,
    NoToDevice,
    NoWcStart,
}

/// Builds the real queue over `mem`, injects `fault`, posts WQE 0 with
/// `post_rdma_write` and WQE 1 with a one-WQE batch, while `device` runs.
fn with_queue<R: Send + 'static>(
    fault: Fault,
    device: impl FnOnce(
        &mut SendQueue<'_, DoorbellOnly, RcQp>,
        Arc<DeviceWord<u32>>,
    ) -> thread::JoinHandle<R>,
) -> R {
    let mem = Mem::new();
    let dbrec = Arc::new(DeviceWord::<u32>::new(0));
    let mut shadow = vec![SqShadowEntry::EMPTY; WQE_CNT as usize];
    let mut staging = vec![Wqebb::ZERO; 16];
    let raw = SqRawParts {
        buf: NonNull::new(mem.ring.cast::<u8>()).expect("ring"),
        wqe_cnt: WQE_CNT,
        dbrec: &dbrec,
        bf_reg: NonNull::new(mem.uar.cast::<u8>()).expect("uar"),
        bf_buf_size: 0,
    };
    let config = SqConfig::new(QpType::Rc, QPN, 0, 1);
    // SAFETY: the ring (4 WQEBBs) and the 8-byte register are `mem`'s,
    // alive until the end of this function and used by this queue only; the
    // doorbell record is written by this queue only.
    let mut sq = unsafe {
        SendQueue::<DoorbellOnly, RcQp>::new_typed(raw, config, &mut shadow, &mut staging)
    }
    .expect("queue");
    match fault {
        Fault::None => {}
        Fault::NoToDevice => sq.loom_break_to_device(),
        Fault::NoWcStart => sq.loom_break_wc_start(),
    }
    let dev = device(&mut sq, Arc::clone(&dbrec));
    let sge = |i: u64| Sge::new(LKEY, LADDR + i, 64);
    sq.post_rdma_write(0, RKEY, RADDR, sge(0), SendFlags::NONE)
        .expect("post 0");
    let mut b = sq.start();
    b.rdma_write_sge(1, RKEY, RADDR + 1, sge(1), SendFlags::NONE)
        .expect("post 1");
    b.complete();
    dev.join().expect("device thread panicked")
}

/// The device polling the doorbell record: two looks, each followed by a
/// fetch of every newly announced WQE. Returns how many it fetched.
fn device_polls_dbrec(dbrec: &DeviceWord<u32>, ring: &WqebbReader, acquire: bool) -> u16 {
    let mut consumed = 0u16;
    for _ in 0..2 {
        // One DMA read of the producer index (16 bits, big-endian).
        let pi = dbrec.read_be() as u16;
        if pi == consumed {
            continue;
        }
        // The index before the WQEs it announces (pairs with the
        // producer's `barrier::to_device`).
        if acquire {
            barrier::peer::acquire_doorbell();
        }
        for idx in consumed..pi {
            // SAFETY: the ring lives until `with_queue` returns, after this
            // thread has joined.
            let bb = unsafe { ring.read(u32::from(idx)) };
            check_wqe(&bb, idx);
        }
        consumed = pi;
    }
    consumed
}

fn dbrec_model(fault: Fault, acquire: bool, saw_both: &'static AtomicUsize) {
    loom::model(move || {
        let fetched = with_queue(fault, |sq, dbrec| {
            let reader = sq.loom_ring_reader();
            thread::spawn(move || device_polls_dbrec(&dbrec, &reader, acquire))
        });
        if fetched == 2 {
            saw_both.fetch_add(1, StdOrdering::Relaxed);
        }
    });
}

#[test]
fn device_never_fetches_a_stale_wqe() {
    static SAW_BOTH: AtomicUsize = AtomicUsize::new(0);
    dbrec_model(Fault::None, true, &SAW_BOTH);
    // Non-vacuity: some explored execution had the device fetch both WQEs.
    assert!(SAW_BOTH.load(StdOrdering::Relaxed) > 0);
}

#[test]
#[should_panic(expected = "Causality violation")]
fn dbrec_model_catches_a_missing_to_device() {
    static SAW_BOTH: AtomicUsize = AtomicUsize::new(0);
    dbrec_model(Fault::NoToDevice, true, &SAW_BOTH);
}

#[test]
#[should_panic(expected = "Causality violation")]
fn dbrec_model_catches_a_device_without_acquire() {
    static SAW_BOTH: AtomicUsize = AtomicUsize::new(0);
    dbrec_model(Fault::None, false, &SAW_BOTH);
}

/// The device wakes on the register write (the mirrored first 8 bytes of the
/// control segment), then reads the doorbell record and the WQE.
fn register_model(fault: Fault, woke: &'static AtomicUsize) {
    loom::model(move || {
        let fetched = with_queue(fault, |sq, dbrec| {
            let mirror = sq.loom_register_mirror();
            let reader = sq.loom_ring_reader();
            thread::spawn(move || {
                let ctrl = mirror.read().to_ne_bytes();
                if ctrl == [0; 8] {
                    return false; // no doorbell yet
                }
                barrier::peer::acquire_doorbell();
                let idx = u16::from_be_bytes([ctrl[1], ctrl[2]]);
                let pi = dbrec.read_be() as u16;
                assert!(
                    pi.wrapping_sub(idx) >= 1,
                    "device read a stale doorbell record"
                );
                // SAFETY: the ring outlives this thread (joined in `with_queue`).
                check_wqe(&unsafe { reader.read(u32::from(idx)) }, idx);
                true
            })
        });
        if fetched {
            woke.fetch_add(1, StdOrdering::Relaxed);
        }
    });
}

#[test]
fn doorbell_register_follows_the_doorbell_record() {
    static WOKE: AtomicUsize = AtomicUsize::new(0);
    register_model(Fault::None, &WOKE);
    assert!(WOKE.load(StdOrdering::Relaxed) > 0);
}

#[test]
#[should_panic(expected = "stale doorbell record")]
fn register_model_catches_a_missing_wc_start() {
    static WOKE: AtomicUsize = AtomicUsize::new(0);
    register_model(Fault::NoWcStart, &WOKE);
}

/// Two threads ring one shared bfreg (two 64-byte halves), each with a
/// one-WQEBB BlueFlame copy of its own bytes.
fn shared_bf_model(fault: LoomFault) {
    loom::model(move || {
        let mem: *mut [u64] = Box::into_raw(vec![0u64; 16].into_boxed_slice());
        // SAFETY: 128 bytes, 8-aligned, written only through this register
        // until the model frees them below (after both threads joined and
        // the handle is dropped).
        let reg = unsafe { Register::new(NonNull::new(mem.cast::<u8>()).expect("reg"), 128) };
        let bf = Arc::new(SharedBlueFlame::with_loom_fault(reg, 64, false, fault).expect("bf"));
        let cpu = |tag: u8| {
            let bf = Arc::clone(&bf);
            thread::spawn(move || {
                let wqe = [Wqebb([tag; 64])];
                bf.blueflame(&wqe, 4).expect("fits")
            })
        };
        let a = cpu(0xaa);
        let b = cpu(0xbb);
        let at_a = a.join().expect("cpu a");
        let at_b = b.join().expect("cpu b");
        // The halves alternate: one copy each, and back to the first.
        assert!(
            at_a != at_b && at_a + at_b == 64,
            "both copies went to one half"
        );
        assert_eq!(bf.offset(), 0, "toggle did not alternate");
        drop(bf);
        // SAFETY: the only register over `mem` is gone (the handle dropped).
        let bytes = unsafe { Box::from_raw(mem) };
        for (at, tag) in [(at_a, 0xaa_u8), (at_b, 0xbb)] {
            let half = &bytes[at / 8..at / 8 + 8];
            assert!(
                half.iter().all(|w| w.to_ne_bytes() == [tag; 8]),
                "a half holds a mix of two copies"
            );
        }
    });
}

#[test]
fn shared_blueflame_copies_never_interleave_and_alternate() {
    shared_bf_model(LoomFault::None);
}

#[test]
#[should_panic(expected = "Causality violation")]
fn shared_bf_model_catches_a_missing_lock() {
    shared_bf_model(LoomFault::NoLock);
}

#[test]
#[should_panic(expected = "before the previous holder's WC flush")]
fn shared_bf_model_catches_a_flush_after_unlock() {
    shared_bf_model(LoomFault::FlushAfterUnlock);
}
