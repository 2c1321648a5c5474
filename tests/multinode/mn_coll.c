/*
 * Every collective across nodes with exact results: all-gather,
 * reduce-scatter, all-reduce, broadcast, reduce, all-to-all, send/recv
 * and barrier; counts 0, 1, odd, not divisible by the rank count and a
 * pipelined size, plus 16 MB buffers for the three bulk collectives; in
 * place and out of place; int32 and float32 sums of values that add up
 * exactly; a group mixing operations; non-blocking calls.
 *
 * After every operation the byte counters keep their invariants
 * (mn_delta_check) and the net bytes of all ranks together reach the
 * least any algorithm must move between nodes for that operation: what
 * each node needs and does not hold.  Point-to-point bytes are checked
 * exactly per link class.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mn.h"

typedef struct {
    mn_t *mn;
    tacl_dtype_t dt;
    size_t es;
    size_t count;
    int inplace;
    int root;
    int salt;
    const char *op;
    char what[160];
    tacl_counters_t before;
} mn_case_t;

static int salt_next;

static void case_begin(mn_case_t *c, mn_t *mn, const char *op,
                       tacl_dtype_t dt, size_t count, int inplace, int root)
{
    memset(c, 0, sizeof(*c));
    c->mn = mn;
    c->dt = dt;
    c->es = tacl_dtype_size(dt);
    c->count = count;
    c->inplace = inplace;
    c->root = root;
    c->salt = ++salt_next;
    c->op = op;
    if (root >= 0)
        snprintf(c->what, sizeof(c->what), "%s %s count=%zu %s root=%d", op,
                 tacl_dtype_name(dt), count,
                 inplace ? "in-place" : "out-of-place", root);
    else
        snprintf(c->what, sizeof(c->what), "%s %s count=%zu %s", op,
                 tacl_dtype_name(dt), count,
                 inplace ? "in-place" : "out-of-place");
    mn_counters(mn, &c->before);
}

/*
 * The case's collective (its name, as tacl_coll_name spells it), if it
 * is one: tacl_comm_estimate must name the algorithm the call ran.
 */
static void check_estimate(mn_case_t *c)
{
    const char *op = c->op;
    tacl_sim_info_t info;
    int coll = -1;

    for (int k = 0; k < TACL_NUM_COLLS; k++)
        if (strcmp(tacl_coll_name((tacl_coll_t)k), op) == 0)
            coll = k;
    if (coll < 0 || coll == TACL_COLL_SEND || coll == TACL_COLL_RECV)
        return;
    mn_ok(c->mn, tacl_comm_estimate(c->mn->comm, (tacl_coll_t)coll,
                                    c->count, c->dt, TACL_SUM,
                                    c->root >= 0 ? c->root : 0, &info),
          "tacl_comm_estimate");
    if (strcmp(info.algorithm, tacl_comm_last_algorithm(c->mn->comm)) != 0)
        mn_fail(c->mn, "%s: tacl_comm_estimate names %s (%s engine), the "
                "call ran %s", c->what, info.algorithm, info.engine,
                tacl_comm_last_algorithm(c->mn->comm));
}

/*
 * Counter invariants, then (when floor is not 0) the net bytes of all
 * ranks together against floor.  Every rank computes the same floor, so
 * either all or none take part in the all-reduce.
 */
static void case_end(mn_case_t *c, uint64_t floor)
{
    mn_t *mn = c->mn;
    mn_delta_t d;
    uint64_t mine, total = 0;

    mn_delta_check(mn, c->what, &c->before, &d);
    check_estimate(c);
    mn->cases++;
    if (floor == 0 || mn->n_nodes == 1)
        return;
    mine = d.link[TACL_LINK_NET];
    mn_ok(mn, tacl_allreduce(&mine, &total, 1, TACL_UINT64, TACL_SUM,
                             mn->comm, NULL), "tacl_allreduce of net bytes");
    if (total < floor)
        mn_fail(mn, "%s: all ranks sent %" PRIu64 " net bytes, less than "
                "the %" PRIu64 " the nodes must receive", c->what, total,
                floor);
}

/* want[i] = sum over ranks of mn_val(r, off + i, salt). */
static void want_sum(void *want, tacl_dtype_t dt, size_t n, int nranks,
                     size_t off, int salt)
{
    for (size_t i = 0; i < n; i++) {
        int64_t s = 0;
        for (int r = 0; r < nranks; r++)
            s += mn_val(r, off + i, salt);
        mn_store(want, dt, i, s);
    }
}

/* A copy of n elements in a fresh guarded buffer, to compare alone. */
static void *copy_of(const void *buf, size_t n, size_t es)
{
    void *copy = mn_alloc(n, es);

    memcpy(copy, buf, n * es);
    return copy;
}

/* Out of place, the send buffer must come back unchanged. */
static void check_send_kept(mn_case_t *c, const void *send, size_t n,
                            int rank, size_t off)
{
    void *want = mn_alloc(n, c->es);
    char what[200];

    mn_fill(want, c->dt, n, rank, off, c->salt);
    snprintf(what, sizeof(what), "%s: send buffer", c->what);
    mn_compare(c->mn, what, want, send, n, c->dt);
    free(want);
}

/*
 * The end of a case: the send buffer (of send_count elements) still as
 * it was when out of place, the counters against floor (case_end), then
 * the buffers freed; in place, inner lies in outer and goes with it.
 */
static void case_finish(mn_case_t *c, const char *send, size_t send_count,
                        char *outer, char *inner, char *want, int inplace,
                        uint64_t floor)
{
    if (!inplace) {
        check_send_kept(c, send, send_count, c->mn->rank, 0);
        free(inner);
    }
    case_end(c, floor);
    free(outer);
    free(want);
}

/* Sum over nodes of what a node must receive: (ranks elsewhere) * unit. */
static uint64_t floor_others(const mn_t *mn, uint64_t unit)
{
    uint64_t f = 0;

    for (int n = 0; n < mn->n_nodes; n++)
        f += (uint64_t)(mn->nranks - mn->rpn[n]) * unit;
    return f;
}

static void run_allgather(mn_t *mn, tacl_dtype_t dt, size_t count,
                          int inplace)
{
    mn_case_t c;
    int p = mn->nranks;
    char *recv, *send, *want;

    case_begin(&c, mn, "allgather", dt, count, inplace, -1);
    recv = mn_alloc((size_t)p * count, c.es);
    want = mn_alloc((size_t)p * count, c.es);
    send = inplace ? recv + (size_t)mn->rank * count * c.es
                   : mn_alloc(count, c.es);
    mn_fill(send, dt, count, mn->rank, 0, c.salt);
    for (int b = 0; b < p; b++)
        mn_fill(want + (size_t)b * count * c.es, dt, count, b, 0, c.salt);
    mn_counters(mn, &c.before);
    mn_ok(mn, tacl_allgather(send, recv, count, dt, mn->comm, NULL),
          c.what);
    mn_compare(mn, c.what, want, recv, (size_t)p * count, dt);
    case_finish(&c, send, count, recv, send, want, inplace,
                mn->n_nodes > 1 ? floor_others(mn, count * c.es) : 0);
}

static void run_reduce_scatter(mn_t *mn, tacl_dtype_t dt, size_t count,
                               int inplace)
{
    mn_case_t c;
    int p = mn->nranks;
    char *send, *recv, *want, *got;

    case_begin(&c, mn, "reduce_scatter", dt, count, inplace, -1);
    send = mn_alloc((size_t)p * count, c.es);
    mn_fill(send, dt, (size_t)p * count, mn->rank, 0, c.salt);
    recv = inplace ? send + (size_t)mn->rank * count * c.es
                   : mn_alloc(count, c.es);
    want = mn_alloc(count, c.es);
    want_sum(want, dt, count, p, (size_t)mn->rank * count, c.salt);
    mn_counters(mn, &c.before);
    mn_ok(mn, tacl_reduce_scatter(send, recv, count, dt, TACL_SUM, mn->comm,
                                  NULL), c.what);
    got = inplace ? copy_of(recv, count, c.es) : recv;
    mn_compare(mn, c.what, want, got, count, dt);
    if (!inplace)
        check_send_kept(&c, send, (size_t)p * count, mn->rank, 0);
    free(got);
    /* Each node needs the other nodes' share of each of its blocks. */
    case_end(&c, mn->n_nodes > 1 ? (uint64_t)p * count * c.es : 0);
    free(send);
    free(want);
}

static void run_allreduce(mn_t *mn, tacl_dtype_t dt, size_t count,
                          int inplace)
{
    mn_case_t c;
    char *send, *recv, *want;

    case_begin(&c, mn, "allreduce", dt, count, inplace, -1);
    send = mn_alloc(count, c.es);
    mn_fill(send, dt, count, mn->rank, 0, c.salt);
    recv = inplace ? send : mn_alloc(count, c.es);
    want = mn_alloc(count, c.es);
    want_sum(want, dt, count, mn->nranks, 0, c.salt);
    mn_counters(mn, &c.before);
    mn_ok(mn, tacl_allreduce(send, recv, count, dt, TACL_SUM, mn->comm,
                             NULL), c.what);
    mn_compare(mn, c.what, want, recv, count, dt);
    case_finish(&c, send, count, send, recv, want, inplace,
                mn->n_nodes > 1 ? (uint64_t)mn->n_nodes * count * c.es : 0);
}

static void run_broadcast(mn_t *mn, tacl_dtype_t dt, size_t count,
                          int inplace, int root)
{
    mn_case_t c;
    char *send, *recv, *want;

    case_begin(&c, mn, "broadcast", dt, count, inplace, root);
    recv = mn_alloc(count, c.es);
    send = inplace ? recv : mn_alloc(count, c.es);
    /* A non-root's send buffer is ignored: fill it with its own values. */
    if (mn->rank == root || !inplace)
        mn_fill(send, dt, count, mn->rank, 0, c.salt);
    want = mn_alloc(count, c.es);
    mn_fill(want, dt, count, root, 0, c.salt);
    mn_counters(mn, &c.before);
    mn_ok(mn, tacl_broadcast(send, recv, count, dt, root, mn->comm, NULL),
          c.what);
    mn_compare(mn, c.what, want, recv, count, dt);
    case_finish(&c, send, count, recv, send, want, inplace,
                (uint64_t)(mn->n_nodes - 1) * count * c.es);
}

static void run_reduce(mn_t *mn, tacl_dtype_t dt, size_t count, int inplace,
                       int root)
{
    mn_case_t c;
    char *send, *recv, *want;

    case_begin(&c, mn, "reduce", dt, count, inplace, root);
    send = mn_alloc(count, c.es);
    mn_fill(send, dt, count, mn->rank, 0, c.salt);
    recv = inplace ? send : mn_alloc(count, c.es);
    /* Off the root, an out-of-place receive buffer stays untouched. */
    want = mn_alloc(count, c.es);
    if (mn->rank == root)
        want_sum(want, dt, count, mn->nranks, 0, c.salt);
    mn_counters(mn, &c.before);
    mn_ok(mn, tacl_reduce(send, recv, count, dt, TACL_SUM, root, mn->comm,
                          NULL), c.what);
    if (mn->rank == root || !inplace)
        mn_compare(mn, c.what, want, recv, count, dt);
    case_finish(&c, send, count, send, recv, want, inplace,
                mn->n_nodes > 1 ? count * c.es : 0);
}

static void run_alltoall(mn_t *mn, tacl_dtype_t dt, size_t count,
                         int inplace)
{
    mn_case_t c;
    int p = mn->nranks;
    char *send, *recv, *want;
    uint64_t floor = 0;

    case_begin(&c, mn, "alltoall", dt, count, inplace, -1);
    send = mn_alloc((size_t)p * count, c.es);
    mn_fill(send, dt, (size_t)p * count, mn->rank, 0, c.salt);
    recv = inplace ? send : mn_alloc((size_t)p * count, c.es);
    want = mn_alloc((size_t)p * count, c.es);
    for (int j = 0; j < p; j++)
        mn_fill(want + (size_t)j * count * c.es, dt, count, j,
                (size_t)mn->rank * count, c.salt);
    mn_counters(mn, &c.before);
    mn_ok(mn, tacl_alltoall(send, recv, count, dt, mn->comm, NULL), c.what);
    mn_compare(mn, c.what, want, recv, (size_t)p * count, dt);
    for (int n = 0; n < mn->n_nodes; n++)
        floor += (uint64_t)mn->rpn[n] * (uint64_t)(p - mn->rpn[n]) * count *
                 c.es;
    case_finish(&c, send, (size_t)p * count, send, recv, want, inplace,
                floor);
}

/*
 * Point to point in a group: every rank sends to the next rank and to the
 * rank a node's width further (usually on another node), and receives
 * from the matching ranks.  The bytes per link class are exact.
 */
static void run_sendrecv(mn_t *mn, tacl_dtype_t dt, size_t count)
{
    mn_case_t c;
    int p = mn->nranks, r = mn->rank, k = mn->rpn[0] % p;
    int to[2] = {(r + 1) % p, (r + k) % p};
    int from[2] = {(r + p - 1) % p, (r + p - k) % p};
    char *send[2], *recv[2], *want[2], what[200];
    uint64_t exp[TACL_NUM_LINK_CLASSES] = {0};
    mn_delta_t d;

    case_begin(&c, mn, "sendrecv", dt, count, 0, -1);
    for (int m = 0; m < 2; m++) {
        send[m] = mn_alloc(count, c.es);
        recv[m] = mn_alloc(count, c.es);
        want[m] = mn_alloc(count, c.es);
        mn_fill(send[m], dt, count, r, 0, c.salt + m);
        mn_fill(want[m], dt, count, from[m], 0, c.salt + m);
        exp[mn_link_class(mn, r, to[m])] += count * c.es;
    }
    mn_counters(mn, &c.before);
    mn_ok(mn, tacl_group_start(), "tacl_group_start");
    for (int m = 0; m < 2; m++) {
        mn_ok(mn, tacl_send(send[m], count, dt, to[m], mn->comm, NULL),
              c.what);
        mn_ok(mn, tacl_recv(recv[m], count, dt, from[m], mn->comm, NULL),
              c.what);
    }
    mn_ok(mn, tacl_group_end(), "tacl_group_end");
    for (int m = 0; m < 2; m++) {
        snprintf(what, sizeof(what), "%s: message %d from rank %d", c.what,
                 m, from[m]);
        mn_compare(mn, what, want[m], recv[m], count, dt);
        free(send[m]);
        free(recv[m]);
        free(want[m]);
    }
    mn_delta_check(mn, c.what, &c.before, &d);
    for (int l = 0; l < TACL_NUM_LINK_CLASSES; l++)
        if (d.link[l] != exp[l])
            mn_fail(mn, "%s: %" PRIu64 " bytes on link class %d, expected "
                    "%" PRIu64, c.what, d.link[l], l, exp[l]);
    mn->cases++;
}

/*
 * Tagged messages received from any source, across the nodes: every rank
 * but 0 sends rank 0 one message with a tag above the low 20 bits and,
 * after it, one with tag 2; rank 0 posts its receives from any source
 * for tag 2 first, then for the other tag, and each sender must come
 * back once per tag with its own data (the executor's held receives and
 * the transports' probes, shm and ucx or ofi).
 */
static void run_any_source(mn_t *mn, tacl_dtype_t dt, size_t count)
{
    const int tags[2] = {(1 << 20) + 2, 2};
    int p = mn->nranks, r = mn->rank, n = p - 1;
    mn_case_t c;

    case_begin(&c, mn, "tagged any-source recv", dt, count, 0, -1);
    if (r != 0) {
        for (int m = 0; m < 2; m++) {
            char *buf = mn_alloc(count, c.es);

            mn_fill(buf, dt, count, r, 0, c.salt + m);
            mn_ok(mn, tacl_send_tag(buf, count, dt, 0, tags[m], mn->comm,
                                    NULL),
                  c.what);
            free(buf);
        }
    } else if (n > 0) {
        char **got = calloc((size_t)2 * n, sizeof(char *));
        char *want = mn_alloc(count, c.es), what[200];
        int *src = calloc((size_t)2 * n, sizeof(int));
        int *seen = calloc((size_t)2 * p, sizeof(int));
        tacl_request_t *req = calloc((size_t)2 * n, sizeof(*req));

        for (int k = 0; k < 2 * n; k++) {
            int m = k < n; /* tag 2 (m = 1) first */

            got[k] = mn_alloc(count, c.es);
            mn_ok(mn, tacl_recv_tag_nb(got[k], count,
                                       dt, TACL_ANY_SOURCE, tags[m], &src[k],
                                       mn->comm, NULL, &req[k]),
                  c.what);
        }
        for (int k = 0; k < 2 * n; k++) {
            int m = k < n;

            mn_ok(mn, tacl_request_wait(req[k]), c.what);
            tacl_request_free(req[k]);
            if (src[k] < 1 || src[k] >= p || seen[m * p + src[k]]++) {
                mn_fail(mn, "%s: tag %d: receive %d reports source %d "
                        "(twice, or no sender)", c.what, tags[m], k,
                        src[k]);
                continue;
            }
            mn_fill(want, dt, count, src[k], 0, c.salt + m);
            snprintf(what, sizeof(what), "%s: tag %d from rank %d", c.what,
                     tags[m], src[k]);
            mn_compare(mn, what, want, got[k], count, dt);
        }
        for (int k = 0; k < 2 * n; k++)
            free(got[k]);
        free(got);
        free(want);
        free(src);
        free(seen);
        free(req);
    }
    /* A sender that ran ahead into the next case would send its next
     * message with these tags, which a receive from any source may
     * rightly take. */
    mn_ok(mn, tacl_barrier(mn->comm, NULL), "tacl_barrier");
    case_end(&c, 0);
}

/* Blocking send and receive between the first and the last rank. */
static void run_pingpong(mn_t *mn, tacl_dtype_t dt, size_t count)
{
    mn_case_t c;
    int last = mn->nranks - 1, me = mn->rank;
    char *buf, *want;
    mn_delta_t d;

    /* Every rank draws the case's salt, so that later cases agree. */
    case_begin(&c, mn, "blocking send/recv 0<->last", dt, count, 0, -1);
    if (me != 0 && me != last)
        return;
    buf = mn_alloc(count, c.es);
    want = mn_alloc(count, c.es);
    mn_fill(want, dt, count, me == 0 ? last : 0, 0, c.salt);
    mn_counters(mn, &c.before);
    if (me == 0) {
        mn_fill(buf, dt, count, 0, 0, c.salt);
        mn_ok(mn, tacl_send(buf, count, dt, last, mn->comm, NULL), c.what);
        memset(buf, MN_SENTINEL, count * c.es);
        mn_ok(mn, tacl_recv(buf, count, dt, last, mn->comm, NULL), c.what);
        mn_compare(mn, c.what, want, buf, count, dt);
    } else {
        mn_ok(mn, tacl_recv(buf, count, dt, 0, mn->comm, NULL), c.what);
        mn_compare(mn, c.what, want, buf, count, dt);
        mn_fill(buf, dt, count, last, 0, c.salt);
        mn_ok(mn, tacl_send(buf, count, dt, 0, mn->comm, NULL), c.what);
    }
    mn_delta_check(mn, c.what, &c.before, &d);
    if (d.link[mn_link_class(mn, 0, last)] != count * c.es)
        mn_fail(mn, "%s: %" PRIu64 " bytes to the peer, expected %zu",
                c.what, d.link[mn_link_class(mn, 0, last)], count * c.es);
    mn->cases++;
    free(buf);
    free(want);
}

static int file_exists(const char *dir, int iter, int rank)
{
    char path[4096];

    snprintf(path, sizeof(path), "%s/barrier.%d.%d", dir, iter, rank);
    return access(path, F_OK) == 0;
}

/*
 * Barrier: each rank makes a file in the shared directory (the last rank
 * after a pause) and enters the barrier; on leaving it every rank must see
 * every file of that round.
 */
static void run_barrier(mn_t *mn)
{
    char path[4096];
    tacl_counters_t before;
    mn_delta_t d;

    for (int iter = 0; iter < 3; iter++) {
        mn_counters(mn, &before);
        if (mn->dir != NULL) {
            FILE *f;
            if (mn->rank == mn->nranks - 1 - iter % 2)
                nanosleep(&(struct timespec){0, 200 * 1000 * 1000}, NULL);
            snprintf(path, sizeof(path), "%s/barrier.%d.%d", mn->dir, iter,
                     mn->rank);
            f = fopen(path, "w");
            if (f == NULL || fclose(f) != 0)
                mn_fail(mn, "barrier: cannot create %s", path);
        }
        mn_ok(mn, tacl_barrier(mn->comm, NULL), "tacl_barrier");
        for (int r = 0; mn->dir != NULL && r < mn->nranks; r++)
            if (!file_exists(mn->dir, iter, r))
                mn_fail(mn, "barrier %d returned before rank %d entered it",
                        iter, r);
        mn_delta_check(mn, "barrier", &before, &d);
        mn->cases++;
    }
}

/*
 * A group mixing an all-reduce, an all-gather, a broadcast from the last
 * rank, a reduce-scatter and an all-to-all, then two non-blocking calls
 * in flight together.
 */
static void run_group(mn_t *mn)
{
    int p = mn->nranks, r = mn->rank, root = p - 1;
    size_t n_ar = 1001, n_ag = 7, n_bc = 33, n_rs = 5, n_a2a = 3;
    int32_t *ar = mn_alloc(n_ar, 4), *ar_w = mn_alloc(n_ar, 4);
    float *ag_s = mn_alloc(n_ag, 4), *ag = mn_alloc(p * n_ag, 4);
    float *ag_w = mn_alloc(p * n_ag, 4);
    int32_t *bc = mn_alloc(n_bc, 4), *bc_w = mn_alloc(n_bc, 4);
    float *rs_s = mn_alloc(p * n_rs, 4), *rs = mn_alloc(n_rs, 4);
    float *rs_w = mn_alloc(n_rs, 4);
    int32_t *a2a_s = mn_alloc(p * n_a2a, 4), *a2a = mn_alloc(p * n_a2a, 4);
    int32_t *a2a_w = mn_alloc(p * n_a2a, 4);
    tacl_counters_t before;
    tacl_request_t req[2];
    mn_delta_t d;
    int s = ++salt_next;

    mn_fill(ar, TACL_INT32, n_ar, r, 0, s);
    want_sum(ar_w, TACL_INT32, n_ar, p, 0, s);
    mn_fill(ag_s, TACL_FLOAT32, n_ag, r, 0, s);
    for (int b = 0; b < p; b++)
        mn_fill(ag_w + b * n_ag, TACL_FLOAT32, n_ag, b, 0, s);
    if (r == root)
        mn_fill(bc, TACL_INT32, n_bc, r, 0, s);
    mn_fill(bc_w, TACL_INT32, n_bc, root, 0, s);
    mn_fill(rs_s, TACL_FLOAT32, p * n_rs, r, 0, s);
    want_sum(rs_w, TACL_FLOAT32, n_rs, p, (size_t)r * n_rs, s);
    mn_fill(a2a_s, TACL_INT32, p * n_a2a, r, 0, s);
    for (int j = 0; j < p; j++)
        mn_fill(a2a_w + j * n_a2a, TACL_INT32, n_a2a, j, (size_t)r * n_a2a,
                s);
    mn_counters(mn, &before);
    mn_ok(mn, tacl_group_start(), "tacl_group_start");
    mn_ok(mn, tacl_allreduce(ar, ar, n_ar, TACL_INT32, TACL_SUM, mn->comm,
                             NULL), "group: allreduce");
    mn_ok(mn, tacl_allgather(ag_s, ag, n_ag, TACL_FLOAT32, mn->comm, NULL),
          "group: allgather");
    mn_ok(mn, tacl_broadcast(bc, bc, n_bc, TACL_INT32, root, mn->comm,
                             NULL), "group: broadcast");
    mn_ok(mn, tacl_reduce_scatter(rs_s, rs, n_rs, TACL_FLOAT32, TACL_SUM,
                                  mn->comm, NULL), "group: reduce_scatter");
    mn_ok(mn, tacl_alltoall(a2a_s, a2a, n_a2a, TACL_INT32, mn->comm, NULL),
          "group: alltoall");
    mn_ok(mn, tacl_group_end(), "tacl_group_end");
    mn_compare(mn, "group: allreduce int32 1001 in-place", ar_w, ar, n_ar,
               TACL_INT32);
    mn_compare(mn, "group: allgather float32 7", ag_w, ag, p * n_ag,
               TACL_FLOAT32);
    mn_compare(mn, "group: broadcast int32 33 in-place", bc_w, bc, n_bc,
               TACL_INT32);
    mn_compare(mn, "group: reduce_scatter float32 5", rs_w, rs, n_rs,
               TACL_FLOAT32);
    mn_compare(mn, "group: alltoall int32 3", a2a_w, a2a, p * n_a2a,
               TACL_INT32);
    mn_delta_check(mn, "group", &before, &d);
    mn->cases++;

    /* Two non-blocking calls in flight at once. */
    mn_fill(ar, TACL_INT32, n_ar, r, 0, s);
    memset(ag, MN_SENTINEL, p * n_ag * 4);
    mn_counters(mn, &before);
    mn_ok(mn, tacl_allreduce_nb(ar, ar, n_ar, TACL_INT32, TACL_SUM,
                                mn->comm, NULL, &req[0]), "allreduce_nb");
    mn_ok(mn, tacl_allgather_nb(ag_s, ag, n_ag, TACL_FLOAT32, mn->comm, NULL,
                                &req[1]), "allgather_nb");
    for (int i = 1; i >= 0; i--) {
        mn_ok(mn, tacl_request_wait(req[i]), "tacl_request_wait");
        mn_ok(mn, tacl_request_free(req[i]), "tacl_request_free");
    }
    mn_compare(mn, "allreduce_nb int32 1001 in-place", ar_w, ar, n_ar,
               TACL_INT32);
    mn_compare(mn, "allgather_nb float32 7", ag_w, ag, p * n_ag,
               TACL_FLOAT32);
    mn_delta_check(mn, "non-blocking pair", &before, &d);
    mn->cases++;
    free(ar), free(ar_w), free(ag_s), free(ag), free(ag_w), free(bc);
    free(bc_w), free(rs_s), free(rs), free(rs_w), free(a2a_s), free(a2a);
    free(a2a_w);
}

void mn_run_basic(mn_t *mn)
{
    static const tacl_dtype_t dtypes[] = {TACL_INT32, TACL_FLOAT32};

    for (int di = 0; di < 2; di++) {
        for (int inplace = 0; inplace < 2; inplace++) {
            run_allgather(mn, dtypes[di], 1001, inplace);
            run_reduce_scatter(mn, dtypes[di], 1001, inplace);
            run_allreduce(mn, dtypes[di], 1001, inplace);
            run_alltoall(mn, dtypes[di], 1001, inplace);
            run_broadcast(mn, dtypes[di], 1001, inplace, mn->nranks - 1);
            run_reduce(mn, dtypes[di], 1001, inplace, mn->nranks - 1);
        }
        run_sendrecv(mn, dtypes[di], 1001);
    }
}

void mn_run_collectives(mn_t *mn)
{
    /* 0, 1, odd, not divisible by 2..6, and a pipelined odd size. */
    static const size_t counts[] = {0, 1, 7, 1001, 262147};
    static const tacl_dtype_t dtypes[] = {TACL_INT32, TACL_FLOAT32};
    const size_t big = 16u << 20; /* bytes */
    int p = mn->nranks;
    int roots[3] = {0, p > 2 ? 1 : 0, p - 1};

    for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++) {
        size_t n = counts[ci];
        for (int di = 0; di < 2; di++) {
            tacl_dtype_t dt = dtypes[di];
            for (int inplace = 0; inplace < 2; inplace++) {
                run_allgather(mn, dt, n, inplace);
                run_reduce_scatter(mn, dt, n, inplace);
                run_allreduce(mn, dt, n, inplace);
                run_alltoall(mn, dt, n, inplace);
                for (int ri = 0; ri < 3; ri++) {
                    if (ri > 0 && roots[ri] == roots[ri - 1])
                        continue;
                    run_broadcast(mn, dt, n, inplace, roots[ri]);
                    run_reduce(mn, dt, n, inplace, roots[ri]);
                }
            }
            run_sendrecv(mn, dt, n);
            run_pingpong(mn, dt, n);
            run_any_source(mn, dt, n);
        }
    }
    /* 16 MB buffers: the all-reduce vector, the gathered output and the
     * scattered input. */
    for (int inplace = 0; inplace < 2; inplace++) {
        run_allreduce(mn, TACL_FLOAT32, big / 4, inplace);
        run_allgather(mn, TACL_FLOAT32, big / 4 / (size_t)p, inplace);
        run_reduce_scatter(mn, TACL_FLOAT32, big / 4 / (size_t)p, inplace);
    }
    run_group(mn);
    run_barrier(mn);
}
