/*
 * CUDA device memory and streams at the API: what kind of memory a call's
 * buffers are, whether the communicator can take it, and the streams the
 * executor joins.
 *
 * One call takes one kind of memory: its buffers are all host memory or
 * all device memory of the communicator's device (the device current
 * when the communicator was made, executor/context.c).  A non-NULL
 * stream orders device work, so it comes with device memory only; a
 * call on a stream returns once it is enqueued (tacl__exec_start_on
 * joins the stream), its blocking form included, as NCCL's; the
 * context's progress thread, held from the communicator's first call on
 * a stream until its destroy, finishes it.  Its failure makes the
 * communicator fail, which the next call reports.
 */
#include <stdio.h>

#include "comm.h"
#include "log.h"

tacl_memtype_t tacl__memtype_detect(const void *ptr)
{
    int device;

    return tacl__dev_ptr_type(ptr, &device);
}

static const char *kind_name(tacl_memtype_t t)
{
    return t == TACL_MEM_CUDA ? "CUDA device" : "host";
}

tacl_status_t tacl__coll_memory(tacl_comm_t comm, tacl__coll_args_t *a,
                                uint64_t send, uint64_t recv,
                                tacl_stream_t stream)
{
    const char *name = tacl_coll_name(a->type);
    const tacl__ctx_t *ctx = comm->x.ctx;
    int ds = -1, dr = -1, usable = tacl__dev_usable();
    /* Without a usable device (decided once per process) no pointer is
     * device memory: no query per buffer and call. */
    tacl_memtype_t ms = send > 0 ? usable ? tacl__dev_ptr_type(a->sendbuf, &ds)
                                          : TACL_MEM_HOST
                                 : TACL_MEM_AUTO;
    tacl_memtype_t mr = recv > 0 ? usable ? tacl__dev_ptr_type(a->recvbuf, &dr)
                                          : TACL_MEM_HOST
                                 : TACL_MEM_AUTO;
    tacl_memtype_t mt = ms != TACL_MEM_AUTO ? ms : mr;
    int device = ms == TACL_MEM_CUDA ? ds : dr;

    if (mt == TACL_MEM_AUTO)
        mt = TACL_MEM_HOST; /* no buffer: a barrier, a zero count */
    if (ms != TACL_MEM_AUTO && mr != TACL_MEM_AUTO && ms != mr)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "%s: sendbuf %p is %s memory but recvbuf %p is "
                           "%s memory; the buffers of one call are all host "
                           "or all device memory", name, a->sendbuf,
                           kind_name(ms), a->recvbuf, kind_name(mr));
    if (mt == TACL_MEM_HOST) {
        if (stream != NULL)
            return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                               "%s: a stream orders device work, but the "
                               "buffers are host memory (or memory CUDA "
                               "does not know, such as a freed device "
                               "pointer); for host buffers pass a NULL "
                               "stream (or use the _nb form to overlap)",
                               name);
        a->memtype = TACL_MEM_HOST;
        return TACL_OK;
    }
    if (ctx->cuda_device < 0)
        return tacl__error(TACL_ERR_UNSUPPORTED, COLL,
                           "%s: the buffers are CUDA device memory but the "
                           "communicator has no CUDA device: %s", name,
                           ctx->cuda_why);
    if (ms == TACL_MEM_CUDA && mr == TACL_MEM_CUDA && ds != dr)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "%s: sendbuf %p is memory of CUDA device %d but "
                           "recvbuf %p of device %d", name, a->sendbuf, ds,
                           a->recvbuf, dr);
    if (device != ctx->cuda_device)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "%s: %s %p is memory of CUDA device %d, but the "
                           "communicator's device is %d (the current "
                           "device when it was made)", name,
                           ms == TACL_MEM_CUDA ? "sendbuf" : "recvbuf",
                           ms == TACL_MEM_CUDA ? a->sendbuf : a->recvbuf,
                           device, ctx->cuda_device);
    if (stream != NULL) {
        tacl_status_t status = tacl__dev_check_stream(stream,
                                                      ctx->cuda_device, name);
        if (status != TACL_OK)
            return status;
    }
    a->memtype = TACL_MEM_CUDA;
    return TACL_OK;
}

tacl_status_t tacl__stream_hold(tacl_comm_t comm)
{
    tacl_status_t status;

    if (__atomic_load_n(&comm->stream_hold, __ATOMIC_ACQUIRE))
        return TACL_OK;
    status = tacl__ctx_progress_hold(comm->x.ctx);
    if (status != TACL_OK)
        return status;
    /* Two threads racing here: the loser gives its hold back. */
    if (__atomic_exchange_n(&comm->stream_hold, 1, __ATOMIC_ACQ_REL))
        tacl__ctx_progress_drop(comm->x.ctx);
    return TACL_OK;
}

tacl_status_t tacl__stream_collect(const tacl__op_t *ops, int nops,
                                   tacl__dev_streams_t *out)
{
    const tacl__op_t *first = NULL; /* the first that moves bytes */

    out->n = 0;
    for (int i = 0; i < nops; i++) {
        int seen = ops[i].stream == NULL;

        /* One schedule runs on host or on device memory, not both. */
        if (ops[i].args.count > 0 && ops[i].args.type != TACL_COLL_BARRIER) {
            if (first == NULL)
                first = &ops[i];
            else if (ops[i].args.memtype != first->args.memtype)
                return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                                   "a group mixes host and CUDA device "
                                   "buffers on one communicator (%s and "
                                   "%s); group them apart",
                                   tacl_coll_name(first->args.type),
                                   tacl_coll_name(ops[i].args.type));
        }

        for (int k = 0; k < out->n && !seen; k++)
            seen = out->s[k] == ops[i].stream;
        if (seen)
            continue;
        if (out->n == TACL__DEV_MAX_STREAMS)
            return tacl__error(TACL_ERR_UNSUPPORTED, COLL,
                               "a group uses more than %d streams on one "
                               "communicator", TACL__DEV_MAX_STREAMS);
        out->s[out->n++] = ops[i].stream;
    }
    return TACL_OK;
}
