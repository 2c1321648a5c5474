/*
 * Group calls.  Between tacl_group_start() and the matching
 * tacl_group_end() operations are recorded per thread; the outermost end
 * builds one schedule per communicator holding all of that communicator's
 * operations and starts them together.  Since every step whose
 * dependencies are met starts at once, the sends and receives of a group
 * are all posted before anything waits, so no posting order deadlocks.
 */
#include <stdlib.h>

#include "common.h"
#include "comm.h"
#include "log.h"

typedef struct {
    int depth;
    tacl__op_t *ops;
    int nops, cap;
} group_state_t;

static __thread group_state_t group;

int tacl__group_active(void)
{
    return group.depth > 0;
}

tacl_status_t tacl__group_add(const tacl__op_t *op)
{
    if (group.nops == group.cap) {
        int cap = group.cap ? group.cap * 2 : 16;
        tacl__op_t *ops = realloc(group.ops, (size_t)cap * sizeof(*ops));
        if (ops == NULL)
            return tacl__error(TACL_ERR_NO_MEMORY, COLL,
                               "out of memory recording a group call");
        group.ops = ops;
        group.cap = cap;
    }
    group.ops[group.nops] = *op;
    /* A variable-count call's table is the caller's until it returns:
     * the record keeps a copy until the group ends. */
    if (op->args.v != NULL) {
        group.ops[group.nops].args.v = tacl__vcounts_dup(op->args.v);
        if (group.ops[group.nops].args.v == NULL)
            return tacl__error(TACL_ERR_NO_MEMORY, COLL,
                               "out of memory recording a group call");
    }
    group.nops++;
    return TACL_OK;
}

int tacl__group_checked(tacl_comm_t comm)
{
    for (int i = 0; i < group.nops; i++)
        if (group.ops[i].comm == comm && group.ops[i].checked)
            return 1;
    return 0;
}

TACL_EXPORT tacl_status_t tacl_group_start(void)
{
    tacl__last_error_clear();
    group.depth++;
    return TACL_OK;
}

static void group_clear(void)
{
    for (int i = 0; i < group.nops; i++)
        tacl__vcounts_free((tacl__vcounts_t *)group.ops[i].args.v);
    free(group.ops);
    group.ops = NULL;
    group.nops = group.cap = 0;
}

/* TACL_CHECK: one signature exchange for comm's part of the group. */
static tacl_status_t check_batch(tacl_comm_t comm, const tacl__op_t *batch,
                                 int n)
{
    for (int i = 0; i < n; i++) {
        if (batch[i].checked) {
            uint64_t seq_next;

            pthread_mutex_lock(&comm->x.ctx->lock);
            seq_next = comm->seq;
            pthread_mutex_unlock(&comm->x.ctx->lock);
            return tacl__check_call(comm, batch, n, batch[i].check_seq,
                                    seq_next);
        }
    }
    return TACL_OK;
}

/*
 * The all-to-all-v calls of a batch on several nodes: every rank's
 * counts (vmatrix.c), each op's args.v then a table of the batch's own.
 * An op that gathered nothing has its vseq set to UINT64_MAX.  status:
 * the check's verdict; after a failure nothing is gathered.
 */
static tacl_status_t gather_counts(tacl_comm_t comm, tacl__op_t *batch,
                                   int n, tacl_status_t status)
{
    for (int i = 0; i < n; i++) {
        if (!batch[i].vgather)
            continue;
        if (status == TACL_OK)
            status = tacl__vmatrix_gather(comm, &batch[i]);
        if (status != TACL_OK)
            batch[i].vseq = UINT64_MAX;
    }
    return status;
}

/* Start one schedule per communicator; execs gets one entry each;
 * waited: the caller waits for them (a blocking end). */
static tacl_status_t group_launch(int waited, tacl__exec_t **execs,
                                  int *nexec_p)
{
    tacl_status_t status = TACL_OK;
    int nexec = 0;
    int *taken = calloc((size_t)group.nops + 1, sizeof(int));
    tacl__op_t *batch = malloc(((size_t)group.nops + 1) * sizeof(*batch));

    if (taken == NULL || batch == NULL) {
        status = tacl__error(TACL_ERR_NO_MEMORY, COLL, "out of memory");
        goto out;
    }
    for (int i = 0; i < group.nops && status == TACL_OK; i++) {
        tacl_comm_t comm = group.ops[i].comm;
        int n = 0;

        if (taken[i])
            continue;
        for (int j = i; j < group.nops; j++) {
            if (!taken[j] && group.ops[j].comm == comm) {
                batch[n++] = group.ops[j];
                taken[j] = 1;
            }
        }
        status = tacl__comm_enter(comm);
        if (status != TACL_OK)
            break;
        status = check_batch(comm, batch, n);
        status = gather_counts(comm, batch, n, status);
        if (status == TACL_OK) {
            pthread_mutex_lock(&comm->x.ctx->lock);
            status = tacl__ops_start(comm, batch, n, waited, &execs[nexec]);
            pthread_mutex_unlock(&comm->x.ctx->lock);
        }
        /* Built: the gathered counts are needed no more. */
        for (int j = 0; j < n; j++)
            if (batch[j].vgather && batch[j].vseq != UINT64_MAX)
                tacl__vcounts_free((tacl__vcounts_t *)batch[j].args.v);
        if (status == TACL_OK)
            nexec++;
        else
            tacl__comm_fail(comm, status);
        tacl__comm_leave(comm);
    }
out:
    free(taken);
    free(batch);
    *nexec_p = nexec;
    return status;
}

/* Hand the executions on caller streams to their contexts; returns how
 * many others are left at the front of execs. */
static int detach_streamed(tacl__exec_t **execs, int nexec)
{
    int kept = 0;

    for (int i = 0; i < nexec; i++) {
        if (tacl__exec_streamed(execs[i]))
            tacl__exec_detach(execs[i]);
        else
            execs[kept++] = execs[i];
    }
    return kept;
}

/*
 * A blocking end of a group holding one collective (what c10d's blocking
 * calls and NCCL users' wrapped calls make): the call alone, which the
 * fast engine may take.  Returns 1 when it did (*status_p its result).
 */
static int group_fast(tacl_status_t *status_p)
{
    tacl__op_t *op = &group.ops[0];
    int taken;

    if (group.nops != 1 || op->stream != NULL || op->checked ||
        tacl__coll_p2p(op->args.type))
        return 0;
    *status_p = tacl__comm_enter(op->comm);
    if (*status_p != TACL_OK)
        return 1;
    taken = tacl__fast_take(op->comm, &op->args, NULL, status_p);
    if (taken)
        tacl__comm_fail(op->comm, *status_p);
    tacl__comm_leave(op->comm);
    return taken;
}

static tacl_status_t group_end(tacl_request_t *req_p)
{
    tacl__exec_t **execs;
    tacl_status_t status, wait_status;
    int nexec = 0;

    tacl__last_error_clear();
    if (group.depth == 0)
        return tacl__error(TACL_ERR_INVALID_USAGE, COLL,
                           "tacl_group_end without tacl_group_start");
    if (--group.depth > 0) {
        if (req_p != NULL)
            *req_p = NULL;
        return TACL_OK;
    }
    if (req_p == NULL && group_fast(&status)) {
        group_clear();
        return status;
    }
    execs = calloc((size_t)group.nops + 1, sizeof(*execs));
    if (execs == NULL) {
        group_clear();
        return tacl__error(TACL_ERR_NO_MEMORY, COLL, "out of memory");
    }
    status = group_launch(req_p == NULL, execs, &nexec);
    group_clear();
    if (status == TACL_OK && req_p != NULL) {
        status = tacl__request_create(execs, nexec, req_p);
        if (status == TACL_OK) {
            free(execs);
            return TACL_OK;
        }
    }
    /* Blocking end, or a failure: what started must finish first, but
     * for what runs on a caller's stream (NCCL's group on streams). */
    if (status == TACL_OK)
        nexec = detach_streamed(execs, nexec);
    wait_status = tacl__exec_wait(execs, nexec);
    if (status == TACL_OK)
        status = wait_status;
    for (int i = 0; i < nexec; i++) {
        /* Each communicator of the group keeps the message, as its own
         * calls do (the launch already recorded a failure to start). */
        if (wait_status != TACL_OK)
            tacl__comm_fail(tacl__comm_of(tacl__exec_xcomm(execs[i])),
                            wait_status);
        tacl__exec_free(execs[i]);
    }
    free(execs);
    return status;
}

TACL_EXPORT tacl_status_t tacl_group_end(void)
{
    return group_end(NULL);
}

TACL_EXPORT tacl_status_t tacl_group_end_nb(tacl_request_t *req_p)
{
    if (req_p == NULL)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL, "req_p is NULL");
    return group_end(req_p);
}
