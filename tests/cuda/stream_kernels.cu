/*
 * Kernels the collective tests enqueue on the caller's stream around a
 * tacl call: one writes the input (after a delay, so that an operation
 * that did not wait for it would read stale values), one compares the
 * output with what the collective must give and counts mismatches in
 * device memory.  Nothing here synchronizes: the test does, at its end.
 */
#include <cuda_runtime.h>

#include "stream_kernels.h"

__device__ static float value(int rank, size_t i, int iter)
{
    return (float)((rank + 1) * (int)(i % 7 + 1) + iter);
}

__global__ static void spin_kernel(long long cycles)
{
    long long start = clock64();

    while (clock64() - start < cycles) {
    }
}

__global__ static void fill_kernel(float *dst, size_t n, int rank, int iter)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        dst[i] = value(rank, i, iter);
}

__global__ static void check_kernel(const float *got, size_t n, int kind,
                                    int nranks, int rank, int root,
                                    int iter, unsigned *bad)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float want = 0;
        size_t j = i;

        switch (kind) {
        case TTK_SUM:
            for (int r = 0; r < nranks; r++)
                want += value(r, i, iter);
            break;
        case TTK_GATHER: /* block j of n / nranks each */
            j = i % (n / nranks);
            want = value((int)(i / (n / nranks)), j, iter);
            break;
        case TTK_SCATTER_SUM: /* this rank's block of the sum */
            j = (size_t)rank * n + i;
            for (int r = 0; r < nranks; r++)
                want += value(r, j, iter);
            break;
        default: /* TTK_BCAST: the root's input */
            want = value(root, i, iter);
            break;
        }
        if (got[i] != want)
            atomicAdd(bad, 1u);
    }
}

extern "C" int ttk_spin(void *stream, long long cycles)
{
    spin_kernel<<<1, 1, 0, (cudaStream_t)stream>>>(cycles);
    return cudaGetLastError() == cudaSuccess ? 0 : -1;
}

extern "C" int ttk_fill(float *dst, size_t n, int rank, int iter,
                        void *stream)
{
    fill_kernel<<<64, 256, 0, (cudaStream_t)stream>>>(dst, n, rank, iter);
    return cudaGetLastError() == cudaSuccess ? 0 : -1;
}

extern "C" int ttk_check(const float *got, size_t n, int kind, int nranks,
                         int rank, int root, int iter, unsigned *bad,
                         void *stream)
{
    check_kernel<<<64, 256, 0, (cudaStream_t)stream>>>(got, n, kind, nranks,
                                                       rank, root, iter, bad);
    return cudaGetLastError() == cudaSuccess ? 0 : -1;
}
