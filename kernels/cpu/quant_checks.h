/*
 * The argument checks of the quantization kernels, CPU and CUDA alike.
 * prefix and what name the kernel in the messages ("" "quantize",
 * "cuda " "dequantize").  Static inline, so that the CUDA kernels need
 * not link the CPU ones.
 */
#ifndef TACL_KERNELS_CPU_QUANT_CHECKS_H
#define TACL_KERNELS_CPU_QUANT_CHECKS_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "log.h"

/* Bits, block and the count of n elements. */
static inline tacl_status_t tacl__quant_check(const char *prefix,
                                              const char *what, size_t n,
                                              uint32_t block, int bits)
{
    if (bits != 8 && bits != 4)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "%s%s: bits must be 8 or 4, not %d", prefix, what,
                           bits);
    if (block == 0)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "%s%s: block size must be at least 1", prefix,
                           what);
    if (n > SIZE_MAX / 8)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "%s%s: %zu elements is too many", prefix, what, n);
    return TACL_OK;
}

/* The full-precision type of quantized values. */
static inline tacl_status_t tacl__quant_check_dtype(const char *prefix,
                                                    const char *what,
                                                    tacl_dtype_t dtype)
{
    if (dtype != TACL_FLOAT32 && dtype != TACL_FLOAT16 &&
        dtype != TACL_BFLOAT16)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "%s%s: dtype %s is not supported; use float32, "
                           "float16 or bfloat16", prefix, what,
                           tacl_dtype_name(dtype));
    return TACL_OK;
}

/*
 * The slices of a quantize_reorder: their count, and unless there is
 * nothing to do (no slice, or empty ones) their total size, the buffers
 * and the order, a slice number for each output slice.
 */
static inline tacl_status_t tacl__quant_check_order(const char *prefix,
                                                    const char *what,
                                                    size_t n_per_slice,
                                                    int nslices,
                                                    const void *src,
                                                    const void *dst,
                                                    const int *order)
{
    if (nslices < 0)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "%s%s: negative slice count %d", prefix, what,
                           nslices);
    if (n_per_slice == 0 || nslices == 0)
        return TACL_OK;
    if (n_per_slice > SIZE_MAX / 8 / (size_t)nslices)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "%s%s: %d slices of %zu elements is too many",
                           prefix, what, nslices, n_per_slice);
    if (src == NULL || dst == NULL || order == NULL)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "%s%s: NULL buffer or order", prefix, what);
    for (int i = 0; i < nslices; i++)
        if (order[i] < 0 || order[i] >= nslices)
            return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                               "%s%s: order[%d] = %d is not a slice in "
                               "[0, %d)", prefix, what, i, order[i],
                               nslices);
    return TACL_OK;
}

/*
 * The inputs and output of a sum of nsrc quantized inputs (at most
 * max_srcs of them) of n elements each.
 */
static inline tacl_status_t tacl__quant_check_sum(const char *prefix,
                                                  const char *what,
                                                  const void *const *srcs_q,
                                                  int nsrc, int max_srcs,
                                                  size_t n, const void *dst)
{
    if (nsrc < 1)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "%s%s: needs at least one input, not %d", prefix,
                           what, nsrc);
    if (srcs_q == NULL)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "%s%s: NULL input array", prefix, what);
    if (nsrc > max_srcs)
        return tacl__error(TACL_ERR_UNSUPPORTED, COLL,
                           "%s%s: %d inputs, at most %d are supported; "
                           "reduce in several calls", prefix, what, nsrc,
                           max_srcs);
    for (int k = 0; k < nsrc; k++)
        if (srcs_q[k] == NULL)
            return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                               "%s%s: input %d is NULL", prefix, what, k);
    if (dst == NULL)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "%s%s: NULL output for %zu elements", prefix,
                           what, n);
    return TACL_OK;
}

#endif /* TACL_KERNELS_CPU_QUANT_CHECKS_H */
