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
 */
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "op_fifo.h"

typedef struct {
    tacl__tl_t super;
    int rank;
    tacl__tl_opq_t sends;      /* posted sends not yet matched */
    tacl__tl_opq_t recvs;      /* posted receives not yet matched */
    tacl__tl_opq_t done;       /* completed; callbacks not yet called */
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

/* Copy a matched pair and queue both for completion. */
static void finish_pair(self_tl_t *self, tacl__tl_op_t *send,
                        tacl__tl_op_t *recv)
{
    tacl_status_t status = TACL_OK;

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
        send = tacl__tl_opq_take_tag(&self->sends, recv->tag);
        if (!send) {
            prev = recv;
            continue;
        }
        tacl__tl_opq_unlink(&self->recvs, prev, recv);
        finish_pair(self, send, recv);
    }
    return tacl__tl_opq_run(&self->done);
}

static tacl_status_t self_wait(tacl__tl_t *tl, int64_t timeout_us)
{
    /* All work is local: there is nothing to sleep for. */
    return TACL_OK;
}

static void self_cancel_all(tacl__tl_t *tl, tacl_status_t status)
{
    self_tl_t *self = (self_tl_t *)tl;
    tacl__tl_opq_t *queues[] = {&self->sends, &self->recvs};
    tacl__tl_op_t *op;

    for (size_t i = 0; i < sizeof(queues) / sizeof(queues[0]); ++i)
        while ((op = tacl__tl_opq_pop(queues[i])))
            tacl__tl_opq_complete(&self->done, op, status);
    self_progress(tl);
}

static void self_close(tacl__tl_t *tl)
{
    free(tl);
}

const tacl__transport_ops_t tacl__tl_self_ops = {
    .size = sizeof(tacl__transport_ops_t),
    .name = "self",
    .caps = TACL__TL_CAP_HOST,
    .reach = TACL__TL_PEER_SELF,
    .init = self_init,
    .reachable = self_reachable,
    .send = self_send,
    .recv = self_recv,
    .progress = self_progress,
    .wait = self_wait,
    .cancel_all = self_cancel_all,
    .close = self_close,
};
