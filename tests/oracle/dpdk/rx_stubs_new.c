/* Functions and data the Rx objects of the recent DPDK (mlx5_rx.c.o,
 * mlx5_rxtx_vec.c.o, mlx5_rxtx.c.o, built by build-rx-new.sh) reference
 * outside themselves, on error, recovery, MPRQ attach, LWM, dump, monitor
 * or shared-RQ paths that rx_gen_new's scenarios do not take (the list is
 * `nm -u` of the three objects minus what rx_gen_new.c defines).  Each
 * function aborts, so a run that reached one would fail loudly. */
#include <stdio.h>
#include <stdlib.h>
#define DEAD(name) \
	void name(void); \
	void name(void) { fprintf(stderr, "unexpected call: " #name "\n"); abort(); }
DEAD(__rte_panic)
DEAD(mlx5_devx_cmd_query_cq)
DEAD(mlx5_devx_cmd_query_rq)
DEAD(mlx5_devx_modify_rq)
DEAD(mlx5_lwm_setup)
DEAD(mlx5_mp_req_queue_state_modify)
DEAD(mlx5_mprq_buf_free_cb)
DEAD(mlx5_mr_mempool2mr_bh)
DEAD(mlx5_rxq_ctrl_get)
DEAD(mlx5_rxq_get)
DEAD(mlx5_rxq_ref)
DEAD(mlx5_rxq_sync_cq)
DEAD(rte_eal_process_type)
DEAD(rte_eth_dev_callback_process)
DEAD(rte_eth_dev_is_valid_port)
DEAD(rte_eth_pkt_burst_dummy)
DEAD(rte_eth_rx_queue_is_valid)
DEAD(rte_hexdump)
/* Data only the error-recovery path refers to; never read here. */
void *mlx5_glue;
char mlx5_devx_obj_ops[512] __attribute__((aligned(64)));
