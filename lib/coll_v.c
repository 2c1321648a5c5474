/*
 * The variable-count collectives' entry points (tacl_alltoallv,
 * tacl_allgatherv, as MPI's): the caller's count and displacement
 * arrays are copied into one table (tacl__vcounts_t) that travels in
 * the operation's arguments; everything else is coll.c's, which
 * validates the table with the rest of the call.  A call that runs now
 * has built its schedule before it returns, and a group's record and
 * the plan cache keep copies of their own, so the table made here is
 * freed on the way out and the caller may free its arrays at once.
 */
#include <stdlib.h>

#include "common.h"
#include "comm.h"
#include "log.h"

/* An array the call reads: NULL is refused on a communicator of ranks. */
static tacl_status_t need(tacl_comm_t comm, const char *call,
                          const void *array, const char *what)
{
    if (array != NULL || comm->size == 0)
        return TACL_OK;
    return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                       "%s: %s is NULL; pass one entry per rank (%d)", call,
                       what, comm->size);
}

/*
 * Post a variable-count call with its arrays (sendcounts and sdispls
 * NULL for an all-gather-v, whose every send is sendcount elements).
 */
static tacl_status_t post_v(tacl_comm_t comm, tacl__coll_args_t *a,
                            const size_t *sendcounts, const size_t *sdispls,
                            size_t sendcount, const size_t *recvcounts,
                            const size_t *rdispls, tacl_stream_t stream,
                            int blocking, tacl_request_t *req_p)
{
    const char *name = tacl_coll_name(a->type);
    int gatherv = a->type == TACL_COLL_ALLGATHERV;
    tacl__vcounts_t *v;
    tacl_status_t status;
    uint64_t total = 0;

    tacl__last_error_clear();
    status = tacl__comm_check(comm);
    if (status != TACL_OK)
        return status;
    if (!gatherv)
        status = need(comm, name, sendcounts, "sendcounts");
    if (status == TACL_OK && !gatherv)
        status = need(comm, name, sdispls, "sdispls");
    if (status == TACL_OK)
        status = need(comm, name, recvcounts, "recvcounts");
    if (status == TACL_OK)
        status = need(comm, name, rdispls, gatherv ? "displs" : "rdispls");
    if (status != TACL_OK)
        return tacl__comm_fail(comm, status);
    v = tacl__vcounts_new(comm->size, sendcounts, sdispls, sendcount,
                          recvcounts, rdispls);
    if (v == NULL)
        return tacl__comm_fail(comm, tacl__error(TACL_ERR_NO_MEMORY, COLL,
                               "%s: out of memory copying the counts of "
                               "%d ranks", name, comm->size));
    /* What every rank shares of the call (op.h): an all-gather-v's mean
     * block; a sum past 2^64 is refused by validation anyway. */
    for (int j = 0; gatherv && j < comm->size; j++)
        total += v->recv[j];
    a->count = gatherv ? (size_t)(total / (uint64_t)comm->size) : 0;
    a->v = v;
    status = tacl__coll_post(comm, a, stream, blocking, req_p);
    tacl__vcounts_free(v);
    return status;
}

TACL_EXPORT tacl_status_t tacl_alltoallv_nb(
    const void *sendbuf, const size_t *sendcounts, const size_t *sdispls,
    void *recvbuf, const size_t *recvcounts, const size_t *rdispls,
    tacl_dtype_t dtype, tacl_comm_t comm, tacl_stream_t stream,
    tacl_request_t *req_p)
{
    tacl__coll_args_t a = TACL__ARGS_ALLTOALLV;
    return post_v(comm, &a, sendcounts, sdispls, 0, recvcounts, rdispls,
                  stream, 0, req_p);
}

TACL_EXPORT tacl_status_t tacl_alltoallv(
    const void *sendbuf, const size_t *sendcounts, const size_t *sdispls,
    void *recvbuf, const size_t *recvcounts, const size_t *rdispls,
    tacl_dtype_t dtype, tacl_comm_t comm, tacl_stream_t stream)
{
    tacl__coll_args_t a = TACL__ARGS_ALLTOALLV;
    return post_v(comm, &a, sendcounts, sdispls, 0, recvcounts, rdispls,
                  stream, 1, NULL);
}

TACL_EXPORT tacl_status_t tacl_allgatherv_nb(
    const void *sendbuf, size_t sendcount, void *recvbuf,
    const size_t *recvcounts, const size_t *displs, tacl_dtype_t dtype,
    tacl_comm_t comm, tacl_stream_t stream, tacl_request_t *req_p)
{
    tacl__coll_args_t a = TACL__ARGS_ALLGATHERV;
    return post_v(comm, &a, NULL, NULL, sendcount, recvcounts, displs,
                  stream, 0, req_p);
}

TACL_EXPORT tacl_status_t tacl_allgatherv(
    const void *sendbuf, size_t sendcount, void *recvbuf,
    const size_t *recvcounts, const size_t *displs, tacl_dtype_t dtype,
    tacl_comm_t comm, tacl_stream_t stream)
{
    tacl__coll_args_t a = TACL__ARGS_ALLGATHERV;
    return post_v(comm, &a, NULL, NULL, sendcount, recvcounts, displs,
                  stream, 1, NULL);
}
