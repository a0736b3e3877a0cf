//! The emulated device's raw parts as the core takes them: an SQ's
//! [`SqRawParts`], a CQ's [`CqParts`] and [`CqConfig`], a receive queue's
//! ring and doorbell word ([`RqRawParts`]).
//!
//! The core is built over the same parts `mlx5dv_init_obj` hands out and
//! knows nothing of the emulator (STYLE point 1); this module is the seam.
//! Each owner ([`CoreSq`], [`CoreCq`], [`CoreRq`]) holds the pointers and a
//! reference to the device's memory blocks, so the rings, doorbell records
//! and UAR pages stay allocated for as long as the owner lives, even after
//! the device destroys the object. The core's constructors stay `unsafe`:
//! only their caller can promise that one queue owns the parts.
//!
//! This is, with [`super::mem`], the only module of `emu` with `unsafe`:
//! turning the parts' pointers into the core's typed views.

use super::cq::{CompressionCfg, CompressionLayout, CqeSize};
use super::mem::DmaBlock;
use super::qp::{EmuCqParts, EmuRqKind, EmuRqParts, EmuSqParts};
use super::{Caps, Cqn, Device, EmuError, QpType, Qpn, Srqn};
use mlx5dp::cq::{CqConfig, CqParts, Layout, TimestampFormat};
use mlx5dp::index::RingSize;
use mlx5dp::mmio::DeviceWord;
use mlx5dp::ring::RingBuf;
use mlx5dp::sq::{self, SqConfig, SqRawParts};
use std::ptr::NonNull;
use std::sync::Arc;

/// The device memory behind some raw parts, kept alive by reference.
#[derive(Clone, Debug)]
pub struct KeepAlive {
    _blocks: Vec<Arc<DmaBlock>>,
}

/// A send queue's parts for [`mlx5dp::sq::SendQueue::new`].
#[derive(Debug)]
pub struct CoreSq {
    parts: EmuSqParts,
    qp_type: QpType,
    _keep: KeepAlive,
}

/// A completion queue's parts for [`mlx5dp::cq::Cq::from_raw_parts`].
#[derive(Debug)]
pub struct CoreCq {
    parts: EmuCqParts,
    _keep: KeepAlive,
}

/// A receive queue's parts (cyclic RQ, SRQ or striding RQ).
#[derive(Debug)]
pub struct CoreRq {
    parts: EmuRqParts,
    _keep: KeepAlive,
}

/// The raw parts of a receive queue, as the core's [`mlx5dp::rq::Rq::new`]
/// takes them (and as an SRQ or striding-RQ poster needs them).
#[derive(Debug)]
pub struct RqRawParts<'a> {
    /// The WQE ring.
    pub ring: RingBuf<'a>,
    /// Number of WQEs.
    pub size: RingSize,
    /// log2 of the WQE stride in bytes.
    pub wqe_shift: u8,
    /// The doorbell-record word (the QP's `dbrec[MLX5_RCV_DBR]`, or the
    /// SRQ's record).
    pub dbrec: &'a DeviceWord<u32>,
    /// Which kind of queue.
    pub kind: EmuRqKind,
    /// QP number (RQ) or SRQ number.
    pub num: u32,
}

impl Device {
    /// The core's view of `qpn`'s send queue.
    pub fn core_sq(&self, qpn: Qpn) -> Result<CoreSq, EmuError> {
        let parts = self.sq_parts(qpn)?;
        let qp_type = self
            .qp_type(qpn)
            .ok_or_else(|| EmuError::not_found("core_sq"))?;
        let keep = self
            .qp_blocks(qpn)
            .ok_or_else(|| EmuError::not_found("core_sq"))?;
        Ok(CoreSq {
            parts,
            qp_type,
            _keep: KeepAlive { _blocks: keep },
        })
    }

    /// The core's view of a CQ.
    pub fn core_cq(&self, cqn: Cqn) -> Result<CoreCq, EmuError> {
        let parts = self.cq_parts(cqn)?;
        let keep = self
            .cq_blocks(cqn)
            .ok_or_else(|| EmuError::not_found("core_cq"))?;
        Ok(CoreCq {
            parts,
            _keep: KeepAlive { _blocks: keep },
        })
    }

    /// The core's view of `qpn`'s own receive queue (cyclic or striding).
    pub fn core_rq(&self, qpn: Qpn) -> Result<CoreRq, EmuError> {
        let parts = self.rq_parts(qpn)?;
        let keep = self
            .qp_blocks(qpn)
            .ok_or_else(|| EmuError::not_found("core_rq"))?;
        Ok(CoreRq {
            parts,
            _keep: KeepAlive { _blocks: keep },
        })
    }

    /// The core's view of an SRQ.
    pub fn core_srq(&self, srqn: Srqn) -> Result<CoreRq, EmuError> {
        let parts = self.srq_parts(srqn)?;
        let keep = self
            .srq_blocks(srqn)
            .ok_or_else(|| EmuError::not_found("core_srq"))?;
        Ok(CoreRq {
            parts,
            _keep: KeepAlive { _blocks: keep },
        })
    }
}

/// The core's QP type of an emulated QP type (`None`: no send queue).
pub fn core_qp_type(t: QpType) -> Option<sq::QpType> {
    Some(match t {
        QpType::Rc => sq::QpType::Rc,
        QpType::Uc => sq::QpType::Uc,
        QpType::Ud => sq::QpType::Ud,
        QpType::XrcIni => sq::QpType::Xrc,
        QpType::RawPacket => sq::QpType::RawPacket,
        QpType::XrcTgt => return None,
    })
}

impl CoreSq {
    /// The emulator's parts.
    pub fn emu_parts(&self) -> &EmuSqParts {
        &self.parts
    }

    /// QP number.
    pub fn qpn(&self) -> u32 {
        self.parts.qpn
    }

    /// The raw parts, borrowed from `self` (which keeps the memory alive).
    pub fn raw_parts(&self) -> SqRawParts<'_> {
        // The SQ word is the second of the QP's doorbell record (MLX5_SND_DBR).
        let snd = self.parts.dbrec.wrapping_add(1);
        // SAFETY: `snd` points into the QP's 64-byte, 64-aligned doorbell
        // block, which `_keep` holds for as long as the borrow of `self`;
        // it is 4-aligned; the device accesses it only atomically (`mem`),
        // and the core only through `DeviceWord`s.
        let dbrec = unsafe { DeviceWord::from_ptr(snd) };
        SqRawParts {
            // The device allocates every ring: never null.
            buf: NonNull::new(self.parts.buf).unwrap_or(NonNull::dangling()),
            wqe_cnt: self.parts.wqe_cnt,
            dbrec,
            bf_reg: NonNull::new(self.parts.bf_reg).unwrap_or(NonNull::dangling()),
            bf_buf_size: self.parts.bf_size,
        }
    }

    /// The settings the QP was created with, as [`SqConfig`]: limits from
    /// the QP, atomics on RC/XRC, the raw-Ethernet options from `caps`.
    pub fn config(&self, caps: &Caps) -> SqConfig {
        let t = core_qp_type(self.qp_type).unwrap_or(sq::QpType::Rc);
        let mut c = SqConfig::new(t, self.parts.qpn, self.parts.max_inline, self.parts.max_sge);
        c.atomics = matches!(t, sq::QpType::Rc | sq::QpType::Xrc);
        if t == sq::QpType::RawPacket {
            c.raw_csum = true;
            c.eth_min_inline = if caps.eth_min_inline > 0 { 18 } else { 0 };
            c.max_tso_header = caps.max_tso_header;
        }
        c
    }
}

impl CoreCq {
    /// The emulator's parts.
    pub fn emu_parts(&self) -> &EmuCqParts {
        &self.parts
    }

    /// CQ number.
    pub fn cqn(&self) -> u32 {
        self.parts.cqn
    }

    /// The raw parts. They carry no lifetime: the caller of
    /// [`mlx5dp::cq::Cq::from_raw_parts`] must keep `self` alive for as
    /// long as the `Cq` lives.
    pub fn raw_parts(&self) -> CqParts {
        CqParts {
            buf: NonNull::new(self.parts.buf).unwrap_or(NonNull::dangling()),
            cqe_cnt: self.parts.cqe_cnt,
            cqe_size: if self.parts.cqe_size == CqeSize::B128.bytes() as u32 {
                mlx5dp::cq::CqeSize::B128
            } else {
                mlx5dp::cq::CqeSize::B64
            },
            dbrec: NonNull::new(self.parts.dbrec).unwrap_or(NonNull::dangling()),
            uar: NonNull::new(self.parts.uar),
            cqn: self.parts.cqn,
        }
    }

    /// The CQ configuration matching how the device writes this CQ
    /// (compression layout and format); `striding_rq` as the caller says.
    pub fn config(&self, striding_rq: bool) -> CqConfig {
        CqConfig {
            compression: self.parts.compression.map(core_compression),
            striding_rq,
            timestamp: TimestampFormat::RealTime,
            unzip: crate::cpu::best_unzip(),
        }
    }
}

/// The core's compression setting for an emulated one.
pub fn core_compression(c: CompressionCfg) -> (Layout, mlx5dp::prm::MiniCqeFormat) {
    let layout = match c.layout {
        CompressionLayout::Basic => Layout::Basic,
        CompressionLayout::Enhanced => Layout::Enhanced,
    };
    (layout, c.format)
}

impl CoreRq {
    /// The emulator's parts.
    pub fn emu_parts(&self) -> &EmuRqParts {
        &self.parts
    }

    /// The raw parts, borrowed from `self`.
    ///
    /// # Safety
    ///
    /// While the returned parts (or a queue built on them) live, nothing
    /// else in this process writes the ring: call this once per queue.
    pub unsafe fn raw_parts(&self) -> Option<RqRawParts<'_>> {
        let size = RingSize::new(self.parts.wqe_cnt)?;
        if !self.parts.stride.is_power_of_two() {
            return None;
        }
        let len = (self.parts.wqe_cnt as usize).checked_mul(self.parts.stride as usize)?;
        // SAFETY: the ring is `wqe_cnt * stride` bytes of a device block
        // `_keep` holds for the borrow of `self`; the caller promises no
        // other writer in this process; the device only reads it.
        let ring = unsafe { RingBuf::new(self.parts.buf, len) }?;
        // SAFETY: word 0 of the QP's doorbell block (MLX5_RCV_DBR) or the
        // SRQ's record: 4-aligned, alive for the borrow (`_keep`), accessed
        // by the device only atomically.
        let dbrec = unsafe { DeviceWord::from_ptr(self.parts.dbrec) };
        Some(RqRawParts {
            ring,
            size,
            wqe_shift: self.parts.stride.trailing_zeros() as u8,
            dbrec,
            kind: self.parts.kind,
            num: self.parts.num,
        })
    }
}
