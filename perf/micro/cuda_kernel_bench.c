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
 *
 * Inputs are pseudo-random values of the dtype under test whose
 * magnitude changes from one quantization block to the next (2^-8 to
 * 2^8), so that every block has its own maximum and scale, as real
 * tensors do; a constant fill would let every block share one.
 */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "float_bits.h"
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
    int filled;            /* the inputs hold values of filled_dtype */
    tacl_dtype_t filled_dtype;
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

/*
 * Fill bytes of device memory with n values of dtype t: uniform in
 * (-1, 1) times 2^k, k in [-8, 8] changing every 256 values (xorshift64
 * from seed).  Written through a host buffer of a few megabytes.
 */
static int fill_values(void *dev, size_t bytes, tacl_dtype_t t, uint64_t seed)
{
    size_t es = tacl_dtype_size(t), n = bytes / es, chunk = 1u << 20;
    uint8_t *host = malloc(chunk * es);
    uint64_t x = seed | 1;
    int ok = host != NULL;

    for (size_t done = 0; ok && done < n; done += chunk) {
        size_t m = n - done < chunk ? n - done : chunk;

        for (size_t i = 0; i < m; i++) {
            size_t at = done + i;
            float v;

            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            v = ldexpf((float)((int32_t)(x >> 32)) * 0x1p-31f,
                       (int)((at / 256 * 7) % 17) - 8);
            if (t == TACL_FLOAT32) {
                memcpy(host + i * 4, &v, 4);
            } else {
                uint16_t h = t == TACL_FLOAT16 ? tacl__float_to_half_inl(v)
                                               : tacl__float_to_bf16_inl(v);
                memcpy(host + i * 2, &h, 2);
            }
        }
        ok = cudaMemcpy((uint8_t *)dev + done * es, host, m * es,
                        cudaMemcpyHostToDevice) == cudaSuccess;
    }
    free(host);
    return ok ? 0 : -1;
}

/* Make both inputs hold values of dtype t (unless they already do). */
static int fill_inputs(bench_t *b, size_t bytes, tacl_dtype_t t)
{
    if (b->filled && b->filled_dtype == t)
        return 0;
    if (fill_values(b->a, bytes, t, 0x9e3779b97f4a7c15ull) ||
        fill_values(b->b, bytes, t, 0xd1b54a32d192ed03ull))
        return -1;
    b->filled = 1;
    b->filled_dtype = t;
    return 0;
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
    if (fill_inputs(&b, bytes, TACL_FLOAT32) != 0) {
        fprintf(stderr, "cuda_kernel_bench: filling the inputs failed\n");
        return 1;
    }
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
        if (fill_inputs(&b, bytes, b.dtype) != 0) {
            fprintf(stderr, "cuda_kernel_bench: filling %s failed\n", name);
            return 1;
        }
        failed |= report(name, run_sum, &b, reps, 3.0 * (double)bytes,
                         copy_gbs);
    }
    static const tacl_dtype_t q_types[] = {TACL_FLOAT32, TACL_BFLOAT16};
    for (size_t i = 0; i < sizeof(q_types) / sizeof(q_types[0]); i++) {
        for (int bits = 8; bits >= 4; bits -= 4) {
            char name[64];
            double packed;

            if (fill_inputs(&b, bytes, q_types[i]) != 0) {
                fprintf(stderr, "cuda_kernel_bench: filling %s failed\n",
                        tacl_dtype_name(q_types[i]));
                return 1;
            }
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
