/*
 * Variable-count all-to-all and all-gather (MPI_Alltoallv,
 * MPI_Allgatherv), flat: the direct exchange of direct.c's all-to-all
 * (Thakur, Rabenseifner and Gropp, IJHPCA 2005, section 4.3), every
 * message posted at once, with each block's own size and place taken
 * from the call's count table (op.h's tacl__vcounts_t).  Peers are
 * visited in the order r + 1, r + 2, ... so that no rank is everyone's
 * first target; a peer with nothing to send or receive gets no message
 * (both sides skip it, since sendcounts[j] on rank i is recvcounts[i] on
 * rank j); the block a rank keeps is a local copy.  An all-gather-v is
 * the all-to-all-v whose every send is the whole input (op.h), so one
 * builder serves both; it has no in-place form (the entry points refuse
 * overlapping buffers), so nothing is staged.
 */
#include "toolbox.h"
#include "cost.h"
#include "log.h"

int tacl__directv_supports(const tacl__coll_args_t *args,
                           const tacl__topo_view_t *view)
{
    (void)view;
    return tacl__coll_vcounted(args->type);
}

/*
 * Priced as the fixed-count exchange of the mean block (direct.c's
 * model): an all-gather-v's count is its mean block already; an
 * all-to-all-v's is the busiest rank's larger direction over its peers
 * when every rank's counts are known (the same on every rank, which
 * must choose alike), else this rank's, or count per block without a
 * table.
 */
double tacl__directv_cost(const tacl__coll_args_t *args,
                          const tacl__topo_view_t *view, double alpha,
                          double beta)
{
    tacl__coll_args_t flat = *args;
    int gatherv = args->type == TACL_COLL_ALLGATHERV;
    uint64_t sent = 0, got = 0;

    flat.type = gatherv ? TACL_COLL_ALLGATHER : TACL_COLL_ALLTOALL;
    flat.v = NULL;
    if (!gatherv && args->v != NULL && view->nranks > 1) {
        int n = view->nranks, known = tacl__vpairs_known(args);

        for (int i = known ? 0 : view->rank; i < n; i++) {
            uint64_t out = 0, in = 0;

            for (int j = 0; j < n; j++) {
                size_t d;

                if (j == i)
                    continue;
                out += known ? tacl__vpair(args, n, i, j)
                             : tacl__vsend(args, j, &d);
                in += known ? tacl__vpair(args, n, j, i)
                            : tacl__vrecv(args, j, &d);
            }
            sent = TACL_MAX(sent, out);
            got = TACL_MAX(got, in);
            if (!known)
                break;
        }
        flat.count = (size_t)(TACL_MAX(sent, got) / (uint64_t)(n - 1));
    }
    return tacl__direct_cost(&flat, view, alpha, beta);
}

tacl_status_t tacl__directv_build(tacl__sched_t *s,
                                  const tacl__coll_args_t *args,
                                  const tacl__topo_view_t *view)
{
    int n = s->nranks, r = s->rank;
    uint64_t send, recv, tag = tacl__algo_tag(args, 0);
    size_t es = tacl_dtype_size(args->dtype), sd, rd, sn, rn;
    tacl__algo_io_t io;
    tacl_status_t status;

    (void)view;
    if (!tacl__coll_vcounted(args->type) ||
        (args->v != NULL && args->v->n != n))
        return tacl__error(TACL_ERR_UNSUPPORTED, COLL,
                           "direct (variable counts) does not run %s on "
                           "%d ranks", tacl_coll_name(args->type), n);
    if (tacl__coll_bytes(args, r, n, UINT64_MAX, &send, &recv) != 0)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "%s: the buffers overflow",
                           tacl_coll_name(args->type));
    status = tacl__algo_io(s, args, send, recv, &io);
    if (status != TACL_OK)
        return status;
    sn = tacl__vsend(args, r, &sd);
    tacl__vrecv(args, r, &rd);
    if (sn > 0)
        tacl__sched_copy(s, tacl__bref_add(io.out, (uint64_t)rd * es),
                         tacl__bref_add(io.in, (uint64_t)sd * es),
                         (uint64_t)sn * es, TACL__NO_DEPS);
    for (int i = 1; i < n; i++) {
        int to = (r + i) % n, from = (r - i + n) % n;

        sn = tacl__vsend(args, to, &sd);
        if (sn > 0)
            tacl__sched_send(s, to, tacl__bref_add(io.in, (uint64_t)sd * es),
                             (uint64_t)sn * es, tag, TACL__NO_DEPS);
        rn = tacl__vrecv(args, from, &rd);
        if (rn > 0)
            tacl__sched_recv(s, from,
                             tacl__bref_add(io.out, (uint64_t)rd * es),
                             (uint64_t)rn * es, tag, TACL__NO_DEPS);
    }
    return tacl__sched_status(s);
}
