/*
 * The block-quantizer codecs "int8" and "int4": ZeRO++'s block
 * quantization (quant.h: one float32 scale per block, symmetric, nearest
 * even) applied to each buffer of the list in turn, the quantized
 * buffers one after another.  These are the very kernels of qwZ and qgZ,
 * called, not restated.  Blocks do not cross buffers, so every tensor
 * keeps scales of its own.
 */
#include "codec_list.h"
#include "quant.h"

#include <stdio.h>

#define QUANT_DEFAULT_BLOCK 256u

static uint32_t quant_block(const tacl_codec_params_t *params)
{
    return params->block ? params->block : QUANT_DEFAULT_BLOCK;
}

static const char *quant_check(int bits, const tacl_codec_params_t *params)
{
    static _Thread_local char why[96];

    if (params->bits == bits)
        return NULL;
    snprintf(why, sizeof(why), "bits %d: int%d quantizes to %d bits",
             params->bits, bits, bits);
    return why;
}

static size_t quant_bound(const tacl_codec_params_t *params, int nbufs,
                          const size_t *counts)
{
    size_t bytes = 0;

    for (int b = 0; b < nbufs; b++)
        bytes += tacl__quant_bytes(counts[b], quant_block(params),
                                   params->bits);
    return bytes;
}

static tacl_status_t quant_encode(const tacl_codec_params_t *params,
                                  int nbufs, const float *const *srcs,
                                  const size_t *counts, void *dst,
                                  size_t *bytes_p)
{
    uint8_t *out = dst;

    for (int b = 0; b < nbufs; b++) {
        tacl_status_t st = tacl__quantize(srcs[b], counts[b], TACL_FLOAT32,
                                          quant_block(params), params->bits,
                                          out);
        if (st != TACL_OK)
            return st;
        out += tacl__quant_bytes(counts[b], quant_block(params),
                                 params->bits);
    }
    *bytes_p = (size_t)(out - (uint8_t *)dst);
    return TACL_OK;
}

static tacl_status_t quant_decode(const tacl_codec_params_t *params,
                                  const void *src, size_t bytes, int nbufs,
                                  float *const *dsts, const size_t *counts,
                                  int accumulate)
{
    const uint8_t *in = src;
    size_t want = quant_bound(params, nbufs, counts);

    if (bytes != want)
        return tacl__codec_mismatch(params->bits == 8 ? "int8" : "int4",
                                    "bytes", bytes, want, nbufs);
    for (int b = 0; b < nbufs; b++) {
        const void *one = in;
        tacl_status_t st = tacl__dequant_reduce(&one, 1, counts[b],
                                                quant_block(params),
                                                params->bits, TACL_FLOAT32,
                                                dsts[b], accumulate);
        if (st != TACL_OK)
            return st;
        in += tacl__quant_bytes(counts[b], quant_block(params), params->bits);
    }
    return TACL_OK;
}

/* One quantizer codec: its check and its table. */
#define QUANT_CODEC(bits_)                                                   \
    static const char *int##bits_##_check(const tacl_codec_params_t *p)      \
    {                                                                        \
        return quant_check(bits_, p);                                        \
    }                                                                        \
    const tacl_codec_t tacl__codec_int##bits_ = {                            \
        .name = "int" #bits_,                                                \
        .flags = TACL_CODEC_FIXED_SIZE,                                      \
        .check = int##bits_##_check,                                         \
        .encoded_bound = quant_bound,                                        \
        .encode = quant_encode,                                              \
        .decode = quant_decode,                                              \
    };

QUANT_CODEC(8)
QUANT_CODEC(4)
