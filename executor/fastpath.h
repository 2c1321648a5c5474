/*
 * The fast engine: a shared-memory area per communicator in which a
 * collective of a few kilobytes runs directly, without a schedule or a
 * transport message (the way Open MPI's coll/sm and NCCL's LL protocol
 * do it).
 *
 * The area holds one flag word per rank, each on its own cache line, a
 * ring of 64 records of 256 bytes per rank, and per rank four large
 * slots of `cap` bytes.  Call n of the engine (counted on each rank;
 * every rank takes the engine for the same calls) uses record n % 64:
 * a rank copies its input into the record (up to 208 bytes) or into
 * large slot n % 4 (more), writes the call's signature (op.h: its hash,
 * and the whole signature for messages) into the record and stamps the
 * record with n (release store).  A peer waiting for call n polls the
 * record's stamp (acquire load): the stamp, the signature and an input
 * of up to 48 bytes share one cache line.  It checks the signature and
 * may read the input.  A rank's flag says min(stamped, done + 1): every
 * call below it is done reading.  Before a rank writes record n % 64
 * again (call n + 64) it waits until every peer's flag reached n + 1;
 * before it writes large slot n % 4 again, until every flag reached
 * n - 3.  So a rank whose call needs nothing from its peers (a
 * broadcast's root, reduce's non-roots) runs up to 63 small calls (3
 * large ones) ahead of its slowest peer, and remembers the least flag it
 * saw, so it reads its peers' flags about once per dozens of calls.
 * Reductions combine the ranks' slots in rank order 0, 1, ..., so every
 * rank computes the same bits.
 *
 * A blocking call with no earlier call pending runs to its end in the
 * caller's thread without the context lock (tacl__fast_run).  A
 * non-blocking call (tacl__fast_start_nb) stamps its input when its
 * record is free and returns an execution of the executor's; its
 * peers' inputs are read later, in call order, by whoever progresses the
 * context; a blocking call behind such calls queues with them
 * (tacl__fast_wait_queued) (fast_queue.c).
 *
 * Waiting follows the executor's policy (wait.h): polls, then polls and
 * yields, then sleeps on the peer (a futex, 1 ms at most before looking
 * around again).  A sleeper says which call it waits for; the peer wakes
 * its sleepers when it publishes that call or a later one, not at every
 * call.  A rank that must sleep before reusing a record or slot sleeps
 * until its peers are halfway from that to its call, so a root ahead of
 * its receivers then runs about 32 calls without waiting or being
 * woken.  The context's fatal flag (an abort from another thread, a
 * failure seen elsewhere), the bootstrap's liveness check (a dead peer)
 * and the communicator's timeout end a wait with an error.
 */
#ifndef TACL_EXECUTOR_FASTPATH_H
#define TACL_EXECUTOR_FASTPATH_H

#include <stddef.h>
#include <stdint.h>

#include "tacl.h"
#include "executor.h"
#include "op.h"


/** Bytes of a fast-path area's shared-memory name, NUL included. */
#define TACL__FAST_NAME_LEN 64

typedef struct tacl__fast tacl__fast_t;

/** One fast-path call, as validated by the API layer. */
typedef struct {
    tacl_coll_t coll;          /* allreduce, allgather, reduce_scatter,
                                  broadcast, reduce or barrier */
    const void *sendbuf;
    void *recvbuf;
    size_t count;              /* as the collective's entry point takes it */
    size_t esize;              /* bytes of one element of dtype */
    tacl_dtype_t dtype;
    tacl_op_t op;
    int root;
    tacl__op_sig_t sig;        /* what every rank must have called */
    uint32_t hash;             /* tacl__op_sig_hash(&sig), low half */
} tacl__fast_op_t;

/** The fast-path call of a (one of the collectives above). */
tacl__fast_op_t tacl__fast_op_of(const tacl__coll_args_t *a);

/**
 * Create an area for size ranks with slots of cap bytes, as rank rank (the
 * creator, normally rank 0), under a fresh name written into name.
 */
tacl_status_t tacl__fast_create(int rank, int size, size_t cap,
                                char name[TACL__FAST_NAME_LEN],
                                tacl__fast_t **fast_p);

/** Map the area another rank created under name, as rank rank. */
tacl_status_t tacl__fast_attach(const char *name, int rank, int size,
                                tacl__fast_t **fast_p);

/** Remove the area's name (every rank mapped it, or gave up). */
void tacl__fast_unlink(tacl__fast_t *fast);

/** Unmap the area (and remove its name if this rank created it). */
void tacl__fast_free(tacl__fast_t *fast);

/**
 * Whether this process may publish without a fence per call: it is
 * registered for membarrier()'s global expedited command (and the command
 * works), which a sleeping peer runs instead (fastpath.c, sleep_on).
 */
int tacl__fast_light_ready(void);

/** Publish with release stores (every rank said tacl__fast_light_ready),
 *  or with seq_cst ones (the default). */
void tacl__fast_set_light(tacl__fast_t *fast, int on);

/** Bytes of one slot: the most one rank's input may have. */
size_t tacl__fast_cap(const tacl__fast_t *fast);

/**
 * Bytes op's largest input has (the root's for a broadcast): the same on
 * every rank, so what TACL_FAST_MAX bounds.
 */
size_t tacl__fast_msg_bytes(const tacl__fast_op_t *op, int size);

/** Bytes op puts in this rank's slot (its input), 0 for none. */
size_t tacl__fast_in_bytes(const tacl__fast_op_t *op, int rank, int size);

/**
 * Count op's bytes in xc's counters as messages to the peers that read
 * them (tl: the transport index the peers are reached by); context lock
 * held.
 */
void tacl__fast_count(tacl__xcomm_t *xc, int tl, const tacl__fast_op_t *op,
                      int rank, int size);

/**
 * Begin call op on the area (lock held): its number in *n_p.  Returns 1
 * when no earlier call of this rank is pending, so the caller runs it
 * alone without the lock (tacl__fast_run); 0 when it queued behind
 * earlier split calls (the caller waits with tacl__fast_wait_queued);
 * -1 with the error recorded (the context failed while it waited for
 * room in the queue).
 */
int tacl__fast_begin(tacl__fast_t *fast, tacl__xcomm_t *xc,
                     const tacl__fast_op_t *op, uint64_t *n_p);

/**
 * Run call n (op) alone, this rank's part of the collective to its end,
 * without the context lock (it takes it only for liveness checks and to
 * fail the context).  On a timeout or a dead peer the context is failed,
 * as the executor's waits do.
 */
tacl_status_t tacl__fast_run(tacl__fast_t *fast, tacl__xcomm_t *xc,
                             const tacl__fast_op_t *op, uint64_t n);

/** Wait for queued call n to be done (takes the lock in turns). */
tacl_status_t tacl__fast_wait_queued(tacl__fast_t *fast, tacl__xcomm_t *xc,
                                     uint64_t n);

/**
 * Start op as a split call (lock held): stamped now when its record is
 * free, done by progress; *exec_p is its execution (the open flight
 * record claimed), which a request can wait for.
 */
tacl_status_t tacl__fast_start_nb(tacl__fast_t *fast, tacl__xcomm_t *xc,
                                  const tacl__fast_op_t *op,
                                  tacl__exec_t **exec_p);

#endif /* TACL_EXECUTOR_FASTPATH_H */
