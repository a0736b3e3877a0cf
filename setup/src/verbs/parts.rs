//! `mlx5dv_init_obj` and the checks between its output and the core.
//!
//! rdma-core fills `struct mlx5dv_qp`/`mlx5dv_cq`/`mlx5dv_srq`/`mlx5dv_rwq`
//! with pointers and sizes the core will trust for the life of the queue,
//! so each value is checked first (sizes powers of two, pointers non-null
//! and aligned, a BlueFlame size of 0 meaning doorbell only) and anything
//! else is a [`PartsError`] naming the field. The `check_*` functions are
//! pure (tested here on made-up structs); the owners in
//! [`super::resources`] call them on what `mlx5dv_init_obj` returned and
//! build the core's types.

use super::ffi::{mlx5dv_cq, mlx5dv_qp, mlx5dv_rwq, mlx5dv_srq, MLX5DV_SRQ_MASK_SRQN};
use core::fmt;
use mlx5dp::cq::CqeSize;

/// A value `mlx5dv_init_obj` returned that the core cannot take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PartsError {
    /// `mlx5dv_init_obj` itself failed.
    InitObj {
        /// Its return value (an errno).
        errno: i32,
    },
    /// A pointer is null.
    Null(&'static str),
    /// A pointer is not aligned as the core needs.
    Misaligned {
        /// The field.
        field: &'static str,
        /// The alignment it needs.
        align: usize,
    },
    /// A count or stride is not a power of two (or is zero).
    NotPowerOfTwo {
        /// The field.
        field: &'static str,
        /// Its value.
        value: u32,
    },
    /// A stride or size the core does not support.
    BadSize {
        /// The field.
        field: &'static str,
        /// Its value.
        value: u32,
    },
    /// The queue asked for does not exist on this object (an XRC target
    /// has no SQ; an SRQ-attached QP has no RQ).
    NoQueue(&'static str),
    /// The SRQ number was not returned (`MLX5DV_SRQ_MASK_SRQN` unset).
    NoSrqn,
    /// The CQN or QPN does not fit in 24 bits.
    NumberTooLarge(u32),
}

impl fmt::Display for PartsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PartsError::InitObj { errno } => write!(f, "mlx5dv_init_obj returned {errno}"),
            PartsError::Null(field) => write!(f, "{field} is null"),
            PartsError::Misaligned { field, align } => {
                write!(f, "{field} is not {align}-byte aligned")
            }
            PartsError::NotPowerOfTwo { field, value } => {
                write!(f, "{field} = {value} is not a power of two")
            }
            PartsError::BadSize { field, value } => write!(f, "{field} = {value} is unsupported"),
            PartsError::NoQueue(which) => write!(f, "the object has no {which}"),
            PartsError::NoSrqn => f.write_str("mlx5dv_srq.srqn was not returned"),
            PartsError::NumberTooLarge(n) => write!(f, "queue number {n:#x} exceeds 24 bits"),
        }
    }
}

impl std::error::Error for PartsError {}

/// A checked send queue of `mlx5dv_qp`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CheckedSq {
    /// `sq.buf`.
    pub buf: *mut u8,
    /// `sq.wqe_cnt` (WQEBBs).
    pub wqe_cnt: u32,
    /// `&dbrec[MLX5_SND_DBR]`.
    pub dbrec: *mut u32,
    /// `bf.reg`.
    pub bf_reg: *mut u8,
    /// `bf.size` (0 = doorbell only).
    pub bf_size: u32,
}

/// A checked receive ring (QP RQ, SRQ or WQ).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CheckedRq {
    /// The ring.
    pub buf: *mut u8,
    /// Number of WQEs.
    pub wqe_cnt: u32,
    /// log2 of the WQE stride.
    pub wqe_shift: u8,
    /// The doorbell-record word.
    pub dbrec: *mut u32,
    /// SRQ number (SRQs only; 0 otherwise).
    pub srqn: u32,
}

/// A checked `mlx5dv_cq`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CheckedCq {
    /// CQE ring.
    pub buf: *mut u8,
    /// Number of CQEs.
    pub cqe_cnt: u32,
    /// CQE size.
    pub cqe_size: CqeSize,
    /// Doorbell record.
    pub dbrec: *mut u32,
    /// UAR page.
    pub uar: *mut u8,
    /// CQN.
    pub cqn: u32,
}

/// `MLX5_SND_WQE_BB`.
const SEND_WQE_BB: u32 = 64;
/// `MLX5_SND_DBR`: the SQ word of a QP's doorbell record.
const SND_DBR: usize = 1;
/// `MLX5_RCV_DBR`.
const RCV_DBR: usize = 0;

fn non_null<T>(p: *mut T, field: &'static str, align: usize) -> Result<(), PartsError> {
    if p.is_null() {
        return Err(PartsError::Null(field));
    }
    if p.addr() % align != 0 {
        return Err(PartsError::Misaligned { field, align });
    }
    Ok(())
}

fn pow2(value: u32, field: &'static str) -> Result<(), PartsError> {
    if value == 0 || !value.is_power_of_two() {
        return Err(PartsError::NotPowerOfTwo { field, value });
    }
    Ok(())
}

/// A receive stride: a power of two of at least one 16-byte segment.
fn rq_stride(stride: u32, field: &'static str) -> Result<u8, PartsError> {
    pow2(stride, field)?;
    if stride < 16 {
        return Err(PartsError::BadSize {
            field,
            value: stride,
        });
    }
    Ok(stride.trailing_zeros() as u8)
}

/// Checks the send queue of `qp` (PRM-FACTS §7 for the BlueFlame rules).
pub fn check_sq(qp: &mlx5dv_qp) -> Result<CheckedSq, PartsError> {
    if qp.sq.wqe_cnt == 0 {
        return Err(PartsError::NoQueue("send queue"));
    }
    non_null(qp.sq.buf, "mlx5dv_qp.sq.buf", 64)?;
    pow2(qp.sq.wqe_cnt, "mlx5dv_qp.sq.wqe_cnt")?;
    if qp.sq.stride != SEND_WQE_BB {
        return Err(PartsError::BadSize {
            field: "mlx5dv_qp.sq.stride",
            value: qp.sq.stride,
        });
    }
    non_null(qp.dbrec, "mlx5dv_qp.dbrec", 4)?;
    non_null(qp.bf.reg, "mlx5dv_qp.bf.reg", 8)?;
    // 0: no BlueFlame buffer (uuar 0 / MLX5_SHUT_UP_BF), 8-byte doorbells
    // only. Otherwise one half of the bfreg, a power of two that holds at
    // least one 64-byte chunk (256 on every ConnectX so far).
    if qp.bf.size != 0 && (!qp.bf.size.is_power_of_two() || qp.bf.size < 64) {
        return Err(PartsError::BadSize {
            field: "mlx5dv_qp.bf.size",
            value: qp.bf.size,
        });
    }
    Ok(CheckedSq {
        buf: qp.sq.buf.cast(),
        wqe_cnt: qp.sq.wqe_cnt,
        dbrec: qp.dbrec.wrapping_add(SND_DBR),
        bf_reg: qp.bf.reg.cast(),
        bf_size: qp.bf.size,
    })
}

/// Checks the receive queue of `qp`.
pub fn check_qp_rq(qp: &mlx5dv_qp) -> Result<CheckedRq, PartsError> {
    if qp.rq.wqe_cnt == 0 {
        return Err(PartsError::NoQueue("receive queue"));
    }
    non_null(qp.rq.buf, "mlx5dv_qp.rq.buf", 16)?;
    pow2(qp.rq.wqe_cnt, "mlx5dv_qp.rq.wqe_cnt")?;
    let wqe_shift = rq_stride(qp.rq.stride, "mlx5dv_qp.rq.stride")?;
    non_null(qp.dbrec, "mlx5dv_qp.dbrec", 4)?;
    Ok(CheckedRq {
        buf: qp.rq.buf.cast(),
        wqe_cnt: qp.rq.wqe_cnt,
        wqe_shift,
        dbrec: qp.dbrec.wrapping_add(RCV_DBR),
        srqn: 0,
    })
}

/// Checks a CQ.
pub fn check_cq(cq: &mlx5dv_cq) -> Result<CheckedCq, PartsError> {
    non_null(cq.buf, "mlx5dv_cq.buf", 64)?;
    pow2(cq.cqe_cnt, "mlx5dv_cq.cqe_cnt")?;
    let cqe_size = match cq.cqe_size {
        64 => CqeSize::B64,
        128 => CqeSize::B128,
        value => {
            return Err(PartsError::BadSize {
                field: "mlx5dv_cq.cqe_size",
                value,
            })
        }
    };
    non_null(cq.dbrec, "mlx5dv_cq.dbrec", 4)?;
    non_null(cq.cq_uar, "mlx5dv_cq.cq_uar", 8)?;
    if cq.cqn >= 1 << 24 {
        return Err(PartsError::NumberTooLarge(cq.cqn));
    }
    Ok(CheckedCq {
        buf: cq.buf.cast(),
        cqe_cnt: cq.cqe_cnt,
        cqe_size,
        dbrec: cq.dbrec,
        uar: cq.cq_uar.cast(),
        cqn: cq.cqn,
    })
}

/// Checks an SRQ. libmlx5 links free SRQ WQEs from `head` to `tail`; a
/// fresh SRQ has `head = 0`, `tail = wqe_cnt - 1`, so the ring holds
/// `tail + 1` WQEs.
pub fn check_srq(srq: &mlx5dv_srq) -> Result<CheckedRq, PartsError> {
    non_null(srq.buf, "mlx5dv_srq.buf", 16)?;
    non_null(srq.dbrec, "mlx5dv_srq.dbrec", 4)?;
    let wqe_shift = rq_stride(srq.stride, "mlx5dv_srq.stride")?;
    if srq.head != 0 {
        return Err(PartsError::BadSize {
            field: "mlx5dv_srq.head (not a fresh SRQ)",
            value: srq.head,
        });
    }
    let wqe_cnt = srq.tail.wrapping_add(1);
    pow2(wqe_cnt, "mlx5dv_srq.tail + 1")?;
    if srq.comp_mask & MLX5DV_SRQ_MASK_SRQN == 0 {
        return Err(PartsError::NoSrqn);
    }
    if srq.srqn >= 1 << 24 {
        return Err(PartsError::NumberTooLarge(srq.srqn));
    }
    Ok(CheckedRq {
        buf: srq.buf.cast(),
        wqe_cnt,
        wqe_shift,
        dbrec: srq.dbrec,
        srqn: srq.srqn,
    })
}

/// Checks a receive work queue (striding RQ).
pub fn check_rwq(rwq: &mlx5dv_rwq) -> Result<CheckedRq, PartsError> {
    non_null(rwq.buf, "mlx5dv_rwq.buf", 16)?;
    pow2(rwq.wqe_cnt, "mlx5dv_rwq.wqe_cnt")?;
    let wqe_shift = rq_stride(rwq.stride, "mlx5dv_rwq.stride")?;
    non_null(rwq.dbrec, "mlx5dv_rwq.dbrec", 4)?;
    Ok(CheckedRq {
        buf: rwq.buf.cast(),
        wqe_cnt: rwq.wqe_cnt,
        wqe_shift,
        dbrec: rwq.dbrec,
        srqn: 0,
    })
}
