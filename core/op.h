/*
 * The operation vocabulary every layer speaks: which operations there
 * are (tacl_coll_t and its names, from tacl.h's TACL_COLL_LIST), what one
 * call of them carries (tacl__coll_args_t), and the signature every rank
 * of a call must agree on (tacl__op_sig_t).  The entry points fill the
 * arguments, the builders read them, the plan cache and the fast path's
 * memo key by them, and TACL_CHECK, the fast path's records and the
 * flight recorder compare and print signatures: all through this file,
 * as NCCL's ncclFunc_t and ncclFuncToString serve its enqueue, proxy,
 * profiler and tuner alike.
 */
#ifndef TACL_CORE_OP_H
#define TACL_CORE_OP_H

#include <stddef.h>
#include <stdint.h>

#include "tacl.h"

/** Whether coll reduces (takes a tacl_op_t). */
static inline int tacl__coll_reduces(tacl_coll_t coll)
{
    return coll == TACL_COLL_REDUCE_SCATTER || coll == TACL_COLL_ALLREDUCE ||
           coll == TACL_COLL_REDUCE;
}

/** Whether coll has a root (broadcast, reduce). */
static inline int tacl__coll_rooted(tacl_coll_t coll)
{
    return coll == TACL_COLL_BROADCAST || coll == TACL_COLL_REDUCE;
}

/** Whether coll is point-to-point (its root field is the peer). */
static inline int tacl__coll_p2p(tacl_coll_t coll)
{
    return coll == TACL_COLL_SEND || coll == TACL_COLL_RECV;
}

/** Whether coll takes a count per peer (ALLTOALLV, ALLGATHERV). */
static inline int tacl__coll_vcounted(tacl_coll_t coll)
{
    return coll == TACL_COLL_ALLTOALLV || coll == TACL_COLL_ALLGATHERV;
}

/**
 * The operation a user names ("allreduce", "reduce_scatter"; case, '_'
 * and '-' ignored, so "reducescatter" and "Reduce-Scatter" name it too),
 * or -1.
 */
int tacl__coll_from_name(const char *name);

/**
 * The counts of a variable-count operation (ALLTOALLV, ALLGATHERV) on
 * one rank, in elements, one entry per rank: what this rank sends to
 * peer j (send[j] elements at sendbuf + sdispl[j]) and receives from it
 * (recv[j] at recvbuf + rdispl[j]).  An all-gather-v is the all-to-all-v
 * whose every send is the whole input: send[j] is its sendcount and
 * sdispl[j] 0, so one builder serves both.  The entry points copy the
 * caller's arrays into one (the caller may free theirs when the call
 * returns); a group's record and the plan cache keep copies of their
 * own (tacl__vcounts_dup).  hash covers n and every entry.
 */
typedef struct {
    int n;
    uint64_t hash;
    size_t *send, *sdispl, *recv, *rdispl; /* n each, in this allocation */
    size_t *matrix; /* NULL, or n * n: elements rank i sends rank j at
                       [i * n + j], every rank's (tacl__vcounts_with) */
} tacl__vcounts_t;

/**
 * A table of n ranks: sendcounts and sdispls (NULL for an all-gather-v:
 * every send is sendcount elements at 0), recvcounts and rdispls.  NULL
 * when out of memory.
 */
tacl__vcounts_t *tacl__vcounts_new(int n, const size_t *sendcounts,
                                   const size_t *sdispls, size_t sendcount,
                                   const size_t *recvcounts,
                                   const size_t *rdispls);

/**
 * A copy of v that also holds every rank's send counts, rows[i * n + j]
 * the elements rank i sends rank j (what the ranks of a call gathered):
 * the hierarchical all-to-all-v relays other ranks' blocks, whose sizes
 * only their senders know.  NULL when out of memory.
 */
tacl__vcounts_t *tacl__vcounts_with(const tacl__vcounts_t *v,
                                    const uint64_t *rows);

/**
 * Rank's own table of an exchange whose every count v's matrix holds:
 * its row and column of the matrix, each buffer's regions packed in
 * rank order, the matrix kept.  What the simulator builds each rank
 * with (it has no rank's real displacements).  NULL when out of memory.
 */
tacl__vcounts_t *tacl__vcounts_of_rank(const tacl__vcounts_t *v, int rank);

/** A copy of v (NULL for NULL, or when out of memory). */
tacl__vcounts_t *tacl__vcounts_dup(const tacl__vcounts_t *v);

/** Free v (NULL: nothing). */
void tacl__vcounts_free(tacl__vcounts_t *v);

/** Whether a and b (either may be NULL) hold the same table. */
int tacl__vcounts_same(const tacl__vcounts_t *a, const tacl__vcounts_t *b);

/**
 * One operation, as the public API received it (validated before a
 * builder sees it).  count follows NCCL: elements per rank for ALLGATHER
 * (sendcount) and REDUCE_SCATTER (recvcount), per block for ALLTOALL,
 * the whole buffer for the others.  A variable-count operation carries
 * its table in v, and count is then a figure every rank of the call
 * shares (the decider and TACL_ALGO's ranges read it, and the ranks
 * must choose alike): an all-gather-v's mean block (its recvcounts sum
 * over the ranks, rounded down), 0 for an all-to-all-v, whose ranks
 * share no size.  Without a table (an estimate, the tools) every block
 * of a variable-count operation is count elements, laid out as the
 * fixed-count operation's.
 */
typedef struct {
    tacl_coll_t type;
    int tag;                /* SEND/RECV: the user's tag, 0 or more */
    const void *sendbuf;
    void *recvbuf;
    size_t count;
    const tacl__vcounts_t *v; /* ALLTOALLV, ALLGATHERV: the counts, or
                                 NULL for count elements per block */
    tacl_dtype_t dtype;
    tacl_op_t op;           /* reductions; AVG allowed here */
    int root;               /* BROADCAST, REDUCE root; SEND/RECV peer
                               (RECV: TACL_ANY_SOURCE, any peer) */
    tacl_memtype_t memtype; /* HOST or CUDA, never AUTO */
    int *source;            /* RECV from any peer: gets the sender's rank
                               when it completes; may be NULL */
    uint64_t seq;           /* sequence number for TACL__TAG */
    uint64_t chunk_bytes;   /* pipeline chunk for ring algorithms */
    int qbits;              /* 0: exact; 8 or 4: quantized (qwZ, qgZ) */
    uint32_t qblock;        /* values per quantization scale */
    int shm_map;            /* the node's processes map one another's
                               tacl_mem_alloc memory and shared scratch
                               (TACL_SHM_MAP) */
    int send_mapped;        /* what the node's peers read from this rank
                               (all-gather: sendbuf, all-reduce: recvbuf)
                               is tacl_mem_alloc memory they map */
} tacl__coll_args_t;

/**
 * Whether a and b are the same call on this rank: every field but the
 * sequence number (what a builder reads, so one schedule serves both).
 */
int tacl__coll_args_same(const tacl__coll_args_t *a,
                         const tacl__coll_args_t *b);

/**
 * Bytes of the send and receive buffers operation a touches on rank of
 * nranks: 0 for a buffer it does not use (a broadcast's sendbuf and a
 * reduce's recvbuf on ranks but the root, a barrier's).  Returns -1 when
 * a buffer would exceed max_bytes (or the product overflows), else 0.
 */
int tacl__coll_bytes(const tacl__coll_args_t *a, int rank, int nranks,
                     uint64_t max_bytes, uint64_t *send_p,
                     uint64_t *recv_p);

/**
 * Elements this rank of a variable-count operation a sends to peer, and
 * where in sendbuf they begin (*displ_p); from v, or count per block
 * without a table.
 */
size_t tacl__vsend(const tacl__coll_args_t *a, int peer, size_t *displ_p);

/** Elements it receives from peer, and where in recvbuf (*displ_p). */
size_t tacl__vrecv(const tacl__coll_args_t *a, int peer, size_t *displ_p);

/**
 * Whether a's counts between every pair of ranks are known here: no
 * table (count everywhere), or a table with every rank's (matrix).
 */
static inline int tacl__vpairs_known(const tacl__coll_args_t *a)
{
    return a->v == NULL || a->v->matrix != NULL;
}

/** Elements rank i sends rank j of nranks (tacl__vpairs_known(a)). */
static inline size_t tacl__vpair(const tacl__coll_args_t *a, int nranks,
                                 int i, int j)
{
    return a->v != NULL ? a->v->matrix[(size_t)i * (size_t)nranks + j]
                        : a->count;
}

/**
 * Displacements of blocks laid end to end: displs[i] is the sum of
 * sizes[0..i); returns the sum of all n (what a v-collective's caller
 * computes for its receive buffer).
 */
static inline size_t tacl__prefix_sums(const size_t *sizes, int n,
                                       size_t *displs)
{
    size_t sum = 0;

    for (int i = 0; i < n; i++) {
        displs[i] = sum;
        sum += sizes[i];
    }
    return sum;
}

/**
 * Bytes of the largest input one rank gives the operation (the same on
 * every rank): the message of an all-reduce, all-gather, broadcast or
 * reduce, the whole send buffer of a reduce-scatter, 0 for a barrier.
 * What the fast engine's slot must hold.
 */
uint64_t tacl__coll_input_bytes(const tacl__coll_args_t *a, int nranks);

/**
 * Where each rank publishes its input for its peers to read (the fast
 * engine's area): the bytes rank publishes and how many peers read them
 * (a broadcast's root alone publishes; a reduce's root reads, the
 * others do not).
 */
void tacl__coll_shared_reads(const tacl__coll_args_t *a, int rank,
                             int nranks, uint64_t *bytes_p, int *readers_p);

/**
 * What every rank of one call must agree on.  Fields the operation does
 * not use hold -1 (op, root) or 0 (count and dtype of a barrier, qblock
 * of an exact call, vhash of a fixed-count call), so that they never
 * differ.  A variable-count call's vhash is a hash of this rank's count
 * table (tacl__vcounts_t's), which differs between ranks of a correct
 * call: tacl__op_sig_diff leaves it out (TACL_CHECK compares the tables
 * themselves, lib/check.c), while tacl__op_sig_hash and the flight
 * records cover it, so a record names the very counts of its call.
 */
typedef struct {
    uint64_t count;
    uint64_t vhash;
    int32_t coll, dtype, op, root, qbits, qblock;
} tacl__op_sig_t;

/** The fields of a signature, in the order tacl__op_sig_diff checks. */
typedef enum {
    TACL__SIG_COLL = 0,
    TACL__SIG_COUNT,
    TACL__SIG_DTYPE,
    TACL__SIG_OP,
    TACL__SIG_ROOT,
    TACL__SIG_QBITS,
    TACL__SIG_QBLOCK,
    TACL__SIG_SAME
} tacl__sig_field_t;

/** The signature of a (only the fields its operation uses). */
tacl__op_sig_t tacl__op_sig_of(const tacl__coll_args_t *a);

/** The first field in which a and b differ, TACL__SIG_SAME if none. */
tacl__sig_field_t tacl__op_sig_diff(const tacl__op_sig_t *a,
                                    const tacl__op_sig_t *b);

static inline int tacl__op_sig_eq(const tacl__op_sig_t *a,
                                  const tacl__op_sig_t *b)
{
    return tacl__op_sig_diff(a, b) == TACL__SIG_SAME;
}

/** A hash of s: equal signatures of fixed-count calls hash alike on
 *  every rank (a variable-count call's covers this rank's table). */
uint64_t tacl__op_sig_hash(const tacl__op_sig_t *s);

/** A field's name for messages ("dtype", "quantization bits", ...). */
const char *tacl__sig_field_name(tacl__sig_field_t f);

/** Field f of s as text ("float32", "256", ...), in buf if it must be. */
const char *tacl__sig_field_value(const tacl__op_sig_t *s,
                                  tacl__sig_field_t f, char *buf,
                                  size_t len);

/**
 * s as key=value words: "coll=allreduce count=256 dtype=float32
 * redop=sum root=-1" ("redop=none" and "root=-1" where unused), with
 * "qbits=8 qblock=256" after them for a quantized call and
 * "vcounts=<16 hex digits>" (vhash) for a variable-count one: the flight
 * records' words.
 * Returns what snprintf returns.
 */
int tacl__op_sig_format(const tacl__op_sig_t *s, char *buf, size_t len);

#endif /* TACL_CORE_OP_H */
