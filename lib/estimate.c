/*
 * Estimates without running (tacl_comm_estimate): the decider's answer
 * for a blocking call alone (tacl__choose, as the real call asks it),
 * simulated on the communicator's cluster (tune_sim.c), every rank's
 * schedule built as that answer says; the fast engine priced by its
 * row's model.  Nothing is sent: the fast engine's area was made with the
 * communicator, so the estimate sees the size the real call does.
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

static tacl_status_t estimate(tacl_comm_t comm, tacl_coll_t coll,
                              size_t count, tacl_dtype_t dtype, tacl_op_t op,
                              int root, tacl_sim_info_t *info_p)
{
    tacl__coll_args_t a;

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
    return tacl__estimate_args(comm, &a, info_p);
}

tacl_status_t tacl__estimate_args(tacl_comm_t comm, tacl__coll_args_t *args,
                                  tacl_sim_info_t *info_p)
{
    tacl__sim_cluster_t *cluster;
    tacl__algo_force_t one;
    tacl__coll_args_t a = *args;
    tacl__choice_t choice;
    tacl__sim_result_t res;
    tacl_status_t status;

    a.memtype = TACL_MEM_HOST;
    tacl__coll_mark(&a);
    pthread_mutex_lock(&comm->x.ctx->lock);
    status = tacl__choose(comm, &a, TACL__CHOOSE_ALONE, &choice);
    if (status == TACL_OK)
        status = tacl__tune_cluster(comm, &cluster);
    /* Every rank of the simulation runs the row chosen here. */
    if (status == TACL_OK) {
        tacl__algo_force_one(&one, choice.algo);
        status = tacl__sim_run(cluster, &a, &one,
                               choice.engine == TACL__ENGINE_FAST
                                   ? TACL__CHOOSE_ALONE
                                   : 0,
                               &res);
    }
    pthread_mutex_unlock(&comm->x.ctx->lock);
    if (status != TACL_OK)
        return status;
    memset(info_p, 0, sizeof(*info_p));
    info_p->seconds = res.seconds;
    snprintf(info_p->algorithm, sizeof(info_p->algorithm), "%s",
             res.algo != NULL ? res.algo->name : "");
    snprintf(info_p->engine, sizeof(info_p->engine), "%s",
             tacl__engine_name(res.choice.engine));
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
