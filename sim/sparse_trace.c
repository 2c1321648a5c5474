/*
 * Sparse-gradient traces (design in sparse_trace.h).  A draw is a
 * binary search of the cumulative law: about 20 comparisons for a
 * million rows, so a rank costs O(draws log nrows), not O(nrows).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "sparse_trace.h"

tacl_status_t tacl__sparse_trace_init(tacl__sparse_trace_t *t,
                                      uint64_t nrows, double s,
                                      uint64_t seed)
{
    double sum = 0;

    memset(t, 0, sizeof(*t));
    if (nrows == 0 || !(s >= 0) || s > 8)
        return TACL_ERR_INVALID_ARG;
    t->cdf = malloc(nrows * sizeof(*t->cdf));
    t->seen = calloc(nrows, 1);
    if (t->cdf == NULL || t->seen == NULL) {
        tacl__sparse_trace_fini(t);
        return TACL_ERR_NO_MEMORY;
    }
    t->nrows = nrows;
    t->s = s;
    t->seed = seed;
    for (uint64_t i = 0; i < nrows; i++) {
        sum += pow((double)(i + 1), -s);
        t->cdf[i] = sum;
    }
    for (uint64_t i = 0; i < nrows; i++)
        t->cdf[i] /= sum;
    t->cdf[nrows - 1] = 1.0;
    return TACL_OK;
}

void tacl__sparse_trace_fini(tacl__sparse_trace_t *t)
{
    free(t->cdf);
    free(t->seen);
    memset(t, 0, sizeof(*t));
}

/* The first row whose cumulative probability reaches u. */
static uint64_t draw(const tacl__sparse_trace_t *t, double u)
{
    uint64_t lo = 0, hi = t->nrows - 1;

    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;

        if (t->cdf[mid] < u)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The next token of the random stream at *state. */
static uint64_t next_token(const tacl__sparse_trace_t *t, uint64_t *state)
{
    /* 53 random bits, uniform in (0, 1]. */
    double u = (double)((tacl__splitmix64(state) >> 11) + 1) * 0x1p-53;

    return draw(t, u);
}

/* The stream's first state: rank r's stream is stream r + 1. */
static uint64_t stream_state(const tacl__sparse_trace_t *t, uint64_t stream)
{
    return t->seed ^ (0x5851f42d4c957f2dull * stream);
}

void tacl__sparse_trace_rank(tacl__sparse_trace_t *t, int rank, size_t nnz,
                             int64_t *idx, size_t *got_p)
{
    uint64_t state = stream_state(t, (uint64_t)rank + 1);
    uint64_t limit = 64 * (uint64_t)nnz > 16 * t->nrows
                         ? 64 * (uint64_t)nnz : 16 * t->nrows;
    size_t got = 0;

    if (nnz > t->nrows)
        nnz = (size_t)t->nrows;
    for (uint64_t k = 0; k < limit && got < nnz; k++) {
        uint64_t row = next_token(t, &state);

        if (!t->seen[row]) {
            t->seen[row] = 1;
            idx[got++] = (int64_t)row;
        }
    }
    for (size_t i = 0; i < got; i++)
        t->seen[idx[i]] = 0;
    *got_p = got;
}

void tacl__sparse_trace_tokens(const tacl__sparse_trace_t *t,
                               uint64_t stream, size_t n, int64_t *tok)
{
    uint64_t state = stream_state(t, stream);

    for (size_t i = 0; i < n; i++)
        tok[i] = (int64_t)next_token(t, &state);
}
