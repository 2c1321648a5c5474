/*
 * The transport interface.  A transport is one const tacl__transport_ops_t
 * filled by field name; a slot it lacks points to a shared stub that
 * returns TACL_ERR_UNSUPPORTED, so no caller ever checks for NULL.  Callers
 * go through the static inline wrappers at the end of this file.
 *
 * Model: one transport instance (tacl__tl_t) per process context.  It is
 * created collectively (every rank of the context calls init, which may
 * exchange addresses through params->exchange), then moves tagged messages
 * between "world" ranks of that context.  Operations are non-blocking: send
 * and recv post a tacl__tl_op_t and return; the transport completes it from
 * inside progress() by calling op->cb exactly once (never from inside the
 * post call).  Matching is by (source rank, tag): a receive matches the
 * send from op->peer with the same tag; two messages with the same source
 * and tag are matched in the order they were sent.  Messages may be of any
 * length including zero; a receive whose length differs from the send's
 * completes with TACL_ERR_INVALID_USAGE (tacl__tl_length_error): the
 * ranks called one operation with different counts or types.
 */
#ifndef TACL_TRANSPORT_TRANSPORT_H
#define TACL_TRANSPORT_TRANSPORT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "log.h"
#include "tacl.h"

typedef struct tacl__tl tacl__tl_t;
typedef struct tacl__tl_op tacl__tl_op_t;

/** Completion callback: called once, from progress(), with the result. */
typedef void (*tacl__tl_cb_t)(tacl__tl_op_t *op, tacl_status_t status);

struct tacl__tl_op {
    /* Set by the caller before posting. */
    int peer;                  /* world rank */
    uint64_t tag;
    void *buf;                 /* send: source; recv: destination */
    uint64_t len;
    uint8_t memtype;           /* tacl_memtype_t, never AUTO */
    uint8_t hints;             /* TACL__TL_HINT_*; 0 when nothing is known */
    tacl__tl_cb_t cb;
    void *arg;                 /* for the caller's use */
    /* The transport's own state; the caller leaves it alone. */
    tacl__tl_op_t *tl_next;
    uint64_t tl_priv[6];
};

/*
 * Hints about an operation's buffer.  A transport may ignore them.
 *
 * PINNABLE, on a receive: the buffer is the library's own memory, backed
 * by huge pages where the system has them, so another process pins it
 * for a cross-memory copy far more cheaply than a caller's buffer of
 * small pages (one page-table entry per 2 MB instead of per 4 KB); shm
 * then has the sender write the message into it instead of pulling it
 * from the sender's buffer.
 */
#define TACL__TL_HINT_PINNABLE (1u << 0)
/*
 * STREAM, on a receive: nothing reads the buffer soon, so a transport
 * that copies with the CPU may write it with non-temporal stores, which
 * neither read the destination first nor evict what others will read.
 */
#define TACL__TL_HINT_STREAM (1u << 1)

/**
 * What a transport's init gets.  exchange() is collective over the
 * context: every rank passes its own size-byte record in
 * all[rank * size .. ] and gets back everyone's.
 */
typedef struct {
    int rank;
    int nranks;
    const char *node_id;       /* this rank's node identity */
    const char *const *node_ids; /* node identity of every world rank */
    double timeout_s;          /* bound on any wait */
    tacl_status_t (*exchange)(void *ctx, void *all, size_t size);
    void *exchange_ctx;
    /*
     * The lock its callers hold around every op but wait(), which is
     * called without it (several threads may wait, and one progress
     * meanwhile): wait() takes it around everything but the sleep
     * itself.  NULL: a single-threaded user, nothing to take.
     */
    pthread_mutex_t *lock;
} tacl__tl_params_t;

/** Take and release a transport's lock (tacl__tl_params_t), if any. */
static inline void tacl__tl_lock(pthread_mutex_t *lock)
{
    if (lock != NULL)
        pthread_mutex_lock(lock);
}

static inline void tacl__tl_unlock(pthread_mutex_t *lock)
{
    if (lock != NULL)
        pthread_mutex_unlock(lock);
}

/*
 * Capability bits: the memory types a transport reads and writes, and
 * whether it writes one-sided.  tacl__tl_select() chooses by them.
 */
#define TACL__TL_CAP_HOST (1u << 0)     /* reads/writes host memory */
#define TACL__TL_CAP_CUDA (1u << 1)     /* reads/writes CUDA memory */
#define TACL__TL_CAP_ONE_SIDED (1u << 2)
/*
 * MAP: the peers this transport reaches can map one another's memory,
 * so a shared-memory area of their own can serve them (the fast
 * engine's).  Ask tacl__tl_can_map(); tacl__tl_select() ignores it.
 */
#define TACL__TL_CAP_MAP (1u << 3)
/* PROBE: its probe slot finds messages, so a receive from any source can
 * be served through it (a transport without it has the stub). */
#define TACL__TL_CAP_PROBE (1u << 4)

/** Where a peer is, seen from this rank; also the bits of a reach. */
typedef enum {
    TACL__TL_PEER_SELF = 1u << 0,      /* this rank itself */
    TACL__TL_PEER_NODE = 1u << 1,      /* another rank of this node */
    TACL__TL_PEER_NET = 1u << 2        /* a rank of another node */
} tacl__tl_where_t;

typedef struct tacl__transport_ops {
    size_t size;               /* sizeof(tacl__transport_ops_t) */
    const char *name;
    unsigned caps;             /* TACL__TL_CAP_* */
    /**
     * The peers it serves, TACL__TL_PEER_*.  reachable() answers for one
     * rank of an instance and agrees with it.
     */
    unsigned reach;
    /** Collective over the context; creates the instance. */
    tacl_status_t (*init)(const tacl__tl_params_t *params, tacl__tl_t **tl_p);
    /** Whether this instance can reach world rank peer. */
    int (*reachable)(tacl__tl_t *tl, int peer);
    tacl_status_t (*send)(tacl__tl_t *tl, tacl__tl_op_t *op);
    tacl_status_t (*recv)(tacl__tl_t *tl, tacl__tl_op_t *op);
    /**
     * Make progress; never blocks.  Returns the number of events handled
     * (>= 0), or a negative status for a failure of the whole instance
     * (a peer died): then every pending op has been completed with it.
     */
    int (*progress)(tacl__tl_t *tl);
    /**
     * Sleep until something may have arrived or timeout_us passed; returns
     * at once if there may be work.  Lets 8 ranks share 2 cores.  Called
     * without the instance's lock (see tacl__tl_params_t).
     */
    tacl_status_t (*wait)(tacl__tl_t *tl, int64_t timeout_us);
    /**
     * Receive from any source: a message with tag, from any peer the
     * instance reaches, that no receive has taken (the oldest of its
     * sender's).  Returns 1 with
     * its sender (world rank) in *peer and its length in *len, 0 when
     * there is none (yet), or a negative status when the instance can
     * never find one (its provider cannot look): the receive fails.  It never takes the message: a receive posted next
     * for (*peer, tag) matches exactly that one, by the (source, tag)
     * order.  A message a receive already posted will take (the
     * transport pairs them later) is not reported.  The executor holds an any-source receive and asks every
     * instance after their progress().
     */
    int (*probe)(tacl__tl_t *tl, uint64_t tag, int *peer, uint64_t *len);
    /**
     * Complete every pending op with status (used on abort and on fatal
     * errors found elsewhere, such as a dead peer seen by the bootstrap).
     */
    void (*cancel_all)(tacl__tl_t *tl, tacl_status_t status);
    /** Free the instance.  Pending ops must have been cancelled. */
    void (*close)(tacl__tl_t *tl);
} tacl__transport_ops_t;

/** Every instance starts with this header. */
struct tacl__tl {
    const tacl__transport_ops_t *ops;
};

/* Stubs for slots a transport does not fill. */
int tacl__tl_reachable_none(tacl__tl_t *tl, int peer);
tacl_status_t tacl__tl_post_unsupported(tacl__tl_t *tl, tacl__tl_op_t *op);
tacl_status_t tacl__tl_wait_yield(tacl__tl_t *tl, int64_t timeout_us);
int tacl__tl_probe_none(tacl__tl_t *tl, uint64_t tag, int *peer,
                        uint64_t *len);

/** Why tacl__tl_select() found no transport, in a sentence. */
typedef struct {
    char text[200];
} tacl__tl_why_t;

/**
 * Choose the transport for a message: the first of tls[0..ntl), listed in
 * order of preference, whose reach covers where and whose capabilities
 * list memtype (TACL_MEM_HOST or TACL_MEM_CUDA).  Returns its index, or -1
 * when none fits; then *why_p says what is missing (it is left alone on
 * success).  Reads only the ops tables, never the instances' state.
 */
int tacl__tl_select(tacl__tl_t *const *tls, int ntl, tacl__tl_where_t where,
                    tacl_memtype_t memtype, tacl__tl_why_t *why_p);

/**
 * The checks every transport makes of an operation posted to it, with
 * its own reachable() and capabilities: the instance reaches op->peer,
 * it moves op->memtype, and a message of some bytes has a buffer.  rank
 * is this rank, for the message; an error is decided and logged here,
 * under subsys.
 */
tacl_status_t tacl__tl_check_op(tacl__tl_t *tl, const tacl__tl_op_t *op,
                                int rank, tacl__subsys_t subsys);

/**
 * The error of a receive (expecting want bytes) matched by a message of
 * got bytes (more than got when more is set) from peer: the caller's, as
 * the ranks called one operation with different counts or types.
 * Decided and logged here, under subsys.
 */
tacl_status_t tacl__tl_length_error(int peer, uint64_t tag, uint64_t got,
                                    int more, uint64_t want,
                                    tacl__subsys_t subsys);

/** Where world rank peer is for world rank rank; same_node: same node. */
static inline tacl__tl_where_t tacl__tl_where(int peer, int rank,
                                              int same_node)
{
    return peer == rank ? TACL__TL_PEER_SELF
           : same_node ? TACL__TL_PEER_NODE : TACL__TL_PEER_NET;
}

/* The transports built into this library. */
extern const tacl__transport_ops_t tacl__tl_self_ops;
extern const tacl__transport_ops_t tacl__tl_shm_ops;
/* Built with UCX (TACL_HAVE_UCX) and libfabric (TACL_HAVE_OFI) only. */
extern const tacl__transport_ops_t tacl__tl_ucx_ops;
extern const tacl__transport_ops_t tacl__tl_ofi_ops;
/* Built with CUDA only (TACL_HAVE_CUDA). */
extern const tacl__transport_ops_t tacl__tl_cuda_ipc_ops;

static inline int tacl__tl_reachable(tacl__tl_t *tl, int peer)
{
    return tl->ops->reachable(tl, peer);
}
static inline tacl_status_t tacl__tl_send(tacl__tl_t *tl, tacl__tl_op_t *op)
{
    return tl->ops->send(tl, op);
}
static inline tacl_status_t tacl__tl_recv(tacl__tl_t *tl, tacl__tl_op_t *op)
{
    return tl->ops->recv(tl, op);
}
static inline int tacl__tl_progress(tacl__tl_t *tl)
{
    return tl->ops->progress(tl);
}
static inline tacl_status_t tacl__tl_wait(tacl__tl_t *tl, int64_t timeout_us)
{
    return tl->ops->wait(tl, timeout_us);
}
static inline int tacl__tl_probe(tacl__tl_t *tl, uint64_t tag, int *peer,
                                 uint64_t *len)
{
    return tl->ops->probe(tl, tag, peer, len);
}
static inline void tacl__tl_cancel_all(tacl__tl_t *tl, tacl_status_t status)
{
    tl->ops->cancel_all(tl, status);
}
static inline void tacl__tl_close(tacl__tl_t *tl)
{
    tl->ops->close(tl);
}
static inline const char *tacl__tl_name(const tacl__tl_t *tl)
{
    return tl->ops->name;
}
/** Whether the peers tl reaches can share a mapped area (CAP_MAP). */
static inline int tacl__tl_can_map(const tacl__tl_t *tl)
{
    return (tl->ops->caps & TACL__TL_CAP_MAP) != 0;
}

#endif /* TACL_TRANSPORT_TRANSPORT_H */
