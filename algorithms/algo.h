/*
 * Algorithms: each one turns one collective operation and a topology view
 * into schedule steps for one rank, and does no I/O.  The registry lists
 * them with {id, name, coll, flags, supports, cost, build}; the decider
 * (tacl__algo_choose) answers how an operation runs: the fast engine,
 * a row TACL_ALGO forces ("allgather=ring,allreduce:0-16k=rd"), or the
 * row of lowest cost that supports the operation.
 */
#ifndef TACL_ALGORITHMS_ALGO_H
#define TACL_ALGORITHMS_ALGO_H

#include <stddef.h>
#include <stdint.h>

#include "tacl.h"
#include "op.h"
#include "sched.h"
#include "topo_view.h"

typedef enum {
#define TACL__ALGO_ID_LIST(X)                                                \
    X(RING, "ring")                /* pipelined ring */                      \
    X(RD, "rd")                    /* recursive doubling / halving */        \
    X(BRUCK, "bruck")              /* Bruck all-gather / dissemination */    \
    X(DIRECT, "direct")            /* every rank to every rank at once */    \
    X(TREE, "tree")                /* binomial tree (bcast, reduce) */       \
    X(P2P, "p2p")                  /* a single send or receive */          \
    X(MICS, "mics")                /* MiCS hierarchical (all-gather, RS) */ \
    X(HRING, "hring")              /* PaRO H-Ring: inter, then intra */     \
    X(HORING, "horing")            /* PaRO HO-Ring: overlapped rings */     \
    X(HIER, "hier")                /* hierarchical all-reduce, a2av */    \
    X(QWZ, "qwz")                  /* ZeRO++ quantized all-gather */       \
    X(QGZ, "qgz")                  /* ZeRO++ 2-hop quantized RS */       \
    X(FAST, "fast")                /* the fast engine's shared area */
#define TACL__ALGO_ENUM_(name, str) TACL__ALGO_##name,
    TACL__ALGO_ID_LIST(TACL__ALGO_ENUM_)
#undef TACL__ALGO_ENUM_
    TACL__ALGO_COUNT
} tacl__algo_id_t;

/** Properties of a registry row. */
enum {
    /* Hierarchical: serves only a regular layout of several nodes (at
     * least two ranks each); forced elsewhere, it gives way to the ring. */
    TACL__ALGO_FLAG_HIER = 1u << 0,
    /* Never chosen by the tuner nor named in a spec: only the quantized
     * calls (qbits != 0) reach it, since quantization is lossy. */
    TACL__ALGO_FLAG_EXPLICIT = 1u << 1,
    /* Runs on the fast engine (executor/fastpath.h: a shared-memory area
     * per communicator, no schedule), which serves only a call alone
     * (TACL__CHOOSE_ALONE) with checking off: the chooser takes it first
     * when it supports the operation; its build() refuses, since the
     * engine runs without a schedule. */
    TACL__ALGO_FLAG_FAST = 1u << 2
};

typedef struct {
    tacl__algo_id_t id;
    const char *name;       /* as TACL__ALGO_ID_LIST spells it */
    tacl_coll_t coll;
    unsigned flags;         /* TACL__ALGO_FLAG_HIER, _EXPLICIT, _FAST */
    /** Whether this algorithm can run the operation on this topology. */
    int (*supports)(const tacl__coll_args_t *args,
                    const tacl__topo_view_t *view);
    /**
     * Modelled time in seconds given a latency alpha (s) and an inverse
     * bandwidth beta (s/byte) per message.
     */
    double (*cost)(const tacl__coll_args_t *args,
                   const tacl__topo_view_t *view, double alpha, double beta);
    /** Append the operation's steps to s. */
    tacl_status_t (*build)(tacl__sched_t *s, const tacl__coll_args_t *args,
                           const tacl__topo_view_t *view);
} tacl__algo_t;

/** Every algorithm of every collective, terminated by a NULL name. */
extern const tacl__algo_t tacl__algos[];

/**
 * Find an algorithm by collective and name (case ignored), NULL if none;
 * rows flagged TACL__ALGO_FLAG_EXPLICIT cannot be found by name.
 */
const tacl__algo_t *tacl__algo_find(tacl_coll_t coll, const char *name);

/** The row of algorithm id for coll, NULL if none. */
const tacl__algo_t *tacl__algo_row(tacl__algo_id_t id, tacl_coll_t coll);

/**
 * The names a spec may give for coll ("ring, bruck, ..."), comma
 * separated, into buf.
 */
void tacl__algo_names(tacl_coll_t coll, char *buf, size_t len);

/** Bytes an operation counts as for TACL_ALGO's size ranges and the
 * tuner's buckets: count elements of dtype, count as the call takes it. */
static inline uint64_t tacl__algo_bytes(const tacl__coll_args_t *args)
{
    return (uint64_t)args->count * tacl_dtype_size(args->dtype);
}

/*
 * TACL_ALGO, parsed once per configuration load (force.c): items
 * "coll=algo" or "coll:lo-hi=algo", comma separated, where lo-hi is a
 * range of the operation's bytes (tacl__algo_bytes; K, M, G suffixes,
 * powers of 1024), lo included and hi excluded, either side open
 * ("16k-", "-4k"), as UCC's UCC_TL_UCP_TUNE="allreduce:0-4k:@knomial".
 * For an operation, the last item naming its collective and covering
 * its size forces that row.
 */
#define TACL__FORCE_MAX 32

typedef struct {
    struct {
        tacl_coll_t coll;
        uint64_t lo, hi;           /* [lo, hi) bytes */
        const tacl__algo_t *row;
    } item[TACL__FORCE_MAX];
    int n;
} tacl__algo_force_t;

/**
 * Parse a TACL_ALGO spec (NULL or "" for none) into *force: TACL_OK, or
 * TACL_ERR_INVALID_ARG with a message naming the bad item.
 */
tacl_status_t tacl__algo_force_parse(const char *spec,
                                     tacl__algo_force_t *force);

/** A table forcing row for every size of its collective. */
void tacl__algo_force_one(tacl__algo_force_t *force, const tacl__algo_t *row);

/** The row force (NULL: none) forces for args, or NULL. */
const tacl__algo_t *tacl__algo_forced(const tacl__algo_force_t *force,
                                      const tacl__coll_args_t *args);

/**
 * The tuner: the supported row of lowest modelled cost for args on view
 * (rows flagged explicit-only or fast never), unless forced (NULL: none)
 * supports it; a forced hierarchical row that cannot serve the layout
 * gives way to the ring, any other forced row that cannot serve the
 * operation to the cheapest, with a warning once.  Never NULL for a
 * valid operation.
 */
const tacl__algo_t *tacl__algo_select(const tacl__coll_args_t *args,
                                      const tacl__topo_view_t *view,
                                      const tacl__algo_t *forced);

/** What the chooser may assume of how the call runs. */
enum {
    /* A call alone (outside a group, or a group's only blocking call),
     * on no stream, with checking off: the fast engine may take it
     * (blocking, or split for an _nb call). */
    TACL__CHOOSE_ALONE = 1u << 0
};

/** How one operation runs: the decider's typed answer. */
typedef enum {
    TACL__ENGINE_SCHEDULE = 0, /* a schedule the executor runs */
    TACL__ENGINE_FAST          /* the fast engine's area, no schedule */
} tacl__engine_t;

typedef struct {
    tacl__engine_t engine;
    const tacl__algo_t *algo;  /* the registry row */
    const tacl__algo_t *inner; /* a composed row's part: the all-gather
                                  that moves qwZ's payload; else NULL */
} tacl__choice_t;

/** "fast" or "schedule". */
const char *tacl__engine_name(tacl__engine_t engine);

/** A tuner besides the model: pick(arg, args) names the row it finds
 *  fastest for args, NULL to leave it to the model. */
typedef struct {
    const tacl__algo_t *(*pick)(void *arg, const tacl__coll_args_t *args);
    void *arg;
} tacl__algo_tuner_t;

/**
 * The one decider of how an operation runs on view: the fast engine when
 * flags allow it and its row supports the operation (unless force names
 * another row for it); for a quantized call qwZ (its payload moved by
 * the all-gather force or the model picks for the payload) or qgZ; else
 * the row force names, or the tuner's pick (tuner NULL: none), or the
 * cheapest (tacl__algo_select).  The real call, tacl_comm_estimate,
 * tacl-info's tuner table, the simulator and the tests all ask it.
 * TACL_ERR_UNSUPPORTED with a message when nothing serves the operation.
 */
tacl_status_t tacl__algo_choose(const tacl__topo_view_t *view,
                                const tacl__coll_args_t *args,
                                const tacl__algo_force_t *force,
                                const tacl__algo_tuner_t *tuner,
                                unsigned flags, tacl__choice_t *choice);

/**
 * Append an operation's steps to s as choice says (all steps of one
 * operation; several calls fuse a group into one schedule).  A choice of
 * the fast engine is TACL_ERR_INTERNAL: it runs without a schedule.
 */
tacl_status_t tacl__algo_build(tacl__sched_t *s, const tacl__coll_args_t *args,
                               const tacl__topo_view_t *view,
                               const tacl__choice_t *choice);

/*
 * Pure peer arithmetic shared by builders and called directly by tests.
 */
/** Block [*off_p, *off_p + *count_p) of n blocks splitting count elements. */
void tacl__block_range(size_t count, int nblocks, int block, size_t *off_p,
                       size_t *count_p);
static inline int tacl__ring_next(int rank, int n) { return (rank + 1) % n; }
static inline int tacl__ring_prev(int rank, int n) { return (rank + n - 1) % n; }

#endif /* TACL_ALGORITHMS_ALGO_H */
