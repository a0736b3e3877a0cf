//! Where the perf tests' queues come from: the core's [`Cq`], [`SendQueue`]
//! and [`Rq`] built over the raw parts a [`Backend`] hands out, and a
//! striding-RQ poster (the core has none yet; DPDK `mlx5_rxq_mprq`).
//!
//! This is the only module of [`super`] with `unsafe`: the core's
//! constructors over raw parts. The parts' owners ([`CoreCq`], [`QpHandle`])
//! are leaked, so the memory the queues borrow lives as long as the
//! process (a few kilobytes per queue; a perf run creates a handful).

use super::PerfError;
use crate::backend::{Backend, BackendError, QpHandle};
use crate::emu::{CompressionCfg, CoreCq, CqInit, CqeSize, EmuRqKind, QpInit};
use mlx5dp::cq::Cq;
use mlx5dp::rq::{MprqSlot, Rq, StridingParams, StridingRq as CoreStridingRq};
use mlx5dp::sq::{DoorbellPolicy, QpKind, SendQueue, SqShadowEntry, Wqebb};

/// Moves `t` to the heap for the rest of the process.
pub fn leak<T>(t: T) -> &'static mut T {
    Box::leak(Box::new(t))
}

/// The error of a backend call `verb`: status 2 when the device cannot do
/// it (a missing capability, an emulator-only feature on hardware), 1
/// otherwise.
pub fn backend_error(verb: &str, e: BackendError) -> PerfError {
    if e.is_unavailable() {
        PerfError::usage(format!("{verb}: {e}"))
    } else {
        PerfError::setup(verb, e)
    }
}

/// Creates a CQ of `cqe_cnt` 64-byte CQEs and builds the core's poller on it.
pub fn cq<B: Backend + ?Sized>(
    be: &mut B,
    cqe_cnt: u32,
    compression: Option<CompressionCfg>,
    striding_rq: bool,
) -> Result<Cq, PerfError> {
    Ok(cq_with_owner(be, cqe_cnt, compression, striding_rq)?.1)
}

/// Like [`cq`], also returning the (leaked) owner of the CQ's parts, for
/// whoever needs to look at the ring itself (`mlx5dp trace record`).
pub fn cq_with_owner<B: Backend + ?Sized>(
    be: &mut B,
    cqe_cnt: u32,
    compression: Option<CompressionCfg>,
    striding_rq: bool,
) -> Result<(&'static CoreCq, Cq), PerfError> {
    let parts: &'static CoreCq = leak(
        be.create_cq(CqInit {
            cqe_cnt,
            cqe_size: CqeSize::B64,
            compression,
            ignore_overrun: false,
        })
        .map_err(|e| backend_error("create_cq", e))?,
    );
    let cfg = parts.config(striding_rq);
    // SAFETY: the parts come from the device for this new CQ; their memory
    // is kept alive by `parts`, leaked for the life of the process; this
    // `Cq` is the only software that polls it.
    let cq = unsafe { Cq::from_raw_parts(parts.raw_parts(), cfg, 0) }
        .map_err(|e| PerfError::setup("Cq::from_raw_parts", format!("{e:?}")))?;
    Ok((parts, cq))
}

/// Creates a QP (in RESET).
pub fn qp<B: Backend + ?Sized>(be: &mut B, init: QpInit) -> Result<&'static QpHandle, PerfError> {
    Ok(leak(
        be.create_qp(init)
            .map_err(|e| backend_error("create_qp", e))?,
    ))
}

/// The core's send queue of `h`, with a full-ring shadow and staging area;
/// `adjust` may change the configuration derived from the QP first.
pub fn send_queue<B: Backend + ?Sized, P: DoorbellPolicy, Q: QpKind>(
    be: &B,
    h: &'static QpHandle,
    adjust: impl FnOnce(&mut mlx5dp::sq::SqConfig),
) -> Result<SendQueue<'static, P, Q>, PerfError> {
    let sq =
        h.sq.as_ref()
            .ok_or_else(|| PerfError::setup("send_queue", "the QP has no send queue"))?;
    let n = sq.emu_parts().wqe_cnt as usize;
    let shadow = leak(vec![SqShadowEntry::EMPTY; n]).as_mut_slice();
    let staging = leak(vec![Wqebb::ZERO; n.max(16)]).as_mut_slice();
    let mut cfg = sq.config(&be.caps());
    adjust(&mut cfg);
    // SAFETY: the parts come from the device for this QP and stay alive
    // (the handle is leaked); this is the only queue built on them, and
    // nothing else posts to the QP.
    unsafe { SendQueue::new_typed(sq.raw_parts(), cfg, shadow, staging) }
        .map_err(|e| PerfError::setup("SendQueue::new", format!("{e:?}")))
}

/// The core's cyclic receive queue of `h`. Call once per QP.
pub fn recv_queue(h: &'static QpHandle) -> Result<Rq<'static>, PerfError> {
    let rq =
        h.rq.as_ref()
            .ok_or_else(|| PerfError::setup("recv_queue", "the QP has no receive queue"))?;
    // SAFETY: called once per QP (each test builds one queue per QP); the
    // handle, and so the memory, is leaked.
    let p =
        unsafe { rq.raw_parts() }.ok_or_else(|| PerfError::setup("recv_queue", "bad RQ parts"))?;
    let wrid = leak(vec![0u64; p.size.entries() as usize]).as_mut_slice();
    #[cfg_attr(not(target_arch = "x86_64"), allow(unused_mut))]
    let mut rq = Rq::new(p.ring, p.size, p.wqe_shift, p.dbrec, wrid, 0)
        .map_err(|e| PerfError::setup("Rq::new", format!("{e:?}")))?;
    #[cfg(target_arch = "x86_64")]
    rq.set_sse41(crate::cpu::sse41());
    Ok(rq)
}

/// A striding (multi-packet) RQ: the core's [`CoreStridingRq`] over the
/// parts of `h`'s RQ, WQE `i` of the ring posted on region `i` of the
/// receive buffer, re-posted by the core when its strides are all
/// consumed (DPDK `mlx5_rx_burst_mprq`'s model).
#[derive(Debug)]
pub struct StridingRq {
    rq: CoreStridingRq<'static>,
    base: u64,
    lkey: u32,
}

impl StridingRq {
    /// A poster over `h`'s striding RQ receiving into `len` bytes at device
    /// address `base` (key `lkey`). Call once per QP.
    pub fn new(h: &'static QpHandle, base: u64, lkey: u32, len: usize) -> Result<Self, PerfError> {
        let rq =
            h.rq.as_ref()
                .ok_or_else(|| PerfError::setup("striding RQ", "the QP has no receive queue"))?;
        // SAFETY: called once per QP; the handle (and the memory) is leaked.
        let parts = unsafe { rq.raw_parts() }
            .ok_or_else(|| PerfError::setup("striding RQ", "bad RQ parts"))?;
        let EmuRqKind::Striding {
            log_num_strides,
            log_stride_bytes,
        } = parts.kind
        else {
            return Err(PerfError::setup("striding RQ", "not a striding RQ"));
        };
        let params = StridingParams {
            log_num_strides,
            log_stride_bytes,
        };
        let n = parts.size.entries() as usize;
        if len < n * params.wqe_bytes() as usize {
            return Err(PerfError::setup("striding RQ", "receive buffer too small"));
        }
        let slots = leak(vec![MprqSlot::EMPTY; n]).as_mut_slice();
        let rq = CoreStridingRq::new(parts.ring, parts.size, params, parts.dbrec, slots)
            .map_err(|e| PerfError::setup("StridingRq::new", format!("{e:?}")))?;
        Ok(Self { rq, base, lkey })
    }

    /// The core's striding RQ (for [`Cq::poll_strided`]).
    pub fn core(&mut self) -> &mut CoreStridingRq<'static> {
        &mut self.rq
    }

    /// Bytes of one WQE's buffer.
    pub fn wqe_bytes(&self) -> usize {
        self.rq.params().wqe_bytes() as usize
    }

    /// Strides per WQE.
    pub fn num_strides(&self) -> u32 {
        self.rq.params().num_strides()
    }

    /// Bytes per stride.
    pub fn stride_bytes(&self) -> u32 {
        self.rq.params().stride_bytes()
    }

    /// WQEs in the ring.
    pub fn entries(&self) -> u32 {
        self.rq.entries()
    }

    /// WQEs posted and not done.
    pub fn outstanding(&self) -> u32 {
        self.rq.outstanding()
    }

    /// Strides still free in the WQEs posted (the device's credit).
    pub fn free_strides(&self) -> u32 {
        (self.outstanding() * self.num_strides()).saturating_sub(self.rq.consumed_strides())
    }

    /// Posts WQEs until the ring is full (WQE `i` on region `i % entries`
    /// of the buffer), then publishes them and the core's re-posts;
    /// returns how many were posted.
    pub fn refill(&mut self) -> u32 {
        let mut n = 0;
        while self.outstanding() < self.entries() {
            let region = self.rq.head() % self.entries();
            let addr = self.base + u64::from(region) * self.wqe_bytes() as u64;
            if self.rq.post(u64::from(region), addr, self.lkey).is_err() {
                break;
            }
            n += 1;
        }
        self.rq.commit();
        n
    }

    /// Offset in the receive buffer of the packet at device address `addr`.
    pub fn offset_of(&self, addr: u64) -> usize {
        addr.wrapping_sub(self.base) as usize
    }
}
