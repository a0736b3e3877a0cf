//! The hardware formats of the mlx5 Programming Reference Manual (PRM), as
//! rdma-core, the Linux kernel and DPDK implement them.
//!
//! Every format is a `#[repr(C)]` struct of big-endian field types
//! ([`zerocopy`] byte-order types, alignment 1), so that any byte slice of the
//! right length can be viewed as one without copying and without a panic.
//! Sub-word fields are declared once, as bit ranges, with
//! [`bitfield_struct`]; use sites never shift by hand. Enumerations keep the
//! raw values they do not know ([`SendOpcode::Unknown`] and friends).
//!
//! Every struct has a compile-time size assertion beside it; its field
//! offsets and bit ranges are checked against the table in `specs/prm.tsv`
//! (test `spec_table` in the `mlx5dp-tests` crate) and against
//! `<infiniband/mlx5dv.h>` (test `c_header`).
//!
//! Panic policy: nothing in this module panics. Views never validate;
//! decoding functions that validate return a typed error.
#![forbid(unsafe_code)]

mod cqe;
mod doorbell;
mod enums;
mod rq;
mod wqe;

pub use cqe::*;
pub use doorbell::*;
pub use enums::*;
pub use rq::*;
pub use wqe::*;

use zerocopy::byteorder::BigEndian;

/// A big-endian 16-bit field (alignment 1).
pub type Be16 = zerocopy::byteorder::U16<BigEndian>;
/// A big-endian 32-bit field (alignment 1).
pub type Be32 = zerocopy::byteorder::U32<BigEndian>;
/// A big-endian 64-bit field (alignment 1).
pub type Be64 = zerocopy::byteorder::U64<BigEndian>;

/// Declares a fixed-size wire format: `#[repr(C)]`, the zerocopy traits, and
/// a compile-time assertion of its size in bytes.
macro_rules! wire_struct {
    (
        $(#[$meta:meta])*
        pub struct $name:ident ($size:expr) {
            $( $(#[$fmeta:meta])* pub $field:ident : $ty:ty, )*
        }
    ) => {
        $(#[$meta])*
        #[repr(C)]
        #[derive(
            zerocopy::FromBytes,
            zerocopy::IntoBytes,
            zerocopy::KnownLayout,
            zerocopy::Immutable,
            zerocopy::Unaligned,
            Clone,
            Copy,
            Debug,
            PartialEq,
            Eq,
        )]
        pub struct $name {
            $( $(#[$fmeta])* pub $field: $ty, )*
        }

        const _: () = assert!(core::mem::size_of::<$name>() == $size);

        impl Default for $name {
            fn default() -> Self {
                zerocopy::FromZeros::new_zeroed()
            }
        }

        impl $name {
            /// Size of this format in bytes.
            pub const SIZE: usize = $size;
        }
    };
}
pub(crate) use wire_struct;

/// Declares an enumeration of raw hardware values that keeps the values it
/// does not name (`Unknown(raw)`), with its PRM/rdma-core names.
macro_rules! prm_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident : $repr:ty {
            $( $(#[$vmeta:meta])* $variant:ident = $value:literal => $text:literal, )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $name {
            $( $(#[$vmeta])* $variant, )*
            /// A raw value this crate does not name.
            Unknown($repr),
        }

        impl $name {
            /// Every named value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),*];

            /// Decodes a raw value; unnamed values become `Unknown`.
            pub const fn from_raw(raw: $repr) -> Self {
                match raw {
                    $( $value => Self::$variant, )*
                    other => Self::Unknown(other),
                }
            }

            /// The raw hardware value.
            pub const fn raw(self) -> $repr {
                match self {
                    $( Self::$variant => $value, )*
                    Self::Unknown(raw) => raw,
                }
            }

            /// The lower-case name used by `mlx5dp decode` (`"unknown"` for
            /// unnamed values).
            pub const fn name(self) -> &'static str {
                match self {
                    $( Self::$variant => $text, )*
                    Self::Unknown(_) => "unknown",
                }
            }
        }

        impl From<$repr> for $name {
            fn from(raw: $repr) -> Self {
                Self::from_raw(raw)
            }
        }
    };
}
pub(crate) use prm_enum;

/// Send WQE basic block size in bytes (`MLX5_SEND_WQE_BB`).
pub const SEND_WQE_BB: usize = 64;
/// log2 of [`SEND_WQE_BB`] (`MLX5_SEND_WQE_SHIFT`).
pub const SEND_WQE_SHIFT: u32 = 6;
/// Size of one data-segment unit ("DS", octoword) in bytes (`MLX5_SEND_WQE_DS`).
pub const SEND_WQE_DS: usize = 16;
/// Largest DS count the 6-bit control-segment field holds (`MLX5_DSEG_MAX`).
pub const MAX_DS: u8 = 63;
/// The largest send WQE the kernel allows, in WQEBBs (`MLX5_SEND_WQE_MAX_WQEBBS`).
pub const SEND_WQE_MAX_WQEBBS: usize = 16;
