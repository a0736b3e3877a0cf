//! The real-hardware backend: a ConnectX opened through libibverbs
//! (rdma-sys) and mlx5dv (hand-written FFI in [`ffi`]), whose queues are
//! handed to the core as raw parts.
//!
//! Behind the cargo feature `verbs` (off by default: the README's commands
//! need no rdma-core). What is here:
//!
//! - [`device`]: list devices, open one by name, query its capabilities
//!   (`ibv_query_device_ex` + `mlx5dv_query_device`) and read its clock
//!   (`ibv_query_rt_values_ex`, `mlx5dv_get_clock_info`).
//! - [`resources`]: RAII owners of protection domains, memory regions,
//!   memory windows (`ibv_alloc_mw`), CQs (`mlx5dv_create_cq`, with CQE
//!   compression when asked), QPs of every type the core drives (RC, UC,
//!   UD, XRC initiator and target, RAW_PACKET with a flow-steering rule),
//!   SRQs and XRC SRQs, XRC domains shared through a file, striding RQs
//!   (`mlx5dv_create_wq`) behind a one-entry RSS indirection table and an
//!   RSS QP (`RssRq`, as DPDK's verbs Rx queues); QP state transitions
//!   with the attributes each type needs, RC connection from exchanged
//!   QPN/LID/GID/PSN, and recovery after an error completion.
//! - [`ah`]: address handles (`ibv_create_ah`) and the UD address vector
//!   libmlx5 builds for them, read through `mlx5dv_init_obj`.
//! - [`parts`]: `mlx5dv_init_obj` and the checks that turn its output into
//!   the core's raw-parts types. After this the core never calls rdma-core.
//! - [`backend`]: [`VerbsBackend`], the [`crate::backend::Backend`] the
//!   end-to-end scenarios, `mlx5dp perf --device NAME` and
//!   `mlx5dp trace record --device NAME` run on.
//! - [`capture`]: the host side of `mlx5dp trace record` on hardware (the
//!   WQEs posted, the doorbell values, the CQ ring around each poll).
//! - [`smoke`]: a hardware scenario (RC loopback through the core) for
//!   `MLX5DP_DEVICE=mlx5_0`.
//!
//! # Teardown order
//!
//! Every owner holds an [`std::sync::Arc`] to each object it depends on
//! (a QP to its PD, CQs, SRQ and XRC domain; an MR, memory window, SRQ or
//! WQ to its PD; a PD, CQ or XRC domain to the device context; a flow rule
//! to its QP or RSS QP; an RSS QP to its indirection table, the table to
//! its WQ), so a parent is destroyed only after its last child: flow rule
//! → QP/RSS QP → indirection table → SRQ/WQ → CQ → MR/memory window → PD
//! → XRC domain → device context,
//! whatever order the caller drops the handles in. (A window holds no
//! `Arc` to the region it is bound to: the binding is the device's, made
//! by a work request the core posts. Deallocate windows before their
//! regions go: rxe refuses to deregister a region with windows bound,
//! and what a ConnectX does then has not been seen here.) Raw parts
//! borrow their owner (`SqRawParts<'_>`), or, where the core's type has
//! no lifetime ([`mlx5dp::cq::CqParts`]), the constructor's `unsafe`
//! contract says to keep the owner alive.
//!
//! # The backend-neutral owners
//!
//! [`VerbsBackend`] hands out the same owner types as the emulated device
//! ([`crate::emu::CoreSq`], [`crate::emu::CoreCq`], [`crate::emu::CoreRq`],
//! [`crate::backend::Buffer`]): their plain parts are filled from the
//! checked `mlx5dv_*` structs and their [`crate::backend::KeepAlive`]
//! holds the `Arc` of the verbs object, so the order above still holds.
//!
//! Nothing here has run on a ConnectX: the FFI layouts are checked against
//! the installed header, the no-device path and every pure check run here,
//! the rest waits for hardware.
#![cfg(feature = "verbs")]

pub mod ah;
pub mod backend;
pub mod capture;
pub mod device;
pub mod ffi;
pub mod parts;
pub mod resources;
pub mod smoke;

#[cfg(all(test, feature = "verbs"))]
mod tests;

pub use ah::Ah;
pub use backend::VerbsBackend;
pub use device::{list_devices, Context, DeviceCaps};
pub use parts::PartsError;
pub use resources::{
    Cq, CqOptions, Flow, Mr, Mw, Pd, Qp, QpKind, QpOptions, RssQp, RssRq, RwqIndTable, Srq, Wq,
    Xrcd,
};

use std::fmt;

/// Why a verbs call failed (STYLE point 14: the failing verb and errno).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VerbsError {
    /// `ibv_get_device_list` found no RDMA device at all.
    NoDevice,
    /// No device has this name.
    DeviceNotFound {
        /// The name asked for.
        name: String,
        /// The devices present.
        available: Vec<String>,
    },
    /// The device is not driven by libmlx5 (`mlx5dv_is_supported`).
    NotMlx5 {
        /// Its name.
        name: String,
    },
    /// A verb failed.
    Verb {
        /// The rdma-core function.
        verb: &'static str,
        /// `errno` (or the returned error value).
        errno: i32,
    },
    /// What was asked is outside the device's capabilities or this backend.
    Unsupported(&'static str),
    /// The arguments make no sense (a zero-sized queue, ...).
    Invalid(&'static str),
    /// `mlx5dv_init_obj` handed out something the core cannot take.
    Parts(PartsError),
}

impl VerbsError {
    /// The failure of `verb`, with the current `errno`.
    pub(crate) fn last(verb: &'static str) -> Self {
        let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
        VerbsError::Verb { verb, errno }
    }

    /// The failure of `verb` returning the error value `ret` (rdma-core
    /// returns errno values from most destroy/modify calls).
    pub(crate) fn ret(verb: &'static str, ret: i32) -> Self {
        let errno = if ret > 0 {
            ret
        } else {
            std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(-ret)
        };
        VerbsError::Verb { verb, errno }
    }
}

impl VerbsError {
    /// Whether the device is missing, not usable by this user, not mlx5,
    /// or lacks what was asked: the tools fail at once with status 2.
    pub fn is_unavailable(&self) -> bool {
        match self {
            VerbsError::NoDevice
            | VerbsError::DeviceNotFound { .. }
            | VerbsError::NotMlx5 { .. }
            | VerbsError::Unsupported(_) => true,
            VerbsError::Verb { errno, .. } => {
                matches!(
                    *errno,
                    libc::EPERM | libc::EACCES | libc::EOPNOTSUPP | libc::ENODEV
                )
            }
            _ => false,
        }
    }
}

impl fmt::Display for VerbsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VerbsError::NoDevice => f.write_str(
                "no RDMA device found (ibv_get_device_list returned none); \
                 use the emulated ConnectX instead: --device emu",
            ),
            VerbsError::DeviceNotFound { name, available } => write!(
                f,
                "no RDMA device named {name:?} (present: {}); \
                 or use the emulated ConnectX: --device emu",
                available.join(", ")
            ),
            VerbsError::NotMlx5 { name } => write!(
                f,
                "{name} is not an mlx5 (ConnectX) device; \
                 or use the emulated ConnectX: --device emu"
            ),
            VerbsError::Verb { verb, errno } => write!(
                f,
                "{verb} failed: {} (errno {errno})",
                std::io::Error::from_raw_os_error(*errno)
            ),
            VerbsError::Unsupported(what) => write!(f, "{what} is not supported"),
            VerbsError::Invalid(what) => write!(f, "invalid argument: {what}"),
            VerbsError::Parts(e) => write!(f, "mlx5dv_init_obj: {e}"),
        }
    }
}

impl std::error::Error for VerbsError {}

impl From<PartsError> for VerbsError {
    fn from(e: PartsError) -> Self {
        VerbsError::Parts(e)
    }
}
