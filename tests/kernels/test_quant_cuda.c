/*
 * Tests of the CUDA quantization kernels against the CPU ones.
 *
 * With a device, every function runs on the GPU over dtypes, both bit
 * widths, block sizes (odd ones included, which take the two-kernel int4
 * path) and counts, and must give the bytes the CPU kernels give: the
 * scales and payloads exactly, and the dequantized or summed values
 * exactly too, a NaN matching any NaN (the two processors write different
 * NaN payloads).  The CPU kernels are checked against independent
 * references in test_quant.c, so equality here carries those bounds over.
 * Layouts that take the 8-bit vector kernels and ones that do not are
 * both covered.  Bad arguments are checked with or without a device;
 * without one the program then exits 77, which meson reports as skipped.
 * One more test times the kernels on 256 MB and prints GB/s.
 */
#include <criterion/criterion.h>
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_device.h"
#include "elem.h"
#include "quant.h"
#include "quant_cuda.h"
#include "reduce.h"
#include "reduce_cuda.h"
#include "rng.h"

static tt_rng_t rng = {0x2545f4914f6cdd1dull};

static const tacl_dtype_t dtypes[] = {TACL_FLOAT32, TACL_FLOAT16,
                                      TACL_BFLOAT16};

/* Random values, whole zero blocks, outliers and now and then an inf. */
static void fill(void *buf, size_t n, tacl_dtype_t t, uint32_t block,
                 int with_inf)
{
    float mag = 1.0f;
    for (size_t i = 0; i < n; i++) {
        if (i % block == 0)
            mag = ldexpf(1.0f, (int)(tt_rng_next(&rng) % 13) - 8);
        float v = (float)(int64_t)tt_rng_next(&rng) * 0x1p-63f * mag;
        if (tt_rng_next(&rng) % 41 == 0)
            v *= 1000.0f;
        if ((i / block) % 5 == 3)
            v = 0.0f;
        if (with_inf && tt_rng_next(&rng) % 997 == 0)
            v = (tt_rng_next(&rng) & 1) ? INFINITY : NAN;
        tacl__elem_store_float(t, buf, i, v);
    }
}

static void *dev_alloc(size_t bytes)
{
    void *p = NULL;
    cr_assert_eq(cudaMalloc(&p, bytes ? bytes : 1), cudaSuccess);
    return p;
}

static void to_dev(void *d, const void *h, size_t bytes)
{
    cr_assert_eq(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice),
                 cudaSuccess);
}

static void to_host(void *h, const void *d, size_t bytes)
{
    cr_assert_eq(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost),
                 cudaSuccess);
}

/* Element i of two buffers of type t are equal, or both NaN. */
static int same_value(const void *a, const void *b, size_t i,
                      tacl_dtype_t t)
{
    if (t == TACL_FLOAT32) {
        float x = ((const float *)a)[i], y = ((const float *)b)[i];
        return memcmp(&x, &y, 4) == 0 || (isnan(x) && isnan(y));
    }
    uint16_t x = ((const uint16_t *)a)[i], y = ((const uint16_t *)b)[i];
    float fx = t == TACL_FLOAT16 ? tacl__half_to_float(x)
                                 : tacl__bf16_to_float(x);
    float fy = t == TACL_FLOAT16 ? tacl__half_to_float(y)
                                 : tacl__bf16_to_float(y);
    return x == y || (isnan(fx) && isnan(fy));
}

static void check_values(const void *a, const void *b, size_t n,
                         tacl_dtype_t t, const char *what)
{
    for (size_t i = 0; i < n; i++)
        cr_assert(same_value(a, b, i, t), "%s %s: element %zu of %zu "
                  "differs", what, tacl_dtype_name(t), i, n);
}

/*
 * Quantize, dequantize and dequant_reduce on both sides; compare.  The
 * full-precision device tensors start off elements into their
 * allocations.
 */
static void check_case_at(tacl_dtype_t t, int bits, uint32_t block,
                          size_t n, size_t off)
{
    enum { NSRC = 3 };
    size_t es = tacl_dtype_size(t);
    size_t qb = tacl__quant_bytes(n, block, bits);
    uint8_t *x = malloc(n * es), *q = malloc(qb), *gq = malloc(qb);
    uint8_t *y = malloc(n * es), *gy = malloc(n * es);
    uint8_t *dx0 = dev_alloc((n + off) * es), *dq = dev_alloc(qb);
    uint8_t *dy0 = dev_alloc((n + off) * es);
    uint8_t *dx = dx0 + off * es, *dy = dy0 + off * es;
    uint8_t *hq[NSRC], *dsrc[NSRC];
    cr_assert(x && q && gq && y && gy);

    fill(x, n, t, block, 1);
    to_dev(dx, x, n * es);
    cr_assert_eq(tacl__quantize(x, n, t, block, bits, q), TACL_OK);
    cr_assert_eq(tacl__quantize_cuda(dx, n, t, block, bits, dq, NULL),
                 TACL_OK);
    to_host(gq, dq, qb);
    cr_assert(memcmp(q, gq, qb) == 0, "quantize %s bits %d block %u n %zu",
              tacl_dtype_name(t), bits, block, n);

    cr_assert_eq(tacl__dequantize(q, n, block, bits, t, y), TACL_OK);
    cr_assert_eq(tacl__dequantize_cuda(dq, n, block, bits, t, dy, NULL),
                 TACL_OK);
    to_host(gy, dy, n * es);
    check_values(y, gy, n, t, "dequantize");

    /* Three inputs, summed onto y (accumulate) and into y. */
    for (int k = 0; k < NSRC; k++) {
        hq[k] = malloc(qb);
        dsrc[k] = dev_alloc(qb);
        cr_assert(hq[k]);
        fill(x, n, t, block, k == 2);
        cr_assert_eq(tacl__quantize(x, n, t, block, bits, hq[k]), TACL_OK);
        to_dev(dsrc[k], hq[k], qb);
    }
    for (int acc = 0; acc <= 1; acc++) {
        fill(y, n, t, 64, 0);
        to_dev(dy, y, n * es);
        cr_assert_eq(tacl__dequant_reduce((const void *const *)hq, NSRC, n,
                                          block, bits, t, y, acc),
                     TACL_OK);
        cr_assert_eq(tacl__dequant_reduce_cuda((const void *const *)dsrc,
                                               NSRC, n, block, bits, t, dy,
                                               acc, NULL),
                     TACL_OK);
        to_host(gy, dy, n * es);
        check_values(y, gy, n, t, "dequant_reduce");
    }
    cr_assert_eq(tacl__dequant_reduce_quant((const void *const *)hq, NSRC, n,
                                            block, bits, q),
                 TACL_OK);
    cr_assert_eq(tacl__dequant_reduce_quant_cuda((const void *const *)dsrc,
                                                 NSRC, n, block, bits, dq,
                                                 NULL),
                 TACL_OK);
    to_host(gq, dq, qb);
    cr_assert(memcmp(q, gq, qb) == 0, "dequant_reduce_quant bits %d block "
              "%u n %zu", bits, block, n);

    for (int k = 0; k < NSRC; k++) {
        free(hq[k]);
        cudaFree(dsrc[k]);
    }
    free(x);
    free(q);
    free(gq);
    free(y);
    free(gy);
    cudaFree(dx0);
    cudaFree(dq);
    cudaFree(dy0);
}

static void check_case(tacl_dtype_t t, int bits, uint32_t block, size_t n)
{
    check_case_at(t, bits, block, n, 0);
}

Test(quant_cuda, matches_cpu)
{
    static const uint32_t blocks[] = {1, 7, 64, 256, 4096, 5000};
    /* 8192 and 65536 with blocks 64, 256, 4096 and 5000 take the 8-bit
     * vector kernels; the others the general ones. */
    static const size_t counts[] = {1,     2,     7,    64,   65,
                                    1001,  8192,  12001, 65536, 100003};
    tt_skip_without_device();
    for (size_t d = 0; d < 3; d++)
        for (int bits = 4; bits <= 8; bits += 4)
            for (size_t b = 0; b < sizeof(blocks) / sizeof(*blocks); b++)
                for (size_t c = 0; c < sizeof(counts) / sizeof(*counts); c++)
                    check_case(dtypes[d], bits, blocks[b], counts[c]);
}

Test(quant_cuda, reorder_matches_cpu)
{
    static const int nsl[] = {1, 3, 8, 70};
    /* 1024 elements per slice, block 64: the 8-bit vector kernel. */
    static const size_t nps[] = {1, 7, 130, 1001, 1024};
    tt_skip_without_device();
    for (size_t a = 0; a < 4; a++)
        for (size_t c = 0; c < 5; c++)
            for (int bits = 4; bits <= 8; bits += 4)
                for (size_t d = 0; d < 3; d++) {
        int ns = nsl[a];
        uint32_t block = c % 2 ? 7 : 64;
        tacl_dtype_t t = dtypes[d];
        size_t es = tacl_dtype_size(t);
        size_t total = nps[c] * (size_t)ns;
        size_t qb = tacl__quant_bytes(nps[c], block, bits) * (size_t)ns;
        int order[70];
        uint8_t *x = malloc(total * es), *q = malloc(qb), *gq = malloc(qb);
        uint8_t *dx = dev_alloc(total * es), *dq = dev_alloc(qb);
        cr_assert(x && q && gq);
        for (int i = 0; i < ns; i++)
            order[i] = i;
        for (int i = ns - 1; i > 0; i--) {
            int j = (int)(tt_rng_next(&rng) % (uint64_t)(i + 1));
            int tmp = order[i];
            order[i] = order[j];
            order[j] = tmp;
        }
        fill(x, total, t, block, 0);
        to_dev(dx, x, total * es);
        cr_assert_eq(tacl__quantize_reorder(x, nps[c], ns, order, t, block,
                                            bits, q), TACL_OK);
        cr_assert_eq(tacl__quantize_reorder_cuda(dx, nps[c], ns, order, t,
                                                 block, bits, dq, NULL),
                     TACL_OK);
        to_host(gq, dq, qb);
        cr_assert(memcmp(q, gq, qb) == 0, "reorder %d x %zu block %u bits "
                  "%d %s", ns, nps[c], block, bits, tacl_dtype_name(t));
        free(x);
        free(q);
        free(gq);
        cudaFree(dx);
        cudaFree(dq);
    }
}

/*
 * A layout the 8-bit vector kernels would take, but the tensors one
 * element off their 16-byte alignment: the general kernels run, with the
 * same bytes.
 */
Test(quant_cuda, unaligned_tensor_matches_cpu)
{
    tt_skip_without_device();
    for (size_t d = 0; d < 3; d++)
        check_case_at(dtypes[d], 8, 256, 8192, 1);
}

Test(quant_cuda, bad_args_rejected)
{
    /* Never dereferenced: every call fails its argument checks first. */
    char dummy[64] = {0};
    void *p = dummy;
    const void *srcs[TACL_QUANT_CUDA_MAX_SRCS + 1];
    int order[2] = {0, 2};
    tacl_status_t e = TACL_ERR_INVALID_ARG;
    for (int k = 0; k <= TACL_QUANT_CUDA_MAX_SRCS; k++)
        srcs[k] = p;

    cr_assert_eq(tacl__quantize_cuda(p, 8, TACL_FLOAT32, 4, 3, p, NULL), e);
    cr_assert_eq(tacl__quantize_cuda(p, 8, TACL_FLOAT32, 0, 8, p, NULL), e);
    cr_assert_eq(tacl__quantize_cuda(p, 8, TACL_INT32, 4, 8, p, NULL), e);
    cr_assert_eq(tacl__quantize_cuda(NULL, 8, TACL_FLOAT32, 4, 8, p, NULL),
                 e);
    cr_assert_eq(tacl__quantize_cuda(NULL, 0, TACL_FLOAT32, 4, 8, NULL,
                                     NULL), TACL_OK);
    cr_assert_eq(tacl__dequantize_cuda(p, 8, 4, 8, TACL_FLOAT64, p, NULL),
                 e);
    cr_assert_eq(tacl__dequantize_cuda(p, 8, 4, 8, TACL_FLOAT32, NULL,
                                       NULL), e);
    cr_assert_eq(tacl__dequant_reduce_cuda(srcs, 0, 8, 4, 8, TACL_FLOAT32,
                                           p, 0, NULL), e);
    cr_assert_eq(tacl__dequant_reduce_cuda(srcs, 1, 8, 4, 6, TACL_FLOAT32,
                                           p, 0, NULL), e);
    cr_assert_eq(tacl__dequant_reduce_cuda(srcs,
                                           TACL_QUANT_CUDA_MAX_SRCS + 1, 8,
                                           4, 8, TACL_FLOAT32, p, 0, NULL),
                 TACL_ERR_UNSUPPORTED);
    cr_assert_eq(tacl__dequant_reduce_quant_cuda(NULL, 1, 8, 4, 8, p, NULL),
                 e);
    cr_assert_eq(tacl__dequant_reduce_quant_cuda(srcs, 1, 8, 4, 8, NULL,
                                                 NULL), e);
    cr_assert_eq(tacl__quantize_reorder_cuda(p, 4, 2, order, TACL_FLOAT32,
                                             4, 8, p, NULL), e);
    cr_assert_eq(tacl__quantize_reorder_cuda(p, 4, 2, NULL, TACL_FLOAT32,
                                             4, 8, p, NULL), e);
}

/* Milliseconds of one call, the best of three, after a warm-up. */
static float time_ms(int which, void *dx, void *dq, void *dy,
                     const void *const *srcs, size_t n, tacl_dtype_t t,
                     int bits)
{
    cudaEvent_t a, b;
    float best = 1e30f;
    cr_assert_eq(cudaEventCreate(&a), cudaSuccess);
    cr_assert_eq(cudaEventCreate(&b), cudaSuccess);
    for (int r = 0; r < 4; r++) {
        tacl_status_t st;
        cudaEventRecord(a, NULL);
        if (which == 0)
            st = tacl__quantize_cuda(dx, n, t, 256, bits, dq, NULL);
        else if (which == 1)
            st = tacl__dequantize_cuda(dq, n, 256, bits, t, dy, NULL);
        else
            st = tacl__dequant_reduce_quant_cuda(srcs, 2, n, 256, bits, dy,
                                                 NULL);
        cudaEventRecord(b, NULL);
        cr_assert_eq(st, TACL_OK);
        cudaEventSynchronize(b);
        float ms = 0.0f;
        cudaEventElapsedTime(&ms, a, b);
        if (r > 0 && ms < best)
            best = ms;
    }
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return best;
}

Test(quant_cuda, throughput)
{
    static const char *names[] = {"quantize", "dequantize",
                                  "dequant_reduce_quant/2"};
    tt_skip_without_device();
    size_t bytes = (size_t)256 << 20;
    for (size_t d = 0; d < 2; d++)
        for (int bits = 8; bits >= 4; bits -= 4) {
            tacl_dtype_t t = dtypes[d];
            size_t n = bytes / tacl_dtype_size(t);
            size_t qb = tacl__quant_bytes(n, 256, bits);
            void *dx = dev_alloc(bytes), *dy = dev_alloc(bytes);
            void *dq = dev_alloc(qb), *dq2 = dev_alloc(qb);
            const void *srcs[2] = {dq, dq2};
            cr_assert_eq(cudaMemset(dx, 0x3c, bytes), cudaSuccess);
            cr_assert_eq(tacl__quantize_cuda(dx, n, t, 256, bits, dq, NULL),
                         TACL_OK);
            cr_assert_eq(cudaMemcpy(dq2, dq, qb, cudaMemcpyDeviceToDevice),
                         cudaSuccess);
            for (int w = 0; w < 3; w++) {
                float ms = time_ms(w, dx, dq, dy, srcs, n, t, bits);
                double moved = w == 2 ? 3.0 * (double)qb
                                      : (double)bytes + (double)qb;
                printf("cuda %-22s %-8s int%d block 256: %7.1f GB/s of "
                       "input, %7.1f GB/s moved (%.3f ms)\n", names[w],
                       tacl_dtype_name(t), bits,
                       (double)bytes / ms * 1e-6, moved / ms * 1e-6, ms);
            }
            cudaFree(dx);
            cudaFree(dy);
            cudaFree(dq);
            cudaFree(dq2);
        }
}

TT_CUDA_TEST_MAIN()
