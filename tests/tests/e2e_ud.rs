//! End-to-end UD on the emulated device, posted and polled through the
//! core only: the address vector comes from `Backend::create_ah` (built
//! as libmlx5's `mlx5_create_ah` builds it for the emulated port), the
//! core copies it into each WQE with the work request's remote QPN and
//! Q_Key, and the device checks it routes to its port before it delivers.
//!
//! The shared scenarios (`mlx5dp_tests::scenarios::ud`) run here in step
//! mode and with the device on its own thread, on an InfiniBand
//! port and on a RoCE v2 port, and on a ConnectX in `hw_scenarios.rs`.
//! The checks below are emulator only: address vectors that do not
//! address the port (another LID, GID or MAC) are dropped by it, which on
//! a real fabric depends on where such a packet goes.

use mlx5dp_setup::backend::{AhAttr, Backend, EmuBackend};
use mlx5dp_setup::emu::{AvMismatch, DeviceConfig, DropReason, EmuEvent, PortConfig};
use mlx5dp_tests::scenarios::ud::{self, Rig, QKEY_B};

fn infiniband() -> DeviceConfig {
    DeviceConfig {
        port: PortConfig::INFINIBAND,
        ..DeviceConfig::default()
    }
}

/// The InfiniBand port, step mode.
fn step() -> EmuBackend {
    EmuBackend::step_mode(infiniband())
}

/// The InfiniBand port, device thread.
fn threaded() -> EmuBackend {
    EmuBackend::threaded(infiniband()).expect("device thread")
}

/// The default port (RoCE v2), step mode.
fn roce_step() -> EmuBackend {
    assert_eq!(DeviceConfig::default().port, PortConfig::ROCE_V2);
    EmuBackend::step_mode(DeviceConfig::default())
}

/// The default port (RoCE v2), device thread.
fn roce_threaded() -> EmuBackend {
    EmuBackend::threaded(DeviceConfig::default()).expect("device thread")
}

#[test]
fn send_with_an_address_handle_delivers_step() {
    ud::send_with_an_address_handle_delivers(step());
}

#[test]
fn send_with_an_address_handle_delivers_thread() {
    ud::send_with_an_address_handle_delivers(threaded());
}

#[test]
fn send_with_an_address_handle_delivers_roce_step() {
    ud::send_with_an_address_handle_delivers(roce_step());
}

#[test]
fn send_with_an_address_handle_delivers_roce_thread() {
    ud::send_with_an_address_handle_delivers(roce_threaded());
}

#[test]
fn a_global_handle_delivers_with_a_grh_step() {
    ud::a_global_handle_delivers_with_a_grh(step());
}

#[test]
fn a_global_handle_delivers_with_a_grh_thread() {
    ud::a_global_handle_delivers_with_a_grh(threaded());
}

#[test]
fn a_global_handle_delivers_with_a_grh_roce_step() {
    ud::a_global_handle_delivers_with_a_grh(roce_step());
}

#[test]
fn a_wrong_q_key_is_dropped_step() {
    ud::a_wrong_q_key_is_dropped(step());
}

#[test]
fn a_wrong_q_key_is_dropped_thread() {
    ud::a_wrong_q_key_is_dropped(threaded());
}

#[test]
fn one_handle_reaches_every_qp_step() {
    ud::one_handle_reaches_every_qp(step());
}

#[test]
fn one_handle_reaches_every_qp_thread() {
    ud::one_handle_reaches_every_qp(threaded());
}

#[test]
fn a_datagram_beyond_the_mtu_fails_step() {
    ud::a_datagram_beyond_the_mtu_fails(step());
}

#[test]
fn a_datagram_beyond_the_mtu_fails_thread() {
    ud::a_datagram_beyond_the_mtu_fails(threaded());
}

/// Sends `av` to B and checks the device dropped it for `why` while the
/// sender completed; then a good datagram still takes B's first receive.
fn assert_misaddressed(mut r: Rig<EmuBackend>, av: mlx5dp::prm::Av, why: AvMismatch) {
    let b = r.b;
    r.send(1, &av, b, QKEY_B, b"misaddressed", None);
    r.run_for(1);
    r.settle();
    assert_eq!(r.sent(1).status, mlx5dp::prm::WcStatus::Success);
    assert!(r.q.received().is_empty(), "{:?}", r.q.received());
    let events = r.f.be.take_events();
    assert!(
        events.contains(&EmuEvent::DatagramDropped {
            dqpn: b.0,
            reason: DropReason::Address(why),
        }),
        "{events:?}"
    );
    let good = r.ah(AhAttr::default());
    r.send(2, &good, b, QKEY_B, b"good", None);
    r.run_for(2);
    r.assert_received(0x50, &good, b"good", None);
    r.finish();
}

/// Emulator only: another LID is not this InfiniBand port.
#[test]
fn a_wrong_lid_is_dropped() {
    let mut r = Rig::new(step());
    let mut av = r.ah(AhAttr::default());
    av.rlid.set(av.rlid.get() ^ 0x40);
    assert_misaddressed(r, av, AvMismatch::Lid);
}

/// Emulator only: a GRH to another GID is not for this InfiniBand port.
#[test]
fn a_wrong_gid_is_dropped() {
    let mut r = Rig::new(threaded());
    let mut av = r.ah(AhAttr {
        global: true,
        ..AhAttr::default()
    });
    av.rgid[8] ^= 0x80;
    assert_misaddressed(r, av, AvMismatch::Gid);
}

/// Emulator only: a frame to another MAC does not come back to this
/// RoCE port.
#[test]
fn a_wrong_mac_is_dropped_on_roce() {
    let mut r = Rig::new(roce_step());
    let mut av = r.ah(AhAttr::default());
    av.rmac[0] ^= 0x02;
    assert_misaddressed(r, av, AvMismatch::Mac);
}

/// Emulator only: a zeroed address vector (what the tests used before
/// address handles) routes nowhere.
#[test]
fn a_zeroed_address_vector_is_dropped() {
    let r = Rig::new(step());
    assert_misaddressed(r, mlx5dp::prm::Av::default(), AvMismatch::Lid);
}
