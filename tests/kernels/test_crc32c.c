/*
 * CRC32C (kernels/cpu/crc32c.h) against published check values (RFC 3720
 * appendix B.4 and the "123456789" check), on both the SSE4.2 and the
 * table path, at every alignment and split of a longer buffer.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "crc32c.h"

static void check_vectors(void)
{
    uint8_t buf[32];

    cr_assert_eq(tacl__crc32c(0, "123456789", 9), 0xE3069283u);
    cr_assert_eq(tacl__crc32c(0, "", 0), 0u);
    memset(buf, 0, sizeof(buf));
    cr_assert_eq(tacl__crc32c(0, buf, 32), 0x8A9136AAu);
    memset(buf, 0xff, sizeof(buf));
    cr_assert_eq(tacl__crc32c(0, buf, 32), 0x62A8AB43u);
    for (int i = 0; i < 32; i++)
        buf[i] = (uint8_t)i;
    cr_assert_eq(tacl__crc32c(0, buf, 32), 0x46DD794Eu);
    for (int i = 0; i < 32; i++)
        buf[i] = (uint8_t)(31 - i);
    cr_assert_eq(tacl__crc32c(0, buf, 32), 0x113FDB5Cu);
}

Test(crc32c, vectors_auto)
{
    tacl__crc32c_force_table(0);
    check_vectors();
}

Test(crc32c, vectors_table)
{
    tacl__crc32c_force_table(1);
    cr_assert_eq(tacl__crc32c_hw(), 0);
    check_vectors();
    tacl__crc32c_force_table(0);
}

/* Paths agree at every offset and length, and chained calls equal one. */
Test(crc32c, paths_agree_and_chain)
{
    static uint8_t buf[4133];

    for (size_t i = 0; i < sizeof(buf); i++)
        buf[i] = (uint8_t)(i * 2654435761u >> 13);
    if (!tacl__crc32c_hw())
        cr_log_warn("no SSE4.2 on this CPU: only the table path runs");
    for (size_t off = 0; off < 9; off++)
        for (size_t len = 0; len < 70; len += 3) {
            uint32_t hw, sw;

            hw = tacl__crc32c(0, buf + off, len);
            tacl__crc32c_force_table(1);
            sw = tacl__crc32c(0, buf + off, len);
            tacl__crc32c_force_table(0);
            cr_assert_eq(hw, sw, "offset %zu length %zu", off, len);
        }
    for (size_t cut = 0; cut <= sizeof(buf); cut += 517) {
        uint32_t whole = tacl__crc32c(0, buf, sizeof(buf));
        uint32_t part = tacl__crc32c(0, buf, cut);

        part = tacl__crc32c(part, buf + cut, sizeof(buf) - cut);
        cr_assert_eq(part, whole, "cut at %zu", cut);
    }
}

/*
 * The fused copy: dst gets exactly src (and nothing around it is
 * touched), and the value is the plain CRC of the copy, chained from a
 * nonzero start too, at the sizes around the 8-byte loop's edges and
 * every misalignment of source and destination, on both paths.
 */
static void check_copy(size_t len, size_t src_off, size_t dst_off)
{
    static uint8_t src[4096 + 3 + 16], dst[4096 + 3 + 32];
    const uint8_t guard = 0xA5;
    uint32_t got, want, start = (uint32_t)(len * 0x9E3779B9u);

    for (size_t i = 0; i < sizeof(src); i++)
        src[i] = (uint8_t)((i + len) * 2654435761u >> 11);
    memset(dst, guard, sizeof(dst));
    got = tacl__crc32c_copy(start, dst + 8 + dst_off, src + src_off, len);
    cr_assert_eq(memcmp(dst + 8 + dst_off, src + src_off, len), 0,
                 "copy of %zu bytes (source +%zu, destination +%zu)", len,
                 src_off, dst_off);
    for (size_t i = 0; i < sizeof(dst); i++)
        if (i < 8 + dst_off || i >= 8 + dst_off + len)
            cr_assert_eq(dst[i], guard, "byte %zu outside the copy of %zu "
                         "bytes was written", i, len);
    want = tacl__crc32c(start, dst + 8 + dst_off, len);
    cr_assert_eq(got, want,
                 "crc of %zu bytes (source +%zu, destination +%zu): 0x%08x, "
                 "the copy's is 0x%08x",
                 len, src_off, dst_off, got, want);
}

static void check_copy_sizes(void)
{
    static const size_t sizes[] = {0, 1, 7, 8, 9, 15, 16, 63, 4096 + 3};

    for (size_t n = 0; n < sizeof(sizes) / sizeof(sizes[0]); n++)
        for (size_t so = 0; so < 8; so++)
            for (size_t d = 0; d < 8; d += 3)
                check_copy(sizes[n], so, d);
}

Test(crc32c, copy_equals_copy_then_crc)
{
    tacl__crc32c_force_table(0);
    check_copy_sizes();
    cr_assert_eq(tacl__crc32c_copy(0, (char[9]){0}, "123456789", 9),
                 0xE3069283u);
}

Test(crc32c, copy_equals_copy_then_crc_table)
{
    tacl__crc32c_force_table(1);
    check_copy_sizes();
    cr_assert_eq(tacl__crc32c_copy(0, (char[9]){0}, "123456789", 9),
                 0xE3069283u);
    tacl__crc32c_force_table(0);
}
