//! Checks `mlx5dp::prm` against the C headers rdma-core installs
//! (`/usr/include/infiniband/mlx5dv.h`, `<infiniband/verbs.h>`, Debian's
//! libibverbs-dev).
//!
//! A small C probe is generated, compiled with `gcc` and run. It prints
//! `sizeof`/`offsetof` of every wire struct mlx5dv.h shares with us, the
//! value of every shared constant, the bytes that mlx5dv.h's own inline
//! writers (`mlx5dv_set_ctrl_seg`, `mlx5dv_set_data_seg`,
//! `mlx5dv_set_dgram_seg`, `mlx5dv_set_eth_seg`) produce, what its CQE getters
//! read from every `op_own` byte, and - when libibverbs links - the text of
//! `ibv_wc_status_str`. Everything is compared with the Rust side, and the
//! header is scanned so that a shared symbol or struct this test does not
//! know fails it.
//!
//! Without the header the test fails if `MLX5DP_REQUIRE_C_HEADERS=1`, and
//! otherwise prints `SKIPPED: ...` to stderr and passes.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};

use mlx5dp::prm::*;
use mlx5dp_tests::tsv;
use zerocopy::{FromZeros, IntoBytes};

const MLX5DV_H: &str = "/usr/include/infiniband/mlx5dv.h";
const VERBS_H: &str = "/usr/include/infiniband/verbs.h";

// ---------------------------------------------------------------------------
// The Rust side of the struct layouts.

/// One C struct member and where the Rust side puts the same bytes.
struct Member {
    c_struct: &'static str,
    /// Member designator as `offsetof` takes it (`key.qkey.qkey`).
    c_member: &'static str,
    /// The Rust field(s) it corresponds to, for messages.
    rust: String,
    offset: usize,
    size: usize,
}

/// Offset and size of a Rust field.
macro_rules! rust_field {
    ($ty:ident, $f:ident) => {
        (
            core::mem::offset_of!($ty, $f),
            core::mem::size_of_val(&<$ty as FromZeros>::new_zeroed().$f),
        )
    };
}

/// C member == one Rust field.
macro_rules! same {
    ($v:ident, $cs:literal, $cm:literal, $ty:ident . $f:ident) => {{
        let (offset, size) = rust_field!($ty, $f);
        $v.push(Member {
            c_struct: $cs,
            c_member: $cm,
            rust: format!("{}.{}", stringify!($ty), stringify!($f)),
            offset,
            size,
        });
    }};
}

/// C member == the contiguous Rust fields `first..=last`.
macro_rules! span {
    ($v:ident, $cs:literal, $cm:literal, $ty:ident . $first:ident ..= $last:ident) => {{
        let (offset, _) = rust_field!($ty, $first);
        let (last_off, last_size) = rust_field!($ty, $last);
        $v.push(Member {
            c_struct: $cs,
            c_member: $cm,
            rust: format!(
                "{}.{}..={}",
                stringify!($ty),
                stringify!($first),
                stringify!($last)
            ),
            offset,
            size: last_off + last_size - offset,
        });
    }};
}

fn members() -> Vec<Member> {
    let mut v = Vec::new();
    same!(
        v,
        "mlx5_wqe_ctrl_seg",
        "opmod_idx_opcode",
        CtrlSeg.opmod_idx_opcode
    );
    same!(v, "mlx5_wqe_ctrl_seg", "qpn_ds", CtrlSeg.qpn_ds);
    same!(v, "mlx5_wqe_ctrl_seg", "signature", CtrlSeg.signature);
    same!(
        v,
        "mlx5_wqe_ctrl_seg",
        "dci_stream_channel_id",
        CtrlSeg.dci_stream_channel_id
    );
    same!(v, "mlx5_wqe_ctrl_seg", "fm_ce_se", CtrlSeg.fm_ce_se);
    same!(v, "mlx5_wqe_ctrl_seg", "imm", CtrlSeg.imm);

    same!(v, "mlx5_wqe_data_seg", "byte_count", DataSeg.byte_count);
    same!(v, "mlx5_wqe_data_seg", "lkey", DataSeg.lkey);
    same!(v, "mlx5_wqe_data_seg", "addr", DataSeg.addr);

    same!(v, "mlx5_wqe_raddr_seg", "raddr", RaddrSeg.raddr);
    same!(v, "mlx5_wqe_raddr_seg", "rkey", RaddrSeg.rkey);
    same!(v, "mlx5_wqe_raddr_seg", "reserved", RaddrSeg.reserved);

    same!(v, "mlx5_wqe_atomic_seg", "swap_add", AtomicSeg.swap_add);
    same!(v, "mlx5_wqe_atomic_seg", "compare", AtomicSeg.compare);

    span!(v, "mlx5_wqe_av", "key", Av.qkey..=key_reserved);
    same!(v, "mlx5_wqe_av", "key.qkey.qkey", Av.qkey);
    same!(v, "mlx5_wqe_av", "key.qkey.reserved", Av.key_reserved);
    span!(v, "mlx5_wqe_av", "key.dc_key", Av.qkey..=key_reserved);
    same!(v, "mlx5_wqe_av", "dqp_dct", Av.dqp_dct);
    same!(v, "mlx5_wqe_av", "stat_rate_sl", Av.stat_rate_sl);
    same!(v, "mlx5_wqe_av", "fl_mlid", Av.fl_mlid);
    same!(v, "mlx5_wqe_av", "rlid", Av.rlid);
    same!(v, "mlx5_wqe_av", "reserved0", Av.reserved0);
    same!(v, "mlx5_wqe_av", "rmac", Av.rmac);
    same!(v, "mlx5_wqe_av", "tclass", Av.tclass);
    same!(v, "mlx5_wqe_av", "hop_limit", Av.hop_limit);
    same!(v, "mlx5_wqe_av", "grh_gid_fl", Av.grh_gid_fl);
    same!(v, "mlx5_wqe_av", "rgid", Av.rgid);
    span!(v, "mlx5_wqe_datagram_seg", "av", Av.qkey..=rgid);

    same!(
        v,
        "mlx5_wqe_inl_data_seg",
        "byte_count",
        InlineSeg.byte_count
    );

    // rdma-core names bytes 0-3 rsvd0, byte 5 rsvd1, bytes 8-11 rsvd2, and
    // appends 16 bytes of inline header (the next DS) that EthSeg leaves out.
    span!(
        v,
        "mlx5_wqe_eth_seg",
        "rsvd0",
        EthSeg.swp_outer_l4_offset..=swp_inner_l3_offset
    );
    same!(v, "mlx5_wqe_eth_seg", "cs_flags", EthSeg.cs_flags);
    same!(v, "mlx5_wqe_eth_seg", "rsvd1", EthSeg.swp_flags);
    same!(v, "mlx5_wqe_eth_seg", "mss", EthSeg.mss);
    same!(v, "mlx5_wqe_eth_seg", "rsvd2", EthSeg.flow_table_metadata);
    same!(v, "mlx5_wqe_eth_seg", "inline_hdr_sz", EthSeg.inline_hdr_sz);
    same!(
        v,
        "mlx5_wqe_eth_seg",
        "inline_hdr_start",
        EthSeg.inline_hdr_start
    );
    v.push(Member {
        c_struct: "mlx5_wqe_eth_seg",
        c_member: "inline_hdr",
        rust: "the 16-byte unit after EthSeg (inline header continuation)".to_owned(),
        offset: EthSeg::SIZE,
        size: SEND_WQE_DS,
    });

    same!(v, "mlx5_wqe_umr_ctrl_seg", "flags", UmrCtrlSeg.flags);
    same!(v, "mlx5_wqe_umr_ctrl_seg", "rsvd0", UmrCtrlSeg.rsvd0);
    same!(
        v,
        "mlx5_wqe_umr_ctrl_seg",
        "klm_octowords",
        UmrCtrlSeg.klm_octowords
    );
    same!(
        v,
        "mlx5_wqe_umr_ctrl_seg",
        "translation_offset",
        UmrCtrlSeg.translation_offset
    );
    same!(
        v,
        "mlx5_wqe_umr_ctrl_seg",
        "bsf_octowords",
        UmrCtrlSeg.translation_offset
    );
    same!(
        v,
        "mlx5_wqe_umr_ctrl_seg",
        "mkey_mask",
        UmrCtrlSeg.mkey_mask
    );
    same!(v, "mlx5_wqe_umr_ctrl_seg", "rsvd1", UmrCtrlSeg.rsvd1);

    same!(v, "mlx5_wqe_mkey_context_seg", "free", MkeyContextSeg.free);
    same!(
        v,
        "mlx5_wqe_mkey_context_seg",
        "reserved1",
        MkeyContextSeg.reserved1
    );
    same!(
        v,
        "mlx5_wqe_mkey_context_seg",
        "access_flags",
        MkeyContextSeg.access_flags
    );
    same!(v, "mlx5_wqe_mkey_context_seg", "sf", MkeyContextSeg.sf);
    same!(
        v,
        "mlx5_wqe_mkey_context_seg",
        "qpn_mkey",
        MkeyContextSeg.qpn_mkey
    );
    same!(
        v,
        "mlx5_wqe_mkey_context_seg",
        "reserved2",
        MkeyContextSeg.reserved2
    );
    same!(
        v,
        "mlx5_wqe_mkey_context_seg",
        "flags_pd",
        MkeyContextSeg.flags_pd
    );
    same!(
        v,
        "mlx5_wqe_mkey_context_seg",
        "start_addr",
        MkeyContextSeg.start_addr
    );
    same!(v, "mlx5_wqe_mkey_context_seg", "len", MkeyContextSeg.len);
    same!(
        v,
        "mlx5_wqe_mkey_context_seg",
        "bsf_octword_size",
        MkeyContextSeg.bsf_octword_size
    );
    same!(
        v,
        "mlx5_wqe_mkey_context_seg",
        "reserved3",
        MkeyContextSeg.reserved3
    );
    same!(
        v,
        "mlx5_wqe_mkey_context_seg",
        "translations_octword_size",
        MkeyContextSeg.translations_octword_size
    );
    same!(
        v,
        "mlx5_wqe_mkey_context_seg",
        "reserved4",
        MkeyContextSeg.reserved4
    );
    same!(
        v,
        "mlx5_wqe_mkey_context_seg",
        "log_page_size",
        MkeyContextSeg.log_page_size
    );
    same!(
        v,
        "mlx5_wqe_mkey_context_seg",
        "reserved",
        MkeyContextSeg.reserved
    );

    same!(
        v,
        "mlx5_wqe_umr_klm_seg",
        "byte_count",
        UmrKlmSeg.byte_count
    );
    same!(v, "mlx5_wqe_umr_klm_seg", "mkey", UmrKlmSeg.mkey);
    same!(v, "mlx5_wqe_umr_klm_seg", "address", UmrKlmSeg.address);

    same!(v, "mlx5_wqe_srq_next_seg", "rsvd0", SrqNextSeg.rsvd0);
    same!(
        v,
        "mlx5_wqe_srq_next_seg",
        "next_wqe_index",
        SrqNextSeg.next_wqe_index
    );
    same!(
        v,
        "mlx5_wqe_srq_next_seg",
        "signature",
        SrqNextSeg.signature
    );
    same!(v, "mlx5_wqe_srq_next_seg", "rsvd1", SrqNextSeg.rsvd1);

    same!(v, "mlx5_mprq_wqe", "nseg", MprqWqe.nseg);
    same!(v, "mlx5_mprq_wqe", "dseg", MprqWqe.dseg);

    span!(v, "mlx5_cqe64", "rsvd0", Cqe64.pkt_info..=rsvd1);
    same!(v, "mlx5_cqe64", "wqe_id", Cqe64.wqe_id);
    span!(
        v,
        "mlx5_cqe64",
        "rsvd4",
        Cqe64.lro_tcppsh_abort_dupack..=rss_hash_type
    );
    same!(v, "mlx5_cqe64", "ml_path", Cqe64.ml_path);
    span!(v, "mlx5_cqe64", "rsvd20", Cqe64.rsvd18..=check_sum);
    same!(v, "mlx5_cqe64", "slid", Cqe64.slid);
    same!(v, "mlx5_cqe64", "flags_rqpn", Cqe64.flags_rqpn);
    same!(v, "mlx5_cqe64", "hds_ip_ext", Cqe64.hds_ip_ext);
    same!(v, "mlx5_cqe64", "l4_hdr_type_etc", Cqe64.l4_l3_hdr_type);
    same!(v, "mlx5_cqe64", "vlan_info", Cqe64.vlan_info);
    same!(v, "mlx5_cqe64", "srqn_uidx", Cqe64.srqn_uidx);
    same!(v, "mlx5_cqe64", "imm_inval_pkey", Cqe64.imm_inval_pkey);
    same!(v, "mlx5_cqe64", "app", Cqe64.app);
    same!(v, "mlx5_cqe64", "app_op", Cqe64.app_op);
    same!(v, "mlx5_cqe64", "app_info", Cqe64.app_info);
    same!(v, "mlx5_cqe64", "byte_cnt", Cqe64.byte_cnt);
    same!(v, "mlx5_cqe64", "timestamp", Cqe64.timestamp);
    same!(v, "mlx5_cqe64", "sop_drop_qpn", Cqe64.sop_drop_qpn);
    same!(v, "mlx5_cqe64", "wqe_counter", Cqe64.wqe_counter);
    same!(v, "mlx5_cqe64", "signature", Cqe64.signature);
    same!(v, "mlx5_cqe64", "op_own", Cqe64.op_own);

    span!(v, "mlx5_err_cqe", "rsvd0", ErrCqe.rsvd0..=rsvd22);
    same!(v, "mlx5_err_cqe", "srqn", ErrCqe.srqn);
    span!(v, "mlx5_err_cqe", "rsvd1", ErrCqe.rsvd36..=hw_synd_type);
    same!(v, "mlx5_err_cqe", "vendor_err_synd", ErrCqe.vendor_err_synd);
    same!(v, "mlx5_err_cqe", "syndrome", ErrCqe.syndrome);
    same!(
        v,
        "mlx5_err_cqe",
        "s_wqe_opcode_qpn",
        ErrCqe.s_wqe_opcode_qpn
    );
    same!(v, "mlx5_err_cqe", "wqe_counter", ErrCqe.wqe_counter);
    same!(v, "mlx5_err_cqe", "signature", ErrCqe.signature);
    same!(v, "mlx5_err_cqe", "op_own", ErrCqe.op_own);
    v
}

/// `(C struct, expected sizeof, Rust type)`.
fn struct_sizes() -> Vec<(&'static str, usize, &'static str)> {
    vec![
        ("mlx5_wqe_ctrl_seg", CtrlSeg::SIZE, "CtrlSeg"),
        ("mlx5_wqe_data_seg", DataSeg::SIZE, "DataSeg"),
        ("mlx5_wqe_raddr_seg", RaddrSeg::SIZE, "RaddrSeg"),
        ("mlx5_wqe_atomic_seg", AtomicSeg::SIZE, "AtomicSeg"),
        ("mlx5_wqe_av", Av::SIZE, "Av"),
        ("mlx5_wqe_datagram_seg", Av::SIZE, "Av"),
        ("mlx5_wqe_inl_data_seg", InlineSeg::SIZE, "InlineSeg"),
        (
            "mlx5_wqe_eth_seg",
            EthSeg::SIZE + SEND_WQE_DS,
            "EthSeg + 16 bytes of inline header",
        ),
        ("mlx5_wqe_umr_ctrl_seg", UmrCtrlSeg::SIZE, "UmrCtrlSeg"),
        ("mlx5_wqe_umr_klm_seg", UmrKlmSeg::SIZE, "UmrKlmSeg"),
        (
            "mlx5_wqe_mkey_context_seg",
            MkeyContextSeg::SIZE,
            "MkeyContextSeg",
        ),
        ("mlx5_wqe_srq_next_seg", SrqNextSeg::SIZE, "SrqNextSeg"),
        ("mlx5_mprq_wqe", MprqWqe::SIZE, "MprqWqe"),
        ("mlx5_cqe64", Cqe64::SIZE, "Cqe64"),
        ("mlx5_err_cqe", ErrCqe::SIZE, "ErrCqe"),
    ]
}

/// Wire structs of mlx5dv.h this crate does not model (yet), with the reason.
const NOT_MODELLED_STRUCTS: &[(&str, &str)] = &[
    ("mlx5_tm_cqe", "tag-matching view of CQE bytes 0-17"),
    ("mlx5_wqe_tm_seg", "tag-matching segment"),
    (
        "mlx5_wqe_umr_klm_seg",
        "UMR translation (libmlx5's memory-window binds)",
    ),
    ("mlx5_wqe_umr_inline_seg", "UMR"),
    ("mlx5_wqe_umr_repeat_ent_seg", "UMR"),
    ("mlx5_wqe_umr_repeat_block_seg", "UMR"),
];

// ---------------------------------------------------------------------------
// The Rust side of the constants.

trait ToU64 {
    fn to_u64(self) -> u64;
}

macro_rules! to_u64_from {
    ($($t:ty),*) => {$(
        impl ToU64 for $t {
            fn to_u64(self) -> u64 {
                u64::from(self)
            }
        }
    )*};
}
to_u64_from!(u8, u16, u32, u64);

impl ToU64 for usize {
    fn to_u64(self) -> u64 {
        u64::try_from(self).expect("usize fits in u64")
    }
}

/// The single rdma-core mask bit that `from_mlx5dv_mask` maps to `f`.
fn mlx5dv_mask_bit(f: MiniCqeFormat) -> u64 {
    let bits: Vec<u64> = (0u8..=255)
        .filter(|b| MiniCqeFormat::from_mlx5dv_mask(*b) == Some(f))
        .map(u64::from)
        .collect();
    match bits.as_slice() {
        [one] => *one,
        _ => u64::MAX,
    }
}

/// `(C name, [(Rust expression, value)])`: every Rust expression must equal
/// the C value.
type Constants = Vec<(&'static str, Vec<(&'static str, u64)>)>;

macro_rules! c {
    ($v:ident; $($name:ident => $($e:expr),+;)*) => {$(
        $v.push((stringify!($name), vec![$((stringify!($e), ToU64::to_u64($e))),+]));
    )*};
}

fn constants() -> Constants {
    let mut v = Vec::new();
    c! { v;
        MLX5_OPCODE_NOP => SendOpcode::Nop.raw();
        MLX5_OPCODE_SEND_INVAL => SendOpcode::SendInval.raw();
        MLX5_OPCODE_RDMA_WRITE => SendOpcode::RdmaWrite.raw();
        MLX5_OPCODE_RDMA_WRITE_IMM => SendOpcode::RdmaWriteImm.raw();
        MLX5_OPCODE_SEND => SendOpcode::Send.raw();
        MLX5_OPCODE_SEND_IMM => SendOpcode::SendImm.raw();
        MLX5_OPCODE_TSO => SendOpcode::Tso.raw();
        MLX5_OPCODE_RDMA_READ => SendOpcode::RdmaRead.raw();
        MLX5_OPCODE_ATOMIC_CS => SendOpcode::AtomicCs.raw();
        MLX5_OPCODE_ATOMIC_FA => SendOpcode::AtomicFa.raw();
        MLX5_OPCODE_ATOMIC_MASKED_CS => SendOpcode::AtomicMaskedCs.raw();
        MLX5_OPCODE_ATOMIC_MASKED_FA => SendOpcode::AtomicMaskedFa.raw();
        MLX5_OPCODE_FMR => SendOpcode::Fmr.raw();
        MLX5_OPCODE_LOCAL_INVAL => SendOpcode::LocalInval.raw();
        MLX5_OPCODE_CONFIG_CMD => SendOpcode::ConfigCmd.raw();
        MLX5_OPCODE_SET_PSV => SendOpcode::SetPsv.raw();
        MLX5_OPCODE_UMR => SendOpcode::Umr.raw();
        MLX5_WQE_UMR_CTRL_FLAG_INLINE => umr::CTRL_FLAG_INLINE;
        MLX5_WQE_UMR_CTRL_FLAG_CHECK_FREE => umr::CTRL_FLAG_CHECK_FREE;
        MLX5_WQE_UMR_CTRL_FLAG_TRNSLATION_OFFSET => umr::CTRL_FLAG_TRANSLATION_OFFSET;
        MLX5_WQE_UMR_CTRL_FLAG_CHECK_QPN => umr::CTRL_FLAG_CHECK_QPN;
        MLX5_WQE_UMR_CTRL_MKEY_MASK_LEN => umr::MKEY_MASK_LEN;
        MLX5_WQE_UMR_CTRL_MKEY_MASK_START_ADDR => umr::MKEY_MASK_START_ADDR;
        MLX5_WQE_UMR_CTRL_MKEY_MASK_SIG_ERR => umr::MKEY_MASK_SIG_ERR;
        MLX5_WQE_UMR_CTRL_MKEY_MASK_BSF_ENABLE => umr::MKEY_MASK_BSF_ENABLE;
        MLX5_WQE_UMR_CTRL_MKEY_MASK_MKEY => umr::MKEY_MASK_MKEY;
        MLX5_WQE_UMR_CTRL_MKEY_MASK_QPN => umr::MKEY_MASK_QPN;
        MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_LOCAL_WRITE => umr::MKEY_MASK_ACCESS_LOCAL_WRITE;
        MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_REMOTE_READ => umr::MKEY_MASK_ACCESS_REMOTE_READ;
        MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_REMOTE_WRITE => umr::MKEY_MASK_ACCESS_REMOTE_WRITE;
        MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_ATOMIC => umr::MKEY_MASK_ACCESS_ATOMIC;
        MLX5_WQE_UMR_CTRL_MKEY_MASK_FREE => umr::MKEY_MASK_FREE;
        MLX5_WQE_MKEY_CONTEXT_FREE => umr::MKEY_CONTEXT_FREE;
        MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_ATOMIC => umr::ACCESS_ATOMIC;
        MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_REMOTE_WRITE => umr::ACCESS_REMOTE_WRITE;
        MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_REMOTE_READ => umr::ACCESS_REMOTE_READ;
        MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_LOCAL_WRITE => umr::ACCESS_LOCAL_WRITE;
        MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_LOCAL_READ => umr::ACCESS_LOCAL_READ;
        MLX5_OPCODE_TAG_MATCHING => SendOpcode::TagMatching.raw();
        MLX5_OPCODE_FLOW_TBL_ACCESS => SendOpcode::FlowTblAccess.raw();
        MLX5_OPCODE_MMO => SendOpcode::Mmo.raw();

        MLX5_INLINE_SCATTER_32 => OpOwn::new().with_format(CqeFormat::InlineScatter32.raw()).into_bits();
        MLX5_INLINE_SCATTER_64 => OpOwn::new().with_format(CqeFormat::InlineScatter64.raw()).into_bits();

        MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR => Syndrome::LocalLength.raw();
        MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR => Syndrome::LocalQpOp.raw();
        MLX5_CQE_SYNDROME_LOCAL_PROT_ERR => Syndrome::LocalProt.raw();
        MLX5_CQE_SYNDROME_WR_FLUSH_ERR => Syndrome::WrFlush.raw();
        MLX5_CQE_SYNDROME_MW_BIND_ERR => Syndrome::MwBind.raw();
        MLX5_CQE_SYNDROME_BAD_RESP_ERR => Syndrome::BadResp.raw();
        MLX5_CQE_SYNDROME_LOCAL_ACCESS_ERR => Syndrome::LocalAccess.raw();
        MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR => Syndrome::RemoteInvalReq.raw();
        MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR => Syndrome::RemoteAccess.raw();
        MLX5_CQE_SYNDROME_REMOTE_OP_ERR => Syndrome::RemoteOp.raw();
        MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR => Syndrome::TransportRetryExc.raw();
        MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR => Syndrome::RnrRetryExc.raw();
        MLX5_CQE_SYNDROME_REMOTE_ABORTED_ERR => Syndrome::RemoteAborted.raw();
        MLX5_CQE_VENDOR_SYNDROME_ODP_PFAULT => VENDOR_SYNDROME_ODP_PFAULT;

        MLX5_CQE_L2_OK => HdsIpExt::new().with_l2_ok(true).into_bits();
        MLX5_CQE_L3_OK => HdsIpExt::new().with_l3_ok(true).into_bits();
        MLX5_CQE_L4_OK => HdsIpExt::new().with_l4_ok(true).into_bits();
        MLX5_CQE_L3_HDR_TYPE_NONE => L3HdrType::None.raw();
        MLX5_CQE_L3_HDR_TYPE_IPV6 => L3HdrType::Ipv6.raw();
        MLX5_CQE_L3_HDR_TYPE_IPV4 => L3HdrType::Ipv4.raw();

        MLX5_CQE_OWNER_MASK => OpOwn::new().with_owner(true).into_bits();
        MLX5_CQE_REQ => CqeOpcode::Req.raw();
        MLX5_CQE_RESP_WR_IMM => CqeOpcode::RespWrImm.raw();
        MLX5_CQE_RESP_SEND => CqeOpcode::RespSend.raw();
        MLX5_CQE_RESP_SEND_IMM => CqeOpcode::RespSendImm.raw();
        MLX5_CQE_RESP_SEND_INV => CqeOpcode::RespSendInv.raw();
        MLX5_CQE_RESIZE_CQ => CqeOpcode::ResizeCq.raw();
        MLX5_CQE_NO_PACKET => CqeOpcode::NoPacket.raw();
        MLX5_CQE_SIG_ERR => CqeOpcode::SigErr.raw();
        MLX5_CQE_REQ_ERR => CqeOpcode::ReqErr.raw();
        MLX5_CQE_RESP_ERR => CqeOpcode::RespErr.raw();
        MLX5_CQE_INVALID => CqeOpcode::Invalid.raw();

        MLX5_CQ_DOORBELL => UAR_CQ_DOORBELL_OFFSET;
        MLX5_CQ_DB_REQ_NOT_SOL => CqArmWord::new().with_cmd(CQ_DB_REQ_NOT_SOL).into_bits().get();
        MLX5_CQ_DB_REQ_NOT => CqArmWord::new().with_cmd(CQ_DB_REQ_NOT).into_bits().get();

        MLX5DV_CQE_RES_FORMAT_HASH => mlx5dv_mask_bit(MiniCqeFormat::Hash);
        MLX5DV_CQE_RES_FORMAT_CSUM => mlx5dv_mask_bit(MiniCqeFormat::Csum);
        MLX5DV_CQE_RES_FORMAT_CSUM_STRIDX => mlx5dv_mask_bit(MiniCqeFormat::CsumStridx);

        MLX5_INVALID_LKEY => INVALID_LKEY;
        MLX5_EXTENDED_UD_AV => EXTENDED_UD_AV, DqpDct::new().with_extended(true).into_bits().get();
        MLX5_WQE_CTRL_CQ_UPDATE =>
            WQE_CTRL_CQ_UPDATE,
            FmCeSe::new().with_ce(CompletionMode::Always.raw()).into_bits();
        MLX5_WQE_CTRL_SOLICITED => WQE_CTRL_SOLICITED, FmCeSe::new().with_se(true).into_bits();
        MLX5_WQE_CTRL_FENCE =>
            WQE_CTRL_FENCE,
            FmCeSe::new().with_fm(FenceMode::SmallAndFence.raw()).into_bits();
        MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE =>
            WQE_CTRL_INITIATOR_SMALL_FENCE,
            FmCeSe::new().with_fm(FenceMode::InitiatorSmall.raw()).into_bits();
        MLX5_SEND_WQE_BB => SEND_WQE_BB, 1usize << SEND_WQE_SHIFT;
        MLX5_SEND_WQE_SHIFT => SEND_WQE_SHIFT;
        MLX5_INLINE_SEG => INLINE_SEG, InlineByteCount::new().with_inline(true).into_bits().get();
        MLX5_ETH_WQE_L3_CSUM => ETH_WQE_L3_CSUM, EthCsFlags::new().with_l3_csum(true).into_bits();
        MLX5_ETH_WQE_L4_CSUM => ETH_WQE_L4_CSUM, EthCsFlags::new().with_l4_csum(true).into_bits();
        MLX5_RCV_DBR => core::mem::offset_of!(QpDbrec, rcv) / 4;
        MLX5_SND_DBR => core::mem::offset_of!(QpDbrec, snd) / 4;

        IBV_WC_SUCCESS => WcStatus::Success.raw();
        IBV_WC_LOC_LEN_ERR => WcStatus::LocLenErr.raw();
        IBV_WC_LOC_QP_OP_ERR => WcStatus::LocQpOpErr.raw();
        IBV_WC_LOC_EEC_OP_ERR => WcStatus::LocEecOpErr.raw();
        IBV_WC_LOC_PROT_ERR => WcStatus::LocProtErr.raw();
        IBV_WC_WR_FLUSH_ERR => WcStatus::WrFlushErr.raw();
        IBV_WC_MW_BIND_ERR => WcStatus::MwBindErr.raw();
        IBV_WC_BAD_RESP_ERR => WcStatus::BadRespErr.raw();
        IBV_WC_LOC_ACCESS_ERR => WcStatus::LocAccessErr.raw();
        IBV_WC_REM_INV_REQ_ERR => WcStatus::RemInvReqErr.raw();
        IBV_WC_REM_ACCESS_ERR => WcStatus::RemAccessErr.raw();
        IBV_WC_REM_OP_ERR => WcStatus::RemOpErr.raw();
        IBV_WC_RETRY_EXC_ERR => WcStatus::RetryExcErr.raw();
        IBV_WC_RNR_RETRY_EXC_ERR => WcStatus::RnrRetryExcErr.raw();
        IBV_WC_LOC_RDD_VIOL_ERR => WcStatus::LocRddViolErr.raw();
        IBV_WC_REM_INV_RD_REQ_ERR => WcStatus::RemInvRdReqErr.raw();
        IBV_WC_REM_ABORT_ERR => WcStatus::RemAbortErr.raw();
        IBV_WC_INV_EECN_ERR => WcStatus::InvEecnErr.raw();
        IBV_WC_INV_EEC_STATE_ERR => WcStatus::InvEecStateErr.raw();
        IBV_WC_FATAL_ERR => WcStatus::FatalErr.raw();
        IBV_WC_RESP_TIMEOUT_ERR => WcStatus::RespTimeoutErr.raw();
        IBV_WC_GENERAL_ERR => WcStatus::GeneralErr.raw();
        IBV_WC_TM_ERR => WcStatus::TmErr.raw();
        IBV_WC_TM_RNDV_INCOMPLETE => WcStatus::TmRndvIncomplete.raw();
    }
    v
}

/// Prefixes of mlx5dv.h identifiers that name shared constants: every
/// identifier with one of them must be in `constants()`.
const SHARED_PREFIXES: &[&str] = &[
    "MLX5_OPCODE_",
    "MLX5_CQE_",
    "MLX5_WQE_CTRL_",
    "MLX5_WQE_UMR_CTRL_",
    "MLX5_WQE_MKEY_CONTEXT_",
    "MLX5_INLINE_",
    "MLX5_ETH_WQE_",
    "MLX5_SEND_WQE_",
    "MLX5_CQ_",
    "MLX5DV_CQE_RES_FORMAT_",
    "MLX5_RCV_DBR",
    "MLX5_SND_DBR",
    "MLX5_INVALID_LKEY",
    "MLX5_EXTENDED_UD_AV",
];

// ---------------------------------------------------------------------------
// Golden bytes: the same values through mlx5dv.h's writers and through ours.

const CTRL_ARGS: &str = "0xabcd, 0x0a, 0x5a, 0x123456, 0xaa, 0x2a, 0x77, htobe32(0xdeadbeefu)";

fn rust_ctrl() -> Vec<u8> {
    let mut c = CtrlSeg::default();
    c.opmod_idx_opcode.set_wqe_index(0xabcd);
    c.opmod_idx_opcode.set_opcode(SendOpcode::Send.raw());
    c.opmod_idx_opcode.set_opmod(0x5a);
    c.qpn_ds.set_qpn(0x12_3456);
    c.qpn_ds.set_ds(0x2a);
    c.fm_ce_se.set_fm(5);
    c.fm_ce_se.set_ce(CompletionMode::Always.raw());
    c.fm_ce_se.set_se(true);
    c.signature = 0x77;
    c.imm.set(0xdead_beef);
    c.as_bytes().to_vec()
}

fn rust_data() -> Vec<u8> {
    let mut d = DataSeg::default();
    d.byte_count.set(0x1234_5678);
    d.lkey.set(0x9abc_def0);
    d.addr.set(0x0102_0304_0506_0708);
    d.as_bytes().to_vec()
}

const RMAC: [u8; 6] = [0x02, 0x11, 0x22, 0x33, 0x44, 0x55];
const RGID: [u8; 16] = [
    0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x02, 0x11, 0x22, 0xff, 0xfe, 0x33, 0x44, 0x55,
];

fn rust_dgram() -> Vec<u8> {
    let mut a = Av::default();
    a.set_dc_key(0x1122_3344_5566_7788);
    a.dqp_dct.set_dqp_dct(0xab_cdef);
    a.dqp_dct.set_extended(true);
    a.stat_rate_sl.set_stat_rate(9);
    a.stat_rate_sl.set_sl(3);
    a.fl_mlid.set_fl(true);
    a.fl_mlid.set_mlid(5);
    a.rlid.set(0xbeef);
    a.rmac = RMAC;
    a.tclass = 0x12;
    a.hop_limit = 0x40;
    a.grh_gid_fl.set_grh(true);
    a.grh_gid_fl.set_sgid_index(0x5a);
    a.grh_gid_fl.set_flow_label(0xa_bcde);
    a.rgid = RGID;
    a.as_bytes().to_vec()
}

fn rust_eth() -> Vec<u8> {
    let mut e = EthSeg::default();
    e.cs_flags.set_l3_csum(true);
    e.cs_flags.set_l4_csum(true);
    e.mss.set(1460);
    e.inline_hdr_sz.set(2);
    e.inline_hdr_start = [0xaa, 0xbb];
    let mut out = e.as_bytes().to_vec();
    out.extend_from_slice(&[0u8; SEND_WQE_DS]);
    out
}

fn rust_err_cqe() -> Vec<u8> {
    let mut e = ErrCqe::default();
    e.srqn.set(0x00ab_cdef);
    e.vendor_err_synd = VENDOR_SYNDROME_ODP_PFAULT;
    e.syndrome = Syndrome::TransportRetryExc.raw();
    e.s_wqe_opcode_qpn
        .set_s_wqe_opcode(SendOpcode::RdmaWrite.raw());
    e.s_wqe_opcode_qpn.set_qpn(0x12_3456);
    e.wqe_counter.set(0x4321);
    e.op_own.set_opcode(CqeOpcode::ReqErr.raw());
    e.op_own.set_owner(true);
    e.as_bytes().to_vec()
}

// ---------------------------------------------------------------------------
// The probe.

fn probe_source(
    members: &[Member],
    extra: &BTreeSet<(String, String)>,
    consts: &Constants,
) -> String {
    let mut s = String::new();
    s.push_str(
        "/* Generated by mlx5dp-tests c_header.rs: layout probe of mlx5dv.h. */\n\
         #include <endian.h>\n#include <stddef.h>\n#include <stdint.h>\n#include <stdio.h>\n\
         #include <string.h>\n#include <infiniband/verbs.h>\n#include <infiniband/mlx5dv.h>\n\n\
         #define SIZE(s) printf(\"S %s %zu\\n\", #s, sizeof(struct s))\n\
         #define FIELD(s, m) printf(\"F %s %s %zu %zu\\n\", #s, #m, offsetof(struct s, m), \
         sizeof(((struct s *)0)->m))\n\
         #define CONST(c) printf(\"C %s %llu\\n\", #c, (unsigned long long)(c))\n\n\
         static void dump(const char *name, const void *p, size_t n)\n{\n\
         \tprintf(\"B %s\", name);\n\
         \tfor (size_t i = 0; i < n; i++)\n\t\tprintf(\" %02x\", ((const unsigned char *)p)[i]);\n\
         \tprintf(\"\\n\");\n}\n\nint main(void)\n{\n",
    );
    for (c_struct, _, _) in struct_sizes() {
        let _ = writeln!(s, "\tSIZE({c_struct});");
    }
    let mut fields: BTreeSet<(String, String)> = members
        .iter()
        .map(|m| (m.c_struct.to_owned(), m.c_member.to_owned()))
        .collect();
    fields.extend(extra.iter().cloned());
    for (c_struct, c_member) in &fields {
        let _ = writeln!(s, "\tFIELD({c_struct}, {c_member});");
    }
    for (name, _) in consts {
        let _ = writeln!(s, "\tCONST({name});");
    }
    let rmac: Vec<String> = RMAC.iter().map(|b| format!("{b:#04x}")).collect();
    let rgid: Vec<String> = RGID.iter().map(|b| format!("{b:#04x}")).collect();
    let _ = write!(
        s,
        "\t{{\n\t\tstruct mlx5_wqe_ctrl_seg c;\n\t\tmemset(&c, 0, sizeof(c));\n\
         \t\tmlx5dv_set_ctrl_seg(&c, {CTRL_ARGS});\n\t\tdump(\"ctrl\", &c, sizeof(c));\n\t}}\n\
         \t{{\n\t\tstruct mlx5_wqe_data_seg d;\n\t\tmemset(&d, 0, sizeof(d));\n\
         \t\tmlx5dv_set_data_seg(&d, 0x12345678u, 0x9abcdef0u, (uintptr_t)0x0102030405060708ull);\n\
         \t\tdump(\"data\", &d, sizeof(d));\n\t}}\n\
         \t{{\n\t\tuint8_t rmac[6] = {{{}}};\n\t\tuint8_t rgid[16] = {{{}}};\n\
         \t\tstruct mlx5_wqe_datagram_seg g;\n\t\tmemset(&g, 0, sizeof(g));\n\
         \t\tmlx5dv_set_dgram_seg(&g, 0x1122334455667788ull, 0xabcdefu, 1, 0x93, 0x85, 0xbeef, rmac, \
         0x12, 0x40, (1u << 30) | (0x5au << 20) | 0xabcdeu, rgid);\n\
         \t\tdump(\"dgram\", &g, sizeof(g));\n\t}}\n\
         \t{{\n\t\tuint8_t hdr[2] = {{0xaa, 0xbb}};\n\t\tstruct mlx5_wqe_eth_seg e;\n\
         \t\tmemset(&e, 0, sizeof(e));\n\t\tmlx5dv_set_eth_seg(&e, MLX5_ETH_WQE_L3_CSUM | MLX5_ETH_WQE_L4_CSUM, \
         1460, 2, hdr);\n\t\tdump(\"eth\", &e, sizeof(e));\n\t}}\n\
         \t{{\n\t\tstruct mlx5_err_cqe e;\n\t\tmemset(&e, 0, sizeof(e));\n\
         \t\te.srqn = htobe32(0xabcdefu);\n\t\te.vendor_err_synd = MLX5_CQE_VENDOR_SYNDROME_ODP_PFAULT;\n\
         \t\te.syndrome = MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR;\n\
         \t\te.s_wqe_opcode_qpn = htobe32(((uint32_t)MLX5_OPCODE_RDMA_WRITE << 24) | 0x123456u);\n\
         \t\te.wqe_counter = htobe16(0x4321);\n\t\te.op_own = (MLX5_CQE_REQ_ERR << 4) | MLX5_CQE_OWNER_MASK;\n\
         \t\tdump(\"err_cqe\", &e, sizeof(e));\n\t}}\n\
         \tfor (unsigned v = 0; v < 256; v++) {{\n\t\tstruct mlx5_cqe64 q;\n\t\tmemset(&q, 0, sizeof(q));\n\
         \t\tq.op_own = (uint8_t)v;\n\t\tprintf(\"O %u %u %u %u %u\\n\", v, mlx5dv_get_cqe_owner(&q), \
         mlx5dv_get_cqe_se(&q), mlx5dv_get_cqe_format(&q), mlx5dv_get_cqe_opcode(&q));\n\t}}\n\
         #ifdef MLX5DP_WITH_LIBIBVERBS\n\
         \tfor (int i = IBV_WC_SUCCESS; i <= IBV_WC_TM_RNDV_INCOMPLETE; i++)\n\
         \t\tprintf(\"W %d %s\\n\", i, ibv_wc_status_str((enum ibv_wc_status)i));\n\
         #endif\n\treturn 0;\n}}\n",
        rmac.join(", "),
        rgid.join(", "),
    );
    s
}

/// What the probe printed.
#[derive(Default, Debug)]
struct ProbeOutput {
    sizes: BTreeMap<String, usize>,
    fields: BTreeMap<(String, String), (usize, usize)>,
    consts: BTreeMap<String, u64>,
    bytes: BTreeMap<String, Vec<u8>>,
    /// op_own -> (owner, se, format, opcode) as mlx5dv.h reads them.
    op_own: BTreeMap<u8, [u8; 4]>,
    /// `ibv_wc_status_str`, when libibverbs linked.
    wc_str: Option<BTreeMap<u32, String>>,
}

fn parse_output(text: &str, linked: bool) -> Result<ProbeOutput, String> {
    let mut out = ProbeOutput::default();
    let mut wc = BTreeMap::new();
    let num = |s: Option<&str>| -> Result<u64, String> {
        s.ok_or("short line")?
            .parse::<u64>()
            .map_err(|e| format!("bad number: {e}"))
    };
    let usz = |v: u64| usize::try_from(v).map_err(|_| "too large".to_owned());
    for line in text.lines() {
        let mut it = line.split(' ');
        match it.next() {
            Some("S") => {
                let name = it.next().ok_or("short S line")?.to_owned();
                out.sizes.insert(name, usz(num(it.next())?)?);
            }
            Some("F") => {
                let s = it.next().ok_or("short F line")?.to_owned();
                let m = it.next().ok_or("short F line")?.to_owned();
                let off = usz(num(it.next())?)?;
                let size = usz(num(it.next())?)?;
                out.fields.insert((s, m), (off, size));
            }
            Some("C") => {
                let name = it.next().ok_or("short C line")?.to_owned();
                out.consts.insert(name, num(it.next())?);
            }
            Some("B") => {
                let name = it.next().ok_or("short B line")?.to_owned();
                let bytes = it
                    .map(|h| u8::from_str_radix(h, 16).map_err(|e| format!("bad hex: {e}")))
                    .collect::<Result<Vec<u8>, String>>()?;
                out.bytes.insert(name, bytes);
            }
            Some("O") => {
                let vals = it
                    .map(|x| x.parse::<u8>().map_err(|e| format!("bad O line: {e}")))
                    .collect::<Result<Vec<u8>, String>>()?;
                let [v, a, b, c, d] = vals.as_slice() else {
                    return Err(format!("bad O line {line:?}"));
                };
                out.op_own.insert(*v, [*a, *b, *c, *d]);
            }
            Some("W") => {
                let rest = line.strip_prefix("W ").ok_or("bad W line")?;
                let (n, s) = rest.split_once(' ').ok_or("bad W line")?;
                let n = n.parse::<u32>().map_err(|e| format!("bad W line: {e}"))?;
                wc.insert(n, s.to_owned());
            }
            _ => return Err(format!("unexpected probe line {line:?}")),
        }
    }
    if linked {
        out.wc_str = Some(wc);
    }
    Ok(out)
}

/// Prints `message` once per process on the real stderr: `eprintln!` in a
/// passing test is captured by the test harness and never shown.
fn notice(message: &str) {
    static SHOWN: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());
    let first = SHOWN
        .lock()
        .map(|mut shown| shown.insert(message.to_owned()))
        .unwrap_or(true);
    if first {
        let _ = writeln!(std::io::stderr(), "{message}");
    }
}

fn skip_or_fail(why: &str) -> Option<&'static ProbeOutput> {
    if std::env::var("MLX5DP_REQUIRE_C_HEADERS").as_deref() == Ok("1") {
        panic!("{why}, and MLX5DP_REQUIRE_C_HEADERS=1");
    }
    notice(&format!("SKIPPED: {why}"));
    None
}

fn work_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("c_header-{}", std::process::id()))
}

/// Builds and runs the probe once per test process; `None` = skipped.
fn probe() -> Option<&'static ProbeOutput> {
    static PROBE: OnceLock<Result<ProbeOutput, String>> = OnceLock::new();
    if !Path::new(MLX5DV_H).exists() {
        return skip_or_fail(&format!("{MLX5DV_H} not found (install libibverbs-dev)"));
    }
    if Command::new("gcc").arg("--version").output().is_err() {
        return skip_or_fail("gcc not found (needed to compile the mlx5dv.h probe)");
    }
    let result = PROBE.get_or_init(build_and_run);
    match result {
        Ok(out) => Some(out),
        Err(e) => panic!("mlx5dv.h probe: {e}"),
    }
}

fn build_and_run() -> Result<ProbeOutput, String> {
    let dir = work_dir();
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let c_file = dir.join("probe.c");
    let exe = dir.join("probe");
    let src = probe_source(&members(), &tsv_cited_members()?, &constants());
    std::fs::write(&c_file, &src).map_err(|e| format!("{}: {e}", c_file.display()))?;
    let gcc = |link: bool| {
        let mut cmd = Command::new("gcc");
        cmd.args(["-std=gnu11", "-Wall", "-O0", "-o"])
            .arg(&exe)
            .arg(&c_file);
        if link {
            cmd.args(["-DMLX5DP_WITH_LIBIBVERBS", "-libverbs"]);
        }
        cmd.output()
    };
    let first = gcc(true).map_err(|e| format!("running gcc: {e}"))?;
    let linked = first.status.success();
    if !linked {
        notice(&format!(
            "SKIPPED (part): linking libibverbs failed, ibv_wc_status_str not compared:\n{}",
            String::from_utf8_lossy(&first.stderr)
        ));
        let second = gcc(false).map_err(|e| format!("running gcc: {e}"))?;
        if !second.status.success() {
            return Err(format!(
                "gcc failed on {}:\n{}",
                c_file.display(),
                String::from_utf8_lossy(&second.stderr)
            ));
        }
    }
    let run = Command::new(&exe)
        .output()
        .map_err(|e| format!("running probe: {e}"))?;
    if !run.status.success() {
        return Err(format!("probe exited with {}", run.status));
    }
    let out = parse_output(&String::from_utf8_lossy(&run.stdout), linked)?;
    // Leave nothing behind on success; on failure the files stay for a look.
    let _ = std::fs::remove_dir_all(&dir);
    Ok(out)
}

/// `(C struct, member)` pairs that `specs/prm.tsv` cites as
/// `rdma-core mlx5dv.h <struct>.<member>`: the probe measures them too, so
/// the table's citations of the installed header are checked.
fn tsv_cited_members() -> Result<BTreeSet<(String, String)>, String> {
    Ok(prm_citations()?
        .into_iter()
        .map(|c| (c.c_struct, c.c_member))
        .collect())
}

struct Citation {
    line: usize,
    row: String,
    offset: usize,
    width: usize,
    c_struct: String,
    c_member: String,
}

fn prm_citations() -> Result<Vec<Citation>, String> {
    let table = tsv::read("prm.tsv", tsv::PRM_COLUMNS)?;
    let known: BTreeSet<&str> = struct_sizes().iter().map(|(c, _, _)| *c).collect();
    let mut out = Vec::new();
    for row in &table.rows {
        let source = row.get("source")?;
        for clause in source.split(';') {
            let Some(rest) = clause.trim().strip_prefix("rdma-core mlx5dv.h ") else {
                continue;
            };
            let token = rest.split([' ', ',']).next().unwrap_or("");
            let Some((c_struct, c_member)) = token.split_once('.') else {
                continue;
            };
            let plain = c_member
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '.');
            if !known.contains(c_struct) || !plain {
                continue;
            }
            out.push(Citation {
                line: row.line,
                row: format!("{}.{}", row.get("struct")?, row.get("field")?),
                offset: row.usize("byte_offset")?,
                width: row.usize("byte_width")?,
                c_struct: c_struct.to_owned(),
                c_member: c_member.to_owned(),
            });
        }
    }
    Ok(out)
}

fn report(errors: &[String]) {
    assert!(
        errors.is_empty(),
        "{} problem(s):\n{}",
        errors.len(),
        errors.join("\n")
    );
}

fn hex(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Identifiers in `text` that start with `prefix`.
fn identifiers<'a>(text: &'a str, prefix: &str) -> BTreeSet<&'a str> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| w.starts_with(prefix))
        .collect()
}

// ---------------------------------------------------------------------------
// Tests.

#[test]
fn struct_sizes_and_offsets_match_mlx5dv_h() {
    let Some(out) = probe() else { return };
    let mut errors = Vec::new();
    for (c_struct, rust_size, rust) in struct_sizes() {
        match out.sizes.get(c_struct) {
            Some(&c) if c == rust_size => {}
            other => errors.push(format!(
                "sizeof(struct {c_struct}) = {other:?}, {rust} says {rust_size}"
            )),
        }
    }
    let members = members();
    for m in &members {
        let key = (m.c_struct.to_owned(), m.c_member.to_owned());
        match out.fields.get(&key) {
            Some(&(off, size)) if (off, size) == (m.offset, m.size) => {}
            other => errors.push(format!(
                "{}.{}: C (offset, size) = {other:?}, Rust {} = ({}, {})",
                m.c_struct, m.c_member, m.rust, m.offset, m.size
            )),
        }
    }
    report(&errors);
    assert!(members.len() > 70);
}

#[test]
fn prm_tsv_citations_of_mlx5dv_h_are_right() {
    let Some(out) = probe() else { return };
    let citations = prm_citations().expect("specs/prm.tsv");
    let mut errors = Vec::new();
    for c in &citations {
        let got = out.fields.get(&(c.c_struct.clone(), c.c_member.clone()));
        if got != Some(&(c.offset, c.width)) {
            errors.push(format!(
                "prm.tsv line {} ({}) cites {}.{}: C (offset, size) = {got:?}, row says ({}, {})",
                c.line, c.row, c.c_struct, c.c_member, c.offset, c.width
            ));
        }
    }
    report(&errors);
    assert!(
        citations.len() > 50,
        "only {} citations found",
        citations.len()
    );
}

#[test]
fn every_wire_struct_of_mlx5dv_h_is_mapped_or_listed() {
    let Some(_) = probe() else { return };
    let header = std::fs::read_to_string(MLX5DV_H).expect("read mlx5dv.h");
    let mapped: BTreeSet<&str> = struct_sizes().iter().map(|(c, _, _)| *c).collect();
    let listed: BTreeSet<&str> = NOT_MODELLED_STRUCTS.iter().map(|(c, _)| *c).collect();
    let mut errors = Vec::new();
    let mut found = BTreeSet::new();
    for line in header.lines() {
        for kw in ["struct ", "union "] {
            let Some(rest) = line.strip_prefix(kw) else {
                continue;
            };
            let Some(name) = rest.strip_suffix(" {") else {
                continue;
            };
            if name.starts_with("mlx5_") {
                found.insert(name.to_owned());
                if !mapped.contains(name) && !listed.contains(name) {
                    errors.push(format!(
                        "mlx5dv.h defines {kw}{name}, which this test neither maps nor lists"
                    ));
                }
            }
        }
    }
    for name in mapped.iter().chain(listed.iter()) {
        if !found.contains(*name) {
            errors.push(format!(
                "{name} is mapped or listed but mlx5dv.h does not define it"
            ));
        }
    }
    report(&errors);
}

#[test]
fn constants_match_mlx5dv_h_and_verbs_h() {
    let Some(out) = probe() else { return };
    let mut errors = Vec::new();
    let consts = constants();
    for (name, rust) in &consts {
        let Some(&c) = out.consts.get(*name) else {
            errors.push(format!("{name}: not printed by the probe"));
            continue;
        };
        for (expr, value) in rust {
            if *value != c {
                errors.push(format!("{name} = {c:#x} in C, but {expr} = {value:#x}"));
            }
        }
    }
    // Both ways: every shared-looking identifier of mlx5dv.h is compared.
    let header = std::fs::read_to_string(MLX5DV_H).expect("read mlx5dv.h");
    let known: BTreeSet<&str> = consts.iter().map(|(n, _)| *n).collect();
    for prefix in SHARED_PREFIXES {
        for ident in identifiers(&header, prefix) {
            if !known.contains(ident) {
                errors.push(format!(
                    "mlx5dv.h defines {ident}, which this test does not compare"
                ));
            }
        }
    }
    // Every ibv_wc_status value, and no more than WcStatus names.
    let verbs = std::fs::read_to_string(VERBS_H).expect("read verbs.h");
    let start = verbs
        .find("enum ibv_wc_status {")
        .expect("enum ibv_wc_status in verbs.h");
    let end = start
        + verbs[start..]
            .find("};")
            .expect("end of enum ibv_wc_status");
    let statuses = identifiers(&verbs[start..end], "IBV_WC_");
    for s in &statuses {
        if !known.contains(s) {
            errors.push(format!(
                "verbs.h enum ibv_wc_status has {s}, which this test does not compare"
            ));
        }
    }
    if statuses.len() != WcStatus::ALL.len() {
        errors.push(format!(
            "verbs.h has {} ibv_wc_status values, WcStatus names {}",
            statuses.len(),
            WcStatus::ALL.len()
        ));
    }
    report(&errors);
    assert!(consts.len() > 90);
}

#[test]
fn constants_tsv_c_values_match_installed_headers() {
    let Some(out) = probe() else { return };
    let table = tsv::read("constants.tsv", tsv::CONSTANT_COLUMNS).expect("specs/constants.tsv");
    let mut errors = Vec::new();
    let mut checked = 0;
    for row in &table.rows {
        let source = row.get("source").expect("source");
        if !(source.starts_with("rdma-core mlx5dv.h") || source.starts_with("libibverbs verbs.h")) {
            continue;
        }
        let c_name = row.get("c_name").expect("c_name");
        let c_value = row
            .int("c_value")
            .expect("c_value of a row citing an installed header");
        match out.consts.get(c_name) {
            None => errors.push(format!(
                "constants.tsv line {}: {c_name} is cited from an installed header but not compared here",
                row.line
            )),
            Some(&c) if c != c_value => errors.push(format!(
                "constants.tsv line {}: {c_name} = {c:#x} in the header, c_value {c_value:#x}",
                row.line
            )),
            Some(_) => checked += 1,
        }
    }
    report(&errors);
    assert!(checked > 70, "only {checked} rows checked");
}

#[test]
fn mlx5dv_h_writers_produce_our_bytes() {
    let Some(out) = probe() else { return };
    let mut errors = Vec::new();
    for (name, rust) in [
        ("ctrl", rust_ctrl()),
        ("data", rust_data()),
        ("dgram", rust_dgram()),
        ("eth", rust_eth()),
        ("err_cqe", rust_err_cqe()),
    ] {
        match out.bytes.get(name) {
            Some(c) if *c == rust => {}
            Some(c) => errors.push(format!(
                "{name}:\n   C    {}\n   Rust {}",
                hex(c),
                hex(&rust)
            )),
            None => errors.push(format!("{name}: not printed by the probe")),
        }
    }
    report(&errors);
}

#[test]
fn mlx5dv_h_cqe_getters_agree_with_op_own() {
    let Some(out) = probe() else { return };
    let mut errors = Vec::new();
    for v in 0u8..=255 {
        let o = OpOwn::from_bits(v);
        let rust = [
            u8::from(o.owner()),
            u8::from(o.se()),
            o.format(),
            o.opcode(),
        ];
        match out.op_own.get(&v) {
            Some(c) if *c == rust => {}
            other => errors.push(format!(
                "op_own {v:#04x}: mlx5dv.h {other:?}, Rust {rust:?}"
            )),
        }
    }
    report(&errors);
}

#[test]
fn wc_status_names_match_ibv_wc_status_str() {
    let Some(out) = probe() else { return };
    let Some(wc) = &out.wc_str else {
        notice("SKIPPED (part): libibverbs did not link; ibv_wc_status_str not compared");
        return;
    };
    let mut errors = Vec::new();
    for s in WcStatus::ALL {
        match wc.get(&s.raw()) {
            Some(c) if c == s.name() => {}
            other => errors.push(format!(
                "{s:?}: ibv_wc_status_str = {other:?}, name() = {:?}",
                s.name()
            )),
        }
    }
    if wc.len() != WcStatus::ALL.len() {
        errors.push(format!(
            "{} strings from C, {} WcStatus values",
            wc.len(),
            WcStatus::ALL.len()
        ));
    }
    report(&errors);
}
