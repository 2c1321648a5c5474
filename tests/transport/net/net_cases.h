/*
 * The cases every network transport's tests run (net_cases.c), on the
 * transport net_ops.  A *_rank function is what each forked rank of a
 * case runs (run_ranks); the others are whole cases.
 */
#ifndef TACL_TESTS_TRANSPORT_NET_CASES_H
#define TACL_TESTS_TRANSPORT_NET_CASES_H

#include "harness.h"

/** One 64 MB message, timed (bw_rank sets sh->bw_gbs). */
#define BW_BYTES (64ull << 20)

/** All ranks on one node: init exchanges nothing and reaches nobody. */
void one_node_is_idle(void);
/** A rank outside the world is refused at init. */
void bad_arguments(void);

/* 2 ranks: every size from 0 B to 64 MB both ways, receives reversed. */
void sizes_rank(shared_t *sh, int rank);
/* 2 ranks: one 64 MB message three times, the best rate noted. */
void bw_rank(shared_t *sh, int rank);
/* n ranks: 40 messages each way per pair, posted in random order. */
void many_rank(shared_t *sh, int rank);
/* 2 ranks: 64 messages of one source and tag arrive in order. */
void fifo_rank(shared_t *sh, int rank);
/* 2 ranks: receives shorter and longer than their sends fail alone. */
void mismatch_rank(shared_t *sh, int rank);
/* 2 ranks: rank 1 dies while receiving 64 MB; the send fails. */
void killed_send_rank(shared_t *sh, int rank);
/* 2 ranks: rank 1 dies while rank 0 waits on it; the receives fail. */
void killed_recv_rank(shared_t *sh, int rank);
/* 2 ranks: rank 1 dies in the middle of sending 64 MB. */
void killed_midway_sender_rank(shared_t *sh, int rank);
/* 3 ranks: rank 0 closes and leaves; the others carry on. */
void leave_rank(shared_t *sh, int rank);
/* 2 ranks: cancel_all completes every pending operation once. */
void cancel_rank(shared_t *sh, int rank);
/* 2 ranks: wait() sleeps while idle and wakes when a message comes. */
void wait_rank(shared_t *sh, int rank);
/* 2 ranks: a connected peer that moves nothing is no progress. */
void quiet_peer_rank(shared_t *sh, int rank);
/*
 * 3 ranks: rank 0 receives what ranks 1 and 2 send through probe, each
 * sender's messages in order, none of another tag or already taken.
 */
void any_source_rank(shared_t *sh, int rank);

/** For run_ranks: rank 1 of 2 dies by SIGKILL. */
extern const int kill_rank1[2];

/**
 * A case of n forked ranks as a Criterion test: SETUP (an expression
 * choosing the transport's settings) in the test's process, then BODY on
 * every rank; KILL is run_ranks' expect_kill (NULL: every rank exits 0).
 */
#define NET_CASE(suite, name, setup, n, body, kill)                          \
    Test(suite, name, .timeout = 60)                                         \
    {                                                                        \
        setup;                                                               \
        run_ranks(n, body, kill, NULL);                                      \
    }

#endif /* TACL_TESTS_TRANSPORT_NET_CASES_H */
