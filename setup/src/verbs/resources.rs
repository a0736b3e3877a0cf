//! RAII owners of verbs objects, QP state transitions and recovery.
//!
//! Each owner holds an `Arc` to every object it depends on (see the module
//! documentation of [`super`] for the resulting teardown order), and its
//! `Drop` destroys its own object only. A destroy that fails (EBUSY: a
//! child created outside this module still exists) is reported in debug
//! builds and otherwise leaked, never retried on freed memory.

use super::device::{Context, ContextInner, DeviceCaps, PortInfo, StridingRqCaps};
use super::ffi::{self, cq_init_attr_mask, cqe_res_format, mlx5dv_obj};
use super::parts::{self, PartsError};
use super::VerbsError;
use crate::emu::core_parts::KeepAlive;
use crate::emu::{
    CompressionCfg, CompressionLayout, CoreCq, CoreRq, CoreSq, EmuCqParts, EmuRqKind, EmuRqParts,
    EmuSqParts,
};
use core::ptr::{self, NonNull};
use mlx5dp::cq::{CqConfig, CqParts, Layout, TimestampFormat};
use mlx5dp::index::RingSize;
use mlx5dp::mmio::DeviceWord;
use mlx5dp::prm::MiniCqeFormat;
use mlx5dp::ring::RingBuf;
use mlx5dp::sq::{self, SqConfig, SqRawParts};
use rdma_sys::ibv_qp_attr_mask as M;
use rdma_sys::{
    ibv_cq_ex, ibv_flow, ibv_mr, ibv_mw, ibv_pd, ibv_qp, ibv_qp_attr, ibv_qp_init_attr_ex, ibv_srq,
    ibv_wq, ibv_xrcd,
};
use std::os::fd::AsRawFd;
use std::sync::Arc;

/// Implements `Send`/`Sync` for an owner of a verbs object pointer.
macro_rules! verbs_owner_is_send_sync {
    ($t:ty) => {
        // SAFETY: the pointer is only passed to libibverbs control verbs,
        // which are thread-safe; the data path never goes through it.
        unsafe impl Send for $t {}
        // SAFETY: as for `Send`: shared use only issues thread-safe verbs.
        unsafe impl Sync for $t {}
    };
}

/// Destroys in debug-checked fashion (see the module documentation).
fn destroyed(verb: &'static str, ret: i32) {
    debug_assert_eq!(ret, 0, "{verb} failed: {ret}");
}

// ---------------------------------------------------------------------------
// Protection domain and memory regions.

#[derive(Debug)]
pub(crate) struct PdInner {
    ptr: *mut ibv_pd,
    _ctx: Arc<ContextInner>,
}
verbs_owner_is_send_sync!(PdInner);

impl Drop for PdInner {
    fn drop(&mut self) {
        // SAFETY: allocated by `Pd::alloc`; every MR, QP, SRQ and WQ on it
        // holds an `Arc` to this owner, so none is left.
        destroyed("ibv_dealloc_pd", unsafe {
            rdma_sys::ibv_dealloc_pd(self.ptr)
        });
    }
}

/// A protection domain (`ibv_alloc_pd`).
#[derive(Clone, Debug)]
pub struct Pd {
    inner: Arc<PdInner>,
}

impl Pd {
    /// Allocates a protection domain.
    pub fn alloc(ctx: &Context) -> Result<Self, VerbsError> {
        // SAFETY: the context is open (held by `ctx`).
        let ptr = unsafe { rdma_sys::ibv_alloc_pd(ctx.inner.ptr) };
        if ptr.is_null() {
            return Err(VerbsError::last("ibv_alloc_pd"));
        }
        Ok(Pd {
            inner: Arc::new(PdInner {
                ptr,
                _ctx: ctx.inner.clone(),
            }),
        })
    }

    /// The `ibv_pd`, for verbs of other modules that create objects in
    /// it (an address handle); valid while this `Pd` (or a clone) lives.
    pub(crate) fn as_ptr(&self) -> *mut rdma_sys::ibv_pd {
        self.inner.ptr
    }
}

/// Page-aligned zeroed memory owned by an [`Mr`].
#[derive(Debug)]
struct PageMem {
    ptr: NonNull<u8>,
    layout: std::alloc::Layout,
}

impl PageMem {
    fn new(len: usize) -> Result<Self, VerbsError> {
        let layout = std::alloc::Layout::from_size_align(len.max(1), 4096)
            .map_err(|_| VerbsError::Invalid("buffer length"))?;
        // SAFETY: `layout` has a non-zero size.
        let ptr = NonNull::new(unsafe { std::alloc::alloc_zeroed(layout) })
            .ok_or(VerbsError::Invalid("buffer allocation failed"))?;
        Ok(Self { ptr, layout })
    }
}

impl Drop for PageMem {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout, freed once.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) };
    }
}

/// A registered, zeroed, page-aligned buffer (`ibv_reg_mr`). Deregistered,
/// then freed, on drop: the device can no longer reach the memory when it
/// goes back to the allocator.
#[derive(Debug)]
pub struct Mr {
    ptr: *mut ibv_mr,
    mem: PageMem,
    len: usize,
    _pd: Arc<PdInner>,
}
verbs_owner_is_send_sync!(Mr);

impl Drop for Mr {
    fn drop(&mut self) {
        // SAFETY: registered by `Mr::alloc`; `mem` (a field, dropped after
        // this body) is still allocated here.
        destroyed("ibv_dereg_mr", unsafe { rdma_sys::ibv_dereg_mr(self.ptr) });
    }
}

impl Mr {
    /// Allocates `len` zeroed bytes and registers them with `access`
    /// (`IBV_ACCESS_*` bits).
    pub fn alloc(pd: &Pd, len: usize, access: u32) -> Result<Self, VerbsError> {
        let mem = PageMem::new(len)?;
        let access = i32::try_from(access).map_err(|_| VerbsError::Invalid("access flags"))?;
        // SAFETY: `mem` is `len` bytes we own, alive as long as the MR
        // (field order and `Drop` above); the PD is alive (`_pd`).
        let ptr =
            unsafe { rdma_sys::ibv_reg_mr(pd.inner.ptr, mem.ptr.as_ptr().cast(), len, access) };
        if ptr.is_null() {
            return Err(VerbsError::last("ibv_reg_mr"));
        }
        Ok(Mr {
            ptr,
            mem,
            len,
            _pd: pd.inner.clone(),
        })
    }

    /// Local key.
    pub fn lkey(&self) -> u32 {
        // SAFETY: the MR is registered; `lkey` is a plain field.
        unsafe { (*self.ptr).lkey }
    }

    /// Remote key.
    pub fn rkey(&self) -> u32 {
        // SAFETY: as for `lkey`.
        unsafe { (*self.ptr).rkey }
    }

    /// The device address of byte `off` (the virtual address: `ibv_reg_mr`
    /// uses iova = va).
    pub fn addr(&self, off: usize) -> u64 {
        self.mem.ptr.as_ptr() as u64 + off as u64
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Copies `n` bytes at `off` out (volatile: the device writes the
    /// buffer behind the compiler's back).
    pub fn read(&self, off: usize, n: usize) -> Vec<u8> {
        assert!(
            off.checked_add(n).is_some_and(|e| e <= self.len),
            "read out of bounds"
        );
        (0..n)
            .map(|i| {
                // SAFETY: in bounds (asserted); bytes of our allocation;
                // volatile because the device may have written them.
                unsafe { self.mem.ptr.as_ptr().add(off + i).read_volatile() }
            })
            .collect()
    }

    /// Writes `data` at `off`.
    pub fn write(&self, off: usize, data: &[u8]) {
        assert!(
            off.checked_add(data.len()).is_some_and(|e| e <= self.len),
            "write out of bounds"
        );
        for (i, &b) in data.iter().enumerate() {
            // SAFETY: in bounds (asserted); bytes of our allocation; no
            // Rust reference to them exists (only raw pointers).
            unsafe { self.mem.ptr.as_ptr().add(off + i).write_volatile(b) };
        }
    }
}

/// A memory window (`ibv_alloc_mw`), deallocated on drop
/// (`ibv_dealloc_mw`).
///
/// It is allocated free; the core binds it with a UMR work request
/// (`mlx5dp::sq::Batch::bind_mw`), as libmlx5's `ibv_post_send` with
/// `IBV_WR_BIND_MW` does, and libibverbs is not told: `ibv_mw.rkey` stays
/// the rkey the window was allocated with (libmlx5 updates it only in
/// `mlx5_bind_mw`, the `ibv_bind_mw` of a type-1 window), so the caller
/// keeps the rkey each bind gives.
///
/// Never run: written against rdma-core v44's `ibv_alloc_mw` /
/// `ibv_dealloc_mw` (`verbs.h`; libmlx5 `mlx5_alloc_mw`,
/// `mlx5_dealloc_mw`) and compiled, with no ConnectX to run it on.
#[derive(Debug)]
pub struct Mw {
    ptr: *mut ibv_mw,
    mw_type: sq::MwType,
    _pd: Arc<PdInner>,
}
verbs_owner_is_send_sync!(Mw);

impl Drop for Mw {
    fn drop(&mut self) {
        // SAFETY: allocated by `Mw::alloc`, deallocated once, here; the PD
        // (`_pd`, a field dropped after this body) is still alive.
        // rdma-sys's wrapper unwraps `ops.dealloc_mw`, which is never
        // empty: libibverbs fills every op a provider leaves out with a
        // stub (`dummy_ops.c`, `verbs_set_ops`), and libmlx5 sets it
        // (`mlx5_ctx_common_ops`).
        destroyed("ibv_dealloc_mw", unsafe {
            rdma_sys::ibv_dealloc_mw(self.ptr)
        });
    }
}

impl Mw {
    /// Allocates a free memory window of `mw_type` in `pd`. Fails with
    /// `EOPNOTSUPP` when the provider has no `alloc_mw`.
    pub fn alloc(pd: &Pd, mw_type: sq::MwType) -> Result<Self, VerbsError> {
        let t = match mw_type {
            sq::MwType::Type1 => rdma_sys::ibv_mw_type::IBV_MW_TYPE_1,
            sq::MwType::Type2 => rdma_sys::ibv_mw_type::IBV_MW_TYPE_2,
        };
        // SAFETY: the PD is alive (held by `pd`), and with it its context,
        // whose ops table libibverbs filled when the device was opened.
        // rdma-sys returns `None` (errno EOPNOTSUPP) for an empty
        // `ops.alloc_mw`, as `verbs.h` does; the provider (or libibverbs'
        // stub) returns NULL with errno set on failure.
        let ptr = unsafe { rdma_sys::ibv_alloc_mw(pd.inner.ptr, t) };
        match ptr {
            Some(ptr) if !ptr.is_null() => Ok(Mw {
                ptr,
                mw_type,
                _pd: pd.inner.clone(),
            }),
            _ => Err(VerbsError::last("ibv_alloc_mw")),
        }
    }

    /// The rkey the window was allocated with (`ibv_mw.rkey`; see the
    /// type's documentation for why binds do not change it here).
    pub fn rkey(&self) -> u32 {
        // SAFETY: the window is allocated; `rkey` is a plain field.
        unsafe { (*self.ptr).rkey }
    }

    /// The window's type.
    pub fn mw_type(&self) -> sq::MwType {
        self.mw_type
    }
}

// ---------------------------------------------------------------------------
// Completion queues.

#[derive(Debug)]
pub(crate) struct CqInner {
    ptr: *mut ibv_cq_ex,
    _ctx: Arc<ContextInner>,
}
verbs_owner_is_send_sync!(CqInner);

impl CqInner {
    fn as_cq(&self) -> *mut rdma_sys::ibv_cq {
        // `ibv_cq_ex_to_cq` is a cast: `struct ibv_cq_ex` starts with the
        // members of `struct ibv_cq`.
        self.ptr.cast()
    }
}

impl Drop for CqInner {
    fn drop(&mut self) {
        // SAFETY: created by `Cq::create`; every QP, SRQ and WQ using it
        // holds an `Arc` to this owner, so none is left.
        destroyed("ibv_destroy_cq", unsafe {
            rdma_sys::ibv_destroy_cq(self.as_cq())
        });
    }
}

/// How a CQ is created.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CqOptions {
    /// CQEs asked for (the provider rounds up to a power of two).
    pub cqe: u32,
    /// 128-byte CQEs instead of 64.
    pub cqe_128: bool,
    /// Pad 128-byte CQEs (`MLX5DV_CQ_INIT_ATTR_FLAGS_CQE_PAD`).
    pub cqe_pad: bool,
    /// CQE compression with this responder mini-CQE format (verbs offers
    /// hash, csum and csum-stridx; the layout is basic).
    pub compression: Option<MiniCqeFormat>,
    /// `IBV_CREATE_CQ_ATTR_SINGLE_THREADED`: no lock in libmlx5 (the core
    /// owns the CQ anyway).
    pub single_threaded: bool,
    /// Real-time (sec:ns) CQE timestamps instead of free-running ticks
    /// (needs `DeviceCaps::real_time_ts`).
    pub real_time_ts: bool,
}

impl CqOptions {
    /// `cqe` 64-byte CQEs, uncompressed, single-threaded, free-running
    /// timestamps.
    pub fn new(cqe: u32) -> Self {
        Self {
            cqe,
            cqe_128: false,
            cqe_pad: false,
            compression: None,
            single_threaded: true,
            real_time_ts: false,
        }
    }
}

/// The `mlx5dv_cq_init_attr` for `opts` (pure; tested).
pub fn dv_cq_attr(opts: &CqOptions) -> Result<ffi::mlx5dv_cq_init_attr, VerbsError> {
    let mut a = ffi::mlx5dv_cq_init_attr::default();
    if let Some(fmt) = opts.compression {
        a.comp_mask |= cq_init_attr_mask::COMPRESSED_CQE;
        a.cqe_comp_res_format = match fmt {
            MiniCqeFormat::Hash => cqe_res_format::HASH,
            MiniCqeFormat::Csum => cqe_res_format::CSUM,
            MiniCqeFormat::CsumStridx => cqe_res_format::CSUM_STRIDX,
            _ => {
                return Err(VerbsError::Unsupported(
                    "this mini-CQE format through mlx5dv_create_cq (needs DevX)",
                ))
            }
        };
    }
    if opts.cqe_128 {
        a.comp_mask |= cq_init_attr_mask::CQE_SIZE;
        a.cqe_size = 128;
    } else {
        a.comp_mask |= cq_init_attr_mask::CQE_SIZE;
        a.cqe_size = 64;
    }
    if opts.cqe_pad {
        if !opts.cqe_128 {
            return Err(VerbsError::Invalid("CQE padding needs 128-byte CQEs"));
        }
        a.comp_mask |= cq_init_attr_mask::FLAGS;
        a.flags |= ffi::MLX5DV_CQ_INIT_ATTR_FLAGS_CQE_PAD;
    }
    Ok(a)
}

/// A completion queue (`mlx5dv_create_cq`).
#[derive(Clone, Debug)]
pub struct Cq {
    inner: Arc<CqInner>,
    opts: CqOptions,
}

impl Cq {
    /// Creates a CQ.
    pub fn create(ctx: &Context, opts: CqOptions) -> Result<Self, VerbsError> {
        if opts.cqe == 0 {
            return Err(VerbsError::Invalid("a CQ needs at least one CQE"));
        }
        let mut dv = dv_cq_attr(&opts)?;
        // SAFETY: plain C data; all-zero is valid (null pointers).
        let mut attr: rdma_sys::ibv_cq_init_attr_ex = unsafe { core::mem::zeroed() };
        attr.cqe = opts.cqe;
        attr.wc_flags = if opts.real_time_ts {
            rdma_sys::ibv_create_cq_wc_flags::IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK.0 as u64
        } else {
            rdma_sys::ibv_create_cq_wc_flags::IBV_WC_EX_WITH_COMPLETION_TIMESTAMP.0 as u64
        };
        if opts.single_threaded {
            attr.comp_mask |= rdma_sys::ibv_cq_init_attr_mask::IBV_CQ_INIT_ATTR_MASK_FLAGS.0;
            attr.flags |= rdma_sys::ibv_create_cq_attr_flags::IBV_CREATE_CQ_ATTR_SINGLE_THREADED.0;
        }
        // SAFETY: the context is open; both attribute structs are valid and
        // live for the call (layouts checked against the headers).
        let ptr = unsafe { ffi::mlx5dv_create_cq(ctx.inner.ptr, &mut attr, &mut dv) };
        if ptr.is_null() {
            return Err(VerbsError::last("mlx5dv_create_cq"));
        }
        Ok(Cq {
            inner: Arc::new(CqInner {
                ptr,
                _ctx: ctx.inner.clone(),
            }),
            opts,
        })
    }

    /// The raw `ibv_cq`.
    pub fn as_ptr(&self) -> *mut rdma_sys::ibv_cq {
        self.inner.as_cq()
    }

    /// `mlx5dv_init_obj` on the CQ, checked. From here on libmlx5 treats
    /// the CQ as owned by direct verbs (it no longer touches the consumer
    /// index).
    pub fn dv(&self) -> Result<parts::CheckedCq, PartsError> {
        let mut out: ffi::mlx5dv_cq = ffi::mlx5dv_cq {
            buf: ptr::null_mut(),
            dbrec: ptr::null_mut(),
            cqe_cnt: 0,
            cqe_size: 0,
            cq_uar: ptr::null_mut(),
            cqn: 0,
            comp_mask: 0,
        };
        let mut obj = mlx5dv_obj::empty();
        obj.cq.in_ = self.inner.as_cq();
        obj.cq.out = &mut out;
        // SAFETY: `obj` names a live CQ and a valid out-struct; only the CQ
        // pair is read (`MLX5DV_OBJ_CQ`).
        let ret = unsafe { ffi::mlx5dv_init_obj(&mut obj, ffi::obj_type::CQ) };
        if ret != 0 {
            return Err(PartsError::InitObj { errno: ret });
        }
        parts::check_cq(&out)
    }

    /// The core's raw parts.
    ///
    /// They carry no lifetime ([`CqParts`]): whoever passes them to
    /// [`mlx5dp::cq::Cq::from_raw_parts`] keeps this `Cq` (or a clone)
    /// alive for as long as the core's `Cq` lives.
    pub fn raw_parts(&self) -> Result<CqParts, PartsError> {
        let c = self.dv()?;
        Ok(CqParts {
            buf: NonNull::new(c.buf).ok_or(PartsError::Null("mlx5dv_cq.buf"))?,
            cqe_cnt: c.cqe_cnt,
            cqe_size: c.cqe_size,
            dbrec: NonNull::new(c.dbrec).ok_or(PartsError::Null("mlx5dv_cq.dbrec"))?,
            uar: NonNull::new(c.uar),
            cqn: c.cqn,
        })
    }

    /// The core's configuration for this CQ: compression as created
    /// (verbs compression uses the basic layout, PRM-FACTS §10.1), the
    /// timestamp format from `caps`; `striding_rq` as the caller says.
    pub fn config(&self, caps: &DeviceCaps, striding_rq: bool) -> Result<CqConfig, VerbsError> {
        let timestamp = if self.opts.real_time_ts {
            TimestampFormat::RealTime
        } else if caps.hca_core_clock_khz > 0 {
            TimestampFormat::FreeRunning {
                hca_core_clock_khz: caps.hca_core_clock_khz,
            }
        } else {
            return Err(VerbsError::Unsupported(
                "free-running timestamps without an HCA clock frequency",
            ));
        };
        Ok(CqConfig {
            compression: self.opts.compression.map(|f| (Layout::Basic, f)),
            striding_rq,
            timestamp,
            ..CqConfig::default()
        })
    }
}

impl Cq {
    /// The CQ as the backend-neutral owner the scenarios and tools take
    /// ([`crate::backend::Backend::create_cq`]): the checked
    /// `mlx5dv_init_obj` parts, the timestamp format of
    /// [`Cq::config`], and a reference that keeps this CQ (its buffer,
    /// doorbell record and UAR mapping) alive.
    pub fn core_cq(&self, caps: &DeviceCaps) -> Result<CoreCq, VerbsError> {
        let c = self.dv()?;
        let cfg = self.config(caps, false)?;
        let parts = EmuCqParts {
            cqn: c.cqn,
            buf: c.buf,
            cqe_cnt: c.cqe_cnt,
            cqe_size: c.cqe_size.bytes() as u32,
            dbrec: c.dbrec,
            uar: c.uar,
            // Verbs compression is the basic layout (PRM-FACTS §10.1).
            compression: self.opts.compression.map(|format| CompressionCfg {
                format,
                layout: CompressionLayout::Basic,
                max_session: caps
                    .cqe_compression
                    .as_ref()
                    .map_or(0, |z| u16::try_from(z.max_num).unwrap_or(u16::MAX)),
                force: false,
            }),
        };
        // SAFETY: the values were checked by `check_cq` (non-null, aligned,
        // power-of-two count, 64 or 128-byte CQEs) and describe this live
        // CQ; the `Arc` in the `KeepAlive` keeps it (and so its buffer,
        // doorbell record and UAR mapping) alive for as long as the owner;
        // the device writes the ring by DMA.
        Ok(unsafe { CoreCq::from_parts(parts, cfg.timestamp, KeepAlive::new(self.inner.clone())) })
    }
}

// ---------------------------------------------------------------------------
// XRC domain.

#[derive(Debug)]
pub(crate) struct XrcdInner {
    ptr: *mut ibv_xrcd,
    _ctx: Arc<ContextInner>,
}
verbs_owner_is_send_sync!(XrcdInner);

impl Drop for XrcdInner {
    fn drop(&mut self) {
        // SAFETY: opened by `Xrcd::open`; every XRC SRQ and QP on it holds
        // an `Arc` to this owner.
        destroyed("ibv_close_xrcd", unsafe {
            rdma_sys::ibv_close_xrcd(self.ptr)
        });
    }
}

/// An XRC domain (`ibv_open_xrcd`), shared between processes that open it
/// through the same file.
#[derive(Clone, Debug)]
pub struct Xrcd {
    inner: Arc<XrcdInner>,
}

impl Xrcd {
    /// Opens (`create`: or creates) the XRC domain bound to `file`'s inode.
    /// Every process that opens the same file gets the same domain; the
    /// file may be closed afterwards.
    pub fn open(ctx: &Context, file: &impl AsRawFd, create: bool) -> Result<Self, VerbsError> {
        // SAFETY: plain C data; all-zero is valid.
        let mut attr: rdma_sys::ibv_xrcd_init_attr = unsafe { core::mem::zeroed() };
        attr.comp_mask = rdma_sys::ibv_xrcd_init_attr_mask::IBV_XRCD_INIT_ATTR_FD.0
            | rdma_sys::ibv_xrcd_init_attr_mask::IBV_XRCD_INIT_ATTR_OFLAGS.0;
        attr.fd = file.as_raw_fd();
        attr.oflags = if create { libc::O_CREAT } else { 0 };
        // SAFETY: the context is open; `attr` is valid for the call; the
        // fd is open (borrowed from `file`).
        let ptr =
            unsafe { rdma_sys::ibv_open_xrcd(ctx.inner.ptr, &mut attr) }.unwrap_or(ptr::null_mut());
        if ptr.is_null() {
            return Err(VerbsError::last("ibv_open_xrcd"));
        }
        Ok(Xrcd {
            inner: Arc::new(XrcdInner {
                ptr,
                _ctx: ctx.inner.clone(),
            }),
        })
    }
}

// ---------------------------------------------------------------------------
// Shared receive queues.

#[derive(Debug)]
pub(crate) struct SrqInner {
    ptr: *mut ibv_srq,
    _pd: Arc<PdInner>,
    _cq: Option<Arc<CqInner>>,
    _xrcd: Option<Arc<XrcdInner>>,
}
verbs_owner_is_send_sync!(SrqInner);

impl Drop for SrqInner {
    fn drop(&mut self) {
        // SAFETY: created by `Srq::create*`; QPs using it hold an `Arc`.
        destroyed("ibv_destroy_srq", unsafe {
            rdma_sys::ibv_destroy_srq(self.ptr)
        });
    }
}

/// A shared receive queue (basic or XRC).
#[derive(Clone, Debug)]
pub struct Srq {
    inner: Arc<SrqInner>,
}

/// `verbs_get_ctx_op(ctx, create_srq_ex)`, written out: rdma-sys 0.3's
/// `ibv_create_srq_ex` tests its comp_mask wrongly and would create a basic
/// SRQ for an XRC request.
///
/// # Safety
///
/// `ctx` is an open context.
unsafe fn create_srq_ex(
    ctx: *mut rdma_sys::ibv_context,
    attr: *mut rdma_sys::ibv_srq_init_attr_ex,
) -> *mut ibv_srq {
    use rdma_sys::verbs_context;
    // SAFETY: the caller passes an open context.
    if unsafe { (*ctx).abi_compat } as usize != u32::MAX as usize {
        return ptr::null_mut();
    }
    let off = core::mem::offset_of!(verbs_context, context);
    // SAFETY: an extended context (checked above) is the `context` member
    // of a `verbs_context` (verbs.h `verbs_get_ctx`).
    let vctx = unsafe { ctx.cast::<u8>().sub(off) }.cast::<verbs_context>();
    let need =
        core::mem::size_of::<verbs_context>() - core::mem::offset_of!(verbs_context, create_srq_ex);
    // SAFETY: `vctx` is the provider's verbs_context; `sz` says how much of
    // it the provider filled (verbs.h `verbs_get_ctx_op`).
    let (sz, op) = unsafe { ((*vctx).sz, (*vctx).create_srq_ex) };
    match op {
        // SAFETY: the provider's own create_srq_ex, on its context.
        Some(f) if sz >= need => unsafe { f(ctx, attr) },
        _ => ptr::null_mut(),
    }
}

impl Srq {
    /// A basic SRQ of at least `max_wr` WQEs of `max_sge` SGEs.
    pub fn create(ctx: &Context, pd: &Pd, max_wr: u32, max_sge: u32) -> Result<Self, VerbsError> {
        Self::create_inner(ctx, pd, max_wr, max_sge, None)
    }

    /// An XRC SRQ in `xrcd`, completing on `cq`.
    pub fn create_xrc(
        ctx: &Context,
        pd: &Pd,
        xrcd: &Xrcd,
        cq: &Cq,
        max_wr: u32,
        max_sge: u32,
    ) -> Result<Self, VerbsError> {
        Self::create_inner(ctx, pd, max_wr, max_sge, Some((xrcd, cq)))
    }

    fn create_inner(
        ctx: &Context,
        pd: &Pd,
        max_wr: u32,
        max_sge: u32,
        xrc: Option<(&Xrcd, &Cq)>,
    ) -> Result<Self, VerbsError> {
        use rdma_sys::ibv_srq_init_attr_mask as S;
        // SAFETY: plain C data; all-zero is valid.
        let mut attr: rdma_sys::ibv_srq_init_attr_ex = unsafe { core::mem::zeroed() };
        attr.attr.max_wr = max_wr;
        attr.attr.max_sge = max_sge;
        attr.comp_mask = S::IBV_SRQ_INIT_ATTR_TYPE.0 | S::IBV_SRQ_INIT_ATTR_PD.0;
        attr.pd = pd.inner.ptr;
        if let Some((x, cq)) = xrc {
            attr.srq_type = rdma_sys::ibv_srq_type::IBV_SRQT_XRC;
            attr.comp_mask |= S::IBV_SRQ_INIT_ATTR_XRCD.0 | S::IBV_SRQ_INIT_ATTR_CQ.0;
            attr.xrcd = x.inner.ptr;
            attr.cq = cq.inner.as_cq();
        } else {
            attr.srq_type = rdma_sys::ibv_srq_type::IBV_SRQT_BASIC;
        }
        // SAFETY: the context, PD, XRC domain and CQ are alive (held
        // below); `attr` is valid for the call.
        let ptr = unsafe { create_srq_ex(ctx.inner.ptr, &mut attr) };
        if ptr.is_null() {
            return Err(VerbsError::last("ibv_create_srq_ex"));
        }
        Ok(Srq {
            inner: Arc::new(SrqInner {
                ptr,
                _pd: pd.inner.clone(),
                _cq: xrc.map(|(_, cq)| cq.inner.clone()),
                _xrcd: xrc.map(|(x, _)| x.inner.clone()),
            }),
        })
    }

    /// `mlx5dv_init_obj` on the SRQ, checked: ring, stride, WQE count,
    /// doorbell record and SRQ number.
    pub fn dv(&self) -> Result<parts::CheckedRq, PartsError> {
        let mut out = ffi::mlx5dv_srq {
            buf: ptr::null_mut(),
            dbrec: ptr::null_mut(),
            stride: 0,
            head: 0,
            tail: 0,
            comp_mask: ffi::MLX5DV_SRQ_MASK_SRQN,
            srqn: 0,
        };
        let mut obj = mlx5dv_obj::empty();
        obj.srq.in_ = self.inner.ptr;
        obj.srq.out = &mut out;
        // SAFETY: a live SRQ and a valid out-struct; only the SRQ pair is
        // read.
        let ret = unsafe { ffi::mlx5dv_init_obj(&mut obj, ffi::obj_type::SRQ) };
        if ret != 0 {
            return Err(PartsError::InitObj { errno: ret });
        }
        parts::check_srq(&out)
    }

    /// The raw `ibv_srq`.
    pub fn as_ptr(&self) -> *mut ibv_srq {
        self.inner.ptr
    }

    /// The SRQ ring as the backend-neutral owner (see [`Cq::core_cq`]).
    pub fn core_rq(&self) -> Result<CoreRq, VerbsError> {
        let c = self.dv()?;
        let parts = EmuRqParts {
            num: c.srqn,
            buf: c.buf,
            wqe_cnt: c.wqe_cnt,
            stride: 1 << c.wqe_shift,
            dbrec: c.dbrec,
            kind: EmuRqKind::Srq,
        };
        // SAFETY: checked by `check_srq` (non-null, aligned ring and record,
        // power-of-two count and stride) for this live SRQ, which the
        // `KeepAlive` keeps alive; the device only reads the ring.
        Ok(unsafe { CoreRq::from_parts(parts, KeepAlive::new(self.inner.clone())) })
    }
}

// ---------------------------------------------------------------------------
// Striding RQ (work queue).

#[derive(Debug)]
pub(crate) struct WqInner {
    ptr: *mut ibv_wq,
    _pd: Arc<PdInner>,
    _cq: Arc<CqInner>,
}
verbs_owner_is_send_sync!(WqInner);

impl Drop for WqInner {
    fn drop(&mut self) {
        // SAFETY: created by `Wq::create_striding`.
        destroyed("ibv_destroy_wq", unsafe {
            rdma_sys::ibv_destroy_wq(self.ptr)
        });
    }
}

/// A striding receive work queue (`mlx5dv_create_wq`).
///
/// Packets reach it only through an RSS indirection table and an RSS QP:
/// [`RssRq`] builds the three together, as DPDK's verbs Rx queues do. What
/// is here is creation, the state moves (ready, error) and the raw parts.
/// Never run: compiled only, no ConnectX here.
#[derive(Clone, Debug)]
pub struct Wq {
    inner: Arc<WqInner>,
    /// log2 bytes per stride, as created.
    log_stride_bytes: u8,
    /// log2 strides per WQE, as created.
    log_num_strides: u8,
}

impl Wq {
    /// A striding RQ of at least `max_wr` WQEs, each of
    /// `1 << log_num_strides` strides of `1 << log_stride_bytes` bytes.
    pub fn create_striding(
        ctx: &Context,
        pd: &Pd,
        cq: &Cq,
        max_wr: u32,
        log_stride_bytes: u32,
        log_num_strides: u32,
    ) -> Result<Self, VerbsError> {
        // SAFETY: plain C data; all-zero is valid.
        let mut attr: rdma_sys::ibv_wq_init_attr = unsafe { core::mem::zeroed() };
        attr.wq_type = rdma_sys::ibv_wq_type::IBV_WQT_RQ;
        attr.max_wr = max_wr;
        attr.max_sge = 1;
        attr.pd = pd.inner.ptr;
        attr.cq = cq.inner.as_cq();
        let mut dv = ffi::mlx5dv_wq_init_attr {
            comp_mask: ffi::MLX5DV_WQ_INIT_ATTR_MASK_STRIDING_RQ,
            striding_rq_attrs: ffi::mlx5dv_striding_rq_init_attr {
                single_stride_log_num_of_bytes: log_stride_bytes,
                single_wqe_log_num_of_strides: log_num_strides,
                two_byte_shift_en: 0,
            },
        };
        // SAFETY: context, PD and CQ are alive; both attribute structs are
        // valid for the call.
        let ptr = unsafe { ffi::mlx5dv_create_wq(ctx.inner.ptr, &mut attr, &mut dv) };
        if ptr.is_null() {
            return Err(VerbsError::last("mlx5dv_create_wq"));
        }
        // verbs.h's inline `ibv_create_wq` initialises these after the
        // provider call; `mlx5dv_create_wq` is that provider call.
        // SAFETY: `ptr` is the fresh WQ; nothing else uses it yet.
        unsafe {
            (*ptr).events_completed = 0;
            libc::pthread_mutex_init(ptr::addr_of_mut!((*ptr).mutex).cast(), ptr::null());
            libc::pthread_cond_init(ptr::addr_of_mut!((*ptr).cond).cast(), ptr::null());
        }
        Ok(Wq {
            inner: Arc::new(WqInner {
                ptr,
                _pd: pd.inner.clone(),
                _cq: cq.inner.clone(),
            }),
            log_stride_bytes: u8::try_from(log_stride_bytes)
                .map_err(|_| VerbsError::Invalid("log stride bytes"))?,
            log_num_strides: u8::try_from(log_num_strides)
                .map_err(|_| VerbsError::Invalid("log strides per WQE"))?,
        })
    }

    /// A striding RQ as [`StridingWqAttr`] describes it (checked against
    /// the device's caps already).
    pub fn create_with(
        ctx: &Context,
        pd: &Pd,
        cq: &Cq,
        attr: StridingWqAttr,
    ) -> Result<Self, VerbsError> {
        Self::create_striding(
            ctx,
            pd,
            cq,
            attr.max_wr,
            u32::from(attr.log_stride_bytes),
            u32::from(attr.log_num_strides),
        )
    }

    /// `ibv_modify_wq` to `state` (`IBV_WQ_ATTR_STATE` only).
    fn modify_state(&self, state: rdma_sys::ibv_wq_state::Type) -> Result<(), VerbsError> {
        // SAFETY: plain C data; all-zero is valid.
        let mut attr: rdma_sys::ibv_wq_attr = unsafe { core::mem::zeroed() };
        attr.attr_mask = rdma_sys::ibv_wq_attr_mask::IBV_WQ_ATTR_STATE.0;
        attr.wq_state = state;
        // SAFETY: a live WQ and a valid attribute struct. rdma-sys's
        // wrapper returns EOPNOTSUPP when the context has no `modify_wq`
        // (verbs.h `ibv_modify_wq`); libmlx5 sets it (`mlx5_modify_wq`).
        let ret = unsafe { rdma_sys::ibv_modify_wq(self.inner.ptr, &mut attr) };
        if ret != 0 {
            return Err(VerbsError::ret("ibv_modify_wq", ret));
        }
        Ok(())
    }

    /// Moves the WQ to ready (`ibv_modify_wq`, `IBV_WQS_RDY`). From RESET,
    /// libmlx5 also zeroes the doorbell record and the ring indices
    /// (`mlx5_modify_wq`), so the core's counters start at 0 after it.
    pub fn ready(&self) -> Result<(), VerbsError> {
        self.modify_state(rdma_sys::ibv_wq_state::IBV_WQS_RDY)
    }

    /// Moves the WQ to the error state (`ibv_modify_wq`, `IBV_WQS_ERR`):
    /// the device flushes the posted WQEs with error completions, as DPDK
    /// does to stop an Rx queue (`mlx5_ibv_modify_wq` with
    /// `MLX5_RXQ_MOD_RDY2ERR`, drivers/net/mlx5/linux/mlx5_verbs.c).
    pub fn to_error(&self) -> Result<(), VerbsError> {
        self.modify_state(rdma_sys::ibv_wq_state::IBV_WQS_ERR)
    }

    /// The state libibverbs last set (`ibv_wq.state`, updated by a
    /// successful `ibv_modify_wq`, libibverbs `ibv_cmd_modify_wq`). There
    /// is no query verb for a WQ, so a WQ the device moved to error by
    /// itself still reads as ready here.
    pub fn state(&self) -> rdma_sys::ibv_wq_state::Type {
        // SAFETY: a live WQ; `state` is a plain field, written only by
        // libibverbs on the control path (`&self` methods of this owner).
        unsafe { (*self.inner.ptr).state }
    }

    /// The WQ number (`ibv_wq.wq_num`: the RQ number the kernel returned,
    /// libibverbs `ibv_cmd_create_wq`).
    pub fn wqn(&self) -> u32 {
        // SAFETY: a live WQ; `wq_num` is a plain field set at creation.
        unsafe { (*self.inner.ptr).wq_num }
    }

    /// The striding RQ as the backend-neutral owner (see [`Cq::core_cq`]):
    /// the same [`EmuRqKind::Striding`] the emulated device hands out,
    /// numbered with the WQ number. The ring must be of 32-byte WQEs (a
    /// next segment and one data segment, libmlx5 `mlx5_calc_rwq_size`
    /// with one SGE); a stride of 64 (libmlx5's WQ signature, env
    /// `MLX5_RWQ_SIGNATURE`) is refused.
    pub fn core_rq(&self) -> Result<CoreRq, VerbsError> {
        let c = self.dv()?;
        let stride = 1u32 << c.wqe_shift;
        if stride as usize != mlx5dp::prm::MprqWqe::SIZE {
            return Err(PartsError::BadSize {
                field: "mlx5dv_rwq.stride (a striding WQE is 32 bytes)",
                value: stride,
            }
            .into());
        }
        let parts = EmuRqParts {
            num: self.wqn(),
            buf: c.buf,
            wqe_cnt: c.wqe_cnt,
            stride,
            dbrec: c.dbrec,
            kind: EmuRqKind::Striding {
                log_num_strides: self.log_num_strides,
                log_stride_bytes: self.log_stride_bytes,
            },
        };
        // SAFETY: checked by `check_rwq` (non-null, aligned ring and
        // record, power-of-two count and stride) for this live WQ, which
        // the `KeepAlive` keeps alive; the device only reads the ring.
        Ok(unsafe { CoreRq::from_parts(parts, KeepAlive::new(self.inner.clone())) })
    }

    /// `mlx5dv_init_obj` on the WQ, checked.
    pub fn dv(&self) -> Result<parts::CheckedRq, PartsError> {
        let mut out = ffi::mlx5dv_rwq {
            buf: ptr::null_mut(),
            dbrec: ptr::null_mut(),
            wqe_cnt: 0,
            stride: 0,
            comp_mask: 0,
        };
        let mut obj = mlx5dv_obj::empty();
        obj.rwq.in_ = self.inner.ptr;
        obj.rwq.out = &mut out;
        // SAFETY: a live WQ and a valid out-struct; only the RWQ pair is
        // read.
        let ret = unsafe { ffi::mlx5dv_init_obj(&mut obj, ffi::obj_type::RWQ) };
        if ret != 0 {
            return Err(PartsError::InitObj { errno: ret });
        }
        parts::check_rwq(&out)
    }

    /// The core's view of the ring (see [`RecvParts`]).
    ///
    /// # Safety
    ///
    /// As for [`Qp::recv_parts`].
    pub unsafe fn recv_parts(&self) -> Result<RecvParts<'_>, PartsError> {
        let c = self.dv()?;
        // SAFETY: forwarded to the caller.
        unsafe { RecvParts::from_checked(&c) }
    }
}

/// The WQ attributes a striding RQ of `wqe_cnt` WQEs of
/// `1 << log_num_strides` strides of `1 << log_stride_bytes` bytes asks
/// for, checked against the device's caps and the core's limits (pure;
/// tested).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StridingWqAttr {
    /// `ibv_wq_init_attr.max_wr`: the WQE count. libmlx5 allocates
    /// `roundup_pow_of_two(max_wr)` WQEs of 32 bytes, at least 64 bytes
    /// (`mlx5_calc_rwq_size`), so a power of two of 2 or more is what it
    /// gets and 1 becomes 2; the core reads the real count from the parts.
    pub max_wr: u32,
    /// `single_stride_log_num_of_bytes`: log2 bytes per stride, the real
    /// value (libmlx5 `create_wq` checks it against the caps as is; the
    /// kernel subtracts the PRM's base of 6).
    pub log_stride_bytes: u8,
    /// `single_wqe_log_num_of_strides`: log2 strides per WQE, the real
    /// value (the PRM's base of 9 is the kernel's business).
    pub log_num_strides: u8,
}

impl StridingWqAttr {
    /// Checks `RqInit::Striding { wqe_cnt, log_num_strides,
    /// log_stride_bytes }` against `caps` (`None`: the device reported no
    /// `MLX5DV_CONTEXT_MASK_STRIDING_RQ`) and `max_qp_wr`.
    ///
    /// Refused with [`VerbsError::Unsupported`]: no striding RQ caps, no
    /// RAW_PACKET bit in `supported_qpts` (the kernel reports
    /// `BIT(IB_QPT_RAW_PACKET)`), a stride size or stride count outside
    /// the caps (libmlx5 `create_wq` would fail with EINVAL). Refused with
    /// [`VerbsError::Invalid`]: a WQE count that is zero, not a power of
    /// two, above `max_qp_wr` or above 2^16 (the core's stride accounting,
    /// `mlx5dp::rq::StridingRq::new`), and parameters the core cannot post
    /// (more than 2^16 strides, or a WQE buffer of 2^31 bytes or more).
    pub fn new(
        wqe_cnt: u32,
        log_num_strides: u8,
        log_stride_bytes: u8,
        caps: Option<&StridingRqCaps>,
        max_qp_wr: u32,
    ) -> Result<Self, VerbsError> {
        let caps = caps.ok_or(VerbsError::Unsupported(
            "a striding RQ on this device (no MLX5DV_CONTEXT_MASK_STRIDING_RQ caps)",
        ))?;
        if caps.supported_qpts & (1 << rdma_sys::ibv_qp_type::IBV_QPT_RAW_PACKET) == 0 {
            return Err(VerbsError::Unsupported(
                "a striding RQ for RAW_PACKET (not in mlx5dv_striding_rq_caps.supported_qpts)",
            ));
        }
        if !(caps.min_log_stride_bytes..=caps.max_log_stride_bytes)
            .contains(&u32::from(log_stride_bytes))
        {
            return Err(VerbsError::Unsupported(
                "this stride size (outside mlx5dv_striding_rq_caps)",
            ));
        }
        if !(caps.min_log_num_strides..=caps.max_log_num_strides)
            .contains(&u32::from(log_num_strides))
        {
            return Err(VerbsError::Unsupported(
                "this many strides per WQE (outside mlx5dv_striding_rq_caps)",
            ));
        }
        if log_num_strides > 16 || u32::from(log_num_strides) + u32::from(log_stride_bytes) > 30 {
            return Err(VerbsError::Invalid(
                "striding parameters the core cannot post (at most 2^16 strides, 2^30 bytes per WQE)",
            ));
        }
        if !wqe_cnt.is_power_of_two() || wqe_cnt > max_qp_wr || wqe_cnt > 1 << 16 {
            return Err(VerbsError::Invalid(
                "a striding RQ's WQE count is a power of two of at most max_qp_wr and 2^16",
            ));
        }
        Ok(Self {
            max_wr: wqe_cnt,
            log_stride_bytes,
            log_num_strides,
        })
    }

    /// The `mlx5dv_wq_init_attr` (no two-byte shift: the core expects each
    /// packet at the start of its first stride; DPDK's
    /// `MLX5_MPRQ_TWO_BYTE_SHIFT` is 0 too).
    pub fn dv(&self) -> ffi::mlx5dv_wq_init_attr {
        ffi::mlx5dv_wq_init_attr {
            comp_mask: ffi::MLX5DV_WQ_INIT_ATTR_MASK_STRIDING_RQ,
            striding_rq_attrs: ffi::mlx5dv_striding_rq_init_attr {
                single_stride_log_num_of_bytes: u32::from(self.log_stride_bytes),
                single_wqe_log_num_of_strides: u32::from(self.log_num_strides),
                two_byte_shift_en: 0,
            },
        }
    }
}

// ---------------------------------------------------------------------------
// RSS: indirection table and RSS QP (DPDK drivers/net/mlx5/linux/
// mlx5_verbs.c `mlx5_ibv_ind_table_new`, `mlx5_ibv_hrxq_new`).

/// The Toeplitz key of every RSS QP here: the emulated device's
/// ([`crate::emu::eth::TOEPLITZ_KEY`], Microsoft's RSS specification key),
/// so that a CQE's `rss_hash_result` means the same on both backends.
/// mlx5 takes exactly 40 bytes (Linux `create_rss_raw_qp_tir` refuses any
/// other `rx_key_len`).
pub const RSS_KEY: [u8; 40] = crate::emu::eth::TOEPLITZ_KEY;

/// The fields the RSS QP hashes: IPv4 source and destination, UDP source
/// and destination ports (`IBV_RX_HASH_*`), in the emulator's order
/// (addresses, then ports; `crate::emu::eth::rx_info`).
///
/// The emulator hashes the ports of TCP and UDP alike and the addresses of
/// IPv4 and IPv6 alike; one mlx5 TIR cannot: Linux `create_rss_raw_qp_tir`
/// (drivers/infiniband/hw/mlx5/qp.c) refuses a mask with both IPv4 and
/// IPv6 fields or with both TCP and UDP ports ("only one l4 protocol"),
/// since the TIR's field selector has one `l3_prot_type` and one
/// `l4_prot_type`. IPv4/UDP is the one chosen (raw-Ethernet traffic of
/// the scenarios and perf tools is UDP). For IPv4/UDP frames both
/// backends report the same hash; for IPv6, TCP and non-IP frames what
/// the device reports from this TIR has not been observed here (the
/// emulator hashes IPv6 addresses and TCP ports, and reports 0 for non-IP).
///
/// The CQE's `rss_hash_type` for an IPv4/UDP frame is then `0x84`:
/// bits 3:2 = 01 (IPv4) and bits 7:6 = 10 (UDP) (Linux
/// include/linux/mlx5/device.h, `CQE_RSS_HTYPE_IP`, `CQE_RSS_HTYPE_L4`:
/// [`mlx5dp::prm::rss_hash`]).
/// The emulator leaves `rss_hash_type` 0.
pub fn rss_hash_fields() -> u64 {
    use rdma_sys::ibv_rx_hash_fields as F;
    u64::from(
        (F::IBV_RX_HASH_SRC_IPV4
            | F::IBV_RX_HASH_DST_IPV4
            | F::IBV_RX_HASH_SRC_PORT_UDP
            | F::IBV_RX_HASH_DST_PORT_UDP)
            .0,
    )
}

/// The CQE `rss_hash_type` an IPv4/UDP frame gets from [`rss_hash_fields`]
/// (see there).
pub const RSS_HASH_TYPE_IPV4_UDP: u8 = mlx5dp::prm::rss_hash::IPV4 | mlx5dp::prm::rss_hash::UDP;

/// The `ibv_rx_hash_conf` of an RSS QP: Toeplitz over [`rss_hash_fields`]
/// with `key` (pure; tested). `key` must outlive the `ibv_create_qp_ex`
/// call that reads the returned struct (libmlx5 `mlx5_cmd_create_rss_qp`
/// copies it into the command).
pub fn rx_hash_conf(key: &mut [u8; 40]) -> rdma_sys::ibv_rx_hash_conf {
    rdma_sys::ibv_rx_hash_conf {
        rx_hash_function: rdma_sys::ibv_rx_hash_function_flags::IBV_RX_HASH_FUNC_TOEPLITZ.0 as u8,
        rx_hash_key_len: key.len() as u8,
        rx_hash_key: key.as_mut_ptr(),
        rx_hash_fields_mask: rss_hash_fields(),
    }
}

#[derive(Debug)]
pub(crate) struct IndTableInner {
    ptr: *mut rdma_sys::ibv_rwq_ind_table,
    _wq: Arc<WqInner>,
    _ctx: Arc<ContextInner>,
}
verbs_owner_is_send_sync!(IndTableInner);

impl Drop for IndTableInner {
    fn drop(&mut self) {
        // SAFETY: created by `RwqIndTable::create`; the RSS QP on it holds
        // an `Arc` to this owner, so it is gone; the WQ (`_wq`, a field
        // dropped after this body) is still alive. rdma-sys's wrapper
        // returns EOPNOTSUPP without calling anything when the context has
        // no `destroy_rwq_ind_table` (libmlx5 sets it).
        destroyed("ibv_destroy_rwq_ind_table", unsafe {
            rdma_sys::ibv_destroy_rwq_ind_table(self.ptr)
        });
    }
}

/// An RSS indirection table over one WQ (`ibv_create_rwq_ind_table`, log
/// size 0), destroyed on drop after the RSS QP that uses it.
///
/// Never run: compiled only, no ConnectX here.
#[derive(Clone, Debug)]
pub struct RwqIndTable {
    inner: Arc<IndTableInner>,
}

impl RwqIndTable {
    /// A table of one entry, `wq` (DPDK `mlx5_ibv_ind_table_new` with one
    /// queue: `log_ind_tbl_size` 0, `comp_mask` 0).
    pub fn create(ctx: &Context, wq: &Wq) -> Result<Self, VerbsError> {
        let mut wqs: [*mut ibv_wq; 1] = [wq.inner.ptr];
        // SAFETY: plain C data; all-zero is valid.
        let mut attr: rdma_sys::ibv_rwq_ind_table_init_attr = unsafe { core::mem::zeroed() };
        attr.log_ind_tbl_size = 0;
        attr.ind_tbl = wqs.as_mut_ptr();
        attr.comp_mask = 0;
        // SAFETY: the context and the WQ are alive (held below); `attr`
        // and the one-entry array it points to (`1 << log_ind_tbl_size`
        // entries, verbs.h) live for the call, which copies the WQ handles
        // (libibverbs `ibv_cmd_create_rwq_ind_table`). rdma-sys's wrapper
        // returns `None` (errno EOPNOTSUPP) when the context has no
        // `create_rwq_ind_table` (verbs.h `ibv_create_rwq_ind_table`).
        let ptr = unsafe { rdma_sys::ibv_create_rwq_ind_table(ctx.inner.ptr, &mut attr) }
            .unwrap_or(ptr::null_mut());
        if ptr.is_null() {
            return Err(VerbsError::last("ibv_create_rwq_ind_table"));
        }
        Ok(Self {
            inner: Arc::new(IndTableInner {
                ptr,
                _wq: wq.inner.clone(),
                _ctx: ctx.inner.clone(),
            }),
        })
    }
}

#[derive(Debug)]
pub(crate) struct RssQpInner {
    ptr: *mut ibv_qp,
    _table: Arc<IndTableInner>,
    _pd: Arc<PdInner>,
}
verbs_owner_is_send_sync!(RssQpInner);

impl Drop for RssQpInner {
    fn drop(&mut self) {
        // SAFETY: created by `RssQp::create`; flow rules on it hold an
        // `Arc` to this owner, so they are gone; the table (`_table`,
        // dropped after this body) is still alive.
        destroyed("ibv_destroy_qp", unsafe {
            rdma_sys::ibv_destroy_qp(self.ptr)
        });
    }
}

/// An RSS QP (`ibv_create_qp_ex`, `IBV_QPT_RAW_PACKET` with
/// `IBV_QP_INIT_ATTR_IND_TABLE | IBV_QP_INIT_ATTR_RX_HASH`): a TIR that
/// hashes frames over an indirection table, with no send queue and no ring
/// of its own. Flow rules steer to it ([`Flow::eth_rss`]).
///
/// It has no states: libmlx5 refuses to modify or query it
/// (`mlx5_modify_qp`, `mlx5_query_qp` return EOPNOTSUPP for `rss_qp`,
/// providers/mlx5/verbs.c), and it receives as soon as it exists while its
/// WQ is ready. Its `qp_num` is 0 (Linux `create_rss_raw_qp_tir`: "qpn is
/// reserved for that QP"), so it is named by its WQ's number.
///
/// Never run: compiled only, no ConnectX here.
#[derive(Debug)]
pub struct RssQp {
    inner: Arc<RssQpInner>,
    port: PortInfo,
}

impl RssQp {
    /// An RSS QP over `table` in `pd`, hashing as [`rx_hash_conf`] says
    /// (DPDK `mlx5_ibv_hrxq_new`). No CQ: the WQs carry theirs, and the
    /// kernel refuses a send CQ (`create_rss_raw_qp_tir`) and libibverbs
    /// any receive CQ, SRQ or receive capacity (`ibv_icmd_create_qp` with
    /// `IBV_QP_INIT_ATTR_IND_TABLE`).
    pub fn create(
        ctx: &Context,
        pd: &Pd,
        table: &RwqIndTable,
        port: PortInfo,
    ) -> Result<Self, VerbsError> {
        use rdma_sys::ibv_qp_init_attr_mask as I;
        let mut key = RSS_KEY;
        // SAFETY: plain C data; all-zero is valid (null pointers, no caps).
        let mut attr: ibv_qp_init_attr_ex = unsafe { core::mem::zeroed() };
        attr.qp_type = rdma_sys::ibv_qp_type::IBV_QPT_RAW_PACKET;
        attr.comp_mask = I::IBV_QP_INIT_ATTR_PD.0
            | I::IBV_QP_INIT_ATTR_IND_TABLE.0
            | I::IBV_QP_INIT_ATTR_RX_HASH.0;
        attr.pd = pd.inner.ptr;
        attr.rwq_ind_tbl = table.inner.ptr;
        attr.rx_hash_conf = rx_hash_conf(&mut key);
        // SAFETY: the context, PD and table are alive (held below); `attr`
        // and the key it points to live for the call. The mask is not PD
        // alone, so rdma-sys's wrapper goes to the context's
        // `create_qp_ex` (verbs.h `ibv_create_qp_ex`), or returns `None`
        // (errno EOPNOTSUPP) when there is none.
        let ptr = unsafe { rdma_sys::ibv_create_qp_ex(ctx.inner.ptr, &mut attr) }
            .unwrap_or(ptr::null_mut());
        if ptr.is_null() {
            return Err(VerbsError::last("ibv_create_qp_ex (RSS)"));
        }
        Ok(Self {
            inner: Arc::new(RssQpInner {
                ptr,
                _table: table.inner.clone(),
                _pd: pd.inner.clone(),
            }),
            port,
        })
    }

    /// `ibv_qp.qp_num` (0 on the kernels read here; see the type's
    /// documentation).
    pub fn qp_num(&self) -> u32 {
        // SAFETY: a live QP; `qp_num` is a plain field.
        unsafe { (*self.inner.ptr).qp_num }
    }

    /// The port flow rules to it match on.
    pub fn port(&self) -> PortInfo {
        self.port
    }
}

/// A striding receive queue reached through RSS, as DPDK's verbs Rx path
/// builds one queue (drivers/net/mlx5/linux/mlx5_verbs.c): the striding
/// WQ on a CQ, moved to ready (`mlx5_rxq_ibv_wq_create`,
/// `mlx5_rxq_ibv_obj_new`), a one-entry indirection table over it
/// (`mlx5_ibv_ind_table_new`) and an RSS QP over the table
/// (`mlx5_ibv_hrxq_new`). Frames reach it through flow rules on the RSS
/// QP ([`RssRq::flow_eth`]).
///
/// Teardown: flow rules (each holds the RSS QP), then the RSS QP, then
/// the table, then the WQ (each holds the next through an `Arc`), then the
/// CQ and PD; the core's [`CoreRq`] keeps the WQ (its ring) alive on its
/// own.
///
/// Never run: compiled only, no ConnectX here.
#[derive(Debug)]
pub struct RssRq {
    qp: RssQp,
    table: RwqIndTable,
    wq: Wq,
}

impl RssRq {
    /// Creates the WQ on `cq` as `attr` says, moves it to ready, then
    /// creates the table and the RSS QP, in DPDK's order.
    pub fn create(
        ctx: &Context,
        pd: &Pd,
        cq: &Cq,
        attr: StridingWqAttr,
        port: PortInfo,
    ) -> Result<Self, VerbsError> {
        let wq = Wq::create_with(ctx, pd, cq, attr)?;
        wq.ready()?;
        let table = RwqIndTable::create(ctx, &wq)?;
        let qp = RssQp::create(ctx, pd, &table, port)?;
        Ok(Self { qp, table, wq })
    }

    /// The WQ.
    pub fn wq(&self) -> &Wq {
        &self.wq
    }

    /// The indirection table.
    pub fn table(&self) -> &RwqIndTable {
        &self.table
    }

    /// The RSS QP.
    pub fn qp(&self) -> &RssQp {
        &self.qp
    }

    /// The number this queue goes by: the WQ's (see [`RssQp`] for why not
    /// the RSS QP's).
    pub fn num(&self) -> u32 {
        self.wq.wqn()
    }

    /// A flow rule to the RSS QP (see [`Flow::eth`]).
    pub fn flow_eth(
        &self,
        dst_mac: Option<[u8; 6]>,
        ether_type: Option<u16>,
        tag: Option<u32>,
    ) -> Result<Flow, VerbsError> {
        Flow::eth_rss(&self.qp, dst_mac, ether_type, tag)
    }
}

// ---------------------------------------------------------------------------
// Queue pairs.

/// QP transport.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QpKind {
    /// Reliable connected.
    Rc,
    /// Unreliable connected.
    Uc,
    /// Unreliable datagram.
    Ud,
    /// XRC initiator (`IBV_QPT_XRC_SEND`).
    XrcIni,
    /// XRC target (`IBV_QPT_XRC_RECV`): no SQ, receives through an XRC SRQ.
    XrcTgt,
    /// Raw Ethernet (`IBV_QPT_RAW_PACKET`).
    RawPacket,
}

impl QpKind {
    /// `enum ibv_qp_type`.
    pub fn ibv(self) -> u32 {
        use rdma_sys::ibv_qp_type as T;
        match self {
            QpKind::Rc => T::IBV_QPT_RC,
            QpKind::Uc => T::IBV_QPT_UC,
            QpKind::Ud => T::IBV_QPT_UD,
            QpKind::XrcIni => T::IBV_QPT_XRC_SEND,
            QpKind::XrcTgt => T::IBV_QPT_XRC_RECV,
            QpKind::RawPacket => T::IBV_QPT_RAW_PACKET,
        }
    }

    /// The core's QP type (`None`: no send queue).
    pub fn core(self) -> Option<sq::QpType> {
        Some(match self {
            QpKind::Rc => sq::QpType::Rc,
            QpKind::Uc => sq::QpType::Uc,
            QpKind::Ud => sq::QpType::Ud,
            QpKind::XrcIni => sq::QpType::Xrc,
            QpKind::RawPacket => sq::QpType::RawPacket,
            QpKind::XrcTgt => return None,
        })
    }
}

/// The state a transition goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// RESET (from any state).
    Reset,
    /// RESET → INIT.
    Init,
    /// INIT → RTR.
    Rtr,
    /// RTR → RTS.
    Rts,
    /// Any → ERR.
    Err,
}

/// The `ibv_modify_qp` attribute mask each QP type needs for a transition
/// (the kernel's `ib_modify_qp_is_ok` table, required attributes only).
pub fn transition_mask(kind: QpKind, to: Target) -> u32 {
    let m = |x: M| x.0;
    let state = m(M::IBV_QP_STATE);
    let connected_rtr =
        m(M::IBV_QP_AV) | m(M::IBV_QP_PATH_MTU) | m(M::IBV_QP_DEST_QPN) | m(M::IBV_QP_RQ_PSN);
    let responder = m(M::IBV_QP_MAX_DEST_RD_ATOMIC) | m(M::IBV_QP_MIN_RNR_TIMER);
    let requester = m(M::IBV_QP_TIMEOUT)
        | m(M::IBV_QP_RETRY_CNT)
        | m(M::IBV_QP_RNR_RETRY)
        | m(M::IBV_QP_SQ_PSN)
        | m(M::IBV_QP_MAX_QP_RD_ATOMIC);
    state
        | match (kind, to) {
            (_, Target::Reset | Target::Err) => 0,
            (QpKind::RawPacket, Target::Init) => m(M::IBV_QP_PORT),
            (QpKind::RawPacket, Target::Rtr | Target::Rts) => 0,
            (QpKind::Ud, Target::Init) => {
                m(M::IBV_QP_PKEY_INDEX) | m(M::IBV_QP_PORT) | m(M::IBV_QP_QKEY)
            }
            (QpKind::Ud, Target::Rtr) => 0,
            (QpKind::Ud | QpKind::Uc, Target::Rts) => m(M::IBV_QP_SQ_PSN),
            (_, Target::Init) => {
                m(M::IBV_QP_PKEY_INDEX) | m(M::IBV_QP_PORT) | m(M::IBV_QP_ACCESS_FLAGS)
            }
            (QpKind::Uc | QpKind::XrcIni, Target::Rtr) => connected_rtr,
            (QpKind::Rc | QpKind::XrcTgt, Target::Rtr) => connected_rtr | responder,
            (QpKind::XrcTgt, Target::Rts) => m(M::IBV_QP_TIMEOUT) | m(M::IBV_QP_SQ_PSN),
            (QpKind::Rc | QpKind::XrcIni, Target::Rts) => requester,
        }
}

/// How a QP is created.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpOptions {
    /// Transport.
    pub kind: QpKind,
    /// Send work requests (0: no SQ; XRC targets have none).
    pub max_send_wr: u32,
    /// Receive work requests (0 with an SRQ or without an RQ).
    pub max_recv_wr: u32,
    /// SGEs per send.
    pub max_send_sge: u32,
    /// SGEs per receive.
    pub max_recv_sge: u32,
    /// Inline bytes per send.
    pub max_inline_data: u32,
    /// Every send requests a CQE.
    pub sq_sig_all: bool,
    /// Largest TSO header (RAW_PACKET; 0: no TSO).
    pub max_tso_header: u16,
}

impl QpOptions {
    /// A QP of `kind` with 256 send and receive WQEs, 4 SGEs each way,
    /// 64 inline bytes.
    pub fn new(kind: QpKind) -> Self {
        let has_sq = kind != QpKind::XrcTgt;
        let has_rq = !matches!(kind, QpKind::XrcTgt | QpKind::XrcIni);
        Self {
            kind,
            max_send_wr: if has_sq { 256 } else { 0 },
            max_recv_wr: if has_rq { 256 } else { 0 },
            max_send_sge: if has_sq { 4 } else { 0 },
            max_recv_sge: if has_rq { 4 } else { 0 },
            max_inline_data: if has_sq { 64 } else { 0 },
            sq_sig_all: false,
            max_tso_header: 0,
        }
    }
}

/// What a connected QP needs of its peer (exchanged out of band).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// QP number.
    pub qpn: u32,
    /// LID (InfiniBand).
    pub lid: u16,
    /// GID (RoCE, or global routing).
    pub gid: [u8; 16],
    /// First packet sequence number the peer sends.
    pub psn: u32,
}

/// Connection attributes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectOptions {
    /// Remote access rights (`IBV_ACCESS_*`).
    pub access: u32,
    /// Path MTU (`enum ibv_mtu`).
    pub mtu: u32,
    /// Transport retries.
    pub retry_cnt: u8,
    /// RNR retries (7 = infinite).
    pub rnr_retry: u8,
    /// Local ACK timeout exponent.
    pub timeout: u8,
    /// Minimum RNR NAK timer.
    pub min_rnr_timer: u8,
    /// Outstanding RDMA reads/atomics each way.
    pub rd_atomic: u8,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        Self {
            access: rdma_sys::ibv_access_flags::IBV_ACCESS_LOCAL_WRITE.0
                | rdma_sys::ibv_access_flags::IBV_ACCESS_REMOTE_WRITE.0
                | rdma_sys::ibv_access_flags::IBV_ACCESS_REMOTE_READ.0
                | rdma_sys::ibv_access_flags::IBV_ACCESS_REMOTE_ATOMIC.0,
            mtu: rdma_sys::ibv_mtu::IBV_MTU_1024,
            retry_cnt: 7,
            rnr_retry: 7,
            timeout: 14,
            min_rnr_timer: 12,
            rd_atomic: 1,
        }
    }
}

/// Who a QP talks to; kept so that [`Qp::recover`] can bring it up again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Peer {
    /// RAW_PACKET: nobody in particular.
    Raw,
    /// UD: any QP with this Q_Key.
    Datagram {
        /// Q_Key.
        qkey: u32,
    },
    /// RC, UC, XRC: one remote QP.
    Connected {
        /// The peer.
        remote: Endpoint,
        /// Our first PSN.
        local_psn: u32,
        /// Attributes.
        opts: ConnectOptions,
    },
}

#[derive(Debug)]
pub(crate) struct QpInner {
    ptr: *mut ibv_qp,
    _pd: Option<Arc<PdInner>>,
    _send_cq: Option<Arc<CqInner>>,
    _recv_cq: Option<Arc<CqInner>>,
    _srq: Option<Arc<SrqInner>>,
    _xrcd: Option<Arc<XrcdInner>>,
}
verbs_owner_is_send_sync!(QpInner);

impl Drop for QpInner {
    fn drop(&mut self) {
        // SAFETY: created by `Qp::create`; flow rules on it hold an `Arc`.
        destroyed("ibv_destroy_qp", unsafe {
            rdma_sys::ibv_destroy_qp(self.ptr)
        });
    }
}

/// What the provider granted a QP (`ibv_qp_cap` after creation: the
/// device-level "max inline" is only known this way).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QpCaps {
    /// Send work requests.
    pub max_send_wr: u32,
    /// Receive work requests.
    pub max_recv_wr: u32,
    /// SGEs per send.
    pub max_send_sge: u32,
    /// SGEs per receive.
    pub max_recv_sge: u32,
    /// Inline bytes per send.
    pub max_inline_data: u32,
}

/// A queue pair (`mlx5dv_create_qp`).
#[derive(Debug)]
pub struct Qp {
    inner: Arc<QpInner>,
    opts: QpOptions,
    /// The capabilities the provider granted.
    cap: QpCaps,
    port: PortInfo,
    peer: Option<Peer>,
}

/// What else a QP is created on.
#[derive(Clone, Copy, Debug, Default)]
pub struct QpOn<'a> {
    /// Send CQ (required unless XRC target).
    pub send_cq: Option<&'a Cq>,
    /// Receive CQ.
    pub recv_cq: Option<&'a Cq>,
    /// SRQ to receive through.
    pub srq: Option<&'a Srq>,
    /// XRC domain (XRC target).
    pub xrcd: Option<&'a Xrcd>,
}

impl Qp {
    /// Creates a QP (in RESET) on `port` (from [`Context::query_port`]).
    pub fn create(
        ctx: &Context,
        pd: &Pd,
        opts: QpOptions,
        on: QpOn<'_>,
        port: PortInfo,
    ) -> Result<Self, VerbsError> {
        use rdma_sys::ibv_qp_init_attr_mask as I;
        // SAFETY: plain C data; all-zero is valid (null pointers).
        let mut attr: ibv_qp_init_attr_ex = unsafe { core::mem::zeroed() };
        attr.qp_type = opts.kind.ibv();
        attr.sq_sig_all = i32::from(opts.sq_sig_all);
        attr.cap.max_send_wr = opts.max_send_wr;
        attr.cap.max_recv_wr = opts.max_recv_wr;
        attr.cap.max_send_sge = opts.max_send_sge;
        attr.cap.max_recv_sge = opts.max_recv_sge;
        attr.cap.max_inline_data = opts.max_inline_data;
        attr.send_cq = on.send_cq.map_or(ptr::null_mut(), Cq::as_ptr);
        attr.recv_cq = on.recv_cq.map_or(ptr::null_mut(), Cq::as_ptr);
        attr.srq = on.srq.map_or(ptr::null_mut(), Srq::as_ptr);
        let keep_pd = if opts.kind == QpKind::XrcTgt {
            let x = on
                .xrcd
                .ok_or(VerbsError::Invalid("an XRC target QP needs an XRC domain"))?;
            attr.comp_mask = I::IBV_QP_INIT_ATTR_XRCD.0;
            attr.xrcd = x.inner.ptr;
            None
        } else {
            if on.send_cq.is_none() {
                return Err(VerbsError::Invalid(
                    "a QP with a send queue needs a send CQ",
                ));
            }
            attr.comp_mask = I::IBV_QP_INIT_ATTR_PD.0;
            attr.pd = pd.inner.ptr;
            Some(pd.inner.clone())
        };
        if opts.max_tso_header > 0 {
            attr.comp_mask |= I::IBV_QP_INIT_ATTR_MAX_TSO_HEADER.0;
            attr.max_tso_header = opts.max_tso_header;
        }
        let mut dv = ffi::mlx5dv_qp_init_attr {
            comp_mask: 0,
            create_flags: 0,
            dc_init_attr: ffi::mlx5dv_dc_init_attr {
                dc_type: 0,
                u: ffi::mlx5dv_dc_init_attr_u { dct_access_key: 0 },
            },
            send_ops_flags: 0,
        };
        // SAFETY: the context and every object `attr` points to are alive
        // (and kept so by the owner built below); both structs are valid.
        let ptr = unsafe { ffi::mlx5dv_create_qp(ctx.inner.ptr, &mut attr, &mut dv) };
        if ptr.is_null() {
            return Err(VerbsError::last("mlx5dv_create_qp"));
        }
        Ok(Qp {
            inner: Arc::new(QpInner {
                ptr,
                _pd: keep_pd,
                _send_cq: on.send_cq.map(|c| c.inner.clone()),
                _recv_cq: on.recv_cq.map(|c| c.inner.clone()),
                _srq: on.srq.map(|s| s.inner.clone()),
                _xrcd: on.xrcd.map(|x| x.inner.clone()),
            }),
            opts,
            // The provider writes back what it granted.
            cap: QpCaps {
                max_send_wr: attr.cap.max_send_wr,
                max_recv_wr: attr.cap.max_recv_wr,
                max_send_sge: attr.cap.max_send_sge,
                max_recv_sge: attr.cap.max_recv_sge,
                max_inline_data: attr.cap.max_inline_data,
            },
            port,
            peer: None,
        })
    }

    /// QP number.
    pub fn qpn(&self) -> u32 {
        // SAFETY: a live QP; `qp_num` is a plain field.
        unsafe { (*self.inner.ptr).qp_num }
    }

    /// Transport.
    pub fn kind(&self) -> QpKind {
        self.opts.kind
    }

    /// What the provider granted.
    pub fn caps(&self) -> QpCaps {
        self.cap
    }

    /// What the peer needs to connect to us.
    pub fn endpoint(&self, psn: u32) -> Endpoint {
        Endpoint {
            qpn: self.qpn(),
            lid: self.port.lid,
            gid: self.port.gid,
            psn,
        }
    }

    fn modify(&self, to: Target, peer: &Peer) -> Result<(), VerbsError> {
        use rdma_sys::ibv_qp_state as S;
        // SAFETY: plain C data; all-zero is valid.
        let mut a: ibv_qp_attr = unsafe { core::mem::zeroed() };
        a.qp_state = match to {
            Target::Reset => S::IBV_QPS_RESET,
            Target::Init => S::IBV_QPS_INIT,
            Target::Rtr => S::IBV_QPS_RTR,
            Target::Rts => S::IBV_QPS_RTS,
            Target::Err => S::IBV_QPS_ERR,
        };
        a.port_num = self.port.port;
        a.pkey_index = 0;
        match *peer {
            Peer::Raw => {}
            Peer::Datagram { qkey } => a.qkey = qkey,
            Peer::Connected {
                remote,
                local_psn,
                opts,
            } => {
                a.qp_access_flags = opts.access;
                a.path_mtu = opts.mtu;
                a.dest_qp_num = remote.qpn;
                a.rq_psn = remote.psn;
                a.sq_psn = local_psn;
                a.max_dest_rd_atomic = opts.rd_atomic;
                a.max_rd_atomic = opts.rd_atomic;
                a.min_rnr_timer = opts.min_rnr_timer;
                a.timeout = opts.timeout;
                a.retry_cnt = opts.retry_cnt;
                a.rnr_retry = opts.rnr_retry;
                a.ah_attr.port_num = self.port.port;
                a.ah_attr.dlid = remote.lid;
                if self.port.ethernet || remote.lid == 0 {
                    a.ah_attr.is_global = 1;
                    a.ah_attr.grh.dgid.raw = remote.gid;
                    a.ah_attr.grh.sgid_index = self.port.gid_index;
                    a.ah_attr.grh.hop_limit = 64;
                }
            }
        }
        let mask = transition_mask(self.opts.kind, to);
        let mask = i32::try_from(mask).map_err(|_| VerbsError::Invalid("attribute mask"))?;
        // SAFETY: a live QP and a valid attribute struct.
        let ret = unsafe { rdma_sys::ibv_modify_qp(self.inner.ptr, &mut a, mask) };
        if ret != 0 {
            return Err(VerbsError::ret("ibv_modify_qp", ret));
        }
        Ok(())
    }

    /// RESET → INIT → RTR → RTS (an XRC target stops at RTR) for `peer`,
    /// which must fit the QP's type.
    pub fn bring_up(&mut self, peer: Peer) -> Result<(), VerbsError> {
        let fits = matches!(
            (self.opts.kind, &peer),
            (QpKind::RawPacket, Peer::Raw)
                | (QpKind::Ud, Peer::Datagram { .. })
                | (
                    QpKind::Rc | QpKind::Uc | QpKind::XrcIni | QpKind::XrcTgt,
                    Peer::Connected { .. }
                )
        );
        if !fits {
            return Err(VerbsError::Invalid("peer does not fit the QP type"));
        }
        self.modify(Target::Init, &peer)?;
        self.modify(Target::Rtr, &peer)?;
        if self.opts.kind != QpKind::XrcTgt {
            self.modify(Target::Rts, &peer)?;
        }
        self.peer = Some(peer);
        Ok(())
    }

    /// Connects to `remote` (RC, UC, XRC) starting our PSN at `local_psn`.
    pub fn connect(
        &mut self,
        remote: Endpoint,
        local_psn: u32,
        opts: ConnectOptions,
    ) -> Result<(), VerbsError> {
        self.bring_up(Peer::Connected {
            remote,
            local_psn,
            opts,
        })
    }

    /// Moves the QP to the error state (flushes everything outstanding).
    pub fn to_error(&self) -> Result<(), VerbsError> {
        self.modify(Target::Err, &Peer::Raw)
    }

    /// Brings the QP back to work after an error completion, as DPDK's
    /// recovery does (`mlx5_tx_error_cqe_handle`: to RESET, then up again
    /// with the same attributes).
    ///
    /// libmlx5 zeroes the doorbell record and its producer counters on the
    /// move to RESET, so the caller must first drain the CQs (the flush
    /// CQEs), then build a fresh `SendQueue` on new raw parts with
    /// `start_pi = 0` and a fresh `Rq`; the BlueFlame half to start with is
    /// the one after the old queue's last doorbell (libmlx5 does not reset
    /// it). The peer of an RC QP must be recovered too, with matching PSNs.
    pub fn recover(&mut self) -> Result<(), VerbsError> {
        let peer = self
            .peer
            .ok_or(VerbsError::Invalid("the QP was never brought up"))?;
        self.modify(Target::Reset, &peer)?;
        self.bring_up(peer)
    }

    /// `mlx5dv_init_obj` on the QP (unchecked: see [`Self::sq_raw_parts`]
    /// and [`Self::recv_parts`]).
    pub fn dv(&self) -> Result<ffi::mlx5dv_qp, PartsError> {
        let mut out = ffi::mlx5dv_qp {
            dbrec: ptr::null_mut(),
            sq: ffi::mlx5dv_qp_wq {
                buf: ptr::null_mut(),
                wqe_cnt: 0,
                stride: 0,
            },
            rq: ffi::mlx5dv_qp_wq {
                buf: ptr::null_mut(),
                wqe_cnt: 0,
                stride: 0,
            },
            bf: ffi::mlx5dv_qp_bf {
                reg: ptr::null_mut(),
                size: 0,
            },
            comp_mask: 0,
            uar_mmap_offset: 0,
            tirn: 0,
            tisn: 0,
            rqn: 0,
            sqn: 0,
            tir_icm_addr: 0,
        };
        let mut obj = mlx5dv_obj::empty();
        obj.qp.in_ = self.inner.ptr;
        obj.qp.out = &mut out;
        // SAFETY: a live QP and a valid out-struct; only the QP pair is
        // read (`MLX5DV_OBJ_QP`).
        let ret = unsafe { ffi::mlx5dv_init_obj(&mut obj, ffi::obj_type::QP) };
        if ret != 0 {
            return Err(PartsError::InitObj { errno: ret });
        }
        Ok(out)
    }

    /// The send queue's raw parts for [`mlx5dp::sq::SendQueue::new`],
    /// borrowed from `self` (which keeps the QP, and so its buffers, UAR and
    /// doorbell record, alive).
    pub fn sq_raw_parts(&self) -> Result<SqRawParts<'_>, PartsError> {
        let c = parts::check_sq(&self.dv()?)?;
        // SAFETY: `&dbrec[MLX5_SND_DBR]` of this QP's doorbell record
        // (checked non-null and 4-aligned), alive while the QP is, i.e. for
        // the borrow of `self`; the device accesses it by DMA, libmlx5 no
        // longer does once the core posts (DV-owned QP, PRM-FACTS §7).
        let dbrec = unsafe { DeviceWord::from_ptr(c.dbrec) };
        Ok(SqRawParts {
            buf: NonNull::new(c.buf).ok_or(PartsError::Null("mlx5dv_qp.sq.buf"))?,
            wqe_cnt: c.wqe_cnt,
            dbrec,
            bf_reg: NonNull::new(c.bf_reg).ok_or(PartsError::Null("mlx5dv_qp.bf.reg"))?,
            bf_buf_size: c.bf_size,
        })
    }

    /// The settings for [`mlx5dp::sq::SendQueue::new`]: the limits the
    /// provider granted, atomics on RC/XRC, and for RAW_PACKET checksum
    /// offload when `caps` has it and an 18-byte inline L2 header (always
    /// accepted; the vport's real minimum needs DevX, PRM-FACTS §13).
    pub fn sq_config(&self, caps: &DeviceCaps) -> Result<SqConfig, VerbsError> {
        let t = self
            .opts
            .kind
            .core()
            .ok_or(VerbsError::Invalid("an XRC target QP has no send queue"))?;
        let mut c = SqConfig::new(
            t,
            self.qpn(),
            self.cap.max_inline_data,
            self.cap.max_send_sge,
        );
        c.sig_all = self.opts.sq_sig_all;
        c.atomics = matches!(t, sq::QpType::Rc | sq::QpType::Xrc);
        if t == sq::QpType::RawPacket {
            // IBV_RAW_PACKET_CAP_IP_CSUM.
            c.raw_csum = caps.raw_packet_caps & (1 << 2) != 0;
            c.eth_min_inline = 18;
            c.max_tso_header = self.opts.max_tso_header;
            c.max_tso = caps.max_tso;
        }
        Ok(c)
    }

    /// The receive queue's ring for [`mlx5dp::rq::Rq::new`].
    ///
    /// # Safety
    ///
    /// Call once per queue: while the returned parts (or a queue built on
    /// them) live, nothing else in this process writes the ring or the
    /// doorbell word (no `ibv_post_recv` on this QP).
    pub unsafe fn recv_parts(&self) -> Result<RecvParts<'_>, PartsError> {
        let c = parts::check_qp_rq(&self.dv()?)?;
        // SAFETY: forwarded to the caller.
        unsafe { RecvParts::from_checked(&c) }
    }

    /// The send queue as the backend-neutral owner (see [`Cq::core_cq`]),
    /// with [`Qp::sq_config`] as its configuration.
    pub fn core_sq(&self, caps: &DeviceCaps) -> Result<CoreSq, VerbsError> {
        let dv = self.dv()?;
        let c = parts::check_sq(&dv)?;
        let config = self.sq_config(caps)?;
        let parts = EmuSqParts {
            qpn: self.qpn(),
            buf: c.buf,
            wqe_cnt: c.wqe_cnt,
            stride: 64,
            // The record's base: `CoreSq::raw_parts` takes word 1
            // (MLX5_SND_DBR), as `check_sq` did.
            dbrec: dv.dbrec,
            // Informational: the doorbell register is UAR + 0x800.
            uar: c.bf_reg.wrapping_sub(0x800),
            bf_reg: c.bf_reg,
            bf_size: c.bf_size,
            max_inline: self.cap.max_inline_data,
            max_sge: self.cap.max_send_sge,
        };
        // SAFETY: checked by `check_sq` (non-null, aligned ring, record and
        // register, power-of-two WQEBB count, BlueFlame size 0 or a power
        // of two) for this live QP, which the `KeepAlive` keeps alive (and
        // with it the ring, the doorbell record and the UAR mapping).
        Ok(unsafe {
            CoreSq::from_parts(
                parts,
                kind_to_emu(self.opts.kind),
                Some(config),
                KeepAlive::new(self.inner.clone()),
            )
        })
    }

    /// The receive queue as the backend-neutral owner (see
    /// [`Cq::core_cq`]).
    pub fn core_rq(&self) -> Result<CoreRq, VerbsError> {
        let c = parts::check_qp_rq(&self.dv()?)?;
        let parts = EmuRqParts {
            num: self.qpn(),
            buf: c.buf,
            wqe_cnt: c.wqe_cnt,
            stride: 1 << c.wqe_shift,
            dbrec: c.dbrec,
            kind: EmuRqKind::Cyclic,
        };
        // SAFETY: checked by `check_qp_rq` for this live QP, which the
        // `KeepAlive` keeps alive; the device only reads the ring.
        Ok(unsafe { CoreRq::from_parts(parts, KeepAlive::new(self.inner.clone())) })
    }

    /// The QP's current state (`ibv_query_qp`, `IBV_QP_STATE`): the
    /// device moves a QP to ERR on its own after an error completion.
    pub fn state(&self) -> Result<rdma_sys::ibv_qp_state::Type, VerbsError> {
        // SAFETY: plain C data; all-zero is valid.
        let mut a: ibv_qp_attr = unsafe { core::mem::zeroed() };
        // SAFETY: plain C data; all-zero is valid.
        let mut init: rdma_sys::ibv_qp_init_attr = unsafe { core::mem::zeroed() };
        let mask = i32::try_from(M::IBV_QP_STATE.0).unwrap_or(1);
        // SAFETY: a live QP and valid out-structs.
        let ret = unsafe { rdma_sys::ibv_query_qp(self.inner.ptr, &mut a, mask, &mut init) };
        if ret != 0 {
            return Err(VerbsError::ret("ibv_query_qp", ret));
        }
        Ok(a.qp_state)
    }
}

/// The backend-neutral QP type of a verbs QP kind.
pub fn kind_to_emu(kind: QpKind) -> crate::emu::QpType {
    use crate::emu::QpType as T;
    match kind {
        QpKind::Rc => T::Rc,
        QpKind::Uc => T::Uc,
        QpKind::Ud => T::Ud,
        QpKind::XrcIni => T::XrcIni,
        QpKind::XrcTgt => T::XrcTgt,
        QpKind::RawPacket => T::RawPacket,
    }
}

/// A receive ring as [`mlx5dp::rq::Rq::new`] takes it.
#[derive(Debug)]
pub struct RecvParts<'a> {
    /// The WQE ring.
    pub ring: RingBuf<'a>,
    /// Number of WQEs.
    pub size: RingSize,
    /// log2 of the WQE stride.
    pub wqe_shift: u8,
    /// The doorbell-record word.
    pub dbrec: &'a DeviceWord<u32>,
    /// SRQ number (SRQs only).
    pub srqn: u32,
}

impl RecvParts<'_> {
    /// # Safety
    ///
    /// `c` describes a live ring and doorbell record of an object the
    /// returned lifetime borrows, with no other writer in this process.
    unsafe fn from_checked<'a>(c: &parts::CheckedRq) -> Result<RecvParts<'a>, PartsError> {
        let size = RingSize::new(c.wqe_cnt).ok_or(PartsError::NotPowerOfTwo {
            field: "receive wqe_cnt",
            value: c.wqe_cnt,
        })?;
        let len = (c.wqe_cnt as usize)
            .checked_mul(1usize << c.wqe_shift)
            .ok_or(PartsError::BadSize {
                field: "receive ring length",
                value: c.wqe_cnt,
            })?;
        // SAFETY: `wqe_cnt << wqe_shift` bytes of the object's ring (checked
        // non-null), alive for `'a`; no other writer (caller).
        let ring = unsafe { RingBuf::new(c.buf, len) }.ok_or(PartsError::Null("receive ring"))?;
        // SAFETY: the object's doorbell-record word, checked non-null and
        // 4-aligned, alive for `'a`, written only by the queue built on it.
        let dbrec = unsafe { DeviceWord::from_ptr(c.dbrec) };
        Ok(RecvParts {
            ring,
            size,
            wqe_shift: c.wqe_shift,
            dbrec,
            srqn: c.srqn,
        })
    }
}

impl Srq {
    /// The SRQ ring as the core takes it.
    ///
    /// # Safety
    ///
    /// As for [`Qp::recv_parts`] (no `ibv_post_srq_recv` on this SRQ).
    pub unsafe fn recv_parts(&self) -> Result<RecvParts<'_>, PartsError> {
        let c = self.dv()?;
        // SAFETY: forwarded to the caller.
        unsafe { RecvParts::from_checked(&c) }
    }
}

// ---------------------------------------------------------------------------
// Flow steering.

/// `struct ibv_flow_attr` followed by one Ethernet spec and one tag
/// action, as `ibv_create_flow` reads them (`num_of_specs` says whether the
/// tag is there).
#[repr(C)]
struct EthFlowAttr {
    attr: rdma_sys::ibv_flow_attr,
    eth: rdma_sys::ibv_flow_spec_eth,
    tag: rdma_sys::ibv_flow_spec_action_tag,
}

// libibverbs reads the specs at `attr + sizeof(attr)`, one after another.
const _: () = assert!(
    core::mem::offset_of!(EthFlowAttr, eth) == core::mem::size_of::<rdma_sys::ibv_flow_attr>()
);
const _: () = assert!(
    core::mem::offset_of!(EthFlowAttr, tag)
        == core::mem::size_of::<rdma_sys::ibv_flow_attr>()
            + core::mem::size_of::<rdma_sys::ibv_flow_spec_eth>()
);

/// A flow-steering rule sending matching frames to a RAW_PACKET QP or an
/// RSS QP (`ibv_create_flow`); removed on drop, before its QP.
#[derive(Debug)]
pub struct Flow {
    ptr: *mut ibv_flow,
    /// The QP's owner ([`QpInner`] or [`RssQpInner`]), kept alive.
    _qp: Arc<dyn core::fmt::Debug + Send + Sync>,
}
verbs_owner_is_send_sync!(Flow);

impl Drop for Flow {
    fn drop(&mut self) {
        // SAFETY: created by `Flow::create`; its QP is alive (`_qp`, a
        // field dropped after this body).
        destroyed("ibv_destroy_flow", unsafe {
            rdma_sys::ibv_destroy_flow(self.ptr)
        });
    }
}

impl Flow {
    /// Steers frames to `dst_mac` (every destination if `None`) and
    /// `ether_type` (if given) arriving on the QP's port to the RAW_PACKET
    /// `qp`, marking their CQEs with `tag` if given
    /// (`IBV_FLOW_SPEC_ACTION_TAG`).
    pub fn eth(
        qp: &Qp,
        dst_mac: Option<[u8; 6]>,
        ether_type: Option<u16>,
        tag: Option<u32>,
    ) -> Result<Self, VerbsError> {
        if qp.kind() != QpKind::RawPacket {
            return Err(VerbsError::Invalid("flow rules steer to RAW_PACKET QPs"));
        }
        let keep: Arc<dyn core::fmt::Debug + Send + Sync> = qp.inner.clone();
        Self::create(qp.inner.ptr, keep, qp.port.port, dst_mac, ether_type, tag)
    }

    /// As [`Flow::eth`], to an RSS QP: the rule's destination is the QP's
    /// TIR (Linux `mlx5_ib_create_flow`, drivers/infiniband/hw/mlx5/fs.c,
    /// takes `rss_qp.tirn` for an RSS QP), which hashes the frame to a WQ
    /// of its table. Never run: compiled only.
    pub fn eth_rss(
        qp: &RssQp,
        dst_mac: Option<[u8; 6]>,
        ether_type: Option<u16>,
        tag: Option<u32>,
    ) -> Result<Self, VerbsError> {
        let keep: Arc<dyn core::fmt::Debug + Send + Sync> = qp.inner.clone();
        Self::create(qp.inner.ptr, keep, qp.port.port, dst_mac, ether_type, tag)
    }

    fn create(
        qp: *mut ibv_qp,
        keep: Arc<dyn core::fmt::Debug + Send + Sync>,
        port: u8,
        dst_mac: Option<[u8; 6]>,
        ether_type: Option<u16>,
        tag: Option<u32>,
    ) -> Result<Self, VerbsError> {
        // SAFETY: plain C data; all-zero is valid.
        let mut f: EthFlowAttr = unsafe { core::mem::zeroed() };
        f.attr.type_ = rdma_sys::ibv_flow_attr_type::IBV_FLOW_ATTR_NORMAL;
        f.attr.num_of_specs = 1;
        f.attr.port = port;
        f.eth.type_ = rdma_sys::ibv_flow_spec_type::IBV_FLOW_SPEC_ETH;
        f.eth.size = core::mem::size_of::<rdma_sys::ibv_flow_spec_eth>() as u16;
        if let Some(mac) = dst_mac {
            f.eth.val.dst_mac = mac;
            f.eth.mask.dst_mac = [0xff; 6];
        }
        if let Some(t) = ether_type {
            f.eth.val.ether_type = t.to_be();
            f.eth.mask.ether_type = 0xffff;
        }
        let mut size = core::mem::size_of::<rdma_sys::ibv_flow_attr>()
            + core::mem::size_of::<rdma_sys::ibv_flow_spec_eth>();
        if let Some(tag) = tag {
            f.attr.num_of_specs = 2;
            f.tag.type_ = rdma_sys::ibv_flow_spec_type::IBV_FLOW_SPEC_ACTION_TAG;
            f.tag.size = core::mem::size_of::<rdma_sys::ibv_flow_spec_action_tag>() as u16;
            f.tag.tag_id = tag;
            size += core::mem::size_of::<rdma_sys::ibv_flow_spec_action_tag>();
        }
        f.attr.size =
            u16::try_from(size).map_err(|_| VerbsError::Invalid("flow attribute size"))?;
        // SAFETY: `qp` is a live QP (its owner is `keep`, held by the
        // callers' `&Qp`/`&RssQp` for the call and by the rule after it);
        // `f` is the attribute followed by its specs, as `size` and
        // `num_of_specs` say (back to back: checked at compile time above).
        let ptr = unsafe { rdma_sys::ibv_create_flow(qp, ptr::addr_of_mut!(f).cast()) }
            .unwrap_or(ptr::null_mut());
        if ptr.is_null() {
            return Err(VerbsError::last("ibv_create_flow"));
        }
        Ok(Flow { ptr, _qp: keep })
    }
}
