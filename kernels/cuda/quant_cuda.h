/*
 * CUDA block quantization kernels: the device counterparts of
 * kernels/cpu/quant.h, with the same buffer layout and element rules, so
 * that host and device give the same bytes (scales, payload, and the
 * dequantized and summed values).
 *
 * Buffers are device memory (or managed memory); the order array of
 * tacl__quantize_reorder_cuda and the srcs_q pointer array are host
 * memory holding device pointers.  stream is a cudaStream_t; NULL means
 * the default stream, and then the call waits for the kernels to finish
 * before it returns.  With a non-NULL stream the call only enqueues.
 * Bad arguments give TACL_ERR_INVALID_ARG as on the host; more than
 * TACL_QUANT_CUDA_MAX_SRCS inputs give TACL_ERR_UNSUPPORTED; a failing
 * CUDA call gives TACL_ERR_SYSTEM with the CUDA error string.
 */
#ifndef TACL_KERNELS_CUDA_QUANT_CUDA_H
#define TACL_KERNELS_CUDA_QUANT_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "tacl.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Most inputs one dequant_reduce(_quant)_cuda call takes. */
#define TACL_QUANT_CUDA_MAX_SRCS 64

/** tacl__quantize on the device. */
tacl_status_t tacl__quantize_cuda(const void *src, size_t n,
                                  tacl_dtype_t dtype, uint32_t block,
                                  int bits, void *dst, void *stream);

/** tacl__dequantize on the device. */
tacl_status_t tacl__dequantize_cuda(const void *src_q, size_t n,
                                    uint32_t block, int bits,
                                    tacl_dtype_t dtype, void *dst,
                                    void *stream);

/** tacl__dequant_reduce on the device (same float32 sum, same order). */
tacl_status_t tacl__dequant_reduce_cuda(const void *const *srcs_q,
                                        int nsrc, size_t n, uint32_t block,
                                        int bits, tacl_dtype_t dtype,
                                        void *dst, int accumulate,
                                        void *stream);

/** tacl__dequant_reduce_quant on the device: one fused pass. */
tacl_status_t tacl__dequant_reduce_quant_cuda(const void *const *srcs_q,
                                              int nsrc, size_t n,
                                              uint32_t block, int bits,
                                              void *dst_q, void *stream);

/** tacl__quantize_reorder on the device: reordering fused into quantize. */
tacl_status_t tacl__quantize_reorder_cuda(const void *src,
                                          size_t n_per_slice, int nslices,
                                          const int *order,
                                          tacl_dtype_t dtype,
                                          uint32_t block, int bits,
                                          void *dst, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* TACL_KERNELS_CUDA_QUANT_CUDA_H */
