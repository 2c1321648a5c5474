/*
 * The registry rows of the quantized collectives of ZeRO++: an all-gather
 * with qbits set is qwZ (section 3.1), a reduce-scatter qgZ (section
 * 3.3).  Quantization is lossy, so the tuner never picks these rows on
 * its own: they are flagged TACL__ALGO_FLAG_EXPLICIT, which only the
 * quantized API reaches (the decider takes them for qbits != 0).  Their
 * cost is the flat model of the payload they move; qgZ moves the same
 * payload, by an all-to-all, so its row takes qwZ's supports and cost.
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
    return tacl__qwz_build_over(s, args, view, NULL);
}
