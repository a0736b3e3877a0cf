//! Address handles (`ibv_create_ah`) and the address vector libmlx5
//! builds for them, read through `mlx5dv_init_obj(MLX5DV_OBJ_AH)`.
//!
//! A UD send on mlx5 carries its route in the WQE: libmlx5 builds a
//! 48-byte `struct mlx5_wqe_av` once, in `mlx5_create_ah` (rdma-core v44
//! `providers/mlx5/verbs.c`: on InfiniBand the remote LID, the SL in
//! `stat_rate_sl` bits \[3:0\] and the path bits, plus the GRH fields when
//! `is_global`; on RoCE the SL in bits \[3:1\], the destination MAC the
//! kernel resolved, the GRH fields with the source GID index and flow
//! label, and on RoCE v2 the UDP source port where InfiniBand has the
//! LID), and copies it into every send WQE (`qp.c` `_set_datagram_seg`).
//! [`Ah`] creates the handle, reads that address vector
//! (`mlx5dv_get_av` in `mlx5.c` hands out a pointer to the handle's own
//! copy) and copies its 48 bytes into a core [`Av`], which the core's
//! `Wr::ud_addr` copies into WQEs in turn.
//!
//! The copy is all the device ever sees: it has no address-handle object
//! for UD (the kernel's, on RoCE, only resolves the MAC), so the handle
//! may be destroyed once its bytes are copied.
//! [`super::VerbsBackend::create_ah`](crate::backend::Backend::create_ah)
//! does exactly that.
//!
//! Never run: compiled only, written against rdma-core v44's `verbs.h`
//! (`ibv_create_ah`, `ibv_destroy_ah`) and `mlx5dv.h` (`mlx5dv_init_obj`,
//! `struct mlx5dv_ah`, whose layout is checked against the installed
//! header), with no ConnectX here to run it on.

use super::device::PortInfo;
use super::ffi::{self, mlx5dv_ah, mlx5dv_obj, obj_type};
use super::resources::Pd;
use super::VerbsError;
use crate::emu::{AhAttr, AhDest};
use mlx5dp::prm::{Av, Be32, DqpDct};
use rdma_sys::{ibv_ah, ibv_ah_attr};

/// The `ibv_ah_attr` of a destination on this backend's port, as plain
/// data (the `ibv_gid` union kept as bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Route {
    /// `port_num`.
    pub port_num: u8,
    /// `dlid`: the port's own LID (InfiniBand; 0 on RoCE).
    pub dlid: u16,
    /// `sl`.
    pub sl: u8,
    /// `is_global`: always on RoCE (libmlx5 refuses an Ethernet AH
    /// without it), as asked on InfiniBand.
    pub is_global: bool,
    /// `grh.dgid`: the port's GID at the backend's GID index.
    pub dgid: [u8; 16],
    /// `grh.sgid_index`: that index.
    pub sgid_index: u8,
    /// `grh.hop_limit`.
    pub hop_limit: u8,
    /// `grh.traffic_class`.
    pub traffic_class: u8,
    /// `grh.flow_label`.
    pub flow_label: u32,
}

impl Route {
    /// The route to `attr.dest` from `port`. The only destination is the
    /// port itself (every QP of the backend is on it): the destination
    /// LID is the port's, and the destination GID the one the backend
    /// connects RC/UC QPs with (`MLX5DP_GID_INDEX`, the same GID index as
    /// the source: loopback), as `Qp::modify` fills `ah_attr` for RTR.
    pub fn new(port: &PortInfo, attr: &AhAttr) -> Self {
        let AhDest::Loopback = attr.dest;
        let is_global = port.ethernet || attr.global;
        Route {
            port_num: port.port,
            dlid: port.lid,
            sl: attr.sl,
            is_global,
            dgid: port.gid,
            sgid_index: port.gid_index,
            hop_limit: attr.hop_limit,
            traffic_class: attr.traffic_class,
            flow_label: attr.flow_label,
        }
    }

    /// The `ibv_ah_attr` (static rate 0, no source path bits).
    pub fn to_ibv(&self) -> ibv_ah_attr {
        // SAFETY: plain C data (integers and a byte union); all-zero is
        // valid.
        let mut a: ibv_ah_attr = unsafe { core::mem::zeroed() };
        a.port_num = self.port_num;
        a.dlid = self.dlid;
        a.sl = self.sl;
        a.src_path_bits = 0;
        a.static_rate = 0;
        a.is_global = u8::from(self.is_global);
        if self.is_global {
            a.grh.dgid.raw = self.dgid;
            a.grh.sgid_index = self.sgid_index;
            a.grh.hop_limit = self.hop_limit;
            a.grh.traffic_class = self.traffic_class;
            a.grh.flow_label = self.flow_label;
        }
        a
    }
}

/// The address vector a WQE starts from: libmlx5's, with the Q_Key, the
/// DC key half and the remote QPN cleared (`mlx5_create_ah` leaves them
/// zero, from `calloc`; the send work request writes its own).
pub fn wqe_av(mut av: Av) -> Av {
    av.qkey = Be32::new(0);
    av.key_reserved = Be32::new(0);
    av.dqp_dct = DqpDct::new();
    av
}

/// An address handle (`ibv_create_ah`), destroyed on drop
/// (`ibv_destroy_ah`), with the address vector libmlx5 built for it.
///
/// It is created in the caller's protection domain, as `ibv_create_ah`
/// asks, though the mlx5 address vector carries no PD (`mlx5_create_ah`
/// writes none into it): the bytes are the same in any PD of the context.
///
/// Never run: compiled only (no ConnectX here).
#[derive(Debug)]
pub struct Ah {
    ptr: *mut ibv_ah,
    av: Av,
    _pd: Pd,
}

// SAFETY: the pointer is only passed to `ibv_destroy_ah`, a thread-safe
// control verb; the address vector is a copy.
unsafe impl Send for Ah {}
// SAFETY: as for `Send`: `&Ah` reads only the copy.
unsafe impl Sync for Ah {}

impl Drop for Ah {
    fn drop(&mut self) {
        // SAFETY: created by `Ah::create`, destroyed once, here; its PD
        // (`_pd`, a field dropped after this body) is still alive.
        let ret = unsafe { rdma_sys::ibv_destroy_ah(self.ptr) };
        debug_assert_eq!(ret, 0, "ibv_destroy_ah failed: {ret}");
    }
}

impl Ah {
    /// Creates an address handle in `pd` for `attr` on `port` and reads
    /// its address vector (`mlx5dv_init_obj` with `MLX5DV_OBJ_AH`).
    pub fn create(pd: &Pd, port: &PortInfo, attr: &AhAttr) -> Result<Self, VerbsError> {
        let route = Route::new(port, attr);
        let pd = pd.clone();
        let mut a = route.to_ibv();
        // SAFETY: the PD is alive (held by `pd`, kept by the owner built
        // below); `a` is a valid attribute struct for the call. libmlx5
        // returns NULL with errno set on failure (EINVAL: a port number
        // out of range, an Ethernet destination without a GRH; the
        // kernel's errno when it cannot resolve the MAC).
        let ptr = unsafe { rdma_sys::ibv_create_ah(pd.as_ptr(), &mut a) };
        if ptr.is_null() {
            return Err(VerbsError::last("ibv_create_ah"));
        }
        // Owned from here on, so an error below destroys it.
        let mut ah = Ah {
            ptr,
            av: Av::default(),
            _pd: pd,
        };
        let mut dv = mlx5dv_ah {
            av: core::ptr::null_mut(),
            comp_mask: 0,
        };
        let mut obj = mlx5dv_obj::empty();
        obj.ah.in_ = ah.ptr;
        obj.ah.out = &mut dv;
        // SAFETY: `obj.ah` names a live address handle and a valid
        // out-struct; only the AH pair is read (`obj_type::AH`).
        let ret = unsafe { ffi::mlx5dv_init_obj(&mut obj, obj_type::AH) };
        if ret != 0 {
            return Err(VerbsError::ret("mlx5dv_init_obj", ret));
        }
        if dv.av.is_null() {
            return Err(VerbsError::Invalid(
                "mlx5dv_init_obj gave an address handle without an address vector",
            ));
        }
        // SAFETY: `dv.av` points at the 48-byte `struct mlx5_wqe_av`
        // inside the live `struct mlx5_ah` (`mlx5dv_get_av`), valid until
        // `ibv_destroy_ah`, which only our `Drop` calls; `Av` is
        // `repr(C)`, 48 bytes of big-endian fields with no invalid bit
        // pattern, read unaligned; nothing writes them after
        // `ibv_create_ah` returned.
        ah.av = wqe_av(unsafe { dv.av.read_unaligned() });
        Ok(ah)
    }

    /// The address vector, Q_Key and remote QPN zero ([`wqe_av`]).
    pub fn av(&self) -> Av {
        self.av
    }
}
