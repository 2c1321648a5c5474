/*
 * The plan cache: a communicator keeps the choices and schedules of its
 * latest distinct operations, so that a call identical to one of them
 * (tacl__coll_args_same: collective, count, dtype, op, root, buffers,
 * chunk, quantization, memory facts), under the same configuration
 * load, runs that schedule again instead of asking the decider and a
 * builder for new ones.  Only the operation's sequence number differs
 * between two such calls, and it appears only in the message tags,
 * which are stamped anew on a hit.
 */
#ifndef TACL_LIB_PLAN_H
#define TACL_LIB_PLAN_H

#include <stdint.h>

#include "algo.h"
#include "sched.h"
#include "tacl.h"

/**
 * Build the schedule of one operation into s (empty, initialised), from
 * comm's cache when it holds the operation, else as the decider chooses
 * it (tacl__choose, flags) with its builder (and remember both).
 * *choice_p receives the choice.
 */
tacl_status_t tacl__plan_build(tacl_comm_t comm, const tacl__coll_args_t *args,
                               unsigned flags, tacl__sched_t *s,
                               tacl__choice_t *choice_p);

/** Cache hits and misses on comm so far (tests and benchmarks). */
void tacl__plan_stats(tacl_comm_t comm, uint64_t *hits_p,
                      uint64_t *misses_p);

#endif /* TACL_LIB_PLAN_H */
