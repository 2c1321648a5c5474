/*
 * Latency-optimal algorithms of Thakur, Rabenseifner and Gropp,
 * "Optimization of collective communication operations in MPICH" (IJHPCA
 * 2005): recursive-doubling all-reduce (section 4.5, with the fold for a
 * rank count that is not a power of two), recursive-doubling all-gather
 * (section 4.1) and recursive-halving reduce-scatter (section 4.4).  The
 * last two need a power-of-two rank count; Bruck covers all-gather
 * otherwise and the ring covers reduce-scatter.
 *
 * All-reduce fold: with p2 the largest power of two <= n and rem = n - p2,
 * each even rank below 2 * rem sends its vector to the next rank and
 * waits for the result; the other p2 ranks run recursive doubling on
 * their new ranks and the odd ranks of the fold send the result back.
 * Partial results live in scratch (an accumulator and two receive slots)
 * and the output is written once, by the last combine or the division.
 */
#include "toolbox.h"
#include "cost.h"
#include "log.h"

static int rd_is_pow2(int n)
{
    return n > 0 && (n & (n - 1)) == 0;
}

/* Real rank of new rank nr in the all-reduce fold. */
static int rd_real(int nr, int rem)
{
    return nr < rem ? nr * 2 + 1 : nr + rem;
}

static tacl_status_t rd_allreduce(tacl__sched_t *s,
                                  const tacl__coll_args_t *args)
{
    int n = s->nranks, r = s->rank, p2 = tacl__pow2_floor(n), rem = n - p2;
    size_t es = tacl_dtype_size(args->dtype);
    uint64_t m = (uint64_t)args->count * es;
    tacl_op_t op = tacl__algo_step_op(args->op);
    int32_t acc, tmp, cur_dep = -1, last_read[2] = {-1, -1}, id, sid, rid;
    tacl__bref_t cur;
    tacl__algo_io_t io;
    tacl_status_t status;
    int nr, mask, k, steps = tacl__log2_ceil(p2);

    status = tacl__algo_io(s, args, m, m, &io);
    if (status != TACL_OK)
        return status;
    if (n == 1)
        return tacl__algo_alone(s, args, &io);
    if (r < 2 * rem && r % 2 == 0) {
        /* Folded out: hand the vector over, get the result back. */
        sid = tacl__sched_send(s, r + 1, io.in, m, tacl__algo_tag(args, 0),
                               TACL__NO_DEPS);
        tacl__sched_recv(s, r + 1, io.out, m,
                         tacl__algo_tag(args, 1 + (uint64_t)steps),
                         TACL__DEPS(sid));
        return tacl__sched_status(s);
    }
    acc = tacl__sched_scratch(s, m, args->memtype);
    tmp = tacl__sched_scratch(s, 2 * m, args->memtype);
    cur = io.in;
    nr = r < 2 * rem ? r / 2 : r - rem;
    if (r < 2 * rem) {
        rid = tacl__sched_recv(s, r - 1, tacl__bref(tmp, 0), m,
                               tacl__algo_tag(args, 0), TACL__NO_DEPS);
        cur_dep = tacl__sched_reduce(s, tacl__bref(acc, 0), io.in,
                                     tacl__bref(tmp, 0), args->count,
                                     args->dtype, op, TACL__DEPS(rid));
        last_read[0] = cur_dep;
        cur = tacl__bref(acc, 0);
    }
    for (mask = 1, k = 0; mask < p2; mask <<= 1, k++) {
        int peer = rd_real(nr ^ mask, rem), slot = k % 2;
        tacl__bref_t in2 = tacl__bref(tmp, (uint64_t)slot * m);
        uint64_t tag = tacl__algo_tag(args, 1 + (uint64_t)k);

        sid = tacl__sched_send(s, peer, cur, m, tag, TACL__DEPS(cur_dep));
        rid = tacl__sched_recv(s, peer, in2, m, tag,
                               TACL__DEPS(last_read[slot]));
        if (mask * 2 < p2 || args->op == TACL_AVG) {
            /* The send of cur must finish before acc is overwritten. */
            id = tacl__sched_reduce(s, tacl__bref(acc, 0), cur, in2,
                                    args->count, args->dtype, op,
                                    TACL__DEPS(rid, sid, cur_dep));
            cur = tacl__bref(acc, 0);
            cur_dep = id;
            last_read[slot] = id;
        } else {
            cur_dep = tacl__sched_reduce(s, io.out, cur, in2, args->count,
                                         args->dtype, op,
                                         TACL__DEPS(rid, sid, cur_dep));
        }
    }
    if (args->op == TACL_AVG)
        cur_dep = tacl__sched_div(s, io.out, cur, args->count, args->dtype,
                                  (uint32_t)n, TACL__DEPS(cur_dep));
    if (r < 2 * rem)
        tacl__sched_send(s, r - 1, io.out, m,
                         tacl__algo_tag(args, 1 + (uint64_t)steps),
                         TACL__DEPS(cur_dep));
    return tacl__sched_status(s);
}

/* Recursive doubling all-gather, power-of-two rank counts. */
static tacl_status_t rd_allgather(tacl__sched_t *s,
                                  const tacl__coll_args_t *args)
{
    int n = s->nranks, r = s->rank, mask, k, nrecv = 0;
    size_t es = tacl_dtype_size(args->dtype);
    uint64_t blk = (uint64_t)args->count * es;
    int32_t deps[TACL__MAX_DEPS];
    tacl__algo_io_t io;
    tacl_status_t status;

    status = tacl__algo_io(s, args, blk, blk * (uint64_t)n, &io);
    if (status != TACL_OK)
        return status;
    deps[nrecv++] = tacl__algo_own_block(s, &io, r, blk);
    for (mask = 1, k = 0; mask < n; mask <<= 1, k++) {
        int peer = r ^ mask, mine = r & ~(mask - 1), theirs = mine ^ mask;
        uint64_t tag = tacl__algo_tag(args, (uint64_t)k);
        tacl__bref_t src = tacl__bref_add(io.out, blk * (uint64_t)mine);

        if (k == 0)
            tacl__sched_send(s, peer, io.in, blk, tag, TACL__NO_DEPS);
        else
            tacl__sched_send(s, peer, src, blk * (uint64_t)mask, tag, deps,
                             nrecv);
        deps[nrecv++] = tacl__sched_recv(
            s, peer, tacl__bref_add(io.out, blk * (uint64_t)theirs),
            blk * (uint64_t)mask, tag, TACL__NO_DEPS);
    }
    return tacl__sched_status(s);
}

/* Recursive halving reduce-scatter, power-of-two rank counts. */
static tacl_status_t rd_reduce_scatter(tacl__sched_t *s,
                                       const tacl__coll_args_t *args)
{
    int n = s->nranks, r = s->rank, mask, k = 0, lo = 0;
    size_t es = tacl_dtype_size(args->dtype);
    uint64_t blk = (uint64_t)args->count * es, toff = 0;
    tacl_op_t op = tacl__algo_step_op(args->op);
    int32_t acc, tmp, prev = -1, rid;
    tacl__bref_t cur;
    tacl__algo_io_t io;
    tacl_status_t status;

    status = tacl__algo_io(s, args, blk * (uint64_t)n, blk, &io);
    if (status != TACL_OK)
        return status;
    if (n == 1)
        return tacl__algo_alone(s, args, &io);
    /* acc holds partial sums at their places in the full vector. */
    acc = tacl__sched_scratch(s, blk * (uint64_t)n, args->memtype);
    tmp = tacl__sched_scratch(s, blk * (uint64_t)n, args->memtype);
    cur = io.in;
    for (mask = n / 2; mask >= 1; mask >>= 1, k++) {
        int peer = r ^ mask, keep = (r & mask) ? lo + mask : lo;
        int give = (r & mask) ? lo : lo + mask;
        uint64_t bytes = blk * (uint64_t)mask;
        uint64_t tag = tacl__algo_tag(args, (uint64_t)k);
        tacl__bref_t in2 = tacl__bref(tmp, toff);
        tacl__bref_t dst = tacl__bref(acc, blk * (uint64_t)keep);

        tacl__sched_send(s, peer, tacl__bref_add(cur, blk * (uint64_t)give),
                         bytes, tag, TACL__DEPS(prev));
        rid = tacl__sched_recv(s, peer, in2, bytes, tag, TACL__NO_DEPS);
        if (mask == 1 && args->op != TACL_AVG)
            dst = io.out;
        prev = tacl__sched_reduce(s, dst,
                                  tacl__bref_add(cur, blk * (uint64_t)keep),
                                  in2, args->count * (size_t)mask,
                                  args->dtype, op, TACL__DEPS(rid, prev));
        cur = tacl__bref(acc, 0);
        toff += bytes;
        lo = keep;
    }
    if (args->op == TACL_AVG)
        tacl__sched_div(s, io.out, tacl__bref(acc, blk * (uint64_t)r),
                        args->count, args->dtype, (uint32_t)n,
                        TACL__DEPS(prev));
    return tacl__sched_status(s);
}

int tacl__rd_supports(const tacl__coll_args_t *args,
                      const tacl__topo_view_t *view)
{
    switch (args->type) {
    case TACL_COLL_ALLREDUCE:
        return 1;
    case TACL_COLL_ALLGATHER:
    case TACL_COLL_REDUCE_SCATTER:
        return rd_is_pow2(view->nranks);
    default:
        return 0;
    }
}

/* The peer of real rank r at distance d, with n - p2 pairs folded. */
static int rd_cost_peer(int r, int n, int d)
{
    int rem = n - tacl__pow2_floor(n), nr, q;

    if (r < 2 * rem && r % 2 == 0)
        return -1;
    nr = r < 2 * rem ? r / 2 : r - rem;
    q = nr ^ d;
    return q < rem ? 2 * q + 1 : q + rem;
}

/* The folding partner of r (the even rank of a folded pair sends). */
static int rd_fold_peer(int r, int n, int d)
{
    int rem = n - tacl__pow2_floor(n);

    (void)d;
    return r < 2 * rem && r % 2 == 0 ? r + 1 : -1;
}

double tacl__rd_cost(const tacl__coll_args_t *args,
                     const tacl__topo_view_t *view, double alpha, double beta)
{
    int n = view->nranks, p2 = tacl__pow2_floor(n > 0 ? n : 1);
    double es = (double)tacl_dtype_size(args->dtype);
    double m = (double)args->count * es, steps = tacl__log2_ceil(p2);
    double t = 0;
    int d;

    if (view->n_nodes > 1) {
        /* Step by step on the link it crosses: the exchange at distance
         * d moves the whole vector for all-reduce, d blocks otherwise;
         * folding a non-power of two costs two steps at distance 1. */
        for (d = 1; d < p2; d <<= 1)
            t += tacl__cost_step_time(args, view, n, rd_cost_peer, d,
                                      args->type == TACL_COLL_ALLREDUCE
                                          ? m : d * m, alpha, beta);
        if (n != p2)
            t += 2 * tacl__cost_step_time(args, view, n, rd_fold_peer, 0, m,
                                          alpha, beta);
        return t;
    }
    alpha = tacl__link_alpha(view, TACL_LINK_HOST, alpha);
    beta = tacl__link_beta(view, TACL_LINK_HOST, beta);
    if (args->type == TACL_COLL_ALLREDUCE) {
        /* Every step moves and reduces the whole vector. */
        if (n != p2)
            steps += 2;
        return steps * (alpha + m * (beta + TACL__COST_GAMMA_HOST));
    }
    /* All-gather and reduce-scatter move (n - 1) blocks in log n steps,
     * to distant peers. */
    return steps * alpha +
           (double)(n - 1) * m * beta * TACL__COST_SPREAD_PENALTY +
           tacl__cost_reduced(args, (double)(n - 1) * m) *
               TACL__COST_GAMMA_HOST;
}

tacl_status_t tacl__rd_build(tacl__sched_t *s, const tacl__coll_args_t *args,
                             const tacl__topo_view_t *view)
{
    if (args->count == 0)
        return TACL_OK;
    switch (args->type) {
    case TACL_COLL_ALLREDUCE:
        return rd_allreduce(s, args);
    case TACL_COLL_ALLGATHER:
        if (rd_is_pow2(s->nranks))
            return rd_allgather(s, args);
        break;
    case TACL_COLL_REDUCE_SCATTER:
        if (rd_is_pow2(s->nranks))
            return rd_reduce_scatter(s, args);
        break;
    default:
        break;
    }
    return tacl__error(TACL_ERR_UNSUPPORTED, COLL,
                       "recursive doubling does not run %s on %d ranks",
                       tacl_coll_name(args->type), s->nranks);
}
