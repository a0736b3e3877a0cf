//! Unit tests of the CQ over ordinary memory rings.

use super::*;
use crate::prm::{
    Be16, Be32, CqeFormat, ErrCqe, MiniCqe, OpOwn, SopDropQpn, CQE_OP_OWN_INIT, CQE_VIC_INIT,
};
use std::boxed::Box;

/// 64 bytes, 64-byte aligned: rings are built from these, as aligned as a
/// CQ buffer from mlx5dv (page-aligned) must at least be.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([u8; 64]);
use std::vec::Vec;

/// Device-side memory of one CQ: ring, doorbell record, UAR page. Held as
/// raw pointers only, so that the test's writes and the CQ's reads share
/// one provenance (Miri).
pub(super) struct Mem {
    ring: *mut u8,
    ring_len: usize,
    pub(super) stride: usize,
    dbrec: *mut u32,
    uar: *mut u64,
}

impl Mem {
    pub(super) fn new(entries: usize, size: CqeSize, enhanced: bool) -> Self {
        let stride = size.bytes();
        let mut v = std::vec![0u8; entries * stride];
        for s in 0..entries {
            v[s * stride + stride - 1] = CQE_OP_OWN_INIT;
            if enhanced {
                v[s * stride + stride - 2] = CQE_VIC_INIT;
            }
        }
        let ring_len = v.len();
        let lines: Vec<Line> = v
            .chunks_exact(64)
            .map(|c| Line(c.try_into().unwrap()))
            .collect();
        let ring = Box::into_raw(lines.into_boxed_slice()).cast::<u8>();
        let dbrec = Box::into_raw(Box::new([0xa5a5_a5a5u32; 2])).cast::<u32>();
        let uar = Box::into_raw(Box::new([0u64; 512])).cast::<u64>();
        Self {
            ring,
            ring_len,
            stride,
            dbrec,
            uar,
        }
    }

    pub(super) fn cq(&self, cfg: CqConfig) -> Cq {
        let parts = CqParts {
            buf: NonNull::new(self.ring).unwrap(),
            cqe_cnt: (self.ring_len / self.stride) as u32,
            cqe_size: if self.stride == 64 {
                CqeSize::B64
            } else {
                CqeSize::B128
            },
            dbrec: NonNull::new(self.dbrec).unwrap(),
            uar: NonNull::new(self.uar.cast::<u8>()),
            cqn: 0xa1,
        };
        // SAFETY: the memory lives as long as `self`, which every test keeps
        // alive longer than the CQ.
        unsafe { Cq::from_raw_parts(parts, cfg, 0) }.unwrap()
    }

    /// Writes a 64-byte CQE into slot `slot` (second half of a 128-byte slot).
    pub(super) fn put(&self, slot: usize, cqe: &Cqe64) {
        let bytes: [u8; 64] = zerocopy::transmute!(*cqe);
        self.put_bytes(slot * self.stride + self.stride - 64, &bytes);
    }

    pub(super) fn put_bytes(&self, off: usize, bytes: &[u8]) {
        assert!(off + bytes.len() <= self.ring_len);
        // SAFETY: in bounds (asserted); the ring is live; no reference to it exists.
        unsafe { core::ptr::copy_nonoverlapping(bytes.as_ptr(), self.ring.add(off), bytes.len()) }
    }

    pub(super) fn slot_bytes(&self, slot: usize) -> [u8; 64] {
        let mut out = [0u8; 64];
        let off = slot * self.stride + self.stride - 64;
        // SAFETY: in bounds; the ring is live.
        unsafe { core::ptr::copy_nonoverlapping(self.ring.add(off), out.as_mut_ptr(), 64) }
        out
    }

    pub(super) fn dbrec(&self) -> [u8; 8] {
        // SAFETY: 8 live bytes.
        unsafe { self.dbrec.cast::<[u8; 8]>().read_volatile() }
    }

    fn uar_cq_doorbell(&self) -> [u8; 8] {
        // SAFETY: the UAR page is 4 KiB and live; offset 0x20 is in bounds.
        unsafe { self.uar.add(4).cast::<[u8; 8]>().read_volatile() }
    }
}

impl Drop for Mem {
    fn drop(&mut self) {
        // SAFETY: these came from `Box::into_raw` with these exact types.
        unsafe {
            drop(Box::from_raw(core::ptr::slice_from_raw_parts_mut(
                self.ring.cast::<Line>(),
                self.ring_len / 64,
            )));
            drop(Box::from_raw(self.dbrec.cast::<[u32; 2]>()));
            drop(Box::from_raw(self.uar.cast::<[u64; 512]>()));
        }
    }
}

fn cqe(opcode: CqeOpcode, owner: bool, wqe_counter: u16) -> Cqe64 {
    let mut c = Cqe64 {
        op_own: OpOwn::new().with_opcode(opcode.raw()).with_owner(owner),
        ..Cqe64::default()
    };
    c.wqe_counter = Be16::new(wqe_counter);
    c.sop_drop_qpn = SopDropQpn::new().with_qpn(0x123);
    c
}

fn err_cqe(opcode: CqeOpcode, syndrome: u8, vendor: u8, wqe_counter: u16) -> Cqe64 {
    let e = ErrCqe {
        syndrome,
        vendor_err_synd: vendor,
        wqe_counter: Be16::new(wqe_counter),
        op_own: OpOwn::new().with_opcode(opcode.raw()),
        ..ErrCqe::default()
    };
    zerocopy::transmute!(e)
}

fn collect(cq: &mut Cq, wqs: &mut impl WorkQueues, max: usize) -> Vec<Completion> {
    let mut out = Vec::new();
    cq.poll(wqs, max, |c| out.push(c.clone())).unwrap();
    out
}

#[test]
fn requester_send_and_doorbell_record() {
    let m = Mem::new(64, CqeSize::B64, false);
    let mut c = cqe(CqeOpcode::Req, false, 5);
    c.sop_drop_qpn = c.sop_drop_qpn.with_sop(SendOpcode::Send.raw());
    m.put(0, &c);
    let mut cq = m.cq(CqConfig::default());
    let got = collect(&mut cq, &mut RawCounters::default(), 8);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].wr_id(), 5);
    assert_eq!(got[0].opcode(), WcOpcode::Send);
    assert_eq!(got[0].status(), WcStatus::Success);
    assert_eq!(got[0].qp_num(), 0x123);
    assert_eq!(m.dbrec(), [0, 0, 0, 1, 0xa5, 0xa5, 0xa5, 0xa5]);
    assert_eq!(cq.consumer_index(), 1);
}

/// The ring base must be 64-byte aligned (`mem::RING_ALIGN`: a mini
/// array is copied as two aligned 32-byte halves): any other offset from a
/// 64-byte boundary is refused, a 64-byte boundary accepted.
#[test]
fn ring_must_be_64_byte_aligned() {
    let m = Mem::new(64, CqeSize::B64, false);
    for off in [0, 8, 16, 32, 48, 64] {
        let parts = CqParts {
            // SAFETY: `off + 32 * 64` bytes lie inside the 64 entries.
            buf: NonNull::new(unsafe { m.ring.add(off) }).unwrap(),
            cqe_cnt: 32,
            cqe_size: CqeSize::B64,
            dbrec: NonNull::new(m.dbrec).unwrap(),
            uar: None,
            cqn: 0xa1,
        };
        // SAFETY: the memory lives as long as `m`, longer than the CQ.
        let got = unsafe { Cq::from_raw_parts(parts, CqConfig::default(), 0) };
        if off % 64 == 0 {
            assert!(got.is_ok(), "offset {off}");
        } else {
            assert!(
                matches!(got, Err(CqInitError::MisalignedBuf)),
                "offset {off}"
            );
        }
    }
}

use crate::prm::SendOpcode;

#[test]
fn requester_opcodes() {
    let cases = [
        (SendOpcode::RdmaWrite, WcOpcode::RdmaWrite, 0, 0),
        (
            SendOpcode::RdmaWriteImm,
            WcOpcode::RdmaWrite,
            WcFlags::WITH_IMM,
            0,
        ),
        (SendOpcode::SendImm, WcOpcode::Send, WcFlags::WITH_IMM, 0),
        (SendOpcode::SendInval, WcOpcode::Send, 0, 0),
        (SendOpcode::RdmaRead, WcOpcode::RdmaRead, 0, 4096),
        (SendOpcode::AtomicCs, WcOpcode::CompSwap, 0, 8),
        (SendOpcode::AtomicFa, WcOpcode::FetchAdd, 0, 8),
        (SendOpcode::Tso, WcOpcode::Tso, 0, 0),
    ];
    for (sop, op, flags, len) in cases {
        let m = Mem::new(4, CqeSize::B64, false);
        let mut c = cqe(CqeOpcode::Req, false, 1);
        c.sop_drop_qpn = c.sop_drop_qpn.with_sop(sop.raw());
        c.byte_cnt = Be32::new(4096);
        m.put(0, &c);
        let mut cq = m.cq(CqConfig::default());
        let mut wc = [Wc::default(); 2];
        assert_eq!(cq.poll_wc(&mut RawCounters::default(), &mut wc).unwrap(), 1);
        assert_eq!(wc[0].opcode, Some(op), "{sop:?}");
        assert_eq!(wc[0].wc_flags.0, flags, "{sop:?}");
        assert_eq!(wc[0].byte_len, len, "{sop:?}");
    }
}

/// A send queue that records a completion opcode for every WQE (libmlx5
/// `sq.wr_data`).
struct Recorded(WcOpcode);

impl WorkQueues for Recorded {
    fn retire_send(
        &mut self,
        _: WqRef,
        wqe_counter: u16,
        _: WcStatus,
    ) -> Result<SendRetired, LookupError> {
        Ok(SendRetired {
            wr_id: u64::from(wqe_counter),
            wr_opcode: Some(self.0),
        })
    }

    fn retire_recv(
        &mut self,
        wq: WqRef,
        wqe_counter: u16,
        status: WcStatus,
    ) -> Result<RecvRetired, LookupError> {
        RawCounters::default().retire_recv(wq, wqe_counter, status)
    }
}

/// libmlx5 v44 takes the opcode recorded at post time (`wr_data`) only for
/// NOP, UMR, SET_PSV and MMO (`handle_good_req`, `mlx5_cq_read_wc_opcode`):
/// another send opcode it does not map (masked atomics, ...) leaves
/// `ibv_wc.opcode` unwritten and reads 0; a recorded `IBV_WC_DRIVER2` (raw
/// WQE) wins over every send opcode.
#[test]
fn recorded_opcode_only_for_the_opcodes_libmlx5_takes_it_for() {
    let cases = [
        // (send opcode, recorded, ibv_wc.opcode, read_opcode)
        (
            SendOpcode::Umr,
            WcOpcode::LocalInv,
            Some(WcOpcode::LocalInv),
            WcOpcode::LocalInv,
        ),
        (
            SendOpcode::Nop,
            WcOpcode::BindMw,
            Some(WcOpcode::BindMw),
            WcOpcode::BindMw,
        ),
        (
            SendOpcode::SetPsv,
            WcOpcode::Driver1,
            Some(WcOpcode::Driver1),
            WcOpcode::Driver1,
        ),
        (
            SendOpcode::Mmo,
            WcOpcode::Driver1,
            Some(WcOpcode::Driver1),
            WcOpcode::Driver1,
        ),
        (
            SendOpcode::AtomicMaskedCs,
            WcOpcode::BindMw,
            None,
            WcOpcode::Send,
        ),
        (
            SendOpcode::AtomicMaskedFa,
            WcOpcode::CompSwap,
            None,
            WcOpcode::Send,
        ),
        (
            SendOpcode::LocalInval,
            WcOpcode::LocalInv,
            None,
            WcOpcode::Send,
        ),
        (
            SendOpcode::RdmaWrite,
            WcOpcode::BindMw,
            Some(WcOpcode::RdmaWrite),
            WcOpcode::RdmaWrite,
        ),
        (
            SendOpcode::Send,
            WcOpcode::Driver2,
            Some(WcOpcode::Driver2),
            WcOpcode::Driver2,
        ),
        (
            SendOpcode::AtomicMaskedFa,
            WcOpcode::Driver2,
            Some(WcOpcode::Driver2),
            WcOpcode::Driver2,
        ),
    ];
    for (sop, recorded, wc_op, read_op) in cases {
        let m = Mem::new(4, CqeSize::B64, false);
        let mut c = cqe(CqeOpcode::Req, false, 1);
        c.sop_drop_qpn = c.sop_drop_qpn.with_sop(sop.raw());
        m.put(0, &c);
        m.put(1, &c);
        let mut cq = m.cq(CqConfig::default());
        let mut wc = [Wc::default(); 1];
        assert_eq!(cq.poll_wc(&mut Recorded(recorded), &mut wc).unwrap(), 1);
        assert_eq!(wc[0].opcode, wc_op, "{sop:?} {recorded:?}");
        let got = collect(&mut cq, &mut Recorded(recorded), 1);
        assert_eq!(got[0].opcode(), read_op, "{sop:?} {recorded:?}");
    }
}

#[test]
fn responder_opcodes_flags_and_fields() {
    let cases = [
        (CqeOpcode::RespSend, WcOpcode::Recv, 0),
        (CqeOpcode::RespSendImm, WcOpcode::Recv, WcFlags::WITH_IMM),
        (
            CqeOpcode::RespWrImm,
            WcOpcode::RecvRdmaWithImm,
            WcFlags::WITH_IMM,
        ),
        (CqeOpcode::RespSendInv, WcOpcode::Recv, WcFlags::WITH_INV),
    ];
    for (opc, op, flags) in cases {
        let m = Mem::new(4, CqeSize::B64, false);
        let mut c = cqe(opc, false, 2);
        c.byte_cnt = Be32::new(100);
        c.imm_inval_pkey = Be32::new(0x00c0_ffee);
        c.slid = Be16::new(0x34);
        c.ml_path = 0x85;
        c.flags_rqpn = crate::prm::FlagsRqpn::new()
            .with_rqpn(0xabc)
            .with_sl(7)
            .with_grh(2);
        m.put(0, &c);
        let mut cq = m.cq(CqConfig::default());
        let got = collect(&mut cq, &mut RawCounters::default(), 4);
        let g = &got[0];
        assert_eq!(g.opcode(), op);
        assert_eq!(g.wc_flags().0, flags | WcFlags::GRH);
        assert_eq!(g.byte_len(), 100);
        assert_eq!(g.src_qp(), 0xabc);
        assert_eq!(g.sl(), 7);
        assert_eq!(g.slid(), 0x34);
        assert_eq!(g.dlid_path_bits(), 5);
        assert_eq!(g.pkey_index(), 0xffee);
        if opc == CqeOpcode::RespSendInv {
            assert_eq!(g.invalidated_rkey(), Some(0x00c0_ffee));
            assert_eq!(g.imm_data(), 0xeeff_c000);
        } else {
            assert_eq!(g.imm_data(), 0x00c0_ffee);
        }
        let wc = g.to_wc();
        assert_eq!(wc.opcode, Some(op));
        assert_eq!(wc.byte_len, 100);
    }
}

#[test]
fn every_syndrome_maps_and_is_logged() {
    let mut all: Vec<u8> = Syndrome::ALL.iter().map(|s| s.raw()).collect();
    all.push(0x77);
    for (i, syn) in all.iter().copied().enumerate() {
        for opc in [CqeOpcode::ReqErr, CqeOpcode::RespErr] {
            let m = Mem::new(4, CqeSize::B64, false);
            m.put(0, &err_cqe(opc, syn, 0x80 + i as u8, 6));
            let mut cq = m.cq(CqConfig::default());
            let mut wc = [Wc::default(); 1];
            assert_eq!(cq.poll_wc(&mut RawCounters::default(), &mut wc).unwrap(), 1);
            assert_eq!(wc[0].status, Syndrome::from_raw(syn).wc_status());
            assert_eq!(wc[0].vendor_err, 0x80 + i as u32);
            assert_eq!(wc[0].wr_id, 6);
            assert_eq!(wc[0].opcode, None);
            let log = cq.error_log();
            assert_eq!(log.errors, 1);
            assert_eq!(log.last.unwrap().requester, opc == CqeOpcode::ReqErr);
            assert_eq!(log.first.is_some(), syn != Syndrome::WrFlush.raw());
        }
    }
    assert_eq!(Syndrome::from_raw(0x77).wc_status(), WcStatus::GeneralErr);
}

#[test]
fn owner_bit_wraps() {
    let m = Mem::new(4, CqeSize::B64, false);
    let mut cq = m.cq(CqConfig::default());
    let mut wqs = RawCounters::default();
    let mut n = 0u16;
    for pass in 0..3u16 {
        for slot in 0..4 {
            m.put(slot, &cqe(CqeOpcode::Req, pass % 2 == 1, n));
            n += 1;
        }
        let got = collect(&mut cq, &mut wqs, 16);
        assert_eq!(got.len(), 4, "pass {pass}");
        assert_eq!(got[3].wr_id(), u64::from(n - 1));
        // Stale owner: nothing more.
        assert!(collect(&mut cq, &mut wqs, 16).is_empty());
    }
    assert_eq!(cq.consumer_index(), 12);
    assert_eq!(m.dbrec()[..4], [0, 0, 0, 12]);
}

#[test]
fn empty_start_poll_writes_nothing_poll_wc_writes_ci() {
    let m = Mem::new(8, CqeSize::B64, false);
    let mut cq = m.cq(CqConfig::default());
    assert!(cq
        .start_poll(&mut RawCounters::default())
        .unwrap()
        .is_none());
    assert_eq!(m.dbrec(), [0xa5; 8]);
    let mut wc = [Wc::default(); 4];
    assert_eq!(cq.poll_wc(&mut RawCounters::default(), &mut wc).unwrap(), 0);
    assert_eq!(m.dbrec(), [0, 0, 0, 0, 0xa5, 0xa5, 0xa5, 0xa5]);
}

#[test]
fn batch_api_start_next_end() {
    let m = Mem::new(8, CqeSize::B64, false);
    for i in 0..3 {
        m.put(i, &cqe(CqeOpcode::Req, false, i as u16 + 10));
    }
    let mut cq = m.cq(CqConfig::default());
    let mut wqs = RawCounters::default();
    let mut batch = cq.start_poll(&mut wqs).unwrap().unwrap();
    let mut ids = std::vec![batch.completion().wr_id()];
    while batch.next_poll().unwrap() {
        ids.push(batch.completion().wr_id());
    }
    assert_eq!(m.dbrec(), [0xa5; 8], "nothing before end_poll");
    batch.end_poll();
    assert_eq!(ids, [10, 11, 12]);
    assert_eq!(m.dbrec()[..4], [0, 0, 0, 3]);
}

#[test]
fn cqe_128_with_inline_scatter_64() {
    let m = Mem::new(4, CqeSize::B128, false);
    let mut c = cqe(CqeOpcode::RespSend, false, 0);
    c.op_own = c.op_own.with_format(CqeFormat::InlineScatter64.raw());
    c.byte_cnt = Be32::new(40);
    m.put(0, &c);
    let data: Vec<u8> = (0..64u8).collect();
    m.put_bytes(0, &data);
    let mut cq = m.cq(CqConfig::default());
    let got = collect(&mut cq, &mut RawCounters::default(), 4);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].inline_data().unwrap(), &data[..40]);
    assert_eq!(got[0].byte_len(), 40);
}

/// An atomic's scattered result is 8 bytes whatever the CQE's byte count
/// (libmlx5 `handle_good_req`: `byte_len = 8`, the length it copies).
#[test]
fn inline_scatter_of_an_atomic_is_eight_bytes() {
    for byte_cnt in [0u32, 8, 0x20] {
        let m = Mem::new(4, CqeSize::B64, false);
        let mut c = cqe(CqeOpcode::Req, false, 0);
        c.op_own = c.op_own.with_format(CqeFormat::InlineScatter32.raw());
        c.sop_drop_qpn = c.sop_drop_qpn.with_sop(SendOpcode::AtomicFa.raw());
        c.byte_cnt = Be32::new(byte_cnt);
        c.pkt_info = 0xa0;
        m.put(0, &c);
        let mut cq = m.cq(CqConfig::default());
        let got = collect(&mut cq, &mut RawCounters::default(), 4);
        let data = got[0].inline_data().unwrap();
        assert_eq!(data.len(), 8, "byte_cnt {byte_cnt}");
        assert_eq!(data[0], 0xa0);
        assert_eq!(got[0].to_wc().byte_len, 8);
    }
}

#[test]
fn inline_scatter_32_in_64_byte_cqe() {
    let m = Mem::new(4, CqeSize::B64, false);
    let mut c = cqe(CqeOpcode::Req, false, 0);
    c.op_own = c.op_own.with_format(CqeFormat::InlineScatter32.raw());
    c.sop_drop_qpn = c.sop_drop_qpn.with_sop(SendOpcode::RdmaRead.raw());
    c.byte_cnt = Be32::new(20);
    c.pkt_info = 0xc0;
    m.put(0, &c);
    let mut cq = m.cq(CqConfig::default());
    let got = collect(&mut cq, &mut RawCounters::default(), 4);
    assert_eq!(got[0].inline_data().unwrap().len(), 20);
    assert_eq!(got[0].inline_data().unwrap()[0], 0xc0);
}

#[test]
fn arm_writes_record_and_doorbell() {
    let m = Mem::new(8, CqeSize::B64, false);
    for i in 0..3 {
        m.put(i, &cqe(CqeOpcode::Req, false, 0));
    }
    let mut cq = m.cq(CqConfig::default());
    collect(&mut cq, &mut RawCounters::default(), 8);
    cq.arm(true);
    // sn 0, cmd 1 (solicited), ci 3; then CQN 0xa1.
    assert_eq!(m.dbrec()[4..], [0x01, 0, 0, 3]);
    assert_eq!(m.uar_cq_doorbell(), [0x01, 0, 0, 3, 0, 0, 0, 0xa1]);
    cq.ack_events(1);
    cq.arm(false);
    assert_eq!(m.dbrec()[4..], [0x10, 0, 0, 3]);
    assert_eq!(m.uar_cq_doorbell(), [0x10, 0, 0, 3, 0, 0, 0, 0xa1]);
    cq.ack_events(3);
    cq.arm(false);
    assert_eq!(m.dbrec()[4], 0x00, "arm_sn wraps at 4");
}

#[test]
fn unsupported_opcode_is_consumed_and_reported() {
    let m = Mem::new(4, CqeSize::B64, false);
    m.put(0, &cqe(CqeOpcode::SigErr, false, 0));
    m.put(1, &cqe(CqeOpcode::Req, false, 9));
    let mut cq = m.cq(CqConfig::default());
    let mut wqs = RawCounters::default();
    let e = cq.poll(&mut wqs, 4, |_| {}).unwrap_err();
    assert_eq!(
        e,
        PollError::UnsupportedOpcode {
            opcode: CqeOpcode::SigErr,
            ci: 0
        }
    );
    let got = collect(&mut cq, &mut wqs, 4);
    assert_eq!(got[0].wr_id(), 9);
}

/// A receive queue that validates checksums (libmlx5 `MLX5_RX_CSUM_VALID`).
struct CsumRq;
impl WorkQueues for CsumRq {
    fn retire_send(&mut self, _: WqRef, _: u16, _: WcStatus) -> Result<SendRetired, LookupError> {
        Err(LookupError::NotInFlight)
    }
    fn retire_recv(&mut self, _: WqRef, c: u16, _: WcStatus) -> Result<RecvRetired, LookupError> {
        Ok(RecvRetired {
            wr_id: u64::from(c),
            rx_csum_valid: true,
        })
    }
}

/// libmlx5's `read_wc_flags` (found by the libmlx5 oracle,
/// `specs/golden/libmlx5-oracle/cqe-random.txt`): no IP_CSUM_OK on a
/// receive error even where the (reserved) checksum bits are set, and the
/// tag-matching flags from `app` / `app_op` whatever the opcode, which
/// `to_wc` (`ibv_poll_cq`) leaves out.
#[test]
fn read_wc_flags_as_libmlx5() {
    let csum = |c: &mut Cqe64| {
        c.hds_ip_ext = crate::prm::HdsIpExt::new()
            .with_l3_ok(true)
            .with_l4_ok(true);
        c.l4_l3_hdr_type = crate::prm::L4L3HdrType::new().with_l3_hdr_type(2);
    };
    let m = Mem::new(4, CqeSize::B64, false);
    let mut ok = cqe(CqeOpcode::RespSend, false, 1);
    csum(&mut ok);
    let mut bad = err_cqe(CqeOpcode::RespErr, 0x5, 0, 2);
    csum(&mut bad);
    m.put(0, &ok);
    m.put(1, &bad);
    let mut cq = m.cq(CqConfig::default());
    let got = collect(&mut cq, &mut CsumRq, 4);
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].wc_flags().0, WcFlags::IP_CSUM_OK);
    assert_eq!(got[1].status(), WcStatus::WrFlushErr);
    assert_eq!(got[1].wc_flags().0, 0, "no checksum flag on RESP_ERR");

    let tm = [
        (0x0a, WcFlags::TM_MATCH | WcFlags::TM_DATA_VALID),
        (0x0b, WcFlags::TM_MATCH | WcFlags::TM_DATA_VALID),
        (0x0c, WcFlags::TM_MATCH | WcFlags::TM_DATA_VALID),
        (0x01, WcFlags::TM_MATCH),
        (0x09, WcFlags::TM_MATCH),
        (0x02, WcFlags::TM_DATA_VALID),
        (0x03, 0),
        (0x0d, 0),
    ];
    for (app_op, flags) in tm {
        for app in [1u8, 0, 2] {
            let m = Mem::new(4, CqeSize::B64, false);
            let mut c = cqe(CqeOpcode::Req, false, 3);
            c.app = app;
            c.app_op = app_op;
            m.put(0, &c);
            let mut cq = m.cq(CqConfig::default());
            let got = collect(&mut cq, &mut RawCounters::default(), 4);
            let want = if app == 1 { flags } else { 0 };
            assert_eq!(got[0].wc_flags().0, want, "app {app} app_op {app_op:#x}");
            assert_eq!(got[0].to_wc().wc_flags.0, 0, "ibv_poll_cq ignores app");
        }
    }
}

/// A work queue that refuses everything: lookup errors surface typed.
#[derive(Debug)]
struct Refuse;
impl WorkQueues for Refuse {
    fn retire_send(&mut self, _: WqRef, _: u16, _: WcStatus) -> Result<SendRetired, LookupError> {
        Err(LookupError::NotInFlight)
    }
    fn retire_recv(&mut self, _: WqRef, _: u16, _: WcStatus) -> Result<RecvRetired, LookupError> {
        Err(LookupError::UnknownQueue)
    }
}

#[test]
fn lookup_errors_are_typed() {
    let m = Mem::new(4, CqeSize::B64, false);
    m.put(0, &cqe(CqeOpcode::Req, false, 77));
    let mut cq = m.cq(CqConfig::default());
    let e = cq.start_poll(&mut Refuse).unwrap_err();
    assert!(matches!(
        e,
        PollError::Lookup {
            error: LookupError::NotInFlight,
            requester: true,
            wqe_counter: 77,
            ..
        }
    ));
    assert_eq!(cq.consumer_index(), 1, "the bad CQE is consumed");
    assert_eq!(
        m.dbrec()[..4],
        [0xa5; 4],
        "but, as in libmlx5, not published by a failed start_poll (the record keeps its fill)"
    );
    // The next `ibv_poll_cq` publishes it (nothing else to report).
    let mut wc = [Wc::default(); 1];
    assert_eq!(cq.poll_wc(&mut Refuse, &mut wc), Ok(0));
    assert_eq!(m.dbrec()[..4], [0, 0, 0, 1], "published by the next poll");
}

// ---------------------------------------------------------------------------
// Compression.

fn title_basic(count: u32, wqe_counter: u16, owner: bool) -> Cqe64 {
    let mut t = cqe(CqeOpcode::RespSend, owner, wqe_counter);
    t.op_own = t.op_own.with_format(3);
    t.byte_cnt = Be32::new(count);
    t.rss_hash_result = Be32::new(0x1111_1111);
    t.hds_ip_ext = crate::prm::HdsIpExt::new()
        .with_l3_ok(true)
        .with_l4_ok(true);
    t.l4_l3_hdr_type = crate::prm::L4L3HdrType::new()
        .with_l3_hdr_type(2)
        .with_l4_hdr_type(2);
    t
}

fn hash_mini(hash: u32, len: u32) -> MiniCqe {
    let mut b = [0u8; 8];
    b[..4].copy_from_slice(&hash.to_be_bytes());
    b[4..].copy_from_slice(&len.to_be_bytes());
    MiniCqe { bytes: b }
}

/// Lays out a basic session at `slot` (title, arrays at +1, +8, +16…).
fn put_basic_session(m: &Mem, slot: usize, title: &Cqe64, minis: &[MiniCqe]) {
    m.put(slot, title);
    for (k, chunk) in minis.chunks(8).enumerate() {
        let off = zip::basic_array_offset(k as u32) as usize;
        let mut arr = [0u8; 64];
        for (i, mc) in chunk.iter().enumerate() {
            arr[i * 8..i * 8 + 8].copy_from_slice(&mc.bytes);
        }
        let s = (slot + off) % (m.ring_len / m.stride);
        m.put_bytes(s * m.stride + m.stride - 64, &arr);
    }
}

fn basic_cfg(format: MiniCqeFormat) -> CqConfig {
    CqConfig {
        compression: Some((Layout::Basic, format)),
        ..CqConfig::default()
    }
}

#[test]
fn basic_hash_session_of_nine() {
    let m = Mem::new(64, CqeSize::B64, false);
    m.put(0, &cqe(CqeOpcode::RespSend, false, 0));
    let minis: Vec<MiniCqe> = (0..9).map(|i| hash_mini(0x100 + i, 64 + i)).collect();
    put_basic_session(&m, 1, &title_basic(9, 1, false), &minis);
    m.put(10, &cqe(CqeOpcode::RespSend, false, 10));
    let mut cq = m.cq(basic_cfg(MiniCqeFormat::Hash));
    let got = collect(&mut cq, &mut RawCounters::default(), 64);
    assert_eq!(got.len(), 11);
    for (i, g) in got[1..10].iter().enumerate() {
        assert_eq!(g.rss_hash(), 0x100 + i as u32);
        assert_eq!(g.byte_len(), 64 + i as u32);
        assert_eq!(g.wr_id(), 1 + i as u64);
        assert_eq!(g.origin(), Origin::Mini);
        assert!(g.l3_ok() && g.l4_ok());
    }
    assert_eq!(got[10].wr_id(), 10);
    assert_eq!(cq.consumer_index(), 11);
    // Slots 2..=9 invalidated, the title (1) and the rest untouched.
    for s in 2..=9 {
        assert_eq!(m.slot_bytes(s)[63], CQE_INVALIDATE, "slot {s}");
    }
    assert_eq!(m.slot_bytes(1)[63] & 0xc, 0xc);
    assert_eq!(m.slot_bytes(11)[63], CQE_OP_OWN_INIT);
}

#[test]
fn basic_session_split_across_batches_publishes_title_index() {
    let m = Mem::new(16, CqeSize::B64, false);
    let minis: Vec<MiniCqe> = (0..5).map(|i| hash_mini(i, 60)).collect();
    put_basic_session(&m, 0, &title_basic(5, 0, false), &minis);
    let mut cq = m.cq(basic_cfg(MiniCqeFormat::Hash));
    let mut wqs = RawCounters::default();
    assert_eq!(collect(&mut cq, &mut wqs, 2).len(), 2);
    assert!(cq.in_session());
    assert_eq!(m.dbrec()[..4], [0, 0, 0, 0]);
    assert_eq!(collect(&mut cq, &mut wqs, 8).len(), 3);
    assert_eq!(m.dbrec()[..4], [0, 0, 0, 5]);
}

/// `reported_index` names the index each completion stands for: a
/// regular CQE's own, a mini's title index plus its place, whatever came
/// before (a RESIZE_CQ CQE, consumed unreported); the minis' expanded CQEs
/// carry the title's opcode with format, solicited-event and owner bits
/// clear (the kernel's `op_own &= 0xf0`).
#[test]
fn reported_index_and_expanded_op_own_of_minis() {
    let m = Mem::new(16, CqeSize::B64, false);
    m.put(0, &cqe(CqeOpcode::ResizeCq, false, 0));
    m.put(1, &cqe(CqeOpcode::RespSend, false, 1));
    let minis: Vec<MiniCqe> = (0..5).map(|i| hash_mini(i, 60 + i)).collect();
    let mut title = title_basic(5, 2, false);
    // Solicited event and (pass 0) owner 0 in the title.
    title.op_own = OpOwn::from_bits(title.op_own.into_bits() | 0x02);
    put_basic_session(&m, 2, &title, &minis);
    m.put(7, &cqe(CqeOpcode::RespSend, false, 7));
    let mut cq = m.cq(basic_cfg(MiniCqeFormat::Hash));
    let mut wqs = RawCounters::default();
    let mut seen = Vec::new();
    loop {
        let mut op_own = None;
        let n = cq
            .poll(&mut wqs, 1, |c| {
                op_own = (c.origin() == Origin::Mini).then(|| c.cqe().op_own.into_bits())
            })
            .unwrap();
        if n == 0 {
            break;
        }
        if let Some(b) = op_own {
            assert_eq!(b, CqeOpcode::RespSend.raw() << 4, "mini op_own {b:#x}");
        }
        seen.push(cq.reported_index());
    }
    assert_eq!(seen, [1, 2, 3, 4, 5, 6, 7]);
    assert_eq!(cq.consumer_index(), 8);
}

/// Minis of a title whose opcode is no completion (RESIZE_CQ, or one the
/// poller does not handle) are refused one by one, each with its own
/// index, not dropped; the entries after the session poll as usual.
#[test]
fn minis_of_a_title_that_is_no_completion_are_refused_with_their_index() {
    for opcode in [CqeOpcode::ResizeCq, CqeOpcode::from_raw(8)] {
        let m = Mem::new(16, CqeSize::B64, false);
        m.put(0, &cqe(CqeOpcode::RespSend, false, 0));
        let minis: Vec<MiniCqe> = (0..3).map(|i| hash_mini(i, 60)).collect();
        let mut title = title_basic(3, 1, false);
        title.op_own = title.op_own.with_opcode(opcode.raw());
        put_basic_session(&m, 1, &title, &minis);
        m.put(4, &cqe(CqeOpcode::RespSend, false, 4));
        let mut cq = m.cq(basic_cfg(MiniCqeFormat::Hash));
        let mut wqs = RawCounters::default();
        assert_eq!(collect(&mut cq, &mut wqs, 1).len(), 1);
        for ci in 1..4 {
            assert_eq!(
                cq.poll(&mut wqs, 4, |_| {}),
                Err(PollError::UnsupportedOpcode { opcode, ci }),
                "{opcode:?}"
            );
        }
        let got = collect(&mut cq, &mut wqs, 4);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].wr_id(), 4);
        assert_eq!(cq.consumer_index(), 5);
    }
    // The enhanced layout: a RESIZE_CQ CQE is the last regular one before
    // the compressed CQE, so its title.
    let m = Mem::new(16, CqeSize::B64, true);
    m.put(0, &with_vic(cqe(CqeOpcode::RespSend, false, 0), 0));
    m.put(1, &with_vic(cqe(CqeOpcode::ResizeCq, false, 0), 0));
    let minis: Vec<MiniCqe> = (0..2).map(|i| hash_mini(i, 60)).collect();
    m.put(2, &enhanced_block(&minis, 0));
    let mut cq = m.cq(enh_cfg(MiniCqeFormat::Hash));
    let mut wqs = RawCounters::default();
    assert_eq!(collect(&mut cq, &mut wqs, 1).len(), 1);
    for ci in 2..4 {
        assert_eq!(
            cq.poll(&mut wqs, 4, |_| {}),
            Err(PollError::UnsupportedOpcode {
                opcode: CqeOpcode::ResizeCq,
                ci
            })
        );
    }
}

#[test]
fn basic_session_wraps_the_ring_and_passes() {
    // Session of 9 starting at slot 12 of a 16-entry ring: arrays at 13 and
    // 20 = slot 4 of the next pass; next CQE at 21 = slot 5, owner 1.
    let m = Mem::new(16, CqeSize::B64, false);
    let mut cq = m.cq(basic_cfg(MiniCqeFormat::Hash));
    let mut wqs = RawCounters::default();
    for i in 0..12 {
        m.put(i, &cqe(CqeOpcode::RespSend, false, i as u16));
    }
    assert_eq!(collect(&mut cq, &mut wqs, 64).len(), 12);
    let minis: Vec<MiniCqe> = (0..9).map(|i| hash_mini(i, 60)).collect();
    put_basic_session(&m, 12, &title_basic(9, 12, false), &minis);
    m.put(5, &cqe(CqeOpcode::RespSend, true, 21));
    let got = collect(&mut cq, &mut wqs, 64);
    assert_eq!(got.len(), 10);
    assert_eq!(got[8].rss_hash(), 8);
    assert_eq!(got[9].wr_id(), 21);
    assert_eq!(cq.consumer_index(), 22);
    for s in [13, 14, 15, 0, 1, 2, 3, 4] {
        assert_eq!(m.slot_bytes(s)[63], CQE_INVALIDATE, "slot {s}");
    }
}

#[test]
fn basic_csum_ftag_csum_stridx_l34h() {
    // CSUM.
    let m = Mem::new(16, CqeSize::B64, false);
    let csum = MiniCqe {
        bytes: [0xbe, 0xef, 0, 0, 0, 0, 1, 0],
    };
    put_basic_session(&m, 0, &title_basic(2, 0, false), &[csum, csum]);
    let mut cq = m.cq(basic_cfg(MiniCqeFormat::Csum));
    let got = collect(&mut cq, &mut RawCounters::default(), 8);
    assert_eq!(
        (got[1].checksum(), got[1].byte_len(), got[1].rss_hash()),
        (0xbeef, 256, 0x1111_1111)
    );

    // FTAG_STRIDX on a striding RQ: flow tag rebuilt, stride index from the mini.
    let m = Mem::new(16, CqeSize::B64, false);
    let ft = |tag: u32, idx: u16| MiniCqe {
        bytes: [
            (tag >> 8) as u8,
            tag as u8,
            (idx >> 8) as u8,
            idx as u8,
            (tag >> 16) as u8,
            0x01,
            0x00,
            0x40,
        ],
    };
    put_basic_session(
        &m,
        0,
        &title_basic(2, 0, false),
        &[ft(0xab_cdef, 3), ft(0x12_3456, 4)],
    );
    let cfg = CqConfig {
        striding_rq: true,
        ..basic_cfg(MiniCqeFormat::FtagStridx)
    };
    let mut cq = m.cq(cfg);
    let got = collect(&mut cq, &mut RawCounters::default(), 8);
    assert_eq!(got[0].flow_tag(), 0xab_cdef);
    assert_eq!(got[1].flow_tag(), 0x12_3456);
    assert_eq!(got[1].stride_index(), Some(4));
    assert_eq!(got[1].consumed_strides(), Some(1));
    assert_eq!(got[1].packet_len(), 0x40);

    // CSUM_STRIDX.
    let m = Mem::new(16, CqeSize::B64, false);
    let cs = |idx: u16| MiniCqe {
        bytes: [0x12, 0x34, 0, idx as u8, 0, 2, 0, 0x80],
    };
    put_basic_session(&m, 0, &title_basic(2, 0, false), &[cs(0), cs(2)]);
    let cfg = CqConfig {
        striding_rq: true,
        ..basic_cfg(MiniCqeFormat::CsumStridx)
    };
    let mut cq = m.cq(cfg);
    let got = collect(&mut cq, &mut RawCounters::default(), 8);
    assert_eq!(
        got.iter().map(|g| g.stride_index()).collect::<Vec<_>>(),
        [Some(0), Some(2)]
    );
    assert_eq!(got[0].consumed_strides(), Some(2));
    assert_eq!(got[0].checksum(), 0x1234);

    // L34H_STRIDX: header types from the mini (byte 0).
    let m = Mem::new(16, CqeSize::B64, false);
    let l = |h: u8| MiniCqe {
        bytes: [h, 0, 0, 1, 0, 1, 0, 64],
    };
    put_basic_session(&m, 0, &title_basic(2, 0, false), &[l(0x14), l(0x29)]);
    let cfg = CqConfig {
        striding_rq: true,
        ..basic_cfg(MiniCqeFormat::L34hStridx)
    };
    let mut cq = m.cq(cfg);
    let got = collect(&mut cq, &mut RawCounters::default(), 8);
    assert_eq!(
        (got[0].l3_hdr_type(), got[0].l4_hdr_type()),
        (L3HdrType::Ipv6, L4HdrType::TcpNoAck)
    );
    assert_eq!(
        (got[1].l3_hdr_type(), got[1].l4_hdr_type()),
        (L3HdrType::Ipv4, L4HdrType::Udp)
    );
    assert_eq!(got[1].vlan(), Some(0));
    assert_eq!(got[0].vlan(), None);
}

use crate::prm::{L3HdrType, L4HdrType};

#[test]
fn basic_requester_minis() {
    let m = Mem::new(16, CqeSize::B64, false);
    let mut t = cqe(CqeOpcode::Req, false, 0);
    t.op_own = t.op_own.with_format(3);
    t.byte_cnt = Be32::new(3);
    let req = |wc: u16, op: u8| MiniCqe {
        bytes: [(wc >> 8) as u8, wc as u8, op, 0, 0, 0, 0, 0],
    };
    put_basic_session(&m, 0, &t, &[req(4, 0x0a), req(9, 0x08), req(0x1_00, 0x10)]);
    let mut cq = m.cq(basic_cfg(MiniCqeFormat::Hash));
    let got = collect(&mut cq, &mut RawCounters::default(), 8);
    let ids: Vec<u64> = got.iter().map(|g| g.wr_id()).collect();
    assert_eq!(ids, [4, 9, 0x100]);
    assert_eq!(got[1].opcode(), WcOpcode::RdmaWrite);
    assert_eq!(got[2].opcode(), WcOpcode::RdmaRead);
}

#[test]
fn basic_bad_session_lengths_break_the_cq() {
    for count in [0, 1, 17] {
        let m = Mem::new(16, CqeSize::B64, false);
        m.put(0, &title_basic(count, 0, false));
        let mut cq = m.cq(basic_cfg(MiniCqeFormat::Hash));
        let e = cq.poll(&mut RawCounters::default(), 4, |_| {}).unwrap_err();
        assert_eq!(e, PollError::BadSessionLength { ci: 0, count });
        assert!(cq.is_broken());
        assert_eq!(
            cq.poll(&mut RawCounters::default(), 4, |_| {}),
            Err(PollError::Broken)
        );
    }
}

#[test]
fn compressed_without_compression_breaks_the_cq() {
    let m = Mem::new(16, CqeSize::B64, false);
    m.put(0, &title_basic(2, 0, false));
    let mut cq = m.cq(CqConfig::default());
    assert_eq!(
        cq.poll(&mut RawCounters::default(), 4, |_| {}),
        Err(PollError::UnexpectedCompressed { ci: 0 })
    );
}

#[test]
fn basic_session_with_128_byte_cqes() {
    let m = Mem::new(16, CqeSize::B128, false);
    let minis: Vec<MiniCqe> = (0..3).map(|i| hash_mini(i + 7, 100)).collect();
    put_basic_session(&m, 0, &title_basic(3, 0, false), &minis);
    let mut cq = m.cq(basic_cfg(MiniCqeFormat::Hash));
    let got = collect(&mut cq, &mut RawCounters::default(), 8);
    assert_eq!(
        got.iter().map(|g| g.rss_hash()).collect::<Vec<_>>(),
        [7, 8, 9]
    );
    assert_eq!(m.slot_bytes(1)[63], CQE_INVALIDATE);
    assert_eq!(m.slot_bytes(2)[63], CQE_INVALIDATE);
}

// Enhanced layout.

fn enh_cfg(format: MiniCqeFormat) -> CqConfig {
    CqConfig {
        compression: Some((Layout::Enhanced, format)),
        ..CqConfig::default()
    }
}

fn with_vic(mut c: Cqe64, vic: u8) -> Cqe64 {
    c.signature = vic;
    c
}

fn enhanced_block(minis: &[MiniCqe], vic: u8) -> Cqe64 {
    let mut b = [0u8; 64];
    for (i, mc) in minis.iter().enumerate() {
        b[i * 8..i * 8 + 8].copy_from_slice(&mc.bytes);
    }
    b[62] = vic;
    b[63] = OpOwn::new()
        .with_format(3)
        .with_opcode(minis.len() as u8 - 1)
        .into_bits();
    zerocopy::transmute!(b)
}

#[test]
fn enhanced_title_and_two_blocks() {
    let m = Mem::new(16, CqeSize::B64, true);
    let mut r = cqe(CqeOpcode::RespSend, false, 0);
    r.rss_hash_result = Be32::new(0xaaaa);
    r.byte_cnt = Be32::new(64);
    m.put(0, &with_vic(r, 0));
    let minis: Vec<MiniCqe> = (0..9).map(|i| hash_mini(0x200 + i, 100 + i)).collect();
    m.put(1, &enhanced_block(&minis[..7], 0));
    m.put(8, &enhanced_block(&minis[7..], 0));
    m.put(10, &with_vic(cqe(CqeOpcode::RespSend, false, 10), 0));
    let mut cq = m.cq(enh_cfg(MiniCqeFormat::Hash));
    let got = collect(&mut cq, &mut RawCounters::default(), 64);
    assert_eq!(got.len(), 11);
    let ids: Vec<u64> = got.iter().map(|g| g.wr_id()).collect();
    assert_eq!(ids, (0..=10).collect::<Vec<u64>>());
    assert_eq!(got[8].rss_hash(), 0x207);
    assert_eq!(got[9].byte_len(), 108);
    assert_eq!(cq.consumer_index(), 11);
    // No invalidation in the enhanced layout.
    assert_eq!(m.slot_bytes(2)[63], CQE_OP_OWN_INIT);
}

#[test]
fn enhanced_validity_by_iteration_count_across_wrap() {
    let m = Mem::new(4, CqeSize::B64, true);
    let mut cq = m.cq(enh_cfg(MiniCqeFormat::Hash));
    let mut wqs = RawCounters::default();
    for i in 0..4 {
        m.put(i, &with_vic(cqe(CqeOpcode::RespSend, false, i as u16), 0));
    }
    assert_eq!(collect(&mut cq, &mut wqs, 16).len(), 4);
    // Pass 1 expects 1: a stale pass-0 entry is not valid.
    assert!(collect(&mut cq, &mut wqs, 16).is_empty());
    m.put(0, &with_vic(cqe(CqeOpcode::RespSend, false, 4), 1));
    m.put(
        1,
        &enhanced_block(&[hash_mini(1, 1), hash_mini(2, 2), hash_mini(3, 3)], 1),
    );
    let got = collect(&mut cq, &mut wqs, 16);
    assert_eq!(
        got.iter().map(|g| g.wr_id()).collect::<Vec<_>>(),
        [4, 5, 6, 7]
    );
    assert_eq!(cq.consumer_index(), 8);
}

#[test]
fn enhanced_block_without_title_or_too_many_minis() {
    let m = Mem::new(16, CqeSize::B64, true);
    m.put(0, &enhanced_block(&[hash_mini(1, 1)], 0));
    let mut cq = m.cq(enh_cfg(MiniCqeFormat::Hash));
    assert_eq!(
        cq.poll(&mut RawCounters::default(), 4, |_| {}),
        Err(PollError::BadEnhancedBlock { ci: 0, count: 1 })
    );
    let m = Mem::new(16, CqeSize::B64, true);
    m.put(0, &with_vic(cqe(CqeOpcode::RespSend, false, 0), 0));
    let mut bad = enhanced_block(&[hash_mini(1, 1)], 0);
    bad.op_own = bad.op_own.with_opcode(9);
    m.put(1, &bad);
    let mut cq = m.cq(enh_cfg(MiniCqeFormat::Hash));
    assert_eq!(
        cq.poll(&mut RawCounters::default(), 4, |_| {}),
        Err(PollError::BadEnhancedBlock { ci: 1, count: 10 })
    );
}

/// A malformed compressed CQE (more than seven minis) right after full
/// blocks: the burst poller's block run leaves it to the general steps,
/// which fail as `poll` does, after the same completions.
#[test]
fn burst_malformed_block_after_full_blocks() {
    for path in unzip_paths() {
        let mems = [
            Mem::new(64, CqeSize::B64, true),
            Mem::new(64, CqeSize::B64, true),
        ];
        let minis: Vec<MiniCqe> = (0..14).map(|i| hash_mini(i, 64 + i)).collect();
        for m in &mems {
            m.put(0, &with_vic(cqe(CqeOpcode::RespSend, false, 0), 0));
            m.put(1, &enhanced_block(&minis[..7], 0));
            m.put(8, &enhanced_block(&minis[7..], 0));
            let mut bad = enhanced_block(&minis[..2], 0);
            bad.op_own = bad.op_own.with_opcode(9);
            m.put(15, &bad);
        }
        let cfg = CqConfig {
            unzip: path,
            ..enh_cfg(MiniCqeFormat::Hash)
        };
        let (mut cq0, mut cq1) = (mems[0].cq(cfg), mems[1].cq(cfg));
        let (mut w0, mut w1) = (RawCounters::default(), RawCounters::default());
        for call in 0..2 {
            let mut want = Vec::new();
            let r0 = cq0.poll(&mut w0, 32, |c| want.push(c.summary()));
            let mut buf = [CompletionSummary::default(); 32];
            let r1 = cq1.poll_burst(&mut w1, &mut buf);
            let what = std::format!("{} call {call}", path.name());
            assert_eq!(r1, r0, "{what}");
            assert_eq!(&buf[..want.len()], &want[..], "{what}");
            assert_eq!(cq1.consumer_index(), cq0.consumer_index(), "{what}");
            assert_eq!(mems[1].dbrec(), mems[0].dbrec(), "{what}");
        }
        assert!(cq0.is_broken() && cq1.is_broken(), "{}", path.name());
    }
}

/// `poll` on `cqs.0` and `poll_burst` on `cqs.1` (over `mems[0]` and
/// `mems[1]`, equal streams) in `calls` calls of the sizes `sizes`
/// (cycled): each call's result, summaries, consumer index, session state
/// and doorbell record equal. Returns the completions polled.
fn calls_match_poll(
    mems: &[Mem; 2],
    cqs: (&mut Cq, &mut Cq),
    sizes: &[usize],
    calls: usize,
    what: &str,
) -> usize {
    let (cq0, cq1) = cqs;
    let (mut w0, mut w1) = (RawCounters::default(), RawCounters::default());
    let mut total = 0;
    for (call, &size) in sizes.iter().cycle().take(calls).enumerate() {
        let mut want = Vec::new();
        let r0 = cq0.poll(&mut w0, size, |c| want.push(c.summary()));
        let mut buf = std::vec![CompletionSummary::default(); size];
        let r1 = cq1.poll_burst(&mut w1, &mut buf);
        let what = std::format!("{what} sizes {sizes:?} call {call}");
        assert_eq!(r1, r0, "{what}");
        assert_eq!(&buf[..want.len()], &want[..], "{what}");
        assert_eq!(cq1.consumer_index(), cq0.consumer_index(), "{what}");
        assert_eq!(cq1.in_session(), cq0.in_session(), "{what}");
        assert_eq!(mems[1].dbrec(), mems[0].dbrec(), "{what}");
        total += want.len();
    }
    total
}

/// Basic sessions of `counts` minis back to back from slot 0 of a ring of
/// `cqe_cnt` slots, then a plain CQE: `poll_burst` in 12 calls of each
/// size list of `size_lists` gives what `poll` gives, call by call
/// ([`calls_match_poll`]), every completion, and leaves the ring's bytes
/// (the invalidated slots) as `poll` does.
fn basic_sessions_match_poll(counts: &[u32], cqe_cnt: usize, size_lists: &[&[usize]]) {
    for path in unzip_paths() {
        for &sizes in size_lists {
            let mems = [
                Mem::new(cqe_cnt, CqeSize::B64, false),
                Mem::new(cqe_cnt, CqeSize::B64, false),
            ];
            for m in &mems {
                let mut slot = 0;
                for &count in counts {
                    let minis: Vec<MiniCqe> = (0..count)
                        .map(|i| hash_mini(slot as u32 * 0x100 + i, 64 + i))
                        .collect();
                    put_basic_session(m, slot, &title_basic(count, slot as u16, false), &minis);
                    slot += count as usize;
                }
                m.put(slot, &cqe(CqeOpcode::RespSend, false, slot as u16));
            }
            let cfg = CqConfig {
                unzip: path,
                ..basic_cfg(MiniCqeFormat::Hash)
            };
            let (mut cq0, mut cq1) = (mems[0].cq(cfg), mems[1].cq(cfg));
            let total = calls_match_poll(&mems, (&mut cq0, &mut cq1), sizes, 12, path.name());
            let what = std::format!("{} sizes {sizes:?}", path.name());
            assert_eq!(total, counts.iter().sum::<u32>() as usize + 1, "{what}");
            for slot in 0..cqe_cnt {
                assert_eq!(
                    mems[1].slot_bytes(slot),
                    mems[0].slot_bytes(slot),
                    "{what} slot {slot}"
                );
            }
        }
    }
}

/// Basic sessions of more than one mini array back to back (20, 17 and
/// 16 minis: a partial last array, a whole one), then a plain CQE:
/// `poll_burst` (its loop for long sessions) in calls of several sizes,
/// some ending inside a session, gives what `poll` gives, call by call,
/// and leaves the ring's bytes (the invalidated slots) as `poll` does.
/// Deterministic, so that miri reaches `mem::SessionArrays` (the random
/// streams it runs are too few).
#[test]
fn burst_long_basic_sessions_match_poll() {
    basic_sessions_match_poll(
        &[20, 17, 16],
        128,
        &[&[256], &[12, 9, 30, 8, 64], &[8, 8, 8, 8, 8, 8, 8, 8]],
    );
}

/// Short basic sessions followed by a longer one of the same opcode: the
/// short sessions' loop reads the long title's count and counter only, and
/// hands the whole title (the rest of it read then,
/// `SessionWalk::title_rest`) to the general steps. Polled in calls of
/// several sizes against `poll` (summaries, consumer index, doorbell
/// record, ring bytes).
#[test]
fn burst_short_then_long_basic_sessions_match_poll() {
    basic_sessions_match_poll(
        &[8, 6, 20, 8, 3],
        64,
        &[&[256], &[16, 9, 32], &[8, 8, 8, 8, 8, 8, 8, 8]],
    );
}

/// Short basic sessions of several counts up to two entries before the
/// ring's end, then a plain CQE: the short sessions' loop of one bound
/// (`mem::ShortRun`) stops when the ring's end is fewer than eight entries
/// on, and the last sessions go one at a time (`mem::SessionWalk`), in
/// calls of several sizes against `poll` (summaries, consumer index,
/// doorbell record, ring bytes). Deterministic, so that miri reaches both.
#[test]
fn burst_short_basic_sessions_to_the_ring_end_match_poll() {
    basic_sessions_match_poll(
        &[8, 8, 5, 8, 8, 8, 3, 8, 2, 4],
        64,
        &[&[256], &[16, 9, 32], &[8, 8, 8, 8, 8, 8, 8, 8], &[64, 64]],
    );
}

/// Enhanced sessions of one opcode back to back (title, full blocks, a
/// shorter last block; sessions of 8, 7, 3, 14, 2, 20 and 64 minis), two
/// titles in a row, then a plain CQE of another opcode and a last
/// session: `poll_burst` (its block run taking the titles between the
/// sessions) in calls of several sizes, some ending inside a block, gives
/// what `poll` gives, call by call. Deterministic, so that miri reaches
/// the titles and last blocks of the AVX2 block run (the random streams
/// it runs are too few). The same on a striding RQ, where the run takes
/// no titles (they end it).
#[test]
fn burst_enhanced_sessions_match_poll() {
    for path in unzip_paths() {
        for (sizes, striding_rq) in [
            &[256usize][..],
            &[12, 9, 30, 8, 64],
            &[7, 7, 7, 7, 7, 7, 7, 7],
            &[32],
        ]
        .into_iter()
        // (A striding RQ too: there the block run takes no titles.)
        .flat_map(|sizes| [(sizes, false), (sizes, true)])
        {
            let mems = [
                Mem::new(256, CqeSize::B64, true),
                Mem::new(256, CqeSize::B64, true),
            ];
            let mut total = 0;
            for m in &mems {
                let title = |slot: usize, opcode| {
                    let mut t = cqe(opcode, false, slot as u16);
                    t.byte_cnt = Be32::new(64 + slot as u32);
                    with_vic(t, 0)
                };
                let mut slot = 0;
                let session = |slot: &mut usize, count: u32| {
                    m.put(*slot, &title(*slot, CqeOpcode::RespSend));
                    *slot += 1;
                    let minis: Vec<MiniCqe> = (0..count)
                        .map(|i| hash_mini(*slot as u32 * 0x100 + i, 64 + i))
                        .collect();
                    for block in minis.chunks(crate::prm::ENHANCED_MAX_MINIS) {
                        m.put(*slot, &enhanced_block(block, 0));
                        *slot += block.len();
                    }
                };
                for count in [8u32, 7, 3, 14, 2, 20, 64] {
                    session(&mut slot, count);
                }
                // Two titles in a row, then another opcode's plain CQE.
                m.put(slot, &title(slot, CqeOpcode::RespSend));
                m.put(slot + 1, &title(slot + 1, CqeOpcode::RespSend));
                m.put(slot + 2, &title(slot + 2, CqeOpcode::RespSendImm));
                slot += 3;
                session(&mut slot, 9);
                total = slot;
            }
            let cfg = CqConfig {
                unzip: path,
                striding_rq,
                ..enh_cfg(MiniCqeFormat::Hash)
            };
            let (mut cq0, mut cq1) = (mems[0].cq(cfg), mems[1].cq(cfg));
            let got = calls_match_poll(&mems, (&mut cq0, &mut cq1), sizes, 40, path.name());
            assert_eq!(got, total, "{} {sizes:?} {striding_rq}", path.name());
        }
    }
}

#[test]
fn enhanced_striding_running_stride_index() {
    let m = Mem::new(16, CqeSize::B64, true);
    let mut r = cqe(CqeOpcode::RespSend, false, 0);
    r.byte_cnt = Be32::new(0x0002_0100); // 2 strides
    r.wqe_id = Be16::new(0x2a);
    m.put(0, &with_vic(r, 0));
    let mp = |strides: u32| hash_mini(0, strides << 16 | 64);
    m.put(1, &enhanced_block(&[mp(1), mp(3), mp(1)], 0));
    let cfg = CqConfig {
        striding_rq: true,
        ..enh_cfg(MiniCqeFormat::Hash)
    };
    let mut cq = m.cq(cfg);
    let got = collect(&mut cq, &mut RawCounters::default(), 16);
    let idx: Vec<_> = got.iter().map(|g| g.stride_index().unwrap()).collect();
    assert_eq!(idx, [0, 2, 3, 6]);
    // Every packet's WQE, the title's and the minis', without expansion:
    // the expanded CQE's.
    for g in &got {
        assert_eq!(g.wqe_id(), Some(0x2a));
        assert_eq!(g.wqe_id(), Some(g.cqe().wqe_id.get()));
    }
    // Not a striding RQ: no WQE id.
    let m = Mem::new(16, CqeSize::B64, false);
    m.put(0, &cqe(CqeOpcode::RespSend, false, 0));
    let mut cq = m.cq(CqConfig::default());
    let got = collect(&mut cq, &mut RawCounters::default(), 16);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].wqe_id(), None);
}

/// Tiny deterministic generator for the random-session property test.
struct XorShift(u64);
impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[test]
fn random_sessions_match_the_reference_expansion() {
    let formats = [
        MiniCqeFormat::Hash,
        MiniCqeFormat::Csum,
        MiniCqeFormat::FtagStridx,
        MiniCqeFormat::CsumStridx,
        MiniCqeFormat::L34hStridx,
    ];
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
    let rounds = if cfg!(miri) { 4 } else { 200 };
    for round in 0..rounds {
        let format = formats[round % formats.len()];
        let enhanced = round % 2 == 1;
        let striding = round % 3 == 0;
        let m = Mem::new(64, CqeSize::B64, enhanced);
        let cfg = CqConfig {
            compression: Some((
                if enhanced {
                    Layout::Enhanced
                } else {
                    Layout::Basic
                },
                format,
            )),
            striding_rq: striding,
            ..CqConfig::default()
        };
        let mut cq = m.cq(cfg);
        let mut title = cqe(CqeOpcode::RespSend, false, (rng.next() & 0xffff) as u16);
        title.rss_hash_result = Be32::new(rng.next() as u32);
        title.wqe_id = Be16::new(rng.next() as u16);
        title.byte_cnt = Be32::new(1 << 16 | 64);
        let n = 2 + (rng.next() % 40) as usize;
        let minis: Vec<MiniCqe> = (0..n)
            .map(|_| {
                let mut b = (rng.next()).to_be_bytes();
                b[4] &= 0x3f;
                MiniCqe { bytes: b }
            })
            .collect();
        let view = MiniView { format, striding };
        let mut expect = std::vec![Cqe64::default(); n];
        if enhanced {
            m.put(0, &with_vic(title, 0));
            let mut slot = 1;
            for chunk in minis.chunks(7) {
                m.put(slot, &enhanced_block(chunk, 0));
                slot += chunk.len();
            }
            zip::expand_session(
                &title,
                &minis,
                view,
                zip::running_after(&title, striding),
                &mut expect,
            );
        } else {
            let mut t = title;
            t.op_own = t.op_own.with_format(3);
            t.byte_cnt = Be32::new(n as u32);
            put_basic_session(&m, 0, &t, &minis);
            zip::expand_session(&t, &minis, view, t.wqe_counter.get(), &mut expect);
        }
        let got = collect(&mut cq, &mut RawCounters::default(), 128);
        // A striding packet's WQE without the expansion: the expanded
        // CQE's (the title's).
        for c in &got {
            let want = striding.then(|| c.cqe().wqe_id.get());
            assert_eq!(c.wqe_id(), want, "round {round}");
        }
        let got: Vec<Cqe64> = got
            .iter()
            .skip(usize::from(enhanced))
            .map(|c| *c.cqe())
            .collect();
        assert_eq!(got, expect, "round {round} {format:?} enhanced={enhanced}");
        assert_eq!(cq.consumer_index(), (n + usize::from(enhanced)) as u32);
    }
}

// ---------------------------------------------------------------------------
// Every decoder path through the poller: random streams of regular CQEs and
// compressed sessions (both layouts, every format, requester and responder
// titles, lengths up to the ring size, 64- and 128-byte CQEs, any starting
// consumer index so that sessions wrap the ring and the pass), polled in
// random batch sizes, against the scalar reference `zip::expand_session`.

/// Every decoder path this machine can run.
fn unzip_paths() -> Vec<UnzipPath> {
    #[cfg_attr(
        not(any(target_arch = "x86_64", target_arch = "aarch64")),
        expect(unused_mut, reason = "no vector path on this target")
    )]
    let mut paths = std::vec![UnzipPath::Scalar];
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    {
        use super::zip_x86::{Avx2, Sse41};
        if std::is_x86_feature_detected!("sse4.1") {
            // SAFETY: detected just above.
            paths.push(UnzipPath::Sse41(unsafe { Sse41::new_unchecked() }));
        }
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: detected just above.
            paths.push(UnzipPath::Avx2(unsafe { Avx2::new_unchecked() }));
        }
    }
    #[cfg(target_arch = "aarch64")]
    if let Some(t) = super::zip_neon::Neon::compile_time() {
        paths.push(UnzipPath::Neon(t));
    }
    paths
}

impl Mem {
    fn cq_at(&self, cfg: CqConfig, ci: u32) -> Cq {
        let parts = CqParts {
            buf: NonNull::new(self.ring).unwrap(),
            cqe_cnt: (self.ring_len / self.stride) as u32,
            cqe_size: if self.stride == 64 {
                CqeSize::B64
            } else {
                CqeSize::B128
            },
            dbrec: NonNull::new(self.dbrec).unwrap(),
            uar: None,
            cqn: 0xa1,
        };
        // SAFETY: as in `Mem::cq`.
        unsafe { Cq::from_raw_parts(parts, cfg, ci) }.unwrap()
    }
}

/// One random stream through a CQ decoding with `path`; returns the number
/// of completions compared.
fn random_stream(path: UnzipPath, rng: &mut zip::prop::XorShift, max_log: u64) -> usize {
    let log = 4 + rng.below(max_log - 3) as u32;
    let entries = 1u32 << log;
    let size = if rng.next() & 1 == 1 {
        CqeSize::B128
    } else {
        CqeSize::B64
    };
    let enhanced = rng.next() & 1 == 1;
    let view = zip::prop::view(rng);
    let layout = if enhanced {
        Layout::Enhanced
    } else {
        Layout::Basic
    };
    let cfg = CqConfig {
        compression: Some((layout, view.format)),
        striding_rq: view.striding,
        unzip: path,
        ..CqConfig::default()
    };
    let ci0 = rng.below(4 * u64::from(entries)) as u32;
    let m = Mem::new(entries as usize, size, enhanced);
    let mut cq = m.cq_at(cfg, ci0);
    let slot = |ci: u32| (ci & (entries - 1)) as usize;
    let parity = |ci: u32| (ci >> log) & 1 == 1;
    let vic = |ci: u32| (ci >> log) as u8;

    let mut expect: Vec<Cqe64> = Vec::new();
    let mut invalidated: Vec<u32> = Vec::new();
    let mut title: Option<Cqe64> = None;
    let mut running = 0u16;
    let end = ci0 + entries;
    let mut ci = ci0;
    while ci < end {
        let left = end - ci;
        let pick = rng.below(4);
        if enhanced && title.is_some() && pick != 0 {
            // One compressed CQE of 1..=7 minis after the last regular CQE.
            let n = 1 + rng.below(u64::from(left.min(7))) as usize;
            let minis = zip::prop::minis(rng, n);
            m.put(slot(ci), &enhanced_block(&minis, vic(ci)));
            let t = title.unwrap_or_default();
            let mut out = std::vec![Cqe64::default(); n];
            running = zip::expand_session(&t, &minis, view, running, &mut out);
            expect.extend(out);
            ci += n as u32;
        } else if !enhanced && left >= 2 && pick != 0 {
            // A basic session: title, arrays at +1, +8, +16…; sometimes as
            // long as what is left of the ring (the whole ring at best).
            let count = if rng.below(8) == 0 {
                left
            } else if rng.below(3) == 0 {
                2 + rng.below(u64::from(left - 1)) as u32
            } else {
                2 + rng.below(u64::from(left.min(24) - 1)) as u32
            };
            let mut t = zip::prop::title(rng);
            t.op_own = t.op_own.with_format(3).with_owner(parity(ci));
            t.byte_cnt = Be32::new(count);
            let minis = zip::prop::minis(rng, count as usize);
            m.put(slot(ci), &t);
            for (k, chunk) in minis.chunks(8).enumerate() {
                let mut arr = [0u8; 64];
                for (i, mc) in chunk.iter().enumerate() {
                    arr[i * 8..i * 8 + 8].copy_from_slice(&mc.bytes);
                }
                let s = slot(ci + zip::basic_array_offset(k as u32));
                m.put(s, &zerocopy::transmute!(arr));
            }
            let mut out = std::vec![Cqe64::default(); count as usize];
            zip::expand_session(&t, &minis, view, t.wqe_counter.get(), &mut out);
            expect.extend(out);
            invalidated.extend(ci + 1..ci + count);
            ci += count;
        } else {
            // A regular CQE (the next enhanced title).
            let mut c = zip::prop::title(rng);
            c.op_own = c
                .op_own
                .with_format(rng.below(3) as u8)
                .with_owner(parity(ci));
            c.signature = vic(ci);
            m.put(slot(ci), &c);
            if enhanced {
                running = zip::running_after(&c, view.striding);
                title = Some(c);
            }
            expect.push(c);
            ci += 1;
        }
    }
    // Striding RQ: filler completions (byte_cnt bit 31) are not reported.
    expect
        .retain(|c| !(view.striding && c.opcode() != CqeOpcode::Req && c.mprq_byte_cnt().filler()));

    let mut wqs = RawCounters::default();
    let mut got: Vec<Cqe64> = Vec::new();
    loop {
        let batch = 1 + rng.below(20) as usize;
        let n = cq.poll(&mut wqs, batch, |c| got.push(*c.cqe())).unwrap();
        if n == 0 {
            break;
        }
    }
    let what = || std::format!("{} {cfg:?} entries {entries} ci0 {ci0}", path.name());
    assert_eq!(got.len(), expect.len(), "{}", what());
    for (i, (g, e)) in got.iter().zip(&expect).enumerate() {
        assert_eq!(g, e, "{} completion {i}", what());
    }
    assert_eq!(cq.consumer_index(), end, "{}", what());
    assert!(!cq.in_session() && !cq.is_broken(), "{}", what());
    for ci in invalidated {
        assert_eq!(
            m.slot_bytes(slot(ci))[63],
            CQE_INVALIDATE,
            "{} ci {ci}",
            what()
        );
    }
    got.len()
}

#[test]
fn random_streams_every_path_matches_the_reference() {
    let (rounds, max_log) = if cfg!(miri) { (3, 5) } else { (400, 8) };
    for path in unzip_paths() {
        // The same streams for every path.
        let mut rng = zip::prop::XorShift(0x51d_ca75);
        let mut completions = 0;
        for _ in 0..rounds {
            completions += random_stream(path, &mut rng, max_log);
        }
        std::eprintln!(
            "{}: {rounds} streams, {completions} completions",
            path.name()
        );
    }
}

// ---------------------------------------------------------------------------
// `poll_burst` against `poll`: the same random streams (no compression, both
// layouts, every format, 64- and 128-byte CQEs, any starting consumer index),
// with error, resize, inline and unsupported CQEs, malformed sessions now
// and then, and a work queue that refuses some indices; polled in the same
// random batch sizes by both APIs on two copies of the same memory.

/// [`RawCounters`], refusing every `wqe_counter` ≡ 7 (mod 61).
struct Picky;
impl WorkQueues for Picky {
    fn retire_send(&mut self, wq: WqRef, c: u16, s: WcStatus) -> Result<SendRetired, LookupError> {
        if c % 61 == 7 {
            return Err(LookupError::NotInFlight);
        }
        RawCounters::default().retire_send(wq, c, s)
    }
    fn retire_recv(&mut self, wq: WqRef, c: u16, s: WcStatus) -> Result<RecvRetired, LookupError> {
        if c % 61 == 7 {
            return Err(LookupError::NotInFlight);
        }
        RawCounters::default().retire_recv(wq, c, s)
    }
    fn retire_strides(
        &mut self,
        wq: WqRef,
        c: StrideCompletion,
        s: WcStatus,
    ) -> Result<RecvRetired, LookupError> {
        if c.stride_index % 61 == 7 {
            return Err(LookupError::NotInFlight);
        }
        RawCounters::default().retire_strides(wq, c, s)
    }
}

/// A random regular CQE: mostly plain, sometimes an error, resize or
/// unsupported opcode, any of formats 0–2.
fn random_regular(rng: &mut zip::prop::XorShift) -> Cqe64 {
    let mut c = zip::prop::title(rng);
    if rng.below(8) == 0 {
        let odd = [
            CqeOpcode::ReqErr,
            CqeOpcode::RespErr,
            CqeOpcode::ResizeCq,
            CqeOpcode::NoPacket,
            CqeOpcode::SigErr,
        ];
        let op = odd[rng.below(odd.len() as u64) as usize];
        c.op_own = c.op_own.with_opcode(op.raw());
    }
    c.op_own = c.op_own.with_format(rng.below(3) as u8);
    c
}

/// A work queue with a shadow, as the send queue keeps one: wr_ids that
/// are not the reported index (a hash of the queue, the index and the
/// side), refusing every `wqe_counter` ≡ 5 (mod 53). Checks that the burst
/// paths call the work queue for every completion when the wr_id is not
/// the index ([`WorkQueues::WR_ID_IS_WQE_COUNTER`] false).
struct Shadowed;
impl Shadowed {
    fn wr_id(wq: WqRef, c: u16, side: u64) -> u64 {
        (u64::from(c) << 32 | u64::from(wq.qpn) ^ u64::from(wq.srqn_uidx) << 8)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
            ^ side
    }
}
impl WorkQueues for Shadowed {
    fn retire_send(&mut self, wq: WqRef, c: u16, s: WcStatus) -> Result<SendRetired, LookupError> {
        if c % 53 == 5 {
            return Err(LookupError::NotInFlight);
        }
        let r = RawCounters::default().retire_send(wq, c, s)?;
        Ok(SendRetired {
            wr_id: Self::wr_id(wq, c, 1),
            ..r
        })
    }
    fn retire_recv(&mut self, wq: WqRef, c: u16, s: WcStatus) -> Result<RecvRetired, LookupError> {
        if c % 53 == 5 {
            return Err(LookupError::UnknownQueue);
        }
        let r = RawCounters::default().retire_recv(wq, c, s)?;
        Ok(RecvRetired {
            wr_id: Self::wr_id(wq, c, 2),
            ..r
        })
    }
    fn retire_strides(
        &mut self,
        wq: WqRef,
        c: StrideCompletion,
        s: WcStatus,
    ) -> Result<RecvRetired, LookupError> {
        let r = RawCounters::default().retire_strides(wq, c, s)?;
        Ok(RecvRetired {
            wr_id: Self::wr_id(wq, c.stride_index, 3),
            ..r
        })
    }
}

/// One random stream polled by `poll` on one copy of the memory, by
/// `start_poll`/`next_poll`/`end_poll` on a second and by `poll_burst` on
/// a third; every call's results, summaries, consumer index, doorbell
/// record, session and error state compared, then every slot. Returns the
/// number of completions compared.
/// `title` with exactly one field changed: the CQE opcode (to another of
/// REQ and the successful responder opcodes, the field the whole-array
/// plan and its SIMD constants depend on), or the `wqe_counter`, the QPN
/// or the byte count (which they must not).
fn one_field_changed(mut title: Cqe64, rng: &mut zip::prop::XorShift) -> Cqe64 {
    match rng.below(4) {
        0 => {
            let op = title.op_own.into_bits() >> 4;
            let other = (u64::from(op) + 1 + rng.below(4)) % 5;
            title.op_own = title.op_own.with_opcode(other as u8);
        }
        1 => {
            title.wqe_counter = Be16::new(title.wqe_counter.get() ^ (1 + rng.below(0xffff) as u16))
        }
        2 => {
            let bits = title.sop_drop_qpn.into_bits().get() ^ (1 + rng.below(0xff_ffff) as u32);
            title.sop_drop_qpn = SopDropQpn::from_bits(Be32::new(bits));
        }
        _ => title.byte_cnt = Be32::new(title.byte_cnt.get() ^ (1 + rng.below(0xffff) as u32)),
    }
    title
}

fn burst_stream(path: UnzipPath, rng: &mut zip::prop::XorShift, max_log: u64) -> usize {
    let log = 4 + rng.below(max_log - 3) as u32;
    let entries = 1u32 << log;
    let size = if rng.next() & 1 == 1 {
        CqeSize::B128
    } else {
        CqeSize::B64
    };
    let layout = match rng.below(3) {
        0 => None,
        1 => Some(Layout::Basic),
        _ => Some(Layout::Enhanced),
    };
    let enhanced = layout == Some(Layout::Enhanced);
    let view = zip::prop::view(rng);
    let cfg = CqConfig {
        compression: layout.map(|l| (l, view.format)),
        striding_rq: view.striding,
        unzip: path,
        ..CqConfig::default()
    };
    let ci0 = rng.below(4 * u64::from(entries)) as u32;
    let mems = [
        Mem::new(entries as usize, size, enhanced),
        Mem::new(entries as usize, size, enhanced),
        Mem::new(entries as usize, size, enhanced),
        Mem::new(entries as usize, size, enhanced),
    ];
    let put = |slot: usize, c: &Cqe64| mems.iter().for_each(|m| m.put(slot, c));
    let put_first_half = |slot: usize, bytes: &[u8; 64]| {
        if size == CqeSize::B128 {
            mems.iter().for_each(|m| m.put_bytes(slot * 128, bytes));
        }
    };
    let slot = |ci: u32| (ci & (entries - 1)) as usize;
    let parity = |ci: u32| (ci >> log) & 1 == 1;
    let vic = |ci: u32| (ci >> log) as u8;

    let mut have_title = false;
    // Half the streams repeat one plain `op_own` for most regular CQEs (the
    // burst poller's equal-bytes groups), the others mix them.
    let uniform = (rng.below(2) == 0).then(|| {
        let ops = [CqeOpcode::Req, CqeOpcode::RespSend, CqeOpcode::RespSendImm];
        OpOwn::new()
            .with_opcode(ops[rng.below(3) as usize].raw())
            .with_format(rng.below(2) as u8)
            .with_se(rng.below(2) == 1)
    });
    // A quarter of the streams chain their titles (basic: session titles;
    // enhanced: the regular CQEs minis decode against): each differs from
    // the last in exactly one field, the one the whole-array plan depends
    // on (the opcode) or one it must not (counter, QPN, byte count), so a
    // cached plan reused across a field it depends on shows.
    let mut chain = (rng.below(4) == 0).then_some(None::<Cqe64>);
    // A quarter of the enhanced streams are mostly full compressed CQEs
    // (seven minis), back to back: the burst poller's block runs, up to the
    // ring's end and up to the stream's end (the next entry not owned).
    let full_blocks = enhanced && rng.below(4) == 0;
    let end = ci0 + entries;
    let mut ci = ci0;
    while ci < end {
        let left = end - ci;
        let pick = rng.below(4);
        if enhanced && (have_title || rng.below(64) == 0) && pick != 0 {
            let n = if full_blocks && left >= 7 && rng.below(8) != 0 {
                7
            } else {
                1 + rng.below(u64::from(left.min(7))) as usize
            };
            let minis = zip::prop::minis(rng, n);
            put(slot(ci), &enhanced_block(&minis, vic(ci)));
            ci += n as u32;
        } else if layout == Some(Layout::Basic) && left >= 2 && pick != 0 {
            let count = if rng.below(8) == 0 {
                left
            } else if rng.below(64) == 0 {
                // Malformed: breaks the CQ.
                [0, 1, entries + 1][rng.below(3) as usize]
            } else {
                2 + rng.below(u64::from(left.min(24) - 1)) as u32
            };
            let mut t = if rng.below(16) == 0 {
                random_regular(rng)
            } else {
                zip::prop::title(rng)
            };
            if let Some(last) = chain.as_mut() {
                t = last.map_or(t, |l| one_field_changed(l, rng));
                *last = Some(t);
            }
            t.op_own = t.op_own.with_format(3).with_owner(parity(ci));
            t.byte_cnt = Be32::new(count);
            put(slot(ci), &t);
            let count = count.clamp(2, left);
            let minis = zip::prop::minis(rng, count as usize);
            for (k, chunk) in minis.chunks(8).enumerate() {
                let mut arr = [0u8; 64];
                for (i, mc) in chunk.iter().enumerate() {
                    arr[i * 8..i * 8 + 8].copy_from_slice(&mc.bytes);
                }
                put(
                    slot(ci + zip::basic_array_offset(k as u32)),
                    &zerocopy::transmute!(arr),
                );
            }
            ci += count;
        } else {
            let mut c = random_regular(rng);
            if let Some(op) = uniform.filter(|_| rng.below(8) != 0) {
                c.op_own = op;
            }
            if let Some(last) = chain.as_mut().filter(|_| enhanced) {
                c = last.map_or(c, |l| one_field_changed(l, rng));
                *last = Some(c);
            }
            if layout.is_none() && rng.below(64) == 0 {
                // Compressed on a CQ without compression: breaks it.
                c.op_own = c.op_own.with_format(3);
            }
            c.op_own = c.op_own.with_owner(parity(ci));
            c.signature = vic(ci);
            put(slot(ci), &c);
            put_first_half(slot(ci), &rng.bytes::<64>());
            have_title |= !c.is_error();
            ci += 1;
        }
    }

    let cqs = [
        mems[0].cq_at(cfg, ci0),
        mems[1].cq_at(cfg, ci0),
        mems[2].cq_at(cfg, ci0),
        mems[3].cq_at(cfg, ci0),
    ];
    let what = std::format!("{} {cfg:?} entries {entries} ci0 {ci0}", path.name());
    // `RawCounters` takes the whole-array paths for minis; `Picky` calls
    // the work queue per completion and fails now and then; `Shadowed`
    // also maps every index to another wr_id.
    let compared = match rng.below(4) {
        0 | 1 => compare_burst(cqs, &mems, rng, &what, RawCounters::default),
        2 => compare_burst(cqs, &mems, rng, &what, || Picky),
        _ => compare_burst(cqs, &mems, rng, &what, || Shadowed),
    };
    let what = || what.clone();
    for s in 0..entries as usize {
        for m in &mems[1..] {
            assert_eq!(
                m.slot_bytes(s),
                mems[0].slot_bytes(s),
                "{} slot {s}",
                what()
            );
        }
    }
    compared
}

/// `start_poll`, then `next_poll` up to `batch` completions, `end_poll`:
/// the `ibv_cq_ex` reference API, collecting each completion's summary.
fn start_next_end<W: WorkQueues>(
    cq: &mut Cq,
    wqs: &mut W,
    batch: usize,
    out: &mut Vec<CompletionSummary>,
) -> Result<usize, PollError> {
    let Some(mut b) = cq.start_poll(wqs)? else {
        return Ok(0);
    };
    out.push(b.completion().summary());
    let mut n = 1;
    while n < batch {
        match b.next_poll() {
            Ok(true) => {
                out.push(b.completion().summary());
                n += 1;
            }
            Ok(false) => break,
            Err(e) => {
                b.end_poll();
                return Err(e);
            }
        }
    }
    b.end_poll();
    Ok(n)
}

/// Polls `cqs[0]` with `poll`, `cqs[1]` with `poll_burst`, `cqs[2]`
/// with `start_poll`/`next_poll`/`end_poll` and `cqs[3]` with `poll_wc`
/// (against `to_wc` of `poll`'s completions) in the same random batch
/// sizes until empty or broken, comparing after every call.
fn compare_burst<W: WorkQueues>(
    mut cqs: [Cq; 4],
    mems: &[Mem; 4],
    rng: &mut zip::prop::XorShift,
    what: &str,
    wqs: impl Fn() -> W,
) -> usize {
    let mut compared = 0;
    let mut buf = [CompletionSummary::default(); 64];
    let (mut w0, mut w1, mut w2, mut w3) = (wqs(), wqs(), wqs(), wqs());
    let mut wcs = [Wc::default(); 64];
    // Mostly short bursts (minis carried over from one call to the next),
    // now and then up to 64; one call in eight on `cqs[1]` is a `poll`
    // (state a burst carried, taken on by the general poller, and back).
    let long = rng.below(2) == 0;
    for call in 0.. {
        let batch = if long || rng.below(8) == 0 {
            1 + rng.below(buf.len() as u64) as usize
        } else {
            1 + rng.below(9) as usize
        };
        let ci_before = cqs[0].consumer_index();
        let mut want = Vec::new();
        let mut want_wc = Vec::new();
        let r_poll = cqs[0].poll(&mut w0, batch, |c| {
            want.push(c.summary());
            want_wc.push(c.to_wc());
        });
        let r_wc = cqs[3].poll_wc(&mut w3, &mut wcs[..batch]);
        let r_burst = if rng.below(8) == 0 {
            let mut got = Vec::new();
            let r = cqs[1].poll(&mut w1, batch, |c| got.push(c.summary()));
            buf[..got.len()].copy_from_slice(&got);
            r
        } else {
            cqs[1].poll_burst(&mut w1, &mut buf[..batch])
        };
        let mut by_one = Vec::new();
        let r_one = start_next_end(&mut cqs[2], &mut w2, batch, &mut by_one);
        let ctx = || std::format!("{what} call {call} batch {batch}");
        assert_eq!(r_burst, r_poll, "{}", ctx());
        assert_eq!(r_one, r_poll, "start/next/end {}", ctx());
        assert_eq!(r_wc, r_poll, "poll_wc {}", ctx());
        assert_eq!(&wcs[..want_wc.len()], &want_wc[..], "poll_wc {}", ctx());
        assert_eq!(&buf[..want.len()], &want[..], "{}", ctx());
        assert_eq!(
            &buf[..by_one.len()],
            &by_one[..],
            "start/next/end {}",
            ctx()
        );
        for i in 1..4 {
            let ctx = || std::format!("cq {i} {what} call {call} batch {batch}");
            assert_eq!(
                cqs[i].consumer_index(),
                cqs[0].consumer_index(),
                "{}",
                ctx()
            );
            // (`start_poll` finding nothing to report publishes nothing,
            // even if it consumed unreported entries, fillers or resize;
            // failing, it publishes the index even if it did not move.)
            // (`poll_wc` publishes the index on every call, as
            // `ibv_poll_cq` does, `poll` only once it moved.)
            let published = match i {
                1 => true,
                2 => matches!(r_one, Ok(n) if n > 0),
                _ => cqs[0].consumer_index() != ci_before,
            };
            if published {
                assert_eq!(mems[i].dbrec(), mems[0].dbrec(), "{}", ctx());
            }
            assert_eq!(cqs[i].in_session(), cqs[0].in_session(), "{}", ctx());
            assert_eq!(cqs[i].is_broken(), cqs[0].is_broken(), "{}", ctx());
            assert_eq!(cqs[i].error_log(), cqs[0].error_log(), "{}", ctx());
        }
        compared += want.len();
        if r_poll == Ok(0) || cqs[0].is_broken() {
            break;
        }
    }
    compared
}

#[test]
fn burst_matches_poll_on_random_streams() {
    let (rounds, max_log) = if cfg!(miri) { (12, 5) } else { (2000, 8) };
    for path in unzip_paths() {
        let mut rng = zip::prop::XorShift(0xb0b5_7e57);
        let mut completions = 0;
        for _ in 0..rounds {
            completions += burst_stream(path, &mut rng, max_log);
        }
        std::eprintln!(
            "{}: {rounds} streams, {completions} completions",
            path.name()
        );
    }
}

/// `WcOpcode::from_raw` names every opcode of `WcOpcode::ALL` by its
/// `verbs.h` value, and nothing else.
#[test]
fn wc_opcode_from_raw_round_trips() {
    for op in WcOpcode::ALL {
        assert_eq!(WcOpcode::from_raw(op.raw()), Some(op));
    }
    let known = |n: u32| WcOpcode::ALL.iter().any(|op| op.raw() == n);
    for n in (0..300).filter(|&n| !known(n)) {
        assert_eq!(WcOpcode::from_raw(n), None, "{n}");
    }
    assert_eq!(WcOpcode::from_raw(136), Some(WcOpcode::Driver2));
}

/// The `Wc` of a regular responder CQE (`write_resp_wc`: `to_wc` and
/// `poll_wc`'s runs) equals the one the accessors give, on random CQE
/// bytes, with and without the receive checksum capability.
#[test]
fn responder_wc_matches_accessors() {
    let rounds = if cfg!(miri) { 40 } else { 4000 };
    let mut rng = zip::prop::XorShift(0x5eed_0c0f_fee1);
    let ops = [
        CqeOpcode::RespWrImm,
        CqeOpcode::RespSend,
        CqeOpcode::RespSendImm,
        CqeOpcode::RespSendInv,
    ];
    for round in 0..rounds {
        let m = Mem::new(4, CqeSize::B64, false);
        let mut c: Cqe64 = zerocopy::transmute!(rng.bytes::<64>());
        let op = ops[rng.below(ops.len() as u64) as usize];
        c.op_own = OpOwn::new()
            .with_opcode(op.raw())
            .with_format(rng.below(2) as u8);
        m.put(0, &c);
        let mut cq = m.cq(CqConfig::default());
        let mut wqs = RawCounters {
            rx_csum_valid: rng.below(2) == 0,
        };
        let mut checked = 0;
        let got = cq.poll(&mut wqs, 1, |comp| {
            let fast = comp.to_wc();
            let mut slow = fast;
            comp.write_resp_wc_by_accessors(&mut slow);
            assert_eq!(fast, slow, "round {round}: {c:?}");
            checked += 1;
        });
        assert_eq!(got, Ok(1), "round {round}");
        assert_eq!(checked, 1);
    }
}

/// `poll_wc`'s requester opcode (one table row per send opcode byte)
/// agrees with `read_opcode` (`Completion::opcode`, from the send opcode
/// and the recorded one) for every send opcode byte and several recorded
/// opcodes.
#[test]
fn requester_wc_opcode_matches_read_opcode_for_every_byte() {
    let step = if cfg!(miri) { 37 } else { 1 };
    for recorded in [WcOpcode::Driver2, WcOpcode::LocalInv, WcOpcode::BindMw] {
        for sop in (0..=255u8).step_by(step) {
            let m = Mem::new(4, CqeSize::B64, false);
            let mut c = cqe(CqeOpcode::Req, false, 1);
            c.sop_drop_qpn = c.sop_drop_qpn.with_sop(sop);
            m.put(0, &c);
            m.put(1, &c);
            let mut cq = m.cq(CqConfig::default());
            let mut wc = [Wc::default(); 1];
            assert_eq!(cq.poll_wc(&mut Recorded(recorded), &mut wc), Ok(1));
            let got = collect(&mut cq, &mut Recorded(recorded), 1);
            assert_eq!(
                wc[0].opcode.unwrap_or(WcOpcode::Send),
                got[0].opcode(),
                "send opcode {sop:#04x}, recorded {recorded:?}"
            );
        }
    }
}
