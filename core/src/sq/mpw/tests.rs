use core::ptr::NonNull;
use std::boxed::Box;
use std::format;
use std::string::String;
use std::vec;
use std::vec::Vec;

use super::*;
use crate::mmio::DeviceWord;
use crate::sq::{
    BlueFlameInline, BlueFlamePreferred, DoorbellOnly, RawPacketQp, SqConfig, SqRawParts,
};

const UAR: usize = 4096;
const QPN: u32 = 0xd0e;
const LKEY: u32 = 0xc0ffee;

struct Mem {
    ring: *mut [Wqebb],
    dbrec: *mut [u32; 2],
    uar: *mut [u64; UAR / 8],
    wqe_cnt: usize,
    /// BlueFlame halves of this many bytes (0: none).
    bf_buf_size: u32,
}

impl Mem {
    fn new(wqe_cnt: usize) -> Self {
        Mem {
            ring: Box::into_raw(vec![Wqebb([0xa5; 64]); wqe_cnt].into_boxed_slice()),
            dbrec: Box::into_raw(Box::new([0xa5a5_a5a5; 2])),
            uar: Box::into_raw(Box::new([0x3c3c_3c3c_3c3c_3c3c; UAR / 8])),
            wqe_cnt,
            bf_buf_size: 0,
        }
    }
    /// With two 256-byte BlueFlame halves at the start of the UAR.
    fn with_bf(wqe_cnt: usize) -> Self {
        let mut mem = Mem::new(wqe_cnt);
        mem.bf_buf_size = 256;
        mem
    }
    fn read(p: *const u8, len: usize) -> Vec<u8> {
        let mut v = vec![0u8; len];
        // SAFETY: `p` points into a live allocation of this `Mem` of at
        // least `len` bytes; the queue is not running concurrently.
        unsafe { core::ptr::copy_nonoverlapping(p, v.as_mut_ptr(), len) };
        v
    }
    fn ring(&self) -> Vec<u8> {
        Self::read(self.ring.cast::<u8>(), self.wqe_cnt * 64)
    }
    fn dbrec(&self) -> u32 {
        let b = Self::read(self.dbrec.cast::<u8>(), 8);
        u32::from_be_bytes([b[4], b[5], b[6], b[7]])
    }
    fn db(&self) -> Vec<u8> {
        Self::read(self.uar.cast::<u8>(), 8)
    }
    /// The doorbell register and both BlueFlame halves.
    fn bf(&self) -> Vec<u8> {
        Self::read(self.uar.cast::<u8>(), 512)
    }
    fn raw(&self) -> SqRawParts<'_> {
        // SAFETY: the SQ word of the doorbell record is a live, aligned
        // u32 that only the queue writes while it lives.
        let dbrec = unsafe { DeviceWord::from_ptr(self.dbrec.cast::<u32>().add(1)) };
        SqRawParts {
            buf: NonNull::new(self.ring.cast::<u8>()).expect("ring"),
            wqe_cnt: self.wqe_cnt as u32,
            dbrec,
            bf_reg: NonNull::new(self.uar.cast::<u8>()).expect("uar"),
            bf_buf_size: self.bf_buf_size,
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

struct Lent {
    shadow: Vec<SqShadowEntry>,
    staging: Vec<Wqebb>,
    ids: Vec<u64>,
}

impl Lent {
    fn new(wqe_cnt: usize) -> Self {
        Lent {
            shadow: vec![SqShadowEntry::EMPTY; wqe_cnt],
            staging: vec![Wqebb::ZERO; 16],
            ids: vec![0; 1024],
        }
    }
}

type Q<'a, M> = TxQueue<'a, DoorbellOnly, RawPacketQp, M>;

fn sq<'a>(
    mem: &'a Mem,
    shadow: &'a mut [SqShadowEntry],
    staging: &'a mut [Wqebb],
    start_pi: u32,
    min_inline: u8,
) -> SendQueue<'a, DoorbellOnly, RawPacketQp> {
    sq_as(mem, shadow, staging, start_pi, min_inline)
}

fn sq_as<'a, P: DoorbellPolicy>(
    mem: &'a Mem,
    shadow: &'a mut [SqShadowEntry],
    staging: &'a mut [Wqebb],
    start_pi: u32,
    min_inline: u8,
) -> SendQueue<'a, P, RawPacketQp> {
    let mut c = SqConfig::new(QpType::RawPacket, QPN, 256, 4);
    c.start_pi = start_pi;
    c.eth_min_inline = min_inline;
    c.signal_every = 0;
    // SAFETY: `mem` outlives the queue and nothing else touches it.
    unsafe { SendQueue::new_typed(mem.raw(), c, shadow, staging) }.expect("send queue")
}

fn txq<'a, M: TxMode>(mem: &'a Mem, lent: &'a mut Lent, start_pi: u32, cfg: TxConfig) -> Q<'a, M> {
    let Lent {
        shadow,
        staging,
        ids,
    } = lent;
    TxQueue::new(sq(mem, shadow, staging, start_pi, 0), ids, cfg).expect("tx queue")
}

/// A Tx queue of doorbell policy `P` over `mem` and `lent` (its id ring
/// cut to `ids_len`), given the AVX2 proof `avx2` if any.
fn txq_as<'a, P: DoorbellPolicy, M: TxMode>(
    mem: &'a Mem,
    lent: &'a mut Lent,
    ids_len: usize,
    (start_pi, min_inline): (u32, u8),
    cfg: TxConfig,
    avx2: Avx2Opt,
) -> TxQueue<'a, P, RawPacketQp, M> {
    lent.ids.truncate(ids_len);
    let Lent {
        shadow,
        staging,
        ids,
    } = lent;
    #[cfg_attr(
        not(all(target_arch = "x86_64", target_feature = "sse2")),
        expect(unused_mut, reason = "no AVX2 proof on this target")
    )]
    let mut q = TxQueue::new(sq_as(mem, shadow, staging, start_pi, min_inline), ids, cfg)
        .expect("tx queue");
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    if avx2.is_some() {
        q.set_avx2(avx2);
    }
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
    let _ = avx2;
    q
}

/// A frame whose bytes start with `seed`.
fn frame(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| seed.wrapping_add(i as u8)).collect()
}

/// One decoded WQE of the ring.
#[derive(Debug)]
struct Wqe {
    opcode: u8,
    opmod: u8,
    index: u16,
    ds: usize,
    ce: u8,
    eth: Vec<u8>,
    /// Inline(data) or Ptr(len, lkey, addr).
    descs: Vec<D>,
}

#[derive(Debug, PartialEq, Eq)]
enum D {
    Inline(Vec<u8>),
    Ptr(u32, u32, u64),
}

fn wqe_at(ring: &[u8], pi: u32) -> Wqe {
    let n = ring.len();
    let at = |i: usize| ring[((pi as usize) * 64 + i) % n];
    let bytes: Vec<u8> = (0..64).map(at).collect();
    let ds = (bytes[7] & 0x3f) as usize;
    let w: Vec<u8> = (0..ds * 16).map(at).collect();
    let mut descs = Vec::new();
    // Sessions: no inline header; a SEND may carry one (unless bytes
    // 12-15 of its Ethernet segment are a VLAN-insert request).
    let hdr = usize::from(u16::from_be_bytes([w[28], w[29]]));
    let mut pos = if bytes[3] == 0x0a && w[28] & 0x80 == 0 {
        16 + 16 * (1 + hdr.saturating_sub(2).div_ceil(16))
    } else {
        32
    };
    while pos < ds * 16 {
        let bc = u32::from_be_bytes([w[pos], w[pos + 1], w[pos + 2], w[pos + 3]]);
        if bc & 0x8000_0000 != 0 {
            let len = (bc & 0x7fff_ffff) as usize;
            descs.push(D::Inline(w[pos + 4..pos + 4 + len].to_vec()));
            pos += (4 + len).div_ceil(16) * 16;
        } else {
            let lkey = u32::from_be_bytes([w[pos + 4], w[pos + 5], w[pos + 6], w[pos + 7]]);
            let addr = u64::from_be_bytes(w[pos + 8..pos + 16].try_into().expect("8"));
            descs.push(D::Ptr(bc, lkey, addr));
            pos += 16;
        }
    }
    Wqe {
        opcode: bytes[3],
        opmod: bytes[0],
        index: u16::from_be_bytes([bytes[1], bytes[2]]),
        ds,
        ce: (bytes[11] >> 2) & 3,
        eth: bytes[16..32].to_vec(),
        descs,
    }
}

/// Every WQE from `from` to the producer.
fn wqes(mem: &Mem, from: u32, to: u32) -> Vec<Wqe> {
    let ring = mem.ring();
    let mut out = Vec::new();
    let mut pi = from;
    while pi != to {
        let w = wqe_at(&ring, pi);
        pi = pi.wrapping_add(w.ds.div_ceil(4) as u32);
        out.push(w);
    }
    out
}

fn closes(s: &TxStats, r: CloseReason) -> u64 {
    s.closes[r as usize]
}

#[test]
fn mixed_inline_and_pointer_in_one_session() {
    let mem = Mem::new(64);
    let mut lent = Lent::new(64);
    let mut q: Q<'_, Empw> = txq(&mem, &mut lent, 0, TxConfig::new());
    let small = frame(60, 1);
    let big = frame(600, 2);
    let mid = frame(200, 3);
    let pkts = [
        Packet::frame(10, LKEY, &small),
        Packet::frame(11, LKEY, &big),
        Packet::ptr(12, LKEY, 0x1000, 100),
        Packet::frame(13, LKEY, &mid),
    ];
    assert_eq!(q.tx_burst(&pkts), 4);
    let w = wqes(&mem, 0, q.send_queue().producer());
    assert_eq!(w.len(), 1);
    let s = &w[0];
    assert_eq!((s.opcode, s.opmod, s.index), (0x29, 0, 0));
    assert_eq!(s.eth, vec![0; 16], "title: no inline header, no offload");
    assert_eq!(
        s.descs,
        vec![
            D::Inline(small.clone()),
            D::Ptr(600, LKEY, big.as_ptr() as u64),
            D::Ptr(100, LKEY, 0x1000),
            D::Inline(mid.clone()),
        ]
    );
    // 2 + ceil(64/16) + 1 + 1 + ceil(204/16)
    assert_eq!(s.ds, 2 + 4 + 1 + 1 + 13);
    assert_eq!(s.ce, 2, "one CQE per session by default");
    assert_eq!(mem.dbrec(), q.send_queue().producer());
    assert_eq!(
        &mem.db()[..8],
        &mem.ring()[..8],
        "doorbell = first 8 bytes of the last WQE"
    );
    assert_eq!(closes(q.stats(), CloseReason::Complete), 1);
}

#[test]
fn each_close_reason() {
    let f64b = frame(64, 7);
    // DS limit: 63-DS sessions of pointer packets hold 61.
    {
        let mem = Mem::new(256);
        let mut lent = Lent::new(256);
        let cfg = TxConfig {
            max_packets: 100,
            inline_max: 0,
            ..TxConfig::new()
        };
        let mut q: Q<'_, Empw> = txq(&mem, &mut lent, 0, cfg);
        let pkts: Vec<_> = (0..62)
            .map(|i| Packet::ptr(i, LKEY, 0x1000 * i, 64))
            .collect();
        assert_eq!(q.tx_burst(&pkts), 62);
        let w = wqes(&mem, 0, q.send_queue().producer());
        assert_eq!(
            w.iter().map(|w| w.descs.len()).collect::<Vec<_>>(),
            vec![61, 1]
        );
        assert_eq!(w[0].ds, 63);
        assert_eq!(closes(q.stats(), CloseReason::DsLimit), 1);
    }
    // WQE size: DPDK's 960-byte sessions of 64-byte inline frames hold 11.
    {
        let mem = Mem::new(256);
        let mut lent = Lent::new(256);
        let mut q: Q<'_, Empw> = txq(&mem, &mut lent, 0, TxConfig::dpdk_empw(268, 290, 32));
        let pkts: Vec<_> = (0..12).map(|i| Packet::frame(i, LKEY, &f64b)).collect();
        assert_eq!(q.tx_burst(&pkts), 12);
        let w = wqes(&mem, 0, q.send_queue().producer());
        assert_eq!(
            w.iter().map(|w| w.descs.len()).collect::<Vec<_>>(),
            vec![11, 1]
        );
        assert_eq!(closes(q.stats(), CloseReason::WqeSize), 1);
    }
    // Maximum packets.
    {
        let mem = Mem::new(256);
        let mut lent = Lent::new(256);
        let cfg = TxConfig {
            inline_max: 0,
            ..TxConfig::new()
        };
        let mut q: Q<'_, Empw> = txq(&mem, &mut lent, 0, cfg);
        let pkts: Vec<_> = (0..33)
            .map(|i| Packet::ptr(i, LKEY, 0x1000 * i, 64))
            .collect();
        assert_eq!(q.tx_burst(&pkts), 33);
        let w = wqes(&mem, 0, q.send_queue().producer());
        assert_eq!(
            w.iter().map(|w| w.descs.len()).collect::<Vec<_>>(),
            vec![32, 1]
        );
        assert_eq!(closes(q.stats(), CloseReason::MaxPackets), 1);
    }
    // Maximum inline bytes.
    {
        let mem = Mem::new(256);
        let mut lent = Lent::new(256);
        let cfg = TxConfig {
            max_inline_bytes: 200,
            ..TxConfig::new()
        };
        let mut q: Q<'_, Empw> = txq(&mem, &mut lent, 0, cfg);
        let pkts: Vec<_> = (0..4).map(|i| Packet::frame(i, LKEY, &f64b)).collect();
        assert_eq!(q.tx_burst(&pkts), 4);
        let w = wqes(&mem, 0, q.send_queue().producer());
        assert_eq!(
            w.iter().map(|w| w.descs.len()).collect::<Vec<_>>(),
            vec![3, 1]
        );
        assert_eq!(closes(q.stats(), CloseReason::MaxInlineBytes), 1);
    }
    // Offload mismatch, then a packet a session cannot carry (two
    // segments), then a VLAN frame too long to inline.
    {
        let mem = Mem::new(256);
        let mut lent = Lent::new(256);
        let mut q: Q<'_, Empw> = txq(&mem, &mut lent, 0, TxConfig::new());
        let more = [Sge::new(LKEY, 0x9000, 30)];
        let big = frame(400, 9);
        let pkts = [
            Packet::frame(0, LKEY, &f64b),
            Packet::frame(1, LKEY, &f64b).with_csum(),
            Packet::frame(2, LKEY, &f64b).with_csum(),
            Packet::frame(3, LKEY, &f64b)
                .with_csum()
                .with_segments(&more),
            Packet::frame(4, LKEY, &f64b).with_csum(),
            Packet::frame(5, LKEY, &big).with_csum().with_vlan(0x123),
        ];
        assert_eq!(q.tx_burst(&pkts), 6);
        let w = wqes(&mem, 0, q.send_queue().producer());
        let shape: Vec<_> = w.iter().map(|w| (w.opcode, w.descs.len())).collect();
        assert_eq!(
            shape,
            vec![(0x29, 1), (0x29, 2), (0x0a, 2), (0x29, 1), (0x0a, 1)]
        );
        assert_eq!(w[0].eth[4], 0);
        assert_eq!(w[1].eth[4], 0xc0, "checksum flags in the title");
        // The VLAN frame: a SEND with the VLAN-insert request.
        assert_eq!(&w[4].eth[12..16], &[0x80, 0x00, 0x01, 0x23]);
        let s = q.stats();
        assert_eq!(closes(s, CloseReason::OffloadMismatch), 1);
        assert_eq!(closes(s, CloseReason::Unsupported), 2);
        assert_eq!(s.single_wqes, 2);
    }
    // A VLAN frame short enough is inlined with its tag, in the session.
    {
        let mem = Mem::new(64);
        let mut lent = Lent::new(64);
        let mut q: Q<'_, Empw> = txq(&mem, &mut lent, 0, TxConfig::new());
        let pkts = [
            Packet::frame(0, LKEY, &f64b),
            Packet::frame(1, LKEY, &f64b).with_vlan(0x0abc),
        ];
        assert_eq!(q.tx_burst(&pkts), 2);
        let w = wqes(&mem, 0, q.send_queue().producer());
        assert_eq!(w.len(), 1);
        let mut tagged = f64b[..12].to_vec();
        tagged.extend_from_slice(&[0x81, 0x00, 0x0a, 0xbc]);
        tagged.extend_from_slice(&f64b[12..]);
        assert_eq!(w[0].descs[1], D::Inline(tagged));
    }
}

#[test]
fn ring_wrap_inside_a_session() {
    let mem = Mem::new(64);
    let mut lent = Lent::new(64);
    let mut q: Q<'_, Empw> = txq(&mem, &mut lent, 62, TxConfig::new());
    let a = frame(100, 0x10);
    let b = frame(150, 0x20);
    let pkts = [
        Packet::frame(1, LKEY, &a),
        Packet::ptr(2, LKEY, 0x4000, 1500),
        Packet::frame(3, LKEY, &b),
    ];
    assert_eq!(q.tx_burst(&pkts), 3);
    let end = q.send_queue().producer();
    let w = wqes(&mem, 62, end);
    assert_eq!(w.len(), 1);
    assert!(end > 64, "the session crosses the ring end");
    assert_eq!(w[0].index, 62);
    assert_eq!(
        w[0].descs,
        vec![D::Inline(a), D::Ptr(1500, LKEY, 0x4000), D::Inline(b)]
    );
    assert_eq!(mem.dbrec(), end & 0xffff);
    // The completion names the session: every packet comes back.
    let mut got = Vec::new();
    assert_eq!(q.retire(62, |id| got.push(id)), Ok(3));
    assert_eq!(got, vec![1, 2, 3]);
    assert_eq!(q.send_queue().consumer(), end);
}

#[test]
fn checksum_flags_and_metadata_are_shared() {
    let mem = Mem::new(64);
    let mut lent = Lent::new(64);
    let mut q: Q<'_, Empw> = txq(&mem, &mut lent, 0, TxConfig::new());
    let f = frame(80, 3);
    let off = TxOffload {
        cs_flags: EthCsFlags::new().with_l3_csum(true).with_l4_csum(true),
        swp_offsets: [1, 2, 3, 4],
        swp_flags: SwpFlags::new().with_outer_l4_udp(true),
        metadata: 0xdead_beef,
    };
    let pkts: Vec<_> = (0..3)
        .map(|i| Packet::frame(i, LKEY, &f).with_offload(off))
        .collect();
    assert_eq!(q.tx_burst(&pkts), 3);
    let w = wqes(&mem, 0, q.send_queue().producer());
    assert_eq!(w.len(), 1);
    assert_eq!(
        w[0].eth,
        vec![1, 2, 3, 4, 0xc0, 0x20, 0, 0, 0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 0]
    );
}

#[test]
fn legacy_mpw_equal_lengths() {
    let mem = Mem::new(64);
    let mut lent = Lent::new(64);
    let mut q: Q<'_, LegacyMpw> = txq(&mem, &mut lent, 0, TxConfig::dpdk_mpw(268, 290, 32));
    let a: Vec<Vec<u8>> = (0..7).map(|i| frame(64, i * 16)).collect();
    let c = frame(100, 0x77);
    let mut pkts: Vec<_> = a
        .iter()
        .enumerate()
        .map(|(i, f)| Packet::frame(i as u64, LKEY, f))
        .collect();
    pkts.push(Packet::frame(7, LKEY, &c));
    pkts.push(Packet::ptr(8, LKEY, 0x5000, 100));
    pkts.push(Packet::ptr(9, LKEY, 0x6000, 100));
    assert_eq!(q.tx_burst(&pkts), 10);
    let w = wqes(&mem, 0, q.send_queue().producer());
    let shape: Vec<_> = w
        .iter()
        .map(|w| (w.opcode, w.opmod, w.eth[6], w.eth[7], w.descs.len()))
        .collect();
    // 4 x 64 B inline (268-byte inline room), 3 x 64 B, 1 x 100 B
    // inline, then a pointer session of the two 100-byte pointers.
    assert_eq!(
        shape,
        vec![
            (0x0e, 1, 0, 64, 1),
            (0x0e, 1, 0, 64, 1),
            (0x0e, 1, 0, 100, 1),
            (0x0e, 1, 0, 100, 2)
        ]
    );
    assert_eq!(w[0].descs, vec![D::Inline(a[..4].concat())]);
    assert_eq!(w[0].ds, 2 + 17);
    assert_eq!(w[1].descs, vec![D::Inline(a[4..].concat())]);
    assert_eq!(
        w[3].descs,
        vec![D::Ptr(100, LKEY, 0x5000), D::Ptr(100, LKEY, 0x6000)]
    );
    let s = q.stats();
    assert_eq!(closes(s, CloseReason::MaxInlineBytes), 1);
    assert_eq!(closes(s, CloseReason::LengthMismatch), 1);
    assert_eq!(closes(s, CloseReason::DescriptorKind), 1);
    // At most six packets per session.
    let pkts: Vec<_> = (0..7)
        .map(|i| Packet::ptr(i, LKEY, 0x1000 * i, 64))
        .collect();
    let from = q.send_queue().producer();
    assert_eq!(q.tx_burst(&pkts), 7);
    let w = wqes(&mem, from, q.send_queue().producer());
    assert_eq!(
        w.iter().map(|w| w.descs.len()).collect::<Vec<_>>(),
        vec![6, 1]
    );
    assert_eq!(closes(q.stats(), CloseReason::MaxPackets), 1);
}

#[test]
fn fallback_without_capabilities() {
    assert_eq!(TxKind::from_caps(true, true), TxKind::Empw);
    assert_eq!(TxKind::from_caps(false, true), TxKind::LegacyMpw);
    assert_eq!(TxKind::from_caps(false, false), TxKind::Single);
    let mem = Mem::new(64);
    let mut lent = Lent::new(64);
    let Lent {
        shadow,
        staging,
        ids,
    } = &mut lent;
    let sq = sq(&mem, shadow, staging, 0, 18);
    let mut q = AnyTxQueue::from_caps(sq, ids, TxConfig::new(), false, false).expect("tx");
    assert_eq!(q.kind(), TxKind::Single);
    let f = frame(64, 5);
    let pkts = [
        Packet::frame(1, LKEY, &f),
        Packet::frame(2, LKEY, &f).with_csum(),
        Packet::ptr(3, LKEY, 0x1000, 64),
    ];
    // The pointer-only packet needs its L2 header inlined: refused.
    assert_eq!(q.tx_burst(&pkts), 2);
    let AnyTxQueue::Single(inner) = &q else {
        panic!("single")
    };
    let w = wqes(&mem, 0, inner.send_queue().producer());
    assert_eq!(w.len(), 2);
    for (i, w) in w.iter().enumerate() {
        assert_eq!((w.opcode, w.ds), (0x0a, 4));
        assert_eq!(&w.eth[12..14], &[0, 18], "18-byte inline L2 header");
        assert_eq!(&w.eth[14..16], &f[..2]);
        assert_eq!(w.descs, vec![D::Ptr(46, LKEY, f.as_ptr() as u64 + 18)]);
        assert_eq!(w.eth[4], if i == 1 { 0xc0 } else { 0 });
    }
    let mut got = Vec::new();
    assert_eq!(q.retire(1, |id| got.push(id)), Ok(2));
    assert_eq!(got, vec![1, 2]);
    assert_eq!(q.stats().sessions, 0);
}

#[test]
fn cqe_every_n_sessions_and_burst_end() {
    let mem = Mem::new(256);
    let mut lent = Lent::new(256);
    let cfg = TxConfig {
        max_packets: 2,
        cqe: CqePolicy::EverySessions(3),
        ..TxConfig::new()
    };
    let mut q: Q<'_, Empw> = txq(&mem, &mut lent, 0, cfg);
    let f = frame(64, 1);
    let pkts: Vec<_> = (0..12).map(|i| Packet::frame(i, LKEY, &f)).collect();
    assert_eq!(q.tx_burst(&pkts), 12);
    let w = wqes(&mem, 0, q.send_queue().producer());
    assert_eq!(
        w.iter().map(|w| w.ce).collect::<Vec<_>>(),
        vec![0, 0, 2, 0, 0, 2]
    );
    // A CQE for the third session retires six packets; a stale counter
    // or one in the middle of a WQE is refused.
    let mut got = Vec::new();
    assert_eq!(q.retire(w[2].index, |id| got.push(id)), Ok(6));
    assert_eq!(got, (0..6).collect::<Vec<_>>());
    assert!(q.retire(w[2].index, |_| {}).is_err());
    assert!(q.retire(w[3].index + 1, |_| {}).is_err());
    assert_eq!(q.packets_in_flight(), 6);

    // DPDK's rule: the burst's last WQE, once 32 pointer packets went by.
    let mem = Mem::new(256);
    let mut lent = Lent::new(256);
    let mut q: Q<'_, Empw> = txq(&mem, &mut lent, 0, TxConfig::dpdk_empw(0, 0, 0));
    let pkts: Vec<_> = (0..20)
        .map(|i| Packet::ptr(i, LKEY, 0x100 * i, 64))
        .collect();
    assert_eq!(q.tx_burst(&pkts), 20);
    assert_eq!(q.tx_burst(&pkts), 20);
    let w = wqes(&mem, 0, q.send_queue().producer());
    assert_eq!(w.iter().map(|w| w.ce).collect::<Vec<_>>(), vec![1, 2]);
    let mut n = 0;
    assert_eq!(q.retire(w[1].index, |_| n += 1), Ok(40));
}

#[test]
fn retire_refuses_a_stale_entry_in_the_middle_of_a_wqe() {
    // Only a WQE's first shadow slot is written: the others keep what an
    // earlier ring pass left there, which `retire` must not take for a
    // WQE start.
    let f = frame(64, 3);
    let pkts: Vec<_> = (0..12).map(|i| Packet::frame(i, LKEY, &f)).collect();

    // A real stale entry: counter 0 starts a WQE in the first pass and
    // is the middle of a session (slot 0 again, counter 16) in the next.
    let mem = Mem::new(16);
    let mut lent = Lent::new(16);
    let mut q: Q<'_, Empw> = txq(&mem, &mut lent, 0, TxConfig::new());
    assert_eq!(q.tx_burst(&pkts[..3]), 3, "2 + 3 × 5 DS: 5 WQEBBs");
    assert_eq!(q.retire(0, |_| {}), Ok(3));
    assert_eq!(q.tx_burst(&pkts), 12, "62 DS: WQEBBs 5..21, across the end");
    assert_eq!(q.send_queue().producer(), 21);
    assert_ne!(q.send_queue().shadow(0).map(|e| e.wqebbs()), Some(0));
    assert_eq!(
        q.retire(16, |_| panic!("nothing retired")),
        Err(RetireError::NotWqeStart { wqe_counter: 16 })
    );
    assert_eq!((q.send_queue().consumer(), q.packets_in_flight()), (5, 12));
    let mut got = Vec::new();
    assert_eq!(q.retire(5, |id| got.push(id)), Ok(12));
    assert_eq!(got, (0..12).collect::<Vec<_>>());

    // A stale entry whose 16-bit index equals the counter in flight (it
    // was written 65536 WQEBBs earlier) and whose packet counter is in
    // flight: only its tag, the full counter, tells it apart.
    let mem = Mem::new(256);
    let mut lent = Lent::new(256);
    lent.shadow[1] = tx_shadow(1u32.wrapping_sub(1 << 16), 5, 1, false);
    assert_eq!(lent.shadow[1].index(), 1);
    let mut q: Q<'_, Empw> = txq(&mem, &mut lent, 0, TxConfig::new());
    assert_eq!(q.tx_burst(&pkts), 12);
    assert_eq!(q.send_queue().producer(), 16);
    assert_eq!(
        q.retire(1, |_| panic!("nothing retired")),
        Err(RetireError::NotWqeStart { wqe_counter: 1 })
    );
    assert_eq!((q.send_queue().consumer(), q.packets_in_flight()), (0, 12));
    assert_eq!(q.retire(0, |_| {}), Ok(12));
}

#[test]
fn queue_full_stops_the_burst_and_one_doorbell_per_burst() {
    let mem = Mem::new(8);
    let mut lent = Lent::new(8);
    let cfg = TxConfig {
        inline_max: 0,
        ..TxConfig::new()
    };
    let mut q: Q<'_, Empw> = txq(&mem, &mut lent, 0, cfg);
    // 8 WQEBBs = 32 DS: 30 pointer packets in one session, then full.
    let pkts: Vec<_> = (0..40)
        .map(|i| Packet::ptr(i, LKEY, 0x100 * i, 64))
        .collect();
    assert_eq!(q.tx_burst(&pkts), 30);
    assert_eq!(q.send_queue().producer(), 8);
    assert_eq!(mem.dbrec(), 8);
    assert_eq!(q.tx_burst(&pkts), 0, "nothing fits until a CQE is retired");
    let mut n = 0;
    assert_eq!(q.retire(0, |_| n += 1), Ok(30));
    assert_eq!(q.tx_burst(&pkts[..3]), 3);
    assert_eq!(mem.dbrec(), 10, "2 + 3 DS: two WQEBBs");
    {
        // A batch never completed publishes nothing. (An empty frame: a
        // queue that never inlines takes short ones, as DPDK's pointer
        // eMPW does.)
        let mut b = q.start();
        assert_eq!(b.push(&Packet::ptr(0, LKEY, 0, 0)), Err(TxError::BadLength));
        assert_eq!(b.push(&Packet::ptr(1, LKEY, 0, 100)), Ok(()));
    }
    assert_eq!(mem.dbrec(), 10, "an abandoned batch rings nothing");
}

/// xorshift64*: the deterministic generator of the random bursts.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn pick<T: Copy>(&mut self, v: &[T]) -> T {
        v[self.below(v.len() as u64) as usize]
    }
}

/// A random frame length: mostly the minimum-size frames the burst path
/// copies with fixed moves, then every other class (short, long, too
/// short, pointer-sized).
fn random_len(rng: &mut Rng) -> usize {
    match rng.below(10) {
        0..=3 => rng.pick(&[60, 64, 64, 64]),
        4 => 32 + rng.below(33) as usize,
        5 => 19 + rng.below(13) as usize,
        6 => 65 + rng.below(240) as usize,
        7 => 300 + rng.below(1300) as usize,
        8 => rng.below(19) as usize,
        _ => rng.pick(&[19, 31, 32, 33, 63, 65, 268, 269]),
    }
}

/// `n` frames of a burst: each `same` bytes long, or of a random length
/// (`random_len`) if `None`; frame `i` filled from the seed `first + i`.
fn burst_frames(rng: &mut Rng, n: usize, same: Option<usize>, first: u64) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            let len = same.unwrap_or_else(|| random_len(rng));
            frame(len, (first + i as u64) as u8)
        })
        .collect()
}

/// The packets of a burst over `frames`, ids from `id0`: alike
/// (`uniform_burst`) or mixed (`random_burst`).
fn burst_packets<'d>(
    rng: &mut Rng,
    frames: &'d [Vec<u8>],
    more: &'d [Sge],
    uniform: bool,
    id0: u64,
) -> Vec<Packet<'d>> {
    if uniform {
        uniform_burst(rng, frames, more, id0)
    } else {
        random_burst(rng, frames, more, id0)
    }
}

/// `data` as `TxFrame`s of ids from `id0`.
fn tx_frames_of(data: &[Vec<u8>], id0: u64) -> Vec<TxFrame<'_>> {
    data.iter()
        .enumerate()
        .map(|(i, d)| TxFrame::new(id0 + i as u64, LKEY, d))
        .collect()
}

/// A burst of random packets over `frames` (as long as the burst): mixed
/// frames and pointers, lengths, offload values, and now and then VLAN
/// insertion, more segments or TSO.
fn random_burst<'d>(
    rng: &mut Rng,
    frames: &'d [Vec<u8>],
    more: &'d [Sge],
    id0: u64,
) -> Vec<Packet<'d>> {
    let offloads = [
        TxOffload::NONE,
        TxOffload {
            cs_flags: EthCsFlags::new().with_l3_csum(true).with_l4_csum(true),
            ..TxOffload::NONE
        },
        TxOffload {
            swp_offsets: [1, 2, 3, 4],
            swp_flags: SwpFlags::new().with_outer_l4_udp(true),
            metadata: 0xdead_beef,
            ..TxOffload::NONE
        },
    ];
    let same_offload = rng.below(2) == 0;
    frames
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let id = id0 + i as u64;
            let mut p = if rng.below(5) == 0 {
                Packet::ptr(id, LKEY, 0x10_0000 + 0x1000 * i as u64, f.len() as u32)
            } else {
                Packet::frame(id, LKEY, f)
            };
            if !same_offload && rng.below(6) == 0 {
                p = p.with_offload(rng.pick(&offloads));
            }
            match rng.below(40) {
                0 | 1 => p = p.with_vlan(0x0abc),
                2 => p = p.with_segments(more),
                3 => p = p.with_tso(1000, 54),
                _ => {}
            }
            p
        })
        .collect()
}

/// A burst of alike packets over `frames`: all frames or all pointers,
/// one offload value, and (one burst in two) one odd packet somewhere:
/// another length, offload value, kind, or a VLAN, segment or TSO request.
fn uniform_burst<'d>(
    rng: &mut Rng,
    frames: &'d [Vec<u8>],
    more: &'d [Sge],
    id0: u64,
) -> Vec<Packet<'d>> {
    let ptrs = rng.below(4) == 0;
    let csum = rng.below(2) == 0;
    let odd = (rng.below(2) == 0).then(|| rng.below(frames.len().max(1) as u64) as usize);
    let odd_kind = rng.below(6);
    frames
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let id = id0 + i as u64;
            let mut p = if ptrs {
                Packet::ptr(id, LKEY, 0x10_0000 + 0x1000 * i as u64, f.len() as u32)
            } else {
                Packet::frame(id, LKEY, f)
            };
            if csum {
                p = p.with_csum();
            }
            if odd == Some(i) {
                p = match odd_kind {
                    0 => Packet::frame(id, LKEY, f.get(..f.len() - 1).unwrap_or(f)),
                    1 => p.with_offload(TxOffload {
                        metadata: 7,
                        ..p.offload()
                    }),
                    2 if ptrs => Packet::frame(id, LKEY, f),
                    2 => Packet::ptr(id, LKEY, 0x20_0000, f.len() as u32),
                    3 => p.with_vlan(0x0abc),
                    4 => p.with_segments(more),
                    _ => p.with_tso(1000, 54),
                };
            }
            p
        })
        .collect()
}

/// Everything the device or a caller can see of a queue.
fn observe<P: DoorbellPolicy, M: TxMode>(
    q: &TxQueue<'_, P, RawPacketQp, M>,
    mem: &Mem,
) -> (Vec<u8>, u32, Vec<u8>, TxStats, u32, u32, Vec<SqShadowEntry>) {
    let sq = q.send_queue();
    let shadow = (0..sq.wqe_cnt() as usize)
        .map(|i| *sq.shadow(i).expect("slot"))
        .collect();
    (
        mem.ring(),
        mem.dbrec(),
        mem.bf(),
        *q.stats(),
        sq.producer(),
        q.packets_in_flight(),
        shadow,
    )
}

/// The burst path ([`TxQueue::tx_burst`]) and [`TxBatch::push`] packet by
/// packet produce the same ring bytes, doorbells, shadow, counters and
/// completions, on random bursts of mixed packets over random limits,
/// ring sizes and start positions (ring and id-ring wraps inside
/// sessions, full queues, refused packets), in every mode.
#[test]
fn burst_path_matches_push() {
    let cases = if cfg!(miri) { 2 } else { 300 };
    for case in 0..cases {
        compare_paths::<Empw>(case);
        compare_paths::<SingleWqe>(case);
        compare_paths::<LegacyMpw>(case);
    }
}

/// [`burst_path_matches_push`] on queues that ring with BlueFlame (the
/// last WQE copied from the staging area into the BlueFlame halves,
/// compared too).
#[test]
fn burst_path_matches_push_blueflame() {
    let cases = if cfg!(miri) { 2 } else { 200 };
    for case in 0..cases {
        compare_paths_with::<Empw, BlueFlamePreferred>(case, None);
        compare_paths_with::<SingleWqe, BlueFlamePreferred>(case, None);
        compare_paths_with::<LegacyMpw, BlueFlameInline>(case, None);
    }
}

/// [`burst_path_matches_push`] with the burst side's queue given the AVX2
/// proof (its 64-byte frames copied with AVX2), where the CPU has AVX2.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[test]
fn burst_path_matches_push_avx2() {
    if !std::is_x86_feature_detected!("avx2") {
        return;
    }
    let cases = if cfg!(miri) { 2 } else { 300 };
    for case in 0..cases {
        compare_paths_as::<Empw>(case, avx2_proof());
        compare_paths_as::<LegacyMpw>(case, avx2_proof());
        compare_paths_with::<Empw, BlueFlamePreferred>(case, avx2_proof());
    }
}

/// The AVX2 proof, the CPU having AVX2.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[expect(unsafe_code, reason = "the AVX2 proof, after detection")]
fn avx2_proof() -> Option<crate::cpu::Avx2> {
    // SAFETY: the caller detected AVX2 on this CPU (`is_x86_feature_detected`).
    Some(unsafe { crate::cpu::Avx2::new_unchecked() })
}

/// The AVX2 proof type, or nothing where there is none.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
type Avx2Opt = Option<crate::cpu::Avx2>;
/// The AVX2 proof type, or nothing where there is none.
#[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
type Avx2Opt = Option<core::convert::Infallible>;

fn compare_paths<M: TxMode>(case: u64) {
    compare_paths_as::<M>(case, None);
}

/// [`burst_path_matches_push`]'s case `case`; with `avx2`, the burst side
/// uses it (else the queues' default).
fn compare_paths_as<M: TxMode>(case: u64, avx2: Avx2Opt) {
    compare_paths_with::<M, DoorbellOnly>(case, avx2);
}

/// [`compare_paths_as`] on queues of doorbell policy `P` (with BlueFlame
/// halves if `P` uses BlueFlame).
/// A random queue of the comparisons: ring and id-ring sizes, limits,
/// CQE policy, start counter and minimum inline header.
struct Setup {
    wqe_cnt: usize,
    ids_len: usize,
    cfg: TxConfig,
    start_pi: u32,
    min_inline: u8,
}

impl Setup {
    fn random(rng: &mut Rng) -> Self {
        let wqe_cnt = rng.pick(&[16usize, 64, 256]);
        let ids_len = rng.pick(&[32usize, 64, 1024]);
        let cfg = random_cfg(rng);
        let start_pi = rng.pick(&[0, wqe_cnt as u32 - 3, 0xffff_fff0, 0x1_0000 - 5]);
        let min_inline = rng.pick(&[0u8, 18]);
        Self {
            wqe_cnt,
            ids_len,
            cfg,
            start_pi,
            min_inline,
        }
    }

    /// Memory for one queue of the setup (BlueFlame halves if `P` rings
    /// with BlueFlame).
    fn mem<P: DoorbellPolicy>(&self) -> (Mem, Lent) {
        let mem = if P::BLUEFLAME {
            Mem::with_bf(self.wqe_cnt)
        } else {
            Mem::new(self.wqe_cnt)
        };
        (mem, Lent::new(self.wqe_cnt))
    }

    /// The queue of the setup over `mem` and `lent`.
    fn txq<'a, P: DoorbellPolicy, M: TxMode>(
        &self,
        mem: &'a Mem,
        lent: &'a mut Lent,
        avx2: Avx2Opt,
    ) -> TxQueue<'a, P, RawPacketQp, M> {
        let at = (self.start_pi, self.min_inline);
        txq_as::<P, M>(mem, lent, self.ids_len, at, self.cfg, avx2)
    }

    fn describe<M: TxMode>(&self) -> String {
        format!(
            "{:?} {:?} ring {} ids {} start {:#x} min_inline {}",
            M::KIND,
            self.cfg,
            self.wqe_cnt,
            self.ids_len,
            self.start_pi,
            self.min_inline
        )
    }
}

/// Retires up to a random WQE start in flight (two times in three) on
/// both queues, which must agree on the result and the ids.
fn retire_both<P: DoorbellPolicy, M: TxMode>(
    rng: &mut Rng,
    a: &mut TxQueue<'_, P, RawPacketQp, M>,
    b: &mut TxQueue<'_, P, RawPacketQp, M>,
    what: &str,
) {
    let sq = a.send_queue();
    // The WQE starts in flight: walked from the consumer (only a WQE's
    // first slot has its entry).
    let mut starts: Vec<u32> = Vec::new();
    let mut c = sq.consumer();
    while c != sq.producer() {
        starts.push(c);
        let e = sq.shadow((c & (sq.wqe_cnt() - 1)) as usize).expect("slot");
        assert!(e.wqebbs() != 0, "{what}: a WQE starts at {c}");
        c = c.wrapping_add(u32::from(e.wqebbs()));
    }
    if !starts.is_empty() && rng.below(3) != 0 {
        let c = rng.pick(&starts) as u16;
        let (mut ga, mut gb) = (Vec::new(), Vec::new());
        assert_eq!(
            a.retire(c, |id| ga.push(id)),
            b.retire(c, |id| gb.push(id)),
            "{what}"
        );
        assert_eq!(ga, gb, "{what}");
    }
}

/// The random limits of a comparison's queues.
fn random_cfg(rng: &mut Rng) -> TxConfig {
    TxConfig {
        inline_max: rng.pick(&[0, 40, 63, 64, 100, 268]),
        max_packets: rng.pick(&[1, 3, 12, 32, 100]),
        max_inline_bytes: rng.pick(&[64, 200, 924]),
        max_wqe_bytes: rng.pick(&[48, 256, 512, 960, 1008]),
        single_inline_max: rng.pick(&[0, 0, 100]),
        cqe: rng.pick(&[
            CqePolicy::EverySessions(1),
            CqePolicy::EverySessions(3),
            CqePolicy::BurstEnd {
                packets: 32,
                wqebbs: 0,
            },
            CqePolicy::BurstEnd {
                packets: 8,
                wqebbs: 16,
            },
        ]),
        unsignaled_ce: rng.pick(&[CompletionMode::OnlyErr, CompletionMode::OnlyFirstErr]),
    }
}

fn compare_paths_with<M: TxMode, P: DoorbellPolicy>(case: u64, avx2: Avx2Opt) {
    let more = [Sge::new(LKEY, 0x9000, 30)];
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (case + 1).wrapping_mul(0x1000_0000_01b3));
    let setup = Setup::random(&mut rng);
    let (mem_a, mut lent_a) = setup.mem::<P>();
    let (mem_b, mut lent_b) = setup.mem::<P>();
    let mut a = setup.txq::<P, M>(&mem_a, &mut lent_a, avx2);
    let mut b = setup.txq::<P, M>(&mem_b, &mut lent_b, None);
    for burst in 0..12u64 {
        let n = rng.below(if cfg!(miri) { 20 } else { 70 }) as usize;
        // One burst in three is uniform, as a benchmark's: frames of one
        // length (each descriptor size of the counted loops, or longer),
        // all frames or all pointers, now and then one odd packet: the
        // loops that close and reopen sessions in the ring.
        let uniform = rng.below(3) == 0;
        let same_len = rng.pick(&[32usize, 44, 45, 60, 61, 64, 64, 100]);
        let frames = burst_frames(&mut rng, n, uniform.then_some(same_len), burst * 31);
        let pkts = burst_packets(&mut rng, &frames, &more, uniform, burst * 1000);
        // `tx_burst` and `push_each`, opened up to compare the batches.
        // Half the time as `tx_burst` calls it (`END`: the last session
        // may close for `Complete` before `complete`, so the batches are
        // compared after it only).
        let end = rng.below(2) == 0;
        let mut ba = a.start();
        let ka = if end {
            ba.push_burst_as::<true>(&pkts)
        } else {
            ba.push_burst(&pkts)
        };
        let sa = (ba.inline, ba.wqes, ba.last_ds, ba.open.is_some());
        let wa = ba.complete();
        let mut bb = b.start();
        let kb = pkts.iter().take_while(|p| bb.push(p).is_ok()).count();
        let sb = (bb.inline, bb.wqes, bb.last_ds, bb.open.is_some());
        let wb = bb.complete();
        let what = format!(
            "case {case} burst {burst} end {end}: {}",
            setup.describe::<M>()
        );
        assert_eq!((ka, wa), (kb, wb), "{what}");
        if !end {
            assert_eq!(sa, sb, "{what}");
        }
        assert_eq!(format!("{:?}", a.done), format!("{:?}", b.done), "{what}");
        assert!(observe(&a, &mem_a) == observe(&b, &mem_b), "{what}");
        retire_both(&mut rng, &mut a, &mut b, &what);
    }
}

/// [`TxQueue::tx_frames`] and [`TxQueue::tx_burst`] of the same frames as
/// packets (every frame with the burst's offload values) give the same
/// count, ring bytes, doorbells, shadow, counters and completions: random
/// queues (every mode, sizes, limits, wraps), bursts of one length (most
/// of them 64 bytes, the frames' own loop) or of random lengths (refused
/// ones too), more frames than one chunk of packets now and then.
#[test]
fn frames_match_packets() {
    let cases = if cfg!(miri) { 1 } else { 200 };
    for case in 0..cases {
        compare_frames_with::<Empw, DoorbellOnly>(case, None);
        compare_frames_with::<SingleWqe, DoorbellOnly>(case, None);
        compare_frames_with::<LegacyMpw, DoorbellOnly>(case, None);
        compare_frames_with::<Empw, BlueFlamePreferred>(case, None);
    }
}

/// [`frames_match_packets`] with the AVX2 proof on both queues, where the
/// CPU has AVX2.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[test]
fn frames_match_packets_avx2() {
    if !std::is_x86_feature_detected!("avx2") {
        return;
    }
    let cases = if cfg!(miri) { 1 } else { 200 };
    for case in 0..cases {
        compare_frames_with::<Empw, DoorbellOnly>(case, avx2_proof());
        compare_frames_with::<Empw, BlueFlamePreferred>(case, avx2_proof());
    }
}

/// [`frames_match_packets`]'s case `case` on queues of policy `P`, both
/// with `avx2`.
fn compare_frames_with<M: TxMode, P: DoorbellPolicy>(case: u64, avx2: Avx2Opt) {
    let mut rng = Rng(0x51ed_270b_2743_0b1d ^ (case + 1).wrapping_mul(0x1000_0000_01b3));
    let setup = Setup::random(&mut rng);
    let (mem_a, mut lent_a) = setup.mem::<P>();
    let (mem_b, mut lent_b) = setup.mem::<P>();
    let mut a = setup.txq::<P, M>(&mem_a, &mut lent_a, avx2);
    let mut b = setup.txq::<P, M>(&mem_b, &mut lent_b, avx2);
    let offloads = [
        TxOffload::NONE,
        TxOffload {
            cs_flags: EthCsFlags::new().with_l3_csum(true).with_l4_csum(true),
            ..TxOffload::NONE
        },
        TxOffload {
            swp_offsets: [1, 2, 3, 4],
            swp_flags: SwpFlags::new().with_outer_l4_udp(true),
            metadata: 0xdead_beef,
            ..TxOffload::NONE
        },
    ];
    for burst in 0..12u64 {
        let n = rng.below(if cfg!(miri) { 20 } else { 80 }) as usize;
        let same_len = (rng.below(3) != 0).then(|| rng.pick(&[64usize, 64, 64, 60, 100, 19]));
        let data = burst_frames(&mut rng, n, same_len, burst * 37);
        let frames = tx_frames_of(&data, burst * 1000);
        let offload = rng.pick(&offloads);
        let pkts: Vec<Packet<'_>> = frames.iter().map(|f| f.packet(&offload)).collect();
        let ka = a.tx_frames(&offload, &frames);
        let kb = b.tx_burst(&pkts);
        let what = format!("case {case} burst {burst}: {}", setup.describe::<M>());
        assert_eq!(ka, kb, "{what}");
        assert_eq!(format!("{:?}", a.done), format!("{:?}", b.done), "{what}");
        assert!(observe(&a, &mem_a) == observe(&b, &mem_b), "{what}");
        retire_both(&mut rng, &mut a, &mut b, &what);
    }
}

/// [`TxQueue::tx_burst`] itself and [`TxBatch::push`] packet by packet
/// give the same count, ring bytes, doorbells, shadow, counters and
/// completions, on bursts of plain 64-byte frames of one offload value
/// into which other packets are mixed at random places (the first one
/// too): other lengths, pointers, another offload value, VLAN insertion,
/// more segments, TSO; half the queues with the default limits (the
/// sessions of the largest window: with the AVX2 proof, `tx_burst`'s
/// own function, `burst_avx2::tx_packets64`), half random.
#[test]
fn tx_burst_matches_push() {
    let cases = if cfg!(miri) { 2 } else { 150 };
    for case in 0..cases {
        compare_tx_burst::<DoorbellOnly>(case, None);
        compare_tx_burst::<BlueFlamePreferred>(case, None);
    }
}

/// [`tx_burst_matches_push`] with the AVX2 proof on the `tx_burst` side,
/// where the CPU has AVX2.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[test]
fn tx_burst_matches_push_avx2() {
    if !std::is_x86_feature_detected!("avx2") {
        return;
    }
    let cases = if cfg!(miri) { 2 } else { 300 };
    for case in 0..cases {
        compare_tx_burst::<DoorbellOnly>(case, avx2_proof());
        compare_tx_burst::<BlueFlamePreferred>(case, avx2_proof());
    }
}

/// [`tx_burst_matches_push`]'s case `case` on eMPW queues of policy `P`,
/// the `tx_burst` side with `avx2`.
fn compare_tx_burst<P: DoorbellPolicy>(case: u64, avx2: Avx2Opt) {
    let more = [Sge::new(LKEY, 0x9000, 30)];
    let mut rng = Rng(0x2545_f491_4f6c_dd1d ^ (case + 1).wrapping_mul(0x1000_0000_01b3));
    let mut setup = Setup::random(&mut rng);
    if rng.below(2) == 0 {
        setup.cfg = TxConfig {
            cqe: setup.cfg.cqe,
            ..TxConfig::new()
        };
    }
    let (mem_a, mut lent_a) = setup.mem::<P>();
    let (mem_b, mut lent_b) = setup.mem::<P>();
    let mut a = setup.txq::<P, Empw>(&mem_a, &mut lent_a, avx2);
    let mut b = setup.txq::<P, Empw>(&mem_b, &mut lent_b, None);
    let offload = rng.pick(&[TxOffload::NONE, TxOffload::NONE.with_csum()]);
    let other = TxOffload {
        metadata: 7,
        ..offload
    };
    for burst in 0..12u64 {
        let n = rng.below(if cfg!(miri) { 24 } else { 80 }) as usize;
        // One packet in `odd` is another kind (none for a third of the
        // bursts: plain frames only).
        let odd = rng.pick(&[0u64, 3, 8, 30]);
        let kinds: Vec<u64> = (0..n)
            .map(|_| match odd {
                0 => 0,
                _ if rng.below(odd) == 0 => 1 + rng.below(8),
                _ => 0,
            })
            .collect();
        let data: Vec<Vec<u8>> = kinds
            .iter()
            .enumerate()
            .map(|(i, &k)| {
                let len = match k {
                    1 => random_len(&mut rng),
                    2 => rng.pick(&[60usize, 63, 65]),
                    _ => 64,
                };
                frame(len, (burst * 41 + i as u64) as u8)
            })
            .collect();
        let pkts: Vec<Packet<'_>> = kinds
            .iter()
            .zip(&data)
            .enumerate()
            .map(|(i, (&k, f))| {
                let id = burst * 1000 + i as u64;
                let p = Packet::frame(id, LKEY, f).with_offload(offload);
                match k {
                    3 => Packet::ptr(id, LKEY, 0x10_0000 + 0x1000 * i as u64, 64)
                        .with_offload(offload),
                    4 => p.with_offload(other),
                    5 => p.with_vlan(0x0abc),
                    6 => p.with_segments(&more),
                    7 => p.with_tso(1000, 54),
                    _ => p,
                }
            })
            .collect();
        let ka = a.tx_burst(&pkts);
        let mut bb = b.start();
        let kb = pkts.iter().take_while(|p| bb.push(p).is_ok()).count();
        bb.complete();
        let what = format!(
            "case {case} burst {burst} kinds {kinds:?}: {}",
            setup.describe::<Empw>()
        );
        assert_eq!(ka, kb, "{what}");
        assert_eq!(format!("{:?}", a.done), format!("{:?}", b.done), "{what}");
        assert!(observe(&a, &mem_a) == observe(&b, &mem_b), "{what}");
        retire_both(&mut rng, &mut a, &mut b, &what);
    }
}

/// A burst whose first packet goes out as a SEND WQE of its own (two
/// segments) and whose next one, a 64-byte frame, finds no free id: the
/// burst path must leave the staging area (the BlueFlame source of a
/// one-WQE batch) as `push` does, so that the BlueFlame write is the SEND
/// WQE's bytes on both paths. (Also with the id ring's last id free and
/// the ring full instead: no room for a session.)
#[test]
fn blueflame_copy_survives_a_fresh_run_that_opens_nothing() {
    let more = [Sge::new(LKEY, 0x9000, 30)];
    let frames: Vec<Vec<u8>> = (0..40).map(|i| frame(64, i as u8)).collect();
    // (ring WQEBBs, ids): first the id ring runs out, then the SQ ring.
    for (wqe_cnt, ids_len) in [(64usize, 32usize), (16, 1024)] {
        let (mem_a, mem_b) = (Mem::with_bf(wqe_cnt), Mem::with_bf(wqe_cnt));
        let (mut lent_a, mut lent_b) = (Lent::new(wqe_cnt), Lent::new(wqe_cnt));
        let cfg = TxConfig::new();
        let mut a: TxQueue<'_, BlueFlamePreferred, RawPacketQp, Empw> =
            txq_as(&mem_a, &mut lent_a, ids_len, (0, 18), cfg, None);
        let mut b: TxQueue<'_, BlueFlamePreferred, RawPacketQp, Empw> =
            txq_as(&mem_b, &mut lent_b, ids_len, (0, 18), cfg, None);
        // Fill the queue up to one id (or to a ring with room for the SEND
        // WQE only), then the two-packet burst.
        let fill: Vec<Packet<'_>> = if ids_len == 32 {
            (0..31)
                .map(|i| Packet::frame(i, LKEY, &frames[i as usize]))
                .collect()
        } else {
            // Ten frames: one session, 13 of the 16 WQEBBs; after the SEND
            // WQE the ring has no room for a session of one frame.
            (0..10)
                .map(|i| Packet::frame(i, LKEY, &frames[i as usize]))
                .collect()
        };
        let burst = [
            Packet::frame(100, LKEY, &frames[38]).with_segments(&more),
            Packet::frame(101, LKEY, &frames[39]),
        ];
        let ka = (a.tx_burst(&fill), a.tx_burst(&burst));
        let kb = {
            let mut bb = b.start();
            let k0 = fill.iter().take_while(|p| bb.push(p).is_ok()).count();
            bb.complete();
            let mut bb = b.start();
            let k1 = burst.iter().take_while(|p| bb.push(p).is_ok()).count();
            bb.complete();
            (k0, k1)
        };
        assert_eq!(ka, kb, "ring {wqe_cnt} ids {ids_len}");
        assert_eq!(
            ka.1, 1,
            "ring {wqe_cnt} ids {ids_len}: the frame is refused"
        );
        assert_eq!(
            observe(&a, &mem_a),
            observe(&b, &mem_b),
            "ring {wqe_cnt} ids {ids_len}"
        );
    }
}

/// [`compare_paths_with`] over `bursts` bursts through `tx_burst` on
/// small rings and id rings (8..=64 WQEBBs and ids, so that both fill up
/// and wrap often), session limits not multiples of a WQEBB, CQE
/// policies changed between bursts ([`TxQueue::set_cqe_policy`], the same
/// on both queues), a start one WQEBB before the ring end or the 32-bit
/// wrap, uniform runs with a refused (too short) packet in them, and a
/// retire of the last WQE in flight now and then (the tag check right
/// after a partial burst).
fn compare_wide<M: TxMode, P: DoorbellPolicy>(case: u64, avx2: Avx2Opt, bursts: u64) {
    let more = [Sge::new(LKEY, 0x9000, 30)];
    let mut rng = Rng(0x51_7cc1_b727_220a ^ (case + 7).wrapping_mul(0x1000_0000_01b3));
    let wqe_cnt = rng.pick(&[4usize, 8, 16, 32, 64]);
    let ids_len = rng.pick(&[1usize, 2, 4, 8, 16, 32, 64]);
    let policies = [
        CqePolicy::EverySessions(1),
        CqePolicy::EverySessions(2),
        CqePolicy::EverySessions(5),
        CqePolicy::BurstEnd {
            packets: 32,
            wqebbs: 0,
        },
        CqePolicy::BurstEnd {
            packets: 1,
            wqebbs: 0,
        },
        CqePolicy::BurstEnd {
            packets: 8,
            wqebbs: 4,
        },
    ];
    let cfg = TxConfig {
        inline_max: rng.pick(&[0, 64, 64, 100, 268]),
        max_packets: rng.pick(&[1, 2, 3, 5, 11, 32]),
        max_inline_bytes: rng.pick(&[64, 128, 200, 320, 924]),
        max_wqe_bytes: rng.pick(&[48, 112, 176, 256, 400, 512, 960, 1008]),
        single_inline_max: rng.pick(&[0, 0, 100]),
        cqe: rng.pick(&policies),
        unsignaled_ce: rng.pick(&[CompletionMode::OnlyErr, CompletionMode::OnlyFirstErr]),
    };
    let start_pi = rng.pick(&[
        0,
        wqe_cnt as u32 - 1,
        wqe_cnt as u32 - 3,
        0xffff_fffe,
        0x1_0000 - 5,
    ]);
    let min_inline = rng.pick(&[0u8, 18]);
    let (mem_a, mem_b) = if P::BLUEFLAME {
        (Mem::with_bf(wqe_cnt), Mem::with_bf(wqe_cnt))
    } else {
        (Mem::new(wqe_cnt), Mem::new(wqe_cnt))
    };
    let (mut lent_a, mut lent_b) = (Lent::new(wqe_cnt), Lent::new(wqe_cnt));
    let at = (start_pi, min_inline);
    let mut a = txq_as::<P, M>(&mem_a, &mut lent_a, ids_len, at, cfg, avx2);
    let mut b = txq_as::<P, M>(&mem_b, &mut lent_b, ids_len, at, cfg, None);
    // The packet counters too, now and then, just before their 32-bit
    // wrap (the id slots, the shadow entries' tag `pi - head`).
    let head0 = rng.pick(&[0u32, 0, 0xffff_fff0, 0x8000_0003]);
    for c in [&mut a.done.head, &mut a.tail, &mut b.done.head, &mut b.tail] {
        *c = head0;
    }
    let mut queued = std::collections::VecDeque::new();
    for burst in 0..bursts {
        if rng.below(6) == 0 {
            let c = rng.pick(&policies);
            a.set_cqe_policy(c);
            b.set_cqe_policy(c);
        }
        let n = rng.below(if cfg!(miri) { 12 } else { 40 }) as usize;
        let uniform = rng.below(2) == 0;
        let same_len = rng.pick(&[32usize, 60, 64, 64, 64, 100]);
        let frames = burst_frames(&mut rng, n, uniform.then_some(same_len), burst * 31);
        let pkts = burst_packets(&mut rng, &frames, &more, uniform, burst * 1000);
        let short = frame(10, 1);
        let mut pkts = pkts;
        // A uniform run after a WQE of its own (the batch's last WQE, the
        // BlueFlame source, before the run's sessions open).
        if uniform && rng.below(3) == 0 {
            if let Some(p) = pkts.first_mut() {
                *p = match rng.below(3) {
                    0 => p.with_segments(&more),
                    1 => p.with_tso(1000, 54),
                    _ => p.with_vlan(0x0abc),
                };
            }
        }
        if !pkts.is_empty() && rng.below(4) == 0 {
            let i = rng.below(pkts.len() as u64) as usize;
            pkts[i] = Packet::frame(9999, LKEY, &short);
        }
        // Half the bursts through `tx_burst`; the others as one batch of
        // chunks, each through `push_burst` or `push` (the burst path
        // entered with WQEs closed before it in the batch, or with a
        // session open, in the ring or staged, and left to `push`).
        let ka = if rng.below(2) == 0 {
            a.tx_burst(&pkts)
        } else {
            let mut ba = a.start();
            let mut ka = 0;
            while ka < pkts.len() {
                let m = 1 + rng.below((pkts.len() - ka) as u64) as usize;
                let chunk = &pkts[ka..ka + m];
                let k = if rng.below(2) == 0 {
                    ba.push_burst(chunk)
                } else {
                    chunk.iter().take_while(|p| ba.push(p).is_ok()).count()
                };
                ka += k;
                if k < m {
                    break;
                }
            }
            ba.complete();
            ka
        };
        let mut bb = b.start();
        let kb = pkts.iter().take_while(|p| bb.push(p).is_ok()).count();
        bb.complete();
        queued.extend(pkts.iter().take(kb).map(|p| p.id));
        let what = format!(
            "{:?} case {case} burst {burst}: {cfg:?} ring {wqe_cnt} ids {ids_len} min_inline {min_inline} start {start_pi:#x} n {n} uniform {uniform} len {same_len}",
            M::KIND
        );
        assert_eq!(ka, kb, "{what}");
        assert_eq!(format!("{:?}", a.done), format!("{:?}", b.done), "{what}");
        let (oa, ob) = (observe(&a, &mem_a), observe(&b, &mem_b));
        if oa != ob {
            let names = ["ring", "dbrec", "bf", "stats", "pi", "inflight", "shadow"];
            let diffs = [
                oa.0 != ob.0,
                oa.1 != ob.1,
                oa.2 != ob.2,
                oa.3 != ob.3,
                oa.4 != ob.4,
                oa.5 != ob.5,
                oa.6 != ob.6,
            ];
            let d: Vec<_> = names
                .iter()
                .zip(diffs)
                .filter(|x| x.1)
                .map(|x| *x.0)
                .collect();
            panic!("{what}: differ in {d:?}");
        }
        let sq = a.send_queue();
        let mut starts: Vec<u32> = Vec::new();
        let mut c = sq.consumer();
        while c != sq.producer() {
            starts.push(c);
            let e = sq.shadow((c & (sq.wqe_cnt() - 1)) as usize).expect("slot");
            assert!(e.wqebbs() != 0, "{what}: a WQE starts at {c}");
            c = c.wrapping_add(u32::from(e.wqebbs()));
        }
        // A WQEBB in flight that starts no WQE: refused, nothing changes
        // (its slot may hold an entry of an earlier ring pass).
        let (ci, pi) = (sq.consumer(), sq.producer());
        let flight = pi.wrapping_sub(ci);
        if flight > 0 {
            let c = ci.wrapping_add(rng.below(u64::from(flight)) as u32);
            if !starts.contains(&c) {
                assert_eq!(
                    a.retire(c as u16, |_| panic!("{what}: nothing retired")),
                    Err(RetireError::NotWqeStart {
                        wqe_counter: c as u16
                    }),
                    "{what}: {c:#x} is inside a WQE"
                );
                assert_eq!(a.send_queue().consumer(), ci, "{what}");
            }
        }
        if !starts.is_empty() && rng.below(2) != 0 {
            let last = *starts.last().expect("a WQE");
            let c = if rng.below(4) == 0 {
                last
            } else {
                rng.pick(&starts)
            };
            let (mut ga, mut gb) = (Vec::new(), Vec::new());
            assert_eq!(
                a.retire(c as u16, |id| ga.push(id)),
                b.retire(c as u16, |id| gb.push(id)),
                "{what}"
            );
            assert_eq!(ga, gb, "{what}");
            // The ids of the packets queued, oldest first.
            let sent: Vec<u64> = queued.drain(..ga.len()).collect();
            assert_eq!(ga, sent, "{what}");
            if c == last {
                assert_eq!((a.packets_in_flight(), queued.len()), (0, 0), "{what}");
            }
        }
    }
}

/// [`compare_wide`]: `tx_burst` against `push` on the rare combinations
/// (small, often full id rings and rings; CQE policy changes between
/// bursts; BlueFlame with `BlueFlameInline` on eMPW; refused packets
/// inside uniform runs), with and without the AVX2 proof.
#[test]
fn burst_path_matches_push_small_rings() {
    let (cases, bursts) = if cfg!(miri) { (1, 4) } else { (40, 40) };
    for case in 0..cases {
        compare_wide::<Empw, DoorbellOnly>(case, None, bursts);
        compare_wide::<Empw, BlueFlamePreferred>(case, None, bursts);
        compare_wide::<Empw, BlueFlameInline>(case, None, bursts);
        #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
        if std::is_x86_feature_detected!("avx2") {
            compare_wide::<Empw, DoorbellOnly>(case, avx2_proof(), bursts);
            compare_wide::<Empw, BlueFlamePreferred>(case, avx2_proof(), bursts);
        }
        compare_wide::<LegacyMpw, BlueFlameInline>(case, None, bursts);
        compare_wide::<SingleWqe, BlueFlamePreferred>(case, None, bursts);
    }
}

/// One-WQE `tx_burst` batches of 64-byte frames on a BlueFlame queue:
/// a `fresh` session that crosses the ring end (built in the staging area,
/// copied, wrapping, at its close), then one built in the ring, each
/// closed for `Complete` by `tx_burst` itself, with a CQE requested at
/// the burst's end (`BurstEnd`, `request_cqe`'s write into the staging
/// area) or not (`EverySessions(3)`). The BlueFlame copy must be the
/// WQE's bytes as in the ring (CE bits included), and everything as
/// `push` leaves it; with and without the AVX2 proof.
#[test]
fn blueflame_copy_of_fresh_sessions_closed_for_complete() {
    let frames: Vec<Vec<u8>> = (0..4).map(|i| frame(64, 0x40 + i as u8)).collect();
    let pkts: Vec<Packet<'_>> = (0..4)
        .map(|i| Packet::frame(i, LKEY, &frames[i as usize]).with_csum())
        .collect();
    let policies = [
        (
            CqePolicy::BurstEnd {
                packets: 0,
                wqebbs: 1,
            },
            CompletionMode::Always,
        ),
        (CqePolicy::EverySessions(3), CompletionMode::OnlyFirstErr),
    ];
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    let avx2s: Vec<Avx2Opt> = if std::is_x86_feature_detected!("avx2") {
        vec![None, avx2_proof()]
    } else {
        vec![None]
    };
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
    let avx2s: Vec<Avx2Opt> = vec![None];
    for avx2 in avx2s {
        for (cqe, ce) in policies {
            let cfg = TxConfig {
                cqe,
                unsignaled_ce: CompletionMode::OnlyFirstErr,
                ..TxConfig::new()
            };
            let what = format!("{cqe:?} avx2 {}", avx2.is_some());
            let (mem_a, mem_b) = (Mem::with_bf(16), Mem::with_bf(16));
            let (mut lent_a, mut lent_b) = (Lent::new(16), Lent::new(16));
            let mut a: TxQueue<'_, BlueFlamePreferred, RawPacketQp, Empw> =
                txq_as(&mem_a, &mut lent_a, 1024, (14, 0), cfg, avx2);
            let mut b: TxQueue<'_, BlueFlamePreferred, RawPacketQp, Empw> =
                txq_as(&mem_b, &mut lent_b, 1024, (14, 0), cfg, None);
            // Two frames: 2 + 2 × 5 = 12 DS, 3 WQEBBs: 14, 15, 0 (across
            // the end), then 17, 18, 19 (in the ring).
            for (burst, pi) in [(&pkts[..2], 14u32), (&pkts[2..], 17)] {
                let ka = a.tx_burst(burst);
                let mut bb = b.start();
                let kb = burst.iter().take_while(|p| bb.push(p).is_ok()).count();
                bb.complete();
                assert_eq!((ka, kb), (2, 2), "{what}");
                assert_eq!(a.send_queue().producer(), pi + 3, "{what}");
                assert!(observe(&a, &mem_a) == observe(&b, &mem_b), "{what} at {pi}");
                let ring = mem_a.ring();
                let w = wqe_at(&ring, pi);
                assert_eq!((w.ds, w.ce, w.descs.len()), (12, ce.raw(), 2), "{what}");
                // The WQE as the device sees it in the ring, unwrapped.
                let bytes: Vec<u8> = (0..192)
                    .map(|i| ring[(pi as usize * 64 + i) % ring.len()])
                    .collect();
                let bf = mem_a.bf();
                assert!(
                    bf[..192] == bytes[..] || bf[256..448] == bytes[..],
                    "{what}: the BlueFlame copy of the WQE at {pi}"
                );
            }
        }
    }
}

/// A `tx_burst` of 64-byte frames whose free ids wrap around the id ring's
/// end (`id_run` stops the `fresh` run there; the session stays open and
/// the general loop goes on with the ids from slot 0) and then run out:
/// as many packets as free ids, the ids given back by `retire` in order,
/// everything as `push` leaves it.
#[test]
fn fresh_run_across_the_id_ring_end() {
    let frames: Vec<Vec<u8>> = (0..12).map(|i| frame(64, i as u8)).collect();
    let pkts: Vec<Packet<'_>> = (0..12)
        .map(|i| Packet::frame(100 + i, LKEY, &frames[i as usize]))
        .collect();
    let (mem_a, mem_b) = (Mem::new(64), Mem::new(64));
    let (mut lent_a, mut lent_b) = (Lent::new(64), Lent::new(64));
    lent_a.ids.truncate(8);
    lent_b.ids.truncate(8);
    let mut a: Q<'_, Empw> = txq(&mem_a, &mut lent_a, 0, TxConfig::new());
    let mut b: Q<'_, Empw> = txq(&mem_b, &mut lent_b, 0, TxConfig::new());
    // Six packets in flight and retired: the id ring's head at slot 6.
    assert_eq!(a.tx_burst(&pkts[..6]), 6);
    assert_eq!(b.tx_burst(&pkts[..6]), 6);
    assert_eq!(a.retire(0, |_| {}), Ok(6));
    assert_eq!(b.retire(0, |_| {}), Ok(6));
    // Slots 6, 7, then 0..=5: eight of the twelve.
    let ka = a.tx_burst(&pkts);
    let mut bb = b.start();
    let kb = pkts.iter().take_while(|p| bb.push(p).is_ok()).count();
    bb.complete();
    assert_eq!((ka, kb), (8, 8));
    assert!(observe(&a, &mem_a) == observe(&b, &mem_b));
    let w = wqes(&mem_a, 8, a.send_queue().producer());
    assert_eq!(w.len(), 1, "one session of eight frames");
    let mut got = Vec::new();
    assert_eq!(a.retire(8, |id| got.push(id)), Ok(8));
    assert_eq!(got, (100..108).collect::<Vec<_>>());
}

/// The bytes of the session at `pi` in `ring` that are padding: those of
/// an inline segment after its byte count up to the segment's last
/// 16-byte unit, and those from the DS count to the end of the last
/// WQEBB: a flag per byte of the WQE's WQEBBs (none set for a WQE that
/// is no session: a SEND or TSO WQE of one packet).
fn session_padding(ring: &[u8], pi: u32) -> Vec<bool> {
    let n = ring.len();
    let at = |i: usize| ring[((pi as usize) * 64 + i) % n];
    let (opcode, opmod) = (at(3), at(0));
    let empw = opcode == (ctrl_bits::EMPW & 0xff) as u8;
    let legacy = opcode == (ctrl_bits::MPW & 0xff) as u8 && opmod == (ctrl_bits::MPW >> 24) as u8;
    let ds = (at(7) & 0x3f) as usize;
    let bbs = ds.div_ceil(4);
    let mut pad = vec![false; bbs * SEND_WQE_BB];
    if !(empw || legacy) {
        return pad;
    }
    let mut pos = mpw::TITLE_DS * SEND_WQE_DS;
    while pos < ds * SEND_WQE_DS {
        let bc = u32::from_be_bytes([at(pos), at(pos + 1), at(pos + 2), at(pos + 3)]);
        if bc & 0x8000_0000 != 0 {
            let len = (bc & 0x7fff_ffff) as usize;
            let end = pos + (4 + len).div_ceil(SEND_WQE_DS) * SEND_WQE_DS;
            pad[pos + 4 + len..end].fill(true);
            pos = end;
        } else {
            pos += SEND_WQE_DS;
        }
    }
    pad[ds * SEND_WQE_DS..].fill(true);
    pad
}

/// No path writes padding (DPDK's rule, `mlx5_tx_dseg_empw`): the bytes
/// of an inline segment past its frame and those past a session's DS
/// count in its last WQEBB keep what the ring held before the burst,
/// whether the session was built in the ring or in the staging area
/// (across the ring end, or by `push`); every other byte of a WQE's
/// WQEBBs is written. Two queues over rings filled with different bytes
/// run the same bursts (`tx_burst`, `tx_frames`, or `push` packet by
/// packet; with the AVX2 proof where the CPU has AVX2): after each
/// burst, the bytes of its WQEs are equal in both rings but for the
/// padding, which is each ring's own from before the burst; nothing
/// else changed. A single-packet WQE keeps its own format: every byte
/// of its WQEBBs written (zeroes after its DS count).
#[test]
fn padding_is_left_as_it_was() {
    let cases = if cfg!(miri) { 1 } else { 200 };
    for case in 0..cases {
        padding_case::<Empw>(case);
        padding_case::<LegacyMpw>(case);
    }
}

/// The AVX2 proof if the CPU has AVX2 (else none).
fn avx2_if_any() -> Avx2Opt {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    if std::is_x86_feature_detected!("avx2") {
        return avx2_proof();
    }
    None
}

/// [`padding_is_left_as_it_was`]'s case `case` in mode `M`.
fn padding_case<M: TxMode>(case: u64) {
    let more = [Sge::new(LKEY, 0x9000, 30)];
    let mut rng = Rng(0x7f4a_7c15_9e37_79b9 ^ (case + 1).wrapping_mul(0x1000_0000_01b3));
    let mut setup = Setup::random(&mut rng);
    if rng.below(2) == 0 {
        // The default limits: the sessions of the largest window (the
        // 64-byte frames' own functions with the AVX2 proof).
        setup.cfg = TxConfig {
            cqe: setup.cfg.cqe,
            ..TxConfig::new()
        };
    }
    let avx2 = if rng.below(2) == 0 {
        avx2_if_any()
    } else {
        None
    };
    let (mem_a, mut lent_a) = setup.mem::<DoorbellOnly>();
    let (mem_b, mut lent_b) = setup.mem::<DoorbellOnly>();
    let fill = |mem: &Mem, byte: u8| {
        // SAFETY: the ring of `mem`, `wqe_cnt` WQEBBs, no queue yet.
        #[expect(unsafe_code, reason = "the test's ring memory, before any queue")]
        unsafe {
            core::ptr::write_bytes(mem.ring.cast::<u8>(), byte, mem.wqe_cnt * 64)
        };
    };
    fill(&mem_b, 0x5a);
    let mut a = setup.txq::<DoorbellOnly, M>(&mem_a, &mut lent_a, avx2);
    let mut b = setup.txq::<DoorbellOnly, M>(&mem_b, &mut lent_b, avx2);
    let offload = rng.pick(&[TxOffload::NONE, TxOffload::NONE.with_csum()]);
    let (mut before_a, mut before_b) = (mem_a.ring(), mem_b.ring());
    for burst in 0..if cfg!(miri) { 6 } else { 12u64 } {
        let n = rng.below(if cfg!(miri) { 20 } else { 70 }) as usize;
        let uniform = rng.below(2) == 0;
        let same_len = rng.pick(&[32usize, 44, 45, 60, 61, 64, 64, 64, 100]);
        let data = burst_frames(&mut rng, n, uniform.then_some(same_len), burst * 43);
        let frames = tx_frames_of(&data, burst * 1000);
        let pkts = burst_packets(&mut rng, &data, &more, uniform, burst * 1000);
        let pi0 = a.send_queue().producer();
        let how = rng.below(3);
        for q in [&mut a, &mut b] {
            match how {
                0 => {
                    q.tx_burst(&pkts);
                }
                1 => {
                    q.tx_frames(&offload, &frames);
                }
                _ => {
                    let mut bt = q.start();
                    let _ = pkts.iter().take_while(|p| bt.push(p).is_ok()).count();
                    bt.complete();
                }
            }
        }
        let what = format!(
            "case {case} burst {burst} how {how}: {}",
            setup.describe::<M>()
        );
        let (ra, rb) = (mem_a.ring(), mem_b.ring());
        // The bytes of the burst's WQEs: written alike, or padding kept.
        let len = ra.len();
        let mut touched = vec![false; len];
        let mut pi = pi0;
        while pi != a.send_queue().producer() {
            let pad = session_padding(&ra, pi);
            let bbs = pad.len() / SEND_WQE_BB;
            assert!(bbs > 0, "{what}: a WQE at {pi}");
            for (i, &is_pad) in pad.iter().enumerate() {
                let at = (pi as usize * 64 + i) % len;
                touched[at] = true;
                if is_pad {
                    assert_eq!(
                        (ra[at], rb[at]),
                        (before_a[at], before_b[at]),
                        "{what}: padding byte {i} of the WQE at {pi}"
                    );
                } else {
                    assert_eq!(ra[at], rb[at], "{what}: byte {i} of the WQE at {pi}");
                }
            }
            pi = pi.wrapping_add(bbs as u32);
        }
        for at in (0..len).filter(|&at| !touched[at]) {
            assert_eq!(
                (ra[at], rb[at]),
                (before_a[at], before_b[at]),
                "{what}: ring byte {at}, no WQE's"
            );
        }
        (before_a, before_b) = (ra, rb);
        retire_both(&mut rng, &mut a, &mut b, &what);
    }
}

/// The head a packet must have, computed from its accessors alone (not
/// from `Head::of`): the offload words, the shape and the first
/// segment's length (saturated).
fn head_from_accessors(p: &Packet<'_>) -> Head {
    let (lo, flags) = p.offload().words();
    let (ptr, len) = match p.buf() {
        PacketBuf::Frame(f) => (
            0,
            u64::try_from(f.data.len()).map_or(u64::from(u32::MAX), |l| l.min(u64::from(u32::MAX))),
        ),
        PacketBuf::Ptr(s) => (Head::PTR, u64::from(s.length)),
    };
    let mut shape = ptr;
    if !p.more().is_empty() {
        shape |= Head::MORE;
    }
    if p.tso_mss() != 0 {
        shape |= Head::TSO;
    }
    if p.vlan_tci().is_some() {
        shape |= Head::VLAN;
    }
    Head::new(lo, u64::from(flags) | shape | len << 32)
}

/// What a packet's accessors must say: the values given to its
/// constructor and builders, the last of each kind winning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Model<'d> {
    buf: PacketBuf<'d>,
    id: u64,
    more: &'d [Sge],
    offload: TxOffload,
    tso: (u16, u16),
    vlan: Option<u16>,
}

/// Random offload values, every byte of them (flag bits included).
fn random_offload(rng: &mut Rng) -> TxOffload {
    let w = rng.next();
    let f = rng.next();
    TxOffload {
        metadata: w as u32,
        swp_offsets: ((w >> 32) as u32).to_le_bytes(),
        cs_flags: EthCsFlags::from_bits(f as u8),
        swp_flags: SwpFlags::from_bits((f >> 8) as u8),
    }
}

/// Every constructor and builder, in random chains, keeps the head equal
/// to the one its accessors give (a builder that forgot to update it
/// fails here), and the accessors give back what was built.
#[test]
fn head_follows_every_builder() {
    let frame = [0x5au8; 300];
    let more = [Sge::new(3, 0x9000, 40), Sge::new(4, 0xa000, 0)];
    let mut rng = Rng(0x1234_5678_9abc_def1);
    let cases = if cfg!(miri) { 50 } else { 5000 };
    for case in 0..cases {
        let id = rng.next();
        let len = rng.pick(&[0usize, 1, 18, 19, 63, 64, 65, 128, 300]);
        let data = frame.get(..len).unwrap_or(&frame);
        let lkey = rng.next() as u32;
        let (mut p, buf) = match rng.below(4) {
            0 => {
                let p = Packet::frame(id, lkey, data);
                (p, PacketBuf::Frame(FrameSge::new(lkey, data)))
            }
            1 => {
                let (addr, length) = (rng.next(), rng.pick(&[0u32, 19, 64, 1500, u32::MAX]));
                let p = Packet::ptr(id, lkey, addr, length);
                (p, PacketBuf::Ptr(Sge::new(lkey, addr, length)))
            }
            2 => {
                let b = PacketBuf::Frame(FrameSge::with_addr(lkey, rng.next(), data));
                (Packet::from_buf(id, b), b)
            }
            _ => {
                let b = PacketBuf::Ptr(Sge::new(lkey, rng.next(), rng.next() as u32));
                (Packet::from_buf(id, b), b)
            }
        };
        let mut m = Model {
            buf,
            id,
            more: &[],
            offload: TxOffload::NONE,
            tso: (0, 0),
            vlan: None,
        };
        for step in 0..8 {
            let seen = Model {
                buf: p.buf(),
                id: p.id(),
                more: p.more(),
                offload: p.offload(),
                tso: (p.tso_mss(), p.tso_hdr_len()),
                vlan: p.vlan_tci(),
            };
            assert_eq!(seen, m, "case {case} step {step}");
            assert_eq!(
                *p.head(),
                head_from_accessors(&p),
                "case {case} step {step}"
            );
            let first = match m.buf {
                PacketBuf::Frame(f) => f.data.len() as u64,
                PacketBuf::Ptr(s) => u64::from(s.length),
            };
            let total = m.more.iter().fold(first, |a, s| a + u64::from(s.length));
            assert_eq!((p.len(), p.is_empty()), (total, total == 0));
            match rng.below(7) {
                0 => {
                    let o = random_offload(&mut rng);
                    p = p.with_offload(o);
                    m.offload = o;
                }
                1 => {
                    p = p.with_csum();
                    m.offload = m.offload.with_csum();
                }
                2 => {
                    let s = if rng.below(2) == 0 {
                        &more[..]
                    } else {
                        &[][..]
                    };
                    p = p.with_segments(s);
                    m.more = s;
                }
                3 => {
                    let tci = rng.next() as u16;
                    p = p.with_vlan(tci);
                    m.vlan = Some(tci);
                }
                4 => {
                    let (mss, hdr) = (rng.pick(&[0u16, 1, 1448]), rng.next() as u16);
                    p = p.with_tso(mss, hdr);
                    m.tso = (mss, hdr);
                }
                5 => {
                    // A copy is the same packet.
                    let q = p;
                    assert_eq!(q, p);
                }
                _ => {
                    // The frame of a `TxFrame` in a burst of these values.
                    if let PacketBuf::Frame(f) = m.buf {
                        let o = random_offload(&mut rng);
                        p = TxFrame { id: m.id, sge: f }.packet(&o);
                        m = Model {
                            offload: o,
                            more: &[],
                            tso: (0, 0),
                            vlan: None,
                            ..m
                        };
                    }
                }
            }
        }
    }
}

/// The shape test of the burst path (`burst::common` and the 64-byte
/// frames' key, `Head::key`) says what the fields say: a plain frame
/// (bytes at hand, one segment, no TSO, no VLAN insertion) of the
/// session's offload values (and, for the key, of 64 bytes).
#[test]
fn head_key_is_the_common_frame_test() {
    let frame = [7u8; 128];
    let mut rng = Rng(0x0ddc_0ffe_e15e_a5e5);
    let cases = if cfg!(miri) { 50 } else { 5000 };
    for case in 0..cases {
        let session = random_offload(&mut rng);
        let offload = if rng.below(2) == 0 {
            session
        } else {
            random_offload(&mut rng)
        };
        let len = rng.pick(&[63usize, 64, 65, 128]);
        let data = frame.get(..len).unwrap_or(&frame);
        let mut p = if rng.below(4) == 0 {
            Packet::ptr(1, 2, 0x1000, len as u32)
        } else {
            Packet::frame(1, 2, data)
        }
        .with_offload(offload);
        match rng.below(6) {
            0 => p = p.with_vlan(5),
            1 => p = p.with_tso(1000, 54),
            2 => {
                p = p.with_segments(&[Sge {
                    addr: 0,
                    length: 1,
                    lkey: 0,
                }])
            }
            _ => {}
        }
        let plain = p.more().is_empty() && p.tso_mss() == 0 && p.vlan_tci().is_none();
        let frame64 = matches!(p.buf(), PacketBuf::Frame(f) if f.data.len() == 64);
        let key = session.words();
        assert_eq!(
            p.head().w == Head::key(key, 64),
            plain && frame64 && p.offload() == session,
            "case {case}: {p:?}"
        );
    }
}

/// DPDK's minimum frame length (`MLX5_ESEG_MIN_INLINE_SIZE`) is a test of
/// its inline routine only (`mlx5_tx_burst_empw_inline`): a multi-packet
/// queue that never inlines takes short frames by pointer, as
/// `mlx5_tx_burst_empw_simple` does; one that inlines, or one WQE per
/// packet, refuses them. An empty frame is refused everywhere.
#[test]
fn short_frames_only_on_queues_that_never_inline() {
    let short = frame(12, 9);
    let pkts = [
        Packet::frame(0, LKEY, &short),
        Packet::ptr(1, LKEY, 0x4000, 1),
        Packet::ptr(2, LKEY, 0x5000, 18),
    ];
    // Pointer eMPW and legacy MPW sessions (DPDK none_empw, none_mpw).
    let mem = Mem::new(16);
    let mut lent = Lent::new(16);
    let mut q: Q<'_, Empw> = txq(&mem, &mut lent, 0, TxConfig::dpdk_empw(0, 0, 0));
    assert_eq!(q.tx_burst(&pkts), 3);
    let w = wqes(&mem, 0, q.send_queue().producer());
    assert_eq!(w.len(), 1);
    assert_eq!(
        w[0].descs,
        vec![
            D::Ptr(12, LKEY, short.as_ptr() as u64),
            D::Ptr(1, LKEY, 0x4000),
            D::Ptr(18, LKEY, 0x5000)
        ]
    );
    assert_eq!(
        q.start().push(&Packet::ptr(3, LKEY, 0, 0)),
        Err(TxError::BadLength)
    );
    let mem = Mem::new(16);
    let mut lent = Lent::new(16);
    let mut q: Q<'_, LegacyMpw> = txq(&mem, &mut lent, 0, TxConfig::dpdk_mpw(0, 0, 0));
    let tens: Vec<_> = (0..7)
        .map(|i| Packet::ptr(i, LKEY, 0x100 * i, 10))
        .collect();
    assert_eq!(q.tx_burst(&tens), 7);
    let w = wqes(&mem, 0, q.send_queue().producer());
    assert_eq!(
        w.iter().map(|w| w.descs.len()).collect::<Vec<_>>(),
        vec![6, 1]
    );
    assert_eq!(w[0].eth[6..8], [0, 10], "mss: the common length");
    // A queue that inlines (DPDK i_empw), even a frame it would not
    // inline; one WQE per packet.
    for cfg in [TxConfig::dpdk_empw(268, 290, 32), TxConfig::new()] {
        let mem = Mem::new(16);
        let mut lent = Lent::new(16);
        let mut q: Q<'_, Empw> = txq(&mem, &mut lent, 0, cfg);
        assert_eq!(q.tx_burst(&pkts), 0);
        assert_eq!(q.send_queue().producer(), 0);
    }
    let mem = Mem::new(16);
    let mut lent = Lent::new(16);
    let mut q: Q<'_, SingleWqe> = txq(&mem, &mut lent, 0, TxConfig::dpdk_empw(0, 0, 0));
    assert_eq!(q.tx_burst(&pkts), 0);
}

/// Under DPDK's rule no WQE inside a burst requests a CQE, however much
/// of the ring the burst fills (`mlx5_tx_request_completion` runs once per
/// doorbell): 40 inline 256-byte frames take 187 of 256 WQEBBs and one CQE
/// request, on the last session. The drain guarantee then applies at the
/// burst's end; per-session policies keep it on the WQE that reaches it.
#[test]
fn burst_end_policy_requests_one_cqe_per_burst() {
    let f = frame(256, 4);
    let pkts: Vec<_> = (0..40).map(|i| Packet::frame(i, LKEY, &f)).collect();
    let mem = Mem::new(256);
    let mut lent = Lent::new(256);
    let mut q: Q<'_, Empw> = txq(&mem, &mut lent, 0, TxConfig::dpdk_empw(268, 290, 32));
    assert_eq!(q.tx_burst(&pkts), 40);
    assert_eq!(q.send_queue().producer(), 187);
    let w = wqes(&mem, 0, 187);
    let ce: Vec<u8> = w.iter().map(|w| w.ce).collect();
    assert_eq!(ce.iter().filter(|&&c| c == 2).count(), 1, "{ce:?}");
    assert_eq!(ce.last(), Some(&2));
    // Nothing past the WQE-count threshold but the drain guarantee: a
    // burst of more than half the ring gets its CQE at the end.
    let mem = Mem::new(256);
    let mut lent = Lent::new(256);
    let cfg = TxConfig {
        cqe: CqePolicy::BurstEnd {
            packets: 1000,
            wqebbs: 0,
        },
        ..TxConfig::dpdk_empw(268, 290, 32)
    };
    let mut q: Q<'_, Empw> = txq(&mem, &mut lent, 0, cfg);
    assert_eq!(q.tx_burst(&pkts[..27]), 27);
    assert_eq!(q.send_queue().producer(), 126);
    let w = wqes(&mem, 0, 126);
    assert!(
        w.iter().all(|w| w.ce != 2),
        "126 WQEBBs: under half the ring"
    );
    assert_eq!(q.tx_burst(&pkts[..8]), 8);
    let w = wqes(&mem, 0, q.send_queue().producer());
    let ce: Vec<u8> = w.iter().map(|w| w.ce).collect();
    assert_eq!(ce.iter().filter(|&&c| c == 2).count(), 1, "{ce:?}");
    assert_eq!(ce.last(), Some(&2));
    // One CQE per session: still on the WQE that reaches half the ring.
    let mem = Mem::new(64);
    let mut lent = Lent::new(64);
    let cfg = TxConfig {
        cqe: CqePolicy::EverySessions(1000),
        ..TxConfig::dpdk_empw(268, 290, 32)
    };
    let mut q: Q<'_, Empw> = txq(&mem, &mut lent, 0, cfg);
    assert_eq!(q.tx_burst(&pkts[..10]), 10);
    let w = wqes(&mem, 0, q.send_queue().producer());
    let ce: Vec<u8> = w.iter().map(|w| w.ce).collect();
    assert_eq!(ce, vec![1, 1, 2, 1], "14 + 14 + 14 WQEBBs reach 32");
}

/// A frame refused as too short leaves the ring as it was past the
/// producer index, on DPDK's configurations too (DPDK's inline routine
/// writes a session title there before its length test refuses the frame;
/// the device never reads it, and mlx5dp writes nothing for a refused
/// packet). `tx_burst` and `push` leave the same ring.
#[test]
fn refused_short_frame_writes_nothing() {
    let f = frame(64, 5);
    let short = frame(10, 6);
    let cs = TxOffload::NONE.with_csum();
    let pkts = [
        Packet::frame(0, LKEY, &f).with_offload(cs),
        Packet::frame(1, LKEY, &f).with_offload(cs),
        Packet::frame(2, LKEY, &short).with_offload(cs),
        Packet::frame(3, LKEY, &f).with_offload(cs),
    ];
    let cfg = TxConfig::dpdk_empw(268, 290, 32);
    let (mem_a, mem_b) = (Mem::new(16), Mem::new(16));
    let (mut lent_a, mut lent_b) = (Lent::new(16), Lent::new(16));
    let mut a: Q<'_, Empw> = txq(&mem_a, &mut lent_a, 5, cfg);
    let mut b: Q<'_, Empw> = txq(&mem_b, &mut lent_b, 5, cfg);
    assert_eq!(a.tx_burst(&pkts), 2);
    let mut bb = b.start();
    assert_eq!(bb.push(&pkts[0]), Ok(()));
    assert_eq!(bb.push(&pkts[1]), Ok(()));
    assert_eq!(bb.push(&pkts[2]), Err(TxError::BadLength));
    bb.complete();
    assert_eq!(mem_a.ring(), mem_b.ring());
    let pi = a.send_queue().producer();
    assert_eq!(pi, 8, "2 + 2 × 5 DS: 3 WQEBBs from 5");
    assert_eq!(mem_a.ring()[8 * 64..], vec![0xa5; 8 * 64]);
    // Legacy MPW, the refused frame first: nothing written at all.
    let mem = Mem::new(16);
    let mut lent = Lent::new(16);
    let mut q: Q<'_, LegacyMpw> = txq(&mem, &mut lent, 0, TxConfig::dpdk_mpw(268, 290, 32));
    let eighteen = frame(18, 7);
    assert_eq!(q.tx_burst(&[Packet::frame(0, LKEY, &eighteen)]), 0);
    assert_eq!(mem.ring(), vec![0xa5; 16 * 64]);
}
