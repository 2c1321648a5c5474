/*
 * CPU reduction kernels: dst[i] = a[i] op b[i] for every dtype and op,
 * written as plain loops over restrict-free but simple element types so
 * that the compiler vectorizes them.  dst may equal a or b (in-place).
 * float16 and bfloat16 are converted to float32, combined, and rounded back
 * to nearest-even.  AVG is not an element op: builders reduce with SUM and
 * finish with tacl__div_cpu().
 */
#ifndef TACL_KERNELS_CPU_REDUCE_H
#define TACL_KERNELS_CPU_REDUCE_H

#include <stddef.h>
#include <stdint.h>

#include "tacl.h"

/**
 * dst = a op b over count elements.  op is SUM, PROD, MAX, MIN or, for
 * the integer dtypes only, BAND, BOR or BXOR.
 */
tacl_status_t tacl__reduce_cpu(void *dst, const void *a, const void *b,
                               size_t count, tacl_dtype_t dtype,
                               tacl_op_t op);

/**
 * dst = src / divisor over count elements: exact division for floating
 * types (rounded once, to nearest-even), truncating for integer types.
 */
tacl_status_t tacl__div_cpu(void *dst, const void *src, size_t count,
                            tacl_dtype_t dtype, uint32_t divisor);

/* Conversions, round to nearest-even, NaN preserved as a quiet NaN. */
float tacl__half_to_float(uint16_t h);
uint16_t tacl__float_to_half(float f);
float tacl__bf16_to_float(uint16_t h);
uint16_t tacl__float_to_bf16(float f);

/*
 * Arrays of 16-bit values to float32 and back (nearest-even), through
 * F16C/AVX2 where the CPU has it and the portable code otherwise: the same
 * bits either way.
 */
void tacl__half_to_float_n(float *out, const uint16_t *in, size_t n);
void tacl__float_to_half_n(uint16_t *out, const float *in, size_t n);
void tacl__bf16_to_float_n(float *out, const uint16_t *in, size_t n);
void tacl__float_to_bf16_n(uint16_t *out, const float *in, size_t n);

#endif /* TACL_KERNELS_CPU_REDUCE_H */
