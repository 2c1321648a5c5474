/*
 * The small-message fast path's API side (executor/fastpath.h runs the
 * collectives): which calls take it, and the area each communicator
 * creates, collectively, at its first such call.
 *
 * A call takes it when it is a blocking all-reduce, all-gather,
 * reduce-scatter, broadcast, reduce or barrier outside a group, exact
 * (not quantized), on host memory, with TACL_CHECK off for the
 * communicator and no TACL_ALGO spec, on a communicator of 2 to
 * TACL__FAST_MAX_RANKS ranks all of which this rank reaches through the
 * shm transport, and what one rank puts in (all-reduce, all-gather,
 * reduce, broadcast: the message; reduce-scatter: the whole send buffer)
 * is at most the area's TACL_FAST_MAX bytes.  Every input of that
 * decision is the same on every rank, so the ranks take the fast path for
 * the same calls: TACL_FAST_MAX is rank 0's (it creates the area with
 * slots of that size, and the others read the size from the area; a rank
 * whose own value differs says so at WARN), and TACL_ALGO and TACL_CHECK
 * must agree between ranks on every path.  The area is made at the first
 * call that may take the fast path whatever its size (a size test before
 * the area exists would use each rank's own TACL_FAST_MAX).  Non-blocking
 * calls, groups and coalesced calls keep the normal path.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "comm.h"
#include "config.h"
#include "device.h"
#include "dtype.h"
#include "fastpath.h"
#include "log.h"

enum { FAST_UNKNOWN = 0, FAST_OFF = -1, FAST_NEEDS_AREA = 1, FAST_ON = 2 };

/* The transport index that reaches comm's peers, or -1 when it is not shm
 * for every one of them. */
static int shm_index(tacl_comm_t comm)
{
    tacl__ctx_t *ctx = comm->x.ctx;
    int tl = -1;

    for (int r = 0; r < comm->size; r++) {
        int t;

        if (r == comm->rank)
            continue;
        t = ctx->tl_of[comm->x.world[r]];
        if (t < 0 || ctx->tls[t]->ops != &tacl__tl_shm_ops ||
            (tl >= 0 && t != tl))
            return -1;
        tl = t;
    }
    return tl;
}

/* Decide once per communicator whether its calls may use an area (the
 * same on every rank: the topology decides, not this rank's settings). */
static void decide(tacl_comm_t comm)
{
    comm->fast_tl = comm->size >= 2 && comm->size <= TACL__FAST_MAX_RANKS
                        ? shm_index(comm)
                        : -1;
    comm->fast_state = comm->fast_tl >= 0 ? FAST_NEEDS_AREA : FAST_OFF;
}

/* What each rank says after mapping the area. */
typedef struct {
    uint64_t max;              /* its own TACL_FAST_MAX (capped) */
    int32_t ok;                /* it mapped the area */
    int32_t light;             /* tacl__fast_light_ready() */
} fast_vote_t;

/*
 * Create the area (rank 0) and map it (the others): two small all-gathers
 * on the normal path, with the sequence numbers the caller reserved.  Any
 * rank failing turns the fast path off on every rank (the calls go the
 * normal way); only a failed exchange is an error.
 */
static tacl_status_t make_area(tacl_comm_t comm, uint64_t seq)
{
    char name[TACL__FAST_NAME_LEN] = "";
    char (*names)[TACL__FAST_NAME_LEN] = NULL;
    fast_vote_t vote = {0}, *votes = NULL;
    int all_ok = 1, all_light = 1;
    tacl__fast_t *fast = NULL;
    tacl_status_t status;

    vote.max = TACL_MIN(tacl__config_size(TACL_CFG_FAST_MAX),
                        TACL__FAST_CAP_MAX);
    names = calloc((size_t)comm->size, sizeof(*names));
    votes = calloc((size_t)comm->size, sizeof(*votes));
    if (names == NULL || votes == NULL) {
        status = tacl__error(TACL_ERR_NO_MEMORY, COLL, "out of memory");
        goto out;
    }
    /* Rank 0's TACL_FAST_MAX of 0 turns the fast path off everywhere
     * (no name goes out). */
    if (comm->rank == 0 && vote.max > 0 &&
        tacl__fast_create(0, comm->size, vote.max, name, &fast) != TACL_OK)
        TACL_INFO(COLL, "rank 0: no fast-path area (%s); small collectives "
                  "take the normal path", tacl__last_error());
    status = tacl__comm_allgather_small(comm, seq, name, names,
                                        sizeof(name));
    if (status != TACL_OK)
        goto out;
    if (comm->rank != 0 && names[0][0] != '\0') {
        names[0][TACL__FAST_NAME_LEN - 1] = '\0';
        if (tacl__fast_attach(names[0], comm->rank, comm->size, &fast) !=
            TACL_OK)
            TACL_INFO(COLL, "rank %d: cannot map the fast-path area (%s)",
                      comm->rank, tacl__last_error());
    }
    vote.ok = fast != NULL;
    vote.light = fast != NULL && tacl__fast_light_ready();
    status = tacl__comm_allgather_small(comm, seq + 1, &vote, votes,
                                        sizeof(vote));
    if (status != TACL_OK)
        goto out;
    for (int r = 0; r < comm->size; r++) {
        all_ok &= votes[r].ok != 0;
        all_light &= votes[r].light != 0;
    }
    if (votes[0].max != vote.max)
        TACL_WARN(COLL, "rank %d: TACL_FAST_MAX is %llu here but %llu on "
                  "rank 0; rank 0's value applies to every rank (set it "
                  "alike everywhere)", comm->rank,
                  (unsigned long long)vote.max,
                  (unsigned long long)votes[0].max);
    /* Every rank mapped it or gave up: the name can go. */
    tacl__fast_unlink(fast);
    if (all_ok) {
        comm->fast_max = tacl__fast_cap(fast);
        tacl__fast_set_light(fast, all_light);
        comm->fast = fast;
        fast = NULL;
        comm->fast_state = FAST_ON;
    } else {
        comm->fast_state = FAST_OFF;
    }
out:
    tacl__fast_free(fast);
    free(names);
    free(votes);
    return status;
}

/* The collectives the fast path runs. */
static int fast_coll(tacl_coll_t type)
{
    return type == TACL_COLL_ALLREDUCE || type == TACL_COLL_ALLGATHER ||
           type == TACL_COLL_REDUCE_SCATTER || type == TACL_COLL_BROADCAST ||
           type == TACL_COLL_REDUCE || type == TACL_COLL_BARRIER;
}

/*
 * The owner thread's last few distinct fast-path calls (comm.h): their
 * arguments, which passed validation, and what they make.  With no
 * usable CUDA device (decided once per process) validation is a function
 * of the arguments and the context's failure alone, so the same
 * arguments again, the context not failed, need no validation; and the
 * decision to take the fast path depends on them and on the settings
 * fast_ready() reads each time.  A few, so that a loop alternating two
 * or three calls (in and out of place, a loss and a metric) hits.
 */
#define FAST_MEMOS 4

typedef struct {
    tacl_coll_t type;    /* TACL_NUM_COLLS: empty */
    const void *sendbuf;
    void *recvbuf;
    size_t count;
    tacl_dtype_t dtype;
    tacl_op_t op;
    int root;
    tacl__fast_op_t fop;
    tacl__flight_op_t rec;     /* the flight record, but its seq */
} fast_memo_entry_t;

struct tacl__fast_memo {
    fast_memo_entry_t e[FAST_MEMOS];
    int last;                  /* the entry hit or made last */
    int next;                  /* the one to replace (the oldest made) */
};

static int memo_matches(const fast_memo_entry_t *m,
                        const tacl__coll_args_t *a)
{
    return a->type == m->type && a->sendbuf == m->sendbuf &&
           a->recvbuf == m->recvbuf && a->count == m->count &&
           a->dtype == m->dtype && a->op == m->op && a->root == m->root;
}

/* What may change between two calls of the same arguments: a failure
 * (validation reports it), TACL_CHECK for the communicator, an open
 * group, a TACL_ALGO spec (the configuration may be reloaded). */
static int fast_ready(tacl_comm_t comm)
{
    return comm->x.ctx->fatal == TACL_OK && !comm->check &&
           !tacl__group_active() &&
           tacl__config_str(TACL_CFG_ALGO)[0] == '\0';
}

/* Run the fast-path call op (arguments a, flight record rec) on comm: its
 * one round trip of the context lock, then the collective. */
static tacl_status_t fast_call(tacl_comm_t comm, tacl__coll_args_t *a,
                               const tacl__fast_op_t *op,
                               const tacl__flight_op_t *rec)
{
    tacl__ctx_t *ctx = comm->x.ctx;
    uint64_t ord = UINT64_MAX;
    tacl_status_t status;

    pthread_mutex_lock(&ctx->lock);
    tacl__ctx_flight_poll(ctx);
    a->seq = comm->seq++ % TACL__SEQ_HALF;
    tacl__fast_count(&comm->x, comm->fast_tl, op, comm->rank, comm->size);
    if (memcmp(comm->last_algo, "fast", 5) != 0)
        snprintf(comm->last_algo, sizeof(comm->last_algo), "fast");
    if (comm->x.flight.cap > 0) {
        tacl__flight_op_t r = *rec;

        r.seq = a->seq;
        ord = tacl__flight_open(&comm->x.flight, &r);
    }
    pthread_mutex_unlock(&ctx->lock);
    status = tacl__fast_run(comm->fast, &comm->x, op);
    /* Without the lock: the record's end is two atomic stores. */
    tacl__flight_end(&comm->x.flight, ord, status);
    return status;
}

/* Remember a (validated, about to run as op) among the owner's last
 * calls, in place of the oldest. */
static void fast_remember(tacl_comm_t comm, const tacl__coll_args_t *a,
                          const tacl__fast_op_t *op)
{
    struct tacl__fast_memo *memo = comm->fast_memo;
    fast_memo_entry_t *m;

    if (!tacl__comm_is_owner(comm) || tacl__dev_usable())
        return;
    if (memo == NULL) {
        memo = calloc(1, sizeof(*memo));
        if (memo == NULL)
            return; /* it only saves time */
        for (int i = 0; i < FAST_MEMOS; i++)
            memo->e[i].type = TACL_NUM_COLLS;
        comm->fast_memo = memo;
    }
    memo->last = memo->next;
    memo->next = (memo->next + 1) % FAST_MEMOS;
    m = &memo->e[memo->last];
    m->type = a->type;
    m->sendbuf = a->sendbuf;
    m->recvbuf = a->recvbuf;
    m->count = a->count;
    m->dtype = a->dtype;
    m->op = a->op;
    m->root = a->root;
    m->fop = *op;
    tacl__flight_op_of(comm, a, 1, &m->rec);
    m->rec.algo = "fast";
}

int tacl__fast_again(tacl_comm_t comm, tacl__coll_args_t *a,
                     tacl_status_t *status_p)
{
    struct tacl__fast_memo *memo;
    const fast_memo_entry_t *m = NULL;

    /* The owner check first: only the owner touches the memo. */
    if (!tacl__comm_is_owner(comm) || (memo = comm->fast_memo) == NULL ||
        a->qbits != 0)
        return 0;
    /* The latest first, then back in time. */
    for (int k = 0, i = memo->last; k < FAST_MEMOS && m == NULL; k++) {
        if (memo_matches(&memo->e[i], a)) {
            m = &memo->e[i];
            memo->last = i;
        }
        i = (i + FAST_MEMOS - 1) % FAST_MEMOS;
    }
    if (m == NULL || !fast_ready(comm))
        return 0;
    a->memtype = TACL_MEM_HOST;
    *status_p = fast_call(comm, a, &m->fop, &m->rec);
    return 1;
}

int tacl__fast_try(tacl_comm_t comm, tacl__coll_args_t *a,
                   tacl_status_t *status_p)
{
    tacl__ctx_t *ctx = comm->x.ctx;
    tacl__flight_op_t rec;
    tacl__fast_op_t op;

    if (comm->fast_state == FAST_OFF || !fast_coll(a->type) ||
        a->qbits != 0 || a->memtype != TACL_MEM_HOST || !fast_ready(comm))
        return 0;
    if (comm->fast_state == FAST_UNKNOWN)
        decide(comm);
    if (comm->fast_state == FAST_NEEDS_AREA) {
        uint64_t seq;

        pthread_mutex_lock(&ctx->lock);
        seq = comm->seq;
        comm->seq += 2;
        pthread_mutex_unlock(&ctx->lock);
        *status_p = make_area(comm, seq);
        if (*status_p != TACL_OK)
            return 1;
    }
    op = tacl__fast_op_of(a);
    if (comm->fast_state != FAST_ON ||
        tacl__fast_msg_bytes(&op, comm->size) > comm->fast_max)
        return 0;
    fast_remember(comm, a, &op);
    tacl__flight_op_of(comm, a, 1, &rec);
    rec.algo = "fast";
    *status_p = fast_call(comm, a, &op, &rec);
    return 1;
}

void tacl__fast_comm_free(tacl_comm_t comm)
{
    free(comm->fast_memo);
    comm->fast_memo = NULL;
    tacl__fast_free(comm->fast);
    comm->fast = NULL;
    comm->fast_state = FAST_OFF;
}
