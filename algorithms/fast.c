/*
 * The fast engine's registry rows (one per collective it runs): a
 * blocking all-gather, reduce-scatter, all-reduce, broadcast, reduce or
 * barrier of at most the view's fast_max bytes of input per rank, exact,
 * on host memory, on one node whose ranks all map the communicator's
 * area, runs in that area instead of a schedule (executor/fastpath.h,
 * after Open MPI's coll/sm and NCCL's LL protocol).  The rows let the
 * decider answer "fast" like any other row, and the cost model and the
 * simulator price it; they build nothing.
 */
#include "cost.h"
#include "log.h"
#include "toolbox.h"

int tacl__fast_supports(const tacl__coll_args_t *args,
                        const tacl__topo_view_t *view)
{
    return args->qbits == 0 && args->memtype == TACL_MEM_HOST &&
           view->fast_max > 0 && view->n_nodes == 1 && view->nranks >= 2 &&
           tacl__coll_input_bytes(args, view->nranks) <= view->fast_max;
}

/*
 * Each rank copies its input into its slot, then reads (and reduces)
 * the slots it needs: the fixed part, a share per peer read, the bytes
 * written once and read by every reader.
 */
double tacl__fast_cost(const tacl__coll_args_t *args,
                       const tacl__topo_view_t *view, double alpha,
                       double beta)
{
    double p = view->nranks;
    double in = (double)tacl__coll_input_bytes(args, view->nranks);
    /* The rank that reads the most: every slot but its own (a broadcast
     * reads the root's); a reduce-scatter reads its block of each. */
    double reads = args->type == TACL_COLL_BROADCAST ? 1 : p - 1;
    double per_read = args->type == TACL_COLL_REDUCE_SCATTER ? in / p : in;
    double read_rate = tacl__coll_reduces(args->type)
                           ? TACL__COST_GAMMA_HOST
                           : tacl__cost_host_beta(view);

    (void)alpha;
    (void)beta;
    return TACL__COST_FAST_ALPHA + reads * TACL__COST_FAST_PEER +
           in * tacl__cost_host_beta(view) + reads * per_read * read_rate;
}

tacl_status_t tacl__fast_build(tacl__sched_t *s, const tacl__coll_args_t *args,
                               const tacl__topo_view_t *view)
{
    (void)s;
    (void)view;
    return tacl__error(TACL_ERR_INTERNAL, COLL,
                       "%s: the fast engine runs without a schedule",
                       tacl_coll_name(args->type));
}
