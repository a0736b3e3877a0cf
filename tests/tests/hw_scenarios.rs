//! End-to-end scenarios on a real ConnectX, through the `verbs` backend.
//!
//! Compiled only with the `verbs` feature of this crate, which forwards to
//! `mlx5dp-setup/verbs` (`required-features` in tests/Cargo.toml). On a
//! machine with a ConnectX:
//! `MLX5DP_DEVICE=mlx5_0 cargo test -p mlx5dp-tests --features verbs --test hw_scenarios -- --ignored`
//!
//! The tests are ignored by default: without a device they would fail with
//! `NoDevice` ("use the emulated ConnectX instead: --device emu"). The
//! emulator's scenarios (e2e_*.rs) cannot run here yet: `Backend` returns
//! emulator types (see `mlx5dp_setup::verbs`); when it gains associated
//! types they move behind it and run on both.

use mlx5dp_setup::verbs::{self, Context, VerbsError};

/// The device answers its capability queries and its clock runs.
#[test]
#[ignore = "needs a ConnectX (MLX5DP_DEVICE=mlx5_0)"]
fn caps_and_clock() {
    let ctx = Context::open_from_env().unwrap_or_else(|e| panic!("{e}"));
    let caps = ctx.query_caps().unwrap_or_else(|e| panic!("{e}"));
    eprintln!("{}: {caps:#?}", ctx.name());
    assert!(caps.max_qp_wr > 0 && caps.max_sge > 0);
    let t0 = ctx.read_hca_clock().unwrap_or_else(|e| panic!("{e}"));
    std::thread::sleep(std::time::Duration::from_millis(10));
    let t1 = ctx.read_hca_clock().unwrap_or_else(|e| panic!("{e}"));
    assert!(t1 > t0, "HCA clock did not advance: {t0} -> {t1}");
}

/// RC send/receive between two QPs of one port, through the core.
#[test]
#[ignore = "needs a ConnectX (MLX5DP_DEVICE=mlx5_0)"]
fn rc_loopback() {
    let r = verbs::smoke::rc_loopback().unwrap_or_else(|e| panic!("{e}"));
    eprintln!("{r:?}");
    assert!(r.data_ok, "{r:?}");
}

/// Without a device the backend fails at once and names the emulator.
#[test]
fn no_device_is_clear() {
    if std::env::var("MLX5DP_DEVICE").is_ok() {
        return;
    }
    if let Err(e) = verbs::list_devices() {
        assert_eq!(e, VerbsError::NoDevice);
        assert!(e.to_string().contains("--device emu"));
    }
}
