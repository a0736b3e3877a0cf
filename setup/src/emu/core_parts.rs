//! The raw parts as the core takes them: an SQ's [`SqRawParts`], a CQ's
//! [`CqParts`] and [`CqConfig`], a receive queue's ring and doorbell word
//! ([`RqRawParts`]), from either backend.
//!
//! The core is built over the same parts `mlx5dv_init_obj` hands out and
//! knows nothing of the emulator (STYLE point 1); this module is the seam.
//! Each owner ([`CoreSq`], [`CoreCq`], [`CoreRq`]) holds the pointers and a
//! [`KeepAlive`]: the emulated device's memory blocks, or the `verbs`
//! backend's RAII owner of the QP, CQ or SRQ (`crate::verbs`). So the rings,
//! doorbell records and UAR pages stay mapped for as long as the owner
//! lives, whichever backend made them, even after the backend itself is
//! dropped. The plain-data part structs ([`EmuSqParts`], [`EmuCqParts`],
//! [`EmuRqParts`]) carry no emulator state: the `verbs` backend fills them
//! from `mlx5dv_qp`/`mlx5dv_cq`/`mlx5dv_srq` (same fields, same meaning).
//! The core's constructors stay `unsafe`: only their caller can promise
//! that one queue owns the parts.
//!
//! This is, with [`super::mem`], the only module of `emu` with `unsafe`:
//! turning the parts' pointers into the core's typed views, and the
//! constructors whose callers vouch for the pointers.

use super::cq::{CompressionCfg, CompressionLayout, CqeSize};
use super::qp::{EmuCqParts, EmuRqKind, EmuRqParts, EmuSqParts};
use super::{Caps, Cqn, Device, EmuError, QpType, Qpn, Srqn};
use mlx5dp::cq::{CqConfig, CqParts, Layout, TimestampFormat};
use mlx5dp::index::RingSize;
use mlx5dp::mmio::DeviceWord;
use mlx5dp::ring::RingBuf;
use mlx5dp::sq::{self, SqConfig, SqRawParts};
use std::fmt;
use std::ptr::NonNull;
use std::sync::Arc;

/// Whatever keeps the memory behind some raw parts allocated and mapped:
/// the emulated device's blocks, or a `verbs` owner (`Arc` of the QP, CQ or
/// SRQ, which in turn holds its PD and device context). Cheap to clone.
#[derive(Clone)]
pub struct KeepAlive(Arc<dyn fmt::Debug + Send + Sync>);

impl KeepAlive {
    /// Keeps `owner` alive for as long as this value (or a clone) lives.
    pub fn new(owner: impl fmt::Debug + Send + Sync + 'static) -> Self {
        Self(Arc::new(owner))
    }
}

impl fmt::Debug for KeepAlive {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("KeepAlive").field(&self.0).finish()
    }
}

/// A send queue's parts for [`mlx5dp::sq::SendQueue::new`].
#[derive(Debug)]
pub struct CoreSq {
    parts: EmuSqParts,
    qp_type: QpType,
    /// The backend's own configuration (`verbs`: from what the provider
    /// granted); `None`: derived from the parts and the caps.
    config: Option<SqConfig>,
    _keep: KeepAlive,
}

/// A completion queue's parts for [`mlx5dp::cq::Cq::from_raw_parts`].
#[derive(Debug)]
pub struct CoreCq {
    parts: EmuCqParts,
    timestamp: TimestampFormat,
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
            config: None,
            _keep: KeepAlive::new(keep),
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
            timestamp: TimestampFormat::RealTime,
            _keep: KeepAlive::new(keep),
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
            _keep: KeepAlive::new(keep),
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
            _keep: KeepAlive::new(keep),
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
    /// An SQ owner over parts another backend extracted.
    ///
    /// # Safety
    ///
    /// `parts` describes one live send queue: `buf` is `wqe_cnt` 64-byte
    /// WQEBBs, `dbrec` the 64-byte-aligned QP doorbell record (word 1 is
    /// the SQ counter), `bf_reg` the doorbell/BlueFlame register with
    /// `2 * bf_size` bytes mapped (or 8 when `bf_size` is 0), all valid
    /// for as long as `keep` lives; the device accesses them only as the
    /// hardware does (DMA, MMIO) or atomically.
    pub unsafe fn from_parts(
        parts: EmuSqParts,
        qp_type: QpType,
        config: Option<SqConfig>,
        keep: KeepAlive,
    ) -> Self {
        Self {
            parts,
            qp_type,
            config,
            _keep: keep,
        }
    }

    /// The plain parts (the emulator's names; `verbs` fills the same
    /// fields from `mlx5dv_qp`).
    pub fn emu_parts(&self) -> &EmuSqParts {
        &self.parts
    }

    /// The transport of the QP.
    pub fn qp_type(&self) -> QpType {
        self.qp_type
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
        // record, which `_keep` holds for as long as the borrow of `self`
        // (the device's blocks, or the verbs QP: `from_parts` contract);
        // it is 4-aligned; the device accesses it only atomically (`mem`)
        // or by DMA, and the core only through `DeviceWord`s.
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
    /// A backend that knows better (`verbs`: the limits the provider
    /// granted) supplied its own at construction; that one is returned.
    pub fn config(&self, caps: &Caps) -> SqConfig {
        if let Some(c) = self.config {
            return c;
        }
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
    /// A CQ owner over parts another backend extracted; `timestamp` is the
    /// format the device writes CQE timestamps in.
    ///
    /// # Safety
    ///
    /// `parts` describes one live CQ: `buf` is `cqe_cnt` slots of
    /// `cqe_size` bytes (64 or 128), `dbrec` its 8-byte doorbell record,
    /// `uar` its UAR page (or null), all valid for as long as `keep`
    /// lives; the device accesses them only as the hardware does or
    /// atomically.
    pub unsafe fn from_parts(
        parts: EmuCqParts,
        timestamp: TimestampFormat,
        keep: KeepAlive,
    ) -> Self {
        Self {
            parts,
            timestamp,
            _keep: keep,
        }
    }

    /// The plain parts (the emulator's names; `verbs` fills the same
    /// fields from `mlx5dv_cq`).
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
            timestamp: self.timestamp,
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
    /// A receive-queue owner over parts another backend extracted.
    ///
    /// # Safety
    ///
    /// `parts` describes one live receive ring: `buf` is `wqe_cnt` WQEs of
    /// `stride` bytes, `dbrec` its 4-aligned doorbell-record word, both
    /// valid for as long as `keep` lives; the device only reads the ring.
    pub unsafe fn from_parts(parts: EmuRqParts, keep: KeepAlive) -> Self {
        Self { parts, _keep: keep }
    }

    /// The plain parts (the emulator's names; `verbs` fills the same
    /// fields from `mlx5dv_qp`/`mlx5dv_srq`).
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
        // SAFETY: the ring is `wqe_cnt * stride` bytes of memory `_keep`
        // holds for the borrow of `self` (a device block, or the verbs
        // object: `from_parts` contract); the caller promises no other
        // writer in this process; the device only reads it.
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
