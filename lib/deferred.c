/*
 * The non-blocking forms of host-composed operations: the sparse
 * all-reduce (the thesis' Zen, chapter 3, and the schemes it is compared
 * with) and the compressed collectives.  Each runs as blocking
 * collectives with host work between them, the sizes of a phase known
 * only from the one before, so it can be neither one schedule nor a
 * group; its "_nb" form runs the blocking form in a worker thread.
 *
 * The ranks must run these operations, and the collectives inside them,
 * in the same order.  The worker therefore never posts on the caller's
 * communicator, where the caller's own operations take sequence numbers
 * concurrently (an interleaving that would differ between ranks): the
 * first _nb call on a communicator splits a private shadow from it, in
 * the caller's thread at issue time (so every rank splits at the same
 * point of its call order), and starts one worker.  Later calls queue
 * in the order they were issued; the worker runs them one at a time on
 * the shadow.  Destroying or aborting the communicator stops the worker:
 * operations still queued fail, the one running ends (at once after an
 * abort, which fails the shared context; else within the timeout) and
 * the shadow is destroyed with it.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "comm.h"
#include "deferred.h"
#include "log.h"

typedef struct deferred_item {
    struct deferred_item *next;
    tacl__deferred_fn_t fn;
    void *arg;                   /* the operation's copy; freed here */
    tacl_request_t req;
} deferred_item_t;

typedef struct {
    tacl__comm_ext_t ext;        /* comm->ext[TACL__EXT_DEFERRED] */
    tacl_comm_t shadow;          /* the worker's private communicator */
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    deferred_item_t *head;       /* issued, not started, oldest first */
    deferred_item_t **tail;
    int stopping;                /* the communicator is going */
} deferred_t;

/* End an operation with status and the thread's last error. */
static void item_end(deferred_item_t *it, tacl_status_t status)
{
    free(it->arg);
    tacl__request_finish(it->req, status, tacl__last_error());
    free(it);
}

/* The next operation, or NULL once stopping. */
static deferred_item_t *next_item(deferred_t *d)
{
    deferred_item_t *it;

    pthread_mutex_lock(&d->lock);
    while (d->head == NULL && !d->stopping)
        pthread_cond_wait(&d->wake, &d->lock);
    it = d->stopping ? NULL : d->head;
    if (it != NULL) {
        d->head = it->next;
        if (d->head == NULL)
            d->tail = &d->head;
    }
    pthread_mutex_unlock(&d->lock);
    return it;
}

static void *worker_main(void *arg)
{
    deferred_t *d = arg;
    deferred_item_t *it;

    while ((it = next_item(d)) != NULL)
        item_end(it, it->fn(it->arg, d->shadow));
    return NULL;
}

/* Stop and join the worker, fail what is queued, end the shadow. */
static void deferred_free(tacl__comm_ext_t *ext)
{
    deferred_t *d = (deferred_t *)ext;
    deferred_item_t *it;

    pthread_mutex_lock(&d->lock);
    d->stopping = 1;
    pthread_cond_signal(&d->wake);
    pthread_mutex_unlock(&d->lock);
    pthread_join(d->thread, NULL);
    while ((it = d->head) != NULL) {
        d->head = it->next;
        tacl__error(TACL_ERR_INVALID_USAGE, COLL,
                    "the communicator was destroyed or aborted before "
                    "this host-composed operation ran");
        item_end(it, TACL_ERR_INVALID_USAGE);
    }
    if (tacl_comm_destroy(d->shadow) != TACL_OK)
        tacl_comm_abort(d->shadow);
    pthread_cond_destroy(&d->wake);
    pthread_mutex_destroy(&d->lock);
    free(d);
}

/* The private communicator: same ranks, same timeout and checking. */
static tacl_status_t shadow_split(tacl_comm_t comm, tacl_comm_t *shadow_p)
{
    tacl_config_t cfg = TACL_CONFIG_INIT;

    cfg.timeout = comm->x.timeout_s;
    cfg.check = comm->check;
    cfg.progress_thread = comm->progress_thread;
    cfg.name = "host-composed";
    return tacl_comm_split_config(comm, 0, comm->rank, &cfg, shadow_p);
}

/* comm's worker, made (collectively) at its first use. */
static tacl_status_t deferred_of(tacl_comm_t comm, deferred_t **d_p)
{
    deferred_t *d = tacl__comm_ext(comm, TACL__EXT_DEFERRED);
    tacl_status_t st;

    if (d != NULL) {
        *d_p = d;
        return TACL_OK;
    }
    d = calloc(1, sizeof(*d));
    if (d == NULL)
        return tacl__error(TACL_ERR_NO_MEMORY, COLL,
                           "out of memory for the host-composed worker");
    st = shadow_split(comm, &d->shadow);
    if (st != TACL_OK)
        goto err_free;
    pthread_mutex_init(&d->lock, NULL);
    pthread_cond_init(&d->wake, NULL);
    d->tail = &d->head;
    if (pthread_create(&d->thread, NULL, worker_main, d) != 0) {
        st = tacl__error(TACL_ERR_SYSTEM, COLL,
                         "cannot start the host-composed worker: %m");
        goto err_destroy_shadow;
    }
    d->ext.free = deferred_free;
    d->ext.traffic = d->shadow; /* its operations are comm's */
    comm->ext[TACL__EXT_DEFERRED] = &d->ext;
    *d_p = d;
    return TACL_OK;

err_destroy_shadow:
    pthread_cond_destroy(&d->wake);
    pthread_mutex_destroy(&d->lock);
    tacl_comm_destroy(d->shadow);
err_free:
    free(d);
    return st;
}

tacl_status_t tacl__deferred_issue(tacl_comm_t comm, tacl__deferred_fn_t fn,
                                   void *arg, tacl_request_t *req_p)
{
    deferred_item_t *it = malloc(sizeof(*it));
    deferred_t *d = NULL;
    tacl_status_t st;

    if (it == NULL) {
        st = tacl__error(TACL_ERR_NO_MEMORY, COLL, "out of memory");
        goto err_free_arg;
    }
    st = deferred_of(comm, &d);
    if (st != TACL_OK)
        goto err_free_item;
    st = tacl__request_deferred(comm->x.timeout_s, &it->req);
    if (st != TACL_OK)
        goto err_free_item;
    it->next = NULL;
    it->fn = fn;
    it->arg = arg;
    *req_p = it->req;
    pthread_mutex_lock(&d->lock);
    *d->tail = it;
    d->tail = &it->next;
    pthread_cond_signal(&d->wake);
    pthread_mutex_unlock(&d->lock);
    return TACL_OK;

err_free_item:
    free(it);
err_free_arg:
    free(arg);
    return st;
}
