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
