/*
 * The small-message fast path (lib/fastpath.c, executor/fastpath.c).
 *
 * - Every collective it serves, for every dtype and op, in place and out
 *   of place, at count 0 and at sizes around the threshold
 *   (TACL_FAST_MAX=256 here), gives the same bytes as the normal path
 *   (a communicator split off while TACL_FAST_MAX was 0), on 2, 3, 4 and
 *   8 ranks; the calls under the threshold report the "fast" algorithm
 *   and those over it do not.
 * - Thousands of back-to-back calls of mixed collectives, sizes and
 *   roots, some over the threshold and some ranks pausing now and then,
 *   all exact (the slots' double buffering).
 * - Long runs of broadcasts with changing roots and sizes, receivers
 *   lagging so the root runs far ahead in the ring of records, mixed
 *   with other collectives and normal-path calls, all exact.
 * - TACL_FAST_MAX set differently on the ranks: rank 0's applies.
 * - A rank killed while its peers wait in a fast-path call: they fail
 *   with TACL_ERR_REMOTE or TACL_ERR_TIMEOUT within the timeout.
 * - An abort from another thread ends a fast-path wait at once.
 * - Fast-path calls while a large _nb call is in flight.
 * - The owner thread's holds (lib/comm.c: no atomic read-modify-write):
 *   a destroy from another thread waits for the owner's call in flight;
 *   another thread's calls (holding the other way) work in between; the
 *   owner's memo of validated calls (lib/fastpath.c) gives way to a
 *   TACL_CHECK switched on, and never serves different arguments.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "harness.h"
#include "config.h"
#include "values.h"

#define CAP 256
/* Elements of every buffer: enough for 8 ranks of CAP bytes of int8. */
#define BUF_BYTES (8 * (CAP + 64) * 8)

enum { C_ALLREDUCE, C_REDUCE, C_REDUCE_SCATTER, C_ALLGATHER, C_BROADCAST,
       C_BARRIER, NCOLL };
static const char *const coll_names[NCOLL] = {
    "allreduce", "reduce", "reduce_scatter", "allgather", "broadcast",
    "barrier"};

typedef struct {
    int coll;
    tacl_dtype_t dt;
    tacl_op_t op;
    size_t count;
    int in_place;
    int root;
} fcase_t;

/* Bytes one rank puts in (what TACL_FAST_MAX bounds). */
static size_t in_bytes(const fcase_t *c, int n)
{
    size_t b = c->count * val_size(c->dt);

    return c->coll == C_REDUCE_SCATTER ? b * (size_t)n
           : c->coll == C_BARRIER      ? 0
                                       : b;
}

/*
 * Prepare the buffers for c, run it on comm and copy this rank's result
 * into out (*out_len bytes).
 */
static tacl_status_t run_case(coll_ctx_t *ctx, tacl_comm_t comm,
                              const fcase_t *c, unsigned char *send,
                              unsigned char *recv, unsigned char *out,
                              size_t *out_len)
{
    int n = ctx->nranks, me = ctx->rank;
    size_t es = val_size(c->dt), block = c->count * es;
    const void *sp = send;
    void *rp = recv, *res = recv;
    tacl_status_t st;

    memset(send, 0x5a, BUF_BYTES);
    memset(recv, 0xa5, BUF_BYTES);
    *out_len = block;
    switch (c->coll) {
    case C_ALLREDUCE:
    case C_REDUCE:
        val_fill_red(c->dt, c->op, c->in_place ? recv : send, c->count, me,
                     n, 0);
        if (c->in_place)
            sp = recv;
        if (c->coll == C_ALLREDUCE)
            st = tacl_allreduce(sp, rp, c->count, c->dt, c->op, comm, NULL);
        else
            st = tacl_reduce(sp, rp, c->count, c->dt, c->op, c->root, comm,
                             NULL);
        if (c->coll == C_REDUCE && me != c->root)
            *out_len = 0;
        break;
    case C_REDUCE_SCATTER:
        val_fill_red(c->dt, c->op, send, c->count * (size_t)n, me, n, 0);
        if (c->in_place)
            rp = res = send + (size_t)me * block;
        st = tacl_reduce_scatter(sp, rp, c->count, c->dt, c->op, comm, NULL);
        break;
    case C_ALLGATHER:
        if (c->in_place) {
            sp = recv + (size_t)me * block;
            val_fill_move(c->dt, recv + (size_t)me * block, c->count, me, 0);
        } else {
            val_fill_move(c->dt, send, c->count, me, 0);
        }
        st = tacl_allgather(sp, rp, c->count, c->dt, comm, NULL);
        *out_len = block * (size_t)n;
        break;
    case C_BROADCAST:
        if (me == c->root)
            val_fill_move(c->dt, c->in_place ? recv : send, c->count, me, 0);
        if (c->in_place)
            sp = recv;
        st = tacl_broadcast(sp, rp, c->count, c->dt, c->root, comm, NULL);
        break;
    default:
        st = tacl_barrier(comm, NULL);
        *out_len = 0;
        break;
    }
    /* The result and what follows it (nothing else may be written). */
    if (*out_len > 0)
        *out_len += 16;
    memcpy(out, res, *out_len);
    return st;
}

/* One case on both communicators: same bytes, and the path expected. */
static int check_case(coll_ctx_t *ctx, tacl_comm_t normal, const fcase_t *c,
                      unsigned char *bufs)
{
    unsigned char *send = bufs, *recv = bufs + BUF_BYTES;
    unsigned char *a = bufs + 2 * BUF_BYTES, *b = bufs + 3 * BUF_BYTES;
    size_t alen, blen;
    int fast = in_bytes(c, ctx->nranks) <= CAP;
    const char *algo;

    COLL_CHECK_OK(ctx, run_case(ctx, ctx->comm, c, send, recv, a, &alen));
    algo = tacl_comm_last_algorithm(ctx->comm);
    COLL_CHECK(ctx, (strcmp(algo, "fast") == 0) == fast,
               "%s of %zu x %s (%zu bytes in): algorithm \"%s\"",
               coll_names[c->coll], c->count, tacl_dtype_name(c->dt),
               in_bytes(c, ctx->nranks), algo);
    COLL_CHECK_OK(ctx, run_case(ctx, normal, c, send, recv, b, &blen));
    COLL_CHECK(ctx, strcmp(tacl_comm_last_algorithm(normal), "fast") != 0,
               "the normal communicator took the fast path");
    COLL_CHECK(ctx, alen == blen && memcmp(a, b, alen) == 0,
               "%s of %zu x %s op %s root %d %s: fast and normal results "
               "differ (first differing element %ld)", coll_names[c->coll],
               c->count, tacl_dtype_name(c->dt), tacl_op_name(c->op), c->root,
               c->in_place ? "in place" : "out of place",
               val_first_diff(c->dt, a, b, c->count));
    return 0;
}

static int op_ok(tacl_op_t op, tacl_dtype_t dt)
{
    int integer = dt <= TACL_UINT64;

    return op < TACL_BAND || integer;
}

static int body_matches_normal(coll_ctx_t *ctx)
{
    int n = ctx->nranks;
    unsigned char *bufs = malloc(4 * BUF_BYTES);
    tacl_comm_t normal = NULL;
    int rc = 0;

    if (bufs == NULL)
        return coll_fail(ctx, "out of memory");
    /* The normal path's communicator decides while TACL_FAST_MAX is 0. */
    setenv("TACL_FAST_MAX", "0", 1);
    tacl__config_reload();
    COLL_CHECK_OK(ctx, tacl_comm_split(ctx->comm, 0, ctx->rank, &normal));
    COLL_CHECK_OK(ctx, tacl_barrier(normal, NULL));
    setenv("TACL_FAST_MAX", "256", 1);
    tacl__config_reload();
    for (int coll = 0; coll < NCOLL && rc == 0; coll++) {
        for (int dt = 0; dt < TACL_NUM_DTYPES && rc == 0; dt++) {
            size_t es = val_size((tacl_dtype_t)dt);
            size_t per = coll == C_REDUCE_SCATTER ? es * (size_t)n : es;
            size_t edge = CAP / per;
            size_t counts[] = {0, 1, edge - 1, edge, edge + 1};
            int nops = coll <= C_REDUCE_SCATTER ? TACL_NUM_OPS : 1;

            for (int op = 0; op < nops && rc == 0; op++) {
                if (coll <= C_REDUCE_SCATTER &&
                    !op_ok((tacl_op_t)op, (tacl_dtype_t)dt))
                    continue;
                for (size_t k = 0; k < 5 && rc == 0; k++) {
                    for (int ip = 0; ip < 2 && rc == 0; ip++) {
                        fcase_t c = {.coll = coll, .dt = (tacl_dtype_t)dt,
                                     .op = (tacl_op_t)op,
                                     .count = counts[k], .in_place = ip,
                                     .root = (int)(k + (size_t)op) % n};
                        rc = check_case(ctx, normal, &c, bufs);
                    }
                }
                if (coll == C_BARRIER)
                    break;
            }
        }
    }
    tacl_comm_destroy(normal);
    free(bufs);
    return rc;
}

static const char *const cap_env[] = {"TACL_FAST_MAX=256", NULL};

/* Test(fast, NAME_<n>ranks): body on n ranks with env. */
#define FAST_TEST(name, n, body, env, secs)                                  \
    Test(fast, name##_##n##ranks, .timeout = secs)                           \
    {                                                                        \
        coll_run_expect_pass(n, body, NULL, env);                            \
    }

FAST_TEST(matches_normal, 2, body_matches_normal, cap_env, 200)
FAST_TEST(matches_normal, 3, body_matches_normal, cap_env, 200)
FAST_TEST(matches_normal, 4, body_matches_normal, cap_env, 300)
FAST_TEST(matches_normal, 8, body_matches_normal, cap_env, 400)

/* What rank r contributes at element i of call k. */
static int32_t mixed_val(int r, size_t i, int k)
{
    return (int32_t)((r + 1) * 100003 + (int)i * 31 + k * 7);
}

/* The same pseudo-random sequence on every rank. */
static unsigned next_rand(unsigned *s)
{
    *s = *s * 1103515245u + 12345u;
    return (*s >> 8) & 0xffffff;
}

#define MIXED_CALLS 3000
#define BIG_COUNT 6000 /* 24 KB: over the default threshold */

static int mixed_call(coll_ctx_t *ctx, int32_t *send, int32_t *recv, int k,
                      int coll, size_t count, int root)
{
    int n = ctx->nranks, me = ctx->rank;

    switch (coll) {
    case C_ALLREDUCE:
    case C_REDUCE:
        for (size_t i = 0; i < count; i++)
            send[i] = mixed_val(me, i, k);
        if (coll == C_ALLREDUCE)
            COLL_CHECK_OK(ctx, tacl_allreduce(send, recv, count, TACL_INT32,
                                              TACL_SUM, ctx->comm, NULL));
        else
            COLL_CHECK_OK(ctx, tacl_reduce(send, recv, count, TACL_INT32,
                                           TACL_SUM, root, ctx->comm, NULL));
        if (coll == C_REDUCE && me != root)
            return 0;
        for (size_t i = 0; i < count; i++) {
            int32_t want = 0;
            for (int r = 0; r < n; r++)
                want += mixed_val(r, i, k);
            COLL_CHECK(ctx, recv[i] == want, "call %d (%s of %zu): [%zu] = "
                       "%d, want %d", k, coll_names[coll], count, i, recv[i],
                       want);
        }
        return 0;
    case C_REDUCE_SCATTER:
        for (size_t i = 0; i < count * (size_t)n; i++)
            send[i] = mixed_val(me, i, k);
        COLL_CHECK_OK(ctx, tacl_reduce_scatter(send, recv, count, TACL_INT32,
                                               TACL_SUM, ctx->comm, NULL));
        for (size_t i = 0; i < count; i++) {
            int32_t want = 0;
            for (int r = 0; r < n; r++)
                want += mixed_val(r, (size_t)me * count + i, k);
            COLL_CHECK(ctx, recv[i] == want, "call %d (reduce_scatter of "
                       "%zu): [%zu] = %d, want %d", k, count, i, recv[i],
                       want);
        }
        return 0;
    case C_ALLGATHER:
        for (size_t i = 0; i < count; i++)
            send[i] = mixed_val(me, i, k);
        COLL_CHECK_OK(ctx, tacl_allgather(send, recv, count, TACL_INT32,
                                          ctx->comm, NULL));
        for (int r = 0; r < n; r++)
            for (size_t i = 0; i < count; i++)
                COLL_CHECK(ctx, recv[(size_t)r * count + i] ==
                           mixed_val(r, i, k), "call %d (allgather of %zu): "
                           "rank %d [%zu] = %d", k, count, r, i,
                           recv[(size_t)r * count + i]);
        return 0;
    case C_BROADCAST:
        for (size_t i = 0; i < count; i++)
            recv[i] = me == root ? mixed_val(root, i, k) : -1;
        COLL_CHECK_OK(ctx, tacl_broadcast(recv, recv, count, TACL_INT32,
                                          root, ctx->comm, NULL));
        for (size_t i = 0; i < count; i++)
            COLL_CHECK(ctx, recv[i] == mixed_val(root, i, k), "call %d "
                       "(broadcast of %zu from %d): [%zu] = %d", k, count,
                       root, i, recv[i]);
        return 0;
    default:
        COLL_CHECK_OK(ctx, tacl_barrier(ctx->comm, NULL));
        return 0;
    }
}

static int body_mixed(coll_ctx_t *ctx)
{
    int n = ctx->nranks;
    size_t max_elems = (size_t)BIG_COUNT * (size_t)n;
    int32_t *send = malloc(max_elems * 4), *recv = malloc(max_elems * 4);
    unsigned seed = 12345;
    int fast = 0, rc = 0;

    if (send == NULL || recv == NULL)
        return coll_fail(ctx, "out of memory");
    for (int k = 0; k < MIXED_CALLS && rc == 0; k++) {
        int coll = (int)(next_rand(&seed) % NCOLL);
        /* Up to the default threshold's 16 KB per rank in, now and then
         * well over it. */
        size_t cap = 16384 / 4 / (coll == C_REDUCE_SCATTER ? (size_t)n : 1);
        size_t count = 1 + next_rand(&seed) % cap;
        int root = (int)(next_rand(&seed) % (unsigned)n);

        if (next_rand(&seed) % 50 == 0)
            count = BIG_COUNT;
        /* One rank lags now and then: the others run ahead into the next
         * call and must not overwrite what it still reads. */
        if (next_rand(&seed) % 16 == 0 && ctx->rank == k % n)
            usleep(200);
        rc = mixed_call(ctx, send, recv, k, coll, count, root);
        fast += strcmp(tacl_comm_last_algorithm(ctx->comm), "fast") == 0;
    }
    if (rc == 0)
        COLL_CHECK(ctx, fast > MIXED_CALLS / 2, "only %d of %d calls took "
                   "the fast path", fast, MIXED_CALLS);
    free(send);
    free(recv);
    return rc;
}

FAST_TEST(back_to_back_mixed, 2, body_mixed, NULL, 200)
FAST_TEST(back_to_back_mixed, 3, body_mixed, NULL, 200)
FAST_TEST(back_to_back_mixed, 8, body_mixed, NULL, 400)

/*
 * Long runs of broadcasts from one root, the root changing now and then,
 * sizes from 4 to 1024 bytes (records, large slots and, over TACL_FAST_MAX
 * = 512, the normal path), an all-reduce, reduce or barrier in between
 * now and then, and receivers pausing so that the root runs far ahead in
 * the ring: every rank checks every element of every call.
 */
#define RING_CALLS 6000

static int body_bcast_ring(coll_ctx_t *ctx)
{
    int n = ctx->nranks, me = ctx->rank;
    int32_t *send = malloc(256 * sizeof(int32_t) * (size_t)n);
    int32_t *recv = malloc(256 * sizeof(int32_t) * (size_t)n);
    unsigned seed = 777;
    int root = 0, run = 0, fast = 0, rc = 0;

    if (send == NULL || recv == NULL)
        return coll_fail(ctx, "out of memory");
    for (int k = 0; k < RING_CALLS && rc == 0; k++) {
        unsigned pick = next_rand(&seed), lag = next_rand(&seed);
        size_t count = 1 + next_rand(&seed) % 16; /* 4-64 B: one line */

        if (run-- <= 0) {
            root = (int)(next_rand(&seed) % (unsigned)n);
            run = (int)(next_rand(&seed) % 150);
        }
        if (pick % 8 == 0)
            count = 17 + next_rand(&seed) % 44; /* to 240 B */
        else if (pick % 29 == 0)
            count = 61 + next_rand(&seed) % 196; /* large slot, normal */
        /* A receiver lags: the root fills the ring and must wait. */
        if (me != root && lag % 97 == 0 && (unsigned)me == pick % (unsigned)n)
            usleep(300);
        if (pick % 41 == 0)
            rc = mixed_call(ctx, send, recv, k, C_ALLREDUCE, count, root);
        else if (pick % 53 == 0)
            rc = mixed_call(ctx, send, recv, k, C_REDUCE, count, root);
        else if (pick % 67 == 0)
            rc = mixed_call(ctx, send, recv, k, C_BARRIER, 0, root);
        else
            rc = mixed_call(ctx, send, recv, k, C_BROADCAST, count, root);
        fast += strcmp(tacl_comm_last_algorithm(ctx->comm), "fast") == 0;
    }
    if (rc == 0)
        COLL_CHECK(ctx, fast > RING_CALLS * 3 / 4, "only %d of %d calls "
                   "took the fast path", fast, RING_CALLS);
    free(send);
    free(recv);
    return rc;
}

static const char *const ring_env[] = {"TACL_FAST_MAX=512", NULL};

FAST_TEST(bcast_ring, 2, body_bcast_ring, ring_env, 200)
FAST_TEST(bcast_ring, 4, body_bcast_ring, ring_env, 300)
FAST_TEST(bcast_ring, 8, body_bcast_ring, ring_env, 400)

/*
 * TACL_FAST_MAX differs between ranks: rank 0's value (the area's
 * creator, when a communicator is made: here a split after the settings
 * changed) applies to every rank, so the ranks still take the same path
 * for every call (no hang, exact data), whatever the others say.  With 0
 * on rank 0 no call takes the fast path; with 0 or 64 on the others all
 * calls up to rank 0's 1024 bytes do.
 */
static int body_knob_differs(coll_ctx_t *ctx)
{
    static const char *const mine[] = {"1024", "0", "64", "100000"};
    int n = ctx->nranks, me = ctx->rank, zero = ctx->arg != NULL;
    int32_t *send = malloc(1024 * sizeof(int32_t) * (size_t)n);
    int32_t *recv = malloc(1024 * sizeof(int32_t) * (size_t)n);
    unsigned seed = 99;
    int rc = 0;

    if (send == NULL || recv == NULL)
        return coll_fail(ctx, "out of memory");
    tacl_comm_t parent = ctx->comm;

    setenv("TACL_FAST_MAX", me == 0 && zero ? "0" : mine[me % 4], 1);
    tacl__config_reload();
    COLL_CHECK_OK(ctx, tacl_comm_split(parent, 0, me, &ctx->comm));
    for (int k = 0; k < 600 && rc == 0; k++) {
        int coll = (int)(next_rand(&seed) % NCOLL);
        size_t count = 1 + next_rand(&seed) % 400;
        int root = (int)(next_rand(&seed) % (unsigned)n);
        size_t bytes = count * 4 * (coll == C_REDUCE_SCATTER ? (size_t)n
                                                             : 1);
        int want_fast = !zero && (coll == C_BARRIER || bytes <= 1024);

        rc = mixed_call(ctx, send, recv, k, coll, count, root);
        if (rc == 0)
            COLL_CHECK(ctx, want_fast == (strcmp(tacl_comm_last_algorithm(
                                                     ctx->comm),
                                                 "fast") == 0),
                       "call %d (%s, %zu bytes) took %s (rank 0's "
                       "TACL_FAST_MAX is %s)", k, coll_names[coll], bytes,
                       tacl_comm_last_algorithm(ctx->comm),
                       zero ? "0" : "1024");
    }
    COLL_CHECK_OK(ctx, tacl_comm_destroy(ctx->comm));
    ctx->comm = parent;
    free(send);
    free(recv);
    return rc;
}

Test(fast, knob_differs_rank0_decides, .timeout = 200)
{
    coll_run_expect_pass(4, body_knob_differs, NULL, NULL);
}

Test(fast, knob_differs_rank0_off, .timeout = 200)
{
    coll_run_expect_pass(3, body_knob_differs, (void *)"zero", NULL);
}

/*
 * Fast-path calls while a large _nb all-reduce of the normal path is in
 * flight on the same communicator: both complete, exactly (the fast
 * path's waits progress the context's executions).
 */
static int body_nb_in_flight(coll_ctx_t *ctx)
{
    const size_t big = 1 << 20;
    int n = ctx->nranks;
    float *bs = malloc(big * 4), *br = malloc(big * 4);
    tacl_request_t req = NULL;

    if (bs == NULL || br == NULL)
        return coll_fail(ctx, "out of memory");
    for (size_t i = 0; i < big; i++)
        bs[i] = (float)(ctx->rank + (int)(i % 7));
    COLL_CHECK_OK(ctx, tacl_allreduce_nb(bs, br, big, TACL_FLOAT32, TACL_SUM,
                                         ctx->comm, NULL, &req));
    for (int k = 0; k < 50; k++) {
        int32_t x = ctx->rank + k, y = -1;

        COLL_CHECK_OK(ctx, tacl_allreduce(&x, &y, 1, TACL_INT32, TACL_SUM,
                                          ctx->comm, NULL));
        COLL_CHECK(ctx, y == n * (n - 1) / 2 + n * k, "call %d: %d", k, y);
    }
    COLL_CHECK(ctx, strcmp(tacl_comm_last_algorithm(ctx->comm), "fast") == 0,
               "the small calls took \"%s\"",
               tacl_comm_last_algorithm(ctx->comm));
    COLL_CHECK_OK(ctx, tacl_request_wait(req));
    tacl_request_free(req);
    for (size_t i = 0; i < big; i++) {
        float want = (float)(n * (n - 1) / 2 + n * (int)(i % 7));
        COLL_CHECK(ctx, br[i] == want, "big [%zu] = %g, want %g", i,
                   (double)br[i], (double)want);
    }
    free(bs);
    free(br);
    return 0;
}

Test(fast, with_nb_in_flight, .timeout = 120)
{
    coll_run_expect_pass(3, body_nb_in_flight, NULL, NULL);
}

/*
 * Split calls: _nb calls of the fast engine (several in flight, small
 * records and large slots, more than the four large slots at once) and
 * blocking ones queued behind them, waited for in reverse order: every
 * result exact, and every call ran on the engine.
 */
#define SPLIT_CALLS 12

static int body_split(coll_ctx_t *ctx)
{
    int n = ctx->nranks, me = ctx->rank;
    static int32_t send[SPLIT_CALLS][1024], recv[SPLIT_CALLS][1024];
    tacl_request_t req[SPLIT_CALLS];

    for (int round = 0; round < 20; round++) {
        for (int k = 0; k < SPLIT_CALLS; k++) {
            /* Small (a record) and large (a slot) inputs in turn. */
            size_t count = k % 2 ? 3 : 200 + (size_t)k;

            for (size_t i = 0; i < count; i++)
                send[k][i] = mixed_val(me, i, round * 100 + k);
            if (k == SPLIT_CALLS / 2) {
                /* A blocking call behind the split ones. */
                COLL_CHECK_OK(ctx, tacl_allreduce(send[k], recv[k], count,
                                                  TACL_INT32, TACL_SUM,
                                                  ctx->comm, NULL));
                req[k] = NULL;
            } else {
                COLL_CHECK_OK(ctx, tacl_allreduce_nb(send[k], recv[k], count,
                                                     TACL_INT32, TACL_SUM,
                                                     ctx->comm, NULL,
                                                     &req[k]));
            }
            COLL_CHECK(ctx, strcmp(tacl_comm_last_algorithm(ctx->comm),
                                   "fast") == 0, "call %d took %s", k,
                       tacl_comm_last_algorithm(ctx->comm));
        }
        for (int k = SPLIT_CALLS - 1; k >= 0; k--) {
            size_t count = k % 2 ? 3 : 200 + (size_t)k;

            if (req[k] != NULL) {
                COLL_CHECK_OK(ctx, tacl_request_wait(req[k]));
                COLL_CHECK_OK(ctx, tacl_request_free(req[k]));
            }
            for (size_t i = 0; i < count; i++) {
                int32_t want = 0;

                for (int r = 0; r < n; r++)
                    want += mixed_val(r, i, round * 100 + k);
                COLL_CHECK(ctx, recv[k][i] == want, "round %d call %d [%zu]"
                           " = %d, want %d", round, k, i, recv[k][i], want);
            }
        }
    }
    return 0;
}

FAST_TEST(split_calls, 2, body_split, NULL, 200)
FAST_TEST(split_calls, 3, body_split, NULL, 200)
FAST_TEST(split_calls, 8, body_split, NULL, 400)

/* Shared between the ranks of the failure cases. */
typedef struct {
    int warmed;          /* survivors past their warm-up calls */
} fast_scratch_t;

#define KILL_TIMEOUT_S 5.0

static int body_kill(coll_ctx_t *ctx)
{
    fast_scratch_t *sc = (fast_scratch_t *)ctx->scratch;
    int victim = ctx->nranks - 1;
    float x[4] = {1, 2, 3, 4}, y[4];
    tacl_status_t st = TACL_OK;
    double t0;
    int k;

    for (k = 0; k < 100; k++)
        COLL_CHECK_OK(ctx, tacl_allreduce(x, y, 4, TACL_FLOAT32, TACL_SUM,
                                          ctx->comm, NULL));
    COLL_CHECK(ctx, strcmp(tacl_comm_last_algorithm(ctx->comm), "fast") == 0,
               "the warm-up took \"%s\"", tacl_comm_last_algorithm(ctx->comm));
    if (ctx->rank == victim) {
        double deadline = coll_now() + 20;

        /* The survivors are inside the next call when the kill lands. */
        while (__atomic_load_n(&sc->warmed, __ATOMIC_SEQ_CST) <
                   ctx->nranks - 1 && coll_now() < deadline)
            coll_sleep_ms(1);
        coll_sleep_ms(50);
        raise(SIGKILL);
        return coll_fail(ctx, "still alive after SIGKILL");
    }
    __atomic_add_fetch(&sc->warmed, 1, __ATOMIC_SEQ_CST);
    t0 = coll_now();
    st = tacl_allreduce(x, y, 4, TACL_FLOAT32, TACL_SUM, ctx->comm, NULL);
    COLL_CHECK(ctx, st == TACL_ERR_REMOTE || st == TACL_ERR_TIMEOUT,
               "the all-reduce with a killed peer returned %s",
               tacl_status_string(st));
    COLL_CHECK(ctx, coll_now() - t0 < KILL_TIMEOUT_S + 5,
               "it took %.2f s to fail", coll_now() - t0);
    COLL_CHECK(ctx, tacl_comm_last_error(ctx->comm)[0] != '\0',
               "it failed without a message");
    /* The communicator keeps failing, promptly. */
    st = tacl_barrier(ctx->comm, NULL);
    COLL_CHECK(ctx, st != TACL_OK, "a barrier after the failure succeeded");
    return 0;
}

Test(fast, rank_killed_mid_call, .timeout = 90)
{
    static const char *const env[] = {"TACL_TIMEOUT=5", NULL};
    coll_opts_t o = {.nranks = 3, .deadline_s = 60, .env = env,
                     .destroy_may_fail = 1};
    coll_result_t *res = malloc(sizeof(*res));

    cr_assert_not_null(res);
    coll_run(&o, body_kill, res);
    cr_assert_eq(res->rank[2].signal, SIGKILL, "the victim ended with "
                 "signal %d: %s", res->rank[2].signal, res->rank[2].msg);
    res->rank[2].exited = 1;
    res->rank[2].exit_code = 0;
    res->rank[2].signal = 0;
    coll_expect_pass(res);
    free(res);
}

static void *aborter(void *arg)
{
    coll_sleep_ms(200);
    tacl_comm_abort((tacl_comm_t)arg);
    return NULL;
}

/*
 * Rank 0 waits in a fast-path all-reduce that rank 1 joins only 3 s
 * later; another thread of rank 0 aborts the communicator after 0.2 s,
 * which must end the wait then, with an error.  Rank 1's next call after
 * that one fails with TACL_ERR_REMOTE (rank 0 aborted).
 */
static int body_abort(coll_ctx_t *ctx)
{
    float x[4] = {1, 2, 3, 4}, y[4];
    tacl_status_t st;
    pthread_t tid;
    double t0;

    for (int k = 0; k < 10; k++)
        COLL_CHECK_OK(ctx, tacl_allreduce(x, y, 4, TACL_FLOAT32, TACL_SUM,
                                          ctx->comm, NULL));
    if (ctx->rank == 1) {
        coll_sleep_ms(3000);
        /* Rank 0 published its part of the aborted call before it gave
         * up, so that call may complete here; the next cannot. */
        (void)tacl_allreduce(x, y, 4, TACL_FLOAT32, TACL_SUM, ctx->comm,
                             NULL);
        t0 = coll_now();
        st = tacl_allreduce(x, y, 4, TACL_FLOAT32, TACL_SUM, ctx->comm,
                            NULL);
        COLL_CHECK(ctx, st == TACL_ERR_REMOTE, "the all-reduce with an "
                   "aborted peer returned %s", tacl_status_string(st));
        COLL_CHECK(ctx, coll_now() - t0 < 5.0, "it failed only after %.2f s",
                   coll_now() - t0);
        return 0;
    }
    COLL_CHECK(ctx, pthread_create(&tid, NULL, aborter, ctx->comm) == 0,
               "pthread_create failed");
    t0 = coll_now();
    st = tacl_allreduce(x, y, 4, TACL_FLOAT32, TACL_SUM, ctx->comm, NULL);
    pthread_join(tid, NULL);
    ctx->comm = NULL;
    COLL_CHECK(ctx, st != TACL_OK, "the aborted all-reduce succeeded");
    COLL_CHECK(ctx, coll_now() - t0 < 2.0, "the abort ended the wait only "
               "after %.2f s", coll_now() - t0);
    return 0;
}

Test(fast, abort_from_another_thread, .timeout = 90)
{
    static const char *const env[] = {"TACL_TIMEOUT=20", NULL};
    coll_opts_t o = {.nranks = 2, .deadline_s = 60, .env = env,
                     .destroy_may_fail = 1};

    coll_run_opts_expect_pass(&o, body_abort);
}

/* Thread B of body_owner: destroys the communicator while its owner
 * (the main thread) waits in a fast-path call. */
typedef struct {
    tacl_comm_t comm;
    double t0;
    double done_at;            /* seconds after t0 the destroy returned */
    tacl_status_t status;
} destroyer_t;

static void *destroyer(void *arg)
{
    destroyer_t *d = arg;

    coll_sleep_ms(200);
    d->status = tacl_comm_destroy(d->comm);
    d->done_at = coll_now() - d->t0;
    return NULL;
}

/* Another thread than the owner: broadcasts from root 1, checked. */
typedef struct {
    tacl_comm_t comm;
    int rank;
    int bad;                   /* calls failed or wrong */
} other_t;

static void *other_caller(void *arg)
{
    other_t *o = arg;

    for (int k = 0; k < 200; k++) {
        int32_t v[4] = {o->rank == 1 ? k : -1, 0, 0, 0};

        o->bad += tacl_broadcast(v, v, 4, TACL_INT32, 1, o->comm, NULL) !=
                      TACL_OK ||
                  v[0] != k;
    }
    return NULL;
}

/* One checked broadcast of 4 int32 from root 1 with value k; 1 wrong. */
static int bcast_is(coll_ctx_t *ctx, int32_t *v, int k)
{
    v[0] = ctx->rank == 1 ? k : -1;
    v[1] = ctx->rank == 1 ? 2 * k : -1;
    if (tacl_broadcast(v, v, 4, TACL_INT32, 1, ctx->comm, NULL) != TACL_OK)
        return coll_fail(ctx, "broadcast %d: %s", k, tacl_last_error());
    if (v[0] != k || v[1] != 2 * k)
        return coll_fail(ctx, "broadcast %d gave %d %d", k, v[0], v[1]);
    return 0;
}

static int body_owner(coll_ctx_t *ctx)
{
    int32_t v[4] = {0}, w[4] = {0};
    destroyer_t d = {.comm = ctx->comm};
    other_t o = {.comm = ctx->comm, .rank = ctx->rank};
    pthread_t tid;
    tacl_status_t st;
    int k = 0;

    /* The main thread calls first: it owns the communicator, and its
     * memo holds this broadcast after the first call. */
    for (; k < 50; k++)
        if (bcast_is(ctx, v, k) != 0)
            return 1;
    COLL_CHECK(ctx, strcmp(tacl_comm_last_algorithm(ctx->comm), "fast") == 0,
               "the broadcasts took \"%s\"",
               tacl_comm_last_algorithm(ctx->comm));
    /* The same arguments with TACL_CHECK on: checked, on the normal path,
     * not served from the memo. */
    COLL_CHECK_OK(ctx, tacl_comm_set_check(ctx->comm, 1));
    if (bcast_is(ctx, v, k++) != 0)
        return 1;
    COLL_CHECK(ctx, strcmp(tacl_comm_last_algorithm(ctx->comm), "fast") != 0,
               "a checked broadcast took the fast path");
    COLL_CHECK_OK(ctx, tacl_comm_set_check(ctx->comm, 0));
    if (bcast_is(ctx, v, k++) != 0)
        return 1;
    COLL_CHECK(ctx, strcmp(tacl_comm_last_algorithm(ctx->comm), "fast") == 0,
               "the broadcast after TACL_CHECK went off took \"%s\"",
               tacl_comm_last_algorithm(ctx->comm));
    /* Other arguments than the memo's: validated (a bad root fails), and
     * another buffer gets the data. */
    st = tacl_broadcast(v, v, 4, TACL_INT32, 7, ctx->comm, NULL);
    COLL_CHECK(ctx, st == TACL_ERR_INVALID_ARG, "root 7 of 2 gave %s",
               tacl_status_string(st));
    w[0] = ctx->rank == 1 ? 99 : -1;
    COLL_CHECK_OK(ctx, tacl_broadcast(w, w, 4, TACL_INT32, 1, ctx->comm,
                                      NULL));
    COLL_CHECK(ctx, w[0] == 99, "the other buffer got %d", w[0]);
    if (bcast_is(ctx, v, k++) != 0)
        return 1;
    /* Another thread's calls, while the owner waits for it. */
    COLL_CHECK(ctx, pthread_create(&tid, NULL, other_caller, &o) == 0,
               "pthread_create failed");
    pthread_join(tid, NULL);
    COLL_CHECK(ctx, o.bad == 0, "%d of the other thread's calls failed",
               o.bad);
    if (bcast_is(ctx, v, k++) != 0)
        return 1;
    /* Rank 0's owner waits for rank 1's call for 1 s; another thread
     * destroys the communicator 0.2 s in: the destroy must wait for the
     * owner's call to return. */
    if (ctx->rank == 1) {
        coll_sleep_ms(1000);
        return bcast_is(ctx, v, k);
    }
    d.t0 = coll_now();
    COLL_CHECK(ctx, pthread_create(&tid, NULL, destroyer, &d) == 0,
               "pthread_create failed");
    st = bcast_is(ctx, v, k);
    pthread_join(tid, NULL);
    ctx->comm = NULL;
    COLL_CHECK(ctx, st == 0, "the owner's call failed");
    COLL_CHECK(ctx, d.status == TACL_OK, "the destroy returned %s",
               tacl_status_string(d.status));
    COLL_CHECK(ctx, d.done_at > 0.8, "the destroy returned %.3f s in, "
               "while the owner's call (until about 1 s) was in flight",
               d.done_at);
    return 0;
}

Test(fast, owner_holds, .timeout = 90)
{
    static const char *const env[] = {"TACL_TIMEOUT=20", NULL};
    coll_opts_t o = {.nranks = 2, .deadline_s = 60, .env = env};

    coll_run_opts_expect_pass(&o, body_owner);
}
