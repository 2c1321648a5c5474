/*
 * The ucx transport's floor: endpoints.  DESIGN.md, "Transports": ucx
 * serves peers on other nodes, and a dead peer fails the instance instead
 * of hanging it.
 *
 * Endpoints are created on first use with peer error handling.  A broken
 * connection to a peer with operations pending fails the whole instance
 * (TACL_ERR_REMOTE); one to a peer with nothing pending (say it finished
 * and closed) only marks that peer, so a later operation naming it fails.
 * "Pending" counts host operations UCX holds (the pending list) and
 * device messages being staged (transport/stage.c's queue): this file
 * calls nothing else of the transport, and every other file of it
 * builds on this one.
 */
#include "common.h"
#include "log.h"
#include "ucx.h"

/* Whether an operation with peer is pending, posted or being staged. */
static int peer_busy(const tacl__ucx_t *ucx, int peer)
{
    for (const tacl__tl_op_t *op = ucx->pending.head; op; op = op->tl_next)
        if (op->peer == peer)
            return 1;
    return tacl__stage_pending(ucx->stage, peer);
}

static void ep_error_cb(void *arg, ucp_ep_h ep, ucs_status_t st)
{
    tacl__ucx_t *ucx = arg;
    int peer = -1;

    for (int r = 0; r < ucx->base.nranks && peer < 0; ++r)
        if (ucx->eps[r] == ep && ucx->ep_state[r] == TACL_UCX_EP_OPEN)
            peer = r;
    if (peer < 0)
        return;
    ucx->ep_state[peer] = TACL_UCX_EP_FAILED;
    if (!peer_busy(ucx, peer)) {
        TACL_INFO(NET, "rank %d: connection to rank %d closed (%s) with "
                  "nothing pending", ucx->base.rank, peer,
                  ucs_status_string(st));
        return;
    }
    if (ucx->base.failed == TACL_OK)
        ucx->base.failed = tacl__error_peer(
            peer, NET, "rank %d lost rank %d with operations pending (%s); "
            "check that process's output", ucx->base.rank, peer,
            ucs_status_string(st));
}

tacl_status_t tacl__ucx_get_ep(tacl__ucx_t *ucx, int peer, ucp_ep_h *ep_p)
{
    ucp_ep_params_t params = {0};
    ucs_status_t st;

    switch (ucx->ep_state[peer]) {
    case TACL_UCX_EP_OPEN:
        *ep_p = ucx->eps[peer];
        return TACL_OK;
    case TACL_UCX_EP_NONE:
        break;
    default:
        return tacl__error_peer(peer, NET, "rank %d: the connection "
                           "to rank %d was lost earlier", ucx->base.rank, peer);
    }
    params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS |
                        UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                        UCP_EP_PARAM_FIELD_ERR_HANDLER;
    params.address = (const ucp_address_t *)(ucx->addrs +
                                             (size_t)peer * ucx->addr_stride);
    params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    params.err_handler.cb = ep_error_cb;
    params.err_handler.arg = ucx;
    st = ucp_ep_create(ucx->worker, &params, &ucx->eps[peer]);
    if (st != UCS_OK) {
        ucx->eps[peer] = NULL;
        return tacl__error(TACL_ERR_REMOTE, NET, "rank %d cannot connect "
                           "to rank %d: %s; check UCX_TLS and "
                           "UCX_NET_DEVICES", ucx->base.rank, peer,
                           ucs_status_string(st));
    }
    ucx->ep_state[peer] = TACL_UCX_EP_OPEN;
    TACL_TRACE(NET, "rank %d: connected to rank %d", ucx->base.rank, peer);
    *ep_p = ucx->eps[peer];
    return TACL_OK;
}

void tacl__ucx_close_eps(tacl__ucx_t *ucx, unsigned flags)
{
    for (int r = 0; r < ucx->base.nranks; ++r) {
        ucp_request_param_t param = {0};
        void *req;

        if (ucx->ep_state[r] != TACL_UCX_EP_OPEN &&
            ucx->ep_state[r] != TACL_UCX_EP_FAILED)
            continue;
        param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
        /* A failed endpoint can only be closed by force. */
        param.flags = ucx->ep_state[r] == TACL_UCX_EP_FAILED
                          ? UCP_EP_CLOSE_FLAG_FORCE : flags;
        ucx->ep_state[r] = TACL_UCX_EP_CLOSED;
        req = ucp_ep_close_nbx(ucx->eps[r], &param);
        ucx->eps[r] = NULL;
        if (UCS_PTR_IS_PTR(req))
            ucx->close_reqs[r] = req;
    }
}
