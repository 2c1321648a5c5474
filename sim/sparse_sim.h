/*
 * The sparse all-reduce's schemes on a modelled cluster: each scheme's
 * phases, with the message sizes the given rows make on every rank, run
 * by the simulator (sim.h) one after another.  What the thesis' Figure
 * 3.7 compares on paper (chapter 3, section 3.2.5), predicted on a
 * cluster from real builders' schedules:
 *
 * - DENSE: the dense all-reduce of the whole table (the decider's
 *   algorithm).
 * - AGSPARSE: every rank's count (all-gather), then its rows
 *   (all-gather-v of COO), as lib/sparse.c runs it.
 * - PS: owners of even row ranges; push (all-to-all of counts, then
 *   all-to-all-v of COO), pull (all-gather of counts, all-gather-v of
 *   each owner's summed COO).
 * - ZEN: the same with Zen's hashed owners and the pull's byte rule
 *   (bitmap or index list per owner), as lib/sparse.c runs it.
 * - OMNI: OmniReduce's scheme: the table in blocks of 256 values, owners
 *   of even block ranges, a block sent (id and values) when any of its
 *   rows is set; push and pull as PS, in blocks.
 * - SPARCML: SparCML's sparse recursive doubling: log2 n rounds, each
 *   rank exchanging its partial sum's rows with the rank 2^k away, sent
 *   dense once that is fewer bytes; ranks beyond the largest power of
 *   two fold in first and get the result last.
 * - ZEN_HIER: inside each node every rank pushes each row to the local
 *   rank of its class (h0 over the node's ranks), which sums them; on
 *   every rail at once, flat Zen over the class's rows; inside each
 *   node the rails' sums all-gathered, as lib/sparse.c runs it.
 * - DENSE_ZEN: inside each node a dense reduce-scatter of the table and
 *   of a row mask (as the direct pattern: slice j to local rank j), on
 *   every rail flat Zen over the node's rows of its slice, inside each
 *   node a dense all-gather of the slices.
 *   A node's or a rail's collective is an all-to-all-v whose matrix is
 *   zero between groups, so all groups run at once as they do for real;
 *   both need the same number of ranks on every node
 *   (TACL_ERR_UNSUPPORTED otherwise).
 *
 * Row sets are bitsets of the table, so 1024 ranks of a million rows
 * cost 128 MB.  Values are float32 (4 bytes) unless the case says.
 */
#ifndef TACL_SIM_SPARSE_SIM_H
#define TACL_SIM_SPARSE_SIM_H

#include "sim.h"

typedef enum {
    TACL__SSIM_DENSE,
    TACL__SSIM_AGSPARSE,
    TACL__SSIM_PS,
    TACL__SSIM_OMNI,
    TACL__SSIM_SPARCML,
    TACL__SSIM_ZEN,
    TACL__SSIM_ZEN_HIER,
    TACL__SSIM_DENSE_ZEN,
    TACL__SSIM_COUNT
} tacl__ssim_scheme_t;

/** "dense", "agsparse", "ps", "omni", "sparcml", "zen", "zen_hier",
 *  "dense_zen". */
const char *tacl__ssim_name(tacl__ssim_scheme_t scheme);

/** Every rank's rows of one call. */
typedef struct {
    uint64_t nrows;
    size_t row_len;
    size_t elem;             /* bytes per value */
    size_t index_bytes;      /* 4 or 8 */
    int nranks;
    const int64_t *const *idx; /* nranks lists of distinct rows */
    const size_t *nnz;
} tacl__ssim_case_t;

typedef struct {
    double seconds;          /* all phases, one after another */
    uint64_t bytes[TACL_NUM_LINK_CLASSES]; /* sent, all ranks */
    int phases;
} tacl__ssim_result_t;

/** Predict scheme on c for the rows of k (k->nranks == c->nranks). */
tacl_status_t tacl__sim_sparse(const tacl__sim_cluster_t *c,
                               const tacl__ssim_case_t *k,
                               tacl__ssim_scheme_t scheme,
                               tacl__ssim_result_t *res);

#endif
