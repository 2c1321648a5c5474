/*
 * Kernels of the CUDA collective tests (stream_kernels.cu): input
 * element i of rank r at iteration it is (r + 1) * (i % 7 + 1) + it, an
 * integer exact in float32 and in any sum of a few ranks.
 */
#ifndef TACL_TESTS_CUDA_STREAM_KERNELS_H
#define TACL_TESTS_CUDA_STREAM_KERNELS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/** What ttk_check expects of its n output elements. */
enum {
    TTK_SUM = 0,        /* the sum over the ranks (all-reduce) */
    TTK_GATHER,         /* the ranks' inputs in rank order (all-gather) */
    TTK_SCATTER_SUM,    /* this rank's block of the sum (reduce-scatter) */
    TTK_BCAST           /* the root's input (broadcast) */
};

/** Keep the stream busy for about cycles GPU clock cycles. */
int ttk_spin(void *stream, long long cycles);
/** dst[i] = the input of rank at iteration iter, enqueued on stream. */
int ttk_fill(float *dst, size_t n, int rank, int iter, void *stream);
/** Add to *bad (device memory) the elements of got that differ. */
int ttk_check(const float *got, size_t n, int kind, int nranks, int rank,
              int root, int iter, unsigned *bad, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* TACL_TESTS_CUDA_STREAM_KERNELS_H */
