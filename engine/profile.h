/*
 * The engine's compression plans (issue 30): layer-wise, or Cupcake's
 * fusion or the planner's full plan from a profile of this job.
 */
#ifndef ENGINE_PROFILE_H
#define ENGINE_PROFILE_H

#include <stddef.h>

#include "engine.h"

typedef enum {
    ENGINE_PLAN_NONE,   /* every layer compressed on its own */
    ENGINE_PLAN_FUSION, /* the planner's fusion, every group compressed */
    ENGINE_PLAN_FULL    /* the planner's plan: groups, compressed or not */
} engine_plan_kind_t;

/* "none", "fusion" or "full" into *kind_p; -1 when none of them. */
int engine_plan_parse(const char *name, engine_plan_kind_t *kind_p);
const char *engine_plan_name(engine_plan_kind_t kind);

/* Every layer its own group, compressed (not collective). */
tacl_status_t engine_plan_layerwise(engine_t *e, const gcomp_codec_t *codec);

/*
 * Collective on comm (the engine's world): every rank times the plan's
 * reduce-scatter, dense and encoded with codec along its route; rank 0
 * takes the engine's profile (the steps since engine_profile_reset),
 * prices the groups by those lines, plans, and prints the lines and the
 * plan when verbose; the plan is broadcast so every rank sets the same
 * one.  On error every rank returns it, with the reason in err.
 */
tacl_status_t engine_plan_profiled(engine_t *e, tacl_comm_t comm,
                                   const gcomp_codec_t *codec,
                                   engine_plan_kind_t kind, int verbose,
                                   char *err, size_t errlen);

#endif /* ENGINE_PROFILE_H */
