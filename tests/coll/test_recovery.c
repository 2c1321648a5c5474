/*
 * Recovery: tacl_comm_shrink after a rank was killed.  One rank runs an
 * exact all-reduce with the others, then kills itself (SIGKILL); the
 * survivors first see the old communicator fail, then shrink it and run
 * exact all-reduces and all-gathers on the new one, whose ranks are the
 * survivors renumbered in order.  The shrink must take less than the
 * timeout (TACL_TIMEOUT=5) plus slack; the measured times are printed.
 * Also: a shrink where nobody died, where rank 0 died, and one where a
 * live rank never joins (it fails with TACL_ERR_TIMEOUT, in bounded time).
 * Revoke: one rank revokes while the others wait in an all-reduce it never
 * joins; theirs fail with TACL_ERR_REMOTE naming the revoke within
 * REVOKE_LIMIT_S (far below the timeout), later ones fail at once, and a
 * shrink then gives a working communicator of every rank.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "harness.h"

#define TIMEOUT_S 5.0
/* Scheduling slack on two shared cores. */
#define SLACK_S 3.0
#define COUNT 1000
/* How soon a revoke must fail the others' operations. */
#define REVOKE_LIMIT_S 1.5

static const char *const timeout_env[] = {"TACL_TIMEOUT=5", NULL};

typedef struct {
    int joined;
    double shrink_s[COLL_MAX_RANKS];
    double revoked_at;                /* when the revoking rank revoked */
    double seen_after[COLL_MAX_RANKS]; /* when the others' op failed */
} rec_scratch_t;

typedef struct {
    int victim;     /* the rank that dies, -1 for none */
    int idle;       /* a live rank that never shrinks, -1 for none */
} rec_case_t;

static rec_scratch_t *scratch(coll_ctx_t *ctx)
{
    return (rec_scratch_t *)ctx->scratch;
}

/* Wait (bounded) until every rank passed the first all-reduce. */
static void wait_all_joined(coll_ctx_t *ctx)
{
    double deadline = coll_now() + 20;

    while (__atomic_load_n(&scratch(ctx)->joined, __ATOMIC_SEQ_CST) <
           ctx->nranks && coll_now() < deadline)
        coll_sleep_ms(1);
}

/* Exact all-reduce and all-gather over comm; old_of maps new to old
 * ranks, so every value names the rank that contributed it. */
static int check_comm(coll_ctx_t *ctx, tacl_comm_t comm, const int *old_of)
{
    int rank, size;
    int32_t *s = malloc(COUNT * sizeof(int32_t));
    int32_t *r = malloc((size_t)COLL_MAX_RANKS * COUNT * sizeof(int32_t));

    if (!s || !r)
        return coll_fail(ctx, "out of memory");
    COLL_CHECK_OK(ctx, tacl_comm_rank(comm, &rank));
    COLL_CHECK_OK(ctx, tacl_comm_size(comm, &size));
    for (int i = 0; i < COUNT; i++)
        s[i] = old_of[rank] * 100000 + i;
    COLL_CHECK_OK(ctx, tacl_allreduce(s, r, COUNT, TACL_INT32, TACL_SUM,
                                      comm, NULL));
    for (int i = 0; i < COUNT; i++) {
        int64_t want = 0;

        for (int q = 0; q < size; q++)
            want += old_of[q] * 100000 + i;
        COLL_CHECK(ctx, r[i] == want, "allreduce[%d] = %d, want %lld", i,
                   (int)r[i], (long long)want);
    }
    COLL_CHECK_OK(ctx, tacl_allgather(s, r, COUNT, TACL_INT32, comm, NULL));
    for (int q = 0; q < size; q++)
        for (int i = 0; i < COUNT; i++)
            COLL_CHECK(ctx, r[q * COUNT + i] == old_of[q] * 100000 + i,
                       "allgather[%d][%d] = %d", q, i,
                       (int)r[q * COUNT + i]);
    free(s);
    free(r);
    return 0;
}

static int body_shrink(coll_ctx_t *ctx)
{
    const rec_case_t *c = ctx->arg;
    int old_of[COLL_MAX_RANKS], n = 0, want_rank = -1, rank, size, rc;
    tacl_comm_t newcomm = NULL;
    tacl_status_t st;
    double t0;

    for (int q = 0; q < ctx->nranks; q++)
        if (q != c->victim)
            old_of[n++] = q;
    for (int q = 0; q < n; q++)
        want_rank = old_of[q] == ctx->rank ? q : want_rank;
    {
        int32_t x = 1, y = 0;

        COLL_CHECK_OK(ctx, tacl_allreduce(&x, &y, 1, TACL_INT32, TACL_SUM,
                                          ctx->comm, NULL));
        COLL_CHECK(ctx, y == ctx->nranks, "first allreduce gave %d", y);
    }
    __atomic_add_fetch(&scratch(ctx)->joined, 1, __ATOMIC_SEQ_CST);
    wait_all_joined(ctx);
    if (ctx->rank == c->victim) {
        raise(SIGKILL);
        return coll_fail(ctx, "still alive after SIGKILL");
    }
    if (ctx->rank == c->idle) {
        coll_sleep_ms((int)((TIMEOUT_S + 2) * 1000));
        return 0;
    }
    if (c->victim >= 0) {
        /* The old communicator fails first, as it does today. */
        int32_t x = 1, y = 0;

        st = tacl_allreduce(&x, &y, 1, TACL_INT32, TACL_SUM, ctx->comm,
                            NULL);
        COLL_CHECK(ctx, st == TACL_ERR_REMOTE || st == TACL_ERR_TIMEOUT,
                   "allreduce with a dead peer returned %s",
                   tacl_status_string(st));
    }
    t0 = coll_now();
    st = tacl_comm_shrink(ctx->comm, &newcomm);
    scratch(ctx)->shrink_s[ctx->rank] = coll_now() - t0;
    COLL_CHECK(ctx, coll_now() - t0 < TIMEOUT_S + SLACK_S,
               "the shrink took %.2f s", coll_now() - t0);
    if (c->idle >= 0) {
        COLL_CHECK(ctx, st == TACL_ERR_TIMEOUT,
                   "shrink without rank %d returned %s, want timeout",
                   c->idle, tacl_status_string(st));
        COLL_CHECK(ctx, strstr(tacl_comm_last_error(ctx->comm),
                               "tacl_comm_shrink") != NULL,
                   "message: %s", tacl_comm_last_error(ctx->comm));
        return 0;
    }
    COLL_CHECK_OK(ctx, st);
    COLL_CHECK_OK(ctx, tacl_comm_rank(newcomm, &rank));
    COLL_CHECK_OK(ctx, tacl_comm_size(newcomm, &size));
    COLL_CHECK(ctx, size == n && rank == want_rank,
               "new comm: rank %d of %d, want %d of %d", rank, size,
               want_rank, n);
    for (int k = 0; k < 3; k++) {
        rc = check_comm(ctx, newcomm, old_of);
        if (rc != 0)
            return rc;
    }
    COLL_CHECK_OK(ctx, tacl_comm_destroy(newcomm));
    return 0;
}

static void run_shrink(int nranks, int victim, int idle, const char *label)
{
    rec_case_t c = {.victim = victim, .idle = idle};
    coll_opts_t opts = {
        .nranks = nranks,
        .deadline_s = 60,
        .init = COLL_INIT_AUTO,
        .env = timeout_env,
        .destroy_may_fail = 1,
        .arg = &c,
    };
    coll_result_t *res = malloc(sizeof(*res));
    const rec_scratch_t *sc;

    cr_assert_not_null(res);
    coll_run(&opts, body_shrink, res);
    sc = (const rec_scratch_t *)res->scratch;
    for (int r = 0; r < nranks; r++)
        if (r != victim && r != idle)
            cr_log_info("%s: rank %d shrank in %.3f s", label, r,
                        sc->shrink_s[r]);
    coll_expect_pass_but(res, victim, SIGKILL);
    free(res);
}

Test(recovery, shrink_none_died, .timeout = 90)
{
    run_shrink(3, -1, -1, "shrink, nobody died");
}

Test(recovery, shrink_kill_1_of_4, .timeout = 90)
{
    run_shrink(4, 2, -1, "shrink after rank 2 of 4 died");
}

Test(recovery, shrink_kill_1_of_8, .timeout = 120)
{
    run_shrink(8, 5, -1, "shrink after rank 5 of 8 died");
}

Test(recovery, shrink_kill_rank0, .timeout = 90)
{
    run_shrink(4, 0, -1, "shrink after rank 0 of 4 died");
}

Test(recovery, shrink_kill_last_of_8, .timeout = 120)
{
    run_shrink(8, 7, -1, "shrink after rank 7 of 8 died");
}

/* A rank that lives but never shrinks: the others time out, bounded. */
Test(recovery, shrink_rank_missing_times_out, .timeout = 90)
{
    run_shrink(3, -1, 2, "shrink with rank 2 absent");
}

static int body_revoke(coll_ctx_t *ctx)
{
    const int revoker = 1;
    int old_of[COLL_MAX_RANKS], rank, size;
    int32_t x = 1, y = 0;
    tacl_comm_t newcomm = NULL;
    tacl_status_t st;
    double t0, after;

    for (int q = 0; q < ctx->nranks; q++)
        old_of[q] = q;
    COLL_CHECK_OK(ctx, tacl_allreduce(&x, &y, 1, TACL_INT32, TACL_SUM,
                                      ctx->comm, NULL));
    if (ctx->rank == revoker) {
        double now;

        coll_sleep_ms(300);
        now = coll_now();
        __atomic_store(&scratch(ctx)->revoked_at, &now, __ATOMIC_SEQ_CST);
        COLL_CHECK_OK(ctx, tacl_comm_revoke(ctx->comm));
        /* Twice is harmless. */
        COLL_CHECK_OK(ctx, tacl_comm_revoke(ctx->comm));
    } else {
        /* Blocks: the revoker never joins this one. */
        st = tacl_allreduce(&x, &y, 1, TACL_INT32, TACL_SUM, ctx->comm,
                            NULL);
        double at;

        __atomic_load(&scratch(ctx)->revoked_at, &at, __ATOMIC_SEQ_CST);
        after = coll_now() - at;
        scratch(ctx)->seen_after[ctx->rank] = after;
        COLL_CHECK(ctx, st == TACL_ERR_REMOTE,
                   "pending allreduce returned %s, want remote: %s",
                   tacl_status_string(st), tacl_comm_last_error(ctx->comm));
        COLL_CHECK(ctx, after < REVOKE_LIMIT_S,
                   "the revoke took %.3f s to fail a pending allreduce",
                   after);
        COLL_CHECK(ctx, strstr(tacl_comm_last_error(ctx->comm),
                               "revoked") != NULL,
                   "message: %s", tacl_comm_last_error(ctx->comm));
    }
    /* Later operations fail at once, on every rank. */
    t0 = coll_now();
    st = tacl_allreduce(&x, &y, 1, TACL_INT32, TACL_SUM, ctx->comm, NULL);
    COLL_CHECK(ctx, st == TACL_ERR_REMOTE && coll_now() - t0 < 0.5,
               "allreduce after the revoke returned %s after %.3f s",
               tacl_status_string(st), coll_now() - t0);
    /* Recovery: everyone is alive, so the shrink keeps every rank. */
    t0 = coll_now();
    COLL_CHECK_OK(ctx, tacl_comm_shrink(ctx->comm, &newcomm));
    scratch(ctx)->shrink_s[ctx->rank] = coll_now() - t0;
    COLL_CHECK_OK(ctx, tacl_comm_rank(newcomm, &rank));
    COLL_CHECK_OK(ctx, tacl_comm_size(newcomm, &size));
    COLL_CHECK(ctx, rank == ctx->rank && size == ctx->nranks,
               "rank %d of %d after the shrink", rank, size);
    if (check_comm(ctx, newcomm, old_of) != 0)
        return 1;
    COLL_CHECK_OK(ctx, tacl_comm_destroy(newcomm));
    return 0;
}

Test(recovery, revoke_fails_pending_and_later_ops, .timeout = 90)
{
    coll_opts_t opts = {
        .nranks = 4,
        .deadline_s = 60,
        .init = COLL_INIT_AUTO,
        .env = timeout_env,
        .destroy_may_fail = 1,
    };
    coll_result_t *res = malloc(sizeof(*res));
    const rec_scratch_t *sc;

    cr_assert_not_null(res);
    coll_run(&opts, body_revoke, res);
    sc = (const rec_scratch_t *)res->scratch;
    for (int r = 0; r < opts.nranks; r++)
        if (r != 1)
            cr_log_info("revoke: rank %d's pending allreduce failed %.3f s "
                        "after the revoke", r, sc->seen_after[r]);
    for (int r = 0; r < opts.nranks; r++)
        cr_log_info("revoke: rank %d shrank in %.3f s", r, sc->shrink_s[r]);
    coll_expect_pass(res);
    free(res);
}

Test(recovery, revoke_bad_handle)
{
    cr_assert_eq(tacl_comm_revoke(NULL), TACL_ERR_INVALID_ARG);
    cr_assert_eq(tacl_comm_shrink(NULL, NULL), TACL_ERR_INVALID_ARG);
}
