/*
 * Head-to-head harness, Rx side: DPDK 22.11 mlx5 PMD Rx burst (Debian 12's
 * librte_net_mlx5.a object code: net_mlx5_mlx5_rx.c.o for mlx5_rx_burst,
 * net_mlx5_mlx5_rxtx_vec.c.o for mlx5_rx_burst_vec with the SSE routines of
 * mlx5_rxtx_vec_sse.h, net_mlx5_mlx5_rxtx.c.o for mlx5_ptype_table) on an Rx
 * queue fabricated in ordinary memory.  See README.md.
 *
 * Usage: rx_harness SCENARIO|select [time|count|selftest] [BURSTS] [ROUNDS]
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
#include <valgrind/callgrind.h>

#include "mlx5_rx.h"
#include "mlx5_rxtx.h"
#include "mlx5_malloc.h"
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

/* ---- what the PMD objects reference outside themselves ----------------- */
RTE_DEFINE_PER_LCORE(unsigned int, _lcore_id) = 0;	/* EAL lcore 0 */
RTE_DEFINE_PER_LCORE(int, _rte_errno);
struct rte_eth_dev rte_eth_devices[RTE_MAX_ETHPORTS];
struct rte_mempool_ops_table rte_mempool_ops_table;
int mlx5_logtype;
uint64_t rte_flow_dynf_metadata_mask;
int32_t rte_flow_dynf_metadata_offs = -1;

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

/* EAL default (eal_common_options.c: RTE_VECT_DEFAULT_SIMD_BITWIDTH). */
uint16_t rte_vect_get_max_simd_bitwidth(void)
{
	return RTE_VECT_SIMD_256;
}

static struct mlx5_rxq_ctrl *rxq_ctrl;
static struct mlx5_rxq_data *rxq;

/* mlx5_rxq.c: the port's queue lookup (cold path, mlx5_check_vec_rx_support). */
struct mlx5_rxq_data *mlx5_rxq_data_get(struct rte_eth_dev *dev, uint16_t idx)
{
	(void)dev;
	return idx == 0 ? rxq : NULL;
}

/* Setup only (mlx5_rxq_initialize -> mlx5_rq_win_init). */
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

/* ---- mempool backend (a LIFO stack, as in harness.c) ------------------- */
#define NB_MBUF 4096
static void *stack_objs[NB_MBUF];
static unsigned stack_len;
static unsigned long backend_calls;

static int stack_enqueue(struct rte_mempool *m, void * const *objs, unsigned n)
{
	(void)m;
	backend_calls++;
	CHECK(stack_len + n <= NB_MBUF, "mempool backend overflow");
	memcpy(&stack_objs[stack_len], objs, n * sizeof(void *));
	stack_len += n;
	return 0;
}

static int stack_dequeue(struct rte_mempool *m, void **objs, unsigned n)
{
	(void)m;
	backend_calls++;
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

/* ---- fabricated queue ---------------------------------------------------- */
#define BURST 32
#define H_PKT_LEN 64
#define NB_RXD 1024
#define MBUF_DATAROOM (2048 + RTE_PKTMBUF_HEADROOM)
#define POOL_CACHE 250
#define H_LKEY 0x5a5a02u
#define H_HDR_OK 0x07		/* CQE byte 28: L2/L3/L4 OK */
#define H_HDR_TYPE 0x28		/* CQE byte 29: L4 UDP (2 << 4), L3 IPv4 (2 << 2) */
#define WANT_PTYPE (RTE_PTYPE_L2_ETHER | RTE_PTYPE_L3_IPV4_EXT_UNKNOWN | RTE_PTYPE_L4_UDP)
#define WANT_OLF (RTE_MBUF_F_RX_RSS_HASH | RTE_MBUF_F_RX_IP_CKSUM_GOOD | RTE_MBUF_F_RX_L4_CKSUM_GOOD)

static struct rte_mempool *mp;
static struct mlx5_priv *priv;
static struct rte_eth_dev_data *dev_data;
static struct mlx5_rxq_priv *rxq_priv;
static uint32_t *rq_dbrec, *cq_dbrec;
static uint8_t *mbuf_mem;
static size_t mbuf_mem_sz;
static uint32_t mr_dev_gen;
static struct mr_cache_entry bh_table[4];
static uint16_t (*burst_fn)(void *, struct rte_mbuf **, uint16_t);
static const char *burst_name;
static long measured_units;
static int vec_mode;		/* devarg rx_vec_en (1, default) */
static unsigned session;	/* 0: uncompressed; else basic-layout session size */

static void *zalloc(size_t align, size_t sz)
{
	void *p = aligned_alloc(align, (sz + align - 1) / align * align);

	CHECK(p, "oom");
	memset(p, 0, sz);
	return p;
}

static void fabricate(void)
{
	struct rte_mempool_cache *caches;
	unsigned i, desc_n, cqe_n;
	uint8_t *mem;

	/* --- mempool, as in harness.c --- */
	rte_mempool_ops_table.num_ops = 1;
	snprintf(rte_mempool_ops_table.ops[0].name, RTE_MEMPOOL_OPS_NAMESIZE, "harness_stack");
	rte_mempool_ops_table.ops[0].enqueue = stack_enqueue;
	rte_mempool_ops_table.ops[0].dequeue = stack_dequeue;
	rte_mempool_ops_table.ops[0].get_count = stack_count;
	mp = zalloc(RTE_CACHE_LINE_SIZE, sizeof(*mp) + sizeof(struct rte_pktmbuf_pool_private));
	snprintf(mp->name, sizeof(mp->name), "harness_pool");
	mp->size = NB_MBUF;
	mp->cache_size = POOL_CACHE;
	mp->elt_size = sizeof(struct rte_mbuf) + MBUF_DATAROOM;
	/* rte_mempool_create_empty without NO_CACHE_ALIGN: the object header
	 * is rounded up to a cache line, so every mbuf is 64-byte aligned
	 * (the vector Rx code does aligned 16-byte stores into the mbuf). */
	mp->header_size = RTE_ALIGN_CEIL(sizeof(struct rte_mempool_objhdr), RTE_MEMPOOL_ALIGN);
	mp->private_data_size = sizeof(struct rte_pktmbuf_pool_private);
	mp->ops_index = 0;
	mp->populated_size = NB_MBUF;
	caches = zalloc(RTE_CACHE_LINE_SIZE, sizeof(*caches) * RTE_MAX_LCORE);
	for (i = 0; i < RTE_MAX_LCORE; i++) {
		caches[i].size = POOL_CACHE;
		caches[i].flushthresh = POOL_CACHE * 3 / 2;
	}
	mp->local_cache = caches;
	((struct rte_pktmbuf_pool_private *)(mp + 1))->mbuf_data_room_size = MBUF_DATAROOM;
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

	/* --- the port --- */
	priv = zalloc(64, sizeof(*priv));
	dev_data = zalloc(64, sizeof(*dev_data));
	priv->config.rx_vec_en = vec_mode;
	priv->config.cqe_comp = 1;			/* rxq_cqe_comp_en default */
	priv->config.cqe_comp_fmt = MLX5_CQE_RESP_FORMAT_HASH;
	priv->rxqs_n = 1;
	priv->dev_data = dev_data;
	dev_data->dev_private = priv;
	dev_data->nb_rx_queues = 1;
	dev_data->dev_conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
	dev_data->dev_conf.rxmode.offloads = RTE_ETH_RX_OFFLOAD_CHECKSUM;
	rte_eth_devices[0].data = dev_data;

	/* --- the Rx queue: mlx5_rxq_new(desc = 1024, single segment,
	 * offloads CHECKSUM, RSS), rxq_alloc_elts_sprq, the DevX CQ
	 * (mlx5_rxq_create_devx_cq_resources) and mlx5_rxq_initialize --- */
	desc_n = NB_RXD + priv->config.rx_vec_en * MLX5_VPMD_DESCS_PER_LOOP;
	rxq_ctrl = zalloc(RTE_CACHE_LINE_SIZE, sizeof(*rxq_ctrl) + desc_n * sizeof(struct rte_mbuf *));
	rxq = &rxq_ctrl->rxq;
	rxq_priv = zalloc(64, sizeof(*rxq_priv));
	rxq_priv->ctrl = rxq_ctrl;
	rxq_priv->priv = priv;
	LIST_INIT(&rxq_ctrl->owners);
	LIST_INSERT_HEAD(&rxq_ctrl->owners, rxq_priv, owner_entry);
	rxq->port_id = 0;
	rxq->idx = 0;
	rxq->mp = mp;
	rxq->rxseg_n = 1;
	rxq->rxseg[0].mp = mp;
	rxq->rxseg[0].length = 2048;		/* data room - headroom */
	rxq->rxseg[0].offset = RTE_PKTMBUF_HEADROOM;
	rxq->csum = 1;				/* RTE_ETH_RX_OFFLOAD_CHECKSUM */
	rxq->hw_timestamp = 0;
	rxq->vlan_strip = 0;
	rxq->crc_present = 0;			/* KEEP_CRC not requested */
	rxq->rss_hash = 1;			/* rss_hf != 0 and mq_mode RSS */
	rxq->elts_n = log2above(NB_RXD);
	rxq->sges_n = 0;
	rxq->rq_repl_thresh = MLX5_VPMD_RXQ_RPLNSH_THRESH(desc_n);
	rxq->elts = (struct rte_mbuf *(*)[])(rxq_ctrl + 1);
	rxq->flow_meta_offset = -1;
	/* MR control: one MR covers the pool (mempool registration);
	 * mlx5_mr_mempool_populate_cache put it in cache_bh (len 2 with
	 * the null entry, so mlx5_mr_btree_len() = 1 MR: the burst
	 * routines do not rewrite the lkey of a reposted WQE) and
	 * mlx5_rxq_initialize's lookups put it in the top-half cache. */
	rxq->mr_ctrl.dev_gen_ptr = &mr_dev_gen;
	rxq->mr_ctrl.cur_gen = mr_dev_gen;
	rxq->mr_ctrl.mru = 0;
	rxq->mr_ctrl.head = 1;
	rxq->mr_ctrl.cache[0].start = (uintptr_t)mbuf_mem;
	rxq->mr_ctrl.cache[0].end = (uintptr_t)mbuf_mem + mbuf_mem_sz;
	rxq->mr_ctrl.cache[0].lkey = rte_cpu_to_be_32(H_LKEY);
	bh_table[0].lkey = UINT32_MAX;
	bh_table[1] = rxq->mr_ctrl.cache[0];
	rxq->mr_ctrl.cache_bh.table = (struct mr_cache_entry (*)[])bh_table;
	rxq->mr_ctrl.cache_bh.len = 2;
	rxq->mr_ctrl.cache_bh.size = 4;
	/* elts: rte_pktmbuf_alloc + SET_DATA_OFF/PORT/DATA_LEN/PKT_LEN */
	for (i = 0; i < NB_RXD; i++) {
		struct rte_mbuf *b = rte_pktmbuf_alloc(mp);

		CHECK(b, "alloc");
		b->data_off = RTE_PKTMBUF_HEADROOM;
		b->port = 0;
		b->data_len = 2048;
		b->pkt_len = 2048;
		b->nb_segs = 1;
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
			(*rxq->elts)[NB_RXD + i] = &rxq->fake_mbuf;
	}
	/* CQ: mlx5_rxq_cqe_num = wqe_n - 1, doubled when compression is on
	 * and the queue is not vectorised; HASH mini-CQE format. */
	cqe_n = NB_RXD - 1;
	rxq->mcqe_format = MLX5_CQE_RESP_FORMAT_HASH;
	rxq->byte_mask = UINT32_MAX;
	if (mlx5_rxq_check_vec_support(rxq) < 0)
		cqe_n *= 2;
	rxq->cqe_n = log2above(cqe_n);
	rxq->cqes = zalloc(4096, sizeof(struct mlx5_cqe) << rxq->cqe_n);
	for (i = 0; i < (1u << rxq->cqe_n); i++)	/* mlx5_devx_cq_create */
		(*rxq->cqes)[i].op_own = (MLX5_CQE_INVALID << 4) | MLX5_CQE_OWNER_MASK;
	cq_dbrec = zalloc(64, 64);
	rxq->cq_db = cq_dbrec;
	rxq->cq_ci = 0;
	rxq->cqn = 0x77;
	/* RQ: cyclic, one 16-byte data segment per WQE */
	rxq->wqes = zalloc(4096, 16 * NB_RXD);
	rq_dbrec = zalloc(64, 64);
	rxq->rq_db = rq_dbrec;
	CHECK(mlx5_rxq_initialize(rxq) == 0, "mlx5_rxq_initialize");
}

/* ---- the measured function ------------------------------------------- */
__attribute__((noinline)) uint16_t measured_rx_burst(struct rte_mbuf **pkts, uint16_t n);
__attribute__((noinline)) uint16_t measured_rx_burst(struct rte_mbuf **pkts, uint16_t n)
{
	return burst_fn(rxq, pkts, n);
}

/* ---- device model ------------------------------------------------------ */
static uint32_t hw_cq_pi;		/* CQ slots written */
static uint32_t hw_wqe_ci;		/* RQ WQEs consumed */
static uint64_t pkt_seq;		/* packets delivered */
#define EXPQ 4096
static struct { uint64_t addr; uint32_t hash; } expq[EXPQ];	/* delivered, not yet returned */
static uint64_t exp_head, exp_tail;
static unsigned long nb_cqe_slots, nb_sessions;

static uint32_t pkt_hash(uint64_t seq)
{
	uint32_t h = (uint32_t)(seq * 0x9e3779b1u) ^ 0x5bd1e995u;

	return h ? h : 1;
}

static volatile struct mlx5_cqe *slot(uint32_t i)
{
	return &(*rxq->cqes)[i & ((1u << rxq->cqe_n) - 1)];
}

/* The NIC takes the next posted WQE and writes the frame into its buffer. */
static uint16_t nic_take_wqe(uint32_t hash)
{
	volatile struct mlx5_wqe_data_seg *w =
		&((volatile struct mlx5_wqe_data_seg *)rxq->wqes)[hw_wqe_ci & (NB_RXD - 1)];
	uint64_t addr = rte_be_to_cpu_64(w->addr);
	uint16_t idx = (uint16_t)hw_wqe_ci;
	uint8_t *d = (uint8_t *)(uintptr_t)addr;
	unsigned i;

	CHECK((uint32_t)(rte_be_to_cpu_32(*rq_dbrec) - hw_wqe_ci) > 0 &&
	      (uint32_t)(rte_be_to_cpu_32(*rq_dbrec) - hw_wqe_ci) <= NB_RXD, "no posted WQE");
	CHECK(w->lkey == rte_cpu_to_be_32(H_LKEY) && rte_be_to_cpu_32(w->byte_count) == 2048,
	      "RQ WQE %u lkey/byte_count", idx);
	CHECK(addr >= (uintptr_t)mbuf_mem && addr + 2048 <= (uintptr_t)mbuf_mem + mbuf_mem_sz,
	      "RQ WQE %u addr outside the MR", idx);
	for (i = 0; i < H_PKT_LEN; i++)		/* a 64-byte frame, IPv4/UDP */
		d[i] = (uint8_t)(pkt_seq * 31 + i * 7);
	expq[exp_head % EXPQ].addr = addr;
	expq[exp_head % EXPQ].hash = hash;
	exp_head++;
	hw_wqe_ci++;
	pkt_seq++;
	return idx;
}

static void fill_common(volatile struct mlx5_cqe *c, uint32_t hash, uint16_t widx)
{
	memset((void *)(uintptr_t)c, 0, 62);
	c->pkt_info = 0;
	c->rx_hash_res = rte_cpu_to_be_32(hash);
	c->rx_hash_type = 0x0e;		/* IPv4 + UDP hashed fields (not read by the PMD) */
	((volatile uint8_t *)&c->hdr_type_etc)[0] = H_HDR_OK;
	((volatile uint8_t *)&c->hdr_type_etc)[1] = H_HDR_TYPE;
	c->wqe_counter = rte_cpu_to_be_16(widx);
}

static uint8_t owner_of(uint32_t i)
{
	return !!(i & (1u << rxq->cqe_n));
}

/* One uncompressed CQE. */
static void nic_cqe(void)
{
	uint32_t hash = pkt_hash(pkt_seq);
	volatile struct mlx5_cqe *c = slot(hw_cq_pi);
	uint16_t w = nic_take_wqe(hash);

	fill_common(c, hash, w);
	c->byte_cnt = rte_cpu_to_be_32(H_PKT_LEN);
	rte_io_wmb();
	c->op_own = MLX5_CQE_RESP_SEND << 4 | owner_of(hw_cq_pi);
	hw_cq_pi++;
	nb_cqe_slots++;
}

/* A basic-layout compressed session of n packets, HASH mini-CQE format:
 * title in slot t (common fields of the session, byte_cnt = n), mini-CQE
 * arrays of 8 in slots t+1, t+8, t+16, ...; the session covers n slots. */
static void nic_session(unsigned n)
{
	uint32_t t = hw_cq_pi, hash0 = pkt_hash(pkt_seq);
	volatile struct mlx5_cqe *title = slot(t);
	unsigned i;
	uint16_t w0 = 0;

	CHECK(n >= 2 && n <= 64 && n % 8 == 0, "session size");
	for (i = 0; i < n; i++) {
		uint32_t hash = pkt_hash(pkt_seq);
		uint16_t w = nic_take_wqe(hash);
		volatile struct mlx5_mini_cqe8 *mc =
			(volatile struct mlx5_mini_cqe8 *)slot(i < 8 ? t + 1 : t + i / 8 * 8);

		if (i == 0)
			w0 = w;
		mc[i % 8].rx_hash_result = rte_cpu_to_be_32(hash);
		mc[i % 8].byte_cnt = rte_cpu_to_be_32(H_PKT_LEN);
	}
	fill_common(title, hash0, w0);
	title->byte_cnt = rte_cpu_to_be_32(n);
	rte_io_wmb();
	title->op_own = MLX5_CQE_RESP_SEND << 4 | MLX5_COMPRESSED << 2 | owner_of(t);
	hw_cq_pi += n;
	nb_cqe_slots += n;
	nb_sessions++;
}

/* Before a burst: the NIC has received what the burst will return.
 * Uncompressed: 32 CQEs. Sessions of 8: 4 sessions. Sessions of 64:
 * one session every other burst (the PMD decompresses all 64 in the
 * first burst and returns the rest from rxq->decompressed in the next). */
static void nic_receive(void)
{
	unsigned k;

	if (!session) {
		for (k = 0; k < BURST; k++)
			nic_cqe();
	} else if (session <= BURST) {
		for (k = 0; k < BURST / session; k++)
			nic_session(session);
	} else if (exp_head - exp_tail < BURST) {
		nic_session(session);
	}
}

/* ---- checks ------------------------------------------------------------- */
struct snap {
	uint32_t cq_ci, rq_ci, rq_pi;
	uint16_t decompressed;
	uint64_t ipackets, ibytes;
	unsigned long backend_calls;
};

static void snap_take(struct snap *s)
{
	s->cq_ci = rxq->cq_ci; s->rq_ci = rxq->rq_ci; s->rq_pi = rxq->rq_pi;
	s->decompressed = vec_mode ? rxq->decompressed : 0;
	s->ipackets = rxq->stats.ipackets; s->ibytes = rxq->stats.ibytes;
	s->backend_calls = backend_calls;
}

static unsigned long nb_repl_events, nb_repl_mbufs;

static void check_burst(struct rte_mbuf **pkts, const struct snap *b, uint16_t ret, int steady)
{
	const uint32_t q_m = NB_RXD - 1;
	uint32_t j, k;

	CHECK(ret == BURST, "rx_burst returned %u, want %u", ret, BURST);
	for (k = 0; k < BURST; k++) {
		struct rte_mbuf *m = pkts[k];
		uint64_t e = exp_tail + k;

		CHECK(e < exp_head, "more packets than delivered");
		CHECK(rte_pktmbuf_mtod(m, uintptr_t) == expq[e % EXPQ].addr,
		      "packet %u: mbuf data %#lx is not the buffer the NIC wrote (%#lx)", k,
		      (unsigned long)rte_pktmbuf_mtod(m, uintptr_t), (unsigned long)expq[e % EXPQ].addr);
		CHECK(m->pkt_len == H_PKT_LEN && m->data_len == H_PKT_LEN,
		      "packet %u: pkt_len %u data_len %u", k, m->pkt_len, m->data_len);
		CHECK(m->hash.rss == expq[e % EXPQ].hash, "packet %u: rss %08x want %08x", k,
		      m->hash.rss, expq[e % EXPQ].hash);
		CHECK(m->packet_type == WANT_PTYPE, "packet %u: packet_type %#x want %#x", k,
		      m->packet_type, WANT_PTYPE);
		CHECK(m->ol_flags == WANT_OLF, "packet %u: ol_flags %#llx want %#llx", k,
		      (unsigned long long)m->ol_flags, (unsigned long long)WANT_OLF);
		CHECK(m->nb_segs == 1 && m->next == NULL && m->port == 0 &&
		      m->data_off == RTE_PKTMBUF_HEADROOM && rte_mbuf_refcnt_read(m) == 1 &&
		      m->pool == mp, "packet %u: mbuf header", k);
	}
	exp_tail += BURST;
	/* CQ: every written slot consumed; doorbell record = cq_ci. */
	CHECK(rxq->cq_ci == hw_cq_pi, "cq_ci %u, want %u", rxq->cq_ci, hw_cq_pi);
	CHECK(*cq_dbrec == rte_cpu_to_be_32(rxq->cq_ci), "CQ doorbell record %08x, cq_ci %u",
	      rte_be_to_cpu_32(*cq_dbrec), rxq->cq_ci);
	/* Compressed sessions: the PMD invalidated every slot it consumed. */
	if (session)
		for (j = b->cq_ci; j != rxq->cq_ci; j++)
			CHECK(slot(j)->op_own == MLX5_CQE_INVALIDATE,
			      "CQ slot %u op_own %02x after the session, want 0xf0", j, slot(j)->op_own);
	/* RQ: doorbell record = rq_ci; every WQE (re)posted in this burst
	 * points to a fresh mbuf in elts, with the pool's lkey. */
	CHECK(*rq_dbrec == rte_cpu_to_be_32(rxq->rq_ci), "RQ doorbell record %08x, rq_ci %u",
	      rte_be_to_cpu_32(*rq_dbrec), rxq->rq_ci);
	if (vec_mode) {
		CHECK(rxq->rq_pi == b->rq_pi + BURST, "rq_pi %u want %u", rxq->rq_pi, b->rq_pi + BURST);
		CHECK(rxq->rq_ci - rxq->rq_pi <= NB_RXD, "rq_ci %u rq_pi %u", rxq->rq_ci, rxq->rq_pi);
		if (rxq->rq_ci != b->rq_ci) {
			nb_repl_events++;
			nb_repl_mbufs += rxq->rq_ci - b->rq_ci;
		}
	} else {
		CHECK(rxq->rq_ci == b->rq_ci + BURST, "rq_ci %u want %u", rxq->rq_ci, b->rq_ci + BURST);
	}
	for (j = b->rq_ci; j != rxq->rq_ci; j++) {
		volatile struct mlx5_wqe_data_seg *w =
			&((volatile struct mlx5_wqe_data_seg *)rxq->wqes)[j & q_m];
		struct rte_mbuf *m = (*rxq->elts)[j & q_m];

		CHECK(w->addr == rte_cpu_to_be_64((uintptr_t)m->buf_addr + RTE_PKTMBUF_HEADROOM),
		      "RQ WQE %u addr is not elts' mbuf", j);
		CHECK(w->lkey == rte_cpu_to_be_32(H_LKEY) && rte_be_to_cpu_32(w->byte_count) == 2048,
		      "RQ WQE %u lkey/byte_count", j);
		for (k = 0; k < BURST; k++)
			CHECK(m != pkts[k], "RQ WQE %u reposts returned packet %u", j, k);
	}
	if (vec_mode && rxq->rq_ci != b->rq_ci)	/* replenish pads elts after rq_ci */
		for (k = 0; k < MLX5_VPMD_DESCS_PER_LOOP; k++)
			CHECK((*rxq->elts)[(rxq->rq_ci & q_m) + k] == &rxq->fake_mbuf,
			      "fake mbuf padding after rq_ci");
	/* Soft counters: counted when the CQEs are consumed (a 64-packet
	 * session is counted whole by rxq_cq_decompress_v in the burst that
	 * decompresses it); one packet per CQ slot in the basic layout. */
	CHECK(rxq->stats.ipackets == b->ipackets + (rxq->cq_ci - b->cq_ci) &&
	      rxq->stats.ibytes == b->ibytes + (uint64_t)(rxq->cq_ci - b->cq_ci) * H_PKT_LEN,
	      "soft counters +%llu +%llu for %u CQ slots",
	      (unsigned long long)(rxq->stats.ipackets - b->ipackets),
	      (unsigned long long)(rxq->stats.ibytes - b->ibytes), rxq->cq_ci - b->cq_ci);
	if (session <= BURST)
		CHECK(rxq->cq_ci - b->cq_ci == BURST, "CQ slots consumed %u", rxq->cq_ci - b->cq_ci);
	else
		CHECK(rxq->cq_ci - b->cq_ci == (b->decompressed ? 0 : session) &&
		      rxq->decompressed == (b->decompressed ? b->decompressed - BURST : session - BURST),
		      "session of %u: cq_ci +%u, decompressed %u -> %u", session,
		      rxq->cq_ci - b->cq_ci, b->decompressed, rxq->decompressed);
	if (steady)
		CHECK(backend_calls == b->backend_calls, "mempool backend called in the burst");
}

/* What the application does with the packets: free them (outside the
 * measured region): rte_pktmbuf_free_bulk's work for single-segment
 * direct mbufs, i.e. rte_pktmbuf_prefree_seg + rte_mempool_put_bulk. */
static void app_free(struct rte_mbuf **pkts)
{
	unsigned k;

	for (k = 0; k < BURST; k++)
		CHECK(rte_pktmbuf_prefree_seg(pkts[k]) == pkts[k], "prefree");
	rte_mempool_put_bulk(mp, (void **)pkts, BURST);
}

static struct rte_mbuf *pkts[BURST];

static void checked_burst(int steady)
{
	struct snap b;
	uint16_t ret;

	nic_receive();
	snap_take(&b);
	ret = measured_rx_burst(pkts, BURST);
	measured_units += BURST;
	check_burst(pkts, &b, ret, steady);
	app_free(pkts);
}

static void selftest(void)
{
	static const char *what[] = {
		"pkt_len of packet 0", "data_len of packet 31", "rss hash of packet 7",
		"packet_type of packet 3", "ol_flags of packet 30", "CQ doorbell record",
		"RQ doorbell record", "mbuf of packet 12 (another buffer)", "a reposted WQE address",
	};
	unsigned t, nt = sizeof(what) / sizeof(what[0]);

	for (t = 0; t < nt; t++) {
		pid_t pid;
		int st;

		fflush(stdout);
		pid = fork();
		CHECK(pid >= 0, "fork");
		if (pid == 0) {
			struct snap b;
			uint16_t ret;
			int i;

			freopen("/dev/null", "w", stderr);
			/* run until a burst reposts WQEs (vec: every other burst) */
			for (i = 0; i < 4; i++) {
				nic_receive();
				snap_take(&b);
				ret = measured_rx_burst(pkts, BURST);
				if (rxq->rq_ci != b.rq_ci || i == 3)
					break;
				check_burst(pkts, &b, ret, 1);
				app_free(pkts);
			}
			switch (t) {
			case 0: pkts[0]->pkt_len++; break;
			case 1: pkts[31]->data_len ^= 1; break;
			case 2: pkts[7]->hash.rss ^= 0x100; break;
			case 3: pkts[3]->packet_type ^= RTE_PTYPE_L4_UDP; break;
			case 4: pkts[30]->ol_flags ^= RTE_MBUF_F_RX_L4_CKSUM_GOOD; break;
			case 5: *cq_dbrec ^= rte_cpu_to_be_32(1); break;
			case 6: *rq_dbrec ^= rte_cpu_to_be_32(1); break;
			case 7: pkts[12] = pkts[13]; break;
			case 8: ((volatile struct mlx5_wqe_data_seg *)rxq->wqes)
					[(rxq->rq_ci - 1) & (NB_RXD - 1)].addr ^= rte_cpu_to_be_64(64); break;
			}
			check_burst(pkts, &b, ret, 1);
			_exit(0);
		}
		CHECK(waitpid(pid, &st, 0) == pid, "waitpid");
		CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT,
		      "selftest: corrupting %s was NOT detected", what[t]);
		printf("selftest: corrupting %s -> check failed as it must\n", what[t]);
	}
}

static uint64_t timed_round(long bursts)
{
	uint64_t sum = 0;
	long i;

	for (i = 0; i < bursts; i++) {
		struct snap b;
		uint64_t t0, t1;
		uint16_t ret;

		nic_receive();
		snap_take(&b);
		t0 = tsc_start();
		ret = measured_rx_burst(pkts, BURST);
		t1 = tsc_stop();
		check_burst(pkts, &b, ret, 1);
		app_free(pkts);
		sum += t1 - t0 > timer_overhead ? t1 - t0 - timer_overhead : 0;
	}
	return sum;
}

static const struct {
	const char *name;
	int vec;		/* devarg rx_vec_en */
	unsigned session;	/* 0 uncompressed, else basic session size */
} scen_tab[] = {
	{ "rx_scalar_uncompressed", 0, 0 },
	{ "rx_vec_uncompressed", 1, 0 },
	{ "rx_vec_compressed8", 1, 8 },
	{ "rx_vec_compressed64", 1, 64 },
};

static const char *fn_name(void *f)
{
	if (f == (void *)mlx5_rx_burst)
		return "mlx5_rx_burst";
	if (f == (void *)mlx5_rx_burst_vec)
		return "mlx5_rx_burst_vec";
	return "(other)";
}

int main(int argc, char **argv)
{
	const char *name = argc > 1 ? argv[1] : "";
	int timing = !(argc > 2 && (strcmp(argv[2], "count") == 0 || strcmp(argv[2], "selftest") == 0));
	long bursts = argc > 3 ? atol(argv[3]) : 2000;
	int rounds = argc > 4 ? atoi(argv[4]) : 15;
	double per[101];
	unsigned k;
	int r;

	if (strcmp(name, "select") == 0)
		log_verbose = 1;
	for (k = 0; k < sizeof(scen_tab) / sizeof(scen_tab[0]); k++)
		if (strcmp(name, scen_tab[k].name) == 0)
			break;
	if (k == sizeof(scen_tab) / sizeof(scen_tab[0]) && !log_verbose) {
		fprintf(stderr, "usage: %s SCENARIO|select [scalar] [time|count|selftest] [BURSTS] [ROUNDS]\n", argv[0]);
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
	vec_mode = log_verbose ? !(argc > 2 && strcmp(argv[2], "scalar") == 0) : scen_tab[k].vec;
	session = log_verbose ? 0 : scen_tab[k].session;
	mlx5_set_ptype_table();		/* rte_mlx5_pmd_init (mlx5.c) */
	mlx5_set_cksum_table();
	mlx5_set_swp_types_table();
	fabricate();
	/* mlx5_select_rx_function (mlx5_ethdev.c), its branches for a port
	 * without shared RQ and without MPRQ: vectorised iff the PMD's own
	 * mlx5_check_vec_rx_support(dev) > 0. */
	{
		int v = mlx5_check_vec_rx_support(&rte_eth_devices[0]);

		burst_fn = v > 0 ? mlx5_rx_burst_vec : mlx5_rx_burst;
		burst_name = fn_name((void *)burst_fn);
		CHECK(burst_fn == (vec_mode ? mlx5_rx_burst_vec : mlx5_rx_burst),
		      "selected %s", burst_name);
		if (log_verbose) {
			printf("rx_vec_en=%d mlx5_check_vec_rx_support=%d selected=%s elts_n=%u cqe_n=%u "
			       "rq_repl_thresh=%u rq_ci=%u mcqe_format=%u\n",
			       vec_mode, v, burst_name, rxq->elts_n, rxq->cqe_n, rxq->rq_repl_thresh,
			       rxq->rq_ci, rxq->mcqe_format);
			return 0;
		}
	}
	/* Preflight: 3 CQ ring wraps with full checks. */
	{
		long pre = 3L * (1 << rxq->cqe_n) / BURST, i;

		for (i = 0; i < pre; i++)
			checked_burst(i >= 4);
	}
	if (argc > 2 && strcmp(argv[2], "selftest") == 0) {
		selftest();
		printf("%s selftest checks=OK\n", name);
		return 0;
	}
	if (!timing) {
		long i;

		/* Count only the steady-state bursts: zero callgrind's
		 * counters after the preflight (a no-op natively). */
		CALLGRIND_ZERO_STATS;
		measured_units = 0;
		nb_cqe_slots = nb_sessions = nb_repl_events = nb_repl_mbufs = 0;
		for (i = 0; i < bursts; i++)
			checked_burst(1);
		printf("%s count bursts=%ld measured_units=%ld (packets) routine=%s cqe_s=%u "
		       "elts_s=%u after preflight: cqe_slots_written=%lu sessions=%lu replenish_events=%lu "
		       "replenished_mbufs=%lu checks=OK\n",
		       name, bursts, measured_units, burst_name, 1u << rxq->cqe_n, 1u << rxq->elts_n,
		       nb_cqe_slots, nb_sessions, nb_repl_events, nb_repl_mbufs);
		return 0;
	}
	calibrate(20001);
	timed_round(bursts);
	for (r = 0; r < rounds; r++)
		per[r] = (double)timed_round(bursts) / (bursts * BURST) / tsc_per_ns;
	qsort(per, rounds, sizeof(per[0]), cmp_dbl);
	printf("%s time bursts/round=%ld rounds=%d ns/packet median=%.2f min=%.2f max=%.2f "
	       "(tsc %.4f GHz, timer overhead %llu cycles subtracted per window) routine=%s checks=OK\n",
	       name, bursts, rounds, per[rounds / 2], per[0], per[rounds - 1], tsc_per_ns,
	       (unsigned long long)timer_overhead, burst_name);
	return 0;
}
