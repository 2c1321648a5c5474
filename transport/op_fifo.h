/*
 * The queues every transport keeps: a FIFO of operations linked through
 * their tl_next field, with the done queue, and beside it the queue of
 * messages that arrived before their receive.
 *
 * Each transport queues what it has posted (sends, receives, operations
 * waiting for a peer's answer) in posting order, and queues what has
 * finished on a done queue whose callbacks progress() runs at its end, so
 * that no callback runs inside a post call (transport.h).  The status of
 * an operation on a done queue rides in its tl_priv[0]
 * (TACL__TL_OP_STATUS); a transport may use that word for anything else
 * while the operation is still its own.
 *
 * A message that arrives before the receive it matches waits on a message
 * queue (tacl__tl_msgq_t) as a descriptor of the transport's own whose
 * first member is a tacl__tl_msg_t: the peer and tag it is matched by.  A
 * new receive takes the oldest descriptor of its peer and tag, which with
 * a peer's messages arriving in sending order keeps transport.h's
 * (source, tag) order.  The same queue holds any other descriptors a
 * transport keeps by peer and tag in arrival or posting order.
 *
 * Both are singly linked FIFOs whose elements carry a peer and a tag, so
 * one definition (TACL__TL_FIFO_DEFINE) makes the functions of both.
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

/** The head of a message descriptor on a tacl__tl_msgq_t. */
typedef struct tacl__tl_msg {
    struct tacl__tl_msg *next;
    int peer;                  /* world rank it came from (or goes to) */
    uint64_t tag;
} tacl__tl_msg_t;

/** A FIFO of message descriptors, oldest first; zero is empty. */
typedef struct {
    tacl__tl_msg_t *head;
    tacl__tl_msg_t *tail;
} tacl__tl_msgq_t;

/*
 * The functions of a FIFO type q_t (head, tail) of elements e_t linked
 * through their member next and matched by their peer and tag members,
 * named prefix_<verb>:
 *   push(q, e)            append e;
 *   unlink(q, prev, e)    unlink e, whose predecessor is prev (NULL when
 *                         e is the head);
 *   pop(q)                remove and return the oldest element, or NULL;
 *   take(q, peer, tag)    remove and return the oldest element of peer
 *                         with tag, or NULL;
 *   remove(q, e)          remove e if it is there;
 *   find_tag(q, tag)      the oldest element with tag, of any peer, left
 *                         in place, or NULL.
 */
#define TACL__TL_FIFO_DEFINE(prefix, q_t, e_t, next)                         \
    static inline void prefix##_push(q_t *q, e_t *e)                         \
    {                                                                        \
        e->next = NULL;                                                      \
        if (q->tail)                                                         \
            q->tail->next = e;                                               \
        else                                                                 \
            q->head = e;                                                     \
        q->tail = e;                                                         \
    }                                                                        \
    static inline void prefix##_unlink(q_t *q, e_t *prev, e_t *e)            \
    {                                                                        \
        if (prev)                                                            \
            prev->next = e->next;                                            \
        else                                                                 \
            q->head = e->next;                                               \
        if (q->tail == e)                                                    \
            q->tail = prev;                                                  \
        e->next = NULL;                                                      \
    }                                                                        \
    static inline e_t *prefix##_pop(q_t *q)                                  \
    {                                                                        \
        e_t *e = q->head;                                                    \
                                                                             \
        if (e)                                                               \
            prefix##_unlink(q, NULL, e);                                     \
        return e;                                                            \
    }                                                                        \
    static inline e_t *prefix##_take(q_t *q, int peer, uint64_t tag)         \
    {                                                                        \
        e_t *prev = NULL, *e;                                                \
                                                                             \
        for (e = q->head; e; prev = e, e = e->next) {                        \
            if (e->peer == peer && e->tag == tag) {                          \
                prefix##_unlink(q, prev, e);                                 \
                return e;                                                    \
            }                                                                \
        }                                                                    \
        return NULL;                                                         \
    }                                                                        \
    static inline void prefix##_remove(q_t *q, e_t *e)                       \
    {                                                                        \
        e_t *prev = NULL, *cur;                                              \
                                                                             \
        for (cur = q->head; cur && cur != e; prev = cur, cur = cur->next)    \
            ;                                                                \
        if (cur)                                                             \
            prefix##_unlink(q, prev, e);                                     \
    }                                                                        \
    static inline e_t *prefix##_find_tag(const q_t *q, uint64_t tag)         \
    {                                                                        \
        e_t *e;                                                              \
                                                                             \
        for (e = q->head; e && e->tag != tag; e = e->next)                   \
            ;                                                                \
        return e;                                                            \
    }

TACL__TL_FIFO_DEFINE(tacl__tl_opq, tacl__tl_opq_t, tacl__tl_op_t, tl_next)
TACL__TL_FIFO_DEFINE(tacl__tl_msgq, tacl__tl_msgq_t, tacl__tl_msg_t, next)

/** The status an operation on a done queue completes with. */
#define TACL__TL_OP_STATUS(op) ((op)->tl_priv[0])

/** Queue op on the done queue to complete with status. */
static inline void tacl__tl_opq_complete(tacl__tl_opq_t *done,
                                         tacl__tl_op_t *op,
                                         tacl_status_t status)
{
    TACL__TL_OP_STATUS(op) = (uint64_t)(int64_t)status;
    tacl__tl_opq_push(done, op);
}

/** Queue every operation of q, oldest first, on done with status. */
static inline void tacl__tl_opq_fail(tacl__tl_opq_t *done, tacl__tl_opq_t *q,
                                     tacl_status_t status)
{
    tacl__tl_op_t *op;

    while ((op = tacl__tl_opq_pop(q)))
        tacl__tl_opq_complete(done, op, status);
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

/** Empty q, handing each descriptor, oldest first, to free_msg. */
static inline void tacl__tl_msgq_drain(tacl__tl_msgq_t *q,
                                       void (*free_msg)(tacl__tl_msg_t *))
{
    tacl__tl_msg_t *msg;

    while ((msg = tacl__tl_msgq_pop(q)))
        free_msg(msg);
}

#endif /* TACL_TRANSPORT_OP_FIFO_H */
