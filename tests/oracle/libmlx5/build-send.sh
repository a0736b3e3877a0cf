#!/bin/sh
# Build send_gen (tests/oracle/libmlx5/send_gen.c) against rdma-core v44.0's
# private headers and Debian 12's libmlx5.a, as benches/libmlx5/run.sh builds
# its harness: the headers come from benches/libmlx5/gen-headers.sh (and its
# shim/config.h), used in place, and nothing of rdma-core is compiled.
#
# Usage: RDMA_CORE_SRC=/path/to/rdma-core-44.0 build-send.sh [BUILD_DIR]
#   (or: build-send.sh RDMA_CORE_SRC BUILD_DIR)
# Output: BUILD_DIR/send_gen (default BUILD_DIR: $TMPDIR/mlx5dp-send-gen, or /tmp/...)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
if [ $# -ge 2 ]; then RDMA_CORE_SRC=$1; BUILD=$2
else : "${RDMA_CORE_SRC:?set RDMA_CORE_SRC to an rdma-core v44.0 source tree}"; BUILD=${1:-${TMPDIR:-/tmp}/mlx5dp-send-gen}
fi
export RDMA_CORE_SRC
LIBDIR=/usr/lib/x86_64-linux-gnu

grep -q 'set(PACKAGE_VERSION "44.0")' "$RDMA_CORE_SRC/CMakeLists.txt" ||
    { echo "$RDMA_CORE_SRC is not rdma-core 44.0 (CMakeLists.txt PACKAGE_VERSION)" >&2; exit 1; }
dpkg-query -W -f='libibverbs-dev ${Version}\n' libibverbs-dev 2>/dev/null >&2 || true
echo "libmlx5.a sha256 $(sha256sum "$LIBDIR/libmlx5.a" | cut -d' ' -f1)" >&2

mkdir -p "$BUILD"
BUILD=$(cd "$BUILD" && pwd)
"$repo/benches/libmlx5/gen-headers.sh" "$BUILD"
gcc -O1 -g -Wall -Wno-address-of-packed-member \
    -I"$BUILD/include" -I"$RDMA_CORE_SRC/kernel-headers" -I"$RDMA_CORE_SRC" \
    -I"$RDMA_CORE_SRC/providers/mlx5" \
    "$here/send_gen.c" -o "$BUILD/send_gen" \
    "$LIBDIR/libmlx5.a" "$LIBDIR/libibverbs.a" -lnl-route-3 -lnl-3 -lpthread
echo "built $BUILD/send_gen" >&2
