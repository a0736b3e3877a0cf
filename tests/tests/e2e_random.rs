//! The seeded randomised run (`mlx5dp_tests::scenarios::random`) on the
//! emulated device: step mode (plain and with compressed CQs) and with the
//! device on its own thread; `hw_scenarios.rs` runs it on a ConnectX.
//!
//! The seed is printed; set `E2E_SEED` to replay a run, `E2E_OPS` to change
//! its length (default 12 000 operations in step mode).

use mlx5dp_setup::backend::EmuBackend;
use mlx5dp_setup::emu::DeviceConfig;
use mlx5dp_tests::scenarios::random::{ops, randomised, seed};

#[test]
fn randomised_step_mode() {
    randomised(
        EmuBackend::step_mode(DeviceConfig::default()),
        seed(),
        ops(12_000),
        false,
    );
}

#[test]
fn randomised_step_mode_compressed() {
    randomised(
        EmuBackend::step_mode(DeviceConfig::default()),
        seed() ^ 1,
        ops(12_000),
        true,
    );
}

#[test]
fn randomised_device_thread() {
    randomised(
        EmuBackend::threaded(DeviceConfig::default()).expect("thread"),
        seed() ^ 2,
        ops(4_000),
        false,
    );
}
