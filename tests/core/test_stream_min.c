/*
 * TACL_STREAM_MIN: how many bytes a node's ranks must write in one
 * collective before its large local copies stream past the cache (see
 * tacl__topo_stream_bytes in topo.h).  Each case sets the variable,
 * re-reads the configuration and checks the threshold for a node with
 * and without a known last-level cache.
 */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "config.h"
#include "topo.h"

static uint64_t threshold(const char *value, uint64_t llc)
{
    tacl__node_desc_t node = {0};

    if (value == NULL)
        unsetenv("TACL_STREAM_MIN");
    else
        setenv("TACL_STREAM_MIN", value, 1);
    tacl__config_reload();
    node.llc_bytes = llc;
    return tacl__topo_stream_bytes(&node);
}

Test(stream_min, auto_is_half_the_last_level_cache)
{
    cr_assert_eq(threshold(NULL, 32u << 20), 16u << 20);
    cr_assert_eq(threshold("auto", 96u << 20), 48u << 20);
    cr_assert_eq(threshold("AUTO", 8u << 20), 4u << 20);
    /* Unknown cache: half of a common 32 MB. */
    cr_assert_eq(threshold(NULL, 0), 16u << 20);
}

Test(stream_min, sizes)
{
    cr_assert_eq(threshold("4096", 32u << 20), 4096);
    cr_assert_eq(threshold("16M", 32u << 20), 16u << 20);
    cr_assert_eq(threshold("1g", 0), 1ull << 30);
    /* Zero streams every copy, as one byte does. */
    cr_assert_eq(threshold("0", 32u << 20), 1);
}

Test(stream_min, never_and_bad_values)
{
    cr_assert_eq(threshold("never", 32u << 20), 0);
    cr_assert_eq(threshold("Never", 0), 0);
    /* What is not a size, auto or never falls back to auto. */
    cr_assert_eq(threshold("sometimes", 32u << 20), 16u << 20);
    cr_assert_eq(threshold("-5", 32u << 20), 16u << 20);
}

Test(stream_min, empty_is_auto)
{
    cr_assert_eq(threshold("", 32u << 20), 16u << 20);
}
