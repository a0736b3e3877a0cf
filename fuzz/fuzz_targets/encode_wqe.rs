//! `encode wqe` on arbitrary input text, on every QP type and with the
//! queue settings the first bytes pick: it must never panic, and every WQE
//! it prints must decode again (`decode wqe`, the same QP type) with the
//! DS count it was encoded with, no bytes left over and no warning (but
//! `op=driver1`'s UMR-opcode WQEs, decoded only). The text reaches the core's send queue
//! and `TxQueue` (every work request type, eMPW and MPW bursts), so this
//! also fuzzes the posting code with what a user may hand it.
//!
//! Input: byte 0 = QP type (mod 5: RC, UC, UD, XRC, raw Ethernet); byte 1
//! = log2 of the ring size (bits 5:0, mod 11), bit 6 `keep_going` and
//! bit 7 `prefer_bf`; byte 2 =
//! flags (bit 0 `sig_all`, 1 `shut_up_bf`, 2 no BlueFlame buffer, 3 no
//! atomics, 4 no raw checksum offload, 5 no inline L2 header, 6
//! `empw_dpdk`, 7 `abort_on_error`); byte 3 = producer counter's low byte
//! (its high byte is 0xff: the 16-bit WQE index wraps soon); byte 4 =
//! eMPW inline limit / 2; the rest = the input text (not UTF-8: refused).
#![no_main]

use libfuzzer_sys::fuzz_target;
use mlx5dp::prm::SendOpcode;
use mlx5dp::sq::QpType;
use mlx5dp_setup::decode::wqe::{decode_wqe, QpType as DecodeQp};
use mlx5dp_setup::encode::input::{parse_input, OpKind};
use mlx5dp_setup::encode::{encode, EncodeConfig, Event};

fuzz_target!(|data: &[u8]| {
    if data.len() < 5 {
        return;
    }
    let (head, body) = data.split_at(5);
    let Ok(text) = std::str::from_utf8(body) else {
        return;
    };
    let (qp, dqp) = [
        (QpType::Rc, DecodeQp::Rc),
        (QpType::Uc, DecodeQp::Uc),
        (QpType::Ud, DecodeQp::Ud),
        (QpType::Xrc, DecodeQp::Xrc),
        (QpType::RawPacket, DecodeQp::Raw),
    ][usize::from(head[0]) % 5];
    let mut cfg = EncodeConfig::new(qp, 0x1234, 1 << ((head[1] & 0x3f) % 11));
    cfg.keep_going = head[1] & 0x40 != 0;
    cfg.prefer_bf = head[1] & 0x80 != 0;
    let f = head[2];
    cfg.sig_all = f & 1 != 0;
    cfg.shut_up_bf = f & 2 != 0;
    if f & 4 != 0 {
        cfg.bf_size = 0;
    }
    cfg.atomics = f & 8 == 0;
    cfg.raw_csum = f & 16 == 0;
    if f & 32 != 0 {
        cfg.eth_min_inline = 0;
    }
    cfg.empw_dpdk = f & 64 != 0;
    cfg.abort_on_error = f & 128 != 0;
    cfg.pi = 0xff00 | u32::from(head[3]);
    cfg.empw_inline_max = Some(u16::from(head[4]) * 2);
    if cfg.check().is_err() {
        return;
    }
    let Ok(enc) = encode(&cfg, text) else {
        return;
    };
    let _ = enc.to_json_lines();
    let _ = enc.to_human(cfg.sq_wqebbs);
    // `op=driver1` posts a send's segments under the UMR opcode, as libmlx5
    // does; `decode wqe` reads the UMR layout that opcode names, so such a
    // WQE is decoded (it must not panic) but not held to the round trip.
    let driver1 = parse_input(text).is_ok_and(|batches| {
        batches
            .iter()
            .any(|b| b.wrs.iter().any(|w| w.op == OpKind::Driver1))
    });
    for e in &enc.events {
        if let Event::Wqe(w) = e {
            if driver1 && w.bytes.get(3) == Some(&SendOpcode::Umr.raw()) {
                let _ = decode_wqe(&w.bytes, Some(dqp));
                continue;
            }
            let d = decode_wqe(&w.bytes, Some(dqp))
                .unwrap_or_else(|err| panic!("encoded WQE {w:?} does not decode: {err}"));
            assert_eq!(d.ds(), usize::from(w.ds), "{w:?}");
            assert!(d.warnings.is_empty(), "{w:?}: {:?}", d.warnings);
            let _ = d.to_json();
        }
    }
});
