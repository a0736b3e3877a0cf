#!/bin/sh
# Build harness.c against Debian 12's DPDK 22.11 (libdpdk-dev headers +
# librte_net_mlx5.a object code) and the private mlx5 headers of the same
# DPDK source, then for every scenario print
#   - callgrind instructions (Ir) per packet, toggled on the harness's
#     measured_tx_burst (includes the 4-instruction wrapper), and toggled on
#     the PMD routine only (mlx5_tx_burst_i_empw, or mlx5_tx_burst_none_empw
#     for empw_ptr64_*, with its callees: mlx5_tx_handle_completion,
#     __mlx5_tx_free_mbuf), split by function;
#   - ns per packet (median of ROUNDS rounds of BURSTS bursts of 32, rdtsc
#     window around every burst call).
#
# Environment: DPDK_SRC (required) DPDK 22.11.11 source tree (Debian's
#              `apt-get source dpdk`, see README.md)
#              BUILD_DIR (default ./build), BURSTS (default 625 = 20000
#              packets per round), ROUNDS (default 15), REPEAT (default 5:
#              timing processes per scenario, one after the other),
#              SCENARIOS (default: all Tx scenarios; SCENARIOS= for none),
#              RX_SCENARIOS (default: all Rx scenarios of rx_harness.c
#              and rx_mprq_harness.c;
#              RX_SCENARIOS= for none), NO_CALLGRIND=1, NO_TIMING=1
#
# Rx (rx_harness.c): the same per scenario, with the measured wrapper
# measured_rx_burst and the PMD routine mlx5_rx_burst (scalar) or
# mlx5_rx_burst_vec (SSE, with its callees rxq_cq_process_v and
# rxq_cq_decompress_v); for the vector routine also the Ir of its inlined
# replenish block (mlx5_rx_replenish_bulk_mbuf, see README.md).
# Rx MPRQ (rx_mprq_harness.c, scenarios rx_mprq_*): the same, with the PMD
# routine mlx5_rx_burst_mprq (rx_mprq_*) or mlx5_rx_burst_mprq_vec
# (rx_mprq_vec_*, with rxq_cq_process_v, rxq_cq_decompress_v and
# rxq_copy_mprq_mbuf_v); for the vector one also its inlined
# mlx5_rx_mprq_replenish_bulk_mbuf block.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
: "${DPDK_SRC:?set DPDK_SRC to a DPDK 22.11.11 source tree (see README.md)}"
BUILD=${BUILD_DIR:-$here/build}
BURSTS=${BURSTS:-625}
ROUNDS=${ROUNDS:-15}
REPEAT=${REPEAT:-5}
SCENARIOS=${SCENARIOS-"empw_inline64_burst32 empw_inline64_burst32_fastfree empw_inline64_burst32_txd64 empw_inline64_burst32_txd64_fastfree empw_ptr64_burst32 empw_ptr64_burst32_fastfree"}
LIB=/usr/lib/x86_64-linux-gnu/librte_net_mlx5.a

grep -qx '22.11.11' "$DPDK_SRC/VERSION" ||
    { echo "$DPDK_SRC is not DPDK 22.11.11 (VERSION)" >&2; exit 1; }
dpkg-query -W -f='${Package} ${Version}\n' libdpdk-dev librte-net-mlx5-23 2>/dev/null || true
echo "librte_net_mlx5.a sha256 $(sha256sum "$LIB" | cut -d' ' -f1)"
"$here/build.sh" "$DPDK_SRC" "$BUILD"
"$BUILD/harness" select 2>&1 | sed 's/^/  /'
echo "  with inlining off (empw_ptr64_*):"
"$BUILD/harness" select ptr 2>&1 | sed 's/^/  /'
echo "  Rx: rx_vec_en=1 (default) and rx_vec_en=0:"
"$BUILD/rx_harness" select 2>&1 | sed 's/^/  /'
"$BUILD/rx_harness" select scalar 2>&1 | sed 's/^/  /'
echo "  Rx MPRQ (mprq_en=1): rx_vec_en=1 (default) and rx_vec_en=0:"
"$BUILD/rx_mprq_harness" select 2>&1 | sed 's/^/  /'
"$BUILD/rx_mprq_harness" select scalar 2>&1 | sed 's/^/  /'
RX_SCENARIOS=${RX_SCENARIOS-"rx_scalar_uncompressed rx_vec_uncompressed rx_vec_compressed8 rx_vec_compressed64 rx_mprq_uncompressed rx_mprq_compressed8 rx_mprq_compressed64 rx_mprq_vec_uncompressed rx_mprq_vec_compressed8 rx_mprq_vec_compressed64"}

cg() {   # scenario outfile toggle [binary]
    valgrind --tool=callgrind --dump-instr=yes --callgrind-out-file="$2" --toggle-collect="$3" \
        "$BUILD/${4:-harness}" "$1" count "$BURSTS" > "$2.stdout" 2> "$2.stderr" ||
        { cat "$2.stderr" "$2.stdout" >&2; echo "callgrind run failed" >&2; exit 1; }
    grep -q 'checks=OK' "$2.stdout" || { cat "$2.stdout" >&2; exit 1; }
}
per_pkt() {  # outfile -> "X Ir/packet (N Ir / P packets)"
    ir=$(sed -n 's/^totals: *//p; s/^summary: *//p' "$1" | head -1)
    mu=$(sed -n 's/.*measured_units=\([0-9]*\).*/\1/p' "$1.stdout")
    awk -v ir="$ir" -v u="$mu" 'BEGIN { printf "%.2f Ir/packet (%d Ir / %d packets)", ir / u, ir, u }'
}

for scen in $SCENARIOS; do
    echo "== $scen"
    case $scen in
    empw_ptr64*) fn=mlx5_tx_burst_none_empw ;;
    *) fn=mlx5_tx_burst_i_empw ;;
    esac
    "$BUILD/harness" "$scen" selftest | tail -1 | sed 's/^/  /'
    if [ -z "${NO_CALLGRIND:-}" ]; then
        cg "$scen" "$BUILD/cg.$scen.wrap" measured_tx_burst
        echo "  callgrind, --toggle-collect=measured_tx_burst: $(per_pkt "$BUILD/cg.$scen.wrap")"
        cg "$scen" "$BUILD/cg.$scen.pmd" "$fn"
        echo "  callgrind, --toggle-collect=$fn (PMD only): $(per_pkt "$BUILD/cg.$scen.pmd")"
        mu=$(sed -n 's/.*measured_units=\([0-9]*\).*/\1/p' "$BUILD/cg.$scen.pmd.stdout")
        callgrind_annotate --threshold=100 "$BUILD/cg.$scen.pmd" 2>/dev/null |
            sed -n 's/^ *\([0-9,]*\) *([ 0-9.]*%) *???:\([^ ]*\) .*/\1 \2/p' | tr -d , |
            awk -v u="$mu" '{ printf "    self %-28s %8.2f Ir/packet (%d Ir)\n", $2, $1 / u, $1 }'
        # Per-instruction counts per packet (benches/cgasm.py), for reading
        # the PMD's code path instruction by instruction; kept in BUILD only.
        for f in "$fn" __mlx5_tx_free_mbuf mlx5_tx_handle_completion; do
            python3 "$here/../cgasm.py" "$BUILD/cg.$scen.pmd" "$BUILD/harness" "$f" "$mu"
        done > "$BUILD/asm.$scen.txt"
        echo "    per-instruction counts per packet: $BUILD/asm.$scen.txt"
    fi
    if [ -z "${NO_TIMING:-}" ]; then
        meds=""
        i=0
        while [ $i -lt "$REPEAT" ]; do
            line=$("$BUILD/harness" "$scen" time "$BURSTS" "$ROUNDS")
            echo "  $line"
            meds="$meds $(echo "$line" | sed -n 's/.*median=\([0-9.]*\).*/\1/p')"
            i=$((i + 1))
        done
        echo "$meds" | tr ' ' '\n' | grep . | sort -n | awk '{ v[NR] = $1 } END {
            printf "  ns/packet over %d processes: median of medians %.2f, lowest median %.2f, highest median %.2f\n",
                NR, v[int((NR + 1) / 2)], v[1], v[NR] }'
    fi
done

timing() {  # binary scenario
    meds=""
    i=0
    while [ $i -lt "$REPEAT" ]; do
        line=$("$BUILD/$1" "$2" time "$BURSTS" "$ROUNDS")
        echo "  $line"
        meds="$meds $(echo "$line" | sed -n 's/.*median=\([0-9.]*\).*/\1/p')"
        i=$((i + 1))
    done
    echo "$meds" | tr ' ' '\n' | grep . | sort -n | awk '{ v[NR] = $1 } END {
        printf "  ns/packet over %d processes: median of medians %.2f, lowest median %.2f, highest median %.2f\n",
            NR, v[int((NR + 1) / 2)], v[1], v[NR] }'
}

for scen in $RX_SCENARIOS; do
    echo "== $scen"
    bin=rx_harness
    helpers="rxq_cq_process_v rxq_cq_decompress_v"
    case $scen in
    rx_mprq_vec*) fn=mlx5_rx_burst_mprq_vec; bin=rx_mprq_harness; helpers="$helpers rxq_copy_mprq_mbuf_v" ;;
    rx_mprq*) fn=mlx5_rx_burst_mprq; bin=rx_mprq_harness; helpers= ;;
    rx_scalar*) fn=mlx5_rx_burst ;;
    *) fn=mlx5_rx_burst_vec ;;
    esac
    "$BUILD/$bin" "$scen" selftest | tail -1 | sed 's/^/  /'
    if [ -z "${NO_CALLGRIND:-}" ]; then
        cg "$scen" "$BUILD/cg.$scen.wrap" measured_rx_burst "$bin"
        echo "  $(sed -n 's/ checks=OK//p' "$BUILD/cg.$scen.wrap.stdout")"
        echo "  callgrind, --toggle-collect=measured_rx_burst: $(per_pkt "$BUILD/cg.$scen.wrap")"
        cg "$scen" "$BUILD/cg.$scen.pmd" "$fn" "$bin"
        echo "  callgrind, --toggle-collect=$fn (PMD only): $(per_pkt "$BUILD/cg.$scen.pmd")"
        mu=$(sed -n 's/.*measured_units=\([0-9]*\).*/\1/p' "$BUILD/cg.$scen.pmd.stdout")
        callgrind_annotate --threshold=100 "$BUILD/cg.$scen.pmd" 2>/dev/null |
            sed -n 's/^ *\([0-9,]*\) *([ 0-9.]*%) *???:\([^ ]*\) .*/\1 \2/p' | tr -d , |
            awk -v u="$mu" '$2 ~ /^(mlx5_|rxq_)/ { printf "    self %-28s %8.2f Ir/packet (%d Ir)\n", $2, $1 / u, $1 }'
        for f in "$fn" $helpers; do
            python3 "$here/../cgasm.py" "$BUILD/cg.$scen.pmd" "$BUILD/$bin" "$f" "$mu"
        done > "$BUILD/asm.$scen.txt"
        echo "    per-instruction counts per packet: $BUILD/asm.$scen.txt"
        if [ "$fn" = mlx5_rx_burst_vec ]; then
            # The inlined mlx5_rx_replenish_bulk_mbuf: from the instruction
            # after "cmp dx,WORD PTR [rbx+0x34]; jb END" (n >= rq_repl_thresh)
            # up to END (after the RQ doorbell record store).
            python3 "$here/../cgasm.py" "$BUILD/cg.$scen.pmd" "$BUILD/rx_harness" mlx5_rx_burst_vec "$mu" |
                awk '/WORD PTR \[rbx\+0x34\]/ { thr = 1; next }
                     thr == 1 && /\tjb / { end = $(NF-1); thr = 2; next }
                     thr == 2 { a = $2; sub(":", "", a); if (a == end) thr = 3; else s += $1 }
                     END { printf "    of which the inlined replenish block (mlx5_rx_replenish_bulk_mbuf, taken branch): %.2f Ir/packet\n", s }'
        fi
        if [ "$fn" = mlx5_rx_burst_mprq_vec ]; then
            # The inlined mlx5_rx_mprq_replenish_bulk_mbuf: rq_repl_thresh
            # is loaded from [rbx+0x34]; its two tests (n >= rq_repl_thresh,
            # elts_ci - rq_pi <= rq_repl_thresh + 64) are two "jb END" to
            # the same END; the block is from the instruction after the
            # second one up to END (after the 4 fake_mbuf stores).
            python3 "$here/../cgasm.py" "$BUILD/cg.$scen.pmd" "$BUILD/rx_mprq_harness" mlx5_rx_burst_mprq_vec "$mu" |
                awk '/WORD PTR \[rbx\+0x34\]/ && !thr { thr = 1; next }
                     thr == 1 && /\tjb / { t = $(NF-1); if (t == end1) { thr = 2; end = t; next } end1 = t; next }
                     thr == 2 { a = $2; sub(":", "", a); if (a == end) thr = 3; else s += $1 }
                     END { printf "    of which the inlined replenish block (mlx5_rx_mprq_replenish_bulk_mbuf, taken branch): %.2f Ir/packet\n", s }'
        fi
    fi
    if [ -z "${NO_TIMING:-}" ]; then
        timing "$bin" "$scen"
    fi
done
