//! The end-to-end scenarios that run on every backend.
//!
//! Each is a function of a [`Backend`]: the `e2e_*.rs` tests run them on the
//! emulated device (step mode, and with the device on its own thread), and
//! `hw_scenarios.rs` runs the same functions on a ConnectX through
//! `mlx5dp_setup::verbs::VerbsBackend` (`--features verbs`,
//! `MLX5DP_DEVICE=mlx5_0`, `--ignored`).
//!
//! Where hardware and the emulator differ only in what can be observed,
//! the scenario asks the backend ([`Backend::emulated`]): the emulator's
//! vendor syndromes (its own, `emu::VendorSyndrome`) and its reports of
//! the core's mistakes are checked on the emulator only. Scenarios that
//! need the emulator's powers (fault injection, forced CQE compression,
//! step mode, a striding RQ on a QP that also sends, address vectors that
//! do not address the port, invalidatable region keys, the window state
//! behind `Device::mw_state`) stay in the `e2e_*.rs` files, each marked
//! "emulator only" with the reason; so do the memory-window rules whose
//! outcome on a ConnectX is not established (zero-based windows, a bind
//! over a region without `MW_BIND`, a type-2 unbind by a zero-length
//! bind: see [`mw`]).
//!
//! - [`rc`]: RC send/receive, RDMA and atomics, raw Ethernet, ring wraps,
//!   regular completions;
//! - [`faults`]: error completions and flushes caused by one bad work
//!   request;
//! - [`rx`]: shared receive queues, XRC, a receive-only striding RQ;
//! - [`mw`]: memory windows (bind, use, bounds and rights, invalidation);
//! - [`ud`]: UD datagrams over the address vector of
//!   [`Backend::create_ah`] (delivery, GRH, Q_Key drops, the MTU);
//! - [`random`]: the seeded randomised run.

pub mod faults;
pub mod mw;
pub mod random;
pub mod rc;
pub mod rx;
pub mod ud;

use crate::e2e::Fabric;
use mlx5dp_setup::backend::Backend;
use mlx5dp_setup::emu::EmuEvent;

/// Device-side reports of core mistakes: none may appear. (Only the
/// emulated device reports them; on hardware the list is empty.)
pub fn no_core_mistakes<B: Backend>(f: &mut Fabric<B>) {
    let bad: Vec<EmuEvent> =
        f.be.take_events()
            .into_iter()
            .filter(|e| {
                matches!(
                    e,
                    EmuEvent::CqCiAhead { .. }
                        | EmuEvent::SqDoorbellOverrun { .. }
                        | EmuEvent::WqeBeyondDoorbell { .. }
                        | EmuEvent::UarBeforeDbrec { .. }
                        | EmuEvent::BlueFlameMismatch { .. }
                        | EmuEvent::UarUnknownTarget { .. }
                        | EmuEvent::ArmMismatch { .. }
                        | EmuEvent::RqDoorbellOverrun { .. }
                        | EmuEvent::CqOverrun { .. }
                )
            })
            .collect();
    assert!(bad.is_empty(), "the device saw core mistakes: {bad:?}");
}
