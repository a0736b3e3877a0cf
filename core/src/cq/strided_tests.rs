//! [`Cq::poll_strided`] against [`Cq::poll`] with
//! [`crate::rq::StridingWorkQueues`]: twin CQs and striding RQs fed the
//! same random device streams.

use super::tests::Mem;
use super::*;
use crate::mmio::DeviceWord;
use crate::prm::{Be16, Be32, ErrCqe, MprqByteCnt, OpOwn, SopDropQpn};
use crate::rq::test_mem::{Mem as RqMem, Rng};
use crate::rq::{MprqSlot, NoOtherQueues, StridingParams, StridingRq, StridingWorkQueues};
use std::vec::Vec;

/// 16 strides of 64 bytes per WQE.
const P: StridingParams = StridingParams {
    log_num_strides: 4,
    log_stride_bytes: 6,
};
const STRIDES: u16 = 16;
/// WQEs of the RQ.
const WQES: u32 = 4;
/// Entries of the CQ.
const CQES: usize = 32;

/// WQE `i`'s buffer; posted with it as its wr_id, so that the reference
/// side locates a packet from the wr_id `Cq::poll` reports.
fn buf(i: u32) -> u64 {
    0x10_0000 + 0x1000 * u64::from(i)
}

/// One side's memory: a CQ's and its striding RQ's.
struct Side {
    cqm: Mem,
    rqm: RqMem,
    db: DeviceWord<u32>,
}

impl Side {
    fn new(stride: CqeSize, compression: Option<(Layout, MiniCqeFormat)>) -> (Self, Cq) {
        let enhanced = matches!(compression, Some((Layout::Enhanced, _)));
        let cqm = Mem::new(CQES, stride, enhanced);
        let cq = cqm.cq(CqConfig {
            compression,
            striding_rq: true,
            ..CqConfig::default()
        });
        let side = Self {
            cqm,
            rqm: RqMem::new(WQES as usize * 32),
            db: DeviceWord::new(0),
        };
        (side, cq)
    }

    /// The RQ over this memory and `slots`, every WQE posted and published.
    fn rq<'a>(&'a self, slots: &'a mut [MprqSlot]) -> StridingRq<'a> {
        let size = crate::index::RingSize::new(WQES).unwrap();
        let mut rq = StridingRq::new(self.rqm.ring(), size, P, &self.db, slots).unwrap();
        for i in 0..WQES {
            rq.post(buf(i), buf(i), 0x77).unwrap();
        }
        rq.commit();
        rq
    }
}

/// The device: writes completions of one striding RQ into both CQs.
struct Device {
    /// Free-running slot counter.
    pi: u32,
    /// The WQE being filled (free-running) and its consumed strides.
    wqe: u32,
    consumed: u16,
    compression: Option<(Layout, MiniCqeFormat)>,
    /// Enhanced layout: the WQE of the last successful regular CQE (the
    /// title compressed CQEs take their `wqe_id` from).
    title_wqe: Option<u32>,
}

/// One packet (or filler) of the stream.
#[derive(Clone, Copy, Debug)]
struct Pkt {
    stride: u16,
    word: u32,
}

impl Device {
    fn owner(&self, index: u32) -> bool {
        index / CQES as u32 % 2 == 1
    }

    fn enhanced(&self) -> bool {
        matches!(self.compression, Some((Layout::Enhanced, _)))
    }

    /// Writes a regular CQE at `index`: the enhanced layout's validity
    /// iteration count in byte 62 (PRM-FACTS §9.2).
    fn put_regular(&self, sides: &[&Side], index: u32, mut cqe: Cqe64) {
        if self.enhanced() {
            cqe.signature = (index / CQES as u32) as u8;
        }
        self.put(sides, index, &cqe);
    }

    /// The minis of one compressed session or block, all in the WQE being
    /// filled: up to `count` packets (or refused minis), fewer if the WQE
    /// ends first.
    fn minis(&mut self, rng: &mut Rng, count: u32) -> Vec<Pkt> {
        let wqe = self.wqe;
        let mut minis = Vec::new();
        while minis.len() < count as usize && self.wqe == wqe {
            if rng.below(40) == 0 {
                // A mini the RQ refuses.
                minis.push(self.refused(rng));
            } else {
                minis.push(self.packet(rng));
            }
        }
        minis
    }

    /// One mini of a stride format: checksum or header types, stride
    /// index, byte-count word.
    fn mini_bytes(&self, p: &Pkt) -> [u8; 8] {
        let csum = matches!(self.compression, Some((_, MiniCqeFormat::CsumStridx)));
        let head = if csum { 0xbeef } else { 0x2300 };
        let mut m = [0u8; 8];
        m[..2].copy_from_slice(&u16::to_be_bytes(head));
        m[2..4].copy_from_slice(&p.stride.to_be_bytes());
        m[4..].copy_from_slice(&p.word.to_be_bytes());
        m
    }

    /// The next packet of the WQE being filled: a packet of 1 to 5 strides
    /// that fits, or (sometimes, or when it would not fit) a filler of the
    /// strides left. Moves to the next WQE after its last stride.
    fn packet(&mut self, rng: &mut Rng) -> Pkt {
        let left = STRIDES - self.consumed;
        let want = 1 + rng.below(5) as u16;
        let filler = want > left || rng.below(12) == 0;
        let strides = if filler { left } else { want };
        let len = if filler {
            0
        } else {
            1 + rng.below(u64::from(strides) * 64) as u16
        };
        let word = MprqByteCnt::new()
            .with_byte_cnt(len)
            .with_strides(strides)
            .with_filler(filler)
            .into_bits();
        let p = Pkt {
            stride: self.consumed,
            word,
        };
        self.consumed += strides;
        if self.consumed == STRIDES {
            self.consumed = 0;
            self.wqe += 1;
        }
        p
    }

    /// A packet the RQ refuses (a stride already consumed or not yet
    /// reached); the device's state does not move.
    fn refused(&self, rng: &mut Rng) -> Pkt {
        Pkt {
            stride: (self.consumed + 1 + rng.below(3) as u16) % STRIDES,
            word: MprqByteCnt::new()
                .with_byte_cnt(60)
                .with_strides(1)
                .into_bits(),
        }
    }

    fn put(&self, sides: &[&Side], index: u32, cqe: &Cqe64) {
        for s in sides {
            s.cqm.put(index as usize % CQES, cqe);
        }
    }

    fn resp(&self, index: u32, wqe: u32, p: Pkt) -> Cqe64 {
        let mut c = Cqe64 {
            op_own: OpOwn::new()
                .with_opcode(CqeOpcode::RespSend.raw())
                .with_owner(self.owner(index)),
            ..Cqe64::default()
        };
        c.wqe_id = Be16::new(wqe as u16);
        c.wqe_counter = Be16::new(p.stride);
        c.byte_cnt = Be32::new(p.word);
        c.sop_drop_qpn = SopDropQpn::new().with_qpn(0x11);
        c
    }

    /// Writes one item if the CQ has room before `ci` and the RQ has the
    /// WQE published (`head`); returns whether it wrote an error CQE.
    fn step(&mut self, sides: &[&Side], rng: &mut Rng, ci: u32, head: u32) -> Option<bool> {
        let room = CQES as u32 - self.pi.wrapping_sub(ci);
        if room == 0 {
            return None;
        }
        if self.wqe >= head {
            if rng.below(4) != 0 {
                return None;
            }
            // A packet for a WQE the doorbell record has not published:
            // refused (the stream goes on as if it had not been written).
            let p = Pkt {
                stride: self.consumed,
                word: MprqByteCnt::new()
                    .with_byte_cnt(60)
                    .with_strides(1)
                    .into_bits(),
            };
            self.put_regular(sides, self.pi, self.resp(self.pi, self.wqe, p));
            self.title_wqe = Some(self.wqe);
            self.pi += 1;
            return Some(false);
        }
        let basic = matches!(self.compression, Some((Layout::Basic, _)));
        let roll = rng.below(100);
        if roll < 2 {
            // An error CQE: the WQE being filled ends, the RQ errs.
            let e = ErrCqe {
                syndrome: 0x01,
                eth_wqe_id: Be16::new(self.wqe as u16),
                wqe_counter: Be16::new(self.consumed),
                op_own: OpOwn::new()
                    .with_opcode(CqeOpcode::RespErr.raw())
                    .with_owner(self.owner(self.pi)),
                ..ErrCqe::default()
            };
            self.put_regular(sides, self.pi, zerocopy::transmute!(e));
            self.pi += 1;
            return Some(true);
        }
        if roll < 5 {
            // A CQE the RQ refuses (a stride already consumed or not yet
            // reached): the stream goes on as if it had not been written.
            let p = self.refused(rng);
            self.put_regular(sides, self.pi, self.resp(self.pi, self.wqe, p));
            // (In the enhanced layout a refused CQE still becomes the title.)
            self.title_wqe = Some(self.wqe);
            self.pi += 1;
            return Some(false);
        }
        if self.enhanced() && roll < 60 && self.title_wqe == Some(self.wqe) {
            // A compressed CQE of 1 to 7 minis of the title's WQE; it
            // stands for as many indices.
            let count = (1 + rng.below(7) as u32).min(room);
            let minis = self.minis(rng, count);
            let mut b = [0u8; 64];
            for (i, p) in minis.iter().enumerate() {
                b[i * 8..i * 8 + 8].copy_from_slice(&self.mini_bytes(p));
            }
            b[62] = (self.pi / CQES as u32) as u8;
            b[63] = OpOwn::new()
                .with_format(3)
                .with_opcode(minis.len() as u8 - 1)
                .into_bits();
            self.put(sides, self.pi, &zerocopy::transmute!(b));
            self.pi += minis.len() as u32;
            return Some(false);
        }
        if basic && roll < 45 && room >= 2 {
            // A session of 2 to 20 minis, all of one WQE.
            let mut count = 2 + rng.below(19) as u32;
            count = count.min(room);
            let wqe = self.wqe;
            let first = self.consumed;
            let minis = self.minis(rng, count);
            let mut title = self.resp(
                self.pi,
                wqe,
                Pkt {
                    stride: first,
                    word: 0,
                },
            );
            if minis.len() < 2 {
                // The WQE ended first: a plain CQE.
                self.put(sides, self.pi, &self.resp(self.pi, wqe, minis[0]));
                self.pi += 1;
                return Some(false);
            }
            let count = minis.len() as u32;
            title.op_own = title.op_own.with_format(3);
            title.byte_cnt = Be32::new(count);
            for (k, chunk) in minis.chunks(8).enumerate() {
                let mut array = [0u8; 64];
                for (m, p) in array.chunks_exact_mut(8).zip(chunk) {
                    m.copy_from_slice(&self.mini_bytes(p));
                }
                let at = self.pi + zip::basic_array_offset(k as u32);
                for s in sides {
                    s.cqm.put_bytes(
                        (at as usize % CQES) * s.cqm.stride + s.cqm.stride - 64,
                        &array,
                    );
                }
            }
            self.put(sides, self.pi, &title);
            self.pi += count;
            return Some(false);
        }
        let wqe = self.wqe;
        let p = self.packet(rng);
        self.put_regular(sides, self.pi, self.resp(self.pi, wqe, p));
        self.title_wqe = Some(wqe);
        self.pi += 1;
        Some(false)
    }
}

/// The packet `Cq::poll` reports through `StridingWorkQueues` (whose wr_id
/// is the WQE's buffer here).
fn reference(c: &Completion) -> StridedPacket {
    let stride_index = c.stride_index().unwrap();
    let strides = c.consumed_strides().unwrap();
    let ok = c.status() == WcStatus::Success;
    let done = !ok || stride_index + strides == STRIDES;
    StridedPacket {
        addr: c.wr_id() + (u64::from(stride_index) << P.log_stride_bytes),
        len: c.mprq_byte_cnt().byte_cnt(),
        stride_index,
        strides,
        status: c.status().raw() as u8,
        flags: u8::from(done) | (u8::from(c.origin() == Origin::Mini) << 1),
    }
}

fn run_case(seed: u64, stride: CqeSize, compression: Option<(Layout, MiniCqeFormat)>) -> usize {
    let mut rng = Rng(seed | 1);
    let (a, mut cq_a) = Side::new(stride, compression);
    let (b, mut cq_b) = Side::new(stride, compression);
    let mut slots_a = std::vec![MprqSlot::EMPTY; WQES as usize];
    let mut slots_b = slots_a.clone();
    let mut rq_a = a.rq(&mut slots_a);
    let mut rq_b = b.rq(&mut slots_b);
    let sides = [&a, &b];
    let mut dev = Device {
        pi: 0,
        wqe: 0,
        consumed: 0,
        compression,
        title_wqe: None,
    };
    let steps = if cfg!(miri) { 6 } else { 120 };
    let mut packets = 0;
    let mut errored = false;
    for _ in 0..steps {
        for _ in 0..rng.below(24) {
            if errored {
                break;
            }
            match dev.step(&sides, &mut rng, cq_a.consumer_index(), rq_a.head()) {
                Some(e) => errored |= e,
                None => break,
            }
        }
        let max = 1 + rng.below(40) as usize;
        let mut out_a = std::vec![StridedPacket::default(); max];
        let ra = cq_a.poll_strided(&mut rq_a, &mut out_a);
        let mut got_b = Vec::new();
        let rb = {
            let mut rest = NoOtherQueues;
            let mut wqs = StridingWorkQueues::new(&mut rq_b, &mut rest);
            cq_b.poll(&mut wqs, max, |c| got_b.push(reference(c)))
        };
        match (ra, rb) {
            (Ok(n), Ok(m)) => {
                assert_eq!(n, m, "seed {seed:#x}");
                assert_eq!(out_a[..n], got_b[..], "seed {seed:#x}");
                packets += n;
            }
            (Err(e), Err(f)) => assert_eq!(e, f, "seed {seed:#x}"),
            other => panic!("seed {seed:#x}: {other:?}"),
        }
        assert_eq!(cq_a.consumer_index(), cq_b.consumer_index());
        assert_eq!(a.cqm.dbrec(), b.cqm.dbrec());
        for s in 0..CQES {
            assert_eq!(a.cqm.slot_bytes(s), b.cqm.slot_bytes(s), "slot {s}");
        }
        assert_eq!(
            (
                rq_a.head(),
                rq_a.tail(),
                rq_a.consumed_strides(),
                rq_a.is_error()
            ),
            (
                rq_b.head(),
                rq_b.tail(),
                rq_b.consumed_strides(),
                rq_b.is_error()
            ),
        );
        assert_eq!(cq_a.is_broken(), cq_b.is_broken());
        rq_a.commit();
        rq_b.commit();
        assert_eq!(
            a.rqm.bytes(0, WQES as usize * 32),
            b.rqm.bytes(0, WQES as usize * 32)
        );
        assert_eq!(a.db.read(), b.db.read());
        if cq_a.is_broken() {
            break;
        }
    }
    packets
}

#[test]
fn poll_strided_matches_poll_on_random_streams() {
    let cases = if cfg!(miri) { 2 } else { 150 };
    let configs = [
        (CqeSize::B64, None),
        (CqeSize::B128, None),
        (
            CqeSize::B64,
            Some((Layout::Basic, MiniCqeFormat::CsumStridx)),
        ),
        (
            CqeSize::B128,
            Some((Layout::Basic, MiniCqeFormat::CsumStridx)),
        ),
        (
            CqeSize::B64,
            Some((Layout::Basic, MiniCqeFormat::L34hStridx)),
        ),
        // Minis without a stride index: the general steps throughout.
        (CqeSize::B64, Some((Layout::Basic, MiniCqeFormat::Hash))),
        (
            CqeSize::B64,
            Some((Layout::Enhanced, MiniCqeFormat::CsumStridx)),
        ),
        (
            CqeSize::B128,
            Some((Layout::Enhanced, MiniCqeFormat::L34hStridx)),
        ),
        (CqeSize::B64, Some((Layout::Enhanced, MiniCqeFormat::Hash))),
    ];
    let mut packets = 0;
    for (i, (size, compression)) in configs.into_iter().enumerate() {
        for case in 0..cases {
            let seed = ((0x57d1d + i as u64) << 20) | case;
            packets += run_case(seed, size, compression);
        }
    }
    assert!(
        packets > if cfg!(miri) { 10 } else { 20_000 },
        "{packets} packets"
    );
}

#[test]
fn poll_strided_refuses_a_cyclic_cq() {
    let m = Mem::new(8, CqeSize::B64, false);
    let mut cq = m.cq(CqConfig::default());
    let (side, _) = Side::new(CqeSize::B64, None);
    let mut slots = std::vec![MprqSlot::EMPTY; WQES as usize];
    let mut rq = side.rq(&mut slots);
    let mut out = [StridedPacket::default(); 4];
    assert_eq!(
        cq.poll_strided(&mut rq, &mut out),
        Err(PollError::NotStriding)
    );
    assert_eq!(cq.consumer_index(), 0);
    assert_eq!(m.dbrec(), [0xa5; 8]);
}
