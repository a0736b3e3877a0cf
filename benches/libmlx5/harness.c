/*
 * harness.c - run libmlx5's real data-path code (Debian 12's static
 * /usr/lib/x86_64-linux-gnu/libmlx5.a, rdma-core 44.0) on queues fabricated
 * in ordinary memory, with no RDMA hardware, for instruction counts
 * (callgrind) and timings.
 *
 * What is fabricated is what libmlx5's post_send / poll_cq / cq_ex poll code
 * reads after a real ibv_create_qp / ibv_create_cq on a ConnectX device
 * (rdma-core v44.0 providers/mlx5/verbs.c), under MLX5_SINGLE_THREADED=1
 * (every mlx5_spinlock has need_lock = 0):
 *   - struct mlx5_context: cqe_version, prefer_bf, shut_up_bf, dbg_fp,
 *     qp_table[] (QPN -> QP, read by mlx5_poll_cq) and uidx_table[]
 *     (user index -> QP, read by mlx5_poll_cq_v1 / the *_v1 cq_ex ops);
 *   - an RC struct mlx5_qp as ibv_create_qp(RC, max_send_wr = 64,
 *     max_send_sge = 1, max_inline_data = 0, sq_sig_all = 0) gets it:
 *     the default RC send ops (incl. BIND_MW/LOCAL_INV) make libmlx5 size a
 *     send WQE at 256 bytes, so the SQ is 64 * 256 B = 16 KiB = 256 WQEBBs
 *     and sq.max_post = 64; wrid[256], wqe_head[256], wr_data[256];
 *     doorbell record; state RTS (qp_state_max_gs = max_gs = 1);
 *   - struct mlx5_bf as for a BlueFlame-capable UAR: reg = UAR page + 0x800
 *     (here ordinary memory), buf_size = bf_reg_size / 2 = 256, uuarn = 1,
 *     need_lock = 0;
 *   - ctx->prefer_bf = 1 (rdma-core's default, MLX5_POST_SEND_PREFER_BF
 *     unset) for post_write_sge_bf, post_send_inline32_bf,
 *     post_send_ud_bf, post_send_raw_eth64_bf and wr_write1_bf
 *     (BlueFlame: 128 bytes for the 5-DS UD WQE, 64 for the 4-DS raw
 *     one and the 3-DS RDMA WRITE), 0
 *     (MLX5_POST_SEND_PREFER_BF=0) for every other scenario, so
 *     single-WR posts ring the 8-byte doorbell (except inline WQEs, which
 *     libmlx5 sends with BlueFlame unless ctx->shut_up_bf, set for
 *     post_send_inline32_db only);
 *   - for post_send_*: the QP turned into the one the scenario posts on
 *     (fabricate_send);
 *   - struct mlx5_cq with 512 64-byte CQEs (all initialised to opcode
 *     INVALID as mlx5_alloc_cq_buf does), doorbell record, cqn;
 *   - the QP's RQ (256 WQEs of 16 B, one data segment), for post_recv* and
 *     the receive-poll scenarios (responder CQEs of IB RC SEND receives);
 *   - for post_srq_recv*: a struct mlx5_srq as ibv_create_srq(max_wr = 255,
 *     max_sge = 1) leaves it (fabricate_srq).
 *
 * Nothing of rdma-core is copied here: its private headers are included
 * (RDMA_CORE_SRC, see gen-headers.sh and README.md) and its code is linked
 * from libmlx5.a.  The static library renames every global symbol with the
 * prefix "rdmacore44_0_"; that is why the entry points below carry it.
 *
 * Usage: harness SCENARIO [time|count] [UNITS] [ROUNDS]
 *   time  : correctness checks, then ROUNDS timed rounds of UNITS units each;
 *           prints ns/unit (median, min) and cycles/unit.
 *   count : correctness checks, then one round of UNITS units, no timing
 *           output; meant to run under valgrind --tool=callgrind
 *           --toggle-collect=<measured function>.
 * Scenarios: post_write_sge post_write_sge_bf post_write_list32
 *            poll_cq32 poll_cq32_v0 start_poll32 start_poll32_lock
 *            post_recv1 post_recv32 poll_cq32_recv start_poll32_recv
 *            post_srq_recv1 post_srq_recv32
 *            post_send_inline32 post_send_inline32_bf post_send_inline32_db
 *            post_send_ud post_send_raw_eth64 post_send_raw_eth64_min0
 *            post_send_ud_bf post_send_raw_eth64_bf
 *            wr_write32 wr_write32_sig128 wr_write1 wr_write1_bf
 *            and "addr" (prints the function pointers mlx5_cq_fill_pfns
 *            and mlx5_qp_fill_wr_pfns installed, for run.sh to name with
 *            nm).
 *
 * wr_write*: libmlx5's "new post send" API (ibv_wr_start / ibv_wr_rdma_write
 * / ibv_wr_set_sge / ibv_wr_complete): the ibv_qp_ex ops that
 * mlx5_qp_fill_wr_pfns installs on the same RC QP, as
 * ibv_create_qp_ex(..., IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) does (make_qp_ex).
 */
#define _GNU_SOURCE
#include <config.h>

#include <errno.h>
#include <stdarg.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <x86intrin.h>

#include <infiniband/verbs.h>
#include "mlx5.h"
#include "wqe.h"
#define HARNESS_EXIT_ON_FAILURE
#include "harness_common.h"

/* ---- libmlx5.a entry points (global symbols, prefixed by Debian's build) */
int rdmacore44_0_mlx5_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr,
				struct ibv_send_wr **bad_wr);
int rdmacore44_0_mlx5_poll_cq(struct ibv_cq *ibcq, int ne, struct ibv_wc *wc);
int rdmacore44_0_mlx5_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr,
				struct ibv_recv_wr **bad_wr);
int rdmacore44_0_mlx5_poll_cq_v1(struct ibv_cq *ibcq, int ne,
				 struct ibv_wc *wc);
int rdmacore44_0_mlx5_cq_fill_pfns(struct mlx5_cq *cq,
				   const struct ibv_cq_init_attr_ex *cq_attr,
				   struct mlx5_context *mctx);
int rdmacore44_0_mlx5_post_srq_recv(struct ibv_srq *ibsrq,
				    struct ibv_recv_wr *wr,
				    struct ibv_recv_wr **bad_wr);
void rdmacore44_0_mlx5_free_srq_wqe(struct mlx5_srq *srq, int ind);
int rdmacore44_0_mlx5_qp_fill_wr_pfns(struct mlx5_qp *mqp,
				      const struct ibv_qp_init_attr_ex *attr,
				      const struct mlx5dv_qp_init_attr *mlx5_attr);
void rdmacore44_0_mlx5_qp_fill_wr_complete_real(struct mlx5_qp *mqp);

/* ---- fabricated objects ------------------------------------------------ */
#define QPN        0x000a1bu	/* arbitrary 24-bit QP number */
#define UIDX       0x000001u	/* user index, as mlx5_store_uidx hands out first */
#define CQN        0x000042u
#define SQ_WQEBB   256u
#define SQ_MAX_POST 64u		/* wq_size / wqe_size = 16384 / 256 */
#define NCQE       512u
#define RQ_WQE     256u		/* receive WQEs of 16 B: max_recv_sge = 1 */
#define RLEN       2048u
#define BF_REG_SIZE 512u	/* 1 << log_bf_reg_size on ConnectX-4 and later */

#define LKEY       0x00001234u
#define RKEY       0x00005678u
#define LADDR      0x0000000010000000ull
#define RADDR      0x00007f0000001000ull
#define LEN        64u

/* The RC peer as an IB receive completion reports it (responder CQEs) */
#define REMOTE_QPN 0x000b2cu	/* the peer QP's number: CQE flags_rqpn[23:0] */
#define REMOTE_LID 0x0003u	/* the peer port's LID: CQE slid */

/* SRQ as ibv_create_srq(max_wr = 255, max_sge = 1) leaves it on a ConnectX
 * (max_srq_wr = 32767, so mlx5_alloc_srq_buf keeps a wait queue):
 * max_wr * 2 + 1 = 511 -> srq->max = 512 WQEs of 32 B (next segment + one
 * data segment, wqe_shift 5); free list 0 -> 1 -> ... -> 255 (head 0, tail
 * 255: 255 postable, attr.max_wr reported back = tail = 255); wait queue
 * 256 -> ... -> 511 (waitq_head 256, waitq_tail 511). */
#define SRQ_MAX    512u
#define SRQ_TAIL0  255
#define SRQN       0x000043u

/* Send scenarios (post_send_inline32*, post_send_ud, post_send_raw_eth64*):
 * the same work as mlx5dp's sq/rc_send_inline32, sq/ud_send_av and
 * sq/raw_eth64 (benches/src/sq.rs). */
#define INL_LEN    32u		/* IBV_SEND_INLINE payload */
#define UD_RQPN    0x000456u	/* wr.ud.remote_qpn */
#define UD_QKEY    0x11112222u	/* wr.ud.remote_qkey */
#define UD_DLID    0x0017u	/* ibv_ah_attr.dlid of the address handle */
#define UD_WQEBBS  2u		/* UD WQE: 16 + 48 + 16 = 80 B = 5 DS */
#define ETH_LEN    64u		/* the raw Ethernet frame */

static struct mlx5_context *ctx;
static struct mlx5_qp *qp;
static struct mlx5_cq *cq;
static struct mlx5_bf bf;
static uint8_t *sq_buf, *rq_buf, *cqe_buf, *uar_page;
static __be32 *qp_dbrec, *cq_dbrec;
static struct mlx5_srq *srq;
static uint8_t *srq_buf;
static __be32 *srq_dbrec;

/* Which send WQE the post scenarios build (check_wqe). */
enum send_kind { SK_WRITE, SK_INLINE32, SK_UD, SK_RAW };
static enum send_kind send_kind = SK_WRITE;
static unsigned wqe_bbs = 1;	/* WQEBBs per WQE (cur_post step) */
static unsigned eth_inl;	/* ctx->eth_min_inline_size of SK_RAW */
static struct mlx5_ah *ah;	/* SK_UD: the address handle */
static uint8_t inl_bufs[32][INL_LEN] __attribute__((aligned(64)));
static uint8_t frames[32][ETH_LEN] __attribute__((aligned(64)));

/* wr_write* (ibv_wr_* API): the qp_ex of the QP, and the signalling of
 * the RDMA WRITEs.  sig_every = 0: every WR IBV_SEND_SIGNALED (as
 * post_write_*); sig_every = 128: only the WQE at counter c with
 * c % 128 == 127 (what mlx5dp's forced-CQE rule does on its 256-WQEBB ring
 * with unsignalled work requests: signal_every = half the ring). */
static struct ibv_qp_ex *qpx;
static int wr_api;
static unsigned sig_every;

static void fabricate(int cqe_version, int prefer_bf)
{
	struct ibv_qp *ibqp;
	unsigned i;

	/* context */
	ctx = zalloc(4096, sizeof(*ctx));
	ctx->cqe_version = cqe_version;
	/* prefer_bf is what MLX5_POST_SEND_PREFER_BF sets: 1 when the
	 * variable is unset (rdma-core's default), 0 with
	 * MLX5_POST_SEND_PREFER_BF=0.  post_send_db() uses BlueFlame for a
	 * non-inline WQE only if prefer_bf is set (and nreq == 1, uuarn != 0,
	 * 1 < size <= buf_size / 16); otherwise the 8-byte doorbell. */
	ctx->prefer_bf = prefer_bf;
	ctx->shut_up_bf = 0;		/* MLX5_SHUT_UP_BF unset */
	ctx->bf_reg_size = BF_REG_SIZE;
	ctx->cache_line_size = 64;
	ctx->dbg_fp = stderr;
	strcpy(ctx->hostname, "harness");

	/* QP */
	qp = zalloc(64, sizeof(*qp));
	cq = zalloc(64, sizeof(*cq));
	ibqp = &qp->verbs_qp.qp;
	ibqp->context = &ctx->ibv_ctx.context;
	ibqp->qp_num = QPN;
	ibqp->qp_type = IBV_QPT_RC;
	ibqp->state = IBV_QPS_RTS;
	ibqp->send_cq = &cq->verbs_cq.cq;
	ibqp->recv_cq = &cq->verbs_cq.cq;
	qp->ibv_qp = ibqp;
	qp->rsc.type = MLX5_RSC_TYPE_QP;
	qp->rsc.rsn = cqe_version ? UIDX : QPN;	/* as create_qp sets it */

	sq_buf = zalloc(4096, SQ_WQEBB * MLX5_SEND_WQE_BB);
	qp->sq_start = sq_buf;
	qp->sq.qend = sq_buf + SQ_WQEBB * MLX5_SEND_WQE_BB;
	qp->sq.wqe_cnt = SQ_WQEBB;
	qp->sq.max_post = SQ_MAX_POST;
	qp->sq.max_gs = 1;
	qp->sq.qp_state_max_gs = 1;	/* RTS */
	qp->sq.wqe_shift = 6;
	qp->sq.wrid = zalloc(64, SQ_WQEBB * sizeof(uint64_t));
	qp->sq.wqe_head = zalloc(64, SQ_WQEBB * sizeof(unsigned));
	qp->sq.wr_data = zalloc(64, SQ_WQEBB * sizeof(uint32_t));
	qp->sq.lock.need_lock = 0;
	qp->rq.lock.need_lock = 0;
	qp->rq.qp_state_max_gs = 1;
	/* RQ as create_qp(max_recv_wr = 256, max_recv_sge = 1) sizes it:
	 * 16-byte WQEs (one data segment, no signature), at the start of
	 * the QP buffer (rq.offset 0). */
	rq_buf = zalloc(4096, RQ_WQE * 16);
	qp->buf.buf = rq_buf;
	qp->rq.offset = 0;
	qp->rq.wqe_cnt = RQ_WQE;
	qp->rq.wqe_shift = 4;
	qp->rq.max_gs = 1;
	qp->rq.max_post = RQ_WQE;
	qp->rq.wrid = zalloc(64, RQ_WQE * sizeof(uint64_t));
	qp->max_inline_data = 256 - 192 - 4;	/* what mlx5_calc_sq_size reports */
	qp->fm_cache = 0;
	qp->sq_signal_bits = 0;		/* sq_sig_all = 0 */
	qp->wq_sig = 0;
	qp->atomics_enabled = 1;
	qp_dbrec = zalloc(64, 64);
	qp->db = qp_dbrec;

	/* BlueFlame register: UAR page + MLX5_BF_OFFSET, ordinary memory here */
	uar_page = zalloc(4096, 4096);
	bf.reg = uar_page + MLX5_BF_OFFSET;
	bf.need_lock = 0;
	bf.lock.need_lock = 0;
	bf.offset = 0;
	bf.buf_size = BF_REG_SIZE / 2;
	bf.uuarn = 1;
	qp->bf = &bf;

	/* CQ */
	cqe_buf = zalloc(4096, NCQE * 64);
	for (i = 0; i < NCQE; i++)
		((struct mlx5_cqe64 *)(cqe_buf + i * 64))->op_own =
			MLX5_CQE_INVALID << 4;
	cq->verbs_cq.cq.context = &ctx->ibv_ctx.context;
	cq->verbs_cq.cq.cqe = NCQE - 1;
	cq->buf_a.buf = cqe_buf;
	cq->buf_a.length = NCQE * 64;
	cq->active_buf = &cq->buf_a;
	cq->cqe_sz = 64;
	cq->cqn = CQN;
	cq->cons_index = 0;
	cq_dbrec = zalloc(64, 64);
	cq->dbrec = cq_dbrec;
	cq->lock.need_lock = 0;
	cq->stall_enable = 0;
	cq->stall_adaptive_enable = 0;
	cq->flags = 0;

	/* resource tables */
	ctx->qp_table[QPN >> MLX5_QP_TABLE_SHIFT].refcnt = 1;
	ctx->qp_table[QPN >> MLX5_QP_TABLE_SHIFT].table =
		zalloc(64, (MLX5_QP_TABLE_MASK + 1) * sizeof(struct mlx5_qp *));
	ctx->qp_table[QPN >> MLX5_QP_TABLE_SHIFT].table[QPN & MLX5_QP_TABLE_MASK] = qp;
	ctx->uidx_table[UIDX >> MLX5_UIDX_TABLE_SHIFT].refcnt = 1;
	ctx->uidx_table[UIDX >> MLX5_UIDX_TABLE_SHIFT].table =
		zalloc(64, (MLX5_UIDX_TABLE_MASK + 1) * sizeof(struct mlx5_resource *));
	ctx->uidx_table[UIDX >> MLX5_UIDX_TABLE_SHIFT].table[UIDX & MLX5_UIDX_TABLE_MASK] =
		&qp->rsc;
}

/* An SRQ as mlx5_create_srq(max_wr = 255, max_sge = 1) leaves it
 * (verbs.c mlx5_create_srq + srq.c mlx5_alloc_srq_buf / set_srq_buf_ll),
 * with need_lock = 0 (MLX5_SINGLE_THREADED=1) and no WQE signature
 * (MLX5_SRQ_SIGNATURE unset). */
static void fabricate_srq(void)
{
	unsigned i;

	srq = zalloc(64, sizeof(*srq));
	srq->vsrq.srq.context = &ctx->ibv_ctx.context;
	srq->vsrq.srq.handle = 1;
	srq->lock.need_lock = 0;
	srq->max_gs = 1;		/* (32 - 16) / 16 */
	srq->wqe_shift = 5;		/* ilog32(32 - 1) */
	srq->max = SRQ_MAX;		/* align_queue_size(255 * 2 + 1) */
	srq_buf = zalloc(4096, SRQ_MAX << 5);
	srq->buf.buf = srq_buf;
	srq->buf.length = SRQ_MAX << 5;
	srq->head = 0;
	srq->tail = SRQ_TAIL0;		/* align_queue_size(255 + 1) - 1 */
	srq->waitq_head = SRQ_TAIL0 + 1;
	srq->waitq_tail = SRQ_MAX - 1;
	srq->wrid = zalloc(64, SRQ_MAX * sizeof(uint64_t));
	/* set_srq_buf_ll(srq, head, tail) and (waitq_head, waitq_tail):
	 * WQE i's next_wqe_index = i + 1; the last of each list is left 0 */
	for (i = 0; i < SRQ_TAIL0; i++)
		((struct mlx5_wqe_srq_next_seg *)(srq_buf + (i << 5)))->next_wqe_index =
			htobe16(i + 1);
	for (i = SRQ_TAIL0 + 1; i < SRQ_MAX - 1; i++)
		((struct mlx5_wqe_srq_next_seg *)(srq_buf + (i << 5)))->next_wqe_index =
			htobe16(i + 1);
	srq_dbrec = zalloc(64, 64);
	srq->db = srq_dbrec;		/* *srq->db = 0 */
	srq->custom_db = false;
	srq->counter = 0;
	srq->wq_sig = 0;
	srq->srqn = SRQN;
	srq->rsc.rsn = SRQN;
	srq->rsc.type = MLX5_RSC_TYPE_SRQ;
}

/* cq_ex: what create_cq(..., MLX5_CQ_FLAGS_EXTENDED) does around
 * mlx5_cq_fill_pfns: it sees MLX5_CQ_FLAGS_SINGLE_THREADED if the user asked
 * for IBV_CREATE_CQ_ATTR_SINGLE_THREADED, then cq->flags = EXTENDED. */
static struct ibv_cq_ex *make_cq_ex(int single_threaded)
{
	struct ibv_cq_init_attr_ex attr = {
		.cqe = NCQE - 1,
		.wc_flags = IBV_WC_STANDARD_FLAGS,
		.comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS,
		.flags = single_threaded ? IBV_CREATE_CQ_ATTR_SINGLE_THREADED : 0,
	};
	int rc;

	cq->flags = single_threaded ? MLX5_CQ_FLAGS_SINGLE_THREADED : 0;
	rc = rdmacore44_0_mlx5_cq_fill_pfns(cq, &attr, ctx);
	CHECK(rc == 0, "mlx5_cq_fill_pfns returned %d", rc);
	cq->flags = MLX5_CQ_FLAGS_EXTENDED;
	CHECK(cq->verbs_cq.cq_ex.start_poll && cq->verbs_cq.cq_ex.next_poll &&
	      cq->verbs_cq.cq_ex.end_poll, "cq_ex poll ops not installed");
	return &cq->verbs_cq.cq_ex;
}

/* The send ops sq_overhead() assumes for an RC QP created without
 * IBV_QP_INIT_ATTR_SEND_OPS_FLAGS: asking for exactly these keeps the QP
 * the harness fabricates (256-byte WQEs, 256 WQEBBs, max_post 64). */
#define RC_DEFAULT_SEND_OPS						\
	(IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_INV |		\
	 IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_WRITE |	\
	 IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ |	\
	 IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |				\
	 IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | IBV_QP_EX_WITH_LOCAL_INV |	\
	 IBV_QP_EX_WITH_BIND_MW)

/* qp_ex: what create_qp does for ibv_create_qp_ex(RC, comp_mask |=
 * IBV_QP_INIT_ATTR_SEND_OPS_FLAGS, send_ops_flags = RC_DEFAULT_SEND_OPS),
 * no mlx5dv attributes: mlx5_qp_fill_wr_pfns(qp, attr, NULL) (RC: the
 * rc_xrc_dc builders and rc_uc setters), VERBS_QP_EX in verbs_qp.comp_mask;
 * then what modify_qp to RTS does to the ops (set_qp_operational_state:
 * mlx5_qp_fill_wr_complete_real). */
static struct ibv_qp_ex *make_qp_ex(void)
{
	struct ibv_qp_init_attr_ex attr = {
		.qp_type = IBV_QPT_RC,
		.comp_mask = IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.send_ops_flags = RC_DEFAULT_SEND_OPS,
	};
	struct ibv_qp_ex *x = &qp->verbs_qp.qp_ex;
	int rc;

	rc = rdmacore44_0_mlx5_qp_fill_wr_pfns(qp, &attr, NULL);
	CHECK(rc == 0, "mlx5_qp_fill_wr_pfns returned %d", rc);
	qp->verbs_qp.comp_mask |= VERBS_QP_EX;
	rdmacore44_0_mlx5_qp_fill_wr_complete_real(qp);
	CHECK(x->wr_start && x->wr_complete && x->wr_abort && x->wr_rdma_write &&
	      x->wr_set_sge, "qp_ex wr ops not installed");
	CHECK((void *)x == (void *)qp->ibv_qp, "qp_ex does not alias the ibv_qp");
	return x;
}

/* ---- measured functions (callgrind --toggle-collect=<name>) ------------ */

/* One ibv_post_send-equivalent call: libmlx5's post_send, called directly.
 * Unit: 1 WQE for post_write_sge(_bf); 32 WQEs per call for list32. */
__attribute__((noinline)) int measured_post_send(struct ibv_qp *ibqp,
						 struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad_wr;

	return rdmacore44_0_mlx5_post_send(ibqp, wr, &bad_wr);
}

/* libmlx5's ibv_wr_* API (the qp_ex ops mlx5_qp_fill_wr_pfns installed,
 * called through the inline ibv_wr_* wrappers of verbs.h): ibv_wr_start,
 * 32 x {wr_id, wr_flags, ibv_wr_rdma_write, ibv_wr_set_sge}, then
 * ibv_wr_complete.  The WRs' parameters are read from the same prebuilt
 * ibv_send_wr array post_write_list32 posts (wrs[0..31] with their SGEs).
 * Unit: 1 WQE = 1/32 of a call. */
__attribute__((noinline)) int measured_wr_write32(struct ibv_qp_ex *x,
						  const struct ibv_send_wr *wr)
{
	int i;

	ibv_wr_start(x);
	for (i = 0; i < 32; i++, wr++) {
		x->wr_id = wr->wr_id;
		x->wr_flags = wr->send_flags;
		ibv_wr_rdma_write(x, wr->wr.rdma.rkey, wr->wr.rdma.remote_addr);
		ibv_wr_set_sge(x, wr->sg_list->lkey, wr->sg_list->addr,
			       wr->sg_list->length);
	}
	return ibv_wr_complete(x);
}

/* The same with one WR per ibv_wr_start..ibv_wr_complete.  Unit: 1 WQE =
 * 1 call. */
__attribute__((noinline)) int measured_wr_write1(struct ibv_qp_ex *x,
						 const struct ibv_send_wr *wr)
{
	ibv_wr_start(x);
	x->wr_id = wr->wr_id;
	x->wr_flags = wr->send_flags;
	ibv_wr_rdma_write(x, wr->wr.rdma.rkey, wr->wr.rdma.remote_addr);
	ibv_wr_set_sge(x, wr->sg_list->lkey, wr->sg_list->addr,
		       wr->sg_list->length);
	return ibv_wr_complete(x);
}

/* One ibv_post_recv-equivalent call: libmlx5's post_recv, called directly.
 * Unit: 1 WQE for post_recv1; 32 WQEs per call for post_recv32. */
__attribute__((noinline)) int measured_post_recv(struct ibv_qp *ibqp,
						 struct ibv_recv_wr *wr)
{
	struct ibv_recv_wr *bad_wr;

	return rdmacore44_0_mlx5_post_recv(ibqp, wr, &bad_wr);
}

/* One ibv_poll_cq-equivalent call with ne = 32 (mlx5_poll_cq_v1, the
 * function a CQE-version-1 context installs, or mlx5_poll_cq for v0). */
__attribute__((noinline)) int measured_poll_cq_v1(struct ibv_cq *ibcq,
						  struct ibv_wc *wc)
{
	return rdmacore44_0_mlx5_poll_cq_v1(ibcq, 32, wc);
}

__attribute__((noinline)) int measured_poll_cq_v0(struct ibv_cq *ibcq,
						  struct ibv_wc *wc)
{
	return rdmacore44_0_mlx5_poll_cq(ibcq, 32, wc);
}

/* ibv_start_poll / ibv_next_poll / ibv_end_poll with a budget of 32,
 * reading wr_id and status of every completion (stores them to wr_ids[]
 * and ORs the status).  No probe past the 32nd completion. */
__attribute__((noinline)) int measured_start_poll(struct ibv_cq_ex *cqx,
						  uint64_t *wr_ids,
						  unsigned *status_or)
{
	struct ibv_poll_cq_attr attr = {};
	unsigned st = 0;
	int n = 0;

	if (ibv_start_poll(cqx, &attr))
		return 0;
	for (;;) {
		wr_ids[n] = cqx->wr_id;
		st |= cqx->status;
		if (++n == 32 || ibv_next_poll(cqx))
			break;
	}
	ibv_end_poll(cqx);
	*status_or = st;
	return n;
}

/* The same with a receive CQ: reads wr_id, status and byte_len
 * (ibv_wc_read_byte_len, i.e. the read_byte_len op) of every completion. */
__attribute__((noinline)) int measured_start_poll_recv(struct ibv_cq_ex *cqx,
						       uint64_t *wr_ids,
						       uint32_t *lens,
						       unsigned *status_or)
{
	struct ibv_poll_cq_attr attr = {};
	unsigned st = 0;
	int n = 0;

	if (ibv_start_poll(cqx, &attr))
		return 0;
	for (;;) {
		wr_ids[n] = cqx->wr_id;
		st |= cqx->status;
		lens[n] = ibv_wc_read_byte_len(cqx);
		if (++n == 32 || ibv_next_poll(cqx))
			break;
	}
	ibv_end_poll(cqx);
	*status_or = st;
	return n;
}

/* One ibv_post_srq_recv-equivalent call: libmlx5's post_srq_recv, called
 * directly.  Unit: 1 WQE for post_srq_recv1; 32 WQEs per call for
 * post_srq_recv32. */
__attribute__((noinline)) int measured_post_srq_recv(struct ibv_srq *ibsrq,
						     struct ibv_recv_wr *wr)
{
	struct ibv_recv_wr *bad_wr;

	return rdmacore44_0_mlx5_post_srq_recv(ibsrq, wr, &bad_wr);
}

/* ---- device model / helpers (never inside the measured functions) ------ */

/* Units that went through the measured function, preflight included
 * (callgrind counts every call of the toggled function; run.sh divides by
 * this). */
static long measured_units;

static struct ibv_sge sges[32];
static struct ibv_send_wr wrs[32];
static uint64_t next_wr_id = 0x1000;
static struct ibv_sge rsges[32];
static struct ibv_recv_wr rwrs[32];

static void init_wrs(void)
{
	int i;

	for (i = 0; i < 32; i++) {
		rsges[i].addr = LADDR + 0x100000 + i * RLEN;
		rsges[i].length = RLEN;
		rsges[i].lkey = LKEY;
		memset(&rwrs[i], 0, sizeof(rwrs[i]));
		rwrs[i].next = (i == 31) ? NULL : &rwrs[i + 1];
		rwrs[i].sg_list = &rsges[i];
		rwrs[i].num_sge = 1;
	}

	for (i = 0; i < 32; i++) {
		sges[i].addr = LADDR + i * 4096;
		sges[i].length = LEN;
		sges[i].lkey = LKEY;
		memset(&wrs[i], 0, sizeof(wrs[i]));
		wrs[i].next = (i == 31) ? NULL : &wrs[i + 1];
		wrs[i].sg_list = &sges[i];
		wrs[i].num_sge = 1;
		wrs[i].opcode = IBV_WR_RDMA_WRITE;
		wrs[i].send_flags = IBV_SEND_SIGNALED;
		wrs[i].wr.rdma.remote_addr = RADDR + i * 4096;
		wrs[i].wr.rdma.rkey = RKEY;
	}
}

/* The send scenarios: turn the fabricated QP and wrs[] into what the
 * scenario posts.  Called after fabricate() and init_wrs().
 *
 * SK_INLINE32: the RC QP as it is (ibv_create_qp(RC, max_send_wr = 64,
 *   max_send_sge = 1, max_inline_data = 0)); mlx5_calc_sq_size reports
 *   qp->max_inline_data = 256 - 192 - 4 = 60 >= 32.  Each WR: IBV_WR_SEND,
 *   IBV_SEND_SIGNALED | IBV_SEND_INLINE, one SGE of 32 bytes pointing at
 *   inl_bufs[k] (lkey unused by libmlx5 for inline).
 * SK_UD: the QP becomes ibv_create_qp(UD, max_send_wr = 128, max_send_sge =
 *   1, max_inline_data = 0): sq_overhead(UD, default ops SEND | SEND_WITH_IMM
 *   | TSO) = ctrl 16 + datagram 48 = 64, + 1 data segment = 80 -> WQE size
 *   128 B; wq_size = roundup_pow_of_two(128 * 128) = 16 KiB = 256 WQEBBs
 *   (the same ring as mlx5dp's), max_post = 128, max_inline_data = 128 - 64
 *   - 4 = 60; no MLX5_QP_FLAGS_USE_UNDERLAY.  The address handle is a
 *   struct mlx5_ah as mlx5_create_ah(pd, {dlid = 0x17, sl = 0,
 *   src_path_bits = 0, static_rate = 0, is_global = 0, port 1}) fills it on
 *   an IB port: av.rlid = htobe16(dlid), av.fl_mlid = 0, av.stat_rate_sl =
 *   0, everything else 0 (calloc).  Each WR: IBV_WR_SEND,
 *   IBV_SEND_SIGNALED, wr.ud = {ah, 0x456, 0x11112222}, one SGE of 64 B.
 * SK_RAW: the QP becomes ibv_create_qp(RAW_PACKET, max_send_wr = 256,
 *   max_send_sge = 1, max_inline_data = 0): sq_overhead = ctrl 16 + eth seg
 *   32 = 48, + 1 data segment = 64 -> WQE size 64 B; 256 WQEBBs, max_post
 *   256, max_inline_data = 64 - 48 - 4 = 12.  ctx->eth_min_inline_size =
 *   eth (18, MLX5_ETH_L2_INLINE_HEADER_SIZE, when the kernel reports
 *   eth_min_inline L2 or nothing; 0 when it reports
 *   MLX5_USER_INLINE_MODE_NONE).  Each WR: IBV_WR_SEND, IBV_SEND_SIGNALED,
 *   one SGE of 64 B pointing at frames[k] (libmlx5 reads the first
 *   eth_min_inline_size bytes from it). */
static void fabricate_send(enum send_kind kind, unsigned eth)
{
	struct ibv_qp *ibqp = qp->ibv_qp;
	int i, j;

	send_kind = kind;
	for (i = 0; i < 32; i++) {
		for (j = 0; j < (int)INL_LEN; j++)
			inl_bufs[i][j] = (uint8_t)(0x5a + i * 7 + j);
		/* dst MAC, src MAC, ethertype 0x0800, payload: like
		 * mlx5dp's FRAME64, but different in every slot */
		for (j = 0; j < (int)ETH_LEN; j++)
			frames[i][j] = (uint8_t)(j + i * 3);
		frames[i][12] = 0x08;
		frames[i][13] = 0x00;
	}
	for (i = 0; i < 32; i++) {
		memset(&wrs[i].wr, 0, sizeof(wrs[i].wr));
		wrs[i].opcode = IBV_WR_SEND;
		wrs[i].send_flags = IBV_SEND_SIGNALED;
	}
	switch (kind) {
	case SK_INLINE32:
		CHECK(qp->max_inline_data >= (int)INL_LEN,
		      "RC QP max_inline_data %d < 32", qp->max_inline_data);
		CHECK(qp->max_inline_data == 60, "RC QP max_inline_data %d, want 60",
		      qp->max_inline_data);
		for (i = 0; i < 32; i++) {
			wrs[i].send_flags |= IBV_SEND_INLINE;
			sges[i].addr = (uintptr_t)inl_bufs[i];
			sges[i].length = INL_LEN;
		}
		break;
	case SK_UD:
		ibqp->qp_type = IBV_QPT_UD;
		qp->sq.max_post = 128;
		qp->max_inline_data = 128 - 64 - 4;
		qp->flags = 0;
		qp->atomics_enabled = 0;
		wqe_bbs = UD_WQEBBS;
		ah = zalloc(64, sizeof(*ah));
		ah->ibv_ah.context = &ctx->ibv_ctx.context;
		ah->av.fl_mlid = 0;
		ah->av.rlid = htobe16(UD_DLID);
		ah->av.stat_rate_sl = 0;
		ah->is_global = 0;
		for (i = 0; i < 32; i++) {
			wrs[i].wr.ud.ah = &ah->ibv_ah;
			wrs[i].wr.ud.remote_qpn = UD_RQPN;
			wrs[i].wr.ud.remote_qkey = UD_QKEY;
		}
		break;
	case SK_RAW:
		ibqp->qp_type = IBV_QPT_RAW_PACKET;
		qp->sq.max_post = 256;
		qp->max_inline_data = 64 - 48 - 4;
		qp->flags = 0;
		qp->atomics_enabled = 0;
		qp->qp_cap_cache = 0;
		ctx->eth_min_inline_size = eth;
		eth_inl = eth;
		for (i = 0; i < 32; i++) {
			sges[i].addr = (uintptr_t)frames[i];
			sges[i].length = ETH_LEN;
		}
		break;
	case SK_WRITE:
		break;
	}
}

/* Check the send WQE libmlx5 wrote for wrs[k] at WQE counter ctr (the
 * send scenarios): every byte libmlx5 writes, and that it wrote nothing
 * else inside the WQE's WQEBBs (the ring is zeroed and only ever holds
 * WQEs of this one shape, so the padding stays 0). */
static void check_send_wqe(uint32_t ctr, int k, uint64_t wr_id, unsigned head)
{
	unsigned idx = ctr & (SQ_WQEBB - 1);
	uint8_t *w = sq_buf + idx * MLX5_SEND_WQE_BB;
	struct mlx5_wqe_ctrl_seg *c = (void *)w;
	unsigned ds = 0, used = 0, i;

	switch (send_kind) {
	case SK_INLINE32: {
		struct mlx5_wqe_inline_seg *in = (void *)(w + 16);

		ds = 4;		/* ctrl + align(4 + 32, 16) / 16 */
		CHECK(be32toh(in->byte_count) == (INL_LEN | MLX5_INLINE_SEG),
		      "WQE %u: inline byte_count %08x, want %08x", ctr,
		      be32toh(in->byte_count), INL_LEN | MLX5_INLINE_SEG);
		CHECK(memcmp(w + 20, inl_bufs[k], INL_LEN) == 0,
		      "WQE %u: inline data differs from the 32-byte buffer", ctr);
		used = 20 + INL_LEN;
		break;
	}
	case SK_UD: {
		struct mlx5_wqe_datagram_seg *dg = (void *)(w + 16);
		struct mlx5_wqe_data_seg *d = (void *)(w + 64);
		struct mlx5_wqe_av want = ah->av;

		ds = 5;		/* ctrl + datagram (3) + data */
		want.dqp_dct = htobe32(UD_RQPN | MLX5_EXTENDED_UD_AV);
		want.key.qkey.qkey = htobe32(UD_QKEY);
		CHECK(memcmp(&dg->av, &want, sizeof(want)) == 0,
		      "WQE %u: datagram segment (dqp_dct %08x qkey %08x rlid %04x)",
		      ctr, be32toh(dg->av.dqp_dct), be32toh(dg->av.key.qkey.qkey),
		      be16toh(dg->av.rlid));
		CHECK(be32toh(dg->av.dqp_dct) == (0x80000000u | UD_RQPN) &&
		      be32toh(dg->av.key.qkey.qkey) == UD_QKEY &&
		      dg->av.key.qkey.reserved == 0 &&
		      be16toh(dg->av.rlid) == UD_DLID && dg->av.stat_rate_sl == 0 &&
		      dg->av.fl_mlid == 0 && dg->av.grh_gid_fl == 0,
		      "WQE %u: datagram fields", ctr);
		CHECK(be32toh(d->byte_count) == LEN && be32toh(d->lkey) == LKEY &&
		      be64toh(d->addr) == sges[k].addr,
		      "WQE %u: data segment (len %u lkey %x addr %llx)", ctr,
		      be32toh(d->byte_count), be32toh(d->lkey),
		      (unsigned long long)be64toh(d->addr));
		used = 80;
		break;
	}
	case SK_RAW: {
		struct mlx5_wqe_eth_seg *e = (void *)(w + 16);
		unsigned doff = 16 + ((offsetof(struct mlx5_wqe_eth_seg, inline_hdr) +
				       eth_inl) & ~0xfu);
		struct mlx5_wqe_data_seg *d = (void *)(w + doff);

		ds = doff / 16 + 1;	/* 4 with 18 bytes inline, 3 with 0 */
		CHECK(e->rsvd0 == 0 && e->cs_flags == 0 && e->rsvd1 == 0 &&
		      e->mss == 0 && e->rsvd2 == 0,
		      "WQE %u: eth segment flags/mss not 0", ctr);
		CHECK(be16toh(e->inline_hdr_sz) == eth_inl,
		      "WQE %u: inline_hdr_sz %u, want %u", ctr,
		      be16toh(e->inline_hdr_sz), eth_inl);
		if (eth_inl) {
			CHECK(memcmp(e->inline_hdr_start, frames[k], eth_inl) == 0,
			      "WQE %u: inline L2 header differs from the frame", ctr);
		} else {
			CHECK(e->inline_hdr_start[0] == 0 && e->inline_hdr_start[1] == 0,
			      "WQE %u: inline_hdr_start written", ctr);
		}
		CHECK(be32toh(d->byte_count) == ETH_LEN - eth_inl &&
		      be32toh(d->lkey) == LKEY &&
		      be64toh(d->addr) == sges[k].addr + eth_inl,
		      "WQE %u: data segment (len %u lkey %x addr %llx), want %u bytes at +%u",
		      ctr, be32toh(d->byte_count), be32toh(d->lkey),
		      (unsigned long long)be64toh(d->addr), ETH_LEN - eth_inl, eth_inl);
		used = doff + 16;
		break;
	}
	case SK_WRITE:
		die("check_send_wqe on an RDMA WRITE scenario");
	}
	CHECK(be32toh(c->opmod_idx_opcode) == (((ctr & 0xffff) << 8) | MLX5_OPCODE_SEND),
	      "WQE %u: ctrl.opmod_idx_opcode %08x, want %08x", ctr,
	      be32toh(c->opmod_idx_opcode), ((ctr & 0xffff) << 8) | MLX5_OPCODE_SEND);
	CHECK(be32toh(c->qpn_ds) == ((QPN << 8) | ds),
	      "WQE %u: ctrl.qpn_ds %08x, want %08x", ctr, be32toh(c->qpn_ds),
	      (QPN << 8) | ds);
	CHECK(c->fm_ce_se == MLX5_WQE_CTRL_CQ_UPDATE,
	      "WQE %u: ctrl.fm_ce_se %02x, want %02x", ctr, c->fm_ce_se,
	      MLX5_WQE_CTRL_CQ_UPDATE);
	CHECK(c->signature == 0 && c->dci_stream_channel_id == 0 && c->imm == 0,
	      "WQE %u: ctrl signature/dci/imm not zero", ctr);
	for (i = used; i < wqe_bbs * MLX5_SEND_WQE_BB; i++)
		CHECK(w[i] == 0, "WQE %u: byte %u past the WQE's %u bytes written",
		      ctr, i, used);
	CHECK(qp->sq.wrid[idx] == wr_id, "sq.wrid[%u] %llx, want %llx", idx,
	      (unsigned long long)qp->sq.wrid[idx], (unsigned long long)wr_id);
	CHECK(qp->sq.wqe_head[idx] == head, "sq.wqe_head[%u] %u, want %u", idx,
	      qp->sq.wqe_head[idx], head);
	CHECK(qp->sq.wr_data[idx] == 0, "sq.wr_data[%u] %u", idx,
	      qp->sq.wr_data[idx]);
}

/* The device consumed everything posted and the application polled it:
 * what a poll would do to the SQ bookkeeping (sq.tail = sq.head). */
static inline void retire_sq(void)
{
	qp->sq.tail = qp->sq.head;
}

/* The device filled every posted receive and the application polled it. */
static inline void retire_rq(void)
{
	qp->rq.tail = qp->rq.head;
}

/* The receive WQE at counter ctr: one data segment for rwrs[k], the wr_id
 * in the shadow. */
static void check_rwqe(uint32_t ctr, int k, uint64_t wr_id)
{
	unsigned ind = ctr & (RQ_WQE - 1);
	struct mlx5_wqe_data_seg *d = (void *)(rq_buf + ind * 16);

	CHECK(be32toh(d->byte_count) == RLEN && be32toh(d->lkey) == LKEY &&
	      be64toh(d->addr) == rsges[k].addr,
	      "receive WQE %u: data segment %08x %08x %016llx", ctr,
	      be32toh(d->byte_count), be32toh(d->lkey),
	      (unsigned long long)be64toh(d->addr));
	CHECK(qp->rq.wrid[ind] == wr_id, "rq.wrid[%u]", ind);
}

/* Write n requester CQEs (opcode REQ, RDMA_WRITE, 64 B, valid owner bit)
 * for WQE counters first_ctr, first_ctr + 1, ... at the CQ's consumer
 * index onwards, the way the HCA would. */
static void device_write_cqes(uint32_t first_ctr, int n)
{
	int i;

	for (i = 0; i < n; i++) {
		uint32_t pos = cq->cons_index + i;
		struct mlx5_cqe64 *cqe =
			(void *)(cqe_buf + (pos & (NCQE - 1)) * 64);

		memset(cqe, 0, 63);
		cqe->srqn_uidx = htobe32(UIDX);
		cqe->byte_cnt = htobe32(LEN);
		cqe->sop_drop_qpn = htobe32((MLX5_OPCODE_RDMA_WRITE << 24) | QPN);
		cqe->wqe_counter = htobe16((uint16_t)(first_ctr + i));
		__atomic_thread_fence(__ATOMIC_RELEASE);
		cqe->op_own = (MLX5_CQE_REQ << 4) | ((pos / NCQE) & 1);
	}
}

/* Payload length of the seq-th receive completion: 64..1500 bytes,
 * varying.  Always > 32, so a ConnectX with 64-byte CQEs and receive
 * scatter-to-CQE (mlx5's default for RC: MLX5_QP_FLAG_SCATTER_CQE) does
 * not inline the data in the CQE: no MLX5_INLINE_SCATTER_* bit in op_own. */
static uint64_t recv_seq;

static uint32_t recv_len(uint64_t seq)
{
	return 64 + (uint32_t)((seq * 389) % 1437);
}

static uint64_t recv_ts = 0x0000001234500000ull;

/* Write n responder CQEs for successful IB RC SEND receives (no
 * immediate) into the RQ WQEs at counters first_ctr, first_ctr + 1, ...,
 * at the CQ's consumer index onwards, the way a ConnectX does for a QP
 * created with a user index (CQE version 1):
 *   op_own        MLX5_CQE_RESP_SEND << 4 | owner bit of the pass; no
 *                 inline-scatter bits (byte_cnt > 32), not compressed
 *   srqn_uidx     the QP's user index (no SRQ)
 *   sop_drop_qpn  the QPN (bits 31:24 are not a WQE opcode on the
 *                 responder side; 0, nothing dropped)
 *   wqe_counter   the RQ WQE counter (libmlx5 uses rq.tail for a QP's own
 *                 RQ, the counter only for an SRQ)
 *   byte_cnt      the payload length
 *   flags_rqpn    remote QPN, SL 0 (bits 27:24), no GRH (bits 29:28 = 0:
 *                 IB within the subnet)
 *   slid          the remote port's LID; ml_path 0 (LMC 0)
 *   imm_inval_pkey 0 (no immediate; P_Key index 0)
 *   timestamp     a free-running value
 *   everything else (checksum/L3/L4/VLAN fields, app) 0: an IB RC QP */
static void device_write_recv_cqes(uint32_t first_ctr, int n, uint64_t seq0)
{
	int i;

	for (i = 0; i < n; i++) {
		uint32_t pos = cq->cons_index + i;
		struct mlx5_cqe64 *cqe =
			(void *)(cqe_buf + (pos & (NCQE - 1)) * 64);

		memset(cqe, 0, 63);
		cqe->ml_path = 0;
		cqe->slid = htobe16(REMOTE_LID);
		cqe->flags_rqpn = htobe32((0u << 28) | (0u << 24) | REMOTE_QPN);
		cqe->srqn_uidx = htobe32(UIDX);
		cqe->imm_inval_pkey = 0;
		cqe->byte_cnt = htobe32(recv_len(seq0 + i));
		cqe->timestamp = htobe64(recv_ts += 1000);
		cqe->sop_drop_qpn = htobe32(QPN);
		cqe->wqe_counter = htobe16((uint16_t)(first_ctr + i));
		__atomic_thread_fence(__ATOMIC_RELEASE);
		cqe->op_own = (MLX5_CQE_RESP_SEND << 4) | ((pos / NCQE) & 1);
	}
}

/* Outside the measured region of the receive-poll scenarios: post 32
 * receives (rwrs[0..31], fresh wr_ids from *id0) through libmlx5's
 * post_recv, check the WQEs and the RQ doorbell record, then "the HCA"
 * completes them with 32 responder CQEs (lengths from *seq0). */
static void recv_poll_setup(uint64_t *id0, uint64_t *seq0)
{
	uint32_t h0 = qp->rq.head;
	struct ibv_recv_wr *bad;
	int i, rc;

	*id0 = next_wr_id;
	*seq0 = recv_seq;
	for (i = 0; i < 32; i++)
		rwrs[i].wr_id = next_wr_id++;
	rc = rdmacore44_0_mlx5_post_recv(qp->ibv_qp, &rwrs[0], &bad);
	CHECK(rc == 0, "post_recv (setup) returned %d", rc);
	CHECK(qp->rq.head == h0 + 32, "rq.head %u, want %u", qp->rq.head, h0 + 32);
	CHECK(qp_dbrec[MLX5_RCV_DBR] == htobe32(qp->rq.head & 0xffff),
	      "RQ doorbell record");
	for (i = 0; i < 32; i++)
		check_rwqe(h0 + i, i, *id0 + i);
	device_write_recv_cqes(h0, 32, recv_seq);
	recv_seq += 32;
}

/* After a receive poll: CQ/RQ bookkeeping as libmlx5 must leave it. */
static void check_after_recv_poll(uint32_t ci0, uint32_t rq_tail0)
{
	CHECK(cq->cons_index == ci0 + 32, "cq cons_index %u, want %u",
	      cq->cons_index, ci0 + 32);
	CHECK(cq_dbrec[MLX5_CQ_SET_CI] == htobe32(cq->cons_index & 0xffffff),
	      "CQ doorbell record %08x, want %08x",
	      be32toh(cq_dbrec[MLX5_CQ_SET_CI]), cq->cons_index & 0xffffff);
	CHECK(cq_dbrec[MLX5_CQ_ARM_DB] == 0, "CQ arm record touched");
	CHECK(qp->rq.tail == rq_tail0 + 32, "rq.tail %u, want %u", qp->rq.tail,
	      rq_tail0 + 32);
	CHECK(qp->rq.tail == qp->rq.head, "rq.tail %u != rq.head %u",
	      qp->rq.tail, qp->rq.head);
	CHECK(qp->sq.tail == qp->sq.head, "SQ touched by a receive poll");
	CHECK(qp_dbrec[MLX5_RCV_DBR] == htobe32(qp->rq.head & 0xffff),
	      "RQ doorbell record changed by the poll");
	CHECK(cq->lock.in_use == 0 && qp->rq.lock.in_use == 0 &&
	      qp->sq.lock.in_use == 0, "lock left in use");
}

/* Check one ibv_wc of a receive completion against what libmlx5's
 * handle_responder must report for the CQE device_write_recv_cqes wrote. */
static void check_recv_wc(const struct ibv_wc *w, int i, uint64_t wr_id,
			  uint32_t len)
{
	CHECK(w->wr_id == wr_id, "wc[%d].wr_id %llx, want %llx", i,
	      (unsigned long long)w->wr_id, (unsigned long long)wr_id);
	CHECK(w->status == IBV_WC_SUCCESS, "wc[%d].status %d", i, w->status);
	CHECK(w->opcode == IBV_WC_RECV, "wc[%d].opcode %d, want IBV_WC_RECV",
	      i, w->opcode);
	CHECK(w->byte_len == len, "wc[%d].byte_len %u, want %u", i,
	      w->byte_len, len);
	CHECK(w->qp_num == QPN, "wc[%d].qp_num %x", i, w->qp_num);
	CHECK(w->src_qp == REMOTE_QPN, "wc[%d].src_qp %x", i, w->src_qp);
	CHECK(w->wc_flags == 0, "wc[%d].wc_flags %x, want 0 (no GRH/IMM/INV/csum)",
	      i, w->wc_flags);
	CHECK(w->slid == REMOTE_LID && w->sl == 0 && w->dlid_path_bits == 0 &&
	      w->pkey_index == 0, "wc[%d] slid %x sl %u path_bits %u pkey_index %u",
	      i, w->slid, w->sl, w->dlid_path_bits, w->pkey_index);
}

/* Full check of the lazy (cq_ex) receive path, reading every standard
 * field through libmlx5's read ops.  Not inside any measured function; run
 * by main() for start_poll32_recv except under valgrind (where the extra
 * start/next/end_poll calls would land in the libmlx5-only count). */
static void checked_start_poll_recv_fields(struct ibv_cq_ex *cqx, int batches)
{
	struct ibv_poll_cq_attr attr = {};
	uint64_t id0, seq0;
	uint32_t ci0, t0;
	int b, n;

	for (b = 0; b < batches; b++) {
		ci0 = cq->cons_index;
		t0 = qp->rq.tail;
		recv_poll_setup(&id0, &seq0);
		CHECK(ibv_start_poll(cqx, &attr) == 0, "start_poll: no completion");
		for (n = 0;; n++) {
			struct ibv_wc w;

			memset(&w, 0xa5, sizeof(w));
			w.wr_id = cqx->wr_id;
			w.status = cqx->status;
			w.opcode = ibv_wc_read_opcode(cqx);
			w.byte_len = ibv_wc_read_byte_len(cqx);
			w.qp_num = ibv_wc_read_qp_num(cqx);
			w.src_qp = ibv_wc_read_src_qp(cqx);
			w.wc_flags = ibv_wc_read_wc_flags(cqx);
			w.slid = ibv_wc_read_slid(cqx);
			w.sl = ibv_wc_read_sl(cqx);
			w.dlid_path_bits = ibv_wc_read_dlid_path_bits(cqx);
			w.pkey_index = 0;	/* no read op for it in cq_ex */
			check_recv_wc(&w, n, id0 + n, recv_len(seq0 + n));
			if (n == 31)
				break;
			CHECK(ibv_next_poll(cqx) == 0, "next_poll: ended after %d", n + 1);
		}
		ibv_end_poll(cqx);
		check_after_recv_poll(ci0, t0);
	}
}

/* ---- SRQ helpers -------------------------------------------------------- */

static inline struct mlx5_wqe_srq_next_seg *srq_wqe(unsigned ind)
{
	return (void *)(srq_buf + (ind << 5));
}

/* The n WQE indices post_srq_recv will take: the free list from head. */
static void srq_expect(int n, unsigned *idx, uint16_t *link)
{
	unsigned ind = srq->head;
	int i;

	for (i = 0; i < n; i++) {
		idx[i] = ind;
		link[i] = be16toh(srq_wqe(ind)->next_wqe_index);
		ind = link[i];
	}
}

/* After posting rwrs[0..n-1] (wr_ids id0..) into idx[]: next segments
 * untouched (link, signature, reserved), data segment, wrid, head, tail,
 * wait queue, doorbell record = counter. */
static void srq_check_posted(int n, const unsigned *idx, const uint16_t *link,
			     uint64_t id0, uint16_t counter)
{
	int i;

	for (i = 0; i < n; i++) {
		struct mlx5_wqe_srq_next_seg *nx = srq_wqe(idx[i]);
		struct mlx5_wqe_data_seg *d = (void *)(nx + 1);
		static const uint8_t z[11];

		CHECK(be16toh(nx->next_wqe_index) == link[i] && nx->signature == 0 &&
		      nx->rsvd0[0] == 0 && nx->rsvd0[1] == 0 &&
		      memcmp(nx->rsvd1, z, 11) == 0,
		      "SRQ WQE %u: next segment changed", idx[i]);
		CHECK(be32toh(d->byte_count) == RLEN && be32toh(d->lkey) == LKEY &&
		      be64toh(d->addr) == rsges[i].addr,
		      "SRQ WQE %u: data segment %08x %08x %016llx", idx[i],
		      be32toh(d->byte_count), be32toh(d->lkey),
		      (unsigned long long)be64toh(d->addr));
		CHECK(srq->wrid[idx[i]] == id0 + i, "srq->wrid[%u] %llx, want %llx",
		      idx[i], (unsigned long long)srq->wrid[idx[i]],
		      (unsigned long long)(id0 + i));
	}
	CHECK(srq->head == link[n - 1], "srq->head %d, want %u", srq->head,
	      link[n - 1]);
	CHECK(srq->counter == counter, "srq->counter %u, want %u", srq->counter,
	      counter);
	CHECK(*srq_dbrec == htobe32(counter), "SRQ doorbell record %08x, want %08x",
	      be32toh(*srq_dbrec), counter);
	CHECK(srq->waitq_head == SRQ_TAIL0 + 1 && srq->waitq_tail == SRQ_MAX - 1,
	      "SRQ wait queue moved");
	CHECK(srq->lock.in_use == 0, "SRQ lock left in use");
}

/* The completion path for the n WQEs: mlx5_free_srq_wqe(srq, wqe_counter)
 * for each, in completion order (what handle_responder does). */
static void srq_complete(int n, const unsigned *idx)
{
	int i;

	for (i = 0; i < n; i++)
		rdmacore44_0_mlx5_free_srq_wqe(srq, idx[i]);
	CHECK(srq->tail == (int)idx[n - 1], "srq->tail %d, want %u", srq->tail,
	      idx[n - 1]);
	CHECK(srq->lock.in_use == 0, "SRQ lock left in use (free)");
}

/* The send flags of the RDMA WRITE at WQE counter ctr (see sig_every). */
static unsigned write_flags(uint32_t ctr)
{
	if (!sig_every)
		return IBV_SEND_SIGNALED;
	return ctr % sig_every == sig_every - 1 ? IBV_SEND_SIGNALED : 0;
}

/* wrs[0..n-1] are about to be posted at counters ctr0, ctr0 + 1, ...:
 * give them their send flags (only changes anything with sig_every). */
static void set_write_flags(uint32_t ctr0, int n)
{
	int i;

	if (sig_every)
		for (i = 0; i < n; i++)
			wrs[i].send_flags = write_flags(ctr0 + i);
}

/* Check the WQE libmlx5 wrote for wrs[k] at WQE counter ctr. */
static void check_wqe(uint32_t ctr, int k, uint64_t wr_id, unsigned head)
{
	uint8_t want_fm;

	unsigned idx = ctr & (SQ_WQEBB - 1);
	uint8_t *w = sq_buf + idx * MLX5_SEND_WQE_BB;
	struct mlx5_wqe_ctrl_seg *c = (void *)w;
	struct mlx5_wqe_raddr_seg *r = (void *)(w + 16);
	struct mlx5_wqe_data_seg *d = (void *)(w + 32);

	if (send_kind != SK_WRITE) {
		check_send_wqe(ctr, k, wr_id, head);
		return;
	}
	CHECK(be32toh(c->opmod_idx_opcode) ==
	      (((ctr & 0xffff) << 8) | MLX5_OPCODE_RDMA_WRITE),
	      "ctrl.opmod_idx_opcode %08x, want %08x",
	      be32toh(c->opmod_idx_opcode),
	      ((ctr & 0xffff) << 8) | MLX5_OPCODE_RDMA_WRITE);
	CHECK(be32toh(c->qpn_ds) == ((QPN << 8) | 3),
	      "ctrl.qpn_ds %08x, want %08x", be32toh(c->qpn_ds), (QPN << 8) | 3);
	want_fm = write_flags(ctr) & IBV_SEND_SIGNALED ? MLX5_WQE_CTRL_CQ_UPDATE : 0;
	CHECK(c->fm_ce_se == want_fm, "WQE %u: ctrl.fm_ce_se %02x, want %02x",
	      ctr, c->fm_ce_se, want_fm);
	CHECK(c->signature == 0 && c->dci_stream_channel_id == 0 && c->imm == 0,
	      "ctrl signature/dci/imm not zero");
	CHECK(be64toh(r->raddr) == wrs[k].wr.rdma.remote_addr &&
	      be32toh(r->rkey) == RKEY && r->reserved == 0,
	      "raddr segment wrong (raddr %llx rkey %x)",
	      (unsigned long long)be64toh(r->raddr), be32toh(r->rkey));
	CHECK(be32toh(d->byte_count) == LEN && be32toh(d->lkey) == LKEY &&
	      be64toh(d->addr) == sges[k].addr,
	      "data segment wrong (len %u lkey %x addr %llx)",
	      be32toh(d->byte_count), be32toh(d->lkey),
	      (unsigned long long)be64toh(d->addr));
	CHECK(qp->sq.wrid[idx] == wr_id, "sq.wrid[%u] %llx, want %llx", idx,
	      (unsigned long long)qp->sq.wrid[idx], (unsigned long long)wr_id);
	CHECK(qp->sq.wqe_head[idx] == head, "sq.wqe_head[%u] %u, want %u", idx,
	      qp->sq.wqe_head[idx], head);
	CHECK(qp->sq.wr_data[idx] == 0, "sq.wr_data[%u] %u", idx,
	      qp->sq.wr_data[idx]);
	for (unsigned i = 48; i < MLX5_SEND_WQE_BB; i++)
		CHECK(w[i] == 0, "WQE %u: byte %u past the 48-byte WQE written",
		      ctr, i);
}

/* After an ibv_wr_complete of n WRs: the qp_ex state libmlx5 leaves (no
 * error, n WQEs counted, cur_ctrl at the last one, 3 DS) and the SQ lock
 * released. */
static void check_wr_state(int n)
{
	CHECK(qp->err == 0, "qp->err %d after ibv_wr_complete", qp->err);
	CHECK(qp->nreq == n, "qp->nreq %d, want %d", qp->nreq, n);
	CHECK(qp->cur_size == 3, "qp->cur_size %d, want 3", qp->cur_size);
	CHECK((uint8_t *)qp->cur_ctrl == sq_buf +
	      ((qp->sq.cur_post - 1) & (SQ_WQEBB - 1)) * MLX5_SEND_WQE_BB,
	      "qp->cur_ctrl is not the last WQE");
	CHECK(qp->sq.lock.in_use == 0, "SQ lock left in use");
}

static unsigned bf_bytes(void);
static int slot_holds_wqe(const uint8_t *slot, unsigned idx, unsigned n);

/* One post of n WRs (wrs[0..n-1]) with full checks of what libmlx5 wrote:
 * WQEs, SQ bookkeeping, doorbell record, and what reached the UAR/BF
 * register (8-byte doorbell, or the 64-byte BlueFlame copy). */
static void checked_post(int n, int expect_bf, int count_units)
{
	uint32_t ctr0 = qp->sq.cur_post;
	unsigned head0 = qp->sq.head;
	unsigned off0 = bf.offset;
	uint8_t *slot = (uint8_t *)bf.reg + off0;
	uint8_t *last;
	int i, rc;

	memset(uar_page, 0xa5, 4096);
	for (i = 0; i < n; i++)
		wrs[i].wr_id = next_wr_id++;
	set_write_flags(ctr0, n);
	wrs[n - 1].next = NULL;
	if (!wr_api)
		rc = measured_post_send(qp->ibv_qp, &wrs[0]);
	else if (n == 32)
		rc = measured_wr_write32(qpx, &wrs[0]);
	else if (n == 1)
		rc = measured_wr_write1(qpx, &wrs[0]);
	else
		die("checked_post: %d WRs with the wr_* API", n);
	if (count_units)
		measured_units += n;
	if (n < 32)
		wrs[n - 1].next = &wrs[n];
	CHECK(rc == 0, "%s returned %d", wr_api ? "ibv_wr_complete" : "post_send", rc);
	if (wr_api)
		check_wr_state(n);
	CHECK(qp->sq.cur_post == ctr0 + n * wqe_bbs, "sq.cur_post %u, want %u",
	      qp->sq.cur_post, ctr0 + n * wqe_bbs);
	CHECK(qp->sq.head == head0 + n, "sq.head %u, want %u", qp->sq.head,
	      head0 + n);
	for (i = 0; i < n; i++)
		check_wqe(ctr0 + i * wqe_bbs, i, wrs[i].wr_id, head0 + i);
	CHECK(qp_dbrec[MLX5_SND_DBR] == htobe32((ctr0 + n * wqe_bbs) & 0xffff),
	      "SQ doorbell record %08x, want %08x", be32toh(qp_dbrec[MLX5_SND_DBR]),
	      (ctr0 + n * wqe_bbs) & 0xffff);
	CHECK(qp_dbrec[MLX5_RCV_DBR] == 0, "RQ doorbell record touched");
	CHECK(bf.offset == (off0 ^ bf.buf_size), "bf.offset %u, want %u",
	      bf.offset, off0 ^ bf.buf_size);
	last = sq_buf + ((ctr0 + (n - 1) * wqe_bbs) & (SQ_WQEBB - 1)) * MLX5_SEND_WQE_BB;
	if (expect_bf) {
		unsigned nb = bf_bytes();

		(void)last;
		CHECK(slot_holds_wqe(slot, (ctr0 + (n - 1) * wqe_bbs) & (SQ_WQEBB - 1), nb),
		      "BlueFlame register does not hold the %u-byte WQE copy", nb);
		for (i = nb; i < (int)bf.buf_size; i++)
			CHECK(slot[i] == 0xa5, "BlueFlame wrote past %u bytes", nb);
	} else {
		CHECK(memcmp(slot, last, 8) == 0,
		      "doorbell register does not hold ctrl segment bytes 0-7");
		for (i = 8; i < (int)bf.buf_size; i++)
			CHECK(slot[i] == 0xa5,
			      "doorbell path wrote more than 8 bytes (BlueFlame used?)");
	}
	for (i = 0; i < 4096; i++)
		if (uar_page + i < slot || uar_page + i >= slot + bf.buf_size)
			CHECK(uar_page[i] == 0xa5, "UAR page written outside the BF slot");
}

/* After a timed window: the register half written last (bf.offset has
 * been toggled since) holds the last WQE's first 8 bytes (doorbell) or its
 * first 64 bytes (BlueFlame); on the doorbell path bytes 8..buf_size of
 * both halves still hold the 0xa5 fill of the last checked_post(). */
static void check_register(int expect_bf)
{
	uint8_t *last_slot = (uint8_t *)bf.reg + (bf.offset ^ bf.buf_size);
	uint8_t *last = sq_buf +
		((qp->sq.cur_post - wqe_bbs) & (SQ_WQEBB - 1)) * MLX5_SEND_WQE_BB;
	unsigned h, i;

	unsigned nb = expect_bf ? bf_bytes() : 8;

	(void)last;
	CHECK(slot_holds_wqe(last_slot, (qp->sq.cur_post - wqe_bbs) & (SQ_WQEBB - 1), nb),
	      "register does not hold the last WQE (%s path, %u bytes)",
	      expect_bf ? "BlueFlame" : "doorbell", nb);
	if (expect_bf)	/* nothing past the copy in either half */
		for (h = 0; h < 2; h++)
			for (i = nb; i < bf.buf_size; i++)
				CHECK(((uint8_t *)bf.reg)[h * bf.buf_size + i] == 0xa5,
				      "BlueFlame path wrote past %u bytes", nb);
	if (!expect_bf)
		for (h = 0; h < 2; h++)
			for (i = 8; i < bf.buf_size; i++)
				CHECK(((uint8_t *)bf.reg)[h * bf.buf_size + i] == 0xa5,
				      "doorbell path wrote more than 8 bytes");
}

/* ---- scenarios --------------------------------------------------------- */

enum scen { S_POST_SGE, S_POST_SGE_BF, S_POST_LIST32, S_POLL_V1, S_POLL_V0,
	    S_START_POLL, S_START_POLL_LOCK, S_RECV1, S_RECV32,
	    S_POLL_RECV, S_START_POLL_RECV, S_SRQ_RECV1, S_SRQ_RECV32,
	    S_SEND_INL, S_SEND_INL_BF, S_SEND_INL_DB, S_SEND_UD, S_SEND_RAW,
	    S_SEND_RAW_MIN0, S_SEND_UD_BF, S_SEND_RAW_BF,
	    S_WR_WRITE32, S_WR_WRITE32_SIG128, S_WR_WRITE1, S_WR_WRITE1_BF };

static const struct {
	const char *name;
	enum scen s;
	const char *unit;
} scen_tab[] = {
	{ "post_write_sge", S_POST_SGE, "WQE (1 post_send call)" },
	{ "post_write_sge_bf", S_POST_SGE_BF, "WQE (1 post_send call)" },
	{ "post_write_list32", S_POST_LIST32, "WQE (1/32 of a post_send call)" },
	{ "poll_cq32", S_POLL_V1, "completion (1/32 of a poll_cq call)" },
	{ "poll_cq32_v0", S_POLL_V0, "completion (1/32 of a poll_cq call)" },
	{ "start_poll32", S_START_POLL, "completion (1/32 of start..end_poll)" },
	{ "start_poll32_lock", S_START_POLL_LOCK, "completion (1/32 of start..end_poll)" },
	{ "post_recv1", S_RECV1, "WQE (1 post_recv call)" },
	{ "post_recv32", S_RECV32, "WQE (1/32 of a post_recv call)" },
	{ "poll_cq32_recv", S_POLL_RECV, "completion (1/32 of a poll_cq call)" },
	{ "start_poll32_recv", S_START_POLL_RECV, "completion (1/32 of start..end_poll)" },
	{ "post_srq_recv1", S_SRQ_RECV1, "WQE (1 post_srq_recv call)" },
	{ "post_srq_recv32", S_SRQ_RECV32, "WQE (1/32 of a post_srq_recv call)" },
	{ "post_send_inline32", S_SEND_INL, "WQE (1 post_send call)" },
	{ "post_send_inline32_bf", S_SEND_INL_BF, "WQE (1 post_send call)" },
	{ "post_send_inline32_db", S_SEND_INL_DB, "WQE (1 post_send call)" },
	{ "post_send_ud", S_SEND_UD, "WQE (1 post_send call)" },
	{ "post_send_raw_eth64", S_SEND_RAW, "WQE (1 post_send call)" },
	{ "post_send_raw_eth64_min0", S_SEND_RAW_MIN0, "WQE (1 post_send call)" },
	{ "post_send_ud_bf", S_SEND_UD_BF, "WQE (1 post_send call)" },
	{ "post_send_raw_eth64_bf", S_SEND_RAW_BF, "WQE (1 post_send call)" },
	{ "wr_write32", S_WR_WRITE32, "WQE (1/32 of ibv_wr_start..ibv_wr_complete)" },
	{ "wr_write32_sig128", S_WR_WRITE32_SIG128,
	  "WQE (1/32 of ibv_wr_start..ibv_wr_complete)" },
	{ "wr_write1", S_WR_WRITE1, "WQE (1 ibv_wr_start..ibv_wr_complete)" },
	{ "wr_write1_bf", S_WR_WRITE1_BF, "WQE (1 ibv_wr_start..ibv_wr_complete)" },
};

/* The register write libmlx5 must make for a single-WR post of scenario s:
 * BlueFlame (1) or the 8-byte doorbell (0).  post_send_db() copies the WQE
 * with BlueFlame iff !shut_up_bf && nreq == 1 && bf->uuarn &&
 * (inl || prefer_bf) && 1 < size <= bf->buf_size / 16: an inline WQE
 * (size 4) takes BlueFlame whatever prefer_bf is, unless MLX5_SHUT_UP_BF. */
static int send_expect_bf(enum scen s)
{
	return s == S_POST_SGE_BF || s == S_SEND_INL || s == S_SEND_INL_BF ||
	       s == S_SEND_UD_BF || s == S_SEND_RAW_BF || s == S_WR_WRITE1_BF;
}

/* Bytes mlx5_bf_copy writes for one WQE of the current shape:
 * align(size * 16, 64) with size the WQE's DS count (RDMA WRITE 3,
 * inline 4, UD 5 -> 128 B, raw 4 / raw_min0 3 -> 64 B). */
static unsigned bf_bytes(void)
{
	unsigned ds = send_kind == SK_UD ? 5 :
		      send_kind == SK_INLINE32 ? 4 :
		      send_kind == SK_RAW ? (eth_inl ? 4 : 3) : 3;

	return (ds * 16 + 63) & ~63u;
}

/* Does the register slot hold the n bytes of the WQE at WQEBB index idx,
 * taken as mlx5_bf_copy takes them (wrapping at the end of the SQ ring)? */
static int slot_holds_wqe(const uint8_t *slot, unsigned idx, unsigned n)
{
	unsigned o;

	for (o = 0; o < n; o += MLX5_SEND_WQE_BB)
		if (memcmp(slot + o, sq_buf + ((idx + o / MLX5_SEND_WQE_BB) & (SQ_WQEBB - 1)) *
			   MLX5_SEND_WQE_BB, n - o < MLX5_SEND_WQE_BB ? n - o : MLX5_SEND_WQE_BB))
			return 0;
	return 1;
}

/* Runs `units` units of scenario s; returns the sum of the corrected
 * timed-window cycles.  Every window's result is checked. */
static uint64_t run_units(enum scen s, long units, struct ibv_cq_ex *cqx)
{
	static struct ibv_wc wc[32];
	static uint64_t ids[32];
	uint64_t cycles = 0;
	long done = 0;
	int i, rc = 0;

	switch (s) {
	case S_POST_SGE:
	case S_POST_SGE_BF: {
		/* windows of 32 single-WR posts, SQ retired between windows */
		struct ibv_send_wr *wr = &wrs[0];
		struct ibv_send_wr *saved_next = wr->next;

		wr->next = NULL;
		while (done < units) {
			int b = units - done < 32 ? units - done : 32;
			uint64_t t0, t1;

			t0 = tsc_start();
			for (i = 0; i < b; i++) {
				wr->wr_id = next_wr_id++;
				rc |= measured_post_send(qp->ibv_qp, wr);
			}
			t1 = tsc_stop();
			cycles += t1 - t0 > timer_overhead ? t1 - t0 - timer_overhead : 0;
			CHECK(rc == 0, "post_send returned %d", rc);
			CHECK(qp_dbrec[MLX5_SND_DBR] ==
			      htobe32(qp->sq.cur_post & 0xffff), "SQ doorbell record");
			check_register(s == S_POST_SGE_BF);
			retire_sq();
			done += b;
		}
		wr->next = saved_next;
		break;
	}
	case S_SEND_INL:
	case S_SEND_INL_BF:
	case S_SEND_INL_DB:
	case S_SEND_UD:
	case S_SEND_RAW:
	case S_SEND_RAW_MIN0:
	case S_SEND_UD_BF:
	case S_SEND_RAW_BF: {
		/* windows of 32 single-WR posts of wrs[0]; after each window
		 * (untimed) all 32 WQEs are checked field by field, then the
		 * SQ is retired */
		struct ibv_send_wr *wr = &wrs[0];
		struct ibv_send_wr *saved_next = wr->next;

		wr->next = NULL;
		while (done < units) {
			int b = units - done < 32 ? units - done : 32;
			uint32_t c0 = qp->sq.cur_post;
			unsigned h0 = qp->sq.head;
			uint64_t t0, t1, id0 = next_wr_id;

			t0 = tsc_start();
			for (i = 0; i < b; i++) {
				wr->wr_id = next_wr_id++;
				rc |= measured_post_send(qp->ibv_qp, wr);
			}
			t1 = tsc_stop();
			cycles += t1 - t0 > timer_overhead ? t1 - t0 - timer_overhead : 0;
			CHECK(rc == 0, "post_send returned %d", rc);
			CHECK(qp->sq.cur_post == c0 + b * wqe_bbs && qp->sq.head == h0 + b,
			      "sq.cur_post %u / sq.head %u after the window", qp->sq.cur_post,
			      qp->sq.head);
			for (i = 0; i < b; i++)
				check_wqe(c0 + i * wqe_bbs, 0, id0 + i, h0 + i);
			CHECK(qp_dbrec[MLX5_SND_DBR] ==
			      htobe32(qp->sq.cur_post & 0xffff), "SQ doorbell record");
			CHECK(qp_dbrec[MLX5_RCV_DBR] == 0, "RQ doorbell record touched");
			CHECK(qp->sq.lock.in_use == 0, "SQ lock left in use");
			check_register(send_expect_bf(s));
			retire_sq();
			done += b;
		}
		wr->next = saved_next;
		break;
	}
	case S_WR_WRITE1:
	case S_WR_WRITE1_BF: {
		/* windows of 32 ibv_wr_start..ibv_wr_complete of one RDMA
		 * WRITE (wrs[0]); after each window (untimed) all 32 WQEs,
		 * the qp_ex state, the doorbell records and the last register
		 * write are checked, then the SQ is retired */
		struct ibv_send_wr *wr = &wrs[0];

		while (done < units) {
			int b = units - done < 32 ? units - done : 32;
			uint32_t c0 = qp->sq.cur_post;
			unsigned h0 = qp->sq.head;
			uint64_t t0, t1, id0 = next_wr_id;

			t0 = tsc_start();
			for (i = 0; i < b; i++) {
				wr->wr_id = next_wr_id++;
				rc |= measured_wr_write1(qpx, wr);
			}
			t1 = tsc_stop();
			cycles += t1 - t0 > timer_overhead ? t1 - t0 - timer_overhead : 0;
			CHECK(rc == 0, "ibv_wr_complete returned %d", rc);
			check_wr_state(1);
			CHECK(qp->sq.cur_post == c0 + b && qp->sq.head == h0 + b,
			      "sq.cur_post %u / sq.head %u after the window", qp->sq.cur_post,
			      qp->sq.head);
			for (i = 0; i < b; i++)
				check_wqe(c0 + i, 0, id0 + i, h0 + i);
			CHECK(qp_dbrec[MLX5_SND_DBR] ==
			      htobe32(qp->sq.cur_post & 0xffff), "SQ doorbell record");
			CHECK(qp_dbrec[MLX5_RCV_DBR] == 0, "RQ doorbell record touched");
			check_register(send_expect_bf(s));
			retire_sq();
			done += b;
		}
		break;
	}
	case S_WR_WRITE32:
	case S_WR_WRITE32_SIG128:
		/* one ibv_wr_start, 32 RDMA WRITEs, one ibv_wr_complete per
		 * window; wr_ids (and with sig128 the flags) set before it;
		 * all 32 WQEs checked after it */
		while (done < units) {
			uint64_t t0, t1, id0 = next_wr_id;
			uint32_t c0 = qp->sq.cur_post;
			unsigned h0 = qp->sq.head;

			for (i = 0; i < 32; i++)
				wrs[i].wr_id = next_wr_id++;
			set_write_flags(c0, 32);
			t0 = tsc_start();
			rc = measured_wr_write32(qpx, &wrs[0]);
			t1 = tsc_stop();
			cycles += t1 - t0 > timer_overhead ? t1 - t0 - timer_overhead : 0;
			CHECK(rc == 0, "ibv_wr_complete returned %d", rc);
			check_wr_state(32);
			CHECK(qp->sq.cur_post == c0 + 32 && qp->sq.head == h0 + 32,
			      "sq.cur_post %u / sq.head %u after the window", qp->sq.cur_post,
			      qp->sq.head);
			for (i = 0; i < 32; i++)
				check_wqe(c0 + i, i, id0 + i, h0 + i);
			CHECK(qp_dbrec[MLX5_SND_DBR] ==
			      htobe32(qp->sq.cur_post & 0xffff), "SQ doorbell record");
			CHECK(qp_dbrec[MLX5_RCV_DBR] == 0, "RQ doorbell record touched");
			check_register(0);
			retire_sq();
			done += 32;
		}
		break;
	case S_POST_LIST32:
		while (done < units) {
			uint64_t t0, t1;
			uint32_t c0 = qp->sq.cur_post;

			for (i = 0; i < 32; i++)
				wrs[i].wr_id = next_wr_id++;
			t0 = tsc_start();
			rc = measured_post_send(qp->ibv_qp, &wrs[0]);
			t1 = tsc_stop();
			cycles += t1 - t0 > timer_overhead ? t1 - t0 - timer_overhead : 0;
			CHECK(rc == 0, "post_send returned %d", rc);
			CHECK(qp->sq.cur_post == c0 + 32, "sq.cur_post");
			CHECK(qp_dbrec[MLX5_SND_DBR] ==
			      htobe32(qp->sq.cur_post & 0xffff), "SQ doorbell record");
			check_register(0);
			retire_sq();
			done += 32;
		}
		break;
	case S_RECV1:
	case S_RECV32:
		while (done < units) {
			uint32_t h0 = qp->rq.head, sdb = qp_dbrec[MLX5_SND_DBR];
			uint64_t t0, t1, id0 = next_wr_id;
			int per = s == S_RECV1 ? 1 : 32;

			for (i = 0; i < 32; i++)
				rwrs[i].wr_id = next_wr_id++;
			if (per == 1) {
				struct ibv_recv_wr *saved = rwrs[0].next;

				t0 = tsc_start();
				for (i = 0; i < 32; i++) {
					rwrs[i].next = NULL;
					rc |= measured_post_recv(qp->ibv_qp, &rwrs[i]);
				}
				t1 = tsc_stop();
				for (i = 0; i < 31; i++)
					rwrs[i].next = &rwrs[i + 1];
				rwrs[0].next = saved;
			} else {
				t0 = tsc_start();
				rc = measured_post_recv(qp->ibv_qp, &rwrs[0]);
				t1 = tsc_stop();
			}
			cycles += t1 - t0 > timer_overhead ? t1 - t0 - timer_overhead : 0;
			CHECK(rc == 0, "post_recv returned %d", rc);
			CHECK(qp->rq.head == h0 + 32, "rq.head");
			CHECK(qp_dbrec[MLX5_RCV_DBR] == htobe32(qp->rq.head & 0xffff),
			      "RQ doorbell record");
			CHECK(qp_dbrec[MLX5_SND_DBR] == sdb, "SQ doorbell record touched");
			for (i = 0; i < 32; i++)
				check_rwqe(h0 + i, i, id0 + i);
			retire_rq();
			done += 32;
		}
		break;
	case S_POLL_RECV:
	case S_START_POLL_RECV:
		while (done < units) {
			static uint32_t lens[32];
			uint64_t t0, t1, id0, seq0;
			uint32_t ci0 = cq->cons_index, rt0 = qp->rq.tail;
			unsigned st = ~0u;
			int n;

			/* outside the window: 32 receives posted through
			 * libmlx5, then "the HCA" completes them */
			recv_poll_setup(&id0, &seq0);
			memset(wc, 0xa5, sizeof(wc));
			memset(ids, 0xa5, sizeof(ids));
			memset(lens, 0xa5, sizeof(lens));

			t0 = tsc_start();
			if (s == S_POLL_RECV)
				n = measured_poll_cq_v1(&cq->verbs_cq.cq, wc);
			else
				n = measured_start_poll_recv(cqx, ids, lens, &st);
			t1 = tsc_stop();
			cycles += t1 - t0 > timer_overhead ? t1 - t0 - timer_overhead : 0;

			CHECK(n == 32, "poll returned %d completions, want 32", n);
			for (i = 0; i < 32; i++) {
				if (s == S_POLL_RECV) {
					check_recv_wc(&wc[i], i, id0 + i,
						      recv_len(seq0 + i));
				} else {
					CHECK(ids[i] == id0 + i,
					      "completion %d wr_id %llx, want %llx", i,
					      (unsigned long long)ids[i],
					      (unsigned long long)(id0 + i));
					CHECK(lens[i] == recv_len(seq0 + i),
					      "completion %d byte_len %u, want %u", i,
					      lens[i], recv_len(seq0 + i));
				}
			}
			if (s == S_START_POLL_RECV)
				CHECK(st == IBV_WC_SUCCESS, "status OR %u", st);
			check_after_recv_poll(ci0, rt0);
			done += 32;
		}
		break;
	case S_SRQ_RECV1:
	case S_SRQ_RECV32:
		while (done < units) {
			unsigned idx[32];
			uint16_t link[32];
			uint16_t c0 = srq->counter;
			uint64_t t0, t1, id0 = next_wr_id;

			/* outside the window: the WQEs the free list will
			 * hand out, fresh wr_ids, and (post_srq_recv1) each
			 * WR made a list of one */
			srq_expect(32, idx, link);
			for (i = 0; i < 32; i++)
				rwrs[i].wr_id = next_wr_id++;
			if (s == S_SRQ_RECV1) {
				for (i = 0; i < 32; i++)
					rwrs[i].next = NULL;
				t0 = tsc_start();
				for (i = 0; i < 32; i++)
					rc |= measured_post_srq_recv(&srq->vsrq.srq,
								     &rwrs[i]);
				t1 = tsc_stop();
				for (i = 0; i < 31; i++)
					rwrs[i].next = &rwrs[i + 1];
			} else {
				t0 = tsc_start();
				rc = measured_post_srq_recv(&srq->vsrq.srq, &rwrs[0]);
				t1 = tsc_stop();
			}
			cycles += t1 - t0 > timer_overhead ? t1 - t0 - timer_overhead : 0;
			CHECK(rc == 0, "post_srq_recv returned %d", rc);
			srq_check_posted(32, idx, link, id0, (uint16_t)(c0 + 32));
			/* the receives complete: WQEs back to the free list */
			srq_complete(32, idx);
			done += 32;
		}
		break;
	case S_POLL_V1:
	case S_POLL_V0:
	case S_START_POLL:
	case S_START_POLL_LOCK:
		while (done < units) {
			uint64_t t0, t1, id0 = next_wr_id;
			uint32_t ctr0 = qp->sq.cur_post, ci0 = cq->cons_index;
			unsigned st = ~0u;
			struct ibv_send_wr *bad;
			int n;

			/* outside the window: post 32 signalled RDMA WRITEs
			 * through libmlx5, then "the HCA" completes them */
			for (i = 0; i < 32; i++)
				wrs[i].wr_id = next_wr_id++;
			rc = rdmacore44_0_mlx5_post_send(qp->ibv_qp, &wrs[0], &bad);
			CHECK(rc == 0, "post_send (setup) returned %d", rc);
			device_write_cqes(ctr0, 32);

			t0 = tsc_start();
			if (s == S_POLL_V1)
				n = measured_poll_cq_v1(&cq->verbs_cq.cq, wc);
			else if (s == S_POLL_V0)
				n = measured_poll_cq_v0(&cq->verbs_cq.cq, wc);
			else
				n = measured_start_poll(cqx, ids, &st);
			t1 = tsc_stop();
			cycles += t1 - t0 > timer_overhead ? t1 - t0 - timer_overhead : 0;

			CHECK(n == 32, "poll returned %d completions, want 32", n);
			for (i = 0; i < 32; i++) {
				if (s == S_POLL_V1 || s == S_POLL_V0) {
					CHECK(wc[i].wr_id == id0 + i,
					      "wc[%d].wr_id %llx, want %llx", i,
					      (unsigned long long)wc[i].wr_id,
					      (unsigned long long)(id0 + i));
					CHECK(wc[i].status == IBV_WC_SUCCESS,
					      "wc[%d].status %d", i, wc[i].status);
					CHECK(wc[i].opcode == IBV_WC_RDMA_WRITE,
					      "wc[%d].opcode %d", i, wc[i].opcode);
					CHECK(wc[i].qp_num == QPN && wc[i].wc_flags == 0,
					      "wc[%d].qp_num/wc_flags", i);
				} else {
					CHECK(ids[i] == id0 + i,
					      "completion %d wr_id %llx, want %llx", i,
					      (unsigned long long)ids[i],
					      (unsigned long long)(id0 + i));
				}
			}
			if (s == S_START_POLL || s == S_START_POLL_LOCK) {
				CHECK(st == IBV_WC_SUCCESS, "status OR %u", st);
			}
			CHECK(cq->cons_index == ci0 + 32, "cq cons_index %u, want %u",
			      cq->cons_index, ci0 + 32);
			CHECK(cq_dbrec[MLX5_CQ_SET_CI] ==
			      htobe32(cq->cons_index & 0xffffff),
			      "CQ doorbell record %08x, want %08x",
			      be32toh(cq_dbrec[MLX5_CQ_SET_CI]),
			      cq->cons_index & 0xffffff);
			CHECK(cq_dbrec[MLX5_CQ_ARM_DB] == 0, "CQ arm record touched");
			CHECK(qp->sq.tail == qp->sq.head,
			      "sq.tail %u != sq.head %u after polling all",
			      qp->sq.tail, qp->sq.head);
			CHECK(cq->lock.in_use == 0 && qp->sq.lock.in_use == 0,
			      "lock left in use");
			done += 32;
		}
		break;
	}
	measured_units += units;
	return cycles;
}

static void preflight(enum scen s)
{
	int i;

	/* A few fully checked posts (all WQE fields, doorbell record, what
	 * the doorbell/BlueFlame register received), wrapping the SQ ring. */
	switch (s) {
	case S_POST_SGE:
	case S_POST_SGE_BF:
	case S_SEND_INL:
	case S_SEND_INL_BF:
	case S_SEND_INL_DB:
	case S_SEND_UD:
	case S_SEND_RAW:
	case S_SEND_RAW_MIN0:
	case S_SEND_UD_BF:
	case S_SEND_RAW_BF:
	case S_WR_WRITE1:
	case S_WR_WRITE1_BF:
		/* 300 single-WR posts wrap the 256-WQEBB ring (UD: twice) */
		for (i = 0; i < 300; i++) {
			checked_post(1, send_expect_bf(s), 1);
			if (qp->sq.head - qp->sq.tail >= 32)
				retire_sq();
		}
		retire_sq();
		break;
	case S_POST_LIST32:
	case S_WR_WRITE32:
	case S_WR_WRITE32_SIG128:
		for (i = 0; i < 10; i++) {
			checked_post(32, 0, 1);
			retire_sq();
		}
		break;
	case S_POLL_RECV:
	case S_START_POLL_RECV:
		/* nothing on the SQ; every window of run_units is checked */
		break;
	case S_SRQ_RECV1:
	case S_SRQ_RECV32: {
		/* 300 single-WR posts (wrapping the 256-entry free list) or
		 * 10 lists of 32, each post checked (WQEs, wrid, head,
		 * counter, doorbell record); completed 32 at a time */
		int per = s == S_SRQ_RECV1 ? 1 : 32;
		int n = per == 1 ? 300 : 10, out = 0, k, rc;
		unsigned idx[32], oidx[32];
		uint16_t link[32];

		for (i = 0; i < n; i++) {
			uint64_t id0 = next_wr_id;
			uint16_t c = srq->counter + per;
			struct ibv_recv_wr *saved = rwrs[per - 1].next;

			srq_expect(per, idx, link);
			for (k = 0; k < per; k++)
				rwrs[k].wr_id = next_wr_id++;
			rwrs[per - 1].next = NULL;
			rc = measured_post_srq_recv(&srq->vsrq.srq, &rwrs[0]);
			rwrs[per - 1].next = saved;
			measured_units += per;
			CHECK(rc == 0, "post_srq_recv returned %d", rc);
			srq_check_posted(per, idx, link, id0, c);
			for (k = 0; k < per; k++)
				oidx[out++] = idx[k];
			if (out == 32) {
				srq_complete(32, oidx);
				out = 0;
			}
		}
		if (out)
			srq_complete(out, oidx);
		break;
	}
	default:
		for (i = 0; i < 3; i++) {
			checked_post(32, 0, 0);
			retire_sq();
		}
		break;
	}
}

/* The fabricated SRQ holds exactly what ibv_create_srq(max_wr = 255)
 * reports: 255 single-WR posts succeed, the 256th gets ENOMEM with
 * bad_wr set; then all 255 complete.  Calls libmlx5's post_srq_recv
 * outside the measured function, so main() skips it under valgrind. */
static void srq_capacity_check(void)
{
	static unsigned idx[SRQ_MAX];
	struct ibv_recv_wr *bad = NULL;
	uint16_t link[1];
	int i, rc;

	for (i = 0; i < SRQ_TAIL0; i++) {
		uint64_t id0 = next_wr_id;
		uint16_t c = srq->counter + 1;
		struct ibv_recv_wr *saved = rwrs[0].next;

		srq_expect(1, &idx[i], link);
		rwrs[0].wr_id = next_wr_id++;
		rwrs[0].next = NULL;
		rc = rdmacore44_0_mlx5_post_srq_recv(&srq->vsrq.srq, &rwrs[0], &bad);
		rwrs[0].next = saved;
		CHECK(rc == 0, "post_srq_recv %d of 255 returned %d", i + 1, rc);
		srq_check_posted(1, &idx[i], link, id0, c);
	}
	CHECK(srq->head == srq->tail, "SRQ not full after 255 posts");
	{
		uint16_t c = srq->counter;
		struct ibv_recv_wr *saved = rwrs[0].next;

		rwrs[0].next = NULL;
		rc = rdmacore44_0_mlx5_post_srq_recv(&srq->vsrq.srq, &rwrs[0], &bad);
		rwrs[0].next = saved;
		CHECK(rc == ENOMEM && bad == &rwrs[0],
		      "256th post_srq_recv returned %d, want ENOMEM", rc);
		CHECK(srq->counter == c && *srq_dbrec == htobe32(c),
		      "failed post_srq_recv moved the counter/doorbell record");
	}
	srq_complete(SRQ_TAIL0, idx);
}

int main(int argc, char **argv)
{
	const char *name = argc > 1 ? argv[1] : "";
	int timing = !(argc > 2 && strcmp(argv[2], "count") == 0);
	long units = argc > 3 ? atol(argv[3]) : 20000;
	int rounds = argc > 4 ? atoi(argv[4]) : 15;
	struct ibv_cq_ex *cqx = NULL;
	double per[101], ghz0, ghz1;
	enum scen s;
	unsigned k;
	int r;

	if (strcmp(name, "addr") == 0) {
		fabricate(1, 0);
		cqx = make_cq_ex(1);
		printf("single_threaded start_poll=%p next_poll=%p end_poll=%p "
		       "read_byte_len=%p\n",
		       (void *)cqx->start_poll, (void *)cqx->next_poll,
		       (void *)cqx->end_poll, (void *)cqx->read_byte_len);
		cqx = make_cq_ex(0);
		printf("default start_poll=%p next_poll=%p end_poll=%p\n",
		       (void *)cqx->start_poll, (void *)cqx->next_poll,
		       (void *)cqx->end_poll);
		qpx = make_qp_ex();
		printf("qp_ex wr_start=%p wr_rdma_write=%p wr_set_sge=%p "
		       "wr_complete=%p\n",
		       (void *)qpx->wr_start, (void *)qpx->wr_rdma_write,
		       (void *)qpx->wr_set_sge, (void *)qpx->wr_complete);
		return 0;
	}
	for (k = 0; k < sizeof(scen_tab) / sizeof(scen_tab[0]); k++)
		if (strcmp(name, scen_tab[k].name) == 0)
			break;
	if (k == sizeof(scen_tab) / sizeof(scen_tab[0])) {
		fprintf(stderr, "usage: %s SCENARIO|addr [time|count] [UNITS] [ROUNDS]\n",
			argv[0]);
		return 1;
	}
	s = scen_tab[k].s;
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

	fabricate(s == S_POLL_V0 ? 0 : 1, s == S_POST_SGE_BF || s == S_SEND_INL_BF ||
		  s == S_SEND_UD_BF || s == S_SEND_RAW_BF || s == S_WR_WRITE1_BF);
	init_wrs();
	switch (s) {
	case S_SEND_INL:
	case S_SEND_INL_BF:
		fabricate_send(SK_INLINE32, 0);
		break;
	case S_SEND_INL_DB:
		/* MLX5_SHUT_UP_BF=1: the only setting with which libmlx5
		 * rings the 8-byte doorbell for a single inline WQE (it also
		 * makes mlx5_init_context map the UAR non-cached, and
		 * mlx5_get_qp_uar hand out ctx->nc_uar: not modelled, the
		 * register is ordinary memory here as everywhere) */
		ctx->shut_up_bf = 1;
		fabricate_send(SK_INLINE32, 0);
		break;
	case S_SEND_UD:
	case S_SEND_UD_BF:
		fabricate_send(SK_UD, 0);
		break;
	case S_SEND_RAW:
	case S_SEND_RAW_BF:
		fabricate_send(SK_RAW, MLX5_ETH_L2_INLINE_HEADER_SIZE);
		break;
	case S_SEND_RAW_MIN0:
		fabricate_send(SK_RAW, 0);
		break;
	default:
		break;
	}
	if (s == S_SRQ_RECV1 || s == S_SRQ_RECV32)
		fabricate_srq();
	if (s == S_WR_WRITE32 || s == S_WR_WRITE32_SIG128 || s == S_WR_WRITE1 ||
	    s == S_WR_WRITE1_BF) {
		qpx = make_qp_ex();
		wr_api = 1;
		if (s == S_WR_WRITE32_SIG128)
			sig_every = 128;
	}
	if (s == S_START_POLL || s == S_START_POLL_RECV)
		cqx = make_cq_ex(1);
	else if (s == S_START_POLL_LOCK)
		cqx = make_cq_ex(0);

	/* Checks that call libmlx5 outside the measured function: skipped
	 * under valgrind (they would be in the libmlx5-only Ir count but
	 * not in measured_units); run.sh's timing processes run them. */
	if (!RUNNING_ON_VALGRIND) {
		if (s == S_START_POLL_RECV)
			checked_start_poll_recv_fields(cqx, 3);
		if (s == S_SRQ_RECV1 || s == S_SRQ_RECV32)
			srq_capacity_check();
	}

	preflight(s);

	if (!timing) {
		run_units(s, units, cqx);
		printf("%s count units=%ld measured_units=%ld checks=OK\n", name,
		       units, measured_units);
		return 0;
	}

	calibrate(20001);
	ghz0 = core_ghz();
	run_units(s, units, cqx);	/* warm-up round */
	for (r = 0; r < rounds; r++)
		per[r] = (double)run_units(s, units, cqx) / units / tsc_per_ns;
	ghz1 = core_ghz();
	qsort(per, rounds, sizeof(per[0]), cmp_dbl);
	printf("%s time units/round=%ld rounds=%d ns/unit median=%.2f min=%.2f max=%.2f "
	       "(tsc %.4f GHz, timer overhead %llu cycles subtracted per window, "
	       "dec/jnz core clock %.2f/%.2f GHz before/after) unit=%s checks=OK\n",
	       name, units, rounds, per[rounds / 2], per[0], per[rounds - 1],
	       tsc_per_ns, (unsigned long long)timer_overhead, ghz0, ghz1,
	       scen_tab[k].unit);
	return 0;
}
