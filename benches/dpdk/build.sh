#!/bin/sh
# Build the harness: harness.c compiled against Debian's DPDK headers plus the
# DPDK source tree's private mlx5 headers (same version), linked with the
# Tx object files of Debian's librte_net_mlx5.a as they are.
# Usage: build.sh DPDK_SRC BUILD_DIR
set -eu
here=$(cd "$(dirname "$0")" && pwd)
S=$1; B=$2
LIB=/usr/lib/x86_64-linux-gnu/librte_net_mlx5.a
mkdir -p "$B/obj" "$B/shim"
python3 "$here/gen-autoconf.py" "$S" "$B/shim"
OBJS="net_mlx5_mlx5_tx.c.o net_mlx5_mlx5_tx_empw.c.o net_mlx5_mlx5_tx_nompw.c.o net_mlx5_mlx5_tx_mpw.c.o net_mlx5_mlx5_tx_txpp.c.o net_mlx5_mlx5_rxtx.c.o"
(cd "$B/obj" && ar x "$LIB" $OBJS)
# -std=c11 -D_DEFAULT_SOURCE -D_XOPEN_SOURCE=600: the PMD's own cflags (meson.build).
# Include order: installed headers first (rte_config.h, rte_build_config.h of
# Debian's build), then the source tree for the private/driver headers.
gcc -O2 -g -no-pie -Wall -Wno-packed-not-aligned -Wno-address-of-packed-member -Wno-deprecated-declarations -std=gnu11 -D_DEFAULT_SOURCE \
    -I"$B/shim" $(pkg-config --cflags libdpdk) \
    -I"$S/drivers/net/mlx5" -I"$S/drivers/net/mlx5/linux" \
    -I"$S/drivers/common/mlx5" -I"$S/drivers/common/mlx5/linux" \
    -I"$S/drivers/bus/pci" -I"$S/drivers/bus/auxiliary" \
    -I"$S/lib/ethdev" -I"$S/lib/eal/include" -I"$S/lib/eal/linux/include" \
    -I"$S/lib/pci" -I"$S/lib/net" -I"$S/lib/mbuf" -I"$here/.." \
    "$here/harness.c" -c -o "$B/harness.o"
gcc -O2 -g -Wall -c "$here/stubs.c" -o "$B/stubs.o"
gcc -no-pie -o "$B/harness" "$B/harness.o" "$B/stubs.o" $(for o in $OBJS; do echo "$B/obj/$o"; done)
# Rx side: rx_harness.c with the Rx burst objects (mlx5_rx_burst in
# mlx5_rx.c.o, mlx5_rx_burst_vec + SSE helpers in mlx5_rxtx_vec.c.o,
# mlx5_ptype_table in mlx5_rxtx.c.o).
RX_OBJS="net_mlx5_mlx5_rx.c.o net_mlx5_mlx5_rxtx_vec.c.o net_mlx5_mlx5_rxtx.c.o"
(cd "$B/obj" && ar x "$LIB" $RX_OBJS)
gcc -O2 -g -no-pie -Wall -Wno-packed-not-aligned -Wno-address-of-packed-member -Wno-deprecated-declarations -std=gnu11 -D_DEFAULT_SOURCE \
    -I"$B/shim" $(pkg-config --cflags libdpdk) \
    -I"$S/drivers/net/mlx5" -I"$S/drivers/net/mlx5/linux" \
    -I"$S/drivers/common/mlx5" -I"$S/drivers/common/mlx5/linux" \
    -I"$S/drivers/bus/pci" -I"$S/drivers/bus/auxiliary" \
    -I"$S/lib/ethdev" -I"$S/lib/eal/include" -I"$S/lib/eal/linux/include" \
    -I"$S/lib/pci" -I"$S/lib/net" -I"$S/lib/mbuf" -I"$here/.." \
    "$here/rx_harness.c" -c -o "$B/rx_harness.o"
gcc -O2 -g -Wall -c "$here/rx_stubs.c" -o "$B/rx_stubs.o"
gcc -no-pie -o "$B/rx_harness" "$B/rx_harness.o" "$B/rx_stubs.o" $(for o in $RX_OBJS; do echo "$B/obj/$o"; done)
# Rx side, Multi-Packet RQ: rx_mprq_harness.c with the same objects
# (mlx5_rx_burst_mprq and mlx5_rxq_initialize in mlx5_rx.c.o,
# mlx5_rx_burst_mprq_vec + rxq_copy_mprq_mbuf_v + SSE helpers in
# mlx5_rxtx_vec.c.o); rx_stubs.c without its mlx5_rxq_ctrl_get stub.
gcc -O2 -g -no-pie -Wall -Wno-packed-not-aligned -Wno-address-of-packed-member -Wno-deprecated-declarations -std=gnu11 -D_DEFAULT_SOURCE \
    -I"$B/shim" $(pkg-config --cflags libdpdk) \
    -I"$S/drivers/net/mlx5" -I"$S/drivers/net/mlx5/linux" \
    -I"$S/drivers/common/mlx5" -I"$S/drivers/common/mlx5/linux" \
    -I"$S/drivers/bus/pci" -I"$S/drivers/bus/auxiliary" \
    -I"$S/lib/ethdev" -I"$S/lib/eal/include" -I"$S/lib/eal/linux/include" \
    -I"$S/lib/pci" -I"$S/lib/net" -I"$S/lib/mbuf" -I"$here/.." \
    "$here/rx_mprq_harness.c" -c -o "$B/rx_mprq_harness.o"
gcc -O2 -g -Wall -DRX_MPRQ_HARNESS -c "$here/rx_stubs.c" -o "$B/rx_mprq_stubs.o"
gcc -no-pie -o "$B/rx_mprq_harness" "$B/rx_mprq_harness.o" "$B/rx_mprq_stubs.o" $(for o in $RX_OBJS; do echo "$B/obj/$o"; done)
