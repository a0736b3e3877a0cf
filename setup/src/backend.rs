//! The small interface end-to-end scenarios run against: create memory,
//! CQs, QPs and SRQs, connect QPs, make the device progress, and hand the
//! core its queues' raw parts.
//!
//! A scenario written against [`Backend`] posts and polls through the core
//! only (`mlx5dp::sq::SendQueue`, `mlx5dp::cq::Cq`, `mlx5dp::rq::Rq`), so the
//! same scenario runs on the emulated device ([`EmuBackend`], in step mode
//! or with the device on its own thread) and on a ConnectX through the
//! `verbs` backend (`crate::verbs::VerbsBackend`). What only the emulator
//! can do (inject faults, report the core's mistakes it noticed) is in the
//! trait with a default that says it is unsupported.
//!
//! The types are backend-neutral: the descriptions of what to create
//! ([`CqInit`], [`QpInit`], [`SrqInit`], [`FlowRule`]) and the handles
//! ([`Pdn`], [`Qpn`], ...) are plain data (the real QPN, CQN and SRQ number
//! on hardware; a PD or XRC domain number is the backend's own index);
//! the owners of raw parts ([`CoreSq`], [`CoreCq`], [`CoreRq`]) keep
//! either backend's memory alive through a [`KeepAlive`]; a [`Buffer`]
//! reads and writes either backend's registered memory through
//! [`BufferMem`]. The definitions live in `emu` because the emulator was
//! first; nothing in them is emulator state.
//!
//! [`open`] picks the backend a device name means (`emu`, or an RDMA
//! device with the `verbs` feature), for the command-line tools.
#![forbid(unsafe_code)]

pub use crate::emu::core_parts::KeepAlive;
pub use crate::emu::device::FlowRule;
pub use crate::emu::{
    Access, AhAttr, AhDest, Caps, CoreCq, CoreRq, CoreSq, CqInit, Cqn, EmuEvent, Fault, MwType,
    Pdn, QpInit, QpState, QpType, Qpn, RqInit, SrqInit, Srqn, Xrcdn,
};
use crate::emu::{Device, DeviceConfig, DeviceThread, DmaBlock, EmuError, MemError, QpAttr};
use mlx5dp::prm::Av;
use std::fmt;
use std::sync::Arc;

/// Why a backend call failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BackendError {
    /// The emulated device refused the call.
    Emu(EmuError),
    /// A verbs call failed (no device, no permission, not mlx5, a verb's
    /// errno, parts the core cannot take).
    #[cfg(feature = "verbs")]
    Verbs(crate::verbs::VerbsError),
    /// This backend cannot do this (fault injection on hardware, a
    /// striding RQ through plain verbs, ...).
    Unsupported(&'static str),
    /// Memory for a buffer could not be allocated.
    NoMemory,
    /// The emulated device's thread could not be started.
    Thread(String),
    /// A device name other than `emu` in a build without the `verbs`
    /// feature.
    NeedsVerbs {
        /// The name asked for.
        device: String,
    },
}

impl BackendError {
    /// Whether the device is missing or cannot do what was asked (as
    /// opposed to a failure while running): the tools exit with status 2.
    pub fn is_unavailable(&self) -> bool {
        match self {
            BackendError::Unsupported(_) | BackendError::NeedsVerbs { .. } => true,
            #[cfg(feature = "verbs")]
            BackendError::Verbs(e) => e.is_unavailable(),
            _ => false,
        }
    }
}

impl fmt::Display for BackendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BackendError::Emu(e) => write!(f, "{e}"),
            #[cfg(feature = "verbs")]
            BackendError::Verbs(e) => write!(f, "{e}"),
            BackendError::Unsupported(what) => write!(f, "{what} is not supported here"),
            BackendError::NoMemory => f.write_str("buffer allocation failed"),
            BackendError::Thread(e) => write!(f, "cannot start the device thread: {e}"),
            BackendError::NeedsVerbs { device } => write!(
                f,
                "device {device} needs the `verbs` feature (cargo build --features verbs); \
                 use the emulated ConnectX instead: --device emu"
            ),
        }
    }
}

impl std::error::Error for BackendError {}

impl From<EmuError> for BackendError {
    fn from(e: EmuError) -> Self {
        BackendError::Emu(e)
    }
}

#[cfg(feature = "verbs")]
impl From<crate::verbs::VerbsError> for BackendError {
    fn from(e: crate::verbs::VerbsError) -> Self {
        BackendError::Verbs(e)
    }
}

/// The memory behind a [`Buffer`]: an emulated block or a verbs memory
/// region. Every access is one the device may race with (atomic on the
/// emulator, volatile on hardware), never a Rust reference to the bytes.
pub trait BufferMem: fmt::Debug + Send + Sync {
    /// The device address of byte 0 (`ibv_reg_mr` maps iova = va).
    fn base(&self) -> u64;
    /// Length in bytes.
    fn len(&self) -> usize;
    /// Whether the buffer is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Copies `out.len()` bytes at `off` out.
    fn read(&self, off: usize, out: &mut [u8]) -> Result<(), MemError>;
    /// Copies `data` in at `off`.
    fn write(&self, off: usize, data: &[u8]) -> Result<(), MemError>;
    /// Sets `len` bytes at `off` to `byte`.
    fn fill(&self, off: usize, len: usize, byte: u8) -> Result<(), MemError>;
}

impl BufferMem for DmaBlock {
    fn base(&self) -> u64 {
        self.addr()
    }
    fn len(&self) -> usize {
        std::ops::Deref::deref(self).len()
    }
    fn read(&self, off: usize, out: &mut [u8]) -> Result<(), MemError> {
        std::ops::Deref::deref(self).read(off, out)
    }
    fn write(&self, off: usize, data: &[u8]) -> Result<(), MemError> {
        std::ops::Deref::deref(self).write(off, data)
    }
    fn fill(&self, off: usize, len: usize, byte: u8) -> Result<(), MemError> {
        std::ops::Deref::deref(self).fill(off, len, byte)
    }
}

/// Registered memory: a zeroed, page-aligned buffer and its key.
///
/// The bytes are read and written through [`Buffer::read`] and
/// [`Buffer::write`], which never hold a reference to them: the device may
/// touch the buffer at any time (from its own thread, or by DMA).
#[derive(Clone, Debug)]
pub struct Buffer {
    mem: Arc<dyn BufferMem>,
    /// The key, used both as lkey and as rkey: they are equal on the
    /// emulator and on mlx5 (the kernel gives an MR one mkey;
    /// `VerbsBackend` checks it at registration).
    pub key: u32,
}

impl Buffer {
    /// A buffer over `mem`, registered under `key`.
    pub fn new(mem: Arc<dyn BufferMem>, key: u32) -> Self {
        Self { mem, key }
    }

    /// The device address of byte `off`.
    pub fn addr(&self, off: usize) -> u64 {
        self.mem.base() + off as u64
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.mem.len()
    }

    /// Whether the buffer is empty.
    pub fn is_empty(&self) -> bool {
        self.mem.len() == 0
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

/// What a device says about itself, for reports and trace headers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeviceInfo {
    /// The device name (`emu`, `mlx5_0`).
    pub name: String,
    /// Firmware version (the emulator says it has none).
    pub fw_ver: String,
    /// What it is, in a few words (`ConnectX-5 (part 0x1017)`).
    pub model: String,
    /// Capabilities, `name = value`, in a stable order.
    pub caps: Vec<(String, String)>,
}

/// What end-to-end scenarios need from a device.
///
/// Object safe: the tools hold a `Box<dyn Backend>` chosen by [`open`];
/// `Box<B>` is itself a `Backend`.
pub trait Backend: fmt::Debug {
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
    /// Allocates a memory window of `mw_type` in `pd` (`ibv_alloc_mw`) and
    /// returns its rkey. The window starts free: the key works only once a
    /// bind work request (`mlx5dp::sq::Batch::bind_mw`, with this rkey as
    /// `mw_rkey`) has bound it, under the rkey the bind gives it.
    fn alloc_mw(&mut self, pd: Pdn, mw_type: MwType) -> Result<u32, BackendError>;
    /// Deallocates a memory window (`ibv_dealloc_mw`), named by any rkey
    /// it has had (binds change only the low 8 bits, the mkey variant);
    /// its key stops working, bound or not.
    fn dealloc_mw(&mut self, rkey: u32) -> Result<(), BackendError>;
    /// Creates an address handle in `pd` for `attr` (`ibv_create_ah`) and
    /// returns its 48-byte address vector, as libmlx5's `mlx5_create_ah`
    /// builds it for this device's port, with the Q_Key and remote QPN
    /// zero: a UD send copies it into its WQE and writes its own remote
    /// QPN and Q_Key over them (`mlx5dp::sq::Wr::ud_addr`, libmlx5
    /// `_set_datagram_seg`), so which QP a datagram reaches is the work
    /// request's choice, not the handle's. The device never reads the
    /// handle itself, only the copies, so nothing is kept: there is no
    /// `destroy_ah`.
    fn create_ah(&mut self, pd: Pdn, attr: AhAttr) -> Result<Av, BackendError>;
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
    /// async event channel, not read here yet).
    fn take_events(&mut self) -> Vec<EmuEvent> {
        Vec::new()
    }

    /// Name, firmware and capabilities.
    fn device_info(&self) -> DeviceInfo;

    /// Whether this is the emulated device, whose error completions carry
    /// emulator-defined vendor syndromes (`emu::VendorSyndrome`) and which
    /// reports the core's mistakes ([`Backend::take_events`]).
    fn emulated(&self) -> bool {
        false
    }

    /// The emulated device, for what only it can do (statistics, the
    /// recorder); `None` on hardware.
    fn as_emu(&mut self) -> Option<&mut EmuBackend> {
        None
    }
}

impl<B: Backend + ?Sized> Backend for Box<B> {
    fn name(&self) -> &'static str {
        (**self).name()
    }
    fn caps(&self) -> Caps {
        (**self).caps()
    }
    fn alloc_pd(&mut self) -> Result<Pdn, BackendError> {
        (**self).alloc_pd()
    }
    fn alloc_xrcd(&mut self) -> Result<Xrcdn, BackendError> {
        (**self).alloc_xrcd()
    }
    fn reg_buffer(&mut self, pd: Pdn, len: usize, access: Access) -> Result<Buffer, BackendError> {
        (**self).reg_buffer(pd, len, access)
    }
    fn dereg(&mut self, key: u32) -> Result<(), BackendError> {
        (**self).dereg(key)
    }
    fn alloc_mw(&mut self, pd: Pdn, mw_type: MwType) -> Result<u32, BackendError> {
        (**self).alloc_mw(pd, mw_type)
    }
    fn dealloc_mw(&mut self, rkey: u32) -> Result<(), BackendError> {
        (**self).dealloc_mw(rkey)
    }
    fn create_ah(&mut self, pd: Pdn, attr: AhAttr) -> Result<Av, BackendError> {
        (**self).create_ah(pd, attr)
    }
    fn create_cq(&mut self, init: CqInit) -> Result<CoreCq, BackendError> {
        (**self).create_cq(init)
    }
    fn create_qp(&mut self, init: QpInit) -> Result<QpHandle, BackendError> {
        (**self).create_qp(init)
    }
    fn create_srq(&mut self, init: SrqInit) -> Result<SrqHandle, BackendError> {
        (**self).create_srq(init)
    }
    fn bring_up(
        &mut self,
        qpn: Qpn,
        dest: Option<Qpn>,
        qkey: u32,
        attr: ConnectAttr,
    ) -> Result<(), BackendError> {
        (**self).bring_up(qpn, dest, qkey, attr)
    }
    fn to_error(&mut self, qpn: Qpn) -> Result<(), BackendError> {
        (**self).to_error(qpn)
    }
    fn qp_state(&mut self, qpn: Qpn) -> Option<QpState> {
        (**self).qp_state(qpn)
    }
    fn add_flow(&mut self, rule: FlowRule) -> Result<(), BackendError> {
        (**self).add_flow(rule)
    }
    fn progress(&mut self) {
        (**self).progress()
    }
    fn is_step_mode(&self) -> bool {
        (**self).is_step_mode()
    }
    fn connect(&mut self, a: Qpn, b: Qpn, attr: ConnectAttr) -> Result<(), BackendError> {
        (**self).connect(a, b, attr)
    }
    fn inject(&mut self, fault: Fault) -> Result<(), BackendError> {
        (**self).inject(fault)
    }
    fn resume(&mut self) {
        (**self).resume()
    }
    fn take_events(&mut self) -> Vec<EmuEvent> {
        (**self).take_events()
    }
    fn device_info(&self) -> DeviceInfo {
        (**self).device_info()
    }
    fn emulated(&self) -> bool {
        (**self).emulated()
    }
    fn as_emu(&mut self) -> Option<&mut EmuBackend> {
        (**self).as_emu()
    }
}

/// The backend a device name means: `emu` is the emulated ConnectX on its
/// own thread; any other name is an RDMA device opened through `verbs`
/// (which fails at once, naming the emulated device, when there is none),
/// or [`BackendError::NeedsVerbs`] in a build without that feature.
pub fn open(device: &str) -> Result<Box<dyn Backend>, BackendError> {
    open_with_idle(device, crate::emu::IdlePolicy::THROUGHPUT)
}

/// [`open`], with the emulated device's thread idling as `idle` says
/// (ignored for an RDMA device).
pub fn open_with_idle(
    device: &str,
    idle: crate::emu::IdlePolicy,
) -> Result<Box<dyn Backend>, BackendError> {
    if device == "emu" {
        let cfg = DeviceConfig {
            idle,
            ..DeviceConfig::default()
        };
        let be = EmuBackend::threaded(cfg).map_err(|e| BackendError::Thread(e.to_string()))?;
        return Ok(Box::new(be));
    }
    #[cfg(feature = "verbs")]
    {
        Ok(Box::new(crate::verbs::VerbsBackend::open(device)?))
    }
    #[cfg(not(feature = "verbs"))]
    {
        Err(BackendError::NeedsVerbs {
            device: device.to_string(),
        })
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
    /// The device's port (for [`Backend::device_info`]).
    port: crate::emu::PortConfig,
}

impl EmuBackend {
    /// A device in deterministic step mode.
    pub fn step_mode(cfg: DeviceConfig) -> Self {
        let (caps, port) = (cfg.caps.clone(), cfg.port);
        Self {
            engine: Engine::Step(Box::new(Device::new(cfg))),
            caps,
            port,
        }
    }

    /// A device on its own thread.
    pub fn threaded(cfg: DeviceConfig) -> std::io::Result<Self> {
        let (caps, port) = (cfg.caps.clone(), cfg.port);
        Ok(Self {
            engine: Engine::Thread(DeviceThread::spawn(Device::new(cfg))?),
            caps,
            port,
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
        Ok(Buffer::new(mem, key))
    }

    fn dereg(&mut self, key: u32) -> Result<(), BackendError> {
        Ok(self.with(|d| d.dereg_mr(key))?)
    }

    fn alloc_mw(&mut self, pd: Pdn, mw_type: MwType) -> Result<u32, BackendError> {
        Ok(self.with(|d| d.alloc_mw(pd, mw_type))?.rkey)
    }

    fn dealloc_mw(&mut self, rkey: u32) -> Result<(), BackendError> {
        Ok(self.with(|d| d.dealloc_mw(rkey))?)
    }

    fn create_ah(&mut self, pd: Pdn, attr: AhAttr) -> Result<Av, BackendError> {
        Ok(self.with(|d| d.create_ah(pd, &attr))?)
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
                RqInit::Cyclic { .. } | RqInit::Striding { .. } => Some(d.core_rq(qpn)?),
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

    fn device_info(&self) -> DeviceInfo {
        DeviceInfo {
            name: "emu".to_string(),
            fw_ver: "none (software model)".to_string(),
            model: "mlx5dp emulated ConnectX (software model, not hardware)".to_string(),
            caps: crate::info::emu_caps(&self.caps, &self.port)
                .into_iter()
                .map(|(k, v)| {
                    let v = match v {
                        serde_json::Value::String(s) => s,
                        other => other.to_string(),
                    };
                    (k.to_string(), v)
                })
                .collect(),
        }
    }

    fn emulated(&self) -> bool {
        true
    }

    fn as_emu(&mut self) -> Option<&mut EmuBackend> {
        Some(self)
    }
}
