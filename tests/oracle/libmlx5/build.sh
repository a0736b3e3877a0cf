#!/bin/sh
# Build the generators of this directory -- cqe_gen, send_gen, arm_gen and
# srq_gen -- against rdma-core v44.0's private headers (so that their
# structs have libmlx5's own layout) and Debian 12's libmlx5.a: nothing of
# rdma-core is compiled, libmlx5's own object code is linked. The headers
# come from benches/libmlx5/gen-headers.sh and its shim, used in place.
#
# Usage: RDMA_CORE_SRC=/path/to/rdma-core-44.0 build.sh [BUILD_DIR]
#        (BUILD_DIR defaults to tests/oracle/libmlx5/build, which .gitignore
#        ignores; the binaries are BUILD_DIR/<name>)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
bench=$(cd "$here/../../../benches/libmlx5" && pwd)
: "${RDMA_CORE_SRC:?set RDMA_CORE_SRC to an rdma-core v44.0 source tree (see CQE.md)}"
BUILD=${1:-${BUILD_DIR:-$here/build}}
LIBDIR=/usr/lib/x86_64-linux-gnu

grep -q 'set(PACKAGE_VERSION "44.0")' "$RDMA_CORE_SRC/CMakeLists.txt" ||
    { echo "$RDMA_CORE_SRC is not rdma-core 44.0 (CMakeLists.txt PACKAGE_VERSION)" >&2; exit 1; }
dpkg-query -W -f='libibverbs-dev ${Version}\n' libibverbs-dev 2>/dev/null >&2 || true
echo "libmlx5.a sha256 $(sha256sum "$LIBDIR/libmlx5.a" | cut -d' ' -f1)" >&2

mkdir -p "$BUILD"
BUILD=$(cd "$BUILD" && pwd)
"$bench/gen-headers.sh" "$BUILD"
# send_gen: -O1 and no packed-member warnings, as it was first built.
for spec in "cqe_gen -O2 -Wextra" "arm_gen -O2 -Wextra" "srq_gen -O2 -Wextra" \
            "send_gen -O1 -Wno-address-of-packed-member"; do
    set -- $spec
    prog=$1
    shift
    gcc "$@" -g -Wall -Wno-sign-compare -Wno-unused-parameter \
        -I"$BUILD/include" -I"$RDMA_CORE_SRC/kernel-headers" -I"$RDMA_CORE_SRC" \
        -I"$RDMA_CORE_SRC/providers/mlx5" \
        "$here/$prog.c" -o "$BUILD/$prog" \
        "$LIBDIR/libmlx5.a" "$LIBDIR/libibverbs.a" -lnl-route-3 -lnl-3 -lpthread
    echo "built $BUILD/$prog" >&2
done
