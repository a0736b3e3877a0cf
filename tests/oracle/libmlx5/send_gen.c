/*
 * send_gen.c - a random differential oracle for mlx5 send and receive posts,
 * driven by libmlx5's own object code.
 *
 * It links Debian 12's /usr/lib/x86_64-linux-gnu/libmlx5.a (rdma-core
 * 44.0-2; every global symbol carries the prefix "rdmacore44_0_") and calls
 * the real provider functions on queues fabricated in ordinary memory:
 *   - rdmacore44_0_mlx5_post_send (what ibv_post_send calls),
 *   - the ibv_qp_ex wr_* ops that rdmacore44_0_mlx5_qp_fill_wr_pfns installs
 *     (what ibv_wr_start / ibv_wr_* / ibv_wr_complete call),
 *   - rdmacore44_0_mlx5_post_recv (what ibv_post_recv calls).
 * Nothing of rdma-core is compiled here: its private headers are included so
 * that the structs have libmlx5's own layout (see build.sh).
 *
 * Usage:
 *   send_gen wqe N SEED        N random send cases, wqe-cases.txt format
 *   send_gen rq N SEED         N random receive cases, rq-cases.txt format
 *   send_gen replay-wqe FILE   re-run the inputs of every case of FILE (any
 *   send_gen replay-rq FILE    out.* / wqebb / rqwqe / mask lines are
 *                              ignored) and print the cases with libmlx5's
 *                              outputs, for a byte-for-byte diff with FILE
 *
 * Formats (see the headers of specs/golden/libmlx5/wqe-cases.txt and
 * rq-cases.txt): every case runs twice from identical fresh state with
 * different fills (SQ/RQ a5 then 5a, UAR 3c then c3, doorbell record a5 then
 * 5a); a byte is "written" if it differs from the fill in either run. The
 * values shown are from the first (a5) run. In the UAR, a written byte whose
 * value is a5 in the first run and 5a in the second was copied by BlueFlame
 * from an SQ byte nobody wrote: mask 's'.
 *
 * Fabrication: the objects libmlx5's post code reads after ibv_create_qp, as
 * benches/libmlx5/harness.c builds them (that harness was read and its
 * approach followed: calloc'd mlx5_context / mlx5_qp / mlx5_cq, need_lock = 0
 * everywhere as under MLX5_SINGLE_THREADED=1, struct mlx5_bf over a 4 KiB
 * page of ordinary memory). The code below is written anew for this
 * program; nothing is copied from harness.c verbatim.
 *
 * Buffers a work request points at (inline data, Ethernet frames) live at
 * the addresses the case names: a fixed anonymous mapping at DATA_BASE, so
 * that the addresses libmlx5 writes into data segments are the ones printed.
 *
 * Each case runs in a forked child: libmlx5 dereferences stale pointers in
 * some error paths of the wr_* API (e.g. a setter after a builder that
 * failed before setting qp->cur_data, which is NULL in a fresh QP). A case
 * whose child dies is not printed; the count goes to stderr.
 */
#define _GNU_SOURCE
#include <config.h>

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include "mlx5.h"
#include "wqe.h"

/* ---- libmlx5.a entry points ------------------------------------------- */
int rdmacore44_0_mlx5_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr,
				struct ibv_send_wr **bad_wr);
int rdmacore44_0_mlx5_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr,
				struct ibv_recv_wr **bad_wr);
int rdmacore44_0_mlx5_qp_fill_wr_pfns(struct mlx5_qp *mqp,
				      const struct ibv_qp_init_attr_ex *attr,
				      const struct mlx5dv_qp_init_attr *mlx5_attr);

/* ---- limits of this program ------------------------------------------ */
#define MAX_WR     48
#define MAX_SGE    24
#define MAX_HDR    256
#define UAR_SIZE   4096
#define DATA_BASE  0x0000000200000000ull	/* fixed mapping for WR buffers */
#define DATA_SIZE  (64ull << 20)
#define ADDR0      0x0000000200001000ull	/* first buffer address */

/* libmlx5 v44 (qp.c mlx5_ib_opcode[]) knows 12 opcodes; 12.. are EINVAL */
#define N_IB_OPCODES 12

static const char *const opcode_names[N_IB_OPCODES] = {
	[IBV_WR_RDMA_WRITE] = "RDMA_WRITE",
	[IBV_WR_RDMA_WRITE_WITH_IMM] = "RDMA_WRITE_WITH_IMM",
	[IBV_WR_SEND] = "SEND",
	[IBV_WR_SEND_WITH_IMM] = "SEND_WITH_IMM",
	[IBV_WR_RDMA_READ] = "RDMA_READ",
	[IBV_WR_ATOMIC_CMP_AND_SWP] = "ATOMIC_CMP_AND_SWP",
	[IBV_WR_ATOMIC_FETCH_AND_ADD] = "ATOMIC_FETCH_AND_ADD",
	[IBV_WR_LOCAL_INV] = "LOCAL_INV",
	[IBV_WR_BIND_MW] = "BIND_MW",
	[IBV_WR_SEND_WITH_INV] = "SEND_WITH_INV",
	[IBV_WR_TSO] = "TSO",
	[IBV_WR_DRIVER1] = "DRIVER1",
};

static const char *const state_names[] = {
	"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR",	/* enum ibv_qp_state */
};

/* ---- case inputs -------------------------------------------------------- */
struct sge_in {
	uint64_t addr;
	uint32_t length, lkey;
	int has_data;		/* data printed / given (bytes at addr) */
	uint8_t *data;		/* length bytes when has_data */
};

struct wr_in {
	int opcode;		/* opcode_num */
	uint64_t wr_id;
	unsigned flags;		/* send_flags_num */
	int has_imm, has_inv, has_rdma, has_atomic, has_ud, has_tso, has_bind;
	uint32_t imm_host, inv_rkey, rkey;
	uint64_t raddr, compare_add, swap;
	uint32_t rqpn, qkey;
	uint8_t av[48];
	uint16_t mss, hdr_sz;
	uint8_t hdr[MAX_HDR];
	/* BIND_MW (not in the sample's key set; extension, see SEND.md) */
	uint32_t mw_rkey, bind_rkey, bind_lkey, bind_access;
	uint64_t bind_addr, bind_length;
	char setter[32];	/* wr_api_setter */
	int has_setter;
	int ud_addr_first, has_ud_first;
	int num_sge;
	struct sge_in sge[MAX_SGE];
};

struct case_in {
	char name[200];
	char note[300];
	int is_rq;
	int wr_api;
	char qp_type[16];
	uint32_t qpn;
	/* send */
	unsigned sq_wqe_cnt, sq_max_post, sq_max_gs, max_inline_data, sq_sig_all;
	unsigned eth_min_inline, qp_cap_cache, max_tso, max_tso_header, atomics;
	uint32_t start_cur_post, start_head, start_tail;
	unsigned start_fm_cache, bf_reg_offset, bf_buf_size, bf_offset_before;
	unsigned bf_uuarn, prefer_bf, shut_up_bf;
	/* receive */
	int qp_state;
	unsigned rq_wqe_cnt, rq_wqe_shift, rq_max_gs, rq_max_post;
	uint32_t start_rq_head, start_rq_tail;
	int nwr;
	struct wr_in wr[MAX_WR];
};

/* ---- small output buffer (a case is printed only if its child lives) --- */
static char *obuf;
static size_t olen, ocap;

static void out(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void out(const char *fmt, ...)
{
	va_list ap;
	int n;

	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(obuf + olen, ocap - olen, fmt, ap);
		va_end(ap);
		if (n >= 0 && olen + n < ocap)
			break;
		ocap = ocap * 2 + n + 1024;
		obuf = realloc(obuf, ocap);
		if (!obuf) {
			perror("realloc");
			exit(1);
		}
	}
	olen += n;
}

static void out_hex(const uint8_t *p, size_t n)
{
	static const char d[] = "0123456789abcdef";
	size_t i;

	for (i = 0; i < n; i++)
		out("%c%c", d[p[i] >> 4], d[p[i] & 15]);
}

static void die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "send_gen: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(2);
}

static void *zalloc(size_t align_to, size_t size)
{
	void *p;

	size = (size + align_to - 1) / align_to * align_to;
	p = aligned_alloc(align_to, size ? size : align_to);
	if (!p)
		die("out of memory");
	memset(p, 0, size ? size : align_to);
	return p;
}

/* ---- fabricated objects ------------------------------------------------- */
struct fab {
	struct mlx5_context *ctx;
	struct mlx5_qp *qp;
	struct mlx5_cq *cq;
	struct mlx5_bf *bf;
	uint8_t *sq, *rq, *uar;
	__be32 *dbrec;		/* [0] RQ (MLX5_RCV_DBR), [1] SQ (MLX5_SND_DBR) */
	struct mlx5_ah *ah[MAX_WR];
	struct ibv_mw *mw[MAX_WR];
	struct ibv_mr *mr[MAX_WR];
	uint8_t *hdr[MAX_WR];
};

static enum ibv_qp_type qp_type_of(const char *s)
{
	if (!strcmp(s, "RC"))
		return IBV_QPT_RC;
	if (!strcmp(s, "UC"))
		return IBV_QPT_UC;
	if (!strcmp(s, "UD"))
		return IBV_QPT_UD;
	if (!strcmp(s, "RAW_PACKET"))
		return IBV_QPT_RAW_PACKET;
	if (!strcmp(s, "XRC_SEND"))
		return IBV_QPT_XRC_SEND;
	die("qp_type %s not supported", s);
}

/* The context, CQ and QP shell both queues need. */
static void fabricate_common(struct fab *f, const struct case_in *c)
{
	struct ibv_qp *ibqp;

	f->ctx = zalloc(4096, sizeof(*f->ctx));
	f->ctx->dbg_fp = stderr;
	f->ctx->cache_line_size = 64;
	f->qp = zalloc(64, sizeof(*f->qp));
	f->cq = zalloc(64, sizeof(*f->cq));
	/* mlx5_wq_overflow takes the CQ lock when the queue looks full */
	f->cq->lock.need_lock = 0;
	f->cq->verbs_cq.cq.context = &f->ctx->ibv_ctx.context;

	ibqp = &f->qp->verbs_qp.qp;
	ibqp->context = &f->ctx->ibv_ctx.context;
	ibqp->qp_num = c->qpn;
	ibqp->qp_type = qp_type_of(c->qp_type);
	ibqp->send_cq = &f->cq->verbs_cq.cq;
	ibqp->recv_cq = &f->cq->verbs_cq.cq;
	f->qp->ibv_qp = ibqp;
	f->qp->rsc.type = MLX5_RSC_TYPE_QP;
	f->qp->rsc.rsn = c->qpn;
	f->qp->flags = 0;		/* no MLX5_QP_FLAGS_USE_UNDERLAY */
	f->qp->wq_sig = 0;		/* MLX5_QP_SIGNATURE unset */
	f->qp->sq.lock.need_lock = 0;
	f->qp->rq.lock.need_lock = 0;
	f->dbrec = zalloc(64, 64);
	f->qp->db = f->dbrec;
}

/* A send queue in state RTS with the case's sizes, fills sq_fill/uar_fill/db_fill. */
static void fabricate_sq(struct fab *f, const struct case_in *c, uint8_t sq_fill,
			 uint8_t uar_fill, uint8_t db_fill)
{
	struct mlx5_qp *qp;
	int i;

	fabricate_common(f, c);
	qp = f->qp;
	f->qp->verbs_qp.qp.state = IBV_QPS_RTS;
	/* MLX5_POST_SEND_PREFER_BF (default 1) and MLX5_SHUT_UP_BF (default 0) */
	f->ctx->prefer_bf = c->prefer_bf;
	f->ctx->shut_up_bf = c->shut_up_bf;
	/* from the kernel's alloc_ucontext response (mlx5_init_context) */
	f->ctx->eth_min_inline_size = c->eth_min_inline;

	f->sq = zalloc(4096, (size_t)c->sq_wqe_cnt * MLX5_SEND_WQE_BB);
	memset(f->sq, sq_fill, (size_t)c->sq_wqe_cnt * MLX5_SEND_WQE_BB);
	qp->sq_start = f->sq;
	qp->sq.qend = f->sq + (size_t)c->sq_wqe_cnt * MLX5_SEND_WQE_BB;
	qp->sq.wqe_cnt = c->sq_wqe_cnt;
	qp->sq.wqe_shift = 6;
	qp->sq.max_post = c->sq_max_post;
	qp->sq.max_gs = c->sq_max_gs;
	/* verbs.c set_qp_operational_state: RTS sets it to max_gs */
	qp->sq.qp_state_max_gs = c->sq_max_gs;
	qp->sq.cur_post = c->start_cur_post;
	qp->sq.head = c->start_head;
	qp->sq.tail = c->start_tail;
	qp->sq.wrid = zalloc(64, c->sq_wqe_cnt * sizeof(uint64_t));
	qp->sq.wqe_head = zalloc(64, c->sq_wqe_cnt * sizeof(unsigned));
	qp->sq.wr_data = zalloc(64, c->sq_wqe_cnt * sizeof(uint32_t));
	qp->max_inline_data = c->max_inline_data;
	qp->max_tso = c->max_tso;
	qp->max_tso_header = c->max_tso_header;
	qp->qp_cap_cache = c->qp_cap_cache;
	qp->atomics_enabled = c->atomics;
	qp->fm_cache = c->start_fm_cache;
	/* create_qp: sq_signal_bits = sq_sig_all ? MLX5_WQE_CTRL_CQ_UPDATE : 0 */
	qp->sq_signal_bits = c->sq_sig_all ? MLX5_WQE_CTRL_CQ_UPDATE : 0;
	memset(f->dbrec, db_fill, 8);

	f->uar = zalloc(4096, UAR_SIZE);
	memset(f->uar, uar_fill, UAR_SIZE);
	f->bf = zalloc(64, sizeof(*f->bf));
	f->bf->reg = f->uar + c->bf_reg_offset;
	f->bf->need_lock = 0;
	f->bf->lock.need_lock = 0;
	f->bf->offset = c->bf_offset_before;
	f->bf->buf_size = c->bf_buf_size;
	f->bf->uuarn = c->bf_uuarn;
	qp->bf = f->bf;

	for (i = 0; i < c->nwr; i++) {
		const struct wr_in *w = &c->wr[i];

		if (w->has_ud) {
			/* struct mlx5_ah as mlx5_create_ah leaves it; its av is
			 * the 48 bytes of the case (ud.ah_av) */
			f->ah[i] = zalloc(64, sizeof(*f->ah[i]));
			f->ah[i]->ibv_ah.context = &f->ctx->ibv_ctx.context;
			memcpy(&f->ah[i]->av, w->av, sizeof(f->ah[i]->av));
		}
		if (w->has_tso) {
			f->hdr[i] = zalloc(64, MAX_HDR);
			memcpy(f->hdr[i], w->hdr, w->hdr_sz);
		}
		if (w->has_bind) {
			f->mw[i] = zalloc(64, sizeof(*f->mw[i]));
			f->mw[i]->rkey = w->mw_rkey;
			f->mw[i]->type = IBV_MW_TYPE_2;
			f->mr[i] = zalloc(64, sizeof(*f->mr[i]));
			f->mr[i]->lkey = w->bind_lkey;
		}
	}
}

/* A receive queue in the case's state, fills rq_fill/db_fill. */
static void fabricate_rq(struct fab *f, const struct case_in *c, uint8_t rq_fill,
			 uint8_t db_fill)
{
	struct mlx5_qp *qp;
	size_t bytes = (size_t)c->rq_wqe_cnt << c->rq_wqe_shift;

	fabricate_common(f, c);
	qp = f->qp;
	qp->verbs_qp.qp.state = c->qp_state;
	f->rq = zalloc(4096, bytes);
	memset(f->rq, rq_fill, bytes);
	qp->buf.buf = f->rq;
	qp->rq.offset = 0;
	qp->rq.wqe_cnt = c->rq_wqe_cnt;
	qp->rq.wqe_shift = c->rq_wqe_shift;
	qp->rq.max_gs = c->rq_max_gs;
	qp->rq.max_post = c->rq_max_post;
	qp->rq.head = c->start_rq_head;
	qp->rq.tail = c->start_rq_tail;
	qp->rq.wrid = zalloc(64, c->rq_wqe_cnt * sizeof(uint64_t));
	/* verbs.c set_qp_operational_state: -1 in RESET, max_gs from INIT on
	 * (a QP reaches RTR..ERR only through INIT) */
	qp->rq.qp_state_max_gs = c->qp_state == IBV_QPS_RESET ? -1 : (int)c->rq_max_gs;
	memset(f->dbrec, db_fill, 8);
}

/* ---- WR buffers at their addresses ---------------------------------------- */
static uint8_t *data_map;

static void map_data(void)
{
	data_map = mmap((void *)DATA_BASE, DATA_SIZE, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE | MAP_NORESERVE,
			-1, 0);
	if (data_map != (void *)DATA_BASE)
		die("cannot map the WR buffers at %#llx", DATA_BASE);
}

static int in_map(uint64_t addr, uint64_t len)
{
	return addr >= DATA_BASE && addr + len <= DATA_BASE + DATA_SIZE;
}

/* Put every SGE's bytes at its address (a pattern where the case gives none:
 * libmlx5 does not read the buffer of a data segment). */
static void place_data(const struct case_in *c)
{
	int i, j, pass;

	/* first the pattern (byte k of a buffer = k * 7 + 0x4c) under every SGE
	 * without data, then the data the case gives, which wins if a case
	 * file has buffers that overlap */
	for (pass = 0; pass < 2; pass++)
		for (i = 0; i < c->nwr; i++)
			for (j = 0; j < c->wr[i].num_sge; j++) {
				const struct sge_in *s = &c->wr[i].sge[j];
				uint32_t k;

				if (s->has_data && s->length && pass == 1) {
					if (!in_map(s->addr, s->length))
						die("data of wr%d.sge%d outside the mapping", i, j);
					memcpy((void *)(uintptr_t)s->addr, s->data, s->length);
				} else if (!s->has_data && pass == 0 &&
					   in_map(s->addr, s->length) && s->length <= (1u << 20)) {
					for (k = 0; k < s->length; k++)
						((uint8_t *)(uintptr_t)s->addr)[k] =
							(uint8_t)(k * 7 + 0x4c);
				}
			}
}

/* ---- the send posts --------------------------------------------------------- */
struct send_result {
	int ret;
	long bad_wr;
};

static struct send_result run_post_send(struct fab *f, const struct case_in *c)
{
	static struct ibv_send_wr wrs[MAX_WR];
	static struct ibv_sge sges[MAX_WR][MAX_SGE];
	struct ibv_send_wr *bad = NULL;
	struct send_result r = { 0, -1 };
	int i, j;

	memset(wrs, 0, sizeof(wrs));
	for (i = 0; i < c->nwr; i++) {
		const struct wr_in *w = &c->wr[i];
		struct ibv_send_wr *s = &wrs[i];

		s->wr_id = w->wr_id;
		s->next = i + 1 < c->nwr ? &wrs[i + 1] : NULL;
		s->opcode = w->opcode;
		s->send_flags = w->flags;
		s->num_sge = w->num_sge;
		s->sg_list = sges[i];
		for (j = 0; j < w->num_sge; j++) {
			sges[i][j].addr = w->sge[j].addr;
			sges[i][j].length = w->sge[j].length;
			sges[i][j].lkey = w->sge[j].lkey;
		}
		if (w->has_imm)
			s->imm_data = htobe32(w->imm_host);
		if (w->has_inv)
			s->invalidate_rkey = w->inv_rkey;	/* union with imm_data */
		if (w->has_atomic) {
			s->wr.atomic.remote_addr = w->raddr;
			s->wr.atomic.rkey = w->rkey;
			s->wr.atomic.compare_add = w->compare_add;
			s->wr.atomic.swap = w->swap;
		} else if (w->has_rdma) {
			s->wr.rdma.remote_addr = w->raddr;
			s->wr.rdma.rkey = w->rkey;
		}
		if (w->has_ud) {
			s->wr.ud.ah = &f->ah[i]->ibv_ah;
			s->wr.ud.remote_qpn = w->rqpn;
			s->wr.ud.remote_qkey = w->qkey;
		}
		if (w->has_tso) {
			s->tso.hdr = f->hdr[i];
			s->tso.hdr_sz = w->hdr_sz;
			s->tso.mss = w->mss;
		}
		if (w->has_bind) {
			s->bind_mw.mw = f->mw[i];
			s->bind_mw.rkey = w->bind_rkey;
			s->bind_mw.bind_info.mr = f->mr[i];
			s->bind_mw.bind_info.addr = w->bind_addr;
			s->bind_mw.bind_info.length = w->bind_length;
			s->bind_mw.bind_info.mw_access_flags = w->bind_access;
		}
	}
	r.ret = rdmacore44_0_mlx5_post_send(&f->qp->verbs_qp.qp, c->nwr ? wrs : NULL, &bad);
	if (r.ret)
		r.bad_wr = bad ? bad - wrs : -2;
	return r;
}

static uint64_t send_ops_of(const struct case_in *c)
{
	switch (qp_type_of(c->qp_type)) {
	case IBV_QPT_RC:
		return IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |
		       IBV_QP_EX_WITH_SEND_WITH_INV | IBV_QP_EX_WITH_RDMA_WRITE |
		       IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ |
		       IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_BIND_MW |
		       (c->atomics ? IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
				     IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD : 0);
	case IBV_QPT_UC:
		return IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |
		       IBV_QP_EX_WITH_SEND_WITH_INV | IBV_QP_EX_WITH_RDMA_WRITE |
		       IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_LOCAL_INV |
		       IBV_QP_EX_WITH_BIND_MW;
	case IBV_QPT_UD:
		return IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM;
	case IBV_QPT_RAW_PACKET:
		return IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_TSO;
	default:
		die("wr_api on %s not supported", c->qp_type);
	}
}

static void wr_api_data(struct ibv_qp_ex *x, const struct wr_in *w)
{
	struct ibv_sge list[MAX_SGE];
	struct ibv_data_buf bufs[MAX_SGE];
	int j;

	for (j = 0; j < w->num_sge; j++) {
		list[j].addr = w->sge[j].addr;
		list[j].length = w->sge[j].length;
		list[j].lkey = w->sge[j].lkey;
		bufs[j].addr = (void *)(uintptr_t)w->sge[j].addr;
		bufs[j].length = w->sge[j].length;
	}
	if (!strcmp(w->setter, "set_sge"))
		ibv_wr_set_sge(x, list[0].lkey, list[0].addr, list[0].length);
	else if (!strcmp(w->setter, "set_sge_list"))
		ibv_wr_set_sge_list(x, w->num_sge, list);
	else if (!strcmp(w->setter, "set_inline_data"))
		ibv_wr_set_inline_data(x, bufs[0].addr, bufs[0].length);
	else if (!strcmp(w->setter, "set_inline_data_list"))
		ibv_wr_set_inline_data_list(x, w->num_sge, bufs);
	else if (strcmp(w->setter, "none"))
		die("unknown wr_api_setter %s", w->setter);
}

/* ibv_wr_start, one builder + setters per WR, ibv_wr_complete. */
static struct send_result run_wr_api(struct fab *f, const struct case_in *c)
{
	struct ibv_qp_init_attr_ex attr = {};
	struct ibv_qp_ex *x = &f->qp->verbs_qp.qp_ex;
	struct send_result r = { 0, -1 };
	int i, rc;

	attr.qp_type = qp_type_of(c->qp_type);
	attr.comp_mask = IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	attr.send_ops_flags = send_ops_of(c);
	rc = rdmacore44_0_mlx5_qp_fill_wr_pfns(f->qp, &attr, NULL);
	if (rc)
		die("mlx5_qp_fill_wr_pfns returned %d", rc);

	ibv_wr_start(x);
	for (i = 0; i < c->nwr; i++) {
		const struct wr_in *w = &c->wr[i];
		int ud = w->has_ud;

		x->wr_id = w->wr_id;
		x->wr_flags = w->flags;
		switch (w->opcode) {
		case IBV_WR_SEND:
			ibv_wr_send(x);
			break;
		case IBV_WR_SEND_WITH_IMM:
			ibv_wr_send_imm(x, htobe32(w->imm_host));
			break;
		case IBV_WR_SEND_WITH_INV:
			ibv_wr_send_inv(x, w->inv_rkey);
			break;
		case IBV_WR_RDMA_WRITE:
			ibv_wr_rdma_write(x, w->rkey, w->raddr);
			break;
		case IBV_WR_RDMA_WRITE_WITH_IMM:
			ibv_wr_rdma_write_imm(x, w->rkey, w->raddr, htobe32(w->imm_host));
			break;
		case IBV_WR_RDMA_READ:
			ibv_wr_rdma_read(x, w->rkey, w->raddr);
			break;
		case IBV_WR_ATOMIC_CMP_AND_SWP:
			ibv_wr_atomic_cmp_swp(x, w->rkey, w->raddr, w->compare_add, w->swap);
			break;
		case IBV_WR_ATOMIC_FETCH_AND_ADD:
			ibv_wr_atomic_fetch_add(x, w->rkey, w->raddr, w->compare_add);
			break;
		case IBV_WR_LOCAL_INV:
			ibv_wr_local_inv(x, w->inv_rkey);
			break;
		case IBV_WR_BIND_MW: {
			struct ibv_mw_bind_info bi = {
				.mr = f->mr[i], .addr = w->bind_addr,
				.length = w->bind_length, .mw_access_flags = w->bind_access,
			};

			ibv_wr_bind_mw(x, f->mw[i], w->bind_rkey, &bi);
			break;
		}
		case IBV_WR_TSO:
			ibv_wr_send_tso(x, f->hdr[i], w->hdr_sz, w->mss);
			break;
		default:
			die("wr_api: opcode %d has no builder", w->opcode);
		}
		if (ud && w->ud_addr_first)
			ibv_wr_set_ud_addr(x, &f->ah[i]->ibv_ah, w->rqpn, w->qkey);
		wr_api_data(x, w);
		if (ud && !w->ud_addr_first)
			ibv_wr_set_ud_addr(x, &f->ah[i]->ibv_ah, w->rqpn, w->qkey);
	}
	r.ret = ibv_wr_complete(x);
	return r;	/* ibv_wr_complete names no work request: bad_wr -1 */
}

/* ---- one send case: two runs, outputs ------------------------------------ */
struct send_run {
	struct fab f;
	struct send_result r;
};

static void send_run(struct send_run *s, const struct case_in *c, int second)
{
	memset(s, 0, sizeof(*s));
	fabricate_sq(&s->f, c, second ? 0x5a : 0xa5, second ? 0xc3 : 0x3c,
		     second ? 0x5a : 0xa5);
	place_data(c);
	s->r = c->wr_api ? run_wr_api(&s->f, c) : run_post_send(&s->f, c);
}

static void print_flags(unsigned f)
{
	static const struct { unsigned bit; const char *name; } names[] = {
		{ IBV_SEND_FENCE, "FENCE" }, { IBV_SEND_SIGNALED, "SIGNALED" },
		{ IBV_SEND_SOLICITED, "SOLICITED" }, { IBV_SEND_INLINE, "INLINE" },
		{ IBV_SEND_IP_CSUM, "IP_CSUM" },
	};
	unsigned i, n = 0;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (f & names[i].bit)
			out("%s%s", n++ ? "|" : "", names[i].name);
	if (f & ~0x1fu)
		out("%s0x%x", n++ ? "|" : "", f & ~0x1fu);
	if (!n)
		out("NONE");
}

static void print_send_inputs(const struct case_in *c)
{
	int i, j;

	out("case %s\n", c->name);
	if (c->note[0])
		out("note=%s\n", c->note);
	out("api=%s\nqp_type=%s\nqpn=0x%06x\n", c->wr_api ? "wr_api" : "ibv_post_send",
	    c->qp_type, c->qpn);
	out("sq_wqe_cnt=%u\nsq_max_post=%u\nsq_max_gs=%u\nmax_inline_data=%u\nsq_sig_all=%u\n",
	    c->sq_wqe_cnt, c->sq_max_post, c->sq_max_gs, c->max_inline_data, c->sq_sig_all);
	out("eth_min_inline=%u\nqp_cap_cache=0x%x\nmax_tso=%u\nmax_tso_header=%u\natomics_enabled=%u\n",
	    c->eth_min_inline, c->qp_cap_cache, c->max_tso, c->max_tso_header, c->atomics);
	out("start_cur_post=%u\nstart_head=%u\nstart_tail=%u\nstart_fm_cache=0x%02x\n",
	    c->start_cur_post, c->start_head, c->start_tail, c->start_fm_cache);
	out("bf_reg_offset=0x%x\nbf_buf_size=%u\nbf_offset_before=%u\nbf_uuarn=%u\nprefer_bf=%u\nshut_up_bf=%u\n",
	    c->bf_reg_offset, c->bf_buf_size, c->bf_offset_before, c->bf_uuarn,
	    c->prefer_bf, c->shut_up_bf);
	out("nwr=%d\n", c->nwr);
	for (i = 0; i < c->nwr; i++) {
		const struct wr_in *w = &c->wr[i];

		out("wr%d.opcode=%s\n", i, w->opcode >= 0 && w->opcode < N_IB_OPCODES ?
		    opcode_names[w->opcode] : "INVALID");
		out("wr%d.opcode_num=%d\n", i, w->opcode);
		out("wr%d.wr_id=0x%016llx\n", i, (unsigned long long)w->wr_id);
		out("wr%d.send_flags=", i);
		print_flags(w->flags);
		out("\nwr%d.send_flags_num=0x%x\n", i, w->flags);
		if (w->has_imm)
			out("wr%d.imm_data_host=0x%08x\n", i, w->imm_host);
		if (w->has_inv)
			out("wr%d.invalidate_rkey=0x%08x\n", i, w->inv_rkey);
		if (w->has_rdma || w->has_atomic)
			out("wr%d.remote_addr=0x%016llx\nwr%d.rkey=0x%08x\n", i,
			    (unsigned long long)w->raddr, i, w->rkey);
		if (w->has_atomic)
			out("wr%d.compare_add=0x%016llx\nwr%d.swap=0x%016llx\n", i,
			    (unsigned long long)w->compare_add, i, (unsigned long long)w->swap);
		if (w->has_ud) {
			out("wr%d.ud.remote_qpn=0x%06x\nwr%d.ud.remote_qkey=0x%08x\nwr%d.ud.ah_av=",
			    i, w->rqpn, i, w->qkey, i);
			out_hex(w->av, 48);
			out("\n");
		}
		if (w->has_tso) {
			out("wr%d.tso.mss=%u\nwr%d.tso.hdr_sz=%u\nwr%d.tso.hdr=", i, w->mss, i,
			    w->hdr_sz, i);
			out_hex(w->hdr, w->hdr_sz);
			out("\n");
		}
		if (w->has_bind)
			out("wr%d.bind_mw.mw_rkey=0x%08x\nwr%d.bind_mw.rkey=0x%08x\n"
			    "wr%d.bind_mw.mr_lkey=0x%08x\nwr%d.bind_mw.addr=0x%016llx\n"
			    "wr%d.bind_mw.length=%llu\nwr%d.bind_mw.access=0x%x\n",
			    i, w->mw_rkey, i, w->bind_rkey, i, w->bind_lkey, i,
			    (unsigned long long)w->bind_addr, i,
			    (unsigned long long)w->bind_length, i, w->bind_access);
		if (w->has_setter)
			out("wr%d.wr_api_setter=%s\n", i, w->setter);
		if (w->has_ud_first)
			out("wr%d.wr_api_ud_addr_first=%d\n", i, w->ud_addr_first);
		out("wr%d.num_sge=%d\n", i, w->num_sge);
		for (j = 0; j < w->num_sge; j++) {
			const struct sge_in *s = &w->sge[j];

			out("wr%d.sge%d.addr=0x%016llx\nwr%d.sge%d.length=%u\nwr%d.sge%d.lkey=0x%08x\n",
			    i, j, (unsigned long long)s->addr, i, j, s->length, i, j, s->lkey);
			if (s->has_data) {
				out("wr%d.sge%d.data=", i, j);
				out_hex(s->data, s->length);
				out("\n");
			}
		}
	}
}

static int written(const uint8_t *a, const uint8_t *b, size_t i, uint8_t fa, uint8_t fb)
{
	return a[i] != fa || b[i] != fb;
}

static void print_mask(const uint8_t *a, const uint8_t *b, size_t from, size_t n,
		       uint8_t fa, uint8_t fb)
{
	size_t i;

	for (i = from; i < from + n; i++)
		out("%c", written(a, b, i, fa, fb) ? 'x' : '.');
}

static void send_case(const struct case_in *c)
{
	static struct send_run A, B;
	struct mlx5_qp *qa;
	unsigned cnt = c->sq_wqe_cnt, k, touched = 0;
	uint32_t at;
	int i, dbw, ulo = -1, uhi = -1;

	send_run(&A, c, 0);
	send_run(&B, c, 1);
	qa = A.f.qp;
	if (A.r.ret != B.r.ret || qa->sq.cur_post != B.f.qp->sq.cur_post)
		die("%s: the two runs differ", c->name);

	print_send_inputs(c);
	out("out.ret=%d\nout.bad_wr=%ld\n", A.r.ret, A.r.bad_wr);
	out("out.sq_cur_post=%u\nout.sq_head=%u\nout.fm_cache=0x%02x\nout.bf_offset_after=%u\n",
	    qa->sq.cur_post, qa->sq.head, qa->fm_cache, A.f.bf->offset);
	/* WQEs posted: walk from start_cur_post by each ctrl segment's DS count */
	for (at = c->start_cur_post; at != qa->sq.cur_post;) {
		unsigned idx = at & (cnt - 1);
		struct mlx5_wqe_ctrl_seg *ctrl = (void *)(A.f.sq + idx * MLX5_SEND_WQE_BB);
		unsigned ds = be32toh(ctrl->qpn_ds) & 0x3f;
		unsigned bbs = (ds * 16 + MLX5_SEND_WQE_BB - 1) / MLX5_SEND_WQE_BB;

		out("out.sq_slot%u=wrid:0x%016llx,wqe_head:%u,wr_data:%u\n", idx,
		    (unsigned long long)qa->sq.wrid[idx], qa->sq.wqe_head[idx],
		    qa->sq.wr_data[idx]);
		if (!bbs)
			die("%s: WQE at %u has DS 0", c->name, at);
		at += bbs;
	}
	/* doorbell record: 8 bytes, RQ at +0, SQ at +4 (MLX5_SND_DBR = 1) */
	dbw = 0;
	for (k = 0; k < 8; k++)
		dbw |= written((uint8_t *)A.f.dbrec, (uint8_t *)B.f.dbrec, k, 0xa5, 0x5a);
	out("out.dbrec_written=%d\nout.dbrec_snd_offset=4\nout.dbrec_bytes=", dbw);
	out_hex((uint8_t *)A.f.dbrec, 8);
	out("\nout.dbrec_mask=");
	print_mask((uint8_t *)A.f.dbrec, (uint8_t *)B.f.dbrec, 0, 8, 0xa5, 0x5a);
	out("\n");
	if (dbw)
		out("out.dbrec_snd_value=0x%08x\n", be32toh(A.f.dbrec[MLX5_SND_DBR]));
	/* UAR page */
	for (k = 0; k < UAR_SIZE; k++)
		if (written(A.f.uar, B.f.uar, k, 0x3c, 0xc3)) {
			if (ulo < 0)
				ulo = k;
			uhi = k;
		}
	if (ulo < 0) {
		out("out.uar_write=none\n");
	} else {
		/* the 8-byte doorbell (mmio_write64_be) or a BlueFlame copy of
		 * align(size * 16, 64) bytes (mlx5_bf_copy) */
		unsigned len = uhi - ulo + 1, stale = 0;

		if (len > 8)
			len = (len + 63) / 64 * 64;
		for (k = ulo; k < ulo + len; k++)
			stale += A.f.uar[k] == 0xa5 && B.f.uar[k] == 0x5a;
		out("out.uar_write=%s\nout.uar_offset=0x%x\nout.uar_len=%u\nout.uar_stale_bytes=%u\nout.uar_bytes=",
		    len > 8 ? "blueflame" : "doorbell64", ulo, len, stale);
		out_hex(A.f.uar + ulo, len);
		out("\nout.uar_mask=");
		for (k = ulo; k < ulo + len; k++)
			out("%c", !written(A.f.uar, B.f.uar, k, 0x3c, 0xc3) ? '.' :
			    (A.f.uar[k] == 0xa5 && B.f.uar[k] == 0x5a) ? 's' : 'x');
		out("\n");
	}
	/* WQEBBs with a written byte, in ring order from start_cur_post */
	for (i = 0; i < (int)cnt; i++) {
		unsigned idx = (c->start_cur_post + i) & (cnt - 1);
		size_t base = (size_t)idx * MLX5_SEND_WQE_BB;
		int any = 0;

		for (k = 0; k < MLX5_SEND_WQE_BB; k++)
			any |= written(A.f.sq, B.f.sq, base + k, 0xa5, 0x5a);
		if (!any)
			continue;
		touched++;
		out("wqebb %u ", idx);
		out_hex(A.f.sq + base, MLX5_SEND_WQE_BB);
		out("\nmask %u ", idx);
		print_mask(A.f.sq, B.f.sq, base, MLX5_SEND_WQE_BB, 0xa5, 0x5a);
		out("\n");
	}
	out("out.touched_wqebbs=%u\nend\n\n", touched);
}

/* ---- one receive case --------------------------------------------------- */
struct recv_run {
	struct fab f;
	int ret;
	long bad_wr;
};

static void recv_run(struct recv_run *s, const struct case_in *c, int second)
{
	static struct ibv_recv_wr wrs[MAX_WR];
	static struct ibv_sge sges[MAX_WR][MAX_SGE];
	struct ibv_recv_wr *bad = NULL;
	int i, j;

	memset(s, 0, sizeof(*s));
	fabricate_rq(&s->f, c, second ? 0x5a : 0xa5, second ? 0x5a : 0xa5);
	memset(wrs, 0, sizeof(wrs));
	for (i = 0; i < c->nwr; i++) {
		wrs[i].wr_id = c->wr[i].wr_id;
		wrs[i].next = i + 1 < c->nwr ? &wrs[i + 1] : NULL;
		wrs[i].num_sge = c->wr[i].num_sge;
		wrs[i].sg_list = sges[i];
		for (j = 0; j < c->wr[i].num_sge; j++) {
			sges[i][j].addr = c->wr[i].sge[j].addr;
			sges[i][j].length = c->wr[i].sge[j].length;
			sges[i][j].lkey = c->wr[i].sge[j].lkey;
		}
	}
	s->ret = rdmacore44_0_mlx5_post_recv(&s->f.qp->verbs_qp.qp, c->nwr ? wrs : NULL, &bad);
	s->bad_wr = s->ret ? (bad ? bad - wrs : -2) : -1;
}

static void recv_case(const struct case_in *c)
{
	static struct recv_run A, B;
	unsigned cnt = c->rq_wqe_cnt, stride = 1u << c->rq_wqe_shift, k, touched = 0;
	uint32_t n, posted;
	int i, j, dbw = 0;

	recv_run(&A, c, 0);
	recv_run(&B, c, 1);
	if (A.ret != B.ret || A.f.qp->rq.head != B.f.qp->rq.head)
		die("%s: the two runs differ", c->name);

	out("case %s\n", c->name);
	if (c->note[0])
		out("note=%s\n", c->note);
	out("api=ibv_post_recv\nqp_type=%s\nqp_state=%s\nqpn=0x%06x\n", c->qp_type,
	    state_names[c->qp_state], c->qpn);
	out("rq_wqe_cnt=%u\nrq_wqe_shift=%u\nrq_max_gs=%u\nrq_max_post=%u\n", c->rq_wqe_cnt,
	    c->rq_wqe_shift, c->rq_max_gs, c->rq_max_post);
	out("start_rq_head=%u\nstart_rq_tail=%u\nwq_sig=0\nnwr=%d\n", c->start_rq_head,
	    c->start_rq_tail, c->nwr);
	for (i = 0; i < c->nwr; i++) {
		out("wr%d.wr_id=0x%016llx\nwr%d.num_sge=%d\n", i,
		    (unsigned long long)c->wr[i].wr_id, i, c->wr[i].num_sge);
		for (j = 0; j < c->wr[i].num_sge; j++)
			out("wr%d.sge%d.addr=0x%016llx\nwr%d.sge%d.length=%u\nwr%d.sge%d.lkey=0x%08x\n",
			    i, j, (unsigned long long)c->wr[i].sge[j].addr, i, j,
			    c->wr[i].sge[j].length, i, j, c->wr[i].sge[j].lkey);
	}
	out("out.ret=%d\nout.bad_wr=%ld\nout.rq_head=%u\n", A.ret, A.bad_wr, A.f.qp->rq.head);
	posted = A.f.qp->rq.head - c->start_rq_head;
	for (n = 0; n < posted; n++) {
		unsigned idx = (c->start_rq_head + n) & (cnt - 1);

		out("out.rq_slot%u=wrid:0x%016llx\n", idx,
		    (unsigned long long)A.f.qp->rq.wrid[idx]);
	}
	for (k = 0; k < 8; k++)
		dbw |= written((uint8_t *)A.f.dbrec, (uint8_t *)B.f.dbrec, k, 0xa5, 0x5a);
	out("out.dbrec_written=%d\nout.dbrec_rcv_offset=0\nout.dbrec_bytes=", dbw);
	out_hex((uint8_t *)A.f.dbrec, 8);
	out("\nout.dbrec_mask=");
	print_mask((uint8_t *)A.f.dbrec, (uint8_t *)B.f.dbrec, 0, 8, 0xa5, 0x5a);
	out("\n");
	for (n = 0; n < cnt; n++) {
		unsigned idx = (c->start_rq_head + n) & (cnt - 1);
		size_t base = (size_t)idx * stride;
		int any = 0;

		for (k = 0; k < stride; k++)
			any |= written(A.f.rq, B.f.rq, base + k, 0xa5, 0x5a);
		if (!any)
			continue;
		touched++;
		out("rqwqe %u ", idx);
		out_hex(A.f.rq + base, stride);
		out("\nmask %u ", idx);
		print_mask(A.f.rq, B.f.rq, base, stride, 0xa5, 0x5a);
		out("\n");
	}
	out("out.touched_rq_wqes=%u\nend\n\n", touched);
}

/* ---- random generation ---------------------------------------------------- */
static uint64_t rng_state;

static uint64_t rnd64(void)
{
	/* splitmix64 */
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static unsigned rnd(unsigned n)	/* 0..n-1 */
{
	return n ? (unsigned)(rnd64() % n) : 0;
}

static int chance(unsigned pct)
{
	return rnd(100) < pct;
}

#define PICK(...) ({ const long _v[] = { __VA_ARGS__ }; _v[rnd(sizeof(_v) / sizeof(_v[0]))]; })

static uint64_t next_addr;

/* Buffers of one case never overlap: each case starts at ADDR0 and takes
 * 64-byte aligned space; a buffer too large for the mapping (only possible
 * for SGEs libmlx5 does not read: lengths up to 2^31 - 1 of plain data
 * segments) gets an address outside it. */
static uint64_t take_addr(uint32_t len)
{
	uint64_t a = next_addr;

	if (len > (1u << 20))
		return (rnd64() >> 8) | (1ull << 52);
	next_addr += ((uint64_t)(len ? len : 1) + 63) / 64 * 64;
	if (!in_map(next_addr, 0))
		die("a case's buffers exceed the mapping");
	return a;
}

static void pattern(uint8_t *p, size_t n)
{
	uint8_t a = rnd(256), st = PICK(1, 3, 7, 11, 13);
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = (uint8_t)(a + st * i);
}

/* A plausible Ethernet/IPv4 frame (truncated or padded to n bytes). */
static void eth_frame(uint8_t *p, size_t n, int vlan, int tcp)
{
	uint8_t f[2048];
	size_t l = 0, i;

	memset(f, 0, sizeof(f));
	memcpy(f, "\x00\x11\x22\x33\x44", 5);
	f[5] = rnd(256);
	memcpy(f + 6, "\x02\xaa\xbb\xcc\xdd", 5);
	f[11] = rnd(256);
	l = 12;
	if (vlan) {
		f[l++] = 0x81;
		f[l++] = 0x00;
		f[l++] = rnd(16);
		f[l++] = rnd(256);
	}
	f[l++] = 0x08;
	f[l++] = 0x00;
	f[l++] = 0x45;
	f[l++] = 0;
	f[l++] = (n - 14) >> 8;
	f[l++] = (uint8_t)(n - 14);
	f[l++] = rnd(256);
	f[l++] = rnd(256);
	f[l++] = 0x40;
	f[l++] = 0;
	f[l++] = 64;
	f[l++] = tcp ? 6 : 17;
	l += 2;
	memcpy(f + l, "\x0a\x00\x00\x01\x0a\x00\x00\x02", 8);
	l += 8;
	for (i = 0; i < (tcp ? 20u : 8u); i++)
		f[l + i] = rnd(256);
	l += tcp ? 20 : 8;
	if (n > l)
		pattern(f + l, n - l);
	memcpy(p, f, n);
}

static void rand_av(uint8_t *av)
{
	int roce = chance(50), grh = roce || chance(30);

	memset(av, 0, 48);
	/* mlx5_create_ah leaves key/dqp_dct 0 (post_send overwrites them) */
	av[12] = PICK(0x00, 0x03, 0x30, 0x0e, 0x7f);	/* stat_rate_sl */
	av[13] = roce ? 0 : rnd(0x80);			/* fl_mlid */
	if (roce) {
		av[14] = 0xc0 | rnd(0x40);		/* rlid: UDP source port */
		av[15] = rnd(256);
		memcpy(av + 20, "\x00\x11\x22", 3);		/* rmac */
		av[23] = rnd(256);
		av[24] = rnd(256);
		av[25] = rnd(256);
	} else {
		uint16_t lid = 1 + rnd(0xbfff);

		av[14] = lid >> 8;
		av[15] = (uint8_t)lid;
	}
	if (grh) {
		uint32_t g = (1u << 30) | (rnd(4) << 20) | rnd(1 << 20);

		av[26] = rnd(256);				/* tclass */
		av[27] = PICK(64, 255, 1);			/* hop_limit */
		av[28] = g >> 24;
		av[29] = g >> 16;
		av[30] = g >> 8;
		av[31] = g;
		if (chance(50)) {
			av[32] = 0xfe;
			av[33] = 0x80;
			for (int i = 40; i < 48; i++)
				av[i] = rnd(256);
		} else {
			av[42] = 0xff;
			av[43] = 0xff;
			av[44] = 10;
			av[47] = rnd(256);
		}
	}
}

/* QP sizes the way verbs.c mlx5_calc_sq_size computes them from ibv_qp_cap
 * (default send_ops_flags of the QP type; max_sq_desc_sz from the device). */
struct sq_cfg {
	unsigned cnt, max_post, max_gs, max_inline, max_tso_header;
};

static int calc_sq(const char *type, unsigned max_sq_desc_sz, unsigned send_wr,
		   unsigned send_sge, unsigned inline_req, unsigned tso_hdr, struct sq_cfg *o)
{
	unsigned ov, size, inl_size = 0, tot, wqe, wq, p;

	/* verbs.c _sq_overhead */
	if (!strcmp(type, "RC") || !strcmp(type, "UC"))	/* default ops incl. BIND_MW/LOCAL_INV: UMR */
		ov = sizeof(struct mlx5_wqe_ctrl_seg) + sizeof(struct mlx5_wqe_umr_ctrl_seg) +
		     sizeof(struct mlx5_wqe_mkey_context_seg) + 64;
	else if (!strcmp(type, "UD"))
		ov = sizeof(struct mlx5_wqe_ctrl_seg) + sizeof(struct mlx5_wqe_datagram_seg);
	else
		ov = sizeof(struct mlx5_wqe_ctrl_seg) + sizeof(struct mlx5_wqe_eth_seg);
	size = ov;
	if (inline_req)
		inl_size = ov + ((sizeof(struct mlx5_wqe_inl_data_seg) + inline_req + 15) & ~15u);
	size += (tso_hdr + 15) & ~15u;
	if (send_sge > (max_sq_desc_sz - size) / sizeof(struct mlx5_wqe_data_seg))
		return -1;
	size += send_sge * sizeof(struct mlx5_wqe_data_seg);
	tot = size > inl_size ? size : inl_size;
	if (tot > max_sq_desc_sz)
		return -1;
	wqe = (tot + 63) & ~63u;
	for (p = 1; p < send_wr * wqe; p <<= 1)
		;
	wq = p;
	o->cnt = wq / MLX5_SEND_WQE_BB;
	o->max_post = wq / wqe;
	o->max_gs = send_sge;
	o->max_inline = wqe - ov - sizeof(struct mlx5_wqe_inl_data_seg);
	o->max_tso_header = tso_hdr;
	return 0;
}

static void gen_sge(struct sge_in *s, uint32_t len, int need_data, const uint8_t *bytes)
{
	s->length = len;
	/* a random key, a few fixed ones, or 0 */
	s->lkey = rnd(4) < 3 ? (uint32_t)rnd64() : 0;
	if (chance(30))
		s->lkey = PICK(0x00001234, 0x00003579, 0x00000001);
	s->addr = take_addr(len);
	s->has_data = need_data || len <= 32;
	if (s->has_data) {
		s->data = malloc(len ? len : 1);
		if (bytes)
			memcpy(s->data, bytes, len);
		else
			pattern(s->data, len);
	}
	if (!s->has_data && chance(20))
		s->addr = rnd64();	/* not dereferenced by libmlx5 */
}

/* Split total into n pieces, some possibly zero. */
static void split(uint32_t total, int n, uint32_t *parts)
{
	uint32_t left = total;
	int i;

	for (i = 0; i < n - 1; i++) {
		parts[i] = chance(15) ? 0 : rnd(left + 1);
		left -= parts[i];
	}
	parts[n - 1] = left;
}

static const char *const qp_types[] = { "RC", "UD", "RAW_PACKET", "UC" };

static void set_setter(struct wr_in *w, const char *s)
{
	snprintf(w->setter, sizeof(w->setter), "%s", s);
	w->has_setter = 1;
}

/* One random work request on case c; err: make this one fail if it can. */
static void gen_wr(struct case_in *c, struct wr_in *w, int k, int err, char *tag, size_t tagsz)
{
	int raw = !strcmp(c->qp_type, "RAW_PACKET"), ud = !strcmp(c->qp_type, "UD");
	int rc = !strcmp(c->qp_type, "RC"), uc = !strcmp(c->qp_type, "UC");
	int inline_ = 0, n, j;
	uint32_t parts[MAX_SGE];
	const char *ek = "";

	memset(w, 0, sizeof(*w));
	w->wr_id = rnd64();
	if (rc)
		w->opcode = PICK(IBV_WR_SEND, IBV_WR_SEND, IBV_WR_SEND_WITH_IMM, IBV_WR_SEND_WITH_INV,
				 IBV_WR_RDMA_WRITE, IBV_WR_RDMA_WRITE, IBV_WR_RDMA_WRITE_WITH_IMM,
				 IBV_WR_RDMA_READ, IBV_WR_ATOMIC_CMP_AND_SWP,
				 IBV_WR_ATOMIC_FETCH_AND_ADD, IBV_WR_LOCAL_INV);
	else if (uc)	/* the opcodes _mlx5_post_send and fill_wr_builders_uc handle for UC */
		w->opcode = PICK(IBV_WR_SEND, IBV_WR_SEND, IBV_WR_SEND_WITH_IMM, IBV_WR_SEND_WITH_INV,
				 IBV_WR_RDMA_WRITE, IBV_WR_RDMA_WRITE, IBV_WR_RDMA_WRITE_WITH_IMM,
				 IBV_WR_LOCAL_INV);
	else if (ud)
		w->opcode = PICK(IBV_WR_SEND, IBV_WR_SEND, IBV_WR_SEND_WITH_IMM);
	else
		w->opcode = PICK(IBV_WR_SEND, IBV_WR_SEND, IBV_WR_SEND, IBV_WR_TSO);
	/* A builder that fails before it sets qp->cur_ctrl / cur_data (overflow,
	 * IP_CSUM without caps, bad TSO header) leaves the setters that follow
	 * writing through the previous WR's pointers, which are NULL in the
	 * first WR of a fresh QP (qp.c _common_wqe_init_op returns early,
	 * mlx5_send_wr_send_eth / mlx5_send_wr_send_tso return before setting
	 * cur_data): libmlx5 would crash, so the wr_* API gets those refusals
	 * only from the second WR on. */
	int first_wr_api = c->wr_api && k == 0;

	if (w->opcode == IBV_WR_TSO && c->max_tso_header < 14 &&
	    (first_wr_api || (!err && chance(80))))
		w->opcode = IBV_WR_SEND;	/* a QP created without TSO */
	if ((rc || uc) && chance(3))
		w->opcode = IBV_WR_BIND_MW;
	if (rc && !c->wr_api && chance(2))
		w->opcode = IBV_WR_DRIVER1;
	if (c->wr_api && !c->atomics && (w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
					  w->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD))
		w->opcode = IBV_WR_SEND;	/* fill_wr_pfns refuses atomic ops then */
	if (chance(55))
		w->flags |= IBV_SEND_SIGNALED;
	if (chance(10))
		w->flags |= IBV_SEND_FENCE;
	if (chance(10))
		w->flags |= IBV_SEND_SOLICITED;
	if (raw && chance(40))
		w->flags |= IBV_SEND_IP_CSUM;
	if (!raw && chance(3))
		w->flags |= IBV_SEND_IP_CSUM;	/* ignored on IB transports */
	if (first_wr_api && raw && !(c->qp_cap_cache & MLX5_CSUM_SUPPORT_RAW_OVER_ETH))
		w->flags &= ~IBV_SEND_IP_CSUM;	/* would be the NULL-pointer path above */

	if (err) {
		const char *kinds_post[] = { "max_gs", "inline_long", "opcode", "atomics", "csum",
					     "short", "tso_hdr", "tso_big", "overflow" };
		const char *kinds_wr[] = { "max_gs", "inline_long", "csum", "short", "tso_hdr",
					   "overflow" };

		ek = c->wr_api ? kinds_wr[rnd(6)] : kinds_post[rnd(9)];
		if (!strcmp(ek, "atomics") && !(rc && c->atomics))
			ek = "max_gs";
		if (first_wr_api && (!strcmp(ek, "overflow") || !strcmp(ek, "csum") ||
				     !strcmp(ek, "tso_hdr")))
			ek = "max_gs";
		if (!strcmp(ek, "atomics"))
			w->opcode = PICK(IBV_WR_ATOMIC_CMP_AND_SWP, IBV_WR_ATOMIC_FETCH_AND_ADD);
		if ((!strcmp(ek, "csum") || !strcmp(ek, "short") || !strcmp(ek, "tso_hdr") ||
		     !strcmp(ek, "tso_big")) && !raw)
			ek = "inline_long";
		if (!strcmp(ek, "tso_hdr") || !strcmp(ek, "tso_big"))
			w->opcode = IBV_WR_TSO;
		if (!strcmp(ek, "short"))
			w->opcode = IBV_WR_SEND;
		if (!strcmp(ek, "inline_long") && (w->opcode == IBV_WR_RDMA_READ ||
						   w->opcode == IBV_WR_TSO ||
						   w->opcode == IBV_WR_LOCAL_INV ||
						   w->opcode == IBV_WR_BIND_MW ||
						   w->opcode == IBV_WR_DRIVER1 ||
						   w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
						   w->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD))
			w->opcode = IBV_WR_SEND;
		if (!strcmp(ek, "max_gs") && (w->opcode == IBV_WR_LOCAL_INV ||
					      w->opcode == IBV_WR_BIND_MW))
			w->opcode = IBV_WR_SEND;
	}
	if (!strcmp(ek, "csum")) {
		int j2;

		c->qp_cap_cache = 0;
		w->flags |= IBV_SEND_IP_CSUM;
		for (j2 = 0; j2 < k; j2++)	/* this WR is the first refused */
			c->wr[j2].flags &= ~IBV_SEND_IP_CSUM;
	}
	if (!strcmp(ek, "opcode"))
		w->opcode = PICK(12, 13, 15, 100);

	if (w->opcode == IBV_WR_SEND_WITH_IMM || w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM) {
		w->has_imm = 1;
		w->imm_host = rnd64();
	}
	if (w->opcode == IBV_WR_SEND_WITH_INV || w->opcode == IBV_WR_LOCAL_INV) {
		w->has_inv = 1;
		w->inv_rkey = rnd64();
	}
	if (w->opcode == IBV_WR_RDMA_WRITE || w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM ||
	    w->opcode == IBV_WR_RDMA_READ) {
		w->has_rdma = 1;
		w->raddr = chance(50) ? 0x00007f1234560000ull : rnd64() >> 16;
		w->rkey = rnd64();
	}
	if (w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP || w->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		w->has_atomic = 1;
		w->raddr = (rnd64() >> 16) & ~7ull;
		w->rkey = rnd64();
		w->compare_add = rnd64();
		w->swap = w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ? rnd64() : 0;
	}
	if (w->opcode == IBV_WR_BIND_MW) {
		w->has_bind = 1;
		w->mw_rkey = rnd64();
		w->bind_rkey = rnd64();
		w->bind_lkey = rnd64();
		w->bind_addr = rnd64() >> 20;
		w->bind_length = PICK(0, 4096, 1 << 20, 0x80000000L, 0x80000001L);
		w->bind_access = PICK(0, IBV_ACCESS_REMOTE_READ, IBV_ACCESS_REMOTE_WRITE |
				      IBV_ACCESS_LOCAL_WRITE, IBV_ACCESS_REMOTE_ATOMIC | 0xf);
	}
	if (ud) {
		w->has_ud = 1;
		w->rqpn = rnd(1 << 24);
		w->qkey = PICK(0x11111111, 0x80010000, 0) ? (uint32_t)rnd64() : 0x11111111;
		rand_av(w->av);
		if (c->wr_api) {
			w->has_ud_first = 1;
			w->ud_addr_first = rnd(2);
		}
	}

	/* payload */
	if (w->opcode == IBV_WR_LOCAL_INV || w->opcode == IBV_WR_BIND_MW) {
		n = 0;
		if (c->wr_api)
			set_setter(w, "none");
	} else if (w->has_atomic) {
		n = 1;
		gen_sge(&w->sge[0], chance(90) ? 8 : PICK(0, 16, 4), 0, NULL);
		if (c->wr_api)
			set_setter(w, chance(70) ? "set_sge" : "set_sge_list");
	} else if (w->opcode == IBV_WR_TSO) {
		unsigned hmax = c->max_tso_header, hs;
		int vlan = chance(30);
		uint32_t total = 0;

		hs = PICK(54, 58, 66, 14, 42, 120, 0);
		if (hs == 0)
			hs = hmax;
		if (hs > hmax)
			hs = 54 <= hmax ? 54 : hmax;
		if (!strcmp(ek, "tso_hdr") || hmax < 14) {
			hs = PICK(10, 13, 0) ? (unsigned)PICK(10, 13) : hmax + 1;
			if (hs > MAX_HDR)
				hs = 13;
			snprintf(c->note, sizeof(c->note), "TSO header size %u outside [14, %u]: EINVAL",
				 hs, hmax);
		}
		w->has_tso = 1;
		w->hdr_sz = hs;
		w->mss = PICK(1460, 1448, 536, 8960);
		eth_frame(w->hdr, hs, vlan, 1);
		n = PICK(1, 1, 2, 3);
		if (n > (int)c->sq_max_gs)
			n = c->sq_max_gs;
		for (j = 0; j < n; j++) {
			uint32_t l = PICK(1460, 2920, 4096, 8760, 100, 0);

			if (!strcmp(ek, "tso_big") && j == n - 1)
				l = c->max_tso - total + 1 + rnd(64);
			total += l;
			gen_sge(&w->sge[j], l, 0, NULL);
		}
		if (!strcmp(ek, "tso_big"))
			snprintf(c->note, sizeof(c->note), "payload larger than max_tso: EINVAL");
		if (c->wr_api)
			set_setter(w, n == 1 && chance(50) ? "set_sge" : "set_sge_list");
	} else if (raw && w->opcode == IBV_WR_SEND) {
		unsigned emi = c->eth_min_inline, limit = c->max_inline_data + emi;
		uint32_t tot;
		uint8_t frame[2048];
		uint32_t p = 0;

		inline_ = chance(35);
		if (inline_)
			tot = PICK(64, 60, 42, 18, 19, 34, 100, 0, 1) ?
				(uint32_t)PICK(64, 60, 42, 18, 19, 34, 100) : limit - rnd(2);
		else
			tot = PICK(60, 64, 64, 128, 256, 18, 14, 42, 1514, 0) ?
				(uint32_t)PICK(60, 64, 128, 256, 18, 14, 42, 1514) : 18 + rnd(300);
		if (inline_ && tot > limit)
			tot = limit;
		if (!strcmp(ek, "inline_long")) {
			inline_ = 1;
			tot = limit + 1 + rnd(40);
			snprintf(c->note, sizeof(c->note), "inline frame beyond max_inline_data");
		}
		if (!strcmp(ek, "short")) {
			tot = PICK(12, 14, 17, 0);
			if (!emi)
				c->eth_min_inline = 18, emi = 18;
			snprintf(c->note, sizeof(c->note), "%u-byte frame < 18-byte inline header",
				 tot);
		}
		if (tot > sizeof(frame))
			tot = sizeof(frame);
		eth_frame(frame, tot, chance(15), chance(50));
		n = PICK(1, 1, 1, 2, 3, 4);
		if (n > (int)c->sq_max_gs)
			n = c->sq_max_gs;
		if (n == 1) {
			parts[0] = tot;
		} else if (chance(40) && tot >= 18) {
			parts[0] = PICK(14, 18, 6, 10, 34);
			if (parts[0] > tot)
				parts[0] = tot;
			split(tot - parts[0], n - 1, parts + 1);
		} else {
			split(tot, n, parts);
		}
		for (j = 0; j < n; j++) {
			gen_sge(&w->sge[j], parts[j], 1, frame + p);
			p += parts[j];
			if (c->wr_api && inline_)
				w->sge[j].lkey = 0;
		}
		if (c->wr_api) {
			if (inline_)
				set_setter(w, n == 1 && chance(70) ? "set_inline_data" :
					   "set_inline_data_list");
			else
				set_setter(w, n == 1 && chance(70) ? "set_sge" : "set_sge_list");
		} else if (inline_) {
			w->flags |= IBV_SEND_INLINE;
		}
	} else {
		inline_ = w->opcode != IBV_WR_RDMA_READ && w->opcode != IBV_WR_DRIVER1 &&
			  chance(40);
		if (!strcmp(ek, "inline_long"))
			inline_ = 1;
		if (inline_) {
			uint32_t tot = PICK(0, 1, 4, 12, 16, 28, 44, 60, 64, 0) ?
				(uint32_t)PICK(1, 4, 12, 16, 28, 44, 60, 64, 100, 200) :
				c->max_inline_data - rnd(13);

			if (chance(25))
				tot = rnd(c->max_inline_data + 1);
			if (tot > c->max_inline_data)
				tot = c->max_inline_data;
			if (!strcmp(ek, "inline_long")) {
				tot = c->max_inline_data + PICK(1, 4, 16, 100);
				snprintf(c->note, sizeof(c->note), "inline data beyond max_inline_data");
			}
			n = PICK(1, 1, 1, 2, 3, 4);
			if (n > (int)c->sq_max_gs)
				n = c->sq_max_gs;
			if (n < 1)
				n = 1;
			split(tot, n, parts);
			for (j = 0; j < n; j++) {
				gen_sge(&w->sge[j], parts[j], 1, NULL);
				if (c->wr_api)
					w->sge[j].lkey = 0;
			}
			if (c->wr_api)
				set_setter(w, n == 1 && chance(70) ? "set_inline_data" :
					   "set_inline_data_list");
			else
				w->flags |= IBV_SEND_INLINE;
		} else {
			n = PICK(0, 1, 1, 1, 2, 3, 99, 99);
			if (n > (int)c->sq_max_gs)
				n = c->sq_max_gs;
			for (j = 0; j < n; j++)
				gen_sge(&w->sge[j], chance(12) ? 0 :
					(uint32_t)PICK(1, 8, 64, 100, 256, 512, 1024, 4096, 65536,
						       0x7fffffffL, 0) ?: 1 + rnd(9000), 0, NULL);
			if (c->wr_api)
				set_setter(w, n == 1 && chance(60) ? "set_sge" : "set_sge_list");
		}
	}
	if (!strcmp(ek, "max_gs")) {
		int target = c->sq_max_gs + PICK(1, 1, 2);

		if (target > MAX_SGE)
			target = MAX_SGE;
		for (j = n; j < target; j++)
			gen_sge(&w->sge[j], PICK(64, 128, 0), inline_ || raw, NULL);
		n = target;
		if (c->wr_api && w->has_setter)
			set_setter(w, !strncmp(w->setter, "set_inline", 10) ?
				   "set_inline_data_list" : "set_sge_list");
		snprintf(c->note, sizeof(c->note), "%d SGEs > max_gs %u", n, c->sq_max_gs);
	}
	w->num_sge = n;
	/* On a raw QP libmlx5 may read the first bytes of any SGE as an
	 * Ethernet header (also through stale pointers after a refused WR):
	 * keep every buffer inside the mapping there. */
	for (j = 0; raw && j < n; j++)
		if (!in_map(w->sge[j].addr, w->sge[j].length))
			w->sge[j].addr = take_addr(w->sge[j].length);
	if (c->wr_api && !w->has_setter)
		set_setter(w, "set_sge_list");
	if (c->wr_api && (!strcmp(w->setter, "set_sge") || !strcmp(w->setter, "set_inline_data")) &&
	    n != 1)
		set_setter(w, !strcmp(w->setter, "set_sge") ? "set_sge_list" :
			   "set_inline_data_list");
	snprintf(tag, tagsz, "%s%s%s%s",
		 w->opcode >= 0 && w->opcode < N_IB_OPCODES ? opcode_names[w->opcode] : "BADOP",
		 inline_ ? "_inl" : "", n > 1 ? "_sgl" : "", ek[0] ? "_err" : "");
	if (!strcmp(ek, "overflow"))
		snprintf(c->note, sizeof(c->note), "work-request limit reached at this WR");
	if (!strcmp(ek, "atomics"))
		snprintf(c->note, sizeof(c->note), "QP created without atomic support");
	if (!strcmp(ek, "csum"))
		snprintf(c->note, sizeof(c->note), "IP_CSUM without checksum caps");
	if (!strcmp(ek, "opcode"))
		snprintf(c->note, sizeof(c->note), "opcode %d past DRIVER1", w->opcode);
	/* the QP without atomics (EOPNOTSUPP in _mlx5_post_send); the work-request
	 * limit is set up by the caller, which sees "_OVF" at the tag's end */
	if (!strcmp(ek, "atomics"))
		c->atomics = 0;
	if (!strcmp(ek, "overflow"))
		strncat(tag, "_OVF", tagsz - strlen(tag) - 1);
}

static void lower(char *s)
{
	for (; *s; s++)
		if (*s >= 'A' && *s <= 'Z')
			*s += 'a' - 'A';
}

static void gen_send_case(struct case_in *c, unsigned seed, unsigned i)
{
	struct sq_cfg q;
	const char *t = qp_types[PICK(0, 0, 0, 0, 1, 1, 2, 2, 2, 3)];
	int nwr, err_at, k, ovf_at = -1;
	char tags[256] = "", wtag[64];
	unsigned cp, o;

	memset(c, 0, sizeof(*c));
	next_addr = ADDR0;
	snprintf(c->qp_type, sizeof(c->qp_type), "%s", t);
	c->wr_api = chance(35);
	/* QP sizes: the sample's three QPs, or mlx5_calc_sq_size of random caps */
	if (chance(40)) {
		if (!strcmp(t, "RC") || !strcmp(t, "UC"))
			calc_sq(t, 512, 8, 4, 252, 0, &q);
		else if (!strcmp(t, "UD"))
			calc_sq(t, 512, 16, 4, 188, 0, &q);
		else
			calc_sq(t, 512, 12, 4, 0, 128, &q);
	} else {
		do {
			unsigned desc = PICK(512, 512, 1024);

			if (!calc_sq(t, desc, PICK(1, 2, 4, 8, 16, 20, 32, 50, 64, 100),
				     PICK(1, 1, 2, 3, 4, 5, 6, 8, 12, 16),
				     PICK(0, 0, 16, 28, 32, 60, 64, 100, 124, 188, 252, 316, 400),
				     !strcmp(t, "RAW_PACKET") ? (unsigned)PICK(0, 64, 96, 128) : 0,
				     &q) && q.cnt >= 4 && q.cnt <= 1024)
				break;
		} while (1);
	}
	c->sq_wqe_cnt = q.cnt;
	c->sq_max_post = q.max_post;
	c->sq_max_gs = q.max_gs;
	c->max_inline_data = q.max_inline;
	c->qpn = chance(40) ? (unsigned)PICK(0x000123, 0x000456, 0x000789) : rnd(1 << 24);
	if (!strcmp(t, "RAW_PACKET")) {
		c->max_tso_header = q.max_tso_header;
		c->max_tso = q.max_tso_header ? (unsigned)PICK(262144, 65536) : 0;
		c->eth_min_inline = PICK(18, 18, 18, 0);
		c->qp_cap_cache = PICK(0x10001, 0x10001, 0x10001, 0x0);
		if (c->eth_min_inline == 0)
			strcat(tags, "_min0");
	}
	if (!strcmp(t, "RC"))
		c->atomics = chance(90);
	c->sq_sig_all = chance(12);
	if (c->sq_sig_all)
		strcat(tags, "_sigall");

	/* BlueFlame register (mlx5.c: bfs[i].reg = UAR + 0x800 + k * bf_reg_size,
	 * buf_size = bf_reg_size / 2 except bfs[0] (0); verbs.c: nc_mode -> 0/0) */
	c->bf_reg_offset = 0x800;
	c->bf_buf_size = 256;
	c->bf_uuarn = 1;
	c->bf_offset_before = 0;
	switch (PICK(0, 0, 0, 0, 1, 1, 2, 2, 3, 4, 5)) {
	case 1:
		c->bf_offset_before = 256;
		strcat(tags, "_bfodd");
		break;
	case 2:
		c->bf_uuarn = 1 + rnd(15);
		c->bf_reg_offset = 0x800 + (c->bf_uuarn % 4) * 0x200;
		c->bf_offset_before = PICK(0, 256);
		strcat(tags, "_uuar");
		break;
	case 3:
		c->bf_uuarn = 0;
		c->bf_buf_size = 0;
		strcat(tags, "_nobf");
		break;
	case 4:
		c->bf_buf_size = 512;
		c->bf_reg_offset = PICK(0x800, 0xc00);
		c->bf_offset_before = PICK(0, 512);
		c->bf_uuarn = 1 + rnd(3);
		strcat(tags, "_bf512");
		break;
	case 5:
		c->bf_buf_size = 128;
		c->bf_reg_offset = 0x800 + rnd(4) * 0x100;
		c->bf_offset_before = PICK(0, 128);
		strcat(tags, "_bf128");
		break;
	}
	c->prefer_bf = chance(30);
	c->shut_up_bf = chance(10);
	if (c->prefer_bf)
		strcat(tags, "_preferbf");
	if (c->shut_up_bf)
		strcat(tags, "_shutupbf");

	/* producer state */
	switch (PICK(0, 0, 0, 1, 1, 2, 2, 3, 4, 5)) {
	case 0:
		cp = 0;
		break;
	case 1:
		cp = rnd(c->sq_wqe_cnt);
		break;
	case 2:
		cp = c->sq_wqe_cnt * rnd(1000) + c->sq_wqe_cnt - 1 - rnd(3);
		strcat(tags, "_ringend");
		break;
	case 3:
		cp = 0x10000u * (1 + rnd(2)) - 1 - rnd(3);
		strcat(tags, "_w16");
		break;
	case 4:
		cp = 0u - 1 - rnd(3);
		strcat(tags, "_w32");
		break;
	default:
		cp = rnd64();
		break;
	}
	c->start_cur_post = cp;
	c->start_head = chance(40) ? cp : cp - rnd(c->sq_wqe_cnt);
	nwr = PICK(1, 1, 1, 1, 1, 2, 2, 3, 4, 5, 8);
	if (nwr > (int)c->sq_max_post)
		nwr = c->sq_max_post;
	err_at = chance(28) ? (int)rnd(nwr) : -1;
	o = PICK(0, 0, 0, 0, 1, 2) ? rnd(c->sq_max_post > (unsigned)nwr ?
					 c->sq_max_post - nwr : 1) : 0;
	c->start_tail = c->start_head - o;
	c->start_fm_cache = strcmp(t, "RAW_PACKET") && chance(10) ?
			    MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE : 0;
	if (c->start_fm_cache)
		strcat(tags, "_fmcache");
	c->nwr = nwr;
	for (k = 0; k < nwr; k++) {
		gen_wr(c, &c->wr[k], k, k == err_at, wtag, sizeof(wtag));
		if (strstr(wtag, "_OVF")) {
			*strstr(wtag, "_OVF") = 0;
			ovf_at = k;
		}
		if (k == 0) {	/* the first WR names the case: "_<tag>" before the others */
			memmove(tags + strlen(wtag) + 1, tags, strlen(tags) + 1);
			memcpy(tags + 1, wtag, strlen(wtag));
			tags[0] = '_';
		}
	}
	if (ovf_at >= 0) {
		/* mlx5_wq_overflow: head - tail + nreq >= max_post at WR ovf_at */
		c->start_tail = c->start_head - (c->sq_max_post - ovf_at);
	}
	if (nwr > 1) {
		char l[16];

		snprintf(l, sizeof(l), "_list%d", nwr);
		strncat(tags, l, sizeof(tags) - strlen(tags) - 1);
	}
	if (err_at >= 0)
		strncat(tags, "_fail", sizeof(tags) - strlen(tags) - 1);
	snprintf(c->name, sizeof(c->name), "%s%s%.150s_s%u_%04u", c->wr_api ? "wr_" : "",
		 !strcmp(t, "RAW_PACKET") ? "raw" : t, tags, seed, i);
	lower(c->name);
}

static void gen_rq_case(struct case_in *c, unsigned seed, unsigned i)
{
	static const char *const types[] = { "RC", "UC", "UD", "RAW_PACKET", "XRC_SEND" };
	static const char *const classes[] = { "basic", "zero_len", "too_many", "full", "wrap16",
					       "wrap32", "small_max_post", "long_list", "states",
					       "ring_end" };
	const char *cls = classes[rnd(10)];
	unsigned outstanding, j;
	int k, too_many_at;

	memset(c, 0, sizeof(*c));
	c->is_rq = 1;
	snprintf(c->qp_type, sizeof(c->qp_type), "%s", types[rnd(5)]);
	c->qp_state = PICK(IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS, IBV_QPS_RTS);
	if (!strcmp(cls, "states") || chance(5))
		c->qp_state = rnd(7);
	c->qpn = rnd(1 << 24);
	/* verbs.c mlx5_calc_rq_size: stride = roundup_pow_of_two(16 * max_recv_sge),
	 * max_gs = stride / 16 (no signature) */
	c->rq_wqe_shift = 4 + rnd(6);
	c->rq_max_gs = 1u << (c->rq_wqe_shift - 4);
	c->rq_wqe_cnt = 1u << (strcmp(cls, "long_list") ? rnd(9) : 4 + rnd(5));
	c->rq_max_post = c->rq_wqe_cnt;	/* verbs.c: rq.max_post = wqe_cnt */
	if (!strcmp(cls, "small_max_post"))
		c->rq_max_post = rnd(c->rq_wqe_cnt + 1);
	outstanding = c->rq_max_post && chance(60) ? rnd(c->rq_max_post) : 0;
	if (!strcmp(cls, "full"))
		outstanding = c->rq_max_post - (c->rq_max_post > 4 ? rnd(5) : 0);
	c->start_rq_head = rnd(4 * c->rq_wqe_cnt);
	if (!strcmp(cls, "ring_end"))
		c->start_rq_head = c->rq_wqe_cnt * (1 + rnd(100)) - 1 - rnd(3);
	if (!strcmp(cls, "wrap16"))
		c->start_rq_head = 0x10000u * (1 + rnd(3)) - rnd(20);
	if (!strcmp(cls, "wrap32"))
		c->start_rq_head = 0u - 1 - rnd(20);
	c->start_rq_tail = c->start_rq_head - outstanding;
	if (chance(2))	/* tail ahead of head: head - tail is huge (mlx5_wq_overflow) */
		c->start_rq_tail = c->start_rq_head + 1 + rnd(3);
	c->nwr = 1 + rnd(6);
	if (!strcmp(cls, "long_list"))
		c->nwr = 10 + rnd(30);
	if (!strcmp(cls, "full") || !strcmp(cls, "small_max_post") ||
	    !strcmp(cls, "wrap16") || !strcmp(cls, "wrap32"))
		c->nwr = 1 + rnd(12);
	too_many_at = !strcmp(cls, "too_many") ? (int)rnd(c->nwr) : -1;
	for (k = 0; k < c->nwr; k++) {
		struct wr_in *w = &c->wr[k];

		w->wr_id = rnd64();
		w->num_sge = rnd(c->rq_max_gs + 1);
		if (w->num_sge > MAX_SGE - 4)
			w->num_sge = MAX_SGE - 4;
		if (k == too_many_at || chance(2))
			w->num_sge = c->rq_max_gs + 1 + rnd(3);
		if (w->num_sge > MAX_SGE)
			w->num_sge = MAX_SGE;
		for (j = 0; j < (unsigned)w->num_sge; j++) {
			struct sge_in *s = &w->sge[j];

			s->addr = rnd64();
			s->lkey = rnd64();
			s->length = chance(!strcmp(cls, "zero_len") ? 40 : 5) ? 0 :
				    (uint32_t)PICK(1, 2048, 4096, 0xffffffffL, 0) ?:
				    1 + rnd(65536);
		}
	}
	snprintf(c->name, sizeof(c->name), "%s_recv_%s_%s_s%u_%04u",
		 c->qp_type, cls, state_names[c->qp_state], seed, i);
	lower(c->name);
	snprintf(c->note, sizeof(c->note), "class %s", cls);
}

/* ---- parsing a case file (inputs only) ----------------------------------- */
static uint64_t pnum(const char *s)
{
	return strtoull(s, NULL, 0);
}

static int hexval(char ch)
{
	return ch <= '9' ? ch - '0' : (ch | 0x20) - 'a' + 10;
}

static size_t phex(const char *s, uint8_t *dst, size_t max)
{
	size_t n = strlen(s) / 2, i;

	if (n > max)
		die("hex string too long (%zu bytes)", n);
	for (i = 0; i < n; i++)
		dst[i] = hexval(s[2 * i]) << 4 | hexval(s[2 * i + 1]);
	return n;
}

static int parse_state(const char *s)
{
	int i;

	for (i = 0; i < 7; i++)
		if (!strcmp(s, state_names[i]))
			return i;
	die("qp_state %s", s);
}

static void set_key(struct case_in *c, const char *k, const char *v)
{
	int i, j, n;

	if (!strncmp(k, "out.", 4))
		return;
	if (sscanf(k, "wr%d.sge%d.%n", &i, &j, &n) == 2) {
		struct sge_in *s;

		if (i >= MAX_WR || j >= MAX_SGE)
			die("wr%d.sge%d beyond this program's limits", i, j);
		s = &c->wr[i].sge[j];
		k += n;
		if (!strcmp(k, "addr"))
			s->addr = pnum(v);
		else if (!strcmp(k, "length"))
			s->length = pnum(v);
		else if (!strcmp(k, "lkey"))
			s->lkey = pnum(v);
		else if (!strcmp(k, "data")) {
			s->has_data = 1;
			s->data = malloc(strlen(v) / 2 + 1);
			phex(v, s->data, strlen(v) / 2);
		}
		return;
	}
	if (sscanf(k, "wr%d.%n", &i, &n) == 1) {
		struct wr_in *w;

		if (i >= MAX_WR)
			die("wr%d beyond this program's limits", i);
		w = &c->wr[i];
		k += n;
		if (!strcmp(k, "opcode_num"))
			w->opcode = pnum(v);
		else if (!strcmp(k, "wr_id"))
			w->wr_id = pnum(v);
		else if (!strcmp(k, "send_flags_num"))
			w->flags = pnum(v);
		else if (!strcmp(k, "imm_data_host"))
			w->has_imm = 1, w->imm_host = pnum(v);
		else if (!strcmp(k, "invalidate_rkey"))
			w->has_inv = 1, w->inv_rkey = pnum(v);
		else if (!strcmp(k, "remote_addr"))
			w->has_rdma = 1, w->raddr = pnum(v);
		else if (!strcmp(k, "rkey"))
			w->rkey = pnum(v);
		else if (!strcmp(k, "compare_add"))
			w->has_atomic = 1, w->compare_add = pnum(v);
		else if (!strcmp(k, "swap"))
			w->has_atomic = 1, w->swap = pnum(v);
		else if (!strcmp(k, "ud.remote_qpn"))
			w->has_ud = 1, w->rqpn = pnum(v);
		else if (!strcmp(k, "ud.remote_qkey"))
			w->qkey = pnum(v);
		else if (!strcmp(k, "ud.ah_av"))
			phex(v, w->av, 48);
		else if (!strcmp(k, "tso.mss"))
			w->has_tso = 1, w->mss = pnum(v);
		else if (!strcmp(k, "tso.hdr_sz"))
			w->hdr_sz = pnum(v);
		else if (!strcmp(k, "tso.hdr"))
			phex(v, w->hdr, MAX_HDR);
		else if (!strcmp(k, "bind_mw.mw_rkey"))
			w->has_bind = 1, w->mw_rkey = pnum(v);
		else if (!strcmp(k, "bind_mw.rkey"))
			w->bind_rkey = pnum(v);
		else if (!strcmp(k, "bind_mw.mr_lkey"))
			w->bind_lkey = pnum(v);
		else if (!strcmp(k, "bind_mw.addr"))
			w->bind_addr = pnum(v);
		else if (!strcmp(k, "bind_mw.length"))
			w->bind_length = pnum(v);
		else if (!strcmp(k, "bind_mw.access"))
			w->bind_access = pnum(v);
		else if (!strcmp(k, "wr_api_setter"))
			set_setter(w, v);
		else if (!strcmp(k, "wr_api_ud_addr_first"))
			w->has_ud_first = 1, w->ud_addr_first = pnum(v);
		else if (!strcmp(k, "num_sge"))
			w->num_sge = pnum(v);
		else if (strcmp(k, "opcode") && strcmp(k, "send_flags"))
			die("unknown key wr%d.%s", i, k);
		return;
	}
#define NUMKEY(name, field) else if (!strcmp(k, name)) c->field = pnum(v)
	if (!strcmp(k, "note"))
		snprintf(c->note, sizeof(c->note), "%s", v);
	else if (!strcmp(k, "api"))
		c->wr_api = !strcmp(v, "wr_api"), c->is_rq = !strcmp(v, "ibv_post_recv");
	else if (!strcmp(k, "qp_type"))
		snprintf(c->qp_type, sizeof(c->qp_type), "%s", v);
	else if (!strcmp(k, "qp_state"))
		c->qp_state = parse_state(v);
	NUMKEY("qpn", qpn);
	NUMKEY("sq_wqe_cnt", sq_wqe_cnt);
	NUMKEY("sq_max_post", sq_max_post);
	NUMKEY("sq_max_gs", sq_max_gs);
	NUMKEY("max_inline_data", max_inline_data);
	NUMKEY("sq_sig_all", sq_sig_all);
	NUMKEY("eth_min_inline", eth_min_inline);
	NUMKEY("qp_cap_cache", qp_cap_cache);
	NUMKEY("max_tso", max_tso);
	NUMKEY("max_tso_header", max_tso_header);
	NUMKEY("atomics_enabled", atomics);
	NUMKEY("start_cur_post", start_cur_post);
	NUMKEY("start_head", start_head);
	NUMKEY("start_tail", start_tail);
	NUMKEY("start_fm_cache", start_fm_cache);
	NUMKEY("bf_reg_offset", bf_reg_offset);
	NUMKEY("bf_buf_size", bf_buf_size);
	NUMKEY("bf_offset_before", bf_offset_before);
	NUMKEY("bf_uuarn", bf_uuarn);
	NUMKEY("prefer_bf", prefer_bf);
	NUMKEY("shut_up_bf", shut_up_bf);
	NUMKEY("nwr", nwr);
	NUMKEY("rq_wqe_cnt", rq_wqe_cnt);
	NUMKEY("rq_wqe_shift", rq_wqe_shift);
	NUMKEY("rq_max_gs", rq_max_gs);
	NUMKEY("rq_max_post", rq_max_post);
	NUMKEY("start_rq_head", start_rq_head);
	NUMKEY("start_rq_tail", start_rq_tail);
	else if (!strcmp(k, "wq_sig")) {
		if (pnum(v))
			die("wq_sig=1 not supported");
	} else
		die("unknown key %s", k);
#undef NUMKEY
}

/* ---- driver ------------------------------------------------------------- */
static unsigned crashed;

/* Runs one case in a child; prints its text if the child finished. */
static void run_case(struct case_in *c)
{
	int pfd[2], st;
	pid_t pid;

	fflush(stdout);
	if (pipe(pfd))
		die("pipe");
	pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		size_t done = 0;

		close(pfd[0]);
		olen = 0;
		if (c->is_rq)
			recv_case(c);
		else
			send_case(c);
		while (done < olen) {
			ssize_t w = write(pfd[1], obuf + done, olen - done);

			if (w <= 0)
				_exit(3);
			done += w;
		}
		_exit(0);
	}
	close(pfd[1]);
	olen = 0;
	for (;;) {
		ssize_t r;

		if (ocap - olen < 65536) {
			ocap = ocap * 2 + 65536;
			obuf = realloc(obuf, ocap);
		}
		r = read(pfd[0], obuf + olen, ocap - olen);
		if (r <= 0)
			break;
		olen += r;
	}
	close(pfd[0]);
	waitpid(pid, &st, 0);
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
		fwrite(obuf, 1, olen, stdout);
	} else {
		crashed++;
		fprintf(stderr, "send_gen: case %s: child %s %d, not printed\n", c->name,
			WIFSIGNALED(st) ? "killed by signal" : "exited with",
			WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
		if (getenv("SEND_GEN_DUMP_DEAD") && !c->is_rq) {
			/* the inputs, for replay-wqe under a debugger */
			olen = 0;
			print_send_inputs(c);
			out("end\n");
			fwrite(obuf, 1, olen, stderr);
		}
	}
}

static void free_case(struct case_in *c)
{
	int i, j;

	for (i = 0; i < MAX_WR; i++)
		for (j = 0; j < MAX_SGE; j++)
			free(c->wr[i].sge[j].data);
}

static int replay(const char *path, int want_rq)
{
	static struct case_in c;
	FILE *fp = fopen(path, "r");
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	int in_case = 0, count = 0;

	if (!fp)
		die("cannot open %s", path);
	while ((n = getline(&line, &cap, fp)) > 0) {
		char *eq;

		while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
			line[--n] = 0;
		if (!n || line[0] == '#')
			continue;
		if (!strncmp(line, "case ", 5)) {
			memset(&c, 0, sizeof(c));
			c.is_rq = want_rq;
			snprintf(c.name, sizeof(c.name), "%s", line + 5);
			in_case = 1;
		} else if (!strcmp(line, "end")) {
			if (!in_case)
				die("end without case");
			if (c.is_rq != want_rq)
				die("%s: not a %s case", c.name, want_rq ? "receive" : "send");
			run_case(&c);
			free_case(&c);
			count++;
			in_case = 0;
		} else if (!strncmp(line, "wqebb ", 6) || !strncmp(line, "mask ", 5) ||
			   !strncmp(line, "rqwqe ", 6)) {
			continue;	/* outputs */
		} else if ((eq = strchr(line, '='))) {
			*eq = 0;
			set_key(&c, line, eq + 1);
		} else {
			die("unparsed line: %s", line);
		}
	}
	free(line);
	fclose(fp);
	fprintf(stderr, "send_gen: replayed %d cases, %u not printed\n", count, crashed);
	return crashed ? 1 : 0;
}

int main(int argc, char **argv)
{
	static struct case_in c;
	unsigned n, seed, i;

	if (argc == 3 && (!strcmp(argv[1], "replay-wqe") || !strcmp(argv[1], "replay-rq"))) {
		map_data();
		return replay(argv[2], !strcmp(argv[1], "replay-rq"));
	}
	if (argc != 4 || (strcmp(argv[1], "wqe") && strcmp(argv[1], "rq"))) {
		fprintf(stderr, "usage: send_gen wqe|rq N SEED | send_gen replay-wqe|replay-rq FILE\n");
		return 2;
	}
	map_data();
	n = strtoul(argv[2], NULL, 0);
	seed = strtoul(argv[3], NULL, 0);
	printf("# cases of: send_gen %s %u %u (tests/oracle/libmlx5/send_gen.c): outputs written by\n"
	       "# libmlx5.a's own %s on queues fabricated in ordinary memory.\n"
	       "# Format: exactly that of specs/golden/libmlx5/%s (see its header).\n",
	       argv[1], n, seed,
	       strcmp(argv[1], "wqe") ? "mlx5_post_recv" :
	       "mlx5_post_send / ibv_wr_* ops (mlx5_qp_fill_wr_pfns)",
	       strcmp(argv[1], "wqe") ? "rq-cases.txt" : "wqe-cases.txt");
	if (!strcmp(argv[1], "wqe"))
		printf("# A buffer whose bytes the case does not give (no sge data key) held\n"
		       "#   byte k = (k * 7 + 0x4c) & 0xff when libmlx5 ran (it reads such bytes\n"
		       "#   only through stale pointers after a refused wr_* work request).\n");
	if (!strcmp(argv[1], "wqe"))
		printf("# Extension (BIND_MW only, absent from the sample): wr<i>.bind_mw.{mw_rkey,rkey,\n"
		       "#   mr_lkey,addr,length,access} (ibv_mw rkey, new rkey, bind_info mr lkey/addr/\n"
		       "#   length/mw_access_flags; the MW is type 2).\n");
	printf("\n");
	rng_state = 0x6d6c783564700000ull ^ seed;
	next_addr = ADDR0;
	for (i = 0; i < n; i++) {
		if (!strcmp(argv[1], "wqe"))
			gen_send_case(&c, seed, i);
		else
			gen_rq_case(&c, seed, i);
		run_case(&c);
		free_case(&c);
		memset(&c, 0, sizeof(c));
	}
	fprintf(stderr, "send_gen: %u cases generated, %u not printed (child died)\n", n, crashed);
	return 0;
}
