/*
 * The ofi transport's peers: control messages and liveness.  DESIGN.md,
 * "Transports": a dead peer becomes an error naming it, never a hang.
 *
 * A reliable-datagram endpoint has no connection whose loss tacl could
 * watch, and a receive from any address never learns that its sender
 * died.  So an instance watches the peers it waits on itself (posted
 * operations, and a staged device receive whose first chunk has not
 * come: tacl__ofi_arrived): when an
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
 * pieces of a striped message may wait on any, and the peer answers
 * each on the rail it came by.  A cut rail is a ping that does not go
 * out, or, when the kernel took it, one the peer answers on its other
 * rails but not on that one for dead_ns: the peer is alive and
 * progressing, so only that rail can be at fault.  Either error names
 * the peer and the rail.  A peer that answers on no rail may be busy
 * outside tacl; that is left to the communicator's timeout.  No new
 * round starts while one still waits for an answer, and an answer
 * carries its round, so a late one is not taken for the next's.
 *
 * At close an instance says goodbye to every peer it exchanged messages
 * with.  The goodbye travels after that peer's last messages (FI_ORDER_SAS
 * holds for untagged and tagged sends alike), so whatever it sent has
 * arrived when its goodbye does: a peer that left with nothing pending is
 * no error, a later send to it fails at once, and a receive from it ends
 * unless a message already here matches it.  A goodbye from a peer with
 * operations pending fails the instance, naming it.  Goodbyes go on rail
 * 0 alone: pieces on other rails travel by rendezvous (striping starts at
 * TACL_OFI_STRIPE_FLOOR, pieces are even and a piece limit is at least
 * TACL_OFI_PIECE_FLOOR, so they stay above eager sizes), whose send
 * completes only once the receiver has the data, so nothing of a closed
 * peer is still in flight there.
 *
 * Control messages are two words: their kind (with a ping's round in
 * bits 8-15) and the sender's rank.
 * This file posts them through ofi_ops.c and calls nothing else.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include "common.h"
#include "log.h"
#include "ofi.h"

enum { CTRL_PING = 1, CTRL_BYE = 2, CTRL_ANSWER = 3 };
#define CTRL_KIND(word) ((word) & 0xffu)
#define CTRL_ROUND(word) ((uint8_t)((word) >> 8))

static void ctrl_recv_done(tacl__ofi_t *ofi, tacl__ofi_req_t *req,
                           tacl_status_t status);
static tacl_status_t send_ctrl(tacl__ofi_t *ofi, int peer, uint64_t kind,
                               int rail);

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
        CTRL_KIND(kind) < CTRL_PING || CTRL_KIND(kind) > CTRL_ANSWER) {
        TACL_WARN(NET, "rank %d: dropped a malformed control message "
                  "(%llu bytes, kind %llu, rank %llu)", ofi->base.rank,
                  (unsigned long long)len, (unsigned long long)kind,
                  (unsigned long long)src);
    } else if (CTRL_KIND(kind) == CTRL_BYE) {
        peer_gone(ofi, (int)src);
    } else if (CTRL_KIND(kind) == CTRL_ANSWER) {
        if (CTRL_ROUND(kind) == ofi->peers[src].round)
            ofi->peers[src].unanswered &= (uint8_t)~(1u << rail);
    } else {
        if (ofi->peers[src].state == TACL_OFI_PEER_UNKNOWN)
            ofi->peers[src].state = TACL_OFI_PEER_TALKED;
        if (!ofi->closing && send_ctrl(ofi, (int)src, CTRL_ANSWER |
                                       (kind & 0xff00u), rail) != TACL_OK)
            TACL_WARN(NET, "rank %d: cannot answer rank %d's ping on "
                      "rail %d", ofi->base.rank, (int)src, rail);
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
    if (ofi->peers[peer].pinging == 0)
        ofi->peers[peer].ping_ns = tacl__now_ns();
    ofi->peers[peer].pinging |= (uint8_t)(1u << rail);
    return TACL_OK;
}

/* The rails this rank and peer r both opened, as a mask. */
static unsigned shared_rails(const tacl__ofi_t *ofi, int r)
{
    int n = TACL_MIN(ofi->nrails, (int)ofi->peers[r].nrails);

    return (1u << TACL_MAX(n, 1)) - 1;
}

/* Ping peer r on every rail both have, as a new round; 0, or the status
 * of a refusal. */
static tacl_status_t ping_rails(tacl__ofi_t *ofi, int r)
{
    tacl__ofi_peer_t *peer = &ofi->peers[r];
    unsigned rails = shared_rails(ofi, r);
    tacl_status_t status = TACL_OK;

    peer->round++;
    peer->unanswered = (uint8_t)rails;
    peer->round_ns = tacl__now_ns();
    for (int rail = 0; (rails >> rail) != 0 && status == TACL_OK; ++rail)
        status = send_ctrl(ofi, r, CTRL_PING | (uint64_t)peer->round << 8,
                           rail);
    return status;
}

/* The lowest rail set in mask. */
static int lowest_rail(unsigned mask)
{
    int rail = 0;

    while (rail < TACL_OFI_MAX_RAILS && !(mask & (1u << rail)))
        ++rail;
    return rail;
}

/* Whether peer r answered this round's ping on some rails but not on
 * every one: the peer progresses, so the others are cut. */
static int answered_in_part(const tacl__ofi_t *ofi, int r)
{
    unsigned waiting = ofi->peers[r].unanswered;

    return waiting != 0 && waiting != shared_rails(ofi, r);
}

/* Fail the instance: a control message to peer r, which waiting
 * operations wait on, on rail has not gone out in waited_ns. */
static void fail_stuck(tacl__ofi_t *ofi, int r, int rail, uint64_t waited_ns,
                       uint32_t waiting)
{
    char where[64] = "";

    if (ofi->nrails > 1)
        snprintf(where, sizeof(where), " on rail %d (%s)", rail,
                 ofi->rail_names[rail]);
    tacl__tl_base_mark_failed(&ofi->base, tacl__error_peer(
        r, NET, "rank %d: rank %d is gone: a message to it%s has not gone "
        "out in %.1f s, with %u operations waiting on it; check that "
        "process's output and its node", ofi->base.rank, r, where,
        waited_ns * 1e-9, waiting));
}

/* Fail the instance: peer r answered this round's pings on its other
 * rails but not on rail, for waited_ns. */
static void fail_unanswered(tacl__ofi_t *ofi, int r, int rail,
                            uint64_t waited_ns, uint32_t waiting)
{
    tacl__tl_base_mark_failed(&ofi->base, tacl__error_peer(
        r, NET, "rank %d: rail %d (%s) to rank %d is cut: a ping on it had "
        "no answer in %.1f s, while the pings on the other rails had, with "
        "%u operations waiting on rank %d; check both nodes' links",
        ofi->base.rank, rail, ofi->rail_names[rail], r, waited_ns * 1e-9,
        waiting, r));
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

    if (!tacl__ofi_live(ofi) || ofi->base.failed != TACL_OK)
        return 0;
    now = tacl__now_ns();
    if (now < ofi->next_check_ns ||
        (ofi->nops == 0 && now - ofi->asked_ns >= ofi->ping_ns))
        return 0;
    ofi->next_check_ns = now + ofi->ping_ns / 4;
    events += end_late_receives(ofi);
    for (int r = 0; r < ofi->base.nranks; ++r) {
        tacl__ofi_peer_t *peer = &ofi->peers[r];
        /* Posted operations, and a staged receive still to begin. */
        uint32_t waiting = peer->npending +
                           (tacl__ofi_awaited(ofi, peer, now) ? 1u : 0u);

        if (waiting > 0 && peer->pinging &&
            now - peer->ping_ns > ofi->dead_ns) {
            fail_stuck(ofi, r, lowest_rail(peer->pinging),
                       now - peer->ping_ns, waiting);
            return events + 1;
        }
        if (waiting > 0 && answered_in_part(ofi, r) &&
            now - peer->round_ns > ofi->dead_ns) {
            fail_unanswered(ofi, r, lowest_rail(peer->unanswered),
                            now - peer->round_ns, waiting);
            return events + 1;
        }
        if (waiting == 0 || peer->pinging ||
            answered_in_part(ofi, r) ||
            peer->state == TACL_OFI_PEER_GONE ||
            now - peer->since_ns < ofi->ping_ns)
            continue;
        peer->since_ns = now;
        TACL_TRACE(NET, "rank %d: pinging rank %d, which %u operations "
                   "wait on", ofi->base.rank, r, waiting);
        if (ping_rails(ofi, r) != TACL_OK)
            tacl__tl_base_mark_failed(&ofi->base, tacl__error_peer(
                r, NET, "rank %d cannot ping rank %d, which %u operations "
                "wait on", ofi->base.rank, r, waiting));
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
