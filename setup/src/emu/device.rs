//! The emulated device: its resources (context, PDs, MRs, CQs, QPs, SRQs,
//! XRC domains, steering rules), the step-mode engine that executes WQEs
//! over the loopback fabric, and fault injection.
//!
//! The engine follows the IB transport rules as mlx5 reports them
//! (PRM-FACTS §9.4 for the syndromes):
//! - requester-side faults (bad lkey, out-of-bounds SGE, missing local
//!   write on a read/atomic result buffer) → `LOCAL_PROT_ERR`; a malformed
//!   WQE or an opcode the QP type does not allow → `LOCAL_QP_OP_ERR`; a UD
//!   message beyond the MTU → `LOCAL_LENGTH_ERR`;
//! - remote faults on RC/XRC: bad rkey, range or missing MR right →
//!   `REMOTE_ACCESS_ERR`; missing QP access flag, misaligned atomic, bad
//!   XRC SRQ, receive too small → `REMOTE_INVAL_REQ_ERR`; responder-side
//!   scatter protection fault → `REMOTE_OP_ERR`; no receive WQE with RNR
//!   retries exhausted → `RNR_RETRY_EXC_ERR` (with `rnr_retry = 7` the SQ
//!   waits instead); peer missing or not ready → `TRANSPORT_RETRY_EXC_ERR`;
//!   the responder QP of a remote access/invalid request goes to the error
//!   state too, with an async event;
//! - send with invalidate (RC, UC, XRC) invalidates the key once the
//!   message has landed; a key the responder may not invalidate completes
//!   the receive with `REMOTE_INVAL_REQ_ERR` and moves the responder to the
//!   error state (RC requester: `REMOTE_OP_ERR`);
//! - memory windows ([`Device::alloc_mw`]): a UMR WQE binds, unbinds or
//!   (local invalidate) frees one, failing with `MW_BIND_ERR` when a rule
//!   of [`MrTable::umr`] is broken; a bound window's rkey works for remote
//!   access within its range and rights (a type-2 window only through its
//!   QP) and never as an lkey; a local invalidate or a send with
//!   invalidate frees a type-2 window;
//! - UC and UD drop what RC would NAK (no acknowledgement exists);
//! - an error CQE moves the QP to the error state; every WQE after it, and
//!   every receive WQE of its own RQ, completes with `WR_FLUSH_ERR` (except
//!   send WQEs with completion mode "only first error", which get none).
//!
//! Choices where the public sources are silent are marked "emulator".
#![forbid(unsafe_code)]

use super::ah::{self, AhAttr};
use super::config::{AtomicEndianness, ClockMode, DeviceConfig, LinkLayer, PortConfig};
use super::cq::{
    Completion, CompressionCfg, CompressionLayout, Cq, CqStats, CqeClass, CqeSize, RqClass,
};
use super::eth;
use super::mem::{DmaBlock, Region, UserRegion};
use super::mr::{KeyFault, MrMemory, MrTable, Mw, MwBinding};
use super::qp::{
    self, EmuCqParts, EmuRqKind, EmuRqParts, EmuSqParts, Qp, QpAttrs, RecvWqe, Rq, RqAttach, Sq,
    Srq, Striding,
};
use super::record::{self, Expects, Record, RecordStats, Recorder};
use super::wqe::{self, AtomicOp, AvInfo, EthKind, Op, ParseCtx, Sge, Wqe, WqeFault};
use super::{
    Access, Cqn, DropReason, EmuError, EmuEvent, MwType, Pdn, QpState, QpType, Qpn, Srqn,
    VendorSyndrome, Xrcdn,
};
use mlx5dp::index::RingSize;
use mlx5dp::prm::{
    Av, Be16, Be32, Cqe64, CqeOpcode, ErrCqe, MprqByteCnt, OpOwn, SWqeOpcodeQpn, Syndrome,
    CQE_VIC_INIT, UAR_BF_OFFSET, UAR_CQ_DOORBELL_OFFSET, UAR_PAGE_SIZE,
};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Attributes of a new CQ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CqInit {
    /// Number of CQEs (a power of two).
    pub cqe_cnt: u32,
    /// CQE size.
    pub cqe_size: CqeSize,
    /// Compression, if wanted.
    pub compression: Option<CompressionCfg>,
    /// Overrun-ignore (`IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN`).
    pub ignore_overrun: bool,
}

/// The receive side of a new QP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RqInit {
    /// No receive queue.
    None,
    /// A cyclic RQ.
    Cyclic {
        /// Number of WQEs (a power of two).
        wqe_cnt: u32,
        /// Scatter entries per WQE.
        max_sge: u32,
    },
    /// An existing SRQ.
    Srq(Srqn),
    /// A striding RQ (raw Ethernet).
    Striding {
        /// Number of WQEs (a power of two).
        wqe_cnt: u32,
        /// log2 strides per WQE.
        log_num_strides: u8,
        /// log2 bytes per stride.
        log_stride_bytes: u8,
    },
}

/// Attributes of a new QP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpInit {
    /// Transport.
    pub qp_type: QpType,
    /// Protection domain.
    pub pd: Pdn,
    /// Send CQ.
    pub send_cq: Option<Cqn>,
    /// Receive CQ.
    pub recv_cq: Option<Cqn>,
    /// SQ size in WQEBBs (a power of two; 0 for no SQ).
    pub sq_wqebbs: u32,
    /// Gather entries per send WQE.
    pub max_send_sge: u32,
    /// Inline bytes per send WQE.
    pub max_inline: u32,
    /// Receive side.
    pub rq: RqInit,
    /// XRC domain (XRC target).
    pub xrcd: Option<Xrcdn>,
    /// Strip C-VLAN tags on receive (raw Ethernet).
    pub vlan_strip: bool,
}

/// Attributes of a new SRQ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SrqInit {
    /// Protection domain.
    pub pd: Pdn,
    /// Number of WQEs (a power of two).
    pub wqe_cnt: u32,
    /// Scatter entries per WQE.
    pub max_sge: u32,
    /// CQ (XRC SRQ only).
    pub cq: Option<Cqn>,
    /// XRC domain (XRC SRQ only).
    pub xrcd: Option<Xrcdn>,
}

/// Attributes for [`Device::modify_qp`]; each transition reads the ones
/// it needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpAttr {
    /// Remote access the QP accepts (to INIT).
    pub access: Access,
    /// Q_Key (UD, to INIT).
    pub qkey: u32,
    /// Connected peer (RC, UC, XRC; to RTR).
    pub dest_qpn: Option<Qpn>,
    /// Transport retries (to RTS).
    pub retry_cnt: u8,
    /// RNR retries, 7 = infinite (to RTS).
    pub rnr_retry: u8,
}

impl Default for QpAttr {
    fn default() -> Self {
        Self {
            access: Access::NONE,
            qkey: 0,
            dest_qpn: None,
            retry_cnt: 7,
            rnr_retry: 7,
        }
    }
}

/// A steering rule for raw Ethernet frames on the loopback port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowRule {
    /// Receiving QP (raw packet).
    pub qpn: Qpn,
    /// Destination MAC to match (any if `None`).
    pub dmac: Option<[u8; 6]>,
    /// EtherType to match (after a VLAN tag; any if `None`).
    pub ethertype: Option<u16>,
    /// Flow tag (mark) written into the CQE.
    pub flow_tag: u32,
}

/// A fault to inject.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The WQE `skip` WQEs from now on `qpn`'s SQ fails with `syndrome`
    /// (vendor syndrome [`VendorSyndrome::Injected`]), as if the hardware
    /// had seen the fault: error CQE, QP to error, flush.
    FailWqe {
        /// The QP.
        qpn: Qpn,
        /// WQEs to let through first.
        skip: u32,
        /// The syndrome.
        syndrome: Syndrome,
    },
    /// The next `count` messages to `qpn` find no receive WQE (RNR).
    Rnr {
        /// The responder QP.
        qpn: Qpn,
        /// How many.
        count: u32,
    },
    /// Completions of `cqn` are written `steps` steps late (in order).
    DelayCompletions {
        /// The CQ.
        cqn: Cqn,
        /// Steps (0 ends the delay for new completions).
        steps: u32,
    },
    /// `qpn`'s SQ is not processed until [`Device::resume`].
    StallQp {
        /// The QP.
        qpn: Qpn,
    },
    /// No SQ is processed until [`Device::resume`].
    StallDevice,
}

/// What one call to the engine did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StepReport {
    /// Send WQEs executed (flushes not counted).
    pub wqes: u32,
    /// Send WQEs flushed.
    pub flushed: u32,
    /// An SQ waits for a receive (RNR with infinite retries).
    pub waiting: bool,
    /// Stalled by an injected fault.
    pub stalled: bool,
}

impl std::ops::AddAssign for StepReport {
    fn add_assign(&mut self, o: StepReport) {
        self.wqes += o.wqes;
        self.flushed += o.flushed;
        self.waiting |= o.waiting;
        self.stalled |= o.stalled;
    }
}

/// A requester-side failure: syndrome and vendor syndrome.
type ReqFault = (Syndrome, VendorSyndrome);

/// How a send WQE ended.
enum Outcome {
    /// Executed; `byte_cnt` for the requester CQE.
    Done(u32),
    /// The responder had no receive WQE and RNR retries are infinite.
    Wait,
    /// Failed.
    Fail(ReqFault),
}

/// Why a delivery to a responder failed.
enum RespFault {
    /// No receive WQE.
    Rnr,
    /// The responder hit a fault and completed a receive in error (already
    /// written); the requester sees this syndrome.
    Completed(Syndrome, VendorSyndrome),
    /// The request is invalid at the responder (no receive queue, bad XRC SRQ).
    Invalid(VendorSyndrome),
}

/// What a message carries into a responder's receive completion.
#[derive(Clone, Copy)]
struct IbMsg<'a> {
    src_qpn: Qpn,
    payload: &'a [u8],
    opcode: CqeOpcode,
    imm_inval: Option<[u8; 4]>,
    se: bool,
    sl: u8,
    grh: bool,
    /// false for RDMA write with immediate: nothing is scattered.
    scatter: bool,
    /// Send with invalidate: the key the responder invalidates once the
    /// message has landed in a receive WQE.
    invalidate: Option<u32>,
}

/// The emulated ConnectX.
#[derive(Debug)]
pub struct Device {
    cfg: DeviceConfig,
    pds: BTreeSet<Pdn>,
    xrcds: BTreeSet<Xrcdn>,
    mrs: MrTable,
    cqs: BTreeMap<Cqn, Cq>,
    cq_uars: BTreeMap<Cqn, Arc<DmaBlock>>,
    qps: BTreeMap<Qpn, Qp>,
    srqs: BTreeMap<Srqn, Srq>,
    flows: Vec<FlowRule>,
    faults: Vec<Fault>,
    stalled: BTreeSet<Qpn>,
    stall_all: bool,
    events: Vec<EmuEvent>,
    now: u64,
    ticks: u64,
    born: Instant,
    next_pd: u32,
    next_xrcd: u32,
    next_cq: u32,
    next_qp: u32,
    next_srq: u32,
    /// Address handles created: the seed of the next RoCE v2 UDP source
    /// port ([`ah::build_av`]).
    next_ah: u16,
    /// The trace recorder, when recording ([`Device::start_recording`]).
    rec: Option<Box<Recorder>>,
}

impl Default for Device {
    fn default() -> Self {
        Self::new(DeviceConfig::default())
    }
}

/// Bytes of the base transport header and the datagram extended
/// transport header of a UD packet, and of its invariant CRC: what an IBA
/// GRH's payload length (and a RoCE v2 IP header's length) counts besides
/// the payload.
const UD_BTH_DETH_ICRC: usize = 12 + 8 + 4;

/// The 40 bytes a UD receive gets before the payload when the packet had
/// a GRH, for a datagram of `len` payload bytes that looped back through
/// `port` (so the source GID is the port's own):
///
/// - InfiniBand, RoCE v1, and RoCE v2 between IPv6 GIDs: the IPv6-format
///   GRH (IBA 8.3: version 6, traffic class, flow label, payload length
///   from the BTH to the ICRC, next header 0x1b on InfiniBand and RoCE v1
///   or UDP (17) on RoCE v2, hop limit, SGID, DGID);
/// - RoCE v2 between IPv4-mapped GIDs (`::ffff:a.b.c.d`): 20 undefined
///   bytes (zero here), then the IPv4 header (rdma-core
///   `ibv_poll_cq(3)`: "for RoCE v2 over IPv4 the GRH holds the IPv4
///   header in its last 20 bytes").
fn grh_area(port: &PortConfig, av: &AvInfo, len: usize) -> Vec<u8> {
    let mut g = vec![0u8; 40];
    let roce_v2 = matches!(port.link_layer, LinkLayer::Ethernet { roce_v2: true });
    let v4 = |gid: &[u8; 16]| gid[..10].iter().all(|&b| b == 0) && gid[10..12] == [0xff, 0xff];
    let ib_len = len + UD_BTH_DETH_ICRC;
    if roce_v2 && v4(&av.rgid) && v4(&port.gid) {
        let total = (20 + 8 + ib_len) as u16;
        let ip = &mut g[20..40];
        ip[0] = 0x45;
        ip[1] = av.tclass;
        ip[2..4].copy_from_slice(&total.to_be_bytes());
        // Identification 0, don't fragment.
        ip[6] = 0x40;
        ip[8] = av.hop_limit;
        ip[9] = 17;
        ip[12..16].copy_from_slice(&port.gid[12..16]);
        ip[16..20].copy_from_slice(&av.rgid[12..16]);
        let csum = !eth::csum_fold(eth::csum_add(0, ip));
        ip[10..12].copy_from_slice(&csum.to_be_bytes());
        return g;
    }
    let w0 = (6u32 << 28) | (u32::from(av.tclass) << 20) | (av.flow_label & 0xf_ffff);
    g[..4].copy_from_slice(&w0.to_be_bytes());
    g[4..6].copy_from_slice(&(ib_len as u16).to_be_bytes());
    g[6] = if roce_v2 { 17 } else { 0x1b };
    g[7] = av.hop_limit;
    g[8..24].copy_from_slice(&port.gid);
    g[24..40].copy_from_slice(&av.rgid);
    g
}

fn vendor_of(f: KeyFault) -> VendorSyndrome {
    match f {
        KeyFault::BadKey => VendorSyndrome::BadKey,
        KeyFault::PdMismatch => VendorSyndrome::PdMismatch,
        KeyFault::Bounds => VendorSyndrome::Bounds,
        KeyFault::Access => VendorSyndrome::AccessRight,
        KeyFault::Misaligned => VendorSyndrome::Misaligned,
        KeyFault::MwState => VendorSyndrome::MwState,
    }
}

fn wqe_fault_syndrome(f: WqeFault) -> ReqFault {
    let v = match f {
        WqeFault::DsZero
        | WqeFault::DsTooSmall
        | WqeFault::DsTooLarge
        | WqeFault::InlineOverrun
        | WqeFault::KlmOverrun => VendorSyndrome::BadDs,
        WqeFault::BadWqeIndex | WqeFault::QpnMismatch => VendorSyndrome::BadCtrl,
        WqeFault::OpcodeNotAllowed => VendorSyndrome::OpcodeNotAllowed,
        WqeFault::Unsupported => VendorSyndrome::Unsupported,
        WqeFault::InlineNotAllowed
        | WqeFault::BadAtomicResult
        | WqeFault::EthInlineHeader
        | WqeFault::MpwSession
        | WqeFault::BadUmr => VendorSyndrome::BadSegment,
    };
    (Syndrome::LocalQpOp, v)
}

fn pow2(n: u32) -> Option<RingSize> {
    RingSize::new(n)
}

/// Masked fetch-and-add: `a + b` bitwise, a carry never leaving a bit set in
/// `boundary` (UCX uses all-ones boundaries to get XOR).
fn field_add(a: u64, b: u64, boundary: u64, bits: u32) -> u64 {
    let (mut r, mut carry) = (0u64, 0u64);
    for i in 0..bits {
        let (x, y) = ((a >> i) & 1, (b >> i) & 1);
        r |= (x ^ y ^ carry) << i;
        carry = (x & y) | (x & carry) | (y & carry);
        if (boundary >> i) & 1 == 1 {
            carry = 0;
        }
    }
    r
}

fn apply_atomic(op: &AtomicOp, v: u64) -> u64 {
    match *op {
        AtomicOp::Cs { swap, compare } => {
            if v == compare {
                swap
            } else {
                v
            }
        }
        AtomicOp::Fa { add } => v.wrapping_add(add),
        AtomicOp::MaskedCs {
            swap,
            compare,
            swap_mask,
            compare_mask,
            ..
        } => {
            if (v ^ compare) & compare_mask == 0 {
                (v & !swap_mask) | (swap & swap_mask)
            } else {
                v
            }
        }
        AtomicOp::MaskedFa {
            size,
            add,
            boundary,
        } => field_add(v, add, boundary, u32::from(size) * 8),
    }
}

impl Device {
    /// A device with `cfg`.
    pub fn new(cfg: DeviceConfig) -> Self {
        let ticks = match cfg.clock {
            ClockMode::Manual { start, .. } => start,
            _ => 0,
        };
        Self {
            cfg,
            pds: BTreeSet::new(),
            xrcds: BTreeSet::new(),
            mrs: MrTable::default(),
            cqs: BTreeMap::new(),
            cq_uars: BTreeMap::new(),
            qps: BTreeMap::new(),
            srqs: BTreeMap::new(),
            flows: Vec::new(),
            faults: Vec::new(),
            stalled: BTreeSet::new(),
            stall_all: false,
            events: Vec::new(),
            now: 0,
            ticks,
            born: Instant::now(),
            next_pd: 1,
            next_xrcd: 1,
            next_cq: 0x400,
            next_qp: 0x108,
            next_srq: 0x21,
            next_ah: 0,
            rec: None,
        }
    }

    /// The configuration (and capabilities) of the device.
    pub fn config(&self) -> &DeviceConfig {
        &self.cfg
    }

    /// The HCA core clock now, in ticks of `hca_core_clock_khz`.
    pub fn hca_core_clock(&self) -> u64 {
        let ns = self.born.elapsed().as_nanos();
        (ns * u128::from(self.cfg.caps.hca_core_clock_khz) / 1_000_000) as u64
    }

    fn timestamp(&mut self) -> u64 {
        match self.cfg.clock {
            ClockMode::Manual { step, .. } => {
                let t = self.ticks;
                self.ticks = self.ticks.wrapping_add(step);
                t
            }
            ClockMode::FreeRunning => self.hca_core_clock(),
            ClockMode::RealTime => {
                let d = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .unwrap_or_default();
                (d.as_secs() << 32) | u64::from(d.subsec_nanos())
            }
        }
    }

    /// Takes the events (async events and noticed core mistakes) so far.
    pub fn take_events(&mut self) -> Vec<EmuEvent> {
        std::mem::take(&mut self.events)
    }

    // ----------------------------------------------------------------------
    // Resources
    // ----------------------------------------------------------------------

    /// Allocates a protection domain.
    pub fn alloc_pd(&mut self) -> Pdn {
        let pd = Pdn(self.next_pd);
        self.next_pd += 1;
        self.pds.insert(pd);
        pd
    }

    /// Creates an address handle (`ibv_create_ah`) and returns its address
    /// vector as libmlx5's `mlx5_create_ah` builds it for this device's
    /// port ([`ah::build_av`]; Q_Key and remote QPN zero: each send work
    /// request writes its own over the copy). The emulator keeps nothing:
    /// the device never sees the handle, only the copies in the WQEs.
    pub fn create_ah(&mut self, pd: Pdn, attr: &AhAttr) -> Result<Av, EmuError> {
        if !self.pds.contains(&pd) {
            return Err(EmuError::not_found("create_ah"));
        }
        let seed = self.next_ah;
        self.next_ah = self.next_ah.wrapping_add(1);
        Ok(ah::build_av(&self.cfg.port, attr, seed))
    }

    /// Allocates an XRC domain.
    pub fn alloc_xrcd(&mut self) -> Xrcdn {
        let x = Xrcdn(self.next_xrcd);
        self.next_xrcd += 1;
        self.xrcds.insert(x);
        x
    }

    /// Allocates a zeroed, page-aligned buffer for memory registration.
    pub fn alloc_buffer(&self, len: usize) -> Result<Arc<DmaBlock>, EmuError> {
        DmaBlock::new(len, 4096)
            .map(Arc::new)
            .map_err(|_| EmuError::no_memory("alloc_buffer"))
    }

    /// Registers a device-allocated buffer; returns its key (lkey = rkey).
    pub fn reg_mr(
        &mut self,
        pd: Pdn,
        buf: &Arc<DmaBlock>,
        access: Access,
    ) -> Result<u32, EmuError> {
        self.check_pd(pd, "reg_mr")?;
        self.mrs
            .register(pd, MrMemory::Block(Arc::clone(buf)), access)
    }

    /// Registers the user's memory; returns its key.
    pub fn reg_user_mr(
        &mut self,
        pd: Pdn,
        mem: UserRegion,
        access: Access,
    ) -> Result<u32, EmuError> {
        self.check_pd(pd, "reg_mr")?;
        self.mrs.register(pd, MrMemory::User(mem), access)
    }

    /// Deregisters a memory region.
    pub fn dereg_mr(&mut self, key: u32) -> Result<(), EmuError> {
        self.mrs.deregister(key)
    }

    /// Makes an invalidated key valid again (the emulated fast registration).
    pub fn revalidate_mr(&mut self, key: u32) -> Result<(), EmuError> {
        if self.mrs.revalidate(key) {
            Ok(())
        } else {
            Err(EmuError::not_found("revalidate_mr"))
        }
    }

    /// Whether `key` is currently valid.
    pub fn mr_valid(&self, key: u32) -> bool {
        self.mrs.get(key).is_some_and(|m| m.valid)
    }

    /// Allocates a memory window of `mw_type` in `pd` (`ibv_alloc_mw`). It
    /// starts free: its rkey works only once a bind WQE has bound it.
    pub fn alloc_mw(&mut self, pd: Pdn, mw_type: MwType) -> Result<Mw, EmuError> {
        self.check_pd(pd, "alloc_mw")?;
        self.mrs.alloc_window(pd, mw_type)
    }

    /// Deallocates a memory window, named by any of its rkeys
    /// (`ibv_dealloc_mw`); its key stops working.
    pub fn dealloc_mw(&mut self, rkey: u32) -> Result<(), EmuError> {
        self.mrs.dealloc_window(rkey)
    }

    /// A memory window's current rkey and what it maps (`None`: free), by
    /// any of its rkeys; `None` if no window has that index.
    pub fn mw_state(&self, rkey: u32) -> Option<(u32, Option<MwBinding>)> {
        self.mrs.window(rkey)
    }

    fn check_pd(&self, pd: Pdn, verb: &'static str) -> Result<(), EmuError> {
        if self.pds.contains(&pd) {
            Ok(())
        } else {
            Err(EmuError::not_found(verb))
        }
    }

    /// Creates a CQ. The ring is initialised as rdma-core leaves it: every
    /// `op_own` = opcode INVALID with owner 0 (so the first pass must check
    /// the opcode, not just the owner bit), and on an enhanced-layout CQ
    /// every validity byte = `MLX5_CQE_VIC_INIT`.
    pub fn create_cq(&mut self, init: CqInit) -> Result<Cqn, EmuError> {
        const VERB: &str = "create_cq";
        let caps = &self.cfg.caps;
        let size = pow2(init.cqe_cnt)
            .filter(|_| init.cqe_cnt <= caps.max_cqe)
            .ok_or_else(|| {
                EmuError::invalid(VERB, "cqe_cnt must be a power of two within max_cqe")
            })?;
        if let Some(c) = init.compression {
            let layout_ok = match c.layout {
                CompressionLayout::Basic => caps.cqe_comp.basic_layout,
                CompressionLayout::Enhanced => caps.cqe_comp.enhanced_layout,
            };
            if !layout_ok || !caps.cqe_comp.formats.contains(&c.format) {
                return Err(EmuError::unsupported(VERB, "compression layout or format"));
            }
            if init.cqe_size == CqeSize::B128 && !caps.flags.cqe_128b_comp {
                return Err(EmuError::unsupported(VERB, "compression on 128-byte CQEs"));
            }
            if c.max_session < 2 || c.max_session > caps.cqe_comp.max_num {
                return Err(EmuError::invalid(VERB, "max_session outside 2..=max_num"));
            }
        }
        let stride = init.cqe_size.bytes();
        let ring = DmaBlock::new(stride * init.cqe_cnt as usize, 4096)
            .map_err(|_| EmuError::no_memory(VERB))?;
        let enhanced =
            matches!(init.compression, Some(c) if c.layout == CompressionLayout::Enhanced);
        for i in 0..init.cqe_cnt as usize {
            let off = i * stride + stride - 64;
            let _ = ring.write(off + 63, &[(CqeOpcode::Invalid.raw() << 4)]);
            if enhanced {
                let _ = ring.write(off + 62, &[CQE_VIC_INIT]);
            }
        }
        let dbrec = DmaBlock::new(64, 64).map_err(|_| EmuError::no_memory(VERB))?;
        let uar =
            DmaBlock::new(UAR_PAGE_SIZE, UAR_PAGE_SIZE).map_err(|_| EmuError::no_memory(VERB))?;
        let cqn = Cqn(self.next_cq);
        self.next_cq += 1;
        let mut cq = Cq::new(
            cqn,
            Arc::new(ring),
            size,
            init.cqe_size,
            Arc::new(dbrec),
            init.compression,
            init.ignore_overrun,
        );
        if self.rec.is_some() {
            cq.trace = Some(Vec::new());
        }
        self.cqs.insert(cqn, cq);
        self.cq_uars.insert(cqn, Arc::new(uar));
        Ok(cqn)
    }

    /// The raw parts of a CQ.
    pub fn cq_parts(&self, cqn: Cqn) -> Result<EmuCqParts, EmuError> {
        let cq = self
            .cqs
            .get(&cqn)
            .ok_or_else(|| EmuError::not_found("cq_parts"))?;
        let uar = self
            .cq_uars
            .get(&cqn)
            .ok_or_else(|| EmuError::not_found("cq_parts"))?;
        Ok(EmuCqParts {
            cqn: cqn.0,
            buf: cq.ring.as_ptr(),
            cqe_cnt: cq.size.entries(),
            cqe_size: cq.cqe_size.bytes() as u32,
            dbrec: cq.dbrec.as_ptr().cast(),
            uar: uar.as_ptr(),
            compression: cq.comp,
        })
    }

    /// What a CQ has written so far.
    pub fn cq_stats(&self, cqn: Cqn) -> Option<CqStats> {
        self.cqs.get(&cqn).map(|c| c.stats)
    }

    /// Destroys a CQ no QP or SRQ uses.
    pub fn destroy_cq(&mut self, cqn: Cqn) -> Result<(), EmuError> {
        let used = self
            .qps
            .values()
            .any(|q| q.send_cq == Some(cqn) || q.recv_cq == Some(cqn))
            || self.srqs.values().any(|s| s.cq == Some(cqn));
        if used {
            return Err(EmuError::busy("destroy_cq", "a QP or SRQ still uses it"));
        }
        self.cq_uars.remove(&cqn);
        self.cqs
            .remove(&cqn)
            .map(|_| ())
            .ok_or_else(|| EmuError::not_found("destroy_cq"))
    }

    /// Creates an SRQ (an XRC SRQ when `xrcd` and `cq` are given). Its WQEs
    /// are linked `i → i + 1` as rdma-core links them at creation.
    pub fn create_srq(&mut self, init: SrqInit) -> Result<Srqn, EmuError> {
        const VERB: &str = "create_srq";
        self.check_pd(init.pd, VERB)?;
        let size = pow2(init.wqe_cnt)
            .filter(|_| init.wqe_cnt <= self.cfg.caps.max_qp_wr)
            .ok_or_else(|| EmuError::invalid(VERB, "wqe_cnt must be a power of two"))?;
        if init.max_sge == 0 || init.max_sge > self.cfg.caps.max_sge {
            return Err(EmuError::invalid(VERB, "max_sge"));
        }
        if init.xrcd.is_some() != init.cq.is_some() {
            return Err(EmuError::invalid(
                VERB,
                "an XRC SRQ needs both an XRC domain and a CQ",
            ));
        }
        if let Some(x) = init.xrcd {
            if !self.xrcds.contains(&x) {
                return Err(EmuError::not_found(VERB));
            }
        }
        if let Some(c) = init.cq {
            if !self.cqs.contains_key(&c) {
                return Err(EmuError::not_found(VERB));
            }
        }
        let stride = (16 + 16 * init.max_sge).next_power_of_two();
        let ring = DmaBlock::new((stride * init.wqe_cnt) as usize, 4096)
            .map_err(|_| EmuError::no_memory(VERB))?;
        for i in 0..init.wqe_cnt {
            let next = ((i + 1) & size.mask()) as u16;
            let _ = ring.write((i * stride) as usize + 2, &next.to_be_bytes());
        }
        let dbrec = DmaBlock::new(64, 64).map_err(|_| EmuError::no_memory(VERB))?;
        let srqn = Srqn(self.next_srq);
        self.next_srq += 1;
        self.srqs.insert(
            srqn,
            Srq {
                srqn,
                pd: init.pd,
                cq: init.cq,
                xrcd: init.xrcd,
                ring: Arc::new(ring),
                size,
                stride,
                dbrec: Arc::new(dbrec),
                head: 0,
                consumed: 0,
            },
        );
        Ok(srqn)
    }

    /// The raw parts of an SRQ.
    pub fn srq_parts(&self, srqn: Srqn) -> Result<EmuRqParts, EmuError> {
        let s = self
            .srqs
            .get(&srqn)
            .ok_or_else(|| EmuError::not_found("srq_parts"))?;
        Ok(EmuRqParts {
            num: srqn.0,
            buf: s.ring.as_ptr(),
            wqe_cnt: s.size.entries(),
            stride: s.stride,
            dbrec: s.dbrec.as_ptr().cast(),
            kind: EmuRqKind::Srq,
        })
    }

    /// Creates a QP in the RESET state.
    pub fn create_qp(&mut self, init: QpInit) -> Result<Qpn, EmuError> {
        const VERB: &str = "create_qp";
        let caps = self.cfg.caps.clone();
        self.check_pd(init.pd, VERB)?;
        for cq in [init.send_cq, init.recv_cq].into_iter().flatten() {
            if !self.cqs.contains_key(&cq) {
                return Err(EmuError::not_found(VERB));
            }
        }
        let t = init.qp_type;
        let has_sq = init.sq_wqebbs > 0;
        match t {
            QpType::XrcTgt => {
                if has_sq || init.rq != RqInit::None {
                    return Err(EmuError::invalid(VERB, "an XRC target has no SQ and no RQ"));
                }
                match init.xrcd {
                    Some(x) if self.xrcds.contains(&x) => {}
                    _ => return Err(EmuError::invalid(VERB, "an XRC target needs an XRC domain")),
                }
            }
            QpType::XrcIni if init.rq != RqInit::None => {
                return Err(EmuError::invalid(VERB, "an XRC initiator has no RQ"));
            }
            _ => {}
        }
        if has_sq && init.send_cq.is_none() {
            return Err(EmuError::invalid(VERB, "an SQ needs a send CQ"));
        }
        if !matches!(init.rq, RqInit::None | RqInit::Srq(_)) && init.recv_cq.is_none() {
            return Err(EmuError::invalid(VERB, "an RQ needs a receive CQ"));
        }
        if init.max_inline > caps.max_inline || init.max_send_sge > caps.max_sge {
            return Err(EmuError::invalid(
                VERB,
                "max_inline or max_send_sge beyond the caps",
            ));
        }
        let sq_size = if has_sq {
            Some(
                pow2(init.sq_wqebbs)
                    .filter(|_| init.sq_wqebbs <= caps.max_qp_wr)
                    .ok_or_else(|| EmuError::invalid(VERB, "sq_wqebbs must be a power of two"))?,
            )
        } else {
            None
        };
        let rq = match init.rq {
            RqInit::None => RqAttach::None,
            RqInit::Srq(s) => {
                if t == QpType::RawPacket {
                    return Err(EmuError::unsupported(VERB, "raw packet QP on an SRQ"));
                }
                match self.srqs.get(&s) {
                    Some(srq) if srq.xrcd.is_none() => RqAttach::Srq(s),
                    _ => return Err(EmuError::invalid(VERB, "no such (non-XRC) SRQ")),
                }
            }
            RqInit::Cyclic { wqe_cnt, max_sge } => {
                let size = pow2(wqe_cnt)
                    .filter(|_| wqe_cnt <= caps.max_qp_wr)
                    .ok_or_else(|| EmuError::invalid(VERB, "rq wqe_cnt must be a power of two"))?;
                if max_sge == 0 || max_sge > caps.max_sge {
                    return Err(EmuError::invalid(VERB, "rq max_sge"));
                }
                let stride = (16 * max_sge).next_power_of_two();
                let ring = DmaBlock::new((stride * wqe_cnt) as usize, 4096)
                    .map_err(|_| EmuError::no_memory(VERB))?;
                RqAttach::Own(Rq {
                    ring: Arc::new(ring),
                    size,
                    stride,
                    ci: 0,
                    striding: None,
                })
            }
            RqInit::Striding {
                wqe_cnt,
                log_num_strides,
                log_stride_bytes,
            } => {
                let s = caps.striding_rq;
                if t != QpType::RawPacket {
                    return Err(EmuError::unsupported(
                        VERB,
                        "striding RQ needs a raw packet QP",
                    ));
                }
                if !(s.min_log_num_strides..=s.max_log_num_strides).contains(&log_num_strides)
                    || !(s.min_log_stride_bytes..=s.max_log_stride_bytes)
                        .contains(&log_stride_bytes)
                {
                    return Err(EmuError::unsupported(
                        VERB,
                        "striding RQ parameters beyond the caps",
                    ));
                }
                let size = pow2(wqe_cnt)
                    .ok_or_else(|| EmuError::invalid(VERB, "rq wqe_cnt must be a power of two"))?;
                let ring = DmaBlock::new(32 * wqe_cnt as usize, 4096)
                    .map_err(|_| EmuError::no_memory(VERB))?;
                RqAttach::Own(Rq {
                    ring: Arc::new(ring),
                    size,
                    stride: 32,
                    ci: 0,
                    striding: Some(Striding {
                        log_num_strides,
                        log_stride_bytes,
                        pos: 0,
                    }),
                })
            }
        };
        let dbrec = Arc::new(DmaBlock::new(64, 64).map_err(|_| EmuError::no_memory(VERB))?);
        let sq = match sq_size {
            Some(size) => {
                let ring = DmaBlock::new(64 * size.entries() as usize, 4096)
                    .map_err(|_| EmuError::no_memory(VERB))?;
                let uar = DmaBlock::new(UAR_PAGE_SIZE, UAR_PAGE_SIZE)
                    .map_err(|_| EmuError::no_memory(VERB))?;
                Some(Sq {
                    ring: Arc::new(ring),
                    size,
                    ci: 0,
                    uar: Arc::new(uar),
                    bf_size: caps.bf_reg_size / 2,
                    max_inline: init.max_inline,
                    max_sge: init.max_send_sge,
                    rung: false,
                })
            }
            None => None,
        };
        let qpn = Qpn(self.next_qp);
        self.next_qp += 1;
        self.qps.insert(
            qpn,
            Qp {
                qpn,
                qp_type: t,
                state: QpState::Reset,
                pd: init.pd,
                send_cq: init.send_cq,
                recv_cq: init.recv_cq,
                xrcd: init.xrcd,
                sq,
                rq,
                dbrec,
                attrs: QpAttrs {
                    access: Access::NONE,
                    qkey: 0,
                    dest_qpn: None,
                    retry_cnt: 7,
                    rnr_retry: 7,
                },
                vlan_strip: init.vlan_strip,
            },
        );
        Ok(qpn)
    }

    /// The raw parts of a QP's send queue.
    pub fn sq_parts(&self, qpn: Qpn) -> Result<EmuSqParts, EmuError> {
        let qp = self
            .qps
            .get(&qpn)
            .ok_or_else(|| EmuError::not_found("sq_parts"))?;
        let sq = qp
            .sq
            .as_ref()
            .ok_or_else(|| EmuError::invalid("sq_parts", "the QP has no SQ"))?;
        Ok(EmuSqParts {
            qpn: qpn.0,
            buf: sq.ring.as_ptr(),
            wqe_cnt: sq.size.entries(),
            stride: 64,
            dbrec: qp.dbrec.as_ptr().cast(),
            uar: sq.uar.as_ptr(),
            bf_reg: sq.uar.as_ptr().wrapping_add(UAR_BF_OFFSET),
            bf_size: sq.bf_size,
            max_inline: sq.max_inline,
            max_sge: sq.max_sge,
        })
    }

    /// The raw parts of a QP's own receive queue.
    pub fn rq_parts(&self, qpn: Qpn) -> Result<EmuRqParts, EmuError> {
        let qp = self
            .qps
            .get(&qpn)
            .ok_or_else(|| EmuError::not_found("rq_parts"))?;
        let RqAttach::Own(rq) = &qp.rq else {
            return Err(EmuError::invalid("rq_parts", "the QP has no RQ of its own"));
        };
        Ok(EmuRqParts {
            num: qpn.0,
            buf: rq.ring.as_ptr(),
            wqe_cnt: rq.size.entries(),
            stride: rq.stride,
            dbrec: qp.dbrec.as_ptr().cast(),
            kind: match rq.striding {
                None => EmuRqKind::Cyclic,
                Some(s) => EmuRqKind::Striding {
                    log_num_strides: s.log_num_strides,
                    log_stride_bytes: s.log_stride_bytes,
                },
            },
        })
    }

    /// The state of a QP.
    pub fn qp_state(&self, qpn: Qpn) -> Option<QpState> {
        self.qps.get(&qpn).map(|q| q.state)
    }

    /// The transport of a QP.
    pub fn qp_type(&self, qpn: Qpn) -> Option<QpType> {
        self.qps.get(&qpn).map(|q| q.qp_type)
    }

    /// Destroys a QP.
    pub fn destroy_qp(&mut self, qpn: Qpn) -> Result<(), EmuError> {
        self.flows.retain(|f| f.qpn != qpn);
        self.qps
            .remove(&qpn)
            .map(|_| ())
            .ok_or_else(|| EmuError::not_found("destroy_qp"))
    }

    /// Moves a QP through the state machine: RESET → INIT → RTR → RTS, any
    /// state → ERR or RESET, INIT → INIT, RTS → RTS.
    pub fn modify_qp(&mut self, qpn: Qpn, to: QpState, attr: &QpAttr) -> Result<(), EmuError> {
        const VERB: &str = "modify_qp";
        let qp = self
            .qps
            .get_mut(&qpn)
            .ok_or_else(|| EmuError::not_found(VERB))?;
        match (qp.state, to) {
            (_, QpState::Reset) => {
                qp.state = QpState::Reset;
                if let Some(sq) = qp.sq.as_mut() {
                    sq.ci = 0;
                    sq.rung = false;
                }
                if let RqAttach::Own(rq) = &mut qp.rq {
                    rq.ci = 0;
                    if let Some(s) = rq.striding.as_mut() {
                        s.pos = 0;
                    }
                }
                qp.attrs = QpAttrs {
                    access: Access::NONE,
                    qkey: 0,
                    dest_qpn: None,
                    retry_cnt: 7,
                    rnr_retry: 7,
                };
                Ok(())
            }
            (_, QpState::Err) => {
                self.enter_error(qpn, None);
                Ok(())
            }
            (QpState::Reset | QpState::Init, QpState::Init) => {
                qp.attrs.access = attr.access;
                qp.attrs.qkey = attr.qkey;
                qp.state = QpState::Init;
                Ok(())
            }
            (QpState::Init, QpState::Rtr) => {
                let connected = matches!(
                    qp.qp_type,
                    QpType::Rc | QpType::Uc | QpType::XrcIni | QpType::XrcTgt
                );
                if connected && attr.dest_qpn.is_none() {
                    return Err(EmuError::invalid(
                        VERB,
                        "RTR of a connected QP needs dest_qpn",
                    ));
                }
                qp.attrs.dest_qpn = attr.dest_qpn;
                qp.state = QpState::Rtr;
                Ok(())
            }
            (QpState::Rtr | QpState::Rts, QpState::Rts) => {
                if qp.qp_type == QpType::XrcTgt {
                    return Err(EmuError::invalid(VERB, "an XRC target stays in RTR"));
                }
                qp.attrs.retry_cnt = attr.retry_cnt.min(7);
                qp.attrs.rnr_retry = attr.rnr_retry.min(7);
                qp.state = QpState::Rts;
                Ok(())
            }
            (from, to) => Err(EmuError::invalid(
                VERB,
                format!("transition {from:?} -> {to:?}"),
            )),
        }
    }

    /// Adds a steering rule for raw Ethernet frames (rules match in order).
    pub fn add_flow(&mut self, rule: FlowRule) -> Result<(), EmuError> {
        match self.qps.get(&rule.qpn) {
            Some(q) if q.qp_type == QpType::RawPacket => {
                self.flows.push(rule);
                Ok(())
            }
            _ => Err(EmuError::invalid(
                "create_flow",
                "steering needs a raw packet QP",
            )),
        }
    }

    // ----------------------------------------------------------------------
    // Fault injection
    // ----------------------------------------------------------------------

    /// Injects a fault.
    pub fn inject(&mut self, fault: Fault) {
        match fault {
            Fault::DelayCompletions { cqn, steps } => {
                if let Some(cq) = self.cqs.get_mut(&cqn) {
                    cq.delay_steps = steps;
                }
            }
            Fault::StallQp { qpn } => {
                self.stalled.insert(qpn);
            }
            Fault::StallDevice => self.stall_all = true,
            f => self.faults.push(f),
        }
    }

    /// Ends every stall.
    pub fn resume(&mut self) {
        self.stalled.clear();
        self.stall_all = false;
    }

    /// Drops every pending injected fault, stall and delay.
    pub fn clear_faults(&mut self) {
        self.faults.clear();
        self.resume();
        for cq in self.cqs.values_mut() {
            cq.delay_steps = 0;
        }
    }

    /// Consumes an injected WQE failure for `qpn` if one is due.
    fn take_injected(&mut self, qpn: Qpn) -> Option<Syndrome> {
        let mut hit = None;
        self.faults.retain_mut(|f| match f {
            Fault::FailWqe {
                qpn: q,
                skip,
                syndrome,
            } if *q == qpn && hit.is_none() => {
                if *skip == 0 {
                    hit = Some(*syndrome);
                    false
                } else {
                    *skip -= 1;
                    true
                }
            }
            _ => true,
        });
        hit
    }

    fn take_rnr(&mut self, qpn: Qpn) -> bool {
        let mut hit = false;
        self.faults.retain_mut(|f| match f {
            Fault::Rnr { qpn: q, count } if *q == qpn && !hit => {
                hit = true;
                *count = count.saturating_sub(1);
                *count > 0
            }
            _ => true,
        });
        hit
    }

    // ----------------------------------------------------------------------
    // Step mode
    // ----------------------------------------------------------------------

    /// Processes `qpn`'s SQ up to its doorbell record, as if its doorbell
    /// had been rung, then writes the completions.
    pub fn process_sq(&mut self, qpn: Qpn) -> Result<StepReport, EmuError> {
        self.process_sq_n(qpn, u32::MAX)
    }

    /// Like [`Self::process_sq`], executing at most `n` WQEs.
    pub fn process_sq_n(&mut self, qpn: Qpn, n: u32) -> Result<StepReport, EmuError> {
        if !self.qps.contains_key(&qpn) {
            return Err(EmuError::not_found("process_sq"));
        }
        self.now += 1;
        let mut rep = self.run_sq(qpn, n);
        rep += self.finish_step();
        Ok(rep)
    }

    /// One device step: observe UAR writes (SQ doorbells, BlueFlame, CQ
    /// arms), release delayed completions, process every SQ whose doorbell
    /// was rung (or that waits on RNR, was stalled or was cut short by
    /// [`DeviceConfig::step_budget`]), flush QPs in error, write CQEs.
    pub fn step(&mut self) -> StepReport {
        self.now += 1;
        self.poll_uar();
        let mut rep = StepReport::default();
        let rung: Vec<Qpn> = self
            .qps
            .iter()
            .filter(|(_, q)| q.sq.as_ref().is_some_and(|s| s.rung))
            .map(|(n, _)| *n)
            .collect();
        let budget = if self.cfg.step_budget == 0 {
            u32::MAX
        } else {
            self.cfg.step_budget
        };
        for qpn in rung {
            if let Some(sq) = self.qps.get_mut(&qpn).and_then(|q| q.sq.as_mut()) {
                sq.rung = false;
            }
            rep += self.run_sq(qpn, budget);
        }
        rep += self.finish_step();
        rep
    }

    /// Flushes QPs in error, releases delayed completions, writes CQEs.
    fn finish_step(&mut self) -> StepReport {
        let mut rep = StepReport::default();
        let errored: Vec<Qpn> = self
            .qps
            .iter()
            .filter(|(_, q)| q.state == QpState::Err)
            .map(|(n, _)| *n)
            .collect();
        for qpn in errored {
            rep += self.run_sq(qpn, u32::MAX);
            self.flush_rq(qpn);
        }
        let now = self.now;
        let mut events = Vec::new();
        for cq in self.cqs.values_mut() {
            cq.release_delayed(now);
            if let Some(r) = self.rec.as_mut() {
                if !cq.pending.is_empty() {
                    let ci = cq.dbrec.load_be32_acquire(0).unwrap_or(0);
                    if r.dbrec_changed("cq", cq.cqn.0, 0, ci) {
                        let mut e = Expects::new();
                        e.hex("ci", ci & 0x00ff_ffff);
                        r.record(&Record {
                            kind: "dbrec",
                            params: vec![
                                ("queue", format!("cq {:#x}", cq.cqn.0)),
                                ("word", "0".into()),
                            ],
                            expect: e,
                            notes: Vec::new(),
                            bytes: &ci.to_be_bytes(),
                        });
                    }
                }
            }
            cq.flush(&mut events);
            if let Some(r) = self.rec.as_mut() {
                let traces = cq.trace.as_mut().map(std::mem::take).unwrap_or_default();
                for t in &traces {
                    r.record(&record::cq_record(
                        cq.cqn.0,
                        cq.size.entries(),
                        cq.cqe_size,
                        cq.comp,
                        t,
                    ));
                }
            }
        }
        self.events.extend(events);
        rep
    }

    // ----------------------------------------------------------------------
    // Recording
    // ----------------------------------------------------------------------

    /// Starts recording what the device sees into `path` (an `hw-traces/`
    /// record file; the scenario family is the file stem), replacing any
    /// recording in progress. Saved by [`Self::stop_recording`].
    pub fn start_recording(&mut self, path: impl AsRef<Path>) {
        let path = path.as_ref();
        let family = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("emulated");
        self.start_recording_to(Recorder::new(family, Some(path)));
    }

    /// Starts recording into `rec` (a file or an in-memory sink).
    pub fn start_recording_to(&mut self, rec: Recorder) {
        for cq in self.cqs.values_mut() {
            cq.trace = Some(Vec::new());
        }
        self.rec = Some(Box::new(rec));
    }

    /// The recorder, while recording.
    pub fn recorder(&self) -> Option<&Recorder> {
        self.rec.as_deref()
    }

    /// Stops recording: saves the file (if the recorder has one) and
    /// returns what was recorded; `None` when not recording.
    pub fn stop_recording(&mut self) -> Option<std::io::Result<RecordStats>> {
        for cq in self.cqs.values_mut() {
            cq.trace = None;
        }
        self.rec.take().map(|r| r.finish())
    }

    /// Stops recording and hands the recorder back unsaved.
    pub fn take_recorder(&mut self) -> Option<Recorder> {
        for cq in self.cqs.values_mut() {
            cq.trace = None;
        }
        self.rec.take().map(|r| *r)
    }

    /// Records a doorbell-record word the device acted on, if it changed.
    fn rec_dbrec(&mut self, queue: &'static str, num: u32, word: u8, value: u32) {
        let Some(r) = self.rec.as_mut() else { return };
        if !r.dbrec_changed(queue, num, word, value) {
            return;
        }
        let mut e = Expects::new();
        e.hex("counter", value & 0xffff);
        r.record(&Record {
            kind: "dbrec",
            params: vec![
                ("queue", format!("{queue} {num:#x}")),
                ("word", word.to_string()),
            ],
            expect: e,
            notes: Vec::new(),
            bytes: &value.to_be_bytes(),
        });
    }

    /// Records the receive doorbell record of `dest` (its own RQ or SRQ).
    fn rec_rq_dbrec(&mut self, dest: Qpn, xrc_srqn: Option<u32>) {
        let Some(qp) = self.qps.get(&dest) else {
            return;
        };
        let (queue, num, value) = match (xrc_srqn, &qp.rq) {
            (Some(s), _) => match self.srqs.get(&Srqn(s)) {
                Some(srq) => ("srq", s, srq.dbrec.load_be32_acquire(0).unwrap_or(0)),
                None => return,
            },
            (None, RqAttach::Own(_)) => ("rq", dest.0, qp.dbrec.load_be32_acquire(0).unwrap_or(0)),
            (None, RqAttach::Srq(s)) => match self.srqs.get(s) {
                Some(srq) => ("srq", s.0, srq.dbrec.load_be32_acquire(0).unwrap_or(0)),
                None => return,
            },
            (None, RqAttach::None) => return,
        };
        self.rec_dbrec(queue, num, 0, value);
    }

    /// Records a WQE as read from the ring, with what the device parsed.
    fn rec_wqe(
        &mut self,
        qp_type: QpType,
        ring: u32,
        ci: u32,
        bytes: &[u8],
        parsed: Result<&Wqe, wqe::WqeFault>,
    ) {
        let Some(r) = self.rec.as_mut() else { return };
        if !r.wants("wqe") {
            return;
        }
        let Some(ctrl) = wqe::peek_ctrl(bytes) else {
            return;
        };
        let (expect, notes) = record::wqe_expects(ctrl, parsed);
        r.record(&Record {
            kind: "wqe",
            params: vec![
                ("qp", record::qp_name(qp_type).to_string()),
                ("ring-size", ring.to_string()),
                ("ci", ci.to_string()),
            ],
            expect,
            notes,
            bytes,
        });
    }

    /// Records an SQ doorbell or BlueFlame write the device observed.
    fn rec_sq_mmio(&mut self, qpn: Qpn, off: usize, seen: &[u8]) {
        let qp_type = self.qps.get(&qpn).map_or(QpType::Rc, |q| q.qp_type);
        let Some(r) = self.rec.as_mut() else { return };
        let Some(ctrl) = wqe::peek_ctrl(&[seen, &[0u8; 16]].concat()) else {
            return;
        };
        let mut e = Expects::new();
        record::ctrl_expects(&mut e, ctrl);
        let note = if seen.len() > 8 {
            "a BlueFlame copy of the WQE (the register write as the device saw it)"
        } else {
            "an 8-byte SQ doorbell: the first 8 bytes of the control segment"
        };
        r.record(&Record {
            kind: "mmio_write",
            params: vec![
                ("queue", format!("sq {:#x}", qpn.0)),
                ("qp", record::qp_name(qp_type).to_string()),
                ("offset", format!("{off:#x}")),
            ],
            expect: e,
            notes: vec![note.to_string()],
            bytes: seen,
        });
    }

    /// Reads every UAR register the core may have written.
    pub fn poll_uar(&mut self) {
        let qpns: Vec<Qpn> = self.qps.keys().copied().collect();
        for qpn in qpns {
            self.poll_sq_uar(qpn);
        }
        let cqns: Vec<Cqn> = self.cq_uars.keys().copied().collect();
        for cqn in cqns {
            self.poll_cq_uar(cqn);
        }
    }

    fn poll_sq_uar(&mut self, qpn: Qpn) {
        let Some(qp) = self.qps.get(&qpn) else { return };
        let Some(sq) = &qp.sq else { return };
        let (uar, ring, size, half, ci) = (
            Arc::clone(&sq.uar),
            Arc::clone(&sq.ring),
            sq.size,
            sq.bf_size as usize,
            sq.ci,
        );
        let dbrec = Arc::clone(&qp.dbrec);
        let mut rung = false;
        for k in 0..2 {
            let off = UAR_BF_OFFSET + k * half.max(8);
            let Ok(word) = uar.load_u64_acquire(off) else {
                continue;
            };
            if word == [0; 8] {
                continue;
            }
            // The record after the register: the core writes the record
            // first, so a record read now covers this doorbell even when
            // the core runs on another thread.
            let db = dbrec.load_be32_acquire(4).unwrap_or(0) as u16;
            let Some((_, _, idx, wqpn, ds)) = wqe::peek_ctrl(&[&word[..], &[0; 8]].concat()) else {
                continue;
            };
            if self.rec.is_some() {
                let len = (usize::from(ds) * 16).min(half).max(8);
                let mut seen = vec![0u8; len];
                let _ = uar.read(off, &mut seen);
                seen[..8].copy_from_slice(&word);
                // Nothing past the first 8 bytes (the device zeroes the
                // register after each copy, below): an 8-byte doorbell,
                // recorded as the 8 bytes written, not as a BlueFlame copy.
                if seen[8..].iter().all(|&b| b == 0) {
                    seen.truncate(8);
                }
                self.rec_sq_mmio(qpn, off, &seen);
            }
            if wqpn != qpn.0 {
                self.events.push(EmuEvent::UarUnknownTarget { num: wqpn });
            } else {
                let ahead = db.wrapping_sub(idx);
                if ahead == 0 || u32::from(ahead) > size.entries() {
                    self.events.push(EmuEvent::UarBeforeDbrec {
                        qpn,
                        wqe_index: idx,
                    });
                }
                // A BlueFlame copy: compare it with the ring (PRM-FACTS §7).
                let len = (usize::from(ds) * 16).min(half);
                if len > 8 {
                    let mut bf = vec![0u8; len];
                    let _ = uar.read(off, &mut bf);
                    if bf[8..].iter().any(|&b| b != 0) {
                        let ring_bytes =
                            read_ring(&ring, size, u32::from(idx), len.div_ceil(64) as u32);
                        if !blueflame_settles(&uar, off, word, &ring_bytes[..len], &mut bf)
                            && !stale_blueflame(&ring, size, ci, db, &ring_bytes, &bf)
                        {
                            self.events.push(EmuEvent::BlueFlameMismatch {
                                qpn,
                                wqe_index: idx,
                            });
                        }
                        let _ = uar.fill(off + 8, half.max(8) - 8, 0);
                    }
                }
                rung = true;
            }
            let _ = uar.clear_u64_if(off, word);
        }
        if rung {
            if let Some(sq) = self.qps.get_mut(&qpn).and_then(|q| q.sq.as_mut()) {
                sq.rung = true;
            }
        }
    }

    fn poll_cq_uar(&mut self, cqn: Cqn) {
        let Some(uar) = self.cq_uars.get(&cqn).cloned() else {
            return;
        };
        let Ok(word) = uar.load_u64_acquire(UAR_CQ_DOORBELL_OFFSET) else {
            return;
        };
        if word == [0; 8] {
            return;
        }
        let _ = uar.clear_u64_if(UAR_CQ_DOORBELL_OFFSET, word);
        let arm = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
        let num = u32::from_be_bytes([word[4], word[5], word[6], word[7]]);
        let Some(cq) = self.cqs.get_mut(&cqn) else {
            return;
        };
        if num != cqn.0 {
            self.events.push(EmuEvent::UarUnknownTarget { num });
            return;
        }
        let rec = cq.dbrec.load_be32_acquire(4).unwrap_or(0);
        if rec != arm {
            self.events.push(EmuEvent::ArmMismatch { cqn });
        }
        if let Some(r) = self.rec.as_mut() {
            let mut e = Expects::new();
            record::arm_expects(&mut e, arm);
            e.hex("cqn", num);
            r.record(&Record {
                kind: "mmio_write",
                params: vec![
                    ("queue", format!("cq {:#x}", cqn.0)),
                    ("offset", format!("{UAR_CQ_DOORBELL_OFFSET:#x}")),
                ],
                expect: e,
                notes: vec!["the CQ arm doorbell: arm word, then CQN, both big-endian".into()],
                bytes: &word,
            });
            if r.dbrec_changed("cq", cqn.0, 1, rec) {
                let mut e = Expects::new();
                record::arm_expects(&mut e, rec);
                r.record(&Record {
                    kind: "dbrec",
                    params: vec![("queue", format!("cq {:#x}", cqn.0)), ("word", "1".into())],
                    expect: e,
                    notes: Vec::new(),
                    bytes: &rec.to_be_bytes(),
                });
            }
        }
        let Some(cq) = self.cqs.get_mut(&cqn) else {
            return;
        };
        let word = mlx5dp::prm::CqArmWord::from_bits(Be32::new(arm));
        let mut events = Vec::new();
        cq.arm(word.cmd(), word.arm_sn(), word.ci(), &mut events);
        self.events.extend(events);
    }

    // ----------------------------------------------------------------------
    // The send engine
    // ----------------------------------------------------------------------

    /// Processes `qpn`'s SQ: executes up to `budget` WQEs in RTS, flushes
    /// everything published in ERR.
    fn run_sq(&mut self, qpn: Qpn, budget: u32) -> StepReport {
        let mut rep = StepReport::default();
        while let Some(qp) = self.qps.get(&qpn) {
            let state = qp.state;
            let Some(sq) = &qp.sq else { break };
            match state {
                QpState::Rts => {
                    let stalled = self.stall_all || self.stalled.contains(&qpn);
                    if stalled || rep.wqes >= budget {
                        // The doorbell stays rung: what the record
                        // publishes runs on a later step (once the stall
                        // ends), without another doorbell, as the
                        // hardware's SQ engine would.
                        rep.stalled |= stalled;
                        if let Some(sq) = self.qps.get_mut(&qpn).and_then(|q| q.sq.as_mut()) {
                            sq.rung = true;
                        }
                        break;
                    }
                }
                QpState::Err => {}
                _ => break,
            }
            let (ring, size, ci) = (Arc::clone(&sq.ring), sq.size, sq.ci);
            let db = qp.dbrec.load_be32_acquire(4).unwrap_or(0);
            if self.rec.is_some() {
                self.rec_dbrec("sq", qpn.0, 1, db);
            }
            let avail = match qp::available(db, ci, size) {
                Some(0) => break,
                Some(n) => n,
                None => {
                    self.events
                        .push(EmuEvent::SqDoorbellOverrun { qpn, pi: db as u16 });
                    self.enter_error(qpn, Some(EmuEvent::QpFatal { qpn }));
                    self.set_sq_ci(qpn, db);
                    break;
                }
            };
            let first = read_ring(&ring, size, ci, 1);
            let (opcode, _, _, _, ds) = wqe::peek_ctrl(&first).unwrap_or((0, 0, 0, 0, 0));
            let bbs = (usize::from(ds.max(1)) * 16).div_ceil(64) as u32;
            let wqe_index = ci as u16;
            let signalled = first[11] >> 2 & 3;
            if bbs > avail {
                self.events
                    .push(EmuEvent::WqeBeyondDoorbell { qpn, wqe_index });
                if state == QpState::Rts {
                    self.req_error(
                        qpn,
                        opcode,
                        wqe_index,
                        (Syndrome::LocalQpOp, VendorSyndrome::BadDs),
                    );
                } else {
                    self.flush_send(qpn, opcode, wqe_index, signalled);
                }
                self.set_sq_ci(qpn, db);
                continue;
            }
            if state == QpState::Err {
                self.flush_send(qpn, opcode, wqe_index, signalled);
                self.advance_sq(qpn, bbs);
                rep.flushed += 1;
                continue;
            }
            if let Some(syndrome) = self.take_injected(qpn) {
                self.req_error(qpn, opcode, wqe_index, (syndrome, VendorSyndrome::Injected));
                self.advance_sq(qpn, bbs);
                rep.wqes += 1;
                continue;
            }
            let bytes = read_ring(&ring, size, ci, bbs);
            let wqe_bytes = &bytes[..usize::from(ds.max(1)) * 16];
            let ctx = self.parse_ctx(qpn, wqe_index);
            let parsed = ctx.map(|c| wqe::parse(wqe_bytes, &c));
            if self.rec.is_some() {
                if let (Some(p), Some(c)) = (&parsed, ctx) {
                    self.rec_wqe(
                        c.qp_type,
                        size.entries(),
                        ci,
                        wqe_bytes,
                        p.as_ref().map_err(|f| *f),
                    );
                }
            }
            let outcome = match parsed {
                None => break,
                Some(Err(f)) => Outcome::Fail(wqe_fault_syndrome(f)),
                Some(Ok(w)) => self.execute(qpn, &w),
            };
            match outcome {
                Outcome::Done(byte_cnt) => {
                    if signalled >= 2 {
                        self.req_success(qpn, opcode, wqe_index, byte_cnt);
                    }
                    self.advance_sq(qpn, bbs);
                }
                Outcome::Wait => {
                    if let Some(sq) = self.qps.get_mut(&qpn).and_then(|q| q.sq.as_mut()) {
                        sq.rung = true;
                    }
                    rep.waiting = true;
                    break;
                }
                Outcome::Fail(f) => {
                    self.req_error(qpn, opcode, wqe_index, f);
                    self.advance_sq(qpn, bbs);
                }
            }
            rep.wqes += 1;
        }
        rep
    }

    fn parse_ctx(&self, qpn: Qpn, expected_index: u16) -> Option<ParseCtx> {
        let qp = self.qps.get(&qpn)?;
        let caps = &self.cfg.caps;
        Some(ParseCtx {
            qp_type: qp.qp_type,
            qpn: qpn.0,
            expected_index,
            max_wqe_bytes: caps.max_send_wqe_bytes,
            mpw: caps.flags.mpw_allowed,
            empw: caps.flags.enhanced_mpw,
            eth_min_inline: caps.eth_min_inline,
            max_tso_header: caps.max_tso_header,
        })
    }

    fn advance_sq(&mut self, qpn: Qpn, bbs: u32) {
        if let Some(sq) = self.qps.get_mut(&qpn).and_then(|q| q.sq.as_mut()) {
            sq.ci = sq.ci.wrapping_add(bbs);
        }
    }

    /// Moves the SQ consumer to the doorbell record's 16-bit counter.
    fn set_sq_ci(&mut self, qpn: Qpn, db: u32) {
        if let Some(sq) = self.qps.get_mut(&qpn).and_then(|q| q.sq.as_mut()) {
            let delta = (db as u16).wrapping_sub(sq.ci as u16);
            sq.ci = sq.ci.wrapping_add(u32::from(delta));
        }
    }

    fn push_cqe(&mut self, cqn: Option<Cqn>, c: Completion) {
        let now = self.now;
        if let Some(cq) = cqn.and_then(|n| self.cqs.get_mut(&n)) {
            cq.push(now, c);
        }
    }

    fn req_success(&mut self, qpn: Qpn, opcode: u8, wqe_index: u16, byte_cnt: u32) {
        let mut cqe = Cqe64::default();
        cqe.op_own.set_opcode(CqeOpcode::Req.raw());
        cqe.sop_drop_qpn.set_sop(opcode);
        cqe.sop_drop_qpn.set_qpn(qpn.0);
        cqe.wqe_counter.set(wqe_index);
        cqe.byte_cnt.set(byte_cnt);
        cqe.timestamp.set(self.timestamp());
        let cq = self.qps.get(&qpn).and_then(|q| q.send_cq);
        self.push_cqe(
            cq,
            Completion {
                cqe,
                class: CqeClass::Req,
            },
        );
    }

    fn err_cqe(
        &mut self,
        opcode: CqeOpcode,
        s_opcode: u8,
        qpn: Qpn,
        counter: u16,
        f: ReqFault,
        srqn: u32,
    ) -> Completion {
        // Built as `mlx5_err_cqe`: no timestamp (bytes 48–55 of a regular
        // CQE overlap the syndromes here).
        let mut e = ErrCqe::default();
        e.srqn.set(srqn);
        e.vendor_err_synd = f.1 as u8;
        e.syndrome = f.0.raw();
        e.s_wqe_opcode_qpn = SWqeOpcodeQpn::new()
            .with_s_wqe_opcode(s_opcode)
            .with_qpn(qpn.0);
        e.wqe_counter.set(counter);
        e.op_own = OpOwn::new().with_opcode(opcode.raw());
        let cqe: Cqe64 = zerocopy::transmute!(e);
        Completion {
            cqe,
            class: CqeClass::Error,
        }
    }

    /// A requester error CQE, then the QP goes to the error state.
    fn req_error(&mut self, qpn: Qpn, opcode: u8, wqe_index: u16, f: ReqFault) {
        let c = self.err_cqe(CqeOpcode::ReqErr, opcode, qpn, wqe_index, f, 0);
        let cq = self.qps.get(&qpn).and_then(|q| q.send_cq);
        self.push_cqe(cq, c);
        self.enter_error(qpn, None);
    }

    /// A flush CQE for a send WQE, unless its completion mode is "only
    /// first error" (DPDK sets CE = 1 on every WQE to get exactly one error
    /// CQE, PRM-FACTS §3).
    fn flush_send(&mut self, qpn: Qpn, opcode: u8, wqe_index: u16, ce: u8) {
        if ce == 1 {
            return;
        }
        let c = self.err_cqe(
            CqeOpcode::ReqErr,
            opcode,
            qpn,
            wqe_index,
            (Syndrome::WrFlush, VendorSyndrome::None),
            0,
        );
        let cq = self.qps.get(&qpn).and_then(|q| q.send_cq);
        self.push_cqe(cq, c);
    }

    /// Moves a QP to the error state and flushes its own RQ.
    fn enter_error(&mut self, qpn: Qpn, event: Option<EmuEvent>) {
        let Some(qp) = self.qps.get_mut(&qpn) else {
            return;
        };
        if qp.state == QpState::Err {
            return;
        }
        qp.state = QpState::Err;
        if let Some(e) = event {
            self.events.push(e);
        }
        self.flush_rq(qpn);
    }

    /// Flushes every published receive WQE of a QP in error (its own RQ;
    /// SRQs are shared and keep their WQEs).
    fn flush_rq(&mut self, qpn: Qpn) {
        let mut events = Vec::new();
        let mut flushed = Vec::new();
        let Some(qp) = self.qps.get_mut(&qpn) else {
            return;
        };
        if qp.state != QpState::Err {
            return;
        }
        let cq = qp.recv_cq;
        if let RqAttach::Own(rq) = &mut qp.rq {
            let n = rq.available(&qp.dbrec, qpn.0, &mut events);
            for _ in 0..n {
                flushed.push(rq.ci as u16);
                rq.ci = rq.ci.wrapping_add(1);
                if let Some(s) = rq.striding.as_mut() {
                    s.pos = 0;
                }
            }
        }
        self.events.extend(events);
        for counter in flushed {
            let c = self.err_cqe(
                CqeOpcode::RespErr,
                0,
                qpn,
                counter,
                (Syndrome::WrFlush, VendorSyndrome::None),
                0,
            );
            self.push_cqe(cq, c);
        }
    }

    /// Executes one parsed WQE.
    fn execute(&mut self, qpn: Qpn, w: &Wqe) -> Outcome {
        let Some(qp) = self.qps.get(&qpn) else {
            return Outcome::Fail((Syndrome::LocalQpOp, VendorSyndrome::None));
        };
        let (pd, qp_type, attrs) = (qp.pd, qp.qp_type, qp.attrs);
        match &w.op {
            Op::Nop => Outcome::Done(0),
            // A failed bind or invalidate completes with MW_BIND_ERR, as a
            // failed UMR does on mlx5 (PRM-FACTS §9.4).
            Op::LocalInval { key } => match self.mrs.invalidate(pd, qpn, *key) {
                Ok(()) => Outcome::Done(0),
                Err(f) => Outcome::Fail((Syndrome::MwBind, vendor_of(f))),
            },
            Op::BindMw { key, bind } => match self.mrs.umr(pd, qpn, *key, bind) {
                Ok(()) => Outcome::Done(0),
                Err(f) => Outcome::Fail((Syndrome::MwBind, vendor_of(f))),
            },
            Op::Send { imm, inval, sges } => {
                let payload = match self.gather(pd, sges) {
                    Ok(p) => p,
                    Err(f) => return Outcome::Fail(f),
                };
                let opcode = match (imm, inval) {
                    (Some(_), _) => CqeOpcode::RespSendImm,
                    (_, Some(_)) => CqeOpcode::RespSendInv,
                    _ => CqeOpcode::RespSend,
                };
                let imm_inval = imm.or(inval.map(u32::to_be_bytes));
                if qp_type == QpType::Ud {
                    let Some(av) = w.av else {
                        return Outcome::Fail((Syndrome::LocalQpOp, VendorSyndrome::BadSegment));
                    };
                    let msg = IbMsg {
                        src_qpn: qpn,
                        payload: &payload,
                        opcode,
                        imm_inval,
                        se: w.fm_ce_se.se(),
                        sl: av.sl,
                        grh: av.grh,
                        scatter: true,
                        invalidate: None,
                    };
                    return self.send_ud(attrs.qkey, &av, &msg);
                }
                let dest = match self.connected_peer(qpn) {
                    Ok(Some(d)) => d,
                    Ok(None) => return Outcome::Done(0),
                    Err(f) => return Outcome::Fail(f),
                };
                // The responder invalidates the key only once the message
                // has landed (`deliver_ib`): an RNR retry or a dropped UC
                // message leaves it valid.
                let msg = IbMsg {
                    src_qpn: qpn,
                    payload: &payload,
                    opcode,
                    imm_inval,
                    se: w.fm_ce_se.se(),
                    sl: 0,
                    grh: false,
                    scatter: true,
                    invalidate: *inval,
                };
                self.deliver_connected(qpn, dest, w.xrc_srqn, &msg, qp_type, attrs.rnr_retry)
            }
            Op::Write {
                raddr,
                rkey,
                imm,
                sges,
            } => {
                let payload = match self.gather(pd, sges) {
                    Ok(p) => p,
                    Err(f) => return Outcome::Fail(f),
                };
                let dest = match self.connected_peer(qpn) {
                    Ok(Some(d)) => d,
                    Ok(None) => return Outcome::Done(0),
                    Err(f) => return Outcome::Fail(f),
                };
                let reliable = qp_type != QpType::Uc;
                if let Err(f) = self.remote_check(
                    dest,
                    Access::REMOTE_WRITE,
                    *rkey,
                    *raddr,
                    payload.len() as u64,
                    1,
                ) {
                    return self.remote_fail(dest, reliable, f);
                }
                if imm.is_some() && !self.has_receive(dest, w.xrc_srqn) {
                    return self.rnr(qpn, qp_type, attrs.rnr_retry);
                }
                if !payload.is_empty() {
                    let dpd = self.qps.get(&dest).map(|q| q.pd).unwrap_or(pd);
                    let _ = self.mrs.write_remote(
                        dpd,
                        dest,
                        *rkey,
                        *raddr,
                        &payload,
                        Access::REMOTE_WRITE,
                    );
                }
                if let Some(imm) = imm {
                    let msg = IbMsg {
                        src_qpn: qpn,
                        payload: &payload,
                        opcode: CqeOpcode::RespWrImm,
                        imm_inval: Some(*imm),
                        se: w.fm_ce_se.se(),
                        sl: 0,
                        grh: false,
                        scatter: false,
                        invalidate: None,
                    };
                    return self.deliver_connected(
                        qpn,
                        dest,
                        w.xrc_srqn,
                        &msg,
                        qp_type,
                        attrs.rnr_retry,
                    );
                }
                Outcome::Done(0)
            }
            Op::Read { raddr, rkey, sges } => {
                let dest = match self.connected_peer(qpn) {
                    Ok(Some(d)) => d,
                    Ok(None) => return Outcome::Done(0),
                    Err(f) => return Outcome::Fail(f),
                };
                let len: u64 = sges.iter().map(Sge::len).sum();
                if let Err(f) = self.local_check(pd, sges, Access::LOCAL_WRITE) {
                    return Outcome::Fail(f);
                }
                if let Err(f) = self.remote_check(dest, Access::REMOTE_READ, *rkey, *raddr, len, 1)
                {
                    return self.remote_fail(dest, true, f);
                }
                let dpd = self.qps.get(&dest).map(|q| q.pd).unwrap_or(pd);
                let mut data = vec![0u8; len as usize];
                if len > 0
                    && self
                        .mrs
                        .read_remote(dpd, dest, *rkey, *raddr, &mut data, Access::REMOTE_READ)
                        .is_err()
                {
                    return self.remote_fail(
                        dest,
                        true,
                        (Syndrome::RemoteAccess, VendorSyndrome::Bounds),
                    );
                }
                self.local_scatter(pd, sges, &data);
                Outcome::Done(len as u32)
            }
            Op::Atomic {
                raddr,
                rkey,
                op,
                result,
            } => {
                let dest = match self.connected_peer(qpn) {
                    Ok(Some(d)) => d,
                    Ok(None) => return Outcome::Done(0),
                    Err(f) => return Outcome::Fail(f),
                };
                let size = op.size();
                let (rl, rk) = *result;
                if let Err(f) = self
                    .mrs
                    .check(pd, rk, rl, u64::from(size), Access::LOCAL_WRITE)
                {
                    return Outcome::Fail((Syndrome::LocalProt, vendor_of(f)));
                }
                if let Err(f) = self.remote_check(
                    dest,
                    Access::REMOTE_ATOMIC,
                    *rkey,
                    *raddr,
                    u64::from(size),
                    u64::from(size),
                ) {
                    return self.remote_fail(dest, true, f);
                }
                let old = match self.do_atomic(dest, *rkey, *raddr, op) {
                    Ok(o) => o,
                    Err(f) => return self.remote_fail(dest, true, f),
                };
                let _ = self.mrs.write(pd, rk, rl, &old, Access::LOCAL_WRITE);
                Outcome::Done(u32::from(size))
            }
            Op::Eth { kind, eth, sges } => self.send_eth(qpn, pd, *kind, eth, sges),
        }
    }

    /// Gathers a send's payload through the MR table (no right is needed
    /// to read local memory).
    fn gather(&self, pd: Pdn, sges: &[Sge]) -> Result<Vec<u8>, ReqFault> {
        let total: u64 = sges.iter().map(Sge::len).sum();
        if total > 1 << 31 {
            return Err((Syndrome::LocalLength, VendorSyndrome::Length));
        }
        // Every key and range first, in list order (the fault a copy would
        // meet first), so that the buffer below is never larger than what
        // registered memory backs: a garbage byte count under a bad key
        // faults without a gigabyte allocated (found by `emu_send`).
        self.local_check(pd, sges, Access::NONE)?;
        let mut out = Vec::with_capacity(total as usize);
        for s in sges {
            match s {
                Sge::Inline(d) => out.extend_from_slice(d),
                Sge::Ptr { len: 0, .. } => {}
                Sge::Ptr { addr, lkey, len } => {
                    let start = out.len();
                    out.resize(start + *len as usize, 0);
                    self.mrs
                        .read(pd, *lkey, *addr, &mut out[start..], Access::NONE)
                        .map_err(|f| (Syndrome::LocalProt, vendor_of(f)))?;
                }
            }
        }
        Ok(out)
    }

    /// Checks the keys and ranges of a local list for `need` in list order:
    /// a gather (no right needed to read local memory) or a requester-side
    /// scatter (RDMA read results: local write).
    fn local_check(&self, pd: Pdn, sges: &[Sge], need: Access) -> Result<(), ReqFault> {
        for s in sges {
            if let Sge::Ptr { addr, lkey, len } = s {
                if *len > 0 {
                    self.mrs
                        .check(pd, *lkey, *addr, u64::from(*len), need)
                        .map_err(|f| (Syndrome::LocalProt, vendor_of(f)))?;
                }
            }
        }
        Ok(())
    }

    fn local_scatter(&self, pd: Pdn, sges: &[Sge], mut data: &[u8]) {
        for s in sges {
            if let Sge::Ptr { addr, lkey, len } = s {
                let n = (*len as usize).min(data.len());
                if n > 0 {
                    let _ = self
                        .mrs
                        .write(pd, *lkey, *addr, &data[..n], Access::LOCAL_WRITE);
                }
                data = &data[n..];
            }
        }
    }

    /// The connected peer of an RC/UC/XRC QP: `Ok(Some)` to deliver,
    /// `Ok(None)` to drop silently (UC), `Err` for the requester (RC/XRC:
    /// retries exhausted against a missing or unready peer).
    fn connected_peer(&self, qpn: Qpn) -> Result<Option<Qpn>, ReqFault> {
        let Some(qp) = self.qps.get(&qpn) else {
            return Ok(None);
        };
        let reliable = matches!(qp.qp_type, QpType::Rc | QpType::XrcIni);
        let want = match qp.qp_type {
            QpType::XrcIni => QpType::XrcTgt,
            t => t,
        };
        let ok = qp
            .attrs
            .dest_qpn
            .and_then(|d| self.qps.get(&d))
            .is_some_and(|d| {
                d.qp_type == want
                    && matches!(d.state, QpState::Rtr | QpState::Rts)
                    && d.attrs.dest_qpn == Some(qpn)
            });
        match (ok, reliable) {
            (true, _) => Ok(qp.attrs.dest_qpn),
            (false, true) => Err((Syndrome::TransportRetryExc, VendorSyndrome::Transport)),
            (false, false) => Ok(None),
        }
    }

    /// Checks an RDMA access at the responder: the QP's access flag, then
    /// the key, range, right and alignment.
    fn remote_check(
        &self,
        dest: Qpn,
        need: Access,
        rkey: u32,
        raddr: u64,
        len: u64,
        align: u64,
    ) -> Result<(), ReqFault> {
        let Some(d) = self.qps.get(&dest) else {
            return Err((Syndrome::RemoteInvalReq, VendorSyndrome::Transport));
        };
        if !d.attrs.access.contains(need) {
            return Err((Syndrome::RemoteInvalReq, VendorSyndrome::AccessRight));
        }
        if raddr % align != 0 {
            return Err((Syndrome::RemoteInvalReq, VendorSyndrome::Misaligned));
        }
        if len == 0 {
            // IBA: a zero-length RDMA does not validate the R_Key.
            return Ok(());
        }
        self.mrs
            .check_remote(d.pd, dest, rkey, raddr, len, need)
            .map(|_| ())
            .map_err(|f| (Syndrome::RemoteAccess, vendor_of(f)))
    }

    /// A remote fault: RC/XRC NAK → requester error and responder to error
    /// (async event); UC drops.
    fn remote_fail(&mut self, dest: Qpn, reliable: bool, f: ReqFault) -> Outcome {
        if !reliable {
            return Outcome::Done(0);
        }
        self.enter_error(dest, Some(EmuEvent::QpAccessErr { qpn: dest }));
        Outcome::Fail(f)
    }

    fn rnr(&mut self, _qpn: Qpn, qp_type: QpType, rnr_retry: u8) -> Outcome {
        match qp_type {
            QpType::Rc | QpType::XrcIni if rnr_retry == 7 => Outcome::Wait,
            QpType::Rc | QpType::XrcIni => {
                Outcome::Fail((Syndrome::RnrRetryExc, VendorSyndrome::Rnr))
            }
            _ => Outcome::Done(0),
        }
    }

    fn has_receive(&mut self, dest: Qpn, xrc_srqn: Option<u32>) -> bool {
        let mut events = Vec::new();
        let Some(qp) = self.qps.get(&dest) else {
            return false;
        };
        let n = match (xrc_srqn, &qp.rq) {
            (Some(s), _) => self
                .srqs
                .get(&Srqn(s))
                .map_or(0, |s| s.available(&mut events)),
            (None, RqAttach::Own(rq)) => rq.available(&qp.dbrec, dest.0, &mut events),
            (None, RqAttach::Srq(s)) => self.srqs.get(s).map_or(0, |s| s.available(&mut events)),
            (None, RqAttach::None) => 0,
        };
        self.events.extend(events);
        n > 0
    }

    /// Delivers a message over a connection and maps the responder's answer.
    fn deliver_connected(
        &mut self,
        src: Qpn,
        dest: Qpn,
        xrc_srqn: Option<u32>,
        msg: &IbMsg<'_>,
        qp_type: QpType,
        rnr_retry: u8,
    ) -> Outcome {
        let reliable = qp_type != QpType::Uc;
        match self.deliver_ib(dest, xrc_srqn, msg) {
            Ok(()) => Outcome::Done(0),
            Err(RespFault::Rnr) => self.rnr(src, qp_type, rnr_retry),
            Err(RespFault::Completed(s, v)) => {
                if reliable {
                    Outcome::Fail((s, v))
                } else {
                    Outcome::Done(0)
                }
            }
            Err(RespFault::Invalid(v)) => {
                self.remote_fail(dest, reliable, (Syndrome::RemoteInvalReq, v))
            }
        }
    }

    /// Sends a UD datagram: MTU, the address vector's route
    /// ([`ah::check_av`]: the datagram must address this device's port),
    /// Q_Key check (the QP's own Q_Key when the WQE's has bit 31 set, IBA
    /// "controlled Q_Key"), delivery with the 40-byte GRH area first
    /// ([`grh_area`]). Drops are silent for the sender and reported as
    /// [`EmuEvent::DatagramDropped`] with the reason.
    fn send_ud(&mut self, own_qkey: u32, av: &AvInfo, msg: &IbMsg<'_>) -> Outcome {
        let payload = msg.payload;
        if payload.len() > self.cfg.port_mtu as usize {
            return Outcome::Fail((Syndrome::LocalLength, VendorSyndrome::Length));
        }
        let qkey = if av.qkey & 0x8000_0000 != 0 {
            own_qkey
        } else {
            av.qkey
        };
        let dest = Qpn(av.dqpn);
        let port = self.cfg.port;
        let drop = if let Err(m) = ah::check_av(&port, av) {
            Some(DropReason::Address(m))
        } else {
            match self.qps.get(&dest) {
                Some(d)
                    if d.qp_type == QpType::Ud
                        && matches!(d.state, QpState::Rtr | QpState::Rts) =>
                {
                    (d.attrs.qkey != qkey).then_some(DropReason::QKey)
                }
                _ => Some(DropReason::NoQp),
            }
        };
        if let Some(reason) = drop {
            self.events.push(EmuEvent::DatagramDropped {
                dqpn: av.dqpn,
                reason,
            });
            return Outcome::Done(0);
        }
        // RoCE packets always carry a GRH (or an IP header); InfiniBand
        // ones when the address vector asks for it.
        let grh = av.grh || port.ethernet();
        let mut data = if grh {
            grh_area(&port, av, payload.len())
        } else {
            vec![0u8; 40]
        };
        data.extend_from_slice(payload);
        let msg = IbMsg {
            payload: &data,
            grh,
            ..*msg
        };
        let _ = self.deliver_ib(dest, None, &msg);
        Outcome::Done(0)
    }

    /// Delivers a message into a receive WQE of `dest` (or of the XRC SRQ
    /// `xrc_srqn`) and writes the responder CQE.
    fn deliver_ib(
        &mut self,
        dest: Qpn,
        xrc_srqn: Option<u32>,
        msg: &IbMsg<'_>,
    ) -> Result<(), RespFault> {
        if self.rec.is_some() {
            self.rec_rq_dbrec(dest, xrc_srqn);
        }
        if self.take_rnr(dest) {
            return Err(RespFault::Rnr);
        }
        let mut events = Vec::new();
        let Some(qp) = self.qps.get(&dest) else {
            return Err(RespFault::Invalid(VendorSyndrome::Transport));
        };
        let (dest_xrcd, dest_pd) = (qp.xrcd, qp.pd);
        // Where the receive comes from: (wqe, pd, cq, srqn, srq next).
        let (wqe, pd, cq, srqn, next): (RecvWqe, Pdn, Option<Cqn>, u32, Option<u16>) =
            match (xrc_srqn, &qp.rq) {
                (Some(s), _) => {
                    let srq = match self.srqs.get(&Srqn(s)) {
                        Some(srq) if srq.xrcd.is_some() && srq.xrcd == dest_xrcd => srq,
                        _ => return Err(RespFault::Invalid(VendorSyndrome::BadSegment)),
                    };
                    if srq.available(&mut events) == 0 {
                        self.events.extend(events);
                        return Err(RespFault::Rnr);
                    }
                    let (w, n) = srq.peek();
                    (w, srq.pd, srq.cq, s, Some(n))
                }
                (None, RqAttach::Own(rq)) if rq.striding.is_none() => {
                    if rq.available(&qp.dbrec, dest.0, &mut events) == 0 {
                        self.events.extend(events);
                        return Err(RespFault::Rnr);
                    }
                    (rq.peek(), qp.pd, qp.recv_cq, 0, None)
                }
                (None, RqAttach::Srq(s)) => {
                    let Some(srq) = self.srqs.get(s) else {
                        return Err(RespFault::Invalid(VendorSyndrome::BadSegment));
                    };
                    if srq.available(&mut events) == 0 {
                        self.events.extend(events);
                        return Err(RespFault::Rnr);
                    }
                    let (w, n) = srq.peek();
                    (w, srq.pd, qp.recv_cq, s.0, Some(n))
                }
                _ => return Err(RespFault::Invalid(VendorSyndrome::BadSegment)),
            };
        self.events.extend(events);
        // Consume the WQE whatever happens next.
        match (next, xrc_srqn) {
            (Some(n), Some(s)) => {
                if let Some(srq) = self.srqs.get_mut(&Srqn(s)) {
                    srq.consume(n);
                }
            }
            (Some(n), None) => {
                if let Some(srq) = self.srqs.get_mut(&Srqn(srqn)) {
                    srq.consume(n);
                }
            }
            _ => {
                if let Some(RqAttach::Own(rq)) = self.qps.get_mut(&dest).map(|q| &mut q.rq) {
                    rq.ci = rq.ci.wrapping_add(1);
                }
            }
        }
        let fault = if msg.scatter {
            self.scatter(pd, &wqe, msg.payload)
        } else {
            Ok(())
        };
        if let Err((s, v)) = fault {
            let c = self.err_cqe(CqeOpcode::RespErr, 0, dest, wqe.counter, (s, v), srqn);
            self.push_cqe(cq, c);
            self.enter_error(dest, None);
            let req = if s == Syndrome::LocalLength {
                Syndrome::RemoteInvalReq
            } else {
                Syndrome::RemoteOp
            };
            return Err(RespFault::Completed(req, v));
        }
        // Send with invalidate: the key goes invalid once the data has
        // landed (rxe `execute`: the invalidation follows `send_data_in`).
        // A key the responder may not invalidate completes the receive in
        // error and moves the responder to the error state (rxe
        // `RESPST_ERR_INVALIDATE_RKEY`, IBA class J), on UC as on RC; the
        // requester sees REMOTE_OP on RC and nothing on UC (emulator).
        // A window key frees a type-2 window bound to this responder QP
        // (IBA: type-2 windows are invalidated that way; a type-1 window
        // cannot be, o10-37.2.26).
        if let Some(key) = msg.invalidate {
            if let Err(kf) = self.mrs.invalidate(dest_pd, dest, key) {
                let v = vendor_of(kf);
                let f = (Syndrome::RemoteInvalReq, v);
                let c = self.err_cqe(CqeOpcode::RespErr, 0, dest, wqe.counter, f, srqn);
                self.push_cqe(cq, c);
                self.enter_error(dest, Some(EmuEvent::QpAccessErr { qpn: dest }));
                return Err(RespFault::Completed(Syndrome::RemoteOp, v));
            }
        }
        let mut cqe = Cqe64::default();
        cqe.op_own.set_opcode(msg.opcode.raw());
        cqe.op_own.set_se(msg.se);
        cqe.byte_cnt.set(msg.payload.len() as u32);
        if let Some(b) = msg.imm_inval {
            cqe.imm_inval_pkey = Be32::from_bytes(b);
        }
        cqe.flags_rqpn.set_rqpn(msg.src_qpn.0);
        cqe.flags_rqpn.set_sl(msg.sl);
        cqe.flags_rqpn.set_grh(u8::from(msg.grh));
        cqe.srqn_uidx.set_srqn_uidx(srqn);
        cqe.sop_drop_qpn.set_qpn(dest.0);
        cqe.wqe_counter.set(wqe.counter);
        cqe.timestamp.set(self.timestamp());
        let class = CqeClass::Resp(if next.is_some() {
            RqClass::Srq
        } else {
            RqClass::Cyclic
        });
        self.push_cqe(cq, Completion { cqe, class });
        Ok(())
    }

    /// Scatters `data` into a receive WQE: too small → local length, a bad
    /// key or no local write → local protection (checked before writing).
    fn scatter(&self, pd: Pdn, wqe: &RecvWqe, data: &[u8]) -> Result<(), ReqFault> {
        let cap: u64 = wqe.sges.iter().map(|s| u64::from(s.2)).sum();
        if (data.len() as u64) > cap {
            return Err((Syndrome::LocalLength, VendorSyndrome::Length));
        }
        let mut rest = data.len();
        for &(addr, lkey, len) in &wqe.sges {
            if rest == 0 {
                break;
            }
            let n = (len as usize).min(rest);
            self.mrs
                .check(pd, lkey, addr, n as u64, Access::LOCAL_WRITE)
                .map_err(|f| (Syndrome::LocalProt, vendor_of(f)))?;
            rest -= n;
        }
        let mut off = 0;
        for &(addr, lkey, len) in &wqe.sges {
            let n = (len as usize).min(data.len() - off);
            if n == 0 {
                break;
            }
            let _ = self
                .mrs
                .write(pd, lkey, addr, &data[off..off + n], Access::LOCAL_WRITE);
            off += n;
        }
        Ok(())
    }

    /// Executes an atomic on the responder's memory; returns the original
    /// bytes as memory held them.
    fn do_atomic(
        &self,
        dest: Qpn,
        rkey: u32,
        raddr: u64,
        op: &AtomicOp,
    ) -> Result<Vec<u8>, ReqFault> {
        let Some(d) = self.qps.get(&dest) else {
            return Err((Syndrome::RemoteInvalReq, VendorSyndrome::Transport));
        };
        let size = op.size();
        let (region, off): (&Region, usize) = self
            .mrs
            .check_remote(
                d.pd,
                dest,
                rkey,
                raddr,
                u64::from(size),
                Access::REMOTE_ATOMIC,
            )
            .map_err(|f| (Syndrome::RemoteAccess, vendor_of(f)))?;
        let big = matches!(op, AtomicOp::MaskedCs { .. } | AtomicOp::MaskedFa { .. })
            || self.cfg.atomic_endianness == AtomicEndianness::Big;
        let misaligned = (Syndrome::RemoteInvalReq, VendorSyndrome::Misaligned);
        if size == 8 {
            let old = region
                .update_u64(off, |raw| {
                    let v = if big {
                        u64::from_be_bytes(raw.to_ne_bytes())
                    } else {
                        raw
                    };
                    let n = apply_atomic(op, v);
                    if big {
                        u64::from_ne_bytes(n.to_be_bytes())
                    } else {
                        n
                    }
                })
                .map_err(|_| misaligned)?;
            Ok(old.to_ne_bytes().to_vec())
        } else {
            let old = region
                .update_u32(off, |raw| {
                    let v = u64::from(u32::from_be_bytes(raw.to_ne_bytes()));
                    let n = apply_atomic(op, v) as u32;
                    u32::from_ne_bytes(n.to_be_bytes())
                })
                .map_err(|_| misaligned)?;
            Ok(old.to_ne_bytes().to_vec())
        }
    }

    // ----------------------------------------------------------------------
    // Raw Ethernet
    // ----------------------------------------------------------------------

    fn send_eth(
        &mut self,
        qpn: Qpn,
        pd: Pdn,
        kind: EthKind,
        eth: &wqe::EthInfo,
        sges: &[Sge],
    ) -> Outcome {
        let l3 = eth.cs_flags & mlx5dp::prm::ETH_WQE_L3_CSUM != 0;
        let l4 = eth.cs_flags & mlx5dp::prm::ETH_WQE_L4_CSUM != 0;
        let bad = Outcome::Fail((Syndrome::LocalQpOp, VendorSyndrome::BadSegment));
        let mut frames = Vec::new();
        match kind {
            EthKind::Send | EthKind::Tso => {
                let mut f = eth.inline_hdr.clone();
                match self.gather(pd, sges) {
                    Ok(p) => f.extend_from_slice(&p),
                    Err(e) => return Outcome::Fail(e),
                }
                if kind == EthKind::Tso {
                    match eth::tso(&f, eth.inline_hdr.len(), eth.mss) {
                        Some(segs) => frames = segs,
                        None => return bad,
                    }
                } else {
                    frames.push(f);
                }
            }
            EthKind::Mpw => {
                let mss = usize::from(eth.mss);
                match sges {
                    [Sge::Inline(d)] if mss > 0 && d.len() % mss == 0 => {
                        frames.extend(d.chunks(mss).map(<[u8]>::to_vec));
                    }
                    _ => {
                        for s in sges {
                            if s.len() != mss as u64 || matches!(s, Sge::Inline(_)) {
                                return bad;
                            }
                            match self.gather(pd, std::slice::from_ref(s)) {
                                Ok(p) => frames.push(p),
                                Err(e) => return Outcome::Fail(e),
                            }
                        }
                    }
                }
            }
            EthKind::Empw => {
                for s in sges {
                    match self.gather(pd, std::slice::from_ref(s)) {
                        Ok(p) => frames.push(p),
                        Err(e) => return Outcome::Fail(e),
                    }
                }
            }
        }
        for mut f in frames {
            if kind != EthKind::Tso {
                eth::offload_checksums(&mut f, l3, l4);
            }
            if let Some((tci, svlan)) = eth.vlan {
                f = eth::insert_vlan(&f, tci, svlan);
            }
            self.deliver_frame(qpn, &f);
        }
        Outcome::Done(0)
    }

    /// Steers a frame on the loopback port to the first matching raw QP
    /// (never back to the sender), or drops it.
    fn deliver_frame(&mut self, src: Qpn, frame: &[u8]) {
        let dmac: Option<[u8; 6]> = frame.get(..6).and_then(|m| m.try_into().ok());
        let h = eth::parse(frame);
        let ethertype = if h.l2_len == 18 {
            frame.get(16..18).map(|b| u16::from_be_bytes([b[0], b[1]]))
        } else {
            frame.get(12..14).map(|b| u16::from_be_bytes([b[0], b[1]]))
        };
        let rule = self.flows.iter().find(|r| {
            r.qpn != src
                && r.dmac.is_none_or(|m| Some(m) == dmac)
                && r.ethertype.is_none_or(|t| Some(t) == ethertype)
                && self
                    .qps
                    .get(&r.qpn)
                    .is_some_and(|q| matches!(q.state, QpState::Rtr | QpState::Rts))
        });
        let Some(rule) = rule.copied() else {
            self.events.push(EmuEvent::FrameDropped { qpn: src });
            return;
        };
        self.receive_frame(rule.qpn, rule.flow_tag, frame, src);
    }

    /// Receives a frame on a raw QP's cyclic or striding RQ.
    fn receive_frame(&mut self, qpn: Qpn, flow_tag: u32, frame: &[u8], src: Qpn) {
        if self.rec.is_some() {
            self.rec_rq_dbrec(qpn, None);
        }
        let Some(qp) = self.qps.get(&qpn) else { return };
        let (stripped, tci) = if qp.vlan_strip {
            eth::strip_cvlan(frame)
        } else {
            (frame.to_vec(), None)
        };
        let info = eth::rx_info(&stripped);
        let mut cqe = Cqe64::default();
        cqe.op_own.set_opcode(CqeOpcode::RespSend.raw());
        cqe.byte_cnt.set(stripped.len() as u32);
        cqe.check_sum.set(info.check_sum);
        cqe.rss_hash_result.set(info.hash);
        cqe.hds_ip_ext.set_l2_ok(info.l2_ok);
        cqe.hds_ip_ext.set_l3_ok(info.l3_ok);
        cqe.hds_ip_ext.set_l4_ok(info.l4_ok);
        cqe.l4_l3_hdr_type.set_l3_hdr_type(info.l3_type);
        cqe.l4_l3_hdr_type.set_l4_hdr_type(info.l4_type);
        cqe.l4_l3_hdr_type.set_ip_frag(info.ip_frag);
        if let Some(t) = tci {
            cqe.l4_l3_hdr_type.set_cvlan_stripped(true);
            cqe.vlan_info.set(t);
        }
        cqe.sop_drop_qpn
            .set_qpn(flow_tag & mlx5dp::prm::FLOW_TAG_MASK);
        let (pd, cq) = (qp.pd, qp.recv_cq);
        let mut events = Vec::new();
        let RqAttach::Own(rq) = &qp.rq else { return };
        if rq.available(&qp.dbrec, qpn.0, &mut events) == 0 {
            self.events.extend(events);
            self.events.push(EmuEvent::FrameDropped { qpn: src });
            return;
        }
        self.events.extend(events);
        if let Some(st) = rq.striding {
            self.receive_striding(qpn, pd, cq, st, cqe, &stripped);
            return;
        }
        let wqe = rq.peek();
        if let Some(RqAttach::Own(rq)) = self.qps.get_mut(&qpn).map(|q| &mut q.rq) {
            rq.ci = rq.ci.wrapping_add(1);
        }
        if let Err(f) = self.scatter(pd, &wqe, &stripped) {
            let c = self.err_cqe(CqeOpcode::RespErr, 0, qpn, wqe.counter, f, 0);
            self.push_cqe(cq, c);
            self.enter_error(qpn, None);
            return;
        }
        cqe.wqe_counter.set(wqe.counter);
        cqe.timestamp.set(self.timestamp());
        self.push_cqe(
            cq,
            Completion {
                cqe,
                class: CqeClass::Resp(RqClass::Cyclic),
            },
        );
    }

    /// Places a frame in the strides of a striding RQ; when it does not fit
    /// in the WQE's remaining strides, a filler CQE consumes them first
    /// (DPDK `MLX5_MPRQ_FILLER_MASK`, PRM-FACTS §8). The CQE's
    /// `wqe_counter` is the stride index and `wqe_id` the WQE counter.
    fn receive_striding(
        &mut self,
        qpn: Qpn,
        pd: Pdn,
        cq: Option<Cqn>,
        st: Striding,
        mut cqe: Cqe64,
        frame: &[u8],
    ) {
        let stride = 1usize << st.log_stride_bytes;
        let num = 1u32 << st.log_num_strides;
        let needed = frame.len().div_ceil(stride).max(1) as u32;
        if needed > num {
            let counter = self.rq_ci(qpn);
            self.bump_rq(qpn, 1, true);
            let c = self.err_cqe(
                CqeOpcode::RespErr,
                0,
                qpn,
                counter,
                (Syndrome::LocalLength, VendorSyndrome::Length),
                0,
            );
            self.push_cqe(cq, c);
            self.enter_error(qpn, None);
            return;
        }
        let mut pos = st.pos;
        if pos + needed > num {
            let mut filler = Cqe64::default();
            filler.op_own.set_opcode(CqeOpcode::RespSend.raw());
            let bc = MprqByteCnt::new()
                .with_filler(true)
                .with_strides((num - pos) as u16);
            filler.byte_cnt.set(bc.into_bits());
            filler.wqe_counter.set(pos as u16);
            filler.wqe_id = Be16::new(self.rq_ci(qpn));
            filler.sop_drop_qpn = cqe.sop_drop_qpn;
            filler.timestamp.set(self.timestamp());
            self.push_cqe(
                cq,
                Completion {
                    cqe: filler,
                    class: CqeClass::Resp(RqClass::Striding {
                        strides: (num - pos) as u16,
                    }),
                },
            );
            self.bump_rq(qpn, 1, true);
            pos = 0;
            let mut events = Vec::new();
            let more = match self.qps.get(&qpn) {
                Some(Qp {
                    rq: RqAttach::Own(rq),
                    dbrec,
                    ..
                }) => rq.available(dbrec, qpn.0, &mut events),
                _ => 0,
            };
            self.events.extend(events);
            if more == 0 {
                self.events.push(EmuEvent::FrameDropped { qpn });
                return;
            }
        }
        let Some(Qp {
            rq: RqAttach::Own(rq),
            ..
        }) = self.qps.get(&qpn)
        else {
            return;
        };
        let (addr, lkey, _) = rq.peek_striding();
        let counter = rq.ci as u16;
        let at = addr.wrapping_add(u64::from(pos) * stride as u64);
        if let Err(f) = self.mrs.write(pd, lkey, at, frame, Access::LOCAL_WRITE) {
            self.bump_rq(qpn, 1, true);
            let c = self.err_cqe(
                CqeOpcode::RespErr,
                0,
                qpn,
                counter,
                (Syndrome::LocalProt, vendor_of(f)),
                0,
            );
            self.push_cqe(cq, c);
            self.enter_error(qpn, None);
            return;
        }
        let bc = MprqByteCnt::new()
            .with_strides(needed as u16)
            .with_byte_cnt(frame.len() as u16);
        cqe.byte_cnt.set(bc.into_bits());
        cqe.wqe_counter.set(pos as u16);
        cqe.wqe_id = Be16::new(counter);
        cqe.timestamp.set(self.timestamp());
        self.push_cqe(
            cq,
            Completion {
                cqe,
                class: CqeClass::Resp(RqClass::Striding {
                    strides: needed as u16,
                }),
            },
        );
        pos += needed;
        if pos == num {
            self.bump_rq(qpn, 1, true);
        } else if let Some(RqAttach::Own(rq)) = self.qps.get_mut(&qpn).map(|q| &mut q.rq) {
            if let Some(s) = rq.striding.as_mut() {
                s.pos = pos;
            }
        }
    }

    fn rq_ci(&self, qpn: Qpn) -> u16 {
        match self.qps.get(&qpn).map(|q| &q.rq) {
            Some(RqAttach::Own(rq)) => rq.ci as u16,
            _ => 0,
        }
    }

    fn bump_rq(&mut self, qpn: Qpn, n: u32, reset_pos: bool) {
        if let Some(RqAttach::Own(rq)) = self.qps.get_mut(&qpn).map(|q| &mut q.rq) {
            rq.ci = rq.ci.wrapping_add(n);
            if reset_pos {
                if let Some(s) = rq.striding.as_mut() {
                    s.pos = 0;
                }
            }
        }
    }
}

/// Whether a BlueFlame half that disagrees with the ring is an 8-byte
/// doorbell written over an earlier, not yet observed BlueFlame copy of
/// another published WQE, rather than a bad copy.
///
/// The hardware sees every register write as it happens; this device
/// polls the UAR page as memory, so when the core rings the same half
/// twice between two polls (a BlueFlame copy, then a plain doorbell) the
/// half holds the new doorbell word over the old copy's bytes. That is
/// the case when the doorbell word matches the ring and the rest matches
/// some other WQE published since the device's consumer position `ci`.
fn stale_blueflame(
    ring: &DmaBlock,
    size: RingSize,
    ci: u32,
    db: u16,
    ring_bytes: &[u8],
    bf: &[u8],
) -> bool {
    if ring_bytes.get(..8) != bf.get(..8) {
        return false;
    }
    let mut at = ci;
    while (at as u16) != db {
        let first = read_ring(ring, size, at, 1);
        let ds = wqe::peek_ctrl(&first).map_or(0, |c| c.4);
        let bbs = (usize::from(ds.max(1)) * 16).div_ceil(64) as u32;
        let n = bf.len().min(64 * bbs as usize);
        let other = read_ring(ring, size, at, bbs);
        if n > 8 && other[8..n] == bf[8..n] {
            return true;
        }
        at = at.wrapping_add(bbs);
        if at.wrapping_sub(ci) > size.entries() {
            break;
        }
    }
    false
}

/// Times [`blueflame_settles`] reads a BlueFlame copy again before it
/// calls it a mismatch.
const BF_SETTLE_READS: u32 = 20_000;

/// Whether the BlueFlame copy in the register half at `off` (first word
/// `word`, the rest read into `bf`) is the ring's WQE `want`, once the
/// core's stores have landed. The device reads the register as memory,
/// while the core may still be writing the copy (eight ascending 8-byte
/// stores per 64 bytes: a core thread preempted between two of them
/// leaves a half-written copy, which a ConnectX never sees: its
/// write-combining buffer arrives whole). So a copy that differs is read
/// again, yielding in between, until it matches, or a newer doorbell
/// replaces it in the half (nothing left to compare), or
/// [`BF_SETTLE_READS`] reads: a copy that still differs then is a real
/// mismatch.
fn blueflame_settles(
    uar: &DmaBlock,
    off: usize,
    word: [u8; 8],
    want: &[u8],
    bf: &mut [u8],
) -> bool {
    for _ in 0..BF_SETTLE_READS {
        if bf == want {
            return true;
        }
        if uar.load_u64_acquire(off) != Ok(word) {
            return true;
        }
        std::thread::yield_now();
        let _ = uar.read(off, bf);
    }
    bf == want
}

/// Reads `bbs` WQEBBs from the SQ ring starting at `counter`, wrapping at
/// the ring end (WQEs and their inline data may wrap, PRM-FACTS §5.2).
fn read_ring(ring: &DmaBlock, size: RingSize, counter: u32, bbs: u32) -> Vec<u8> {
    let mut out = vec![0u8; 64 * bbs as usize];
    for k in 0..bbs {
        let slot = size.slot(counter.wrapping_add(k));
        let dst = &mut out[64 * k as usize..64 * (k as usize + 1)];
        let _ = ring.read(slot * 64, dst);
    }
    out
}

impl Device {
    /// The SQ ring, the QP doorbell record and the UAR page of `qpn`, for
    /// tools that play the core with bytes no core would write (the
    /// `emu_send` fuzz target) without raw pointers; `None` if there is no
    /// such QP or it has no send queue.
    pub fn sq_blocks(&self, qpn: Qpn) -> Option<(Arc<DmaBlock>, Arc<DmaBlock>, Arc<DmaBlock>)> {
        let qp = self.qps.get(&qpn)?;
        let sq = qp.sq.as_ref()?;
        Some((
            Arc::clone(&sq.ring),
            Arc::clone(&qp.dbrec),
            Arc::clone(&sq.uar),
        ))
    }

    /// The ring and doorbell record of SRQ `srqn` (see
    /// [`Device::sq_blocks`]); `None` if there is no such SRQ.
    pub fn srq_ring_blocks(&self, srqn: Srqn) -> Option<(Arc<DmaBlock>, Arc<DmaBlock>)> {
        let s = self.srqs.get(&srqn)?;
        Some((Arc::clone(&s.ring), Arc::clone(&s.dbrec)))
    }

    /// The RQ ring and the QP doorbell record of `qpn` (see
    /// [`Device::sq_blocks`]); `None` if there is no such QP or it has no
    /// receive queue of its own.
    pub fn rq_blocks(&self, qpn: Qpn) -> Option<(Arc<DmaBlock>, Arc<DmaBlock>)> {
        let qp = self.qps.get(&qpn)?;
        match &qp.rq {
            RqAttach::Own(rq) => Some((Arc::clone(&rq.ring), Arc::clone(&qp.dbrec))),
            _ => None,
        }
    }
}

/// The device's blocks, for tests that play the core without raw pointers.
#[cfg(test)]
impl Device {
    /// SQ ring, QP doorbell record, UAR page.
    pub(crate) fn test_sq(&self, qpn: Qpn) -> (Arc<DmaBlock>, Arc<DmaBlock>, Arc<DmaBlock>) {
        self.sq_blocks(qpn).expect("QP has an SQ")
    }

    /// RQ ring and QP doorbell record.
    pub(crate) fn test_rq(&self, qpn: Qpn) -> (Arc<DmaBlock>, Arc<DmaBlock>) {
        self.rq_blocks(qpn).expect("QP has no RQ of its own")
    }

    /// SRQ ring and doorbell record.
    pub(crate) fn test_srq(&self, srqn: Srqn) -> (Arc<DmaBlock>, Arc<DmaBlock>) {
        self.srq_ring_blocks(srqn).expect("no such SRQ")
    }

    /// CQ ring, doorbell record, UAR page.
    pub(crate) fn test_cq(&self, cqn: Cqn) -> (Arc<DmaBlock>, Arc<DmaBlock>, Arc<DmaBlock>) {
        let cq = &self.cqs[&cqn];
        (
            Arc::clone(&cq.ring),
            Arc::clone(&cq.dbrec),
            Arc::clone(&self.cq_uars[&cqn]),
        )
    }
}

/// The shared blocks behind a queue's raw parts, so that whoever holds the
/// parts can keep the memory alive after the object is destroyed
/// ([`crate::emu::core_parts`]).
impl Device {
    /// SQ ring, QP doorbell record and UAR page of `qpn` (the SQ blocks
    /// are absent for a QP without an SQ), and the RQ ring if it has one.
    pub(crate) fn qp_blocks(&self, qpn: Qpn) -> Option<Vec<Arc<DmaBlock>>> {
        let qp = self.qps.get(&qpn)?;
        let mut v = vec![Arc::clone(&qp.dbrec)];
        if let Some(sq) = &qp.sq {
            v.push(Arc::clone(&sq.ring));
            v.push(Arc::clone(&sq.uar));
        }
        if let RqAttach::Own(rq) = &qp.rq {
            v.push(Arc::clone(&rq.ring));
        }
        Some(v)
    }

    /// Ring and doorbell record of an SRQ.
    pub(crate) fn srq_blocks(&self, srqn: Srqn) -> Option<Vec<Arc<DmaBlock>>> {
        let s = self.srqs.get(&srqn)?;
        Some(vec![Arc::clone(&s.ring), Arc::clone(&s.dbrec)])
    }

    /// Ring, doorbell record and UAR page of a CQ.
    pub(crate) fn cq_blocks(&self, cqn: Cqn) -> Option<Vec<Arc<DmaBlock>>> {
        let cq = self.cqs.get(&cqn)?;
        let uar = self.cq_uars.get(&cqn)?;
        Some(vec![
            Arc::clone(&cq.ring),
            Arc::clone(&cq.dbrec),
            Arc::clone(uar),
        ])
    }
}
