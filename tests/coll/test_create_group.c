/*
 * tacl_comm_create_group: communicators made by some ranks of a parent
 * while the others do not call (MPI_Comm_create_group's rule).  Groups of
 * several shapes on 4 ranks (pairs, a group of three in a chosen order,
 * overlapping groups made one after another, with one member running
 * ahead into its next group), each checked with collectives; the new
 * communicator's life (split of it, the parent destroyed first, abort);
 * every bad argument; members that pass different lists; a member, or
 * the leader, that never calls or is gone: a bounded error everywhere.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "harness.h"

/* Waits in the failure cases: short, the errors come at their end. */
static const char *const short_timeout[] = {"TACL_TIMEOUT=2", NULL};

/*
 * Check a group made from list (n ranks of the parent, in order): my
 * rank is my place in the list, and an allreduce, an allgather and a
 * broadcast from its last rank see the members in that order.
 */
static int check_group(coll_ctx_t *ctx, tacl_comm_t g, const int *list,
                       int n, const char *what)
{
    int32_t mine = 1000 + ctx->rank, sum = 0, want = 0, all[16], b = 0;
    int32_t bsend = 77 + n;
    int rank = -1, size = -1, me = -1;

    for (int i = 0; i < n; i++) {
        want += 1000 + list[i];
        if (list[i] == ctx->rank)
            me = i;
    }
    COLL_CHECK_OK(ctx, tacl_comm_rank(g, &rank));
    COLL_CHECK_OK(ctx, tacl_comm_size(g, &size));
    COLL_CHECK(ctx, rank == me && size == n, "%s: rank %d of %d, expected "
               "%d of %d", what, rank, size, me, n);
    COLL_CHECK_OK(ctx, tacl_allreduce(&mine, &sum, 1, TACL_INT32, TACL_SUM,
                                      g, NULL));
    COLL_CHECK(ctx, sum == want, "%s: allreduce %d, expected %d", what, sum,
               want);
    COLL_CHECK_OK(ctx, tacl_allgather(&mine, all, 1, TACL_INT32, g, NULL));
    for (int i = 0; i < n; i++)
        COLL_CHECK(ctx, all[i] == 1000 + list[i], "%s: allgather[%d] = "
                   "%d, expected %d", what, i, all[i], 1000 + list[i]);
    COLL_CHECK_OK(ctx, tacl_broadcast(&bsend, &b, 1, TACL_INT32, n - 1, g,
                                      NULL));
    COLL_CHECK(ctx, b == 77 + n, "%s: broadcast %d, expected %d", what, b,
               77 + n);
    return 0;
}

/* Create the group of list if I am in it, check it, destroy it. */
static int one_group(coll_ctx_t *ctx, const int *list, int n, int tag,
                     const char *what)
{
    tacl_comm_t g = NULL;
    int in = 0, rc;

    for (int i = 0; i < n; i++)
        in |= list[i] == ctx->rank;
    if (!in)
        return 0;
    COLL_CHECK_OK(ctx, tacl_comm_create_group(ctx->comm, n, list, tag, &g));
    COLL_CHECK(ctx, g != NULL, "%s: no communicator", what);
    rc = check_group(ctx, g, list, n, what);
    if (tacl_comm_destroy(g) != TACL_OK && rc == 0)
        return coll_fail(ctx, "%s: destroy failed: %s", what,
                         tacl_last_error());
    return rc;
}

/*
 * Run body on nranks ranks with env and arg; every rank must pass (a
 * failing destroy of the parent forgiven when may_fail).
 */
static void run_with(int nranks, const char *const *env, int may_fail,
                     coll_body_t body, int arg)
{
    coll_opts_t o = {.nranks = nranks, .deadline_s = 40,
                     .init = COLL_INIT_AUTO, .env = env,
                     .destroy_may_fail = may_fail, .arg = &arg};

    coll_run_opts_expect_pass(&o, body);
}

/* The parent still works: an allreduce over all of it. */
static int parent_ok(coll_ctx_t *ctx)
{
    int32_t one = 1, n = 0;

    COLL_CHECK_OK(ctx, tacl_allreduce(&one, &n, 1, TACL_INT32, TACL_SUM,
                                      ctx->comm, NULL));
    COLL_CHECK(ctx, n == ctx->nranks, "parent allreduce %d", n);
    return 0;
}

static int body_shapes(coll_ctx_t *ctx)
{
    static const int pair_a[] = {1, 0}, pair_b[] = {3, 2};
    static const int three[] = {3, 1, 0};
    static const int ov[][3] = {{0, 1, 2}, {1, 2, 3}, {3, 0, -1}};
    static const int first_a[] = {0, 1}, first_b[] = {0, 2},
                     first_c[] = {0, 3};
    int rc;

    /* Disjoint pairs, each in reverse order of the parent's ranks. */
    rc = one_group(ctx, ctx->rank < 2 ? pair_a : pair_b, 2, 0, "pair");
    /* Three of four (rank 2 goes straight on), in a chosen order. */
    if (rc == 0)
        rc = one_group(ctx, three, 3, 0, "three");
    /* Overlapping groups one after another, with one tag. */
    for (int k = 0; k < 3 && rc == 0; k++)
        rc = one_group(ctx, ov[k], k == 2 ? 2 : 3, 5, "overlapping");
    /* One leader, one tag, three groups: ranks 2 and 3 run ahead to their
     * hellos while rank 0 still makes the first. */
    if (rc == 0)
        rc = one_group(ctx, first_a, 2, 9, "same leader 1");
    if (rc == 0)
        rc = one_group(ctx, first_b, 2, 9, "same leader 2");
    if (rc == 0)
        rc = one_group(ctx, first_c, 2, 9, "same leader 3");
    return rc != 0 ? rc : parent_ok(ctx);
}

Test(create_group, shapes_4ranks, .timeout = 90)
{
    coll_run_expect_pass(4, body_shapes, NULL, NULL);
}

/* A group of two made concurrently with groups of the other ranks. */
static int body_whole_and_one(coll_ctx_t *ctx)
{
    int all[4] = {0, 1, 2, 3}, me[1] = {ctx->rank};
    int rc = one_group(ctx, me, 1, 0, "group of one");

    if (rc == 0)
        rc = one_group(ctx, all, ctx->nranks, 0, "whole");
    return rc;
}

Test(create_group, whole_and_one, .timeout = 60)
{
    coll_run_expect_pass(4, body_whole_and_one, NULL, NULL);
}

/*
 * The new communicator's life: split of it, the parent destroyed first,
 * and an abort of a group.
 */
static int body_life(coll_ctx_t *ctx)
{
    static const int list[] = {2, 0, 1};
    tacl_comm_t g = NULL, half = NULL;
    tacl_config_t cfg = TACL_CONFIG_INIT;
    int r = ctx->rank, rc;

    if (r == 3)
        return 0; /* not a member: goes straight to the harness's end */
    cfg.name = "grp";
    COLL_CHECK_OK(ctx, tacl_comm_create_group_config(ctx->comm, 3, list, 1,
                                                     &cfg, &g));
    COLL_CHECK_OK(ctx, tacl_comm_split(g, r == 2 ? 0 : 1, 0, &half));
    rc = check_group(ctx, half, r == 2 ? list : list + 1, r == 2 ? 1 : 2,
                     "split of a group");
    if (rc != 0)
        return rc;
    COLL_CHECK_OK(ctx, tacl_comm_destroy(half));
    /* The parent goes first; the group still works. */
    COLL_CHECK_OK(ctx, tacl_comm_destroy(ctx->comm));
    ctx->comm = NULL;
    rc = check_group(ctx, g, list, 3, "group after its parent");
    if (rc != 0)
        return rc;
    COLL_CHECK_OK(ctx, tacl_comm_destroy(g));
    return 0;
}

Test(create_group, life, .timeout = 60)
{
    coll_run_expect_pass(4, body_life, NULL, NULL);
}

static int body_abort(coll_ctx_t *ctx)
{
    static const int list[] = {1, 0};
    tacl_comm_t g = NULL;

    COLL_CHECK_OK(ctx, tacl_comm_create_group(ctx->comm, 2, list, 0, &g));
    COLL_CHECK_OK(ctx, tacl_comm_abort(g));
    return 0;
}

Test(create_group, abort, .timeout = 60)
{
    run_with(2, NULL, 1, body_abort, 0);
}

/* A call that must fail with status, the message naming what. */
#define EXPECT_FAIL(ctx, status, what, call)                                 \
    do {                                                                     \
        tacl_status_t s_ = (call);                                           \
        const char *m_ = tacl_comm_last_error((ctx)->comm);                  \
        COLL_CHECK(ctx, s_ == (status) && strstr(m_, what) != NULL,          \
                   "%s gave %s (%s), expected %s naming \"%s\"", #call,     \
                   tacl_status_string(s_), m_, tacl_status_string(status),  \
                   what);                                                    \
    } while (0)

static int body_bad_args(coll_ctx_t *ctx)
{
    const tacl_status_t inval = TACL_ERR_INVALID_ARG;
    int r = ctx->rank, other = 1 - r, too_many[3] = {0, 1, 0};
    int out_of_range[2] = {r, 2}, twice[2] = {r, r}, without[1] = {other};
    int pair[2] = {0, 1};
    tacl_comm_t g = NULL;
    tacl_config_t bad = TACL_CONFIG_INIT;

    EXPECT_FAIL(ctx, inval, "ranks is NULL",
                tacl_comm_create_group(ctx->comm, 2, NULL, 0, &g));
    EXPECT_FAIL(ctx, inval, "newcomm_p",
                tacl_comm_create_group(ctx->comm, 2, pair, 0, NULL));
    EXPECT_FAIL(ctx, inval, "nranks 0",
                tacl_comm_create_group(ctx->comm, 0, pair, 0, &g));
    EXPECT_FAIL(ctx, inval, "nranks 3",
                tacl_comm_create_group(ctx->comm, 3, too_many, 0, &g));
    EXPECT_FAIL(ctx, inval, "not a rank",
                tacl_comm_create_group(ctx->comm, 2, out_of_range, 0, &g));
    EXPECT_FAIL(ctx, inval, "listed twice",
                tacl_comm_create_group(ctx->comm, 2, twice, 0, &g));
    EXPECT_FAIL(ctx, inval, "not in its list",
                tacl_comm_create_group(ctx->comm, 1, without, 0, &g));
    bad.timeout = -1;
    EXPECT_FAIL(ctx, inval, "timeout",
                tacl_comm_create_group_config(ctx->comm, 2, pair, 0, &bad,
                                              &g));
    COLL_CHECK(ctx, tacl_comm_create_group(NULL, 2, pair, 0, &g) == inval &&
               strstr(tacl_last_error(), "NULL") != NULL,
               "a NULL communicator: %s", tacl_last_error());
    COLL_CHECK(ctx, g == NULL, "a failed call set *newcomm_p");
    /* Nothing was exchanged: the parent and a real group still work. */
    if (parent_ok(ctx) != 0)
        return 1;
    return one_group(ctx, pair, 2, 0, "after bad arguments");
}

Test(create_group, bad_arguments, .timeout = 60)
{
    coll_run_expect_pass(2, body_bad_args, NULL, NULL);
}

/* The time a failing call took, checked against the bound. */
static int timed_fail(coll_ctx_t *ctx, tacl_status_t want, const char *what,
                      int n, const int *list)
{
    tacl_comm_t g = NULL;
    double t0 = coll_now(), dt;

    EXPECT_FAIL(ctx, want, what,
                tacl_comm_create_group(ctx->comm, n, list, 3, &g));
    dt = coll_now() - t0;
    COLL_CHECK(ctx, dt < 8.0, "the failure took %.1f s with a 2 s "
               "timeout", dt);
    return 0;
}

/* Ranks 0 and 1 list {0, 1, 2}, rank 2 lists {0, 2, 1}. */
static int body_mismatch(coll_ctx_t *ctx)
{
    static const int a[] = {0, 1, 2}, b[] = {0, 2, 1};

    if (timed_fail(ctx, TACL_ERR_INVALID_USAGE, "another list", 3,
                   ctx->rank == 2 ? b : a) != 0)
        return 1;
    return parent_ok(ctx);
}

Test(create_group, different_lists, .timeout = 60)
{
    run_with(3, short_timeout, 0, body_mismatch, 0);
}

/*
 * Rank absent of {0, 1, 2} never calls; the others fail in time.  It
 * waits for them (their flags in the shared scratch) before the parent's
 * allreduce, which shows the parent unharmed.
 */
static int body_absent(coll_ctx_t *ctx)
{
    static const int list[] = {0, 1, 2};
    volatile int *done = (volatile int *)ctx->scratch;
    int absent = *(int *)ctx->arg, others = 0;
    double until = coll_now() + 30;

    if (ctx->rank != absent) {
        int rc = timed_fail(ctx, TACL_ERR_TIMEOUT, "within", 3, list);

        __atomic_store_n(&done[ctx->rank], 1, __ATOMIC_SEQ_CST);
        if (rc != 0)
            return rc;
    } else {
        while (others < ctx->nranks - 1 && coll_now() < until) {
            others = 0;
            for (int r = 0; r < ctx->nranks; r++)
                others += r != absent &&
                          __atomic_load_n(&done[r], __ATOMIC_SEQ_CST);
            coll_sleep_ms(10);
        }
        COLL_CHECK(ctx, others == ctx->nranks - 1, "the others did not "
                   "return from tacl_comm_create_group in 30 s");
    }
    return parent_ok(ctx);
}

Test(create_group, member_never_calls, .timeout = 60)
{
    run_with(3, short_timeout, 0, body_absent, 2);
}

Test(create_group, leader_never_calls, .timeout = 60)
{
    run_with(3, short_timeout, 0, body_absent, 0);
}

/* Rank gone of {0, 1, 2} exits at once; the others fail in time. */
static int body_gone(coll_ctx_t *ctx)
{
    static const int list[] = {0, 1, 2};
    int gone = *(int *)ctx->arg;
    tacl_comm_t g = NULL;
    tacl_status_t s;
    double t0;

    /* Every rank is done with init before one goes. */
    if (parent_ok(ctx) != 0)
        return 1;
    if (ctx->rank == gone)
        _exit(0);
    coll_sleep_ms(300); /* let it go */
    t0 = coll_now();
    s = tacl_comm_create_group(ctx->comm, 3, list, 0, &g);
    COLL_CHECK(ctx, s == TACL_ERR_REMOTE || s == TACL_ERR_TIMEOUT,
               "create_group without rank %d gave %s (%s)", gone,
               tacl_status_string(s), tacl_comm_last_error(ctx->comm));
    COLL_CHECK(ctx, coll_now() - t0 < 8.0, "the failure took %.1f s",
               coll_now() - t0);
    return 0;
}

static void run_gone(int gone)
{
    coll_opts_t o = {.nranks = 3, .deadline_s = 40, .init = COLL_INIT_AUTO,
                     .env = short_timeout, .destroy_may_fail = 1,
                     .arg = &gone};
    coll_result_t res;

    coll_run(&o, body_gone, &res);
    for (int r = 0; r < 3; r++) {
        if (r == gone)
            continue;
        cr_expect(res.rank[r].body_done && res.rank[r].body_code == 0,
                  "rank %d: %s", r, res.rank[r].msg);
    }
}

Test(create_group, member_gone, .timeout = 60)
{
    run_gone(2);
}

Test(create_group, leader_gone, .timeout = 60)
{
    run_gone(0);
}
