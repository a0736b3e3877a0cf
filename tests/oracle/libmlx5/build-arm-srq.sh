#!/bin/sh
# Build arm_gen (arm_gen.c) and srq_gen (srq_gen.c) against rdma-core v44.0's
# private headers and Debian 12's libmlx5.a, as build-cqe.sh builds cqe_gen
# (the same gen-headers.sh and shim, used in place; the same gcc/link line):
# nothing of rdma-core is compiled, libmlx5's own object code is linked.
#
# Usage: RDMA_CORE_SRC=/path/to/rdma-core-44.0 build-arm-srq.sh [BUILD_DIR]
#        (BUILD_DIR defaults to tests/oracle/libmlx5/build, which its .gitignore ignores;
#        the binaries are BUILD_DIR/arm_gen and BUILD_DIR/srq_gen)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
bench=$(cd "$here/../../../benches/libmlx5" && pwd)
: "${RDMA_CORE_SRC:?set RDMA_CORE_SRC to an rdma-core v44.0 source tree (see CQE.md)}"
BUILD=${1:-${BUILD_DIR:-$here/build}}
LIBDIR=/usr/lib/x86_64-linux-gnu

grep -q 'set(PACKAGE_VERSION "44.0")' "$RDMA_CORE_SRC/CMakeLists.txt" ||
    { echo "$RDMA_CORE_SRC is not rdma-core 44.0 (CMakeLists.txt PACKAGE_VERSION)" >&2; exit 1; }
dpkg-query -W -f='libibverbs-dev ${Version}\n' libibverbs-dev 2>/dev/null || true
echo "libmlx5.a sha256 $(sha256sum "$LIBDIR/libmlx5.a" | cut -d' ' -f1)"

mkdir -p "$BUILD"
"$bench/gen-headers.sh" "$BUILD"
for prog in arm_gen srq_gen; do
    gcc -O2 -g -Wall -Wextra -Wno-sign-compare -Wno-unused-parameter \
        -I"$BUILD/include" -I"$RDMA_CORE_SRC/kernel-headers" -I"$RDMA_CORE_SRC" \
        -I"$RDMA_CORE_SRC/providers/mlx5" \
        "$here/$prog.c" -o "$BUILD/$prog" \
        "$LIBDIR/libmlx5.a" "$LIBDIR/libibverbs.a" -lnl-route-3 -lnl-3 -lpthread
    echo "built $BUILD/$prog"
done
