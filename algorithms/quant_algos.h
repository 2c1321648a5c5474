/*
 * The quantized collectives of ZeRO++ (qwZ, section 3.1; qgZ, sections
 * 3.3 and 4.1.2): their registry rows, qwZ's composition (which the
 * decider and tacl__algo_build use) and the pure arithmetic their tests
 * call directly.  Internal to algorithms/.
 */
#ifndef TACL_ALGORITHMS_QUANT_ALGOS_H
#define TACL_ALGORITHMS_QUANT_ALGOS_H

#include "toolbox.h"
#include "quant_layout.h"

/*
 * The registry rows (flagged TACL__ALGO_FLAG_EXPLICIT): qwZ's row moves
 * its payload with the all-gather the decider picks for it (its own
 * build(), for callers without a choice, with the ring); qgZ's
 * reduce-scatter (SUM or AVG) is the 2-hop quantized all-to-all on a
 * regular layout of at least two nodes of at least two ranks, the 1-hop
 * one elsewhere.
 */
TACL__ALGO_DECLARE_(qwz)
/* qgZ moves the same payload: its row takes qwZ's supports and cost. */
TACL__ALGO_DECLARE_BUILD_(qgz)

/**
 * The all-gather that moves qwZ's payload for args on view: its
 * arguments (p blocks of the quantized bytes, in scratch the schedule
 * appends) and view (no streaming: each block is dequantized as soon as
 * it lands).  What the decider prices and picks the inner row for.
 */
void tacl__qwz_payload(const tacl__coll_args_t *args,
                       const tacl__topo_view_t *view,
                       tacl__coll_args_t *ia_p, tacl__topo_view_t *iv_p);

/**
 * qwZ all-gather: quantize this rank's block, all-gather the quantized
 * bytes with inner (a row of the payload's all-gather; NULL: the ring),
 * dequantize every other block into recvbuf.
 */
tacl_status_t tacl__qwz_build_over(tacl__sched_t *s,
                                   const tacl__coll_args_t *args,
                                   const tacl__topo_view_t *view,
                                   const tacl__algo_t *inner);

/** Whether qgZ runs its 2-hop form on view. */
int tacl__qgz_two_hop(const tacl__topo_view_t *view);

/**
 * qgZ's pipeline grid for args: chunk c of every output block covers
 * elements [c * cs, min((c + 1) * cs, count)); cs is a multiple of the
 * quantization block when count exceeds it, so chunks never cut a block
 * that would otherwise be whole.  Quantization blocks restart at every
 * chunk.
 */
void tacl__qgz_grid(const tacl__coll_args_t *args, size_t *cs_p,
                    uint32_t *nchunks_p);

/**
 * Tensor slice reordering (section 3.3.3, Algorithm 2): where a rank of
 * local index l places the quantized slice for the rank of node dm and
 * local index dl, among the slots of its intra-node send buffer.  The
 * slices for local peer dl are the g consecutive slots of group dl (its
 * own group, dl == l, lives in the receive buffer instead and is not
 * counted), in node order, so each intra-node message is one contiguous
 * run.  Returns a slot in [0, (k - 1) * g), or -1 for dl == l.
 */
static inline int tacl__qgz_slot(int dm, int dl, int l, int g)
{
    if (dl == l)
        return -1;
    return (dl < l ? dl : dl - 1) * g + dm;
}

#endif /* TACL_ALGORITHMS_QUANT_ALGOS_H */
