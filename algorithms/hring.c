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

double tacl__hring_cost(const tacl__coll_args_t *args,
                        const tacl__topo_view_t *view, double alpha,
                        double beta)
{
    tacl__hier_model_t d;

    tacl__hier_model(args, view, alpha, beta, &d);
    /* Strictly phased: the two rings add up. */
    return d.inter + d.intra + (d.chunks - 1) * d.a_host;
}

tacl_status_t tacl__hring_build(tacl__sched_t *s,
                                const tacl__coll_args_t *args,
                                const tacl__topo_view_t *view)
{
    return tacl__hier_staged_build(s, args, view, 1);
}
