/*
 * An in-process runner for the schedules of every rank of one operation.
 *
 * Tests build one schedule per rank against real host buffers, declare
 * those buffers as regions, and run.  The runner allocates scratch,
 * matches every send with its receive (by sender, receiver and tag, in
 * posting order), checks statically that any two steps of a rank that
 * touch the same bytes (one of them writing) are ordered by dependencies,
 * and executes the steps in a random order that respects dependencies,
 * a send and its receive together (rendezvous, the strictest model).  It
 * reports unmatched messages, length mismatches, deadlocks, reads of
 * bytes never written, writes through input buffers, and keeps per-byte
 * write counts of every region and bytes sent per rank.
 */
#ifndef TACL_TESTS_SIMRUN_H
#define TACL_TESTS_SIMRUN_H

#include <stddef.h>
#include <stdint.h>

#include "algo.h"
#include "sched.h"
#include "topo_view.h"

typedef struct simrun simrun_t;

/** A runner for n ranks, each with an empty schedule. */
simrun_t *simrun_new(int nranks);
void simrun_free(simrun_t *sr);

/** The schedule of rank, to build into. */
tacl__sched_t *simrun_sched(simrun_t *sr, int rank);

/**
 * Declare size bytes at ptr as memory of rank that schedules may refer to.
 * Bytes [def_off, def_off + def_len) hold meaningful data at the start of
 * every run (inputs); the others must be written before they are read.
 */
void simrun_region(simrun_t *sr, int rank, void *ptr, size_t size,
                   size_t def_off, size_t def_len);

/**
 * Run every schedule once, choosing among runnable steps with seed.
 * Returns 0, or -1 with a description of the first problem in err.
 * The regions' contents must be reset by the caller between runs.
 */
int simrun_run(simrun_t *sr, unsigned seed, char *err, size_t errlen);

/** Per-byte write counts of the region of rank that starts at ptr. */
const uint8_t *simrun_writes(const simrun_t *sr, int rank, const void *ptr);

/** Bytes and messages rank sent in the last run. */
uint64_t simrun_bytes_sent(const simrun_t *sr, int rank);
uint64_t simrun_msgs_sent(const simrun_t *sr, int rank);

/**
 * Ranks (a bit mask, up to 64 ranks) whose start the completion of rank
 * causally follows in the last run: all ranks for a barrier.
 */
uint64_t simrun_knows(const simrun_t *sr, int rank);

/** Total steps of all ranks. */
uint64_t simrun_steps(const simrun_t *sr);

/**
 * The topology view of rank in a layout of n ranks on the nodes node_of
 * names (core's tacl__topo_view_make), with a 10 GB/s host link and a
 * 1 Gbit/s network, as the tests of hierarchical and quantized
 * algorithms model them.
 */
tacl__topo_view_t simrun_view(const int *node_of, int n, int rank);

/** One rank's input and output buffers, as the suites allocate them. */
typedef struct {
    char *send, *recv;     /* input and output; NULL when the rank has none */
    char *salloc, *ralloc; /* what simrun_bufs_free releases */
    size_t sbytes, rbytes;
    char *region;          /* the allocation that holds the output */
    size_t out_off;        /* where the output starts in region */
    size_t out_bytes;      /* rbytes, or 0 without an output */
} simrun_bufs_t;

/**
 * Allocate rank's buffers for an operation of type coll with sbytes of
 * input and rbytes of output (none where has_send / has_recv is 0), in
 * place by NCCL's rules when in_place: for reduce-scatter the output is
 * block rank of the input, for all-gather the input is block rank of the
 * output, otherwise both are one buffer.  The output is filled with 0xee;
 * the caller fills the input.  out_bytes is 0 without has_recv, even in
 * place (a reduce's non-root ranks).
 */
void simrun_bufs_alloc(simrun_bufs_t *b, tacl_coll_t coll, int rank,
                       int in_place, size_t sbytes, size_t rbytes,
                       int has_send, int has_recv);
/** Declare b to sr as rank's memory: the input defined, the rest not. */
void simrun_bufs_declare(simrun_t *sr, int rank, const simrun_bufs_t *b,
                         tacl_coll_t coll, int in_place);
void simrun_bufs_free(simrun_bufs_t *b);

/**
 * Elements of one rank's input (send) or output (recv) for coll with
 * NCCL's count on nranks ranks: per rank for all-gather and
 * reduce-scatter, per block for all-to-all, the whole buffer otherwise.
 */
size_t simrun_send_elems(tacl_coll_t coll, size_t count, int nranks);
size_t simrun_recv_elems(tacl_coll_t coll, size_t count, int nranks);

#endif /* TACL_TESTS_SIMRUN_H */
