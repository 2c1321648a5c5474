/*
 * The ofi transport's peers: control messages and liveness.  DESIGN.md,
 * "Transports": a dead peer becomes an error naming it, never a hang.
 *
 * A reliable-datagram endpoint has no connection whose loss tacl could
 * watch, and a receive from any address never learns that its sender
 * died.  So an instance watches the peers it waits on itself: when an
 * operation with a peer has been pending for ping_ns (a tenth of the
 * instance's timeout, between 100 ms and 1 s), it sends that peer a
 * small untagged control message, a ping, and again every ping_ns while
 * operations stay pending.  A ping needs nothing of the peer's software
 * to complete (tcp: the kernel takes it; EFA: the device acknowledges
 * it), so a provider either fails it (EFA: the peer is unreachable; tcp:
 * the connection is reset) or completes it quickly; one still in flight
 * after dead_ns (a quarter of the timeout) means the peer is gone (over
 * tcp, ofi_rxm retries a refused connection forever).  Either fails the
 * instance with an error naming the peer, within about a third of the
 * timeout.  A ping can also wait behind the data queued before it: a
 * link that needs more than dead_ns for that is reported as a dead peer.
 * With several rails a ping goes on every rail the two ranks share, as
 * pieces of a striped message may wait on any: a cut rail is a ping
 * that does not go out, and the error names the peer and the rail.
 *
 * At close an instance says goodbye to every peer it exchanged messages
 * with.  The goodbye travels after that peer's last messages (FI_ORDER_SAS
 * holds for untagged and tagged sends alike), so whatever it sent has
 * arrived when its goodbye does: a peer that left with nothing pending is
 * no error, a later send to it fails at once, and a receive from it ends
 * unless a message already here matches it.  A goodbye from a peer with
 * operations pending fails the instance, naming it.  Goodbyes go on rail
 * 0 alone: pieces on other rails travel by rendezvous (striping starts at
 * TACL_OFI_STRIPE_FLOOR), whose send completes only once the receiver
 * has the data, so nothing of a closed peer is still in flight there.
 *
 * Control messages are two words: their kind and the sender's rank.
 * This file posts them through ofi_ops.c and calls nothing else.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include "common.h"
#include "log.h"
#include "ofi.h"

enum { CTRL_PING = 1, CTRL_BYE = 2 };

static void ctrl_recv_done(tacl__ofi_t *ofi, tacl__ofi_req_t *req,
                           tacl_status_t status);

/* Post one control receive on rail. */
static tacl_status_t post_ctrl_recv(tacl__ofi_t *ofi, int rail)
{
    tacl__ofi_req_t *req = tacl__ofi_req_get(ofi);
    tacl_status_t status;

    if (req == NULL)
        return TACL_ERR_NO_MEMORY;
    req->kind = TACL_OFI_REQ_CTRL_RECV;
    req->rail = (uint8_t)rail;
    req->buf = req->msg;
    req->len = sizeof(req->msg);
    req->ctrl_done = ctrl_recv_done;
    status = tacl__ofi_post(ofi, req);
    if (status != TACL_OK)
        tacl__ofi_req_put(ofi, req);
    return status;
}

/* The peer said goodbye. */
static void peer_gone(tacl__ofi_t *ofi, int src)
{
    tacl__ofi_peer_t *peer = &ofi->peers[src];

    peer->state = TACL_OFI_PEER_GONE;
    if (peer->npending == 0) {
        TACL_INFO(NET, "rank %d: rank %d closed its transport with nothing "
                  "pending", ofi->base.rank, src);
        return;
    }
    tacl__tl_base_mark_failed(&ofi->base, tacl__error_peer(
        src, NET, "rank %d: rank %d closed its transport while %u "
        "operations with it were pending; check that process's output",
        ofi->base.rank, src, peer->npending));
}

static void ctrl_recv_done(tacl__ofi_t *ofi, tacl__ofi_req_t *req,
                           tacl_status_t status)
{
    uint64_t kind = req->msg[0], src = req->msg[1];
    uint64_t len = req->len;
    int rail = req->rail;

    tacl__ofi_req_put(ofi, req);
    if (status != TACL_OK || !tacl__ofi_live(ofi))
        return;
    if (len != sizeof(req->msg) || src >= (uint64_t)ofi->base.nranks ||
        (kind != CTRL_PING && kind != CTRL_BYE)) {
        TACL_WARN(NET, "rank %d: dropped a malformed control message "
                  "(%llu bytes, kind %llu, rank %llu)", ofi->base.rank,
                  (unsigned long long)len, (unsigned long long)kind,
                  (unsigned long long)src);
    } else if (kind == CTRL_BYE) {
        peer_gone(ofi, (int)src);
    } else if (ofi->peers[src].state == TACL_OFI_PEER_UNKNOWN) {
        ofi->peers[src].state = TACL_OFI_PEER_TALKED;
    }
    if (!ofi->closing && post_ctrl_recv(ofi, rail) != TACL_OK)
        TACL_WARN(NET, "rank %d: cannot post a control receive; a dead "
                  "peer may be noticed late", ofi->base.rank);
}

tacl_status_t tacl__ofi_ctrl_start(tacl__ofi_t *ofi)
{
    for (int r = 0; r < ofi->nrails; ++r)
        for (int i = 0; i < TACL_OFI_CTRL_RECVS; ++i) {
            tacl_status_t status = post_ctrl_recv(ofi, r);

            if (status != TACL_OK)
                return status;
        }
    return TACL_OK;
}

/* A control message sent (or failed: ofi_ops.c decided that error). */
static void ctrl_send_done(tacl__ofi_t *ofi, tacl__ofi_req_t *req,
                           tacl_status_t status)
{
    (void)status;
    ofi->peers[req->peer].pinging &= (uint8_t)~(1u << req->rail);
    tacl__ofi_req_put(ofi, req);
}

static tacl_status_t send_ctrl(tacl__ofi_t *ofi, int peer, uint64_t kind,
                               int rail)
{
    tacl__ofi_req_t *req = tacl__ofi_req_get(ofi);
    tacl_status_t status;

    if (req == NULL)
        return TACL_ERR_NO_MEMORY;
    req->kind = TACL_OFI_REQ_CTRL_SEND;
    req->peer = peer;
    req->rail = (uint8_t)rail;
    req->msg[0] = kind;
    req->msg[1] = (uint64_t)ofi->base.rank;
    req->buf = req->msg;
    req->len = sizeof(req->msg);
    req->ctrl_done = ctrl_send_done;
    status = tacl__ofi_post(ofi, req);
    if (status != TACL_OK) {
        tacl__ofi_req_put(ofi, req);
        return status;
    }
    ofi->peers[peer].pinging |= (uint8_t)(1u << rail);
    ofi->peers[peer].ping_ns = tacl__now_ns();
    return TACL_OK;
}

/* Ping peer r on every rail both have; 0, or the status of a refusal. */
static tacl_status_t ping_rails(tacl__ofi_t *ofi, int r)
{
    int n = TACL_MIN(ofi->nrails, (int)ofi->peers[r].nrails);
    tacl_status_t status = TACL_OK;

    for (int rail = 0; rail < TACL_MAX(n, 1) && status == TACL_OK; ++rail)
        status = send_ctrl(ofi, r, CTRL_PING, rail);
    return status;
}

/* The lowest rail whose ping to peer is still in flight. */
static int stuck_rail(const tacl__ofi_peer_t *peer)
{
    int rail = 0;

    while (rail < TACL_OFI_MAX_RAILS && !(peer->pinging & (1u << rail)))
        ++rail;
    return rail;
}

/* End receives posted after their peer left, unless they matched. */
static int end_late_receives(tacl__ofi_t *ofi)
{
    int events = 0;

    for (tacl__ofi_req_t *req = ofi->pending.head; req; req = req->next) {
        if (!(req->flags & TACL_OFI_REQ_F_LATE))
            continue;
        req->flags &= (uint8_t)~TACL_OFI_REQ_F_LATE;
        req->status = tacl__error_peer(req->peer, NET, "rank %d: receive "
                                       "from rank %d, which closed its "
                                       "transport", ofi->base.rank,
                                       req->peer);
        /* Its completion, cancelled or not, comes through the queue. */
        fi_cancel(&ofi->rails[req->rail].ep->fid, &req->ctx);
        ++events;
    }
    return events;
}

int tacl__ofi_check_peers(tacl__ofi_t *ofi)
{
    uint64_t now;
    int events = 0;

    if (!tacl__ofi_live(ofi) || ofi->nops == 0)
        return 0;
    now = tacl__now_ns();
    if (now < ofi->next_check_ns)
        return 0;
    ofi->next_check_ns = now + ofi->ping_ns / 4;
    events += end_late_receives(ofi);
    for (int r = 0; r < ofi->base.nranks; ++r) {
        tacl__ofi_peer_t *peer = &ofi->peers[r];

        if (peer->pinging && peer->npending > 0 &&
            now - peer->ping_ns > ofi->dead_ns) {
            char rail[64] = "";
            int stuck = stuck_rail(peer);

            if (ofi->nrails > 1)
                snprintf(rail, sizeof(rail), " on rail %d (%s)", stuck,
                         ofi->rail_names[stuck]);
            tacl__tl_base_mark_failed(&ofi->base, tacl__error_peer(
                r, NET, "rank %d: rank %d is gone: a message to it%s has "
                "not gone out in %.1f s, with %u operations waiting on it; "
                "check that process's output and its node",
                ofi->base.rank, r, rail, (now - peer->ping_ns) * 1e-9,
                peer->npending));
            return events + 1;
        }
        if (peer->npending == 0 || peer->pinging ||
            peer->state == TACL_OFI_PEER_GONE ||
            now - peer->since_ns < ofi->ping_ns)
            continue;
        peer->since_ns = now;
        TACL_TRACE(NET, "rank %d: pinging rank %d, which %u operations "
                   "wait on", ofi->base.rank, r, peer->npending);
        if (ping_rails(ofi, r) != TACL_OK)
            tacl__tl_base_mark_failed(&ofi->base, tacl__error_peer(
                r, NET, "rank %d cannot ping rank %d, which %u operations "
                "wait on", ofi->base.rank, r, peer->npending));
    }
    return events;
}

void tacl__ofi_say_goodbye(tacl__ofi_t *ofi, double max_s)
{
    uint64_t deadline = tacl__now_ns() + (uint64_t)(max_s * 1e9);
    int left;

    if (!tacl__ofi_live(ofi) || ofi->base.failed != TACL_OK)
        return;
    for (int r = 0; r < ofi->base.nranks; ++r)
        if (ofi->peers[r].state == TACL_OFI_PEER_TALKED)
            send_ctrl(ofi, r, CTRL_BYE, 0);
    do {
        tacl__ofi_poll(ofi);
        left = 0;
        for (int r = 0; r < ofi->base.nranks; ++r)
            left += ofi->peers[r].pinging != 0;
    } while (left > 0 && tacl__ofi_live(ofi) && tacl__now_ns() < deadline);
    if (left > 0)
        TACL_INFO(NET, "rank %d: %d goodbyes not sent within %.1f s",
                  ofi->base.rank, left, max_s);
}
