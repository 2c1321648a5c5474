/*
 * PaRO's HO-Ring all-gather and reduce-scatter (Zhang et al., "Rethinking
 * Memory and Communication Cost for Efficient Large Language Model
 * Training", section 3.4 and Figure 4).
 *
 * All-gather: each rank sends its own block through the intra-node ring
 * and through its rail's inter-node ring at the same time (steps 1 and 2
 * of Figure 4), so the intra-node links work while the network does.
 * An intra-node ring then gathers the remaining blocks, those of the
 * other nodes (step 3).  The paper starts step 3 once the inter-node ring
 * is complete; here each chunk of it starts as soon as the rail has
 * delivered that chunk, so the intra-node ring runs behind the network
 * instead of after it, and only its last chunk adds to the inter-node
 * time.  Reduce-scatter is the mirror: an intra-node ring first reduces
 * the other nodes' blocks to node partial sums, and each chunk goes round
 * the rail as soon as its partial is complete, while a second intra-node
 * ring reduces the node's own blocks; the rail's last step combines both.
 */
#include "hier.h"
#include "log.h"

double tacl__horing_cost(const tacl__coll_args_t *args,
                         const tacl__topo_view_t *view, double alpha,
                         double beta)
{
    tacl__hier_model_t d;
    double own, rest;

    tacl__hier_model(args, view, alpha, beta, &d);
    own = (d.k - 1) * (d.a_host + d.b * d.b_host);
    rest = (d.k - 1) * (d.a_host + (d.g - 1) * d.b * d.b_host);
    /* All-gather: both node rings run behind the rails; the last chunk
     * still goes round the node after the rail.  Reduce-scatter: the
     * other nodes' partial sums complete at the end of their node ring,
     * then the rail runs beside the ring of the node's own blocks. */
    if (args->type == TACL_COLL_ALLGATHER)
        return TACL_MAX(d.inter + d.tail, own + rest);
    return rest + TACL_MAX(d.inter, own);
}

static tacl_status_t horing_rings(tacl__hier_ctx_t *x, tacl__hier_ring_t *rail,
                                  tacl__hier_ring_t *own,
                                  tacl__hier_ring_t *rest)
{
    tacl_status_t status;

    status = tacl__hier_rail_ring(x, rail);
    if (status != TACL_OK)
        return status;
    status = tacl__hier_node_ring(x, TACL__HIER_NODES_OWN, own);
    if (status != TACL_OK)
        goto err_free_rail;
    status = tacl__hier_node_ring(x, TACL__HIER_NODES_OTHERS, rest);
    if (status != TACL_OK)
        goto err_free_own;
    return TACL_OK;

err_free_own:
    tacl__hier_ring_free(own);
err_free_rail:
    tacl__hier_ring_free(rail);
    return status;
}

static void horing_allgather(tacl__hier_ctx_t *x, tacl__hier_ring_t *rail,
                             tacl__hier_ring_t *own, tacl__hier_ring_t *rest)
{
    tacl__hier_copy_own(x);
    /* Steps 1 and 2: both rings start at once from the own block. */
    tacl__hier_ag(x, &rail->ph, NULL);
    tacl__hier_ag(x, &own->ph, NULL);
    /* Step 3: the other nodes' blocks.  Each chunk follows as soon as
     * the rail has delivered it rather than after the whole rail ring:
     * the intra-node ring runs behind the network, not after it. */
    tacl__hier_ag(x, &rest->ph, NULL);
}

static void horing_reduce_scatter(tacl__hier_ctx_t *x,
                                  tacl__hier_ring_t *rail,
                                  tacl__hier_ring_t *own,
                                  tacl__hier_ring_t *rest)
{
    tacl__bref_t np = tacl__hier_scratch(x, x->g);
    uint32_t div = x->args->op == TACL_AVG ? (uint32_t)x->s->nranks : 0;

    /* Mirror of step 3: the other nodes' blocks to node partials. */
    tacl__hier_rs_partials(x, rest, np);
    /* Mirror of steps 1 and 2: the own blocks and the rail together; a
     * rail chunk leaves as soon as its node partial is complete. */
    tacl__hier_rs_partials(x, own, np);
    x->dsts[0] = x->io.out;
    tacl__hier_rs(x, &rail->ph, x->dsts, div);
}

/* The three rings, then the data flow of the collective. */
static tacl_status_t horing_body(tacl__hier_ctx_t *x, int unused)
{
    tacl__hier_ring_t rail, own, rest;
    tacl_status_t status = horing_rings(x, &rail, &own, &rest);

    (void)unused;
    if (status != TACL_OK)
        return status;
    if (x->args->type == TACL_COLL_ALLGATHER)
        horing_allgather(x, &rail, &own, &rest);
    else
        horing_reduce_scatter(x, &rail, &own, &rest);
    tacl__hier_ring_free(&rest);
    tacl__hier_ring_free(&own);
    tacl__hier_ring_free(&rail);
    return TACL_OK;
}

tacl_status_t tacl__horing_build(tacl__sched_t *s,
                                 const tacl__coll_args_t *args,
                                 const tacl__topo_view_t *view)
{
    return tacl__hier_run(s, args, view, horing_body, 0);
}
