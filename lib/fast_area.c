/*
 * The fast engine's API side (executor/fastpath.h runs the collectives):
 * each communicator's area, made collectively with the communicator, and
 * the owner thread's memo of its last calls.
 *
 * Which call takes the engine is the decider's answer (algorithms/
 * fast.c's rows, chosen by tacl__algo_choose for a call alone with
 * checking off, when no TACL_ALGO item names another row for it): an
 * all-reduce, all-gather, reduce-scatter, broadcast, reduce or barrier
 * outside a group (or a group's only blocking call), blocking or _nb, on
 * no stream, exact, on host memory, on a communicator of 2 to
 * TACL__FAST_MAX_RANKS ranks all of which this rank reaches through a
 * transport whose peers map one another's memory, whose input (the whole
 * send buffer of a reduce-scatter) is at most the area's TACL_FAST_MAX
 * bytes.  Every input of that answer is the same on every rank, so the
 * ranks take the engine for the same calls: TACL_FAST_MAX is rank 0's
 * (it creates the area with slots of that size, and the others read the
 * size from the area; a rank whose own value differs says so at WARN),
 * and TACL_ALGO and TACL_CHECK must agree between ranks on every path.
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

/*
 * The owner thread's last few distinct fast-engine calls: their
 * arguments as the caller gave them, which passed validation, and what
 * they make.  With no usable CUDA device (decided once per process)
 * validation is a function of the arguments and the context's failure
 * alone, so the same arguments again, the context not failed, need no
 * validation; and the decider's answer depends on them and on what
 * fast_ready() reads each time.  A few, so that a loop alternating two
 * or three calls (in and out of place, a loss and a metric) hits.
 */
#define FAST_MEMOS 4

typedef struct {
    tacl_coll_t type;          /* TACL_NUM_COLLS: empty */
    const void *sendbuf;
    void *recvbuf;
    size_t count;
    tacl_dtype_t dtype;
    tacl_op_t op;
    int root;
    tacl__fast_op_t fop;
    tacl__flight_op_t rec;     /* the flight record, but its seq */
} fast_memo_entry_t;

enum { FAST_OFF = 0, FAST_ON };

typedef struct {
    tacl__comm_ext_t ext;      /* comm->ext[TACL__EXT_FAST] */
    int state;                 /* FAST_ON: the area is mapped */
    int tl;                    /* the transport index reaching the peers */
    tacl__fast_t *area;        /* FAST_ON: the area */
    unsigned gen;              /* the configuration load of the memo */
    fast_memo_entry_t memo[FAST_MEMOS]; /* the owner's only */
    int last;                  /* the entry hit or made last */
    int next;                  /* the one to replace (the oldest made) */
} fast_comm_t;

static void fast_comm_free(tacl__comm_ext_t *ext)
{
    fast_comm_t *fc = (fast_comm_t *)ext;

    tacl__fast_free(fc->area);
    free(fc);
}

/*
 * The transport index that reaches comm's peers, or -1 when not every
 * one of them is reached by one transport whose peers map one another's
 * memory.
 */
static int map_index(tacl_comm_t comm)
{
    tacl__ctx_t *ctx = comm->x.ctx;
    int tl = -1;

    for (int r = 0; r < comm->size; r++) {
        int t;

        if (r == comm->rank)
            continue;
        t = ctx->tl_of[comm->x.world[r]];
        if (t < 0 || !tacl__tl_can_map(ctx->tls[t]) || (tl >= 0 && t != tl))
            return -1;
        tl = t;
    }
    return tl;
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
 * rank failing turns the fast engine off on every rank (the calls go the
 * normal way); only a failed exchange is an error.
 */
static tacl_status_t make_area(tacl_comm_t comm, fast_comm_t *fc,
                               uint64_t seq)
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
    /* Rank 0's TACL_FAST_MAX of 0 turns the fast engine off everywhere
     * (no name goes out). */
    if (comm->rank == 0 && vote.max > 0 &&
        tacl__fast_create(0, comm->size, vote.max, name, &fast) != TACL_OK)
        TACL_INFO(COLL, "rank 0: no fast-engine area (%s); small "
                  "collectives take schedules", tacl__last_error());
    status = tacl__comm_allgather_small(comm, seq, name, names,
                                        sizeof(name));
    if (status != TACL_OK)
        goto out;
    if (comm->rank != 0 && names[0][0] != '\0') {
        names[0][TACL__FAST_NAME_LEN - 1] = '\0';
        if (tacl__fast_attach(names[0], comm->rank, comm->size, &fast) !=
            TACL_OK)
            TACL_INFO(COLL, "rank %d: cannot map the fast-engine area (%s)",
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
        tacl__fast_set_light(fast, all_light);
        comm->view.fast_max = tacl__fast_cap(fast);
        fc->area = fast;
        fast = NULL;
        fc->state = FAST_ON;
    } else {
        comm->view.fast_max = 0;
        fc->state = FAST_OFF;
    }
out:
    tacl__fast_free(fast);
    free(names);
    free(votes);
    return status;
}

/*
 * At creation, collectively: whether comm may have an area (2 to
 * TACL__FAST_MAX_RANKS ranks, every peer reached through one transport
 * whose peers map one another's memory: the same answer on every rank),
 * and the area itself, so that every later call, blocking or split, may
 * take the engine without an exchange of its own.
 */
tacl_status_t tacl__fast_comm_init(tacl_comm_t comm)
{
    fast_comm_t *fc;
    int tl = comm->size >= 2 && comm->size <= TACL__FAST_MAX_RANKS
                 ? map_index(comm)
                 : -1;
    tacl_status_t status;
    uint64_t seq;

    comm->view.fast_max = 0;
    if (tl < 0)
        return TACL_OK;
    fc = calloc(1, sizeof(*fc));
    if (fc == NULL)
        return tacl__error(TACL_ERR_NO_MEMORY, INIT, "out of memory");
    fc->ext.free = fast_comm_free;
    fc->tl = tl;
    fc->state = FAST_OFF;
    for (int i = 0; i < FAST_MEMOS; i++)
        fc->memo[i].type = TACL_NUM_COLLS;
    comm->ext[TACL__EXT_FAST] = &fc->ext;
    pthread_mutex_lock(&comm->x.ctx->lock);
    seq = comm->seq;
    comm->seq += 2;
    pthread_mutex_unlock(&comm->x.ctx->lock);
    status = make_area(comm, fc, seq);
    TACL_INFO(INIT, "rank %d: fast engine %s (%llu bytes per rank)",
              comm->rank, fc->state == FAST_ON ? "on" : "off",
              (unsigned long long)comm->view.fast_max);
    return status;
}

/* What may change between two calls of the same arguments: a failure
 * (validation reports it), TACL_CHECK for the communicator, the
 * configuration (TACL_ALGO may force another row).  (The caller asks
 * only outside a group.) */
static int fast_ready(tacl_comm_t comm, const fast_comm_t *fc)
{
    return comm->x.ctx->fatal == TACL_OK && !comm->check &&
           fc->gen == tacl__config_generation();
}

/*
 * Run the fast-engine call op (arguments a, flight record rec) on comm:
 * its one round trip of the context lock (the bookkeeping, and the
 * area's queue), then the collective: alone, queued behind split calls,
 * or, with req_p, itself split (its request in *req_p).
 */
static tacl_status_t fast_run(tacl_comm_t comm, fast_comm_t *fc,
                              tacl__coll_args_t *a, const tacl__fast_op_t *op,
                              const tacl__flight_op_t *rec,
                              tacl_request_t *req_p)
{
    tacl__ctx_t *ctx = comm->x.ctx;
    uint64_t ord = UINT64_MAX, n;
    tacl__exec_t *exec;
    tacl_status_t status;
    tacl__flight_op_t r = *rec;
    int alone;

    pthread_mutex_lock(&ctx->lock);
    tacl__ctx_flight_poll(ctx);
    a->seq = comm->seq++ % TACL__SEQ_HALF;
    r.seq = a->seq;
    tacl__fast_count(&comm->x, fc->tl, op, comm->rank, comm->size);
    if (memcmp(comm->last_algo, "fast", 5) != 0)
        snprintf(comm->last_algo, sizeof(comm->last_algo), "fast");
    if (req_p != NULL) {
        /* Its execution claims the record, as a schedule's does. */
        tacl__flight_begin(&comm->x.flight, &r);
        status = tacl__fast_start_nb(fc->area, &comm->x, op, &exec);
        if (status != TACL_OK) {
            pthread_mutex_unlock(&ctx->lock);
            return status;
        }
        status = tacl__request_of_locked(exec, req_p);
        pthread_mutex_unlock(&ctx->lock);
        return tacl__request_or_wait(exec, status);
    }
    if (comm->x.flight.cap > 0)
        ord = tacl__flight_open(&comm->x.flight, &r);
    alone = tacl__fast_begin(fc->area, &comm->x, op, &n);
    pthread_mutex_unlock(&ctx->lock);
    if (alone > 0)
        status = tacl__fast_run(fc->area, &comm->x, op, n);
    else if (alone == 0)
        status = tacl__fast_wait_queued(fc->area, &comm->x, n);
    else
        status = tacl__error(ctx->fatal, COLL, "%s", ctx->fatal_msg);
    /* Without the lock: the record's end is two atomic stores. */
    tacl__flight_end(&comm->x.flight, ord, status);
    return status;
}

static int memo_matches(const fast_memo_entry_t *m,
                        const tacl__coll_args_t *a)
{
    return a->type == m->type && a->sendbuf == m->sendbuf &&
           a->recvbuf == m->recvbuf && a->count == m->count &&
           a->dtype == m->dtype && a->op == m->op && a->root == m->root;
}

/* Remember a (validated, about to run as op) among the owner's last
 * calls, in place of the oldest. */
static void fast_remember(tacl_comm_t comm, fast_comm_t *fc,
                          const tacl__coll_args_t *a,
                          const tacl__fast_op_t *op,
                          const tacl__flight_op_t *rec)
{
    fast_memo_entry_t *m;

    if (!tacl__comm_is_owner(comm) || tacl__dev_usable())
        return;
    if (fc->gen != tacl__config_generation()) {
        for (int i = 0; i < FAST_MEMOS; i++)
            fc->memo[i].type = TACL_NUM_COLLS;
        fc->gen = tacl__config_generation();
    }
    fc->last = fc->next;
    fc->next = (fc->next + 1) % FAST_MEMOS;
    m = &fc->memo[fc->last];
    m->type = a->type;
    m->sendbuf = a->sendbuf;
    m->recvbuf = a->recvbuf;
    m->count = a->count;
    m->dtype = a->dtype;
    m->op = a->op;
    m->root = a->root;
    m->fop = *op;
    m->rec = *rec;
}

int tacl__fast_again(tacl_comm_t comm, tacl__coll_args_t *a,
                     tacl_request_t *req_p, tacl_status_t *status_p)
{
    fast_comm_t *fc;
    const fast_memo_entry_t *m = NULL;

    /* The owner check first: only the owner touches the memo. */
    if (!tacl__comm_is_owner(comm) ||
        (fc = tacl__comm_ext(comm, TACL__EXT_FAST)) == NULL ||
        fc->state != FAST_ON || a->qbits != 0)
        return 0;
    /* The latest first, then back in time. */
    for (int k = 0, i = fc->last; k < FAST_MEMOS && m == NULL; k++) {
        if (memo_matches(&fc->memo[i], a)) {
            m = &fc->memo[i];
            fc->last = i;
        }
        i = (i + FAST_MEMOS - 1) % FAST_MEMOS;
    }
    if (m == NULL || !fast_ready(comm, fc))
        return 0;
    a->memtype = TACL_MEM_HOST;
    *status_p = fast_run(comm, fc, a, &m->fop, &m->rec, req_p);
    return 1;
}

/* Run the validated call a, which the decider gave the fast engine
 * (split when req_p is not NULL). */
static tacl_status_t fast_call(tacl_comm_t comm, tacl__coll_args_t *a,
                               tacl_request_t *req_p)
{
    fast_comm_t *fc = tacl__comm_ext(comm, TACL__EXT_FAST);
    tacl__flight_op_t rec;
    tacl__fast_op_t op;

    if (fc == NULL || fc->state != FAST_ON)
        return tacl__error(TACL_ERR_INTERNAL, COLL,
                           "%s: the fast engine was chosen on a "
                           "communicator without its area",
                           tacl_coll_name(a->type));
    op = tacl__fast_op_of(a);
    tacl__flight_op_of(comm, a, 1, &rec);
    rec.algo = "fast";
    fast_remember(comm, fc, a, &op, &rec);
    return fast_run(comm, fc, a, &op, &rec, req_p);
}

int tacl__fast_take(tacl_comm_t comm, tacl__coll_args_t *a,
                    tacl_request_t *req_p, tacl_status_t *status_p)
{
    const tacl__algo_t *row = tacl__algo_row(TACL__ALGO_FAST, a->type);
    tacl__choice_t choice;

    /* The decider's own first test, before asking it: most calls that
     * miss the engine miss it here, without the model's costs. */
    if (row == NULL || !row->supports(a, &comm->view))
        return 0;
    *status_p = tacl__choose(comm, a, TACL__CHOOSE_ALONE, &choice);
    if (*status_p != TACL_OK)
        return 1;
    if (choice.engine != TACL__ENGINE_FAST)
        return 0;
    *status_p = fast_call(comm, a, req_p);
    return 1;
}
