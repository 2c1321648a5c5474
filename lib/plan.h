/*
 * The plan cache: a communicator keeps the schedules of its latest
 * distinct operations, so that an operation with the same signature
 * (collective, count, dtype, op, root, buffers, chunk, quantization,
 * memory facts and the forced-algorithm spec) runs its schedule again
 * instead of asking the tuner and a builder for a new one.  Only the
 * operation's sequence number differs between two such calls, and it
 * appears only in the message tags, which are stamped anew on a hit.
 */
#ifndef TACL_LIB_PLAN_H
#define TACL_LIB_PLAN_H

#include <stdint.h>

#include "algo.h"
#include "sched.h"
#include "tacl.h"

typedef struct tacl__plan_cache tacl__plan_cache_t;

/**
 * Build the schedule of one operation into s (empty, initialised), from
 * comm's cache when it holds the operation's signature, else with the
 * tuner and builder (and remember it).  *algo_p receives the algorithm.
 */
tacl_status_t tacl__plan_build(tacl_comm_t comm, const tacl__coll_args_t *args,
                               const char *spec, tacl__sched_t *s,
                               const tacl__algo_t **algo_p);

/** Free comm's cache (at destroy); a NULL cache is fine. */
void tacl__plan_cache_free(tacl__plan_cache_t *cache);

/** Cache hits and misses on comm so far (tests and benchmarks). */
void tacl__plan_stats(tacl_comm_t comm, uint64_t *hits_p,
                      uint64_t *misses_p);

#endif /* TACL_LIB_PLAN_H */
