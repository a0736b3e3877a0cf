//! The `mlx5dp encode` subcommand: its arguments and what it prints.
//!
//! As for `decode`, `main.rs` only dispatches here: [`run`] takes the
//! arguments and standard input and returns an [`Outcome`]: the text for
//! standard output (also when a work request was refused: what was posted
//! before it) and, on failure, a [`CliError`] whose `Display` is the one-line
//! message and whose [`CliError::exit_code`] is the exit status.
#![forbid(unsafe_code)]

use super::input::parse_u64;
use super::recv::{self, RecvConfig, RecvRefusal};
use super::{encode, EncodeConfig, EncodeError, Refusal};
use mlx5dp::sq::QpType;
use std::fmt;
use std::io::Read;

const WQE_ABOUT: &str = "Print the exact WQEs, doorbell-record values and register writes the \
mlx5dp core posts for a list of work requests. They are posted through the core's send-queue \
API into a queue whose SQ buffer, doorbell record and 4 KiB UAR page are ordinary memory; what \
is printed is read back from that memory.";

const WQE_HELP: &str = "\
INPUT
  One work request per line: key=value fields separated by spaces. An empty line ends a batch
  (one start ... complete, one doorbell); so does the end of the input. `#` starts a comment.
  Integers are decimal or 0x-hex; byte strings are plain hex. Fields an operation does not use
  are ignored, as ibv_post_send ignores them.

  op=        send send_imm send_inv rdma_write rdma_write_imm rdma_read atomic_cs atomic_fa
             local_inv bind_mw nop tso driver1 raw_send, empw mpw (see below) (the ibv_wr_opcode
             names, e.g. send_with_imm, work too; on --qp raw, send is a raw Ethernet send like
             raw_send; driver1 is IBV_WR_DRIVER1 as libmlx5 v44's ibv_post_send posts it: a send's
             segments under the UMR opcode); or the ibv_wr_opcode number (0-11); a number past
             IBV_WR_DRIVER1 (12 on) is
             refused with EINVAL when its turn comes, after the
             work requests before it are posted, as ibv_post_send does
  wr_id=     the work request id (kept in the queue's shadow; not in the WQE)
  flags=     comma list of signaled solicited fence inline ip_csum (ibv_send_flags;
             ip_csum is read on raw Ethernet QPs only, as libmlx5 does)
  imm=       immediate data in host order (the WR carried htobe32(imm))
  invalidate_rkey=  for send_inv and local_inv
  raddr= rkey=      remote address and key (RDMA and atomics); for bind_mw, rkey= is the
             window's new rkey (bind_mw.rkey: its low byte becomes the mkey variant)
  bind=ADDR:LEN:LKEY  bind_mw: the range the window gets (bind_info addr, length, and the lkey
             of its memory region); none or LEN 0 unbinds it. LEN over 2 GiB (one KLM) is refused
             with EOPNOTSUPP, as libmlx5 refuses it
  mw_rkey=   bind_mw: the window's current rkey (ibv_mw.rkey), carried in the immediate
  mw_type=   bind_mw: 1 or 2 (default 2, the only type ibv_wr_bind_mw builds)
  access=    bind_mw: comma list of local_write remote_write remote_read remote_atomic
             zero_based (ibv_access_flags; mw_bind accepted and ignored), or a number
  compare= swap_add= atomic operands: atomic_cs compares with compare= and swaps in swap_add=;
             atomic_fa adds swap_add= (compare= is accepted instead: ibv_send_wr's compare_add)
  sge=ADDR:LEN:LKEY  a scatter/gather entry (repeatable, in order)
  inline=HEX an inline data buffer (repeatable: an inline data list, as
             ibv_wr_set_inline_data_list); the bytes go into the WQE
  mem=ADDR:HEX  memory contents at ADDR (repeatable; a later one wins), for the bytes the WQE
             copies from memory: with flags=inline every SGE's bytes are copied inline
             (IBV_SEND_INLINE); a raw Ethernet send copies the first --eth-min-inline bytes of
             the frame into the Ethernet segment, as libmlx5 does, and the pointer segments start
             after them. mem= applies to its own line only.
  remote_qpn= remote_qkey= av=HEX  UD destination: av= is the 48-byte struct mlx5_wqe_av of the
             address handle; the remote QPN (with the extended-AV bit) and Q_Key are written over it
  xrc_srqn=  the remote XRC SRQ number (XRC)
  mss= hdr=HEX  TSO: segment size and the L2-L4 header inlined in the Ethernet segment
  vlan=TCI  raw send / TSO: insert a VLAN tag (the Ethernet segment's VLAN-insert request, or
             the tag written into the inline header when the queue inlines one)

MULTI-PACKET BURSTS (--qp raw)
  op=empw / op=mpw: one line is one burst of packets posted through the core's Tx queue
  (mlx5dp::sq::mpw::TxQueue) in enhanced-MPW / legacy-MPW mode, with one doorbell; the queue
  packs the packets into sessions (one WQE each) as its rules say, and a packet no session can
  take goes out as its own SEND WQE. Every WQE is printed as above. An input with such lines
  holds only lines of that one op (blank lines change nothing: each line is its own burst).
  pkt=inline:HEX[:CS]   a frame given by its bytes; it has no address, so it must be
             inlined: at most --empw-inline-max bytes
  pkt=ptr:ADDR:LEN:LKEY[:CS]  a frame in registered memory: sent by pointer, or inlined
             when its length is at most --empw-inline-max and a mem= gives its bytes
             (mem= must then cover the whole frame)
             (repeatable, in order; CS: checksum offload for that packet, `csum` L3 and L4,
             `l3csum` L3 only, `l4csum` L4 only, as DPDK's IP_CKSUM / TCP,UDP_CKSUM flags set
             them; packets with other offloads start a new session)
  flags=     ip_csum: checksum offload for every packet; signaled: every WQE of the burst
             requests a CQE (otherwise DPDK's burst-end rule: only the last WQE of a burst
             requests one, once 32 packets DPDK keeps (on a queue that inlines: every packet
             from a burst's first pointer packet on), --empw-wqe-thres WQEBBs, or half the
             ring or id ring went unsignalled)
  wr_id=     the id of the first packet (the next ones count up)
  A packet the queue refuses (empty, or 18 bytes or less on a queue that inlines: with
  --empw-inline-max 0 and --empw-inline-send 0 short frames go by pointer, as DPDK's pointer
  routines take them; the queue full) ends the run after
  the packets before it in its burst were posted. After each burst the device completes it
  (with --no-completions it completes nothing: later bursts find the ring fuller).

OUTPUT
  Per WQE: its WQE index (the 16-bit counter of its control segment; the ring slot is the index
  modulo --sq-wqebbs), its WQEBB count, its DS count, and the bytes of every WQEBB it occupies,
  in posting order (a WQE that wraps continues at slot 0). The ring starts filled with 00. A
  work request's WQE has every byte of its WQEBBs written (padding and the tail of the last
  WQEBB as 00); an empw/mpw session writes no padding (an inline segment's bytes past its byte
  count, the tail after the DS count, as DPDK): those print what the ring held, 00 until it wraps.
  After each batch: the SQ doorbell-record value (cur_post & 0xffff) and the register write:
  `db` (8 bytes: the start of the last WQE's control segment) or `bf` (the BlueFlame copy of
  the WQE, whole 64-byte chunks), at its offset in the 4 KiB UAR page (--bf-reg + the
  BlueFlame half: the halves alternate after every doorbell).
  With --json, one object per line:
    {\"wqe_index\":N,\"wqebbs\":N,\"ds\":N,\"hex\":\"...\"}
    {\"dbrec\":N,\"mmio\":{\"kind\":\"db\"|\"bf\",\"offset\":N,\"hex\":\"...\"}}

  BlueFlame follows libmlx5's rule: a batch of one WQE of more than one DS that fits the
  BlueFlame half (ds * 16 <= --bf-size), and that carries inline data (or any such WQE with
  --prefer-bf). After each batch the simulated device completes every WQE (with
  --no-completions none: the ring fills, and --max-post counts every work request posted).

ERRORS
  A malformed line (unknown key, bad value, an SGE whose bytes are needed but not given by
  mem=) prints `line N: ...` and nothing else, exit status 2. A work request the queue refuses
  (e.g. inline data over --max-inline) prints `line N: work request refused (ERRNO): ...` after
  the WQEs and doorbell of the work requests before it in its batch (as ibv_post_send posts
  them; --abort-on-error discards the batch, as ibv_wr_complete does), exit status 2.
  Differences from libmlx5 v44 kept on purpose: the refused work request writes nothing (the
  core leaves the queue as it was; libmlx5 leaves its partial WQE in the ring), and the doorbell
  after it carries the last posted WQE's control segment (libmlx5 rings with the refused one's).
  A TSO header that wraps the ring's end is followed by the next segment where the DS count
  says (libmlx5 v44 writes it 32 bytes further on).

EXAMPLE
  printf 'op=send flags=signaled sge=0x200001000:256:0x1234\\n' |
    mlx5dp encode wqe --qp rc --qpn 0x123 --sq-wqebbs 64 --pi 0 --json
  printf 'op=empw flags=ip_csum pkt=ptr:0x10000:64:0x7 pkt=ptr:0x10040:1500:0x7\n' |
    mlx5dp encode wqe --qp raw --qpn 0x44 --sq-wqebbs 64 --pi 0";

/// The QP types of `--qp`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum QpArg {
    /// Reliable connected.
    Rc,
    /// Unreliable connected.
    Uc,
    /// Unreliable datagram.
    Ud,
    /// XRC initiator (XRC_SEND).
    Xrc,
    /// Raw Ethernet (RAW_PACKET).
    Raw,
}

impl QpArg {
    /// The core's QP type.
    pub fn qp_type(self) -> QpType {
        match self {
            QpArg::Rc => QpType::Rc,
            QpArg::Uc => QpType::Uc,
            QpArg::Ud => QpType::Ud,
            QpArg::Xrc => QpType::Xrc,
            QpArg::Raw => QpType::RawPacket,
        }
    }
}

/// `mlx5dp encode`: build hardware entries from a description.
#[derive(Debug, Clone, clap::Args)]
pub struct EncodeArgs {
    /// What to encode.
    #[command(subcommand)]
    pub what: EncodeWhat,
}

/// The entries `mlx5dp encode` builds.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum EncodeWhat {
    /// Send WQEs and doorbells for work requests, as the core posts them.
    #[command(long_about = WQE_ABOUT, after_long_help = WQE_HELP)]
    Wqe(WqeArgs),
    /// Receive WQEs and the RQ doorbell record for receive work requests, as
    /// the core's receive queue posts them (ibv_post_recv on a QP's RQ).
    #[command(after_long_help = RECV_HELP)]
    Recv(RecvArgs),
}

const RECV_HELP: &str = "\
INPUT
  One receive work request per line: wr_id=N and sge=ADDR:LEN:LKEY (repeatable, in order).
  An empty line ends a batch (one ibv_post_recv call: one doorbell-record update); so does the
  end of the input. `#` starts a comment.

OUTPUT
  Per WQE: the RQ head counter it was posted at, its ring slot and the bytes of its whole
  stride (data segments: byte count, lkey, address, big-endian; zero-length SGEs skipped; a
  terminator, byte count 0 and lkey 0x100, after the last one when the stride holds more). After
  each batch: the doorbell-record value (head & 0xffff), or that it was not written (a raw
  Ethernet QP before RTR). With --json: {\"rq_index\":N,\"slot\":N,\"hex\":\"...\"}
  per WQE and {\"dbrec\":N|null} per batch.

ERRORS
  A malformed line prints `line N: ...`, exit status 2. A work request libmlx5 would refuse
  (ENOMEM: --max-post or more outstanding; EINVAL: more SGEs than the stride holds, or any
  work request on a QP in RESET) prints
  `line N: work request refused (ERRNO): ...` after the WQEs and doorbell record of the work
  requests before it in its batch, exit status 2.

EXAMPLE
  printf 'wr_id=1 sge=0x200001000:4096:0x3000\\n' |
    mlx5dp encode recv --rq-wqes 64 --wqe-shift 5 --head 0 --json";

/// The QP state of `--state` (libmlx5 leaves the record alone on a raw
/// Ethernet QP before RTR, and refuses every receive in RESET).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum QpStateArg {
    /// RESET (libmlx5 refuses every receive work request: EINVAL).
    Reset,
    /// INIT.
    Init,
    /// RTR.
    Rtr,
    /// RTS.
    Rts,
    /// SQD (send queue drained).
    Sqd,
    /// SQE (send queue error).
    Sqe,
    /// ERR, reached from INIT or later.
    Err,
}

/// `mlx5dp encode recv`.
#[derive(Debug, Clone, clap::Args)]
pub struct RecvArgs {
    /// QP type (a raw Ethernet QP before RTR leaves the doorbell record
    /// alone).
    #[arg(long, value_enum, default_value = "rc")]
    pub qp: QpArg,
    /// QP state.
    #[arg(long, value_enum, default_value = "rts")]
    pub state: QpStateArg,
    /// RQ size in WQEs (a power of two).
    #[arg(long, value_parser = num_u32)]
    pub rq_wqes: u32,
    /// log2 of the RQ WQE stride in bytes (rq.wqe_shift): 4 holds one data
    /// segment, 5 two, and so on.
    #[arg(long, value_parser = num_u8)]
    pub wqe_shift: u8,
    /// The RQ head counter before the first work request (rq.head).
    #[arg(long, value_parser = num_u32, default_value = "0")]
    pub head: u32,
    /// Receive work requests outstanding before the first batch
    /// (rq.head - rq.tail, modulo 2^32); --max-post or more: every work
    /// request is refused (ENOMEM), as libmlx5's mlx5_wq_overflow does.
    #[arg(long, value_parser = num_u32, default_value = "0")]
    pub outstanding: u32,
    /// libmlx5's rq.max_post, 0 to --rq-wqes; default: --rq-wqes.
    #[arg(long, value_parser = num_u32)]
    pub max_post: Option<u32>,
    /// One JSON object per line.
    #[arg(long)]
    pub json: bool,
    /// The work requests; none or `-` reads standard input.
    #[arg(value_name = "FILE")]
    pub file: Option<String>,
}

impl RecvArgs {
    /// The encoder's configuration.
    pub fn config(&self) -> RecvConfig {
        RecvConfig {
            rq_wqes: self.rq_wqes,
            wqe_shift: self.wqe_shift,
            head: self.head,
            outstanding: self.outstanding,
            max_post: self.max_post.unwrap_or(self.rq_wqes),
            doorbell: !(self.qp == QpArg::Raw
                && matches!(self.state, QpStateArg::Reset | QpStateArg::Init)),
            reset: self.state == QpStateArg::Reset,
        }
    }
}

/// A 32-bit option value, decimal or `0x` hex.
pub(crate) fn num_u32(s: &str) -> Result<u32, String> {
    parse_u64(s)
        .and_then(|n| u32::try_from(n).ok())
        .ok_or_else(|| format!("`{s}` is not a 32-bit integer (decimal or 0x-hex)"))
}

fn num_u16(s: &str) -> Result<u16, String> {
    parse_u64(s)
        .and_then(|n| u16::try_from(n).ok())
        .ok_or_else(|| format!("`{s}` is not a 16-bit integer (decimal or 0x-hex)"))
}

fn num_u8(s: &str) -> Result<u8, String> {
    parse_u64(s)
        .and_then(|n| u8::try_from(n).ok())
        .ok_or_else(|| format!("`{s}` is not an 8-bit integer (decimal or 0x-hex)"))
}

/// `mlx5dp encode wqe`.
#[derive(Debug, Clone, clap::Args)]
pub struct WqeArgs {
    /// QP type: decides the segments after the control segment.
    #[arg(long, value_enum)]
    pub qp: QpArg,
    /// QP number (24 bits), written in every control segment.
    #[arg(long, value_parser = num_u32)]
    pub qpn: u32,
    /// Ring size in WQEBBs (a power of two).
    #[arg(long, value_parser = num_u32)]
    pub sq_wqebbs: u32,
    /// The producer counter before the first WQE (libmlx5 sq.cur_post; the
    /// first WQE index is its low 16 bits).
    #[arg(long, value_parser = num_u32)]
    pub pi: u32,
    /// Largest inline payload (max_inline_data); default 252 (RC, UC, XRC),
    /// 188 (UD), 268 (raw): the reference QPs of specs/golden/libmlx5.
    #[arg(long, value_parser = num_u32)]
    pub max_inline: Option<u32>,
    /// Largest SGE list (max_send_sge).
    #[arg(long, value_parser = num_u32, default_value = "4")]
    pub max_sge: u32,
    /// Size of one BlueFlame half in bytes (bf->buf_size; a multiple of 64);
    /// 0: a bfreg without BlueFlame, always the 8-byte doorbell, no toggling.
    #[arg(long, value_parser = num_u32, default_value = "256")]
    pub bf_size: u32,
    /// The BlueFlame half the first doorbell uses (bf->offset left by the
    /// previous post): 0 or --bf-size.
    #[arg(long, value_parser = num_u32, default_value = "0")]
    pub bf_offset: u32,
    /// Offset of the doorbell/BlueFlame register in the UAR page.
    #[arg(long, value_parser = num_u32, default_value = "0x800")]
    pub bf_reg: u32,
    /// BlueFlame for every single-WQE batch that fits, not only inline ones
    /// (rdma-core's default when MLX5_POST_SEND_PREFER_BF is unset; without
    /// this flag: MLX5_POST_SEND_PREFER_BF=0, as the reference vectors).
    #[arg(long)]
    pub prefer_bf: bool,
    /// Never BlueFlame (MLX5_SHUT_UP_BF=1); the halves still alternate.
    #[arg(long)]
    pub shut_up_bf: bool,
    /// Every WQE requests a CQE (sq_sig_all).
    #[arg(long)]
    pub sig_all: bool,
    /// The QP was created without atomics: atomic_cs / atomic_fa are refused.
    #[arg(long)]
    pub no_atomics: bool,
    /// Raw Ethernet: no checksum offload (ip_csum is refused).
    #[arg(long)]
    pub no_raw_csum: bool,
    /// Raw Ethernet: bytes of L2 header a send inlines (0 or 18); default 18.
    #[arg(long, value_parser = num_u8)]
    pub eth_min_inline: Option<u8>,
    /// Largest TSO header (0: no TSO); default 128 on raw QPs, else 0.
    #[arg(long, value_parser = num_u16)]
    pub max_tso_header: Option<u16>,
    /// Largest TSO payload; default 262144 on raw QPs, else 0.
    #[arg(long, value_parser = num_u32)]
    pub max_tso: Option<u32>,
    /// libmlx5's work-request limit (sq.max_post): a work request is refused
    /// (ENOMEM) when --wrs-in-flight plus the earlier ones of its batch
    /// reach it. Default: no limit but the ring.
    #[arg(long, value_parser = num_u32)]
    pub max_post: Option<u32>,
    /// Work requests outstanding before the first batch (sq.head - sq.tail).
    #[arg(long, value_parser = num_u32, default_value = "0")]
    pub wrs_in_flight: u32,
    /// The fence the first WQE inherits (libmlx5 fm_cache left by the QP's
    /// last post: 0x20, the small-initiator fence, after a local invalidate
    /// or bind); a fence mode, bits 7:5 only.
    #[arg(long, value_parser = num_u8, default_value = "0")]
    pub fm_cache: u8,
    /// Discard a batch whose work request is refused (ibv_wr_complete's
    /// rollback) instead of posting the ones before it (ibv_post_send).
    #[arg(long)]
    pub abort_on_error: bool,
    /// empw/mpw bursts: frames up to this length are inlined into sessions
    /// (DPDK inlen_empw); default 268. 0: never inline.
    #[arg(long, value_parser = num_u16)]
    pub empw_inline_max: Option<u16>,
    /// empw/mpw bursts: most packets per session; default 32 (legacy MPW:
    /// at most 6 whatever this says).
    #[arg(long, value_parser = num_u16)]
    pub empw_max_pkts: Option<u16>,
    /// empw/mpw bursts: a packet sent as its own SEND WQE inlines a frame up
    /// to this length (DPDK inlen_send); default 0.
    #[arg(long, value_parser = num_u16, default_value = "0")]
    pub empw_inline_send: u16,
    /// empw/mpw bursts: the burst-end CQE rule also requests a CQE after
    /// this many unsignalled WQEBBs (DPDK wqe_thres); 0: packets only.
    #[arg(long, value_parser = num_u16, default_value = "0")]
    pub empw_wqe_thres: u16,
    /// empw/mpw bursts: DPDK 26.07's packing (960-byte sessions, legacy MPW
    /// inline room = --empw-inline-max, CE "only first error" on WQEs that
    /// request no CQE), to reproduce the mlx5 PMD's WQEs.
    #[arg(long)]
    pub empw_dpdk: bool,
    /// The device completes nothing: each line finds the ring as the lines
    /// before it left it (a work request that no longer fits is refused;
    /// --max-post counts every earlier one), as between two tx_burst calls
    /// of DPDK's PMD that found no CQE. Default: the device completes each
    /// line's WQEs before the next line.
    #[arg(long)]
    pub no_completions: bool,
    /// A refused work request ends its batch or burst, not the run: it is
    /// printed where it happened (`refused line N: ...`, JSON `refused`)
    /// and the next batch goes on, as a caller of ibv_post_send or of
    /// DPDK's tx_burst does. The exit status still says a request was
    /// refused (2, the first on standard error).
    #[arg(long)]
    pub keep_going: bool,
    /// One JSON object per line.
    #[arg(long)]
    pub json: bool,
    /// The work requests; none or `-` reads standard input.
    #[arg(value_name = "FILE")]
    pub file: Option<String>,
}

impl WqeArgs {
    /// The queue these arguments describe.
    pub fn config(&self) -> EncodeConfig {
        let qp_type = self.qp.qp_type();
        let mut c = EncodeConfig::new(qp_type, self.qpn, self.sq_wqebbs);
        c.pi = self.pi;
        if let Some(n) = self.max_inline {
            c.max_inline = n;
        }
        c.max_sge = self.max_sge;
        c.bf_size = self.bf_size;
        c.bf_offset = self.bf_offset;
        c.bf_reg = self.bf_reg;
        c.prefer_bf = self.prefer_bf;
        c.shut_up_bf = self.shut_up_bf;
        c.sig_all = self.sig_all;
        c.atomics = !self.no_atomics;
        if self.no_raw_csum {
            c.raw_csum = false;
        }
        if let Some(n) = self.eth_min_inline {
            c.eth_min_inline = n;
        }
        if let Some(n) = self.max_tso_header {
            c.max_tso_header = n;
        }
        if let Some(n) = self.max_tso {
            c.max_tso = n;
        }
        c.max_post = self.max_post;
        c.wrs_in_flight = self.wrs_in_flight;
        c.fm_cache = self.fm_cache;
        c.abort_on_error = self.abort_on_error;
        c.empw_inline_max = self.empw_inline_max;
        c.empw_max_pkts = self.empw_max_pkts;
        c.empw_inline_send = self.empw_inline_send;
        c.empw_wqe_thres = self.empw_wqe_thres;
        c.empw_dpdk = self.empw_dpdk;
        c.no_completions = self.no_completions;
        c.keep_going = self.keep_going;
        c
    }
}

/// `encode wqe`'s options alone, for [`parse_wqe_args`].
#[derive(Debug, clap::Parser)]
#[command(name = "mlx5dp encode wqe", no_binary_name = true)]
struct WqeCommand {
    #[command(flatten)]
    args: WqeArgs,
}

/// Parses the options of `mlx5dp encode wqe` (what follows `encode wqe` on
/// the command line) exactly as the binary does; the error is clap's text.
pub fn parse_wqe_args<I, T>(argv: I) -> Result<WqeArgs, String>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    use clap::Parser;
    WqeCommand::try_parse_from(argv)
        .map(|c| c.args)
        .map_err(|e| e.to_string())
}

/// Why `mlx5dp encode` failed. `Display` is one line.
#[derive(Debug)]
pub enum CliError {
    /// A malformed line, or a bad option value.
    Input(EncodeError),
    /// A work request the queue refused.
    Refused(Refusal),
    /// A receive work request the queue refused.
    RecvRefused(RecvRefusal),
    /// The input is not UTF-8 text.
    NotText,
    /// The input could not be read.
    Io(String, std::io::Error),
}

impl CliError {
    /// The process exit status: 2 for bad input (including a refused work
    /// request), 1 for an I/O or internal failure.
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Io(..) | CliError::Input(EncodeError::Setup(_)) => 1,
            CliError::Input(_)
            | CliError::Refused(_)
            | CliError::RecvRefused(_)
            | CliError::NotText => 2,
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::Input(e) => write!(f, "{e}"),
            CliError::Refused(r) => write!(f, "{r}"),
            CliError::RecvRefused(r) => write!(f, "{r}"),
            CliError::NotText => write!(f, "bad input: not UTF-8 text"),
            CliError::Io(what, e) => write!(f, "cannot read {what}: {e}"),
        }
    }
}

impl std::error::Error for CliError {}

/// What `mlx5dp encode` prints: standard output, and the error (if any)
/// for standard error and the exit status.
#[derive(Debug)]
pub struct Outcome {
    /// Standard output.
    pub stdout: String,
    /// `Ok` for exit status 0.
    pub result: Result<(), CliError>,
}

fn read_input(file: Option<&str>, stdin: &mut dyn Read) -> Result<String, CliError> {
    let raw = match file {
        None | Some("-") => {
            let mut raw = Vec::new();
            stdin
                .read_to_end(&mut raw)
                .map_err(|e| CliError::Io("standard input".into(), e))?;
            raw
        }
        Some(path) => std::fs::read(path).map_err(|e| CliError::Io(path.into(), e))?,
    };
    String::from_utf8(raw).map_err(|_| CliError::NotText)
}

/// Runs `mlx5dp encode`.
pub fn run(args: &EncodeArgs, stdin: &mut dyn Read) -> Outcome {
    match &args.what {
        EncodeWhat::Wqe(a) => run_wqe(a, stdin),
        EncodeWhat::Recv(a) => run_recv(a, stdin),
    }
}

/// Runs `mlx5dp encode recv` with parsed options.
pub fn run_recv(a: &RecvArgs, stdin: &mut dyn Read) -> Outcome {
    let fail = |e: CliError| Outcome {
        stdout: String::new(),
        result: Err(e),
    };
    let cfg = a.config();
    if let Err(m) = cfg.check() {
        return fail(CliError::Input(EncodeError::Config(m)));
    }
    let text = match read_input(a.file.as_deref(), stdin) {
        Ok(t) => t,
        Err(e) => return fail(e),
    };
    let batches = match recv::parse(&text) {
        Ok(b) => b,
        Err(e) => return fail(CliError::Input(EncodeError::Input(e))),
    };
    match recv::encode(&cfg, &batches) {
        Ok(enc) => Outcome {
            stdout: if a.json {
                enc.to_json_lines()
            } else {
                enc.to_human()
            },
            result: enc
                .refusal
                .map_or(Ok(()), |r| Err(CliError::RecvRefused(r))),
        },
        Err(m) => fail(CliError::Input(EncodeError::Setup(m))),
    }
}

/// Runs `mlx5dp encode wqe` with parsed options.
pub fn run_wqe(a: &WqeArgs, stdin: &mut dyn Read) -> Outcome {
    let cfg = a.config();
    // Options first: a bad option is reported before reading the input.
    if let Err(m) = cfg.check() {
        return Outcome {
            stdout: String::new(),
            result: Err(CliError::Input(EncodeError::Config(m))),
        };
    }
    let text = match read_input(a.file.as_deref(), stdin) {
        Ok(t) => t,
        Err(e) => {
            return Outcome {
                stdout: String::new(),
                result: Err(e),
            }
        }
    };
    match encode(&cfg, &text) {
        Ok(enc) => Outcome {
            stdout: if a.json {
                enc.to_json_lines()
            } else {
                enc.to_human(cfg.sq_wqebbs)
            },
            result: enc.refusal.map_or(Ok(()), |r| Err(CliError::Refused(r))),
        },
        Err(e) => Outcome {
            stdout: String::new(),
            result: Err(CliError::Input(e)),
        },
    }
}
