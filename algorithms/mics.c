/*
 * MiCS hierarchical all-gather and its reduce-scatter mirror (Zhang et
 * al., "MiCS: Near-linear Scaling for Training Gigantic Model on Public
 * Cloud", VLDB 2023, section 3.3, Figures 4-5).  Its data flow, which
 * H-Ring shares, and the ring phases it is made of live in hier.c.
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
#include "hier.h"

int tacl__mics_supports(const tacl__coll_args_t *args,
                        const tacl__topo_view_t *view)
{
    return (args->type == TACL_COLL_ALLGATHER ||
            args->type == TACL_COLL_REDUCE_SCATTER) &&
           tacl__hier_layout_ok(view);
}

double tacl__mics_cost(const tacl__coll_args_t *args,
                       const tacl__topo_view_t *view, double alpha,
                       double beta)
{
    tacl__hier_model_t d;

    tacl__hier_model(args, view, alpha, beta, &d);
    /* All-gather: the node ring starts on the node's own blocks at once
     * and carries each rail block as it arrives, the last one a chunk
     * behind the rail.  Reduce-scatter: a node's partial sums all
     * complete at the node ring's last step, so the rail waits for it. */
    if (args->type == TACL_COLL_ALLGATHER)
        return TACL_MAX(d.inter + d.tail, d.intra);
    return d.intra + d.inter;
}

tacl_status_t tacl__mics_build(tacl__sched_t *s, const tacl__coll_args_t *args,
                               const tacl__topo_view_t *view)
{
    return tacl__hier_staged_build(s, args, view, 0);
}
