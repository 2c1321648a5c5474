/*
 * Tests of the CUDA reduction kernels against the CPU ones.
 *
 * With a device, every dtype x op x count runs on the GPU and must give
 * the bits tacl__reduce_cpu gives (finite inputs, so that no NaN payload
 * question arises; integers and float32 are the contract, the 16-bit
 * types and float64 share the CPU code and are held to the same).  Without
 * a device those tests skip, and the error paths are checked instead: a
 * launch must fail with TACL_ERR_SYSTEM, bad arguments with
 * TACL_ERR_INVALID_ARG, never a crash.  Buffers start at every element
 * offset within 16 bytes, and at differing offsets, so that both the
 * 16-byte vector path (with every head and tail length) and the element
 * path run; the copy kernel is held to memcpy's bytes the same way.  The program then exits 77, which
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

/*
 * One comparison on the device: a, b and dst start off_a, off_b and off_d
 * elements into their allocations, so that the kernels' 16-byte vector
 * path meets every head and tail length, and buffers at different offsets
 * modulo 16 take the element path.  alias 0: separate dst, 1: dst = a,
 * 2: dst = b (then off_d is ignored).
 */
static void compare_reduce_at(tacl_dtype_t t, tacl_op_t op, size_t count,
                              int alias, size_t off_a, size_t off_b,
                              size_t off_d)
{
    size_t size = tacl_dtype_size(t);
    size_t bytes = count * size;
    size_t room = bytes + 16 * size;
    unsigned char *a = malloc(bytes + 1);
    unsigned char *b = malloc(bytes + 1);
    unsigned char *want = malloc(bytes + 1);
    unsigned char *got = malloc(room);
    unsigned char *ga = NULL, *gb = NULL, *gd = NULL;
    cr_assert(a && b && want && got);
    fill_finite(a, count, t);
    fill_finite(b, count, t);
    cr_assert_eq(tacl__reduce_cpu(want, a, b, count, t, op), TACL_OK);

    cr_assert_eq(cudaMalloc((void **)&ga, room), cudaSuccess);
    cr_assert_eq(cudaMalloc((void **)&gb, room), cudaSuccess);
    cr_assert_eq(cudaMalloc((void **)&gd, room), cudaSuccess);
    /* A known pattern around dst: the kernel must not write outside. */
    cr_assert_eq(cudaMemset(gd, 0xa5, room), cudaSuccess);
    unsigned char *pa = ga + off_a * size, *pb = gb + off_b * size;
    unsigned char *pd = alias == 1 ? pa : alias == 2 ? pb
                                                     : gd + off_d * size;
    cr_assert_eq(cudaMemcpy(pa, a, bytes, cudaMemcpyHostToDevice),
                 cudaSuccess);
    cr_assert_eq(cudaMemcpy(pb, b, bytes, cudaMemcpyHostToDevice),
                 cudaSuccess);
    cr_assert_eq(tacl__reduce_cuda(pd, pa, pb, count, t, op, NULL),
                 TACL_OK, "%s %s count %zu", tacl_dtype_name(t),
                 tacl_op_name(op), count);
    cr_assert_eq(cudaMemcpy(got, pd, bytes, cudaMemcpyDeviceToHost),
                 cudaSuccess);
    for (size_t i = 0; i < count; i++)
        cr_assert_eq(memcmp(got + i * size, want + i * size, size), 0,
                     "%s %s count %zu alias %d offsets %zu/%zu/%zu: "
                     "element %zu differs", tacl_dtype_name(t),
                     tacl_op_name(op), count, alias, off_a, off_b, off_d,
                     i);
    if (alias == 0) {
        cr_assert_eq(cudaMemcpy(got, gd, room, cudaMemcpyDeviceToHost),
                     cudaSuccess);
        for (size_t i = 0; i < room; i++)
            if (i < off_d * size || i >= off_d * size + bytes)
                cr_assert_eq(got[i], 0xa5, "%s %s count %zu offset %zu: "
                             "byte %zu outside dst was written",
                             tacl_dtype_name(t), tacl_op_name(op), count,
                             off_d, i);
    }
    cudaFree(ga);
    cudaFree(gb);
    cudaFree(gd);
    free(a);
    free(b);
    free(want);
    free(got);
}

static void compare_reduce(tacl_dtype_t t, tacl_op_t op, size_t count,
                           int alias)
{
    compare_reduce_at(t, op, count, alias, 0, 0, 0);
}

/* Whether op is an element op of dtype t (no AVG; bitwise for integers). */
static int op_applies(int t, int op)
{
    return op != TACL_AVG && !(t >= TACL_FLOAT16 && op >= TACL_BAND);
}

/*
 * Every dtype x op: separate and aliased buffers from small to 3 M
 * elements, then every head and tail length of the vector path and the
 * element path: buffers offset by 0 to 16 / size - 1 elements and by
 * differing amounts, over odd lengths.
 */
Test(reduce_cuda, matches_cpu_every_dtype_and_op)
{
    static const size_t counts[] = {1, 7, 1000, 4099, 3000017};
    static const size_t odd_counts[] = {1, 3, 17, 255, 1027, 65537};
    static const size_t offs[][3] = {{0, 0, 0}, {1, 1, 1}, {3, 3, 3},
                                     {7, 7, 7}, {1, 0, 0}, {0, 2, 0},
                                     {0, 0, 5}, {3, 1, 2}};
    tt_skip_without_device();
    for (int t = 0; t < TACL_NUM_DTYPES; t++)
        for (int op = TACL_SUM; op < TACL_NUM_OPS; op++) {
            tacl_dtype_t dt = (tacl_dtype_t)t;
            tacl_op_t o = (tacl_op_t)op;
            if (!op_applies(t, op))
                continue;
            for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++)
                for (int alias = 0; alias < 3; alias++)
                    compare_reduce(dt, o, counts[c], alias);
            for (size_t c = 0; c < sizeof(odd_counts) / sizeof(size_t); c++)
                for (size_t k = 0; k < sizeof(offs) / sizeof(offs[0]);
                     k++) {
                    compare_reduce_at(dt, o, odd_counts[c], 0, offs[k][0],
                                      offs[k][1], offs[k][2]);
                    /* In place, at the same offsets. */
                    if (k < 4)
                        compare_reduce_at(dt, o, odd_counts[c],
                                          1 + (int)(c & 1), offs[k][0],
                                          offs[k][1], 0);
                }
        }
}

/* The copy kernel: every byte offset pair and odd lengths, bytes exact. */
Test(reduce_cuda, copy_matches_memcpy)
{
    static const size_t lens[] = {1, 15, 16, 17, 4096, 100003, 4194311};
    static const size_t offs[][2] = {{0, 0}, {5, 5}, {15, 15}, {0, 4},
                                     {4, 8}, {1, 2}, {3, 0}};
    const size_t room = 4194311 + 64;
    unsigned char *src = malloc(room), *got = malloc(room);
    unsigned char *gs = NULL, *gd = NULL;
    cudaStream_t stream;
    tt_skip_without_device();
    cr_assert(src && got);
    for (size_t i = 0; i < room; i++)
        src[i] = (unsigned char)tt_rng_next(&rng);
    cr_assert_eq(cudaMalloc((void **)&gs, room), cudaSuccess);
    cr_assert_eq(cudaMalloc((void **)&gd, room), cudaSuccess);
    cr_assert_eq(cudaStreamCreate(&stream), cudaSuccess);
    cr_assert_eq(cudaMemcpy(gs, src, room, cudaMemcpyHostToDevice),
                 cudaSuccess);
    for (size_t l = 0; l < sizeof(lens) / sizeof(lens[0]); l++)
        for (size_t o = 0; o < sizeof(offs) / sizeof(offs[0]); o++) {
            size_t so = offs[o][0], dof = offs[o][1], n = lens[l];
            cr_assert_eq(cudaMemset(gd, 0x5a, room), cudaSuccess);
            /* Every other case on a stream of its own. */
            cr_assert_eq(tacl__copy_cuda(gd + dof, gs + so, n,
                                         (o & 1) ? stream : NULL),
                         TACL_OK);
            cr_assert_eq(cudaStreamSynchronize(stream), cudaSuccess);
            cr_assert_eq(cudaMemcpy(got, gd, room, cudaMemcpyDeviceToHost),
                         cudaSuccess);
            cr_assert_eq(memcmp(got + dof, src + so, n), 0,
                         "copy of %zu bytes, offsets %zu -> %zu", n, so,
                         dof);
            for (size_t i = 0; i < room; i++)
                if (i < dof || i >= dof + n)
                    cr_assert_eq(got[i], 0x5a, "copy of %zu bytes at %zu "
                                 "wrote byte %zu", n, dof, i);
        }
    cudaStreamDestroy(stream);
    cudaFree(gs);
    cudaFree(gd);
    free(src);
    free(got);
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

/* A call that its arguments make fail with TACL_ERR_INVALID_ARG. */
#define EXPECT_INVALID(call)                                                 \
    cr_assert_eq((call), TACL_ERR_INVALID_ARG, "%s", #call)

/* These need no device: arguments are checked before any CUDA call. */
Test(reduce_cuda, invalid_arguments)
{
    _Alignas(16) char buf[16] = {0};
    EXPECT_INVALID(
        tacl__reduce_cuda(buf, buf, buf, 1, TACL_FLOAT32, TACL_AVG, NULL));
    EXPECT_INVALID(tacl__reduce_cuda(buf, buf, buf, 1, TACL_FLOAT32,
                                     TACL_NUM_OPS, NULL));
    EXPECT_INVALID(
        tacl__reduce_cuda(buf, buf, buf, 1, TACL_FLOAT32, TACL_BAND, NULL));
    EXPECT_INVALID(tacl__reduce_cuda(buf, buf, buf, 1, TACL_NUM_DTYPES,
                                     TACL_SUM, NULL));
    EXPECT_INVALID(
        tacl__reduce_cuda(NULL, buf, buf, 1, TACL_INT8, TACL_SUM, NULL));
    EXPECT_INVALID(tacl__div_cuda(buf, buf, 1, TACL_FLOAT32, 0, NULL));
    EXPECT_INVALID(tacl__div_cuda(buf, buf, 1, (tacl_dtype_t)-1, 2, NULL));
    /* Elements off their alignment would fault on the device. */
    EXPECT_INVALID(tacl__reduce_cuda(buf + 1, buf + 4, buf + 8, 1,
                                     TACL_FLOAT32, TACL_SUM, NULL));
    EXPECT_INVALID(tacl__reduce_cuda(buf, buf + 4, buf + 2, 1, TACL_INT64,
                                     TACL_BXOR, NULL));
    EXPECT_INVALID(
        tacl__div_cuda(buf + 8, buf + 1, 1, TACL_BFLOAT16, 2, NULL));
    /* The copy: NULL and overlapping buffers. */
    EXPECT_INVALID(tacl__copy_cuda(NULL, buf, 4, NULL));
    EXPECT_INVALID(tacl__copy_cuda(buf + 2, buf, 4, NULL));
    EXPECT_INVALID(tacl__copy_cuda(buf, buf + 3, 4, NULL));
    cr_assert_eq(tacl__copy_cuda(buf, buf, 4, NULL), TACL_OK);
    cr_assert_eq(tacl__copy_cuda(NULL, NULL, 0, NULL), TACL_OK);
    /* Nothing to do is not an error, with or without a device. */
    cr_assert_eq(tacl__reduce_cuda(NULL, NULL, NULL, 0, TACL_INT8,
                                   TACL_SUM, NULL),
                 TACL_OK);
}

/*
 * Without a device the launch fails cleanly: a status, not a crash.  The
 * devices are hidden from this test's process, so it runs everywhere.
 */
Test(reduce_cuda, launch_without_device_fails_cleanly)
{
    _Alignas(16) char buf[64] = {0};

    tt_hide_devices();
    cr_assert_eq(tacl__cuda_device_count(), 0);
    cr_assert_eq(tacl__reduce_cuda(buf, buf, buf, 4, TACL_FLOAT32,
                                   TACL_SUM, NULL),
                 TACL_ERR_SYSTEM);
    cr_assert_eq(tacl__div_cuda(buf, buf, 4, TACL_FLOAT32, 2, NULL),
                 TACL_ERR_SYSTEM);
    cr_assert_eq(tacl__copy_cuda(buf, buf + 16, 16, NULL),
                 TACL_ERR_SYSTEM);
    /* Asking again still answers, and still says none. */
    cr_assert_eq(tacl__cuda_device_count(), 0);
}

TT_CUDA_TEST_MAIN()
