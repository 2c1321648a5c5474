/*
 * The executor: runs any schedule on the context's transports and the
 * CPU kernels.  It starts every step whose dependencies are met, so
 * independent steps overlap; progress never blocks and picks up where it
 * stopped.  Waiting spins briefly, then sleeps in the transports, and is
 * bounded by the context's timeout.
 */
#ifndef TACL_LIB_EXECUTOR_H
#define TACL_LIB_EXECUTOR_H

#include "comm.h"

/**
 * Take ownership of a built schedule and start it on comm.  The caller
 * must hold the context lock.
 */
tacl_status_t tacl__exec_start(tacl_comm_t comm, tacl__sched_t *sched,
                               tacl__exec_t **exec_p);

/** Whether exec finished; *status_p gets its result when it did. */
int tacl__exec_done(const tacl__exec_t *exec, tacl_status_t *status_p);

/** Progress every execution of a context once (takes the lock). */
int tacl__ctx_progress(tacl__ctx_t *ctx);

/**
 * Wait until every execution in execs is done, or the timeout passes
 * without progress; returns the first error.
 */
tacl_status_t tacl__exec_wait(tacl__exec_t **execs, int nexec);

/** The communicator an execution runs on. */
tacl_comm_t tacl__exec_comm(const tacl__exec_t *exec);

/** Free a finished execution. */
void tacl__exec_free(tacl__exec_t *exec);

#endif /* TACL_LIB_EXECUTOR_H */
