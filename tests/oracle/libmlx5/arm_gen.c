/*
 * arm_gen.c - a random differential oracle for mlx5dp's CQ arming
 * (`Cq::arm`, `Cq::ack_events`), driven by libmlx5's own object code.
 *
 * Every case is run by the REAL provider code of Debian 12's static
 * /usr/lib/x86_64-linux-gnu/libmlx5.a (rdma-core 44.0-2), linked, not
 * compiled: rdmacore44_0_mlx5_arm_cq (ibv_req_notify_cq) and
 * rdmacore44_0_mlx5_cq_event (the cq_event op ibv_get_cq_event calls, which
 * advances arm_sn), on a struct mlx5_cq and struct mlx5_context fabricated
 * in ordinary memory: cqn, cons_index and arm_sn as the case says, the
 * doorbell record (8 bytes) and a 4096-byte "UAR page" (ctx->cq_uar_reg)
 * pre-filled with a pattern.
 *
 * Format (see ARM-SRQ.md):
 *
 *   case NAME
 *   cqn=0x...                  24-bit CQ number
 *   cons_index=0x...           cq->cons_index (32 bits)
 *   arm_sn_before=0x...        cq->arm_sn (an int in libmlx5; 32 bits)
 *   ops=arm0,event,arm1,...    the calls in order: armS = mlx5_arm_cq(cq, S),
 *                              event = mlx5_cq_event(cq)
 *   out.stepK.op=...           per call K, after it:
 *   out.stepK.dbrec_bytes=HEX  the 8 doorbell-record bytes (0xa5 run)
 *   out.stepK.dbrec_mask=...   'x' = written by this call, '.' = not
 *   out.stepK.uar_write=none | the written bytes of the UAR page:
 *   out.stepK.uar_offset=0x..    first written byte (page offset)
 *   out.stepK.uar_len=N          number of bytes (no holes)
 *   out.stepK.uar_bytes=HEX      their values
 *   out.stepK.arm_sn=0x...     cq->arm_sn after it
 *   out.arm_sn_after=0x...
 *   end
 *
 * Before every call the doorbell record and the UAR page are re-filled with
 * the pattern, so that each step shows what that call alone wrote.  Each
 * case runs twice from scratch, with fills 0xa5 and 0x5a: a byte is written
 * when both runs agree on it; printed bytes are those of the 0xa5 run.
 *
 * Usage:
 *   arm_gen N SEED           N random cases from SEED (splitmix64)
 *   arm_gen --replay FILE    re-run the inputs of every case of FILE
 */
#define _GNU_SOURCE
#include <config.h>

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>
#include "mlx5.h"
#include "oracle_rng.h"

/* libmlx5.a renames every global symbol with this prefix. */
int rdmacore44_0_mlx5_arm_cq(struct ibv_cq *ibvcq, int solicited);
void rdmacore44_0_mlx5_cq_event(struct ibv_cq *cq);

#define MAX_OPS 8
#define UAR_SIZE 4096
#define DBREC_SIZE 8

static void die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "arm_gen: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(2);
}

#define CHECK(cond, ...) do { if (!(cond)) die(__VA_ARGS__); } while (0)

enum op { OP_ARM0, OP_ARM1, OP_EVENT };
static const char *const op_str[] = { "arm0", "arm1", "event" };

struct case_in {
	char name[96];
	uint32_t cqn, cons_index, arm_sn;
	int nops;
	enum op ops[MAX_OPS];
};

struct step_out {
	uint8_t dbrec[DBREC_SIZE];
	uint8_t uar[UAR_SIZE];
	uint32_t arm_sn;
};

/*
 * What mlx5_arm_cq and mlx5_cq_event read (cq.c): the CQ's verbs context
 * (to_mctx(ibvcq->context)->cq_uar_reg), cqn, cons_index, arm_sn, dbrec.
 * Nothing else of either struct is touched by these two functions.
 */
static void run(const struct case_in *c, uint8_t fill, struct step_out *out)
{
	struct mlx5_context *ctx;
	struct mlx5_cq *cq;
	uint8_t *uar;
	__be32 *dbrec;

	ctx = aligned_alloc(4096, (sizeof(*ctx) + 4095) / 4096 * 4096);
	cq = aligned_alloc(64, (sizeof(*cq) + 63) / 64 * 64);
	uar = aligned_alloc(4096, UAR_SIZE);
	dbrec = aligned_alloc(64, 64);
	CHECK(ctx && cq && uar && dbrec, "out of memory");
	memset(ctx, 0, sizeof(*ctx));
	memset(cq, 0, sizeof(*cq));
	ctx->cq_uar_reg = uar;		/* the CQ UAR page (mlx5dv_cq.cq_uar) */
	cq->verbs_cq.cq.context = &ctx->ibv_ctx.context;
	cq->cqn = c->cqn;
	cq->cons_index = c->cons_index;
	cq->arm_sn = (int)c->arm_sn;
	cq->dbrec = dbrec;
	cq->lock.need_lock = 0;

	for (int k = 0; k < c->nops; k++) {
		memset(dbrec, fill, 64);
		memset(uar, fill, UAR_SIZE);
		switch (c->ops[k]) {
		case OP_ARM0:
		case OP_ARM1:
			CHECK(rdmacore44_0_mlx5_arm_cq(&cq->verbs_cq.cq,
						       c->ops[k] == OP_ARM1) == 0,
			      "%s: mlx5_arm_cq failed", c->name);
			break;
		case OP_EVENT:
			rdmacore44_0_mlx5_cq_event(&cq->verbs_cq.cq);
			break;
		}
		memcpy(out[k].dbrec, dbrec, DBREC_SIZE);
		memcpy(out[k].uar, uar, UAR_SIZE);
		out[k].arm_sn = (uint32_t)cq->arm_sn;
		/* neither call may touch anything else the case describes */
		CHECK(cq->cqn == c->cqn && cq->cons_index == c->cons_index,
		      "%s: cqn or cons_index changed", c->name);
	}
	free(ctx);
	free(cq);
	free(uar);
	free(dbrec);
}

static void hex(FILE *f, const uint8_t *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		fprintf(f, "%02x", b[i]);
}

static void run_and_print(FILE *f, const struct case_in *c)
{
	static struct step_out a[MAX_OPS], b[MAX_OPS];

	run(c, 0xa5, a);
	run(c, 0x5a, b);
	fprintf(f, "case %s\n", c->name);
	fprintf(f, "cqn=0x%06x\n", c->cqn);
	fprintf(f, "cons_index=0x%08x\n", c->cons_index);
	fprintf(f, "arm_sn_before=0x%08x\n", c->arm_sn);
	fprintf(f, "ops=");
	for (int k = 0; k < c->nops; k++)
		fprintf(f, "%s%s", k ? "," : "", op_str[c->ops[k]]);
	fprintf(f, "\n");
	for (int k = 0; k < c->nops; k++) {
		char mask[DBREC_SIZE + 1];
		int first = -1, last = -1;

		CHECK(a[k].arm_sn == b[k].arm_sn, "%s: runs disagree on arm_sn", c->name);
		fprintf(f, "out.step%d.op=%s\n", k, op_str[c->ops[k]]);
		for (int i = 0; i < DBREC_SIZE; i++)
			mask[i] = a[k].dbrec[i] == b[k].dbrec[i] ? 'x' : '.';
		mask[DBREC_SIZE] = 0;
		fprintf(f, "out.step%d.dbrec_bytes=", k);
		hex(f, a[k].dbrec, DBREC_SIZE);
		fprintf(f, "\nout.step%d.dbrec_mask=%s\n", k, mask);
		for (int i = 0; i < UAR_SIZE; i++) {
			if (a[k].uar[i] != b[k].uar[i])
				continue;
			if (first < 0)
				first = i;
			last = i;
		}
		if (first < 0) {
			fprintf(f, "out.step%d.uar_write=none\n", k);
		} else {
			for (int i = first; i <= last; i++)
				CHECK(a[k].uar[i] == b[k].uar[i], "%s: UAR write with holes",
				      c->name);
			fprintf(f, "out.step%d.uar_write=bytes\n", k);
			fprintf(f, "out.step%d.uar_offset=0x%x\n", k, first);
			fprintf(f, "out.step%d.uar_len=%d\n", k, last - first + 1);
			fprintf(f, "out.step%d.uar_bytes=", k);
			hex(f, a[k].uar + first, last - first + 1);
			fprintf(f, "\n");
		}
		fprintf(f, "out.step%d.arm_sn=0x%08x\n", k, a[k].arm_sn);
	}
	fprintf(f, "out.arm_sn_after=0x%08x\n", c->nops ? a[c->nops - 1].arm_sn : c->arm_sn);
	fprintf(f, "end\n\n");
}

/* ---- random cases -------------------------------------------------------- */

/* rng_state, rnd(), below(), chance(): oracle_rng.h */

/* A 32-bit counter: small, near the 24-bit (doorbell) or 31/32-bit wrap,
 * or random. */
static uint32_t counter32(void)
{
	switch (below(6)) {
	case 0: return below(8);
	case 1: return 0x01000000u - 4 + below(8);	/* 2^24 */
	case 2: return 0u - 4 + below(8);		/* 2^32 */
	case 3: return 0x80000000u - 4 + below(8);	/* int overflow */
	default: return (uint32_t)rnd();
	}
}

static void random_case(struct case_in *c, uint64_t seed, int idx)
{
	memset(c, 0, sizeof(*c));
	switch (below(8)) {
	case 0: c->cqn = 0; break;
	case 1: c->cqn = 0xffffff; break;
	default: c->cqn = (uint32_t)rnd() & 0xffffff; break;
	}
	c->cons_index = counter32();
	c->arm_sn = counter32();
	c->nops = 1 + below(MAX_OPS);
	for (int k = 0; k < c->nops; k++) {
		unsigned r = below(100);

		/* mostly arms; an event between two arms is the usual cycle */
		c->ops[k] = r < 35 ? OP_ARM0 : r < 60 ? OP_ARM1 : OP_EVENT;
	}
	if (chance(60))
		c->ops[c->nops - 1] = chance(50) ? OP_ARM0 : OP_ARM1;
	snprintf(c->name, sizeof(c->name), "a%llu_%05d", (unsigned long long)seed, idx);
}

/* ---- replay -------------------------------------------------------------- */

static uint64_t num(const char *s)
{
	char *end;
	uint64_t v = strtoull(s, &end, 0);

	CHECK(end != s && *end == 0, "bad number '%s'", s);
	return v;
}

static void parse_ops(struct case_in *c, char *v)
{
	char *save = NULL;

	c->nops = 0;
	for (char *t = strtok_r(v, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		int i;

		CHECK(c->nops < MAX_OPS, "too many ops");
		for (i = 0; i < 3 && strcmp(t, op_str[i]); i++)
			;
		CHECK(i < 3, "bad op %s", t);
		c->ops[c->nops++] = i;
	}
}

static void replay(const char *path)
{
	FILE *f = fopen(path, "r");
	char line[8192];
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
		eq = strchr(line, '=');
		CHECK(eq, "bad line: %s", line);
		*eq = 0;
		if (!strncmp(line, "out.", 4))
			continue;	/* outputs: recomputed */
		if (!strcmp(line, "cqn")) c.cqn = num(eq + 1);
		else if (!strcmp(line, "cons_index")) c.cons_index = num(eq + 1);
		else if (!strcmp(line, "arm_sn_before")) c.arm_sn = num(eq + 1);
		else if (!strcmp(line, "ops")) parse_ops(&c, eq + 1);
		else die("unknown input key %s", line);
	}
	fclose(f);
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "--replay")) {
		replay(argv[2]);
		return 0;
	}
	if (argc == 3) {
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
	fprintf(stderr, "usage: arm_gen N SEED | arm_gen --replay FILE\n");
	return 1;
}
