//! End-to-end memory windows on the emulated device, posted and polled
//! through the core only: [`Batch::bind_mw`] builds the bind (libmlx5's
//! `IBV_WR_BIND_MW` UMR), the device parses it on its own and binds the
//! window, the peer's RDMA write and read go through the window's new
//! rkey, and [`Cq::poll`] reports the bind as `IBV_WC_BIND_MW` with its
//! wr_id (the send queue records the opcode at post time and the work
//! queues here pass it on, as `setup/src/perf/pair.rs` does).
//!
//! Emulator only: the verbs backend has no `ibv_alloc_mw` yet.
//!
//! Every check that fails a remote access leaves the requester and the
//! responder in the error state (an RC NAK), so each one runs on a fresh
//! pair.
//!
//! [`Batch::bind_mw`]: mlx5dp::sq::Batch::bind_mw

use mlx5dp::cq::{Cq, LookupError, RecvRetired, SendRetired, WcOpcode, WorkQueues, WqRef};
use mlx5dp::prm::{Syndrome, WcStatus};
use mlx5dp::rq::{Rq, Sge as RSge};
use mlx5dp::sq::{DoorbellOnly, MwBind, MwType, SendQueue};
use mlx5dp_setup::backend::{Backend, Buffer, EmuBackend};
use mlx5dp_setup::emu::{Access, CqeSize, DeviceConfig, Mw, QpType, Qpn, VendorSyndrome};
use mlx5dp_tests::e2e::{pattern, Fabric, QpSpec};
use std::collections::BTreeMap;

/// One completion, as the core reported it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Got {
    qpn: u32,
    wr_id: u64,
    status: WcStatus,
    opcode: WcOpcode,
    syndrome: Option<Syndrome>,
    vendor: u32,
    invalidated: Option<u32>,
}

/// The work queues behind the CQ. `retire_send` passes on the completion
/// opcode the send queue recorded at post time ([`SendRetired::wr_opcode`]):
/// a UMR's CQE names neither a bind nor a local invalidate.
#[derive(Default)]
struct Wqs {
    sqs: BTreeMap<u32, SendQueue<'static, DoorbellOnly>>,
    rqs: BTreeMap<u32, Rq<'static>>,
}

impl WorkQueues for Wqs {
    fn retire_send(
        &mut self,
        wq: WqRef,
        wqe_counter: u16,
        _: WcStatus,
    ) -> Result<SendRetired, LookupError> {
        let sq = self.sqs.get_mut(&wq.qpn).ok_or(LookupError::UnknownQueue)?;
        let r = sq
            .retire(wqe_counter)
            .map_err(|_| LookupError::NotInFlight)?;
        Ok(SendRetired {
            wr_id: r.wr_id,
            wr_opcode: r.wr_opcode,
        })
    }

    fn retire_recv(
        &mut self,
        wq: WqRef,
        wqe_counter: u16,
        status: WcStatus,
    ) -> Result<RecvRetired, LookupError> {
        let rq = self.rqs.get_mut(&wq.qpn).ok_or(LookupError::UnknownQueue)?;
        Ok(RecvRetired {
            wr_id: rq.retire(wqe_counter, status != WcStatus::Success)?,
            rx_csum_valid: false,
        })
    }
}

/// Bytes of the region windows are bound in.
const REGION: usize = 1 << 14;

/// Two connected RC QPs on one CQ: A plays the remote peer, B owns the
/// region and binds the windows.
struct World {
    f: Fabric<EmuBackend>,
    cq: Cq,
    wqs: Wqs,
    a: Qpn,
    b: Qpn,
    /// B's region: local write and `MW_BIND`, no remote right of its own.
    region: Buffer,
    /// A's buffer (every right).
    local: Buffer,
}

fn world_with(region_access: Access) -> World {
    let mut f = Fabric::new(EmuBackend::step_mode(DeviceConfig::default()));
    let cq = f.cq(256, CqeSize::B64, None, false);
    let a = f.qp(QpSpec::new(QpType::Rc), &cq, Some(&cq));
    let b = f.qp(QpSpec::new(QpType::Rc), &cq, Some(&cq));
    f.connect(a.qpn, b.qpn);
    let mut wqs = Wqs::default();
    wqs.sqs.insert(a.qpn.0, f.send_queue(a));
    wqs.sqs.insert(b.qpn.0, f.send_queue(b));
    wqs.rqs.insert(b.qpn.0, f.recv_queue(b));
    let pd = f.pd;
    let region =
        f.be.reg_buffer(pd, REGION, region_access)
            .expect("reg_buffer");
    let local = f.buffer(4096);
    World {
        f,
        cq,
        wqs,
        a: a.qpn,
        b: b.qpn,
        region,
        local,
    }
}

fn world() -> World {
    world_with(Access::LOCAL_WRITE | Access::MW_BIND)
}

/// `ibv_inc_rkey`: the rkey a rebind gives the window.
fn inc_rkey(rkey: u32) -> u32 {
    (rkey & !0xff) | (rkey.wrapping_add(1) & 0xff)
}

impl World {
    fn alloc_mw(&mut self, t: MwType) -> Mw {
        let pd = self.f.pd;
        self.f.be.with(|d| d.alloc_mw(pd, t)).expect("alloc_mw")
    }

    /// A bind of `[region + off, + len)` of window `mw` (current rkey
    /// `mw_rkey`) to `new_rkey`.
    fn bind_info(&self, mw: &Mw, mw_rkey: u32, new_rkey: u32, off: usize, len: u64) -> MwBind {
        MwBind {
            mw_type: mw.mw_type,
            mw_rkey,
            new_rkey,
            mr_lkey: self.region.key,
            addr: self.region.addr(off),
            length: len,
            access: MwBind::REMOTE_READ | MwBind::REMOTE_WRITE,
        }
    }

    /// Runs the device and polls until one more completion arrives.
    fn next(&mut self) -> Got {
        for _ in 0..1000 {
            self.f.be.progress();
            let mut got = None;
            let n = self
                .cq
                .poll(&mut self.wqs, 1, |c| {
                    got = Some(Got {
                        qpn: c.qp_num(),
                        wr_id: c.wr_id(),
                        status: c.status(),
                        opcode: c.opcode(),
                        syndrome: c.syndrome(),
                        vendor: c.vendor_err(),
                        invalidated: c.invalidated_rkey(),
                    });
                })
                .expect("poll");
            if n > 0 {
                return got.expect("a completion");
            }
        }
        panic!("no completion");
    }

    /// Posts a signalled bind on `qpn` and returns its completion.
    fn bind(&mut self, qpn: Qpn, wr_id: u64, b: &MwBind) -> Got {
        let sq = self.wqs.sqs.get_mut(&qpn.0).expect("sq");
        let mut batch = sq.start();
        batch
            .bind_mw(wr_id, b)
            .expect("bind_mw")
            .signaled()
            .post()
            .expect("post");
        batch.complete();
        self.next()
    }

    /// A signalled local invalidate of `rkey` on `qpn`.
    fn local_inv(&mut self, qpn: Qpn, wr_id: u64, rkey: u32) -> Got {
        let sq = self.wqs.sqs.get_mut(&qpn.0).expect("sq");
        let mut batch = sq.start();
        batch
            .local_inv(wr_id, rkey)
            .expect("local_inv")
            .signaled()
            .post()
            .expect("post");
        batch.complete();
        self.next()
    }

    /// An RDMA write of `data` from A to `raddr` under `rkey`.
    fn write(&mut self, wr_id: u64, rkey: u32, raddr: u64, data: &[u8]) -> Got {
        self.local.write(0, data);
        let (key, addr) = (self.local.key, self.local.addr(0));
        let sq = self.wqs.sqs.get_mut(&self.a.0).expect("sq");
        let mut batch = sq.start();
        batch
            .rdma_write(wr_id, rkey, raddr)
            .expect("rdma_write")
            .signaled()
            .sge(key, addr, data.len() as u32)
            .expect("sge");
        batch.complete();
        self.next()
    }

    /// An RDMA read of `len` bytes from `raddr` under `rkey` into A's
    /// buffer at 0x800; returns the completion and the bytes.
    fn read(&mut self, wr_id: u64, rkey: u32, raddr: u64, len: u32) -> (Got, Vec<u8>) {
        self.local.fill(0x800, len as usize, 0xee);
        let (key, addr) = (self.local.key, self.local.addr(0x800));
        let sq = self.wqs.sqs.get_mut(&self.a.0).expect("sq");
        let mut batch = sq.start();
        batch
            .rdma_read(wr_id, rkey, raddr)
            .expect("rdma_read")
            .signaled()
            .sge(key, addr, len)
            .expect("sge");
        batch.complete();
        let g = self.next();
        (g, self.local.read(0x800, len as usize))
    }
}

/// A successful completion of `wr_id` with `opcode` on `qpn`.
fn assert_done(g: Got, qpn: Qpn, wr_id: u64, opcode: WcOpcode) {
    assert_eq!(
        (g.status, g.qpn, g.wr_id, g.opcode),
        (WcStatus::Success, qpn.0, wr_id, opcode),
        "{g:?}"
    );
}

/// An error completion of `wr_id` with `status` and the device's vendor
/// syndrome `v` (the emulator's cause code).
fn assert_failed(g: Got, wr_id: u64, status: WcStatus, v: VendorSyndrome) {
    assert_eq!(
        (g.wr_id, g.status, g.vendor),
        (wr_id, status, v as u32),
        "{g:?}"
    );
}

/// A remote access error of `wr_id` for cause `v`.
fn assert_remote_access(g: Got, wr_id: u64, v: VendorSyndrome) {
    assert_failed(g, wr_id, WcStatus::RemAccessErr, v);
    assert_eq!(g.syndrome, Some(Syndrome::RemoteAccess));
}

#[test]
fn bind_completes_as_bind_mw_and_the_window_carries_write_and_read() {
    let mut w = world();
    let mw = w.alloc_mw(MwType::Type2);
    let new = inc_rkey(mw.rkey);
    let bind = w.bind_info(&mw, mw.rkey, new, 0x1000, 0x400);
    assert_done(w.bind(w.b, 0xb1d, &bind), w.b, 0xb1d, WcOpcode::BindMw);

    // Written through the window from the peer: lands where the window
    // says, in a region that has no remote right of its own.
    let data = pattern(7, 96);
    let raddr = w.region.addr(0x1000 + 0x40);
    assert_done(w.write(1, new, raddr, &data), w.a, 1, WcOpcode::RdmaWrite);
    assert_eq!(w.region.read(0x1040, 96), data);
    assert_eq!(w.region.read(0x1040 + 96, 8), [0; 8]);
    // Read back through it, the last bytes of the window included.
    let tail = pattern(8, 16);
    w.region.write(0x13f0, &tail);
    let (g, got) = w.read(2, new, w.region.addr(0x13f0), 16);
    assert_done(g, w.a, 2, WcOpcode::RdmaRead);
    assert_eq!(got, tail);
    let (g, got) = w.read(3, new, raddr, 96);
    assert_done(g, w.a, 3, WcOpcode::RdmaRead);
    assert_eq!(got, data);
}

#[test]
fn a_zero_based_window_counts_remote_addresses_from_its_start() {
    let mut w = world();
    let mw = w.alloc_mw(MwType::Type2);
    let new = inc_rkey(mw.rkey);
    let mut bind = w.bind_info(&mw, mw.rkey, new, 0x2000, 0x100);
    bind.access |= MwBind::ZERO_BASED;
    assert_done(w.bind(w.b, 9, &bind), w.b, 9, WcOpcode::BindMw);
    let (state_key, binding) = w.f.be.with(|d| d.mw_state(new)).expect("the window exists");
    let binding = binding.expect("bound");
    assert_eq!(state_key, new);
    assert!(binding.zero_based);
    // Remote address 0x20 is the window's start + 0x20.
    assert_done(
        w.write(1, new, 0x20, b"zero based"),
        w.a,
        1,
        WcOpcode::RdmaWrite,
    );
    assert_eq!(w.region.read(0x2020, 10), b"zero based");
    w.region.write(0x20f8, b"ends8byt");
    let (g, got) = w.read(2, new, 0xf8, 8);
    assert_done(g, w.a, 2, WcOpcode::RdmaRead);
    assert_eq!(got, b"ends8byt");
    // The region address is not a window address any more.
    let g = w.write(3, new, w.region.addr(0x2020), b"va");
    assert_remote_access(g, 3, VendorSyndrome::Bounds);
}

#[test]
fn a_type1_window_is_used_through_any_qp_of_the_pd() {
    let mut w = world();
    let mw = w.alloc_mw(MwType::Type1);
    let new = inc_rkey(mw.rkey);
    let bind = w.bind_info(&mw, mw.rkey, new, 0x3000, 0x80);
    // Bound on A, the window still serves A's writes arriving on B.
    assert_done(w.bind(w.a, 4, &bind), w.a, 4, WcOpcode::BindMw);
    assert_done(
        w.write(5, new, w.region.addr(0x3000), b"type one"),
        w.a,
        5,
        WcOpcode::RdmaWrite,
    );
    assert_eq!(w.region.read(0x3000, 8), b"type one");
}

#[test]
fn accesses_outside_the_window_fail_with_remote_access_errors() {
    // Past the end.
    let mut w = world();
    let mw = w.alloc_mw(MwType::Type2);
    let new = inc_rkey(mw.rkey);
    let bind = w.bind_info(&mw, mw.rkey, new, 0x1000, 0x100);
    assert_done(w.bind(w.b, 1, &bind), w.b, 1, WcOpcode::BindMw);
    let g = w.write(2, new, w.region.addr(0x10f8), &[1; 9]);
    assert_remote_access(g, 2, VendorSyndrome::Bounds);
    assert_eq!(w.region.read(0x10f8, 9), [0; 9]);

    // Before the start (inside the region).
    let mut w = world();
    let mw = w.alloc_mw(MwType::Type2);
    let new = inc_rkey(mw.rkey);
    let bind = w.bind_info(&mw, mw.rkey, new, 0x1000, 0x100);
    assert_done(w.bind(w.b, 1, &bind), w.b, 1, WcOpcode::BindMw);
    let (g, _) = w.read(2, new, w.region.addr(0xff0), 16);
    assert_remote_access(g, 2, VendorSyndrome::Bounds);

    // A write through a window that grants remote read only.
    let mut w = world();
    let mw = w.alloc_mw(MwType::Type2);
    let new = inc_rkey(mw.rkey);
    let mut bind = w.bind_info(&mw, mw.rkey, new, 0x1000, 0x100);
    bind.access = MwBind::REMOTE_READ;
    assert_done(w.bind(w.b, 1, &bind), w.b, 1, WcOpcode::BindMw);
    let (g, _) = w.read(2, new, w.region.addr(0x1000), 8);
    assert_done(g, w.a, 2, WcOpcode::RdmaRead);
    let g = w.write(3, new, w.region.addr(0x1000), b"no right");
    assert_remote_access(g, 3, VendorSyndrome::AccessRight);
    assert_eq!(w.region.read(0x1000, 8), [0; 8]);
}

#[test]
fn unbound_and_wrong_qp_window_keys_fail() {
    // Allocated but never bound.
    let mut w = world();
    let mw = w.alloc_mw(MwType::Type2);
    let g = w.write(1, mw.rkey, w.region.addr(0), b"unbound");
    assert_remote_access(g, 1, VendorSyndrome::BadKey);

    // Bound: the rkey before the bind names nothing.
    let mut w = world();
    let mw = w.alloc_mw(MwType::Type2);
    let new = inc_rkey(mw.rkey);
    let bind = w.bind_info(&mw, mw.rkey, new, 0, 0x100);
    assert_done(w.bind(w.b, 1, &bind), w.b, 1, WcOpcode::BindMw);
    let g = w.write(2, mw.rkey, w.region.addr(0), b"old key");
    assert_remote_access(g, 2, VendorSyndrome::BadKey);

    // A type-2 window bound on A: a write from A arrives on B, which is
    // not the QP the window is bound to.
    let mut w = world();
    let mw = w.alloc_mw(MwType::Type2);
    let new = inc_rkey(mw.rkey);
    let bind = w.bind_info(&mw, mw.rkey, new, 0, 0x100);
    assert_done(w.bind(w.a, 1, &bind), w.a, 1, WcOpcode::BindMw);
    let g = w.write(2, new, w.region.addr(0), b"wrong qp");
    assert_remote_access(g, 2, VendorSyndrome::MwState);
    assert_eq!(w.region.read(0, 8), [0; 8]);
}

#[test]
fn unbind_local_invalidate_and_send_with_invalidate_kill_the_key() {
    // Unbind: a bind of length 0, reported as a bind.
    let mut w = world();
    let mw = w.alloc_mw(MwType::Type2);
    let k1 = inc_rkey(mw.rkey);
    let bind = w.bind_info(&mw, mw.rkey, k1, 0, 0x100);
    assert_done(w.bind(w.b, 1, &bind), w.b, 1, WcOpcode::BindMw);
    let k2 = inc_rkey(k1);
    let unbind = w.bind_info(&mw, k1, k2, 0, 0);
    assert_done(w.bind(w.b, 2, &unbind), w.b, 2, WcOpcode::BindMw);
    let g = w.write(3, k1, w.region.addr(0), b"unbound");
    assert_remote_access(g, 3, VendorSyndrome::BadKey);

    // Local invalidate on the QP the window is bound to.
    let mut w = world();
    let mw = w.alloc_mw(MwType::Type2);
    let k1 = inc_rkey(mw.rkey);
    let bind = w.bind_info(&mw, mw.rkey, k1, 0, 0x100);
    assert_done(w.bind(w.b, 1, &bind), w.b, 1, WcOpcode::BindMw);
    assert_done(
        w.write(2, k1, w.region.addr(0), b"ok"),
        w.a,
        2,
        WcOpcode::RdmaWrite,
    );
    assert_done(w.local_inv(w.b, 3, k1), w.b, 3, WcOpcode::LocalInv);
    let g = w.write(4, k1, w.region.addr(0), b"invalid");
    assert_remote_access(g, 4, VendorSyndrome::BadKey);

    // Send with invalidate from the peer, arriving on the window's QP.
    let mut w = world();
    let mw = w.alloc_mw(MwType::Type2);
    let k1 = inc_rkey(mw.rkey);
    let bind = w.bind_info(&mw, mw.rkey, k1, 0, 0x100);
    assert_done(w.bind(w.b, 1, &bind), w.b, 1, WcOpcode::BindMw);
    let (rkey, raddr) = (w.local.key, w.local.addr(0x400));
    let rq = w.wqs.rqs.get_mut(&w.b.0).expect("rq");
    rq.post(
        0x77,
        &[RSge {
            addr: raddr,
            length: 64,
            lkey: rkey,
        }],
    )
    .expect("post recv");
    rq.commit();
    let sq = w.wqs.sqs.get_mut(&w.a.0).expect("sq");
    let mut batch = sq.start();
    batch
        .send_inv(2, k1)
        .expect("send_inv")
        .signaled()
        .inline_data(b"done with it")
        .expect("inline");
    batch.complete();
    let mut got = [w.next(), w.next()];
    got.sort_by_key(|g| g.wr_id);
    assert_done(got[0], w.a, 2, WcOpcode::Send);
    assert_eq!(
        (got[1].wr_id, got[1].status, got[1].invalidated),
        (0x77, WcStatus::Success, Some(k1))
    );
    let g = w.write(3, k1, w.region.addr(0), b"invalid");
    assert_remote_access(g, 3, VendorSyndrome::BadKey);
}

#[test]
fn a_window_over_a_region_without_mw_bind_fails_to_bind() {
    let mut w = world_with(Access::ALL);
    let mw = w.alloc_mw(MwType::Type2);
    let new = inc_rkey(mw.rkey);
    let bind = w.bind_info(&mw, mw.rkey, new, 0, 0x100);
    let g = w.bind(w.b, 0xbad, &bind);
    assert_failed(g, 0xbad, WcStatus::MwBindErr, VendorSyndrome::AccessRight);
    assert_eq!(g.syndrome, Some(Syndrome::MwBind));
    // Nothing was bound.
    assert_eq!(w.f.be.with(|d| d.mw_state(mw.rkey)), Some((mw.rkey, None)));
}
