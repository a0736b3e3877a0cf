//! Unit tests of the send queue over ordinary memory: a boxed slice as the
//! SQ buffer, an 8-byte doorbell record, a 4 KiB array as the UAR page.

use std::boxed::Box;
use std::vec;
use std::vec::Vec;

use super::*;
use crate::cq::WcOpcode;
use crate::prm::{Av, SendOpcode, WQE_CTRL_FENCE, WQE_CTRL_INITIATOR_SMALL_FENCE};

const UAR: usize = 4096;
const BF_OFF: usize = 0x800;
const BF_SIZE: u32 = 256;

/// Device-side memory of one queue, allocated raw so that the test reads it
/// through the same pointers the queue writes through.
struct Mem {
    ring: *mut [Wqebb],
    dbrec: *mut [u32; 2],
    uar: *mut [u64; UAR / 8],
    wqe_cnt: usize,
}

impl Mem {
    fn new(wqe_cnt: usize) -> Self {
        Mem {
            ring: Box::into_raw(vec![Wqebb([0xa5; 64]); wqe_cnt].into_boxed_slice()),
            dbrec: Box::into_raw(Box::new([0xa5a5_a5a5; 2])),
            uar: Box::into_raw(Box::new([0x3c3c_3c3c_3c3c_3c3c; UAR / 8])),
            wqe_cnt,
        }
    }

    fn read(p: *const u8, len: usize) -> Vec<u8> {
        let mut v = vec![0u8; len];
        // SAFETY: `p` points into one of this `Mem`'s live allocations of at
        // least `len` bytes; the queue is not running concurrently.
        unsafe { core::ptr::copy_nonoverlapping(p, v.as_mut_ptr(), len) };
        v
    }

    fn ring(&self) -> Vec<u8> {
        Self::read(self.ring.cast::<u8>(), self.wqe_cnt * 64)
    }
    fn dbrec(&self) -> Vec<u8> {
        Self::read(self.dbrec.cast::<u8>(), 8)
    }
    fn uar(&self) -> Vec<u8> {
        Self::read(self.uar.cast::<u8>(), UAR)
    }
    fn snapshot(&self) -> (Vec<u8>, Vec<u8>, Vec<u8>) {
        (self.ring(), self.dbrec(), self.uar())
    }

    fn raw(&self) -> SqRawParts<'_> {
        // SAFETY: the SQ word of the doorbell record is a live, aligned u32
        // that only the queue writes while it lives.
        let dbrec = unsafe { DeviceWord::from_ptr(self.dbrec.cast::<u32>().add(1)) };
        SqRawParts {
            buf: NonNull::new(self.ring.cast::<u8>()).expect("ring"),
            wqe_cnt: self.wqe_cnt as u32,
            dbrec,
            // SAFETY: 0x800 + 2 * 256 <= 4096.
            bf_reg: NonNull::new(unsafe { self.uar.cast::<u8>().add(BF_OFF) }).expect("uar"),
            bf_buf_size: BF_SIZE,
        }
    }
}

impl Drop for Mem {
    fn drop(&mut self) {
        // SAFETY: from `Box::into_raw` in `new`; every queue over this
        // memory borrowed `self` and is gone.
        unsafe {
            drop(Box::from_raw(self.ring));
            drop(Box::from_raw(self.dbrec));
            drop(Box::from_raw(self.uar));
        }
    }
}

/// Caller-lent memory of one queue.
struct Lent {
    shadow: Vec<SqShadowEntry>,
    staging: Vec<Wqebb>,
}

impl Lent {
    fn new(wqe_cnt: usize) -> Self {
        Lent {
            shadow: vec![SqShadowEntry::EMPTY; wqe_cnt],
            staging: vec![Wqebb::ZERO; wqe_cnt.max(16)],
        }
    }
}

fn cfg(qp_type: QpType) -> SqConfig {
    let mut c = SqConfig::new(qp_type, 0x123, 252, 4);
    c.signal_every = 0;
    c.atomics = true;
    c.raw_csum = true;
    if qp_type == QpType::RawPacket {
        c.eth_min_inline = 18;
        c.max_tso_header = 128;
    }
    c
}

fn queue<'a, P: DoorbellPolicy>(mem: &'a Mem, lent: &'a mut Lent, c: SqConfig) -> SendQueue<'a, P> {
    // SAFETY: `mem` provides the ring, register and dbrec for `'a`, used by
    // this queue only.
    unsafe { SendQueue::<P>::new(mem.raw(), c, &mut lent.shadow, &mut lent.staging) }
        .expect("queue")
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn ds_of(ring: &[u8], wqebb: usize) -> u32 {
    be32(ring, wqebb * 64 + 4) & 0x3f
}

fn opcode_of(ring: &[u8], wqebb: usize) -> u8 {
    ring[wqebb * 64 + 3]
}

const FRAME: [u8; 64] = {
    let mut f = [0u8; 64];
    let mut i = 0;
    while i < 64 {
        f[i] = i as u8;
        i += 1;
    }
    f
};

#[test]
fn rdma_write_single_sge_bytes() {
    let mem = Mem::new(64);
    let mut lent = Lent::new(64);
    let mut sq = queue::<BlueFlamePreferred>(&mem, &mut lent, cfg(QpType::Rc));
    let mut b = sq.start();
    b.rdma_write(7, 0x00ab_cd01, 0x7f12_3456_0000)
        .unwrap()
        .signaled()
        .sge(0x4321, 0x2_0000_1000, 1024)
        .unwrap();
    assert_eq!(b.complete(), 1);
    let r = mem.ring();
    let want: [u8; 48] = [
        0x00, 0x00, 0x00, 0x08, 0x00, 0x01, 0x23, 0x03, 0, 0, 0, 0x08, 0, 0, 0, 0, // ctrl
        0, 0, 0x7f, 0x12, 0x34, 0x56, 0, 0, 0x00, 0xab, 0xcd, 0x01, 0, 0, 0, 0, // raddr
        0, 0, 0x04, 0x00, 0, 0, 0x43, 0x21, 0, 0, 0, 0x02, 0, 0, 0x10, 0x00, // data
    ];
    assert_eq!(&r[..48], &want);
    assert_eq!(&r[48..64], &[0; 16]); // rest of the WQEBB zeroed
    assert_eq!(mem.dbrec(), [0xa5, 0xa5, 0xa5, 0xa5, 0, 0, 0, 1]);
    // Preferred BlueFlame, single WQE of 3 DS: a 64-byte BlueFlame copy.
    let u = mem.uar();
    assert_eq!(&u[BF_OFF..BF_OFF + 64], &r[..64]);
    assert_eq!(sq.bf_offset(), BF_SIZE as usize);
    assert_eq!(sq.producer(), 1);
}

#[test]
fn op_support_per_qp_type() {
    use QpType::*;
    type R = Result<(), PostError>;
    type F = for<'x, 'y, 'z> fn(&'x mut Batch<'y, 'z, DoorbellOnly>) -> R;
    // (name, builder) → which QP types allow it.
    let ok = |qp: QpType, f: F| {
        let mem = Mem::new(16);
        let mut lent = Lent::new(16);
        let mut sq = queue::<DoorbellOnly>(&mem, &mut lent, cfg(qp));
        let mut b = sq.start();
        let r = f(&mut b);
        b.abort();
        r != Err(PostError::UnsupportedOp)
    };
    let table: [(&str, F, [bool; 5]); 13] = [
        (
            "send",
            |b| b.send(1).map(drop),
            [true, true, true, true, true],
        ),
        (
            "send_imm",
            |b| b.send_imm(1, 2).map(drop),
            [true, true, true, true, false],
        ),
        (
            "send_inv",
            |b| b.send_inv(1, 2).map(drop),
            [true, true, false, true, false],
        ),
        (
            "rdma_write",
            |b| b.rdma_write(1, 2, 3).map(drop),
            [true, true, false, true, false],
        ),
        (
            "rdma_write_imm",
            |b| b.rdma_write_imm(1, 2, 3, 4).map(drop),
            [true, true, false, true, false],
        ),
        (
            "rdma_read",
            |b| b.rdma_read(1, 2, 3).map(drop),
            [true, false, false, true, false],
        ),
        (
            "cmp_swp",
            |b| b.atomic_cmp_swp(1, 2, 3, 4, 5).map(drop),
            [true, false, false, true, false],
        ),
        (
            "fetch_add",
            |b| b.atomic_fetch_add(1, 2, 3, 4).map(drop),
            [true, false, false, true, false],
        ),
        (
            "masked_cs",
            |b| b.masked_cmp_swp_u64(1, 2, 3, 4, 5, 6, 7).map(drop),
            [true, false, false, true, false],
        ),
        (
            "masked_fa",
            |b| b.masked_fetch_add_u32(1, 2, 3, 4, 5).map(drop),
            [true, false, false, true, false],
        ),
        (
            "local_inv",
            |b| b.local_inv(1, 2).map(drop),
            [true, true, false, true, false],
        ),
        (
            "bind_mw",
            |b| b.bind_mw(1, &BIND).map(drop),
            [true, true, false, true, false],
        ),
        (
            "nop",
            |b| b.nop(1).map(drop),
            [true, true, true, true, true],
        ),
    ];
    for (name, f, want) in table {
        for (qp, w) in [Rc, Uc, Ud, Xrc, RawPacket].into_iter().zip(want) {
            assert_eq!(ok(qp, f), w, "{name} on {qp:?}");
        }
    }
    // TSO: raw Ethernet, and UD when the QP has LSO.
    assert!(ok(RawPacket, |b| b.tso(1, &[0; 54], 1460).map(drop)));
    assert!(!ok(Rc, |b| b.tso(1, &[0; 54], 1460).map(drop)));
    assert!(!ok(Ud, |b| b.tso(1, &[0; 54], 1460).map(drop)));
    // Atomics need the capability.
    let mem = Mem::new(16);
    let mut lent = Lent::new(16);
    let mut c = cfg(Rc);
    c.atomics = false;
    let mut sq = queue::<DoorbellOnly>(&mem, &mut lent, c);
    assert_eq!(
        sq.start().atomic_fetch_add(1, 2, 3, 4).err(),
        Some(PostError::UnsupportedOp)
    );
}

#[test]
fn every_operation_formats_on_every_type() {
    // Post each allowed operation once per QP type and check opcode, DS and
    // that the whole WQE is published.
    use QpType::*;
    let av = Av::default();
    let hdr: Vec<u8> = FRAME[..54].to_vec();
    for qp in [Rc, Uc, Ud, Xrc, RawPacket] {
        let mem = Mem::new(64);
        let mut lent = Lent::new(64);
        let mut c = cfg(qp);
        c.max_tso_header = 128;
        let mut sq = queue::<DoorbellOnly>(&mem, &mut lent, c);
        let mut b = sq.start();
        let mut expect: Vec<(u8, u32)> = Vec::new();
        // Per-type prefix DS: XRC +1, UD +3, raw Ethernet segment +2.
        let pre = match qp {
            Xrc => 2,
            Ud => 4,
            RawPacket => 3,
            _ => 1,
        };
        macro_rules! go {
            ($wr:expr, $op:expr, $ds:expr) => {
                if let Ok(mut wr) = $wr {
                    if qp == Ud {
                        wr = wr.ud_addr(&av, 0xabc, 0x1111).unwrap();
                    }
                    if qp == Xrc {
                        wr = wr.xrc_srqn(0x77).unwrap();
                    }
                    wr.frame(5, 0x1000, &FRAME).unwrap();
                    expect.push(($op as u8, $ds));
                }
            };
        }
        // On a raw QP the frame's first 18 bytes go inline and the rest is
        // one pointer segment; other QPs post it as one pointer segment.
        go!(b.send(1), SendOpcode::Send.raw(), pre + 1);
        go!(b.send_imm(2, 9), SendOpcode::SendImm.raw(), pre + 1);
        go!(b.send_inv(3, 9), SendOpcode::SendInval.raw(), pre + 1);
        go!(b.rdma_write(4, 1, 2), SendOpcode::RdmaWrite.raw(), pre + 2);
        go!(
            b.rdma_write_imm(5, 1, 2, 3),
            SendOpcode::RdmaWriteImm.raw(),
            pre + 2
        );
        go!(b.rdma_read(6, 1, 2), SendOpcode::RdmaRead.raw(), pre + 2);
        go!(
            b.atomic_cmp_swp(7, 1, 2, 3, 4),
            SendOpcode::AtomicCs.raw(),
            pre + 3
        );
        go!(
            b.atomic_fetch_add(8, 1, 2, 3),
            SendOpcode::AtomicFa.raw(),
            pre + 3
        );
        go!(
            b.masked_cmp_swp_u64(9, 1, 2, 3, 4, 5, 6),
            SendOpcode::AtomicMaskedCs.raw(),
            pre + 4
        );
        go!(
            b.masked_cmp_swp_u32(10, 1, 2, 3, 4, 5, 6),
            SendOpcode::AtomicMaskedCs.raw(),
            pre + 3
        );
        go!(
            b.masked_fetch_add_u64(11, 1, 2, 3, 4),
            SendOpcode::AtomicMaskedFa.raw(),
            pre + 3
        );
        go!(
            b.masked_fetch_add_u32(12, 1, 2, 3, 4),
            SendOpcode::AtomicMaskedFa.raw(),
            pre + 3
        );
        if qp == RawPacket {
            // TSO: ctrl + Ethernet segment with a 54-byte header (5 DS) + data.
            b.tso(13, &hdr, 1460).unwrap().sge(5, 0x1000, 9000).unwrap();
            expect.push((SendOpcode::Tso.raw(), 7));
        }
        if let Ok(wr) = b.local_inv(14, 0x55) {
            wr.post().unwrap();
            expect.push((SendOpcode::Umr.raw(), 8));
        }
        b.nop(15).unwrap().post().unwrap();
        expect.push((SendOpcode::Nop.raw(), 1));
        b.complete();
        let r = mem.ring();
        let mut at = 0usize;
        for (op, ds) in expect {
            assert_eq!(opcode_of(&r, at), op, "{qp:?} opcode at WQEBB {at}");
            assert_eq!(ds_of(&r, at), ds, "{qp:?} DS of opcode {op:#x}");
            at += ds.div_ceil(4) as usize;
        }
        assert_eq!(sq.producer() as usize, at, "{qp:?}");
    }
}

#[test]
fn segment_layouts() {
    let mem = Mem::new(64);
    let mut lent = Lent::new(64);
    let mut sq = queue::<DoorbellOnly>(&mem, &mut lent, cfg(QpType::Xrc));
    let mut b = sq.start();
    // XRC compare-and-swap: ctrl | xrc | raddr | atomic | data(8).
    b.atomic_cmp_swp(1, 0x11, 0x2222, 0x33, 0x44)
        .unwrap()
        .xrc_srqn(0x77)
        .unwrap()
        .sge(0x9, 0xa000, 64)
        .unwrap();
    // Masked 64-bit CS: ctrl | xrc | raddr | 32-byte masked seg | data(8), opmod 9.
    b.masked_cmp_swp_u64(2, 1, 2, 3, 4, 5, 6)
        .unwrap()
        .xrc_srqn(0x77)
        .unwrap()
        .sge(9, 0xb000, 8)
        .unwrap();
    // XRC without an SRQ number is refused.
    assert_eq!(b.send(3).unwrap().post(), Err(PostError::MissingXrcSrqn));
    b.complete();
    let r = mem.ring();
    assert_eq!(be32(&r, 16), 0x77); // xrc_srqn
    assert_eq!(&r[32..40], &0x2222u64.to_be_bytes()); // raddr
    assert_eq!(be32(&r, 40), 0x11); // rkey
    assert_eq!(&r[48..56], &0x44u64.to_be_bytes()); // swap
    assert_eq!(&r[56..64], &0x33u64.to_be_bytes()); // compare
    assert_eq!(be32(&r, 64), 8); // result SGE byte count forced to 8
    let w2 = 128;
    assert_eq!(r[w2], 0x09); // opmod
    assert_eq!(opcode_of(&r, 2), 0x14);
    assert_eq!(&r[w2 + 48..w2 + 56], &5u64.to_be_bytes()); // swap
    assert_eq!(&r[w2 + 56..w2 + 64], &3u64.to_be_bytes()); // compare
    assert_eq!(&r[w2 + 64..w2 + 72], &6u64.to_be_bytes()); // swap mask
    assert_eq!(&r[w2 + 72..w2 + 80], &4u64.to_be_bytes()); // compare mask
    assert_eq!(be32(&r, w2 + 80), 8);
}

#[test]
fn local_invalidate_fences_the_next_wqe() {
    let mem = Mem::new(64);
    let mut lent = Lent::new(64);
    let mut sq = queue::<DoorbellOnly>(&mem, &mut lent, cfg(QpType::Rc));
    let mut b = sq.start();
    b.local_inv(1, 0x1234_5678)
        .unwrap()
        .signaled()
        .post()
        .unwrap();
    b.complete();
    assert_eq!(sq.fm_cache(), WQE_CTRL_INITIATOR_SMALL_FENCE);
    // The fence survives into the next batch and is consumed by one WQE.
    let mut b = sq.start();
    b.send(2).unwrap().post().unwrap();
    b.send(3).unwrap().fence().post().unwrap();
    b.complete();
    let r = mem.ring();
    assert_eq!(opcode_of(&r, 0), 0x25);
    assert_eq!(be32(&r, 12), 0x1234_5678); // imm = rkey
    assert_eq!(r[16], 0x98); // UMR flags
    assert_eq!(&r[24..32], &0x2000_6000u64.to_be_bytes()); // mkey mask
    assert_eq!(r[64], 0x40); // mkey free
    assert_eq!(be32(&r, 68), 0xffff_ff00);
    assert_eq!(r[2 * 64 + 11], WQE_CTRL_INITIATOR_SMALL_FENCE);
    assert_eq!(r[3 * 64 + 11], WQE_CTRL_FENCE);
    assert_eq!(sq.fm_cache(), 0);
}

/// The bind the tests use: a type 2 window over 4 KiB of a region.
const BIND: MwBind = MwBind {
    mw_type: MwType::Type2,
    mw_rkey: 0x1122_3344,
    new_rkey: 0x5566_77a9,
    mr_lkey: 0x0bad_cafe,
    addr: 0x7f00_1234_5000,
    length: 4096,
    access: MwBind::REMOTE_READ | MwBind::REMOTE_WRITE,
};

/// A memory-window bind is the UMR WQE libmlx5's `set_bind_wr` builds, for
/// each window type, a bind and an unbind (length 0), and a zero-based
/// window: which QPN and checks the UMR carries, which mkey fields it
/// writes, the KLM, and the fence the next WQE inherits.
#[test]
fn bind_mw_builds_the_umr_wqe_of_each_window_type() {
    struct Want {
        flags: u8,
        mkey_mask: u64,
        klm_octowords: u16,
        free: u8,
        access: u8,
        qpn_mkey: u32,
        start: u64,
        ds: u32,
    }
    const RANGE_MASK: u64 = (1 << 0) | (1 << 6) | (0xf << 18); // len, start, 4 access bits
    let unbind = MwBind { length: 0, ..BIND };
    let cases = [
        (
            "type 2 bind",
            BIND,
            Want {
                flags: 0x80 | 0x20 | 0x10, // inline, check free, translation offset
                mkey_mask: (1 << 29) | (1 << 13) | (1 << 14) | RANGE_MASK,
                klm_octowords: 4,
                free: 0,
                access: 0x20 | 0x10, // remote write, remote read
                qpn_mkey: 0x0001_23a9,
                start: BIND.addr,
                ds: 12,
            },
        ),
        (
            "type 1 bind",
            MwBind {
                mw_type: MwType::Type1,
                access: MwBind::LOCAL_WRITE | MwBind::REMOTE_ATOMIC,
                ..BIND
            },
            Want {
                flags: 0x80 | 0x10,
                mkey_mask: (1 << 29) | (1 << 13) | RANGE_MASK,
                klm_octowords: 4,
                free: 0,
                access: 0x08 | 0x40, // local write, atomic
                qpn_mkey: 0xffff_ffa9,
                start: BIND.addr,
                ds: 12,
            },
        ),
        (
            "zero-based type 2 bind",
            MwBind {
                access: MwBind::REMOTE_READ | MwBind::ZERO_BASED,
                ..BIND
            },
            Want {
                flags: 0x80 | 0x20 | 0x10,
                mkey_mask: (1 << 29) | (1 << 13) | (1 << 14) | RANGE_MASK,
                klm_octowords: 4,
                free: 0,
                access: 0x10,
                qpn_mkey: 0x0001_23a9,
                start: 0,
                ds: 12,
            },
        ),
        (
            "type 2 unbind",
            unbind,
            Want {
                flags: 0x80 | 0x08 | 0x10, // inline, check QPN, translation offset
                mkey_mask: (1 << 29) | (1 << 13) | (1 << 14),
                klm_octowords: 0,
                free: 0x40,
                access: 0,
                qpn_mkey: 0xffff_ffa9,
                start: 0,
                ds: 8,
            },
        ),
        (
            "type 1 unbind",
            MwBind {
                mw_type: MwType::Type1,
                ..unbind
            },
            Want {
                flags: 0x80 | 0x10,
                mkey_mask: (1 << 29) | (1 << 13),
                klm_octowords: 0,
                free: 0x40,
                access: 0,
                qpn_mkey: 0xffff_ffa9,
                start: 0,
                ds: 8,
            },
        ),
    ];
    for (name, bind, want) in cases {
        let mem = Mem::new(16);
        let mut lent = Lent::new(16);
        let mut sq = queue::<DoorbellOnly>(&mem, &mut lent, cfg(QpType::Rc));
        let mut b = sq.start();
        b.bind_mw(7, &bind).unwrap().signaled().post().unwrap();
        b.send(8).unwrap().post().unwrap();
        b.complete();
        let r = mem.ring();
        let u64_at = |at: usize| u64::from_be_bytes(r[at..at + 8].try_into().unwrap());
        assert_eq!(opcode_of(&r, 0), SendOpcode::Umr.raw(), "{name}");
        assert_eq!(ds_of(&r, 0), want.ds, "{name}");
        assert_eq!(
            be32(&r, 12),
            bind.mw_rkey,
            "{name}: imm is the window's rkey"
        );
        // UMR control segment (bytes 16..64).
        assert_eq!(r[16], want.flags, "{name}: UMR flags");
        assert_eq!(
            u16::from_be_bytes([r[20], r[21]]),
            want.klm_octowords,
            "{name}"
        );
        assert_eq!(u64_at(24), want.mkey_mask, "{name}: mkey mask");
        assert!(r[17..20]
            .iter()
            .chain(&r[22..24])
            .chain(&r[32..64])
            .all(|&x| x == 0));
        // Mkey context (64..128).
        assert_eq!(r[64], want.free, "{name}: free");
        assert_eq!(r[66], want.access, "{name}: access");
        assert_eq!(be32(&r, 68), want.qpn_mkey, "{name}: qpn_mkey");
        assert_eq!(u64_at(80), want.start, "{name}: start address");
        let len = if want.ds == 12 { bind.length } else { 0 };
        assert_eq!(u64_at(88), len, "{name}: length");
        let next = if want.ds == 12 {
            // The KLM (128..144), then zeros to the end of the WQEBB.
            assert_eq!(be32(&r, 128), bind.length as u32, "{name}: KLM byte count");
            assert_eq!(be32(&r, 132), bind.mr_lkey, "{name}: KLM mkey");
            assert_eq!(u64_at(136), bind.addr, "{name}: KLM address");
            assert!(r[144..192].iter().all(|&x| x == 0), "{name}: KLM padding");
            3
        } else {
            2
        };
        // The send after it inherits the small-initiator fence.
        assert_eq!(opcode_of(&r, next), SendOpcode::Send.raw(), "{name}");
        assert_eq!(r[next * 64 + 11], WQE_CTRL_INITIATOR_SMALL_FENCE, "{name}");
    }
}

/// A local invalidate and a bind record their completion opcode in the
/// shadow (libmlx5 `sq.wr_data`), and the retire that reaches them reports
/// it; other WQEs record none.
#[test]
fn umr_wqes_record_their_completion_opcode() {
    let mem = Mem::new(16);
    let mut lent = Lent::new(16);
    let mut sq = queue::<DoorbellOnly>(&mem, &mut lent, cfg(QpType::Rc));
    let mut b = sq.start();
    b.local_inv(1, 0x55).unwrap().signaled().post().unwrap(); // 0, 2 WQEBBs
    b.bind_mw(2, &BIND).unwrap().signaled().post().unwrap(); // 2, 3 WQEBBs
    b.send(3).unwrap().signaled().post().unwrap(); // 5
    b.driver1(4).unwrap().signaled().post().unwrap(); // 6
    b.complete();
    let got: Vec<_> = [0u16, 2, 5, 6]
        .into_iter()
        .map(|c| sq.retire(c).map(|r| (r.wr_id, r.wr_opcode)))
        .collect();
    assert_eq!(
        got,
        [
            Ok((1, Some(WcOpcode::LocalInv))),
            Ok((2, Some(WcOpcode::BindMw))),
            Ok((3, None)),
            // libmlx5 v44's `ibv_post_send` records nothing for DRIVER1.
            Ok((4, None)),
        ]
    );
}

/// A bind longer than one KLM (2 GiB) is refused with nothing written:
/// ring, doorbell record, register and the batch as they were; exactly
/// 2 GiB is accepted. On XRC the bind carries no XRC segment, as libmlx5's.
#[test]
fn bind_mw_refuses_a_window_over_2_gib_and_skips_the_xrc_segment() {
    let mem = Mem::new(16);
    let mut lent = Lent::new(16);
    let mut sq = queue::<DoorbellOnly>(&mem, &mut lent, cfg(QpType::Rc));
    let before = mem.snapshot();
    let mut b = sq.start();
    let long = MwBind {
        length: MwBind::MAX_LENGTH + 1,
        ..BIND
    };
    assert_eq!(b.bind_mw(1, &long).err(), Some(PostError::BindTooLong));
    assert_eq!(b.complete(), 0);
    assert_eq!(mem.snapshot(), before);
    assert_eq!(sq.fm_cache(), 0);
    let mut b = sq.start();
    let max = MwBind {
        length: MwBind::MAX_LENGTH,
        ..BIND
    };
    b.bind_mw(2, &max).unwrap().post().unwrap();
    assert_eq!(b.complete(), 1);
    assert_eq!(be32(&mem.ring(), 128), 0x8000_0000);

    let mem = Mem::new(16);
    let mut lent = Lent::new(16);
    let mut sq = queue::<DoorbellOnly>(&mem, &mut lent, cfg(QpType::Xrc));
    let mut b = sq.start();
    b.bind_mw(3, &BIND).unwrap().post().unwrap();
    b.complete();
    let r = mem.ring();
    assert_eq!(ds_of(&r, 0), 12);
    assert_eq!(
        r[16],
        0x80 | 0x20 | 0x10,
        "the UMR control segment follows the control segment"
    );
}

/// A queue that takes over a QP whose last WQE was a local invalidate
/// (`SqConfig::start_fm_cache`, rdma-core `qp->fm_cache`) fences its first
/// WQE exactly as the queue that posted the local invalidate would; a
/// value outside the fence-mode bits is refused.
#[test]
fn starting_fence_cache_fences_the_first_wqe() {
    let mem = Mem::new(64);
    let mut lent = Lent::new(64);
    let mut c = cfg(QpType::Rc);
    c.start_pi = 2;
    c.start_fm_cache = WQE_CTRL_INITIATOR_SMALL_FENCE;
    let mut sq = queue::<DoorbellOnly>(&mem, &mut lent, c);
    assert_eq!(sq.fm_cache(), WQE_CTRL_INITIATOR_SMALL_FENCE);
    let mut b = sq.start();
    b.send(2).unwrap().post().unwrap();
    b.send(3).unwrap().post().unwrap();
    b.complete();
    assert_eq!(sq.fm_cache(), 0);

    // The same two sends after a local invalidate on a fresh queue.
    let mem2 = Mem::new(64);
    let mut lent2 = Lent::new(64);
    let mut sq2 = queue::<DoorbellOnly>(&mem2, &mut lent2, cfg(QpType::Rc));
    let mut b = sq2.start();
    b.local_inv(1, 0x1234_5678).unwrap().post().unwrap();
    b.complete();
    let mut b = sq2.start();
    b.send(2).unwrap().post().unwrap();
    b.send(3).unwrap().post().unwrap();
    b.complete();
    let (r, r2) = (mem.ring(), mem2.ring());
    assert_eq!(r[2 * 64 + 11], WQE_CTRL_INITIATOR_SMALL_FENCE);
    assert_eq!(r[3 * 64 + 11], 0);
    assert_eq!(&r[2 * 64..4 * 64], &r2[2 * 64..4 * 64]);

    let mut bad = cfg(QpType::Rc);
    bad.start_fm_cache = WQE_CTRL_INITIATOR_SMALL_FENCE | 1;
    let mut lent3 = Lent::new(64);
    // SAFETY: refused before any access.
    let r = unsafe {
        SendQueue::<DoorbellOnly>::new(mem.raw(), bad, &mut lent3.shadow, &mut lent3.staging)
    };
    assert_eq!(r.err(), Some(SqConfigError::BadFmCache));
}

#[test]
fn inline_wraps_the_ring_end() {
    let mem = Mem::new(8);
    let mut lent = Lent::new(8);
    let mut c = cfg(QpType::Rc);
    c.start_pi = 7; // last WQEBB
    let mut sq = queue::<BlueFlameInline>(&mem, &mut lent, c);
    let data: Vec<u8> = (0..100u8).collect();
    let mut b = sq.start();
    b.send(1).unwrap().inline_data(&data).unwrap();
    b.complete();
    let r = mem.ring();
    // ctrl at WQEBB 7, inline header at +16, 44 data bytes to the end, the
    // other 56 at the start of the ring, then zero padding.
    assert_eq!(ds_of(&r, 7), 1 + 7);
    assert_eq!(be32(&r, 7 * 64 + 16), 0x8000_0000 | 100);
    assert_eq!(&r[7 * 64 + 20..8 * 64], &data[..44]);
    assert_eq!(&r[..56], &data[44..]);
    assert_eq!(&r[56..64], &[0; 8]);
    assert_eq!(sq.producer(), 9);
    assert_eq!(mem.dbrec()[4..], [0, 0, 0, 9]);
    // BlueFlame (inline, single WQE, 8 DS = 128 bytes): a contiguous copy.
    let u = mem.uar();
    assert_eq!(&u[BF_OFF..BF_OFF + 64], &r[7 * 64..8 * 64]);
    assert_eq!(&u[BF_OFF + 64..BF_OFF + 128], &r[..64]);
}

#[test]
fn raw_ethernet_header_and_sge_advance() {
    let mem = Mem::new(64);
    let mut lent = Lent::new(64);
    let mut sq = queue::<DoorbellOnly>(&mem, &mut lent, cfg(QpType::RawPacket));
    let mut b = sq.start();
    b.send(1)
        .unwrap()
        .ip_csum()
        .unwrap()
        .frame_list(&[
            FrameSge::with_addr(1, 0x1000, &FRAME[..10]),
            FrameSge::with_addr(2, 0x2000, &FRAME[10..18]),
            FrameSge::with_addr(3, 0x3000, &FRAME[18..64]),
        ])
        .unwrap();
    assert_eq!(
        b.send(2).unwrap().sge(1, 2, 64),
        Err(PostError::FrameBytesRequired)
    );
    assert_eq!(
        b.send(3).unwrap().frame(1, 2, &FRAME[..12]),
        Err(PostError::EthHeaderTooShort)
    );
    b.complete();
    let r = mem.ring();
    assert_eq!(ds_of(&r, 0), 4);
    assert_eq!(r[20], 0xc0); // L3 | L4 checksum
    assert_eq!(&r[28..30], &[0, 18]); // inline_hdr_sz
    assert_eq!(&r[30..48], &FRAME[..18]);
    assert_eq!(be32(&r, 48), 46); // the third piece, whole
    assert_eq!(be32(&r, 52), 3);
}

/// `IBV_WR_DRIVER1` (`Batch::driver1`): the WQE libmlx5 v44's
/// `ibv_post_send` writes, a send's segments under the UMR opcode, on every
/// QP type, with SGEs (frames on raw QPs) and inline data; nothing else
/// differs from a send, and the next WQE is not fenced.
#[test]
fn driver1_is_a_send_under_the_umr_opcode() {
    use QpType::*;
    let av = Av::default();
    for qp in [Rc, Uc, Ud, Xrc, RawPacket] {
        for inline in [false, true] {
            let rings: Vec<Vec<u8>> = [false, true]
                .iter()
                .map(|&driver1| {
                    let mem = Mem::new(64);
                    let mut lent = Lent::new(64);
                    let mut sq = queue::<DoorbellOnly>(&mem, &mut lent, cfg(qp));
                    let mut b = sq.start();
                    for id in 1..3 {
                        let mut wr = if driver1 && id == 1 {
                            b.driver1(id)
                        } else {
                            b.send(id)
                        }
                        .unwrap()
                        .signaled();
                        if qp == Ud {
                            wr = wr.ud_addr(&av, 0xabc, 0x1111).unwrap();
                        }
                        if qp == Xrc {
                            wr = wr.xrc_srqn(0x77).unwrap();
                        }
                        if inline {
                            wr.inline_data(&FRAME[..40]).unwrap();
                        } else {
                            wr.frame(5, 0x1000, &FRAME).unwrap();
                        }
                    }
                    b.complete();
                    mem.ring()
                })
                .collect();
            let (send, d1) = (&rings[0], &rings[1]);
            assert_eq!(opcode_of(send, 0), SendOpcode::Send.raw(), "{qp:?}");
            assert_eq!(opcode_of(d1, 0), SendOpcode::Umr.raw(), "{qp:?}");
            for (i, (a, b)) in send.iter().zip(d1).enumerate() {
                if i != 3 {
                    assert_eq!(a, b, "{qp:?} inline {inline}: byte {i}");
                }
            }
        }
    }
}

/// VLAN insertion (`Wr::vlan`): the Ethernet segment's VLAN-insert
/// request when the WQE inlines no header, else the tag written into the
/// inline header (raw send: 14 bytes of the frame plus the tag; TSO: the
/// header grows by 4); refused off raw Ethernet sends and TSO.
#[test]
fn vlan_insertion_bytes() {
    // No inline header required: the device inserts the tag.
    let mem = Mem::new(16);
    let mut lent = Lent::new(16);
    let mut c = cfg(QpType::RawPacket);
    c.eth_min_inline = 0;
    let mut sq = queue::<DoorbellOnly>(&mem, &mut lent, c);
    let mut b = sq.start();
    b.send(1)
        .unwrap()
        .vlan(0xa123)
        .unwrap()
        .ip_csum()
        .unwrap()
        .frame(7, 0x1000, &FRAME)
        .unwrap();
    b.send(2)
        .unwrap()
        .vlan(0x0005)
        .unwrap()
        .sge(8, 0x2000, 60)
        .unwrap();
    b.complete();
    let r = mem.ring();
    for (w, lkey, addr, len) in [(0usize, 7u32, 0x1000u64, 64u32), (64, 8, 0x2000, 60)] {
        assert_eq!(opcode_of(&r, w / 64), 0x0a);
        assert_eq!(ds_of(&r, w / 64), 3); // ctrl | Ethernet segment | data
                                          // Bytes 12..16 of the Ethernet segment: INSERT_VLAN (bit 31) | TCI,
                                          // no inline header.
        let tci = if w == 0 { 0xa123 } else { 0x0005 };
        assert_eq!(be32(&r, w + 28), 0x8000_0000 | tci);
        assert_eq!(be32(&r, w + 32), len);
        assert_eq!(be32(&r, w + 36), lkey);
        assert_eq!(&r[w + 40..w + 48], &addr.to_be_bytes());
        assert_eq!(&r[w + 48..w + 64], &[0; 16]);
    }
    assert_eq!(r[20], 0xc0); // the checksum request is kept
    assert_eq!(r[64 + 20], 0);
    let first = r[..128].to_vec();

    // An 18-byte inline header required: the tag goes into it.
    let mem = Mem::new(16);
    let mut lent = Lent::new(16);
    let mut sq = queue::<DoorbellOnly>(&mem, &mut lent, cfg(QpType::RawPacket));
    let mut b = sq.start();
    b.send(1)
        .unwrap()
        .vlan(0xa123)
        .unwrap()
        .frame(7, 0x1000, &FRAME)
        .unwrap();
    // A frame in pieces, and inline: the same header.
    b.send(2)
        .unwrap()
        .vlan(0xa123)
        .unwrap()
        .frame_list(&[
            FrameSge::with_addr(1, 0x1000, &FRAME[..13]),
            FrameSge::with_addr(2, 0x2000, &FRAME[13..64]),
        ])
        .unwrap();
    b.send(3)
        .unwrap()
        .vlan(0xa123)
        .unwrap()
        .inline_data(&FRAME[..20])
        .unwrap();
    assert_eq!(
        b.send(4)
            .unwrap()
            .vlan(1)
            .unwrap()
            .frame(1, 2, &FRAME[..13]),
        Err(PostError::EthHeaderTooShort)
    );
    b.complete();
    let r = mem.ring();
    let mut hdr = FRAME[..12].to_vec();
    hdr.extend_from_slice(&[0x81, 0x00, 0xa1, 0x23]);
    hdr.extend_from_slice(&FRAME[12..14]);
    for w in [0usize, 64, 128] {
        assert_eq!(&r[w + 28..w + 30], &[0, 18], "WQE {w}: inline_hdr_sz");
        assert_eq!(&r[w + 30..w + 48], &hdr[..], "WQE {w}: header with the tag");
    }
    assert_eq!(ds_of(&r, 0), 4);
    // The pointer segment starts past the 14 bytes the header took.
    assert_eq!(be32(&r, 48), 50);
    assert_eq!(be32(&r, 52), 7);
    assert_eq!(&r[56..64], &(0x1000u64 + 14).to_be_bytes());
    // Pieces: the first (13 bytes) is all header, the second loses 1.
    assert_eq!(ds_of(&r, 1), 4);
    assert_eq!(be32(&r, 64 + 48), 50);
    assert_eq!(be32(&r, 64 + 52), 2);
    assert_eq!(&r[64 + 56..128], &(0x2000u64 + 1).to_be_bytes());
    // Inline: 6 bytes after the 14 of the header.
    assert_eq!(be32(&r, 128 + 48), 0x8000_0006);
    assert_eq!(&r[128 + 52..128 + 58], &FRAME[14..20]);
    assert_ne!(r[..64], first[..64]);

    // TSO: the header grows by the tag and must still fit.
    let mem = Mem::new(16);
    let mut lent = Lent::new(16);
    let mut c = cfg(QpType::RawPacket);
    c.max_tso_header = 58;
    let mut sq = queue::<DoorbellOnly>(&mem, &mut lent, c);
    let hdr54: Vec<u8> = (0..54u8).collect();
    let hdr55: Vec<u8> = (0..55u8).collect();
    let mut b = sq.start();
    b.tso(1, &hdr54, 1000)
        .unwrap()
        .vlan(0x0fff)
        .unwrap()
        .sge(3, 0x3000, 4000)
        .unwrap();
    assert_eq!(
        b.tso(2, &hdr55, 1000)
            .unwrap()
            .vlan(1)
            .unwrap()
            .sge(3, 0x3000, 4000),
        Err(PostError::TsoHeaderTooLong)
    );
    b.complete();
    let r = mem.ring();
    assert_eq!(opcode_of(&r, 0), 0x0e);
    assert_eq!(&r[28..30], &[0, 58]);
    let mut want = hdr54[..12].to_vec();
    want.extend_from_slice(&[0x81, 0x00, 0x0f, 0xff]);
    want.extend_from_slice(&hdr54[12..]);
    assert_eq!(&r[30..88], &want[..]);
    assert_eq!(ds_of(&r, 0), 1 + 5 + 1); // Ethernet segment: 14 + 56 bytes = 5 DS
    assert_eq!(be32(&r, 96), 4000);

    // Only raw Ethernet sends and TSO.
    let mem = Mem::new(16);
    let mut lent = Lent::new(16);
    let mut sq = queue::<DoorbellOnly>(&mem, &mut lent, cfg(QpType::RawPacket));
    let mut b = sq.start();
    assert_eq!(
        b.nop(1).unwrap().vlan(1).err(),
        Some(PostError::UnsupportedOp)
    );
    drop(b);
    for qp in [QpType::Rc, QpType::Uc, QpType::Ud, QpType::Xrc] {
        let mem = Mem::new(16);
        let mut lent = Lent::new(16);
        let mut sq = queue::<DoorbellOnly>(&mem, &mut lent, cfg(qp));
        let mut b = sq.start();
        assert_eq!(
            b.send(1).unwrap().vlan(1).err(),
            Some(PostError::UnsupportedOp),
            "{qp:?}"
        );
    }
}

#[test]
fn ud_and_tso() {
    let mem = Mem::new(64);
    let mut lent = Lent::new(64);
    let mut c = cfg(QpType::Ud);
    c.max_tso_header = 128;
    let mut sq = queue::<DoorbellOnly>(&mem, &mut lent, c);
    let av = Av {
        rgid: [7; 16],
        key_reserved: crate::prm::Be32::new(0xdead),
        ..Av::default()
    };
    let mut b = sq.start();
    assert_eq!(
        b.send(1).unwrap().sge(1, 2, 3),
        Err(PostError::MissingUdAddress)
    );
    b.send(1)
        .unwrap()
        .ud_addr(&av, 0xabc, 0x1111_1111)
        .unwrap()
        .sge(1, 2, 3)
        .unwrap();
    let hdr = [9u8; 40];
    b.tso(2, &hdr, 1400)
        .unwrap()
        .ud_addr(&av, 0xabc, 0x2222)
        .unwrap()
        .sge(1, 2, 3)
        .unwrap();
    b.complete();
    let r = mem.ring();
    assert_eq!(be32(&r, 16), 0x1111_1111); // qkey
    assert_eq!(be32(&r, 20), 0xdead); // kept from the AV
    assert_eq!(be32(&r, 24), 0x8000_0abc); // extended AV | remote QPN
    assert_eq!(&r[48..64], &[7; 16]);
    assert_eq!(ds_of(&r, 0), 5);
    // UD TSO: ctrl | datagram | pad | Ethernet segment (40-byte header) | data.
    let w = 2 * 64;
    assert_eq!(opcode_of(&r, 2), 0x0e);
    assert_eq!(&r[w + 64..w + 80], &[0; 16]);
    assert_eq!(&r[w + 86..w + 88], &1400u16.to_be_bytes());
    assert_eq!(&r[w + 92..w + 94], &[0, 40]);
    assert_eq!(ds_of(&r, 2), 1 + 3 + 1 + 4 + 1); // Ethernet segment: 14 + 40 bytes = 4 DS
}

#[test]
fn errors_leave_ring_doorbell_and_register_untouched() {
    let mem = Mem::new(16);
    let mut lent = Lent::new(16);
    let mut c = cfg(QpType::RawPacket);
    c.max_sge = 2;
    c.max_inline_data = 32;
    c.max_tso = 100;
    let before = mem.snapshot();
    let mut sq = queue::<BlueFlamePreferred>(&mem, &mut lent, c);
    let big = [0u8; 300];
    let hdr = [0u8; 54];
    {
        let mut b = sq.start();
        let s = Sge::new(1, 2, 3);
        assert_eq!(
            b.send(1).unwrap().inline_data(&big[..18 + 33]),
            Err(PostError::InlineTooLong)
        );
        let f = FrameSge::with_addr(1, 2, &FRAME);
        assert_eq!(
            b.send(1).unwrap().frame_list(&[f, f, f]),
            Err(PostError::TooManySges)
        );
        assert_eq!(
            b.tso(1, &big[..129], 1).err(),
            Some(PostError::TsoHeaderTooLong)
        );
        assert_eq!(
            b.tso(1, &big[..13], 1).err(),
            Some(PostError::TsoHeaderTooShort)
        );
        assert_eq!(
            b.tso(1, &hdr, 1).unwrap().sge_list(&[Sge::new(1, 2, 101)]),
            Err(PostError::TsoPayloadTooLong)
        );
        assert_eq!(
            b.send(1).unwrap().frame(1, 2, &FRAME[..17]),
            Err(PostError::EthHeaderTooShort)
        );
        assert_eq!(
            b.send(1).unwrap().sge_list(&[s]),
            Err(PostError::FrameBytesRequired)
        );
        assert_eq!(b.rdma_write(1, 2, 3).err(), Some(PostError::UnsupportedOp));
        assert!(b.is_empty());
        assert_eq!(b.complete(), 0);
    }
    assert_eq!(mem.snapshot(), before);
    assert_eq!((sq.producer(), sq.bf_offset()), (0, 0));
}

#[test]
fn wqe_too_large_and_queue_full_and_batch_full() {
    let mem = Mem::new(16);
    let mut lent = Lent::new(16);
    let mut c = cfg(QpType::Rc);
    c.max_inline_data = 2000;
    let before = mem.snapshot();
    let mut sq = queue::<DoorbellOnly>(&mem, &mut lent, c);
    let big = [1u8; 1000];
    let mut b = sq.start();
    assert_eq!(
        b.send(1).unwrap().inline_data(&big[..993]),
        Err(PostError::WqeTooLarge)
    );
    // 16 WQEBBs: a 4-WQEBB WQE four times, then full.
    for i in 0..4 {
        b.send(i).unwrap().inline_data(&big[..200]).unwrap();
    }
    assert_eq!(b.send(9).unwrap().post(), Err(PostError::QueueFull));
    b.abort();
    assert_eq!(mem.snapshot(), before);

    // A staging area smaller than the ring bounds the batch instead.
    let mem = Mem::new(64);
    let mut lent = Lent::new(64);
    lent.staging.truncate(16);
    let mut sq = queue::<DoorbellOnly>(&mem, &mut lent, c);
    let mut b = sq.start();
    for i in 0..16 {
        b.nop(i).unwrap().post().unwrap();
    }
    assert_eq!(b.nop(16).unwrap().post(), Err(PostError::BatchFull));
    assert_eq!(b.complete(), 16);
}

#[test]
fn abort_and_drop_leave_everything_untouched() {
    let mem = Mem::new(16);
    let mut lent = Lent::new(16);
    let before = mem.snapshot();
    let mut sq = queue::<BlueFlamePreferred>(&mem, &mut lent, cfg(QpType::Rc));
    let mut b = sq.start();
    b.send(1).unwrap().inline_data(&FRAME).unwrap();
    b.local_inv(2, 3).unwrap().post().unwrap();
    b.abort();
    {
        let mut b = sq.start();
        b.rdma_write(3, 1, 2).unwrap().sge(1, 2, 3).unwrap();
        // dropped without complete
    }
    assert_eq!(mem.snapshot(), before);
    assert_eq!((sq.producer(), sq.fm_cache(), sq.bf_offset()), (0, 0, 0));
}

#[test]
fn blueflame_alternates_and_policies_choose() {
    let mem = Mem::new(16);
    let mut lent = Lent::new(16);
    let mut sq = queue::<BlueFlamePreferred>(&mem, &mut lent, cfg(QpType::Rc));
    let uar0 = mem.uar();
    let mut b = sq.start();
    b.send(1).unwrap().sge(1, 2, 3).unwrap();
    b.complete();
    let r = mem.ring();
    let u1 = mem.uar();
    assert_eq!(&u1[BF_OFF..BF_OFF + 64], &r[..64]);
    assert_eq!(&u1[BF_OFF + 256..], &uar0[BF_OFF + 256..]);
    let mut b = sq.start();
    b.send(2).unwrap().sge(1, 2, 3).unwrap();
    b.complete();
    let r = mem.ring();
    let u2 = mem.uar();
    assert_eq!(&u2[BF_OFF + 256..BF_OFF + 320], &r[64..128]);
    assert_eq!(sq.bf_offset(), 0);
    // Two WQEs: 8-byte doorbell of the last one, at the current half.
    let mut b = sq.start();
    b.send(3).unwrap().sge(1, 2, 3).unwrap();
    b.send(4).unwrap().sge(1, 2, 3).unwrap();
    b.complete();
    let r = mem.ring();
    let u3 = mem.uar();
    assert_eq!(&u3[BF_OFF..BF_OFF + 8], &r[3 * 64..3 * 64 + 8]);
    assert_eq!(&u3[BF_OFF + 8..BF_OFF + 64], &u2[BF_OFF + 8..BF_OFF + 64]);
    assert_eq!(sq.bf_offset(), 256);
    // A 1-DS WQE (NOP) never goes by BlueFlame.
    let mut b = sq.start();
    b.nop(5).unwrap().post().unwrap();
    b.complete();
    let u4 = mem.uar();
    assert_eq!(
        &u4[BF_OFF + 256..BF_OFF + 264],
        &mem.ring()[4 * 64..4 * 64 + 8]
    );
    assert_eq!(
        &u4[BF_OFF + 264..BF_OFF + 320],
        &u3[BF_OFF + 264..BF_OFF + 320]
    );

    // BlueFlameInline: pointer send → doorbell; inline send → BlueFlame.
    let mem = Mem::new(16);
    let mut lent = Lent::new(16);
    let mut sq = queue::<BlueFlameInline>(&mem, &mut lent, cfg(QpType::Rc));
    let mut b = sq.start();
    b.send(1).unwrap().sge(1, 2, 3).unwrap();
    b.complete();
    let u = mem.uar();
    assert_eq!(&u[BF_OFF..BF_OFF + 8], &mem.ring()[..8]);
    assert_eq!(u[BF_OFF + 8], 0x3c);
    let mut b = sq.start();
    b.send(2).unwrap().inline_data(&FRAME[..16]).unwrap();
    b.complete();
    assert_eq!(&mem.uar()[BF_OFF + 256..BF_OFF + 320], &mem.ring()[64..128]);

    // DoorbellOnly: always 8 bytes, halves still alternate.
    let mem = Mem::new(16);
    let mut lent = Lent::new(16);
    let mut sq = queue::<DoorbellOnly>(&mem, &mut lent, cfg(QpType::Rc));
    let mut b = sq.start();
    b.send(1).unwrap().inline_data(&FRAME[..16]).unwrap();
    b.complete();
    let u = mem.uar();
    assert_eq!(&u[BF_OFF..BF_OFF + 8], &mem.ring()[..8]);
    assert_eq!(u[BF_OFF + 8], 0x3c);
    assert_eq!(sq.bf_offset(), 256);
}

#[test]
fn retire_checks_counters_and_frees_wqebbs() {
    let mem = Mem::new(16);
    let mut lent = Lent::new(16);
    let mut c = cfg(QpType::Rc);
    c.start_pi = 0xfffe; // WQE index wraps at 0xffff
    let mut sq = queue::<DoorbellOnly>(&mem, &mut lent, c);
    let mut b = sq.start();
    b.send(10).unwrap().post().unwrap(); // 0xfffe, 1 WQEBB
    b.send(11).unwrap().inline_data(&FRAME).unwrap(); // 0xffff, 2 WQEBBs
    b.send(12).unwrap().signaled().post().unwrap(); // 0x0001
    b.send(13).unwrap().signaled().post().unwrap(); // 0x0002
    b.complete();
    assert_eq!(sq.outstanding(), 5);
    assert_eq!(
        sq.retire(0x0000),
        Err(RetireError::NotWqeStart { wqe_counter: 0 })
    );
    assert_eq!(
        sq.retire(0x0003),
        Err(RetireError::NotInFlight { wqe_counter: 3 })
    );
    assert_eq!(
        sq.retire(0x1234),
        Err(RetireError::NotInFlight {
            wqe_counter: 0x1234
        })
    );
    let mut seen = Vec::new();
    let r = sq
        .retire_each(0x0001, |w| seen.push((w.wr_id, w.signaled, w.last)))
        .unwrap();
    assert_eq!(
        r,
        Retired {
            wr_id: 12,
            wqebbs: 4,
            wr_opcode: None
        }
    );
    assert_eq!(
        seen,
        [(10, false, false), (11, false, false), (12, true, true)]
    );
    // A counter already retired is refused.
    assert_eq!(
        sq.retire(0xfffe),
        Err(RetireError::NotInFlight {
            wqe_counter: 0xfffe
        })
    );
    assert_eq!(
        sq.retire(0x0002),
        Ok(Retired {
            wr_id: 13,
            wqebbs: 1,
            wr_opcode: None
        })
    );
    assert_eq!(sq.outstanding(), 0);
    assert_eq!(sq.free_wqebbs(), 16);
}

/// The largest ring the 16-bit counters can drive (65536 WQEBBs) is
/// accepted, and its completions retire across the counters' wrap: the
/// shadow slot is `wqe_counter & mask`, here the whole counter, while the
/// queue's own counters are two passes ahead of it.
#[test]
#[cfg_attr(miri, ignore = "a 4 MiB ring and staging area: slow under miri")]
fn largest_ring_retires_across_the_counter_wrap() {
    let mem = Mem::new(1 << 16);
    let mut lent = Lent::new(1 << 16);
    let mut c = cfg(QpType::Rc);
    c.start_pi = 0x2_fffe;
    let mut sq = queue::<DoorbellOnly>(&mem, &mut lent, c);
    let mut b = sq.start();
    b.send(10).unwrap().post().unwrap(); // 0xfffe, 1 WQEBB
    b.send(11).unwrap().inline_data(&FRAME).unwrap(); // 0xffff, 2 WQEBBs
    b.send(12).unwrap().signaled().post().unwrap(); // 0x0001
    b.complete();
    assert_eq!(sq.outstanding(), 4);
    // The second WQE's first WQEBB is the ring's last slot.
    assert_eq!(be32(&mem.ring(), 0xffff * 64) >> 8, 0xffff);
    assert_eq!(
        sq.retire(0x0000),
        Err(RetireError::NotWqeStart { wqe_counter: 0 })
    );
    assert_eq!(
        sq.retire(0xffff),
        Ok(Retired {
            wr_id: 11,
            wqebbs: 3,
            wr_opcode: None
        })
    );
    assert_eq!(
        sq.retire(0x0001),
        Ok(Retired {
            wr_id: 12,
            wqebbs: 1,
            wr_opcode: None
        })
    );
    assert_eq!(sq.outstanding(), 0);
    assert_eq!(sq.free_wqebbs(), 1 << 16);
}

#[test]
fn queue_never_overwrites_unretired_wqes() {
    let mem = Mem::new(4);
    let mut lent = Lent::new(4);
    let mut sq = queue::<DoorbellOnly>(&mem, &mut lent, cfg(QpType::Rc));
    let mut b = sq.start();
    for i in 0..4 {
        b.send(i).unwrap().signaled().post().unwrap();
    }
    b.complete();
    let full = mem.snapshot();
    let mut b = sq.start();
    assert_eq!(b.send(9).unwrap().post(), Err(PostError::QueueFull));
    b.complete();
    assert_eq!(mem.snapshot(), full);
    sq.retire(1).unwrap();
    let mut b = sq.start();
    b.send(9).unwrap().post().unwrap();
    b.send(10).unwrap().post().unwrap();
    assert_eq!(b.send(11).unwrap().post(), Err(PostError::QueueFull));
    b.complete();
    assert_eq!(sq.producer(), 6);
}

#[test]
fn unsignaled_queue_is_drained_by_forced_cqes() {
    let mem = Mem::new(8);
    let mut lent = Lent::new(8);
    let mut c = cfg(QpType::Rc);
    c.signal_every = u32::MAX; // default: half the ring
    let mut sq = queue::<DoorbellOnly>(&mem, &mut lent, c);
    let mut b = sq.start();
    for i in 0..8 {
        b.send(i).unwrap().post().unwrap();
    }
    b.complete();
    let r = mem.ring();
    let ce: Vec<bool> = (0..8)
        .map(|i| r[i * 64 + 11] & WQE_CTRL_CQ_UPDATE != 0)
        .collect();
    assert_eq!(ce, [false, false, false, true, false, false, false, true]);
    let e = sq.shadow(3).unwrap();
    assert!(e.cqe_requested() && !e.signaled());
    // The forced CQEs retire everything.
    sq.retire(3).unwrap();
    sq.retire(7).unwrap();
    assert_eq!(sq.outstanding(), 0);
}

#[test]
fn sge_list_skips_zero_length_and_atomics_force_result_size() {
    let mem = Mem::new(16);
    let mut lent = Lent::new(16);
    let mut sq = queue::<DoorbellOnly>(&mem, &mut lent, cfg(QpType::Rc));
    let mut b = sq.start();
    b.send(1)
        .unwrap()
        .sge_list(&[
            Sge::new(1, 0x10, 100),
            Sge::new(2, 0x20, 0),
            Sge::new(3, 0x30, 300),
        ])
        .unwrap();
    assert_eq!(
        b.send(2).unwrap().sge_list(&[Sge::default(); 5]),
        Err(PostError::TooManySges)
    );
    b.masked_fetch_add_u32(3, 1, 2, 3, 4)
        .unwrap()
        .sge(7, 0x40, 64)
        .unwrap();
    b.complete();
    let r = mem.ring();
    assert_eq!(ds_of(&r, 0), 3);
    assert_eq!(be32(&r, 16), 100);
    assert_eq!(be32(&r, 32), 300);
    assert_eq!(r[64], 0x08); // opmod: 4-byte extended atomic
    assert_eq!(be32(&r, 64 + 48), 4); // result SGE: operand size
}

#[test]
fn constructor_checks_its_parts() {
    let mem = Mem::new(16);
    let mut lent = Lent::new(16);
    let mut raw = mem.raw();
    raw.wqe_cnt = 12;
    // SAFETY: refused before any access.
    let r = unsafe {
        SendQueue::<DoorbellOnly>::new(raw, cfg(QpType::Rc), &mut lent.shadow, &mut lent.staging)
    };
    assert_eq!(r.err(), Some(SqConfigError::BadWqeCount));
    // A power of two above the 16-bit WQE counters' range: refused first,
    // before the size of its parts is looked at (`mem` holds 16 WQEBBs).
    let mut raw = mem.raw();
    raw.wqe_cnt = 1 << 17;
    // SAFETY: refused before any access.
    let r = unsafe {
        SendQueue::<DoorbellOnly>::new(raw, cfg(QpType::Rc), &mut lent.shadow, &mut lent.staging)
    };
    assert_eq!(r.err(), Some(SqConfigError::BadWqeCount));
    let mut c = cfg(QpType::Rc);
    c.qpn = 1 << 24;
    // SAFETY: as above.
    let r = unsafe {
        SendQueue::<DoorbellOnly>::new(mem.raw(), c, &mut lent.shadow, &mut lent.staging)
    };
    assert_eq!(r.err(), Some(SqConfigError::BadQpn));
    let mut short = vec![SqShadowEntry::EMPTY; 8];
    // SAFETY: as above.
    let r = unsafe {
        SendQueue::<DoorbellOnly>::new(mem.raw(), cfg(QpType::Rc), &mut short, &mut lent.staging)
    };
    assert_eq!(r.err(), Some(SqConfigError::ShadowTooSmall));
    let mut c = cfg(QpType::RawPacket);
    c.eth_min_inline = 14;
    // SAFETY: as above.
    let r = unsafe {
        SendQueue::<DoorbellOnly>::new(mem.raw(), c, &mut lent.shadow, &mut lent.staging)
    };
    assert_eq!(r.err(), Some(SqConfigError::BadEthMinInline));
}

/// The fast paths (`Wr::sge`, `Wr::inline_data`, `Wr::frame`) write the
/// generic encoder's bytes (`sge_list`, `inline_data_list`, `frame_list`
/// of one element), shadow and doorbells included, across flags, ring
/// wrap, forced completions and the lengths where they hand over.
#[test]
fn fast_paths_match_the_generic_encoder() {
    use QpType::*;
    type Post = for<'b, 'q, 'a> fn(
        &'b mut Batch<'q, 'a, BlueFlamePreferred>,
        u64,
        bool,
        usize,
    ) -> Result<(), PostError>;
    let frame: Vec<u8> = (0..200u32).map(|i| (i * 7 + 3) as u8).collect();
    let av = Av {
        rlid: crate::prm::Be16::new(0x17),
        ..Av::default()
    };
    // (QP types, fast, generic)
    let fast_sge: Post = |b, i, generic, len| {
        let op = i % 6;
        let w = match op {
            0 => b.send(i),
            1 => b.send_imm(i, 0x1234_5678),
            2 => b.rdma_write(i, 0xabcd, 0x7000 + i),
            3 => b.rdma_write_imm(i, 0xabcd, 0x7000 + i, 0x55aa),
            4 => b.rdma_read(i, 0xabcd, 0x7000 + i),
            _ => b.send_inv(i, 0x99),
        };
        let Ok(w) = w else {
            return Ok(());
        };
        let w = w.signaled_if(i % 3 == 0);
        let w = if i % 5 == 0 { w.fence() } else { w };
        let w = if i % 7 == 0 { w.solicited() } else { w };
        let len = (len % 3) as u32 * 100; // 0 (generic), 100, 200
        if generic {
            w.sge_list(&[Sge::new(0x4321, 0x2_0000_0000 + i, len)])
        } else {
            w.sge(0x4321, 0x2_0000_0000 + i, len)
        }
    };
    let fast_inline: Post = |b, i, generic, len| {
        let data = [0x5au8 ^ i as u8; 64];
        let w = match i % 3 {
            0 => b.send(i),
            1 => b.send_imm(i, 7),
            _ => b.send_inv(i, 8),
        }?;
        let w = w.signaled_if(i % 2 == 0);
        let d = &data[..len % 50];
        if generic {
            w.inline_data_list(&[d])
        } else {
            w.inline_data(d)
        }
    };
    for qp in [Rc, Uc, Ud, Xrc, RawPacket] {
        for (name, post) in [("sge", fast_sge), ("inline", fast_inline)] {
            for sig_all in [false, true] {
                let run = |generic: bool| {
                    let mem = Mem::new(16);
                    let mut lent = Lent::new(16);
                    let mut c = cfg(qp);
                    c.sig_all = sig_all;
                    c.signal_every = 5;
                    c.max_inline_data = 44;
                    let mut sq = queue::<BlueFlamePreferred>(&mem, &mut lent, c);
                    let mut results = Vec::new();
                    for i in 0..40u64 {
                        let mut b = sq.start();
                        let r = post(&mut b, i, generic, i as usize);
                        // UD: with the address (or a send without it).
                        results.push(r);
                        if i % 4 == 3 {
                            b.abort();
                        } else {
                            b.complete();
                        }
                        if sq.outstanding() > 8 {
                            let last = (0..16)
                                .filter_map(|s| sq.shadow(s).copied())
                                .filter(|e| e.wqebbs() != 0 && e.index() != 0xffff)
                                .map(|e| e.index())
                                .filter(|&x| {
                                    u32::from(x.wrapping_sub(sq.consumer() as u16))
                                        < sq.outstanding()
                                })
                                .max_by_key(|&x| x.wrapping_sub(sq.consumer() as u16));
                            if let Some(x) = last {
                                sq.retire(x).unwrap();
                            }
                        }
                    }
                    let shadow: Vec<_> = (0..16).map(|s| *sq.shadow(s).unwrap()).collect();
                    (
                        results,
                        shadow,
                        sq.producer(),
                        sq.bf_offset(),
                        mem.snapshot(),
                    )
                };
                assert!(
                    run(false) == run(true),
                    "{name} on {qp:?}, sig_all {sig_all}"
                );
            }
        }
        // UD sends with an address vector.
        let run_ud = |generic: bool| {
            let mem = Mem::new(16);
            let mut lent = Lent::new(16);
            let mut sq = queue::<DoorbellOnly>(&mem, &mut lent, cfg(qp));
            let mut results = Vec::new();
            for i in 0..24u64 {
                let mut b = sq.start();
                let r = b
                    .send(i)
                    .and_then(|w| w.ud_addr(&av, 0x456, 0x1111))
                    .and_then(|w| {
                        let len = (i % 3) as u32 * 64;
                        if generic {
                            w.sge_list(&[Sge::new(1, 0x1000 * i, len)])
                        } else {
                            w.sge(1, 0x1000 * i, len)
                        }
                    });
                results.push(r);
                b.complete();
                if sq.outstanding() >= 8 {
                    let last = sq.producer().wrapping_sub(2) as u16;
                    let _ = sq.retire(last);
                    let _ = sq.retire(sq.producer().wrapping_sub(1) as u16);
                }
            }
            (results, sq.producer(), mem.snapshot())
        };
        assert!(run_ud(false) == run_ud(true), "ud_addr on {qp:?}");
        // Raw Ethernet frames, with and without checksum offload.
        for eth_min in [0u8, 18] {
            let run_eth = |generic: bool| {
                let mem = Mem::new(16);
                let mut lent = Lent::new(16);
                let mut c = cfg(qp);
                c.eth_min_inline = eth_min;
                let mut sq = queue::<BlueFlameInline>(&mem, &mut lent, c);
                let mut results = Vec::new();
                for i in 0..24usize {
                    let mut b = sq.start();
                    let len = [64, 18, 17, 19, 200, 0][i % 6];
                    let data = &frame[..len];
                    let addr = 0x9000 + i as u64;
                    let r = b
                        .send(i as u64)
                        .and_then(|w| if i % 2 == 0 { w.ip_csum() } else { Ok(w) })
                        .and_then(|w| {
                            if generic {
                                w.frame_list(&[FrameSge::with_addr(7, addr, data)])
                            } else {
                                w.frame(7, addr, data)
                            }
                        });
                    results.push(r);
                    b.complete();
                    if sq.outstanding() >= 8 {
                        let last = sq.producer().wrapping_sub(1) as u16;
                        let _ = sq.retire(last);
                    }
                }
                (results, sq.producer(), mem.snapshot())
            };
            assert!(
                run_eth(false) == run_eth(true),
                "frame on {qp:?}, eth_min {eth_min}"
            );
        }
    }
}

#[test]
fn typed_queues_check_their_qp_type() {
    let mem = Mem::new(16);
    let mut lent = Lent::new(16);
    // SAFETY: `mem` provides the ring, register and dbrec, used by this queue only.
    let r = unsafe {
        SendQueue::<DoorbellOnly, UdQp>::new_typed(
            mem.raw(),
            cfg(QpType::Rc),
            &mut lent.shadow,
            &mut lent.staging,
        )
    };
    assert_eq!(r.err(), Some(SqConfigError::QpTypeMismatch));
    // SAFETY: as above (the first queue was never built).
    let mut sq = unsafe {
        SendQueue::<DoorbellOnly, RcQp>::new_typed(
            mem.raw(),
            cfg(QpType::Rc),
            &mut lent.shadow,
            &mut lent.staging,
        )
    }
    .unwrap();
    assert_eq!(sq.qp_type(), QpType::Rc);
    let mut b = sq.start();
    b.rdma_write(1, 2, 3).unwrap().sge(4, 5, 6).unwrap();
    assert_eq!(
        b.send(2).unwrap().ud_addr(&Av::default(), 1, 2).err(),
        Some(PostError::UnsupportedOp)
    );
    assert_eq!(b.complete(), 1);
    assert_eq!(opcode_of(&mem.ring(), 0), SendOpcode::RdmaWrite.raw());
}

/// The one-call posts (`SendQueue::post_rdma_write` / `post_rdma_read` /
/// `post_send` / `post_send_inline` / `post_ud_send` / `post_raw_frame`,
/// writing straight into the ring, and
/// `Batch::rdma_write_sge`
/// / `rdma_read_sge` / `send_sge`) give the bytes, shadow, doorbell,
/// BlueFlame toggle and errors of the builder with `sge_list` (the generic
/// encoder), on every QP type, with and without SGEs, through full queues,
/// forced CQEs, inherited fences and aborted batches.
#[test]
fn one_call_posts_match_the_builder() {
    use QpType::*;
    #[derive(Clone, Copy, PartialEq)]
    enum Mode {
        Builder,
        Post,
        BatchOne,
    }
    fn flags_of(i: u64) -> (SendFlags, bool, bool, bool) {
        let (sig, fence, sol) = (i % 3 == 0, i % 5 == 0, i % 7 == 0);
        let mut f = SendFlags::NONE;
        if sig {
            f = f | SendFlags::SIGNALED;
        }
        if fence {
            f = f | SendFlags::FENCE;
        }
        if sol {
            f = f | SendFlags::SOLICITED;
        }
        (f, sig, fence, sol)
    }
    fn one<P: DoorbellPolicy>(
        sq: &mut SendQueue<'_, P>,
        mode: Mode,
        i: u64,
        abort: bool,
    ) -> Result<(), PostError> {
        let op = i % 6;
        let len = [64u32, 0, 200, 8][(i % 4) as usize];
        let sge = Sge::new(0x4321, 0x2_0000_0000 + i, len);
        let (flags, sig, fence, sol) = flags_of(i);
        let (rkey, raddr) = (0xabcd, 0x7000 + 64 * i);
        // Inline sends: one, two and three DS of data, one WQEBB's most
        // (44), and longer (the batch path).
        let inline_len = [1usize, 12, 13, 28, 29, 44, 45, 60][(i / 5 % 8) as usize];
        let data: Vec<u8> = (0..inline_len)
            .map(|k| (i as u8) ^ (k as u8).wrapping_mul(7))
            .collect();
        // UD sends: an address vector with a LID, a MAC and a hop limit.
        let av = Av {
            rlid: crate::prm::Be16::new(0x17 + i as u16),
            rmac: [2, 0, 0, 0, 0, i as u8],
            hop_limit: 64,
            ..Av::default()
        };
        let (remote_qpn, qkey) = (0x456 + i as u32, 0x1111_2222);
        // Raw frames: shorter than, as long as and longer than the inline
        // L2 header.
        let frame_len = [64usize, 18, 19, 60, 14, 1500][(i / 6 % 6) as usize];
        let frame: Vec<u8> = (0..frame_len).map(|k| (k as u8) ^ (i as u8)).collect();
        let frame_addr = 0x3_0000_0000 + 64 * i;
        match mode {
            Mode::Post if !abort => match op {
                0 => sq.post_rdma_write(i, rkey, raddr, sge, flags),
                1 => sq.post_rdma_read(i, rkey, raddr, sge, flags),
                2 => sq.post_send(i, sge, flags),
                3 => sq.post_send_inline(i, &data, flags),
                4 => sq.post_ud_send(i, &av, remote_qpn, qkey, sge, flags),
                _ => sq.post_raw_frame(i, 0x4321, frame_addr, &frame, flags),
            },
            Mode::BatchOne | Mode::Post if op < 3 => {
                let mut b = sq.start();
                let r = match op {
                    0 => b.rdma_write_sge(i, rkey, raddr, sge, flags),
                    1 => b.rdma_read_sge(i, rkey, raddr, sge, flags),
                    _ => b.send_sge(i, sge, flags),
                };
                if abort {
                    b.abort();
                } else {
                    b.complete();
                }
                r
            }
            _ => {
                let mut b = sq.start();
                let r = match op {
                    0 => b.rdma_write(i, rkey, raddr),
                    1 => b.rdma_read(i, rkey, raddr),
                    _ => b.send(i),
                }
                .and_then(|w| {
                    let w = w.signaled_if(sig);
                    let w = if fence { w.fence() } else { w };
                    let w = if sol { w.solicited() } else { w };
                    match op {
                        3 => w.inline_data(&data),
                        4 => w
                            .ud_addr(&av, remote_qpn, qkey)
                            .and_then(|w| w.sge_list(&[sge])),
                        5 => w.frame(0x4321, frame_addr, &frame),
                        _ => w.sge_list(&[sge]),
                    }
                });
                if abort {
                    b.abort();
                } else {
                    b.complete();
                }
                r
            }
        }
    }
    // (With the register page after every post: a doorbell and a
    // BlueFlame copy leave different bytes there.)
    type Outcome = (
        Vec<(Result<(), PostError>, u32, u8, usize, Vec<u8>)>,
        Vec<SqShadowEntry>,
    );
    fn drive<P: DoorbellPolicy>(mem: &Mem, lent: &mut Lent, c: SqConfig, mode: Mode) -> Outcome {
        let mut sq = queue::<P>(mem, lent, c);
        let mut out = Vec::new();
        for i in 0..60u64 {
            if i % 9 == 4 {
                let mut b = sq.start();
                let _ = b.local_inv(1000 + i, 0x77).and_then(|w| w.post());
                b.complete();
            }
            let r = one(&mut sq, mode, i, i % 11 == 10);
            out.push((r, sq.producer(), sq.fm_cache(), sq.bf_offset(), mem.uar()));
            // Retire everything now and then (and let the
            // queue run full in between).
            if i % 13 == 12 && sq.outstanding() > 0 {
                let last = (0..8)
                    .filter_map(|s| sq.shadow(s).copied())
                    .filter(|e| e.wqebbs() != 0)
                    .map(|e| e.index())
                    .filter(|&x| u32::from(x.wrapping_sub(sq.consumer() as u16)) < sq.outstanding())
                    .max_by_key(|&x| x.wrapping_sub(sq.consumer() as u16));
                if let Some(x) = last {
                    sq.retire(x).unwrap();
                }
            }
        }
        let shadow: Vec<_> = (0..8).map(|s| *sq.shadow(s).unwrap()).collect();
        (out, shadow)
    }
    for qp in [Rc, Uc, Ud, Xrc, RawPacket] {
        for max_sge in [0u32, 4] {
            for (sig_all, bf_inline) in [(false, false), (true, false), (false, true)] {
                let run = |mode: Mode| {
                    let mem = Mem::new(8);
                    let mut lent = Lent::new(8);
                    let mut c = cfg(qp);
                    c.max_sge = max_sge;
                    c.sig_all = sig_all;
                    c.signal_every = 3;
                    if max_sge == 0 {
                        // (Inline sends past 20 bytes are refused.)
                        c.max_inline_data = 20;
                    }
                    let (out, shadow) = if bf_inline {
                        drive::<BlueFlameInline>(&mem, &mut lent, c, mode)
                    } else {
                        drive::<BlueFlamePreferred>(&mem, &mut lent, c, mode)
                    };
                    (out, shadow, mem.snapshot())
                };
                let builder = run(Mode::Builder);
                assert!(
                    builder.0.iter().any(|(r, ..)| r.is_ok()) || max_sge == 0 || qp != Rc,
                    "vacuous on {qp:?}"
                );
                assert!(
                    run(Mode::Post) == builder,
                    "post on {qp:?}, max_sge {max_sge}, sig_all {sig_all}, bf_inline {bf_inline}"
                );
                assert!(
                    run(Mode::BatchOne) == builder,
                    "batch on {qp:?}, max_sge {max_sge}, sig_all {sig_all}, bf_inline {bf_inline}"
                );
            }
        }
    }
}

/// Batches of several one-call work requests match the builder's batches.
#[test]
fn one_call_batches_match_the_builder() {
    let run = |one_call: bool| {
        let mem = Mem::new(16);
        let mut lent = Lent::new(16);
        let mut c = cfg(QpType::Rc);
        c.signal_every = 5;
        let mut sq = queue::<BlueFlamePreferred>(&mem, &mut lent, c);
        let mut out = Vec::new();
        for round in 0..12u64 {
            let mut b = sq.start();
            for k in 0..(round % 5) {
                let i = round * 8 + k;
                let sge = Sge::new(9, 0x1000 * i, 1 + (i as u32 % 3) * 50);
                let r = if one_call {
                    b.rdma_write_sge(i, 0x55, 0x8000 + i, sge, SendFlags::NONE)
                } else {
                    b.rdma_write(i, 0x55, 0x8000 + i)
                        .and_then(|w| w.sge_list(&[sge]))
                };
                out.push(r);
            }
            out.push(Ok(()));
            let n = b.complete();
            out.push(if n == 0 {
                Err(PostError::BatchFull)
            } else {
                Ok(())
            });
            if sq.outstanding() > 8 {
                let last = sq.producer().wrapping_sub(1) as u16;
                sq.retire(last).unwrap();
            }
        }
        (out, sq.producer(), sq.bf_offset(), mem.snapshot())
    };
    assert!(run(true) == run(false));
}

/// One-call work requests with the batch's credits (`Batch::push_sge`)
/// match the builder when they are mixed, in one batch, with the builder's
/// fast and generic paths (inline sends, local invalidates and their
/// inherited fence, zero-length SGEs), carry flags, meet forced CQEs, fill
/// the ring or the staging area, and when batches are aborted.
#[test]
fn one_call_batches_mixed_with_the_builder_match() {
    // (ring, staging, sig_all, signal_every)
    let cases: &[(usize, usize, bool, u32)] = if cfg!(miri) {
        &[(16, 16, false, 3)]
    } else {
        &[
            (16, 16, false, 5),
            (16, 16, false, 3),
            (64, 16, false, 0),
            (32, 32, true, 7),
            (16, 16, false, 1),
        ]
    };
    // (Queue full, batch full: seen.)
    let mut full = (false, false);
    for &(ring, staging, sig_all, signal_every) in cases {
        let run = |one_call: bool| {
            let mem = Mem::new(ring);
            let mut lent = Lent {
                shadow: vec![SqShadowEntry::EMPTY; ring],
                staging: vec![Wqebb::ZERO; staging],
            };
            let mut c = cfg(QpType::Rc);
            c.sig_all = sig_all;
            c.signal_every = signal_every;
            c.start_pi = 0xfffa;
            let mut sq = queue::<BlueFlamePreferred>(&mem, &mut lent, c);
            let mut out = Vec::new();
            for round in 0..40u64 {
                let mut b = sq.start();
                for k in 0..(round % 23) {
                    let i = round * 32 + k;
                    let r = match i % 13 {
                        0 => b.local_inv(i, 0x77).and_then(|w| w.post()),
                        6 => b.send(i).and_then(|w| w.inline_data(b"inline")),
                        _ => {
                            let mut f = SendFlags::NONE;
                            if i % 4 == 1 {
                                f = f | SendFlags::SIGNALED;
                            }
                            if i % 10 == 3 {
                                f = f | SendFlags::FENCE;
                            }
                            if i % 6 == 2 {
                                f = f | SendFlags::SOLICITED;
                            }
                            let len = if i % 11 == 7 { 0 } else { 1 + i as u32 % 200 };
                            let sge = Sge::new(9, 0x1000 * i, len);
                            let (rkey, raddr) = (0xab00_0055, 0x8000 + i);
                            if one_call {
                                match i % 3 {
                                    0 => b.rdma_write_sge(i, rkey, raddr, sge, f),
                                    1 => b.rdma_read_sge(i, rkey, raddr, sge, f),
                                    _ => b.send_sge(i, sge, f),
                                }
                            } else {
                                match i % 3 {
                                    0 => b.rdma_write(i, rkey, raddr),
                                    1 => b.rdma_read(i, rkey, raddr),
                                    _ => b.send(i),
                                }
                                .map(|w| w.signaled_if(f.contains(SendFlags::SIGNALED)))
                                .map(|w| {
                                    if f.contains(SendFlags::FENCE) {
                                        w.fence()
                                    } else {
                                        w
                                    }
                                })
                                .map(|w| {
                                    if f.contains(SendFlags::SOLICITED) {
                                        w.solicited()
                                    } else {
                                        w
                                    }
                                })
                                .and_then(|w| w.sge_list(&[sge]))
                            }
                        }
                    };
                    out.push(r);
                }
                if round % 7 == 5 {
                    b.abort();
                } else {
                    out.push(Ok(()));
                    b.complete();
                }
                out.push(if sq.fm_cache() == 0 {
                    Ok(())
                } else {
                    Err(PostError::UnsupportedOp)
                });
                // Retire up to the newest signalled WQE now and then.
                if round % 4 == 3 {
                    let newest = (0..sq.outstanding())
                        .rev()
                        .map(|d| sq.consumer().wrapping_add(d))
                        .find(|&at| {
                            sq.shadow((at % ring as u32) as usize)
                                .is_some_and(|e| e.wqebbs() != 0 && e.cqe_requested())
                        });
                    if let Some(at) = newest {
                        sq.retire(at as u16).unwrap();
                    }
                }
            }
            let shadow: Vec<_> = (0..sq.outstanding())
                .map(|d| {
                    *sq.shadow((sq.consumer().wrapping_add(d) % ring as u32) as usize)
                        .unwrap()
                })
                .collect();
            (out, sq.producer(), sq.bf_offset(), mem.snapshot(), shadow)
        };
        let builder = run(false);
        assert!(
            builder.0.iter().filter(|r| r.is_ok()).count() > 100,
            "vacuous: {:?}",
            builder.0
        );
        full.0 |= builder.0.contains(&Err(PostError::QueueFull));
        full.1 |= builder.0.contains(&Err(PostError::BatchFull));
        assert!(
            run(true) == builder,
            "ring {ring}, staging {staging}, sig_all {sig_all}, signal_every {signal_every}"
        );
    }
    assert!(full == (true, true) || cfg!(miri), "vacuous: {full:?}");
}

/// `SharedBlueFlame`: 8-byte doorbells and BlueFlame copies alternate
/// halves; a WQE that does not fit writes nothing and does not toggle.
#[test]
fn shared_blueflame_alternates() {
    let mem = Mem::new(8);
    // SAFETY: the 512 bytes at 0x800 of the fake UAR page are live for the
    // test and written only through this register.
    let reg = unsafe {
        crate::mmio::Register::new(
            NonNull::new(mem.uar.cast::<u8>().add(BF_OFF)).expect("uar"),
            2 * BF_SIZE as usize,
        )
    };
    let bf = SharedBlueFlame::new(reg, BF_SIZE as usize, false).expect("bf");
    assert_eq!(bf.doorbell(*b"ABCDEFGH"), 0);
    let wqe = [Wqebb([0x11; 64]), Wqebb([0x22; 64])];
    assert_eq!(bf.blueflame(&wqe, 5), Some(BF_SIZE as usize));
    assert_eq!(bf.blueflame(&wqe, 17), None);
    assert_eq!(bf.offset(), 0);
    let uar = mem.uar();
    assert_eq!(&uar[BF_OFF..BF_OFF + 8], b"ABCDEFGH");
    let second = BF_OFF + BF_SIZE as usize;
    assert!(uar[second..second + 64].iter().all(|&b| b == 0x11));
    assert!(uar[second + 64..second + 128].iter().all(|&b| b == 0x22));
    // A register too short for two halves is refused.
    // SAFETY: as above (not written).
    let short = unsafe {
        crate::mmio::Register::new(
            NonNull::new(mem.uar.cast::<u8>().add(BF_OFF)).expect("uar"),
            BF_SIZE as usize,
        )
    };
    assert!(SharedBlueFlame::new(short, BF_SIZE as usize, false).is_none());
}

/// One queue has one owner that may move to another thread (DESIGN: `Send`,
/// not `Sync`): the doorbell record is a `Sync` atomic word and the register
/// is `Send`.
#[test]
fn send_queue_is_send() {
    fn assert_send<T: Send>() {}
    assert_send::<SendQueue<'static, DoorbellOnly>>();
    assert_send::<SendQueue<'static, BlueFlamePreferred>>();
    assert_send::<crate::cq::Cq>();
}

/// The list posts (`post_rdma_write_list`, `post_rdma_read_list`,
/// `post_send_list`) write the bytes, shadow entries, doorbell record and
/// register of the builder posting the same work requests as one batch
/// (aborted at the first error: a list is all or nothing), on every QP
/// type, with and without SGEs and `sig_all`, through full queues, forced
/// CQEs inside a list (fast path), inherited fences (full path), zero-length
/// SGEs, signalled elements and lists that wrap the ring end.
#[test]
fn list_posts_match_the_builder() {
    use QpType::*;
    fn wr_of(round: u64, k: u64) -> (RdmaWr, bool, bool, bool) {
        let i = round * 16 + k;
        let (sig, fence, sol) = (i % 7 == 3, i % 11 == 5, i % 5 == 1);
        let mut f = SendFlags::NONE;
        if sig {
            f = f | SendFlags::SIGNALED;
        }
        if fence {
            f = f | SendFlags::FENCE;
        }
        if sol {
            f = f | SendFlags::SOLICITED;
        }
        let len = if i % 9 == 4 {
            0
        } else {
            1 + (i as u32 % 5) * 40
        };
        let sge = Sge::new(0x4321 + k as u32, 0x2_0000_0000 + 64 * i, len);
        (
            RdmaWr::new(i, 0xabcd + k as u32, 0x7000 + 64 * i, sge, f),
            sig,
            fence,
            sol,
        )
    }
    fn post(
        sq: &mut SendQueue<'_, BlueFlamePreferred>,
        list: bool,
        op: u64,
        wrs: &[RdmaWr],
    ) -> Result<(), PostError> {
        if list {
            return match op {
                0 => sq.post_rdma_write_list(wrs),
                1 => sq.post_rdma_read_list(wrs),
                _ => {
                    let s: Vec<SendWr> = wrs
                        .iter()
                        .map(|w| SendWr::new(w.wr_id, w.sge, w.flags))
                        .collect();
                    sq.post_send_list(&s)
                }
            };
        }
        let mut b = sq.start();
        for w in wrs {
            let r = match op {
                0 => b.rdma_write(w.wr_id, w.rkey, w.remote_addr),
                1 => b.rdma_read(w.wr_id, w.rkey, w.remote_addr),
                _ => b.send(w.wr_id),
            }
            .and_then(|x| {
                let x = x.signaled_if(w.flags.contains(SendFlags::SIGNALED));
                let x = if w.flags.contains(SendFlags::FENCE) {
                    x.fence()
                } else {
                    x
                };
                let x = if w.flags.contains(SendFlags::SOLICITED) {
                    x.solicited()
                } else {
                    x
                };
                x.sge_list(&[w.sge])
            });
            if let Err(e) = r {
                b.abort();
                return Err(e);
            }
        }
        b.complete();
        Ok(())
    }
    // (Miri: fewer configurations and rounds, the same paths.)
    let (qps, everys, rounds): (&[QpType], &[u32], u64) = if cfg!(miri) {
        (&[Rc, Ud], &[3], 14)
    } else {
        (&[Rc, Uc, Ud, Xrc, RawPacket], &[0, 3, 8], 40)
    };
    let mut direct_ok = 0;
    for &qp in qps {
        for max_sge in [0u32, 4] {
            for sig_all in [false, true] {
                for &signal_every in everys {
                    let run = |list: bool, vec: bool| {
                        let mem = Mem::new(16);
                        let mut lent = Lent::new(16);
                        let mut c = cfg(qp);
                        c.max_sge = max_sge;
                        c.sig_all = sig_all;
                        c.signal_every = signal_every;
                        c.start_pi = 0xfff5; // the 16-bit counter wraps too
                        let mut sq = queue::<BlueFlamePreferred>(&mem, &mut lent, c);
                        set_vector(&mut sq, vec);
                        let mut out = Vec::new();
                        for round in 0..rounds {
                            if round % 6 == 2 {
                                let mut b = sq.start();
                                let _ = b.local_inv(1000 + round, 0x77).and_then(|w| w.post());
                                b.complete();
                            }
                            let n = [1u64, 5, 0, 12, 3, 17, 2, 8][(round % 8) as usize];
                            let wrs: Vec<RdmaWr> = (0..n).map(|k| wr_of(round, k).0).collect();
                            let r = post(&mut sq, list, round % 3, &wrs);
                            out.push((
                                r,
                                sq.producer(),
                                sq.fm_cache(),
                                sq.bf_offset(),
                                mem.snapshot(),
                            ));
                            // Retire everything now and then (and let the
                            // queue run full in between).
                            if round % 3 == 2 && sq.outstanding() > 0 {
                                let last = (0..16)
                                    .filter_map(|s| sq.shadow(s).copied())
                                    .filter(|e| e.wqebbs() != 0)
                                    .map(|e| e.index())
                                    .filter(|&x| {
                                        u32::from(x.wrapping_sub(sq.consumer() as u16))
                                            < sq.outstanding()
                                    })
                                    .max_by_key(|&x| x.wrapping_sub(sq.consumer() as u16));
                                if let Some(x) = last {
                                    sq.retire(x).unwrap();
                                }
                            }
                            // Single posts in between (they share the
                            // fast-path credits).
                            if round % 4 == 1 {
                                let (w, ..) = wr_of(round, 99);
                                let _ = if list {
                                    sq.post_rdma_write(
                                        w.wr_id,
                                        w.rkey,
                                        w.remote_addr,
                                        w.sge,
                                        w.flags,
                                    )
                                } else {
                                    let mut b = sq.start();
                                    let r = b.rdma_write_sge(
                                        w.wr_id,
                                        w.rkey,
                                        w.remote_addr,
                                        w.sge,
                                        w.flags,
                                    );
                                    b.complete();
                                    r
                                };
                            }
                        }
                        // The shadow of the WQEs in flight (an aborted batch
                        // may leave entries past the producer; a list writes
                        // none when it fails).
                        let shadow: Vec<_> = (0..sq.outstanding())
                            .map(|d| {
                                *sq.shadow((sq.consumer().wrapping_add(d) % 16) as usize)
                                    .unwrap()
                            })
                            .collect();
                        (out, shadow)
                    };
                    let builder = run(false, false);
                    if builder.0.iter().any(|(r, ..)| r.is_ok()) && matches!(qp, Rc | Uc) {
                        direct_ok += 1;
                    }
                    for vec in vector_paths() {
                        assert!(
                            run(true, vec) == builder,
                            "{qp:?}, max_sge {max_sge}, sig_all {sig_all}, \
                             signal_every {signal_every}, vector {vec}"
                        );
                    }
                }
            }
        }
    }
    assert!(
        direct_ok >= if cfg!(miri) { 4 } else { 12 },
        "vacuous: {direct_ok}"
    );
}

/// A list post that fails writes nothing: not the ring, the doorbell
/// record, the register, the shadow or the counters, wherever the element
/// that fails is.
#[test]
fn failed_list_posts_leave_everything_untouched() {
    let ok = |i: u64| {
        RdmaWr::new(
            i,
            1,
            0x1000 * i,
            Sge::new(2, 0x2000 * i, 64),
            SendFlags::NONE,
        )
    };
    for at in [0usize, 3, 7] {
        // An element the queue refuses (no SGEs allowed: only a
        // zero-length SGE, which is skipped, passes).
        let mem = Mem::new(8);
        let mut lent = Lent::new(8);
        let mut c = cfg(QpType::Rc);
        c.max_sge = 0;
        let before = mem.snapshot();
        let mut sq = queue::<BlueFlamePreferred>(&mem, &mut lent, c);
        let mut wrs: Vec<RdmaWr> = (0..8)
            .map(|i| RdmaWr::new(i, 1, 2, Sge::new(3, 4, 0), SendFlags::SIGNALED))
            .collect();
        wrs[at].sge.length = 64;
        assert_eq!(sq.post_rdma_write_list(&wrs), Err(PostError::TooManySges));
        assert_eq!(mem.snapshot(), before);
        assert_eq!((sq.producer(), sq.bf_offset(), sq.outstanding()), (0, 0, 0));
        assert!((0..8).all(|s| *sq.shadow(s).unwrap() == SqShadowEntry::EMPTY));

        // No room for the element at `at` (a partly full queue).
        let mem = Mem::new(8);
        let mut lent = Lent::new(8);
        let mut sq = queue::<DoorbellOnly>(&mem, &mut lent, cfg(QpType::Rc));
        let used = 8 - at as u32;
        let first: Vec<RdmaWr> = (0..u64::from(used)).map(ok).collect();
        sq.post_rdma_write_list(&first).unwrap();
        let before = mem.snapshot();
        let shadow: Vec<_> = (0..8).map(|s| *sq.shadow(s).unwrap()).collect();
        let wrs: Vec<RdmaWr> = (100..100 + at as u64 + 1).map(ok).collect();
        assert_eq!(sq.post_rdma_write_list(&wrs), Err(PostError::QueueFull));
        assert_eq!(mem.snapshot(), before);
        assert_eq!((sq.producer(), sq.outstanding()), (used, used));
        assert!((0..8).all(|s| *sq.shadow(s).unwrap() == shadow[s]));
        // The same list fits once the queue is retired.
        sq.retire((used - 1) as u16).unwrap();
        sq.post_rdma_write_list(&wrs).unwrap();
    }
    // Operations the QP refuses, and queues the direct paths do not serve.
    let wrs: Vec<RdmaWr> = (0..4).map(ok).collect();
    for (qp, op) in [
        (QpType::Uc, 1),
        (QpType::Ud, 0),
        (QpType::Ud, 2),
        (QpType::RawPacket, 2),
        (QpType::Xrc, 0),
    ] {
        let mem = Mem::new(8);
        let mut lent = Lent::new(8);
        let before = mem.snapshot();
        let mut sq = queue::<BlueFlamePreferred>(&mem, &mut lent, cfg(qp));
        let r = match op {
            0 => sq.post_rdma_write_list(&wrs),
            1 => sq.post_rdma_read_list(&wrs),
            _ => {
                let s: Vec<SendWr> = wrs
                    .iter()
                    .map(|w| SendWr::new(w.wr_id, w.sge, w.flags))
                    .collect();
                sq.post_send_list(&s)
            }
        };
        assert!(r.is_err(), "{qp:?} {op}");
        assert_eq!(mem.snapshot(), before);
        assert_eq!(sq.producer(), 0);
    }
    // An empty list posts nothing and rings no doorbell.
    let mem = Mem::new(8);
    let mut lent = Lent::new(8);
    let before = mem.snapshot();
    let mut sq = queue::<BlueFlamePreferred>(&mem, &mut lent, cfg(QpType::Rc));
    assert_eq!(sq.post_rdma_write_list(&[]), Ok(()));
    assert_eq!(mem.snapshot(), before);
    assert_eq!((sq.producer(), sq.bf_offset()), (0, 0));
}

/// A list writes what one-call posts of its elements, one after the
/// other, write into the ring and the shadow; only the doorbell differs
/// (one for the list, written after its last WQE). Lists that wrap the ring
/// end, cross a multiple of 256 WQEBBs (the WQE index's low byte carries),
/// meet several forced CQEs, and signalled or zero-length elements, with
/// and without AVX2.
#[test]
fn list_equals_one_call_posts_in_the_ring() {
    // (ring, start_pi, signal_every, list length)
    let cases: &[(usize, u32, u32, u64)] = if cfg!(miri) {
        &[(64, 50, 10, 40), (512, 0x1_00f0, 0, 40)]
    } else {
        &[
            (64, 50, 10, 40),
            (64, 0, 0, 64),
            (64, 63, 3, 33),
            (512, 0x1_00f0, 0, 40),
            (512, 0xffe0, 100, 300),
            (1024, 0x3f0, 7, 512),
        ]
    };
    for &(n_ring, start_pi, signal_every, n) in cases {
        for zero_len in [false, true] {
            let run = |list: bool, vec: bool| {
                let mem = Mem::new(n_ring);
                let mut lent = Lent::new(n_ring);
                let mut c = cfg(QpType::Rc);
                c.signal_every = signal_every;
                c.start_pi = start_pi;
                let mut sq = queue::<DoorbellOnly>(&mem, &mut lent, c);
                set_vector(&mut sq, vec);
                let wrs: Vec<RdmaWr> = (0..n)
                    .map(|i| {
                        let f = if i % 13 == 12 {
                            SendFlags::SIGNALED
                        } else {
                            SendFlags::NONE
                        };
                        let len = if zero_len && i % 17 == 5 {
                            0
                        } else {
                            64 + i as u32
                        };
                        RdmaWr::new(
                            i,
                            0xab00_0007 + i as u32,
                            0x9000_0000_0000 + i,
                            Sge::new(8, 0x100 * i, len),
                            f,
                        )
                    })
                    .collect();
                if list {
                    sq.post_rdma_write_list(&wrs).unwrap();
                } else {
                    for w in &wrs {
                        sq.post_rdma_write(w.wr_id, w.rkey, w.remote_addr, w.sge, w.flags)
                            .unwrap();
                    }
                }
                let shadow: Vec<_> = (0..n_ring).map(|s| *sq.shadow(s).unwrap()).collect();
                (
                    mem.ring(),
                    mem.dbrec(),
                    shadow,
                    sq.producer(),
                    sq.unsignaled(),
                )
            };
            let one_by_one = run(false, false);
            for vec in vector_paths() {
                assert!(
                    run(true, vec) == one_by_one,
                    "ring {n_ring}, start {start_pi:#x}, signal_every {signal_every}, \
                     {n} WRs, zero-length {zero_len}, vector {vec}"
                );
            }
        }
    }
}

/// The vector paths the list tests run: scalar always, and AVX2 when the
/// CPU has it (under Miri only when the crate is compiled with it).
fn vector_paths() -> Vec<bool> {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2", not(loom)))]
    let has_avx2 = avx2().is_some();
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2", not(loom))))]
    let has_avx2 = false;
    if has_avx2 {
        vec![false, true]
    } else {
        vec![false]
    }
}

/// The AVX2 proof, if this CPU has AVX2.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2", not(loom)))]
fn avx2() -> Option<crate::cpu::Avx2> {
    use crate::cpu::Avx2;
    if Avx2::compile_time().is_some() {
        return Avx2::compile_time();
    }
    if cfg!(miri) || !std::is_x86_feature_detected!("avx2") {
        return None;
    }
    // SAFETY: the CPU running the test has AVX2 (just detected).
    Some(unsafe { Avx2::new_unchecked() })
}

/// Lets the list posts of `sq` use AVX2 (`vec`, when the CPU has it) or not.
fn set_vector<P: DoorbellPolicy, Q: QpKind>(sq: &mut SendQueue<'_, P, Q>, vec: bool) {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2", not(loom)))]
    sq.set_avx2(if vec { avx2() } else { None });
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2", not(loom))))]
    let _ = (sq, vec);
}
