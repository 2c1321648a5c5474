/*
 * Algorithms: each one turns one collective operation and a topology view
 * into schedule steps for one rank, and does no I/O.  The registry lists
 * them with {id, name, coll, flags, supports, cost, build}; the tuner
 * picks the one of lowest cost that supports the operation, and TACL_ALGO
 * can force one ("allgather=ring,allreduce=rd").
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
    X(HIER, "hier")                /* hierarchical all-reduce */          \
    X(QWZ, "qwz")                  /* ZeRO++ quantized all-gather */       \
    X(QGZ, "qgz")                  /* ZeRO++ 2-hop quantized RS */
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
    TACL__ALGO_FLAG_EXPLICIT = 1u << 1
};

typedef struct {
    tacl__algo_id_t id;
    const char *name;       /* as TACL__ALGO_ID_LIST spells it */
    tacl_coll_t coll;
    unsigned flags;         /* TACL__ALGO_FLAG_HIER, _EXPLICIT */
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
 * Find an algorithm by collective and name, NULL if none; rows flagged
 * TACL__ALGO_FLAG_EXPLICIT cannot be found by name.
 */
const tacl__algo_t *tacl__algo_find(tacl_coll_t coll, const char *name);

/** The row of algorithm id for coll, NULL if none. */
const tacl__algo_t *tacl__algo_row(tacl__algo_id_t id, tacl_coll_t coll);

/**
 * Choose the algorithm for an operation: the one forced by the spec string
 * (TACL_ALGO's syntax; NULL or "" for none) if it supports the operation,
 * else the supported one of lowest cost.  Never NULL for a valid operation.
 */
const tacl__algo_t *tacl__algo_select(const tacl__coll_args_t *args,
                                      const tacl__topo_view_t *view,
                                      const char *spec);

/**
 * The names a spec may give for coll ("ring, bruck, ..."), comma
 * separated, into buf.
 */
void tacl__algo_names(tacl_coll_t coll, char *buf, size_t len);

/** Parse a TACL_ALGO spec; TACL_ERR_INVALID_ARG with a message if bad. */
tacl_status_t tacl__algo_spec_check(const char *spec);

/**
 * Build an operation into s with the selected algorithm (all steps of one
 * operation are appended; several calls fuse a group into one schedule).
 * *algo_p, if not NULL, receives the algorithm used.
 */
tacl_status_t tacl__algo_build(tacl__sched_t *s, const tacl__coll_args_t *args,
                               const tacl__topo_view_t *view,
                               const char *spec, const tacl__algo_t **algo_p);

/**
 * Build a quantized operation (args->qbits != 0): qwZ for ALLGATHER (its
 * quantized payload moved by the all-gather algorithm spec or the tuner
 * picks), qgZ for REDUCE_SCATTER.  *algo_p receives the qwZ/qgZ row of
 * tacl__algos.
 */
tacl_status_t tacl__quant_build(tacl__sched_t *s, const tacl__coll_args_t *args,
                                const tacl__topo_view_t *view,
                                const char *spec, const tacl__algo_t **algo_p);

/*
 * Pure peer arithmetic shared by builders and called directly by tests.
 */
/** Block [*off_p, *off_p + *count_p) of n blocks splitting count elements. */
void tacl__block_range(size_t count, int nblocks, int block, size_t *off_p,
                       size_t *count_p);
static inline int tacl__ring_next(int rank, int n) { return (rank + 1) % n; }
static inline int tacl__ring_prev(int rank, int n) { return (rank + n - 1) % n; }

#endif /* TACL_ALGORITHMS_ALGO_H */
