/*
 * Flushing a committed version to the long-term tier (tacl.h,
 * tacl_snapshot_flush and _flush_nb; the file format is snap_file.c's).
 *
 * The non-blocking form pins the own store's slot holding the version and
 * writes it out in a thread of its own, whose last act completes the
 * caller's request; the caller trains on meanwhile.  The next save goes
 * to the store's other slot, so it does not wait; only what would write
 * the pinned slot waits for the flush to end (tacl__snap_flush_wait): the
 * save after that if the flush still runs, a restore, another flush.
 * One flush at a time: a second waits for the first.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "log.h"
#include "snapshot.h"

/* A flush's arguments, for its thread (which frees them). */
typedef struct {
    struct tacl_snapshot *snap;
    int slot;
    tacl_request_t req;
    char path[];
} flush_job_t;

static void *flush_main(void *arg)
{
    flush_job_t *job = arg;
    tacl_status_t status =
        tacl__snap_file_write(job->snap, job->slot, job->path);

    /* Before the request ends, so a caller who saw it end may destroy. */
    atomic_store(&job->snap->flush_ended, 1);
    tacl__request_finish(job->req, status,
                         status == TACL_OK ? NULL : tacl__last_error());
    free(job);
    return NULL;
}

TACL_EXPORT tacl_status_t tacl_snapshot_flush(tacl_snapshot_t snap,
                                              uint64_t version,
                                              const char *path)
{
    int slot;
    tacl_status_t status = tacl__snap_file_slot(snap, version, path, &slot);

    if (status != TACL_OK)
        return status;
    tacl__snap_flush_wait(snap, -1);
    return tacl__snap_file_write(snap, slot, path);
}

TACL_EXPORT tacl_status_t tacl_snapshot_flush_nb(tacl_snapshot_t snap,
                                                 uint64_t version,
                                                 const char *path,
                                                 tacl_request_t *req_p)
{
    flush_job_t *job;
    tacl_status_t status;
    int slot, err;

    if (req_p == NULL)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "snapshot flush: req_p is NULL");
    status = tacl__snap_file_slot(snap, version, path, &slot);
    if (status != TACL_OK)
        return status;
    tacl__snap_flush_wait(snap, -1);
    job = malloc(sizeof(*job) + strlen(path) + 1);
    if (job == NULL)
        return tacl__error(TACL_ERR_NO_MEMORY, COLL,
                           "snapshot flush: out of memory");
    /* A wait gives up after the set's timeout, the flush still running
     * (the request stays pending: wait again). */
    status = tacl__request_deferred(snap->comm->x.timeout_s, &job->req);
    if (status != TACL_OK) {
        free(job);
        return status;
    }
    job->snap = snap;
    job->slot = slot;
    strcpy(job->path, path);
    *req_p = job->req;
    atomic_store(&snap->flush_ended, 0);
    err = pthread_create(&snap->flush_thread, NULL, flush_main, job);
    if (err != 0) {
        tacl_request_free(job->req);
        free(job);
        *req_p = NULL;
        return tacl__error(TACL_ERR_SYSTEM, COLL,
                           "snapshot flush: cannot start its thread: %s",
                           strerror(err));
    }
    snap->flush_busy = 1;
    snap->flush_slot = slot;
    return TACL_OK;
}
