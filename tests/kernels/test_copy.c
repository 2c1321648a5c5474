/*
 * Tests of the streaming copy (kernels/cpu/copy.h): every length around
 * the kernel's thresholds (its small-copy cut-off, one 64-byte line, the
 * 16-byte store width) and a large odd one, at every alignment of source
 * and destination within 16 bytes, must copy exactly and touch no byte
 * outside the destination.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "copy.h"

#define GUARD 64
#define GUARD_BYTE 0xa5

static void fill(uint8_t *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)((i * 131 + seed * 17 + (i >> 8)) % 251);
}

static void check_copy(size_t len, size_t src_off, size_t dst_off)
{
    uint8_t *src = malloc(len + 32), *dst = malloc(len + 32 + 2 * GUARD);
    uint8_t *d;

    cr_assert(src != NULL && dst != NULL);
    fill(src, len + 32, (unsigned)len);
    memset(dst, GUARD_BYTE, len + 32 + 2 * GUARD);
    d = dst + GUARD + dst_off;
    tacl__copy_stream(d, src + src_off, len);
    cr_assert(memcmp(d, src + src_off, len) == 0,
              "len %zu, source offset %zu, destination offset %zu: the "
              "copy differs", len, src_off, dst_off);
    for (size_t i = 0; i < GUARD + dst_off; i++)
        cr_assert(dst[i] == GUARD_BYTE, "len %zu: byte %zu before the "
                  "destination was written", len, GUARD + dst_off - i);
    for (size_t i = GUARD + dst_off + len; i < len + 32 + 2 * GUARD; i++)
        cr_assert(dst[i] == GUARD_BYTE, "len %zu: byte %zu after the "
                  "destination was written", len,
                  i - (GUARD + dst_off + len));
    free(src);
    free(dst);
}

Test(copy_stream, every_length_and_alignment)
{
    static const size_t lens[] = {0,   1,   15,  16,  17,  63,  64,
                                  65,  255, 256, 257, 319, 320, 321,
                                  4095, 4096, 65536 + 77};

    for (size_t l = 0; l < sizeof(lens) / sizeof(lens[0]); l++)
        for (size_t s = 0; s < 16; s++)
            for (size_t d = 0; d < 16; d++)
                check_copy(lens[l], s, d);
}

Test(copy_stream, large_and_unaligned)
{
    check_copy((size_t)(8 << 20) + 13, 3, 7);
}
