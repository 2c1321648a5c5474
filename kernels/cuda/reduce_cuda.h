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

/**
 * dst = a op b over count elements.  op is SUM, PROD, MAX, MIN or, for
 * the integer dtypes only, BAND, BOR or BXOR.  Buffers must be aligned to
 * their element size (TACL_ERR_INVALID_ARG otherwise: a misaligned device
 * access would end the process's CUDA context); dst may be a or b.
 */
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

/**
 * Copy bytes from src to dst, device memory (or memory the device maps,
 * such as a peer's IPC mapping or pinned host memory), by a kernel: 16-byte
 * vectors when the two buffers sit at the same offset modulo 16.  Unlike
 * cudaMemcpyAsync it runs on the multiprocessors, in stream order with the
 * kernels around it.  The buffers must not overlap (TACL_ERR_INVALID_ARG;
 * dst == src is a no-op).
 */
tacl_status_t tacl__copy_cuda(void *dst, const void *src, size_t bytes,
                              void *stream);

/** Number of usable CUDA devices; 0 when there is no driver or device. */
int tacl__cuda_device_count(void);

#ifdef __cplusplus
}
#endif

#endif /* TACL_KERNELS_CUDA_REDUCE_CUDA_H */
