//! `loom` models of the completion-queue handshakes (PRM-FACTS §9.2, §9.5,
//! §14).
//!
//! 1. **Owner-bit handoff.** The device writes a CQE's body, then (release)
//!    its `op_own` byte with the owner bit of the current pass; the consumer
//!    reads `op_own`, checks the owner bit against its consumer index, calls
//!    [`barrier::from_device`] and only then reads the body. It must never
//!    see a stale body under a fresh owner bit.
//! 2. **Slot handback.** On a one-entry CQ the device may write the next
//!    CQE into the slot only after the consumer's `set_ci` says the slot is
//!    free; the consumer calls [`barrier::from_device_done`] between its last
//!    read of the entry and the `set_ci` write. The device's next write must
//!    never race with the consumer's read.
//!
//! 3. **Validity-count handoff (enhanced layout).** The same handoff
//!    with the ownership in bytes 62–63: the validity iteration count
//!    (the pass modulo 256) and `num_and_type`, written last (release) and
//!    read by the consumer as one 16-bit word before the barrier, as
//!    `Cq::poll_burst`'s block runs read them (`cq::mem::BlockRun`):
//!    whether the entry is a full compressed block is decided from that
//!    word; the body is read after the barrier. Two completions through
//!    one slot (passes 0 and 1), the slot handed back by `set_ci`.
//!
//! In hardware `op_own` is byte 63 of the same 64-byte entry; the model keeps
//! it in its own [`DeviceWord`] (a `loom` atomic) and bytes 0..=62 in a
//! `loom` cell, so that `loom` tracks the body and the ownership byte
//! separately. The device's side uses [`barrier::peer`]. Every model has
//! `#[should_panic]` variants with one barrier removed, so it is not vacuous.
//!
//! Run: `RUSTFLAGS="--cfg loom" cargo test -p mlx5dp --release --test 'loom_*'`.
#![cfg(loom)]

use std::sync::atomic::{AtomicUsize, Ordering as StdOrdering};

use loom::sync::Arc;
use loom::thread;
use mlx5dp::barrier;
use mlx5dp::mmio::DeviceWord;
use mlx5dp::sync::UnsafeCell;

/// CQE bytes 0..=62 (everything but `op_own`).
type CqeBody = [u8; 63];

/// `op_own` as UCX and DPDK initialise every CQE: opcode INVALID (0xF),
/// owner 1, so the first pass (which expects owner 0) sees it as
/// hardware-owned.
const OP_OWN_INIT: u8 = 0xf1;
/// CQE opcode `MLX5_CQE_REQ` (send completion).
const CQE_REQ: u8 = 0x0;
/// CQE opcode `MLX5_CQE_INVALID`.
const CQE_INVALID: u8 = 0xf;

/// The body of the `n`-th completion: `byte_cnt` (44..48) and
/// `wqe_counter` (60..62) distinguish one completion from another and from
/// the zeroed initial slot.
fn body_for(n: u16) -> CqeBody {
    let mut body = [0u8; 63];
    body[44..48].copy_from_slice(&(64 * (u32::from(n) + 1)).to_be_bytes());
    body[60..62].copy_from_slice(&n.to_be_bytes());
    body
}

/// A one-entry CQ (`log_cqe_cnt` = 0) and its doorbell record `set_ci`.
struct Cq {
    body: UnsafeCell<CqeBody>,
    op_own: DeviceWord<u8>,
    set_ci: DeviceWord<u32>,
}

impl Cq {
    fn new() -> Self {
        Self {
            body: UnsafeCell::new([0; 63]),
            op_own: DeviceWord::new(OP_OWN_INIT),
            set_ci: DeviceWord::new(0),
        }
    }
}

/// Which barrier a variant leaves out.
#[derive(Clone, Copy, PartialEq)]
enum Variant {
    Correct,
    ConsumerWithoutFromDevice,
    ConsumerWithoutFromDeviceDone,
    DeviceWithoutRelease,
}

/// The device writes completion `n` into the slot, pass `n` (one entry, so
/// the owner bit of pass `n` is `n & 1`).
fn device_write_cqe(cq: &Cq, n: u16, variant: Variant) {
    // 1. The body (one DMA write of bytes 0..=62).
    cq.body.with_mut(|body| {
        // SAFETY: the device owns the slot (initially, or after the
        // consumer's set_ci handed it back); loom checks the claim.
        unsafe { *body = body_for(n) }
    });
    // 2. Body before ownership byte (Release; the consumer's from_device is
    //    the Acquire).
    if variant != Variant::DeviceWithoutRelease {
        barrier::peer::release_entry();
    }
    // 3. `op_own`: opcode REQ, owner bit of this pass.
    cq.op_own.write((CQE_REQ << 4) | (n & 1) as u8);
}

/// One poll of the slot at consumer index `ci` (the ownership rule of
/// rdma-core `get_sw_cqe`): the body if the CQE is software-owned.
fn poll_once(cq: &Cq, ci: u32, variant: Variant) -> Option<CqeBody> {
    // 1. Read the ownership byte once (volatile / Relaxed).
    let op_own = cq.op_own.read();
    let owner_expected = (ci & 1) as u8; // (ci >> log_cqe_cnt) & 1, log = 0
    if op_own >> 4 == CQE_INVALID || op_own & 1 != owner_expected {
        return None;
    }
    // 2. The ownership read before the body reads (Acquire; pairs with the
    //    device's release_entry).
    if variant != Variant::ConsumerWithoutFromDevice {
        barrier::from_device();
    }
    // 3. Copy the entry out once; decode the copy.
    Some(cq.body.with(|body| {
        // SAFETY: a read of device-written ring memory; loom panics if it is
        // not ordered after the device's write, or races with its next one.
        unsafe { *body }
    }))
}

/// Model 1: one completion, the consumer polls twice.
fn handoff_model(variant: Variant, got: &'static AtomicUsize) {
    loom::model(move || {
        let cq = Arc::new(Cq::new());
        let dev = {
            let cq = Arc::clone(&cq);
            thread::spawn(move || device_write_cqe(&cq, 0, variant))
        };
        for _ in 0..2 {
            if let Some(body) = poll_once(&cq, 0, variant) {
                assert_eq!(body, body_for(0), "consumer read a stale CQE body");
                got.fetch_add(1, StdOrdering::Relaxed);
                break;
            }
        }
        dev.join().expect("device thread panicked");
    });
}

#[test]
fn owner_bit_handoff_never_exposes_a_stale_cqe() {
    static GOT: AtomicUsize = AtomicUsize::new(0);
    handoff_model(Variant::Correct, &GOT);
    assert!(GOT.load(StdOrdering::Relaxed) > 0);
}

#[test]
#[should_panic(expected = "Causality violation")]
fn handoff_model_catches_a_missing_from_device() {
    static GOT: AtomicUsize = AtomicUsize::new(0);
    handoff_model(Variant::ConsumerWithoutFromDevice, &GOT);
}

#[test]
#[should_panic(expected = "Causality violation")]
fn handoff_model_catches_a_device_without_release() {
    static GOT: AtomicUsize = AtomicUsize::new(0);
    handoff_model(Variant::DeviceWithoutRelease, &GOT);
}

/// A one-entry CQ as models 2 and 3 drive it: the device's write of entry
/// `n` (pass `n`), one consumer look at consumer index `ci`, what entry
/// `n` must read as, and the doorbell record.
trait Slot: 'static {
    /// What one look returns.
    type Seen: PartialEq + core::fmt::Debug;
    /// The device writes entry `n`.
    fn device_write(&self, n: u16, variant: Variant);
    /// One consumer look: what it read, if the entry is this pass's.
    fn poll(&self, ci: u32, variant: Variant) -> Option<Self::Seen>;
    /// What entry `n` must read as.
    fn expected(n: u16) -> Self::Seen;
    /// The doorbell record the consumer frees the slot with.
    fn set_ci(&self) -> &DeviceWord<u32>;
}

impl Slot for Cq {
    type Seen = CqeBody;
    fn device_write(&self, n: u16, variant: Variant) {
        device_write_cqe(self, n, variant);
    }
    fn poll(&self, ci: u32, variant: Variant) -> Option<CqeBody> {
        poll_once(self, ci, variant)
    }
    fn expected(n: u16) -> CqeBody {
        body_for(n)
    }
    fn set_ci(&self) -> &DeviceWord<u32> {
        &self.set_ci
    }
}

/// Models 2 and 3: two entries through one slot. The consumer takes the
/// first, hands the slot back with `set_ci = 1`, and polls for the second;
/// the device writes the second only after it has seen `set_ci = 1`.
fn handback_model<C: Slot>(new: fn() -> C, variant: Variant, got_both: &'static AtomicUsize) {
    loom::model(move || {
        let cq = Arc::new(new());
        let dev = {
            let cq = Arc::clone(&cq);
            thread::spawn(move || {
                cq.device_write(0, variant);
                // The device reads set_ci (one DMA read per look) and reuses
                // the slot only once the consumer has freed it.
                for _ in 0..2 {
                    if cq.set_ci().read_be() & 0xff_ffff >= 1 {
                        // set_ci before the slot's reuse (Acquire; pairs with
                        // the consumer's from_device_done).
                        barrier::peer::acquire_consumer_index();
                        cq.device_write(1, variant);
                        return;
                    }
                    loom::thread::yield_now();
                }
            })
        };
        let mut ci = 0u32;
        for _ in 0..4 {
            let Some(seen) = cq.poll(ci, variant) else {
                loom::thread::yield_now();
                continue;
            };
            assert_eq!(seen, C::expected(ci as u16), "consumer read a stale entry");
            ci += 1;
            // Every read of the consumed entry before the write that frees
            // its slot (Release; the device's acquire_consumer_index is the
            // Acquire).
            if variant != Variant::ConsumerWithoutFromDeviceDone {
                barrier::from_device_done();
            }
            cq.set_ci().write_be(ci & 0xff_ffff);
            if ci == 2 {
                got_both.fetch_add(1, StdOrdering::Relaxed);
                break;
            }
        }
        dev.join().expect("device thread panicked");
    });
}

#[test]
fn slot_handback_never_races_the_next_cqe() {
    static GOT_BOTH: AtomicUsize = AtomicUsize::new(0);
    handback_model(Cq::new, Variant::Correct, &GOT_BOTH);
    assert!(GOT_BOTH.load(StdOrdering::Relaxed) > 0);
}

#[test]
#[should_panic(expected = "Causality violation")]
fn handback_model_catches_a_missing_from_device_done() {
    static GOT_BOTH: AtomicUsize = AtomicUsize::new(0);
    handback_model(Cq::new, Variant::ConsumerWithoutFromDeviceDone, &GOT_BOTH);
}

/// CQE bytes 0..=61 (everything but the validity count and `num_and_type`).
type EnhancedBody = [u8; 62];

/// Bytes 62–63 as one little-endian word before the first pass: validity
/// 0xff (a pass the model never reaches), `num_and_type` 0xf1.
const HEAD_INIT: u16 = 0xf1ff;
/// `num_and_type` of a full compressed CQE: seven minis (6 in bits 7:4),
/// format 3 (bits 3:2).
const FULL_BLOCK: u8 = (6 << 4) | (3 << 2);
/// `num_and_type` of a regular CQE: opcode REQ, format 0.
const REGULAR: u8 = CQE_REQ << 4;

/// The body of the `n`-th enhanced entry ([`body_for`] less byte 62).
fn enhanced_body_for(n: u16) -> EnhancedBody {
    let mut body = [0u8; 62];
    body.copy_from_slice(&body_for(n)[..62]);
    body
}

/// The `num_and_type` the device writes for entry `n`: a full block first,
/// then a regular CQE (the consumer must tell them apart by the word it
/// read before the barrier).
fn kind_for(n: u16) -> u8 {
    if n == 0 {
        FULL_BLOCK
    } else {
        REGULAR
    }
}

/// A one-entry CQ in the enhanced layout and its doorbell record.
struct EnhancedCq {
    body: UnsafeCell<EnhancedBody>,
    head: DeviceWord<u16>,
    set_ci: DeviceWord<u32>,
}

/// The device writes entry `n` (pass `n`): body, then (release) bytes
/// 62–63.
fn device_write_enhanced(cq: &EnhancedCq, n: u16, variant: Variant) {
    cq.body.with_mut(|body| {
        // SAFETY: the device owns the slot (initially, or after set_ci
        // handed it back); loom checks the claim.
        unsafe { *body = enhanced_body_for(n) }
    });
    if variant != Variant::DeviceWithoutRelease {
        barrier::peer::release_entry();
    }
    cq.head
        .write(u16::from(n as u8) | (u16::from(kind_for(n)) << 8));
}

/// One look at the slot for consumer index `ci` (one entry: the pass is
/// `ci`): the kind read with the validity count, and the body, if the
/// entry is this pass's.
fn poll_enhanced(cq: &EnhancedCq, ci: u32, variant: Variant) -> Option<(u8, EnhancedBody)> {
    // 1. Validity count and `num_and_type`, one read.
    let head = cq.head.read();
    if head as u8 != ci as u8 {
        return None;
    }
    let kind = (head >> 8) as u8;
    // 2. The ownership word before the body (Acquire).
    if variant != Variant::ConsumerWithoutFromDevice {
        barrier::from_device();
    }
    // 3. The body copied out once.
    Some((
        kind,
        cq.body.with(|body| {
            // SAFETY: a read of device-written ring memory; loom panics if
            // it is not ordered after the device's write or races its next.
            unsafe { *body }
        }),
    ))
}

impl EnhancedCq {
    fn new() -> Self {
        Self {
            body: UnsafeCell::new([0; 62]),
            head: DeviceWord::new(HEAD_INIT),
            set_ci: DeviceWord::new(0),
        }
    }
}

/// Model 3: [`handback_model`] on the enhanced layout's slot: the kind
/// (read with the validity count) and the body of each pass.
impl Slot for EnhancedCq {
    type Seen = (u8, EnhancedBody);
    fn device_write(&self, n: u16, variant: Variant) {
        device_write_enhanced(self, n, variant);
    }
    fn poll(&self, ci: u32, variant: Variant) -> Option<(u8, EnhancedBody)> {
        poll_enhanced(self, ci, variant)
    }
    fn expected(n: u16) -> (u8, EnhancedBody) {
        (kind_for(n), enhanced_body_for(n))
    }
    fn set_ci(&self) -> &DeviceWord<u32> {
        &self.set_ci
    }
}

#[test]
fn validity_count_handoff_never_exposes_a_stale_entry() {
    static GOT_BOTH: AtomicUsize = AtomicUsize::new(0);
    handback_model(EnhancedCq::new, Variant::Correct, &GOT_BOTH);
    assert!(GOT_BOTH.load(StdOrdering::Relaxed) > 0);
}

#[test]
#[should_panic(expected = "Causality violation")]
fn enhanced_model_catches_a_missing_from_device() {
    static GOT_BOTH: AtomicUsize = AtomicUsize::new(0);
    handback_model(
        EnhancedCq::new,
        Variant::ConsumerWithoutFromDevice,
        &GOT_BOTH,
    );
}

#[test]
#[should_panic(expected = "Causality violation")]
fn enhanced_model_catches_a_device_without_release() {
    static GOT_BOTH: AtomicUsize = AtomicUsize::new(0);
    handback_model(EnhancedCq::new, Variant::DeviceWithoutRelease, &GOT_BOTH);
}
