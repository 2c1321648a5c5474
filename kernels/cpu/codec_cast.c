/*
 * The cast codecs "fp16" and "bf16": every value rounded to 16 bits
 * (nearest-even), the buffers of a list one after another.  The encoded
 * array is of float16 (bfloat16) values, so two encodings add as that
 * type: SUMMABLE.  The conversions are reduce.h's vector loops.
 */
#include "codec_list.h"
#include "reduce.h"

#include <stdint.h>

static size_t cast_bound(const tacl_codec_params_t *params, int nbufs,
                         const size_t *counts)
{
    return tacl__codec_total(nbufs, counts) * sizeof(uint16_t);
}

static tacl_status_t cast_encode(int bf16, int nbufs,
                                 const float *const *srcs,
                                 const size_t *counts, void *dst,
                                 size_t *bytes_p)
{
    uint16_t *out = dst;

    for (int b = 0; b < nbufs; b++) {
        if (bf16)
            tacl__float_to_bf16_n(out, srcs[b], counts[b]);
        else
            tacl__float_to_half_n(out, srcs[b], counts[b]);
        out += counts[b];
    }
    *bytes_p = (size_t)(out - (uint16_t *)dst) * sizeof(uint16_t);
    return TACL_OK;
}

static tacl_status_t cast_decode(int bf16, const void *src, size_t bytes,
                                 int nbufs, float *const *dsts,
                                 const size_t *counts, int accumulate)
{
    const uint16_t *in = src;
    size_t total = tacl__codec_total(nbufs, counts);

    if (bytes != total * sizeof(uint16_t))
        return tacl__codec_mismatch(bf16 ? "bf16" : "fp16", "bytes", bytes,
                                    total * sizeof(uint16_t), nbufs);
    for (int b = 0; b < nbufs; b++) {
        float *d = dsts[b];
        if (!accumulate && bf16)
            tacl__bf16_to_float_n(d, in, counts[b]);
        else if (!accumulate)
            tacl__half_to_float_n(d, in, counts[b]);
        for (size_t i = 0; accumulate && i < counts[b]; i++)
            d[i] += bf16 ? tacl__bf16_to_float(in[i])
                         : tacl__half_to_float(in[i]);
        in += counts[b];
    }
    return TACL_OK;
}

/* One cast codec: its two slots and its table. */
#define CAST_CODEC(name_, bf16_, dtype_)                                     \
    static tacl_status_t name_##_encode(const tacl_codec_params_t *params,   \
                                        int nbufs, const float *const *srcs, \
                                        const size_t *counts, void *dst,     \
                                        size_t *bytes_p)                     \
    {                                                                        \
        return cast_encode(bf16_, nbufs, srcs, counts, dst, bytes_p);        \
    }                                                                        \
    static tacl_status_t name_##_decode(const tacl_codec_params_t *params,   \
                                        const void *src, size_t bytes,       \
                                        int nbufs, float *const *dsts,       \
                                        const size_t *counts,                \
                                        int accumulate)                      \
    {                                                                        \
        return cast_decode(bf16_, src, bytes, nbufs, dsts, counts,           \
                           accumulate);                                      \
    }                                                                        \
    const tacl_codec_t tacl__codec_##name_ = {                               \
        .name = #name_,                                                      \
        .flags = TACL_CODEC_SUMMABLE | TACL_CODEC_FIXED_SIZE,                \
        .sum_dtype = dtype_,                                                 \
        .encoded_bound = cast_bound,                                         \
        .encode = name_##_encode,                                            \
        .decode = name_##_decode,                                            \
    };

CAST_CODEC(fp16, 0, TACL_FLOAT16)
CAST_CODEC(bf16, 1, TACL_BFLOAT16)
