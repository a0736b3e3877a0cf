//! The emulated device executing arbitrary send-WQE bytes: the WQE parser
//! alone (`emu::wqe::parse`, every QP type), then a device with two
//! connected QPs of that type that finds the bytes in the sender's ring
//! behind a doorbell record and runs them (memory keys, RDMA, atomics,
//! UMR binds, address vectors, Ethernet segments, deliveries into posted
//! receives). It must never panic: whatever a core writes is parsed and
//! faulted with a completion, never trusted.
//!
//! Input: byte 0 picks the QP type (bits 0..2) and options (bit 4: legacy
//! MPW allowed, bit 5: enhanced MPW, bit 6: an 18-byte minimum Ethernet
//! inline header, bit 7: the control segment's QPN and WQE index patched
//! to the sender's, so that the fuzzer reaches the segments); the rest is
//! the WQE, up to 16 WQEBBs. The device's keys and QP numbers are
//! deterministic; its buffer's address is not, so every 8-byte-aligned
//! big-endian word after the control segment below 0x2000 (and not 0) is
//! taken as an offset into the registered buffer and rewritten to its
//! address, a deterministic mapping that lets inputs reach real memory.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mlx5dp_setup::emu::device::FlowRule;
use mlx5dp_setup::emu::wqe::{parse, peek_ctrl, ParseCtx};
use mlx5dp_setup::emu::{
    Access, CqInit, CqeSize, Device, DeviceConfig, QpAttr, QpInit, QpState, QpType, Qpn, RqInit,
};

const TYPES: [QpType; 4] = [QpType::Rc, QpType::Uc, QpType::Ud, QpType::RawPacket];
const MAX_WQEBBS: usize = 16;
/// Bytes of the registered buffer (every right).
const BUF: usize = 0x2000;
/// Q_Key of both UD QPs.
const QKEY: u32 = 0x1234;

fuzz_target!(|data: &[u8]| {
    let Some((&sel, body)) = data.split_first() else {
        return;
    };
    let t = TYPES[usize::from(sel & 3)];
    let mut wqe = body[..body.len().min(MAX_WQEBBS * 64)].to_vec();
    let (_, _, index, qpn, _) = peek_ctrl(&wqe).unwrap_or_default();
    let ctx = ParseCtx {
        qp_type: t,
        qpn,
        expected_index: index,
        max_wqe_bytes: 1008,
        mpw: sel & 0x10 != 0,
        empw: sel & 0x20 != 0,
        eth_min_inline: if sel & 0x40 != 0 { 18 } else { 0 },
        max_tso_header: 192,
    };
    let _ = parse(&wqe, &ctx);

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
    let qp = |dev: &mut Device, c| {
        dev.create_qp(QpInit {
            qp_type: t,
            pd,
            send_cq: Some(c),
            recv_cq: Some(c),
            sq_wqebbs: 64,
            max_send_sge: 4,
            max_inline: 256,
            rq: RqInit::Cyclic {
                wqe_cnt: 16,
                max_sge: 2,
            },
            xrcd: None,
            vlan_strip: false,
        })
        .expect("qp")
    };
    let (a, b) = (qp(&mut dev, acq), qp(&mut dev, bcq));
    bring_up(&mut dev, t, a, b);
    let buf = dev.alloc_buffer(BUF).expect("buffer");
    let key = dev.reg_mr(pd, &buf, Access::ALL).expect("reg_mr");

    // Two receives on B, the second slot's data segment terminated.
    let (rring, rdbrec) = dev.rq_blocks(b).expect("rq");
    let stride = dev.rq_parts(b).expect("rq parts").stride as usize;
    for slot in 0..2usize {
        let mut seg = [0u8; 16];
        seg[..4].copy_from_slice(&0x800u32.to_be_bytes());
        seg[4..8].copy_from_slice(&key.to_be_bytes());
        seg[8..].copy_from_slice(&(buf.addr() + 0x1000 + 0x800 * slot as u64).to_be_bytes());
        rring.write(slot * stride, &seg).expect("recv");
    }
    rdbrec.write(0, &2u32.to_be_bytes()).expect("rq dbrec");

    // The WQE, whole WQEBBs, in A's ring from slot 0.
    if wqe.len() < 16 {
        return;
    }
    if sel & 0x80 != 0 {
        wqe[1..3].copy_from_slice(&[0, 0]);
        wqe[4..7].copy_from_slice(&a.0.to_be_bytes()[1..]);
    }
    let mut off = 16;
    while off + 8 <= wqe.len() {
        let w = u64::from_be_bytes(wqe[off..off + 8].try_into().expect("8 bytes"));
        if w != 0 && w < BUF as u64 {
            let at = buf.addr() + w;
            wqe[off..off + 8].copy_from_slice(&at.to_be_bytes());
        }
        off += 8;
    }
    let wqebbs = wqe.len().div_ceil(64);
    wqe.resize(wqebbs * 64, 0);
    let (ring, dbrec, uar) = dev.sq_blocks(a).expect("sq");
    ring.write(0, &wqe).expect("wqe");
    dbrec
        .write(4, &(wqebbs as u32).to_be_bytes())
        .expect("sq dbrec");
    // The register write: a BlueFlame copy of up to 256 bytes when the
    // input's length is odd, else the 8-byte doorbell.
    let reg = if body.len() % 2 == 1 {
        &wqe[..wqe.len().min(256)]
    } else {
        &wqe[..8]
    };
    uar.write(0x800, reg).expect("doorbell");
    for _ in 0..8 {
        dev.step();
    }
});

/// Connects A and B (RC, UC), or brings both up alone (UD with one Q_Key;
/// raw Ethernet with a catch-all rule to B).
fn bring_up(dev: &mut Device, t: QpType, a: Qpn, b: Qpn) {
    let attr = |dest| QpAttr {
        access: Access::ALL,
        qkey: QKEY,
        dest_qpn: dest,
        retry_cnt: 1,
        rnr_retry: 1,
    };
    let connected = matches!(t, QpType::Rc | QpType::Uc);
    for (x, y) in [(a, b), (b, a)] {
        let at = attr(connected.then_some(y));
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
}
