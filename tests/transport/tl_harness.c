/*
 * The fork-based transport test harness (see tl_harness.h).
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "common.h"
#include "config.h"
#include "tl_harness.h"

tlh_shared_t *tlh_shared;
uint8_t tlh_hints;

tacl_status_t tlh_exchange(void *ctx, void *all, size_t size)
{
    int n = tlh_shared->nranks;

    if (size > TLH_MAX_REC)
        return TACL_ERR_INTERNAL;
    memcpy(tlh_shared->recs + (size_t)tt_rank * size,
           (char *)all + (size_t)tt_rank * size, size);
    pthread_barrier_wait(&tlh_shared->barrier);
    memcpy(all, tlh_shared->recs, (size_t)n * size);
    pthread_barrier_wait(&tlh_shared->barrier);
    return TACL_OK;
}

void tlh_barrier(void)
{
    pthread_barrier_wait(&tlh_shared->barrier);
}

tacl__tl_t *tlh_init(const tacl__transport_ops_t *ops, int rank, int nranks,
                     const char *const *node_ids)
{
    static const char *const all_n0[TLH_MAX_RANKS] = {
        "n0", "n0", "n0", "n0", "n0", "n0", "n0", "n0",
        "n0", "n0", "n0", "n0", "n0", "n0", "n0", "n0"};
    tacl__tl_params_t params = {
        .rank = rank,
        .nranks = nranks,
        .node_ids = node_ids ? node_ids : all_n0,
        .timeout_s = 30,
        .exchange = tlh_exchange,
    };
    tacl__tl_t *tl = NULL;

    params.node_id = params.node_ids[rank];
    CHECK(ops->init(&params, &tl) == TACL_OK);
    CHECK(tl != NULL);
    return tl;
}

static void op_done(tacl__tl_op_t *op, tacl_status_t status)
{
    tlh_op_t *t = (tlh_op_t *)op;
    int *pending = op->arg;

    t->status = status;
    ++t->calls;
    --*pending;
}

tacl__tl_op_t *tlh_op(tlh_op_t *t, int peer, uint64_t tag, void *buf,
                      uint64_t len, int *pending)
{
    memset(t, 0, sizeof(*t));
    t->op.peer = peer;
    t->op.tag = tag;
    t->op.buf = buf;
    t->op.len = len;
    t->op.memtype = TACL_MEM_HOST;
    t->op.hints = tlh_hints;
    t->op.cb = op_done;
    t->op.arg = pending;
    t->status = TACL_IN_PROGRESS;
    ++*pending;
    return &t->op;
}

int tlh_drive(tacl__tl_t *tl, int *pending, long spin, double timeout_s)
{
    uint64_t deadline = tacl__now_ns() + (uint64_t)(timeout_s * 1e9);
    long idle = 0;

    while (*pending > 0) {
        int n = tacl__tl_progress(tl);

        if (n < 0)
            return -1;
        idle = n ? 0 : idle + 1;
        if (idle > spin)
            tacl__tl_wait(tl, 100000);
        if (tacl__now_ns() > deadline)
            return -1;
    }
    return 0;
}

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
}

void tlh_fill(void *buf, size_t len, uint64_t seed)
{
    uint8_t *p = buf;
    uint64_t s = mix(seed + 1);

    for (size_t i = 0; i < len; ++i) {
        if (i % 8 == 0)
            s = mix(s + i);
        p[i] = (uint8_t)(s >> (8 * (i % 8)));
    }
}

int tlh_check(const void *buf, size_t len, uint64_t seed)
{
    const uint8_t *p = buf;
    uint64_t s = mix(seed + 1);

    for (size_t i = 0; i < len; ++i) {
        if (i % 8 == 0)
            s = mix(s + i);
        if (p[i] != (uint8_t)(s >> (8 * (i % 8))))
            return 0;
    }
    return 1;
}

/* What a forked rank runs: the run's mode, then the test's function. */
typedef struct {
    const char *mode;
    tlh_rank_fn_t fn;
    void *arg;
    int nranks;
} rank_main_t;

static int rank_main(int r, void *arg)
{
    const rank_main_t *m = arg;

    alarm(60);
    tlh_hints = m->mode && !strcmp(m->mode, "push")
                    ? TACL__TL_HINT_PINNABLE : 0;
    if (tlh_hints)
        setenv("TACL_SHM_MODE", "cma", 1);
    else if (m->mode)
        setenv("TACL_SHM_MODE", m->mode, 1);
    else
        unsetenv("TACL_SHM_MODE");
    tacl__config_reload();
    return m->fn(r, m->nranks, m->arg);
}

int tlh_run(int nranks, const char *mode, tlh_rank_fn_t fn, void *arg,
            int kill_rank)
{
    rank_main_t m = {.mode = mode, .fn = fn, .arg = arg, .nranks = nranks};
    tt_proc_t procs[TLH_MAX_RANKS];
    pthread_barrierattr_t attr;
    int failed, forked;

    tlh_shared = tt_shared_map(sizeof(*tlh_shared));
    if (tlh_shared == NULL)
        return nranks;
    tlh_shared->nranks = nranks;
    pthread_barrierattr_init(&attr);
    pthread_barrierattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
    pthread_barrier_init(&tlh_shared->barrier, &attr, (unsigned)nranks);
    forked = tt_fork(procs, nranks, rank_main, &m);
    if (kill_rank >= 0 && kill_rank < forked) {
        uint64_t give_up = tacl__now_ns() + 30ull * 1000000000;

        while (!atomic_load(&tlh_shared->flags[0]) && tacl__now_ns() < give_up)
            usleep(1000);
        /* Stamp first: a survivor may see the death before kill()
         * returns here. */
        atomic_store(&tlh_shared->stamp, tacl__now_ns());
        kill(procs[kill_rank].pid, SIGKILL);
        procs[kill_rank].keep = 1;
    }
    /*
     * The first rank to fail takes the others down, so none waits alone.
     * The killed rank is reaped last: until then it is a zombie, which the
     * transport must still see as dead.
     */
    failed = nranks - forked +
             tt_wait(procs, forked, 0, TT_WAIT_FAIL_FAST);
    for (int r = 0; r < forked; ++r)
        if (!procs[r].keep && !tt_proc_passed(&procs[r]))
            fprintf(stderr, "rank %d failed (status 0x%x)\n", r,
                    procs[r].status);
    if (kill_rank >= 0 && kill_rank < forked)
        waitpid(procs[kill_rank].pid, NULL, 0);
    /* No destroy: it would wait for a killed rank to leave the barrier. */
    tt_shared_unmap(tlh_shared, sizeof(*tlh_shared));
    tlh_shared = NULL;
    return failed;
}
