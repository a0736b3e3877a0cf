//! End-to-end offloads over the core and the emulated device: TCP
//! segmentation (TSO), IPv4/TCP/UDP checksum offload verified with an
//! RFC 1071 checksum computed here (`e2e::frames`, not the emulator's),
//! VLAN insertion (`Wr::vlan`: by the device, or in the inline header when
//! the device requires one), and CQ arming: completion events (any /
//! solicited only) and overrun.

use mlx5dp::cq::Cq;
use mlx5dp::prm::WcStatus;
use mlx5dp::rq::Sge as RSge;
use mlx5dp::sq::BlueFlamePreferred;
use mlx5dp_setup::backend::{Backend, Buffer, EmuBackend, QpHandle};
use mlx5dp_setup::emu::device::FlowRule;
use mlx5dp_setup::emu::{Caps, CqeSize, Cqn, DeviceConfig, EmuEvent, QpType, RqInit};
use mlx5dp_tests::e2e::check::{check_all, Ledger};
use mlx5dp_tests::e2e::frames::{self, ipv4_header_ok, l4_check, l4_field, rfc1071};
use mlx5dp_tests::e2e::{leak, pattern, Fabric, QpSpec, Queues};

type P = BlueFlamePreferred;

/// A raw Ethernet pair a → b on one CQ, b receiving into 16 posted WQEs
/// of 2 KiB at `buf + 0x10000`.
struct Raw {
    f: Fabric<EmuBackend>,
    cq: Cq,
    a: &'static QpHandle,
    b: &'static QpHandle,
    buf: Buffer,
    q: Queues<P>,
    ledger: Ledger,
}

fn raw_pair() -> Raw {
    raw_pair_on(DeviceConfig::default())
}

/// [`raw_pair`] on a device configured as `config`.
fn raw_pair_on(config: DeviceConfig) -> Raw {
    let mut f = Fabric::new(EmuBackend::step_mode(config));
    let cq = f.cq(256, CqeSize::B64, None, false);
    let a = f.qp(QpSpec::new(QpType::RawPacket), &cq, Some(&cq));
    let b = f.qp(QpSpec::new(QpType::RawPacket), &cq, Some(&cq));
    f.ud_up(a.qpn, 0);
    f.ud_up(b.qpn, 0);
    f.be.add_flow(FlowRule {
        qpn: b.qpn,
        dmac: Some(frames::DMAC),
        ethertype: None,
        flow_tag: b.qpn.0,
    })
    .expect("flow");
    let buf = f.buffer(1 << 17);
    let mut q: Queues<P> = Queues::default();
    q.sqs.insert(a.qpn.0, f.send_queue(a));
    q.rqs.insert(b.qpn.0, f.recv_queue(b));
    let mut ledger = Ledger::default();
    for i in 0..16u64 {
        q.rq(b.qpn.0)
            .post(
                0x100 + i,
                &[RSge {
                    addr: buf.addr(0x10000 + 0x800 * i as usize),
                    length: 0x800,
                    lkey: buf.key,
                }],
            )
            .expect("post recv");
        ledger.recv(b.qpn.0, 0x100 + i);
    }
    q.rq(b.qpn.0).commit();
    Raw {
        f,
        cq,
        a,
        b,
        buf,
        q,
        ledger,
    }
}

impl Raw {
    /// The frame received by receive WQE `i` (its completion's length).
    fn received(&self, i: usize) -> Vec<u8> {
        let r = self.q.received();
        let p = r
            .iter()
            .find(|p| p.wr_id == 0x100 + i as u64)
            .expect("received");
        self.buf.read(0x10000 + 0x800 * i, p.len as usize)
    }

    fn run(&mut self, completions: usize) {
        let Raw { f, cq, q, .. } = self;
        f.run_until(&mut [cq], q, |q| q.polled.len() >= completions);
    }
}

// ---------------------------------------------------------------------------
// TSO
// ---------------------------------------------------------------------------

#[test]
fn tso_segments_a_tcp_payload() {
    let mut r = raw_pair();
    let payload = pattern(9, 2500);
    r.buf.write(0, &payload);
    let hdr: &'static [u8] = leak(frames::ipv4_tcp(&[], 0x1000_0000, 0x4242)).as_slice();
    let mss = 1000u16;
    {
        let mut batch = r.q.sq(r.a.qpn).start();
        batch
            .tso(1, hdr, mss)
            .expect("tso")
            .signaled()
            .sge(r.buf.key, r.buf.addr(0), payload.len() as u32)
            .expect("sge");
        batch.complete();
    }
    r.ledger.send(r.a.qpn.0, 1);
    r.run(1 + 3);
    let sent = r.q.sent(r.a.qpn);
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].status, WcStatus::Success);
    let mut joined = Vec::new();
    for i in 0..3usize {
        let seg = r.received(i);
        let chunk = &payload[i * 1000..(i * 1000 + 1000).min(2500)];
        assert_eq!(seg.len(), frames::TCP_HDR_LEN + chunk.len(), "segment {i}");
        // Headers: L2 unchanged, IPv4 total length and id, TCP sequence.
        assert_eq!(&seg[..14], &hdr[..14]);
        let total = u16::from_be_bytes([seg[16], seg[17]]) as usize;
        assert_eq!(total, 40 + chunk.len(), "segment {i}: IP total length");
        let id = u16::from_be_bytes([seg[18], seg[19]]);
        assert_eq!(id, 0x4242 + i as u16, "segment {i}: IP id");
        let seq = u32::from_be_bytes(seg[38..42].try_into().expect("4 bytes"));
        assert_eq!(seq, 0x1000_0000 + 1000 * i as u32, "segment {i}: TCP seq");
        let flags = seg[47];
        let psh = flags & 0x08 != 0;
        assert_eq!(psh, i == 2, "segment {i}: PSH only on the last");
        // Checksums computed by the device, verified by RFC 1071 here.
        assert!(ipv4_header_ok(&seg), "segment {i}: IPv4 header checksum");
        assert_eq!(l4_check(&seg), 0, "segment {i}: TCP checksum");
        assert_ne!(l4_field(&seg), 0);
        joined.extend_from_slice(&seg[frames::TCP_HDR_LEN..]);
    }
    assert_eq!(joined, payload);
    for p in r.q.received() {
        assert_eq!(p.l3_l4_ok, (true, true), "{p:?}");
    }
    r.ledger
        .withdraw_recv(r.b.qpn.0, &(3..16).map(|i| 0x100 + i).collect::<Vec<u64>>());
    check_all(&r.ledger, &r.q.retired);
}

// ---------------------------------------------------------------------------
// Checksum offload
// ---------------------------------------------------------------------------

#[test]
fn checksum_offload_computes_ipv4_tcp_and_udp_sums() {
    let mut r = raw_pair();
    let udp = frames::ipv4_udp(&pattern(1, 333), 7);
    let tcp = frames::ipv4_tcp(&pattern(2, 1201), 77, 8);
    let plain = frames::ipv4_udp(&pattern(3, 64), 9);
    r.buf.write(0, &udp);
    r.buf.write(0x1000, &tcp);
    r.buf.write(0x2000, &plain);
    {
        let mut batch = r.q.sq(r.a.qpn).start();
        batch
            .send(1)
            .expect("send")
            .signaled()
            .ip_csum()
            .expect("csum")
            .frame(r.buf.key, r.buf.addr(0), &udp)
            .expect("frame");
        batch
            .send(2)
            .expect("send")
            .signaled()
            .ip_csum()
            .expect("csum")
            .frame(r.buf.key, r.buf.addr(0x1000), &tcp)
            .expect("frame");
        // No offload: the zero fields go out as they are.
        batch
            .send(3)
            .expect("send")
            .signaled()
            .frame(r.buf.key, r.buf.addr(0x2000), &plain)
            .expect("frame");
        batch.complete();
    }
    for i in 1..=3 {
        r.ledger.send(r.a.qpn.0, i);
    }
    r.run(6);
    for (i, sent) in [&udp, &tcp].into_iter().enumerate() {
        let got = r.received(i);
        assert_eq!(got.len(), sent.len());
        // Only the two checksum fields differ from what was posted.
        let ip_field = 24;
        let l4 = 34 + if got[23] == 6 { 16 } else { 6 };
        for (k, (x, y)) in got.iter().zip(sent.iter()).enumerate() {
            if ![ip_field, ip_field + 1, l4, l4 + 1].contains(&k) {
                assert_eq!(x, y, "frame {i} byte {k}");
            }
        }
        // The IPv4 header checksum is the RFC 1071 sum of the header with
        // the field zero; the L4 one covers the pseudo-header.
        let mut hdr = got[14..34].to_vec();
        hdr[10..12].fill(0);
        assert_eq!(
            u16::from_be_bytes([got[24], got[25]]),
            rfc1071(&hdr),
            "frame {i}: IPv4 checksum"
        );
        assert!(ipv4_header_ok(&got), "frame {i}");
        assert_eq!(l4_check(&got), 0, "frame {i}: L4 checksum");
    }
    // Without the offload: still zero; the receiver says the IPv4 header
    // checksum is not OK, and the UDP one is (a zero UDP checksum over
    // IPv4 means "none", RFC 768).
    let got = r.received(2);
    assert_eq!(got, plain);
    assert!(!ipv4_header_ok(&got));
    let rx: Vec<(u64, (bool, bool))> =
        r.q.received()
            .iter()
            .map(|p| (p.wr_id, p.l3_l4_ok))
            .collect();
    assert_eq!(
        rx,
        [
            (0x100, (true, true)),
            (0x101, (true, true)),
            (0x102, (false, true))
        ]
    );
    r.ledger
        .withdraw_recv(r.b.qpn.0, &(3..16).map(|i| 0x100 + i).collect::<Vec<u64>>());
    check_all(&r.ledger, &r.q.retired);
}

// ---------------------------------------------------------------------------
// VLAN insertion
// ---------------------------------------------------------------------------

/// `frame` with a C-VLAN tag (TPID 0x8100, `tci`) after its MAC addresses.
fn tagged(frame: &[u8], tci: u16) -> Vec<u8> {
    let mut t = frame[..12].to_vec();
    t.extend_from_slice(&0x8100u16.to_be_bytes());
    t.extend_from_slice(&tci.to_be_bytes());
    t.extend_from_slice(&frame[12..]);
    t
}

/// Frames sent with `Wr::vlan` arrive with the tag inserted after the MAC
/// addresses, the rest unchanged (checksum offload still applies to the
/// IPv4 and UDP headers behind the tag): on a device that needs no inline
/// header the Ethernet segment carries the VLAN-insert request and the
/// device inserts the tag; on one that needs 18 bytes inline (a
/// ConnectX-4 Lx) the core writes the tag into the inline header. Both
/// put the same frame on the wire; an untagged frame in between stays
/// untagged.
#[test]
fn vlan_insertion_delivers_tagged_frames() {
    for eth_min_inline in [0u16, 18] {
        let config = DeviceConfig {
            caps: Caps {
                eth_min_inline,
                ..Caps::default()
            },
            ..DeviceConfig::default()
        };
        let mut r = raw_pair_on(config);
        let udp = frames::ipv4_udp(&pattern(4, 200), 11);
        let plain = frames::ipv4_udp(&pattern(5, 90), 12);
        let tcp = frames::ipv4_tcp(&pattern(6, 300), 0x55, 13);
        r.buf.write(0, &udp);
        r.buf.write(0x1000, &plain);
        r.buf.write(0x2000, &tcp);
        {
            let mut batch = r.q.sq(r.a.qpn).start();
            batch
                .send(1)
                .expect("send")
                .signaled()
                .vlan(0x0123)
                .expect("vlan")
                .ip_csum()
                .expect("csum")
                .frame(r.buf.key, r.buf.addr(0), &udp)
                .expect("frame");
            batch
                .send(2)
                .expect("send")
                .signaled()
                .frame(r.buf.key, r.buf.addr(0x1000), &plain)
                .expect("frame");
            batch
                .send(3)
                .expect("send")
                .signaled()
                .vlan(0xe00f)
                .expect("vlan")
                .frame(r.buf.key, r.buf.addr(0x2000), &tcp)
                .expect("frame");
            batch.complete();
        }
        for i in 1..=3 {
            r.ledger.send(r.a.qpn.0, i);
        }
        r.run(6);
        let sent = r.q.sent(r.a.qpn);
        assert_eq!(sent.len(), 3, "eth_min_inline {eth_min_inline}");
        assert!(
            sent.iter().all(|c| c.status == WcStatus::Success),
            "{sent:?}"
        );
        // The UDP frame: tagged, its checksums filled in by the device.
        let got = r.received(0);
        assert_eq!(got.len(), udp.len() + 4, "eth_min_inline {eth_min_inline}");
        assert_eq!(&got[..18], &tagged(&udp, 0x0123)[..18]);
        let untagged: Vec<u8> = [&got[..12], &got[16..]].concat();
        assert!(ipv4_header_ok(&untagged), "eth_min_inline {eth_min_inline}");
        assert_eq!(l4_check(&untagged), 0, "eth_min_inline {eth_min_inline}");
        for (k, (x, y)) in untagged.iter().zip(udp.iter()).enumerate() {
            if ![24, 25, 40, 41].contains(&k) {
                assert_eq!(x, y, "eth_min_inline {eth_min_inline}: byte {k}");
            }
        }
        // The untagged frame, as sent; the TCP frame, tagged, as sent.
        assert_eq!(r.received(1), plain, "eth_min_inline {eth_min_inline}");
        assert_eq!(
            r.received(2),
            tagged(&tcp, 0xe00f),
            "eth_min_inline {eth_min_inline}"
        );
        r.ledger
            .withdraw_recv(r.b.qpn.0, &(3..16).map(|i| 0x100 + i).collect::<Vec<u64>>());
        check_all(&r.ledger, &r.q.retired);
    }
}

// ---------------------------------------------------------------------------
// CQ arming, events, overrun
// ---------------------------------------------------------------------------

fn completion_events(f: &mut Fabric<EmuBackend>, cqn: u32) -> usize {
    f.be.take_events()
        .iter()
        .filter(|e| matches!(e, EmuEvent::Completion { cqn: c } if *c == Cqn(cqn)))
        .count()
}

#[test]
fn cq_arm_raises_one_event_and_solicited_arm_waits_for_se() {
    let mut f = Fabric::new(EmuBackend::step_mode(DeviceConfig::default()));
    let mut scq = f.cq(64, CqeSize::B64, None, false);
    let mut rcq = f.cq(64, CqeSize::B64, None, false);
    let mut spec = QpSpec::new(QpType::Rc);
    spec.rq = RqInit::None;
    let a = f.qp(spec, &scq, None);
    let b = f.qp(QpSpec::new(QpType::Rc), &rcq, Some(&rcq));
    f.connect(a.qpn, b.qpn);
    let buf = f.buffer(1 << 14);
    let mut q: Queues<P> = Queues::default();
    q.sqs.insert(a.qpn.0, f.send_queue(a));
    q.rqs.insert(b.qpn.0, f.recv_queue(b));
    for i in 0..8u64 {
        q.rq(b.qpn.0)
            .post(
                i,
                &[RSge {
                    addr: buf.addr(256 * i as usize),
                    length: 256,
                    lkey: buf.key,
                }],
            )
            .expect("recv");
    }
    q.rq(b.qpn.0).commit();
    let rcqn = rcq.cqn();
    let send = |q: &mut Queues<P>, id: u64, se: bool| {
        let mut batch = q.sq(a.qpn).start();
        let mut wr = batch.send(id).expect("send").signaled();
        if se {
            wr = wr.solicited();
        }
        wr.inline_data(b"event?").expect("inline");
        batch.complete();
    };
    // Not armed: no event.
    send(&mut q, 1, false);
    f.run_until(&mut [&mut scq, &mut rcq], &mut q, |q| q.polled.len() >= 2);
    assert_eq!(completion_events(&mut f, rcqn), 0);
    // Armed for any completion: exactly one event for two completions.
    rcq.arm(false);
    f.settle(&mut [&mut scq], &mut q, 1);
    send(&mut q, 2, false);
    send(&mut q, 3, false);
    f.run_until(&mut [&mut scq, &mut rcq], &mut q, |q| q.polled.len() >= 6);
    assert_eq!(completion_events(&mut f, rcqn), 1);
    rcq.ack_events(1);
    // Armed for solicited only: an unsolicited message raises nothing, a
    // solicited one raises the event.
    rcq.arm(true);
    f.settle(&mut [&mut scq], &mut q, 1);
    send(&mut q, 4, false);
    f.run_until(&mut [&mut scq, &mut rcq], &mut q, |q| q.polled.len() >= 8);
    assert_eq!(completion_events(&mut f, rcqn), 0);
    send(&mut q, 5, true);
    f.run_until(&mut [&mut scq, &mut rcq], &mut q, |q| q.polled.len() >= 10);
    assert_eq!(completion_events(&mut f, rcqn), 1);
    rcq.ack_events(1);
    // Arming while completions are already waiting fires at once (the
    // consumer index in the arm word is behind the producer).
    send(&mut q, 6, false);
    f.run_until(&mut [&mut scq], &mut q, |q| q.polled.len() >= 11);
    for _ in 0..3 {
        f.be.progress();
    }
    rcq.arm(false);
    for _ in 0..3 {
        f.be.progress();
    }
    assert_eq!(completion_events(&mut f, rcqn), 1);
    let events = f.be.take_events();
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, EmuEvent::ArmMismatch { .. })),
        "{events:?}"
    );
}

#[test]
fn cq_overrun_is_reported_and_nothing_more_is_written() {
    let mut f = Fabric::new(EmuBackend::step_mode(DeviceConfig::default()));
    let mut cq = f.cq(4, CqeSize::B64, None, false);
    let mut spec = QpSpec::new(QpType::Rc);
    spec.rq = RqInit::None;
    let a = f.qp(spec, &cq, None);
    let b = f.qp(spec, &cq, None);
    f.connect(a.qpn, b.qpn);
    let buf = f.buffer(4096);
    let mut q: Queues<P> = Queues::default();
    q.sqs.insert(a.qpn.0, f.send_queue(a));
    // Six signalled writes into a CQ of four, nothing polled meanwhile.
    {
        let mut batch = q.sq(a.qpn).start();
        for i in 0..6u64 {
            batch
                .rdma_write(i, buf.key, buf.addr(64 * i as usize))
                .expect("write")
                .signaled()
                .inline_data(b"overrun")
                .expect("inline");
        }
        batch.complete();
    }
    for _ in 0..4 {
        f.be.progress();
    }
    let events = f.be.take_events();
    let cqn = Cqn(cq.cqn());
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, EmuEvent::CqOverrun { cqn: c } if *c == cqn))
            .count(),
        1,
        "{events:?}"
    );
    let stats = f.be.with(|d| d.cq_stats(cqn)).expect("stats");
    assert_eq!((stats.regular, stats.lost), (4, 2));
    // The four that fit are there, in order; nothing after them.
    f.settle(&mut [&mut cq], &mut q, 4);
    let ids: Vec<u64> = q.polled.iter().map(|p| p.wr_id).collect();
    assert_eq!(ids, [0, 1, 2, 3]);
    assert!(q.polled.iter().all(|p| p.status == WcStatus::Success));
    // Still nothing after software freed the slots: the CQ is in error.
    {
        let mut batch = q.sq(a.qpn).start();
        batch
            .rdma_write(9, buf.key, buf.addr(0))
            .expect("write")
            .signaled()
            .inline_data(b"lost")
            .expect("inline");
        batch.complete();
    }
    f.settle(&mut [&mut cq], &mut q, 4);
    assert_eq!(q.polled.len(), 4);
    let stats = f.be.with(|d| d.cq_stats(cqn)).expect("stats");
    assert_eq!(stats.lost, 3);
}
