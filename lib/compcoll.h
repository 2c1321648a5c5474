/*
 * What the compressed collectives (compcoll.c) share with their
 * hierarchical form (comp_hier.c).
 */
#ifndef TACL_LIB_COMPCOLL_H
#define TACL_LIB_COMPCOLL_H

#include "tacl.h"

/**
 * Check a compressed call's codec, params and scheme (a summable codec
 * for TACL_COMP_SUM): TACL_ERR_INVALID_ARG with a message that begins
 * with name and names the argument.
 */
tacl_status_t tacl__comp_check(const char *name, const tacl_codec_t *codec,
                               const tacl_codec_params_t *params,
                               tacl_comp_scheme_t scheme);

/** The name a compressed coll (TACL_COLL_ALLREDUCE, _REDUCE_SCATTER or
 *  _ALLGATHER) goes by in messages: "comp_allreduce", ... */
const char *tacl__comp_name(tacl_coll_t coll);

/**
 * All-gather the header of a compressed coll (TACL_COLL_ALLREDUCE,
 * _REDUCE_SCATTER or _ALLGATHER) of count values with these codec,
 * params, scheme and hops on comm: TACL_ERR_INVALID_ARG on every rank,
 * naming what differs, when the ranks disagree (collective).
 */
tacl_status_t tacl__comp_agree(tacl_comm_t comm, tacl_coll_t coll,
                               size_t count, const tacl_codec_t *codec,
                               const tacl_codec_params_t *params,
                               tacl_comp_scheme_t scheme,
                               tacl_comp_hops_t hops);

/**
 * Every check the blocking call coll (TACL_COLL_ALLREDUCE,
 * _REDUCE_SCATTER or _ALLGATHER) makes of its arguments before it runs,
 * with the same messages: for its non-blocking form, at issue.
 */
tacl_status_t tacl__comp_check_call(tacl_coll_t coll, const float *send,
                                   float *recv, size_t count,
                                   const tacl_codec_t *codec,
                                   const tacl_codec_params_t *params,
                                   float *err, tacl_comp_scheme_t scheme,
                                   tacl_comm_t comm);

/** The checks of tacl_comp_*_hops (coll as tacl__comp_agree's) with
 *  hops other than ALL. */
tacl_status_t tacl__comp_check_hops(tacl_coll_t coll, const float *send,
                                    const float *recv, size_t count,
                                    const tacl_codec_t *codec,
                                    const tacl_codec_params_t *params,
                                    tacl_comp_scheme_t scheme,
                                    tacl_comp_hops_t hops);

/**
 * What one rank of a flat compressed call of coll (as tacl__comp_agree's)
 * with count on n ranks sends, each encoding at its bound: the bytes and
 * messages of its scheme's collectives (tacl_comp_estimate's steps) as
 * ring algorithms move them ((n - 1) blocks; an all-reduce 2 (n - 1) / n
 * of its vector).  For the rails of a hierarchical call, which an
 * estimate may not create.  qgZ's scheme is priced as its all-to-all.
 */
tacl_status_t tacl__comp_flat_bytes(tacl_coll_t coll, size_t count,
                                    const tacl_codec_t *codec,
                                    const tacl_codec_params_t *params,
                                    tacl_comp_scheme_t scheme, int n,
                                    double *bytes_p, int *messages_p);

/**
 * Host scratch of bytes for a compressed call on comm, from comm's
 * scratch pool (the executor's: reused across calls and huge-page
 * backed, so a large call does not fault in fresh pages every time);
 * NULL when out of memory.  Give it back with tacl__comp_scratch_put
 * (NULL is ignored).
 */
void *tacl__comp_scratch(tacl_comm_t comm, size_t bytes);
void tacl__comp_scratch_put(tacl_comm_t comm, void *ptr);

#endif /* TACL_LIB_COMPCOLL_H */
