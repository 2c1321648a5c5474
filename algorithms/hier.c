/*
 * The pieces every hierarchical algorithm is built from (hier.h): the
 * layout of ranks over nodes (member lists, local indices, rails), the
 * build context, and the ring phases over a rail or over a node that
 * MiCS (mics.c), H-Ring (hring.c), HO-Ring (horing.c) and the
 * hierarchical all-reduce (hier_allreduce.c) combine, the staged
 * all-gather and reduce-scatter made of them, plus the cost model they
 * share.
 */
#include <stdlib.h>
#include <string.h>

#include "hier.h"
#include "log.h"

/* Nodes counted on the stack; larger communicators count node by node. */
#define HIER_STACK_NODES 256

int tacl__hier_layout_ok(const tacl__topo_view_t *view)
{
    int g = view->n_nodes, p = view->nranks, m, r, cnt;
    int counts[HIER_STACK_NODES];

    if (g < 2 || view->node_of == NULL || p % g != 0 || p / g < 2)
        return 0;
    if (g <= HIER_STACK_NODES) {
        /* Called by every tuning decision: one pass over the ranks. */
        memset(counts, 0, (size_t)g * sizeof(int));
        for (r = 0; r < p; r++) {
            if (view->node_of[r] < 0 || view->node_of[r] >= g)
                return 0;
            counts[view->node_of[r]]++;
        }
        for (m = 0; m < g; m++)
            if (counts[m] != p / g)
                return 0;
        return 1;
    }
    for (m = 0; m < g; m++) {
        for (cnt = 0, r = 0; r < p; r++)
            cnt += view->node_of[r] == m;
        if (cnt != p / g)
            return 0;
    }
    return 1;
}

tacl_status_t tacl__hier_init(tacl__hier_t *h, const tacl__topo_view_t *view)
{
    int g = view->n_nodes, p = view->nranks, r, m, *fill;

    memset(h, 0, sizeof(*h));
    h->nranks = p;
    h->n_nodes = g;
    h->node_of = view->node_of;
    h->node_start = calloc((size_t)g + 1, sizeof(int));
    h->members = malloc((size_t)p * sizeof(int));
    h->local = malloc((size_t)p * sizeof(int));
    fill = calloc((size_t)g, sizeof(int));
    if (h->node_start == NULL || h->members == NULL || h->local == NULL ||
        fill == NULL)
        goto err_free;
    for (r = 0; r < p; r++)
        h->node_start[view->node_of[r] + 1]++;
    for (m = 0; m < g; m++)
        h->node_start[m + 1] += h->node_start[m];
    /* Ranks ascend, so each node's list comes out sorted by rank. */
    for (r = 0; r < p; r++) {
        m = view->node_of[r];
        h->local[r] = fill[m];
        h->members[h->node_start[m] + fill[m]++] = r;
    }
    free(fill);
    h->regular = 1;
    for (m = 0; m < g; m++)
        if (tacl__hier_node_size(h, m) != tacl__hier_node_size(h, 0))
            h->regular = 0;
    h->k = h->regular ? tacl__hier_node_size(h, 0) : 0;
    return TACL_OK;

err_free:
    free(fill);
    tacl__hier_fini(h);
    return tacl__error(TACL_ERR_NO_MEMORY, COLL,
                       "cannot allocate the member lists of %d ranks", p);
}

void tacl__hier_fini(tacl__hier_t *h)
{
    free(h->node_start);
    free(h->members);
    free(h->local);
    h->node_start = h->members = h->local = NULL;
}

void tacl__hier_rail(const tacl__hier_t *h, int l, int *rail_p)
{
    int m;

    for (m = 0; m < h->n_nodes; m++)
        rail_p[m] = tacl__hier_rank(h, m, l);
}

/*
 * Contexts.
 */
tacl_status_t tacl__hier_ctx_init(tacl__hier_ctx_t *x, tacl__sched_t *s,
                                  const tacl__coll_args_t *args,
                                  const tacl__topo_view_t *view,
                                  uint64_t in_bytes, uint64_t out_bytes,
                                  tacl__hier_pieces_t layout,
                                  uint64_t msgs_per_chunk)
{
    tacl_status_t status;
    size_t i, np, nc;
    int pc, m, l;

    memset(x, 0, sizeof(*x));
    x->s = s;
    x->args = args;
    x->es = tacl_dtype_size(args->dtype);
    status = tacl__hier_init(&x->h, view);
    if (status != TACL_OK)
        return status;
    status = tacl__algo_io(s, args, in_bytes, out_bytes, &x->io);
    if (status != TACL_OK)
        goto err_fini;
    x->g = x->h.n_nodes;
    x->k = x->h.k;
    x->m = view->node_of[s->rank];
    x->l = x->h.local[s->rank];
    np = (size_t)x->g * (size_t)x->k;
    x->poff = malloc(np * sizeof(size_t));
    x->pcnt = malloc(np * sizeof(size_t));
    x->loc = malloc(np * sizeof(tacl__bref_t));
    x->dsts = malloc((size_t)x->g * sizeof(tacl__bref_t));
    if (x->poff == NULL || x->pcnt == NULL || x->loc == NULL ||
        x->dsts == NULL)
        goto err_nomem;
    for (m = 0; m < x->g; m++)
        for (l = 0; l < x->k; l++) {
            pc = tacl__hier_piece(x, m, l);
            if (layout == TACL__HIER_PIECE_RANK) {
                x->poff[pc] = (size_t)tacl__hier_rank(&x->h, m, l) *
                              args->count;
                x->pcnt[pc] = args->count;
            } else {
                tacl__block_range(args->count, (int)np, l * x->g + m,
                                  &x->poff[pc], &x->pcnt[pc]);
            }
            x->maxpiece = TACL_MAX(x->maxpiece, x->pcnt[pc]);
        }
    x->C = tacl__algo_nchunks(args, x->maxpiece, x->es, msgs_per_chunk);
    x->cs = TACL_MAX(TACL_DIV_UP(x->maxpiece, (size_t)x->C), (size_t)1);
    x->C = (uint32_t)TACL_MAX(TACL_DIV_UP(x->maxpiece, x->cs), (size_t)1);
    /* ready, inread, and four phase rows of up to g segments. */
    nc = np * x->C;
    x->work_len = (size_t)x->g * x->C;
    x->ready = malloc((2 * nc + 4 * x->work_len) * sizeof(int32_t));
    if (x->ready == NULL)
        goto err_nomem;
    for (i = 0; i < 2 * nc; i++)
        x->ready[i] = -1;
    x->inread = x->ready + nc;
    x->work = x->inread + nc;
    /* Pieces start where the operation's input puts them. */
    for (pc = 0; pc < (int)np; pc++)
        x->loc[pc] = args->type == TACL_COLL_ALLGATHER
                         ? tacl__bref_add(x->io.out, x->poff[pc] * x->es)
                         : tacl__bref_add(x->io.in, x->poff[pc] * x->es);
    if (args->type == TACL_COLL_ALLGATHER)
        x->loc[tacl__hier_piece(x, x->m, x->l)] = x->io.in;
    return TACL_OK;

err_nomem:
    status = tacl__error(TACL_ERR_NO_MEMORY, COLL,
                         "cannot allocate a hierarchical schedule of %d "
                         "ranks", s->nranks);
    free(x->poff);
    free(x->pcnt);
    free(x->loc);
    free(x->dsts);
err_fini:
    tacl__hier_fini(&x->h);
    return status;
}

tacl_status_t tacl__hier_begin(tacl__hier_ctx_t *x, tacl__sched_t *s,
                               const tacl__coll_args_t *args,
                               const tacl__topo_view_t *view)
{
    uint64_t blk = (uint64_t)args->count * tacl_dtype_size(args->dtype);
    uint64_t all = blk * (uint64_t)s->nranks;
    int ag = args->type == TACL_COLL_ALLGATHER;

    return tacl__hier_ctx_init(x, s, args, view, ag ? blk : all,
                               ag ? all : blk, TACL__HIER_PIECE_RANK,
                               2 * (uint64_t)s->nranks);
}

void tacl__hier_ctx_fini(tacl__hier_ctx_t *x)
{
    free(x->poff);
    free(x->pcnt);
    free(x->loc);
    free(x->dsts);
    free(x->ready);
    free(x->joined);
    tacl__hier_fini(&x->h);
}

tacl__bref_t tacl__hier_scratch(tacl__hier_ctx_t *x, int n)
{
    int32_t b = tacl__sched_scratch(x->s, (uint64_t)n * x->maxpiece * x->es,
                                    x->args->memtype);

    return tacl__bref(b, 0);
}

/* Remember a step for the next join, if phases are being collected. */
static void hier_collect(tacl__hier_ctx_t *x, int32_t id)
{
    int32_t *grown;
    size_t cap;

    if (!x->collect || id < 0)
        return;
    if (x->njoined == x->joined_cap) {
        cap = x->joined_cap ? 2 * x->joined_cap : 64;
        grown = realloc(x->joined, cap * sizeof(int32_t));
        if (grown == NULL) {
            /* The schedule's sticky error: later steps become no-ops and
             * the builder reports it. */
            x->s->status = tacl__error(TACL_ERR_NO_MEMORY, COLL,
                                       "cannot grow a join of %zu steps",
                                       x->njoined);
            x->collect = 0;
            return;
        }
        x->joined = grown;
        x->joined_cap = cap;
    }
    x->joined[x->njoined++] = id;
}

int32_t tacl__hier_join(tacl__hier_ctx_t *x)
{
    int n = tacl__sched_fold(x->s, x->joined, (int)x->njoined);
    int32_t id = n > 1 ? tacl__sched_nop(x->s, x->joined, n)
                       : n == 1 ? x->joined[0] : -1;

    x->njoined = 0;
    x->collect = 0;
    return id;
}

static int hier_mod(int a, int n)
{
    return ((a % n) + n) % n;
}

static uint64_t hier_chunk_off(const tacl__hier_ctx_t *x, uint32_t c)
{
    return (uint64_t)c * x->cs * x->es;
}

void tacl__hier_ag(tacl__hier_ctx_t *x, const tacl__hier_phase_t *ph,
                   const int32_t *war)
{
    int n = ph->n, nseg = ph->nseg, st, j;
    int next = ph->ring[hier_mod(ph->pos + 1, n)];
    int prev = ph->ring[hier_mod(ph->pos - 1, n)];
    uint32_t C = x->C, c;

    for (st = 0; st < n - 1; st++) {
        int bs = hier_mod(ph->pos - st, n), br = hier_mod(ph->pos - st - 1, n);

        for (j = 0; j < nseg; j++) {
            int ps = ph->piece[bs * nseg + j], pr = ph->piece[br * nseg + j];
            tacl__bref_t dst = tacl__bref_add(x->io.out,
                                              x->poff[pr] * x->es);

            for (c = 0; c < C; c++) {
                size_t ls = tacl__chunk_len(x->pcnt[ps], x->cs, c);
                size_t lr = tacl__chunk_len(x->pcnt[pr], x->cs, c);
                uint64_t tag = tacl__algo_tag(
                    x->args,
                    x->tag_next + ((uint64_t)st * nseg + j) * C + c);
                int32_t id;

                if (ls > 0) {
                    id = tacl__sched_send(
                        x->s, next,
                        tacl__bref_add(x->loc[ps], hier_chunk_off(x, c)),
                        ls * x->es, tag,
                        TACL__DEPS(x->ready[ps * C + c],
                                   st == 0 ? ph->gate : -1));
                    hier_collect(x, id);
                }
                if (lr == 0)
                    continue;
                id = tacl__sched_recv(
                    x->s, prev, tacl__bref_add(dst, hier_chunk_off(x, c)),
                    lr * x->es, tag,
                    TACL__DEPS(war != NULL ? war[pr * C + c] : -1));
                x->ready[pr * C + c] = id;
                hier_collect(x, id);
            }
            x->loc[pr] = dst;
        }
    }
    x->tag_next += (uint64_t)(n - 1) * (uint64_t)nseg * C;
}

/* Record that step id read chunk c of piece pc where it now lives. */
static void hier_note_read(tacl__hier_ctx_t *x, int pc, uint32_t c,
                           int32_t id)
{
    if (x->io.has_in && x->loc[pc].buf == x->io.in.buf)
        x->inread[pc * x->C + c] = id;
}

void tacl__hier_rs(tacl__hier_ctx_t *x, const tacl__hier_phase_t *ph,
                   const tacl__bref_t *dst, uint32_t divisor)
{
    int n = ph->n, nseg = ph->nseg, st, j;
    int next = ph->ring[hier_mod(ph->pos + 1, n)];
    int prev = ph->ring[hier_mod(ph->pos - 1, n)];
    uint32_t C = x->C, c;
    size_t rowlen = (size_t)nseg * C, i;
    int32_t *red_prev = x->work, *red_cur = x->work + rowlen, *tmp;
    int32_t *last_send[2] = {x->work + 2 * rowlen, x->work + 3 * rowlen};
    uint64_t slot_bytes = (uint64_t)nseg * x->maxpiece * x->es;
    int32_t scr = tacl__sched_scratch(x->s, slot_bytes * (n > 2 ? 2 : 1),
                                      x->args->memtype);
    tacl_op_t op = tacl__algo_step_op(x->args->op);
    tacl_dtype_t dt = x->args->dtype;

    for (i = 0; i < 4 * rowlen; i++)
        x->work[i] = -1;
    for (st = 0; st < n - 1; st++) {
        int bs = hier_mod(ph->pos - st - 1, n);
        int br = hier_mod(ph->pos - st - 2, n);
        int sl = st % 2, final = st == n - 2;

        for (j = 0; j < nseg; j++) {
            int ps = ph->piece[bs * nseg + j], pr = ph->piece[br * nseg + j];

            for (c = 0; c < C; c++) {
                size_t ls = tacl__chunk_len(x->pcnt[ps], x->cs, c);
                size_t lr = tacl__chunk_len(x->pcnt[pr], x->cs, c);
                size_t idx = (size_t)j * C + c;
                uint64_t tag = tacl__algo_tag(
                    x->args,
                    x->tag_next + ((uint64_t)st * nseg + j) * C + c);
                uint64_t coff = hier_chunk_off(x, c);
                tacl__bref_t slot = tacl__bref(
                    scr, (uint64_t)sl * slot_bytes +
                             (uint64_t)j * x->maxpiece * x->es + coff);
                tacl__bref_t other = tacl__bref(
                    scr, (uint64_t)(1 - sl) * slot_bytes +
                             (uint64_t)j * x->maxpiece * x->es + coff);
                tacl__bref_t src = tacl__bref_add(x->loc[pr], coff);
                int32_t id;

                red_cur[idx] = -1;
                if (ls > 0 && st == 0) {
                    id = tacl__sched_send(
                        x->s, next, tacl__bref_add(x->loc[ps], coff),
                        ls * x->es, tag,
                        TACL__DEPS(x->ready[ps * C + c], ph->gate));
                    hier_note_read(x, ps, c, id);
                    hier_collect(x, id);
                } else if (ls > 0) {
                    id = tacl__sched_send(x->s, next, other, ls * x->es,
                                          tag, TACL__DEPS(red_prev[idx]));
                    last_send[1 - sl][idx] = id;
                    hier_collect(x, id);
                }
                if (lr == 0)
                    continue;
                id = tacl__sched_recv(x->s, prev, slot, lr * x->es, tag,
                                      TACL__DEPS(last_send[sl][idx]));
                if (!final || divisor != 0) {
                    id = tacl__sched_reduce(
                        x->s, slot, slot, src, lr, dt, op,
                        TACL__DEPS(id, x->ready[pr * C + c]));
                    hier_note_read(x, pr, c, id);
                    red_cur[idx] = id;
                }
                if (final && divisor != 0) {
                    id = tacl__sched_div(x->s, tacl__bref_add(dst[j], coff),
                                         slot, lr, dt, divisor,
                                         TACL__DEPS(id));
                } else if (final) {
                    id = tacl__sched_reduce(
                        x->s, tacl__bref_add(dst[j], coff), slot, src, lr,
                        dt, op, TACL__DEPS(id, x->ready[pr * C + c]));
                    hier_note_read(x, pr, c, id);
                }
                if (final)
                    x->ready[pr * C + c] = id;
                hier_collect(x, id);
            }
        }
        tmp = red_prev;
        red_prev = red_cur;
        red_cur = tmp;
    }
    for (j = 0; j < nseg; j++)
        x->loc[ph->piece[ph->pos * nseg + j]] = dst[j];
    x->tag_next += (uint64_t)(n - 1) * (uint64_t)nseg * C;
}

/*
 * Phase constructors.
 */
void tacl__hier_ring_free(tacl__hier_ring_t *r)
{
    free(r->ring);
    free(r->piece);
    r->ring = r->piece = NULL;
}

static tacl_status_t hier_ring_alloc(tacl__hier_ring_t *r, int n, int nseg)
{
    memset(r, 0, sizeof(*r));
    r->ring = malloc((size_t)n * sizeof(int));
    r->piece = malloc((size_t)n * (size_t)TACL_MAX(nseg, 1) * sizeof(int));
    if (r->ring == NULL || r->piece == NULL) {
        tacl__hier_ring_free(r);
        return tacl__error(TACL_ERR_NO_MEMORY, COLL,
                           "cannot allocate a ring of %d ranks", n);
    }
    r->ph.n = n;
    r->ph.ring = r->ring;
    r->ph.piece = r->piece;
    r->ph.nseg = nseg;
    r->ph.gate = -1;
    return TACL_OK;
}

tacl_status_t tacl__hier_rail_ring(tacl__hier_ctx_t *x, tacl__hier_ring_t *r)
{
    tacl_status_t status = hier_ring_alloc(r, x->g, 1);
    int m;

    if (status != TACL_OK)
        return status;
    tacl__hier_rail(&x->h, x->l, r->ring);
    for (m = 0; m < x->g; m++)
        r->piece[m] = tacl__hier_piece(x, m, x->l);
    r->ph.pos = x->m;
    return TACL_OK;
}

tacl_status_t tacl__hier_node_ring(tacl__hier_ctx_t *x,
                                   tacl__hier_nodes_t which,
                                   tacl__hier_ring_t *r)
{
    int nseg = which == TACL__HIER_NODES_ALL    ? x->g
               : which == TACL__HIER_NODES_OWN ? 1
                                                : x->g - 1;
    tacl_status_t status = hier_ring_alloc(r, x->k, nseg);
    int b, m, j;

    if (status != TACL_OK)
        return status;
    for (b = 0; b < x->k; b++) {
        r->ring[b] = tacl__hier_rank(&x->h, x->m, b);
        for (j = 0, m = 0; m < x->g; m++) {
            if ((which == TACL__HIER_NODES_OWN && m != x->m) ||
                (which == TACL__HIER_NODES_OTHERS && m == x->m))
                continue;
            r->piece[b * nseg + j++] = tacl__hier_piece(x, m, b);
        }
    }
    r->ph.pos = x->l;
    return TACL_OK;
}

void tacl__hier_rs_partials(tacl__hier_ctx_t *x, const tacl__hier_ring_t *r,
                            tacl__bref_t np)
{
    int j, nseg = r->ph.nseg;

    for (j = 0; j < nseg; j++) {
        int node = r->piece[r->ph.pos * nseg + j] / x->k;

        x->dsts[j] = tacl__bref_add(np,
                                    (uint64_t)node * x->maxpiece * x->es);
    }
    tacl__hier_rs(x, &r->ph, x->dsts, 0);
}

void tacl__hier_copy_own(tacl__hier_ctx_t *x)
{
    if (x->args->type != TACL_COLL_ALLGATHER || x->io.in_place)
        return;
    tacl__sched_copy(x->s,
                     tacl__bref_add(x->io.out, (uint64_t)x->s->rank *
                                                   x->args->count * x->es),
                     x->io.in, x->args->count * x->es, TACL__NO_DEPS);
}

/*
 * The staged all-gather and reduce-scatter: this rank's rail ring and the
 * ring of its node over every node's pieces.
 */
static tacl_status_t hier_rings(tacl__hier_ctx_t *x, tacl__hier_ring_t *rail,
                                tacl__hier_ring_t *node)
{
    tacl_status_t status = tacl__hier_rail_ring(x, rail);

    if (status != TACL_OK)
        return status;
    status = tacl__hier_node_ring(x, TACL__HIER_NODES_ALL, node);
    if (status != TACL_OK)
        tacl__hier_ring_free(rail);
    return status;
}

tacl_status_t tacl__hier_allgather(tacl__hier_ctx_t *x, int joined)
{
    /* In place, an all-reduce's receives wait for the reduce-scatter's
     * last reads of the bytes they overwrite; an all-gather has none. */
    const int32_t *war = x->io.in_place ? x->inread : NULL;
    tacl__hier_ring_t rail, node;
    tacl_status_t status = hier_rings(x, &rail, &node);

    if (status != TACL_OK)
        return status;
    tacl__hier_copy_own(x);
    x->collect = joined;
    tacl__hier_ag(x, &rail.ph, war);
    if (joined)
        node.ph.gate = tacl__hier_join(x);
    tacl__hier_ag(x, &node.ph, war);
    tacl__hier_ring_free(&node);
    tacl__hier_ring_free(&rail);
    return TACL_OK;
}

tacl_status_t tacl__hier_reduce_scatter(tacl__hier_ctx_t *x, int joined)
{
    tacl__hier_ring_t rail, node;
    tacl__bref_t np;
    uint32_t div = x->args->op == TACL_AVG ? (uint32_t)x->s->nranks : 0;
    tacl_status_t status = hier_rings(x, &rail, &node);

    if (status != TACL_OK)
        return status;
    np = tacl__hier_scratch(x, x->g);
    x->collect = joined;
    tacl__hier_rs_partials(x, &node, np);
    if (joined)
        rail.ph.gate = tacl__hier_join(x);
    x->dsts[0] = tacl__bref_add(x->io.out,
                                x->args->type == TACL_COLL_ALLREDUCE
                                    ? x->poff[tacl__hier_piece(x, x->m, x->l)]
                                          * x->es
                                    : 0);
    tacl__hier_rs(x, &rail.ph, x->dsts, div);
    tacl__hier_ring_free(&node);
    tacl__hier_ring_free(&rail);
    return TACL_OK;
}

tacl_status_t tacl__hier_run(tacl__sched_t *s, const tacl__coll_args_t *args,
                             const tacl__topo_view_t *view,
                             tacl__hier_body_t body, int arg)
{
    tacl__hier_ctx_t x;
    tacl_status_t status;

    if (args->count == 0)
        return TACL_OK;
    if (!tacl__hier_layout_ok(view))
        return tacl__ring_build(s, args, view);
    status = tacl__hier_begin(&x, s, args, view);
    if (status != TACL_OK)
        return status;
    status = body(&x, arg);
    tacl__hier_ctx_fini(&x);
    if (status != TACL_OK)
        return status;
    return tacl__sched_status(s);
}

/*
 * MiCS and H-Ring share their data flow; joined holds the second stage
 * until the first has completed everywhere on this rank (H-Ring's strict
 * phases) instead of pipelining it behind the first (MiCS).
 */
static tacl_status_t hier_staged(tacl__hier_ctx_t *x, int joined)
{
    return x->args->type == TACL_COLL_ALLGATHER
               ? tacl__hier_allgather(x, joined)
               : tacl__hier_reduce_scatter(x, joined);
}

tacl_status_t tacl__hier_staged_build(tacl__sched_t *s,
                                      const tacl__coll_args_t *args,
                                      const tacl__topo_view_t *view,
                                      int joined)
{
    return tacl__hier_run(s, args, view, hier_staged, joined);
}

void tacl__hier_model(const tacl__coll_args_t *args,
                      const tacl__topo_view_t *view, double alpha,
                      double beta, tacl__hier_model_t *mod_p)
{
    tacl__hier_model_t d;
    double es = (double)tacl_dtype_size(args->dtype);
    double total = (double)args->count * es;

    d.p = view->nranks;
    d.g = view->n_nodes > 0 ? view->n_nodes : 1;
    d.k = d.p / d.g;
    if (args->type != TACL_COLL_ALLREDUCE)
        total *= d.p;
    d.b = total / d.p;
    d.chunks = 1;
    if (args->chunk_bytes > 0)
        d.chunks = TACL_MAX(1.0, d.b / (double)args->chunk_bytes);
    d.a_net = tacl__link_alpha(view, TACL_LINK_NET, alpha);
    d.b_net = tacl__link_beta(view, TACL_LINK_NET, beta);
    d.a_host = tacl__cost_intra_alpha(args, view);
    d.b_host = tacl__cost_intra_beta(args, view);
    /* The k rails of a node send at once, each on its NIC port; a
     * piece's chunks pipeline, so their latencies overlap the transfer
     * but for one chunk's. */
    d.inter = (d.g - 1) *
              (d.a_net / d.chunks + d.b / tacl__cost_flow_bw(
                                   view, beta, (int)d.k,
                                   tacl__cost_port_ranks(view, (int)d.k)));
    d.intra = (d.k - 1) * (d.a_host + d.g * d.b * d.b_host);
    d.tail = (d.k - 1) * (d.a_host + d.b / d.chunks * d.b_host);
    *mod_p = d;
}
