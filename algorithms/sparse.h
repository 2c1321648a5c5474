/*
 * Who owns which row of a sparse all-reduce, and what that costs: the
 * pure half of the sparse schemes (lib/sparse.c runs them).
 *
 * Zen (thesis "Zen, Espresso, Cupcake, Gemini", chapter 3) proves that
 * the best scheme for sparse gradients is point-to-point, one-shot,
 * parallel and balanced (Theorem 3.1): every rank pushes each of its rows
 * to the row's owner, owners sum, every rank pulls every owner's sum.
 * Balance comes from the owner function.  Even ranges of rows (a
 * parameter server's split) inherit the gradients' skew toward small
 * indices (section 3.2.2, C3); Zen hashes each index to its owner with
 * one universal hash h0 shared by all ranks (Algorithm 3.2, line 5),
 * whose imbalance is 1 + Theta(sqrt(n log n / nnz)) whatever the indices
 * (Theorem 3.2).  Algorithm 3.2's other hashes place indices in GPU
 * memory without sorting; on a CPU a counting sort by owner does that
 * job exactly (tacl__sparse_partition), so only h0 is kept here.
 *
 * Owner j's domain is every row index h0 sends to j, in increasing
 * order.  It is the same on every rank, so an owner's result can travel
 * as a bitmap over its domain instead of a list of indices (the hash
 * bitmap, section 3.3.4, Algorithm 3.3): |domain| / 8 bytes, about
 * rows / (8 n), independent of how many rows are set.
 * tacl__sparse_pull_bitmap is the exact byte rule choosing between the
 * two per owner and per call.
 */
#ifndef TACL_ALGORITHMS_SPARSE_H
#define TACL_ALGORITHMS_SPARSE_H

#include <stddef.h>
#include <stdint.h>

#include "tacl.h"
#include "topo_view.h"

/** The seed of h0 the library uses: the same on every rank of every job
 *  (the simulator prices what the library runs). */
#define TACL__SPARSE_OWNER_SEED 0x7ac15ea5eull

/** Owner functions: Zen's hash, or even ranges of the table. */
typedef enum {
    TACL__OWNER_HASH,
    TACL__OWNER_RANGE,
} tacl__owner_kind_t;

typedef struct {
    tacl__owner_kind_t kind;
    int n;            /* owners */
    uint64_t nrows;   /* rows of the table */
    uint64_t a, b;    /* h0(x) = ((a x + b) mod p) mod n, p = 2^61 - 1 */
} tacl__owner_t;

/**
 * The owner function for n owners of a table of nrows rows.  Hash
 * owners draw (a, b) from seed, which every rank must pass alike.
 */
void tacl__owner_init(tacl__owner_t *o, tacl__owner_kind_t kind, int n,
                      uint64_t nrows, uint64_t seed);

/** The owner of row idx (idx < nrows). */
int tacl__owner_of(const tacl__owner_t *o, uint64_t idx);

/** Row i of an index list of int32 (idx64 == 0) or int64 entries. */
static inline uint64_t tacl__sparse_index(const void *indices, int idx64,
                                          size_t i)
{
    return idx64 ? (uint64_t)((const int64_t *)indices)[i]
                 : (uint64_t)(uint32_t)((const int32_t *)indices)[i];
}

/**
 * Counting sort of nnz indices by owner: counts[j] rows go to owner j,
 * and order[] lists the positions of the input, owner 0's first, each
 * owner's in input order.  counts has o->n entries, order nnz.
 * TACL_ERR_NO_MEMORY, or TACL_OK.
 */
tacl_status_t tacl__sparse_partition(const tacl__owner_t *o,
                                     const void *indices, int idx64,
                                     size_t nnz, size_t *counts,
                                     size_t *order);

/**
 * Every owner's domain: dsize[j] rows belong to owner j, and pos[idx] is
 * row idx's place in its owner's domain (ascending).  dsize has o->n
 * entries, pos o->nrows (which must fit in 32 bits).
 */
void tacl__sparse_domains(const tacl__owner_t *o, size_t *dsize,
                          uint32_t *pos);

/** Bytes of a bitmap over a domain of dsize rows. */
static inline size_t tacl__sparse_bitmap_bytes(size_t dsize)
{
    return (dsize + 7) / 8;
}

/**
 * The pull's byte rule: whether an owner holding nnz rows of a domain of
 * dsize rows sends a bitmap (fewer bytes) rather than its index list.
 */
static inline int tacl__sparse_pull_bitmap(size_t nnz, size_t dsize,
                                           size_t index_bytes)
{
    return tacl__sparse_bitmap_bytes(dsize) < nnz * index_bytes;
}

/**
 * The shape a byte count is taken for: n ranks on nodes nodes (even: the
 * same number on each; 1: one node), giving total rows in all (mean
 * total / n each, even blocks) of a table of nrows rows of row_len
 * elements, ib bytes an index and rb a row, a union of u rows (u_node:
 * one node's union, min(L mean, nrows) at its largest).
 */
typedef struct {
    int n, nodes, even;
    double total, nrows, row_len, ib, rb, u, u_node;
} tacl__sparse_shape_t;

/** Bytes one rank receives over links inside its node and between. */
typedef struct {
    double intra, inter;
} tacl__sparse_link_bytes_t;

/**
 * Bytes a rank receives under every scheme (section 3.2.4's traffic
 * volumes, with even blocks), per link class, into b (indexed by
 * tacl_sparse_scheme_t; AUTO's entry is zeros).  A flat scheme's bytes
 * split over the classes as its peers are: (L - 1) / (n - 1) of them
 * inside the node of L ranks.  The hierarchical schemes' are their
 * steps': ZEN_HIER receives (L-1)/L mean rows inside the node, then on
 * its rail (N nodes) (N-1)/N of its class's u_node / L rows and of the
 * union's u / L (rows, and indices or a bitmap over the class by the
 * byte rule) across nodes, then (L-1)/L u rows inside; DENSE_ZEN
 * receives (L-1)/L of the table and its row mask inside (the
 * reduce-scatter), the same rail Zen on its slice across nodes, and
 * (L-1)/L of the table inside again (the all-gather).  SPARCML's
 * rounds at distance d receive min(d mean, nrows) rows, dense once
 * fewer bytes, inside the node while d < L.  OMNI's blocks: each row
 * in ceil(row_len / 256) blocks of 256 values and an id.
 */
void tacl__sparse_bytes(const tacl__sparse_shape_t *sh,
                        tacl__sparse_link_bytes_t b[TACL_NUM_SPARSE_SCHEMES]);

/** The cost of bytes b: intra weighs w (seconds per byte inside a node
 *  over seconds per byte between nodes), inter 1. */
static inline double tacl__sparse_cost(tacl__sparse_link_bytes_t b, double w)
{
    return b.intra * w + b.inter;
}

/**
 * AUTO's pick: among ZEN, AGSPARSE and DENSE the scheme of
 * tacl__sparse_bytes costing least, the union taken at its largest (no
 * overlap: min(total, nrows)), since that is all every rank knows (the
 * row counts); ZEN on a tie with the dense all-reduce, AGSPARSE on one
 * rank.  On several even nodes ZEN_HIER where it costs less still.  w
 * is tacl__sparse_cost's weight (tacl__sparse_intra_weight).  The real
 * call and tacl_sparse_estimate both ask it.
 */
tacl_sparse_scheme_t tacl__sparse_auto_pick(int n, int nodes, int even,
                                            uint64_t total, uint64_t nrows,
                                            size_t row_len, size_t ib,
                                            size_t rb, double w);

/** tacl__sparse_cost's w on a cluster: the host link's seconds per byte
 *  over the network's (the view's figures, else the cost model's). */
double tacl__sparse_intra_weight(const tacl__topo_view_t *v);

/** The shape AUTO prices: the union and each node's at their largest. */
void tacl__sparse_shape_largest(tacl__sparse_shape_t *sh, int n, int nodes,
                                int even, double total, double nrows,
                                double row_len, double ib, double rb);

/**
 * Imbalance ratios of Definition 3.6 for one owner function over n
 * ranks' index sets (index lists sets[r] of nnz[r] rows): push is the
 * largest n |I_r^j| / |I_r| over ranks r and owners j; pull is
 * n max_j |union_j| / |union|.  *union_p gets |union| (the densification
 * ratio is |union| / mean nnz).  TACL_ERR_NO_MEMORY, or TACL_OK.
 */
tacl_status_t tacl__sparse_imbalance(const tacl__owner_t *o,
                                     const void *const *sets, int idx64,
                                     const size_t *nnz, int nranks,
                                     double *push_p, double *pull_p,
                                     size_t *union_p);

#endif
