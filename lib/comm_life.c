/*
 * A communicator's life after creation: destroy and abort (destroyed
 * handles are kept as small tombstones so that a later use is reported
 * as TACL_ERR_INVALID_USAGE rather than touching freed memory), the
 * queries, the byte counters and the asynchronous error.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "config.h"
#include "comm.h"
#include "log.h"

static pthread_mutex_t grave_lock = PTHREAD_MUTEX_INITIALIZER;
static struct tacl_comm *graveyard;

static void bury_derived(tacl_comm_t comm);

/* Keep the (zeroed) handle so that later calls see a destroyed comm. */
static void comm_tombstone(tacl_comm_t comm)
{
    /* Keep the handle itself so later calls see a destroyed comm (and a
     * late tacl__comm_enter() or comm_close() a closed one). */
    __atomic_store_n(&comm->magic, TACL__COMM_DEAD, __ATOMIC_SEQ_CST);
    memset((char *)comm + offsetof(struct tacl_comm, rank), 0,
           sizeof(*comm) - offsetof(struct tacl_comm, rank));
    comm->closing = 1;
    pthread_mutex_lock(&grave_lock);
    comm->grave_next = graveyard;
    graveyard = comm;
    pthread_mutex_unlock(&grave_lock);
}

/*
 * Destroy and abort accept a communicator whose non-blocking init is
 * still running (they wait for it: it is bounded by the timeout) or
 * failed (nothing to release).  Returns 1 when comm was such a failed
 * one and is now a tombstone.
 */
static int comm_settle_init(tacl_comm_t comm)
{
    if (comm == NULL || comm->magic != TACL__COMM_ALIVE)
        return 0;
    if (atomic_exchange(&comm->init_joinable, 0))
        pthread_join(comm->init_thread, NULL);
    if (comm->init_status == TACL_OK)
        return 0;
    comm_tombstone(comm);
    return 1;
}

/* The communicator's executions in flight (under the context lock). */
static int comm_inflight(tacl_comm_t comm)
{
    int n;

    if (comm == NULL)
        return 0;
    pthread_mutex_lock(&comm->x.ctx->lock);
    n = comm->x.inflight;
    pthread_mutex_unlock(&comm->x.ctx->lock);
    return n;
}

static void comm_bury(tacl_comm_t comm)
{
    tacl__ctx_t *ctx = comm->x.ctx;

    bury_derived(comm);
    /* The progress thread first: nothing runs on what goes next. */
    if (comm->progress_thread)
        tacl__ctx_progress_drop(ctx);
    if (comm->stream_hold)
        tacl__ctx_progress_drop(ctx);
    /* Ended operations on streams still waiting to be freed. */
    tacl__ctx_reap(ctx);
    tacl__scratch_fini(&comm->x.scratch);
    tacl__flight_fini(&comm->x.flight);
    /* Every feature's state, whatever the features are. */
    for (int i = 0; i < TACL__EXT_COUNT; i++) {
        if (comm->ext[i] != NULL)
            comm->ext[i]->free(comm->ext[i]);
        comm->ext[i] = NULL;
    }
    free(comm->x.world);
    free(comm->node_of);
    free(comm->x.link_of);
    free(comm->p2p_send);
    free(comm->p2p_recv);
    tacl__ctx_release(ctx);
    comm_tombstone(comm);
}

/* Derived communicators go with their parent. */
static void bury_derived(tacl_comm_t comm)
{
    if (comm->local != NULL && comm->local->magic == TACL__COMM_ALIVE)
        comm_bury(comm->local);
    if (comm->rail != NULL && comm->rail->magic == TACL__COMM_ALIVE)
        comm_bury(comm->rail);
    comm->local = comm->rail = NULL;
}

/*
 * The start of destroy and abort: 1 when the call ends here with
 * *status_p (an initialisation that ended in failure is settled; a bad
 * handle is refused).
 */
static int comm_end_begins(tacl_comm_t comm, tacl_status_t *status_p)
{
    tacl__last_error_clear();
    *status_p = TACL_OK;
    if (comm_settle_init(comm))
        return 1;
    *status_p = tacl__comm_check(comm);
    return *status_p != TACL_OK;
}

TACL_EXPORT tacl_status_t tacl_comm_destroy(tacl_comm_t comm)
{
    tacl_status_t status;
    int inflight;

    if (comm_end_begins(comm, &status))
        return status;
    if (comm->is_derived)
        return tacl__comm_fail(comm, tacl__error(TACL_ERR_INVALID_USAGE,
                               INIT, "this communicator came from "
                               "tacl_comm_get_local/rail and is destroyed "
                               "with its parent"));
    /* A thread still inside a call makes the destroy fail, as in-flight
     * operations do: waiting for it is bounded by the timeout. */
    status = tacl__comm_close(comm);
    if (status != TACL_OK)
        return status;
    status = tacl__comm_wait_calls(comm, comm->x.timeout_s);
    if (status != TACL_OK) {
        tacl__comm_reopen(comm);
        return tacl__comm_fail(comm, status);
    }
    inflight = comm_inflight(comm);
    if (comm_inflight(comm->local) > 0 || comm_inflight(comm->rail) > 0)
        status = tacl__error(TACL_ERR_INVALID_USAGE, INIT, "operations of "
                             "a derived communicator are still in flight; "
                             "wait for them first");
    else if (inflight > 0)
        status = tacl__error(TACL_ERR_INVALID_USAGE, INIT, "%d operations "
                             "of this communicator are still in flight; "
                             "wait for their requests first (or call "
                             "tacl_comm_abort)", inflight);
    if (status != TACL_OK) {
        tacl__comm_reopen(comm);
        return tacl__comm_fail(comm, status);
    }
    comm_bury(comm);
    return TACL_OK;
}

TACL_EXPORT tacl_status_t tacl_comm_abort(tacl_comm_t comm)
{
    tacl_status_t status;
    tacl__ctx_t *ctx;

    if (comm_end_begins(comm, &status))
        return status;
    /* New calls fail from here on. */
    status = tacl__comm_close(comm);
    if (status != TACL_OK)
        return status;
    ctx = comm->x.ctx;
    pthread_mutex_lock(&ctx->lock);
    tacl__error(TACL_ERR_REMOTE, INIT, "rank %d aborted the communicator",
                ctx->rank);
    if (ctx->bs != NULL)
        tacl__bootstrap_abort(ctx->bs);
    tacl__ctx_set_fatal(ctx, TACL_ERR_REMOTE);
    pthread_mutex_unlock(&ctx->lock);
    /* The calls other threads are in fail promptly now: wait for them to
     * leave before freeing what they use.  One that does not keeps the
     * communicator's memory (it is only marked dead). */
    status = tacl__comm_wait_calls(comm, comm->x.timeout_s);
    /* Requests the caller still holds keep their executions; the context
     * is freed with its last communicator. */
    if (status == TACL_OK && comm_inflight(comm) == 0) {
        comm_bury(comm);
    } else {
        if (comm->progress_thread)
            tacl__ctx_progress_drop(ctx);
        if (comm->stream_hold)
            tacl__ctx_progress_drop(ctx);
        comm->progress_thread = comm->stream_hold = 0;
        tacl__ctx_reap(ctx);
        __atomic_store_n(&comm->magic, TACL__COMM_DEAD, __ATOMIC_SEQ_CST);
    }
    return TACL_OK;
}

TACL_EXPORT const char *tacl_comm_last_algorithm(tacl_comm_t comm)
{
    if (comm == NULL || comm->magic != TACL__COMM_ALIVE)
        return "";
    return comm->last_algo;
}

/* Enter a checked comm for a query that writes *out (named what). */
static tacl_status_t enter_for(tacl_comm_t comm, const void *out,
                               const char *what)
{
    if (out == NULL)
        return tacl__comm_fail(comm, tacl__error(TACL_ERR_INVALID_ARG, INIT,
                                                 "%s is NULL", what));
    return tacl__comm_enter(comm);
}

TACL_EXPORT tacl_status_t tacl_comm_get_async_error(tacl_comm_t comm,
                                                    tacl_status_t *error_p)
{
    tacl_status_t status = tacl__comm_check(comm);

    if (status == TACL_IN_PROGRESS || (status < 0 && comm != NULL &&
                                       comm->magic == TACL__COMM_ALIVE)) {
        /* Still initialising, or the initialisation failed: that is the
         * answer, not an error of this call. */
        if (error_p == NULL)
            return tacl__error(TACL_ERR_INVALID_ARG, INIT,
                               "error_p is NULL");
        *error_p = status;
        return TACL_OK;
    }
    if (status == TACL_OK)
        status = enter_for(comm, error_p, "error_p");
    if (status != TACL_OK)
        return status;
    tacl__ctx_progress(comm->x.ctx);
    *error_p = comm->x.ctx->fatal != TACL_OK ? comm->x.ctx->fatal
                                           : comm->async_error;
    tacl__comm_leave(comm);
    return TACL_OK;
}

#define COMM_QUERY(fn, field)                                                \
    TACL_EXPORT tacl_status_t fn(tacl_comm_t comm, int *value_p)             \
    {                                                                        \
        tacl_status_t status = tacl__comm_check(comm);                       \
        if (status != TACL_OK)                                               \
            return status;                                                   \
        if (value_p == NULL)                                                 \
            return tacl__comm_fail(comm, tacl__error(TACL_ERR_INVALID_ARG,   \
                                   INIT, "output pointer is NULL"));         \
        *value_p = (field);                                                  \
        return TACL_OK;                                                      \
    }

COMM_QUERY(tacl_comm_rank, comm->rank)
COMM_QUERY(tacl_comm_size, comm->size)
COMM_QUERY(tacl_comm_node, comm->view.node)
COMM_QUERY(tacl_comm_n_nodes, comm->view.n_nodes)
COMM_QUERY(tacl_comm_local_rank, comm->view.local_rank)
COMM_QUERY(tacl_comm_local_size, comm->view.local_size)

/* Add b's counts into a (two communicators of one context: the same
 * transports in the same order). */
static void counters_add(tacl_counters_t *a, const tacl_counters_t *b)
{
    for (int t = 0; t < a->n_transports; t++) {
        a->transports[t].bytes += b->transports[t].bytes;
        a->transports[t].messages += b->transports[t].messages;
    }
    for (int c = 0; c < TACL_NUM_LINK_CLASSES; c++) {
        a->links[c].bytes += b->links[c].bytes;
        a->links[c].messages += b->links[c].messages;
    }
}

static void counters_zero(tacl_counters_t *a)
{
    for (int t = 0; t < a->n_transports; t++)
        a->transports[t].bytes = a->transports[t].messages = 0;
    for (int c = 0; c < TACL_NUM_LINK_CLASSES; c++)
        a->links[c].bytes = a->links[c].messages = 0;
}

/* Communicators a feature sends comm's traffic on (the host-composed
 * worker's, deferred.c) count as comm. */
TACL_EXPORT tacl_status_t tacl_comm_get_counters(tacl_comm_t comm,
                                                 tacl_counters_t *counters_p)
{
    tacl_status_t status = tacl__comm_check(comm);

    if (status == TACL_OK)
        status = enter_for(comm, counters_p, "counters_p");
    if (status != TACL_OK)
        return status;
    pthread_mutex_lock(&comm->x.ctx->lock);
    *counters_p = comm->x.counters;
    for (int i = 0; i < TACL__EXT_COUNT; i++)
        if (comm->ext[i] != NULL && comm->ext[i]->traffic != NULL)
            counters_add(counters_p, &comm->ext[i]->traffic->x.counters);
    pthread_mutex_unlock(&comm->x.ctx->lock);
    tacl__comm_leave(comm);
    return TACL_OK;
}

TACL_EXPORT tacl_status_t tacl_comm_reset_counters(tacl_comm_t comm)
{
    tacl_status_t status = tacl__comm_enter(comm);

    if (status != TACL_OK)
        return status;
    pthread_mutex_lock(&comm->x.ctx->lock);
    counters_zero(&comm->x.counters);
    for (int i = 0; i < TACL__EXT_COUNT; i++)
        if (comm->ext[i] != NULL && comm->ext[i]->traffic != NULL)
            counters_zero(&comm->ext[i]->traffic->x.counters);
    pthread_mutex_unlock(&comm->x.ctx->lock);
    tacl__comm_leave(comm);
    return TACL_OK;
}

TACL_EXPORT void tacl_config_print(void *file)
{
    tacl__config_print(file != NULL ? (FILE *)file : stdout);
}

