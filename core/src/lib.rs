//! `mlx5dp`: the `no_std` data path for NVIDIA/Mellanox ConnectX (mlx5) NICs.
//!
//! The core owns the raw rings once `mlx5dp-setup` has created them: it
//! formats work queue entries, rings doorbells with the barriers the hardware
//! needs and polls completion queue entries. It allocates nothing and calls
//! no operating-system or rdma-core function.
//!
//! Modules:
//! - [`prm`]: the hardware formats of the Programming Reference Manual.
//! - [`barrier`]: the memory-ordering primitives, named by intent.
//! - [`sync`]: the atomics shim that lets `loom` model the handshakes.
//! - [`index`]: ring index arithmetic.
//! - [`sq`]: the send queue.
#![no_std]

#[cfg(any(test, loom))]
extern crate std;

pub mod barrier;
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
pub mod cpu;
pub mod cq;
pub mod index;
pub mod mmio;
pub mod prm;
pub mod ring;
pub mod rq;
pub mod sq;
pub mod sync;
