/*
 * The API layer's internal objects: communicators, requests, and posting.
 *
 * A communicator runs on a context (executor/context.h) that
 * tacl_comm_init_rank() creates; communicators made by split share their
 * parent's context (and so its connections), which lives until its last
 * communicator is destroyed.  The part of a communicator the executor
 * needs (its context, world ranks, tag id, counters, scratch pool) is the
 * embedded tacl__xcomm_t.
 */
#ifndef TACL_LIB_COMM_H
#define TACL_LIB_COMM_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "tacl.h"
#include "algo.h"
#include "executor.h"
#include "sim.h"
#include "topo_view.h"

#define TACL__COMM_ALIVE 0x7ac1c0de
#define TACL__COMM_DEAD 0xdeadc0de

/*
 * Per-feature state a communicator carries (the plan cache, the fast
 * engine's area, the simulation tuner's cluster): each feature's struct
 * begins with a tacl__comm_ext_t, sits in its slot of comm->ext from the
 * feature's first use, and is freed with the communicator by its own
 * free(), which destroy calls for every slot without naming features.
 * A feature that sends comm's traffic on a communicator of its own sets
 * traffic to it, and comm's counters include that one's.
 */
typedef struct tacl__comm_ext {
    void (*free)(struct tacl__comm_ext *ext);
    struct tacl_comm *traffic;
} tacl__comm_ext_t;

typedef enum {
    TACL__EXT_PLANS = 0,       /* plan.c: built schedules by signature */
    TACL__EXT_FAST,            /* fast_area.c: the area and the memo */
    TACL__EXT_TUNE,            /* tune_sim.c: cluster and picks */
    TACL__EXT_SPARSE,          /* sparse.c: owners' domains */
    TACL__EXT_DEFERRED,        /* deferred.c: shadow comm and worker */
    TACL__EXT_COUNT
} tacl__ext_slot_t;

struct tacl_comm {
    uint32_t magic;
    int rank;
    int size;
    tacl__xcomm_t x;           /* what the executor runs schedules on */
    uint64_t seq;              /* collective operations so far */
    uint64_t *p2p_send;        /* sends posted to each peer */
    uint64_t *p2p_recv;        /* receives posted from each peer, and
                                  (at [size]) from any peer */
    uint64_t splits;           /* splits so far */
    int check;                 /* exchange call signatures (TACL_CHECK) */
    uint64_t shrinks;          /* shrinks so far */
    uint64_t groups;           /* tacl_comm_create_group calls so far */
    int *node_of;              /* node index per comm rank */
    tacl__topo_view_t view;    /* its fast_max is the fast engine's
                                  (fast_area.c) */
    struct tacl_comm *local;   /* cached tacl_comm_get_local() */
    struct tacl_comm *rail;    /* cached tacl_comm_get_rail() */
    int is_derived;            /* owned by its parent: not for the user to
                                  destroy */
    char last_algo[16];        /* algorithm of the latest operation */
    tacl__comm_ext_t *ext[TACL__EXT_COUNT]; /* per-feature state */
    tacl_status_t async_error;
    /* The message of the last error returned on it (hold.c). */
    char last_error[TACL__ERROR_LEN + TACL__COMM_NAME_LEN + 32];
    struct tacl_comm *grave_next; /* destroyed handles stay recognisable */
    int progress_thread;       /* holds its context's progress thread */
    int stream_hold;           /* holds it for operations on streams */
    /* Non-blocking init: the fields above are written by the init thread
     * and read by others only once initializing reads 0. */
    _Atomic int initializing;  /* 1 while the init thread runs */
    _Atomic int init_joinable; /* the init thread is still to be joined */
    pthread_t init_thread;
    tacl_status_t init_status; /* how the init ended */
    int calls;                 /* threads inside a call on it, but its
                                  owner (atomic) */
    int closing;               /* an abort or destroy has begun (atomic) */
    /* The owner: the first thread to call on the communicator, once the
     * process may use the heavy fence (hold.c).  It holds the
     * communicator with plain stores of owner_calls, which only it
     * writes; other threads count themselves in calls. */
    uintptr_t owner;           /* its pthread_self(), 0 none (atomic) */
    int owner_calls;           /* the owner's holds (atomic) */
};

/** comm's state of the feature in slot, NULL before its first use. */
static inline void *tacl__comm_ext(tacl_comm_t comm, tacl__ext_slot_t slot)
{
    return comm->ext[slot];
}

/** The communicator that embeds xc. */
static inline tacl_comm_t tacl__comm_of(tacl__xcomm_t *xc)
{
    return (tacl_comm_t)((char *)xc - offsetof(struct tacl_comm, x));
}

/*
 * Holding a communicator for a call, and the last-error rule (hold.c,
 * which calls nothing else in lib/).
 */
/** Check a handle: TACL_OK, or an error recorded with a message. */
tacl_status_t tacl__comm_check(tacl_comm_t comm);

/**
 * Begin a call on comm: check the handle and hold it until
 * tacl__comm_leave().  An abort or destroy from another thread closes the
 * handle to new calls and waits (bounded by the timeout) for the held ones
 * to leave before it frees what they use; a call that arrives once it has
 * begun fails with TACL_ERR_INVALID_USAGE.  Holds nest.  The
 * communicator's owner thread holds it without an atomic
 * read-modify-write or fence (see comm.c).
 */
tacl_status_t tacl__comm_enter(tacl_comm_t comm);
void tacl__comm_leave(tacl_comm_t comm);

/** Whether the calling thread is comm's owner (it holds comm with plain
 *  stores, and alone uses the fast engine's memo). */
static inline int tacl__comm_is_owner(tacl_comm_t comm)
{
    return __atomic_load_n(&comm->owner, __ATOMIC_RELAXED) ==
           (uintptr_t)pthread_self();
}

/** An entry point's body: return `call` (a status) run holding comm. */
#define TACL__COMM_HELD(comm, call)                                          \
    do {                                                                     \
        tacl_status_t held_st_;                                              \
        tacl__last_error_clear();                                            \
        held_st_ = tacl__comm_enter(comm);                                   \
        if (held_st_ != TACL_OK)                                             \
            return held_st_;                                                 \
        held_st_ = (call);                                                   \
        tacl__comm_leave(comm);                                              \
        return held_st_;                                                     \
    } while (0)

/**
 * The last-error rule, owned here: a call that returns an error leaves
 * its message, in the thread's last error and, when the call has a
 * usable communicator, in the communicator's (prefixed with its name
 * when it has one).  Every error exit of an entry point passes through
 * this.  When nothing recorded a message (an error that reached the call
 * from another thread: a request a progress thread failed, a context an
 * abort or a dead peer failed), the context's failure message stands in,
 * else the status's own words: a failed call never leaves an empty
 * message.  Returns status.
 */
tacl_status_t tacl__comm_fail(tacl_comm_t comm, tacl_status_t status);

/**
 * tacl_comm_estimate of a checked operation *args (estimate.c): the
 * decider's answer for a blocking call alone, simulated on comm's
 * cluster.  Also a quantized call's (qbits set), which the public form
 * cannot describe.
 */
tacl_status_t tacl__estimate_args(tacl_comm_t comm, tacl__coll_args_t *args,
                                  tacl_sim_info_t *info_p);

/**
 * Close comm (and its derived communicators) to new calls, for an abort
 * or destroy: TACL_ERR_INVALID_USAGE if another thread closed it first.
 */
tacl_status_t tacl__comm_close(tacl_comm_t comm);
/**
 * Wait, at most timeout_s, for the calls other threads are in on a
 * closed comm (and its derived ones) to leave: TACL_OK, or
 * TACL_ERR_TIMEOUT with a call still inside.
 */
tacl_status_t tacl__comm_wait_calls(tacl_comm_t comm, double timeout_s);
/** Undo tacl__comm_close() for a destroy that refuses. */
void tacl__comm_reopen(tacl_comm_t comm);
/**
 * Whether every node of comm has the same number of ranks, which the
 * schemes on node and rail communicators need (the same answer on every
 * rank: node_of is the same table everywhere).
 */
int tacl__comm_nodes_even(tacl_comm_t comm);
/**
 * TACL_OK where every node of comm has as many ranks, else
 * TACL_ERR_UNSUPPORTED with a message: "<what> needs the same number of
 * ranks on every node (...)".
 */
tacl_status_t tacl__comm_need_even_nodes(tacl_comm_t comm, const char *what);

/** The memory type of a caller buffer (HOST unless a CUDA pointer). */
tacl_memtype_t tacl__memtype_detect(const void *ptr);

/*
 * Requests: one or more executions (a group spans communicators).
 */
/* A request's state (request.c): completion, callback and free agree
 * through it without a lock. */
enum {
    TACL__REQ_PENDING = 0,      /* running, no callback */
    TACL__REQ_HOOKED,           /* running, its callback set */
    TACL__REQ_CALLING,          /* done; the completion may be running
                                   the callback */
    TACL__REQ_DONE              /* done, and any callback returned */
};

struct tacl_request {
    pthread_mutex_t lock;       /* one tacl_request_set_callback at a time;
                                   first: a recycled request keeps it */
    int nexec;
    tacl__exec_t **execs;       /* &one for a request of one */
    tacl__exec_t *one;
    _Atomic int pending;        /* executions still running, + a guard */
    _Atomic int first_error;    /* the first failed execution's status */
    _Atomic int state;          /* TACL__REQ_* */
    tacl_status_t status;       /* final; read once state is CALLING */
    tacl_request_callback_t cb; /* set before state turns HOOKED */
    void *cb_arg;
    /* A persistent request (persist.c): its one execution runs again at
     * each tacl_start; done is 1 while it is inactive. */
    int persistent;
    tacl_comm_t comm;           /* persistent: where it was made */
    tacl__coll_args_t args;     /* persistent: the operation (seq 0) */
    double timeout_s;           /* deferred (nexec 0): a wait's bound */
    char *why;                  /* deferred: the failure's message */
};

tacl_status_t tacl__request_create(tacl__exec_t **execs, int nexec,
                                   tacl_request_t *req_p);
/** Whether req is done: its status final and any callback returned, so
 *  that a test or wait that reports it done comes after the callback. */
static inline int tacl__request_done(tacl_request_t req)
{
    return atomic_load_explicit(&req->state, memory_order_acquire) ==
           TACL__REQ_DONE;
}
/**
 * The request of one execution just started, with its context's lock
 * held (in the same round trip of the lock as the start).  On failure
 * (no memory) the caller, without the lock, waits for exec and frees it.
 */
tacl_status_t tacl__request_of_locked(tacl__exec_t *exec,
                                      tacl_request_t *req_p);
/** After tacl__request_of_locked gave status, without the lock: on
 *  failure wait for exec and free it.  Returns status. */
tacl_status_t tacl__request_or_wait(tacl__exec_t *exec,
                                    tacl_status_t status);
/**
 * A persistent request of exec (prepared, not started) for the operation
 * args on comm: complete, with TACL_OK, until its first start.
 */
tacl_status_t tacl__request_persistent(tacl_comm_t comm,
                                       const tacl__coll_args_t *args,
                                       tacl__exec_t *exec,
                                       tacl_request_t *req_p);
/**
 * A request of no execution, completed by tacl__request_finish() from
 * another thread (deferred.c's worker); a wait on it gives up after
 * timeout_s with TACL_ERR_TIMEOUT, the request still pending.
 */
tacl_status_t tacl__request_deferred(double timeout_s, tacl_request_t *req_p);
/** Complete a deferred request with status (once), running its callback;
 *  why (copied) is the message a failed wait repeats in its thread. */
void tacl__request_finish(tacl_request_t req, tacl_status_t status,
                          const char *why);
/** Start an inactive persistent request with sequence number seq; lock
 *  of its context held. */
tacl_status_t tacl__request_restart(tacl_request_t req, uint64_t seq);

/*
 * Posting operations (coll.c, group.c, ops.c).
 */
typedef struct {
    tacl_comm_t comm;
    tacl__coll_args_t args;
    int checked;         /* this op reserved its call's check sequence */
    uint64_t check_seq;  /* the first of the two it reserved */
    tacl_stream_t stream; /* the caller's CUDA stream, NULL none */
    int vgather;         /* it reserved vseq to gather every rank's
                            counts before it is built (vmatrix.c) */
    uint64_t vseq;
} tacl__op_t;

/*
 * The arguments of each public call, from its entry point's parameters
 * (named alike in tacl.h's blocking, _nb and _init forms): coll.c and
 * persist.c build them the same way.
 */
#define TACL__ARGS_ALLGATHER                                                 \
    ((tacl__coll_args_t){.type = TACL_COLL_ALLGATHER, .sendbuf = sendbuf,    \
                         .recvbuf = recvbuf, .count = sendcount,             \
                         .dtype = dtype})
#define TACL__ARGS_REDUCE_SCATTER                                            \
    ((tacl__coll_args_t){.type = TACL_COLL_REDUCE_SCATTER,                   \
                         .sendbuf = sendbuf, .recvbuf = recvbuf,             \
                         .count = recvcount, .dtype = dtype, .op = op})
#define TACL__ARGS_ALLREDUCE                                                 \
    ((tacl__coll_args_t){.type = TACL_COLL_ALLREDUCE, .sendbuf = sendbuf,    \
                         .recvbuf = recvbuf, .count = count, .dtype = dtype, \
                         .op = op})
#define TACL__ARGS_BROADCAST                                                 \
    ((tacl__coll_args_t){.type = TACL_COLL_BROADCAST, .sendbuf = sendbuf,    \
                         .recvbuf = recvbuf, .count = count, .dtype = dtype, \
                         .root = root})
#define TACL__ARGS_REDUCE                                                    \
    ((tacl__coll_args_t){.type = TACL_COLL_REDUCE, .sendbuf = sendbuf,       \
                         .recvbuf = recvbuf, .count = count, .dtype = dtype, \
                         .op = op, .root = root})
#define TACL__ARGS_ALLTOALL                                                  \
    ((tacl__coll_args_t){.type = TACL_COLL_ALLTOALL, .sendbuf = sendbuf,     \
                         .recvbuf = recvbuf, .count = count, .dtype = dtype})
/* The variable-count calls' table (args.v) is made by their entry points
 * (coll_v.c), which fill count too. */
#define TACL__ARGS_ALLTOALLV                                                 \
    ((tacl__coll_args_t){.type = TACL_COLL_ALLTOALLV, .sendbuf = sendbuf,    \
                         .recvbuf = recvbuf, .dtype = dtype})
#define TACL__ARGS_ALLGATHERV                                                \
    ((tacl__coll_args_t){.type = TACL_COLL_ALLGATHERV, .sendbuf = sendbuf,   \
                         .recvbuf = recvbuf, .dtype = dtype})
#define TACL__ARGS_BARRIER                                                   \
    ((tacl__coll_args_t){.type = TACL_COLL_BARRIER, .dtype = TACL_UINT8})

/*
 * The library's own point-to-point (monitored.c, sparse.c): a message of
 * bytes bytes (type TACL_COLL_SEND or TACL_COLL_RECV) with peer (a
 * receive may name TACL_ANY_SOURCE and get the sender in *source) under
 * a tag below the users' 0..TACL_TAG_MAX, so it never matches theirs;
 * split (coll.c).
 */
#define TACL__TAG_MONITOR (-2)
#define TACL__TAG_SPARSE (-3)
tacl_status_t tacl__p2p_own(tacl_coll_t type, void *buf, size_t bytes,
                           int peer, int tag, int *source, tacl_comm_t comm,
                           tacl_request_t *req_p);

/* Collective sequence numbers and p2p ones live in disjoint halves of the
 * tag's sequence field. */
#define TACL__SEQ_HALF (1ull << (TACL__TAG_SEQ_BITS - 1))

/**
 * Run one validated-on-entry operation now, or record it in the
 * thread's group: what every collective entry point does (coll.c); the
 * variable-count ones (coll_v.c) call it with their table in a->v.
 */
tacl_status_t tacl__coll_post(tacl_comm_t comm, tacl__coll_args_t *a,
                              tacl_stream_t stream, int blocking,
                              tacl_request_t *req_p);

/*
 * Every rank's counts of an all-to-all-v on several nodes (vmatrix.c):
 * the hierarchical row relays blocks whose sizes only their senders
 * know, and the decider must price the rows alike on every rank, so such
 * a call gathers the ranks' send counts before it is built.
 */
/** Whether a's call gathers every rank's counts (the same on every
 *  rank of a correct call). */
int tacl__vmatrix_wanted(tacl_comm_t comm, const tacl__coll_args_t *a);
/**
 * Gather them on op's reserved sequence number (outside the context's
 * lock) and point op->args.v at a new table holding them, which the
 * caller frees (tacl__vcounts_free) once op is built.
 */
tacl_status_t tacl__vmatrix_gather(tacl_comm_t comm, tacl__op_t *op);

/** Validate an operation's arguments as the entry points do (coll.c). */
tacl_status_t tacl__coll_check(tacl_comm_t comm, tacl__coll_args_t *args,
                               tacl_stream_t stream);

/**
 * Set what the builders may assume of a validated operation: the chunk
 * size and whether the node's processes map its buffers (ops.c).
 */
void tacl__coll_mark(tacl__coll_args_t *a);

/** Small blocking all-gather of bytes per rank, with tag sequence seq
 *  (ops.c). */
tacl_status_t tacl__comm_allgather_small(tacl_comm_t comm, uint64_t seq,
                                         const void *mine, void *all,
                                         size_t bytes);

/**
 * Build ops (all on one communicator, none for the fast engine) into one
 * schedule in *sched_p (through the plan cache for a single op); lock
 * held (ops.c).
 */
tacl_status_t tacl__ops_build(tacl_comm_t comm, const tacl__op_t *ops,
                              int nops, tacl__sched_t *sched_p);

/**
 * Run ops (all on one communicator) as one schedule: build it, start it,
 * and hand back its execution; waited: the caller waits for it and frees
 * it (tacl__exec_start_on).  Lock held (ops.c).
 */
tacl_status_t tacl__ops_start(tacl_comm_t comm, const tacl__op_t *ops,
                              int nops, int waited, tacl__exec_t **exec_p);

/*
 * The decider (choose.c) and the simulation tuner (tune_sim.c).
 */
/**
 * How comm runs a: tacl__algo_choose on comm's view with TACL_ALGO's
 * table, TACL_TUNER's tuner and flags (TACL__CHOOSE_ALONE for a blocking
 * call alone; dropped while checking is on).  It makes nothing: for the
 * fast engine the view's fast_max is what tacl__fast_prepare left.
 */
tacl_status_t tacl__choose(tacl_comm_t comm, const tacl__coll_args_t *a,
                           unsigned flags, tacl__choice_t *choice_p);
/**
 * TACL_ALGO's table for the configuration in force, parsed once per
 * configuration load (an empty table when it does not parse: the
 * communicator's creation refused it already).
 */
const tacl__algo_force_t *tacl__choose_force(void);

/**
 * With TACL_TUNER=sim, the row the simulator finds fastest for a's
 * collective and size bucket on comm (simulated once per bucket, the
 * same on every rank), NULL when it does not tune a (tune_sim.c).
 */
const tacl__algo_t *tacl__tune_sim_pick(tacl_comm_t comm,
                                        const tacl__coll_args_t *a);
/**
 * comm's cluster for the simulator, made on first use from its
 * context's topology; lock held.
 */
tacl_status_t tacl__tune_cluster(tacl_comm_t comm,
                                 tacl__sim_cluster_t **cluster_p);

/*
 * The fast engine's area (fast_area.c).
 */
/**
 * At creation, collectively (every member makes the communicator at the
 * same point): the fast engine's area when comm may have one, which sets
 * view.fast_max to its size (0 without one, or when a rank could not
 * map it).  An error only when the exchange itself failed.
 */
tacl_status_t tacl__fast_comm_init(tacl_comm_t comm);
/**
 * A validated call a alone (outside a group, or a group's only blocking
 * call, on no stream): ask the decider, and when it answers the fast
 * engine, run a there (blocking, or split with its request in *req_p
 * when req_p is not NULL), set *status_p and return 1; return 0 when a
 * takes a schedule.
 */
int tacl__fast_take(tacl_comm_t comm, tacl__coll_args_t *a,
                    tacl_request_t *req_p, tacl_status_t *status_p);
/**
 * The owner thread's call a, outside a group and on no stream, again
 * with the arguments of one of its last fast-engine calls (validated
 * then, the configuration unchanged since): run it there without
 * validating or choosing again (split when req_p is not NULL, its
 * request in *req_p), setting *status_p, and return 1; or return 0
 * (validate it and go on as usual).
 */
int tacl__fast_again(tacl_comm_t comm, tacl__coll_args_t *a,
                     tacl_request_t *req_p,
                     tacl_status_t *status_p);

/*
 * TACL_CHECK (check.c).
 */
/** Sequence numbers a checked call reserves before its operations': the
 *  headers', every signature's, the variable-count tables'. */
#define TACL__CHECK_SEQS 3
/**
 * Gather the signatures of ops' collectives (nops of them, p2p ones
 * skipped) from every rank of comm and compare them: TACL_OK when every
 * rank called the same, else TACL_ERR_INVALID_USAGE on every rank naming
 * the rank, the field and both values.  check_seq is what the call
 * reserved; seq_next is comm->seq after the call's operations.
 */
tacl_status_t tacl__check_call(tacl_comm_t comm, const tacl__op_t *ops,
                               int nops, uint64_t check_seq,
                               uint64_t seq_next);
/** Whether the thread's open group holds a checked op of comm already. */
int tacl__group_checked(tacl_comm_t comm);

/** Whether the calling thread is inside a group. */
int tacl__group_active(void);
/** Record an operation in the thread's group. */
tacl_status_t tacl__group_add(const tacl__op_t *op);

/*
 * Device memory and streams (stream.c).
 */
/**
 * Decide a->memtype from the buffers the operation touches (send and
 * recv bytes of each), and check them against the communicator's CUDA
 * device and the stream: one kind of memory per call, device memory of
 * the communicator's device, a stream only with device memory.
 */
tacl_status_t tacl__coll_memory(tacl_comm_t comm, tacl__coll_args_t *a,
                                uint64_t send, uint64_t recv,
                                tacl_stream_t stream);
/**
 * Before an operation on a non-NULL stream: hold the context's progress
 * thread (once per communicator, until destroy), since the call returns
 * before the operation ends and nobody else may progress it.
 */
tacl_status_t tacl__stream_hold(tacl_comm_t comm);
/** The distinct non-NULL streams of ops, for tacl__exec_start_on. */
tacl_status_t tacl__stream_collect(const tacl__op_t *ops, int nops,
                                   tacl__dev_streams_t *out);

/*
 * The flight recorder's API side (flight_note.c).
 */
/**
 * Begin the flight record of ops (about to start as one execution on
 * comm): the first operation's sequence number and signature, the
 * algorithm, and how many were fused.
 */
void tacl__flight_note(tacl_comm_t comm, const tacl__op_t *ops, int nops);
/** The flight record of operations whose first has arguments a (its
 *  algorithm: the communicator's last). */
void tacl__flight_op_of(tacl_comm_t comm, const tacl__coll_args_t *a,
                        int nops, tacl__flight_op_t *rec);
/** tacl__flight_note of operations whose first has arguments a. */
void tacl__flight_note_args(tacl_comm_t comm, const tacl__coll_args_t *a,
                            int nops);

/*
 * Communicators (comm_init.c).
 */
/**
 * A blocking tacl_comm_init_rank() whose communicator takes like's
 * configuration (timeout, name, check, progress thread): shrink's.
 */
tacl_status_t tacl__comm_init_as(tacl_comm_t like, int nranks,
                                 const tacl_unique_id_t *id, int rank,
                                 tacl_comm_t *comm_p);

/** A communicator's configuration with every default resolved. */
typedef struct {
    double timeout_s;
    int blocking;
    int check;
    int progress_thread;
    char name[TACL__COMM_NAME_LEN];
} tacl__comm_conf_t;

/**
 * Resolve and check cfg.  NULL takes parent's settings when there is a
 * parent (a split), else the environment's.
 */
tacl_status_t tacl__comm_conf_resolve(const tacl_config_t *cfg,
                                      tacl_comm_t parent,
                                      tacl__comm_conf_t *out);
/**
 * Fill comm (zeroed, not yet marked alive) as rank of size on ctx (the
 * ranks' world ranks in world, messages tagged with id), with conf's
 * settings and a hold on the context's progress thread when it asks for
 * one; the caller keeps its own reference to ctx either way.
 */
tacl_status_t tacl__comm_create_on(tacl_comm_t comm, tacl__ctx_t *ctx,
                                   int rank, int size, const int *world,
                                   uint32_t id,
                                   const tacl__comm_conf_t *conf);
/** Log a new communicator's settings (how: "init", "split", ...). */
void tacl__comm_conf_log(tacl_comm_t comm, const tacl__comm_conf_t *conf,
                         const char *how);

#endif /* TACL_LIB_COMM_H */
