/*
 * Requests of the "_nb" calls and of tacl_group_end_nb().  Testing a
 * request drives progress once; waiting drives it until completion or the
 * timeout.  Freeing a pending request is refused, since its buffers are
 * still in use.
 */
#include <stdlib.h>

#include "common.h"
#include "comm.h"
#include "log.h"

tacl_status_t tacl__request_create(tacl__exec_t **execs, int nexec,
                                   tacl_request_t *req_p)
{
    tacl_request_t req = calloc(1, sizeof(*req));

    if (req == NULL)
        return tacl__error(TACL_ERR_NO_MEMORY, COLL, "out of memory");
    req->execs = malloc(((size_t)nexec + 1) * sizeof(*execs));
    if (req->execs == NULL) {
        free(req);
        return tacl__error(TACL_ERR_NO_MEMORY, COLL, "out of memory");
    }
    for (int i = 0; i < nexec; i++)
        req->execs[i] = execs[i];
    req->nexec = nexec;
    req->status = TACL_IN_PROGRESS;
    *req_p = req;
    return TACL_OK;
}

static int request_poll(tacl_request_t req)
{
    tacl_status_t first = TACL_OK, s;

    for (int i = 0; i < req->nexec; i++) {
        if (!tacl__exec_done(req->execs[i], &s))
            return 0;
        if (first == TACL_OK)
            first = s;
    }
    req->done = 1;
    req->status = first;
    return 1;
}

TACL_EXPORT tacl_status_t tacl_request_test(tacl_request_t req, int *done_p)
{
    tacl__last_error_clear();
    if (req == NULL || done_p == NULL)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL, "%s is NULL",
                           req == NULL ? "req" : "done_p");
    if (!req->done) {
        for (int i = 0; i < req->nexec; i++) {
            tacl_status_t s;
            if (!tacl__exec_done(req->execs[i], &s))
                tacl__exec_progress(req->execs[i]);
        }
        request_poll(req);
    }
    *done_p = req->done;
    return req->done ? req->status : TACL_OK;
}

TACL_EXPORT tacl_status_t tacl_request_wait(tacl_request_t req)
{
    tacl_status_t status;

    tacl__last_error_clear();
    if (req == NULL)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL, "req is NULL");
    if (req->done)
        return req->status;
    status = tacl__exec_wait(req->execs, req->nexec);
    if (request_poll(req))
        status = req->status;
    if (req->nexec > 0)
        tacl__comm_fail(tacl__comm_of(tacl__exec_xcomm(req->execs[0])), status);
    return status;
}

TACL_EXPORT tacl_status_t tacl_request_free(tacl_request_t req)
{
    tacl__last_error_clear();
    if (req == NULL)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL, "req is NULL");
    if (!req->done && !request_poll(req))
        return tacl__comm_fail(tacl__comm_of(tacl__exec_xcomm(req->execs[0])),
                               tacl__error(TACL_ERR_INVALID_USAGE, COLL,
                               "the request is still in progress; wait for "
                               "it before freeing it"));
    for (int i = 0; i < req->nexec; i++)
        tacl__exec_free(req->execs[i]);
    free(req->execs);
    free(req);
    return TACL_OK;
}
