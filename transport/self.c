/*
 * The self transport: a rank sending to itself.  Sends and receives wait in
 * two queues in process memory, in posting order; progress() pairs each
 * receive with the oldest send of the same tag, copies the data once and
 * completes both.  Nothing is copied or completed inside the post calls, so
 * the contract of transport.h (completion only from progress) holds.
 *
 * A receive whose length differs from its send's completes with
 * TACL_ERR_INTERNAL; the send still completes with TACL_OK, as it would on
 * shm where the sender cannot know.
 *
 * CUDA device memory (built with CUDA): a matched pair on device memory
 * is copied with cudaMemcpyAsync on the transport's own stream, made on
 * the device of the first device buffer it sees (a context has one
 * device); the pair completes when progress sees the copy's event fire.
 * Copies finish in the order they were enqueued, so progress looks at the
 * oldest only.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tacl_build_config.h"
#include "log.h"
#include "op_fifo.h"

#if TACL_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

typedef struct {
    tacl__tl_t super;
    int rank;
    tacl__tl_opq_t sends;      /* posted sends not yet matched */
    tacl__tl_opq_t recvs;      /* posted receives not yet matched */
    tacl__tl_opq_t done;       /* completed; callbacks not yet called */
#if TACL_HAVE_CUDA
    tacl__tl_opq_t copying;    /* device receives whose copy is enqueued:
                                  tl_priv[0] its event, [1] its send */
    int device;                /* of the stream, -1 before the first */
    cudaStream_t stream;
#endif
} self_tl_t;

static tacl_status_t self_init(const tacl__tl_params_t *params,
                               tacl__tl_t **tl_p)
{
    self_tl_t *self = calloc(1, sizeof(*self));

    if (!self)
        return tacl__error(TACL_ERR_NO_MEMORY, INIT,
                           "cannot allocate the self transport");
    self->super.ops = &tacl__tl_self_ops;
    self->rank = params->rank;
#if TACL_HAVE_CUDA
    self->device = -1;
#endif
    *tl_p = &self->super;
    return TACL_OK;
}

static int self_reachable(tacl__tl_t *tl, int peer)
{
    return peer == ((self_tl_t *)tl)->rank;
}

/* Queue a checked send or receive; progress() matches the pairs. */
static tacl_status_t self_post(tacl__tl_t *tl, tacl__tl_opq_t *q,
                               tacl__tl_op_t *op)
{
    tacl_status_t status = tacl__tl_check_op(tl, op, ((self_tl_t *)tl)->rank,
                                             TACL_SUBSYS_INIT);

    if (status == TACL_OK)
        tacl__tl_opq_push(q, op);
    return status;
}

static tacl_status_t self_send(tacl__tl_t *tl, tacl__tl_op_t *op)
{
    return self_post(tl, &((self_tl_t *)tl)->sends, op);
}

static tacl_status_t self_recv(tacl__tl_t *tl, tacl__tl_op_t *op)
{
    return self_post(tl, &((self_tl_t *)tl)->recvs, op);
}

#if TACL_HAVE_CUDA
/* Set the stream's device current; returns the one to restore. */
static int self_dev_enter(const self_tl_t *self)
{
    int old = -1;

    if (cudaGetDevice(&old) != cudaSuccess)
        old = -1;
    if (old != self->device)
        (void)cudaSetDevice(self->device);
    return old;
}

static tacl_status_t self_cuda_fail(const char *what, cudaError_t e)
{
    (void)cudaGetLastError();
    return tacl__error(TACL_ERR_SYSTEM, INIT, "self transport: %s: %s",
                       what, cudaGetErrorString(e));
}

/* Enqueue the copy of a matched device pair; it completes in progress. */
static tacl_status_t copy_device(self_tl_t *self, tacl__tl_op_t *send,
                                 tacl__tl_op_t *recv)
{
    cudaEvent_t ev = NULL;
    cudaError_t e = cudaSuccess;
    int old;

    if (self->device < 0) {
        struct cudaPointerAttributes attr;

        e = cudaPointerGetAttributes(&attr, recv->buf);
        if (e != cudaSuccess)
            return self_cuda_fail("cudaPointerGetAttributes", e);
        self->device = attr.device >= 0 ? attr.device : 0;
        old = self_dev_enter(self);
        e = cudaStreamCreateWithFlags(&self->stream, cudaStreamNonBlocking);
        if (old >= 0 && old != self->device)
            (void)cudaSetDevice(old);
        if (e != cudaSuccess) {
            self->device = -1;
            return self_cuda_fail("cudaStreamCreate", e);
        }
    }
    old = self_dev_enter(self);
    e = cudaMemcpyAsync(recv->buf, send->buf, recv->len, cudaMemcpyDefault,
                        self->stream);
    if (e == cudaSuccess)
        e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
    if (e == cudaSuccess)
        e = cudaEventRecord(ev, self->stream);
    if (old >= 0 && old != self->device)
        (void)cudaSetDevice(old);
    if (e != cudaSuccess) {
        if (ev != NULL)
            (void)cudaEventDestroy(ev);
        return self_cuda_fail("cudaMemcpyAsync to self", e);
    }
    recv->tl_priv[0] = (uint64_t)(uintptr_t)ev;
    recv->tl_priv[1] = (uint64_t)(uintptr_t)send;
    tacl__tl_opq_push(&self->copying, recv);
    return TACL_OK;
}

/* Complete the pairs whose copies finished (or every one, when wait). */
static int copies_progress(self_tl_t *self, int wait)
{
    int n = 0;

    while (self->copying.head != NULL) {
        tacl__tl_op_t *recv = self->copying.head;
        cudaEvent_t ev = (cudaEvent_t)(uintptr_t)recv->tl_priv[0];
        tacl_status_t status = TACL_OK;
        cudaError_t e = wait ? cudaEventSynchronize(ev) : cudaEventQuery(ev);

        if (e == cudaErrorNotReady)
            break;
        if (e != cudaSuccess)
            status = self_cuda_fail("a copy to self", e);
        (void)cudaEventDestroy(ev);
        tacl__tl_opq_pop(&self->copying);
        tacl__tl_opq_complete(&self->done,
                              (tacl__tl_op_t *)(uintptr_t)recv->tl_priv[1],
                              TACL_OK);
        tacl__tl_opq_complete(&self->done, recv, status);
        n++;
    }
    return n;
}
#endif

/* Copy a matched pair and queue both for completion. */
static void finish_pair(self_tl_t *self, tacl__tl_op_t *send,
                        tacl__tl_op_t *recv)
{
    tacl_status_t status = TACL_OK;

#if TACL_HAVE_CUDA
    if (send->len == recv->len && recv->len > 0 && recv->buf != send->buf &&
        (recv->memtype == TACL_MEM_CUDA || send->memtype == TACL_MEM_CUDA)) {
        status = copy_device(self, send, recv);
        if (status == TACL_OK)
            return;
        tacl__tl_opq_complete(&self->done, send, TACL_OK);
        tacl__tl_opq_complete(&self->done, recv, status);
        return;
    }
#endif
    if (send->len != recv->len)
        status = tacl__tl_length_error(recv->peer, recv->tag, send->len, 0,
                                       recv->len, TACL_SUBSYS_INIT);
    else if (recv->len && recv->buf != send->buf)
        memcpy(recv->buf, send->buf, recv->len);
    tacl__tl_opq_complete(&self->done, send, TACL_OK);
    tacl__tl_opq_complete(&self->done, recv, status);
}

static int self_progress(tacl__tl_t *tl)
{
    self_tl_t *self = (self_tl_t *)tl;
    tacl__tl_op_t *prev = NULL, *recv, *next, *send;

    for (recv = self->recvs.head; recv; recv = next) {
        next = recv->tl_next;
        send = tacl__tl_opq_take(&self->sends, recv->peer, recv->tag);
        if (!send) {
            prev = recv;
            continue;
        }
        tacl__tl_opq_unlink(&self->recvs, prev, recv);
        finish_pair(self, send, recv);
    }
#if TACL_HAVE_CUDA
    copies_progress(self, 0);
#endif
    return tacl__tl_opq_run(&self->done);
}

static tacl_status_t self_wait(tacl__tl_t *tl, int64_t timeout_us)
{
    /* All work is local: there is nothing to sleep for. */
    return TACL_OK;
}

/*
 * Pairs are made in progress(), so receives of tag posted since the last
 * one will take the oldest queued sends of tag: the first send past
 * those is the one no receive has taken.
 */
static int self_probe(tacl__tl_t *tl, uint64_t tag, int *peer,
                      uint64_t *len)
{
    self_tl_t *self = (self_tl_t *)tl;
    const tacl__tl_op_t *op;
    int taken = 0;

    for (op = self->recvs.head; op != NULL; op = op->tl_next)
        taken += op->tag == tag;
    for (op = self->sends.head; op != NULL; op = op->tl_next) {
        if (op->tag != tag || taken-- > 0)
            continue;
        *peer = self->rank;
        *len = op->len;
        return 1;
    }
    return 0;
}

static void self_cancel_all(tacl__tl_t *tl, tacl_status_t status)
{
    self_tl_t *self = (self_tl_t *)tl;

    tacl__tl_opq_fail(&self->done, &self->sends, status);
    tacl__tl_opq_fail(&self->done, &self->recvs, status);
#if TACL_HAVE_CUDA
    /* A copy cannot be called back: let those in flight land first. */
    copies_progress(self, 1);
#endif
    self_progress(tl);
}

static void self_close(tacl__tl_t *tl)
{
#if TACL_HAVE_CUDA
    self_tl_t *self = (self_tl_t *)tl;

    copies_progress(self, 1);
    if (self->device >= 0)
        (void)cudaStreamDestroy(self->stream);
#endif
    free(tl);
}

const tacl__transport_ops_t tacl__tl_self_ops = {
    .size = sizeof(tacl__transport_ops_t),
    .name = "self",
#if TACL_HAVE_CUDA
    .caps = TACL__TL_CAP_HOST | TACL__TL_CAP_CUDA | TACL__TL_CAP_PROBE,
#else
    .caps = TACL__TL_CAP_HOST | TACL__TL_CAP_PROBE,
#endif
    .reach = TACL__TL_PEER_SELF,
    .init = self_init,
    .reachable = self_reachable,
    .send = self_send,
    .recv = self_recv,
    .progress = self_progress,
    .wait = self_wait,
    .probe = self_probe,
    .cancel_all = self_cancel_all,
    .close = self_close,
};
