/*
 * One element of a buffer of any dtype, read as a double or written from
 * an integer: what the perf harness's and the tests' exact checks share;
 * and one element of a float32, float16 or bfloat16 buffer as a float,
 * on the host or (under nvcc) the device, as the quantization kernels
 * read and write them.  16-bit floats convert with float_bits.h, so
 * values round exactly as in the kernels.  Everything is static inline:
 * the harness and the tests that use it do not link the kernels.
 */
#ifndef TACL_KERNELS_CPU_ELEM_H
#define TACL_KERNELS_CPU_ELEM_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "float_bits.h"
#include "tacl.h"

/* The dtypes whose elements are a C type, as X(dtype, type). */
#define TACL__ELEM_C_TYPES(X)                                                \
    X(TACL_INT8, int8_t)                                                     \
    X(TACL_UINT8, uint8_t)                                                   \
    X(TACL_INT32, int32_t)                                                   \
    X(TACL_UINT32, uint32_t)                                                 \
    X(TACL_INT64, int64_t)                                                   \
    X(TACL_UINT64, uint64_t)                                                 \
    X(TACL_FLOAT32, float)                                                   \
    X(TACL_FLOAT64, double)

/** Element i of buf as a double; NaN for an unknown dtype. */
static inline double tacl__elem_load(tacl_dtype_t dtype, const void *buf,
                                     size_t i)
{
    switch (dtype) {
#define ELEM_LOAD_(dt, T)                                                    \
    case dt:                                                                 \
        return (double)((const T *)buf)[i];
        TACL__ELEM_C_TYPES(ELEM_LOAD_)
#undef ELEM_LOAD_
    case TACL_FLOAT16:
        return tacl__half_to_float_inl(((const uint16_t *)buf)[i]);
    case TACL_BFLOAT16:
        return tacl__bf16_to_float_inl(((const uint16_t *)buf)[i]);
    default:
        return NAN;
    }
}

/**
 * Store the integer v as element i of buf: exact where the dtype holds
 * it; nothing for an unknown dtype.
 */
static inline void tacl__elem_store_int(tacl_dtype_t dtype, void *buf,
                                        size_t i, int64_t v)
{
    switch (dtype) {
#define ELEM_STORE_(dt, T)                                                   \
    case dt:                                                                 \
        ((T *)buf)[i] = (T)v;                                                \
        break;
        TACL__ELEM_C_TYPES(ELEM_STORE_)
#undef ELEM_STORE_
    case TACL_FLOAT16:
        ((uint16_t *)buf)[i] = tacl__float_to_half_inl((float)v);
        break;
    case TACL_BFLOAT16:
        ((uint16_t *)buf)[i] = tacl__float_to_bf16_inl((float)v);
        break;
    default:
        break;
    }
}

/** Element i of a float32, float16 or bfloat16 buffer, as a float. */
TACL_HD static inline float tacl__elem_load_float(tacl_dtype_t dtype,
                                                  const void *buf, size_t i)
{
    if (dtype == TACL_FLOAT32)
        return ((const float *)buf)[i];
    uint16_t h = ((const uint16_t *)buf)[i];
    return dtype == TACL_FLOAT16 ? tacl__half_to_float_inl(h)
                                 : tacl__bf16_to_float_inl(h);
}

/**
 * Store v, rounded to nearest-even, as element i of a float32, float16
 * or bfloat16 buffer.
 */
TACL_HD static inline void tacl__elem_store_float(tacl_dtype_t dtype,
                                                  void *buf, size_t i,
                                                  float v)
{
    if (dtype == TACL_FLOAT32)
        ((float *)buf)[i] = v;
    else if (dtype == TACL_FLOAT16)
        ((uint16_t *)buf)[i] = tacl__float_to_half_inl(v);
    else
        ((uint16_t *)buf)[i] = tacl__float_to_bf16_inl(v);
}

#endif /* TACL_KERNELS_CPU_ELEM_H */
