/*
 * The sparsifying codecs "topk" and "threshold" (Deep Gradient
 * Compression, Lin et al. 2018; the thesis' DGC, chapter 5).  Both keep
 * values of the largest magnitudes of the whole list (one selection for a
 * fused group) and send them with their global indices:
 *
 *     uint64 total      values of the list (checked when decoding)
 *     uint64 n          values kept
 *     uint32 idx[n]     global indices, strictly increasing
 *     float  val[n]     the values, exact
 *
 * topk keeps exactly k = ceil(density * total).  threshold estimates the
 * k-th magnitude from a strided sample of at most 4096 values, as DGC
 * does to avoid a full selection, and keeps every value at or above it;
 * when that would keep more than 2k values it falls back to the exact
 * top k, so its size is bounded by 2k.  Indices are 32 bits: a list of
 * 2^32 values or more is refused.
 */
#include "codec_list.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

#define SPARSE_HEADER (2 * sizeof(uint64_t))
#define SPARSE_SAMPLE 4096u

static size_t sparse_bytes(size_t n)
{
    return SPARSE_HEADER + n * (sizeof(uint32_t) + sizeof(float));
}

/* Most values threshold keeps: 2k, at most the list. */
static size_t threshold_cap(double density, size_t total)
{
    size_t k = tacl__codec_kept(density, total);
    return 2 * k < total ? 2 * k : total;
}

static size_t topk_bound(const tacl_codec_params_t *params, int nbufs,
                         const size_t *counts)
{
    return sparse_bytes(
        tacl__codec_kept(params->density, tacl__codec_total(nbufs, counts)));
}

static size_t threshold_bound(const tacl_codec_params_t *params, int nbufs,
                              const size_t *counts)
{
    return sparse_bytes(
        threshold_cap(params->density, tacl__codec_total(nbufs, counts)));
}

/* The k-th largest (1-based) of m values, reordering them (Hoare's
 * selection, descending). */
static float kth_largest(float *a, size_t m, size_t k)
{
    ptrdiff_t lo = 0, hi = (ptrdiff_t)m - 1, want = (ptrdiff_t)k - 1;

    while (lo < hi) {
        float pivot = a[lo + (hi - lo) / 2];
        ptrdiff_t i = lo, j = hi;
        while (i <= j) {
            while (a[i] > pivot)
                i++;
            while (a[j] < pivot)
                j--;
            if (i <= j) {
                float t = a[i];
                a[i++] = a[j];
                a[j--] = t;
            }
        }
        if (want <= j)
            hi = j;
        else if (want >= i)
            lo = i;
        else
            break;
    }
    return a[want];
}

/*
 * Write the sparse encoding of v: every value whose magnitude is above t,
 * then those equal to t, in index order, until limit values are kept.
 */
static size_t sparse_emit(const float *v, size_t total, float t, size_t limit,
                          void *dst)
{
    uint64_t head[2] = {total, 0};
    size_t above = 0, n = 0, ties;
    uint32_t *idx = (uint32_t *)((uint8_t *)dst + SPARSE_HEADER);
    float *val;

    for (size_t i = 0; i < total; i++)
        above += fabsf(v[i]) > t;
    ties = limit - above;
    val = (float *)(idx + limit);
    for (size_t i = 0; i < total && n < limit; i++) {
        float m = fabsf(v[i]);
        if (m > t || (m == t && ties > 0)) {
            ties -= m == t;
            idx[n] = (uint32_t)i;
            val[n++] = v[i];
        }
    }
    /* Values follow the n indices actually written. */
    memmove(idx + n, val, n * sizeof(float));
    head[1] = n;
    memcpy(dst, head, sizeof(head));
    return sparse_bytes(n);
}

/* The magnitude of the k-th largest of m values taken every stride. */
static tacl_status_t magnitude_rank(const float *v, size_t m, size_t stride,
                                    size_t k, float *t_p)
{
    float *mag = malloc(m * sizeof(float));

    if (mag == NULL)
        return tacl__error(TACL_ERR_NO_MEMORY, ALLOC,
                           "codec: no memory for %zu magnitudes", m);
    for (size_t i = 0; i < m; i++)
        mag[i] = fabsf(v[i * stride]);
    *t_p = kth_largest(mag, m, k);
    free(mag);
    return TACL_OK;
}

static tacl_status_t sparse_encode(int exact, double density, int nbufs,
                                   const float *const *srcs,
                                   const size_t *counts, void *dst,
                                   size_t *bytes_p)
{
    size_t total = tacl__codec_total(nbufs, counts);
    size_t k = tacl__codec_kept(density, total), limit = k;
    tacl_status_t st = TACL_OK;
    float t = 0.0f, *v;

    if (total > UINT32_MAX)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "codec %s: %zu values; sparse codecs take fewer "
                           "than 2^32 a group",
                           exact ? "topk" : "threshold", total);
    v = tacl__codec_gather(nbufs, srcs, counts, total);
    if (v == NULL)
        return TACL_ERR_NO_MEMORY;
    if (total > 0 && !exact) {
        size_t m = total < SPARSE_SAMPLE ? total : SPARSE_SAMPLE;
        size_t above = 0;
        st = magnitude_rank(v, m, total / m, tacl__codec_kept(density, m),
                            &t);
        for (size_t i = 0; i < total; i++)
            above += fabsf(v[i]) >= t;
        limit = threshold_cap(density, total);
        exact = above > limit;
        limit = exact ? k : above;
    }
    if (st == TACL_OK && total > 0 && exact)
        st = magnitude_rank(v, total, 1, k, &t);
    if (st == TACL_OK)
        *bytes_p = sparse_emit(v, total, t, limit, dst);
    free(v);
    return st;
}

static tacl_status_t sparse_decode(const char *name, const void *src,
                                   size_t bytes, int nbufs,
                                   float *const *dsts, const size_t *counts,
                                   int accumulate)
{
    size_t total = tacl__codec_total(nbufs, counts);
    const uint32_t *idx = (const uint32_t *)((const uint8_t *)src +
                                             SPARSE_HEADER);
    uint64_t head[2];

    if (bytes < SPARSE_HEADER)
        return tacl__codec_mismatch(name, "bytes", bytes, SPARSE_HEADER,
                                    nbufs);
    memcpy(head, src, sizeof(head));
    if (head[0] != total)
        return tacl__codec_mismatch(name, "values", (size_t)head[0], total,
                                    nbufs);
    if (head[1] > total || bytes != sparse_bytes((size_t)head[1]))
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "codec %s: %zu bytes do not hold %llu kept "
                           "values: the encoded data is damaged",
                           name, bytes, (unsigned long long)head[1]);
    for (uint64_t i = 0; i < head[1]; i++)
        if (idx[i] >= total || (i > 0 && idx[i] <= idx[i - 1]))
            return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                               "codec %s: index %u at %llu is out of order "
                               "or range: the encoded data is damaged",
                               name, idx[i], (unsigned long long)i);
    tacl__codec_scatter(nbufs, dsts, counts, idx,
                        (const float *)(idx + head[1]), (size_t)head[1],
                        accumulate);
    return TACL_OK;
}

/* One sparse codec: its two slots and its table. */
#define SPARSE_CODEC(name_, exact_)                                          \
    static tacl_status_t name_##_encode(const tacl_codec_params_t *params,   \
                                        int nbufs, const float *const *srcs, \
                                        const size_t *counts, void *dst,     \
                                        size_t *bytes_p)                     \
    {                                                                        \
        return sparse_encode(exact_, params->density, nbufs, srcs, counts,   \
                             dst, bytes_p);                                  \
    }                                                                        \
    static tacl_status_t name_##_decode(const tacl_codec_params_t *params,   \
                                        const void *src, size_t bytes,       \
                                        int nbufs, float *const *dsts,       \
                                        const size_t *counts,                \
                                        int accumulate)                      \
    {                                                                        \
        return sparse_decode(#name_, src, bytes, nbufs, dsts, counts,        \
                             accumulate);                                    \
    }                                                                        \
    const tacl_codec_t tacl__codec_##name_ = {                               \
        .name = #name_,                                                      \
        .flags = 0,                                                          \
        .check = tacl__codec_check_density,                                  \
        .encoded_bound = name_##_bound,                                      \
        .encode = name_##_encode,                                            \
        .decode = name_##_decode,                                            \
    };

SPARSE_CODEC(topk, 1)
SPARSE_CODEC(threshold, 0)
