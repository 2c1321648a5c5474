/*
 * The codec "sign": one bit a value and one scale a buffer, the mean
 * magnitude of its values (EFSignSGD, Karimireddy et al. 2019; 1-bit
 * SGD/onebit, Seide et al. 2014).  Used with error feedback, as both
 * papers do.  Layout: float32 scale[nbufs], then the sign bits of the
 * whole list, bit i % 8 of byte i / 8, set for a negative value.  A value
 * decodes to -scale or +scale (zero to +scale).
 */
#include "codec_list.h"

#include <math.h>
#include <string.h>

static size_t sign_bound(const tacl_codec_params_t *params, int nbufs,
                         const size_t *counts)
{
    size_t total = tacl__codec_total(nbufs, counts);
    return (size_t)nbufs * sizeof(float) + total / 8 + (total % 8 != 0);
}

static tacl_status_t sign_encode(const tacl_codec_params_t *params, int nbufs,
                                 const float *const *srcs,
                                 const size_t *counts, void *dst,
                                 size_t *bytes_p)
{
    uint8_t *bits = (uint8_t *)dst + (size_t)nbufs * sizeof(float);
    size_t g = 0, bytes = sign_bound(params, nbufs, counts);

    memset(bits, 0, bytes - (size_t)nbufs * sizeof(float));
    for (int b = 0; b < nbufs; b++) {
        double sum = 0.0;
        float scale;
        for (size_t i = 0; i < counts[b]; i++, g++) {
            sum += fabsf(srcs[b][i]);
            bits[g / 8] |= (uint8_t)((srcs[b][i] < 0.0f) << (g % 8));
        }
        scale = counts[b] ? (float)(sum / (double)counts[b]) : 0.0f;
        memcpy((float *)dst + b, &scale, sizeof(scale));
    }
    *bytes_p = bytes;
    return TACL_OK;
}

static tacl_status_t sign_decode(const tacl_codec_params_t *params,
                                 const void *src, size_t bytes, int nbufs,
                                 float *const *dsts, const size_t *counts,
                                 int accumulate)
{
    const uint8_t *bits = (const uint8_t *)src +
                          (size_t)nbufs * sizeof(float);
    size_t g = 0, want = sign_bound(params, nbufs, counts);

    if (bytes != want)
        return tacl__codec_mismatch("sign", "bytes", bytes, want, nbufs);
    for (int b = 0; b < nbufs; b++) {
        float scale;
        memcpy(&scale, (const float *)src + b, sizeof(scale));
        for (size_t i = 0; i < counts[b]; i++, g++) {
            float v = (bits[g / 8] >> (g % 8)) & 1 ? -scale : scale;
            dsts[b][i] = accumulate ? dsts[b][i] + v : v;
        }
    }
    return TACL_OK;
}

const tacl_codec_t tacl__codec_sign = {
    .name = "sign",
    .flags = TACL_CODEC_FIXED_SIZE,
    .encoded_bound = sign_bound,
    .encode = sign_encode,
    .decode = sign_decode,
};
