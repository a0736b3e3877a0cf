//! The `mlx5dp` command-line tool.
fn main() {}
