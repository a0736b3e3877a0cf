//! `loom` models of send-doorbell publication (PRM-FACTS §7, §14).
//!
//! The producer (the CPU) writes WQEs into ring memory, calls
//! [`barrier::to_device`], then writes the SQ doorbell record with the new
//! producer index; with a write-combining UAR it then calls
//! [`barrier::wc_start`] and writes the doorbell register. A "device" thread
//! plays the ConnectX: it reads the doorbell record (or waits for the
//! doorbell register), calls [`barrier::peer::acquire_doorbell`] and reads the
//! WQEs the index announces. It must never see a stale or half-written WQE,
//! nor a doorbell record older than the doorbell that announced it.
//!
//! `loom` checks every interleaving and every value a `Relaxed` load may
//! return: WQE slots are `loom` cells (a read not ordered after the write
//! panics with "Causality violation"), the doorbell record and register are
//! `loom` atomics ([`DeviceWord`] under `cfg(loom)`), and every barrier is a
//! `loom` fence. Each model has a variant with one barrier left out, marked
//! `#[should_panic]`, to show the model is not vacuous.
//!
//! Run: `RUSTFLAGS="--cfg loom" cargo test -p mlx5dp --release --test 'loom_*'`.
#![cfg(loom)]

use std::sync::atomic::{AtomicUsize, Ordering as StdOrdering};

use loom::sync::Arc;
use loom::thread;
use mlx5dp::barrier;
use mlx5dp::mmio::DeviceWord;
use mlx5dp::sync::UnsafeCell;

/// Ring size in WQEBBs: two, so that the two posts of a model never reuse a
/// slot (slot reuse needs completions; `loom_cq` models that handoff).
const SLOTS: usize = 2;
/// QPN written into every control segment.
const QPN: u32 = 0x1dbb;

/// The first 16 bytes of a WQE, as four big-endian words: the control
/// segment (`opmod_idx_opcode`, `qpn_ds`, the `fm_ce_se` word, `imm`).
/// Enough to tell a fresh WQE from a stale or half-written one.
type Wqe = [u32; 4];

/// The WQE the producer posts at WQE index `idx`: SEND (0x0a), DS = 1,
/// CE = always (`2 << 2`).
fn wqe_for(idx: u16) -> Wqe {
    [
        ((u32::from(idx) << 8) | 0x0a).to_be(),
        ((QPN << 8) | 1).to_be(),
        (2u32 << 2).to_be(),
        0,
    ]
}

/// The send queue as the device sees it: ring memory, the SQ doorbell record
/// (`dbrec[MLX5_SND_DBR]`) and the doorbell register (its 8-byte value).
struct Sq {
    ring: [UnsafeCell<Wqe>; SLOTS],
    snd_dbrec: DeviceWord<u32>,
    doorbell: DeviceWord<u64>,
}

impl Sq {
    fn new() -> Self {
        Self {
            // Slot contents before any post: zeroes (never a valid WQE).
            ring: [UnsafeCell::new([0; 4]), UnsafeCell::new([0; 4])],
            snd_dbrec: DeviceWord::new(0),
            doorbell: DeviceWord::new(0),
        }
    }
}

/// Which barriers the producer calls (all of them, or all but one).
#[derive(Clone, Copy, PartialEq)]
enum Producer {
    Correct,
    WithoutToDevice,
    WithoutWcStart,
}

/// Whether the device thread acquires after reading the index.
#[derive(Clone, Copy, PartialEq)]
enum Device {
    Correct,
    WithoutAcquire,
}

/// Posts one WQE at index `pi` and publishes it in the doorbell record.
fn post(sq: &Sq, pi: u16, producer: Producer) {
    // 1. Write the WQE into its slot: plain stores to ring memory.
    sq.ring[usize::from(pi) % SLOTS].with_mut(|slot| {
        // SAFETY: the producer owns the slot until the doorbell record
        // announces it; no other access to it is live (loom checks this).
        unsafe { *slot = wqe_for(pi) }
    });
    // 2. The WQE stores before the doorbell-record store (to_device =
    //    Release; the device's acquire_doorbell is its Acquire).
    if producer != Producer::WithoutToDevice {
        barrier::to_device();
    }
    // 3. Publish: next free WQEBB index, 16 bits, big-endian.
    sq.snd_dbrec
        .write_be(u32::from(pi.wrapping_add(1)) & 0xffff);
}

/// Rings the doorbell register after the doorbell record: the first 8 bytes
/// of the last WQE's control segment, as one 64-bit store.
fn ring_doorbell(sq: &Sq, pi: u16, producer: Producer) {
    // 4. The doorbell record before the WC doorbell write (wc_start =
    //    Release; the device's acquire_doorbell is its Acquire).
    if producer != Producer::WithoutWcStart {
        barrier::wc_start();
    }
    let [w0, w1, ..] = wqe_for(pi);
    let mut ctrl = [0u8; 8];
    ctrl[..4].copy_from_slice(&w0.to_ne_bytes());
    ctrl[4..].copy_from_slice(&w1.to_ne_bytes());
    sq.doorbell.write(u64::from_ne_bytes(ctrl));
    // 5. Flush the WC buffer before the next doorbell / BlueFlame toggle.
    barrier::wc_flush();
}

/// Reads and checks every WQE in `from..to`.
fn fetch_wqes(sq: &Sq, from: u16, to: u16) {
    for idx in from..to {
        let wqe = sq.ring[usize::from(idx) % SLOTS].with(|slot| {
            // SAFETY: a read of ring memory; loom panics if it is not
            // ordered after the producer's write of the slot.
            unsafe { *slot }
        });
        assert_eq!(wqe, wqe_for(idx), "device fetched a stale or torn WQE");
    }
}

/// The device polling the doorbell record (no doorbell register): two looks
/// at the record, each followed by a fetch of every newly announced WQE.
/// Returns how many WQEs it fetched.
fn device_polls_dbrec(sq: &Sq, device: Device) -> u16 {
    let mut consumed = 0u16;
    for _ in 0..2 {
        // Read the producer index the CPU published (one DMA read).
        let pi = sq.snd_dbrec.read_be() as u16;
        if pi == consumed {
            continue;
        }
        // The read of the index before the reads of the WQEs it announces.
        if device == Device::Correct {
            barrier::peer::acquire_doorbell();
        }
        fetch_wqes(sq, consumed, pi);
        consumed = pi;
    }
    consumed
}

/// Two posts, a device thread polling the doorbell record.
fn dbrec_model(producer: Producer, device: Device, saw_both: &'static AtomicUsize) {
    loom::model(move || {
        let sq = Arc::new(Sq::new());
        let dev = {
            let sq = Arc::clone(&sq);
            thread::spawn(move || device_polls_dbrec(&sq, device))
        };
        post(&sq, 0, producer);
        post(&sq, 1, producer);
        let consumed = dev.join().expect("device thread panicked");
        if consumed == 2 {
            saw_both.fetch_add(1, StdOrdering::Relaxed);
        }
    });
}

#[test]
fn dbrec_publication_never_exposes_a_stale_wqe() {
    static SAW_BOTH: AtomicUsize = AtomicUsize::new(0);
    dbrec_model(Producer::Correct, Device::Correct, &SAW_BOTH);
    // Non-vacuity: some explored execution had the device fetch both WQEs.
    assert!(SAW_BOTH.load(StdOrdering::Relaxed) > 0);
}

#[test]
#[should_panic(expected = "Causality violation")]
fn dbrec_model_catches_a_missing_to_device() {
    static SAW_BOTH: AtomicUsize = AtomicUsize::new(0);
    dbrec_model(Producer::WithoutToDevice, Device::Correct, &SAW_BOTH);
}

#[test]
#[should_panic(expected = "Causality violation")]
fn dbrec_model_catches_a_device_without_acquire() {
    static SAW_BOTH: AtomicUsize = AtomicUsize::new(0);
    dbrec_model(Producer::Correct, Device::WithoutAcquire, &SAW_BOTH);
}

/// One post rung through the doorbell register: the device wakes on the
/// register write, then reads the doorbell record and the WQE.
fn doorbell_model(producer: Producer, fetched: &'static AtomicUsize) {
    loom::model(move || {
        let sq = Arc::new(Sq::new());
        let dev = {
            let sq = Arc::clone(&sq);
            thread::spawn(move || {
                // The doorbell TLP arrives (or has not yet: then nothing to do).
                if sq.doorbell.read() == 0 {
                    return false;
                }
                barrier::peer::acquire_doorbell();
                // The record must already hold the index the doorbell rang for.
                let pi = sq.snd_dbrec.read_be() as u16;
                assert_eq!(pi, 1, "device read a stale doorbell record");
                fetch_wqes(&sq, 0, pi);
                true
            })
        };
        post(&sq, 0, producer);
        ring_doorbell(&sq, 0, producer);
        if dev.join().expect("device thread panicked") {
            fetched.fetch_add(1, StdOrdering::Relaxed);
        }
    });
}

#[test]
fn doorbell_register_follows_the_doorbell_record() {
    static FETCHED: AtomicUsize = AtomicUsize::new(0);
    doorbell_model(Producer::Correct, &FETCHED);
    assert!(FETCHED.load(StdOrdering::Relaxed) > 0);
}

#[test]
#[should_panic(expected = "stale doorbell record")]
fn doorbell_model_catches_a_missing_wc_start() {
    static FETCHED: AtomicUsize = AtomicUsize::new(0);
    doorbell_model(Producer::WithoutWcStart, &FETCHED);
}
