/*
 * The configuration table's validation (core/config.c): each typed entry
 * takes exactly its values, a refused one reads as the default with
 * source "invalid", an empty one as unset, and tacl__config_report()
 * counts one warning per refused value and per unknown TACL_ variable.
 * Each case sets variables, re-reads the configuration and unsets them.
 */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "config.h"

static void set(const char *name, const char *value)
{
    if (value == NULL)
        unsetenv(name);
    else
        setenv(name, value, 1);
    tacl__config_reload();
}

Test(config, numbers_and_sizes)
{
    set("TACL_TIMEOUT", "2.5");
    cr_expect_float_eq(tacl__config_double(TACL_CFG_TIMEOUT), 2.5, 1e-12);
    cr_expect_eq(tacl__config_source(TACL_CFG_TIMEOUT), TACL_CFG_SRC_ENV);
    set("TACL_TIMEOUT", "abc");
    cr_expect_float_eq(tacl__config_double(TACL_CFG_TIMEOUT), 60, 1e-12);
    cr_expect_eq(tacl__config_source(TACL_CFG_TIMEOUT),
                 TACL_CFG_SRC_INVALID);
    cr_expect_str_eq(tacl__config_raw(TACL_CFG_TIMEOUT), "abc");
    cr_expect_str_eq(tacl__config_str(TACL_CFG_TIMEOUT), "60");
    /* Below the minimum, trailing garbage, not finite: refused. */
    set("TACL_TIMEOUT", "0");
    cr_expect_eq(tacl__config_source(TACL_CFG_TIMEOUT),
                 TACL_CFG_SRC_INVALID);
    set("TACL_TIMEOUT", "5s");
    cr_expect_eq(tacl__config_source(TACL_CFG_TIMEOUT),
                 TACL_CFG_SRC_INVALID);
    set("TACL_TIMEOUT", "inf");
    cr_expect_eq(tacl__config_source(TACL_CFG_TIMEOUT),
                 TACL_CFG_SRC_INVALID);
    set("TACL_TIMEOUT", NULL);
    set("TACL_CHUNK_SIZE", "2M");
    cr_expect_eq(tacl__config_size(TACL_CFG_CHUNK_SIZE), 2u << 20);
    set("TACL_CHUNK_SIZE", "64KiB");
    cr_expect_eq(tacl__config_size(TACL_CFG_CHUNK_SIZE), 64u << 10);
    set("TACL_CHUNK_SIZE", "0");
    cr_expect_eq(tacl__config_size(TACL_CFG_CHUNK_SIZE), 1u << 20);
    set("TACL_CHUNK_SIZE", "1M2");
    cr_expect_eq(tacl__config_source(TACL_CFG_CHUNK_SIZE),
                 TACL_CFG_SRC_INVALID);
    set("TACL_CHUNK_SIZE", "9999999999G");
    cr_expect_eq(tacl__config_source(TACL_CFG_CHUNK_SIZE),
                 TACL_CFG_SRC_INVALID);
    set("TACL_CHUNK_SIZE", NULL);
    set("TACL_SHM_SPIN", "-1");
    cr_expect_eq(tacl__config_int(TACL_CFG_SHM_SPIN), 2000);
    set("TACL_SHM_SPIN", NULL);
}

Test(config, booleans_words_and_lists)
{
    static const char *const yes[] = {"1", "true", "YES", "on"};
    static const char *const no[] = {"0", "false", "No", "OFF"};

    for (int i = 0; i < 4; i++) {
        set("TACL_CHECK", yes[i]);
        cr_expect_eq(tacl__config_bool(TACL_CFG_CHECK), 1, "%s", yes[i]);
        set("TACL_CHECK", no[i]);
        cr_expect_eq(tacl__config_bool(TACL_CFG_CHECK), 0, "%s", no[i]);
    }
    set("TACL_CHECK", "2");
    cr_expect_eq(tacl__config_source(TACL_CFG_CHECK), TACL_CFG_SRC_INVALID);
    cr_expect_eq(tacl__config_bool(TACL_CFG_CHECK), 0);
    set("TACL_CHECK", NULL);
    set("TACL_SHM_MODE", "CMA");
    cr_expect_eq(tacl__config_word(TACL_CFG_SHM_MODE), 1);
    set("TACL_SHM_MODE", "fast");
    cr_expect_eq(tacl__config_word(TACL_CFG_SHM_MODE), 0);
    cr_expect_eq(tacl__config_source(TACL_CFG_SHM_MODE),
                 TACL_CFG_SRC_INVALID);
    set("TACL_SHM_MODE", NULL);
    /* A size or a word. */
    set("TACL_STREAM_MIN", "never");
    cr_expect_eq(tacl__config_word(TACL_CFG_STREAM_MIN), 1);
    set("TACL_STREAM_MIN", "16M");
    cr_expect_eq(tacl__config_word(TACL_CFG_STREAM_MIN), -1);
    cr_expect_eq(tacl__config_size(TACL_CFG_STREAM_MIN), 16u << 20);
    set("TACL_STREAM_MIN", NULL);
    /* The tuner's mode: one of two words; anything else is the model. */
    set("TACL_TUNER", "SIM");
    cr_expect_eq(tacl__config_word(TACL_CFG_TUNER), 1);
    cr_expect_eq(tacl__config_source(TACL_CFG_TUNER), TACL_CFG_SRC_ENV);
    set("TACL_TUNER", "simulate");
    cr_expect_eq(tacl__config_source(TACL_CFG_TUNER), TACL_CFG_SRC_INVALID);
    cr_expect_eq(tacl__config_word(TACL_CFG_TUNER), 0);
    cr_expect_str_eq(tacl__config_str(TACL_CFG_TUNER), "model");
    cr_expect_eq(tacl__config_report(), 1);
    set("TACL_TUNER", NULL);
    set("TACL_DEBUG_SUBSYS", "init,^COLL,TUNE");
    cr_expect_eq(tacl__config_source(TACL_CFG_DEBUG_SUBSYS),
                 TACL_CFG_SRC_ENV);
    set("TACL_DEBUG_SUBSYS", "INIT,,TUNE");
    cr_expect_eq(tacl__config_source(TACL_CFG_DEBUG_SUBSYS),
                 TACL_CFG_SRC_INVALID);
    set("TACL_DEBUG_SUBSYS", "COLLS");
    cr_expect_str_eq(tacl__config_str(TACL_CFG_DEBUG_SUBSYS), "INIT,ENV");
    set("TACL_DEBUG_SUBSYS", NULL);
}

Test(config, empty_is_unset_and_strings_are_kept)
{
    set("TACL_CHUNK_SIZE", "");
    cr_expect_eq(tacl__config_source(TACL_CFG_CHUNK_SIZE),
                 TACL_CFG_SRC_DEFAULT);
    cr_expect_eq(tacl__config_size(TACL_CFG_CHUNK_SIZE), 1u << 20);
    set("TACL_CHUNK_SIZE", NULL);
    set("TACL_ALGO", "allgather=ring");
    cr_expect_str_eq(tacl__config_str(TACL_CFG_ALGO), "allgather=ring");
    cr_expect_eq(tacl__config_source(TACL_CFG_ALGO), TACL_CFG_SRC_ENV);
    set("TACL_ALGO", NULL);
}

Test(config, report_counts_bad_and_unknown_variables)
{
    set("TACL_DEBUG", "NONE");
    cr_expect_eq(tacl__config_report(), 0);
    set("TACL_TIMEOUT", "soon");
    set("TACL_NO_SUCH_KNOB", "1");
    set("TACL_CHUNKSIZE", "1M");
    cr_expect_eq(tacl__config_report(), 3);
    set("TACL_TIMEOUT", NULL);
    set("TACL_NO_SUCH_KNOB", NULL);
    set("TACL_CHUNKSIZE", NULL);
    cr_expect_eq(tacl__config_report(), 0);
    set("TACL_DEBUG", NULL);
}

/* A renamed entry is read under its former name too; the new one wins,
 * and the former is no unknown variable. */
Test(config, former_names_still_read)
{
    set("TACL_DEBUG", "NONE");
    set("TACL_UCX_CUDA_CHUNK", "64K");
    cr_expect_eq(tacl__config_size(TACL_CFG_NET_CUDA_CHUNK), 64u << 10);
    cr_expect_eq(tacl__config_source(TACL_CFG_NET_CUDA_CHUNK),
                 TACL_CFG_SRC_ENV);
    cr_expect_eq(tacl__config_report(), 0);
    set("TACL_NET_CUDA_CHUNK", "128K");
    cr_expect_eq(tacl__config_size(TACL_CFG_NET_CUDA_CHUNK), 128u << 10);
    set("TACL_NET_CUDA_CHUNK", NULL);
    set("TACL_UCX_CUDA_CHUNK", NULL);
    cr_expect_eq(tacl__config_size(TACL_CFG_NET_CUDA_CHUNK), 2u << 20);
    set("TACL_UCX_CUDA_CHUNKS", "6");
    cr_expect_eq(tacl__config_int(TACL_CFG_NET_CUDA_CHUNKS), 6);
    set("TACL_UCX_CUDA_CHUNKS", NULL);
    set("TACL_DEBUG", NULL);
}
