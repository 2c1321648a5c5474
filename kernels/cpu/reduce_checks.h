/*
 * The argument checks of the reduce and div kernels, CPU and CUDA alike:
 * what names the kernel in the messages ("reduce", "cuda div").  Static
 * inline, so that the CUDA kernels need not link the CPU ones.  Each
 * returns TACL_OK for good arguments, buffers included unless count is 0.
 */
#ifndef TACL_KERNELS_CPU_REDUCE_CHECKS_H
#define TACL_KERNELS_CPU_REDUCE_CHECKS_H

#include <stddef.h>
#include <stdint.h>

#include "dtype.h"
#include "log.h"

static inline tacl_status_t tacl__reduce_check(const char *what,
                                               const void *dst,
                                               const void *a, const void *b,
                                               size_t count,
                                               tacl_dtype_t dtype,
                                               tacl_op_t op)
{
    if ((unsigned)dtype >= TACL_NUM_DTYPES)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "%s: invalid dtype %d", what, (int)dtype);
    if (op == TACL_AVG)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "%s: avg is not an element op; reduce with sum "
                           "and finish with a division", what);
    if ((unsigned)op >= TACL_NUM_OPS)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL, "%s: invalid op %d",
                           what, (int)op);
    if (tacl__op_is_bitwise(op) && !tacl__dtype_is_integer(dtype))
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "%s: op %s takes integer dtypes only, not %s",
                           what, tacl_op_name(op), tacl_dtype_name(dtype));
    if (count > 0 && (dst == NULL || a == NULL || b == NULL))
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "%s: NULL buffer for %zu elements", what, count);
    return TACL_OK;
}

static inline tacl_status_t tacl__div_check(const char *what, const void *dst,
                                            const void *src, size_t count,
                                            tacl_dtype_t dtype,
                                            uint32_t divisor)
{
    if ((unsigned)dtype >= TACL_NUM_DTYPES)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "%s: invalid dtype %d", what, (int)dtype);
    if (divisor == 0)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "%s: division by zero", what);
    if (count > 0 && (dst == NULL || src == NULL))
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "%s: NULL buffer for %zu elements", what, count);
    return TACL_OK;
}

#endif /* TACL_KERNELS_CPU_REDUCE_CHECKS_H */
