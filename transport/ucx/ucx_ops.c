/*
 * The ucx transport's data path for host memory: posting, worker
 * progress, sleeping and failure.  DESIGN.md, "Transports": ucx sleeps on
 * the worker's event descriptor instead of spinning.
 *
 * A post goes out as ucp_tag_send_nbx / ucp_tag_recv_nbx with the source
 * rank folded into the tag (see ucx.h) and a full tag mask, so UCX's own
 * matching gives (source, tag) order.  An operation UCX finishes at once
 * goes straight to the done list; one that returns a request goes to the
 * pending list until its UCX callback moves it.  progress() (ucx.c)
 * drives the worker, then runs the tacl callbacks of the done list, so no
 * tacl callback ever runs inside a post or inside a UCX callback.
 *
 * This file builds on the endpoints (ucx_ep.c) alone.  The staging of
 * CUDA device buffers (ucx_cuda.c) posts its pinned host chunks through
 * it; ucx.c's entry points post host buffers (and empty device ones)
 * here, and add the staging's part to progress, wait and failure.
 *
 * Failing (a dead peer, or cancel_all) first closes every endpoint by
 * force, so UCX stops reading send buffers, then cancels receives; a
 * request UCX still holds after that is released with ucp_request_free(),
 * after which UCX never calls back for it, and only then is its operation
 * completed.  So an operation's memory is never touched by UCX after its
 * callback ran.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <time.h>

#include "common.h"
#include "log.h"
#include "ucx.h"

/* Worker progress calls one progress() makes at most. */
#define TACL_UCX_PROGRESS_BUDGET 64

static void pending_add(tacl__ucx_t *ucx, tacl__tl_op_t *op, void *req)
{
    TACL_UCX_OP_REQ(op) = (uint64_t)(uintptr_t)req;
    TACL_UCX_OP_FLAGS(op) |= TACL_UCX_OP_F_PENDING;
    TACL_UCX_OP_PREV(op) = (uint64_t)(uintptr_t)ucx->pending.tail;
    tacl__tl_opq_push(&ucx->pending, op);
    ++ucx->npending;
}

static void pending_remove(tacl__ucx_t *ucx, tacl__tl_op_t *op)
{
    tacl__tl_op_t *prev = (tacl__tl_op_t *)(uintptr_t)TACL_UCX_OP_PREV(op);
    tacl__tl_op_t *next = op->tl_next;

    if (prev)
        prev->tl_next = next;
    else
        ucx->pending.head = next;
    if (next)
        TACL_UCX_OP_PREV(next) = (uint64_t)(uintptr_t)prev;
    else
        ucx->pending.tail = prev;
    op->tl_next = NULL;
    TACL_UCX_OP_FLAGS(op) &= ~(uint64_t)TACL_UCX_OP_F_PENDING;
    TACL_UCX_OP_REQ(op) = 0;
    --ucx->npending;
}

/* The tacl status of a finished UCX operation; decides errors once. */
static tacl_status_t op_status(tacl__ucx_t *ucx, tacl__tl_op_t *op,
                               ucs_status_t st, uint64_t rlen)
{
    int recv = TACL_UCX_OP_FLAGS(op) & TACL_UCX_OP_F_RECV;
    tacl_status_t status;

    if (st == UCS_OK && (!recv || rlen == op->len))
        return TACL_OK;
    /* An operation we are cancelling carries the status it ends with. */
    if (TACL_UCX_OP_STATUS(op) != 0)
        return (tacl_status_t)(int64_t)TACL_UCX_OP_STATUS(op);
    if (st == UCS_OK || st == UCS_ERR_MESSAGE_TRUNCATED)
        return tacl__tl_length_error(op->peer, op->tag,
                                     st == UCS_OK ? rlen : op->len,
                                     st != UCS_OK, op->len,
                                     TACL_SUBSYS_NET);
    if (st == UCS_ERR_NO_MEMORY)
        return tacl__error(TACL_ERR_NO_MEMORY, NET, "rank %d: UCX ran out "
                           "of memory %s rank %d", ucx->base.rank,
                           recv ? "receiving from" : "sending to", op->peer);
    status = tacl__error_peer(op->peer, NET, "rank %d: %s rank %d "
                         "failed: %s; check that process's output",
                         ucx->base.rank, recv ? "receive from" : "send to",
                         op->peer, ucs_status_string(st));
    /* A broken connection breaks the whole instance. */
    tacl__tl_base_mark_failed(&ucx->base, status);
    return status;
}

static void request_done(tacl__tl_op_t *op, void *req, ucs_status_t st,
                         uint64_t rlen)
{
    tacl__ucx_t *ucx = (tacl__ucx_t *)(uintptr_t)TACL_UCX_OP_TL(op);

    ucp_request_free(req);
    if (TACL_UCX_OP_FLAGS(op) & TACL_UCX_OP_F_POSTING) {
        /* Called back inside the post call: posted() files it. */
        TACL_UCX_OP_STATUS(op) =
            (uint64_t)(int64_t)op_status(ucx, op, st, rlen);
        TACL_UCX_OP_FLAGS(op) |= TACL_UCX_OP_F_EARLY;
        return;
    }
    if (!(TACL_UCX_OP_FLAGS(op) & TACL_UCX_OP_F_PENDING))
        return;
    pending_remove(ucx, op);
    tacl__tl_complete(&ucx->base, op, op_status(ucx, op, st, rlen));
}

static void send_cb(void *req, ucs_status_t st, void *user_data)
{
    request_done(user_data, req, st, 0);
}

static void recv_cb(void *req, ucs_status_t st,
                    const ucp_tag_recv_info_t *info, void *user_data)
{
    request_done(user_data, req, st, info ? info->length : 0);
}

tacl_status_t tacl__ucx_check_op(tacl__ucx_t *ucx, tacl__tl_op_t *op)
{
    tacl_status_t status = tacl__tl_base_check(&ucx->base, op);

    if (status != TACL_OK)
        return status;
    TACL_UCX_OP_FLAGS(op) = 0;
    TACL_UCX_OP_REQ(op) = 0;
    TACL_UCX_OP_STATUS(op) = 0;
    TACL_UCX_OP_TL(op) = (uint64_t)(uintptr_t)ucx;
    return TACL_OK;
}

/* What a zero-length message points at, as UCX wants a buffer. */
static char empty_buf[1];

/*
 * File a just-posted request: done at once (UCX returned no request, or
 * called back inside the post), pending, or failed to post.
 */
static tacl_status_t posted(tacl__ucx_t *ucx, tacl__tl_op_t *op, void *req)
{
    TACL_UCX_OP_FLAGS(op) &= ~(uint64_t)TACL_UCX_OP_F_POSTING;
    if (TACL_UCX_OP_FLAGS(op) & TACL_UCX_OP_F_EARLY) {
        tacl__tl_complete(&ucx->base, op,
                          (tacl_status_t)(int64_t)TACL_UCX_OP_STATUS(op));
        return TACL_OK;
    }
    if (UCS_PTR_IS_ERR(req)) {
        ucs_status_t st = UCS_PTR_STATUS(req);

        return tacl__error(st == UCS_ERR_NO_MEMORY ? TACL_ERR_NO_MEMORY
                                                   : TACL_ERR_REMOTE,
                           NET, "rank %d cannot post a %s rank %d: %s",
                           ucx->base.rank,
                           TACL_UCX_OP_FLAGS(op) & TACL_UCX_OP_F_RECV
                               ? "receive from" : "send to",
                           op->peer, ucs_status_string(st));
    }
    if (req == NULL) {
        tacl__tl_complete(&ucx->base, op, TACL_OK);
        return TACL_OK;
    }
    pending_add(ucx, op, req);
    return TACL_OK;
}

/*
 * Post a host send, or a receive if recv.  A send needs the endpoint; a
 * receive does not, but creating it is what tells us that the sender
 * died.  A receive asks for no immediate completion: UCX 1.13 can
 * complete a receive at once without filling in its length, and the
 * length must be checked; the callback always has it.
 */
tacl_status_t tacl__ucx_post(tacl__ucx_t *ucx, tacl__tl_op_t *op, int recv)
{
    ucp_request_param_t param = {0};
    void *buf = op->len ? op->buf : empty_buf;
    tacl_status_t status;
    ucp_ep_h ep = NULL;
    void *req;

    status = tacl__ucx_check_op(ucx, op);
    if (status != TACL_OK)
        return status;
    status = tacl__ucx_get_ep(ucx, op->peer, &ep);
    if (status != TACL_OK && !recv)
        return status;
    if (status != TACL_OK)
        TACL_INFO(NET, "rank %d: receiving from rank %d without a "
                  "connection; only a message already here can match",
                  ucx->base.rank, op->peer);
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK |
                         UCP_OP_ATTR_FIELD_USER_DATA;
    param.user_data = op;
    if (!recv) {
        param.cb.send = send_cb;
        TACL_UCX_OP_FLAGS(op) = TACL_UCX_OP_F_POSTING;
        req = ucp_tag_send_nbx(ep, buf, (size_t)op->len,
                               tacl__ucx_tag(ucx->base.rank, op->tag), &param);
        return posted(ucx, op, req);
    }
    TACL_UCX_OP_FLAGS(op) = TACL_UCX_OP_F_RECV | TACL_UCX_OP_F_POSTING;
    param.op_attr_mask |= UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
    param.cb.recv = recv_cb;
    req = ucp_tag_recv_nbx(ucx->worker, buf, (size_t)op->len,
                           tacl__ucx_tag(op->peer, op->tag),
                           TACL_UCX_TAG_MASK, &param);
    status = posted(ucx, op, req);
    if (status == TACL_OK &&
        (TACL_UCX_OP_FLAGS(op) & TACL_UCX_OP_F_PENDING) &&
        ucx->ep_state[op->peer] != TACL_UCX_EP_OPEN) {
        /* Nothing is here yet and nothing more can come. */
        TACL_UCX_OP_STATUS(op) = (uint64_t)(int64_t)tacl__error_peer(
            op->peer, NET, "rank %d: receive from rank %d, whose "
            "connection was lost", ucx->base.rank, op->peer);
        ucp_request_cancel(ucx->worker, req);
    }
    return status;
}

tacl_status_t tacl__ucx_msg_recv(tacl__ucx_t *ucx, tacl__tl_op_t *op,
                                 void *msg)
{
    ucp_request_param_t param = {0};
    tacl_status_t status = tacl__ucx_check_op(ucx, op);

    if (status != TACL_OK)
        return status;
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK |
                         UCP_OP_ATTR_FIELD_USER_DATA |
                         UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
    param.user_data = op;
    param.cb.recv = recv_cb;
    TACL_UCX_OP_FLAGS(op) = TACL_UCX_OP_F_RECV | TACL_UCX_OP_F_POSTING;
    return posted(ucx, op,
                  ucp_tag_msg_recv_nbx(ucx->worker,
                                       op->len ? op->buf : empty_buf,
                                       (size_t)op->len, msg, &param));
}

void tacl__ucx_fail_pending(tacl__ucx_t *ucx, tacl_status_t status)
{
    tacl__tl_op_t *op;

    if (!ucx->pending.head)
        return;
    /* A cancelled request reports UCS_ERR_CANCELED; this is its status. */
    for (op = ucx->pending.head; op; op = op->tl_next)
        TACL_UCX_OP_STATUS(op) = (uint64_t)(int64_t)status;
    tacl__ucx_close_eps(ucx, UCP_EP_CLOSE_FLAG_FORCE);
    while ((op = ucx->pending.head)) {
        void *req = (void *)(uintptr_t)TACL_UCX_OP_REQ(op);

        if (TACL_UCX_OP_FLAGS(op) & TACL_UCX_OP_F_RECV)
            ucp_request_cancel(ucx->worker, req);
        if (ucx->pending.head != op)
            continue;
        pending_remove(ucx, op);
        ucp_request_free(req);
        tacl__tl_complete(&ucx->base, op, status);
    }
}

int tacl__ucx_worker_progress(tacl__ucx_t *ucx)
{
    int events = 0;

    for (int i = 0; ucx->worker && i < TACL_UCX_PROGRESS_BUDGET; ++i) {
        unsigned n = ucp_worker_progress(ucx->worker);

        if (!n)
            break;
        events += (int)n;
    }
    return events;
}

tacl_status_t tacl__ucx_sleep(tacl__ucx_t *ucx, ucs_status_t armed,
                              int64_t timeout_us)
{
    if (armed == UCS_ERR_BUSY)
        return TACL_OK;
    if (armed != UCS_OK)
        return tacl__error(TACL_ERR_INTERNAL, NET, "rank %d cannot arm the "
                           "UCX worker: %s", ucx->base.rank,
                           ucs_status_string(armed));
    return tacl__tl_base_sleep_fd(&ucx->base, ucx->efd, timeout_us,
                                  "the UCX worker");
}
