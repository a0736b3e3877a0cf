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

mod emu_rig;

use emu_rig::{relocate, rig};
use libfuzzer_sys::fuzz_target;
use mlx5dp::prm::{Be32, Be64, CtrlSeg, DataSeg};
use mlx5dp_setup::emu::wqe::{parse, peek_ctrl, ParseCtx};
use mlx5dp_setup::emu::QpType;
use zerocopy::{FromBytes, IntoBytes};

const TYPES: [QpType; 4] = [QpType::Rc, QpType::Uc, QpType::Ud, QpType::RawPacket];
const MAX_WQEBBS: usize = 16;

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
    if wqe.len() < 16 {
        return;
    }

    let mut r = rig(t, |_, _| None);
    // Two receives on B, 2 KiB each in the buffer's second half.
    let (rring, rdbrec) = r.dev.rq_blocks(r.b).expect("rq");
    let stride = r.dev.rq_parts(r.b).expect("rq parts").stride as usize;
    for slot in 0..2u64 {
        let seg = DataSeg {
            byte_count: Be32::new(0x800),
            lkey: Be32::new(r.key),
            addr: Be64::new(r.buf.addr() + 0x1000 + 0x800 * slot),
        };
        rring
            .write(slot as usize * stride, seg.as_bytes())
            .expect("recv");
    }
    rdbrec.write(0, &2u32.to_be_bytes()).expect("rq dbrec");

    if sel & 0x80 != 0 {
        // WQE index 0, A's QPN.
        let (mut c, _) = CtrlSeg::read_from_prefix(&wqe).expect("16 bytes");
        c.opmod_idx_opcode = c.opmod_idx_opcode.with_wqe_index(0);
        c.qpn_ds = c.qpn_ds.with_qpn(r.a.0);
        wqe[..CtrlSeg::SIZE].copy_from_slice(c.as_bytes());
    }
    relocate(&mut wqe[16..], 0, 8, r.buf.addr());
    wqe.resize(wqe.len().div_ceil(64) * 64, 0);
    r.ring_and_run(&wqe, body.len() % 2 == 1);
});
