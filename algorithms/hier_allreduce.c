/*
 * Hierarchical all-reduce: intra-node reduce-scatter, an all-reduce over
 * each rail of the node's 1/k shard (ring reduce-scatter then ring
 * all-gather across nodes), and an intra-node all-gather.  This is the
 * 2D-Torus all-reduce of Mikami et al. that PaRO section 2 cites, with
 * MiCS's rails (section 3.3): all k ranks of a node use the network at
 * once, each for its own shard.
 *
 * The vector is cut into p = g * k pieces, shard l (pieces (0, l) ..
 * (g - 1, l)) contiguous.  Every phase works chunk by chunk and chunk c
 * of a phase depends only on chunk c of the phases before it, so the
 * node and rail rings of different chunks run at the same time and the
 * intra- and inter-node links are busy together.  Each node sends
 * 2 (g - 1) M / g bytes over its uplink for a vector of M bytes, where a
 * flat ring sends 2 (p - 1) M / p out of each boundary node.  In place,
 * every receive into the output waits for the last read of the input
 * bytes it overwrites.
 */
#include "hier.h"
#include "log.h"

int tacl__hier_supports(const tacl__coll_args_t *args,
                        const tacl__topo_view_t *view)
{
    return args->type == TACL_COLL_ALLREDUCE && tacl__hier_layout_ok(view);
}

double tacl__hier_cost(const tacl__coll_args_t *args,
                       const tacl__topo_view_t *view, double alpha,
                       double beta)
{
    tacl__hier_model_t d;

    tacl__hier_model(args, view, alpha, beta, &d);
    return 2 * TACL_MAX(d.inter, d.intra) + 2 * d.tail +
           (d.chunks - 1) * d.a_net;
}

tacl_status_t tacl__hier_build(tacl__sched_t *s, const tacl__coll_args_t *args,
                               const tacl__topo_view_t *view)
{
    tacl__hier_ctx_t x;
    tacl_status_t status;
    uint64_t bytes = (uint64_t)args->count * tacl_dtype_size(args->dtype);

    if (args->count == 0)
        return TACL_OK;
    if (!tacl__hier_layout_ok(view))
        return tacl__ring_build(s, args, view);
    status = tacl__hier_ctx_init(&x, s, args, view, bytes, bytes,
                                 TACL__HIER_PIECE_SHARD,
                                 2 * (uint64_t)s->nranks);
    if (status != TACL_OK)
        return status;
    status = tacl__hier_reduce_scatter(&x, 0);
    if (status == TACL_OK)
        status = tacl__hier_allgather(&x, 0);
    tacl__hier_ctx_fini(&x);
    if (status != TACL_OK)
        return status;
    return tacl__sched_status(s);
}
