/*
 * Binomial-tree broadcast and reduce for any root (Thakur, Rabenseifner
 * and Gropp, IJHPCA 2005, sections 4.2 and 4.6), pipelined in chunks so
 * that a large message streams down (or up) the tree instead of being
 * stored and forwarded whole at every level.
 *
 * Ranks are renumbered relative to the root (v = r - root mod n).  Rank v
 * has parent v - lowbit(v) and children v + m for every power of two m
 * below lowbit(v) (below n for the root) with v + m < n.  Broadcast:
 * receive chunk c from the parent, then forward it to every child.
 * Reduce: receive chunk c from every child into its own scratch slot,
 * combine them with the own input in an accumulator, and send it to the
 * parent; the root's last combine (or, for AVG, the division) writes its
 * output once.  Scratch slots are reused every TREE_WINDOW chunks, so
 * scratch stays (children + 1) * TREE_WINDOW chunks however large the
 * message.  Reduction ops are commutative, so the combine order is
 * free; it follows the children from the smallest subtree up.
 */
#include "toolbox.h"
#include "log.h"

typedef struct {
    int vrank, parent;     /* parent -1 at the root */
    int nchildren;
    int children[32];      /* real ranks, largest subtree first */
} tree_node_t;

static void tree_node(int r, int root, int n, tree_node_t *t)
{
    int v = (r - root + n) % n, low, m;

    t->vrank = v;
    t->parent = -1;
    t->nchildren = 0;
    low = v ? (v & -v) : (1 << tacl__log2_ceil(n));
    if (v)
        t->parent = (v - low + root) % n;
    for (m = low >> 1; m >= 1; m >>= 1)
        if (v + m < n)
            t->children[t->nchildren++] = (v + m + root) % n;
}

static tacl_status_t tree_bcast(tacl__sched_t *s,
                                const tacl__coll_args_t *args)
{
    int n = s->nranks, r = s->rank, root = args->root, i;
    size_t es = tacl_dtype_size(args->dtype), cs;
    uint64_t m = (uint64_t)args->count * es;
    uint32_t C, c;
    tree_node_t t;
    tacl__algo_io_t io;
    tacl_status_t status;

    tree_node(r, root, n, &t);
    status = tacl__algo_io(s, args, r == root ? m : 0, m, &io);
    if (status != TACL_OK)
        return status;
    if (r == root && !io.in_place)
        tacl__sched_copy(s, io.out, io.in, m, TACL__NO_DEPS);
    C = tacl__algo_nchunks(args, args->count, es, 1);
    cs = TACL_DIV_UP(args->count, (size_t)C);
    for (c = 0; c < C; c++) {
        size_t len = tacl__chunk_len(args->count, cs, c);
        uint64_t off = (uint64_t)c * cs * es, tag = tacl__algo_tag(args, c);
        tacl__bref_t src = tacl__bref_add(r == root ? io.in : io.out, off);
        int32_t rid = -1;

        if (len == 0)
            continue;
        if (t.parent >= 0)
            rid = tacl__sched_recv(s, t.parent, src, len * es, tag,
                                   TACL__NO_DEPS);
        for (i = 0; i < t.nchildren; i++)
            tacl__sched_send(s, t.children[i], src, len * es, tag,
                             TACL__DEPS(rid));
    }
    return tacl__sched_status(s);
}

/* Chunks of a reduce in flight at once; bounds its scratch. */
#define TREE_WINDOW 4

static tacl_status_t tree_reduce(tacl__sched_t *s,
                                 const tacl__coll_args_t *args)
{
    int n = s->nranks, r = s->rank, root = args->root, i;
    size_t es = tacl_dtype_size(args->dtype), cs;
    uint64_t m = (uint64_t)args->count * es, slot;
    tacl_op_t op = tacl__algo_step_op(args->op);
    int32_t acc = -1, tmp = -1;
    /* Per window slot: the last step that read each child's slot, and
     * the last step that read the accumulator slot. */
    int32_t tmp_read[32][TREE_WINDOW], acc_read[TREE_WINDOW];
    uint32_t C, c, w;
    tree_node_t t;
    tacl__algo_io_t io;
    tacl_status_t status;

    tree_node(r, root, n, &t);
    status = tacl__algo_io(s, args, m, r == root ? m : 0, &io);
    if (status != TACL_OK)
        return status;
    if (n == 1)
        return tacl__algo_alone(s, args, &io);
    C = tacl__algo_nchunks(args, args->count, es, 1);
    cs = TACL_DIV_UP(args->count, (size_t)C);
    w = TACL_MIN(C, (uint32_t)TREE_WINDOW);
    slot = (uint64_t)cs * es * w;
    if (t.nchildren > 0) {
        acc = tacl__sched_scratch(s, slot, args->memtype);
        tmp = tacl__sched_scratch(s, slot * (uint64_t)t.nchildren,
                                  args->memtype);
    }
    for (c = 0; c < TREE_WINDOW; c++) {
        acc_read[c] = -1;
        for (i = 0; i < 32; i++)
            tmp_read[i][c] = -1;
    }
    for (c = 0; c < C; c++) {
        size_t len = tacl__chunk_len(args->count, cs, c);
        uint64_t off = (uint64_t)c * cs * es, tag = tacl__algo_tag(args, c);
        uint64_t woff = (uint64_t)(c % w) * cs * es;
        tacl__bref_t cur = tacl__bref_add(io.in, off);
        int32_t dep = -1, rid;

        if (len == 0)
            continue;
        for (i = t.nchildren - 1; i >= 0; i--) {
            tacl__bref_t in2 = tacl__bref(tmp, slot * (uint64_t)i + woff);
            tacl__bref_t dst = tacl__bref(acc, woff);

            if (i == 0 && r == root && args->op != TACL_AVG)
                dst = tacl__bref_add(io.out, off);
            rid = tacl__sched_recv(s, t.children[i], in2, len * es, tag,
                                   TACL__DEPS(tmp_read[i][c % w]));
            /* The first combine into the accumulator slot waits for the
             * chunk that used it last to have left. */
            dep = tacl__sched_reduce(s, dst, cur, in2, len, args->dtype, op,
                                     TACL__DEPS(rid, dep,
                                                acc_read[c % w]));
            tmp_read[i][c % w] = dep;
            cur = dst;
        }
        if (r != root)
            dep = tacl__sched_send(s, t.parent, cur, len * es, tag,
                                   TACL__DEPS(dep));
        else if (args->op == TACL_AVG)
            dep = tacl__sched_div(s, tacl__bref_add(io.out, off), cur, len,
                                  args->dtype, (uint32_t)n,
                                  TACL__DEPS(dep));
        acc_read[c % w] = dep;
    }
    return tacl__sched_status(s);
}

int tacl__tree_supports(const tacl__coll_args_t *args,
                        const tacl__topo_view_t *view)
{
    return (args->type == TACL_COLL_BROADCAST ||
            args->type == TACL_COLL_REDUCE) &&
           args->root >= 0 && args->root < view->nranks;
}

double tacl__tree_cost(const tacl__coll_args_t *args,
                       const tacl__topo_view_t *view, double alpha,
                       double beta)
{
    double m = (double)args->count * (double)tacl_dtype_size(args->dtype);
    double chunks = 1;

    if (args->chunk_bytes > 0)
        chunks = TACL_MAX(1.0, m / (double)args->chunk_bytes);
    return (tacl__log2_ceil(view->nranks) + chunks - 1) *
           (alpha + m / chunks * beta);
}

tacl_status_t tacl__tree_build(tacl__sched_t *s, const tacl__coll_args_t *args,
                               const tacl__topo_view_t *view)
{
    if (args->count == 0)
        return TACL_OK;
    if (args->root < 0 || args->root >= s->nranks)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "root %d outside 0..%d", args->root,
                           s->nranks - 1);
    if (args->type == TACL_COLL_BROADCAST)
        return tree_bcast(s, args);
    if (args->type == TACL_COLL_REDUCE)
        return tree_reduce(s, args);
    return tacl__error(TACL_ERR_UNSUPPORTED, COLL, "tree does not run %s",
                       tacl_coll_name(args->type));
}
