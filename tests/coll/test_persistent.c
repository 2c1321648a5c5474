/*
 * Persistent collectives (tacl_*_init, tacl_start, tacl_startall):
 * every collective started many times on the same buffers with new
 * contents each round, its result compared with the blocking call's on
 * the same input (and all-reduce with the exact sum), so a start that
 * reused a stale result, tag or step state shows as a wrong value or a
 * hang; persistent starts interleaved with ordinary calls; and each
 * misuse an error status with a message, never a crash or a hang.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "harness.h"

#define ROUNDS 40

enum { C_ALLREDUCE, C_ALLGATHER, C_REDUCE_SCATTER, C_BROADCAST, C_REDUCE,
       C_ALLTOALL, C_BARRIER, NCOLL };
static const char *const coll_names[NCOLL] = {
    "allreduce", "allgather", "reduce_scatter", "broadcast", "reduce",
    "alltoall", "barrier"};

/* What rank r contributes at element i in round k. */
static int32_t val(int r, int i, int k)
{
    return (int32_t)((r + 1) * 1000 + i * 7 + k * 13);
}

/* Buffers of one collective: persistent and blocking outputs apart. */
typedef struct {
    int coll;
    size_t count;     /* per block */
    int32_t *send, *recv, *want;
    size_t send_n, recv_n;
    tacl_request_t req;
} pers_t;

static void sizes(int coll, size_t count, int n, size_t *send_n,
                  size_t *recv_n)
{
    *send_n = count;
    *recv_n = count;
    if (coll == C_ALLGATHER)
        *recv_n = count * (size_t)n;
    if (coll == C_REDUCE_SCATTER || coll == C_ALLTOALL)
        *send_n = count * (size_t)n;
    if (coll == C_ALLTOALL)
        *recv_n = count * (size_t)n;
}

static tacl_status_t make(pers_t *p, tacl_comm_t comm, int root)
{
    switch (p->coll) {
    case C_ALLREDUCE:
        return tacl_allreduce_init(p->send, p->recv, p->count, TACL_INT32,
                                   TACL_SUM, comm, NULL, &p->req);
    case C_ALLGATHER:
        return tacl_allgather_init(p->send, p->recv, p->count, TACL_INT32,
                                   comm, NULL, &p->req);
    case C_REDUCE_SCATTER:
        return tacl_reduce_scatter_init(p->send, p->recv, p->count,
                                        TACL_INT32, TACL_SUM, comm, NULL,
                                        &p->req);
    case C_BROADCAST:
        return tacl_broadcast_init(p->send, p->recv, p->count, TACL_INT32,
                                   root, comm, NULL, &p->req);
    case C_REDUCE:
        return tacl_reduce_init(p->send, p->recv, p->count, TACL_INT32,
                                TACL_MAX, root, comm, NULL, &p->req);
    case C_ALLTOALL:
        return tacl_alltoall_init(p->send, p->recv, p->count, TACL_INT32,
                                  comm, NULL, &p->req);
    default:
        return tacl_barrier_init(comm, NULL, &p->req);
    }
}

/* The blocking call on p's input, into p->want. */
static tacl_status_t blocking(pers_t *p, tacl_comm_t comm, int root)
{
    switch (p->coll) {
    case C_ALLREDUCE:
        return tacl_allreduce(p->send, p->want, p->count, TACL_INT32,
                              TACL_SUM, comm, NULL);
    case C_ALLGATHER:
        return tacl_allgather(p->send, p->want, p->count, TACL_INT32, comm,
                              NULL);
    case C_REDUCE_SCATTER:
        return tacl_reduce_scatter(p->send, p->want, p->count, TACL_INT32,
                                   TACL_SUM, comm, NULL);
    case C_BROADCAST:
        return tacl_broadcast(p->send, p->want, p->count, TACL_INT32, root,
                              comm, NULL);
    case C_REDUCE:
        return tacl_reduce(p->send, p->want, p->count, TACL_INT32, TACL_MAX,
                           root, comm, NULL);
    case C_ALLTOALL:
        return tacl_alltoall(p->send, p->want, p->count, TACL_INT32, comm,
                             NULL);
    default:
        return tacl_barrier(comm, NULL);
    }
}

static int pers_alloc(coll_ctx_t *ctx, pers_t *p, int coll, size_t count)
{
    p->coll = coll;
    p->count = count;
    sizes(coll, count, ctx->nranks, &p->send_n, &p->recv_n);
    p->send = calloc(p->send_n + 1, sizeof(int32_t));
    p->recv = calloc(p->recv_n + 1, sizeof(int32_t));
    p->want = calloc(p->recv_n + 1, sizeof(int32_t));
    p->req = NULL;
    if (p->send == NULL || p->recv == NULL || p->want == NULL)
        return coll_fail(ctx, "out of memory");
    return 0;
}

static void pers_free(pers_t *p)
{
    free(p->send);
    free(p->recv);
    free(p->want);
}

/* New input for round k; the outputs get a poison the op overwrites. */
static void fill(coll_ctx_t *ctx, pers_t *p, int k)
{
    for (size_t i = 0; i < p->send_n; i++)
        p->send[i] = val(ctx->rank, (int)i, k);
    for (size_t i = 0; i < p->recv_n; i++)
        p->recv[i] = p->want[i] = -7 - k;
}

/* The persistent round k's output against the blocking call's. */
static int verify(coll_ctx_t *ctx, pers_t *p, int root, int k)
{
    size_t n = p->recv_n;

    if (p->coll == C_BARRIER)
        return 0;
    COLL_CHECK_OK(ctx, blocking(p, ctx->comm, root));
    if (p->coll == C_REDUCE && ctx->rank != root)
        return 0; /* recvbuf is not written off the root */
    for (size_t i = 0; i < n; i++)
        COLL_CHECK(ctx, p->recv[i] == p->want[i],
                   "%s count %zu round %d: [%zu] = %d, blocking gives %d",
                   coll_names[p->coll], p->count, k, i, p->recv[i],
                   p->want[i]);
    if (p->coll == C_ALLREDUCE) {
        for (size_t i = 0; i < n; i++) {
            int32_t want = 0;
            for (int r = 0; r < ctx->nranks; r++)
                want += val(r, (int)i, k);
            COLL_CHECK(ctx, p->recv[i] == want,
                       "allreduce round %d: [%zu] = %d, want %d", k, i,
                       p->recv[i], want);
        }
    }
    return 0;
}

/* Each collective, ROUNDS starts on one request, small and 64 KB. */
static int body_repeat(coll_ctx_t *ctx)
{
    static const size_t counts[] = {2, 16384};
    int root = ctx->nranks - 1;

    for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
        for (int coll = 0; coll < NCOLL; coll++) {
            size_t count = counts[c];
            pers_t p;

            if (coll == C_ALLGATHER || coll == C_REDUCE_SCATTER ||
                coll == C_ALLTOALL)
                count /= (size_t)ctx->nranks;
            if (pers_alloc(ctx, &p, coll, count))
                return 1;
            COLL_CHECK_OK(ctx, make(&p, ctx->comm, root));
            for (int k = 0; k < ROUNDS; k++) {
                fill(ctx, &p, k);
                COLL_CHECK_OK(ctx, tacl_start(p.req));
                COLL_CHECK_OK(ctx, tacl_request_wait(p.req));
                if (verify(ctx, &p, root, k))
                    return 1;
            }
            COLL_CHECK_OK(ctx, tacl_request_free(p.req));
            pers_free(&p);
        }
    }
    return 0;
}

/*
 * Persistent and ordinary calls interleaved: three requests started
 * together (tacl_startall), a blocking broadcast and an _nb all-reduce
 * while they run, then the waits, in changing orders.
 */
static int body_interleave(coll_ctx_t *ctx)
{
    pers_t p[3];
    tacl_request_t reqs[3], nb;
    int32_t bc[5], nbin[3], nbout[3];

    if (pers_alloc(ctx, &p[0], C_ALLREDUCE, 33) ||
        pers_alloc(ctx, &p[1], C_ALLGATHER, 5) ||
        pers_alloc(ctx, &p[2], C_BROADCAST, 1000))
        return 1;
    for (int i = 0; i < 3; i++) {
        COLL_CHECK_OK(ctx, make(&p[i], ctx->comm, 0));
        reqs[i] = p[i].req;
    }
    for (int k = 0; k < ROUNDS; k++) {
        for (int i = 0; i < 3; i++)
            fill(ctx, &p[i], k);
        for (int i = 0; i < 3; i++)
            nbin[i] = val(ctx->rank, i, k);
        COLL_CHECK_OK(ctx, tacl_startall(3, reqs));
        for (int i = 0; i < 5; i++)
            bc[i] = ctx->rank == 1 ? val(1, i, k) : -1;
        COLL_CHECK_OK(ctx, tacl_broadcast(bc, bc, 5, TACL_INT32, 1,
                                          ctx->comm, NULL));
        COLL_CHECK_OK(ctx, tacl_allreduce_nb(nbin, nbout, 3, TACL_INT32,
                                             TACL_SUM, ctx->comm, NULL,
                                             &nb));
        for (int i = 0; i < 3; i++)
            COLL_CHECK_OK(ctx, tacl_request_wait(reqs[(i + k) % 3]));
        COLL_CHECK_OK(ctx, tacl_request_wait(nb));
        COLL_CHECK_OK(ctx, tacl_request_free(nb));
        for (int i = 0; i < 5; i++)
            COLL_CHECK(ctx, bc[i] == val(1, i, k), "broadcast round %d", k);
        for (int i = 0; i < 3; i++) {
            int32_t want = 0;
            for (int r = 0; r < ctx->nranks; r++)
                want += val(r, i, k);
            COLL_CHECK(ctx, nbout[i] == want, "_nb round %d [%d]", k, i);
        }
        for (int i = 0; i < 3; i++)
            if (verify(ctx, &p[i], 0, k))
                return 1;
    }
    for (int i = 0; i < 3; i++) {
        COLL_CHECK_OK(ctx, tacl_request_free(p[i].req));
        pers_free(&p[i]);
    }
    return 0;
}

static void count_cb(tacl_request_t req, tacl_status_t status, void *arg)
{
    (void)req;
    if (status == TACL_OK)
        (*(int *)arg)++;
}

#define EXPECT(ctx, call, want)                                              \
    do {                                                                     \
        tacl_status_t st_ = (call);                                          \
        COLL_CHECK(ctx, st_ == (want), "%s gave %s, want %s", #call,         \
                   tacl_status_string(st_), tacl_status_string(want));       \
        if ((want) != TACL_OK)                                               \
            COLL_CHECK(ctx, tacl_last_error()[0] != '\0',                    \
                       "%s: no message", #call);                             \
    } while (0)

/* Every misuse on 2 ranks; the communicator stays usable after each. */
static int body_errors(coll_ctx_t *ctx)
{
    int32_t in[4] = {1, 2, 3, 4}, out[4], nbout[4];
    tacl_request_t req, nb, bad[2];
    int done = 0, calls = 0;
    char fake_stream;

    /* NULL arguments. */
    EXPECT(ctx, tacl_allreduce_init(in, out, 4, TACL_INT32, TACL_SUM,
                                    ctx->comm, NULL, NULL),
           TACL_ERR_INVALID_ARG);
    EXPECT(ctx, tacl_allreduce_init(NULL, out, 4, TACL_INT32, TACL_SUM,
                                    ctx->comm, NULL, &req),
           TACL_ERR_INVALID_ARG);
    COLL_CHECK(ctx, req == NULL, "a failed init left a request");
    EXPECT(ctx, tacl_allreduce_init(in, out, 4, TACL_INT32, TACL_SUM, NULL,
                                    NULL, &req),
           TACL_ERR_INVALID_ARG);
    EXPECT(ctx, tacl_start(NULL), TACL_ERR_INVALID_ARG);
    EXPECT(ctx, tacl_startall(1, NULL), TACL_ERR_INVALID_ARG);
    EXPECT(ctx, tacl_startall(-1, bad), TACL_ERR_INVALID_ARG);
    EXPECT(ctx, tacl_startall(0, NULL), TACL_OK);
    /* Bad arguments as the _nb call reports them. */
    EXPECT(ctx, tacl_allreduce_init(in, out, 4, (tacl_dtype_t)99, TACL_SUM,
                                    ctx->comm, NULL, &req),
           TACL_ERR_INVALID_ARG);
    EXPECT(ctx, tacl_broadcast_init(in, out, 4, TACL_INT32, 5, ctx->comm,
                                    NULL, &req),
           TACL_ERR_INVALID_ARG);
    /* A stream (with host memory) is refused at init. */
    EXPECT(ctx, tacl_allreduce_init(in, out, 4, TACL_INT32, TACL_SUM,
                                    ctx->comm, &fake_stream, &req),
           TACL_ERR_UNSUPPORTED);
    COLL_CHECK(ctx, strstr(tacl_last_error(), "stream") != NULL,
               "message: %s", tacl_last_error());
    /* Inside a group. */
    COLL_CHECK_OK(ctx, tacl_group_start());
    EXPECT(ctx, tacl_barrier_init(ctx->comm, NULL, &req),
           TACL_ERR_INVALID_USAGE);
    COLL_CHECK_OK(ctx, tacl_group_end());

    COLL_CHECK_OK(ctx, tacl_allreduce_init(in, out, 4, TACL_INT32, TACL_SUM,
                                           ctx->comm, NULL, &req));
    /* Never started: wait and test return at once, free works. */
    COLL_CHECK_OK(ctx, tacl_request_wait(req));
    COLL_CHECK_OK(ctx, tacl_request_test(req, &done));
    COLL_CHECK(ctx, done == 1, "a never-started request is not done");
    /* A non-persistent request cannot be started, even in startall. */
    COLL_CHECK_OK(ctx, tacl_allreduce_nb(in, nbout, 4, TACL_INT32, TACL_SUM,
                                         ctx->comm, NULL, &nb));
    COLL_CHECK_OK(ctx, tacl_request_wait(nb));
    EXPECT(ctx, tacl_start(nb), TACL_ERR_INVALID_USAGE);
    bad[0] = req;
    bad[1] = nb;
    EXPECT(ctx, tacl_startall(2, bad), TACL_ERR_INVALID_USAGE);
    COLL_CHECK_OK(ctx, tacl_request_free(nb));
    /* The same request twice: none starts. */
    bad[1] = req;
    EXPECT(ctx, tacl_startall(2, bad), TACL_ERR_INVALID_USAGE);
    COLL_CHECK_OK(ctx, tacl_request_test(req, &done));
    COLL_CHECK(ctx, done == 1, "a refused startall started the request");

    /* Callback: runs at the end of every start after it was set. */
    COLL_CHECK_OK(ctx, tacl_request_set_callback(req, count_cb, &calls));
    COLL_CHECK(ctx, calls == 0, "callback ran on an inactive request");

    /* Start while active and free while active (rank 1 starts late, so
     * rank 0's start cannot complete before these). */
    if (ctx->rank == 1)
        coll_sleep_ms(300);
    COLL_CHECK_OK(ctx, tacl_start(req));
    if (ctx->rank == 0) {
        EXPECT(ctx, tacl_start(req), TACL_ERR_INVALID_USAGE);
        COLL_CHECK(ctx, strstr(tacl_last_error(), "active") != NULL,
                   "message: %s", tacl_last_error());
        EXPECT(ctx, tacl_request_free(req), TACL_ERR_INVALID_USAGE);
        bad[0] = req;
        EXPECT(ctx, tacl_startall(1, bad), TACL_ERR_INVALID_USAGE);
    }
    COLL_CHECK_OK(ctx, tacl_request_wait(req));
    for (int i = 0; i < 4; i++)
        COLL_CHECK(ctx, out[i] == in[i] * ctx->nranks, "after misuse [%d]",
                   i);
    for (int k = 0; k < 3; k++) {
        COLL_CHECK_OK(ctx, tacl_start(req));
        COLL_CHECK_OK(ctx, tacl_request_wait(req));
    }
    COLL_CHECK(ctx, calls == 4, "callback ran %d times for 4 starts", calls);
    EXPECT(ctx, tacl_request_set_callback(req, count_cb, &calls),
           TACL_ERR_INVALID_USAGE);
    COLL_CHECK_OK(ctx, tacl_request_free(req));
    /* Still usable. */
    COLL_CHECK_OK(ctx, tacl_allreduce(in, out, 4, TACL_INT32, TACL_SUM,
                                      ctx->comm, NULL));
    return 0;
}

/* A start on a revoked communicator fails at once and starts nothing. */
static int body_revoked(coll_ctx_t *ctx)
{
    int32_t in[2] = {1, 2}, out[2];
    tacl_request_t req;
    tacl_status_t st;

    COLL_CHECK_OK(ctx, tacl_allreduce_init(in, out, 2, TACL_INT32, TACL_SUM,
                                           ctx->comm, NULL, &req));
    COLL_CHECK_OK(ctx, tacl_barrier(ctx->comm, NULL));
    COLL_CHECK_OK(ctx, tacl_comm_revoke(ctx->comm));
    st = tacl_start(req);
    COLL_CHECK(ctx, st == TACL_ERR_REMOTE, "start after revoke gave %s",
               tacl_status_string(st));
    COLL_CHECK(ctx, strstr(tacl_last_error(), "failed") != NULL,
               "message: %s", tacl_last_error());
    COLL_CHECK_OK(ctx, tacl_request_wait(req));
    COLL_CHECK_OK(ctx, tacl_request_free(req));
    return 0;
}

/*
 * A request outlives its communicator: after destroy a start is refused
 * (the handle is closed) and the request still frees, its scratch with
 * it.
 */
static int body_after_destroy(coll_ctx_t *ctx)
{
    static int32_t in[4096], out[4096 * COLL_MAX_RANKS];
    tacl_request_t req;
    tacl_status_t st;

    COLL_CHECK_OK(ctx, tacl_allgather_init(in, out, 4096, TACL_INT32,
                                           ctx->comm, NULL, &req));
    for (int k = 0; k < 3; k++) {
        COLL_CHECK_OK(ctx, tacl_start(req));
        COLL_CHECK_OK(ctx, tacl_request_wait(req));
    }
    COLL_CHECK_OK(ctx, tacl_comm_destroy(ctx->comm));
    ctx->comm = NULL;
    st = tacl_start(req);
    COLL_CHECK(ctx, st == TACL_ERR_INVALID_USAGE,
               "start after destroy gave %s", tacl_status_string(st));
    COLL_CHECK_OK(ctx, tacl_request_wait(req));
    COLL_CHECK_OK(ctx, tacl_request_free(req));
    return 0;
}

typedef struct {
    tacl_comm_t comm;
    int delay_ms;
} aborter_t;

static void *aborter(void *arg)
{
    aborter_t *a = arg;

    coll_sleep_ms(a->delay_ms);
    tacl_comm_abort(a->comm);
    return NULL;
}

/*
 * Rank 0 starts; rank 1 never does.  Another thread of rank 0 aborts
 * the communicator: the wait ends with an error, the request can no
 * longer start, and it frees.
 */
static int body_abort(coll_ctx_t *ctx)
{
    volatile int *flag = (volatile int *)ctx->scratch;
    int32_t in[8] = {0}, out[8];
    tacl_request_t req;
    aborter_t a = {.comm = ctx->comm, .delay_ms = 200};
    pthread_t t;
    tacl_status_t st;
    double t0;

    if (ctx->rank == 1) {
        double end = coll_now() + 60;
        while (!*flag && coll_now() < end)
            coll_sleep_ms(10);
        tacl_comm_abort(ctx->comm);
        ctx->comm = NULL;
        return 0;
    }
    COLL_CHECK_OK(ctx, tacl_allreduce_init(in, out, 8, TACL_INT32, TACL_SUM,
                                           ctx->comm, NULL, &req));
    COLL_CHECK_OK(ctx, tacl_start(req));
    if (pthread_create(&t, NULL, aborter, &a) != 0)
        return coll_fail(ctx, "pthread_create failed");
    t0 = coll_now();
    st = tacl_request_wait(req);
    pthread_join(t, NULL);
    ctx->comm = NULL;
    *flag = 1;
    COLL_CHECK(ctx, st != TACL_OK, "wait across an abort returned OK");
    COLL_CHECK(ctx, coll_now() - t0 < 20, "the wait took %.1f s",
               coll_now() - t0);
    st = tacl_start(req);
    COLL_CHECK(ctx, st != TACL_OK, "start after abort returned OK");
    COLL_CHECK(ctx, tacl_request_wait(req) != TACL_OK,
               "the aborted start's request reports OK");
    COLL_CHECK_OK(ctx, tacl_request_free(req));
    return 0;
}

static void run(int nranks, coll_body_t body, int may_fail,
                const char *const *env)
{
    coll_opts_t opts = {.nranks = nranks, .deadline_s = 120, .env = env,
                        .destroy_may_fail = may_fail};

    coll_run_opts_expect_pass(&opts, body);
}

Test(persistent, repeat_two_ranks) { run(2, body_repeat, 0, NULL); }
Test(persistent, repeat_three_ranks) { run(3, body_repeat, 0, NULL); }
Test(persistent, repeat_checked)
{
    static const char *const env[] = {"TACL_CHECK=1", NULL};
    run(2, body_repeat, 0, env);
}
Test(persistent, interleave) { run(3, body_interleave, 0, NULL); }
Test(persistent, errors) { run(2, body_errors, 0, NULL); }
Test(persistent, revoked) { run(2, body_revoked, 1, NULL); }
Test(persistent, free_after_destroy) { run(3, body_after_destroy, 0, NULL); }
Test(persistent, abort_from_thread) { run(2, body_abort, 1, NULL); }
