/*
 * The monitored barrier: passes when every rank comes (twice in a row,
 * so no message of one is left for the next), names the first late rank
 * (or every late rank with wait_all) on rank 0 within about its timeout,
 * and ends the waiting ranks with an error rather than their own timeout.
 */
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "harness.h"

static int body_all_come(coll_ctx_t *ctx)
{
    int missing[COLL_MAX_RANKS], n = -1;

    for (int round = 0; round < 2; round++) {
        COLL_CHECK_OK(ctx, tacl_barrier_monitored(ctx->comm, 5.0, round,
                                                  missing, &n));
        COLL_CHECK(ctx, n == 0, "round %d: %d late ranks", round, n);
    }
    COLL_CHECK(ctx,
               tacl_barrier_monitored(ctx->comm, -1.0, 0, NULL, NULL) ==
                   TACL_ERR_INVALID_ARG,
               "a negative timeout is refused");
    return 0;
}

Test(monitored, passes_when_all_come, .timeout = 60)
{
    for (int n = 1; n <= 4; n++)
        coll_run_expect_pass(n, body_all_come, NULL, NULL);
}

/*
 * The ranks of ctx->arg's mask stay away (they sleep until the others
 * are done); rank 0 must name them, the rest must fail, all within
 * seconds of rank 0's 0.5 s.
 */
typedef struct {
    unsigned away; /* bit r: rank r stays away */
    int wait_all;
} late_case_t;

static int body_late(coll_ctx_t *ctx)
{
    const late_case_t *c = ctx->arg;
    int missing[COLL_MAX_RANKS], n = -1, want[COLL_MAX_RANKS], nwant = 0;
    double t0 = coll_now();
    tacl_status_t st;

    for (int r = 1; r < ctx->nranks; r++)
        if (c->away & (1u << r))
            want[nwant++] = r;
    if (!c->wait_all)
        nwant = 1;
    if (c->away & (1u << ctx->rank)) {
        coll_sleep_ms(3000);
        return 0;
    }
    st = tacl_barrier_monitored(ctx->comm, 0.5, c->wait_all, missing, &n);
    COLL_CHECK(ctx, st != TACL_OK, "rank %d passed a barrier some missed",
               ctx->rank);
    COLL_CHECK(ctx, coll_now() - t0 < 10, "ended after %.1f s",
               coll_now() - t0);
    if (ctx->rank != 0) {
        COLL_CHECK(ctx, strstr(tacl_comm_last_error(ctx->comm),
                               "did not release") != NULL,
                   "message: %s", tacl_comm_last_error(ctx->comm));
        return 0;
    }
    COLL_CHECK(ctx, st == TACL_ERR_TIMEOUT, "rank 0 got %s",
               tacl_status_string(st));
    COLL_CHECK(ctx, n == nwant, "%d late ranks named, want %d", n, nwant);
    for (int i = 0; i < nwant; i++)
        COLL_CHECK(ctx, missing[i] == want[i], "late rank %d is %d, want %d",
                   i, missing[i], want[i]);
    COLL_CHECK(ctx, strstr(tacl_comm_last_error(ctx->comm),
                           "did not reach it") != NULL,
               "message: %s", tacl_comm_last_error(ctx->comm));
    return 0;
}

static void run_late(int nranks, unsigned away, int wait_all)
{
    late_case_t c = {away, wait_all};
    coll_opts_t o = {.nranks = nranks, .deadline_s = 50,
                     .destroy_may_fail = 1, .arg = &c};

    coll_run_opts_expect_pass(&o, body_late);
}

Test(monitored, names_the_first_late_rank, .timeout = 60)
{
    run_late(4, 1u << 2 | 1u << 3, 0);
}

Test(monitored, wait_all_names_every_late_rank, .timeout = 60)
{
    run_late(4, 1u << 1 | 1u << 3, 1);
}
