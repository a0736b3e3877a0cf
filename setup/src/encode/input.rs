//! The input of `mlx5dp encode wqe`: one work request per line, `key=value`
//! fields separated by spaces; an empty line ends a batch.
//!
//! This module only reads text: it checks the syntax, the keys and the
//! ranges of the values, and returns [`WorkRequest`]s grouped in
//! [`Batch`]es. Whether the queue accepts a work request is decided later,
//! by the core (see the parent module).
//!
//! Panic policy: nothing here panics on any input; every problem is a
//! [`LineError`] naming the 1-based line.
#![forbid(unsafe_code)]

use std::fmt;

/// A problem with one input line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineError {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong, one line of text.
    pub message: String,
}

impl LineError {
    /// An error at `line`.
    pub fn new(line: usize, message: impl Into<String>) -> Self {
        Self {
            line,
            message: message.into(),
        }
    }
}

impl fmt::Display for LineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

impl std::error::Error for LineError {}

/// The operation of a work request (`op=`): the `ibv_wr_opcode`s libmlx5's
/// `ibv_post_send` takes, plus `nop` and `raw_send`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpKind {
    /// `send` (`IBV_WR_SEND`; on a raw Ethernet QP, a frame send).
    Send,
    /// `send_imm` (`IBV_WR_SEND_WITH_IMM`).
    SendImm,
    /// `send_inv` (`IBV_WR_SEND_WITH_INV`).
    SendInv,
    /// `rdma_write` (`IBV_WR_RDMA_WRITE`).
    RdmaWrite,
    /// `rdma_write_imm` (`IBV_WR_RDMA_WRITE_WITH_IMM`).
    RdmaWriteImm,
    /// `rdma_read` (`IBV_WR_RDMA_READ`).
    RdmaRead,
    /// `atomic_cs` (`IBV_WR_ATOMIC_CMP_AND_SWP`).
    AtomicCs,
    /// `atomic_fa` (`IBV_WR_ATOMIC_FETCH_AND_ADD`).
    AtomicFa,
    /// `local_inv` (`IBV_WR_LOCAL_INV`).
    LocalInv,
    /// `bind_mw` (`IBV_WR_BIND_MW`): a memory-window bind, as a UMR WQE.
    BindMw,
    /// `nop`: a control segment alone.
    Nop,
    /// `tso` (`IBV_WR_TSO`).
    Tso,
    /// `driver1` (`IBV_WR_DRIVER1`): libmlx5 v44's `ibv_post_send` posts a
    /// send's segments under the UMR opcode.
    Driver1,
    /// `raw_send`: a send on a raw Ethernet QP (same as `send` there).
    RawSend,
    /// `empw`: one burst of `pkt=` packets through the core's `TxQueue` in
    /// enhanced-MPW mode (raw Ethernet QPs).
    Empw,
    /// `mpw`: the same in legacy-MPW mode.
    Mpw,
    /// A numeric `op=` past the last `ibv_wr_opcode` libmlx5 knows
    /// (`IBV_WR_DRIVER1`, 11): `ibv_post_send` refuses it with `EINVAL`
    /// when it reaches it, after posting the work requests before it.
    Invalid(u32),
}

impl OpKind {
    /// The `op=` names, canonical first, with the `ibv_wr_opcode` spellings
    /// accepted as aliases.
    const NAMES: &'static [(&'static str, OpKind)] = &[
        ("send", OpKind::Send),
        ("send_imm", OpKind::SendImm),
        ("send_inv", OpKind::SendInv),
        ("rdma_write", OpKind::RdmaWrite),
        ("rdma_write_imm", OpKind::RdmaWriteImm),
        ("rdma_read", OpKind::RdmaRead),
        ("atomic_cs", OpKind::AtomicCs),
        ("atomic_fa", OpKind::AtomicFa),
        ("local_inv", OpKind::LocalInv),
        ("bind_mw", OpKind::BindMw),
        ("nop", OpKind::Nop),
        ("tso", OpKind::Tso),
        ("driver1", OpKind::Driver1),
        ("raw_send", OpKind::RawSend),
        ("empw", OpKind::Empw),
        ("mpw", OpKind::Mpw),
        ("send_with_imm", OpKind::SendImm),
        ("send_with_inv", OpKind::SendInv),
        ("rdma_write_with_imm", OpKind::RdmaWriteImm),
        ("atomic_cmp_and_swp", OpKind::AtomicCs),
        ("atomic_fetch_and_add", OpKind::AtomicFa),
    ];

    /// Parses an `op=` value: a name (case-insensitive), or an
    /// `ibv_wr_opcode` number (`0`-`11`; anything past `IBV_WR_DRIVER1`,
    /// 11, is [`OpKind::Invalid`]).
    pub fn parse(s: &str) -> Option<Self> {
        if let Some(&(_, op)) = Self::NAMES.iter().find(|(n, _)| n.eq_ignore_ascii_case(s)) {
            return Some(op);
        }
        // <infiniband/verbs.h> enum ibv_wr_opcode.
        Some(match parse_u32(s)? {
            0 => OpKind::RdmaWrite,
            1 => OpKind::RdmaWriteImm,
            2 => OpKind::Send,
            3 => OpKind::SendImm,
            4 => OpKind::RdmaRead,
            5 => OpKind::AtomicCs,
            6 => OpKind::AtomicFa,
            7 => OpKind::LocalInv,
            8 => OpKind::BindMw,
            9 => OpKind::SendInv,
            10 => OpKind::Tso,
            11 => OpKind::Driver1,
            n @ 12.. => OpKind::Invalid(n),
        })
    }

    /// Whether this is a multi-packet burst (`empw`, `mpw`).
    pub fn is_session(self) -> bool {
        matches!(self, OpKind::Empw | OpKind::Mpw)
    }

    /// The canonical `op=` name (`invalid` for [`OpKind::Invalid`]).
    pub fn name(self) -> &'static str {
        if let OpKind::Invalid(_) = self {
            return "invalid";
        }
        Self::NAMES
            .iter()
            .find(|&&(_, op)| op == self)
            .map_or("?", |&(n, _)| n)
    }
}

/// The `flags=` of a work request (`ibv_send_flags`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SendFlags {
    /// `signaled` (`IBV_SEND_SIGNALED`).
    pub signaled: bool,
    /// `solicited` (`IBV_SEND_SOLICITED`).
    pub solicited: bool,
    /// `fence` (`IBV_SEND_FENCE`).
    pub fence: bool,
    /// `inline` (`IBV_SEND_INLINE`): the SGEs' bytes go into the WQE.
    pub inline: bool,
    /// `ip_csum` (`IBV_SEND_IP_CSUM`).
    pub ip_csum: bool,
}

/// One `sge=ADDR:LEN:LKEY`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SgeSpec {
    /// Address.
    pub addr: u64,
    /// Length in bytes.
    pub length: u32,
    /// Local key.
    pub lkey: u32,
}

/// The window and range of a `bind_mw` (`bind=ADDR:LEN:LKEY`, `mw_rkey=`,
/// `mw_type=`, `access=`; the new rkey is `rkey=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BindSpec {
    /// `bind_info.addr`.
    pub addr: u64,
    /// `bind_info.length` (64 bits, as `ibv_mw_bind_info` has it).
    pub length: u64,
    /// `bind_info.mr`'s lkey.
    pub lkey: u32,
}

/// One `pkt=` of an `empw` / `mpw` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PktSpec {
    /// Where the frame is.
    pub buf: PktBuf,
    /// Checksum offload for this packet: `:csum` L3 and L4, `:l3csum` L3
    /// only, `:l4csum` L4 only.
    pub csum: CsumSpec,
}

/// The checksum offload a `pkt=` asks for (the Ethernet segment's
/// `cs_flags`: DPDK sets the L3 bit for `RTE_MBUF_F_TX_IP_CKSUM` and the L4
/// bit for a TCP/UDP checksum request, each on its own).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CsumSpec {
    /// L3 (IPv4 header) checksum.
    pub l3: bool,
    /// L4 (TCP/UDP) checksum.
    pub l4: bool,
}

/// The frame of a `pkt=`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PktBuf {
    /// `inline:HEX`: the frame's bytes, to be inlined.
    Inline(Vec<u8>),
    /// `ptr:ADDR:LEN:LKEY`: a frame in registered memory.
    Ptr(SgeSpec),
}

/// One `mem=ADDR:HEX`: memory contents at an address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemSpec {
    /// Address of `bytes[0]`.
    pub addr: u64,
    /// The contents.
    pub bytes: Vec<u8>,
}

/// One input line: a work request as an `ibv_send_wr` carries it. Fields
/// the operation does not use are ignored, as `ibv_post_send` ignores them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkRequest {
    /// 1-based input line.
    pub line: usize,
    /// `op=`.
    pub op: OpKind,
    /// `wr_id=` (default 0).
    pub wr_id: u64,
    /// `flags=`.
    pub flags: SendFlags,
    /// `imm=`: the immediate in host order (the WR carried `htobe32(imm)`).
    pub imm: u32,
    /// `invalidate_rkey=`.
    pub invalidate_rkey: u32,
    /// `raddr=`.
    pub raddr: u64,
    /// `rkey=`.
    pub rkey: u32,
    /// `compare=`.
    pub compare: Option<u64>,
    /// `swap_add=`.
    pub swap_add: Option<u64>,
    /// `sge=` entries, in order.
    pub sges: Vec<SgeSpec>,
    /// `inline=` entries, in order (an inline data list).
    pub inline: Vec<Vec<u8>>,
    /// `mem=` entries; a later one wins where two overlap.
    pub mem: Vec<MemSpec>,
    /// `remote_qpn=` (24 bits).
    pub remote_qpn: u32,
    /// `remote_qkey=`.
    pub remote_qkey: u32,
    /// `av=`: the 48-byte `struct mlx5_wqe_av` of the address handle.
    pub av: Option<[u8; 48]>,
    /// `xrc_srqn=`.
    pub xrc_srqn: Option<u32>,
    /// `mss=`.
    pub mss: u16,
    /// `hdr=`: the TSO header.
    pub hdr: Vec<u8>,
    /// `vlan=`: a VLAN TCI to insert (raw Ethernet send and TSO).
    pub vlan: Option<u16>,
    /// `pkt=` entries of an `empw` / `mpw` line, in order.
    pub pkts: Vec<PktSpec>,
    /// `bind=`: the range a `bind_mw` gives the window (none: an unbind,
    /// length 0).
    pub bind: Option<BindSpec>,
    /// `mw_rkey=`: the window's current rkey (`ibv_mw.rkey`).
    pub mw_rkey: u32,
    /// `mw_type=`: 1 or 2 (default 2, the only type `ibv_wr_bind_mw` builds).
    pub mw_type: u8,
    /// `access=`: the `ibv_access_flags` a `bind_mw` grants.
    pub access: u32,
}

impl WorkRequest {
    fn new(line: usize, op: OpKind) -> Self {
        Self {
            line,
            op,
            wr_id: 0,
            flags: SendFlags::default(),
            imm: 0,
            invalidate_rkey: 0,
            raddr: 0,
            rkey: 0,
            compare: None,
            swap_add: None,
            sges: Vec::new(),
            inline: Vec::new(),
            mem: Vec::new(),
            remote_qpn: 0,
            remote_qkey: 0,
            av: None,
            xrc_srqn: None,
            mss: 0,
            hdr: Vec::new(),
            vlan: None,
            pkts: Vec::new(),
            bind: None,
            mw_rkey: 0,
            mw_type: 2,
            access: 0,
        }
    }
}

/// The work requests between two empty lines: posted by one
/// `start` … `complete`, with one doorbell.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Batch {
    /// The work requests, in order.
    pub wrs: Vec<WorkRequest>,
}

/// Every key the input knows.
const KEYS: &[&str] = &[
    "op",
    "wr_id",
    "flags",
    "imm",
    "invalidate_rkey",
    "raddr",
    "rkey",
    "compare",
    "swap_add",
    "sge",
    "inline",
    "mem",
    "remote_qpn",
    "remote_qkey",
    "av",
    "xrc_srqn",
    "mss",
    "hdr",
    "vlan",
    "pkt",
    "bind",
    "mw_rkey",
    "mw_type",
    "access",
];

/// Keys that may appear more than once on a line.
const REPEATABLE: &[&str] = &["sge", "inline", "mem", "pkt"];

/// Parses the whole input into batches. Text from a `#` to the end of its
/// line is a comment; a line holding only a comment is skipped. A line with nothing but blanks ends the current batch; so does the
/// end of the input. Empty batches are dropped.
pub fn parse_input(text: &str) -> Result<Vec<Batch>, LineError> {
    let mut batches = Vec::new();
    let mut cur = Batch::default();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        if raw.trim().is_empty() {
            if !cur.wrs.is_empty() {
                batches.push(std::mem::take(&mut cur));
            }
            continue;
        }
        let body = match raw.find('#') {
            Some(at) => raw.get(..at).unwrap_or(""),
            None => raw,
        };
        if body.trim().is_empty() {
            continue; // a comment line does not end the batch
        }
        cur.wrs.push(parse_line(line, body)?);
    }
    if !cur.wrs.is_empty() {
        batches.push(cur);
    }
    Ok(batches)
}

/// Parses one work-request line.
pub fn parse_line(line: usize, text: &str) -> Result<WorkRequest, LineError> {
    let err = |m: String| LineError::new(line, m);
    let mut seen: Vec<&str> = Vec::new();
    let mut fields: Vec<(&str, &str)> = Vec::new();
    for token in text.split_ascii_whitespace() {
        let Some((key, value)) = token.split_once('=') else {
            return Err(err(format!("`{}` is not key=value", clip(token))));
        };
        let Some(&key) = KEYS.iter().find(|k| **k == key) else {
            return Err(err(format!(
                "unknown key `{}` (known: {})",
                clip(key),
                KEYS.join(" ")
            )));
        };
        if seen.contains(&key) && !REPEATABLE.contains(&key) {
            return Err(err(format!("`{key}` given twice")));
        }
        seen.push(key);
        fields.push((key, value));
    }
    let Some(&(_, op_text)) = fields.iter().find(|(k, _)| *k == "op") else {
        return Err(err("missing op= (one of send send_imm send_inv rdma_write rdma_write_imm rdma_read atomic_cs atomic_fa local_inv bind_mw nop tso raw_send empw mpw)".into()));
    };
    let Some(op) = OpKind::parse(op_text) else {
        return Err(err(format!("unknown op `{}`", clip(op_text))));
    };
    let mut wr = WorkRequest::new(line, op);
    for (key, value) in fields {
        let bad = |what: &str| err(format!("{key}=`{}`: {what}", clip(value)));
        match key {
            "op" => {}
            "wr_id" => wr.wr_id = parse_u64(value).ok_or_else(|| bad("not a 64-bit integer"))?,
            "flags" => wr.flags = parse_flags(value).map_err(|f| bad(&f))?,
            "imm" => wr.imm = parse_u32(value).ok_or_else(|| bad("not a 32-bit integer"))?,
            "invalidate_rkey" => {
                wr.invalidate_rkey = parse_u32(value).ok_or_else(|| bad("not a 32-bit integer"))?
            }
            "raddr" => wr.raddr = parse_u64(value).ok_or_else(|| bad("not a 64-bit integer"))?,
            "rkey" => wr.rkey = parse_u32(value).ok_or_else(|| bad("not a 32-bit integer"))?,
            "compare" => {
                wr.compare = Some(parse_u64(value).ok_or_else(|| bad("not a 64-bit integer"))?)
            }
            "swap_add" => {
                wr.swap_add = Some(parse_u64(value).ok_or_else(|| bad("not a 64-bit integer"))?)
            }
            "sge" => wr.sges.push(parse_sge(value).map_err(|m| bad(&m))?),
            "inline" => wr.inline.push(parse_hex(value).map_err(|m| bad(&m))?),
            "mem" => wr.mem.push(parse_mem(value).map_err(|m| bad(&m))?),
            "remote_qpn" => {
                wr.remote_qpn = parse_u32(value)
                    .filter(|&n| n <= 0x00ff_ffff)
                    .ok_or_else(|| bad("not a 24-bit QP number"))?
            }
            "remote_qkey" => {
                wr.remote_qkey = parse_u32(value).ok_or_else(|| bad("not a 32-bit integer"))?
            }
            "av" => {
                let bytes = parse_hex(value).map_err(|m| bad(&m))?;
                let av: [u8; 48] = bytes.try_into().map_err(|b: Vec<u8>| {
                    bad(&format!(
                        "an address vector is 48 bytes (struct mlx5_wqe_av), not {}",
                        b.len()
                    ))
                })?;
                wr.av = Some(av);
            }
            "xrc_srqn" => {
                wr.xrc_srqn = Some(parse_u32(value).ok_or_else(|| bad("not a 32-bit integer"))?)
            }
            "mss" => {
                wr.mss = parse_u64(value)
                    .and_then(|n| u16::try_from(n).ok())
                    .ok_or_else(|| bad("not a 16-bit integer"))?
            }
            "hdr" => wr.hdr = parse_hex(value).map_err(|m| bad(&m))?,
            "vlan" => {
                wr.vlan = Some(
                    parse_u64(value)
                        .and_then(|n| u16::try_from(n).ok())
                        .ok_or_else(|| bad("not a 16-bit VLAN TCI"))?,
                )
            }
            "pkt" => wr.pkts.push(parse_pkt(value).map_err(|m| bad(&m))?),
            "bind" => wr.bind = Some(parse_bind(value).map_err(|m| bad(&m))?),
            "mw_rkey" => {
                wr.mw_rkey = parse_u32(value).ok_or_else(|| bad("not a 32-bit integer"))?
            }
            "mw_type" => {
                wr.mw_type = match value {
                    "1" => 1,
                    "2" => 2,
                    _ => return Err(bad("a memory window is of type 1 or 2")),
                }
            }
            "access" => wr.access = parse_access(value).map_err(|m| bad(&m))?,
            _ => return Err(err(format!("unknown key `{key}`"))),
        }
    }
    if op.is_session() {
        if wr.pkts.is_empty() {
            return Err(err(format!("op={} needs at least one pkt=", op.name())));
        }
        if !wr.sges.is_empty() || !wr.inline.is_empty() {
            return Err(err(format!(
                "op={} takes its packets as pkt=, not sge= or inline=",
                op.name()
            )));
        }
    } else if !wr.pkts.is_empty() {
        return Err(err("pkt= belongs to op=empw and op=mpw lines".into()));
    }
    Ok(wr)
}

/// `inline:HEX[:CS]` or `ptr:ADDR:LEN:LKEY[:CS]`, CS one of `csum`,
/// `l3csum`, `l4csum`.
fn parse_pkt(s: &str) -> Result<PktSpec, String> {
    let suffixes = [
        (":csum", CsumSpec { l3: true, l4: true }),
        (
            ":l3csum",
            CsumSpec {
                l3: true,
                l4: false,
            },
        ),
        (
            ":l4csum",
            CsumSpec {
                l3: false,
                l4: true,
            },
        ),
    ];
    let (body, csum) = suffixes
        .iter()
        .find_map(|(sfx, cs)| s.strip_suffix(sfx).map(|b| (b, *cs)))
        .unwrap_or((s, CsumSpec::default()));
    let buf = if let Some(h) = body.strip_prefix("inline:") {
        PktBuf::Inline(parse_hex(h)?)
    } else if let Some(g) = body.strip_prefix("ptr:") {
        PktBuf::Ptr(parse_sge(g).map_err(|_| "a pointer packet is ptr:ADDR:LEN:LKEY[:csum]")?)
    } else {
        return Err("a packet is inline:HEX[:csum] or ptr:ADDR:LEN:LKEY[:csum]".into());
    };
    Ok(PktSpec { buf, csum })
}

/// At most 40 characters of user text, for messages.
fn clip(s: &str) -> String {
    let mut out: String = s.chars().take(40).collect();
    if s.chars().count() > 40 {
        out.push('…');
    }
    out
}

/// An unsigned integer in decimal or `0x` hex (`_` allowed as a separator).
pub fn parse_u64(s: &str) -> Option<u64> {
    let s = s.trim();
    let (digits, radix) = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => (h, 16),
        None => (s, 10),
    };
    let digits: String = digits.chars().filter(|&c| c != '_').collect();
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    u64::from_str_radix(&digits, radix).ok()
}

/// [`parse_u64`] limited to 32 bits.
pub fn parse_u32(s: &str) -> Option<u32> {
    parse_u64(s).and_then(|n| u32::try_from(n).ok())
}

/// Plain hex bytes (an even number of hex digits; empty is no bytes).
pub fn parse_hex(s: &str) -> Result<Vec<u8>, String> {
    let s = s
        .strip_prefix("0x")
        .or_else(|| s.strip_prefix("0X"))
        .unwrap_or(s);
    if s.len() % 2 != 0 {
        return Err("an odd number of hex digits".into());
    }
    s.as_bytes()
        .chunks(2)
        .map(|pair| {
            std::str::from_utf8(pair)
                .ok()
                .and_then(|p| u8::from_str_radix(p, 16).ok())
                .ok_or_else(|| "not hex bytes".to_string())
        })
        .collect()
}

fn parse_flags(s: &str) -> Result<SendFlags, String> {
    let mut f = SendFlags::default();
    for name in s.split([',', '|']).filter(|n| !n.is_empty()) {
        match name.to_ascii_lowercase().as_str() {
            "signaled" => f.signaled = true,
            "solicited" => f.solicited = true,
            "fence" => f.fence = true,
            "inline" => f.inline = true,
            "ip_csum" => f.ip_csum = true,
            "none" => {}
            other => {
                return Err(format!(
                    "unknown flag `{}` (known: signaled solicited fence inline ip_csum)",
                    clip(other)
                ))
            }
        }
    }
    Ok(f)
}

/// `ADDR:LEN:LKEY` as address, length (`parse_len`: 32 or 64 bits, with
/// its error) and lkey; `what` names the value in the shape error.
fn parse_addr_len_key<L>(
    s: &str,
    what: &str,
    parse_len: impl Fn(&str) -> Option<L>,
    len_error: &'static str,
) -> Result<(u64, L, u32), String> {
    let mut parts = s.split(':');
    let (Some(a), Some(l), Some(k), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(format!("{what} is ADDR:LEN:LKEY"));
    };
    Ok((
        parse_u64(a).ok_or("the address is not a 64-bit integer")?,
        parse_len(l).ok_or(len_error)?,
        parse_u32(k).ok_or("the lkey is not a 32-bit integer")?,
    ))
}

/// `ADDR:LEN:LKEY` (an `sge=` value).
pub fn parse_sge(s: &str) -> Result<SgeSpec, String> {
    let (addr, length, lkey) =
        parse_addr_len_key(s, "an SGE", parse_u32, "the length is not a 32-bit integer")?;
    Ok(SgeSpec { addr, length, lkey })
}

/// `ADDR:LEN:LKEY` (a `bind=` value; the length is 64 bits).
fn parse_bind(s: &str) -> Result<BindSpec, String> {
    let (addr, length, lkey) = parse_addr_len_key(
        s,
        "a bound range",
        parse_u64,
        "the length is not a 64-bit integer",
    )?;
    Ok(BindSpec { addr, length, lkey })
}

/// `ibv_access_flags`: a comma list of `local_write remote_write
/// remote_read remote_atomic mw_bind zero_based`, or a number.
fn parse_access(s: &str) -> Result<u32, String> {
    if let Some(n) = parse_u32(s) {
        return Ok(n);
    }
    let mut bits = 0;
    for name in s.split([',', '|']).filter(|n| !n.is_empty()) {
        bits |= match name.to_ascii_lowercase().as_str() {
            "local_write" => 1 << 0,
            "remote_write" => 1 << 1,
            "remote_read" => 1 << 2,
            "remote_atomic" => 1 << 3,
            "mw_bind" => 1 << 4,
            "zero_based" => 1 << 5,
            "none" => 0,
            other => {
                return Err(format!(
                    "unknown access flag `{}` (known: local_write remote_write remote_read remote_atomic mw_bind zero_based, or a number)",
                    clip(other)
                ))
            }
        };
    }
    Ok(bits)
}

fn parse_mem(s: &str) -> Result<MemSpec, String> {
    let Some((a, h)) = s.split_once(':') else {
        return Err("memory contents are ADDR:HEX".into());
    };
    let addr = parse_u64(a).ok_or("the address is not a 64-bit integer")?;
    let bytes = parse_hex(h)?;
    if u128::from(addr) + bytes.len() as u128 > 1u128 << 64 {
        return Err("the bytes run past the end of the address space".into());
    }
    Ok(MemSpec { addr, bytes })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers() {
        assert_eq!(parse_u64("0x10"), Some(16));
        assert_eq!(parse_u64("1_000"), Some(1000));
        assert_eq!(parse_u64("0x"), None);
        assert_eq!(parse_u64("-1"), None);
        assert_eq!(parse_u64("18446744073709551616"), None);
        assert_eq!(parse_u32("0x100000000"), None);
    }

    #[test]
    fn a_full_line() {
        let wr = parse_line(
            3,
            "op=RDMA_WRITE_WITH_IMM wr_id=7 flags=signaled,fence imm=0x11 raddr=0x1000 rkey=5 sge=0x10:4:9 sge=0x20:0:9 mem=0x10:aabbccdd",
        )
        .unwrap();
        assert_eq!(wr.op, OpKind::RdmaWriteImm);
        assert!(wr.flags.signaled && wr.flags.fence && !wr.flags.inline);
        assert_eq!(wr.sges.len(), 2);
        assert_eq!(wr.mem[0].bytes, [0xaa, 0xbb, 0xcc, 0xdd]);
    }

    #[test]
    fn opcode_numbers_follow_ibv_wr_opcode() {
        assert_eq!(OpKind::parse("11"), Some(OpKind::Driver1));
        assert_eq!(OpKind::parse("DRIVER1"), Some(OpKind::Driver1));
        assert_eq!(OpKind::parse("10"), Some(OpKind::Tso));
        assert_eq!(OpKind::parse("8"), Some(OpKind::BindMw));
        assert_eq!(OpKind::parse("12"), Some(OpKind::Invalid(12)));
    }

    #[test]
    fn session_lines() {
        let wr = parse_line(
            1,
            "op=empw wr_id=9 flags=ip_csum,signaled pkt=inline:0011 pkt=ptr:0x1000:64:7:csum",
        )
        .unwrap();
        assert_eq!(wr.op, OpKind::Empw);
        assert_eq!(wr.pkts.len(), 2);
        assert_eq!(wr.pkts[0].buf, PktBuf::Inline(vec![0, 0x11]));
        assert_eq!(wr.pkts[0].csum, CsumSpec::default());
        assert_eq!(wr.pkts[1].csum, CsumSpec { l3: true, l4: true });
        assert!(
            matches!(wr.pkts[1].buf, PktBuf::Ptr(g) if g.addr == 0x1000 && g.length == 64 && g.lkey == 7)
        );
        let two = parse_line(
            1,
            "op=empw pkt=ptr:0x1000:64:7:l3csum pkt=ptr:0x2000:64:7:l4csum",
        )
        .unwrap();
        assert_eq!(
            two.pkts[0].csum,
            CsumSpec {
                l3: true,
                l4: false
            }
        );
        assert_eq!(
            two.pkts[1].csum,
            CsumSpec {
                l3: false,
                l4: true
            }
        );
    }

    #[test]
    fn batches_and_comments() {
        let b = parse_input("# c\nop=nop\n  # c\nop=nop # trailing\n\n\n op=send\n").unwrap();
        assert_eq!(b.len(), 2);
        assert_eq!(b[0].wrs.len(), 2);
        assert_eq!(b[1].wrs[0].line, 7);
    }

    #[test]
    fn errors_name_the_line() {
        for bad in [
            "op=send x",
            "op=send foo=1",
            "op=frob",
            "wr_id=1",
            "op=send op=send",
            "op=send sge=1:2",
            "op=send inline=abc",
            "op=send av=00",
            "op=send remote_qpn=0x1000000",
            "op=send flags=signalled",
            "op=send mem=0xffffffffffffffff:0000",
            "op=send mss=65536",
            "op=empw",
            "op=empw pkt=foo:00",
            "op=empw pkt=ptr:1:2",
            "op=empw pkt=inline:0 ",
            "op=send pkt=inline:00",
            "op=mpw pkt=inline:00 sge=1:2:3",
        ] {
            let e = parse_input(&format!("\n{bad}")).unwrap_err();
            assert_eq!(e.line, 2, "{bad}");
            assert!(e.to_string().starts_with("line 2: "), "{e}");
        }
    }
}
