/*
 * reduce_bench: throughput of tacl__reduce_cpu(SUM) per dtype.
 *
 * Each buffer holds 32 MB (or the size given in MB as the first argument).
 * GB/s counts the bytes the kernel moves: two inputs read and one output
 * written, 3 x 32 MB per call.  The "in-place" column passes dst == a.  A
 * memcpy of the same size (2 x 32 MB moved) is printed first as the
 * machine's memory bandwidth to compare with.  The best of a few runs is
 * reported, so the figure is the kernel's, not a noisy neighbour's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "reduce.h"

#define BENCH_REPS 7

static double best_seconds_memcpy(void *dst, const void *src, size_t bytes)
{
    double best = 1e30;
    for (int r = 0; r < BENCH_REPS; r++) {
        uint64_t t0 = tacl__now_ns();
        memcpy(dst, src, bytes);
        double s = (double)(tacl__now_ns() - t0) * 1e-9;
        best = s < best ? s : best;
    }
    return best;
}

static double best_seconds_reduce(void *dst, const void *a, const void *b,
                                  size_t count, tacl_dtype_t dtype)
{
    double best = 1e30;
    for (int r = 0; r < BENCH_REPS; r++) {
        uint64_t t0 = tacl__now_ns();
        if (tacl__reduce_cpu(dst, a, b, count, dtype, TACL_SUM) != TACL_OK)
            return -1.0;
        double s = (double)(tacl__now_ns() - t0) * 1e-9;
        best = s < best ? s : best;
    }
    return best;
}

int main(int argc, char **argv)
{
    size_t mb = argc > 1 ? strtoul(argv[1], NULL, 10) : 32;
    size_t bytes = mb << 20;
    if (bytes == 0) {
        fprintf(stderr, "usage: %s [megabytes per buffer]\n", argv[0]);
        return 2;
    }
    unsigned char *a = malloc(bytes);
    unsigned char *b = malloc(bytes);
    unsigned char *d = malloc(bytes);
    if (a == NULL || b == NULL || d == NULL) {
        fprintf(stderr, "reduce_bench: cannot allocate 3 x %zu MB\n", mb);
        return 1;
    }
    /* Small, finite values in every format: bytes 0x01..0x3f repeated. */
    for (size_t i = 0; i < bytes; i++) {
        a[i] = (unsigned char)(1 + i % 63);
        b[i] = (unsigned char)(1 + (i * 7) % 63);
    }
    memset(d, 0, bytes);

    double gb = (double)bytes / 1e9;
    printf("buffers %zu MB, best of %d\n", mb, BENCH_REPS);
    printf("%-10s %10s %10s\n", "memcpy", "GB/s", "");
    printf("%-10s %10.2f\n", "",
           2 * gb / best_seconds_memcpy(d, a, bytes));
    printf("%-10s %10s %10s\n", "sum", "GB/s", "in-place");
    for (int t = 0; t < TACL_NUM_DTYPES; t++) {
        tacl_dtype_t dtype = (tacl_dtype_t)t;
        size_t count = bytes / tacl_dtype_size(dtype);
        double s1 = best_seconds_reduce(d, a, b, count, dtype);
        double s2 = best_seconds_reduce(d, d, b, count, dtype);
        if (s1 < 0 || s2 < 0) {
            fprintf(stderr, "reduce_bench: %s sum failed\n",
                    tacl_dtype_name(dtype));
            return 1;
        }
        printf("%-10s %10.2f %10.2f\n", tacl_dtype_name(dtype), 3 * gb / s1,
               3 * gb / s2);
    }
    free(a);
    free(b);
    free(d);
    return 0;
}
