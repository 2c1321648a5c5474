/*
 * The decider (algo.h): how one operation runs.
 *
 * tacl__algo_choose answers with a typed choice: the fast engine, when
 * the caller may take it and its row supports the operation; the
 * quantized rows for a quantized call; a row TACL_ALGO forces; a
 * tuner's pick; else the cheapest supported row under an alpha-beta
 * model (Hockney: a message of m bytes costs alpha + m * beta) whose
 * alpha and beta are per link class (the view's host and network
 * figures, else cost.h's): latency-bound algorithms (recursive doubling,
 * Bruck, trees) win for small messages, the bandwidth-optimal pipelined
 * ring for large ones on one node, and the hierarchical algorithms
 * (MiCS, HO-Ring, the hierarchical all-reduce) for large ones across
 * nodes, where they keep traffic off the shared uplinks.  A forced
 * hierarchical row that cannot serve the layout (one node, one rank per
 * node, unequal nodes) gives way to the flat ring.  Every choice is
 * logged at INFO (TUNE).
 */
#include <stdio.h>
#include <string.h>

#include "cost.h"
#include "hier.h"
#include "log.h"
#include "quant_algos.h"

const char *tacl__engine_name(tacl__engine_t engine)
{
    return engine == TACL__ENGINE_FAST ? "fast" : "schedule";
}

static int algo_is_hier(const tacl__algo_t *a)
{
    return (a->flags & TACL__ALGO_FLAG_HIER) != 0;
}

/* Rows the tuner never picks by cost. */
static int algo_tunable(const tacl__algo_t *a)
{
    return !(a->flags & (TACL__ALGO_FLAG_EXPLICIT | TACL__ALGO_FLAG_FAST));
}

/* Why a hierarchical algorithm cannot serve view, for the log. */
static const char *algo_layout_why(const tacl__topo_view_t *view)
{
    if (view->n_nodes < 2)
        return "the ranks are on one node";
    if (view->nranks == view->n_nodes)
        return "every node has one rank";
    return "the nodes have unequal rank counts";
}

/*
 * Modelled cost of a on view.  The model's alpha and beta stand in for
 * the link an algorithm's costs fall back to where the view gives no
 * figures (cost() reads view->link_bw and link_lat first).
 */
static double algo_cost(const tacl__algo_t *a, const tacl__coll_args_t *args,
                        const tacl__topo_view_t *view)
{
    const tacl__cost_link_t *l =
        &tacl__cost_links[view->n_nodes > 1 ? TACL_LINK_NET : TACL_LINK_HOST];

    return a->cost(args, view, l->alpha, l->beta);
}

/* The supported tunable row of lowest modelled cost; *cost_p its cost. */
static const tacl__algo_t *algo_cheapest(const tacl__coll_args_t *args,
                                         const tacl__topo_view_t *view,
                                         double *cost_p)
{
    const tacl__algo_t *a, *best = NULL;
    double best_cost = 0, c;

    for (a = tacl__algos; a->name != NULL; a++) {
        if (a->coll != args->type || !algo_tunable(a) ||
            !a->supports(args, view))
            continue;
        c = algo_cost(a, args, view);
        if (best == NULL || c < best_cost) {
            best = a;
            best_cost = c;
        }
    }
    *cost_p = best_cost;
    return best;
}

/* Whether this is the first fallback from forced in this process. */
static int fallback_first(const tacl__algo_t *forced)
{
    static unsigned warned[TACL_NUM_COLLS];
    unsigned bit = 1u << forced->id;

    return !(__atomic_fetch_or(&warned[forced->coll], bit, __ATOMIC_RELAXED) &
             bit);
}

const tacl__algo_t *tacl__algo_select(const tacl__coll_args_t *args,
                                      const tacl__topo_view_t *view,
                                      const tacl__algo_t *forced)
{
    const tacl__algo_t *best;
    double best_cost = 0;

    if (forced != NULL && forced->coll != args->type)
        forced = NULL;
    if (forced != NULL && forced->supports(args, view) &&
        !(forced->flags & TACL__ALGO_FLAG_FAST)) {
        TACL_INFO(TUNE, "%s of %zu elements on %d ranks: %s (forced)",
                  tacl_coll_name(args->type), args->count, view->nranks,
                  forced->name);
        return forced;
    }
    /* A hierarchical algorithm that cannot serve the layout stands in
     * for its flat equivalent, the ring, when the ring can run it. */
    if (forced != NULL && algo_is_hier(forced) &&
        (best = tacl__algo_row(TACL__ALGO_RING, args->type)) != NULL &&
        best->supports(args, view))
        best_cost = algo_cost(best, args, view);
    else
        best = algo_cheapest(args, view, &best_cost);
    /* A forced algorithm that gives way is worth a warning (once per
     * collective and algorithm, not per call): the user asked for it.
     * The fast row gives way quietly: it serves small blocking calls
     * only, and the rest of its collective's calls run as tuned. */
    if (forced != NULL && algo_is_hier(forced) && fallback_first(forced))
        TACL_WARN(TUNE, "%s: forced algorithm %s cannot serve this layout "
                  "(%d ranks on %d nodes: %s); using %s instead",
                  tacl_coll_name(args->type), forced->name, view->nranks,
                  view->n_nodes, algo_layout_why(view),
                  best != NULL ? best->name : "none");
    else if (forced != NULL && !(forced->flags & TACL__ALGO_FLAG_FAST) &&
             fallback_first(forced))
        TACL_WARN(TUNE, "%s: forced algorithm %s does not support this "
                  "operation; using %s instead",
                  tacl_coll_name(args->type), forced->name,
                  best != NULL ? best->name : "none");
    else if (view->n_nodes > 1 && !tacl__hier_layout_ok(view) &&
             best != NULL && (args->type == TACL_COLL_ALLGATHER ||
                              args->type == TACL_COLL_REDUCE_SCATTER ||
                              args->type == TACL_COLL_ALLREDUCE))
        TACL_INFO(TUNE, "%s: hierarchical algorithms cannot serve this "
                  "layout (%d ranks on %d nodes: %s); using %s instead",
                  tacl_coll_name(args->type), view->nranks, view->n_nodes,
                  algo_layout_why(view), best->name);
    if (best != NULL)
        TACL_INFO(TUNE, "%s of %zu elements on %d ranks, %d nodes: %s "
                  "(modelled %.3g us)", tacl_coll_name(args->type),
                  args->count, view->nranks, view->n_nodes, best->name,
                  best_cost * 1e6);
    return best;
}

/* The quantized rows: qgZ, or qwZ with the all-gather of its payload. */
static tacl_status_t choose_quant(const tacl__topo_view_t *view,
                                  const tacl__coll_args_t *args,
                                  const tacl__algo_force_t *force,
                                  tacl__choice_t *choice)
{
    tacl__coll_args_t ia;
    tacl__topo_view_t iv;

    if (args->type == TACL_COLL_REDUCE_SCATTER) {
        choice->algo = tacl__algo_row(TACL__ALGO_QGZ, args->type);
        return TACL_OK;
    }
    if (args->type != TACL_COLL_ALLGATHER)
        return tacl__error(TACL_ERR_UNSUPPORTED, COLL,
                           "%s has no quantized form; use allgather or "
                           "reduce_scatter", tacl_coll_name(args->type));
    choice->algo = tacl__algo_row(TACL__ALGO_QWZ, args->type);
    tacl__qwz_payload(args, view, &ia, &iv);
    choice->inner = tacl__algo_select(&ia, &iv, tacl__algo_forced(force, &ia));
    if (choice->inner == NULL)
        return tacl__error(TACL_ERR_UNSUPPORTED, COLL,
                           "qwz: no all-gather algorithm can move the "
                           "quantized payload on %d ranks", view->nranks);
    return TACL_OK;
}

tacl_status_t tacl__algo_choose(const tacl__topo_view_t *view,
                                const tacl__coll_args_t *args,
                                const tacl__algo_force_t *force,
                                const tacl__algo_tuner_t *tuner,
                                unsigned flags, tacl__choice_t *choice)
{
    const tacl__algo_t *forced = tacl__algo_forced(force, args);
    const tacl__algo_t *fast;

    *choice = (tacl__choice_t){TACL__ENGINE_SCHEDULE, NULL, NULL};
    if (args->qbits != 0)
        return choose_quant(view, args, force, choice);
    fast = tacl__algo_row(TACL__ALGO_FAST, args->type);
    if ((flags & TACL__CHOOSE_ALONE) && fast != NULL &&
        (forced == NULL || forced == fast) && fast->supports(args, view)) {
        choice->engine = TACL__ENGINE_FAST;
        choice->algo = fast;
        return TACL_OK;
    }
    if (forced == NULL && tuner != NULL)
        forced = tuner->pick(tuner->arg, args);
    choice->algo = tacl__algo_select(args, view, forced);
    if (choice->algo == NULL)
        return tacl__error(TACL_ERR_UNSUPPORTED, TUNE,
                           "no algorithm supports %s on %d ranks",
                           tacl_coll_name(args->type), view->nranks);
    return TACL_OK;
}
