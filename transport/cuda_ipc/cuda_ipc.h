/*
 * Internal layout of the cuda_ipc transport, shared by its files.
 *
 * cuda_ipc moves CUDA device memory between the processes of a node.
 * The ranks of a node are connected pairwise by Unix stream-of-packets
 * sockets (SOCK_SEQPACKET, abstract names), the host channel that carries
 * every control message and, with a message from a tacl_mem_alloc
 * allocation, that allocation's file descriptor (SCM_RIGHTS).  Sockets
 * rather than the shm transport's queues: passing a descriptor needs one
 * anyway, and the same socket gives ordered messages, sleeping in poll()
 * and a dead peer's hang-up, which shm builds from a futex and liveness
 * checks.
 *
 * A send exports its buffer: a tacl_mem_alloc allocation by its
 * descriptor (core/cuda_mem.h), any other cudaMalloc memory by the
 * cudaIpc handle of its allocation (cuMemGetAddressRange finds base and
 * offset), and posts an RTS naming the allocation (kind, id, size),
 * offset, length and tag.  The receiver matches RTSs with receives by
 * (source, tag) in order, opens the allocation (a per-peer cache,
 * cuda_ipc_cache.c), copies with cuMemcpyAsync on its own stream in
 * chunks, several in flight, polls their events from progress(), and
 * answers FIN, which completes the send.
 *
 * How long a mapping lives (the rule the tests hold):
 *  - a tacl_mem_alloc allocation is opened once and kept: its owner
 *    announces its free (FREED), and peers drop their mappings then;
 *  - any other allocation (cudaMalloc, a caching allocator's segment) is
 *    closed as soon as no copy reads it, before the FIN that completes the
 *    send goes: CUDA leaves freeing memory a peer still has mapped
 *    undefined, and tacl cannot see such a free.  So once a send has
 *    completed, its owner may free the buffer.  Each message from such
 *    memory pays an open and a close (NCCL likewise maps only registered
 *    user buffers); repeated traffic belongs in tacl_mem_alloc memory.
 *
 * Setup costs no CUDA: at init every rank listens on an abstract Unix
 * socket and the ranks exchange the sockets' names (one exchange).  A
 * pair connects at its first device message: the rank of lower local
 * index connects when it posts a message with the other, the higher one
 * accepts when it posts one (a message from the higher rank waits in its
 * queue until then).  The CUDA driver is first asked for when a device
 * message is posted (reachable()), so a process that moves host memory
 * only never initialises CUDA here.
 */
#ifndef TACL_TRANSPORT_CUDA_IPC_CUDA_IPC_H
#define TACL_TRANSPORT_CUDA_IPC_CUDA_IPC_H

#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "cu_driver.h"
#include "tl_base.h"

/* Bytes of one copy on the stream, and copies in flight per device. */
#define TACL_CIPC_CHUNK (8u << 20)
#define TACL_CIPC_INFLIGHT 4
/* Devices of one process the transport copies on. */
#define TACL_CIPC_MAX_DEVICES 16
/* Opened allocations of one peer kept at once. */
#define TACL_CIPC_MAPS 32
/* Messages one progress call reads from one peer at most. */
#define TACL_CIPC_POLL_BUDGET 64

enum {
    TACL_CIPC_MSG_RTS = 1,
    TACL_CIPC_MSG_FIN,
    TACL_CIPC_MSG_FREED
};

/* How the memory of an RTS is shared. */
enum {
    TACL_CIPC_MEM_NONE = 0,    /* an empty message: nothing to open */
    TACL_CIPC_MEM_LEGACY,      /* a cudaIpc handle in the message */
    TACL_CIPC_MEM_VMM          /* a cuMem descriptor passed with it */
};

/** One control message. */
typedef struct {
    uint32_t kind;             /* TACL_CIPC_MSG_* */
    uint32_t mem;              /* RTS: TACL_CIPC_MEM_* */
    uint64_t tag;              /* RTS */
    uint64_t len;              /* RTS */
    uint64_t op_id;            /* RTS: the sender's op; FIN: the op done */
    int64_t status;            /* FIN: how the copy ended */
    uint64_t alloc_id;         /* RTS, FREED: the allocation, unique in
                                  its process */
    uint64_t alloc_size;       /* RTS */
    uint64_t offset;           /* RTS: of the message in the allocation */
    uint8_t handle[64];        /* RTS, LEGACY: the CUipcMemHandle */
} tacl__cipc_msg_t;

/** An RTS that arrived before its receive, with its descriptor. */
typedef struct {
    tacl__tl_msg_t link;       /* first: its peer, tag and queue link */
    tacl__cipc_msg_t msg;
    int fd;                    /* -1: none */
} tacl__cipc_ux_t;

/** A message waiting for room in the socket. */
typedef struct {
    tacl__cipc_msg_t msg;
    int fd;                    /* passed with it, closed once sent */
} tacl__cipc_out_t;

/** A peer's allocation opened here. */
typedef struct {
    uint32_t mem;              /* TACL_CIPC_MEM_*; NONE: entry free */
    int device;                /* our device it is mapped for */
    uint64_t id;
    uint64_t size;
    uint64_t base;             /* CUdeviceptr here */
    uint64_t handle;           /* VMM: the imported allocation handle */
    uint32_t busy;             /* copies reading it */
    int stale;                 /* the owner freed it: drop when idle */
    uint64_t used;             /* for eviction */
} tacl__cipc_map_t;

typedef struct {
    int rank;                  /* world rank */
    int fd;                    /* the socket; -1: not connected */
    int hung_up;               /* the socket reported the peer gone */
    int listens;               /* it listens (the setup exchange) */
    uint64_t nonce;            /* names its listening socket */
    int want;                  /* a post waits for the connection */
    tacl__tl_opq_t rts_wait;   /* sends whose RTS is out, awaiting FIN */
    tacl__tl_opq_t recvs;      /* receives not matched yet */
    tacl__tl_msgq_t ux;        /* unexpected RTSs (tacl__cipc_ux_t) */
    tacl__cipc_out_t *out;     /* messages the socket had no room for */
    size_t nout, out_cap;
    tacl__cipc_map_t maps[TACL_CIPC_MAPS];
    uint64_t clock;
} tacl__cipc_peer_t;

/** A copy in flight on a device's stream. */
typedef struct {
    tacl__tl_op_t *op;         /* NULL: its receive was cancelled */
    uint64_t end;              /* the op's bytes done when it completes */
#if TACL_HAVE_CUDA
    CUevent event;
#endif
} tacl__cipc_chunk_t;

typedef struct {
    int ready;                 /* the stream and events exist */
#if TACL_HAVE_CUDA
    CUstream stream;
#endif
    tacl__cipc_chunk_t ring[TACL_CIPC_INFLIGHT];
    unsigned head, count;
} tacl__cipc_dev_t;

typedef struct {
    tacl__tl_base_t base;      /* first: rank, node, done queue, failure */
    tacl__cipc_peer_t *peers;  /* by local index; ours is unused */
    int lfd;                   /* our listening socket; -1: none */
    uint64_t nonce;            /* names it */
    int nwant;                 /* peers whose connection a post awaits */
    int driver;                /* 1 the CUDA driver works, -1 it does not,
                                  0 not asked yet */
    tacl__tl_opq_t pulls;      /* receives copying, oldest first */
    uint64_t next_op_id;
    uint64_t freed_cursor;     /* tacl__cuda_mem_freed's */
    tacl__cipc_dev_t devs[TACL_CIPC_MAX_DEVICES];
} tacl__cipc_t;

/* Private fields of an operation. */
/* tl_priv[0]: the status, on the done queue (TACL__TL_OP_STATUS). */
#define TACL_CIPC_OP_ID(op) ((op)->tl_priv[1])     /* send: its RTS id;
                                                      pull: the sender's */
#define TACL_CIPC_OP_ISSUED(op) ((op)->tl_priv[2]) /* pull: bytes queued */
#define TACL_CIPC_OP_DONE(op) ((op)->tl_priv[3])   /* pull: bytes copied */
#define TACL_CIPC_OP_SRC(op) ((op)->tl_priv[4])    /* pull: source here */
#define TACL_CIPC_OP_WHERE(op) ((op)->tl_priv[5])  /* recv: device << 16 |
                                                      map entry */
#define TACL_CIPC_OP_DEVICE(op) ((int)(TACL_CIPC_OP_WHERE(op) >> 16))
#define TACL_CIPC_OP_MAP(op) ((int)(TACL_CIPC_OP_WHERE(op) & 0xffff))

/* cuda_ipc_cache.c: peers' allocations opened here. */

/**
 * The entry of peer's cache holding the allocation msg names, opened for
 * device (with fd, a descriptor of it for VMM, which the caller still
 * closes) when missing; -1 with an error decided and logged.
 */
int tacl__cipc_map_get(tacl__cipc_peer_t *peer, const tacl__cipc_msg_t *msg,
                       int fd, int device, tacl_status_t *status_p);
/**
 * A copy from entry i ended; an entry nothing reads any more goes when it
 * is stale or a cudaIpc mapping (cuda_ipc.h, lifetimes).
 */
void tacl__cipc_map_release(tacl__cipc_peer_t *peer, int i);
/** The owner freed allocation id: drop it (when nothing reads it). */
void tacl__cipc_map_freed(tacl__cipc_peer_t *peer, uint64_t id);
/** Close every entry. */
void tacl__cipc_map_clear(tacl__cipc_peer_t *peer);

/** Allocations this process has opened from peers (a debug counter). */
uint64_t tacl__cipc_open_count(void);

/* cuda_ipc.c: connections. */

/**
 * Start connecting to peer if it is not connected (a post needs it): the
 * lower rank of the pair connects, the higher one accepts.  An error is
 * decided and logged.
 */
tacl_status_t tacl__cipc_want(tacl__cipc_t *c, tacl__cipc_peer_t *peer);

struct sockaddr_un;
/** The abstract Unix socket address of rank's listener named by nonce
 *  (cuda_ipc_conn.c); returns its length. */
socklen_t tacl__cipc_sock_addr(struct sockaddr_un *addr, uint64_t nonce,
                               int rank);
/** Advance the connections posts wait for: events, or a status. */
int tacl__cipc_connect_pending(tacl__cipc_t *c);

/* cuda_ipc_proto.c */
tacl_status_t tacl__cipc_send(tacl__tl_t *tl, tacl__tl_op_t *op);
tacl_status_t tacl__cipc_recv(tacl__tl_t *tl, tacl__tl_op_t *op);
int tacl__cipc_probe(tacl__tl_t *tl, uint64_t tag, int *peer, uint64_t *len);
int tacl__cipc_progress(tacl__tl_t *tl);
tacl_status_t tacl__cipc_wait(tacl__tl_t *tl, int64_t timeout_us);
/** Complete every pending operation with status (the base's fail). */
void tacl__cipc_fail_pending(tacl__tl_base_t *base, tacl_status_t status);
/** Free what the protocol holds for a peer. */
void tacl__cipc_peer_cleanup(tacl__cipc_peer_t *peer);
/** Wait for the copies on the streams, then free them. */
void tacl__cipc_devs_fini(tacl__cipc_t *cipc);

#endif /* TACL_TRANSPORT_CUDA_IPC_CUDA_IPC_H */
