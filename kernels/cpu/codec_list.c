/*
 * Helpers of the built-in codecs: a buffer list seen as one vector.
 */
#include "codec_list.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

const char *tacl__codec_check_density(const tacl_codec_params_t *params)
{
    static _Thread_local char why[96];

    if (params->density > 0.0 && params->density <= 1.0)
        return NULL;
    snprintf(why, sizeof(why), "density %g is outside (0, 1]",
             params->density);
    return why;
}

void tacl__codec_zero(int nbufs, float *const *dsts, const size_t *counts)
{
    for (int b = 0; b < nbufs; b++)
        if (counts[b])
            memset(dsts[b], 0, counts[b] * sizeof(float));
}

void tacl__codec_scatter(int nbufs, float *const *dsts, const size_t *counts,
                         const uint32_t *idx, const float *val, size_t n,
                         int accumulate)
{
    size_t base = 0, i = 0;

    if (!accumulate)
        tacl__codec_zero(nbufs, dsts, counts);
    for (int b = 0; b < nbufs && i < n; b++) {
        size_t end = base + counts[b];
        for (; i < n && idx[i] < end; i++) {
            if (accumulate)
                dsts[b][idx[i] - base] += val[i];
            else
                dsts[b][idx[i] - base] = val[i];
        }
        base = end;
    }
}

tacl_status_t tacl__codec_mismatch(const char *codec, const char *what,
                                   size_t encoded, size_t expected, int nbufs)
{
    return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                       "codec %s: the encoded data holds %zu %s, the "
                       "buffer list (%d buffers) expects %zu: decode with "
                       "the counts and parameters it was encoded with",
                       codec, encoded, what, nbufs, expected);
}
