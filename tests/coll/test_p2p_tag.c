/*
 * Tagged point-to-point and receives from any source, against MPI's
 * rules for MPI_Send/MPI_Recv(..., MPI_ANY_SOURCE, tag): messages of one
 * sender and tag are never overtaken, receives take messages in the order
 * they were posted (a receive naming its peer waits behind an earlier
 * any-source one of the same tag), tags keep messages apart, the sender's
 * rank comes back, and a pending any-source receive ends with an error,
 * not a hang, when the communicator is aborted.  On one node these run
 * over shm and self; tests/multinode runs the same rules across nodes.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <criterion/criterion.h>

#include "harness.h"

/* A value check whose message names both values. */
#define CHECK_EQ(ctx, got, want, what)                                       \
    COLL_CHECK(ctx, (long long)(got) == (long long)(want),                   \
               "%s: got %lld, want %lld", what, (long long)(got),            \
               (long long)(want))

/*
 * Rank 0 sends tags 1, 2, 1, then a large tag and one that differs from
 * tag 1 only above the low 20 bits; rank 1 receives them in another order
 * by tag, and tag 1's two messages in their sending order.
 */
static int body_tags(coll_ctx_t *ctx)
{
    const int big = TACL_TAG_MAX, alias = 1 + (1 << 20);
    int32_t v[5] = {10, 20, 11, 30, 40}, got[5] = {0};
    tacl_request_t req[5];

    if (ctx->rank == 0) {
        COLL_CHECK_OK(ctx, tacl_send_tag_nb(&v[0], 1, TACL_INT32, 1, 1,
                                            ctx->comm, NULL, &req[0]));
        COLL_CHECK_OK(ctx, tacl_send_tag_nb(&v[1], 1, TACL_INT32, 1, 2,
                                            ctx->comm, NULL, &req[1]));
        COLL_CHECK_OK(ctx, tacl_send_tag_nb(&v[2], 1, TACL_INT32, 1, 1,
                                            ctx->comm, NULL, &req[2]));
        COLL_CHECK_OK(ctx, tacl_send_tag_nb(&v[3], 1, TACL_INT32, 1, big,
                                            ctx->comm, NULL, &req[3]));
        COLL_CHECK_OK(ctx, tacl_send_tag_nb(&v[4], 1, TACL_INT32, 1, alias,
                                            ctx->comm, NULL, &req[4]));
        for (int i = 0; i < 5; i++) {
            COLL_CHECK_OK(ctx, tacl_request_wait(req[i]));
            tacl_request_free(req[i]);
        }
        return 0;
    }
    if (ctx->rank != 1)
        return 0;
    COLL_CHECK_OK(ctx, tacl_recv_tag(&got[4], 1, TACL_INT32, 0, alias, NULL,
                                     ctx->comm, NULL));
    COLL_CHECK_OK(ctx, tacl_recv_tag(&got[3], 1, TACL_INT32, 0, big, NULL,
                                     ctx->comm, NULL));
    COLL_CHECK_OK(ctx, tacl_recv_tag(&got[1], 1, TACL_INT32, 0, 2, NULL,
                                     ctx->comm, NULL));
    COLL_CHECK_OK(ctx, tacl_recv_tag(&got[0], 1, TACL_INT32, 0, 1, NULL,
                                     ctx->comm, NULL));
    COLL_CHECK_OK(ctx, tacl_recv_tag(&got[2], 1, TACL_INT32, 0, 1, NULL,
                                     ctx->comm, NULL));
    for (int i = 0; i < 5; i++)
        CHECK_EQ(ctx, got[i], v[i], "message by tag");
    return 0;
}

Test(p2p_tag, tags_keep_messages_apart_and_in_order, .timeout = 60)
{
    coll_run_expect_pass(2, body_tags, NULL, NULL);
}

/*
 * Every rank but 0 sends its rank (tag 7) to rank 0, which receives
 * nranks - 1 messages from any source, blocking and then split: each
 * sender once, its payload its reported rank.  A barrier ends each round
 * (an any-source receive may take a sender's next message, as MPI's
 * does, when the sender has sent it already).
 */
static int body_any(coll_ctx_t *ctx)
{
    int n = ctx->nranks;

    for (int round = 0; round < 2; round++) {
        if (ctx->rank != 0) {
            int32_t mine = ctx->rank * 100 + round;

            COLL_CHECK_OK(ctx, tacl_send_tag(&mine, 1, TACL_INT32, 0, 7,
                                             ctx->comm, NULL));
            COLL_CHECK_OK(ctx, tacl_barrier(ctx->comm, NULL));
            continue;
        }
        int32_t got[COLL_MAX_RANKS] = {0};
        int src[COLL_MAX_RANKS], seen[COLL_MAX_RANKS] = {0};
        tacl_request_t req[COLL_MAX_RANKS];

        for (int i = 0; i < n - 1; i++) {
            src[i] = -7;
            if (round == 0)
                COLL_CHECK_OK(ctx, tacl_recv_tag(&got[i], 1, TACL_INT32,
                                                 TACL_ANY_SOURCE, 7, &src[i],
                                                 ctx->comm, NULL));
            else
                COLL_CHECK_OK(ctx,
                              tacl_recv_tag_nb(&got[i], 1, TACL_INT32,
                                               TACL_ANY_SOURCE, 7, &src[i],
                                               ctx->comm, NULL, &req[i]));
        }
        for (int i = 0; round == 1 && i < n - 1; i++) {
            COLL_CHECK_OK(ctx, tacl_request_wait(req[i]));
            tacl_request_free(req[i]);
        }
        for (int i = 0; i < n - 1; i++) {
            if (src[i] < 1 || src[i] >= n || seen[src[i]]++)
                return coll_fail(ctx,
                                 "round %d: receive %d reports source "
                                 "%d (twice, or not a sender)",
                                 round, i, src[i]);
            CHECK_EQ(ctx, got[i], src[i] * 100 + round,
                     "payload of the reported source");
        }
        COLL_CHECK_OK(ctx, tacl_barrier(ctx->comm, NULL));
    }
    return 0;
}

Test(p2p_tag, any_source_on_2_4_8_ranks, .timeout = 120)
{
    for (int n = 2; n <= 8; n *= 2)
        coll_run_expect_pass(n, body_any, NULL, NULL);
}

/*
 * Matching order: rank 0 posts, in order, a receive from any source, one
 * from rank 1 and one from any source, all tag 3, before rank 1 sends
 * 1, 2, 3 with tag 3: they get 1, 2, 3.  A later receive of another tag
 * is not held behind them: rank 1's tag-4 message, sent last, is received
 * first.
 */
static int body_order(coll_ctx_t *ctx)
{
    if (ctx->rank == 1) {
        int32_t v[4] = {1, 2, 3, 4};

        /* Let rank 0 post its receives first. */
        COLL_CHECK_OK(ctx, tacl_barrier(ctx->comm, NULL));
        for (int i = 0; i < 3; i++)
            COLL_CHECK_OK(ctx, tacl_send_tag(&v[i], 1, TACL_INT32, 0, 3,
                                             ctx->comm, NULL));
        COLL_CHECK_OK(ctx, tacl_send_tag(&v[3], 1, TACL_INT32, 0, 4,
                                         ctx->comm, NULL));
        return 0;
    }
    if (ctx->rank != 0) {
        COLL_CHECK_OK(ctx, tacl_barrier(ctx->comm, NULL));
        return 0;
    }
    int32_t got[4] = {0};
    int src[3] = {-7, -7, -7};
    tacl_request_t req[3];

    COLL_CHECK_OK(ctx,
                  tacl_recv_tag_nb(&got[0], 1, TACL_INT32, TACL_ANY_SOURCE, 3,
                                   &src[0], ctx->comm, NULL, &req[0]));
    COLL_CHECK_OK(ctx, tacl_recv_tag_nb(&got[1], 1, TACL_INT32, 1, 3, &src[1],
                                        ctx->comm, NULL, &req[1]));
    COLL_CHECK_OK(ctx,
                  tacl_recv_tag_nb(&got[2], 1, TACL_INT32, TACL_ANY_SOURCE, 3,
                                   &src[2], ctx->comm, NULL, &req[2]));
    COLL_CHECK_OK(ctx, tacl_barrier(ctx->comm, NULL));
    COLL_CHECK_OK(ctx, tacl_recv_tag(&got[3], 1, TACL_INT32, TACL_ANY_SOURCE,
                                     4, NULL, ctx->comm, NULL));
    CHECK_EQ(ctx, got[3], 4, "the other tag's message");
    for (int i = 0; i < 3; i++) {
        COLL_CHECK_OK(ctx, tacl_request_wait(req[i]));
        tacl_request_free(req[i]);
        CHECK_EQ(ctx, got[i], i + 1, "receive in posting order");
        CHECK_EQ(ctx, src[i], 1, "its source");
    }
    return 0;
}

Test(p2p_tag, receives_match_in_posting_order, .timeout = 60)
{
    coll_run_expect_pass(3, body_order, NULL, NULL);
}

/*
 * In a group: every rank sends to itself and to the next rank with tag
 * 5, and receives two messages from any source: one from itself, one
 * from the previous rank; and a message of zero elements from any source.
 */
static int body_group(coll_ctx_t *ctx)
{
    int n = ctx->nranks, next = (ctx->rank + 1) % n;
    int prev = (ctx->rank + n - 1) % n;
    int32_t mine = ctx->rank, got[2] = {-1, -1};
    int src[3] = {-7, -7, -7};

    COLL_CHECK_OK(ctx, tacl_group_start());
    COLL_CHECK_OK(ctx, tacl_send_tag(&mine, 1, TACL_INT32, ctx->rank, 5,
                                     ctx->comm, NULL));
    COLL_CHECK_OK(ctx, tacl_send_tag(&mine, 1, TACL_INT32, next, 5, ctx->comm,
                                     NULL));
    COLL_CHECK_OK(ctx, tacl_send_tag(NULL, 0, TACL_INT32, next, 6, ctx->comm,
                                     NULL));
    COLL_CHECK_OK(ctx, tacl_recv_tag(&got[0], 1, TACL_INT32, TACL_ANY_SOURCE,
                                     5, &src[0], ctx->comm, NULL));
    COLL_CHECK_OK(ctx, tacl_recv_tag(&got[1], 1, TACL_INT32, TACL_ANY_SOURCE,
                                     5, &src[1], ctx->comm, NULL));
    COLL_CHECK_OK(ctx, tacl_recv_tag(NULL, 0, TACL_INT32, TACL_ANY_SOURCE, 6,
                                     &src[2], ctx->comm, NULL));
    COLL_CHECK_OK(ctx, tacl_group_end());
    for (int i = 0; i < 2; i++)
        CHECK_EQ(ctx, got[i], src[i], "payload of the reported source");
    if (!((src[0] == ctx->rank && src[1] == prev) ||
          (src[1] == ctx->rank && src[0] == prev)))
        return coll_fail(ctx, "sources %d and %d, want %d and %d", src[0],
                         src[1], ctx->rank, prev);
    CHECK_EQ(ctx, src[2], prev, "source of the empty message");
    return 0;
}

Test(p2p_tag, any_source_in_groups_with_self, .timeout = 60)
{
    coll_run_expect_pass(3, body_group, NULL, NULL);
}

/* Another thread aborts the communicator 300 ms into a receive from any
 * source that nobody sends: the receive ends with an error, at once. */
static void *abort_later(void *arg)
{
    struct timespec ts = {0, 300 * 1000 * 1000};

    nanosleep(&ts, NULL);
    tacl_comm_abort((tacl_comm_t)arg);
    return NULL;
}

static int body_abort(coll_ctx_t *ctx)
{
    int32_t x;
    pthread_t th;
    double t0 = coll_now();
    tacl_status_t st;

    COLL_CHECK_OK(ctx, tacl_barrier(ctx->comm, NULL));
    if (ctx->rank != 0)
        return 0;
    if (pthread_create(&th, NULL, abort_later, ctx->comm) != 0)
        return coll_fail(ctx, "pthread_create failed");
    st = tacl_recv_tag(&x, 1, TACL_INT32, TACL_ANY_SOURCE, 9, NULL, ctx->comm,
                       NULL);
    pthread_join(th, NULL);
    if (st == TACL_OK)
        return coll_fail(ctx, "a receive nobody sent completed");
    if (coll_now() - t0 > 10)
        return coll_fail(ctx, "the receive ended %.1f s after the abort",
                         coll_now() - t0);
    if (tacl_comm_last_error(ctx->comm)[0] == '\0')
        return coll_fail(ctx, "failed with %s but no message",
                         tacl_status_string(st));
    ctx->comm = NULL; /* aborted: freed */
    return 0;
}

Test(p2p_tag, abort_ends_an_any_source_receive, .timeout = 60)
{
    coll_opts_t o = {.nranks = 2, .deadline_s = 50, .destroy_may_fail = 1};
    coll_result_t res;

    coll_run(&o, body_abort, &res);
    coll_expect_pass(&res);
}
