/*
 * Head-to-head harness, Rx side, Multi-Packet (striding) RQ: DPDK 22.11's
 * mlx5 MPRQ Rx bursts from Debian 12's librte_net_mlx5.a object code
 * (net_mlx5_mlx5_rx.c.o: mlx5_rx_burst_mprq and mlx5_rxq_initialize;
 * net_mlx5_mlx5_rxtx_vec.c.o: mlx5_rx_burst_mprq_vec with
 * rxq_copy_mprq_mbuf_v and the SSE routines of mlx5_rxtx_vec_sse.h;
 * net_mlx5_mlx5_rxtx.c.o: mlx5_ptype_table) on a striding RQ of
 * 16 WQEs x 64 strides x 2 KiB fabricated in ordinary memory.  It follows
 * rx_harness.c (the cyclic-RQ scenarios); see README.md, "MPRQ".
 *
 * Usage: rx_mprq_harness SCENARIO|select [scalar] [time|count|selftest] [BURSTS] [ROUNDS]
 */
#include "rx_common.h"

/* mlx5_rxq.c: mlx5_mprq_enabled's lookup (cold path, at selection). The
 * port has NB_RXQS queues configured alike; only queue 0 is fabricated,
 * the others are skipped (NULL). */
struct mlx5_rxq_ctrl *mlx5_rxq_ctrl_get(struct rte_eth_dev *dev, uint16_t idx)
{
	(void)dev;
	return idx == 0 ? rxq_ctrl : NULL;
}

/* ---- the MPRQ mempool's backend (a LIFO stack, as in harness.c) -------- */
#define NB_MPRQ_BUF 96		/* mlx5_mprq_alloc_mp: 4 x 16 WQEs + 32 (cache) */

static struct stack mprq_stack;

static int mprq_enq(struct rte_mempool *m, void * const *o, unsigned n) { (void)m; return stack_enqueue(&mprq_stack, o, n); }
static int mprq_deq(struct rte_mempool *m, void **o, unsigned n) { (void)m; return stack_dequeue(&mprq_stack, o, n); }
static unsigned mprq_cnt(const struct rte_mempool *m) { (void)m; return mprq_stack.len; }

/* ---- fabricated queue ---------------------------------------------------- */
#define NB_RXQS 12			/* the port's Rx queues: >= rxqs_min_mprq (12) */
#define LOG_STRD_NUM MLX5_MPRQ_DEFAULT_LOG_STRIDE_NUM	/* 6: 64 strides */
#define LOG_STRD_SZ 11			/* log2above(1518 + 128): 2 KiB */
#define STRD_N (1u << LOG_STRD_NUM)
#define STRD_SZ (1u << LOG_STRD_SZ)
#define WQ_N (NB_RXD >> LOG_STRD_NUM)	/* 16 WQEs */
#define ELTS_N (WQ_N * STRD_N)		/* 1024 mbufs in elts */
#define MPRQ_POOL_CACHE MLX5_MPRQ_MP_CACHE_SZ	/* 32 */
#define MPRQ_LKEY 0x5a5a03u
#define H_MPRQ_BYTE_CNT ((1u << MLX5_MPRQ_STRIDE_NUM_SHIFT) | H_PKT_LEN) /* filler 0, 1 stride, 64 B */

static struct rte_mempool *mprq_mp;
static uint8_t *mprq_mem;
static size_t mprq_mem_sz;
static struct mlx5_mprq_buf *init_bufs[WQ_N], *init_repl;

static void fabricate(void)
{
	unsigned i, desc_n, cqe_n;
	size_t mprq_obj;

	/* --- mempool backends --- */
	rte_mempool_ops_table.num_ops = 2;
	set_pool_ops(0, "harness_stack", mbuf_enq, mbuf_deq, mbuf_cnt);
	set_pool_ops(1, "harness_stack_mprq", mprq_enq, mprq_deq, mprq_cnt);

	/* --- the application's mbuf pool (rte_pktmbuf_pool_create, cache 250) --- */
	make_mbuf_pool(4096, NULL);

	/* --- the port: devargs mprq_en=1, otherwise defaults --- */
	make_port(NB_RXQS);
	priv->config.mprq.enabled = 1;			/* mprq_en=1 */
	priv->config.mprq.log_stride_num = MLX5_MPRQ_DEFAULT_LOG_STRIDE_NUM;
	priv->config.mprq.log_stride_size = MLX5_ARG_UNSET;
	priv->config.mprq.max_memcpy_len = MLX5_MPRQ_MEMCPY_DEFAULT_LEN;
	priv->config.mprq.min_rxqs_num = MLX5_MPRQ_MIN_RXQS;
	dev_data->mtu = RTE_ETHER_MTU;
	CHECK(mlx5_check_mprq_support(&rte_eth_devices[0]) == 1, "mlx5_check_mprq_support");
	/* mlx5_mprq_prepare: stride number = devarg default 6; stride size
	 * unset, so log2above(max_rx_pktlen + headroom) = log2above(1518 + 128). */
	CHECK(log2above(RTE_ETHER_MTU + RTE_ETHER_HDR_LEN + RTE_ETHER_CRC_LEN +
			RTE_PKTMBUF_HEADROOM) == LOG_STRD_SZ, "stride size");

	/* --- mlx5_rxq_new(desc = 1024) with MPRQ: desc >>= log_strd_num --- */
	desc_n = NB_RXD + priv->config.rx_vec_en * MLX5_VPMD_DESCS_PER_LOOP;
	make_rxq(desc_n, WQ_N * sizeof(struct mlx5_mprq_buf *));
	rxq->log_strd_num = LOG_STRD_NUM;
	rxq->log_strd_sz = LOG_STRD_SZ;
	rxq->strd_shift_en = MLX5_MPRQ_TWO_BYTE_SHIFT;	/* 0 */
	rxq->strd_scatter_en = 0;			/* no RTE_ETH_RX_OFFLOAD_SCATTER */
	rxq->mprq_max_memcpy_len = RTE_MIN(2048u, priv->config.mprq.max_memcpy_len);
	rxq->lro = 0;
	rxq->elts_n = log2above(WQ_N);		/* 4 */
	rxq->mprq_bufs = (struct mlx5_mprq_buf *(*)[])(*rxq->elts + desc_n);
	CHECK(mlx5_rxq_mprq_enabled(rxq), "MPRQ not enabled on the queue");

	/* --- mlx5_mprq_alloc_mp: "port-0-mprq", cache 32, objects of
	 * mlx5_mprq_buf + 64 shinfos + headroom + 64 x 2 KiB, initialised by
	 * mlx5_mprq_buf_init; registered as one MR (lkey MPRQ_LKEY). --- */
	mprq_obj = sizeof(struct mlx5_mprq_buf) + STRD_N * STRD_SZ +
		   STRD_N * sizeof(struct rte_mbuf_ext_shared_info) + RTE_PKTMBUF_HEADROOM;
	mprq_mp = make_pool("port-0-mprq", NB_MPRQ_BUF, mprq_obj, MPRQ_POOL_CACHE, 1, 0, 4096,
			    &mprq_mem, &mprq_mem_sz);
	mprq_stack.cap = NB_MPRQ_BUF;
	mprq_stack.objs = zalloc(64, NB_MPRQ_BUF * sizeof(void *));
	for (i = 0; i < NB_MPRQ_BUF; i++) {	/* mlx5_mprq_buf_init */
		struct mlx5_mprq_buf *b = pool_obj(mprq_mp, mprq_mem, i);
		unsigned j;

		memset(b, 0, sizeof(*b));
		b->mp = mprq_mp;
		__atomic_store_n(&b->refcnt, 1, __ATOMIC_RELAXED);
		for (j = 0; j < STRD_N; j++) {
			b->shinfos[j].free_cb = mlx5_mprq_buf_free_cb;
			b->shinfos[j].fcb_opaque = b;
		}
		mprq_stack.objs[mprq_stack.len++] = b;
	}
	priv->mprq_mp = mprq_mp;
	rxq->mprq_mp = mprq_mp;

	/* --- MR control (mlx5_rxq_mempool_register for MPRQ: the MPRQ
	 * mempool only; one MR, so cache_bh has the null entry + it, len 2,
	 * and mlx5_mr_btree_len() = 1: a replaced WQE would keep its lkey).
	 * The top-half cache[0] holds it, as mlx5_rxq_initialize's
	 * mlx5_rx_addr2mr lookups leave it. --- */
	set_one_mr(mprq_mem, mprq_mem_sz, MPRQ_LKEY);

	/* --- rxq_alloc_elts -> rxq_alloc_elts_mprq: 16 MPRQ buffers + the
	 * stashed replacement, with rte_mempool_get as the PMD does --- */
	for (i = 0; i <= WQ_N; i++) {
		struct mlx5_mprq_buf *b;

		CHECK(rte_mempool_get(mprq_mp, (void **)&b) == 0, "mprq get");
		if (i < WQ_N)
			(*rxq->mprq_bufs)[i] = init_bufs[i] = b;
		else
			rxq->mprq_repl = init_repl = b;
	}
	/* --- then rxq_alloc_elts_sprq: 16 x 64 = 1024 mbufs in elts
	 * (rte_pktmbuf_alloc + SET_DATA_OFF/PORT/DATA_LEN/PKT_LEN), with the
	 * vector padding when rx_vec_en=1 --- */
	alloc_elts(ELTS_N);

	/* --- CQ (mlx5_rxq_create_devx_cq_resources): compression on;
	 * default cqe_comp_fmt HASH becomes CSUM_STRIDX "only for
	 * non-vectorized MPRQ Rx burst"; mlx5_rxq_cqe_num = 16 x 64 - 1 =
	 * 1023, doubled when not vectorised --- */
	cqe_n = WQ_N * STRD_N - 1;
	rxq->byte_mask = UINT32_MAX;
	if (mlx5_rxq_check_vec_support(rxq) < 0 && mlx5_rxq_mprq_enabled(rxq))
		rxq->mcqe_format = MLX5_CQE_RESP_FORMAT_CSUM_STRIDX;
	else
		rxq->mcqe_format = MLX5_CQE_RESP_FORMAT_HASH;
	if (mlx5_rxq_check_vec_support(rxq) < 0)
		cqe_n *= 2;
	make_cq(cqe_n);
	/* --- RQ (mlx5_rxq_create_devx_rq_resources): cyclic striding RQ,
	 * 16 WQEs of struct mlx5_wqe_mprq (next-seg + data seg, 32 B),
	 * zeroed; mlx5_rxq_initialize writes the data segments --- */
	make_rq(sizeof(struct mlx5_wqe_mprq) * WQ_N);
}

/* ---- device model ------------------------------------------------------ */
static uint32_t hw_wqe;			/* WQE counter of the WQE being filled */
static uint32_t hw_strd;		/* its next stride */
static struct { uint64_t seq; uint32_t hash; } expq[EXPQ];	/* delivered, not yet returned */
static unsigned long nb_wqe_reposts, nb_cq_ci_wraps16;

/* The 64-byte frame of packet seq (an IPv4/UDP frame's size; every byte
 * depends on seq, and bytes 16..23 are seq itself). */
static void frame(uint64_t seq, uint8_t *d)
{
	unsigned i;

	for (i = 0; i < H_PKT_LEN; i++)
		d[i] = (uint8_t)(seq * 31 + i * 7);
	memcpy(d + 16, &seq, sizeof(seq));
}

static volatile struct mlx5_wqe_mprq *wqe_at(uint32_t i)
{
	return &((volatile struct mlx5_wqe_mprq *)rxq->wqes)[i & (WQ_N - 1)];
}

/* The NIC takes the next stride of the current posted WQE and writes the
 * frame there (strd_shift_en = 0: at the stride's start). */
static void nic_take_stride(uint32_t hash, uint16_t *wqe_id, uint16_t *strd_idx)
{
	volatile struct mlx5_wqe_mprq *w = wqe_at(hw_wqe);
	uint64_t addr = rte_be_to_cpu_64(w->dseg.addr);
	uint32_t posted = rte_be_to_cpu_32(*rq_dbrec) - hw_wqe;

	CHECK(posted > 0 && posted <= WQ_N, "no posted WQE (WQE %u, RQ doorbell record %u)",
	      hw_wqe, rte_be_to_cpu_32(*rq_dbrec));
	CHECK(w->dseg.lkey == rte_cpu_to_be_32(MPRQ_LKEY) &&
	      rte_be_to_cpu_32(w->dseg.byte_count) == STRD_N * STRD_SZ,
	      "RQ WQE %u lkey/byte_count", hw_wqe);
	CHECK(addr >= (uintptr_t)mprq_mem && addr + STRD_N * STRD_SZ <= (uintptr_t)mprq_mem + mprq_mem_sz,
	      "RQ WQE %u addr outside the MPRQ MR", hw_wqe);
	frame(pkt_seq, (uint8_t *)(uintptr_t)(addr + (uint64_t)hw_strd * STRD_SZ));
	expq[exp_head % EXPQ].seq = pkt_seq;
	expq[exp_head % EXPQ].hash = hash;
	exp_head++;
	pkt_seq++;
	*wqe_id = (uint16_t)hw_wqe;
	*strd_idx = (uint16_t)hw_strd;
	if (++hw_strd == STRD_N) {
		hw_strd = 0;
		hw_wqe++;
	}
}

/* One regular CQE: byte_cnt in the striding format, wqe_id = WQE index,
 * wqe_counter = stride index. */
static void nic_cqe(void)
{
	uint32_t hash = pkt_hash(pkt_seq);
	volatile struct mlx5_cqe *c = slot(hw_cq_pi);
	uint16_t w, s;

	nic_take_stride(hash, &w, &s);
	fill_common(c, hash, w, s);
	nic_publish(c, H_MPRQ_BYTE_CNT, 0, 1);
}

/* A basic-layout compressed session of n packets: title in slot t (the
 * common fields, byte_cnt = n, wqe_id/wqe_counter of the first packet),
 * mini-CQE arrays of 8 in slots t+1, t+8, t+16, ...; n slots in all.
 * Mini format: CSUM_STRIDX for the scalar routine ({checksum BE16,
 * stride_idx BE16, byte_cnt BE32}; no hash: the session is one flow, and
 * the PMD gives every packet the title's hash), HASH for the vectorised
 * one ({rx_hash_result BE32, byte_cnt BE32}). */
static void nic_session(unsigned n)
{
	uint32_t t = hw_cq_pi, hash0 = pkt_hash(pkt_seq);
	volatile struct mlx5_cqe *title = slot(t);
	unsigned i;
	uint16_t w0 = 0, s0 = 0;
	int csum_stridx = rxq->mcqe_format == MLX5_CQE_RESP_FORMAT_CSUM_STRIDX;

	CHECK(n >= 8 && n <= 64 && n % 8 == 0, "session size");
	for (i = 0; i < n; i++) {
		uint32_t hash = csum_stridx ? hash0 : pkt_hash(pkt_seq);
		uint16_t w, s;
		volatile struct mlx5_mini_cqe8 *mc = mini_at(t, i);

		nic_take_stride(hash, &w, &s);
		if (i == 0) {
			w0 = w;
			s0 = s;
		}
		if (csum_stridx) {
			mc->checksum = rte_cpu_to_be_16((uint16_t)(0x1234 + i)); /* not read */
			mc->stride_idx = rte_cpu_to_be_16(s);
		} else {
			mc->rx_hash_result = rte_cpu_to_be_32(hash);
		}
		mc->byte_cnt = rte_cpu_to_be_32(H_MPRQ_BYTE_CNT);
	}
	fill_common(title, hash0, w0, s0);
	nic_publish(title, n, 1, n);
}

/* ---- checks ------------------------------------------------------------- */
struct snap {
	uint32_t cq_ci, rq_ci, rq_pi, elts_ci;
	uint16_t decompressed, zip_ai, consumed_strd;
	uint64_t ipackets, ibytes;
	unsigned long mbuf_calls, mprq_calls;
	struct rte_mbuf *elts[BURST];	/* vec: the mbufs at rq_pi.. */
};

static struct snap snap_b;

static void snap_take(void)
{
	struct snap *s = &snap_b;
	unsigned k;

	s->cq_ci = rxq->cq_ci; s->rq_ci = rxq->rq_ci; s->rq_pi = rxq->rq_pi;
	s->elts_ci = rxq->elts_ci;
	s->decompressed = vec_mode ? rxq->decompressed : 0;
	s->zip_ai = rxq->zip.ai;
	s->consumed_strd = rxq->consumed_strd;
	s->ipackets = rxq->stats.ipackets; s->ibytes = rxq->stats.ibytes;
	s->mbuf_calls = mbuf_stack.calls; s->mprq_calls = mprq_stack.calls;
	if (vec_mode)
		for (k = 0; k < BURST; k++)
			s->elts[k] = (*rxq->elts)[(rxq->rq_pi + k) & (ELTS_N - 1)];
}

static void check_burst(struct rte_mbuf **pkts, uint16_t ret, int steady)
{
	const struct snap *b = &snap_b;
	const uint32_t e_m = ELTS_N - 1;
	uint8_t want[H_PKT_LEN];
	uint64_t done;
	uint32_t j, k, cq_moved, want_pkts;

	CHECK(ret == BURST, "rx_burst returned %u, want %u", ret, BURST);
	for (k = 0; k < BURST; k++) {
		struct rte_mbuf *m = pkts[k];
		uint64_t e = exp_tail + k;

		CHECK(e < exp_head, "more packets than delivered");
		CHECK((uint8_t *)m >= mbuf_mem && (uint8_t *)m < mbuf_mem + mbuf_mem_sz && m->pool == mp,
		      "packet %u: not an mbuf of the Rx mempool", k);
		CHECK(m->buf_addr == (void *)(m + 1) && m->data_off == RTE_PKTMBUF_HEADROOM,
		      "packet %u: buf_addr/data_off (not the mbuf's own buffer)", k);
		CHECK(m->pkt_len == H_PKT_LEN && m->data_len == H_PKT_LEN,
		      "packet %u: pkt_len %u data_len %u", k, m->pkt_len, m->data_len);
		frame(expq[e % EXPQ].seq, want);
		CHECK(memcmp(rte_pktmbuf_mtod(m, void *), want, H_PKT_LEN) == 0,
		      "packet %u: contents are not the frame the NIC wrote (seq %llu)", k,
		      (unsigned long long)expq[e % EXPQ].seq);
		check_pkt_meta(m, k, expq[e % EXPQ].hash);
		CHECK(m->nb_segs == 1 && m->next == NULL && m->port == 0 &&
		      rte_mbuf_refcnt_read(m) == 1, "packet %u: mbuf header", k);
		if (vec_mode)
			CHECK(m == b->elts[k], "packet %u: not the elts mbuf at rq_pi + %u", k, k);
		for (j = 0; j < k; j++)
			CHECK(pkts[j] != m, "packet %u: same mbuf as packet %u", k, j);
	}
	exp_tail += BURST;
	done = exp_tail;

	/* CQ: consumer index, doorbell record, invalidated slots. */
	cq_moved = rxq->cq_ci - b->cq_ci;
	if (vec_mode) {
		/* rxq_copy_mprq_mbuf_v moves cq_ci by one per packet. */
		CHECK(cq_moved == BURST, "cq_ci moved by %u, want %u", cq_moved, BURST);
		if (session > BURST)
			CHECK(rxq->decompressed == (b->decompressed ? 0 : session - BURST),
			      "decompressed %u -> %u", b->decompressed, rxq->decompressed);
		else
			CHECK(rxq->decompressed == 0, "decompressed %u", rxq->decompressed);
		CHECK(rxq->cq_ci + rxq->decompressed == hw_cq_pi, "cq_ci %u + decompressed %u, NIC wrote %u",
		      rxq->cq_ci, rxq->decompressed, hw_cq_pi);
		/* rxq_cq_decompress_v invalidates all n slots of a session
		 * (title included) when it decompresses it. */
		if (session)
			for (j = b->cq_ci; j != hw_cq_pi; j++)
				CHECK(slot(j)->op_own == MLX5_CQE_INVALIDATE,
				      "CQ slot %u op_own %02x after the session, want 0xf0", j, slot(j)->op_own);
	} else {
		/* mlx5_rx_poll_len: cq_ci moves past a session when its last
		 * mini is consumed, to zip.cq_ci, which is a uint16_t in 22.11
		 * (widened to 32 bits in 23.11, commit 02a6195cbe): so with
		 * compressed sessions the scalar routine's cq_ci (and CQ
		 * doorbell record) wraps at 2^16 instead of 2^32. Slot and
		 * owner bit (cq_ci mod 2048 and bit 11) are unaffected. The
		 * checks compare it modulo 2^16 then, and count the wraps. */
		if (session) {
			cq_moved &= 0xffff;
			if (rxq->cq_ci < b->cq_ci)
				nb_cq_ci_wraps16++;
			CHECK(rxq->cq_ci <= 0xffff, "cq_ci %u beyond 16 bits", rxq->cq_ci);
		}
		if (session > BURST) {
			CHECK(b->zip_ai ? (cq_moved == session && rxq->zip.ai == 0)
					: (cq_moved == 0 && rxq->zip.ai == BURST),
			      "session of %u: cq_ci +%u, zip.ai %u -> %u", session, cq_moved, b->zip_ai,
			      rxq->zip.ai);
		} else {
			CHECK(cq_moved == BURST && rxq->zip.ai == 0, "cq_ci moved by %u (zip.ai %u)",
			      cq_moved, rxq->zip.ai);
		}
		if (rxq->zip.ai == 0)
			CHECK(((rxq->cq_ci ^ hw_cq_pi) & (session ? 0xffff : ~0u)) == 0,
			      "cq_ci %u, NIC wrote %u", rxq->cq_ci, hw_cq_pi);
		/* The scalar path invalidates every slot of a session except
		 * its title (slot t is rejected next pass by its owner bit). */
		if (session)
			for (j = b->cq_ci; j != b->cq_ci + cq_moved; j++) {
				uint8_t want_own = j % session ? MLX5_CQE_INVALIDATE :
					(uint8_t)(MLX5_CQE_RESP_SEND << 4 | MLX5_COMPRESSED << 2 | owner_of(j));

				CHECK(slot(j)->op_own == want_own, "CQ slot %u op_own %02x, want %02x", j,
				      slot(j)->op_own, want_own);
			}
	}
	check_dbrec(cq_dbrec, rxq->cq_ci, "CQ");

	/* RQ: after `done` packets of one stride each the PMD is in WQE
	 * (done - 1) / 64 with (done - 1) % 64 + 1 strides consumed; it
	 * reposts a WQE (rq_ci++) when it moves to the next one, and writes the
	 * RQ doorbell record. With every packet memcpy'd, the buffers keep
	 * refcnt 1, so each WQE is reposted with its own buffer (no
	 * replacement from the MPRQ mempool). */
	CHECK(rxq->rq_ci == WQ_N + (uint32_t)((done - 1) / STRD_N) &&
	      rxq->consumed_strd == (done - 1) % STRD_N + 1,
	      "rq_ci %u consumed_strd %u after %llu packets", rxq->rq_ci, rxq->consumed_strd,
	      (unsigned long long)done);
	check_dbrec(rq_dbrec, rxq->rq_ci, "RQ");
	nb_wqe_reposts += rxq->rq_ci - b->rq_ci;
	for (j = 0; j < WQ_N; j++) {
		volatile struct mlx5_wqe_mprq *w = wqe_at(j);
		struct mlx5_mprq_buf *buf = (*rxq->mprq_bufs)[j];

		CHECK(buf == init_bufs[j] && __atomic_load_n(&buf->refcnt, __ATOMIC_RELAXED) == 1,
		      "MPRQ buffer of WQE %u replaced or still referenced", j);
		CHECK(w->dseg.addr == rte_cpu_to_be_64((uintptr_t)mlx5_mprq_buf_addr(buf, STRD_N)) &&
		      w->dseg.lkey == rte_cpu_to_be_32(MPRQ_LKEY) &&
		      rte_be_to_cpu_32(w->dseg.byte_count) == STRD_N * STRD_SZ,
		      "RQ WQE %u data segment", j);
	}
	CHECK(rxq->mprq_repl == init_repl, "mprq_repl changed");

	/* Vector: rq_pi counts strides; the bulk replenish refills elts. */
	if (vec_mode) {
		CHECK(rxq->rq_pi == b->rq_pi + BURST, "rq_pi %u want %u", rxq->rq_pi, b->rq_pi + BURST);
		CHECK(rxq->elts_ci - rxq->rq_pi <= ELTS_N, "elts_ci %u rq_pi %u", rxq->elts_ci, rxq->rq_pi);
		if (rxq->elts_ci != b->elts_ci) {
			nb_repl_events++;
			nb_repl_mbufs += rxq->elts_ci - b->elts_ci;
			for (j = b->elts_ci; j != rxq->elts_ci; j++) {
				struct rte_mbuf *m = (*rxq->elts)[j & e_m];

				CHECK((uint8_t *)m >= mbuf_mem && (uint8_t *)m < mbuf_mem + mbuf_mem_sz,
				      "elts[%u] is not an mbuf", j);
				for (k = 0; k < BURST; k++)
					CHECK(m != pkts[k], "elts[%u] holds returned packet %u", j, k);
			}
			check_fake_padding(rxq->elts_ci, e_m);
		}
	}

	/* Soft counters. Scalar: per packet returned. Vector: per CQE
	 * processed, a compressed session counted whole when decompressed. */
	want_pkts = BURST;
	if (vec_mode && session > BURST)
		want_pkts = b->decompressed ? 0 : session;
	check_soft_counters(b->ipackets, b->ibytes, want_pkts);
	if (steady)
		CHECK(mbuf_stack.calls == b->mbuf_calls && mprq_stack.calls == b->mprq_calls,
		      "mempool backend called in the burst");
}

/* The self-test's corruptions, each after a burst that reposted a WQE
 * (every other burst). */
static const char *const what[] = {
	"pkt_len of packet 0", "data_len of packet 31", "payload byte 40 of packet 5",
	"rss hash of packet 7", "packet_type of packet 3", "ol_flags of packet 30",
	"CQ doorbell record", "RQ doorbell record", "mbuf of packet 12 (another mbuf)",
	"the reposted WQE's address", "refcnt of a WQE's MPRQ buffer", "consumed_strd",
};

static void corrupt(unsigned t)
{
	switch (t) {
	case 0: pkts[0]->pkt_len++; break;
	case 1: pkts[31]->data_len ^= 1; break;
	case 2: rte_pktmbuf_mtod(pkts[5], uint8_t *)[40] ^= 0x10; break;
	case 3: pkts[7]->hash.rss ^= 0x100; break;
	case 4: pkts[3]->packet_type ^= RTE_PTYPE_L4_UDP; break;
	case 5: pkts[30]->ol_flags ^= RTE_MBUF_F_RX_L4_CKSUM_GOOD; break;
	case 6: *cq_dbrec ^= rte_cpu_to_be_32(1); break;
	case 7: *rq_dbrec ^= rte_cpu_to_be_32(1); break;
	case 8: pkts[12] = pkts[13]; break;
	case 9: wqe_at(rxq->rq_ci - 1)->dseg.addr ^= rte_cpu_to_be_64(STRD_SZ); break;
	case 10: __atomic_add_fetch(&(*rxq->mprq_bufs)[rxq->rq_ci & (WQ_N - 1)]->refcnt, 1,
				    __ATOMIC_RELAXED); break;
	case 11: rxq->consumed_strd--; break;
	}
}

static const struct rx_scen scen_tab[] = {
	{ "rx_mprq_uncompressed", 0, 0 },
	{ "rx_mprq_compressed8", 0, 8 },
	{ "rx_mprq_compressed64", 0, 64 },
	{ "rx_mprq_vec_uncompressed", 1, 0 },
	{ "rx_mprq_vec_compressed8", 1, 8 },
	{ "rx_mprq_vec_compressed64", 1, 64 },
};

static const char *mcqe_name(unsigned f)
{
	switch (f) {
	case MLX5_CQE_RESP_FORMAT_HASH: return "HASH";
	case MLX5_CQE_RESP_FORMAT_CSUM: return "CSUM";
	case MLX5_CQE_RESP_FORMAT_FTAG_STRIDX: return "FTAG_STRIDX";
	case MLX5_CQE_RESP_FORMAT_CSUM_STRIDX: return "CSUM_STRIDX";
	case MLX5_CQE_RESP_FORMAT_L34H_STRIDX: return "L34H_STRIDX";
	}
	return "?";
}

int main(int argc, char **argv)
{
	const char *name = argc > 1 ? argv[1] : "";
	double per[101], ghz0, ghz1;
	long bursts;
	int timing, rounds;

	if (rx_setup(argc, argv, scen_tab, sizeof(scen_tab) / sizeof(scen_tab[0]), &timing, &bursts,
		     &rounds))
		return 1;
	/* mlx5_select_rx_function (mlx5_ethdev.c), its branches for a port
	 * without shared RQ: mlx5_rx_burst_mprq_vec if the PMD's own
	 * mlx5_check_vec_rx_support(dev) > 0 and mlx5_mprq_enabled(dev),
	 * else mlx5_rx_burst_mprq if mlx5_mprq_enabled(dev). */
	{
		int v = mlx5_check_vec_rx_support(&rte_eth_devices[0]);
		int m = mlx5_mprq_enabled(&rte_eth_devices[0]);

		if (v > 0)
			set_burst_fn(m ? mlx5_rx_burst_mprq_vec : mlx5_rx_burst_vec,
				     vec_mode ? mlx5_rx_burst_mprq_vec : mlx5_rx_burst_mprq);
		else
			set_burst_fn(m ? mlx5_rx_burst_mprq : mlx5_rx_burst,
				     vec_mode ? mlx5_rx_burst_mprq_vec : mlx5_rx_burst_mprq);
		if (log_verbose) {
			printf("rx_vec_en=%d mprq_en=1 rxqs_n=%u rxqs_min_mprq=%u mlx5_check_vec_rx_support=%d "
			       "mlx5_mprq_enabled=%d selected=%s log_strd_num=%u log_strd_sz=%u elts_n=%u "
			       "(WQEs) elts=%u mbufs cqe_n=%u mcqe_format=%s mprq_max_memcpy_len=%u "
			       "strd_shift_en=%u strd_scatter_en=%u rq_repl_thresh=%u rq_ci=%u elts_ci=%u\n",
			       vec_mode, priv->rxqs_n, priv->config.mprq.min_rxqs_num, v, m, burst_name,
			       rxq->log_strd_num, rxq->log_strd_sz, rxq->elts_n, ELTS_N, rxq->cqe_n,
			       mcqe_name(rxq->mcqe_format), rxq->mprq_max_memcpy_len, rxq->strd_shift_en,
			       rxq->strd_scatter_en, rxq->rq_repl_thresh, rxq->rq_ci, rxq->elts_ci);
			return 0;
		}
	}
	preflight();
	if (argc > 2 && strcmp(argv[2], "selftest") == 0) {
		run_selftest(what, sizeof(what) / sizeof(what[0]), corrupt);
		printf("%s selftest checks=OK\n", name);
		return 0;
	}
	if (!timing) {
		/* Count only the steady-state bursts. */
		nb_wqe_reposts = 0;
		count_bursts(bursts);
		printf("%s count bursts=%ld measured_units=%ld (packets) routine=%s mcqe_format=%s cqe_s=%u "
		       "wqe_s=%u strides=%u after preflight: cqe_slots_written=%lu sessions=%lu "
		       "wqe_reposts=%lu replenish_events=%lu replenished_mbufs=%lu cq_ci_16bit_wraps=%lu checks=OK\n",
		       name, bursts, measured_units, burst_name, mcqe_name(rxq->mcqe_format),
		       1u << rxq->cqe_n, 1u << rxq->elts_n, STRD_N, nb_cqe_slots, nb_sessions,
		       nb_wqe_reposts, nb_repl_events, nb_repl_mbufs, nb_cq_ci_wraps16);
		return 0;
	}
	time_rounds(bursts, rounds, per, &ghz0, &ghz1);
	printf("%s time bursts/round=%ld rounds=%d ns/packet median=%.2f min=%.2f max=%.2f "
	       "(tsc %.4f GHz, timer overhead %llu cycles subtracted per window, core clock "
	       "%.2f/%.2f GHz before/after) routine=%s cq_ci_16bit_wraps=%lu checks=OK\n",
	       name, bursts, rounds, per[rounds / 2], per[0], per[rounds - 1], tsc_per_ns,
	       (unsigned long long)timer_overhead, ghz0, ghz1, burst_name, nb_cq_ci_wraps16);
	return 0;
}
