//! Reading hex dumps of mlx5 rings: the text people paste from a kernel log,
//! an rdma-core debug file or a DPDK dump, turned back into bytes.
//!
//! Accepted styles (one input may not mix the two families):
//!
//! - **Plain hex**: hex digits, with or without spaces, on any number of
//!   lines (`00 11 22`, `001122`, `0x00, 0x11`). Every whitespace- or
//!   comma-separated token must hold an even number of digits: a token split
//!   in the middle of a byte is a mistake, not a style.
//! - **rdma-core word dumps**: libmlx5's `dump_cqe` prints each 32-bit word
//!   with `%08x` after `be32toh` (rdma-core `providers/mlx5/cq.c`), so the
//!   digits are already in memory order: `00000000 00000000 ...` is read
//!   exactly like plain hex.
//! - **Kernel `print_hex_dump` lines** with `DUMP_PREFIX_OFFSET` (or
//!   `DUMP_PREFIX_ADDRESS`), group size 1, as mlx5 prints its error CQEs and
//!   WQEs (`00000030: 00 00 ... d2`). Anything before the offset token is a
//!   log prefix and is skipped (a dmesg timestamp `[  123.456]`, a device
//!   name `mlx5_core 0000:3b:00.1 eth1:`, the `cqe_dump:` prefix string, a
//!   journal prefix). A trailing ASCII column (the `ascii = true` form) is
//!   recognised by the run of two or more spaces the kernel pads before it.
//!   Offsets are checked: every row must start where the previous one ended,
//!   which catches a lost line or a duplicated byte. Lines of an
//!   offset-prefixed dump without an offset are log text and are skipped —
//!   unless they hold nothing but hex, which would be bytes silently lost,
//!   so that is an error. The one exception is a row an e-mail client
//!   wrapped: a line of bytes alone right after a short row, that makes it
//!   exactly full width, is its tail.
//! - **`hexdump -C`** rows (`00000000  00 11 ... |..|`), offsets checked
//!   the same way.
//! - **Word dumps inside log text**, as they are pasted from a terminal or
//!   an issue, when the input is none of the above: libmlx5's
//!   `mlx5: <host>: got completion with error:` line before the rows, the
//!   older kernel `mlx5_ib` `dump error cqe` line (whose rows are
//!   `%08x %08x %08x %08x` too), any per-line prefix before the four words
//!   of a row (`dmesg -H` `[  +0.000002]`, a CI timestamp, a `> ` quote,
//!   a Markdown code span)
//!   and the log lines after the rows. The rows must be one block; a line
//!   that is not a row but holds a `%08x` word or nothing but hex is an
//!   error, never skipped.
//!
//! - **Quoted-printable mail text** (a raw message from a list archive):
//!   when the text is none of the above and shows a soft line break (a
//!   line ending in `=`) or an `=3D`/`=20`/`=09` escape, it is decoded
//!   (RFC 2045) and read again in the styles above.
//!
//! Empty lines and lines starting with `#` are ignored everywhere.
//!
//! Panic policy: nothing here panics; every malformed input is a
//! [`HexError`] whose `Display` is one line.
#![forbid(unsafe_code)]

use std::fmt;

/// Why a hex dump could not be read. `Display` gives a one-line message that
/// names the line (1-based) where it applies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HexError {
    /// The input holds no bytes at all.
    Empty,
    /// A token has an odd number of hex digits.
    OddDigits {
        /// 1-based line number.
        line: usize,
        /// The offending token (shortened).
        token: String,
    },
    /// A token is not hex.
    NotHex {
        /// 1-based line number.
        line: usize,
        /// The offending token (shortened).
        token: String,
    },
    /// A dump row does not start where the previous rows ended.
    OffsetMismatch {
        /// 1-based line number.
        line: usize,
        /// The offset the row claims.
        offset: u64,
        /// The offset the bytes read so far imply.
        expected: u64,
    },
    /// An offset-prefixed row printed with a group size above one: the
    /// kernel prints such groups in host byte order, so their byte order
    /// cannot be known from the text.
    GroupedBytes {
        /// 1-based line number.
        line: usize,
        /// The offending token (shortened).
        token: String,
    },
    /// A hex-only line without an offset inside an offset-prefixed dump.
    MixedStyles {
        /// 1-based line number.
        line: usize,
    },
    /// `hexdump`'s `*` (repeated rows collapsed) cannot be expanded safely.
    CollapsedRows {
        /// 1-based line number.
        line: usize,
    },
}

impl fmt::Display for HexError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HexError::Empty => write!(f, "no hex bytes in the input"),
            HexError::OddDigits { line, token } => write!(
                f,
                "line {line}: odd number of hex digits in `{token}` (a byte is two digits)"
            ),
            HexError::NotHex { line, token } => {
                write!(f, "line {line}: `{token}` is not hex")
            }
            HexError::OffsetMismatch {
                line,
                offset,
                expected,
            } => write!(
                f,
                "line {line}: row offset {offset:#x} but the rows before it end at {expected:#x} (a lost or extra byte?)"
            ),
            HexError::GroupedBytes { line, token } => write!(
                f,
                "line {line}: `{token}` groups several bytes after an offset; print_hex_dump prints such groups in host byte order, so give one byte per group"
            ),
            HexError::MixedStyles { line } => write!(
                f,
                "line {line}: hex without an offset inside an offset-prefixed dump"
            ),
            HexError::CollapsedRows { line } => write!(
                f,
                "line {line}: `*` (collapsed repeated rows) is not supported; dump with `hexdump -v`"
            ),
        }
    }
}

impl std::error::Error for HexError {}

/// The style a dump was recognised as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DumpStyle {
    /// Hex digits only (tokens of mixed lengths, or of two digits).
    PlainHex,
    /// Every token is eight digits: an rdma-core word dump (read as plain hex).
    Words,
    /// Kernel `print_hex_dump` rows with an offset (or address) prefix.
    PrintHexDump,
    /// `hexdump -C` rows.
    HexdumpC,
}

/// Bytes read from a dump, with the style they were recognised in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dump {
    /// The bytes, in memory order.
    pub bytes: Vec<u8>,
    /// How the input was written.
    pub style: DumpStyle,
}

/// Reads the bytes of a dump in any accepted style (see the module doc).
pub fn parse(text: &str) -> Result<Vec<u8>, HexError> {
    parse_dump(text).map(|d| d.bytes)
}

/// One whitespace- or comma-separated token of a line.
#[derive(Debug, Clone, Copy)]
struct Token<'a> {
    text: &'a str,
    /// Two or more blanks stand between this token and the previous one.
    after_gap: bool,
}

fn tokens(line: &str) -> Vec<Token<'_>> {
    let mut out = Vec::new();
    let mut start = None;
    let mut blanks = 0usize;
    for (i, c) in line.char_indices() {
        let sep = c.is_whitespace() || c == ',';
        match (sep, start) {
            (true, Some(s)) => {
                out.push(Token {
                    text: &line[s..i],
                    after_gap: blanks >= 2 && !out.is_empty(),
                });
                start = None;
                blanks = usize::from(c != ',');
            }
            (true, None) => blanks += usize::from(c != ','),
            (false, None) => start = Some(i),
            (false, Some(_)) => {}
        }
    }
    if let Some(s) = start {
        out.push(Token {
            text: &line[s..],
            after_gap: blanks >= 2 && !out.is_empty(),
        });
    }
    out
}

/// Shortens a token for an error message.
fn shown(token: &str) -> String {
    const MAX: usize = 24;
    if token.chars().count() <= MAX {
        token.to_string()
    } else {
        let mut s: String = token.chars().take(MAX).collect();
        s.push('…');
        s
    }
}

fn is_hex(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The offset of a `print_hex_dump` row prefix (`00000030:`), if `text` is one.
fn offset_token(text: &str) -> Option<u64> {
    let digits = text.strip_suffix(':')?;
    if digits.len() > 16 || !is_hex(digits) {
        return None;
    }
    u64::from_str_radix(digits, 16).ok()
}

fn hex_byte(text: &str) -> Option<u8> {
    if text.len() == 2 && is_hex(text) {
        u8::from_str_radix(text, 16).ok()
    } else {
        None
    }
}

/// Appends the bytes of a plain-hex token (optionally `0x`-prefixed).
fn push_plain(token: &str, line: usize, out: &mut Vec<u8>) -> Result<(), HexError> {
    let digits = token
        .strip_prefix("0x")
        .or_else(|| token.strip_prefix("0X"))
        .unwrap_or(token);
    if !is_hex(digits) {
        return Err(HexError::NotHex {
            line,
            token: shown(token),
        });
    }
    if digits.len() % 2 != 0 {
        return Err(HexError::OddDigits {
            line,
            token: shown(token),
        });
    }
    for pair in digits.as_bytes().chunks(2) {
        let s = std::str::from_utf8(pair).map_err(|_| HexError::NotHex {
            line,
            token: shown(token),
        })?;
        let b = u8::from_str_radix(s, 16).map_err(|_| HexError::NotHex {
            line,
            token: shown(token),
        })?;
        out.push(b);
    }
    Ok(())
}

/// Drops a leading dmesg timestamp (`[  123.456789] `).
fn strip_dmesg_stamp(line: &str) -> &str {
    let t = line.trim_start();
    if let Some(rest) = t.strip_prefix('[') {
        if let Some(end) = rest.find(']') {
            let stamp = rest[..end].trim();
            if !stamp.is_empty() && stamp.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
                return &rest[end + 1..];
            }
        }
    }
    line
}

/// Rows of one offset-prefixed line: (offset, bytes). A line may hold
/// several rows when separate shell arguments were joined with spaces.
fn offset_rows(toks: &[Token<'_>], line: usize) -> Result<Vec<(u64, Vec<u8>)>, HexError> {
    let mut rows: Vec<(u64, Vec<u8>)> = Vec::new();
    // Index of the row being filled, and whether its hex column has ended
    // (an ASCII column or other text follows).
    let mut current: Option<usize> = None;
    let mut ended = false;
    for tok in toks {
        if let Some(off) = offset_token(tok.text) {
            // Inside an ASCII column only a full-width offset starts a row.
            let width = tok.text.len() - 1;
            if !ended || current.is_none() || width == 8 || width == 16 {
                rows.push((off, Vec::new()));
                current = Some(rows.len() - 1);
                ended = false;
                continue;
            }
        }
        let Some(ix) = current else { continue };
        if ended {
            continue;
        }
        let has_bytes = rows.get(ix).is_some_and(|r| !r.1.is_empty());
        if tok.after_gap && has_bytes {
            ended = true;
            continue;
        }
        match hex_byte(tok.text) {
            Some(b) => {
                if let Some(r) = rows.get_mut(ix) {
                    r.1.push(b);
                }
            }
            None => {
                if !has_bytes && is_hex(tok.text) && tok.text.len() % 2 == 0 {
                    return Err(HexError::GroupedBytes {
                        line,
                        token: shown(tok.text),
                    });
                }
                ended = true;
            }
        }
    }
    // Rows without bytes were prefixes that happened to look like offsets.
    rows.retain(|r| !r.1.is_empty());
    Ok(rows)
}

/// A `hexdump -C` row: `00000000  00 11 .. |ascii|`, or the closing offset alone.
fn hexdump_c_row(toks: &[Token<'_>]) -> Option<(u64, Vec<u8>)> {
    let first = toks.first()?;
    if first.text.len() != 8 || !is_hex(first.text) {
        return None;
    }
    let off = u64::from_str_radix(first.text, 16).ok()?;
    let mut bytes = Vec::new();
    let mut saw_ascii = false;
    for tok in toks.iter().skip(1) {
        if tok.text.starts_with('|') {
            saw_ascii = true;
            break;
        }
        bytes.push(hex_byte(tok.text)?);
    }
    (saw_ascii || (toks.len() == 1)).then_some((off, bytes))
}

/// Reads the bytes of a dump and tells which style it was written in.
pub fn parse_dump(text: &str) -> Result<Dump, HexError> {
    let strict = match parse_dump_strict(text) {
        Ok(dump) => return Ok(dump),
        Err(e) => e,
    };
    // A word dump pasted with the log around it: only tried when the
    // text is not a dump in the strict styles, and only accepted when it
    // is one block of word rows.
    if let Some(dump) = logged_word_dump(text) {
        return Ok(dump);
    }
    // A dump copied from a mail archive's raw message, still in its
    // quoted-printable transfer encoding: read the decoded text, in the
    // same styles. Otherwise the strict error (about the text as given)
    // stands.
    if let Some(decoded) = quoted_printable(text) {
        if let Ok(dump) = parse_dump_strict(&decoded) {
            return Ok(dump);
        }
        if let Some(dump) = logged_word_dump(&decoded) {
            return Ok(dump);
        }
    }
    Err(strict)
}

/// The text of a quoted-printable body (RFC 2045 §6.7), when `text` is
/// one: it has a soft line break (a line ending in `=`, which a mailer
/// adds to keep lines under 76 characters, often in the middle of a dump
/// row or a hex byte) or an `=XX` escape of a byte that must be escaped
/// (`=3D` for `=`, `=20`/`=09` for a blank before a line end). The breaks
/// are removed and the escapes decoded; an `=` followed by anything else
/// is kept as it is (log text may hold `key=value`). `None` when the text
/// shows none of these marks: it is then read as it is.
fn quoted_printable(text: &str) -> Option<String> {
    let soft_break = text
        .lines()
        .any(|l| l.trim_end_matches([' ', '\t']).ends_with('='));
    let escape = ["=3D", "=20", "=09"].iter().any(|e| text.contains(e));
    if !soft_break && !escape {
        return None;
    }
    let mut out: Vec<u8> = Vec::with_capacity(text.len());
    let mut lines = text.split('\n').peekable();
    while let Some(raw) = lines.next() {
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        // Transport padding after a soft break's `=` is not text.
        let trimmed = line.trim_end_matches([' ', '\t']);
        let (body, joined) = match trimmed.strip_suffix('=') {
            Some(body) => (body, true),
            None => (line, false),
        };
        let b = body.as_bytes();
        let mut i = 0;
        while i < b.len() {
            let escaped = (b[i] == b'=')
                .then(|| b.get(i + 1..i + 3))
                .flatten()
                .filter(|d| {
                    d.iter()
                        .all(|c| c.is_ascii_digit() || (b'A'..=b'F').contains(c))
                })
                .and_then(|d| std::str::from_utf8(d).ok())
                .and_then(|d| u8::from_str_radix(d, 16).ok());
            match escaped {
                Some(byte) => {
                    out.push(byte);
                    i += 3;
                }
                None => {
                    out.push(b[i]);
                    i += 1;
                }
            }
        }
        if !joined && lines.peek().is_some() {
            out.push(b'\n');
        }
    }
    Some(String::from_utf8_lossy(&out).into_owned())
}

/// The bytes of a word row: a line whose last four tokens are `%08x`
/// words (anything before them is a log prefix), unless the token before
/// them is a `print_hex_dump` offset (a group-size-4 dump is in host byte
/// order, see [`HexError::GroupedBytes`]) or also a word (a fifth word:
/// which four are the row is not known).
fn word_row(toks: &[Token<'_>]) -> Option<Vec<u8>> {
    let is_word = |t: &Token<'_>| t.text.len() == 8 && is_hex(t.text);
    let split = toks.len().checked_sub(4)?;
    let (prefix, words) = toks.split_at(split);
    if !words.iter().all(is_word) {
        return None;
    }
    if let Some(before) = prefix.last() {
        if is_word(before) || offset_token(before.text).is_some() {
            return None;
        }
    }
    let mut bytes = Vec::with_capacity(16);
    for w in words {
        push_plain(w.text, 0, &mut bytes).ok()?;
    }
    Some(bytes)
}

/// An rdma-core or kernel word dump inside log text, as it is pasted from
/// a terminal or an issue: libmlx5's `mlx5: <host>: got completion with
/// error:` line before the rows (rdma-core `providers/mlx5/cq.c`), the
/// kernel's `dump error cqe` line (older `mlx5_ib` `dump_cqe`, which
/// printed `%08x %08x %08x %08x` rows too), per-line prefixes the strict
/// reader does not know (a `dmesg -H` stamp `[  +0.000002]`, a CI
/// timestamp `19:34:56`, a `> ` quote) and the application's log lines
/// after them. Every word row is four `%08x` words at the end of its line
/// (digits already in memory order, as in [`DumpStyle::Words`]); the rows
/// must be one block. Other lines are log text and are skipped, but only
/// when they hold no `%08x` word and are not all hex (bytes that would be
/// silently lost). `None` when the text is not such a dump.
fn logged_word_dump(text: &str) -> Option<Dump> {
    let mut bytes = Vec::new();
    // Rows seen, and whether log text has followed them.
    let mut rows = 0usize;
    let mut text_after_rows = false;
    for line in text.lines() {
        let l = strip_dmesg_stamp(line).trim_start();
        // An e-mail or Markdown quote (`> `, `>> `, `> > `), and a
        // Markdown code span around the line (``` ``00000000 ..`` ```).
        let l = l
            .trim_start_matches(|c: char| c == '>' || c.is_whitespace())
            .trim_matches(|c: char| c == '`' || c.is_whitespace());
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        let toks = tokens(l);
        if let Some(row) = word_row(&toks) {
            if text_after_rows {
                return None;
            }
            bytes.extend_from_slice(&row);
            rows += 1;
            continue;
        }
        let has_word = toks.iter().any(|t| t.text.len() == 8 && is_hex(t.text));
        let all_hex = toks.iter().all(|t| {
            let digits = t
                .text
                .strip_prefix("0x")
                .or_else(|| t.text.strip_prefix("0X"))
                .unwrap_or(t.text);
            is_hex(digits)
        });
        if has_word || all_hex {
            return None;
        }
        text_after_rows |= rows > 0;
    }
    (rows > 0).then_some(Dump {
        bytes,
        style: DumpStyle::Words,
    })
}

/// The bytes of a line that is the wrapped tail of a `print_hex_dump` row
/// of `have` bytes: nothing but two-digit hex bytes (after e-mail quote
/// marks), exactly as many as the row lacks to be `width` bytes wide. Any
/// other hex-only line stays an error ([`HexError::MixedStyles`]).
fn wrapped_tail(toks: &[Token<'_>], have: usize, width: usize) -> Option<Vec<u8>> {
    let bytes: Vec<u8> = toks
        .iter()
        .skip_while(|t| t.text.chars().all(|c| c == '>'))
        .map(|t| hex_byte(t.text))
        .collect::<Option<_>>()?;
    (!bytes.is_empty() && have + bytes.len() == width).then_some(bytes)
}

/// [`parse_dump`] without the logged-word-dump fallback.
fn parse_dump_strict(text: &str) -> Result<Dump, HexError> {
    // Pass 1: does any line carry a print_hex_dump offset, or is the input hexdump -C?
    let lines: Vec<(usize, Vec<Token<'_>>)> = text
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, strip_dmesg_stamp(l)))
        .filter(|(_, l)| {
            let t = l.trim_start();
            !t.is_empty() && !t.starts_with('#')
        })
        .map(|(n, l)| (n, tokens(l)))
        .collect();
    let offset_style = lines
        .iter()
        .any(|(_, toks)| toks.iter().any(|t| offset_token(t.text).is_some()));
    let hexdump_c = !offset_style
        && lines.iter().any(|(_, toks)| {
            toks.len() > 1
                && toks.iter().any(|t| t.text.starts_with('|'))
                && hexdump_c_row(toks).is_some()
        });

    if offset_style || hexdump_c {
        let mut bytes = Vec::new();
        let mut base: Option<u64> = None;
        // An offset token wider than `%.8x` is an address (DUMP_PREFIX_ADDRESS).
        let hashed_width = lines
            .iter()
            .flat_map(|(_, toks)| toks.iter())
            .find(|t| offset_token(t.text).is_some() && t.text.len() > 9)
            .map(|t| t.text.len());
        // The length of the row on the line before, while a wrapped tail
        // may still follow it, and the widest row so far.
        let mut open_row: Option<usize> = None;
        let mut widest = 16usize;
        for (line, toks) in &lines {
            let rows = if offset_style {
                let rows = offset_rows(toks, *line)?;
                if rows.is_empty() {
                    if let Some(tail) = open_row.and_then(|n| wrapped_tail(toks, n, widest)) {
                        // A row an e-mail client wrapped: its tail, alone on
                        // the next line, completes it to full width (the
                        // next row's offset checks that too).
                        open_row = None;
                        bytes.extend_from_slice(&tail);
                        continue;
                    }
                    if !toks.is_empty() && toks.iter().all(|t| is_hex(t.text)) {
                        return Err(HexError::MixedStyles { line: *line });
                    }
                }
                if let Some(w) = rows.iter().map(|r| r.1.len()).max() {
                    widest = widest.max(w);
                }
                open_row = rows.last().map(|r| r.1.len()).filter(|n| *n < widest);
                rows
            } else if toks.first().is_some_and(|t| t.text == "*") {
                return Err(HexError::CollapsedRows { line: *line });
            } else {
                match hexdump_c_row(toks) {
                    Some(row) => vec![row],
                    None => return Err(HexError::MixedStyles { line: *line }),
                }
            };
            for (off, row) in rows {
                let start = *base.get_or_insert(off);
                let expected = start.saturating_add(bytes.len() as u64);
                // Offsets (DUMP_PREFIX_OFFSET, `%.8x`) must be contiguous;
                // wider tokens are DUMP_PREFIX_ADDRESS pointers, which the
                // kernel prints hashed (`%p`), so they cannot be checked.
                if off != expected && (hashed_width.is_none() || !offset_style) {
                    return Err(HexError::OffsetMismatch {
                        line: *line,
                        offset: off,
                        expected,
                    });
                }
                bytes.extend_from_slice(&row);
            }
        }
        if bytes.is_empty() {
            return Err(HexError::Empty);
        }
        let style = if offset_style {
            DumpStyle::PrintHexDump
        } else {
            DumpStyle::HexdumpC
        };
        return Ok(Dump { bytes, style });
    }

    let mut bytes = Vec::new();
    let mut all_words = true;
    for (line, toks) in &lines {
        for tok in toks {
            all_words &= tok.text.len() == 8 && is_hex(tok.text);
            push_plain(tok.text, *line, &mut bytes)?;
        }
    }
    if bytes.is_empty() {
        return Err(HexError::Empty);
    }
    let style = if all_words {
        DumpStyle::Words
    } else {
        DumpStyle::PlainHex
    };
    Ok(Dump { bytes, style })
}

/// Formats bytes as plain hex, 16 space-separated bytes a line.
pub fn to_plain_hex(bytes: &[u8]) -> String {
    let mut out = String::new();
    for row in bytes.chunks(16) {
        let line: Vec<String> = row.iter().map(|b| format!("{b:02x}")).collect();
        out.push_str(&line.join(" "));
        out.push('\n');
    }
    out
}

/// Formats bytes the way the kernel's `print_hex_dump(level, prefix,
/// DUMP_PREFIX_OFFSET, 16, 1, buf, len, ascii)` prints them (lib/hexdump.c:
/// `%.8x: ` offset, bytes as `%02x` separated by one space, and with `ascii`
/// the printable characters after padding to column `16 * 3 + 1`).
pub fn to_print_hex_dump(bytes: &[u8], prefix: &str, ascii: bool) -> String {
    let mut out = String::new();
    for (i, row) in bytes.chunks(16).enumerate() {
        let hex: Vec<String> = row.iter().map(|b| format!("{b:02x}")).collect();
        let mut line = format!("{prefix}{:08x}: {}", i * 16, hex.join(" "));
        if ascii {
            let width = prefix.len() + 10 + 16 * 3 + 1;
            while line.len() < width {
                line.push(' ');
            }
            line.extend(row.iter().map(|&b| {
                if b.is_ascii_graphic() || b == b' ' {
                    char::from(b)
                } else {
                    '.'
                }
            }));
        }
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// Formats bytes as rdma-core's libmlx5 dumps a CQE: four `%08x` words a
/// line, each word `be32toh` of the next four bytes (memory order). A tail
/// shorter than a word is printed as its bytes.
pub fn to_word_dump(bytes: &[u8]) -> String {
    let mut out = String::new();
    for row in bytes.chunks(16) {
        let words: Vec<String> = row
            .chunks(4)
            .map(|w| w.iter().map(|b| format!("{b:02x}")).collect::<String>())
            .collect();
        out.push_str(&words.join(" "));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const CQE: [u8; 64] = {
        let mut b = [0u8; 64];
        b[52] = 0x0f;
        b[54] = 0x78;
        b[55] = 0x06;
        b[56] = 0x25;
        b[59] = 0x58;
        b[61] = 0xda;
        b[62] = 0xac;
        b[63] = 0xd2;
        b
    };

    #[test]
    fn quoted_printable_print_hex_dump_from_a_mail_archive() {
        // The kernel's error-CQE dump as a raw list message carries it: a
        // soft break inside the last row (between two digits of a byte), a
        // `=3D` in the log line, a break after a blank.
        let qp = "[  123.456789] mlx5_core 0000:3b:00.1: cqe_dump: ci=3D0x8 =\n\
                  qn=3D0x1dbb\n\
                  [  123.456790] mlx5_core 0000:3b:00.1: 00000000: 00 00 00 00 00 00 00 00 00 00 00 0=\n\
                  0 00 00 00 00\n\
                  [  123.456790] mlx5_core 0000:3b:00.1: 00000010: 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00\n\
                  [  123.456790] mlx5_core 0000:3b:00.1: 00000020: 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00\n\
                  [  123.456790] mlx5_core 0000:3b:00.1: 00000030: 00 00 00 00 0f 00 78 06 25 00 00 58 00 da ac =\r\n\
                  d2\r\n";
        let d = parse_dump(qp).unwrap();
        assert_eq!(d.bytes, CQE);
        assert_eq!(d.style, DumpStyle::PrintHexDump);
    }

    #[test]
    fn quoted_printable_word_dump_and_plain_hex() {
        // libmlx5's word rows after its log line, one row broken by the mailer.
        let words = "mlx5: host: got completion with error:\n\
                     00000000 00000000 00000000 00000000\n\
                     00000000 00000000 00000000 00000000\n\
                     00000000 00000000 00000000 00000000\n\
                     00000000 0f007806 25000058 =\n\
                     00daacd2\n";
        assert_eq!(parse(words).unwrap(), CQE);
        // A blank escaped before a line end, a row split inside a token.
        assert_eq!(
            parse("00 11=20\n22 3=\n3").unwrap(),
            vec![0, 0x11, 0x22, 0x33]
        );
    }

    #[test]
    fn text_without_quoted_printable_marks_keeps_its_error() {
        // `key=value` and a lone `=` are not quoted-printable marks: the
        // strict reader's error stands, naming the line as given.
        assert_eq!(
            parse("00 11\nsyndrome=0x1 = 22"),
            Err(HexError::NotHex {
                line: 2,
                token: "syndrome=0x1".into()
            })
        );
        // Marks present, but the decoded text is no dump either: the error
        // is still about the text as given.
        assert_eq!(
            parse("zz=3D\n00"),
            Err(HexError::NotHex {
                line: 1,
                token: "zz=3D".into()
            })
        );
        // An escape of a lower-case or non-hex pair is not decoded.
        assert_eq!(quoted_printable("a=3d=\nb=ZZ").as_deref(), Some("a=3db=ZZ"));
        assert_eq!(quoted_printable("00 11\n22"), None);
    }

    #[test]
    fn plain_hex_with_and_without_spaces() {
        assert_eq!(parse("00 11 22").unwrap(), vec![0, 0x11, 0x22]);
        assert_eq!(
            parse("001122\n3344").unwrap(),
            vec![0, 0x11, 0x22, 0x33, 0x44]
        );
        assert_eq!(parse("0x0a, 0XFF,0x10").unwrap(), vec![0x0a, 0xff, 0x10]);
        assert_eq!(parse_dump("aa bb").unwrap().style, DumpStyle::PlainHex);
    }

    #[test]
    fn word_dump_is_memory_order() {
        let d = parse_dump("00000000 0000f6d2\r\n08006214 00000000\n").unwrap();
        assert_eq!(d.style, DumpStyle::Words);
        assert_eq!(
            d.bytes,
            vec![0, 0, 0, 0, 0, 0, 0xf6, 0xd2, 8, 0, 0x62, 0x14, 0, 0, 0, 0]
        );
    }

    #[test]
    fn kernel_lines_with_prefixes_and_ascii() {
        let text = "\
[  123.456789] mlx5_core 0000:3b:00.1 eth1: Error cqe on cqn 0x817, ci 0x8, qn 0x1dbb, opcode 0xd, syndrome 0x1, vendor syndrome 0x68
[  123.456790] mlx5_core 0000:3b:00.1 eth1: 00000000: 00 73 65 65 6e 00 00 00 00 00 00 00 00 00 00 00  .seen...........
[  123.456791] mlx5_core 0000:3b:00.1 eth1: 00000010: 41 42 43 44 20 20 00 00 00 00 00 00 00 00 00 00  ABCD  ..........
";
        let d = parse_dump(text).unwrap();
        assert_eq!(d.style, DumpStyle::PrintHexDump);
        assert_eq!(d.bytes.len(), 32);
        assert_eq!(&d.bytes[..5], &[0x00, 0x73, 0x65, 0x65, 0x6e]);
        assert_eq!(&d.bytes[16..22], &[0x41, 0x42, 0x43, 0x44, 0x20, 0x20]);
    }

    #[test]
    fn cqe_dump_prefix_and_partial_ascii_row() {
        let text = "cqe_dump: 00000000: 00 00 00 00\ncqe_dump: 00000004: ab cd   ..\n";
        assert_eq!(parse(text).unwrap(), vec![0, 0, 0, 0, 0xab, 0xcd]);
    }

    #[test]
    fn rows_joined_on_one_line() {
        let text = "00000000: 01 02 00000002: 03 04";
        assert_eq!(parse(text).unwrap(), vec![1, 2, 3, 4]);
    }

    #[test]
    fn three_styles_round_trip() {
        for text in [
            to_plain_hex(&CQE),
            to_print_hex_dump(&CQE, "", false),
            to_print_hex_dump(&CQE, "[  5.000001] cqe_dump: ", true),
            to_word_dump(&CQE),
        ] {
            assert_eq!(parse(&text).unwrap(), CQE.to_vec(), "{text}");
        }
        assert_eq!(
            parse_dump(&to_word_dump(&CQE)).unwrap().style,
            DumpStyle::Words
        );
    }

    /// The last row of each source below, in memory order.
    fn last_row(bytes: &[u8]) -> &[u8] {
        bytes.get(48..64).unwrap_or_default()
    }

    #[test]
    fn rdma_core_dump_with_its_header_and_the_log_after_it() {
        // spdk/spdk#961, as posted: libmlx5's header line, the rows, then
        // the application's own log line.
        let text = "\
mlx5: ogden-rust.west.isilon.com: got completion with error:
00000000 00000000 00000000 00000000
00000000 00000000 00000000 00000000
000000b3 00000000 00000000 00000000
00000000 93005204 0a0019a1 c0921cd2
nvme_rdma.c:1748:nvme_rdma_qpair_process_completions: *ERROR*: CQ error on Queue Pair 0x7efd94490ac0, Opcode 128, Response Index 139627583889688 (4): local protection error
";
        let d = parse_dump(text).unwrap();
        assert_eq!(d.style, DumpStyle::Words);
        assert_eq!(d.bytes.len(), 64);
        assert_eq!(d.bytes[35], 0xb3);
        assert_eq!(
            last_row(&d.bytes),
            &[0, 0, 0, 0, 0x93, 0, 0x52, 0x04, 0x0a, 0, 0x19, 0xa1, 0xc0, 0x92, 0x1c, 0xd2]
        );
    }

    #[test]
    fn kernel_dump_cqe_rows_with_dmesg_relative_stamps() {
        // spdk/spdk#964: the older kernel mlx5_ib dump_cqe, read with `dmesg -H`.
        let text = "\
[Sep 2 06:28] mlx5_bond_0:dump_cqe:276:(pid 1436): dump error cqe
[  +0.000002] 00000000 00000000 00000000 00000000
[  +0.000001] 00000000 00000000 00000000 00000000
[  +0.000000] 00000000 00000000 00000000 00000000
[  +0.000001] 00000000 00008813 1001af37 115e97d3
[  +0.000005] nvmet_rdma: RDMA READ for CQE 0xffff9d8562295810 failed with status remote access error (10).
";
        let d = parse_dump(text).unwrap();
        assert_eq!(d.style, DumpStyle::Words);
        assert_eq!(
            last_row(&d.bytes),
            &[0, 0, 0, 0, 0, 0, 0x88, 0x13, 0x10, 0x01, 0xaf, 0x37, 0x11, 0x5e, 0x97, 0xd3]
        );
        // A plain dmesg stamp before each row reads the same.
        let plain = text.replace("[  +0.00000", "[ 5.00000");
        assert_eq!(parse(&plain).unwrap(), d.bytes);
    }

    #[test]
    fn ci_timestamps_and_quoted_rows() {
        // openucx/ucx#1770: a CI log with a timestamp on every line.
        let ci = "\
19:34:56 mlx5: hpc-test-node2: got completion with error:
19:34:56 00000000 00000000 00000000 00000000
19:34:56 00000000 00000000 00000000 00000000
19:34:56 00000002 00000000 00000000 00000000
19:34:56 00000000 00008a12 1002a8af 0001a2d2
19:34:56 [1502987696.853057] [hpc-test-node2:36589:4]       dc_verbs.c:593  UCX  ERROR Send completion with error on qp 0x2a8af: remote invalid request error syndrome 0x8a
";
        let d = parse_dump(ci).unwrap();
        assert_eq!(d.style, DumpStyle::Words);
        assert_eq!(d.bytes[35], 0x02);
        assert_eq!(
            &last_row(&d.bytes)[4..12],
            &[0, 0, 0x8a, 0x12, 0x10, 0x02, 0xa8, 0xaf]
        );
        // charmplusplus/charm#2532: the same style quoted, with empty quote lines.
        let quoted = "\
> mlx5: c101-011.frontera.tacc.utexas.edu: got completion with error:
> 
> 00000000 00000000 00000000 00000000
> 
> 00000000 00000000 00000000 00000000
> 
> 00000002 00000000 00000000 00000000
> 
> 00000000 00008a12 0a03eb2b 0026c1d2
> 
";
        let q = parse_dump(quoted).unwrap();
        assert_eq!(q.bytes.len(), 64);
        // facebookarchive/caffe2#616: every line in a Markdown code span.
        let spans = "\
``mlx5: node006.ib.cluster: got completion with error:``
``00000000 00000000 00000000 00000000``
``00000000 00000000 00000000 00000000``
``00000004 00000000 00000000 00000000``
``00000000 9200c211 00000086 0003d9e0``
``terminate called after throwing an instance of 'gloo::EnforceNotMet'``
";
        let s = parse_dump(spans).unwrap();
        assert_eq!(
            last_row(&s.bytes),
            &[0, 0, 0, 0, 0x92, 0, 0xc2, 0x11, 0, 0, 0, 0x86, 0, 0x03, 0xd9, 0xe0]
        );
        assert_eq!(
            &last_row(&q.bytes)[8..],
            &[0x0a, 0x03, 0xeb, 0x2b, 0x00, 0x26, 0xc1, 0xd2]
        );
    }

    #[test]
    fn logged_word_dumps_never_lose_bytes_silently() {
        let rows = "00000000 00000000 00000000 00000000\n";
        let header = "mlx5: node: got completion with error:\n";
        // Log text between rows: a row may be missing.
        let split = format!("{header}{rows}some log line\n{rows}");
        assert!(parse(&split).is_err());
        // A row run into the next log line (openucx/ucx#1569): not a row,
        // and it holds words, so it is refused rather than skipped.
        let glued = format!(
            "{header}{rows}00000000 00008813 08006214 0000f6d2[1496344648.549828] [vegas06:14872:0] UCX ERROR\n"
        );
        assert!(parse(&glued).is_err());
        // A fifth word: which four are the row is unknown.
        assert!(parse(&format!("{header}deadbeef {rows}")).is_err());
        // Log text holding a word, or nothing but hex.
        assert!(parse(&format!("{header}{rows}qp 0000f6d2 failed\n")).is_err());
        assert!(parse(&format!("{header}{rows}00 11\n")).is_err());
        // A group-size-4 print_hex_dump stays refused (host byte order).
        assert!(matches!(
            parse("x: 00000000: 00000000 00000000 00000000 00000000\nlog text\n"),
            Err(HexError::GroupedBytes { .. })
        ));
        // Text without any row keeps its strict error.
        assert_eq!(
            parse("mlx5: node: got completion with error:\n"),
            Err(HexError::NotHex {
                line: 1,
                token: "mlx5:".into()
            })
        );
    }

    #[test]
    fn rows_an_email_client_wrapped() {
        // RDMA/mlx5 "Fix a race for an ODP MR" as first posted (2025-01-19):
        // every row wrapped after 13 bytes, and the same quoted in a reply.
        let wrapped = "\
infiniband rocep8s0f0: dump_cqe:277:(pid 0): WC error: 6,
Message: memory bind operation error
cqe_dump: 00000000: 00 00 00 00 00 00 00 00 00 00 00 00 00
                    00 00 00
cqe_dump: 00000010: 00 00 00 00 00 00 00 00 00 00 00 00 00
                    00 00 00
cqe_dump: 00000020: 00 00 00 00 00 00 00 00 00 00 00 00 00
                    00 00 00
cqe_dump: 00000030: 00 00 00 00 08 00 78 06 25 00 11 b9 00
                    0e dd d2
------------[ cut here ]------------
";
        let d = parse_dump(wrapped).unwrap();
        assert_eq!(d.style, DumpStyle::PrintHexDump);
        assert_eq!(d.bytes.len(), 64);
        assert_eq!(
            last_row(&d.bytes),
            &[0, 0, 0, 0, 8, 0, 0x78, 0x06, 0x25, 0, 0x11, 0xb9, 0, 0x0e, 0xdd, 0xd2]
        );
        let quoted: String = wrapped.lines().map(|l| format!("> {l}\n")).collect();
        assert_eq!(parse(&quoted).unwrap(), d.bytes);
        // A tail that does not complete the row is still refused.
        assert!(matches!(
            parse("00000000: 00 11 22\n33 44\n"),
            Err(HexError::MixedStyles { line: 2 })
        ));
        // So is a tail after a full row, or one more than the row lacks.
        let full = format!("00000000: {}\n00\n", ["00"; 16].join(" "));
        assert!(parse(&full).is_err());
        let over = format!("00000000: {}\n00 00 00 00\n", ["00"; 13].join(" "));
        assert!(parse(&over).is_err());
    }

    #[test]
    fn hexdump_c_rows() {
        let text = "00000000  00 01 02 03 04 05 06 07  08 09 0a 0b 0c 0d 0e 0f  |................|\n00000010  10 11                                             |..|\n00000012\n";
        let d = parse_dump(text).unwrap();
        assert_eq!(d.style, DumpStyle::HexdumpC);
        assert_eq!(d.bytes, (0u8..0x12).collect::<Vec<_>>());
    }

    #[test]
    fn errors_are_one_line() {
        let cases = [
            ("", HexError::Empty),
            ("# only a comment\n", HexError::Empty),
            (
                "00 1",
                HexError::OddDigits {
                    line: 1,
                    token: "1".into(),
                },
            ),
            (
                "00\nzz",
                HexError::NotHex {
                    line: 2,
                    token: "zz".into(),
                },
            ),
            (
                "00000000: 00 00\n00000003: 00",
                HexError::OffsetMismatch {
                    line: 2,
                    offset: 3,
                    expected: 2,
                },
            ),
            (
                "00000000: 0011 2233",
                HexError::GroupedBytes {
                    line: 1,
                    token: "0011".into(),
                },
            ),
            (
                "00000000: 00 11\n22 33\n",
                HexError::MixedStyles { line: 2 },
            ),
        ];
        for (text, want) in cases {
            let got = parse(text).unwrap_err();
            assert_eq!(got, want, "{text:?}");
            assert!(!got.to_string().contains('\n'));
        }
    }

    #[test]
    fn seventeen_bytes_in_a_row_are_caught() {
        let mut text = String::from("00000000:");
        for _ in 0..17 {
            text.push_str(" 00");
        }
        text.push_str("\n00000010: 00\n");
        assert!(matches!(
            parse(&text),
            Err(HexError::OffsetMismatch { line: 2, .. })
        ));
    }

    #[test]
    fn address_prefixed_rows_are_not_offset_checked() {
        // DUMP_PREFIX_ADDRESS with hashed pointers: rows are not contiguous.
        let text = "000000006a8c1c4c: 01 02\n00000000f00dcafe: 03 04\n";
        assert_eq!(parse(text).unwrap(), vec![1, 2, 3, 4]);
    }

    /// A small deterministic generator (xorshift64*), so the no-panic
    /// sweep below needs no dependency.
    fn next(state: &mut u64) -> u64 {
        *state ^= *state >> 12;
        *state ^= *state << 25;
        *state ^= *state >> 27;
        state.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    #[test]
    fn arbitrary_text_never_panics() {
        const ALPHABET: &[u8] = b"0123456789abcdefABx:[]. |,#*>+\n\t\xff";
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..20_000 {
            let len = (next(&mut state) % 120) as usize;
            let bytes: Vec<u8> = (0..len)
                .map(|_| ALPHABET[(next(&mut state) % ALPHABET.len() as u64) as usize])
                .collect();
            let text = String::from_utf8_lossy(&bytes);
            if let Err(e) = parse(&text) {
                assert!(!e.to_string().contains('\n'));
            }
        }
    }

    #[test]
    fn long_tokens_are_shortened() {
        let long = "g".repeat(100);
        let msg = parse(&long).unwrap_err().to_string();
        assert!(msg.len() < 80, "{msg}");
    }
}
