/*
 * The scaffolding the algorithm suites share (test_algos.c, test_hier.c,
 * test_quant_algos.c): layouts of ranks over nodes, the operation every
 * rank runs, its arguments and buffers, one run of simrun over every
 * rank, and the checks every suite makes after it (output bytes, each
 * output byte written once, inputs untouched, bytes between nodes).
 */
#ifndef TACL_TESTS_SUITE_H
#define TACL_TESTS_SUITE_H

#include "simrun.h"

/** Ranks placed on nodes. */
typedef struct {
    const char *name;
    int n;
    int n_nodes;
    int node_of[9];
    int regular;       /* every node the same number (>= 2) of ranks */
} suite_layout_t;

/** The view of rank in lay (10 GB/s host link, 1 Gbit/s network). */
tacl__topo_view_t suite_view(const suite_layout_t *lay, int rank);

/** The operation every rank of a suite run takes part in. */
typedef struct {
    tacl_coll_t coll;
    int n;             /* ranks */
    size_t count;      /* NCCL's count */
    tacl_dtype_t dtype;
    tacl_op_t op;
    int root;
    int in_place;
    uint64_t chunk;    /* pipeline chunk bytes */
    int qbits;         /* 0: exact */
    uint32_t qblock;
} suite_op_t;

/** The arguments of op on b's buffers (b NULL: no buffers). */
tacl__coll_args_t suite_args(const suite_op_t *op, const simrun_bufs_t *b,
                             uint64_t seq);

/**
 * Allocate rank r's buffers for op (no input on a broadcast's other
 * ranks, no output on a reduce's), let fill write the input's elements,
 * and declare them to sr.
 */
void suite_bufs(simrun_t *sr, const suite_op_t *op, int r, simrun_bufs_t *b,
                void (*fill)(const void *ctx, int r, void *send, size_t n),
                const void *ctx);

/** Rank r's output bytes equal exp. */
void suite_check_output(const simrun_bufs_t *b, int r, const char *exp,
                        const char *name);

/**
 * After a run: every output byte of rank r was written exactly once but
 * for those right(ctx, r, k) says were right before the operation (k from
 * the output's start; right NULL: none), nothing else of the output's
 * allocation was written, and out of place the input was not written.
 */
void suite_check_writes(simrun_t *sr, const suite_op_t *op, int r,
                        const simrun_bufs_t *b,
                        int (*right)(const void *ctx, int r, size_t k),
                        const void *ctx, const char *name);

/** Bytes the SEND steps of s send to ranks on another node. */
uint64_t suite_inter_bytes(const tacl__sched_t *s, const int *node_of);

/** What a suite does for one configuration cfg of n ranks. */
typedef struct {
    /* Set up rank r's buffers and build its schedule into sr. */
    void (*build)(const void *cfg, simrun_t *sr, int r, simrun_bufs_t *b,
                  uint64_t seq, const char *name);
    /* Check rank r after the run. */
    void (*check)(const void *cfg, simrun_t *sr, int r,
                  const simrun_bufs_t *b, const char *name);
} suite_t;

/**
 * Build every rank of cfg with suite->build, run them together in the
 * order seed draws, check every rank with suite->check, and free it all.
 */
void suite_run(const suite_t *suite, const void *cfg, int n, uint64_t seq,
               unsigned seed, const char *name);

#endif /* TACL_TESTS_SUITE_H */
