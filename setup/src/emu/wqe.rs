//! The device's own send-WQE parser (PRM-FACTS §2–§6).
//!
//! It shares the `prm` layouts with the core (they are pinned by `specs/`,
//! the C headers and golden vectors) but none of the core's builders or
//! decoders: the point is to catch the core's mistakes, not to mirror them.
//! A WQE is copied out of the ring once (the engine does that) and parsed
//! here from the copy. The parser is positional, as the hardware is: the
//! segments a QP type and opcode require are read at the offsets the PRM
//! fixes, so a segment in the wrong place is read as the segment that
//! belongs there and usually fails later as a bad key or a bad length;
//! what can be seen here (DS count too small or too large, an inline
//! segment running past the WQE, an atomic without its 8-byte result
//! buffer, an opcode the QP type does not allow, a UMR whose KLMs run past
//! the WQE or whose parts disagree) is rejected here.
#![forbid(unsafe_code)]

use super::{Access, QpType};
use mlx5dp::prm::{
    umr, AtomicSeg, Av, AvBase, CtrlSeg, DataSeg, EthSeg, FmCeSe, MaskedAtomicSeg64, MaskedCs32Seg,
    MaskedFa32Seg, MaskedFa64Seg, MkeyContextSeg, RaddrSeg, SendOpcode, UmrCtrlSeg, UmrKlmSeg,
    XrcSeg, INLINE_SEG, OPC_MOD_EXT_ATOMIC_4B, OPC_MOD_EXT_ATOMIC_8B, OPC_MOD_MPW, SEND_WQE_DS,
};
use zerocopy::FromBytes;

/// Why a WQE was rejected before execution. Each maps to the syndrome the
/// hardware reports and an emulator-defined vendor syndrome
/// ([`super::VendorSyndrome`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WqeFault {
    /// DS count 0.
    DsZero,
    /// The segments the opcode needs do not fit in the DS count.
    DsTooSmall,
    /// The WQE is larger than the device allows.
    DsTooLarge,
    /// An inline segment runs past the end of the WQE.
    InlineOverrun,
    /// The control segment's WQE index is not the device's producer position.
    BadWqeIndex,
    /// The control segment names another QP.
    QpnMismatch,
    /// The opcode is not allowed on this QP type.
    OpcodeNotAllowed,
    /// The opcode (or opmod) is one the device does not implement.
    Unsupported,
    /// Inline data where the opcode needs pointers (RDMA read, atomics).
    InlineNotAllowed,
    /// An atomic without exactly one result data segment of the operand size.
    BadAtomicResult,
    /// The Ethernet inline header is shorter than the device requires or
    /// longer than it allows.
    EthInlineHeader,
    /// A multi-packet WQE whose packets break the session rules.
    MpwSession,
    /// A UMR's translation (`klm_octowords` × 16 bytes of KLMs) runs past
    /// the end of the WQE.
    KlmOverrun,
    /// A UMR whose parts disagree: a bind of length 0, or without a KLM, or
    /// whose range wraps the address space; a free that carries KLMs; bytes
    /// after the translation.
    BadUmr,
}

/// One entry of a gather or scatter list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Sge {
    /// A data (pointer) segment.
    Ptr {
        /// Virtual address.
        addr: u64,
        /// Local key.
        lkey: u32,
        /// Bytes.
        len: u32,
    },
    /// An inline data segment's payload.
    Inline(Vec<u8>),
}

impl Sge {
    /// Bytes this entry carries.
    pub fn len(&self) -> u64 {
        match self {
            Sge::Ptr { len, .. } => u64::from(*len),
            Sge::Inline(d) => d.len() as u64,
        }
    }

    /// Whether the entry carries no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The atomic operation of an atomic WQE, operands as the WQE gives them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AtomicOp {
    /// 8-byte compare and swap.
    Cs {
        /// Swap value.
        swap: u64,
        /// Compare value.
        compare: u64,
    },
    /// 8-byte fetch and add.
    Fa {
        /// Add value.
        add: u64,
    },
    /// Masked compare and swap on `size` (4 or 8) bytes.
    MaskedCs {
        /// Operand size.
        size: u8,
        /// Swap value.
        swap: u64,
        /// Compare value.
        compare: u64,
        /// Bits swapped in.
        swap_mask: u64,
        /// Bits compared.
        compare_mask: u64,
    },
    /// Masked fetch and add on `size` (4 or 8) bytes with field boundaries.
    MaskedFa {
        /// Operand size.
        size: u8,
        /// Add value.
        add: u64,
        /// Set bits end a field: no carry leaves them.
        boundary: u64,
    },
}

impl AtomicOp {
    /// Operand size in bytes.
    pub fn size(&self) -> u8 {
        match self {
            AtomicOp::Cs { .. } | AtomicOp::Fa { .. } => 8,
            AtomicOp::MaskedCs { size, .. } | AtomicOp::MaskedFa { size, .. } => *size,
        }
    }
}

/// The Ethernet segment, decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EthInfo {
    /// `cs_flags` byte.
    pub cs_flags: u8,
    /// `swp_flags` byte.
    pub swp_flags: u8,
    /// MSS (TSO) or packet length (legacy MPW).
    pub mss: u16,
    /// Flow-table metadata.
    pub metadata: u32,
    /// The inline header bytes.
    pub inline_hdr: Vec<u8>,
    /// VLAN to insert: (TCI, S-VLAN).
    pub vlan: Option<(u16, bool)>,
}

/// The kind of an Ethernet send WQE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EthKind {
    /// One packet (opcode SEND).
    Send,
    /// TCP segmentation (opcode TSO, opmod 0).
    Tso,
    /// Legacy multi-packet WQE (opcode TSO, opmod `MLX5_OPC_MOD_MPW`).
    Mpw,
    /// Enhanced multi-packet WQE (opcode `ENHANCED_MPSW`).
    Empw,
}

/// What the WQE asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// No operation.
    Nop,
    /// Send, with immediate or invalidate.
    Send {
        /// Immediate data, as the WQE carries it (big-endian bytes).
        imm: Option<[u8; 4]>,
        /// Key to invalidate at the responder.
        inval: Option<u32>,
        /// Gather list.
        sges: Vec<Sge>,
    },
    /// RDMA write, with optional immediate.
    Write {
        /// Remote address.
        raddr: u64,
        /// Remote key.
        rkey: u32,
        /// Immediate data.
        imm: Option<[u8; 4]>,
        /// Gather list.
        sges: Vec<Sge>,
    },
    /// RDMA read.
    Read {
        /// Remote address.
        raddr: u64,
        /// Remote key.
        rkey: u32,
        /// Scatter list (pointers only).
        sges: Vec<Sge>,
    },
    /// Atomic.
    Atomic {
        /// Remote address.
        raddr: u64,
        /// Remote key.
        rkey: u32,
        /// The operation.
        op: AtomicOp,
        /// Where the original value goes: (addr, lkey).
        result: (u64, u32),
    },
    /// Local invalidate of a key (opcode `LOCAL_INVAL`).
    LocalInval {
        /// The key.
        key: u32,
    },
    /// A UMR on a memory key: libmlx5's memory-window bind (`IBV_WR_BIND_MW`),
    /// unbind (a bind of length 0) and local invalidate (`IBV_WR_LOCAL_INV`,
    /// a type-2 unbind).
    BindMw {
        /// The key the UMR changes (the control segment's `imm`).
        key: u32,
        /// What the UMR writes.
        bind: UmrBind,
    },
    /// Raw Ethernet transmission.
    Eth {
        /// Which kind.
        kind: EthKind,
        /// The Ethernet segment.
        eth: EthInfo,
        /// The payload descriptors (one per packet for multi-packet WQEs).
        sges: Vec<Sge>,
    },
}

/// A UMR WQE that binds or frees a memory key, decoded from its UMR
/// control segment, mkey context and inline translation (rdma-core
/// `qp.c` `set_umr_control_seg`, `set_umr_mkey_seg`, `set_umr_data_seg`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UmrBind {
    /// `CHECK_FREE`: fail unless the key is free (libmlx5: a type-2 bind).
    pub check_free: bool,
    /// `CHECK_QPN`: fail unless the key is bound to this QP (libmlx5: a
    /// type-2 unbind or local invalidate).
    pub check_qpn: bool,
    /// The mkey context's QPN field when the mask selects it (`0xffffff`:
    /// no QP).
    pub qpn: Option<u32>,
    /// The new mkey variant byte when the mask selects it.
    pub variant: Option<u8>,
    /// What a bind maps; `None` for a free (unbind, invalidate).
    pub range: Option<UmrRange>,
}

/// The range a binding UMR maps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UmrRange {
    /// The rights granted (from the mkey context's `access_flags`).
    pub access: Access,
    /// The first address the key answers to (`start_addr`; libmlx5 writes
    /// 0 for a zero-based window).
    pub start_addr: u64,
    /// Length in bytes (non-zero; `start_addr + len` does not wrap).
    pub len: u64,
    /// The key of the region that holds the range: the first KLM's `mkey`
    /// (that KLM covers the whole length).
    pub klm_mkey: u32,
    /// The address in that region `start_addr` maps to: the first KLM's
    /// `address` (libmlx5 writes the window's start, zero-based or not).
    pub klm_address: u64,
}

/// The UD address vector, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AvInfo {
    /// Q_Key.
    pub qkey: u32,
    /// Remote QPN.
    pub dqpn: u32,
    /// Service level (`stat_rate_sl` bits \[3:0\] as written).
    pub sl: u8,
    /// Remote LID (InfiniBand; RoCE v2: the UDP source port).
    pub rlid: u16,
    /// A GRH follows the fabric header (InfiniBand; RoCE keeps it clear).
    pub grh: bool,
    /// Destination MAC (RoCE; zero in a base AV).
    pub rmac: [u8; 6],
    /// Traffic class.
    pub tclass: u8,
    /// Hop limit.
    pub hop_limit: u8,
    /// Flow label.
    pub flow_label: u32,
    /// Remote GID.
    pub rgid: [u8; 16],
}

/// A parsed, validated send WQE.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wqe {
    /// Opcode byte.
    pub opcode: SendOpcode,
    /// Opcode modifier.
    pub opmod: u8,
    /// WQE index of the first basic block.
    pub wqe_index: u16,
    /// DS count.
    pub ds: u8,
    /// Fence, completion and solicited bits.
    pub fm_ce_se: FmCeSe,
    /// The XRC segment's SRQ number.
    pub xrc_srqn: Option<u32>,
    /// The datagram segment.
    pub av: Option<AvInfo>,
    /// The operation.
    pub op: Op,
}

/// What the parser needs to know about the QP and the device.
#[derive(Clone, Copy, Debug)]
pub struct ParseCtx {
    /// QP type.
    pub qp_type: QpType,
    /// QP number (the control segment must name it).
    pub qpn: u32,
    /// WQE index the device expects (its consumer position, 16 bits).
    pub expected_index: u16,
    /// Largest WQE in bytes.
    pub max_wqe_bytes: u32,
    /// Legacy MPW allowed.
    pub mpw: bool,
    /// Enhanced MPW allowed.
    pub empw: bool,
    /// Smallest Ethernet inline header.
    pub eth_min_inline: u16,
    /// Largest TSO header.
    pub max_tso_header: u16,
}

/// Reads the control segment of the WQE at the front of `bytes` (at least
/// 16 bytes): `(opcode, opmod, wqe_index, qpn, ds)`.
pub fn peek_ctrl(bytes: &[u8]) -> Option<(u8, u8, u16, u32, u8)> {
    let c = CtrlSeg::read_from_bytes(bytes.get(..CtrlSeg::SIZE)?).ok()?;
    let o = c.opmod_idx_opcode;
    Some((
        o.opcode(),
        o.opmod(),
        o.wqe_index(),
        c.qpn_ds.qpn(),
        c.qpn_ds.ds(),
    ))
}

struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], WqeFault> {
        let s = self
            .buf
            .get(self.pos..self.pos + n)
            .ok_or(WqeFault::DsTooSmall)?;
        self.pos += n;
        Ok(s)
    }

    fn seg<T: FromBytes>(&mut self, size: usize) -> Result<T, WqeFault> {
        T::read_from_bytes(self.take(size)?).map_err(|_| WqeFault::DsTooSmall)
    }

    fn done(&self) -> bool {
        self.pos >= self.buf.len()
    }
}

/// Parses one WQE; `bytes` holds exactly its DS count × 16 bytes.
pub fn parse(bytes: &[u8], ctx: &ParseCtx) -> Result<Wqe, WqeFault> {
    let mut cur = Cursor { buf: bytes, pos: 0 };
    let ctrl: CtrlSeg = cur.seg(CtrlSeg::SIZE)?;
    let ds = ctrl.qpn_ds.ds();
    if ds == 0 {
        return Err(WqeFault::DsZero);
    }
    if usize::from(ds) * SEND_WQE_DS > ctx.max_wqe_bytes as usize {
        return Err(WqeFault::DsTooLarge);
    }
    if ctrl.opmod_idx_opcode.wqe_index() != ctx.expected_index {
        return Err(WqeFault::BadWqeIndex);
    }
    if ctrl.qpn_ds.qpn() != ctx.qpn {
        return Err(WqeFault::QpnMismatch);
    }
    let opcode = SendOpcode::from_raw(ctrl.opmod_idx_opcode.opcode());
    let opmod = ctrl.opmod_idx_opcode.opmod();
    check_allowed(ctx, opcode, opmod)?;
    let imm_bytes = ctrl.imm.to_bytes();

    let mut xrc_srqn = None;
    let mut av = None;
    if !matches!(
        opcode,
        SendOpcode::Nop | SendOpcode::LocalInval | SendOpcode::Umr
    ) {
        if ctx.qp_type == QpType::XrcIni {
            let x: XrcSeg = cur.seg(XrcSeg::SIZE)?;
            xrc_srqn = Some(x.xrc_srqn.get() & 0x00ff_ffff);
        }
        if ctx.qp_type == QpType::Ud {
            av = Some(parse_av(&mut cur)?);
        }
    }

    let op = match opcode {
        SendOpcode::Nop => Op::Nop,
        SendOpcode::LocalInval => Op::LocalInval {
            key: ctrl.imm.get(),
        },
        SendOpcode::Umr => Op::BindMw {
            key: ctrl.imm.get(),
            bind: parse_umr(&mut cur)?,
        },
        SendOpcode::Send | SendOpcode::SendImm | SendOpcode::SendInval
            if ctx.qp_type != QpType::RawPacket =>
        {
            let sges = data_segs(&mut cur, true)?;
            Op::Send {
                imm: (opcode == SendOpcode::SendImm).then_some(imm_bytes),
                inval: (opcode == SendOpcode::SendInval).then(|| ctrl.imm.get()),
                sges,
            }
        }
        SendOpcode::RdmaWrite | SendOpcode::RdmaWriteImm => {
            let r: RaddrSeg = cur.seg(RaddrSeg::SIZE)?;
            let sges = data_segs(&mut cur, true)?;
            Op::Write {
                raddr: r.raddr.get(),
                rkey: r.rkey.get(),
                imm: (opcode == SendOpcode::RdmaWriteImm).then_some(imm_bytes),
                sges,
            }
        }
        SendOpcode::RdmaRead => {
            let r: RaddrSeg = cur.seg(RaddrSeg::SIZE)?;
            let sges = data_segs(&mut cur, false)?;
            Op::Read {
                raddr: r.raddr.get(),
                rkey: r.rkey.get(),
                sges,
            }
        }
        SendOpcode::AtomicCs
        | SendOpcode::AtomicFa
        | SendOpcode::AtomicMaskedCs
        | SendOpcode::AtomicMaskedFa => {
            let r: RaddrSeg = cur.seg(RaddrSeg::SIZE)?;
            let op = parse_atomic(&mut cur, opcode, opmod)?;
            let sges = data_segs(&mut cur, false)?;
            let result = match sges.as_slice() {
                [Sge::Ptr { addr, lkey, len }] if *len == u32::from(op.size()) => (*addr, *lkey),
                _ => return Err(WqeFault::BadAtomicResult),
            };
            Op::Atomic {
                raddr: r.raddr.get(),
                rkey: r.rkey.get(),
                op,
                result,
            }
        }
        SendOpcode::Send | SendOpcode::Tso | SendOpcode::EnhancedMpsw => {
            let kind = match (opcode, opmod) {
                (SendOpcode::Send, _) => EthKind::Send,
                (SendOpcode::Tso, OPC_MOD_MPW) => EthKind::Mpw,
                (SendOpcode::Tso, _) => EthKind::Tso,
                _ => EthKind::Empw,
            };
            let eth = parse_eth(&mut cur)?;
            check_eth_header(ctx, kind, &eth)?;
            let sges = data_segs(&mut cur, true)?;
            // A session carries at least one packet: a title alone (DS 2)
            // is a malformed multi-packet WQE.
            if matches!(kind, EthKind::Mpw | EthKind::Empw) && sges.is_empty() {
                return Err(WqeFault::MpwSession);
            }
            Op::Eth { kind, eth, sges }
        }
        _ => return Err(WqeFault::Unsupported),
    };
    Ok(Wqe {
        opcode,
        opmod,
        wqe_index: ctrl.opmod_idx_opcode.wqe_index(),
        ds,
        fm_ce_se: ctrl.fm_ce_se,
        xrc_srqn,
        av,
        op,
    })
}

/// The opcode/QP-type table (IBA transport services; PRM-FACTS §4):
/// RDMA read and atomics need a reliable transport, send with invalidate
/// and RDMA write need a connected one (RC, UC, XRC), UD carries sends
/// only, raw Ethernet carries Ethernet opcodes only.
fn check_allowed(ctx: &ParseCtx, op: SendOpcode, opmod: u8) -> Result<(), WqeFault> {
    use SendOpcode as S;
    let t = ctx.qp_type;
    let reliable = matches!(t, QpType::Rc | QpType::XrcIni);
    let ib = matches!(t, QpType::Rc | QpType::Uc | QpType::XrcIni);
    let ok = match op {
        S::Nop => true,
        S::Send | S::SendImm => t != QpType::XrcTgt && (op == S::Send || t != QpType::RawPacket),
        // libmlx5 installs `wr_send_inv` on UC as on RC and XRC
        // (`fill_wr_builders_uc`; man ibv_wr_post: SEND_WITH_INV on UC, RC,
        // XRC_SEND).
        S::SendInval => ib,
        S::RdmaWrite | S::RdmaWriteImm => ib,
        S::RdmaRead | S::AtomicCs | S::AtomicFa | S::AtomicMaskedCs | S::AtomicMaskedFa => reliable,
        S::LocalInval | S::Umr => t != QpType::RawPacket && t != QpType::XrcTgt,
        S::Tso => {
            if t != QpType::RawPacket {
                false
            } else if opmod == OPC_MOD_MPW {
                return if ctx.mpw {
                    Ok(())
                } else {
                    Err(WqeFault::Unsupported)
                };
            } else {
                opmod == 0
            }
        }
        S::EnhancedMpsw => {
            if t != QpType::RawPacket {
                false
            } else {
                return if ctx.empw {
                    Ok(())
                } else {
                    Err(WqeFault::Unsupported)
                };
            }
        }
        S::Unknown(_) => return Err(WqeFault::Unsupported),
        // Implemented by the hardware but not by this device: WAIT,
        // SEND_EN, PSV, MMO, ... (UMRs other than the binds and frees
        // libmlx5 builds are rejected in `parse_umr`).
        _ => return Err(WqeFault::Unsupported),
    };
    if ok {
        Ok(())
    } else {
        Err(WqeFault::OpcodeNotAllowed)
    }
}

// The UMR WQEs libmlx5 builds for memory windows (rdma-core `qp.c`
// `set_bind_wr`: `set_umr_control_seg`, `set_umr_mkey_seg`, then for a
// range `set_umr_data_seg`; `mlx5dv.h` `struct mlx5_wqe_umr_ctrl_seg`,
// `struct mlx5_wqe_mkey_context_seg`, `struct mlx5_wqe_umr_klm_seg`). The
// local invalidate is the same WQE: a type-2 unbind (`_mlx5_post_send`,
// `IBV_WR_LOCAL_INV`: `set_bind_wr(qp, IBV_MW_TYPE_2, 0, &bind_info = {})`).
/// UMR control flags this device implements.
const UMR_FLAGS_KNOWN: u8 = umr::CTRL_FLAG_INLINE
    | umr::CTRL_FLAG_CHECK_FREE
    | umr::CTRL_FLAG_TRANSLATION_OFFSET
    | umr::CTRL_FLAG_CHECK_QPN;
/// Mkey-mask bits a bind must select: the range and every access right
/// (libmlx5 selects all of them for a bind of non-zero length; a partial
/// update of a bound key is a UMR this device does not implement).
const UMR_MASK_BIND: u64 = umr::MKEY_MASK_LEN
    | umr::MKEY_MASK_START_ADDR
    | umr::MKEY_MASK_ACCESS_LOCAL_WRITE
    | umr::MKEY_MASK_ACCESS_REMOTE_READ
    | umr::MKEY_MASK_ACCESS_REMOTE_WRITE
    | umr::MKEY_MASK_ACCESS_ATOMIC;
/// Mkey-mask bits this device implements.
const UMR_MASK_KNOWN: u64 =
    UMR_MASK_BIND | umr::MKEY_MASK_FREE | umr::MKEY_MASK_MKEY | umr::MKEY_MASK_QPN;
/// The mkey context's access bits and the rights they grant (the local
/// read bit is the kernel's, never the bind's: `set_umr_mkey_seg`).
const MKEY_ACCESS: [(u8, Access); 4] = [
    (umr::ACCESS_LOCAL_WRITE, Access::LOCAL_WRITE),
    (umr::ACCESS_REMOTE_READ, Access::REMOTE_READ),
    (umr::ACCESS_REMOTE_WRITE, Access::REMOTE_WRITE),
    (umr::ACCESS_ATOMIC, Access::REMOTE_ATOMIC),
];

/// A UMR WQE after its control segment. It must select the free field
/// (every UMR libmlx5 builds binds or frees), carry its translation inline
/// with no translation offset or BSF, and end with its translation; a bind
/// (free bit clear) sets its range and rights and maps them with one KLM.
fn parse_umr(cur: &mut Cursor<'_>) -> Result<UmrBind, WqeFault> {
    let ctrl: UmrCtrlSeg = cur.seg(UmrCtrlSeg::SIZE)?;
    let mkey: MkeyContextSeg = cur.seg(MkeyContextSeg::SIZE)?;
    let flags = ctrl.flags;
    let mask = ctrl.mkey_mask.get();
    // Translations by pointer, translation offsets and BSFs (signature
    // offloads) are hardware features this device does not have.
    if flags & !UMR_FLAGS_KNOWN != 0
        || flags & umr::CTRL_FLAG_INLINE == 0
        || ctrl.translation_offset.get() != 0
        || mask & !UMR_MASK_KNOWN != 0
        || mask & umr::MKEY_MASK_FREE == 0
    {
        return Err(WqeFault::Unsupported);
    }
    let klm_bytes = usize::from(ctrl.klm_octowords.get()) * SEND_WQE_DS;
    let klms = cur.take(klm_bytes).map_err(|_| WqeFault::KlmOverrun)?;
    if !cur.done() {
        return Err(WqeFault::BadUmr);
    }
    let qpn_mkey = mkey.qpn_mkey.get();
    let mut bind = UmrBind {
        check_free: flags & umr::CTRL_FLAG_CHECK_FREE != 0,
        check_qpn: flags & umr::CTRL_FLAG_CHECK_QPN != 0,
        qpn: (mask & umr::MKEY_MASK_QPN != 0).then_some(qpn_mkey >> 8),
        variant: (mask & umr::MKEY_MASK_MKEY != 0).then_some(qpn_mkey as u8),
        range: None,
    };
    if mkey.free & umr::MKEY_CONTEXT_FREE != 0 {
        // A free has nothing to translate (`klm_octowords` 0: `get_klm_octo(0)`).
        return if klms.is_empty() {
            Ok(bind)
        } else {
            Err(WqeFault::BadUmr)
        };
    }
    if mask & UMR_MASK_BIND != UMR_MASK_BIND {
        return Err(WqeFault::Unsupported);
    }
    let (start_addr, len) = (mkey.start_addr.get(), mkey.len.get());
    // libmlx5 frees instead of binding nothing.
    if len == 0 || start_addr.checked_add(len).is_none() {
        return Err(WqeFault::BadUmr);
    }
    let first = klms.get(..UmrKlmSeg::SIZE).ok_or(WqeFault::BadUmr)?;
    let klm = UmrKlmSeg::read_from_bytes(first).map_err(|_| WqeFault::BadUmr)?;
    // One KLM covers up to 2 GiB (`mlx5dv.h`; `set_bind_wr` refuses longer
    // windows): a window spread over several KLMs is not implemented.
    if u64::from(klm.byte_count.get()) < len {
        return Err(WqeFault::Unsupported);
    }
    let access = MKEY_ACCESS
        .iter()
        .filter(|(bit, _)| mkey.access_flags & bit != 0)
        .fold(Access::NONE, |acc, (_, right)| acc | *right);
    bind.range = Some(UmrRange {
        access,
        start_addr,
        len,
        klm_mkey: klm.mkey.get(),
        klm_address: klm.address.get(),
    });
    Ok(bind)
}

fn parse_av(cur: &mut Cursor<'_>) -> Result<AvInfo, WqeFault> {
    let start = cur.pos;
    let base: AvBase = cur.seg(AvBase::SIZE)?;
    let mut info = AvInfo {
        qkey: base.qkey.get(),
        dqpn: base.dqp_dct.dqp_dct(),
        sl: base.stat_rate_sl.sl(),
        rlid: base.rlid.get(),
        grh: false,
        rmac: [0; 6],
        tclass: 0,
        hop_limit: 0,
        flow_label: 0,
        rgid: [0; 16],
    };
    if base.dqp_dct.extended() {
        // The full 48-byte AV (MLX5_EXTENDED_UD_AV; rdma-core always sends it).
        cur.pos = start;
        let full: Av = cur.seg(Av::SIZE)?;
        info.grh = full.grh_gid_fl.grh();
        info.rmac = full.rmac;
        info.tclass = full.tclass;
        info.hop_limit = full.hop_limit;
        info.flow_label = full.grh_gid_fl.flow_label();
        info.rgid = full.rgid;
    }
    Ok(info)
}

fn parse_atomic(cur: &mut Cursor<'_>, op: SendOpcode, opmod: u8) -> Result<AtomicOp, WqeFault> {
    Ok(match (op, opmod) {
        (SendOpcode::AtomicCs, _) => {
            let a: AtomicSeg = cur.seg(AtomicSeg::SIZE)?;
            AtomicOp::Cs {
                swap: a.swap_add.get(),
                compare: a.compare.get(),
            }
        }
        (SendOpcode::AtomicFa, _) => {
            let a: AtomicSeg = cur.seg(AtomicSeg::SIZE)?;
            AtomicOp::Fa {
                add: a.swap_add.get(),
            }
        }
        (SendOpcode::AtomicMaskedCs, OPC_MOD_EXT_ATOMIC_8B) => {
            let a: MaskedAtomicSeg64 = cur.seg(MaskedAtomicSeg64::SIZE)?;
            AtomicOp::MaskedCs {
                size: 8,
                swap: a.swap_add.get(),
                compare: a.compare.get(),
                swap_mask: a.swap_add_mask.get(),
                compare_mask: a.compare_mask.get(),
            }
        }
        (SendOpcode::AtomicMaskedCs, OPC_MOD_EXT_ATOMIC_4B) => {
            let a: MaskedCs32Seg = cur.seg(MaskedCs32Seg::SIZE)?;
            AtomicOp::MaskedCs {
                size: 4,
                swap: a.swap.get().into(),
                compare: a.compare.get().into(),
                swap_mask: a.swap_mask.get().into(),
                compare_mask: a.compare_mask.get().into(),
            }
        }
        (SendOpcode::AtomicMaskedFa, OPC_MOD_EXT_ATOMIC_8B) => {
            let a: MaskedFa64Seg = cur.seg(MaskedFa64Seg::SIZE)?;
            AtomicOp::MaskedFa {
                size: 8,
                add: a.add.get(),
                boundary: a.field_boundary.get(),
            }
        }
        (SendOpcode::AtomicMaskedFa, OPC_MOD_EXT_ATOMIC_4B) => {
            let a: MaskedFa32Seg = cur.seg(MaskedFa32Seg::SIZE)?;
            AtomicOp::MaskedFa {
                size: 4,
                add: a.add.get().into(),
                boundary: a.field_boundary.get().into(),
            }
        }
        _ => return Err(WqeFault::Unsupported),
    })
}

fn parse_eth(cur: &mut Cursor<'_>) -> Result<EthInfo, WqeFault> {
    let e: EthSeg = cur.seg(EthSeg::SIZE)?;
    let insert = e.vlan_insert();
    let mut info = EthInfo {
        cs_flags: e.cs_flags.into_bits(),
        swp_flags: e.swp_flags.into_bits(),
        mss: e.mss.get(),
        metadata: e.flow_table_metadata.get(),
        inline_hdr: Vec::new(),
        vlan: None,
    };
    if insert.insert() {
        // Bytes 12–15 are the VLAN-insert union member: no inline header.
        info.vlan = Some((insert.vlan_tci(), insert.svlan()));
        return Ok(info);
    }
    let sz = usize::from(e.inline_hdr_sz.get());
    let first = sz.min(2);
    info.inline_hdr
        .extend_from_slice(&e.inline_hdr_start[..first]);
    if sz > 2 {
        let rest_units = (sz - 2).div_ceil(SEND_WQE_DS) * SEND_WQE_DS;
        let rest = cur.take(rest_units).map_err(|_| WqeFault::InlineOverrun)?;
        info.inline_hdr.extend_from_slice(&rest[..sz - 2]);
    }
    Ok(info)
}

fn check_eth_header(ctx: &ParseCtx, kind: EthKind, eth: &EthInfo) -> Result<(), WqeFault> {
    let n = eth.inline_hdr.len();
    match kind {
        EthKind::Send => {
            // VLAN insertion stands in for the inline L2 header requirement
            // only when no minimum is imposed (DPDK inlines in software then).
            if n < usize::from(ctx.eth_min_inline) {
                return Err(WqeFault::EthInlineHeader);
            }
        }
        EthKind::Tso => {
            if n < 14 + 20 + 20 || n > usize::from(ctx.max_tso_header) || eth.mss == 0 {
                return Err(WqeFault::EthInlineHeader);
            }
        }
        EthKind::Mpw | EthKind::Empw => {
            // The session title carries no inline header (PRM-FACTS §6).
            if n != 0 {
                return Err(WqeFault::MpwSession);
            }
            if kind == EthKind::Mpw && eth.vlan.is_some() {
                return Err(WqeFault::MpwSession);
            }
        }
    }
    Ok(())
}

/// Reads data/inline segments to the end of the WQE.
fn data_segs(cur: &mut Cursor<'_>, allow_inline: bool) -> Result<Vec<Sge>, WqeFault> {
    let mut out = Vec::new();
    while !cur.done() {
        let head = cur
            .buf
            .get(cur.pos..cur.pos + 4)
            .ok_or(WqeFault::DsTooSmall)?;
        let bc = u32::from_be_bytes([head[0], head[1], head[2], head[3]]);
        if bc & INLINE_SEG != 0 {
            if !allow_inline {
                return Err(WqeFault::InlineNotAllowed);
            }
            let len = (bc & !INLINE_SEG) as usize;
            let units = (4 + len).div_ceil(SEND_WQE_DS) * SEND_WQE_DS;
            let seg = cur.take(units).map_err(|_| WqeFault::InlineOverrun)?;
            out.push(Sge::Inline(seg[4..4 + len].to_vec()));
        } else {
            let d: DataSeg = cur.seg(DataSeg::SIZE)?;
            out.push(Sge::Ptr {
                addr: d.addr.get(),
                lkey: d.lkey.get(),
                len: d.byte_count.get(),
            });
        }
    }
    Ok(out)
}
