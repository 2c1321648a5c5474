/*
 * The ofi transport's data path: requests, posting with flow control,
 * reading completions, and failure.  DESIGN.md, "Transports": ofi moves
 * tagged messages between nodes, and a failure ends every operation
 * instead of leaving it waiting.
 *
 * A send goes out as fi_tsend with the sender's rank folded into the tag
 * (tl_base.h's wire tags); a receive as fi_trecv from any address with
 * the expected sender's tag and no ignored bits, so the provider's
 * matching gives (source, tag) order with FI_ORDER_SAS.  Where tacl
 * registers buffers (ofi_mr.c), a request holds its registration from
 * posting until it is put back.
 *
 * Pieces: a message goes as k pieces (tacl__ofi_piece) when it is
 * longer than the provider takes at once (piece_max: its max_msg_size,
 * or TACL_OFI_MAX_MSG where lower), or when it has at least
 * TACL_OFI_STRIPE_MIN bytes and its peer shares n >= 2 rails with this
 * rank: then k is a multiple of n and piece i goes on rail i mod n of
 * both ranks, so rail i of one pairs with rail i of the other and a
 * peer with fewer rails is reached on the ones both have.  One splitter
 * serves both reasons.  Sender and receiver decide alike from the
 * length, which they must agree on anyway, and from settings the setup
 * checked to be equal.  A piece's wire tag is the message's with
 * TACL_OFI_WIRE_PIECE set: the piece index needs no bits, nor a
 * per-peer message counter, since on each rail the provider matches a
 * sender's messages of one tag in sending order (FI_ORDER_SAS), and
 * both ranks post a message's pieces of one rail in index order, one
 * message after the other.  The bit keeps a receive of a whole message
 * off the pieces: a length mismatch across a threshold is no match at
 * all (the peers then wait until the no-progress timeout), never half a
 * message.  The operation counts its pieces out in its transport words
 * (TACL_OFI_OP_LEFT) and ends when the last does, with the first error
 * of any.
 *
 * The first piece carries the message's length as completion data
 * (fi_tsenddata), for a receive from any source: its peek, which
 * ignores the piece bit, finds on rail 0 the oldest whole message or
 * first piece of a tag, and a first piece tells the sender (in the
 * tag) and the length (in the data), from which the receive's other
 * pieces follow.  A later piece of that message is never the oldest
 * there: the receive posted for the first posts the others at once, and
 * a later peek reaches the provider after them (a backlog keeps the
 * posting order).
 *
 * Flow control: a request goes to the provider only while it holds fewer
 * of that side's requests than fi_info's tx or rx size, and only when no
 * earlier one waits on that side's backlog; a request the provider
 * refuses with -FI_EAGAIN waits there too.  tacl__ofi_poll() reads the
 * completions and then posts what the backlogs hold, oldest first, while
 * there is room.  Nothing here calls a tacl callback: finished operations
 * go to the done queue, which progress() runs (ofi.c).
 *
 * This file builds on ofi_info.c alone (for nothing but the layout);
 * the control messages of ofi_peer.c are requests like any other, their
 * completion handed to the function the request names.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "log.h"
#include "ofi.h"

/* Completions read per fi_cq_read, and batches one poll reads at most. */
#define TACL_OFI_CQ_BATCH 16
#define TACL_OFI_CQ_BUDGET 8

/* What a zero-length message points at. */
static char empty_buf[1];

tacl__ofi_req_t *tacl__ofi_req_get(tacl__ofi_t *ofi)
{
    tacl__ofi_req_t *req = ofi->free_reqs;

    if (req != NULL)
        ofi->free_reqs = req->next;
    else
        req = malloc(sizeof(*req));
    if (req == NULL) {
        tacl__error(TACL_ERR_NO_MEMORY, NET, "out of memory for a request");
        return NULL;
    }
    memset(req, 0, sizeof(*req));
    req->peer = -1;
    return req;
}

void tacl__ofi_req_put(tacl__ofi_t *ofi, tacl__ofi_req_t *req)
{
    tacl__ofi_mr_put(ofi, req);
    req->next = ofi->free_reqs;
    ofi->free_reqs = req;
}

void tacl__ofi_reqq_push(tacl__ofi_reqq_t *q, tacl__ofi_req_t *req)
{
    req->next = NULL;
    req->prev = q->tail;
    if (q->tail)
        q->tail->next = req;
    else
        q->head = req;
    q->tail = req;
    ++q->count;
}

void tacl__ofi_reqq_remove(tacl__ofi_reqq_t *q, tacl__ofi_req_t *req)
{
    if (req->prev)
        req->prev->next = req->next;
    else
        q->head = req->next;
    if (req->next)
        req->next->prev = req->prev;
    else
        q->tail = req->prev;
    req->prev = req->next = NULL;
    --q->count;
}

static int is_send(const tacl__ofi_req_t *req)
{
    return req->kind == TACL_OFI_REQ_SEND ||
           req->kind == TACL_OFI_REQ_CTRL_SEND;
}

/* What a request is, for messages: "send to", "receive from", ... */
static const char *req_what(const tacl__ofi_req_t *req)
{
    switch (req->kind) {
    case TACL_OFI_REQ_SEND:
        return "send to";
    case TACL_OFI_REQ_RECV:
        return "receive from";
    case TACL_OFI_REQ_CTRL_SEND:
        return "control message to";
    case TACL_OFI_REQ_PEEK:
        return "look for a message from";
    default:
        return "control receive from";
    }
}

/*
 * The look of a receive from any source: a peek for the oldest message
 * with the tag from any sender (the source bits of the wire tag
 * ignored), or from the sender req names (staging's look for a chunk).
 * It takes nothing: the receive posted next for the sender and tag it
 * names matches that message by (source, tag) order.
 */
static ssize_t issue_peek(tacl__ofi_t *ofi, tacl__ofi_req_t *req)
{
    struct fi_msg_tagged msg = {0};

    msg.addr = FI_ADDR_UNSPEC;
    msg.context = &req->ctx;
    msg.tag = tacl__tl_wire_tag(TACL_MAX(req->peer, 0), req->msg[0]);
    /* A whole message or a first piece; from any sender unless named. */
    msg.ignore = req->peer < 0 ? ~TACL__TL_WIRE_ANY_SRC
                               : TACL_OFI_WIRE_PIECE;
    return fi_trecvmsg(ofi->rails[0].ep, &msg, FI_COMPLETION | FI_PEEK);
}

/* Hand req to the provider: 0, -FI_EAGAIN, or another error. */
static ssize_t issue(tacl__ofi_t *ofi, tacl__ofi_req_t *req)
{
    const tacl__ofi_rail_t *rail = &ofi->rails[req->rail];
    void *desc = tacl__ofi_mr_desc(req);
    fi_addr_t to = req->peer >= 0 ? rail->addrs[req->peer] : 0;
    uint64_t piece = (req->flags & TACL_OFI_REQ_F_PIECE) ? TACL_OFI_WIRE_PIECE
                                                         : 0;

    switch (req->kind) {
    case TACL_OFI_REQ_PEEK:
        return issue_peek(ofi, req);
    case TACL_OFI_REQ_SEND:
        if ((req->flags & TACL_OFI_REQ_F_FIRST) &&
            req->op->len <= ofi->data_max)
            return fi_tsenddata(rail->ep, req->buf, req->len, desc,
                                req->op->len, to,
                                tacl__tl_wire_tag(ofi->base.rank,
                                                  req->op->tag) |
                                    piece,
                                &req->ctx);
        return fi_tsend(rail->ep, req->buf, req->len, desc, to,
                        tacl__tl_wire_tag(ofi->base.rank, req->op->tag) |
                            piece,
                        &req->ctx);
    case TACL_OFI_REQ_RECV:
        return fi_trecv(rail->ep, req->buf, req->len, desc, FI_ADDR_UNSPEC,
                        tacl__tl_wire_tag(req->peer, req->op->tag) | piece,
                        0, &req->ctx);
    case TACL_OFI_REQ_CTRL_SEND:
        return fi_send(rail->ep, req->buf, req->len, desc, to, &req->ctx);
    default:
        return fi_recv(rail->ep, req->buf, req->len, desc, FI_ADDR_UNSPEC,
                       &req->ctx);
    }
}

/* The provider took req: it is pending. */
static void now_pending(tacl__ofi_t *ofi, tacl__ofi_req_t *req)
{
    req->flags |= TACL_OFI_REQ_F_PENDING;
    tacl__ofi_reqq_push(&ofi->pending, req);
    if (is_send(req))
        ++ofi->ntx;
    else
        ++ofi->nrx;
}

tacl_status_t tacl__ofi_post(tacl__ofi_t *ofi, tacl__ofi_req_t *req)
{
    int send = is_send(req);
    tacl__ofi_reqq_t *backlog = send ? &ofi->backlog_tx : &ofi->backlog_rx;
    uint64_t held = send ? ofi->ntx : ofi->nrx;
    uint64_t room = send ? ofi->tx_size : ofi->rx_size;
    tacl_status_t status;
    ssize_t rc;

    if (req->len == 0)
        req->buf = empty_buf;
    status = req->kind == TACL_OFI_REQ_PEEK
                 ? TACL_OK
                 : tacl__ofi_mr_get(ofi, req,
                                    req->op != NULL &&
                                        req->op->memtype == TACL_MEM_CUDA);
    if (status != TACL_OK)
        return status;
    if (backlog->head != NULL || held >= room) {
        tacl__ofi_reqq_push(backlog, req);
        return TACL_OK;
    }
    rc = issue(ofi, req);
    if (rc == -FI_EAGAIN) {
        tacl__ofi_reqq_push(backlog, req);
        return TACL_OK;
    }
    if (rc != 0)
        return tacl__error_peer(req->peer, NET, "rank %d cannot post a %s "
                                "rank %d: %s", ofi->base.rank, req_what(req),
                                req->peer, tacl__ofi_strerror(rc));
    now_pending(ofi, req);
    return TACL_OK;
}

/* The message a peek found from op's peer with op's tag, the oldest,
 * or NULL: op's receive matches it. */
static tacl__ofi_req_t *found_for(const tacl__ofi_t *ofi,
                                  const tacl__tl_op_t *op)
{
    for (tacl__ofi_req_t *req = ofi->found.head; req; req = req->next)
        if (req->peer == op->peer && req->msg[0] == op->tag)
            return req;
    return NULL;
}

/* The rails a message of op's length to its peer is spread over: those
 * both ranks opened, from stripe_min up; else rail 0 alone. */
static int rails_of(const tacl__ofi_t *ofi, const tacl__tl_op_t *op)
{
    int n = TACL_MIN(ofi->nrails, (int)ofi->peers[op->peer].nrails);

    return n >= 2 && op->len >= ofi->stripe_min ? n : 1;
}

/*
 * How many pieces op goes as: 1 (whole), or a multiple of its rails,
 * so each carries as many, with none longer than piece_max (a multiple
 * of TACL_OFI_PIECE_ALIGN, so aligned pieces stay within it).
 */
static uint64_t pieces_of(const tacl__ofi_t *ofi, const tacl__tl_op_t *op)
{
    uint64_t n = (uint64_t)rails_of(ofi, op);
    uint64_t k = TACL_MAX(TACL_DIV_UP(op->len, ofi->piece_max), 1);

    return TACL_DIV_UP(k, n) * n;
}

/*
 * Post pieces 1..k-1 of op (piece 0 is posted).  A piece the provider
 * refuses at once cannot be taken back from the others: its error is
 * the operation's, and failing the instance ends the pieces posted.
 */
static void post_pieces(tacl__ofi_t *ofi, tacl__tl_op_t *op, uint64_t k,
                        int recv)
{
    uint8_t late = recv && ofi->peers[op->peer].state == TACL_OFI_PEER_GONE
                       ? TACL_OFI_REQ_F_LATE
                       : 0;
    uint64_t n = (uint64_t)rails_of(ofi, op);

    for (uint64_t i = 1; i < k; ++i) {
        tacl__ofi_req_t *req = tacl__ofi_req_get(ofi);
        tacl_status_t status = req != NULL ? TACL_OK : TACL_ERR_NO_MEMORY;
        uint64_t off;

        if (req != NULL) {
            req->kind = recv ? TACL_OFI_REQ_RECV : TACL_OFI_REQ_SEND;
            /* Every piece of a receive from a peer gone ends alike. */
            req->flags = TACL_OFI_REQ_F_PIECE | late;
            req->op = op;
            req->peer = op->peer;
            req->rail = (uint8_t)(i % n);
            tacl__ofi_piece(op->len, k, i, &off, &req->len);
            req->buf = (char *)op->buf + off;
            status = tacl__ofi_post(ofi, req);
            if (status != TACL_OK)
                tacl__ofi_req_put(ofi, req);
        }
        if (status == TACL_OK)
            continue;
        TACL_OFI_OP_STATUS(op) = (uint64_t)(int64_t)status;
        TACL_OFI_OP_LEFT(op) -= k - i;
        tacl__tl_base_mark_failed(&ofi->base, status);
        return;
    }
}

/*
 * Whether receive op may take the message a peek found (req): a whole
 * message may (a length that differs is the provider's error, as for
 * any receive); a split one only with the length its first piece
 * announced, since the pieces follow from it.  Another length is
 * refused here, the message left found.
 */
static tacl_status_t found_fits(const tacl__ofi_req_t *req,
                                const tacl__tl_op_t *op)
{
    if (!(req->flags & TACL_OFI_REQ_F_FIRST) || req->msg[1] == op->len)
        return TACL_OK;
    return tacl__tl_length_error(op->peer, op->tag, req->msg[1], 0, op->len,
                                 TACL_SUBSYS_NET);
}

static void deferred_remove(tacl__ofi_t *ofi, tacl__tl_op_t *op)
{
    tacl__tl_op_t **p = &ofi->deferred;

    while (*p != NULL && *p != op)
        p = (tacl__tl_op_t **)(uintptr_t)&TACL_OFI_OP_NEXT(*p);
    if (*p == op)
        *p = (tacl__tl_op_t *)(uintptr_t)TACL_OFI_OP_NEXT(op);
    TACL_OFI_OP_DEFERRED(op) = 0;
}

/*
 * Post now the other pieces of every deferred receive with tag from
 * peer (any peer if -1): before a later receive of pieces with the same
 * sender and tag, whose pieces the provider would otherwise match to
 * this one's, and before a peek, which would otherwise find a piece of
 * it that came.
 */
static void undefer(tacl__ofi_t *ofi, int peer, uint64_t tag)
{
    tacl__tl_op_t *op = ofi->deferred, *next;

    for (; op != NULL; op = next) {
        next = (tacl__tl_op_t *)(uintptr_t)TACL_OFI_OP_NEXT(op);
        if (op->tag != tag || (peer >= 0 && op->peer != peer))
            continue;
        deferred_remove(ofi, op);
        post_pieces(ofi, op, pieces_of(ofi, op), 1);
    }
}

/* Whether the ranks leave room for the piece bit in the wire tag. */
static tacl_status_t check_split(const tacl__ofi_t *ofi,
                                 const tacl__tl_op_t *op, uint64_t k)
{
    if (k == 1 || ofi->base.nranks <= (1 << 15))
        return TACL_OK;
    return tacl__error(TACL_ERR_UNSUPPORTED, NET, "rank %d: a message of "
                       "%llu bytes goes as %llu pieces, which ofi serves "
                       "for at most %d ranks, not %d; raise "
                       "TACL_OFI_STRIPE_MIN or TACL_OFI_MAX_MSG",
                       ofi->base.rank, (unsigned long long)op->len,
                       (unsigned long long)k, 1 << 15, ofi->base.nranks);
}

tacl_status_t tacl__ofi_post_op(tacl__ofi_t *ofi, tacl__tl_op_t *op,
                                int recv)
{
    tacl_status_t status = tacl__tl_base_check(&ofi->base, op);
    tacl__ofi_peer_t *peer;
    tacl__ofi_req_t *req;
    uint64_t k;
    int defer;

    if (status != TACL_OK)
        return status;
    peer = &ofi->peers[op->peer];
    if (peer->state == TACL_OFI_PEER_GONE && !recv)
        return tacl__error_peer(op->peer, NET, "rank %d: send to rank %d, "
                                "which closed its transport",
                                ofi->base.rank, op->peer);
    k = pieces_of(ofi, op);
    status = check_split(ofi, op, k);
    if (status != TACL_OK)
        return status;
    if (recv && k > 1)
        undefer(ofi, op->peer, op->tag);
    req = recv ? found_for(ofi, op) : NULL;
    if (req != NULL) {
        status = found_fits(req, op);
        if (status != TACL_OK)
            return status;
        tacl__ofi_reqq_remove(&ofi->found, req);
        tacl__ofi_req_put(ofi, req);
    }
    /* A receive's other pieces wait for its first (first_piece_came),
     * unless a peek found the message: it is arriving, and no later peek
     * may find one of its pieces. */
    defer = recv && k > 1 && req == NULL;
    req = tacl__ofi_req_get(ofi);
    if (req == NULL)
        return TACL_ERR_NO_MEMORY;
    /* A receive from a peer gone can match only what is here. */
    if (recv && peer->state == TACL_OFI_PEER_GONE)
        req->flags |= TACL_OFI_REQ_F_LATE;
    req->kind = recv ? TACL_OFI_REQ_RECV : TACL_OFI_REQ_SEND;
    req->op = op;
    req->buf = op->buf;
    req->len = op->len;
    req->peer = op->peer;
    if (k > 1) {
        req->flags |= TACL_OFI_REQ_F_PIECE |
                      (recv ? 0 : TACL_OFI_REQ_F_FIRST);
        TACL_OFI_OP_DEFERRED(op) = 0;
        tacl__ofi_piece(op->len, k, 0, &(uint64_t){0}, &req->len);
        TACL_OFI_OP_LEFT(op) = k;
        TACL_OFI_OP_STATUS(op) = (uint64_t)(int64_t)TACL_OK;
    }
    status = tacl__ofi_post(ofi, req);
    if (status != TACL_OK) {
        tacl__ofi_req_put(ofi, req);
        return status;
    }
    if (peer->npending++ == 0)
        peer->since_ns = tacl__now_ns();
    ++ofi->nops;
    if (defer) {
        TACL_OFI_OP_DEFERRED(op) = 1;
        TACL_OFI_OP_NEXT(op) = (uint64_t)(uintptr_t)ofi->deferred;
        ofi->deferred = op;
    } else if (k > 1) {
        post_pieces(ofi, op, k, recv);
    }
    return TACL_OK;
}

/*
 * The first piece of a receive in pieces ended with status: the others
 * are posted now, or, if it failed, never (their count is taken off).
 * Posted all with the first, the pieces of messages still to come held
 * the provider's receive slots (fi_info's rx size), while the receive
 * of the message arriving now waited on the backlog behind them, and
 * the ranks waited on each other (a 2x2 ring all-reduce of 256 MB in
 * 16 KB pieces); now a message not yet arriving holds one slot.  The
 * copy is the same: rxm lands an eager message in its own buffer either
 * way.  If the first failed, pieces that arrive stay in the provider.
 */
static void first_piece_came(tacl__ofi_t *ofi, tacl__tl_op_t *op,
                             tacl_status_t status)
{
    uint64_t k = pieces_of(ofi, op);

    deferred_remove(ofi, op);
    if (status == TACL_OK && ofi->base.failed == TACL_OK) {
        post_pieces(ofi, op, k, 1);
        return;
    }
    TACL_OFI_OP_LEFT(op) -= k - 1;
}

/*
 * A piece of a striped operation ended with *status: put back, its
 * error kept if the first; 1, the operation's status in *status, when
 * it was the last.
 */
static int last_piece(tacl__ofi_t *ofi, tacl__ofi_req_t *req,
                      tacl_status_t *status)
{
    tacl__tl_op_t *op = req->op;

    if (*status != TACL_OK &&
        (tacl_status_t)(int64_t)TACL_OFI_OP_STATUS(op) == TACL_OK)
        TACL_OFI_OP_STATUS(op) = (uint64_t)(int64_t)*status;
    if (--TACL_OFI_OP_LEFT(op) > 0) {
        tacl__ofi_req_put(ofi, req);
        return 0;
    }
    *status = (tacl_status_t)(int64_t)TACL_OFI_OP_STATUS(op);
    return 1;
}

/*
 * req left the provider (or a backlog) with status: a tacl operation
 * completes through the done queue, a control request through its own
 * function.
 */
static void finish(tacl__ofi_t *ofi, tacl__ofi_req_t *req,
                   tacl_status_t status)
{
    tacl__tl_op_t *op = req->op;

    if (req->kind == TACL_OFI_REQ_CTRL_SEND ||
        req->kind == TACL_OFI_REQ_CTRL_RECV) {
        req->ctrl_done(ofi, req, status);
        return;
    }
    if (req->kind == TACL_OFI_REQ_PEEK) {
        /* Ended by a failure or by close: nobody waits on a peek. */
        ofi->peek = NULL;
        tacl__ofi_req_put(ofi, req);
        return;
    }
    /* While a receive is deferred its first piece is its only one. */
    if (req->kind == TACL_OFI_REQ_RECV &&
        (req->flags & TACL_OFI_REQ_F_PIECE) && TACL_OFI_OP_DEFERRED(op))
        first_piece_came(ofi, op, status);
    if ((req->flags & TACL_OFI_REQ_F_PIECE) &&
        !last_piece(ofi, req, &status))
        return;
    --ofi->peers[req->peer].npending;
    --ofi->nops;
    if (ofi->peers[req->peer].state == TACL_OFI_PEER_UNKNOWN)
        ofi->peers[req->peer].state = TACL_OFI_PEER_TALKED;
    tacl__ofi_req_put(ofi, req);
    tacl__tl_complete(&ofi->base, op, status);
}

/* Take req off the pending list. */
static void leave_pending(tacl__ofi_t *ofi, tacl__ofi_req_t *req)
{
    tacl__ofi_reqq_remove(&ofi->pending, req);
    req->flags &= (uint8_t)~TACL_OFI_REQ_F_PENDING;
    if (is_send(req))
        --ofi->ntx;
    else
        --ofi->nrx;
}

/*
 * The length of the message whose first piece a peek found (e): the
 * completion data the sender put there, or 0, decided and logged, where
 * it could not (a provider with fewer bytes of completion data than the
 * length needs).  ofi_rxm's peek hands the data over without setting
 * FI_REMOTE_CQ_DATA, so the flag is not asked for; a message split in
 * pieces is always longer than its first piece.
 */
static uint64_t first_piece_length(tacl__ofi_t *ofi, int peer,
                                   const struct fi_cq_tagged_entry *e)
{
    if (e->data > e->len)
        return e->data;
    tacl__tl_base_mark_failed(&ofi->base, tacl__error(
        TACL_ERR_UNSUPPORTED, NET, "rank %d: a receive from any source "
        "found a message of "
        "rank %d sent in pieces without its length (provider %s carries "
        "lengths up to %llu as completion data); name the sender, or raise "
        "TACL_OFI_STRIPE_MIN and TACL_OFI_MAX_MSG above the message",
        ofi->base.rank, peer, ofi->choice.provider,
        (unsigned long long)ofi->data_max));
    return 0;
}

/* A peek found a message, or the first piece of one: its sender and
 * length wait on the found list for the probe that reports them and the
 * receive that takes the message. */
static void peek_found(tacl__ofi_t *ofi, tacl__ofi_req_t *req,
                       const struct fi_cq_tagged_entry *e)
{
    ofi->peek = NULL;
    req->peer = tacl__tl_wire_src(e->tag & ~TACL_OFI_WIRE_PIECE);
    if (req->peer >= ofi->base.nranks)
        tacl__tl_base_mark_failed(
            &ofi->base,
            tacl__error(TACL_ERR_INTERNAL, NET,
                        "rank %d: a peek found a message of "
                        "rank %d, not a rank of %d",
                        ofi->base.rank, req->peer, ofi->base.nranks));
    req->len = e->len;
    if (e->tag & TACL_OFI_WIRE_PIECE) {
        req->flags |= TACL_OFI_REQ_F_FIRST;
        req->len = first_piece_length(ofi, req->peer, e);
    }
    req->msg[1] = req->len;
    tacl__ofi_reqq_push(&ofi->found, req);
}

/* The provider cannot peek (how: what it said): decided once, kept. */
static tacl_status_t peek_refused(tacl__ofi_t *ofi, const char *how)
{
    if (ofi->peek_failed == TACL_OK)
        ofi->peek_failed = tacl__error(
            TACL_ERR_UNSUPPORTED, NET,
            "rank %d: provider %s cannot look "
            "for a message from any source (fi_trecvmsg with FI_PEEK "
            "%s); name the sender, or set TACL_NET=ucx",
            ofi->base.rank, ofi->choice.provider, how);
    return ofi->peek_failed;
}

/*
 * A peek ended with an error: FI_ENOMSG, nothing there yet, is the
 * common answer (the next probe peeks again); any other means the
 * provider cannot peek, and every later probe fails with that.
 */
static void peek_error(tacl__ofi_t *ofi, tacl__ofi_req_t *req,
                       const struct fi_cq_err_entry *err)
{
    ofi->peek = NULL;
    if (err->err != FI_ENOMSG && err->err != FI_ECANCELED) {
        char how[96];

        snprintf(how, sizeof(how), "ended with %s", fi_strerror(err->err));
        peek_refused(ofi, how);
    }
    tacl__ofi_req_put(ofi, req);
}

/*
 * Finish the request of completion e; 1 if it was a message of tacl's,
 * 0 for a peek's answer or a control message.  Only the first kind is
 * progress: a ping goes out and completes every few tenths of a second
 * whether or not anything else moves (over a cut link too, since tcp
 * completes a send once the socket takes it), and counted as progress
 * it kept the communicator's no-progress timeout from ever firing.
 */
static int complete_ok(tacl__ofi_t *ofi, const struct fi_cq_tagged_entry *e)
{
    tacl__ofi_req_t *req = e->op_context;
    tacl_status_t status = TACL_OK;
    int data = req->kind == TACL_OFI_REQ_SEND ||
               req->kind == TACL_OFI_REQ_RECV;

    leave_pending(ofi, req);
    if (req->kind == TACL_OFI_REQ_PEEK) {
        peek_found(ofi, req, e);
        return 0;
    }
    if (req->kind == TACL_OFI_REQ_RECV && e->len != req->len)
        status = tacl__tl_length_error(req->peer, req->op->tag, e->len, 0,
                                       req->len, TACL_SUBSYS_NET);
    if (req->kind == TACL_OFI_REQ_CTRL_RECV)
        req->len = e->len;
    if (data) {
        ofi->rails[req->rail].bytes += req->len;
        ofi->rails[req->rail].msgs++;
    }
    finish(ofi, req, status);
    return data;
}

/* The status of a failed completion; decides the error once. */
static tacl_status_t error_status(tacl__ofi_t *ofi, tacl__ofi_req_t *req,
                                  const struct fi_cq_err_entry *err)
{
    char detail[160] = "", rail[64] = "";
    tacl_status_t status;

    /* A request we cancelled carries the status it ends with; one the
     * provider cancelled (a piece on a rail whose connection broke)
     * is the peer's failure below. */
    if (err->err == FI_ECANCELED && req->status != TACL_OK)
        return req->status;
    if (err->err == FI_ETRUNC && req->kind == TACL_OFI_REQ_RECV)
        return tacl__tl_length_error(req->peer, req->op->tag,
                                     req->len + err->olen, err->olen == 0,
                                     req->len, TACL_SUBSYS_NET);
    if (err->err == FI_ENOMEM)
        return tacl__error(TACL_ERR_NO_MEMORY, NET, "rank %d: the provider "
                           "ran out of memory in a %s rank %d",
                           ofi->base.rank, req_what(req), req->peer);
    if (err->prov_errno != 0)
        snprintf(detail, sizeof(detail), " (%s)",
                 fi_cq_strerror(ofi->rails[req->rail].cq, err->prov_errno,
                                err->err_data, NULL, 0));
    if (ofi->nrails > 1)
        snprintf(rail, sizeof(rail), " on rail %d (%s)", req->rail,
                 ofi->rail_names[req->rail]);
    status = req->peer >= 0
        ? tacl__error_peer(req->peer, NET, "rank %d: %s rank %d%s failed: "
                           "%s%s; check that process's output",
                           ofi->base.rank, req_what(req), req->peer, rail,
                           fi_strerror(err->err), detail)
        : tacl__error(TACL_ERR_REMOTE, NET, "rank %d: a %s a peer%s "
                      "failed: %s%s", ofi->base.rank, req_what(req), rail,
                      fi_strerror(err->err), detail);
    /* A broken connection breaks the whole instance. */
    tacl__tl_base_mark_failed(&ofi->base, status);
    return status;
}

/* Read one error completion of rail's queue; 1 when there was one. */
static int complete_error(tacl__ofi_t *ofi, struct fid_cq *cq)
{
    struct fi_cq_err_entry err;
    tacl__ofi_req_t *req;
    ssize_t rc;

    memset(&err, 0, sizeof(err));
    rc = fi_cq_readerr(cq, &err, 0);
    if (rc <= 0)
        return 0;
    req = err.op_context;
    if (req == NULL) {
        tacl__tl_base_mark_failed(&ofi->base, tacl__error(
            TACL_ERR_REMOTE, NET, "rank %d: the provider reported an error "
            "of no operation: %s", ofi->base.rank, fi_strerror(err.err)));
        return 1;
    }
    leave_pending(ofi, req);
    if (req->kind == TACL_OFI_REQ_PEEK)
        peek_error(ofi, req, &err);
    else
        finish(ofi, req, error_status(ofi, req, &err));
    return 1;
}

/* Post what the backlog q holds while the provider takes it. */
static int drain_backlog(tacl__ofi_t *ofi, tacl__ofi_reqq_t *q, int send)
{
    int events = 0;

    while (q->head != NULL && tacl__ofi_live(ofi) &&
           (send ? ofi->ntx < ofi->tx_size : ofi->nrx < ofi->rx_size)) {
        tacl__ofi_req_t *req = q->head;
        ssize_t rc = issue(ofi, req);

        if (rc == -FI_EAGAIN)
            break;
        tacl__ofi_reqq_remove(q, req);
        ++events;
        if (rc == 0) {
            now_pending(ofi, req);
            continue;
        }
        finish(ofi, req, tacl__error_peer(req->peer, NET, "rank %d cannot "
                                          "post a %s rank %d: %s",
                                          ofi->base.rank, req_what(req),
                                          req->peer,
                                          tacl__ofi_strerror(rc)));
    }
    return events;
}

/* Read the completions of rail r's queue, a budget of batches. */
static int poll_rail(tacl__ofi_t *ofi, int r)
{
    struct fi_cq_tagged_entry ents[TACL_OFI_CQ_BATCH];
    struct fid_cq *cq = ofi->rails[r].cq;
    int events = 0;

    for (int b = 0; b < TACL_OFI_CQ_BUDGET && tacl__ofi_live(ofi); ++b) {
        ssize_t n = fi_cq_read(cq, ents, TACL_OFI_CQ_BATCH);

        if (n == -FI_EAVAIL) {
            events += complete_error(ofi, cq);
            continue;
        }
        if (n <= 0) {
            if (n != -FI_EAGAIN)
                tacl__tl_base_mark_failed(&ofi->base, tacl__error(
                    TACL_ERR_SYSTEM, NET, "rank %d cannot read the "
                    "completion queue of rail %d: %s", ofi->base.rank, r,
                    tacl__ofi_strerror(n)));
            break;
        }
        for (ssize_t i = 0; i < n; ++i)
            events += complete_ok(ofi, &ents[i]);
        if (n < TACL_OFI_CQ_BATCH)
            break;
    }
    return events;
}

int tacl__ofi_poll(tacl__ofi_t *ofi)
{
    int events = 0;

    if (!tacl__ofi_live(ofi))
        return 0;
    for (int r = 0; r < ofi->nrails; ++r)
        events += poll_rail(ofi, r);
    events += drain_backlog(ofi, &ofi->backlog_tx, 1);
    events += drain_backlog(ofi, &ofi->backlog_rx, 0);
    return events;
}

/* End every request of q with status. */
static void fail_queue(tacl__ofi_t *ofi, tacl__ofi_reqq_t *q,
                       tacl_status_t status)
{
    tacl__ofi_req_t *req;

    while ((req = q->head) != NULL) {
        if (req->flags & TACL_OFI_REQ_F_PENDING)
            leave_pending(ofi, req);
        else
            tacl__ofi_reqq_remove(q, req);
        finish(ofi, req, status);
    }
}

void tacl__ofi_fail_pending(tacl__ofi_t *ofi, tacl_status_t status)
{
    if (ofi->nops == 0 && !ofi->closing)
        return;
    /*
     * The provider must never touch a failed operation's buffer again.
     * A clean close does that by closing every rail's endpoint.  A
     * failure abandons them instead, with their queues, address vectors
     * and domains,
     * until the process ends: closing an ofi_rxm endpoint whose peer
     * was cut off or that another thread aborted crashed inside
     * libfabric 1.17 (about 1 in 16 fault trials, in fi_close).  The
     * providers' data progress is manual (tcp's and EFA's), so nothing
     * moves once tacl stops calling into the endpoints, which it does
     * from here on (every rail's ep is NULL).
     */
    for (int r = 0; r < ofi->nrails; ++r) {
        tacl__ofi_rail_t *rail = &ofi->rails[r];

        if (rail->ep == NULL)
            continue;
        if (ofi->closing)
            fi_close(&rail->ep->fid);
        else
            rail->abandoned = rail->ep;
        rail->ep = NULL;
    }
    fail_queue(ofi, &ofi->pending, status);
    fail_queue(ofi, &ofi->backlog_tx, status);
    fail_queue(ofi, &ofi->backlog_rx, status);
    /* What peeks found went with the endpoint. */
    fail_queue(ofi, &ofi->found, status);
}

/* The oldest message a peek found for tacl tag tag, or NULL. */
static const tacl__ofi_req_t *found_with(const tacl__ofi_t *ofi,
                                           uint64_t tag)
{
    for (const tacl__ofi_req_t *req = ofi->found.head; req; req = req->next)
        if (req->msg[0] == tag)
            return req;
    return NULL;
}

/*
 * Post a peek for tag from peer (any sender if -1) unless one is in
 * flight (a refusal is noted in peek_failed), then read its answer,
 * which ofi_rxm writes to the queue at once: read here, it leaves the
 * queue empty, so wait() can sleep until a message comes.
 */
static void peek(tacl__ofi_t *ofi, int peer, uint64_t tag)
{
    tacl__ofi_req_t *req;

    if (!tacl__ofi_live(ofi) || ofi->peek != NULL)
        return;
    undefer(ofi, peer, tag);
    req = tacl__ofi_req_get(ofi);
    if (req == NULL)
        return;
    req->kind = TACL_OFI_REQ_PEEK;
    req->peer = peer;
    req->msg[0] = tag;
    if (tacl__ofi_post(ofi, req) != TACL_OK) {
        tacl__ofi_req_put(ofi, req);
        peek_refused(ofi, "refused");
        return;
    }
    ofi->peek = req;
    /* Completions it reads besides wait on the done queue for the next
     * progress(), as any read there would. */
    tacl__ofi_poll(ofi);
}

int tacl__ofi_probe(tacl__ofi_t *ofi, uint64_t tag, int *peer, uint64_t *len)
{
    const tacl__ofi_req_t *req = found_with(ofi, tag);

    if (req == NULL && ofi->peek_failed == TACL_OK) {
        peek(ofi, -1, tag);
        req = found_with(ofi, tag);
    }
    if (req == NULL)
        return ofi->peek_failed;
    *peer = req->peer;
    *len = req->len;
    return 1;
}

int tacl__ofi_arrived(tacl__ofi_t *ofi, int peer, uint64_t tag,
                      uint64_t *len)
{
    const tacl__tl_op_t key = {.peer = peer, .tag = tag};
    const tacl__ofi_req_t *req = found_for(ofi, &key);
    tacl__ofi_peer_t *p = &ofi->peers[peer];
    uint64_t now;

    if (ofi->base.failed != TACL_OK) {
        p->asked_ns = 0;
        return ofi->base.failed;
    }
    if (req == NULL && ofi->peek_failed == TACL_OK) {
        peek(ofi, peer, tag);
        req = found_for(ofi, &key);
    }
    if (req != NULL || ofi->peek_failed != TACL_OK ||
        p->state == TACL_OFI_PEER_GONE)
        p->asked_ns = 0;
    if (req != NULL) {
        *len = req->len;
        return 1;
    }
    if (ofi->peek_failed != TACL_OK)
        return ofi->peek_failed;
    if (p->state == TACL_OFI_PEER_GONE)
        return tacl__error_peer(peer, NET, "rank %d: receive from rank %d, "
                                "which closed its transport",
                                ofi->base.rank, peer);
    /* A wait begins: the peer's ping clock starts unless an operation
     * already started it. */
    now = tacl__now_ns();
    if (!tacl__ofi_awaited(ofi, p, now) && p->npending == 0)
        p->since_ns = now;
    p->asked_ns = ofi->asked_ns = now;
    return 0;
}
