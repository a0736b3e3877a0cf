//! Address handles: the address vector `Device::create_ah` builds (as
//! rdma-core v44 libmlx5's `mlx5_create_ah` builds it, `verbs.c`) for an
//! InfiniBand and a RoCE v2 port, and the port's check of the address
//! vector of every UD datagram: one built for the port is delivered, one
//! with another LID, GID or MAC is dropped (the sender completes, the
//! receiver sees nothing, the event says why), and the remote QPN and
//! Q_Key of the work request, not the handle, choose the QP.
//!
//! The WQEs are built by hand (`ud_av`: the handle's AV with the Q_Key
//! and remote QPN written over it, as libmlx5's `_set_datagram_seg`).

use super::*;
use crate::emu::ah::flow_label_to_udp_sport;

/// A UD rig: A sends, B and C receive (Q_Keys 0x2222 and 0x3333), one CQ.
struct Ud {
    dev: Device,
    pd: Pdn,
    a: Qpn,
    b: Qpn,
    c: Qpn,
    cq: TCq,
    sq: TSq,
    buf: Arc<DmaBlock>,
}

impl Ud {
    fn new(cfg: DeviceConfig) -> Self {
        let mut dev = Device::new(cfg);
        let pd = dev.alloc_pd();
        let cqn = cq(&mut dev, 64);
        let rq = RqInit::Cyclic {
            wqe_cnt: 8,
            max_sge: 1,
        };
        let a = qp(&mut dev, QpType::Ud, pd, cqn, cqn, rq);
        let b = qp(&mut dev, QpType::Ud, pd, cqn, cqn, rq);
        let c = qp(&mut dev, QpType::Ud, pd, cqn, cqn, rq);
        for (q, qkey) in [(a, 0x1111), (b, 0x2222), (c, 0x3333)] {
            to_rts(
                &mut dev,
                q,
                QpAttr {
                    qkey,
                    ..QpAttr::default()
                },
            );
        }
        let buf = dev.alloc_buffer(8192).unwrap();
        let key = dev.reg_mr(pd, &buf, Access::LOCAL_WRITE).unwrap();
        // Two receives each: B's at 0 and 0x400, C's at 0x1000 and 0x1400.
        for (q, base) in [(b, 0u64), (c, 0x1000)] {
            let mut r = TRq::new(&dev, q);
            r.post(&[(buf.addr() + base, key, 40 + 64)]);
            r.post(&[(buf.addr() + base + 0x400, key, 40 + 64)]);
        }
        let sq = TSq::new(&dev, a);
        let cq = TCq::new(&dev, cqn);
        Self {
            dev,
            pd,
            a,
            b,
            c,
            cq,
            sq,
            buf,
        }
    }

    fn ah(&mut self, attr: AhAttr) -> Av {
        self.dev.create_ah(self.pd, &attr).unwrap()
    }

    /// Sends `msg` inline with `av` to `dqpn` under `qkey`; returns the
    /// CQEs it produced.
    fn send(&mut self, av: &Av, dqpn: Qpn, qkey: u32, msg: &[u8]) -> Vec<Cqe64> {
        self.sq.post(
            SendOpcode::Send,
            0,
            SIG,
            0,
            &[ud_av(av, qkey, dqpn.0), inline_seg(msg)],
        );
        self.dev.process_sq(self.a).unwrap();
        self.cq.drain()
    }

    /// The receive CQE among `cqes`, if any.
    fn received(cqes: &[Cqe64]) -> Option<Cqe64> {
        cqes.iter()
            .find(|c| c.opcode() == CqeOpcode::RespSend)
            .copied()
    }

    /// Sends with `av` to B and expects a drop for `why`.
    fn assert_dropped(&mut self, av: &Av, why: AvMismatch) {
        let cqes = self.send(av, self.b, 0x2222, b"misaddressed");
        assert_eq!(cqes.len(), 1, "the sender completes, nothing arrives");
        assert_eq!(cqes[0].opcode(), CqeOpcode::Req, "no error for the sender");
        assert_eq!(
            self.dev.take_events(),
            vec![EmuEvent::DatagramDropped {
                dqpn: self.b.0,
                reason: DropReason::Address(why),
            }]
        );
    }
}

fn roce_v2() -> DeviceConfig {
    DeviceConfig {
        port: PortConfig::ROCE_V2,
        ..DeviceConfig::default()
    }
}

fn infiniband() -> DeviceConfig {
    DeviceConfig {
        port: PortConfig::INFINIBAND,
        ..DeviceConfig::default()
    }
}

#[test]
fn create_ah_writes_what_mlx5_create_ah_writes_on_infiniband() {
    let mut u = Ud::new(infiniband());
    let port = u.dev.config().port;
    let av = u.ah(AhAttr {
        sl: 0x1b,
        ..AhAttr::default()
    });
    // Local route: the LID, the 4-bit SL, no GRH, nothing of RoCE.
    assert_eq!(av.rlid.get(), port.lid);
    assert_eq!(av.stat_rate_sl.sl(), 0xb, "libmlx5 masks sl & 0xf");
    assert_eq!(av.stat_rate_sl.stat_rate(), 0);
    assert_eq!(av.fl_mlid.into_bits(), 0);
    assert!(!av.grh_gid_fl.grh());
    assert_eq!((av.rgid, av.rmac, av.hop_limit), ([0; 16], [0; 6], 0));
    // The work request fills these.
    assert_eq!((av.qkey.get(), av.dqp_dct.into_bits().get()), (0, 0));

    let g = u.ah(AhAttr {
        global: true,
        traffic_class: 0x28,
        hop_limit: 7,
        flow_label: 0xfff_ffff,
        ..AhAttr::default()
    });
    assert!(g.grh_gid_fl.grh(), "InfiniBand sets the GRH bit");
    assert_eq!(g.grh_gid_fl.sgid_index(), port.gid_index);
    assert_eq!(g.grh_gid_fl.flow_label(), 0xf_ffff, "20 bits");
    assert_eq!((g.tclass, g.hop_limit, g.rgid), (0x28, 7, port.gid));
    assert_eq!(g.rlid.get(), port.lid);

    let err = u.dev.create_ah(Pdn(0x99), &AhAttr::default()).unwrap_err();
    assert_eq!(err.kind, EmuErrorKind::NotFound);
}

#[test]
fn create_ah_writes_what_mlx5_create_ah_writes_on_roce_v2() {
    let mut u = Ud::new(roce_v2());
    let port = u.dev.config().port;
    let av = u.ah(AhAttr {
        sl: 5,
        flow_label: 0x1_2345,
        ..AhAttr::default()
    });
    // The priority in bits [3:1], the GRH bit reserved (clear) though the
    // GRH fields are all there, the resolved MAC, the UDP source port.
    assert_eq!(av.stat_rate_sl.into_bits(), 5 << 1);
    assert_eq!(av.stat_rate_sl.roce_sl(), 5);
    assert!(!av.grh_gid_fl.grh());
    assert_eq!(av.grh_gid_fl.sgid_index(), port.gid_index);
    assert_eq!(av.grh_gid_fl.flow_label(), 0x1_2345);
    assert_eq!((av.rmac, av.rgid, av.hop_limit), (port.mac, port.gid, 64));
    // ibv_flow_label_to_udp_sport: 0x2345 ^ (0x10000 >> 14), | 0xc000.
    assert_eq!(flow_label_to_udp_sport(0x1_2345), 0xe341);
    assert_eq!(av.rlid.get(), 0xe341);
    // No flow label: a source port in the RoCE v2 range (libmlx5 draws a
    // random one; the emulator's is deterministic).
    let z = u.ah(AhAttr::default());
    assert!(z.rlid.get() >= 0xc000);
    assert_eq!(z.rmac, port.mac);
}

#[test]
fn a_create_ah_address_vector_delivers_on_infiniband() {
    let mut u = Ud::new(infiniband());
    let av = u.ah(AhAttr::default());
    let (a, b) = (u.a, u.b);
    let cqes = u.send(&av, b, 0x2222, b"local");
    let r = Ud::received(&cqes).expect("delivered");
    assert_eq!(r.byte_cnt.get(), 40 + 5);
    assert_eq!(r.flags_rqpn.rqpn(), a.0);
    assert_eq!(r.flags_rqpn.grh(), 0, "no GRH without is_global");
    let mut got = [0u8; 5];
    u.buf.read(40, &mut got).unwrap();
    assert_eq!(&got, b"local");

    // Global: the GRH arrives in the first 40 bytes.
    let port = u.dev.config().port;
    let g = u.ah(AhAttr {
        global: true,
        traffic_class: 0x28,
        hop_limit: 9,
        flow_label: 0x5_4321,
        ..AhAttr::default()
    });
    let cqes = u.send(&g, b, 0x2222, b"global");
    let r = Ud::received(&cqes).expect("delivered");
    assert_eq!(r.flags_rqpn.grh(), 1);
    let mut grh = [0u8; 40];
    u.buf.read(0x400, &mut grh).unwrap();
    let w0 = u32::from_be_bytes(grh[..4].try_into().unwrap());
    assert_eq!(
        (w0 >> 28, (w0 >> 20) & 0xff, w0 & 0xf_ffff),
        (6, 0x28, 0x5_4321)
    );
    // Payload length: BTH, DETH, payload, ICRC; next header IBA; hop limit.
    assert_eq!(u16::from_be_bytes([grh[4], grh[5]]), 12 + 8 + 6 + 4);
    assert_eq!((grh[6], grh[7]), (0x1b, 9));
    assert_eq!(&grh[8..24], &port.gid, "source: this port");
    assert_eq!(&grh[24..40], &port.gid, "destination: this port");
    assert!(u.dev.take_events().is_empty());
}

#[test]
fn a_create_ah_address_vector_delivers_on_roce_v2() {
    let mut u = Ud::new(roce_v2());
    let av = u.ah(AhAttr {
        traffic_class: 0x10,
        hop_limit: 3,
        ..AhAttr::default()
    });
    let (a, b) = (u.a, u.b);
    let cqes = u.send(&av, b, 0x2222, b"roce");
    let r = Ud::received(&cqes).expect("delivered");
    assert_eq!(r.flags_rqpn.rqpn(), a.0);
    assert_eq!(r.flags_rqpn.grh(), 1, "RoCE always has the GRH");
    assert_eq!(r.byte_cnt.get(), 40 + 4);
    let mut g = [0u8; 44];
    u.buf.read(0, &mut g).unwrap();
    // IPv4-mapped GIDs: 20 bytes left alone, then the IPv4 header.
    assert_eq!(&g[..20], &[0; 20]);
    let ip = &g[20..40];
    assert_eq!((ip[0], ip[1], ip[8], ip[9]), (0x45, 0x10, 3, 17));
    assert_eq!(
        u16::from_be_bytes([ip[2], ip[3]]),
        20 + 8 + 12 + 8 + 4 + 4,
        "IP, UDP, BTH, DETH, payload, ICRC"
    );
    assert_eq!(
        (&ip[12..16], &ip[16..20]),
        (&[10, 0, 0, 1][..], &[10, 0, 0, 1][..])
    );
    assert_eq!(eth::csum_fold(eth::csum_add(0, ip)), 0xffff, "checksum");
    assert_eq!(&g[40..], b"roce");
}

#[test]
fn a_wrong_lid_or_gid_is_dropped_on_infiniband() {
    let mut u = Ud::new(infiniband());
    let mut av = u.ah(AhAttr::default());
    av.rlid.set(av.rlid.get() + 1);
    u.assert_dropped(&av, AvMismatch::Lid);
    // The GID matters only with a GRH.
    let mut g = u.ah(AhAttr {
        global: true,
        ..AhAttr::default()
    });
    g.rgid[15] ^= 1;
    u.assert_dropped(&g, AvMismatch::Gid);
    let mut local = u.ah(AhAttr::default());
    local.rgid[15] ^= 1;
    let cqes = u.send(&local, u.b, 0x2222, b"no grh");
    assert!(Ud::received(&cqes).is_some(), "no GRH: the GID is not read");
    // A zeroed address vector names LID 0, which is nobody's.
    u.assert_dropped(&Av::default(), AvMismatch::Lid);
    // The receive WQEs are still there for a good datagram.
    let good = u.ah(AhAttr::default());
    let cqes = u.send(&good, u.b, 0x2222, b"good");
    assert!(Ud::received(&cqes).is_some());
}

#[test]
fn a_wrong_mac_or_gid_is_dropped_on_roce() {
    let mut u = Ud::new(roce_v2());
    let mut av = u.ah(AhAttr::default());
    av.rmac[5] ^= 1;
    u.assert_dropped(&av, AvMismatch::Mac);
    let mut av = u.ah(AhAttr::default());
    av.rgid[15] ^= 1;
    u.assert_dropped(&av, AvMismatch::Gid);
    // An InfiniBand-style address vector (a LID, no MAC) goes nowhere.
    let mut ib = Av::default();
    ib.rlid.set(1);
    u.assert_dropped(&ib, AvMismatch::Mac);
    let good = u.ah(AhAttr::default());
    let cqes = u.send(&good, u.b, 0x2222, b"good");
    assert!(Ud::received(&cqes).is_some());
}

#[test]
fn the_work_request_not_the_handle_chooses_the_qp() {
    let mut u = Ud::new(infiniband());
    let av = u.ah(AhAttr::default());
    let (a, b, c) = (u.a, u.b, u.c);
    // One handle, two destinations: each WQE's remote QPN and Q_Key.
    let to_b = Ud::received(&u.send(&av, b, 0x2222, b"to b")).expect("b");
    let to_c = Ud::received(&u.send(&av, c, 0x3333, b"to c")).expect("c");
    assert_eq!((to_b.flags_rqpn.rqpn(), to_c.flags_rqpn.rqpn()), (a.0, a.0));
    let mut got = [0u8; 4];
    u.buf.read(40, &mut got).unwrap();
    assert_eq!(&got, b"to b");
    u.buf.read(0x1000 + 40, &mut got).unwrap();
    assert_eq!(&got, b"to c");
    // B's Q_Key towards C: dropped for the Q_Key, not the address.
    let cqes = u.send(&av, c, 0x2222, b"wrong key");
    assert!(Ud::received(&cqes).is_none());
    assert_eq!(
        u.dev.take_events(),
        vec![EmuEvent::DatagramDropped {
            dqpn: c.0,
            reason: DropReason::QKey,
        }]
    );
    // A remote QPN that names no QP.
    let cqes = u.send(&av, Qpn(0xab_cdef), 0x2222, b"nobody");
    assert!(Ud::received(&cqes).is_none());
    assert_eq!(
        u.dev.take_events(),
        vec![EmuEvent::DatagramDropped {
            dqpn: 0xab_cdef,
            reason: DropReason::NoQp,
        }]
    );
    // Stale Q_Key and QPN in the handle's own bytes are overwritten.
    let mut dirty = av;
    dirty.qkey.set(0x3333);
    dirty.dqp_dct = DqpDct::new().with_dqp_dct(c.0);
    let r = Ud::received(&u.send(&dirty, b, 0x2222, b"to b2")).expect("b");
    assert_eq!(r.flags_rqpn.rqpn(), a.0);
    u.buf.read(0x400 + 40, &mut got).unwrap();
    assert_eq!(&got, b"to b");
}
