/*
 * rx_common.h - what the two Rx harnesses share, included once by each:
 * rx_harness.c (cyclic RQ) and rx_mprq_harness.c (Multi-Packet RQ).  Each
 * harness is one translation unit, so everything here is static (except
 * the symbols the PMD objects link against, and measured_rx_burst).
 *
 *  - the includes and the aborting CHECK (the self-tests rely on abort);
 *  - what the PMD objects reference outside themselves (rte_log, the
 *    per-lcore variables, mlx5_malloc, mlx5_rxq_data_get, ...);
 *  - the mempool: LIFO-stack backends, the object layout of
 *    rte_mempool_calc_obj_size (make_pool, pool_obj) and the application's
 *    mbuf pool (make_mbuf_pool);
 *  - the port / queue / MR / elts / CQ / RQ fabrication steps both queues
 *    take alike;
 *  - the measured wrapper measured_rx_burst;
 *  - the device model's common part (pkt_hash, slot, owner_of,
 *    fill_common, nic_receive);
 *  - the burst drivers: checked_burst, timed_round, the self-test's
 *    fork loop (run_selftest) and main's common steps.
 *
 * A harness defines, after including this: nic_cqe, nic_session,
 * struct snap with snap_take (into snap_b) and check_burst (from snap_b),
 * fabricate.  The differences are the parameters of the functions here.
 */
#ifndef RX_COMMON_H
#define RX_COMMON_H

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

/* mlx5_rxq.c: the port's queue lookup (cold paths: mlx5_check_vec_rx_support,
 * and for MPRQ mlx5_mprq_enabled).  Only queue 0 is fabricated; other
 * configured queues are skipped (NULL) by those loops. */
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

static void *zalloc(size_t align, size_t sz)
{
	void *p = aligned_alloc(align, (sz + align - 1) / align * align);

	CHECK(p, "oom");
	memset(p, 0, sz);
	return p;
}

/* ---- the fabricated queues' common constants ---------------------------- */
#define BURST 32
#define H_PKT_LEN 64
#define NB_RXD 1024			/* rte_eth_rx_queue_setup nb_rx_desc */
#define NB_MBUF 4096
#define MBUF_DATAROOM (2048 + RTE_PKTMBUF_HEADROOM)
#define POOL_CACHE 250
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

/* ---- mempool backends (LIFO stacks, as in harness.c) ------------------- */
struct stack {
	void **objs;
	unsigned len, cap;
	unsigned long calls;
};
static struct stack mbuf_stack;	/* ops_index 0: the application's mbuf pool */

static int stack_enqueue(struct stack *s, void * const *objs, unsigned n)
{
	s->calls++;
	CHECK(s->len + n <= s->cap, "mempool backend overflow");
	memcpy(&s->objs[s->len], objs, n * sizeof(void *));
	s->len += n;
	return 0;
}

static int stack_dequeue(struct stack *s, void **objs, unsigned n)
{
	s->calls++;
	if (s->len < n)
		return -ENOBUFS;
	s->len -= n;
	memcpy(objs, &s->objs[s->len], n * sizeof(void *));
	return 0;
}

static int mbuf_enq(struct rte_mempool *m, void * const *o, unsigned n) { (void)m; return stack_enqueue(&mbuf_stack, o, n); }
static int mbuf_deq(struct rte_mempool *m, void **o, unsigned n) { (void)m; return stack_dequeue(&mbuf_stack, o, n); }
static unsigned mbuf_cnt(const struct rte_mempool *m) { (void)m; return mbuf_stack.len; }

/* Register the backend of ops_index idx. */
static void set_pool_ops(unsigned idx, const char *name,
			 int (*enq)(struct rte_mempool *, void * const *, unsigned),
			 int (*deq)(struct rte_mempool *, void **, unsigned),
			 unsigned (*cnt)(const struct rte_mempool *))
{
	snprintf(rte_mempool_ops_table.ops[idx].name, RTE_MEMPOOL_OPS_NAMESIZE, "%s", name);
	rte_mempool_ops_table.ops[idx].enqueue = enq;
	rte_mempool_ops_table.ops[idx].dequeue = deq;
	rte_mempool_ops_table.ops[idx].get_count = cnt;
}

static unsigned gcd(unsigned a, unsigned b)
{
	while (b) {
		unsigned c = a % b;

		a = b;
		b = c;
	}
	return a;
}

/* rte_mempool_calc_obj_size (flags 0): header rounded up to a cache line,
 * element rounded up to 8 then the whole to cache lines, and the trailer
 * that makes the number of lines coprime with 4 channels x 1 rank
 * (arch_mem_object_align).  (For the mbuf pool: 64 + 2304 B = 37 lines,
 * no trailer; every mbuf is 64-byte aligned, which the vector Rx code's
 * aligned 16-byte stores into the mbuf need.) */
static size_t obj_total(size_t elt, uint32_t *hdr, uint32_t *elt_size, uint32_t *trailer)
{
	size_t lines;

	*hdr = RTE_ALIGN_CEIL(sizeof(struct rte_mempool_objhdr), RTE_MEMPOOL_ALIGN);
	*elt_size = RTE_ALIGN_CEIL(elt, sizeof(uint64_t));
	lines = (*hdr + *elt_size + RTE_MEMPOOL_ALIGN - 1) / RTE_MEMPOOL_ALIGN;
	while (gcd(lines, 4) != 1)
		lines++;
	*trailer = lines * RTE_MEMPOOL_ALIGN - *hdr - *elt_size;
	return lines * RTE_MEMPOOL_ALIGN;
}

/* A mempool of n objects of elt bytes with a per-lcore cache, backend
 * ops_index, priv_sz private bytes after the struct; its object memory
 * (*memp, *memsz) is aligned to mem_align. */
static struct rte_mempool *make_pool(const char *name, unsigned n, size_t elt, unsigned cache,
				     unsigned ops_index, size_t priv_sz, size_t mem_align,
				     uint8_t **memp, size_t *memsz)
{
	struct rte_mempool *m = zalloc(RTE_CACHE_LINE_SIZE, sizeof(*m) + priv_sz);
	struct rte_mempool_cache *caches;
	size_t total;
	unsigned i;

	snprintf(m->name, sizeof(m->name), "%s", name);
	m->size = n;
	m->cache_size = cache;
	total = obj_total(elt, &m->header_size, &m->elt_size, &m->trailer_size);
	m->private_data_size = priv_sz;
	m->ops_index = ops_index;
	m->populated_size = n;
	caches = zalloc(RTE_CACHE_LINE_SIZE, sizeof(*caches) * RTE_MAX_LCORE);
	for (i = 0; i < RTE_MAX_LCORE; i++) {
		caches[i].size = cache;
		caches[i].flushthresh = cache * 3 / 2;
	}
	m->local_cache = caches;
	*memsz = (size_t)n * total;
	*memp = zalloc(mem_align, *memsz);
	return m;
}

static void *pool_obj(struct rte_mempool *m, uint8_t *mem, unsigned i)
{
	size_t total = m->header_size + m->elt_size + m->trailer_size;
	struct rte_mempool_objhdr *h = (void *)(mem + (size_t)i * total +
						m->header_size - sizeof(*h));
	void *o = mem + (size_t)i * total + m->header_size;

	h->mp = m;
	h->iova = (rte_iova_t)(uintptr_t)o;
	return o;
}

/* The application's mbuf pool (rte_pktmbuf_pool_create, cache 250,
 * backend ops_index 0) and rte_pktmbuf_init of every mbuf, all pushed on
 * mbuf_stack.  Its object memory is aligned to mem_align; the stack's
 * array is stack_objs (NB_MBUF entries), or allocated here if NULL. */
static void make_mbuf_pool(size_t mem_align, void **stack_objs)
{
	unsigned i;

	mp = make_pool("harness_pool", NB_MBUF, sizeof(struct rte_mbuf) + MBUF_DATAROOM, POOL_CACHE, 0,
		       sizeof(struct rte_pktmbuf_pool_private), mem_align, &mbuf_mem, &mbuf_mem_sz);
	((struct rte_pktmbuf_pool_private *)(mp + 1))->mbuf_data_room_size = MBUF_DATAROOM;
	mbuf_stack.cap = NB_MBUF;
	mbuf_stack.objs = stack_objs ? stack_objs : zalloc(64, NB_MBUF * sizeof(void *));
	for (i = 0; i < NB_MBUF; i++) {		/* rte_pktmbuf_init */
		struct rte_mbuf *m = pool_obj(mp, mbuf_mem, i);

		CHECK(((uintptr_t)m & 63) == 0, "mbuf not cache-aligned");
		m->buf_addr = (char *)(m + 1);
		m->buf_iova = (rte_iova_t)(uintptr_t)m->buf_addr;
		m->buf_len = MBUF_DATAROOM;
		m->data_off = RTE_PKTMBUF_HEADROOM;
		m->pool = mp;
		m->nb_segs = 1;
		m->port = RTE_MBUF_PORT_INVALID;
		rte_mbuf_refcnt_set(m, 1);
		mbuf_stack.objs[mbuf_stack.len++] = m;
	}
}

/* ---- fabrication steps both queues take alike --------------------------- */

/* The port: nb_rxqs Rx queues, RSS, offloads CHECKSUM, CQE compression on
 * with the default HASH format, rx_vec_en = vec_mode. */
static void make_port(unsigned nb_rxqs)
{
	priv = zalloc(64, sizeof(*priv));
	dev_data = zalloc(64, sizeof(*dev_data));
	priv->config.rx_vec_en = vec_mode;
	priv->config.cqe_comp = 1;			/* rxq_cqe_comp_en default */
	priv->config.cqe_comp_fmt = MLX5_CQE_RESP_FORMAT_HASH;	/* default (0) */
	priv->rxqs_n = nb_rxqs;
	priv->dev_data = dev_data;
	dev_data->dev_private = priv;
	dev_data->nb_rx_queues = nb_rxqs;
	dev_data->dev_conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
	dev_data->dev_conf.rxmode.offloads = RTE_ETH_RX_OFFLOAD_CHECKSUM;
	rte_eth_devices[0].data = dev_data;
}

/* mlx5_rxq_new: queue 0 of the port, single segment from mp, offloads
 * CHECKSUM, RSS; desc_n elts entries, and ctrl_extra more bytes after
 * them; elts_n is the caller's. */
static void make_rxq(unsigned desc_n, size_t ctrl_extra)
{
	rxq_ctrl = zalloc(RTE_CACHE_LINE_SIZE, sizeof(*rxq_ctrl) + desc_n * sizeof(struct rte_mbuf *) +
			  ctrl_extra);
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
	rxq->sges_n = 0;
	rxq->csum = 1;				/* RTE_ETH_RX_OFFLOAD_CHECKSUM */
	rxq->hw_timestamp = 0;
	rxq->vlan_strip = 0;
	rxq->crc_present = 0;			/* KEEP_CRC not requested */
	rxq->rss_hash = 1;			/* rss_hf != 0 and mq_mode RSS */
	rxq->rq_repl_thresh = MLX5_VPMD_RXQ_RPLNSH_THRESH(desc_n);
	rxq->elts = (struct rte_mbuf *(*)[])(rxq_ctrl + 1);
	rxq->flow_meta_offset = -1;
}

/* MR control with one MR [start, start + len) of lkey (CPU order): in
 * cache_bh with the null entry (len 2, so mlx5_mr_btree_len() = 1 MR: the
 * burst routines do not rewrite the lkey of a reposted WQE), and in the
 * top-half cache[0], as mlx5_rxq_initialize's lookups leave it. */
static void set_one_mr(const uint8_t *start, size_t len, uint32_t lkey)
{
	rxq->mr_ctrl.dev_gen_ptr = &mr_dev_gen;
	rxq->mr_ctrl.cur_gen = mr_dev_gen;
	rxq->mr_ctrl.mru = 0;
	rxq->mr_ctrl.head = 1;
	rxq->mr_ctrl.cache[0].start = (uintptr_t)start;
	rxq->mr_ctrl.cache[0].end = (uintptr_t)start + len;
	rxq->mr_ctrl.cache[0].lkey = rte_cpu_to_be_32(lkey);
	bh_table[0].lkey = UINT32_MAX;
	bh_table[1] = rxq->mr_ctrl.cache[0];
	rxq->mr_ctrl.cache_bh.table = (struct mr_cache_entry (*)[])bh_table;
	rxq->mr_ctrl.cache_bh.len = 2;
	rxq->mr_ctrl.cache_bh.size = 4;
}

/* rxq_alloc_elts_sprq: n mbufs in elts (rte_pktmbuf_alloc +
 * SET_DATA_OFF/PORT/DATA_LEN/PKT_LEN), and the vector padding (fake_mbuf
 * after elts, mbuf_initializer) when the queue is vectorised. */
static void alloc_elts(unsigned n)
{
	unsigned i;

	for (i = 0; i < n; i++) {
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
			(*rxq->elts)[n + i] = &rxq->fake_mbuf;
	}
}

/* The DevX CQ: mlx5_rxq_cqe_num = cqe_n (already doubled by the caller
 * when it applies), every CQE invalid and hardware-owned
 * (mlx5_devx_cq_create), its doorbell record, cq_ci 0. */
static void make_cq(unsigned cqe_n)
{
	unsigned i;

	rxq->cqe_n = log2above(cqe_n);
	rxq->cqes = zalloc(4096, sizeof(struct mlx5_cqe) << rxq->cqe_n);
	for (i = 0; i < (1u << rxq->cqe_n); i++)	/* mlx5_devx_cq_create */
		(*rxq->cqes)[i].op_own = (MLX5_CQE_INVALID << 4) | MLX5_CQE_OWNER_MASK;
	cq_dbrec = zalloc(64, 64);
	rxq->cq_db = cq_dbrec;
	rxq->cq_ci = 0;
	rxq->cqn = 0x77;
}

/* The RQ: wqes_sz zeroed bytes of WQEs and the doorbell record; the PMD's
 * own mlx5_rxq_initialize writes the WQEs. */
static void make_rq(size_t wqes_sz)
{
	rxq->wqes = zalloc(4096, wqes_sz);
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

/* ---- device model, common part ------------------------------------------ */
static uint32_t hw_cq_pi;		/* CQ slots written */
static uint64_t pkt_seq;		/* packets delivered */
#define EXPQ 4096
static uint64_t exp_head, exp_tail;	/* expq (the harness's): delivered, not yet returned */
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

static uint8_t owner_of(uint32_t i)
{
	return !!(i & (1u << rxq->cqe_n));
}

/* The CQE fields every CQE (and title) has: wqe_id (0 on the cyclic RQ),
 * wqe_counter (cyclic: the WQE index; MPRQ: the stride index), the RSS
 * hash, and the L3/L4 header bytes. */
static void fill_common(volatile struct mlx5_cqe *c, uint32_t hash, uint16_t wqe_id,
			uint16_t wqe_counter)
{
	memset((void *)(uintptr_t)c, 0, 62);
	c->pkt_info = 0;
	c->wqe_id = rte_cpu_to_be_16(wqe_id);
	c->rx_hash_res = rte_cpu_to_be_32(hash);
	c->rx_hash_type = 0x0e;		/* IPv4 + UDP hashed fields (not read by the PMD) */
	((volatile uint8_t *)&c->hdr_type_etc)[0] = H_HDR_OK;
	((volatile uint8_t *)&c->hdr_type_etc)[1] = H_HDR_TYPE;
	c->wqe_counter = rte_cpu_to_be_16(wqe_counter);
}

/* Mini-CQE i of the session whose title is in slot t: arrays of 8 in
 * slots t+1, t+8, t+16, ... */
static volatile struct mlx5_mini_cqe8 *mini_at(uint32_t t, unsigned i)
{
	return &((volatile struct mlx5_mini_cqe8 *)slot(i < 8 ? t + 1 : t + i / 8 * 8))[i % 8];
}

/* Hand the CQE c, filled, in slot hw_cq_pi to the PMD: its byte_cnt, then
 * after a write barrier its op_own (a plain CQE, or the title of a
 * compressed session of nslots slots); the NIC moves on nslots slots. */
static void nic_publish(volatile struct mlx5_cqe *c, uint32_t byte_cnt, int compressed,
			unsigned nslots)
{
	uint32_t t = hw_cq_pi;

	c->byte_cnt = rte_cpu_to_be_32(byte_cnt);
	rte_io_wmb();
	c->op_own = MLX5_CQE_RESP_SEND << 4 | (compressed ? MLX5_COMPRESSED << 2 : 0) | owner_of(t);
	hw_cq_pi += nslots;
	nb_cqe_slots += nslots;
	if (compressed)
		nb_sessions++;
}

/* The harness's: one uncompressed CQE; a basic-layout compressed session
 * of n packets. */
static void nic_cqe(void);
static void nic_session(unsigned n);

/* Before a burst: the NIC has received what the burst will return.
 * Uncompressed: 32 CQEs. Sessions of 8: 4 sessions. Sessions of 64:
 * one session every other burst (the PMD decompresses all 64 in the
 * first burst and returns the rest in the next). */
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

/* ---- burst drivers -------------------------------------------------------- */
/* The harness's: snap_take records the queue state before a burst (in its
 * snap_b), check_burst checks the burst against it (aborts on mismatch;
 * steady: no mempool backend call allowed). */
static void snap_take(void);
static void check_burst(struct rte_mbuf **pkts, uint16_t ret, int steady);

static unsigned long nb_repl_events, nb_repl_mbufs;

/* Packet k's RSS hash (want_rss), packet_type and ol_flags. */
static void check_pkt_meta(const struct rte_mbuf *m, unsigned k, uint32_t want_rss)
{
	CHECK(m->hash.rss == want_rss, "packet %u: rss %08x want %08x", k, m->hash.rss, want_rss);
	CHECK(m->packet_type == WANT_PTYPE, "packet %u: packet_type %#x want %#x", k,
	      m->packet_type, WANT_PTYPE);
	CHECK(m->ol_flags == WANT_OLF, "packet %u: ol_flags %#llx want %#llx", k,
	      (unsigned long long)m->ol_flags, (unsigned long long)WANT_OLF);
}

/* A doorbell record (what: "CQ" / "RQ") = htobe32 of its index ci. */
static void check_dbrec(const uint32_t *rec, uint32_t ci, const char *what)
{
	CHECK(*rec == rte_cpu_to_be_32(ci), "%s doorbell record %08x, index %u", what,
	      rte_be_to_cpu_32(*rec), ci);
}

/* The vector padding: the MLX5_VPMD_DESCS_PER_LOOP elts entries after
 * index ci (masked by mask) are &fake_mbuf. */
static void check_fake_padding(uint32_t ci, uint32_t mask)
{
	unsigned k;

	for (k = 0; k < MLX5_VPMD_DESCS_PER_LOOP; k++)
		CHECK((*rxq->elts)[(ci & mask) + k] == &rxq->fake_mbuf, "fake mbuf padding after %u", ci);
}

/* Soft counters: + want_pkts packets of H_PKT_LEN bytes since the snapshot
 * (ipackets0, ibytes0). */
static void check_soft_counters(uint64_t ipackets0, uint64_t ibytes0, uint32_t want_pkts)
{
	CHECK(rxq->stats.ipackets == ipackets0 + want_pkts &&
	      rxq->stats.ibytes == ibytes0 + (uint64_t)want_pkts * H_PKT_LEN,
	      "soft counters +%llu +%llu, want +%u packets",
	      (unsigned long long)(rxq->stats.ipackets - ipackets0),
	      (unsigned long long)(rxq->stats.ibytes - ibytes0), want_pkts);
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
	uint16_t ret;

	nic_receive();
	snap_take();
	ret = measured_rx_burst(pkts, BURST);
	measured_units += BURST;
	check_burst(pkts, ret, steady);
	app_free(pkts);
}

/* For each of the nt corruptions what[t], in a child process: run until a
 * burst reposts a WQE (rq_ci moves; at most 4 bursts), corrupt(t) that
 * burst's result, check it: the child must abort. */
static void run_selftest(const char *const *what, unsigned nt, void (*corrupt)(unsigned t))
{
	unsigned t;

	for (t = 0; t < nt; t++) {
		pid_t pid;
		int st;

		fflush(stdout);
		pid = fork();
		CHECK(pid >= 0, "fork");
		if (pid == 0) {
			uint32_t rq_ci;
			uint16_t ret;
			int i;

			freopen("/dev/null", "w", stderr);
			for (i = 0; i < 4; i++) {
				nic_receive();
				snap_take();
				rq_ci = rxq->rq_ci;
				ret = measured_rx_burst(pkts, BURST);
				if (rxq->rq_ci != rq_ci || i == 3)
					break;
				check_burst(pkts, ret, 1);
				app_free(pkts);
			}
			corrupt(t);
			check_burst(pkts, ret, 1);
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
		uint64_t t0, t1;
		uint16_t ret;

		nic_receive();
		snap_take();
		t0 = tsc_start();
		ret = measured_rx_burst(pkts, BURST);
		t1 = tsc_stop();
		check_burst(pkts, ret, 1);
		app_free(pkts);
		sum += t1 - t0 > timer_overhead ? t1 - t0 - timer_overhead : 0;
	}
	return sum;
}

/* ---- main's common steps ------------------------------------------------ */
struct rx_scen {
	const char *name;
	int vec;		/* devarg rx_vec_en */
	unsigned session;	/* 0 uncompressed, else basic session size */
};

static const char *fn_name(void *f)
{
	if (f == (void *)mlx5_rx_burst)
		return "mlx5_rx_burst";
	if (f == (void *)mlx5_rx_burst_vec)
		return "mlx5_rx_burst_vec";
	if (f == (void *)mlx5_rx_burst_mprq)
		return "mlx5_rx_burst_mprq";
	if (f == (void *)mlx5_rx_burst_mprq_vec)
		return "mlx5_rx_burst_mprq_vec";
	return "(other)";
}

/* mlx5_select_rx_function's choice fn: must be want (the routine the
 * scenario's devargs select). */
static void set_burst_fn(uint16_t (*fn)(void *, struct rte_mbuf **, uint16_t),
			 uint16_t (*want)(void *, struct rte_mbuf **, uint16_t))
{
	burst_fn = fn;
	burst_name = fn_name((void *)burst_fn);
	CHECK(burst_fn == want, "selected %s", burst_name);
}

static void fabricate(void);

/* Arguments: SCENARIO|select [scalar] [time|count|selftest] [BURSTS]
 * [ROUNDS] against the harness's scenarios tab[0..n-1]; pins the CPU when
 * timing; sets vec_mode and session; the ptype/cksum/swp tables as
 * rte_mlx5_pmd_init sets them; fabricate(). Returns 0, or 1 after the
 * usage message. */
static int rx_setup(int argc, char **argv, const struct rx_scen *tab, unsigned n,
		    int *timing, long *bursts, int *rounds)
{
	const char *name = argc > 1 ? argv[1] : "";
	unsigned k;

	*timing = !(argc > 2 && (strcmp(argv[2], "count") == 0 || strcmp(argv[2], "selftest") == 0));
	*bursts = argc > 3 ? atol(argv[3]) : 2000;
	*rounds = argc > 4 ? atoi(argv[4]) : 15;
	if (strcmp(name, "select") == 0)
		log_verbose = 1;
	for (k = 0; k < n; k++)
		if (strcmp(name, tab[k].name) == 0)
			break;
	if (k == n && !log_verbose) {
		fprintf(stderr, "usage: %s SCENARIO|select [scalar] [time|count|selftest] [BURSTS] [ROUNDS]\n", argv[0]);
		return 1;
	}
	if (*rounds < 1 || *rounds > 101)
		*rounds = 15;
	if (*timing && !log_verbose) {
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET(sched_getcpu(), &set);
		sched_setaffinity(0, sizeof(set), &set);
	}
	vec_mode = log_verbose ? !(argc > 2 && strcmp(argv[2], "scalar") == 0) : tab[k].vec;
	session = log_verbose ? 0 : tab[k].session;
	mlx5_set_ptype_table();		/* rte_mlx5_pmd_init (mlx5.c) */
	mlx5_set_cksum_table();
	mlx5_set_swp_types_table();
	fabricate();
	return 0;
}

/* Preflight: 3 CQ ring wraps with full checks (the mempool backends may
 * be called in the first 4 bursts). */
static void preflight(void)
{
	long pre = 3L * (1 << rxq->cqe_n) / BURST, i;

	for (i = 0; i < pre; i++)
		checked_burst(i >= 4);
}

/* Count mode: bursts checked bursts after zeroing callgrind's counters
 * (a no-op natively) and the common counters; the harness zeroes its own
 * before and prints after. */
static void count_bursts(long bursts)
{
	long i;

	CALLGRIND_ZERO_STATS;
	measured_units = 0;
	nb_cqe_slots = nb_sessions = nb_repl_events = nb_repl_mbufs = 0;
	for (i = 0; i < bursts; i++)
		checked_burst(1);
}

/* Time mode: calibrate, one warm-up round, then rounds rounds of bursts
 * bursts, per[] sorted (ns per packet).  With ghz0/ghz1, the core clock
 * (core_ghz) before the warm-up and after the last round. */
static void time_rounds(long bursts, int rounds, double *per, double *ghz0, double *ghz1)
{
	int r;

	calibrate(20001);
	if (ghz0)
		*ghz0 = core_ghz();
	timed_round(bursts);
	for (r = 0; r < rounds; r++)
		per[r] = (double)timed_round(bursts) / (bursts * BURST) / tsc_per_ns;
	if (ghz1)
		*ghz1 = core_ghz();
	qsort(per, rounds, sizeof(per[0]), cmp_dbl);
}

#endif /* RX_COMMON_H */
