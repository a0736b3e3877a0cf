//! [`VerbsBackend`]: a ConnectX as a [`Backend`], so that the end-to-end
//! scenarios, `mlx5dp perf` and `mlx5dp trace record` run on hardware
//! unchanged.
//!
//! Every object is created through [`super::resources`] (PD, MR, memory
//! window, CQ through `mlx5dv_create_cq`, QP through `mlx5dv_create_qp`,
//! SRQ, XRC domain, flow rule) and handed to the core as the same
//! backend-neutral owners the emulator hands out ([`crate::emu::CoreSq`], [`CoreCq`],
//! [`crate::emu::CoreRq`], [`Buffer`]), filled from the checked
//! `mlx5dv_init_obj` parts. The numbers are the
//! hardware's (QPN, CQN, SRQ number); a PD or XRC domain number is this
//! backend's index. All QPs live on one port (`MLX5DP_PORT`, default 1) and
//! connect to each other through it (loopback), as perftest's loopback
//! runs do.
//!
//! What the emulator alone can do is refused with
//! [`BackendError::Unsupported`]: fault injection, forced CQE compression,
//! the enhanced compression layout (needs DevX), region keys that may be
//! invalidated. [`Backend::progress`] does nothing: the device runs by
//! itself.
//!
//! A striding RQ (`RqInit::Striding`) is a receive-only RAW_PACKET "QP"
//! built as DPDK's verbs Rx queues are: a striding WQ on the receive CQ,
//! a one-entry indirection table and an RSS QP over it
//! ([`super::resources::RssRq`]). Its handle's number is the WQ's (an RSS
//! QP's own number is 0), it has no send queue, it is ready once created,
//! `to_error` moves the WQ to error and flow rules attach to the RSS QP.
//! Never run: compiled only, no ConnectX here.
//!
//! Memory windows ([`Backend::alloc_mw`]) are real `ibv_alloc_mw` windows
//! the core binds with its own UMR work requests; like everything here,
//! that path has been compiled, never run on a ConnectX.
//!
//! Sizes: the provider rounds every queue up (a CQ of `cqe + 1` rounded to a
//! power of two, an SRQ likewise, an SQ of `max_send_wr` WQEs of the
//! largest size the creation limits allow). The requests below are chosen
//! so that the rounded sizes are what the scenario asked for, or larger for
//! SQs; the core always reads the real sizes from the parts.
#![forbid(unsafe_code)]

use super::device::{Context, DeviceCaps, PortInfo};
use super::resources::{
    ConnectOptions, Cq, CqOptions, Flow, Mr, Mw, Pd, Peer, Qp, QpKind, QpOn, QpOptions, RssRq, Srq,
    StridingWqAttr, Xrcd,
};
use super::VerbsError;
use crate::backend::{
    Access, Backend, BackendError, Buffer, BufferMem, Caps, ConnectAttr, CoreCq, CqInit,
    DeviceInfo, FlowRule, MwType, Pdn, QpHandle, QpInit, QpState, QpType, Qpn, RqInit, SrqHandle,
    SrqInit, Srqn, Xrcdn,
};
use crate::emu::config::{ContextFlags, CqeCompCaps, StridingRqCaps};
use crate::emu::{CompressionLayout, CqeSize, MemError};
use std::collections::BTreeMap;
use std::sync::Arc;

/// A registered verbs buffer as [`BufferMem`].
#[derive(Debug)]
struct MrMem(Mr);

impl MrMem {
    fn check(&self, off: usize, n: usize) -> Result<(), MemError> {
        match off.checked_add(n) {
            Some(end) if end <= self.0.len() => Ok(()),
            _ => Err(MemError::OutOfBounds),
        }
    }
}

impl BufferMem for MrMem {
    fn base(&self) -> u64 {
        self.0.addr(0)
    }
    fn len(&self) -> usize {
        self.0.len()
    }
    fn read(&self, off: usize, out: &mut [u8]) -> Result<(), MemError> {
        self.check(off, out.len())?;
        out.copy_from_slice(&self.0.read(off, out.len()));
        Ok(())
    }
    fn write(&self, off: usize, data: &[u8]) -> Result<(), MemError> {
        self.check(off, data.len())?;
        self.0.write(off, data);
        Ok(())
    }
    fn fill(&self, off: usize, len: usize, byte: u8) -> Result<(), MemError> {
        self.check(off, len)?;
        self.0.write(off, &vec![byte; len]);
        Ok(())
    }
}

/// A ConnectX opened through libibverbs and mlx5dv, as a [`Backend`].
#[derive(Debug)]
pub struct VerbsBackend {
    ctx: Context,
    dev_caps: DeviceCaps,
    caps: Caps,
    port: PortInfo,
    pds: Vec<Pd>,
    xrcds: Vec<Xrcd>,
    /// Memory windows by mkey index ([`mkey_index`]): a bind changes an
    /// rkey's low byte, so any rkey the window has had finds it. Declared
    /// before the QPs so that dropping the backend deallocates the
    /// windows before it destroys the QPs type-2 windows are bound to.
    mws: BTreeMap<u32, Mw>,
    cqs: BTreeMap<u32, Cq>,
    srqs: BTreeMap<u32, Srq>,
    qps: BTreeMap<u32, Qp>,
    /// Striding RQs behind RSS QPs, by WQ number (the number their
    /// handles carry). Flow rules hold their RSS QP, so the rules go
    /// first whatever the field order.
    rss_rqs: BTreeMap<u32, RssRq>,
    flows: Vec<Flow>,
}

/// An index of this backend's (PD, XRC domain) that names nothing.
fn no_such(what: &'static str) -> BackendError {
    BackendError::Verbs(VerbsError::Invalid(what))
}

/// The mkey index of a key: an mlx5 mkey is `index << 8 | variant`
/// (Linux `mlx5_mkey_to_idx`, `mlx5_mkey_variant`), and a bind changes
/// only the variant (libmlx5 `set_umr_mkey_seg` writes the new rkey's low
/// byte into `qpn_mkey`).
fn mkey_index(key: u32) -> u32 {
    key >> 8
}

/// [`Backend::bring_up`] of a striding RQ behind an RSS QP: there is
/// nothing to move (libmlx5 `mlx5_modify_qp` refuses an RSS QP with
/// EOPNOTSUPP; it receives once created while its WQ is ready, and the WQ
/// was moved to ready at creation). A peer makes no sense; a WQ no longer
/// ready (after `to_error`) cannot come back (a WQ goes ERR → RESET → RDY,
/// and RESET zeroes the ring indices under the core's queue): make a new
/// one.
fn rss_ready(rss: &RssRq, dest: Option<Qpn>) -> Result<(), BackendError> {
    if dest.is_some() {
        return Err(VerbsError::Invalid("a striding RQ behind an RSS QP has no peer").into());
    }
    match rss.wq().state() {
        rdma_sys::ibv_wq_state::IBV_WQS_RDY => Ok(()),
        _ => Err(VerbsError::Invalid(
            "the striding RQ's WQ is not ready (it is not brought back: create a new one)",
        )
        .into()),
    }
}

/// [`Backend::qp_state`] of a striding RQ behind an RSS QP: its WQ's state
/// as libibverbs last set it ([`super::resources::Wq::state`]); ready reads
/// as RTS, the state a RAW_PACKET QP receives in.
fn rss_state(rss: &RssRq) -> QpState {
    use rdma_sys::ibv_wq_state as W;
    match rss.wq().state() {
        W::IBV_WQS_RESET => QpState::Reset,
        W::IBV_WQS_RDY => QpState::Rts,
        _ => QpState::Err,
    }
}

/// The first PSN of a QP: its number (any 24-bit value works; both ends
/// must agree, and here both ends are this backend).
fn psn(qpn: u32) -> u32 {
    qpn & 0x00ff_ffff
}

/// The verbs QP kind of a backend-neutral QP type.
pub fn kind_of(t: QpType) -> QpKind {
    match t {
        QpType::Rc => QpKind::Rc,
        QpType::Uc => QpKind::Uc,
        QpType::Ud => QpKind::Ud,
        QpType::XrcIni => QpKind::XrcIni,
        QpType::XrcTgt => QpKind::XrcTgt,
        QpType::RawPacket => QpKind::RawPacket,
    }
}

/// A lower bound of the bytes libmlx5 gives one send WQE of a QP created
/// with these limits (`mlx5_calc_send_wqe`: the segments before the data,
/// then the larger of the inline area and the gather list, in WQEBBs).
/// Underestimating makes the SQ larger than asked, never smaller.
pub fn send_wqe_bytes(kind: QpKind, max_inline: u32, max_sge: u32) -> u32 {
    let before_data = 16
        + match kind {
            // Datagram segment (address vector).
            QpKind::Ud => 48,
            // Ethernet segment.
            QpKind::RawPacket => 16,
            // XRC segment and remote-address segment.
            QpKind::XrcIni => 32,
            // Remote-address segment.
            _ => 16,
        };
    let inline = if max_inline > 0 {
        (max_inline + 4).next_multiple_of(16)
    } else {
        0
    };
    (before_data + inline.max(16 * max_sge)).next_multiple_of(64)
}

/// `max_send_wr` for an SQ of at least `wqebbs` WQEBBs.
pub fn max_send_wr(kind: QpKind, wqebbs: u32, max_inline: u32, max_sge: u32) -> u32 {
    let per = send_wqe_bytes(kind, max_inline, max_sge) / 64;
    (wqebbs / per.max(1)).max(1)
}

/// The backend-neutral capabilities of a verbs device.
pub fn neutral_caps(c: &DeviceCaps) -> Caps {
    let d = Caps::default();
    let z = c.cqe_compression.as_ref();
    let s = c.striding_rq.as_ref();
    let log = |v: u32| u8::try_from(v).unwrap_or(u8::MAX);
    Caps {
        // Known per QP only (what the provider grants at creation).
        max_inline: 0,
        max_sge: c.max_sge,
        max_qp_wr: c.max_qp_wr,
        max_cqe: c.max_cqe,
        max_send_wqe_bytes: d.max_send_wqe_bytes,
        flags: ContextFlags {
            cqe_v1: c.cqe_v1,
            mpw_allowed: c.mpw_allowed,
            enhanced_mpw: c.enhanced_mpw,
            cqe_128b_comp: z.is_some_and(|z| z.cqe_128),
            cqe_128b_pad: c.cqe_128b_pad,
            real_time_ts: c.real_time_ts,
            blueflame: true,
        },
        cqe_comp: CqeCompCaps {
            max_num: z.map_or(0, |z| u16::try_from(z.max_num).unwrap_or(u16::MAX)),
            formats: z.map_or_else(Vec::new, |z| z.formats.clone()),
            basic_layout: z.is_some(),
            // mlx5dv_create_cq cannot ask for it (DevX can).
            enhanced_layout: false,
        },
        striding_rq: StridingRqCaps {
            min_log_stride_bytes: s.map_or(0, |s| log(s.min_log_stride_bytes)),
            max_log_stride_bytes: s.map_or(0, |s| log(s.max_log_stride_bytes)),
            min_log_num_strides: s.map_or(0, |s| log(s.min_log_num_strides)),
            max_log_num_strides: s.map_or(0, |s| log(s.max_log_num_strides)),
        },
        hca_core_clock_khz: c.hca_core_clock_khz,
        // The core always inlines 18 bytes of L2 header on RAW_PACKET
        // (accepted by every ConnectX; the real minimum needs DevX).
        eth_min_inline: 18,
        max_tso_header: 0,
        bf_reg_size: d.bf_reg_size,
    }
}

/// The product name of a PCI part id, as far as known.
pub fn model_name(part: u32) -> &'static str {
    match part {
        0x1013 => "ConnectX-4",
        0x1015 => "ConnectX-4 Lx",
        0x1017 => "ConnectX-5",
        0x1019 => "ConnectX-5 Ex",
        0x101b => "ConnectX-6",
        0x101d => "ConnectX-6 Dx",
        0x101f => "ConnectX-6 Lx",
        0x1021 => "ConnectX-7",
        0x1023 => "ConnectX-8",
        0xa2d2 => "BlueField",
        0xa2d6 => "BlueField-2",
        0xa2dc => "BlueField-3",
        _ => "mlx5 device",
    }
}

impl VerbsBackend {
    /// Opens the device `name` (port `MLX5DP_PORT`, default 1; GID index
    /// `MLX5DP_GID_INDEX`, default 0) and queries its capabilities. Fails
    /// at once with [`VerbsError::NoDevice`] (which names the emulated
    /// device) when there is no RDMA device.
    pub fn open(name: &str) -> Result<Self, VerbsError> {
        Self::with_context(Context::open(name)?)
    }

    /// Opens the device `MLX5DP_DEVICE` names (default: the first one).
    pub fn open_from_env() -> Result<Self, VerbsError> {
        Self::with_context(Context::open_from_env()?)
    }

    fn with_context(ctx: Context) -> Result<Self, VerbsError> {
        let env = |k: &str, d: u8| {
            std::env::var(k)
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(d)
        };
        let dev_caps = ctx.query_caps()?;
        let port = ctx.query_port(env("MLX5DP_PORT", 1), env("MLX5DP_GID_INDEX", 0))?;
        Ok(Self {
            caps: neutral_caps(&dev_caps),
            ctx,
            dev_caps,
            port,
            pds: Vec::new(),
            xrcds: Vec::new(),
            mws: BTreeMap::new(),
            cqs: BTreeMap::new(),
            srqs: BTreeMap::new(),
            qps: BTreeMap::new(),
            rss_rqs: BTreeMap::new(),
            flows: Vec::new(),
        })
    }

    /// The device context.
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// The capabilities as the device reported them.
    pub fn device_caps(&self) -> &DeviceCaps {
        &self.dev_caps
    }

    /// The port every QP uses.
    pub fn port(&self) -> PortInfo {
        self.port
    }

    fn pd(&self, pd: Pdn) -> Result<Pd, BackendError> {
        self.pds
            .get(pd.0 as usize)
            .cloned()
            .ok_or_else(|| no_such("no such protection domain"))
    }

    fn cq(&self, cqn: u32) -> Result<&Cq, BackendError> {
        self.cqs.get(&cqn).ok_or_else(|| no_such("no such CQ"))
    }

    fn qp(&self, qpn: Qpn) -> Result<&Qp, BackendError> {
        self.qps.get(&qpn.0).ok_or_else(|| no_such("no such QP"))
    }

    fn xrcd(&self, x: Xrcdn) -> Result<&Xrcd, BackendError> {
        self.xrcds
            .get(x.0 as usize)
            .ok_or_else(|| no_such("no such XRC domain"))
    }

    fn srq(&self, n: Srqn) -> Result<&Srq, BackendError> {
        self.srqs.get(&n.0).ok_or_else(|| no_such("no such SRQ"))
    }

    /// [`Backend::create_qp`] for `RqInit::Striding`: a receive-only
    /// RAW_PACKET queue, a striding WQ on the receive CQ behind an RSS QP
    /// ([`RssRq`]). The handle's number is the WQ's, its RQ the WQ's ring
    /// (the emulator's striding kind). Only RAW_PACKET without a send
    /// queue fits (an RSS QP has none: send from another RAW_PACKET QP);
    /// a send CQ, if given, is not used. Never run: compiled only.
    fn create_rss_rq(&mut self, init: QpInit) -> Result<QpHandle, BackendError> {
        let RqInit::Striding {
            wqe_cnt,
            log_num_strides,
            log_stride_bytes,
        } = init.rq
        else {
            return Err(no_such("not a striding RQ"));
        };
        if init.qp_type != QpType::RawPacket {
            return Err(BackendError::Unsupported(
                "a striding RQ on a QP other than RAW_PACKET (verbs builds it behind an RSS QP)",
            ));
        }
        if init.sq_wqebbs > 0 {
            return Err(BackendError::Unsupported(
                "a send queue on a QP with a striding RQ (an RSS QP has none; \
                 send from a separate RAW_PACKET QP)",
            ));
        }
        if init.xrcd.is_some() {
            return Err(VerbsError::Invalid("an XRC domain on a RAW_PACKET QP").into());
        }
        let cq = init
            .recv_cq
            .ok_or(VerbsError::Invalid("a striding RQ needs a receive CQ"))?;
        let cq = self.cq(cq.0)?.clone();
        let pd = self.pd(init.pd)?;
        let attr = StridingWqAttr::new(
            wqe_cnt,
            log_num_strides,
            log_stride_bytes,
            self.dev_caps.striding_rq.as_ref(),
            self.dev_caps.max_qp_wr,
        )?;
        let rss = RssRq::create(&self.ctx, &pd, &cq, attr, self.port)?;
        let num = rss.num();
        // RQ numbers share the QP number space on mlx5 (a RAW_PACKET QP's
        // number is its SQ's or RQ's, Linux `create_raw_packet_qp`,
        // drivers/infiniband/hw/mlx5/qp.c); check
        // anyway rather than let one name two queues.
        if self.qps.contains_key(&num) || self.rss_rqs.contains_key(&num) {
            return Err(VerbsError::Invalid("a WQ number that names another queue here").into());
        }
        let rq = rss.wq().core_rq()?;
        self.rss_rqs.insert(num, rss);
        Ok(QpHandle {
            qpn: Qpn(num),
            qp_type: init.qp_type,
            sq: None,
            rq: Some(rq),
        })
    }
}

impl Backend for VerbsBackend {
    fn name(&self) -> &'static str {
        "verbs"
    }

    fn caps(&self) -> Caps {
        self.caps.clone()
    }

    fn alloc_pd(&mut self) -> Result<Pdn, BackendError> {
        let pd = Pd::alloc(&self.ctx)?;
        self.pds.push(pd);
        Ok(Pdn(self.pds.len() as u32 - 1))
    }

    fn alloc_xrcd(&mut self) -> Result<Xrcdn, BackendError> {
        // A domain is named by a file's inode; a fresh file gives a fresh
        // domain, and the file may go once the domain is open.
        let path = std::env::temp_dir().join(format!(
            "mlx5dp-xrcd-{}-{}",
            std::process::id(),
            self.xrcds.len()
        ));
        let file = std::fs::File::create(&path)
            .map_err(|_| BackendError::Verbs(VerbsError::last("open (XRC domain file)")))?;
        let x = Xrcd::open(&self.ctx, &file, true);
        let _ = std::fs::remove_file(&path);
        self.xrcds.push(x?);
        Ok(Xrcdn(self.xrcds.len() as u32 - 1))
    }

    fn reg_buffer(&mut self, pd: Pdn, len: usize, access: Access) -> Result<Buffer, BackendError> {
        if access.contains(Access::INVALIDATE) {
            return Err(BackendError::Unsupported(
                "region keys that may be invalidated (fast registration; \
                 for a memory window use Backend::alloc_mw)",
            ));
        }
        // `Access` bits 0..4 are the IBV_ACCESS_* values (bit 4:
        // IBV_ACCESS_MW_BIND, for regions memory windows are bound to).
        let mr = Mr::alloc(
            &self.pd(pd)?,
            len,
            access.0 & (Access::ALL.0 | Access::MW_BIND.0),
        )?;
        if mr.lkey() != mr.rkey() {
            return Err(BackendError::Unsupported(
                "a memory region whose lkey and rkey differ (mlx5 gives one mkey)",
            ));
        }
        let key = mr.lkey();
        Ok(Buffer::new(Arc::new(MrMem(mr)), key))
    }

    fn dereg(&mut self, _key: u32) -> Result<(), BackendError> {
        Err(BackendError::Unsupported(
            "deregistering a key while its buffer lives (the verbs MR owns its memory)",
        ))
    }

    /// `ibv_alloc_mw` on the PD (never run: compiled only, no ConnectX
    /// here). The window is kept until [`Backend::dealloc_mw`] or the
    /// backend's drop.
    fn alloc_mw(&mut self, pd: Pdn, mw_type: MwType) -> Result<u32, BackendError> {
        let mw = Mw::alloc(&self.pd(pd)?, mw_type)?;
        let rkey = mw.rkey();
        // A live mkey's index is its own (the device allocates mkeys from
        // one index space), so no window this backend holds has it.
        self.mws.insert(mkey_index(rkey), mw);
        Ok(rkey)
    }

    /// `ibv_dealloc_mw` (never run: compiled only). A failure of the verb
    /// itself is the `Drop` of [`Mw`]'s (checked in debug builds, the
    /// window leaked otherwise); an rkey that names no window of this
    /// backend is an error.
    fn dealloc_mw(&mut self, rkey: u32) -> Result<(), BackendError> {
        let mw = self
            .mws
            .remove(&mkey_index(rkey))
            .ok_or_else(|| no_such("no such memory window"))?;
        drop(mw);
        Ok(())
    }

    /// `ibv_create_ah` to this backend's port (every QP is on it), the
    /// address vector read through `mlx5dv_init_obj` and copied
    /// ([`super::ah::Ah`]); never run: compiled only, no ConnectX here.
    /// `pd` must be one of this backend's. The handle is destroyed before
    /// returning: the device only ever reads the copies in the WQEs
    /// (libmlx5 `_set_datagram_seg` copies the AV into each), so keeping
    /// it would guard nothing.
    fn create_ah(
        &mut self,
        pd: Pdn,
        attr: crate::backend::AhAttr,
    ) -> Result<mlx5dp::prm::Av, BackendError> {
        let pd = self.pd(pd)?;
        let ah = super::ah::Ah::create(&pd, &self.port, &attr)?;
        Ok(ah.av())
    }

    fn create_cq(&mut self, init: CqInit) -> Result<CoreCq, BackendError> {
        if init.ignore_overrun {
            return Err(BackendError::Unsupported(
                "IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN through this backend",
            ));
        }
        let compression = match init.compression {
            None => None,
            Some(c) if c.force => {
                return Err(BackendError::Unsupported(
                    "forced CQE compression (an emulator knob: hardware compresses under load)",
                ))
            }
            Some(c) if c.layout == CompressionLayout::Enhanced => {
                return Err(BackendError::Unsupported(
                    "the enhanced CQE compression layout through mlx5dv_create_cq (needs DevX); use the basic layout",
                ))
            }
            Some(c) => Some(c.format),
        };
        if !init.cqe_cnt.is_power_of_two() {
            return Err(VerbsError::Invalid("a CQ's CQE count is a power of two").into());
        }
        // libmlx5 allocates align_queue_size(cqe + 1) CQEs.
        let mut o = CqOptions::new(init.cqe_cnt.saturating_sub(1).max(1));
        o.cqe_128 = init.cqe_size == CqeSize::B128;
        o.compression = compression;
        // Free-running ticks when the clock frequency is known (the core
        // converts them), the real-time format otherwise.
        o.real_time_ts = self.dev_caps.hca_core_clock_khz == 0 && self.dev_caps.real_time_ts;
        let cq = Cq::create(&self.ctx, o)?;
        let core = cq.core_cq(&self.dev_caps)?;
        self.cqs.insert(core.cqn(), cq);
        Ok(core)
    }

    fn create_qp(&mut self, init: QpInit) -> Result<QpHandle, BackendError> {
        if init.vlan_strip {
            return Err(BackendError::Unsupported(
                "VLAN stripping through this backend",
            ));
        }
        let kind = kind_of(init.qp_type);
        let (max_recv_wr, max_recv_sge, srq) = match init.rq {
            RqInit::None => (0, 0, None),
            RqInit::Cyclic { wqe_cnt, max_sge } => (wqe_cnt, max_sge.max(1), None),
            RqInit::Srq(n) => (0, 0, Some(self.srq(n)?.clone())),
            RqInit::Striding { .. } => return self.create_rss_rq(init),
        };
        let has_sq = kind != QpKind::XrcTgt && init.sq_wqebbs > 0;
        let max_send_sge = if has_sq { init.max_send_sge.max(1) } else { 0 };
        let max_inline = if has_sq { init.max_inline } else { 0 };
        let opts = QpOptions {
            kind,
            max_send_wr: if has_sq {
                max_send_wr(kind, init.sq_wqebbs, max_inline, max_send_sge)
                    .min(self.dev_caps.max_qp_wr.max(1))
            } else {
                0
            },
            max_recv_wr,
            max_send_sge,
            max_recv_sge,
            max_inline_data: max_inline,
            sq_sig_all: false,
            max_tso_header: 0,
        };
        // ibv_create_qp wants a send CQ even without sends.
        let send = init.send_cq.or(init.recv_cq);
        let recv = init.recv_cq.or(init.send_cq);
        let send_cq = match (kind, send) {
            (QpKind::XrcTgt, _) | (_, None) => None,
            (_, Some(c)) => Some(self.cq(c.0)?.clone()),
        };
        let recv_cq = match (kind, recv) {
            (QpKind::XrcTgt, _) | (_, None) => None,
            (_, Some(c)) => Some(self.cq(c.0)?.clone()),
        };
        let xrcd = match init.xrcd {
            Some(x) => Some(self.xrcd(x)?.clone()),
            None => None,
        };
        let pd = match kind {
            // An XRC target lives in its domain, not a PD; any PD will do
            // for the call (it is not used).
            QpKind::XrcTgt => match self.pds.first() {
                Some(pd) => pd.clone(),
                None => self.pd(init.pd)?,
            },
            _ => self.pd(init.pd)?,
        };
        let on = QpOn {
            send_cq: send_cq.as_ref(),
            recv_cq: recv_cq.as_ref(),
            srq: srq.as_ref(),
            xrcd: xrcd.as_ref(),
        };
        let qp = Qp::create(&self.ctx, &pd, opts, on, self.port)?;
        let sq = if has_sq {
            Some(qp.core_sq(&self.dev_caps)?)
        } else {
            None
        };
        let rq = if max_recv_wr > 0 {
            Some(qp.core_rq()?)
        } else {
            None
        };
        let qpn = Qpn(qp.qpn());
        self.qps.insert(qpn.0, qp);
        Ok(QpHandle {
            qpn,
            qp_type: init.qp_type,
            sq,
            rq,
        })
    }

    fn create_srq(&mut self, init: SrqInit) -> Result<SrqHandle, BackendError> {
        if !init.wqe_cnt.is_power_of_two() || init.wqe_cnt < 2 {
            return Err(
                VerbsError::Invalid("an SRQ's WQE count is a power of two of at least 2").into(),
            );
        }
        let pd = self.pd(init.pd)?;
        // libmlx5 allocates align_queue_size(max_wr + 1) WQEs.
        let max_wr = init.wqe_cnt - 1;
        let max_sge = init.max_sge.max(1);
        let srq = match (init.xrcd, init.cq) {
            (Some(x), Some(c)) => {
                let (x, c) = (self.xrcd(x)?.clone(), self.cq(c.0)?.clone());
                Srq::create_xrc(&self.ctx, &pd, &x, &c, max_wr, max_sge)?
            }
            (None, None) => Srq::create(&self.ctx, &pd, max_wr, max_sge)?,
            _ => {
                return Err(
                    VerbsError::Invalid("an XRC SRQ needs both an XRC domain and a CQ").into(),
                )
            }
        };
        let rq = srq.core_rq()?;
        let srqn = Srqn(rq.emu_parts().num);
        self.srqs.insert(srqn.0, srq);
        Ok(SrqHandle { srqn, rq })
    }

    fn bring_up(
        &mut self,
        qpn: Qpn,
        dest: Option<Qpn>,
        qkey: u32,
        attr: ConnectAttr,
    ) -> Result<(), BackendError> {
        if let Some(rss) = self.rss_rqs.get(&qpn.0) {
            return rss_ready(rss, dest);
        }
        let remote = match dest {
            Some(d) => Some(self.qp(d)?.endpoint(psn(d.0))),
            None => None,
        };
        let mtu = self.port.active_mtu;
        let qp = self
            .qps
            .get_mut(&qpn.0)
            .ok_or_else(|| no_such("no such QP"))?;
        let peer = match qp.kind() {
            QpKind::RawPacket => Peer::Raw,
            QpKind::Ud => Peer::Datagram { qkey },
            _ => Peer::Connected {
                remote: remote.ok_or_else(|| no_such("a connected QP needs a peer"))?,
                local_psn: psn(qpn.0),
                opts: ConnectOptions {
                    access: attr.access.0 & Access::ALL.0,
                    mtu,
                    retry_cnt: attr.retry_cnt,
                    rnr_retry: attr.rnr_retry,
                    ..ConnectOptions::default()
                },
            },
        };
        Ok(qp.bring_up(peer)?)
    }

    fn to_error(&mut self, qpn: Qpn) -> Result<(), BackendError> {
        if let Some(rss) = self.rss_rqs.get(&qpn.0) {
            // The RSS QP cannot be modified; its WQ can (DPDK stops an Rx
            // queue the same way, `mlx5_ibv_modify_wq`).
            return Ok(rss.wq().to_error()?);
        }
        Ok(self.qp(qpn)?.to_error()?)
    }

    fn qp_state(&mut self, qpn: Qpn) -> Option<QpState> {
        use rdma_sys::ibv_qp_state as S;
        if let Some(rss) = self.rss_rqs.get(&qpn.0) {
            return Some(rss_state(rss));
        }
        let s = self.qp(qpn).ok()?.state().ok()?;
        Some(match s {
            S::IBV_QPS_RESET => QpState::Reset,
            S::IBV_QPS_INIT => QpState::Init,
            S::IBV_QPS_RTR => QpState::Rtr,
            // Draining is still sending.
            S::IBV_QPS_RTS | S::IBV_QPS_SQD => QpState::Rts,
            // SQE (UC/UD send-queue error) and ERR: nothing more is sent.
            _ => QpState::Err,
        })
    }

    fn add_flow(&mut self, rule: FlowRule) -> Result<(), BackendError> {
        if let Some(rss) = self.rss_rqs.get(&rule.qpn.0) {
            // To the RSS QP's TIR, tagged as below.
            let flow = rss.flow_eth(rule.dmac, rule.ethertype, Some(rule.flow_tag))?;
            self.flows.push(flow);
            return Ok(());
        }
        let qp = self.qp(rule.qpn)?;
        // libmlx5 reports the flow tag in the CQE's QPN field
        // (`mlx5_cq_read_flow_tag`), as the emulator does.
        let flow = Flow::eth(qp, rule.dmac, rule.ethertype, Some(rule.flow_tag))?;
        self.flows.push(flow);
        Ok(())
    }

    fn progress(&mut self) {
        // The device runs by itself.
        std::hint::spin_loop();
    }

    fn is_step_mode(&self) -> bool {
        false
    }

    fn device_info(&self) -> DeviceInfo {
        let c = &self.dev_caps;
        let mut caps: Vec<(String, String)> = vec![
            ("vendor_part_id".into(), format!("{:#x}", c.vendor_part_id)),
            ("max_qp_wr".into(), c.max_qp_wr.to_string()),
            ("max_sge".into(), c.max_sge.to_string()),
            ("max_cqe".into(), c.max_cqe.to_string()),
            ("max_srq_wr".into(), c.max_srq_wr.to_string()),
            ("phys_port_cnt".into(), c.phys_port_cnt.to_string()),
            (
                "raw_packet_caps".into(),
                format!("{:#x}", c.raw_packet_caps),
            ),
            ("max_tso".into(), c.max_tso.to_string()),
            ("cqe_version".into(), c.cqe_version.to_string()),
            ("mpw_allowed".into(), c.mpw_allowed.to_string()),
            ("enhanced_mpw".into(), c.enhanced_mpw.to_string()),
            ("cqe_128b_pad".into(), c.cqe_128b_pad.to_string()),
            ("real_time_ts".into(), c.real_time_ts.to_string()),
            (
                "hca_core_clock_khz".into(),
                c.hca_core_clock_khz.to_string(),
            ),
            ("timestamp_mask".into(), format!("{:#x}", c.timestamp_mask)),
            (
                "tunnel_offloads".into(),
                format!("{:#x}", c.tunnel_offloads),
            ),
        ];
        match &c.cqe_compression {
            Some(z) => {
                let f: Vec<&str> = z.formats.iter().map(|m| m.name()).collect();
                caps.push(("cqe_compression_max_num".into(), z.max_num.to_string()));
                caps.push(("cqe_compression_formats".into(), f.join(",")));
            }
            None => caps.push(("cqe_compression".into(), "false".into())),
        }
        match &c.striding_rq {
            Some(s) => caps.push((
                "striding_rq".into(),
                format!(
                    "log_stride_bytes {}..={} log_num_strides {}..={}",
                    s.min_log_stride_bytes,
                    s.max_log_stride_bytes,
                    s.min_log_num_strides,
                    s.max_log_num_strides
                ),
            )),
            None => caps.push(("striding_rq".into(), "false".into())),
        }
        caps.push((
            "port".into(),
            format!(
                "{} ({}, gid index {})",
                self.port.port,
                if self.port.ethernet {
                    "RoCE"
                } else {
                    "InfiniBand"
                },
                self.port.gid_index
            ),
        ));
        DeviceInfo {
            name: self.ctx.name().to_string(),
            fw_ver: c.fw_ver.clone(),
            model: format!(
                "{} (PCI part {:#x})",
                model_name(c.vendor_part_id),
                c.vendor_part_id
            ),
            caps,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verbs::device::{CqeCompressionCaps, StridingRqCaps as DvStriding};
    use mlx5dp::prm::MiniCqeFormat;

    /// Whatever libmlx5 makes of the request (a WQE size at least the
    /// estimate, `max_send_wr * size` rounded up to a power of two), the
    /// SQ holds at least the WQEBBs asked for.
    #[test]
    fn sq_requests_round_up_to_at_least_the_wqebbs_asked() {
        let kinds = [
            QpKind::Rc,
            QpKind::Uc,
            QpKind::Ud,
            QpKind::XrcIni,
            QpKind::RawPacket,
        ];
        for kind in kinds {
            for wqebbs in [1u32, 2, 4, 8, 16, 64, 256, 4096] {
                for (inline, sge) in [(0, 1), (64, 2), (200, 3), (256, 4), (912, 1), (0, 30)] {
                    let size = send_wqe_bytes(kind, inline, sge);
                    assert_eq!(size % 64, 0);
                    let wr = max_send_wr(kind, wqebbs, inline, sge);
                    assert!(wr >= 1);
                    for extra in [0, 64, 192] {
                        let ring =
                            (u64::from(wr) * u64::from(size + extra)).next_power_of_two() / 64;
                        assert!(
                            ring >= u64::from(wqebbs),
                            "{kind:?} {wqebbs} {inline} {sge}: {wr} x {size} -> {ring}"
                        );
                    }
                }
            }
        }
        // The data part: the larger of the inline area and the gather list.
        assert_eq!(send_wqe_bytes(QpKind::Rc, 256, 4), 320);
        assert_eq!(send_wqe_bytes(QpKind::Rc, 0, 1), 64);
        assert_eq!(send_wqe_bytes(QpKind::Ud, 0, 1), 128);
    }

    #[test]
    fn caps_map_to_the_neutral_ones() {
        let mut c = DeviceCaps {
            fw_ver: "16.35.1012".into(),
            vendor_part_id: 0x1017,
            max_qp_wr: 32768,
            max_sge: 30,
            max_cqe: 4_194_303,
            enhanced_mpw: true,
            cqe_v1: true,
            hca_core_clock_khz: 156_250,
            cqe_compression: Some(CqeCompressionCaps {
                max_num: 64,
                formats: vec![MiniCqeFormat::Hash, MiniCqeFormat::Csum],
                cqe_128: true,
            }),
            striding_rq: Some(DvStriding {
                min_log_stride_bytes: 6,
                max_log_stride_bytes: 13,
                min_log_num_strides: 9,
                max_log_num_strides: 16,
                supported_qpts: 1 << 8,
            }),
            ..DeviceCaps::default()
        };
        let n = neutral_caps(&c);
        assert_eq!((n.max_sge, n.max_qp_wr), (30, 32768));
        assert!(n.flags.enhanced_mpw && n.flags.cqe_v1 && n.flags.cqe_128b_comp);
        assert_eq!(n.cqe_comp.max_num, 64);
        assert_eq!(n.cqe_comp.formats.len(), 2);
        assert!(n.cqe_comp.basic_layout && !n.cqe_comp.enhanced_layout);
        assert_eq!(n.striding_rq.max_log_num_strides, 16);
        assert_eq!(n.eth_min_inline, 18);
        assert_eq!(model_name(c.vendor_part_id), "ConnectX-5");
        c.cqe_compression = None;
        c.striding_rq = None;
        let n = neutral_caps(&c);
        assert!(!n.cqe_comp.basic_layout && n.cqe_comp.formats.is_empty());
        assert_eq!(n.striding_rq.max_log_num_strides, 0);
        assert_eq!(model_name(0x4242), "mlx5 device");
    }

    #[test]
    fn qp_types_map_both_ways() {
        for t in [
            QpType::Rc,
            QpType::Uc,
            QpType::Ud,
            QpType::XrcIni,
            QpType::XrcTgt,
            QpType::RawPacket,
        ] {
            assert_eq!(super::super::resources::kind_to_emu(kind_of(t)), t);
        }
    }

    /// A missing device is "unavailable" (status 2 in the tools) and says
    /// what to use instead; a failing verb is not.
    #[test]
    fn unavailable_errors() {
        let e = BackendError::from(VerbsError::NoDevice);
        assert!(e.is_unavailable());
        assert!(e.to_string().contains("--device emu"), "{e}");
        assert!(BackendError::Unsupported("x").is_unavailable());
        let eperm = VerbsError::Verb {
            verb: "ibv_open_device",
            errno: libc::EPERM,
        };
        assert!(eperm.is_unavailable());
        let einval = VerbsError::Verb {
            verb: "ibv_modify_qp",
            errno: libc::EINVAL,
        };
        assert!(!BackendError::from(einval).is_unavailable());
        assert!(!BackendError::NoMemory.is_unavailable());
    }

    /// Without a device, opening one fails at once with the error naming
    /// the emulated device (skipped where there is a device).
    #[test]
    fn open_without_a_device() {
        if std::env::var("MLX5DP_DEVICE").is_ok() {
            return;
        }
        if let Err(e) = VerbsBackend::open("mlx5_0") {
            assert!(e.is_unavailable(), "{e:?}");
            assert!(e.to_string().contains("--device emu"), "{e}");
        }
        match crate::backend::open("mlx5_0") {
            Err(e) => assert!(e.is_unavailable(), "{e:?}"),
            Ok(be) => assert_eq!(be.name(), "verbs"),
        }
    }
}
