/*
 * The plan cache (lib/plan.c): a repeated operation reuses its schedule,
 * and any change of signature (buffers, count, op, root, collective,
 * forced algorithm) gets a schedule of its own.  Every result is checked
 * exactly, so a stale schedule (the wrong buffer, count or root) or a
 * stale tag (messages of one call matched in another) shows as a wrong
 * value or a hang; the counters show that hits happen.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "harness.h"
#include "comm.h"
#include "config.h"
#include "plan.h"

#define MAXN 1024
#define NELEMS(a) (sizeof(a) / sizeof((a)[0]))

/* What rank r contributes at element i in round k. */
static int32_t val(int r, int i, int k)
{
    return (int32_t)((r + 1) * 1000 + i * 7 + k * 13);
}

/* send and recv hold MAXN elements each. */
static int check_allreduce(coll_ctx_t *ctx, int32_t *send, int32_t *recv,
                           int count, tacl_op_t op, int k)
{
    for (int i = 0; i < count; i++)
        send[i] = val(ctx->rank, i, k);
    memset(recv, 0xff, MAXN * sizeof(*recv));
    COLL_CHECK_OK(ctx, tacl_allreduce(send, recv, (size_t)count, TACL_INT32,
                                      op, ctx->comm, NULL));
    for (int i = 0; i < count; i++) {
        int32_t want = op == TACL_SUM ? 0 : val(0, i, k);
        for (int r = 0; r < ctx->nranks; r++)
            want = op == TACL_SUM ? want + val(r, i, k)
                   : want > val(r, i, k) ? want : val(r, i, k);
        COLL_CHECK(ctx, recv[i] == want,
                   "allreduce count %d op %d round %d: [%d] = %d, want %d",
                   count, (int)op, k, i, recv[i], want);
    }
    /* Nothing past count is written. */
    if (count < MAXN)
        COLL_CHECK(ctx, recv[count] == (int32_t)0xffffffff,
                   "allreduce of %d wrote element %d", count, count);
    return 0;
}

static int check_broadcast(coll_ctx_t *ctx, int32_t *buf, int count,
                           int root, int k)
{
    for (int i = 0; i < count; i++)
        buf[i] = ctx->rank == root ? val(root, i, k) : -1;
    COLL_CHECK_OK(ctx, tacl_broadcast(buf, buf, (size_t)count, TACL_INT32,
                                      root, ctx->comm, NULL));
    for (int i = 0; i < count; i++)
        COLL_CHECK(ctx, buf[i] == val(root, i, k),
                   "broadcast root %d round %d: [%d] = %d", root, k, i,
                   buf[i]);
    return 0;
}

/*
 * One pass of distinct signatures (at most 8, what the cache holds, on 3
 * ranks): two buffer pairs, two counts, two ops, and a broadcast from
 * every root, in place.
 */
static int pass(coll_ctx_t *ctx, int32_t *a, int32_t *b, int32_t *c,
                int k, int *calls_p)
{
    static const int counts[] = {7, MAXN};
    int calls = 0;

    for (size_t n = 0; n < NELEMS(counts); n++) {
        if (check_allreduce(ctx, a, b, counts[n], TACL_SUM, k) ||
            check_allreduce(ctx, c, a, counts[n], TACL_SUM, k))
            return 1;
        calls += 2;
    }
    if (check_allreduce(ctx, a, b, 7, TACL_MAX, k))
        return 1;
    calls++;
    for (int root = 0; root < ctx->nranks; root++) {
        if (check_broadcast(ctx, c, 5, root, k))
            return 1;
        calls++;
    }
    *calls_p = calls;
    return 0;
}

static int body_reuse(coll_ctx_t *ctx)
{
    int32_t *a = calloc(MAXN, 4), *b = calloc(MAXN, 4), *c = calloc(MAXN, 4);
    uint64_t hits0, misses0, hits, misses;
    int calls = 0, distinct;

    COLL_CHECK(ctx, a && b && c, "out of memory");
    /* The first collective's two all-gathers (the fast-path area's, which
     * TACL_FAST_MAX=0 on rank 0 turns down) are plans too: before. */
    COLL_CHECK_OK(ctx, tacl_barrier(ctx->comm, NULL));
    tacl__plan_stats(ctx->comm, &hits0, &misses0);
    if (pass(ctx, a, b, c, 0, &calls))
        return 1;
    /* Every signature is new in the first pass. */
    tacl__plan_stats(ctx->comm, &hits, &misses);
    distinct = calls;
    COLL_CHECK(ctx, misses - misses0 == (uint64_t)calls && hits == hits0,
               "first pass: %llu hits, %llu misses for %d new calls",
               (unsigned long long)(hits - hits0),
               (unsigned long long)(misses - misses0), calls);
    for (int k = 1; k < 4; k++) {
        tacl__plan_stats(ctx->comm, &hits0, &misses0);
        if (pass(ctx, a, b, c, k, &calls))
            return 1;
        tacl__plan_stats(ctx->comm, &hits, &misses);
        COLL_CHECK(ctx, distinct <= 8, "%d signatures do not fit", distinct);
        COLL_CHECK(ctx, hits - hits0 == (uint64_t)calls &&
                                misses == misses0,
                       "pass %d: %llu hits, %llu misses for %d repeated "
                       "calls", k, (unsigned long long)(hits - hits0),
                       (unsigned long long)(misses - misses0), calls);
    }
    free(a);
    free(b);
    free(c);
    return 0;
}

/* The same call many times: every call after the first hits. */
static int body_repeat(coll_ctx_t *ctx)
{
    int32_t send[16], recv[16];
    uint64_t hits0, misses0, hits, misses;

    /* As in body_reuse: the fast-path area's exchange first. */
    COLL_CHECK_OK(ctx, tacl_barrier(ctx->comm, NULL));
    tacl__plan_stats(ctx->comm, &hits0, &misses0);
    for (int k = 0; k < 200; k++) {
        for (int i = 0; i < 16; i++)
            send[i] = val(ctx->rank, i, k);
        COLL_CHECK_OK(ctx, tacl_allreduce(send, recv, 16, TACL_INT32,
                                          TACL_SUM, ctx->comm, NULL));
        for (int i = 0; i < 16; i++) {
            int32_t want = 0;
            for (int r = 0; r < ctx->nranks; r++)
                want += val(r, i, k);
            COLL_CHECK(ctx, recv[i] == want, "round %d: [%d] = %d, want %d",
                       k, i, recv[i], want);
        }
    }
    tacl__plan_stats(ctx->comm, &hits, &misses);
    COLL_CHECK(ctx, misses - misses0 == 1 && hits - hits0 == 199,
               "200 equal calls: %llu hits, %llu misses",
               (unsigned long long)(hits - hits0),
               (unsigned long long)(misses - misses0));
    return 0;
}

/* More signatures than the cache holds, cycled: evictions, exact results. */
static int body_evict(coll_ctx_t *ctx)
{
    int32_t *a = calloc(MAXN, 4), *b = calloc(MAXN, 4);
    uint64_t hits, misses;

    COLL_CHECK(ctx, a && b, "out of memory");
    for (int k = 0; k < 3; k++)
        for (int count = 1; count <= 12; count++)
            if (check_allreduce(ctx, a, b, count, TACL_SUM, k * 12 + count))
                return 1;
    tacl__plan_stats(ctx->comm, &hits, &misses);
    COLL_CHECK(ctx, misses >= 36, "12 signatures cycled through 8 slots: "
               "%llu misses of 36", (unsigned long long)misses);
    free(a);
    free(b);
    return 0;
}

/* A different forced algorithm is a different signature. */
static int body_spec(coll_ctx_t *ctx)
{
    static const char *const algos[] = {"ring", "rd", "direct", "ring"};
    static int32_t send[MAXN], buf[MAXN];

    for (size_t k = 0; k < NELEMS(algos); k++) {
        char spec[64];

        snprintf(spec, sizeof(spec), "allreduce=%s", algos[k]);
        setenv("TACL_ALGO", spec, 1);
        tacl__config_reload();
        for (int rep = 0; rep < 2; rep++) {
            if (check_allreduce(ctx, send, buf, 64, TACL_SUM, (int)k))
                return 1;
            COLL_CHECK(ctx, strcmp(tacl_comm_last_algorithm(ctx->comm),
                                   algos[k]) == 0,
                       "forced %s, ran %s", algos[k],
                       tacl_comm_last_algorithm(ctx->comm));
        }
    }
    return 0;
}

static void run_plan(int nranks, coll_body_t body)
{
    /* These calls are small: keep them off the fast path, which has no
     * schedule to cache (test_fast.c covers it). */
    static const char *const env[] = {"TACL_FAST_MAX=0", NULL};
    coll_opts_t opts = {.nranks = nranks, .deadline_s = 90, .env = env};

    coll_run_opts_expect_pass(&opts, body);
}

Test(plan, reuse_and_change) { run_plan(3, body_reuse); }
Test(plan, reuse_two_ranks) { run_plan(2, body_reuse); }
Test(plan, eviction) { run_plan(3, body_evict); }
Test(plan, repeat_hits) { run_plan(2, body_repeat); }
Test(plan, forced_algorithm) { run_plan(4, body_spec); }
