//! Queue pairs, receive queues and shared receive queues as the device
//! keeps them, and the raw parts handed to the core.
//!
//! Receive WQE formats (PRM-FACTS §8): a cyclic RQ WQE is an array of data
//! segments, terminated early by `lkey = MLX5_INVALID_LKEY` (0x100); an SRQ
//! WQE is an SRQ next segment then data segments, linked by
//! `next_wqe_index`; a striding-RQ WQE is a next segment and one data
//! segment covering all strides.
#![forbid(unsafe_code)]

use super::cq::CompressionCfg;
use super::mem::DmaBlock;
use super::{Access, Cqn, EmuEvent, Pdn, QpState, QpType, Qpn, Srqn, Xrcdn};
use mlx5dp::index::RingSize;
use mlx5dp::prm::{DataSeg, SrqNextSeg, INVALID_LKEY};
use std::sync::Arc;
use zerocopy::FromBytes;

/// Raw parts of a send queue: what the core's SQ constructor needs.
#[derive(Clone, Copy, Debug)]
pub struct EmuSqParts {
    /// QP number (the control segment's QPN).
    pub qpn: u32,
    /// The WQE ring.
    pub buf: *mut u8,
    /// Ring size in WQEBBs (a power of two).
    pub wqe_cnt: u32,
    /// Bytes per WQEBB (64).
    pub stride: u32,
    /// The QP doorbell record: `[0]` RQ counter, `[1]` SQ counter (BE32 each).
    pub dbrec: *mut u32,
    /// The UAR page.
    pub uar: *mut u8,
    /// The doorbell/BlueFlame register (UAR + 0x800).
    pub bf_reg: *mut u8,
    /// Size of one BlueFlame half (`bf_reg_size / 2`); the core toggles
    /// between `bf_reg` and `bf_reg + bf_size`.
    pub bf_size: u32,
    /// Largest inline payload the QP was created for.
    pub max_inline: u32,
    /// Largest gather list the QP was created for.
    pub max_sge: u32,
}

/// The kind of a receive queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EmuRqKind {
    /// Cyclic RQ of data-segment arrays.
    Cyclic,
    /// Shared receive queue (linked list).
    Srq,
    /// Striding (multi-packet) RQ.
    Striding {
        /// log2 of strides per WQE.
        log_num_strides: u8,
        /// log2 of bytes per stride.
        log_stride_bytes: u8,
    },
}

/// Raw parts of a receive queue or SRQ.
#[derive(Clone, Copy, Debug)]
pub struct EmuRqParts {
    /// QP number (RQ) or SRQ number.
    pub num: u32,
    /// The WQE ring.
    pub buf: *mut u8,
    /// Number of WQEs (a power of two).
    pub wqe_cnt: u32,
    /// Bytes per WQE (a power of two).
    pub stride: u32,
    /// Doorbell record: the QP's `[0]` (RQ), or the SRQ's single word.
    pub dbrec: *mut u32,
    /// Kind.
    pub kind: EmuRqKind,
}

/// Raw parts of a completion queue.
#[derive(Clone, Copy, Debug)]
pub struct EmuCqParts {
    /// CQ number.
    pub cqn: u32,
    /// The CQE ring.
    pub buf: *mut u8,
    /// Number of CQEs (a power of two).
    pub cqe_cnt: u32,
    /// Bytes per CQE (64 or 128).
    pub cqe_size: u32,
    /// Doorbell record: `[0]` consumer index, `[1]` arm word (BE32 each).
    pub dbrec: *mut u32,
    /// The UAR page (arm doorbell at + 0x20).
    pub uar: *mut u8,
    /// Compression, if the CQ was created with it.
    pub compression: Option<CompressionCfg>,
}

/// The device side of a send queue.
#[derive(Debug)]
pub struct Sq {
    /// The WQE ring.
    pub ring: Arc<DmaBlock>,
    /// Ring size in WQEBBs.
    pub size: RingSize,
    /// WQEBBs consumed (free-running; the low 16 bits are the WQE index).
    pub ci: u32,
    /// The QP's UAR page.
    pub uar: Arc<DmaBlock>,
    /// BlueFlame half size.
    pub bf_size: u32,
    /// Creation limits.
    pub max_inline: u32,
    /// Creation limits.
    pub max_sge: u32,
    /// A doorbell (or an RNR wait) asks the next step to process this SQ.
    pub rung: bool,
}

/// Striding parameters and position of a striding RQ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Striding {
    /// log2 of strides per WQE.
    pub log_num_strides: u8,
    /// log2 of bytes per stride.
    pub log_stride_bytes: u8,
    /// Next free stride in the current WQE.
    pub pos: u32,
}

/// The device side of a cyclic or striding RQ.
#[derive(Debug)]
pub struct Rq {
    /// The WQE ring.
    pub ring: Arc<DmaBlock>,
    /// Number of WQEs.
    pub size: RingSize,
    /// Bytes per WQE.
    pub stride: u32,
    /// WQEs consumed (free-running).
    pub ci: u32,
    /// Striding RQ parameters.
    pub striding: Option<Striding>,
}

/// Where a QP's receives come from.
#[derive(Debug)]
pub enum RqAttach {
    /// No receive queue (XRC initiator, send-only).
    None,
    /// Its own RQ.
    Own(Rq),
    /// A shared receive queue.
    Srq(Srqn),
}

/// Attributes set by `modify_qp`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpAttrs {
    /// Remote access the QP accepts (`qp_access_flags`).
    pub access: Access,
    /// Q_Key (UD).
    pub qkey: u32,
    /// Connected peer.
    pub dest_qpn: Option<Qpn>,
    /// Transport retries.
    pub retry_cnt: u8,
    /// RNR retries (7 = infinite).
    pub rnr_retry: u8,
}

/// An emulated QP.
#[derive(Debug)]
pub struct Qp {
    /// Number.
    pub qpn: Qpn,
    /// Type.
    pub qp_type: QpType,
    /// State.
    pub state: QpState,
    /// Protection domain.
    pub pd: Pdn,
    /// Send CQ.
    pub send_cq: Option<Cqn>,
    /// Receive CQ.
    pub recv_cq: Option<Cqn>,
    /// XRC domain (XRC target).
    pub xrcd: Option<Xrcdn>,
    /// Send queue.
    pub sq: Option<Sq>,
    /// Receive side.
    pub rq: RqAttach,
    /// Doorbell record (RQ at 0, SQ at 4).
    pub dbrec: Arc<DmaBlock>,
    /// Attributes.
    pub attrs: QpAttrs,
    /// Strip C-VLAN tags on receive (raw Ethernet).
    pub vlan_strip: bool,
}

/// An emulated SRQ (plain or XRC).
#[derive(Debug)]
pub struct Srq {
    /// Number.
    pub srqn: Srqn,
    /// Protection domain.
    pub pd: Pdn,
    /// CQ of an XRC SRQ.
    pub cq: Option<Cqn>,
    /// XRC domain of an XRC SRQ.
    pub xrcd: Option<Xrcdn>,
    /// The WQE ring.
    pub ring: Arc<DmaBlock>,
    /// Number of WQEs.
    pub size: RingSize,
    /// Bytes per WQE.
    pub stride: u32,
    /// Doorbell record: one BE32 WQE counter.
    pub dbrec: Arc<DmaBlock>,
    /// Head of the free list the device takes from.
    pub head: u16,
    /// WQEs consumed (free-running).
    pub consumed: u32,
}

/// A receive WQE taken from a queue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecvWqe {
    /// WQE counter for the CQE (cyclic: counter & 0xffff; SRQ: index).
    pub counter: u16,
    /// Scatter list: (addr, lkey, len), zero-length entries dropped.
    pub sges: Vec<(u64, u32, u32)>,
}

/// Reads data segments from `bytes` until the terminator or the end.
fn scatter_list(bytes: &[u8]) -> Vec<(u64, u32, u32)> {
    let mut out = Vec::new();
    for chunk in bytes.chunks_exact(DataSeg::SIZE) {
        let Ok(d) = DataSeg::read_from_bytes(chunk) else {
            break;
        };
        if d.lkey.get() == INVALID_LKEY {
            break;
        }
        let len = d.byte_count.get() & 0x7fff_ffff;
        if len != 0 {
            out.push((d.addr.get(), d.lkey.get(), len));
        }
    }
    out
}

/// How many WQEs a 16-bit doorbell counter publishes beyond `ci`;
/// `None` when it claims more than the ring holds.
pub fn available(db16: u32, ci: u32, size: RingSize) -> Option<u32> {
    let n = (db16 as u16).wrapping_sub(ci as u16);
    (u32::from(n) <= size.entries()).then_some(u32::from(n))
}

impl Rq {
    /// WQEs published and not yet consumed; reports a doorbell overrun.
    pub fn available(&self, dbrec: &DmaBlock, num: u32, events: &mut Vec<EmuEvent>) -> u32 {
        let db = dbrec.load_be32_acquire(0).unwrap_or(0);
        available(db, self.ci, self.size).unwrap_or_else(|| {
            events.push(EmuEvent::RqDoorbellOverrun { num });
            0
        })
    }

    /// The WQE at `ci` (not consumed).
    pub fn peek(&self) -> RecvWqe {
        let mut bytes = vec![0u8; self.stride as usize];
        let off = self.size.slot(self.ci) * self.stride as usize;
        let _ = self.ring.read(off, &mut bytes);
        RecvWqe {
            counter: self.ci as u16,
            sges: scatter_list(&bytes),
        }
    }

    /// The striding-RQ WQE's buffer at `ci`: (addr, lkey, byte_count).
    pub fn peek_striding(&self) -> (u64, u32, u32) {
        let mut bytes = [0u8; 32];
        let off = self.size.slot(self.ci) * self.stride as usize;
        let _ = self.ring.read(off, &mut bytes);
        match DataSeg::read_from_bytes(&bytes[16..32]) {
            Ok(d) => (d.addr.get(), d.lkey.get(), d.byte_count.get()),
            Err(_) => (0, INVALID_LKEY, 0),
        }
    }
}

impl Srq {
    /// WQEs published and not yet consumed.
    pub fn available(&self, events: &mut Vec<EmuEvent>) -> u32 {
        let db = self.dbrec.load_be32_acquire(0).unwrap_or(0);
        available(db, self.consumed, self.size).unwrap_or_else(|| {
            events.push(EmuEvent::RqDoorbellOverrun { num: self.srqn.0 });
            0
        })
    }

    /// The WQE at the head of the list (not consumed), and its next index.
    pub fn peek(&self) -> (RecvWqe, u16) {
        let mut bytes = vec![0u8; self.stride as usize];
        let slot = usize::from(self.head) & self.size.mask() as usize;
        let _ = self.ring.read(slot * self.stride as usize, &mut bytes);
        let next = SrqNextSeg::read_from_bytes(&bytes[..SrqNextSeg::SIZE])
            .map(|n| n.next_wqe_index.get())
            .unwrap_or(0);
        let wqe = RecvWqe {
            counter: self.head,
            sges: scatter_list(&bytes[SrqNextSeg::SIZE..]),
        };
        (wqe, next)
    }

    /// Consumes the head WQE: the list moves to `next`.
    pub fn consume(&mut self, next: u16) {
        self.head = next & self.size.mask() as u16;
        self.consumed = self.consumed.wrapping_add(1);
    }
}
