/*
 * Small helpers every layer uses.
 */
#ifndef TACL_CORE_COMMON_H
#define TACL_CORE_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

/** Marks a definition as part of the shared library's public ABI. */
#define TACL_EXPORT __attribute__((visibility("default")))

#define TACL_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define TACL_MIN(a, b) ((a) < (b) ? (a) : (b))
#define TACL_MAX(a, b) ((a) > (b) ? (a) : (b))
#define TACL_DIV_UP(a, b) (((a) + (b)-1) / (b))
#define tacl_likely(x) __builtin_expect(!!(x), 1)
#define tacl_unlikely(x) __builtin_expect(!!(x), 0)

/** Whether [a, a + alen) and [b, b + blen) share a byte. */
static inline int tacl__ranges_overlap(const void *a, uint64_t alen,
                                       const void *b, uint64_t blen)
{
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;

    return alen > 0 && blen > 0 && x < y + blen && y < x + alen;
}

/** Monotonic time in nanoseconds. */
static inline uint64_t tacl__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/**
 * The same clock at the kernel tick's resolution (a few milliseconds,
 * never ahead of tacl__now_ns()): a fraction of the cost, for marks that
 * only need to say how long ago something began.
 */
static inline uint64_t tacl__now_coarse_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* splitmix64's finaliser: every input bit reaches every output bit. */
static inline uint64_t tacl__mix64(uint64_t h)
{
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebull;
    return h ^ (h >> 31);
}

/* FNV-1a of len bytes at p, on from h (TACL__FNV1A_SEED to start):
 * a digest that ranks compare, and a key's hash. */
#define TACL__FNV1A_SEED 1469598103934665603ull
static inline uint64_t tacl__fnv1a(uint64_t h, const void *p, size_t len)
{
    const unsigned char *b = p;

    for (size_t i = 0; i < len; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* The next number of splitmix64's stream from *state. */
static inline uint64_t tacl__splitmix64(uint64_t *state)
{
    return tacl__mix64(*state += 0x9e3779b97f4a7c15ull);
}

#endif /* TACL_CORE_COMMON_H */
