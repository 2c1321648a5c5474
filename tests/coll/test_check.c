/*
 * TACL_CHECK: calls whose ranks disagree (count, a dtype of the same
 * size, op, root, number of coalesced buffers, order of collectives, a
 * group against a single call) fail on every rank with
 * TACL_ERR_INVALID_USAGE and a message naming the rank, the field and
 * both values; the communicator then still works.  Without checking the
 * mismatches that ran before still run.
 */
#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>

#include "harness.h"

typedef enum {
    M_COUNT = 0, M_DTYPE, M_OP, M_ROOT, M_COALESCED, M_ORDER, M_GROUP,
    M_GROUP_SECOND, M_NB, M_LAST_RANK
} mismatch_t;

typedef struct {
    mismatch_t kind;
    int check;          /* 1: tacl_comm_set_check; 2: TACL_CHECK=1 */
    const char *want[3];/* substrings every rank's message must hold */
} case_t;

/* The odd rank out: the last one. */
static int odd(coll_ctx_t *ctx)
{
    return ctx->rank == ctx->nranks - 1;
}

/* The mismatched call of each kind; returns its status. */
static tacl_status_t run_mismatch(coll_ctx_t *ctx, mismatch_t kind)
{
    float in[16] = {1, 2, 3, 4}, out[64] = {0};
    const void *sp[3] = {in, in + 4, in + 8};
    void *rp[3] = {out, out + 16, out + 32};
    const size_t counts[3] = {2, 2, 2};
    tacl_comm_t c = ctx->comm;
    tacl_request_t req;
    tacl_status_t st;

    switch (kind) {
    case M_COUNT:
        return tacl_allreduce(in, out, odd(ctx) ? 8 : 4, TACL_FLOAT32,
                              TACL_SUM, c, NULL);
    case M_DTYPE:
    case M_LAST_RANK:
        return tacl_allreduce(in, out, 4, odd(ctx) ? TACL_FLOAT32
                                                   : TACL_INT32,
                              TACL_SUM, c, NULL);
    case M_OP:
        return tacl_allreduce(in, out, 4, TACL_FLOAT32,
                              odd(ctx) ? TACL_MAX : TACL_SUM, c, NULL);
    case M_ROOT:
        return tacl_broadcast(in, out, 4, TACL_FLOAT32, odd(ctx) ? 1 : 0, c,
                              NULL);
    case M_COALESCED:
        return tacl_allgather_coalesced(sp, rp, counts, odd(ctx) ? 3 : 2,
                                        TACL_FLOAT32, c, NULL);
    case M_ORDER:
        if (odd(ctx))
            return tacl_broadcast(in, out, 4, TACL_FLOAT32, 0, c, NULL);
        return tacl_allreduce(in, out, 4, TACL_FLOAT32, TACL_SUM, c, NULL);
    case M_GROUP:
        if (odd(ctx))
            return tacl_allreduce(in, out, 4, TACL_FLOAT32, TACL_SUM, c,
                                  NULL);
        tacl_group_start();
        tacl_allreduce(in, out, 4, TACL_FLOAT32, TACL_SUM, c, NULL);
        tacl_allreduce(in + 4, out + 4, 4, TACL_FLOAT32, TACL_SUM, c, NULL);
        return tacl_group_end();
    case M_GROUP_SECOND:
        tacl_group_start();
        tacl_allreduce(in, out, 4, TACL_FLOAT32, TACL_SUM, c, NULL);
        tacl_allreduce(in + 4, out + 4, 4, TACL_FLOAT32,
                       odd(ctx) ? TACL_MIN : TACL_SUM, c, NULL);
        return tacl_group_end();
    case M_NB:
        st = tacl_allreduce_nb(in, out, 4, odd(ctx) ? TACL_FLOAT32
                                                    : TACL_INT32,
                               TACL_SUM, c, NULL, &req);
        if (st != TACL_OK)
            return st;
        st = tacl_request_wait(req);
        tacl_request_free(req);
        return st;
    }
    return TACL_ERR_INTERNAL;
}

/* The communicator still runs matching calls, exactly. */
static int expect_works(coll_ctx_t *ctx)
{
    int32_t in[3] = {ctx->rank, 1, 2}, out[3] = {0};
    int n = ctx->nranks;

    COLL_CHECK_OK(ctx, tacl_allreduce(in, out, 3, TACL_INT32, TACL_SUM,
                                      ctx->comm, NULL));
    COLL_CHECK(ctx, out[0] == n * (n - 1) / 2 && out[1] == n &&
               out[2] == 2 * n, "allreduce after the mismatch gave %d %d %d",
               out[0], out[1], out[2]);
    COLL_CHECK_OK(ctx, tacl_barrier(ctx->comm, NULL));
    return 0;
}

static int body_mismatch(coll_ctx_t *ctx)
{
    const case_t *k = ctx->arg;
    const char *msg;
    tacl_status_t st;

    if (k->check == 1)
        COLL_CHECK_OK(ctx, tacl_comm_set_check(ctx->comm, 1));
    st = run_mismatch(ctx, k->kind);
    msg = tacl_comm_last_error(ctx->comm);
    COLL_CHECK(ctx, st == TACL_ERR_INVALID_USAGE, "got %s: %s",
               tacl_status_string(st), msg);
    for (int i = 0; i < 3 && k->want[i] != NULL; i++)
        COLL_CHECK(ctx, strstr(msg, k->want[i]) != NULL,
                   "message lacks \"%s\": %s", k->want[i], msg);
    return expect_works(ctx);
}

static void run_case(int nranks, const case_t *k)
{
    static const char *const env[] = {"TACL_CHECK=1", NULL};

    coll_run_expect_pass(nranks, body_mismatch, (void *)k,
                         k->check == 2 ? env : NULL);
}

/*
 * One test of a mismatch: its name, its rank count, and the case_t of the
 * mismatch (kind, check mode, the substrings the message must hold).
 */
#define MISMATCH_TEST(name, nranks, kind, mode, ...)                         \
    Test(check, name)                                                        \
    {                                                                        \
        static const case_t k = {kind, mode, {__VA_ARGS__}};                 \
        run_case(nranks, &k);                                                \
    }

MISMATCH_TEST(count, 2, M_COUNT, 1, "rank 1 has count 8", "rank 0 has 4")
MISMATCH_TEST(dtype_of_the_same_size, 2, M_DTYPE, 1,
              "rank 1 has dtype float32", "rank 0 has int32", "TACL_CHECK")
MISMATCH_TEST(op, 2, M_OP, 1, "rank 1 has op max", "rank 0 has sum")
MISMATCH_TEST(root, 2, M_ROOT, 2, "rank 1 has root 1", "rank 0 has 0")
MISMATCH_TEST(coalesced_buffer_count, 2, M_COALESCED, 1,
              "rank 1 has operation count", "buffers of a coalesced",
              "3 where rank 0 has 2")
MISMATCH_TEST(order_of_collectives, 2, M_ORDER, 1,
              "rank 1 has collective broadcast", "rank 0 has allreduce")
MISMATCH_TEST(group_against_single_call, 2, M_GROUP, 1,
              "rank 1 has operation count", "1 where rank 0 has 2")
MISMATCH_TEST(second_collective_of_a_group, 2, M_GROUP_SECOND, 2,
              "rank 1 has op min", "rank 0 has sum", "collective 1")
MISMATCH_TEST(non_blocking, 2, M_NB, 1, "rank 1 has dtype float32")
MISMATCH_TEST(four_ranks_name_the_odd_one, 4, M_LAST_RANK, 2,
              "rank 3 has dtype float32")

/* Matching calls of every kind pass with checking on, p2p included. */
static int body_matching(coll_ctx_t *ctx)
{
    int n = ctx->nranks, r = ctx->rank;
    float in[8] = {1, 2, 3, 4, 5, 6, 7, 8}, out[64];
    const void *sp[2] = {in, in + 2};
    void *rp[2] = {out, out + 16};
    const size_t counts[2] = {2, 1};
    tacl_comm_t sub;

    COLL_CHECK_OK(ctx, tacl_allreduce(in, out, 8, TACL_FLOAT32, TACL_SUM,
                                      ctx->comm, NULL));
    COLL_CHECK_OK(ctx, tacl_broadcast(in, out, 8, TACL_FLOAT32, 1,
                                      ctx->comm, NULL));
    COLL_CHECK_OK(ctx, tacl_allgather_coalesced(sp, rp, counts, 2,
                                                TACL_FLOAT32, ctx->comm,
                                                NULL));
    COLL_CHECK_OK(ctx, tacl_group_start());
    COLL_CHECK_OK(ctx, tacl_send(in, 2, TACL_FLOAT32, (r + 1) % n,
                                 ctx->comm, NULL));
    COLL_CHECK_OK(ctx, tacl_recv(out, 2, TACL_FLOAT32, (r + n - 1) % n,
                                 ctx->comm, NULL));
    COLL_CHECK_OK(ctx, tacl_allgather(in, out + 8, 1, TACL_FLOAT32,
                                      ctx->comm, NULL));
    COLL_CHECK_OK(ctx, tacl_group_end());
    /* Split inherits checking: a mismatch on the child is caught. */
    COLL_CHECK_OK(ctx, tacl_comm_split(ctx->comm, 0, r, &sub));
    COLL_CHECK(ctx, tacl_allreduce(in, out, r == 0 ? 1 : 2, TACL_FLOAT32,
                                   TACL_SUM, sub, NULL) ==
               TACL_ERR_INVALID_USAGE, "split child did not check: %s",
               tacl_comm_last_error(sub));
    COLL_CHECK_OK(ctx, tacl_comm_destroy(sub));
    return expect_works(ctx);
}

Test(check, matching_calls_pass)
{
    static const char *const env[] = {"TACL_CHECK=1", NULL};

    coll_run_expect_pass(3, body_matching, NULL, env);
}

/*
 * Without checking, mismatches whose messages still line up run as they
 * did: OK on every rank.  (A count mismatch is the transport's error; a
 * dtype or op mismatch of a small call, which the fast path's records
 * compare by the whole signature, the fast path's: see below.)
 */
static int body_unchecked(coll_ctx_t *ctx)
{
    static const mismatch_t kinds[] = {M_ROOT};

    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
        tacl_status_t st = run_mismatch(ctx, kinds[i]);
        COLL_CHECK(ctx, st == TACL_OK, "unchecked mismatch %zu gave %s: %s",
                   i, tacl_status_string(st),
                   tacl_comm_last_error(ctx->comm));
    }
    COLL_CHECK_OK(ctx, tacl_comm_set_check(ctx->comm, 1));
    COLL_CHECK(ctx, run_mismatch(ctx, M_OP) == TACL_ERR_INVALID_USAGE,
               "checking turned on late did not catch the op: %s",
               tacl_comm_last_error(ctx->comm));
    COLL_CHECK_OK(ctx, tacl_comm_set_check(ctx->comm, 0));
    return expect_works(ctx);
}

Test(check, unchecked_runs_as_before)
{
    coll_run_expect_pass(2, body_unchecked, NULL, NULL);
}

/*
 * Without checking, a count mismatch is caught where a message arrives
 * with another length than its receive expects: the caller's error, not
 * tacl's, on the rank that sees it (its peer may instead see that rank
 * fail, or time out).  Each rank records in the scratch area whether it
 * got that error.
 */
static int body_unchecked_count(coll_ctx_t *ctx)
{
    volatile int *status = ctx->scratch;
    tacl_status_t st = run_mismatch(ctx, M_COUNT);
    const char *msg = tacl_comm_last_error(ctx->comm);

    status[ctx->rank] = st == TACL_ERR_INVALID_USAGE &&
                        strstr(msg, "called it with count") != NULL;
    COLL_CHECK(ctx, st != TACL_OK, "a count mismatch returned OK");
    return 0;
}

/*
 * A small all-reduce whose ranks differ in dtype or op runs on the fast
 * path, whose records carry the whole signature: without checking, the
 * rank that reads the other's record fails naming the field.
 */
static int body_unchecked_fast(coll_ctx_t *ctx)
{
    volatile int *status = ctx->scratch;
    mismatch_t kind = *(const mismatch_t *)ctx->arg;
    tacl_status_t st = run_mismatch(ctx, kind);
    const char *msg = tacl_comm_last_error(ctx->comm);

    status[ctx->rank] = st == TACL_ERR_INVALID_USAGE &&
                        strstr(msg, kind == M_DTYPE ? "called it with dtype"
                                                    : "called it with op") !=
                            NULL;
    return 0;
}

Test(check, unchecked_count_is_the_callers_error)
{
    static const char *const env[] = {"TACL_TIMEOUT=5", NULL};
    coll_opts_t opts = {.nranks = 2, .deadline_s = 30, .env = env,
                        .destroy_may_fail = 1};
    coll_result_t res;
    const int *status = (const int *)res.scratch;

    coll_run(&opts, body_unchecked_count, &res);
    coll_expect_pass(&res);
    cr_assert(status[0] || status[1],
              "no rank got a usage error saying the counts differ");
}

Test(check, unchecked_fast_mismatch_is_named)
{
    static const char *const env[] = {"TACL_TIMEOUT=5", NULL};
    static const mismatch_t kinds[] = {M_DTYPE, M_OP};

    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
        coll_opts_t opts = {.nranks = 2, .deadline_s = 30, .env = env,
                            .destroy_may_fail = 1,
                            .arg = (void *)&kinds[i]};
        coll_result_t res;
        const int *status = (const int *)res.scratch;

        coll_run(&opts, body_unchecked_fast, &res);
        coll_expect_pass(&res);
        cr_assert(status[0] || status[1], "mismatch %zu: no rank got a "
                  "usage error naming the field", i);
    }
}
