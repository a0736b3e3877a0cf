//! End-to-end scenarios on a real ConnectX, through the `verbs` backend:
//! the SAME functions the `e2e_*.rs` tests run on the emulated device
//! (`mlx5dp_tests::scenarios`), on `mlx5dp_setup::verbs::VerbsBackend`.
//!
//! Compiled only with the `verbs` feature of this crate, which forwards to
//! `mlx5dp-setup/verbs` (`required-features` in tests/Cargo.toml). On a
//! machine with a ConnectX:
//!
//! ```sh
//! MLX5DP_DEVICE=mlx5_0 cargo test -p mlx5dp-tests --features verbs --test hw_scenarios -- --ignored
//! ```
//!
//! (`MLX5DP_PORT`, default 1, and `MLX5DP_GID_INDEX`, default 0, choose
//! the port and GID; every QP lives on that port and talks to the others
//! through it.) The tests are ignored by default: without a device they
//! would fail at once with `NoDevice` ("use the emulated ConnectX instead:
//! --device emu"); the one test that runs everywhere checks exactly that.
//!
//! What stays emulator only (fault injection, forced or enhanced CQE
//! compression, step mode, striding RQs on QPs that also send, UD address
//! vectors that do not address the port, masked atomics, invalidatable
//! region keys, zero-based memory windows, window binds over a region
//! without `MW_BIND`, type-2 unbinds by a zero-length bind) is listed in
//! `mlx5dp_tests::scenarios` and marked in the `e2e_*.rs` files.

use mlx5dp::sq::{BlueFlameInline, BlueFlamePreferred, DoorbellOnly};
use mlx5dp_setup::verbs::{self, Context, VerbsBackend, VerbsError};
use mlx5dp_tests::scenarios::faults::{fault_case, Bad};
use mlx5dp_tests::scenarios::{mw, random, rc, rx, ud};

/// The device `MLX5DP_DEVICE` names (default: the first one).
fn hw() -> VerbsBackend {
    VerbsBackend::open_from_env().unwrap_or_else(|e| panic!("{e}"))
}

const NEEDS: &str = "needs a ConnectX (MLX5DP_DEVICE=mlx5_0)";

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

/// RC send/receive between two QPs of one port, through the core, without
/// the `Backend` layer (the first thing to try on a new machine).
#[test]
#[ignore = "needs a ConnectX (MLX5DP_DEVICE=mlx5_0)"]
fn rc_loopback_smoke() {
    let r = verbs::smoke::rc_loopback().unwrap_or_else(|e| panic!("{e}"));
    eprintln!("{r:?}");
    assert!(r.data_ok, "{r:?}");
}

#[test]
#[ignore = "needs a ConnectX (MLX5DP_DEVICE=mlx5_0)"]
fn rc_send_recv() {
    rc::rc_send_recv(hw());
}

#[test]
#[ignore = "needs a ConnectX (MLX5DP_DEVICE=mlx5_0)"]
fn rdma_and_atomics() {
    rc::rdma_and_atomics(hw());
}

#[test]
#[ignore = "needs a ConnectX whose port loops frames back (local loopback, or a looped cable)"]
fn raw_ethernet_loopback() {
    rc::raw_loopback(hw());
}

#[test]
#[ignore = "needs a ConnectX (MLX5DP_DEVICE=mlx5_0)"]
fn ring_wraps_doorbell_only() {
    rc::wraps::<_, DoorbellOnly>(hw(), 300);
}

#[test]
#[ignore = "needs a ConnectX (MLX5DP_DEVICE=mlx5_0)"]
fn ring_wraps_blueflame_preferred() {
    rc::wraps::<_, BlueFlamePreferred>(hw(), 300);
}

#[test]
#[ignore = "needs a ConnectX (MLX5DP_DEVICE=mlx5_0)"]
fn ring_wraps_blueflame_inline() {
    rc::wraps::<_, BlueFlameInline>(hw(), 300);
}

#[test]
#[ignore = "needs a ConnectX (MLX5DP_DEVICE=mlx5_0)"]
fn origin_regular_without_compression() {
    rc::origin_regular_without_compression(hw());
}

/// Every fault a ConnectX makes by itself ([`Bad::ON_HARDWARE`]), each on
/// fresh QPs: the error completion's status, flushes after it, exactly
/// once everywhere.
#[test]
#[ignore = "needs a ConnectX (MLX5DP_DEVICE=mlx5_0)"]
fn faults() {
    for bad in Bad::ON_HARDWARE {
        eprintln!("fault {bad:?}");
        fault_case(hw(), bad);
    }
}

#[test]
#[ignore = "needs a ConnectX (MLX5DP_DEVICE=mlx5_0)"]
fn srq_shared_by_two_qps() {
    rx::srq_shared_by_two_qps(hw());
}

#[test]
#[ignore = "needs a ConnectX (MLX5DP_DEVICE=mlx5_0)"]
fn srq_error_and_flush_keep_the_shared_queue() {
    rx::srq_error_and_flush_keep_the_shared_queue(hw());
}

#[test]
#[ignore = "needs a ConnectX (MLX5DP_DEVICE=mlx5_0)"]
fn xrc_across_two_domains() {
    rx::xrc_across_two_domains(hw());
}

/// A striding RQ as a WQ behind an RSS QP (receive only), fed by a
/// RAW_PACKET QP through a steering rule: needs the frames looped back
/// like `raw_ethernet_loopback`, and striding RQ caps that allow 2^9
/// strides of 64 bytes (ConnectX-5 and later).
#[test]
#[ignore = "needs a ConnectX whose port loops frames back (local loopback, or a looped cable)"]
fn striding_rq_receive_only() {
    rx::striding_rq_receive_only(hw());
}

/// Memory windows through `ibv_alloc_mw`, bound by the core's UMR.
#[test]
#[ignore = "needs a ConnectX (MLX5DP_DEVICE=mlx5_0)"]
fn mw_bind_write_read() {
    mw::bind_write_read(hw());
}

#[test]
#[ignore = "needs a ConnectX (MLX5DP_DEVICE=mlx5_0)"]
fn mw_type1_serves_any_qp_of_the_pd() {
    mw::type1_serves_any_qp_of_the_pd(hw());
}

#[test]
#[ignore = "needs a ConnectX (MLX5DP_DEVICE=mlx5_0)"]
fn mw_outside_the_window_fails() {
    mw::outside_the_window_fails(hw());
}

#[test]
#[ignore = "needs a ConnectX (MLX5DP_DEVICE=mlx5_0)"]
fn mw_stale_unbound_and_wrong_qp_keys_fail() {
    mw::stale_unbound_and_wrong_qp_keys_fail(hw());
}

#[test]
#[ignore = "needs a ConnectX (MLX5DP_DEVICE=mlx5_0)"]
fn mw_invalidation_kills_the_key() {
    mw::invalidation_kills_the_key(hw());
}

/// UD through the address vector `ibv_create_ah` + `mlx5dv_init_obj`
/// give for the port itself.
#[test]
#[ignore = "needs a ConnectX (MLX5DP_DEVICE=mlx5_0)"]
fn ud_send_with_an_address_handle_delivers() {
    ud::send_with_an_address_handle_delivers(hw());
}

#[test]
#[ignore = "needs a ConnectX (MLX5DP_DEVICE=mlx5_0)"]
fn ud_a_global_handle_delivers_with_a_grh() {
    ud::a_global_handle_delivers_with_a_grh(hw());
}

#[test]
#[ignore = "needs a ConnectX (MLX5DP_DEVICE=mlx5_0)"]
fn ud_a_wrong_q_key_is_dropped() {
    ud::a_wrong_q_key_is_dropped(hw());
}

#[test]
#[ignore = "needs a ConnectX (MLX5DP_DEVICE=mlx5_0)"]
fn ud_one_handle_reaches_every_qp() {
    ud::one_handle_reaches_every_qp(hw());
}

#[test]
#[ignore = "needs a ConnectX (MLX5DP_DEVICE=mlx5_0)"]
fn ud_a_datagram_beyond_the_mtu_fails() {
    ud::a_datagram_beyond_the_mtu_fails(hw());
}

/// The randomised run; hardware cannot inject failures, so the errors are
/// the bad-lkey work requests the run posts.
#[test]
#[ignore = "needs a ConnectX (MLX5DP_DEVICE=mlx5_0)"]
fn randomised() {
    random::randomised(hw(), random::seed() ^ 3, random::ops(4_000), false);
}

/// Without a device the backend fails at once and names the emulator.
#[test]
fn no_device_is_clear() {
    if std::env::var("MLX5DP_DEVICE").is_ok() {
        return;
    }
    match VerbsBackend::open("mlx5_0") {
        Ok(_) => eprintln!("an RDMA device is present: run the ignored tests ({NEEDS})"),
        Err(e) => {
            assert!(
                matches!(e, VerbsError::NoDevice | VerbsError::DeviceNotFound { .. }),
                "{e:?}"
            );
            let text = e.to_string();
            assert!(text.contains("--device emu"), "{text}");
            assert!(!text.contains('\n'), "{text}");
        }
    }
    if let Err(e) = verbs::list_devices() {
        assert_eq!(e, VerbsError::NoDevice);
        assert!(e.to_string().contains("emulated ConnectX"));
    }
}
