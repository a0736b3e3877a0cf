# harness_common.sh - shell helpers shared by benches/libmlx5/run.sh and
# benches/ucx/run.sh (sourced; POSIX sh). The caller sets BUILD (the
# directory holding the built `harness`), UNITS and CG_SUFFIX (text printed
# after the figures).

# cg_ir SCENARIO OUTFILE TOGGLES...: runs `harness SCENARIO count UNITS`
# under callgrind with the given --toggle-collect options, stops the script
# unless the harness printed checks=OK, and prints the instructions per
# measured unit.
cg_ir() {
    scen=$1; out=$2; shift 2
    valgrind --tool=callgrind --callgrind-out-file="$out" "$@" \
        "$BUILD/harness" "$scen" count "$UNITS" > "$out.stdout" 2> "$out.stderr" ||
        { cat "$out.stderr" "$out.stdout" >&2; echo "callgrind run failed" >&2; exit 1; }
    grep -q 'checks=OK' "$out.stdout" || { cat "$out.stdout" >&2; exit 1; }
    ir=$(sed -n 's/^totals: *//p; s/^summary: *//p' "$out" | head -1)
    mu=$(sed -n 's/.*measured_units=\([0-9]*\).*/\1/p' "$out.stdout")
    awk -v ir="$ir" -v u="$mu" -v sfx="$CG_SUFFIX" \
        'BEGIN { printf "%.2f Ir/unit (%d Ir / %d units)%s", ir / u, ir, u, sfx }'
}
