/*
 * CUDA device memory across nodes, staged through pinned host chunks:
 * one module that both network transports (ucx, ofi) lend their host
 * data path to.  stage.c has the design.
 */
#ifndef TACL_TRANSPORT_STAGE_H
#define TACL_TRANSPORT_STAGE_H

#include "tl_base.h"

/* What a network transport lends the staging: its host data path. */
typedef struct {
    /** Post a chunk (a host op, its callback set) as a send or receive. */
    tacl_status_t (*post)(tacl__tl_base_t *tl, tacl__tl_op_t *op, int recv);
    /**
     * Whether the next message from peer with tag has arrived: 1, its
     * length in *len and what take needs in *handle; 0 when not yet; a
     * negative status when it never will (the peer's connection is
     * gone).  A message found must be taken next.
     */
    int (*arrived)(tacl__tl_base_t *tl, int peer, uint64_t tag,
                   uint64_t *len, void **handle);
    /** Receive the message arrived() found into op's host buffer. */
    tacl_status_t (*take)(tacl__tl_base_t *tl, tacl__tl_op_t *op,
                          void *handle);
    /** TACL_OK when a send to peer can be posted, else why not. */
    tacl_status_t (*can_send)(tacl__tl_base_t *tl, int peer);
    const char *name;          /* the transport, for logs */
} tacl__stage_net_t;

typedef struct tacl__stage tacl__stage_t;

/**
 * At a transport's init: a stage when tacl is built with CUDA and a
 * device is usable, of nchunks pinned chunks of chunk bytes (half for
 * each direction, made at the first device message); NULL otherwise
 * (logged: the transport moves host memory only).
 */
tacl__stage_t *tacl__stage_new(tacl__tl_base_t *tl,
                               const tacl__stage_net_t *net, uint64_t chunk,
                               int nchunks);
/** Post a checked send (or receive if recv) of a non-empty device buffer. */
tacl_status_t tacl__stage_post(tacl__stage_t *st, tacl__tl_op_t *op,
                               int recv);
/** Poll the copies and start chunks; never blocks.  Events handled. */
int tacl__stage_progress(tacl__stage_t *st);
/** Whether a device message with peer (any peer if -1) is staged; st may
 * be NULL. */
int tacl__stage_pending(const tacl__stage_t *st, int peer);
/** End every staged message with status (waits for its copies). */
void tacl__stage_fail(tacl__stage_t *st, tacl_status_t status);
/** Free the chunks, events and stream, and st; after the transport's
 * host data path is gone.  st may be NULL. */
void tacl__stage_close(tacl__stage_t *st);

#endif
