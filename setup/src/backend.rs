//! The small interface end-to-end scenarios run against: create memory,
//! CQs, QPs and SRQs, connect QPs, make the device progress, and hand the
//! core its queues' raw parts.
//!
//! A scenario written against [`Backend`] posts and polls through the core
//! only (`mlx5dp::sq::SendQueue`, `mlx5dp::cq::Cq`, `mlx5dp::rq::Rq`), so the
//! same scenario can run on the emulated device ([`EmuBackend`], in step
//! mode or with the device on its own thread) and, later, on a ConnectX
//! through the `verbs` backend. What only the emulator can do (inject
//! faults, report the core's mistakes it noticed) is in the trait with a
//! default that says it is unsupported.
#![forbid(unsafe_code)]

use crate::emu::device::FlowRule;
use crate::emu::{
    Access, Caps, CoreCq, CoreRq, CoreSq, CqInit, Device, DeviceConfig, DeviceThread, DmaBlock,
    EmuError, EmuEvent, Fault, Pdn, QpAttr, QpInit, QpState, QpType, Qpn, SrqInit, Srqn, Xrcdn,
};
use std::fmt;
use std::sync::Arc;

/// Why a backend call failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BackendError {
    /// The emulated device refused the call.
    Emu(EmuError),
    /// This backend cannot do this (fault injection on hardware, ...).
    Unsupported(&'static str),
    /// Memory for a buffer could not be allocated.
    NoMemory,
}

impl fmt::Display for BackendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BackendError::Emu(e) => write!(f, "{e}"),
            BackendError::Unsupported(what) => write!(f, "{what} is not supported here"),
            BackendError::NoMemory => f.write_str("buffer allocation failed"),
        }
    }
}

impl std::error::Error for BackendError {}

impl From<EmuError> for BackendError {
    fn from(e: EmuError) -> Self {
        BackendError::Emu(e)
    }
}

/// Registered memory: a zeroed, page-aligned buffer and its key.
///
/// The bytes are read and written through [`Buffer::read`] and
/// [`Buffer::write`], which are atomic accesses: the device may touch the
/// buffer at any time from its own thread.
#[derive(Clone, Debug)]
pub struct Buffer {
    mem: Arc<DmaBlock>,
    /// The key (lkey = rkey).
    pub key: u32,
}

impl Buffer {
    /// The device address of byte `off`.
    pub fn addr(&self, off: usize) -> u64 {
        self.mem.addr() + off as u64
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.mem.len()
    }

    /// Whether the buffer is empty.
    pub fn is_empty(&self) -> bool {
        self.mem.is_empty()
    }

    /// Reads `n` bytes at `off` (panics outside the buffer: a test bug).
    pub fn read(&self, off: usize, n: usize) -> Vec<u8> {
        let mut v = vec![0u8; n];
        if let Err(e) = self.mem.read(off, &mut v) {
            panic!("buffer read {off}+{n} of {}: {e}", self.len());
        }
        v
    }

    /// Writes `data` at `off` (panics outside the buffer: a test bug).
    pub fn write(&self, off: usize, data: &[u8]) {
        if let Err(e) = self.mem.write(off, data) {
            panic!("buffer write {off}+{} of {}: {e}", data.len(), self.len());
        }
    }

    /// Sets `len` bytes at `off` to `byte`.
    pub fn fill(&self, off: usize, len: usize, byte: u8) {
        if let Err(e) = self.mem.fill(off, len, byte) {
            panic!("buffer fill {off}+{len} of {}: {e}", self.len());
        }
    }
}

/// A QP and the raw parts of its queues.
#[derive(Debug)]
pub struct QpHandle {
    /// QP number.
    pub qpn: Qpn,
    /// Transport.
    pub qp_type: QpType,
    /// Its send queue, if it has one.
    pub sq: Option<CoreSq>,
    /// Its own receive queue (cyclic or striding), if it has one.
    pub rq: Option<CoreRq>,
}

/// An SRQ and the raw parts of its ring.
#[derive(Debug)]
pub struct SrqHandle {
    /// SRQ number.
    pub srqn: Srqn,
    /// The ring and doorbell record.
    pub rq: CoreRq,
}

/// Connection attributes of [`Backend::connect`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectAttr {
    /// Remote access both QPs accept.
    pub access: Access,
    /// Transport retries.
    pub retry_cnt: u8,
    /// RNR retries (7 = infinite).
    pub rnr_retry: u8,
}

impl Default for ConnectAttr {
    fn default() -> Self {
        Self {
            access: Access::ALL,
            retry_cnt: 7,
            rnr_retry: 7,
        }
    }
}

/// What end-to-end scenarios need from a device.
pub trait Backend {
    /// A short name for reports (`emu-step`, `emu-thread`, `verbs`).
    fn name(&self) -> &'static str;
    /// The device's capabilities.
    fn caps(&self) -> Caps;
    /// Allocates a protection domain.
    fn alloc_pd(&mut self) -> Result<Pdn, BackendError>;
    /// Allocates an XRC domain.
    fn alloc_xrcd(&mut self) -> Result<Xrcdn, BackendError>;
    /// Allocates and registers a zeroed buffer of `len` bytes.
    fn reg_buffer(&mut self, pd: Pdn, len: usize, access: Access) -> Result<Buffer, BackendError>;
    /// Deregisters a buffer's key (the memory stays allocated).
    fn dereg(&mut self, key: u32) -> Result<(), BackendError>;
    /// Creates a CQ.
    fn create_cq(&mut self, init: CqInit) -> Result<CoreCq, BackendError>;
    /// Creates a QP (in RESET).
    fn create_qp(&mut self, init: QpInit) -> Result<QpHandle, BackendError>;
    /// Creates an SRQ (an XRC SRQ with `xrcd` and `cq`).
    fn create_srq(&mut self, init: SrqInit) -> Result<SrqHandle, BackendError>;
    /// Moves a QP through INIT, RTR (to `dest`) and, unless it is an XRC
    /// target, RTS.
    fn bring_up(
        &mut self,
        qpn: Qpn,
        dest: Option<Qpn>,
        qkey: u32,
        attr: ConnectAttr,
    ) -> Result<(), BackendError>;
    /// Moves a QP to the error state (`ibv_modify_qp(IBV_QPS_ERR)`).
    fn to_error(&mut self, qpn: Qpn) -> Result<(), BackendError>;
    /// The state of a QP.
    fn qp_state(&mut self, qpn: Qpn) -> Option<QpState>;
    /// Adds a steering rule for raw Ethernet frames.
    fn add_flow(&mut self, rule: FlowRule) -> Result<(), BackendError>;
    /// Lets the device make progress: one step in step mode; a yield when
    /// the device runs by itself.
    fn progress(&mut self);
    /// Whether [`Backend::progress`] is a deterministic device step.
    fn is_step_mode(&self) -> bool;

    /// Connects two QPs of the same connected type to each other.
    fn connect(&mut self, a: Qpn, b: Qpn, attr: ConnectAttr) -> Result<(), BackendError> {
        self.bring_up(a, Some(b), 0, attr)?;
        self.bring_up(b, Some(a), 0, attr)
    }

    /// Injects a fault (emulator only).
    fn inject(&mut self, fault: Fault) -> Result<(), BackendError> {
        let _ = fault;
        Err(BackendError::Unsupported("fault injection"))
    }

    /// Ends injected stalls (emulator only).
    fn resume(&mut self) {}

    /// Asynchronous events and core mistakes the device noticed (the
    /// emulator reports both; hardware has only the former, through the
    /// async event channel).
    fn take_events(&mut self) -> Vec<EmuEvent> {
        Vec::new()
    }
}

/// Where the emulated device runs.
#[derive(Debug)]
enum Engine {
    /// On the caller's thread: [`Backend::progress`] is one step.
    Step(Box<Device>),
    /// On its own thread.
    Thread(DeviceThread),
}

/// The emulated device as a [`Backend`].
#[derive(Debug)]
pub struct EmuBackend {
    engine: Engine,
    caps: Caps,
}

impl EmuBackend {
    /// A device in deterministic step mode.
    pub fn step_mode(cfg: DeviceConfig) -> Self {
        let caps = cfg.caps.clone();
        Self {
            engine: Engine::Step(Box::new(Device::new(cfg))),
            caps,
        }
    }

    /// A device on its own thread.
    pub fn threaded(cfg: DeviceConfig) -> std::io::Result<Self> {
        let caps = cfg.caps.clone();
        Ok(Self {
            engine: Engine::Thread(DeviceThread::spawn(Device::new(cfg))?),
            caps,
        })
    }

    /// Runs `f` on the device (between two steps in thread mode).
    pub fn with<R>(&mut self, f: impl FnOnce(&mut Device) -> R) -> R {
        match &mut self.engine {
            Engine::Step(d) => f(d),
            Engine::Thread(t) => t.with(f),
        }
    }

    /// Stops the device thread, if any, and returns the device.
    pub fn into_device(self) -> Device {
        match self.engine {
            Engine::Step(d) => *d,
            Engine::Thread(t) => t.stop().0,
        }
    }
}

impl Backend for EmuBackend {
    fn name(&self) -> &'static str {
        match self.engine {
            Engine::Step(_) => "emu-step",
            Engine::Thread(_) => "emu-thread",
        }
    }

    fn caps(&self) -> Caps {
        self.caps.clone()
    }

    fn alloc_pd(&mut self) -> Result<Pdn, BackendError> {
        Ok(self.with(Device::alloc_pd))
    }

    fn alloc_xrcd(&mut self) -> Result<Xrcdn, BackendError> {
        Ok(self.with(Device::alloc_xrcd))
    }

    fn reg_buffer(&mut self, pd: Pdn, len: usize, access: Access) -> Result<Buffer, BackendError> {
        let mem = Arc::new(DmaBlock::new(len, 4096).map_err(|_| BackendError::NoMemory)?);
        let key = self.with(|d| d.reg_mr(pd, &mem, access))?;
        Ok(Buffer { mem, key })
    }

    fn dereg(&mut self, key: u32) -> Result<(), BackendError> {
        Ok(self.with(|d| d.dereg_mr(key))?)
    }

    fn create_cq(&mut self, init: CqInit) -> Result<CoreCq, BackendError> {
        Ok(self.with(|d| {
            let cqn = d.create_cq(init)?;
            d.core_cq(cqn)
        })?)
    }

    fn create_qp(&mut self, init: QpInit) -> Result<QpHandle, BackendError> {
        Ok(self.with(|d| {
            let qpn = d.create_qp(init)?;
            let sq = if init.sq_wqebbs > 0 {
                Some(d.core_sq(qpn)?)
            } else {
                None
            };
            let rq = match init.rq {
                crate::emu::RqInit::Cyclic { .. } | crate::emu::RqInit::Striding { .. } => {
                    Some(d.core_rq(qpn)?)
                }
                _ => None,
            };
            Ok::<_, EmuError>(QpHandle {
                qpn,
                qp_type: init.qp_type,
                sq,
                rq,
            })
        })?)
    }

    fn create_srq(&mut self, init: SrqInit) -> Result<SrqHandle, BackendError> {
        Ok(self.with(|d| {
            let srqn = d.create_srq(init)?;
            Ok::<_, EmuError>(SrqHandle {
                srqn,
                rq: d.core_srq(srqn)?,
            })
        })?)
    }

    fn bring_up(
        &mut self,
        qpn: Qpn,
        dest: Option<Qpn>,
        qkey: u32,
        attr: ConnectAttr,
    ) -> Result<(), BackendError> {
        Ok(self.with(|d| {
            let a = QpAttr {
                access: attr.access,
                qkey,
                dest_qpn: dest,
                retry_cnt: attr.retry_cnt,
                rnr_retry: attr.rnr_retry,
            };
            d.modify_qp(qpn, QpState::Init, &a)?;
            d.modify_qp(qpn, QpState::Rtr, &a)?;
            if d.qp_type(qpn) != Some(QpType::XrcTgt) {
                d.modify_qp(qpn, QpState::Rts, &a)?;
            }
            Ok::<_, EmuError>(())
        })?)
    }

    fn to_error(&mut self, qpn: Qpn) -> Result<(), BackendError> {
        Ok(self.with(|d| d.modify_qp(qpn, QpState::Err, &QpAttr::default()))?)
    }

    fn qp_state(&mut self, qpn: Qpn) -> Option<QpState> {
        self.with(|d| d.qp_state(qpn))
    }

    fn add_flow(&mut self, rule: FlowRule) -> Result<(), BackendError> {
        Ok(self.with(|d| d.add_flow(rule))?)
    }

    fn progress(&mut self) {
        match &mut self.engine {
            Engine::Step(d) => {
                d.step();
            }
            Engine::Thread(_) => std::thread::yield_now(),
        }
    }

    fn is_step_mode(&self) -> bool {
        matches!(self.engine, Engine::Step(_))
    }

    fn inject(&mut self, fault: Fault) -> Result<(), BackendError> {
        self.with(|d| d.inject(fault));
        Ok(())
    }

    fn resume(&mut self) {
        self.with(Device::resume);
    }

    fn take_events(&mut self) -> Vec<EmuEvent> {
        self.with(Device::take_events)
    }
}
