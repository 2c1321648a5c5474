/*
 * Collective and point-to-point entry points.
 *
 * Every call is validated here, once, with a clear status and message for
 * each bad argument; then it is either recorded in the thread's group or
 * built into a schedule and started.  The blocking form waits for it; the
 * "_nb" form returns a request.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "config.h"
#include "comm.h"
#include "dtype.h"
#include "log.h"
#include "memseg.h"
#include "plan.h"

/* No single buffer may exceed this many bytes (far beyond any machine). */
#define MAX_BUFFER_BYTES (1ull << 56)

#define SEQ_HALF TACL__SEQ_HALF

/* In place as NCCL defines it, or a forbidden partial overlap. */
static tacl_status_t check_aliasing(const tacl__coll_args_t *a, int rank,
                                    uint64_t send, uint64_t recv)
{
    const char *sb = a->sendbuf, *rb = a->recvbuf;
    const char *in_place = NULL;

    if (!tacl__ranges_overlap(sb, send, rb, recv))
        return TACL_OK;
    switch (a->type) {
    case TACL_COLL_ALLGATHER:
        in_place = rb + (uint64_t)rank * send;
        break;
    case TACL_COLL_REDUCE_SCATTER:
        /* In place is recvbuf at this rank's block of sendbuf; any other
         * overlap is an error. */
        if (rb == sb + (uint64_t)rank * recv)
            return TACL_OK;
        in_place = NULL;
        break;
    default:
        in_place = rb;
        break;
    }
    if (sb == in_place)
        return TACL_OK;
    return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                       "%s: sendbuf and recvbuf overlap but not in place "
                       "(see the in-place conventions in tacl.h)",
                       tacl_coll_name(a->type));
}

/* Quantized operations: the type, op and parameters they can serve. */
static tacl_status_t check_quant(const tacl__coll_args_t *a)
{
    const char *name = tacl_coll_name(a->type);

    if (a->dtype != TACL_FLOAT32 && a->dtype != TACL_FLOAT16 &&
        a->dtype != TACL_BFLOAT16)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "quantized %s: dtype %s cannot be quantized "
                           "(float32, float16 or bfloat16)", name,
                           tacl_dtype_name(a->dtype));
    if (a->qbits != 8 && a->qbits != 4)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "quantized %s: %d bits (8 or 4)", name, a->qbits);
    if (a->qblock == 0 || a->qblock > (1u << 24))
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "quantized %s: block of %u values (1..2^24)",
                           name, a->qblock);
    if (a->type == TACL_COLL_REDUCE_SCATTER && a->op != TACL_SUM &&
        a->op != TACL_AVG)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "quantized %s: op %s (sum or avg)", name,
                           tacl_op_name(a->op));
    return TACL_OK;
}

/* One receive region of a variable-count call: where it starts, whose. */
typedef struct {
    size_t at;
    int rank;
} region_t;

static int region_cmp(const void *x, const void *y)
{
    size_t a = ((const region_t *)x)->at, b = ((const region_t *)y)->at;

    return a < b ? -1 : a > b;
}

/* Two receive regions of v that overlap, as *i_p and *j_p; 0 if none.
 * r has room for v->n regions. */
static int recv_overlap(const tacl__vcounts_t *v, region_t *r, int *i_p,
                        int *j_p)
{
    int m = 0;

    for (int j = 0; j < v->n; j++)
        if (v->recv[j] > 0)
            r[m++] = (region_t){v->rdispl[j], j};
    qsort(r, (size_t)m, sizeof(*r), region_cmp);
    for (int k = 1; k < m; k++) {
        int i = r[k - 1].rank, j = r[k].rank;

        /* Sorted by start, a region overlaps its successor first if any;
         * the extent check made every end representable. */
        if (v->rdispl[i] + v->recv[i] > v->rdispl[j]) {
            *i_p = i;
            *j_p = j;
            return 1;
        }
    }
    return 0;
}

/*
 * A variable-count call's table on this rank: what it sends itself it
 * receives, its receive regions are apart, and its buffers exist and
 * do not overlap (it has no in-place form).  send and recv are the
 * bytes its buffers span.
 */
static tacl_status_t check_vcounts(tacl_comm_t comm,
                                   const tacl__coll_args_t *a,
                                   uint64_t send, uint64_t recv)
{
    const char *name = tacl_coll_name(a->type);
    const char *rd = a->type == TACL_COLL_ALLGATHERV ? "displs" : "rdispls";
    const tacl__vcounts_t *v = a->v;
    int me = comm->rank, i, j, overlap;
    region_t *regions;

    if (v == NULL || v->n != comm->size)
        return tacl__error(TACL_ERR_INTERNAL, COLL,
                           "%s: no count table of %d ranks", name,
                           comm->size);
    if (v->send[me] != v->recv[me] && a->type == TACL_COLL_ALLGATHERV)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "%s: sendcount is %zu but recvcounts[%d] (this "
                           "rank's) is %zu; rank j's entry must be rank j's "
                           "sendcount", name, v->send[me], me, v->recv[me]);
    if (v->send[me] != v->recv[me])
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "%s: sendcounts[%d] is %zu but recvcounts[%d] is "
                           "%zu; what a rank sends itself it must receive",
                           name, me, v->send[me], me, v->recv[me]);
    if (send > 0 && a->sendbuf == NULL)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "%s: sendbuf is NULL with %llu bytes to send",
                           name, (unsigned long long)send);
    if (recv > 0 && a->recvbuf == NULL)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "%s: recvbuf is NULL with %llu bytes to receive",
                           name, (unsigned long long)recv);
    if (tacl__ranges_overlap(a->sendbuf, send, a->recvbuf, recv))
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "%s: sendbuf and recvbuf overlap; a "
                           "variable-count call has no in-place form",
                           name);
    regions = malloc((size_t)v->n * sizeof(*regions) + 1);
    if (regions == NULL)
        return tacl__error(TACL_ERR_NO_MEMORY, COLL, "out of memory");
    overlap = recv_overlap(v, regions, &i, &j);
    free(regions);
    if (overlap)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "%s: the receive regions of ranks %d and %d "
                           "overlap (%s %zu and %zu, counts %zu and %zu); "
                           "every element of recvbuf may be written once",
                           name, i, j, rd, v->rdispl[i], v->rdispl[j],
                           v->recv[i], v->recv[j]);
    return TACL_OK;
}

/* Set around the library's own sends and receives (tacl__p2p_own),
 * whose tags lie below the users' (TACL__TAG_MONITOR, _SPARSE). */
static __thread int internal_call;

static tacl_status_t validate(tacl_comm_t comm, tacl__coll_args_t *a,
                              tacl_stream_t stream)
{
    const char *name = tacl_coll_name(a->type);
    uint64_t send = 0, recv = 0;
    int root_used = tacl__coll_rooted(a->type);
    int peer_used = tacl__coll_p2p(a->type);
    tacl_status_t status;

    if (comm->x.ctx->fatal != TACL_OK)
        return tacl__error(comm->x.ctx->fatal, COLL,
                           "%s: the communicator failed earlier (%s); "
                           "destroy or abort it", name,
                           comm->x.ctx->fatal_msg);
    if (a->type == TACL_COLL_BARRIER)
        return tacl__coll_memory(comm, a, 0, 0, stream);
    if ((unsigned)a->dtype >= TACL_NUM_DTYPES)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "%s: dtype %d is not a tacl_dtype_t", name,
                           (int)a->dtype);
    if (tacl__coll_reduces(a->type) && (unsigned)a->op >= TACL_NUM_OPS)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "%s: op %d is not a tacl_op_t", name, (int)a->op);
    if (tacl__coll_reduces(a->type) && tacl__op_is_bitwise(a->op) &&
        !tacl__dtype_is_integer(a->dtype))
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "%s: op %s is bitwise and takes integer dtypes "
                           "only, not %s", name, tacl_op_name(a->op),
                           tacl_dtype_name(a->dtype));
    if ((root_used || peer_used) && (a->root < 0 || a->root >= comm->size) &&
        !(a->type == TACL_COLL_RECV && a->root == TACL_ANY_SOURCE))
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "%s: %s %d is not a rank of this communicator "
                           "(size %d)%s", name, peer_used ? "peer" : "root",
                           a->root, comm->size,
                           a->type == TACL_COLL_RECV
                               ? " nor TACL_ANY_SOURCE"
                               : "");
    if (peer_used && a->tag < 0 && !internal_call)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "%s: tag %d is negative (tags are 0 to %d; there "
                           "is no any-tag receive)", name, a->tag,
                           TACL_TAG_MAX);
    if (tacl__coll_vcounted(a->type)) {
        if (tacl__coll_bytes(a, comm->rank, comm->size, MAX_BUFFER_BYTES,
                             &send, &recv) != 0)
            return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                               "%s: a displacement plus its count of %s "
                               "overflows the largest buffer tacl accepts",
                               name, tacl_dtype_name(a->dtype));
        status = check_vcounts(comm, a, send, recv);
        if (status != TACL_OK)
            return status;
        return tacl__coll_memory(comm, a, send, recv, stream);
    }
    if (tacl__coll_bytes(a, comm->rank, comm->size, MAX_BUFFER_BYTES, &send,
                         &recv) != 0)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "%s: count %zu of %s on %d ranks overflows the "
                           "largest buffer tacl accepts", name, a->count,
                           tacl_dtype_name(a->dtype), comm->size);
    if (send > 0 && a->sendbuf == NULL)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "%s: sendbuf is NULL with count %zu", name,
                           a->count);
    if (recv > 0 && a->recvbuf == NULL)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "%s: recvbuf is NULL with count %zu", name,
                           a->count);
    status = check_aliasing(a, comm->rank, send, recv);
    if (status != TACL_OK)
        return status;
    if (a->qbits != 0) {
        status = check_quant(a);
        if (status != TACL_OK)
            return status;
    }
    return tacl__coll_memory(comm, a, send, recv, stream);
}

tacl_status_t tacl__coll_check(tacl_comm_t comm, tacl__coll_args_t *args,
                               tacl_stream_t stream)
{
    return validate(comm, args, stream);
}

/* post_held() of a call that is not the owner's last fast-engine call. */
static tacl_status_t post_full(tacl_comm_t comm, tacl__coll_args_t *a,
                               tacl_stream_t stream, int blocking,
                               tacl_request_t *req_p)
{
    tacl__op_t op = {.comm = comm, .stream = stream};
    tacl__exec_t *exec;
    tacl_status_t status;

    if (!blocking && req_p == NULL)
        return tacl__comm_fail(comm, tacl__error(TACL_ERR_INVALID_ARG, COLL,
                               "%s: req_p is NULL", tacl_coll_name(a->type)));
    status = validate(comm, a, stream);
    if (status != TACL_OK)
        return tacl__comm_fail(comm, status);
    if (a->type == TACL_COLL_SEND && blocking && !tacl__group_active() &&
        a->root == comm->rank)
        return tacl__comm_fail(comm, tacl__error(TACL_ERR_INVALID_USAGE,
                               COLL, "a blocking send to oneself can never "
                               "complete; post it with its receive inside a "
                               "group"));
    if (stream != NULL) {
        status = tacl__stream_hold(comm);
        if (status != TACL_OK)
            return tacl__comm_fail(comm, status);
    }
    if (stream == NULL && !tacl__group_active() &&
        tacl__fast_take(comm, a, blocking ? NULL : req_p, &status))
        return tacl__comm_fail(comm, status);
    tacl__coll_mark(a);
    pthread_mutex_lock(&comm->x.ctx->lock);
    /* A checked call reserves its signature exchange's sequence numbers
     * first (a group once per communicator, at its first collective), so
     * that the exchange's tags agree whatever the ranks go on to run. */
    if (comm->check && a->type != TACL_COLL_SEND &&
        a->type != TACL_COLL_RECV &&
        !(tacl__group_active() && tacl__group_checked(comm))) {
        op.checked = 1;
        op.check_seq = comm->seq;
        comm->seq += TACL__CHECK_SEQS;
    }
    /* An all-to-all-v on several nodes gathers every rank's counts
     * first, on a number of its own (vmatrix.c). */
    if (tacl__vmatrix_wanted(comm, a)) {
        op.vgather = 1;
        op.vseq = comm->seq++;
    }
    /* A send's or receive's number only names it in the flight recorder
     * and the logs: its message carries the user's tag (p2p.c). */
    if (a->type == TACL_COLL_SEND)
        a->seq = SEQ_HALF | (comm->p2p_send[a->root]++ % SEQ_HALF);
    else if (a->type == TACL_COLL_RECV)
        a->seq = SEQ_HALF |
                 (comm->p2p_recv[a->root < 0 ? comm->size : a->root]++ %
                  SEQ_HALF);
    else
        a->seq = comm->seq++ % SEQ_HALF;
    op.args = *a;
    if (tacl__group_active()) {
        pthread_mutex_unlock(&comm->x.ctx->lock);
        if (req_p != NULL)
            *req_p = NULL;
        return tacl__comm_fail(comm, tacl__group_add(&op));
    }
    if (op.checked) {
        uint64_t seq_next = comm->seq;

        pthread_mutex_unlock(&comm->x.ctx->lock);
        status = tacl__check_call(comm, &op, 1, op.check_seq, seq_next);
        if (status != TACL_OK)
            return tacl__comm_fail(comm, status);
        pthread_mutex_lock(&comm->x.ctx->lock);
    }
    if (op.vgather) {
        pthread_mutex_unlock(&comm->x.ctx->lock);
        status = tacl__vmatrix_gather(comm, &op);
        if (status != TACL_OK)
            return tacl__comm_fail(comm, status);
        pthread_mutex_lock(&comm->x.ctx->lock);
    }
    status = tacl__ops_start(comm, &op, 1, blocking && stream == NULL, &exec);
    /* Built: the gathered counts are needed no more. */
    if (op.vgather)
        tacl__vcounts_free((tacl__vcounts_t *)op.args.v);
    if (status != TACL_OK) {
        pthread_mutex_unlock(&comm->x.ctx->lock);
        return tacl__comm_fail(comm, status);
    }
    if (!blocking) {
        status = tacl__request_of_locked(exec, req_p);
        pthread_mutex_unlock(&comm->x.ctx->lock);
        return tacl__comm_fail(comm, tacl__request_or_wait(exec, status));
    }
    pthread_mutex_unlock(&comm->x.ctx->lock);
    if (stream != NULL) {
        /* NCCL's blocking call on a stream: enqueued, not waited for. */
        tacl__exec_detach(exec);
        return TACL_OK;
    }
    status = tacl__exec_wait(&exec, 1);
    tacl__exec_free(exec);
    return tacl__comm_fail(comm, status);
}

/* post() on a held communicator. */
static tacl_status_t post_held(tacl_comm_t comm, tacl__coll_args_t *a,
                               tacl_stream_t stream, int blocking,
                               tacl_request_t *req_p)
{
    tacl_status_t status;

    /* One of the owner's last fast-engine calls again: validated already
     * (before post_full's locals are set up: a tenth of such a call). */
    if ((blocking || req_p != NULL) && stream == NULL &&
        !tacl__group_active() &&
        tacl__fast_again(comm, a, blocking ? NULL : req_p, &status))
        return status == TACL_OK ? TACL_OK : tacl__comm_fail(comm, status);
    return post_full(comm, a, stream, blocking, req_p);
}

/* Run one operation now, or record it in the group. */
static tacl_status_t post(tacl_comm_t comm, tacl__coll_args_t *a,
                          tacl_stream_t stream, int blocking,
                          tacl_request_t *req_p)
{
    TACL__COMM_HELD(comm, post_held(comm, a, stream, blocking, req_p));
}

tacl_status_t tacl__coll_post(tacl_comm_t comm, tacl__coll_args_t *a,
                              tacl_stream_t stream, int blocking,
                              tacl_request_t *req_p)
{
    return post(comm, a, stream, blocking, req_p);
}

#define ARGS(...) (tacl__coll_args_t){__VA_ARGS__}

TACL_EXPORT tacl_status_t tacl_allgather_nb(const void *sendbuf,
                                            void *recvbuf, size_t sendcount,
                                            tacl_dtype_t dtype,
                                            tacl_comm_t comm,
                                            tacl_stream_t stream,
                                            tacl_request_t *req_p)
{
    tacl__coll_args_t a = TACL__ARGS_ALLGATHER;
    return post(comm, &a, stream, 0, req_p);
}

TACL_EXPORT tacl_status_t tacl_allgather(const void *sendbuf, void *recvbuf,
                                         size_t sendcount, tacl_dtype_t dtype,
                                         tacl_comm_t comm,
                                         tacl_stream_t stream)
{
    tacl__coll_args_t a = TACL__ARGS_ALLGATHER;
    return post(comm, &a, stream, 1, NULL);
}

TACL_EXPORT tacl_status_t tacl_reduce_scatter_nb(
    const void *sendbuf, void *recvbuf, size_t recvcount, tacl_dtype_t dtype,
    tacl_op_t op, tacl_comm_t comm, tacl_stream_t stream,
    tacl_request_t *req_p)
{
    tacl__coll_args_t a = TACL__ARGS_REDUCE_SCATTER;
    return post(comm, &a, stream, 0, req_p);
}

TACL_EXPORT tacl_status_t tacl_reduce_scatter(const void *sendbuf,
                                              void *recvbuf, size_t recvcount,
                                              tacl_dtype_t dtype,
                                              tacl_op_t op, tacl_comm_t comm,
                                              tacl_stream_t stream)
{
    tacl__coll_args_t a = TACL__ARGS_REDUCE_SCATTER;
    return post(comm, &a, stream, 1, NULL);
}

TACL_EXPORT tacl_status_t tacl_allreduce_nb(const void *sendbuf,
                                            void *recvbuf, size_t count,
                                            tacl_dtype_t dtype, tacl_op_t op,
                                            tacl_comm_t comm,
                                            tacl_stream_t stream,
                                            tacl_request_t *req_p)
{
    tacl__coll_args_t a = TACL__ARGS_ALLREDUCE;
    return post(comm, &a, stream, 0, req_p);
}

TACL_EXPORT tacl_status_t tacl_allreduce(const void *sendbuf, void *recvbuf,
                                         size_t count, tacl_dtype_t dtype,
                                         tacl_op_t op, tacl_comm_t comm,
                                         tacl_stream_t stream)
{
    tacl__coll_args_t a = TACL__ARGS_ALLREDUCE;
    return post(comm, &a, stream, 1, NULL);
}

TACL_EXPORT tacl_status_t tacl_broadcast_nb(const void *sendbuf,
                                            void *recvbuf, size_t count,
                                            tacl_dtype_t dtype, int root,
                                            tacl_comm_t comm,
                                            tacl_stream_t stream,
                                            tacl_request_t *req_p)
{
    tacl__coll_args_t a = TACL__ARGS_BROADCAST;
    return post(comm, &a, stream, 0, req_p);
}

TACL_EXPORT tacl_status_t tacl_broadcast(const void *sendbuf, void *recvbuf,
                                         size_t count, tacl_dtype_t dtype,
                                         int root, tacl_comm_t comm,
                                         tacl_stream_t stream)
{
    tacl__coll_args_t a = TACL__ARGS_BROADCAST;
    return post(comm, &a, stream, 1, NULL);
}

TACL_EXPORT tacl_status_t tacl_reduce_nb(const void *sendbuf, void *recvbuf,
                                         size_t count, tacl_dtype_t dtype,
                                         tacl_op_t op, int root,
                                         tacl_comm_t comm,
                                         tacl_stream_t stream,
                                         tacl_request_t *req_p)
{
    tacl__coll_args_t a = TACL__ARGS_REDUCE;
    return post(comm, &a, stream, 0, req_p);
}

TACL_EXPORT tacl_status_t tacl_reduce(const void *sendbuf, void *recvbuf,
                                      size_t count, tacl_dtype_t dtype,
                                      tacl_op_t op, int root,
                                      tacl_comm_t comm, tacl_stream_t stream)
{
    tacl__coll_args_t a = TACL__ARGS_REDUCE;
    return post(comm, &a, stream, 1, NULL);
}

TACL_EXPORT tacl_status_t tacl_alltoall_nb(const void *sendbuf,
                                           void *recvbuf, size_t count,
                                           tacl_dtype_t dtype,
                                           tacl_comm_t comm,
                                           tacl_stream_t stream,
                                           tacl_request_t *req_p)
{
    tacl__coll_args_t a = TACL__ARGS_ALLTOALL;
    return post(comm, &a, stream, 0, req_p);
}

TACL_EXPORT tacl_status_t tacl_alltoall(const void *sendbuf, void *recvbuf,
                                        size_t count, tacl_dtype_t dtype,
                                        tacl_comm_t comm,
                                        tacl_stream_t stream)
{
    tacl__coll_args_t a = TACL__ARGS_ALLTOALL;
    return post(comm, &a, stream, 1, NULL);
}

/* The arguments of a send, and of a receive (source: NULL for none). */
#define SEND_ARGS(tag_)                                                      \
    ARGS(.type = TACL_COLL_SEND, .sendbuf = sendbuf, .count = count,         \
         .dtype = dtype, .root = peer, .tag = (tag_))
#define RECV_ARGS(tag_, source_)                                             \
    ARGS(.type = TACL_COLL_RECV, .recvbuf = recvbuf, .count = count,         \
         .dtype = dtype, .root = peer, .tag = (tag_), .source = (source_))

TACL_EXPORT tacl_status_t tacl_send_nb(const void *sendbuf, size_t count,
                                       tacl_dtype_t dtype, int peer,
                                       tacl_comm_t comm, tacl_stream_t stream,
                                       tacl_request_t *req_p)
{
    tacl__coll_args_t a = SEND_ARGS(0);
    return post(comm, &a, stream, 0, req_p);
}

TACL_EXPORT tacl_status_t tacl_send(const void *sendbuf, size_t count,
                                    tacl_dtype_t dtype, int peer,
                                    tacl_comm_t comm, tacl_stream_t stream)
{
    tacl__coll_args_t a = SEND_ARGS(0);
    return post(comm, &a, stream, 1, NULL);
}

TACL_EXPORT tacl_status_t tacl_recv_nb(void *recvbuf, size_t count,
                                       tacl_dtype_t dtype, int peer,
                                       tacl_comm_t comm, tacl_stream_t stream,
                                       tacl_request_t *req_p)
{
    tacl__coll_args_t a = RECV_ARGS(0, NULL);
    return post(comm, &a, stream, 0, req_p);
}

TACL_EXPORT tacl_status_t tacl_recv(void *recvbuf, size_t count,
                                    tacl_dtype_t dtype, int peer,
                                    tacl_comm_t comm, tacl_stream_t stream)
{
    tacl__coll_args_t a = RECV_ARGS(0, NULL);
    return post(comm, &a, stream, 1, NULL);
}

TACL_EXPORT tacl_status_t tacl_send_tag_nb(const void *sendbuf, size_t count,
                                           tacl_dtype_t dtype, int peer,
                                           int tag, tacl_comm_t comm,
                                           tacl_stream_t stream,
                                           tacl_request_t *req_p)
{
    tacl__coll_args_t a = SEND_ARGS(tag);
    return post(comm, &a, stream, 0, req_p);
}

TACL_EXPORT tacl_status_t tacl_send_tag(const void *sendbuf, size_t count,
                                        tacl_dtype_t dtype, int peer, int tag,
                                        tacl_comm_t comm, tacl_stream_t stream)
{
    tacl__coll_args_t a = SEND_ARGS(tag);
    return post(comm, &a, stream, 1, NULL);
}

TACL_EXPORT tacl_status_t tacl_recv_tag_nb(void *recvbuf, size_t count,
                                           tacl_dtype_t dtype, int peer,
                                           int tag, int *source,
                                           tacl_comm_t comm,
                                           tacl_stream_t stream,
                                           tacl_request_t *req_p)
{
    tacl__coll_args_t a = RECV_ARGS(tag, peer == TACL_ANY_SOURCE ? source
                                                                 : NULL);
    if (source != NULL && peer != TACL_ANY_SOURCE)
        *source = peer;
    return post(comm, &a, stream, 0, req_p);
}

TACL_EXPORT tacl_status_t tacl_recv_tag(void *recvbuf, size_t count,
                                        tacl_dtype_t dtype, int peer, int tag,
                                        int *source, tacl_comm_t comm,
                                        tacl_stream_t stream)
{
    tacl__coll_args_t a = RECV_ARGS(tag, peer == TACL_ANY_SOURCE ? source
                                                                 : NULL);
    if (source != NULL && peer != TACL_ANY_SOURCE)
        *source = peer;
    return post(comm, &a, stream, 1, NULL);
}

tacl_status_t tacl__p2p_own(tacl_coll_t type, void *buf, size_t bytes,
                           int peer, int tag, int *source, tacl_comm_t comm,
                           tacl_request_t *req_p)
{
    tacl__coll_args_t a = {.type = type, .sendbuf = buf, .recvbuf = buf,
                           .count = bytes, .dtype = TACL_UINT8, .root = peer,
                           .tag = tag, .source = source};
    tacl_status_t status;

    internal_call = 1;
    status = post(comm, &a, NULL, 0, req_p);
    internal_call = 0;
    return status;
}

TACL_EXPORT tacl_status_t tacl_barrier_nb(tacl_comm_t comm,
                                          tacl_stream_t stream,
                                          tacl_request_t *req_p)
{
    tacl__coll_args_t a = TACL__ARGS_BARRIER;
    return post(comm, &a, stream, 0, req_p);
}

TACL_EXPORT tacl_status_t tacl_barrier(tacl_comm_t comm,
                                       tacl_stream_t stream)
{
    tacl__coll_args_t a = TACL__ARGS_BARRIER;
    return post(comm, &a, stream, 1, NULL);
}

/* The caller's quantization request, with defaults filled in. */
static tacl_status_t quant_args(const tacl_quant_t *q, tacl__coll_args_t *a)
{
    if (q == NULL)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "quantized %s: quant is NULL; pass the bits and "
                           "block size", tacl_coll_name(a->type));
    a->qbits = q->bits;
    a->qblock = q->block != 0 ? q->block : 256;
    /* Later checks take qbits == 0 for an exact call: refuse it here. */
    return a->qbits == 0 ? check_quant(a) : TACL_OK;
}

static tacl_status_t post_quant(tacl_comm_t comm, tacl__coll_args_t *a,
                                const tacl_quant_t *q, tacl_stream_t stream,
                                int blocking, tacl_request_t *req_p)
{
    tacl_status_t status;

    tacl__last_error_clear();
    status = tacl__comm_check(comm);
    if (status != TACL_OK)
        return status;
    status = quant_args(q, a);
    if (status != TACL_OK)
        return tacl__comm_fail(comm, status);
    return post(comm, a, stream, blocking, req_p);
}

TACL_EXPORT tacl_status_t tacl_allgather_quantized_nb(
    const void *sendbuf, void *recvbuf, size_t sendcount, tacl_dtype_t dtype,
    const tacl_quant_t *quant, tacl_comm_t comm, tacl_stream_t stream,
    tacl_request_t *req_p)
{
    tacl__coll_args_t a = TACL__ARGS_ALLGATHER;
    return post_quant(comm, &a, quant, stream, 0, req_p);
}

TACL_EXPORT tacl_status_t tacl_allgather_quantized(
    const void *sendbuf, void *recvbuf, size_t sendcount, tacl_dtype_t dtype,
    const tacl_quant_t *quant, tacl_comm_t comm, tacl_stream_t stream)
{
    tacl__coll_args_t a = TACL__ARGS_ALLGATHER;
    return post_quant(comm, &a, quant, stream, 1, NULL);
}

TACL_EXPORT tacl_status_t tacl_reduce_scatter_quantized_nb(
    const void *sendbuf, void *recvbuf, size_t recvcount, tacl_dtype_t dtype,
    tacl_op_t op, const tacl_quant_t *quant, tacl_comm_t comm,
    tacl_stream_t stream, tacl_request_t *req_p)
{
    tacl__coll_args_t a = TACL__ARGS_REDUCE_SCATTER;
    return post_quant(comm, &a, quant, stream, 0, req_p);
}

TACL_EXPORT tacl_status_t tacl_reduce_scatter_quantized(
    const void *sendbuf, void *recvbuf, size_t recvcount, tacl_dtype_t dtype,
    tacl_op_t op, const tacl_quant_t *quant, tacl_comm_t comm,
    tacl_stream_t stream)
{
    tacl__coll_args_t a = TACL__ARGS_REDUCE_SCATTER;
    return post_quant(comm, &a, quant, stream, 1, NULL);
}
