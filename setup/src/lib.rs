//! `mlx5dp-setup`: where the rings of `mlx5dp` come from, and the `mlx5dp` tool.
