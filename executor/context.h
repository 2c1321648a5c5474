/*
 * Contexts: what one tacl_comm_init_rank() sets up below the API and every
 * communicator split from it shares: the bootstrap, the node table and
 * topology, the transport instances, and the schedules in flight.
 *
 * Creation runs the bootstrap, exchanges node identities (TACL_NODE_ID,
 * else host name and boot id), numbers the nodes in order of their lowest
 * rank, builds the topology and creates the transports (self for the rank
 * itself, shm for the ranks of the same node, the network for the rest).
 *
 * Locking: one mutex per context serialises posting and progress, so
 * several threads may use communicators of one context; a blocking wait
 * releases it between progress rounds.
 */
#ifndef TACL_EXECUTOR_CONTEXT_H
#define TACL_EXECUTOR_CONTEXT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "tacl.h"
#include "bootstrap.h"
#include "device.h"
#include "topo.h"
#include "transport.h"

#define TACL__NODE_ID_LEN 64
#define TACL__MAX_TL 4

typedef struct tacl__exec tacl__exec_t;

/* Intervals of network use a context remembers (tacl__exec_net_idle). */
#define TACL__NETLOG 1024

typedef struct tacl__ctx {
    int refcount;              /* communicators using it (under lock) */
    int rank;                  /* world rank */
    int nranks;
    double timeout_s;
    tacl__bootstrap_t *bs;
    char (*node_ids)[TACL__NODE_ID_LEN]; /* per world rank */
    int *node_of;              /* node index per world rank */
    int n_nodes;
    tacl__topo_t topo;         /* nodes, links, node of each world rank */
    tacl__tl_t *tls[TACL__MAX_TL];
    int ntl;
    int8_t *tl_of;             /* transport index per world rank, -1 none */
    pthread_mutex_t lock;
    tacl__exec_t *active;      /* executions in flight */
    tacl__tl_op_t *held_head;  /* receives held for a message from any
                                  peer, or behind one, oldest first,
                                  linked by tl_next (executor.c) */
    tacl__tl_op_t *held_tail;
    int fg_active;             /* executions in flight on foreground
                                  communicators (under the lock) */
    int fg_net_sends;          /* their sends in flight to other nodes */
    uint64_t fg_net_quiet_ns;  /* when the last of those ended */
    /* When the link to other nodes will have carried the bytes of the
     * foreground sends started so far, and of the background ones, at
     * the node's rate shared by its ranks (executor.c, link_charge; 0
     * ns a byte when the topology has no rate): a send over TCP ends
     * once its bytes are queued, long before the link carries them. */
    uint64_t fg_link_free_ns;
    uint64_t bg_link_free_ns;
    /* When foreground sends kept the link to other nodes busy
     * (tacl__exec_net_idle; executor.c, netlog_mark), while someone
     * asks (netlog_users): netlog_n intervals so far, the oldest
     * overwritten, the last one held open while sends are in flight
     * (netlog_open); the link carries their bytes until carry_ns
     * (under the lock). */
    int netlog_users;
    int netlog_open;
    uint64_t netlog_n;
    uint64_t netlog_carry_ns;
    uint64_t netlog[TACL__NETLOG][2];
    _Atomic int sched_active;  /* of them, schedules (not an engine's);
                                  changed under the lock, a waiter's
                                  poll reads it without */
    _Atomic tacl_status_t fatal; /* sticky failure of the whole context;
                                  set once under the lock, after
                                  fatal_msg, and read without it */
    char fatal_msg[TACL__ERROR_LEN];
    uint64_t last_check_ns;    /* last bootstrap liveness check */
    /* The wait policy's settings (wait.h), read at creation. */
    int local_ranks;           /* ranks on this node, itself counted */
    int oversubscribed;        /* more ranks on this node than cores */
    long long wait_spin;       /* TACL_SHM_SPIN */
    uint64_t wait_yield_ns;    /* TACL_SHM_YIELD_US */
    uint64_t bg_max_hold_ns;   /* TACL_BG_MAX_HOLD_MS */
    uint64_t bg_quiet_ns;      /* TACL_BG_QUIET_US */
    uint64_t last_event_ns;    /* last progress round that moved */
    unsigned flight_gen;       /* last TACL_FLIGHT_SIGNAL dumped for */
    /* The progress thread (progress.c), under the lock. */
    int progress_users;        /* communicators that asked for it */
    unsigned progress_gen;     /* bumped to stop the running thread */
    int progress_running;      /* started and not yet joined */
    pthread_t progress_tid;
    pthread_cond_t progress_cv; /* an execution started, a waiter left,
                                   or stop */
    int waiters;               /* threads in tacl__exec_wait: while there
                                  are any, they drive the rounds and the
                                  progress thread sleeps */
    /* CUDA (device.h): the device current in the creating thread, or -1
     * with the reason; its stream and events, made on first use. */
    int cuda_device;
    char cuda_why[160];
    tacl__dev_t *dev;
    _Atomic int dev_active;    /* executions with a device part running:
                                  idle waits poll rather than sleep */
    tacl__exec_t *reap;        /* ended detached executions, to free */
    tacl__exec_t *engine_spare; /* a freed engine execution, kept for the
                                   next (one allocation per split call
                                   saved); a plain allocation */
} tacl__ctx_t;

/**
 * Create the context of world rank rank of nranks meeting at id (the
 * bootstrap, the topology and the transports), with a reference count of
 * one.  Collective over the nranks processes.  timeout_s bounds every
 * wait of the bootstrap and the transports (0: TACL_TIMEOUT).
 */
tacl_status_t tacl__ctx_create(const tacl_unique_id_t *id, int rank,
                               int nranks, double timeout_s,
                               tacl__ctx_t **ctx_p);

/** Take one more reference to ctx (a new communicator shares it). */
void tacl__ctx_retain(tacl__ctx_t *ctx);

/** Drop one reference; the last one closes the transports and frees ctx. */
void tacl__ctx_release(tacl__ctx_t *ctx);

/** Mark the whole context failed: every pending operation ends with it. */
void tacl__ctx_set_fatal(tacl__ctx_t *ctx, tacl_status_t status);

/** Progress every execution of a context once (takes the lock). */
int tacl__ctx_progress(tacl__ctx_t *ctx);

/** tacl__ctx_progress with the lock held. */
int tacl__ctx_progress_locked(tacl__ctx_t *ctx);

/**
 * A waiter's round, lock held: tacl__ctx_progress_locked, except that
 * while only engines' executions are in flight and the waiter still
 * polls (spinning) the transports are left alone: nothing of the
 * waiter's moves through them, as a blocking fast-engine call leaves
 * them while it spins (fastpath.c), and the round costs a tenth.
 */
int tacl__ctx_progress_wait(tacl__ctx_t *ctx, int spinning);

/**
 * Free the context's ended detached executions (tacl__exec_detach); call
 * it without the lock.
 */
void tacl__ctx_reap(tacl__ctx_t *ctx);

/**
 * Sleep in the transports (or the engine of an execution in flight) until
 * a message arrives, 1 ms at most; call it without the lock.
 */
void tacl__ctx_idle_wait(tacl__ctx_t *ctx);


/** Of ctx's executions in flight, the one with the shortest timeout. */
const tacl__exec_t *tacl__ctx_shortest_timeout(const tacl__ctx_t *ctx);

/**
 * Fail ctx with TACL_ERR_TIMEOUT, naming exec's communicator, when
 * nothing moved for longer than that communicator's timeout since
 * last_event (tacl__now_ns() time) or the context's last progress,
 * whichever is later; lock held.
 */
void tacl__ctx_check_timeout(tacl__ctx_t *ctx, const tacl__exec_t *exec,
                             uint64_t last_event);

/*
 * The progress thread (progress.c).  While at least one communicator
 * holds it, one thread per context progresses the context's executions
 * so that non-blocking operations complete (and their completion hooks
 * run) without anyone waiting: under the lock, like any waiting thread,
 * sleeping in the transports between rounds while something is in
 * flight and on a condition variable (woken by tacl__exec_start, and
 * every second regardless) while nothing is.  It also applies the
 * communicators' timeouts to what it progresses.
 */
/** Take a hold on ctx's progress thread, starting it for the first. */
tacl_status_t tacl__ctx_progress_hold(tacl__ctx_t *ctx);
/** Drop a hold; the last one stops and joins the thread.  Call it
 * without the lock, never from the thread itself. */
void tacl__ctx_progress_drop(tacl__ctx_t *ctx);

#endif /* TACL_EXECUTOR_CONTEXT_H */
