//! Mini-CQE decoding (PRM-FACTS §10; DPDK `mlx5_prm.h` `struct
//! mlx5_mini_cqe8`, kernel `include/linux/mlx5/device.h`, UCX `ib_mlx5.h`).
//!
//! A mini-CQE is 8 bytes; its layout depends on the format the CQ was
//! created with, which the bytes do not carry, so the caller names it. The
//! input may hold several minis (any multiple of 8 bytes: a whole 64-byte
//! basic-layout array is 8 of them); each is decoded on its own and
//! `--json` prints them as ONE JSON array, one object per mini, in order,
//! each with its `index`.

use super::{DecodeError, Fields, Value};
use mlx5dp::prm::{L3HdrType, L4HdrType, MiniCqe, MiniCqeFormat, SendOpcode};
use zerocopy::FromBytes;

/// The format of the minis: one of the responder formats, or requester.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum MiniFormat {
    /// Responder, HASH: RSS hash result and byte count (PRM value 0).
    #[value(aliases = ["0", "rx-hash", "rx_hash"])]
    Hash,
    /// Responder, CSUM: L4 checksum and byte count (PRM value 1).
    #[value(aliases = ["1", "checksum"])]
    Csum,
    /// Responder, FTAG_STRIDX: flow tag, stride index, 24-bit byte count (PRM value 2).
    #[value(aliases = ["2", "ftag_stridx", "ftag", "flow-tag", "flow_tag", "flow-tag-stridx", "flow_tag_stridx"])]
    FtagStridx,
    /// Responder, CSUM_STRIDX: checksum, stride index, byte count (PRM value 3).
    #[value(aliases = ["3", "csum_stridx", "checksum-stridx", "checksum_stridx"])]
    CsumStridx,
    /// Responder, L34H_STRIDX: header types, stride index, byte count (value 4 = format 0 + ext).
    #[value(aliases = ["4", "l34h_stridx", "l34h", "l3l4", "l3-l4", "l3l4-stridx", "l3l4_stridx", "l3_l4"])]
    L34hStridx,
    /// Requester (send queue): WQE counter, send opcode, byte count.
    #[value(aliases = ["requester", "send"])]
    Req,
}

impl MiniFormat {
    /// The name used on the command line (`hash`, ..., `req`).
    pub const fn name(self) -> &'static str {
        match self {
            MiniFormat::Hash => MiniCqeFormat::Hash.name(),
            MiniFormat::Csum => MiniCqeFormat::Csum.name(),
            MiniFormat::FtagStridx => MiniCqeFormat::FtagStridx.name(),
            MiniFormat::CsumStridx => MiniCqeFormat::CsumStridx.name(),
            MiniFormat::L34hStridx => MiniCqeFormat::L34hStridx.name(),
            MiniFormat::Req => "req",
        }
    }
}

/// Decoded mini-CQEs: one field list per mini.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodedMinis {
    /// The format they were decoded in.
    pub format: MiniFormat,
    /// The minis, in input order.
    pub minis: Vec<MiniCqe>,
}

/// Decodes `bytes.len() / 8` mini-CQEs (the length must be a non-zero multiple of 8).
pub fn decode_minis(bytes: &[u8], format: MiniFormat) -> Result<DecodedMinis, DecodeError> {
    if bytes.is_empty() || bytes.len() % MiniCqe::SIZE != 0 {
        return Err(DecodeError::Length {
            what: "mini-CQE",
            expected: "8 bytes (several minis: a multiple of 8)".to_string(),
            got: bytes.len(),
        });
    }
    let minis = bytes
        .chunks_exact(MiniCqe::SIZE)
        .filter_map(|c| MiniCqe::read_from_bytes(c).ok())
        .collect();
    Ok(DecodedMinis { format, minis })
}

/// The fields of one mini in `format`.
pub fn mini_fields(m: &MiniCqe, format: MiniFormat) -> Fields {
    let mut f = Fields::new();
    f.text("format", format.name());
    match format {
        MiniFormat::Hash => {
            let v = m.hash();
            f.hex("rx_hash_result", v.rx_hash_result.get(), 8)
                .dec("byte_cnt", v.byte_cnt.get());
        }
        MiniFormat::Csum => {
            let v = m.csum();
            f.hex("checksum", v.checksum.get(), 4)
                .dec("byte_cnt", v.byte_cnt.get())
                .bytes("reserved", &v.rsvd);
        }
        MiniFormat::FtagStridx => {
            let v = m.ftag_stridx();
            f.hex("flow_tag", v.flow_tag(), 6)
                .hex("flow_tag_low", v.flow_tag_low.get(), 4)
                .hex("flow_tag_high", v.ftag_byte_cnt.flow_tag_high(), 2)
                .dec("stride_idx", v.stride_idx.get())
                .dec("byte_cnt", v.ftag_byte_cnt.byte_cnt());
        }
        MiniFormat::CsumStridx => {
            let v = m.csum_stridx();
            f.hex("checksum", v.checksum.get(), 4)
                .dec("stride_idx", v.stride_idx.get())
                .dec("byte_cnt", v.byte_cnt.get());
        }
        MiniFormat::L34hStridx => {
            let v = m.l34h_stridx();
            let h = v.hdr_type;
            let l3 = L3HdrType::from_raw(h.l3_hdr_type());
            let l4 = L4HdrType::from_raw(h.l4_hdr_type());
            f.hex("hdr_type", h.into_bits(), 2)
                .text("l3_hdr_type", l3.name())
                .dec("l3_hdr_type_raw", l3.raw())
                .text("l4_hdr_type", l4.name())
                .dec("l4_hdr_type_raw", l4.raw())
                .flag("ip_frag", h.ip_frag())
                .flag("cvlan_stripped", h.cvlan_stripped())
                .hex("reserved", v.rsvd, 2)
                .dec("stride_idx", v.stride_idx.get())
                .dec("byte_cnt", v.byte_cnt.get());
        }
        MiniFormat::Req => {
            let v = m.req();
            f.hex("wqe_counter", v.wqe_counter.get(), 4)
                .hex("s_wqe_opcode", v.s_wqe_opcode, 2)
                .text(
                    "s_wqe_opcode_name",
                    SendOpcode::from_raw(v.s_wqe_opcode).name(),
                )
                .hex("reserved", v.rsvd, 2)
                .dec("byte_cnt", v.byte_cnt.get());
        }
    }
    f
}

impl DecodedMinis {
    /// One field list per mini, each starting with its `index`.
    pub fn fields(&self) -> Vec<Fields> {
        self.minis
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let mut f = Fields::new();
                f.dec("index", i as u64);
                f.0.extend(mini_fields(m, self.format).0);
                f
            })
            .collect()
    }

    /// The JSON array `mlx5dp decode mini-cqe --json` prints (always an
    /// array, even for one mini).
    pub fn to_json(&self) -> serde_json::Value {
        Value::List(self.fields()).to_json()
    }

    /// The text `mlx5dp decode mini-cqe` prints.
    pub fn to_human(&self) -> String {
        let mut out = format!(
            "{} mini-CQE(s), format {}\n",
            self.minis.len(),
            self.format.name()
        );
        for f in self.fields() {
            out.push_str(&f.to_human());
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TWO: [u8; 16] = [
        0x12, 0x34, 0x00, 0x05, 0xab, 0x00, 0x00, 0x40, //
        0x00, 0x07, 0x0a, 0x00, 0x00, 0x00, 0x01, 0x00,
    ];

    #[test]
    fn every_format() {
        let j = decode_minis(&TWO, MiniFormat::Hash).unwrap().to_json();
        assert_eq!(j.as_array().unwrap().len(), 2);
        assert_eq!(j[0]["index"], 0);
        assert_eq!(j[0]["rx_hash_result"], 0x1234_0005);
        assert_eq!(j[0]["byte_cnt"], 0xab00_0040u32);

        let j = decode_minis(&TWO, MiniFormat::FtagStridx)
            .unwrap()
            .to_json();
        assert_eq!(j[0]["flow_tag"], 0xab_1234);
        assert_eq!(j[0]["stride_idx"], 5);
        assert_eq!(j[0]["byte_cnt"], 0x40);

        let j = decode_minis(&TWO, MiniFormat::CsumStridx)
            .unwrap()
            .to_json();
        assert_eq!(j[0]["checksum"], 0x1234);
        assert_eq!(j[0]["stride_idx"], 5);

        let j = decode_minis(&TWO, MiniFormat::Csum).unwrap().to_json();
        assert_eq!(j[1]["checksum"], 7);

        // 0x34: L4 type 3 (TCP ACK, no data), L3 type 1 (IPv6). The sources
        // disagree on which of bytes 0 and 1 holds it (the core's
        // `MiniCqeL34hStridx` decides), so both carry it here.
        let l34h = [0x34, 0x34, 0x00, 0x05, 0x00, 0x00, 0x00, 0x40];
        let j = decode_minis(&l34h, MiniFormat::L34hStridx)
            .unwrap()
            .to_json();
        assert_eq!(j[0]["l4_hdr_type"], "tcp_ack_no_data");
        assert_eq!(j[0]["l3_hdr_type"], "ipv6");
        assert_eq!(j[0]["stride_idx"], 5);
        assert_eq!(j[0]["byte_cnt"], 0x40);

        let d = decode_minis(&TWO, MiniFormat::Req).unwrap();
        let j = d.to_json();
        assert_eq!(j[1]["wqe_counter"], 7);
        assert_eq!(j[1]["s_wqe_opcode_name"], "send");
        assert_eq!(j[1]["byte_cnt"], 0x100);
        assert!(d.to_human().contains("2 mini-CQE(s)"));
    }

    #[test]
    fn bad_lengths() {
        assert!(decode_minis(&[], MiniFormat::Hash).is_err());
        assert!(decode_minis(&[0; 12], MiniFormat::Hash).is_err());
        assert_eq!(
            decode_minis(&[0; 64], MiniFormat::Req).unwrap().minis.len(),
            8
        );
    }
}
