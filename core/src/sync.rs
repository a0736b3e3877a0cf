//! The atomics shim: `core::sync::atomic` normally, `loom` under `cfg(loom)`.
