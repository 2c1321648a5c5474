/*
 * The non-blocking host-composed operations (tacl_sparse_allreduce_nb,
 * tacl_comp_*_nb): results bit for bit those of the blocking forms, and
 * the compressed calls' traffic counted on the communicator alike;
 * several issued back to back, between ordinary _nb collectives on the
 * same communicator, each right (the worker runs on its own communicator
 * in issue order); a callback once; an abort from another thread and a
 * destroy fail pending requests, promptly; bad input fails at issue.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "harness.h"

#define NROWS 1000
#define ROW_LEN 4
#define COUNT 1000

/* Rank r's rows, as gradients of one embedding table: distinct indices
 * (i * 7 + r mod NROWS, i < nnz < 143) and values no two ranks share. */
static void rows_of(int r, int salt, tacl_sparse_t *in, int32_t *idx,
                    float *val)
{
    size_t nnz = 40 + (size_t)(r * 13 + salt * 5) % 90;

    for (size_t i = 0; i < nnz; i++) {
        idx[i] = (int32_t)((i * 7 + (size_t)r) % NROWS);
        for (int k = 0; k < ROW_LEN; k++)
            val[i * ROW_LEN + k] =
                (float)sin(0.37 * (double)(i + 1) * (r + 2) + k + salt);
    }
    *in = (tacl_sparse_t){.nrows = NROWS, .row_len = ROW_LEN,
                          .index_type = TACL_INT32, .nnz = nnz,
                          .indices = idx, .values = val};
}

static void values_of(int r, int salt, float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float)cos(0.011 * (double)i * (r + 1) + salt);
}

static int same_result(const tacl_sparse_result_t *a,
                       const tacl_sparse_result_t *b)
{
    return a->nnz == b->nnz &&
           memcmp(a->indices, b->indices, a->nnz * sizeof(int32_t)) == 0 &&
           memcmp(a->values, b->values,
                  a->nnz * ROW_LEN * sizeof(float)) == 0;
}

/* Wait for req, free it, and fail the body on an error. */
#define WAIT_FREE(ctx, req)                                                  \
    do {                                                                     \
        COLL_CHECK_OK(ctx, tacl_request_wait(req));                          \
        COLL_CHECK_OK(ctx, tacl_request_free(req));                          \
    } while (0)

static int sparse_same(coll_ctx_t *ctx, tacl_sparse_scheme_t scheme)
{
    static int32_t idx[NROWS];
    static float val[NROWS * ROW_LEN], d1[NROWS * ROW_LEN],
        d2[NROWS * ROW_LEN];
    tacl_sparse_result_t s1, s2;
    tacl_sparse_t in;
    tacl_request_t req;

    rows_of(ctx->rank, (int)scheme, &in, idx, val);
    COLL_CHECK_OK(ctx, tacl_sparse_allreduce(&in, TACL_FLOAT32, TACL_SUM, d1,
                                             &s1, scheme, ctx->comm));
    memset(d2, 0xff, sizeof(d2));
    COLL_CHECK_OK(ctx, tacl_sparse_allreduce_nb(&in, TACL_FLOAT32, TACL_SUM,
                                                d2, &s2, scheme, ctx->comm,
                                                &req));
    WAIT_FREE(ctx, req);
    COLL_CHECK(ctx, memcmp(d1, d2, sizeof(d1)) == 0 && same_result(&s1, &s2),
               "sparse scheme %s: _nb differs from the blocking result",
               tacl_sparse_scheme_name(scheme));
    tacl_sparse_result_free(&s1);
    tacl_sparse_result_free(&s2);
    return 0;
}

/* One compressed call, blocking then _nb, from equal error buffers. */
static int comp_same(coll_ctx_t *ctx, tacl_coll_t coll, const char *name,
                     tacl_comp_scheme_t scheme, tacl_comp_hops_t hops)
{
    static float x[COUNT * 4], y1[COUNT * 4], y2[COUNT * 4];
    static float e1[COUNT * 4], e2[COUNT * 4];
    tacl_codec_params_t p = {.density = 0.1};
    const tacl_codec_t *codec;
    size_t n = coll == TACL_COLL_ALLREDUCE ? COUNT : COUNT / 4;
    tacl_request_t req;
    tacl_comm_t comm = ctx->comm;
    tacl_counters_t c1, c2;

    COLL_CHECK_OK(ctx, tacl_codec_find(name, &codec));
    values_of(ctx->rank, (int)coll, x, COUNT * 4);
    memset(e1, 0, sizeof(e1));
    memset(e2, 0, sizeof(e2));
    memset(y1, 0xff, sizeof(y1));
    memset(y2, 0xff, sizeof(y2));
    /* Each call's traffic counted on comm alone: the _nb call's runs on
     * the worker's communicator, and is still comm's. */
    COLL_CHECK_OK(ctx, tacl_comm_reset_counters(comm));
    if (coll == TACL_COLL_ALLREDUCE) {
        COLL_CHECK_OK(ctx, tacl_comp_allreduce_hops(x, y1, n, codec, &p, e1,
                                                    scheme, hops, comm));
        COLL_CHECK_OK(ctx, tacl_comm_get_counters(comm, &c1));
        COLL_CHECK_OK(ctx, tacl_comm_reset_counters(comm));
        COLL_CHECK_OK(ctx, tacl_comp_allreduce_hops_nb(
                               x, y2, n, codec, &p, e2, scheme, hops, comm,
                               &req));
    } else if (coll == TACL_COLL_REDUCE_SCATTER) {
        COLL_CHECK_OK(ctx, tacl_comp_reduce_scatter_hops(
                               x, y1, n, codec, &p, e1, scheme, hops, comm));
        COLL_CHECK_OK(ctx, tacl_comm_get_counters(comm, &c1));
        COLL_CHECK_OK(ctx, tacl_comm_reset_counters(comm));
        COLL_CHECK_OK(ctx, tacl_comp_reduce_scatter_hops_nb(
                               x, y2, n, codec, &p, e2, scheme, hops, comm,
                               &req));
    } else {
        COLL_CHECK_OK(ctx, tacl_comp_allgather_hops(x, y1, n, codec, &p, e1,
                                                    hops, comm));
        COLL_CHECK_OK(ctx, tacl_comm_get_counters(comm, &c1));
        COLL_CHECK_OK(ctx, tacl_comm_reset_counters(comm));
        COLL_CHECK_OK(ctx, tacl_comp_allgather_hops_nb(
                               x, y2, n, codec, &p, e2, hops, comm, &req));
    }
    WAIT_FREE(ctx, req);
    COLL_CHECK_OK(ctx, tacl_comm_get_counters(comm, &c2));
    COLL_CHECK(ctx,
               memcmp(y1, y2, sizeof(y1)) == 0 &&
                   memcmp(e1, e2, sizeof(e1)) == 0,
               "%s %s: _nb differs from the blocking result",
               tacl_coll_name(coll), name);
    for (int k = 0; k < TACL_NUM_LINK_CLASSES; k++)
        COLL_CHECK(ctx,
                   c1.links[k].bytes == c2.links[k].bytes &&
                       c1.links[k].messages == c2.links[k].messages,
                   "%s %s: comm counted %llu bytes in %llu messages on "
                   "link %s for the blocking call, %llu in %llu for _nb",
                   tacl_coll_name(coll), name,
                   (unsigned long long)c1.links[k].bytes,
                   (unsigned long long)c1.links[k].messages,
                   c1.links[k].name, (unsigned long long)c2.links[k].bytes,
                   (unsigned long long)c2.links[k].messages);
    return 0;
}

static int body_same(coll_ctx_t *ctx)
{
    static const tacl_sparse_scheme_t schemes[] = {
        TACL_SPARSE_ZEN, TACL_SPARSE_AGSPARSE, TACL_SPARSE_DENSE};
    const tacl_coll_t colls[] = {TACL_COLL_ALLREDUCE,
                                 TACL_COLL_REDUCE_SCATTER,
                                 TACL_COLL_ALLGATHER};

    for (size_t i = 0; i < sizeof(schemes) / sizeof(schemes[0]); i++)
        if (sparse_same(ctx, schemes[i]))
            return 1;
    for (int i = 0; i < 3; i++)
        if (comp_same(ctx, colls[i], "fp16", TACL_COMP_GATHER,
                      TACL_COMP_HOPS_ALL) ||
            comp_same(ctx, colls[i], "topk", TACL_COMP_SHUFFLE,
                      TACL_COMP_HOPS_ALL))
            return 1;
    for (int i = 0; i < 3; i++)
        if (comp_same(ctx, colls[i], "fp16", TACL_COMP_SUM,
                      TACL_COMP_HOPS_INTER))
            return 1;
    return 0;
}

Test(hostnb, same_bits_as_blocking, .timeout = 300)
{
    coll_run_expect_pass(3, body_same, NULL, NULL);
}

#define ROUNDS 6

/*
 * ROUNDS of (sparse _nb, dense allreduce _nb, compressed _nb) issued with
 * no wait between them; rank 0 dawdles between issues, so its worker
 * and its own calls take turns differently from the other ranks'.
 */
static int body_order(coll_ctx_t *ctx)
{
    static int32_t idx[ROUNDS][NROWS];
    static float val[ROUNDS][NROWS * ROW_LEN];
    static float want_s[ROUNDS][NROWS * ROW_LEN];
    static float got_s[ROUNDS][NROWS * ROW_LEN];
    static float x[ROUNDS][COUNT], want_c[ROUNDS][COUNT], got_c[ROUNDS][COUNT];
    static float want_d[ROUNDS][COUNT], got_d[ROUNDS][COUNT];
    tacl_codec_params_t p = {.bits = 0};
    const tacl_codec_t *fp16;
    tacl_sparse_t in[ROUNDS];
    tacl_request_t req[ROUNDS * 3];
    tacl_comm_t comm = ctx->comm;

    COLL_CHECK_OK(ctx, tacl_codec_find("fp16", &fp16));
    for (int k = 0; k < ROUNDS; k++) {
        rows_of(ctx->rank, k, &in[k], idx[k], val[k]);
        values_of(ctx->rank, k, x[k], COUNT);
        COLL_CHECK_OK(ctx, tacl_sparse_allreduce(&in[k], TACL_FLOAT32,
                                                 TACL_SUM, want_s[k], NULL,
                                                 TACL_SPARSE_ZEN, comm));
        COLL_CHECK_OK(ctx, tacl_allreduce(x[k], want_d[k], COUNT,
                                          TACL_FLOAT32, TACL_SUM, comm, NULL));
        COLL_CHECK_OK(ctx, tacl_comp_allreduce(x[k], want_c[k], COUNT, fp16,
                                               &p, NULL, TACL_COMP_GATHER,
                                               comm));
    }
    for (int k = 0; k < ROUNDS; k++) {
        COLL_CHECK_OK(ctx, tacl_sparse_allreduce_nb(
                               &in[k], TACL_FLOAT32, TACL_SUM, got_s[k],
                               NULL, TACL_SPARSE_ZEN, comm, &req[3 * k]));
        if (ctx->rank == 0)
            coll_sleep_ms(5);
        COLL_CHECK_OK(ctx, tacl_allreduce_nb(x[k], got_d[k], COUNT,
                                             TACL_FLOAT32, TACL_SUM, comm, NULL,
                                             &req[3 * k + 1]));
        COLL_CHECK_OK(ctx, tacl_comp_allreduce_nb(
                               x[k], got_c[k], COUNT, fp16, &p, NULL,
                               TACL_COMP_GATHER, comm, &req[3 * k + 2]));
    }
    for (int i = 0; i < ROUNDS * 3; i++)
        WAIT_FREE(ctx, req[i]);
    for (int k = 0; k < ROUNDS; k++)
        COLL_CHECK(ctx,
                   memcmp(want_s[k], got_s[k], sizeof(want_s[k])) == 0 &&
                       memcmp(want_d[k], got_d[k], sizeof(want_d[k])) == 0 &&
                       memcmp(want_c[k], got_c[k], sizeof(want_c[k])) == 0,
                   "round %d: a result differs from the blocking one", k);
    return 0;
}

Test(hostnb, issue_order_between_ordinary_calls, .timeout = 300)
{
    static const char *const env[] = {"TACL_TIMEOUT=20", NULL};

    coll_run_expect_pass(3, body_order, NULL, env);
}

static void count_call(tacl_request_t req, tacl_status_t status, void *arg)
{
    (void)req;
    (void)status;
    __atomic_add_fetch((int *)arg, 1, __ATOMIC_SEQ_CST);
}

static int body_callback(coll_ctx_t *ctx)
{
    static int32_t idx[NROWS];
    static float val[NROWS * ROW_LEN], d[NROWS * ROW_LEN];
    tacl_sparse_t in;
    tacl_request_t req;
    int calls = 0, done = 0;

    rows_of(ctx->rank, 0, &in, idx, val);
    COLL_CHECK_OK(ctx, tacl_sparse_allreduce_nb(&in, TACL_FLOAT32, TACL_SUM,
                                                d, NULL, TACL_SPARSE_ZEN,
                                                ctx->comm, &req));
    COLL_CHECK_OK(ctx, tacl_request_set_callback(req, count_call, &calls));
    COLL_CHECK_OK(ctx, tacl_request_wait(req));
    COLL_CHECK_OK(ctx, tacl_request_test(req, &done));
    COLL_CHECK(ctx, done && __atomic_load_n(&calls, __ATOMIC_SEQ_CST) == 1,
               "callback ran %d times (done %d)", calls, done);
    COLL_CHECK(ctx, tacl_request_set_callback(req, count_call, &calls) ==
                        TACL_ERR_INVALID_USAGE,
               "a second callback was taken");
    COLL_CHECK_OK(ctx, tacl_request_free(req));
    /* Set after completion: it runs at once, in this thread. */
    COLL_CHECK_OK(ctx, tacl_sparse_allreduce_nb(&in, TACL_FLOAT32, TACL_SUM,
                                                d, NULL, TACL_SPARSE_ZEN,
                                                ctx->comm, &req));
    COLL_CHECK_OK(ctx, tacl_request_wait(req));
    calls = 0;
    COLL_CHECK_OK(ctx, tacl_request_set_callback(req, count_call, &calls));
    COLL_CHECK(ctx, calls == 1, "late callback ran %d times", calls);
    COLL_CHECK_OK(ctx, tacl_request_free(req));
    return 0;
}

Test(hostnb, callback_once, .timeout = 120)
{
    coll_run_expect_pass(2, body_callback, NULL, NULL);
}

/* Start (on every rank) the worker with one call, so that rank 0's next
 * call runs alone and waits for a peer that never joins it. */
static int warm_up(coll_ctx_t *ctx, float *x, float *y)
{
    tacl_codec_params_t p = {.bits = 0};
    const tacl_codec_t *fp16;
    tacl_request_t req;

    COLL_CHECK_OK(ctx, tacl_codec_find("fp16", &fp16));
    COLL_CHECK_OK(ctx, tacl_comp_allreduce_nb(x, y, COUNT, fp16, &p, NULL,
                                              TACL_COMP_GATHER, ctx->comm,
                                              &req));
    WAIT_FREE(ctx, req);
    return 0;
}

static int issue_alone(coll_ctx_t *ctx, float *x, float *y,
                       tacl_request_t *req_p)
{
    tacl_codec_params_t p = {.bits = 0};
    const tacl_codec_t *fp16;

    COLL_CHECK_OK(ctx, tacl_codec_find("fp16", &fp16));
    COLL_CHECK_OK(ctx, tacl_comp_allreduce_nb(x, y, COUNT, fp16, &p, NULL,
                                              TACL_COMP_GATHER, ctx->comm,
                                              req_p));
    return 0;
}

static void *abort_later(void *arg)
{
    coll_sleep_ms(300);
    tacl_comm_abort(arg);
    return NULL;
}

static int body_abort(coll_ctx_t *ctx)
{
    static float x[COUNT], y[COUNT];
    tacl_request_t req;
    pthread_t t;
    tacl_status_t st;
    double t0;

    if (warm_up(ctx, x, y))
        return 1;
    if (ctx->rank != 0) {
        coll_sleep_ms(2000);
        return 0;
    }
    if (issue_alone(ctx, x, y, &req))
        return 1;
    t0 = coll_now();
    pthread_create(&t, NULL, abort_later, ctx->comm);
    st = tacl_request_wait(req);
    pthread_join(t, NULL);
    ctx->comm = NULL;
    COLL_CHECK(ctx, st < 0 && coll_now() - t0 < 10,
               "wait after an abort: %s after %.1f s",
               tacl_status_string(st), coll_now() - t0);
    COLL_CHECK(ctx, tacl_request_free(req) == TACL_OK, "free failed");
    return 0;
}

Test(hostnb, abort_fails_a_pending_wait, .timeout = 120)
{
    static const char *const env[] = {"TACL_TIMEOUT=60", NULL};
    coll_opts_t opts = {.nranks = 2, .deadline_s = 100, .env = env,
                        .destroy_may_fail = 1};

    coll_run_opts_expect_pass(&opts, body_abort);
}

static int body_destroy(coll_ctx_t *ctx)
{
    static float x[COUNT], y[COUNT];
    tacl_request_t req[2];
    tacl_status_t st[2];
    double t0;

    if (warm_up(ctx, x, y))
        return 1;
    if (ctx->rank != 0) {
        coll_sleep_ms(5000);
        return 0;
    }
    if (issue_alone(ctx, x, y, &req[0]) || issue_alone(ctx, x, y, &req[1]))
        return 1;
    t0 = coll_now();
    COLL_CHECK_OK(ctx, tacl_comm_destroy(ctx->comm));
    ctx->comm = NULL;
    for (int i = 0; i < 2; i++) {
        int done = 0;

        COLL_CHECK(ctx, tacl_request_test(req[i], &done) < 0 && done,
                   "request %d did not fail with the destroy", i);
        st[i] = tacl_request_wait(req[i]);
        COLL_CHECK(ctx, tacl_request_free(req[i]) == TACL_OK, "free");
        COLL_CHECK(ctx,
                   i == 0 || strstr(tacl_last_error(), "destroyed or aborted"),
                   "the queued request's message: '%s'", tacl_last_error());
    }
    COLL_CHECK(ctx, st[0] < 0 && st[1] == TACL_ERR_INVALID_USAGE &&
                        coll_now() - t0 < 10,
               "destroy: %s and %s after %.1f s", tacl_status_string(st[0]),
               tacl_status_string(st[1]), coll_now() - t0);
    return 0;
}

Test(hostnb, destroy_fails_pending_requests, .timeout = 120)
{
    static const char *const env[] = {"TACL_TIMEOUT=2", NULL};
    coll_opts_t opts = {.nranks = 2, .deadline_s = 100, .env = env,
                        .destroy_may_fail = 1};

    coll_run_opts_expect_pass(&opts, body_destroy);
}

/* The call fails with INVALID_ARG, a message holding word, no request. */
#define EXPECT_BAD(ctx, call, word)                                          \
    do {                                                                     \
        req = NULL;                                                          \
        COLL_CHECK_FAILS(ctx, call, TACL_ERR_INVALID_ARG, word);             \
        COLL_CHECK(ctx, req == NULL, "%s left a request", #call);            \
    } while (0)

static int body_bad(coll_ctx_t *ctx)
{
    static int32_t idx[NROWS];
    static float val[NROWS * ROW_LEN], d[NROWS * ROW_LEN];
    tacl_codec_params_t p = {.bits = 0};
    const tacl_codec_t *fp16, *topk;
    float x[64] = {0}, y[64 * 4];
    tacl_sparse_t in;
    tacl_request_t req;
    tacl_comm_t comm = ctx->comm;

    COLL_CHECK_OK(ctx, tacl_codec_find("fp16", &fp16));
    COLL_CHECK_OK(ctx, tacl_codec_find("topk", &topk));
    rows_of(ctx->rank, 0, &in, idx, val);
    EXPECT_BAD(ctx, tacl_sparse_allreduce_nb(NULL, TACL_FLOAT32, TACL_SUM, d,
                                             NULL, TACL_SPARSE_ZEN, comm,
                                             &req),
               "input is NULL");
    idx[1] = idx[0];
    EXPECT_BAD(ctx, tacl_sparse_allreduce_nb(&in, TACL_FLOAT32, TACL_SUM, d,
                                             NULL, TACL_SPARSE_ZEN, comm,
                                             &req),
               "appears twice");
    EXPECT_BAD(ctx, tacl_sparse_allreduce_nb(&in, TACL_FLOAT32, TACL_SUM, d,
                                             NULL, TACL_SPARSE_ZEN, comm,
                                             NULL),
               "req_p");
    EXPECT_BAD(ctx, tacl_comp_allreduce_nb(x, y, 64, NULL, &p, NULL,
                                           TACL_COMP_GATHER, comm, &req),
               "codec is NULL");
    EXPECT_BAD(ctx, tacl_comp_reduce_scatter_nb(x, y, 16, topk, &p, NULL,
                                                TACL_COMP_SUM, comm, &req),
               "topk is not");
    EXPECT_BAD(ctx, tacl_comp_allgather_nb(x, NULL, 16, fp16, &p, NULL, comm,
                                           &req),
               "recvbuf");
    EXPECT_BAD(ctx, tacl_comp_allreduce_hops_nb(x, y, 64, fp16, &p, NULL,
                                                TACL_COMP_GATHER,
                                                (tacl_comp_hops_t)9, comm,
                                                &req),
               "unknown hops 9");
    return 0;
}

Test(hostnb, bad_input_fails_at_issue, .timeout = 120)
{
    coll_run_expect_pass(2, body_bad, NULL, NULL);
}
