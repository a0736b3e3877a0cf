//! The QP type as a compile-time choice (STYLE point 10): a marker type
//! whose constant replaces the per-work-request test of
//! [`SqConfig::qp_type`](super::SqConfig::qp_type).
//!
//! With [`AnyQp`] (the default of [`SendQueue`](super::SendQueue)) the type
//! is read from the configuration for every work request, as before; with
//! [`RcQp`], [`UcQp`], [`UdQp`], [`XrcQp`] or [`RawPacketQp`] (built with
//! [`SendQueue::new_typed`](super::SendQueue::new_typed), which checks the
//! configuration against it) every test of the QP type is a constant and
//! the compiler drops the branches of the other types.
#![forbid(unsafe_code)]

use super::QpType;

mod sealed {
    pub trait Sealed {}
}

/// Which QP type a send queue serves, when known at compile time.
pub trait QpKind: sealed::Sealed {
    /// The QP type, or `None` to read it from the configuration.
    const TYPE: Option<QpType>;
}

/// The QP type of [`SqConfig::qp_type`](super::SqConfig::qp_type), read
/// per work request.
#[derive(Debug, Clone, Copy, Default)]
pub struct AnyQp;
/// Reliable connected (`IBV_QPT_RC`).
#[derive(Debug, Clone, Copy, Default)]
pub struct RcQp;
/// Unreliable connected (`IBV_QPT_UC`).
#[derive(Debug, Clone, Copy, Default)]
pub struct UcQp;
/// Unreliable datagram (`IBV_QPT_UD`).
#[derive(Debug, Clone, Copy, Default)]
pub struct UdQp;
/// XRC initiator (`IBV_QPT_XRC_SEND`).
#[derive(Debug, Clone, Copy, Default)]
pub struct XrcQp;
/// Raw Ethernet (`IBV_QPT_RAW_PACKET`).
#[derive(Debug, Clone, Copy, Default)]
pub struct RawPacketQp;

macro_rules! kinds {
    ($($marker:ident => $ty:expr,)*) => {
        $(
            impl sealed::Sealed for $marker {}
            impl QpKind for $marker {
                const TYPE: Option<QpType> = $ty;
            }
        )*
    };
}

kinds! {
    AnyQp => None,
    RcQp => Some(QpType::Rc),
    UcQp => Some(QpType::Uc),
    UdQp => Some(QpType::Ud),
    XrcQp => Some(QpType::Xrc),
    RawPacketQp => Some(QpType::RawPacket),
}
