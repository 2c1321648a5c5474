/*
 * MiCS hierarchical all-gather and its reduce-scatter mirror (Zhang et
 * al., "MiCS: Near-linear Scaling for Training Gigantic Model on Public
 * Cloud", VLDB 2023, section 3.3, Figures 4-5).  The ring
 * phases it is made of live in hier.c.
 *
 * All-gather on p ranks, g nodes of k ranks: stage 1 all-gathers over
 * each rail (the k ranks of equal local index across nodes are k
 * independent inter-node channels, each a ring over the nodes); every
 * received block goes straight to its final place in the output, which is
 * ordered by communicator rank, so MiCS's stage 2 rearrangement copy is
 * not needed.  Stage 3 is the batched intra-node all-gather: one ring
 * over the k local ranks whose step carries the g blocks of one local
 * index, each block forwarded as soon as it has arrived, so the schedule
 * pipelines stage 3 behind stage 1 (what MiCS's coalesced API of section
 * 4 buys with NCCL group calls).  Reduce-scatter mirrors it: an
 * intra-node reduce-scatter leaves local rank l with its node's partial
 * sums of the blocks (m, l) of every node m, then a reduce-scatter along
 * the rail finishes them; AVG sums and divides once at the end.
 *
 * Each node sends (g - 1) blocks per rank, (p - k) M / p bytes in all
 * for an output of M bytes, where a flat ring sends (p - 1) M / p out of
 * each boundary node.
 */
#include <stdlib.h>
#include <string.h>

#include "hier.h"
#include "log.h"

/* Nodes counted on the stack; larger communicators count node by node. */
/*
 * MiCS.
 */
int tacl__mics_supports(const tacl__coll_args_t *args,
                        const tacl__topo_view_t *view)
{
    return (args->type == TACL__COLL_ALLGATHER ||
            args->type == TACL__COLL_REDUCE_SCATTER) &&
           tacl__hier_layout_ok(view);
}

double tacl__mics_cost(const tacl__coll_args_t *args,
                       const tacl__topo_view_t *view, double alpha,
                       double beta)
{
    tacl__hier_model_t d;

    tacl__hier_model(args, view, alpha, beta, &d);
    /* The node ring runs behind the rails, one chunk behind at the end. */
    return TACL_MAX(d.inter, d.intra) + d.tail + (d.chunks - 1) * d.a_net;
}

tacl_status_t tacl__hier_allgather(tacl__hier_ctx_t *x, int joined)
{
    tacl__hier_ring_t rail, node;
    tacl_status_t status;

    status = tacl__hier_rail_ring(x, &rail);
    if (status != TACL_OK)
        return status;
    status = tacl__hier_node_ring(x, TACL__HIER_NODES_ALL, &node);
    if (status != TACL_OK)
        goto err_free_rail;
    if (!x->io.in_place)
        tacl__sched_copy(x->s,
                         tacl__bref_add(x->io.out,
                                        (uint64_t)x->s->rank *
                                            x->args->count * x->es),
                         x->io.in, x->args->count * x->es, TACL__NO_DEPS);
    x->collect = joined;
    tacl__hier_ag(x, &rail.ph, NULL);
    if (joined)
        node.ph.gate = tacl__hier_join(x);
    tacl__hier_ag(x, &node.ph, NULL);
    tacl__hier_ring_free(&node);
err_free_rail:
    tacl__hier_ring_free(&rail);
    return status;
}

tacl_status_t tacl__hier_reduce_scatter(tacl__hier_ctx_t *x, int joined)
{
    tacl__hier_ring_t rail, node;
    tacl_status_t status;
    tacl__bref_t np;
    uint32_t div = x->args->op == TACL_AVG ? (uint32_t)x->s->nranks : 0;

    status = tacl__hier_rail_ring(x, &rail);
    if (status != TACL_OK)
        return status;
    status = tacl__hier_node_ring(x, TACL__HIER_NODES_ALL, &node);
    if (status != TACL_OK)
        goto err_free_rail;
    np = tacl__hier_scratch(x, x->g);
    x->collect = joined;
    tacl__hier_rs_partials(x, &node, np);
    if (joined)
        rail.ph.gate = tacl__hier_join(x);
    x->dsts[0] = tacl__bref_add(x->io.out,
                                x->args->type == TACL__COLL_ALLREDUCE
                                    ? x->poff[tacl__hier_piece(x, x->m, x->l)]
                                          * x->es
                                    : 0);
    tacl__hier_rs(x, &rail.ph, x->dsts, div);
    tacl__hier_ring_free(&node);
err_free_rail:
    tacl__hier_ring_free(&rail);
    return status;
}

tacl_status_t tacl__mics_build(tacl__sched_t *s, const tacl__coll_args_t *args,
                               const tacl__topo_view_t *view)
{
    return tacl__hier_staged_build(s, args, view, 0);
}

/*
 * MiCS and H-Ring share their data flow; joined holds the second stage
 * until the first has completed everywhere on this rank (H-Ring's strict
 * phases) instead of pipelining it behind the first (MiCS).
 */
tacl_status_t tacl__hier_staged_build(tacl__sched_t *s,
                                      const tacl__coll_args_t *args,
                                      const tacl__topo_view_t *view,
                                      int joined)
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
    status = args->type == TACL__COLL_ALLGATHER
                 ? tacl__hier_allgather(&x, joined)
                 : tacl__hier_reduce_scatter(&x, joined);
    tacl__hier_ctx_fini(&x);
    if (status != TACL_OK)
        return status;
    return tacl__sched_status(s);
}
