//! UD datagrams, on every backend: the address vector comes from
//! [`Backend::create_ah`] (on a ConnectX, the one libmlx5's
//! `mlx5_create_ah` builds: the port's LID, or on RoCE its MAC and GID),
//! the core copies it into each send WQE with the work request's remote
//! QPN and Q_Key (`Wr::ud_addr`, libmlx5 `_set_datagram_seg`), and the
//! receiver sees the source QP, the GRH flag and the 40-byte GRH area
//! before the payload.
//!
//! What is checked is what the IBA and libmlx5 make observable through
//! the core: the receive completion's source QP, byte count (GRH area
//! included), immediate and GRH flag (set on RoCE always, on InfiniBand
//! when the handle is global), the payload bytes, a wrong Q_Key's silent
//! drop (IBA 10.2.4: the sender completes, the receiver consumes no
//! receive WQE), and a datagram beyond the port MTU failing locally with
//! `IBV_WC_LOC_LEN_ERR`. The emulator's own reports (the dropped-datagram
//! event, its vendor syndrome) are checked only when
//! [`Backend::emulated`] says it is the emulator.
//!
//! What stays emulator only, in `tests/tests/e2e_ud.rs` and the device's
//! unit tests: address vectors that do not address the port (another LID,
//! GID or MAC: on hardware those leave the port, and where they go
//! depends on the fabric), and a second link layer (the emulated port is
//! RoCE v2 by default; `e2e_ud.rs` runs the scenarios on an InfiniBand
//! one too).
//!
//! [`Backend::create_ah`]: mlx5dp_setup::backend::Backend::create_ah
//! [`Backend::emulated`]: mlx5dp_setup::backend::Backend::emulated

use super::no_core_mistakes;
use crate::e2e::{pattern, Fabric, Polled, QpSpec, Queues};
use mlx5dp::cq::{Cq, WcOpcode};
use mlx5dp::prm::{Av, WcStatus};
use mlx5dp::rq::Sge as RSge;
use mlx5dp::sq::DoorbellOnly;
use mlx5dp_setup::backend::{AhAttr, Backend, Buffer};
use mlx5dp_setup::emu::{CqeSize, DropReason, EmuEvent, QpType, Qpn, VendorSyndrome};

/// The bytes a UD receive gets before the payload (the GRH area).
pub const GRH: usize = 40;

/// B's Q_Key.
pub const QKEY_B: u32 = 0x2222;

/// C's Q_Key.
pub const QKEY_C: u32 = 0x3333;

/// Receive WQEs posted on each of B and C.
pub const RECVS: u64 = 4;

/// Bytes of one receive slot.
const SLOT: usize = 0x1000;

/// Three UD QPs of one backend on one CQ: A sends, B and C receive
/// (Q_Keys [`QKEY_B`] and [`QKEY_C`], [`RECVS`] receives each).
#[derive(Debug)]
pub struct Rig<B: Backend> {
    /// The backend and its protection domain.
    pub f: Fabric<B>,
    /// The CQ all three complete on.
    pub cq: Cq,
    /// Their work queues.
    pub q: Queues<DoorbellOnly>,
    /// The sender.
    pub a: Qpn,
    /// The first receiver.
    pub b: Qpn,
    /// The second receiver.
    pub c: Qpn,
    /// B's receive slots (`i * SLOT`), then C's, then A's send data.
    pub buf: Buffer,
}

/// Where receive `i` (wr_id `0x50 + i` on B, `0x60 + i` on C) lands.
pub fn slot_of(wr_id: u64) -> usize {
    let (base, i) = if wr_id >= 0x60 {
        (RECVS as usize, wr_id - 0x60)
    } else {
        (0, wr_id - 0x50)
    };
    (base + i as usize) * SLOT
}

/// Where A's send data starts in [`Rig::buf`].
pub const SEND_DATA: usize = 2 * RECVS as usize * SLOT;

impl<B: Backend> Rig<B> {
    /// Creates the QPs, brings them up and posts the receives.
    pub fn new(be: B) -> Self {
        let mut f = Fabric::new(be);
        let cq = f.cq(256, CqeSize::B64, None, false);
        let a = f.qp(QpSpec::new(QpType::Ud), &cq, Some(&cq));
        let b = f.qp(QpSpec::new(QpType::Ud), &cq, Some(&cq));
        let c = f.qp(QpSpec::new(QpType::Ud), &cq, Some(&cq));
        f.ud_up(a.qpn, 0x1111);
        f.ud_up(b.qpn, QKEY_B);
        f.ud_up(c.qpn, QKEY_C);
        let buf = f.buffer(SEND_DATA + 0x4000);
        let mut q: Queues<DoorbellOnly> = Queues::default();
        q.sqs.insert(a.qpn.0, f.send_queue(a));
        for (h, first) in [(b, 0x50u64), (c, 0x60)] {
            q.rqs.insert(h.qpn.0, f.recv_queue(h));
            let rq = q.rq(h.qpn.0);
            for i in 0..RECVS {
                let wr_id = first + i;
                rq.post(
                    wr_id,
                    &[RSge {
                        addr: buf.addr(slot_of(wr_id)),
                        length: SLOT as u32,
                        lkey: buf.key,
                    }],
                )
                .expect("post recv");
            }
            rq.commit();
        }
        Self {
            f,
            cq,
            q,
            a: a.qpn,
            b: b.qpn,
            c: c.qpn,
            buf,
        }
    }

    /// An address handle to the backend's port.
    pub fn ah(&mut self, attr: AhAttr) -> Av {
        self.f.be.create_ah(self.f.pd, attr).expect("create_ah")
    }

    /// Posts one signaled UD send of `msg` (inline when short, else from
    /// [`SEND_DATA`]) with `av` to `dest` under `qkey`, with `imm` if any.
    pub fn send(
        &mut self,
        wr_id: u64,
        av: &Av,
        dest: Qpn,
        qkey: u32,
        msg: &[u8],
        imm: Option<u32>,
    ) {
        let av: &'static Av = crate::e2e::leak(*av);
        if msg.len() > 128 {
            self.buf.write(SEND_DATA, msg);
        }
        let (key, addr) = (self.buf.key, self.buf.addr(SEND_DATA));
        let mut batch = self.q.sq(self.a).start();
        let wr = match imm {
            Some(i) => batch.send_imm(wr_id, i),
            None => batch.send(wr_id),
        }
        .expect("send")
        .signaled()
        .ud_addr(av, dest.0, qkey)
        .expect("ud_addr");
        if msg.len() > 128 {
            wr.sge(key, addr, msg.len() as u32).expect("sge");
        } else {
            wr.inline_data(msg).expect("inline");
        }
        batch.complete();
    }

    /// Runs until `n` more completions were polled.
    pub fn run_for(&mut self, n: usize) {
        self.f.run_for(&mut [&mut self.cq], &mut self.q, n);
    }

    /// Lets the device run a little longer (for what must NOT arrive).
    pub fn settle(&mut self) {
        self.f.settle(&mut [&mut self.cq], &mut self.q, 8);
    }

    /// The receive completion of `wr_id`.
    pub fn received(&self, wr_id: u64) -> Option<&Polled> {
        self.q.received().into_iter().find(|p| p.wr_id == wr_id)
    }

    /// The send completion of `wr_id`.
    pub fn sent(&self, wr_id: u64) -> &Polled {
        self.q
            .sent(self.a)
            .into_iter()
            .find(|p| p.wr_id == wr_id)
            .unwrap_or_else(|| panic!("no send completion {wr_id:#x}"))
    }

    /// Asserts the receive `wr_id` holds `msg` from A with or without
    /// the GRH, as `av` says, and returns its GRH area.
    pub fn assert_received(&self, wr_id: u64, av: &Av, msg: &[u8], imm: Option<u32>) -> Vec<u8> {
        let r = self
            .received(wr_id)
            .unwrap_or_else(|| panic!("receive {wr_id:#x} did not complete"));
        assert_eq!(r.status, WcStatus::Success, "{r:?}");
        // A send with immediate is received as IBV_WC_RECV too (the
        // immediate is in `imm`).
        assert_eq!(r.opcode, WcOpcode::Recv, "{r:?}");
        assert_eq!(
            (r.src_qp, r.len as usize, r.imm, r.grh),
            (self.a.0, GRH + msg.len(), imm, expects_grh(av)),
            "{r:?}"
        );
        let off = slot_of(wr_id);
        assert_eq!(
            self.buf.read(off + GRH, msg.len()),
            msg,
            "payload of {wr_id:#x}"
        );
        self.buf.read(off, GRH)
    }

    /// Checks the device saw no core mistake.
    pub fn finish(mut self) {
        no_core_mistakes(&mut self.f);
    }
}

/// Whether a datagram sent with `av` arrives with a GRH: always on RoCE
/// (an address vector with a destination MAC), on InfiniBand when its GRH
/// bit is set (`mlx5_create_ah` with `is_global`).
pub fn expects_grh(av: &Av) -> bool {
    av.rmac != [0; 6] || av.grh_gid_fl.grh()
}

/// Whether a GID is IPv4-mapped (`::ffff:a.b.c.d`): on RoCE v2 the GRH
/// area then holds the IPv4 header in its last 20 bytes, not a GRH.
fn ipv4_mapped(gid: &[u8; 16]) -> bool {
    gid[..10].iter().all(|&b| b == 0) && gid[10..12] == [0xff, 0xff]
}

/// A send and a send with immediate (one through a gather entry, one
/// inline) over the handle `create_ah` gives: delivered to B with A as the
/// source QP, the GRH area first, the right GRH flag; both sends complete.
pub fn send_with_an_address_handle_delivers<B: Backend>(be: B) {
    let mut r = Rig::new(be);
    let av = r.ah(AhAttr::default());
    assert_eq!(
        (av.qkey.get(), av.dqp_dct.dqp_dct()),
        (0, 0),
        "the work request writes the Q_Key and remote QPN"
    );
    let big = pattern(11, 700);
    let b = r.b;
    r.send(1, &av, b, QKEY_B, &big, None);
    r.send(2, &av, b, QKEY_B, b"hello ud", Some(0x4242));
    r.run_for(4);
    for id in [1, 2] {
        let s = r.sent(id);
        assert_eq!(
            (s.status, s.opcode),
            (WcStatus::Success, WcOpcode::Send),
            "{s:?}"
        );
    }
    r.assert_received(0x50, &av, &big, None);
    r.assert_received(0x51, &av, b"hello ud", Some(0x4242));
    r.finish();
}

/// A global handle (`is_global`: traffic class, hop limit, flow label):
/// the datagram arrives with a GRH whose destination GID is the handle's
/// (an IPv4 header instead on RoCE v2 with IPv4-mapped GIDs).
pub fn a_global_handle_delivers_with_a_grh<B: Backend>(be: B) {
    let mut r = Rig::new(be);
    let av = r.ah(AhAttr {
        global: true,
        traffic_class: 0,
        hop_limit: 64,
        flow_label: 0x1_2345,
        ..AhAttr::default()
    });
    assert!(
        expects_grh(&av),
        "a global handle routes with a GRH: {av:?}"
    );
    let b = r.b;
    r.send(7, &av, b, QKEY_B, b"global", None);
    r.run_for(2);
    let grh = r.assert_received(0x50, &av, b"global", None);
    if !ipv4_mapped(&av.rgid) {
        // IBA 8.3: IP version 6; the DGID in bytes 24..40.
        assert_eq!(grh[0] >> 4, 6, "{grh:02x?}");
        assert_eq!(&grh[24..40], &av.rgid, "DGID");
    } else {
        assert_eq!(grh[20], 0x45, "IPv4 header: {grh:02x?}");
        assert_eq!(&grh[36..40], &av.rgid[12..16], "destination address");
    }
    r.finish();
}

/// A wrong Q_Key is dropped silently: the send completes, no receive WQE
/// is consumed (the next good datagram takes B's first one).
pub fn a_wrong_q_key_is_dropped<B: Backend>(be: B) {
    let mut r = Rig::new(be);
    let av = r.ah(AhAttr::default());
    let b = r.b;
    r.send(1, &av, b, QKEY_C, b"wrong key", None);
    r.send(2, &av, b, QKEY_B, b"right key", None);
    r.run_for(3);
    r.settle();
    assert_eq!(
        r.sent(1).status,
        WcStatus::Success,
        "the sender never knows"
    );
    assert_eq!(r.sent(2).status, WcStatus::Success);
    r.assert_received(0x50, &av, b"right key", None);
    assert!(r.received(0x51).is_none(), "the dropped datagram arrived");
    if r.f.be.emulated() {
        let events = r.f.be.take_events();
        assert!(
            events.contains(&EmuEvent::DatagramDropped {
                dqpn: b.0,
                reason: DropReason::QKey,
            }),
            "{events:?}"
        );
    }
    r.finish();
}

/// One handle serves every QP of the port: the work request's remote QPN
/// and Q_Key, not the handle, choose the destination.
pub fn one_handle_reaches_every_qp<B: Backend>(be: B) {
    let mut r = Rig::new(be);
    let av = r.ah(AhAttr::default());
    let (b, c) = (r.b, r.c);
    r.send(1, &av, b, QKEY_B, b"to b", None);
    r.send(2, &av, c, QKEY_C, b"to c", None);
    r.send(3, &av, b, QKEY_B, b"to b again", None);
    r.run_for(6);
    r.assert_received(0x50, &av, b"to b", None);
    r.assert_received(0x60, &av, b"to c", None);
    r.assert_received(0x51, &av, b"to b again", None);
    let on = |qpn: Qpn| r.q.received().iter().filter(|p| p.qpn == qpn.0).count();
    assert_eq!((on(b), on(c)), (2, 1));
    r.finish();
}

/// A datagram longer than the port MTU (at most 4096 bytes on any link
/// layer) fails locally with `IBV_WC_LOC_LEN_ERR`; nothing arrives and
/// the next work request is flushed.
pub fn a_datagram_beyond_the_mtu_fails<B: Backend>(be: B) {
    let mut r = Rig::new(be);
    let av = r.ah(AhAttr::default());
    let b = r.b;
    let big = pattern(5, 5000);
    r.send(1, &av, b, QKEY_B, &big, None);
    r.send(2, &av, b, QKEY_B, b"after", None);
    r.run_for(2);
    r.settle();
    let s = r.sent(1);
    assert_eq!(s.status, WcStatus::LocLenErr, "{s:?}");
    if r.f.be.emulated() {
        assert_eq!(s.vendor_err, VendorSyndrome::Length as u32, "{s:?}");
    }
    assert_eq!(r.sent(2).status, WcStatus::WrFlushErr);
    assert!(r.q.received().is_empty(), "{:?}", r.q.received());
    r.finish();
}
