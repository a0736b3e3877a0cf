/*
 * cqe_gen.c - a random differential oracle for mlx5dp's completion side,
 * driven by libmlx5's own object code.
 *
 * Every case is run by the REAL provider code of Debian 12's static
 * /usr/lib/x86_64-linux-gnu/libmlx5.a (rdma-core 44.0-2), linked, not
 * compiled: rdmacore44_0_mlx5_poll_cq_v1 and rdmacore44_0_mlx5_poll_cq
 * (the ibv_poll_cq a CQE-version 1 / 0 context installs), the cq_ex ops that
 * rdmacore44_0_mlx5_cq_fill_pfns installs (start_poll / next_poll /
 * end_poll and the read_* accessors) and, for scatter-to-CQE cases,
 * rdmacore44_0_mlx5_post_send to post the work request whose SGEs libmlx5
 * then copies into.  The CQ, QP and context are fabricated in ordinary
 * memory; the fabrication follows benches/libmlx5/harness.c (fabricate(),
 * make_cq_ex()): written anew here, per case, with the sizes and indices the
 * case asks for.
 *
 * The output is the format of specs/golden/libmlx5/cqe-cases.txt (its
 * header documents every key); see tests/oracle/libmlx5/CQE.md.
 *
 * Usage:
 *   cqe_gen N SEED [--edge] N random cases from SEED to stdout (--edge: see
 *                           the variable edge below)
 *   cqe_gen --replay FILE   re-run the inputs of every case in FILE (a file
 *                           in the same format; outputs in it are ignored)
 *
 * Each case is run twice from scratch: once with the ibv_wc array, the CQ
 * doorbell record and the UAR page pre-filled with 0xa5, once with 0x5a.
 * A byte is "written" when both runs agree on it; the printed values are
 * those of the 0xa5 run.  Both runs must agree on every other output (the
 * program aborts otherwise).
 */
#define _GNU_SOURCE
#include <config.h>

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <infiniband/verbs.h>
#include "mlx5.h"
#include "wqe.h"
#include "oracle_rng.h"

/* libmlx5.a renames every global symbol with this prefix. */
int rdmacore44_0_mlx5_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr,
				struct ibv_send_wr **bad_wr);
int rdmacore44_0_mlx5_poll_cq(struct ibv_cq *ibcq, int ne, struct ibv_wc *wc);
int rdmacore44_0_mlx5_poll_cq_v1(struct ibv_cq *ibcq, int ne,
				 struct ibv_wc *wc);
int rdmacore44_0_mlx5_cq_fill_pfns(struct mlx5_cq *cq,
				   const struct ibv_cq_init_attr_ex *cq_attr,
				   struct mlx5_context *mctx);

#define MAX_CQES 16
#define MAX_SGE 4
/* Where prepost SGE addresses point: a fixed mapping, so that the addresses
 * printed in a case (e.g. 0x0000000200001000 in the sample) are valid. */
#define SGE_REGION ((uintptr_t)0x200000000ull)
#define SGE_REGION_LEN (1u << 20)

static void die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "cqe_gen: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(2);
}

#define CHECK(cond, ...) do { if (!(cond)) die(__VA_ARGS__); } while (0)

/* ---- case description --------------------------------------------------- */

enum api { API_POLL_V1, API_POLL_V0, API_CQ_EX };

static const char *const api_str[] = {
	[API_POLL_V1] = "ibv_poll_cq(mlx5_poll_cq_v1)",
	[API_POLL_V0] = "ibv_poll_cq(mlx5_poll_cq)",
	[API_CQ_EX] = "cq_ex(start_poll/next_poll/end_poll)",
};

struct sge_in {
	uint64_t addr;
	uint32_t length, lkey;
};

struct case_in {
	char name[96];
	char note[256];
	enum api api;
	int cqe_version;
	unsigned cq_ncqe, cqe_size;
	uint32_t cqn, cons_index;
	enum ibv_qp_type qp_type;
	uint32_t qpn, uidx, cap_cache;
	unsigned sq_wqe_cnt, rq_wqe_cnt;
	uint64_t sq_wrid_base, rq_wrid_base;
	uint32_t sq_wqe_head_base, sq_tail, rq_tail;
	int ne;
	/* one send posted through mlx5_post_send before polling */
	int prepost;
	uint32_t prepost_cur_post;
	enum ibv_wr_opcode pp_opcode;
	uint64_t pp_wr_id;
	int pp_nsge;
	struct sge_in pp_sge[MAX_SGE];
	int ncqe_in;
	struct {
		unsigned slot;
		uint8_t b[64];
	} cqe[MAX_CQES];
};

/* ---- names --------------------------------------------------------------- */

static const char *qp_type_str(enum ibv_qp_type t)
{
	switch (t) {
	case IBV_QPT_RC: return "RC";
	case IBV_QPT_UC: return "UC";
	case IBV_QPT_UD: return "UD";
	case IBV_QPT_RAW_PACKET: return "RAW_PACKET";
	default: return "?";
	}
}

static int qp_type_parse(const char *s, enum ibv_qp_type *t)
{
	if (!strcmp(s, "RC")) *t = IBV_QPT_RC;
	else if (!strcmp(s, "UC")) *t = IBV_QPT_UC;
	else if (!strcmp(s, "UD")) *t = IBV_QPT_UD;
	else if (!strcmp(s, "RAW_PACKET")) *t = IBV_QPT_RAW_PACKET;
	else return -1;
	return 0;
}

static const struct { enum ibv_wr_opcode op; const char *name; } wr_names[] = {
	{ IBV_WR_RDMA_READ, "RDMA_READ" },
	{ IBV_WR_ATOMIC_FETCH_AND_ADD, "ATOMIC_FETCH_AND_ADD" },
	{ IBV_WR_ATOMIC_CMP_AND_SWP, "ATOMIC_CMP_AND_SWP" },
};

static const char *wr_opcode_str(enum ibv_wr_opcode op)
{
	for (size_t i = 0; i < sizeof(wr_names) / sizeof(wr_names[0]); i++)
		if (wr_names[i].op == op)
			return wr_names[i].name;
	return "?";
}

/* enum ibv_wc_opcode names without the IBV_WC_ prefix (as in the sample). */
static const char *wc_opcode_str(unsigned op)
{
	switch (op) {
	case IBV_WC_SEND: return "SEND";
	case IBV_WC_RDMA_WRITE: return "RDMA_WRITE";
	case IBV_WC_RDMA_READ: return "RDMA_READ";
	case IBV_WC_COMP_SWAP: return "COMP_SWAP";
	case IBV_WC_FETCH_ADD: return "FETCH_ADD";
	case IBV_WC_BIND_MW: return "BIND_MW";
	case IBV_WC_LOCAL_INV: return "LOCAL_INV";
	case IBV_WC_TSO: return "TSO";
	case IBV_WC_ATOMIC_WRITE: return "ATOMIC_WRITE";
	case IBV_WC_RECV: return "RECV";
	case IBV_WC_RECV_RDMA_WITH_IMM: return "RECV_RDMA_WITH_IMM";
	case IBV_WC_TM_ADD: return "TM_ADD";
	case IBV_WC_TM_DEL: return "TM_DEL";
	case IBV_WC_TM_SYNC: return "TM_SYNC";
	case IBV_WC_TM_RECV: return "TM_RECV";
	case IBV_WC_TM_NO_TAG: return "TM_NO_TAG";
	case IBV_WC_DRIVER1: return "DRIVER1";
	case IBV_WC_DRIVER2: return "DRIVER2";
	case IBV_WC_DRIVER3: return "DRIVER3";
	default: return "UNKNOWN";
	}
}

/* enum ibv_wc_flags bit names, lowest bit first, '|'-joined; NONE for 0. */
static void wc_flags_str(unsigned f, char *out, size_t len)
{
	static const char *const names[] = {
		"GRH", "WITH_IMM", "IP_CSUM_OK", "WITH_INV",
		"TM_SYNC_REQ", "TM_MATCH", "TM_DATA_VALID",
	};
	size_t n = 0;

	out[0] = 0;
	for (unsigned b = 0; b < 32; b++) {
		if (!(f & (1u << b)))
			continue;
		n += snprintf(out + n, len - n, "%s%s", n ? "|" : "",
			      b < 7 ? names[b] : "UNKNOWN");
	}
	if (!n)
		snprintf(out, len, "NONE");
}

/* ---- fabrication (per run) ---------------------------------------------- */

struct world {
	struct mlx5_context *ctx;
	struct mlx5_pd *pd;
	struct mlx5_qp *qp;
	struct mlx5_cq *cq;
	struct mlx5_bf bf;
	uint8_t *sq_buf, *rq_buf, *cqe_buf, *uar_page;
	__be32 *qp_dbrec, *cq_dbrec;
	void *tables[3];
};

static void *zalloc(size_t align_to, size_t size)
{
	void *p;

	size = (size + align_to - 1) / align_to * align_to;
	p = aligned_alloc(align_to, size);
	CHECK(p, "aligned_alloc(%zu) failed", size);
	memset(p, 0, size);
	return p;
}

/*
 * What libmlx5's poll code reads after ibv_create_qp / ibv_create_cq,
 * following benches/libmlx5/harness.c fabricate() (see its comments and
 * benches/libmlx5/README.md "What is fabricated"): one QP of the case's type
 * and sizes, its SQ/RQ bookkeeping as the case says, one CQ of cq_ncqe
 * entries of cqe_size bytes (all op_own = MLX5_CQE_INVALID << 4, as
 * mlx5_alloc_cq_buf leaves them), the QP entered in ctx->qp_table (read by
 * mlx5_find_qp, CQE version 0) and ctx->uidx_table (mlx5_find_uidx, CQE
 * version 1).  No SRQ exists (no srq_table entry), no mkey.
 * MLX5_SINGLE_THREADED semantics: every lock has need_lock = 0.
 */
static void fabricate(struct world *w, const struct case_in *c, uint8_t fill)
{
	struct mlx5_context *ctx;
	struct mlx5_qp *qp;
	struct mlx5_cq *cq;
	struct ibv_qp *ibqp;
	unsigned i;

	memset(w, 0, sizeof(*w));
	ctx = w->ctx = zalloc(4096, sizeof(*ctx));
	ctx->cqe_version = c->cqe_version;
	/* MLX5_POST_SEND_PREFER_BF=0: a single non-inline WQE rings the
	 * 8-byte doorbell (post_send_db), as the sample's "doorbell64" says */
	ctx->prefer_bf = 0;
	ctx->shut_up_bf = 0;
	ctx->bf_reg_size = 512;
	ctx->cache_line_size = 64;
	/* mlx5_err() prints nothing with a NULL FILE (mlx5.h); error CQEs
	 * other than WR_FLUSH/RETRY_EXC are dumped there (cq.c) */
	ctx->dbg_fp = NULL;
	/* what mlx5_init_context sets when the kernel reports no dump-fill
	 * mkey (mlx5.c): copy_to_scat skips SGEs with this lkey */
	ctx->dump_fill_mkey = MLX5_INVALID_LKEY;
	ctx->dump_fill_mkey_be = htobe32(MLX5_INVALID_LKEY);
	strcpy(ctx->hostname, "cqe_gen");

	w->pd = zalloc(64, sizeof(*w->pd));
	w->pd->ibv_pd.context = &ctx->ibv_ctx.context;

	qp = w->qp = zalloc(64, sizeof(*qp));
	cq = w->cq = zalloc(64, sizeof(*cq));
	ibqp = &qp->verbs_qp.qp;
	ibqp->context = &ctx->ibv_ctx.context;
	ibqp->pd = &w->pd->ibv_pd;	/* mlx5_copy_to_*_wqe read the context here */
	ibqp->qp_num = c->qpn;
	ibqp->qp_type = c->qp_type;
	ibqp->state = IBV_QPS_RTS;
	ibqp->send_cq = &cq->verbs_cq.cq;
	ibqp->recv_cq = &cq->verbs_cq.cq;
	ibqp->srq = NULL;
	qp->ibv_qp = ibqp;
	qp->rsc.type = MLX5_RSC_TYPE_QP;
	qp->rsc.rsn = c->cqe_version ? c->uidx : c->qpn;	/* as create_qp sets it */
	qp->qp_cap_cache = c->cap_cache;

	/* SQ: sq_wqe_cnt WQEBBs; max_post = wqe_cnt (only the prepost reads
	 * it, through mlx5_wq_overflow); up to MAX_SGE SGEs per WR. */
	w->sq_buf = zalloc(4096, (size_t)c->sq_wqe_cnt * MLX5_SEND_WQE_BB);
	qp->sq_start = w->sq_buf;
	qp->sq.qend = w->sq_buf + (size_t)c->sq_wqe_cnt * MLX5_SEND_WQE_BB;
	qp->sq.wqe_cnt = c->sq_wqe_cnt;
	qp->sq.max_post = c->sq_wqe_cnt;
	qp->sq.max_gs = MAX_SGE;
	qp->sq.qp_state_max_gs = MAX_SGE;	/* RTS */
	qp->sq.wqe_shift = 6;
	qp->sq.wrid = zalloc(64, c->sq_wqe_cnt * sizeof(uint64_t));
	qp->sq.wqe_head = zalloc(64, c->sq_wqe_cnt * sizeof(unsigned));
	qp->sq.wr_data = zalloc(64, c->sq_wqe_cnt * sizeof(uint32_t));
	for (i = 0; i < c->sq_wqe_cnt; i++) {
		qp->sq.wrid[i] = c->sq_wrid_base + i;
		qp->sq.wqe_head[i] = c->sq_wqe_head_base + i;
	}
	qp->sq.tail = c->sq_tail;
	qp->sq.head = c->prepost ? c->prepost_cur_post : c->sq_tail;
	qp->sq.cur_post = c->prepost ? c->prepost_cur_post : 0;
	qp->sq.lock.need_lock = 0;

	/* RQ: rq_wqe_cnt WQEs of 16 bytes (one data segment, zeroed: a
	 * scatter-to-CQE on it finds byte_count 0). */
	w->rq_buf = zalloc(4096, (size_t)c->rq_wqe_cnt * 16);
	qp->buf.buf = w->rq_buf;
	qp->rq.offset = 0;
	qp->rq.wqe_cnt = c->rq_wqe_cnt;
	qp->rq.wqe_shift = 4;
	qp->rq.max_gs = 1;
	qp->rq.max_post = c->rq_wqe_cnt;
	qp->rq.qp_state_max_gs = 1;
	qp->rq.wrid = zalloc(64, c->rq_wqe_cnt * sizeof(uint64_t));
	for (i = 0; i < c->rq_wqe_cnt; i++)
		qp->rq.wrid[i] = c->rq_wrid_base + i;
	qp->rq.tail = c->rq_tail;
	qp->rq.head = c->rq_tail;
	qp->rq.lock.need_lock = 0;
	qp->fm_cache = 0;
	qp->sq_signal_bits = 0;
	qp->wq_sig = 0;
	qp->atomics_enabled = 1;
	qp->max_inline_data = 0;
	w->qp_dbrec = zalloc(64, 64);
	qp->db = w->qp_dbrec;

	/* UAR page (ordinary memory, pre-filled): BlueFlame register at
	 * + MLX5_BF_OFFSET (0x800), as harness.c */
	w->uar_page = zalloc(4096, 4096);
	memset(w->uar_page, fill, 4096);
	w->bf.reg = w->uar_page + MLX5_BF_OFFSET;
	w->bf.buf_size = 256;
	w->bf.uuarn = 1;
	qp->bf = &w->bf;
	ctx->cq_uar_reg = w->uar_page;

	/* CQ */
	w->cqe_buf = zalloc(4096, (size_t)c->cq_ncqe * c->cqe_size);
	for (i = 0; i < c->cq_ncqe; i++) {
		struct mlx5_cqe64 *cqe64 = (void *)(w->cqe_buf + (size_t)i * c->cqe_size +
						    c->cqe_size - 64);
		cqe64->op_own = MLX5_CQE_INVALID << 4;
	}
	for (i = 0; i < (unsigned)c->ncqe_in; i++)
		memcpy(w->cqe_buf + (size_t)c->cqe[i].slot * c->cqe_size + c->cqe_size - 64,
		       c->cqe[i].b, 64);
	cq->verbs_cq.cq.context = &ctx->ibv_ctx.context;
	cq->verbs_cq.cq.cqe = c->cq_ncqe - 1;
	cq->buf_a.buf = w->cqe_buf;
	cq->buf_a.length = (size_t)c->cq_ncqe * c->cqe_size;
	cq->active_buf = &cq->buf_a;
	cq->cqe_sz = c->cqe_size;
	cq->cqn = c->cqn;
	cq->cons_index = c->cons_index;
	w->cq_dbrec = zalloc(64, 64);
	memset(w->cq_dbrec, fill, 8);
	cq->dbrec = w->cq_dbrec;
	cq->lock.need_lock = 0;
	cq->stall_enable = 0;
	cq->stall_adaptive_enable = 0;
	cq->flags = 0;

	/* resource tables */
	w->tables[0] = zalloc(64, (MLX5_QP_TABLE_MASK + 1) * sizeof(struct mlx5_qp *));
	ctx->qp_table[c->qpn >> MLX5_QP_TABLE_SHIFT].refcnt = 1;
	ctx->qp_table[c->qpn >> MLX5_QP_TABLE_SHIFT].table = w->tables[0];
	ctx->qp_table[c->qpn >> MLX5_QP_TABLE_SHIFT].table[c->qpn & MLX5_QP_TABLE_MASK] = qp;
	if (c->cqe_version) {
		/* mlx5_store_uidx fills uidx_table only with CQE version 1 */
		w->tables[1] = zalloc(64, (MLX5_UIDX_TABLE_MASK + 1) *
					      sizeof(struct mlx5_resource *));
		ctx->uidx_table[c->uidx >> MLX5_UIDX_TABLE_SHIFT].refcnt = 1;
		ctx->uidx_table[c->uidx >> MLX5_UIDX_TABLE_SHIFT].table = w->tables[1];
		ctx->uidx_table[c->uidx >> MLX5_UIDX_TABLE_SHIFT]
			.table[c->uidx & MLX5_UIDX_TABLE_MASK] = &qp->rsc;
	}
}

static void unfabricate(struct world *w)
{
	free(w->qp->sq.wrid);
	free(w->qp->sq.wqe_head);
	free(w->qp->sq.wr_data);
	free(w->qp->rq.wrid);
	free(w->sq_buf);
	free(w->rq_buf);
	free(w->cqe_buf);
	free(w->uar_page);
	free(w->qp_dbrec);
	free(w->cq_dbrec);
	free(w->tables[0]);
	free(w->tables[1]);
	free(w->qp);
	free(w->cq);
	free(w->pd);
	free(w->ctx);
}

/* ---- running one case ---------------------------------------------------- */

struct run_out {
	int ret;			/* poll_cq return, or start_poll return */
	struct ibv_wc wc[64];
	char ex_text[16384];		/* exN lines (cq_ex) */
	int n_entries, end_poll_called;
	uint32_t cons_index;
	uint32_t sq_tail, rq_tail;
	uint8_t dbrec[8];
	uint8_t uar[4096];
	uint8_t sge_bytes[MAX_SGE][64];
	int post_ret;
};

static void appendf(char *buf, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void appendf(char *buf, size_t len, const char *fmt, ...)
{
	size_t n = strlen(buf);
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf + n, len - n, fmt, ap);
	va_end(ap);
	CHECK(strlen(buf) < len - 1, "output buffer full");
}

/* Every read_* op mlx5_cq_fill_pfns installed for IBV_WC_STANDARD_FLAGS |
 * COMPLETION_TIMESTAMP | CVLAN | FLOW_TAG, for the current completion. */
static void read_ex(struct ibv_cq_ex *cqx, int i, char *t, size_t len)
{
	char names[128];
	unsigned op = ibv_wc_read_opcode(cqx);
	unsigned flags = ibv_wc_read_wc_flags(cqx);

	appendf(t, len, "ex%d.wr_id=0x%016llx\n", i, (unsigned long long)cqx->wr_id);
	appendf(t, len, "ex%d.status=%u\n", i, cqx->status);
	appendf(t, len, "ex%d.status_name=%s\n", i, ibv_wc_status_str(cqx->status));
	appendf(t, len, "ex%d.read_opcode=%u\n", i, op);
	appendf(t, len, "ex%d.read_opcode_name=%s\n", i, wc_opcode_str(op));
	appendf(t, len, "ex%d.read_vendor_err=0x%02x\n", i, ibv_wc_read_vendor_err(cqx));
	wc_flags_str(flags, names, sizeof(names));
	appendf(t, len, "ex%d.read_wc_flags=0x%x\n", i, flags);
	appendf(t, len, "ex%d.read_wc_flags_names=%s\n", i, names);
	appendf(t, len, "ex%d.read_byte_len=%u\n", i, ibv_wc_read_byte_len(cqx));
	/* imm_data printed as be32toh() of what the op returns */
	appendf(t, len, "ex%d.read_imm_data=0x%08x\n", i, be32toh(ibv_wc_read_imm_data(cqx)));
	appendf(t, len, "ex%d.read_qp_num=0x%06x\n", i, ibv_wc_read_qp_num(cqx));
	appendf(t, len, "ex%d.read_src_qp=0x%06x\n", i, ibv_wc_read_src_qp(cqx));
	appendf(t, len, "ex%d.read_slid=0x%04x\n", i, ibv_wc_read_slid(cqx));
	appendf(t, len, "ex%d.read_sl=%u\n", i, ibv_wc_read_sl(cqx));
	appendf(t, len, "ex%d.read_dlid_path_bits=%u\n", i, ibv_wc_read_dlid_path_bits(cqx));
	appendf(t, len, "ex%d.read_completion_ts=0x%016llx\n", i,
		(unsigned long long)ibv_wc_read_completion_ts(cqx));
	appendf(t, len, "ex%d.read_cvlan=0x%04x\n", i, ibv_wc_read_cvlan(cqx));
	appendf(t, len, "ex%d.read_flow_tag=0x%06x\n", i, ibv_wc_read_flow_tag(cqx));
}

static void run_case(const struct case_in *c, uint8_t fill, struct run_out *o)
{
	struct world w;
	struct ibv_cq_ex *cqx;
	int i;

	memset(o, 0, sizeof(*o));
	fabricate(&w, c, fill);

	if (c->prepost) {
		struct ibv_sge sg[MAX_SGE];
		struct ibv_send_wr wr, *bad;

		memset(&wr, 0, sizeof(wr));
		for (i = 0; i < c->pp_nsge; i++) {
			sg[i].addr = c->pp_sge[i].addr;
			sg[i].length = c->pp_sge[i].length;
			sg[i].lkey = c->pp_sge[i].lkey;
			CHECK(sg[i].addr >= SGE_REGION &&
			      sg[i].addr + sg[i].length <= SGE_REGION + SGE_REGION_LEN &&
			      sg[i].length <= 64, "SGE %d outside the SGE region", i);
			memset((void *)(uintptr_t)sg[i].addr, 0xa5, sg[i].length);
		}
		wr.wr_id = c->pp_wr_id;
		wr.sg_list = sg;
		wr.num_sge = c->pp_nsge;
		wr.opcode = c->pp_opcode;
		wr.send_flags = IBV_SEND_SIGNALED;
		if (c->pp_opcode == IBV_WR_RDMA_READ) {
			wr.wr.rdma.remote_addr = 0x00007f0000001000ull;
			wr.wr.rdma.rkey = 0x5678;
		} else {
			wr.wr.atomic.remote_addr = 0x00007f0000002000ull;
			wr.wr.atomic.compare_add = 1;
			wr.wr.atomic.swap = 2;
			wr.wr.atomic.rkey = 0x5678;
		}
		o->post_ret = rdmacore44_0_mlx5_post_send(&w.qp->verbs_qp.qp, &wr, &bad);
		CHECK(o->post_ret == 0, "%s: mlx5_post_send returned %d", c->name, o->post_ret);
		/* the post's doorbell write is an output (out.uar_*); keep the
		 * page as it is now */
	}

	switch (c->api) {
	case API_POLL_V1:
	case API_POLL_V0:
		CHECK(c->ne >= 0 && c->ne <= 64, "ne out of range");
		memset(o->wc, fill, sizeof(o->wc));
		o->ret = (c->api == API_POLL_V1 ? rdmacore44_0_mlx5_poll_cq_v1 :
			  rdmacore44_0_mlx5_poll_cq)(&w.cq->verbs_cq.cq, c->ne, o->wc);
		break;
	case API_CQ_EX: {
		/* create_cq(..., MLX5_CQ_FLAGS_EXTENDED) around fill_pfns
		 * (verbs.c): default flags (not SINGLE_THREADED): the _lock
		 * ops, with need_lock = 0 */
		struct ibv_cq_init_attr_ex attr = {
			.cqe = c->cq_ncqe - 1,
			.wc_flags = IBV_WC_STANDARD_FLAGS |
				    IBV_WC_EX_WITH_COMPLETION_TIMESTAMP |
				    IBV_WC_EX_WITH_CVLAN | IBV_WC_EX_WITH_FLOW_TAG,
			.comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS,
		};
		struct ibv_poll_cq_attr pattr = {};
		int rc = rdmacore44_0_mlx5_cq_fill_pfns(w.cq, &attr, w.ctx);

		CHECK(rc == 0, "mlx5_cq_fill_pfns returned %d", rc);
		w.cq->flags = MLX5_CQ_FLAGS_EXTENDED;
		cqx = &w.cq->verbs_cq.cq_ex;
		o->ret = ibv_start_poll(cqx, &pattr);
		if (o->ret == 0) {
			appendf(o->ex_text, sizeof(o->ex_text), "ex0.start_poll_ret=0\n");
			read_ex(cqx, 0, o->ex_text, sizeof(o->ex_text));
			o->n_entries = 1;
			for (i = 1; i < c->ne; i++) {
				int r = ibv_next_poll(cqx);

				appendf(o->ex_text, sizeof(o->ex_text),
					"ex%d.next_poll_ret=%d\n", i, r);
				o->n_entries++;
				if (r)
					break;
				read_ex(cqx, i, o->ex_text, sizeof(o->ex_text));
			}
			ibv_end_poll(cqx);
			o->end_poll_called = 1;
		}
		break;
	}
	}

	o->cons_index = w.cq->cons_index;
	o->sq_tail = w.qp->sq.tail;
	o->rq_tail = w.qp->rq.tail;
	memcpy(o->dbrec, w.cq_dbrec, 8);
	memcpy(o->uar, w.uar_page, 4096);
	for (i = 0; c->prepost && i < c->pp_nsge; i++)
		memcpy(o->sge_bytes[i], (void *)(uintptr_t)c->pp_sge[i].addr,
		       c->pp_sge[i].length);
	unfabricate(&w);
}

/* ---- printing ------------------------------------------------------------ */

static void hex(FILE *f, const uint8_t *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		fprintf(f, "%02x", b[i]);
}

static void print_inputs(FILE *f, const struct case_in *c)
{
	int i;

	fprintf(f, "case %s\n", c->name);
	if (c->note[0])
		fprintf(f, "note=%s\n", c->note);
	fprintf(f, "api=%s\n", api_str[c->api]);
	fprintf(f, "cqe_version=%d\n", c->cqe_version);
	fprintf(f, "cq_ncqe=%u\n", c->cq_ncqe);
	fprintf(f, "cqe_size=%u\n", c->cqe_size);
	fprintf(f, "cqn=0x%06x\n", c->cqn);
	fprintf(f, "cons_index_before=0x%x\n", c->cons_index);
	fprintf(f, "qp_type=%s\n", qp_type_str(c->qp_type));
	fprintf(f, "qpn=0x%06x\n", c->qpn);
	fprintf(f, "qp_uidx=0x%06x\n", c->uidx);
	fprintf(f, "qp_cap_cache=0x%x\n", c->cap_cache);
	fprintf(f, "sq_wqe_cnt=%u\n", c->sq_wqe_cnt);
	fprintf(f, "sq_wrid_base=0x%016llx\n", (unsigned long long)c->sq_wrid_base);
	fprintf(f, "sq_wqe_head_base=%u\n", c->sq_wqe_head_base);
	fprintf(f, "sq_tail_before=%u\n", c->sq_tail);
	fprintf(f, "rq_wqe_cnt=%u\n", c->rq_wqe_cnt);
	fprintf(f, "rq_wrid_base=0x%016llx\n", (unsigned long long)c->rq_wrid_base);
	fprintf(f, "rq_tail_before=%u\n", c->rq_tail);
	fprintf(f, "ne=%d\n", c->ne);
	if (c->prepost) {
		fprintf(f, "prepost_send_nwr=1\n");
		fprintf(f, "prepost_send_start_cur_post=%u\n", c->prepost_cur_post);
		fprintf(f, "prepost_send0.opcode=%s\n", wr_opcode_str(c->pp_opcode));
		fprintf(f, "prepost_send0.wr_id=0x%016llx\n", (unsigned long long)c->pp_wr_id);
		fprintf(f, "prepost_send0.num_sge=%d\n", c->pp_nsge);
		for (i = 0; i < c->pp_nsge; i++)
			fprintf(f, "prepost_send0.sge%d=addr:0x%016llx,length:%u,lkey:0x%08x\n",
				i, (unsigned long long)c->pp_sge[i].addr,
				c->pp_sge[i].length, c->pp_sge[i].lkey);
	}
	fprintf(f, "ncqe_in=%d\n", c->ncqe_in);
	for (i = 0; i < c->ncqe_in; i++) {
		fprintf(f, "cqe %u ", c->cqe[i].slot);
		hex(f, c->cqe[i].b, 64);
		fprintf(f, "\n");
	}
}

/* Fields of struct ibv_wc in declaration order (x86-64 layout). */
#define WCF(n) { #n, offsetof(struct ibv_wc, n), sizeof(((struct ibv_wc *)0)->n) }
static const struct { const char *name; size_t off, len; } wc_fields[] = {
	WCF(wr_id), WCF(status), WCF(opcode), WCF(vendor_err), WCF(byte_len),
	WCF(imm_data), WCF(qp_num), WCF(src_qp), WCF(wc_flags), WCF(pkey_index),
	WCF(slid), WCF(sl), WCF(dlid_path_bits),
};
#define N_WC_FIELDS (sizeof(wc_fields) / sizeof(wc_fields[0]))

static int field_written(const struct ibv_wc *a, const struct ibv_wc *b, size_t k)
{
	return !memcmp((const uint8_t *)a + wc_fields[k].off,
		       (const uint8_t *)b + wc_fields[k].off, wc_fields[k].len);
}

static void print_wc(FILE *f, int i, const struct ibv_wc *a, const struct ibv_wc *b)
{
	char names[128], unwritten[256] = "";
	size_t k;

	for (k = 0; k < N_WC_FIELDS; k++) {
		const char *n = wc_fields[k].name;

		if (!field_written(a, b, k)) {
			appendf(unwritten, sizeof(unwritten), "%s%s",
				unwritten[0] ? "," : "", n);
			continue;
		}
		if (!strcmp(n, "wr_id")) {
			fprintf(f, "wc%d.wr_id=0x%016llx\n", i, (unsigned long long)a->wr_id);
		} else if (!strcmp(n, "status")) {
			fprintf(f, "wc%d.status=%u\n", i, a->status);
			fprintf(f, "wc%d.status_name=%s\n", i, ibv_wc_status_str(a->status));
		} else if (!strcmp(n, "opcode")) {
			fprintf(f, "wc%d.opcode=%u\n", i, a->opcode);
			fprintf(f, "wc%d.opcode_name=%s\n", i, wc_opcode_str(a->opcode));
		} else if (!strcmp(n, "vendor_err")) {
			fprintf(f, "wc%d.vendor_err=0x%02x\n", i, a->vendor_err);
		} else if (!strcmp(n, "byte_len")) {
			fprintf(f, "wc%d.byte_len=%u\n", i, a->byte_len);
		} else if (!strcmp(n, "imm_data")) {
			fprintf(f, "wc%d.imm_data=0x%08x\n", i, be32toh(a->imm_data));
		} else if (!strcmp(n, "qp_num")) {
			fprintf(f, "wc%d.qp_num=0x%06x\n", i, a->qp_num);
		} else if (!strcmp(n, "src_qp")) {
			fprintf(f, "wc%d.src_qp=0x%06x\n", i, a->src_qp);
		} else if (!strcmp(n, "wc_flags")) {
			wc_flags_str(a->wc_flags, names, sizeof(names));
			fprintf(f, "wc%d.wc_flags=0x%x\n", i, a->wc_flags);
			fprintf(f, "wc%d.wc_flags_names=%s\n", i, names);
		} else if (!strcmp(n, "pkey_index")) {
			fprintf(f, "wc%d.pkey_index=%u\n", i, a->pkey_index);
		} else if (!strcmp(n, "slid")) {
			fprintf(f, "wc%d.slid=0x%04x\n", i, a->slid);
		} else if (!strcmp(n, "sl")) {
			fprintf(f, "wc%d.sl=%u\n", i, a->sl);
		} else if (!strcmp(n, "dlid_path_bits")) {
			fprintf(f, "wc%d.dlid_path_bits=%u\n", i, a->dlid_path_bits);
		}
	}
	if (unwritten[0])
		fprintf(f, "wc%d.unwritten=%s\n", i, unwritten);
	fprintf(f, "wc%d.raw=", i);
	hex(f, (const uint8_t *)a, sizeof(*a));
	fprintf(f, "\n");
}

static void run_and_print(FILE *f, const struct case_in *c)
{
	static struct run_out a, b;	/* 0xa5 run, 0x5a run */
	char mask[9];
	int i, written = 0, first = -1, last = -1;

	run_case(c, 0xa5, &a);
	run_case(c, 0x5a, &b);
	/* the two runs differ only in the pre-fill: every other output must
	 * be identical */
	CHECK(a.ret == b.ret && a.cons_index == b.cons_index &&
	      a.sq_tail == b.sq_tail && a.rq_tail == b.rq_tail &&
	      a.n_entries == b.n_entries && !strcmp(a.ex_text, b.ex_text) &&
	      !memcmp(a.sge_bytes, b.sge_bytes, sizeof(a.sge_bytes)),
	      "%s: the a5 and 5a runs disagree", c->name);

	print_inputs(f, c);
	if (c->api == API_CQ_EX) {
		fprintf(f, "out.start_poll_ret=%d\n", a.ret);
		fprintf(f, "out.n_entries=%d\n", a.n_entries);
		fputs(a.ex_text, f);
		fprintf(f, "out.end_poll_called=%d\n", a.end_poll_called);
	} else {
		fprintf(f, "out.ret=%d\n", a.ret);
		for (i = 0; i < a.ret; i++)
			print_wc(f, i, &a.wc[i], &b.wc[i]);
	}
	for (i = 0; c->prepost && i < c->pp_nsge; i++) {
		fprintf(f, "out.buf.send0.sge%d=", i);
		hex(f, a.sge_bytes[i], c->pp_sge[i].length);
		fprintf(f, "\n");
	}
	fprintf(f, "out.cons_index_after=0x%x\n", a.cons_index);
	fprintf(f, "out.sq_tail_after=%u\n", a.sq_tail);
	fprintf(f, "out.rq_tail_after=%u\n", a.rq_tail);
	for (i = 0; i < 8; i++) {
		mask[i] = a.dbrec[i] == b.dbrec[i] ? 'x' : '.';
		written |= mask[i] == 'x';
	}
	mask[8] = 0;
	fprintf(f, "out.cq_dbrec_written=%d\n", written);
	fprintf(f, "out.cq_dbrec_bytes=");
	hex(f, a.dbrec, 8);
	fprintf(f, "\nout.cq_dbrec_mask=%s\n", mask);
	for (i = 0; i < 4096; i++) {
		if (a.uar[i] != b.uar[i])
			continue;
		if (first < 0)
			first = i;
		last = i;
	}
	if (first < 0) {
		fprintf(f, "out.uar_write=none\n");
	} else {
		/* only the prepost's doorbell writes the UAR page here */
		for (i = first; i <= last; i++)
			CHECK(a.uar[i] == b.uar[i], "%s: UAR write with holes", c->name);
		fprintf(f, "out.uar_write=%s\n", last - first + 1 == 8 ? "doorbell64" : "blueflame");
		fprintf(f, "out.uar_offset=0x%x\n", first);
		fprintf(f, "out.uar_len=%d\n", last - first + 1);
		fprintf(f, "out.uar_bytes=");
		hex(f, a.uar + first, last - first + 1);
		fprintf(f, "\n");
	}
	fprintf(f, "end\n\n");
}

/* ---- random cases -------------------------------------------------------- */


/*
 * --edge: also generate scatter-to-CQE inputs whose libmlx5 outcome depends
 * on something the case format does not describe or that a device does not
 * produce: inline-scatter bits on CQEs of WQEs that were not pre-posted (the
 * fabricated SQ/RQ WQEs are zeroed), 128-byte CQEs with a scatter (a case
 * line holds only the CQE's last 64 bytes), byte_cnt > 32 with SCATTER_32,
 * RDMA READ byte counts below the SGE total, atomics into an SGE longer than
 * 8 bytes, and a CQE send opcode other than the posted WR's.
 */
static int edge;

/* rng_state, rnd(), below(), chance(): oracle_rng.h (splitmix64) */

/* A 32-bit counter value: small, random, or near a wrap (2^16, 2^24, 2^32). */
static uint32_t counter32(void)
{
	switch (below(6)) {
	case 0: return below(64);
	case 1: return 0xffffffffu - below(8);
	case 2: return 0x00ffffffu - below(8) + below(8);
	case 3: return 0x0000ffffu - below(8) + below(8);
	default: return (uint32_t)rnd();
	}
}

static void put_be16(uint8_t *p, uint16_t v) { p[0] = v >> 8; p[1] = v; }
static void put_be32(uint8_t *p, uint32_t v)
{
	p[0] = v >> 24; p[1] = v >> 16; p[2] = v >> 8; p[3] = v;
}

/* mlx5 send opcodes (MLX5_OPCODE_*, mlx5dv.h) and a few unassigned values */
static const uint8_t send_opcodes[] = {
	0x00 /* NOP */, 0x01 /* SEND_INVAL */, 0x08 /* RDMA_WRITE */,
	0x09 /* RDMA_WRITE_IMM */, 0x0a /* SEND */, 0x0b /* SEND_IMM */,
	0x0e /* TSO */, 0x10 /* RDMA_READ */, 0x11 /* ATOMIC_CS */,
	0x12 /* ATOMIC_FA */, 0x14 /* ATOMIC_MASKED_CS */,
	0x15 /* ATOMIC_MASKED_FA */, 0x18 /* BIND_MW */, 0x19 /* FMR */,
	0x1b /* LOCAL_INVAL */, 0x1f /* CONFIG_CMD */, 0x20 /* SET_PSV */,
	0x25 /* UMR */, 0x2c /* FLOW_TBL_ACCESS */, 0x2f /* MMO */,
};

/* MLX5_CQE_SYNDROME_* (mlx5dv.h) */
static const uint8_t syndromes[] = {
	0x01, 0x02, 0x04, 0x05, 0x06, 0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x22,
};

/* A CQE opcode, weighted towards the common ones.  RESIZE_CQ and the
 * reserved 7..11 (which libmlx5 reports as a completion with only qp_num and
 * wc_flags written, cq.c mlx5_parse_cqe) only when exotic: they are kept to
 * a few cases, so that they do not mask the rest of the coverage (a case
 * holding one is a known gap of the replay). */
static uint8_t cqe_opcode(int exotic)
{
	unsigned r = below(100);

	if (exotic && r < 50)
		return chance(40) ? MLX5_CQE_RESIZE_CQ : 7 + below(5);	/* reserved 7..11 */
	r = below(100);
	if (r < 32) return MLX5_CQE_REQ;
	if (r < 41) return MLX5_CQE_RESP_SEND;
	if (r < 48) return MLX5_CQE_RESP_SEND_IMM;
	if (r < 55) return MLX5_CQE_RESP_WR_IMM;
	if (r < 61) return MLX5_CQE_RESP_SEND_INV;
	if (r < 76) return MLX5_CQE_REQ_ERR;
	if (r < 92) return MLX5_CQE_RESP_ERR;
	if (r < 96) return MLX5_CQE_NO_PACKET;
	return MLX5_CQE_SIG_ERR;
}

static const char *cqe_opcode_tag(uint8_t op)
{
	static const char *const t[16] = {
		"req", "resp_wr_imm", "resp_send", "resp_send_imm", "resp_send_inv",
		"resize", "no_packet", "rsvd7", "rsvd8", "rsvd9", "rsvd10", "rsvd11",
		"sig_err", "req_err", "resp_err", "invalid",
	};
	return t[op & 15];
}

/* One 64-byte CQE with opcode op for a QP described by c, owned by software
 * at consumer index n (owner bit = !!(n & ncqe), cq.c get_sw_cqe) unless
 * stale. */
static void random_cqe(const struct case_in *c, uint8_t *b, uint8_t op,
		       uint32_t n, int stale)
{
	uint32_t uidx_field, qpn_field, owner;
	uint8_t sop;

	for (int i = 0; i < 64; i++)
		b[i] = (uint8_t)rnd();
	if (chance(30))
		memset(b, 0, 16 + 16 * below(2));
	/* checksum/L3 bits (hds_ip_ext, l4_hdr_type_etc): often a valid
	 * IPv4 L3+L4 OK combination */
	if (chance(35)) {
		b[28] = (b[28] & ~0x06) | MLX5_CQE_L3_OK | MLX5_CQE_L4_OK;
		b[29] = (b[29] & ~0x0c) | (MLX5_CQE_L3_HDR_TYPE_IPV4 << 2);
	}
	if (chance(25))
		put_be16(b + 30, 0);			/* vlan_info */
	if (chance(30))
		b[24] &= 0x0f;				/* flags_rqpn: no GRH bits */
	/* app: tag matching (MLX5_CQE_APP_TAG_MATCHING = 1) sometimes, then
	 * app_op mostly one of the MLX5_CQE_APP_OP_TM_* values (cq.c) */
	b[40] = chance(88) ? 0 : (chance(60) ? 1 : (uint8_t)rnd());
	if (b[40] == 1 && chance(70))
		b[41] = 1 + below(12);

	/* srqn_uidx: the QP's user index (v1) or 0 (v0: no SRQ) mostly */
	if (c->cqe_version)
		uidx_field = chance(96) ? c->uidx : (uint32_t)rnd() & 0xffffff;
	else
		uidx_field = chance(94) ? 0 : (uint32_t)rnd() & 0xffffff;
	if (chance(15))
		uidx_field |= (uint32_t)below(256) << 24;	/* reserved top byte */
	put_be32(b + 32, uidx_field);

	/* sop_drop_qpn: send opcode (requester) | QPN */
	qpn_field = chance(96) ? c->qpn : (uint32_t)rnd() & 0xffffff;
	if (op == MLX5_CQE_REQ || op == MLX5_CQE_REQ_ERR)
		sop = chance(85) ? send_opcodes[below(sizeof(send_opcodes))] : (uint8_t)rnd();
	else
		sop = chance(75) ? 0 : (uint8_t)rnd();
	put_be32(b + 56, (uint32_t)sop << 24 | qpn_field);

	if (op == MLX5_CQE_REQ_ERR || op == MLX5_CQE_RESP_ERR) {
		/* struct mlx5_err_cqe: vendor_err_synd at 54, syndrome at 55 */
		b[55] = chance(80) ? syndromes[below(sizeof(syndromes))] : (uint8_t)rnd();
		if (b[55] == MLX5_CQE_SYNDROME_REMOTE_ABORTED_ERR && chance(30))
			b[54] = MLX5_CQE_VENDOR_SYNDROME_ODP_PFAULT;
	}
	if (chance(40))
		put_be16(b + 60, (uint16_t)below(2 * c->sq_wqe_cnt));	/* wqe_counter */

	owner = !!(n & c->cq_ncqe) ^ !!stale;
	/* op_own: opcode, owner, bit 1 random, inline scatter bits rarely */
	b[63] = (uint8_t)(op << 4) | owner | (uint8_t)(rnd() & 2);
	if (edge && chance(3)) {
		b[63] |= chance(50) ? MLX5_INLINE_SCATTER_32 : MLX5_INLINE_SCATTER_64;
		/* the device scatters at most 32 / 64 bytes into a CQE; a
		 * byte_cnt >= 2^31 would make libmlx5's copy_to_scat (qp.c,
		 * int size) memcpy a negative length */
		put_be32(b + 44, below(65));
	}
}

static void random_case(struct case_in *c, uint64_t seed, int idx)
{
	unsigned r, nvalid, i;
	uint32_t ci;
	int exotic;

	memset(c, 0, sizeof(*c));
	r = below(100);
	if (r < 55) c->api = API_POLL_V1, c->cqe_version = 1;
	else if (r < 70) c->api = API_POLL_V0, c->cqe_version = 0;
	else if (r < 92) c->api = API_CQ_EX, c->cqe_version = 1;
	else c->api = API_CQ_EX, c->cqe_version = 0;

	r = below(100);
	c->cq_ncqe = 1u << (r < 10 ? 1 + below(2) : r < 80 ? 3 + below(6) : 9 + below(4));
	c->cqe_size = chance(90) ? 64 : 128;
	c->cqn = (uint32_t)rnd() & 0xffffff;
	switch (below(5)) {
	case 0: ci = below(2 * c->cq_ncqe); break;
	case 1: ci = c->cq_ncqe * (1 + below(4)) - 1 - below(3); break;	/* ring end */
	case 2: ci = 0x01000000u - below(2 * c->cq_ncqe); break;	/* dbrec 24-bit wrap */
	case 3: ci = 0u - 1u - below(2 * c->cq_ncqe); break;		/* 32-bit wrap */
	default: ci = (uint32_t)rnd(); break;
	}
	c->cons_index = ci;

	r = below(100);
	c->qp_type = r < 50 ? IBV_QPT_RC : r < 75 ? IBV_QPT_UD : IBV_QPT_RAW_PACKET;
	c->qpn = ((uint32_t)rnd() & 0xffffff) | 1;
	c->uidx = (uint32_t)rnd() & 0xffffff;
	if (c->qp_type == IBV_QPT_RAW_PACKET || chance(15)) {
		static const uint32_t caps[] = { 0, 0x1, 0x3, 0x10000, 0x10001, 0x10003 };
		c->cap_cache = caps[below(6)];
	}
	c->sq_wqe_cnt = 1u << below(11);
	c->rq_wqe_cnt = 1u << below(11);
	c->sq_wrid_base = rnd() & ~0xfffull;
	c->rq_wrid_base = rnd() & ~0xfffull;
	c->sq_wqe_head_base = counter32();
	c->sq_tail = counter32();
	c->rq_tail = counter32();
	r = below(100);
	c->ne = r < 3 ? 0 : r < 60 ? 1 + below(4) : r < 95 ? 5 + below(4) : 16;
	if (c->api == API_CQ_EX && c->ne == 0)
		c->ne = 1;

	/* scatter-to-CQE: an RC send posted through mlx5_post_send first */
	if (c->qp_type == IBV_QPT_RC && c->sq_wqe_cnt >= 4 &&
	    (c->cqe_size == 64 || edge) && chance(10)) {
		unsigned total = 0;

		c->prepost = 1;
		c->prepost_cur_post = chance(30) ? c->sq_wqe_cnt - 1 - below(2) : below(1u << 16);
		/* sq.head = cur_post; sq.tail a little behind (no overflow) */
		c->sq_tail = c->prepost_cur_post - below(3);
		r = below(3);
		c->pp_opcode = wr_names[r].op;
		c->pp_wr_id = rnd();
		if (c->pp_opcode == IBV_WR_RDMA_READ) {
			/* SCATTER_32: at most 32 bytes in all */
			c->pp_nsge = 1 + below(3);
			for (i = 0; i < (unsigned)c->pp_nsge; i++) {
				unsigned room = 32 - total - (c->pp_nsge - 1 - i);

				c->pp_sge[i].length = edge ? 1 + below(24) :
					i == (unsigned)c->pp_nsge - 1 && chance(50) ? room :
					1 + below(room < 16 ? room : 16);
				total += c->pp_sge[i].length;
			}
		} else {
			/* the 8-byte atomic result; shorter SGEs give
			 * LOC_LEN_ERR (copy_to_scat, qp.c) */
			c->pp_nsge = 1;
			c->pp_sge[0].length = chance(85) ? 8 : edge ? 1 + below(16) : 1 + below(8);
		}
		for (i = 0; i < (unsigned)c->pp_nsge; i++) {
			c->pp_sge[i].addr = SGE_REGION + 0x1000 + i * 0x40 + below(8);
			c->pp_sge[i].lkey = (uint32_t)rnd();
			if (c->pp_sge[i].lkey == MLX5_INVALID_LKEY)
				c->pp_sge[i].lkey++;
		}
	}

	/* CQEs: nvalid software-owned ones from ci on, then maybe a stale
	 * (previous lap) or INVALID one; every other slot stays INVALID. */
	r = below(100);
	nvalid = r < 8 ? 0 : r < 60 ? 1 + below(2) : 3 + below(6);
	exotic = chance(6);
	if (nvalid > c->cq_ncqe)
		nvalid = c->cq_ncqe;
	if (nvalid > MAX_CQES - 1)
		nvalid = MAX_CQES - 1;
	for (i = 0; i < nvalid; i++) {
		uint8_t op = cqe_opcode(exotic);
		uint8_t *b = c->cqe[i].b;

		c->cqe[i].slot = (ci + i) & (c->cq_ncqe - 1);
		random_cqe(c, b, op, ci + i, 0);
		/* in a scatter case only the posted WR's CQE scatters: another
		 * CQE naming that WQE with a non-READ/atomic opcode would make
		 * libmlx5 (cq.c, ibv_poll_cq path) copy wc->byte_len bytes,
		 * a field it never wrote for that opcode */
		if (c->prepost)
			b[63] &= ~(MLX5_INLINE_SCATTER_32 | MLX5_INLINE_SCATTER_64);
		if (i == 0 && c->prepost) {
			/* the CQE of the posted WR: REQ, its send opcode
			 * (mostly), its WQE counter, SCATTER_32 */
			static const uint8_t ops[] = { 0x10, 0x12, 0x11 };
			unsigned k = !edge || chance(90) ? (unsigned)(c->pp_opcode == IBV_WR_RDMA_READ ? 0 :
					c->pp_opcode == IBV_WR_ATOMIC_FETCH_AND_ADD ? 1 : 2) : below(3);
			unsigned total = 0;

			for (int s = 0; s < c->pp_nsge; s++)
				total += c->pp_sge[s].length;
			b[56] = ops[k];
			put_be16(b + 60, chance(92) ? (uint16_t)c->prepost_cur_post
						    : (uint16_t)rnd());
			r = below(100);
			if (edge)
				put_be32(b + 44, r < 75 ? total : r < 88 ? below(total + 1)
							      : total + 1 + below(8));
			else	/* byte_cnt <= 32; above the SGEs: LOC_LEN_ERR */
				put_be32(b + 44, r < 85 || total >= 32 ? total
							    : total + 1 + below(32 - total));
			b[63] = (uint8_t)(MLX5_CQE_REQ << 4) | (b[63] & 3) | MLX5_INLINE_SCATTER_32;
			b[63] &= ~MLX5_INLINE_SCATTER_64;
		}
	}
	c->ncqe_in = nvalid;
	if (nvalid < c->cq_ncqe) {
		r = below(100);
		if (r < 40) {
			/* stale: the previous lap's owner bit */
			i = c->ncqe_in++;
			c->cqe[i].slot = (ci + nvalid) & (c->cq_ncqe - 1);
			random_cqe(c, c->cqe[i].b, cqe_opcode(exotic), ci + nvalid, 1);
		} else if (r < 55) {
			/* INVALID opcode with this lap's owner bit */
			i = c->ncqe_in++;
			c->cqe[i].slot = (ci + nvalid) & (c->cq_ncqe - 1);
			random_cqe(c, c->cqe[i].b, MLX5_CQE_INVALID, ci + nvalid, 0);
		}
	}
	snprintf(c->name, sizeof(c->name), "s%llu_%05d_%s_%s%s",
		 (unsigned long long)seed, idx,
		 c->api == API_CQ_EX ? (c->cqe_version ? "ex_v1" : "ex_v0")
				     : (c->cqe_version ? "v1" : "v0"),
		 nvalid ? cqe_opcode_tag(c->cqe[0].b[63] >> 4) : "empty",
		 c->prepost ? "_scatter" : "");
}

/* ---- replay: read the inputs of a case file ------------------------------ */

static uint64_t num(const char *s)
{
	char *end;
	uint64_t v = strtoull(s, &end, 0);

	CHECK(end != s && (*end == 0 || *end == '\n'), "bad number '%s'", s);
	return v;
}

static int parse_api(const char *s, enum api *a)
{
	for (int i = 0; i < 3; i++)
		if (!strcmp(s, api_str[i])) {
			*a = i;
			return 0;
		}
	return -1;
}

static void unhex(const char *s, uint8_t *b, size_t n)
{
	CHECK(strlen(s) == 2 * n, "CQE hex of %zu characters, want %zu", strlen(s), 2 * n);
	for (size_t i = 0; i < n; i++) {
		unsigned v;

		CHECK(sscanf(s + 2 * i, "%2x", &v) == 1, "bad hex");
		b[i] = v;
	}
}

static void replay(const char *path)
{
	FILE *f = fopen(path, "r");
	char line[4096];
	struct case_in c;
	int in_case = 0;

	CHECK(f, "cannot open %s", path);
	while (fgets(line, sizeof(line), f)) {
		char *nl = strchr(line, '\n'), *eq;

		if (nl)
			*nl = 0;
		if (line[0] == '#' || !line[0])
			continue;
		if (!strncmp(line, "case ", 5)) {
			memset(&c, 0, sizeof(c));
			CHECK(strlen(line + 5) < sizeof(c.name), "case name too long");
			memcpy(c.name, line + 5, strlen(line + 5) + 1);
			in_case = 1;
			continue;
		}
		CHECK(in_case, "line outside a case: %s", line);
		if (!strcmp(line, "end")) {
			run_and_print(stdout, &c);
			in_case = 0;
			continue;
		}
		if (!strncmp(line, "cqe ", 4)) {
			char hexs[300];
			unsigned slot;

			CHECK(c.ncqe_in < MAX_CQES, "too many CQEs");
			CHECK(sscanf(line + 4, "%u %299s", &slot, hexs) == 2, "bad cqe line");
			c.cqe[c.ncqe_in].slot = slot;
			unhex(hexs, c.cqe[c.ncqe_in].b, 64);
			c.ncqe_in++;
			continue;
		}
		eq = strchr(line, '=');
		CHECK(eq, "bad line: %s", line);
		*eq = 0;
		{
			const char *k = line, *v = eq + 1;

			if (!strncmp(k, "out.", 4) || !strncmp(k, "wc", 2) || !strncmp(k, "ex", 2))
				continue;	/* outputs: recomputed */
			if (!strcmp(k, "note")) snprintf(c.note, sizeof(c.note), "%s", v);
			else if (!strcmp(k, "api")) CHECK(!parse_api(v, &c.api), "api %s", v);
			else if (!strcmp(k, "cqe_version")) c.cqe_version = num(v);
			else if (!strcmp(k, "cq_ncqe")) c.cq_ncqe = num(v);
			else if (!strcmp(k, "cqe_size")) c.cqe_size = num(v);
			else if (!strcmp(k, "cqn")) c.cqn = num(v);
			else if (!strcmp(k, "cons_index_before")) c.cons_index = num(v);
			else if (!strcmp(k, "qp_type")) CHECK(!qp_type_parse(v, &c.qp_type), "qp_type %s", v);
			else if (!strcmp(k, "qpn")) c.qpn = num(v);
			else if (!strcmp(k, "qp_uidx")) c.uidx = num(v);
			else if (!strcmp(k, "qp_cap_cache")) c.cap_cache = num(v);
			else if (!strcmp(k, "sq_wqe_cnt")) c.sq_wqe_cnt = num(v);
			else if (!strcmp(k, "sq_wrid_base")) c.sq_wrid_base = num(v);
			else if (!strcmp(k, "sq_wqe_head_base")) c.sq_wqe_head_base = num(v);
			else if (!strcmp(k, "sq_tail_before")) c.sq_tail = num(v);
			else if (!strcmp(k, "rq_wqe_cnt")) c.rq_wqe_cnt = num(v);
			else if (!strcmp(k, "rq_wrid_base")) c.rq_wrid_base = num(v);
			else if (!strcmp(k, "rq_tail_before")) c.rq_tail = num(v);
			else if (!strcmp(k, "ne")) c.ne = num(v);
			else if (!strcmp(k, "ncqe_in")) ;	/* counted from the cqe lines */
			else if (!strcmp(k, "prepost_send_nwr")) {
				CHECK(num(v) == 1, "prepost of %s WRs", v);
				c.prepost = 1;
			} else if (!strcmp(k, "prepost_send_start_cur_post")) c.prepost_cur_post = num(v);
			else if (!strcmp(k, "prepost_send0.opcode")) {
				size_t i;

				for (i = 0; i < sizeof(wr_names) / sizeof(wr_names[0]); i++)
					if (!strcmp(v, wr_names[i].name))
						break;
				CHECK(i < sizeof(wr_names) / sizeof(wr_names[0]), "opcode %s", v);
				c.pp_opcode = wr_names[i].op;
			} else if (!strcmp(k, "prepost_send0.wr_id")) c.pp_wr_id = num(v);
			else if (!strcmp(k, "prepost_send0.num_sge")) c.pp_nsge = num(v);
			else if (!strncmp(k, "prepost_send0.sge", 17)) {
				int j = atoi(k + 17);
				unsigned long long a;
				unsigned l, lk;

				CHECK(j >= 0 && j < MAX_SGE, "sge index");
				CHECK(sscanf(v, "addr:0x%llx,length:%u,lkey:0x%x", &a, &l, &lk) == 3,
				      "bad sge %s", v);
				c.pp_sge[j].addr = a;
				c.pp_sge[j].length = l;
				c.pp_sge[j].lkey = lk;
			} else
				die("unknown input key %s", k);
		}
	}
	fclose(f);
}

int main(int argc, char **argv)
{
	void *region;

	/* The SGE region at a fixed address (see SGE_REGION). */
	region = mmap((void *)SGE_REGION, SGE_REGION_LEN, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	CHECK(region == (void *)SGE_REGION, "cannot map the SGE region at %#lx",
	      (unsigned long)SGE_REGION);

	if (argc == 3 && !strcmp(argv[1], "--replay")) {
		replay(argv[2]);
		return 0;
	}
	if (argc == 4 && !strcmp(argv[3], "--edge"))
		edge = 1;
	if (argc == 3 || (argc == 4 && edge)) {
		long n = strtol(argv[1], NULL, 0);
		uint64_t seed = strtoull(argv[2], NULL, 0);
		struct case_in c;

		rng_state = seed;
		for (long i = 0; i < n; i++) {
			random_case(&c, seed, (int)i);
			run_and_print(stdout, &c);
		}
		return 0;
	}
	fprintf(stderr, "usage: cqe_gen N SEED [--edge] | cqe_gen --replay FILE\n");
	return 1;
}
