/* Functions the linked Rx objects (mlx5_rx.c.o, mlx5_rxtx_vec.c.o,
 * mlx5_rxtx.c.o) reference only on error, MPRQ, LWM, monitor or other
 * paths the Rx scenarios do not take. Each one aborts, so a run that
 * reached one would not print checks=OK.
 * Linked into rx_harness and (compiled with -DRX_MPRQ_HARNESS) into
 * rx_mprq_harness. There mlx5_mprq_buf_free_cb is still dead: the MPRQ
 * scenarios memcpy every packet, so no stride is attached to an mbuf and
 * no MPRQ buffer is replaced or freed (rx_mprq_harness checks that every
 * buffer keeps refcnt 1); mlx5_rxq_ctrl_get is a harness function there
 * (mlx5_mprq_enabled calls it at selection). */
#include <stdio.h>
#include <stdlib.h>
#define DEAD(name) \
	void name(void); \
	void name(void) { fprintf(stderr, "unexpected call: " #name "\n"); abort(); }
DEAD(__rte_panic)
DEAD(mlx5_devx_modify_rq)
DEAD(mlx5_lwm_setup)
DEAD(mlx5_mp_req_queue_state_modify)
DEAD(mlx5_mprq_buf_free_cb)
DEAD(mlx5_mr_mempool2mr_bh)
#ifndef RX_MPRQ_HARNESS
DEAD(mlx5_rxq_ctrl_get)
#endif
DEAD(mlx5_rxq_get)
DEAD(rte_eal_process_type)
DEAD(rte_eth_dev_callback_process)
DEAD(rte_eth_pkt_burst_dummy)
DEAD(rte_hexdump)
DEAD(rxq_sync_cq)
/* Data the error-recovery path (mlx5_rx_err_handle) and LWM code refer to;
 * never read here (that code is not reached). Zeroed, large enough. */
void *mlx5_glue;
char devx_obj_ops[512] __attribute__((aligned(64)));
