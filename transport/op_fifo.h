/*
 * A FIFO of transport operations, linked through their tl_next field, and
 * the done queue every transport keeps with it.
 *
 * Each transport queues what it has posted (sends, receives, operations
 * waiting for a peer's answer) in posting order, and queues what has
 * finished on a done queue whose callbacks progress() runs at its end, so
 * that no callback runs inside a post call (transport.h).  The status of
 * an operation on a done queue rides in its tl_priv[0]
 * (TACL__TL_OP_STATUS); a transport may use that word for anything else
 * while the operation is still its own.
 */
#ifndef TACL_TRANSPORT_OP_FIFO_H
#define TACL_TRANSPORT_OP_FIFO_H

#include <stddef.h>

#include "transport.h"

/** A FIFO of operations linked through tl_next; zero is empty. */
typedef struct {
    tacl__tl_op_t *head;
    tacl__tl_op_t *tail;
} tacl__tl_opq_t;

/** The status an operation on a done queue completes with. */
#define TACL__TL_OP_STATUS(op) ((op)->tl_priv[0])

/** Append op to q. */
static inline void tacl__tl_opq_push(tacl__tl_opq_t *q, tacl__tl_op_t *op)
{
    op->tl_next = NULL;
    if (q->tail)
        q->tail->tl_next = op;
    else
        q->head = op;
    q->tail = op;
}

/** Unlink op, whose predecessor in q is prev (NULL when op is the head). */
static inline void tacl__tl_opq_unlink(tacl__tl_opq_t *q, tacl__tl_op_t *prev,
                                       tacl__tl_op_t *op)
{
    if (prev)
        prev->tl_next = op->tl_next;
    else
        q->head = op->tl_next;
    if (q->tail == op)
        q->tail = prev;
    op->tl_next = NULL;
}

/** Remove and return the oldest operation of q, or NULL. */
static inline tacl__tl_op_t *tacl__tl_opq_pop(tacl__tl_opq_t *q)
{
    tacl__tl_op_t *op = q->head;

    if (op)
        tacl__tl_opq_unlink(q, NULL, op);
    return op;
}

/** Remove and return the oldest operation of q with this tag, or NULL. */
static inline tacl__tl_op_t *tacl__tl_opq_take_tag(tacl__tl_opq_t *q,
                                                   uint64_t tag)
{
    tacl__tl_op_t *prev = NULL, *op;

    for (op = q->head; op; prev = op, op = op->tl_next) {
        if (op->tag == tag) {
            tacl__tl_opq_unlink(q, prev, op);
            return op;
        }
    }
    return NULL;
}

/** Queue op on the done queue to complete with status. */
static inline void tacl__tl_opq_complete(tacl__tl_opq_t *done,
                                         tacl__tl_op_t *op,
                                         tacl_status_t status)
{
    TACL__TL_OP_STATUS(op) = (uint64_t)(int64_t)status;
    tacl__tl_opq_push(done, op);
}

/**
 * Run the callbacks of every operation on the done queue, oldest first;
 * the number run.  A callback may post new operations, and one it
 * completes at once joins the queue and runs in this same call.
 */
static inline int tacl__tl_opq_run(tacl__tl_opq_t *done)
{
    tacl__tl_op_t *op;
    int events = 0;

    while ((op = tacl__tl_opq_pop(done))) {
        op->cb(op, (tacl_status_t)(int64_t)TACL__TL_OP_STATUS(op));
        ++events;
    }
    return events;
}

#endif /* TACL_TRANSPORT_OP_FIFO_H */
