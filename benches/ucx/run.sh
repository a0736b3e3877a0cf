#!/bin/sh
# Build harness.c against an UCX source tree and its configured, built build
# tree (libucs, libuct, libuct_ib, libuct_ib_mlx5), then for every scenario
#   - decode one WQE UCX wrote with this repository's `mlx5dp decode wqe`
#     and check every field (post scenarios; needs cargo, see README.md);
#   - print callgrind instructions (Ir) per unit, toggled on the harness's
#     measured_* function (UCX's public inline API call included), and on
#     the UCX function alone where it is a function of its own;
#   - print ns per unit (median of ROUNDS rounds of UNITS units, rdtsc
#     windows of 32 units, REPEAT processes one after the other).
#
# Environment: UCX_SRC (required) UCX source tree (v1.22.0 was used)
#              UCX_BUILD (default $UCX_SRC) the tree `configure && make` ran in
#              BUILD_DIR (default ./build), UNITS (default 20000, multiple of 32),
#              ROUNDS (default 15), REPEAT (default 5), SCENARIOS (default: all),
#              NO_CALLGRIND=1, NO_TIMING=1, NO_DECODE=1,
#              CARGO_TARGET_DIR (for the decode step; default the repo's target/)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
: "${UCX_SRC:?set UCX_SRC to an UCX source tree (see README.md)}"
UCX_BUILD=${UCX_BUILD:-$UCX_SRC}
BUILD=${BUILD_DIR:-$here/build}
UNITS=${UNITS:-20000}
ROUNDS=${ROUNDS:-15}
REPEAT=${REPEAT:-5}
SCENARIOS=${SCENARIOS:-"put_zcopy_bf put_zcopy_db put_short32_bf put_short32_db poll_tx32 progress32"}
L=$UCX_BUILD/src
MLX5SO=$L/uct/ib/mlx5/.libs/libuct_ib_mlx5.so

[ -f "$UCX_BUILD/config.h" ] || { echo "$UCX_BUILD/config.h missing: configure UCX first (README.md)" >&2; exit 1; }
[ -f "$MLX5SO" ] || { echo "$MLX5SO missing: build UCX (make -C src/ucm, src/ucs, src/uct) first" >&2; exit 1; }
grep -q '^#define HAVE_MLX5_DV 1' "$UCX_BUILD/config.h" ||
    { echo "UCX configured without mlx5 DV support (--with-mlx5)" >&2; exit 1; }

echo "start $(date -u '+%Y-%m-%d %H:%M:%S UTC'), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "UCX $(sed -n 's/^#define PACKAGE_VERSION "\(.*\)"/\1/p' "$UCX_BUILD/config.h")" \
     "(source $UCX_SRC, build $UCX_BUILD)"
sed -n 's/^  \$ \(.*configure.*\)/configure: \1/p' "$UCX_BUILD/config.log" | head -1
echo "config.h: $(grep -E '^#define (ENABLE_ASSERT|ENABLE_PARAMS_CHECK|ENABLE_MT|HAVE_DEVX|HAVE_MLX5_DV|UCS_MAX_LOG_LEVEL) ' "$UCX_BUILD/config.h" | awk '{printf "%s=%s ", $2, $3}')"
grep -q '^/\* #undef ENABLE_ASSERT \*/' "$UCX_BUILD/config.h" && echo "config.h: ENABLE_ASSERT undefined (assertions off)"
echo "UCX CFLAGS (src/uct/ib/mlx5): $(sed -n 's/^BASE_CFLAGS = //p' "$L/uct/ib/mlx5/Makefile" | head -1)"
echo "libuct_ib_mlx5.so sha256 $(sha256sum "$MLX5SO" | cut -d' ' -f1)"
gcc --version | head -1
grep -m1 'model name' /proc/cpuinfo || true

mkdir -p "$BUILD"
# UCX's own optimisation flags (-O3 -g, no -march: its configure without
# --enable-optimizations), so the inlined poll code is compiled as UCX's
# build compiles it.
# With --enable-optimizations UCX adds machine flags (e.g. -mavx): take them.
archflags=$(sed -n 's/^BASE_CFLAGS = //p' "$L/uct/ib/mlx5/Makefile" | head -1 | tr ' ' '\n' | grep -E '^-m' | tr '\n' ' ' || true)
echo "harness: gcc -O3 -g $archflags"
libdirs="$L/uct/ib/mlx5/.libs:$L/uct/ib/.libs:$L/uct/.libs:$L/ucs/.libs:$L/ucm/.libs"
# shellcheck disable=SC2086
gcc -O3 -g $archflags -Wall -I"$UCX_BUILD" -I"$UCX_SRC/src" -I"$UCX_BUILD/src" -I"$here/.." \
    "$here/harness.c" -o "$BUILD/harness" \
    -L"$L/uct/ib/mlx5/.libs" -L"$L/uct/ib/.libs" -L"$L/uct/.libs" \
    -L"$L/ucs/.libs" -L"$L/ucm/.libs" \
    -luct_ib_mlx5 -luct_ib -luct -lucs -lucm -Wl,-rpath,"$libdirs"

# uct_rc_mlx5_iface_progress_cyclic is static in libuct_ib_mlx5.so: its
# address relative to the exported uct_rc_mlx5_base_ep_put_zcopy.
sym() { nm "$MLX5SO" | awk -v s="$1" '$3 == s { print $1; exit }'; }
p=$(sym uct_rc_mlx5_iface_progress_cyclic); z=$(sym uct_rc_mlx5_base_ep_put_zcopy)
[ -n "$p" ] && [ -n "$z" ] || { echo "symbols not found in $MLX5SO (stripped?)" >&2; exit 1; }
PROGRESS_OFFSET=$(( 0x$p - 0x$z ))
export PROGRESS_OFFSET
echo "uct_rc_mlx5_iface_progress_cyclic = uct_rc_mlx5_base_ep_put_zcopy + ($PROGRESS_OFFSET)"

# One WQE of each post scenario through `mlx5dp decode wqe --json`.
decode_check() {   # scenario
    hex=$("$BUILD/harness" "$1" dump)
    json=$(cd "$repo" && cargo run -q --release -p mlx5dp-setup -- decode wqe --json "$hex")
    echo "$json" | python3 "$here/decode_check.py" "$1"
    echo "  wqe hex: $hex"
}

# cg_ir SCENARIO OUTFILE TOGGLES...: the harness under callgrind
# (benches/harness_common.sh).
CG_SUFFIX=" checks=OK"
. "$here/../harness_common.sh"

for scen in $SCENARIOS; do
    case $scen in
    put_zcopy_*) wrap=measured_put_zcopy; lib=uct_rc_mlx5_base_ep_put_zcopy ;;
    put_short32_*) wrap=measured_put_short; lib=uct_rc_mlx5_base_ep_put_short ;;
    poll_tx32) wrap=measured_poll_tx32; lib= ;;
    progress32) wrap=measured_progress32; lib=uct_rc_mlx5_iface_progress_cyclic ;;
    *) echo "unknown scenario $scen" >&2; exit 1 ;;
    esac
    echo "== $scen"
    case $scen in
    put_*) [ -n "${NO_DECODE:-}" ] || decode_check "$scen" ;;
    esac
    if [ -z "${NO_CALLGRIND:-}" ]; then
        echo "  callgrind, --toggle-collect=$wrap: $(cg_ir "$scen" "$BUILD/cg.$scen.wrap" --toggle-collect=$wrap)"
        if [ -n "$lib" ]; then
            echo "  callgrind, UCX function only (--toggle-collect=$lib): $(cg_ir "$scen" "$BUILD/cg.$scen.lib" --toggle-collect=$lib)"
        else
            echo "  callgrind, UCX function only: n/a (uct_rc_mlx5_iface_poll_tx is inlined into $wrap)"
        fi
    fi
    if [ -z "${NO_TIMING:-}" ]; then
        meds=""
        i=0
        while [ $i -lt "$REPEAT" ]; do
            line=$("$BUILD/harness" "$scen" time "$UNITS" "$ROUNDS")
            echo "  $line"
            meds="$meds $(echo "$line" | sed -n 's/.*median=\([0-9.]*\).*/\1/p')"
            i=$((i + 1))
        done
        echo "$meds" | tr ' ' '\n' | grep . | sort -n | awk '{ v[NR] = $1 } END {
            printf "  ns/unit over %d processes: median of medians %.2f, lowest median %.2f, highest median %.2f\n",
                NR, v[int((NR + 1) / 2)], v[1], v[NR] }'
    fi
done
echo "end $(date -u '+%Y-%m-%d %H:%M:%S UTC'), load $(cut -d' ' -f1-3 /proc/loadavg)"
