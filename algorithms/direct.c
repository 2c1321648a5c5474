/*
 * Direct all-to-all (the pairwise-free "every rank posts every message at
 * once" scheme of Thakur, Rabenseifner and Gropp, IJHPCA 2005, section
 * 4.3, used for medium messages): rank r sends block j of its input to
 * rank j and receives rank j's block r into block j of its output, for
 * every j at once.  Peers are visited in the order r + 1, r + 2, ... so
 * that no rank is everyone's first target.
 *
 * In place (sendbuf == recvbuf) a block cannot be overwritten before it
 * has been sent, so incoming blocks land in scratch and are copied into
 * place once the outgoing block of the same index has left.
 */
#include "algo_util.h"
#include "log.h"

#include <stdlib.h>

static tacl_status_t direct_alltoall(tacl__sched_t *s,
                                     const tacl__coll_args_t *args)
{
    int n = s->nranks, r = s->rank, i;
    size_t es = tacl_dtype_size(args->dtype);
    uint64_t blk = (uint64_t)args->count * es, tag = tacl__algo_tag(args, 0);
    int32_t *sends, *recvs, tmp = -1;
    tacl__algo_io_t io;
    tacl_status_t status;

    status = tacl__algo_io(s, args, blk * (uint64_t)n, blk * (uint64_t)n,
                           &io);
    if (status != TACL_OK)
        return status;
    if (!io.in_place)
        tacl__sched_copy(s, tacl__bref_add(io.out, blk * (uint64_t)r),
                         tacl__bref_add(io.in, blk * (uint64_t)r), blk,
                         TACL__NO_DEPS);
    if (n == 1)
        return tacl__sched_status(s);
    sends = malloc(2 * (size_t)n * sizeof(*sends));
    if (sends == NULL)
        return tacl__error(TACL_ERR_NO_MEMORY, COLL,
                           "cannot allocate an all-to-all schedule of %d "
                           "ranks", n);
    recvs = sends + n;
    if (io.in_place)
        tmp = tacl__sched_scratch(s, blk * (uint64_t)n, args->memtype);
    for (i = 1; i < n; i++) {
        int to = (r + i) % n, from = (r - i + n) % n;
        tacl__bref_t dst = io.in_place
                               ? tacl__bref(tmp, blk * (uint64_t)from)
                               : tacl__bref_add(io.out,
                                                blk * (uint64_t)from);

        sends[to] = tacl__sched_send(
            s, to, tacl__bref_add(io.in, blk * (uint64_t)to), blk, tag,
            TACL__NO_DEPS);
        recvs[from] = tacl__sched_recv(s, from, dst, blk, tag,
                                       TACL__NO_DEPS);
    }
    for (i = 1; io.in_place && i < n; i++) {
        int from = (r - i + n) % n;

        tacl__sched_copy(s, tacl__bref_add(io.out, blk * (uint64_t)from),
                         tacl__bref(tmp, blk * (uint64_t)from), blk,
                         TACL__DEPS(recvs[from], sends[from]));
    }
    free(sends);
    return tacl__sched_status(s);
}

int tacl__direct_supports(const tacl__coll_args_t *args,
                          const tacl__topo_view_t *view)
{
    return args->type == TACL__COLL_ALLTOALL;
}

double tacl__direct_cost(const tacl__coll_args_t *args,
                         const tacl__topo_view_t *view, double alpha,
                         double beta)
{
    double m = (double)args->count * (double)tacl_dtype_size(args->dtype);

    return (view->nranks - 1) * (alpha + m * beta);
}

tacl_status_t tacl__direct_build(tacl__sched_t *s,
                                 const tacl__coll_args_t *args,
                                 const tacl__topo_view_t *view)
{
    if (args->type != TACL__COLL_ALLTOALL)
        return tacl__error(TACL_ERR_UNSUPPORTED, COLL,
                           "direct does not run %s",
                           tacl__coll_name(args->type));
    if (args->count == 0)
        return TACL_OK;
    return direct_alltoall(s, args);
}
