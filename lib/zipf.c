/*
 * Zipf token streams (tacl.h, tacl_zipf_*): the public face of the
 * simulator's sparse-trace law (sim/sparse_trace.c), so a consumer that
 * sees only tacl.h (the engine's word embedding) draws its tokens from
 * the same law the traces, tacl-sim and the benchmarks use, not from a
 * second sampler of its own.
 */
#include <stdlib.h>

#include "common.h"
#include "log.h"
#include "sparse_trace.h"

struct tacl_zipf {
    tacl__sparse_trace_t trace;
};

TACL_EXPORT tacl_status_t tacl_zipf_create(uint64_t nrows, double s,
                                           uint64_t seed,
                                           tacl_zipf_t *zipf_p)
{
    tacl_zipf_t z;
    tacl_status_t st;

    if (zipf_p == NULL)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "zipf: the output pointer is NULL");
    if (nrows == 0)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "zipf: a vocabulary of 0 tokens");
    if (!(s >= 0) || s > 8)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "zipf: exponent %g is outside [0, 8]", s);
    z = malloc(sizeof(*z));
    if (z == NULL)
        return tacl__error(TACL_ERR_NO_MEMORY, COLL,
                           "zipf: no memory for the law");
    st = tacl__sparse_trace_init(&z->trace, nrows, s, seed);
    if (st != TACL_OK) {
        free(z);
        return tacl__error(st, COLL, "zipf: no memory for the law of "
                           "%llu tokens", (unsigned long long)nrows);
    }
    *zipf_p = z;
    return TACL_OK;
}

TACL_EXPORT tacl_status_t tacl_zipf_draw(tacl_zipf_t zipf, uint64_t stream,
                                         size_t n, int64_t *tokens)
{
    if (zipf == NULL || (tokens == NULL && n > 0))
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "zipf: a NULL %s", zipf == NULL ? "law"
                                                           : "token buffer");
    tacl__sparse_trace_tokens(&zipf->trace, stream, n, tokens);
    return TACL_OK;
}

TACL_EXPORT void tacl_zipf_destroy(tacl_zipf_t zipf)
{
    if (zipf == NULL)
        return;
    tacl__sparse_trace_fini(&zipf->trace);
    free(zipf);
}
