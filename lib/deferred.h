/*
 * Non-blocking forms of host-composed operations (deferred.c): a worker
 * per communicator runs them, in issue order, on a private shadow of it.
 */
#ifndef TACL_LIB_DEFERRED_H
#define TACL_LIB_DEFERRED_H

#include "tacl.h"

/** One operation's blocking form, run on the worker's communicator. */
typedef tacl_status_t (*tacl__deferred_fn_t)(void *arg, tacl_comm_t shadow);

/**
 * Queue fn(arg, shadow) on comm's worker (made, collectively, at the
 * first call: every rank issues its _nb calls in the same order) and give
 * its request in *req_p.  arg is malloc'd by the caller and freed here,
 * also on failure.  Call it holding comm, after the arguments passed
 * the blocking form's checks.
 */
tacl_status_t tacl__deferred_issue(tacl_comm_t comm, tacl__deferred_fn_t fn,
                                   void *arg, tacl_request_t *req_p);

#endif /* TACL_LIB_DEFERRED_H */
