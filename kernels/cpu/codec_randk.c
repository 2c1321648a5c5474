/*
 * The codec "randk": k = ceil(density * total) values of the list at
 * indices drawn from params->seed, which every rank shares (Stich et al.,
 * "Sparsified SGD with memory", 2018).  The indices are regenerated from
 * the seed when decoding, so only the k float32 values are sent: the
 * encoding is FIXED_SIZE, and encodings made with one seed add
 * elementwise (SUMMABLE as float32), which is what lets an all-reduce sum
 * them without decoding.  The draw is stratified: the list is cut into k
 * near-equal strata and one index is drawn in each, so the indices are
 * distinct and increasing with no set to keep.  Values are not rescaled;
 * error feedback carries what was dropped.
 */
#include "codec_list.h"

#include <stdlib.h>

#include "log.h"

/* SplitMix64 (Steele et al.): a 64-bit hash of a counter. */
static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* The i-th of k indices of a list of total values, for a seed. */
static size_t randk_index(uint64_t seed, size_t i, size_t k, size_t total)
{
    size_t lo = (size_t)((unsigned __int128)i * total / k);
    size_t hi = (size_t)((unsigned __int128)(i + 1) * total / k);
    return lo + (size_t)(mix64(seed ^ mix64(i)) % (hi - lo));
}

static size_t randk_bound(const tacl_codec_params_t *params, int nbufs,
                          const size_t *counts)
{
    return tacl__codec_kept(params->density,
                            tacl__codec_total(nbufs, counts)) *
           sizeof(float);
}

static tacl_status_t randk_encode(const tacl_codec_params_t *params,
                                  int nbufs, const float *const *srcs,
                                  const size_t *counts, void *dst,
                                  size_t *bytes_p)
{
    size_t total = tacl__codec_total(nbufs, counts);
    size_t k = tacl__codec_kept(params->density, total), base = 0, i = 0;
    float *val = dst;

    for (int b = 0; b < nbufs && i < k; b++) {
        size_t end = base + counts[b];
        for (size_t g;
             i < k && (g = randk_index(params->seed, i, k, total)) < end; i++)
            val[i] = srcs[b][g - base];
        base = end;
    }
    *bytes_p = k * sizeof(float);
    return TACL_OK;
}

static tacl_status_t randk_decode(const tacl_codec_params_t *params,
                                  const void *src, size_t bytes, int nbufs,
                                  float *const *dsts, const size_t *counts,
                                  int accumulate)
{
    size_t total = tacl__codec_total(nbufs, counts);
    size_t k = tacl__codec_kept(params->density, total);
    uint32_t *idx;

    if (bytes != k * sizeof(float))
        return tacl__codec_mismatch("randk", "bytes", bytes,
                                    k * sizeof(float), nbufs);
    if (total > UINT32_MAX)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "codec randk: %zu values; it takes fewer than "
                           "2^32 a group",
                           total);
    idx = malloc((k ? k : 1) * sizeof(uint32_t));
    if (idx == NULL)
        return tacl__error(TACL_ERR_NO_MEMORY, ALLOC,
                           "codec randk: no memory for %zu indices", k);
    for (size_t i = 0; i < k; i++)
        idx[i] = (uint32_t)randk_index(params->seed, i, k, total);
    tacl__codec_scatter(nbufs, dsts, counts, idx, src, k, accumulate);
    free(idx);
    return TACL_OK;
}

const tacl_codec_t tacl__codec_randk = {
    .name = "randk",
    .flags = TACL_CODEC_SUMMABLE | TACL_CODEC_FIXED_SIZE,
    .sum_dtype = TACL_FLOAT32,
    .check = tacl__codec_check_density,
    .encoded_bound = randk_bound,
    .encode = randk_encode,
    .decode = randk_decode,
};
