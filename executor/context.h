/*
 * Contexts: what one tacl_comm_init_rank() sets up below the API and every
 * communicator split from it shares: the bootstrap, the node table and
 * topology, the transport instances, and the schedules in flight.
 *
 * Creation runs the bootstrap, exchanges node identities (TACL_NODE_ID,
 * else host name and boot id), numbers the nodes in order of their lowest
 * rank, builds the topology and creates the transports (self for the rank
 * itself, shm for the ranks of the same node, the network for the rest).
 *
 * Locking: one mutex per context serialises posting and progress, so
 * several threads may use communicators of one context; a blocking wait
 * releases it between progress rounds.
 */
#ifndef TACL_EXECUTOR_CONTEXT_H
#define TACL_EXECUTOR_CONTEXT_H

#include <pthread.h>
#include <stdint.h>

#include "tacl.h"
#include "bootstrap.h"
#include "topo.h"
#include "transport.h"

#define TACL__NODE_ID_LEN 64
#define TACL__MAX_TL 4

typedef struct tacl__exec tacl__exec_t;

typedef struct tacl__ctx {
    int refcount;              /* communicators using it (under lock) */
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
    unsigned flight_gen;       /* last TACL_FLIGHT_SIGNAL dumped for */
} tacl__ctx_t;

/**
 * Create the context of world rank rank of nranks meeting at id (the
 * bootstrap, the topology and the transports), with a reference count of
 * one.  Collective over the nranks processes.  timeout_s bounds every
 * wait of the bootstrap and the transports (0: TACL_TIMEOUT).
 */
tacl_status_t tacl__ctx_create(const tacl_unique_id_t *id, int rank,
                               int nranks, double timeout_s,
                               tacl__ctx_t **ctx_p);

/** Take one more reference to ctx (a new communicator shares it). */
void tacl__ctx_retain(tacl__ctx_t *ctx);

/** Drop one reference; the last one closes the transports and frees ctx. */
void tacl__ctx_release(tacl__ctx_t *ctx);

/** Mark the whole context failed: every pending operation ends with it. */
void tacl__ctx_set_fatal(tacl__ctx_t *ctx, tacl_status_t status);

/** Progress every execution of a context once (takes the lock). */
int tacl__ctx_progress(tacl__ctx_t *ctx);

#endif /* TACL_EXECUTOR_CONTEXT_H */
