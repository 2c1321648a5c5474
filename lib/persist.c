/*
 * Persistent collectives (tacl.h): tacl_*_init validates an operation
 * once, builds its schedule (through the plan cache) and prepares one
 * execution of it, scratch included, held by a persistent request.  Each
 * tacl_start takes the operation's sequence number, stamps it into the
 * execution's message tags and runs the execution again from its first
 * step: no validation, no tuner, no copy of the schedule, no allocation.
 * The request completes as any other (request.c), once per start.
 */
#include <stdlib.h>

#include "common.h"
#include "comm.h"
#include "log.h"

#define SEQ_HALF TACL__SEQ_HALF

/* tacl_*_init on a held communicator. */
static tacl_status_t init_held(tacl_comm_t comm, tacl__coll_args_t *a,
                               tacl_stream_t stream, tacl_request_t *req_p)
{
    const char *name = tacl_coll_name(a->type);
    tacl__op_t op = {.comm = comm};
    tacl__sched_t sched;
    tacl__exec_t *exec;
    tacl_status_t status;

    if (req_p == NULL)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "persistent %s: req_p is NULL", name);
    *req_p = NULL;
    if (tacl__group_active())
        return tacl__error(TACL_ERR_INVALID_USAGE, COLL,
                           "persistent %s: made inside a group; make it "
                           "outside and start it with tacl_start", name);
    if (stream != NULL)
        return tacl__error(TACL_ERR_UNSUPPORTED, COLL,
                           "persistent %s: a stream was given; persistent "
                           "operations run on host memory with a NULL "
                           "stream (use the _nb call on a stream)", name);
    status = tacl__coll_check(comm, a, NULL);
    if (status != TACL_OK)
        return status;
    if (a->memtype != TACL_MEM_HOST)
        return tacl__error(TACL_ERR_UNSUPPORTED, COLL,
                           "persistent %s: the buffers are device memory; "
                           "persistent operations take host memory (use "
                           "the _nb call on a stream)", name);
    tacl__coll_mark(a);
    a->seq = 0; /* each start stamps its own */
    op.args = *a;
    pthread_mutex_lock(&comm->x.ctx->lock);
    status = tacl__ops_build(comm, &op, 1, &sched);
    if (status == TACL_OK) {
        status = tacl__exec_prepare(&comm->x, &sched, &exec);
        tacl__sched_fini(&sched);
    }
    pthread_mutex_unlock(&comm->x.ctx->lock);
    if (status != TACL_OK)
        return status;
    status = tacl__request_persistent(comm, a, exec, req_p);
    if (status != TACL_OK)
        tacl__exec_free(exec);
    return status;
}

static tacl_status_t init(tacl_comm_t comm, tacl__coll_args_t *a,
                          tacl_stream_t stream, tacl_request_t *req_p)
{
    TACL__COMM_HELD(comm, tacl__comm_fail(comm,
                                          init_held(comm, a, stream,
                                                    req_p)));
}

/* tacl_start of a persistent request on its held communicator. */
static tacl_status_t start_held(tacl_request_t req)
{
    tacl_comm_t comm = req->comm;
    tacl__ctx_t *ctx = comm->x.ctx;
    tacl__op_t op = {.comm = comm, .args = req->args};
    tacl_status_t status;
    uint64_t seq;

    pthread_mutex_lock(&ctx->lock);
    if (ctx->fatal != TACL_OK) {
        status = tacl__error(ctx->fatal, COLL, "tacl_start: the "
                             "communicator failed earlier (%s); destroy or "
                             "abort it", ctx->fatal_msg);
        goto out;
    }
    if (!tacl__request_done(req)) {
        status = tacl__error(TACL_ERR_INVALID_USAGE, COLL,
                             "tacl_start: the persistent %s is still "
                             "active; wait for it (or test it until done) "
                             "before starting it again",
                             tacl_coll_name(req->args.type));
        goto out;
    }
    /* The same sequence as post() takes for the call (coll.c). */
    if (comm->check) {
        op.checked = 1;
        op.check_seq = comm->seq;
        comm->seq += TACL__CHECK_SEQS;
    }
    seq = comm->seq++ % SEQ_HALF;
    op.args.seq = seq;
    if (op.checked) {
        uint64_t seq_next = comm->seq;

        pthread_mutex_unlock(&ctx->lock);
        status = tacl__check_call(comm, &op, 1, op.check_seq, seq_next);
        if (status != TACL_OK)
            return status;
        pthread_mutex_lock(&ctx->lock);
    }
    tacl__flight_note(comm, &op, 1);
    status = tacl__request_restart(req, seq);
out:
    pthread_mutex_unlock(&ctx->lock);
    return status;
}

/* Checks every entry of tacl_start and tacl_startall share. */
static tacl_status_t check_startable(tacl_request_t req, const char *what)
{
    if (req == NULL)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL, "%s is NULL", what);
    if (!req->persistent)
        return tacl__comm_fail(req->nexec > 0
                                   ? tacl__comm_of(tacl__exec_xcomm(
                                         req->execs[0]))
                                   : NULL,
                               tacl__error(TACL_ERR_INVALID_USAGE, COLL,
                                           "%s is not a persistent request "
                                           "(from a tacl_*_init call)",
                                           what));
    return TACL_OK;
}

static tacl_status_t start(tacl_request_t req)
{
    TACL__COMM_HELD(req->comm, tacl__comm_fail(req->comm, start_held(req)));
}

TACL_EXPORT tacl_status_t tacl_start(tacl_request_t req)
{
    tacl_status_t status;

    tacl__last_error_clear();
    status = check_startable(req, "req");
    return status != TACL_OK ? status : start(req);
}

TACL_EXPORT tacl_status_t tacl_startall(int n, tacl_request_t *reqs)
{
    tacl__last_error_clear();
    if (n < 0 || (n > 0 && reqs == NULL))
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           n < 0 ? "tacl_startall: n is %d" :
                           "tacl_startall: reqs is NULL with n %d", n);
    for (int i = 0; i < n; i++) {
        tacl_status_t status = check_startable(reqs[i], "a request");

        if (status != TACL_OK)
            return status;
        for (int j = 0; j < i; j++)
            if (reqs[j] == reqs[i])
                return tacl__comm_fail(reqs[i]->comm,
                                       tacl__error(TACL_ERR_INVALID_USAGE,
                                       COLL, "tacl_startall: request %d is "
                                       "request %d again", i, j));
    }
    for (int i = 0; i < n; i++) {
        tacl_status_t status = start(reqs[i]);

        if (status != TACL_OK)
            return status;
    }
    return TACL_OK;
}

TACL_EXPORT tacl_status_t tacl_allreduce_init(const void *sendbuf,
                                              void *recvbuf, size_t count,
                                              tacl_dtype_t dtype,
                                              tacl_op_t op, tacl_comm_t comm,
                                              tacl_stream_t stream,
                                              tacl_request_t *req_p)
{
    tacl__coll_args_t a = TACL__ARGS_ALLREDUCE;
    return init(comm, &a, stream, req_p);
}

TACL_EXPORT tacl_status_t tacl_allgather_init(const void *sendbuf,
                                              void *recvbuf,
                                              size_t sendcount,
                                              tacl_dtype_t dtype,
                                              tacl_comm_t comm,
                                              tacl_stream_t stream,
                                              tacl_request_t *req_p)
{
    tacl__coll_args_t a = TACL__ARGS_ALLGATHER;
    return init(comm, &a, stream, req_p);
}

TACL_EXPORT tacl_status_t tacl_reduce_scatter_init(
    const void *sendbuf, void *recvbuf, size_t recvcount, tacl_dtype_t dtype,
    tacl_op_t op, tacl_comm_t comm, tacl_stream_t stream,
    tacl_request_t *req_p)
{
    tacl__coll_args_t a = TACL__ARGS_REDUCE_SCATTER;
    return init(comm, &a, stream, req_p);
}

TACL_EXPORT tacl_status_t tacl_broadcast_init(const void *sendbuf,
                                              void *recvbuf, size_t count,
                                              tacl_dtype_t dtype, int root,
                                              tacl_comm_t comm,
                                              tacl_stream_t stream,
                                              tacl_request_t *req_p)
{
    tacl__coll_args_t a = TACL__ARGS_BROADCAST;
    return init(comm, &a, stream, req_p);
}

TACL_EXPORT tacl_status_t tacl_reduce_init(const void *sendbuf,
                                           void *recvbuf, size_t count,
                                           tacl_dtype_t dtype, tacl_op_t op,
                                           int root, tacl_comm_t comm,
                                           tacl_stream_t stream,
                                           tacl_request_t *req_p)
{
    tacl__coll_args_t a = TACL__ARGS_REDUCE;
    return init(comm, &a, stream, req_p);
}

TACL_EXPORT tacl_status_t tacl_alltoall_init(const void *sendbuf,
                                             void *recvbuf, size_t count,
                                             tacl_dtype_t dtype,
                                             tacl_comm_t comm,
                                             tacl_stream_t stream,
                                             tacl_request_t *req_p)
{
    tacl__coll_args_t a = TACL__ARGS_ALLTOALL;
    return init(comm, &a, stream, req_p);
}

TACL_EXPORT tacl_status_t tacl_barrier_init(tacl_comm_t comm,
                                            tacl_stream_t stream,
                                            tacl_request_t *req_p)
{
    tacl__coll_args_t a = TACL__ARGS_BARRIER;
    return init(comm, &a, stream, req_p);
}
