/*
 * Coalesced all-gather and reduce-scatter (MiCS section 4): a list of
 * buffers of different sizes in one operation.  Each buffer is recorded as
 * a single call inside a group, so they are compiled into one schedule
 * whose messages all start together; the caller never packs anything.
 * Arguments are checked in full before anything is recorded, so a bad
 * entry leaves no partial operation behind.
 */
#include <stdio.h>

#include "common.h"
#include "comm.h"
#include "log.h"

typedef tacl_status_t (*single_nb_fn)(const void *, void *, size_t,
                                      tacl_dtype_t, tacl_op_t,
                                      tacl_comm_t, tacl_stream_t,
                                      tacl_request_t *);

/* Check every entry before recording any, so a bad one leaves nothing. */
static tacl_status_t check_all(const char *name, tacl_coll_t type,
                               const void *const *sendbufs,
                               void *const *recvbufs, const size_t *counts,
                               int nbufs, tacl_dtype_t dtype, tacl_op_t op,
                               tacl_comm_t comm, tacl_stream_t stream)
{
    for (int i = 0; i < nbufs; i++) {
        tacl__coll_args_t a = {
            .type = type,
            .sendbuf = sendbufs[i],
            .recvbuf = recvbufs[i],
            .count = counts[i],
            .dtype = dtype,
            .op = op,
        };
        tacl_status_t status = tacl__coll_check(comm, &a, stream);
        if (status != TACL_OK) {
            char msg[TACL__ERROR_LEN];
            snprintf(msg, sizeof(msg), "%s", tacl__last_error());
            return tacl__error(status, COLL, "%s: buffer %d: %s", name, i,
                               msg);
        }
    }
    return TACL_OK;
}

static tacl_status_t allgather_one(const void *s, void *r, size_t n,
                                   tacl_dtype_t dt, tacl_op_t op,
                                   tacl_comm_t comm, tacl_stream_t stream,
                                   tacl_request_t *req_p)
{
    (void)op;
    return tacl_allgather_nb(s, r, n, dt, comm, stream, req_p);
}

static tacl_status_t reduce_scatter_one(const void *s, void *r, size_t n,
                                        tacl_dtype_t dt, tacl_op_t op,
                                        tacl_comm_t comm,
                                        tacl_stream_t stream,
                                        tacl_request_t *req_p)
{
    return tacl_reduce_scatter_nb(s, r, n, dt, op, comm, stream, req_p);
}

static tacl_status_t coalesced_held(const char *name, tacl_coll_t type,
                                    single_nb_fn one,
                                    const void *const *sendbufs,
                                    void *const *recvbufs,
                                    const size_t *counts, int nbufs,
                                    tacl_dtype_t dtype, tacl_op_t op,
                                    tacl_comm_t comm, tacl_stream_t stream,
                                    tacl_request_t *req_p)
{
    tacl_status_t status, end_status;
    tacl_request_t unused;

    if (nbufs < 0 || (nbufs > 0 && (sendbufs == NULL || recvbufs == NULL ||
                                    counts == NULL)))
        return tacl__comm_fail(comm, tacl__error(TACL_ERR_INVALID_ARG, COLL,
                               "%s: nbufs %d with a NULL buffer or count "
                               "list", name, nbufs));
    status = check_all(name, type, sendbufs, recvbufs, counts, nbufs, dtype,
                       op, comm, stream);
    if (status != TACL_OK)
        return tacl__comm_fail(comm, status);
    tacl_group_start();
    for (int i = 0; i < nbufs && status == TACL_OK; i++)
        status = one(sendbufs[i], recvbufs[i], counts[i], dtype, op, comm,
                     stream, &unused);
    /* Only running out of memory can stop the loop; what was recorded
     * still runs, and the error is returned. */
    end_status = req_p != NULL ? tacl_group_end_nb(req_p) : tacl_group_end();
    return tacl__comm_fail(comm, status != TACL_OK ? status : end_status);
}

static tacl_status_t coalesced(const char *name, tacl_coll_t type,
                               single_nb_fn one,
                               const void *const *sendbufs,
                               void *const *recvbufs, const size_t *counts,
                               int nbufs, tacl_dtype_t dtype, tacl_op_t op,
                               tacl_comm_t comm, tacl_stream_t stream,
                               tacl_request_t *req_p, int nb)
{
    if (nb && req_p == NULL)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL, "%s: req_p is NULL",
                           name);
    TACL__COMM_HELD(comm, coalesced_held(name, type, one, sendbufs, recvbufs,
                                         counts, nbufs, dtype, op, comm,
                                         stream, req_p));
}

/* The two coalesced operations on their entry points' parameters. */
#define ALLGATHER_COALESCED(req_p, nb)                                       \
    coalesced("allgather_coalesced", TACL_COLL_ALLGATHER, allgather_one,     \
              sendbufs, recvbufs, sendcounts, nbufs, dtype, TACL_SUM, comm,  \
              stream, req_p, nb)
#define REDUCE_SCATTER_COALESCED(req_p, nb)                                  \
    coalesced("reduce_scatter_coalesced", TACL_COLL_REDUCE_SCATTER,          \
              reduce_scatter_one, sendbufs, recvbufs, recvcounts, nbufs,     \
              dtype, op, comm, stream, req_p, nb)

TACL_EXPORT tacl_status_t tacl_allgather_coalesced_nb(
    const void *const *sendbufs, void *const *recvbufs,
    const size_t *sendcounts, int nbufs, tacl_dtype_t dtype,
    tacl_comm_t comm, tacl_stream_t stream, tacl_request_t *req_p)
{
    return ALLGATHER_COALESCED(req_p, 1);
}

TACL_EXPORT tacl_status_t tacl_allgather_coalesced(
    const void *const *sendbufs, void *const *recvbufs,
    const size_t *sendcounts, int nbufs, tacl_dtype_t dtype,
    tacl_comm_t comm, tacl_stream_t stream)
{
    return ALLGATHER_COALESCED(NULL, 0);
}

TACL_EXPORT tacl_status_t tacl_reduce_scatter_coalesced_nb(
    const void *const *sendbufs, void *const *recvbufs,
    const size_t *recvcounts, int nbufs, tacl_dtype_t dtype, tacl_op_t op,
    tacl_comm_t comm, tacl_stream_t stream, tacl_request_t *req_p)
{
    return REDUCE_SCATTER_COALESCED(req_p, 1);
}

TACL_EXPORT tacl_status_t tacl_reduce_scatter_coalesced(
    const void *const *sendbufs, void *const *recvbufs,
    const size_t *recvcounts, int nbufs, tacl_dtype_t dtype, tacl_op_t op,
    tacl_comm_t comm, tacl_stream_t stream)
{
    return REDUCE_SCATTER_COALESCED(NULL, 0);
}
