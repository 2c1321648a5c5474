/*
 * The sparse all-reduce (tacl_sparse_allreduce) against the rank-order
 * sum of the densified inputs, bit for bit: every scheme, both index
 * types, rows of 1 to 256 elements, 1 to 16 ranks and two emulated nodes
 * of two, dense and row-sparse outputs; rows counts of zero and one rank
 * giving every row; and each kind of bad input named.
 *
 * Values are drawn so the reference is exact in any order (multiples of
 * 1/16 for float types, small integers for the 16-bit ones), which DENSE
 * (the dense all-reduce's order) needs; a second case draws arbitrary
 * floats for the rank-order schemes, whose sums must still match the
 * rank-order reference exactly.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "harness.h"
#include "rng.h"

#define NROWS 5000

typedef struct {
    tacl_sparse_scheme_t scheme;
    int idx64;
    size_t row_len;
    tacl_dtype_t dtype;
    int exact;        /* values whose sums are exact in any order */
    int pattern;      /* 0 random, 1 one rank gives every row, 2 some
                         ranks give none */
    int per_node;     /* ranks per emulated node (node rank / per_node),
                         0: one node */
    int node_order;   /* the reference adds each node's rows in rank
                         order, then the nodes' sums (ZEN_HIER's order) */
} case_t;

/* Rank r's row count, indices and values: the same on every rank. */
static size_t rank_rows(const case_t *c, int r, int nranks, uint64_t *idx)
{
    tt_rng_t rng = {0x51ed270b2c3a5f1dull ^ ((uint64_t)(r + 1) << 20) ^
                    (uint64_t)c->pattern};
    uint8_t *seen = calloc(NROWS, 1);
    size_t nnz;

    if (c->pattern == 1)
        nnz = r == nranks - 1 ? NROWS : (size_t)(tt_rng_next(&rng) % 50);
    else if (c->pattern == 2 && r % 2 == 1)
        nnz = 0;
    else
        nnz = 1 + (size_t)(tt_rng_next(&rng) % 400);
    for (size_t got = 0; got < nnz;) {
        /* Skewed toward small rows, as gradients are. */
        double u = (double)(tt_rng_next(&rng) >> 11) * 0x1p-53;
        uint64_t row = nnz == NROWS ? got : (uint64_t)(u * u * NROWS);

        if (!seen[row]) {
            seen[row] = 1;
            idx[got++] = row;
        }
    }
    free(seen);
    return nnz;
}

static void put_value(tacl_dtype_t dtype, void *at, size_t i, double v)
{
    switch (dtype) {
    case TACL_FLOAT32:
        ((float *)at)[i] = (float)v;
        break;
    case TACL_FLOAT64:
        ((double *)at)[i] = v;
        break;
    case TACL_INT32:
        ((int32_t *)at)[i] = (int32_t)v;
        break;
    case TACL_FLOAT16: {
        /* Small integers: exact in half (sign, exponent 15 + e, 10 bits). */
        int k = (int)v, neg = k < 0, e = 0;
        uint16_t h = 0;

        k = neg ? -k : k;
        if (k) {
            while ((k >> e) > 1)
                e++;
            h = (uint16_t)((15 + e) << 10 | ((k << (10 - e)) & 0x3ff));
        }
        ((uint16_t *)at)[i] = (uint16_t)(h | (neg ? 0x8000 : 0));
        break;
    }
    case TACL_BFLOAT16: {
        float f = (float)v;
        uint32_t b;

        memcpy(&b, &f, 4);
        ((uint16_t *)at)[i] = (uint16_t)(b >> 16);
        break;
    }
    default:
        break;
    }
}

static double draw_value(const case_t *c, tt_rng_t *rng)
{
    uint64_t x = tt_rng_next(rng);

    if (c->dtype == TACL_FLOAT16 || c->dtype == TACL_BFLOAT16 ||
        c->dtype == TACL_INT32)
        return (double)((int)(x % 9) - 4);
    if (c->exact)
        return (double)((int)(x % 257) - 128) / 16.0;
    return ((double)(x >> 11) * 0x1p-53 - 0.5) * 1e3;
}

/* Row r's values of rank r's row i. */
static void rank_values(const case_t *c, int r, size_t nnz, void *vals)
{
    tt_rng_t rng = {0x2b992ddfa23249d6ull + (uint64_t)r * 7919};

    for (size_t k = 0; k < nnz * c->row_len; k++)
        put_value(c->dtype, vals, k, draw_value(c, &rng));
}

/* acc[k] += v[k] for one element in the dtype's own arithmetic. */
static void add_elem(tacl_dtype_t dtype, void *acc, const void *v, size_t k)
{
    switch (dtype) {
    case TACL_FLOAT32:
        ((float *)acc)[k] += ((const float *)v)[k];
        break;
    case TACL_FLOAT64:
        ((double *)acc)[k] += ((const double *)v)[k];
        break;
    case TACL_INT32:
        ((int32_t *)acc)[k] += ((const int32_t *)v)[k];
        break;
    default: {
        /* 16-bit types: the test's values keep every sum exact, so adding
         * the tacl_sparse_allreduce way (through its kernel) or here
         * cannot differ; add as integers through float. */
        float a, b;
        uint16_t ha = ((uint16_t *)acc)[k], hb = ((const uint16_t *)v)[k];

        if (dtype == TACL_BFLOAT16) {
            uint32_t x = (uint32_t)ha << 16, y = (uint32_t)hb << 16;

            memcpy(&a, &x, 4);
            memcpy(&b, &y, 4);
        } else {
            int ea = (ha >> 10) & 31, eb = (hb >> 10) & 31;

            a = ea ? (float)((1024 | (ha & 0x3ff)) << ea) / (1 << 25) : 0;
            b = eb ? (float)((1024 | (hb & 0x3ff)) << eb) / (1 << 25) : 0;
            a = ha & 0x8000 ? -a : a;
            b = hb & 0x8000 ? -b : b;
        }
        put_value(dtype, acc, k, (double)(a + b));
    }
    }
}

static int body_sum(coll_ctx_t *ctx)
{
    const case_t *c = ctx->arg;
    size_t es = tacl_dtype_size(c->dtype), rb = c->row_len * es;
    size_t ib = c->idx64 ? 8 : 4;
    uint64_t *idx = malloc(NROWS * sizeof(*idx));
    uint8_t *ref = calloc(NROWS, rb), *seen = calloc(NROWS, 1);
    uint8_t *vals = malloc(NROWS * rb), *mine_vals = malloc(NROWS * rb);
    uint8_t *dense = malloc(NROWS * rb), *mine_idx = malloc(NROWS * ib);
    uint8_t *part = calloc(NROWS, rb);
    size_t mine = 0, nunion = 0;
    tacl_sparse_result_t res;
    tacl_comm_t comm = ctx->comm;
    int failed = 0;

    COLL_CHECK(ctx, idx && ref && seen && vals && mine_vals && dense &&
                    mine_idx, "out of memory");
    COLL_CHECK(ctx, part != NULL, "out of memory");
    if (c->per_node > 0)
        COLL_CHECK_OK(ctx, coll_join_node(ctx, "sparse-node", c->per_node,
                                          &comm));
    /* The reference: every rank's rows added in rank order (or each
     * node's, then the nodes' sums: part is the node's). */
    for (int r = 0; r < ctx->nranks; r++) {
        size_t nnz = rank_rows(c, r, ctx->nranks, idx);
        uint8_t *acc = c->node_order ? part : ref;

        rank_values(c, r, nnz, vals);
        for (size_t i = 0; i < nnz; i++) {
            for (size_t k = 0; k < c->row_len; k++)
                add_elem(c->dtype, acc + idx[i] * rb, vals + i * rb, k);
            nunion += !seen[idx[i]];
            seen[idx[i]] = 1;
        }
        if (c->node_order && (r + 1) % c->per_node == 0) {
            for (size_t k = 0; k < NROWS * c->row_len; k++)
                add_elem(c->dtype, ref, part, k);
            memset(part, 0, NROWS * rb);
        }
        if (r == ctx->rank) {
            mine = nnz;
            memcpy(mine_vals, vals, nnz * rb);
            for (size_t i = 0; i < nnz; i++) {
                if (c->idx64)
                    ((int64_t *)mine_idx)[i] = (int64_t)idx[i];
                else
                    ((int32_t *)mine_idx)[i] = (int32_t)idx[i];
            }
        }
    }
    tacl_sparse_t in = {.nrows = NROWS, .row_len = c->row_len,
                        .index_type = c->idx64 ? TACL_INT64 : TACL_INT32,
                        .nnz = mine, .indices = mine_idx,
                        .values = mine_vals};

    COLL_CHECK_OK(ctx, tacl_sparse_allreduce(&in, c->dtype, TACL_SUM, dense,
                                             &res, c->scheme, comm));
    COLL_CHECK(ctx, c->scheme == TACL_SPARSE_AUTO ||
                    tacl_sparse_last_scheme(comm) == c->scheme,
               "ran %s", tacl_sparse_scheme_name(
                             tacl_sparse_last_scheme(comm)));
    for (size_t row = 0; row < NROWS && !failed; row++)
        if (memcmp(dense + row * rb, ref + row * rb, rb) != 0)
            failed = coll_fail(ctx, "%s: dense row %zu differs",
                               tacl_sparse_scheme_name(c->scheme), row);
    COLL_CHECK(ctx, res.nnz == nunion, "sparse result has %zu rows, the "
               "union %zu", res.nnz, nunion);
    for (size_t i = 0, row = 0; i < res.nnz && !failed; i++, row++) {
        uint64_t got = c->idx64 ? (uint64_t)((int64_t *)res.indices)[i]
                                : (uint64_t)((int32_t *)res.indices)[i];

        while (row < NROWS && !seen[row])
            row++;
        if (got != row)
            failed = coll_fail(ctx, "sparse row %zu is %llu, want %zu", i,
                               (unsigned long long)got, row);
        else if (memcmp((uint8_t *)res.values + i * rb, ref + row * rb,
                        rb) != 0)
            failed = coll_fail(ctx, "sparse row %zu (index %zu) differs",
                               i, row);
    }
    tacl_sparse_result_free(&res);
    COLL_CHECK(ctx, res.indices == NULL && res.nnz == 0, "not freed");
    if (c->per_node > 0)
        COLL_CHECK_OK(ctx, tacl_comm_destroy(comm));
    free(part);
    free(idx);
    free(ref);
    free(seen);
    free(vals);
    free(mine_vals);
    free(dense);
    free(mine_idx);
    return failed;
}

static void run_case(int nranks, case_t c)
{
    coll_opts_t opts = {.nranks = nranks, .deadline_s = 120, .arg = &c,
                        .init = c.per_node ? COLL_INIT_MANUAL
                                            : COLL_INIT_AUTO};

    coll_run_opts_expect_pass(&opts, body_sum);
}

/* The rank-order schemes first (rank_order_sums_of_arbitrary_floats). */
static const tacl_sparse_scheme_t schemes[] = {
    TACL_SPARSE_ZEN, TACL_SPARSE_AGSPARSE, TACL_SPARSE_PS,
    TACL_SPARSE_OMNI, TACL_SPARSE_AGPADDED, TACL_SPARSE_DENSE,
    TACL_SPARSE_SPARCML, TACL_SPARSE_AUTO,
};
#define NSCHEMES (sizeof(schemes) / sizeof(schemes[0]))

Test(sparse, every_scheme_every_rank_count, .timeout = 600)
{
    static const int ranks[] = {1, 2, 3, 4, 5, 8};

    for (size_t s = 0; s < NSCHEMES; s++)
        for (size_t n = 0; n < sizeof(ranks) / sizeof(ranks[0]); n++)
            run_case(ranks[n], (case_t){.scheme = schemes[s],
                                        .idx64 = (int)(n % 2),
                                        .row_len = 1 + n * 13,
                                        .dtype = TACL_FLOAT32,
                                        .exact = 1});
}

Test(sparse, sixteen_ranks_and_wide_rows, .timeout = 300)
{
    run_case(16, (case_t){.scheme = TACL_SPARSE_ZEN, .row_len = 4,
                          .dtype = TACL_FLOAT32, .exact = 1});
    run_case(3, (case_t){.scheme = TACL_SPARSE_ZEN, .row_len = 256,
                         .idx64 = 1, .dtype = TACL_FLOAT64, .exact = 1});
    run_case(4, (case_t){.scheme = TACL_SPARSE_AGSPARSE, .row_len = 256,
                         .dtype = TACL_FLOAT32, .exact = 1});
}

Test(sparse, rank_order_sums_of_arbitrary_floats, .timeout = 300)
{
    for (size_t s = 0; s < 5; s++)
        run_case(5, (case_t){.scheme = schemes[s], .row_len = 7,
                             .dtype = TACL_FLOAT32, .exact = 0});
}

Test(sparse, zero_rows_and_one_rank_giving_all, .timeout = 300)
{
    for (size_t s = 0; s < NSCHEMES; s++) {
        run_case(4, (case_t){.scheme = schemes[s], .row_len = 2,
                             .dtype = TACL_FLOAT32, .exact = 1,
                             .pattern = 1});
        run_case(4, (case_t){.scheme = schemes[s], .row_len = 2,
                             .dtype = TACL_FLOAT32, .exact = 1,
                             .pattern = 2});
    }
}

Test(sparse, other_dtypes, .timeout = 300)
{
    static const tacl_dtype_t dtypes[] = {TACL_FLOAT64, TACL_INT32,
                                          TACL_FLOAT16, TACL_BFLOAT16};

    for (size_t d = 0; d < 4; d++)
        for (size_t s = 0; s < NSCHEMES - 1; s += 3)
            run_case(3, (case_t){.scheme = schemes[s], .row_len = 5,
                                 .dtype = dtypes[d], .exact = 1,
                                 .idx64 = (int)d % 2});
}

Test(sparse, two_emulated_nodes, .timeout = 300)
{
    for (size_t s = 0; s < NSCHEMES; s++)
        run_case(4, (case_t){.scheme = schemes[s], .row_len = 3,
                             .dtype = TACL_FLOAT32, .exact = 1,
                             .per_node = 2});
}

/*
 * The hierarchical schemes on 2x2, 4x2 and 2x3 emulated nodes and on one
 * node: integer rows and values exact in any order equal the rank-order
 * sum bit for bit, whatever order each scheme adds in.
 */
static const tacl_sparse_scheme_t hier_schemes[] = {TACL_SPARSE_ZEN_HIER,
                                                    TACL_SPARSE_DENSE_ZEN};

Test(sparse, hierarchical_schemes_on_emulated_nodes, .timeout = 600)
{
    for (size_t s = 0; s < 2; s++) {
        tacl_sparse_scheme_t sc = hier_schemes[s];

        run_case(4, (case_t){.scheme = sc, .row_len = 1,
                             .dtype = TACL_FLOAT32, .exact = 1,
                             .per_node = 2});
        run_case(8, (case_t){.scheme = sc, .row_len = 9, .idx64 = 1,
                             .dtype = TACL_FLOAT32, .exact = 1,
                             .per_node = 2});
        run_case(4, (case_t){.scheme = sc, .row_len = 3,
                             .dtype = TACL_INT32, .pattern = 2,
                             .per_node = 2});
        run_case(6, (case_t){.scheme = sc, .row_len = 2, .idx64 = 1,
                             .dtype = TACL_INT32, .pattern = 1,
                             .per_node = 3});
        run_case(3, (case_t){.scheme = sc, .row_len = 4,
                             .dtype = TACL_FLOAT64, .exact = 1});
    }
}

/* Arbitrary floats: ZEN_HIER adds each node's rows in rank order, then
 * the nodes' sums in node order (the rails' order here), bit for bit. */
Test(sparse, zen_hier_sums_in_its_documented_order, .timeout = 300)
{
    run_case(4, (case_t){.scheme = TACL_SPARSE_ZEN_HIER, .row_len = 7,
                         .dtype = TACL_FLOAT32, .per_node = 2,
                         .node_order = 1});
    run_case(8, (case_t){.scheme = TACL_SPARSE_ZEN_HIER, .row_len = 1,
                         .idx64 = 1, .dtype = TACL_FLOAT64, .per_node = 2,
                         .node_order = 1});
}

/* Nodes of 2 and 1 ranks: both hierarchical schemes refuse, naming why,
 * and the communicator still runs flat Zen. */
static int body_uneven(coll_ctx_t *ctx)
{
    int32_t idx[1] = {ctx->rank};
    float vals[2] = {1, 2}, dense[20];
    tacl_sparse_t in = {.nrows = 10, .row_len = 2,
                        .index_type = TACL_INT32, .nnz = 1,
                        .indices = idx, .values = vals};
    tacl_comm_t comm;

    COLL_CHECK_OK(ctx, coll_join_node(ctx, "sparse-uneven", 2, &comm));
    for (size_t s = 0; s < 2; s++) {
        tacl_status_t st = tacl_sparse_allreduce(&in, TACL_FLOAT32, TACL_SUM,
                                                 dense, NULL,
                                                 hier_schemes[s], comm);
        const char *msg = tacl_comm_last_error(comm);

        COLL_CHECK(ctx, st == TACL_ERR_UNSUPPORTED, "%s: got %s",
                   tacl_sparse_scheme_name(hier_schemes[s]),
                   tacl_status_string(st));
        COLL_CHECK(ctx,
                   strstr(msg, tacl_sparse_scheme_name(hier_schemes[s])) !=
                           NULL &&
                       strstr(msg, "needs the same number of ranks on "
                                   "every node (3 ranks on 2 nodes)") != NULL,
                   "message '%s'", msg);
    }
    COLL_CHECK_OK(ctx, tacl_sparse_allreduce(&in, TACL_FLOAT32, TACL_SUM,
                                             dense, NULL, TACL_SPARSE_ZEN,
                                             comm));
    for (int r = 0; r < 3; r++)
        COLL_CHECK(ctx, dense[2 * r] == 1 && dense[2 * r + 1] == 2,
                   "row %d: %g %g", r, dense[2 * r], dense[2 * r + 1]);
    COLL_CHECK_OK(ctx, tacl_comm_destroy(comm));
    return 0;
}

/* A table of one row on 2x2 nodes: one class (one slice) is empty, so
 * one rail has nothing to run, and still every rank gets the sum. */
static int body_one_row(coll_ctx_t *ctx)
{
    int64_t idx[1] = {0};
    int32_t vals[1] = {ctx->rank + 1}, dense[1] = {-1};
    tacl_sparse_t in = {.nrows = 1, .row_len = 1,
                        .index_type = TACL_INT64, .nnz = ctx->rank != 2,
                        .indices = idx, .values = vals};
    tacl_sparse_result_t res;
    tacl_comm_t comm;

    COLL_CHECK_OK(ctx, coll_join_node(ctx, "sparse-one-row", 2, &comm));
    for (size_t s = 0; s < 2; s++) {
        COLL_CHECK_OK(ctx, tacl_sparse_allreduce(&in, TACL_INT32, TACL_SUM,
                                                 dense, &res,
                                                 hier_schemes[s], comm));
        COLL_CHECK(ctx, dense[0] == 1 + 2 + 4 && res.nnz == 1 &&
                            ((int64_t *)res.indices)[0] == 0 &&
                            ((int32_t *)res.values)[0] == 7,
                   "%s: dense %d, %zu rows",
                   tacl_sparse_scheme_name(hier_schemes[s]), dense[0],
                   res.nnz);
        tacl_sparse_result_free(&res);
    }
    COLL_CHECK_OK(ctx, tacl_comm_destroy(comm));
    return 0;
}

Test(sparse, hierarchical_schemes_on_a_one_row_table, .timeout = 120)
{
    coll_opts_t opts = {.nranks = 4, .deadline_s = 60,
                        .init = COLL_INIT_MANUAL};

    coll_run_opts_expect_pass(&opts, body_one_row);
}

Test(sparse, hierarchical_schemes_refuse_uneven_nodes, .timeout = 120)
{
    coll_opts_t opts = {.nranks = 3, .deadline_s = 60,
                        .init = COLL_INIT_MANUAL};

    coll_run_opts_expect_pass(&opts, body_uneven);
}

/* ---- Bad input: an error naming it, on every rank alike. ---- */

/* st is want, and the communicator's last error says words. */
static int expect_named(coll_ctx_t *ctx, tacl_status_t st, tacl_status_t want,
                        const char *words)
{
    const char *msg = tacl_comm_last_error(ctx->comm);

    COLL_CHECK(ctx, st == want, "got %s for '%s'", tacl_status_string(st),
               words);
    COLL_CHECK(ctx, strstr(msg, words) != NULL, "message '%s' lacks '%s'",
               msg, words);
    return 0;
}

static int expect_error(coll_ctx_t *ctx, const tacl_sparse_t *in,
                        tacl_dtype_t dtype, tacl_op_t op, void *dense,
                        tacl_sparse_scheme_t scheme, tacl_status_t want,
                        const char *words)
{
    return expect_named(ctx,
                        tacl_sparse_allreduce(in, dtype, op, dense, NULL,
                                              scheme, ctx->comm),
                        want, words);
}

static int body_errors(coll_ctx_t *ctx)
{
    int32_t idx[3] = {4, 9, 4};
    float vals[6] = {0}, dense[20];
    tacl_sparse_t in = {.nrows = 10, .row_len = 2,
                        .index_type = TACL_INT32, .nnz = 3,
                        .indices = idx, .values = vals};

    if (expect_error(ctx, &in, TACL_FLOAT32, TACL_SUM, dense,
                     TACL_SPARSE_ZEN, TACL_ERR_INVALID_ARG,
                     "index 4 appears twice"))
        return 1;
    idx[2] = 10;
    if (expect_error(ctx, &in, TACL_FLOAT32, TACL_SUM, dense,
                     TACL_SPARSE_ZEN, TACL_ERR_INVALID_ARG,
                     "index 10 at position 2 is outside"))
        return 1;
    idx[2] = -1;
    if (expect_error(ctx, &in, TACL_FLOAT32, TACL_SUM, dense,
                     TACL_SPARSE_AGSPARSE, TACL_ERR_INVALID_ARG,
                     "index -1 at position 2"))
        return 1;
    idx[2] = 0;
    in.values = NULL;
    if (expect_error(ctx, &in, TACL_FLOAT32, TACL_SUM, dense,
                     TACL_SPARSE_ZEN, TACL_ERR_INVALID_ARG,
                     "NULL values pointer"))
        return 1;
    in.values = vals;
    in.index_type = TACL_FLOAT32;
    if (expect_error(ctx, &in, TACL_FLOAT32, TACL_SUM, dense,
                     TACL_SPARSE_ZEN, TACL_ERR_INVALID_ARG,
                     "index type float32 is not taken"))
        return 1;
    in.index_type = TACL_INT32;
    if (expect_error(ctx, &in, TACL_FLOAT32, TACL_MAX, dense,
                     TACL_SPARSE_ZEN, TACL_ERR_UNSUPPORTED, "only sum"))
        return 1;
    if (expect_error(ctx, &in, TACL_FLOAT32, TACL_SUM, NULL,
                     TACL_SPARSE_ZEN, TACL_ERR_INVALID_ARG,
                     "neither a dense nor a sparse output"))
        return 1;
    if (expect_error(ctx, &in, TACL_FLOAT32, TACL_SUM, dense,
                     (tacl_sparse_scheme_t)99, TACL_ERR_INVALID_ARG,
                     "invalid scheme 99"))
        return 1;
    /* The communicator still works after every refusal. */
    in.nnz = 2;
    COLL_CHECK_OK(ctx, tacl_sparse_allreduce(&in, TACL_FLOAT32, TACL_SUM,
                                             dense, NULL, TACL_SPARSE_ZEN,
                                             ctx->comm));
    return 0;
}

Test(sparse, bad_input_is_named)
{
    coll_run_expect_pass(2, body_errors, NULL, NULL);
}

/* ---- tacl_sparse_estimate: AUTO's pick as the call makes it. ---- */

static int estimate_error(coll_ctx_t *ctx, size_t nnz, size_t u,
                          tacl_dtype_t index_type,
                          tacl_sparse_scheme_t scheme,
                          tacl_sparse_estimate_t *est, tacl_status_t want,
                          const char *words)
{
    return expect_named(ctx,
                        tacl_sparse_estimate(ctx->comm, nnz, NROWS, 4,
                                             TACL_FLOAT32, index_type, u,
                                             scheme, est),
                        want, words);
}

/* Rows of 4 float32 with int32 indices for the AUTO cases below. */
typedef struct {
    float *vals, *dense;
    int32_t *idx;
} auto_bufs_t;

static int auto_bufs_alloc(auto_bufs_t *b)
{
    b->vals = calloc((size_t)NROWS * 4, sizeof(float));
    b->dense = calloc((size_t)NROWS * 4, sizeof(float));
    b->idx = calloc(NROWS, sizeof(int32_t));
    return b->vals != NULL && b->dense != NULL && b->idx != NULL;
}

static void auto_bufs_free(auto_bufs_t *b)
{
    free(b->vals);
    free(b->dense);
    free(b->idx);
}

/*
 * Estimate AUTO for nnz rows a rank, run it on b's first nnz indices and
 * check that the call ran the scheme the estimate named.
 */
static int auto_runs_its_estimate(coll_ctx_t *ctx, tacl_comm_t comm,
                                  auto_bufs_t *b, size_t nnz,
                                  tacl_sparse_estimate_t *est)
{
    tacl_sparse_t in = {.nrows = NROWS,
                        .row_len = 4,
                        .index_type = TACL_INT32,
                        .nnz = nnz,
                        .indices = b->idx,
                        .values = b->vals};

    COLL_CHECK_OK(ctx, tacl_sparse_estimate(comm, nnz, NROWS, 4,
                                            TACL_FLOAT32, TACL_INT32, 0,
                                            TACL_SPARSE_AUTO, est));
    COLL_CHECK_OK(ctx, tacl_sparse_allreduce(&in, TACL_FLOAT32, TACL_SUM,
                                             b->dense, NULL,
                                             TACL_SPARSE_AUTO, comm));
    COLL_CHECK(ctx, tacl_sparse_last_scheme(comm) == est->scheme,
               "%zu rows a rank: estimated %s, ran %s", nnz,
               tacl_sparse_scheme_name(est->scheme),
               tacl_sparse_scheme_name(tacl_sparse_last_scheme(comm)));
    return 0;
}

/*
 * On 4 ranks, rows of 4 float32 with int32 indices in a table of NROWS:
 * 5, 2000 and 4000 rows per rank are where AUTO's byte rule picks
 * AGSPARSE, ZEN and DENSE (the union at its largest: 20 rows, then the
 * whole table); the estimate names the scheme the real call then runs.
 */
static int body_estimate(coll_ctx_t *ctx)
{
    static const struct {
        size_t nnz;
        tacl_sparse_scheme_t want;
    } cells[] = {{5, TACL_SPARSE_AGSPARSE},
                 {2000, TACL_SPARSE_ZEN},
                 {4000, TACL_SPARSE_DENSE}};
    auto_bufs_t b;
    tacl_sparse_estimate_t est;
    tacl_sim_info_t info;

    COLL_CHECK(ctx, auto_bufs_alloc(&b), "out of memory");
    for (size_t c = 0; c < sizeof(cells) / sizeof(cells[0]); c++) {
        for (size_t i = 0; i < cells[c].nnz; i++)
            b.idx[i] = (int32_t)(((size_t)ctx->rank * cells[c].nnz + i) %
                                 NROWS);
        if (auto_runs_its_estimate(ctx, ctx->comm, &b, cells[c].nnz, &est))
            return 1;
        COLL_CHECK(ctx, est.scheme == cells[c].want,
                   "%zu rows a rank: AUTO picked %s, want %s", cells[c].nnz,
                   tacl_sparse_scheme_name(est.scheme),
                   tacl_sparse_scheme_name(cells[c].want));
        COLL_CHECK(ctx, est.seconds > 0, "%zu rows: %g s", cells[c].nnz,
                   est.seconds);
    }
    /* DENSE is one all-reduce of the table, priced as tacl_comm_estimate
     * prices it; Zen's phases cost more than nothing. */
    COLL_CHECK_OK(ctx, tacl_sparse_estimate(ctx->comm, 100, NROWS, 4,
                                            TACL_FLOAT32, TACL_INT32, 0,
                                            TACL_SPARSE_DENSE, &est));
    COLL_CHECK_OK(ctx, tacl_comm_estimate(ctx->comm, TACL_COLL_ALLREDUCE,
                                          (size_t)NROWS * 4, TACL_FLOAT32,
                                          TACL_SUM, 0, &info));
    COLL_CHECK(ctx,
               est.scheme == TACL_SPARSE_DENSE && est.seconds == info.seconds,
               "dense: %s in %g s, the all-reduce %g s",
               tacl_sparse_scheme_name(est.scheme), est.seconds,
               info.seconds);
    COLL_CHECK_OK(ctx, tacl_sparse_estimate(ctx->comm, 100, NROWS, 4,
                                            TACL_FLOAT32, TACL_INT64, 150,
                                            TACL_SPARSE_ZEN, &est));
    COLL_CHECK(ctx, est.scheme == TACL_SPARSE_ZEN && est.seconds > 0,
               "zen: %s in %g s", tacl_sparse_scheme_name(est.scheme),
               est.seconds);
    /* No rows anywhere: a tie at no bytes, which the call breaks too;
     * only the exchanges of counts cost anything. */
    if (auto_runs_its_estimate(ctx, ctx->comm, &b, 0, &est))
        return 1;
    COLL_CHECK(ctx, est.seconds > 0, "no rows: %s in %g s",
               tacl_sparse_scheme_name(est.scheme), est.seconds);
    if (estimate_error(ctx, 100, 0, TACL_INT32, TACL_SPARSE_AUTO, NULL,
                       TACL_ERR_INVALID_ARG, "est_p is NULL") ||
        estimate_error(ctx, 100, 0, TACL_FLOAT32, TACL_SPARSE_AUTO, &est,
                       TACL_ERR_INVALID_ARG, "index_type float32") ||
        estimate_error(ctx, NROWS + 1, 0, TACL_INT32, TACL_SPARSE_AUTO, &est,
                       TACL_ERR_INVALID_ARG, "nnz 5001") ||
        estimate_error(ctx, 100, 401, TACL_INT32, TACL_SPARSE_AUTO, &est,
                       TACL_ERR_INVALID_ARG, "expected_union 401") ||
        estimate_error(ctx, 100, 0, TACL_INT32, (tacl_sparse_scheme_t)99,
                       &est, TACL_ERR_INVALID_ARG, "invalid scheme 99"))
        return 1;
    /* Every scheme is priced, the hierarchical ones on one node too. */
    for (int sc = 1; sc < TACL_NUM_SPARSE_SCHEMES; sc++) {
        COLL_CHECK_OK(ctx, tacl_sparse_estimate(ctx->comm, 100, NROWS, 4,
                                                TACL_FLOAT32, TACL_INT32, 0,
                                                (tacl_sparse_scheme_t)sc,
                                                &est));
        COLL_CHECK(ctx, est.scheme == (tacl_sparse_scheme_t)sc &&
                            est.seconds > 0,
                   "%s: %s in %g s",
                   tacl_sparse_scheme_name((tacl_sparse_scheme_t)sc),
                   tacl_sparse_scheme_name(est.scheme), est.seconds);
    }
    auto_bufs_free(&b);
    return 0;
}

Test(sparse, estimate_names_autos_pick, .timeout = 300)
{
    coll_run_expect_pass(4, body_estimate, NULL, NULL);
}

/*
 * On 2x2 emulated nodes, where ZEN_HIER's bytes are fewer, AUTO keeps to
 * flat Zen (measured ahead; algorithms/sparse.c) and the estimate names
 * what the real call runs; the hierarchical schemes are priced when
 * asked for.  On nodes of 2 and 1 ranks the estimate refuses them.
 */
static int body_auto_nodes(coll_ctx_t *ctx)
{
    int even = ctx->nranks == 4;
    auto_bufs_t b;
    tacl_sparse_estimate_t est;
    tacl_comm_t comm;

    COLL_CHECK(ctx, auto_bufs_alloc(&b), "out of memory");
    COLL_CHECK_OK(ctx, coll_join_node(ctx, "sparse-auto", 2, &comm));
    for (size_t i = 0; i < 2500; i++)
        b.idx[i] = (int32_t)(((size_t)ctx->rank * 2500 + i) % NROWS);
    if (auto_runs_its_estimate(ctx, comm, &b, 2500, &est))
        return 1;
    COLL_CHECK(ctx, est.scheme == TACL_SPARSE_ZEN, "AUTO picked %s",
               tacl_sparse_scheme_name(est.scheme));
    for (int h = 0; h < 2 && even; h++) {
        COLL_CHECK_OK(ctx, tacl_sparse_estimate(comm, 2500, NROWS, 4,
                                                TACL_FLOAT32, TACL_INT32, 0,
                                                hier_schemes[h], &est));
        COLL_CHECK(ctx, est.scheme == hier_schemes[h] && est.seconds > 0,
                   "%s: %s in %g s", tacl_sparse_scheme_name(hier_schemes[h]),
                   tacl_sparse_scheme_name(est.scheme), est.seconds);
    }
    if (!even) {
        tacl_status_t st = tacl_sparse_estimate(comm, 2500, NROWS, 4,
                                                TACL_FLOAT32, TACL_INT32, 0,
                                                TACL_SPARSE_DENSE_ZEN, &est);

        COLL_CHECK(ctx, st == TACL_ERR_UNSUPPORTED &&
                            strstr(tacl_comm_last_error(comm),
                                   "needs the same number of ranks") != NULL,
                   "uneven estimate: %s, '%s'", tacl_status_string(st),
                   tacl_comm_last_error(comm));
    }
    COLL_CHECK_OK(ctx, tacl_comm_destroy(comm));
    auto_bufs_free(&b);
    return 0;
}

Test(sparse, auto_keeps_to_flat_zen_on_nodes, .timeout = 300)
{
    for (int n = 4; n >= 3; n--) {
        coll_opts_t opts = {.nranks = n, .deadline_s = 120,
                            .init = COLL_INIT_MANUAL};

        coll_run_opts_expect_pass(&opts, body_auto_nodes);
    }
}

/*
 * tacl_zipf_*: tokens of the sparse traces' law, repeats kept.  Token
 * i's share of many draws is Zipf's 1 / ((i + 1) H) (H the vocabulary's
 * harmonic number), a stream is the same on a second draw and another
 * stream differs, and bad arguments are named.
 */
Test(sparse, zipf_tokens_follow_the_law)
{
    enum { V = 1000, DRAWS = 200000 };
    int64_t *tok = malloc(DRAWS * sizeof(*tok));
    int64_t *again = malloc(DRAWS * sizeof(*again));
    size_t count[3] = {0, 0, 0};
    double h = 0;
    tacl_zipf_t z, bad;

    cr_assert(tok && again);
    cr_assert_eq(tacl_zipf_create(V, 1.0, 7, &z), TACL_OK);
    cr_assert_eq(tacl_zipf_draw(z, 5, DRAWS, tok), TACL_OK);
    for (int i = 0; i < V; i++)
        h += 1.0 / (i + 1);
    for (size_t i = 0; i < DRAWS; i++) {
        cr_assert(tok[i] >= 0 && tok[i] < V, "token %lld",
                  (long long)tok[i]);
        if (tok[i] < 3)
            count[tok[i]]++;
    }
    for (int i = 0; i < 3; i++)
        cr_assert_float_eq((double)count[i] / DRAWS, 1.0 / ((i + 1) * h),
                           0.005, "token %d: %zu of %d draws", i, count[i],
                           DRAWS);
    cr_assert_eq(tacl_zipf_draw(z, 5, DRAWS, again), TACL_OK);
    cr_assert_eq(memcmp(tok, again, DRAWS * sizeof(*tok)), 0);
    cr_assert_eq(tacl_zipf_draw(z, 6, DRAWS, again), TACL_OK);
    cr_assert_neq(memcmp(tok, again, DRAWS * sizeof(*tok)), 0);
    cr_assert_eq(tacl_zipf_create(0, 1.0, 7, &bad), TACL_ERR_INVALID_ARG);
    cr_assert(strstr(tacl_last_error(), "0 tokens"), "%s",
              tacl_last_error());
    cr_assert_eq(tacl_zipf_create(V, -1.0, 7, &bad), TACL_ERR_INVALID_ARG);
    cr_assert(strstr(tacl_last_error(), "exponent"), "%s",
              tacl_last_error());
    cr_assert_eq(tacl_zipf_draw(NULL, 5, 1, tok), TACL_ERR_INVALID_ARG);
    cr_assert(strstr(tacl_last_error(), "NULL law"), "%s",
              tacl_last_error());
    tacl_zipf_destroy(z);
    tacl_zipf_destroy(NULL);
    free(tok);
    free(again);
}
