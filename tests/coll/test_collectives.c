/*
 * Conformance of every collective through the public API only.
 *
 * Each test forks 1, 2, 3, 4 or 8 ranks (harness.h) and runs one
 * collective over a matrix of counts (0, 1, odd, not divisible by the rank
 * count, larger than the eager and small-message limits), all ten dtypes,
 * every reduction op (the bitwise ones on the integer types), in place
 * and out of place, and roots 0 and last.
 * Results are compared bit for bit with a reference each rank computes
 * from the deterministic inputs of values.h.  A few 64 MB float32 runs
 * exercise pipelining.  Buffers start filled with a junk pattern so a
 * skipped write shows, and buffers the API says are ignored must come
 * back untouched.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "harness.h"
#include "values.h"

#define JUNK 0xa5

typedef enum {
    K_ALLGATHER,
    K_REDUCE_SCATTER,
    K_ALLREDUCE,
    K_BROADCAST,
    K_REDUCE,
    K_ALLTOALL,
    K_SENDRECV,
    K_SENDRECV_BLOCKING,
    K_BARRIER
} kind_t;

static const char *const kind_names[] = {
    "allgather", "reduce_scatter", "allreduce", "broadcast", "reduce",
    "alltoall", "sendrecv", "sendrecv_blocking", "barrier",
};

typedef struct {
    kind_t kind;
    /** Elements of the one float32 sum run; 0 runs the full matrix. */
    size_t big_count;
} case_t;

/* One operation of the matrix. */
typedef struct {
    kind_t kind;
    size_t count;
    tacl_dtype_t dt;
    tacl_op_t op;
    int inplace;
    int root;
} op_t;

static int is_reduction(kind_t k)
{
    return k == K_REDUCE_SCATTER || k == K_ALLREDUCE || k == K_REDUCE;
}

static int has_root(kind_t k)
{
    return k == K_BROADCAST || k == K_REDUCE;
}

static int op_fail(coll_ctx_t *ctx, const op_t *o, const char *what)
{
    return coll_fail(ctx, "%s count=%zu dtype=%s op=%s inplace=%d root=%d: "
                     "%s", kind_names[o->kind], o->count,
                     tacl_dtype_name(o->dt), tacl_op_name(o->op),
                     o->inplace, o->root, what);
}

/* Compare count elements of got with expect, reporting the first diff. */
static int check_block(coll_ctx_t *ctx, const op_t *o, const char *where,
                       const void *got, const void *expect, size_t count,
                       size_t base)
{
    long bad = val_first_diff(o->dt, got, expect, count);
    char what[256];

    if (bad < 0)
        return 0;
    snprintf(what, sizeof(what), "%s element %ld: got %g, expected %g",
             where, (long)base + bad, val_load(o->dt, got, (size_t)bad),
             val_load(o->dt, expect, (size_t)bad));
    return op_fail(ctx, o, what);
}

static int status_fail(coll_ctx_t *ctx, const op_t *o, tacl_status_t st)
{
    char what[COLL_MSG_LEN / 2];

    snprintf(what, sizeof(what), "returned %s (%d): %s",
             tacl_status_string(st), (int)st,
             tacl_comm_last_error(ctx->comm));
    return op_fail(ctx, o, what);
}

/* Blocking send/recv ring: even ranks send first, odd ranks receive. */
static tacl_status_t ring_blocking(coll_ctx_t *ctx, const void *sb, void *rb,
                                   size_t count, tacl_dtype_t dt)
{
    int n = ctx->nranks, next = (ctx->rank + 1) % n;
    int prev = (ctx->rank + n - 1) % n;
    tacl_status_t st;

    if (ctx->rank % 2 == 0) {
        st = tacl_send(sb, count, dt, next, ctx->comm, NULL);
        if (st == TACL_OK)
            st = tacl_recv(rb, count, dt, prev, ctx->comm, NULL);
    } else {
        st = tacl_recv(rb, count, dt, prev, ctx->comm, NULL);
        if (st == TACL_OK)
            st = tacl_send(sb, count, dt, next, ctx->comm, NULL);
    }
    return st;
}

/* Non-blocking send/recv ring: post the receive, then the send. */
static tacl_status_t ring_nb(coll_ctx_t *ctx, const void *sb, void *rb,
                             size_t count, tacl_dtype_t dt)
{
    int n = ctx->nranks, next = (ctx->rank + 1) % n;
    int prev = (ctx->rank + n - 1) % n;
    tacl_request_t rreq = NULL, sreq = NULL;
    tacl_status_t st, st2;

    st = tacl_recv_nb(rb, count, dt, prev, ctx->comm, NULL, &rreq);
    if (st != TACL_OK)
        return st;
    st = tacl_send_nb(sb, count, dt, next, ctx->comm, NULL, &sreq);
    if (st != TACL_OK) {
        tacl_request_wait(rreq);
        tacl_request_free(rreq);
        return st;
    }
    st = tacl_request_wait(sreq);
    st2 = tacl_request_wait(rreq);
    tacl_request_free(sreq);
    tacl_request_free(rreq);
    return st != TACL_OK ? st : st2;
}

/*
 * The buffers of an operation: from malloc, or from tacl_mem_alloc when
 * the environment says TEST_MEM_ALLOC (the shm transport then maps them).
 */
static void *buf_alloc(size_t bytes)
{
    void *p = NULL;

    if (getenv("TEST_MEM_ALLOC") == NULL)
        return malloc(bytes);
    return tacl_mem_alloc(&p, bytes, TACL_MEM_HOST) == TACL_OK ? p : NULL;
}

static void buf_free(void *p)
{
    if (getenv("TEST_MEM_ALLOC") == NULL)
        free(p);
    else
        tacl_mem_free(p);
}

/*
 * Run one operation: fill the inputs, call, compare.  Buffer layout:
 * send holds the input, recv the output, expect the reference output.
 */
static int run_op(coll_ctx_t *ctx, const op_t *o)
{
    int n = ctx->nranks, r = ctx->rank;
    size_t es = val_size(o->dt), c = o->count;
    size_t send_elems = c, recv_elems = c;
    char *send, *recv, *expect, *sp, *rp;
    tacl_status_t st = TACL_OK;
    int rc = 0;

    if (o->kind == K_ALLGATHER || o->kind == K_ALLTOALL)
        recv_elems = (size_t)n * c;
    if (o->kind == K_REDUCE_SCATTER || o->kind == K_ALLTOALL)
        send_elems = (size_t)n * c;
    send = buf_alloc(send_elems * es + 1);
    recv = buf_alloc(recv_elems * es + 1);
    expect = malloc(recv_elems * es + 1);
    if (!send || !recv || !expect) {
        rc = op_fail(ctx, o, "out of memory");
        goto out_free;
    }
    memset(send, JUNK, send_elems * es);
    memset(recv, JUNK, recv_elems * es);
    memset(expect, JUNK, recv_elems * es);
    sp = send;
    rp = recv;

    switch (o->kind) {
    case K_ALLGATHER:
        for (int j = 0; j < n; j++)
            val_fill_move(o->dt, expect + (size_t)j * c * es, c, j, 0);
        if (o->inplace)
            sp = recv + (size_t)r * c * es;
        val_fill_move(o->dt, sp, c, r, 0);
        st = tacl_allgather(sp, rp, c, o->dt, ctx->comm, NULL);
        break;
    case K_REDUCE_SCATTER:
        val_fill_red(o->dt, o->op, send, (size_t)n * c, r, n, 0);
        val_fill_red_result(o->dt, o->op, expect, c, n, (size_t)r * c);
        if (o->inplace)
            rp = send + (size_t)r * c * es;
        st = tacl_reduce_scatter(sp, rp, c, o->dt, o->op, ctx->comm, NULL);
        break;
    case K_ALLREDUCE:
        val_fill_red_result(o->dt, o->op, expect, c, n, 0);
        if (o->inplace)
            sp = recv;
        val_fill_red(o->dt, o->op, sp, c, r, n, 0);
        st = tacl_allreduce(sp, rp, c, o->dt, o->op, ctx->comm, NULL);
        break;
    case K_BROADCAST:
        val_fill_move(o->dt, expect, c, o->root, 0);
        if (o->inplace)
            sp = recv;
        if (r == o->root)
            val_fill_move(o->dt, sp, c, o->root, 0);
        st = tacl_broadcast(sp, rp, c, o->dt, o->root, ctx->comm, NULL);
        break;
    case K_REDUCE:
        if (o->inplace)
            sp = recv;
        val_fill_red(o->dt, o->op, sp, c, r, n, 0);
        /* Off the root recvbuf is ignored: it must stay as it was. */
        if (r == o->root)
            val_fill_red_result(o->dt, o->op, expect, c, n, 0);
        else
            memcpy(expect, rp, c * es);
        st = tacl_reduce(sp, rp, c, o->dt, o->op, o->root, ctx->comm, NULL);
        break;
    case K_ALLTOALL:
        for (int j = 0; j < n; j++) {
            val_fill_move(o->dt, send + (size_t)j * c * es, c, r * n + j, 0);
            val_fill_move(o->dt, expect + (size_t)j * c * es, c, j * n + r,
                          0);
        }
        if (o->inplace) {
            memcpy(recv, send, (size_t)n * c * es);
            sp = recv;
        }
        st = tacl_alltoall(sp, rp, c, o->dt, ctx->comm, NULL);
        break;
    case K_SENDRECV:
    case K_SENDRECV_BLOCKING:
        val_fill_move(o->dt, send, c, r, 0);
        val_fill_move(o->dt, expect, c, (r + n - 1) % n, 0);
        if (o->kind == K_SENDRECV)
            st = ring_nb(ctx, send, recv, c, o->dt);
        else
            st = ring_blocking(ctx, send, recv, c, o->dt);
        break;
    case K_BARRIER:
        break;
    }
    if (st != TACL_OK) {
        rc = status_fail(ctx, o, st);
        goto out_free;
    }
    rc = check_block(ctx, o, "recvbuf", rp, expect, recv_elems, 0);
    if (rc == 0 && o->kind == K_REDUCE_SCATTER && !o->inplace) {
        /* The input must be left alone. */
        char *in = malloc((size_t)n * c * es + 1);

        if (in == NULL) {
            rc = op_fail(ctx, o, "out of memory");
            goto out_free;
        }
        val_fill_red(o->dt, o->op, in, (size_t)n * c, r, n, 0);
        rc = check_block(ctx, o, "sendbuf (input)", send, in, (size_t)n * c,
                         0);
        free(in);
    }

out_free:
    free(expect);
    buf_free(recv);
    buf_free(send);
    return rc;
}

/* The barrier: nobody leaves round k before everybody arrived in it. */
static int run_barrier(coll_ctx_t *ctx)
{
    int *arrived = (int *)ctx->scratch;
    const int rounds = 6;

    for (int k = 0; k < rounds; k++) {
        int seen;
        tacl_status_t st;

        /* One rank per round arrives late, so the others must wait. */
        if (k % ctx->nranks == ctx->rank)
            coll_sleep_ms(30);
        __atomic_fetch_add(&arrived[k], 1, __ATOMIC_SEQ_CST);
        st = tacl_barrier(ctx->comm, NULL);
        if (st != TACL_OK)
            return coll_fail(ctx, "barrier round %d returned %s: %s", k,
                             tacl_status_string(st),
                             tacl_comm_last_error(ctx->comm));
        seen = __atomic_load_n(&arrived[k], __ATOMIC_SEQ_CST);
        if (seen != ctx->nranks)
            return coll_fail(ctx, "left barrier round %d when only %d of %d "
                             "ranks had arrived", k, seen, ctx->nranks);
    }
    return 0;
}

static int body_matrix(coll_ctx_t *ctx)
{
    const case_t *cs = ctx->arg;
    int n = ctx->nranks;
    const size_t counts[] = {0, 1, 1001, (size_t)7 * (size_t)n * 1000 + 1};
    int roots[2] = {0, n - 1};
    int nroots = has_root(cs->kind) ? (n > 1 ? 2 : 1) : 1;
    int nops = is_reduction(cs->kind) ? TACL_NUM_OPS : 1;
    int ninplace = cs->kind == K_SENDRECV ||
                   cs->kind == K_SENDRECV_BLOCKING ? 1 : 2;

    if (cs->kind == K_BARRIER)
        return run_barrier(ctx);
    if (cs->big_count) {
        for (int inplace = 0; inplace < 2; inplace++) {
            op_t o = {cs->kind, cs->big_count, TACL_FLOAT32, TACL_SUM,
                      inplace, 0};
            int rc = run_op(ctx, &o);

            if (rc)
                return rc;
        }
        return 0;
    }
    for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++)
        for (int dt = 0; dt < TACL_NUM_DTYPES; dt++)
            for (int op = 0; op < nops; op++)
                for (int ip = 0; ip < ninplace; ip++)
                    for (int ri = 0; ri < nroots; ri++) {
                        op_t o = {cs->kind, counts[ci], (tacl_dtype_t)dt,
                                  (tacl_op_t)op, ip, roots[ri]};
                        int rc;

                        /* Bitwise ops take integers (test_errors checks
                         * that floats are refused). */
                        if (nops > 1 && dt >= TACL_FLOAT16 &&
                            op >= TACL_BAND)
                            continue;
                        rc = run_op(ctx, &o);

                        if (rc)
                            return rc;
                    }
    return 0;
}

static void run_case_env(kind_t kind, int nranks, size_t big_count,
                         const char *const *env)
{
    case_t cs = {kind, big_count};

    coll_run_expect_pass(nranks, body_matrix, &cs, env);
}

static void run_case(kind_t kind, int nranks, size_t big_count)
{
    run_case_env(kind, nranks, big_count, NULL);
}

#define MATRIX_TESTS(suite, kind)                                            \
    Test(suite, ranks1, .timeout = 120) { run_case(kind, 1, 0); }           \
    Test(suite, ranks2, .timeout = 120) { run_case(kind, 2, 0); }           \
    Test(suite, ranks3, .timeout = 120) { run_case(kind, 3, 0); }           \
    Test(suite, ranks4, .timeout = 120) { run_case(kind, 4, 0); }           \
    Test(suite, ranks8, .timeout = 180) { run_case(kind, 8, 0); }

MATRIX_TESTS(allgather, K_ALLGATHER)
MATRIX_TESTS(reduce_scatter, K_REDUCE_SCATTER)
MATRIX_TESTS(allreduce, K_ALLREDUCE)
MATRIX_TESTS(broadcast, K_BROADCAST)
MATRIX_TESTS(reduce, K_REDUCE)
MATRIX_TESTS(alltoall, K_ALLTOALL)
MATRIX_TESTS(sendrecv, K_SENDRECV)
MATRIX_TESTS(barrier, K_BARRIER)

Test(sendrecv_blocking, ranks2, .timeout = 120)
{
    run_case(K_SENDRECV_BLOCKING, 2, 0);
}

Test(sendrecv_blocking, ranks3, .timeout = 120)
{
    run_case(K_SENDRECV_BLOCKING, 3, 0);
}

Test(sendrecv_blocking, ranks8, .timeout = 180)
{
    run_case(K_SENDRECV_BLOCKING, 8, 0);
}

/* 64 MB of float32: the whole recvbuf (allgather), sendbuf (reduce-
 * scatter) or buffer (allreduce) is 64 MB. */
#define BIG_ELEMS ((size_t)16 * 1024 * 1024)

Test(big, allgather_ranks2, .timeout = 180)
{
    run_case(K_ALLGATHER, 2, BIG_ELEMS / 2);
}

Test(big, allgather_ranks4, .timeout = 180)
{
    run_case(K_ALLGATHER, 4, BIG_ELEMS / 4);
}

Test(big, reduce_scatter_ranks2, .timeout = 180)
{
    run_case(K_REDUCE_SCATTER, 2, BIG_ELEMS / 2);
}

Test(big, reduce_scatter_ranks4, .timeout = 180)
{
    run_case(K_REDUCE_SCATTER, 4, BIG_ELEMS / 4);
}

Test(big, allreduce_ranks2, .timeout = 180)
{
    run_case(K_ALLREDUCE, 2, BIG_ELEMS);
}

Test(big, allreduce_ranks4, .timeout = 180)
{
    run_case(K_ALLREDUCE, 4, BIG_ELEMS);
}

Test(big, allreduce_ranks8, .timeout = 240)
{
    run_case(K_ALLREDUCE, 8, BIG_ELEMS);
}

/*
 * Every algorithm of the registry, forced through TACL_ALGO, on a power
 * of two and on an odd rank count (an algorithm that cannot run an
 * operation falls back to another, so the results must be right anyway);
 * the last arguments are the environment.
 */
#define FORCED_TESTS(suite, kind, ...)                                       \
    Test(suite, ranks3, .timeout = 120)                                      \
    {                                                                        \
        static const char *const env[] = {__VA_ARGS__, NULL};                \
        run_case_env(kind, 3, 0, env);                                       \
    }                                                                        \
    Test(suite, ranks4, .timeout = 120)                                      \
    {                                                                        \
        static const char *const env[] = {__VA_ARGS__, NULL};                \
        run_case_env(kind, 4, 0, env);                                       \
    }

FORCED_TESTS(allgather_ring, K_ALLGATHER, "TACL_ALGO=allgather=ring")
FORCED_TESTS(allgather_bruck, K_ALLGATHER, "TACL_ALGO=allgather=bruck")
FORCED_TESTS(allgather_rd, K_ALLGATHER, "TACL_ALGO=allgather=rd")
/* Every local copy streamed past the cache, whatever its size. */
FORCED_TESTS(allgather_direct_streamed, K_ALLGATHER,
             "TACL_ALGO=allgather=direct", "TACL_STREAM_MIN=1")
FORCED_TESTS(reduce_scatter_ring, K_REDUCE_SCATTER,
             "TACL_ALGO=reducescatter=ring")
FORCED_TESTS(reduce_scatter_rd, K_REDUCE_SCATTER,
             "TACL_ALGO=reducescatter=rd")
FORCED_TESTS(allreduce_ring, K_ALLREDUCE, "TACL_ALGO=allreduce=ring")
FORCED_TESTS(allreduce_rd, K_ALLREDUCE, "TACL_ALGO=allreduce=rd")
/* Staged through shared scratch, every copy streamed. */
FORCED_TESTS(allreduce_direct_streamed, K_ALLREDUCE,
             "TACL_ALGO=allreduce=direct", "TACL_STREAM_MIN=1")

/*
 * Buffers from tacl_mem_alloc: every message above the eager limit goes
 * from a segment the receiver maps (a new pair of segments per operation,
 * so mappings come, are evicted and are dropped once freed).  The
 * results must be right, and the ranks' ALLOC logs must show that
 * segments were mapped, or, with TACL_SHM_MAP=0, that none was.
 */
/* Lines saying a segment was mapped in dir's logs, which go; and how
 * many logs there were. */
static int count_mapped(const char *dir, int *nlogs_p)
{
    char path[512], line[512];
    DIR *d = opendir(dir);
    struct dirent *de;
    int found = 0;

    *nlogs_p = 0;
    if (d == NULL)
        return 0;
    while ((de = readdir(d)) != NULL) {
        FILE *file;

        if (strncmp(de->d_name, "log.", 4) != 0)
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
        file = fopen(path, "r");
        if (file == NULL)
            continue;
        ++*nlogs_p;
        while (fgets(line, sizeof(line), file))
            found += strstr(line, "mapped segment") != NULL;
        fclose(file);
        remove(path);
    }
    closedir(d);
    return found;
}

static int run_mapped(kind_t kind, int nranks, int map, int mem,
                      const char *env1, const char *env2)
{
    const char *tmp = getenv("TMPDIR");
    char dir[256], file_env[320];
    const char *env[8];
    case_t cs = {kind, 0};
    int k = 0, nlogs, found;

    snprintf(dir, sizeof(dir), "%s/tacl-mapped-XXXXXX", tmp ? tmp : "/tmp");
    cr_assert_not_null(mkdtemp(dir));
    snprintf(file_env, sizeof(file_env), "TACL_DEBUG_FILE=%s/log.%%p", dir);
    if (mem)
        env[k++] = "TEST_MEM_ALLOC=1";
    env[k++] = "TACL_DEBUG=INFO";
    env[k++] = "TACL_DEBUG_SUBSYS=ALLOC";
    env[k++] = file_env;
    env[k++] = map ? "TACL_SHM_MAP=1" : "TACL_SHM_MAP=0";
    if (env1)
        env[k++] = env1;
    if (env2)
        env[k++] = env2;
    env[k] = NULL;
    coll_run_expect_pass(nranks, body_matrix, &cs, env);
    found = count_mapped(dir, &nlogs);
    rmdir(dir);
    cr_assert_eq(nlogs, nranks, "%d logs for %d ranks", nlogs, nranks);
    return found;
}

#define MAPPED_TEST(name, kind, nranks, env1, env2)                          \
    Test(mapped, name, .timeout = 180)                                       \
    {                                                                        \
        int found = run_mapped(kind, nranks, 1, 1, env1, env2);              \
        cr_assert_gt(found, 0, "no rank mapped a peer's segment");          \
    }

MAPPED_TEST(allgather_direct_streamed_ranks3, K_ALLGATHER, 3,
            "TACL_ALGO=allgather=direct", "TACL_STREAM_MIN=1")
MAPPED_TEST(allgather_ranks4, K_ALLGATHER, 4, NULL, NULL)
MAPPED_TEST(reduce_scatter_ranks3, K_REDUCE_SCATTER, 3, NULL, NULL)
MAPPED_TEST(allreduce_ranks4, K_ALLREDUCE, 4, NULL, NULL)
MAPPED_TEST(broadcast_ranks3, K_BROADCAST, 3, NULL, NULL)
MAPPED_TEST(alltoall_ranks4, K_ALLTOALL, 4, NULL, NULL)
MAPPED_TEST(sendrecv_ranks2, K_SENDRECV, 2, NULL, NULL)

Test(mapped, off_maps_nothing, .timeout = 180)
{
    cr_assert_eq(run_mapped(K_ALLGATHER, 3, 0, 1, NULL, NULL), 0);
}

/* Buffers from malloc: a streamed direct all-gather stages each block in
 * shared scratch, which the peers map; with TACL_SHM_MAP=0 it does not. */
Test(mapped, staged_allgather_ranks4, .timeout = 180)
{
    cr_assert_gt(run_mapped(K_ALLGATHER, 4, 1, 0,
                            "TACL_ALGO=allgather=direct",
                            "TACL_STREAM_MIN=1"), 0,
                 "no rank mapped a peer's staged block");
    cr_assert_eq(run_mapped(K_ALLGATHER, 4, 0, 0,
                            "TACL_ALGO=allgather=direct",
                            "TACL_STREAM_MIN=1"), 0);
}

Test(mapped, staged_allreduce_ranks3, .timeout = 180)
{
    cr_assert_gt(run_mapped(K_ALLREDUCE, 3, 1, 0,
                            "TACL_ALGO=allreduce=direct",
                            "TACL_STREAM_MIN=1"), 0,
                 "no rank mapped a peer's staged block");
}
