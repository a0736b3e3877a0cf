//! The `mlx5dp decode` subcommand: its arguments and what it prints.
//!
//! `main.rs` only dispatches here, so the whole command is callable (and
//! tested) as a library function: [`run`] takes the arguments and standard
//! input and returns the text to print, or a [`CliError`] whose `Display`
//! is the one-line message and whose [`CliError::exit_code`] is the exit
//! status (2 for bad input, 1 for an I/O failure).

use super::cq::{decode_ring, CqLayout, RingError, RingParams};
use super::cqe::{decode_cqe, wc_opcode_name, CqeSize};
use super::mini::{decode_minis, MiniFormat};
use super::wqe::{decode_wqe, QpType};
use super::DecodeError;
use crate::hexdump::{self, HexError};
use mlx5dp::cq::WcOpcode;
use std::fmt;
use std::io::Read;

const INPUT_HELP: &str = "Bytes as plain hex (`00 11 22`, `001122`), kernel print_hex_dump lines \
(`00000030: 00 ..`, with any dmesg/device prefix and an optional ASCII column) or rdma-core \
word dumps (`00000000 0000f6d2 ..`), also as logged: with libmlx5's `got completion with error` \
or the kernel's `dump error cqe` line, a prefix before each row and log lines after the rows; \
any of these still quoted-printable, as a raw message from a mail archive holds it. \
Several arguments are joined with spaces. No argument, or `-`, reads standard input.";

const RING_INPUT_HELP: &str = "File holding the whole ring, cqe-cnt x cqe-size bytes from slot 0, \
as hex in any accepted form: plain hex (`00 11 22`, `001122`), kernel print_hex_dump lines \
(`00000030: 00 ..`, with any dmesg/device prefix and an optional ASCII column), rdma-core \
word dumps or `hexdump -C` rows, also quoted-printable. `-` or no argument reads standard input.";

/// `mlx5dp decode`: turn CQE, WQE or mini-CQE bytes from a dump into fields.
#[derive(Debug, Clone, clap::Args)]
pub struct DecodeArgs {
    /// What the bytes are.
    #[command(subcommand)]
    pub what: DecodeWhat,
}

/// The formats `mlx5dp decode` knows.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum DecodeWhat {
    /// A completion queue entry (64 bytes, or a 128-byte slot).
    ///
    /// Every PRM field, the `ibv_wc_status` libmlx5 reports (error CQEs:
    /// syndrome, vendor syndrome), and the `wc_*` fields `ibv_poll_cq`
    /// writes for such a CQE, only those libmlx5 v44 writes for its kind
    /// (`wc_opcode`, `wc_byte_len`, `wc_imm_data` in host order,
    /// `wc_flags`, `wc_qp_num`, `wc_src_qp`, `wc_pkey_index`, `wc_slid`,
    /// `wc_sl`, `wc_dlid_path_bits`, `wc_vendor_err`), as on a QP with the
    /// receive checksum capability and no SRQ, whose send slot recorded
    /// `--wr-data`. A compressed entry (format 3: a basic-layout title or
    /// an enhanced-layout mini array) is no completion by itself: its PRM
    /// fields and mini counts, no `wc_*`.
    Cqe {
        /// CQE size of the CQ; default: the input length (64 or 128 bytes).
        #[arg(long, value_enum)]
        cqe_size: Option<CqeSize>,
        /// The completion opcode libmlx5 recorded when the WQE was posted
        /// (`sq.wr_data`: e.g. local_inv for a local invalidate, sent as a
        /// UMR WQE), an `ibv_wc_opcode` name or number: the `wc_opcode` of
        /// a NOP, UMR, SET_PSV or MMO requester CQE, and of every requester
        /// CQE if it is driver2 (a raw WQE); default send (0), what a slot
        /// nothing was recorded in holds.
        #[arg(long, value_parser = wc_opcode_arg, default_value = "send")]
        wr_data: WcOpcode,
        /// Print one JSON object instead of a field list.
        #[arg(long)]
        json: bool,
        /// The bytes (see INPUT below); none or `-` reads standard input.
        #[arg(value_name = "HEX", long_help = INPUT_HELP)]
        hex: Vec<String>,
    },
    /// A send work queue entry (whole 16-byte units, up to 16 WQEBBs).
    Wqe {
        /// QP type, which decides the segment layout; default: inferred from the bytes (the output says how).
        #[arg(long, value_enum)]
        qp: Option<QpType>,
        /// Print one JSON object instead of a field list.
        #[arg(long)]
        json: bool,
        /// The bytes (see INPUT below); none or `-` reads standard input.
        #[arg(value_name = "HEX", long_help = INPUT_HELP)]
        hex: Vec<String>,
    },
    /// Mini-CQEs of a compressed session (8 bytes each; several allowed).
    MiniCqe {
        /// The format the CQ was created with (`req` for a send CQ).
        #[arg(long, value_enum, ignore_case = true)]
        format: MiniFormat,
        /// Print ONE JSON array with one object per mini (even for a single mini).
        #[arg(long)]
        json: bool,
        /// The bytes (see INPUT below); none or `-` reads standard input.
        #[arg(value_name = "HEX", long_help = INPUT_HELP)]
        hex: Vec<String>,
    },
    /// A whole CQ ring snapshot, polled from --ci the way the data path
    /// polls it: one completion per line in poll order, mini-CQEs
    /// expanded, up to the first entry hardware still owns, then the
    /// consumer index. A RESIZE_CQ CQE is consumed without a line (libmlx5's
    /// `ibv_poll_cq` returns a completion of it with only `qp_num` and
    /// `wc_flags` written); a CQE with a reserved opcode (7-11) stops the
    /// poll with an error naming its slot, where libmlx5 returns such a
    /// completion too (`decode cqe` prints those two fields for either).
    Cq {
        /// CQE size of the CQ.
        #[arg(long, value_enum)]
        cqe_size: CqeSize,
        /// Number of CQEs in the ring (a power of two); the input must be
        /// exactly this many CQEs.
        #[arg(long, value_parser = crate::encode::cli::num_u32)]
        cqe_cnt: u32,
        /// Software consumer index (decimal or 0x-hex), free-running 32-bit (rdma-core's
        /// `cons_index`; the doorbell record holds its low 24 bits): the
        /// first slot polled, and with --cqe-cnt the owner parity (basic)
        /// or validity iteration count (enhanced) expected. The closing
        /// `{"ci":N}` is the same free-running counter after polling. An
        /// index inside a compressed session is polled from the session's
        /// title, found in the ring, and output starts at --ci: in the
        /// basic layout the nearest title of its pass (owner bit) whose
        /// mini count reaches past --ci (unless the slot at --ci is a valid
        /// entry of its pass at a hole of that session: it is then polled
        /// as itself); in the enhanced layout, for an
        /// index at a compressed CQE, the regular CQE the consumer polled
        /// before it (the nearest one whose compressed and error CQEs lead
        /// to --ci).
        #[arg(long, value_parser = crate::encode::cli::num_u32)]
        ci: u32,
        /// Compression layout (`cqe_comp_layout`); also the ownership rule.
        /// Also accepted, in any case: its value 0 / 1, `legacy`.
        #[arg(long, value_enum, ignore_case = true, default_value_t = CqLayout::Basic)]
        layout: CqLayout,
        /// Mini-CQE format of the CQ (`req` for a send CQ; minis of a REQ
        /// title are read as requester minis whatever the format). Also
        /// accepted, in any case: the PRM value 0-4, `_` for `-`,
        /// `checksum`, `flow-tag`, `l3l4`, `requester`.
        #[arg(long, value_enum, ignore_case = true, default_value_t = MiniFormat::Hash)]
        mini_format: MiniFormat,
        /// Responder completions come from a striding RQ (implied by the
        /// `*-stridx` formats): byte counts carry strides, wqe_counter is
        /// the stride index.
        #[arg(long)]
        striding_rq: bool,
        /// Print JSON Lines: one object per completion (the keys of
        /// `decode cqe --json` plus slot, compressed, rx_hash, checksum and,
        /// on a striding RQ, stride_idx and strides), then {"ci":N}.
        #[arg(long)]
        json: bool,
        /// File holding the ring's bytes as hex; `-` or none reads
        /// standard input.
        #[arg(value_name = "FILE", long_help = RING_INPUT_HELP)]
        file: Option<String>,
    },
}

/// Why `mlx5dp decode` failed. `Display` is one line.
#[derive(Debug)]
pub enum CliError {
    /// The dump text could not be read.
    Input(HexError),
    /// The bytes do not fit the format.
    Decode(DecodeError),
    /// Standard input is not UTF-8 text.
    NotText,
    /// Standard input could not be read.
    Io(std::io::Error),
    /// An input file could not be read.
    File {
        /// The path given.
        path: String,
        /// Why.
        error: std::io::Error,
    },
    /// A ring snapshot could not be polled.
    Ring(RingError),
}

impl CliError {
    /// The process exit status: 2 for bad input, 1 for an I/O failure.
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Io(_) | CliError::File { .. } => 1,
            CliError::Input(_) | CliError::Decode(_) | CliError::NotText | CliError::Ring(_) => 2,
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::Input(e) => write!(f, "bad input: {e}"),
            CliError::Decode(e) => write!(f, "bad input: {e}"),
            CliError::NotText => write!(f, "bad input: standard input is not UTF-8 text"),
            CliError::Io(e) => write!(f, "cannot read standard input: {e}"),
            CliError::File { path, error } => write!(f, "cannot read {path}: {error}"),
            CliError::Ring(e) => write!(f, "bad input: {e}"),
        }
    }
}

impl std::error::Error for CliError {}

impl From<HexError> for CliError {
    fn from(e: HexError) -> Self {
        CliError::Input(e)
    }
}

impl From<DecodeError> for CliError {
    fn from(e: DecodeError) -> Self {
        CliError::Decode(e)
    }
}

/// The dump text: the arguments joined with spaces, or standard input.
fn input_text(hex: &[String], stdin: &mut dyn Read) -> Result<String, CliError> {
    if hex.is_empty() || (hex.len() == 1 && hex[0] == "-") {
        let mut raw = Vec::new();
        stdin.read_to_end(&mut raw).map_err(CliError::Io)?;
        String::from_utf8(raw).map_err(|_| CliError::NotText)
    } else {
        Ok(hex.join(" "))
    }
}

/// The dump text of a FILE argument: the file, or standard input for `-`
/// or none.
fn file_text(file: Option<&str>, stdin: &mut dyn Read) -> Result<String, CliError> {
    match file {
        None | Some("-") => input_text(&[], stdin),
        Some(path) => {
            let raw = std::fs::read(path).map_err(|error| CliError::File {
                path: path.to_string(),
                error,
            })?;
            String::from_utf8(raw).map_err(|_| CliError::NotText)
        }
    }
}

fn render(json: bool, value: serde_json::Value, human: String) -> String {
    if json {
        let mut s = serde_json::to_string_pretty(&value).unwrap_or_else(|_| value.to_string());
        s.push('\n');
        s
    } else {
        human
    }
}

/// An `ibv_wc_opcode` by its name (`wc_opcode_name`: `send`, `local_inv`,
/// ..., any case) or its number (decimal or 0x-hex).
fn wc_opcode_arg(s: &str) -> Result<WcOpcode, String> {
    let by_name = WcOpcode::ALL
        .into_iter()
        .find(|&op| wc_opcode_name(op).eq_ignore_ascii_case(s));
    let by_number = || {
        let n = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
            Some(hex) => u32::from_str_radix(hex, 16).ok()?,
            None => s.parse().ok()?,
        };
        WcOpcode::from_raw(n)
    };
    by_name.or_else(by_number).ok_or_else(|| {
        let names: Vec<&str> = WcOpcode::ALL.into_iter().map(wc_opcode_name).collect();
        format!(
            "`{s}`: an ibv_wc_opcode ({}) or its number",
            names.join(" ")
        )
    })
}

/// Runs `mlx5dp decode`: returns what to print on standard output.
pub fn run(args: &DecodeArgs, stdin: &mut dyn Read) -> Result<String, CliError> {
    match &args.what {
        DecodeWhat::Cqe {
            cqe_size,
            wr_data,
            json,
            hex,
        } => {
            let bytes = hexdump::parse(&input_text(hex, stdin)?)?;
            let mut d = decode_cqe(&bytes, *cqe_size)?;
            d.wr_data = *wr_data;
            Ok(render(*json, d.to_json(), d.to_human()))
        }
        DecodeWhat::Wqe { qp, json, hex } => {
            let bytes = hexdump::parse(&input_text(hex, stdin)?)?;
            let d = decode_wqe(&bytes, *qp)?;
            Ok(render(*json, d.to_json(), d.to_human()))
        }
        DecodeWhat::MiniCqe { format, json, hex } => {
            let bytes = hexdump::parse(&input_text(hex, stdin)?)?;
            let d = decode_minis(&bytes, *format)?;
            Ok(render(*json, d.to_json(), d.to_human()))
        }
        DecodeWhat::Cq {
            cqe_size,
            cqe_cnt,
            ci,
            layout,
            mini_format,
            striding_rq,
            json,
            file,
        } => {
            let bytes = hexdump::parse(&file_text(file.as_deref(), stdin)?)?;
            let params = RingParams {
                cqe_size: *cqe_size,
                cqe_cnt: *cqe_cnt,
                ci: *ci,
                layout: *layout,
                mini_format: *mini_format,
                striding_rq: *striding_rq,
            };
            let d = decode_ring(&bytes, &params).map_err(CliError::Ring)?;
            Ok(if *json {
                d.to_json_lines()
            } else {
                d.to_human()
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cqe_args(hex: &[&str], json: bool) -> DecodeArgs {
        DecodeArgs {
            what: DecodeWhat::Cqe {
                cqe_size: None,
                wr_data: WcOpcode::Send,
                json,
                hex: hex.iter().map(|s| s.to_string()).collect(),
            },
        }
    }

    const ROW3: &str = "00000030: 00 00 00 00 0f 00 78 06 25 00 00 58 00 da ac d2";

    fn cqe_text() -> String {
        let mut t = String::new();
        for off in [0, 0x10, 0x20] {
            t.push_str(&format!("{off:08x}: {}\n", ["00"; 16].join(" ")));
        }
        t.push_str(ROW3);
        t
    }

    #[test]
    fn stdin_and_arguments_agree() {
        let text = cqe_text();
        let from_stdin = run(&cqe_args(&[], true), &mut text.as_bytes()).unwrap();
        let from_dash = run(&cqe_args(&["-"], true), &mut text.as_bytes()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let from_args = run(&cqe_args(&lines, true), &mut std::io::empty()).unwrap();
        assert_eq!(from_stdin, from_dash);
        assert_eq!(from_stdin, from_args);
        let v: serde_json::Value = serde_json::from_str(&from_stdin).unwrap();
        assert_eq!(v["wc_status"], 6);
    }

    #[test]
    fn bad_input_is_exit_2() {
        for hex in [&["0"][..], &["zz"], &["00", "11"], &[""]] {
            let e = run(&cqe_args(hex, false), &mut std::io::empty()).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{hex:?}");
            assert!(!e.to_string().contains('\n'));
        }
        let e = run(&cqe_args(&[], false), &mut &[0xffu8, 0xfe][..]).unwrap_err();
        assert_eq!(e.exit_code(), 2);
    }
}
