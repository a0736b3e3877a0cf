//! The device context: capabilities it reports and the knobs of the
//! emulation (clock, MTU, atomic byte order).
//!
//! The capability names follow `struct mlx5dv_context` and the HCA caps
//! DPDK and UCX query through DevX (PRM-FACTS §13); their defaults describe a
//! ConnectX-6 Dx-like device. Tests change them to make the device stricter
//! (a ConnectX-4 Lx minimum inline header, no enhanced MPW, ...).
#![forbid(unsafe_code)]

use super::thread::IdlePolicy;
use mlx5dp::prm::MiniCqeFormat;

/// Flags of `mlx5dv_context.flags` (rdma-core `MLX5DV_CONTEXT_FLAGS_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ContextFlags {
    /// `CQE_V1` (1 << 0): CQEs carry the user index.
    pub cqe_v1: bool,
    /// `MPW_ALLOWED` (1 << 2): legacy multi-packet send WQEs.
    pub mpw_allowed: bool,
    /// `ENHANCED_MPW` (1 << 3): enhanced multi-packet send WQEs.
    pub enhanced_mpw: bool,
    /// `CQE_128B_COMP` (1 << 4): compression on 128-byte CQEs.
    pub cqe_128b_comp: bool,
    /// `CQE_128B_PAD` (1 << 5).
    pub cqe_128b_pad: bool,
    /// `REAL_TIME_TS` (1 << 7): real-time (sec:ns) timestamps.
    pub real_time_ts: bool,
    /// `BLUEFLAME` (1 << 8): BlueFlame registers are write-combining.
    pub blueflame: bool,
}

impl ContextFlags {
    /// The raw `mlx5dv_context.flags` value.
    pub fn mlx5dv_flags(&self) -> u64 {
        let bits = [
            (self.cqe_v1, 0),
            (self.mpw_allowed, 2),
            (self.enhanced_mpw, 3),
            (self.cqe_128b_comp, 4),
            (self.cqe_128b_pad, 5),
            (self.real_time_ts, 7),
            (self.blueflame, 8),
        ];
        bits.iter()
            .filter(|(on, _)| *on)
            .fold(0, |acc, (_, b)| acc | 1u64 << b)
    }
}

/// CQE compression capabilities (`mlx5dv_cqe_comp_caps` plus the DevX HCA
/// caps `enhanced_cqe_compression`, `mini_cqe_resp_*`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CqeCompCaps {
    /// Largest session (`cqe_compression_max_num`).
    pub max_num: u16,
    /// Responder mini-CQE formats the device can write.
    pub formats: Vec<MiniCqeFormat>,
    /// The basic ("legacy") layout is available.
    pub basic_layout: bool,
    /// The enhanced layout is available (`enhanced_cqe_compression`).
    pub enhanced_layout: bool,
}

/// Striding-RQ limits (`mlx5dv_striding_rq_caps`), as log2 values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StridingRqCaps {
    /// Smallest stride, log2 bytes.
    pub min_log_stride_bytes: u8,
    /// Largest stride, log2 bytes.
    pub max_log_stride_bytes: u8,
    /// Fewest strides per WQE, log2.
    pub min_log_num_strides: u8,
    /// Most strides per WQE, log2.
    pub max_log_num_strides: u8,
}

/// What the device context reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Caps {
    /// Largest inline payload of one send WQE, bytes.
    pub max_inline: u32,
    /// Largest scatter/gather list of one WQE.
    pub max_sge: u32,
    /// Largest work queue, entries.
    pub max_qp_wr: u32,
    /// Largest CQ, entries.
    pub max_cqe: u32,
    /// Largest send WQE, bytes (the 6-bit DS field caps it at 1008).
    pub max_send_wqe_bytes: u32,
    /// `mlx5dv_context.flags`.
    pub flags: ContextFlags,
    /// CQE compression.
    pub cqe_comp: CqeCompCaps,
    /// Striding RQ.
    pub striding_rq: StridingRqCaps,
    /// HCA core clock frequency, kHz (`ibv_device_attr_ex.hca_core_clock`).
    pub hca_core_clock_khz: u64,
    /// Smallest inline L2 header a raw Ethernet WQE must carry (0: none
    /// required; 18 models a ConnectX-4 Lx, DPDK `mlx5_set_min_inline`).
    pub eth_min_inline: u16,
    /// Largest inline header of a TSO WQE (DPDK `MLX5_MAX_TSO_HEADER`).
    pub max_tso_header: u16,
    /// BlueFlame register size (two halves of `bf_reg_size / 2`).
    pub bf_reg_size: u32,
}

impl Default for Caps {
    fn default() -> Self {
        Self {
            max_inline: 912,
            max_sge: 30,
            max_qp_wr: 32768,
            max_cqe: 1 << 22,
            max_send_wqe_bytes: 1008,
            flags: ContextFlags {
                cqe_v1: true,
                mpw_allowed: true,
                enhanced_mpw: true,
                cqe_128b_comp: true,
                cqe_128b_pad: false,
                real_time_ts: true,
                blueflame: true,
            },
            cqe_comp: CqeCompCaps {
                max_num: 64,
                formats: vec![
                    MiniCqeFormat::Hash,
                    MiniCqeFormat::Csum,
                    MiniCqeFormat::FtagStridx,
                    MiniCqeFormat::CsumStridx,
                    MiniCqeFormat::L34hStridx,
                ],
                basic_layout: true,
                enhanced_layout: true,
            },
            striding_rq: StridingRqCaps {
                min_log_stride_bytes: 6,
                max_log_stride_bytes: 13,
                min_log_num_strides: 3,
                max_log_num_strides: 16,
            },
            hca_core_clock_khz: 1_000_000,
            eth_min_inline: 0,
            max_tso_header: 192,
            bf_reg_size: 512,
        }
    }
}

/// How the completion timestamp clock runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClockMode {
    /// Deterministic: starts at `start` and advances by `step` ticks for
    /// every completion (the default, for step-mode tests).
    Manual {
        /// First value.
        start: u64,
        /// Ticks added per completion.
        step: u64,
    },
    /// Free-running HCA ticks at `hca_core_clock_khz`, from device creation.
    FreeRunning,
    /// Real time as the PRM's real-time format: `[63:32]` seconds,
    /// `[31:0]` nanoseconds (PRM-FACTS §12).
    RealTime,
}

/// Byte order of the 8-byte standard atomics in memory.
///
/// The kernel configures host endianness when the device supports it
/// (commit f91e6d8941bf, "net/mlx5_core: Add setting ATOMIC endian mode":
/// `atomic_req_8B_endianness_mode`), which is the default here. Masked
/// ("extended") atomics are always big-endian: that mode covers only the
/// standard 8-byte atomics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AtomicEndianness {
    /// Host (native) byte order.
    Host,
    /// Big-endian (network) byte order.
    Big,
}

/// The link layer of the emulated port (`ibv_port_attr.link_layer`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkLayer {
    /// InfiniBand: packets are routed by LID; a GRH is optional.
    InfiniBand,
    /// Ethernet (RoCE): packets go to a MAC address and always carry a
    /// GRH (RoCE v1) or an IP header (RoCE v2).
    Ethernet {
        /// The GID at the port's GID index is a RoCE v2 one
        /// (`IBV_GID_TYPE_SYSFS_ROCE_V2`): the address vector carries a
        /// UDP source port where InfiniBand has the remote LID.
        roce_v2: bool,
    },
}

/// The one port of the emulated device: what `ibv_query_port` and
/// `ibv_query_gid` would say, and so what an address vector must carry to
/// reach it (every QP of the device is on this port; UD datagrams loop
/// back through it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortConfig {
    /// Port number (1-based, `ibv_ah_attr.port_num`).
    pub port_num: u8,
    /// Link layer.
    pub link_layer: LinkLayer,
    /// LID (InfiniBand; 0 on Ethernet).
    pub lid: u16,
    /// The GID table index the device's GID sits at (`sgid_index`).
    pub gid_index: u8,
    /// The port's GID at `gid_index`.
    pub gid: [u8; 16],
    /// The port's MAC address (Ethernet).
    pub mac: [u8; 6],
}

impl PortConfig {
    /// An InfiniBand port with LID 1 and a link-local GID (subnet prefix
    /// fe80::/64 and a made-up GUID), at GID index 0.
    pub const INFINIBAND: PortConfig = PortConfig {
        port_num: 1,
        link_layer: LinkLayer::InfiniBand,
        lid: 1,
        gid_index: 0,
        gid: [
            0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x02, 0x00, 0x5e, 0xff, 0xfe, 0x00, 0x00, 0x01,
        ],
        mac: [0; 6],
    };

    /// A RoCE v2 port: no LID, a locally administered MAC, and the
    /// IPv4-mapped GID of 10.0.0.1 (`::ffff:10.0.0.1`) at index 3, where
    /// the kernel's GID table usually puts the RoCE v2 entry of the first
    /// IPv4 address (index 0/1 hold the link-local v1/v2 pair).
    pub const ROCE_V2: PortConfig = PortConfig {
        port_num: 1,
        link_layer: LinkLayer::Ethernet { roce_v2: true },
        lid: 0,
        gid_index: 3,
        gid: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1],
        mac: [0x02, 0x00, 0x5e, 0x00, 0x00, 0x01],
    };

    /// Whether the link layer is Ethernet (RoCE).
    pub fn ethernet(&self) -> bool {
        matches!(self.link_layer, LinkLayer::Ethernet { .. })
    }
}

impl Default for PortConfig {
    /// [`PortConfig::ROCE_V2`]: the emulated device's capabilities are a
    /// ConnectX-6 Dx's, an Ethernet-only part, and its raw Ethernet QPs
    /// need an Ethernet port; [`PortConfig::INFINIBAND`] is there for UD
    /// over InfiniBand (routing by LID, an optional GRH).
    fn default() -> Self {
        Self::ROCE_V2
    }
}

/// Everything that shapes one emulated device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceConfig {
    /// Reported capabilities (and enforced limits).
    pub caps: Caps,
    /// Completion timestamp clock.
    pub clock: ClockMode,
    /// Port MTU in bytes: the largest UD message.
    pub port_mtu: u32,
    /// The port: link layer and addresses (what a UD address vector must
    /// name to be delivered).
    pub port: PortConfig,
    /// Byte order of standard 8-byte atomics.
    pub atomic_endianness: AtomicEndianness,
    /// Send-queue WQEs one `step` processes per QP at most (0: all).
    pub step_budget: u32,
    /// How the device thread ([`super::DeviceThread`]) waits when idle;
    /// step mode ignores it.
    pub idle: IdlePolicy,
}

impl Default for DeviceConfig {
    fn default() -> Self {
        Self {
            caps: Caps::default(),
            clock: ClockMode::Manual {
                start: 0x1000,
                step: 0x10,
            },
            port_mtu: 4096,
            port: PortConfig::default(),
            atomic_endianness: AtomicEndianness::Host,
            step_budget: 0,
            idle: IdlePolicy::THROUGHPUT,
        }
    }
}
