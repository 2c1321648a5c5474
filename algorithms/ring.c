/*
 * Pipelined ring all-gather, reduce-scatter and all-reduce (Patarasuk and
 * Yuan, "Bandwidth optimal all-reduce algorithms for clusters of
 * workstations", JPDC 2009, section 3; the ring NCCL uses).
 *
 * The vector is cut into n blocks (tacl__block_range: uneven blocks,
 * possibly empty) and each block into chunks on a grid of cs elements.
 * Reduce-scatter runs n - 1 steps: at step k rank r sends its partial sum
 * of block r - k - 1 to the next rank and receives block r - k - 2 from
 * the previous one, which it combines with its own input; after the last
 * step it holds block r fully reduced.  All-gather runs n - 1 steps that
 * forward whole blocks.  All-reduce is reduce-scatter then all-gather,
 * both in the receive buffer.
 *
 * Chunk c of step k + 1 depends only on chunk c of step k, so up to
 * nchunks chunks are in flight around the ring.  Partial sums live in two
 * scratch slots of one block each, used alternately; a receive into a
 * slot waits for the send that last read the same chunk of it.  Every
 * output byte is written once: reduce-scatter's final combine writes the
 * output directly (for AVG, the division does).  Zero-length chunks are
 * skipped on both sides, which agree because they cut the same block.
 */
#include <stdlib.h>

#include "toolbox.h"
#include "cost.h"
#include "log.h"

typedef struct {
    tacl__sched_t *s;
    const tacl__coll_args_t *args;
    tacl__algo_io_t io;
    int n, r, next, prev;
    size_t es;
    size_t total;        /* elements of the n-block vector */
    size_t cs;           /* chunk grid, elements */
    uint32_t nchunks;
    tacl_op_t op;        /* op of REDUCE steps */
    int32_t slots;       /* scratch: two slots of slot_bytes */
    uint64_t slot_bytes;
    int32_t *fin;        /* per chunk: the step that finished block r */
    int32_t *inread;     /* per block and chunk: last read of the input */
    int32_t *ids;        /* working arrays, see ring_alloc */
} ring_t;

static int ring_mod(int x, int n)
{
    return ((x % n) + n) % n;
}

static size_t ring_blk_off(const ring_t *g, int b)
{
    size_t off, cnt;

    tacl__block_range(g->total, g->n, ring_mod(b, g->n), &off, &cnt);
    return off;
}

static size_t ring_blk_cnt(const ring_t *g, int b)
{
    size_t off, cnt;

    tacl__block_range(g->total, g->n, ring_mod(b, g->n), &off, &cnt);
    return cnt;
}

/* Byte offset of chunk c of block b in the full vector. */
static uint64_t ring_at(const ring_t *g, int b, uint32_t c)
{
    return (uint64_t)(ring_blk_off(g, b) + (size_t)c * g->cs) * g->es;
}

static tacl__bref_t ring_slot(const ring_t *g, int slot, uint32_t c)
{
    return tacl__bref(g->slots, (uint64_t)slot * g->slot_bytes +
                                    (uint64_t)c * g->cs * g->es);
}

static tacl_status_t ring_alloc(ring_t *g, uint64_t msgs_per_chunk)
{
    size_t maxblk = TACL_DIV_UP(g->total, (size_t)g->n);
    size_t i, nids;

    g->nchunks = tacl__algo_nchunks(g->args, maxblk, g->es, msgs_per_chunk);
    g->cs = TACL_DIV_UP(maxblk, g->nchunks);
    if (g->cs == 0)
        g->cs = 1;
    g->nchunks = (uint32_t)TACL_MAX(TACL_DIV_UP(maxblk, g->cs), (size_t)1);
    g->slot_bytes = (uint64_t)maxblk * g->es;
    /* fin, inread (n per chunk) and six working rows. */
    nids = (size_t)g->nchunks * (size_t)(g->n + 7);
    g->ids = malloc(nids * sizeof(*g->ids));
    if (g->ids == NULL)
        return tacl__error(TACL_ERR_NO_MEMORY, COLL,
                           "cannot allocate a ring schedule of %u chunks",
                           g->nchunks);
    for (i = 0; i < nids; i++)
        g->ids[i] = -1;
    g->fin = g->ids;
    g->inread = g->ids + g->nchunks;
    return TACL_OK;
}

/* Row i (0..5) of the working arrays. */
static int32_t *ring_row(const ring_t *g, int i)
{
    return g->ids + (size_t)g->nchunks * (size_t)(g->n + 1 + i);
}

/*
 * Reduce-scatter steps; the reduced block r lands at dst (block r's
 * place in the output), and g->fin holds the steps that wrote it.
 */
static void ring_rs(ring_t *g, tacl__bref_t dst)
{
    tacl__sched_t *s = g->s;
    int32_t *red_prev = ring_row(g, 0), *red_cur = ring_row(g, 1);
    int32_t *last_send[2] = {ring_row(g, 2), ring_row(g, 3)};
    uint32_t C = g->nchunks, c;
    int k, n = g->n;

    for (k = 0; k < n - 1; k++) {
        int bs = ring_mod(g->r - k - 1, n), br = ring_mod(g->r - k - 2, n);
        size_t cnt_s = ring_blk_cnt(g, bs), cnt_r = ring_blk_cnt(g, br);
        int slot = k % 2, final = k == n - 2;
        int32_t *tmp;

        for (c = 0; c < C; c++) {
            size_t ls = tacl__chunk_len(cnt_s, g->cs, c);
            size_t lr = tacl__chunk_len(cnt_r, g->cs, c);
            uint64_t tag = tacl__algo_tag(g->args, (uint64_t)k * C + c);
            tacl__bref_t in_r = tacl__bref_add(g->io.in, ring_at(g, br, c));
            tacl__bref_t sl = ring_slot(g, slot, c);
            int32_t id;

            red_cur[c] = -1;
            if (ls > 0 && k == 0) {
                id = tacl__sched_send(s, g->next,
                                      tacl__bref_add(g->io.in,
                                                     ring_at(g, bs, c)),
                                      ls * g->es, tag, TACL__NO_DEPS);
                g->inread[(size_t)bs * C + c] = id;
            } else if (ls > 0) {
                id = tacl__sched_send(s, g->next, ring_slot(g, 1 - slot, c),
                                      ls * g->es, tag,
                                      TACL__DEPS(red_prev[c]));
                last_send[1 - slot][c] = id;
            }
            if (lr == 0)
                continue;
            id = tacl__sched_recv(s, g->prev, sl, lr * g->es, tag,
                                  TACL__DEPS(last_send[slot][c]));
            if (!final) {
                id = tacl__sched_reduce(s, sl, sl, in_r, lr,
                                        g->args->dtype, g->op,
                                        TACL__DEPS(id));
                red_cur[c] = id;
                g->inread[(size_t)br * C + c] = id;
            } else if (g->args->op == TACL_AVG) {
                id = tacl__sched_reduce(s, sl, sl, in_r, lr,
                                        g->args->dtype, g->op,
                                        TACL__DEPS(id));
                g->fin[c] = tacl__sched_div(
                    s, tacl__bref_add(dst, (uint64_t)c * g->cs * g->es), sl,
                    lr, g->args->dtype, (uint32_t)n, TACL__DEPS(id));
            } else {
                g->fin[c] = tacl__sched_reduce(
                    s, tacl__bref_add(dst, (uint64_t)c * g->cs * g->es), sl,
                    in_r, lr, g->args->dtype, g->op, TACL__DEPS(id));
            }
        }
        tmp = red_prev;
        red_prev = red_cur;
        red_cur = tmp;
    }
}

/*
 * All-gather steps over the output.  src0 is where this rank's own block
 * is read from at the first step; after_rs says the steps follow ring_rs
 * (the first sends wait for g->fin, and in place every receive waits for
 * the reduce-scatter's last read of the input it overwrites).
 */
static void ring_ag(ring_t *g, tacl__bref_t src0, int after_rs,
                    uint64_t tag_base)
{
    tacl__sched_t *s = g->s;
    int32_t *recv_prev = ring_row(g, 4), *recv_cur = ring_row(g, 5), *tmp;
    uint32_t C = g->nchunks, c;
    int k, n = g->n;

    for (k = 0; k < n - 1; k++) {
        int bs = ring_mod(g->r - k, n), br = ring_mod(g->r - k - 1, n);
        size_t cnt_s = ring_blk_cnt(g, bs), cnt_r = ring_blk_cnt(g, br);

        for (c = 0; c < C; c++) {
            size_t ls = tacl__chunk_len(cnt_s, g->cs, c);
            size_t lr = tacl__chunk_len(cnt_r, g->cs, c);
            uint64_t tag = tacl__algo_tag(g->args,
                                          tag_base + (uint64_t)k * C + c);
            int32_t war = -1;

            recv_cur[c] = -1;
            if (ls > 0 && k == 0)
                tacl__sched_send(s, g->next,
                                 tacl__bref_add(src0, (uint64_t)c * g->cs *
                                                          g->es),
                                 ls * g->es, tag,
                                 TACL__DEPS(after_rs ? g->fin[c] : -1));
            else if (ls > 0)
                tacl__sched_send(s, g->next,
                                 tacl__bref_add(g->io.out, ring_at(g, bs, c)),
                                 ls * g->es, tag, TACL__DEPS(recv_prev[c]));
            if (lr == 0)
                continue;
            if (after_rs && g->io.in_place)
                war = g->inread[(size_t)br * C + c];
            recv_cur[c] = tacl__sched_recv(
                s, g->prev, tacl__bref_add(g->io.out, ring_at(g, br, c)),
                lr * g->es, tag, TACL__DEPS(war));
        }
        tmp = recv_prev;
        recv_prev = recv_cur;
        recv_cur = tmp;
    }
}

int tacl__ring_supports(const tacl__coll_args_t *args,
                        const tacl__topo_view_t *view)
{
    return args->type == TACL_COLL_ALLGATHER ||
           args->type == TACL_COLL_REDUCE_SCATTER ||
           args->type == TACL_COLL_ALLREDUCE;
}

/* The rank r sends to at every step. */
static int ring_cost_peer(int r, int n, int d)
{
    (void)d;
    return tacl__ring_next(r, n);
}

/*
 * On one node every step crosses the host link.  On several nodes a step
 * takes as long as its slowest flow (tacl__cost_step_time): an edge out
 * of a node on the NIC port of its rail, shared by the ring edges that
 * leave on that port at once (one per node when ranks are numbered node
 * by node, all of a node's ranks when they alternate), or an edge inside
 * a node, whichever is slower.
 */
double tacl__ring_cost(const tacl__coll_args_t *args,
                       const tacl__topo_view_t *view, double alpha,
                       double beta)
{
    double p = view->nranks, es = (double)tacl_dtype_size(args->dtype);
    double m = (double)args->count * es, steps = p - 1;
    double chunks = 1, blk;

    if (args->type != TACL_COLL_ALLREDUCE)
        m *= p;
    if (args->chunk_bytes > 0 && p > 0)
        chunks = TACL_MAX(1.0, m / p / (double)args->chunk_bytes);
    if (args->type == TACL_COLL_ALLREDUCE)
        steps *= 2;
    blk = p > 0 ? m / p : 0;
    if (view->n_nodes > 1) {
        /* The ring is pipelined: the transfers, at the slowest edge's
         * rate, overlap a block's latencies on its way round (paid twice
         * in a reduce-scatter, whose hop also waits for the receiver's
         * previous reduction: so the simulator finds), and the longer of
         * the two is the ring's time. */
        double hops = args->type == TACL_COLL_ALLGATHER ? 1
                      : args->type == TACL_COLL_REDUCE_SCATTER ? 2
                                                               : 3;
        double an = tacl__link_alpha(view, TACL_LINK_NET, alpha);

        return TACL_MAX(hops * tacl__cost_path_alpha(args, view, (int)p,
                                                     ring_cost_peer, 0,
                                                     alpha),
                        steps * tacl__cost_step_xfer(args, view, (int)p,
                                                     ring_cost_peer, 0, blk,
                                                     beta)) +
               chunks * an;
    }
    alpha = tacl__link_alpha(view, TACL_LINK_HOST, alpha);
    beta = tacl__link_beta(view, TACL_LINK_HOST, beta);
    /* Pipelining adds one latency per extra chunk, not per step; each
     * rank reduces n - 1 blocks. */
    return (steps + chunks - 1) * alpha + steps * blk * beta +
           tacl__cost_reduced(args, (p - 1) * blk) * TACL__COST_GAMMA_HOST;
}

tacl_status_t tacl__ring_build(tacl__sched_t *s, const tacl__coll_args_t *args,
                               const tacl__topo_view_t *view)
{
    ring_t g = {0};
    tacl_status_t status;
    int ar = args->type == TACL_COLL_ALLREDUCE;
    int rs = args->type == TACL_COLL_REDUCE_SCATTER;
    int done;

    g.s = s;
    g.args = args;
    g.n = s->nranks;
    g.r = s->rank;
    g.next = tacl__ring_next(g.r, g.n);
    g.prev = tacl__ring_prev(g.r, g.n);
    g.es = tacl_dtype_size(args->dtype);
    g.op = tacl__algo_step_op(args->op);
    if (args->count == 0)
        return TACL_OK;
    status = tacl__algo_blocks_io(s, args, &g.io, &g.total, &done);
    if (status != TACL_OK || done)
        return status;
    status = ring_alloc(&g, (uint64_t)(g.n - 1) * (ar ? 2 : 1));
    if (status != TACL_OK)
        return status;
    if (rs || ar)
        g.slots = tacl__sched_scratch(s, g.slot_bytes * (g.n > 2 ? 2 : 1),
                                      args->memtype);

    if (rs) {
        ring_rs(&g, g.io.out);
    } else if (ar) {
        tacl__bref_t own = tacl__bref_add(g.io.out, ring_at(&g, g.r, 0));

        ring_rs(&g, own);
        ring_ag(&g, own, 1, (uint64_t)(g.n - 1) * g.nchunks);
    } else {
        tacl__bref_t own = tacl__bref_add(g.io.out, ring_at(&g, g.r, 0));

        if (!g.io.in_place)
            tacl__sched_copy(s, own, g.io.in, args->count * g.es,
                             TACL__NO_DEPS);
        ring_ag(&g, g.io.in, 0, 0);
    }
    free(g.ids);
    return tacl__sched_status(s);
}
