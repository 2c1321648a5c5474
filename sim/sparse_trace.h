/*
 * Sparse-gradient traces: which rows of an embedding table each rank's
 * batch touches, with the properties the thesis' chapter 3 measured on
 * real models (section 3.2.2): ranks overlap partially (C1), the union
 * is denser than any one rank (C2) and rows are skewed toward small
 * indices (C3, Figure 3.2).
 *
 * The vocabulary is frequency-sorted: row i is the i-th most frequent
 * token, with Zipf's law p(i) ~ 1 / (i + 1)^s.  Rank r's batch draws
 * tokens independently from that law (its own random stream) until it
 * has touched nnz distinct rows; those rows, in the order first drawn,
 * are its gradient's indices.  Tests, benchmarks and tacl-sim use the
 * same generator, so a figure and its prediction see the same rows.
 */
#ifndef TACL_SIM_SPARSE_TRACE_H
#define TACL_SIM_SPARSE_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "tacl.h"

typedef struct {
    uint64_t nrows;   /* vocabulary: rows of the table */
    double s;         /* Zipf exponent (1.0: natural language) */
    uint64_t seed;    /* the same seed makes the same trace */
    double *cdf;      /* nrows cumulative probabilities */
    uint8_t *seen;    /* nrows marks, one rank at a time */
} tacl__sparse_trace_t;

/** A trace over nrows rows; TACL_ERR_INVALID_ARG or _NO_MEMORY. */
tacl_status_t tacl__sparse_trace_init(tacl__sparse_trace_t *t,
                                      uint64_t nrows, double s,
                                      uint64_t seed);
void tacl__sparse_trace_fini(tacl__sparse_trace_t *t);

/**
 * Rank r's nnz distinct row indices into idx (int64), unsorted.  nnz
 * must not exceed nrows; when the law's tail makes nnz rows out of
 * reach in 64 nnz draws (or 16 nrows), *got_p says how many it found.
 */
void tacl__sparse_trace_rank(tacl__sparse_trace_t *t, int rank, size_t nnz,
                             int64_t *idx, size_t *got_p);

/**
 * n tokens of the law into tok, repeats kept: the token stream a batch
 * reads, where tacl__sparse_trace_rank keeps only the rows it touches.
 * Stream `stream` of the trace's seed; the same stream gives the same
 * tokens.
 */
void tacl__sparse_trace_tokens(const tacl__sparse_trace_t *t,
                               uint64_t stream, size_t n, int64_t *tok);

#endif
