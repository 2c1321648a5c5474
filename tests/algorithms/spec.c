/*
 * Specs for tests (spec.h).
 */
#include <stdio.h>
#include <stdlib.h>

#include "log.h"
#include "spec.h"

const tacl__algo_force_t *spec_force(const char *spec)
{
    static __thread tacl__algo_force_t force;

    if (tacl__algo_force_parse(spec, &force) != TACL_OK) {
        fprintf(stderr, "test spec '%s': %s\n", spec, tacl__last_error());
        abort();
    }
    return &force;
}

const tacl__algo_t *spec_row(const char *spec, const tacl__coll_args_t *a)
{
    return tacl__algo_forced(spec_force(spec), a);
}

tacl_status_t spec_build(tacl__sched_t *s, const tacl__coll_args_t *a,
                         const tacl__topo_view_t *view, const char *spec,
                         const tacl__algo_t **algo_p)
{
    tacl__choice_t choice;
    tacl_status_t status;

    status = tacl__algo_choose(view, a, spec_force(spec), NULL, 0, &choice);
    if (status == TACL_OK)
        status = tacl__algo_build(s, a, view, &choice);
    if (status == TACL_OK && algo_p != NULL)
        *algo_p = choice.algo;
    return status;
}
