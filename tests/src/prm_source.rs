//! What `core/src/prm/*.rs` declares, read from the source text, so that the
//! spec tests can tell when the code grows a struct, field, bit range,
//! enumeration or constant that `specs/` does not list.
//!
//! The scanner knows the crate's own declaration forms only: `wire_struct!`
//! bodies (`pub struct Name(size) { pub field: Type, ... }`), `#[bitfield]`
//! structs with one `#[bits(n)]` per member, `prm_enum!` enumerations
//! (`pub enum Name: repr {`), and `pub const NAME: T` items at module level,
//! in `pub mod m { }` blocks (named `m::NAME`) and in `impl T { }` blocks
//! (named `T::NAME`). The bodies of `macro_rules!` are skipped. Anything it
//! cannot read is an error, not a silent omission.

use std::path::{Path, PathBuf};

/// A `wire_struct!` declaration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WireStruct {
    /// Type name.
    pub name: String,
    /// Declared size in bytes.
    pub size: usize,
    /// `(field name, field type)` in declaration order.
    pub fields: Vec<(String, String)>,
}

/// One named member of a `#[bitfield]` struct.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    /// Member name (reserved `__` members are not listed).
    pub name: String,
    /// Least significant bit.
    pub lo: u32,
    /// Most significant bit.
    pub hi: u32,
}

/// A `#[bitfield]` struct.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bitfield {
    /// Type name.
    pub name: String,
    /// Total bits declared (reserved members included).
    pub bits: u32,
    /// Named members.
    pub members: Vec<Member>,
}

/// Everything the scanner found.
#[derive(Clone, Debug, Default)]
pub struct PrmSource {
    /// `wire_struct!` formats.
    pub wire_structs: Vec<WireStruct>,
    /// `#[bitfield]` types.
    pub bitfields: Vec<Bitfield>,
    /// `prm_enum!` enumeration names.
    pub enums: Vec<String>,
    /// Public constants, qualified as `NAME`, `module::NAME` or `Type::NAME`.
    pub consts: Vec<String>,
}

impl PrmSource {
    /// The bitfield type called `name`.
    pub fn bitfield(&self, name: &str) -> Option<&Bitfield> {
        self.bitfields.iter().find(|b| b.name == name)
    }
}

/// The `core/src/prm` directory.
pub fn prm_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("core")
        .join("src")
        .join("prm")
}

/// Scans every `.rs` file of `core/src/prm`.
pub fn scan() -> Result<PrmSource, String> {
    let dir = prm_dir();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
        .collect();
    files.sort();
    let mut out = PrmSource::default();
    for file in files {
        let text =
            std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
        scan_text(&text, &mut out).map_err(|e| format!("{}: {e}", file.display()))?;
    }
    Ok(out)
}

/// Scans one file's text into `out`.
pub fn scan_text(text: &str, out: &mut PrmSource) -> Result<(), String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut i = 0;
    let mut scope: Option<String> = None;
    let mut bitfield_pending = false;
    let mut in_prm_enum = false;
    while i < lines.len() {
        let raw = lines[i];
        let line = raw.trim();
        let at_col0 = !raw.starts_with(' ') && !raw.starts_with('\t');
        let line_no = i + 1;
        if at_col0 && line.starts_with("macro_rules!") {
            i = skip_block(&lines, i)?;
            continue;
        }
        if at_col0 && line == "}" {
            scope = None;
            in_prm_enum = false;
        }
        if at_col0 && line.starts_with("prm_enum!") {
            in_prm_enum = true;
        }
        if at_col0 {
            if let Some(name) = block_name(line, "pub mod ").or_else(|| block_name(line, "impl ")) {
                scope = Some(name);
            }
        }
        if line.starts_with("#[bitfield(") {
            bitfield_pending = true;
        }
        if in_prm_enum {
            if let Some(rest) = line.strip_prefix("pub enum ") {
                let name = rest.split(':').next().unwrap_or("").trim();
                if name.is_empty() {
                    return Err(format!("line {line_no}: cannot read enum name"));
                }
                out.enums.push(name.to_owned());
            }
        }
        if let Some(rest) = line.strip_prefix("pub const ") {
            if !rest.starts_with("fn ") {
                let name = rest.split(':').next().unwrap_or("").trim();
                if name.is_empty()
                    || !name
                        .chars()
                        .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
                {
                    return Err(format!(
                        "line {line_no}: cannot read constant name in {line:?}"
                    ));
                }
                let qualified = match (&scope, at_col0) {
                    (Some(s), false) => format!("{s}::{name}"),
                    _ => name.to_owned(),
                };
                out.consts.push(qualified);
            }
        }
        if let Some(rest) = line.strip_prefix("pub struct ") {
            if bitfield_pending {
                bitfield_pending = false;
                let name = rest.trim_end_matches('{').trim().to_owned();
                let (bitfield, next) = read_bitfield(&lines, i + 1, name)?;
                out.bitfields.push(bitfield);
                i = next;
                continue;
            }
            if let Some((name, size)) = wire_header(rest) {
                let (fields, next) = read_wire_fields(&lines, i + 1)?;
                if fields.is_empty() {
                    return Err(format!("line {line_no}: wire struct {name} has no fields"));
                }
                out.wire_structs.push(WireStruct { name, size, fields });
                i = next;
                continue;
            }
            return Err(format!(
                "line {line_no}: unrecognised struct declaration {line:?}"
            ));
        }
        i += 1;
    }
    Ok(())
}

/// `pub mod NAME {` / `impl NAME {` → `NAME`.
fn block_name(line: &str, prefix: &str) -> Option<String> {
    let rest = line.strip_prefix(prefix)?.strip_suffix('{')?.trim();
    if rest.is_empty() || rest.contains(' ') {
        return None;
    }
    Some(rest.to_owned())
}

/// `Name(size) {` → `(Name, size)`.
fn wire_header(rest: &str) -> Option<(String, usize)> {
    let (name, tail) = rest.split_once('(')?;
    let (size, tail) = tail.split_once(')')?;
    if tail.trim() != "{" {
        return None;
    }
    Some((name.trim().to_owned(), size.trim().parse().ok()?))
}

/// Skips a block whose first line is `lines[start]`, up to its closing `}` at column 0.
fn skip_block(lines: &[&str], start: usize) -> Result<usize, String> {
    (start + 1..lines.len())
        .find(|&j| lines[j] == "}")
        .map(|j| j + 1)
        .ok_or_else(|| format!("line {}: unterminated block", start + 1))
}

fn read_wire_fields(
    lines: &[&str],
    mut i: usize,
) -> Result<(Vec<(String, String)>, usize), String> {
    let mut fields = Vec::new();
    while i < lines.len() {
        let line = lines[i].trim();
        if line == "}" {
            return Ok((fields, i + 1));
        }
        if let Some(rest) = line.strip_prefix("pub ") {
            let (name, ty) = rest
                .split_once(':')
                .ok_or_else(|| format!("line {}: cannot read field {line:?}", i + 1))?;
            let ty = ty.trim().trim_end_matches(',').trim();
            fields.push((name.trim().to_owned(), ty.to_owned()));
        } else if !(line.starts_with("///") || line.starts_with("#[") || line.is_empty()) {
            return Err(format!(
                "line {}: unexpected line in wire struct: {line:?}",
                i + 1
            ));
        }
        i += 1;
    }
    Err("unterminated wire struct".to_owned())
}

fn read_bitfield(lines: &[&str], mut i: usize, name: String) -> Result<(Bitfield, usize), String> {
    let mut members = Vec::new();
    let mut offset = 0u32;
    let mut pending_bits: Option<u32> = None;
    while i < lines.len() {
        let line = lines[i].trim();
        if line == "}" {
            return Ok((
                Bitfield {
                    name,
                    bits: offset,
                    members,
                },
                i + 1,
            ));
        }
        if let Some(rest) = line.strip_prefix("#[bits(") {
            let n = rest
                .trim_end_matches(")]")
                .split(',')
                .next()
                .and_then(|s| s.trim().parse::<u32>().ok())
                .ok_or_else(|| format!("line {}: cannot read {line:?}", i + 1))?;
            pending_bits = Some(n);
        } else if line.starts_with("pub ") || line.starts_with("__") {
            let bits = pending_bits
                .take()
                .ok_or_else(|| format!("line {}: member without #[bits(n)]", i + 1))?;
            let member = line.trim_start_matches("pub ");
            let member_name = member.split(':').next().unwrap_or("").trim();
            if member_name != "__" {
                members.push(Member {
                    name: member_name.to_owned(),
                    lo: offset,
                    hi: offset + bits - 1,
                });
            }
            offset += bits;
        } else if !(line.starts_with("///") || line.is_empty()) {
            return Err(format!(
                "line {}: unexpected line in bitfield: {line:?}",
                i + 1
            ));
        }
        i += 1;
    }
    Err(format!("unterminated bitfield {name}"))
}
