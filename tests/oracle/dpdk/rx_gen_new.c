/*
 * Random-ring oracle, Rx side, for a RECENT DPDK built from source
 * (DPDK 26.07 + 4 commits, 38f72e500b, VERSION 26.11.0-rc0): the mlx5 Rx
 * burst objects net_mlx5_mlx5_rx.c.o (mlx5_rx_burst, mlx5_rx_burst_mprq),
 * net_mlx5_mlx5_rxtx_vec.c.o (mlx5_rx_burst_vec, mlx5_rx_burst_mprq_vec with
 * the SSE helpers of mlx5_rxtx_vec_sse.h) and net_mlx5_mlx5_rxtx.c.o
 * (mlx5_ptype_table), compiled by that tree's own meson/ninja build
 * (build-rx-new.sh), polling random CQ rings that a ConnectX could write in
 * either CQE-compression layout:
 *   basic    (cqe_comp_layout 0): title CQE with format 3 and byte_cnt =
 *            minis, mini arrays at title+1, +8, +16, ... (as rx_gen.c);
 *   enhanced (cqe_comp_layout 1): the previous regular CQE is the title;
 *            each compressed CQE holds 1..7 minis from its byte 0, op_own
 *            [7:4] = minis - 1, [3:2] = 3, and stands for that many CQ
 *            indices; ownership by the validity iteration count (byte 62
 *            = (index >> log2 ring size) & 0xff), PRM-FACTS 9.2 and 10.5.
 * Adapted from rx_gen.c (the DPDK 22.11 harness in this directory): queue
 * fabrication and output are the same; the layout argument, the enhanced
 * device model and the 24-bit rxq->cq_ci handling are new.  See
 * RX-ENHANCED.md.
 *
 * Usage: rx_gen_new SEED PATH FORMAT LOG_CQE_N CI0 MARK ROUNDS [LAYOUT]
 *        rx_gen_new replay PATH FORMAT LOG_CQE_N CI MARK [LAYOUT] < ring.hex
 *        rx_gen_new tables
 * PATH: scalar | vec (cyclic RQ) | mprq | mprq-vec (striding RQ).
 * FORMAT: hash | csum | ftag-stridx | csum-stridx | l34h-stridx.
 * LAYOUT: basic (default) | enhanced.
 * (A replayed enhanced ring starts with DPDK holding no title: start it at
 * a regular CQE.)
 *
 * One JSON line per ring ("round"): the ring bytes as the NIC left them
 * just before DPDK polled (hex), the consumer index DPDK started from, and
 * per returned mbuf what DPDK derived, plus DPDK's cq_ci afterwards.
 * RX_GEN_DEBUG=1 prints the queue counters after every burst (stderr).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdarg.h>

#include "mlx5_rx.h"
#include "mlx5_rxtx.h"
#include "mlx5_malloc.h"

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

/* ---- what the PMD objects reference outside themselves (as rx_harness.c) */
RTE_DEFINE_PER_LCORE(unsigned int, _lcore_id) = 0;
RTE_DEFINE_PER_LCORE(int, _rte_errno);
struct rte_eth_dev rte_eth_devices[RTE_MAX_ETHPORTS];
struct rte_mempool_ops_table rte_mempool_ops_table;
int mlx5_logtype;
uint64_t rte_flow_dynf_metadata_mask;
int32_t rte_flow_dynf_metadata_offs = -1;

int rte_log(uint32_t level, uint32_t logtype, const char *format, ...)
{
	(void)level; (void)logtype; (void)format;
	return 0;
}

uint16_t rte_vect_get_max_simd_bitwidth(void)
{
	return RTE_VECT_SIMD_256;
}

static struct mlx5_rxq_ctrl *rxq_ctrl;
static struct mlx5_rxq_data *rxq;

struct mlx5_rxq_data *mlx5_rxq_data_get(struct rte_eth_dev *dev, uint16_t idx)
{
	(void)dev;
	return idx == 0 ? rxq : NULL;
}

void *mlx5_malloc(uint32_t flags, size_t size, unsigned int align, int socket)
{
	void *p;

	(void)flags; (void)socket;
	if (align < 64)
		align = 64;
	p = aligned_alloc(align, (size + align - 1) / align * align);
	if (p)
		memset(p, 0, size);
	return p;
}

void mlx5_free(void *addr)
{
	free(addr);
}

/* ---- mempool backend: a LIFO stack (as rx_harness.c) ------------------ */
#define NB_MBUF 4096
static void *stack_objs[NB_MBUF];
static unsigned stack_len;

static int stack_enqueue(struct rte_mempool *m, void * const *objs, unsigned n)
{
	(void)m;
	CHECK(stack_len + n <= NB_MBUF, "mempool backend overflow");
	memcpy(&stack_objs[stack_len], objs, n * sizeof(void *));
	stack_len += n;
	return 0;
}

static int stack_dequeue(struct rte_mempool *m, void **objs, unsigned n)
{
	(void)m;
	if (stack_len < n)
		return -ENOBUFS;
	stack_len -= n;
	memcpy(objs, &stack_objs[stack_len], n * sizeof(void *));
	return 0;
}

static unsigned stack_count(const struct rte_mempool *m)
{
	(void)m;
	return stack_len;
}

/* ---- random numbers (splitmix64) -------------------------------------- */
static uint64_t rng_state;

static uint64_t rnd(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint32_t rnd_below(uint32_t n)	/* 0 .. n-1 */
{
	return (uint32_t)(rnd() % n);
}

static uint32_t rnd_range(uint32_t lo, uint32_t hi)	/* lo .. hi */
{
	return lo + rnd_below(hi - lo + 1);
}

/* ---- the fabricated queue --------------------------------------------- */
#define BUF_LEN 2048		/* DATA_LEN of every posted mbuf */
#define MBUF_DATAROOM (BUF_LEN + RTE_PKTMBUF_HEADROOM)
#define POOL_CACHE 250
#define H_LKEY 0x5a5a02u
#define CQ_PAD_SLOTS 64		/* zeroed memory after the ring (vector loads) */

static struct rte_mempool *mp;
static uint8_t *mbuf_mem;
static size_t mbuf_mem_sz;
static uint32_t mr_dev_gen;
static struct mr_cache_entry bh_table[4];
static uint16_t (*burst_fn)(void *, struct rte_mbuf **, uint16_t);
static int vec_mode;
/* Striding RQ (MPRQ), scalar mlx5_rx_burst_mprq: log2 of the strides per
 * WQE, of the stride size, of the WQEs in the RQ (0: cyclic RQ). */
static int mprq;
static unsigned log_strd_num, log_strd_sz, log_wq_n;
static uint8_t *mprq_mem;
static size_t mprq_mem_sz, mprq_buf_sz;
static unsigned log_n;		/* log2 of CQ slots (= RQ WQEs) */
static unsigned mcqe_format;	/* MLX5_CQE_RESP_FORMAT_* */
static int enh;			/* cqe_comp_layout: 0 basic, 1 enhanced */

static void *zalloc(size_t align, size_t sz)
{
	void *p = aligned_alloc(align, (sz + align - 1) / align * align);

	CHECK(p, "oom");
	memset(p, 0, sz);
	return p;
}

/*
 * Striding RQ as mlx5_rxq_new + mlx5_mprq_alloc_mp leave it
 * (mlx5_rxq.c): RTE_BIT32(log_strd_num) strides of RTE_BIT32(log_strd_sz)
 * bytes per WQE, one struct mlx5_mprq_buf per WQE (header, a shinfo per
 * stride, headroom, then the strides: mlx5_mprq_buf_addr), WQEs of
 * struct mlx5_wqe_mprq.  mprq_max_memcpy_len covers every packet, so
 * mprq_buf_to_pkt always copies into a fresh mbuf (mlx5_rx.h:507-514) and
 * no buffer is ever attached, shared or replaced; a spare buffer sits in
 * mprq_repl so that mprq_buf_replace never asks the (absent) MPRQ mempool.
 * The buffers get their own MR cache entry (lkey H_LKEY + 1).
 */
static void fabricate_mprq(void)
{
	const unsigned strd_n = 1u << log_strd_num, wq_n = 1u << log_wq_n;
	unsigned i;

	rxq->log_strd_num = log_strd_num;
	rxq->log_strd_sz = log_strd_sz;
	rxq->strd_shift_en = 0;
	rxq->strd_scatter_en = 0;
	rxq->mprq_max_memcpy_len = UINT16_MAX;
	mprq_buf_sz = RTE_ALIGN_CEIL(sizeof(struct mlx5_mprq_buf) +
		strd_n * sizeof(struct rte_mbuf_ext_shared_info) + RTE_PKTMBUF_HEADROOM +
		((size_t)strd_n << log_strd_sz), RTE_CACHE_LINE_SIZE);
	mprq_mem_sz = mprq_buf_sz * (wq_n + 1);
	mprq_mem = zalloc(RTE_CACHE_LINE_SIZE, mprq_mem_sz);
	rxq->mprq_bufs = zalloc(64, sizeof(void *) * wq_n);
	for (i = 0; i <= wq_n; i++) {
		struct mlx5_mprq_buf *b = (struct mlx5_mprq_buf *)(mprq_mem + i * mprq_buf_sz);

		b->refcnt = 1;
		if (i < wq_n)
			(*rxq->mprq_bufs)[i] = b;
		else
			rxq->mprq_repl = b;
	}
	rxq->wqes = zalloc(4096, sizeof(struct mlx5_wqe_mprq) * wq_n);
	if (vec_mode) {
		/*
		 * Vector MPRQ (mlx5_rx_burst_mprq_vec): an mbuf per stride in
		 * elts (rxq_alloc_elts_sprq, mlx5_rxq.c:140-143), the 4
		 * fake_mbuf pointers after them, rq_repl_thresh from desc_n =
		 * strides + 4 (mlx5_rxq.c:1972); mlx5_rxq_initialize sets
		 * elts_ci = all strides, rq_pi = 0.
		 */
		const unsigned elts_n = wq_n * strd_n;
		struct rte_mbuf *mi = &rxq->fake_mbuf;

		rxq->elts = zalloc(64, sizeof(void *) * (elts_n + MLX5_VPMD_DESCS_PER_LOOP));
		for (i = 0; i < elts_n; i++) {
			struct rte_mbuf *b = rte_pktmbuf_alloc(mp);

			CHECK(b, "alloc");
			b->port = 0;
			(*rxq->elts)[i] = b;
		}
		mi->data_off = RTE_PKTMBUF_HEADROOM;
		rte_mbuf_refcnt_set(mi, 1);
		mi->nb_segs = 1;
		mi->port = 0;
		rte_compiler_barrier();
		rxq->mbuf_initializer = *(rte_xmm_t *)&mi->rearm_data;
		for (i = 0; i < MLX5_VPMD_DESCS_PER_LOOP; i++)
			(*rxq->elts)[elts_n + i] = &rxq->fake_mbuf;
		rxq->rq_repl_thresh = MLX5_VPMD_RXQ_RPLNSH_THRESH(elts_n + MLX5_VPMD_DESCS_PER_LOOP);
	}
	rxq->mr_ctrl.cache[1].start = (uintptr_t)mprq_mem;
	rxq->mr_ctrl.cache[1].end = (uintptr_t)mprq_mem + mprq_mem_sz;
	rxq->mr_ctrl.cache[1].lkey = rte_cpu_to_be_32(H_LKEY + 1);
	rxq->mr_ctrl.head = 2;
}

static void fabricate(int mark)
{
	struct rte_mempool_cache *caches;
	struct mlx5_priv *priv;
	struct rte_eth_dev_data *dev_data;
	struct mlx5_rxq_priv *rxq_priv;
	unsigned i, desc_n, q_n = 1u << log_n;
	uint8_t *mem;

	/* mempool (rx_harness.c) */
	rte_mempool_ops_table.num_ops = 1;
	snprintf(rte_mempool_ops_table.ops[0].name, RTE_MEMPOOL_OPS_NAMESIZE, "oracle_stack");
	rte_mempool_ops_table.ops[0].enqueue = stack_enqueue;
	rte_mempool_ops_table.ops[0].dequeue = stack_dequeue;
	rte_mempool_ops_table.ops[0].get_count = stack_count;
	/* rte_mempool_create_empty's layout (mempool/rte_mempool.c:944-945):
	 * the per-lcore caches right after the header, then the private
	 * area, which rte_mempool_get_priv() finds there and which
	 * rte_pktmbuf_alloc now reads (rte_pktmbuf_priv_flags). */
	mp = zalloc(RTE_CACHE_LINE_SIZE, RTE_MEMPOOL_HEADER_SIZE(mp, POOL_CACHE) +
		    sizeof(struct rte_pktmbuf_pool_private));
	snprintf(mp->name, sizeof(mp->name), "oracle_pool");
	mp->size = NB_MBUF;
	mp->cache_size = POOL_CACHE;
	mp->elt_size = sizeof(struct rte_mbuf) + MBUF_DATAROOM;
	mp->header_size = RTE_ALIGN_CEIL(sizeof(struct rte_mempool_objhdr), RTE_MEMPOOL_ALIGN);
	mp->private_data_size = sizeof(struct rte_pktmbuf_pool_private);
	mp->populated_size = NB_MBUF;
	caches = (struct rte_mempool_cache *)RTE_PTR_ADD(mp, RTE_MEMPOOL_HEADER_SIZE(mp, 0));
	for (i = 0; i < RTE_MAX_LCORE; i++) {
		caches[i].size = POOL_CACHE;
		caches[i].flushthresh = POOL_CACHE * 3 / 2;
	}
	mp->local_cache = caches;
	((struct rte_pktmbuf_pool_private *)rte_mempool_get_priv(mp))->mbuf_data_room_size = MBUF_DATAROOM;
	mbuf_mem_sz = (size_t)NB_MBUF * (mp->header_size + mp->elt_size);
	mem = mbuf_mem = zalloc(RTE_CACHE_LINE_SIZE, mbuf_mem_sz);
	for (i = 0; i < NB_MBUF; i++) {		/* rte_pktmbuf_init */
		struct rte_mbuf *m = (struct rte_mbuf *)(mem +
			(size_t)i * (mp->header_size + mp->elt_size) + mp->header_size);

		m->buf_addr = (char *)(m + 1);
		m->buf_iova = (rte_iova_t)(uintptr_t)m->buf_addr;
		m->buf_len = MBUF_DATAROOM;
		m->data_off = RTE_PKTMBUF_HEADROOM;
		m->pool = mp;
		m->nb_segs = 1;
		m->port = RTE_MBUF_PORT_INVALID;
		rte_mbuf_refcnt_set(m, 1);
		stack_objs[stack_len++] = m;
	}

	/* the port */
	priv = zalloc(64, sizeof(*priv));
	dev_data = zalloc(64, sizeof(*dev_data));
	priv->config.rx_vec_en = vec_mode;
	priv->config.cqe_comp = 1;
	priv->config.cqe_comp_fmt = mcqe_format;
	priv->config.enh_cqe_comp = enh;
	priv->rxqs_n = 1;
	/* mlx5_shared_rq_enabled (mlx5_rx.h:616-621), called by the vector
	 * support checks, reads priv->sh->shared_rxqs: an empty list */
	priv->sh = zalloc(64, sizeof(*priv->sh));
	LIST_INIT(&priv->sh->shared_rxqs);
	priv->dev_data = dev_data;
	dev_data->dev_private = priv;
	dev_data->nb_rx_queues = 1;
	dev_data->dev_conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
	dev_data->dev_conf.rxmode.offloads = RTE_ETH_RX_OFFLOAD_CHECKSUM |
					     RTE_ETH_RX_OFFLOAD_VLAN_STRIP;
	rte_eth_devices[0].data = dev_data;

	/* the Rx queue (mlx5_rxq_new + rxq_alloc_elts_sprq + DevX CQ) */
	desc_n = q_n + vec_mode * MLX5_VPMD_DESCS_PER_LOOP;
	rxq_ctrl = zalloc(RTE_CACHE_LINE_SIZE, sizeof(*rxq_ctrl) + desc_n * sizeof(struct rte_mbuf *));
	rxq = &rxq_ctrl->rxq;
	rxq_priv = zalloc(64, sizeof(*rxq_priv));
	rxq_priv->ctrl = rxq_ctrl;
	rxq_priv->priv = priv;
	LIST_INIT(&rxq_ctrl->owners);
	LIST_INSERT_HEAD(&rxq_ctrl->owners, rxq_priv, owner_entry);
	rxq->mp = mp;
	rxq->rxseg_n = 1;
	rxq->rxseg[0].mp = mp;
	rxq->rxseg[0].length = BUF_LEN;
	rxq->rxseg[0].offset = RTE_PKTMBUF_HEADROOM;
	rxq->csum = 1;			/* RTE_ETH_RX_OFFLOAD_CHECKSUM */
	rxq->vlan_strip = 1;		/* RTE_ETH_RX_OFFLOAD_VLAN_STRIP */
	rxq->rss_hash = 1;		/* mq_mode RSS with rss_hf != 0 */
	rxq->mark = !!mark;		/* a flow with a MARK action exists */
	rxq->mark_flag = RTE_MBUF_F_RX_FDIR_ID;	/* mlx5_flow.c:1875 (no restore-info flag) */
	rxq->crc_present = 0;
	rxq->hw_timestamp = 0;		/* compression is off with timestamps */
	rxq->lro = 0;			/* ... and with LRO (mlx5_devx.c) */
	rxq->elts_n = mprq ? log_wq_n : log_n;
	rxq->sges_n = 0;
	rxq->rq_repl_thresh = MLX5_VPMD_RXQ_RPLNSH_THRESH(desc_n);
	rxq->elts = (struct rte_mbuf *(*)[])(rxq_ctrl + 1);
	rxq->flow_meta_offset = -1;
	rxq->mr_ctrl.dev_gen_ptr = &mr_dev_gen;
	rxq->mr_ctrl.cur_gen = mr_dev_gen;
	rxq->mr_ctrl.head = 1;
	rxq->mr_ctrl.cache[0].start = (uintptr_t)mbuf_mem;
	rxq->mr_ctrl.cache[0].end = (uintptr_t)mbuf_mem + mbuf_mem_sz;
	rxq->mr_ctrl.cache[0].lkey = rte_cpu_to_be_32(H_LKEY);
	bh_table[0].lkey = UINT32_MAX;
	bh_table[1] = rxq->mr_ctrl.cache[0];
	rxq->mr_ctrl.cache_bh.table = (struct mr_cache_entry (*)[])bh_table;
	rxq->mr_ctrl.cache_bh.len = 2;
	rxq->mr_ctrl.cache_bh.size = 4;
	for (i = 0; i < (mprq ? 0 : q_n); i++) {
		struct rte_mbuf *b = rte_pktmbuf_alloc(mp);

		CHECK(b, "alloc");
		b->port = 0;
		b->data_len = BUF_LEN;
		b->pkt_len = BUF_LEN;
		(*rxq->elts)[i] = b;
	}
	if (mlx5_rxq_check_vec_support(rxq) > 0) {
		struct rte_mbuf *mi = &rxq->fake_mbuf;

		mi->data_off = RTE_PKTMBUF_HEADROOM;
		rte_mbuf_refcnt_set(mi, 1);
		mi->nb_segs = 1;
		mi->port = 0;
		rte_compiler_barrier();
		rxq->mbuf_initializer = *(rte_xmm_t *)&mi->rearm_data;
		for (i = 0; i < MLX5_VPMD_DESCS_PER_LOOP; i++)
			(*rxq->elts)[q_n + i] = &rxq->fake_mbuf;
	}
	/*
	 * CQ: mlx5_rxq_create_devx_cq_resources (mlx5_devx.c:374-411) sets
	 * mcqe_format from the cqe_comp_fmt devarg and byte_mask =
	 * MLX5_LEN_WITH_MARK_MASK for FTAG_STRIDX.  (For a cyclic RQ it
	 * turns a HASH/CSUM request into HASH; the burst routines read only
	 * rxq->mcqe_format, so CSUM is set here directly, which is what a CQ
	 * created with the CSUM mini format would need.)  The CQ has as many
	 * slots as the RQ (the scalar set-up doubles it; the scalar burst
	 * does not depend on that).
	 */
	rxq->mcqe_format = mcqe_format;
	/* mlx5_devx.c:448-449: the layout of the CQ context */
	rxq->cqe_comp_layout = enh;
	rxq->byte_mask = mcqe_format == MLX5_CQE_RESP_FORMAT_FTAG_STRIDX ?
			 MLX5_LEN_WITH_MARK_MASK : UINT32_MAX;
	rxq->cqe_n = log_n;
	rxq->cqes = zalloc(4096, sizeof(struct mlx5_cqe) * (q_n + CQ_PAD_SLOTS));
	rxq->cq_db = zalloc(64, 64);
	rxq->cqn = 0x77;
	rxq->wqes = zalloc(4096, 16 * q_n);
	rxq->rq_db = zalloc(64, 64);
	if (mprq)
		fabricate_mprq();
	CHECK(mlx5_rxq_initialize(rxq) == 0, "mlx5_rxq_initialize");
	/* mlx5_select_rx_function: MPRQ if enabled, else vectorised iff
	 * mlx5_check_vec_rx_support */
	if (mprq) {
		burst_fn = mlx5_check_vec_rx_support(&rte_eth_devices[0]) > 0 ?
			   mlx5_rx_burst_mprq_vec : mlx5_rx_burst_mprq;
		CHECK(burst_fn == (vec_mode ? mlx5_rx_burst_mprq_vec : mlx5_rx_burst_mprq),
		      "selection");
		return;
	}
	burst_fn = mlx5_check_vec_rx_support(&rte_eth_devices[0]) > 0 ?
		   mlx5_rx_burst_vec : mlx5_rx_burst;
	CHECK(burst_fn == (vec_mode ? mlx5_rx_burst_vec : mlx5_rx_burst), "selection");
}

/* ---- device model ------------------------------------------------------ */
static uint32_t hw_pi;		/* next CQ index the NIC writes */
static uint16_t hw_wqe;		/* next RQ WQE index (wqe_counter) */

static uint8_t *slot(uint32_t i)
{
	return (uint8_t *)&(*rxq->cqes)[i & ((1u << log_n) - 1)];
}

static uint8_t owner_of(uint32_t i)
{
	return (i >> log_n) & 1;
}

/* Enhanced layout: the validity iteration count of index i (CQE byte 62),
 * the pass number mod 256 (PRM-FACTS 9.2; DPDK check_cqe_iteration,
 * common/mlx5/mlx5_common.h:280-291). */
static uint8_t vic_of(uint32_t i)
{
	return (uint8_t)(i >> log_n);
}

/* Enhanced layout: the last regular CQE the NIC wrote (the title of the
 * compressed CQEs that follow it, PRM-FACTS 10.5). */
static uint32_t hw_title_idx;
static int hw_title_valid;
static uint32_t hw_title_wqe;	/* striding RQ: the title's WQE */
/*
 * Enhanced layout: the ring as the NIC wrote it, which is what is printed
 * for mlx5dp.  It differs from rxq->cqes only in slots DPDK already
 * consumed: mlx5_rx_burst_mprq_vec unzips with keep = false and then
 * "invalidates" the compressed CQE and its holes (op_own = 0xf0,
 * mlx5_rxtx_vec_sse.h:376-379), which erases the compressed CQEs between
 * a title and DPDK's index that mlx5dp follows back to find the title.
 * Slots at and after DPDK's index are the same in both, or HW-owned in
 * both (an earlier pass's iteration count).
 */
static uint8_t *nic_cq;

static void put_be32(uint8_t *p, uint32_t v)
{
	p[0] = v >> 24; p[1] = v >> 16; p[2] = v >> 8; p[3] = v;
}

static void put_be16(uint8_t *p, uint16_t v)
{
	p[0] = v >> 8; p[1] = v;
}

static void fill_random(uint8_t *p, unsigned n)
{
	unsigned i;

	for (i = 0; i < n; i++)
		p[i] = (uint8_t)rnd();
}

static uint32_t pick_len(void)
{
	switch (rnd_below(8)) {
	case 0: return rnd_range(1, 59);
	case 1: return BUF_LEN;
	case 2: return 64;
	default: return rnd_range(60, BUF_LEN);
	}
}

static uint32_t pick_hash(void)
{
	return rnd_below(6) == 0 ? 0 : (uint32_t)rnd();
}

/* A 24-bit flow tag: none (0), the PMD's MLX5_FLOW_MARK_DEFAULT, or a mark. */
static uint32_t pick_tag(void)
{
	switch (rnd_below(5)) {
	case 0: return 0;
	case 1: return MLX5_FLOW_MARK_DEFAULT;
	case 2: return rnd_range(1, 16);
	default: return (uint32_t)rnd() & 0xffffff;
	}
}

/*
 * The 64 bytes of a responder CQE of an Ethernet RQ without LRO or
 * timestamp-dependent features: random where the PMD's view allows any
 * value, fixed where the NIC writes a fixed value in this configuration.
 * Byte offsets: struct mlx5_cqe (common/mlx5/mlx5_prm.h:435).
 */
static void fill_cqe(uint8_t *c, uint32_t byte_cnt, uint8_t format, uint32_t idx)
{
	fill_random(c, 64);
	c[0] = (uint8_t)rnd_below(4);	/* pkt_info: [1:0] tunneled, outer L3 */
	c[4] = c[5] = 0;		/* LRO fields: LRO is off */
	c[6] = c[7] = 0;
	put_be32(c + 8, 0);
	put_be32(c + 12, pick_hash());	/* rx_hash_res */
	if (rnd_below(3) == 0)		/* hdr_type_etc: a common good packet */
		c[28] = 0x07, c[29] = (uint8_t)((rnd_below(2) ? 0x28 : 0x14) | rnd_below(2));
	c[32] = 0;			/* lro_num_seg: 0 without LRO */
	put_be32(c + 44, byte_cnt);
	c[56] = 0;			/* sop_drop_qpn[31:24] */
	put_be32(c + 56, pick_tag());	/* flow tag (mark) in [23:0] */
	put_be16(c + 60, hw_wqe);	/* wqe_counter: the RQ WQE index */
	/* byte 62: the validity iteration count in the enhanced layout (the
	 * owner bit is written too, but only the count is checked) */
	c[62] = enh ? vic_of(idx) : 0;
	/* op_own last: RESP_SEND, format, owner of this pass */
	c[63] = (uint8_t)(MLX5_CQE_RESP_SEND << 4 | format << 2 | owner_of(idx));
}

static void nic_regular(void)
{
	uint8_t c[64];

	fill_cqe(c, pick_len(), 0, hw_pi);
	hw_wqe++;
	memcpy(slot(hw_pi), c, 64);
	hw_title_idx = hw_pi;
	hw_title_valid = 1;
	hw_pi++;
}

/* One mini-CQE (struct mlx5_mini_cqe8, mlx5_prm.h:4898; PRM-FACTS 10.2). */
static void fill_mini(uint8_t *m)
{
	uint32_t len = pick_len(), tag;

	fill_random(m, 8);
	switch (mcqe_format) {
	case MLX5_CQE_RESP_FORMAT_HASH:
		put_be32(m, pick_hash());
		put_be32(m + 4, len);
		break;
	case MLX5_CQE_RESP_FORMAT_CSUM:		/* checksum, reserved, byte_cnt */
		put_be32(m + 4, len);
		break;
	case MLX5_CQE_RESP_FORMAT_FTAG_STRIDX:	/* tag[15:0], stride, tag[23:16], 24-bit byte_cnt */
		tag = pick_tag();
		put_be16(m, (uint16_t)tag);
		put_be32(m + 4, len);
		m[4] = (uint8_t)(tag >> 16);
		break;
	case MLX5_CQE_RESP_FORMAT_CSUM_STRIDX:	/* checksum, stride, byte_cnt */
		put_be32(m + 4, len);
		break;
	case MLX5_CQE_RESP_FORMAT_L34H_STRIDX:	/* header type byte(s), stride, byte_cnt */
		put_be32(m + 4, len);
		break;
	}
}

/*
 * A basic-layout session of n minis (PRM-FACTS 10.4; DPDK mlx5_rx_poll_len,
 * mlx5_rx.c:760-790): title at t with the session's common fields,
 * byte_cnt = n and the compressed format; mini arrays of 8 at t+1, t+8,
 * t+16, ...; the session owns n CQ slots.  The other slots of the session
 * are not written (they keep whatever the previous pass left there).
 */
static void nic_session(unsigned n)
{
	uint32_t t = hw_pi;
	uint8_t title[64];
	unsigned i;

	CHECK(n >= 2, "a basic session has at least 2 minis");
	fill_cqe(title, n, MLX5_COMPRESSED, t);
	for (i = 0; i < n; i++) {
		uint8_t *arr = slot(i < 8 ? t + 1 : t + i / 8 * 8);

		if (i % 8 == 0)		/* a fresh array: unused entries random */
			fill_random(arr, 64);
		fill_mini(arr + 8 * (i % 8));
	}
	hw_wqe += n;
	memcpy(slot(t), title, 64);	/* the title (with its owner) last */
	hw_pi += n;
}

/*
 * An enhanced-layout compressed CQE of n (1..7) minis (PRM-FACTS 10.5;
 * DPDK mlx5_rx_poll_len mlx5_rx.c:826-868, rxq_cq_decompress_v
 * mlx5_rxtx_vec_sse.h:73-96): the minis sit from byte 0 of the CQE
 * itself, the unused entries and bytes 56-61 are random, byte 62 is the
 * validity iteration count of this index, op_own = (n - 1) << 4 |
 * MLX5_COMPRESSED << 2 | owner.  It stands for n CQ indices; the n - 1
 * slots after it are holes the NIC does not write.  Its minis take every
 * other field from the title, the last regular CQE written.
 */
static void nic_enh_compressed(unsigned n)
{
	uint8_t c[64];
	unsigned i;

	CHECK(n >= 1 && n <= 7 && hw_title_valid, "enhanced compressed CQE");
	fill_random(c, 64);
	for (i = 0; i < n; i++)
		fill_mini(c + 8 * i);
	c[62] = vic_of(hw_pi);
	c[63] = (uint8_t)((n - 1) << 4 | MLX5_COMPRESSED << 2 | owner_of(hw_pi));
	hw_wqe += n;
	memcpy(slot(hw_pi), c, 64);
	hw_pi += n;
}

/* ---- striding RQ (MPRQ) device model ---------------------------------- */
static uint32_t hw_mprq_wqe;	/* RQ WQE the NIC is filling (free-running) */
static uint32_t hw_strd;	/* next stride in it */

/* A stride is free if its WQE is posted: DPDK's current WQE rq_ci and the
 * wq_n - 1 after it (mlx5_rxq_initialize posts them all; DPDK reposts a
 * WQE when it moves past it, mprq_buf_replace). */
static int mprq_wqe_posted(uint32_t w)
{
	return (uint32_t)(w - rxq->rq_ci) < (1u << log_wq_n);
}

/* Where the NIC puts the next packet of cnt strides: the current WQE if
 * enough strides are left, else nowhere (the caller decides on a filler). */
static int mprq_fits(unsigned cnt)
{
	return hw_strd + cnt <= (1u << log_strd_num) && mprq_wqe_posted(hw_mprq_wqe);
}

/* A WQE that is exactly full: the NIC moves to the next one. */
static void mprq_next_if_full(void)
{
	if (hw_strd == (1u << log_strd_num)) {
		hw_mprq_wqe++;
		hw_strd = 0;
	}
}

static unsigned mprq_pick_cnt(void)
{
	unsigned max = (BUF_LEN - 1) >> log_strd_sz;	/* len <= BUF_LEN */

	max += 1;
	if (max > (1u << log_strd_num))
		max = 1u << log_strd_num;
	return rnd_below(3) ? 1 + rnd_below(max < 3 ? max : 3) : rnd_range(1, max);
}

static uint32_t mprq_pick_len(unsigned cnt)
{
	uint32_t sz = 1u << log_strd_sz, lo = (cnt - 1) * sz + 1, hi = cnt * sz;

	if (hi > BUF_LEN)
		hi = BUF_LEN;
	if (lo < 16)
		lo = 16;	/* room for the (WQE, stride) marker */
	return rnd_below(4) ? rnd_range(lo, hi) : hi;
}

/* The NIC writes the packet data: a marker (WQE low 16 bits, stride) in
 * the first 4 bytes, which DPDK copies into the mbuf (mprq_buf_to_pkt). */
static void mprq_write_data(uint32_t w, uint32_t strd)
{
	struct mlx5_mprq_buf *b = (*rxq->mprq_bufs)[w & ((1u << log_wq_n) - 1)];
	uint8_t *d = (uint8_t *)mlx5_mprq_buf_addr(b, 1u << log_strd_num) + (strd << log_strd_sz);

	put_be16(d, (uint16_t)w);
	put_be16(d + 2, (uint16_t)strd);
}

/* MPRQ byte count (mlx5_prm.h MLX5_MPRQ_*): [31] filler, [29:16] strides,
 * [15:0] length. */
static uint32_t mprq_byte_cnt(int filler, unsigned cnt, uint32_t len)
{
	return (uint32_t)filler << 31 | cnt << 16 | len;
}

/* One regular CQE: a packet, or a filler for the rest of the WQE. */
static int nic_regular_mprq(void)
{
	unsigned cnt;
	uint32_t len;
	uint8_t c[64];

	mprq_next_if_full();
	if (!mprq_wqe_posted(hw_mprq_wqe))
		return 0;
	cnt = mprq_pick_cnt();
	if (!mprq_fits(cnt) || (hw_strd && rnd_below(12) == 0)) {
		/* filler: consumes the rest of the WQE, no packet */
		unsigned rest = (1u << log_strd_num) - hw_strd;

		fill_cqe(c, mprq_byte_cnt(1, rest, 0), 0, hw_pi);
		put_be16(c + 2, (uint16_t)hw_mprq_wqe);
		put_be16(c + 60, (uint16_t)hw_strd);
		hw_strd += rest;
		hw_title_valid = 0;	/* enhanced: no compressed CQE after a filler */
	} else {
		len = mprq_pick_len(cnt);
		fill_cqe(c, mprq_byte_cnt(0, cnt, len), 0, hw_pi);
		put_be16(c + 2, (uint16_t)hw_mprq_wqe);	/* wqe_id */
		put_be16(c + 60, (uint16_t)hw_strd);		/* stride index */
		mprq_write_data(hw_mprq_wqe, hw_strd);
		hw_strd += cnt;
		hw_title_valid = 1;	/* enhanced: the title of what follows */
		hw_title_idx = hw_pi;
		hw_title_wqe = hw_mprq_wqe;
	}
	memcpy(slot(hw_pi), c, 64);
	hw_pi++;
	return 1;
}

/*
 * Enhanced layout on a striding RQ: a compressed CQE of up to n (<= 7)
 * packets, minis as in nic_session_mprq (cnt << 16 | len, FTAG's 24 bits;
 * the *_STRIDX formats carry the stride index), in the same WQE as its
 * title (the harness keeps a title and the compressed CQEs after it in
 * one WQE, as nic_session_mprq keeps a basic session in one).  Returns
 * the indices written (0: none).
 */
static unsigned nic_enh_compressed_mprq(unsigned n)
{
	uint8_t c[64];
	unsigned i, k = 0;
	struct { uint32_t s, cnt, len; } p[7];

	if (!hw_title_valid || hw_mprq_wqe != hw_title_wqe)
		return 0;
	for (i = 0; i < n && i < 7; i++) {
		unsigned cnt;

		if (hw_strd == (1u << log_strd_num))
			break;
		cnt = mprq_pick_cnt();
		if (!mprq_fits(cnt))
			break;
		p[k].s = hw_strd;
		p[k].cnt = cnt;
		p[k].len = mprq_pick_len(cnt);
		hw_strd += cnt;
		k++;
	}
	if (k == 0)
		return 0;
	fill_random(c, 64);
	for (i = 0; i < k; i++) {
		uint8_t *m = c + 8 * i;
		uint32_t bc = mprq_byte_cnt(0, p[i].cnt, p[i].len);

		fill_mini(m);
		if (mcqe_format != MLX5_CQE_RESP_FORMAT_HASH &&
		    mcqe_format != MLX5_CQE_RESP_FORMAT_CSUM)
			put_be16(m + 2, (uint16_t)p[i].s);	/* stride_idx */
		if (mcqe_format == MLX5_CQE_RESP_FORMAT_FTAG_STRIDX) {
			uint8_t hi = m[4];

			put_be32(m + 4, bc & 0xffffff);
			m[4] = hi;
		} else {
			put_be32(m + 4, bc);
		}
		mprq_write_data(hw_mprq_wqe, p[i].s);
	}
	c[62] = vic_of(hw_pi);
	c[63] = (uint8_t)((k - 1) << 4 | MLX5_COMPRESSED << 2 | owner_of(hw_pi));
	memcpy(slot(hw_pi), c, 64);
	hw_pi += k;
	return k;
}

/* A basic session on a striding RQ: the *_STRIDX formats carry each
 * mini's stride index, HASH does not (the consumer counts strides on from
 * the title's); no filler inside a session and no session across WQEs,
 * so a packet that does not fit ends it.  Returns the slots written
 * (0: none). */
static unsigned nic_session_mprq(unsigned n)
{
	uint32_t t = hw_pi, w0 = 0, s0 = 0;
	uint8_t title[64];
	unsigned i, k = 0;
	struct { uint32_t w, s, cnt, len; } p[1024];

	CHECK(n <= 1024, "session too long");
	for (i = 0; i < n; i++) {	/* plan the packets first */
		unsigned cnt;

		/* A session stays in one WQE: its title carries one wqe_id,
		 * and the kernel's mlx5e_decompress_cqe (en_rx.c) keeps that
		 * wqe_id for every mini and only counts strides on. */
		if (i == 0)
			mprq_next_if_full();
		else if (hw_strd == (1u << log_strd_num))
			break;
		cnt = mprq_pick_cnt();
		if (!mprq_fits(cnt))
			break;
		p[k].w = hw_mprq_wqe;
		p[k].s = hw_strd;
		p[k].cnt = cnt;
		p[k].len = mprq_pick_len(cnt);
		hw_strd += cnt;
		k++;
	}
	if (k < 2) {		/* undo; not a session */
		if (k == 1) {
			hw_mprq_wqe = p[0].w;
			hw_strd = p[0].s;
		}
		return 0;
	}
	w0 = p[0].w;
	s0 = p[0].s;
	fill_cqe(title, k, MLX5_COMPRESSED, t);
	put_be16(title + 2, (uint16_t)w0);
	put_be16(title + 60, (uint16_t)s0);
	for (i = 0; i < k; i++) {
		uint8_t *arr = slot(i < 8 ? t + 1 : t + i / 8 * 8), *m = arr + 8 * (i % 8);
		uint32_t bc = mprq_byte_cnt(0, p[i].cnt, p[i].len);

		if (i % 8 == 0)
			fill_random(arr, 64);
		fill_mini(m);
		if (mcqe_format != MLX5_CQE_RESP_FORMAT_HASH &&
		    mcqe_format != MLX5_CQE_RESP_FORMAT_CSUM)
			put_be16(m + 2, (uint16_t)p[i].s);	/* stride_idx */
		if (mcqe_format == MLX5_CQE_RESP_FORMAT_FTAG_STRIDX) {
			uint8_t hi = m[4];		/* tag[23:16] */

			put_be32(m + 4, bc & 0xffffff);
			m[4] = hi;
		} else {
			put_be32(m + 4, bc);
		}
		mprq_write_data(p[i].w, p[i].s);
	}
	memcpy(slot(t), title, 64);
	hw_pi += k;
	return k;
}

/* What slot s held before the first round: the previous pass's content. */
static void init_ring(uint32_t ci0)
{
	uint32_t q_n = 1u << log_n, k;

	for (k = 0; k < q_n; k++) {
		uint32_t idx = ci0 + k;		/* the slot of index ci0 + k */
		uint8_t *c = slot(idx);

		if (idx < q_n || (uint32_t)(idx - q_n) > idx) {
			/* never written: mlx5_devx_cq_create's pattern
			 * (mlx5_common_devx.c:40-52: op_own 0xf1, vic 0xff) */
			memset(c, 0, 64);
			c[62] = MLX5_CQE_VIC_INIT;
			c[63] = MLX5_CQE_INVALID << 4 | MLX5_CQE_OWNER_MASK;
		} else if (enh) {
			/* enhanced: what an earlier pass wrote there (the
			 * previous one, or one before it for a hole), a
			 * regular CQE or a compressed CQE; DPDK does not
			 * invalidate in this layout */
			uint32_t back = (idx >= 3 * q_n) ? rnd_range(1, 2) : 1;
			uint32_t old = idx - back * q_n;

			fill_random(c, 62);
			c[62] = vic_of(old);
			c[63] = rnd_below(2) ?
				(uint8_t)(MLX5_CQE_RESP_SEND << 4 | owner_of(old)) :
				(uint8_t)(rnd_below(7) << 4 | MLX5_COMPRESSED << 2 | owner_of(old));
		} else if (rnd_below(2)) {
			/* a regular CQE of the previous pass, consumed */
			fill_random(c, 63);
			c[63] = (uint8_t)(MLX5_CQE_RESP_SEND << 4 | owner_of(idx - q_n));
		} else {
			/* part of a session DPDK consumed and invalidated */
			fill_random(c, 63);
			c[63] = MLX5_CQE_INVALIDATE;
		}
	}
}

/* ---- one round: the NIC writes, then DPDK polls until the CQ is empty -- */
static const char *fmt_names[] = {
	[MLX5_CQE_RESP_FORMAT_HASH] = "hash",
	[MLX5_CQE_RESP_FORMAT_CSUM] = "csum",
	[MLX5_CQE_RESP_FORMAT_FTAG_STRIDX] = "ftag-stridx",
	[MLX5_CQE_RESP_FORMAT_CSUM_STRIDX] = "csum-stridx",
	[MLX5_CQE_RESP_FORMAT_L34H_STRIDX] = "l34h-stridx",
};

static unsigned long long seed;
static int mark;

static void hex_out(const uint8_t *p, size_t n)
{
	static const char hx[] = "0123456789abcdef";
	size_t i;

	for (i = 0; i < n; i++) {
		putchar(hx[p[i] >> 4]);
		putchar(hx[p[i] & 15]);
	}
}

static uint16_t pick_burst(void)
{
	static const uint16_t common[] = { 1, 2, 3, 4, 5, 7, 8, 16, 32, 64 };

	return rnd_below(2) ? common[rnd_below(10)] : (uint16_t)rnd_range(1, 64);
}

static void poll_and_print(int r, uint32_t ci_before, uint32_t fill);

static void round_run(int r)
{
	const uint32_t q_n = 1u << log_n, q_m = q_n - 1;
	struct rte_mbuf *pkts[64];
	uint32_t ci_before, room, fill, end, posted, k, start_pi;
	double p_sess = (double)rnd_below(11) / 10.0;
	unsigned max_sess;

	/* Vector: replenish happens at the start of every burst call; with
	 * an empty CQ the call returns 0, so a few calls top the RQ up. */
	if (vec_mode)
		for (k = 0; k < (mprq ? 16 : 4); k++)
			CHECK(burst_fn(rxq, pkts, 64) == 0, "empty CQ returned packets");
	ci_before = rxq->cq_ci;
	/* Room: the CQ slots DPDK has consumed; the NIC completes no more
	 * packets than posted RQ WQEs (scalar: every WQE stays posted;
	 * MPRQ: nic_*_mprq stop at the last posted stride). */
	room = q_n - (uint32_t)(uint16_t)(hw_pi - ci_before);
	/* vector MPRQ: every CQE, filler included, takes an elts mbuf */
	posted = vec_mode ? (mprq ? rxq->elts_ci : rxq->rq_ci) - rxq->rq_pi : q_n;
	if (room > posted)
		room = posted;
	switch (rnd_below(4)) {
	case 0: fill = rnd_range(0, room); break;
	case 1: fill = room > 8 ? rnd_range(room - 8, room) : room; break;
	default: fill = room; break;
	}
	switch (rnd_below(4)) {
	case 0: max_sess = 8; break;
	case 1: max_sess = 16; break;
	case 2: max_sess = 64; break;
	default: max_sess = q_n; break;
	}
	end = hw_pi + fill;
	start_pi = hw_pi;
	/* Enhanced layout on a striding RQ: as for the cyclic RQ below. */
	while (mprq && enh && hw_pi != end) {
		uint32_t left, n, cap = hw_title_idx + q_n - hw_pi;

		if (rnd() % 1000 < p_sess * 1000 && hw_title_valid && cap >= 1 &&
		    cap < 0x80000000u) {
			uint32_t end0 = end;

			if (hw_pi == start_pi && end - hw_pi > cap)
				end = hw_pi + cap;
			left = end - hw_pi;
			if (left > cap)
				left = cap;
			n = rnd_range(1, left < 7 ? left : 7);
			if (vec_mode && (hw_pi & q_m) + n > q_n)
				n = q_n - (hw_pi & q_m);
			if (nic_enh_compressed_mprq(n))
				continue;
			end = end0;
		}
		if (!nic_regular_mprq())
			break;		/* no posted stride left */
	}
	while (mprq && !enh && hw_pi != end) {
		uint32_t left = end - hw_pi;

		if (left >= 2 && rnd() % 1000 < p_sess * 1000) {
			uint32_t n = rnd_range(2, left < max_sess ? left : max_sess);

			/* vector: a session ends at or before the ring end
			 * (CQ and elts have the same size here) */
			if (vec_mode && (hw_pi & q_m) + n > q_n)
				n = q_n - (hw_pi & q_m);
			if (n >= 2 && nic_session_mprq(n))
				continue;
		}
		if (!nic_regular_mprq())
			break;		/* no posted stride left */
	}
	if (mprq)
		fill = hw_pi - start_pi;
	/*
	 * Enhanced layout, cyclic RQ.  A compressed CQE (1..7 minis) may
	 * follow any regular CQE or another compressed CQE.  Harness limit
	 * (mlx5dp only sees the ring): when the round starts with a
	 * compressed CQE, the title (an index before DPDK's cq_ci) and the
	 * compressed CQEs after it must still be in the ring, so the NIC
	 * writes no further than title + ring size in that round; and a run
	 * of compressed CQEs after a title never reaches past title + ring
	 * size (else the title's slot would be overwritten by the run
	 * itself).  DPDK itself uses its saved copy (rxq->title_cqe /
	 * rxq->title_pkt).
	 * Vector: a compressed CQE ends at or before the ring end
	 * (rxq_cq_decompress_v fills elts[pos..] and follows cq[mcqe_n]
	 * without wrapping, mlx5_rxtx_vec_sse.h:362-373).
	 */
	while (!mprq && enh && hw_pi != end) {
		uint32_t left, n, cap = hw_title_idx + q_n - hw_pi;

		if (rnd() % 1000 < p_sess * 1000 && hw_title_valid && cap >= 1 &&
		    cap < 0x80000000u) {
			/* the round starts with a compressed CQE: the NIC
			 * writes no further than title + ring size */
			if (hw_pi == start_pi && end - hw_pi > cap)
				end = hw_pi + cap;
			left = end - hw_pi;
			if (left > cap)
				left = cap;
			n = rnd_range(1, left < 7 ? left : 7);
			if (vec_mode && (hw_pi & q_m) + n > q_n)
				n = q_n - (hw_pi & q_m);
			nic_enh_compressed(n);
			continue;
		}
		nic_regular();
	}
	if (!mprq && enh)
		fill = hw_pi - start_pi;
	while (!mprq && !enh && hw_pi != end) {
		uint32_t left = end - hw_pi, n;

		if (left >= 2 && rnd() % 1000 < p_sess * 1000) {
			n = rnd_range(2, left < max_sess ? left : max_sess);
			/* The SSE path reads a session's mini arrays as
			 * cq[t + 1 .. t + n - 1] without wrapping
			 * (rxq_cq_decompress_v, mlx5_rxtx_vec_sse.h), and
			 * limits a pass to the ring end (rxq_burst_v "Not to
			 * cross queue end"): on vec rings a session ends at
			 * or before the ring end. */
			if (vec_mode && (hw_pi & q_m) + n > q_n)
				n = q_n - (hw_pi & q_m);
			if (n >= 2) {
				nic_session(n);
				continue;
			}
		}
		nic_regular();
	}
	rte_io_wmb();

	/* the NIC's copy of the ring (see nic_cq) gets what it just wrote */
	if (enh)
		for (k = start_pi; k != hw_pi; k++)
			memcpy(nic_cq + (size_t)(k & q_m) * 64, slot(k), 64);
	poll_and_print(r, ci_before, fill);
}

/*
 * Print the ring as the NIC left it (before DPDK looks at it), then poll
 * with random burst sizes until a burst of 64 returns nothing, consumes
 * nothing and leaves no zip/decompressed state, printing what DPDK
 * derived per mbuf.
 */
static void poll_and_print(int r, uint32_t ci_before, uint32_t fill)
{
	const uint32_t q_n = 1u << log_n;
	struct rte_mbuf *pkts[64];
	unsigned bursts = 0, npkts = 0, first = 1;
	int quiet = 0;

	printf("{\"seed\":%llu,\"layout\":\"%s\",\"path\":\"%s\",\"fmt\":\"%s\",\"log_n\":%u,\"mark\":%d,\"round\":%d,"
	       "\"ci\":%u,\"written\":%u,\"log_strd_num\":%u,\"log_strd_sz\":%u,\"log_wq_n\":%u,"
	       "\"ring\":\"", seed, enh ? "enhanced" : "basic", mprq ? (vec_mode ? "mprq-vec" : "mprq") : vec_mode ? "vec" : "scalar",
	       fmt_names[mcqe_format], log_n, mark, r, ci_before, fill, mprq ? log_strd_num : 0,
	       mprq ? log_strd_sz : 0, mprq ? log_wq_n : 0);
	hex_out(enh && nic_cq ? nic_cq : (const uint8_t *)rxq->cqes, (size_t)q_n * 64);
	printf("\",\"pkts\":[");
	/* Poll with random burst sizes until a burst of 64 returns nothing,
	 * consumes nothing, and no decompressed packets are pending. */
	for (;;) {
		uint16_t want = quiet ? 64 : pick_burst(), got, i;
		uint32_t ci_was = rxq->cq_ci;

		got = burst_fn(rxq, pkts, want);
		bursts++;
		if (getenv("RX_GEN_DEBUG"))	/* queue state after each burst */
			fprintf(stderr, "round %d burst %u want %u got %u: cq_ci %u rq_ci %u rq_pi %u "
				"elts_ci %u consumed_strd %u decompressed %u zip.ai %u\n", r, bursts,
				want, got, rxq->cq_ci, rxq->rq_ci, rxq->rq_pi, rxq->elts_ci,
				rxq->consumed_strd, rxq->decompressed, rxq->zip.ai);
		CHECK(got <= want, "burst returned %u > %u", got, want);
		for (i = 0; i < got; i++) {
			struct rte_mbuf *m = pkts[i];
			const uint8_t *d = rte_pktmbuf_mtod(m, const uint8_t *);

			/* [pkt_len, data_len, nb_segs, ol_flags, packet_type,
			 *  hash.rss, hash.fdir.hi, vlan_tci, first 4 data bytes
			 *  (MPRQ: the NIC's (WQE, stride) marker), refcnt,
			 *  data_off (new: the rearm data the vector
			 *  decompression copies from rxq->title_pkt)] */
			printf("%s[%u,%u,%u,%llu,%u,%u,%u,%u,%u,%u,%u]", first ? "" : ",", m->pkt_len,
			       m->data_len, m->nb_segs, (unsigned long long)m->ol_flags,
			       m->packet_type, m->hash.rss, m->hash.fdir.hi, m->vlan_tci,
			       (unsigned)d[0] << 24 | d[1] << 16 | d[2] << 8 | d[3],
			       (unsigned)rte_mbuf_refcnt_read(m), (unsigned)m->data_off);
			first = 0;
			npkts++;
			/* Poison the fields the PMD writes only under a flag,
			 * so that a stale value cannot match next time. */
			m->hash.rss = 0xa5a5a5a5;
			m->hash.fdir.hi = 0x5a5a5a5a;
			m->vlan_tci = 0xdead;
			m->packet_type = 0xffffffff;
			/* An mbuf whose rearm data came from a title_pkt
			 * DPDK never filled (all zero: refcnt 0, nb_segs 0,
			 * data_off 0; see RX-ENHANCED.md) is printed as it
			 * is, then repaired so that it can go back to the
			 * pool. */
			if (rte_mbuf_refcnt_read(m) != 1 || m->nb_segs != 1 ||
			    m->data_off != RTE_PKTMBUF_HEADROOM) {
				rte_mbuf_refcnt_set(m, 1);
				m->nb_segs = 1;
				m->data_off = RTE_PKTMBUF_HEADROOM;
				m->next = NULL;
			}
			CHECK(rte_pktmbuf_prefree_seg(m) == m, "prefree");
			rte_mbuf_raw_free(m);
		}
		/* A burst can return nothing and still consume CQEs: an MPRQ
		 * filler has no packet (vector MPRQ returns from
		 * rxq_copy_mprq_mbuf_v with none). */
		if (got == 0 && rxq->cq_ci == ci_was) {
			if (quiet && (!vec_mode || rxq->decompressed == 0) && rxq->zip.ai == 0)
				break;
			quiet = 1;
		} else {
			quiet = 0;
		}
		CHECK(bursts < 100000, "DPDK never drained the CQ");
	}
	printf("],\"ci_after\":%u,\"hw_pi\":%u,\"bursts\":%u,\"npkts\":%u}\n", rxq->cq_ci, hw_pi,
	       bursts, npkts);
	fflush(stdout);
}

static int fmt_of(const char *s)
{
	unsigned i;

	for (i = 0; i < sizeof(fmt_names) / sizeof(fmt_names[0]); i++)
		if (fmt_names[i] && strcmp(s, fmt_names[i]) == 0)
			return (int)i;
	return -1;
}

int main(int argc, char **argv)
{
	uint32_t ci0;
	int rounds, f, r, replay = 0;

	mlx5_set_ptype_table();		/* rte_mlx5_pmd_init (mlx5.c) */
	mlx5_set_cksum_table();
	mlx5_set_swp_types_table();
	if (argc == 2 && strcmp(argv[1], "tables") == 0) {
		unsigned i;

		printf("{\"ptype_table\":[");
		for (i = 0; i < 256; i++)
			printf("%s%u", i ? "," : "", mlx5_ptype_table[i]);
		printf("],\"RSS_HASH\":%llu,\"FDIR\":%llu,\"FDIR_ID\":%llu,\"VLAN\":%llu,"
		       "\"VLAN_STRIPPED\":%llu,\"IP_CKSUM_MASK\":%llu,\"IP_CKSUM_GOOD\":%llu,"
		       "\"L4_CKSUM_MASK\":%llu,\"L4_CKSUM_GOOD\":%llu,\"FLOW_MARK_DEFAULT\":%u,"
		       "\"HEADROOM\":%u}\n",
		       (unsigned long long)RTE_MBUF_F_RX_RSS_HASH, (unsigned long long)RTE_MBUF_F_RX_FDIR,
		       (unsigned long long)RTE_MBUF_F_RX_FDIR_ID, (unsigned long long)RTE_MBUF_F_RX_VLAN,
		       (unsigned long long)RTE_MBUF_F_RX_VLAN_STRIPPED,
		       (unsigned long long)RTE_MBUF_F_RX_IP_CKSUM_MASK,
		       (unsigned long long)RTE_MBUF_F_RX_IP_CKSUM_GOOD,
		       (unsigned long long)RTE_MBUF_F_RX_L4_CKSUM_MASK,
		       (unsigned long long)RTE_MBUF_F_RX_L4_CKSUM_GOOD, MLX5_FLOW_MARK_DEFAULT,
		       (unsigned)RTE_PKTMBUF_HEADROOM);
		return 0;
	}
	if ((argc == 7 || argc == 8) && strcmp(argv[1], "replay") == 0) {
		/* replay PATH FORMAT LOG_CQE_N CI MARK < ring.hex: DPDK polls a
		 * given ring (for hand-made minimal rings); the arguments
		 * sit where the random mode has them */
		replay = 1;
		if (argc == 8)
			enh = strcmp(argv[7], "enhanced") == 0;
		if (argc == 8 && !enh && strcmp(argv[7], "basic"))
			argv[2] = "";
	} else if (argc == 8 || argc == 9) {
		if (argc == 9)
			enh = strcmp(argv[8], "enhanced") == 0;
		if (argc == 9 && !enh && strcmp(argv[8], "basic"))
			argv[2] = "";	/* usage */
	} else {
		argv[2] = "";	/* usage */
	}
	if ((strcmp(argv[2], "scalar") && strcmp(argv[2], "vec") && strcmp(argv[2], "mprq") &&
	     strcmp(argv[2], "mprq-vec")) ||
	    (f = fmt_of(argv[3])) < 0) {
		fprintf(stderr, "usage: %s SEED scalar|vec|mprq|mprq-vec FORMAT LOG_CQE_N CI0 MARK ROUNDS [basic|enhanced]\n"
			"       %s replay scalar|vec|mprq|mprq-vec FORMAT LOG_CQE_N CI MARK [basic|enhanced] < ring.hex\n"
			"       %s tables\n", argv[0], argv[0], argv[0]);
		return 2;
	}
	seed = replay ? 0 : strtoull(argv[1], NULL, 0);
	rng_state = seed * 0x2545f4914f6cdd1dull + 1;
	vec_mode = strcmp(argv[2], "vec") == 0;
	mprq = strcmp(argv[2], "mprq") == 0 || strcmp(argv[2], "mprq-vec") == 0;
	if (mprq) {
		/* stride geometry: 2..16 strides of 64..2048 bytes, 4..64 WQEs
		 * (log_strd_sz >= 6: MLX5_MIN_SINGLE_STRIDE_LOG_NUM_BYTES) */
		log_strd_num = rnd_range(1, 4);
		log_strd_sz = rnd_range(6, 11);
		log_wq_n = rnd_range(2, 6);
		vec_mode = strcmp(argv[2], "mprq-vec") == 0;
		if (vec_mode) {
			/* the vector replenish needs 32 or more strides; the
			 * CQ gets as many slots as strides (elts) */
			while (log_wq_n + log_strd_num < 5)
				log_wq_n++;
		}
	}
	mcqe_format = (unsigned)f;
	log_n = (unsigned)atoi(argv[4]);
	if (mprq && vec_mode)
		log_n = log_wq_n + log_strd_num;	/* CQ slots = strides (elts) */
	/* rxq->cq_ci is a 24-bit field in this DPDK (mlx5_rx.h:133), as the
	 * hardware's CQ counter: the queue starts at ci0 mod 2^24.  The
	 * owner parity and the validity iteration count of an index are the
	 * same mod 2^24 (ring sizes up to 2^10). */
	ci0 = (uint32_t)strtoul(argv[5], NULL, 0) & 0xffffff;
	mark = atoi(argv[6]);
	rounds = replay ? 1 : atoi(argv[7]);
	/* vector replenish needs MLX5_VPMD_RXQ_RPLNSH_THRESH(n) > 4 descriptors
	 * (the MLX5_ASSERT in mlx5_rx_replenish_bulk_mbuf): 32 slots or more */
	CHECK(log_n >= (vec_mode ? 5u : 1u) && log_n <= 10, "LOG_CQE_N out of range");
	fabricate(mark);
	/* Start the queue at ci0 as if it had run that far: consumer and
	 * producer counters at ci0, every RQ WQE posted (rq_ci - rq_pi = n,
	 * as mlx5_rxq_initialize leaves it). */
	rxq->cq_ci = ci0;
	*rxq->cq_db = rte_cpu_to_be_32(ci0);
	if (mprq) {
		/* the WQE counter as mlx5_rxq_initialize left it; vector:
		 * elts follow the CQ index, all strides' mbufs allocated */
		if (vec_mode) {
			rxq->rq_pi = ci0;
			rxq->elts_ci = ci0 + (1u << (log_wq_n + log_strd_num));
		}
	} else if (vec_mode) {
		rxq->rq_pi = ci0;
		rxq->rq_ci = ci0 + (1u << log_n);
	} else {
		rxq->rq_ci = ci0;
	}
	hw_pi = ci0;
	hw_wqe = (uint16_t)ci0;
	hw_mprq_wqe = rxq->rq_ci;	/* mlx5_rxq_initialize: rq_ci = wq_n, WQE 0 */
	hw_strd = 0;
	if (replay) {
		uint8_t *ring = (uint8_t *)rxq->cqes;
		size_t i, want = (size_t)64 << log_n;
		unsigned v;

		for (i = 0; i < want; i++) {
			CHECK(scanf("%2x", &v) == 1, "ring.hex: %zu of %zu bytes", i, want);
			ring[i] = (uint8_t)v;
		}
	}
	if (replay) {
		poll_and_print(0, ci0, 0);
		return 0;
	}
	init_ring(ci0);
	if (enh) {
		nic_cq = zalloc(64, (size_t)64 << log_n);
		memcpy(nic_cq, (const void *)rxq->cqes, (size_t)64 << log_n);
	}
	for (r = 0; r < rounds; r++)
		round_run(r);
	return 0;
}
