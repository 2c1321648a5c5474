/*
 * A fork-based harness for transport tests: the parent forks N ranks that
 * share an anonymous mapping made before the fork; the transports' setup
 * exchange is an allgather through that mapping, fenced by a
 * process-shared barrier.  A rank reports failure through its exit code
 * (CHECK prints the failed condition), and an alarm bounds every rank.
 * The forking and reaping are tests/common's (fork.h); a rank's index is
 * tt_rank there.
 */
#ifndef TACL_TESTS_TRANSPORT_TL_HARNESS_H
#define TACL_TESTS_TRANSPORT_TL_HARNESS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <unistd.h>

#include "check.h"
#include "fork.h"
#include "transport.h"

#define TLH_MAX_RANKS 16
#define TLH_MAX_REC 256

typedef struct {
    pthread_barrier_t barrier;
    int nranks;
    _Atomic int flags[8];      /* free for a test's own signalling */
    _Atomic uint64_t stamp;    /* free for a test's own timing */
    unsigned char recs[TLH_MAX_RANKS * TLH_MAX_REC];
} tlh_shared_t;

/** What a rank runs; returns its exit code (0 = passed). */
typedef int (*tlh_rank_fn_t)(int rank, int nranks, void *arg);

extern tlh_shared_t *tlh_shared;
/** Hints tlh_op() gives every operation (see tlh_run). */
extern uint8_t tlh_hints;

/**
 * Fork nranks ranks running fn with TACL_SHM_MODE=mode (NULL: unset) and
 * wait for them; returns how many failed.  Mode "push" is cma with every
 * receive hinted PINNABLE (tlh_hints): the senders write large messages
 * instead of the receivers pulling them.  With kill_rank >= 0 the parent
 * SIGKILLs that rank once flags[0] is set, notes the time in stamp and
 * reaps it only after the others finish (so it stays a zombie meanwhile).
 */
int tlh_run(int nranks, const char *mode, tlh_rank_fn_t fn, void *arg,
            int kill_rank);

/** The exchange callback of tacl__tl_params_t. */
tacl_status_t tlh_exchange(void *ctx, void *all, size_t size);

/** A barrier among the ranks of the current run. */
void tlh_barrier(void);

/** Create a transport; node_ids NULL means every rank on node "n0". */
tacl__tl_t *tlh_init(const tacl__transport_ops_t *ops, int rank, int nranks,
                     const char *const *node_ids);

/** An operation and the status it completed with. */
typedef struct {
    tacl__tl_op_t op;          /* first, so the callback finds the rest */
    tacl_status_t status;      /* TACL_IN_PROGRESS until completed */
    int calls;                 /* how often the callback ran */
} tlh_op_t;

/** Fill an operation; its callback counts *pending down, notes status. */
tacl__tl_op_t *tlh_op(tlh_op_t *t, int peer, uint64_t tag, void *buf,
                      uint64_t len, int *pending);

/**
 * Progress (and sleep in wait() after spin idle polls) until *pending is
 * zero; returns 0, or -1 after timeout_s or a failed progress().
 */
int tlh_drive(tacl__tl_t *tl, int *pending, long spin, double timeout_s);

/** A deterministic byte pattern per seed. */
void tlh_fill(void *buf, size_t len, uint64_t seed);
/** Whether buf holds tlh_fill's pattern for seed. */
int tlh_check(const void *buf, size_t len, uint64_t seed);

#endif /* TACL_TESTS_TRANSPORT_TL_HARNESS_H */
