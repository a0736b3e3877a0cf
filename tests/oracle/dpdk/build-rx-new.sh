#!/bin/sh
# Build rx_gen_new: rx_gen_new.c linked with the mlx5 Rx objects of a recent
# DPDK built from source (see RX-ENHANCED.md).  Only the three Rx objects are
# compiled, by the DPDK tree's own meson/ninja build; rx_gen_new.c is
# compiled with the same flags and include paths as those objects.
# Usage: build-rx-new.sh DPDK_SRC DPDK_BUILD_DIR OUT_DIR
# Needs meson, ninja-build, python3-pyelftools (Debian's python3 must be
# first in PATH for meson), libnuma-dev, rdma-core headers.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
S=$(cd "$1" && pwd); D=$2; B=$3
mkdir -p "$B"; B=$(cd "$B" && pwd)
if [ ! -f "$D/build.ninja" ]; then
	(cd "$S" && PATH=/usr/bin:$PATH meson setup "$D" -Dplatform=generic \
		-Denable_drivers=common/mlx5,net/mlx5,bus/pci,bus/auxiliary,mempool/ring \
		-Denable_libs=hash,net,pci,mbuf,mempool,ring,rcu,meter,telemetry,kvargs \
		-Ddisable_apps='*' -Dtests=false -Denable_docs=false -Dexamples= \
		-Ddeveloper_mode=disabled)
fi
D=$(cd "$D" && pwd)
P=drivers/libtmp_rte_net_mlx5.a.p
OBJS="$P/net_mlx5_mlx5_rx.c.o $P/net_mlx5_mlx5_rxtx_vec.c.o $P/net_mlx5_mlx5_rxtx.c.o"
(cd "$D" && nice ninja -j2 $OBJS)
# The compile command ninja used for mlx5_rx.c, minus its source/output/
# dependency arguments: the same -I, -D, -march and -include rte_config.h.
FLAGS=$(cd "$D" && ninja -t commands $P/net_mlx5_mlx5_rx.c.o | tail -1 | \
	sed -e 's/^[^ ]* //' -e 's/ -MD .*//' -e 's/-fdiagnostics-color=always//')
(cd "$D" && gcc $FLAGS -O2 -g -Wno-missing-prototypes -Wno-missing-declarations \
	-Wno-cast-qual -Wno-sign-compare -Wno-unused-parameter -Wno-format-nonliteral \
	-Wno-implicit-fallthrough -Wno-strict-prototypes -Wno-discarded-qualifiers \
	-c "$here/rx_gen_new.c" -o "$B/rx_gen_new.o")
gcc -O2 -g -Wall -c "$here/rx_stubs_new.c" -o "$B/rx_stubs_new.o"
gcc -no-pie -o "$B/rx_gen_new" "$B/rx_gen_new.o" "$B/rx_stubs_new.o" \
	$(for o in $OBJS; do echo "$D/$o"; done) -lpthread
echo "built $B/rx_gen_new"
