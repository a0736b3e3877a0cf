//! The record format of `hw-traces/` (see `hw-traces/README.md`).
//!
//! A file holds one or more records. A record starts at a `# source:` line
//! and runs to the next one; lines before the first record are the file's
//! own comments. Inside a record, `# key: value` lines carry its metadata
//! and every other non-empty line is dump text in any style
//! [`crate::hexdump`] reads:
//!
//! ```text
//! # source: [record-id] where the bytes were published, who, when
//! # kind: error_cqe64 | cqe64 | error_cqe128 | cqe128 | wqe | mini_cqe
//! # device: the NIC, as the source describes it
//! # expect: key=value ... (only values the source itself printed)
//! # note: caveats (any number of lines)
//! # qp: rc|uc|ud|xrc|raw      (wqe only; absent = inferred)
//! # mini-format: hash|csum|ftag-stridx|csum-stridx|l34h-stridx|req   (mini_cqe only)
//! # origin: captured | emulator   (absent = captured)
//! 00 00 00 00 ...
//! ```
//!
//! Any other `# key: value` line is kept in [`TraceRecord::other`]; a `#`
//! line that is not `key: value` is a comment.

use super::cqe::{decode_cqe, CqeSize, DecodedCqe};
use super::mini::{decode_minis, DecodedMinis, MiniFormat};
use super::wqe::{decode_wqe, DecodedWqe, QpType};
use super::DecodeError;
use crate::hexdump::{self, HexError};
use std::fmt;

/// One record of a trace file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceRecord {
    /// The id in brackets at the start of `source` (`k-umr-odp-iova`), or
    /// the whole source when it has none.
    pub id: String,
    /// Where the bytes come from, verbatim.
    pub source: String,
    /// What the bytes are (`error_cqe64`, `wqe`, ...).
    pub kind: String,
    /// The device, as the source describes it.
    pub device: Option<String>,
    /// The values the source printed, `key=value`, in order.
    pub expect: Vec<(String, String)>,
    /// The note lines, in order.
    pub notes: Vec<String>,
    /// The QP type of a WQE record, as written.
    pub qp: Option<String>,
    /// The mini-CQE format of a mini-CQE record, as written.
    pub mini_format: Option<String>,
    /// `captured` (real hardware) or `emulator` (recorded from the emulated device).
    pub origin: String,
    /// Any other `# key: value` lines.
    pub other: Vec<(String, String)>,
    /// The bytes, in memory order.
    pub bytes: Vec<u8>,
    /// 1-based line of the `# source:` line.
    pub line: usize,
}

/// Why a trace file or record could not be read or decoded. `Display` is one line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TraceError {
    /// No `# source:` line in the file.
    NoRecords,
    /// A record lacks a required key.
    MissingKey {
        /// Line of the record's `# source:`.
        line: usize,
        /// The key.
        key: &'static str,
    },
    /// An `expect` token is not `key=value`.
    BadExpect {
        /// 1-based line.
        line: usize,
        /// The token.
        token: String,
    },
    /// The dump text of a record could not be read.
    Hex {
        /// Line of the record's `# source:`.
        line: usize,
        /// What went wrong (its line number is relative to the record's first line).
        error: HexError,
    },
    /// The record's kind names no decoder.
    UnknownKind {
        /// The record id.
        id: String,
        /// The kind.
        kind: String,
    },
    /// A `qp`, `mini-format` or `origin` value is not one this crate knows.
    BadValue {
        /// The record id.
        id: String,
        /// The key.
        key: &'static str,
        /// The value.
        value: String,
    },
    /// The bytes do not fit the kind.
    Decode {
        /// The record id.
        id: String,
        /// What went wrong.
        error: DecodeError,
    },
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TraceError::NoRecords => write!(f, "no `# source:` record in the file"),
            TraceError::MissingKey { line, key } => {
                write!(f, "record at line {line}: no `# {key}:` line")
            }
            TraceError::BadExpect { line, token } => {
                write!(f, "line {line}: expect token `{token}` is not key=value")
            }
            TraceError::Hex { line, error } => {
                write!(
                    f,
                    "record at line {line}: {error} (lines counted from the record's first line)"
                )
            }
            TraceError::UnknownKind { id, kind } => {
                write!(f, "[{id}]: kind `{kind}` names no decoder")
            }
            TraceError::BadValue { id, key, value } => {
                write!(f, "[{id}]: `{key}: {value}` is not a known value")
            }
            TraceError::Decode { id, error } => write!(f, "[{id}]: {error}"),
        }
    }
}

impl std::error::Error for TraceError {}

/// The decoded bytes of a record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodedRecord {
    /// A CQE.
    Cqe(DecodedCqe),
    /// A send WQE.
    Wqe(DecodedWqe),
    /// Mini-CQEs.
    Minis(DecodedMinis),
}

impl DecodedRecord {
    /// The JSON `mlx5dp decode` prints for these bytes.
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            DecodedRecord::Cqe(d) => d.to_json(),
            DecodedRecord::Wqe(d) => d.to_json(),
            DecodedRecord::Minis(d) => d.to_json(),
        }
    }
}

/// Splits `# key: value` (key: lower-case letters, digits, `_`, `-`).
fn key_value(line: &str) -> Option<(&str, &str)> {
    let body = line.trim_start().strip_prefix('#')?.trim_start();
    let (key, value) = body.split_once(':')?;
    let ok = !key.is_empty()
        && key
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
    ok.then(|| (key, value.trim()))
}

/// Reads every record of a trace file.
pub fn parse_records(text: &str) -> Result<Vec<TraceRecord>, TraceError> {
    // Split into (first line, lines) blocks at each `# source:`.
    let mut blocks: Vec<(usize, Vec<&str>)> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if key_value(line).is_some_and(|(k, _)| k == "source") {
            blocks.push((i + 1, Vec::new()));
        }
        if let Some((_, lines)) = blocks.last_mut() {
            lines.push(line);
        }
    }
    if blocks.is_empty() {
        return Err(TraceError::NoRecords);
    }
    blocks
        .into_iter()
        .map(|(first, lines)| parse_block(first, &lines))
        .collect()
}

fn parse_block(first: usize, lines: &[&str]) -> Result<TraceRecord, TraceError> {
    let mut source = None;
    let mut kind = None;
    let mut device = None;
    let mut expect = Vec::new();
    let mut notes = Vec::new();
    let mut qp = None;
    let mut mini_format = None;
    let mut origin = None;
    let mut other = Vec::new();
    // Dump text with the metadata lines blanked, so hex errors keep line numbers.
    let mut data = String::new();
    for (i, line) in lines.iter().enumerate() {
        if line.trim_start().starts_with('#') {
            data.push('\n');
            let Some((key, value)) = key_value(line) else {
                continue;
            };
            match key {
                "source" => source = Some(value.to_string()),
                "kind" => kind = Some(value.to_string()),
                "device" => device = Some(value.to_string()),
                "note" => notes.push(value.to_string()),
                "qp" => qp = Some(value.to_string()),
                "mini-format" => mini_format = Some(value.to_string()),
                "origin" => origin = Some(value.to_string()),
                "expect" => {
                    for token in value.split_whitespace() {
                        let Some((k, v)) = token.split_once('=') else {
                            return Err(TraceError::BadExpect {
                                line: first + i,
                                token: token.to_string(),
                            });
                        };
                        expect.push((k.to_string(), v.to_string()));
                    }
                }
                _ => other.push((key.to_string(), value.to_string())),
            }
        } else {
            data.push_str(line);
            data.push('\n');
        }
    }
    let source = source.ok_or(TraceError::MissingKey {
        line: first,
        key: "source",
    })?;
    let kind = kind.ok_or(TraceError::MissingKey {
        line: first,
        key: "kind",
    })?;
    let id = source
        .strip_prefix('[')
        .and_then(|s| s.split_once(']'))
        .map_or_else(|| source.clone(), |(id, _)| id.to_string());
    let bytes = hexdump::parse(&data).map_err(|error| TraceError::Hex { line: first, error })?;
    Ok(TraceRecord {
        id,
        source,
        kind,
        device,
        expect,
        notes,
        qp,
        mini_format,
        origin: origin.unwrap_or_else(|| "captured".to_string()),
        other,
        bytes,
        line: first,
    })
}

impl TraceRecord {
    /// Whether the kind says the bytes are an error CQE.
    pub fn expects_error_cqe(&self) -> bool {
        self.kind.starts_with("error_cqe")
    }

    /// The QP type of a WQE record (`None`: infer it).
    pub fn qp_type(&self) -> Result<Option<QpType>, TraceError> {
        let Some(name) = &self.qp else {
            return Ok(None);
        };
        let qp = match name.as_str() {
            "rc" => QpType::Rc,
            "uc" => QpType::Uc,
            "ud" => QpType::Ud,
            "xrc" => QpType::Xrc,
            "raw" => QpType::Raw,
            _ => {
                return Err(TraceError::BadValue {
                    id: self.id.clone(),
                    key: "qp",
                    value: name.clone(),
                })
            }
        };
        Ok(Some(qp))
    }

    /// Decodes the bytes the way `kind` (and `qp`, `mini-format`) say.
    pub fn decode(&self) -> Result<DecodedRecord, TraceError> {
        let decode_err = |error| TraceError::Decode {
            id: self.id.clone(),
            error,
        };
        match self.kind.as_str() {
            "cqe64" | "error_cqe64" => decode_cqe(&self.bytes, Some(CqeSize::B64))
                .map(DecodedRecord::Cqe)
                .map_err(decode_err),
            "cqe128" | "error_cqe128" => decode_cqe(&self.bytes, Some(CqeSize::B128))
                .map(DecodedRecord::Cqe)
                .map_err(decode_err),
            "cqe" | "error_cqe" => decode_cqe(&self.bytes, None)
                .map(DecodedRecord::Cqe)
                .map_err(decode_err),
            "wqe" => decode_wqe(&self.bytes, self.qp_type()?)
                .map(DecodedRecord::Wqe)
                .map_err(decode_err),
            "mini_cqe" => {
                let name = self.mini_format.as_deref().unwrap_or("");
                let format = [
                    MiniFormat::Hash,
                    MiniFormat::Csum,
                    MiniFormat::FtagStridx,
                    MiniFormat::CsumStridx,
                    MiniFormat::L34hStridx,
                    MiniFormat::Req,
                ]
                .into_iter()
                .find(|f| f.name() == name)
                .ok_or_else(|| TraceError::BadValue {
                    id: self.id.clone(),
                    key: "mini-format",
                    value: name.to_string(),
                })?;
                decode_minis(&self.bytes, format)
                    .map(DecodedRecord::Minis)
                    .map_err(decode_err)
            }
            other => Err(TraceError::UnknownKind {
                id: self.id.clone(),
                kind: other.to_string(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "\
# A header comment: not a record.
# rdma-core word dumps were converted to bytes.

# source: [one] somewhere, someone
# kind: error_cqe64
# device: a NIC
# expect: wc_status=6 qn=0x58
# note: first note
# note: second note
00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
00 00 00 00 0f 00 78 06 25 00 00 58 00 da ac d2

# source: [two] elsewhere
# kind: wqe
# qp: raw
# expect:
00000000: 00 00 00 0a 00 11 50 03 00 00 00 08 00 00 00 00
00000010: 00 00 00 00 c0 00 00 00 00 00 00 00 00 00 00 00
00000020: 00 00 02 2a 00 00 8a 0b 00 00 7f c5 9a 5b 20 00
";

    #[test]
    fn records_and_metadata() {
        let r = parse_records(FILE).unwrap();
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].id, "one");
        assert_eq!(r[0].line, 4);
        assert_eq!(r[0].kind, "error_cqe64");
        assert_eq!(r[0].device.as_deref(), Some("a NIC"));
        assert_eq!(
            r[0].expect,
            vec![
                ("wc_status".to_string(), "6".to_string()),
                ("qn".to_string(), "0x58".to_string())
            ]
        );
        assert_eq!(r[0].notes.len(), 2);
        assert_eq!(r[0].origin, "captured");
        assert_eq!(r[0].bytes.len(), 64);
        assert!(r[0].expects_error_cqe());
        assert!(r[1].expect.is_empty());
        assert_eq!(r[1].bytes.len(), 48);
        match r[1].decode().unwrap() {
            DecodedRecord::Wqe(w) => assert_eq!(w.qp_type, QpType::Raw),
            other => panic!("{other:?}"),
        }
        match r[0].decode().unwrap() {
            DecodedRecord::Cqe(c) => assert_eq!(c.wc_status().map(|s| s.raw()), Some(6)),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn errors() {
        assert_eq!(parse_records("00 11\n"), Err(TraceError::NoRecords));
        assert!(matches!(
            parse_records("# source: [x] y\n00\n"),
            Err(TraceError::MissingKey { key: "kind", .. })
        ));
        assert!(matches!(
            parse_records("# source: [x] y\n# kind: wqe\n# expect: nonsense\n00\n"),
            Err(TraceError::BadExpect { line: 3, .. })
        ));
        assert!(matches!(
            parse_records("# source: [x] y\n# kind: wqe\nzz\n"),
            Err(TraceError::Hex { .. })
        ));
        let r = parse_records("# source: [x] y\n# kind: tlp\n00\n").unwrap();
        assert!(matches!(r[0].decode(), Err(TraceError::UnknownKind { .. })));
        let r = parse_records("# source: [x] y\n# kind: wqe\n# qp: dc\n").unwrap_err();
        assert!(matches!(r, TraceError::Hex { .. }));
    }
}
