/*
 * Internal layout of the ucx transport, shared by its files.
 *
 * One instance owns one ucp context and one ucp worker (tag matching plus
 * wakeup, so wait() can sleep on the worker's event file descriptor).
 * Worker addresses of every rank are gathered at init; an endpoint to a
 * peer on another node is created the first time an operation names that
 * peer, with peer error handling so a dead peer fails the instance
 * instead of hanging it.
 *
 * Every posted operation sits on the pending list until UCX completes
 * it; UCX's callbacks (which may run inside ucp_worker_progress, inside
 * ucp_request_cancel or inside an endpoint close) only move it to the
 * done list, and progress() runs the tacl callbacks from there, so a tacl
 * callback never runs inside a post call.  An operation is handed back to
 * its owner only once UCX can no longer call back for it: its request
 * completed, or it was released with ucp_request_free().
 *
 * CUDA device buffers (when built with CUDA and a device is usable at
 * init) are handed by ucx.c's send and recv to the staging of
 * transport/stage.c, which copies them through pinned host chunks and
 * posts the chunks as host messages of the same tag through ucx_ops.c
 * (ucx_cuda.c lends it that host data path).
 */
#ifndef TACL_TRANSPORT_UCX_UCX_H
#define TACL_TRANSPORT_UCX_UCX_H

#include <pthread.h>
#include <stdint.h>

#include <ucp/api/ucp.h>

#include "stage.h"
#include "tl_base.h"

/** The ucx transport's ops table. */
extern const tacl__transport_ops_t tacl__tl_ucx_ops;

/* Tags: tl_base.h's wire tags, with the source rank in the top bits. */
#define TACL_UCX_MAX_RANKS TACL__TL_WIRE_MAX_RANKS
#define TACL_UCX_TAG_MASK UINT64_MAX

/** The UCX tag of a tacl message tag sent by world rank src. */
static inline uint64_t tacl__ucx_tag(int src, uint64_t tag)
{
    return tacl__tl_wire_tag(src, tag);
}

/* Endpoint states, one per world rank. */
enum {
    TACL_UCX_EP_NONE = 0,      /* not created yet */
    TACL_UCX_EP_OPEN,          /* usable */
    TACL_UCX_EP_FAILED,        /* the error handler fired; must be closed */
    TACL_UCX_EP_CLOSED         /* closed (its close may still run) */
};

/* Our use of tacl__tl_op_t.tl_priv. */
#define TACL_UCX_OP_STATUS(op) TACL__TL_OP_STATUS(op) /* result, or the
                                                          status it is
                                                          cancelled with */
#define TACL_UCX_OP_REQ(op) ((op)->tl_priv[1])    /* ucp request or 0 */
#define TACL_UCX_OP_PREV(op) ((op)->tl_priv[2])   /* pending list */
#define TACL_UCX_OP_FLAGS(op) ((op)->tl_priv[3])
#define TACL_UCX_OP_TL(op) ((op)->tl_priv[4])     /* the instance */
#define TACL_UCX_OP_F_RECV 1u      /* a receive (else a send) */
#define TACL_UCX_OP_F_PENDING 2u   /* on the pending list */
#define TACL_UCX_OP_F_POSTING 4u   /* inside the post call */
#define TACL_UCX_OP_F_EARLY 8u     /* UCX called back inside the post */

typedef struct {
    tacl__tl_base_t base;      /* first: rank, node, done queue, failure */
    ucp_context_h context;     /* NULL when no rank has a remote peer */
    ucp_worker_h worker;
    int efd;                   /* the worker's event descriptor */
    uint8_t *ep_state;         /* per rank: TACL_UCX_EP_* */
    ucp_ep_h *eps;             /* per rank */
    void **close_reqs;         /* per rank: an endpoint close in flight */
    uint8_t *addrs;            /* every rank's worker address, padded */
    size_t addr_stride;
    uint32_t *addr_lens;
    tacl__tl_opq_t pending;    /* posted, not completed by UCX yet; also
                                  linked backwards through OP_PREV */
    uint64_t npending;
    tacl__stage_t *stage;      /* CUDA staging; NULL: host memory only */
    tacl__tl_msgq_t claimed;   /* messages probe() took out of UCX for the
                                  receive posted next (ucx.c) */
} tacl__ucx_t;

/*
 * The files call one another one way, each only those listed before it:
 * ucx_ep.c (endpoints), ucx_ops.c (host memory), ucx_cuda.c (device
 * memory, staged through host messages), then ucx.c (the ops table).
 */

/* Endpoints (ucx_ep.c), the floor: it calls no other file of ucx. */
/** The endpoint to world rank peer, created on first use. */
tacl_status_t tacl__ucx_get_ep(tacl__ucx_t *ucx, int peer, ucp_ep_h *ep_p);
/** Start closing every endpoint; flags are UCP_EP_CLOSE_FLAG_*. */
void tacl__ucx_close_eps(tacl__ucx_t *ucx, unsigned flags);

/* Host memory: posting, worker progress, sleep and failure (ucx_ops.c). */
/** Check op against the instance and reset our fields of it. */
tacl_status_t tacl__ucx_check_op(tacl__ucx_t *ucx, tacl__tl_op_t *op);
/** Check and post a send (or a receive if recv) of a host buffer. */
tacl_status_t tacl__ucx_post(tacl__ucx_t *ucx, tacl__tl_op_t *op, int recv);
/** Receive the probed UCX message msg into op's (host) buffer. */
tacl_status_t tacl__ucx_msg_recv(tacl__ucx_t *ucx, tacl__tl_op_t *op,
                                 void *msg);
/** Progress the worker a bounded number of times; the events handled. */
int tacl__ucx_worker_progress(tacl__ucx_t *ucx);
/**
 * Sleep up to timeout_us on the worker's event descriptor, given what
 * ucp_worker_arm() returned: UCS_ERR_BUSY means events wait already.
 */
tacl_status_t tacl__ucx_sleep(tacl__ucx_t *ucx, ucs_status_t armed,
                              int64_t timeout_us);
/** Every operation on the pending list ends with status. */
void tacl__ucx_fail_pending(tacl__ucx_t *ucx, tacl_status_t status);

/*
 * CUDA device memory staged through pinned host chunks (ucx_cuda.c, the
 * ucx side of transport/stage.c): the stage's calls take ucx->stage.
 */
/** At init: 1 when a device is usable, and then ucx->stage is set. */
int tacl__ucx_stage_init(tacl__ucx_t *ucx);

#endif /* TACL_TRANSPORT_UCX_UCX_H */
