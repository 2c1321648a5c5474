/*
 * The fast engine's area as its two files see it (fastpath.c: the area,
 * the publishing protocol and a call run alone; fast_queue.c: calls
 * queued behind split ones).  Internal to executor/.
 */
#ifndef TACL_EXECUTOR_FAST_INT_H
#define TACL_EXECUTOR_FAST_INT_H

#include <stdatomic.h>
#include <stdint.h>

#include "fastpath.h"

#define FAST_LINE 64u
/* Large slots (cap bytes) per rank, used in turn: a call whose input does
 * not fit a record may run this many calls minus one ahead of a peer
 * that does not wait for it. */
#define FAST_DEPTH 4
/* Records per rank, one per call in turn (n % FAST_RING): each holds the
 * call's stamp and signature, and its input when that has at most
 * FAST_SMALL bytes, so a small call may run FAST_RING - 1 calls ahead. */
#define FAST_RING 64
/* Bytes of one record (four cache lines). */
#define FAST_REC 256u

typedef struct {
    _Alignas(FAST_LINE) _Atomic uint64_t seq; /* the flag (fastpath.h) */
} fast_flag_t;

/* Call n's record: the stamp is written (release) after the signature
 * and the data, so a reader that sees the stamp at n has both -- and
 * data of up to 48 bytes in the same cache line.  The whole signature,
 * at the record's end, is read only when the hashes differ, to say
 * how. */
typedef struct {
    _Alignas(FAST_LINE) _Atomic uint64_t stamp;
    uint32_t sig;              /* the signature's hash, low half */
    uint32_t pad;
    uint8_t data[FAST_REC - 16 - sizeof(tacl__op_sig_t)];
    tacl__op_sig_t full;       /* the signature itself */
} fast_rec_t;

#define FAST_SMALL (FAST_REC - 16u - (unsigned)sizeof(tacl__op_sig_t))

/*
 * Peers asleep on a rank (apart from its flag and records, which only
 * the rank writes): wake_seq is the futex word a sleeper waits on; the
 * rank bumps it and wakes its sleepers when it publishes a call at or
 * past the least one they wait for (want), not at every call: a
 * broadcast's root asleep until its receivers freed half its ring costs
 * them no system call per call.
 */
typedef struct {
    _Alignas(FAST_LINE) _Atomic uint32_t sleepers;
    _Atomic uint32_t wake_seq;
    _Atomic uint64_t want;     /* least call a sleeper waits for */
} fast_sleep_t;

/* A call begun and not finished (fast_queue.c), in call order. */
typedef struct {
    tacl__fast_op_t op;
    tacl__exec_t *exec;        /* a split call's execution, NULL for a
                                  blocking one (its caller waits) */
} fast_pend_t;

struct tacl__fast {
    void *base;
    size_t len;
    int rank, size;
    size_t cap;
    fast_flag_t *flags;        /* size of them */
    fast_sleep_t *sleep;       /* size of them */
    fast_rec_t *recs;          /* [rank][FAST_RING] */
    uint8_t *data;             /* [rank][FAST_DEPTH][cap] */
    /* This rank's calls, in order: numbered (n), stamped (its input
     * published), done (read and computed).  done <= stamped <= n; the
     * flag is min(stamped, done + 1).  Alone (done == n between calls)
     * a call runs without the context lock; calls queued behind a
     * split one are moved under it (fast_queue.c). */
    uint64_t n, stamped, done;
    fast_pend_t pend[FAST_RING]; /* calls done + 1 .. n, at call % RING */
    tacl__xcomm_t *xc;         /* the communicator it serves */
    /* What the oldest queued call waits for (fast_blocked()), set by
     * the drain under the lock and read without it (the sleep, a
     * waiter's poll): a hint, 0 when nothing is known. */
    _Atomic uint64_t blocked;
    uint64_t all_seen;         /* every flag was seen at this or above */
    int light;                 /* publish with a release store (every
                                  rank may use the global fence) */
    _Atomic int refs;          /* the communicator's, and one per split
                                  call's execution, which may outlive it
                                  (a request freed after an abort) */
    int owner;                 /* created it: removes the name */
    int linked;                /* the name still exists */
    char name[TACL__FAST_NAME_LEN];
};

static inline fast_rec_t *fast_rec(const tacl__fast_t *f, int rank,
                                   uint64_t n)
{
    return &f->recs[(size_t)rank * FAST_RING + n % FAST_RING];
}

static inline uint64_t fast_flag_of(const tacl__fast_t *f, int rank)
{
    return atomic_load_explicit(&f->flags[rank].seq, memory_order_acquire);
}

static inline uint64_t fast_stamp_of(const tacl__fast_t *f, int rank,
                                     uint64_t n)
{
    return atomic_load_explicit(&fast_rec(f, rank, n)->stamp,
                                memory_order_acquire);
}

/* The blocked word: rank's flag at call (data 0) or its stamp of call
 * (data 1).  Calls past 2^47 wrap it: it is only a hint. */
static inline uint64_t fast_blocked(int rank, uint64_t call, int data)
{
    return call << 17 | (uint64_t)(uint16_t)rank << 1 | (uint64_t)!!data;
}

static inline int fast_blocked_rank(uint64_t b)
{
    return (int)(b >> 1 & 0xffff);
}

static inline uint64_t fast_blocked_call(uint64_t b)
{
    return b >> 17;
}

/* Whether rank's flag reached n, or (data) its record of call n is
 * stamped: what a call blocked on it waits for has come. */
static inline int fast_peer_moved(const tacl__fast_t *f, int rank,
                                  uint64_t n, int data)
{
    return fast_flag_of(f, rank) >= n ||
           (data && fast_stamp_of(f, rank, n) >= n);
}

/* The calls back a record (or large slot) of call n was last used: a
 * peer is past that use once its flag reached n - depth + 1. */
static inline uint64_t fast_depth(const tacl__fast_t *f,
                                  const tacl__fast_op_t *op)
{
    return tacl__fast_in_bytes(op, f->rank, f->size) > FAST_SMALL
               ? FAST_DEPTH
               : FAST_RING;
}

/*
 * The protocol (fastpath.c).
 */
/** Write this rank's input of call n (op) and its signature, and stamp
 *  the record. */
void tacl__fast_stamp(tacl__fast_t *f, uint64_t n, const tacl__fast_op_t *op);
/** Raise this rank's flag to min(stamped, done + 1) and wake the peers
 *  asleep for a call up to it; or, when it stays, wake those asleep for
 *  a stamp up to stamped. */
void tacl__fast_announce(tacl__fast_t *f);
/**
 * Sleep until rank's flag reaches n (data 0) or its record of call n is
 * stamped (data 1), or 1 ms passes, or a wake for another sleeper: the
 * caller looks again.
 */
void tacl__fast_sleep_on(const tacl__fast_t *f, int rank, uint64_t n,
                         int data);
/**
 * Whether every peer's flag reached n (0: *rank_p the first behind), the
 * least flag seen kept so that a rank far ahead reads them rarely.
 */
int tacl__fast_flags_at(tacl__fast_t *f, uint64_t n, int *rank_p);
/**
 * Whether every input call n of op reads on this rank is stamped: 1; 0
 * with *rank_p the first missing; -1 with *rank_p a rank whose call n
 * has another signature.
 */
int tacl__fast_inputs_ready(const tacl__fast_t *f, uint64_t n,
                            const tacl__fast_op_t *op, int *rank_p);
/** The error for rank's call n having another signature than op's. */
tacl_status_t tacl__fast_mismatch(const tacl__fast_t *f, uint64_t n,
                                  const tacl__fast_op_t *op, int rank);
/** Compute call n of op from the stamped inputs into op's output. */
tacl_status_t tacl__fast_compute(const tacl__fast_t *f, uint64_t n,
                                 const tacl__fast_op_t *op);

#endif /* TACL_EXECUTOR_FAST_INT_H */
