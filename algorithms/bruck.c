/*
 * Bruck all-gather (Bruck, Ho, Kipnis, Upfal and Weathersby, "Efficient
 * algorithms for all-to-all communications in multiport message-passing
 * systems", IEEE TPDS 1997, section 3) and the dissemination barrier
 * (Hensgen, Finkel and Manber, "Two algorithms for barrier
 * synchronization", IJPP 1988).  Both take ceil(log2 n) rounds for any n.
 *
 * All-gather round k (d = 2^k): rank r holds blocks r .. r + d - 1 (mod n)
 * and sends the first min(d, n - d) of them to rank r - d, while receiving
 * blocks r + d .. from rank r + d.  Blocks are received straight into
 * their final places in the output, so no rotation is needed at the end;
 * a range that wraps past the last block travels as two messages.
 *
 * Barrier round k: a zero-byte message to r + d and one from r - d; the
 * next round's message waits for this round's.
 */
#include "toolbox.h"
#include "cost.h"
#include "log.h"

/*
 * Splits blocks [first, first + cnt) (mod n) into at most two contiguous
 * pieces; returns the count and fills start/len.
 */
static int bruck_pieces(int first, int cnt, int n, int start[2], int len[2])
{
    first %= n;
    if (first + cnt <= n) {
        start[0] = first;
        len[0] = cnt;
        return 1;
    }
    start[0] = first;
    len[0] = n - first;
    start[1] = 0;
    len[1] = cnt - len[0];
    return 2;
}

static tacl_status_t bruck_allgather(tacl__sched_t *s,
                                     const tacl__coll_args_t *args)
{
    int n = s->nranks, r = s->rank, d, k, i, np;
    int start[2], len[2], ndeps = 0;
    size_t es = tacl_dtype_size(args->dtype);
    uint64_t blk = (uint64_t)args->count * es;
    int32_t deps[TACL__MAX_DEPS], recvs[TACL__MAX_DEPS];
    int nrecvs = 0;
    tacl__algo_io_t io;
    tacl_status_t status;

    status = tacl__algo_io(s, args, blk, blk * (uint64_t)n, &io);
    if (status != TACL_OK)
        return status;
    if (!io.in_place)
        deps[ndeps++] = tacl__algo_own_block(s, &io, r, blk);
    for (d = 1, k = 0; d < n; d <<= 1, k++) {
        int cnt = TACL_MIN(d, n - d);
        int to = (r - d + n) % n, from = (r + d) % n;

        /* What this rank holds so far: own block and earlier receives. */
        for (i = 0; i < nrecvs; i++)
            deps[ndeps++] = recvs[i];
        nrecvs = 0;
        np = bruck_pieces(r, cnt, n, start, len);
        for (i = 0; i < np; i++) {
            uint64_t tag = tacl__algo_tag(args, 2 * (uint64_t)k + i);
            tacl__bref_t src =
                tacl__bref_add(io.out, blk * (uint64_t)start[i]);

            if (k == 0)
                src = io.in; /* the first round sends the own block */
            tacl__sched_send(s, to, src, blk * (uint64_t)len[i], tag,
                             k == 0 ? NULL : deps, k == 0 ? 0 : ndeps);
        }
        np = bruck_pieces(from, cnt, n, start, len);
        for (i = 0; i < np; i++) {
            uint64_t tag = tacl__algo_tag(args, 2 * (uint64_t)k + i);

            recvs[nrecvs++] = tacl__sched_recv(
                s, from, tacl__bref_add(io.out, blk * (uint64_t)start[i]),
                blk * (uint64_t)len[i], tag, TACL__NO_DEPS);
        }
    }
    return tacl__sched_status(s);
}

static tacl_status_t bruck_barrier(tacl__sched_t *s,
                                   const tacl__coll_args_t *args)
{
    int n = s->nranks, r = s->rank, d, k;
    int32_t prev = -1, dummy;

    if (n == 1)
        return TACL_OK;
    /* A byte of scratch gives zero-byte messages a valid reference. */
    dummy = tacl__sched_scratch(s, 1, args->memtype);
    for (d = 1, k = 0; d < n; d <<= 1, k++) {
        uint64_t tag = tacl__algo_tag(args, (uint64_t)k);

        tacl__sched_send(s, (r + d) % n, tacl__bref(dummy, 0), 0, tag,
                         TACL__DEPS(prev));
        prev = tacl__sched_recv(s, (r - d + n) % n, tacl__bref(dummy, 0), 0,
                                tag, TACL__DEPS(prev));
    }
    return tacl__sched_status(s);
}

int tacl__bruck_supports(const tacl__coll_args_t *args,
                         const tacl__topo_view_t *view)
{
    return args->type == TACL_COLL_ALLGATHER ||
           args->type == TACL_COLL_BARRIER;
}

/* The rank r sends to at distance d. */
static int bruck_cost_peer(int r, int n, int d)
{
    return (r - d + n) % n;
}

double tacl__bruck_cost(const tacl__coll_args_t *args,
                        const tacl__topo_view_t *view, double alpha,
                        double beta)
{
    int n = view->nranks;
    double m = (double)args->count * (double)tacl_dtype_size(args->dtype);
    double rounds = tacl__log2_ceil(n), t = 0;
    int d;

    if (view->n_nodes > 1) {
        /* Round by round on the link it crosses: at distance d each
         * rank sends min(d, n - d) blocks (nothing for the barrier). */
        for (d = 1; d < n; d <<= 1)
            t += tacl__cost_step_time(
                args, view, n, bruck_cost_peer, d,
                args->type == TACL_COLL_BARRIER ? 0
                                                 : TACL_MIN(d, n - d) * m,
                alpha, beta);
        return t;
    }
    alpha = tacl__link_alpha(view, TACL_LINK_HOST, alpha);
    beta = tacl__link_beta(view, TACL_LINK_HOST, beta);
    if (args->type == TACL_COLL_BARRIER)
        return rounds * alpha;
    return rounds * alpha +
           (double)(n - 1) * m * beta * TACL__COST_SPREAD_PENALTY;
}

tacl_status_t tacl__bruck_build(tacl__sched_t *s,
                                const tacl__coll_args_t *args,
                                const tacl__topo_view_t *view)
{
    if (args->type == TACL_COLL_BARRIER)
        return bruck_barrier(s, args);
    if (args->count == 0)
        return TACL_OK;
    if (args->type == TACL_COLL_ALLGATHER)
        return bruck_allgather(s, args);
    return tacl__error(TACL_ERR_UNSUPPORTED, COLL,
                       "bruck does not run %s", tacl_coll_name(args->type));
}
