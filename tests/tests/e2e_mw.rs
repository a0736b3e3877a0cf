//! End-to-end memory windows on the emulated device, posted and polled
//! through the core only: [`Batch::bind_mw`] builds the bind (libmlx5's
//! `IBV_WR_BIND_MW` UMR), the device parses it on its own and binds the
//! window, the peer's RDMA write and read go through the window's new
//! rkey, and the CQ reports the bind as `IBV_WC_BIND_MW` with its wr_id.
//!
//! The shared scenarios (`mlx5dp_tests::scenarios::mw`: bind and use,
//! bounds and rights, stale and wrong-QP keys, every way of killing a key)
//! run here in step mode and with the device on its own thread, and on a
//! ConnectX in `hw_scenarios.rs`. The checks below are emulator only:
//!
//! - zero-based windows, and a bind over a region registered without
//!   `MW_BIND`: what a ConnectX does with either is not established (the
//!   mlx5 kernel driver maps `IB_ACCESS_MW_BIND` to no mkey bit), and both
//!   read the window's state through `Device::mw_state`;
//! - the unbind of a type-2 window by a zero-length bind: libmlx5 builds
//!   it (`CHECK_QPN`), but the IBA invalidates type-2 windows by local
//!   invalidate or send with invalidate, and no rdma-core test runs it on
//!   hardware.
//!
//! [`Batch::bind_mw`]: mlx5dp::sq::Batch::bind_mw

use mlx5dp::cq::WcOpcode;
use mlx5dp::prm::{Syndrome, WcStatus};
use mlx5dp::sq::{MwBind, MwType};
use mlx5dp_setup::backend::EmuBackend;
use mlx5dp_setup::emu::{Access, DeviceConfig, VendorSyndrome};
use mlx5dp_tests::scenarios::mw::{self, assert_done, inc_rkey, World};

fn step() -> EmuBackend {
    EmuBackend::step_mode(DeviceConfig::default())
}

fn threaded() -> EmuBackend {
    EmuBackend::threaded(DeviceConfig::default()).expect("device thread")
}

#[test]
fn bind_write_read_step() {
    mw::bind_write_read(step());
}

#[test]
fn bind_write_read_thread() {
    mw::bind_write_read(threaded());
}

#[test]
fn type1_serves_any_qp_of_the_pd_step() {
    mw::type1_serves_any_qp_of_the_pd(step());
}

#[test]
fn type1_serves_any_qp_of_the_pd_thread() {
    mw::type1_serves_any_qp_of_the_pd(threaded());
}

#[test]
fn outside_the_window_fails_step() {
    mw::outside_the_window_fails(step());
}

#[test]
fn outside_the_window_fails_thread() {
    mw::outside_the_window_fails(threaded());
}

#[test]
fn stale_unbound_and_wrong_qp_keys_fail_step() {
    mw::stale_unbound_and_wrong_qp_keys_fail(step());
}

#[test]
fn stale_unbound_and_wrong_qp_keys_fail_thread() {
    mw::stale_unbound_and_wrong_qp_keys_fail(threaded());
}

#[test]
fn invalidation_kills_the_key_step() {
    mw::invalidation_kills_the_key(step());
}

#[test]
fn invalidation_kills_the_key_thread() {
    mw::invalidation_kills_the_key(threaded());
}

/// Emulator only (see the module documentation): a zero-based window
/// counts remote addresses from its start, and the region address is not
/// a window address any more.
#[test]
fn a_zero_based_window_counts_remote_addresses_from_its_start() {
    let mut w = World::new(step());
    let (a, b) = (w.p.a, w.p.b);
    let mw = w.alloc_mw(MwType::Type2);
    let new = inc_rkey(mw);
    let mut bind = w.bind_info(MwType::Type2, mw, new, 0x2000, 0x100);
    bind.access |= MwBind::ZERO_BASED;
    assert_done(&w.bind(b, 9, &bind), b, 9, WcOpcode::BindMw);
    let (state_key, binding) = w.f.be.with(|d| d.mw_state(new)).expect("the window exists");
    let binding = binding.expect("bound");
    assert_eq!(state_key, new);
    assert!(binding.zero_based);
    // Remote address 0x20 is the window's start + 0x20.
    assert_done(
        &w.write(1, new, 0x20, b"zero based"),
        a,
        1,
        WcOpcode::RdmaWrite,
    );
    assert_eq!(w.p.region.read(0x2020, 10), b"zero based");
    w.p.region.write(0x20f8, b"ends8byt");
    let (g, got) = w.read(2, new, 0xf8, 8);
    assert_done(&g, a, 2, WcOpcode::RdmaRead);
    assert_eq!(got, b"ends8byt");
    let raddr = w.p.region.addr(0x2020);
    let g = w.write(3, new, raddr, b"va");
    w.assert_remote_access(&g, 3, VendorSyndrome::Bounds);
    w.finish();
}

/// Emulator only (see the module documentation): a type-2 window is
/// unbound by a zero-length bind from its QP, reported as a bind.
#[test]
fn a_zero_length_bind_unbinds_a_type2_window() {
    let mut w = World::new(step());
    let b = w.p.b;
    let mw = w.alloc_mw(MwType::Type2);
    let k1 = inc_rkey(mw);
    let bind = w.bind_info(MwType::Type2, mw, k1, 0, 0x100);
    assert_done(&w.bind(b, 1, &bind), b, 1, WcOpcode::BindMw);
    let k2 = inc_rkey(k1);
    let unbind = w.bind_info(MwType::Type2, k1, k2, 0, 0);
    assert_done(&w.bind(b, 2, &unbind), b, 2, WcOpcode::BindMw);
    assert_eq!(w.f.be.with(|d| d.mw_state(mw)), Some((k2, None)));
    let raddr = w.p.region.addr(0);
    let g = w.write(3, k1, raddr, b"unbound");
    w.assert_remote_access(&g, 3, VendorSyndrome::BadKey);
    w.finish();
}

/// Emulator only (see the module documentation): a bind over a region
/// registered without `MW_BIND` fails with `IBV_WC_MW_BIND_ERR` (IBA
/// C10-73) and binds nothing.
#[test]
fn a_window_over_a_region_without_mw_bind_fails_to_bind() {
    let mut w = World::with_region_access(step(), Access::ALL);
    let b = w.p.b;
    let mw = w.alloc_mw(MwType::Type2);
    let bind = w.bind_info(MwType::Type2, mw, inc_rkey(mw), 0, 0x100);
    let g = w.bind(b, 0xbad, &bind);
    assert_eq!(
        (g.wr_id, g.status, g.syndrome, g.vendor_err),
        (
            0xbad,
            WcStatus::MwBindErr,
            Some(Syndrome::MwBind),
            VendorSyndrome::AccessRight as u32
        ),
        "{g:?}"
    );
    assert_eq!(w.f.be.with(|d| d.mw_state(mw)), Some((mw, None)));
    w.finish();
}
