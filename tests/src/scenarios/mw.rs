//! Memory windows, on every backend: a window allocated through
//! [`Backend::alloc_mw`], bound by the core's bind work request
//! ([`mlx5dp::sq::Batch::bind_mw`], libmlx5's `IBV_WR_BIND_MW` UMR),
//! used by the peer's RDMA write and read under the rkey the bind gave
//! it, refused outside its range and rights, and killed by an unbind, a
//! local invalidate, a send with invalidate and a deallocation.
//!
//! Everything checked here is what the IBA requires of windows, built as
//! libmlx5 builds its UMRs (`set_umr_control_seg`, `set_umr_mkey_seg`).
//! The binds, the writes through a window over a region with local write
//! and `MW_BIND` only, and the remote access error after a type-1 unbind,
//! a local invalidate, a send with invalidate and a deallocation are what
//! rdma-core's own tests run on mlx5 (`tests/test_mr.py`, `MWTest`); the
//! bounds, rights and stale-key checks are the IBA's R_Key checks, which
//! the device makes on the window's mkey (its start, length, access bits,
//! variant byte and, for type 2, QP number, all written by the bind). The
//! checks are on what the core reports: the completion's status, opcode,
//! wr_id, CQE syndrome and invalidated rkey, and the bytes in memory. The
//! emulated device's own cause code (`emu::VendorSyndrome`) is checked
//! only when [`Backend::emulated`] says the device is the emulator.
//!
//! What stays emulator only, in `tests/tests/e2e_mw.rs`: zero-based
//! windows and a bind over a region registered without `MW_BIND` (a
//! ConnectX's behaviour in both is not established: the mlx5 kernel
//! driver maps `IB_ACCESS_MW_BIND` to no mkey bit,
//! `set_mkc_access_pd_addr_fields`), the unbind of a
//! type-2 window by a zero-length bind (libmlx5 builds it with
//! `CHECK_QPN`; the IBA invalidates type-2 windows by local invalidate or
//! send with invalidate, and no rdma-core test runs it), and the window
//! state only the emulator shows (`Device::mw_state`).
//!
//! A remote access error moves the requester and the responder to the
//! error state (an RC NAK), so each check that makes one continues on a
//! fresh pair of QPs ([`World::fresh`]) of the same backend.

use super::no_core_mistakes;
use crate::e2e::{pattern, Fabric, Polled, QpSpec, Queues};
use mlx5dp::cq::{Cq, WcOpcode};
use mlx5dp::prm::{Syndrome, WcStatus};
use mlx5dp::rq::Sge as RSge;
use mlx5dp::sq::{DoorbellOnly, MwBind, MwType};
use mlx5dp_setup::backend::{Backend, Buffer};
use mlx5dp_setup::emu::{Access, CqeSize, QpType, Qpn, VendorSyndrome};

/// Bytes of the region windows are bound in.
pub const REGION: usize = 1 << 14;

/// What a region windows are bound in is registered with: local write
/// and `MW_BIND`, no remote right of its own (as rdma-core's `MWRC`
/// registers it), so remote access works only through a window.
pub const REGION_ACCESS: Access = Access(Access::LOCAL_WRITE.0 | Access::MW_BIND.0);

/// `ibv_inc_rkey`: the rkey a bind gives a window whose rkey is `rkey`.
pub fn inc_rkey(rkey: u32) -> u32 {
    (rkey & !0xff) | (rkey.wrapping_add(1) & 0xff)
}

/// Two connected RC QPs on one CQ, and their memory: A plays the remote
/// peer, B owns the region and binds the windows.
#[derive(Debug)]
pub struct Pair {
    /// The CQ both QPs complete on.
    pub cq: Cq,
    /// Their work queues (A's and B's send queues, B's receive queue).
    pub q: Queues<DoorbellOnly>,
    /// The peer.
    pub a: Qpn,
    /// The region's owner.
    pub b: Qpn,
    /// B's region, registered with the access the [`World`] was made with.
    pub region: Buffer,
    /// A's buffer (every right).
    pub local: Buffer,
}

/// A backend, the current [`Pair`], and the windows allocated on it.
#[derive(Debug)]
pub struct World<B: Backend> {
    /// The backend and its protection domain.
    pub f: Fabric<B>,
    /// The QPs and memory checks run on now.
    pub p: Pair,
    region_access: Access,
    windows: Vec<u32>,
}

impl<B: Backend> World<B> {
    /// A world on `be` whose regions have [`REGION_ACCESS`].
    pub fn new(be: B) -> Self {
        Self::with_region_access(be, REGION_ACCESS)
    }

    /// A world on `be` whose regions have `region_access`.
    pub fn with_region_access(be: B, region_access: Access) -> Self {
        let mut f = Fabric::new(be);
        let p = Self::pair(&mut f, region_access);
        Self {
            f,
            p,
            region_access,
            windows: Vec::new(),
        }
    }

    fn pair(f: &mut Fabric<B>, region_access: Access) -> Pair {
        let cq = f.cq(256, CqeSize::B64, None, false);
        let a = f.qp(QpSpec::new(QpType::Rc), &cq, Some(&cq));
        let b = f.qp(QpSpec::new(QpType::Rc), &cq, Some(&cq));
        f.connect(a.qpn, b.qpn);
        let mut q = Queues::default();
        q.sqs.insert(a.qpn.0, f.send_queue(a));
        q.sqs.insert(b.qpn.0, f.send_queue(b));
        q.rqs.insert(b.qpn.0, f.recv_queue(b));
        let pd = f.pd;
        let region =
            f.be.reg_buffer(pd, REGION, region_access)
                .expect("reg_buffer");
        let local = f.buffer(4096);
        Pair {
            cq,
            q,
            a: a.qpn,
            b: b.qpn,
            region,
            local,
        }
    }

    /// Deallocates every window still allocated, then replaces the pair
    /// with a fresh one (new CQ, QPs and memory) on the same backend.
    /// Windows go first: a region with windows bound may refuse to be
    /// deregistered (rxe does; a ConnectX has not been seen to).
    pub fn fresh(&mut self) {
        self.dealloc_all();
        self.p = Self::pair(&mut self.f, self.region_access);
    }

    /// Allocates a window of `t` in the PD; returns its rkey.
    pub fn alloc_mw(&mut self, t: MwType) -> u32 {
        let pd = self.f.pd;
        let rkey = self.f.be.alloc_mw(pd, t).expect("alloc_mw");
        self.windows.push(rkey);
        rkey
    }

    /// Deallocates the window `rkey` names (any rkey it has had).
    pub fn dealloc_mw(&mut self, rkey: u32) {
        self.f.be.dealloc_mw(rkey).expect("dealloc_mw");
        self.windows.retain(|&k| k >> 8 != rkey >> 8);
    }

    fn dealloc_all(&mut self) {
        for rkey in std::mem::take(&mut self.windows) {
            self.f.be.dealloc_mw(rkey).expect("dealloc_mw");
        }
    }

    /// Deallocates the windows and checks the device saw no core mistake.
    pub fn finish(mut self) {
        self.dealloc_all();
        no_core_mistakes(&mut self.f);
    }

    /// A bind of `[region + off, + len)` with remote read and write, of
    /// the window of type `t` whose rkey is `mw_rkey`, to `new_rkey`.
    pub fn bind_info(
        &self,
        t: MwType,
        mw_rkey: u32,
        new_rkey: u32,
        off: usize,
        len: u64,
    ) -> MwBind {
        MwBind {
            mw_type: t,
            mw_rkey,
            new_rkey,
            mr_lkey: self.p.region.key,
            addr: self.p.region.addr(off),
            length: len,
            access: MwBind::REMOTE_READ | MwBind::REMOTE_WRITE,
        }
    }

    /// Lets the device run until `n` more completions have been polled;
    /// returns them (exactly `n`).
    pub fn next(&mut self, n: usize) -> Vec<Polled> {
        let before = self.p.q.polled.len();
        self.f.run_for(&mut [&mut self.p.cq], &mut self.p.q, n);
        let got = self.p.q.polled[before..].to_vec();
        assert_eq!(got.len(), n, "{got:?}");
        got
    }

    fn one(&mut self) -> Polled {
        self.next(1).remove(0)
    }

    /// Posts a signalled bind on `qpn`; returns its completion.
    pub fn bind(&mut self, qpn: Qpn, wr_id: u64, b: &MwBind) -> Polled {
        let mut batch = self.p.q.sq(qpn).start();
        batch
            .bind_mw(wr_id, b)
            .expect("bind_mw")
            .signaled()
            .post()
            .expect("post");
        batch.complete();
        self.one()
    }

    /// A signalled local invalidate of `rkey` on `qpn`; returns its
    /// completion.
    pub fn local_inv(&mut self, qpn: Qpn, wr_id: u64, rkey: u32) -> Polled {
        let mut batch = self.p.q.sq(qpn).start();
        batch
            .local_inv(wr_id, rkey)
            .expect("local_inv")
            .signaled()
            .post()
            .expect("post");
        batch.complete();
        self.one()
    }

    /// An RDMA write of `data` from A to `raddr` under `rkey`; returns its
    /// completion.
    pub fn write(&mut self, wr_id: u64, rkey: u32, raddr: u64, data: &[u8]) -> Polled {
        self.p.local.write(0, data);
        let (key, addr) = (self.p.local.key, self.p.local.addr(0));
        let a = self.p.a;
        let mut batch = self.p.q.sq(a).start();
        batch
            .rdma_write(wr_id, rkey, raddr)
            .expect("rdma_write")
            .signaled()
            .sge(key, addr, data.len() as u32)
            .expect("sge");
        batch.complete();
        self.one()
    }

    /// An RDMA read of `len` bytes from `raddr` under `rkey` into A's
    /// buffer at 0x800; returns its completion and the bytes.
    pub fn read(&mut self, wr_id: u64, rkey: u32, raddr: u64, len: u32) -> (Polled, Vec<u8>) {
        self.p.local.fill(0x800, len as usize, 0xee);
        let (key, addr) = (self.p.local.key, self.p.local.addr(0x800));
        let a = self.p.a;
        let mut batch = self.p.q.sq(a).start();
        batch
            .rdma_read(wr_id, rkey, raddr)
            .expect("rdma_read")
            .signaled()
            .sge(key, addr, len)
            .expect("sge");
        batch.complete();
        let g = self.one();
        (g, self.p.local.read(0x800, len as usize))
    }

    /// A remote access error of `wr_id` (`IBV_WC_REM_ACCESS_ERR`, CQE
    /// syndrome `REMOTE_ACCESS_ERR`: the responder's NAK); on the
    /// emulator, for cause `v`.
    pub fn assert_remote_access(&mut self, g: &Polled, wr_id: u64, v: VendorSyndrome) {
        assert_eq!(
            (g.wr_id, g.status, g.syndrome),
            (wr_id, WcStatus::RemAccessErr, Some(Syndrome::RemoteAccess)),
            "{g:?}"
        );
        if self.f.be.emulated() {
            assert_eq!(g.vendor_err, v as u32, "{g:?}");
        }
    }
}

/// A successful completion of `wr_id` with `opcode` on `qpn`.
pub fn assert_done(g: &Polled, qpn: Qpn, wr_id: u64, opcode: WcOpcode) {
    assert_eq!(
        (g.status, g.qpn, g.wr_id, g.opcode),
        (WcStatus::Success, qpn.0, wr_id, opcode),
        "{g:?}"
    );
}

/// A type-2 bind completes as `IBV_WC_BIND_MW` with its wr_id (the send
/// queue records the opcode at post time: a UMR's CQE names no bind), and
/// the window carries the peer's RDMA write and read, the last bytes of
/// the window included, in a region with no remote right of its own.
pub fn bind_write_read<B: Backend>(be: B) {
    let mut w = World::new(be);
    let (a, b) = (w.p.a, w.p.b);
    let mw = w.alloc_mw(MwType::Type2);
    let new = inc_rkey(mw);
    let bind = w.bind_info(MwType::Type2, mw, new, 0x1000, 0x400);
    let g = w.bind(b, 0xb1d, &bind);
    assert_done(&g, b, 0xb1d, WcOpcode::BindMw);

    let data = pattern(7, 96);
    let raddr = w.p.region.addr(0x1040);
    assert_done(&w.write(1, new, raddr, &data), a, 1, WcOpcode::RdmaWrite);
    assert_eq!(w.p.region.read(0x1040, 96), data);
    assert_eq!(w.p.region.read(0x1040 + 96, 8), [0; 8]);
    let tail = pattern(8, 16);
    w.p.region.write(0x13f0, &tail);
    let tail_addr = w.p.region.addr(0x13f0);
    let (g, got) = w.read(2, new, tail_addr, 16);
    assert_done(&g, a, 2, WcOpcode::RdmaRead);
    assert_eq!(got, tail);
    let (g, got) = w.read(3, new, raddr, 96);
    assert_done(&g, a, 3, WcOpcode::RdmaRead);
    assert_eq!(got, data);
    w.finish();
}

/// A type-1 window belongs to the PD, not a QP (libmlx5 writes no QPN
/// into its mkey): bound by a work request on A, it serves A's write
/// arriving on B.
pub fn type1_serves_any_qp_of_the_pd<B: Backend>(be: B) {
    let mut w = World::new(be);
    let a = w.p.a;
    let mw = w.alloc_mw(MwType::Type1);
    let new = inc_rkey(mw);
    let bind = w.bind_info(MwType::Type1, mw, new, 0x3000, 0x80);
    assert_done(&w.bind(a, 4, &bind), a, 4, WcOpcode::BindMw);
    let raddr = w.p.region.addr(0x3000);
    assert_done(
        &w.write(5, new, raddr, b"type one"),
        a,
        5,
        WcOpcode::RdmaWrite,
    );
    assert_eq!(w.p.region.read(0x3000, 8), b"type one");
    w.finish();
}

/// Accesses past the end or before the start of a window, and a write
/// through a window that grants remote read only, fail with remote access
/// errors and write nothing; the read it grants works.
pub fn outside_the_window_fails<B: Backend>(be: B) {
    let mut w = World::new(be);
    let bind_at = |w: &mut World<B>, access: u32| {
        let b = w.p.b;
        let mw = w.alloc_mw(MwType::Type2);
        let new = inc_rkey(mw);
        let mut bind = w.bind_info(MwType::Type2, mw, new, 0x1000, 0x100);
        bind.access = access;
        assert_done(&w.bind(b, 1, &bind), b, 1, WcOpcode::BindMw);
        new
    };
    let rw = MwBind::REMOTE_READ | MwBind::REMOTE_WRITE;

    // Past the end: 9 bytes from 8 before it.
    let key = bind_at(&mut w, rw);
    let raddr = w.p.region.addr(0x10f8);
    let g = w.write(2, key, raddr, &[1; 9]);
    w.assert_remote_access(&g, 2, VendorSyndrome::Bounds);
    assert_eq!(w.p.region.read(0x10f8, 9), [0; 9]);

    // Before the start, inside the region.
    w.fresh();
    let key = bind_at(&mut w, rw);
    let raddr = w.p.region.addr(0xff0);
    let (g, _) = w.read(2, key, raddr, 16);
    w.assert_remote_access(&g, 2, VendorSyndrome::Bounds);

    // Remote read only: the read works, the write fails.
    w.fresh();
    let key = bind_at(&mut w, MwBind::REMOTE_READ);
    let a = w.p.a;
    let raddr = w.p.region.addr(0x1000);
    let (g, _) = w.read(2, key, raddr, 8);
    assert_done(&g, a, 2, WcOpcode::RdmaRead);
    let g = w.write(3, key, raddr, b"no right");
    w.assert_remote_access(&g, 3, VendorSyndrome::AccessRight);
    assert_eq!(w.p.region.read(0x1000, 8), [0; 8]);
    w.finish();
}

/// The keys that name no usable window fail: the rkey of a window never
/// bound (it is free), the rkey a window had before its bind (the mkey's
/// variant byte changed), and a type-2 window's rkey used through a QP it
/// is not bound to (the IBA's type-2 rule; rxe `rxe_lookup_mw`; libmlx5
/// writes the binding QP's number into the mkey).
pub fn stale_unbound_and_wrong_qp_keys_fail<B: Backend>(be: B) {
    // Allocated, never bound.
    let mut w = World::new(be);
    let mw = w.alloc_mw(MwType::Type2);
    let raddr = w.p.region.addr(0);
    let g = w.write(1, mw, raddr, b"unbound");
    w.assert_remote_access(&g, 1, VendorSyndrome::BadKey);

    // Bound: the rkey before the bind names nothing.
    w.fresh();
    let b = w.p.b;
    let mw = w.alloc_mw(MwType::Type2);
    let bind = w.bind_info(MwType::Type2, mw, inc_rkey(mw), 0, 0x100);
    assert_done(&w.bind(b, 1, &bind), b, 1, WcOpcode::BindMw);
    let raddr = w.p.region.addr(0);
    let g = w.write(2, mw, raddr, b"old key");
    w.assert_remote_access(&g, 2, VendorSyndrome::BadKey);

    // A type-2 window bound on A: a write from A arrives on B, which is
    // not the QP the window is bound to.
    w.fresh();
    let a = w.p.a;
    let mw = w.alloc_mw(MwType::Type2);
    let new = inc_rkey(mw);
    let bind = w.bind_info(MwType::Type2, mw, new, 0, 0x100);
    assert_done(&w.bind(a, 1, &bind), a, 1, WcOpcode::BindMw);
    let raddr = w.p.region.addr(0);
    let g = w.write(2, new, raddr, b"wrong qp");
    w.assert_remote_access(&g, 2, VendorSyndrome::MwState);
    assert_eq!(w.p.region.read(0, 8), [0; 8]);
    w.finish();
}

/// Each way of killing a window's key leaves the peer's next write with a
/// remote access error (rdma-core `MWTest`'s `test_invalidate_mw_type1`,
/// `test_mw_type2_invalidate_local`, `_remote` and `_dealloc`): a
/// zero-length bind of a type-1 window (an unbind, reported as a bind), a
/// local invalidate on the type-2 window's QP, a send with invalidate
/// from the peer arriving on that QP (its receive completion names the
/// key), and deallocating a bound window.
pub fn invalidation_kills_the_key<B: Backend>(be: B) {
    let mut w = World::new(be);
    let bind2 = |w: &mut World<B>| {
        let b = w.p.b;
        let mw = w.alloc_mw(MwType::Type2);
        let k1 = inc_rkey(mw);
        let bind = w.bind_info(MwType::Type2, mw, k1, 0, 0x100);
        assert_done(&w.bind(b, 1, &bind), b, 1, WcOpcode::BindMw);
        k1
    };

    // Type-1 unbind: a bind of length 0, as `ibv_bind_mw` builds it.
    let a = w.p.a;
    let mw = w.alloc_mw(MwType::Type1);
    let k1 = inc_rkey(mw);
    let bind = w.bind_info(MwType::Type1, mw, k1, 0, 0x100);
    assert_done(&w.bind(a, 1, &bind), a, 1, WcOpcode::BindMw);
    let raddr = w.p.region.addr(0);
    assert_done(&w.write(2, k1, raddr, b"ok"), a, 2, WcOpcode::RdmaWrite);
    let unbind = w.bind_info(MwType::Type1, k1, inc_rkey(k1), 0, 0);
    assert_done(&w.bind(a, 3, &unbind), a, 3, WcOpcode::BindMw);
    let g = w.write(4, k1, raddr, b"unbound");
    w.assert_remote_access(&g, 4, VendorSyndrome::BadKey);

    // Local invalidate on the QP the type-2 window is bound to.
    w.fresh();
    let (a, b) = (w.p.a, w.p.b);
    let k1 = bind2(&mut w);
    let raddr = w.p.region.addr(0);
    assert_done(&w.write(2, k1, raddr, b"ok"), a, 2, WcOpcode::RdmaWrite);
    assert_done(&w.local_inv(b, 3, k1), b, 3, WcOpcode::LocalInv);
    let g = w.write(4, k1, raddr, b"invalid");
    w.assert_remote_access(&g, 4, VendorSyndrome::BadKey);

    // Send with invalidate from the peer, arriving on the window's QP.
    w.fresh();
    let (a, b) = (w.p.a, w.p.b);
    let k1 = bind2(&mut w);
    let (lkey, addr) = (w.p.local.key, w.p.local.addr(0x400));
    let rq = w.p.q.rq(b.0);
    rq.post(
        0x77,
        &[RSge {
            addr,
            length: 64,
            lkey,
        }],
    )
    .expect("post recv");
    rq.commit();
    let mut batch = w.p.q.sq(a).start();
    batch
        .send_inv(2, k1)
        .expect("send_inv")
        .signaled()
        .inline_data(b"done with it")
        .expect("inline");
    batch.complete();
    let mut got = w.next(2);
    got.sort_by_key(|g| g.wr_id);
    assert_done(&got[0], a, 2, WcOpcode::Send);
    assert_eq!(
        (got[1].wr_id, got[1].status, got[1].invalidated),
        (0x77, WcStatus::Success, Some(k1)),
        "{:?}",
        got[1]
    );
    let raddr = w.p.region.addr(0);
    let g = w.write(3, k1, raddr, b"invalid");
    w.assert_remote_access(&g, 3, VendorSyndrome::BadKey);

    // Deallocating a bound window.
    w.fresh();
    let a = w.p.a;
    let k1 = bind2(&mut w);
    let raddr = w.p.region.addr(0);
    assert_done(&w.write(2, k1, raddr, b"ok"), a, 2, WcOpcode::RdmaWrite);
    w.dealloc_mw(k1);
    let g = w.write(3, k1, raddr, b"gone");
    w.assert_remote_access(&g, 3, VendorSyndrome::BadKey);
    w.finish();
}
