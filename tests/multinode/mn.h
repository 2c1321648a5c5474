/*
 * The multi-node conformance check (mn_check): one program that runs as
 * every rank of a job started by tacl-cluster, with the expected layout
 * (ranks per node) on its command line.  mn_main.c parses the command
 * line, creates the communicator and checks the topology queries;
 * mn_coll.c runs every collective with exact values and checks the byte
 * counters after each one; mn_split.c does the same on split
 * communicators; mn_ring.c checks the inter-node bytes of the
 * forced ring algorithms against the ring formula.
 *
 * Data errors are counted and the run goes on (so one report shows every
 * wrong case); a call that returns an error stops the rank at once, since
 * the ranks may no longer agree on what comes next.
 */
#ifndef TACL_TESTS_MN_H
#define TACL_TESTS_MN_H

#include <stddef.h>
#include <stdint.h>

#include "tacl.h"

typedef struct {
    tacl_comm_t comm;
    int rank;
    int nranks;
    int n_nodes;
    int *rpn;           /* expected ranks per node, n_nodes entries */
    int *node_of;       /* expected node of every rank */
    const char *dir;    /* per-run directory all nodes share, or NULL */
    const char *label;  /* who is speaking, when not just "rank N" */
    int failures;       /* data errors found so far */
    int cases;          /* cases checked so far */
} mn_t;

/** Failures printed per rank (or per split part); the rest are counted. */
#define MN_MAX_REPORTS 40

/** Print "mn_check rank R: FAIL: ..." and count one failure. */
void mn_fail(mn_t *mn, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/** Stop the rank: a call returned status instead of TACL_OK. */
void mn_die(const mn_t *mn, tacl_status_t status, const char *what)
    __attribute__((noreturn));

/** Stop the rank when status is not TACL_OK. */
static inline void mn_ok(const mn_t *mn, tacl_status_t status,
                         const char *what)
{
    if (status != TACL_OK)
        mn_die(mn, status, what);
}

/** A communicator's answers to the queries of a rank's place. */
typedef struct {
    int rank, size;
    int node, n_nodes;
    int local_rank, local_size;
} mn_place_t;

/** Ask mn->comm every query of mn_place_t; a failed one stops the rank. */
void mn_place(const mn_t *mn, mn_place_t *p);

/** A buffer of n elements of dtype followed by a guard, set to a pattern. */
void *mn_alloc(size_t n, size_t es);
/** Bytes of guard that follow every mn_alloc buffer. */
#define MN_GUARD 64
/** The pattern byte of untouched memory. */
#define MN_SENTINEL 0xa5

/**
 * The exact value of element i of rank's data for a case: an integer in
 * [-50, 50], stored as is for int32 and times 0.25 for float32, so that
 * sums over any number of ranks of this job are exact in both types.
 */
int32_t mn_val(int rank, size_t i, int salt);
/** Store the integer v as element i of buf (int32 or float32). */
void mn_store(void *buf, tacl_dtype_t dtype, size_t i, int64_t v);
/** Element i of buf as text, for messages. */
void mn_fmt(const void *buf, tacl_dtype_t dtype, size_t i, char *text,
            size_t len);
/** Fill n elements with mn_val(rank, off + k, salt). */
void mn_fill(void *buf, tacl_dtype_t dtype, size_t n, int rank, size_t off,
             int salt);

/**
 * Compare n elements plus the guard of got against want; count and print
 * one failure naming the first wrong element.  Returns 1 when equal.
 */
int mn_compare(mn_t *mn, const char *what, const void *want, const void *got,
               size_t n, tacl_dtype_t dtype);

/** Bytes this rank sent since before, per link class and transport. */
typedef struct {
    uint64_t link[TACL_NUM_LINK_CLASSES];
    uint64_t self, shm, nettl, other;  /* nettl: ucx or ofi */
} mn_delta_t;

/** Counters now. */
void mn_counters(const mn_t *mn, tacl_counters_t *c);
/**
 * Bytes sent since before, and the invariants every operation keeps: host
 * bytes are shm bytes, net bytes are the network transport's (ucx or
 * ofi), self bytes are self transport bytes, no host bytes from a rank
 * alone on its node and no net bytes on a single node.
 */
void mn_delta_check(mn_t *mn, const char *what, const tacl_counters_t *before,
                    mn_delta_t *delta_p);

/** Node of a rank; link class between two ranks by the expected layout. */
int mn_link_class(const mn_t *mn, int a, int b);

/** Run the collective conformance cases. */
void mn_run_collectives(mn_t *mn);
/** One count (1001) of every collective, both types, in and out of place. */
void mn_run_basic(mn_t *mn);
/** Split the communicator three ways and check each part. */
void mn_run_splits(mn_t *mn);
/** Check the bytes of the ring all-gather and reduce-scatter. */
void mn_run_ring(mn_t *mn);
/**
 * Tagged messages and receives from any source by MPI's rules; the last
 * case aborts the communicator (mn->comm is NULL after it).
 */
void mn_run_p2p(mn_t *mn);
/**
 * After a barrier the last rank leaves without a word; every other
 * rank's receive from any source must fail, not hang (mn->comm is NULL
 * after it).
 */
void mn_run_p2p_dead(mn_t *mn);

#endif /* TACL_TESTS_MN_H */
