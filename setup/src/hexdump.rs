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
//!   so that is an error.
//! - **`hexdump -C`** rows (`00000000  00 11 ... |..|`), offsets checked
//!   the same way.
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
        for (line, toks) in &lines {
            let rows = if offset_style {
                let rows = offset_rows(toks, *line)?;
                if rows.is_empty() && !toks.is_empty() && toks.iter().all(|t| is_hex(t.text)) {
                    return Err(HexError::MixedStyles { line: *line });
                }
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
        const ALPHABET: &[u8] = b"0123456789abcdefABx:[]. |,#*\n\t\xff";
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
