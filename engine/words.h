/*
 * The engine's word embedding (issue 31): a table of vocab x wdim
 * floats kept whole on every rank (data parallel, as DDP keeps it),
 * looked up by word tokens drawn from Zipf's law over the
 * frequency-sorted vocabulary (tacl_zipf_*, the law of tacl's sparse
 * traces), its row-sparse gradient summed over the ranks by
 * tacl_sparse_allreduce once a step.  Uses only tacl.h.
 */
#ifndef ENGINE_WORDS_H
#define ENGINE_WORDS_H

#include <stddef.h>
#include <stdint.h>

#include <tacl.h>

#include "model.h"

typedef struct engine_words engine_words_t;

/*
 * The table of m's word embedding (m->vocab > 0), initialised from the
 * seed, for micro-batches of b samples and s micro-steps a step, synced
 * with scheme on a communicator split from world (collective).  The
 * bytes of the table, its gradient and its two Adam moments are added
 * to *p, *g and *os.  On error a tacl status and a message in err.
 */
tacl_status_t words_create(tacl_comm_t world, const model_t *m, int b,
                           int s, uint64_t seed, tacl_sparse_scheme_t scheme,
                           engine_words_t **words_p, uint64_t *p,
                           uint64_t *g, uint64_t *os, char *err,
                           size_t errlen);
void words_destroy(engine_words_t *w);

/*
 * Sample i's words of the micro-batch: ctx - 1 from the stream named by
 * key, and a clue to its target byte, from one of four streams of that
 * byte, so the table has something to learn (words drawn at random
 * alone would teach it nothing).
 */
tacl_status_t words_draw(engine_words_t *w, int i, uint64_t key,
                         int target);
/* The micro-batch's words, b * ctx, for model_acts_bind. */
const int64_t *words_tokens(const engine_words_t *w);

void words_forward(engine_words_t *w, model_acts_t *acts);
/* Accumulates the micro-batch's rows into the gradient, noting them. */
void words_backward(engine_words_t *w, const model_acts_t *acts);

/*
 * Sum the step's gradient over the ranks in place (collective): the
 * rows this rank touched through the sparse all-reduce, or the whole
 * table through the dense one for TACL_SPARSE_DENSE.  *bytes_p gets
 * the bytes this rank sent for it, *scheme_p the scheme that ran.  On
 * error a message in err.
 */
tacl_status_t words_sync(engine_words_t *w, uint64_t *bytes_p,
                         tacl_sparse_scheme_t *scheme_p, char *err,
                         size_t errlen);

/* Table, gradient and Adam moments (kind as engine_shard_t's order:
 * 0 table, 1 gradient, 2 and 3 the moments), each len floats. */
float *words_array(engine_words_t *w, int kind, size_t *len_p);
/* A hash of the table's bytes. */
uint64_t words_checksum(const engine_words_t *w);

#endif /* ENGINE_WORDS_H */
