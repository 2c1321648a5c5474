/*
 * Every rank's counts of an all-to-all-v on several nodes (comm.h).
 *
 * A call of the hierarchical all-to-all-v (algorithms/hier_v.c) relays
 * other ranks' blocks, whose sizes only their senders' tables hold, and
 * the decider prices the flat and hierarchical rows on every rank and
 * must answer alike everywhere.  So before such a call is built its
 * ranks all-gather their send counts (n of them each, the library's own
 * small all-gather, on a sequence number the call reserved with its
 * own), and the builders and costs read the whole matrix.  On one node
 * only the flat row serves, and nothing is gathered.
 */
#include <stdlib.h>

#include "common.h"
#include "comm.h"
#include "log.h"

int tacl__vmatrix_wanted(tacl_comm_t comm, const tacl__coll_args_t *a)
{
    return a->type == TACL_COLL_ALLTOALLV && a->v != NULL &&
           comm->view.n_nodes > 1;
}

tacl_status_t tacl__vmatrix_gather(tacl_comm_t comm, tacl__op_t *op)
{
    size_t n = (size_t)comm->size;
    uint64_t *mine = malloc(n * sizeof(*mine));
    uint64_t *all = malloc(n * n * sizeof(*all));
    tacl__vcounts_t *with = NULL;
    tacl_status_t status = TACL_OK;

    if (mine == NULL || all == NULL) {
        status = tacl__error(TACL_ERR_NO_MEMORY, COLL,
                             "alltoallv: out of memory for the counts of "
                             "%zu ranks", n);
        goto out;
    }
    for (size_t j = 0; j < n; j++)
        mine[j] = op->args.v->send[j];
    status = tacl__comm_allgather_small(comm, op->vseq % TACL__SEQ_HALF,
                                        mine, all, n * sizeof(*all));
    if (status != TACL_OK)
        goto out;
    with = tacl__vcounts_with(op->args.v, all);
    if (with == NULL) {
        status = tacl__error(TACL_ERR_NO_MEMORY, COLL,
                             "alltoallv: out of memory for the counts of "
                             "%zu ranks", n);
        goto out;
    }
    op->args.v = with;
out:
    free(mine);
    free(all);
    return status;
}
