/*
 * What the built-in codecs share: the codec tables they define, and the
 * helpers that treat a list of buffers (a fused group) as one vector
 * whose global index runs through the buffers in order.
 */
#ifndef TACL_KERNELS_CPU_CODEC_LIST_H
#define TACL_KERNELS_CPU_CODEC_LIST_H

#include <stddef.h>
#include <stdint.h>

#include "tacl.h"

/* The built-in codecs, one const table each (codec_cast.c, ...). */
extern const tacl_codec_t tacl__codec_fp16;
extern const tacl_codec_t tacl__codec_bf16;
extern const tacl_codec_t tacl__codec_int8;
extern const tacl_codec_t tacl__codec_int4;
extern const tacl_codec_t tacl__codec_topk;
extern const tacl_codec_t tacl__codec_threshold;
extern const tacl_codec_t tacl__codec_randk;
extern const tacl_codec_t tacl__codec_sign;

/**
 * Error feedback fused with a codec's encoding: encode x + e for every
 * buffer with a residual (errs[b] may be NULL) and leave e = x + e -
 * decode, as tacl_codec_encode's errs says, without the decode.
 */
typedef tacl_status_t (*tacl__codec_feedback_t)(
    const tacl_codec_params_t *params, int nbufs, const float *const *srcs,
    const size_t *counts, float *const *errs, void *dst, size_t *bytes_p);

/**
 * A built-in codec's fused error feedback, or NULL for a codec without
 * one (codec_sparse.c).  Known by the encode slot: the codec table holds
 * copies of the built-ins.
 */
tacl__codec_feedback_t tacl__codec_fused_feedback(const tacl_codec_t *codec);

/** The values of the whole list. */
static inline size_t tacl__codec_total(int nbufs, const size_t *counts)
{
    size_t total = 0;
    for (int b = 0; b < nbufs; b++)
        total += counts[b];
    return total;
}

/**
 * Values kept at a density: ceil(density * total), at least 1 and at
 * most total (0 for an empty list).
 */
static inline size_t tacl__codec_kept(double density, size_t total)
{
    double k = density * (double)total;
    size_t kept = (size_t)k;

    if (total == 0)
        return 0;
    kept += (double)kept < k;
    return kept < 1 ? 1 : kept > total ? total : kept;
}

/** The reason a density is refused, or NULL (check slots). */
const char *tacl__codec_check_density(const tacl_codec_params_t *params);

/**
 * Write val[i] (or add it, with accumulate) at global index idx[i] of the
 * list, for n strictly increasing indices below the list's total; every
 * other value is set to zero unless accumulating.
 */
void tacl__codec_scatter(int nbufs, float *const *dsts, const size_t *counts,
                         const uint32_t *idx, const float *val, size_t n,
                         int accumulate);

/** Set every value of the list to zero (a decode that is not adding). */
void tacl__codec_zero(int nbufs, float *const *dsts, const size_t *counts);

/**
 * The error every decode gives when the encoded data does not fit the
 * buffer list: names the codec and what each side holds.
 */
tacl_status_t tacl__codec_mismatch(const char *codec, const char *what,
                                   size_t encoded, size_t expected,
                                   int nbufs);

#endif /* TACL_KERNELS_CPU_CODEC_LIST_H */
