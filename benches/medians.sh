#!/usr/bin/env bash
# Criterion medians per unit (WQE, completion, mini) of the last
# `cargo bench -p mlx5dp-benches` run, read from
# $CARGO_TARGET_DIR/criterion/<group>/<name>/new/estimates.json.
# Needs jq.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
(cd "$root" && cargo build --quiet --release -p mlx5dp-benches --bin icount)
printf '%-34s %14s %14s  %s\n' scenario median/iter median/unit unit
"$CARGO_TARGET_DIR/release/icount" list | while read -r name _symbol unit granule; do
    est="$CARGO_TARGET_DIR/criterion/$name/new/estimates.json"
    [ -f "$est" ] || continue
    jq -r --arg n "$name" --arg u "$unit" --argjson g "$granule" \
        '.median.point_estimate as $m | "\($n) \($m) \($m / $g) \($u)"' "$est" |
        awk '{ printf "%-34s %11.2f ns %11.2f ns  per %s\n", $1, $2, $3, $4 }'
done
