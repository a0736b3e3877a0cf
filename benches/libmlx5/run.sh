#!/bin/sh
# Build harness.c against rdma-core v44.0's private headers and Debian 12's
# libmlx5.a, then for every scenario print
#   - callgrind instructions (Ir) per unit, toggled on the harness's
#     measured_* function (includes the few wrapper instructions), and
#     toggled on the libmlx5 functions only;
#   - ns per unit (median of ROUNDS rounds of UNITS units, rdtsc windows).
#
# Environment: RDMA_CORE_SRC (required) rdma-core v44.0 source tree
#              BUILD_DIR (default ./build), UNITS (default 20000, multiple of 32),
#              ROUNDS (default 15), REPEAT (default 5: timing processes per
#              scenario, run one after the other), SCENARIOS (default: all),
#              NO_CALLGRIND=1, NO_TIMING=1
set -eu
here=$(cd "$(dirname "$0")" && pwd)
: "${RDMA_CORE_SRC:?set RDMA_CORE_SRC to an rdma-core v44.0 source tree (see README.md)}"
BUILD=${BUILD_DIR:-$here/build}
UNITS=${UNITS:-20000}
ROUNDS=${ROUNDS:-15}
REPEAT=${REPEAT:-5}
SCENARIOS=${SCENARIOS:-"post_write_sge post_write_sge_bf post_write_list32 poll_cq32 poll_cq32_v0 start_poll32 start_poll32_lock post_recv1 post_recv32 poll_cq32_recv start_poll32_recv post_srq_recv1 post_srq_recv32 post_send_inline32 post_send_inline32_bf post_send_inline32_db post_send_ud post_send_raw_eth64 post_send_raw_eth64_min0 post_send_ud_bf post_send_raw_eth64_bf wr_write32 wr_write32_sig128 wr_write1 wr_write1_bf"}
LIBDIR=/usr/lib/x86_64-linux-gnu

grep -q 'set(PACKAGE_VERSION "44.0")' "$RDMA_CORE_SRC/CMakeLists.txt" ||
    { echo "$RDMA_CORE_SRC is not rdma-core 44.0 (CMakeLists.txt PACKAGE_VERSION)" >&2; exit 1; }
dpkg-query -W -f='libibverbs-dev ${Version}\n' libibverbs-dev 2>/dev/null || true
echo "libmlx5.a sha256 $(sha256sum "$LIBDIR/libmlx5.a" | cut -d' ' -f1)"

mkdir -p "$BUILD"
"$here/gen-headers.sh" "$BUILD"
# -no-pie so that the addresses the harness prints match `nm`.
gcc -O2 -g -no-pie -Wall \
    -I"$BUILD/include" -I"$RDMA_CORE_SRC/kernel-headers" -I"$RDMA_CORE_SRC" \
    -I"$RDMA_CORE_SRC/providers/mlx5" -I"$here/.." \
    "$here/harness.c" -o "$BUILD/harness" \
    "$LIBDIR/libmlx5.a" "$LIBDIR/libibverbs.a" -lnl-route-3 -lnl-3 -lpthread

# Name the cq_ex ops mlx5_cq_fill_pfns installed, and the qp_ex ops
# mlx5_qp_fill_wr_pfns installed (static functions).
name_of() { nm "$BUILD/harness" | awk -v a="$(printf '%016x' "$1")" '$1 == a && $2 ~ /[tT]/ { print $3; exit }'; }
ops_line() { "$BUILD/harness" addr | grep "^$1 "; }
st=$(ops_line single_threaded); df=$(ops_line default)
getp() { echo "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }
ST_START=$(name_of "$(getp "$st" start_poll)"); ST_NEXT=$(name_of "$(getp "$st" next_poll)"); ST_END=$(name_of "$(getp "$st" end_poll)")
ST_BYTE_LEN=$(name_of "$(getp "$st" read_byte_len)")
DF_START=$(name_of "$(getp "$df" start_poll)"); DF_NEXT=$(name_of "$(getp "$df" next_poll)"); DF_END=$(name_of "$(getp "$df" end_poll)")
echo "cq_ex ops, IBV_CREATE_CQ_ATTR_SINGLE_THREADED: $ST_START / $ST_NEXT / $ST_END"
echo "cq_ex ops, default flags:                      $DF_START / $DF_NEXT / $DF_END"
echo "cq_ex read_byte_len op (IBV_WC_STANDARD_FLAGS):  $ST_BYTE_LEN"
qx=$(ops_line qp_ex)
WR_START=$(name_of "$(getp "$qx" wr_start)"); WR_RDMA_WRITE=$(name_of "$(getp "$qx" wr_rdma_write)")
WR_SET_SGE=$(name_of "$(getp "$qx" wr_set_sge)"); WR_COMPLETE=$(name_of "$(getp "$qx" wr_complete)")
echo "qp_ex ops (RC): $WR_START / $WR_RDMA_WRITE / $WR_SET_SGE / $WR_COMPLETE"

# cg_ir SCENARIO OUTFILE TOGGLES...: the harness under callgrind
# (benches/harness_common.sh).
CG_SUFFIX=""
. "$here/../harness_common.sh"

for scen in $SCENARIOS; do
    case $scen in
    post_write_sge|post_write_sge_bf|post_write_list32|post_send_*)
        wrap=measured_post_send; lib="--toggle-collect=rdmacore44_0_mlx5_post_send" ;;
    post_recv1|post_recv32)
        wrap=measured_post_recv; lib="--toggle-collect=rdmacore44_0_mlx5_post_recv" ;;
    post_srq_recv1|post_srq_recv32)
        wrap=measured_post_srq_recv; lib="--toggle-collect=rdmacore44_0_mlx5_post_srq_recv" ;;
    poll_cq32|poll_cq32_recv)
        wrap=measured_poll_cq_v1; lib="--toggle-collect=rdmacore44_0_mlx5_poll_cq_v1" ;;
    poll_cq32_v0)
        wrap=measured_poll_cq_v0; lib="--toggle-collect=rdmacore44_0_mlx5_poll_cq" ;;
    start_poll32)
        wrap=measured_start_poll
        lib="--toggle-collect=$ST_START --toggle-collect=$ST_NEXT --toggle-collect=$ST_END" ;;
    start_poll32_recv)
        wrap=measured_start_poll_recv
        lib="--toggle-collect=$ST_START --toggle-collect=$ST_NEXT --toggle-collect=$ST_END --toggle-collect=$ST_BYTE_LEN" ;;
    wr_write32|wr_write32_sig128|wr_write1|wr_write1_bf)
        case $scen in wr_write32*) wrap=measured_wr_write32 ;; *) wrap=measured_wr_write1 ;; esac
        lib="--toggle-collect=$WR_START --toggle-collect=$WR_RDMA_WRITE --toggle-collect=$WR_SET_SGE --toggle-collect=$WR_COMPLETE" ;;
    start_poll32_lock)
        wrap=measured_start_poll
        lib="--toggle-collect=$DF_START --toggle-collect=$DF_NEXT --toggle-collect=$DF_END" ;;
    *) echo "unknown scenario $scen" >&2; exit 1 ;;
    esac
    echo "== $scen"
    if [ -z "${NO_CALLGRIND:-}" ]; then
        echo "  callgrind, --toggle-collect=$wrap: $(cg_ir "$scen" "$BUILD/cg.$scen.wrap" --toggle-collect=$wrap)"
        # shellcheck disable=SC2086
        echo "  callgrind, libmlx5 only ($lib): $(cg_ir "$scen" "$BUILD/cg.$scen.lib" $lib)"
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
