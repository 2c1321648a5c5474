/*
 * The monitored barrier (tacl.h, tacl_barrier_monitored): torch's
 * monitored_barrier, whose design is gloo's, on tacl's own point-to-point
 * (tacl__p2p_own, a tag below the users').  Every rank but 0 sends rank 0
 * an empty message and waits for one back; rank 0 waits for each rank's
 * message in rank order until the deadline and answers them all once all
 * have come.  When one has not, rank 0 names it (every late rank with
 * wait_all) and fails the communicator: its receives from the late ranks
 * stay posted and would take their messages of this barrier for the next
 * one's.  The others, waiting for its answer, end with that failure too.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h"
#include "comm.h"
#include "log.h"

static double now_s(void)
{
    return (double)tacl__now_ns() * 1e-9;
}

/* Whether req completed by deadline (polling; 0: still pending). */
static int done_by(tacl_request_t req, double deadline)
{
    int done = 0;

    for (;;) {
        if (tacl_request_test(req, &done) != TACL_OK || done)
            return 1;
        if (now_s() >= deadline)
            return 0;
        struct timespec ts = {0, 50 * 1000};
        nanosleep(&ts, NULL);
    }
}

/* Rank 0's failure: the message, the context failed, the requests back. */
static tacl_status_t root_fails(tacl_comm_t comm, tacl_request_t *req,
                                int n, const char *why)
{
    tacl__ctx_t *ctx = comm->x.ctx;

    /* As tacl_comm_revoke: every rank hears of it at once (a timeout's
     * failure would first ask the ring which rank hangs: rank 0 knows). */
    pthread_mutex_lock(&ctx->lock);
    if (ctx->fatal == TACL_OK) {
        tacl__error(TACL_ERR_TIMEOUT, COLL, "%s", why);
        if (ctx->bs != NULL)
            tacl__bootstrap_revoke(ctx->bs);
        tacl__ctx_set_fatal(ctx, TACL_ERR_REMOTE);
    }
    pthread_mutex_unlock(&ctx->lock);
    for (int r = 1; r < n; r++) {
        if (req[r] != NULL) {
            tacl_request_wait(req[r]);
            tacl_request_free(req[r]);
            req[r] = NULL;
        }
    }
    return tacl__comm_fail(comm, tacl__error(TACL_ERR_TIMEOUT, COLL, "%s",
                                             why));
}

static tacl_status_t root_waits(tacl_comm_t comm, double timeout_s,
                                int wait_all, int *missing, int *nmissing_p)
{
    int n = comm->size, late = 0;
    tacl_request_t *req = calloc((size_t)n, sizeof(*req));
    double deadline = now_s() + timeout_s;
    char why[TACL__ERROR_LEN];
    size_t len;
    tacl_status_t status = TACL_OK;

    if (req == NULL)
        return tacl__comm_fail(comm, tacl__error(TACL_ERR_NO_MEMORY, COLL,
                                                 "out of memory"));
    for (int r = 1; r < n && status == TACL_OK; r++)
        status = tacl__p2p_own(TACL_COLL_RECV, NULL, 0, r, TACL__TAG_MONITOR,
                               NULL, comm, &req[r]);
    len = (size_t)snprintf(why, sizeof(why), "monitored barrier: rank(s)");
    for (int r = 1; r < n && status == TACL_OK; r++) {
        /* Once a rank is late, wait_all only asks the rest once. */
        if (done_by(req[r], late ? 0 : deadline))
            continue;
        if (missing != NULL)
            missing[late] = r;
        late++;
        if (len < sizeof(why))
            len += (size_t)snprintf(why + len, sizeof(why) - len, "%s %d",
                                    late > 1 ? "," : "", r);
        if (!wait_all)
            break;
    }
    if (nmissing_p != NULL)
        *nmissing_p = late;
    if (status != TACL_OK) {
        snprintf(why, sizeof(why), "monitored barrier: rank 0 could not "
                 "post its receives: %s", tacl__last_error());
        status = root_fails(comm, req, n, why);
    } else if (late > 0) {
        if (len < sizeof(why))
            snprintf(why + len, sizeof(why) - len, " did not reach it "
                     "within %.3f s%s", timeout_s,
                     wait_all ? "" : " (the first late rank; wait_all "
                                     "names them all)");
        status = root_fails(comm, req, n, why);
    }
    for (int r = 1; r < n && status == TACL_OK; r++) {
        tacl_request_free(req[r]);
        req[r] = NULL;
        status = tacl__p2p_own(TACL_COLL_SEND, NULL, 0, r, TACL__TAG_MONITOR,
                               NULL, comm, &req[r]);
    }
    for (int r = 1; r < n; r++) {
        if (req[r] != NULL) {
            tacl_status_t st = tacl_request_wait(req[r]);

            if (status == TACL_OK)
                status = st;
            tacl_request_free(req[r]);
        }
    }
    free(req);
    return status;
}

static tacl_status_t member_waits(tacl_comm_t comm)
{
    tacl_request_t req[2] = {NULL, NULL};
    tacl_status_t status, st;

    status = tacl__p2p_own(TACL_COLL_SEND, NULL, 0, 0, TACL__TAG_MONITOR, NULL,
                           comm, &req[0]);
    if (status == TACL_OK)
        status = tacl__p2p_own(TACL_COLL_RECV, NULL, 0, 0, TACL__TAG_MONITOR,
                               NULL, comm, &req[1]);
    for (int i = 0; i < 2; i++) {
        if (req[i] == NULL)
            continue;
        st = tacl_request_wait(req[i]);
        if (status == TACL_OK)
            status = st;
        tacl_request_free(req[i]);
    }
    if (status == TACL_OK)
        return TACL_OK;
    return tacl__comm_fail(comm, tacl__error(status, COLL,
                           "monitored barrier: rank %d reached it, but "
                           "rank 0 did not release it: %s", comm->rank,
                           tacl_comm_last_error(comm)));
}

TACL_EXPORT tacl_status_t tacl_barrier_monitored(tacl_comm_t comm,
                                                 double timeout_s,
                                                 int wait_all, int *missing,
                                                 int *nmissing_p)
{
    tacl_status_t status;

    tacl__last_error_clear();
    if (nmissing_p != NULL)
        *nmissing_p = 0;
    status = tacl__comm_check(comm);
    if (status != TACL_OK)
        return status;
    if (!(timeout_s >= 0))
        return tacl__comm_fail(comm, tacl__error(TACL_ERR_INVALID_ARG, COLL,
                               "monitored barrier: timeout %g s is not 0 "
                               "or more", timeout_s));
    if (tacl__group_active())
        return tacl__comm_fail(comm, tacl__error(TACL_ERR_INVALID_USAGE,
                               COLL, "monitored barrier: not inside a "
                               "group (it waits for ranks one by one)"));
    if (comm->size == 1)
        return TACL_OK;
    return comm->rank == 0
               ? root_waits(comm, timeout_s, wait_all, missing, nmissing_p)
               : member_waits(comm);
}
