/*
 * The builders' toolbox (toolbox.c): registering an operation's buffers
 * (with NCCL's in-place conventions), chunking a pipeline, block ranges,
 * and the entry points each algorithm file gives the registry.  Internal
 * to algorithms/ (and its tests); it calls nothing of the registry.
 */
#ifndef TACL_ALGORITHMS_TOOLBOX_H
#define TACL_ALGORITHMS_TOOLBOX_H

#include "algo.h"
#include "common.h"

/** Where an operation's input and output live in a schedule. */
typedef struct {
    tacl__bref_t in;   /* start of the input (sendbuf) */
    tacl__bref_t out;  /* start of the output (recvbuf) */
    int has_in;        /* whether in is valid on this rank */
    int has_out;       /* whether out is valid on this rank */
    int in_place;      /* input and output share memory (NCCL's rule) */
    size_t esize;      /* bytes per element */
} tacl__algo_io_t;

/**
 * Whether args is in place on this rank: sendbuf == recvbuf, or for
 * all-gather sendbuf == recvbuf + rank * count, for reduce-scatter
 * recvbuf == sendbuf + rank * count.  Never with a NULL buffer: an
 * operation built as a sub-schedule for tacl__sched_append passes NULL
 * buffers, so its input and output are two buffers the map can place.
 */
int tacl__algo_in_place(const tacl__coll_args_t *args, int rank);

/**
 * Register the buffers of args in s: an input of in_bytes (0: none on this
 * rank) and an output of out_bytes (0: none).  In place, one OUTPUT
 * buffer covers both and io->in points into it.
 */
tacl_status_t tacl__algo_io(tacl__sched_t *s, const tacl__coll_args_t *args,
                            uint64_t in_bytes, uint64_t out_bytes,
                            tacl__algo_io_t *io_p);

/**
 * tacl__algo_io for an all-gather, reduce-scatter or all-reduce seen as a
 * vector of n blocks: *total_p is the vector's length in elements.  On one
 * rank it also schedules the whole operation and sets *done_p.
 */
tacl_status_t tacl__algo_blocks_io(tacl__sched_t *s,
                                   const tacl__coll_args_t *args,
                                   tacl__algo_io_t *io_p, size_t *total_p,
                                   int *done_p);

static inline tacl__bref_t tacl__bref_add(tacl__bref_t r, uint64_t off)
{
    r.off += off;
    return r;
}

/** The reduction op a REDUCE step uses for op (AVG reduces with SUM). */
static inline tacl_op_t tacl__algo_step_op(tacl_op_t op)
{
    return op == TACL_AVG ? TACL_SUM : op;
}

/** Tag of message number step of this operation. */
static inline uint64_t tacl__algo_tag(const tacl__coll_args_t *args,
                                      uint64_t step)
{
    return TACL__TAG(args->seq, step);
}

/**
 * Number of pipeline chunks for blocks of at most max_elems elements:
 * about max_elems * esize / chunk_bytes, at least 1, and at most what
 * msgs_per_chunk messages per chunk to one peer leave room for in a tag.
 */
uint32_t tacl__algo_nchunks(const tacl__coll_args_t *args, size_t max_elems,
                            size_t esize, uint64_t msgs_per_chunk);
/** The same with at most max_chunks chunks instead of the default cap. */
uint32_t tacl__algo_nchunks_max(const tacl__coll_args_t *args,
                                size_t max_elems, size_t esize,
                                uint64_t msgs_per_chunk, uint32_t max_chunks);

/**
 * Chunk c of a block of blk elements cut on a grid of cs elements:
 * [c * cs, min((c + 1) * cs, blk)), empty when c * cs >= blk.  The grid is
 * the same for every block so chunk c of any block occupies the same
 * bytes of a per-block scratch slot.
 */
static inline size_t tacl__chunk_len(size_t blk, size_t cs, uint32_t c)
{
    size_t lo = (size_t)c * cs;

    if (lo >= blk)
        return 0;
    return TACL_MIN(cs, blk - lo);
}

/** Smallest k with 2^k >= n (0 for n <= 1). */
static inline int tacl__log2_ceil(int n)
{
    int k = 0;

    while ((1 << k) < n)
        k++;
    return k;
}

/** Largest power of two <= n (n >= 1). */
static inline int tacl__pow2_floor(int n)
{
    int p = 1;

    while (p * 2 <= n)
        p *= 2;
    return p;
}

/**
 * Whether the local copies of an operation in which every rank writes
 * bytes should stream past the cache: what the ranks of this node write
 * together reaches the view's stream_bytes (TACL_STREAM_MIN).
 */
int tacl__algo_stream(const tacl__topo_view_t *view, uint64_t bytes);

/**
 * Copy (or, for AVG, divide by nranks) count elements from src to dst:
 * the whole operation when there is one rank.
 */
int32_t tacl__algo_finish(tacl__sched_t *s, const tacl__coll_args_t *args,
                          tacl__bref_t dst, tacl__bref_t src, size_t count,
                          const int32_t *deps, int ndeps);

/**
 * An all-gather's own block: copy io's input (blk bytes) to block rank of
 * its output, unless in place.  The copy's id, or -1 when in place.
 */
int32_t tacl__algo_own_block(tacl__sched_t *s, const tacl__algo_io_t *io,
                             int rank, uint64_t blk);

/**
 * The whole of an operation on one rank, whose output is its input (AVG:
 * over 1): the copy, or the division, unless io is in place.  Returns the
 * schedule's status.
 */
tacl_status_t tacl__algo_alone(tacl__sched_t *s, const tacl__coll_args_t *args,
                               const tacl__algo_io_t *io);

/*
 * The entry points of each algorithm file.  supports/cost/build dispatch
 * on args->type; the registry lists one entry per collective.  Other
 * headers of this folder declare their algorithms with the same macros;
 * an algorithm that is supported (or also priced) where another one is
 * declares only what it has of its own, and its registry row names the
 * other's.
 */
#define TACL__ALGO_DECLARE_BUILD_(prefix)                                    \
    tacl_status_t tacl__##prefix##_build(tacl__sched_t *s,                   \
                                         const tacl__coll_args_t *args,      \
                                         const tacl__topo_view_t *view);
#define TACL__ALGO_DECLARE_COST_BUILD_(prefix)                               \
    double tacl__##prefix##_cost(const tacl__coll_args_t *args,              \
                                 const tacl__topo_view_t *view,              \
                                 double alpha, double beta);                 \
    TACL__ALGO_DECLARE_BUILD_(prefix)
#define TACL__ALGO_DECLARE_(prefix)                                          \
    int tacl__##prefix##_supports(const tacl__coll_args_t *args,             \
                                  const tacl__topo_view_t *view);            \
    TACL__ALGO_DECLARE_COST_BUILD_(prefix)
TACL__ALGO_DECLARE_(ring)
TACL__ALGO_DECLARE_(rd)
TACL__ALGO_DECLARE_(bruck)
TACL__ALGO_DECLARE_(direct)
TACL__ALGO_DECLARE_(directv)
TACL__ALGO_DECLARE_(tree)
TACL__ALGO_DECLARE_(p2p)
TACL__ALGO_DECLARE_(fast)

#endif /* TACL_ALGORITHMS_TOOLBOX_H */
