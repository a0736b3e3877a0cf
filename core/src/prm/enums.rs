//! Opcodes, syndromes and type codes, as enums that keep unknown raw values.

use super::prm_enum;

prm_enum! {
    /// Send WQE opcode: control segment `opmod_idx_opcode[7:0]`
    /// (rdma-core `MLX5_OPCODE_*`, kernel `include/linux/mlx5/qp.h`, DPDK `mlx5_prm.h`).
    pub enum SendOpcode: u8 {
        /// `MLX5_OPCODE_NOP`.
        Nop = 0x00 => "nop",
        /// `MLX5_OPCODE_SEND_INVAL`: send with invalidate (rkey in `imm`).
        SendInval = 0x01 => "send_inv",
        /// `MLX5_OPCODE_RDMA_WRITE`.
        RdmaWrite = 0x08 => "rdma_write",
        /// `MLX5_OPCODE_RDMA_WRITE_IMM`.
        RdmaWriteImm = 0x09 => "rdma_write_imm",
        /// `MLX5_OPCODE_SEND` (also the raw Ethernet send).
        Send = 0x0a => "send",
        /// `MLX5_OPCODE_SEND_IMM`.
        SendImm = 0x0b => "send_imm",
        /// `MLX5_OPCODE_TSO` (kernel: LSO); with opmod [`OPC_MOD_MPW`] the legacy MPW.
        Tso = 0x0e => "tso",
        /// DPDK `MLX5_OPCODE_WAIT` (Tx scheduling).
        Wait = 0x0f => "wait",
        /// `MLX5_OPCODE_RDMA_READ`.
        RdmaRead = 0x10 => "rdma_read",
        /// `MLX5_OPCODE_ATOMIC_CS`: 8-byte compare and swap.
        AtomicCs = 0x11 => "atomic_cs",
        /// `MLX5_OPCODE_ATOMIC_FA`: 8-byte fetch and add.
        AtomicFa = 0x12 => "atomic_fa",
        /// `MLX5_OPCODE_ATOMIC_MASKED_CS`: masked (extended) compare and swap.
        AtomicMaskedCs = 0x14 => "atomic_masked_cs",
        /// `MLX5_OPCODE_ATOMIC_MASKED_FA`: masked (extended) fetch and add.
        AtomicMaskedFa = 0x15 => "atomic_masked_fa",
        /// DPDK `MLX5_OPCODE_SEND_EN`: cross-queue enable.
        SendEn = 0x17 => "send_en",
        /// Kernel `MLX5_OPCODE_BIND_MW`.
        BindMw = 0x18 => "bind_mw",
        /// `MLX5_OPCODE_FMR` (rdma-core only, legacy).
        Fmr = 0x19 => "fmr",
        /// `MLX5_OPCODE_LOCAL_INVAL`.
        LocalInval = 0x1b => "local_inv",
        /// `MLX5_OPCODE_CONFIG_CMD`.
        ConfigCmd = 0x1f => "config_cmd",
        /// `MLX5_OPCODE_SET_PSV`.
        SetPsv = 0x20 => "set_psv",
        /// Kernel `device.h` `MLX5_OPCODE_GET_PSV` (signature offload).
        GetPsv = 0x21 => "get_psv",
        /// Kernel `device.h` `MLX5_OPCODE_CHECK_PSV` (signature offload).
        CheckPsv = 0x22 => "check_psv",
        /// Kernel `device.h` `MLX5_OPCODE_DUMP`.
        Dump = 0x23 => "dump",
        /// `MLX5_OPCODE_UMR`.
        Umr = 0x25 => "umr",
        /// Kernel `device.h` `MLX5_OPCODE_RGET_PSV` (signature offload).
        RgetPsv = 0x26 => "rget_psv",
        /// Kernel `device.h` `MLX5_OPCODE_RCHECK_PSV` (signature offload).
        RcheckPsv = 0x27 => "rcheck_psv",
        /// `MLX5_OPCODE_TAG_MATCHING`.
        TagMatching = 0x28 => "tag_matching",
        /// `MLX5_OPCODE_ENHANCED_MPSW` (kernel, DPDK): enhanced multi-packet send WQE.
        EnhancedMpsw = 0x29 => "enhanced_mpsw",
        /// `MLX5_OPCODE_FLOW_TBL_ACCESS`.
        FlowTblAccess = 0x2c => "flow_tbl_access",
        /// DPDK `MLX5_OPCODE_ACCESS_ASO`.
        AccessAso = 0x2d => "access_aso",
        /// `MLX5_OPCODE_MMO`.
        Mmo = 0x2f => "mmo",
    }
}

/// Opmod of the TSO opcode that turns it into a legacy MPW session (DPDK `MLX5_OPC_MOD_MPW`).
pub const OPC_MOD_MPW: u8 = 0x01;
/// Opmod of an 8-byte masked ("extended") atomic: `8 | (log2(8) - 2)` (UCX `UCT_IB_MLX5_OPMOD_EXT_ATOMIC`).
pub const OPC_MOD_EXT_ATOMIC_8B: u8 = 0x09;
/// Opmod of a 4-byte masked ("extended") atomic: `8 | (log2(4) - 2)`.
pub const OPC_MOD_EXT_ATOMIC_4B: u8 = 0x08;

prm_enum! {
    /// Fence mode: control segment `fm_ce_se[7:5]` (kernel `MLX5_FENCE_MODE_*`).
    ///
    /// rdma-core's `MLX5_WQE_CTRL_FENCE` (`4 << 5`) is [`FenceMode::SmallAndFence`],
    /// and `MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE` (`1 << 5`) is
    /// [`FenceMode::InitiatorSmall`] (PRM-FACTS §3).
    pub enum FenceMode: u8 {
        /// No fence.
        None = 0 => "none",
        /// `MLX5_FENCE_MODE_INITIATOR_SMALL`.
        InitiatorSmall = 1 => "initiator_small",
        /// `MLX5_FENCE_MODE_FENCE`.
        Fence = 2 => "fence",
        /// `MLX5_FENCE_MODE_STRONG_ORDERING`.
        StrongOrdering = 3 => "strong_ordering",
        /// `MLX5_FENCE_MODE_SMALL_AND_FENCE` (rdma-core's `MLX5_WQE_CTRL_FENCE`).
        SmallAndFence = 4 => "small_and_fence",
    }
}

prm_enum! {
    /// Completion mode: control segment `fm_ce_se[3:2]` (DPDK `enum mlx5_completion_mode`).
    pub enum CompletionMode: u8 {
        /// CQE only on error (`MLX5_COMP_ONLY_ERR`).
        OnlyErr = 0 => "only_err",
        /// CQE only on the first error (`MLX5_COMP_ONLY_FIRST_ERR`).
        OnlyFirstErr = 1 => "only_first_err",
        /// Always a CQE (`MLX5_WQE_CTRL_CQ_UPDATE`).
        Always = 2 => "always",
        /// CQE and EQE (`MLX5_WQE_CTRL_CQ_UPDATE_AND_EQE`).
        AlwaysAndEqe = 3 => "always_and_eqe",
    }
}

prm_enum! {
    /// CQE opcode: `op_own[7:4]` (rdma-core `MLX5_CQE_*`).
    pub enum CqeOpcode: u8 {
        /// `MLX5_CQE_REQ`: requester (send) completion.
        Req = 0 => "req",
        /// `MLX5_CQE_RESP_WR_IMM`: responder, RDMA write with immediate.
        RespWrImm = 1 => "resp_rdma_write_imm",
        /// `MLX5_CQE_RESP_SEND`.
        RespSend = 2 => "resp_send",
        /// `MLX5_CQE_RESP_SEND_IMM`.
        RespSendImm = 3 => "resp_send_imm",
        /// `MLX5_CQE_RESP_SEND_INV`.
        RespSendInv = 4 => "resp_send_inv",
        /// `MLX5_CQE_RESIZE_CQ`.
        ResizeCq = 5 => "resize_cq",
        /// `MLX5_CQE_NO_PACKET`.
        NoPacket = 6 => "no_packet",
        /// `MLX5_CQE_SIG_ERR`.
        SigErr = 12 => "sig_err",
        /// `MLX5_CQE_REQ_ERR`.
        ReqErr = 13 => "req_err",
        /// `MLX5_CQE_RESP_ERR`.
        RespErr = 14 => "resp_err",
        /// `MLX5_CQE_INVALID`: software-initialised or invalidated.
        Invalid = 15 => "invalid",
    }
}

prm_enum! {
    /// CQE format: `op_own[3:2]` (kernel `MLX5_CQE_FORMAT_*`).
    pub enum CqeFormat: u8 {
        /// No inline data.
        NoInline = 0 => "no_inline",
        /// 32 bytes of data scattered inline into the CQE (`MLX5_INLINE_SCATTER_32`).
        InlineScatter32 = 1 => "inline_scatter_32",
        /// 64 bytes of data scattered inline (`MLX5_INLINE_SCATTER_64`).
        InlineScatter64 = 2 => "inline_scatter_64",
        /// Compressed session (`MLX5_COMPRESSED`): a title or an enhanced mini-CQE array.
        Compressed = 3 => "compressed",
    }
}

prm_enum! {
    /// Error CQE `syndrome` (rdma-core `MLX5_CQE_SYNDROME_*`).
    pub enum Syndrome: u8 {
        /// `LOCAL_LENGTH_ERR`.
        LocalLength = 0x01 => "local_length_err",
        /// `LOCAL_QP_OP_ERR`.
        LocalQpOp = 0x02 => "local_qp_op_err",
        /// `LOCAL_PROT_ERR`.
        LocalProt = 0x04 => "local_prot_err",
        /// `WR_FLUSH_ERR`.
        WrFlush = 0x05 => "wr_flush_err",
        /// `MW_BIND_ERR`.
        MwBind = 0x06 => "mw_bind_err",
        /// `BAD_RESP_ERR`.
        BadResp = 0x10 => "bad_resp_err",
        /// `LOCAL_ACCESS_ERR`.
        LocalAccess = 0x11 => "local_access_err",
        /// `REMOTE_INVAL_REQ_ERR`.
        RemoteInvalReq = 0x12 => "remote_inval_req_err",
        /// `REMOTE_ACCESS_ERR`.
        RemoteAccess = 0x13 => "remote_access_err",
        /// `REMOTE_OP_ERR`.
        RemoteOp = 0x14 => "remote_op_err",
        /// `TRANSPORT_RETRY_EXC_ERR`.
        TransportRetryExc = 0x15 => "transport_retry_exc_err",
        /// `RNR_RETRY_EXC_ERR`.
        RnrRetryExc = 0x16 => "rnr_retry_exc_err",
        /// `REMOTE_ABORTED_ERR`.
        RemoteAborted = 0x22 => "remote_aborted_err",
    }
}

/// Vendor syndrome of an ODP page fault (`MLX5_CQE_VENDOR_SYNDROME_ODP_PFAULT`).
pub const VENDOR_SYNDROME_ODP_PFAULT: u8 = 0x93;

prm_enum! {
    /// The verbs completion status `enum ibv_wc_status` (libibverbs `verbs.h`),
    /// with the text `ibv_wc_status_str` prints for it.
    pub enum WcStatus: u32 {
        /// `IBV_WC_SUCCESS`.
        Success = 0 => "success",
        /// `IBV_WC_LOC_LEN_ERR`.
        LocLenErr = 1 => "local length error",
        /// `IBV_WC_LOC_QP_OP_ERR`.
        LocQpOpErr = 2 => "local QP operation error",
        /// `IBV_WC_LOC_EEC_OP_ERR`.
        LocEecOpErr = 3 => "local EE context operation error",
        /// `IBV_WC_LOC_PROT_ERR`.
        LocProtErr = 4 => "local protection error",
        /// `IBV_WC_WR_FLUSH_ERR`.
        WrFlushErr = 5 => "Work Request Flushed Error",
        /// `IBV_WC_MW_BIND_ERR`.
        MwBindErr = 6 => "memory management operation error",
        /// `IBV_WC_BAD_RESP_ERR`.
        BadRespErr = 7 => "bad response error",
        /// `IBV_WC_LOC_ACCESS_ERR`.
        LocAccessErr = 8 => "local access error",
        /// `IBV_WC_REM_INV_REQ_ERR`.
        RemInvReqErr = 9 => "remote invalid request error",
        /// `IBV_WC_REM_ACCESS_ERR`.
        RemAccessErr = 10 => "remote access error",
        /// `IBV_WC_REM_OP_ERR`.
        RemOpErr = 11 => "remote operation error",
        /// `IBV_WC_RETRY_EXC_ERR`.
        RetryExcErr = 12 => "transport retry counter exceeded",
        /// `IBV_WC_RNR_RETRY_EXC_ERR`.
        RnrRetryExcErr = 13 => "RNR retry counter exceeded",
        /// `IBV_WC_LOC_RDD_VIOL_ERR`.
        LocRddViolErr = 14 => "local RDD violation error",
        /// `IBV_WC_REM_INV_RD_REQ_ERR`.
        RemInvRdReqErr = 15 => "remote invalid RD request",
        /// `IBV_WC_REM_ABORT_ERR`.
        RemAbortErr = 16 => "aborted error",
        /// `IBV_WC_INV_EECN_ERR`.
        InvEecnErr = 17 => "invalid EE context number",
        /// `IBV_WC_INV_EEC_STATE_ERR`.
        InvEecStateErr = 18 => "invalid EE context state",
        /// `IBV_WC_FATAL_ERR`.
        FatalErr = 19 => "fatal error",
        /// `IBV_WC_RESP_TIMEOUT_ERR`.
        RespTimeoutErr = 20 => "response timeout error",
        /// `IBV_WC_GENERAL_ERR`.
        GeneralErr = 21 => "general error",
        /// `IBV_WC_TM_ERR`.
        TmErr = 22 => "TM error",
        /// `IBV_WC_TM_RNDV_INCOMPLETE`.
        TmRndvIncomplete = 23 => "TM software rendezvous",
    }
}

impl Syndrome {
    /// The `ibv_wc_status` libmlx5 reports for this syndrome
    /// (rdma-core `providers/mlx5/cq.c`, `mlx5_handle_error_cqe`): a
    /// one-to-one map of the named syndromes, and `IBV_WC_GENERAL_ERR` for
    /// every other value.
    pub const fn wc_status(self) -> WcStatus {
        match self {
            Syndrome::LocalLength => WcStatus::LocLenErr,
            Syndrome::LocalQpOp => WcStatus::LocQpOpErr,
            Syndrome::LocalProt => WcStatus::LocProtErr,
            Syndrome::WrFlush => WcStatus::WrFlushErr,
            Syndrome::MwBind => WcStatus::MwBindErr,
            Syndrome::BadResp => WcStatus::BadRespErr,
            Syndrome::LocalAccess => WcStatus::LocAccessErr,
            Syndrome::RemoteInvalReq => WcStatus::RemInvReqErr,
            Syndrome::RemoteAccess => WcStatus::RemAccessErr,
            Syndrome::RemoteOp => WcStatus::RemOpErr,
            Syndrome::TransportRetryExc => WcStatus::RetryExcErr,
            Syndrome::RnrRetryExc => WcStatus::RnrRetryExcErr,
            Syndrome::RemoteAborted => WcStatus::RemAbortErr,
            Syndrome::Unknown(_) => WcStatus::GeneralErr,
        }
    }
}

prm_enum! {
    /// L3 header type: CQE byte 29 bits \[3:2\] (rdma-core `MLX5_CQE_L3_HDR_TYPE_*`).
    pub enum L3HdrType: u8 {
        /// No L3 header recognised.
        None = 0 => "none",
        /// IPv6.
        Ipv6 = 1 => "ipv6",
        /// IPv4.
        Ipv4 = 2 => "ipv4",
    }
}

prm_enum! {
    /// L4 header type: CQE byte 29 bits \[6:4\] (kernel `CQE_L4_HDR_TYPE_*`).
    pub enum L4HdrType: u8 {
        /// No L4 header recognised.
        None = 0 => "none",
        /// TCP without ACK.
        TcpNoAck = 1 => "tcp_no_ack",
        /// UDP.
        Udp = 2 => "udp",
        /// TCP ACK without data.
        TcpAckNoData = 3 => "tcp_ack_no_data",
        /// TCP ACK with data.
        TcpAckAndData = 4 => "tcp_ack_and_data",
    }
}

prm_enum! {
    /// Responder mini-CQE format, as the PRM/DevX CQ context encodes it
    /// (`mini_cqe_res_format` with `mini_cqe_res_format_ext` for L34H;
    /// DPDK `MLX5_CQE_RESP_FORMAT_*`). rdma-core's `MLX5DV_CQE_RES_FORMAT_*`
    /// bitmask maps HASH→0, CSUM→1, CSUM_STRIDX→3 (see [`Self::from_mlx5dv_mask`]).
    pub enum MiniCqeFormat: u8 {
        /// Rx hash result + byte count.
        Hash = 0 => "hash",
        /// L4 checksum + byte count.
        Csum = 1 => "csum",
        /// Flow tag + stride index + 24-bit byte count.
        FtagStridx = 2 => "ftag-stridx",
        /// L4 checksum + stride index + byte count.
        CsumStridx = 3 => "csum-stridx",
        /// Header type (L3/L4) + stride index + byte count.
        L34hStridx = 4 => "l34h-stridx",
    }
}

impl MiniCqeFormat {
    /// Translates one `MLX5DV_CQE_RES_FORMAT_*` bit of rdma-core's bitmask.
    pub const fn from_mlx5dv_mask(bit: u8) -> Option<Self> {
        match bit {
            0b001 => Some(Self::Hash),
            0b010 => Some(Self::Csum),
            0b100 => Some(Self::CsumStridx),
            _ => None,
        }
    }
}

/// Ethernet segment `cs_flags`: request L3 (IP header) checksum (`MLX5_ETH_WQE_L3_CSUM`).
pub const ETH_WQE_L3_CSUM: u8 = 1 << 6;
/// Ethernet segment `cs_flags`: request L4 checksum (`MLX5_ETH_WQE_L4_CSUM`).
pub const ETH_WQE_L4_CSUM: u8 = 1 << 7;
/// Ethernet segment `cs_flags`: inner L3 checksum (kernel `MLX5_ETH_WQE_L3_INNER_CSUM`).
pub const ETH_WQE_L3_INNER_CSUM: u8 = 1 << 4;
/// Ethernet segment `cs_flags`: inner L4 checksum (kernel `MLX5_ETH_WQE_L4_INNER_CSUM`).
pub const ETH_WQE_L4_INNER_CSUM: u8 = 1 << 5;

/// Control segment `fm_ce_se`: request a CQE (`MLX5_WQE_CTRL_CQ_UPDATE`, `2 << 2`).
pub const WQE_CTRL_CQ_UPDATE: u8 = 2 << 2;
/// Control segment `fm_ce_se`: solicited event (`MLX5_WQE_CTRL_SOLICITED`).
pub const WQE_CTRL_SOLICITED: u8 = 1 << 1;
/// Control segment `fm_ce_se`: rdma-core's fence for `IBV_SEND_FENCE` (`MLX5_WQE_CTRL_FENCE`, `4 << 5`).
pub const WQE_CTRL_FENCE: u8 = 4 << 5;
/// Control segment `fm_ce_se`: small-initiator fence (`MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE`, `1 << 5`).
pub const WQE_CTRL_INITIATOR_SMALL_FENCE: u8 = 1 << 5;
