#!/bin/sh
# Build rx_gen: rx_gen.c compiled against Debian's DPDK 22.11 headers plus the
# private mlx5 headers of the DPDK source tree of the same version, linked
# with the Rx objects of Debian's librte_net_mlx5.a as they are (the same
# approach as benches/dpdk/build.sh, whose gen-autoconf.py and rx_stubs.c
# are used here by path).
# Usage: build-rx.sh DPDK_SRC BUILD_DIR
set -eu
here=$(cd "$(dirname "$0")" && pwd)
bench="$here/../../../benches/dpdk"
S=$1; B=$2
LIB=/usr/lib/x86_64-linux-gnu/librte_net_mlx5.a
mkdir -p "$B/obj" "$B/shim"
python3 "$bench/gen-autoconf.py" "$S" "$B/shim"
# mlx5_rx_burst (mlx5_rx.c.o), mlx5_rx_burst_vec + SSE helpers
# (mlx5_rxtx_vec.c.o), mlx5_ptype_table (mlx5_rxtx.c.o).
RX_OBJS="net_mlx5_mlx5_rx.c.o net_mlx5_mlx5_rxtx_vec.c.o net_mlx5_mlx5_rxtx.c.o"
(cd "$B/obj" && ar x "$LIB" $RX_OBJS)
gcc -O2 -g -no-pie -Wall -Wno-packed-not-aligned -Wno-address-of-packed-member -Wno-deprecated-declarations -std=gnu11 -D_DEFAULT_SOURCE \
    -I"$B/shim" $(pkg-config --cflags libdpdk) \
    -I"$S/drivers/net/mlx5" -I"$S/drivers/net/mlx5/linux" \
    -I"$S/drivers/common/mlx5" -I"$S/drivers/common/mlx5/linux" \
    -I"$S/drivers/bus/pci" -I"$S/drivers/bus/auxiliary" \
    -I"$S/lib/ethdev" -I"$S/lib/eal/include" -I"$S/lib/eal/linux/include" \
    -I"$S/lib/pci" -I"$S/lib/net" -I"$S/lib/mbuf" \
    "$here/rx_gen.c" -c -o "$B/rx_gen.o"
gcc -O2 -g -Wall -c "$bench/rx_stubs.c" -o "$B/rx_stubs.o"
gcc -no-pie -o "$B/rx_gen" "$B/rx_gen.o" "$B/rx_stubs.o" $(for o in $RX_OBJS; do echo "$B/obj/$o"; done)
echo "built $B/rx_gen"
