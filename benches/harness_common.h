/*
 * harness_common.h - the timing helpers shared by the standalone C
 * benchmark harnesses: benches/libmlx5/harness.c, benches/dpdk/harness.c,
 * benches/dpdk/rx_common.h (for rx_harness.c and rx_mprq_harness.c) and benches/ucx/harness.c include it (their
 * build scripts pass -I<benches dir>).
 *
 * It holds the rdtsc window (tsc_start / tsc_stop), the clock
 * (now_ns), the qsort comparators (cmp_u64, cmp_dbl), the TSC calibration
 * (calibrate, setting tsc_per_ns and timer_overhead) and the dec/jnz core
 * clock estimate (core_ghz).  A harness that defines HARNESS_EXIT_ON_FAILURE
 * before including it (libmlx5, UCX) also gets die / CHECK / zalloc, which
 * exit(2) / exit(1) on failure; the DPDK harnesses keep their own, which
 * abort (their self-tests rely on it).
 *
 * Everything is static: each harness is one translation unit.
 */
#ifndef HARNESS_COMMON_H
#define HARNESS_COMMON_H

#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <x86intrin.h>

#ifdef HARNESS_EXIT_ON_FAILURE
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static void die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "harness: CHECK FAILED: ");
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
	if (!p) {
		perror("aligned_alloc");
		exit(1);
	}
	memset(p, 0, size);
	return p;
}
#endif /* HARNESS_EXIT_ON_FAILURE */

static inline uint64_t tsc_start(void)
{
	_mm_lfence();
	uint64_t t = __rdtsc();
	_mm_lfence();
	return t;
}

static inline uint64_t tsc_stop(void)
{
	unsigned aux;
	uint64_t t = __rdtscp(&aux);
	_mm_lfence();
	return t;
}

static double tsc_per_ns;
static uint64_t timer_overhead;	/* median cycles of an empty window */

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int cmp_dbl(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Effective core clock: a dec/jnz loop retires one iteration per cycle on
 * current x86 cores, so iterations per ns ~ GHz.  Lower than nominal when
 * the (shared, virtualised) CPU is being taken away from us.  (Used by the
 * libmlx5 and DPDK Tx harnesses.) */
static double __attribute__((unused)) core_ghz(void)
{
	double best = 0;
	int i;

	for (i = 0; i < 20; i++) {	/* best of 20 x 2M iterations */
		uint64_t n = 2000000, t0, t1;

		t0 = now_ns();
		__asm__ volatile("1: dec %0\n\tjnz 1b" : "+r"(n));
		t1 = now_ns();
		if (2000000.0 / (double)(t1 - t0) > best)
			best = 2000000.0 / (double)(t1 - t0);
	}
	return best;
}

/* tsc_per_ns from 200 ms of now_ns against rdtsc; timer_overhead, the
 * median of `samples` empty tsc_start / tsc_stop windows (odd, at most
 * CALIBRATE_MAX_SAMPLES: libmlx5 and DPDK take 20001, UCX 10001). */
#define CALIBRATE_MAX_SAMPLES 20001
static void calibrate(int samples)
{
	static uint64_t w[CALIBRATE_MAX_SAMPLES];
	uint64_t t0, n0, t1, n1;
	int i;

	if (samples > CALIBRATE_MAX_SAMPLES)
		samples = CALIBRATE_MAX_SAMPLES;
	n0 = now_ns();
	t0 = __rdtsc();
	while (now_ns() - n0 < 200000000ull)
		;
	n1 = now_ns();
	t1 = __rdtsc();
	tsc_per_ns = (double)(t1 - t0) / (double)(n1 - n0);

	for (i = 0; i < samples; i++) {
		uint64_t a = tsc_start();
		uint64_t b = tsc_stop();

		w[i] = b - a;
	}
	qsort(w, samples, sizeof(w[0]), cmp_u64);
	timer_overhead = w[samples / 2];
}

#endif /* HARNESS_COMMON_H */
