/*
 * Estimates without running (tacl_comm_estimate) and the simulation
 * tuner (TACL_TUNER=sim), both on the simulator of sim/sim.h.
 *
 * A communicator's cluster is made once, on first use, from its
 * context's topology (what was detected, or TACL_TOPO_FILE) and its
 * ranks' nodes.  The sim tuner simulates every candidate algorithm of a
 * collective at the first size it sees in each power-of-two bucket of
 * bytes and keeps the fastest for the bucket: every rank computes the
 * same choice from the same inputs, with no message.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "common.h"
#include "config.h"
#include "log.h"
#include "sim.h"

#define EST_BUCKETS 64
#define EST_BUDGET (50ull * 1000 * 1000)

struct tacl__est {
    tacl__sim_cluster_t cluster;
    /* The sim tuner's choice per collective and bucket, "" unknown. */
    char choice[TACL_NUM_COLLS][EST_BUCKETS][16];
};

void tacl__est_free(tacl_comm_t comm)
{
    if (comm->est == NULL)
        return;
    tacl__sim_cluster_fini(&comm->est->cluster);
    free(comm->est);
    comm->est = NULL;
}

/* comm's cluster, made on first use. */
static tacl_status_t est_get(tacl_comm_t comm, struct tacl__est **est_p)
{
    tacl__ctx_t *ctx = comm->x.ctx;
    struct tacl__est *est;
    int *node = NULL;
    tacl_status_t status;

    if (comm->est != NULL) {
        *est_p = comm->est;
        return TACL_OK;
    }
    est = calloc(1, sizeof(*est));
    node = malloc((size_t)comm->size * sizeof(int));
    if (est == NULL || node == NULL) {
        free(est);
        free(node);
        return tacl__error(TACL_ERR_NO_MEMORY, TUNE, "out of memory");
    }
    for (int r = 0; r < comm->size; r++)
        node[r] = ctx->node_of[comm->x.world[r]];
    status = tacl__sim_cluster_init(&est->cluster, &ctx->topo, comm->size,
                                    node, node);
    free(node);
    if (status != TACL_OK) {
        free(est);
        return status;
    }
    est->cluster.watch = comm->rank;
    /* A tuner's or estimate's simulation stays short (about a second
     * here): one past this is given up, and the tuner passes it over. */
    est->cluster.budget = EST_BUDGET;
    comm->est = est;
    *est_p = est;
    return TACL_OK;
}

static int est_bucket(const tacl__coll_args_t *a)
{
    uint64_t bytes = (uint64_t)a->count * tacl_dtype_size(a->dtype);
    int b = 0;

    while (bytes > 1 && b < EST_BUCKETS - 1) {
        bytes >>= 1;
        b++;
    }
    return b;
}

const char *tacl__tuner_spec(tacl_comm_t comm, const tacl__coll_args_t *a,
                             const char *spec, char *buf, size_t len)
{
    struct tacl__est *est;
    const tacl__algo_t *best = NULL;
    tacl__sim_result_t res;
    char *slot;

    /* The config table's word list "model|sim": 1 is sim, in any case. */
    if (tacl__config_word(TACL_CFG_TUNER) != 1 ||
        a->qbits != 0 || (a->type != TACL_COLL_ALLGATHER &&
                          a->type != TACL_COLL_REDUCE_SCATTER &&
                          a->type != TACL_COLL_ALLREDUCE))
        return spec;
    if (est_get(comm, &est) != TACL_OK) {
        TACL_WARN(TUNE, "TACL_TUNER=sim: no cluster to simulate (%s); "
                  "using the cost model", tacl__last_error());
        return spec;
    }
    slot = est->choice[a->type][est_bucket(a)];
    if (slot[0] == '\0') {
        if (tacl__sim_best(&est->cluster, a, &best, &res) != TACL_OK ||
            best == NULL) {
            TACL_WARN(TUNE, "TACL_TUNER=sim: simulation failed (%s); "
                      "using the cost model", tacl__last_error());
            return spec;
        }
        snprintf(slot, sizeof(est->choice[0][0]), "%s", best->name);
        TACL_INFO(TUNE, "%s of %zu elements: %s by simulation (%.3g us)",
                  tacl_coll_name(a->type), a->count, slot,
                  res.seconds * 1e6);
    }
    /* The last item for a collective wins: the user's, if any.  A spec
     * too long to prefix is left as the user wrote it. */
    if ((size_t)snprintf(buf, len, "%s=%s,%s", tacl_coll_name(a->type),
                         slot, spec != NULL ? spec : "") >= len)
        return spec;
    return buf;
}

static tacl_status_t estimate(tacl_comm_t comm, tacl_coll_t coll,
                              size_t count, tacl_dtype_t dtype, tacl_op_t op,
                              int root, tacl_sim_info_t *info_p)
{
    struct tacl__est *est;
    tacl__coll_args_t a;
    tacl__sim_result_t res;
    char buf[256];
    const char *spec;
    tacl_status_t status;

    if (info_p == NULL)
        return tacl__error(TACL_ERR_INVALID_ARG, TUNE,
                           "tacl_comm_estimate: info_p is NULL");
    if ((unsigned)coll >= TACL_NUM_COLLS)
        return tacl__error(TACL_ERR_INVALID_ARG, TUNE,
                           "tacl_comm_estimate: coll %d is not a "
                           "tacl_coll_t", (int)coll);
    if (tacl__coll_p2p(coll))
        return tacl__error(TACL_ERR_INVALID_ARG, TUNE,
                           "tacl_comm_estimate: %s is point-to-point; "
                           "estimates are of collectives",
                           tacl_coll_name(coll));
    if ((unsigned)dtype >= TACL_NUM_DTYPES)
        return tacl__error(TACL_ERR_INVALID_ARG, TUNE,
                           "tacl_comm_estimate: dtype %d is not a "
                           "tacl_dtype_t", (int)dtype);
    if ((unsigned)op >= TACL_NUM_OPS)
        return tacl__error(TACL_ERR_INVALID_ARG, TUNE,
                           "tacl_comm_estimate: op %d is not a tacl_op_t",
                           (int)op);
    if (tacl__coll_rooted(coll) &&
        (root < 0 || root >= comm->size))
        return tacl__error(TACL_ERR_INVALID_ARG, TUNE,
                           "tacl_comm_estimate: root %d is not a rank of "
                           "this communicator (size %d)", root, comm->size);
    memset(&a, 0, sizeof(a));
    a.type = coll;
    a.count = count;
    a.dtype = dtype;
    a.op = op;
    a.root = root;
    a.memtype = TACL_MEM_HOST;
    a.chunk_bytes = (uint64_t)tacl__config_int(TACL_CFG_CHUNK_SIZE);
    a.shm_map = tacl__config_int(TACL_CFG_SHM_MAP) != 0;
    pthread_mutex_lock(&comm->x.ctx->lock);
    status = est_get(comm, &est);
    spec = tacl__tuner_spec(comm, &a, tacl__config_str(TACL_CFG_ALGO), buf,
                            sizeof(buf));
    if (status == TACL_OK)
        status = tacl__sim_run(&est->cluster, &a, spec, &res);
    pthread_mutex_unlock(&comm->x.ctx->lock);
    if (status != TACL_OK)
        return status;
    memset(info_p, 0, sizeof(*info_p));
    info_p->seconds = res.seconds;
    snprintf(info_p->algorithm, sizeof(info_p->algorithm), "%s",
             res.algo != NULL ? res.algo->name : "");
    for (int k = 0; k < TACL_NUM_LINK_CLASSES; k++) {
        info_p->bytes[k] = res.watch_bytes[k];
        info_p->messages[k] = res.watch_msgs[k];
    }
    return TACL_OK;
}

TACL_EXPORT tacl_status_t tacl_comm_estimate(tacl_comm_t comm,
                                             tacl_coll_t coll, size_t count,
                                             tacl_dtype_t dtype, tacl_op_t op,
                                             int root,
                                             tacl_sim_info_t *info_p)
{
    TACL__COMM_HELD(comm, tacl__comm_fail(comm, estimate(comm, coll, count,
                                                         dtype, op, root,
                                                         info_p)));
}
