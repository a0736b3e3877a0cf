//! From a parsed work request to the core's builder calls: resolving the
//! data (SGEs, inline bytes from `mem=`, frame headers) the way
//! `ibv_post_send` reads it, then one `Batch` builder, its setters and a
//! data setter.
#![forbid(unsafe_code)]

use super::input::{BindSpec, CsumSpec, MemSpec, OpKind, PktBuf, SgeSpec, WorkRequest};
use super::{EncodeConfig, Refused};
use mlx5dp::prm::Av;
use mlx5dp::sq::{Batch, DoorbellPolicy, FrameSge, MwBind, MwType, PostError, QpType, Sge};
use zerocopy::FromBytes;

/// Largest total SGE length of a raw Ethernet send the tool builds frames
/// for (the core takes a frame piece as a byte slice of its full length).
pub const MAX_FRAME_BYTES: u64 = 64 << 20;

/// A frame piece: an SGE with its bytes (only the inline-header part is
/// known; the rest is zero and never read).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FramePiece {
    lkey: u32,
    addr: u64,
    data: Vec<u8>,
}

/// The data of a work request, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Payload {
    /// No data (`num_sge = 0`).
    None,
    /// Pointer segments.
    Sges(Vec<Sge>),
    /// A raw Ethernet frame whose first bytes become the inline header.
    Frames(Vec<FramePiece>),
    /// Inline data (an `inline=` list, or `flags=inline` SGE bytes).
    Inline(Vec<Vec<u8>>),
    /// Inline data longer than the QP allows: refused, as libmlx5 refuses
    /// it (`ENOMEM`), without reading its bytes.
    InlineTooLong,
    /// A raw Ethernet send with no SGE: libmlx5's
    /// `copy_eth_inline_headers` refuses `num_sge < 1` (`EINVAL`).
    NoFrame,
    /// More SGEs than `--max-sge` in an `ibv_post_send` work request:
    /// `_mlx5_post_send` refuses it (`ENOMEM`) before it looks at the
    /// opcode's segments or the inline flag, so also when the SGEs' bytes
    /// would be copied inline.
    TooManySges,
}

/// A work request ready to post.
#[derive(Debug, Clone)]
pub struct Prepared {
    /// The work request as read.
    pub wr: WorkRequest,
    /// Its data.
    pub payload: Payload,
    /// Its address vector, as the core's type.
    pub av: Option<Av>,
    /// The packets of an `empw` / `mpw` line.
    pub pkts: Vec<SessionPkt>,
}

/// One packet of an `empw` / `mpw` line, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionPkt {
    /// Local key (0 for `inline:`).
    pub lkey: u32,
    /// Address (0 for `inline:`).
    pub addr: u64,
    /// Frame length.
    pub len: u32,
    /// The frame's bytes when known (`inline:`, or `ptr:` covered by
    /// `mem=`): the queue may inline the frame. `None`: pointer only.
    pub data: Option<Vec<u8>>,
    /// Given as `inline:`: it must be inlined (it has no address).
    pub inline_only: bool,
    /// Checksum offload (`:csum`, `:l3csum`, `:l4csum`, or the line's
    /// `flags=ip_csum`: L3 and L4).
    pub csum: CsumSpec,
}

/// The bytes `addr .. addr + len` from the line's `mem=` entries (a later
/// entry wins), or the first address none of them covers.
fn read_mem(mem: &[MemSpec], addr: u64, len: usize) -> Result<Vec<u8>, u128> {
    let start = u128::from(addr);
    let end = start + len as u128;
    let mut out = vec![0u8; len];
    let mut have = vec![false; len];
    for m in mem.iter().rev() {
        let m_start = u128::from(m.addr);
        let m_end = m_start + m.bytes.len() as u128;
        let lo = start.max(m_start);
        let hi = end.min(m_end);
        let mut a = lo;
        while a < hi {
            let (i, j) = ((a - start) as usize, (a - m_start) as usize);
            if let (Some(h), Some(o), Some(b)) = (have.get_mut(i), out.get_mut(i), m.bytes.get(j)) {
                if !*h {
                    *h = true;
                    *o = *b;
                }
            }
            a += 1;
        }
    }
    match have.iter().position(|h| !h) {
        Some(i) => Err(start + i as u128),
        None => Ok(out),
    }
}

/// Resolves the data of every work request (before anything is posted, so
/// that missing memory is an input error, not a half-posted batch).
pub fn prepare(cfg: &EncodeConfig, mut wr: WorkRequest) -> Result<Prepared, String> {
    if let OpKind::Invalid(_) = wr.op {
        // `ibv_post_send` refuses the opcode before it looks at anything
        // else of the work request.
        return Ok(Prepared {
            wr,
            payload: Payload::None,
            av: None,
            pkts: Vec::new(),
        });
    }
    if wr.op == OpKind::AtomicFa {
        wr.swap_add = Some(fa_addend(&wr)?);
    }
    let raw_qp = cfg.qp_type == QpType::RawPacket;
    if wr.op == OpKind::RawSend && !raw_qp {
        return Err("raw_send is a send on a raw Ethernet QP (--qp raw)".into());
    }
    let raw_send = raw_qp && matches!(wr.op, OpKind::Send | OpKind::RawSend | OpKind::Driver1);
    let av = match wr.av {
        Some(bytes) => Some(Av::read_from_bytes(&bytes).map_err(|_| "bad address vector")?),
        None => None,
    };
    if !wr.inline.is_empty() && !wr.sges.is_empty() {
        return Err("give the data as sge= or as inline=, not both".into());
    }
    // The bytes a raw send takes from the frame for its inline L2 header
    // (libmlx5 `eth_min_inline_size`); they do not count against the
    // inline limit (`set_data_inl_seg` starts after them).
    let header = if raw_send {
        usize::from(cfg.eth_min_inline)
    } else {
        0
    };
    let payload = if !cfg.abort_on_error && wr.sges.len() > cfg.max_sge as usize {
        Payload::TooManySges
    } else if !wr.inline.is_empty() {
        let total: usize = wr.inline.iter().map(Vec::len).sum();
        if total > cfg.max_inline as usize + header {
            Payload::InlineTooLong
        } else {
            Payload::Inline(wr.inline.clone())
        }
    } else if wr.sges.is_empty() {
        if raw_send {
            Payload::NoFrame
        } else {
            Payload::None
        }
    } else if wr.flags.inline {
        inline_from_sges(&wr, cfg.max_inline as usize + header)?
    } else if raw_send && header > 0 {
        frames(&wr, header)?
    } else {
        Payload::Sges(
            wr.sges
                .iter()
                .map(|g| Sge::new(g.lkey, g.addr, g.length))
                .collect(),
        )
    };
    let pkts = if wr.op.is_session() {
        if !raw_qp {
            return Err(format!(
                "op={} is a raw Ethernet burst (--qp raw)",
                wr.op.name()
            ));
        }
        session_pkts(&wr)?
    } else {
        Vec::new()
    };
    Ok(Prepared {
        wr,
        payload,
        av,
        pkts,
    })
}

/// The packets of a session line: `inline:` bytes, or `ptr:` with its
/// bytes when `mem=` covers the whole frame (none of it: pointer only).
fn session_pkts(wr: &WorkRequest) -> Result<Vec<SessionPkt>, String> {
    let mut out = Vec::with_capacity(wr.pkts.len());
    for (i, p) in wr.pkts.iter().enumerate() {
        let csum = if wr.flags.ip_csum {
            CsumSpec { l3: true, l4: true }
        } else {
            p.csum
        };
        out.push(match &p.buf {
            PktBuf::Inline(d) => SessionPkt {
                lkey: 0,
                addr: 0,
                len: d.len() as u32,
                data: Some(d.clone()),
                inline_only: true,
                csum,
            },
            PktBuf::Ptr(g) => {
                let covered = read_mem(&wr.mem, g.addr, 1).is_ok();
                let data = if covered {
                    if u64::from(g.length) > MAX_FRAME_BYTES {
                        return Err(format!(
                            "pkt {i}: the tool reads frames of at most {MAX_FRAME_BYTES} bytes"
                        ));
                    }
                    Some(read_mem(&wr.mem, g.addr, g.length as usize).map_err(|missing| {
                        format!(
                            "pkt {i}: mem= gives the start of the frame at {:#x} but not the byte at {missing:#x}",
                            g.addr
                        )
                    })?)
                } else {
                    None
                };
                SessionPkt {
                    lkey: g.lkey,
                    addr: g.addr,
                    len: g.length,
                    data,
                    inline_only: false,
                    csum,
                }
            }
        });
    }
    Ok(out)
}

/// `IBV_SEND_INLINE`: the SGEs' bytes, copied from `mem=`.
fn inline_from_sges(wr: &WorkRequest, limit: usize) -> Result<Payload, String> {
    let total: u64 = wr.sges.iter().map(|g| u64::from(g.length)).sum();
    if total > limit as u64 {
        return Ok(Payload::InlineTooLong);
    }
    let mut bufs = Vec::with_capacity(wr.sges.len());
    for g in &wr.sges {
        bufs.push(sge_bytes(wr, g, g.length as usize, "flags=inline copies")?);
    }
    Ok(Payload::Inline(bufs))
}

/// A raw Ethernet send: the SGEs as frame pieces, with the first `header`
/// bytes of the frame read from `mem=`.
fn frames(wr: &WorkRequest, header: usize) -> Result<Payload, String> {
    let total: u64 = wr.sges.iter().map(|g| u64::from(g.length)).sum();
    if total > MAX_FRAME_BYTES {
        return Err(format!(
            "a raw send of {total} bytes: the tool builds frames of at most {MAX_FRAME_BYTES} bytes"
        ));
    }
    let mut left = header;
    let mut pieces = Vec::with_capacity(wr.sges.len());
    for g in &wr.sges {
        let take = left.min(g.length as usize);
        let mut data = sge_bytes(wr, g, take, "a raw send copies the inline header from")?;
        data.resize(g.length as usize, 0);
        left -= take;
        pieces.push(FramePiece {
            lkey: g.lkey,
            addr: g.addr,
            data,
        });
    }
    Ok(Payload::Frames(pieces))
}

/// The first `len` bytes of an SGE, from the line's `mem=` entries.
fn sge_bytes(wr: &WorkRequest, g: &SgeSpec, len: usize, why: &str) -> Result<Vec<u8>, String> {
    read_mem(&wr.mem, g.addr, len).map_err(|missing| {
        format!(
            "{why} the SGE at {:#x}, but no mem= gives the byte at {missing:#x}",
            g.addr
        )
    })
}

/// Posts one prepared work request into the batch (one builder call, its
/// setters, one data setter).
pub fn post<P: DoorbellPolicy>(
    batch: &mut Batch<'_, '_, P>,
    qp: QpType,
    p: &Prepared,
) -> Result<(), Refused> {
    let wr = &p.wr;
    match p.payload {
        Payload::InlineTooLong => return Err(Refused::Post(PostError::InlineTooLong)),
        Payload::NoFrame => return Err(Refused::NoFrame),
        Payload::TooManySges => return Err(Refused::Post(PostError::TooManySges)),
        _ => {}
    }
    let id = wr.wr_id;
    let built = match wr.op {
        OpKind::Invalid(n) => return Err(Refused::InvalidOpcode(n)),
        OpKind::Send | OpKind::RawSend => batch.send(id),
        OpKind::SendImm => batch.send_imm(id, wr.imm),
        OpKind::SendInv => batch.send_inv(id, wr.invalidate_rkey),
        OpKind::RdmaWrite => batch.rdma_write(id, wr.rkey, wr.raddr),
        OpKind::RdmaWriteImm => batch.rdma_write_imm(id, wr.rkey, wr.raddr, wr.imm),
        OpKind::RdmaRead => batch.rdma_read(id, wr.rkey, wr.raddr),
        OpKind::AtomicCs => batch.atomic_cmp_swp(
            id,
            wr.rkey,
            wr.raddr,
            wr.compare.unwrap_or(0),
            wr.swap_add.unwrap_or(0),
        ),
        OpKind::AtomicFa => batch.atomic_fetch_add(id, wr.rkey, wr.raddr, wr.swap_add.unwrap_or(0)),
        OpKind::LocalInv => batch.local_inv(id, wr.invalidate_rkey),
        OpKind::BindMw => {
            let range = wr.bind.unwrap_or(BindSpec {
                addr: 0,
                length: 0,
                lkey: 0,
            });
            batch.bind_mw(
                id,
                &MwBind {
                    mw_type: if wr.mw_type == 1 {
                        MwType::Type1
                    } else {
                        MwType::Type2
                    },
                    mw_rkey: wr.mw_rkey,
                    new_rkey: wr.rkey,
                    mr_lkey: range.lkey,
                    addr: range.addr,
                    length: range.length,
                    access: wr.access,
                },
            )
        }
        OpKind::Nop => batch.nop(id),
        OpKind::Tso => batch.tso(id, &wr.hdr, wr.mss),
        OpKind::Driver1 => batch.driver1(id),
        // Bursts go through the Tx queue, never here.
        OpKind::Empw | OpKind::Mpw => Err(PostError::UnsupportedOp),
    };
    let mut w = built.map_err(Refused::Post)?;
    if wr.flags.signaled {
        w = w.signaled();
    }
    if wr.flags.solicited {
        w = w.solicited();
    }
    if wr.flags.fence {
        w = w.fence();
    }
    // libmlx5's `ibv_post_send` reads IBV_SEND_IP_CSUM on raw Ethernet QPs
    // only; elsewhere the flag is ignored.
    if wr.flags.ip_csum && qp == QpType::RawPacket {
        w = w.ip_csum().map_err(Refused::Post)?;
    }
    if let Some(tci) = wr.vlan {
        w = w.vlan(tci).map_err(Refused::Post)?;
    }
    if qp == QpType::Ud {
        if let Some(av) = &p.av {
            w = w
                .ud_addr(av, wr.remote_qpn, wr.remote_qkey)
                .map_err(Refused::Post)?;
        }
    }
    if qp == QpType::Xrc {
        if let Some(srqn) = wr.xrc_srqn {
            w = w.xrc_srqn(srqn).map_err(Refused::Post)?;
        }
    }
    let done = match &p.payload {
        Payload::None | Payload::InlineTooLong | Payload::NoFrame | Payload::TooManySges => {
            w.post()
        }
        Payload::Sges(list) => w.sge_list(list),
        Payload::Frames(pieces) => {
            let f: Vec<FrameSge<'_>> = pieces
                .iter()
                .map(|x| FrameSge::with_addr(x.lkey, x.addr, &x.data))
                .collect();
            w.frame_list(&f)
        }
        Payload::Inline(bufs) => {
            let s: Vec<&[u8]> = bufs.iter().map(Vec::as_slice).collect();
            w.inline_data_list(&s)
        }
    };
    done.map_err(Refused::Post)
}

/// The addend of a fetch-and-add: `swap_add=` (the atomic segment's field
/// it lands in), or `compare=` (`ibv_send_wr.wr.atomic.compare_add`, where
/// `ibv_post_send` takes it from); two different non-zero values are an error.
fn fa_addend(wr: &WorkRequest) -> Result<u64, String> {
    match (wr.swap_add, wr.compare) {
        (Some(a), Some(c)) if a != 0 && c != 0 && a != c => Err(
            "atomic_fa takes one addend: swap_add= (or compare=, as ibv_send_wr's compare_add), not two different ones"
                .into(),
        ),
        (Some(a), Some(c)) => Ok(if a != 0 { a } else { c }),
        (Some(a), None) | (None, Some(a)) => Ok(a),
        (None, None) => Ok(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mem(addr: u64, bytes: &[u8]) -> MemSpec {
        MemSpec {
            addr,
            bytes: bytes.to_vec(),
        }
    }

    #[test]
    fn later_mem_wins_and_gaps_are_named() {
        let m = [mem(0x10, &[1, 2, 3, 4]), mem(0x12, &[9])];
        assert_eq!(read_mem(&m, 0x10, 4), Ok(vec![1, 2, 9, 4]));
        assert_eq!(read_mem(&m, 0x12, 3), Err(0x14));
        assert_eq!(read_mem(&m, 0x0, 0), Ok(vec![]));
        let top = [mem(u64::MAX, &[7])];
        assert_eq!(read_mem(&top, u64::MAX, 2), Err(1u128 << 64));
    }
}
