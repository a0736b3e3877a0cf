//! `mlx5dp-setup`: where the rings of `mlx5dp` come from, and the `mlx5dp` tool.
//!
//! - [`hexdump`]: reading kernel, rdma-core and plain hex dumps back into bytes.
//! - [`decode`]: `mlx5dp decode`: CQEs, WQEs and mini-CQEs as fields or JSON,
//!   and the record format of `hw-traces/`.
//! - [`backend`]: the interface scenarios and tools run against, over the
//!   emulated device ([`emu`]) or a ConnectX (`verbs`, with the feature `verbs`).
//! - [`trace_record`]: `mlx5dp trace record` / `trace replay`.

pub mod backend;
pub mod cpu;
pub mod decode;
pub mod emu;
pub mod encode;
pub mod hexdump;
pub mod info;
pub mod perf;
pub mod trace_record;
pub mod verbs;
