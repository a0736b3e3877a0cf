/*
 * Head-to-head harness, Rx side: DPDK 22.11 mlx5 PMD Rx burst (Debian 12's
 * librte_net_mlx5.a object code: net_mlx5_mlx5_rx.c.o for mlx5_rx_burst,
 * net_mlx5_mlx5_rxtx_vec.c.o for mlx5_rx_burst_vec with the SSE routines of
 * mlx5_rxtx_vec_sse.h, net_mlx5_mlx5_rxtx.c.o for mlx5_ptype_table) on an Rx
 * queue fabricated in ordinary memory.  See README.md.
 *
 * Usage: rx_harness SCENARIO|select [scalar] [time|count|selftest] [BURSTS] [ROUNDS]
 */
#include "rx_common.h"

#define H_LKEY 0x5a5a02u

static void *stack_objs[NB_MBUF];	/* mbuf_stack's array */

static void fabricate(void)
{
	unsigned desc_n, cqe_n;

	/* --- mempool (backend: a LIFO stack, as in harness.c) --- */
	rte_mempool_ops_table.num_ops = 1;
	set_pool_ops(0, "harness_stack", mbuf_enq, mbuf_deq, mbuf_cnt);
	make_mbuf_pool(RTE_CACHE_LINE_SIZE, stack_objs);

	/* --- the port --- */
	make_port(1);

	/* --- the Rx queue: mlx5_rxq_new(desc = 1024, single segment,
	 * offloads CHECKSUM, RSS), rxq_alloc_elts_sprq, the DevX CQ
	 * (mlx5_rxq_create_devx_cq_resources) and mlx5_rxq_initialize --- */
	desc_n = NB_RXD + priv->config.rx_vec_en * MLX5_VPMD_DESCS_PER_LOOP;
	make_rxq(desc_n, 0);
	rxq->elts_n = log2above(NB_RXD);
	/* MR control: one MR covers the pool (mempool registration);
	 * mlx5_mr_mempool_populate_cache put it in cache_bh and
	 * mlx5_rxq_initialize's lookups put it in the top-half cache. */
	set_one_mr(mbuf_mem, mbuf_mem_sz, H_LKEY);
	/* elts: rte_pktmbuf_alloc + SET_DATA_OFF/PORT/DATA_LEN/PKT_LEN */
	alloc_elts(NB_RXD);
	/* CQ: mlx5_rxq_cqe_num = wqe_n - 1, doubled when compression is on
	 * and the queue is not vectorised; HASH mini-CQE format. */
	cqe_n = NB_RXD - 1;
	rxq->mcqe_format = MLX5_CQE_RESP_FORMAT_HASH;
	rxq->byte_mask = UINT32_MAX;
	if (mlx5_rxq_check_vec_support(rxq) < 0)
		cqe_n *= 2;
	make_cq(cqe_n);
	/* RQ: cyclic, one 16-byte data segment per WQE */
	make_rq(16 * NB_RXD);
}

/* ---- device model ------------------------------------------------------ */
static uint32_t hw_wqe_ci;		/* RQ WQEs consumed */
static struct { uint64_t addr; uint32_t hash; } expq[EXPQ];	/* delivered, not yet returned */

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

/* One uncompressed CQE. */
static void nic_cqe(void)
{
	uint32_t hash = pkt_hash(pkt_seq);
	volatile struct mlx5_cqe *c = slot(hw_cq_pi);
	uint16_t w = nic_take_wqe(hash);

	fill_common(c, hash, 0, w);
	nic_publish(c, H_PKT_LEN, 0, 1);
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
		volatile struct mlx5_mini_cqe8 *mc = mini_at(t, i);

		if (i == 0)
			w0 = w;
		mc->rx_hash_result = rte_cpu_to_be_32(hash);
		mc->byte_cnt = rte_cpu_to_be_32(H_PKT_LEN);
	}
	fill_common(title, hash0, 0, w0);
	nic_publish(title, n, 1, n);
}

/* ---- checks ------------------------------------------------------------- */
struct snap {
	uint32_t cq_ci, rq_ci, rq_pi;
	uint16_t decompressed;
	uint64_t ipackets, ibytes;
	unsigned long backend_calls;
};

static struct snap snap_b;

static void snap_take(void)
{
	struct snap *s = &snap_b;

	s->cq_ci = rxq->cq_ci; s->rq_ci = rxq->rq_ci; s->rq_pi = rxq->rq_pi;
	s->decompressed = vec_mode ? rxq->decompressed : 0;
	s->ipackets = rxq->stats.ipackets; s->ibytes = rxq->stats.ibytes;
	s->backend_calls = mbuf_stack.calls;
}

static void check_burst(struct rte_mbuf **pkts, uint16_t ret, int steady)
{
	const struct snap *b = &snap_b;
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
		check_pkt_meta(m, k, expq[e % EXPQ].hash);
		CHECK(m->nb_segs == 1 && m->next == NULL && m->port == 0 &&
		      m->data_off == RTE_PKTMBUF_HEADROOM && rte_mbuf_refcnt_read(m) == 1 &&
		      m->pool == mp, "packet %u: mbuf header", k);
	}
	exp_tail += BURST;
	/* CQ: every written slot consumed; doorbell record = cq_ci. */
	CHECK(rxq->cq_ci == hw_cq_pi, "cq_ci %u, want %u", rxq->cq_ci, hw_cq_pi);
	check_dbrec(cq_dbrec, rxq->cq_ci, "CQ");
	/* Compressed sessions: the PMD invalidated every slot it consumed. */
	if (session)
		for (j = b->cq_ci; j != rxq->cq_ci; j++)
			CHECK(slot(j)->op_own == MLX5_CQE_INVALIDATE,
			      "CQ slot %u op_own %02x after the session, want 0xf0", j, slot(j)->op_own);
	/* RQ: doorbell record = rq_ci; every WQE (re)posted in this burst
	 * points to a fresh mbuf in elts, with the pool's lkey. */
	check_dbrec(rq_dbrec, rxq->rq_ci, "RQ");
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
		check_fake_padding(rxq->rq_ci, q_m);
	/* Soft counters: counted when the CQEs are consumed (a 64-packet
	 * session is counted whole by rxq_cq_decompress_v in the burst that
	 * decompresses it); one packet per CQ slot in the basic layout. */
	check_soft_counters(b->ipackets, b->ibytes, rxq->cq_ci - b->cq_ci);
	if (session <= BURST)
		CHECK(rxq->cq_ci - b->cq_ci == BURST, "CQ slots consumed %u", rxq->cq_ci - b->cq_ci);
	else
		CHECK(rxq->cq_ci - b->cq_ci == (b->decompressed ? 0 : session) &&
		      rxq->decompressed == (b->decompressed ? b->decompressed - BURST : session - BURST),
		      "session of %u: cq_ci +%u, decompressed %u -> %u", session,
		      rxq->cq_ci - b->cq_ci, b->decompressed, rxq->decompressed);
	if (steady)
		CHECK(mbuf_stack.calls == b->backend_calls, "mempool backend called in the burst");
}

/* The self-test's corruptions, each after a burst that reposted WQEs
 * (vec: every other burst). */
static const char *const what[] = {
	"pkt_len of packet 0", "data_len of packet 31", "rss hash of packet 7",
	"packet_type of packet 3", "ol_flags of packet 30", "CQ doorbell record",
	"RQ doorbell record", "mbuf of packet 12 (another buffer)", "a reposted WQE address",
};

static void corrupt(unsigned t)
{
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
}

static const struct rx_scen scen_tab[] = {
	{ "rx_scalar_uncompressed", 0, 0 },
	{ "rx_vec_uncompressed", 1, 0 },
	{ "rx_vec_compressed8", 1, 8 },
	{ "rx_vec_compressed64", 1, 64 },
};

int main(int argc, char **argv)
{
	const char *name = argc > 1 ? argv[1] : "";
	double per[101];
	long bursts;
	int timing, rounds;

	if (rx_setup(argc, argv, scen_tab, sizeof(scen_tab) / sizeof(scen_tab[0]), &timing, &bursts,
		     &rounds))
		return 1;
	/* mlx5_select_rx_function (mlx5_ethdev.c), its branches for a port
	 * without shared RQ and without MPRQ: vectorised iff the PMD's own
	 * mlx5_check_vec_rx_support(dev) > 0. */
	{
		int v = mlx5_check_vec_rx_support(&rte_eth_devices[0]);

		set_burst_fn(v > 0 ? mlx5_rx_burst_vec : mlx5_rx_burst,
			     vec_mode ? mlx5_rx_burst_vec : mlx5_rx_burst);
		if (log_verbose) {
			printf("rx_vec_en=%d mlx5_check_vec_rx_support=%d selected=%s elts_n=%u cqe_n=%u "
			       "rq_repl_thresh=%u rq_ci=%u mcqe_format=%u\n",
			       vec_mode, v, burst_name, rxq->elts_n, rxq->cqe_n, rxq->rq_repl_thresh,
			       rxq->rq_ci, rxq->mcqe_format);
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
		count_bursts(bursts);
		printf("%s count bursts=%ld measured_units=%ld (packets) routine=%s cqe_s=%u "
		       "elts_s=%u after preflight: cqe_slots_written=%lu sessions=%lu replenish_events=%lu "
		       "replenished_mbufs=%lu checks=OK\n",
		       name, bursts, measured_units, burst_name, 1u << rxq->cqe_n, 1u << rxq->elts_n,
		       nb_cqe_slots, nb_sessions, nb_repl_events, nb_repl_mbufs);
		return 0;
	}
	time_rounds(bursts, rounds, per, NULL, NULL);
	printf("%s time bursts/round=%ld rounds=%d ns/packet median=%.2f min=%.2f max=%.2f "
	       "(tsc %.4f GHz, timer overhead %llu cycles subtracted per window) routine=%s checks=OK\n",
	       name, bursts, rounds, per[rounds / 2], per[0], per[rounds - 1], tsc_per_ns,
	       (unsigned long long)timer_overhead, burst_name);
	return 0;
}
