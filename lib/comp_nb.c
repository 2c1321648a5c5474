/*
 * The compressed collectives' non-blocking forms (tacl_comp_*_nb): the
 * arguments pass the blocking form's checks in the caller's thread, then
 * the blocking form runs in the communicator's host-composed worker
 * (deferred.c, which says why it owns a private communicator).  The
 * codec and the error-feedback buffer are the caller's and are used
 * until the request completes; the params are copied at issue.
 */
#include <stdlib.h>

#include "comm.h"
#include "compcoll.h"
#include "deferred.h"
#include "log.h"

/* A call's copy of its arguments, for the worker. */
typedef struct {
    tacl_coll_t coll;
    const float *send;
    float *recv;
    size_t count;
    const tacl_codec_t *codec;
    const tacl_codec_params_t *params; /* &params_copy or NULL */
    float *err;
    tacl_comp_scheme_t scheme;
    tacl_comp_hops_t hops;
    tacl_codec_params_t params_copy;
} comp_nb_t;

static tacl_status_t comp_nb_run(void *arg, tacl_comm_t shadow)
{
    const comp_nb_t *a = arg;

    switch (a->coll) {
    case TACL_COLL_ALLGATHER:
        return tacl_comp_allgather_hops(a->send, a->recv, a->count, a->codec,
                                        a->params, a->err, a->hops, shadow);
    case TACL_COLL_REDUCE_SCATTER:
        return tacl_comp_reduce_scatter_hops(a->send, a->recv, a->count,
                                             a->codec, a->params, a->err,
                                             a->scheme, a->hops, shadow);
    default:
        return tacl_comp_allreduce_hops(a->send, a->recv, a->count,
                                        a->codec, a->params, a->err,
                                        a->scheme, a->hops, shadow);
    }
}

static tacl_status_t comp_nb_issue(const comp_nb_t *call, tacl_comm_t comm,
                                   tacl_request_t *req_p)
{
    comp_nb_t *a;
    tacl_status_t st;

    if (req_p == NULL)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL, "req_p is NULL");
    if (call->hops != TACL_COMP_HOPS_ALL)
        st = tacl__comp_check_hops(call->coll, call->send, call->recv,
                                   call->count, call->codec, call->params,
                                   call->scheme, call->hops);
    else
        st = tacl__comp_check_call(call->coll, call->send, call->recv,
                                   call->count, call->codec, call->params,
                                   call->err, call->scheme, comm);
    if (st != TACL_OK)
        return st;
    a = malloc(sizeof(*a));
    if (a == NULL)
        return tacl__error(TACL_ERR_NO_MEMORY, COLL, "out of memory");
    *a = *call;
    /* The params are a few numbers a caller keeps on its stack (the
     * torch binding does): the worker reads its own copy, as the
     * sanitizers' stack-buffer-underflow in hash_params showed. */
    if (call->params != NULL) {
        a->params_copy = *call->params;
        a->params = &a->params_copy;
    }
    return tacl__deferred_issue(comm, comp_nb_run, a, req_p);
}

/* An entry point's body, holding comm, under the last-error rule. */
static tacl_status_t comp_nb_entry(const comp_nb_t *call, tacl_comm_t comm,
                                   tacl_request_t *req_p)
{
    tacl_status_t st;

    tacl__last_error_clear();
    st = tacl__comm_enter(comm);
    if (st != TACL_OK)
        return st;
    st = comp_nb_issue(call, comm, req_p);
    tacl__comm_leave(comm);
    return st == TACL_OK ? TACL_OK : tacl__comm_fail(comm, st);
}

TACL_EXPORT tacl_status_t tacl_comp_allreduce_hops_nb(
    const float *sendbuf, float *recvbuf, size_t count,
    const tacl_codec_t *codec, const tacl_codec_params_t *params, float *err,
    tacl_comp_scheme_t scheme, tacl_comp_hops_t hops, tacl_comm_t comm,
    tacl_request_t *req_p)
{
    comp_nb_t c = {.coll = TACL_COLL_ALLREDUCE, .send = sendbuf,
                   .recv = recvbuf, .count = count, .codec = codec,
                   .params = params, .err = err, .scheme = scheme,
                   .hops = hops};

    return comp_nb_entry(&c, comm, req_p);
}

TACL_EXPORT tacl_status_t tacl_comp_allreduce_nb(
    const float *sendbuf, float *recvbuf, size_t count,
    const tacl_codec_t *codec, const tacl_codec_params_t *params, float *err,
    tacl_comp_scheme_t scheme, tacl_comm_t comm, tacl_request_t *req_p)
{
    return tacl_comp_allreduce_hops_nb(sendbuf, recvbuf, count, codec,
                                       params, err, scheme,
                                       TACL_COMP_HOPS_ALL, comm, req_p);
}

TACL_EXPORT tacl_status_t tacl_comp_reduce_scatter_hops_nb(
    const float *sendbuf, float *recvbuf, size_t recvcount,
    const tacl_codec_t *codec, const tacl_codec_params_t *params, float *err,
    tacl_comp_scheme_t scheme, tacl_comp_hops_t hops, tacl_comm_t comm,
    tacl_request_t *req_p)
{
    comp_nb_t c = {.coll = TACL_COLL_REDUCE_SCATTER, .send = sendbuf,
                   .recv = recvbuf, .count = recvcount, .codec = codec,
                   .params = params, .err = err, .scheme = scheme,
                   .hops = hops};

    return comp_nb_entry(&c, comm, req_p);
}

TACL_EXPORT tacl_status_t tacl_comp_reduce_scatter_nb(
    const float *sendbuf, float *recvbuf, size_t recvcount,
    const tacl_codec_t *codec, const tacl_codec_params_t *params, float *err,
    tacl_comp_scheme_t scheme, tacl_comm_t comm, tacl_request_t *req_p)
{
    return tacl_comp_reduce_scatter_hops_nb(sendbuf, recvbuf, recvcount,
                                            codec, params, err, scheme,
                                            TACL_COMP_HOPS_ALL, comm, req_p);
}

TACL_EXPORT tacl_status_t tacl_comp_allgather_hops_nb(
    const float *sendbuf, float *recvbuf, size_t sendcount,
    const tacl_codec_t *codec, const tacl_codec_params_t *params, float *err,
    tacl_comp_hops_t hops, tacl_comm_t comm, tacl_request_t *req_p)
{
    comp_nb_t c = {.coll = TACL_COLL_ALLGATHER, .send = sendbuf,
                   .recv = recvbuf, .count = sendcount, .codec = codec,
                   .params = params, .err = err, .scheme = TACL_COMP_GATHER,
                   .hops = hops};

    return comp_nb_entry(&c, comm, req_p);
}

TACL_EXPORT tacl_status_t tacl_comp_allgather_nb(
    const float *sendbuf, float *recvbuf, size_t sendcount,
    const tacl_codec_t *codec, const tacl_codec_params_t *params, float *err,
    tacl_comm_t comm, tacl_request_t *req_p)
{
    return tacl_comp_allgather_hops_nb(sendbuf, recvbuf, sendcount, codec,
                                       params, err, TACL_COMP_HOPS_ALL, comm,
                                       req_p);
}
