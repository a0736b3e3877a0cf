//! Unit tests of the emulated device. They play the core by hand: WQEs are
//! byte arrays built from `prm` layouts here (no core builder), written into
//! the rings, published through the doorbell records; CQEs are read back
//! from the CQ rings and decoded with `prm` views.

use super::device::FlowRule;
use super::*;
use mlx5dp::prm::{
    AtomicSeg, Av, Be16, Be32, Be64, Cqe64, CqeOpcode, CtrlSeg, DataSeg, DqpDct, EthSeg, FmCeSe,
    MaskedAtomicSeg64, MaskedFa32Seg, MiniCqeFormat, MprqByteCnt, OpmodIdxOpcode, QpnDs, RaddrSeg,
    SendOpcode, SrqNextSeg, Syndrome, XrcSeg, INLINE_SEG, INVALID_LKEY, OPC_MOD_EXT_ATOMIC_4B,
    OPC_MOD_EXT_ATOMIC_8B, OPC_MOD_MPW, WQE_CTRL_CQ_UPDATE,
};
use std::sync::Arc;
use zerocopy::{FromBytes, IntoBytes};

mod ah;
mod mw;

const SIG: u8 = WQE_CTRL_CQ_UPDATE;

// --------------------------------------------------------------------------
// Segment builders (prm layouts only)
// --------------------------------------------------------------------------

fn data_seg(addr: u64, lkey: u32, len: u32) -> Vec<u8> {
    DataSeg {
        byte_count: Be32::new(len),
        lkey: Be32::new(lkey),
        addr: Be64::new(addr),
    }
    .as_bytes()
    .to_vec()
}

fn inline_seg(data: &[u8]) -> Vec<u8> {
    let mut v = (INLINE_SEG | data.len() as u32).to_be_bytes().to_vec();
    v.extend_from_slice(data);
    v.resize((4 + data.len()).div_ceil(16) * 16, 0);
    v
}

fn raddr_seg(raddr: u64, rkey: u32) -> Vec<u8> {
    RaddrSeg {
        raddr: Be64::new(raddr),
        rkey: Be32::new(rkey),
        reserved: Be32::new(0),
    }
    .as_bytes()
    .to_vec()
}

/// The datagram segment of a UD send: the address vector `av` (from
/// `Device::create_ah`), with the Q_Key and remote QPN written over it as
/// libmlx5's `_set_datagram_seg` does.
fn ud_av(av: &Av, qkey: u32, dqpn: u32) -> Vec<u8> {
    let mut av = *av;
    av.qkey.set(qkey);
    av.dqp_dct = DqpDct::new().with_dqp_dct(dqpn).with_extended(true);
    av.as_bytes().to_vec()
}

fn eth_seg(cs_flags: u8, mss: u16, inline_hdr: &[u8]) -> Vec<u8> {
    let mut e = EthSeg {
        cs_flags: mlx5dp::prm::EthCsFlags::from_bits(cs_flags),
        ..EthSeg::default()
    };
    e.mss.set(mss);
    e.inline_hdr_sz.set(inline_hdr.len() as u16);
    let first = inline_hdr.len().min(2);
    e.inline_hdr_start[..first].copy_from_slice(&inline_hdr[..first]);
    let mut v = e.as_bytes().to_vec();
    if inline_hdr.len() > 2 {
        let mut rest = inline_hdr[2..].to_vec();
        rest.resize((inline_hdr.len() - 2).div_ceil(16) * 16, 0);
        v.extend_from_slice(&rest);
    }
    v
}

// --------------------------------------------------------------------------
// The core's side, by hand
// --------------------------------------------------------------------------

/// A send queue as a test posts to it.
struct TSq {
    ring: Arc<DmaBlock>,
    dbrec: Arc<DmaBlock>,
    uar: Arc<DmaBlock>,
    qpn: u32,
    size: u32,
    pi: u32,
}

impl TSq {
    fn new(dev: &Device, qpn: Qpn) -> Self {
        let (ring, dbrec, uar) = dev.test_sq(qpn);
        let size = dev.sq_parts(qpn).unwrap().wqe_cnt;
        Self {
            ring,
            dbrec,
            uar,
            qpn: qpn.0,
            size,
            pi: 0,
        }
    }

    /// Builds the WQE (ctrl + `segs`) that would be posted next.
    fn build(
        &self,
        opcode: SendOpcode,
        opmod: u8,
        fm_ce_se: u8,
        imm: u32,
        segs: &[Vec<u8>],
    ) -> Vec<u8> {
        let body: Vec<u8> = segs.concat();
        assert_eq!(body.len() % 16, 0);
        let ds = (1 + body.len() / 16) as u8;
        let ctrl = CtrlSeg {
            opmod_idx_opcode: OpmodIdxOpcode::new()
                .with_opcode(opcode.raw())
                .with_wqe_index(self.pi as u16)
                .with_opmod(opmod),
            qpn_ds: QpnDs::new().with_qpn(self.qpn).with_ds(ds),
            signature: 0,
            dci_stream_channel_id: Be16::new(0),
            fm_ce_se: FmCeSe::from_bits(fm_ce_se),
            imm: Be32::new(imm),
        };
        let mut w = ctrl.as_bytes().to_vec();
        w.extend_from_slice(&body);
        w
    }

    /// Writes raw WQE bytes at the producer position (wrapping), without
    /// publishing. Returns the WQE index.
    fn write(&mut self, wqe: &[u8]) -> u16 {
        let idx = self.pi as u16;
        let bbs = wqe.len().div_ceil(64) as u32;
        let mut padded = wqe.to_vec();
        padded.resize(bbs as usize * 64, 0);
        for k in 0..bbs {
            let slot = (self.pi + k) & (self.size - 1);
            self.ring
                .write(
                    slot as usize * 64,
                    &padded[k as usize * 64..(k as usize + 1) * 64],
                )
                .unwrap();
        }
        self.pi += bbs;
        idx
    }

    /// Publishes everything written: the SQ doorbell record.
    fn ring_dbrec(&self) {
        self.dbrec
            .write(4, &(self.pi & 0xffff).to_be_bytes())
            .unwrap();
    }

    /// Builds, writes and publishes one WQE.
    fn post(
        &mut self,
        opcode: SendOpcode,
        opmod: u8,
        fm_ce_se: u8,
        imm: u32,
        segs: &[Vec<u8>],
    ) -> u16 {
        let w = self.build(opcode, opmod, fm_ce_se, imm, segs);
        let idx = self.write(&w);
        self.ring_dbrec();
        idx
    }
}

/// A receive queue (cyclic) as a test posts to it.
struct TRq {
    ring: Arc<DmaBlock>,
    dbrec: Arc<DmaBlock>,
    stride: u32,
    size: u32,
    pi: u32,
    srq: bool,
}

impl TRq {
    fn new(dev: &Device, qpn: Qpn) -> Self {
        let (ring, dbrec) = dev.test_rq(qpn);
        let p = dev.rq_parts(qpn).unwrap();
        Self {
            ring,
            dbrec,
            stride: p.stride,
            size: p.wqe_cnt,
            pi: 0,
            srq: false,
        }
    }

    fn new_srq(dev: &Device, srqn: Srqn) -> Self {
        let (ring, dbrec) = dev.test_srq(srqn);
        let p = dev.srq_parts(srqn).unwrap();
        Self {
            ring,
            dbrec,
            stride: p.stride,
            size: p.wqe_cnt,
            pi: 0,
            srq: true,
        }
    }

    /// Posts one receive: data segments, terminated by `MLX5_INVALID_LKEY`
    /// when there is room (SRQ: the next segment stays as linked).
    fn post(&mut self, sges: &[(u64, u32, u32)]) {
        let slot = (self.pi & (self.size - 1)) as usize;
        let base = slot * self.stride as usize + if self.srq { SrqNextSeg::SIZE } else { 0 };
        let room = self.stride as usize - if self.srq { SrqNextSeg::SIZE } else { 0 };
        let mut bytes: Vec<u8> = sges
            .iter()
            .flat_map(|&(a, k, l)| data_seg(a, k, l))
            .collect();
        if bytes.len() < room {
            bytes.extend(data_seg(0, INVALID_LKEY, 0));
        }
        self.ring.write(base, &bytes).unwrap();
        self.pi += 1;
        // RQ: the QP record's word 0 (`MLX5_RCV_DBR`); SRQ: its only word.
        self.dbrec
            .write(0, &(self.pi & 0xffff).to_be_bytes())
            .unwrap();
    }
}

/// A CQ as a test polls it.
struct TCq {
    ring: Arc<DmaBlock>,
    dbrec: Arc<DmaBlock>,
    uar: Arc<DmaBlock>,
    size: u32,
    cqe_bytes: usize,
    ci: u32,
}

impl TCq {
    fn new(dev: &Device, cqn: Cqn) -> Self {
        let (ring, dbrec, uar) = dev.test_cq(cqn);
        let p = dev.cq_parts(cqn).unwrap();
        Self {
            ring,
            dbrec,
            uar,
            size: p.cqe_cnt,
            cqe_bytes: p.cqe_size as usize,
            ci: 0,
        }
    }

    /// The 64-byte CQE part of slot `counter`.
    fn slot(&self, counter: u32) -> Cqe64 {
        let slot = (counter & (self.size - 1)) as usize;
        let mut b = [0u8; 64];
        self.ring
            .read(slot * self.cqe_bytes + self.cqe_bytes - 64, &mut b)
            .unwrap();
        Cqe64::read_from_bytes(&b[..]).unwrap()
    }

    fn parity(&self, counter: u32) -> bool {
        (counter / self.size) & 1 == 1
    }

    /// The next software-owned regular CQE (basic owner rule), consumed.
    fn poll(&mut self) -> Option<Cqe64> {
        let c = self.slot(self.ci);
        if c.opcode() == CqeOpcode::Invalid || c.op_own.owner() != self.parity(self.ci) {
            return None;
        }
        self.ci += 1;
        self.dbrec
            .write(0, &(self.ci & 0xff_ffff).to_be_bytes())
            .unwrap();
        Some(c)
    }

    /// Advances the consumer index by `n` (a compressed session).
    fn consume(&mut self, n: u32) {
        self.ci += n;
        self.dbrec
            .write(0, &(self.ci & 0xff_ffff).to_be_bytes())
            .unwrap();
    }

    fn drain(&mut self) -> Vec<Cqe64> {
        std::iter::from_fn(|| self.poll()).collect()
    }
}

// --------------------------------------------------------------------------
// Rigs
// --------------------------------------------------------------------------

fn cq(dev: &mut Device, n: u32) -> Cqn {
    dev.create_cq(CqInit {
        cqe_cnt: n,
        cqe_size: CqeSize::B64,
        compression: None,
        ignore_overrun: false,
    })
    .unwrap()
}

fn qp(dev: &mut Device, t: QpType, pd: Pdn, scq: Cqn, rcq: Cqn, rq: RqInit) -> Qpn {
    dev.create_qp(QpInit {
        qp_type: t,
        pd,
        send_cq: Some(scq),
        recv_cq: Some(rcq),
        sq_wqebbs: 64,
        max_send_sge: 4,
        max_inline: 256,
        rq,
        xrcd: None,
        vlan_strip: false,
    })
    .unwrap()
}

fn connect(dev: &mut Device, a: Qpn, b: Qpn, access: Access) {
    for (x, y) in [(a, b), (b, a)] {
        let attr = QpAttr {
            access,
            dest_qpn: Some(y),
            ..QpAttr::default()
        };
        dev.modify_qp(x, QpState::Init, &attr).unwrap();
        dev.modify_qp(x, QpState::Rtr, &attr).unwrap();
    }
    for x in [a, b] {
        let attr = QpAttr {
            rnr_retry: 0,
            ..QpAttr::default()
        };
        dev.modify_qp(x, QpState::Rts, &attr).unwrap();
    }
}

fn to_rts(dev: &mut Device, q: Qpn, attr: QpAttr) {
    dev.modify_qp(q, QpState::Init, &attr).unwrap();
    dev.modify_qp(q, QpState::Rtr, &attr).unwrap();
    dev.modify_qp(q, QpState::Rts, &attr).unwrap();
}

/// Two connected QPs of one type, with a CQ each side and buffers.
struct Pair {
    dev: Device,
    a: Qpn,
    b: Qpn,
    a_cq: Cqn,
    b_cq: Cqn,
    buf: Arc<DmaBlock>,
    key: u32,
    rbuf: Arc<DmaBlock>,
    rkey: u32,
}

fn pair(t: QpType, access: Access) -> Pair {
    pair_on(Device::default(), t, access)
}

/// [`pair`] on a device built from `cfg`.
fn pair_cfg(cfg: DeviceConfig, t: QpType, access: Access) -> Pair {
    pair_on(Device::new(cfg), t, access)
}

fn pair_on(mut dev: Device, t: QpType, access: Access) -> Pair {
    let pd = dev.alloc_pd();
    let a_cq = cq(&mut dev, 64);
    let b_cq = cq(&mut dev, 64);
    let rq = RqInit::Cyclic {
        wqe_cnt: 16,
        max_sge: 2,
    };
    let a = qp(&mut dev, t, pd, a_cq, a_cq, rq);
    let b = qp(&mut dev, t, pd, b_cq, b_cq, rq);
    connect(&mut dev, a, b, access);
    let buf = dev.alloc_buffer(4096).unwrap();
    let key = dev.reg_mr(pd, &buf, Access::LOCAL_WRITE).unwrap();
    let rbuf = dev.alloc_buffer(4096).unwrap();
    let rkey = dev.reg_mr(pd, &rbuf, Access::ALL).unwrap();
    Pair {
        dev,
        a,
        b,
        a_cq,
        b_cq,
        buf,
        key,
        rbuf,
        rkey,
    }
}

fn err_of(c: &Cqe64) -> (CqeOpcode, Syndrome, u8, u16) {
    let e = c.as_err();
    (
        c.opcode(),
        e.syndrome(),
        e.vendor_err_synd,
        e.wqe_counter.get(),
    )
}

// --------------------------------------------------------------------------
// RC send/receive, RDMA, atomics
// --------------------------------------------------------------------------

#[test]
fn rc_send_lands_in_the_receive_and_completes_both_sides() {
    let mut p = pair(QpType::Rc, Access::ALL);
    p.buf.write(0, b"hello, emulated connectx").unwrap();
    let mut rq = TRq::new(&p.dev, p.b);
    rq.post(&[
        (p.rbuf.addr(), p.rkey, 10),
        (p.rbuf.addr() + 100, p.rkey, 100),
    ]);
    let mut sq = TSq::new(&p.dev, p.a);
    // Unsignalled NOP, then a signalled send with immediate.
    sq.post(SendOpcode::Nop, 0, 0, 0, &[]);
    let idx = sq.post(
        SendOpcode::SendImm,
        0,
        SIG,
        0xdead_beef,
        &[data_seg(p.buf.addr(), p.key, 24)],
    );
    let rep = p.dev.process_sq(p.a).unwrap();
    assert_eq!(rep.wqes, 2);

    let mut got = [0u8; 24];
    p.rbuf.read(0, &mut got[..10]).unwrap();
    p.rbuf.read(100, &mut got[10..]).unwrap();
    assert_eq!(&got, b"hello, emulated connectx");

    let mut scq = TCq::new(&p.dev, p.a_cq);
    let req = scq.drain();
    assert_eq!(req.len(), 1, "the unsignalled NOP has no CQE");
    assert_eq!(req[0].opcode(), CqeOpcode::Req);
    assert_eq!(req[0].send_opcode(), SendOpcode::SendImm);
    assert_eq!(req[0].sop_drop_qpn.qpn(), p.a.0);
    assert_eq!(req[0].wqe_counter.get(), idx);

    let mut rcq = TCq::new(&p.dev, p.b_cq);
    let resp = rcq.drain();
    assert_eq!(resp.len(), 1);
    let r = &resp[0];
    assert_eq!(r.opcode(), CqeOpcode::RespSendImm);
    assert_eq!(r.byte_cnt.get(), 24);
    assert_eq!(r.imm_inval_pkey.to_bytes(), 0xdead_beefu32.to_be_bytes());
    assert_eq!(r.flags_rqpn.rqpn(), p.a.0);
    assert_eq!(r.sop_drop_qpn.qpn(), p.b.0);
    assert_eq!(r.wqe_counter.get(), 0);
    assert!(r.timestamp.get() > 0);
}

/// Sends one RC message and returns the (requester, responder) CQE
/// timestamps.
fn timestamps(p: &mut Pair) -> (u64, u64) {
    let mut rq = TRq::new(&p.dev, p.b);
    rq.post(&[(p.rbuf.addr(), p.rkey, 64)]);
    let mut sq = TSq::new(&p.dev, p.a);
    sq.post(SendOpcode::Send, 0, SIG, 0, &[inline_seg(b"tick")]);
    p.dev.process_sq(p.a).unwrap();
    let req = TCq::new(&p.dev, p.a_cq).drain();
    let resp = TCq::new(&p.dev, p.b_cq).drain();
    (req[0].timestamp.get(), resp[0].timestamp.get())
}

#[test]
fn completion_timestamp_clock_modes() {
    // Manual: `start`, then `step` more per completion (the responder's
    // CQE is written first, during delivery).
    let cfg = DeviceConfig {
        clock: ClockMode::Manual {
            start: 0x5000,
            step: 7,
        },
        ..DeviceConfig::default()
    };
    let mut p = pair_cfg(cfg, QpType::Rc, Access::ALL);
    assert_eq!(timestamps(&mut p), (0x5007, 0x5000));

    // Free-running HCA ticks at `hca_core_clock_khz`.
    let mut cfg = DeviceConfig {
        clock: ClockMode::FreeRunning,
        ..DeviceConfig::default()
    };
    cfg.caps.hca_core_clock_khz = 156_250;
    let mut p = pair_cfg(cfg, QpType::Rc, Access::ALL);
    let before = p.dev.hca_core_clock();
    let (req, resp) = timestamps(&mut p);
    let after = p.dev.hca_core_clock();
    assert!(
        before <= resp && resp <= req && req <= after,
        "{before} {resp} {req} {after}"
    );

    // Real time: seconds in [63:32], nanoseconds in [31:0].
    let cfg = DeviceConfig {
        clock: ClockMode::RealTime,
        ..DeviceConfig::default()
    };
    let mut p = pair_cfg(cfg, QpType::Rc, Access::ALL);
    let now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
    };
    let before = now();
    let (req, _) = timestamps(&mut p);
    let after = now();
    let (sec, ns) = (req >> 32, req & 0xffff_ffff);
    assert!(ns < 1_000_000_000);
    assert!(before.as_secs() <= sec && sec <= after.as_secs());
    let t = std::time::Duration::new(sec, ns as u32);
    assert!(before <= t && t <= after, "{before:?} {t:?} {after:?}");
}

#[test]
fn inline_send_and_wrapping_wqe() {
    let mut p = pair(QpType::Rc, Access::ALL);
    let mut rq = TRq::new(&p.dev, p.b);
    let mut sq = TSq::new(&p.dev, p.a);
    // Move the producer to the last WQEBB so the next 2-BB WQE wraps.
    for _ in 0..63 {
        sq.post(SendOpcode::Nop, 0, 0, 0, &[]);
    }
    p.dev.process_sq(p.a).unwrap();
    rq.post(&[(p.rbuf.addr(), p.rkey, 200)]);
    let payload: Vec<u8> = (0..70u8).collect();
    let idx = sq.post(SendOpcode::Send, 0, SIG, 0, &[inline_seg(&payload)]);
    assert_eq!(idx, 63);
    p.dev.process_sq(p.a).unwrap();
    let mut got = vec![0u8; 70];
    p.rbuf.read(0, &mut got).unwrap();
    assert_eq!(got, payload);
    let c = TCq::new(&p.dev, p.a_cq).drain();
    assert_eq!(c.last().map(|c| c.wqe_counter.get()), Some(63));
}

#[test]
fn rdma_write_read_and_write_with_immediate() {
    let mut p = pair(QpType::Rc, Access::ALL);
    p.buf.write(0, b"written remotely").unwrap();
    p.rbuf.write(2048, b"read back from far").unwrap();
    let mut rq = TRq::new(&p.dev, p.b);
    rq.post(&[(p.rbuf.addr() + 3000, p.rkey, 16)]);
    let mut sq = TSq::new(&p.dev, p.a);
    sq.post(
        SendOpcode::RdmaWrite,
        0,
        SIG,
        0,
        &[
            raddr_seg(p.rbuf.addr() + 512, p.rkey),
            data_seg(p.buf.addr(), p.key, 16),
        ],
    );
    sq.post(
        SendOpcode::RdmaRead,
        0,
        SIG,
        0,
        &[
            raddr_seg(p.rbuf.addr() + 2048, p.rkey),
            data_seg(p.buf.addr() + 100, p.key, 18),
        ],
    );
    sq.post(
        SendOpcode::RdmaWriteImm,
        0,
        SIG,
        7,
        &[raddr_seg(p.rbuf.addr() + 600, p.rkey), inline_seg(b"imm!")],
    );
    assert_eq!(p.dev.process_sq(p.a).unwrap().wqes, 3);

    let mut w = [0u8; 16];
    p.rbuf.read(512, &mut w).unwrap();
    assert_eq!(&w, b"written remotely");
    let mut r = [0u8; 18];
    p.buf.read(100, &mut r).unwrap();
    assert_eq!(&r, b"read back from far");
    let mut i = [0u8; 4];
    p.rbuf.read(600, &mut i).unwrap();
    assert_eq!(&i, b"imm!");

    let req = TCq::new(&p.dev, p.a_cq).drain();
    let ops: Vec<_> = req
        .iter()
        .map(|c| (c.send_opcode(), c.byte_cnt.get()))
        .collect();
    assert_eq!(
        ops,
        [
            (SendOpcode::RdmaWrite, 0),
            (SendOpcode::RdmaRead, 18),
            (SendOpcode::RdmaWriteImm, 0)
        ]
    );
    let resp = TCq::new(&p.dev, p.b_cq).drain();
    assert_eq!(resp.len(), 1);
    assert_eq!(resp[0].opcode(), CqeOpcode::RespWrImm);
    assert_eq!(resp[0].byte_cnt.get(), 4);
    assert_eq!(resp[0].imm_inval_pkey.get(), 7);
}

#[test]
fn atomics_standard_and_masked() {
    let mut p = pair(QpType::Rc, Access::ALL);
    let base = p.rbuf.addr();
    p.rbuf.write(0, &100u64.to_ne_bytes()).unwrap(); // host endianness (default)
    p.rbuf.write(8, &5u64.to_ne_bytes()).unwrap();
    p.rbuf
        .write(16, &0x1122_3344_5566_7788u64.to_be_bytes())
        .unwrap(); // masked: big-endian
    p.rbuf.write(24, &0x00ff_00ffu32.to_be_bytes()).unwrap();
    let mut sq = TSq::new(&p.dev, p.a);
    let fa = AtomicSeg {
        swap_add: Be64::new(23),
        compare: Be64::new(0),
    }
    .as_bytes()
    .to_vec();
    sq.post(
        SendOpcode::AtomicFa,
        0,
        SIG,
        0,
        &[
            raddr_seg(base, p.rkey),
            fa,
            data_seg(p.buf.addr(), p.key, 8),
        ],
    );
    let cs = AtomicSeg {
        swap_add: Be64::new(9),
        compare: Be64::new(5),
    }
    .as_bytes()
    .to_vec();
    sq.post(
        SendOpcode::AtomicCs,
        0,
        SIG,
        0,
        &[
            raddr_seg(base + 8, p.rkey),
            cs,
            data_seg(p.buf.addr() + 8, p.key, 8),
        ],
    );
    let mcs = MaskedAtomicSeg64 {
        swap_add: Be64::new(0xaaaa_0000_0000_0000),
        compare: Be64::new(0x1100_0000_0000_0000),
        swap_add_mask: Be64::new(0xffff_0000_0000_0000),
        compare_mask: Be64::new(0xff00_0000_0000_0000),
    }
    .as_bytes()
    .to_vec();
    sq.post(
        SendOpcode::AtomicMaskedCs,
        OPC_MOD_EXT_ATOMIC_8B,
        SIG,
        0,
        &[
            raddr_seg(base + 16, p.rkey),
            mcs,
            data_seg(p.buf.addr() + 16, p.key, 8),
        ],
    );
    // 4-byte masked fetch-add with a boundary at every byte: per-byte adds.
    let mfa = MaskedFa32Seg {
        add: Be32::new(0x0101_0101),
        field_boundary: Be32::new(0x8080_8080),
        reserved: [0; 8],
    }
    .as_bytes()
    .to_vec();
    sq.post(
        SendOpcode::AtomicMaskedFa,
        OPC_MOD_EXT_ATOMIC_4B,
        SIG,
        0,
        &[
            raddr_seg(base + 24, p.rkey),
            mfa,
            data_seg(p.buf.addr() + 24, p.key, 4),
        ],
    );
    assert_eq!(p.dev.process_sq(p.a).unwrap().wqes, 4);

    let u64_at = |b: &DmaBlock, off: usize| {
        let mut x = [0u8; 8];
        b.read(off, &mut x).unwrap();
        x
    };
    assert_eq!(u64::from_ne_bytes(u64_at(&p.rbuf, 0)), 123);
    assert_eq!(u64::from_ne_bytes(u64_at(&p.buf, 0)), 100);
    assert_eq!(u64::from_ne_bytes(u64_at(&p.rbuf, 8)), 9);
    assert_eq!(u64::from_ne_bytes(u64_at(&p.buf, 8)), 5);
    assert_eq!(
        u64::from_be_bytes(u64_at(&p.rbuf, 16)),
        0xaaaa_3344_5566_7788
    );
    assert_eq!(
        u64::from_be_bytes(u64_at(&p.buf, 16)),
        0x1122_3344_5566_7788
    );
    let mut w = [0u8; 4];
    p.rbuf.read(24, &mut w).unwrap();
    assert_eq!(
        u32::from_be_bytes(w),
        0x0100_0100,
        "0xff + 1 wraps inside its byte"
    );
    let req = TCq::new(&p.dev, p.a_cq).drain();
    assert_eq!(
        req.iter().map(|c| c.byte_cnt.get()).collect::<Vec<_>>(),
        [8, 8, 8, 4]
    );
}

#[test]
fn srq_and_xrc_srq_delivery() {
    // Plain SRQ behind an RC QP.
    let mut dev = Device::default();
    let pd = dev.alloc_pd();
    let c = cq(&mut dev, 64);
    let srq = dev
        .create_srq(SrqInit {
            pd,
            wqe_cnt: 8,
            max_sge: 1,
            cq: None,
            xrcd: None,
        })
        .unwrap();
    let a = qp(
        &mut dev,
        QpType::Rc,
        pd,
        c,
        c,
        RqInit::Cyclic {
            wqe_cnt: 4,
            max_sge: 1,
        },
    );
    let b = qp(&mut dev, QpType::Rc, pd, c, c, RqInit::Srq(srq));
    connect(&mut dev, a, b, Access::ALL);
    let buf = dev.alloc_buffer(4096).unwrap();
    let key = dev.reg_mr(pd, &buf, Access::LOCAL_WRITE).unwrap();
    let mut r = TRq::new_srq(&dev, srq);
    r.post(&[(buf.addr() + 1024, key, 64)]);
    r.post(&[(buf.addr() + 2048, key, 64)]);
    let mut sq = TSq::new(&dev, a);
    sq.post(SendOpcode::Send, 0, 0, 0, &[inline_seg(b"one")]);
    sq.post(SendOpcode::Send, 0, 0, 0, &[inline_seg(b"two")]);
    dev.process_sq(a).unwrap();
    let cqes = TCq::new(&dev, c).drain();
    assert_eq!(cqes.len(), 2);
    assert_eq!(
        cqes.iter()
            .map(|c| (c.wqe_counter.get(), c.srqn_uidx.srqn_uidx()))
            .collect::<Vec<_>>(),
        [(0, srq.0), (1, srq.0)]
    );
    let mut got = [0u8; 3];
    buf.read(2048, &mut got).unwrap();
    assert_eq!(&got, b"two");

    // XRC: initiator → target, SRQ chosen by the XRC segment.
    let xrcd = dev.alloc_xrcd();
    let xcq = cq(&mut dev, 16);
    let xsrq = dev
        .create_srq(SrqInit {
            pd,
            wqe_cnt: 4,
            max_sge: 1,
            cq: Some(xcq),
            xrcd: Some(xrcd),
        })
        .unwrap();
    let ini = qp(&mut dev, QpType::XrcIni, pd, c, c, RqInit::None);
    let tgt = dev
        .create_qp(QpInit {
            qp_type: QpType::XrcTgt,
            pd,
            send_cq: None,
            recv_cq: None,
            sq_wqebbs: 0,
            max_send_sge: 0,
            max_inline: 0,
            rq: RqInit::None,
            xrcd: Some(xrcd),
            vlan_strip: false,
        })
        .unwrap();
    let at = |d| QpAttr {
        access: Access::ALL,
        dest_qpn: Some(d),
        ..QpAttr::default()
    };
    dev.modify_qp(tgt, QpState::Init, &at(ini)).unwrap();
    dev.modify_qp(tgt, QpState::Rtr, &at(ini)).unwrap();
    to_rts(&mut dev, ini, at(tgt));
    let mut xr = TRq::new_srq(&dev, xsrq);
    xr.post(&[(buf.addr() + 3072, key, 64)]);
    let mut xs = TSq::new(&dev, ini);
    let xrc = XrcSeg {
        xrc_srqn: Be32::new(xsrq.0),
        reserved: [0; 12],
    }
    .as_bytes()
    .to_vec();
    xs.post(
        SendOpcode::Send,
        0,
        SIG,
        0,
        &[xrc.clone(), inline_seg(b"xrc!")],
    );
    // A wrong XRC SRQ number: remote invalid request.
    let bad = XrcSeg {
        xrc_srqn: Be32::new(srq.0),
        reserved: [0; 12],
    }
    .as_bytes()
    .to_vec();
    xs.post(SendOpcode::Send, 0, SIG, 0, &[bad, inline_seg(b"nope")]);
    dev.process_sq(ini).unwrap();
    let x = TCq::new(&dev, xcq).drain();
    assert_eq!(x.len(), 1);
    assert_eq!(
        (
            x[0].srqn_uidx.srqn_uidx(),
            x[0].sop_drop_qpn.qpn(),
            x[0].byte_cnt.get()
        ),
        (xsrq.0, tgt.0, 4)
    );
    let mut got = [0u8; 4];
    buf.read(3072, &mut got).unwrap();
    assert_eq!(&got, b"xrc!");
    let req: Vec<_> = TCq::new(&dev, c).drain().into_iter().skip(2).collect();
    assert_eq!(req[0].opcode(), CqeOpcode::Req);
    assert_eq!(err_of(&req[1]).1, Syndrome::RemoteInvalReq);
}

// --------------------------------------------------------------------------
// UD
// --------------------------------------------------------------------------

#[test]
fn ud_checks_the_q_key_and_reserves_the_grh() {
    let mut dev = Device::default();
    let pd = dev.alloc_pd();
    let c = cq(&mut dev, 64);
    let rq = RqInit::Cyclic {
        wqe_cnt: 8,
        max_sge: 1,
    };
    let a = qp(&mut dev, QpType::Ud, pd, c, c, rq);
    let b = qp(&mut dev, QpType::Ud, pd, c, c, rq);
    to_rts(
        &mut dev,
        a,
        QpAttr {
            qkey: 0x1111,
            ..QpAttr::default()
        },
    );
    to_rts(
        &mut dev,
        b,
        QpAttr {
            qkey: 0x2222,
            ..QpAttr::default()
        },
    );
    let av = dev.create_ah(pd, &AhAttr::default()).unwrap();
    let buf = dev.alloc_buffer(4096).unwrap();
    let key = dev.reg_mr(pd, &buf, Access::LOCAL_WRITE).unwrap();
    let mut r = TRq::new(&dev, b);
    r.post(&[(buf.addr(), key, 40 + 64)]);
    let mut sq = TSq::new(&dev, a);
    sq.post(
        SendOpcode::Send,
        0,
        SIG,
        0,
        &[ud_av(&av, 0x9999, b.0), inline_seg(b"wrong key")],
    );
    dev.process_sq(a).unwrap();
    assert!(dev.take_events().contains(&EmuEvent::DatagramDropped {
        dqpn: b.0,
        reason: DropReason::QKey
    }));
    let first = TCq::new(&dev, c).drain();
    assert_eq!(
        first.len(),
        1,
        "the sender completes, the receiver sees nothing"
    );
    assert_eq!(first[0].opcode(), CqeOpcode::Req);

    sq.post(
        SendOpcode::Send,
        0,
        SIG,
        0,
        &[ud_av(&av, 0x2222, b.0), inline_seg(b"right key")],
    );
    dev.process_sq(a).unwrap();
    let mut tc = TCq::new(&dev, c);
    tc.consume(1);
    let cqes = tc.drain();
    let resp = cqes
        .iter()
        .find(|c| c.opcode() == CqeOpcode::RespSend)
        .unwrap();
    assert_eq!(resp.byte_cnt.get(), 40 + 9);
    assert_eq!(resp.flags_rqpn.rqpn(), a.0);
    let mut got = [0u8; 9];
    buf.read(40, &mut got).unwrap();
    assert_eq!(&got, b"right key");

    // A message beyond the MTU is a local length error.
    let mtu = dev.config().port_mtu;
    let big = dev.alloc_buffer(8192).unwrap();
    let bkey = dev.reg_mr(pd, &big, Access::LOCAL_WRITE).unwrap();
    sq.post(
        SendOpcode::Send,
        0,
        SIG,
        0,
        &[ud_av(&av, 0x2222, b.0), data_seg(big.addr(), bkey, mtu + 1)],
    );
    dev.process_sq(a).unwrap();
    let e = tc.drain();
    assert_eq!(err_of(e.last().unwrap()).1, Syndrome::LocalLength);
}

// --------------------------------------------------------------------------
// Raw Ethernet
// --------------------------------------------------------------------------

/// An independent Internet checksum (RFC 1071) for the tests.
fn inet_sum(bytes: &[u8]) -> u16 {
    let mut s: u32 = 0;
    for c in bytes.chunks(2) {
        s += u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
    }
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

fn udp_frame(payload: &[u8]) -> Vec<u8> {
    let mut f = vec![0u8; 42];
    f[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0xbb]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0xaa]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f[14] = 0x45;
    f[16..18].copy_from_slice(&((28 + payload.len()) as u16).to_be_bytes());
    f[22] = 64;
    f[23] = 17;
    f[26..30].copy_from_slice(&[10, 0, 0, 1]);
    f[30..34].copy_from_slice(&[10, 0, 0, 2]);
    f[34..36].copy_from_slice(&1000u16.to_be_bytes());
    f[36..38].copy_from_slice(&2000u16.to_be_bytes());
    f[38..40].copy_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    f.extend_from_slice(payload);
    f
}

struct Raw {
    dev: Device,
    tx: Qpn,
    rx: Qpn,
    tx_cq: Cqn,
    rx_cq: Cqn,
    buf: Arc<DmaBlock>,
    key: u32,
    rq_pi: u32,
    sq_pi: u32,
}

fn raw(rx_rq: RqInit, rx_cq: CqInit, vlan_strip: bool) -> Raw {
    raw_on(Device::default(), rx_rq, rx_cq, vlan_strip)
}

fn raw_on(mut dev: Device, rx_rq: RqInit, rx_cq: CqInit, vlan_strip: bool) -> Raw {
    let pd = dev.alloc_pd();
    let tx_cq = cq(&mut dev, 64);
    let rcq = dev.create_cq(rx_cq).unwrap();
    let mk = |dev: &mut Device, rq, cq, strip| {
        dev.create_qp(QpInit {
            qp_type: QpType::RawPacket,
            pd,
            send_cq: Some(tx_cq),
            recv_cq: Some(cq),
            sq_wqebbs: 64,
            max_send_sge: 4,
            max_inline: 256,
            rq,
            xrcd: None,
            vlan_strip: strip,
        })
        .unwrap()
    };
    let tx = mk(&mut dev, RqInit::None, tx_cq, false);
    let rx = mk(&mut dev, rx_rq, rcq, vlan_strip);
    to_rts(&mut dev, tx, QpAttr::default());
    to_rts(&mut dev, rx, QpAttr::default());
    dev.add_flow(FlowRule {
        qpn: rx,
        dmac: Some([0x02, 0, 0, 0, 0, 0xbb]),
        ethertype: None,
        flow_tag: 0x42,
    })
    .unwrap();
    let buf = dev.alloc_buffer(1 << 16).unwrap();
    let key = dev.reg_mr(pd, &buf, Access::LOCAL_WRITE).unwrap();
    Raw {
        dev,
        tx,
        rx,
        tx_cq,
        rx_cq: rcq,
        buf,
        key,
        rq_pi: 0,
        sq_pi: 0,
    }
}

#[test]
fn raw_ethernet_loopback_computes_checksums_and_inserts_vlans() {
    let mut r = raw(
        RqInit::Cyclic {
            wqe_cnt: 8,
            max_sge: 1,
        },
        CqInit {
            cqe_cnt: 64,
            cqe_size: CqeSize::B64,
            compression: None,
            ignore_overrun: false,
        },
        true,
    );
    let frame = udp_frame(b"checksum me please");
    r.buf.write(0, &frame[18..]).unwrap();
    let mut rq = TRq::new(&r.dev, r.rx);
    rq.post(&[(r.buf.addr() + 4096, r.key, 2048)]);
    rq.post(&[(r.buf.addr() + 8192, r.key, 2048)]);
    let mut sq = TSq::new(&r.dev, r.tx);
    let cs = mlx5dp::prm::ETH_WQE_L3_CSUM | mlx5dp::prm::ETH_WQE_L4_CSUM;
    // 18 bytes of header inline, the rest by pointer.
    sq.post(
        SendOpcode::Send,
        0,
        SIG,
        0,
        &[
            eth_seg(cs, 0, &frame[..18]),
            data_seg(r.buf.addr(), r.key, (frame.len() - 18) as u32),
        ],
    );
    // The same frame with a VLAN inserted by the device (no inline header).
    let mut e = EthSeg {
        cs_flags: mlx5dp::prm::EthCsFlags::from_bits(cs),
        ..EthSeg::default()
    };
    e.set_vlan_insert(
        mlx5dp::prm::VlanInsert::new()
            .with_insert(true)
            .with_vlan_tci(0x0abc),
    );
    r.buf.write(1024, &frame).unwrap();
    sq.post(
        SendOpcode::Send,
        0,
        SIG,
        0,
        &[
            e.as_bytes().to_vec(),
            data_seg(r.buf.addr() + 1024, r.key, frame.len() as u32),
        ],
    );
    r.dev.process_sq(r.tx).unwrap();

    let mut got = vec![0u8; frame.len()];
    r.buf.read(4096, &mut got).unwrap();
    assert_eq!(got[..24], frame[..24]);
    assert_eq!(
        inet_sum(&got[14..34]),
        0xffff,
        "IPv4 header checksum computed"
    );
    let mut pseudo = got[26..34].to_vec();
    pseudo.extend_from_slice(&[0, 17]);
    pseudo.extend_from_slice(&((got.len() - 34) as u16).to_be_bytes());
    pseudo.extend_from_slice(&got[34..]);
    assert_eq!(inet_sum(&pseudo), 0xffff, "UDP checksum computed");
    assert_ne!(&got[40..42], &[0, 0]);

    let rx = TCq::new(&r.dev, r.rx_cq).drain();
    assert_eq!(rx.len(), 2);
    for c in &rx {
        assert_eq!(
            c.byte_cnt.get() as usize,
            frame.len(),
            "VLAN stripped again"
        );
        assert!(c.hds_ip_ext.l3_ok() && c.hds_ip_ext.l4_ok());
        assert_eq!(
            (
                c.l4_l3_hdr_type.l3_hdr_type(),
                c.l4_l3_hdr_type.l4_hdr_type()
            ),
            (2, 2)
        );
        assert_eq!(c.sop_drop_qpn.qpn(), 0x42, "flow tag");
    }
    assert!(!rx[0].l4_l3_hdr_type.cvlan_stripped());
    assert!(rx[1].l4_l3_hdr_type.cvlan_stripped());
    assert_eq!(rx[1].vlan_info.get(), 0x0abc);
    assert_eq!(TCq::new(&r.dev, r.tx_cq).drain().len(), 2);
}

#[test]
fn tso_mpw_and_empw_sessions() {
    let mut r = raw(
        RqInit::Cyclic {
            wqe_cnt: 32,
            max_sge: 1,
        },
        CqInit {
            cqe_cnt: 64,
            cqe_size: CqeSize::B64,
            compression: None,
            ignore_overrun: false,
        },
        false,
    );
    let mut rq = TRq::new(&r.dev, r.rx);
    for i in 0..32 {
        rq.post(&[(r.buf.addr() + 8192 + i * 1024, r.key, 1024)]);
    }
    // A TCP frame of 54 bytes of headers and 250 bytes of payload, MSS 100.
    let mut f = vec![0u8; 54];
    f[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0xbb]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f[14] = 0x45;
    f[16..18].copy_from_slice(&(40u16 + 250).to_be_bytes());
    f[22] = 64;
    f[23] = 6;
    f[46] = 0x50; // data offset 5
    f[47] = 0x18; // PSH|ACK
    f[38..42].copy_from_slice(&1000u32.to_be_bytes());
    let payload: Vec<u8> = (0..250u32).map(|i| i as u8).collect();
    r.buf.write(0, &payload).unwrap();
    let mut sq = TSq::new(&r.dev, r.tx);
    sq.post(
        SendOpcode::Tso,
        0,
        SIG,
        0,
        &[eth_seg(0, 100, &f), data_seg(r.buf.addr(), r.key, 250)],
    );
    r.dev.process_sq(r.tx).unwrap();
    let mut rc = TCq::new(&r.dev, r.rx_cq);
    let segs = rc.drain();
    assert_eq!(
        segs.iter().map(|c| c.byte_cnt.get()).collect::<Vec<_>>(),
        [154, 154, 104]
    );
    for (i, c) in segs.iter().enumerate() {
        assert!(
            c.hds_ip_ext.l3_ok() && c.hds_ip_ext.l4_ok(),
            "segment {i} checksums"
        );
        let mut s = vec![0u8; c.byte_cnt.get() as usize];
        r.buf.read(8192 + i * 1024, &mut s).unwrap();
        assert_eq!(
            u32::from_be_bytes(s[38..42].try_into().unwrap()),
            1000 + 100 * i as u32
        );
        assert_eq!(s[47] & 0x08 != 0, i == 2, "PSH on the last segment only");
    }

    // Legacy MPW: three 60-byte frames by pointer, all the same length.
    let small = udp_frame(&[7u8; 18]);
    assert_eq!(small.len(), 60);
    for k in 0..3 {
        r.buf.write(1024 + k * 64, &small).unwrap();
    }
    let segs: Vec<Vec<u8>> = std::iter::once(eth_seg(0, 60, &[]))
        .chain((0..3).map(|k| data_seg(r.buf.addr() + 1024 + k * 64, r.key, 60)))
        .collect();
    sq.post(SendOpcode::Tso, OPC_MOD_MPW, SIG, 0, &segs);
    // eMPW: one pointer packet and one inline packet.
    let segs = vec![
        eth_seg(0, 0, &[]),
        data_seg(r.buf.addr() + 1024, r.key, 60),
        inline_seg(&small),
    ];
    sq.post(SendOpcode::EnhancedMpsw, 0, SIG, 0, &segs);
    // A legacy MPW whose packet lengths differ breaks the session rules.
    let segs = vec![
        eth_seg(0, 60, &[]),
        data_seg(r.buf.addr() + 1024, r.key, 59),
    ];
    let bad = sq.post(SendOpcode::Tso, OPC_MOD_MPW, SIG, 0, &segs);
    r.dev.process_sq(r.tx).unwrap();
    assert_eq!(rc.drain().len(), 5);
    let tx = TCq::new(&r.dev, r.tx_cq).drain();
    assert_eq!(tx.len(), 4);
    assert_eq!(
        err_of(&tx[3]),
        (
            CqeOpcode::ReqErr,
            Syndrome::LocalQpOp,
            VendorSyndrome::BadSegment as u8,
            bad
        )
    );
}

#[test]
fn capabilities_bound_what_the_device_accepts() {
    // The reported flags are `mlx5dv_context.flags`: CQE_V1, MPW_ALLOWED,
    // ENHANCED_MPW, CQE_128B_COMP, REAL_TIME_TS, BLUEFLAME.
    assert_eq!(Caps::default().flags.mlx5dv_flags(), 0x19d);

    // Control path: CQE compression, inline size, SGEs, striding RQ.
    let mut caps = Caps::default();
    caps.cqe_comp.formats = vec![MiniCqeFormat::Hash];
    caps.cqe_comp.enhanced_layout = false;
    caps.cqe_comp.max_num = 16;
    caps.max_inline = 64;
    caps.max_sge = 2;
    let mut dev = Device::new(DeviceConfig {
        caps,
        ..DeviceConfig::default()
    });
    let pd = dev.alloc_pd();
    let zip = |format, layout, max_session| CqInit {
        compression: Some(CompressionCfg {
            format,
            layout,
            max_session,
            force: false,
        }),
        ..comp(MiniCqeFormat::Hash, CompressionLayout::Basic, 2)
    };
    let kind = |r: Result<Cqn, EmuError>| r.map_err(|e| e.kind);
    for (init, what) in [
        (
            zip(MiniCqeFormat::Csum, CompressionLayout::Basic, 16),
            "a mini format not in the caps",
        ),
        (
            zip(MiniCqeFormat::Hash, CompressionLayout::Enhanced, 16),
            "a layout not in the caps",
        ),
        (
            zip(MiniCqeFormat::Hash, CompressionLayout::Basic, 32),
            "a session beyond cqe_compression_max_num",
        ),
    ] {
        assert!(kind(dev.create_cq(init)).is_err(), "{what}");
    }
    let c = dev
        .create_cq(zip(MiniCqeFormat::Hash, CompressionLayout::Basic, 16))
        .unwrap();
    let qp_init = QpInit {
        qp_type: QpType::Rc,
        pd,
        send_cq: Some(c),
        recv_cq: Some(c),
        sq_wqebbs: 64,
        max_send_sge: 2,
        max_inline: 64,
        rq: RqInit::None,
        xrcd: None,
        vlan_strip: false,
    };
    assert!(dev.create_qp(qp_init).is_ok());
    for (init, what) in [
        (
            QpInit {
                max_inline: 65,
                ..qp_init
            },
            "max_inline",
        ),
        (
            QpInit {
                max_send_sge: 3,
                ..qp_init
            },
            "max_sge",
        ),
        (
            QpInit {
                qp_type: QpType::RawPacket,
                rq: RqInit::Striding {
                    wqe_cnt: 8,
                    log_num_strides: 17,
                    log_stride_bytes: 6,
                },
                ..qp_init
            },
            "striding RQ beyond max_log_num_strides",
        ),
        (
            QpInit {
                qp_type: QpType::RawPacket,
                rq: RqInit::Striding {
                    wqe_cnt: 8,
                    log_num_strides: 3,
                    log_stride_bytes: 5,
                },
                ..qp_init
            },
            "striding RQ below min_log_stride_bytes",
        ),
    ] {
        assert!(dev.create_qp(init).is_err(), "{what}");
    }

    // Data path: no (enhanced) MPW, a minimum inline L2 header.
    let frame = udp_frame(&[5u8; 18]);
    let cq_init = CqInit {
        cqe_cnt: 64,
        cqe_size: CqeSize::B64,
        compression: None,
        ignore_overrun: false,
    };
    let rig = |f: fn(&mut Caps)| {
        let mut caps = Caps::default();
        f(&mut caps);
        let r = raw_on(
            Device::new(DeviceConfig {
                caps,
                ..DeviceConfig::default()
            }),
            RqInit::None,
            cq_init,
            false,
        );
        r.buf.write(0, &frame).unwrap();
        r
    };
    let expect = |r: &mut Raw, idx: u16, vendor: VendorSyndrome| {
        r.dev.process_sq(r.tx).unwrap();
        let e = TCq::new(&r.dev, r.tx_cq).drain();
        assert_eq!(
            err_of(&e[0]),
            (CqeOpcode::ReqErr, Syndrome::LocalQpOp, vendor as u8, idx)
        );
    };
    let mut r = rig(|c| c.flags.enhanced_mpw = false);
    let segs = vec![eth_seg(0, 0, &[]), data_seg(r.buf.addr(), r.key, 60)];
    let idx = TSq::new(&r.dev, r.tx).post(SendOpcode::EnhancedMpsw, 0, SIG, 0, &segs);
    expect(&mut r, idx, VendorSyndrome::Unsupported);

    let mut r = rig(|c| c.flags.mpw_allowed = false);
    let segs = vec![eth_seg(0, 60, &[]), data_seg(r.buf.addr(), r.key, 60)];
    let idx = TSq::new(&r.dev, r.tx).post(SendOpcode::Tso, OPC_MOD_MPW, SIG, 0, &segs);
    expect(&mut r, idx, VendorSyndrome::Unsupported);

    // ConnectX-4 Lx: 18 bytes of L2 header inline are required.
    let mut r = rig(|c| c.eth_min_inline = 18);
    let mut sq = TSq::new(&r.dev, r.tx);
    sq.post(
        SendOpcode::Send,
        0,
        SIG,
        0,
        &[
            eth_seg(0, 0, &frame[..18]),
            data_seg(r.buf.addr() + 18, r.key, 42),
        ],
    );
    let short = sq.post(
        SendOpcode::Send,
        0,
        SIG,
        0,
        &[
            eth_seg(0, 0, &frame[..14]),
            data_seg(r.buf.addr() + 14, r.key, 46),
        ],
    );
    r.dev.process_sq(r.tx).unwrap();
    let e = TCq::new(&r.dev, r.tx_cq).drain();
    assert_eq!(e[0].opcode(), CqeOpcode::Req, "18 bytes inline: accepted");
    assert_eq!(
        err_of(&e[1]),
        (
            CqeOpcode::ReqErr,
            Syndrome::LocalQpOp,
            VendorSyndrome::BadSegment as u8,
            short
        )
    );
}

#[test]
fn striding_rq_places_frames_in_strides_with_filler_cqes() {
    // 8 strides of 64 bytes per WQE.
    let mut r = raw(
        RqInit::Striding {
            wqe_cnt: 4,
            log_num_strides: 3,
            log_stride_bytes: 6,
        },
        CqInit {
            cqe_cnt: 64,
            cqe_size: CqeSize::B64,
            compression: None,
            ignore_overrun: false,
        },
        false,
    );
    let (ring, dbrec) = r.dev.test_rq(r.rx);
    for i in 0..2u64 {
        let d = data_seg(r.buf.addr() + 16384 + i * 512, r.key, 512);
        ring.write(i as usize * 32 + 16, &d).unwrap();
    }
    dbrec.write(0, &2u32.to_be_bytes()).unwrap();
    let mut sq = TSq::new(&r.dev, r.tx);
    // 150 bytes = 3 strides each: strides 0-2, 3-5, then filler (6-7) and 0-2 of WQE 1.
    for k in 0..3u8 {
        let f = udp_frame(&[k; 108]);
        assert_eq!(f.len(), 150);
        sq.post(
            SendOpcode::Send,
            0,
            0,
            0,
            &[eth_seg(0, 0, &[]), inline_seg(&f)],
        );
    }
    r.dev.process_sq(r.tx).unwrap();
    let c = TCq::new(&r.dev, r.rx_cq).drain();
    let v: Vec<_> = c
        .iter()
        .map(|c| {
            let b = MprqByteCnt::from_bits(c.byte_cnt.get());
            (
                b.filler(),
                b.strides(),
                b.byte_cnt(),
                c.wqe_counter.get(),
                c.wqe_id.get(),
            )
        })
        .collect();
    assert_eq!(
        v,
        [
            (false, 3, 150, 0, 0),
            (false, 3, 150, 3, 0),
            (true, 2, 0, 6, 0),
            (false, 3, 150, 0, 1)
        ]
    );
    let mut got = [0u8; 150];
    r.buf.read(16384 + 512, &mut got).unwrap();
    assert_eq!(got[42], 2);
}

// --------------------------------------------------------------------------
// Faults
// --------------------------------------------------------------------------

/// A send whose data segment claims 2 GiB under a key that names nothing
/// (what a core writing garbage would post) is a local protection error
/// like any bad key, found before anything is gathered: a bad byte count
/// makes the device allocate nothing (the `emu_send` fuzz target once
/// drove it to 2 GB of zeroed gather buffer here before the key check).
#[test]
fn a_huge_segment_under_a_bad_key_faults_before_any_gather() {
    let mut p = pair(QpType::Rc, Access::ALL);
    let mut sq = TSq::new(&p.dev, p.a);
    let bad = sq.post(
        SendOpcode::Send,
        0,
        SIG,
        0,
        &[
            data_seg(p.buf.addr(), p.key, 8),
            data_seg(0x0d00_0108_0300_0000, 0x8000_0000, 0x7979_7979),
        ],
    );
    p.dev.process_sq(p.a).unwrap();
    let c = TCq::new(&p.dev, p.a_cq).drain();
    assert_eq!(
        err_of(&c[0]),
        (
            CqeOpcode::ReqErr,
            Syndrome::LocalProt,
            VendorSyndrome::BadKey as u8,
            bad
        )
    );
}

#[test]
fn bad_lkey_is_a_local_protection_error_and_flushes_the_rest() {
    let mut p = pair(QpType::Rc, Access::ALL);
    let mut rq = TRq::new(&p.dev, p.a);
    rq.post(&[(p.buf.addr(), p.key, 64)]);
    rq.post(&[(p.buf.addr(), p.key, 64)]);
    let mut sq = TSq::new(&p.dev, p.a);
    let ok = sq.post(
        SendOpcode::RdmaWrite,
        0,
        SIG,
        0,
        &[
            raddr_seg(p.rbuf.addr(), p.rkey),
            data_seg(p.buf.addr(), p.key, 8),
        ],
    );
    let bad = sq.post(
        SendOpcode::RdmaWrite,
        0,
        0,
        0,
        &[
            raddr_seg(p.rbuf.addr(), p.rkey),
            data_seg(p.buf.addr(), p.key ^ 0x100, 8),
        ],
    );
    let f1 = sq.post(SendOpcode::Nop, 0, 0, 0, &[]);
    let f2 = sq.post(SendOpcode::Nop, 0, 1 << 2, 0, &[]); // CE = only first error: no flush CQE
    let f3 = sq.post(SendOpcode::Nop, 0, SIG, 0, &[]);
    p.dev.process_sq(p.a).unwrap();
    assert_eq!(p.dev.qp_state(p.a), Some(QpState::Err));
    let c = TCq::new(&p.dev, p.a_cq).drain();
    let got: Vec<_> = c
        .iter()
        .map(err_of)
        .map(|(o, s, v, w)| (o, s.raw(), v, w))
        .collect();
    let flush = Syndrome::WrFlush.raw();
    assert_eq!(c[0].opcode(), CqeOpcode::Req);
    assert_eq!(c[0].wqe_counter.get(), ok);
    assert_eq!(
        got[1],
        (
            CqeOpcode::ReqErr,
            Syndrome::LocalProt.raw(),
            VendorSyndrome::BadKey as u8,
            bad
        )
    );
    assert_eq!(c[1].as_err().s_wqe_opcode(), SendOpcode::RdmaWrite);
    assert_eq!(c[1].as_err().s_wqe_opcode_qpn.qpn(), p.a.0);
    let rest: Vec<_> = got[2..].iter().map(|g| (g.0, g.1, g.3)).collect();
    assert_eq!(
        rest,
        [
            (CqeOpcode::RespErr, flush, 0),
            (CqeOpcode::RespErr, flush, 1),
            (CqeOpcode::ReqErr, flush, f1),
            (CqeOpcode::ReqErr, flush, f3),
        ]
    );
    let _ = f2;
    // WQEs posted while in error are flushed too.
    let f4 = sq.post(SendOpcode::Nop, 0, SIG, 0, &[]);
    p.dev.step();
    let c = TCq::new(&p.dev, p.a_cq);
    assert_eq!(
        err_of(&c.slot(6)),
        (CqeOpcode::ReqErr, Syndrome::WrFlush, 0, f4)
    );
}

#[test]
fn out_of_bounds_and_remote_faults() {
    // Out of bounds gather.
    let mut p = pair(QpType::Rc, Access::ALL);
    let mut sq = TSq::new(&p.dev, p.a);
    sq.post(
        SendOpcode::RdmaWrite,
        0,
        SIG,
        0,
        &[
            raddr_seg(p.rbuf.addr(), p.rkey),
            data_seg(p.buf.addr() + 4090, p.key, 8),
        ],
    );
    p.dev.process_sq(p.a).unwrap();
    let e = TCq::new(&p.dev, p.a_cq).drain();
    assert_eq!(err_of(&e[0]).1, Syndrome::LocalProt);
    assert_eq!(err_of(&e[0]).2, VendorSyndrome::Bounds as u8);

    // Bad rkey: remote access error, responder to error with an event.
    let mut p = pair(QpType::Rc, Access::ALL);
    let mut sq = TSq::new(&p.dev, p.a);
    sq.post(
        SendOpcode::RdmaWrite,
        0,
        SIG,
        0,
        &[
            raddr_seg(p.rbuf.addr(), p.rkey + 1),
            data_seg(p.buf.addr(), p.key, 8),
        ],
    );
    p.dev.process_sq(p.a).unwrap();
    let e = TCq::new(&p.dev, p.a_cq).drain();
    assert_eq!(err_of(&e[0]).1, Syndrome::RemoteAccess);
    assert_eq!(p.dev.qp_state(p.b), Some(QpState::Err));
    assert!(p
        .dev
        .take_events()
        .contains(&EmuEvent::QpAccessErr { qpn: p.b }));

    // Missing remote right on the MR: remote access error.
    let mut p = pair(QpType::Rc, Access::ALL);
    let mut sq = TSq::new(&p.dev, p.a);
    sq.post(
        SendOpcode::RdmaWrite,
        0,
        SIG,
        0,
        &[
            raddr_seg(p.buf.addr(), p.key),
            data_seg(p.buf.addr(), p.key, 8),
        ],
    );
    p.dev.process_sq(p.a).unwrap();
    let e = TCq::new(&p.dev, p.a_cq).drain();
    assert_eq!(
        (err_of(&e[0]).1, err_of(&e[0]).2),
        (Syndrome::RemoteAccess, VendorSyndrome::AccessRight as u8)
    );

    // The QP does not accept remote reads: remote invalid request.
    let mut p = pair(QpType::Rc, Access::REMOTE_WRITE);
    let mut sq = TSq::new(&p.dev, p.a);
    sq.post(
        SendOpcode::RdmaRead,
        0,
        SIG,
        0,
        &[
            raddr_seg(p.rbuf.addr(), p.rkey),
            data_seg(p.buf.addr(), p.key, 8),
        ],
    );
    p.dev.process_sq(p.a).unwrap();
    let e = TCq::new(&p.dev, p.a_cq).drain();
    assert_eq!(err_of(&e[0]).1, Syndrome::RemoteInvalReq);

    // Misaligned atomic.
    let mut p = pair(QpType::Rc, Access::ALL);
    let mut sq = TSq::new(&p.dev, p.a);
    let fa = AtomicSeg {
        swap_add: Be64::new(1),
        compare: Be64::new(0),
    }
    .as_bytes()
    .to_vec();
    sq.post(
        SendOpcode::AtomicFa,
        0,
        SIG,
        0,
        &[
            raddr_seg(p.rbuf.addr() + 4, p.rkey),
            fa,
            data_seg(p.buf.addr(), p.key, 8),
        ],
    );
    p.dev.process_sq(p.a).unwrap();
    let e = TCq::new(&p.dev, p.a_cq).drain();
    assert_eq!(
        (err_of(&e[0]).1, err_of(&e[0]).2),
        (Syndrome::RemoteInvalReq, VendorSyndrome::Misaligned as u8)
    );
}

#[test]
fn wrong_opcode_and_malformed_wqes() {
    // RDMA read on UC is not allowed.
    let mut p = pair(QpType::Uc, Access::ALL);
    let mut sq = TSq::new(&p.dev, p.a);
    let idx = sq.post(
        SendOpcode::RdmaRead,
        0,
        SIG,
        0,
        &[
            raddr_seg(p.rbuf.addr(), p.rkey),
            data_seg(p.buf.addr(), p.key, 8),
        ],
    );
    p.dev.process_sq(p.a).unwrap();
    let e = TCq::new(&p.dev, p.a_cq).drain();
    assert_eq!(
        err_of(&e[0]),
        (
            CqeOpcode::ReqErr,
            Syndrome::LocalQpOp,
            VendorSyndrome::OpcodeNotAllowed as u8,
            idx
        )
    );

    // DS too small for an RDMA write (control segment only).
    let mut p = pair(QpType::Rc, Access::ALL);
    let mut sq = TSq::new(&p.dev, p.a);
    let idx = sq.post(SendOpcode::RdmaWrite, 0, SIG, 0, &[]);
    p.dev.process_sq(p.a).unwrap();
    let e = TCq::new(&p.dev, p.a_cq).drain();
    assert_eq!(
        err_of(&e[0]),
        (
            CqeOpcode::ReqErr,
            Syndrome::LocalQpOp,
            VendorSyndrome::BadDs as u8,
            idx
        )
    );

    // Wrong WQE index in the control segment.
    let mut p = pair(QpType::Rc, Access::ALL);
    let mut sq = TSq::new(&p.dev, p.a);
    let mut w = sq.build(SendOpcode::Nop, 0, SIG, 0, &[]);
    w[1..3].copy_from_slice(&5u16.to_be_bytes());
    sq.write(&w);
    sq.ring_dbrec();
    p.dev.process_sq(p.a).unwrap();
    let e = TCq::new(&p.dev, p.a_cq).drain();
    assert_eq!(err_of(&e[0]).2, VendorSyndrome::BadCtrl as u8);

    // An inline segment claiming more bytes than the DS count covers.
    let mut p = pair(QpType::Rc, Access::ALL);
    let mut sq = TSq::new(&p.dev, p.a);
    let mut seg = inline_seg(b"short");
    seg[..4].copy_from_slice(&(INLINE_SEG | 100).to_be_bytes());
    sq.post(SendOpcode::Send, 0, SIG, 0, &[seg]);
    p.dev.process_sq(p.a).unwrap();
    let e = TCq::new(&p.dev, p.a_cq).drain();
    assert_eq!(err_of(&e[0]).2, VendorSyndrome::BadDs as u8);

    // Atomics need one 8-byte pointer result segment.
    let mut p = pair(QpType::Rc, Access::ALL);
    let mut sq = TSq::new(&p.dev, p.a);
    let fa = AtomicSeg {
        swap_add: Be64::new(1),
        compare: Be64::new(0),
    }
    .as_bytes()
    .to_vec();
    sq.post(
        SendOpcode::AtomicFa,
        0,
        SIG,
        0,
        &[
            raddr_seg(p.rbuf.addr(), p.rkey),
            fa,
            data_seg(p.buf.addr(), p.key, 4),
        ],
    );
    p.dev.process_sq(p.a).unwrap();
    let e = TCq::new(&p.dev, p.a_cq).drain();
    assert_eq!(err_of(&e[0]).2, VendorSyndrome::BadSegment as u8);
}

#[test]
fn segments_in_the_wrong_place_are_malformed() {
    // Inline data as an RDMA read's scatter list (pointers needed).
    let mut p = pair(QpType::Rc, Access::ALL);
    let mut sq = TSq::new(&p.dev, p.a);
    let idx = sq.post(
        SendOpcode::RdmaRead,
        0,
        SIG,
        0,
        &[
            raddr_seg(p.rbuf.addr(), p.rkey),
            inline_seg(b"not a pointer"),
        ],
    );
    p.dev.process_sq(p.a).unwrap();
    let e = TCq::new(&p.dev, p.a_cq).drain();
    assert_eq!(
        err_of(&e[0]),
        (
            CqeOpcode::ReqErr,
            Syndrome::LocalQpOp,
            VendorSyndrome::BadSegment as u8,
            idx
        )
    );

    // An RDMA write with its data segment before the remote-address
    // segment: the parser is positional, as the hardware is, so the
    // pointer is read as the remote address and the address as the
    // pointer, whose lkey (the low half of an address) names no MR. The
    // WQE after it is flushed.
    let mut p = pair(QpType::Rc, Access::ALL);
    let mut sq = TSq::new(&p.dev, p.a);
    let idx = sq.post(
        SendOpcode::RdmaWrite,
        0,
        SIG,
        0,
        &[
            data_seg(p.buf.addr(), p.key, 8),
            raddr_seg(p.rbuf.addr(), p.rkey),
        ],
    );
    let next = sq.post(SendOpcode::Nop, 0, SIG, 0, &[]);
    p.dev.process_sq(p.a).unwrap();
    let e = TCq::new(&p.dev, p.a_cq).drain();
    assert_eq!(
        (err_of(&e[0]).0, err_of(&e[0]).1, err_of(&e[0]).3),
        (CqeOpcode::ReqErr, Syndrome::LocalProt, idx)
    );
    assert_eq!(
        (err_of(&e[1]).1, err_of(&e[1]).3),
        (Syndrome::WrFlush, next)
    );
    assert_eq!(p.dev.qp_state(p.a), Some(QpState::Err));
    let mut got = [0u8; 8];
    p.rbuf.read(0, &mut got).unwrap();
    assert_eq!(got, [0; 8], "nothing was written");
}

#[test]
fn rnr_and_receive_too_small() {
    // rnr_retry 0: immediate RNR retry exceeded.
    let mut p = pair(QpType::Rc, Access::ALL);
    let mut sq = TSq::new(&p.dev, p.a);
    sq.post(
        SendOpcode::Send,
        0,
        SIG,
        0,
        &[inline_seg(b"nobody listens")],
    );
    p.dev.process_sq(p.a).unwrap();
    let e = TCq::new(&p.dev, p.a_cq).drain();
    assert_eq!(
        (err_of(&e[0]).1, err_of(&e[0]).2),
        (Syndrome::RnrRetryExc, VendorSyndrome::Rnr as u8)
    );

    // rnr_retry 7: the SQ waits until a receive is posted.
    let mut p = pair(QpType::Rc, Access::ALL);
    p.dev
        .modify_qp(
            p.a,
            QpState::Rts,
            &QpAttr {
                rnr_retry: 7,
                ..QpAttr::default()
            },
        )
        .unwrap();
    let mut sq = TSq::new(&p.dev, p.a);
    sq.post(SendOpcode::Send, 0, SIG, 0, &[inline_seg(b"patience")]);
    let rep = p.dev.process_sq(p.a).unwrap();
    assert!(rep.waiting);
    assert!(TCq::new(&p.dev, p.a_cq).drain().is_empty());
    let mut rq = TRq::new(&p.dev, p.b);
    rq.post(&[(p.rbuf.addr(), p.rkey, 64)]);
    let rep = p.dev.step();
    assert_eq!(rep.wqes, 1, "the waiting SQ resumes on the next step");
    assert_eq!(TCq::new(&p.dev, p.a_cq).drain()[0].opcode(), CqeOpcode::Req);

    // An injected RNR on an RC QP with rnr_retry 0.
    let mut p = pair(QpType::Rc, Access::ALL);
    let mut rq = TRq::new(&p.dev, p.b);
    rq.post(&[(p.rbuf.addr(), p.rkey, 64)]);
    p.dev.inject(Fault::Rnr { qpn: p.b, count: 1 });
    let mut sq = TSq::new(&p.dev, p.a);
    sq.post(SendOpcode::Send, 0, SIG, 0, &[inline_seg(b"x")]);
    p.dev.process_sq(p.a).unwrap();
    assert_eq!(
        err_of(&TCq::new(&p.dev, p.a_cq).drain()[0]).1,
        Syndrome::RnrRetryExc
    );

    // Receive too small: responder local length error, requester remote
    // invalid request, both in error.
    let mut p = pair(QpType::Rc, Access::ALL);
    let mut rq = TRq::new(&p.dev, p.b);
    rq.post(&[(p.rbuf.addr(), p.rkey, 4)]);
    let mut sq = TSq::new(&p.dev, p.a);
    sq.post(
        SendOpcode::Send,
        0,
        SIG,
        0,
        &[inline_seg(b"too long for you")],
    );
    p.dev.process_sq(p.a).unwrap();
    let req = TCq::new(&p.dev, p.a_cq).drain();
    assert_eq!(err_of(&req[0]).1, Syndrome::RemoteInvalReq);
    let resp = TCq::new(&p.dev, p.b_cq).drain();
    assert_eq!(
        err_of(&resp[0]),
        (
            CqeOpcode::RespErr,
            Syndrome::LocalLength,
            VendorSyndrome::Length as u8,
            0
        )
    );
    assert_eq!(
        (p.dev.qp_state(p.a), p.dev.qp_state(p.b)),
        (Some(QpState::Err), Some(QpState::Err))
    );
}

#[test]
fn injected_failure_delay_and_stall() {
    let mut p = pair(QpType::Rc, Access::ALL);
    let mut sq = TSq::new(&p.dev, p.a);
    p.dev.inject(Fault::FailWqe {
        qpn: p.a,
        skip: 1,
        syndrome: Syndrome::LocalLength,
    });
    let a = sq.post(SendOpcode::Nop, 0, SIG, 0, &[]);
    let b = sq.post(SendOpcode::Nop, 0, SIG, 0, &[]);
    p.dev.process_sq(p.a).unwrap();
    let c = TCq::new(&p.dev, p.a_cq).drain();
    assert_eq!(c[0].wqe_counter.get(), a);
    assert_eq!(
        err_of(&c[1]),
        (
            CqeOpcode::ReqErr,
            Syndrome::LocalLength,
            VendorSyndrome::Injected as u8,
            b
        )
    );

    let mut p = pair(QpType::Rc, Access::ALL);
    let mut sq = TSq::new(&p.dev, p.a);
    let mut tc = TCq::new(&p.dev, p.a_cq);
    p.dev.inject(Fault::DelayCompletions {
        cqn: p.a_cq,
        steps: 2,
    });
    sq.post(SendOpcode::Nop, 0, SIG, 0, &[]);
    p.dev.process_sq(p.a).unwrap();
    assert!(tc.poll().is_none());
    p.dev.inject(Fault::DelayCompletions {
        cqn: p.a_cq,
        steps: 0,
    });
    sq.post(SendOpcode::Nop, 0, SIG, 0, &[]);
    p.dev.process_sq(p.a).unwrap();
    assert!(
        tc.poll().is_none(),
        "a later completion never overtakes a delayed one"
    );
    p.dev.step();
    let got: Vec<_> = tc.drain().iter().map(|c| c.wqe_counter.get()).collect();
    assert_eq!(got, [0, 1]);

    p.dev.inject(Fault::StallDevice);
    sq.post(SendOpcode::Nop, 0, SIG, 0, &[]);
    assert!(p.dev.process_sq(p.a).unwrap().stalled);
    assert!(tc.poll().is_none());
    p.dev.resume();
    p.dev.process_sq(p.a).unwrap();
    assert_eq!(tc.poll().map(|c| c.wqe_counter.get()), Some(2));

    // A stall keeps the doorbell: after `resume`, the next step runs what
    // was published, with no second doorbell.
    p.dev.inject(Fault::StallQp { qpn: p.a });
    sq.post(SendOpcode::Nop, 0, SIG, 0, &[]);
    assert!(p.dev.process_sq(p.a).unwrap().stalled);
    assert!(p.dev.step().stalled);
    assert!(tc.poll().is_none());
    p.dev.resume();
    assert_eq!(p.dev.step().wqes, 1);
    assert_eq!(tc.poll().map(|c| c.wqe_counter.get()), Some(3));
}

#[test]
fn step_budget_leaves_the_rest_for_the_next_steps() {
    let cfg = DeviceConfig {
        step_budget: 1,
        ..DeviceConfig::default()
    };
    let mut p = pair_cfg(cfg, QpType::Rc, Access::ALL);
    let mut sq = TSq::new(&p.dev, p.a);
    let mut tc = TCq::new(&p.dev, p.a_cq);
    for _ in 0..3 {
        sq.post(SendOpcode::Nop, 0, SIG, 0, &[]);
    }
    assert_eq!(p.dev.process_sq_n(p.a, 1).unwrap().wqes, 1);
    assert_eq!(p.dev.step().wqes, 1);
    assert_eq!(p.dev.step().wqes, 1);
    assert_eq!(p.dev.step().wqes, 0);
    let got: Vec<u16> = tc.drain().iter().map(|c| c.wqe_counter.get()).collect();
    assert_eq!(got, [0, 1, 2]);
}

// --------------------------------------------------------------------------
// CQ ring: owner bit, overrun, doorbells
// --------------------------------------------------------------------------

#[test]
fn cq_owner_bit_flips_on_every_pass_and_overrun_is_caught() {
    let mut dev = Device::default();
    let pd = dev.alloc_pd();
    let c = cq(&mut dev, 4);
    let q = qp(&mut dev, QpType::Rc, pd, c, c, RqInit::None);
    let peer = qp(&mut dev, QpType::Rc, pd, c, c, RqInit::None);
    connect(&mut dev, q, peer, Access::ALL);
    let mut sq = TSq::new(&dev, q);
    let mut tc = TCq::new(&dev, c);
    let mut owners = Vec::new();
    for round in 0..3 {
        for _ in 0..4 {
            sq.post(SendOpcode::Nop, 0, SIG, 0, &[]);
        }
        dev.process_sq(q).unwrap();
        for k in 0..4 {
            let raw = tc.slot(tc.ci);
            owners.push(raw.op_own.owner());
            let cqe = tc.poll().unwrap_or_else(|| panic!("round {round} cqe {k}"));
            assert_eq!(cqe.wqe_counter.get() as u32, round * 4 + k);
        }
    }
    assert_eq!(
        owners,
        [false, false, false, false, true, true, true, true, false, false, false, false]
    );
    // Not consuming: the fifth completion overruns a 4-entry CQ.
    for _ in 0..5 {
        sq.post(SendOpcode::Nop, 0, SIG, 0, &[]);
    }
    dev.process_sq(q).unwrap();
    assert!(dev.take_events().contains(&EmuEvent::CqOverrun { cqn: c }));
    assert_eq!(dev.cq_stats(c).unwrap().lost, 1);
}

#[test]
fn uar_doorbells_drive_step_and_catch_ordering_mistakes() {
    let mut p = pair(QpType::Rc, Access::ALL);
    let mut sq = TSq::new(&p.dev, p.a);
    // Written and published, but no doorbell: step() does nothing.
    let w = sq.build(SendOpcode::Nop, 0, SIG, 0, &[]);
    sq.write(&w);
    sq.ring_dbrec();
    assert_eq!(p.dev.step().wqes, 0);
    // The 8-byte doorbell: the first 8 bytes of the last WQE at UAR + 0x800.
    sq.uar.write(0x800, &w[..8]).unwrap();
    assert_eq!(p.dev.step().wqes, 1);
    assert!(p.dev.take_events().is_empty());
    // Doorbell before the doorbell record: noticed.
    let w = sq.build(SendOpcode::Nop, 0, SIG, 0, &[]);
    sq.write(&w);
    sq.uar.write(0x900, &w[..8]).unwrap();
    p.dev.step();
    assert!(p.dev.take_events().contains(&EmuEvent::UarBeforeDbrec {
        qpn: p.a,
        wqe_index: 1
    }));
    sq.ring_dbrec();
    // A BlueFlame copy that differs from the ring: noticed.
    let w = sq.build(SendOpcode::Send, 0, SIG, 0, &[inline_seg(b"blueflame")]);
    sq.write(&w);
    sq.ring_dbrec();
    let mut bf = w.clone();
    bf[20] ^= 0xff;
    sq.uar.write(0x800, &bf).unwrap();
    let mut rq = TRq::new(&p.dev, p.b);
    rq.post(&[(p.rbuf.addr(), p.rkey, 64)]);
    p.dev.step();
    assert!(p.dev.take_events().contains(&EmuEvent::BlueFlameMismatch {
        qpn: p.a,
        wqe_index: 2
    }));

    // CQ arming: dbrec arm word, then the UAR write; an event on the next CQE.
    let mut tc = TCq::new(&p.dev, p.a_cq);
    tc.drain();
    let word = (1u32 << 28) | (tc.ci & 0xff_ffff);
    tc.dbrec.write(4, &word.to_be_bytes()).unwrap();
    let mut db = word.to_be_bytes().to_vec();
    db.extend_from_slice(&p.a_cq.0.to_be_bytes());
    tc.uar.write(0x20, &db).unwrap();
    p.dev.step();
    assert!(p.dev.take_events().is_empty());
    sq.post(SendOpcode::Nop, 0, SIG, 0, &[]);
    p.dev.process_sq(p.a).unwrap();
    assert!(p
        .dev
        .take_events()
        .contains(&EmuEvent::Completion { cqn: p.a_cq }));
}

#[test]
fn recorded_register_writes_are_what_was_written() {
    let mut p = pair(QpType::Rc, Access::ALL);
    p.dev
        .start_recording_to(Recorder::new("uar-test", None).with_cap(64));
    let mut sq = TSq::new(&p.dev, p.a);
    let mut rq = TRq::new(&p.dev, p.b);
    rq.post(&[(p.rbuf.addr(), p.rkey, 64)]);
    // An 8-byte doorbell for a 3-DS WQE: 8 bytes recorded.
    let w = sq.build(SendOpcode::Send, 0, SIG, 0, &[inline_seg(b"doorbell")]);
    sq.write(&w);
    sq.ring_dbrec();
    sq.uar.write(0x800, &w[..8]).unwrap();
    assert_eq!(p.dev.step().wqes, 1);
    // A BlueFlame copy of the next WQE (second half): all of it recorded.
    rq.post(&[(p.rbuf.addr(), p.rkey, 64)]);
    let w2 = sq.build(SendOpcode::Send, 0, SIG, 0, &[inline_seg(b"blueflame")]);
    sq.write(&w2);
    sq.ring_dbrec();
    let ds = usize::from(w2[7] & 0x3f) * 16;
    sq.uar.write(0x900, &w2[..ds]).unwrap();
    assert_eq!(p.dev.step().wqes, 1);
    assert!(p.dev.take_events().is_empty());
    let text = p.dev.take_recorder().unwrap().text().to_string();
    let mmio: Vec<(String, usize)> = text
        .split("\n\n")
        .filter(|r| r.contains("# kind: mmio_write") && r.contains("# queue: sq"))
        .map(|r| {
            let hex: String = r
                .lines()
                .filter(|l| !l.starts_with('#'))
                .collect::<Vec<_>>()
                .join(" ");
            let note = r
                .lines()
                .find_map(|l| l.strip_prefix("# note: "))
                .unwrap_or("")
                .to_string();
            (note, hex.split_whitespace().count())
        })
        .collect();
    assert_eq!(mmio.len(), 2, "{text}");
    assert_eq!(mmio[0].1, 8);
    assert!(mmio[0].0.contains("8-byte SQ doorbell"), "{:?}", mmio[0]);
    assert_eq!(mmio[1].1, ds);
    assert!(mmio[1].0.contains("BlueFlame copy"), "{:?}", mmio[1]);
}

#[test]
fn send_with_invalidate_and_local_invalidate() {
    let mut p = pair(QpType::Rc, Access::ALL);
    let pd = Pdn(1);
    let win = p.dev.alloc_buffer(64).unwrap();
    let wkey = p
        .dev
        .reg_mr(pd, &win, Access::ALL | Access::INVALIDATE)
        .unwrap();
    let mut rq = TRq::new(&p.dev, p.b);
    rq.post(&[(p.rbuf.addr(), p.rkey, 64)]);
    let mut sq = TSq::new(&p.dev, p.a);
    sq.post(SendOpcode::SendInval, 0, SIG, wkey, &[inline_seg(b"inv")]);
    p.dev.process_sq(p.a).unwrap();
    let r = TCq::new(&p.dev, p.b_cq).drain();
    assert_eq!(
        (r[0].opcode(), r[0].imm_inval_pkey.get()),
        (CqeOpcode::RespSendInv, wkey)
    );
    assert!(!p.dev.mr_valid(wkey));
    // Using the invalidated key: remote access error.
    sq.post(
        SendOpcode::RdmaWrite,
        0,
        SIG,
        0,
        &[raddr_seg(win.addr(), wkey), inline_seg(b"x")],
    );
    p.dev.process_sq(p.a).unwrap();
    let e = TCq::new(&p.dev, p.a_cq).drain();
    assert_eq!(err_of(&e[1]).1, Syndrome::RemoteAccess);

    // Local invalidate; an ordinary MR cannot be invalidated.
    let mut p = pair(QpType::Rc, Access::ALL);
    let mut sq = TSq::new(&p.dev, p.a);
    p.dev.revalidate_mr(p.rkey).unwrap();
    sq.post(SendOpcode::LocalInval, 0, SIG, p.rkey, &[]);
    p.dev.process_sq(p.a).unwrap();
    let e = TCq::new(&p.dev, p.a_cq).drain();
    assert_eq!(err_of(&e[0]).1, Syndrome::MwBind);
}

#[test]
fn uc_send_with_invalidate() {
    // libmlx5 installs `wr_send_inv` on UC (`fill_wr_builders_uc`; man
    // ibv_wr_post: SEND_WITH_INV on UC, RC, XRC_SEND): the responder
    // invalidates the key as on RC.
    let mut p = pair(QpType::Uc, Access::ALL);
    let win = p.dev.alloc_buffer(64).unwrap();
    let wkey = p
        .dev
        .reg_mr(Pdn(1), &win, Access::ALL | Access::INVALIDATE)
        .unwrap();
    let mut sq = TSq::new(&p.dev, p.a);
    let mut rq = TRq::new(&p.dev, p.b);
    let (mut a_cq, mut b_cq) = (TCq::new(&p.dev, p.a_cq), TCq::new(&p.dev, p.b_cq));

    // No receive posted: UC drops the message, the key stays valid.
    sq.post(SendOpcode::SendInval, 0, SIG, wkey, &[inline_seg(b"lost")]);
    p.dev.process_sq(p.a).unwrap();
    assert_eq!(a_cq.drain()[0].opcode(), CqeOpcode::Req);
    assert!(b_cq.drain().is_empty());
    assert!(p.dev.mr_valid(wkey));

    // A receive posted: the message lands, the key is invalidated.
    rq.post(&[(p.rbuf.addr(), p.rkey, 64)]);
    sq.post(SendOpcode::SendInval, 0, SIG, wkey, &[inline_seg(b"inv")]);
    p.dev.process_sq(p.a).unwrap();
    let req = a_cq.drain();
    assert_eq!(
        (req.len(), req[0].opcode(), req[0].wqe_counter.get()),
        (1, CqeOpcode::Req, 1)
    );
    let r = b_cq.drain();
    assert_eq!(
        (
            r[0].opcode(),
            r[0].imm_inval_pkey.get(),
            r[0].byte_cnt.get(),
            r[0].wqe_counter.get()
        ),
        (CqeOpcode::RespSendInv, wkey, 3, 0)
    );
    let mut got = [0u8; 3];
    p.rbuf.read(0, &mut got).unwrap();
    assert_eq!(&got, b"inv");
    assert!(!p.dev.mr_valid(wkey));

    // A key the responder may not invalidate (an ordinary MR): the
    // receive completes with REMOTE_INVAL_REQ, the responder goes to error
    // and flushes the rest; the UC requester, unacknowledged, completes
    // successfully.
    rq.post(&[(p.rbuf.addr(), p.rkey, 64)]);
    rq.post(&[(p.rbuf.addr(), p.rkey, 64)]);
    sq.post(SendOpcode::SendInval, 0, SIG, p.rkey, &[inline_seg(b"no")]);
    p.dev.process_sq(p.a).unwrap();
    assert_eq!(a_cq.drain()[0].opcode(), CqeOpcode::Req);
    let r = b_cq.drain();
    assert_eq!(r.len(), 2);
    assert_eq!(
        err_of(&r[0]),
        (
            CqeOpcode::RespErr,
            Syndrome::RemoteInvalReq,
            VendorSyndrome::BadKey as u8,
            1
        )
    );
    assert_eq!((err_of(&r[1]).1, err_of(&r[1]).3), (Syndrome::WrFlush, 2));
    assert_eq!(
        (p.dev.qp_state(p.a), p.dev.qp_state(p.b)),
        (Some(QpState::Rts), Some(QpState::Err))
    );
    assert!(p
        .dev
        .take_events()
        .contains(&EmuEvent::QpAccessErr { qpn: p.b }));

    // A non-invalidatable key on RC: the same responder error, and the
    // requester sees REMOTE_OP.
    let mut p = pair(QpType::Rc, Access::ALL);
    let mut sq = TSq::new(&p.dev, p.a);
    let mut rq = TRq::new(&p.dev, p.b);
    rq.post(&[(p.rbuf.addr(), p.rkey, 64)]);
    sq.post(SendOpcode::SendInval, 0, SIG, p.rkey, &[inline_seg(b"no")]);
    p.dev.process_sq(p.a).unwrap();
    let req = TCq::new(&p.dev, p.a_cq).drain();
    assert_eq!(
        (err_of(&req[0]).1, err_of(&req[0]).2),
        (Syndrome::RemoteOp, VendorSyndrome::BadKey as u8)
    );
    let r = TCq::new(&p.dev, p.b_cq).drain();
    assert_eq!(err_of(&r[0]).1, Syndrome::RemoteInvalReq);
    assert!(p.dev.mr_valid(p.rkey));
}

#[test]
fn send_with_invalidate_waits_out_rnr_before_invalidating() {
    // RC with rnr_retry 7 and no receive: the SQ waits; the key must stay
    // valid until the message lands, or the retry would fail on a key the
    // device invalidated itself.
    let mut p = pair(QpType::Rc, Access::ALL);
    p.dev
        .modify_qp(
            p.a,
            QpState::Rts,
            &QpAttr {
                rnr_retry: 7,
                ..QpAttr::default()
            },
        )
        .unwrap();
    let win = p.dev.alloc_buffer(64).unwrap();
    let wkey = p
        .dev
        .reg_mr(Pdn(1), &win, Access::ALL | Access::INVALIDATE)
        .unwrap();
    let mut sq = TSq::new(&p.dev, p.a);
    sq.post(SendOpcode::SendInval, 0, SIG, wkey, &[inline_seg(b"wait")]);
    assert!(p.dev.process_sq(p.a).unwrap().waiting);
    assert!(p.dev.mr_valid(wkey));
    let mut rq = TRq::new(&p.dev, p.b);
    rq.post(&[(p.rbuf.addr(), p.rkey, 64)]);
    assert_eq!(p.dev.step().wqes, 1);
    assert_eq!(TCq::new(&p.dev, p.a_cq).drain()[0].opcode(), CqeOpcode::Req);
    let r = TCq::new(&p.dev, p.b_cq).drain();
    assert_eq!(
        (r[0].opcode(), r[0].imm_inval_pkey.get()),
        (CqeOpcode::RespSendInv, wkey)
    );
    assert!(!p.dev.mr_valid(wkey));
}

// --------------------------------------------------------------------------
// CQE compression
// --------------------------------------------------------------------------

fn comp(format: MiniCqeFormat, layout: CompressionLayout, max_session: u16) -> CqInit {
    CqInit {
        cqe_cnt: 64,
        cqe_size: CqeSize::B64,
        compression: Some(CompressionCfg {
            format,
            layout,
            max_session,
            force: true,
        }),
        ignore_overrun: false,
    }
}

/// Sends `n` UDP frames of distinct lengths to the raw RX QP.
fn send_frames(r: &mut Raw, n: usize) -> Vec<Vec<u8>> {
    let mut rq = TRq::new(&r.dev, r.rx);
    rq.pi = r.rq_pi;
    for _ in 0..n {
        rq.post(&[(r.buf.addr() + 4096 + (rq.pi as u64 % 16) * 256, r.key, 256)]);
    }
    let mut sq = TSq::new(&r.dev, r.tx);
    sq.pi = r.sq_pi;
    let mut frames = Vec::new();
    for i in 0..n {
        let f = udp_frame(&vec![i as u8; 20 + i]);
        sq.post(
            SendOpcode::Send,
            0,
            0,
            0,
            &[eth_seg(0xc0, 0, &[]), inline_seg(&f)],
        );
        frames.push(f);
    }
    r.dev.process_sq(r.tx).unwrap();
    r.rq_pi = rq.pi;
    r.sq_pi = sq.pi;
    frames
}

fn mini_at(tc: &TCq, counter: u32, i: usize) -> [u8; 8] {
    let raw = tc.slot(counter);
    raw.as_bytes()[i * 8..i * 8 + 8].try_into().unwrap()
}

#[test]
fn basic_layout_session_title_and_arrays() {
    let mut r = raw(
        RqInit::Cyclic {
            wqe_cnt: 16,
            max_sge: 1,
        },
        comp(MiniCqeFormat::Csum, CompressionLayout::Basic, 64),
        false,
    );
    let frames = send_frames(&mut r, 10);
    let tc = TCq::new(&r.dev, r.rx_cq);
    let title = tc.slot(0);
    assert_eq!(title.format(), mlx5dp::prm::CqeFormat::Compressed);
    assert_eq!(title.opcode(), CqeOpcode::RespSend);
    assert!(!title.op_own.owner());
    assert_eq!(
        title.byte_cnt.get(),
        10,
        "title byte_cnt = minis in the session"
    );
    assert_eq!(title.wqe_counter.get(), 0);
    assert_eq!(title.sop_drop_qpn.qpn(), 0x42);
    // Minis 0..8 at slot 1, 8..10 at slot 8.
    for (i, f) in frames.iter().enumerate() {
        let (slot, k) = if i < 8 { (1, i) } else { (8, i - 8) };
        let m = mini_at(&tc, slot, k);
        let mc = mlx5dp::prm::MiniCqeCsum::read_from_bytes(&m[..]).unwrap();
        assert_eq!(mc.byte_cnt.get() as usize, f.len(), "mini {i}");
        // The sum of the IP datagram as received (checksums were offloaded).
        let mut got = vec![0u8; f.len()];
        r.buf.read(4096 + i * 256, &mut got).unwrap();
        assert_eq!(mc.checksum.get(), inet_sum(&got[14..]), "mini {i} checksum");
    }
    // Slots the session covers but the device does not write keep their old
    // contents (here the creation value: opcode INVALID).
    for s in [2, 3, 7, 9] {
        assert_eq!(tc.slot(s).opcode(), CqeOpcode::Invalid, "slot {s}");
    }
    assert_eq!(r.dev.cq_stats(r.rx_cq).unwrap().minis, 10);
}

#[test]
fn basic_layout_every_mini_format_and_max_session() {
    for fmt in [
        MiniCqeFormat::Hash,
        MiniCqeFormat::Csum,
        MiniCqeFormat::FtagStridx,
        MiniCqeFormat::CsumStridx,
        MiniCqeFormat::L34hStridx,
    ] {
        let mut r = raw(
            RqInit::Cyclic {
                wqe_cnt: 16,
                max_sge: 1,
            },
            comp(fmt, CompressionLayout::Basic, 4),
            false,
        );
        let frames = send_frames(&mut r, 6);
        let tc = TCq::new(&r.dev, r.rx_cq);
        // max_session 4: a session of 4, then one of 2.
        assert_eq!(tc.slot(0).byte_cnt.get(), 4, "{fmt:?}");
        assert_eq!(tc.slot(4).byte_cnt.get(), 2, "{fmt:?}");
        assert_eq!(tc.slot(4).wqe_counter.get(), 4);
        for (i, f) in frames.iter().enumerate() {
            let (slot, k) = if i < 4 { (1, i) } else { (5, i - 4) };
            let m = mlx5dp::prm::MiniCqe::read_from_bytes(&mini_at(&tc, slot, k)[..]).unwrap();
            let len = f.len() as u32;
            match fmt {
                MiniCqeFormat::Hash => {
                    assert_eq!(m.hash().byte_cnt.get(), len);
                    assert_ne!(m.hash().rx_hash_result.get(), 0);
                }
                MiniCqeFormat::Csum => assert_eq!(m.csum().byte_cnt.get(), len),
                MiniCqeFormat::FtagStridx => {
                    let x = m.ftag_stridx();
                    assert_eq!(
                        (x.flow_tag(), x.ftag_byte_cnt.byte_cnt(), x.stride_idx.get()),
                        (0x42, len, i as u16)
                    );
                }
                MiniCqeFormat::CsumStridx => {
                    assert_eq!(
                        (
                            m.csum_stridx().byte_cnt.get(),
                            m.csum_stridx().stride_idx.get()
                        ),
                        (len, i as u16)
                    );
                }
                MiniCqeFormat::L34hStridx => {
                    let x = m.l34h_stridx();
                    assert_eq!(
                        (
                            x.byte_cnt.get(),
                            x.hdr_type.l3_hdr_type(),
                            x.hdr_type.l4_hdr_type()
                        ),
                        (len, 2, 2)
                    );
                }
                MiniCqeFormat::Unknown(_) => unreachable!(),
            }
        }
    }
}

#[test]
fn enhanced_layout_title_then_compressed_cqes() {
    let mut r = raw(
        RqInit::Cyclic {
            wqe_cnt: 16,
            max_sge: 1,
        },
        comp(MiniCqeFormat::Hash, CompressionLayout::Enhanced, 64),
        false,
    );
    let frames = send_frames(&mut r, 10);
    let tc = TCq::new(&r.dev, r.rx_cq);
    // Slot 0: the regular title CQE; validity byte = pass 0.
    let t = tc.slot(0);
    assert_eq!(
        (t.format(), t.opcode(), t.signature),
        (mlx5dp::prm::CqeFormat::NoInline, CqeOpcode::RespSend, 0)
    );
    assert_eq!(t.byte_cnt.get() as usize, frames[0].len());
    // Slot 1: 7 minis; slot 8: 2 minis; holes keep the initial validity 0xff.
    let raw1 = tc.slot(1);
    let e1 = mlx5dp::prm::EnhancedCompressedCqe::read_from_bytes(raw1.as_bytes()).unwrap();
    assert_eq!(
        (
            e1.num_minis(),
            e1.op_own.format(),
            e1.validity_iteration_count
        ),
        (7, 3, 0)
    );
    for (k, f) in frames[1..8].iter().enumerate() {
        assert_eq!(e1.minis[k].hash().byte_cnt.get() as usize, f.len());
    }
    let e2 = mlx5dp::prm::EnhancedCompressedCqe::read_from_bytes(tc.slot(8).as_bytes()).unwrap();
    assert_eq!(e2.num_minis(), 2);
    assert_eq!(e2.minis[1].hash().byte_cnt.get() as usize, frames[9].len());
    for s in [2, 7, 9] {
        assert_eq!(tc.slot(s).signature, 0xff, "hole {s} untouched");
    }

    // The next step continues with the same title (no regular CQE between).
    let more = send_frames(&mut r, 1);
    let e3 = mlx5dp::prm::EnhancedCompressedCqe::read_from_bytes(tc.slot(10).as_bytes()).unwrap();
    assert_eq!(e3.num_minis(), 1);
    assert_eq!(e3.minis[0].hash().byte_cnt.get() as usize, more[0].len());
}

#[test]
fn requester_sessions_and_compression_off_without_force() {
    let mut dev = Device::default();
    let pd = dev.alloc_pd();
    let mut init = comp(MiniCqeFormat::Hash, CompressionLayout::Basic, 64);
    let c = dev.create_cq(init).unwrap();
    init.compression = init
        .compression
        .map(|c| CompressionCfg { force: false, ..c });
    let c2 = dev.create_cq(init).unwrap();
    let q = qp(&mut dev, QpType::Rc, pd, c, c, RqInit::None);
    let rq = RqInit::Cyclic {
        wqe_cnt: 4,
        max_sge: 1,
    };
    let peer = qp(&mut dev, QpType::Rc, pd, c2, c2, rq);
    connect(&mut dev, q, peer, Access::ALL);
    let mut sq = TSq::new(&dev, q);
    sq.post(SendOpcode::Nop, 0, SIG, 0, &[]);
    sq.post(
        SendOpcode::Send,
        0,
        0,
        0,
        &[inline_seg(b"unsignalled, dropped: no receive")],
    );
    for _ in 0..3 {
        sq.post(SendOpcode::Nop, 0, SIG, 0, &[]);
    }
    dev.process_sq(q).unwrap();
    // The send hit RNR (rnr_retry 0) → error; so: NOP, then error, then flushes.
    let tc = TCq::new(&dev, c);
    assert_eq!(tc.slot(0).format(), mlx5dp::prm::CqeFormat::NoInline);
    assert!(tc.slot(1).is_error());

    // A clean requester run compresses: 4 signalled NOPs on the peer.
    let mut ps = TSq::new(&dev, peer);
    for _ in 0..4 {
        ps.post(SendOpcode::Nop, 0, SIG, 0, &[]);
    }
    dev.process_sq(peer).unwrap();
    let t2 = TCq::new(&dev, c2);
    // Without force a run of 4 still compresses (natural threshold 4)...
    assert_eq!(t2.slot(0).format(), mlx5dp::prm::CqeFormat::Compressed);
    let m = mlx5dp::prm::MiniCqe::read_from_bytes(&mini_at(&t2, 1, 3)[..]).unwrap();
    assert_eq!(
        (m.req().wqe_counter.get(), m.req().s_wqe_opcode),
        (3, SendOpcode::Nop.raw())
    );
    // ... and a run of 2 does not.
    for _ in 0..2 {
        ps.post(SendOpcode::Nop, 0, SIG, 0, &[]);
    }
    dev.process_sq(peer).unwrap();
    assert_eq!(t2.slot(4).format(), mlx5dp::prm::CqeFormat::NoInline);
    assert_eq!(t2.slot(5).format(), mlx5dp::prm::CqeFormat::NoInline);
}

#[test]
fn control_path_rejects_bad_attributes() {
    let mut dev = Device::default();
    let pd = dev.alloc_pd();
    assert!(dev
        .create_cq(CqInit {
            cqe_cnt: 48,
            cqe_size: CqeSize::B64,
            compression: None,
            ignore_overrun: false
        })
        .is_err());
    let c = cq(&mut dev, 8);
    let q = qp(&mut dev, QpType::Rc, pd, c, c, RqInit::None);
    assert!(
        dev.modify_qp(q, QpState::Rts, &QpAttr::default()).is_err(),
        "RESET -> RTS"
    );
    dev.modify_qp(q, QpState::Init, &QpAttr::default()).unwrap();
    assert!(
        dev.modify_qp(q, QpState::Rtr, &QpAttr::default()).is_err(),
        "RC RTR needs dest_qpn"
    );
    let buf = dev.alloc_buffer(64).unwrap();
    assert!(
        dev.reg_mr(pd, &buf, Access::REMOTE_WRITE).is_err(),
        "remote write needs local write"
    );
    let k1 = dev.reg_mr(pd, &buf, Access::LOCAL_WRITE).unwrap();
    assert_ne!(k1, INVALID_LKEY);
    dev.dereg_mr(k1).unwrap();
    let k2 = dev.reg_mr(pd, &buf, Access::LOCAL_WRITE).unwrap();
    assert_ne!(k1, k2, "a reused index gets a new key");
    let parts = dev.sq_parts(q).unwrap();
    assert_eq!(parts.bf_reg as usize - parts.uar as usize, 0x800);
    assert_eq!((parts.wqe_cnt, parts.stride, parts.bf_size), (64, 64, 256));
}
