#!/usr/bin/env bash
# Instructions per unit (WQE, completion, mini) of every benchmark scenario,
# counted by callgrind inside the scenario's measured function only
# (`--toggle-collect`), divided by the units it processed.
#
#   benches/icount.sh                 # every scenario, 100000 iterations each
#   benches/icount.sh sq/rc_write_sge # one scenario
#   ITERS=20000 benches/icount.sh     # fewer iterations
#   ANNOTATE=1 benches/icount.sh sq/rc_write_sge   # plus per-line annotation
#   ASM=tx_packets64 benches/icount.sh tx/empw_inline64_burst32
#       # plus the disassembly of the functions whose names contain
#       # tx_packets64, each instruction with its count per iteration
#       # (benches/cgasm.py; needs python3 and binutils)
#   SYMBOL='*decode_count_avx2*' benches/icount.sh cq/unzip_enhanced8_avx2
#       # the same run, counted inside the functions matching SYMBOL only
#       # (a callgrind --toggle-collect pattern) instead of the scenario's
#       # measured function: the decoder without the benchmark's loop
#
# Needs valgrind (apt-get install valgrind). Builds in release (the
# workspace's release profile keeps line tables, `debug = 1`).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
iters="${ITERS:-100000}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

(cd "$root" && cargo build --quiet --release -p mlx5dp-benches --bin icount)
bin="$CARGO_TARGET_DIR/release/icount"

printf '%-34s %12s %14s  %s\n' scenario units instructions per-unit
"$bin" list | while read -r name symbol unit granule; do
    if [ $# -gt 0 ] && ! printf '%s\n' "$@" | grep -qx "$name"; then
        continue
    fi
    file="$out/$(echo "$name" | tr '/' '_').cg"
    valgrind --tool=callgrind --toggle-collect="${SYMBOL:-$symbol}" ${ASM:+--dump-instr=yes} \
        --callgrind-out-file="$file" "$bin" "$name" "$iters" >"$out/stdout" 2>"$out/stderr" || {
        cat "$out/stderr" >&2
        exit 1
    }
    units="$(awk '{print $2}' "$out/stdout")"
    ir="$(awk '/^totals:/ {print $2}' "$file")"
    awk -v n="$name" -v u="$units" -v i="$ir" -v unit="$unit" \
        'BEGIN { printf "%-34s %12d %14.0f  %.1f per %s\n", n, u, i, i / u, unit }'
    if [ -n "${ANNOTATE:-}" ]; then
        callgrind_annotate --auto=yes --inclusive=no "$file" >"$out/$(basename "$file").txt" 2>/dev/null || true
        dest="${ANNOTATE_DIR:-$root/target/icount}"
        mkdir -p "$dest"
        cp "$out/$(basename "$file").txt" "$dest/"
        echo "    annotation: $dest/$(basename "$file").txt"
    fi
    if [ -n "${ASM:-}" ]; then
        dest="${ANNOTATE_DIR:-$root/target/icount}"
        mkdir -p "$dest"
        asm="$dest/$(basename "$file" .cg).asm.txt"
        python3 "$here/cgasm.py" "$file" "$bin" "$ASM" "$iters" >"$asm"
        echo "    per-instruction counts: $asm"
    fi
done
