/*
 * The entry point of the quantized collectives of ZeRO++: an all-gather
 * with qbits set is qwZ (section 3.1), a reduce-scatter qgZ (section
 * 3.3).  Quantization is lossy, so the tuner never picks these rows on
 * its own: they are registry rows flagged TACL__ALGO_FLAG_EXPLICIT,
 * which only the quantized API reaches.  Their cost is the flat model of
 * the payload they move.
 */
#include "log.h"
#include "quant_algos.h"

int tacl__qwz_supports(const tacl__coll_args_t *args,
                       const tacl__topo_view_t *view)
{
    (void)view;
    return args->qbits == 8 || args->qbits == 4;
}

/*
 * A quantized payload of about qbits / 8 bytes per element plus a scale
 * per block, moved once by an all-to-all or an all-gather: one latency
 * per peer and the payload's bytes.
 */
double tacl__qwz_cost(const tacl__coll_args_t *args,
                      const tacl__topo_view_t *view, double alpha,
                      double beta)
{
    double p = view->nranks;
    double qb = (double)tacl__quant_bytes(args->count, args->qblock,
                                          args->qbits);

    return (p - 1) * alpha + (p - 1) * qb * beta;
}

tacl_status_t tacl__qwz_build(tacl__sched_t *s, const tacl__coll_args_t *args,
                              const tacl__topo_view_t *view)
{
    return tacl__qwz_build_over(s, args, view, NULL, NULL);
}

/* qgZ moves the same payload, by an all-to-all. */
int tacl__qgz_supports(const tacl__coll_args_t *args,
                       const tacl__topo_view_t *view)
{
    return tacl__qwz_supports(args, view);
}

double tacl__qgz_cost(const tacl__coll_args_t *args,
                      const tacl__topo_view_t *view, double alpha,
                      double beta)
{
    return tacl__qwz_cost(args, view, alpha, beta);
}

tacl_status_t tacl__quant_build(tacl__sched_t *s, const tacl__coll_args_t *args,
                                const tacl__topo_view_t *view,
                                const char *spec, const tacl__algo_t **algo_p)
{
    const tacl__algo_t *inner = NULL, *row;
    tacl_status_t status;

    if (args->qbits != 8 && args->qbits != 4)
        return tacl__error(TACL_ERR_INTERNAL, COLL,
                           "quantized build called with %d bits",
                           args->qbits);
    switch (args->type) {
    case TACL_COLL_ALLGATHER:
        row = tacl__algo_row(TACL__ALGO_QWZ, args->type);
        status = tacl__qwz_build_over(s, args, view, spec, &inner);
        break;
    case TACL_COLL_REDUCE_SCATTER:
        row = tacl__algo_row(TACL__ALGO_QGZ, args->type);
        status = tacl__qgz_build(s, args, view);
        break;
    default:
        return tacl__error(TACL_ERR_UNSUPPORTED, COLL,
                           "%s has no quantized form; use all-gather or "
                           "reduce-scatter", tacl_coll_name(args->type));
    }
    if (status == TACL_OK)
        status = tacl__sched_status(s);
    if (status != TACL_OK)
        return status;
    if (inner != NULL)
        TACL_INFO(TUNE, "allgather of %zu elements quantized to %d bits: "
                  "%s over %s", args->count, args->qbits, row->name,
                  inner->name);
    else if (args->type == TACL_COLL_REDUCE_SCATTER)
        TACL_INFO(TUNE, "reducescatter of %zu elements quantized to %d "
                  "bits: %s, %s", args->count, args->qbits, row->name,
                  tacl__qgz_two_hop(view) ? "2-hop" : "1-hop");
    if (algo_p != NULL)
        *algo_p = row;
    return TACL_OK;
}
