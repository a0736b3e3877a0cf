/* Functions the linked PMD objects reference only on error or slow paths
 * (MR lookup for non-inlined data, queue error recovery, debug dumps,
 * dynamic-field lookup for Tx scheduling, panics).  Kept apart from
 * harness.c because the DPDK headers declare them with other types; here
 * each is just a symbol that aborts, so a run that reached one would not
 * print checks=OK. */
#include <stdio.h>
#include <stdlib.h>
#define DEAD(name) \
	void name(void); \
	void name(void) { fprintf(stderr, "unexpected call: " #name "\n"); abort(); }
DEAD(__rte_panic)
DEAD(mlx5_mp_req_queue_state_modify)
DEAD(mlx5_mr_flush_local_cache)
DEAD(mlx5_mr_mb2mr_bh)
DEAD(mlx5_rxq_get)
DEAD(rte_eal_process_type)
DEAD(rte_hexdump)
DEAD(rte_mbuf_dynfield_lookup)
DEAD(rte_mbuf_dynflag_lookup)
DEAD(txq_free_elts)
