/*
 * CUDA reduction kernels: the device counterparts of kernels/cpu/reduce.h,
 * with the same element rules (integer SUM and PROD wrap, floating MAX and
 * MIN propagate NaN and give b for equal operands, float16 and bfloat16
 * combine in float32 and round back to nearest-even), so host and device
 * reductions give the same bits.
 *
 * Buffers are device memory (or managed memory).  stream is a cudaStream_t;
 * NULL means the default stream, and then the call waits for the kernel to
 * finish before it returns.  With a non-NULL stream the call only enqueues.
 * A failing CUDA call gives TACL_ERR_SYSTEM with the CUDA error string as
 * the last error.
 */
#ifndef TACL_KERNELS_CUDA_REDUCE_CUDA_H
#define TACL_KERNELS_CUDA_REDUCE_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "tacl.h"

#ifdef __cplusplus
extern "C" {
#endif

/** dst = a op b over count elements.  op must be SUM, PROD, MAX or MIN. */
tacl_status_t tacl__reduce_cuda(void *dst, const void *a, const void *b,
                                size_t count, tacl_dtype_t dtype,
                                tacl_op_t op, void *stream);

/**
 * dst = src / divisor over count elements: correctly rounded for floating
 * types, truncating for integer types (the rules of tacl__div_cpu).
 */
tacl_status_t tacl__div_cuda(void *dst, const void *src, size_t count,
                             tacl_dtype_t dtype, uint32_t divisor,
                             void *stream);

/** Number of usable CUDA devices; 0 when there is no driver or device. */
int tacl__cuda_device_count(void);

#ifdef __cplusplus
}
#endif

#endif /* TACL_KERNELS_CUDA_REDUCE_CUDA_H */
