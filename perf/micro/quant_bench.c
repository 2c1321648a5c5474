/*
 * Throughput of the CPU quantization kernels: quantize, dequantize and the
 * fused dequantize-sum-quantize of two inputs, on 64 MB of float32 and of
 * float16, int8 and int4, with the block size given (default 256).
 *
 * Usage: quant_bench [block [repetitions]]
 *
 * Each line gives the best of the repetitions as GB/s of the
 * full-precision tensor (n elements times the element size: what the
 * quantized path stands in for) and as GB/s of the bytes the kernel
 * actually reads and writes.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "quant.h"
#include "reduce.h"

#define BENCH_BYTES (64u << 20)

static double best_seconds(tacl_status_t (*run)(void *), void *arg,
                           int reps)
{
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        uint64_t t0 = tacl__now_ns();
        if (run(arg) != TACL_OK) {
            fprintf(stderr, "quant_bench: kernel failed\n");
            exit(1);
        }
        double s = (double)(tacl__now_ns() - t0) * 1e-9;
        best = s < best ? s : best;
    }
    return best;
}

typedef struct {
    void *x;
    void *q[2];
    void *y;
    size_t n;
    tacl_dtype_t dtype;
    uint32_t block;
    int bits;
} bench_t;

static tacl_status_t run_quantize(void *arg)
{
    bench_t *b = arg;
    return tacl__quantize(b->x, b->n, b->dtype, b->block, b->bits, b->q[0]);
}

static tacl_status_t run_dequantize(void *arg)
{
    bench_t *b = arg;
    return tacl__dequantize(b->q[0], b->n, b->block, b->bits, b->dtype,
                            b->y);
}

static tacl_status_t run_drq(void *arg)
{
    bench_t *b = arg;
    return tacl__dequant_reduce_quant((const void *const *)b->q, 2, b->n,
                                      b->block, b->bits, b->y);
}

static void report(const char *what, const bench_t *b, double s,
                   double moved)
{
    double full = (double)b->n * (double)tacl_dtype_size(b->dtype);
    printf("%-22s %-8s int%d block %-5u %7.2f GB/s of input   "
           "%7.2f GB/s moved  (%.2f ms)\n",
           what, tacl_dtype_name(b->dtype), b->bits, b->block,
           full / s * 1e-9, moved / s * 1e-9, s * 1e3);
}

int main(int argc, char **argv)
{
    uint32_t block = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 0) : 256;
    int reps = argc > 2 ? atoi(argv[2]) : 3;
    static const tacl_dtype_t dtypes[] = {TACL_FLOAT32, TACL_FLOAT16};

    if (block == 0 || reps < 1) {
        fprintf(stderr, "usage: quant_bench [block [repetitions]]\n");
        return 2;
    }
    for (size_t d = 0; d < 2; d++) {
        for (int bits = 8; bits >= 4; bits -= 4) {
            bench_t b = {.dtype = dtypes[d], .block = block, .bits = bits};
            size_t es = tacl_dtype_size(b.dtype);
            b.n = BENCH_BYTES / es;
            size_t qb = tacl__quant_bytes(b.n, block, bits);
            b.x = malloc(BENCH_BYTES);
            b.y = malloc(BENCH_BYTES);
            b.q[0] = malloc(qb);
            b.q[1] = malloc(qb);
            if (!b.x || !b.y || !b.q[0] || !b.q[1]) {
                fprintf(stderr, "quant_bench: out of memory\n");
                return 1;
            }
            for (size_t i = 0; i < b.n; i++) {
                float v = (float)((i * 2654435761u) % 2001) * 1e-3f - 1.0f;
                if (b.dtype == TACL_FLOAT32)
                    ((float *)b.x)[i] = v;
                else
                    ((uint16_t *)b.x)[i] = tacl__float_to_half(v);
            }
            memset(b.y, 0, BENCH_BYTES);
            run_quantize(&b);
            memcpy(b.q[1], b.q[0], qb);

            double s = best_seconds(run_quantize, &b, reps);
            report("quantize", &b, s, (double)BENCH_BYTES + (double)qb);
            s = best_seconds(run_dequantize, &b, reps);
            report("dequantize", &b, s, (double)BENCH_BYTES + (double)qb);
            s = best_seconds(run_drq, &b, reps);
            report("dequant_reduce_quant/2", &b, s, 3.0 * (double)qb);
            free(b.x);
            free(b.y);
            free(b.q[0]);
            free(b.q[1]);
        }
    }
    return 0;
}
