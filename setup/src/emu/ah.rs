//! Address handles: the UD address vector (`mlx5_wqe_av`) built for a
//! destination, and the check the emulated port makes of the address
//! vector of every UD datagram it carries.
//!
//! libmlx5 builds the address vector once, in `mlx5_create_ah`
//! (rdma-core v44 `providers/mlx5/verbs.c`), and copies it into every UD
//! send WQE (`qp.c` `_set_datagram_seg`), writing the remote QPN (with
//! `MLX5_EXTENDED_UD_AV`) and the Q_Key over it. [`build_av`] writes what
//! `mlx5_create_ah` writes for the emulated port; the core's
//! `Wr::ud_addr` does the copy. On the wire, the address vector is the
//! packet's route: an InfiniBand port takes packets whose DLID is its LID
//! (and, with a GRH, whose DGID is its GID); an Ethernet port takes frames
//! to its MAC whose GRH/IP destination is its GID. [`check_av`] is that
//! check, made by the sending side of the loopback fabric.
#![forbid(unsafe_code)]

use super::config::{LinkLayer, PortConfig};
use super::wqe::AvInfo;
use mlx5dp::prm::{Av, Be16, FlMlid, GrhGidFl, StatRateSl};

/// Where an address handle points (the destination part of
/// `ibv_ah_attr`, as a backend knows it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AhDest {
    /// The backend's own port: every QP a backend creates lives on it, so
    /// this reaches any of them (loopback; the QP is chosen by the
    /// work request's remote QPN and Q_Key, not by the handle).
    #[default]
    Loopback,
}

/// What an address handle is created from (`ibv_ah_attr`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AhAttr {
    /// The destination.
    pub dest: AhDest,
    /// Service level (InfiniBand: 4 bits; Ethernet: the 3-bit priority).
    /// libmlx5 masks it to those widths.
    pub sl: u8,
    /// InfiniBand: route with a GRH (`is_global`). Ethernet always has
    /// one (libmlx5 refuses an Ethernet AH without `is_global`), so it is
    /// set there whatever this says.
    pub global: bool,
    /// GRH traffic class (with a GRH).
    pub traffic_class: u8,
    /// GRH hop limit (with a GRH).
    pub hop_limit: u8,
    /// GRH flow label, 20 bits (with a GRH). On RoCE v2 it also chooses
    /// the UDP source port.
    pub flow_label: u32,
}

impl Default for AhAttr {
    /// The loopback destination, SL 0, no GRH on InfiniBand, hop limit 64.
    fn default() -> Self {
        Self {
            dest: AhDest::Loopback,
            sl: 0,
            global: false,
            traffic_class: 0,
            hop_limit: 64,
            flow_label: 0,
        }
    }
}

/// `IB_GRH_FLOWLABEL_MASK`.
const FLOW_LABEL_MASK: u32 = 0x000f_ffff;

/// `IB_ROCE_UDP_ENCAP_VALID_PORT_MIN` (RoCE v2 source ports are
/// 0xc000..=0xffff).
const ROCE_SPORT_MIN: u16 = 0xc000;

/// The RoCE v2 UDP source port of a flow label (libibverbs `verbs.h`
/// `ibv_flow_label_to_udp_sport`: the low 14 bits, folded with the top 6,
/// in the ephemeral range).
pub fn flow_label_to_udp_sport(flow_label: u32) -> u16 {
    let fl = flow_label & FLOW_LABEL_MASK;
    let low = (fl & 0x3fff) ^ ((fl & 0xf_c000) >> 14);
    low as u16 | ROCE_SPORT_MIN
}

/// The address vector libmlx5's `mlx5_create_ah` builds for `attr` on
/// `port` (rdma-core v44 `providers/mlx5/verbs.c`), with the Q_Key and
/// remote QPN left zero (the send work request writes them).
///
/// `sport_seed` stands for libmlx5's random RoCE v2 UDP source port when
/// the flow label is zero (`mlx5_ah_set_udp_sport`): the port is
/// `0xc000 | (sport_seed & 0x3fff)`, so the emulator stays deterministic.
pub fn build_av(port: &PortConfig, attr: &AhAttr, sport_seed: u16) -> Av {
    let AhDest::Loopback = attr.dest;
    let flow_label = attr.flow_label & FLOW_LABEL_MASK;
    let mut av = Av::default();
    // Static rate 0 ("port current"): `ah_attr_to_mlx5_rate(0)` is 0.
    let global = match port.link_layer {
        LinkLayer::Ethernet { roce_v2 } => {
            if roce_v2 {
                let sport = if flow_label != 0 {
                    flow_label_to_udp_sport(flow_label)
                } else {
                    ROCE_SPORT_MIN | (sport_seed & 0x3fff)
                };
                av.rlid = Be16::new(sport);
            }
            // RoCE: the priority in bits [3:1], the GRH bit reserved.
            av.stat_rate_sl = StatRateSl::from_bits((attr.sl & 0x7) << 1);
            // `mlx5_create_ah` copies the MAC the kernel resolved for the
            // destination GID (`resp.dmac`); the loopback's is ours.
            av.rmac = port.mac;
            true
        }
        LinkLayer::InfiniBand => {
            // Source path bits 0 (`fl_mlid`), the destination LID.
            av.fl_mlid = FlMlid::new();
            av.rlid = Be16::new(port.lid);
            av.stat_rate_sl = StatRateSl::new().with_sl(attr.sl & 0xf);
            attr.global
        }
    };
    if global {
        av.tclass = attr.traffic_class;
        av.hop_limit = attr.hop_limit;
        av.grh_gid_fl = GrhGidFl::new()
            .with_grh(!port.ethernet())
            .with_sgid_index(port.gid_index)
            .with_flow_label(flow_label);
        av.rgid = port.gid;
    }
    av
}

/// Why a datagram's address vector does not reach the port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AvMismatch {
    /// InfiniBand: the remote LID is not the port's.
    Lid,
    /// The destination GID is not the port's (a GRH on InfiniBand; always
    /// on Ethernet).
    Gid,
    /// Ethernet: the destination MAC is not the port's.
    Mac,
}

/// Whether a datagram sent with `av` reaches `port`, as the fabric and
/// the receiving port decide: InfiniBand routes by DLID (the port takes
/// its own LID; LMC 0) and, when the packet has a GRH, the port takes only
/// a DGID in its GID table; Ethernet delivers by destination MAC and the
/// port takes only a destination GID (RoCE v1 GRH, RoCE v2 IP address) of
/// its own. The source GID index, static rate and SL are not routing and
/// are not checked.
pub fn check_av(port: &PortConfig, av: &AvInfo) -> Result<(), AvMismatch> {
    if port.ethernet() {
        if av.rmac != port.mac {
            return Err(AvMismatch::Mac);
        }
        if av.rgid != port.gid {
            return Err(AvMismatch::Gid);
        }
        return Ok(());
    }
    if av.rlid != port.lid {
        return Err(AvMismatch::Lid);
    }
    if av.grh && av.rgid != port.gid {
        return Err(AvMismatch::Gid);
    }
    Ok(())
}
