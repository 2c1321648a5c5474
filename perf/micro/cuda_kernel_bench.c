/*
 * Throughput of the CUDA kernels against cudaMemcpy device-to-device on
 * the same GPU, in the same run: the copy kernel, sum over float32,
 * bfloat16 and float16, 8- and 4-bit block quantization and
 * dequantization, and the fused dequantize-sum-quantize of qgZ.
 *
 * Usage: cuda_kernel_bench [MB [repetitions]]   (default 256 MB, 20)
 *
 * Each kernel is timed with CUDA events around repetitions launches on
 * one stream, after a warm-up.  The figure is the bytes the kernel reads
 * plus the bytes it writes, per second: a copy of n bytes moves 2n, a sum
 * of two n-byte inputs into a third moves 3n, a quantization reads n and
 * writes the packed values with their scales.  That puts every kernel on
 * the memory system's scale, so "% of copy" says how close each comes to
 * what the GPU's memory can do.  Exit 77 (and why) without a device.
 */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "quant.h"
#include "quant_cuda.h"
#include "reduce_cuda.h"

#define EXIT_SKIP 77

typedef struct {
    void *a, *b, *dst, *q[2], *q_out;
    size_t n;              /* elements of the full-precision tensor */
    tacl_dtype_t dtype;
    int bits;
    uint32_t block;
    cudaStream_t stream;
} bench_t;

typedef tacl_status_t (*kernel_fn)(bench_t *);

static tacl_status_t run_copy(bench_t *b)
{
    size_t bytes = b->n * tacl_dtype_size(b->dtype);
    return cudaMemcpyAsync(b->dst, b->a, bytes, cudaMemcpyDeviceToDevice,
                           b->stream) == cudaSuccess
               ? TACL_OK
               : TACL_ERR_SYSTEM;
}

static tacl_status_t run_copy_kernel(bench_t *b)
{
    return tacl__copy_cuda(b->dst, b->a, b->n * tacl_dtype_size(b->dtype),
                           b->stream);
}

static tacl_status_t run_sum(bench_t *b)
{
    return tacl__reduce_cuda(b->dst, b->a, b->b, b->n, b->dtype, TACL_SUM,
                             b->stream);
}

static tacl_status_t run_quantize(bench_t *b)
{
    return tacl__quantize_cuda(b->a, b->n, b->dtype, b->block, b->bits,
                               b->q[0], b->stream);
}

static tacl_status_t run_dequantize(bench_t *b)
{
    return tacl__dequantize_cuda(b->q[0], b->n, b->block, b->bits,
                                 b->dtype, b->dst, b->stream);
}

static tacl_status_t run_fused(bench_t *b)
{
    const void *srcs[2] = {b->q[0], b->q[1]};
    return tacl__dequant_reduce_quant_cuda(srcs, 2, b->n, b->block,
                                           b->bits, b->q_out, b->stream);
}

/* Seconds per launch, or a negative value when a launch failed. */
static double time_kernel(kernel_fn fn, bench_t *b, int reps)
{
    cudaEvent_t start, stop;
    float ms = 0;

    if (fn(b) != TACL_OK || cudaStreamSynchronize(b->stream) != cudaSuccess)
        return -1;
    cudaEventCreate(&start);
    cudaEventCreate(&stop);
    cudaEventRecord(start, b->stream);
    for (int r = 0; r < reps; r++)
        if (fn(b) != TACL_OK)
            return -1;
    cudaEventRecord(stop, b->stream);
    if (cudaEventSynchronize(stop) != cudaSuccess)
        return -1;
    cudaEventElapsedTime(&ms, start, stop);
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    return (double)ms * 1e-3 / reps;
}

static int report(const char *name, kernel_fn fn, bench_t *b, int reps,
                  double bytes_moved, double copy_gbs)
{
    double s = time_kernel(fn, b, reps);
    double gbs;

    if (s < 0) {
        fprintf(stderr, "cuda_kernel_bench: %s failed: %s\n", name,
                cudaGetErrorString(cudaGetLastError()));
        return 1;
    }
    gbs = bytes_moved / s * 1e-9;
    printf("%-34s %10.1f GB/s %7.1f%% of copy %9.3f ms\n", name, gbs,
           copy_gbs > 0 ? 100.0 * gbs / copy_gbs : 100.0, s * 1e3);
    return 0;
}

int main(int argc, char **argv)
{
    size_t mb = argc > 1 ? strtoul(argv[1], NULL, 10) : 256;
    int reps = argc > 2 ? atoi(argv[2]) : 20;
    size_t bytes = mb << 20;
    struct cudaDeviceProp prop;
    bench_t b = {0};
    double copy_gbs, s;
    int count = 0, failed = 0;
    cudaError_t err = cudaGetDeviceCount(&count);

    if (err != cudaSuccess || count == 0) {
        printf("skipped: no usable CUDA device (%s)\n",
               err != cudaSuccess ? cudaGetErrorString(err) : "none found");
        return EXIT_SKIP;
    }
    if (mb == 0 || reps < 1) {
        fprintf(stderr, "usage: cuda_kernel_bench [MB [repetitions]]\n");
        return 2;
    }
    cudaGetDeviceProperties(&prop, 0);
    printf("# %s, %d SMs, %zu MB per tensor, %d launches each, bytes "
           "read + written per second\n", prop.name,
           prop.multiProcessorCount, mb, reps);
    if (cudaMalloc(&b.a, bytes) != cudaSuccess ||
        cudaMalloc(&b.b, bytes) != cudaSuccess ||
        cudaMalloc(&b.dst, bytes) != cudaSuccess ||
        cudaMalloc(&b.q[0], bytes) != cudaSuccess ||
        cudaMalloc(&b.q[1], bytes) != cudaSuccess ||
        cudaMalloc(&b.q_out, bytes) != cudaSuccess ||
        cudaStreamCreate(&b.stream) != cudaSuccess) {
        fprintf(stderr, "cuda_kernel_bench: allocation failed\n");
        return 1;
    }
    /* Values of every sign and magnitude: bytes 0x3c give finite floats
     * of every type, and the quantizer then has real work per block. */
    cudaMemset(b.a, 0x3c, bytes);
    cudaMemset(b.b, 0x3a, bytes);
    b.dtype = TACL_FLOAT32;
    b.n = bytes / 4;
    b.block = 256;
    s = time_kernel(run_copy, &b, reps);
    if (s < 0) {
        fprintf(stderr, "cuda_kernel_bench: cudaMemcpyAsync failed\n");
        return 1;
    }
    copy_gbs = 2.0 * (double)bytes / s * 1e-9;
    printf("%-34s %10.1f GB/s %7.1f%% of copy %9.3f ms\n",
           "cudaMemcpy device-to-device", copy_gbs, 100.0, s * 1e3);

    failed |= report("copy kernel", run_copy_kernel, &b,
                     reps, 2.0 * (double)bytes, copy_gbs);

    static const tacl_dtype_t sum_types[] = {TACL_FLOAT32, TACL_BFLOAT16,
                                             TACL_FLOAT16};
    for (size_t i = 0; i < sizeof(sum_types) / sizeof(sum_types[0]); i++) {
        char name[64];
        b.dtype = sum_types[i];
        b.n = bytes / tacl_dtype_size(b.dtype);
        snprintf(name, sizeof(name), "sum %s", tacl_dtype_name(b.dtype));
        failed |= report(name, run_sum, &b, reps, 3.0 * (double)bytes,
                         copy_gbs);
    }
    static const tacl_dtype_t q_types[] = {TACL_FLOAT32, TACL_BFLOAT16};
    for (size_t i = 0; i < sizeof(q_types) / sizeof(q_types[0]); i++) {
        for (int bits = 8; bits >= 4; bits -= 4) {
            char name[64];
            double packed;

            b.dtype = q_types[i];
            b.bits = bits;
            b.n = bytes / tacl_dtype_size(b.dtype);
            packed = (double)tacl__quant_bytes(b.n, b.block, bits);
            snprintf(name, sizeof(name), "quantize %s int%d",
                     tacl_dtype_name(b.dtype), bits);
            failed |= report(name, run_quantize, &b, reps,
                             (double)bytes + packed, copy_gbs);
            snprintf(name, sizeof(name), "dequantize %s int%d",
                     tacl_dtype_name(b.dtype), bits);
            failed |= report(name, run_dequantize, &b, reps,
                             packed + (double)bytes, copy_gbs);
            if (b.dtype == TACL_FLOAT32) {
                /* Two packed inputs in, one packed output. */
                run_quantize(&b);
                cudaMemcpy(b.q[1], b.q[0], (size_t)packed,
                           cudaMemcpyDeviceToDevice);
                snprintf(name, sizeof(name), "dequant-sum-quant int%d",
                         bits);
                failed |= report(name, run_fused, &b, reps, 3.0 * packed,
                                 copy_gbs);
            }
        }
    }
    return failed;
}
