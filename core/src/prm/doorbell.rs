//! Doorbell records and UAR registers (PRM-FACTS §7, §9.5; rdma-core
//! `mlx5.h`, `qp.c`, `cq.c`; kernel `include/linux/mlx5/cq.h`).

use super::{wire_struct, Be32};
use bitfield_struct::bitfield;

wire_struct! {
    /// QP doorbell record: two big-endian counters the device reads.
    pub struct QpDbrec(8) {
        /// `MLX5_RCV_DBR` (index 0): RQ producer counter `& 0xffff`.
        pub rcv: Be32,
        /// `MLX5_SND_DBR` (index 1): SQ producer (next free WQEBB) `& 0xffff`.
        pub snd: Be32,
    }
}

wire_struct! {
    /// CQ doorbell record.
    pub struct CqDbrec(8) {
        /// `MLX5_CQ_SET_CI` (index 0): consumer index `& 0xffffff`.
        pub set_ci: Be32,
        /// `MLX5_CQ_ARM_DB` (index 1): the last arm command word.
        pub arm: CqArmWord,
    }
}

/// The CQ arm command word: `(arm_sn & 3) << 28 | cmd << 24 | (ci & 0xffffff)`.
#[bitfield(u32, repr = Be32, from = Be32::new, into = Be32::get)]
#[derive(
    zerocopy::FromBytes,
    zerocopy::IntoBytes,
    zerocopy::KnownLayout,
    zerocopy::Immutable,
    zerocopy::Unaligned,
    PartialEq,
    Eq,
)]
pub struct CqArmWord {
    /// Consumer index, bits [23:0].
    #[bits(24)]
    pub ci: u32,
    /// Command, bits [27:24]: [`CQ_DB_REQ_NOT`] or [`CQ_DB_REQ_NOT_SOL`].
    #[bits(4)]
    pub cmd: u8,
    /// Arm sequence number, bits [29:28].
    #[bits(2)]
    pub arm_sn: u8,
    #[bits(2)]
    __: u8,
}

/// Arm command: notify on the next completion (`MLX5_CQ_DB_REQ_NOT`, `0 << 24`).
pub const CQ_DB_REQ_NOT: u8 = 0;
/// Arm command: notify on the next solicited completion (`MLX5_CQ_DB_REQ_NOT_SOL`, `1 << 24`).
pub const CQ_DB_REQ_NOT_SOL: u8 = 1;

/// Mask of the CQ consumer index in the doorbell record (24 bits).
pub const CQ_CI_MASK: u32 = 0x00ff_ffff;
/// Mask of the WQ producer counters in the doorbell record (16 bits).
pub const WQ_PI_MASK: u32 = 0xffff;

/// The 64-bit value of the CQ arm doorbell at `UAR + 0x20`, in memory order:
/// the arm word (big-endian) then the CQN (big-endian), i.e.
/// `htobe64(word << 32 | cqn)` (rdma-core `mlx5_arm_cq`).
pub fn cq_arm_doorbell(word: CqArmWord, cqn: u32) -> [u8; 8] {
    let [w0, w1, w2, w3]: [u8; 4] = zerocopy::transmute!(word);
    let [c0, c1, c2, c3] = cqn.to_be_bytes();
    [w0, w1, w2, w3, c0, c1, c2, c3]
}

/// Size of a UAR page (`MLX5_ADAPTER_PAGE_SIZE`).
pub const UAR_PAGE_SIZE: usize = 4096;
/// Offset of the CQ doorbell in the UAR page (`MLX5_CQ_DOORBELL`).
pub const UAR_CQ_DOORBELL_OFFSET: usize = 0x20;
/// Offset of the first BlueFlame/doorbell register in the UAR page (`MLX5_BF_OFFSET`).
pub const UAR_BF_OFFSET: usize = 0x800;
/// Register size of a non-BlueFlame (NC-mapped) doorbell (`MLX5_DB_BLUEFLAME_BUFFER_SIZE`).
pub const DB_BLUEFLAME_BUFFER_SIZE: usize = 0x100;
