/*
 * The plan: Cupcake's fusion for each option (uncompressed and every
 * codec), the fastest taken, then each group allowed to switch to another
 * option where the whole timeline gets shorter (a local step, not a
 * search).  Espresso's per-tensor decisions (espresso.c) are the last
 * candidate: one group a tensor, each with its own option and encoder,
 * taken where they are faster by more than a millionth (PLAN_TIE): where
 * the communication hides under the compute, fusion and one call a
 * tensor are predicted alike, and the plan of fewer calls is kept (each
 * call has costs the model leaves out: the ranks' skew, the scheduler).  The refusal: a plan predicted slower
 * than the best uncompressed fusion is never returned; that fusion is
 * returned instead.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "planner_int.h"

/* A plan of more calls must be quicker by this share to be taken. */
#define PLAN_TIE 1e-6

/* Passes of the per-group switch; each one that changes nothing ends it. */
#define REFINE_PASSES 4

/* Let each group take the option that shortens the step most. */
static double refine(const tacl_planner_t *p, int ngroups, const int *first,
                     int *option, double time)
{
    for (int pass = 0; pass < REFINE_PASSES; pass++) {
        int changed = 0;
        for (int gi = 0; gi < ngroups; gi++) {
            int keep = option[gi];
            for (int o = TACL_PLANNER_NONE; o < p->ncodecs; o++) {
                double t;
                option[gi] = o;
                t = tacl_planner_time(p, ngroups, first, option, NULL);
                if (t < time) {
                    time = t;
                    keep = o;
                    changed = 1;
                }
            }
            option[gi] = keep;
        }
        if (!changed)
            break;
    }
    return time;
}

/* Uncompressed, one call a tensor; scratch has room for 2n ints. */
static double layerwise_time(const tacl_planner_t *p, int *scratch)
{
    for (int i = 0; i < p->n; i++) {
        scratch[i] = i;
        scratch[p->n + i] = TACL_PLANNER_NONE;
    }
    return tacl_planner_time(p, p->n, scratch, scratch + p->n, NULL);
}

/* Take Espresso's per-tensor decisions (one group a tensor) when they
 * beat the fusion by more than PLAN_TIE; try holds room for 2n ints. */
static tacl_status_t take_decided(tacl_planner_t *p, tacl_planner_plan_t *pl,
                                  int *try, double *best_p)
{
    double t;
    tacl_status_t st = tacl_planner_decide(p, try, try + p->n, &t);

    if (st != TACL_OK || t >= *best_p * (1.0 - PLAN_TIE))
        return st;
    for (int i = 0; i < p->n; i++) {
        pl->first[i] = i;
        pl->option[i] = try[i];
        pl->on_cpu[i] = try[p->n + i];
    }
    pl->ngroups = p->n;
    *best_p = t;
    return TACL_OK;
}

tacl_status_t tacl_planner_plan(tacl_planner_t *p,
                                tacl_planner_plan_t *plan_p)
{
    int n, *try_first, try_n;
    double best = INFINITY, t;
    tacl_planner_plan_t plan = {0};
    tacl_status_t st = TACL_OK;

    if (p == NULL || plan_p == NULL)
        return tacl__planner_fail(TACL_ERR_INVALID_ARG,
                                  "planner_plan: a NULL argument");
    n = p->n;
    plan.first = malloc((size_t)n * sizeof(int));
    plan.option = malloc((size_t)n * sizeof(int));
    plan.on_cpu = calloc((size_t)n, sizeof(int));
    try_first = malloc(2 * (size_t)n * sizeof(int));
    if (!plan.first || !plan.option || !plan.on_cpu || !try_first) {
        st = tacl__planner_fail(TACL_ERR_NO_MEMORY,
                                "planner_plan: no memory for %d tensors", n);
        goto out;
    }
    for (int o = TACL_PLANNER_NONE; o < p->ncodecs && st == TACL_OK; o++) {
        long visited = 0;
        st = tacl__planner_fuse_below(p, o, best, try_first, &try_n, &t,
                                      &visited);
        plan.visited += visited;
        if (o == TACL_PLANNER_NONE)
            plan.uncompressed_time = t;
        if (st != TACL_OK || t >= best)
            continue;
        best = t;
        plan.ngroups = try_n;
        memcpy(plan.first, try_first, (size_t)try_n * sizeof(int));
        for (int gi = 0; gi < try_n; gi++)
            plan.option[gi] = o;
    }
    if (st == TACL_OK) {
        best = refine(p, plan.ngroups, plan.first, plan.option, best);
        st = take_decided(p, &plan, try_first, &best);
    }
    if (st != TACL_OK)
        goto out;
    plan.layerwise_time = layerwise_time(p, try_first);
    /* The refusal (never reached while the uncompressed fusion is a
     * candidate above; kept so that a later search cannot break it). */
    if (best > plan.uncompressed_time) {
        st = tacl_planner_fuse(p, TACL_PLANNER_NONE, plan.first,
                               &plan.ngroups, &best, NULL);
        for (int gi = 0; gi < plan.ngroups; gi++) {
            plan.option[gi] = TACL_PLANNER_NONE;
            plan.on_cpu[gi] = 0;
        }
    }
    tacl__planner_settle(p, plan.ngroups, plan.first, plan.option,
                         plan.on_cpu);
    plan.step_time = best;
    *plan_p = plan;
    plan.first = plan.option = plan.on_cpu = NULL;
out:
    free(plan.first);
    free(plan.option);
    free(plan.on_cpu);
    free(try_first);
    return st;
}

void tacl_planner_plan_free(tacl_planner_plan_t *plan)
{
    if (plan == NULL)
        return;
    free(plan->first);
    free(plan->option);
    free(plan->on_cpu);
    plan->first = plan->option = plan->on_cpu = NULL;
    plan->ngroups = 0;
}
