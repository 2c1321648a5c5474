/*
 * Compressed gradient reduction for the engine (issue 30): a fused group
 * of consecutive layers reduce-scattered (or all-reduced) as one
 * compressed collective, with an error-feedback residual the engine
 * owns.  A floor of engine/: it sees buffers and communicators only,
 * never the engine.
 */
#ifndef ENGINE_GCOMP_H
#define ENGINE_GCOMP_H

#include <stddef.h>
#include <stdint.h>

#include <tacl.h>

/*
 * Which hops of a compressed reduction carry encoded data (Espresso's
 * two-level choice, tacl_comp_hops_t).  AUTO: only those between nodes
 * where the job spans nodes, every hop on a one-node job (so that asking
 * for compression there still compresses).  INTER: only those between
 * nodes, always.  ALL: every hop, flat.
 */
typedef enum { GCOMP_HOPS_AUTO = 0, GCOMP_HOPS_INTER, GCOMP_HOPS_ALL } gcomp_hops_t;

/* "auto", "inter", "all" to *hops_p: 0, or -1 for another name. */
int gcomp_hops_parse(const char *name, gcomp_hops_t *hops_p);
const char *gcomp_hops_name(gcomp_hops_t hops);

/* How one communicator's compressed calls run under a gcomp_hops_t. */
typedef enum {
    GCOMP_ROUTE_FLAT = 0, /* every hop encoded: the flat call */
    GCOMP_ROUTE_INTER,    /* dense in each node, encoded between nodes */
    GCOMP_ROUTE_DENSE     /* the communicator is inside one node: dense */
} gcomp_route_t;

/* The codec the engine compresses gradients with. */
typedef struct {
    const tacl_codec_t *codec;
    tacl_codec_params_t params;
    tacl_comp_scheme_t scheme; /* SUM for a summable codec, else SHUFFLE */
    int error_feedback;        /* 0 only to show what feedback is for */
    gcomp_hops_t hops;         /* AUTO unless asked */
} gcomp_codec_t;

/* A digest of everything that shapes the residuals and the encodings
 * (codec, parameters, scheme, error feedback, hops), to tell whether a
 * snapshot's residuals were made under the same settings. */
uint64_t gcomp_digest(const gcomp_codec_t *c);

/*
 * Find the codec called name with the given density (topk, threshold,
 * randk; <= 0: 0.01) and bits (int8, int4; 0: the name's width), and
 * check it.  0, or -1 with the reason, naming the option, in why.
 */
int gcomp_codec_init(gcomp_codec_t *c, const char *name, double density,
                     int bits, char *why, size_t whylen);

/*
 * The route of comm's compressed calls under hops, world the job's
 * communicator (for AUTO).  Collective over comm: its ranks agree on
 * the ranks a node (a route between nodes needs the same number on
 * every node: AUTO falls back to FLAT, INTER fails with the reason in
 * why).  0, or -1.
 */
int gcomp_route(gcomp_hops_t hops, tacl_comm_t comm, tacl_comm_t world,
                gcomp_route_t *route_p, char *why, size_t whylen);

/* Pack nl layers (counts[i] floats at grads[i]) block by block. */
void gcomp_pack(int size, int nl, float *const *grads, const size_t *counts,
                float *pack);
/* Add the reduced block (shard) back into each layer's dst[i]. */
void gcomp_unpack_add(int size, int nl, const size_t *counts,
                      const float *shard, float *const *dst);

/*
 * Reduce-scatter the nl layers grads[i] (counts[i] floats each, every
 * count a multiple of size) over comm (size ranks), adding each layer's
 * reduced block (the rank's place in comm) into dst[i] (counts[i] /
 * size floats).  The layers travel as one collective: packed block by
 * block (every layer's block 0, then block 1, ...) into pack, encoded by
 * c with the residual err (the sum of the counts, in the packed layout)
 * when compress, else the dense float32 reduce-scatter.  pack and shard
 * hold the sum of the counts, and that over size.  With req_p the call
 * is only started (*req_p; a compressed one encodes in the library's
 * worker, off the caller's thread): leave pack, shard and err alone
 * until it completes, then gcomp_unpack_add.
 */
tacl_status_t gcomp_reduce_scatter(const gcomp_codec_t *c, int compress,
                                   gcomp_route_t route, tacl_comm_t comm, int size, int nl,
                                   float *const *grads, const size_t *counts,
                                   float *const *dst, float *err, float *pack,
                                   float *shard, tacl_request_t *req_p);

/*
 * All-reduce the nl buffers bufs[i] (counts[i] floats) in place over
 * comm as one collective, packed one after the other into pack; encoded
 * by c with the residual err (the sum of the counts) when compress, along
 * route as gcomp_reduce_scatter's.
 */
tacl_status_t gcomp_allreduce(const gcomp_codec_t *c, int compress,
                              gcomp_route_t route, tacl_comm_t comm, int nl, float *const *bufs,
                              const size_t *counts, float *err, float *pack);

#endif /* ENGINE_GCOMP_H */
