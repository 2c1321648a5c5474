/*
 * The data of the perf harness and its exact check.
 *
 * Every rank fills its input with small integers chosen per collective and
 * op so that any order of reduction gives the same exactly representable
 * result in every dtype (sums stay below the dtype's largest exact
 * integer, products are powers of two, averages are sums of n equal
 * values plus +1/-1 pairs; the bitwise ops on values below 128 stay
 * below 128).  The check then compares each output element
 * with the expected value exactly, so an error of one unit is caught.
 * Elements are read and written with the kernels' elem.h, whose half
 * and bfloat16 conversions round to nearest even as the kernels do.
 */
#include <math.h>
#include <string.h>

#include "common.h"
#include "elem.h"

/* The largest integer every partial result may reach in a dtype. */
static double exact_limit(tacl_dtype_t dtype)
{
    switch (dtype) {
    case TACL_INT8:
        return 127;
    case TACL_UINT8:
        return 255;
    case TACL_FLOAT16:
        return 2048;
    case TACL_BFLOAT16:
        return 256;
    case TACL_FLOAT32:
        return 16777216.0;
    default:
        return 1e15;
    }
}

/* How the values of one run are generated; see the top of the file. */
typedef struct {
    int reduction;          /* the collective combines values */
    tacl_op_t op;
    int nranks;
    unsigned modulus;       /* values (7 rank + 3 idx) % modulus */
    unsigned prod_period;   /* PROD: a 2 every prod_period elements */
    unsigned avg_range;     /* AVG: base values 1 .. avg_range */
} gen_t;

static void gen_init(gen_t *g, tacl_coll_t kind,
                     const tacl__perf_opts_t *opts, int nranks)
{
    double lim = exact_limit(opts->dtype);
    double per_rank = floor(lim / nranks);

    g->reduction = tacl__perf_has_op(kind);
    g->op = opts->op;
    g->nranks = nranks;
    g->modulus = 97;
    if (g->reduction && opts->op == TACL_SUM) {
        g->modulus = (unsigned)fmax(1.0, fmin(5.0, per_rank + 1));
    }
    g->prod_period = nranks > 8 ? (unsigned)nranks : 8;
    g->avg_range = (unsigned)fmax(1.0, fmin(4.0, per_rank - 1));
}

static double last_max_error;

static double gen_value(const gen_t *g, int rank, size_t idx)
{
    if (g->reduction && g->op == TACL_PROD) {
        return (idx + (size_t)rank) % g->prod_period == 0 ? 2 : 1;
    }
    if (g->reduction && g->op == TACL_AVG) {
        double base = 1 + (double)((idx * 3) % g->avg_range);

        /* Pairs of ranks add +1 and -1: the sum is nranks * base. */
        if (rank % 2 == 0 && rank + 1 < g->nranks) {
            return base + 1;
        }
        return rank % 2 == 1 ? base - 1 : base;
    }
    return (double)(((size_t)rank * 7 + idx * 3) % g->modulus);
}

static double gen_reduced(const gen_t *g, size_t idx)
{
    double acc = gen_value(g, 0, idx), v;
    int r;

    for (r = 1; r < g->nranks; r++) {
        v = gen_value(g, r, idx);
        switch (g->op) {
        case TACL_PROD:
            acc *= v;
            break;
        case TACL_MAX:
            acc = fmax(acc, v);
            break;
        case TACL_MIN:
            acc = fmin(acc, v);
            break;
        case TACL_BAND:
            acc = (double)((long long)acc & (long long)v);
            break;
        case TACL_BOR:
            acc = (double)((long long)acc | (long long)v);
            break;
        case TACL_BXOR:
            acc = (double)((long long)acc ^ (long long)v);
            break;
        default:
            acc += v;
            break;
        }
    }
    return g->op == TACL_AVG ? acc / g->nranks : acc;
}

void tacl__perf_fill(tacl_coll_t kind, const tacl__perf_opts_t *opts,
                     const tacl__perf_sizes_t *sizes, int rank, int nranks,
                     void *sendbuf, void *recvbuf, int in_place)
{
    size_t ts = tacl__perf_dtype_size(opts->dtype), i, send_off, recv_off;
    size_t total = sizes->recv_count > sizes->send_count ?
                   sizes->recv_count : sizes->send_count;
    int src = rank;
    char *in;
    gen_t g;

    gen_init(&g, kind, opts, nranks);
    tacl__perf_inplace_offsets(kind, sizes, rank, &send_off, &recv_off);
    /* All ones: NaN for floats, -1 or the maximum for integers. */
    memset(recvbuf, 0xff, (in_place ? total : sizes->recv_count) * ts);
    in = in_place ? (char *)recvbuf + send_off * ts : sendbuf;
    if (kind == TACL_COLL_BROADCAST) {
        if (rank != opts->root) {
            if (!in_place) {
                memset(sendbuf, 0xff, sizes->send_count * ts);
            }
            return;
        }
        src = opts->root;
    }
    for (i = 0; i < sizes->send_count; i++) {
        tacl__elem_store_int(opts->dtype, in, i,
                             (int64_t)gen_value(&g, src, i));
    }
}

long long tacl__perf_check(tacl_coll_t kind,
                           const tacl__perf_opts_t *opts,
                           const tacl__perf_sizes_t *sizes, int rank,
                           int nranks, const void *recvbuf, int in_place)
{
    size_t ts = tacl__perf_dtype_size(opts->dtype), i, cnt = sizes->count;
    size_t send_off, recv_off, blk;
    const char *out = recvbuf;
    long long wrong = 0;
    double want, got, err, max_err = 0;
    gen_t g;

    gen_init(&g, kind, opts, nranks);
    tacl__perf_inplace_offsets(kind, sizes, rank, &send_off, &recv_off);
    if (in_place) {
        out += recv_off * ts;
    }
    if (kind == TACL_COLL_REDUCE && rank != opts->root) {
        return 0;
    }
    if (kind == TACL_COLL_ALLTOALLV) {
        /* Rank q's block: its send buffer's elements from sd on. */
        for (int q = 0; q < nranks; q++) {
            size_t sd, rd, n = tacl__perf_vblock(nranks, cnt, q, rank, &sd,
                                                 &rd);

            for (i = 0; i < n; i++) {
                want = gen_value(&g, q, sd + i);
                got = tacl__elem_load(opts->dtype, out, rd + i);
                wrong += !(got == want);
            }
        }
        last_max_error = 0;
        return wrong;
    }
    for (i = 0; i < sizes->recv_count; i++) {
        switch (kind) {
        case TACL_COLL_ALLGATHER:
            want = gen_value(&g, (int)(i / cnt), i % cnt);
            break;
        case TACL_COLL_REDUCE_SCATTER:
            want = gen_reduced(&g, (size_t)rank * cnt + i);
            break;
        case TACL_COLL_BROADCAST:
            want = gen_value(&g, opts->root, i);
            break;
        case TACL_COLL_ALLTOALL:
            blk = i / cnt;
            want = gen_value(&g, (int)blk, (size_t)rank * cnt + i % cnt);
            break;
        case TACL_COLL_SEND:
            want = gen_value(&g, (rank + nranks - 1) % nranks, i);
            break;
        default:
            want = gen_reduced(&g, i);
            break;
        }
        got = tacl__elem_load(opts->dtype, out, i);
        err = fabs(got - want);
        if (opts->qbits != 0) {
            /* NaN fails both comparisons. */
            if (!(err <= tacl__perf_quant_bound(kind, opts, nranks, want))) {
                wrong++;
            }
            if (err > max_err || err != err) {
                max_err = err;
            }
        } else if (!(got == want)) {
            /* NaN (the poison of float outputs) never compares equal. */
            wrong++;
        }
    }
    last_max_error = max_err;
    return wrong;
}

double tacl__perf_quant_bound(tacl_coll_t kind,
                              const tacl__perf_opts_t *opts, int nranks,
                              double want)
{
    double qmax = opts->qbits == 4 ? 7 : 127, vmax, steps;
    gen_t g;

    gen_init(&g, kind, opts, nranks);
    vmax = !g.reduction ? g.modulus - 1
           : g.op == TACL_AVG ? g.avg_range + 1 : g.modulus - 1;
    steps = kind == TACL_COLL_ALLGATHER ? 0.5 : (double)nranks;
    if (g.reduction && g.op == TACL_AVG) {
        steps /= nranks;
    }
    return steps * vmax / qmax + fabs(want) * ldexp(1.0, -8);
}

double tacl__perf_last_max_error(void)
{
    return last_max_error;
}

void tacl__perf_corrupt(tacl_coll_t kind,
                        const tacl__perf_opts_t *opts,
                        const tacl__perf_sizes_t *sizes, int rank,
                        void *recvbuf, int in_place)
{
    size_t ts = tacl__perf_dtype_size(opts->dtype), send_off, recv_off;
    char *out = recvbuf;
    double v;

    if (sizes->recv_count == 0) {
        return;
    }
    tacl__perf_inplace_offsets(kind, sizes, rank, &send_off, &recv_off);
    if (in_place) {
        out += recv_off * ts;
    }
    v = tacl__elem_load(opts->dtype, out, sizes->recv_count / 2);
    tacl__elem_store_int(opts->dtype, out, sizes->recv_count / 2,
                         v == 3 ? 5 : 3);
}
