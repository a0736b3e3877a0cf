//! Ring memory in ordinary host memory for the receive-queue unit tests.
#![allow(unsafe_code, reason = "tests build ring memory from raw parts")]

use crate::ring::RingBuf;
use std::boxed::Box;
use std::vec::Vec;

/// The SSE4.1 proof where this CPU has SSE4.1 (`Rq::set_sse41`,
/// `Srq::set_sse41` in the list tests).
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
pub fn detected_sse41() -> Option<crate::cpu::Sse41> {
    // SAFETY: the token is made only where SSE4.1 was detected on this CPU.
    std::is_x86_feature_detected!("sse4.1").then(|| unsafe { crate::cpu::Sse41::new_unchecked() })
}

/// Bytes of a hex string.
pub fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// `len` bytes pre-filled with `0xa5` (the oracle's untouched pattern),
/// held as a raw pointer so that the queue's writes and the test's reads
/// share one provenance (Miri).
pub struct Mem(pub *mut u8, pub usize);

impl Mem {
    pub fn new(len: usize) -> Self {
        let v = std::vec![0xa5u8; len].into_boxed_slice();
        Self(Box::into_raw(v).cast::<u8>(), len)
    }

    pub fn ring(&self) -> RingBuf<'_> {
        // SAFETY: the allocation is live for the borrow and only the queue writes it.
        unsafe { RingBuf::new(self.0, self.1) }.unwrap()
    }

    pub fn bytes(&self, off: usize, n: usize) -> Vec<u8> {
        assert!(off + n <= self.1);
        let mut v = std::vec![0u8; n];
        // SAFETY: in bounds of the live allocation (asserted).
        unsafe { core::ptr::copy_nonoverlapping(self.0.add(off), v.as_mut_ptr(), n) }
        v
    }
}

impl Drop for Mem {
    fn drop(&mut self) {
        // SAFETY: from `Box::into_raw` of a boxed slice of this length.
        unsafe {
            drop(Box::from_raw(core::ptr::slice_from_raw_parts_mut(
                self.0, self.1,
            )))
        }
    }
}

/// 64 bytes, 64-byte aligned (CQ rings must be 64-byte aligned).
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([u8; 64]);

/// The device-side memory of a CQ of 64-byte CQEs (ring and doorbell
/// record), every slot initialised to `op_own = 0xF1` (invalid, owner 1).
pub struct CqMem {
    ring: *mut Line,
    entries: usize,
    dbrec: *mut [u32; 2],
}

impl CqMem {
    pub fn new(entries: usize) -> Self {
        let mut init = Line([0; 64]);
        init.0[63] = crate::prm::CQE_OP_OWN_INIT;
        let ring = Box::into_raw(std::vec![init; entries].into_boxed_slice()).cast::<Line>();
        let dbrec = Box::into_raw(Box::new([0u32; 2]));
        Self {
            ring,
            entries,
            dbrec,
        }
    }

    /// A CQ over this memory.
    pub fn cq(&self, striding_rq: bool) -> crate::cq::Cq {
        use core::ptr::NonNull;
        let parts = crate::cq::CqParts {
            buf: NonNull::new(self.ring.cast::<u8>()).unwrap(),
            cqe_cnt: self.entries as u32,
            cqe_size: crate::cq::CqeSize::B64,
            dbrec: NonNull::new(self.dbrec.cast::<u32>()).unwrap(),
            uar: None,
            cqn: 7,
        };
        let cfg = crate::cq::CqConfig {
            striding_rq,
            ..crate::cq::CqConfig::default()
        };
        // SAFETY: the memory outlives the CQ in every test.
        unsafe { crate::cq::Cq::from_raw_parts(parts, cfg, 0) }.unwrap()
    }

    /// Writes `cqe` into slot `slot` (first pass: owner 0).
    pub fn put(&self, slot: usize, cqe: &crate::prm::Cqe64) {
        assert!(slot < self.entries);
        let line = Line(zerocopy::transmute!(*cqe));
        // SAFETY: in bounds (asserted) of the live ring.
        unsafe { self.ring.add(slot).write(line) }
    }
}

impl Drop for CqMem {
    fn drop(&mut self) {
        // SAFETY: from `Box::into_raw` with these exact types and length.
        unsafe {
            drop(Box::from_raw(core::ptr::slice_from_raw_parts_mut(
                self.ring,
                self.entries,
            )));
            drop(Box::from_raw(self.dbrec));
        }
    }
}

/// A responder CQE (`RESP_SEND` or `RESP_ERR`), first pass.
pub fn resp_cqe(
    error: bool,
    qpn: u32,
    srqn: u32,
    wqe_counter: u16,
    byte_cnt: u32,
) -> crate::prm::Cqe64 {
    use crate::prm::{Be16, Be32, Be64, Cqe64, CqeOpcode, OpOwn, SopDropQpn, SrqnUidx};
    let op = if error {
        CqeOpcode::RespErr
    } else {
        CqeOpcode::RespSend
    };
    Cqe64 {
        op_own: OpOwn::new().with_opcode(op.raw()),
        srqn_uidx: SrqnUidx::new().with_srqn_uidx(srqn),
        sop_drop_qpn: SopDropQpn::new().with_qpn(qpn),
        wqe_counter: Be16::new(wqe_counter),
        byte_cnt: Be32::new(byte_cnt),
        // An error CQE's syndrome is byte 55: LOCAL_LENGTH (0x01).
        timestamp: Be64::new(u64::from(error)),
        ..Cqe64::default()
    }
}

/// A small deterministic generator (xorshift64*), so that the list tests
/// need no dependency and Miri runs them as they are.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}
