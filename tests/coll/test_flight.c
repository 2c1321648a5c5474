/*
 * The flight recorder.  Three ranks run all-reduces; rank 2 skips the
 * last one and sleeps, so ranks 0 and 1 time out (TACL_TIMEOUT=2) or hear
 * of the other's timeout.  Their automatic dumps (TACL_FLIGHT_DUMP_FILE)
 * must show that all-reduce pending with the messages it waits for, one
 * of them from rank 2; a dump through tacl_comm_dump_flight afterwards
 * shows it failed, and rank 2's shows it never started.  Also: with
 * TACL_FLIGHT_SIGNAL set, a signal makes the next call dump; the ring
 * keeps the last TACL_FLIGHT_RECORDS operations, and 0 keeps none.  The
 * first collective's two small all-gathers (the fast-path area's, which
 * rank 0's TACL_FAST_MAX=0 turns down) take sequence numbers 0 and 1, so
 * the all-reduces are 2, 3 and 4.  With FLIGHT_TEST_KEEP set the dumps stay in the printed folder (that is how
 * tests/tools/testdata was made).
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "harness.h"

#define NOPS 3
#define COUNT 1024

typedef struct {
    int survivors_done;
    int waits_on_2;
} flight_scratch_t;

static flight_scratch_t *scratch(coll_ctx_t *ctx)
{
    return (flight_scratch_t *)ctx->scratch;
}

/* The whole file, NUL-terminated, or NULL. */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    char *text;
    long n;

    if (f == NULL)
        return NULL;
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    rewind(f);
    text = calloc(1, (size_t)n + 1);
    if (text != NULL && fread(text, 1, (size_t)n, f) != (size_t)n) {
        free(text);
        text = NULL;
    }
    fclose(f);
    return text;
}

/* The line of text holding both needles, or NULL. */
static const char *line_with(const char *text, const char *a, const char *b)
{
    for (const char *l = text; l != NULL && *l != '\0';) {
        const char *end = strchr(l, '\n');
        size_t n = end ? (size_t)(end - l) : strlen(l);
        char buf[1024];

        snprintf(buf, sizeof(buf), "%.*s", (int)n, l);
        if (strstr(buf, a) != NULL && strstr(buf, b) != NULL)
            return l;
        l = end ? end + 1 : NULL;
    }
    return NULL;
}

static int check_survivor(coll_ctx_t *ctx, const char *path)
{
    char *text = slurp(path);
    const char *l;

    COLL_CHECK(ctx, text != NULL, "no automatic dump in %s", path);
    l = line_with(text, "seq=4 coll=allreduce", "state=pending");
    COLL_CHECK(ctx, l != NULL, "no pending all-reduce seq 4 in:\n%s", text);
    COLL_CHECK(ctx, line_with(l, "seq=4", " wait=") != NULL &&
               line_with(l, "seq=4", "bytes_left=") != NULL,
               "the pending all-reduce names no message it waits for:\n%s",
               text);
    if (line_with(l, "seq=4", "recv:2:") != NULL)
        __atomic_add_fetch(&scratch(ctx)->waits_on_2, 1, __ATOMIC_SEQ_CST);
    COLL_CHECK(ctx, line_with(text, "dump=request", "") != NULL &&
               line_with(strstr(text, "dump=request"), "seq=4 coll=allreduce",
                         "state=failed") != NULL,
               "the dump on request does not show seq 4 failed:\n%s", text);
    free(text);
    return 0;
}

static int check_behind(coll_ctx_t *ctx, const char *path)
{
    char *text = slurp(path);

    COLL_CHECK(ctx, text != NULL, "no dump in %s", path);
    COLL_CHECK(ctx, line_with(text, "seq=3 coll=allreduce", "state=done") &&
               !line_with(text, "seq=4 coll", ""),
               "rank 2 should have finished seq 3 and never started 4:\n%s",
               text);
    free(text);
    return 0;
}

static int body(coll_ctx_t *ctx)
{
    const char *dir = ctx->arg;
    float *buf = calloc(COUNT, sizeof(float));
    char path[512];
    FILE *f;

    COLL_CHECK(ctx, buf != NULL, "out of memory");
    for (int i = 0; i < NOPS; i++) {
        tacl_status_t st;

        if (i == NOPS - 1 && ctx->rank == 2)
            break;
        st = tacl_allreduce(buf, buf, COUNT, TACL_FLOAT32, TACL_SUM,
                            ctx->comm, NULL);
        if (i < NOPS - 1)
            COLL_CHECK_OK(ctx, st);
        else
            COLL_CHECK(ctx, st == TACL_ERR_TIMEOUT || st == TACL_ERR_REMOTE,
                       "the all-reduce rank 2 skipped returned %s",
                       tacl_status_string(st));
    }
    free(buf);
    if (ctx->rank == 2) {
        double deadline = coll_now() + 30;
        while (__atomic_load_n(&scratch(ctx)->survivors_done,
                               __ATOMIC_SEQ_CST) < 2 && coll_now() < deadline)
            coll_sleep_ms(10);
    }
    /* Append the requested dump to the automatic one. */
    snprintf(path, sizeof(path), "%s/flight.%d", dir, ctx->rank);
    f = fopen(path, "a");
    COLL_CHECK(ctx, f != NULL, "cannot open %s", path);
    COLL_CHECK_OK(ctx, tacl_comm_dump_flight(ctx->comm, f));
    fclose(f);
    if (ctx->rank == 2)
        return check_behind(ctx, path);
    if (check_survivor(ctx, path) != 0)
        return 1;
    __atomic_add_fetch(&scratch(ctx)->survivors_done, 1, __ATOMIC_SEQ_CST);
    return 0;
}

Test(flight, rank_behind_is_recorded, .timeout = 90)
{
    char dir[256], dumpenv[400], cmd[600];
    /* The dumps of a pending operation name its steps and messages: an
     * execution's, so off the fast path, which has none. */
    const char *env[] = {"TACL_TIMEOUT=2", "TACL_FAST_MAX=0", dumpenv, NULL};
    coll_opts_t opts = {.nranks = 3, .deadline_s = 60, .env = env,
                        .destroy_may_fail = 1, .arg = dir};
    coll_result_t *res = malloc(sizeof(*res));
    int waits_on_2;

    cr_assert_not_null(res);
    snprintf(dir, sizeof(dir), "%s/tacl-flight-XXXXXX", P_tmpdir);
    cr_assert_not_null(mkdtemp(dir));
    snprintf(dumpenv, sizeof(dumpenv), "TACL_FLIGHT_DUMP_FILE=%s/flight.%%r",
             dir);
    coll_run(&opts, body, res);
    coll_expect_pass(res);
    memcpy(&waits_on_2,
           res->scratch + offsetof(flight_scratch_t, waits_on_2),
           sizeof(int));
    cr_expect_gt(waits_on_2, 0, "no survivor's dump shows a receive from "
                 "rank 2 pending");
    if (getenv("FLIGHT_TEST_KEEP") != NULL) {
        printf("flight dumps kept in %s\n", dir);
    } else {
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
        cr_expect_eq(system(cmd), 0);
    }
    free(res);
}

/* Raise the signal between two all-reduces: the second one dumps. */
static int signal_body(coll_ctx_t *ctx)
{
    const char *dir = ctx->arg;
    float buf[16] = {0};
    char path[512], *text;

    COLL_CHECK_OK(ctx, tacl_allreduce(buf, buf, 16, TACL_FLOAT32, TACL_SUM,
                                      ctx->comm, NULL));
    raise(SIGUSR1);
    COLL_CHECK_OK(ctx, tacl_allreduce(buf, buf, 16, TACL_FLOAT32, TACL_SUM,
                                      ctx->comm, NULL));
    snprintf(path, sizeof(path), "%s/signal.%d", dir, ctx->rank);
    text = slurp(path);
    COLL_CHECK(ctx, text != NULL, "no dump in %s after the signal", path);
    COLL_CHECK(ctx, line_with(text, "dump=signal", "records=") != NULL &&
               line_with(text, "coll=allreduce", "state=done") != NULL,
               "the signal's dump lacks the first all-reduce:\n%s", text);
    free(text);
    return 0;
}

Test(flight, dump_on_signal, .timeout = 60)
{
    char dir[256], dumpenv[400], cmd[600];
    const char *env[] = {"TACL_FLIGHT_SIGNAL=SIGUSR1", dumpenv, NULL};

    snprintf(dir, sizeof(dir), "%s/tacl-flight-XXXXXX", P_tmpdir);
    cr_assert_not_null(mkdtemp(dir));
    snprintf(dumpenv, sizeof(dumpenv),
             "TACL_FLIGHT_DUMP_FILE=%s/signal.%%r", dir);
    coll_run_expect_pass(2, signal_body, dir, env);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    cr_expect_eq(system(cmd), 0);
}

/* Ten all-reduces through a ring of four records (or none). */
static int ring_body(coll_ctx_t *ctx)
{
    int cap = *(const int *)ctx->arg;
    float buf[4] = {0};
    char *text = NULL;
    size_t len = 0;
    FILE *f;

    for (int i = 0; i < 10; i++)
        COLL_CHECK_OK(ctx, tacl_allreduce(buf, buf, 4, TACL_FLOAT32,
                                          TACL_SUM, ctx->comm, NULL));
    f = open_memstream(&text, &len);
    COLL_CHECK(ctx, f != NULL, "open_memstream failed");
    COLL_CHECK_OK(ctx, tacl_comm_dump_flight(ctx->comm, f));
    fclose(f);
    if (cap == 4)
        COLL_CHECK(ctx, line_with(text, "records=12", "kept=4") &&
                   line_with(text, "records=12", "capacity=4") &&
                   !line_with(text, "op=7 ", "") &&
                   line_with(text, "op=8 seq=8", "state=done") &&
                   line_with(text, "op=11 seq=11", "state=done"),
                   "a ring of 4 after 12 operations should keep 8..11:\n%s",
                   text);
    else
        COLL_CHECK(ctx, line_with(text, "kept=0", "capacity=0") &&
                   !line_with(text, "op=", ""),
                   "TACL_FLIGHT_RECORDS=0 should keep nothing:\n%s", text);
    free(text);
    return 0;
}

Test(flight, ring_keeps_the_last_records, .timeout = 60)
{
    /* Off the fast path (no "fast" records); the first call's two
     * all-gathers, which find that rank 0's TACL_FAST_MAX makes no area,
     * are records 0 and 1, the all-reduces 2..11.  3 records round up
     * to a ring of 4. */
    static const char *const env4[] = {"TACL_FLIGHT_RECORDS=3",
                                       "TACL_FAST_MAX=0", NULL};
    static const char *const env0[] = {"TACL_FLIGHT_RECORDS=0",
                                       "TACL_FAST_MAX=0", NULL};
    int cap4 = 4, cap0 = 0;

    coll_run_expect_pass(2, ring_body, &cap4, env4);
    coll_run_expect_pass(2, ring_body, &cap0, env0);
}
