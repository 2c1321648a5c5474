/*
 * PaRO's H-Ring all-gather and reduce-scatter (Zhang et al., "Rethinking
 * Memory and Communication Cost for Efficient Large Language Model
 * Training", section 3.4): ranks are grouped by node and the collective
 * runs as two strictly separate rings.  All-gather: the inter-node ring
 * along each rail, then, once it is complete, the intra-node ring that
 * gathers every node's blocks.  Reduce-scatter mirrors it: the intra-node
 * ring, then the rail ring.  A NOP joins the first phase so the second
 * starts only after it: the intra-node links idle during the inter-node
 * phase, which is what HO-Ring (horing.c) and MiCS (mics.c) improve on.
 * The data flow, and so the bytes on each link, equal MiCS's.
 */
#include "hier.h"
#include "log.h"

int tacl__hring_supports(const tacl__coll_args_t *args,
                         const tacl__topo_view_t *view)
{
    return tacl__mics_supports(args, view);
}

double tacl__hring_cost(const tacl__coll_args_t *args,
                        const tacl__topo_view_t *view, double alpha,
                        double beta)
{
    tacl__hier_model_t d;

    tacl__hier_model(args, view, alpha, beta, &d);
    /* Strictly phased: the two rings add up. */
    return d.inter + d.intra + (d.chunks - 1) * (d.a_net + d.a_host);
}

tacl_status_t tacl__hring_build(tacl__sched_t *s,
                                const tacl__coll_args_t *args,
                                const tacl__topo_view_t *view)
{
    tacl__hier_ctx_t x;
    tacl_status_t status;
    uint64_t blk = (uint64_t)args->count * tacl_dtype_size(args->dtype);
    int ag = args->type == TACL__COLL_ALLGATHER;

    if (args->count == 0)
        return TACL_OK;
    if (!tacl__hier_layout_ok(view))
        return tacl__ring_build(s, args, view);
    status = tacl__hier_ctx_init(&x, s, args, view,
                                 ag ? blk : blk * (uint64_t)s->nranks,
                                 ag ? blk * (uint64_t)s->nranks : blk,
                                 TACL__HIER_PIECE_RANK,
                                 2 * (uint64_t)s->nranks);
    if (status != TACL_OK)
        return status;
    status = ag ? tacl__hier_allgather(&x, 1)
                : tacl__hier_reduce_scatter(&x, 1);
    tacl__hier_ctx_fini(&x);
    if (status != TACL_OK)
        return status;
    return tacl__sched_status(s);
}
