#!/bin/sh
# Causal probe for the vector title_pkt difference (RX-ENHANCED.md): build
# rx_gen_new_probe, identical to rx_gen_new except that mlx5_rxtx_vec.c's two
# "Copy title packet" checks test the first CQE of the pass against the index
# it was read at (rxq->cq_ci before the pass), not the index after it:
#   check_cqe_iteration(cq, rxq->cqe_n, rxq->cq_ci)
#   -> check_cqe_iteration(cq, rxq->cqe_n, rxq->cq_ci - nocmp_n)
# (rxq_burst_v, mlx5_rxtx_vec.c:360; rxq_burst_mprq_v, :524).  The DPDK tree
# itself is not modified: the patched copy is compiled from a temporary file.
# Usage: probe-title-fix.sh DPDK_SRC DPDK_BUILD_DIR OUT_DIR (after build-rx-new.sh)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
S=$(cd "$1" && pwd); D=$(cd "$2" && pwd); B=$(cd "$3" && pwd)
P=drivers/libtmp_rte_net_mlx5.a.p
T=$(mktemp -d)
# only the checks that follow "Copy title packet" (the ones after
# "Go directly to unzipping" run with nocmp_n = 0 and stay as they are)
awk '/Copy title packet/ { arm = 3 }
     arm > 0 && /check_cqe_iteration\(cq, rxq->cqe_n, rxq->cq_ci\);/ {
	sub(/rxq->cq_ci\);/, "rxq->cq_ci - nocmp_n);"); arm = 0 }
     arm > 0 { arm-- } { print }' \
	"$S/drivers/net/mlx5/mlx5_rxtx_vec.c" > "$T/mlx5_rxtx_vec.c"
n=$(diff "$S/drivers/net/mlx5/mlx5_rxtx_vec.c" "$T/mlx5_rxtx_vec.c" | grep -c '^>' || true)
[ "$n" = 2 ] || { echo "expected 2 patched lines, got $n" >&2; exit 1; }
FLAGS=$(cd "$D" && ninja -t commands $P/net_mlx5_mlx5_rxtx_vec.c.o | tail -1 | \
	sed -e 's/^[^ ]* //' -e 's/ -MD .*//' -e 's/-fdiagnostics-color=always//')
(cd "$D" && cc $FLAGS -I"$S/drivers/net/mlx5" -c "$T/mlx5_rxtx_vec.c" -o "$B/mlx5_rxtx_vec_probe.o")
gcc -no-pie -o "$B/rx_gen_new_probe" "$B/rx_gen_new.o" "$B/rx_stubs_new.o" \
	"$D/$P/net_mlx5_mlx5_rx.c.o" "$B/mlx5_rxtx_vec_probe.o" "$D/$P/net_mlx5_mlx5_rxtx.c.o" -lpthread
rm -rf "$T"
echo "built $B/rx_gen_new_probe"
