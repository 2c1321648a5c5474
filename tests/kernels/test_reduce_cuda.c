/*
 * Tests of the CUDA reduction kernels against the CPU ones.
 *
 * With a device, every dtype x op x count runs on the GPU and must give
 * the bits tacl__reduce_cpu gives (finite inputs, so that no NaN payload
 * question arises; integers and float32 are the contract, the 16-bit
 * types and float64 share the CPU code and are held to the same).  Without
 * a device those tests skip, and the error paths are checked instead: a
 * launch must fail with TACL_ERR_SYSTEM, bad arguments with
 * TACL_ERR_INVALID_ARG, never a crash.  The program then exits 77, which
 * meson reports as skipped: the GPU half was not run.
 */
#include <criterion/criterion.h>
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_device.h"
#include "reduce.h"
#include "reduce_cuda.h"
#include "rng.h"

static tt_rng_t rng = {0x2545f4914f6cdd1dull};

/* Random finite values: any integer, small-to-huge floats with zeros. */
static void fill_finite(void *p, size_t count, tacl_dtype_t t)
{
    size_t size = tacl_dtype_size(t);
    for (size_t i = 0; i < count; i++) {
        uint64_t v = tt_rng_next(&rng);
        double x = (double)(int64_t)v / 9.2e16 * (double)(1 + i % 300);
        if (i % 53 == 0)
            x = (i & 64) ? -0.0 : 0.0;
        switch (t) {
        case TACL_FLOAT16: {
            uint16_t h = (uint16_t)v;
            if ((h & 0x7c00u) == 0x7c00u)
                h &= 0xbfffu; /* clear an exponent bit: finite */
            memcpy((char *)p + 2 * i, &h, 2);
            break;
        }
        case TACL_BFLOAT16: {
            uint16_t h = (uint16_t)v;
            if ((h & 0x7f80u) == 0x7f80u)
                h &= 0xbfffu;
            memcpy((char *)p + 2 * i, &h, 2);
            break;
        }
        case TACL_FLOAT32: {
            float f = (float)x;
            if (i % 7 == 3) /* subnormal floats as well */
                f = (float)ldexp((double)(v & 0x7fffff), -149);
            memcpy((char *)p + 4 * i, &f, 4);
            break;
        }
        case TACL_FLOAT64:
            memcpy((char *)p + 8 * i, &x, 8);
            break;
        default:
            memcpy((char *)p + size * i, &v, size);
            break;
        }
    }
}

/* Device buffers for one comparison. */
typedef struct {
    void *a;
    void *b;
    void *d;
} dev_bufs_t;

static void dev_alloc(dev_bufs_t *g, size_t bytes)
{
    cr_assert_eq(cudaMalloc(&g->a, bytes + 1), cudaSuccess);
    cr_assert_eq(cudaMalloc(&g->b, bytes + 1), cudaSuccess);
    cr_assert_eq(cudaMalloc(&g->d, bytes + 1), cudaSuccess);
}

static void dev_free(dev_bufs_t *g)
{
    cudaFree(g->a);
    cudaFree(g->b);
    cudaFree(g->d);
}

/* alias 0: separate dst, 1: dst = a, 2: dst = b. */
static void compare_reduce(tacl_dtype_t t, tacl_op_t op, size_t count,
                           int alias)
{
    size_t size = tacl_dtype_size(t);
    size_t bytes = count * size;
    unsigned char *a = malloc(bytes + 1);
    unsigned char *b = malloc(bytes + 1);
    unsigned char *want = malloc(bytes + 1);
    unsigned char *got = malloc(bytes + 1);
    dev_bufs_t g;
    cr_assert(a && b && want && got);
    fill_finite(a, count, t);
    fill_finite(b, count, t);
    cr_assert_eq(tacl__reduce_cpu(want, a, b, count, t, op), TACL_OK);

    dev_alloc(&g, bytes);
    cr_assert_eq(cudaMemcpy(g.a, a, bytes, cudaMemcpyHostToDevice),
                 cudaSuccess);
    cr_assert_eq(cudaMemcpy(g.b, b, bytes, cudaMemcpyHostToDevice),
                 cudaSuccess);
    void *dst = alias == 1 ? g.a : alias == 2 ? g.b : g.d;
    cr_assert_eq(tacl__reduce_cuda(dst, g.a, g.b, count, t, op, NULL),
                 TACL_OK, "%s %s count %zu", tacl_dtype_name(t),
                 tacl_op_name(op), count);
    cr_assert_eq(cudaMemcpy(got, dst, bytes, cudaMemcpyDeviceToHost),
                 cudaSuccess);
    for (size_t i = 0; i < count; i++)
        cr_assert_eq(memcmp(got + i * size, want + i * size, size), 0,
                     "%s %s count %zu alias %d: element %zu differs",
                     tacl_dtype_name(t), tacl_op_name(op), count, alias, i);
    dev_free(&g);
    free(a);
    free(b);
    free(want);
    free(got);
}

Test(reduce_cuda, matches_cpu_every_dtype_and_op)
{
    static const size_t counts[] = {1, 7, 1000, 4099, 3000017};
    tt_skip_without_device();
    for (int t = 0; t < TACL_NUM_DTYPES; t++)
        for (int op = TACL_SUM; op < TACL_NUM_OPS; op++) {
            /* No AVG element op; bitwise ops on integer types only. */
            if (op == TACL_AVG || (t >= TACL_FLOAT16 && op >= TACL_BAND))
                continue;
            for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++)
                for (int alias = 0; alias < 3; alias++)
                    compare_reduce((tacl_dtype_t)t, (tacl_op_t)op,
                                   counts[c], alias);
        }
}

Test(reduce_cuda, div_matches_cpu)
{
    static const uint32_t divisors[] = {1, 3, 8, 1000, 16777217u,
                                        UINT32_MAX};
    const size_t count = 65536;
    tt_skip_without_device();
    for (int t = 0; t < TACL_NUM_DTYPES; t++) {
        tacl_dtype_t dt = (tacl_dtype_t)t;
        size_t bytes = count * tacl_dtype_size(dt);
        unsigned char *src = malloc(bytes);
        unsigned char *want = malloc(bytes);
        unsigned char *got = malloc(bytes);
        void *gsrc = NULL, *gdst = NULL;
        cr_assert(src && want && got);
        fill_finite(src, count, dt);
        if (bytes == 2 * count) /* every 16-bit pattern once */
            for (size_t i = 0; i < count; i++)
                memcpy(src + 2 * i, &(uint16_t){(uint16_t)i}, 2);
        cr_assert_eq(cudaMalloc(&gsrc, bytes), cudaSuccess);
        cr_assert_eq(cudaMalloc(&gdst, bytes), cudaSuccess);
        cr_assert_eq(cudaMemcpy(gsrc, src, bytes, cudaMemcpyHostToDevice),
                     cudaSuccess);
        for (size_t k = 0; k < sizeof(divisors) / sizeof(divisors[0]); k++) {
            cr_assert_eq(tacl__div_cpu(want, src, count, dt, divisors[k]),
                         TACL_OK);
            cr_assert_eq(tacl__div_cuda(gdst, gsrc, count, dt, divisors[k],
                                        NULL),
                         TACL_OK);
            cr_assert_eq(cudaMemcpy(got, gdst, bytes,
                                    cudaMemcpyDeviceToHost),
                         cudaSuccess);
            for (size_t i = 0; i < count; i++) {
                size_t sz = tacl_dtype_size(dt);
                if (memcmp(got + i * sz, want + i * sz, sz) == 0)
                    continue;
                /* 16-bit NaN patterns: any NaN will do on both sides. */
                double x = dt == TACL_FLOAT16
                               ? tacl__half_to_float(((uint16_t *)got)[i])
                               : tacl__bf16_to_float(((uint16_t *)got)[i]);
                double y = dt == TACL_FLOAT16
                               ? tacl__half_to_float(((uint16_t *)want)[i])
                               : tacl__bf16_to_float(((uint16_t *)want)[i]);
                cr_assert(sz == 2 && isnan(x) && isnan(y),
                          "%s / %u: element %zu differs", tacl_dtype_name(dt),
                          divisors[k], i);
            }
        }
        cudaFree(gsrc);
        cudaFree(gdst);
        free(src);
        free(want);
        free(got);
    }
}

Test(reduce_cuda, stream_ordered_launch)
{
    const size_t count = 1 << 20;
    cudaStream_t stream;
    float *g = NULL;
    float *h = malloc(count * sizeof(float));
    tt_skip_without_device();
    cr_assert(h != NULL);
    for (size_t i = 0; i < count; i++)
        h[i] = (float)(i % 1000);
    cr_assert_eq(cudaStreamCreate(&stream), cudaSuccess);
    cr_assert_eq(cudaMalloc((void **)&g, count * sizeof(float)),
                 cudaSuccess);
    cr_assert_eq(cudaMemcpy(g, h, count * sizeof(float),
                            cudaMemcpyHostToDevice),
                 cudaSuccess);
    /* g = g + g three times, then / 8: back to the start. */
    for (int k = 0; k < 3; k++)
        cr_assert_eq(tacl__reduce_cuda(g, g, g, count, TACL_FLOAT32,
                                       TACL_SUM, stream),
                     TACL_OK);
    cr_assert_eq(tacl__div_cuda(g, g, count, TACL_FLOAT32, 8, stream),
                 TACL_OK);
    cr_assert_eq(cudaStreamSynchronize(stream), cudaSuccess);
    float *back = malloc(count * sizeof(float));
    cr_assert(back != NULL);
    cr_assert_eq(cudaMemcpy(back, g, count * sizeof(float),
                            cudaMemcpyDeviceToHost),
                 cudaSuccess);
    cr_assert_eq(memcmp(back, h, count * sizeof(float)), 0);
    cudaFree(g);
    cudaStreamDestroy(stream);
    free(h);
    free(back);
}

/* These need no device: arguments are checked before any CUDA call. */
Test(reduce_cuda, invalid_arguments)
{
    char buf[16] = {0};
    cr_assert_eq(tacl__reduce_cuda(buf, buf, buf, 1, TACL_FLOAT32,
                                   TACL_AVG, NULL),
                 TACL_ERR_INVALID_ARG);
    cr_assert_eq(tacl__reduce_cuda(buf, buf, buf, 1, TACL_FLOAT32,
                                   TACL_NUM_OPS, NULL),
                 TACL_ERR_INVALID_ARG);
    cr_assert_eq(tacl__reduce_cuda(buf, buf, buf, 1, TACL_FLOAT32,
                                   TACL_BAND, NULL),
                 TACL_ERR_INVALID_ARG);
    cr_assert_eq(tacl__reduce_cuda(buf, buf, buf, 1, TACL_NUM_DTYPES,
                                   TACL_SUM, NULL),
                 TACL_ERR_INVALID_ARG);
    cr_assert_eq(tacl__reduce_cuda(NULL, buf, buf, 1, TACL_INT8, TACL_SUM,
                                   NULL),
                 TACL_ERR_INVALID_ARG);
    cr_assert_eq(tacl__div_cuda(buf, buf, 1, TACL_FLOAT32, 0, NULL),
                 TACL_ERR_INVALID_ARG);
    cr_assert_eq(tacl__div_cuda(buf, buf, 1, (tacl_dtype_t)-1, 2, NULL),
                 TACL_ERR_INVALID_ARG);
    /* Nothing to do is not an error, with or without a device. */
    cr_assert_eq(tacl__reduce_cuda(NULL, NULL, NULL, 0, TACL_INT8,
                                   TACL_SUM, NULL),
                 TACL_OK);
}

/* Without a driver the launch fails cleanly: a status, not a crash. */
Test(reduce_cuda, launch_without_device_fails_cleanly)
{
    char buf[64] = {0};
    if (tacl__cuda_device_count() > 0)
        cr_skip_test("a CUDA device is present: the no-device path is "
                     "checked only on machines without one");
    cr_assert_eq(tacl__reduce_cuda(buf, buf, buf, 4, TACL_FLOAT32,
                                   TACL_SUM, NULL),
                 TACL_ERR_SYSTEM);
    cr_assert_eq(tacl__div_cuda(buf, buf, 4, TACL_FLOAT32, 2, NULL),
                 TACL_ERR_SYSTEM);
    /* Asking again still answers, and still says none. */
    cr_assert_eq(tacl__cuda_device_count(), 0);
}

TT_CUDA_TEST_MAIN()
