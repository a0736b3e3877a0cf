#!/bin/sh
# Regenerates specs/golden/libmlx5-oracle/{wqe,rq}-random.txt with send_gen
# (build it first with build.sh). Each file starts with one line saying
# how it was produced: the command, the seed, the sha256 of the libmlx5.a
# linked in, the libibverbs-dev version and the date.
#
# Usage: gen-golden.sh SEND_GEN_BINARY [OUT_DIR]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
bin=$1
out=${2:-$here/../../../specs/golden/libmlx5-oracle}
WQE_N=500 WQE_SEED=14 RQ_N=200 RQ_SEED=12
sha=$(sha256sum /usr/lib/x86_64-linux-gnu/libmlx5.a | cut -d' ' -f1)
ver=$(dpkg-query -W -f='${Version}' libibverbs-dev 2>/dev/null || echo unknown)
now=$(date -u '+%Y-%m-%d %H:%M UTC')
mkdir -p "$out"
gen() {   # mode n seed file
    {
        echo "# produced by: send_gen $1 $2 $3 (tests/oracle/libmlx5/send_gen.c, built by build.sh; regenerate with gen-golden.sh), seed $3, libmlx5.a (libibverbs-dev $ver) sha256 $sha, $now"
        "$bin" "$1" "$2" "$3" | sed '${/^$/d}'   # no blank line at the end
    } > "$out/$4"
    echo "$out/$4: $(grep -c '^case ' "$out/$4") cases, $(wc -c < "$out/$4") bytes" >&2
}
gen wqe "$WQE_N" "$WQE_SEED" wqe-random.txt
gen rq "$RQ_N" "$RQ_SEED" rq-random.txt
