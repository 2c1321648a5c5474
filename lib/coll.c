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

static int overlaps(const void *a, uint64_t alen, const void *b,
                    uint64_t blen)
{
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return alen > 0 && blen > 0 && x < y + blen && y < x + alen;
}

/* In place as NCCL defines it, or a forbidden partial overlap. */
static tacl_status_t check_aliasing(const tacl__coll_args_t *a, int rank,
                                    uint64_t send, uint64_t recv)
{
    const char *sb = a->sendbuf, *rb = a->recvbuf;
    const char *in_place = NULL;

    if (!overlaps(sb, send, rb, recv))
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
    if ((root_used || peer_used) && (a->root < 0 || a->root >= comm->size))
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "%s: %s %d is not a rank of this communicator "
                           "(size %d)", name, peer_used ? "peer" : "root",
                           a->root, comm->size);
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

static int step_overlaps(const tacl__sched_t *s, tacl__bref_t a,
                         tacl__bref_t b, uint64_t bytes_a, uint64_t bytes_b)
{
    const char *pa = (const char *)s->bufs[a.buf].ptr + a.off;
    const char *pb = (const char *)s->bufs[b.buf].ptr + b.off;

    if (s->bufs[a.buf].role == TACL__BUF_SCRATCH ||
        s->bufs[b.buf].role == TACL__BUF_SCRATCH)
        return a.buf == b.buf && overlaps(pa, bytes_a, pb, bytes_b);
    return overlaps(pa, bytes_a, pb, bytes_b);
}

/*
 * A group may send from and receive into the same memory (nccl-tests'
 * in-place send/recv does).  A receive that nothing depends on and whose
 * destination overlaps a send's source lands in scratch instead, and is
 * copied in once both the receive and those sends are done.
 */
static tacl_status_t stage_aliased_recvs(tacl__sched_t *s)
{
    uint32_t n = s->nsteps;
    uint8_t *has_dependents;
    tacl_status_t status = TACL_OK;

    has_dependents = calloc(n + 1, 1);
    if (has_dependents == NULL)
        return tacl__error(TACL_ERR_NO_MEMORY, COLL, "out of memory");
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t k = 0; k < s->steps[i].ndeps; k++)
            has_dependents[tacl__sched_deps(s, i)[k]] = 1;
    for (uint32_t r = 0; r < n && status == TACL_OK; r++) {
        tacl__step_t recv = s->steps[r];
        int32_t deps[TACL__MAX_DEPS], nd = 0, scratch;
        tacl__bref_t tmp;

        if (recv.kind != TACL__STEP_RECV || has_dependents[r] ||
            recv.bytes == 0)
            continue;
        deps[nd++] = (int32_t)r;
        for (uint32_t q = 0; q < n && nd < TACL__MAX_DEPS; q++) {
            const tacl__step_t *send = &s->steps[q];
            if (send->kind == TACL__STEP_SEND &&
                step_overlaps(s, recv.dst, send->src, recv.bytes,
                              send->bytes))
                deps[nd++] = (int32_t)q;
        }
        if (nd == 1)
            continue;
        scratch = tacl__sched_scratch(s, recv.bytes,
                                      (tacl_memtype_t)
                                          s->bufs[recv.dst.buf].memtype);
        if (scratch < 0)
            break;
        tmp = tacl__bref(scratch, 0);
        s->steps[r].dst = tmp;
        tacl__sched_copy(s, recv.dst, tmp, recv.bytes, deps, nd);
    }
    free(has_dependents);
    return status != TACL_OK ? status : tacl__sched_status(s);
}

tacl_status_t tacl__ops_build(tacl_comm_t comm, const tacl__op_t *ops,
                              int nops, tacl__sched_t *sched_p)
{
    const char *user_spec = tacl__config_str(TACL_CFG_ALGO);
    tacl__sched_t sched;
    tacl_status_t status = TACL_OK;

    tacl__sched_init(&sched, comm->rank, comm->size);
    for (int i = 0; i < nops && status == TACL_OK; i++) {
        const tacl__algo_t *algo = NULL;
        char tuned[256];
        const char *spec = tacl__tuner_spec(comm, &ops[i].args, user_spec,
                                            tuned, sizeof(tuned));
        if (nops == 1)
            status = tacl__plan_build(comm, &ops[i].args, spec, &sched,
                                      &algo);
        else if (ops[i].args.qbits != 0)
            status = tacl__quant_build(&sched, &ops[i].args, &comm->view,
                                       spec, &algo);
        else
            status = tacl__algo_build(&sched, &ops[i].args, &comm->view,
                                      spec, &algo);
        if (status == TACL_OK && algo != NULL &&
            strcmp(comm->last_algo, algo->name) != 0)
            snprintf(comm->last_algo, sizeof(comm->last_algo), "%s",
                     algo->name);
        if (status == TACL_OK && algo != NULL)
            TACL_INFO(COLL, "rank %d: %s of %zu x %s with %s (seq %llu)",
                      comm->rank, tacl_coll_name(ops[i].args.type),
                      ops[i].args.count, tacl_dtype_name(ops[i].args.dtype),
                      algo->name, (unsigned long long)ops[i].args.seq);
    }
    if (status == TACL_OK)
        status = tacl__sched_status(&sched);
    if (status == TACL_OK && nops > 1)
        status = stage_aliased_recvs(&sched);
    if (status != TACL_OK)
        tacl__sched_fini(&sched);
    *sched_p = sched;
    return status;
}

tacl_status_t tacl__ops_start(tacl_comm_t comm, const tacl__op_t *ops,
                              int nops, int waited, tacl__exec_t **exec_p)
{
    tacl__sched_t sched;
    tacl__dev_streams_t streams;
    tacl_status_t status = tacl__stream_collect(ops, nops, &streams);

    if (status == TACL_OK)
        status = tacl__ops_build(comm, ops, nops, &sched);
    if (status != TACL_OK)
        return status;
    tacl__flight_note(comm, ops, nops);
    status = tacl__exec_start_on(&comm->x, &sched, &streams, waited, exec_p);
    tacl__sched_fini(&sched);
    return status;
}

/*
 * What the builders may assume about the node's memory: whether its
 * processes map one another's shared memory at all, and whether the buffer
 * peers read from this rank is memory they map.  Decided here so that a
 * builder's schedule depends on its arguments and topology only.
 */
void tacl__coll_mark(tacl__coll_args_t *a)
{
    size_t bytes = a->count * tacl_dtype_size(a->dtype);
    const void *read = a->type == TACL_COLL_ALLREDUCE ? a->recvbuf
                                                       : a->sendbuf;
    tacl__memseg_ref_t ref;

    a->chunk_bytes = tacl__config_size(TACL_CFG_CHUNK_SIZE);
    a->shm_map = tacl__config_bool(TACL_CFG_SHM_MAP);
    a->send_mapped = read != NULL && bytes > 0 &&
                     tacl__memseg_find(read, bytes, &ref);
}

/* post_held() of a call that is not the owner's last fast-path call. */
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
    if (blocking && tacl__fast_try(comm, a, &status))
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
    if (a->type == TACL_COLL_SEND)
        a->seq = SEQ_HALF | (comm->p2p_send[a->root]++ % SEQ_HALF);
    else if (a->type == TACL_COLL_RECV)
        a->seq = SEQ_HALF | (comm->p2p_recv[a->root]++ % SEQ_HALF);
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
    status = tacl__ops_start(comm, &op, 1, blocking && stream == NULL, &exec);
    pthread_mutex_unlock(&comm->x.ctx->lock);
    if (status != TACL_OK)
        return tacl__comm_fail(comm, status);
    if (!blocking) {
        status = tacl__request_create(&exec, 1, req_p);
        if (status != TACL_OK) {
            tacl__exec_wait(&exec, 1);
            tacl__exec_free(exec);
        }
        return tacl__comm_fail(comm, status);
    }
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

    /* One of the owner's last fast-path calls again: validated already
     * (before post_full's locals are set up: a tenth of such a call). */
    if (blocking && stream == NULL && tacl__fast_again(comm, a, &status))
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

#define ARGS(...) (tacl__coll_args_t){__VA_ARGS__}

TACL_EXPORT tacl_status_t tacl_allgather_nb(const void *sendbuf,
                                            void *recvbuf, size_t sendcount,
                                            tacl_dtype_t dtype,
                                            tacl_comm_t comm,
                                            tacl_stream_t stream,
                                            tacl_request_t *req_p)
{
    tacl__coll_args_t a = ARGS(.type = TACL_COLL_ALLGATHER,
                               .sendbuf = sendbuf, .recvbuf = recvbuf,
                               .count = sendcount, .dtype = dtype);
    return post(comm, &a, stream, 0, req_p);
}

TACL_EXPORT tacl_status_t tacl_allgather(const void *sendbuf, void *recvbuf,
                                         size_t sendcount, tacl_dtype_t dtype,
                                         tacl_comm_t comm,
                                         tacl_stream_t stream)
{
    tacl__coll_args_t a = ARGS(.type = TACL_COLL_ALLGATHER,
                               .sendbuf = sendbuf, .recvbuf = recvbuf,
                               .count = sendcount, .dtype = dtype);
    return post(comm, &a, stream, 1, NULL);
}

TACL_EXPORT tacl_status_t tacl_reduce_scatter_nb(
    const void *sendbuf, void *recvbuf, size_t recvcount, tacl_dtype_t dtype,
    tacl_op_t op, tacl_comm_t comm, tacl_stream_t stream,
    tacl_request_t *req_p)
{
    tacl__coll_args_t a = ARGS(.type = TACL_COLL_REDUCE_SCATTER,
                               .sendbuf = sendbuf, .recvbuf = recvbuf,
                               .count = recvcount, .dtype = dtype, .op = op);
    return post(comm, &a, stream, 0, req_p);
}

TACL_EXPORT tacl_status_t tacl_reduce_scatter(const void *sendbuf,
                                              void *recvbuf, size_t recvcount,
                                              tacl_dtype_t dtype,
                                              tacl_op_t op, tacl_comm_t comm,
                                              tacl_stream_t stream)
{
    tacl__coll_args_t a = ARGS(.type = TACL_COLL_REDUCE_SCATTER,
                               .sendbuf = sendbuf, .recvbuf = recvbuf,
                               .count = recvcount, .dtype = dtype, .op = op);
    return post(comm, &a, stream, 1, NULL);
}

TACL_EXPORT tacl_status_t tacl_allreduce_nb(const void *sendbuf,
                                            void *recvbuf, size_t count,
                                            tacl_dtype_t dtype, tacl_op_t op,
                                            tacl_comm_t comm,
                                            tacl_stream_t stream,
                                            tacl_request_t *req_p)
{
    tacl__coll_args_t a = ARGS(.type = TACL_COLL_ALLREDUCE,
                               .sendbuf = sendbuf, .recvbuf = recvbuf,
                               .count = count, .dtype = dtype, .op = op);
    return post(comm, &a, stream, 0, req_p);
}

TACL_EXPORT tacl_status_t tacl_allreduce(const void *sendbuf, void *recvbuf,
                                         size_t count, tacl_dtype_t dtype,
                                         tacl_op_t op, tacl_comm_t comm,
                                         tacl_stream_t stream)
{
    tacl__coll_args_t a = ARGS(.type = TACL_COLL_ALLREDUCE,
                               .sendbuf = sendbuf, .recvbuf = recvbuf,
                               .count = count, .dtype = dtype, .op = op);
    return post(comm, &a, stream, 1, NULL);
}

TACL_EXPORT tacl_status_t tacl_broadcast_nb(const void *sendbuf,
                                            void *recvbuf, size_t count,
                                            tacl_dtype_t dtype, int root,
                                            tacl_comm_t comm,
                                            tacl_stream_t stream,
                                            tacl_request_t *req_p)
{
    tacl__coll_args_t a = ARGS(.type = TACL_COLL_BROADCAST,
                               .sendbuf = sendbuf, .recvbuf = recvbuf,
                               .count = count, .dtype = dtype, .root = root);
    return post(comm, &a, stream, 0, req_p);
}

TACL_EXPORT tacl_status_t tacl_broadcast(const void *sendbuf, void *recvbuf,
                                         size_t count, tacl_dtype_t dtype,
                                         int root, tacl_comm_t comm,
                                         tacl_stream_t stream)
{
    tacl__coll_args_t a = ARGS(.type = TACL_COLL_BROADCAST,
                               .sendbuf = sendbuf, .recvbuf = recvbuf,
                               .count = count, .dtype = dtype, .root = root);
    return post(comm, &a, stream, 1, NULL);
}

TACL_EXPORT tacl_status_t tacl_reduce_nb(const void *sendbuf, void *recvbuf,
                                         size_t count, tacl_dtype_t dtype,
                                         tacl_op_t op, int root,
                                         tacl_comm_t comm,
                                         tacl_stream_t stream,
                                         tacl_request_t *req_p)
{
    tacl__coll_args_t a = ARGS(.type = TACL_COLL_REDUCE, .sendbuf = sendbuf,
                               .recvbuf = recvbuf, .count = count,
                               .dtype = dtype, .op = op, .root = root);
    return post(comm, &a, stream, 0, req_p);
}

TACL_EXPORT tacl_status_t tacl_reduce(const void *sendbuf, void *recvbuf,
                                      size_t count, tacl_dtype_t dtype,
                                      tacl_op_t op, int root,
                                      tacl_comm_t comm, tacl_stream_t stream)
{
    tacl__coll_args_t a = ARGS(.type = TACL_COLL_REDUCE, .sendbuf = sendbuf,
                               .recvbuf = recvbuf, .count = count,
                               .dtype = dtype, .op = op, .root = root);
    return post(comm, &a, stream, 1, NULL);
}

TACL_EXPORT tacl_status_t tacl_alltoall_nb(const void *sendbuf,
                                           void *recvbuf, size_t count,
                                           tacl_dtype_t dtype,
                                           tacl_comm_t comm,
                                           tacl_stream_t stream,
                                           tacl_request_t *req_p)
{
    tacl__coll_args_t a = ARGS(.type = TACL_COLL_ALLTOALL,
                               .sendbuf = sendbuf, .recvbuf = recvbuf,
                               .count = count, .dtype = dtype);
    return post(comm, &a, stream, 0, req_p);
}

TACL_EXPORT tacl_status_t tacl_alltoall(const void *sendbuf, void *recvbuf,
                                        size_t count, tacl_dtype_t dtype,
                                        tacl_comm_t comm,
                                        tacl_stream_t stream)
{
    tacl__coll_args_t a = ARGS(.type = TACL_COLL_ALLTOALL,
                               .sendbuf = sendbuf, .recvbuf = recvbuf,
                               .count = count, .dtype = dtype);
    return post(comm, &a, stream, 1, NULL);
}

TACL_EXPORT tacl_status_t tacl_send_nb(const void *sendbuf, size_t count,
                                       tacl_dtype_t dtype, int peer,
                                       tacl_comm_t comm, tacl_stream_t stream,
                                       tacl_request_t *req_p)
{
    tacl__coll_args_t a = ARGS(.type = TACL_COLL_SEND, .sendbuf = sendbuf,
                               .count = count, .dtype = dtype, .root = peer);
    return post(comm, &a, stream, 0, req_p);
}

TACL_EXPORT tacl_status_t tacl_send(const void *sendbuf, size_t count,
                                    tacl_dtype_t dtype, int peer,
                                    tacl_comm_t comm, tacl_stream_t stream)
{
    tacl__coll_args_t a = ARGS(.type = TACL_COLL_SEND, .sendbuf = sendbuf,
                               .count = count, .dtype = dtype, .root = peer);
    return post(comm, &a, stream, 1, NULL);
}

TACL_EXPORT tacl_status_t tacl_recv_nb(void *recvbuf, size_t count,
                                       tacl_dtype_t dtype, int peer,
                                       tacl_comm_t comm, tacl_stream_t stream,
                                       tacl_request_t *req_p)
{
    tacl__coll_args_t a = ARGS(.type = TACL_COLL_RECV, .recvbuf = recvbuf,
                               .count = count, .dtype = dtype, .root = peer);
    return post(comm, &a, stream, 0, req_p);
}

TACL_EXPORT tacl_status_t tacl_recv(void *recvbuf, size_t count,
                                    tacl_dtype_t dtype, int peer,
                                    tacl_comm_t comm, tacl_stream_t stream)
{
    tacl__coll_args_t a = ARGS(.type = TACL_COLL_RECV, .recvbuf = recvbuf,
                               .count = count, .dtype = dtype, .root = peer);
    return post(comm, &a, stream, 1, NULL);
}

TACL_EXPORT tacl_status_t tacl_barrier_nb(tacl_comm_t comm,
                                          tacl_stream_t stream,
                                          tacl_request_t *req_p)
{
    tacl__coll_args_t a = ARGS(.type = TACL_COLL_BARRIER,
                               .dtype = TACL_UINT8);
    return post(comm, &a, stream, 0, req_p);
}

TACL_EXPORT tacl_status_t tacl_barrier(tacl_comm_t comm,
                                       tacl_stream_t stream)
{
    tacl__coll_args_t a = ARGS(.type = TACL_COLL_BARRIER,
                               .dtype = TACL_UINT8);
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
    tacl__coll_args_t a = ARGS(.type = TACL_COLL_ALLGATHER,
                               .sendbuf = sendbuf, .recvbuf = recvbuf,
                               .count = sendcount, .dtype = dtype);
    return post_quant(comm, &a, quant, stream, 0, req_p);
}

TACL_EXPORT tacl_status_t tacl_allgather_quantized(
    const void *sendbuf, void *recvbuf, size_t sendcount, tacl_dtype_t dtype,
    const tacl_quant_t *quant, tacl_comm_t comm, tacl_stream_t stream)
{
    tacl__coll_args_t a = ARGS(.type = TACL_COLL_ALLGATHER,
                               .sendbuf = sendbuf, .recvbuf = recvbuf,
                               .count = sendcount, .dtype = dtype);
    return post_quant(comm, &a, quant, stream, 1, NULL);
}

TACL_EXPORT tacl_status_t tacl_reduce_scatter_quantized_nb(
    const void *sendbuf, void *recvbuf, size_t recvcount, tacl_dtype_t dtype,
    tacl_op_t op, const tacl_quant_t *quant, tacl_comm_t comm,
    tacl_stream_t stream, tacl_request_t *req_p)
{
    tacl__coll_args_t a = ARGS(.type = TACL_COLL_REDUCE_SCATTER,
                               .sendbuf = sendbuf, .recvbuf = recvbuf,
                               .count = recvcount, .dtype = dtype, .op = op);
    return post_quant(comm, &a, quant, stream, 0, req_p);
}

TACL_EXPORT tacl_status_t tacl_reduce_scatter_quantized(
    const void *sendbuf, void *recvbuf, size_t recvcount, tacl_dtype_t dtype,
    tacl_op_t op, const tacl_quant_t *quant, tacl_comm_t comm,
    tacl_stream_t stream)
{
    tacl__coll_args_t a = ARGS(.type = TACL_COLL_REDUCE_SCATTER,
                               .sendbuf = sendbuf, .recvbuf = recvbuf,
                               .count = recvcount, .dtype = dtype, .op = op);
    return post_quant(comm, &a, quant, stream, 1, NULL);
}
