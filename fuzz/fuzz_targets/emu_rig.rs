//! The live emulated device the `emu_send` and `emu_recv` targets drive:
//! two QPs of one type on their own CQs, connected (RC, UC) or brought up
//! alone (UD with one Q_Key, raw Ethernet with a catch-all rule to B), a
//! registered buffer with every right, and the register writes a core
//! would make.
// Each target uses part of this module (it is compiled into each).
#![allow(dead_code)]

use mlx5dp_setup::emu::device::FlowRule;
use mlx5dp_setup::emu::{
    Access, CqInit, CqeSize, Device, DeviceConfig, DmaBlock, Pdn, QpAttr, QpInit, QpState, QpType,
    Qpn, RqInit,
};
use std::sync::Arc;

/// Bytes of the registered buffer.
pub const BUF: usize = 0x2000;
/// Q_Key of both UD QPs.
pub const QKEY: u32 = 0x1234;

/// The device, its two QPs (A sends, B receives) and the buffer.
pub struct Rig {
    pub dev: Device,
    pub pd: Pdn,
    pub a: Qpn,
    pub b: Qpn,
    pub buf: Arc<DmaBlock>,
    pub key: u32,
}

/// A fresh device with A (a cyclic RQ of 16 WQEs of 2 entries) and B
/// (the receive queue `b_rq` gives, called with the device and the PD).
pub fn rig(t: QpType, b_rq: impl FnOnce(&mut Device, Pdn) -> Option<RqInit>) -> Rig {
    let mut dev = Device::new(DeviceConfig::default());
    let pd = dev.alloc_pd();
    let cyclic = RqInit::Cyclic {
        wqe_cnt: 16,
        max_sge: 2,
    };
    let b_rq = b_rq(&mut dev, pd).unwrap_or(cyclic);
    let mut qp = |rq| {
        let cq = dev
            .create_cq(CqInit {
                cqe_cnt: 64,
                cqe_size: CqeSize::B64,
                compression: None,
                ignore_overrun: false,
            })
            .expect("cq");
        dev.create_qp(QpInit {
            qp_type: t,
            pd,
            send_cq: Some(cq),
            recv_cq: Some(cq),
            sq_wqebbs: 64,
            max_send_sge: 4,
            max_inline: 256,
            rq,
            xrcd: None,
            vlan_strip: false,
        })
        .expect("qp")
    };
    let (a, b) = (qp(cyclic), qp(b_rq));
    let connected = matches!(t, QpType::Rc | QpType::Uc);
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
    Rig {
        dev,
        pd,
        a,
        b,
        buf,
        key,
    }
}

/// Rewrites the big-endian 8-byte words at `first`, `first + step`, … of
/// `bytes` that are below [`BUF`] and not 0 to that offset into the
/// buffer (`base` its address): the buffer's address differs from run to
/// run, so inputs name it by offset, a deterministic mapping.
pub fn relocate(bytes: &mut [u8], first: usize, step: usize, base: u64) {
    let mut off = first;
    while off + 8 <= bytes.len() {
        let w = u64::from_be_bytes(bytes[off..off + 8].try_into().expect("8 bytes"));
        if w != 0 && w < BUF as u64 {
            bytes[off..off + 8].copy_from_slice(&(base + w).to_be_bytes());
        }
        off += step;
    }
}

impl Rig {
    /// Writes `wqe` (whole WQEBBs) into A's ring from slot 0, publishes it
    /// in the doorbell record and rings: a BlueFlame copy of up to 256
    /// bytes if `blueflame`, else the 8-byte doorbell; then lets the
    /// device run eight steps.
    pub fn ring_and_run(&mut self, wqe: &[u8], blueflame: bool) {
        let (ring, dbrec, uar) = self.dev.sq_blocks(self.a).expect("sq");
        ring.write(0, wqe).expect("wqe");
        let wqebbs = (wqe.len() / 64) as u32;
        dbrec.write(4, &wqebbs.to_be_bytes()).expect("sq dbrec");
        let reg = if blueflame {
            &wqe[..wqe.len().min(256)]
        } else {
            &wqe[..8]
        };
        uar.write(0x800, reg).expect("doorbell");
        for _ in 0..8 {
            self.dev.step();
        }
    }
}
