//! CQE compression ("zipping"): the scalar reference implementation
//! (PRM-FACTS §10; DPDK `mlx5_rx_poll_len`, kernel `mlx5e_decompress_cqe*`,
//! UCX `uct_ib_mlx5_iface_cqe_unzip`).
//!
//! A compressed session is unpacked into ordinary [`Cqe64`] values: the
//! title's copy with one mini-CQE's fields applied. Nothing else is
//! inherited or invented:
//!
//! | field | source |
//! |---|---|
//! | `byte_cnt` | the mini (FTAG_STRIDX: its 24-bit count) |
//! | `rss_hash_result` | HASH minis |
//! | `check_sum` | CSUM and CSUM_STRIDX minis |
//! | `sop_drop_qpn[23:0]` (flow tag) | FTAG_STRIDX minis |
//! | `l4_l3_hdr_type` (byte 29) | L34H_STRIDX minis (mini byte 0, DPDK `hdr_type`) |
//! | `wqe_counter` | *_STRIDX minis: the stride index; requester minis: theirs; otherwise a running counter (below) |
//! | `sop_drop_qpn[31:24]` | requester minis: their send opcode |
//! | `op_own` | the title's, with the format cleared to "no inline" |
//! | everything else | the title |
//!
//! Running counter for minis without their own index: the basic layout
//! starts at the title's `wqe_counter` (the title is not a completion);
//! the enhanced layout continues after the title (a real completion) and
//! across consecutive compressed CQEs. It advances by one per completion
//! on a cyclic RQ, by the strides consumed on a striding RQ.
//!
//! Layouts:
//! - basic: the title (format 3 in a regular slot) gives the count N in
//!   `byte_cnt`; minis come eight to a slot at title+1, title+8, title+16…;
//!   the session owns N slots; every slot after the title is invalidated
//!   (`op_own = 0xf0`, DPDK `MLX5_CQE_INVALIDATE`) once consumed, so a later
//!   pass never mistakes it for a CQE.
//! - enhanced: the title is the last regular CQE; a compressed CQE (format
//!   3, valid by its iteration count) holds N = `op_own[7:4] + 1` ≤ 7 minis
//!   from byte 0 and stands for N consumer indices.
#![forbid(unsafe_code)]

use crate::prm::{
    Cqe64, CqeFormat, CqeOpcode, L4L3HdrType, MiniCqe, MiniCqeFormat, MprqByteCnt, OpOwn,
    ENHANCED_MAX_MINIS, MINI_CQE_ARRAY_SIZE,
};

/// The CQ's compression layout (`cqe_comp_layout`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// Basic ("legacy") layout: title CQE + arrays of eight mini-CQEs.
    Basic,
    /// Enhanced layout: the last regular CQE is the title; compressed CQEs
    /// hold up to seven minis; validity by iteration count.
    Enhanced,
}

/// How to read the mini-CQEs of a session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MiniView {
    /// Responder format the CQ was created with.
    pub format: MiniCqeFormat,
    /// The receive queue is a striding RQ (byte counts carry strides).
    pub striding: bool,
}

/// Whether a responder mini format carries a stride index.
pub const fn has_stride_index(format: MiniCqeFormat) -> bool {
    matches!(
        format,
        MiniCqeFormat::FtagStridx | MiniCqeFormat::CsumStridx | MiniCqeFormat::L34hStridx
    )
}

/// The CQE a mini-CQE stands for: `title` with the mini's fields applied
/// (see the module table). `running` is the running `wqe_counter` for minis
/// that carry no index of their own; returns the expanded CQE and the
/// running counter for the next mini.
pub fn expand(title: &Cqe64, mini: &MiniCqe, view: MiniView, running: u16) -> (Cqe64, u16) {
    let mut cqe = *title;
    // A decoded mini is an ordinary completion: clear the format.
    let op_own = title.op_own.with_format(CqeFormat::NoInline.raw());
    cqe.op_own = op_own;
    if title.opcode() == CqeOpcode::Req {
        let req = mini.req();
        cqe.byte_cnt = req.byte_cnt;
        cqe.wqe_counter = req.wqe_counter;
        cqe.sop_drop_qpn = cqe.sop_drop_qpn.with_sop(req.s_wqe_opcode);
        return (cqe, running);
    }
    let mut own_index = None;
    match view.format {
        MiniCqeFormat::Hash => {
            let m = mini.hash();
            cqe.rss_hash_result = m.rx_hash_result;
            cqe.byte_cnt = m.byte_cnt;
        }
        MiniCqeFormat::Csum => {
            let m = mini.csum();
            cqe.check_sum = m.checksum;
            cqe.byte_cnt = m.byte_cnt;
        }
        MiniCqeFormat::FtagStridx => {
            let m = mini.ftag_stridx();
            cqe.byte_cnt.set(m.ftag_byte_cnt.byte_cnt());
            cqe.sop_drop_qpn = cqe.sop_drop_qpn.with_qpn(m.flow_tag());
            own_index = Some(m.stride_idx.get());
        }
        MiniCqeFormat::CsumStridx => {
            let m = mini.csum_stridx();
            cqe.check_sum = m.checksum;
            cqe.byte_cnt = m.byte_cnt;
            own_index = Some(m.stride_idx.get());
        }
        MiniCqeFormat::L34hStridx => {
            let m = mini.l34h_stridx();
            // DPDK `struct mlx5_mini_cqe8` puts `hdr_type` in byte 0 (the
            // prm view names byte 1; see the report to the prm owner).
            cqe.l4_l3_hdr_type = L4L3HdrType::from_bits(mini.bytes[0]);
            cqe.byte_cnt = m.byte_cnt;
            own_index = Some(m.stride_idx.get());
        }
        MiniCqeFormat::Unknown(_) => {
            cqe.byte_cnt = mini.hash().byte_cnt;
        }
    }
    let step = if view.striding {
        MprqByteCnt::from_bits(cqe.byte_cnt.get()).strides()
    } else {
        1
    };
    let index = own_index.unwrap_or(running);
    cqe.wqe_counter.set(index);
    (cqe, index.wrapping_add(step))
}

/// Expands a whole session in order: the scalar reference the vector paths
/// must agree with bit for bit. `start` is the running counter before the
/// first mini; returns the counter after the last. `out` must be at least
/// as long as `minis` (extra entries are left alone).
pub fn expand_session(
    title: &Cqe64,
    minis: &[MiniCqe],
    view: MiniView,
    start: u16,
    out: &mut [Cqe64],
) -> u16 {
    let mut running = start;
    for (mini, slot) in minis.iter().zip(out.iter_mut()) {
        let (cqe, next) = expand(title, mini, view, running);
        *slot = cqe;
        running = next;
    }
    running
}

/// The running counter after a regular CQE in the enhanced layout: where
/// the first mini of a following compressed CQE continues.
pub fn running_after(cqe: &Cqe64, striding: bool) -> u16 {
    let step = if striding {
        MprqByteCnt::from_bits(cqe.byte_cnt.get()).strides()
    } else {
        1
    };
    cqe.wqe_counter.get().wrapping_add(step)
}

/// Slot offset (from the title) of mini array `k` in the basic layout:
/// title+1 for the first, title+8k after that.
pub const fn basic_array_offset(k: u32) -> u32 {
    if k == 0 {
        1
    } else {
        8 * k
    }
}

/// Slot offsets `[first, last]` (from the title) to invalidate once array
/// `k` of a basic session of `count` minis has been consumed: the array's
/// slot and the holes after it, up to the end of the session.
pub const fn basic_invalidate_range(k: u32, count: u32) -> (u32, u32) {
    let first = basic_array_offset(k);
    let last_of_array = 8 * k + 7;
    let last = if last_of_array < count - 1 {
        last_of_array
    } else {
        count - 1
    };
    (first, last)
}

/// An open compressed session.
#[derive(Clone, Debug)]
pub(crate) struct Session {
    /// Consumer index of the title (basic) or compressed CQE (enhanced).
    pub(crate) base: u32,
    /// Number of minis in the session (basic) or compressed CQE (enhanced).
    pub(crate) count: u32,
    /// Index of the next mini.
    pub(crate) next: u32,
    /// The mini array being read (basic: loaded per array of eight;
    /// enhanced: the compressed CQE's seven).
    pub(crate) minis: [MiniCqe; MINI_CQE_ARRAY_SIZE],
}

impl Session {
    /// Minis of an enhanced compressed CQE.
    pub(crate) fn enhanced_minis(cqe: &Cqe64) -> [MiniCqe; MINI_CQE_ARRAY_SIZE] {
        let bytes: [u8; 64] = zerocopy::transmute!(*cqe);
        let mut minis = [MiniCqe::default(); MINI_CQE_ARRAY_SIZE];
        for (i, m) in minis.iter_mut().enumerate().take(ENHANCED_MAX_MINIS) {
            let mut b = [0u8; 8];
            b.copy_from_slice(&bytes[i * 8..i * 8 + 8]);
            m.bytes = b;
        }
        minis
    }
}

/// The number of minis an enhanced compressed CQE declares.
pub fn enhanced_count(op_own: OpOwn) -> u32 {
    u32::from(op_own.opcode()) + 1
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prm::Be32;

    fn title_resp() -> Cqe64 {
        let mut t = Cqe64 {
            op_own: OpOwn::new()
                .with_opcode(CqeOpcode::RespSend.raw())
                .with_format(3),
            ..Cqe64::default()
        };
        t.wqe_counter.set(10);
        t.rss_hash_result.set(0xdead_beef);
        t.check_sum.set(0x1111);
        t.sop_drop_qpn = t.sop_drop_qpn.with_qpn(0x00ab_cdef);
        t.vlan_info.set(7);
        t
    }

    fn mini(bytes: [u8; 8]) -> MiniCqe {
        MiniCqe { bytes }
    }

    #[test]
    fn hash_mini_overrides_hash_and_len_only() {
        let t = title_resp();
        let view = MiniView {
            format: MiniCqeFormat::Hash,
            striding: false,
        };
        let (c, next) = expand(&t, &mini([1, 2, 3, 4, 0, 0, 0, 64]), view, 10);
        assert_eq!(c.rss_hash_result.get(), 0x0102_0304);
        assert_eq!(c.byte_cnt.get(), 64);
        assert_eq!(c.check_sum.get(), 0x1111);
        assert_eq!(c.wqe_counter.get(), 10);
        assert_eq!(next, 11);
        assert_eq!(c.format(), CqeFormat::NoInline);
        assert_eq!(c.opcode(), CqeOpcode::RespSend);
        assert_eq!(c.vlan_info.get(), 7);
    }

    #[test]
    fn csum_mini() {
        let t = title_resp();
        let view = MiniView {
            format: MiniCqeFormat::Csum,
            striding: false,
        };
        let (c, _) = expand(&t, &mini([0xab, 0xcd, 9, 9, 0, 0, 2, 0]), view, 3);
        assert_eq!(c.check_sum.get(), 0xabcd);
        assert_eq!(c.byte_cnt.get(), 512);
        assert_eq!(c.rss_hash_result.get(), 0xdead_beef);
        assert_eq!(c.wqe_counter.get(), 3);
    }

    #[test]
    fn ftag_stridx_mini() {
        let t = title_resp();
        let view = MiniView {
            format: MiniCqeFormat::FtagStridx,
            striding: true,
        };
        // flow tag 0x12_3456: low 16 bits in bytes 0-1, high byte in 4.
        let (c, next) = expand(
            &t,
            &mini([0x34, 0x56, 0, 5, 0x12, 0x00, 0x01, 0x00]),
            view,
            0,
        );
        assert_eq!(c.sop_drop_qpn.qpn(), 0x12_3456);
        assert_eq!(c.byte_cnt.get(), 0x100);
        assert_eq!(c.wqe_counter.get(), 5);
        // 24-bit count 0x100 carries no stride bits: the running counter
        // follows the own index.
        assert_eq!(next, 5);
    }

    #[test]
    fn csum_stridx_mini_on_striding_rq() {
        let t = title_resp();
        let view = MiniView {
            format: MiniCqeFormat::CsumStridx,
            striding: true,
        };
        let (c, next) = expand(&t, &mini([0, 0, 0, 7, 0, 2, 0x01, 0x2c]), view, 0);
        assert_eq!(c.wqe_counter.get(), 7);
        assert_eq!(MprqByteCnt::from_bits(c.byte_cnt.get()).strides(), 2);
        assert_eq!(next, 9);
    }

    #[test]
    fn l34h_stridx_mini() {
        let t = title_resp();
        let view = MiniView {
            format: MiniCqeFormat::L34hStridx,
            striding: true,
        };
        // byte 0 = 0x25: L4 type 2 (UDP), L3 type 1 (IPv6), VLAN stripped.
        let (c, _) = expand(&t, &mini([0x25, 0, 0, 4, 0, 1, 0, 64]), view, 0);
        assert_eq!(c.l4_l3_hdr_type.l4_hdr_type(), 2);
        assert_eq!(c.l4_l3_hdr_type.l3_hdr_type(), 1);
        assert!(c.l4_l3_hdr_type.cvlan_stripped());
        assert_eq!(c.wqe_counter.get(), 4);
    }

    #[test]
    fn requester_mini() {
        let mut t = title_resp();
        t.op_own = t.op_own.with_opcode(CqeOpcode::Req.raw());
        let view = MiniView {
            format: MiniCqeFormat::Hash,
            striding: false,
        };
        let (c, next) = expand(&t, &mini([0x12, 0x34, 0x10, 0, 0, 0, 0, 8]), view, 99);
        assert_eq!(c.wqe_counter.get(), 0x1234);
        assert_eq!(c.sop_drop_qpn.sop(), 0x10);
        assert_eq!(c.sop_drop_qpn.qpn(), 0x00ab_cdef);
        assert_eq!(c.byte_cnt, Be32::new(8));
        assert_eq!(next, 99);
    }

    #[test]
    fn basic_geometry() {
        assert_eq!(basic_array_offset(0), 1);
        assert_eq!(basic_array_offset(1), 8);
        assert_eq!(basic_array_offset(2), 16);
        assert_eq!(basic_invalidate_range(0, 2), (1, 1));
        assert_eq!(basic_invalidate_range(0, 9), (1, 7));
        assert_eq!(basic_invalidate_range(1, 9), (8, 8));
        assert_eq!(basic_invalidate_range(0, 64), (1, 7));
        assert_eq!(basic_invalidate_range(7, 64), (56, 63));
    }

    #[test]
    fn session_expansion_matches_one_by_one() {
        let t = title_resp();
        let view = MiniView {
            format: MiniCqeFormat::Hash,
            striding: false,
        };
        let minis: [MiniCqe; 3] = [
            mini([0, 0, 0, 1, 0, 0, 0, 1]),
            mini([0, 0, 0, 2, 0, 0, 0, 2]),
            mini([0; 8]),
        ];
        let mut out = [Cqe64::default(); 3];
        let end = expand_session(&t, &minis, view, 10, &mut out);
        assert_eq!(end, 13);
        assert_eq!(out[1].wqe_counter.get(), 11);
        assert_eq!(out[1].rss_hash_result.get(), 2);
    }
}
