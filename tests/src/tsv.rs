//! Reading the tab-separated tables in `specs/` (`prm.tsv`, `constants.tsv`).
//!
//! Format (see `specs/README.md`): the first line names the columns, every
//! other non-empty line is one row with exactly that many tab-separated
//! cells; an empty value is written `-`. There are no comment lines and no
//! quoting.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The `specs/` directory of the repository.
pub fn specs_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("specs")
}

/// One row of a table, by column name.
#[derive(Clone, Debug)]
pub struct Row {
    /// 1-based line number in the file (for error messages).
    pub line: usize,
    cells: BTreeMap<String, String>,
}

impl Row {
    /// The cell of column `col`.
    pub fn get(&self, col: &str) -> Result<&str, String> {
        self.cells
            .get(col)
            .map(String::as_str)
            .ok_or_else(|| format!("line {}: no column {col:?}", self.line))
    }

    /// The cell of column `col` as an integer (decimal or `0x` hex).
    pub fn int(&self, col: &str) -> Result<u64, String> {
        let cell = self.get(col)?;
        parse_int(cell).map_err(|e| format!("line {}: column {col}: {e}", self.line))
    }

    /// The cell of column `col` as a `usize`.
    pub fn usize(&self, col: &str) -> Result<usize, String> {
        let v = self.int(col)?;
        usize::try_from(v).map_err(|_| format!("line {}: column {col}: {v} too large", self.line))
    }
}

/// A whole table.
#[derive(Clone, Debug)]
pub struct Table {
    /// The column names, in file order.
    pub columns: Vec<String>,
    /// The rows, in file order.
    pub rows: Vec<Row>,
}

/// Parses an integer written in decimal or as `0x` hex.
pub fn parse_int(s: &str) -> Result<u64, String> {
    let parsed = match s.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => s.parse::<u64>(),
    };
    parsed.map_err(|e| format!("{s:?} is not an integer: {e}"))
}

/// Parses table text; `expected` lists the column names the table must have, in order.
pub fn parse(text: &str, expected: &[&str]) -> Result<Table, String> {
    let mut lines = text.lines().enumerate();
    let (_, header) = lines.next().ok_or("empty table")?;
    let columns: Vec<String> = header.split('\t').map(str::to_owned).collect();
    if columns != expected {
        return Err(format!("header {columns:?}, expected {expected:?}"));
    }
    let mut rows = Vec::new();
    for (index, line) in lines {
        let line_no = index + 1;
        if line.trim().is_empty() {
            continue;
        }
        let cells: Vec<&str> = line.split('\t').collect();
        if cells.len() != columns.len() {
            return Err(format!(
                "line {line_no}: {} cells, expected {}",
                cells.len(),
                columns.len()
            ));
        }
        if let Some(pos) = cells
            .iter()
            .position(|c| c.trim().is_empty() || c.trim() != *c)
        {
            return Err(format!(
                "line {line_no}: column {} is empty or padded (write '-' for nothing)",
                columns[pos]
            ));
        }
        let cells = columns
            .iter()
            .cloned()
            .zip(cells.iter().map(|c| (*c).to_owned()))
            .collect();
        rows.push(Row {
            line: line_no,
            cells,
        });
    }
    Ok(Table { columns, rows })
}

/// Reads and parses `specs/<name>`.
pub fn read(name: &str, expected: &[&str]) -> Result<Table, String> {
    let path = specs_dir().join(name);
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    parse(&text, expected).map_err(|e| format!("{}: {e}", path.display()))
}

/// The columns of `specs/prm.tsv`.
pub const PRM_COLUMNS: &[&str] = &[
    "struct",
    "field",
    "byte_offset",
    "byte_width",
    "bit_lo",
    "bit_hi",
    "endianness",
    "source",
    "note",
];

/// The columns of `specs/constants.tsv`.
pub const CONSTANT_COLUMNS: &[&str] = &[
    "name", "value", "text", "c_name", "c_value", "source", "note",
];
