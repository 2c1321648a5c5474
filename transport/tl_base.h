/*
 * The base of a transport instance: what every transport's instance has,
 * written once beside the ops table (DESIGN.md, "Transports"; STYLE.md:
 * what every transport needs is written once, not per transport).
 *
 * A transport's instance struct starts with a tacl__tl_base_t, which
 * starts with the tacl__tl_t header, so one pointer is all three.  The
 * base holds this rank and the world size, the bound on any wait, the
 * lock of tacl__tl_params_t, which ranks share this node, the done queue
 * (op_fifo.h), a sticky failure, the subsystem the instance logs under,
 * and the transport's own fail_pending(), which completes every
 * operation the instance holds with a status.
 *
 * The helpers below are the frame every transport repeated:
 *   init    tacl__tl_base_new() allocates the instance and fills the
 *           base from the params; tacl__tl_base_free() undoes it;
 *   post    tacl__tl_base_check() makes transport.h's checks of an
 *           operation under the instance's subsystem, then refuses it
 *           once the instance has failed;
 *   finish  tacl__tl_complete() queues an operation, which the transport
 *           no longer holds anywhere, on the done queue, and
 *           tacl__tl_base_finish() ends progress() by running those
 *           callbacks (each once: an operation leaves the queue before its
 *           callback runs), so none runs inside a post call;
 *   fail    tacl__tl_base_fail() records the instance's first failure and
 *           fails what is pending; tacl__tl_base_cancel_all() is the
 *           cancel_all slot of a transport whose cancel is just that.
 * What stays a transport's own: its peers, its queues of posted
 * operations, and its wire protocol.
 */
#ifndef TACL_TRANSPORT_TL_BASE_H
#define TACL_TRANSPORT_TL_BASE_H

#include <pthread.h>

#include "log.h"
#include "op_fifo.h"
#include "transport.h"

typedef struct tacl__tl_base tacl__tl_base_t;

/** Complete every operation the instance holds with status. */
typedef void (*tacl__tl_fail_fn_t)(tacl__tl_base_t *base,
                                   tacl_status_t status);

struct tacl__tl_base {
    tacl__tl_t super;          /* first: the instance is a tacl__tl_t */
    int rank;
    int nranks;
    double timeout_s;          /* bound on any wait: params', else 60 s */
    pthread_mutex_t *lock;     /* tacl__tl_params_t's, for wait() */
    tacl__subsys_t subsys;     /* where its errors are logged */
    int nlocal;                /* ranks of this node, this one included */
    int my_local;              /* this rank's index among them */
    int *local_of;             /* world rank -> local index, or -1 */
    tacl__tl_opq_t done;       /* completed; callbacks not run yet */
    tacl_status_t failed;      /* TACL_OK until the instance fails */
    tacl__tl_fail_fn_t fail_pending;
};

/**
 * Allocate a zeroed instance of size bytes (a struct starting with a
 * tacl__tl_base_t) for ops, and fill its base from params, logging under
 * subsys; *base_p gets it.  An error is decided and logged here.
 */
tacl_status_t tacl__tl_base_new(const tacl__transport_ops_t *ops, size_t size,
                                const tacl__tl_params_t *params,
                                tacl__subsys_t subsys,
                                tacl__tl_fail_fn_t fail_pending,
                                tacl__tl_base_t **base_p);

/** Free what tacl__tl_base_new() made, the instance included. */
void tacl__tl_base_free(tacl__tl_base_t *base);

/**
 * A new array of nlocal zeroed peer records of size bytes, one per rank
 * of this node by local index, each with its world rank in the int at
 * rank_offset; NULL, logged, when out of memory.
 */
void *tacl__tl_base_peers(const tacl__tl_base_t *base, size_t size,
                          size_t rank_offset);

/** Where world rank peer is (TACL__TL_PEER_*), or 0 for no rank. */
static inline unsigned tacl__tl_base_where(const tacl__tl_base_t *base,
                                           int peer)
{
    if (peer < 0 || peer >= base->nranks)
        return 0;
    return tacl__tl_where(peer, base->rank, base->local_of[peer] >= 0);
}

/**
 * The reachable slot of a transport that reaches every peer of its reach:
 * whether peer lies there.
 */
int tacl__tl_base_reachable(tacl__tl_t *tl, int peer);

/**
 * The checks of an operation posted to the instance (tacl__tl_check_op(),
 * logged under its subsystem), then its failure, if it failed.
 */
tacl_status_t tacl__tl_base_check(tacl__tl_base_t *base,
                                  const tacl__tl_op_t *op);

/** Queue op, held nowhere else now, to complete with status. */
static inline void tacl__tl_complete(tacl__tl_base_t *base,
                                     tacl__tl_op_t *op, tacl_status_t status)
{
    tacl__tl_opq_complete(&base->done, op, status);
}

/** Note the instance's failure, if it is the first; the one noted. */
static inline tacl_status_t tacl__tl_base_mark_failed(tacl__tl_base_t *base,
                                                      tacl_status_t status)
{
    if (base->failed == TACL_OK)
        base->failed = status;
    return base->failed;
}

/** The instance fails: note it and fail every pending op with status. */
void tacl__tl_base_fail(tacl__tl_base_t *base, tacl_status_t status);

/**
 * The end of progress(), which handled events: a failed instance fails
 * what was posted since, then the callbacks run.  Returns the failure,
 * or the events and callbacks counted.
 */
int tacl__tl_base_finish(tacl__tl_base_t *base, int events);

/** Whether progress() has callbacks to run or a failure to report. */
static inline int tacl__tl_base_ready(const tacl__tl_base_t *base)
{
    return base->done.head != NULL || base->failed != TACL_OK;
}

/**
 * The probe slot of a transport that keeps its unexpected messages in one
 * queue per peer of this node: the peers' records (base->nlocal of them,
 * stride bytes apart, each with its tacl__tl_msgq_t at qoff) are searched
 * for a message with tag, the oldest of its sender's, whose descriptor
 * holds its length as a uint64_t at len_off.
 */
int tacl__tl_base_probe_peers(const tacl__tl_base_t *base, const void *peers,
                              size_t stride, size_t qoff, size_t len_off,
                              uint64_t tag, int *peer, uint64_t *len);

/**
 * wait()'s sleep on a file descriptor the transport's events make
 * readable (fd), timeout_us at most; an interrupted sleep is no error.
 * what names the descriptor in the error of a failed poll.
 */
tacl_status_t tacl__tl_base_sleep_fd(const tacl__tl_base_t *base, int fd,
                                     int64_t timeout_us, const char *what);
/** As tacl__tl_base_sleep_fd, until any of n (1 to 8) fds is ready. */
tacl_status_t tacl__tl_base_sleep_fds(const tacl__tl_base_t *base,
                                      const int *fds, int n,
                                      int64_t timeout_us, const char *what);

/** The cancel_all slot: fail every pending op with status, call back. */
void tacl__tl_base_cancel_all(tacl__tl_t *tl, tacl_status_t status);

/** wait()'s bound in microseconds: timeout_us, or the instance's. */
static inline int64_t tacl__tl_base_wait_us(const tacl__tl_base_t *base,
                                            int64_t timeout_us)
{
    return timeout_us < 0 ? (int64_t)(base->timeout_s * 1e6) : timeout_us;
}

/*
 * Wire tags of the network transports (ucx, ofi), which match on one
 * 64-bit tag, so the source rank travels in it:
 *   bits 63..48  source world rank     (so at most 65536 ranks)
 *   bits 47..36  communicator id, low 12 bits of tacl's bits 40 and up
 *   bit  35      the top bit of tacl's sequence field: point-to-point
 *                (lib/comm.h's TACL__SEQ_HALF), kept so that a send or
 *                receive never aliases a collective
 *   bits 34..20  the low 15 bits of tacl's 20-bit sequence field
 *   bits 19..0   step, all 20 bits
 * Two messages alias only if their communicator ids are equal modulo 4096
 * and their sequence numbers equal modulo 32768 while both are in flight
 * between the same pair of ranks, which the executor never does.  A
 * receive from any source probes with TACL__TL_WIRE_ANY_SRC as its mask.
 */
#define TACL__TL_WIRE_MAX_RANKS (1 << 16)
#define TACL__TL_WIRE_SRC_SHIFT 48
#define TACL__TL_WIRE_COMM_BITS 12
#define TACL__TL_WIRE_SEQ_BITS 16   /* the p2p bit and 15 of the sequence */
#define TACL__TL_WIRE_STEP_BITS 20
#define TACL__TL_WIRE_ANY_SRC (~(0xffffull << TACL__TL_WIRE_SRC_SHIFT))

/** The wire tag of a tacl message tag sent by world rank src. */
static inline uint64_t tacl__tl_wire_tag(int src, uint64_t tag)
{
    uint64_t step = tag & ((1ull << TACL__TL_WIRE_STEP_BITS) - 1);
    uint64_t seq =
        (tag >> 20) & ((1ull << (TACL__TL_WIRE_SEQ_BITS - 1)) - 1);
    uint64_t p2p = (tag >> 39) & 1;
    uint64_t comm = (tag >> 40) & ((1ull << TACL__TL_WIRE_COMM_BITS) - 1);

    return ((uint64_t)(src & 0xffff) << TACL__TL_WIRE_SRC_SHIFT) |
           (comm << (TACL__TL_WIRE_SEQ_BITS + TACL__TL_WIRE_STEP_BITS)) |
           (p2p << (TACL__TL_WIRE_SEQ_BITS - 1 + TACL__TL_WIRE_STEP_BITS)) |
           (seq << TACL__TL_WIRE_STEP_BITS) | step;
}

/** The source rank a wire tag carries. */
static inline int tacl__tl_wire_src(uint64_t wire)
{
    return (int)(wire >> TACL__TL_WIRE_SRC_SHIFT);
}

#endif /* TACL_TRANSPORT_TL_BASE_H */
