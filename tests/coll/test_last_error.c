/*
 * The last-error rule (tacl.h, lib/hold.c): a call that returns an error
 * leaves its message, so tacl_comm_last_error() and tacl_last_error()
 * are never empty after one, whatever failed the call and whichever
 * thread learnt of it first.  Checked under the fault paths that once
 * left them empty: a rank killed while its peers run blocking, fast and
 * _nb calls (some completed by the progress thread before anyone waits,
 * some freed before the message is read), and a communicator aborted
 * from another thread while its calls run.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "harness.h"

#define KILL_TRIALS 10
#define ABORT_TRIALS 6
#define CALLS 4000

/* What a rank saw when its first call failed. */
typedef struct {
    int failed;             /* a call returned an error */
    int empty_comm;         /* ... and tacl_comm_last_error() was empty */
    int empty_thread;       /* ... and tacl_last_error() was empty */
    int empty_after_free;   /* empty once the failed request was freed */
    char what[64];          /* the kind of call that failed */
} seen_t;

typedef struct {
    int go;                 /* the victim may die / the abort may come */
    seen_t seen[COLL_MAX_RANKS][2];
} last_scratch_t;

static last_scratch_t *sc(coll_ctx_t *ctx)
{
    return (last_scratch_t *)ctx->scratch;
}

/* Record what the messages said after call kind failed with st. */
static void note(seen_t *s, tacl_comm_t comm, tacl_status_t st,
                 const char *kind)
{
    if (st == TACL_OK || s->failed)
        return;
    s->failed = 1;
    s->empty_comm = tacl_comm_last_error(comm)[0] == '\0';
    s->empty_thread = tacl_last_error()[0] == '\0';
    snprintf(s->what, sizeof(s->what), "%s", kind);
}

/*
 * One call of a mix that runs through every engine: small blocking (the
 * fast engine), medium blocking (a schedule), small and medium _nb with
 * a wait, and _nb tested until done (which a progress thread may finish
 * first).  Returns the first error, the messages noted in s.
 */
static tacl_status_t mixed(tacl_comm_t comm, int k, float *in, float *out,
                           seen_t *s)
{
    size_t count = k % 3 == 0 ? 4 : 2048 + (size_t)(k % 5);
    tacl_request_t req = NULL;
    tacl_status_t st;
    int done = 0;

    switch (k % 4) {
    case 0:
    case 1:
        st = tacl_allreduce(in, out, count, TACL_FLOAT32, TACL_SUM, comm,
                            NULL);
        note(s, comm, st, "blocking all-reduce");
        return st;
    case 2:
        st = tacl_allreduce_nb(in, out, count, TACL_FLOAT32, TACL_SUM, comm,
                               NULL, &req);
        note(s, comm, st, "_nb all-reduce");
        if (st != TACL_OK)
            return st;
        st = tacl_request_wait(req);
        note(s, comm, st, "wait");
        break;
    default:
        st = tacl_allgather_nb(in, out, count / 8, TACL_FLOAT32, comm, NULL,
                               &req);
        note(s, comm, st, "_nb all-gather");
        if (st != TACL_OK)
            return st;
        while (st == TACL_OK && !done)
            st = tacl_request_test(req, &done);
        note(s, comm, st, "test");
        break;
    }
    tacl_request_free(req);
    if (st != TACL_OK && s->failed && !s->empty_comm)
        s->empty_after_free = tacl_comm_last_error(comm)[0] == '\0';
    return st;
}

static int body_kill(coll_ctx_t *ctx)
{
    int victim = ctx->nranks - 1;
    seen_t *s = &sc(ctx)->seen[ctx->rank][0];
    static float in[16384], out[16384 * 8];
    tacl_config_t cfg = TACL_CONFIG_INIT;
    tacl_comm_t comm;
    tacl_status_t st = TACL_OK;
    int kill_at = 40 + (int)((long long)(coll_now() * 1e6) % 200);

    /* A progress thread finishes _nb calls on its own, so some fail
     * before their caller waits. */
    cfg.progress_thread = 1;
    cfg.timeout = 10;
    COLL_CHECK_OK(ctx, tacl_comm_init_rank_config(ctx->nranks, ctx->id,
                                                  ctx->rank, &cfg, &comm));
    for (int k = 0; k < CALLS && st == TACL_OK; k++) {
        if (ctx->rank == victim && k == kill_at)
            raise(SIGKILL);
        st = mixed(comm, k, in, out, s);
    }
    COLL_CHECK(ctx, st != TACL_OK, "no call failed after the kill");
    tacl_comm_abort(comm);
    return 0;
}

/* Every survivor's failure left a message, as the rule says. */
static void expect_messages(const coll_result_t *res, int victim, int per,
                            int trial)
{
    const last_scratch_t *s = (const last_scratch_t *)res->scratch;

    for (int r = 0; r < res->nranks; r++) {
        if (r == victim)
            continue;
        for (int i = 0; i < per; i++) {
            const seen_t *e = &s->seen[r][i];

            if (!e->failed)
                continue;
            cr_expect(!e->empty_comm, "trial %d rank %d: %s failed with an "
                      "empty tacl_comm_last_error()", trial, r, e->what);
            cr_expect(!e->empty_thread, "trial %d rank %d: %s failed with "
                      "an empty tacl_last_error()", trial, r, e->what);
            cr_expect(!e->empty_after_free, "trial %d rank %d: after %s "
                      "failed, freeing its request emptied the message",
                      trial, r, e->what);
        }
    }
}

Test(last_error, survivors_of_a_kill, .timeout = 300)
{
    for (int trial = 0; trial < KILL_TRIALS; trial++) {
        coll_opts_t o = {.nranks = 4, .deadline_s = 60,
                         .init = COLL_INIT_MANUAL, .destroy_may_fail = 1};
        coll_result_t *res = malloc(sizeof(*res));
        coll_result_t copy;

        cr_assert_not_null(res);
        coll_run(&o, body_kill, res);
        copy = *res;
        /* The victim died on purpose; judge the others. */
        copy.rank[3].exited = 1;
        copy.rank[3].exit_code = 0;
        copy.rank[3].signal = 0;
        coll_expect_pass(&copy);
        expect_messages(res, 3, 1, trial);
        free(res);
    }
}

/* The abort case: two threads of each rank run the mix until their
 * calls fail, one on the communicator and one on its split; the main
 * thread aborts the communicator meanwhile. */
typedef struct {
    coll_ctx_t *ctx;
    tacl_comm_t comm;
    int slot;
} runner_t;

static void *runner(void *arg)
{
    runner_t *r = arg;
    seen_t *s = &sc(r->ctx)->seen[r->ctx->rank][r->slot];
    static __thread float in[16384], out[16384 * 8];
    tacl_status_t st = TACL_OK;

    for (int k = r->slot; k < 100 * CALLS && st == TACL_OK; k += 2)
        st = mixed(r->comm, k, in, out, s);
    return NULL;
}

static int body_abort(coll_ctx_t *ctx)
{
    tacl_config_t cfg = TACL_CONFIG_INIT;
    runner_t runners[2];
    pthread_t tid[2];
    tacl_comm_t comm, child;

    cfg.progress_thread = ctx->rank % 2;
    cfg.timeout = 10;
    COLL_CHECK_OK(ctx, tacl_comm_init_rank_config(ctx->nranks, ctx->id,
                                                  ctx->rank, &cfg, &comm));
    /* One thread on comm, one on a split of it, which shares comm's
     * connections: the abort of comm fails the child's calls too, and
     * the child stays a live handle whose message must say why. */
    COLL_CHECK_OK(ctx, tacl_comm_split(comm, 0, ctx->rank, &child));
    for (int i = 0; i < 2; i++) {
        runners[i] = (runner_t){ctx, i == 0 ? comm : child, i};
        COLL_CHECK(ctx, pthread_create(&tid[i], NULL, runner,
                                       &runners[i]) == 0, "pthread_create");
        if (i == 0)
            coll_sleep_ms(20 + (int)((long long)(coll_now() * 1e3) % 40));
    }
    coll_sleep_ms(10 + (int)((long long)(coll_now() * 1e3) % 30));
    tacl_comm_abort(comm);
    for (int i = 0; i < 2; i++)
        pthread_join(tid[i], NULL);
    tacl_comm_destroy(child);
    return 0;
}

Test(last_error, victims_of_an_abort, .timeout = 300)
{
    for (int trial = 0; trial < ABORT_TRIALS; trial++) {
        coll_opts_t o = {.nranks = 4, .deadline_s = 60,
                         .init = COLL_INIT_MANUAL, .destroy_may_fail = 1};
        coll_result_t *res = malloc(sizeof(*res));

        cr_assert_not_null(res);
        coll_run(&o, body_abort, res);
        coll_expect_pass(res);
        expect_messages(res, -1, 2, trial);
        free(res);
    }
}
