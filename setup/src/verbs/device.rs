//! Devices: list, open by name, capabilities, clock.

use super::ffi::{self, context_flags, context_mask, mlx5dv_clock_info, mlx5dv_context};
use super::VerbsError;
use core::ffi::CStr;
use mlx5dp::prm::MiniCqeFormat;
use rdma_sys::{ibv_context, ibv_device_attr_ex, ibv_values_ex};
use std::sync::Arc;

/// Names of the RDMA devices present (`ibv_get_device_list`).
///
/// [`VerbsError::NoDevice`] when there are none, so that a caller fails at
/// once with a message naming the emulated device.
pub fn list_devices() -> Result<Vec<String>, VerbsError> {
    let mut n: core::ffi::c_int = 0;
    // SAFETY: `n` is a valid out-pointer; the list is freed below.
    let list = unsafe { rdma_sys::ibv_get_device_list(&mut n) };
    if list.is_null() {
        // ENOSYS: no kernel support (no uverbs at all) - no device either.
        return Err(VerbsError::NoDevice);
    }
    let mut names = Vec::new();
    for i in 0..usize::try_from(n).unwrap_or(0) {
        // SAFETY: the list holds `n` device pointers, then a null.
        let dev = unsafe { *list.add(i) };
        if dev.is_null() {
            break;
        }
        // SAFETY: `dev` is a live device of the list; the name is a
        // NUL-terminated string owned by it, copied before the list goes.
        let name = unsafe { CStr::from_ptr(rdma_sys::ibv_get_device_name(dev)) };
        names.push(name.to_string_lossy().into_owned());
    }
    // SAFETY: `list` came from `ibv_get_device_list` and is freed once.
    unsafe { rdma_sys::ibv_free_device_list(list) };
    if names.is_empty() {
        return Err(VerbsError::NoDevice);
    }
    Ok(names)
}

/// An open device (`ibv_context`). Cheap to clone; closed when the last
/// clone and the last object created on it are gone.
#[derive(Clone, Debug)]
pub struct Context {
    pub(crate) inner: Arc<ContextInner>,
}

/// The owner of an `ibv_context`.
#[derive(Debug)]
pub(crate) struct ContextInner {
    pub(crate) ptr: *mut ibv_context,
    name: String,
}

// SAFETY: libibverbs control verbs on one context are thread-safe (rdma-core
// documents ibv_* as thread-safe except where noted; the data path, which
// is not, is the core's and never runs through this pointer).
unsafe impl Send for ContextInner {}
// SAFETY: as for `Send`: shared use only issues thread-safe control verbs.
unsafe impl Sync for ContextInner {}

impl Drop for ContextInner {
    fn drop(&mut self) {
        // SAFETY: the context was opened by `Context::open`, and every object
        // created on it holds an `Arc` to this owner, so none is left.
        let ret = unsafe { rdma_sys::ibv_close_device(self.ptr) };
        debug_assert_eq!(ret, 0, "ibv_close_device({})", self.name);
    }
}

impl Context {
    /// Opens the device called `name` (`mlx5_0`), which must be an mlx5
    /// device.
    pub fn open(name: &str) -> Result<Self, VerbsError> {
        let mut n: core::ffi::c_int = 0;
        // SAFETY: `n` is a valid out-pointer; the list is freed below.
        let list = unsafe { rdma_sys::ibv_get_device_list(&mut n) };
        if list.is_null() || n <= 0 {
            if !list.is_null() {
                // SAFETY: freed once, nothing of it kept.
                unsafe { rdma_sys::ibv_free_device_list(list) };
            }
            return Err(VerbsError::NoDevice);
        }
        let mut found = None;
        let mut available = Vec::new();
        for i in 0..usize::try_from(n).unwrap_or(0) {
            // SAFETY: the list holds `n` device pointers.
            let dev = unsafe { *list.add(i) };
            if dev.is_null() {
                break;
            }
            // SAFETY: a live device's NUL-terminated name, copied at once.
            let dname = unsafe { CStr::from_ptr(rdma_sys::ibv_get_device_name(dev)) }
                .to_string_lossy()
                .into_owned();
            if dname == name {
                found = Some(dev);
            }
            available.push(dname);
        }
        let result = match found {
            None => Err(VerbsError::DeviceNotFound {
                name: name.to_owned(),
                available,
            }),
            // SAFETY: `dev` is a device of the live list.
            Some(dev) if !unsafe { ffi::mlx5dv_is_supported(dev) } => Err(VerbsError::NotMlx5 {
                name: name.to_owned(),
            }),
            Some(dev) => {
                // SAFETY: `dev` is a device of the live list; the context
                // keeps its own reference to the device after the list is
                // freed (ibv_open_device takes one).
                let ptr = unsafe { rdma_sys::ibv_open_device(dev) };
                if ptr.is_null() {
                    Err(VerbsError::last("ibv_open_device"))
                } else {
                    Ok(Context {
                        inner: Arc::new(ContextInner {
                            ptr,
                            name: name.to_owned(),
                        }),
                    })
                }
            }
        };
        // SAFETY: freed once; only the opened context outlives it.
        unsafe { rdma_sys::ibv_free_device_list(list) };
        result
    }

    /// Opens the device named by `MLX5DP_DEVICE` (default: the first one).
    pub fn open_from_env() -> Result<Self, VerbsError> {
        match std::env::var("MLX5DP_DEVICE") {
            Ok(name) if !name.is_empty() => Self::open(&name),
            _ => {
                let names = list_devices()?;
                Self::open(&names[0])
            }
        }
    }

    /// The device name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The raw context (for verbs this backend does not wrap).
    pub fn as_ptr(&self) -> *mut ibv_context {
        self.inner.ptr
    }

    /// Queries the capabilities (`ibv_query_device_ex` and
    /// `mlx5dv_query_device`).
    pub fn query_caps(&self) -> Result<DeviceCaps, VerbsError> {
        // SAFETY: plain C data; all-zero is a valid value of each.
        let mut attr: ibv_device_attr_ex = unsafe { core::mem::zeroed() };
        // SAFETY: the context is open; `attr` is a valid out-struct of the
        // size rdma-sys passes; a null input is allowed.
        let ret =
            unsafe { rdma_sys::ibv_query_device_ex(self.inner.ptr, core::ptr::null(), &mut attr) };
        if ret != 0 {
            return Err(VerbsError::ret("ibv_query_device_ex", ret));
        }
        let mut dv = zeroed_dv_context();
        dv.comp_mask = context_mask::CQE_COMPRESION
            | context_mask::SWP
            | context_mask::STRIDING_RQ
            | context_mask::TUNNEL_OFFLOADS
            | context_mask::DYN_BFREGS
            | context_mask::CLOCK_INFO_UPDATE
            | context_mask::HCA_CORE_CLOCK
            | context_mask::NUM_LAG_PORTS;
        // SAFETY: the context is open and an mlx5 one (checked at open);
        // `dv` is a whole `mlx5dv_context` (layout checked against the
        // header by the tests).
        let ret = unsafe { ffi::mlx5dv_query_device(self.inner.ptr, &mut dv) };
        if ret != 0 {
            return Err(VerbsError::ret("mlx5dv_query_device", ret));
        }
        Ok(DeviceCaps::from_raw(&attr, &dv))
    }

    /// Reads the HCA clock (`ibv_query_rt_values_ex`, raw clock): the
    /// free-running tick counter the CQE timestamps use.
    pub fn read_hca_clock(&self) -> Result<u64, VerbsError> {
        // SAFETY: plain C data; all-zero is valid.
        let mut v: ibv_values_ex = unsafe { core::mem::zeroed() };
        v.comp_mask = rdma_sys::ibv_values_mask::IBV_VALUES_MASK_RAW_CLOCK.0;
        // SAFETY: the context is open; `v` is a valid out-struct.
        let ret = unsafe { rdma_sys::ibv_query_rt_values_ex(self.inner.ptr, &mut v) };
        if ret != 0 {
            return Err(VerbsError::ret("ibv_query_rt_values_ex", ret));
        }
        // libmlx5 (`mlx5_query_rt_values`) puts the tick count in tv_nsec
        // with tv_sec = 0; fold both in case a provider splits it.
        let sec = u64::try_from(v.raw_clock.tv_sec).unwrap_or(0);
        let nsec = u64::try_from(v.raw_clock.tv_nsec).unwrap_or(0);
        Ok(sec.wrapping_mul(1_000_000_000).wrapping_add(nsec))
    }

    /// The tick → ns conversion parameters (`mlx5dv_get_clock_info`); valid
    /// for `max_clock_info_update_nsec`, then ask again.
    pub fn clock_info(&self) -> Result<mlx5dv_clock_info, VerbsError> {
        let mut ci = mlx5dv_clock_info::default();
        // SAFETY: the context is open; `ci` is a valid out-struct.
        let ret = unsafe { ffi::mlx5dv_get_clock_info(self.inner.ptr, &mut ci) };
        if ret != 0 {
            return Err(VerbsError::ret("mlx5dv_get_clock_info", ret));
        }
        Ok(ci)
    }

    /// Port attributes needed to connect QPs (`ibv_query_port`,
    /// `ibv_query_gid`).
    pub fn query_port(&self, port: u8, gid_index: u8) -> Result<PortInfo, VerbsError> {
        // SAFETY: plain C data; all-zero is valid.
        let mut pa: rdma_sys::ibv_port_attr = unsafe { core::mem::zeroed() };
        // SAFETY: the context is open; `pa` is a valid out-struct
        // (`___ibv_query_port` is verbs.h's `ibv_query_port` macro).
        let ret = unsafe { rdma_sys::___ibv_query_port(self.inner.ptr, port, &mut pa) };
        if ret != 0 {
            return Err(VerbsError::ret("ibv_query_port", ret));
        }
        // SAFETY: all-zero is a valid `ibv_gid` (a byte union).
        let mut gid: rdma_sys::ibv_gid = unsafe { core::mem::zeroed() };
        // SAFETY: the context is open; `gid` is a valid out-union.
        let ret = unsafe {
            rdma_sys::ibv_query_gid(self.inner.ptr, port, i32::from(gid_index), &mut gid)
        };
        if ret != 0 {
            return Err(VerbsError::ret("ibv_query_gid", ret));
        }
        Ok(PortInfo {
            port,
            lid: pa.lid,
            // SAFETY: every bit pattern of the union is a valid byte array.
            gid: unsafe { gid.raw },
            gid_index,
            active_mtu: pa.active_mtu,
            ethernet: u32::from(pa.link_layer) == IBV_LINK_LAYER_ETHERNET,
        })
    }
}

/// `IBV_LINK_LAYER_ETHERNET`.
const IBV_LINK_LAYER_ETHERNET: u32 = 2;

/// A zeroed `mlx5dv_context`.
fn zeroed_dv_context() -> mlx5dv_context {
    // SAFETY: plain C data (integers and a raw pointer); all-zero is valid.
    unsafe { core::mem::zeroed() }
}

/// What a port says about itself, for QP connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortInfo {
    /// Port number (1-based).
    pub port: u8,
    /// LID (InfiniBand; 0 on RoCE).
    pub lid: u16,
    /// GID at `gid_index`.
    pub gid: [u8; 16],
    /// The GID table index.
    pub gid_index: u8,
    /// Active MTU (`enum ibv_mtu`).
    pub active_mtu: u32,
    /// RoCE: the address vector needs the GRH.
    pub ethernet: bool,
}

/// Striding-RQ limits (`mlx5dv_striding_rq_caps`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StridingRqCaps {
    /// log2 stride size in bytes: smallest.
    pub min_log_stride_bytes: u32,
    /// log2 stride size in bytes: largest.
    pub max_log_stride_bytes: u32,
    /// log2 strides per WQE: smallest.
    pub min_log_num_strides: u32,
    /// log2 strides per WQE: largest.
    pub max_log_num_strides: u32,
    /// QP types (bit per `IBV_QPT_*`).
    pub supported_qpts: u32,
}

/// CQE compression limits (`mlx5dv_cqe_comp_caps`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CqeCompressionCaps {
    /// Largest session.
    pub max_num: u32,
    /// Responder mini-CQE formats `mlx5dv_create_cq` accepts.
    pub formats: Vec<MiniCqeFormat>,
    /// Compression works with 128-byte CQEs (`CQE_128B_COMP`).
    pub cqe_128: bool,
}

/// The capabilities the core and the scenarios care about.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeviceCaps {
    /// Firmware version.
    pub fw_ver: String,
    /// PCI part id (0x1017 = ConnectX-5, ...).
    pub vendor_part_id: u32,
    /// Largest work queue.
    pub max_qp_wr: u32,
    /// Largest SGE list.
    pub max_sge: u32,
    /// Largest CQ.
    pub max_cqe: u32,
    /// Largest SRQ.
    pub max_srq_wr: u32,
    /// Physical ports.
    pub phys_port_cnt: u8,
    /// `IBV_RAW_PACKET_CAP_*` bits.
    pub raw_packet_caps: u32,
    /// Largest TSO payload (0: none).
    pub max_tso: u32,
    /// CQE version (`mlx5dv_context.version`).
    pub cqe_version: u8,
    /// CQE version 1 (user index in `srqn_uidx`).
    pub cqe_v1: bool,
    /// Legacy multi-packet WQEs allowed.
    pub mpw_allowed: bool,
    /// Enhanced multi-packet WQEs.
    pub enhanced_mpw: bool,
    /// 128-byte CQEs padded (`CQE_128B_PAD`).
    pub cqe_128b_pad: bool,
    /// Real-time CQE timestamps (`REAL_TIME_TS`).
    pub real_time_ts: bool,
    /// CQE compression; `None` without it.
    pub cqe_compression: Option<CqeCompressionCaps>,
    /// Striding RQ; `None` without it.
    pub striding_rq: Option<StridingRqCaps>,
    /// `MLX5DV_RAW_PACKET_CAP_TUNNELED_OFFLOAD_*` bits.
    pub tunnel_offloads: u32,
    /// `MLX5DV_SW_PARSING*` bits.
    pub sw_parsing_offloads: u32,
    /// HCA core clock in kHz (0: unknown).
    pub hca_core_clock_khz: u64,
    /// Valid bits of a CQE timestamp.
    pub timestamp_mask: u64,
    /// The clock register is mapped (`mlx5dv_context.hca_core_clock`).
    pub hca_core_clock_mapped: bool,
    /// How long a `mlx5dv_clock_info` stays valid, ns (0: unknown).
    pub max_clock_info_update_nsec: u64,
}

impl DeviceCaps {
    /// Decodes the two query results. Fields whose `comp_mask` bit the
    /// provider did not set are left at their "absent" value.
    pub fn from_raw(attr: &ibv_device_attr_ex, dv: &mlx5dv_context) -> Self {
        let o = &attr.orig_attr;
        let fw: Vec<u8> = o
            .fw_ver
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        let has = |bit: u64| dv.comp_mask & bit != 0;
        let flag = |bit: u64| dv.flags & bit != 0;
        let cqe_compression = (has(context_mask::CQE_COMPRESION) && dv.cqe_comp_caps.max_num > 0)
            .then(|| CqeCompressionCaps {
                max_num: dv.cqe_comp_caps.max_num,
                formats: [0b001u8, 0b010, 0b100]
                    .into_iter()
                    .filter(|&b| dv.cqe_comp_caps.supported_format & u32::from(b) != 0)
                    .filter_map(MiniCqeFormat::from_mlx5dv_mask)
                    .collect(),
                cqe_128: flag(context_flags::CQE_128B_COMP),
            });
        let s = &dv.striding_rq_caps;
        let striding_rq = (has(context_mask::STRIDING_RQ)
            && s.max_single_wqe_log_num_of_strides > 0)
            .then_some(StridingRqCaps {
                min_log_stride_bytes: s.min_single_stride_log_num_of_bytes,
                max_log_stride_bytes: s.max_single_stride_log_num_of_bytes,
                min_log_num_strides: s.min_single_wqe_log_num_of_strides,
                max_log_num_strides: s.max_single_wqe_log_num_of_strides,
                supported_qpts: s.supported_qpts,
            });
        let nonneg = |v: core::ffi::c_int| u32::try_from(v).unwrap_or(0);
        DeviceCaps {
            fw_ver: String::from_utf8_lossy(&fw).into_owned(),
            vendor_part_id: o.vendor_part_id,
            max_qp_wr: nonneg(o.max_qp_wr),
            max_sge: nonneg(o.max_sge),
            max_cqe: nonneg(o.max_cqe),
            max_srq_wr: nonneg(o.max_srq_wr),
            phys_port_cnt: o.phys_port_cnt,
            raw_packet_caps: attr.raw_packet_caps,
            max_tso: attr.tso_caps.max_tso,
            cqe_version: dv.version,
            cqe_v1: flag(context_flags::CQE_V1),
            mpw_allowed: flag(context_flags::MPW_ALLOWED),
            enhanced_mpw: flag(context_flags::ENHANCED_MPW),
            cqe_128b_pad: flag(context_flags::CQE_128B_PAD),
            real_time_ts: flag(context_flags::REAL_TIME_TS),
            cqe_compression,
            striding_rq,
            tunnel_offloads: if has(context_mask::TUNNEL_OFFLOADS) {
                dv.tunnel_offloads_caps
            } else {
                0
            },
            sw_parsing_offloads: if has(context_mask::SWP) {
                dv.sw_parsing_caps.sw_parsing_offloads
            } else {
                0
            },
            hca_core_clock_khz: attr.hca_core_clock,
            timestamp_mask: attr.completion_timestamp_mask,
            hca_core_clock_mapped: has(context_mask::HCA_CORE_CLOCK)
                && !dv.hca_core_clock.is_null(),
            max_clock_info_update_nsec: if has(context_mask::CLOCK_INFO_UPDATE) {
                dv.max_clock_info_update_nsec
            } else {
                0
            },
        }
    }
}

/// Converts a free-running CQE timestamp to ns: the port of mlx5dv.h's
/// inline `mlx5dv_ts_to_ns`, valid within `max_clock_info_update_nsec` of
/// the `clock_info`'s update.
pub fn ts_to_ns(ci: &mlx5dv_clock_info, device_timestamp: u64) -> u64 {
    let delta = device_timestamp.wrapping_sub(ci.last_cycles) & ci.mask;
    let mult = u64::from(ci.mult);
    let shift = ci.shift;
    if delta > ci.mask / 2 {
        let delta = ci.last_cycles.wrapping_sub(device_timestamp) & ci.mask;
        ci.nsec
            .wrapping_sub(delta.wrapping_mul(mult).wrapping_sub(ci.frac) >> shift)
    } else {
        ci.nsec
            .wrapping_add(delta.wrapping_mul(mult).wrapping_add(ci.frac) >> shift)
    }
}
