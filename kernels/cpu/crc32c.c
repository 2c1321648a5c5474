/*
 * CRC32C (see crc32c.h).  The table path is Sarwate's byte-at-a-time
 * loop over a 256-entry table built once from the reflected polynomial
 * 0x82F63B78.  On x86-64 with SSE4.2 the crc32 instruction folds eight
 * bytes a cycle or so; the choice is made at each call from
 * __builtin_cpu_supports (a load and a test), as the reduction kernels
 * choose their AVX2 path.  The running value is kept inverted inside, so
 * callers chain calls with the plain CRC of what came before.
 *
 * tacl__crc32c_copy is the same loop storing each word it sums: a
 * snapshot's own copy then reads its source once, instead of a copy and a
 * second pass over the copy for the checksums (issue 29's breakdown: the
 * two passes were the caller's cost of a save).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "crc32c.h"

#define CRC32C_POLY_REFLECTED 0x82F63B78u

static uint32_t crc_table[256];
static pthread_once_t crc_table_once = PTHREAD_ONCE_INIT;
static atomic_int force_table;

static void crc_table_make(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;

        for (int b = 0; b < 8; b++)
            c = (c >> 1) ^ (c & 1 ? CRC32C_POLY_REFLECTED : 0);
        crc_table[i] = c;
    }
}

/* Sarwate's loop; with dst, each byte is also stored there as read. */
static inline uint32_t crc_sw(uint32_t c, uint8_t *dst, const uint8_t *p,
                              size_t len)
{
    pthread_once(&crc_table_once, crc_table_make);
    for (; len > 0; len--, p++) {
        if (dst != NULL)
            *dst++ = *p;
        c = crc_table[(c ^ *p) & 0xff] ^ (c >> 8);
    }
    return c;
}

#if defined(__x86_64__)
#include <nmmintrin.h>

/*
 * The crc32 loop, eight bytes a step once the source is aligned; with
 * dst, each word is stored there from the register it was summed from,
 * so the copy and its checksum come from one load.  Inlined into its two
 * callers with dst a constant, so the plain checksum has no test in its
 * loop.
 */
__attribute__((target("sse4.2"), always_inline)) static inline uint32_t
crc_hw_body(uint32_t c, uint8_t *dst, const uint8_t *p, size_t len)
{
    uint64_t c64 = c;

    for (; len > 0 && ((uintptr_t)p & 7) != 0; len--, p++) {
        if (dst != NULL)
            *dst++ = *p;
        c64 = _mm_crc32_u8((uint32_t)c64, *p);
    }
    for (; len >= 8; len -= 8, p += 8) {
        uint64_t v;

        memcpy(&v, p, 8);
        if (dst != NULL) {
            memcpy(dst, &v, 8);
            dst += 8;
        }
        c64 = _mm_crc32_u64(c64, v);
    }
    for (; len > 0; len--, p++) {
        if (dst != NULL)
            *dst++ = *p;
        c64 = _mm_crc32_u8((uint32_t)c64, *p);
    }
    return (uint32_t)c64;
}

__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t c,
                                                         const uint8_t *p,
                                                         size_t len)
{
    return crc_hw_body(c, NULL, p, len);
}

__attribute__((target("sse4.2"))) static uint32_t
crc_copy_hw(uint32_t c, uint8_t *dst, const uint8_t *p, size_t len)
{
    return crc_hw_body(c, dst, p, len);
}

int tacl__crc32c_hw(void)
{
    return !atomic_load_explicit(&force_table, memory_order_relaxed) &&
           __builtin_cpu_supports("sse4.2");
}
#else
int tacl__crc32c_hw(void)
{
    return 0;
}
#endif

void tacl__crc32c_force_table(int table)
{
    atomic_store(&force_table, table != 0);
}

uint32_t tacl__crc32c(uint32_t crc, const void *p, size_t len)
{
    uint32_t c = ~crc;

#if defined(__x86_64__)
    if (tacl__crc32c_hw())
        return ~crc_hw(c, p, len);
#endif
    return ~crc_sw(c, NULL, p, len);
}

uint32_t tacl__crc32c_copy(uint32_t crc, void *dst, const void *src,
                           size_t len)
{
    uint32_t c = ~crc;

    /* dst is never NULL here: NULL tells the loops not to store. */
    if (len == 0)
        return crc;
#if defined(__x86_64__)
    if (tacl__crc32c_hw())
        return ~crc_copy_hw(c, dst, src, len);
#endif
    return ~crc_sw(c, dst, src, len);
}
