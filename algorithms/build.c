/*
 * Building one operation as the decider chose it (algo.h): the chosen
 * row's builder, or for a composed row (qwZ) its builder over the part
 * the choice names.  Calls nothing that chooses: the choice arrives
 * whole.
 */
#include "log.h"
#include "quant_algos.h"

tacl_status_t tacl__algo_build(tacl__sched_t *s, const tacl__coll_args_t *args,
                               const tacl__topo_view_t *view,
                               const tacl__choice_t *choice)
{
    const tacl__algo_t *a = choice->algo;
    tacl_status_t status;

    if (a == NULL || choice->engine != TACL__ENGINE_SCHEDULE)
        return tacl__error(TACL_ERR_INTERNAL, COLL,
                           "%s: no schedule to build for a choice of the "
                           "%s engine", tacl_coll_name(args->type),
                           tacl__engine_name(choice->engine));
    if (a->id == TACL__ALGO_QWZ)
        status = tacl__qwz_build_over(s, args, view, choice->inner);
    else
        status = a->build(s, args, view);
    if (status == TACL_OK)
        status = tacl__sched_status(s);
    if (status != TACL_OK)
        return status;
    if (a->id == TACL__ALGO_QWZ)
        TACL_INFO(TUNE, "allgather of %zu elements quantized to %d bits: "
                  "%s over %s", args->count, args->qbits, a->name,
                  choice->inner->name);
    else if (a->id == TACL__ALGO_QGZ)
        TACL_INFO(TUNE, "reduce_scatter of %zu elements quantized to %d "
                  "bits: %s, %s", args->count, args->qbits, a->name,
                  tacl__qgz_two_hop(view) ? "2-hop" : "1-hop");
    return TACL_OK;
}
