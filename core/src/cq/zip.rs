//! CQE compression ("zipping"): the scalar reference implementation
//! (PRM-FACTS §10; DPDK `mlx5_rx_poll_len`, kernel `mlx5e_decompress_cqe*`,
//! UCX `uct_ib_mlx5_iface_cqe_unzip`), and the batched decoders the poller
//! uses, which must agree with it bit for bit: [`decode_scalar`] here, the
//! SSE4.1/AVX2 paths in `zip_x86`, the NEON path in `zip_neon`, picked by
//! [`UnzipPath`], into a [`MiniBatch`] per array of eight minis.
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

use super::mem::{store_summary, ArrayRun, BlockRun, CqeCopy};
use super::{CompletionSummary, Cq, Origin, PollError, WorkQueues};
use crate::prm::{
    Be16, Be32, Cqe64, CqeOpcode, L4L3HdrType, MiniCqe, MiniCqeFormat, MprqByteCnt, OpOwn,
    SopDropQpn, WcStatus, ENHANCED_FULL_BLOCK, ENHANCED_MAX_MINIS, ENHANCED_NUM_AND_TYPE_MASK,
    MINI_CQE_ARRAY_SIZE,
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
    cqe.op_own = mini_op_own(title.op_own);
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

/// An open compressed session. Its decoded mini array is the current
/// completion's [`MiniBatch`] (the poller hands minis out as views of it),
/// its title the current completion's CQE copy.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Session {
    /// Consumer index of the title (basic) or compressed CQE (enhanced).
    pub(crate) base: u32,
    /// Number of minis in the session (basic) or compressed CQE (enhanced).
    pub(crate) count: u32,
    /// Index of the next mini.
    pub(crate) next: u32,
    /// What the minis carry (fixed for the session; [`Unzip::CARRIED`]
    /// for a session the burst poller carried, until the general poller
    /// decodes its block).
    pub(crate) unzip: Unzip,
    /// Basic layout: how the burst poller writes whole arrays of the
    /// session, if it may ([`Fused::new`] of the title).
    pub(crate) fused: Option<Fused>,
    /// Enhanced layout: the burst poller wrote this compressed CQE's
    /// summaries whole into the CQ's carry buffer and handed out the first
    /// `next`; its [`MiniBatch`] is not decoded yet (the general poller
    /// decodes it from the carried copy before its next mini).
    pub(crate) carried: bool,
}

/// Whether `copy` is a full enhanced compressed CQE: format compressed,
/// seven minis (PRM-FACTS §10.5: `num_and_type` bits 7–4 = N − 1, bits
/// 3–2 = 3; bits 1–0 not used).
#[inline(always)]
pub(crate) fn is_full_block(copy: CqeCopy) -> bool {
    copy.to_cqe().op_own.into_bits() & ENHANCED_NUM_AND_TYPE_MASK == ENHANCED_FULL_BLOCK
}

/// The number of minis an enhanced compressed CQE declares.
pub fn enhanced_count(op_own: OpOwn) -> u32 {
    u32::from(op_own.opcode()) + 1
}

// ---------------------------------------------------------------------------
// Batched decoding: one mini array at a time.
//
// What dominates unpacking a session is turning eight mini-CQEs into eight
// sets of per-completion values: byte swaps, the flow-tag and stride-index
// splits, the running `wqe_counter` (a prefix sum of strides on a striding
// RQ) and the title fields every completion inherits. [`decode_scalar`] and
// the vector paths ([`UnzipPath`]) do exactly that for a whole array at
// once, into a struct of arrays ([`MiniBatch`]) whose inherited fields were
// filled once for the session ([`MiniBatch::new`]); each completion is then
// the title template with six fields stored ([`MiniBatch::cqe`]), with no
// test of the format per mini. Which format, layout and path apply is
// decided once per session ([`Unzip`], chosen when the session opens) and
// dispatched once per array.

/// What the minis of a session carry: the requester format (the title is a
/// requester CQE) or one responder format. Fixed when a session opens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MiniKind {
    /// Requester minis: `wqe_counter`, send opcode, byte count.
    Req,
    /// HASH: RSS hash result, byte count.
    Hash,
    /// CSUM: checksum, byte count.
    Csum,
    /// A responder format this crate does not name: only the byte count
    /// (bytes 4–7) is taken, as [`expand`] does.
    ByteCnt,
    /// FTAG_STRIDX: flow tag, stride index, 24-bit byte count.
    FtagStridx,
    /// CSUM_STRIDX: checksum, stride index, byte count.
    CsumStridx,
    /// L34H_STRIDX: header types, stride index, byte count.
    L34hStridx,
}

impl MiniKind {
    /// The kind of the minis following `title` on a CQ created with `format`.
    pub fn of(title: &Cqe64, format: MiniCqeFormat) -> Self {
        if title.opcode() == CqeOpcode::Req {
            return Self::Req;
        }
        match format {
            MiniCqeFormat::Hash => Self::Hash,
            MiniCqeFormat::Csum => Self::Csum,
            MiniCqeFormat::FtagStridx => Self::FtagStridx,
            MiniCqeFormat::CsumStridx => Self::CsumStridx,
            MiniCqeFormat::L34hStridx => Self::L34hStridx,
            MiniCqeFormat::Unknown(_) => Self::ByteCnt,
        }
    }

    /// Whether the running counter is the `wqe_counter` (responder minis
    /// without their own index).
    pub const fn uses_running_counter(self) -> bool {
        matches!(self, Self::Hash | Self::Csum | Self::ByteCnt)
    }
}

/// How to decode the mini arrays of one session: chosen once when it
/// opens, so that no per-mini decision remains.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unzip {
    /// What the minis carry.
    pub kind: MiniKind,
    /// The receive queue is a striding RQ: the running counter advances by
    /// the strides each packet consumed (`byte_cnt[29:16]`), not by one.
    pub striding: bool,
    /// The title's `sop_drop_qpn` (host order), whose bits requester and
    /// FTAG_STRIDX minis do not replace (the QPN, the opcode byte).
    pub title_sop_drop_qpn: u32,
}

impl Unzip {
    /// The decoding of a session carried by the burst poller (enhanced
    /// layout: [`Session::carried`]) until the general poller decodes its
    /// block, which builds the real one from the title first: a
    /// placeholder, never used to decode.
    pub(crate) const CARRIED: Self = Self {
        kind: MiniKind::ByteCnt,
        striding: false,
        title_sop_drop_qpn: 0,
    };

    /// The decoding of the minis following `title`.
    pub fn new(title: &Cqe64, view: MiniView) -> Self {
        Self {
            kind: MiniKind::of(title, view.format),
            striding: view.striding,
            title_sop_drop_qpn: title.sop_drop_qpn.into_bits().get(),
        }
    }

    /// How far the running counter advances past a completion with this
    /// (host-order) byte count.
    #[inline(always)]
    pub const fn step(self, byte_cnt: u32) -> u16 {
        if self.striding {
            // `MprqByteCnt::strides`, bits [29:16].
            ((byte_cnt >> 16) & 0x3fff) as u16
        } else {
            1
        }
    }
}

/// One decoded mini array: per-completion values, host order, lane `i` for
/// mini `i` of the array (struct of arrays). Fields a format does not
/// carry hold the title's value, so that [`Self::cqe`] is the same six
/// stores for every format: [`Self::new`] fills every lane from the title
/// once per session, and each decode of the session's arrays overwrites
/// only `byte_cnt`, `wqe_counter` and the fields its minis carry.
///
/// All eight lanes are decoded from whatever the array holds
/// ([`UnzipPath::decode`]; [`UnzipPath::decode_count`] may leave the lanes
/// from its count on unspecified); lanes past the array's last valid mini
/// are never reported.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C, align(32))]
pub struct MiniBatch {
    /// `byte_cnt` (FTAG_STRIDX: the 24-bit count).
    pub byte_cnt: [u32; MINI_CQE_ARRAY_SIZE],
    /// `rss_hash_result`.
    pub rss_hash_result: [u32; MINI_CQE_ARRAY_SIZE],
    /// `sop_drop_qpn` as a whole word (flow tag in bits 23–0, requester
    /// send opcode in bits 31–24).
    pub sop_drop_qpn: [u32; MINI_CQE_ARRAY_SIZE],
    /// `check_sum`.
    pub check_sum: [u16; MINI_CQE_ARRAY_SIZE],
    /// `wqe_counter`: the mini's own index or the running counter.
    pub wqe_counter: [u16; MINI_CQE_ARRAY_SIZE],
    /// `l4_l3_hdr_type` (CQE byte 29).
    pub l4_l3_hdr_type: [u8; MINI_CQE_ARRAY_SIZE],
}

impl MiniBatch {
    /// A batch with the title's values in every lane of every field: the
    /// starting point of a session's decodes.
    pub fn new(title: &Cqe64) -> Self {
        Self {
            byte_cnt: [title.byte_cnt.get(); MINI_CQE_ARRAY_SIZE],
            rss_hash_result: [title.rss_hash_result.get(); MINI_CQE_ARRAY_SIZE],
            sop_drop_qpn: [title.sop_drop_qpn.into_bits().get(); MINI_CQE_ARRAY_SIZE],
            check_sum: [title.check_sum.get(); MINI_CQE_ARRAY_SIZE],
            wqe_counter: [title.wqe_counter.get(); MINI_CQE_ARRAY_SIZE],
            l4_l3_hdr_type: [title.l4_l3_hdr_type.into_bits(); MINI_CQE_ARRAY_SIZE],
        }
    }

    /// The CQE of lane `i` (taken modulo 8): the session's [`template`]
    /// with the lane's values stored. Equal, bit for bit, to what
    /// [`expand`] returns for the mini.
    #[inline(always)]
    pub fn cqe(&self, template: &Cqe64, i: usize) -> Cqe64 {
        let i = i % MINI_CQE_ARRAY_SIZE;
        let mut cqe = *template;
        cqe.byte_cnt = Be32::new(self.byte_cnt[i]);
        cqe.rss_hash_result = Be32::new(self.rss_hash_result[i]);
        cqe.sop_drop_qpn = SopDropQpn::from_bits(Be32::new(self.sop_drop_qpn[i]));
        cqe.check_sum = Be16::new(self.check_sum[i]);
        cqe.wqe_counter = Be16::new(self.wqe_counter[i]);
        cqe.l4_l3_hdr_type = L4L3HdrType::from_bits(self.l4_l3_hdr_type[i]);
        cqe
    }

    /// The running counter after the first `n` lanes (1 to 8), for the next
    /// array or compressed CQE; `start` is the counter before lane 0.
    #[inline(always)]
    pub fn end_counter(&self, unzip: Unzip, n: usize, start: u16) -> u16 {
        if unzip.kind == MiniKind::Req || n == 0 {
            return start;
        }
        let last = (n - 1) % MINI_CQE_ARRAY_SIZE;
        self.wqe_counter[last].wrapping_add(unzip.step(self.byte_cnt[last]))
    }
}

/// The CQE every mini of a session starts from: the title with its
/// `op_own` as [`mini_op_own`] gives it.
pub fn template(title: &Cqe64) -> Cqe64 {
    let mut cqe = *title;
    cqe.op_own = mini_op_own(title.op_own);
    cqe
}

/// The `op_own` of a mini's expanded CQE: the title's opcode; format 0 (a
/// decoded mini is an ordinary completion), the solicited-event and owner
/// bits clear, as the kernel rebuilds it (`mlx5e_decompress_cqe`:
/// `op_own &= 0xf0`, then the owner bit of the mini's own index, which
/// only a caller that knows that index can set).
pub fn mini_op_own(title: OpOwn) -> OpOwn {
    OpOwn::from_bits(title.into_bits() & super::OPCODE_MASK)
}

/// Bits of `sop_drop_qpn` a requester mini replaces (the send opcode).
pub(crate) const SOP_MASK: u32 = 0xff00_0000;
/// Bits of `sop_drop_qpn` an FTAG_STRIDX mini replaces (the flow tag).
pub(crate) const FLOW_TAG_BITS: u32 = 0x00ff_ffff;

/// Decodes one mini array, scalar: the portable path and the reference the
/// vector paths are tested against lane by lane (itself tested against
/// [`expand`]). `start` is the running counter before lane 0; `out` holds
/// the session's inherited fields ([`MiniBatch::new`] of its title) and
/// gets `byte_cnt`, `wqe_counter` and the fields the minis carry.
pub fn decode_scalar(
    unzip: Unzip,
    minis: &[MiniCqe; MINI_CQE_ARRAY_SIZE],
    start: u16,
    out: &mut MiniBatch,
) {
    decode_scalar_body(unzip, minis, MINI_CQE_ARRAY_SIZE, start, out);
}

/// [`decode_scalar`]'s body, shared with [`decode_scalar_count`]: returns
/// the running counter after the first `n` lanes.
#[inline(always)]
fn decode_scalar_body(
    unzip: Unzip,
    minis: &[MiniCqe; MINI_CQE_ARRAY_SIZE],
    n: usize,
    start: u16,
    out: &mut MiniBatch,
) -> u16 {
    let title_sop = unzip.title_sop_drop_qpn;
    // The two big-endian words of every mini, in host order.
    let first = minis.map(|m| u32::from_be_bytes([m.bytes[0], m.bytes[1], m.bytes[2], m.bytes[3]]));
    let second =
        minis.map(|m| u32::from_be_bytes([m.bytes[4], m.bytes[5], m.bytes[6], m.bytes[7]]));
    out.byte_cnt = second;
    // Field layouts: PRM-FACTS §10.2 and §10.3; `first` holds bytes 0–3.
    match unzip.kind {
        MiniKind::Req => {
            // Bytes 0–1 `wqe_counter`, byte 2 the send opcode.
            out.wqe_counter = first.map(|f| (f >> 16) as u16);
            out.sop_drop_qpn = first.map(|f| (title_sop & !SOP_MASK) | ((f << 16) & SOP_MASK));
            return start;
        }
        MiniKind::Hash => out.rss_hash_result = first,
        MiniKind::Csum => out.check_sum = first.map(|f| (f >> 16) as u16),
        MiniKind::ByteCnt => {}
        MiniKind::FtagStridx => {
            // Tag [15:0] in bytes 0–1, [23:16] in byte 4; count in 5–7.
            out.byte_cnt = second.map(|s| s & FLOW_TAG_BITS);
            for ((sop, f), s) in out.sop_drop_qpn.iter_mut().zip(first).zip(second) {
                *sop = (title_sop & !FLOW_TAG_BITS) | ((s >> 8) & 0x00ff_0000) | (f >> 16);
            }
        }
        MiniKind::CsumStridx => out.check_sum = first.map(|f| (f >> 16) as u16),
        MiniKind::L34hStridx => out.l4_l3_hdr_type = first.map(|f| (f >> 24) as u8),
    }
    if unzip.kind.uses_running_counter() {
        let mut running = start;
        for (w, b) in out.wqe_counter.iter_mut().zip(out.byte_cnt) {
            *w = running;
            running = running.wrapping_add(unzip.step(b));
        }
        if !unzip.striding {
            // Lane `i` holds `start + i`.
            return start.wrapping_add(n as u16);
        }
    } else {
        // Stride index in bytes 2–3.
        out.wqe_counter = first.map(|f| f as u16);
    }
    out.end_counter(unzip, n, start)
}

/// [`decode_scalar`], then the running counter after the first `n` lanes
/// (`n` at most 8; [`MiniBatch::end_counter`]): the scalar
/// [`UnzipPath::decode_count`].
pub fn decode_scalar_count(
    unzip: Unzip,
    minis: &[MiniCqe; MINI_CQE_ARRAY_SIZE],
    n: usize,
    start: u16,
    out: &mut MiniBatch,
) -> u16 {
    decode_scalar_body(unzip, minis, n, start, out)
}

/// The decoder a CQ uses for its mini arrays: chosen when the CQ is built
/// ([`super::CqConfig::unzip`]), dispatched once per array.
///
/// The default is the best path the crate was compiled for
/// (`cfg(target_feature)`: AVX2, then SSE4.1 on x86-64; NEON on aarch64,
/// where it is part of the base target), else scalar. `core` is `no_std`
/// and cannot ask the CPU; a caller with `std` upgrades by detection:
///
/// ```ignore
/// if std::is_x86_feature_detected!("avx2") {
///     // SAFETY: detected just above.
///     cfg.unzip = UnzipPath::Avx2(unsafe { Avx2::new_unchecked() });
/// }
/// ```
///
/// Every path produces the same [`MiniBatch`], bit for bit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnzipPath {
    /// [`decode_scalar`].
    Scalar,
    /// SSE4.1 (with SSSE3 `pshufb`), 128-bit vectors.
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    Sse41(super::zip_x86::Sse41),
    /// AVX2, 256-bit vectors.
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    Avx2(super::zip_x86::Avx2),
    /// NEON (AdvSIMD), 128-bit vectors.
    #[cfg(target_arch = "aarch64")]
    Neon(super::zip_neon::Neon),
}

impl UnzipPath {
    /// The best path enabled at compile time.
    pub const fn compile_time() -> Self {
        #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
        {
            if let Some(t) = super::zip_x86::Avx2::compile_time() {
                return Self::Avx2(t);
            }
            if let Some(t) = super::zip_x86::Sse41::compile_time() {
                return Self::Sse41(t);
            }
        }
        #[cfg(target_arch = "aarch64")]
        {
            if let Some(t) = super::zip_neon::Neon::compile_time() {
                return Self::Neon(t);
            }
        }
        Self::Scalar
    }

    /// Short name (`"scalar"`, `"sse4.1"`, `"avx2"`, `"neon"`).
    pub const fn name(self) -> &'static str {
        match self {
            Self::Scalar => "scalar",
            #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
            Self::Sse41(_) => "sse4.1",
            #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
            Self::Avx2(_) => "avx2",
            #[cfg(target_arch = "aarch64")]
            Self::Neon(_) => "neon",
        }
    }

    /// Decodes one mini array with this path ([`decode_scalar`]'s contract).
    #[inline]
    pub fn decode(
        self,
        unzip: Unzip,
        minis: &[MiniCqe; MINI_CQE_ARRAY_SIZE],
        start: u16,
        out: &mut MiniBatch,
    ) {
        match self {
            Self::Scalar => decode_scalar(unzip, minis, start, out),
            #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
            Self::Sse41(t) => t.decode(unzip, minis, start, out),
            #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
            Self::Avx2(t) => t.decode(unzip, minis, start, out),
            #[cfg(target_arch = "aarch64")]
            Self::Neon(t) => t.decode(unzip, minis, start, out),
        }
    }
}

impl UnzipPath {
    /// Decodes the first `n` minis (at most 8) of `minis` and returns the
    /// running counter after them ([`MiniBatch::end_counter`] of the
    /// result): the decode and the chaining every caller does per array or
    /// compressed CQE, in one step. Lanes below `n` are exactly what
    /// [`Self::decode`] writes; lanes from `n` on are unspecified (never
    /// reported). Entries of one or two minis (the last compressed CQE of
    /// an enhanced session, mostly) take a short path on the vector paths
    /// that decodes only the first pair.
    #[inline]
    pub fn decode_count(
        self,
        unzip: Unzip,
        minis: &[MiniCqe; MINI_CQE_ARRAY_SIZE],
        n: usize,
        start: u16,
        out: &mut MiniBatch,
    ) -> u16 {
        match self {
            #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
            Self::Sse41(t) => t.decode_count(unzip, minis, n, start, out),
            #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
            Self::Avx2(t) => t.decode_count(unzip, minis, n, start, out),
            #[cfg(target_arch = "aarch64")]
            Self::Neon(t) => {
                t.decode(unzip, minis, start, out);
                out.end_counter(unzip, n, start)
            }
            Self::Scalar => {
                if unzip.kind.uses_running_counter() && !unzip.striding {
                    // Lane `i` holds `start + i`.
                    decode_scalar(unzip, minis, start, out);
                    start.wrapping_add(n as u16)
                } else {
                    decode_scalar_count(unzip, minis, n, start, out)
                }
            }
        }
    }
}

impl Default for UnzipPath {
    fn default() -> Self {
        Self::compile_time()
    }
}

// ---------------------------------------------------------------------------
// Whole mini arrays straight into completion summaries: the burst poller's
// mini path (`Cq::poll_burst` with a work queue whose wr_id is the reported
// `wqe_counter`, `WorkQueues::WR_ID_IS_WQE_COUNTER`). No `MiniBatch`: each
// path moves a mini's index and byte count into its summary with one byte
// shuffle (DPDK's `mlx5_rxtx_vec_*.h` idea) and adds the constant part.

/// Where the wr_id of a summary written by a [`SummaryWriter`] comes from,
/// and how its byte count is masked: one byte shuffle per shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum SummaryShape {
    /// Requester minis: `wqe_counter` in bytes 0–1.
    Requester = 0,
    /// CSUM_STRIDX, L34H_STRIDX: the stride index in bytes 2–3.
    StrideIndex = 1,
    /// FTAG_STRIDX: the stride index in bytes 2–3, a 24-bit byte count.
    FlowTag = 2,
    /// HASH, CSUM and unnamed formats: the running counter (cyclic RQ:
    /// one per completion).
    Running = 3,
}

/// How the minis of one title become summaries on the whole-array path:
/// fixed when the session opens (basic) or per compressed CQE (enhanced).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Fused {
    /// The shuffle.
    pub(crate) shape: SummaryShape,
    /// The title's CQE opcode (every summary's `opcode`).
    pub(crate) opcode: u8,
    /// `shape` × [`PLAN_OPCODES`] + `opcode`: the plan's row in a table of
    /// every plan's constants (the AVX2 writer's), computed once here
    /// rather than by each title's writer set-up.
    #[cfg_attr(
        not(all(target_arch = "x86_64", target_feature = "sse2")),
        allow(dead_code)
    )]
    pub(crate) row: u8,
}

/// A plan of [`Fused::by_opcode`] in a four-byte slot: the CQ's table of
/// plans by opcode (`Cq::plans`, looked up per title run) is then indexed
/// by a scaled index, not a multiply by three. (The slot, not [`Fused`]
/// itself, is aligned: a session's plan keeps its three bytes.)
#[derive(Clone, Copy, Debug)]
#[repr(C, align(4))]
pub(crate) struct PlanSlot(pub(crate) Option<Fused>);

/// Plans with a whole-array path: [`SummaryShape`] × the title's CQE
/// opcode, REQ (0) to RESP_SEND_INV (4) ([`Fused::new`] gives no other).
pub(crate) const PLAN_OPCODES: usize = CqeOpcode::RespSendInv.raw() as usize + 1;

impl Fused {
    /// The plan for the minis `unzip` decodes after a title of CQE opcode
    /// `opcode`: a successful requester title, or a successful responder
    /// title on a cyclic RQ. `None` for everything the general steps must
    /// see mini by mini (error and resize titles, striding-RQ responders:
    /// fillers and strides).
    #[inline(always)]
    pub(crate) fn new(unzip: Unzip, opcode: u8) -> Option<Self> {
        let shape = match unzip.kind {
            MiniKind::Req if opcode == CqeOpcode::Req.raw() => SummaryShape::Requester,
            MiniKind::Req => return None,
            _ if unzip.striding
                || !(CqeOpcode::RespWrImm.raw()..=CqeOpcode::RespSendInv.raw())
                    .contains(&opcode) =>
            {
                return None
            }
            MiniKind::Hash | MiniKind::Csum | MiniKind::ByteCnt => SummaryShape::Running,
            MiniKind::CsumStridx | MiniKind::L34hStridx => SummaryShape::StrideIndex,
            MiniKind::FtagStridx => SummaryShape::FlowTag,
        };
        Some(Self {
            shape,
            opcode,
            row: shape as u8 * PLAN_OPCODES as u8 + opcode,
        })
    }

    /// [`Self::new`] for the minis after a title of each CQE opcode (the
    /// index), on a CQ whose minis read as `view`: the plan depends on
    /// nothing else of the title.
    pub(crate) fn by_opcode(view: MiniView) -> [Option<Self>; 16] {
        core::array::from_fn(|opcode| {
            let title = Cqe64 {
                op_own: OpOwn::new().with_opcode(opcode as u8),
                ..Cqe64::default()
            };
            Self::new(Unzip::new(&title, view), opcode as u8)
        })
    }

    /// Bytes 12–15 of every summary (status SUCCESS, the opcode, origin
    /// mini; [`CompletionSummary::upper_word`]).
    #[inline(always)]
    pub(crate) const fn upper(self) -> u32 {
        CompletionSummary::upper_word(WcStatus::Success.raw() as u16, self.opcode, Origin::Mini)
    }

    /// The running counter after `len` minis from `running`: what
    /// [`MiniBatch::end_counter`] gives for [`SummaryShape::Running`] on a
    /// cyclic RQ; left alone for the other shapes, whose minis carry their
    /// own index and never read it (a new title resets it).
    #[inline(always)]
    pub(crate) const fn end_running(self, running: u16, len: u32) -> u16 {
        running.wrapping_add(len as u16 & self.run_mask())
    }

    /// All ones for [`SummaryShape::Running`] (the running counter is the
    /// wr_id), else 0: the counter's part in the summaries, branch-free.
    #[inline(always)]
    pub(crate) const fn run_mask(self) -> u16 {
        match self.shape {
            SummaryShape::Running => 0xffff,
            _ => 0,
        }
    }

    /// The summary of mini `m`, lane `lane` (scalar; the reference the
    /// vector writers must equal), as its two quadwords
    /// ([`super::mem::store_summary`]).
    #[inline(always)]
    pub(crate) fn summary_words(self, m: &MiniCqe, lane: usize, running: u16) -> (u64, u64) {
        let first = u32::from_be_bytes([m.bytes[0], m.bytes[1], m.bytes[2], m.bytes[3]]);
        let second = u32::from_be_bytes([m.bytes[4], m.bytes[5], m.bytes[6], m.bytes[7]]);
        let (wqe_counter, byte_cnt) = match self.shape {
            SummaryShape::Requester => ((first >> 16) as u16, second),
            SummaryShape::StrideIndex => (first as u16, second),
            SummaryShape::FlowTag => (first as u16, second & FLOW_TAG_BITS),
            SummaryShape::Running => (running.wrapping_add(lane as u16), second),
        };
        (
            u64::from(wqe_counter),
            u64::from(byte_cnt) | u64::from(self.upper()) << 32,
        )
    }
}

/// `pshufb` / `tbl` masks per [`SummaryShape`] (index = shape): the first
/// 16 bytes make the summary of the first mini of a 16-byte pair (bytes
/// 0–7), the last 16 that of the second (bytes 8–15). Output bytes 0–1:
/// the wr_id's low half, byte-swapped (bytes 2–7 zero); 8–11: the byte
/// count, byte-swapped; 12–15 zero (status, opcode and origin are added).
/// `0x80` selects zero (`pshufb`: high bit; `tbl`: out of range).
#[cfg_attr(
    not(any(
        all(target_arch = "x86_64", target_feature = "sse2"),
        target_arch = "aarch64"
    )),
    allow(dead_code)
)]
pub(crate) static SHAPE_MASKS: [[u8; 32]; 4] = {
    const Z: u8 = 0x80;
    /// Byte `b` of the pair's mini `half` (zero stays zero).
    const fn at(b: u8, half: usize) -> u8 {
        if b == Z {
            Z
        } else {
            b + 8 * half as u8
        }
    }
    /// The mask for wr_id bytes `w` (or zero) and count bytes `c`.
    const fn mask(w: [u8; 2], c: [u8; 4]) -> [u8; 32] {
        let mut m = [Z; 32];
        let mut half = 0;
        while half < 2 {
            let base = 16 * half;
            m[base] = at(w[0], half);
            m[base + 1] = at(w[1], half);
            let mut i = 0;
            while i < 4 {
                m[base + 8 + i] = at(c[i], half);
                i += 1;
            }
            half += 1;
        }
        m
    }
    [
        mask([1, 0], [7, 6, 5, 4]),
        mask([3, 2], [7, 6, 5, 4]),
        mask([3, 2], [7, 6, 5, Z]),
        mask([Z, Z], [7, 6, 5, 4]),
    ]
};

/// A plan's constants for the vector writers, as plain data: the shape's
/// shuffle masks ([`SHAPE_MASKS`]), the summaries' upper word
/// ([`Fused::upper`]) and the running counter's mask ([`Fused::run_mask`]).
/// The vectors are built where they are used (the writers inline into the
/// array loops, which keep them in registers).
#[cfg_attr(
    not(any(
        all(target_arch = "x86_64", target_feature = "sse2"),
        target_arch = "aarch64"
    )),
    allow(dead_code)
)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct Prepared {
    /// The shape's masks.
    pub(crate) mask: &'static [u8; 32],
    /// Status, opcode and origin.
    pub(crate) upper: u32,
    /// [`Fused::run_mask`].
    pub(crate) run_mask: u16,
}

#[cfg_attr(
    not(any(
        all(target_arch = "x86_64", target_feature = "sse2"),
        target_arch = "aarch64"
    )),
    allow(dead_code)
)]
impl Prepared {
    /// The constants of `plan`.
    #[inline(always)]
    pub(crate) fn new(plan: Fused) -> Self {
        Self {
            mask: &SHAPE_MASKS[plan.shape as usize],
            upper: plan.upper(),
            run_mask: plan.run_mask(),
        }
    }
}

/// A way to write the summaries of a whole mini array (the burst poller's
/// mini path): scalar here, SSSE3/AVX2 in `zip_x86`, NEON in `zip_neon`.
/// A value of the type is the proof that the CPU can run it (the path's
/// token), so the methods are safe.
pub(crate) trait SummaryWriter: Copy {
    /// A plan's constants as the writer keeps them (shuffle masks, the
    /// constant part of the summaries): built once per title, held in
    /// registers across its arrays.
    type Prepared: Copy;

    /// Whether the burst poller hands this writer whole runs of mini
    /// arrays and full compressed CQEs ([`Self::write_arrays`],
    /// [`Self::write_blocks`]: a pointer walk, running state in registers)
    /// rather than one at a time ([`Self::write`]). The vector writers do;
    /// for the scalar one a run's set-up costs about what it saves.
    const RUNS: bool = true;

    /// Whether the burst poller copies entries for this writer with the
    /// widest loads ([`super::mem::CqRing::copy_out`]'s `wide`: two
    /// 32-byte loads on x86-64), which only a writer compiled with AVX
    /// takes without cost; the others get four 16-byte loads.
    const WIDE_COPY: bool = false;

    /// The constants of `plan`.
    fn prepare(self, plan: Fused) -> Self::Prepared;

    /// Writes the summaries of lanes `0..L` (`L` is 7 or 8) of the mini
    /// array `copy` (the 64 bytes of a basic mini-array slot or of an
    /// enhanced compressed CQE, as copied) into `out`, by the plan `p` was
    /// prepared from: each equal to [`Fused::summary_words`] of its lane.
    /// `running` is the running counter before lane 0.
    fn write<const L: usize>(
        self,
        p: &Self::Prepared,
        copy: CqeCopy,
        running: u16,
        out: &mut [CompletionSummary; L],
    );

    /// Writes the whole mini arrays of `arrays` (eight minis each, the
    /// running counter `running` before the first) into `out`, eight
    /// summaries per array, while `out` has room for eight: each array
    /// copied once, written, then its slot and holes invalidated. Returns
    /// the number of arrays written. The same summaries as [`Self::write`]
    /// array by array; a writer may keep its running state in registers
    /// across the arrays.
    #[inline(always)]
    fn write_arrays<const S: usize>(
        self,
        p: &Self::Prepared,
        plan: Fused,
        arrays: ArrayRun<S>,
        running: u16,
        out: &mut [CompletionSummary],
    ) -> usize {
        let mut running = running;
        let mut done = 0;
        for (i, dst) in out
            .chunks_exact_mut(MINI_CQE_ARRAY_SIZE)
            .take(arrays.len())
            .enumerate()
        {
            let (Ok(dst), Some(copy)) = (dst.try_into(), arrays.copy(i, false)) else {
                break;
            };
            self.write::<MINI_CQE_ARRAY_SIZE>(p, copy, running, dst);
            arrays.invalidate(i);
            running = plan.end_running(running, MINI_CQE_ARRAY_SIZE as u32);
            done = i + 1;
        }
        done
    }

    /// [`Self::write_arrays`] for the burst poller's resume of a basic
    /// session (`Cq::basic_resume`) and the whole arrays of the sessions
    /// it walks from a title (`Cq::long_sessions`): the same summaries,
    /// invalidations and count; a writer may give this call a loop of its
    /// own.
    #[inline(always)]
    fn resume_arrays<const S: usize>(
        self,
        p: &Self::Prepared,
        plan: Fused,
        arrays: ArrayRun<S>,
        running: u16,
        out: &mut [CompletionSummary],
    ) -> usize {
        self.write_arrays::<S>(p, plan, arrays, running, out)
    }

    /// Enhanced layout: writes full compressed CQEs (seven minis each) of
    /// one title, seven summaries each, into `out` while it has room for
    /// seven: `first` (the copy of `blocks`' entry 0, owned, a full block),
    /// then the next entries of `blocks` while they are owned full blocks.
    /// Their ownership bytes are read first, one per entry, up to the room
    /// left ([`BlockRun::scan_heads`]), then one from-device barrier for
    /// them all, then each is copied once and written. `running` is the
    /// running counter before `first`'s lane 0. The same summaries as
    /// [`Self::write`] block by block.
    ///
    /// A writer may go on past the full blocks (here: not): a shorter
    /// compressed CQE right after them (the last block of a session), and,
    /// with `titles` given (the caller's copy of the title, `cur.cqe`; not
    /// on a striding RQ), each next title after a block (a plain CQE of the
    /// plan's opcode) with the compressed CQEs after it, as long as every
    /// entry has room for seven summaries and lies before
    /// the ring's end: each entry's ownership bytes read once, then the
    /// from-device barrier, then one copy; each title's summary written,
    /// its copy stored into `titles`, its running counter taken up.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn write_blocks<const S: usize>(
        self,
        p: &Self::Prepared,
        plan: Fused,
        blocks: BlockRun<S>,
        first: CqeCopy,
        running: u16,
        out: &mut [CompletionSummary],
        titles: Option<&mut Cqe64>,
    ) -> BlocksTaken {
        const B: usize = ENHANCED_MAX_MINIS;
        let _ = titles;
        let mut dsts = out.chunks_exact_mut(B);
        let Some(Ok(dst)) = dsts.next().map(<&mut [_; B]>::try_from) else {
            return BlocksTaken::none(running);
        };
        self.write::<B>(p, first, running, dst);
        let mut running = plan.end_running(running, B as u32);
        // Step 1: the ownership bytes of the entries with room after it.
        let (full, other) = blocks.scan_heads(1, out.len() / B);
        if full == 0 && !other {
            return BlocksTaken {
                taken: B,
                running,
                titled: false,
                pending: None,
            };
        }
        // Step 2: every copy below reads a body whose ownership bytes were
        // read above (PRM-FACTS §9.2, §10.5).
        crate::barrier::from_device();
        // Step 3: each full block copied once, written.
        let mut done = 1;
        for dst in out.chunks_exact_mut(B).skip(1).take(full) {
            let (Ok(dst), Some(copy)) = (<&mut [_; B]>::try_from(dst), blocks.copy(done)) else {
                break;
            };
            self.write::<B>(p, copy, running, dst);
            running = plan.end_running(running, B as u32);
            done += 1;
        }
        // The entry that ended the group, owned: copied once.
        let next = if other && done == 1 + full {
            blocks.copy(done)
        } else {
            None
        };
        BlocksTaken {
            taken: done * B,
            running,
            titled: false,
            pending: next,
        }
    }

    /// `cq.burst_loop` with this writer, out of line (compiled with the
    /// writer's target feature, so that its writes inline), on the CQ's
    /// ring of slot size `S` (looked up by the callee, `cq.burst_loop_out`:
    /// a ring passed as an argument lives on the caller's stack, and so
    /// does every use of it there).
    fn burst_loop<const M: u8, const S: usize, W: WorkQueues>(
        self,
        cq: &mut Cq,
        wqs: &mut W,
        out: &mut [CompletionSummary],
    ) -> (usize, Result<(), PollError>);

    /// `cq.long_titles` (basic layout: the sessions of more than one mini
    /// array from the title `title` at the consumer index, its ownership
    /// byte `b0`, then the title steps) with this writer, out of line
    /// (compiled with the writer's target feature, so that its writes
    /// inline); the ring looked up by the callee, as for
    /// [`Self::burst_loop`].
    fn long_titles<const S: usize, W: WorkQueues>(
        self,
        cq: &mut Cq,
        b0: u8,
        title: CqeCopy,
        out: &mut [CompletionSummary],
    ) -> (usize, Result<(), PollError>);

    /// `cq.enhanced_loop` with this writer from the entry `pending` (the
    /// copy the burst poller's resume took at the consumer index, if it
    /// took one): what the resume leaves, out of line with the writer's
    /// target feature (the vector writers; the scalar one never resumes,
    /// [`Self::RUNS`]); the ring looked up by the callee
    /// (`cq.enhanced_loop_out`), as for [`Self::burst_loop`].
    #[inline(always)]
    fn enhanced_loop<const S: usize, W: WorkQueues>(
        self,
        cq: &mut Cq,
        wqs: &mut W,
        out: &mut [CompletionSummary],
        pending: Option<CqeCopy>,
    ) -> (usize, Result<(), PollError>) {
        cq.enhanced_loop_out::<S, W, Self>(self, wqs, out, pending)
    }
}

/// What [`SummaryWriter::write_blocks`] took from the ring.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BlocksTaken {
    /// Entries consumed from the run's first on, one summary written per
    /// entry (a compressed CQE stands for as many entries as minis; a
    /// title is one).
    pub(crate) taken: usize,
    /// The running counter after them.
    pub(crate) running: u16,
    /// Whether a title was taken (the last one is in the writer's `titles`
    /// copy): the caller commits it.
    pub(crate) titled: bool,
    /// The owned entry after them, copied (after its ownership bytes and
    /// the barrier), not taken: for the caller's steps.
    pub(crate) pending: Option<CqeCopy>,
}

impl BlocksTaken {
    /// Nothing taken.
    #[inline(always)]
    pub(crate) const fn none(running: u16) -> Self {
        Self {
            taken: 0,
            running,
            titled: false,
            pending: None,
        }
    }
}

/// The scalar [`SummaryWriter`] (any CPU).
#[derive(Clone, Copy, Debug)]
pub(crate) struct ScalarWriter;

impl SummaryWriter for ScalarWriter {
    type Prepared = Fused;

    const RUNS: bool = false;

    #[inline(always)]
    fn prepare(self, plan: Fused) -> Fused {
        plan
    }

    #[inline(always)]
    fn write<const L: usize>(
        self,
        plan: &Fused,
        copy: CqeCopy,
        running: u16,
        out: &mut [CompletionSummary; L],
    ) {
        let minis = copy.to_minis().minis;
        for (lane, (slot, m)) in out.iter_mut().zip(&minis).enumerate() {
            let (wr_id, hi) = plan.summary_words(m, lane, running);
            store_summary(slot, wr_id, hi);
        }
    }

    #[inline(never)]
    fn burst_loop<const M: u8, const S: usize, W: WorkQueues>(
        self,
        cq: &mut Cq,
        wqs: &mut W,
        out: &mut [CompletionSummary],
    ) -> (usize, Result<(), PollError>) {
        cq.burst_loop_out::<M, S, W, Self>(self, wqs, out)
    }

    #[inline(never)]
    fn long_titles<const S: usize, W: WorkQueues>(
        self,
        cq: &mut Cq,
        b0: u8,
        title: CqeCopy,
        out: &mut [CompletionSummary],
    ) -> (usize, Result<(), PollError>) {
        cq.long_titles::<S, W, Self>(self, b0, title, out)
    }
}

/// [`expand_session`] through the batched decoder `path`: decodes the
/// minis eight at a time and stores each completion from the batch. Same
/// contract and, bit for bit, the same result.
pub fn expand_session_with(
    path: UnzipPath,
    title: &Cqe64,
    minis: &[MiniCqe],
    view: MiniView,
    start: u16,
    out: &mut [Cqe64],
) -> u16 {
    let unzip = Unzip::new(title, view);
    let template = template(title);
    let mut batch = MiniBatch::new(title);
    let mut running = start;
    let n = minis.len().min(out.len());
    for (chunk, dst) in minis[..n]
        .chunks(MINI_CQE_ARRAY_SIZE)
        .zip(out[..n].chunks_mut(MINI_CQE_ARRAY_SIZE))
    {
        let mut array = [MiniCqe::default(); MINI_CQE_ARRAY_SIZE];
        array[..chunk.len()].copy_from_slice(chunk);
        let next = path.decode_count(unzip, &array, chunk.len(), running, &mut batch);
        for (i, slot) in dst.iter_mut().enumerate() {
            *slot = batch.cqe(&template, i);
        }
        running = next;
    }
    running
}

/// Random sessions for the property tests of every path (seeded xorshift:
/// reproducible, no dependencies).
#[cfg(test)]
pub(crate) mod prop {
    use super::*;
    use crate::prm::OpOwn;

    /// Tiny deterministic generator.
    pub(crate) struct XorShift(pub(crate) u64);

    impl XorShift {
        pub(crate) fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        pub(crate) fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }

        pub(crate) fn bytes<const N: usize>(&mut self) -> [u8; N] {
            let mut b = [0u8; N];
            for chunk in b.chunks_mut(8) {
                let r = self.next().to_le_bytes();
                chunk.copy_from_slice(&r[..chunk.len()]);
            }
            b
        }
    }

    /// Every responder format, one unnamed value included.
    pub(crate) const FORMATS: [MiniCqeFormat; 6] = [
        MiniCqeFormat::Hash,
        MiniCqeFormat::Csum,
        MiniCqeFormat::FtagStridx,
        MiniCqeFormat::CsumStridx,
        MiniCqeFormat::L34hStridx,
        MiniCqeFormat::Unknown(6),
    ];

    /// A random title: random bytes, a requester or responder opcode.
    pub(crate) fn title(rng: &mut XorShift) -> Cqe64 {
        let mut t: Cqe64 = zerocopy::transmute!(rng.bytes::<64>());
        let opcodes = [
            CqeOpcode::Req,
            CqeOpcode::RespSend,
            CqeOpcode::RespSendImm,
            CqeOpcode::RespWrImm,
            CqeOpcode::RespSendInv,
        ];
        let op = opcodes[rng.below(opcodes.len() as u64) as usize];
        t.op_own = OpOwn::from_bits(t.op_own.into_bits()).with_opcode(op.raw());
        t
    }

    /// Random session parameters.
    pub(crate) fn view(rng: &mut XorShift) -> MiniView {
        MiniView {
            format: FORMATS[rng.below(FORMATS.len() as u64) as usize],
            striding: rng.next() & 1 == 1,
        }
    }

    /// Random minis.
    pub(crate) fn minis(rng: &mut XorShift, n: usize) -> std::vec::Vec<MiniCqe> {
        (0..n).map(|_| MiniCqe { bytes: rng.bytes() }).collect()
    }

    /// The whole-array writer `d` against the reference: for random titles,
    /// formats, mini arrays and running counters, the summaries it writes
    /// (eight and seven lanes) equal those of the scalar decoder's
    /// [`MiniBatch`] (`wqe_counter` as the wr_id, `byte_cnt`, success, the
    /// title's opcode, origin mini), lane by lane. Returns the number of
    /// arrays checked.
    pub(crate) fn check_writer<D: SummaryWriter>(d: D, seed: u64, rounds: usize) -> usize {
        let mut rng = XorShift(seed);
        let mut checked = 0;
        for round in 0..rounds {
            let title = title(&mut rng);
            let view = view(&mut rng);
            let unzip = Unzip::new(&title, view);
            let opcode = title.op_own.opcode();
            let Some(plan) = Fused::new(unzip, opcode) else {
                continue;
            };
            let bytes = rng.bytes::<64>();
            let running = rng.next() as u16;
            let array: [MiniCqe; MINI_CQE_ARRAY_SIZE] = zerocopy::transmute!(bytes);
            let mut batch = MiniBatch::new(&title);
            decode_scalar(unzip, &array, running, &mut batch);
            let want: [CompletionSummary; MINI_CQE_ARRAY_SIZE] = core::array::from_fn(|l| {
                CompletionSummary::new(
                    u64::from(batch.wqe_counter[l]),
                    batch.byte_cnt[l],
                    WcStatus::Success,
                    opcode,
                    Origin::Mini,
                )
            });
            let p = d.prepare(plan);
            let mut got8 = [CompletionSummary::default(); 8];
            d.write(&p, CqeCopy::from_bytes(&bytes), running, &mut got8);
            assert_eq!(got8, want, "round {round} {plan:?} {view:?}");
            let mut got7 = [CompletionSummary::default(); 7];
            d.write(&p, CqeCopy::from_bytes(&bytes), running, &mut got7);
            assert_eq!(got7[..], want[..7], "round {round} {plan:?} {view:?} (7)");
            if plan.shape == SummaryShape::Running {
                assert_eq!(
                    plan.end_running(running, 8),
                    batch.end_counter(unzip, 8, running),
                    "round {round} {plan:?}"
                );
            }
            checked += 1;
        }
        checked
    }

    /// `path` against the scalar decoder (every lane, every field) and
    /// against the reference [`expand_session`] over whole sessions of 1 to
    /// `max_len` minis. Returns the number of minis checked.
    pub(crate) fn check_path(path: UnzipPath, seed: u64, rounds: usize, max_len: usize) -> usize {
        let mut rng = XorShift(seed);
        let mut checked = 0;
        for round in 0..rounds {
            let title = title(&mut rng);
            let view = view(&mut rng);
            let unzip = Unzip::new(&title, view);
            let start = rng.next() as u16;

            // One array, every lane.
            let array: [MiniCqe; MINI_CQE_ARRAY_SIZE] = zerocopy::transmute!(rng.bytes::<64>());
            let (mut want, mut got) = (MiniBatch::new(&title), MiniBatch::new(&title));
            decode_scalar(unzip, &array, start, &mut want);
            path.decode(unzip, &array, start, &mut got);
            assert_eq!(got, want, "{} round {round} {unzip:?}", path.name());
            for n in 1..=MINI_CQE_ARRAY_SIZE {
                assert_eq!(
                    got.end_counter(unzip, n, start),
                    want.end_counter(unzip, n, start),
                    "{} round {round} n {n}",
                    path.name()
                );
                // The first `n` lanes alone, from a batch holding the
                // previous array's lanes (those from `n` on are unspecified).
                let mut short = got;
                let stale: [MiniCqe; MINI_CQE_ARRAY_SIZE] = zerocopy::transmute!(rng.bytes::<64>());
                decode_scalar(unzip, &stale, start ^ 0x5a5a, &mut short);
                let mut scalar = short;
                let end = decode_scalar_count(unzip, &array, n, start, &mut scalar);
                assert_eq!(scalar, want, "scalar count round {round} n {n} {unzip:?}");
                assert_eq!(end, want.end_counter(unzip, n, start), "scalar count n {n}");
                let end = path.decode_count(unzip, &array, n, start, &mut short);
                assert_eq!(
                    end,
                    want.end_counter(unzip, n, start),
                    "{} round {round} decode_count n {n}",
                    path.name()
                );
                assert_eq!(
                    (
                        &short.byte_cnt[..n],
                        &short.rss_hash_result[..n],
                        &short.sop_drop_qpn[..n],
                        &short.check_sum[..n],
                        &short.wqe_counter[..n],
                        &short.l4_l3_hdr_type[..n],
                    ),
                    (
                        &want.byte_cnt[..n],
                        &want.rss_hash_result[..n],
                        &want.sop_drop_qpn[..n],
                        &want.check_sum[..n],
                        &want.wqe_counter[..n],
                        &want.l4_l3_hdr_type[..n],
                    ),
                    "{} round {round} decode_count n {n} {unzip:?}",
                    path.name()
                );
            }

            // A whole session against the reference, lengths 1..=max_len
            // (the short ones more often).
            let len = if round % 4 == 0 {
                1 + rng.below(max_len as u64) as usize
            } else {
                1 + rng.below(2 * MINI_CQE_ARRAY_SIZE as u64 + 2) as usize
            };
            let minis = minis(&mut rng, len);
            let mut want = std::vec![Cqe64::default(); len];
            let mut got = std::vec![Cqe64::default(); len];
            let end_want = expand_session(&title, &minis, view, start, &mut want);
            let end_got = expand_session_with(path, &title, &minis, view, start, &mut got);
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                assert_eq!(
                    g,
                    w,
                    "{} round {round} {view:?} mini {i}/{len}",
                    path.name()
                );
            }
            assert_eq!(end_got, end_want, "{} round {round} end", path.name());
            checked += MINI_CQE_ARRAY_SIZE + len;
        }
        checked
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prm::{Be32, CqeFormat};

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
    fn scalar_writer_matches_the_decoder() {
        let rounds = if cfg!(miri) { 64 } else { 20_000 };
        let n = prop::check_writer(ScalarWriter, 0x5eed_0f5e, rounds);
        std::eprintln!("scalar writer: {n} arrays checked");
    }

    #[test]
    fn scalar_batches_match_the_reference() {
        let rounds = if cfg!(miri) { 8 } else { 20_000 };
        let n = prop::check_path(UnzipPath::Scalar, 0x5eed_5ca1, rounds, 512);
        std::eprintln!("scalar: {n} minis checked");
    }

    #[test]
    fn batch_cqe_equals_expand_for_each_kind() {
        // One hand-made array per kind; lanes beyond n are not compared.
        let mut t = title_resp();
        t.sop_drop_qpn = t.sop_drop_qpn.with_sop(0x77);
        let minis: [MiniCqe; 8] = core::array::from_fn(|i| {
            mini([0x25, 0x56, 0, i as u8, 0x12, 0x01 + i as u8, 0x02, 0x40])
        });
        for format in prop::FORMATS {
            for striding in [false, true] {
                let view = MiniView { format, striding };
                let unzip = Unzip::new(&t, view);
                let mut batch = MiniBatch::new(&t);
                decode_scalar(unzip, &minis, 10, &mut batch);
                let mut running = 10;
                for (i, m) in minis.iter().enumerate() {
                    let (want, next) = expand(&t, m, view, running);
                    assert_eq!(batch.cqe(&template(&t), i), want, "{view:?} lane {i}");
                    assert_eq!(batch.end_counter(unzip, i + 1, 10), next, "{view:?}");
                    running = next;
                }
            }
        }
    }

    #[test]
    fn default_path_is_the_compile_time_one() {
        assert_eq!(UnzipPath::default(), UnzipPath::compile_time());
        #[cfg(all(target_arch = "x86_64", target_feature = "avx2"))]
        assert_eq!(UnzipPath::compile_time().name(), "avx2");
        #[cfg(all(target_arch = "aarch64", target_feature = "neon"))]
        assert_eq!(UnzipPath::compile_time().name(), "neon");
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
