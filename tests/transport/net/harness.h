/*
 * The fork-based harness of the network transports' tests (ucx, ofi; see
 * harness.c), whose cases (net_cases.h) run on the transport net_ops.  A case runs
 * one function in 2 to 4 forked rank processes (tests/common's fork.h); a
 * rank reports a failed CHECK (check.h) on stderr and exits non-zero, and
 * the parent asserts on every rank's exit status.
 */
#ifndef TACL_TESTS_TRANSPORT_NET_HARNESS_H
#define TACL_TESTS_TRANSPORT_NET_HARNESS_H

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include "check.h"
#include "common.h"
#include "sched.h"
#include "transport.h"

#define MAX_RANKS 4
#define XCHG_BYTES (64 * 1024)
#define CHILD_DEADLINE_S 40

/** What the rank processes of a case share (MAP_SHARED). */
typedef struct {
    _Atomic uint32_t count;
    _Atomic uint32_t gen;
    int nranks;
    double bw_gbs;             /* measured by the bandwidth case */
    _Atomic int midway;        /* a rank died with part of a message in */
    char skip[256];            /* a rank found the case cannot run: why */
    uint8_t xchg[XCHG_BYTES];
} shared_t;

/** The exchange context of one rank. */
typedef struct {
    shared_t *sh;
    int rank;
} xctx_t;

/** What each rank process of a case runs. */
typedef void (*rank_fn_t)(shared_t *sh, int rank);

/** The transport under test: each test program defines it. */
extern const tacl__transport_ops_t *const net_ops;

/** Node ids "node-a".."node-d": every rank on its own node. */
extern const char *const node_names[MAX_RANKS];
/** Operations completed in this rank since the case last reset it. */
extern int done_count;

/** A barrier of the case's ranks; -1 after 20 s without the others. */
int barrier(shared_t *sh);
/** The params->exchange of the rank processes. */
tacl_status_t exchange(void *arg, void *all, size_t size);
/** This rank's instance into *tl_p: net_ops->init's status. */
tacl_status_t rank_try_init(shared_t *sh, int rank, xctx_t *x,
                            tacl__tl_t **tl_p);
/** Create this rank's instance and check reachable() for every rank. */
tacl__tl_t *rank_init(shared_t *sh, int rank, xctx_t *x);
/** Post op as a send or receive whose callback counts done_count. */
tacl_status_t post(tacl__tl_t *tl, tacl__tl_op_t *op, int is_send);
/** The same for a buffer of the given memory type. */
tacl_status_t post_mem(tacl__tl_t *tl, tacl__tl_op_t *op, int is_send,
                       tacl_memtype_t memtype);
/** A posted op's result: TACL_IN_PROGRESS until its callback ran. */
tacl_status_t op_result(const tacl__tl_op_t *op);
/** Progress and wait until done_count reaches target; first error. */
int drive(tacl__tl_t *tl, int target, double max_s);
/** The byte at offset i of message tag from src. */
uint8_t pattern(int src, uint64_t tag, uint64_t i);
void fill(uint8_t *buf, uint64_t len, int src, uint64_t tag);
int verify(const uint8_t *buf, uint64_t len, int src, uint64_t tag);
/**
 * Fork nranks ranks running fn and check how they ended: exit 0, or
 * killed by SIGKILL where expect_kill[r]; the shared area is returned
 * in *sh_p if asked for (munmap it), else unmapped.
 */
void run_ranks(int nranks, rank_fn_t fn, const int *expect_kill,
               shared_t **sh_p);
/** Pin UCX to loopback and to the transports tls (NULL: its default). */
void ucx_env(const char *tls);
/** Pin libfabric to its tcp provider on loopback. */
void ofi_env(void);
/** One byte from rank a to rank b, checked (every rank calls it). */
void ping(tacl__tl_t *tl, int rank, int a, int b, uint64_t tag);

#endif /* TACL_TESTS_TRANSPORT_NET_HARNESS_H */
