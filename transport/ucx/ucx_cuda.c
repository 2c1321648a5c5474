/*
 * CUDA device memory across nodes: the ucx side of the staging through
 * pinned host chunks (transport/stage.c has the design), which posts
 * its chunks through the host data path (ucx_ops.c).  A receive chunk is
 * taken only once it has arrived: ucp_tag_probe_nb finds it (and takes
 * it off UCX's queue), and it is received from the handle the probe
 * gave.  This file builds on the endpoints (ucx_ep.c) and ucx_ops.c.
 */
#include "common.h"
#include "config.h"
#include "log.h"
#include "ucx.h"

static tacl_status_t net_post(tacl__tl_base_t *tl, tacl__tl_op_t *op,
                              int recv)
{
    return tacl__ucx_post((tacl__ucx_t *)tl, op, recv);
}

static int net_arrived(tacl__tl_base_t *tl, int peer, uint64_t tag,
                       uint64_t *len, void **handle)
{
    tacl__ucx_t *ucx = (tacl__ucx_t *)tl;
    ucp_tag_recv_info_t info;
    ucp_tag_message_h msg;

    msg = ucp_tag_probe_nb(ucx->worker, tacl__ucx_tag(peer, tag),
                           TACL_UCX_TAG_MASK, 1, &info);
    if (msg == NULL) {
        if (ucx->ep_state[peer] != TACL_UCX_EP_OPEN)
            return tacl__error_peer(peer, NET, "rank %d: receive from "
                                    "rank %d, whose connection was lost",
                                    ucx->base.rank, peer);
        return 0;
    }
    *len = info.length;
    *handle = msg;
    return 1;
}

static tacl_status_t net_take(tacl__tl_base_t *tl, tacl__tl_op_t *op,
                              void *handle)
{
    return tacl__ucx_msg_recv((tacl__ucx_t *)tl, op, handle);
}

static tacl_status_t net_can_send(tacl__tl_base_t *tl, int peer)
{
    ucp_ep_h ep;

    return tacl__ucx_get_ep((tacl__ucx_t *)tl, peer, &ep);
}

static const tacl__stage_net_t ucx_net = {
    .post = net_post,
    .arrived = net_arrived,
    .take = net_take,
    .can_send = net_can_send,
    .name = "ucx",
};

int tacl__ucx_stage_init(tacl__ucx_t *ucx)
{
    ucx->stage = tacl__stage_new(
        &ucx->base, &ucx_net, tacl__config_size(TACL_CFG_NET_CUDA_CHUNK),
        tacl__config_int(TACL_CFG_NET_CUDA_CHUNKS));
    return ucx->stage != NULL;
}
