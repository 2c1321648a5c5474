/*
 * The tests' pseudo-random numbers: Marsaglia's xorshift64, which is
 * small, fast and the same on every machine, so a failing input can be
 * found again from the seed.  A test file keeps its own generator,
 *
 *     static tt_rng_t rng = {0x9e3779b97f4a7c15ull};
 *
 * and draws with tt_rng_next(&rng).  The seed must not be zero.
 */
#ifndef TACL_TESTS_COMMON_RNG_H
#define TACL_TESTS_COMMON_RNG_H

#include <stdint.h>

/** A xorshift64 generator; its state is the last number it gave. */
typedef struct {
    uint64_t state;
} tt_rng_t;

/** The next 64 pseudo-random bits of rng. */
static inline uint64_t tt_rng_next(tt_rng_t *rng)
{
    uint64_t x = rng->state;

    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    rng->state = x;
    return x;
}

#endif /* TACL_TESTS_COMMON_RNG_H */
