//! Memory windows: the bind UMR parsed from its bytes, binds and the rules
//! that fail them, remote access through a window key, invalidation.
//!
//! The UMR WQEs are built here by hand from the `prm` layouts, as rdma-core
//! libmlx5 v44 builds them (`qp.c` `set_bind_wr`: `set_umr_control_seg`,
//! `set_umr_mkey_seg`, `set_umr_data_seg`), not with the core's builder.

use super::*;
use crate::decode::trace::parse_records;
use crate::emu::wqe::{self, Op, ParseCtx, UmrBind, UmrRange, WqeFault};
use crate::trace_record::check_record;
use mlx5dp::prm::{umr, MkeyContextSeg, UmrCtrlSeg, UmrKlmSeg};

/// Mkey-context rights: remote read and write.
const RW: u8 = umr::ACCESS_REMOTE_READ | umr::ACCESS_REMOTE_WRITE;

/// One `IBV_WR_BIND_MW` as libmlx5 sees it.
#[derive(Clone, Copy, Debug)]
struct Bind {
    /// Type 2 (else type 1).
    t2: bool,
    /// The posting QP's number.
    qpn: u32,
    /// `bind_mw.rkey`.
    new_rkey: u32,
    /// `bind_info.mr->lkey`.
    mr: u32,
    /// `bind_info.addr`.
    addr: u64,
    /// `bind_info.length` (0: unbind).
    len: u64,
    /// Mkey-context access bits.
    access: u8,
    /// `IBV_ACCESS_ZERO_BASED`.
    zero_based: bool,
}

/// The UMR segments of `b` (libmlx5 `set_bind_wr`).
fn umr_segs(b: &Bind) -> Vec<Vec<u8>> {
    let range = b.len != 0;
    let mut flags = umr::CTRL_FLAG_INLINE | umr::CTRL_FLAG_TRANSLATION_OFFSET;
    let mut mask = umr::MKEY_MASK_FREE | umr::MKEY_MASK_MKEY;
    if b.t2 {
        mask |= umr::MKEY_MASK_QPN;
        flags |= if range {
            umr::CTRL_FLAG_CHECK_FREE
        } else {
            umr::CTRL_FLAG_CHECK_QPN
        };
    }
    if range {
        mask |= umr::MKEY_MASK_LEN
            | umr::MKEY_MASK_START_ADDR
            | umr::MKEY_MASK_ACCESS_LOCAL_WRITE
            | umr::MKEY_MASK_ACCESS_REMOTE_READ
            | umr::MKEY_MASK_ACCESS_REMOTE_WRITE
            | umr::MKEY_MASK_ACCESS_ATOMIC;
    }
    let ctrl = UmrCtrlSeg {
        flags,
        klm_octowords: Be16::new(if range { 4 } else { 0 }),
        mkey_mask: Be64::new(mask),
        ..UmrCtrlSeg::default()
    };
    let qpn_field = if b.t2 && range {
        b.qpn << 8
    } else {
        0xffff_ff00
    };
    let mut mkey = MkeyContextSeg {
        qpn_mkey: Be32::new(qpn_field | (b.new_rkey & 0xff)),
        ..MkeyContextSeg::default()
    };
    let mut segs = vec![ctrl.as_bytes().to_vec()];
    if range {
        mkey.access_flags = b.access;
        mkey.start_addr = Be64::new(if b.zero_based { 0 } else { b.addr });
        mkey.len = Be64::new(b.len);
        segs.push(mkey.as_bytes().to_vec());
        let klm = UmrKlmSeg {
            byte_count: Be32::new(b.len as u32),
            mkey: Be32::new(b.mr),
            address: Be64::new(b.addr),
        };
        let mut t = klm.as_bytes().to_vec();
        t.resize(64, 0);
        segs.push(t);
    } else {
        mkey.free = umr::MKEY_CONTEXT_FREE;
        segs.push(mkey.as_bytes().to_vec());
    }
    segs
}

/// `ibv_inc_rkey`: the next variant byte.
fn inc_rkey(rkey: u32) -> u32 {
    (rkey & !0xff) | (rkey.wrapping_add(1) & 0xff)
}

/// A connected RC pair (PD 1) and a 4 KiB region registered for binding.
struct Rig {
    p: Pair,
    mem: Arc<DmaBlock>,
    mr: u32,
    sq_a: TSq,
    sq_b: TSq,
    cq_a: TCq,
    cq_b: TCq,
}

fn rig(mr_access: Access) -> Rig {
    let mut p = pair(QpType::Rc, Access::ALL);
    let mem = p.dev.alloc_buffer(4096).unwrap();
    let mr = p.dev.reg_mr(Pdn(1), &mem, mr_access).unwrap();
    let (sq_a, sq_b) = (TSq::new(&p.dev, p.a), TSq::new(&p.dev, p.b));
    let (cq_a, cq_b) = (TCq::new(&p.dev, p.a_cq), TCq::new(&p.dev, p.b_cq));
    Rig {
        p,
        mem,
        mr,
        sq_a,
        sq_b,
        cq_a,
        cq_b,
    }
}

impl Rig {
    /// A bind of `[mem + off, + len)` with `access` posted on B, type 2.
    fn t2_on_b(&self, new_rkey: u32, off: u64, len: u64, access: u8) -> Bind {
        Bind {
            t2: true,
            qpn: self.p.b.0,
            new_rkey,
            mr: self.mr,
            addr: self.mem.addr() + off,
            len,
            access,
            zero_based: false,
        }
    }

    /// Posts one signalled WQE on A (or B) and runs that SQ; returns the
    /// poster's new CQEs.
    fn post(&mut self, on_b: bool, opcode: SendOpcode, imm: u32, segs: &[Vec<u8>]) -> Vec<Cqe64> {
        if on_b {
            self.sq_b.post(opcode, 0, SIG, imm, segs);
            self.p.dev.process_sq(self.p.b).unwrap();
            self.cq_b.drain()
        } else {
            self.sq_a.post(opcode, 0, SIG, imm, segs);
            self.p.dev.process_sq(self.p.a).unwrap();
            self.cq_a.drain()
        }
    }

    /// Posts the bind `b` of the window `mw_rkey` on B (or A).
    fn bind(&mut self, on_b: bool, mw_rkey: u32, b: &Bind) -> Vec<Cqe64> {
        self.post(on_b, SendOpcode::Umr, mw_rkey, &umr_segs(b))
    }

    /// An RDMA write of `data` from A to `raddr` under `rkey`.
    fn write(&mut self, rkey: u32, raddr: u64, data: &[u8]) -> Vec<Cqe64> {
        let segs = [raddr_seg(raddr, rkey), inline_seg(data)];
        self.post(false, SendOpcode::RdmaWrite, 0, &segs)
    }

    /// An RDMA read of `len` bytes from `raddr` under `rkey` into A's buffer.
    fn read(&mut self, rkey: u32, raddr: u64, len: u32) -> (Vec<Cqe64>, Vec<u8>) {
        let segs = [
            raddr_seg(raddr, rkey),
            data_seg(self.p.buf.addr(), self.p.key, len),
        ];
        let c = self.post(false, SendOpcode::RdmaRead, 0, &segs);
        let mut out = vec![0u8; len as usize];
        self.p.buf.read(0, &mut out).unwrap();
        (c, out)
    }
}

/// The one CQE succeeded (a requester completion).
fn assert_ok(c: &[Cqe64]) {
    assert_eq!(c.len(), 1, "{c:?}");
    assert_eq!(c[0].opcode(), CqeOpcode::Req, "{:?}", err_of(&c[0]));
}

/// The syndrome and vendor syndrome of the one error CQE.
fn failed(c: &[Cqe64]) -> (Syndrome, u8) {
    assert_eq!(c.len(), 1, "{c:?}");
    let (op, s, v, _) = err_of(&c[0]);
    assert_eq!(op, CqeOpcode::ReqErr);
    (s, v)
}

fn bind_err(v: VendorSyndrome) -> (Syndrome, u8) {
    (Syndrome::MwBind, v as u8)
}

fn access_err(v: VendorSyndrome) -> (Syndrome, u8) {
    (Syndrome::RemoteAccess, v as u8)
}

fn parse_ctx(qpn: Qpn) -> ParseCtx {
    ParseCtx {
        qp_type: QpType::Rc,
        qpn: qpn.0,
        expected_index: 0,
        max_wqe_bytes: 1024,
        mpw: false,
        empw: false,
        eth_min_inline: 0,
        max_tso_header: 0,
    }
}

// --------------------------------------------------------------------------
// Parsing
// --------------------------------------------------------------------------

#[test]
fn the_bind_umr_parses_from_its_bytes() {
    let r = rig(Access::ALL | Access::MW_BIND);
    let ctx = parse_ctx(r.p.b);
    let mut b = r.t2_on_b(0x1234_5677, 0x100, 0x200, RW | umr::ACCESS_ATOMIC);
    b.zero_based = true;
    let w = r
        .sq_b
        .build(SendOpcode::Umr, 0, SIG, 0x1234_5601, &umr_segs(&b));
    assert_eq!(w.len(), 16 + 48 + 64 + 64);
    let parsed = wqe::parse(&w, &ctx).unwrap();
    assert_eq!(
        parsed.op,
        Op::BindMw {
            key: 0x1234_5601,
            bind: UmrBind {
                check_free: true,
                check_qpn: false,
                qpn: Some(r.p.b.0),
                variant: Some(0x77),
                range: Some(UmrRange {
                    access: Access::REMOTE_READ | Access::REMOTE_WRITE | Access::REMOTE_ATOMIC,
                    start_addr: 0,
                    len: 0x200,
                    klm_mkey: r.mr,
                    klm_address: r.mem.addr() + 0x100,
                }),
            },
        }
    );
    // The local invalidate / type-2 unbind: a free, checking the QPN.
    b.len = 0;
    let w = r
        .sq_b
        .build(SendOpcode::Umr, 0, SIG, 0xabcd_ef01, &umr_segs(&b));
    assert_eq!(w.len(), 16 + 48 + 64);
    assert_eq!(
        wqe::parse(&w, &ctx).unwrap().op,
        Op::BindMw {
            key: 0xabcd_ef01,
            bind: UmrBind {
                check_free: false,
                check_qpn: true,
                qpn: Some(0x00ff_ffff),
                variant: Some(0x77),
                range: None,
            },
        }
    );
    // A type-1 unbind selects no QPN and checks nothing.
    b.t2 = false;
    let w = r
        .sq_b
        .build(SendOpcode::Umr, 0, SIG, 0xabcd_ef01, &umr_segs(&b));
    let Op::BindMw { bind, .. } = wqe::parse(&w, &ctx).unwrap().op else {
        panic!("not a bind");
    };
    assert_eq!(
        (bind.check_free, bind.check_qpn, bind.qpn),
        (false, false, None)
    );
}

#[test]
fn malformed_bind_umrs_are_typed_faults() {
    let r = rig(Access::ALL | Access::MW_BIND);
    let ctx = parse_ctx(r.p.b);
    let good = umr_segs(&r.t2_on_b(0x1_00, 0x100, 0x200, RW));
    let parse = |segs: &[Vec<u8>]| {
        let w = r.sq_b.build(SendOpcode::Umr, 0, SIG, 0x1_00, segs);
        wqe::parse(&w, &ctx).map(|_| ())
    };
    assert_eq!(parse(&good), Ok(()));
    let with_ctrl = |f: &dyn Fn(&mut UmrCtrlSeg)| {
        let mut s = good.clone();
        let mut c = UmrCtrlSeg::read_from_bytes(&s[0][..]).unwrap();
        f(&mut c);
        s[0] = c.as_bytes().to_vec();
        s
    };
    let with_mkey = |f: &dyn Fn(&mut MkeyContextSeg)| {
        let mut s = good.clone();
        let mut m = MkeyContextSeg::read_from_bytes(&s[1][..]).unwrap();
        f(&mut m);
        s[1] = m.as_bytes().to_vec();
        s
    };
    // More KLMs than the DS count holds.
    assert_eq!(
        parse(&with_ctrl(&|c| c.klm_octowords.set(8))),
        Err(WqeFault::KlmOverrun)
    );
    // Bytes after the translation.
    assert_eq!(
        parse(&with_ctrl(&|c| c.klm_octowords.set(2))),
        Err(WqeFault::BadUmr)
    );
    // A bind with no translation at all.
    let mut no_klm = with_ctrl(&|c| c.klm_octowords.set(0));
    no_klm.pop();
    assert_eq!(parse(&no_klm), Err(WqeFault::BadUmr));
    // A bind of length 0, a range wrapping the address space.
    assert_eq!(parse(&with_mkey(&|m| m.len.set(0))), Err(WqeFault::BadUmr));
    assert_eq!(
        parse(&with_mkey(&|m| m.start_addr.set(u64::MAX - 0x10))),
        Err(WqeFault::BadUmr)
    );
    // A free that carries KLMs.
    assert_eq!(
        parse(&with_mkey(&|m| m.free = umr::MKEY_CONTEXT_FREE)),
        Err(WqeFault::BadUmr)
    );
    // Features this device does not have: a translation by pointer, a
    // BSF, a partial update, a window over several KLMs, a UMR that does
    // not touch the free field.
    assert_eq!(
        parse(&with_ctrl(&|c| c.flags &= !umr::CTRL_FLAG_INLINE)),
        Err(WqeFault::Unsupported)
    );
    assert_eq!(
        parse(&with_ctrl(&|c| c
            .mkey_mask
            .set(c.mkey_mask.get() | umr::MKEY_MASK_BSF_ENABLE))),
        Err(WqeFault::Unsupported)
    );
    assert_eq!(
        parse(&with_ctrl(&|c| c
            .mkey_mask
            .set(c.mkey_mask.get() & !umr::MKEY_MASK_LEN))),
        Err(WqeFault::Unsupported)
    );
    assert_eq!(
        parse(&with_ctrl(&|c| c
            .mkey_mask
            .set(c.mkey_mask.get() & !umr::MKEY_MASK_FREE))),
        Err(WqeFault::Unsupported)
    );
    assert_eq!(
        parse(&with_mkey(&|m| m.len.set(0x201))),
        Err(WqeFault::Unsupported)
    );
}

#[test]
fn a_malformed_bind_completes_with_a_local_qp_operation_error() {
    let mut r = rig(Access::ALL | Access::MW_BIND);
    let mw = r.p.dev.alloc_mw(Pdn(1), MwType::Type2).unwrap();
    let mut segs = umr_segs(&r.t2_on_b(inc_rkey(mw.rkey), 0, 0x40, RW));
    let mut c = UmrCtrlSeg::read_from_bytes(&segs[0][..]).unwrap();
    c.klm_octowords.set(8);
    segs[0] = c.as_bytes().to_vec();
    let e = r.post(true, SendOpcode::Umr, mw.rkey, &segs);
    assert_eq!(
        failed(&e),
        (Syndrome::LocalQpOp, VendorSyndrome::BadDs as u8)
    );
    assert_eq!(r.p.dev.mw_state(mw.rkey), Some((mw.rkey, None)));
}

// --------------------------------------------------------------------------
// Binds, remote access
// --------------------------------------------------------------------------

#[test]
fn a_type2_window_maps_its_range_for_remote_write_and_read() {
    let mut r = rig(Access::LOCAL_WRITE | Access::MW_BIND);
    let mw = r.p.dev.alloc_mw(Pdn(1), MwType::Type2).unwrap();
    assert_eq!(mw.mw_type, MwType::Type2);
    // Allocated free: its key does not work yet.
    assert_eq!(
        failed(&r.write(mw.rkey, r.mem.addr(), b"early")),
        access_err(VendorSyndrome::BadKey)
    );

    let mut r = rig(Access::LOCAL_WRITE | Access::MW_BIND);
    let mw = r.p.dev.alloc_mw(Pdn(1), MwType::Type2).unwrap();
    let new = inc_rkey(mw.rkey);
    assert_ok(&r.bind(true, mw.rkey, &r.t2_on_b(new, 0x100, 0x200, RW)));
    let (key, binding) = r.p.dev.mw_state(mw.rkey).unwrap();
    assert_eq!(key, (mw.rkey & !0xff) | (new & 0xff));
    let binding = binding.unwrap();
    assert_eq!(
        (binding.addr, binding.len, binding.mr_key, binding.qpn),
        (r.mem.addr() + 0x100, 0x200, r.mr, Some(r.p.b))
    );
    assert!(!binding.zero_based);
    // The region itself has no remote rights: the window grants them.
    assert_ok(&r.write(new, r.mem.addr() + 0x180, b"through the window"));
    let mut got = [0u8; 18];
    r.mem.read(0x180, &mut got).unwrap();
    assert_eq!(&got, b"through the window");
    r.mem.write(0x2f8, b"last8byt").unwrap();
    let (c, data) = r.read(new, r.mem.addr() + 0x2f8, 8);
    assert_ok(&c);
    assert_eq!(data, b"last8byt");
    // The old key names nothing any more.
    assert_eq!(
        failed(&r.write(mw.rkey, r.mem.addr() + 0x100, b"x")),
        access_err(VendorSyndrome::BadKey)
    );
}

#[test]
fn a_zero_based_window_counts_from_its_start() {
    let mut r = rig(Access::LOCAL_WRITE | Access::MW_BIND);
    let mw = r.p.dev.alloc_mw(Pdn(1), MwType::Type2).unwrap();
    let new = inc_rkey(mw.rkey);
    let mut b = r.t2_on_b(new, 0x400, 0x100, RW);
    b.zero_based = true;
    assert_ok(&r.bind(true, mw.rkey, &b));
    let binding = r.p.dev.mw_state(new).unwrap().1.unwrap();
    assert!(binding.zero_based);
    assert_eq!((binding.addr, binding.mr_addr), (0, r.mem.addr() + 0x400));
    assert_ok(&r.write(new, 0x10, b"zb"));
    let mut got = [0u8; 2];
    r.mem.read(0x410, &mut got).unwrap();
    assert_eq!(&got, b"zb");
    r.mem.write(0x4f0, b"tail").unwrap();
    let (c, data) = r.read(new, 0xf0, 4);
    assert_ok(&c);
    assert_eq!(data, b"tail");
    // The window's length is the limit, not the region's.
    assert_eq!(
        failed(&r.write(new, 0xff, b"xy")),
        access_err(VendorSyndrome::Bounds)
    );
}

#[test]
fn remote_access_outside_the_window_or_its_rights_fails() {
    let cases: [(&str, u64, u8, bool, VendorSyndrome); 4] = [
        ("below the window", 0xff, RW, true, VendorSyndrome::Bounds),
        ("past the window", 0x2ff, RW, true, VendorSyndrome::Bounds),
        (
            "write through a read-only window",
            0x100,
            umr::ACCESS_REMOTE_READ,
            true,
            VendorSyndrome::AccessRight,
        ),
        (
            "read through a write-only window",
            0x100,
            umr::ACCESS_REMOTE_WRITE,
            false,
            VendorSyndrome::AccessRight,
        ),
    ];
    for (what, off, access, write, v) in cases {
        let mut r = rig(Access::ALL | Access::MW_BIND);
        let mw = r.p.dev.alloc_mw(Pdn(1), MwType::Type2).unwrap();
        let new = inc_rkey(mw.rkey);
        assert_ok(&r.bind(true, mw.rkey, &r.t2_on_b(new, 0x100, 0x200, access)));
        let c = if write {
            r.write(new, r.mem.addr() + off, b"ab")
        } else {
            r.read(new, r.mem.addr() + off, 2).0
        };
        assert_eq!(failed(&c), access_err(v), "{what}");
        // The responder went to the error state too (a NAK).
        assert_eq!(r.p.dev.qp_state(r.p.b), Some(QpState::Err), "{what}");
    }
}

#[test]
fn a_type2_window_works_only_through_the_qp_it_is_bound_to() {
    // Bound by A: a write from A arrives on B, which is not its QP.
    let mut r = rig(Access::ALL | Access::MW_BIND);
    let mw = r.p.dev.alloc_mw(Pdn(1), MwType::Type2).unwrap();
    let new = inc_rkey(mw.rkey);
    let mut b = r.t2_on_b(new, 0, 0x100, RW);
    b.qpn = r.p.a.0;
    assert_ok(&r.bind(false, mw.rkey, &b));
    assert_eq!(r.p.dev.mw_state(new).unwrap().1.unwrap().qpn, Some(r.p.a));
    assert_eq!(
        failed(&r.write(new, r.mem.addr(), b"wrong qp")),
        access_err(VendorSyndrome::MwState)
    );
    let mut got = [0u8; 8];
    r.mem.read(0, &mut got).unwrap();
    assert_eq!(got, [0; 8]);
}

#[test]
fn a_window_key_is_not_an_lkey() {
    for (r, key) in [bound_t2(), bound_t1()] {
        let mut r = r;
        // As the gather list of B's own send: a local protection error.
        let e = r.post(
            true,
            SendOpcode::Send,
            0,
            &[data_seg(r.mem.addr(), key, 16)],
        );
        assert_eq!(
            failed(&e),
            (Syndrome::LocalProt, VendorSyndrome::BadKey as u8)
        );
    }
    // As the scatter list of A's RDMA read (the region key works there).
    let (mut r, key) = bound_t1();
    let segs = [
        raddr_seg(r.p.rbuf.addr(), r.p.rkey),
        data_seg(r.mem.addr(), key, 8),
    ];
    let e = r.post(false, SendOpcode::RdmaRead, 0, &segs);
    assert_eq!(
        failed(&e),
        (Syndrome::LocalProt, VendorSyndrome::BadKey as u8)
    );
}

#[test]
fn a_type1_window_is_bound_to_the_pd_and_may_be_rebound() {
    let mut r = rig(Access::ALL | Access::MW_BIND);
    let mw = r.p.dev.alloc_mw(Pdn(1), MwType::Type1).unwrap();
    let k1 = inc_rkey(mw.rkey);
    let mut b = r.t2_on_b(k1, 0, 0x100, RW);
    b.t2 = false;
    // Bound by A, used through B: type 1 has no QP.
    assert_ok(&r.bind(false, mw.rkey, &b));
    assert_eq!(r.p.dev.mw_state(k1).unwrap().1.unwrap().qpn, None);
    assert_ok(&r.write(k1, r.mem.addr() + 8, b"t1"));
    // Rebinding a bound type-1 window needs no unbind; the old key stops.
    let k2 = inc_rkey(k1);
    b.new_rkey = k2;
    b.addr = r.mem.addr() + 0x800;
    assert_ok(&r.bind(false, k1, &b));
    assert_ok(&r.write(k2, r.mem.addr() + 0x800, b"t1b"));
    let mut got = [0u8; 3];
    r.mem.read(0x800, &mut got).unwrap();
    assert_eq!(&got, b"t1b");
    // Unbound (a bind of length 0): the key stops working.
    let k3 = inc_rkey(k2);
    b.new_rkey = k3;
    b.len = 0;
    assert_ok(&r.bind(false, k2, &b));
    assert_eq!(r.p.dev.mw_state(k3).unwrap().1, None);
    assert_eq!(
        failed(&r.write(k2, r.mem.addr() + 0x800, b"x")),
        access_err(VendorSyndrome::BadKey)
    );
}

// --------------------------------------------------------------------------
// Bind failures
// --------------------------------------------------------------------------

/// A bind that breaks one rule.
struct BadBind {
    what: &'static str,
    mr_access: Access,
    mw_type: MwType,
    /// Adjusts the bind; `other` is a second (free, type-1) window.
    adjust: fn(&mut Bind, &Rig, other: u32),
    /// The key the WQE names, given the window's.
    imm: fn(&Rig, mw: u32) -> u32,
    want: VendorSyndrome,
}

fn no_adjust(_: &mut Bind, _: &Rig, _: u32) {}

fn same(_: &Rig, mw: u32) -> u32 {
    mw
}

#[test]
fn binds_breaking_a_rule_fail_with_mw_bind_err() {
    let bindable = Access::ALL | Access::MW_BIND;
    let cases = [
        BadBind {
            what: "C10-73: region without MW_BIND",
            mr_access: Access::ALL,
            mw_type: MwType::Type2,
            adjust: no_adjust,
            imm: same,
            want: VendorSyndrome::AccessRight,
        },
        BadBind {
            what: "C10-74: remote write on a region without local write",
            mr_access: Access::REMOTE_READ | Access::MW_BIND,
            mw_type: MwType::Type2,
            adjust: no_adjust,
            imm: same,
            want: VendorSyndrome::AccessRight,
        },
        BadBind {
            what: "C10-75: range past the region",
            mr_access: bindable,
            mw_type: MwType::Type2,
            adjust: |b, _, _| b.addr += 4096 - 0x80,
            imm: same,
            want: VendorSyndrome::Bounds,
        },
        BadBind {
            what: "range before the region",
            mr_access: bindable,
            mw_type: MwType::Type2,
            adjust: |b, r, _| b.addr = r.mem.addr() - 0x10,
            imm: same,
            want: VendorSyndrome::Bounds,
        },
        BadBind {
            what: "KLM names no region",
            mr_access: bindable,
            mw_type: MwType::Type2,
            adjust: |b, _, _| b.mr ^= 0x0010_0000,
            imm: same,
            want: VendorSyndrome::BadKey,
        },
        BadBind {
            what: "KLM names a window",
            mr_access: bindable,
            mw_type: MwType::Type2,
            adjust: |b, _, other| b.mr = other,
            imm: same,
            want: VendorSyndrome::BadKey,
        },
        BadBind {
            what: "imm names no window",
            mr_access: bindable,
            mw_type: MwType::Type2,
            adjust: no_adjust,
            imm: |_, mw| mw ^ 0x0010_0000,
            want: VendorSyndrome::BadKey,
        },
        BadBind {
            what: "imm names a region",
            mr_access: bindable,
            mw_type: MwType::Type2,
            adjust: no_adjust,
            imm: |r, _| r.mr,
            want: VendorSyndrome::BadKey,
        },
        BadBind {
            what: "type 2: the mkey context names another QP",
            mr_access: bindable,
            mw_type: MwType::Type2,
            adjust: |b, r, _| b.qpn = r.p.a.0,
            imm: same,
            want: VendorSyndrome::MwState,
        },
        BadBind {
            what: "type 2 bound with the type-1 form (no CHECK_FREE, no QPN)",
            mr_access: bindable,
            mw_type: MwType::Type2,
            adjust: |b, _, _| b.t2 = false,
            imm: same,
            want: VendorSyndrome::MwState,
        },
        BadBind {
            what: "type 1 bound with the type-2 form (a QPN)",
            mr_access: bindable,
            mw_type: MwType::Type1,
            adjust: no_adjust,
            imm: same,
            want: VendorSyndrome::MwState,
        },
        BadBind {
            what: "o10-36.2.2: a zero-based type-1 window",
            mr_access: bindable,
            mw_type: MwType::Type1,
            adjust: |b, _, _| {
                b.t2 = false;
                b.zero_based = true;
            },
            imm: same,
            want: VendorSyndrome::MwState,
        },
        BadBind {
            what: "CHECK_QPN: type-2 unbind of a free window",
            mr_access: bindable,
            mw_type: MwType::Type2,
            adjust: |b, _, _| b.len = 0,
            imm: same,
            want: VendorSyndrome::MwState,
        },
    ];
    for c in cases {
        let mut r = rig(c.mr_access);
        let mw = r.p.dev.alloc_mw(Pdn(1), c.mw_type).unwrap();
        let other = r.p.dev.alloc_mw(Pdn(1), MwType::Type1).unwrap();
        let mut b = r.t2_on_b(inc_rkey(mw.rkey), 0x100, 0x100, RW);
        (c.adjust)(&mut b, &r, other.rkey);
        let imm = (c.imm)(&r, mw.rkey);
        let e = r.bind(true, imm, &b);
        assert_eq!(failed(&e), bind_err(c.want), "{}", c.what);
        // Nothing changed: the window is free and its key unchanged.
        assert_eq!(
            r.p.dev.mw_state(mw.rkey),
            Some((mw.rkey, None)),
            "{}",
            c.what
        );
    }
}

#[test]
fn a_window_of_another_pd_cannot_be_bound() {
    let mut r = rig(Access::ALL | Access::MW_BIND);
    let pd2 = r.p.dev.alloc_pd();
    let mw = r.p.dev.alloc_mw(pd2, MwType::Type2).unwrap();
    let e = r.bind(true, mw.rkey, &r.t2_on_b(inc_rkey(mw.rkey), 0, 0x40, RW));
    assert_eq!(failed(&e), bind_err(VendorSyndrome::PdMismatch));
    // Nor bound to a region of another PD.
    let mut r = rig(Access::ALL | Access::MW_BIND);
    let pd2 = r.p.dev.alloc_pd();
    let mem2 = r.p.dev.alloc_buffer(4096).unwrap();
    let mr2 =
        r.p.dev
            .reg_mr(pd2, &mem2, Access::ALL | Access::MW_BIND)
            .unwrap();
    let mw = r.p.dev.alloc_mw(Pdn(1), MwType::Type2).unwrap();
    let mut b = r.t2_on_b(inc_rkey(mw.rkey), 0, 0x40, RW);
    (b.mr, b.addr) = (mr2, mem2.addr());
    assert_eq!(
        failed(&r.bind(true, mw.rkey, &b)),
        bind_err(VendorSyndrome::PdMismatch)
    );
    // And an unknown PD has no windows.
    assert_eq!(
        r.p.dev.alloc_mw(Pdn(99), MwType::Type1).unwrap_err().kind,
        EmuErrorKind::NotFound
    );
}

/// A rig with a type-2 window bound on B to `[mem, + 0x40)`; its new rkey.
fn bound_t2() -> (Rig, u32) {
    let mut r = rig(Access::ALL | Access::MW_BIND);
    let mw = r.p.dev.alloc_mw(Pdn(1), MwType::Type2).unwrap();
    let k1 = inc_rkey(mw.rkey);
    assert_ok(&r.bind(true, mw.rkey, &r.t2_on_b(k1, 0, 0x40, RW)));
    (r, k1)
}

/// A rig with a type-1 window bound (by B) to `[mem, + 0x40)`; its new rkey.
fn bound_t1() -> (Rig, u32) {
    let mut r = rig(Access::ALL | Access::MW_BIND);
    let mw = r.p.dev.alloc_mw(Pdn(1), MwType::Type1).unwrap();
    let k1 = inc_rkey(mw.rkey);
    let mut b = r.t2_on_b(k1, 0, 0x40, RW);
    b.t2 = false;
    assert_ok(&r.bind(true, mw.rkey, &b));
    (r, k1)
}

#[test]
fn a_bound_type2_window_is_not_bound_again_nor_named_by_a_stale_key() {
    // o10-37.2.30 / CHECK_FREE: bound, so a second bind fails.
    let (mut r, k1) = bound_t2();
    let e = r.bind(true, k1, &r.t2_on_b(inc_rkey(k1), 0x40, 0x40, RW));
    assert_eq!(failed(&e), bind_err(VendorSyndrome::MwState));
    assert_eq!(r.p.dev.mw_state(k1).unwrap().0, k1);

    // A bound window is named by its current key only.
    let (mut r, k1) = bound_t2();
    let stale = k1.wrapping_sub(1);
    let e = r.bind(true, stale, &r.t2_on_b(inc_rkey(k1), 0, 0, 0));
    assert_eq!(failed(&e), bind_err(VendorSyndrome::BadKey));
    assert!(r.p.dev.mw_state(k1).unwrap().1.is_some());

    // The unbind from its own QP with its key works; the key stops.
    let (mut r, k1) = bound_t2();
    let k2 = inc_rkey(k1);
    assert_ok(&r.bind(true, k1, &r.t2_on_b(k2, 0, 0, 0)));
    assert_eq!(r.p.dev.mw_state(k1).unwrap().1, None);
    // Free again, it binds again (named by its index: a free window has
    // no key to match), at another place with another key.
    let k3 = inc_rkey(k2);
    assert_ok(&r.bind(true, k2, &r.t2_on_b(k3, 0x80, 0x40, RW)));
    assert_ok(&r.write(k3, r.mem.addr() + 0x80, b"again"));
    assert_eq!(
        failed(&r.write(k1, r.mem.addr() + 0x80, b"x")),
        access_err(VendorSyndrome::BadKey)
    );
}

#[test]
fn a_type2_window_is_unbound_only_from_its_qp() {
    // CHECK_QPN from A: the window is B's.
    let (mut r, k1) = bound_t2();
    let mut unbind = r.t2_on_b(inc_rkey(k1), 0, 0, 0);
    unbind.qpn = r.p.a.0;
    assert_eq!(
        failed(&r.bind(false, k1, &unbind)),
        bind_err(VendorSyndrome::MwState)
    );
    assert!(r.p.dev.mw_state(k1).unwrap().1.is_some());
    // A local invalidate (opcode LOCAL_INVAL) from A fails the same way.
    let (mut r, k1) = bound_t2();
    assert_eq!(
        failed(&r.post(false, SendOpcode::LocalInval, k1, &[])),
        bind_err(VendorSyndrome::MwState)
    );
    assert!(r.p.dev.mw_state(k1).unwrap().1.is_some());
    // A type-1 style unbind (no CHECK_QPN) from B fails too.
    let (mut r, k1) = bound_t2();
    let mut t1_unbind = r.t2_on_b(inc_rkey(k1), 0, 0, 0);
    t1_unbind.t2 = false;
    assert_eq!(
        failed(&r.bind(true, k1, &t1_unbind)),
        bind_err(VendorSyndrome::MwState)
    );
    assert!(r.p.dev.mw_state(k1).unwrap().1.is_some());
}

// --------------------------------------------------------------------------
// Invalidation
// --------------------------------------------------------------------------

#[test]
fn local_invalidate_frees_a_type2_window_and_fails_on_type1() {
    // The core's local invalidate (the type-2 unbind form, variant 0) and
    // the LOCAL_INVAL opcode.
    for umr_form in [true, false] {
        let (mut r, k1) = bound_t2();
        let c = if umr_form {
            let inv = r.t2_on_b(0, 0, 0, 0);
            r.bind(true, k1, &inv)
        } else {
            r.post(true, SendOpcode::LocalInval, k1, &[])
        };
        assert_ok(&c);
        assert_eq!(r.p.dev.mw_state(k1).unwrap().1, None);
        assert_eq!(
            failed(&r.write(k1, r.mem.addr(), b"x")),
            access_err(VendorSyndrome::BadKey)
        );
    }
    // Invalidating a type-1 window fails (o10-37.2.26), both ways.
    for umr_form in [true, false] {
        let (mut r, k1) = bound_t1();
        let c = if umr_form {
            let inv = r.t2_on_b(0, 0, 0, 0);
            r.bind(true, k1, &inv)
        } else {
            r.post(true, SendOpcode::LocalInval, k1, &[])
        };
        assert_eq!(failed(&c), bind_err(VendorSyndrome::MwState));
        assert!(r.p.dev.mw_state(k1).unwrap().1.is_some());
    }
}

#[test]
fn send_with_invalidate_frees_a_type2_window_of_the_responder() {
    let (mut r, k1) = bound_t2();
    let mut rq = TRq::new(&r.p.dev, r.p.b);
    rq.post(&[(r.p.rbuf.addr(), r.p.rkey, 64)]);
    assert_ok(&r.post(false, SendOpcode::SendInval, k1, &[inline_seg(b"inv")]));
    let rc = r.cq_b.drain();
    assert_eq!(rc.len(), 1);
    assert_eq!(
        (rc[0].opcode(), rc[0].imm_inval_pkey.get()),
        (CqeOpcode::RespSendInv, k1)
    );
    assert_eq!(r.p.dev.mw_state(k1).unwrap().1, None);
    assert_eq!(
        failed(&r.write(k1, r.mem.addr(), b"x")),
        access_err(VendorSyndrome::BadKey)
    );

    // A type-1 window cannot be invalidated remotely: the responder
    // completes the receive in error, the requester sees REMOTE_OP.
    let (mut r, k1) = bound_t1();
    let mut rq = TRq::new(&r.p.dev, r.p.b);
    rq.post(&[(r.p.rbuf.addr(), r.p.rkey, 64)]);
    let e = r.post(false, SendOpcode::SendInval, k1, &[inline_seg(b"inv")]);
    assert_eq!(
        failed(&e),
        (Syndrome::RemoteOp, VendorSyndrome::MwState as u8)
    );
    assert_eq!(err_of(&r.cq_b.drain()[0]).1, Syndrome::RemoteInvalReq);
    assert!(r.p.dev.mw_state(k1).unwrap().1.is_some());

    // A type-2 window bound to A, invalidated by a send arriving on B.
    let mut r = rig(Access::ALL | Access::MW_BIND);
    let mw = r.p.dev.alloc_mw(Pdn(1), MwType::Type2).unwrap();
    let k1 = inc_rkey(mw.rkey);
    let mut b = r.t2_on_b(k1, 0, 0x40, RW);
    b.qpn = r.p.a.0;
    assert_ok(&r.bind(false, mw.rkey, &b));
    let mut rq = TRq::new(&r.p.dev, r.p.b);
    rq.post(&[(r.p.rbuf.addr(), r.p.rkey, 64)]);
    let e = r.post(false, SendOpcode::SendInval, k1, &[inline_seg(b"inv")]);
    assert_eq!(
        failed(&e),
        (Syndrome::RemoteOp, VendorSyndrome::MwState as u8)
    );
    assert!(r.p.dev.mw_state(k1).unwrap().1.is_some());
}

#[test]
fn a_region_with_a_bound_window_stays_registered_and_dealloc_kills_the_key() {
    let mut r = rig(Access::ALL | Access::MW_BIND);
    let mw = r.p.dev.alloc_mw(Pdn(1), MwType::Type2).unwrap();
    let k1 = inc_rkey(mw.rkey);
    assert_ok(&r.bind(true, mw.rkey, &r.t2_on_b(k1, 0, 0x40, RW)));
    assert_eq!(r.p.dev.dereg_mr(r.mr).unwrap_err().kind, EmuErrorKind::Busy);
    assert!(r.p.dev.mr_valid(r.mr));
    // Deallocated: the key is gone, the region free to go.
    r.p.dev.dealloc_mw(k1).unwrap();
    assert_eq!(r.p.dev.mw_state(k1), None);
    assert_eq!(
        r.p.dev.dealloc_mw(k1).unwrap_err().kind,
        EmuErrorKind::NotFound
    );
    assert_eq!(
        failed(&r.write(k1, r.mem.addr(), b"x")),
        access_err(VendorSyndrome::BadKey)
    );
    r.p.dev.dereg_mr(r.mr).unwrap();
}

#[test]
fn windows_and_regions_share_one_key_space() {
    let mut dev = Device::default();
    let pd = dev.alloc_pd();
    let mem = dev.alloc_buffer(64).unwrap();
    let mut indices = Vec::new();
    for i in 0..6 {
        let key = if i % 2 == 0 {
            dev.reg_mr(pd, &mem, Access::ALL).unwrap()
        } else {
            dev.alloc_mw(pd, MwType::Type1).unwrap().rkey
        };
        assert_ne!(key & 0xff, 0, "variant 0");
        indices.push(key >> 8);
    }
    let mut sorted = indices.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), indices.len(), "{indices:?}");
}

#[test]
fn a_recorded_bind_replays_against_the_decoder() {
    let mut r = rig(Access::ALL | Access::MW_BIND);
    r.p.dev
        .start_recording_to(Recorder::new("mw-test", None).with_cap(64));
    let mw = r.p.dev.alloc_mw(Pdn(1), MwType::Type2).unwrap();
    let k1 = inc_rkey(mw.rkey);
    let mut b = r.t2_on_b(k1, 0x20, 0x40, RW);
    b.zero_based = true;
    assert_ok(&r.bind(true, mw.rkey, &b));
    assert_ok(&r.bind(true, k1, &r.t2_on_b(0, 0, 0, 0)));
    let text = r.p.dev.take_recorder().unwrap().text().to_string();
    // The device's own view of both UMRs is in the records...
    assert!(
        text.contains(&format!("seg.klm.mkey={:#x}", r.mr)),
        "{text}"
    );
    assert!(text.contains("seg.mkey_context.start_addr=0x0"), "{text}");
    assert!(text.contains("seg.mkey_context.free=true"), "{text}");
    // ...and agrees with the decoder on every value.
    let recs = parse_records(&text).unwrap();
    let checked: usize = recs
        .iter()
        .map(|rec| check_record(rec).unwrap_or_else(|e| panic!("{e}\n{text}")))
        .sum();
    assert!(checked > 10, "{checked} values checked\n{text}");
}
