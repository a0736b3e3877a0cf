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

use libfuzzer_sys::fuzz_target;
use mlx5dp_setup::emu::device::FlowRule;
use mlx5dp_setup::emu::{
    Access, CqInit, CqeSize, Device, DeviceConfig, QpAttr, QpInit, QpState, QpType, RqInit, SrqInit,
};

const TYPES: [QpType; 4] = [QpType::Rc, QpType::Ud, QpType::RawPacket, QpType::Rc];
/// Bytes of the registered buffer (every right).
const BUF: usize = 0x2000;
/// Q_Key of both UD QPs.
const QKEY: u32 = 0x1234;
/// Receive WQEs (each of 2 scatter entries: 32 bytes).
const WQES: u32 = 16;

fuzz_target!(|data: &[u8]| {
    let Some((head, ring_bytes)) = data.split_first_chunk::<3>() else {
        return;
    };
    let t = TYPES[usize::from(head[0] & 3)];
    let use_srq = head[0] & 4 != 0 && t != QpType::RawPacket;
    let counter = u32::from(u16::from_be_bytes([head[1], head[2]]));

    let mut dev = Device::new(DeviceConfig::default());
    let pd = dev.alloc_pd();
    let cq = |dev: &mut Device| {
        dev.create_cq(CqInit {
            cqe_cnt: 64,
            cqe_size: CqeSize::B64,
            compression: None,
            ignore_overrun: false,
        })
        .expect("cq")
    };
    let (acq, bcq) = (cq(&mut dev), cq(&mut dev));
    let srq = use_srq.then(|| {
        dev.create_srq(SrqInit {
            pd,
            wqe_cnt: WQES,
            max_sge: 1,
            cq: None,
            xrcd: None,
        })
        .expect("srq")
    });
    let qp = |dev: &mut Device, c, rq| {
        dev.create_qp(QpInit {
            qp_type: t,
            pd,
            send_cq: Some(c),
            recv_cq: Some(c),
            sq_wqebbs: 64,
            max_send_sge: 4,
            max_inline: 256,
            rq,
            xrcd: None,
            vlan_strip: false,
        })
        .expect("qp")
    };
    let cyclic = RqInit::Cyclic {
        wqe_cnt: WQES,
        max_sge: 2,
    };
    let a = qp(&mut dev, acq, cyclic);
    let b = qp(&mut dev, bcq, srq.map_or(cyclic, RqInit::Srq));
    let connected = t == QpType::Rc;
    for (x, y) in [(a, b), (b, a)] {
        let at = QpAttr {
            access: Access::ALL,
            qkey: QKEY,
            dest_qpn: connected.then_some(y),
            retry_cnt: 1,
            rnr_retry: 1,
        };
        for s in [QpState::Init, QpState::Rtr, QpState::Rts] {
            dev.modify_qp(x, s, &at).expect("modify_qp");
        }
    }
    if t == QpType::RawPacket {
        dev.add_flow(FlowRule {
            qpn: b,
            dmac: None,
            ethertype: None,
            flow_tag: 1,
        })
        .expect("flow");
    }
    let buf = dev.alloc_buffer(BUF).expect("buffer");
    let key = dev.reg_mr(pd, &buf, Access::ALL).expect("reg_mr");

    // B's receive ring and its doorbell record, as the input says.
    let (rring, rdbrec) = match srq {
        Some(s) => dev.srq_ring_blocks(s).expect("srq blocks"),
        None => dev.rq_blocks(b).expect("rq blocks"),
    };
    let mut bytes = ring_bytes[..ring_bytes.len().min(WQES as usize * 32)].to_vec();
    // The address half of each 16-byte data segment only: the other half
    // (byte count, key) of a terminator is small and must stay as it is.
    let mut off = 8;
    while off + 8 <= bytes.len() {
        let w = u64::from_be_bytes(bytes[off..off + 8].try_into().expect("8 bytes"));
        if w != 0 && w < BUF as u64 {
            let at = buf.addr() + w;
            bytes[off..off + 8].copy_from_slice(&at.to_be_bytes());
        }
        off += 16;
    }
    rring.write(0, &bytes).expect("receive ring");
    rdbrec
        .write(0, &counter.to_be_bytes())
        .expect("receive dbrec");

    // A's one SEND of 64 bytes from the buffer (UD: to B's QPN with an
    // address handle; raw: a frame whose first 18 bytes are inline).
    let mut wqe = Vec::with_capacity(128);
    let ctrl = |ds: u8| -> [u8; 16] {
        let mut c = [0u8; 16];
        c[3] = 0x0a;
        c[4..7].copy_from_slice(&a.0.to_be_bytes()[1..]);
        c[7] = ds;
        c[11] = 0x08;
        c
    };
    let data_seg = |len: u32, at: u64| -> [u8; 16] {
        let mut d = [0u8; 16];
        d[..4].copy_from_slice(&len.to_be_bytes());
        d[4..8].copy_from_slice(&key.to_be_bytes());
        d[8..].copy_from_slice(&at.to_be_bytes());
        d
    };
    match t {
        QpType::Ud => {
            let mut av = dev.create_ah(pd, &Default::default()).expect("ah");
            av.qkey.set(QKEY);
            av.dqp_dct = av.dqp_dct.with_dqp_dct(b.0).with_extended(true);
            wqe.extend_from_slice(&ctrl(5));
            wqe.extend_from_slice(zerocopy::IntoBytes::as_bytes(&av));
            wqe.extend_from_slice(&data_seg(64, buf.addr()));
        }
        QpType::RawPacket => {
            // Ethernet segment: 18 inline header bytes (2 in the segment,
            // 16 after it), then the rest of the frame by pointer.
            let frame: Vec<u8> = (0..64u8).collect();
            buf.write(0, &frame).expect("frame");
            let mut eth = [0u8; 32];
            eth[12..14].copy_from_slice(&18u16.to_be_bytes());
            eth[14..16].copy_from_slice(&frame[..2]);
            eth[16..32].copy_from_slice(&frame[2..18]);
            wqe.extend_from_slice(&ctrl(4));
            wqe.extend_from_slice(&eth);
            wqe.extend_from_slice(&data_seg(46, buf.addr() + 18));
        }
        _ => {
            wqe.extend_from_slice(&ctrl(2));
            wqe.extend_from_slice(&data_seg(64, buf.addr()));
        }
    }
    wqe.resize(wqe.len().div_ceil(64) * 64, 0);
    let (ring, dbrec, uar) = dev.sq_blocks(a).expect("sq");
    ring.write(0, &wqe).expect("wqe");
    let wqebbs = (wqe.len() / 64) as u32;
    dbrec.write(4, &wqebbs.to_be_bytes()).expect("sq dbrec");
    uar.write(0x800, &wqe[..8]).expect("doorbell");
    for _ in 0..8 {
        dev.step();
    }
});
