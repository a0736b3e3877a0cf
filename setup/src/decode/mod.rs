//! `mlx5dp decode`: mlx5 hardware bytes → a decoded value → readable text or
//! one JSON value.
//!
//! - [`cqe`]: 64- and 128-byte CQEs, error CQEs with the `ibv_wc_status`
//!   libmlx5 reports, compressed titles.
//! - [`wqe`]: send WQEs: the control segment and the segments the QP type
//!   and opcode imply.
//! - [`mini`]: mini-CQEs of a compressed session, in each format.
//! - [`cq`]: a whole CQ ring snapshot, polled in order by the core's own
//!   poller over a copy of the ring (the one module here with `unsafe`:
//!   building that `Cq`).
//! - [`trace`]: the record format of `hw-traces/`.
//! - [`cli`]: the `mlx5dp decode` subcommand (arguments, exit codes).
//!
//! Every decoder views the bytes through the `mlx5dp::prm` layouts (never by
//! hand-shifting at a use site) and produces a [`Fields`] list: an ordered
//! list of named values that renders both as text ([`Fields::to_human`])
//! and as JSON ([`Fields::to_json`]); the two can never disagree.
//!
//! Panic policy: decoders validate lengths and return a [`DecodeError`];
//! any content of a right-sized input decodes (unknown values keep their
//! raw number, anomalies become warnings), nothing panics.
#![deny(unsafe_code)]

pub mod cli;
pub mod cq;
pub mod cqe;
pub mod mini;
pub mod published;
pub mod trace;
pub mod wqe;

use std::fmt;
use std::fmt::Write as _;

/// Why bytes could not be decoded. `Display` is one line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// The input has a length the format cannot have.
    Length {
        /// What was being decoded (`"CQE"`, `"WQE"`, `"mini-CQE"`).
        what: &'static str,
        /// The lengths that would be accepted, in words.
        expected: String,
        /// The length given.
        got: usize,
    },
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Length {
                what,
                expected,
                got,
            } => write!(f, "a {what} is {expected}, got {got} bytes"),
        }
    }
}

impl std::error::Error for DecodeError {}

/// How an integer is shown in text (JSON always gets a plain number).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Radix {
    /// Decimal.
    Dec,
    /// Hexadecimal, zero-padded to this many digits, with the decimal value beside it.
    Hex(usize),
}

/// One decoded value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// An unsigned integer.
    Uint(u64, Radix),
    /// A flag.
    Bool(bool),
    /// A name or a message.
    Text(String),
    /// Raw bytes (JSON: a lower-case hex string).
    Bytes(Vec<u8>),
    /// A nested list of fields (JSON: an object).
    Object(Fields),
    /// A list of nested field lists (JSON: an array of objects).
    List(Vec<Fields>),
    /// A list of messages (JSON: an array of strings).
    TextList(Vec<String>),
}

/// An ordered list of named values: what every decoder produces.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fields(pub Vec<(&'static str, Value)>);

impl Fields {
    /// An empty list.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends any value.
    pub fn push(&mut self, key: &'static str, value: Value) -> &mut Self {
        self.0.push((key, value));
        self
    }

    /// Appends an integer shown in hex, `digits` wide.
    pub fn hex(&mut self, key: &'static str, value: impl Into<u64>, digits: usize) -> &mut Self {
        self.push(key, Value::Uint(value.into(), Radix::Hex(digits)))
    }

    /// Appends an integer shown in decimal.
    pub fn dec(&mut self, key: &'static str, value: impl Into<u64>) -> &mut Self {
        self.push(key, Value::Uint(value.into(), Radix::Dec))
    }

    /// Appends a flag.
    pub fn flag(&mut self, key: &'static str, value: bool) -> &mut Self {
        self.push(key, Value::Bool(value))
    }

    /// Appends a name or message.
    pub fn text(&mut self, key: &'static str, value: impl Into<String>) -> &mut Self {
        self.push(key, Value::Text(value.into()))
    }

    /// Appends raw bytes.
    pub fn bytes(&mut self, key: &'static str, value: &[u8]) -> &mut Self {
        self.push(key, Value::Bytes(value.to_vec()))
    }

    /// The value of `key`, if present (first match).
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.0.iter().find(|(k, _)| *k == key).map(|(_, v)| v)
    }

    /// The integer value of `key`, if present and an integer.
    pub fn uint(&self, key: &str) -> Option<u64> {
        match self.get(key) {
            Some(Value::Uint(v, _)) => Some(*v),
            _ => None,
        }
    }

    /// The text value of `key`, if present and text.
    pub fn str(&self, key: &str) -> Option<&str> {
        match self.get(key) {
            Some(Value::Text(v)) => Some(v),
            _ => None,
        }
    }

    /// The JSON object of these fields (keys in order).
    pub fn to_json(&self) -> serde_json::Value {
        let mut map = serde_json::Map::new();
        for (k, v) in &self.0 {
            map.insert((*k).to_string(), v.to_json());
        }
        serde_json::Value::Object(map)
    }

    /// A readable field list, one `name: value` per line, nested values indented.
    pub fn to_human(&self) -> String {
        let mut out = String::new();
        self.write_human(&mut out, 0);
        out
    }

    fn write_human(&self, out: &mut String, indent: usize) {
        let width = self.0.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
        let pad = " ".repeat(indent);
        for (k, v) in &self.0 {
            match v {
                Value::Object(inner) => {
                    let _ = writeln!(out, "{pad}{k}:");
                    inner.write_human(out, indent + 2);
                }
                Value::List(items) => {
                    let _ = writeln!(out, "{pad}{k}: {} item(s)", items.len());
                    for (i, item) in items.iter().enumerate() {
                        let _ = writeln!(out, "{pad}  [{i}]");
                        item.write_human(out, indent + 4);
                    }
                }
                Value::TextList(items) => {
                    if items.is_empty() {
                        let _ = writeln!(out, "{pad}{k:width$}  (none)");
                    }
                    for item in items {
                        let _ = writeln!(out, "{pad}{k:width$}  {item}");
                    }
                }
                other => {
                    let _ = writeln!(out, "{pad}{k:width$}  {}", other.to_text());
                }
            }
        }
    }
}

impl Value {
    /// The JSON form: integers as numbers, bytes as a hex string.
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            Value::Uint(v, _) => serde_json::Value::from(*v),
            Value::Bool(b) => serde_json::Value::Bool(*b),
            Value::Text(s) => serde_json::Value::String(s.clone()),
            Value::Bytes(b) => serde_json::Value::String(hex_string(b)),
            Value::Object(f) => f.to_json(),
            Value::List(items) => {
                serde_json::Value::Array(items.iter().map(Fields::to_json).collect())
            }
            Value::TextList(items) => serde_json::Value::Array(
                items
                    .iter()
                    .map(|s| serde_json::Value::String(s.clone()))
                    .collect(),
            ),
        }
    }

    fn to_text(&self) -> String {
        match self {
            Value::Uint(v, Radix::Dec) => v.to_string(),
            Value::Uint(v, Radix::Hex(digits)) => {
                if *v < 10 {
                    format!("{v:#0w$x}", w = digits + 2)
                } else {
                    format!("{v:#0w$x} ({v})", w = digits + 2)
                }
            }
            Value::Bool(b) => b.to_string(),
            Value::Text(s) => s.clone(),
            Value::Bytes(b) if b.is_empty() => "(none)".to_string(),
            Value::Bytes(b) => hex_string(b),
            Value::Object(_) | Value::List(_) | Value::TextList(_) => String::new(),
        }
    }
}

/// Lower-case hex digits of `bytes`, no separators.
pub fn hex_string(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_and_text_agree() {
        let mut inner = Fields::new();
        inner.dec("byte_count", 43u32);
        let mut f = Fields::new();
        f.hex("qpn", 0x1dbbu32, 6)
            .flag("se", true)
            .text("opcode", "req")
            .bytes("data", &[0xab, 0x01])
            .push("seg", Value::Object(inner.clone()))
            .push("segments", Value::List(vec![inner]))
            .push("warnings", Value::TextList(vec![]));
        let j = f.to_json();
        assert_eq!(j["qpn"], 0x1dbb);
        assert_eq!(j["se"], true);
        assert_eq!(j["data"], "ab01");
        assert_eq!(j["seg"]["byte_count"], 43);
        assert_eq!(j["segments"][0]["byte_count"], 43);
        let keys: Vec<&String> = j.as_object().unwrap().keys().collect();
        assert_eq!(keys[0], "qpn");
        let text = f.to_human();
        assert!(text.contains("0x001dbb (7611)"), "{text}");
        assert!(text.contains("opcode"), "{text}");
        assert_eq!(f.uint("qpn"), Some(0x1dbb));
        assert_eq!(f.str("opcode"), Some("req"));
    }

    #[test]
    fn errors_are_one_line() {
        let e = DecodeError::Length {
            what: "CQE",
            expected: "64 or 128 bytes".into(),
            got: 3,
        };
        assert_eq!(e.to_string(), "a CQE is 64 or 128 bytes, got 3 bytes");
    }
}
