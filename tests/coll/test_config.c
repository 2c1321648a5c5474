/*
 * Per-communicator configuration (tacl_config_t), request callbacks and
 * the progress thread.
 *
 * - Bad configurations are refused with a message naming the field.
 * - Two communicators of one process with different timeouts: a stalled
 *   peer fails the short one after about its timeout (well before the
 *   environment's TACL_TIMEOUT), while the long one rides out a stall
 *   longer than TACL_TIMEOUT.  The short one's error names it.
 * - A non-blocking init returns TACL_IN_PROGRESS, other calls on the
 *   handle say so too, and tacl_comm_get_async_error() is polled to OK; a
 *   non-blocking init that cannot complete ends in its timeout's error.
 * - A callback set on a complete request runs at once, a second one is
 *   refused, one set before completion runs exactly once (from wait), and
 *   abort completes a pending request with an error and its callback.
 * - With progress_thread = 1 an _nb all-reduce completes, and its
 *   callback runs, while nobody calls test or wait.
 *
 * Elapsed-time checks have generous bounds: they tell a 1 s timeout from
 * a 3 s one, nothing finer.
 */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "harness.h"

/* A fresh id, a one-rank communicator with cfg. */
static tacl_status_t init_one(const tacl_config_t *cfg, tacl_comm_t *comm_p)
{
    tacl_unique_id_t id;
    tacl_status_t st = tacl_get_unique_id(&id);

    if (st != TACL_OK)
        return st;
    return tacl_comm_init_rank_config(1, &id, 0, cfg, comm_p);
}

static void expect_bad(const tacl_config_t *cfg, const char *word)
{
    tacl_comm_t comm = NULL;
    tacl_status_t st = init_one(cfg, &comm);

    cr_assert_eq(st, TACL_ERR_INVALID_ARG, "config refused with %s",
                 tacl_status_string(st));
    cr_assert_null(comm, "a refused config must not set the handle");
    cr_assert(strstr(tacl_last_error(), word) != NULL,
              "message must name %s: %s", word, tacl_last_error());
}

Test(config, bad_values, .timeout = 60)
{
    static char longname[200];
    const tacl_config_t ok = TACL_CONFIG_INIT;
    const struct {
        tacl_config_t cfg;
        const char *word;
    } bad[] = {
        {{ok.size - 8, ok.version, 0, -1, -1, -1, NULL}, "size"},
        {{ok.size, 0, 0, -1, -1, -1, NULL}, "version"},
        {{ok.size, ok.version, -1, -1, -1, -1, NULL}, "timeout"},
        {{ok.size, ok.version, NAN, -1, -1, -1, NULL}, "timeout"},
        {{ok.size, ok.version, 0, 2, -1, -1, NULL}, "blocking"},
        {{ok.size, ok.version, 0, -1, -5, -1, NULL}, "check"},
        {{ok.size, ok.version, 0, -1, -1, 3, NULL}, "progress_thread"},
        {{ok.size, ok.version, 0, -1, -1, -1, longname}, "name"},
    };

    memset(longname, 'x', sizeof(longname) - 1);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        expect_bad(&bad[i].cfg, bad[i].word);
}

Test(config, defaults_and_split, .timeout = 60)
{
    tacl_config_t cfg = TACL_CONFIG_INIT;
    tacl_comm_t comm, sub;
    float x = 3, y = 0;

    cr_assert_eq(init_one(NULL, &comm), TACL_OK, "%s", tacl_last_error());
    cr_assert_eq(tacl_comm_split_config(comm, 0, 0, NULL, &sub), TACL_OK,
                 "%s", tacl_comm_last_error(comm));
    cr_assert_eq(tacl_comm_destroy(sub), TACL_OK);
    cfg.timeout = 5;
    cfg.name = "sub group";
    cfg.check = 1;
    cr_assert_eq(tacl_comm_split_config(comm, 0, 0, &cfg, &sub), TACL_OK,
                 "%s", tacl_comm_last_error(comm));
    cr_assert_eq(tacl_allreduce(&x, &y, 1, TACL_FLOAT32, TACL_SUM, sub,
                                NULL), TACL_OK, "%s",
                 tacl_comm_last_error(sub));
    cr_assert_eq(y, 3.0f);
    /* An error on the named communicator carries its name, blank
     * replaced. */
    cr_assert_eq(tacl_allreduce(&x, &y, 1, TACL_FLOAT32, TACL_BAND, sub,
                                NULL), TACL_ERR_INVALID_ARG);
    cr_assert(strstr(tacl_comm_last_error(sub), "sub_group") != NULL,
              "name missing: %s", tacl_comm_last_error(sub));
    /* ... and so do its flight dump's lines. */
    {
        char text[4096] = "";
        FILE *f = tmpfile();
        size_t n;

        cr_assert_not_null(f);
        cr_assert_eq(tacl_comm_dump_flight(sub, f), TACL_OK);
        rewind(f);
        n = fread(text, 1, sizeof(text) - 1, f);
        text[n] = '\0';
        fclose(f);
        /* The header line, and each record's (op=...). */
        cr_assert(strstr(text, "name=sub_group world=") != NULL &&
                  strstr(text, "name=sub_group op=0 ") != NULL,
                  "dump: %s", text);
    }
    cfg.blocking = 7;
    cr_assert_eq(tacl_comm_split_config(comm, 0, 0, &cfg, &sub),
                 TACL_ERR_INVALID_ARG);
    cr_assert_eq(tacl_comm_destroy(comm), TACL_OK);
}

/* A non-blocking init that cannot complete (rank 1 never comes) ends in
 * the configured timeout, named; the handle is then destroyed. */
Test(config, nonblocking_init_fails, .timeout = 60)
{
    tacl_config_t cfg = TACL_CONFIG_INIT;
    tacl_unique_id_t id;
    tacl_status_t st, err = TACL_OK;
    tacl_comm_t comm = NULL;
    double t0 = coll_now();
    int rank;

    cfg.blocking = 0;
    cfg.timeout = 1;
    cfg.name = "lonely";
    cr_assert_eq(tacl_get_unique_id(&id), TACL_OK);
    st = tacl_comm_init_rank_config(2, &id, 0, &cfg, &comm);
    cr_assert_eq(st, TACL_IN_PROGRESS, "init returned %s",
                 tacl_status_string(st));
    cr_assert_not_null(comm);
    cr_assert_eq(tacl_comm_rank(comm, &rank), TACL_IN_PROGRESS);
    while (coll_now() - t0 < 30) {
        cr_assert_eq(tacl_comm_get_async_error(comm, &err), TACL_OK);
        if (err != TACL_IN_PROGRESS)
            break;
        coll_sleep_ms(10);
    }
    cr_assert(err < 0, "async error %s after %.1f s",
              tacl_status_string(err), coll_now() - t0);
    cr_assert(coll_now() - t0 < 10, "the 1 s timeout took %.1f s",
              coll_now() - t0);
    cr_assert(strstr(tacl_comm_last_error(comm), "lonely") != NULL,
              "name missing: %s", tacl_comm_last_error(comm));
    cr_assert_eq(tacl_comm_rank(comm, &rank), err);
    cr_assert_eq(tacl_comm_destroy(comm), TACL_OK);
    cr_assert_eq(tacl_comm_destroy(comm), TACL_ERR_INVALID_USAGE);
}

/*
 * Two ranks, two communicators on two ids (the second id travels through
 * the scratch area), TACL_TIMEOUT=3.  "long_pg" (8 s) outlasts a 4 s
 * stall of rank 1; "short_pg" (1 s) fails after about 1 s when rank 1
 * never calls.
 */
typedef struct {
    _Atomic int id2_ready;
    _Atomic int short_done;
    tacl_unique_id_t id2;
} timeouts_scratch_t;

static int body_two_timeouts(coll_ctx_t *ctx)
{
    timeouts_scratch_t *sh = (timeouts_scratch_t *)ctx->scratch;
    tacl_config_t cs = TACL_CONFIG_INIT, cl = TACL_CONFIG_INIT;
    tacl_comm_t shortc, longc;
    float x = 1, y = 0;
    tacl_status_t st;
    double t0, dt;

    if (ctx->rank == 0) {
        COLL_CHECK_OK(ctx, tacl_get_unique_id(&sh->id2));
        atomic_store(&sh->id2_ready, 1);
    }
    for (t0 = coll_now(); !atomic_load(&sh->id2_ready);) {
        COLL_CHECK(ctx, coll_now() - t0 < 30, "no second id");
        coll_sleep_ms(5);
    }
    cs.timeout = 1;
    cs.name = "short_pg";
    cl.timeout = 8;
    cl.name = "long_pg";
    COLL_CHECK_OK(ctx, tacl_comm_init_rank_config(2, ctx->id, ctx->rank,
                                                  &cs, &shortc));
    COLL_CHECK_OK(ctx, tacl_comm_init_rank_config(2, &sh->id2, ctx->rank,
                                                  &cl, &longc));
    if (ctx->rank == 1)
        coll_sleep_ms(4000);
    t0 = coll_now();
    st = tacl_allreduce(&x, &y, 1, TACL_FLOAT32, TACL_SUM, longc, NULL);
    dt = coll_now() - t0;
    COLL_CHECK(ctx, st == TACL_OK && y == 2.0f,
               "long_pg all-reduce: %s, y %g after %.1f s: %s",
               tacl_status_string(st), y, dt, tacl_comm_last_error(longc));
    if (ctx->rank == 0) {
        COLL_CHECK(ctx, dt > 3.2, "rank 1 stalled 4 s, yet %.1f s", dt);
        t0 = coll_now();
        st = tacl_allreduce(&x, &y, 1, TACL_FLOAT32, TACL_SUM, shortc, NULL);
        dt = coll_now() - t0;
        COLL_CHECK(ctx, st == TACL_ERR_TIMEOUT, "short_pg gave %s",
                   tacl_status_string(st));
        COLL_CHECK(ctx, dt > 0.7 && dt < 2.8,
                   "short_pg (1 s) timed out after %.2f s", dt);
        COLL_CHECK(ctx, strstr(tacl_comm_last_error(shortc), "short_pg"),
                   "name missing: %s", tacl_comm_last_error(shortc));
        atomic_store(&sh->short_done, 1);
    } else {
        for (t0 = coll_now(); !atomic_load(&sh->short_done);) {
            COLL_CHECK(ctx, coll_now() - t0 < 30, "rank 0 never finished");
            coll_sleep_ms(5);
        }
    }
    /* The long one still works after the short one failed. */
    COLL_CHECK_OK(ctx, tacl_allreduce(&x, &y, 1, TACL_FLOAT32, TACL_SUM,
                                      longc, NULL));
    COLL_CHECK(ctx, y == 2.0f, "y %g", y);
    COLL_CHECK_OK(ctx, tacl_comm_destroy(longc));
    COLL_CHECK_OK(ctx, tacl_comm_destroy(shortc));
    return 0;
}

Test(config, two_timeouts_one_process, .timeout = 90)
{
    static const char *const env[] = {"TACL_TIMEOUT=3", NULL};
    coll_opts_t o = {.nranks = 2, .deadline_s = 60,
                     .init = COLL_INIT_MANUAL, .env = env};

    cr_assert(sizeof(timeouts_scratch_t) <= COLL_SCRATCH_BYTES);
    coll_run_opts_expect_pass(&o, body_two_timeouts);
}

/* Non-blocking init, polled; rank 1 comes late so rank 0 sees it run. */
static int body_nonblocking(coll_ctx_t *ctx)
{
    tacl_config_t cfg = TACL_CONFIG_INIT;
    tacl_status_t st, err = TACL_IN_PROGRESS;
    int r = -1, polls = 0;
    int32_t x = 6 + ctx->rank, y = 0;
    double t0;

    cfg.blocking = 0;
    cfg.name = "nb";
    if (ctx->rank == 1)
        coll_sleep_ms(300);
    st = tacl_comm_init_rank_config(2, ctx->id, ctx->rank, &cfg,
                                    &ctx->comm);
    COLL_CHECK(ctx, st == TACL_IN_PROGRESS || st == TACL_OK,
               "init returned %s", tacl_status_string(st));
    if (ctx->rank == 0) {
        COLL_CHECK(ctx, st == TACL_IN_PROGRESS,
                   "rank 1 is 300 ms late, yet init returned %s",
                   tacl_status_string(st));
        COLL_CHECK(ctx, tacl_allreduce(&x, &y, 1, TACL_INT32, TACL_SUM,
                                       ctx->comm, NULL) == TACL_IN_PROGRESS,
                   "a collective on an initialising comm");
    }
    for (t0 = coll_now(); err == TACL_IN_PROGRESS; polls++) {
        COLL_CHECK_OK(ctx, tacl_comm_get_async_error(ctx->comm, &err));
        COLL_CHECK(ctx, coll_now() - t0 < 30, "init still running");
        coll_sleep_ms(2);
    }
    COLL_CHECK(ctx, err == TACL_OK, "init ended with %s: %s",
               tacl_status_string(err), tacl_comm_last_error(ctx->comm));
    COLL_CHECK_OK(ctx, tacl_comm_rank(ctx->comm, &r));
    COLL_CHECK(ctx, r == ctx->rank, "rank %d", r);
    COLL_CHECK_OK(ctx, tacl_allreduce(&x, &y, 1, TACL_INT32, TACL_BXOR,
                                      ctx->comm, NULL));
    COLL_CHECK(ctx, y == (6 ^ 7), "bxor gave %d", (int)y);
    return 0;
}

/* Two ranks that make their communicator themselves, from ctx->id. */
static void run_manual(coll_body_t body)
{
    coll_opts_t o = {.nranks = 2, .deadline_s = 40,
                     .init = COLL_INIT_MANUAL};

    coll_run_opts_expect_pass(&o, body);
}

Test(config, nonblocking_init_polled, .timeout = 60)
{
    run_manual(body_nonblocking);
}

/*
 * Callbacks.
 */
typedef struct {
    _Atomic int calls;
    _Atomic int status;
    tacl_request_t req;
} cb_record_t;

static void record_cb(tacl_request_t req, tacl_status_t status, void *arg)
{
    cb_record_t *r = arg;

    r->req = req;
    atomic_store(&r->status, status);
    atomic_fetch_add(&r->calls, 1);
}

Test(callback, already_complete_and_second, .timeout = 60)
{
    tacl_comm_t comm;
    tacl_request_t req;
    cb_record_t rec = {0}, other = {0};
    float x = 5, y = 0;

    cr_assert_eq(init_one(NULL, &comm), TACL_OK, "%s", tacl_last_error());
    cr_assert_eq(tacl_allreduce_nb(&x, &y, 1, TACL_FLOAT32, TACL_SUM, comm,
                                   NULL, &req), TACL_OK);
    cr_assert_eq(tacl_request_wait(req), TACL_OK);
    cr_assert_eq(tacl_request_set_callback(req, record_cb, &rec), TACL_OK);
    cr_assert_eq(atomic_load(&rec.calls), 1, "not called at once");
    cr_assert_eq(atomic_load(&rec.status), TACL_OK);
    cr_assert_eq(rec.req, req);
    cr_assert_eq(tacl_request_set_callback(req, record_cb, &other),
                 TACL_ERR_INVALID_USAGE);
    cr_assert_eq(atomic_load(&other.calls), 0);
    cr_assert_eq(atomic_load(&rec.calls), 1);
    cr_assert_eq(tacl_request_set_callback(req, NULL, NULL),
                 TACL_ERR_INVALID_ARG);
    cr_assert_eq(tacl_request_free(req), TACL_OK);
    cr_assert_eq(y, 5.0f);
    cr_assert_eq(tacl_comm_destroy(comm), TACL_OK);
}

/* Set before completion (rank 1 is late), run once by the wait. */
static int body_cb_wait(coll_ctx_t *ctx)
{
    cb_record_t rec = {0};
    tacl_request_t req;
    int64_t x = 0x0f0 << ctx->rank, y = 0;

    if (ctx->rank == 1)
        coll_sleep_ms(200);
    COLL_CHECK_OK(ctx, tacl_allreduce_nb(&x, &y, 1, TACL_INT64, TACL_BOR,
                                         ctx->comm, NULL, &req));
    COLL_CHECK_OK(ctx, tacl_request_set_callback(req, record_cb, &rec));
    COLL_CHECK_OK(ctx, tacl_request_wait(req));
    COLL_CHECK(ctx, atomic_load(&rec.calls) == 1, "%d calls",
               atomic_load(&rec.calls));
    COLL_CHECK(ctx, atomic_load(&rec.status) == TACL_OK, "status %d",
               atomic_load(&rec.status));
    COLL_CHECK(ctx, y == (0x0f0 | 0x1e0), "bor gave %#llx",
               (unsigned long long)y);
    COLL_CHECK_OK(ctx, tacl_request_free(req));
    COLL_CHECK(ctx, atomic_load(&rec.calls) == 1, "called again");
    return 0;
}

Test(callback, runs_once_from_wait, .timeout = 60)
{
    coll_run_expect_pass(2, body_cb_wait, NULL, NULL);
}

/* Rank 0's all-reduce waits for rank 1, which never calls; rank 0
 * aborts: the request completes with an error and the callback says so. */
typedef struct {
    _Atomic int ready;
    _Atomic int aborted;
} abort_scratch_t;

static int body_cb_abort(coll_ctx_t *ctx)
{
    abort_scratch_t *sh = (abort_scratch_t *)ctx->scratch;
    cb_record_t rec = {0};
    tacl_request_t req;
    float x = 1, y = 0;
    tacl_status_t st;
    double t0;

    if (ctx->rank == 1) {
        /* Init is collective but does not end at once on every rank: an
         * abort before rank 1's init returned would fail that init. */
        atomic_store(&sh->ready, 1);
        for (t0 = coll_now(); !atomic_load(&sh->aborted);) {
            COLL_CHECK(ctx, coll_now() - t0 < 30, "rank 0 never aborted");
            coll_sleep_ms(5);
        }
        return 0;
    }
    COLL_CHECK_OK(ctx, tacl_allreduce_nb(&x, &y, 1, TACL_FLOAT32, TACL_SUM,
                                         ctx->comm, NULL, &req));
    COLL_CHECK_OK(ctx, tacl_request_set_callback(req, record_cb, &rec));
    /* ctx->arg: how long to let a progress thread poll meanwhile. */
    if (ctx->arg != NULL)
        coll_sleep_ms(*(const int *)ctx->arg);
    COLL_CHECK(ctx, atomic_load(&rec.calls) == 0, "called while pending");
    for (t0 = coll_now(); !atomic_load(&sh->ready); coll_sleep_ms(1))
        COLL_CHECK(ctx, coll_now() - t0 < 30, "rank 1 never finished init");
    COLL_CHECK_OK(ctx, tacl_comm_abort(ctx->comm));
    ctx->comm = NULL;
    atomic_store(&sh->aborted, 1);
    /* The callback ran in this thread, inside the abort. */
    COLL_CHECK(ctx, atomic_load(&rec.calls) == 1, "%d calls after abort",
               atomic_load(&rec.calls));
    COLL_CHECK(ctx, atomic_load(&rec.status) < 0, "callback status %d",
               atomic_load(&rec.status));
    st = tacl_request_wait(req);
    COLL_CHECK(ctx, st == atomic_load(&rec.status),
               "wait gave %s, the callback %d", tacl_status_string(st),
               atomic_load(&rec.status));
    COLL_CHECK_OK(ctx, tacl_request_free(req));
    COLL_CHECK(ctx, atomic_load(&rec.calls) == 1, "called again");
    return 0;
}

Test(callback, error_after_abort, .timeout = 60)
{
    coll_opts_t o = {.nranks = 2, .deadline_s = 40, .destroy_may_fail = 1};

    cr_assert(sizeof(abort_scratch_t) <= COLL_SCRATCH_BYTES);
    coll_run_opts_expect_pass(&o, body_cb_abort);
}

/*
 * The progress thread: _nb all-reduces complete, and their callbacks
 * run, while this thread only sleeps.  Rank 1 is late, so the operation
 * is pending when the callback is set.
 */
static int body_progress(coll_ctx_t *ctx)
{
    tacl_config_t cfg = TACL_CONFIG_INIT;
    cb_record_t rec[3] = {{0}};
    tacl_request_t req[3];
    uint32_t x[3][64], y[3][64];
    int done = 0;
    double t0;

    cfg.progress_thread = 1;
    cfg.name = "progressed";
    COLL_CHECK_OK(ctx, tacl_comm_init_rank_config(2, ctx->id, ctx->rank,
                                                  &cfg, &ctx->comm));
    if (ctx->rank == 1)
        coll_sleep_ms(200);
    for (int k = 0; k < 3; k++) {
        for (int i = 0; i < 64; i++)
            x[k][i] = (uint32_t)(i * 7 + k) << (ctx->rank * 8);
        COLL_CHECK_OK(ctx, tacl_allreduce_nb(x[k], y[k], 64, TACL_UINT32,
                                             TACL_BXOR, ctx->comm, NULL,
                                             &req[k]));
        COLL_CHECK_OK(ctx, tacl_request_set_callback(req[k], record_cb,
                                                     &rec[k]));
    }
    for (t0 = coll_now(); done < 3; coll_sleep_ms(1)) {
        done = 0;
        for (int k = 0; k < 3; k++)
            done += atomic_load(&rec[k].calls);
        COLL_CHECK(ctx, coll_now() - t0 < 20,
                   "%d of 3 callbacks after 20 s without test or wait",
                   done);
    }
    for (int k = 0; k < 3; k++) {
        int fin = 0;

        COLL_CHECK(ctx, atomic_load(&rec[k].calls) == 1 &&
                        atomic_load(&rec[k].status) == TACL_OK,
                   "op %d: %d calls, status %d", k,
                   atomic_load(&rec[k].calls), atomic_load(&rec[k].status));
        for (int i = 0; i < 64; i++) {
            uint32_t v = (uint32_t)(i * 7 + k);

            COLL_CHECK(ctx, y[k][i] == (v ^ (v << 8)),
                       "op %d [%d]: %#x", k, i, y[k][i]);
        }
        COLL_CHECK_OK(ctx, tacl_request_test(req[k], &fin));
        COLL_CHECK(ctx, fin == 1, "test says op %d is not done", k);
        COLL_CHECK_OK(ctx, tacl_request_free(req[k]));
    }
    return 0;
}

Test(progress, completes_without_wait, .timeout = 60)
{
    run_manual(body_progress);
}

/* TACL_PROGRESS_THREAD=1, and a request left pending across an abort:
 * the progress thread polls it meanwhile without completing it, abort
 * joins the thread, and the callback reports the error once. */
Test(progress, abort_with_pending_request, .timeout = 60)
{
    static const char *const env[] = {"TACL_PROGRESS_THREAD=1", NULL};
    static int linger_ms = 50;
    coll_opts_t o = {.nranks = 2, .deadline_s = 40, .destroy_may_fail = 1,
                     .env = env, .arg = &linger_ms};

    coll_run_opts_expect_pass(&o, body_cb_abort);
}
