/*
 * The shm protocol: posting, matching, transfers and progress.
 *
 * Sends to one peer leave in posting order, one message at a time: a
 * message up to the eager limit (and, in copy mode, any message) goes as
 * DATA fragments copied into the slots; in cma mode a larger one goes as
 * one RTS slot, the receiver pulls the bytes with process_vm_readv() in
 * TACL_SHM_CMA_CHUNK pieces and answers with a FIN that completes the send
 * (the receive itself completes only once that FIN is in a slot, so a
 * receiver that stops progressing after its last receive strands no one).
 * A receive hinted PINNABLE (the library's huge-page scratch) answers the
 * RTS with a CTS instead: the sender writes the bytes with
 * process_vm_writev(), pinning the receiver's few huge pages rather than
 * having its own small ones pinned, and its FIN completes the receive.
 * Pinning is most of the cost of a cross-memory copy besides the copy.
 * When the sender's buffer lies in a tacl_mem_alloc segment, its RTS
 * names the segment; the receiver maps it (once; up to TACL_SHM_MAPS
 * segments per peer stay mapped) and copies with memcpy, or with
 * non-temporal stores when the receive is hinted STREAM: no system call,
 * no pinning.
 * Because a peer's messages arrive in the order they were sent, matching a
 * message against the oldest posted receive of its tag (and a receive
 * against the oldest unexpected message of its tag) keeps (source, tag)
 * FIFO order.  A DATA message without a receive is copied to the heap, so
 * slots never stay taken and no set of posted operations can deadlock; an
 * unexpected RTS just waits, as no data moves until its receive exists.
 *
 * Completed operations go to a done queue whose callbacks run at the end
 * of progress(); a callback may post new operations.  A peer that dies
 * with operations pending fails the whole instance: every pending
 * operation completes with TACL_ERR_REMOTE and progress() returns it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "common.h"
#include "copy.h"
#include "log.h"
#include "shm.h"

static int process_gone(pid_t pid);
static int flush_out(tacl__shm_t *shm, tacl__shm_peer_t *peer);

/* Queue a CTS or FIN for the peer; a FIN's op completes when it leaves. */
static tacl_status_t queue_ctl(tacl__shm_peer_t *peer,
                               const tacl__shm_ctl_t *ctl)
{
    if (peer->nctls == peer->ctls_cap) {
        size_t cap = peer->ctls_cap ? 2 * peer->ctls_cap : 16;
        tacl__shm_ctl_t *ctls = realloc(peer->ctls, cap * sizeof(*ctls));

        if (!ctls)
            return tacl__error(TACL_ERR_NO_MEMORY, SHM,
                               "cannot queue an acknowledgement to rank %d",
                               peer->rank);
        peer->ctls = ctls;
        peer->ctls_cap = cap;
    }
    peer->ctls[peer->nctls++] = *ctl;
    return TACL_OK;
}

/* Queue a FIN for the peer's operation op_id; op completes when it leaves. */
static tacl_status_t queue_fin(tacl__shm_peer_t *peer, uint64_t op_id,
                               tacl_status_t status, tacl__tl_op_t *op)
{
    tacl__shm_ctl_t fin = {.kind = TACL_SHM_MSG_FIN, .op_id = op_id,
                           .status = status, .op = op};

    return queue_ctl(peer, &fin);
}

void tacl__shm_fail_pending(tacl__tl_base_t *base, tacl_status_t status)
{
    tacl__shm_t *shm = (tacl__shm_t *)base;

    for (int i = 0; i < shm->base.nlocal; ++i) {
        tacl__shm_peer_t *peer = &shm->peers[i];
        tacl__tl_opq_t *queues[] = {&peer->sends, &peer->rts_wait,
                                     &peer->recvs, &peer->pulls,
                                     &peer->pushes, &peer->push_wait};

        for (size_t q = 0; q < TACL_ARRAY_SIZE(queues); ++q)
            tacl__tl_opq_fail(&shm->base.done, queues[q], status);
        /* A message taken while it arrives waits again for a receive;
         * it was the latest of the peer's, so it goes back last. */
        if (peer->in_kind == TACL_SHM_IN_UX && peer->in_ux->recv) {
            tacl__tl_complete(&shm->base, peer->in_ux->recv, status);
            peer->in_ux->recv = NULL;
            tacl__tl_msgq_push(&peer->ux, &peer->in_ux->link);
        }
        if (peer->in_kind == TACL_SHM_IN_OP) {
            tacl__tl_complete(&shm->base, peer->in_op, status);
            peer->in_kind = TACL_SHM_IN_DISCARD;
        }
        /* The FINs themselves still go if progress goes on. */
        for (size_t f = 0; f < peer->nctls; ++f) {
            if (peer->ctls[f].op) {
                tacl__tl_complete(&shm->base, peer->ctls[f].op, status);
                peer->ctls[f].op = NULL;
            }
        }
    }
}

tacl_status_t tacl__shm_send(tacl__tl_t *tl, tacl__tl_op_t *op)
{
    tacl__shm_t *shm = (tacl__shm_t *)tl;
    tacl_status_t status = tacl__tl_base_check(&shm->base, op);
    tacl__shm_peer_t *peer;

    if (status != TACL_OK)
        return status;
    TACL_SHM_OP_OFFSET(op) = 0;
    TACL_SHM_OP_FLAGS(op) = 0;
    if (shm->use_cma && op->len > shm->eager_limit) {
        TACL_SHM_OP_FLAGS(op) = TACL_SHM_OP_F_RTS;
        TACL_SHM_OP_ID(op) = ++shm->next_op_id;
    }
    peer = &shm->peers[shm->base.local_of[op->peer]];
    tacl__tl_opq_push(&peer->sends, op);
    /* A request to send goes out now, not at the next progress call: the
     * receiver can then pull while this rank computes or copies. */
    if (TACL_SHM_OP_FLAGS(op) & TACL_SHM_OP_F_RTS)
        flush_out(shm, peer);
    return TACL_OK;
}

/*
 * The entry of the peer's mapped segments holding seg, mapping it if
 * needed; -1 when it cannot be mapped (the pull then goes by cross-memory
 * attach).  The entries that queued pulls read stay mapped.
 */
static int map_segment(tacl__shm_t *shm, tacl__shm_peer_t *peer,
                       const tacl__memseg_ref_t *seg)
{
    uint32_t busy = 0;

    if (!shm->use_map)
        return -1;
    for (const tacl__tl_op_t *op = peer->pulls.head; op; op = op->tl_next)
        if (TACL_SHM_OP_FLAGS(op) & TACL_SHM_OP_F_MAPPED)
            busy |= 1u << TACL_SHM_OP_MAP(op);
    return tacl__shm_maps_get(&peer->maps, peer->pid, seg, busy);
}

/*
 * Start moving an RTS's message into recv: pull it, or ask the sender to
 * write it (CTS) when recv is cheap to pin; or fail a length mismatch.
 */
static tacl_status_t start_transfer(tacl__shm_t *shm, tacl__shm_peer_t *peer,
                                    tacl__tl_op_t *recv, uint64_t len,
                                    uint64_t addr, uint64_t op_id,
                                    const tacl__memseg_ref_t *seg)
{
    tacl_status_t status;
    int map = -1;

    if (len != recv->len) {
        status = tacl__tl_length_error(peer->rank, recv->tag, len, 0,
                                       recv->len, TACL_SUBSYS_SHM);
        if (queue_fin(peer, op_id, status, recv) != TACL_OK) {
            tacl__tl_complete(&shm->base, recv, status);
            return TACL_ERR_NO_MEMORY;
        }
        return TACL_OK;
    }
    /* A mapped segment needs no pinning either way: pull from it.  A
     * range the segment does not hold goes by cross-memory attach, which
     * fails cleanly where a mapped copy would fault. */
    if (seg->id && seg->offset <= seg->size && len <= seg->size - seg->offset)
        map = map_segment(shm, peer, seg);
    if (map < 0 && (recv->hints & TACL__TL_HINT_PINNABLE)) {
        tacl__shm_ctl_t cts = {.kind = TACL_SHM_MSG_CTS, .op_id = op_id,
                               .addr = (uint64_t)(uintptr_t)recv->buf,
                               .peer_op = ++shm->next_op_id};

        status = queue_ctl(peer, &cts);
        if (status != TACL_OK)
            return status;
        TACL_SHM_OP_ID(recv) = cts.peer_op;
        tacl__tl_opq_push(&peer->push_wait, recv);
        flush_out(shm, peer);
        return TACL_OK;
    }
    TACL_SHM_OP_OFFSET(recv) = 0;
    TACL_SHM_OP_ADDR(recv) = addr;
    TACL_SHM_OP_RID(recv) = op_id;
    TACL_SHM_OP_FLAGS(recv) = 0;
    if (map >= 0) {
        TACL_SHM_OP_ADDR(recv) =
            (uint64_t)(uintptr_t)(peer->maps.entries[map].base +
                                  seg->offset);
        TACL_SHM_OP_FLAGS(recv) = TACL_SHM_OP_F_MAPPED;
        TACL_SHM_OP_MAP(recv) = (uint64_t)map;
    }
    tacl__tl_opq_push(&peer->pulls, recv);
    return TACL_OK;
}

/*
 * A new unexpected entry for the message slot starts (DATA or RTS), at
 * the end of the peer's queue; NULL when out of memory.
 */
static tacl__shm_ux_t *ux_append(tacl__shm_peer_t *peer,
                                 const tacl__shm_slot_t *slot)
{
    tacl__shm_ux_t *ux = calloc(1, sizeof(*ux));

    if (!ux)
        return NULL;
    ux->link.peer = peer->rank;
    ux->link.tag = slot->tag;
    ux->kind = slot->kind;
    ux->len = slot->msg_len;
    tacl__tl_msgq_push(&peer->ux, &ux->link);
    return ux;
}

static void ux_free(tacl__tl_msg_t *msg)
{
    tacl__shm_ux_t *ux = (tacl__shm_ux_t *)msg;

    free(ux->buf);
    free(ux);
}

/*
 * Hand a complete unexpected DATA message, which its receive took off the
 * queue, to that receive and free it.
 */
static void ux_deliver(tacl__shm_t *shm, tacl__shm_peer_t *peer,
                       tacl__shm_ux_t *ux)
{
    tacl__tl_op_t *recv = ux->recv;
    tacl_status_t status = ux->status;

    if (status == TACL_OK && ux->len != recv->len)
        status = tacl__tl_length_error(peer->rank, recv->tag, ux->len, 0,
                                       recv->len, TACL_SUBSYS_SHM);
    else if (status == TACL_OK && ux->len)
        memcpy(recv->buf, ux->buf, ux->len);
    tacl__tl_complete(&shm->base, recv, status);
    ux_free(&ux->link);
}

tacl_status_t tacl__shm_recv(tacl__tl_t *tl, tacl__tl_op_t *op)
{
    tacl__shm_t *shm = (tacl__shm_t *)tl;
    tacl_status_t status = tacl__tl_base_check(&shm->base, op);
    tacl__shm_peer_t *peer;
    tacl__shm_ux_t *ux;

    if (status != TACL_OK)
        return status;
    peer = &shm->peers[shm->base.local_of[op->peer]];
    ux = (tacl__shm_ux_t *)tacl__tl_msgq_take(&peer->ux, op->peer, op->tag);
    if (!ux) {
        tacl__tl_opq_push(&peer->recvs, op);
        return TACL_OK;
    }
    if (ux->kind == TACL_SHM_MSG_RTS) {
        status = start_transfer(shm, peer, op, ux->len, ux->addr,
                                ux->op_id, &ux->seg);
        free(ux);
        if (status != TACL_OK)
            tacl__tl_base_fail(&shm->base, status);
        return TACL_OK;
    }
    ux->recv = op;
    if (ux->complete)
        ux_deliver(shm, peer, ux);
    return TACL_OK;
}

int tacl__shm_probe(tacl__tl_t *tl, uint64_t tag, int *peer, uint64_t *len)
{
    tacl__shm_t *shm = (tacl__shm_t *)tl;

    return tacl__tl_base_probe_peers(&shm->base, shm->peers,
                                     sizeof(*shm->peers),
                                     offsetof(tacl__shm_peer_t, ux),
                                     offsetof(tacl__shm_ux_t, len), tag, peer,
                                     len);
}

/* Push as much of the peer's outgoing work as fits; slots written. */
static int flush_out(tacl__shm_t *shm, tacl__shm_peer_t *peer)
{
    unsigned space;
    int written = 0;

    if (!peer->nctls && !peer->sends.head)
        return 0;   /* leave the consumer's cache line alone */
    space = tacl__shm_out_space(peer);

    while (space > 0) {
        tacl__tl_op_t *op = peer->sends.head;
        tacl__shm_slot_t *slot;
        uint8_t *payload;

        if (!peer->nctls && !op)
            break;
        slot = tacl__shm_out_slot(peer, &payload);
        if (peer->nctls) {
            const tacl__shm_ctl_t *ctl = &peer->ctls[0];

            slot->kind = ctl->kind;
            slot->op_id = ctl->op_id;
            slot->status = ctl->status;
            slot->addr = ctl->addr;
            slot->peer_op = ctl->peer_op;
            if (ctl->op)
                tacl__tl_complete(&shm->base, ctl->op,
                                  (tacl_status_t)ctl->status);
            --peer->nctls;
            memmove(peer->ctls, peer->ctls + 1,
                    peer->nctls * sizeof(peer->ctls[0]));
        } else if (TACL_SHM_OP_FLAGS(op) & TACL_SHM_OP_F_RTS) {
            slot->kind = TACL_SHM_MSG_RTS;
            slot->tag = op->tag;
            slot->msg_len = op->len;
            slot->addr = (uint64_t)(uintptr_t)op->buf;
            slot->op_id = TACL_SHM_OP_ID(op);
            slot->seg.id = 0;
            if (shm->use_map)
                tacl__memseg_find(op->buf, op->len, &slot->seg);
            tacl__tl_opq_unlink(&peer->sends, NULL, op);
            tacl__tl_opq_push(&peer->rts_wait, op);
        } else {
            uint64_t off = TACL_SHM_OP_OFFSET(op);
            uint64_t frag = TACL_MIN(op->len - off,
                                     (uint64_t)TACL_SHM_SLOT_SIZE);

            slot->kind = TACL_SHM_MSG_DATA;
            slot->tag = op->tag;
            slot->msg_len = op->len;
            slot->offset = off;
            slot->frag_len = (uint32_t)frag;
            if (frag)
                memcpy(payload, (const uint8_t *)op->buf + off, frag);
            TACL_SHM_OP_OFFSET(op) = off + frag;
            if (off + frag == op->len) {
                tacl__tl_opq_unlink(&peer->sends, NULL, op);
                tacl__tl_complete(&shm->base, op, TACL_OK);
            }
        }
        tacl__shm_out_publish(peer);
        --space;
        ++written;
    }
    if (written)
        tacl__shm_ring(peer->hdr);
    return written;
}

/* The oldest posted receive the message slot starts matches, or NULL. */
static tacl__tl_op_t *match_recv(tacl__shm_peer_t *peer,
                                 const tacl__shm_slot_t *slot)
{
    return tacl__tl_opq_take(&peer->recvs, peer->rank, slot->tag);
}

/* The first DATA fragment of a message: find where its bytes go. */
static tacl_status_t begin_data(tacl__shm_t *shm, tacl__shm_peer_t *peer,
                                const tacl__shm_slot_t *slot)
{
    tacl__tl_op_t *recv = match_recv(peer, slot);
    tacl__shm_ux_t *ux;

    peer->in_len = slot->msg_len;
    peer->in_got = 0;
    if (recv && recv->len != slot->msg_len) {
        tacl__tl_complete(&shm->base, recv,
                 tacl__tl_length_error(peer->rank, slot->tag,
                                       slot->msg_len, 0, recv->len,
                                       TACL_SUBSYS_SHM));
        peer->in_kind = TACL_SHM_IN_DISCARD;
        return TACL_OK;
    }
    if (recv) {
        peer->in_kind = TACL_SHM_IN_OP;
        peer->in_op = recv;
        return TACL_OK;
    }
    ux = ux_append(peer, slot);
    if (!ux)
        return tacl__error(TACL_ERR_NO_MEMORY, SHM,
                           "cannot keep an unexpected message from rank %d",
                           peer->rank);
    ux->buf = malloc(ux->len ? ux->len : 1);
    if (!ux->buf)
        ux->status = tacl__error(TACL_ERR_NO_MEMORY, SHM,
                                 "cannot keep an unexpected %llu-byte "
                                 "message from rank %d",
                                 (unsigned long long)ux->len, peer->rank);
    peer->in_kind = TACL_SHM_IN_UX;
    peer->in_ux = ux;
    return TACL_OK;
}

static tacl_status_t on_data(tacl__shm_t *shm, tacl__shm_peer_t *peer,
                             const tacl__shm_slot_t *slot,
                             const uint8_t *payload)
{
    tacl_status_t status;
    void *dst = NULL;

    if (peer->in_kind == TACL_SHM_IN_NONE) {
        status = begin_data(shm, peer, slot);
        if (status != TACL_OK)
            return status;
    }
    if (slot->offset != peer->in_got || slot->frag_len > TACL_SHM_SLOT_SIZE ||
        slot->frag_len > peer->in_len - peer->in_got)
        return tacl__error(TACL_ERR_INTERNAL, SHM,
                           "corrupt fragment from rank %d (offset %llu, "
                           "%u bytes, message of %llu)", peer->rank,
                           (unsigned long long)slot->offset, slot->frag_len,
                           (unsigned long long)peer->in_len);
    if (peer->in_kind == TACL_SHM_IN_OP)
        dst = peer->in_op->buf;
    else if (peer->in_kind == TACL_SHM_IN_UX)
        dst = peer->in_ux->buf;
    if (dst && slot->frag_len)
        memcpy((uint8_t *)dst + slot->offset, payload, slot->frag_len);
    peer->in_got += slot->frag_len;
    if (peer->in_got < peer->in_len)
        return TACL_OK;
    if (peer->in_kind == TACL_SHM_IN_OP) {
        tacl__tl_complete(&shm->base, peer->in_op, TACL_OK);
    } else if (peer->in_kind == TACL_SHM_IN_UX) {
        peer->in_ux->complete = 1;
        if (peer->in_ux->recv)
            ux_deliver(shm, peer, peer->in_ux);
    }
    peer->in_kind = TACL_SHM_IN_NONE;
    peer->in_op = NULL;
    peer->in_ux = NULL;
    return TACL_OK;
}

static tacl_status_t on_rts(tacl__shm_t *shm, tacl__shm_peer_t *peer,
                            const tacl__shm_slot_t *slot)
{
    tacl__tl_op_t *recv = match_recv(peer, slot);
    tacl__shm_ux_t *ux;

    if (recv)
        return start_transfer(shm, peer, recv, slot->msg_len, slot->addr,
                              slot->op_id, &slot->seg);
    ux = ux_append(peer, slot);
    if (!ux)
        return tacl__error(TACL_ERR_NO_MEMORY, SHM,
                           "cannot keep a request to send from rank %d",
                           peer->rank);
    ux->addr = slot->addr;
    ux->op_id = slot->op_id;
    ux->seg = slot->seg;
    return TACL_OK;
}

/* Unlink and return the operation of q whose RTS or CTS id is id. */
static tacl__tl_op_t *take_by_id(tacl__tl_opq_t *q, uint64_t id)
{
    tacl__tl_op_t *prev = NULL, *op;

    for (op = q->head; op; prev = op, op = op->tl_next) {
        if (TACL_SHM_OP_ID(op) == id) {
            tacl__tl_opq_unlink(q, prev, op);
            return op;
        }
    }
    return NULL;
}

/* The receiver asks us to write a message whose RTS it matched. */
static void on_cts(tacl__shm_peer_t *peer, const tacl__shm_slot_t *slot)
{
    tacl__tl_op_t *op = take_by_id(&peer->rts_wait, slot->op_id);

    if (!op) {
        TACL_WARN(SHM, "rank %d asked for unknown send %llu; ignored",
                  peer->rank, (unsigned long long)slot->op_id);
        return;
    }
    TACL_SHM_OP_OFFSET(op) = 0;
    TACL_SHM_OP_ADDR(op) = slot->addr;
    TACL_SHM_OP_RID(op) = slot->peer_op;
    tacl__tl_opq_push(&peer->pushes, op);
}

/* The peer finished copying for our send (it pulled) or receive (it
 * wrote). */
static void on_fin(tacl__shm_t *shm, tacl__shm_peer_t *peer,
                   const tacl__shm_slot_t *slot)
{
    tacl__tl_op_t *op = take_by_id(&peer->rts_wait, slot->op_id);

    if (!op)
        op = take_by_id(&peer->push_wait, slot->op_id);
    if (!op) {
        TACL_WARN(SHM, "rank %d acknowledged unknown operation %llu; "
                  "ignored", peer->rank, (unsigned long long)slot->op_id);
        return;
    }
    tacl__tl_complete(&shm->base, op, (tacl_status_t)slot->status);
}

/* Handle what the peer sent us; slots consumed, or a negative status. */
static int poll_in(tacl__shm_t *shm, tacl__shm_peer_t *peer)
{
    const tacl__shm_slot_t *slot;
    const uint8_t *payload;
    tacl_status_t status = TACL_OK;
    int n = 0;

    while (n < TACL_SHM_POLL_BUDGET &&
           (slot = tacl__shm_in_slot(peer, &payload))) {
        switch (slot->kind) {
        case TACL_SHM_MSG_DATA:
            status = on_data(shm, peer, slot, payload);
            break;
        case TACL_SHM_MSG_RTS:
            status = on_rts(shm, peer, slot);
            break;
        case TACL_SHM_MSG_CTS:
            on_cts(peer, slot);
            break;
        case TACL_SHM_MSG_FIN:
            on_fin(shm, peer, slot);
            break;
        default:
            status = tacl__error(TACL_ERR_INTERNAL, SHM,
                                 "unknown message kind %u from rank %d",
                                 slot->kind, peer->rank);
        }
        tacl__shm_in_release(peer);
        ++n;
        if (status != TACL_OK)
            return status;
    }
    if (n)
        tacl__shm_ring_producer(peer);
    return n;
}

/*
 * Copy up to TACL_SHM_CMA_CHUNK bytes for the operations of q (pulls:
 * receives reading the peer; pushes: sends writing it), oldest first,
 * stopping after the first that completes, whose FIN goes at once.  The
 * budget keeps one progress call short, so a rank forwards what it has
 * (the next step of a ring) and answers its other peers while a long
 * message is still moving; stopping at a completed receive lets what
 * waits for it run while the data is in cache.
 */
static int advance_copies(tacl__shm_t *shm, tacl__shm_peer_t *peer,
                          tacl__tl_opq_t *q)
{
    int write = q == &peer->pushes;
    uint64_t budget = TACL_SHM_CMA_CHUNK;
    tacl__tl_op_t *op;
    int events = 0;

    while ((op = q->head) && budget > 0) {
        uint64_t off = TACL_SHM_OP_OFFSET(op);
        uint64_t chunk = TACL_MIN(op->len - off, budget);
        struct iovec local = {(uint8_t *)op->buf + off, chunk};
        struct iovec remote = {
            (void *)(uintptr_t)(TACL_SHM_OP_ADDR(op) + off), chunk};
        tacl_status_t status = TACL_OK;
        ssize_t got;

        if (!write && (TACL_SHM_OP_FLAGS(op) & TACL_SHM_OP_F_MAPPED)) {
            if (op->hints & TACL__TL_HINT_STREAM)
                tacl__copy_stream(local.iov_base, remote.iov_base, chunk);
            else
                memcpy(local.iov_base, remote.iov_base, chunk);
            got = (ssize_t)chunk;
        } else if (write) {
            got = process_vm_writev(peer->pid, &local, 1, &remote, 1, 0);
        } else {
            got = process_vm_readv(peer->pid, &local, 1, &remote, 1, 0);
        }
        if (got < 0 && (errno == EINTR || errno == EAGAIN))
            break;
        /* EFAULT: the peer's buffer left its address space, which
         * happens while a killed process is being torn down (before it
         * is gone from the process table) or if it freed the buffer
         * mid-transfer: a failure of that peer either way. */
        if (got < 0 && (errno == ESRCH || errno == EFAULT))
            return tacl__error_peer(peer->rank, SHM,
                               "rank %d (pid %d) died during a transfer; "
                               "check that process's output",
                               peer->rank, (int)peer->pid);
        if (got < 0) {
            status = tacl__error(TACL_ERR_SYSTEM, SHM,
                                 "%s rank %d failed: %m; set "
                                 "TACL_SHM_MODE=copy",
                                 write ? "process_vm_writev to"
                                       : "process_vm_readv from",
                                 peer->rank);
        } else {
            TACL_SHM_OP_OFFSET(op) = off + (uint64_t)got;
            budget -= TACL_MIN(budget, (uint64_t)got);
        }
        ++events;
        if (status == TACL_OK && TACL_SHM_OP_OFFSET(op) < op->len)
            continue;
        tacl__tl_opq_unlink(q, NULL, op);
        if (queue_fin(peer, TACL_SHM_OP_RID(op), status, op) != TACL_OK) {
            /* Without its FIN the peer would wait forever: fail. */
            tacl__tl_complete(&shm->base, op, TACL_ERR_NO_MEMORY);
            return TACL_ERR_NO_MEMORY;
        }
        flush_out(shm, peer);
        /* Return with the data still in cache: what waits for it (a
         * reduction, the next send of a ring) runs now. */
        break;
    }
    return events;
}

static int peer_busy(const tacl__shm_peer_t *peer)
{
    if (peer->sends.head || peer->rts_wait.head || peer->recvs.head ||
        peer->pulls.head || peer->pushes.head || peer->push_wait.head ||
        peer->nctls || peer->in_kind == TACL_SHM_IN_OP)
        return 1;
    /* An unexpected message a receive took while it arrives. */
    return peer->in_kind == TACL_SHM_IN_UX && peer->in_ux->recv;
}

static int process_gone(pid_t pid)
{
    char path[64], buf[512], *end;
    FILE *file;
    size_t n;

    if (kill(pid, 0) == -1 && errno == ESRCH)
        return 1;
    /* A killed process its parent has not reaped yet is a zombie. */
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    file = fopen(path, "r");
    if (!file)
        return 0;
    n = fread(buf, 1, sizeof(buf) - 1, file);
    fclose(file);
    buf[n] = '\0';
    end = strrchr(buf, ')');
    return end && end[1] == ' ' && (end[2] == 'Z' || end[2] == 'X');
}

/* Fail the instance if a peer we wait for has died; whether one has. */
static int check_liveness(tacl__shm_t *shm)
{
    uint64_t now = tacl__now_ns();

    if (now < shm->next_liveness_ns)
        return 0;
    shm->next_liveness_ns = now + TACL_SHM_LIVENESS_NS;
    for (int i = 0; i < shm->base.nlocal; ++i) {
        tacl__shm_peer_t *peer = &shm->peers[i];

        if (i == shm->base.my_local || !peer->watch || !peer_busy(peer) ||
            !process_gone(peer->pid))
            continue;
        /* What it sent before dying is still ours to read. */
        while (tacl__shm_in_pending(peer) && poll_in(shm, peer) > 0)
            ;
        if (!peer_busy(peer))
            continue;
        tacl__tl_base_fail(&shm->base,
                           tacl__error_peer(peer->rank, SHM, "rank %d (pid "
                                            "%d) died with operations "
                                            "pending; check that process's "
                                            "output", peer->rank,
                                            (int)peer->pid));
        return 1;
    }
    return 0;
}

int tacl__shm_progress(tacl__tl_t *tl)
{
    tacl__shm_t *shm = (tacl__shm_t *)tl;
    int events = 0, n;

    for (int i = 0; i < shm->base.nlocal && shm->base.failed == TACL_OK;
         ++i) {
        tacl__shm_peer_t *peer = &shm->peers[i];

        if (i == shm->base.my_local)
            continue;
        n = poll_in(shm, peer);
        if (n >= 0) {
            /* Requests to send and FINs first: the peer's work starts
             * before this rank's pulls. */
            int m = flush_out(shm, peer);
            int p = advance_copies(shm, peer, &peer->pulls);
            int w = p < 0 ? 0 : advance_copies(shm, peer, &peer->pushes);

            n = p < 0 ? p : w < 0 ? w : n + m + p + w;
        }
        if (n < 0) {
            tacl__tl_base_fail(&shm->base, n);
            break;
        }
        events += n + flush_out(shm, peer);
    }
    if (shm->base.failed == TACL_OK)
        check_liveness(shm);
    return tacl__tl_base_finish(&shm->base, events);
}

/* Whether progress() has something to do; arm producer flags if asked. */
static int has_work(tacl__shm_t *shm, int *busy_p)
{
    int busy = 0;

    if (tacl__tl_base_ready(&shm->base))
        return 1;
    for (int i = 0; i < shm->base.nlocal; ++i) {
        tacl__shm_peer_t *peer = &shm->peers[i];

        if (i == shm->base.my_local)
            continue;
        if (tacl__shm_in_pending(peer) || peer->pulls.head ||
            peer->pushes.head)
            return 1;
        if ((peer->sends.head || peer->nctls) && tacl__shm_out_arm(peer))
            return 1;
        busy |= peer_busy(peer);
    }
    *busy_p = busy;
    return 0;
}

tacl_status_t tacl__shm_wait(tacl__tl_t *tl, int64_t timeout_us)
{
    tacl__shm_t *shm = (tacl__shm_t *)tl;
    uint32_t seq;
    int busy = 0, idle;

    if (!shm->hdr)
        return TACL_OK;
    timeout_us = tacl__tl_base_wait_us(&shm->base, timeout_us);
    /* The instance's state is read under its lock; only the sleep is
     * outside it, so another thread may progress meanwhile. */
    tacl__tl_lock(shm->base.lock);
    if (shm->base.failed == TACL_OK && check_liveness(shm)) {
        tacl__tl_unlock(shm->base.lock);
        return TACL_OK;
    }
    seq = atomic_load(&shm->hdr->doorbell);
    atomic_store(&shm->hdr->sleeping, 1);
    atomic_thread_fence(memory_order_seq_cst);
    idle = !has_work(shm, &busy);
    tacl__tl_unlock(shm->base.lock);
    if (idle) {
        /* Wake up in time to check the peers we wait for. */
        if (busy)
            timeout_us = TACL_MIN(timeout_us,
                                  (int64_t)(TACL_SHM_LIVENESS_NS / 1000));
        tacl__shm_sleep(shm, seq, timeout_us);
    }
    atomic_store(&shm->hdr->sleeping, 0);
    return TACL_OK;
}

void tacl__shm_peer_cleanup(tacl__shm_peer_t *peer)
{
    /* A message a receive took while it arrives is on no queue. */
    if (peer->in_kind == TACL_SHM_IN_UX && peer->in_ux->recv)
        ux_free(&peer->in_ux->link);
    peer->in_kind = TACL_SHM_IN_NONE;
    peer->in_ux = NULL;
    tacl__tl_msgq_drain(&peer->ux, ux_free);
    tacl__shm_maps_clear(&peer->maps);
    free(peer->ctls);
    peer->ctls = NULL;
    peer->nctls = peer->ctls_cap = 0;
}
