/*
 * tacl: a topology-aware collective-communication library.
 *
 * The API follows NCCL's semantics with C naming: a communicator is made
 * from a unique id (or from the environment torchrun sets), collectives
 * take a stream argument, and group start / group end fuse the calls
 * between them into one schedule.  Every call returns a tacl_status_t;
 * tacl_comm_last_error() gives the message behind the last error of a
 * communicator.
 *
 * Memory: the buffers of one call are all host memory or all CUDA device
 * memory (cudaMalloc, cuMem/VMM mappings, managed memory, or
 * tacl_mem_alloc(..., TACL_MEM_CUDA)) of the communicator's device, which
 * is the calling thread's current device when the communicator is made
 * (as in NCCL; a non-blocking init takes the calling thread's, and a
 * split or a derived communicator shares its parent's).
 * Host and device buffers in one call, or device memory of another
 * device, are TACL_ERR_INVALID_ARG with a message naming the buffers; a
 * build without CUDA or a communicator made where no device was usable
 * sees device pointers as host memory or refuses them with the reason.
 *
 * Streams, as NCCL's: a non-NULL stream is a cudaStream_t of the
 * communicator's device and comes with device buffers only (with host
 * buffers it is TACL_ERR_INVALID_ARG; a stream of another device too,
 * where the CUDA runtime can tell, 12.8 and later).  The operation starts
 * after the work enqueued on the stream before the call, and work
 * enqueued on the stream after the call sees its results.  The call only
 * enqueues, its blocking form included: it returns without waiting for
 * the GPU or the peers, and the communicator's progress thread (started
 * at its first call on a stream) finishes the operation.  A failure
 * there makes the communicator fail, which its next call reports (and
 * the stream is released, so work after it is not held forever).  The
 * "_nb" form returns a request as on host memory.  Synchronize the stream
 * (or wait for the requests) before destroying the communicator.
 *
 * A NULL stream means the call completes before it returns; with device
 * buffers the operation starts after the work on the legacy default
 * stream.  The "_nb" form of each call returns a request instead of
 * waiting, so an application can overlap computation with communication
 * and finish with tacl_request_wait().
 *
 * In-place conventions are NCCL's:
 *   all-gather      in place when sendbuf == recvbuf + rank * sendcount
 *   reduce-scatter  in place when recvbuf == sendbuf + rank * recvcount
 *   all-reduce, broadcast, reduce: in place when sendbuf == recvbuf.
 */
#ifndef TACL_H
#define TACL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TACL_VERSION_MAJOR 0
#define TACL_VERSION_MINOR 1
#define TACL_VERSION_PATCH 0
/** The version as one number: major * 10000 + minor * 100 + patch. */
#define TACL_VERSION_CODE                                                    \
    (TACL_VERSION_MAJOR * 10000 + TACL_VERSION_MINOR * 100 + TACL_VERSION_PATCH)

/*
 * Status codes.  The list macro is the single source of the enum values
 * and of their message strings.
 */
#define TACL_STATUS_LIST(X)                                                  \
    X(TACL_OK, 0, "success")                                                 \
    X(TACL_IN_PROGRESS, 1, "operation in progress")                          \
    X(TACL_ERR_INVALID_ARG, -1, "invalid argument")                          \
    X(TACL_ERR_INVALID_USAGE, -2, "invalid usage")                           \
    X(TACL_ERR_SYSTEM, -3, "system call failed")                             \
    X(TACL_ERR_INTERNAL, -4, "internal error")                               \
    X(TACL_ERR_REMOTE, -5, "remote peer failed or disconnected")             \
    X(TACL_ERR_TIMEOUT, -6, "timed out")                                     \
    X(TACL_ERR_UNSUPPORTED, -7, "unsupported")                               \
    X(TACL_ERR_NO_MEMORY, -8, "out of memory")

typedef enum {
#define TACL_STATUS_ENUM_(name, value, msg) name = value,
    TACL_STATUS_LIST(TACL_STATUS_ENUM_)
#undef TACL_STATUS_ENUM_
} tacl_status_t;

/** A short, constant description of a status code. */
const char *tacl_status_string(tacl_status_t status);

/** The library's version as TACL_VERSION_CODE would give it. */
tacl_status_t tacl_get_version(int *version_p);

/** Element types. */
typedef enum {
    TACL_INT8 = 0,
    TACL_UINT8,
    TACL_INT32,
    TACL_UINT32,
    TACL_INT64,
    TACL_UINT64,
    TACL_FLOAT16,
    TACL_BFLOAT16,
    TACL_FLOAT32,
    TACL_FLOAT64,
    TACL_NUM_DTYPES
} tacl_dtype_t;

/**
 * Reduction operations.  AVG is the sum divided by the rank count.  The
 * bitwise BAND, BOR and BXOR take the integer types only; any other
 * dtype with them is TACL_ERR_INVALID_ARG.
 */
typedef enum {
    TACL_SUM = 0,
    TACL_PROD,
    TACL_MAX,
    TACL_MIN,
    TACL_AVG,
    TACL_BAND,
    TACL_BOR,
    TACL_BXOR,
    TACL_NUM_OPS
} tacl_op_t;

/** Size of one element of a dtype in bytes, 0 for an invalid dtype. */
size_t tacl_dtype_size(tacl_dtype_t dtype);
/** Name of a dtype ("float32", ...), "invalid" for an invalid one. */
const char *tacl_dtype_name(tacl_dtype_t dtype);
/** Name of a reduction op ("sum", ...), "invalid" for an invalid one. */
const char *tacl_op_name(tacl_op_t op);

/**
 * Operations, as tacl_comm_estimate, tacl_coll_name and the flight
 * records name them.  The list macro is the single source of the enum
 * values and of their names (the public function's spelling without its
 * tacl_ prefix: "allgather", "reduce_scatter", ...).  Counts follow the
 * calls: per rank for ALLGATHER (sendcount) and REDUCE_SCATTER
 * (recvcount), per block for ALLTOALL, the whole buffer for the others.
 * ALLTOALLV and ALLGATHERV take a table of counts per peer; where only
 * one count can be given (tacl_comm_estimate) it is every peer's block,
 * as if every count of the table were equal.
 */
#define TACL_COLL_LIST(X)                                                    \
    X(TACL_COLL_ALLGATHER, 0, "allgather")                                   \
    X(TACL_COLL_REDUCE_SCATTER, 1, "reduce_scatter")                         \
    X(TACL_COLL_ALLREDUCE, 2, "allreduce")                                   \
    X(TACL_COLL_BROADCAST, 3, "broadcast")                                   \
    X(TACL_COLL_REDUCE, 4, "reduce")                                         \
    X(TACL_COLL_ALLTOALL, 5, "alltoall")                                     \
    X(TACL_COLL_SEND, 6, "send")                                             \
    X(TACL_COLL_RECV, 7, "recv")                                             \
    X(TACL_COLL_BARRIER, 8, "barrier")                                       \
    X(TACL_COLL_ALLTOALLV, 9, "alltoallv")                                   \
    X(TACL_COLL_ALLGATHERV, 10, "allgatherv")

typedef enum {
#define TACL_COLL_ENUM_(name, value, str) name = value,
    TACL_COLL_LIST(TACL_COLL_ENUM_)
#undef TACL_COLL_ENUM_
    TACL_NUM_COLLS
} tacl_coll_t;

/** Name of an operation ("allgather", ...), "invalid" for another value. */
const char *tacl_coll_name(tacl_coll_t coll);

/** Where a buffer lives.  AUTO detects it from the pointer. */
typedef enum {
    TACL_MEM_AUTO = 0,
    TACL_MEM_HOST,
    TACL_MEM_CUDA
} tacl_memtype_t;

#define TACL_UNIQUE_ID_BYTES 128
/** Opaque rendezvous information: the root's address and a nonce. */
typedef struct {
    char internal[TACL_UNIQUE_ID_BYTES];
} tacl_unique_id_t;

typedef struct tacl_comm *tacl_comm_t;
typedef struct tacl_request *tacl_request_t;
/**
 * A cudaStream_t (for device buffers: the call is ordered on it and only
 * enqueues), or NULL for "complete before returning".
 */
typedef void *tacl_stream_t;

/** Color that leaves a rank out of every communicator of a split. */
#define TACL_SPLIT_NOCOLOR (-1)

/**
 * Create a unique id.  The calling process opens the bootstrap listener
 * the id points at and must become a rank of the communicator made from
 * it; call it on one rank and hand the id to the others.
 */
tacl_status_t tacl_get_unique_id(tacl_unique_id_t *id_p);

/**
 * Create a communicator of nranks ranks in which the caller is rank.
 * Every rank calls it with the same id; it returns when all ranks have
 * joined, or with TACL_ERR_TIMEOUT after TACL_TIMEOUT seconds.
 */
tacl_status_t tacl_comm_init_rank(int nranks, const tacl_unique_id_t *id,
                                  int rank, tacl_comm_t *comm_p);

/**
 * Create a communicator from the environment a launcher left: tacl-run's
 * TACL_RANK, TACL_NRANKS; torchrun's RANK, WORLD_SIZE (rank 0 listens on
 * MASTER_ADDR and MASTER_PORT + 1, since torchrun's store holds
 * MASTER_PORT); Open MPI's OMPI_COMM_WORLD_*; Hydra's PMI_RANK and
 * PMI_SIZE; Slurm's SLURM_PROCID and SLURM_NTASKS (rank 0 on the first
 * node of the step).  MPI jobs on one node meet on the loopback address;
 * across nodes they need MASTER_ADDR.  TACL_ROOT_ADDR ("host:port") takes
 * precedence over every launcher's address.  An error names the launcher
 * guessed and the variable that is missing or wrong.
 */
tacl_status_t tacl_comm_init_env(tacl_comm_t *comm_p);

/**
 * Per-communicator configuration, as NCCL's ncclConfig_t.  Start from
 * TACL_CONFIG_INIT and set the fields you want; a field left at its
 * initial value takes the environment's setting, so one process can hold
 * communicators with different timeouts.  A bad configuration (size or
 * version not from TACL_CONFIG_INIT, a negative timeout, a flag other
 * than -1, 0 or 1, a name over 127 characters) is TACL_ERR_INVALID_ARG.
 *
 * The timeout bounds every wait on the communicator: its initialisation,
 * its operations, request waits, barriers.  A communicator made by split
 * shares its parent's connections, whose own internal waits keep the
 * parent's timeout.
 *
 * While a non-blocking initialisation runs, every call on the handle
 * returns TACL_IN_PROGRESS at once (as NCCL's ncclInProgress), except
 * tacl_comm_get_async_error() (see there) and tacl_comm_destroy() /
 * tacl_comm_abort(), which wait for it to end (within the timeout).  A
 * failed one leaves a handle whose calls return its error; destroy it.
 * Split always completes before it returns, whatever blocking says.
 *
 * The name (blanks and '=' become '_') prefixes the communicator's
 * tacl_comm_last_error() messages and appears in its timeout messages,
 * INFO lines and flight dumps (name=...).
 */
typedef struct {
    size_t size;          /**< sizeof(tacl_config_t): set by TACL_CONFIG_INIT */
    unsigned version;     /**< TACL_VERSION_CODE: set by TACL_CONFIG_INIT */
    double timeout;       /**< seconds any wait on the communicator may
                               last; 0: TACL_TIMEOUT */
    int blocking;         /**< 1: init and split return when done; 0: they
                               may return TACL_IN_PROGRESS with the handle
                               set, and finish in the background; poll
                               tacl_comm_get_async_error() until it is not
                               TACL_IN_PROGRESS.  -1: TACL_BLOCKING */
    int check;            /**< 0 or 1 as tacl_comm_set_check(); -1: TACL_CHECK */
    int progress_thread;  /**< 1: a thread of the library progresses the
                               communicator's _nb operations, so they
                               complete (and their callbacks run) without
                               tacl_request_test/wait; 0: no thread;
                               -1: TACL_PROGRESS_THREAD */
    const char *name;     /**< shown in logs, errors and flight dumps;
                               copied; NULL: none */
} tacl_config_t;

#define TACL_CONFIG_INIT                                                     \
    { sizeof(tacl_config_t), TACL_VERSION_CODE, 0.0, -1, -1, -1, NULL }

/** tacl_comm_init_rank() with a configuration (NULL: the defaults). */
tacl_status_t tacl_comm_init_rank_config(int nranks,
                                         const tacl_unique_id_t *id, int rank,
                                         const tacl_config_t *config,
                                         tacl_comm_t *comm_p);

/** tacl_comm_init_env() with a configuration (NULL: the defaults). */
tacl_status_t tacl_comm_init_env_config(const tacl_config_t *config,
                                        tacl_comm_t *comm_p);

/**
 * Split a communicator.  Ranks that pass the same color end up in one new
 * communicator, ordered by key and then by their rank in comm.  A rank
 * that passes TACL_SPLIT_NOCOLOR gets NULL in *newcomm_p.  Collective over
 * comm.
 */
tacl_status_t tacl_comm_split(tacl_comm_t comm, int color, int key,
                              tacl_comm_t *newcomm_p);

/**
 * tacl_comm_split() with a configuration for the new communicator; NULL
 * (or tacl_comm_split) inherits the parent's.
 */
tacl_status_t tacl_comm_split_config(tacl_comm_t comm, int color, int key,
                                     const tacl_config_t *config,
                                     tacl_comm_t *newcomm_p);

/**
 * Make a communicator of some ranks of comm, collective over those ranks
 * only (like MPI_Comm_create_group): the others need not call, and may be
 * busy with anything meanwhile.  ranks lists nranks distinct ranks of
 * comm, the caller among them, in the new communicator's rank order;
 * every member passes the same list and tag.  Groups may be made at the
 * same time (disjoint or overlapping, a member running ahead into its
 * next group while another is still being made, or from several
 * threads); the tag tells apart groups of one list made at the same
 * time, which otherwise must be made one after another in the same order
 * on every member.  Like tacl_comm_split, the
 * new communicator uses comm's connections (no new bootstrap) and
 * outlives comm.  config as tacl_comm_split_config (NULL inherits comm's;
 * its blocking field is ignored: the call returns when done).
 *
 * Bounded by comm's timeout: a member that is gone fails the call with
 * TACL_ERR_REMOTE on every member that came, one that does not call in
 * time with TACL_ERR_TIMEOUT; a member that passed another list makes
 * every member fail with TACL_ERR_INVALID_USAGE (when the wait ends: the
 * different list may belong to a later group).  Bad arguments (a rank
 * out of range or repeated, the caller not listed) give
 * TACL_ERR_INVALID_ARG.
 */
tacl_status_t tacl_comm_create_group(tacl_comm_t comm, int nranks,
                                     const int *ranks, int tag,
                                     tacl_comm_t *newcomm_p);

/** tacl_comm_create_group() with a configuration for the new one. */
tacl_status_t tacl_comm_create_group_config(tacl_comm_t comm, int nranks,
                                            const int *ranks, int tag,
                                            const tacl_config_t *config,
                                            tacl_comm_t *newcomm_p);

/**
 * Destroy a communicator once its operations are complete.  The handle
 * stays recognisable: any later use returns TACL_ERR_INVALID_USAGE.
 */
tacl_status_t tacl_comm_destroy(tacl_comm_t comm);

/**
 * Abort a communicator: outstanding operations end with an error, peers
 * blocked on this rank see TACL_ERR_REMOTE, and the resources are freed.
 */
tacl_status_t tacl_comm_abort(tacl_comm_t comm);

/**
 * Revoke a communicator (like MPI ULFM's MPI_Comm_revoke); not
 * collective.  Every operation pending or posted later on it fails with
 * TACL_ERR_REMOTE: on this rank at once, on the others as soon as the
 * notice reaches them round the bootstrap ring (milliseconds), with a
 * message naming the rank that revoked it.  Use it when one rank learns
 * of a failure the others may not see yet, then call tacl_comm_shrink on
 * every survivor.  The unit is the connection set: communicators made by
 * tacl_comm_split (and tacl_comm_get_local/rail) share their parent's,
 * so revoking one revokes the parent and all of them.  The handle stays
 * valid for tacl_comm_shrink and tacl_comm_destroy.
 */
tacl_status_t tacl_comm_revoke(tacl_comm_t comm);

/**
 * Shrink: the survivors of a failure make a new communicator without the
 * ranks that died (like MPI ULFM's MPI_Comm_shrink; NCCL's ncclCommShrink
 * takes the ranks to drop, here they are found).  Every surviving rank of
 * comm calls it; a rank counts as dead when its process is gone.  The new
 * communicator has the survivors in their old order, renumbered from 0,
 * and its own connections, so comm (which a death left failed) can be
 * destroyed afterwards; destroying it may report the failure.  It
 * revokes comm first (tacl_comm_revoke), so survivors still blocked in an
 * operation on comm are released and come to the shrink.  Works
 * whichever ranks died, rank 0 included, and when none did (the new
 * communicator then has every rank).  Bounded by TACL_TIMEOUT: a rank
 * that is alive but never calls it, or a machine that went down, makes it
 * fail with TACL_ERR_TIMEOUT.  Not for communicators from
 * tacl_comm_get_local/rail.  The new communicator keeps comm's
 * configuration (tacl_config_t) and is complete when this returns.
 */
tacl_status_t tacl_comm_shrink(tacl_comm_t comm, tacl_comm_t *newcomm_p);

/**
 * The first asynchronous error a communicator hit, TACL_OK if none, in
 * *error_p.  For a communicator whose non-blocking initialisation is
 * still running *error_p is TACL_IN_PROGRESS, and once it ended TACL_OK
 * or the error it failed with (as NCCL's ncclCommGetAsyncError); the call
 * itself returns TACL_OK in each case.
 */
tacl_status_t tacl_comm_get_async_error(tacl_comm_t comm,
                                        tacl_status_t *error_p);

/**
 * The message of the last error returned on this communicator (or, for
 * a NULL or destroyed communicator, of the last error of this thread).
 * Never NULL; empty when no error happened.
 */
const char *tacl_comm_last_error(tacl_comm_t comm);

/** The message of the last error returned to this thread by any call. */
const char *tacl_last_error(void);

tacl_status_t tacl_comm_rank(tacl_comm_t comm, int *rank_p);
tacl_status_t tacl_comm_size(tacl_comm_t comm, int *size_p);
/** Index of the caller's node, 0 .. nodes - 1, in order of lowest rank. */
tacl_status_t tacl_comm_node(tacl_comm_t comm, int *node_p);
/** Number of nodes the communicator spans. */
tacl_status_t tacl_comm_n_nodes(tacl_comm_t comm, int *n_nodes_p);
/** The caller's rank among the ranks of its node. */
tacl_status_t tacl_comm_local_rank(tacl_comm_t comm, int *local_rank_p);
/** Number of ranks on the caller's node. */
tacl_status_t tacl_comm_local_size(tacl_comm_t comm, int *local_size_p);

/**
 * The communicator of the caller's node (the ranks of comm on the same
 * node, in comm's order).  Made on first use, which is collective over
 * comm, then cached: every later call returns the same handle.  It is
 * destroyed with comm; do not destroy it yourself.
 */
tacl_status_t tacl_comm_get_local(tacl_comm_t comm, tacl_comm_t *local_p);

/**
 * The caller's rail: the ranks of comm with the same local rank, one per
 * node, in node order (the inter-node channels of MiCS).  Collective on
 * first use, then cached, and destroyed with comm, like
 * tacl_comm_get_local().  Ranks of a node with fewer ranks than others
 * simply have shorter rails.
 */
tacl_status_t tacl_comm_get_rail(tacl_comm_t comm, tacl_comm_t *rail_p);

/**
 * Name of the algorithm the most recent operation on comm ran with
 * ("ring", "mics", ...; "" before the first).  For the tuner's choices in
 * logs and benchmarks.
 */
const char *tacl_comm_last_algorithm(tacl_comm_t comm);

/**
 * Turn cross-rank call checking on (on != 0) or off for comm.  When on,
 * every collective call on comm (a group: once per communicator) first
 * exchanges a small signature with its peers (collective, count, dtype,
 * op, root, quantization, number of collectives in the call) and, when
 * any rank differs, fails on every rank with TACL_ERR_INVALID_USAGE and a
 * message naming the rank, the field and both values; the communicator
 * stays usable.  Each call then waits for its peers to reach it, _nb ones
 * included.  Point-to-point calls are not checked.  The initial setting
 * comes from TACL_CHECK; split inherits the parent's.  Every rank must
 * use the same setting, changed between calls, never inside a group.
 */
tacl_status_t tacl_comm_set_check(tacl_comm_t comm, int on);

/**
 * Write comm's flight records, oldest first: the last TACL_FLIGHT_RECORDS
 * operations with their sequence number, collective, count, type, root,
 * algorithm and state, and for one still pending the steps done, the
 * bytes outstanding and the messages it waits for (kind, peer, bytes).
 * One "TACL_FLIGHT key=value ..." line each, after a header line, to
 * file (a FILE *), or to tacl's log at WARN when file is NULL.  Works on
 * a communicator that failed; tools/tacl-flight reads the dumps of all
 * ranks and names the ranks that are behind.
 */
tacl_status_t tacl_comm_dump_flight(tacl_comm_t comm,
                                   void *file /* FILE * */);

/*
 * Collectives.  Counts are in elements.  Each call has a blocking form and
 * an "_nb" form that returns a request in *req_p.
 *
 * A small all-gather, reduce-scatter, all-reduce, broadcast, reduce or
 * barrier (at most TACL_FAST_MAX bytes of input per rank, 16 KB by
 * default) on a communicator of 2 to 32 ranks on one node, outside a
 * group (or a group's only blocking call), with a NULL stream and
 * checking off, runs in a shared-memory area of the communicator instead
 * of through messages, blocking or "_nb": same results (reductions
 * combine the ranks in rank order, so every rank gets the same bits), a
 * fraction of the latency.  Making the communicator makes the area
 * (collectively), sized by rank 0's TACL_FAST_MAX: the other ranks use
 * that value (a WARN says so where theirs differs), so ranks with
 * different settings still agree on every call's path.  Every rank must
 * then call the same collectives with the same counts, dtypes and ops, as
 * always; the ranks that see a peer call something else get
 * TACL_ERR_INVALID_USAGE naming what differs.  tacl_comm_last_algorithm()
 * says "fast" after such a call.
 */

/** Every rank contributes sendcount elements; recvbuf holds size * sendcount. */
tacl_status_t tacl_allgather(const void *sendbuf, void *recvbuf,
                             size_t sendcount, tacl_dtype_t dtype,
                             tacl_comm_t comm, tacl_stream_t stream);
tacl_status_t tacl_allgather_nb(const void *sendbuf, void *recvbuf,
                                size_t sendcount, tacl_dtype_t dtype,
                                tacl_comm_t comm, tacl_stream_t stream,
                                tacl_request_t *req_p);

/** sendbuf holds size * recvcount; rank r receives the reduced block r. */
tacl_status_t tacl_reduce_scatter(const void *sendbuf, void *recvbuf,
                                  size_t recvcount, tacl_dtype_t dtype,
                                  tacl_op_t op, tacl_comm_t comm,
                                  tacl_stream_t stream);
tacl_status_t tacl_reduce_scatter_nb(const void *sendbuf, void *recvbuf,
                                     size_t recvcount, tacl_dtype_t dtype,
                                     tacl_op_t op, tacl_comm_t comm,
                                     tacl_stream_t stream,
                                     tacl_request_t *req_p);

tacl_status_t tacl_allreduce(const void *sendbuf, void *recvbuf,
                             size_t count, tacl_dtype_t dtype, tacl_op_t op,
                             tacl_comm_t comm, tacl_stream_t stream);
tacl_status_t tacl_allreduce_nb(const void *sendbuf, void *recvbuf,
                                size_t count, tacl_dtype_t dtype,
                                tacl_op_t op, tacl_comm_t comm,
                                tacl_stream_t stream, tacl_request_t *req_p);

/** Copies root's sendbuf into every rank's recvbuf. */
tacl_status_t tacl_broadcast(const void *sendbuf, void *recvbuf,
                             size_t count, tacl_dtype_t dtype, int root,
                             tacl_comm_t comm, tacl_stream_t stream);
tacl_status_t tacl_broadcast_nb(const void *sendbuf, void *recvbuf,
                                size_t count, tacl_dtype_t dtype, int root,
                                tacl_comm_t comm, tacl_stream_t stream,
                                tacl_request_t *req_p);

/** Reduces into root's recvbuf; recvbuf is ignored on other ranks. */
tacl_status_t tacl_reduce(const void *sendbuf, void *recvbuf, size_t count,
                          tacl_dtype_t dtype, tacl_op_t op, int root,
                          tacl_comm_t comm, tacl_stream_t stream);
tacl_status_t tacl_reduce_nb(const void *sendbuf, void *recvbuf,
                             size_t count, tacl_dtype_t dtype, tacl_op_t op,
                             int root, tacl_comm_t comm, tacl_stream_t stream,
                             tacl_request_t *req_p);

/**
 * Block j of sendbuf (count elements) goes to rank j, which stores it as
 * block rank of its recvbuf.  In place (sendbuf == recvbuf) is allowed.
 */
tacl_status_t tacl_alltoall(const void *sendbuf, void *recvbuf,
                            size_t count, tacl_dtype_t dtype,
                            tacl_comm_t comm, tacl_stream_t stream);
tacl_status_t tacl_alltoall_nb(const void *sendbuf, void *recvbuf,
                               size_t count, tacl_dtype_t dtype,
                               tacl_comm_t comm, tacl_stream_t stream,
                               tacl_request_t *req_p);

/**
 * All-to-all with a count per peer, as MPI_Alltoallv: sendcounts[j]
 * elements at sendbuf + sdispls[j] go to rank j, which stores them at
 * its recvbuf + rdispls[rank]; recvcounts[j] elements come from rank j
 * into recvbuf + rdispls[j].  Counts and displacements are in elements
 * of dtype, one per rank of comm.  sendcounts[j] on rank i must equal
 * recvcounts[i] on rank j (TACL_CHECK compares them across ranks and
 * names the two ranks and their counts).  Displacements are arbitrary,
 * but the receive regions must not overlap one another, nor the send
 * regions: there is no in-place form.  The four arrays are copied
 * before the call returns (also for _nb and inside a group), so the
 * caller may free or reuse them at once; the buffers, as for every
 * collective, must stay until the operation completes.  On several
 * nodes the ranks first gather one another's send counts (nranks^2 of
 * them), so that all choose alike between the flat exchange and the
 * hierarchical one, which sends one message per pair of nodes; an _nb
 * call returns once that small exchange is done.
 */
tacl_status_t tacl_alltoallv(const void *sendbuf, const size_t *sendcounts,
                             const size_t *sdispls, void *recvbuf,
                             const size_t *recvcounts, const size_t *rdispls,
                             tacl_dtype_t dtype, tacl_comm_t comm,
                             tacl_stream_t stream);
tacl_status_t tacl_alltoallv_nb(const void *sendbuf, const size_t *sendcounts,
                                const size_t *sdispls, void *recvbuf,
                                const size_t *recvcounts,
                                const size_t *rdispls, tacl_dtype_t dtype,
                                tacl_comm_t comm, tacl_stream_t stream,
                                tacl_request_t *req_p);

/**
 * All-gather with a count per rank, as MPI_Allgatherv: every rank's
 * sendcount elements go to every rank, which stores rank j's at recvbuf
 * + displs[j]; recvcounts[j] must equal rank j's sendcount (and so be
 * the same on every rank; TACL_CHECK names the ranks that disagree).
 * Counts and displacements are in elements; the receive regions must
 * not overlap one another nor sendbuf (no in-place form).  recvcounts
 * and displs are copied before the call returns, as tacl_alltoallv's.
 */
tacl_status_t tacl_allgatherv(const void *sendbuf, size_t sendcount,
                              void *recvbuf, const size_t *recvcounts,
                              const size_t *displs, tacl_dtype_t dtype,
                              tacl_comm_t comm, tacl_stream_t stream);
tacl_status_t tacl_allgatherv_nb(const void *sendbuf, size_t sendcount,
                                 void *recvbuf, const size_t *recvcounts,
                                 const size_t *displs, tacl_dtype_t dtype,
                                 tacl_comm_t comm, tacl_stream_t stream,
                                 tacl_request_t *req_p);

/**
 * Point-to-point.  The n-th send from a to b matches the n-th receive
 * on b from a (of one tag: tacl_send/tacl_recv use tag 0).  Inside a
 * group, sends and receives never deadlock whatever order they were
 * posted in.  Counts must agree: a receive matched by a message of
 * another size fails with TACL_ERR_INVALID_USAGE.
 */
tacl_status_t tacl_send(const void *sendbuf, size_t count,
                        tacl_dtype_t dtype, int peer, tacl_comm_t comm,
                        tacl_stream_t stream);
tacl_status_t tacl_send_nb(const void *sendbuf, size_t count,
                           tacl_dtype_t dtype, int peer, tacl_comm_t comm,
                           tacl_stream_t stream, tacl_request_t *req_p);
tacl_status_t tacl_recv(void *recvbuf, size_t count, tacl_dtype_t dtype,
                        int peer, tacl_comm_t comm, tacl_stream_t stream);
tacl_status_t tacl_recv_nb(void *recvbuf, size_t count, tacl_dtype_t dtype,
                           int peer, tacl_comm_t comm, tacl_stream_t stream,
                           tacl_request_t *req_p);

/*
 * Tagged point-to-point, with MPI's matching rules: a receive takes a
 * message from its peer (or, with TACL_ANY_SOURCE, from any rank of the
 * communicator) with the same tag; messages from one rank with one tag
 * are received in the order they were sent (never overtaken), and
 * receives take messages in the order they were posted.  Tags are 0 to
 * TACL_TAG_MAX; there is no any-tag receive.  *source (source may be
 * NULL) gets the sender's rank: for TACL_ANY_SOURCE once the receive has
 * completed (after the wait of an _nb call or the group's end), else at
 * once.  A receive from any source waiting when the communicator fails
 * or is aborted ends with that error, as any other operation does.
 */
#define TACL_ANY_SOURCE (-1)
#define TACL_TAG_MAX 0x7fffffff
tacl_status_t tacl_send_tag(const void *sendbuf, size_t count,
                            tacl_dtype_t dtype, int peer, int tag,
                            tacl_comm_t comm, tacl_stream_t stream);
tacl_status_t tacl_send_tag_nb(const void *sendbuf, size_t count,
                               tacl_dtype_t dtype, int peer, int tag,
                               tacl_comm_t comm, tacl_stream_t stream,
                               tacl_request_t *req_p);
tacl_status_t tacl_recv_tag(void *recvbuf, size_t count, tacl_dtype_t dtype,
                            int peer, int tag, int *source, tacl_comm_t comm,
                            tacl_stream_t stream);
tacl_status_t tacl_recv_tag_nb(void *recvbuf, size_t count,
                               tacl_dtype_t dtype, int peer, int tag,
                               int *source, tacl_comm_t comm,
                               tacl_stream_t stream, tacl_request_t *req_p);

/**
 * A barrier that names who did not come (torch's monitored_barrier):
 * every rank but 0 tells rank 0 it arrived and waits for its answer;
 * rank 0 waits for each rank in rank order until timeout_s (0 or more)
 * has passed.  When a rank is late, rank 0 fails with TACL_ERR_TIMEOUT,
 * its message naming the late rank (every late rank with wait_all, else
 * the first), and the communicator fails as after any timeout, so the
 * other ranks end with an error too (not after their own timeout).
 * missing (comm size entries, may be NULL) gets the late ranks on rank
 * 0 and *nmissing_p (may be NULL) their number.  Not inside a group; a
 * debugging aid, not a fast barrier.
 */
tacl_status_t tacl_barrier_monitored(tacl_comm_t comm, double timeout_s,
                                     int wait_all, int *missing,
                                     int *nmissing_p);

/** Returns once every rank of comm has entered the barrier. */
tacl_status_t tacl_barrier(tacl_comm_t comm, tacl_stream_t stream);
tacl_status_t tacl_barrier_nb(tacl_comm_t comm, tacl_stream_t stream,
                              tacl_request_t *req_p);

/*
 * Group calls.  Between tacl_group_start() and tacl_group_end() calls are
 * recorded, not run; tacl_group_end() runs them all as one schedule per
 * communicator.  Groups nest; only the outermost end runs.  The "_nb"
 * form of a call inside a group returns a NULL request: the group's own
 * request, from tacl_group_end_nb(), covers it.
 */
tacl_status_t tacl_group_start(void);
tacl_status_t tacl_group_end(void);
tacl_status_t tacl_group_end_nb(tacl_request_t *req_p);

/*
 * Coalesced calls (MiCS's all_gather_coalesced / reduce_scatter_coalesced):
 * one operation over a list of nbufs buffers of different sizes, without
 * the caller packing them.  Buffer i follows the rules of the single call
 * with count counts[i] (in-place allowed per buffer).  All buffers run in
 * one schedule, like a group of single calls.
 */
tacl_status_t tacl_allgather_coalesced(const void *const *sendbufs,
                                       void *const *recvbufs,
                                       const size_t *sendcounts, int nbufs,
                                       tacl_dtype_t dtype, tacl_comm_t comm,
                                       tacl_stream_t stream);
tacl_status_t tacl_allgather_coalesced_nb(const void *const *sendbufs,
                                          void *const *recvbufs,
                                          const size_t *sendcounts, int nbufs,
                                          tacl_dtype_t dtype,
                                          tacl_comm_t comm,
                                          tacl_stream_t stream,
                                          tacl_request_t *req_p);
tacl_status_t tacl_reduce_scatter_coalesced(const void *const *sendbufs,
                                            void *const *recvbufs,
                                            const size_t *recvcounts,
                                            int nbufs, tacl_dtype_t dtype,
                                            tacl_op_t op, tacl_comm_t comm,
                                            tacl_stream_t stream);
tacl_status_t tacl_reduce_scatter_coalesced_nb(
    const void *const *sendbufs, void *const *recvbufs,
    const size_t *recvcounts, int nbufs, tacl_dtype_t dtype, tacl_op_t op,
    tacl_comm_t comm, tacl_stream_t stream, tacl_request_t *req_p);

/*
 * Quantized collectives (ZeRO++).  Quantization is lossy and therefore
 * never chosen by tacl on its own: the caller asks for it with these
 * entry points and says how.  Data is float32, float16 or bfloat16.
 */
typedef struct {
    int bits;          /**< 8 or 4 bits per value. */
    uint32_t block;    /**< Values per scale (0: 256). */
} tacl_quant_t;

/**
 * qwZ: an all-gather that sends block-quantized values (plus one float32
 * scale per block) and writes dequantized values of dtype into recvbuf.
 * Works with every all-gather algorithm.  In place as tacl_allgather;
 * the caller's own block is copied exactly, the others are within half a
 * quantization step.
 */
tacl_status_t tacl_allgather_quantized(const void *sendbuf, void *recvbuf,
                                       size_t sendcount, tacl_dtype_t dtype,
                                       const tacl_quant_t *quant,
                                       tacl_comm_t comm,
                                       tacl_stream_t stream);
tacl_status_t tacl_allgather_quantized_nb(const void *sendbuf, void *recvbuf,
                                          size_t sendcount,
                                          tacl_dtype_t dtype,
                                          const tacl_quant_t *quant,
                                          tacl_comm_t comm,
                                          tacl_stream_t stream,
                                          tacl_request_t *req_p);

/**
 * qgZ: a reduce-scatter (SUM or AVG) by quantized all-to-all: one hop
 * inside a node, a dequantize-reduce-requantize, one hop between nodes and
 * a final dequantize-reduce, pipelined in chunks.  On one node it is a
 * single quantized all-to-all.
 */
tacl_status_t tacl_reduce_scatter_quantized(const void *sendbuf,
                                            void *recvbuf, size_t recvcount,
                                            tacl_dtype_t dtype, tacl_op_t op,
                                            const tacl_quant_t *quant,
                                            tacl_comm_t comm,
                                            tacl_stream_t stream);
tacl_status_t tacl_reduce_scatter_quantized_nb(
    const void *sendbuf, void *recvbuf, size_t recvcount, tacl_dtype_t dtype,
    tacl_op_t op, const tacl_quant_t *quant, tacl_comm_t comm,
    tacl_stream_t stream, tacl_request_t *req_p);

/** Requests returned by the "_nb" calls. */
/** Sets *done_p to 1 once the request is complete; drives progress. */
tacl_status_t tacl_request_test(tacl_request_t req, int *done_p);
/** Waits (bounded by TACL_TIMEOUT) for completion; returns its status. */
tacl_status_t tacl_request_wait(tacl_request_t req);
/** Frees a completed request.  Freeing a pending request is an error. */
tacl_status_t tacl_request_free(tacl_request_t req);

/** Called once when a request completes, with its final status. */
typedef void (*tacl_request_callback_t)(tacl_request_t req,
                                        tacl_status_t status, void *arg);

/**
 * Have fn(req, status, arg) called once req completes: from the thread
 * that completes it (the communicator's progress thread, or a thread
 * inside tacl_request_test/wait or another call that drives progress), or
 * from this call when req is already complete.  fn must return quickly
 * and must not call tacl (it runs with the communicator's lock held); it
 * must not free req (free it afterwards, from any thread, as usual).  A
 * request that fails (a timeout, a dead peer, tacl_comm_abort or revoke)
 * completes with the error as status, and fn runs then too: for an abort,
 * in the aborting thread before tacl_comm_abort returns.  One callback
 * per request; setting a second one is TACL_ERR_INVALID_USAGE.
 */
tacl_status_t tacl_request_set_callback(tacl_request_t req,
                                        tacl_request_callback_t fn,
                                        void *arg);

/*
 * Persistent collectives (init once, start many times), as MPI-4's
 * MPI_Allreduce_init and MPI_Start/MPI_Startall.  A tacl_*_init call
 * takes the arguments of its "_nb" call, validates them, builds the
 * operation's schedule and its execution (scratch included) and returns
 * an inactive persistent request; nothing is sent.  tacl_start() runs
 * the operation once on the buffers given at init (their contents may
 * change between starts, their addresses and sizes may not) and returns
 * without waiting; tacl_request_wait/test complete that start as for an
 * "_nb" request, and the request is then inactive again, ready for the
 * next start.  A start reuses the schedule and execution: it allocates
 * and copies nothing, so a small operation costs less than its "_nb"
 * call.  (The blocking small-message fast path is not used: it finishes
 * the operation inside the call, where a start returns at once.)
 *
 * Rules, as MPI's:
 * - Every rank makes and starts its persistent operations in the same
 *   order as its other collectives on the communicator: a start is a
 *   collective call, matched by its place in that order, like the "_nb"
 *   call it stands for.  Making one (init) is local and sends nothing.
 * - Starting an active request (started, not yet completed by wait or
 *   test) is TACL_ERR_INVALID_USAGE; so is freeing it
 *   (tacl_request_free); tacl_start on a request not made by an init
 *   call too.
 * - Waiting on or testing a request never started, or inactive, returns
 *   at once with the status of its last start (TACL_OK if none).
 * - A start on a communicator that failed, was revoked, aborted or
 *   destroyed returns the error and starts nothing; an abort or failure
 *   while a start is active completes it with the error.  Free the
 *   request afterwards as usual (before or after destroying the
 *   communicator).
 * - Host memory and a NULL stream only: a non-NULL stream or device
 *   buffers are TACL_ERR_UNSUPPORTED at init (the "_nb" call on a stream
 *   serves device memory).  Inside a group, init is
 *   TACL_ERR_INVALID_USAGE.
 * - A callback (tacl_request_set_callback) stays set and runs at the end
 *   of every start that completes after it was set (setting it on an
 *   inactive request runs nothing now).
 * - With TACL_CHECK (tacl_comm_set_check) each start exchanges its
 *   signature with the peers first, as the "_nb" call does, and so
 *   waits for them to reach it.
 */
tacl_status_t tacl_allreduce_init(const void *sendbuf, void *recvbuf,
                                  size_t count, tacl_dtype_t dtype,
                                  tacl_op_t op, tacl_comm_t comm,
                                  tacl_stream_t stream, tacl_request_t *req_p);
tacl_status_t tacl_allgather_init(const void *sendbuf, void *recvbuf,
                                  size_t sendcount, tacl_dtype_t dtype,
                                  tacl_comm_t comm, tacl_stream_t stream,
                                  tacl_request_t *req_p);
tacl_status_t tacl_reduce_scatter_init(const void *sendbuf, void *recvbuf,
                                       size_t recvcount, tacl_dtype_t dtype,
                                       tacl_op_t op, tacl_comm_t comm,
                                       tacl_stream_t stream,
                                       tacl_request_t *req_p);
tacl_status_t tacl_broadcast_init(const void *sendbuf, void *recvbuf,
                                  size_t count, tacl_dtype_t dtype, int root,
                                  tacl_comm_t comm, tacl_stream_t stream,
                                  tacl_request_t *req_p);
tacl_status_t tacl_reduce_init(const void *sendbuf, void *recvbuf,
                               size_t count, tacl_dtype_t dtype, tacl_op_t op,
                               int root, tacl_comm_t comm,
                               tacl_stream_t stream, tacl_request_t *req_p);
tacl_status_t tacl_alltoall_init(const void *sendbuf, void *recvbuf,
                                 size_t count, tacl_dtype_t dtype,
                                 tacl_comm_t comm, tacl_stream_t stream,
                                 tacl_request_t *req_p);
tacl_status_t tacl_barrier_init(tacl_comm_t comm, tacl_stream_t stream,
                                tacl_request_t *req_p);

/** Start an inactive persistent request; returns without waiting. */
tacl_status_t tacl_start(tacl_request_t req);

/**
 * Start n persistent requests in the order given (as n tacl_start
 * calls).  Every request is checked first (none NULL, each persistent,
 * none twice): a bad one starts none.  A start that fails stops the
 * rest; those before it stay started.
 */
tacl_status_t tacl_startall(int n, tacl_request_t *reqs);

/*
 * Memory for communication buffers, as ncclMemAlloc.  Host memory from
 * tacl_mem_alloc() lives in a segment the other processes of the node can
 * map, so a collective whose buffers come from it moves their bytes with
 * ordinary (or non-temporal) loads and stores instead of cross-memory
 * system calls that pin pages: faster on every shm path, most on large
 * all-gathers.  Any memory still works with every call; this only makes
 * it faster.  The memory is zeroed, page-aligned (2 MB-aligned from 2 MB),
 * and stays shared with children after fork() (it is not copy-on-write).
 * memtype: TACL_MEM_HOST or TACL_MEM_AUTO for host memory; TACL_MEM_CUDA
 * for device memory on the calling thread's current CUDA device (device 0
 * when none is current): cuMem memory, rounded up to the device's
 * allocation granularity (2 MB on current GPUs), not zeroed, which the
 * node's other processes map once through a shared file descriptor, as
 * ncclMemAlloc's; device memory from cudaMalloc works too, shared by its
 * cudaIpc handle, which a peer opens for each message and closes before
 * the message completes (so its owner may free it as soon as the call
 * that sent it has completed; each such message pays the open and close,
 * which tacl_mem_alloc memory saves).  Device memory needs a build with
 * CUDA and a driver, else TACL_ERR_UNSUPPORTED says which is missing.
 * Freeing NULL does nothing; freeing anything else not returned by
 * tacl_mem_alloc is TACL_ERR_INVALID_ARG.  Peers may keep a freed
 * segment's memory mapped until their next transfer from this process
 * (device memory: until they next progress after this process does).
 */
tacl_status_t tacl_mem_alloc(void **ptr_p, size_t size,
                             tacl_memtype_t memtype);
tacl_status_t tacl_mem_free(void *ptr);

/*
 * Byte counters.  Every rank counts the bytes and messages it sends, per
 * transport, on each communicator.  A call of the small-message fast path
 * (see Collectives) counts its input once per peer that reads it, as a
 * message on the shm transport and the host link class.
 */
#define TACL_MAX_TRANSPORTS 8
typedef struct {
    char name[16];       /**< Transport name ("self", "shm", ...). */
    uint64_t bytes;      /**< Bytes sent through it. */
    uint64_t messages;   /**< Messages sent through it. */
} tacl_transport_counter_t;

/** Link classes, in the order of tacl_counters_t.links. */
typedef enum {
    TACL_LINK_SELF = 0,  /**< A rank to itself. */
    TACL_LINK_HOST,      /**< Host memory inside a node (shm). */
    TACL_LINK_GPU,       /**< GPU peer copy inside a node. */
    TACL_LINK_NET,       /**< The network between nodes. */
    TACL_NUM_LINK_CLASSES
} tacl_link_class_t;

typedef struct {
    char name[16];       /**< Link class name ("self", "host", ...). */
    uint64_t bytes;
    uint64_t messages;
} tacl_link_counter_t;

typedef struct {
    int n_transports;
    tacl_transport_counter_t transports[TACL_MAX_TRANSPORTS];
    /** The same bytes, by the link class they crossed. */
    tacl_link_counter_t links[TACL_NUM_LINK_CLASSES];
} tacl_counters_t;

/** Bytes and messages this rank sent on comm since creation or reset,
 *  those of the non-blocking host-composed calls issued on it
 *  (tacl_comp_*_nb, tacl_sparse_allreduce_nb) included. */
tacl_status_t tacl_comm_get_counters(tacl_comm_t comm,
                                     tacl_counters_t *counters_p);
tacl_status_t tacl_comm_reset_counters(tacl_comm_t comm);

/*
 * Estimates (like NCCL's ncclGroupSimulateEnd): what an operation would
 * cost on this communicator, without running it.  The estimate asks the
 * same decider a blocking call outside a group asks (TACL_ALGO,
 * TACL_TUNER, the small-message engine), so it names the engine and
 * algorithm such a call would take; the simulator then builds every
 * rank's schedule with that algorithm and runs them on the
 * communicator's topology (detected, or TACL_TOPO_FILE with its optional
 * fabric and kernel lines): links shared by concurrent messages share
 * their bandwidth, every message pays its link's latency, kernels run at
 * the topology's rates.  A call the small-message engine takes is priced
 * by its model.  Purely local: no message is sent, every rank gets the
 * same time.  The buffers are assumed out of place, in host memory.
 */
typedef struct {
    double seconds;          /**< predicted time of the operation */
    char algorithm[16];      /**< the algorithm a real call would use, as
                                  tacl_comm_last_algorithm() names it */
    char engine[16];         /**< what would run it: "fast" (the
                                  small-message engine's shared area) or
                                  "schedule" (the executor) */
    /** What this rank would send, by link class (as tacl_counters_t). */
    uint64_t bytes[TACL_NUM_LINK_CLASSES];
    uint64_t messages[TACL_NUM_LINK_CLASSES];
} tacl_sim_info_t;

/**
 * Estimate coll of count elements of dtype (op for reductions, root for
 * broadcast and reduce) on comm into *info_p.  TACL_ERR_INVALID_ARG for
 * a bad argument, as the collective itself would report it;
 * TACL_ERR_UNSUPPORTED when the simulation would run past its bound (an
 * algorithm with very many concurrent messages on a large communicator):
 * an estimate takes at most about a second.
 */
tacl_status_t tacl_comm_estimate(tacl_comm_t comm, tacl_coll_t coll,
                                 size_t count, tacl_dtype_t dtype,
                                 tacl_op_t op, int root,
                                 tacl_sim_info_t *info_p);

/**
 * Print every configuration variable (TACL_<NAME>) with the value in
 * force, where it came from (default, environment, or invalid: the
 * environment's value was refused and the default is used), its default
 * and its documentation.
 */
void tacl_config_print(void *file /* FILE * */);

/*
 * Sparse all-reduce: the sum over ranks of row-sparse gradients (an
 * embedding table's), as every rank's dense or row-sparse result.
 */

/** How a sparse all-reduce moves its rows; AUTO lets tacl choose. */
typedef enum {
    TACL_SPARSE_AUTO = 0,
    TACL_SPARSE_ZEN,       /* hashed row owners: push as all-to-all-v,
                              pull as all-gather-v of each owner's sum
                              (index list or bitmap, fewer bytes) */
    TACL_SPARSE_AGSPARSE,  /* all-gather-v of every rank's rows */
    TACL_SPARSE_PS,        /* owners of even row ranges (a parameter
                              server's split), otherwise as ZEN */
    TACL_SPARSE_DENSE,     /* densify, dense all-reduce */
    TACL_SPARSE_SPARCML,   /* SparCML's recursive doubling of partial
                              sums, sent dense once that is fewer bytes */
    TACL_SPARSE_OMNI,      /* OmniReduce's blocks of 256 values to owners
                              of even block ranges, as PS */
    TACL_SPARSE_AGPADDED,  /* all-gather of rows padded to the largest
                              rank's count (gloo's former scheme) */
    TACL_SPARSE_ZEN_HIER,  /* Zen in two levels: rows merged inside each
                              node, owners' shares across nodes on the
                              rails, the sums spread inside the node */
    TACL_SPARSE_DENSE_ZEN, /* dense reduce-scatter inside each node, Zen
                              across nodes on each slice's rows, dense
                              all-gather inside the node */
    TACL_NUM_SPARSE_SCHEMES
} tacl_sparse_scheme_t;

/** Name of a scheme ("zen", ...), "invalid" for another value. */
const char *tacl_sparse_scheme_name(tacl_sparse_scheme_t scheme);

/** One rank's rows of a table of nrows rows of row_len elements. */
typedef struct {
    size_t nrows;             /* rows of the table; every index below */
    size_t row_len;           /* elements per row, at least 1 */
    tacl_dtype_t index_type;  /* TACL_INT32 or TACL_INT64 */
    size_t nnz;               /* rows this rank gives (0 allowed) */
    const void *indices;      /* nnz distinct row indices, any order */
    const void *values;       /* nnz rows, row i for indices[i] */
} tacl_sparse_t;

/** A row-sparse result in memory the library allocated. */
typedef struct {
    size_t nnz;               /* rows in the union of the ranks' rows */
    void *indices;            /* ascending, of the input's index type */
    void *values;             /* nnz rows of row_len elements */
} tacl_sparse_result_t;

/**
 * Sum over comm's ranks of each rank's rows (op must be TACL_SUM; a row a
 * rank does not give counts as zeros), summed in rank order: the result
 * is bit for bit the rank-order sum of the densified inputs (but SPARCML,
 * which adds partial sums pairwise, DENSE, in the dense all-reduce's
 * order, ZEN_HIER, which adds each node's rows in rank order and then
 * the nodes' sums in the order of their ranks on the rail, and
 * DENSE_ZEN, which adds each node's rows in the dense reduce-scatter's
 * order and then the nodes' sums as ZEN_HIER).  ZEN_HIER and DENSE_ZEN
 * need the same number of ranks on every node (TACL_ERR_UNSUPPORTED
 * otherwise).  Into
 * dense_out (nrows * row_len elements, every row written) and/or
 * *sparse_out (the union's rows; free with tacl_sparse_result_free); at
 * least one of them.  Every rank passes the same nrows, row_len, dtype,
 * index type and scheme; nnz and the rows are each rank's own.  Host
 * memory; not inside a group.  A duplicate or out-of-range index, rows
 * with a NULL pointer, or another index type is an error naming it.
 */
tacl_status_t tacl_sparse_allreduce(const tacl_sparse_t *in,
                                    tacl_dtype_t dtype, tacl_op_t op,
                                    void *dense_out,
                                    tacl_sparse_result_t *sparse_out,
                                    tacl_sparse_scheme_t scheme,
                                    tacl_comm_t comm);

/**
 * tacl_sparse_allreduce, non-blocking: the arguments are checked now (a
 * bad one fails this call with the blocking form's message and makes no
 * request); the operation runs in the communicator's worker, in the
 * order the host-composed _nb calls (this and the tacl_comp_*_nb ones)
 * were issued, on a private communicator split from comm at the first
 * such call (collectively: every rank issues them in the same order).
 * dense_out and *sparse_out are written when *req_p completes; *in, its
 * rows and the outputs must stay untouched until then.  The request
 * obeys tacl_request_wait/test/set_callback/free as any; a wait gives up
 * after comm's timeout.  Destroying or aborting comm fails operations
 * not yet started.  tacl_sparse_last_scheme does not see these calls.
 */
tacl_status_t tacl_sparse_allreduce_nb(const tacl_sparse_t *in,
                                       tacl_dtype_t dtype, tacl_op_t op,
                                       void *dense_out,
                                       tacl_sparse_result_t *sparse_out,
                                       tacl_sparse_scheme_t scheme,
                                       tacl_comm_t comm,
                                       tacl_request_t *req_p);

/** Free what a sparse all-reduce allocated in *r and zero it. */
void tacl_sparse_result_free(tacl_sparse_result_t *r);

/** The scheme the latest sparse all-reduce on comm used (AUTO's choice). */
tacl_sparse_scheme_t tacl_sparse_last_scheme(tacl_comm_t comm);

/**
 * Zipf token streams: tokens of a frequency-sorted vocabulary (token i
 * the i-th most frequent) drawn from Zipf's law p(i) ~ 1 / (i + 1)^s,
 * the law of the library's sparse-gradient traces (the thesis' chapter
 * 3 skew, as tacl-sim and the sparse benchmarks draw it), for a program
 * that trains an embedding on such tokens.  Local: no rank talks.
 */
typedef struct tacl_zipf *tacl_zipf_t;

/**
 * A law over nrows tokens with exponent s (0 to 8; 1.0 is natural
 * language) and a seed.  TACL_ERR_INVALID_ARG naming a bad argument;
 * TACL_ERR_NO_MEMORY (it keeps nrows doubles).
 */
tacl_status_t tacl_zipf_create(uint64_t nrows, double s, uint64_t seed,
                               tacl_zipf_t *zipf_p);

/**
 * n tokens (repeats kept) of stream `stream` into tokens: the same
 * seed and stream give the same tokens on any rank.  Reads the law
 * only, so threads may draw from one law at once.
 */
tacl_status_t tacl_zipf_draw(tacl_zipf_t zipf, uint64_t stream, size_t n,
                             int64_t *tokens);

/** Free the law (NULL is ignored). */
void tacl_zipf_destroy(tacl_zipf_t zipf);

/** What tacl_sparse_estimate predicts. */
typedef struct {
    tacl_sparse_scheme_t scheme; /* the scheme that would run: AUTO's
                                    pick, or the scheme asked for */
    double seconds;              /* the sum of tacl_comm_estimate's
                                    times of the collectives it runs */
} tacl_sparse_estimate_t;

/**
 * Predict a sparse all-reduce on comm without running it: every rank
 * giving nnz rows of a table of nrows rows of row_len elements of dtype
 * with indices of index_type, their union expected_union rows (0: as
 * large as it can be, min(nranks * nnz, nrows), which is what AUTO
 * assumes).  Every scheme is priced; AUTO reports the scheme the real
 * call would pick with every rank giving nnz rows.  The time is the sum
 * of tacl_comm_estimate's for the collectives the scheme runs on comm,
 * with even blocks (Zen's push an all-to-all-v of an n-th of every
 * rank's rows to each owner, its pull an all-gather-v of an n-th of the
 * union, as indices or a bitmap by the real call's byte rule, each
 * after the small exchange of counts the real call makes; PS and OMNI
 * alike, without bitmaps; DENSE into dense_out alone).  SPARCML,
 * ZEN_HIER and DENSE_ZEN, whose steps run between pairs or on node and
 * rail communicators, are priced from their bytes per link class at the
 * links' rates, with a latency a step (ZEN_HIER and DENSE_ZEN on nodes
 * of unequal rank counts: TACL_ERR_UNSUPPORTED).  The work of sorting
 * and summing rows is not priced.  Local: no rank talks.
 */
tacl_status_t tacl_sparse_estimate(tacl_comm_t comm, size_t nnz, size_t nrows,
                                   size_t row_len, tacl_dtype_t dtype,
                                   tacl_dtype_t index_type,
                                   size_t expected_union,
                                   tacl_sparse_scheme_t scheme,
                                   tacl_sparse_estimate_t *est_p);

/*
 * Snapshots: the training state of every rank kept in host memory of its
 * own node and of m - 1 peers, so a job that loses a process or a node
 * resumes from the last step instead of the last file checkpoint.
 *
 * Each rank registers its regions (name, pointer, bytes) once; a save
 * copies them into a node-local store (named shared memory keyed by the
 * job key: it outlives the process, not the node) and sends a copy to
 * each of m - 1 peers chosen by the placement (group placement when m
 * divides the failure units, the mixed group/ring placement otherwise;
 * in the node failure domain every copy goes to another node, along the
 * rail).  Each store keeps two versions, each with a CRC32C per chunk.
 * A restore, on a communicator of the same size after a restart, finds
 * what every rank and its peers still hold, agrees on the newest version
 * every rank can get back intact, fetches the missing copies from peers,
 * verifies them and writes the regions; a damaged copy is skipped (its
 * message names the rank, region and version), falling back to the other
 * holder or the previous version.
 */
typedef struct tacl_snapshot *tacl_snapshot_t;

/** Where the copies of a rank's state go. */
typedef enum {
    TACL_SNAPSHOT_PLACE_AUTO = 0,  /**< group, or mixed when m does not
                                        divide the units */
    TACL_SNAPSHOT_PLACE_GROUP,     /**< groups of m (m must divide them) */
    TACL_SNAPSHOT_PLACE_RING       /**< each unit to the next m - 1 */
} tacl_snapshot_placement_t;

/** What one failure takes down: the copies must survive its loss. */
typedef enum {
    TACL_SNAPSHOT_DOMAIN_NODE = 0, /**< a node: copies on other nodes, on
                                        the same local rank (rail); needs
                                        at least m nodes */
    TACL_SNAPSHOT_DOMAIN_RANK      /**< a process: copies on other ranks */
} tacl_snapshot_domain_t;

/**
 * How a set's copies share the network with the caller's operations.
 * BACKGROUND (the default): each copy's parts of R/p bytes start only
 * while no other operation of the process's tacl context is in flight
 * (or after 50 ms of waiting, so that a save always ends), at most p of
 * them at once, so they fill the gaps of training traffic (the thesis'
 * section 6.5); to another node, only once the link has carried what
 * was sent before (at the topology's rate: a send over TCP ends when
 * queued), the set's own parts included, so a collective's message
 * waits behind one part at most.  FOREGROUND: every part starts at once, as any
 * collective's messages.  SCHEDULED: the thesis' Algorithm 6.2 learned
 * online.  The set watches the caller's first profile_steps steps (a
 * step: from one tacl_snapshot_step call to the next; for a caller that
 * never calls it, from one tacl_snapshot_due to the next, or else from
 * one save to the next) for the spans when none of
 * the process's operations to other nodes is in flight, averages them,
 * and plans which bytes of a copy go in which span (mu times each span's
 * length, parts of R/p, the link's rate and latency from the topology);
 * from then each step's spans open their bytes as the step starts, and
 * what the spans cannot hold goes in the step's last span.  Until the
 * plan is made, and when no step had an idle span, it is BACKGROUND.
 * tacl_snapshot_stats reports the plan.
 */
typedef enum {
    TACL_SNAPSHOT_TRAFFIC_BACKGROUND = 0,
    TACL_SNAPSHOT_TRAFFIC_FOREGROUND,
    TACL_SNAPSHOT_TRAFFIC_SCHEDULED
} tacl_snapshot_traffic_t;

/** A snapshot set's configuration; zeroed fields take the defaults. */
typedef struct {
    int replicas;                     /**< copies m, counting the own one;
                                           0: 2 */
    tacl_snapshot_placement_t placement;
    tacl_snapshot_domain_t domain;
    size_t staging_bytes;             /**< R: bytes in flight per peer;
                                           0: 1 MiB (parts of 256 KiB: a
                                           part on a slow link delays a
                                           collective behind it) */
    int staging_parts;                /**< p: R is sent in parts of R/p
                                           bytes, also the checksum unit;
                                           0: 4 */
    tacl_snapshot_traffic_t traffic;  /**< 0: background */
    const char *job_key;              /**< names the node-local store
                                           (letters, digits, '.', '_',
                                           '-'; at most 64); the same key
                                           after a restart finds it;
                                           required */
    double max_step_overhead;         /**< share of the caller's step
                                           time the saves may take in its
                                           thread (tacl_snapshot_due);
                                           0: no bound */
    int profile_steps;                /**< SCHEDULED: steps watched before
                                           the plan (2..64); 0: 10 */
    double span_share;                /**< SCHEDULED: mu, the share of
                                           each idle span planned full
                                           (0 < mu <= 1); 0: 0.8 */
} tacl_snapshot_config_t;

/**
 * Create a snapshot set on comm (collective): every rank passes the same
 * configuration.  The set talks on a communicator of its own split from
 * comm, so its messages never meet the caller's.  A configuration that
 * cannot be placed (more copies than units, group placement whose m does
 * not divide the units, the node domain on fewer than m nodes) is
 * TACL_ERR_INVALID_ARG with the reason.
 */
tacl_status_t tacl_snapshot_create(tacl_comm_t comm,
                                   const tacl_snapshot_config_t *config,
                                   tacl_snapshot_t *snap_p);

/**
 * Register a region of this rank's state: name (unique in the set, at
 * most 47 characters), host memory [ptr, ptr + bytes).  Regions are saved
 * and restored in the order registered.  Device memory is
 * TACL_ERR_UNSUPPORTED for now: copy it to host memory first.
 */
tacl_status_t tacl_snapshot_register(tacl_snapshot_t snap, const char *name,
                                     void *ptr, size_t bytes);

/**
 * Declare this rank's registered state replicated (collective; before the
 * set's first save or restore; a restarted job declares it again before
 * its restore): ranks passing the same group >= 0 hold byte-identical
 * regions, with the same names and sizes, at every save, as
 * data-parallel replicas do (DDP's whole model; MiCS's and HSDP's shard
 * on every shard group).  Their own copies then serve as one another's:
 * the set places each rank's m - 1 copies on its replicas (on other
 * nodes in the node domain, same placement rules) and a save sends them
 * its header and CRCs only, which each holds against its own copy, so
 * the copies cost no bulk traffic.  A save whose replicas differ fails,
 * naming the two ranks, the region and the version, and that version is
 * never handed to another rank; a restore fetches a lost rank's state
 * from a replica that matched it.  group -1: state of its own.  A rank
 * whose group spans fewer than m nodes (ranks in the rank domain) keeps
 * the copies of the ordinary placement, which are sent as usual.
 */
tacl_status_t tacl_snapshot_replicated(tacl_snapshot_t snap, int group);

/**
 * Save the registered regions as version (collective, blocking; versions
 * must increase).  Returns once every rank's state at that version has m
 * committed copies; until then, and if it fails, the previous complete
 * version stays in every store.  The regions may change once it returns.
 * Every copy received is checked against its sender's CRCs.
 */
tacl_status_t tacl_snapshot_save(tacl_snapshot_t snap, uint64_t version);

/**
 * tacl_snapshot_save() without waiting for the copies: the own copy is
 * taken before it returns (the regions may change at once), the copies
 * to and from peers travel under *req_p.  Each rank's request completes
 * once its copy is sent and the copies it keeps for others are committed,
 * so the version has m committed copies of every rank's state once every
 * rank's request has completed.  Wait for (or test until complete) the
 * request before the set's next save, restore or destroy, which agree
 * with the other ranks that it completed everywhere; from then on
 * tacl_snapshot_latest reports it.  The request's callback is the set's:
 * setting another is TACL_ERR_INVALID_USAGE.  The first save of a set
 * fixes its regions (later registers are TACL_ERR_INVALID_USAGE).
 */
tacl_status_t tacl_snapshot_save_nb(tacl_snapshot_t snap, uint64_t version,
                                    tacl_request_t *req_p);

/**
 * Whether a save may start now without holding the caller up
 * (collective: every rank calls it once a step, in step, and then
 * tacl_snapshot_save_nb where *due_p is 1).  1 when the previous
 * non-blocking save's request has completed on every rank, so saves come
 * no more often than their copies take (the thesis' Equation 6.2,
 * 1/f >= max(t_ckpt, T_iter)), and, with the configuration's
 * max_step_overhead, when enough steps passed since the last save that
 * its cost in the caller's thread (the own copy and its checksums) stays
 * within that share of the step time measured between calls.  Every
 * rank gets the same answer (one small all-reduce on the set's
 * communicator).  A save skipped counts in tacl_snapshot_stats and is
 * logged (at WARN) the first time for each reason.
 */
tacl_status_t tacl_snapshot_due(tacl_snapshot_t snap, int *due_p);

/**
 * A step of the caller starts now (local, no communication): the marks
 * SCHEDULED traffic watches and plans by (tacl_snapshot_traffic_t), for
 * a caller that saves on some steps only and does not ask
 * tacl_snapshot_due each step.  Call it at the same point of every step,
 * before the step's save if it saves.  Nothing for other traffic.
 */
tacl_status_t tacl_snapshot_step(tacl_snapshot_t snap);

/** How a set's saves went (tacl_snapshot_stats). */
typedef struct {
    uint64_t saves;             /**< non-blocking saves started */
    uint64_t skipped_busy;      /**< due calls answered 0: a save's
                                     copies still in flight somewhere */
    uint64_t skipped_overhead;  /**< answered 0 by max_step_overhead */
    double save_seconds;        /**< the last save_nb's time in the
                                     caller's thread */
    double step_seconds;        /**< the last interval between due
                                     calls */
    /* Where a non-blocking save's time goes (issue 29): the last one's
     * phases, then their totals over the set's saves.  agree, copy and
     * checksum are parts of save_seconds (the rest: fixing the layout,
     * preparing the received copies' slots, posting the messages). */
    double agree_seconds;       /**< agreeing with every rank that the
                                     previous save completed (an
                                     all-gather: it waits for the
                                     slowest rank) */
    double copy_seconds;        /**< the regions into this rank's store;
                                     with TACL_SNAP_FUSED_CRC 1 (the
                                     default) the checksums are taken in
                                     this one pass */
    double checksum_seconds;    /**< a separate checksum pass over the own
                                     copy (TACL_SNAP_FUSED_CRC 0); else 0 */
    double transfer_seconds;    /**< from the save_nb call to its request
                                     completing (its copy sent, the copies
                                     it keeps received), of the last save
                                     whose request completed */
    uint64_t bytes_sent;        /**< bytes the last save (either form)
                                     sent to peers: the registered bytes
                                     times m - 1; with replicas
                                     (tacl_snapshot_replicated) a header
                                     and the CRCs per copy */
    double total_save_seconds;  /**< sum of save_seconds */
    double total_agree_seconds; /**< sum of agree_seconds */
    double total_copy_seconds;  /**< sum of copy_seconds */
    double total_checksum_seconds; /**< sum of checksum_seconds */
    double total_transfer_seconds; /**< over the completed requests */
    uint64_t total_bytes_sent;  /**< sum of bytes_sent, both forms */
    /* Where the last restore's time went on this rank (issue 29), its
     * phases in order; they add up to restore_seconds but for the
     * bookkeeping between them.  All zero before a restore. */
    double restore_seconds;         /**< the whole tacl_snapshot_restore
                                         or _restore_file call */
    double restore_inventory_seconds; /**< listing the copies this rank
                                         holds (their headers checked;
                                         every chunk too when a damaged
                                         copy made the restore run
                                         again) */
    double restore_gather_seconds;  /**< all-gathering the ranks' lists
                                         of intact versions and choosing
                                         one */
    double restore_header_seconds;  /**< the fetched versions' headers,
                                         the receiving slots, and the
                                         agreement that every receiver
                                         has room */
    double restore_fetch_seconds;   /**< the fetched versions' bodies on
                                         the wire, each part checked
                                         against its CRC as it lands (and
                                         a file tier read) */
    double restore_verify_seconds;  /**< checking this rank's own copy
                                         of the version against its CRCs,
                                         after the fetch */
    double restore_agree_seconds;   /**< the two agreements: every rank
                                         has the version, every rank
                                         wrote it */
    double restore_write_seconds;   /**< the version into the regions */
    uint64_t restore_bytes_fetched; /**< data bytes this rank received
                                         from a peer (0 when it held its
                                         own state) */
    /* SCHEDULED traffic's plan on this rank (all zero before it). */
    int plan_spans;                 /**< idle spans of a step planned */
    double plan_step_seconds;       /**< a watched step's mean length */
    double plan_idle_seconds;       /**< the spans' mean length together
                                         (the link's idle share of a
                                         step: this over the step) */
    uint64_t plan_bytes;            /**< bytes a save sends (C(m - 1)) */
    uint64_t plan_beyond_bytes;     /**< of them, what the spans (mu of
                                         each) cannot hold: they go in
                                         the step's last span, the
                                         thesis' t_d = infinity */
} tacl_snapshot_stats_t;

/** This rank's counts for the set (local, no communication). */
tacl_status_t tacl_snapshot_stats(tacl_snapshot_t snap,
                                  tacl_snapshot_stats_t *stats_p);

/**
 * The newest version this set saved or restored completely: *found_p 1
 * and *version_p set, or *found_p 0.
 */
tacl_status_t tacl_snapshot_latest(tacl_snapshot_t snap, int *found_p,
                                   uint64_t *version_p);

/**
 * Restore the registered regions (collective) from the newest version
 * that every rank can get back intact from its own store or its peers'.
 * *found_p 0 (regions untouched, TACL_OK) when no rank holds any
 * snapshot under the job key; otherwise *found_p 1 and *version_p the
 * version written.  A rank whose every copy is lost (a whole placement
 * group gone) is TACL_ERR_INTERNAL naming the rank and where its copies
 * were; so is a registered region of another size than the one saved.
 * Snapshots saved by a job of another size are TACL_ERR_UNSUPPORTED for
 * now (their placement differs).
 */
tacl_status_t tacl_snapshot_restore(tacl_snapshot_t snap, int *found_p,
                                    uint64_t *version_p);

/**
 * Write this rank's committed version of its own state to a file (the
 * long-term tier; local, not collective): each rank passes its own path.
 * The file keeps the version, the job's size, the region names and sizes
 * and a CRC32C per chunk; it is written under a temporary name, synced
 * and renamed over path, so a crash leaves the old file or the new one.
 * A version this rank's store does not hold committed and intact is
 * TACL_ERR_INVALID_ARG (INTERNAL when its copy is damaged).  It may be
 * called while a non-blocking save of that version is in flight.
 */
tacl_status_t tacl_snapshot_flush(tacl_snapshot_t snap, uint64_t version,
                                  const char *path);

/**
 * tacl_snapshot_flush() in the background: the arguments are checked and
 * the version's slot of this rank's store is pinned now, the file is
 * written by a thread of tacl's, and *req_p completes when it is renamed
 * over path (its status the blocking form's).  The caller trains and
 * saves on meanwhile: the next save goes to the store's other slot; what
 * would overwrite the pinned slot waits for the flush (a save two
 * versions on, a restore, another flush).  Wait for the request before
 * destroying the set (TACL_ERR_INVALID_USAGE otherwise) and free it.
 */
tacl_status_t tacl_snapshot_flush_nb(tacl_snapshot_t snap, uint64_t version,
                                     const char *path, tacl_request_t *req_p);

/**
 * tacl_snapshot_restore() with the files as a second tier (collective;
 * each rank its own path, as flushed): the version restored is the newest
 * that every rank's state has in some peer's memory or in its own file
 * (a file's header is read to learn its version), and only the ranks
 * whose state no memory holds at that version read their files, whose
 * every chunk's CRC is checked.  So a lost placement group reads its own
 * ranks' files while the others restore from memory, when the memory
 * still holds the files' version.  When no version is complete, a
 * missing, damaged or mismatched file fails the restore with a message
 * naming the file, rank, region and version; nothing damaged is ever
 * loaded, and no rank writes its regions unless every rank can.
 * *found_p 0 (TACL_OK) only when no rank holds a snapshot in memory and
 * no rank has a file.  Every rank passes a path, or every rank NULL (then
 * it is tacl_snapshot_restore()); a mix is TACL_ERR_INVALID_ARG naming a
 * rank.
 */
tacl_status_t tacl_snapshot_restore_file(tacl_snapshot_t snap,
                                         const char *path, int *found_p,
                                         uint64_t *version_p);

/**
 * Destroy the set (collective); with purge also remove this rank's
 * node-local stores (the job is over), else they stay for a restart.
 */
tacl_status_t tacl_snapshot_destroy(tacl_snapshot_t snap, int purge);

/*
 * Gradient codecs: compression as plug-ins.  A codec turns a list of
 * float32 buffers (a fused group of gradients) into one encoded buffer and
 * back; the list is encoded in one call, so a group pays the codec's fixed
 * cost once.  Codecs are lossy and never chosen by tacl on its own.
 *
 * Built-ins, found by name with tacl_codec_find(): "fp16", "bf16" (casts),
 * "int8", "int4" (the block quantizers of qwZ/qgZ: one float32 scale per
 * block of each buffer), "topk" (the largest magnitudes of the whole
 * group, with their indices), "threshold" (DGC: a threshold estimated
 * from a sample, every value at or above it kept), "randk" (values at
 * indices drawn from a seed every rank shares: no indices are sent) and
 * "sign" (one bit a value and one scale, the mean magnitude, a buffer:
 * EFSignSGD, onebit).  Each one's bound is in docs/design/compression.md.
 *
 * Error feedback (EF-SGD): pass errs, one caller-owned float32 buffer per
 * input (or NULL entries), zero at first.  Encode then encodes x + e and
 * leaves e = x + e - decode(encoded), the residual that the next step
 * adds back.
 */

/** Codec parameters; a field a codec does not use is ignored. */
typedef struct {
    double density;  /**< topk, threshold, randk: share of values kept,
                          in (0, 1] */
    int bits;        /**< int8, int4: 8 or 4, the width of the name */
    uint32_t block;  /**< int8, int4: values per scale (0: 256) */
    uint64_t seed;   /**< randk: the seed every rank shares; change it
                          every step (the step number will do) */
} tacl_codec_params_t;

/**
 * Codec flags.  SUMMABLE: the encoded buffer is an array of the codec's
 * sum_dtype, and adding two such arrays elementwise (an all-reduce SUM
 * with that dtype) gives the encoding of the sum of the decoded inputs,
 * as that dtype rounds it; so a collective may reduce without decoding.
 * FIXED_SIZE: the encoded size depends only on the counts and the
 * parameters, never on the values (encoded_bound is then the exact size).
 */
#define TACL_CODEC_SUMMABLE 0x1u
#define TACL_CODEC_FIXED_SIZE 0x2u

/**
 * A codec's operations.  The callers of these slots (the tacl_codec_*
 * wrappers below) have already checked every pointer, the counts and
 * the parameters (through check), so a codec only does its work.
 */
typedef struct tacl_codec {
    const char *name;      /**< unique, at most 31 characters */
    unsigned flags;        /**< TACL_CODEC_* */
    tacl_dtype_t sum_dtype; /**< with TACL_CODEC_SUMMABLE: the element
                                 type of the encoded array */
    /** NULL when the parameters suit the codec, else the reason, naming
     *  the parameter ("density 0 is outside (0, 1]").  May be NULL. */
    const char *(*check)(const tacl_codec_params_t *params);
    /** Bytes the encoding of these nbufs buffers takes at most. */
    size_t (*encoded_bound)(const tacl_codec_params_t *params, int nbufs,
                            const size_t *counts);
    /** Encode the buffers into dst (room for encoded_bound bytes); set
     *  *bytes_p to the bytes written. */
    tacl_status_t (*encode)(const tacl_codec_params_t *params, int nbufs,
                            const float *const *srcs, const size_t *counts,
                            void *dst, size_t *bytes_p);
    /** Decode src (bytes long) into the buffers; with accumulate, add
     *  the decoded values to them instead.  TACL_ERR_INVALID_ARG when
     *  src does not fit the counts (a FIXED_SIZE codec sees that only
     *  when the size differs; the sparse ones carry the count). */
    tacl_status_t (*decode)(const tacl_codec_params_t *params,
                            const void *src, size_t bytes, int nbufs,
                            float *const *dsts, const size_t *counts,
                            int accumulate);
} tacl_codec_t;

/**
 * Add a codec of the caller's to the table tacl_codec_find() searches.
 * tacl keeps a copy of *codec (the function pointers and name must stay
 * valid).  TACL_ERR_INVALID_ARG for a NULL or missing slot (encode,
 * decode, encoded_bound), an empty or long name, or a name taken
 * already; TACL_ERR_NO_MEMORY when the table (64 codecs) is full.
 */
tacl_status_t tacl_codec_register(const tacl_codec_t *codec);

/** The codec called name (built-in or registered) into *codec_p;
 *  TACL_ERR_INVALID_ARG naming it when there is none. */
tacl_status_t tacl_codec_find(const char *name, const tacl_codec_t **codec_p);

/** Check params for a codec: TACL_ERR_INVALID_ARG with the reason. */
tacl_status_t tacl_codec_check(const tacl_codec_t *codec,
                               const tacl_codec_params_t *params);

/** The most bytes encoding these buffers can take, into *bytes_p. */
tacl_status_t tacl_codec_encoded_bound(const tacl_codec_t *codec,
                                       const tacl_codec_params_t *params,
                                       int nbufs, const size_t *counts,
                                       size_t *bytes_p);

/**
 * Encode nbufs float32 buffers (srcs[i] of counts[i] values) into dst,
 * which has capacity bytes (at least tacl_codec_encoded_bound); the
 * bytes written go to *bytes_p.  errs is NULL (no error feedback) or nbufs
 * caller-owned residual buffers (an entry may be NULL), used and updated
 * as the section comment says.
 */
tacl_status_t tacl_codec_encode(const tacl_codec_t *codec,
                                const tacl_codec_params_t *params, int nbufs,
                                const float *const *srcs,
                                const size_t *counts, float *const *errs,
                                void *dst, size_t capacity, size_t *bytes_p);

/** Decode bytes of src into the nbufs buffers dsts (counts as encoded). */
tacl_status_t tacl_codec_decode(const tacl_codec_t *codec,
                                const tacl_codec_params_t *params,
                                const void *src, size_t bytes, int nbufs,
                                float *const *dsts, const size_t *counts);

/** As tacl_codec_decode, adding the decoded values to dsts. */
tacl_status_t tacl_codec_decode_accumulate(const tacl_codec_t *codec,
                                           const tacl_codec_params_t *params,
                                           const void *src, size_t bytes,
                                           int nbufs, float *const *dsts,
                                           const size_t *counts);

/*
 * Compressed collectives: all-reduce, reduce-scatter and all-gather of
 * float32 host buffers whose data travels encoded by a codec.  They are
 * lossy and opt-in: tacl never picks them on its own.  Each is a
 * sequence of tacl's own collectives on comm with the encoding and
 * decoding between them, so it is blocking only (the sizes of a
 * sparsifier's blocks are known only once it has encoded) and cannot sit
 * in a group.  Every rank must pass the same count, codec, params and
 * scheme; the ranks first all-gather a small header and all fail with
 * TACL_ERR_INVALID_ARG, naming what differs, when they do not.
 *
 * Schemes:
 * - GATHER: each rank encodes its whole input, the encoded blocks are
 *   all-gathered (v), and every rank decodes and adds them in rank order
 *   (Espresso's indivisible scheme; any codec).
 * - SHUFFLE: each rank encodes one chunk per destination (rank c owns
 *   elements [c * count / n, (c + 1) * count / n) of an all-reduce, block
 *   c of a reduce-scatter), the chunks are exchanged all-to-all (v), each
 *   owner decodes and adds its chunk in rank order; an all-reduce then
 *   re-encodes the sum (no error feedback on that second encoding),
 *   all-gathers (v) it and decodes (the divisible scheme; any codec).
 * - SUM: for a TACL_CODEC_SUMMABLE codec: the encodings are reduced as
 *   they are, as arrays of the codec's sum_dtype, and decoded once.
 * - QUANT_A2A ("qgz"): reduce-scatter only, codecs int8 and int4 only:
 *   qgZ's quantized all-to-all (tacl_reduce_scatter_quantized with the
 *   codec's bits and block), bit for bit.  qgZ keeps no residual, so err
 *   must be NULL; tacl_comp_estimate prices that qgZ call.
 *
 * err: NULL, or a caller-owned float32 residual as long as sendbuf (zero
 * at first), used for error feedback as tacl_codec_encode's errs.  The
 * input is encoded before any output is written, so sendbuf may be
 * recvbuf.
 */
typedef enum {
    TACL_COMP_GATHER = 0,
    TACL_COMP_SHUFFLE,
    TACL_COMP_SUM,
    TACL_COMP_QUANT_A2A,
    TACL_NUM_COMP_SCHEMES
} tacl_comp_scheme_t;

/** "gather", "shuffle", "sum", "qgz", or "invalid". */
const char *tacl_comp_scheme_name(tacl_comp_scheme_t scheme);

/** recvbuf (count values) gets the sum over ranks of the decoded inputs. */
tacl_status_t tacl_comp_allreduce(const float *sendbuf, float *recvbuf,
                                  size_t count, const tacl_codec_t *codec,
                                  const tacl_codec_params_t *params,
                                  float *err, tacl_comp_scheme_t scheme,
                                  tacl_comm_t comm);

/**
 * sendbuf holds size * recvcount values (err as many); rank r's recvbuf
 * gets the sum over ranks of the decoded block r.  GATHER encodes the
 * whole input and decodes every rank's whole block to keep block r;
 * SHUFFLE and SUM encode block by block.
 */
tacl_status_t tacl_comp_reduce_scatter(const float *sendbuf, float *recvbuf,
                                       size_t recvcount,
                                       const tacl_codec_t *codec,
                                       const tacl_codec_params_t *params,
                                       float *err, tacl_comp_scheme_t scheme,
                                       tacl_comm_t comm);

/**
 * Every rank's sendcount values, encoded, go to every rank, which
 * decodes rank j's into recvbuf + j * sendcount (the GATHER scheme; an
 * all-gather has nothing to sum, so it takes no scheme).  With a block
 * quantizer (int8, int4) and err NULL the call is qwZ itself
 * (tacl_allgather_quantized with the codec's bits and block), bit for
 * bit: the caller's own block is exact, and tacl_comp_estimate prices
 * that call (named "qwz").
 */
tacl_status_t tacl_comp_allgather(const float *sendbuf, float *recvbuf,
                                  size_t sendcount, const tacl_codec_t *codec,
                                  const tacl_codec_params_t *params,
                                  float *err, tacl_comm_t comm);

/** Which hops of a compressed all-reduce carry encoded data. */
typedef enum {
    TACL_COMP_HOPS_ALL = 0, /**< every hop: tacl_comp_allreduce */
    /** Only those between nodes: a dense reduce-scatter inside each node,
     *  the compressed all-reduce of each share between the nodes (on the
     *  rails, tacl_comm_get_rail), a dense all-gather inside each node.
     *  Needs the same number of ranks on every node.  One node: a dense
     *  all-reduce.  With err, a rank's slice of it (share l of the
     *  count, its local rank l, shares of ceil(count / local ranks))
     *  holds the residual of its node's partial sum of that share. */
    TACL_COMP_HOPS_INTER,
    TACL_NUM_COMP_HOPS
} tacl_comp_hops_t;

/** tacl_comp_allreduce with a choice of the hops that carry encoded
 *  data (TACL_COMP_HOPS_ALL is tacl_comp_allreduce itself). */
tacl_status_t tacl_comp_allreduce_hops(
    const float *sendbuf, float *recvbuf, size_t count,
    const tacl_codec_t *codec, const tacl_codec_params_t *params, float *err,
    tacl_comp_scheme_t scheme, tacl_comp_hops_t hops, tacl_comm_t comm);

/**
 * tacl_comp_reduce_scatter with a choice of hops.  TACL_COMP_HOPS_INTER:
 * a dense reduce-scatter inside each node leaves local rank l with its
 * node's sum of the blocks of rail l's ranks (tacl_comm_get_rail), whose
 * compressed reduce-scatter between the nodes leaves every rank its
 * block.  Needs the same number of ranks on every node; one node: a
 * dense reduce-scatter.  With err (size * recvcount values, as the flat
 * call's), a rank keeps its node's residual of its rail's ranks' blocks
 * at their places and leaves the other blocks' entries alone.
 */
tacl_status_t tacl_comp_reduce_scatter_hops(
    const float *sendbuf, float *recvbuf, size_t recvcount,
    const tacl_codec_t *codec, const tacl_codec_params_t *params, float *err,
    tacl_comp_scheme_t scheme, tacl_comp_hops_t hops, tacl_comm_t comm);

/**
 * tacl_comp_allgather with a choice of hops.  TACL_COMP_HOPS_INTER: the
 * compressed all-gather between the nodes on each rail, then a dense
 * all-gather inside each node, so every block crosses the slow links
 * encoded once.  Needs the same number of ranks on every node; one node:
 * a dense all-gather.  err as the flat call's (sendcount values).
 */
tacl_status_t tacl_comp_allgather_hops(
    const float *sendbuf, float *recvbuf, size_t sendcount,
    const tacl_codec_t *codec, const tacl_codec_params_t *params, float *err,
    tacl_comp_hops_t hops, tacl_comm_t comm);

/**
 * Non-blocking forms of the compressed collectives: the arguments are
 * checked now, as the blocking form checks them (a bad one fails this
 * call with the same message and makes no request); the call runs in
 * comm's host-composed worker, in issue order with the other
 * host-composed _nb calls (see tacl_sparse_allreduce_nb), on a private
 * communicator split from comm at the first one.  sendbuf, recvbuf, err
 * and *codec are used until *req_p completes: leave them alone until
 * then (*params is copied now).  A wait on the request gives up after
 * comm's timeout.
 */
tacl_status_t tacl_comp_allreduce_nb(const float *sendbuf, float *recvbuf,
                                     size_t count, const tacl_codec_t *codec,
                                     const tacl_codec_params_t *params,
                                     float *err, tacl_comp_scheme_t scheme,
                                     tacl_comm_t comm, tacl_request_t *req_p);
/** tacl_comp_allreduce_hops, non-blocking (tacl_comp_allreduce_nb). */
tacl_status_t tacl_comp_allreduce_hops_nb(
    const float *sendbuf, float *recvbuf, size_t count,
    const tacl_codec_t *codec, const tacl_codec_params_t *params, float *err,
    tacl_comp_scheme_t scheme, tacl_comp_hops_t hops, tacl_comm_t comm,
    tacl_request_t *req_p);
/** tacl_comp_reduce_scatter, non-blocking (tacl_comp_allreduce_nb). */
tacl_status_t tacl_comp_reduce_scatter_nb(
    const float *sendbuf, float *recvbuf, size_t recvcount,
    const tacl_codec_t *codec, const tacl_codec_params_t *params, float *err,
    tacl_comp_scheme_t scheme, tacl_comm_t comm, tacl_request_t *req_p);
/** tacl_comp_allgather, non-blocking (tacl_comp_allreduce_nb). */
tacl_status_t tacl_comp_allgather_nb(const float *sendbuf, float *recvbuf,
                                     size_t sendcount,
                                     const tacl_codec_t *codec,
                                     const tacl_codec_params_t *params,
                                     float *err, tacl_comm_t comm,
                                     tacl_request_t *req_p);
/** tacl_comp_reduce_scatter_hops, non-blocking (tacl_comp_allreduce_nb). */
tacl_status_t tacl_comp_reduce_scatter_hops_nb(
    const float *sendbuf, float *recvbuf, size_t recvcount,
    const tacl_codec_t *codec, const tacl_codec_params_t *params, float *err,
    tacl_comp_scheme_t scheme, tacl_comp_hops_t hops, tacl_comm_t comm,
    tacl_request_t *req_p);
/** tacl_comp_allgather_hops, non-blocking (tacl_comp_allreduce_nb). */
tacl_status_t tacl_comp_allgather_hops_nb(
    const float *sendbuf, float *recvbuf, size_t sendcount,
    const tacl_codec_t *codec, const tacl_codec_params_t *params, float *err,
    tacl_comp_hops_t hops, tacl_comm_t comm, tacl_request_t *req_p);

/**
 * Coalesced compressed collectives: a list of nbufs buffers travels as
 * one call (Cupcake's fused group): one header, one encoding of the
 * whole list, one sequence of collectives, so the group pays the codec's
 * and the collectives' fixed costs once.  Buffer i holds counts[i]
 * values: an all-reduce's input and output, a reduce-scatter's output
 * (its input size * counts[i], block r going to rank r), an all-gather's
 * input (its output size * counts[i], rank j's block at j * counts[i]).
 * The list is packed into one staging buffer as the single call with
 * hops would see it, a reduce-scatter's block by block (block r of the
 * packed input is every buffer's block r), so the result is that call's
 * on the packed input, bit for bit, residuals included; the packing
 * costs a copy of the data each way.  errs: NULL, or one residual per
 * buffer, as long as that buffer's input; written back only when the
 * call succeeds.  sendbufs[i] may be recvbufs[i].  Every rank passes
 * the same nbufs and counts: the ranks first all-gather a digest of
 * them, and all fail with TACL_ERR_INVALID_ARG naming a rank whose list
 * differs.  nbufs 0 is an empty call.  tacl_comp_estimate on the sum of
 * the counts prices one.
 */
tacl_status_t tacl_comp_allreduce_coalesced(
    int nbufs, const float *const *sendbufs, float *const *recvbufs,
    const size_t *counts, const tacl_codec_t *codec,
    const tacl_codec_params_t *params, float *const *errs,
    tacl_comp_scheme_t scheme, tacl_comp_hops_t hops, tacl_comm_t comm);
/** The reduce-scatter of a list (tacl_comp_allreduce_coalesced). */
tacl_status_t tacl_comp_reduce_scatter_coalesced(
    int nbufs, const float *const *sendbufs, float *const *recvbufs,
    const size_t *recvcounts, const tacl_codec_t *codec,
    const tacl_codec_params_t *params, float *const *errs,
    tacl_comp_scheme_t scheme, tacl_comp_hops_t hops, tacl_comm_t comm);
/** The all-gather of a list (tacl_comp_allreduce_coalesced). */
tacl_status_t tacl_comp_allgather_coalesced(
    int nbufs, const float *const *sendbufs, float *const *recvbufs,
    const size_t *sendcounts, const tacl_codec_t *codec,
    const tacl_codec_params_t *params, float *const *errs,
    tacl_comp_hops_t hops, tacl_comm_t comm);
/**
 * Non-blocking forms of the coalesced calls (tacl_comp_allreduce_nb):
 * the list is checked now, its arrays (not the buffers) and *params
 * copied, and the blocking form runs in comm's host-composed worker, the
 * ranks' digests agreed there.  The buffers, residuals and *codec are
 * used until *req_p completes.
 */
tacl_status_t tacl_comp_allreduce_coalesced_nb(
    int nbufs, const float *const *sendbufs, float *const *recvbufs,
    const size_t *counts, const tacl_codec_t *codec,
    const tacl_codec_params_t *params, float *const *errs,
    tacl_comp_scheme_t scheme, tacl_comp_hops_t hops, tacl_comm_t comm,
    tacl_request_t *req_p);
tacl_status_t tacl_comp_reduce_scatter_coalesced_nb(
    int nbufs, const float *const *sendbufs, float *const *recvbufs,
    const size_t *recvcounts, const tacl_codec_t *codec,
    const tacl_codec_params_t *params, float *const *errs,
    tacl_comp_scheme_t scheme, tacl_comp_hops_t hops, tacl_comm_t comm,
    tacl_request_t *req_p);
tacl_status_t tacl_comp_allgather_coalesced_nb(
    int nbufs, const float *const *sendbufs, float *const *recvbufs,
    const size_t *sendcounts, const tacl_codec_t *codec,
    const tacl_codec_params_t *params, float *const *errs,
    tacl_comp_hops_t hops, tacl_comm_t comm, tacl_request_t *req_p);

/**
 * Price a compressed collective's communication into *info_p: the sum of
 * tacl_comm_estimate over the collectives its scheme runs (the header,
 * size exchanges, the data), each encoding taken at the codec's
 * encoded_bound (for a sparsifier an upper bound).  coll is
 * TACL_COLL_ALLREDUCE, _REDUCE_SCATTER or _ALLGATHER (scheme ignored),
 * count as the call's.  seconds, bytes and messages are summed;
 * algorithm is the scheme's name, engine "schedule".  Encoding and
 * decoding are not priced: their cost is the machine's (the planner takes
 * codec profiles for it).  Purely local, like tacl_comm_estimate.
 */
tacl_status_t tacl_comp_estimate(tacl_comm_t comm, tacl_coll_t coll,
                                 size_t count, const tacl_codec_t *codec,
                                 const tacl_codec_params_t *params,
                                 tacl_comp_scheme_t scheme,
                                 tacl_sim_info_t *info_p);

/**
 * tacl_comp_estimate for the _hops forms.  HOPS_ALL is tacl_comp_estimate.
 * HOPS_INTER: on one node (or count 0) the dense collective's
 * tacl_comm_estimate; otherwise the header, the dense steps inside each
 * node and the rails' compressed call, priced by the bytes each sends on
 * the host link and on the network at the topology's rates (the node and
 * rail communicators are made by the first real call, and an estimate
 * makes none): bytes[TACL_LINK_HOST] are the dense steps',
 * bytes[TACL_LINK_NET] the rail's, algorithm "<scheme>/inter".  Nodes
 * with unequal rank counts get TACL_ERR_INVALID_ARG naming the counts, as
 * the call does.
 */
tacl_status_t tacl_comp_estimate_hops(tacl_comm_t comm, tacl_coll_t coll,
                                      size_t count,
                                      const tacl_codec_t *codec,
                                      const tacl_codec_params_t *params,
                                      tacl_comp_scheme_t scheme,
                                      tacl_comp_hops_t hops,
                                      tacl_sim_info_t *info_p);

#ifdef __cplusplus
}
#endif

#endif /* TACL_H */
