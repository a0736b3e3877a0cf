//! Receive-queue scenarios: posting receive WQEs of one SGE on a cyclic RQ
//! (rdma-core `mlx5_post_recv`'s work), one work request per publication
//! (`rq/post_recv1`: `Rq::post` then `Rq::commit`, one `ibv_post_recv` of
//! one work request) or 32 (`rq/post_recv32`: a list of 32, one doorbell
//! record write).
//!
//! Measured per WQE: the post (queue test, SGE count, data segment,
//! wr_id shadow) and, per publication, the to-device barrier and the
//! doorbell-record store. Not measured: retiring the WQEs, done by
//! [`crate::Scenario::prepare`] once per ring's worth with `Rq::retire`.
//!
//! The RQ has 256 WQEs of 16 bytes (`wqe_shift` 4: one data segment, no
//! terminator, as libmlx5 builds it for `max_recv_sge = 1`).
//!
//! `rq/post_recv_list32`: the same WQEs posted 32 at a time by
//! `Rq::post_list` (one space check, one counter update, one commit per
//! list; `ibv_post_recv` with a chain of 32). The 256 work requests (one
//! per ring entry, a buffer each) are the caller's array, built once
//! outside the measured function: what is counted is the post, not the
//! making of the list. `rq/post_recv_list32_sse41`: the same with the
//! SSE4.1 segment builder (`Rq::set_sse41`; only where the CPU has SSE4.1).
//!
//! `rq/post_srq_recv1`, `rq/post_srq_recv32` and
//! `rq/post_srq_recv_list32` (`Srq::post_list`; `..._sse41` with
//! `Srq::set_sse41`): the same posts on an SRQ
//! (`Srq::post`: next WQE from the free list, data segment, shadow) of 256
//! WQEs of 32 bytes (next segment and one data segment, as libmlx5 builds
//! it for `max_sge = 1`); `prepare` retires the posted WQEs in order
//! (`Srq::retire`, the completion path's work), untimed.

use mlx5dp::index::RingSize;
use mlx5dp::mmio::DeviceWord;
use mlx5dp::ring::RingBuf;
use mlx5dp::rq::{RecvWr, Rq, Sge, Srq, SrqSlot};

use crate::{leak_raw, Scenario};

/// WQEs in every benchmark RQ.
pub const RQ_WQE_CNT: u32 = 256;
const LKEY: u32 = 0x0000_4321;
const ADDR: u64 = 0x0003_0000_0000;

/// Posts `n` receive WQEs of one 2 KiB SGE, committing every `per` of
/// them (`n` is a multiple of `per`); wr_id = the running count.
#[inline(never)]
pub fn measured_rq_post(rq: &mut Rq<'static>, first: u64, n: u64, per: u64) {
    let mut i = first;
    while i < first + n {
        for _ in 0..per {
            if let Err(e) = rq.post(i, &[recv_sge(i)]) {
                post_failed(e);
            }
            i += 1;
        }
        rq.commit();
    }
}

/// Posts the first `n` work requests of `wrs` as lists of `per`
/// (`n` is a multiple of `per`), each published by `Rq::post_list`.
#[inline(never)]
pub fn measured_rq_post_list(rq: &mut Rq<'static>, wrs: &[RecvWr], n: usize, per: usize) {
    for list in wrs[..n].chunks_exact(per) {
        if let Err(e) = rq.post_list(list) {
            post_failed(e);
        }
    }
}

/// [`measured_rq_post_list`] on an SRQ (`Srq::post_list`).
#[inline(never)]
pub fn measured_srq_post_list(srq: &mut Srq<'static>, wrs: &[RecvWr], n: usize, per: usize) {
    for list in wrs[..n].chunks_exact(per) {
        if let Err(e) = srq.post_list(list) {
            post_failed(e);
        }
    }
}

/// [`measured_rq_post`] on an SRQ.
#[inline(never)]
pub fn measured_srq_post(srq: &mut Srq<'static>, first: u64, n: u64, per: u64) {
    let mut i = first;
    while i < first + n {
        for _ in 0..per {
            if let Err(e) = srq.post(i, &[recv_sge(i)]) {
                post_failed(e);
            }
            i += 1;
        }
        srq.commit();
    }
}

#[cold]
#[inline(never)]
fn post_failed(e: mlx5dp::rq::RqError) -> ! {
    panic!("receive post failed: {e:?}")
}

/// A cyclic RQ that [`Scenario::prepare`] keeps empty.
struct PostScenario {
    name: &'static str,
    rq: Rq<'static>,
    per: u64,
    next: u64,
}

impl Scenario for PostScenario {
    fn name(&self) -> &'static str {
        self.name
    }
    fn symbol(&self) -> &'static str {
        "*measured_rq_post*"
    }
    fn unit(&self) -> &'static str {
        "WQE"
    }
    fn granule(&self) -> u64 {
        self.per
    }
    fn prepare(&mut self) -> u64 {
        // The device completed everything: retire in order.
        while self.rq.outstanding() > 0 {
            let counter = self.rq.tail() as u16;
            if let Err(e) = self.rq.retire(counter, false) {
                panic!("retire failed: {e:?}");
            }
        }
        u64::from(RQ_WQE_CNT)
    }
    fn measured(&mut self, n: u64) {
        measured_rq_post(&mut self.rq, self.next, n, self.per);
        self.next += n;
    }
}

/// A cyclic RQ that [`Scenario::prepare`] keeps empty, posted by lists
/// from a prepared array of one work request per ring entry.
struct ListScenario {
    name: &'static str,
    rq: Rq<'static>,
    wrs: Vec<RecvWr>,
    per: u64,
}

impl Scenario for ListScenario {
    fn name(&self) -> &'static str {
        self.name
    }
    fn symbol(&self) -> &'static str {
        "*measured_rq_post_list*"
    }
    fn unit(&self) -> &'static str {
        "WQE"
    }
    fn granule(&self) -> u64 {
        self.per
    }
    fn prepare(&mut self) -> u64 {
        while self.rq.outstanding() > 0 {
            let counter = self.rq.tail() as u16;
            if let Err(e) = self.rq.retire(counter, false) {
                panic!("retire failed: {e:?}");
            }
        }
        u64::from(RQ_WQE_CNT)
    }
    fn measured(&mut self, n: u64) {
        measured_rq_post_list(&mut self.rq, &self.wrs, n as usize, self.per as usize);
    }
}

/// An SRQ that [`Scenario::prepare`] keeps empty: it retires what the
/// last measured call posted (the WQEs from the head it left, following
/// the free list, as many as the counter moved).
struct SrqScenario {
    name: &'static str,
    srq: Srq<'static>,
    /// Head and counter when `prepare` last returned.
    head: u16,
    counter: u32,
    per: u64,
    next: u64,
    /// Posted as lists of `per` from these work requests (one per WQE of
    /// the ring), not one by one.
    list: Option<Vec<RecvWr>>,
}

impl Scenario for SrqScenario {
    fn name(&self) -> &'static str {
        self.name
    }
    fn symbol(&self) -> &'static str {
        if self.list.is_some() {
            "*measured_srq_post_list*"
        } else {
            "*measured_srq_post*"
        }
    }
    fn unit(&self) -> &'static str {
        "WQE"
    }
    fn granule(&self) -> u64 {
        self.per
    }
    fn prepare(&mut self) -> u64 {
        // The device completed everything: retire in posting order.
        let posted = self.srq.counter().wrapping_sub(self.counter);
        let mut taken = Vec::with_capacity(posted as usize);
        let mut ind = self.head;
        for _ in 0..posted {
            taken.push(ind);
            ind = self.srq.next_of(ind).expect("link");
        }
        for ind in taken {
            if let Err(e) = self.srq.retire(ind) {
                panic!("SRQ retire failed: {e:?}");
            }
        }
        self.head = self.srq.head();
        self.counter = self.srq.counter();
        // Whole granules (the SRQ holds 255).
        u64::from(self.srq.capacity()) / self.per * self.per
    }
    fn measured(&mut self, n: u64) {
        match &self.list {
            Some(wrs) => measured_srq_post_list(&mut self.srq, wrs, n as usize, self.per as usize),
            None => measured_srq_post(&mut self.srq, self.next, n, self.per),
        }
        self.next += n;
    }
}

fn srq_scenario(name: &'static str, per: u64, list: bool, sse41: bool) -> Box<dyn Scenario> {
    let size = RingSize::new(RQ_WQE_CNT).expect("size");
    let bytes = (RQ_WQE_CNT as usize) << 5;
    let ring = leak_raw(vec![0u128; bytes / 16]).cast::<u8>();
    let dbrec = leak_raw(vec![0u32; 2]);
    let slots: &'static mut [SrqSlot] =
        Box::leak(vec![SrqSlot::EMPTY; RQ_WQE_CNT as usize].into_boxed_slice());
    // SAFETY: `ring` is `bytes` leaked bytes (live for the rest of the
    // process), a power of two, touched only by this queue.
    let ring = unsafe { RingBuf::new(ring, bytes) }.expect("ring");
    // SAFETY: `dbrec` is a leaked, aligned `[u32; 2]`; its first word is
    // the SRQ doorbell record, written only by this queue.
    let dbrec = unsafe { DeviceWord::from_ptr(dbrec) };
    #[cfg_attr(not(target_arch = "x86_64"), allow(unused_mut))]
    let mut srq = Srq::new(ring, size, 5, dbrec, slots).expect("srq");
    #[cfg(target_arch = "x86_64")]
    srq.set_sse41(detected_sse41().filter(|_| sse41));
    #[cfg(not(target_arch = "x86_64"))]
    let _ = sse41;
    Box::new(SrqScenario {
        name,
        head: srq.head(),
        counter: srq.counter(),
        srq,
        per,
        next: 0,
        list: list.then(prepared_wrs),
    })
}

/// A cyclic RQ of [`RQ_WQE_CNT`] one-SGE WQEs over leaked memory.
pub(crate) fn leak_rq() -> Rq<'static> {
    let size = RingSize::new(RQ_WQE_CNT).expect("size");
    let bytes = (RQ_WQE_CNT as usize) << 4;
    let ring = leak_raw(vec![0u128; bytes / 16]).cast::<u8>();
    let dbrec = leak_raw(vec![0u32; 2]);
    let wrid: &'static mut [u64] = Box::leak(vec![0u64; RQ_WQE_CNT as usize].into_boxed_slice());
    // SAFETY: `ring` is `bytes` leaked bytes (live for the rest of the
    // process), a power of two, touched only by this queue.
    let ring = unsafe { RingBuf::new(ring, bytes) }.expect("ring");
    // SAFETY: `dbrec` is a leaked, aligned `[u32; 2]`; its first word is
    // the RQ doorbell record (`MLX5_RCV_DBR`), written only by this queue.
    let dbrec = unsafe { DeviceWord::from_ptr(dbrec) };
    Rq::new(ring, size, 4, dbrec, wrid, 0).expect("rq")
}

/// One receive SGE of the benchmarks: 2 KiB at a buffer of `i`.
pub(crate) fn recv_sge(i: u64) -> Sge {
    Sge {
        addr: ADDR + ((i & 0xff) << 11),
        length: 2048,
        lkey: LKEY,
    }
}

fn post_scenario(name: &'static str, per: u64) -> Box<dyn Scenario> {
    Box::new(PostScenario {
        name,
        rq: leak_rq(),
        per,
        next: 0,
    })
}

/// The list scenarios' work requests: one per WQE of the ring, a buffer
/// each, wr_id = its index.
fn prepared_wrs() -> Vec<RecvWr> {
    (0..u64::from(RQ_WQE_CNT))
        .map(|i| RecvWr {
            wr_id: i,
            sge: recv_sge(i),
        })
        .collect()
}

/// The SSE4.1 proof where this CPU has SSE4.1.
#[cfg(target_arch = "x86_64")]
fn detected_sse41() -> Option<mlx5dp::cpu::Sse41> {
    // SAFETY: the token is made only where SSE4.1 was detected on this CPU.
    std::is_x86_feature_detected!("sse4.1").then(|| unsafe { mlx5dp::cpu::Sse41::new_unchecked() })
}

/// `rq/post_recv_list32*`: lists of 32 from the prepared work requests,
/// with or without the SSE4.1 segment builder (`Rq::set_sse41`).
fn list_scenario(name: &'static str, sse41: bool) -> Box<dyn Scenario> {
    #[cfg_attr(not(target_arch = "x86_64"), allow(unused_mut))]
    let mut rq = leak_rq();
    #[cfg(target_arch = "x86_64")]
    rq.set_sse41(detected_sse41().filter(|_| sse41));
    #[cfg(not(target_arch = "x86_64"))]
    let _ = sse41;
    Box::new(ListScenario {
        name,
        rq,
        wrs: prepared_wrs(),
        per: 32,
    })
}

/// Every receive-queue scenario (`rq/post_recv_list32_sse41` where the CPU
/// has SSE4.1).
pub fn all() -> Vec<Box<dyn Scenario>> {
    #[cfg_attr(not(target_arch = "x86_64"), allow(unused_mut))]
    let mut all = vec![
        post_scenario("rq/post_recv1", 1),
        post_scenario("rq/post_recv32", 32),
        list_scenario("rq/post_recv_list32", false),
        srq_scenario("rq/post_srq_recv1", 1, false, false),
        srq_scenario("rq/post_srq_recv32", 32, false, false),
        srq_scenario("rq/post_srq_recv_list32", 32, true, false),
    ];
    #[cfg(target_arch = "x86_64")]
    if detected_sse41().is_some() {
        all.insert(3, list_scenario("rq/post_recv_list32_sse41", true));
        all.push(srq_scenario(
            "rq/post_srq_recv_list32_sse41",
            32,
            true,
            true,
        ));
    }
    all
}
