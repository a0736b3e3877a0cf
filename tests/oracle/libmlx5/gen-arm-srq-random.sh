#!/bin/sh
# Regenerate specs/golden/libmlx5-oracle/arm-random.txt (arm_gen, N_ARM
# cases, default 200) and srq-random.txt (srq_gen, N_SRQ scenarios, default
# 150), both from SEED (default 20261130), each with a provenance header.
# Usage: RDMA_CORE_SRC=/path/to/rdma-core-44.0 gen-arm-srq-random.sh [BUILD_DIR]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
BUILD=${1:-$here/build}
N_ARM=${N_ARM:-200}
N_SRQ=${N_SRQ:-150}
SEED=${SEED:-20261130}
dir=$repo/specs/golden/libmlx5-oracle
"$here/build.sh" "$BUILD" >&2
mkdir -p "$dir"
sha=$(sha256sum /usr/lib/x86_64-linux-gnu/libmlx5.a | cut -d' ' -f1)
ver=$(dpkg-query -W -f='${Version}' libibverbs-dev 2>/dev/null || echo unknown)
when=$(date -u +%Y-%m-%dT%H:%M:%SZ)

out=$dir/arm-random.txt
{
    echo "# provenance: tests/oracle/libmlx5/arm_gen $N_ARM $SEED (gen-arm-srq-random.sh), seed $SEED, libmlx5.a sha256 $sha (libibverbs-dev $ver), generated $when"
    echo "# Format: see tests/oracle/libmlx5/arm_gen.c; every output is what Debian 12's libmlx5.a"
    echo "# (mlx5_arm_cq, mlx5_cq_event) wrote on a fabricated CQ (tests/oracle/libmlx5/ARM-SRQ.md)."
    echo "# Replayed by tests/tests/oracle_arm.rs."
    echo
    "$BUILD/arm_gen" "$N_ARM" "$SEED"
} > "$out.tmp"
mv "$out.tmp" "$out"
echo "wrote $out ($(grep -c '^case ' "$out") cases)" >&2

out=$dir/srq-random.txt
{
    echo "# provenance: tests/oracle/libmlx5/srq_gen gen $N_SRQ $SEED (gen-arm-srq-random.sh), seed $SEED, libmlx5.a sha256 $sha (libibverbs-dev $ver), generated $when"
    echo "# Format: that of tests/refcheck/srq_ref.py; every expectation is what Debian 12's libmlx5.a"
    echo "# (mlx5_alloc_srq_buf, mlx5_post_srq_recv, mlx5_poll_cq_v1 -> mlx5_free_srq_wqe) did on a"
    echo "# fabricated SRQ, QP and CQ (tests/oracle/libmlx5/ARM-SRQ.md). Replayed by tests/tests/srq_ref.rs."
    echo
    "$BUILD/srq_gen" gen "$N_SRQ" "$SEED"
} > "$out.tmp"
mv "$out.tmp" "$out"
echo "wrote $out ($(grep -c '^case ' "$out") scenarios)" >&2
