/*
 * harness.c - run UCX's real rc_mlx5 data-path code (src/uct/ib/mlx5/rc,
 * built from an UCX release tree, see README.md) on queues fabricated in
 * ordinary memory, with no RDMA hardware, for instruction counts
 * (callgrind) and timings.
 *
 * Nothing of UCX is copied here.  UCX's own headers are included from its
 * source and build trees (UCX_SRC, UCX_BUILD: its config.h), and its code
 * runs in two ways:
 *   - the post scenarios call the endpoint functions UCX's rc_mlx5 iface
 *     installs in its ops table (uct_rc_mlx5_base_ep_put_zcopy,
 *     uct_rc_mlx5_base_ep_put_short, exported by libuct_ib_mlx5.so, compiled
 *     by UCX's own build) through UCX's public inline API uct_ep_put_zcopy /
 *     uct_ep_put_short (an indirect call through iface->ops, exactly what an
 *     application or UCP does);
 *   - poll_tx32 runs UCX's static inline uct_rc_mlx5_iface_poll_tx
 *     (rc_mlx5.inl: uct_ib_mlx5_poll_cq, the endpoint lookup, the txqp
 *     completion, the arbiter, the credit update), compiled into this file
 *     from UCX's header with UCX's compiler flags;
 *   - progress32 calls the progress function UCX's rc_mlx5 iface registers
 *     on the worker (uct_rc_mlx5_iface_progress_cyclic, a static function of
 *     libuct_ib_mlx5.so: its address is the exported put_zcopy's plus the
 *     offset between the two symbols that run.sh reads with nm and passes as
 *     PROGRESS_OFFSET): an empty receive-CQ poll, then one send completion.
 *
 * Setup also uses UCX's own exported helpers where UCX has them:
 * uct_ib_mlx5_txwq_reset and uct_ib_mlx5_init_wq_buf (the SQ state and
 * buffer as ib_mlx5_dv.c leaves them after creating a DEVX QP),
 * uct_ib_mlx5_init_cq_common and uct_ib_mlx5_fill_cq_buf (the CQ as
 * ib_mlx5.c leaves it), ucs_arbiter_init / ucs_arbiter_group_init.
 *
 * Usage: harness SCENARIO [time|count|dump] [UNITS] [ROUNDS]
 *   time  : checks, then ROUNDS timed rounds of UNITS units: ns/unit
 *           (median, min, max of the rounds), rdtsc windows of 32 units.
 *   count : checks, then one round of UNITS units, no timing; meant to run
 *           under valgrind --tool=callgrind --toggle-collect=measured_*.
 *   dump  : prints the bytes of one WQE the scenario posts, as hex, for
 *           `mlx5dp decode wqe` (run.sh).
 * Scenarios: put_zcopy_bf put_zcopy_db put_short32_bf put_short32_db
 *            poll_tx32 progress32
 */
#define _GNU_SOURCE
#include <config.h>

#include <uct/ib/mlx5/rc/rc_mlx5.inl>

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <x86intrin.h>

#define HARNESS_EXIT_ON_FAILURE
#include "harness_common.h"

/* ---- fabricated objects ------------------------------------------------ */
#define QPN        0x000a1bu	/* arbitrary 24-bit QP number */
/* UCX_RC_TX_QUEUE_LEN default 256 (ib_iface.c "TX_QUEUE_LEN");
 * uct_ib_mlx5_wq_calc_sizes: max_tx = roundup_pow2(256 * UCT_IB_MLX5_MAX_BB)
 * = 1024 WQEBBs (ib_mlx5.c uct_ib_mlx5_devx_sq_length), 64 KiB */
#define SQ_BB      1024u
/* ib_mlx5_dv.c: bb_max = max_tx - 2 * UCT_IB_MLX5_MAX_BB */
#define BB_MAX     (SQ_BB - 2 * UCT_IB_MLX5_MAX_BB)
/* UCX_RC_TX_CQ_LEN default 4096 (rc_iface.c "TX_CQ_LEN"); rc_iface.c:
 * tx.cq_available = tx_cq_size - 2 */
#define TX_CQ_LEN  4096u
#define CQ_AVAIL0  ((int)TX_CQ_LEN - 2)
/* UCX_RC_TX_CQ_MODERATION default 64, rc_mlx5_iface.c: min(64, bb_max / 4) */
#define TX_MODERATION 64u
#define RX_CQ_LEN  4096u	/* UCX_RC_RX_QUEUE_LEN default 4096 */
#define UAR_BF_OFF 0x800u	/* BlueFlame register 0 in the UAR page */

#define LKEY       0x00001234u
#define RKEY       0x00005678u
#define LADDR      0x0000000010000000ull
#define RADDR      0x00007f0000001000ull
#define LEN        64u
#define SHORT_LEN  32u

static uct_rc_mlx5_iface_common_t *iface;
static uct_rc_mlx5_base_ep_t *ep;
static uct_ib_mlx5_mmio_reg_t *reg;
static uint8_t *sq_buf, *uar_page, *txcq_buf, *rxcq_buf;
static volatile uint32_t *qp_dbrec, *txcq_dbrec, *rxcq_dbrec;
static uct_ib_mem_t *memh;
static uct_rc_mlx5_base_ep_t **ep_slot;	/* iface->super.eps[] row */
static uint8_t short_bufs[32][SHORT_LEN] __attribute__((aligned(64)));
static uint8_t rx_pref[64] __attribute__((aligned(64)));

enum scen { S_ZCOPY_BF, S_ZCOPY_DB, S_SHORT_BF, S_SHORT_DB, S_POLL_TX, S_PROGRESS };

static const struct {
	const char *name;
	enum scen s;
	const char *unit;
} scen_tab[] = {
	{ "put_zcopy_bf", S_ZCOPY_BF, "WQE (1 uct_ep_put_zcopy call)" },
	{ "put_zcopy_db", S_ZCOPY_DB, "WQE (1 uct_ep_put_zcopy call)" },
	{ "put_short32_bf", S_SHORT_BF, "WQE (1 uct_ep_put_short call)" },
	{ "put_short32_db", S_SHORT_DB, "WQE (1 uct_ep_put_short call)" },
	{ "poll_tx32", S_POLL_TX, "completion (1/32 of 32 poll_tx calls)" },
	{ "progress32", S_PROGRESS, "completion (1/32 of 32 iface progress calls)" },
};

static enum scen scen;
static unsigned (*progress_fn)(void *arg);

/* One of the iface's CQs (`dir`) of `len` 64-byte CQEs with number `cqn`,
 * buffer and doorbell record in heap memory, as UCX's own
 * uct_ib_mlx5_init_cq_common / uct_ib_mlx5_fill_cq_buf leave a DEVX CQ. */
static void fabricate_cq(int dir, unsigned len, unsigned cqn, uint8_t **buf,
			 volatile uint32_t **dbrec)
{
	*buf = zalloc(4096, len * 64);
	*dbrec = zalloc(64, 64);
	uct_ib_mlx5_init_cq_common(&iface->cq[dir], len, 64, cqn, *buf, NULL,
				   *dbrec, 0);
	uct_ib_mlx5_fill_cq_buf(&iface->cq[dir], len);
	iface->cq[dir].type = UCT_IB_MLX5_OBJ_TYPE_DEVX;
}

static void fabricate(uct_ib_mlx5_mmio_mode_t mode)
{
	uct_ib_mlx5_txwq_t *wq;
	uct_iface_ops_t *ops;

	iface = zalloc(64, sizeof(*iface));
	ep = zalloc(64, sizeof(*ep));
	sq_buf = zalloc(4096, SQ_BB * MLX5_SEND_WQE_BB);
	qp_dbrec = zalloc(64, 64);
	/* UAR page: the doorbell/BlueFlame register is ordinary memory here;
	 * 0xa5 shows which bytes UCX wrote */
	uar_page = zalloc(4096, 4096);
	memset(uar_page, 0xa5, 4096);
	memh = zalloc(64, sizeof(*memh));
	memh->lkey = LKEY;

	/* the worker's mmio register (ib_mlx5.c uct_ib_mlx5_mmio_init, or
	 * uct_ib_mlx5_devx_uar_init: addr = the UAR's reg_addr = page +
	 * 0x800, mode from uct_ib_mlx5_get_mmio_mode) */
	reg = zalloc(64, sizeof(*reg));
	reg->addr.ptr = uar_page + UAR_BF_OFF;
	reg->mode = mode;
	ucs_spinlock_init(&reg->db_lock, 0);

	/* iface: the ops rc_mlx5_iface.c installs (uct_rc_mlx5_iface_tl_ops) */
	/* the functions' own addresses in libuct_ib_mlx5.so (dlsym: not a
	 * PLT stub of this executable), as the .so's ops table holds them */
	ops = &iface->super.super.super.super.ops;
	ops->ep_put_zcopy = (uct_ep_put_zcopy_func_t)dlsym(RTLD_DEFAULT,
							   "uct_rc_mlx5_base_ep_put_zcopy");
	ops->ep_put_short = (uct_ep_put_short_func_t)dlsym(RTLD_DEFAULT,
							   "uct_rc_mlx5_base_ep_put_short");
	CHECK(ops->ep_put_zcopy && ops->ep_put_short, "dlsym: %s", dlerror());
	iface->super.super.config.qp_type = IBV_QPT_RC;
	iface->super.tx.cq_available = CQ_AVAIL0;
	/* rc_iface.c: MAX_GET_ZCOPY "auto" -> reads_available = SSIZE_MAX */
	iface->super.tx.reads_available = SSIZE_MAX;
	iface->super.tx.reads_completed = 0;
	iface->super.config.tx_moderation = TX_MODERATION;
	iface->super.config.tx_qp_len = 256;
	iface->super.config.tx_cq_len = TX_CQ_LEN;
	iface->super.config.tx_poll_always = 0;	/* TX_POLL_ALWAYS "n" */
	iface->super.config.fence_mode = UCT_RC_FENCE_MODE_AUTO;
	uct_ib_fence_info_init(&iface->super.tx.fi);
	ucs_arbiter_init(&iface->super.tx.arbiter);
	ucs_list_head_init(&iface->super.ep_list);
	ucs_list_head_init(&iface->super.qp_gc_list);
	iface->tx.mmio_mode = mode;
	iface->tx.bb_max = UINT16_MAX;	/* TX_MAX_BB -1 */

	/* the QP table rc_iface.c uct_rc_iface_add_qp fills */
	ep_slot = zalloc(64, UCS_BIT(UCT_RC_QP_TABLE_MEMB_ORDER) * sizeof(*ep_slot));
	iface->super.eps[QPN >> UCT_RC_QP_TABLE_ORDER] = (uct_rc_ep_t **)ep_slot;
	ep_slot[QPN & UCS_MASK(UCT_RC_QP_TABLE_MEMB_ORDER)] = ep;

	/* TX CQ: 4096 x 64-byte CQEs (UCX_IB_TX_INLINE_RESP 0), no zip
	 * (TX_CQE_ZIP_ENABLE "no"), as uct_ib_mlx5_devx_create_cq leaves it */
	fabricate_cq(UCT_IB_DIR_TX, TX_CQ_LEN, 0x42, &txcq_buf, &txcq_dbrec);
	/* RX CQ (progress32 polls it first, finds it empty) */
	fabricate_cq(UCT_IB_DIR_RX, RX_CQ_LEN, 0x43, &rxcq_buf, &rxcq_dbrec);
	iface->rx.pref_ptr = rx_pref;
	/* RX_MAX_BATCH default 16; srq.available 0: every receive posted */
	iface->super.super.config.rx_max_batch = 16;
	iface->super.rx.srq.available = 0;

	/* endpoint (rc_ep.c, rc_mlx5_ep.c constructors) */
	ep->super.super.super.iface = &iface->super.super.super.super;
	ucs_queue_head_init(&ep->super.txqp.outstanding);
	ep->super.txqp.unsignaled = 0;
	ucs_arbiter_group_init(&ep->super.arb_group);
	ep->super.flags = UCT_RC_EP_FLAG_CONNECTED;
	ep->super.atomic_mr_offset = 0;
	wq = &ep->tx.wq;
	wq->super.type = UCT_IB_MLX5_OBJ_TYPE_DEVX;
	wq->super.qp_num = QPN;
	wq->qstart = sq_buf;
	wq->qend = sq_buf + SQ_BB * MLX5_SEND_WQE_BB;
	wq->reg = reg;
	wq->dbrec = &qp_dbrec[MLX5_SND_DBR];
	wq->bb_max = BB_MAX;	/* min(bb_max, iface->tx.bb_max) */
	uct_ib_mlx5_txwq_reset(wq);	/* curr, sw_pi 0, prev_sw_pi -1, fence */
	uct_ib_mlx5_init_wq_buf(wq);	/* zeroed, last WQE's ds = 1 */
	ep->super.txqp.available = wq->bb_max;	/* uct_rc_txqp_available_set */
}

/* ---- measured functions (callgrind --toggle-collect=<name>) ------------ */

/* One uct_ep_put_zcopy of one iov entry, no completion handle: UCX's public
 * inline API, an indirect call to the ep_put_zcopy the rc_mlx5 iface
 * installed (uct_rc_mlx5_base_ep_put_zcopy in libuct_ib_mlx5.so). */
__attribute__((noipa)) ucs_status_t measured_put_zcopy(uct_ep_h tl_ep,
							  const uct_iov_t *iov,
							  uint64_t raddr)
{
	return uct_ep_put_zcopy(tl_ep, iov, 1, raddr, RKEY, NULL);
}

/* One uct_ep_put_short of 32 bytes (uct_rc_mlx5_base_ep_put_short). */
__attribute__((noipa)) ucs_status_t measured_put_short(uct_ep_h tl_ep,
							  const void *buf,
							  uint64_t raddr)
{
	return uct_ep_put_short(tl_ep, buf, SHORT_LEN, raddr, RKEY);
}

/* 32 calls of UCX's send-completion poll (rc_mlx5.inl, inlined here); each
 * call handles at most one CQE.  Unit: 1 completion. */
__attribute__((noipa)) unsigned measured_poll_tx32(uct_rc_mlx5_iface_common_t *ifc)
{
	unsigned n = 0;
	int i;

	for (i = 0; i < 32; i++)
		n += uct_rc_mlx5_iface_poll_tx(ifc, UCT_IB_MLX5_POLL_FLAG_HAS_EP);
	return n;
}

/* 32 calls of the iface progress function UCX registers on the worker for
 * rc_mlx5 (uct_rc_mlx5_iface_progress_cyclic in libuct_ib_mlx5.so), as
 * uct_worker_progress dispatches it. */
__attribute__((noipa)) unsigned measured_progress32(void *arg)
{
	unsigned n = 0;
	int i;

	for (i = 0; i < 32; i++)
		n += progress_fn(arg);
	return n;
}

static long measured_units;

/* ---- checks ------------------------------------------------------------ */

static inline uint8_t *wqe_at(uint16_t pi)
{
	return sq_buf + (size_t)(pi & (SQ_BB - 1)) * MLX5_SEND_WQE_BB;
}

static uint32_t rd32(const void *p) { uint32_t v; memcpy(&v, p, 4); return be32toh(v); }
static uint64_t rd64(const void *p) { uint64_t v; memcpy(&v, p, 8); return be64toh(v); }

static int is_short(enum scen s) { return s == S_SHORT_BF || s == S_SHORT_DB; }
static unsigned wqe_bbs(enum scen s) { return is_short(s) ? 2 : 1; }

/* The raddr segment's reserved dword.  With __SSE4_2__ (UCX configured
 * with --enable-optimizations, which adds -mavx) uct_ib_mlx5_ep_set_rdma_seg
 * builds the segment with _mm_shuffle_epi8 and the index 0 (not 0x80) for
 * the reserved bytes: each of them gets byte 0 of the vector, the low byte
 * of the remote address.  The portable build leaves it 0 (scalar path). */
#if defined(__SSE4_2__)
#define RADDR_RESERVED(raddr) (0x01010101u * (uint32_t)((raddr) & 0xff))
#else
#define RADDR_RESERVED(raddr) 0u
#endif

/* What UCX must have written for the post with producer index pi, k-th
 * buffer, `signaled` (CQ_UPDATE expected). */
static void check_wqe(enum scen s, uint16_t pi, int k, uint64_t laddr,
		      uint64_t raddr, int signaled)
{
	const uint8_t *w = wqe_at(pi);
	unsigned ds = is_short(s) ? 5 : 3;	/* 68 B -> 5, 48 B -> 3 */
	int i;

	CHECK(rd32(w) == (((uint32_t)pi << 8) | MLX5_OPCODE_RDMA_WRITE),
	      "WQE %u: opmod_idx_opcode %08x", pi, rd32(w));
	CHECK(rd32(w + 4) == ((QPN << 8) | ds), "WQE %u: qpn_ds %08x", pi,
	      rd32(w + 4));
	CHECK(w[8] == 0 && w[9] == 0 && w[10] == 0,
	      "WQE %u: signature/dci_stream %02x %02x %02x", pi, w[8], w[9], w[10]);
	CHECK(w[11] == (signaled ? MLX5_WQE_CTRL_CQ_UPDATE : 0),
	      "WQE %u: fm_ce_se %02x, want %02x", pi, w[11],
	      signaled ? MLX5_WQE_CTRL_CQ_UPDATE : 0);
	CHECK(rd32(w + 12) == 0, "WQE %u: imm %08x", pi, rd32(w + 12));
	CHECK(rd64(w + 16) == raddr && rd32(w + 24) == RKEY &&
	      rd32(w + 28) == RADDR_RESERVED(raddr),
	      "WQE %u: raddr segment %016llx %08x %08x", pi,
	      (unsigned long long)rd64(w + 16), rd32(w + 24), rd32(w + 28));
	if (!is_short(s)) {
		CHECK(rd32(w + 32) == LEN && rd32(w + 36) == LKEY &&
		      rd64(w + 40) == laddr,
		      "WQE %u: data segment %08x %08x %016llx", pi, rd32(w + 32),
		      rd32(w + 36), (unsigned long long)rd64(w + 40));
		for (i = 48; i < 64; i++)
			CHECK(w[i] == 0, "WQE %u: byte %d written", pi, i);
	} else {
		CHECK(rd32(w + 32) == (SHORT_LEN | MLX5_INLINE_SEG),
		      "WQE %u: inline byte_count %08x", pi, rd32(w + 32));
		CHECK(memcmp(w + 36, short_bufs[k], SHORT_LEN) == 0,
		      "WQE %u: inline data", pi);
	}
}

/* After a post: SQ doorbell record = producer index; the register half
 * UCX wrote (the one before its flip) holds the WQE (BlueFlame: num_bb *
 * 64 bytes) or its first 8 bytes (doorbell), nothing else written. */
static void check_register(enum scen s, uint16_t pi)
{
	uint16_t sw_pi = ep->tx.wq.sw_pi;
	uint8_t *half = (uint8_t *)(reg->addr.uint ^ UCT_IB_MLX5_BF_REG_SIZE);
	unsigned n = wqe_bbs(s) * MLX5_SEND_WQE_BB, o, h;

	CHECK(qp_dbrec[MLX5_SND_DBR] == htobe32(sw_pi),
	      "SQ doorbell record %08x, want %08x", be32toh(qp_dbrec[MLX5_SND_DBR]),
	      sw_pi);
	CHECK(qp_dbrec[0] == 0, "RQ doorbell record touched");
	CHECK(half == uar_page + UAR_BF_OFF || half == uar_page + UAR_BF_OFF + 256,
	      "register pointer left the BlueFlame register");
	if (reg->mode == UCT_IB_MLX5_MMIO_MODE_BF_POST) {
		for (o = 0; o < n; o += MLX5_SEND_WQE_BB)
			CHECK(memcmp(half + o, wqe_at(pi + o / 64), 64) == 0,
			      "BlueFlame half does not hold WQE %u (+%u)", pi, o);
	} else {
		CHECK(memcmp(half, wqe_at(pi), 8) == 0, "doorbell value");
		for (h = 0; h < 2; h++)
			for (o = 8; o < 256; o++)
				CHECK(uar_page[UAR_BF_OFF + h * 256 + o] == 0xa5,
				      "doorbell path wrote more than 8 bytes");
	}
	for (o = 0; o < UAR_BF_OFF; o++)
		CHECK(uar_page[o] == 0xa5, "UAR page written below the register");
}

/* Put completion credits back as the CQEs of everything posted would
 * (uct_rc_mlx5_iface_update_tx_res): untimed, uncounted. */
static inline void retire(void)
{
	ep->super.txqp.available = ep->tx.wq.bb_max;
	iface->super.tx.cq_available = CQ_AVAIL0;
}

/* the tx_moderation rule (uct_rc_iface_tx_moderation): put_short is
 * signalled when unsignaled >= 64 */
static unsigned model_unsignaled;

static int expect_signaled(enum scen s)
{
	if (!is_short(s))
		return 1;	/* put_zcopy: fm_ce_se | CQ_UPDATE, always */
	if (model_unsignaled >= TX_MODERATION) {
		model_unsignaled = 0;
		return 1;
	}
	model_unsignaled++;
	return 0;
}

/* ---- device model for the poll scenarios: one requester CQE per
 * signalled WQE, at the CQ's next index, with the owner bit of its lap */
static unsigned cq_pi;	/* CQEs written by the model */

static void model_cqe(uint16_t wqe_counter)
{
	uct_ib_mlx5_cq_t *cq = &iface->cq[UCT_IB_DIR_TX];
	struct mlx5_cqe64 *cqe = (void *)(txcq_buf + (size_t)(cq_pi & (TX_CQ_LEN - 1)) * 64);

	memset(cqe, 0, sizeof(*cqe));
	cqe->sop_drop_qpn = htobe32(((uint32_t)MLX5_OPCODE_RDMA_WRITE << 24) | QPN);
	cqe->wqe_counter = htobe16(wqe_counter);
	cqe->signature = 0xff;
	/* the store of op_own last, as the device's DMA would be observed */
	__atomic_store_n(&cqe->op_own, (uint8_t)((MLX5_CQE_REQ << 4) |
			 ((cq_pi >> cq->cq_length_log) & 1)), __ATOMIC_RELEASE);
	cq_pi++;
}

/* ---- scenarios --------------------------------------------------------- */

static uct_iov_t iov;
static uint64_t next_off;	/* running offset of the local/remote address */

/* One window of 32 posts (timed if t != NULL), every WQE and the register
 * checked after the window, credits given back. */
static void post_window(enum scen s, uint64_t *cycles, int check_each)
{
	uct_ep_h tl_ep = &ep->super.super.super;
	uint16_t pi0 = ep->tx.wq.sw_pi, prev0 = ep->tx.wq.prev_sw_pi, used;
	uint64_t offs[32];
	ucs_status_t st[32];
	uint64_t t0 = 0, t1;
	int i;

	for (i = 0; i < 32; i++)
		offs[i] = (next_off + (uint64_t)i * 64) & 0xfffff;
	next_off += 32 * 64;
	if (cycles)
		t0 = tsc_start();
	if (!is_short(s)) {
		for (i = 0; i < 32; i++) {
			iov.buffer = (void *)(uintptr_t)(LADDR + offs[i]);
			st[i] = measured_put_zcopy(tl_ep, &iov, RADDR + offs[i]);
			if (check_each)
				check_register(s, pi0 + i);
		}
	} else {
		for (i = 0; i < 32; i++) {
			st[i] = measured_put_short(tl_ep, short_bufs[i], RADDR + offs[i]);
			if (check_each)
				check_register(s, pi0 + 2 * i);
		}
	}
	if (cycles) {
		t1 = tsc_stop();
		*cycles += t1 - t0 > timer_overhead ? t1 - t0 - timer_overhead : 0;
	}
	for (i = 0; i < 32; i++) {
		uint16_t pi = pi0 + i * wqe_bbs(s);

		CHECK(st[i] == (is_short(s) ? UCS_OK : UCS_INPROGRESS),
		      "post %d returned %d", i, st[i]);
		check_wqe(s, pi, i, LADDR + offs[i], RADDR + offs[i],
			  expect_signaled(s));
	}
	CHECK(ep->tx.wq.sw_pi == (uint16_t)(pi0 + 32 * wqe_bbs(s)), "sw_pi %u",
	      ep->tx.wq.sw_pi);
	CHECK(ep->tx.wq.curr == wqe_at(ep->tx.wq.sw_pi), "curr");
	/* uct_ib_mlx5_post_send returns, and uct_rc_txqp_posted takes as
	 * credits, the WQEBBs of the *previous* WQE (the first WQE ever: 1,
	 * prev_sw_pi starting at 0xffff) */
	CHECK(ep->tx.wq.prev_sw_pi == (uint16_t)(pi0 + 31 * wqe_bbs(s)),
	      "prev_sw_pi %u", ep->tx.wq.prev_sw_pi);
	used = (uint16_t)(ep->tx.wq.prev_sw_pi - prev0);
	CHECK(ep->super.txqp.available == (int16_t)(BB_MAX - used),
	      "txqp available %d, want %u", ep->super.txqp.available, BB_MAX - used);
	CHECK(iface->super.tx.cq_available == CQ_AVAIL0 - (int)used,
	      "cq_available %d", iface->super.tx.cq_available);
	check_register(s, pi0 + 31 * wqe_bbs(s));
	retire();
	measured_units += 32;
}

/* One window of 32 send completions: 32 put_zcopy posts (untimed, each
 * checked, each signalled), the device model's 32 CQEs, then 32 polls
 * (timed if cycles != NULL), then the state checked. */
static void poll_window(enum scen s, uint64_t *cycles)
{
	uct_ep_h tl_ep = &ep->super.super.super;
	uct_ib_mlx5_cq_t *cq = &iface->cq[UCT_IB_DIR_TX];
	uint16_t pi0 = ep->tx.wq.sw_pi;
	unsigned ci0 = cq->cq_ci, n;
	uint64_t t0 = 0, t1;
	uint32_t dbrec_before = txcq_dbrec[UCT_IB_MLX5_CQ_SET_CI];
	int i;

	for (i = 0; i < 32; i++) {
		uint64_t off = (next_off + (uint64_t)i * 64) & 0xfffff;

		iov.buffer = (void *)(uintptr_t)(LADDR + off);
		CHECK(uct_ep_put_zcopy(tl_ep, &iov, 1, RADDR + off, RKEY, NULL) ==
		      UCS_INPROGRESS, "put_zcopy");
		check_wqe(S_ZCOPY_BF, pi0 + i, 0, LADDR + off, RADDR + off, 1);
	}
	next_off += 32 * 64;
	for (i = 0; i < 32; i++)
		model_cqe(pi0 + i);
	if (cycles)
		t0 = tsc_start();
	if (s == S_POLL_TX)
		n = measured_poll_tx32(iface);
	else
		n = measured_progress32(iface);
	if (cycles) {
		t1 = tsc_stop();
		*cycles += t1 - t0 > timer_overhead ? t1 - t0 - timer_overhead : 0;
	}
	measured_units += 32;
	CHECK(n == 32, "%u completions polled, want 32", n);
	CHECK(cq->cq_ci == ci0 + 32, "cq_ci %u, want %u", cq->cq_ci, ci0 + 32);
	CHECK(ep->super.txqp.available == BB_MAX,
	      "txqp available %d after all completions, want %u",
	      ep->super.txqp.available, BB_MAX);
	CHECK(iface->super.tx.cq_available == CQ_AVAIL0,
	      "cq_available %d after all completions", iface->super.tx.cq_available);
	CHECK(ep->tx.wq.sig_pi == (uint16_t)(pi0 + 31), "sig_pi");
	CHECK(iface->cq[UCT_IB_DIR_RX].cq_ci == 0, "RX CQ consumed");
	/* Release build (no UCS_ENABLE_ASSERT): uct_ib_mlx5_update_db_cq_ci
	 * does not write the CQ doorbell record; it must stay as it was. */
#if UCS_ENABLE_ASSERT
	CHECK(txcq_dbrec[UCT_IB_MLX5_CQ_SET_CI] == htobe32(cq->cq_ci & 0xffffff),
	      "CQ doorbell record");
#else
	CHECK(txcq_dbrec[UCT_IB_MLX5_CQ_SET_CI] == dbrec_before && dbrec_before == 0,
	      "CQ doorbell record written by a release build");
#endif
	(void)dbrec_before;
}

static uint64_t run_units(enum scen s, long units, int check_each)
{
	uint64_t cycles = 0;
	long done;

	for (done = 0; done < units; done += 32) {
		if (s == S_POLL_TX || s == S_PROGRESS)
			poll_window(s, &cycles);
		else
			post_window(s, &cycles, check_each);
	}
	return cycles;
}

static void hexdump_wqe(uint16_t pi, unsigned bytes)
{
	unsigned i;

	for (i = 0; i < bytes; i++)
		printf("%02x", wqe_at(pi)[i]);
	printf("\n");
}

int main(int argc, char **argv)
{
	const char *name = argc > 1 ? argv[1] : "";
	const char *mode = argc > 2 ? argv[2] : "count";
	long units = argc > 3 ? atol(argv[3]) : 20000;
	int rounds = argc > 4 ? atoi(argv[4]) : 15;
	int timing = strcmp(mode, "time") == 0;
	double per[101], ghz_tsc;
	const char *unit;
	unsigned k;
	int r;

	for (k = 0; k < sizeof(scen_tab) / sizeof(scen_tab[0]); k++)
		if (strcmp(name, scen_tab[k].name) == 0)
			break;
	if (k == sizeof(scen_tab) / sizeof(scen_tab[0])) {
		fprintf(stderr, "usage: %s SCENARIO [time|count|dump] [UNITS] [ROUNDS]\n",
			argv[0]);
		return 1;
	}
	scen = scen_tab[k].s;
	unit = scen_tab[k].unit;
	if (units < 32 || units % 32) {
		fprintf(stderr, "UNITS must be a positive multiple of 32\n");
		return 1;
	}
	if (rounds < 1 || rounds > 101)
		rounds = 15;
	if (timing) {
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET(sched_getcpu(), &set);
		sched_setaffinity(0, sizeof(set), &set);
	}

	fabricate((scen == S_ZCOPY_DB || scen == S_SHORT_DB) ?
		  UCT_IB_MLX5_MMIO_MODE_DB : UCT_IB_MLX5_MMIO_MODE_BF_POST);
	iov.buffer = (void *)(uintptr_t)LADDR;
	iov.length = LEN;
	iov.memh = memh;
	iov.stride = 0;
	iov.count = 1;
	for (k = 0; k < 32; k++)
		for (r = 0; r < (int)SHORT_LEN; r++)
			short_bufs[k][r] = (uint8_t)(k * 37 + r + 1);
	if (scen == S_PROGRESS) {
		const char *off = getenv("PROGRESS_OFFSET");
		Dl_info dli;

		CHECK(off != NULL, "progress32 needs PROGRESS_OFFSET (run.sh sets it)");
		progress_fn = (unsigned (*)(void *))((uintptr_t)iface->super.super.super.super.ops.ep_put_zcopy +
						     strtoll(off, NULL, 0));
		/* sanity: the bytes there are a function entry of the .so
		 * (endbr64 or push), not the middle of an instruction */
		CHECK(dladdr((void *)progress_fn, &dli) && dli.dli_fname &&
		      strstr(dli.dli_fname, "libuct_ib_mlx5"),
		      "PROGRESS_OFFSET does not point into libuct_ib_mlx5.so");
	}

	if (strcmp(mode, "dump") == 0) {
		uint16_t pi = ep->tx.wq.sw_pi;

		if (scen == S_POLL_TX || scen == S_PROGRESS)
			scen = S_ZCOPY_BF;
		post_window(scen, NULL, 1);
		hexdump_wqe(pi, wqe_bbs(scen) * MLX5_SEND_WQE_BB);
		return 0;
	}

	/* preflight: enough fully checked windows (each post followed by the
	 * doorbell record and register check) to wrap the 1024-WQEBB SQ and,
	 * for the poll scenarios, the 4096-entry CQ once */
	for (k = 0; k < (scen == S_POLL_TX || scen == S_PROGRESS ? 130u : 40u); k++) {
		if (scen == S_POLL_TX || scen == S_PROGRESS)
			poll_window(scen, NULL);
		else
			post_window(scen, NULL, 1);
	}
	if (!timing) {
		/* measured_units: every unit that went through the measured
		 * function, the checked preflight windows included (the same
		 * calls on the same path), for run.sh's Ir / unit */
		run_units(scen, units, 0);
		printf("%s count units=%ld measured_units=%ld sw_pi=%u raddr_reserved=%s checks=OK\n",
		       name, units, measured_units, ep->tx.wq.sw_pi,
		       RADDR_RESERVED(0xab) ? "low-byte-x4(SSE4.2 path)" : "0");
		return 0;
	}

	calibrate(10001);
	ghz_tsc = tsc_per_ns;
	run_units(scen, units, 0);	/* warm-up round */
	for (r = 0; r < rounds; r++)
		per[r] = (double)run_units(scen, units, 0) / units / tsc_per_ns;
	qsort(per, rounds, sizeof(per[0]), cmp_dbl);
	printf("%s time units/round=%ld rounds=%d ns/unit median=%.2f min=%.2f max=%.2f "
	       "(tsc %.4f GHz, timer overhead %llu cycles subtracted per window of 32) "
	       "unit=%s checks=OK\n",
	       name, units, rounds, per[rounds / 2], per[0], per[rounds - 1],
	       ghz_tsc, (unsigned long long)timer_overhead, unit);
	return 0;
}
