/*
 * Conformance of the API around the collectives: non-blocking forms and
 * their overlap, group calls (mixed operations, send/recv orders that
 * deadlock without a group, nesting, the group request), communicator
 * split, rank and node queries, long sequences of small operations, and
 * the byte counters with a forced ring all-gather.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "harness.h"
#include "values.h"

#define JUNK 0xa5

/* Compare and report the first differing element with a label. */
static int expect_equal(coll_ctx_t *ctx, const char *what, tacl_dtype_t dt,
                        const void *got, const void *expect, size_t count)
{
    long bad = val_first_diff(dt, got, expect, count);

    if (bad < 0)
        return 0;
    return coll_fail(ctx, "%s (%s, %zu elements): element %ld got %g, "
                     "expected %g", what, tacl_dtype_name(dt), count, bad,
                     val_load(dt, got, (size_t)bad),
                     val_load(dt, expect, (size_t)bad));
}

/* A buffer of count elements filled with junk, freed by the caller. */
static void *junk_alloc(size_t bytes)
{
    void *p = malloc(bytes + 1);

    if (p)
        memset(p, JUNK, bytes);
    return p;
}

/* Buffers of one allreduce (int32 sum) and one allgather (float64). */
typedef struct {
    size_t ar_count, ag_count;
    int32_t *ar_send, *ar_recv, *ar_expect;
    double *ag_send, *ag_recv, *ag_expect;
} pair_t;

static int pair_init(coll_ctx_t *ctx, pair_t *p, size_t ar, size_t ag)
{
    int n = ctx->nranks, r = ctx->rank;

    p->ar_count = ar;
    p->ag_count = ag;
    p->ar_send = junk_alloc(ar * 4);
    p->ar_recv = junk_alloc(ar * 4);
    p->ar_expect = junk_alloc(ar * 4);
    p->ag_send = junk_alloc(ag * 8);
    p->ag_recv = junk_alloc((size_t)n * ag * 8);
    p->ag_expect = junk_alloc((size_t)n * ag * 8);
    if (!p->ar_send || !p->ar_recv || !p->ar_expect || !p->ag_send ||
        !p->ag_recv || !p->ag_expect)
        return coll_fail(ctx, "out of memory");
    val_fill_red(TACL_INT32, TACL_SUM, p->ar_send, ar, r, n, 0);
    val_fill_red_result(TACL_INT32, TACL_SUM, p->ar_expect, ar, n, 0);
    val_fill_move(TACL_FLOAT64, p->ag_send, ag, r, 0);
    for (int j = 0; j < n; j++)
        val_fill_move(TACL_FLOAT64, p->ag_expect + (size_t)j * ag, ag, j, 0);
    return 0;
}

static int pair_check(coll_ctx_t *ctx, const pair_t *p, const char *label)
{
    char what[128];

    snprintf(what, sizeof(what), "%s allreduce", label);
    if (expect_equal(ctx, what, TACL_INT32, p->ar_recv, p->ar_expect,
                     p->ar_count))
        return 1;
    snprintf(what, sizeof(what), "%s allgather", label);
    return expect_equal(ctx, what, TACL_FLOAT64, p->ag_recv, p->ag_expect,
                        (size_t)ctx->nranks * p->ag_count);
}

static void pair_free(pair_t *p)
{
    free(p->ar_send);
    free(p->ar_recv);
    free(p->ar_expect);
    free(p->ag_send);
    free(p->ag_recv);
    free(p->ag_expect);
}

/* Two operations in flight at once, waited in reverse order, then the
 * same with completion polled by tacl_request_test(). */
static int body_nb_overlap(coll_ctx_t *ctx)
{
    pair_t p = {0};
    tacl_request_t a = NULL, b = NULL;
    int rc = pair_init(ctx, &p, 50001, 30001);

    if (rc)
        goto out;
    COLL_CHECK_OK(ctx, tacl_allreduce_nb(p.ar_send, p.ar_recv, p.ar_count,
                                         TACL_INT32, TACL_SUM, ctx->comm,
                                         NULL, &a));
    COLL_CHECK_OK(ctx, tacl_allgather_nb(p.ag_send, p.ag_recv, p.ag_count,
                                         TACL_FLOAT64, ctx->comm, NULL, &b));
    COLL_CHECK(ctx, a != NULL && b != NULL, "a _nb call gave no request");
    COLL_CHECK_OK(ctx, tacl_request_wait(b));
    COLL_CHECK_OK(ctx, tacl_request_wait(a));
    rc = pair_check(ctx, &p, "wait");
    if (rc)
        goto out;
    {
        int done = 0;

        COLL_CHECK_OK(ctx, tacl_request_test(a, &done));
        COLL_CHECK(ctx, done == 1, "test on a completed request: done=%d",
                   done);
    }
    COLL_CHECK_OK(ctx, tacl_request_free(a));
    COLL_CHECK_OK(ctx, tacl_request_free(b));

    memset(p.ar_recv, JUNK, p.ar_count * 4);
    memset(p.ag_recv, JUNK, (size_t)ctx->nranks * p.ag_count * 8);
    COLL_CHECK_OK(ctx, tacl_allgather_nb(p.ag_send, p.ag_recv, p.ag_count,
                                         TACL_FLOAT64, ctx->comm, NULL, &b));
    COLL_CHECK_OK(ctx, tacl_allreduce_nb(p.ar_send, p.ar_recv, p.ar_count,
                                         TACL_INT32, TACL_SUM, ctx->comm,
                                         NULL, &a));
    {
        int done_a = 0, done_b = 0;
        double deadline = coll_now() + 30;

        while (!(done_a && done_b) && coll_now() < deadline) {
            if (!done_a)
                COLL_CHECK_OK(ctx, tacl_request_test(a, &done_a));
            if (!done_b)
                COLL_CHECK_OK(ctx, tacl_request_test(b, &done_b));
        }
        COLL_CHECK(ctx, done_a && done_b,
                   "requests not done after 30 s of tests (a=%d b=%d)",
                   done_a, done_b);
    }
    rc = pair_check(ctx, &p, "test");
    COLL_CHECK_OK(ctx, tacl_request_free(a));
    COLL_CHECK_OK(ctx, tacl_request_free(b));
out:
    pair_free(&p);
    return rc;
}

/*
 * One group: an allreduce, an allgather and, to every rank (itself
 * included), a send posted before the matching receive.  Without the
 * group the sends (larger than any eager limit) would block each other.
 * The group is nested once to check only the outer end runs it.
 */
static int body_group_mixed(coll_ctx_t *ctx)
{
    const size_t pc = 100003; /* int32 elements per peer, about 400 KB */
    int n = ctx->nranks, r = ctx->rank;
    int32_t *sendb = junk_alloc((size_t)n * pc * 4);
    int32_t *recvb = junk_alloc((size_t)n * pc * 4);
    int32_t *expect = junk_alloc((size_t)n * pc * 4);
    pair_t p = {0};
    int rc = pair_init(ctx, &p, 40001, 3001);

    if (rc)
        goto out;
    if (!sendb || !recvb || !expect) {
        rc = coll_fail(ctx, "out of memory");
        goto out;
    }
    for (int j = 0; j < n; j++) {
        val_fill_move(TACL_INT32, sendb + (size_t)j * pc, pc, r * n + j, 0);
        val_fill_move(TACL_INT32, expect + (size_t)j * pc, pc, j * n + r, 0);
    }
    COLL_CHECK_OK(ctx, tacl_group_start());
    COLL_CHECK_OK(ctx, tacl_allreduce(p.ar_send, p.ar_recv, p.ar_count,
                                      TACL_INT32, TACL_SUM, ctx->comm, NULL));
    COLL_CHECK_OK(ctx, tacl_group_start());
    COLL_CHECK_OK(ctx, tacl_allgather(p.ag_send, p.ag_recv, p.ag_count,
                                      TACL_FLOAT64, ctx->comm, NULL));
    COLL_CHECK_OK(ctx, tacl_group_end());
    for (int j = 0; j < n; j++)
        COLL_CHECK_OK(ctx, tacl_send(sendb + (size_t)j * pc, pc, TACL_INT32,
                                     j, ctx->comm, NULL));
    for (int j = 0; j < n; j++)
        COLL_CHECK_OK(ctx, tacl_recv(recvb + (size_t)j * pc, pc, TACL_INT32,
                                     j, ctx->comm, NULL));
    COLL_CHECK_OK(ctx, tacl_group_end());
    rc = pair_check(ctx, &p, "group");
    if (rc == 0)
        rc = expect_equal(ctx, "group send/recv", TACL_INT32, recvb, expect,
                          (size_t)n * pc);
out:
    pair_free(&p);
    free(sendb);
    free(recvb);
    free(expect);
    return rc;
}

/* _nb calls inside a group give NULL requests; the group's covers them. */
static int body_group_nb(coll_ctx_t *ctx)
{
    int n = ctx->nranks, root = n - 1;
    const size_t bc = 20011;
    float *bsend = junk_alloc(bc * 4), *brecv = junk_alloc(bc * 4);
    float *bexpect = junk_alloc(bc * 4);
    tacl_request_t a = (tacl_request_t)&a, b = (tacl_request_t)&b;
    tacl_request_t g = NULL;
    pair_t p = {0};
    int rc = pair_init(ctx, &p, 7001, 501);

    if (rc)
        goto out;
    if (!bsend || !brecv || !bexpect) {
        rc = coll_fail(ctx, "out of memory");
        goto out;
    }
    val_fill_move(TACL_FLOAT32, bexpect, bc, root, 0);
    if (ctx->rank == root)
        memcpy(bsend, bexpect, bc * 4);
    COLL_CHECK_OK(ctx, tacl_group_start());
    COLL_CHECK_OK(ctx, tacl_allreduce_nb(p.ar_send, p.ar_recv, p.ar_count,
                                         TACL_INT32, TACL_SUM, ctx->comm,
                                         NULL, &a));
    COLL_CHECK_OK(ctx, tacl_broadcast_nb(bsend, brecv, bc, TACL_FLOAT32,
                                         root, ctx->comm, NULL, &b));
    COLL_CHECK_OK(ctx, tacl_allgather(p.ag_send, p.ag_recv, p.ag_count,
                                      TACL_FLOAT64, ctx->comm, NULL));
    COLL_CHECK_OK(ctx, tacl_group_end_nb(&g));
    COLL_CHECK(ctx, a == NULL && b == NULL,
               "_nb inside a group must give NULL requests (%p %p)",
               (void *)a, (void *)b);
    COLL_CHECK(ctx, g != NULL, "tacl_group_end_nb gave no request");
    COLL_CHECK_OK(ctx, tacl_request_wait(g));
    COLL_CHECK_OK(ctx, tacl_request_free(g));
    rc = pair_check(ctx, &p, "group_nb");
    if (rc == 0)
        rc = expect_equal(ctx, "group_nb broadcast", TACL_FLOAT32, brecv,
                          bexpect, bc);
out:
    pair_free(&p);
    free(bsend);
    free(brecv);
    free(bexpect);
    return rc;
}

/*
 * Every collective's _nb form in flight at once (one dtype each), waited
 * in reverse order of posting.
 */
#define NB_ALL 9

static int body_nb_all(coll_ctx_t *ctx)
{
    const size_t c = 5003;
    int n = ctx->nranks, r = ctx->rank, last = ctx->nranks - 1;
    int next = (r + 1) % n, prev = (r + n - 1) % n;
    tacl_request_t req[NB_ALL] = {0};
    char *in[NB_ALL], *out[NB_ALL], *want[NB_ALL];
    const tacl_dtype_t dt[NB_ALL] = {
        TACL_INT32, TACL_FLOAT32, TACL_INT64, TACL_UINT8, TACL_BFLOAT16,
        TACL_FLOAT64, TACL_FLOAT16, TACL_FLOAT16, TACL_INT8,
    };
    static const char *const names[NB_ALL] = {
        "allgather_nb", "reduce_scatter_nb", "allreduce_nb", "broadcast_nb",
        "reduce_nb", "alltoall_nb", "send_nb", "recv_nb", "barrier_nb",
    };
    size_t out_elems[NB_ALL];
    int rc = 0;

    for (int k = 0; k < NB_ALL; k++) {
        size_t es = val_size(dt[k]), big = (size_t)n * c;

        in[k] = junk_alloc(big * es);
        out[k] = junk_alloc(big * es);
        want[k] = junk_alloc(big * es);
        if (!in[k] || !out[k] || !want[k])
            return coll_fail(ctx, "out of memory");
        out_elems[k] = c;
    }
    /* Inputs and references. */
    val_fill_move(dt[0], in[0], c, r, 0);
    for (int j = 0; j < n; j++)
        val_fill_move(dt[0], want[0] + (size_t)j * c * 4, c, j, 0);
    out_elems[0] = (size_t)n * c;
    val_fill_red(dt[1], TACL_SUM, in[1], (size_t)n * c, r, n, 0);
    val_fill_red_result(dt[1], TACL_SUM, want[1], c, n, (size_t)r * c);
    val_fill_red(dt[2], TACL_MAX, in[2], c, r, n, 0);
    val_fill_red_result(dt[2], TACL_MAX, want[2], c, n, 0);
    val_fill_move(dt[3], want[3], c, last, 0);
    if (r == last)
        memcpy(in[3], want[3], c);
    val_fill_red(dt[4], TACL_SUM, in[4], c, r, n, 0);
    if (r == 0)
        val_fill_red_result(dt[4], TACL_SUM, want[4], c, n, 0);
    else
        memcpy(want[4], out[4], c * 2);
    for (int j = 0; j < n; j++) {
        val_fill_move(dt[5], in[5] + (size_t)j * c * 8, c, r * n + j, 0);
        val_fill_move(dt[5], want[5] + (size_t)j * c * 8, c, j * n + r, 0);
    }
    out_elems[5] = (size_t)n * c;
    val_fill_move(dt[6], in[6], c, r, 0);
    memcpy(want[6], out[6], c * 2);     /* a send writes nothing */
    val_fill_move(dt[7], want[7], c, prev, 0);
    out_elems[8] = 0;

    COLL_CHECK_OK(ctx, tacl_allgather_nb(in[0], out[0], c, dt[0], ctx->comm,
                                         NULL, &req[0]));
    COLL_CHECK_OK(ctx, tacl_reduce_scatter_nb(in[1], out[1], c, dt[1],
                                              TACL_SUM, ctx->comm, NULL,
                                              &req[1]));
    COLL_CHECK_OK(ctx, tacl_allreduce_nb(in[2], out[2], c, dt[2], TACL_MAX,
                                         ctx->comm, NULL, &req[2]));
    COLL_CHECK_OK(ctx, tacl_broadcast_nb(in[3], out[3], c, dt[3], last,
                                         ctx->comm, NULL, &req[3]));
    COLL_CHECK_OK(ctx, tacl_reduce_nb(in[4], out[4], c, dt[4], TACL_SUM, 0,
                                      ctx->comm, NULL, &req[4]));
    COLL_CHECK_OK(ctx, tacl_alltoall_nb(in[5], out[5], c, dt[5], ctx->comm,
                                        NULL, &req[5]));
    COLL_CHECK_OK(ctx, tacl_send_nb(in[6], c, dt[6], next, ctx->comm, NULL,
                                    &req[6]));
    COLL_CHECK_OK(ctx, tacl_recv_nb(out[7], c, dt[7], prev, ctx->comm, NULL,
                                    &req[7]));
    COLL_CHECK_OK(ctx, tacl_barrier_nb(ctx->comm, NULL, &req[8]));
    for (int k = NB_ALL - 1; k >= 0; k--) {
        tacl_status_t st;

        COLL_CHECK(ctx, req[k] != NULL, "%s gave no request", names[k]);
        st = tacl_request_wait(req[k]);
        COLL_CHECK(ctx, st == TACL_OK, "waiting for %s: %s: %s", names[k],
                   tacl_status_string(st), tacl_comm_last_error(ctx->comm));
        COLL_CHECK_OK(ctx, tacl_request_free(req[k]));
    }
    for (int k = 0; k < NB_ALL && rc == 0; k++)
        rc = expect_equal(ctx, names[k], dt[k], out[k], want[k],
                          out_elems[k]);
    for (int k = 0; k < NB_ALL; k++) {
        free(in[k]);
        free(out[k]);
        free(want[k]);
    }
    return rc;
}

/* Many small operations back to back, roots rotating: matching order. */
static int body_many_small(coll_ctx_t *ctx)
{
    int n = ctx->nranks, r = ctx->rank;

    for (int k = 0; k < 300; k++) {
        int64_t v = r + k, sum = 0, b = (r == k % n) ? 1000 + k : -1;

        for (int j = 0; j < n; j++)
            sum += j + k;
        COLL_CHECK_OK(ctx, tacl_allreduce(&v, &v, 1, TACL_INT64, TACL_SUM,
                                          ctx->comm, NULL));
        COLL_CHECK(ctx, v == sum, "op %d: allreduce gave %lld, expected %lld",
                   k, (long long)v, (long long)sum);
        COLL_CHECK_OK(ctx, tacl_broadcast(&b, &b, 1, TACL_INT64, k % n,
                                          ctx->comm, NULL));
        COLL_CHECK(ctx, b == 1000 + k, "op %d: broadcast from %d gave %lld",
                   k, k % n, (long long)b);
    }
    return 0;
}

/* Check one communicator's rank and size and that a collective works. */
static int check_sub(coll_ctx_t *ctx, tacl_comm_t sub, int want_rank,
                     int want_size, const int *members)
{
    int rank = -1, size = -1;
    int32_t mine = ctx->rank, got[COLL_MAX_RANKS], sum = 0, total = 0;

    COLL_CHECK_OK(ctx, tacl_comm_rank(sub, &rank));
    COLL_CHECK_OK(ctx, tacl_comm_size(sub, &size));
    COLL_CHECK(ctx, rank == want_rank && size == want_size,
               "split gave rank %d of %d, expected %d of %d", rank, size,
               want_rank, want_size);
    COLL_CHECK_OK(ctx, tacl_allgather(&mine, got, 1, TACL_INT32, sub, NULL));
    for (int i = 0; i < size; i++) {
        COLL_CHECK(ctx, got[i] == members[i],
                   "split comm rank %d is old rank %d, expected %d", i,
                   got[i], members[i]);
        total += members[i];
    }
    COLL_CHECK_OK(ctx, tacl_allreduce(&mine, &sum, 1, TACL_INT32, TACL_SUM,
                                      sub, NULL));
    COLL_CHECK(ctx, sum == total, "allreduce on split comm gave %d, "
               "expected %d", sum, total);
    return 0;
}

/*
 * Split by parity with keys that reverse the order, then with rank 0
 * left out; use parent and children alternately.
 */
static int body_split(coll_ctx_t *ctx)
{
    int n = ctx->nranks, r = ctx->rank, members[COLL_MAX_RANKS];
    int m = 0, want = -1, rc;
    tacl_comm_t half = NULL, rest = (tacl_comm_t)&rest;
    int32_t one = 1, all = 0;

    COLL_CHECK_OK(ctx, tacl_comm_split(ctx->comm, r % 2, -r, &half));
    COLL_CHECK(ctx, half != NULL, "split with a color gave NULL");
    /* Members of my color in decreasing old rank. */
    for (int j = n - 1; j >= 0; j--)
        if (j % 2 == r % 2) {
            if (j == r)
                want = m;
            members[m++] = j;
        }
    COLL_CHECK_OK(ctx, tacl_allreduce(&one, &all, 1, TACL_INT32, TACL_SUM,
                                      ctx->comm, NULL));
    COLL_CHECK(ctx, all == n, "parent allreduce gave %d", all);
    rc = check_sub(ctx, half, want, m, members);
    if (rc)
        return rc;

    COLL_CHECK_OK(ctx, tacl_comm_split(ctx->comm, r == 0 ?
                                       TACL_SPLIT_NOCOLOR : 7, 0, &rest));
    if (r == 0) {
        COLL_CHECK(ctx, rest == NULL, "TACL_SPLIT_NOCOLOR gave a comm");
    } else {
        for (int j = 1; j < n; j++)
            members[j - 1] = j;
        COLL_CHECK(ctx, rest != NULL, "split with color 7 gave NULL");
        rc = check_sub(ctx, rest, r - 1, n - 1, members);
        if (rc)
            return rc;
        COLL_CHECK_OK(ctx, tacl_comm_destroy(rest));
    }
    all = 0;
    COLL_CHECK_OK(ctx, tacl_allreduce(&one, &all, 1, TACL_INT32, TACL_SUM,
                                      ctx->comm, NULL));
    COLL_CHECK(ctx, all == n, "parent allreduce after split gave %d", all);
    COLL_CHECK_OK(ctx, tacl_comm_destroy(half));
    return 0;
}

/* Every rank runs on this machine: one node, local rank == rank. */
static int body_queries(coll_ctx_t *ctx)
{
    int rank = -1, size = -1, node = -1, nodes = -1, lrank = -1, lsize = -1;
    int version = 0;

    COLL_CHECK_OK(ctx, tacl_comm_rank(ctx->comm, &rank));
    COLL_CHECK_OK(ctx, tacl_comm_size(ctx->comm, &size));
    COLL_CHECK_OK(ctx, tacl_comm_node(ctx->comm, &node));
    COLL_CHECK_OK(ctx, tacl_comm_n_nodes(ctx->comm, &nodes));
    COLL_CHECK_OK(ctx, tacl_comm_local_rank(ctx->comm, &lrank));
    COLL_CHECK_OK(ctx, tacl_comm_local_size(ctx->comm, &lsize));
    COLL_CHECK_OK(ctx, tacl_get_version(&version));
    COLL_CHECK(ctx, rank == ctx->rank && size == ctx->nranks,
               "rank %d size %d", rank, size);
    COLL_CHECK(ctx, node == 0 && nodes == 1, "node %d of %d nodes", node,
               nodes);
    COLL_CHECK(ctx, lrank == ctx->rank && lsize == ctx->nranks,
               "local rank %d local size %d", lrank, lsize);
    COLL_CHECK(ctx, version == TACL_VERSION_CODE, "version %d", version);
    return 0;
}

/* Sum of the bytes and messages of every transport but "self". */
static void count_remote(const tacl_counters_t *c, uint64_t *bytes_p,
                         uint64_t *msgs_p, uint64_t *shm_p)
{
    *bytes_p = *msgs_p = *shm_p = 0;
    for (int i = 0; i < c->n_transports && i < TACL_MAX_TRANSPORTS; i++) {
        if (strncmp(c->transports[i].name, "self", 16) == 0)
            continue;
        *bytes_p += c->transports[i].bytes;
        *msgs_p += c->transports[i].messages;
        if (strncmp(c->transports[i].name, "shm", 16) == 0)
            *shm_p += c->transports[i].bytes;
    }
}

/*
 * With TACL_ALGO=allgather=ring, every rank forwards n - 1 blocks of its
 * ring: (n - 1) / n of the gathered bytes, all of it through shm.
 */
static int body_counters(coll_ctx_t *ctx)
{
    const size_t c = 100001;
    int n = ctx->nranks;
    float *send = junk_alloc(c * 4), *recv = junk_alloc((size_t)n * c * 4);
    uint64_t bytes, msgs, shm, want = (uint64_t)(n - 1) * c * 4;
    tacl_counters_t cnt;
    int rc = 0;

    if (!send || !recv) {
        rc = coll_fail(ctx, "out of memory");
        goto out;
    }
    val_fill_move(TACL_FLOAT32, send, c, ctx->rank, 0);
    COLL_CHECK_OK(ctx, tacl_comm_reset_counters(ctx->comm));
    memset(&cnt, 0xff, sizeof(cnt));
    COLL_CHECK_OK(ctx, tacl_comm_get_counters(ctx->comm, &cnt));
    COLL_CHECK(ctx, cnt.n_transports >= 1 &&
               cnt.n_transports <= TACL_MAX_TRANSPORTS,
               "n_transports %d", cnt.n_transports);
    count_remote(&cnt, &bytes, &msgs, &shm);
    COLL_CHECK(ctx, bytes == 0 && msgs == 0,
               "after reset: %llu bytes %llu messages",
               (unsigned long long)bytes, (unsigned long long)msgs);
    COLL_CHECK_OK(ctx, tacl_allgather(send, recv, c, TACL_FLOAT32, ctx->comm,
                                      NULL));
    COLL_CHECK_OK(ctx, tacl_comm_get_counters(ctx->comm, &cnt));
    count_remote(&cnt, &bytes, &msgs, &shm);
    COLL_CHECK(ctx, bytes == want && shm == want,
               "ring allgather of %zu floats on %d ranks sent %llu bytes "
               "(%llu through shm), expected %llu", c, n,
               (unsigned long long)bytes, (unsigned long long)shm,
               (unsigned long long)want);
    COLL_CHECK(ctx, n == 1 || msgs >= (uint64_t)(n - 1),
               "%llu messages for %d ring steps", (unsigned long long)msgs,
               n - 1);
out:
    free(send);
    free(recv);
    return rc;
}

/*
 * A sender whose blocking send returned may destroy its communicator and
 * exit at once; the receiver, which posts its receive later, must still
 * get the data (the send completed, so nothing failed).
 */
static int body_exit_after_send(coll_ctx_t *ctx)
{
    size_t c = *(const size_t *)ctx->arg;
    int32_t *buf = junk_alloc(c * 4), *want = junk_alloc(c * 4);
    int rc = 0;

    if (!buf || !want)
        return coll_fail(ctx, "out of memory");
    val_fill_move(TACL_INT32, want, c, 0, 0);
    if (ctx->rank == 0) {
        COLL_CHECK_OK(ctx, tacl_send(want, c, TACL_INT32, 1, ctx->comm,
                                     NULL));
    } else {
        coll_sleep_ms(300);
        COLL_CHECK_OK(ctx, tacl_recv(buf, c, TACL_INT32, 0, ctx->comm,
                                     NULL));
        rc = expect_equal(ctx, "recv after the sender left", TACL_INT32,
                          buf, want, c);
    }
    free(buf);
    free(want);
    return rc;
}

/* Same with a collective: rank 0 leaves right after its last allreduce
 * while the last rank is slow to finish its part. */
static int body_exit_after_allreduce(coll_ctx_t *ctx)
{
    size_t c = *(const size_t *)ctx->arg;
    float *in = junk_alloc(c * 4), *out = junk_alloc(c * 4);
    float *want = junk_alloc(c * 4);
    int rc = 0;

    if (!in || !out || !want)
        return coll_fail(ctx, "out of memory");
    val_fill_red(TACL_FLOAT32, TACL_SUM, in, c, ctx->rank, ctx->nranks, 0);
    val_fill_red_result(TACL_FLOAT32, TACL_SUM, want, c, ctx->nranks, 0);
    for (int k = 0; k < 20 && rc == 0; k++) {
        memset(out, JUNK, c * 4);
        COLL_CHECK_OK(ctx, tacl_allreduce(in, out, c, TACL_FLOAT32, TACL_SUM,
                                          ctx->comm, NULL));
        rc = expect_equal(ctx, "allreduce", TACL_FLOAT32, out, want, c);
    }
    free(in);
    free(out);
    free(want);
    return rc;
}

static const size_t eager_count = 1000, staged_count = 1000 * 1000;

Test(lifecycle, exit_after_eager_send, .timeout = 60)
{
    coll_run_expect_pass(2, body_exit_after_send, (void *)&eager_count,
                         NULL);
}

Test(lifecycle, exit_after_staged_send, .timeout = 60)
{
    coll_run_expect_pass(2, body_exit_after_send, (void *)&staged_count,
                         NULL);
}

Test(lifecycle, exit_after_allreduce_ranks3, .timeout = 60)
{
    static const size_t c = 21001;

    coll_run_expect_pass(3, body_exit_after_allreduce, (void *)&c, NULL);
}

Test(lifecycle, exit_after_allreduce_ranks8, .timeout = 60)
{
    static const size_t c = 1001;

    coll_run_expect_pass(8, body_exit_after_allreduce, (void *)&c, NULL);
}

static const char *const ring_env[] = {"TACL_ALGO=allgather=ring", NULL};

#define RANKS_TESTS(suite, body, env)                                        \
    Test(suite, ranks1, .timeout = 60)                                       \
    {                                                                        \
        coll_run_expect_pass(1, body, NULL, env);                            \
    }                                                                        \
    Test(suite, ranks2, .timeout = 60)                                       \
    {                                                                        \
        coll_run_expect_pass(2, body, NULL, env);                            \
    }                                                                        \
    Test(suite, ranks3, .timeout = 60)                                       \
    {                                                                        \
        coll_run_expect_pass(3, body, NULL, env);                            \
    }                                                                        \
    Test(suite, ranks4, .timeout = 60)                                       \
    {                                                                        \
        coll_run_expect_pass(4, body, NULL, env);                            \
    }                                                                        \
    Test(suite, ranks8, .timeout = 120)                                      \
    {                                                                        \
        coll_run_expect_pass(8, body, NULL, env);                            \
    }

RANKS_TESTS(nb, body_nb_overlap, NULL)
RANKS_TESTS(nb_all, body_nb_all, NULL)
RANKS_TESTS(group_mixed, body_group_mixed, NULL)
RANKS_TESTS(group_nb, body_group_nb, NULL)
RANKS_TESTS(many_small, body_many_small, NULL)
RANKS_TESTS(queries, body_queries, NULL)
RANKS_TESTS(counters, body_counters, ring_env)

Test(split, ranks2, .timeout = 60)
{
    coll_run_expect_pass(2, body_split, NULL, NULL);
}

Test(split, ranks3, .timeout = 60)
{
    coll_run_expect_pass(3, body_split, NULL, NULL);
}

Test(split, ranks4, .timeout = 60)
{
    coll_run_expect_pass(4, body_split, NULL, NULL);
}

Test(split, ranks8, .timeout = 120)
{
    coll_run_expect_pass(8, body_split, NULL, NULL);
}
