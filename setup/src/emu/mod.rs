//! The emulated ConnectX: a software mlx5 device that hands the core the
//! same raw parts as the real backend (rings, doorbell records, a UAR page)
//! over process memory, and plays the hardware's side of them.
//!
//! It is an adversarial peer, not a stub (STYLE point 13): it parses WQEs
//! with its own parser ([`wqe`]), checks keys, bounds and access rights
//! through its MR table ([`mr`]), moves data over a loopback fabric between
//! its QPs, writes CQEs owner byte last and compresses runs of them exactly
//! as the PRM layouts say ([`cq`]), produces the error CQE the hardware
//! would for every fault it sees and flushes the rest, and injects faults
//! on request ([`Fault`]).
//!
//! Modules:
//! - [`mem`]: the shared memory blocks and every `unsafe` access to them;
//! - [`config`]: capabilities and emulation knobs;
//! - [`ah`]: address handles (the UD address vector libmlx5 builds) and
//!   the port's check of every UD datagram's address vector;
//! - [`mr`]: protection domains' memory regions and memory windows;
//! - [`wqe`]: the send-WQE parser;
//! - [`eth`]: Ethernet frame work (checksums, VLAN, TSO, receive checks);
//! - [`cq`]: the CQE writer and compression;
//! - [`qp`]: QPs, SRQs, their state machine and raw parts;
//! - [`device`]: the device, its resources, the step-mode engine and fault
//!   injection;
//! - [`core_parts`]: the raw parts as the core's types take them;
//! - [`thread`]: the device on its own thread (throughput runs);
//! - [`record`]: recording what the device saw into `hw-traces/` records.
//!
//! Step mode: tests write WQEs into the rings, write the doorbell records,
//! then drive the device with [`Device::process_sq`] (one QP) or
//! [`Device::step`] (everything: UAR doorbells, all SQs, flushes, delayed
//! completions). Completions are written into the CQ rings when the call
//! returns.
//!
//! Thread mode: [`DeviceThread`] moves the device to its own thread, which
//! steps it whenever a UAR doorbell or BlueFlame write arrives and idles
//! as its [`IdlePolicy`] says (spin, then yield, then park); control calls
//! reach it through [`DeviceThread::with`].

pub mod ah;
pub mod config;
pub mod core_parts;
pub mod cq;
pub mod device;
pub mod eth;
pub mod mem;
pub mod mr;
pub mod qp;
pub mod record;
pub mod thread;
pub mod wqe;

#[cfg(test)]
mod tests;

pub use ah::{AhAttr, AhDest, AvMismatch};
pub use config::{AtomicEndianness, Caps, ClockMode, DeviceConfig, LinkLayer, PortConfig};
pub use core_parts::{CoreCq, CoreRq, CoreSq, RqRawParts};
pub use cq::{CompressionCfg, CompressionLayout, CqeSize};
pub use device::{CqInit, Device, Fault, QpAttr, QpInit, RqInit, SrqInit, StepReport};
pub use mem::{DmaBlock, MemError, Region, UserRegion};
pub use mlx5dp::sq::MwType;
pub use mr::{Mw, MwBinding};
pub use qp::{EmuCqParts, EmuRqKind, EmuRqParts, EmuSqParts};
pub use record::{RecordStats, Recorder};
pub use thread::{DeviceThread, IdlePolicy, ThreadStats};

use std::fmt;

macro_rules! handle {
    ($(#[$m:meta])* $name:ident) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(pub u32);

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{:#x}", self.0)
            }
        }
    };
}

handle!(
    /// Protection domain number.
    Pdn
);
handle!(
    /// Completion queue number (24 bits).
    Cqn
);
handle!(
    /// Queue pair number (24 bits).
    Qpn
);
handle!(
    /// Shared receive queue number (24 bits).
    Srqn
);
handle!(
    /// XRC domain number.
    Xrcdn
);

/// QP transport type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QpType {
    /// Reliable connected.
    Rc,
    /// Unreliable connected.
    Uc,
    /// Unreliable datagram.
    Ud,
    /// XRC initiator (send side).
    XrcIni,
    /// XRC target (receive side, no send queue).
    XrcTgt,
    /// Raw Ethernet (`IBV_QPT_RAW_PACKET`).
    RawPacket,
}

/// QP state (the IB state machine without SQD/SQE).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QpState {
    /// Reset.
    Reset,
    /// Initialised: receives may be posted.
    Init,
    /// Ready to receive.
    Rtr,
    /// Ready to send.
    Rts,
    /// Error: everything is flushed.
    Err,
}

/// Memory and QP access rights (`IBV_ACCESS_*` values, plus an emulator bit).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Access(pub u32);

impl Access {
    /// No rights.
    pub const NONE: Access = Access(0);
    /// `IBV_ACCESS_LOCAL_WRITE`.
    pub const LOCAL_WRITE: Access = Access(1);
    /// `IBV_ACCESS_REMOTE_WRITE`.
    pub const REMOTE_WRITE: Access = Access(2);
    /// `IBV_ACCESS_REMOTE_READ`.
    pub const REMOTE_READ: Access = Access(4);
    /// `IBV_ACCESS_REMOTE_ATOMIC`.
    pub const REMOTE_ATOMIC: Access = Access(8);
    /// `IBV_ACCESS_MW_BIND`: memory windows may be bound to the region
    /// (IBA C10-73: a bind to a region without it fails).
    pub const MW_BIND: Access = Access(1 << 4);
    /// Emulator: the key may be invalidated (send with invalidate, local
    /// invalidate), as a fast-registration key or type-2 memory window is.
    pub const INVALIDATE: Access = Access(1 << 16);
    /// Every IB right.
    pub const ALL: Access = Access(0xf);

    /// Whether every right in `other` is here.
    pub fn contains(self, other: Access) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether any right in `other` is here.
    pub fn intersects(self, other: Access) -> bool {
        self.0 & other.0 != 0
    }
}

impl std::ops::BitOr for Access {
    type Output = Access;
    fn bitor(self, rhs: Access) -> Access {
        Access(self.0 | rhs.0)
    }
}

/// What went wrong on a control-path call, naming the verb that failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EmuError {
    /// The verb (`create_qp`, `modify_qp`, `reg_mr`, ...).
    pub verb: &'static str,
    /// What kind of failure.
    pub kind: EmuErrorKind,
    /// Details.
    pub detail: String,
}

/// The errno-like class of an [`EmuError`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EmuErrorKind {
    /// `EINVAL`: bad attributes or transition.
    Invalid,
    /// `ENOENT`: no such object.
    NotFound,
    /// `ENOMEM`: allocation failed.
    NoMemory,
    /// `EOPNOTSUPP`: beyond the device's capabilities.
    Unsupported,
    /// `EBUSY`: the object is still in use.
    Busy,
}

impl EmuError {
    pub(crate) fn invalid(verb: &'static str, detail: impl Into<String>) -> Self {
        Self {
            verb,
            kind: EmuErrorKind::Invalid,
            detail: detail.into(),
        }
    }
    pub(crate) fn not_found(verb: &'static str) -> Self {
        Self {
            verb,
            kind: EmuErrorKind::NotFound,
            detail: String::from("no such object"),
        }
    }
    pub(crate) fn unsupported(verb: &'static str, detail: impl Into<String>) -> Self {
        Self {
            verb,
            kind: EmuErrorKind::Unsupported,
            detail: detail.into(),
        }
    }
    pub(crate) fn busy(verb: &'static str, detail: impl Into<String>) -> Self {
        Self {
            verb,
            kind: EmuErrorKind::Busy,
            detail: detail.into(),
        }
    }
    pub(crate) fn no_memory(verb: &'static str) -> Self {
        Self {
            verb,
            kind: EmuErrorKind::NoMemory,
            detail: String::from("allocation failed"),
        }
    }
}

impl fmt::Display for EmuError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "emulated {} failed ({:?}): {}",
            self.verb, self.kind, self.detail
        )
    }
}

impl std::error::Error for EmuError {}

/// Asynchronous events, and the core's mistakes the device noticed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EmuEvent {
    /// A completion event on an armed CQ.
    Completion {
        /// The CQ.
        cqn: Cqn,
    },
    /// The CQ ran out of free slots (`IBV_EVENT_CQ_ERR`); it writes nothing more.
    CqOverrun {
        /// The CQ.
        cqn: Cqn,
    },
    /// A QP went to the error state because of an error on its own side
    /// (`IBV_EVENT_QP_FATAL`).
    QpFatal {
        /// The QP.
        qpn: Qpn,
    },
    /// A responder QP went to the error state after a remote access or
    /// invalid request (`IBV_EVENT_QP_ACCESS_ERR` / `QP_REQ_ERR`).
    QpAccessErr {
        /// The QP.
        qpn: Qpn,
    },
    /// The CQ doorbell record's consumer index is ahead of the producer.
    CqCiAhead {
        /// The CQ.
        cqn: Cqn,
        /// The consumer index read (24 bits).
        ci: u32,
        /// The device's producer index (24 bits).
        pi: u32,
    },
    /// The SQ doorbell record claims more WQEBBs than the ring holds.
    SqDoorbellOverrun {
        /// The QP.
        qpn: Qpn,
        /// The 16-bit producer counter read.
        pi: u16,
    },
    /// A WQE extends past the SQ doorbell record's producer counter.
    WqeBeyondDoorbell {
        /// The QP.
        qpn: Qpn,
        /// Index of the WQE.
        wqe_index: u16,
    },
    /// A doorbell or BlueFlame write named a WQE the doorbell record had
    /// not yet published (the record must be written first, PRM-FACTS §7).
    UarBeforeDbrec {
        /// The QP.
        qpn: Qpn,
        /// WQE index in the register write.
        wqe_index: u16,
    },
    /// A BlueFlame copy differs from the WQE in the ring.
    BlueFlameMismatch {
        /// The QP.
        qpn: Qpn,
        /// WQE index.
        wqe_index: u16,
    },
    /// A UAR doorbell write named an unknown QP or CQ.
    UarUnknownTarget {
        /// The number written.
        num: u32,
    },
    /// The CQ arm doorbell disagrees with the arm word in the doorbell record.
    ArmMismatch {
        /// The CQ.
        cqn: Cqn,
    },
    /// The RQ/SRQ doorbell record claims more WQEs than the ring holds.
    RqDoorbellOverrun {
        /// The QP or SRQ number.
        num: u32,
    },
    /// A raw Ethernet frame matched no steering rule and was dropped.
    FrameDropped {
        /// The sending QP.
        qpn: Qpn,
    },
    /// A UD datagram was dropped (its address vector does not reach this
    /// port, bad Q_Key, no such QP, not ready); the sender completes
    /// normally, as on the wire.
    DatagramDropped {
        /// The destination QPN.
        dqpn: u32,
        /// Why.
        reason: DropReason,
    },
}

/// Why a UD datagram was dropped ([`EmuEvent::DatagramDropped`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropReason {
    /// The address vector does not address this device's port (wrong
    /// LID, GID or MAC): the fabric or the port discards the packet.
    Address(AvMismatch),
    /// The Q_Key differs from the destination QP's (IBA 10.2.4: the
    /// responder silently drops it).
    QKey,
    /// No UD QP with that number, or it is not ready to receive.
    NoQp,
}

/// Vendor syndromes the emulator writes into error CQEs, so tests can tell
/// fault causes apart. **Emulator-defined**: the hardware's vendor syndromes
/// are not public beyond a few (0x93 ODP page fault), so these live in
/// 0xe0–0xef, away from known values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum VendorSyndrome {
    /// A flush (no specific cause).
    None = 0,
    /// Bad DS count (zero, too small, too large, inline overrun).
    BadDs = 0xe1,
    /// WQE index or QPN in the control segment does not match.
    BadCtrl = 0xe2,
    /// Opcode not allowed on this QP type.
    OpcodeNotAllowed = 0xe3,
    /// Opcode/opmod not implemented.
    Unsupported = 0xe4,
    /// Segment layout wrong for the opcode (inline where pointers are
    /// needed, atomic result buffer, Ethernet header, MPW session).
    BadSegment = 0xe5,
    /// Unknown, stale or invalidated key.
    BadKey = 0xe6,
    /// Key of another protection domain.
    PdMismatch = 0xe7,
    /// Range outside the memory region.
    Bounds = 0xe8,
    /// Missing access right (memory region or QP).
    AccessRight = 0xe9,
    /// Misaligned atomic.
    Misaligned = 0xea,
    /// Message longer than allowed (MTU, receive buffer).
    Length = 0xeb,
    /// No receive WQE (RNR) and retries exhausted.
    Rnr = 0xec,
    /// The remote QP is missing or not ready (retries exhausted).
    Transport = 0xed,
    /// A memory window in the wrong state for the operation: a bind of a
    /// bound type-2 window, an unbind or invalidation of a window not bound
    /// to this QP, a type-1 window invalidated, a bind whose form does not
    /// match the window's type, or a type-2 window used through a QP it is
    /// not bound to.
    MwState = 0xee,
    /// Injected by [`Fault::FailWqe`].
    Injected = 0xef,
}
