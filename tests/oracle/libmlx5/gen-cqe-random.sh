#!/bin/sh
# Regenerate specs/golden/libmlx5-oracle/cqe-random.txt: N random cases
# (default 600) from SEED (default 20261130) of cqe_gen (default mode, no
# --edge), with a provenance header.
# Usage: RDMA_CORE_SRC=/path/to/rdma-core-44.0 gen-cqe-random.sh [BUILD_DIR]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
BUILD=${1:-$here/build}
N=${N:-600}
SEED=${SEED:-20261130}
out=$repo/specs/golden/libmlx5-oracle/cqe-random.txt
"$here/build.sh" "$BUILD" >&2
mkdir -p "$(dirname "$out")"
sha=$(sha256sum /usr/lib/x86_64-linux-gnu/libmlx5.a | cut -d' ' -f1)
ver=$(dpkg-query -W -f='${Version}' libibverbs-dev 2>/dev/null || echo unknown)
{
    echo "# provenance: tests/oracle/libmlx5/cqe_gen $N $SEED (gen-cqe-random.sh), libmlx5.a sha256 $sha (libibverbs-dev $ver), generated $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "# Format: that of specs/golden/libmlx5/cqe-cases.txt (see its header); every output is what"
    echo "# Debian 12's libmlx5.a returned on fabricated queues (tests/oracle/libmlx5/CQE.md)."
    echo
    "$BUILD/cqe_gen" "$N" "$SEED"
} > "$out.tmp"
mv "$out.tmp" "$out"
echo "wrote $out ($(grep -c '^case ' "$out") cases, $(wc -c < "$out") bytes)" >&2
