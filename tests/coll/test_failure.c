/*
 * Failures: a rank dies in the middle of a collective or before joining
 * one, a rank never joins the communicator, a rank aborts.  With
 * TACL_TIMEOUT=5 every surviving rank must get TACL_ERR_REMOTE or
 * TACL_ERR_TIMEOUT within the timeout plus some slack, never hang; the
 * measured delays are printed.  Also: tacl_comm_init_env from TACL_* and
 * from torchrun's variables on a free port of 127.0.0.1.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "harness.h"
#include "values.h"

#define TIMEOUT_S 5.0
/* Scheduling slack on two shared cores. */
#define SLACK_S 3.0
#define BIG_COUNT ((size_t)8 * 1024 * 1024) /* 32 MB of float32 */

static const char *const timeout_env[] = {"TACL_TIMEOUT=5", NULL};

/* Shared scratch: when the victim died or aborted, and when a survivor
 * saw its error. */
typedef struct {
    double event_at;
    int all_done;
    int joined;
    int survivors_ready; /* survivors past the operations that must pass */
    double seen_after[COLL_MAX_RANKS];
    int seen_status[COLL_MAX_RANKS];
} fail_scratch_t;

static fail_scratch_t *scratch(coll_ctx_t *ctx)
{
    return (fail_scratch_t *)ctx->scratch;
}

static void mark_event(coll_ctx_t *ctx)
{
    double now = coll_now();

    __atomic_store(&scratch(ctx)->event_at, &now, __ATOMIC_SEQ_CST);
}

static double event_time(coll_ctx_t *ctx)
{
    double t;

    __atomic_load(&scratch(ctx)->event_at, &t, __ATOMIC_SEQ_CST);
    return t;
}

/*
 * Count this rank as past tacl_comm_init_rank, and, on the victim, wait
 * (bounded) until every rank is: init returns on different ranks at
 * different times, and a rank that dies while a peer is still inside
 * init makes that init fail, which is not what these tests are about.
 */
static void joined(coll_ctx_t *ctx)
{
    __atomic_add_fetch(&scratch(ctx)->joined, 1, __ATOMIC_SEQ_CST);
}

static void wait_all_joined(coll_ctx_t *ctx)
{
    double deadline = coll_now() + 20;

    while (__atomic_load_n(&scratch(ctx)->joined, __ATOMIC_SEQ_CST) <
           ctx->nranks && coll_now() < deadline)
        coll_sleep_ms(1);
}

/* A survivor's check: an error of the allowed kind, soon enough. */
static int expect_failure(coll_ctx_t *ctx, const char *what,
                          tacl_status_t st, double since, int remote_only)
{
    double after = coll_now() - since;

    scratch(ctx)->seen_after[ctx->rank] = after;
    scratch(ctx)->seen_status[ctx->rank] = st;
    if (st == TACL_OK)
        return coll_fail(ctx, "%s succeeded although a peer is gone", what);
    if (remote_only ? st != TACL_ERR_REMOTE :
        st != TACL_ERR_REMOTE && st != TACL_ERR_TIMEOUT)
        return coll_fail(ctx, "%s returned %s (%d), expected %s: %s", what,
                         tacl_status_string(st), (int)st,
                         remote_only ? "TACL_ERR_REMOTE" :
                         "TACL_ERR_REMOTE or TACL_ERR_TIMEOUT",
                         tacl_comm_last_error(ctx->comm));
    if (after > TIMEOUT_S + SLACK_S)
        return coll_fail(ctx, "%s took %.2f s to fail (limit %.1f s)", what,
                         after, TIMEOUT_S + SLACK_S);
    if (tacl_comm_last_error(ctx->comm)[0] == '\0')
        return coll_fail(ctx, "%s failed with an empty message", what);
    /* The broken communicator keeps failing, promptly. */
    {
        double t0 = coll_now();
        float x = 1.0f;
        tacl_status_t again = tacl_allreduce(&x, &x, 1, TACL_FLOAT32,
                                             TACL_SUM, ctx->comm, NULL);

        if (again == TACL_OK)
            return coll_fail(ctx, "an allreduce after the failure "
                             "succeeded");
        if (coll_now() - t0 > TIMEOUT_S + SLACK_S)
            return coll_fail(ctx, "an allreduce after the failure took "
                             "%.2f s", coll_now() - t0);
    }
    return 0;
}

/*
 * Print the delays of every rank but the victim, and assert that the
 * survivors passed and, when victim_signal is set, that the victim died
 * of it (otherwise the victim is judged like the others).
 */
static void expect_survivors(const coll_result_t *res, int victim,
                             int victim_signal, const char *label)
{
    const fail_scratch_t *sc = (const fail_scratch_t *)res->scratch;

    for (int r = 0; r < res->nranks; r++)
        if (r != victim)
            cr_log_info("%s: rank %d saw %s after %.3f s", label, r,
                        tacl_status_string(sc->seen_status[r]),
                        sc->seen_after[r]);
    coll_expect_pass_but(res, victim_signal ? victim : -1, victim_signal);
}

/* Run body on nranks ranks with a 5 s timeout and judge them as
 * expect_survivors() does. */
static void run_case(int nranks, coll_init_mode_t init, coll_body_t body,
                     int victim, int victim_signal, const char *label)
{
    coll_opts_t opts = {
        .nranks = nranks,
        .deadline_s = 40,
        .init = init,
        .env = timeout_env,
        .destroy_may_fail = 1,
    };
    coll_result_t *res = malloc(sizeof(*res));

    cr_assert_not_null(res);
    coll_run(&opts, body, res);
    expect_survivors(res, victim, victim_signal, label);
    free(res);
}

/* A test named name that is one run_case (its arguments follow). */
#define FAILURE_TEST(name, ...)                                              \
    Test(failure, name, .timeout = 90)                                       \
    {                                                                        \
        run_case(__VA_ARGS__);                                               \
    }

/*
 * The last rank joins two 32 MB allreduces, starts a third without
 * finishing it and kills itself; the others loop on allreduce.
 */
static int body_kill_mid(coll_ctx_t *ctx)
{
    int victim = ctx->nranks - 1;
    float *s = malloc(BIG_COUNT * 4), *r = malloc(BIG_COUNT * 4);
    tacl_status_t st = TACL_OK;
    int k;

    if (!s || !r)
        return coll_fail(ctx, "out of memory");
    val_fill_red(TACL_FLOAT32, TACL_SUM, s, BIG_COUNT, ctx->rank,
                 ctx->nranks, 0);
    if (ctx->rank == victim) {
        tacl_request_t req = NULL;
        int done = 0;

        for (k = 0; k < 2; k++)
            COLL_CHECK_OK(ctx, tacl_allreduce(s, r, BIG_COUNT, TACL_FLOAT32,
                                              TACL_SUM, ctx->comm, NULL));
        COLL_CHECK_OK(ctx, tacl_allreduce_nb(s, r, BIG_COUNT, TACL_FLOAT32,
                                             TACL_SUM, ctx->comm, NULL,
                                             &req));
        for (k = 0; k < 3 && !done; k++)
            tacl_request_test(req, &done);
        /* A death fails every operation still in flight, even one whose
         * data had all arrived: wait until the survivors are past the two
         * that must succeed, so the kill lands in the third. */
        {
            double deadline = coll_now() + 20;
            while (__atomic_load_n(&scratch(ctx)->survivors_ready,
                                   __ATOMIC_SEQ_CST) < ctx->nranks - 1 &&
                   coll_now() < deadline)
                coll_sleep_ms(1);
        }
        mark_event(ctx);
        raise(SIGKILL);
        return coll_fail(ctx, "still alive after SIGKILL");
    }
    for (k = 0; k < 8; k++) {
        st = tacl_allreduce(s, r, BIG_COUNT, TACL_FLOAT32, TACL_SUM,
                            ctx->comm, NULL);
        if (st != TACL_OK)
            break;
        if (k == 1)
            __atomic_add_fetch(&scratch(ctx)->survivors_ready, 1,
                               __ATOMIC_SEQ_CST);
    }
    if (k < 2)
        return coll_fail(ctx, "allreduce %d failed before the kill: %s", k,
                         tacl_status_string(st));
    return expect_failure(ctx, "allreduce after a peer was killed", st,
                          event_time(ctx), 0);
}

FAILURE_TEST(kill_mid_collective, 3, COLL_INIT_AUTO, body_kill_mid, 2,
             SIGKILL, "kill mid allreduce")

/* On 8 ranks most survivors are not neighbours of the dead rank: they
 * must learn of the failure too, not wait on a stalled neighbour. */
FAILURE_TEST(kill_mid_collective_ranks8, 8, COLL_INIT_AUTO, body_kill_mid, 7,
             SIGKILL, "kill mid allreduce, 8 ranks")

/* A thread of the victim kills the process while its main thread is
 * inside a blocking allreduce. */
static void *killer(void *arg)
{
    coll_ctx_t *ctx = arg;

    coll_sleep_ms(150);
    mark_event(ctx);
    raise(SIGKILL);
    return NULL;
}

static int body_kill_blocking(coll_ctx_t *ctx)
{
    const size_t c = 4 * 1024 * 1024;
    float *s = malloc(c * 4), *r = malloc(c * 4);
    tacl_status_t st = TACL_OK;
    pthread_t tid;
    double t0 = coll_now();
    int k;

    if (!s || !r)
        return coll_fail(ctx, "out of memory");
    memset(s, 0, c * 4);
    joined(ctx);
    if (ctx->rank == 1) {
        wait_all_joined(ctx);
        if (pthread_create(&tid, NULL, killer, ctx) != 0)
            return coll_fail(ctx, "pthread_create failed");
    }
    for (k = 0; k < 2000 && coll_now() - t0 < 20; k++) {
        st = tacl_allreduce(s, r, c, TACL_FLOAT32, TACL_SUM, ctx->comm,
                            NULL);
        if (st != TACL_OK)
            break;
    }
    if (ctx->rank == 1)
        return coll_fail(ctx, "victim still alive after %d allreduces", k);
    return expect_failure(ctx, "allreduce while a peer is killed", st,
                          event_time(ctx), 0);
}

FAILURE_TEST(kill_during_blocking_call, 4, COLL_INIT_AUTO, body_kill_blocking,
             1, SIGKILL, "kill during blocking allreduce")

/* An allreduce inside a group of its own. */
static tacl_status_t group_allreduce(float *s, float *r, size_t n,
                                     tacl_comm_t comm)
{
    tacl_status_t st = tacl_group_start();

    if (st != TACL_OK)
        return st;
    st = tacl_allreduce(s, r, n, TACL_FLOAT32, TACL_SUM, comm, NULL);
    if (st != TACL_OK) {
        tacl_group_end();
        return st;
    }
    return tacl_group_end();
}

/* Rank 1 dies right after init; the others then enter an allreduce,
 * alone or (in_group) inside a group. */
static int kill_before(coll_ctx_t *ctx, int in_group)
{
    float s[1024], r[1024];
    double t0;
    tacl_status_t st;

    joined(ctx);
    if (ctx->rank == 1) {
        wait_all_joined(ctx);
        mark_event(ctx);
        raise(SIGKILL);
        return coll_fail(ctx, "still alive after SIGKILL");
    }
    memset(s, 0, sizeof(s));
    coll_sleep_ms(200);
    t0 = coll_now();
    st = in_group ? group_allreduce(s, r, 1024, ctx->comm)
                  : tacl_allreduce(s, r, 1024, TACL_FLOAT32, TACL_SUM,
                                   ctx->comm, NULL);
    return expect_failure(ctx, in_group ? "group end with a dead peer" :
                          "allreduce with a dead peer", st, t0, 0);
}

static int body_kill_before(coll_ctx_t *ctx)
{
    return kill_before(ctx, 0);
}

/* The failed group end leaves its message on the communicator too. */
static int body_kill_before_group(coll_ctx_t *ctx)
{
    return kill_before(ctx, 1);
}

FAILURE_TEST(kill_before_collective, 3, COLL_INIT_AUTO, body_kill_before, 1,
             SIGKILL, "peer dead before allreduce")

FAILURE_TEST(kill_before_group, 3, COLL_INIT_AUTO, body_kill_before_group, 1,
             SIGKILL, "peer dead before a group")

FAILURE_TEST(kill_before_collective_ranks8, 8, COLL_INIT_AUTO,
             body_kill_before, 1, SIGKILL,
             "peer dead before allreduce, 8 ranks")

/*
 * Survivors that give up exit, and their exits must not be mistaken for
 * the failure.  Rank 1 dies while rank 2 waits to receive from it; rank 2
 * learns of it (from shm or from the ring) and exits at once; rank 3
 * waits to receive from rank 2, so it sees rank 2 vanish; rank 0 sleeps
 * through all this (it passes no news on) and then calls a barrier.
 * Every survivor's error must name rank 1, the first to die: rank 2 must
 * pass the news on before it exits, and rank 3 must prefer the news to
 * the death it saw itself.
 */
static int body_first_death_named(coll_ctx_t *ctx)
{
    float x[16] = {0};
    double t0;
    tacl_status_t st;
    const char *msg;

    joined(ctx);
    wait_all_joined(ctx);
    coll_sleep_ms(100);
    t0 = coll_now();
    switch (ctx->rank) {
    case 1:
        coll_sleep_ms(300);
        mark_event(ctx);
        raise(SIGKILL);
        return coll_fail(ctx, "still alive after SIGKILL");
    case 2:
        st = tacl_recv(x, 16, TACL_FLOAT32, 1, ctx->comm, NULL);
        break;
    case 3:
        st = tacl_recv(x, 16, TACL_FLOAT32, 2, ctx->comm, NULL);
        break;
    default:
        coll_sleep_ms(1500);
        t0 = event_time(ctx);
        st = tacl_barrier(ctx->comm, NULL);
        break;
    }
    msg = tacl_comm_last_error(ctx->comm);
    scratch(ctx)->seen_after[ctx->rank] = coll_now() - t0;
    scratch(ctx)->seen_status[ctx->rank] = st;
    if (st != TACL_ERR_REMOTE)
        return coll_fail(ctx, "got %s, expected TACL_ERR_REMOTE: %s",
                         tacl_status_string(st), msg);
    if (strstr(msg, "rank 1") == NULL)
        return coll_fail(ctx, "the error does not name rank 1, which died "
                         "first: %s", msg);
    /* Rank 2 gives up at once, as a job that exits on an error does. */
    return 0;
}

Test(failure, first_death_is_named, .timeout = 90)
{
    for (int trial = 0; trial < 3; trial++)
        run_case(4, COLL_INIT_AUTO, body_first_death_named, 1, SIGKILL,
                 "survivors exit after the first death");
}

/*
 * Abort from another thread at any moment: one thread keeps calling into
 * a one-rank communicator (collectives blocking and _nb, a coalesced call,
 * a group, queries) while the main thread aborts it after a random short
 * delay, so the abort lands anywhere in a call, including between the
 * handle check and the communicator's lock.  Every call returns (OK
 * before the abort, an error after it), nothing crashes; 300 rounds.
 */
typedef struct {
    tacl_comm_t comm;
    int stop;
    long calls;
    int bad; /* a status that is neither OK nor an error of the abort */
    int bad_line;
    tacl_status_t bad_status;
} abort_race_t;

static int abort_race_ok(tacl_status_t st)
{
    return st == TACL_OK || st == TACL_ERR_REMOTE ||
           st == TACL_ERR_INVALID_USAGE;
}

/* Note the first call that returned a status of neither kind. */
#define RACE_NOTE(a, cond, st)                                               \
    do {                                                                     \
        if (!(cond) && !(a)->bad) {                                          \
            (a)->bad = 1;                                                    \
            (a)->bad_line = __LINE__;                                        \
            (a)->bad_status = (st);                                          \
        }                                                                    \
    } while (0)

static void *abort_race_caller(void *arg)
{
    abort_race_t *a = arg;
    float x[64] = {0}, y[64];
    const void *sb[1] = {x};
    void *rb[1] = {y};
    size_t counts[1] = {64};
    tacl_counters_t cnt;
    tacl_status_t st, async;
    tacl_request_t req;

    while (!__atomic_load_n(&a->stop, __ATOMIC_SEQ_CST)) {
        st = tacl_allreduce(x, y, 64, TACL_FLOAT32, TACL_SUM, a->comm, NULL);
        RACE_NOTE(a, abort_race_ok(st), st);
        req = NULL;
        st = tacl_allgather_nb(x, y, 64, TACL_FLOAT32, a->comm, NULL, &req);
        RACE_NOTE(a, abort_race_ok(st), st);
        if (st == TACL_OK && req != NULL) {
            st = tacl_request_wait(req);
            RACE_NOTE(a, abort_race_ok(st), st);
            st = tacl_request_free(req);
            RACE_NOTE(a, st == TACL_OK, st);
        }
        st = tacl_allgather_coalesced(sb, rb, counts, 1, TACL_FLOAT32,
                                      a->comm, NULL);
        RACE_NOTE(a, abort_race_ok(st), st);
        if (tacl_group_start() == TACL_OK) {
            (void)tacl_broadcast(x, y, 64, TACL_FLOAT32, 0, a->comm, NULL);
            st = tacl_group_end();
            RACE_NOTE(a, abort_race_ok(st), st);
        }
        st = tacl_comm_get_counters(a->comm, &cnt);
        RACE_NOTE(a, abort_race_ok(st), st);
        st = tacl_comm_get_async_error(a->comm, &async);
        RACE_NOTE(a, abort_race_ok(st), st);
        st = tacl_comm_set_check(a->comm, 0);
        RACE_NOTE(a, abort_race_ok(st), st);
        a->calls++;
    }
    return NULL;
}

Test(failure, abort_races_calls_of_another_thread, .timeout = 120)
{
    unsigned seed = 12345;

    for (int round = 0; round < 300; round++) {
        abort_race_t a = {0};
        tacl_unique_id_t id;
        pthread_t th;
        tacl_status_t st;

        cr_assert_eq(tacl_get_unique_id(&id), TACL_OK);
        st = tacl_comm_init_rank(1, &id, 0, &a.comm);
        cr_assert_eq(st, TACL_OK, "init: %s", tacl_last_error());
        cr_assert_eq(pthread_create(&th, NULL, abort_race_caller, &a), 0);
        seed = seed * 1103515245u + 12345u;
        coll_sleep_ms(0);
        for (unsigned spin = (seed >> 8) % 20000; spin > 0; spin--)
            __asm__ volatile("" ::: "memory");
        st = tacl_comm_abort(a.comm);
        cr_assert_eq(st, TACL_OK, "round %d: abort: %s", round,
                     tacl_last_error());
        coll_sleep_ms(1);
        __atomic_store_n(&a.stop, 1, __ATOMIC_SEQ_CST);
        cr_assert_eq(pthread_join(th, NULL), 0);
        cr_assert(!a.bad, "round %d: the call at line %d returned %s",
                  round, a.bad_line, tacl_status_string(a.bad_status));
    }
}

/*
 * A hung rank (SIGSTOP) is named: the survivors time out in their
 * all-reduce, find on the ring that every rank but rank 3 timed out too,
 * and each reports rank 3.  Rank 0 then kills the stopped rank.
 */
typedef struct {
    pid_t pid[COLL_MAX_RANKS];
} stop_pids_t;

static int body_stop_named(coll_ctx_t *ctx)
{
    float x[1024] = {0}, y[1024];
    pid_t *pids = ((stop_pids_t *)((fail_scratch_t *)ctx->scratch + 1))->pid;
    double t0;
    tacl_status_t st = TACL_OK;
    const char *msg;

    pids[ctx->rank] = getpid();
    joined(ctx);
    wait_all_joined(ctx);
    t0 = coll_now();
    for (int k = 0; k < 1000000 && st == TACL_OK; k++) {
        if (ctx->rank == 3 && k == 20) {
            mark_event(ctx);
            raise(SIGSTOP);
        }
        st = tacl_allreduce(x, y, 1024, TACL_FLOAT32, TACL_SUM, ctx->comm,
                            NULL);
        if (coll_now() - t0 > 30)
            return coll_fail(ctx, "no error 30 s after the start");
    }
    msg = tacl_comm_last_error(ctx->comm);
    if (ctx->rank == 0) {
        coll_sleep_ms(1500); /* the others time out meanwhile */
        kill(pids[3], SIGKILL);
    }
    if (st != TACL_ERR_TIMEOUT && st != TACL_ERR_REMOTE)
        return coll_fail(ctx, "got %s: %s", tacl_status_string(st), msg);
    if (strstr(msg, "rank 3") == NULL)
        return coll_fail(ctx, "the error does not name rank 3, the stopped "
                         "one: %s", msg);
    return 0;
}

Test(failure, stopped_rank_is_named, .timeout = 90)
{
    static const char *const env[] = {"TACL_TIMEOUT=2", NULL};
    coll_opts_t opts = {.nranks = 4, .deadline_s = 40,
                        .init = COLL_INIT_AUTO, .env = env,
                        .destroy_may_fail = 1};
    coll_result_t *res = malloc(sizeof(*res));

    cr_assert_not_null(res);
    cr_assert(sizeof(fail_scratch_t) + sizeof(stop_pids_t) <=
              COLL_SCRATCH_BYTES);
    coll_run(&opts, body_stop_named, res);
    expect_survivors(res, 3, SIGKILL, "stopped rank");
    free(res);
}

/* Rank 2 never calls init: the others' init times out. */
static int body_init_never(coll_ctx_t *ctx)
{
    tacl_comm_t c = (tacl_comm_t)&c;
    tacl_status_t st;
    double t0, after;

    if (ctx->rank == 2) {
        double deadline = coll_now() + 30;

        /* Stay alive, silent, until the others are done. */
        while (__atomic_load_n(&scratch(ctx)->all_done, __ATOMIC_SEQ_CST) <
               ctx->nranks - 1 && coll_now() < deadline)
            coll_sleep_ms(10);
        return 0;
    }
    t0 = coll_now();
    st = tacl_comm_init_rank(ctx->nranks, ctx->id, ctx->rank, &c);
    after = coll_now() - t0;
    scratch(ctx)->seen_after[ctx->rank] = after;
    scratch(ctx)->seen_status[ctx->rank] = st;
    __atomic_add_fetch(&scratch(ctx)->all_done, 1, __ATOMIC_SEQ_CST);
    if (st == TACL_OK) {
        tacl_comm_destroy(c);
        return coll_fail(ctx, "init succeeded with a rank missing");
    }
    COLL_CHECK(ctx, st == TACL_ERR_TIMEOUT ||
               (ctx->rank != 0 && st == TACL_ERR_REMOTE),
               "init returned %s (%d): %s", tacl_status_string(st), (int)st,
               tacl_last_error());
    COLL_CHECK(ctx, c == (tacl_comm_t)&c, "a failed init wrote *comm_p");
    COLL_CHECK(ctx, after >= TIMEOUT_S - 1.0 && after <= TIMEOUT_S + SLACK_S,
               "init failed after %.2f s, expected about %.0f s", after,
               TIMEOUT_S);
    COLL_CHECK(ctx, tacl_last_error()[0] != '\0', "empty last error");
    return 0;
}

FAILURE_TEST(init_missing_rank, 3, COLL_INIT_MANUAL, body_init_never, 2, 0,
             "init with a rank missing")

/* Rank 1 aborts while the others wait for it in an allreduce. */
static int body_abort(coll_ctx_t *ctx)
{
    float s[4096], r[4096];
    tacl_status_t st;

    memset(s, 0, sizeof(s));
    joined(ctx);
    if (ctx->rank == 1) {
        wait_all_joined(ctx);
        coll_sleep_ms(300);
        mark_event(ctx);
        st = tacl_comm_abort(ctx->comm);
        ctx->comm = NULL;
        COLL_CHECK(ctx, st == TACL_OK, "tacl_comm_abort returned %s: %s",
                   tacl_status_string(st), tacl_last_error());
        return 0;
    }
    st = tacl_allreduce(s, r, 4096, TACL_FLOAT32, TACL_SUM, ctx->comm, NULL);
    return expect_failure(ctx, "allreduce with an aborted peer", st,
                          event_time(ctx), 1);
}

FAILURE_TEST(abort, 3, COLL_INIT_AUTO, body_abort, 1, 0, "peer aborted")

/*
 * The header promises that a request the caller still holds keeps its
 * execution: a rank aborts with its own all-reduce pending, then waits for
 * and frees that request.  Both see an error, neither crashes.
 */
static int body_abort_pending(coll_ctx_t *ctx)
{
    const size_t c = 4 * 1024 * 1024;
    float *s = calloc(c, 4), *r = malloc(c * 4);
    tacl_request_t req = NULL;
    tacl_status_t st;

    if (!s || !r)
        return coll_fail(ctx, "out of memory");
    joined(ctx);
    wait_all_joined(ctx);
    st = tacl_allreduce_nb(s, r, c, TACL_FLOAT32, TACL_SUM, ctx->comm, NULL,
                           &req);
    COLL_CHECK(ctx, st == TACL_OK, "allreduce_nb returned %s",
               tacl_status_string(st));
    if (ctx->rank == 1) {
        mark_event(ctx);
        st = tacl_comm_abort(ctx->comm);
        ctx->comm = NULL;
        COLL_CHECK(ctx, st == TACL_OK, "tacl_comm_abort returned %s: %s",
                   tacl_status_string(st), tacl_last_error());
        st = tacl_request_wait(req);
        COLL_CHECK(ctx, st != TACL_OK, "the aborted request succeeded");
        st = tacl_request_free(req);
        COLL_CHECK(ctx, st == TACL_OK, "freeing the aborted request gave "
                   "%s: %s", tacl_status_string(st), tacl_last_error());
        free(s);
        free(r);
        return 0;
    }
    st = tacl_request_wait(req);
    tacl_request_free(req);
    free(s);
    free(r);
    if (st == TACL_OK)
        return 0; /* finished before the abort reached it */
    return expect_failure(ctx, "allreduce_nb with an aborted peer", st,
                          event_time(ctx), 1);
}

Test(failure, abort_with_request_pending, .timeout = 90)
{
    coll_opts_t o = {.nranks = 2, .deadline_s = 60, .init = COLL_INIT_AUTO,
                     .destroy_may_fail = 1};

    coll_run_opts_expect_pass(&o, body_abort_pending);
}

/*
 * A watchdog thread aborts the communicator while the main thread is
 * blocked inside a collective its peer never joins (as a watchdog
 * unblocks a hung call with ncclCommAbort).  The blocked call returns an
 * error, nothing crashes; ten rounds, each on a new communicator.
 */
static void *watchdog(void *arg)
{
    coll_sleep_ms(100);
    tacl_comm_abort((tacl_comm_t)arg);
    return NULL;
}

/* Shared scratch of that test: an id per round and a round counter. */
#define WATCHDOG_ROUNDS 10
typedef struct {
    int arrived;
    int id_ready;
    tacl_unique_id_t id;
} watchdog_scratch_t;

/* Both ranks reach the end of round (bounded wait). */
static void round_barrier(coll_ctx_t *ctx, int round)
{
    watchdog_scratch_t *w = (watchdog_scratch_t *)ctx->scratch;
    double deadline = coll_now() + 30;

    __atomic_add_fetch(&w->arrived, 1, __ATOMIC_SEQ_CST);
    while (__atomic_load_n(&w->arrived, __ATOMIC_SEQ_CST) <
           2 * (round + 1) && coll_now() < deadline)
        coll_sleep_ms(1);
}

static int body_abort_from_thread(coll_ctx_t *ctx)
{
    watchdog_scratch_t *w = (watchdog_scratch_t *)ctx->scratch;
    float s[4096] = {0}, r[4096];

    /* Each rank its own node, so the all-reduce runs over UCX (on the
     * loopback), whose progress and close once raced in the abort. */
    setenv("TACL_NODE_ID", ctx->rank == 0 ? "watchdog-a" : "watchdog-b", 1);
    setenv("UCX_NET_DEVICES", "lo", 1);
    for (int round = 0; round < WATCHDOG_ROUNDS; round++) {
        tacl_comm_t comm;
        tacl_status_t st;
        pthread_t tid;
        double deadline = coll_now() + 30;

        /* Rank 0 publishes a fresh id each round. */
        if (ctx->rank == 0) {
            COLL_CHECK_OK(ctx, tacl_get_unique_id(&w->id));
            __atomic_store_n(&w->id_ready, round + 1, __ATOMIC_SEQ_CST);
        }
        while (__atomic_load_n(&w->id_ready, __ATOMIC_SEQ_CST) < round + 1 &&
               coll_now() < deadline)
            coll_sleep_ms(1);
        COLL_CHECK_OK(ctx, tacl_comm_init_rank(2, &w->id, ctx->rank, &comm));
        if (ctx->rank == 1) {
            /* Never joins the all-reduce; waits for the abort to reach
             * it, then lets go of the communicator. */
            st = tacl_barrier(comm, NULL);
            COLL_CHECK(ctx, st != TACL_OK, "round %d: a barrier with an "
                       "aborted peer succeeded", round);
            tacl_comm_abort(comm);
        } else {
            COLL_CHECK(ctx, pthread_create(&tid, NULL, watchdog, comm) == 0,
                       "pthread_create failed");
            st = tacl_allreduce(s, r, 4096, TACL_FLOAT32, TACL_SUM, comm,
                                NULL);
            pthread_join(tid, NULL);
            COLL_CHECK(ctx, st != TACL_OK, "round %d: the aborted all-reduce "
                       "succeeded", round);
        }
        round_barrier(ctx, round);
    }
    return 0;
}

Test(failure, abort_from_another_thread, .timeout = 120)
{
    coll_opts_t o = {.nranks = 2, .deadline_s = 100,
                     .init = COLL_INIT_NONE, .destroy_may_fail = 1};

    coll_run_opts_expect_pass(&o, body_abort_from_thread);
}

/* init_env: which variables to set, on which port. */
typedef struct {
    int torch;     /* MASTER_* instead of TACL_* */
    int both;      /* TACL_* plus misleading MASTER_* */
    int port;
    int bad_port;
} env_case_t;

static void set_int_env(const char *name, int v)
{
    char buf[32];

    snprintf(buf, sizeof(buf), "%d", v);
    setenv(name, buf, 1);
}

static int body_init_env(coll_ctx_t *ctx)
{
    const env_case_t *ec = ctx->arg;
    char addr[64];
    tacl_comm_t c = NULL;
    int rank = -1, size = -1;
    int32_t mine = ctx->rank + 1, sum = 0;

    unsetenv("TACL_ROOT_ADDR");
    unsetenv("TACL_RANK");
    unsetenv("TACL_NRANKS");
    if (ec->torch || ec->both) {
        setenv("MASTER_ADDR", "127.0.0.1", 1);
        set_int_env("MASTER_PORT", ec->both ? ec->bad_port : ec->port);
        set_int_env("RANK", ec->both ? ctx->nranks - 1 - ctx->rank :
                    ctx->rank);
        set_int_env("WORLD_SIZE", ec->both ? 99 : ctx->nranks);
        set_int_env("LOCAL_RANK", ctx->rank);
    }
    if (!ec->torch) {
        snprintf(addr, sizeof(addr), "127.0.0.1:%d", ec->port);
        setenv("TACL_ROOT_ADDR", addr, 1);
        set_int_env("TACL_RANK", ctx->rank);
        set_int_env("TACL_NRANKS", ctx->nranks);
    }
    COLL_CHECK_OK(ctx, tacl_comm_init_env(&c));
    ctx->comm = c;
    COLL_CHECK_OK(ctx, tacl_comm_rank(c, &rank));
    COLL_CHECK_OK(ctx, tacl_comm_size(c, &size));
    COLL_CHECK(ctx, rank == ctx->rank && size == ctx->nranks,
               "init_env gave rank %d of %d", rank, size);
    COLL_CHECK_OK(ctx, tacl_allreduce(&mine, &sum, 1, TACL_INT32, TACL_SUM,
                                      c, NULL));
    COLL_CHECK(ctx, sum == ctx->nranks * (ctx->nranks + 1) / 2,
               "allreduce gave %d", sum);
    return 0;
}

static void run_init_env(int torch, int both)
{
    env_case_t ec = {torch, both, coll_free_port(), coll_free_port()};
    coll_opts_t opts = {.nranks = 3, .deadline_s = 40,
                        .init = COLL_INIT_NONE, .env = timeout_env,
                        .arg = &ec};
    coll_result_t *res = malloc(sizeof(*res));

    cr_assert(ec.port > 0 && ec.bad_port > 0, "no free port on 127.0.0.1");
    cr_assert_not_null(res);
    coll_run(&opts, body_init_env, res);
    coll_expect_pass(res);
    free(res);
}

Test(init_env, tacl_variables, .timeout = 60)
{
    run_init_env(0, 0);
}

Test(init_env, torchrun_variables, .timeout = 60)
{
    run_init_env(1, 0);
}

Test(init_env, tacl_variables_take_precedence, .timeout = 60)
{
    run_init_env(0, 1);
}
