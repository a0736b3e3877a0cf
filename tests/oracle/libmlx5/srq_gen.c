/*
 * srq_gen.c - a random differential oracle for mlx5dp's shared receive
 * queue (`mlx5dp::rq::Srq`), driven by libmlx5's own object code, writing
 * scenarios in the format of tests/refcheck/srq_ref.py (its docstring
 * documents every line), which tests/tests/srq_ref.rs replays.
 *
 * Every operation is run by the REAL provider code of Debian 12's static
 * /usr/lib/x86_64-linux-gnu/libmlx5.a (rdma-core 44.0-2), linked, not
 * compiled:
 *   srq WQE_CNT MAX_SGE ...  rdmacore44_0_mlx5_alloc_srq_buf(ctx, srq,
 *                            WQE_CNT - 1, pd), as mlx5_create_srq calls it
 *                            (srq->max_gs = MAX_SGE, counter = 0 first;
 *                            *srq->db = 0 after), with the ConnectX limit
 *                            max_srq_recv_wr = 32767, so that it keeps a
 *                            wait queue after the WQE_CNT WQEs;
 *   post K / wr ...          one rdmacore44_0_mlx5_post_srq_recv call of a
 *                            K-WR list;
 *   complete IDX             one responder CQE (RESP_SEND, wqe_counter IDX)
 *                            polled through rdmacore44_0_mlx5_poll_cq_v1
 *                            (CQE version 1: the CQE names the user index of
 *                            a QP whose ibv_qp.srq is the SRQ) -- which
 *                            takes wr_id = srq->wrid[IDX] and calls
 *                            mlx5_free_srq_wqe(srq, IDX) (cq.c
 *                            handle_responder) -- and again through
 *                            rdmacore44_0_mlx5_poll_cq (CQE version 0: the
 *                            CQE names the SRQ number, found in srq_table).
 * Every scenario is run twice, once per CQE version; the program aborts if
 * the two runs print different lines.
 *
 * Expectations printed: `layout` (the SRQ's wqe_shift, max_gs, head, tail
 * after creation), per operation `ret` or `wrid`, `wqe` lines for every WQE
 * among the first WQE_CNT whose bytes changed, `db`, `state` (head, tail,
 * 16-bit counter).  The wait queue's WQEs (WQE_CNT .. srq->max - 1) are
 * checked never to change after creation.
 *
 * COUNTER0 (the third number of the `srq` line; see srq_ref.py) is reached
 * as that model describes: COUNTER0 one-WR calls of max_gs all-zero SGEs,
 * each completed at once (through the same poll); that is real libmlx5 work
 * too, not a shortcut.
 *
 * Usage:
 *   srq_gen gen N SEED       N random scenarios from SEED (splitmix64)
 *   srq_gen --replay FILE    re-run the inputs of every scenario of FILE
 *                            (expectations in it are ignored, recomputed)
 */
#define _GNU_SOURCE
#include <config.h>

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>
#include "mlx5.h"
#include "wqe.h"
#include "oracle_rng.h"

/* libmlx5.a renames every global symbol with this prefix. */
int rdmacore44_0_mlx5_alloc_srq_buf(struct ibv_context *context, struct mlx5_srq *srq,
				    uint32_t max_wr, struct ibv_pd *pd);
int rdmacore44_0_mlx5_post_srq_recv(struct ibv_srq *ibsrq, struct ibv_recv_wr *wr,
				    struct ibv_recv_wr **bad_wr);
int rdmacore44_0_mlx5_poll_cq(struct ibv_cq *ibcq, int ne, struct ibv_wc *wc);
int rdmacore44_0_mlx5_poll_cq_v1(struct ibv_cq *ibcq, int ne, struct ibv_wc *wc);

#define MAX_WRS 1100
#define MAX_SGES 40
#define MAX_OPS 4096
#define CQ_NCQE 4
#define SRQN 0x000043u
#define QPN 0x000123u
#define UIDX 0x000077u

static void die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "srq_gen: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(2);
}

#define CHECK(cond, ...) do { if (!(cond)) die(__VA_ARGS__); } while (0)

static void *zalloc(size_t align_to, size_t size)
{
	void *p;

	size = (size + align_to - 1) / align_to * align_to;
	p = aligned_alloc(align_to, size);
	CHECK(p, "aligned_alloc(%zu) failed", size);
	memset(p, 0, size);
	return p;
}

/* ---- output buffer -------------------------------------------------------- */

struct text {
	char *s;
	size_t len, cap;
};

static void emit(struct text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void emit(struct text *t, const char *fmt, ...)
{
	va_list ap;
	int n;

	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(t->s + t->len, t->cap - t->len, fmt, ap);
		va_end(ap);
		CHECK(n >= 0, "vsnprintf");
		if (t->len + n + 1 < t->cap)
			break;
		t->cap = t->cap ? 2 * t->cap + n : 1 << 16;
		t->s = realloc(t->s, t->cap);
		CHECK(t->s, "out of memory");
	}
	t->len += n;
}

static void emit_hex(struct text *t, const uint8_t *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		emit(t, "%02x", b[i]);
}

/* ---- operations ----------------------------------------------------------- */

struct wr_in {
	uint64_t wr_id;
	int nsge;
	struct ibv_sge sge[MAX_SGES];
};

struct op_in {
	int is_post;
	int idx;		/* complete */
	int nwr;		/* post */
	struct wr_in *wrs;
};

struct scenario {
	char name[96];
	unsigned wqe_cnt, max_sge, counter0;
	int nops;
	struct op_in ops[MAX_OPS];
};

/* ---- fabrication ---------------------------------------------------------- */

struct world {
	struct mlx5_device *mdev;
	struct mlx5_context *ctx;
	struct mlx5_pd *pd;
	struct mlx5_srq *srq;
	struct mlx5_qp *qp;
	struct mlx5_cq *cq;
	uint8_t *cqe_buf;
	__be32 *cq_dbrec, *srq_db;
	void *tables[3];
	int cqe_version;
	size_t wqe_size;
};

/*
 * The context, SRQ, QP and CQ as ibv_create_srq / ibv_create_qp(srq) /
 * ibv_create_cq leave what post_srq_recv and the poll path read.  The SRQ
 * buffer, wrid array, wqe_shift, max_gs, head, tail and wait queue come
 * from libmlx5's own mlx5_alloc_srq_buf (srq.c); the rest follows
 * mlx5_create_srq (verbs.c): max_gs = max_sge and counter = 0 before the
 * call, *db = 0 after, srqn / rsc after the kernel command.
 */
static void fabricate(struct world *w, const struct scenario *sc, int cqe_version)
{
	struct mlx5_context *ctx;
	struct mlx5_srq *srq;
	struct mlx5_qp *qp;
	struct mlx5_cq *cq;

	memset(w, 0, sizeof(*w));
	w->cqe_version = cqe_version;
	w->mdev = zalloc(64, sizeof(*w->mdev));
	w->mdev->page_size = 4096;
	ctx = w->ctx = zalloc(4096, sizeof(*ctx));
	ctx->ibv_ctx.context.device = &w->mdev->verbs_dev.device;
	ctx->cqe_version = cqe_version;
	ctx->max_srq_recv_wr = 32767;	/* a ConnectX's max_srq_wr */
	ctx->max_recv_wr = 32768;	/* ... its max_qp_wr */
	ctx->max_rq_desc_sz = 512;
	ctx->dbg_fp = NULL;
	w->pd = zalloc(64, sizeof(*w->pd));
	w->pd->ibv_pd.context = &ctx->ibv_ctx.context;

	srq = w->srq = zalloc(64, sizeof(*srq));
	srq->vsrq.srq.context = &ctx->ibv_ctx.context;
	srq->vsrq.srq.pd = &w->pd->ibv_pd;
	srq->lock.need_lock = 0;
	srq->max_gs = sc->max_sge;
	srq->counter = 0;
	CHECK(rdmacore44_0_mlx5_alloc_srq_buf(&ctx->ibv_ctx.context, srq, sc->wqe_cnt - 1,
					      &w->pd->ibv_pd) == 0,
	      "%s: mlx5_alloc_srq_buf failed", sc->name);
	w->srq_db = zalloc(64, 64);
	srq->db = w->srq_db;
	*srq->db = 0;
	srq->custom_db = false;
	srq->wq_sig = 0;		/* MLX5_SRQ_SIGNATURE unset */
	srq->srqn = SRQN;
	srq->rsc.rsn = SRQN;
	srq->rsc.type = MLX5_RSC_TYPE_SRQ;
	w->wqe_size = (size_t)1 << srq->wqe_shift;
	CHECK(srq->tail + 1 == (int)sc->wqe_cnt, "%s: tail %d for %u WQEs", sc->name,
	      srq->tail, sc->wqe_cnt);

	/* an RC QP attached to the SRQ (its RQ unused) */
	qp = w->qp = zalloc(64, sizeof(*qp));
	cq = w->cq = zalloc(64, sizeof(*cq));
	qp->ibv_qp = &qp->verbs_qp.qp;
	qp->verbs_qp.qp.context = &ctx->ibv_ctx.context;
	qp->verbs_qp.qp.pd = &w->pd->ibv_pd;
	qp->verbs_qp.qp.qp_num = QPN;
	qp->verbs_qp.qp.qp_type = IBV_QPT_RC;
	qp->verbs_qp.qp.state = IBV_QPS_RTS;
	qp->verbs_qp.qp.send_cq = &cq->verbs_cq.cq;
	qp->verbs_qp.qp.recv_cq = &cq->verbs_cq.cq;
	qp->verbs_qp.qp.srq = &srq->vsrq.srq;
	qp->rsc.type = MLX5_RSC_TYPE_QP;
	qp->rsc.rsn = cqe_version ? UIDX : QPN;
	qp->sq.lock.need_lock = 0;
	qp->rq.lock.need_lock = 0;

	/* the CQ: CQ_NCQE entries, all INVALID (mlx5_alloc_cq_buf) */
	w->cqe_buf = zalloc(4096, CQ_NCQE * 64);
	for (int i = 0; i < CQ_NCQE; i++)
		((struct mlx5_cqe64 *)(w->cqe_buf + 64 * i))->op_own = MLX5_CQE_INVALID << 4;
	cq->verbs_cq.cq.context = &ctx->ibv_ctx.context;
	cq->verbs_cq.cq.cqe = CQ_NCQE - 1;
	cq->buf_a.buf = w->cqe_buf;
	cq->buf_a.length = CQ_NCQE * 64;
	cq->active_buf = &cq->buf_a;
	cq->cqe_sz = 64;
	cq->cqn = 7;
	w->cq_dbrec = zalloc(64, 64);
	cq->dbrec = w->cq_dbrec;
	cq->lock.need_lock = 0;

	/* resource tables: the QP by QPN, by user index (version 1), the SRQ
	 * by SRQ number (version 0: mlx5_find_srq) */
	w->tables[0] = zalloc(64, (MLX5_QP_TABLE_MASK + 1) * sizeof(struct mlx5_qp *));
	ctx->qp_table[QPN >> MLX5_QP_TABLE_SHIFT].refcnt = 1;
	ctx->qp_table[QPN >> MLX5_QP_TABLE_SHIFT].table = w->tables[0];
	ctx->qp_table[QPN >> MLX5_QP_TABLE_SHIFT].table[QPN & MLX5_QP_TABLE_MASK] = qp;
	w->tables[1] = zalloc(64, (MLX5_UIDX_TABLE_MASK + 1) * sizeof(struct mlx5_resource *));
	ctx->uidx_table[UIDX >> MLX5_UIDX_TABLE_SHIFT].refcnt = 1;
	ctx->uidx_table[UIDX >> MLX5_UIDX_TABLE_SHIFT].table = w->tables[1];
	ctx->uidx_table[UIDX >> MLX5_UIDX_TABLE_SHIFT].table[UIDX & MLX5_UIDX_TABLE_MASK] = &qp->rsc;
	w->tables[2] = zalloc(64, (MLX5_SRQ_TABLE_MASK + 1) * sizeof(struct mlx5_srq *));
	ctx->srq_table[SRQN >> MLX5_SRQ_TABLE_SHIFT].refcnt = 1;
	ctx->srq_table[SRQN >> MLX5_SRQ_TABLE_SHIFT].table = w->tables[2];
	ctx->srq_table[SRQN >> MLX5_SRQ_TABLE_SHIFT].table[SRQN & MLX5_SRQ_TABLE_MASK] = srq;
}

static void unfabricate(struct world *w)
{
	free(w->srq->buf.buf);		/* mlx5_alloc_buf: posix_memalign */
	free(w->srq->wrid);
	free(w->srq_db);
	free(w->srq);
	free(w->qp);
	free(w->cq);
	free(w->cqe_buf);
	free(w->cq_dbrec);
	for (int i = 0; i < 3; i++)
		free(w->tables[i]);
	free(w->pd);
	free(w->ctx);
	free(w->mdev);
}

static uint8_t *wqe_at(struct world *w, int i)
{
	return (uint8_t *)w->srq->buf.buf + (size_t)i * w->wqe_size;
}

/* One mlx5_post_srq_recv call; returns the error, *bad the bad_wr index. */
static int post(struct world *w, const struct wr_in *wrs, int n, int *bad)
{
	static struct ibv_recv_wr rw[MAX_WRS];
	struct ibv_recv_wr *bad_wr = NULL;
	int err;

	CHECK(n <= MAX_WRS, "too many WRs");
	for (int i = 0; i < n; i++) {
		rw[i].wr_id = wrs[i].wr_id;
		rw[i].num_sge = wrs[i].nsge;
		rw[i].sg_list = (struct ibv_sge *)wrs[i].sge;
		rw[i].next = i + 1 < n ? &rw[i + 1] : NULL;
	}
	err = rdmacore44_0_mlx5_post_srq_recv(&w->srq->vsrq.srq, n ? rw : NULL, &bad_wr);
	*bad = err ? (int)(bad_wr - rw) : -1;
	CHECK(!err == !bad_wr, "bad_wr %p with err %d", (void *)bad_wr, err);
	return err;
}

/* One responder completion of WQE idx through the poll path. */
static uint64_t complete(struct world *w, int idx)
{
	struct mlx5_cq *cq = w->cq;
	uint32_t ci = cq->cons_index;
	struct mlx5_cqe64 *cqe = (void *)(w->cqe_buf + 64 * (ci & (CQ_NCQE - 1)));
	struct ibv_wc wc;
	int n;

	memset(cqe, 0, sizeof(*cqe));
	/* version 1: the QP's user index; version 0: the SRQ number */
	cqe->srqn_uidx = htobe32(w->cqe_version ? UIDX : SRQN);
	cqe->sop_drop_qpn = htobe32(QPN);
	cqe->wqe_counter = htobe16((uint16_t)idx);
	cqe->byte_cnt = htobe32(0);
	cqe->op_own = MLX5_CQE_RESP_SEND << 4 | !!(ci & CQ_NCQE);
	memset(&wc, 0xa5, sizeof(wc));
	n = w->cqe_version ? rdmacore44_0_mlx5_poll_cq_v1(&cq->verbs_cq.cq, 1, &wc)
			   : rdmacore44_0_mlx5_poll_cq(&cq->verbs_cq.cq, 1, &wc);
	CHECK(n == 1 && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV &&
	      wc.qp_num == QPN && cq->cons_index == ci + 1,
	      "poll: %d, status %d, opcode %d", n, wc.status, wc.opcode);
	return wc.wr_id;
}

/* The WQEs not on the free list (head .. tail along next_wqe_index), as
 * srq_ref.py posted_set: the ones a completion may name. */
static int posted(struct world *w, int *out)
{
	static uint8_t is_free[1 << 16];
	int n = 0, i = w->srq->head, wqe_cnt, steps = 0;

	memset(is_free, 0, sizeof(is_free));
	for (;;) {
		is_free[i] = 1;
		if (i == w->srq->tail)
			break;
		i = be16toh(((struct mlx5_wqe_srq_next_seg *)wqe_at(w, i))->next_wqe_index);
		CHECK(++steps < (1 << 16), "free list loops");
	}
	wqe_cnt = w->srq->waitq_head >= 0 ? w->srq->waitq_head : w->srq->max;
	for (i = 0; i < wqe_cnt; i++)
		if (!is_free[i])
			out[n++] = i;
	return n;
}

/* ---- random choices (splitmix64, as cqe_gen.c) ---------------------------- */


/* rng_state, rnd(), below(), chance(): oracle_rng.h (splitmix64) */

static void rand_sge(struct ibv_sge *s)
{
	unsigned r = below(100);

	s->length = r < 20 ? 0 : r < 30 ? 0xffffffffu :
		    chance(50) ? 1 + below(65535) : (uint32_t)rnd();
	r = below(100);
	s->lkey = r < 5 ? MLX5_INVALID_LKEY : r < 10 ? (chance(50) ? 0 : 0xffffffffu)
						    : (uint32_t)rnd();
	switch (below(4)) {
	case 0: s->addr = 0; break;
	case 1: s->addr = rnd(); break;
	case 2: s->addr = rnd() & 0xffffffffffffull; break;
	default: s->addr = ~0ull; break;
	}
}

static void rand_wr(struct wr_in *wr, int max_gs)
{
	unsigned r = below(100);

	if (r < 4)
		wr->nsge = max_gs + 1 + below(3);	/* EINVAL */
	else if (r < 15)
		wr->nsge = 0;
	else if (r < 30)
		wr->nsge = max_gs;
	else
		wr->nsge = below(max_gs + 1);
	CHECK(wr->nsge <= MAX_SGES, "nsge");
	switch (below(4)) {
	case 0: wr->wr_id = rnd(); break;
	case 1: wr->wr_id = below(1 << 16); break;
	case 2: wr->wr_id = ~0ull; break;
	default: wr->wr_id = 0; break;
	}
	for (int i = 0; i < wr->nsge; i++)
		rand_sge(&wr->sge[i]);
}

/* ---- running a scenario --------------------------------------------------- */

/*
 * Runs sc (whose ops, in gen mode, are chosen here from the live state and
 * recorded in sc) and prints it in srq_ref.py's format.
 */
static void run(struct scenario *sc, int cqe_version, int gen, int gen_nops, struct text *t)
{
	static int live[1 << 16];
	struct world w;
	uint8_t *before, *waitq0;
	size_t cnt_bytes, total;
	int max_gs;

	fabricate(&w, sc, cqe_version);
	cnt_bytes = sc->wqe_cnt * w.wqe_size;
	total = (size_t)w.srq->max * w.wqe_size;
	before = malloc(cnt_bytes);
	waitq0 = malloc(total - cnt_bytes + 1);
	CHECK(before && waitq0, "out of memory");
	memcpy(waitq0, wqe_at(&w, sc->wqe_cnt), total - cnt_bytes);
	max_gs = w.srq->max_gs;

	emit(t, "case %s\n", sc->name);
	emit(t, "srq %u %u %u\n", sc->wqe_cnt, sc->max_sge, sc->counter0);
	emit(t, "layout %d %d %d %d\n", w.srq->wqe_shift, w.srq->max_gs, w.srq->head, w.srq->tail);

	/* warm-up to COUNTER0 (srq_ref.py): one-WR calls of max_gs zero SGEs,
	 * each completed at once */
	for (unsigned k = 0; k < sc->counter0; k++) {
		struct wr_in z = { .wr_id = 0, .nsge = max_gs };
		int bad, ind = w.srq->head;

		CHECK(post(&w, &z, 1, &bad) == 0, "warm-up post");
		complete(&w, ind);
	}

	for (int k = 0; gen ? k < gen_nops : k < sc->nops; k++) {
		struct op_in *op = &sc->ops[k];

		if (gen) {
			int nlive = posted(&w, live);
			int free_slots = sc->wqe_cnt - 1 - nlive;

			CHECK(k < MAX_OPS, "too many ops");
			memset(op, 0, sizeof(*op));
			op->is_post = chance(sc->wqe_cnt <= 64 ? 55 : 60) || !nlive;
			if (op->is_post) {
				unsigned r = below(100);
				int n;

				if (r < 25)
					n = free_slots + 1 + below(2);		/* overflow */
				else if (r < 35)
					n = chance(30) ? 0 : free_slots;	/* exact fill */
				else if (r < 40)
					n = 1;
				else
					n = 1 + below(sc->wqe_cnt < 8 ? sc->wqe_cnt : 8);
				if (sc->wqe_cnt > 64 && n > 24)
					n = 1 + below(24);
				op->nwr = n;
				op->wrs = calloc(n + 1, sizeof(*op->wrs));
				CHECK(op->wrs, "out of memory");
				for (int i = 0; i < n; i++)
					rand_wr(&op->wrs[i], max_gs);
			} else {
				op->idx = live[below(nlive)];
			}
			sc->nops = k + 1;
		}
		memcpy(before, wqe_at(&w, 0), cnt_bytes);
		if (op->is_post) {
			int bad, err;

			emit(t, "post %d\n", op->nwr);
			for (int i = 0; i < op->nwr; i++) {
				emit(t, "wr 0x%llx %d", (unsigned long long)op->wrs[i].wr_id,
				     op->wrs[i].nsge);
				for (int s = 0; s < op->wrs[i].nsge; s++)
					emit(t, " 0x%llx:0x%x:0x%x",
					     (unsigned long long)op->wrs[i].sge[s].addr,
					     op->wrs[i].sge[s].length, op->wrs[i].sge[s].lkey);
				emit(t, "\n");
			}
			err = post(&w, op->wrs, op->nwr, &bad);
			emit(t, "ret %d %d\n", err, bad);
		} else {
			emit(t, "complete %d\n", op->idx);
			emit(t, "wrid 0x%llx\n", (unsigned long long)complete(&w, op->idx));
		}
		for (unsigned i = 0; i < sc->wqe_cnt; i++) {
			if (!memcmp(before + i * w.wqe_size, wqe_at(&w, i), w.wqe_size))
				continue;
			emit(t, "wqe %u ", i);
			emit_hex(t, wqe_at(&w, i), w.wqe_size);
			emit(t, "\n");
		}
		emit(t, "db ");
		emit_hex(t, (uint8_t *)w.srq->db, 4);
		emit(t, "\nstate %d %d %u\n", w.srq->head, w.srq->tail, w.srq->counter);
		CHECK(!memcmp(waitq0, wqe_at(&w, sc->wqe_cnt), total - cnt_bytes),
		      "%s: the wait queue changed", sc->name);
	}
	emit(t, "end\n");
	free(before);
	free(waitq0);
	unfabricate(&w);
}

/* Runs sc with both CQE versions, checks they agree, prints. */
static void run_both(struct scenario *sc, int gen, int gen_nops)
{
	struct text a = { 0 }, b = { 0 };

	run(sc, 1, gen, gen_nops, &a);
	run(sc, 0, 0, 0, &b);
	CHECK(a.len == b.len && !memcmp(a.s, b.s, a.len),
	      "%s: CQE version 1 and 0 runs differ", sc->name);
	fwrite(a.s, 1, a.len, stdout);
	free(a.s);
	free(b.s);
}

static void free_ops(struct scenario *sc)
{
	for (int k = 0; k < sc->nops; k++)
		free(sc->ops[k].wrs);
	sc->nops = 0;
}

static void random_scenario(struct scenario *sc, uint64_t seed, int idx)
{
	static const unsigned cnts[] = { 2, 2, 4, 4, 8, 8, 16, 32, 64, 128, 256, 512, 1024 };
	unsigned r;
	int nops;

	memset(sc, 0, sizeof(*sc));
	sc->wqe_cnt = cnts[below(sizeof(cnts) / sizeof(cnts[0]))];
	r = below(20);
	sc->max_sge = r < 16 ? 1 + r : r == 19 ? 3 : r == 18 ? 2 : 1;
	if (sc->wqe_cnt >= 256)
		sc->max_sge = (unsigned[]){ 1, 1, 2, 3 }[below(4)];
	else if (sc->wqe_cnt >= 64 && sc->max_sge > 7)
		sc->max_sge = 7;
	r = below(100);
	if (r < 50)
		sc->counter0 = 0;
	else if (r < 80)	/* the 16-bit wrap within reach of the posts */
		sc->counter0 = 0x10000 - sc->wqe_cnt * (1 + below(sc->wqe_cnt <= 64 ? 3 : 1));
	else
		sc->counter0 = sc->wqe_cnt * below(0x10000 / sc->wqe_cnt);
	nops = sc->wqe_cnt <= 64 ? 4 + below(10) : 3 + below(5);
	snprintf(sc->name, sizeof(sc->name), "o%llu_%04d_c%u_s%u", (unsigned long long)seed,
		 idx, sc->wqe_cnt, sc->max_sge);
	run_both(sc, 1, nops);
	free_ops(sc);
}

/* ---- replay --------------------------------------------------------------- */

static uint64_t num(const char *s)
{
	char *end;
	uint64_t v = strtoull(s, &end, 0);

	CHECK(end != s && *end == 0, "bad number '%s'", s);
	return v;
}

static void replay(const char *path)
{
	static struct scenario sc;
	FILE *f = fopen(path, "r");
	char line[1 << 16];
	int pending = 0;

	CHECK(f, "cannot open %s", path);
	while (fgets(line, sizeof(line), f)) {
		char *w[4 + MAX_SGES], *save = NULL;
		int nw = 0;

		for (char *tok = strtok_r(line, " \t\n", &save); tok && nw < 4 + MAX_SGES;
		     tok = strtok_r(NULL, " \t\n", &save))
			w[nw++] = tok;
		if (!nw || w[0][0] == '#')
			continue;
		if (!strcmp(w[0], "case")) {
			memset(&sc, 0, sizeof(sc));
			snprintf(sc.name, sizeof(sc.name), "%.95s", w[1]);
		} else if (!strcmp(w[0], "srq")) {
			sc.wqe_cnt = num(w[1]);
			sc.max_sge = num(w[2]);
			sc.counter0 = num(w[3]);
		} else if (!strcmp(w[0], "post")) {
			struct op_in *op = &sc.ops[sc.nops++];

			CHECK(sc.nops <= MAX_OPS, "too many ops");
			op->is_post = 1;
			op->nwr = 0;
			pending = num(w[1]);
			op->wrs = calloc(pending + 1, sizeof(*op->wrs));
			CHECK(op->wrs, "out of memory");
		} else if (!strcmp(w[0], "wr")) {
			struct op_in *op = &sc.ops[sc.nops - 1];
			struct wr_in *wr = &op->wrs[op->nwr++];

			CHECK(pending-- > 0, "wr line outside a post");
			wr->wr_id = num(w[1]);
			wr->nsge = num(w[2]);
			CHECK(wr->nsge == nw - 3 && wr->nsge <= MAX_SGES, "bad wr line");
			for (int s = 0; s < wr->nsge; s++) {
				unsigned long long a;
				unsigned l, k;

				CHECK(sscanf(w[3 + s], "0x%llx:0x%x:0x%x", &a, &l, &k) == 3,
				      "bad sge %s", w[3 + s]);
				wr->sge[s].addr = a;
				wr->sge[s].length = l;
				wr->sge[s].lkey = k;
			}
		} else if (!strcmp(w[0], "complete")) {
			struct op_in *op = &sc.ops[sc.nops++];

			CHECK(sc.nops <= MAX_OPS, "too many ops");
			op->is_post = 0;
			op->idx = num(w[1]);
		} else if (!strcmp(w[0], "end")) {
			run_both(&sc, 0, 0);
			free_ops(&sc);
		}
		/* layout, ret, wrid, wqe, db, state: expectations, recomputed */
	}
	fclose(f);
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "--replay")) {
		replay(argv[2]);
		return 0;
	}
	if (argc == 4 && !strcmp(argv[1], "gen")) {
		static struct scenario sc;
		long n = strtol(argv[2], NULL, 0);
		uint64_t seed = strtoull(argv[3], NULL, 0);

		rng_state = seed;
		printf("# srq_gen gen %ld %llu: libmlx5.a's own SRQ code (format: see tests/refcheck/srq_ref.py)\n",
		       n, (unsigned long long)seed);
		for (long i = 0; i < n; i++)
			random_scenario(&sc, seed, (int)i);
		return 0;
	}
	fprintf(stderr, "usage: srq_gen gen N SEED | srq_gen --replay FILE\n");
	return 1;
}
