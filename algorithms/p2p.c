/*
 * Point-to-point: a send or a receive is one step.  The tag carries the
 * operation's sequence number, and messages between one pair of ranks
 * with equal tags are matched in the order they were posted, which gives
 * the "n-th send matches the n-th receive" rule of the public API.
 */
#include "toolbox.h"
#include "log.h"

int tacl__p2p_supports(const tacl__coll_args_t *args,
                       const tacl__topo_view_t *view)
{
    return (args->type == TACL_COLL_SEND || args->type == TACL_COLL_RECV) &&
           args->root >= 0 && args->root < view->nranks;
}

double tacl__p2p_cost(const tacl__coll_args_t *args,
                      const tacl__topo_view_t *view, double alpha,
                      double beta)
{
    return alpha +
           (double)args->count * (double)tacl_dtype_size(args->dtype) * beta;
}

tacl_status_t tacl__p2p_build(tacl__sched_t *s, const tacl__coll_args_t *args,
                              const tacl__topo_view_t *view)
{
    uint64_t m = (uint64_t)args->count * tacl_dtype_size(args->dtype);
    uint64_t tag = tacl__algo_tag(args, 0);
    tacl__algo_io_t io;
    tacl_status_t status;

    if (args->count == 0)
        return TACL_OK;
    if (args->type == TACL_COLL_SEND) {
        status = tacl__algo_io(s, args, m, 0, &io);
        if (status == TACL_OK)
            tacl__sched_send(s, args->root, io.in, m, tag, TACL__NO_DEPS);
    } else if (args->type == TACL_COLL_RECV) {
        status = tacl__algo_io(s, args, 0, m, &io);
        if (status == TACL_OK)
            tacl__sched_recv(s, args->root, io.out, m, tag, TACL__NO_DEPS);
    } else {
        return tacl__error(TACL_ERR_UNSUPPORTED, COLL, "p2p does not run %s",
                           tacl_coll_name(args->type));
    }
    if (status != TACL_OK)
        return status;
    return tacl__sched_status(s);
}
