/*
 * Head-to-head harness: DPDK 22.11 mlx5 PMD Tx burst (Debian 12's
 * librte_net_mlx5.a object code) on a Tx queue fabricated in ordinary
 * memory.  See README.md.
 *
 * Nothing of DPDK is compiled into this file except header inlines used for
 * fabrication (mbuf allocation outside the measured region) and the struct
 * layouts: the Tx burst routine, the completion handler and the mbuf free
 * code that run in the measured region are the object code of Debian's
 * librte_net_mlx5.a (members net_mlx5_mlx5_tx*.c.o, net_mlx5_mlx5_rxtx.c.o),
 * linked as they are.
 *
 * Usage: harness SCENARIO|select [time|count] [BURSTS] [ROUNDS]
 *   count: preflight + BURSTS bursts (for callgrind), prints measured_units
 *   time:  preflight, calibration, 1 warm-up round + ROUNDS rounds of
 *          BURSTS bursts; rdtsc windows around each burst call;
 *          prints ns/packet (median, min, max over rounds).
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdarg.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>
#include <x86intrin.h>
#include <valgrind/valgrind.h>

#include "mlx5_tx.h"
#include "harness_common.h"

#define CHECK(c, ...)                                                          \
	do {                                                                   \
		if (!(c)) {                                                    \
			fprintf(stderr, "CHECK FAILED %s:%d: ", __FILE__,       \
				__LINE__);                                     \
			fprintf(stderr, __VA_ARGS__);                          \
			fprintf(stderr, "\n");                                 \
			abort();                                               \
		}                                                              \
	} while (0)

/* ---- what the PMD objects reference outside themselves ----------------- *
 * Data the hot path reads, with the values a running DPDK process has:   */
RTE_DEFINE_PER_LCORE(unsigned int, _lcore_id) = 0;	/* an EAL lcore thread, lcore 0 */
RTE_DEFINE_PER_LCORE(int, _rte_errno);
struct rte_eth_dev rte_eth_devices[RTE_MAX_ETHPORTS];	/* [0].process_private */
uint64_t rte_flow_dynf_metadata_mask;			/* 0: metadata dynfield not registered */
int32_t rte_flow_dynf_metadata_offs = -1;		/* as librte_ethdev initialises it */
struct rte_mempool_ops_table rte_mempool_ops_table;	/* ops[0]: the harness's pool */
int mlx5_logtype;

/* Functions on error/slow paths only: stubs.c (each aborts). */

/* mlx5_select_tx_function logs its choice at DEBUG level. */
static int log_verbose;
int rte_log(uint32_t level, uint32_t logtype, const char *format, ...)
{
	va_list ap;

	(void)logtype;
	if (!log_verbose)
		return 0;
	va_start(ap, format);
	fprintf(stderr, "[rte_log %u] ", level);
	vfprintf(stderr, format, ap);
	va_end(ap);
	return 0;
}

/* The routines the PMD has (mlx5_tx.c's txoff_func[] table). */
extern uint16_t mlx5_tx_burst_i_empw(void *, struct rte_mbuf **, uint16_t);
extern uint16_t mlx5_tx_burst_md_empw(void *, struct rte_mbuf **, uint16_t);
extern uint16_t mlx5_tx_burst_none_empw(void *, struct rte_mbuf **, uint16_t);

/* ---- the mempool backend (harness's own, a LIFO stack) ---------------- *
 * Only called when the lcore cache is empty or past its flush threshold:
 * in steady state never inside the measured region (checked). */
#define NB_MBUF 4096
static void *stack_objs[NB_MBUF];
static unsigned stack_len;
static unsigned long backend_calls;

static int stack_enqueue(struct rte_mempool *mp, void * const *objs, unsigned n)
{
	(void)mp;
	backend_calls++;
	CHECK(stack_len + n <= NB_MBUF, "mempool backend overflow");
	memcpy(&stack_objs[stack_len], objs, n * sizeof(void *));
	stack_len += n;
	return 0;
}

static int stack_dequeue(struct rte_mempool *mp, void **objs, unsigned n)
{
	(void)mp;
	backend_calls++;
	if (stack_len < n)
		return -ENOBUFS;
	stack_len -= n;
	memcpy(objs, &stack_objs[stack_len], n * sizeof(void *));
	return 0;
}

static unsigned stack_count(const struct rte_mempool *mp)
{
	(void)mp;
	return stack_len;
}

/* ---- fabricated queue ---------------------------------------------------- */

#define BURST 32
#define H_PKT_LEN 64
#define SQN 0x1a2b		/* SQ number (qp_num_8s = SQN << 8) */
#define MBUF_DATAROOM (2048 + RTE_PKTMBUF_HEADROOM)
#define POOL_CACHE 250		/* testpmd's default mempool cache */

static struct mlx5_txq_ctrl *txq_ctrl;
static struct mlx5_txq_data *txq;
static struct rte_mempool *mp;
static struct mlx5_priv *priv;
static struct rte_eth_dev_data *dev_data;
static struct mlx5_proc_priv *ppriv;
static uint8_t *uar_page;		/* 4 KiB, doorbell register at +0x800 */
static uint32_t *sq_dbrec;		/* [MLX5_SND_DBR] */
static uint32_t *cq_dbrec;
static uint16_t hw_cq_pi;		/* device model: CQEs written */
static uint16_t (*burst_fn)(void *, struct rte_mbuf **, uint16_t);
static int ptr_mode;			/* inlining off: pointer eMPW */
static uint8_t *mbuf_mem;		/* the pool's memory: one MR */
static size_t mbuf_mem_sz;
static uint32_t mr_dev_gen;		/* share_cache.dev_gen */
#define H_LKEY 0x5a5a01u
static const char *burst_name;
static long measured_units;
static uint64_t pkt_seq;

static void *zalloc(size_t align, size_t sz)
{
	void *p = aligned_alloc(align, (sz + align - 1) / align * align);

	CHECK(p, "oom");
	memset(p, 0, sz);
	return p;
}

/* txq_set_params() (mlx5_txq.c) for: ConnectX-6 PF, mps = MLX5_MPW_ENHANCED,
 * txq_inline_min = 0 (HCA wqe_inline_mode NOT_REQUIRED), txq_inline_max and
 * txq_inline_mpw devargs unset (defaults), txqs_min_inline satisfied (see
 * README: 8 or more Tx queues, or devarg txqs_min_inline <= queues). */
static void set_inline_params(void)
{
	unsigned inlen_send = MLX5_SEND_DEF_INLINE_LEN;
	unsigned inlen_empw = MLX5_EMPW_DEF_INLINE_LEN;
	unsigned temp;

	temp = RTE_MAX(inlen_send, MLX5_ESEG_MIN_INLINE_SIZE + MLX5_WQE_DSEG_SIZE);
	temp -= MLX5_ESEG_MIN_INLINE_SIZE + MLX5_WQE_DSEG_SIZE;
	temp = RTE_ALIGN(temp, MLX5_WQE_SIZE);
	temp += MLX5_ESEG_MIN_INLINE_SIZE + MLX5_WQE_DSEG_SIZE;
	temp = RTE_MIN(temp, MLX5_WQE_SIZE_MAX + MLX5_ESEG_MIN_INLINE_SIZE -
			     MLX5_WQE_CSEG_SIZE - MLX5_WQE_ESEG_SIZE -
			     MLX5_WQE_DSEG_SIZE * 2);
	temp = RTE_MIN(temp, MLX5_SEND_MAX_INLINE_LEN);
	inlen_send = temp;
	temp = RTE_MAX(inlen_empw, MLX5_WQE_SIZE + MLX5_DSEG_MIN_INLINE_SIZE);
	temp -= MLX5_DSEG_MIN_INLINE_SIZE;
	temp = RTE_ALIGN(temp, MLX5_WQE_SIZE);
	temp += MLX5_DSEG_MIN_INLINE_SIZE;
	temp = RTE_MIN(temp, MLX5_WQE_SIZE_MAX + MLX5_DSEG_MIN_INLINE_SIZE -
			     MLX5_WQE_CSEG_SIZE - MLX5_WQE_ESEG_SIZE -
			     MLX5_WQE_DSEG_SIZE);
	temp = RTE_MIN(temp, MLX5_EMPW_MAX_INLINE_LEN);
	inlen_empw = temp;
	txq->inlen_send = inlen_send;
	txq->inlen_empw = inlen_empw;
	txq->inlen_mode = 0;
	txq_ctrl->max_inline_data = RTE_MAX(inlen_send, inlen_empw);
}

/* nb_txd: rte_eth_tx_queue_setup(nb_tx_desc) */
static void fabricate(int fast_free, unsigned nb_txd)
{
	unsigned cqe_n, wqe_size, wqe_n, i;
	struct rte_mempool_cache *caches;
	uint8_t *mem;

	/* --- mempool of NB_MBUF mbufs, 2048 B data room + headroom --- */
	rte_mempool_ops_table.num_ops = 1;
	snprintf(rte_mempool_ops_table.ops[0].name, RTE_MEMPOOL_OPS_NAMESIZE, "harness_stack");
	rte_mempool_ops_table.ops[0].enqueue = stack_enqueue;
	rte_mempool_ops_table.ops[0].dequeue = stack_dequeue;
	rte_mempool_ops_table.ops[0].get_count = stack_count;
	mp = zalloc(RTE_CACHE_LINE_SIZE, sizeof(*mp) + sizeof(struct rte_pktmbuf_pool_private));
	snprintf(mp->name, sizeof(mp->name), "harness_pool");
	mp->size = NB_MBUF;
	mp->cache_size = POOL_CACHE;
	/* The object layout of rte_pktmbuf_pool_create -> rte_mempool_create_empty
	 * (flags 0) -> rte_mempool_calc_obj_size: the object header is rounded
	 * up to a cache line (no NO_CACHE_ALIGN), the element (mbuf + data
	 * room) to 8 bytes, the trailer pads the object to a cache line and
	 * then spreads it over memory channels (arch_mem_object_align, with
	 * EAL's default 4 channels, 1 rank: the size in cache lines is made
	 * coprime with 4). With 64 + 2304 = 2368 B = 37 lines the trailer is 0.
	 * Objects are laid out back to back from a cache-aligned chunk
	 * (rte_mempool_op_populate_helper, off = 0), so every mbuf header is
	 * at a cache-line boundary and its buffer starts right after it
	 * (rte_pktmbuf_init: buf_addr = m + sizeof(mbuf) + priv_size), the
	 * packet data RTE_PKTMBUF_HEADROOM further on. */
	mp->elt_size = RTE_ALIGN_CEIL(sizeof(struct rte_mbuf) + MBUF_DATAROOM, sizeof(uint64_t));
	mp->header_size = RTE_ALIGN_CEIL(sizeof(struct rte_mempool_objhdr), RTE_MEMPOOL_ALIGN);
	{
		unsigned tot = mp->header_size + mp->elt_size, lines;

		tot = RTE_ALIGN_CEIL(tot, RTE_MEMPOOL_ALIGN);
		lines = tot / RTE_MEMPOOL_ALIGN;
		while (lines % 2 == 0)		/* gcd(lines, 4 channels x 1 rank) != 1 */
			lines++;
		mp->trailer_size = lines * RTE_MEMPOOL_ALIGN - mp->header_size - mp->elt_size;
	}
	mp->private_data_size = sizeof(struct rte_pktmbuf_pool_private);
	mp->ops_index = 0;
	mp->populated_size = NB_MBUF;
	caches = zalloc(RTE_CACHE_LINE_SIZE, sizeof(*caches) * RTE_MAX_LCORE);
	for (i = 0; i < RTE_MAX_LCORE; i++) {	/* as rte_mempool_create_empty */
		caches[i].size = POOL_CACHE;
		caches[i].flushthresh = POOL_CACHE * 3 / 2;	/* CALC_CACHE_FLUSHTHRESH */
		caches[i].len = 0;
	}
	mp->local_cache = caches;
	((struct rte_pktmbuf_pool_private *)(mp + 1))->mbuf_data_room_size = MBUF_DATAROOM;
	mbuf_mem_sz = (size_t)NB_MBUF * (mp->header_size + mp->elt_size + mp->trailer_size);
	mem = mbuf_mem = zalloc(RTE_CACHE_LINE_SIZE, mbuf_mem_sz);
	for (i = 0; i < NB_MBUF; i++) {		/* as rte_pktmbuf_init */
		uint8_t *obj = mem + (size_t)i * (mp->header_size + mp->elt_size + mp->trailer_size);
		struct rte_mempool_objhdr *hdr = (struct rte_mempool_objhdr *)
			(obj + mp->header_size - sizeof(*hdr));	/* rte_mempool_get_header(m) */
		struct rte_mbuf *m = (struct rte_mbuf *)(obj + mp->header_size);

		hdr->mp = mp;				/* mempool_add_elem */
		hdr->iova = (rte_iova_t)(uintptr_t)m;
		CHECK(((uintptr_t)m & (RTE_CACHE_LINE_SIZE - 1)) == 0, "mbuf %u not cache-line aligned", i);
		CHECK((((uintptr_t)(m + 1) + RTE_PKTMBUF_HEADROOM) & (RTE_CACHE_LINE_SIZE - 1)) == 0,
		      "mbuf %u data not cache-line aligned", i);

		m->priv_size = 0;
		m->buf_addr = (char *)(m + 1);
		m->buf_iova = (rte_iova_t)(uintptr_t)m->buf_addr;
		m->buf_len = MBUF_DATAROOM;
		m->data_off = RTE_PKTMBUF_HEADROOM;
		m->pool = mp;
		m->nb_segs = 1;
		m->port = RTE_MBUF_PORT_INVALID;
		rte_mbuf_refcnt_set(m, 1);
		m->next = NULL;
		stack_objs[stack_len++] = m;
	}

	/* --- the Tx queue, as mlx5_txq_new + txq_set_params +
	 *     mlx5_txq_devx_obj_new + mlx5_txq_start leave it --- */
	txq_ctrl = zalloc(RTE_CACHE_LINE_SIZE, sizeof(*txq_ctrl) + nb_txd * sizeof(struct rte_mbuf *));
	txq = &txq_ctrl->txq;
	txq_ctrl->refcnt = 1;
	txq->offloads = fast_free ? RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE : 0;
	txq->fast_free = !!fast_free;
	txq->elts_n = log2above(nb_txd);
	txq->elts_s = 1 << txq->elts_n;
	txq->elts_m = txq->elts_s - 1;
	txq->port_id = 0;
	txq->idx = 0;
	txq->vlan_en = 1;		/* hca_attr.wqe_vlan_insert on ConnectX-6 */
	if (ptr_mode) {
		/* txq_set_params with fewer Tx queues than txqs_min_inline
		 * (default 8) and inline_min 0: no inlining at all. */
		txq->inlen_send = txq->inlen_empw = txq->inlen_mode = 0;
		txq_ctrl->max_inline_data = 0;
	} else {
		set_inline_params();
	}
	/* MR control (mlx5_mr_ctrl_init + a top-half cache entry for the
	 * pool's memory, as after the first lookup or mempool registration):
	 * the lookup of pointer data segments hits cache[mru]. */
	txq->mr_ctrl.dev_gen_ptr = &mr_dev_gen;
	txq->mr_ctrl.cur_gen = mr_dev_gen;
	txq->mr_ctrl.mru = 0;
	txq->mr_ctrl.head = 1;
	txq->mr_ctrl.cache[0].start = (uintptr_t)mbuf_mem;
	txq->mr_ctrl.cache[0].end = (uintptr_t)mbuf_mem + mbuf_mem_sz;
	txq->mr_ctrl.cache[0].lkey = rte_cpu_to_be_32(H_LKEY);
	/* CQ: mlx5_txq_devx_obj_new */
	cqe_n = (1u << txq->elts_n) / MLX5_TX_COMP_THRESH + 1 + MLX5_TX_COMP_THRESH_INLINE_DIV;
	txq->cqe_n = log2above(cqe_n);
	txq->cqe_s = 1 << txq->cqe_n;
	txq->cqe_m = txq->cqe_s - 1;
	txq->cqes = zalloc(4096, txq->cqe_s * sizeof(struct mlx5_cqe));
	for (i = 0; i < txq->cqe_s; i++)	/* mlx5_devx_cq_create */
		txq->cqes[i].op_own = (MLX5_CQE_INVALID << 4) | MLX5_CQE_OWNER_MASK;
	cq_dbrec = zalloc(64, 64);
	txq->cq_db = cq_dbrec;
	/* SQ */
	wqe_size = sizeof(struct mlx5_wqe_cseg) + sizeof(struct mlx5_wqe_eseg) +
		   sizeof(struct mlx5_wqe_dseg);
	wqe_size = RTE_MAX(wqe_size, sizeof(struct mlx5_wqe_cseg) +
			   sizeof(struct mlx5_wqe_eseg) +
			   RTE_ALIGN(txq->inlen_send + sizeof(uint32_t), MLX5_WSEG_SIZE));
	wqe_size = RTE_ALIGN(wqe_size, MLX5_WQE_SIZE) / MLX5_WQE_SIZE;
	wqe_n = RTE_MIN((1u << txq->elts_n) * wqe_size, 32768u);	/* max_qp_wr 32768 */
	txq->wqe_n = log2above(wqe_n);
	txq->wqe_s = 1 << txq->wqe_n;
	txq->wqe_m = txq->wqe_s - 1;
	txq->wqes = zalloc(4096, (size_t)txq->wqe_s * MLX5_WQE_SIZE);
	txq->wqes_end = txq->wqes + txq->wqe_s;
	txq->wqe_thres = txq->wqe_s / MLX5_TX_COMP_THRESH_INLINE_DIV;
	sq_dbrec = zalloc(64, 64);
	txq->qp_db = &sq_dbrec[MLX5_SND_DBR];
	txq->qp_num_8s = SQN << 8;
	txq->db_heu = 0;	/* devarg tx_db_nc unset */
	txq->db_nc = 0;		/* UAR mapped write-combining (default) */
	/* mlx5_trigger.c txq_start: fcqs[cqe_s] */
	txq->fcqs = zalloc(64, txq->cqe_s * sizeof(*txq->fcqs));
	/* UAR: proc_priv->uar_table[idx].db = UAR page + MLX5_BF_OFFSET */
	uar_page = zalloc(4096, 4096);
	memset(uar_page, 0xa5, 4096);
	ppriv = zalloc(64, sizeof(*ppriv) + sizeof(struct mlx5_uar_data));
	ppriv->uar_table_sz = 1;
	ppriv->uar_table[0].db = (uint64_t *)(uar_page + 0x800);
	txq->uar_data.db = ppriv->uar_table[0].db;

	/* --- the port, for mlx5_select_tx_function --- */
	priv = zalloc(64, sizeof(*priv));
	dev_data = zalloc(64, sizeof(*dev_data));
	priv->config.mps = MLX5_MPW_ENHANCED;
	priv->config.txq_inline_min = 0;
	priv->config.hw_vlan_insert = 1;
	priv->txqs_n = 1;
	priv->txqs = zalloc(64, sizeof(void *));
	(*priv->txqs)[0] = txq;
	priv->dev_data = dev_data;
	txq_ctrl->priv = priv;
	dev_data->dev_private = priv;
	dev_data->dev_conf.txmode.offloads = txq->offloads;
	dev_data->nb_tx_queues = 1;
	rte_eth_devices[0].data = dev_data;
	rte_eth_devices[0].process_private = ppriv;
}

/* ---- the measured function ------------------------------------------- */

__attribute__((noinline)) uint16_t measured_tx_burst(struct rte_mbuf **pkts, uint16_t n);
__attribute__((noinline)) uint16_t measured_tx_burst(struct rte_mbuf **pkts, uint16_t n)
{
	return burst_fn(txq, pkts, n);
}

/* ---- packets ------------------------------------------------------------ */

static uint8_t pkt_byte(uint64_t seq, unsigned i)
{
	static const uint8_t hdr[14] = { 0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01, 0x08, 0x00 };

	if (i < 14)
		return hdr[i];
	if (i < 22)
		return (uint8_t)(seq >> (8 * (i - 14)));
	return (uint8_t)(seq * 31 + i * 7);
}

/* What an application does before rte_eth_tx_burst: allocate and fill. */
static void make_burst(struct rte_mbuf **pkts, uint64_t seq0)
{
	unsigned p, i;

	CHECK(rte_pktmbuf_alloc_bulk(mp, pkts, BURST) == 0, "mbuf alloc failed");
	for (p = 0; p < BURST; p++) {
		uint8_t *d = (uint8_t *)rte_pktmbuf_append(pkts[p], H_PKT_LEN);

		CHECK(d, "append");
		for (i = 0; i < H_PKT_LEN; i++)
			d[i] = pkt_byte(seq0 + p, i);
	}
}

/* ---- device model and checks -------------------------------------------- */

static uint8_t ring_byte(uint32_t wqe_idx, unsigned off)
{
	size_t ring = (size_t)txq->wqe_s * MLX5_WQE_SIZE;

	return ((uint8_t *)txq->wqes)[((size_t)(wqe_idx & txq->wqe_m) * MLX5_WQE_SIZE + off) % ring];
}

static uint32_t ring_be32(uint32_t wqe_idx, unsigned off)
{
	return (uint32_t)ring_byte(wqe_idx, off) << 24 | (uint32_t)ring_byte(wqe_idx, off + 1) << 16 |
	       (uint32_t)ring_byte(wqe_idx, off + 2) << 8 | ring_byte(wqe_idx, off + 3);
}

struct snap {
	uint16_t wqe_ci, wqe_pi, wqe_comp, cq_ci, cq_pi, elts_head, elts_tail, elts_comp;
	uint32_t cache_len;
	uint64_t opackets, obytes;
	unsigned long backend_calls;
};

static struct rte_mempool_cache *lcore_cache(void)
{
	return &mp->local_cache[0];
}

static void snap_take(struct snap *s)
{
	s->wqe_ci = txq->wqe_ci; s->wqe_pi = txq->wqe_pi; s->wqe_comp = txq->wqe_comp;
	s->cq_ci = txq->cq_ci; s->cq_pi = txq->cq_pi;
	s->elts_head = txq->elts_head; s->elts_tail = txq->elts_tail; s->elts_comp = txq->elts_comp;
	s->cache_len = lcore_cache()->len;
	s->opackets = txq->stats.opackets; s->obytes = txq->stats.obytes;
	s->backend_calls = backend_calls;
}


static unsigned long nb_wqe_checked, nb_cqe_written;
static unsigned pkts_per_wqe_first = 0;
static struct rte_mbuf *prev_pkts[BURST];
static unsigned prev_valid;

/* Pointer eMPW (inlining off): one session of 32 pointer data segments
 * per burst (ds = 34, 9 WQEBBs), mbufs kept in elts until the CQE; the
 * PMD asks for a CQE on every burst (elts_head - elts_comp reaches 32). */
static void check_burst_ptr(struct rte_mbuf **pkts, const struct snap *b, uint16_t ret)
{
	const unsigned ds = BURST + 2;
	uint32_t idx = b->wqe_ci, flags, i, p;
	struct rte_mempool_cache *c = lcore_cache();
	uint16_t freed = txq->elts_tail - b->elts_tail;
	int comp_req;
	uint64_t db;

	CHECK(ret == BURST, "tx_burst returned %u, want %u", ret, BURST);
	if (b->cq_ci != hw_cq_pi) {
		CHECK(txq->cq_ci == hw_cq_pi, "cq_ci %u, want %u", txq->cq_ci, hw_cq_pi);
		CHECK(*cq_dbrec == rte_cpu_to_be_32(txq->cq_ci), "CQ doorbell record");
		CHECK(txq->wqe_pi == rte_be_to_cpu_16(txq->cqes[(hw_cq_pi - 1) & txq->cqe_m].wqe_counter),
		      "wqe_pi not updated from the CQE");
		CHECK(txq->elts_tail == txq->fcqs[(txq->cq_ci - 1) & txq->cqe_m],
		      "elts_tail %u not moved to the completed head", txq->elts_tail);
		CHECK(freed == BURST, "freed %u mbufs, want %u", freed, BURST);
		CHECK(prev_valid, "freed without a previous burst");
		CHECK(backend_calls == b->backend_calls, "mempool backend called in the burst");
		CHECK(c->len == b->cache_len + BURST, "lcore cache len %u, want %u", c->len,
		      b->cache_len + BURST);
		for (p = 0; p < BURST; p++)
			CHECK(c->objs[b->cache_len + p] == prev_pkts[p],
			      "completed mbuf %u not freed to the cache", p);
	} else {
		CHECK(txq->cq_ci == b->cq_ci && txq->wqe_pi == b->wqe_pi && freed == 0,
		      "completion state moved without a CQE");
	}
	flags = ring_be32(idx, 8);
	CHECK(ring_be32(idx, 0) == ((uint32_t)(uint16_t)idx << 8 | MLX5_OPCODE_ENHANCED_MPSW),
	      "WQE %u ctrl opcode %08x, want eMPW 0x29 with index", idx, ring_be32(idx, 0));
	CHECK(ring_be32(idx, 4) == (SQN << 8 | ds), "WQE %u ctrl qpn_ds %08x, want %08x",
	      idx, ring_be32(idx, 4), SQN << 8 | ds);
	CHECK(ring_be32(idx, 12) == 0, "WQE %u ctrl misc", idx);
	for (i = 16; i < 32; i++)
		CHECK(ring_byte(idx, i) == 0, "WQE %u eth segment byte %u", idx, i);
	for (p = 0; p < BURST; p++) {
		unsigned off = 32 + p * 16;
		uint64_t addr = (uint64_t)ring_be32(idx, off + 8) << 32 | ring_be32(idx, off + 12);

		CHECK(ring_be32(idx, off) == H_PKT_LEN, "packet %u bcount %08x", p, ring_be32(idx, off));
		CHECK(ring_be32(idx, off + 4) == H_LKEY, "packet %u lkey %08x", p, ring_be32(idx, off + 4));
		CHECK(addr == (uintptr_t)rte_pktmbuf_mtod(pkts[p], void *), "packet %u address", p);
		CHECK(txq->elts[(uint16_t)(b->elts_head + p) & txq->elts_m] == pkts[p],
		      "elts[%u] is not packet %u", (uint16_t)(b->elts_head + p) & txq->elts_m, p);
	}
	CHECK(txq->wqe_ci == (uint16_t)(idx + (ds + 3) / 4), "wqe_ci %u", txq->wqe_ci);
	CHECK(txq->elts_head == (uint16_t)(b->elts_head + BURST), "elts_head %u", txq->elts_head);
	CHECK(*txq->qp_db == rte_cpu_to_be_32(txq->wqe_ci), "SQ doorbell record %08x",
	      rte_be_to_cpu_32(*txq->qp_db));
	CHECK(sq_dbrec[0] == 0, "RQ doorbell record written");
	memcpy(&db, uar_page + 0x800, 8);
	CHECK(db == *(uint64_t *)(txq->wqes + (idx & txq->wqe_m)), "UAR doorbell");
	for (i = 0; i < 4096; i++)
		if (i < 0x800 || i >= 0x808)
			CHECK(uar_page[i] == 0xa5, "UAR page byte %#x written", i);
	comp_req = (uint16_t)(txq->elts_head - b->elts_comp) >= MLX5_TX_COMP_THRESH;
	if (comp_req) {
		CHECK(flags == MLX5_COMP_ALWAYS << MLX5_COMP_MODE_OFFSET, "WQE flags %08x", flags);
		CHECK(txq->cq_pi == (uint16_t)(b->cq_pi + 1) && txq->elts_comp == txq->elts_head &&
		      txq->fcqs[b->cq_pi & txq->cqe_m] == txq->elts_head, "completion request");
	} else {
		CHECK(flags == MLX5_COMP_ONLY_FIRST_ERR << MLX5_COMP_MODE_OFFSET, "WQE flags %08x", flags);
		CHECK(txq->cq_pi == b->cq_pi, "unexpected completion request");
	}
	CHECK(txq->stats.opackets == b->opackets + BURST && txq->stats.obytes == b->obytes + BURST * H_PKT_LEN,
	      "soft counters");
	if (comp_req) {
		volatile struct mlx5_cqe *cqe = &txq->cqes[hw_cq_pi & txq->cqe_m];

		cqe->wqe_counter = rte_cpu_to_be_16((uint16_t)idx);
		cqe->sop_drop_qpn = rte_cpu_to_be_32(MLX5_OPCODE_ENHANCED_MPSW << 24 | SQN);
		cqe->byte_cnt = 0;
		rte_compiler_barrier();
		cqe->op_own = MLX5_CQE_REQ << 4 | !!(hw_cq_pi & txq->cqe_s);
		hw_cq_pi++;
		nb_cqe_written++;
	}
	nb_wqe_checked++;
	memcpy(prev_pkts, pkts, sizeof(prev_pkts));
	prev_valid = 1;
	CHECK((uint16_t)(txq->wqe_ci - txq->wqe_pi) <= txq->wqe_s - 64, "SQ nearly full");
}

/* Check everything the burst wrote, then play the NIC: if the PMD asked for
 * a completion, write the CQE for that WQE. */
static void check_burst(struct rte_mbuf **pkts, const struct snap *b, uint16_t ret,
			uint64_t seq0, int steady)
{
	const unsigned room0 = 15 * MLX5_WQE_SIZE - MLX5_WQE_CSEG_SIZE - MLX5_WQE_ESEG_SIZE;
	const unsigned tlen = RTE_ALIGN(H_PKT_LEN + 4, MLX5_WSEG_SIZE);
	unsigned left = BURST, p = 0, k, i, nwqe = 0;
	uint32_t idx = b->wqe_ci, last_idx = 0;
	struct rte_mempool_cache *c = lcore_cache();
	int comp_req;
	uint64_t db;

	if (ptr_mode) {
		check_burst_ptr(pkts, b, ret);
		return;
	}
	CHECK(ret == BURST, "tx_burst returned %u, want %u", ret, BURST);
	/* CQE written after the previous burst: consumed by this one. */
	if (b->cq_ci != hw_cq_pi) {
		CHECK(txq->cq_ci == hw_cq_pi, "cq_ci %u, want %u (pending CQE not consumed)",
		      txq->cq_ci, hw_cq_pi);
		CHECK(*cq_dbrec == rte_cpu_to_be_32(txq->cq_ci), "CQ doorbell record %08x",
		      rte_be_to_cpu_32(*cq_dbrec));
		CHECK(txq->wqe_pi == rte_be_to_cpu_16(txq->cqes[(hw_cq_pi - 1) & txq->cqe_m].wqe_counter),
		      "wqe_pi %u not updated from the CQE", txq->wqe_pi);
	} else {
		CHECK(txq->cq_ci == b->cq_ci && txq->wqe_pi == b->wqe_pi,
		      "completion state moved without a CQE");
	}
	/* The WQEs: eMPW sessions of inline packets, 80 bytes per 64-byte
	 * packet (4-byte bcount + 64 data, aligned to 16). */
	while (left) {
		unsigned n = RTE_MIN(left, room0 / tlen);
		unsigned ds = n * tlen / MLX5_WSEG_SIZE + 2;
		uint32_t flags = ring_be32(idx, 8);

		if (!pkts_per_wqe_first)
			pkts_per_wqe_first = n;
		CHECK(ring_be32(idx, 0) == ((uint32_t)(uint16_t)idx << 8 | MLX5_OPCODE_ENHANCED_MPSW),
		      "WQE %u ctrl opcode %08x, want eMPW 0x29 with index", idx, ring_be32(idx, 0));
		CHECK(ring_be32(idx, 4) == (SQN << 8 | ds), "WQE %u ctrl qpn_ds %08x, want %08x",
		      idx, ring_be32(idx, 4), SQN << 8 | ds);
		CHECK(flags == MLX5_COMP_ONLY_FIRST_ERR << MLX5_COMP_MODE_OFFSET ||
		      (left == n && flags == MLX5_COMP_ALWAYS << MLX5_COMP_MODE_OFFSET),
		      "WQE %u ctrl flags %08x", idx, flags);
		CHECK(ring_be32(idx, 12) == 0, "WQE %u ctrl misc", idx);
		for (i = 16; i < 32; i++)
			CHECK(ring_byte(idx, i) == 0, "WQE %u eth segment byte %u = %02x", idx, i,
			      ring_byte(idx, i));
		for (k = 0; k < n; k++, p++) {
			unsigned off = 32 + k * tlen;

			CHECK(ring_be32(idx, off) == (H_PKT_LEN | MLX5_ETH_WQE_DATA_INLINE),
			      "WQE %u packet %u bcount %08x", idx, k, ring_be32(idx, off));
			for (i = 0; i < H_PKT_LEN; i++)
				CHECK(ring_byte(idx, off + 4 + i) == pkt_byte(seq0 + p, i),
				      "WQE %u packet %u (burst packet %u) inline byte %u = %02x, want %02x",
				      idx, k, p, i, ring_byte(idx, off + 4 + i), pkt_byte(seq0 + p, i));
		}
		last_idx = idx;
		idx += (ds + 3) / 4;
		left -= n;
		nwqe++;
		nb_wqe_checked++;
	}
	CHECK(txq->wqe_ci == (uint16_t)idx, "wqe_ci %u, want %u", txq->wqe_ci, (uint16_t)idx);
	/* Doorbell record and the 8-byte doorbell (first 8 bytes of the last
	 * WQE's ctrl segment) at the UAR register; nothing else on the page. */
	CHECK(*txq->qp_db == rte_cpu_to_be_32(txq->wqe_ci), "SQ doorbell record %08x, want %08x",
	      rte_be_to_cpu_32(*txq->qp_db), txq->wqe_ci);
	CHECK(sq_dbrec[0] == 0, "RQ doorbell record written");
	memcpy(&db, uar_page + 0x800, 8);
	CHECK(db == *(uint64_t *)(txq->wqes + (last_idx & txq->wqe_m)),
	      "UAR doorbell %016llx is not the last WQE's ctrl segment", (unsigned long long)db);
	for (i = 0; i < 4096; i++)
		if (i < 0x800 || i >= 0x808)
			CHECK(uar_page[i] == 0xa5, "UAR page byte %#x written", i);
	/* Completion request: wqe_ci - wqe_comp >= wqe_thres (elts never move:
	 * every packet is inlined). */
	comp_req = (uint16_t)(txq->wqe_ci - b->wqe_comp) >= txq->wqe_thres;
	CHECK(txq->elts_head == b->elts_head && txq->elts_comp == b->elts_comp &&
	      txq->elts_tail == b->elts_tail, "elts moved (a packet was not inlined?)");
	if (comp_req) {
		CHECK(txq->cq_pi == (uint16_t)(b->cq_pi + 1) && txq->wqe_comp == txq->wqe_ci,
		      "completion request not made");
		CHECK(ring_be32(last_idx, 8) == MLX5_COMP_ALWAYS << MLX5_COMP_MODE_OFFSET,
		      "last WQE has no CQ_UPDATE");
		CHECK(txq->fcqs[b->cq_pi & txq->cqe_m] == txq->elts_head, "fcqs entry");
	} else {
		CHECK(txq->cq_pi == b->cq_pi && txq->wqe_comp == b->wqe_comp,
		      "unexpected completion request");
		CHECK(ring_be32(last_idx, 8) == MLX5_COMP_ONLY_FIRST_ERR << MLX5_COMP_MODE_OFFSET,
		      "last WQE flags");
	}
	/* Counters (MLX5_PMD_SOFT_COUNTERS) */
	CHECK(txq->stats.opackets == b->opackets + BURST && txq->stats.obytes == b->obytes + BURST * H_PKT_LEN,
	      "soft counters");
	/* The inlined mbufs went back to the lcore cache (no refcnt left). */
	if (steady) {
		CHECK(backend_calls == b->backend_calls, "mempool backend called in the burst");
		CHECK(c->len == b->cache_len + BURST, "lcore cache len %u, want %u", c->len,
		      b->cache_len + BURST);
		for (p = 0; p < BURST; p++)
			CHECK(c->objs[b->cache_len + p] == pkts[p], "mbuf %u not freed to the cache", p);
	}
	for (p = 0; p < BURST; p++)
		CHECK(rte_mbuf_refcnt_read(pkts[p]) == 1 && pkts[p]->next == NULL &&
		      pkts[p]->nb_segs == 1, "freed mbuf %u state", p);
	/* The NIC: a CQE for the WQE that asked for one. */
	if (comp_req) {
		volatile struct mlx5_cqe *cqe = &txq->cqes[hw_cq_pi & txq->cqe_m];
		uint8_t owner = !!(hw_cq_pi & txq->cqe_s);

		cqe->wqe_counter = rte_cpu_to_be_16((uint16_t)last_idx);
		cqe->sop_drop_qpn = rte_cpu_to_be_32(MLX5_OPCODE_ENHANCED_MPSW << 24 | SQN);
		cqe->byte_cnt = 0;
		rte_compiler_barrier();
		cqe->op_own = MLX5_CQE_REQ << 4 | owner;
		hw_cq_pi++;
		nb_cqe_written++;
	}
	/* Room: the PMD's own free-WQE accounting must never be short. */
	CHECK((uint16_t)(txq->wqe_ci - txq->wqe_pi) <= txq->wqe_s - 64, "SQ nearly full");
}

static struct rte_mbuf *pkts[BURST];

/* One burst, checked. */
static void checked_burst(int steady)
{
	struct snap b;
	uint16_t ret;

	make_burst(pkts, pkt_seq);
	snap_take(&b);
	ret = measured_tx_burst(pkts, BURST);
	measured_units += BURST;
	check_burst(pkts, &b, ret, pkt_seq, steady);
	pkt_seq += BURST;
}

/* Self-test of the checks: in a child process, run one burst, corrupt one
 * thing the PMD wrote, and run the checks; the child must abort. */
static void selftest(void)
{
	static const char *what[] = {
		"first packet inline byte 0", "last packet inline byte 63",
		"ctrl opcode of first WQE", "ds count of last WQE",
		"SQ doorbell record", "UAR doorbell value", "bcount of packet 5",
		"a freed mbuf missing from the cache",
	};
	static const char *what_ptr[] = {
		"lkey of packet 0", "address of packet 31", "ctrl opcode",
		"ds count", "SQ doorbell record", "UAR doorbell value",
		"bcount of packet 5", "a completed mbuf missing from the cache",
		"elts entry of packet 31",
	};
	const char **w = ptr_mode ? what_ptr : what;
	unsigned nt = ptr_mode ? sizeof(what_ptr) / sizeof(what_ptr[0]) : sizeof(what) / sizeof(what[0]);
	unsigned t;

	for (t = 0; t < nt; t++) {
		pid_t pid;
		int st;

		fflush(stdout);
		pid = fork();
		CHECK(pid >= 0, "fork");
		if (pid == 0) {
			struct snap b;
			uint16_t ret;
			uint32_t i0, ilast;

			freopen("/dev/null", "w", stderr);
			make_burst(pkts, pkt_seq);
			snap_take(&b);
			ret = measured_tx_burst(pkts, BURST);
			i0 = b.wqe_ci & txq->wqe_m;
			ilast = (txq->wqe_ci - 13) & txq->wqe_m;	/* 3rd WQE: 10 packets, 13 WQEBBs */
			if (ptr_mode) {
#define w0(off) (((uint8_t *)txq->wqes)[((size_t)i0 * 64 + (off)) % ((size_t)txq->wqe_s * 64)])

				switch (t) {
				case 0: w0(32 + 4 + 3) ^= 1; break;
				case 1: w0(32 + 31 * 16 + 15) ^= 0x40; break;
				case 2: w0(3) = 0x0a; break;
				case 3: w0(7) ^= 1; break;
				case 4: *txq->qp_db ^= rte_cpu_to_be_32(1); break;
				case 5: uar_page[0x800] ^= 1; break;
				case 6: w0(32 + 5 * 16 + 3) ^= 1; break;
				case 7: lcore_cache()->objs[b.cache_len + 31] = NULL; break;
				case 8: txq->elts[(uint16_t)(txq->elts_head - 1) & txq->elts_m] = NULL; break;
				}
#undef w0
				check_burst(pkts, &b, ret, pkt_seq, 1);
				_exit(0);
			}
			switch (t) {
			case 0: ((uint8_t *)txq->wqes)[(size_t)i0 * 64 + 32 + 4] ^= 1; break;
			case 1: ((uint8_t *)txq->wqes)[((size_t)ilast * 64 + 32 + 9 * 80 + 4 + 63) %
					((size_t)txq->wqe_s * 64)] ^= 0x80; break;
			case 2: ((uint8_t *)txq->wqes)[(size_t)i0 * 64 + 3] = 0x0a; break;
			case 3: ((uint8_t *)txq->wqes)[(size_t)ilast * 64 + 7] ^= 1; break;
			case 4: *txq->qp_db ^= rte_cpu_to_be_32(1); break;
			case 5: uar_page[0x800] ^= 1; break;
			case 6: ((uint8_t *)txq->wqes)[((size_t)i0 * 64 + 32 + 5 * 80 + 3) %
					((size_t)txq->wqe_s * 64)] ^= 1; break;
			case 7: lcore_cache()->objs[b.cache_len + 31] = NULL; break;
			}
			check_burst(pkts, &b, ret, pkt_seq, 1);
			_exit(0);
		}
		CHECK(waitpid(pid, &st, 0) == pid, "waitpid");
		CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT,
		      "selftest: corrupting %s was NOT detected", w[t]);
		printf("selftest: corrupting %s -> check failed as it must\n", w[t]);
	}
}

/* A round of `bursts` bursts; returns TSC cycles inside the windows. Every
 * burst is checked (outside the window). */
static uint64_t timed_round(long bursts)
{
	uint64_t sum = 0;
	long i;

	for (i = 0; i < bursts; i++) {
		struct snap b;
		uint64_t t0, t1;
		uint16_t ret;

		make_burst(pkts, pkt_seq);
		snap_take(&b);
		t0 = tsc_start();
		ret = measured_tx_burst(pkts, BURST);
		t1 = tsc_stop();
		check_burst(pkts, &b, ret, pkt_seq, 1);
		pkt_seq += BURST;
		sum += t1 - t0 > timer_overhead ? t1 - t0 - timer_overhead : 0;
	}
	return sum;
}

static const struct {
	const char *name;
	int fast_free;		/* RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE */
	unsigned nb_txd;	/* nb_tx_desc */
	int ptr;		/* inlining off (fewer than txqs_min_inline Tx queues) */
} scen_tab[] = {
	{ "empw_inline64_burst32", 0, 1024, 0 },
	{ "empw_inline64_burst32_fastfree", 1, 1024, 0 },
	{ "empw_inline64_burst32_txd64", 0, 64, 0 },
	{ "empw_inline64_burst32_txd64_fastfree", 1, 64, 0 },
	{ "empw_ptr64_burst32", 0, 1024, 1 },
	{ "empw_ptr64_burst32_fastfree", 1, 1024, 1 },
};

static const char *fn_name(void *f)
{
	if (f == (void *)mlx5_tx_burst_i_empw)
		return "mlx5_tx_burst_i_empw";
	if (f == (void *)mlx5_tx_burst_md_empw)
		return "mlx5_tx_burst_md_empw";
	if (f == (void *)mlx5_tx_burst_none_empw)
		return "mlx5_tx_burst_none_empw";
	return "(other)";
}

int main(int argc, char **argv)
{
	const char *name = argc > 1 ? argv[1] : "";
	int timing = !(argc > 2 && strcmp(argv[2], "count") == 0);
	long bursts = argc > 3 ? atol(argv[3]) : 2000;
	int rounds = argc > 4 ? atoi(argv[4]) : 15;
	double per[101], ghz0, ghz1;
	unsigned k;
	int r;

	if (strcmp(name, "select") == 0)
		log_verbose = 1;
	for (k = 0; k < sizeof(scen_tab) / sizeof(scen_tab[0]); k++)
		if (strcmp(name, scen_tab[k].name) == 0)
			break;
	if (k == sizeof(scen_tab) / sizeof(scen_tab[0]) && !log_verbose) {
		fprintf(stderr, "usage: %s SCENARIO|select [ptr]|... [time|count|selftest] [BURSTS] [ROUNDS]\n", argv[0]);
		return 1;
	}
	if (rounds < 1 || rounds > 101)
		rounds = 15;
	if (timing && !log_verbose) {
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET(sched_getcpu(), &set);
		sched_setaffinity(0, sizeof(set), &set);
	}
	ptr_mode = log_verbose ? argc > 2 && strcmp(argv[2], "ptr") == 0 : scen_tab[k].ptr;
	fabricate(log_verbose ? 0 : scen_tab[k].fast_free, log_verbose ? 1024 : scen_tab[k].nb_txd);
	/* The PMD's own selection (mlx5_tx.c mlx5_select_tx_function), as
	 * mlx5_dev_start -> mlx5_select_tx_function does it. */
	{
		struct rte_eth_dev *dev = &rte_eth_devices[0];

		burst_fn = (uint16_t (*)(void *, struct rte_mbuf **, uint16_t))mlx5_select_tx_function(dev);
		burst_name = fn_name((void *)burst_fn);
		void *want = ptr_mode ? (void *)mlx5_tx_burst_none_empw : (void *)mlx5_tx_burst_i_empw;

		CHECK(burst_fn == want, "mlx5_select_tx_function chose %p (%s), not %s",
		      (void *)burst_fn, burst_name, fn_name(want));
	}
	if (log_verbose) {
		printf("selected=%s inlen_send=%u inlen_empw=%u inlen_mode=%u elts_s=%u wqe_s=%u "
		       "cqe_s=%u wqe_thres=%u\n",
		       burst_name, txq->inlen_send, txq->inlen_empw, txq->inlen_mode, txq->elts_s,
		       txq->wqe_s, txq->cqe_s, txq->wqe_thres);
		return 0;
	}

	/* Preflight: enough bursts to wrap the SQ ring twice and the CQ ring
	 * once, with full checks; the first alloc fills the lcore cache from
	 * the backend. */
	{
		long bbs = ptr_mode ? 9 : 43;	/* WQEBBs per burst */
		long per_cqe = ptr_mode ? 1 : txq->wqe_thres / bbs + 1;
		long pre = RTE_MAX(2L * txq->wqe_s / bbs, (txq->cqe_s + 2L) * per_cqe), i;

		for (i = 0; i < pre; i++)
			checked_burst(i >= 2);
		CHECK(nb_cqe_written > txq->cqe_s, "preflight wrote only %lu CQEs", nb_cqe_written);
	}
	if (argc > 2 && strcmp(argv[2], "selftest") == 0) {
		selftest();
		printf("%s selftest checks=OK\n", name);
		return 0;
	}
	if (!timing) {
		long i;

		for (i = 0; i < bursts; i++)
			checked_burst(1);
		printf("%s count bursts=%ld measured_units=%ld (packets) routine=%s "
		       "wqe_s=%u cqe_s=%u wqe_thres=%u wqes_checked=%lu cqes_written=%lu "
		       "pkts_per_wqe=%u checks=OK\n",
		       name, bursts, measured_units, burst_name, txq->wqe_s, txq->cqe_s,
		       txq->wqe_thres, nb_wqe_checked, nb_cqe_written, pkts_per_wqe_first);
		return 0;
	}
	calibrate(20001);
	ghz0 = core_ghz();
	timed_round(bursts);
	for (r = 0; r < rounds; r++)
		per[r] = (double)timed_round(bursts) / (bursts * BURST) / tsc_per_ns;
	ghz1 = core_ghz();
	qsort(per, rounds, sizeof(per[0]), cmp_dbl);
	printf("%s time bursts/round=%ld rounds=%d ns/packet median=%.2f min=%.2f max=%.2f "
	       "(tsc %.4f GHz, timer overhead %llu cycles subtracted per window, "
	       "dec/jnz core clock %.2f/%.2f GHz before/after) routine=%s checks=OK\n",
	       name, bursts, rounds, per[rounds / 2], per[0], per[rounds - 1], tsc_per_ns,
	       (unsigned long long)timer_overhead, ghz0, ghz1, burst_name);
	return 0;
}
