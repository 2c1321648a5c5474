/*
 * Requests of the "_nb" calls and of tacl_group_end_nb().  Testing a
 * request drives progress once; waiting drives it until completion or the
 * timeout.  Freeing a pending request is refused, since its buffers are
 * still in use.
 *
 * Completion is pushed, not polled: each execution of the request calls
 * request_exec_done() when it finishes, from whichever thread finishes it
 * (a thread in test or wait, one posting another operation, the progress
 * thread, or one failing the context on abort, revoke or timeout), with
 * that context's lock held.  The last one completes the request: it
 * publishes the status and runs the callback.  The request's state word
 * makes "exactly once" hold against tacl_request_set_callback without a
 * lock (the completion runs the callback it found set, set_callback the
 * one it set too late), and tacl_request_free waits, while the state
 * says a callback may be running, for it to return.
 */
#include <sched.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h"
#include "comm.h"
#include "log.h"

/* Everything is done: publish the status and run the callback. */
static void request_complete(tacl_request_t req)
{
    int was;

    req->status = atomic_load(&req->first_error);
    was = atomic_exchange_explicit(&req->state, TACL__REQ_CALLING,
                                   memory_order_acq_rel);
    if (was == TACL__REQ_HOOKED)
        req->cb(req, req->status, req->cb_arg);
    atomic_store_explicit(&req->state, TACL__REQ_DONE, memory_order_release);
}

/* One execution (or the set-up guard, with TACL_OK) finished. */
static void request_exec_done(void *arg, tacl_status_t status)
{
    tacl_request_t req = arg;
    int ok = TACL_OK;

    if (status != TACL_OK)
        atomic_compare_exchange_strong(&req->first_error, &ok, status);
    if (atomic_fetch_sub(&req->pending, 1) == 1)
        request_complete(req);
}

/*
 * The last request a thread freed, kept for its next one: a loop of _nb
 * calls and waits, the common use, then allocates nothing (a tenth of an
 * 8-byte fast-engine call went to malloc and free, and an atomic
 * exchange on one shared spare cost as much).  A thread's spare is freed
 * when it exits (the key's destructor; the main thread's stays
 * reachable to the end).
 */
static __thread tacl_request_t request_spare;
static __thread int spare_keyed;
static pthread_key_t spare_key;
static pthread_once_t spare_once = PTHREAD_ONCE_INIT;

static void request_destroy(tacl_request_t req)
{
    pthread_mutex_destroy(&req->lock);
    free(req);
}

static void spare_exit(void *slot)
{
    tacl_request_t *spare = slot;

    if (*spare != NULL)
        request_destroy(*spare);
    *spare = NULL;
}

static int spare_key_made;

static void spare_key_make(void)
{
    spare_key_made = pthread_key_create(&spare_key, spare_exit) == 0;
}

/* Unloaded (a dlclose), the library takes its destructor with it. */
__attribute__((destructor)) static void spare_key_drop(void)
{
    if (spare_key_made)
        pthread_key_delete(spare_key);
}

/* A zeroed request with its lock initialised, or NULL. */
static tacl_request_t request_alloc(void)
{
    tacl_request_t req = request_spare;
    const size_t lock_end = offsetof(struct tacl_request, nexec);

    if (req != NULL) {
        request_spare = NULL;
    } else {
        req = malloc(sizeof(*req));
        if (req == NULL)
            return NULL;
        pthread_mutex_init(&req->lock, NULL);
    }
    memset((char *)req + lock_end, 0, sizeof(*req) - lock_end);
    return req;
}

static void request_dealloc(tacl_request_t req)
{
    if (request_spare != NULL) {
        request_destroy(req);
        return;
    }
    if (!spare_keyed) {
        pthread_once(&spare_once, spare_key_make);
        if (!spare_key_made ||
            pthread_setspecific(spare_key, &request_spare) != 0) {
            request_destroy(req);
            return;
        }
        spare_keyed = 1;
    }
    request_spare = req;
}

/*
 * A request of the nexec executions execs, not hooked yet: pending
 * counts them, plus a guard (guard 1) when they may finish while the
 * hooks are set.
 */
static tacl_status_t request_new(tacl__exec_t **execs, int nexec,
                                 int guard, tacl_request_t *req_p)
{
    tacl_request_t req = request_alloc();

    if (req == NULL)
        return tacl__error(TACL_ERR_NO_MEMORY, COLL, "out of memory");
    /* A request of one execution (every call but a group's) keeps it in
     * place: one allocation per request. */
    req->execs = nexec <= 1 ? &req->one
                            : malloc((size_t)nexec * sizeof(*execs));
    if (req->execs == NULL) {
        request_dealloc(req);
        return tacl__error(TACL_ERR_NO_MEMORY, COLL, "out of memory");
    }
    for (int i = 0; i < nexec; i++)
        req->execs[i] = execs[i];
    req->nexec = nexec;
    req->status = TACL_IN_PROGRESS;
    atomic_init(&req->first_error, TACL_OK);
    atomic_init(&req->pending, nexec + guard);
    *req_p = req;
    return TACL_OK;
}

/* Hook the request's execution exec (its context's lock held or not). */
static void request_hook(tacl_request_t req, tacl__exec_t *exec, int locked)
{
    tacl_status_t s = TACL_OK;

    if (locked ? tacl__exec_on_done_locked(exec, request_exec_done, req)
               : tacl__exec_on_done(exec, request_exec_done, req)) {
        tacl__exec_done(exec, &s);
        request_exec_done(req, s);
    }
}

tacl_status_t tacl__request_create(tacl__exec_t **execs, int nexec,
                                   tacl_request_t *req_p)
{
    tacl_status_t status = request_new(execs, nexec, 1, req_p);

    if (status != TACL_OK)
        return status;
    /* The guard keeps executions finishing while the hooks are set from
     * completing the request early. */
    for (int i = 0; i < nexec; i++)
        request_hook(*req_p, execs[i], 0);
    request_exec_done(*req_p, TACL_OK);
    return TACL_OK;
}

tacl_status_t tacl__request_of_locked(tacl__exec_t *exec,
                                      tacl_request_t *req_p)
{
    /* Nothing finishes while the lock is held: no guard. */
    tacl_status_t status = request_new(&exec, 1, 0, req_p);

    if (status == TACL_OK)
        request_hook(*req_p, exec, 1);
    return status;
}

tacl_status_t tacl__request_deferred(double timeout_s, tacl_request_t *req_p)
{
    /* The guard is the one completion the worker will give it. */
    tacl_status_t status = request_new(NULL, 0, 1, req_p);

    if (status == TACL_OK)
        (*req_p)->timeout_s = timeout_s;
    return status;
}

void tacl__request_finish(tacl_request_t req, tacl_status_t status,
                          const char *why)
{
    /* The message was recorded in the worker's thread; the waiter's
     * thread gets it again from here. */
    if (status < 0 && why != NULL && why[0] != '\0')
        req->why = strdup(why);
    request_exec_done(req, status);
}

tacl_status_t tacl__request_or_wait(tacl__exec_t *exec,
                                    tacl_status_t status)
{
    if (status != TACL_OK) {
        tacl__exec_wait(&exec, 1);
        tacl__exec_free(exec);
    }
    return status;
}

tacl_status_t tacl__request_persistent(tacl_comm_t comm,
                                       const tacl__coll_args_t *args,
                                       tacl__exec_t *exec,
                                       tacl_request_t *req_p)
{
    tacl_status_t status = tacl__request_create(&exec, 1, req_p);

    if (status != TACL_OK)
        return status;
    (*req_p)->persistent = 1;
    (*req_p)->comm = comm;
    (*req_p)->args = *args;
    (*req_p)->status = TACL_OK; /* never started: waits return at once */
    return TACL_OK;
}

tacl_status_t tacl__request_restart(tacl_request_t req, uint64_t seq)
{
    tacl_status_t status;

    req->status = TACL_IN_PROGRESS;
    atomic_store(&req->first_error, TACL_OK);
    atomic_store(&req->pending, 1);
    /* A callback set earlier runs at each completion. */
    atomic_store(&req->state, req->cb != NULL ? TACL__REQ_HOOKED
                                              : TACL__REQ_PENDING);
    req->args.seq = seq;
    status = tacl__exec_restart(req->execs[0], seq, request_exec_done, req);
    if (status != TACL_OK) {
        req->status = TACL_OK;
        atomic_store(&req->state, TACL__REQ_DONE);
    }
    return status;
}

/* The communicator of the request's first execution, for messages. */
static tacl_comm_t request_comm(tacl_request_t req)
{
    return req->nexec > 0 ? tacl__comm_of(tacl__exec_xcomm(req->execs[0]))
                          : NULL;
}

/*
 * The error a request ended with, returned to this caller: its message
 * is the one recorded where it was decided, which may have been in
 * another thread (the progress thread, a tester, an abort); the context's
 * failure says it again here (the execution keeps its context alive,
 * the communicator may be gone).  Then the last-error rule as for every
 * call (hold.c).
 */
static tacl_status_t request_fail(tacl_request_t req, tacl_status_t status)
{
    const char *why;

    if (status >= 0)
        return status;
    if (tacl__last_error()[0] == '\0' && req->why != NULL)
        tacl__error(status, COLL, "%s", req->why);
    if (tacl__last_error()[0] == '\0' && req->nexec > 0 &&
        (why = tacl__exec_failure(req->execs[0])) != NULL)
        tacl__error(status, COLL, "%s", why);
    return tacl__comm_fail(req->nexec > 0 ? request_comm(req) : NULL, status);
}

TACL_EXPORT tacl_status_t tacl_request_test(tacl_request_t req, int *done_p)
{
    tacl__last_error_clear();
    if (req == NULL || done_p == NULL)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL, "%s is NULL",
                           req == NULL ? "req" : "done_p");
    if (!tacl__request_done(req)) {
        for (int i = 0; i < req->nexec; i++) {
            tacl_status_t s;
            if (!tacl__exec_done(req->execs[i], &s))
                tacl__exec_progress(req->execs[i]);
        }
    }
    *done_p = tacl__request_done(req);
    return *done_p ? request_fail(req, req->status) : TACL_OK;
}

static double request_clock(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/*
 * A deferred request has nothing to drive: its worker finishes it.  The
 * wait sleeps in short naps (a host-composed operation lasts at least a
 * few collectives) and is bounded by the communicator's timeout.
 */
static tacl_status_t request_wait_deferred(tacl_request_t req)
{
    const struct timespec nap = {0, 50000};
    double deadline = request_clock() + req->timeout_s;

    while (!tacl__request_done(req)) {
        if (request_clock() > deadline)
            return tacl__error(TACL_ERR_TIMEOUT, COLL,
                               "the host-composed operation did not end "
                               "within the timeout (%g s); it is still "
                               "pending",
                               req->timeout_s);
        nanosleep(&nap, NULL);
    }
    return req->status;
}

TACL_EXPORT tacl_status_t tacl_request_wait(tacl_request_t req)
{
    tacl_status_t status;

    tacl__last_error_clear();
    if (req == NULL)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL, "req is NULL");
    if (tacl__request_done(req))
        return request_fail(req, req->status);
    if (req->nexec == 0)
        return request_fail(req, request_wait_deferred(req));
    status = tacl__exec_wait(req->execs, req->nexec);
    /* Every execution finished, so its hook ran: the request is complete,
     * and done once a callback running in the completing thread returns
     * (callbacks are short and call nothing of tacl). */
    while (atomic_load_explicit(&req->pending, memory_order_acquire) == 0 &&
           !tacl__request_done(req))
        sched_yield();
    if (tacl__request_done(req))
        status = req->status;
    return request_fail(req, status);
}

TACL_EXPORT tacl_status_t tacl_request_set_callback(tacl_request_t req,
                                                    tacl_request_callback_t fn,
                                                    void *arg)
{
    tacl_status_t status = TACL_OK;

    tacl__last_error_clear();
    if (req == NULL || fn == NULL)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL, "%s is NULL",
                           req == NULL ? "req" : "fn");
    pthread_mutex_lock(&req->lock);
    if (req->cb != NULL) {
        status = tacl__error(TACL_ERR_INVALID_USAGE, COLL,
                             "the request has a callback already; a "
                             "request takes one");
    } else {
        int was = TACL__REQ_PENDING;

        req->cb = fn;
        req->cb_arg = arg;
        /* Complete already (the completion found no callback): it runs
         * now, in this thread (a persistent request's at the end of each
         * later start). */
        if (!atomic_compare_exchange_strong_explicit(
                &req->state, &was, TACL__REQ_HOOKED, memory_order_acq_rel,
                memory_order_acquire) &&
            !req->persistent)
            fn(req, req->status, arg);
    }
    pthread_mutex_unlock(&req->lock);
    if (status != TACL_OK && req->nexec > 0)
        tacl__comm_fail(request_comm(req), status);
    return status;
}

/* Freeing leaves the thread's last error as it is: a caller that waited
 * on a request that failed frees it, then reads the message. */
TACL_EXPORT tacl_status_t tacl_request_free(tacl_request_t req)
{
    int state;

    if (req == NULL)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL, "req is NULL");
    /* A completion still running the callback in another thread is
     * waited for. */
    while ((state = atomic_load_explicit(&req->state,
                                         memory_order_acquire)) ==
           TACL__REQ_CALLING)
        sched_yield();
    if (state != TACL__REQ_DONE)
        return tacl__comm_fail(request_comm(req),
                               tacl__error(TACL_ERR_INVALID_USAGE, COLL,
                               "the request is still in progress; wait for "
                               "it before freeing it"));
    for (int i = 0; i < req->nexec; i++)
        tacl__exec_free(req->execs[i]);
    if (req->execs != &req->one)
        free(req->execs);
    free(req->why);
    request_dealloc(req);
    return TACL_OK;
}
