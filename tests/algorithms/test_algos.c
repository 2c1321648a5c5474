/*
 * Schedule builders, checked without a transport: every algorithm of
 * every collective on 1, 2, 3, 5, 8, 11 and 16 ranks, for several counts,
 * in and out of place, int32 and float32 and every reduction op, run by
 * simrun in several random orders.  Each run must match every message,
 * finish without deadlock or races, produce exactly the reference result,
 * write every output byte once (bytes already right in place: never),
 * leave inputs untouched, and send the bytes the algorithm's formula says.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algo.h"
#include "log.h"
#include "suite.h"

static const int nranks_list[] = {1, 2, 3, 5, 8, 11, 16};
static const unsigned seeds[] = {1, 2, 3};

typedef struct {
    int n;
    const tacl__algo_t *algo;
    size_t count;
    int in_place;
    tacl_dtype_t dtype;
    tacl_op_t op;
    int root;
    uint64_t chunk;
} cfg_t;

typedef simrun_bufs_t rbufs_t;

/* What every rank of c runs. */
static suite_op_t op_of(const cfg_t *c)
{
    suite_op_t op = {c->algo->coll, c->n, c->count, c->dtype, c->op,
                     c->root, c->in_place, c->chunk, 0, 0};

    return op;
}

static void cfg_str(const cfg_t *c, char *buf, size_t len)
{
    snprintf(buf, len, "%s/%s n=%d count=%zu %s %s %s root=%d chunk=%llu",
             tacl_coll_name(c->algo->coll), c->algo->name, c->n, c->count,
             c->in_place ? "in-place" : "out-of-place",
             tacl_dtype_name(c->dtype), tacl_op_name(c->op), c->root,
             (unsigned long long)c->chunk);
}

/* Input element i of rank q, as an integer exact in both dtypes. */
static long long gen(const cfg_t *c, int q, size_t i)
{
    if (c->op == TACL_PROD) {
        static const int v[3] = {1, 2, -1};

        return v[((size_t)q * 5 + i) % 3];
    }
    return (long long)(((size_t)q * 131 + i * 7) % 19) - 9;
}

static void put(tacl_dtype_t dt, void *buf, size_t i, long long v)
{
    if (dt == TACL_INT32)
        ((int32_t *)buf)[i] = (int32_t)v;
    else
        ((float *)buf)[i] = (float)v;
}

/* Reference result of combining element i over every rank's input. */
static void reference(const cfg_t *c, size_t i, void *dst, size_t j)
{
    long long acc = gen(c, 0, i);
    int q;

    for (q = 1; q < c->n; q++) {
        long long v = gen(c, q, i);

        switch (c->op) {
        case TACL_PROD:
            acc *= v;
            break;
        case TACL_MAX:
            acc = v > acc ? v : acc;
            break;
        case TACL_MIN:
            acc = v < acc ? v : acc;
            break;
        default:
            acc += v;
            break;
        }
    }
    if (c->op == TACL_AVG && c->dtype == TACL_FLOAT32) {
        ((float *)dst)[j] = (float)acc / (float)c->n;
        return;
    }
    if (c->op == TACL_AVG)
        acc /= c->n;
    put(c->dtype, dst, j, acc);
}

static void fill(const void *ctx, int r, void *send, size_t n)
{
    const cfg_t *c = ctx;

    for (size_t i = 0; i < n; i++)
        put(c->dtype, send, i, gen(c, r, i));
}

/* Expected output of rank r into exp (b->out_bytes bytes). */
static void expected(const cfg_t *c, int r, char *exp)
{
    size_t n = (size_t)c->n, i, j, cnt = c->count;

    switch (c->algo->coll) {
    case TACL_COLL_ALLGATHER:
        for (j = 0; j < n; j++)
            for (i = 0; i < cnt; i++)
                put(c->dtype, exp, j * cnt + i, gen(c, (int)j, i));
        break;
    case TACL_COLL_REDUCE_SCATTER:
        for (i = 0; i < cnt; i++)
            reference(c, (size_t)r * cnt + i, exp, i);
        break;
    case TACL_COLL_ALLREDUCE:
    case TACL_COLL_REDUCE:
        for (i = 0; i < cnt; i++)
            reference(c, i, exp, i);
        break;
    case TACL_COLL_BROADCAST:
        for (i = 0; i < cnt; i++)
            put(c->dtype, exp, i, gen(c, c->root, i));
        break;
    case TACL_COLL_ALLTOALL:
        for (j = 0; j < n; j++)
            for (i = 0; i < cnt; i++)
                put(c->dtype, exp, j * cnt + i,
                    gen(c, (int)j, (size_t)r * cnt + i));
        break;
    default:
        break;
    }
}

/* Whether output byte k of rank r is already right before the operation. */
static int already_right(const void *cfg, int r, size_t k)
{
    const cfg_t *c = cfg;
    size_t es = tacl_dtype_size(c->dtype), blk = c->count * es;

    if (!c->in_place)
        return 0;
    switch (c->algo->coll) {
    case TACL_COLL_ALLGATHER:
    case TACL_COLL_ALLTOALL:
        return k / blk == (size_t)r;
    case TACL_COLL_BROADCAST:
        return r == c->root || c->n == 1;
    default:
        return c->n == 1;
    }
}

static size_t ring_cnt(size_t count, int n, int b)
{
    return count / (size_t)n + ((size_t)b < count % (size_t)n ? 1 : 0);
}

/* Bytes rank r sends, by the algorithm's formula. */
static uint64_t bytes_formula(const cfg_t *c, int r)
{
    uint64_t es = tacl_dtype_size(c->dtype), m = c->count * es;
    int n = c->n, p2 = 1, rem, v, low, k, kids = 0;

    if (n == 1 || c->count == 0)
        return 0;
    switch (c->algo->coll) {
    case TACL_COLL_ALLGATHER:
    case TACL_COLL_REDUCE_SCATTER:
    case TACL_COLL_ALLTOALL:
        return (uint64_t)(n - 1) * m;
    case TACL_COLL_ALLREDUCE:
        if (c->algo->id == TACL__ALGO_RING)
            return (2 * c->count - ring_cnt(c->count, n, r) -
                    ring_cnt(c->count, n, (r + 1) % n)) * es;
        /* Direct: every other block once, then its own to n - 1 peers. */
        if (c->algo->id == TACL__ALGO_DIRECT)
            return (c->count + (uint64_t)(n - 2) *
                                   ring_cnt(c->count, n, r)) * es;
        while (p2 * 2 <= n)
            p2 *= 2;
        rem = n - p2;
        for (k = 0; (1 << k) < p2; k++)
            ;
        if (r < 2 * rem && r % 2 == 0)
            return m;
        return (uint64_t)k * m + (r < 2 * rem ? m : 0);
    case TACL_COLL_BROADCAST:
        v = (r - c->root + n) % n;
        for (low = 1; low < n && !(v & low); low <<= 1)
            ;
        for (k = 1; k < low; k <<= 1)
            kids += v + k < n;
        return (uint64_t)kids * m;
    case TACL_COLL_REDUCE:
        return r == c->root ? 0 : m;
    default:
        return 0;
    }
}

/* The operation of c on buffers send and recv. */
static tacl__coll_args_t args_of(const cfg_t *c, void *send, void *recv,
                                 uint64_t seq)
{
    suite_op_t op = op_of(c);
    tacl__coll_args_t a = suite_args(&op, NULL, seq);

    a.sendbuf = send;
    a.recvbuf = recv;
    return a;
}

/* Rank r's buffers and schedule, on a view of one node. */
static void build_rank(const void *cfg, simrun_t *sr, int r, rbufs_t *b,
                       uint64_t seq, const char *name)
{
    const cfg_t *c = cfg;
    suite_op_t op = op_of(c);
    tacl__topo_view_t v = {0};
    tacl__coll_args_t a;
    tacl_status_t st;

    suite_bufs(sr, &op, r, b, fill, c);
    a = suite_args(&op, b, seq);
    v.rank = r;
    v.nranks = c->n;
    v.n_nodes = 1;
    cr_assert(c->algo->supports(&a, &v), "%s: not supported", name);
    st = c->algo->build(simrun_sched(sr, r), &a, &v);
    cr_assert_eq(st, TACL_OK, "%s: rank %d build failed: %s", name, r,
                 tacl__last_error());
}

/* Checks rank r's result, write counts and bytes sent after a run. */
static void check_rank(const void *cfg, simrun_t *sr, int r,
                       const rbufs_t *b, const char *name)
{
    const cfg_t *c = cfg;
    suite_op_t op = op_of(c);
    char *exp = malloc(c->count * (size_t)c->n * 4 + 1);

    cr_assert_not_null(exp);
    if (b->out_bytes > 0) {
        expected(c, r, exp);
        suite_check_output(b, r, exp, name);
    }
    suite_check_writes(sr, &op, r, b, already_right, c, name);
    cr_assert_eq(simrun_bytes_sent(sr, r), bytes_formula(c, r),
                 "%s: rank %d sent %llu bytes, formula says %llu", name, r,
                 (unsigned long long)simrun_bytes_sent(sr, r),
                 (unsigned long long)bytes_formula(c, r));
    free(exp);
}

static const suite_t algos_suite = {build_rank, check_rank};

static void run_cfg(const cfg_t *c)
{
    char name[200];

    cfg_str(c, name, sizeof(name));
    for (size_t si = 0; si < sizeof(seeds) / sizeof(seeds[0]); si++)
        suite_run(&algos_suite, c, c->n, 1000 + si, seeds[si], name);
}

static int is_reduction(tacl_coll_t t)
{
    return t == TACL_COLL_REDUCE_SCATTER || t == TACL_COLL_ALLREDUCE ||
           t == TACL_COLL_REDUCE;
}

/* The whole matrix for one algorithm of one collective. */
static void run_algo(tacl_coll_t coll, const char *name)
{
    static const tacl_op_t ops[] = {TACL_SUM, TACL_PROD, TACL_MAX, TACL_MIN,
                                    TACL_AVG};
    static const tacl_dtype_t dtypes[] = {TACL_INT32, TACL_FLOAT32};
    const tacl__algo_t *algo = tacl__algo_find(coll, name);
    size_t ni, ci, di, oi, nops = is_reduction(coll) ? 5 : 1;
    int ip, ri, tried = 0;

    cr_assert_not_null(algo, "no %s algorithm %s", tacl_coll_name(coll),
                       name);
    for (ni = 0; ni < sizeof(nranks_list) / sizeof(int); ni++) {
        int n = nranks_list[ni];
        size_t counts[5] = {0, 1, 7, (size_t)n * 3 + 1, 1000};
        tacl__topo_view_t v = {0};
        tacl__coll_args_t probe = {0};

        v.nranks = n;
        v.n_nodes = 1;
        probe.type = coll;
        if (!algo->supports(&probe, &v))
            continue;
        for (ci = 0; ci < 5; ci++)
            for (ip = 0; ip < 2; ip++)
                for (di = 0; di < 2; di++)
                    for (oi = 0; oi < nops; oi++)
                        for (ri = 0; ri < 2; ri++) {
                            cfg_t c = {n, algo, counts[ci], ip,
                                       dtypes[di], ops[oi],
                                       ri ? n - 1 : 0, n <= 5 ? 40 : 256};

                            if (ri && n == 1)
                                continue;
                            if (ri && coll != TACL_COLL_BROADCAST &&
                                coll != TACL_COLL_REDUCE)
                                continue;
                            if (ci == 3)
                                c.chunk = 1 << 20;
                            run_cfg(&c);
                            tried++;
                        }
    }
    cr_assert_gt(tried, 0, "nothing tested");
}

/* The test of one algorithm of one collective, named algo_coll. */
#define ALGO_TEST(algo, coll, COLL)                                          \
    Test(algorithms, algo##_##coll) { run_algo(TACL_COLL_##COLL, #algo); }

ALGO_TEST(ring, allgather, ALLGATHER)
ALGO_TEST(bruck, allgather, ALLGATHER)
ALGO_TEST(rd, allgather, ALLGATHER)
ALGO_TEST(ring, reduce_scatter, REDUCE_SCATTER)
ALGO_TEST(rd, reduce_scatter, REDUCE_SCATTER)
ALGO_TEST(ring, allreduce, ALLREDUCE)
ALGO_TEST(rd, allreduce, ALLREDUCE)
ALGO_TEST(tree, broadcast, BROADCAST)
ALGO_TEST(tree, reduce, REDUCE)
ALGO_TEST(direct, alltoall, ALLTOALL)
ALGO_TEST(direct, allgather, ALLGATHER)
ALGO_TEST(direct, reduce_scatter, REDUCE_SCATTER)
ALGO_TEST(direct, allreduce, ALLREDUCE)

Test(algorithms, direct_more_peers_than_dependencies)
{
    /* 69 copies of a chunk reduced in one step: more receives than a step
     * may depend on, joined through NOPs. */
    static const tacl_coll_t colls[] = {TACL_COLL_REDUCE_SCATTER,
                                              TACL_COLL_ALLREDUCE};
    size_t i;

    cr_assert_gt(70, TACL__MAX_DEPS + 1);
    for (i = 0; i < sizeof(colls) / sizeof(colls[0]); i++) {
        cfg_t c = {70, tacl__algo_find(colls[i], "direct"), 141, 0,
                   TACL_INT32, TACL_SUM, 0, 40};

        run_cfg(&c);
        c.in_place = 1;
        c.op = TACL_AVG;
        c.dtype = TACL_FLOAT32;
        run_cfg(&c);
    }
}

/*
 * A collective's buffers, from calloc or (mapped) from tacl_mem_alloc,
 * which the caller of a builder marks in args->send_mapped and which
 * decides whether the direct algorithms stage; in place, send points into
 * recv at send_off bytes.
 */
typedef struct {
    void *recv, *send, *own_send;
    int mapped;
} test_bufs_t;

static void bufs_get(test_bufs_t *b, int mapped, int in_place,
                     size_t recv_bytes, size_t send_bytes, size_t send_off)
{
    b->mapped = mapped;
    b->own_send = NULL;
    if (mapped) {
        cr_assert_eq(tacl_mem_alloc(&b->recv, recv_bytes, TACL_MEM_HOST),
                     TACL_OK);
        if (!in_place)
            cr_assert_eq(tacl_mem_alloc(&b->own_send, send_bytes,
                                        TACL_MEM_HOST), TACL_OK);
    } else {
        b->recv = calloc(1, recv_bytes);
        if (!in_place)
            b->own_send = calloc(1, send_bytes);
        cr_assert(b->recv != NULL && (in_place || b->own_send != NULL));
    }
    b->send = in_place ? (char *)b->recv + send_off : b->own_send;
}

static void bufs_put(test_bufs_t *b)
{
    if (b->mapped) {
        tacl_mem_free(b->recv);
        tacl_mem_free(b->own_send);
    } else {
        free(b->recv);
        free(b->own_send);
    }
}

/*
 * The direct all-gather copies its own block chunk by chunk, each chunk
 * after the previous one from rank r - 1 has arrived, and streams the
 * copies (and flags its receives to stream) exactly when the node's
 * ranks write at least the view's stream_bytes together (0: never).
 * Its receives of chunk c wait, from the third chunk on, for every peer
 * to have taken chunk c - 2.  When it streams and its input is not
 * memory peers can map (tacl_mem_alloc) and it has two peers or more, it
 * stages its block in shared scratch, chunk by chunk at the same pace,
 * and sends from there.
 */
static void check_direct_own_copy(int n, int r, size_t count, int in_place,
                                  uint64_t stream_bytes, int mapped)
{
    cfg_t c = {n, tacl__algo_find(TACL_COLL_ALLGATHER, "direct"), count,
               in_place, TACL_FLOAT32, TACL_SUM, 0, 400};
    const tacl__algo_t *algo = c.algo;
    uint64_t total = (uint64_t)count * 4 * (uint64_t)n, copied = 0;
    uint64_t staged = 0;
    int want_stream = stream_bytes > 0 && total * (uint64_t)n >= stream_bytes;
    int want_stage = want_stream && !mapped && n >= 3;
    static const int one_node[8] = {0};
    tacl__topo_view_t v = simrun_view(one_node, n, r);
    uint32_t chunks = (uint32_t)((count * 4 + 399) / 400), paced = 0;
    tacl__coll_args_t a;
    tacl__sched_t s;
    test_bufs_t b;
    int copies = 0, stage_copies = 0;

    bufs_get(&b, mapped, in_place, (size_t)n * count * 4, count * 4,
             (size_t)r * count * 4);
    a = args_of(&c, b.send, b.recv, 0);
    a.shm_map = 1;
    a.send_mapped = b.mapped;
    cr_assert_leq(n, 8);
    v.stream_bytes = stream_bytes;
    tacl__sched_init(&s, r, n);
    cr_assert_eq(algo->build(&s, &a, &v), TACL_OK, "%s",
                 tacl__last_error());
    for (uint32_t i = 0; i < s.nsteps; i++) {
        const tacl__step_t *st = &s.steps[i];
        int to_stage;

        if (st->kind == TACL__STEP_SEND) {
            const tacl__sched_buf_t *from = &s.bufs[st->src.buf];

            cr_assert_eq(from->role == TACL__BUF_SCRATCH && from->shared,
                         want_stage, "n=%d: a send reads %s", n,
                         want_stage ? "the input" : "scratch");
            if (want_stage) {
                const tacl__step_t *cp = &s.steps[s.deps[st->dep_start]];

                cr_assert(st->ndeps == 1 && cp->kind == TACL__STEP_COPY &&
                              cp->dst.buf == st->src.buf &&
                              cp->dst.off == st->src.off &&
                              cp->bytes == st->bytes,
                          "n=%d: a send does not wait for its chunk's "
                          "staging", n);
            }
        }
        if (st->kind == TACL__STEP_RECV) {
            cr_assert_eq(!!(st->arg & TACL__COPY_STREAM), want_stream,
                         "n=%d: a receive streams %d",
                         n, !!(st->arg & TACL__COPY_STREAM));
        }
        if (st->kind == TACL__STEP_RECV && st->ndeps > 0) {
            const tacl__step_t *nop = &s.steps[s.deps[st->dep_start]];

            cr_assert(st->ndeps == 1 && nop->kind == TACL__STEP_NOP &&
                          nop->ndeps == (uint32_t)n - 1,
                      "n=%d: a receive waits for something other than the "
                      "join of one chunk's sends", n);
            for (uint32_t k = 0; k < nop->ndeps; k++)
                cr_assert_eq(s.steps[s.deps[nop->dep_start + k]].kind,
                             TACL__STEP_SEND, "n=%d: the join holds a "
                             "step that is not a send", n);
            paced++;
        }
        if (st->kind != TACL__STEP_COPY)
            continue;
        to_stage = s.bufs[st->dst.buf].role == TACL__BUF_SCRATCH;
        cr_assert(!to_stage || s.bufs[st->dst.buf].shared,
                  "staged into scratch peers cannot map");
        /* Own copies stream as told; staging stays in cache for the
         * peers about to read it. */
        cr_assert_eq(!!(st->arg & TACL__COPY_STREAM),
                     want_stream && !to_stage,
                     "n=%d count=%zu stream_bytes=%llu: copy %d streams %d",
                     n, count, (unsigned long long)stream_bytes, copies,
                     !!(st->arg & TACL__COPY_STREAM));
        if (to_stage ? stage_copies > 0 : copies > 0) {
            const tacl__step_t *dep;

            cr_assert_eq(st->ndeps, 1, "copy %d has %u dependencies",
                         copies, st->ndeps);
            dep = &s.steps[s.deps[st->dep_start]];
            cr_assert(dep->kind == TACL__STEP_RECV &&
                          dep->peer == (r + n - 1) % n,
                      "n=%d rank %d: copy %d waits for step kind %d from "
                      "%d, not a receive from rank %d", n, r, copies,
                      dep->kind, dep->peer, (r + n - 1) % n);
        }
        if (to_stage) {
            staged += st->bytes;
            stage_copies++;
        } else {
            copied += st->bytes;
            copies++;
        }
    }
    cr_assert_eq(copied, in_place ? 0 : (uint64_t)count * 4,
                 "n=%d rank %d count=%zu: copied %llu bytes", n, r, count,
                 (unsigned long long)copied);
    cr_assert_eq(staged, want_stage ? (uint64_t)count * 4 : 0,
                 "n=%d rank %d count=%zu: staged %llu bytes", n, r, count,
                 (unsigned long long)staged);
    cr_assert(in_place || count * 4 <= 400 || copies > 1,
              "count=%zu: one copy of the whole block", count);
    cr_assert_eq(paced, (chunks > 2 ? chunks - 2 : 0) * (uint32_t)(n - 1),
                 "n=%d count=%zu: %u receives wait for peers to take an "
                 "earlier chunk", n, count, paced);
    tacl__sched_fini(&s);
    bufs_put(&b);
}

/*
 * A streamed direct all-reduce whose output peers cannot map reduces
 * into shared scratch, sends its block from there in the all-gather
 * phase, and copies each reduced chunk to its output once reduced; with
 * an output from tacl_mem_alloc, or with one peer, it stages nothing.
 */
static void check_direct_ar_stage(int n, int r, size_t count, int in_place,
                                  int mapped)
{
    cfg_t c = {n, tacl__algo_find(TACL_COLL_ALLREDUCE, "direct"), count,
               in_place, TACL_FLOAT32, TACL_SUM, 0, 400};
    static const int one_node[8] = {0};
    tacl__topo_view_t v = simrun_view(one_node, n, r);
    uint64_t blk = 0, sent = 0, copied = 0;
    tacl__coll_args_t a;
    tacl__sched_t s;
    test_bufs_t b;
    size_t off;
    int shared = 0, staged = !mapped && n >= 3;

    tacl__block_range(count, n, r, &off, &count);
    blk = (uint64_t)count * 4;
    count = c.count;
    bufs_get(&b, mapped, in_place, count * 4, count * 4, 0);
    a = args_of(&c, b.send, b.recv, 0);
    a.shm_map = 1;
    a.send_mapped = b.mapped;
    v.stream_bytes = 1;
    tacl__sched_init(&s, r, n);
    cr_assert_eq(c.algo->build(&s, &a, &v), TACL_OK, "%s",
                 tacl__last_error());
    for (uint32_t k = 0; k < s.nbufs; k++)
        shared += s.bufs[k].shared;
    for (uint32_t i = 0; i < s.nsteps; i++) {
        const tacl__step_t *st = &s.steps[i], *dep;

        if (st->kind == TACL__STEP_SEND && s.bufs[st->src.buf].shared)
            sent += st->bytes;
        if (st->kind != TACL__STEP_COPY || !s.bufs[st->src.buf].shared)
            continue;
        cr_assert_eq(s.bufs[st->dst.buf].role, TACL__BUF_OUTPUT);
        cr_assert_eq(st->dst.off, off * 4 + st->src.off,
                     "a chunk lands elsewhere in the output");
        cr_assert_eq(st->ndeps, 1);
        dep = &s.steps[s.deps[st->dep_start]];
        cr_assert(dep->kind == TACL__STEP_REDUCE &&
                      dep->dst.buf == st->src.buf &&
                      dep->dst.off == st->src.off,
                  "n=%d rank %d: a chunk is copied out before it is "
                  "reduced into the stage", n, r);
        copied += st->bytes;
    }
    cr_assert_eq(shared, staged && blk > 0, "n=%d r=%d: %d shared buffers",
                 n, r, shared);
    cr_assert_eq(sent, staged ? blk * (uint64_t)(n - 1) : 0,
                 "n=%d r=%d: %llu bytes sent from the stage", n, r,
                 (unsigned long long)sent);
    cr_assert_eq(copied, staged ? blk : 0);
    tacl__sched_fini(&s);
    bufs_put(&b);
}

Test(algorithms, direct_allreduce_stages_unmappable_output)
{
    static const int ns[] = {2, 3, 5};

    for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++)
        for (int r = 0; r < ns[i]; r++)
            for (int mapped = 0; mapped < 2; mapped++) {
                check_direct_ar_stage(ns[i], r, 1001, 0, mapped);
                check_direct_ar_stage(ns[i], r, 1001, 1, mapped);
                check_direct_ar_stage(ns[i], r, 37, 0, mapped);
            }
}

Test(algorithms, direct_allgather_own_copy_and_pace)
{
    static const int ns[] = {2, 3, 5};
    static const size_t counts[] = {1, 99, 1000};

    for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++)
        for (int r = 0; r < ns[i]; r++)
            for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
                uint64_t node = (uint64_t)counts[c] * 4 * ns[i] * ns[i];

                for (int mapped = 0; mapped < 2; mapped++) {
                    check_direct_own_copy(ns[i], r, counts[c], 0, 0,
                                          mapped);
                    check_direct_own_copy(ns[i], r, counts[c], 0, node,
                                          mapped);
                    check_direct_own_copy(ns[i], r, counts[c], 0, node + 1,
                                          mapped);
                    check_direct_own_copy(ns[i], r, counts[c], 0, 1, mapped);
                    check_direct_own_copy(ns[i], r, counts[c], 1, 1, mapped);
                }
            }
}

/*
 * The runner's matching (core's tacl__sched_match, which the simulator
 * shares): a send pairs with the receive of its pair and tag, and an
 * unpaired send or receive or a pair of different lengths is refused.
 */
static int run_pair(uint64_t send_bytes, uint64_t recv_bytes, int extra,
                    char *err, size_t len)
{
    static char src[16], dst[16];
    simrun_t *sr = simrun_new(2);
    tacl__sched_t *s0 = simrun_sched(sr, 0), *s1 = simrun_sched(sr, 1);
    int rc;

    simrun_region(sr, 0, src, sizeof(src), 0, sizeof(src));
    simrun_region(sr, 1, dst, sizeof(dst), 0, 0);
    tacl__sched_send(s0, 1, tacl__bref(tacl__sched_buf(s0, src, 16, TACL__BUF_INPUT, TACL_MEM_HOST), 0),
                     send_bytes, 7, TACL__NO_DEPS);
    if (extra)
        tacl__sched_send(s0, 1,
                         tacl__bref(tacl__sched_buf(s0, src, 16, TACL__BUF_INPUT, TACL_MEM_HOST), 0), 4,
                         8, TACL__NO_DEPS);
    tacl__sched_recv(s1, 0, tacl__bref(tacl__sched_buf(s1, dst, 16, TACL__BUF_OUTPUT, TACL_MEM_HOST), 0),
                     recv_bytes, 7, TACL__NO_DEPS);
    rc = simrun_run(sr, 1, err, len);
    simrun_free(sr);
    return rc;
}

Test(simrun, matches_sends_to_receives)
{
    char err[512];

    cr_expect_eq(run_pair(8, 8, 0, err, sizeof(err)), 0, "%s", err);
    cr_expect_eq(run_pair(8, 4, 0, err, sizeof(err)), -1);
    cr_expect(strstr(err, "send of 8 bytes, receive of 4") != NULL, "%s",
              err);
    cr_expect_eq(run_pair(8, 8, 1, err, sizeof(err)), -1);
    cr_expect(strstr(err, "rank 0 has an unmatched send") != NULL, "%s",
              err);
}
