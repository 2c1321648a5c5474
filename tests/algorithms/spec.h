/*
 * Tests name algorithms as a user does, with TACL_ALGO's strings; these
 * helpers turn them into what the decider reads (a force table) and ask
 * it, as the library does with TACL_ALGO.  Shared by the algorithm and
 * simulator suites.
 */
#ifndef TACL_TESTS_SPEC_H
#define TACL_TESTS_SPEC_H

#include "algo.h"

/**
 * The force table of spec (NULL or "" for none), in storage of the
 * calling thread that the next call reuses; aborts the test program on a
 * spec that does not parse.
 */
const tacl__algo_force_t *spec_force(const char *spec);

/** The row spec forces for a (NULL: none). */
const tacl__algo_t *spec_row(const char *spec, const tacl__coll_args_t *a);

/**
 * Build a into s as the decider chooses it on view with spec's table (no
 * fast engine: a schedule is wanted); *algo_p, if not NULL, receives the
 * row.
 */
tacl_status_t spec_build(tacl__sched_t *s, const tacl__coll_args_t *a,
                         const tacl__topo_view_t *view, const char *spec,
                         const tacl__algo_t **algo_p);

#endif /* TACL_TESTS_SPEC_H */
