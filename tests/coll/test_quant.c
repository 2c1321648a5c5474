/*
 * The quantized collectives (ZeRO++ qwZ and qgZ) through the public API,
 * on 2 and 4 forked ranks of one node.
 *
 * Inputs are integers, exact in every float type.  Results are checked
 * against the exact sums within the bound the quantization steps imply:
 * half a quantization step per quantization (the scale of a block is at
 * most the largest magnitude within a block's length of the element,
 * over qmax, wherever the blocks fall), plus the rounding of the output.
 * The caller's own all-gather block must be exact.  Bad quantization
 * parameters are refused with TACL_ERR_INVALID_ARG on every rank, and
 * the communicator works afterwards.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "harness.h"
#include "values.h"

typedef struct {
    size_t count;
    tacl_dtype_t dt;
    int bits;
    uint32_t block;     /* as passed: 0 means 256 */
    tacl_op_t op;
    int in_place;
    int nb;             /* use the _nb form and wait */
} qcase_t;

/* Input element i of rank q: block-varying magnitudes up to 150. */
static long qin(int q, size_t i)
{
    return ((long)((size_t)q * 37 + i * 11) % 101 - 50) *
           (long)(1 + (i / 64) % 3);
}

static double unit(tacl_dtype_t dt)
{
    return dt == TACL_FLOAT16 ? 0x1p-11 : dt == TACL_BFLOAT16 ? 0x1p-8
                                                              : 0x1p-24;
}

/* Largest |input| of rank q, slice base, over [lo, hi) of n elements. */
static double qmaxabs(int q, size_t base, long lo, long hi, size_t n)
{
    double a = 0;
    long i;

    for (i = lo < 0 ? 0 : lo; i < hi && (size_t)i < n; i++)
        a = fmax(a, fabs((double)qin(q, base + (size_t)i)));
    return a;
}

static int check_allgather(coll_ctx_t *ctx, const qcase_t *c,
                           const void *out)
{
    uint32_t b = c->block ? c->block : 256;
    double qmax = c->bits == 8 ? 127 : 7;
    size_t i;
    int j;

    for (j = 0; j < ctx->nranks; j++)
        for (i = 0; i < c->count; i++) {
            double x = (double)qin(j, i);
            double y = val_load(c->dt, out, (size_t)j * c->count + i);
            size_t lo = i / b * b;
            double e = 0.5 * qmaxabs(j, 0, (long)lo, (long)(lo + b),
                                     c->count) / qmax * (1 + 1e-6);

            if (j == ctx->rank)
                COLL_CHECK(ctx, y == x, "own element %zu is %g, not %g", i,
                           y, x);
            else
                COLL_CHECK(ctx, fabs(y - x) <=
                                    e + unit(c->dt) * (fabs(x) + e),
                           "element %zu of block %d is %g, expected %g "
                           "within %g", i, j, y, x,
                           e + unit(c->dt) * (fabs(x) + e));
        }
    return 0;
}

/*
 * One node: a 1-hop quantized all-to-all, so each input is quantized
 * once; the p dequantized values are summed in float32 and rounded to
 * dtype (for AVG, then divided and rounded again).
 */
static int check_reduce_scatter(coll_ctx_t *ctx, const qcase_t *c,
                                const void *out)
{
    uint32_t b = c->block ? c->block : 256;
    double qmax = c->bits == 8 ? 127 : 7, u = unit(c->dt);
    int n = ctx->nranks, q;
    size_t i, base = (size_t)ctx->rank * c->count;

    for (i = 0; i < c->count; i++) {
        double sum = 0, err = 0, mag = 0, ref, bound;
        double y = val_load(c->dt, out, i);

        for (q = 0; q < n; q++) {
            double w = qmaxabs(q, base, (long)i - (long)b + 1,
                               (long)(i + b), c->count);
            double e = 0.5 * w / qmax * (1 + 1e-6);

            sum += (double)qin(q, base + i);
            err += e;
            mag += w + e;
        }
        err += 0x1p-22 * mag * n;
        bound = err + u * (fabs(sum) + err);
        ref = sum;
        if (c->op == TACL_AVG) {
            ref = sum / n;
            bound = bound / n + u * (fabs(ref) + bound / n);
        }
        COLL_CHECK(ctx, fabs(y - ref) <= bound, "element %zu is %g, "
                   "expected %g within %g", i, y, ref, bound);
    }
    return 0;
}

static int run_one(coll_ctx_t *ctx, const qcase_t *c, int allgather)
{
    size_t es = tacl_dtype_size(c->dt), n = (size_t)ctx->nranks, i;
    size_t sn = allgather ? c->count : c->count * n;
    size_t rn = allgather ? c->count * n : c->count;
    char *sbuf = NULL, *rbuf = calloc(rn * es + 1, 1);
    const void *send;
    void *recv = rbuf;
    tacl_quant_t qp = {c->bits, c->block};
    tacl_request_t req = NULL;
    tacl_status_t st;
    int rc;

    if (c->in_place && allgather) {
        send = rbuf + (size_t)ctx->rank * c->count * es;
        for (i = 0; i < c->count; i++)
            val_store(c->dt, (void *)send, i, qin(ctx->rank, i));
    } else {
        sbuf = calloc(sn * es + 1, 1);
        for (i = 0; i < sn; i++)
            val_store(c->dt, sbuf, i, qin(ctx->rank, i));
        send = sbuf;
        if (c->in_place) {
            recv = sbuf + (size_t)ctx->rank * c->count * es;
        }
    }
    if (allgather && c->nb)
        st = tacl_allgather_quantized_nb(send, recv, c->count, c->dt, &qp,
                                         ctx->comm, NULL, &req);
    else if (allgather)
        st = tacl_allgather_quantized(send, recv, c->count, c->dt, &qp,
                                      ctx->comm, NULL);
    else if (c->nb)
        st = tacl_reduce_scatter_quantized_nb(send, recv, c->count, c->dt,
                                              c->op, &qp, ctx->comm, NULL,
                                              &req);
    else
        st = tacl_reduce_scatter_quantized(send, recv, c->count, c->dt,
                                           c->op, &qp, ctx->comm, NULL);
    if (st == TACL_OK && req != NULL) {
        st = tacl_request_wait(req);
        tacl_request_free(req);
    }
    if (st != TACL_OK)
        rc = coll_fail(ctx, "%s of %zu %s, %d bits: %s: %s",
                       allgather ? "allgather_quantized"
                                 : "reduce_scatter_quantized",
                       c->count, tacl_dtype_name(c->dt), c->bits,
                       tacl_status_string(st),
                       tacl_comm_last_error(ctx->comm));
    else if (allgather)
        rc = check_allgather(ctx, c, recv);
    else
        rc = check_reduce_scatter(ctx, c, recv);
    if (rc)
        coll_fail(ctx, " (count %zu %s, %d bits, block %u, %s%s)", c->count,
                  tacl_dtype_name(c->dt), c->bits, c->block,
                  c->in_place ? "in place" : "out of place",
                  c->nb ? ", nb" : "");
    free(sbuf);
    free(rbuf);
    return rc;
}

static const qcase_t cases[] = {
    {1, TACL_FLOAT32, 8, 64, TACL_SUM, 0, 0},
    {1000, TACL_FLOAT32, 8, 64, TACL_SUM, 0, 0},
    {1000, TACL_FLOAT16, 4, 0, TACL_SUM, 1, 0},
    {4099, TACL_BFLOAT16, 8, 256, TACL_AVG, 0, 1},
    {777, TACL_FLOAT32, 4, 64, TACL_AVG, 1, 1},
};

static int body_results(coll_ctx_t *ctx)
{
    size_t k;
    int rc;

    for (k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        rc = run_one(ctx, &cases[k], 1);
        if (rc == 0)
            rc = run_one(ctx, &cases[k], 0);
        if (rc)
            return rc;
    }
    return 0;
}

Test(quant, results_2_ranks, .timeout = 120)
{
    coll_run_expect_pass(2, body_results, NULL, NULL);
}

Test(quant, results_4_ranks, .timeout = 120)
{
    coll_run_expect_pass(4, body_results, NULL, NULL);
}

/* A quantized call every rank must refuse with TACL_ERR_INVALID_ARG. */
typedef struct {
    const char *what;
    int allgather;          /* else reduce-scatter */
    tacl_dtype_t dt;
    tacl_op_t op;           /* of a reduce-scatter */
    const tacl_quant_t *q;
} bad_call_t;

static const tacl_quant_t bits3 = {3, 64}, bits0 = {0, 64}, bits8 = {8, 64};

static const bad_call_t bad_calls[] = {
    {"allgather with 3 bits", 1, TACL_FLOAT32, TACL_SUM, &bits3},
    {"reduce-scatter with 3 bits", 0, TACL_FLOAT32, TACL_SUM, &bits3},
    /* 0 bits is no quantization at all, not a quietly exact call. */
    {"allgather with 0 bits", 1, TACL_FLOAT32, TACL_SUM, &bits0},
    {"reduce-scatter with 0 bits", 0, TACL_FLOAT32, TACL_SUM, &bits0},
    {"allgather of int32", 1, TACL_INT32, TACL_SUM, &bits8},
    {"reduce-scatter of int32", 0, TACL_INT32, TACL_SUM, &bits8},
    {"reduce-scatter with max", 0, TACL_FLOAT32, TACL_MAX, &bits8},
    {"allgather without quantization parameters", 1, TACL_FLOAT32, TACL_SUM,
     NULL},
};

static int body_rejects(coll_ctx_t *ctx)
{
    /* 4-byte elements: float32 or int32. */
    uint32_t send[64 * 4] = {0}, recv[64 * 4];
    qcase_t good = {64, TACL_FLOAT32, 8, 64, TACL_SUM, 0, 0};

    for (size_t i = 0; i < sizeof(bad_calls) / sizeof(bad_calls[0]); i++) {
        const bad_call_t *b = &bad_calls[i];
        tacl_status_t st =
            b->allgather
                ? tacl_allgather_quantized(send, recv, 64, b->dt, b->q,
                                           ctx->comm, NULL)
                : tacl_reduce_scatter_quantized(send, recv, 64, b->dt, b->op,
                                                b->q, ctx->comm, NULL);

        COLL_CHECK(ctx, st == TACL_ERR_INVALID_ARG, "%s gave %s", b->what,
                   tacl_status_string(st));
        COLL_CHECK(ctx, tacl_comm_last_error(ctx->comm)[0] != '\0',
                   "%s left no message", b->what);
    }
    /* The communicator still works. */
    if (run_one(ctx, &good, 1) || run_one(ctx, &good, 0))
        return 1;
    return 0;
}

Test(quant, rejects_bad_parameters, .timeout = 60)
{
    coll_run_expect_pass(2, body_rejects, NULL, NULL);
}
