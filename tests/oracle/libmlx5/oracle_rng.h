/*
 * The random choices of the generators in this directory (arm_gen, cqe_gen,
 * srq_gen): splitmix64, seeded by the command line, so that a file can be
 * regenerated exactly from its seed.
 */
#ifndef ORACLE_RNG_H
#define ORACLE_RNG_H

#include <stdint.h>

static uint64_t rng_state;

static inline uint64_t rnd(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static inline uint32_t below(uint32_t n) { return (uint32_t)(rnd() % n); }
static inline int chance(unsigned percent) { return below(100) < percent; }

#endif
