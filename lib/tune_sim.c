/*
 * The simulation tuner (TACL_TUNER=sim) and the communicator's modelled
 * cluster, which tacl_comm_estimate runs on too.
 *
 * A communicator's cluster is made once, on first use, from its
 * context's topology (what was detected, or TACL_TOPO_FILE) and its
 * ranks' nodes.  The tuner simulates every candidate row of a collective
 * at the first size it sees in each power-of-two bucket of bytes and
 * keeps the fastest row for the bucket: every rank computes the same
 * pick from the same inputs, with no message.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "common.h"
#include "config.h"
#include "log.h"

#define TUNE_BUCKETS 64
/* A tuner's or estimate's simulation stays short (about a second here):
 * one past this is given up, and the tuner passes it over. */
#define TUNE_BUDGET (50ull * 1000 * 1000)

typedef struct {
    tacl__comm_ext_t ext;      /* comm->ext[TACL__EXT_TUNE] */
    tacl__sim_cluster_t cluster;
    /* The tuner's pick per collective and bucket, NULL unknown. */
    const tacl__algo_t *pick[TACL_NUM_COLLS][TUNE_BUCKETS];
} tune_t;

static void tune_free(tacl__comm_ext_t *ext)
{
    tune_t *t = (tune_t *)ext;

    tacl__sim_cluster_fini(&t->cluster);
    free(t);
}

static tacl_status_t tune_get(tacl_comm_t comm, tune_t **tune_p)
{
    tacl__ctx_t *ctx = comm->x.ctx;
    tune_t *t = tacl__comm_ext(comm, TACL__EXT_TUNE);
    int *node;
    tacl_status_t status;

    if (t != NULL) {
        *tune_p = t;
        return TACL_OK;
    }
    t = calloc(1, sizeof(*t));
    node = malloc((size_t)comm->size * sizeof(int));
    if (t == NULL || node == NULL) {
        free(t);
        free(node);
        return tacl__error(TACL_ERR_NO_MEMORY, TUNE, "out of memory");
    }
    for (int r = 0; r < comm->size; r++)
        node[r] = ctx->node_of[comm->x.world[r]];
    status = tacl__sim_cluster_init(&t->cluster, &ctx->topo, comm->size,
                                    node, node);
    free(node);
    if (status != TACL_OK) {
        free(t);
        return status;
    }
    t->cluster.watch = comm->rank;
    t->cluster.budget = TUNE_BUDGET;
    t->ext.free = tune_free;
    comm->ext[TACL__EXT_TUNE] = &t->ext;
    *tune_p = t;
    return TACL_OK;
}

tacl_status_t tacl__tune_cluster(tacl_comm_t comm,
                                 tacl__sim_cluster_t **cluster_p)
{
    tune_t *t = NULL;
    tacl_status_t status = tune_get(comm, &t);

    if (status != TACL_OK)
        return status;
    /* The fast engine as the communicator has it now. */
    t->cluster.fast_max = comm->view.fast_max;
    *cluster_p = &t->cluster;
    return TACL_OK;
}

static int tune_bucket(const tacl__coll_args_t *a)
{
    uint64_t bytes = tacl__algo_bytes(a);
    int b = 0;

    while (bytes > 1 && b < TUNE_BUCKETS - 1) {
        bytes >>= 1;
        b++;
    }
    return b;
}

const tacl__algo_t *tacl__tune_sim_pick(tacl_comm_t comm,
                                        const tacl__coll_args_t *a)
{
    const tacl__algo_t **slot, *best = NULL;
    tacl__sim_result_t res;
    tune_t *t = NULL;

    /* The config table's word list "model|sim": 1 is sim, in any case. */
    if (tacl__config_word(TACL_CFG_TUNER) != 1 || a->qbits != 0 ||
        (a->type != TACL_COLL_ALLGATHER &&
         a->type != TACL_COLL_REDUCE_SCATTER &&
         a->type != TACL_COLL_ALLREDUCE))
        return NULL;
    if (tune_get(comm, &t) != TACL_OK) {
        TACL_WARN(TUNE, "TACL_TUNER=sim: no cluster to simulate (%s); "
                  "using the cost model", tacl__last_error());
        return NULL;
    }
    slot = &t->pick[a->type][tune_bucket(a)];
    if (*slot == NULL) {
        if (tacl__sim_best(&t->cluster, a, &best, &res) != TACL_OK ||
            best == NULL) {
            TACL_WARN(TUNE, "TACL_TUNER=sim: simulation failed (%s); "
                      "using the cost model", tacl__last_error());
            return NULL;
        }
        *slot = best;
        TACL_INFO(TUNE, "%s of %zu elements: %s by simulation (%.3g us)",
                  tacl_coll_name(a->type), a->count, best->name,
                  res.seconds * 1e6);
    }
    return *slot;
}
