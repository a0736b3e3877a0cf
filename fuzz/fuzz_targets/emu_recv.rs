//! The emulated device receiving into arbitrary receive-WQE bytes: a
//! QP's own RQ or an SRQ (its next-segment links included) holding
//! whatever the input says, with a doorbell-record counter from the input,
//! then a well-formed SEND of 64 bytes (or, for a raw Ethernet QP, a
//! 64-byte frame) from a second QP, stepped. The device must fault what
//! it cannot scatter into (a receive error and flushes) instead of
//! panicking, never loop on a linked list, and allocate no more than
//! registered memory backs.
//!
//! Input: byte 0 picks the QP type (bits 0..2: RC, UD, raw Ethernet, RC
//! again) and an SRQ instead of the QP's own RQ (bit 2); bytes 1..3 are
//! the receive doorbell-record counter (big-endian); the rest fills the
//! receive ring from its start (16 WQEs of 32 bytes at most). The second
//! 8 bytes of every 16 (a data segment's address) below 0x2000 are
//! relocated into the registered buffer, as in `emu_send`.
#![no_main]

mod emu_rig;

use emu_rig::{relocate, rig, QKEY};
use libfuzzer_sys::fuzz_target;
use mlx5dp::prm::{
    Be16, Be32, Be64, CtrlSeg, DataSeg, EthSeg, FmCeSe, OpmodIdxOpcode, QpnDs, SendOpcode,
    ETH_L2_INLINE_HEADER_SIZE, WQE_CTRL_CQ_UPDATE,
};
use mlx5dp_setup::emu::{QpType, RqInit, SrqInit};
use zerocopy::IntoBytes;

const TYPES: [QpType; 4] = [QpType::Rc, QpType::Ud, QpType::RawPacket, QpType::Rc];
/// Receive WQEs (32 bytes each: two scatter entries, or an SRQ's next
/// segment and one).
const WQES: u32 = 16;

fuzz_target!(|data: &[u8]| {
    let Some((head, ring_bytes)) = data.split_first_chunk::<3>() else {
        return;
    };
    let t = TYPES[usize::from(head[0] & 3)];
    let use_srq = head[0] & 4 != 0 && t != QpType::RawPacket;
    let counter = u32::from(u16::from_be_bytes([head[1], head[2]]));

    let mut srq = None;
    let mut r = rig(t, |dev, pd| {
        use_srq.then(|| {
            let s = dev
                .create_srq(SrqInit {
                    pd,
                    wqe_cnt: WQES,
                    max_sge: 1,
                    cq: None,
                    xrcd: None,
                })
                .expect("srq");
            srq = Some(s);
            RqInit::Srq(s)
        })
    });

    // B's receive ring and its doorbell record, as the input says. Only
    // the address half of each 16-byte data segment is relocated: the
    // other half (byte count, key) of a terminator is small and must stay.
    let (rring, rdbrec) = match srq {
        Some(s) => r.dev.srq_ring_blocks(s).expect("srq blocks"),
        None => r.dev.rq_blocks(r.b).expect("rq blocks"),
    };
    let mut bytes = ring_bytes[..ring_bytes.len().min(WQES as usize * 32)].to_vec();
    relocate(&mut bytes, 8, 16, r.buf.addr());
    rring.write(0, &bytes).expect("receive ring");
    rdbrec
        .write(0, &counter.to_be_bytes())
        .expect("receive dbrec");

    // A's one SEND of 64 bytes from the buffer (UD: to B's QPN with an
    // address handle; raw: a frame whose first 18 bytes are inline).
    let (a, key, base) = (r.a, r.key, r.buf.addr());
    let ctrl = |ds: u8| CtrlSeg {
        opmod_idx_opcode: OpmodIdxOpcode::new().with_opcode(SendOpcode::Send.raw()),
        qpn_ds: QpnDs::new().with_qpn(a.0).with_ds(ds),
        signature: 0,
        dci_stream_channel_id: Be16::new(0),
        fm_ce_se: FmCeSe::from_bits(WQE_CTRL_CQ_UPDATE),
        imm: Be32::new(0),
    };
    let data_seg = |len: u32, at: u64| DataSeg {
        byte_count: Be32::new(len),
        lkey: Be32::new(key),
        addr: Be64::new(at),
    };
    let mut wqe = Vec::with_capacity(128);
    match t {
        QpType::Ud => {
            let mut av = r.dev.create_ah(r.pd, &Default::default()).expect("ah");
            av.qkey.set(QKEY);
            av.dqp_dct = av.dqp_dct.with_dqp_dct(r.b.0).with_extended(true);
            wqe.extend_from_slice(ctrl(5).as_bytes());
            wqe.extend_from_slice(av.as_bytes());
            wqe.extend_from_slice(data_seg(64, base).as_bytes());
        }
        QpType::RawPacket => {
            // The Ethernet segment inlines the first 18 bytes (2 in the
            // segment, 16 after it); the rest of the frame by pointer.
            const HDR: usize = ETH_L2_INLINE_HEADER_SIZE;
            let frame: Vec<u8> = (0..64u8).collect();
            r.buf.write(0, &frame).expect("frame");
            let mut eth = EthSeg::default();
            eth.inline_hdr_sz.set(HDR as u16);
            eth.inline_hdr_start.copy_from_slice(&frame[..2]);
            wqe.extend_from_slice(ctrl(4).as_bytes());
            wqe.extend_from_slice(eth.as_bytes());
            wqe.extend_from_slice(&frame[2..HDR]);
            let rest = (frame.len() - HDR) as u32;
            wqe.extend_from_slice(data_seg(rest, base + HDR as u64).as_bytes());
        }
        _ => {
            wqe.extend_from_slice(ctrl(2).as_bytes());
            wqe.extend_from_slice(data_seg(64, base).as_bytes());
        }
    }
    wqe.resize(wqe.len().div_ceil(64) * 64, 0);
    r.ring_and_run(&wqe, false);
});
