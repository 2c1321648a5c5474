/*
 * The API layer's internal objects.
 *
 * A context (tacl__ctx_t) is what one tacl_comm_init_rank() creates: the
 * bootstrap, the node table, the transport instances and the schedules in
 * flight.  Communicators made by split share their parent's context (and
 * so its connections); the context lives until its last communicator is
 * destroyed.
 *
 * Locking: one mutex per context serialises posting and progress, so
 * several threads may use communicators of one context; a blocking wait
 * releases it between progress rounds.
 */
#ifndef TACL_LIB_COMM_H
#define TACL_LIB_COMM_H

#include <pthread.h>
#include <stdint.h>

#include "tacl.h"
#include "algo.h"
#include "bootstrap.h"
#include "sched.h"
#include "topo.h"
#include "topo_view.h"
#include "transport.h"

#define TACL__NODE_ID_LEN 64
#define TACL__MAX_TL 4

typedef struct tacl__exec tacl__exec_t;

typedef struct tacl__ctx {
    int refcount;
    int rank;                  /* world rank */
    int nranks;
    double timeout_s;
    tacl__bootstrap_t *bs;
    char (*node_ids)[TACL__NODE_ID_LEN]; /* per world rank */
    int *node_of;              /* node index per world rank */
    int n_nodes;
    tacl__topo_t topo;         /* nodes, links, node of each world rank */
    tacl__tl_t *tls[TACL__MAX_TL];
    int ntl;
    int8_t *tl_of;             /* transport index per world rank, -1 none */
    pthread_mutex_t lock;
    tacl__exec_t *active;      /* schedules in flight */
    tacl_status_t fatal;       /* sticky failure of the whole context */
    char fatal_msg[256];
    uint64_t last_check_ns;    /* last bootstrap liveness check */
} tacl__ctx_t;

#define TACL__COMM_ALIVE 0x7ac1c0de
#define TACL__COMM_DEAD 0xdeadc0de

typedef struct {
    void *ptr;
    uint64_t size;
    int in_use;
    int shared;        /* from tacl_mem_alloc: peers can map it */
} tacl__scratch_t;

#define TACL__SCRATCH_SLOTS 8

struct tacl_comm {
    uint32_t magic;
    tacl__ctx_t *ctx;
    int rank;
    int size;
    int *world;                /* comm rank -> world rank */
    uint32_t id;               /* on the wire above every tag */
    uint64_t seq;              /* collective operations so far */
    uint64_t *p2p_send;        /* sends posted to each peer */
    uint64_t *p2p_recv;        /* receives posted from each peer */
    uint64_t splits;           /* splits so far */
    int *node_of;              /* node index per comm rank */
    uint8_t *link_of;          /* link class to each comm rank, for host
                                  memory (device buffers may use GPU) */
    tacl__topo_view_t view;
    tacl_counters_t counters;
    tacl__scratch_t scratch[TACL__SCRATCH_SLOTS];
    int inflight;              /* executions not yet completed */
    struct tacl_comm *local;   /* cached tacl_comm_get_local() */
    struct tacl_comm *rail;    /* cached tacl_comm_get_rail() */
    int is_derived;            /* owned by its parent: not for the user to
                                  destroy */
    char last_algo[16];        /* algorithm of the latest operation */
    tacl_status_t async_error;
    char last_error[512];
    struct tacl_comm *grave_next; /* destroyed handles stay recognisable */
};

/** Check a handle: TACL_OK, or an error recorded with a message. */
tacl_status_t tacl__comm_check(tacl_comm_t comm);

/** Copy the thread's last error into comm (if usable) and return status. */
tacl_status_t tacl__comm_fail(tacl_comm_t comm, tacl_status_t status);

/** Mark the whole context failed: every pending operation ends with it. */
void tacl__ctx_set_fatal(tacl__ctx_t *ctx, tacl_status_t status);

/** Scratch memory from the communicator's pool. */
/** Scratch of size bytes; shared: memory peers can map (tacl_mem_alloc). */
void *tacl__comm_scratch_get(tacl_comm_t comm, uint64_t size, int shared);
/** Give back what tacl__comm_scratch_get(comm, size, shared) returned. */
void tacl__comm_scratch_put(tacl_comm_t comm, void *ptr, int shared);
/** Whether scratch of size bytes is backed by huge pages (cheap to pin). */
int tacl__comm_scratch_pinnable(uint64_t size);

/** The memory type of a caller buffer (HOST unless a CUDA pointer). */
tacl_memtype_t tacl__memtype_detect(const void *ptr);

/*
 * Requests: one or more executions (a group spans communicators).
 */
struct tacl_request {
    int nexec;
    tacl__exec_t **execs;
    tacl_status_t status;
    int done;
};

tacl_status_t tacl__request_create(tacl__exec_t **execs, int nexec,
                                   tacl_request_t *req_p);
/** Wait for a request and free it; returns its status. */
tacl_status_t tacl__request_finish(tacl_request_t req);

/*
 * Posting operations (coll.c, group.c).
 */
typedef struct {
    tacl_comm_t comm;
    tacl__coll_args_t args;
} tacl__op_t;

/** Whether the calling thread is inside a group. */
int tacl__group_active(void);
/** Record an operation in the thread's group. */
tacl_status_t tacl__group_add(const tacl__op_t *op);

/** Validate an operation's arguments as the entry points do. */
tacl_status_t tacl__coll_check(tacl_comm_t comm, tacl__coll_args_t *args,
                               tacl_stream_t stream);

/**
 * Run ops (all on one communicator) as one schedule: build it, start it,
 * and hand back its execution.
 */
tacl_status_t tacl__ops_start(tacl_comm_t comm, const tacl__op_t *ops,
                              int nops, tacl__exec_t **exec_p);

#endif /* TACL_LIB_COMM_H */
