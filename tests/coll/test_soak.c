/*
 * Randomized soak: TT_SOAK_OPS (default 10000) random operations on 4
 * ranks, every result checked bit for bit.  Each operation draws its
 * collective (every one, send/receive pairs and both coalesced calls),
 * communicator (the world or a half of it from a split), count (0, 1, odd,
 * up to 64 Ki elements), dtype, reduction op, root, shift and in-place or
 * out-of-place; operations run one by one, as _nb batches waited for in a
 * random order (by wait or by polling test), or as groups (ended blocking
 * or with tacl_group_end_nb).  Inputs are the conformance suite's exact
 * values (values.h) at a random offset, so floats are exact too.  The
 * small blocking ones take the fast path (at least one must).
 *
 * Every rank draws the same sequence from TT_SOAK_SEED (printed; a fresh
 * one per run when unset), so a failure names the seed and the operation
 * and replays with TT_SOAK_SEED and TT_SOAK_OPS.  Only the order in
 * which a rank waits for its requests comes from a per-rank generator.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <criterion/criterion.h>
#include <criterion/logging.h>

#include "harness.h"
#include "rng.h"
#include "values.h"

#define NRANKS 4
#define MAX_BATCH 4
#define MAX_BUFS 4
#define JUNK 0x5a

typedef enum {
    K_ALLREDUCE,
    K_REDUCE_SCATTER,
    K_ALLGATHER,
    K_BROADCAST,
    K_REDUCE,
    K_ALLTOALL,
    K_BARRIER,
    K_SENDRECV,
    K_AG_COALESCED,
    K_RS_COALESCED,
    K_NUM_KINDS
} kind_t;

static const char *const kind_names[K_NUM_KINDS] = {
    "allreduce", "reduce_scatter", "allgather", "broadcast", "reduce",
    "alltoall", "barrier", "sendrecv", "allgather_coalesced",
    "reduce_scatter_coalesced"};

typedef enum { M_SINGLE, M_NB, M_GROUP, M_GROUP_NB } mode_t_;

static const char *const mode_names[] = {"blocking", "_nb", "group",
                                         "group_end_nb"};

typedef struct {
    uint64_t seed;
    long nops;
} soak_arg_t;

/* One drawn operation and its buffers on this rank. */
typedef struct {
    long index;
    kind_t kind;
    int sub; /* 0: the world, 1: this rank's half */
    tacl_comm_t comm;
    int r, n;
    tacl_dtype_t dt;
    tacl_op_t op;
    int root, shift, nbufs;
    unsigned inplace; /* bit b: buffer b is in place */
    size_t first;
    size_t count[MAX_BUFS];
    char *send[MAX_BUFS], *recv[MAX_BUFS], *expect[MAX_BUFS];
    void *sp[MAX_BUFS], *rp[MAX_BUFS];
    size_t check_elems[MAX_BUFS];
    tacl_request_t req[2];
} sop_t;

static size_t draw_count(tt_rng_t *g)
{
    uint64_t x = tt_rng_next(g);
    uint64_t y = x >> 8;

    switch (x % 16) {
    case 0: return 0;
    case 1: return 1;
    case 2: case 3: case 4: case 5: return 1 + 2 * (y % 48);
    case 6: case 7: case 8: case 9: case 10: return y % 1024;
    case 11: case 12: case 13: return y % 8192;
    default: return y % 65536;
    }
}

static void draw(tt_rng_t *g, sop_t *o, long index)
{
    memset(o, 0, sizeof(*o));
    o->index = index;
    o->kind = (kind_t)(tt_rng_next(g) % K_NUM_KINDS);
    o->sub = tt_rng_next(g) % 4 == 0;
    o->dt = (tacl_dtype_t)(tt_rng_next(g) % TACL_NUM_DTYPES);
    o->op = (tacl_op_t)(tt_rng_next(g) % TACL_NUM_OPS);
    /* The bitwise ops take integer types only: on a float type draw
     * among the arithmetic ones. */
    if (o->op > TACL_AVG && o->dt >= TACL_FLOAT16)
        o->op = (tacl_op_t)(o->op % (TACL_AVG + 1));
    o->root = (int)(tt_rng_next(g) % NRANKS);
    o->shift = 1 + (int)(tt_rng_next(g) % (NRANKS - 1));
    o->inplace = (unsigned)(tt_rng_next(g) & 0xf);
    o->first = tt_rng_next(g) % 100003;
    o->nbufs = o->kind == K_AG_COALESCED || o->kind == K_RS_COALESCED
                   ? 1 + (int)(tt_rng_next(g) % MAX_BUFS)
                   : 1;
    for (int b = 0; b < o->nbufs; b++)
        o->count[b] = draw_count(g);
    /* Alltoall moves n * count each way: keep it moderate. */
    if (o->kind == K_ALLTOALL)
        o->count[0] %= 16384;
}

/* A buffer of elems elements of the op's dtype, filled with junk. */
static char *junk_buf(const sop_t *o, size_t elems)
{
    size_t bytes = elems * val_size(o->dt) + 1;
    char *p = malloc(bytes);

    if (p != NULL)
        memset(p, JUNK, bytes);
    return p;
}

static void sop_free(sop_t *o)
{
    for (int b = 0; b < MAX_BUFS; b++) {
        free(o->send[b]);
        free(o->recv[b]);
        free(o->expect[b]);
        o->send[b] = o->recv[b] = o->expect[b] = NULL;
    }
}

/* Fill inputs and expected outputs; 0, or -1 when out of memory. */
static int prepare(sop_t *o)
{
    size_t es = val_size(o->dt);
    int r = o->r, n = o->n;

    /* Roots and shifts are drawn for the world: fold them into the half. */
    o->root %= n;
    o->shift = n > 1 ? 1 + (o->shift - 1) % (n - 1) : 0;
    for (int b = 0; b < o->nbufs; b++) {
        size_t c = o->count[b], first = o->first + (size_t)b * 1009;
        int in = (o->inplace >> b) & 1;
        size_t send_elems = c, recv_elems = c;
        char *s, *rv, *ex;

        if (o->kind == K_REDUCE_SCATTER || o->kind == K_RS_COALESCED ||
            o->kind == K_ALLTOALL)
            send_elems = (size_t)n * c;
        if (o->kind == K_ALLGATHER || o->kind == K_AG_COALESCED ||
            o->kind == K_ALLTOALL)
            recv_elems = (size_t)n * c;
        s = o->send[b] = junk_buf(o, send_elems);
        rv = o->recv[b] = junk_buf(o, recv_elems);
        ex = o->expect[b] = junk_buf(o, recv_elems);
        if (s == NULL || rv == NULL || ex == NULL)
            return -1;
        o->sp[b] = s;
        o->rp[b] = rv;
        o->check_elems[b] = recv_elems;
        switch (o->kind) {
        case K_ALLREDUCE:
            val_fill_red_result(o->dt, o->op, ex, c, n, first);
            if (in)
                o->sp[b] = rv;
            val_fill_red(o->dt, o->op, o->sp[b], c, r, n, first);
            break;
        case K_REDUCE_SCATTER:
        case K_RS_COALESCED:
            val_fill_red(o->dt, o->op, s, (size_t)n * c, r, n, first);
            val_fill_red_result(o->dt, o->op, ex, c, n,
                                first + (size_t)r * c);
            if (in)
                o->rp[b] = s + (size_t)r * c * es;
            o->check_elems[b] = c;
            break;
        case K_ALLGATHER:
        case K_AG_COALESCED:
            for (int j = 0; j < n; j++)
                val_fill_move(o->dt, ex + (size_t)j * c * es, c, j, first);
            if (in)
                o->sp[b] = rv + (size_t)r * c * es;
            val_fill_move(o->dt, o->sp[b], c, r, first);
            break;
        case K_BROADCAST:
            val_fill_move(o->dt, ex, c, o->root, first);
            if (in)
                o->sp[b] = rv;
            if (r == o->root)
                val_fill_move(o->dt, o->sp[b], c, r, first);
            break;
        case K_REDUCE:
            if (in)
                o->sp[b] = rv;
            val_fill_red(o->dt, o->op, o->sp[b], c, r, n, first);
            /* Off the root recvbuf is left as it was. */
            if (r == o->root)
                val_fill_red_result(o->dt, o->op, ex, c, n, first);
            else
                memcpy(ex, rv, c * es);
            break;
        case K_ALLTOALL:
            for (int j = 0; j < n; j++) {
                val_fill_move(o->dt, s + (size_t)j * c * es, c, r * n + j,
                              first);
                val_fill_move(o->dt, ex + (size_t)j * c * es, c, j * n + r,
                              first);
            }
            if (in) {
                memcpy(rv, s, (size_t)n * c * es);
                o->sp[b] = rv;
            }
            break;
        case K_SENDRECV:
            val_fill_move(o->dt, s, c, r, first);
            val_fill_move(o->dt, ex, c, (r + n - o->shift) % n, first);
            if (n == 1)
                memcpy(ex, rv, c * es); /* nothing moves */
            break;
        case K_BARRIER:
            o->check_elems[b] = 0;
            break;
        default:
            break;
        }
    }
    return 0;
}

/*
 * Issue o: with nb set through the _nb call (requests in o->req), else
 * through the blocking call (which a surrounding group records).
 */
static tacl_status_t issue(sop_t *o, int nb)
{
    tacl_request_t *q = nb ? &o->req[0] : NULL;
    size_t c = o->count[0];
    void *sp = o->sp[0], *rp = o->rp[0];
    tacl_comm_t comm = o->comm;
    tacl_status_t st;
    int dst = (o->r + o->shift) % o->n, src = (o->r + o->n - o->shift) % o->n;

    switch (o->kind) {
    case K_ALLREDUCE:
        return nb ? tacl_allreduce_nb(sp, rp, c, o->dt, o->op, comm, NULL, q)
                  : tacl_allreduce(sp, rp, c, o->dt, o->op, comm, NULL);
    case K_REDUCE_SCATTER:
        return nb ? tacl_reduce_scatter_nb(sp, rp, c, o->dt, o->op, comm,
                                           NULL, q)
                  : tacl_reduce_scatter(sp, rp, c, o->dt, o->op, comm, NULL);
    case K_ALLGATHER:
        return nb ? tacl_allgather_nb(sp, rp, c, o->dt, comm, NULL, q)
                  : tacl_allgather(sp, rp, c, o->dt, comm, NULL);
    case K_BROADCAST:
        return nb ? tacl_broadcast_nb(sp, rp, c, o->dt, o->root, comm, NULL,
                                      q)
                  : tacl_broadcast(sp, rp, c, o->dt, o->root, comm, NULL);
    case K_REDUCE:
        return nb ? tacl_reduce_nb(sp, rp, c, o->dt, o->op, o->root, comm,
                                   NULL, q)
                  : tacl_reduce(sp, rp, c, o->dt, o->op, o->root, comm,
                                NULL);
    case K_ALLTOALL:
        return nb ? tacl_alltoall_nb(sp, rp, c, o->dt, comm, NULL, q)
                  : tacl_alltoall(sp, rp, c, o->dt, comm, NULL);
    case K_BARRIER:
        return nb ? tacl_barrier_nb(comm, NULL, q) : tacl_barrier(comm, NULL);
    case K_SENDRECV:
        if (o->n == 1)
            return TACL_OK;
        if (nb) {
            st = tacl_recv_nb(rp, c, o->dt, src, comm, NULL, &o->req[1]);
            return st != TACL_OK ? st
                                 : tacl_send_nb(sp, c, o->dt, dst, comm,
                                                NULL, q);
        }
        /* Blocking pairs need a group not to deadlock; groups nest. */
        st = tacl_group_start();
        if (st != TACL_OK)
            return st;
        st = tacl_send(sp, c, o->dt, dst, comm, NULL);
        if (st == TACL_OK)
            st = tacl_recv(rp, c, o->dt, src, comm, NULL);
        if (st != TACL_OK) {
            (void)tacl_group_end();
            return st;
        }
        return tacl_group_end();
    case K_AG_COALESCED:
        return nb ? tacl_allgather_coalesced_nb(
                        (const void *const *)o->sp, o->rp, o->count,
                        o->nbufs, o->dt, comm, NULL, q)
                  : tacl_allgather_coalesced((const void *const *)o->sp,
                                             o->rp, o->count, o->nbufs,
                                             o->dt, comm, NULL);
    case K_RS_COALESCED:
        return nb ? tacl_reduce_scatter_coalesced_nb(
                        (const void *const *)o->sp, o->rp, o->count,
                        o->nbufs, o->dt, o->op, comm, NULL, q)
                  : tacl_reduce_scatter_coalesced(
                        (const void *const *)o->sp, o->rp, o->count,
                        o->nbufs, o->dt, o->op, comm, NULL);
    default:
        return TACL_ERR_INTERNAL;
    }
}

static uint64_t soak_seed;

static int sop_fail(coll_ctx_t *ctx, const sop_t *o, mode_t_ mode,
                    const char *what)
{
    return coll_fail(ctx, "seed %" PRIu64 " op %ld (%s, %s, %s comm size "
                     "%d, dtype %d, op %d, root %d, shift %d, in-place "
                     "mask %x, counts %zu/%zu/%zu/%zu of %d buffers, first "
                     "%zu): %s; replay with TT_SOAK_SEED=%" PRIu64
                     " TT_SOAK_OPS=%ld", soak_seed, o->index,
                     kind_names[o->kind], mode_names[mode],
                     o->sub ? "half" : "world", o->n, (int)o->dt, (int)o->op,
                     o->root, o->shift, o->inplace, o->count[0], o->count[1],
                     o->count[2], o->count[3], o->nbufs, o->first, what,
                     soak_seed, o->index + 1);
}

static int verify(coll_ctx_t *ctx, const sop_t *o, mode_t_ mode)
{
    char what[160];

    for (int b = 0; b < o->nbufs; b++) {
        long d = val_first_diff(o->dt, o->rp[b], o->expect[b],
                                o->check_elems[b]);

        if (d >= 0) {
            snprintf(what, sizeof(what), "buffer %d element %ld is %g, "
                     "expected %g", b, d, val_load(o->dt, o->rp[b],
                                                   (size_t)d),
                     val_load(o->dt, o->expect[b], (size_t)d));
            return sop_fail(ctx, o, mode, what);
        }
    }
    return 0;
}

/* Wait for one request, by tacl_request_wait or by polling test. */
static tacl_status_t finish_req(tacl_request_t req, int poll)
{
    tacl_status_t st = TACL_OK;
    int done = 0;
    double deadline = coll_now() + 60;

    if (req == NULL)
        return TACL_OK;
    if (poll) {
        while (!done && st == TACL_OK && coll_now() < deadline)
            st = tacl_request_test(req, &done);
        if (st == TACL_OK && !done)
            st = TACL_ERR_TIMEOUT;
    }
    if (st == TACL_OK)
        st = tacl_request_wait(req);
    if (tacl_request_free(req) != TACL_OK && st == TACL_OK)
        st = TACL_ERR_INTERNAL;
    return st;
}

static int soak_body(coll_ctx_t *ctx)
{
    const soak_arg_t *arg = ctx->arg;
    tt_rng_t g = {arg->seed};
    tt_rng_t local = {arg->seed ^ (0x9e3779b97f4a7c15ull *
                                   (uint64_t)(ctx->rank + 1))};
    sop_t ops[MAX_BATCH];
    tacl_comm_t half = NULL;
    long done = 0, fast = 0;
    int rc = 0;

    soak_seed = arg->seed;
    if (local.state == 0)
        local.state = 1;
    COLL_CHECK_OK(ctx, tacl_comm_split(ctx->comm, ctx->rank / 2, ctx->rank,
                                       &half));
    memset(ops, 0, sizeof(ops));
    while (done < arg->nops && rc == 0) {
        mode_t_ mode = (mode_t_)(tt_rng_next(&g) % 4);
        int k = mode == M_SINGLE ? 1 : 1 + (int)(tt_rng_next(&g) % MAX_BATCH);
        tacl_request_t reqs[2 * MAX_BATCH + 1];
        int nreq = 0;
        tacl_status_t st = TACL_OK;

        if (k > arg->nops - done)
            k = (int)(arg->nops - done);
        for (int i = 0; i < k; i++) {
            sop_t *o = &ops[i];

            draw(&g, o, done + i);
            o->comm = o->sub ? half : ctx->comm;
            o->n = o->sub ? 2 : NRANKS;
            o->r = o->sub ? ctx->rank % 2 : ctx->rank;
            if (prepare(o) != 0)
                rc = sop_fail(ctx, o, mode, "out of memory");
        }
        if (mode == M_GROUP || mode == M_GROUP_NB)
            st = tacl_group_start();
        for (int i = 0; i < k && rc == 0 && st == TACL_OK; i++) {
            st = issue(&ops[i], mode == M_NB);
            if (st != TACL_OK)
                rc = sop_fail(ctx, &ops[i], mode, tacl_status_string(st));
            else if (mode == M_SINGLE &&
                     strcmp(tacl_comm_last_algorithm(ops[i].comm), "fast") ==
                         0)
                fast++;
            for (int q = 0; q < 2 && mode == M_NB; q++)
                if (ops[i].req[q] != NULL)
                    reqs[nreq++] = ops[i].req[q];
        }
        if (mode == M_GROUP && rc == 0 && st == TACL_OK)
            st = tacl_group_end();
        else if (mode == M_GROUP_NB && rc == 0 && st == TACL_OK)
            st = tacl_group_end_nb(&reqs[nreq++]);
        if (rc == 0 && st != TACL_OK)
            rc = sop_fail(ctx, &ops[0], mode, tacl_last_error());
        /* Wait in a random order, this rank's own. */
        for (int i = nreq - 1; i > 0; i--) {
            int j = (int)(tt_rng_next(&local) % (uint64_t)(i + 1));
            tacl_request_t t = reqs[i];

            reqs[i] = reqs[j];
            reqs[j] = t;
        }
        for (int i = 0; i < nreq; i++) {
            st = finish_req(reqs[i], (int)(tt_rng_next(&local) & 1));
            if (st != TACL_OK && rc == 0)
                rc = sop_fail(ctx, &ops[0], mode,
                              tacl_comm_last_error(ctx->comm));
        }
        for (int i = 0; i < k; i++) {
            if (rc == 0)
                rc = verify(ctx, &ops[i], mode);
            sop_free(&ops[i]);
        }
        done += k;
    }
    /* Small blocking calls take the fast path (lib/fastpath.c), mixed
     * with everything else here. */
    if (rc == 0 && arg->nops >= 1000 && fast == 0)
        rc = coll_fail(ctx, "none of %ld operations took the fast path",
                       arg->nops);
    if (half != NULL && tacl_comm_destroy(half) != TACL_OK && rc == 0)
        rc = coll_fail(ctx, "destroying the split communicator failed: %s",
                       tacl_last_error());
    return rc;
}

static long env_long(const char *name, long dflt)
{
    const char *s = getenv(name);
    char *end;
    long v;

    if (s == NULL || *s == '\0')
        return dflt;
    v = strtol(s, &end, 0);
    cr_assert(*end == '\0' && v >= 0, "%s=%s is not a count", name, s);
    return v;
}

Test(soak, random_operations, .timeout = 900)
{
    const char *s = getenv("TT_SOAK_SEED");
    soak_arg_t arg;
    coll_opts_t opts = {.nranks = NRANKS, .deadline_s = 840,
                        .init = COLL_INIT_AUTO, .arg = &arg};
    coll_result_t *res = malloc(sizeof(*res));
    struct timespec ts;
    double t0;

    cr_assert_not_null(res);
    clock_gettime(CLOCK_REALTIME, &ts);
    arg.seed = s != NULL && *s != '\0'
                   ? strtoull(s, NULL, 0)
                   : (uint64_t)ts.tv_nsec * 2654435761u ^ (uint64_t)ts.tv_sec;
    if (arg.seed == 0)
        arg.seed = 1;
    arg.nops = env_long("TT_SOAK_OPS", 10000);
    cr_log_info("soak: %ld operations on %d ranks, TT_SOAK_SEED=%" PRIu64,
                arg.nops, NRANKS, arg.seed);
    fprintf(stderr, "soak: %ld operations on %d ranks, TT_SOAK_SEED=%"
            PRIu64 "\n", arg.nops, NRANKS, arg.seed);
    t0 = coll_now();
    coll_run(&opts, soak_body, res);
    fprintf(stderr, "soak: seed %" PRIu64 " took %.1f s\n", arg.seed,
            coll_now() - t0);
    coll_expect_pass(res);
    free(res);
}
