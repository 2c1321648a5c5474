/*
 * TACL_STEP_TRACE: every operation's step timeline, one file per rank.
 *
 * Three ranks run two ring all-gathers (the small-message fast path
 * turned off, so the executor runs them); each rank's file must hold, for
 * each of them, a send of the rank's block to the next rank and a receive
 * from the previous one per ring step, with times that keep ready <=
 * start <= done; the operations are numbered in order.  Nothing is
 * written without the variable (the default), which every other test
 * runs with.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "harness.h"

#define NRANKS 3
#define COUNT 4096

static int body(coll_ctx_t *ctx)
{
    float *in = malloc(COUNT * sizeof(float));
    float *out = malloc(NRANKS * COUNT * sizeof(float));
    int rc = 0;

    if (in == NULL || out == NULL)
        rc = coll_fail(ctx, "out of memory");
    for (int i = 0; rc == 0 && i < COUNT; i++)
        in[i] = (float)(ctx->rank * COUNT + i);
    for (int op = 0; rc == 0 && op < 2; op++) {
        tacl_status_t st = tacl_allgather(in, out, COUNT, TACL_FLOAT32,
                                          ctx->comm, NULL);
        if (st != TACL_OK)
            rc = coll_fail(ctx, "all-gather: %s",
                           tacl_comm_last_error(ctx->comm));
        for (int i = 0; rc == 0 && i < NRANKS * COUNT; i++)
            if (out[i] != (float)i)
                rc = coll_fail(ctx, "element %d is %g", i, out[i]);
    }
    free(in);
    free(out);
    return rc;
}

/* Checks one rank's file; returns the ring all-gathers found in it. */
static int check_file(const char *path, int rank)
{
    FILE *f = fopen(path, "r");
    char line[256];
    long long cur = -1;
    int sends = 0, recvs = 0, good = 0, last_op = -1;

    cr_assert_not_null(f, "no timeline file %s", path);
    while (fgets(line, sizeof(line), f) != NULL) {
        unsigned long long op, step, bytes;
        int r, peer;
        char kind[16];
        double ready, start, done;

        cr_assert_eq(sscanf(line, "%llu %d %llu %15s %d %llu %lf %lf %lf",
                            &op, &r, &step, kind, &peer, &bytes, &ready,
                            &start, &done), 9, "%s: bad line: %s", path,
                     line);
        cr_assert_eq(r, rank, "%s: %s", path, line);
        cr_assert(ready > 0 && ready <= start && start <= done,
                  "%s: times out of order: %s", path, line);
        if ((long long)op != cur) {
            cr_assert((long long)op == cur + 1, "%s: op %llu after %lld",
                      path, op, cur);
            if (sends == NRANKS - 1 && recvs == NRANKS - 1)
                good++;
            cur = (long long)op;
            sends = recvs = 0;
        }
        if (strcmp(kind, "send") == 0 && peer == (rank + 1) % NRANKS &&
            bytes == COUNT * sizeof(float))
            sends++;
        else if (strcmp(kind, "recv") == 0 &&
                 peer == (rank + NRANKS - 1) % NRANKS &&
                 bytes == COUNT * sizeof(float))
            recvs++;
        last_op = (int)op;
    }
    fclose(f);
    if (sends == NRANKS - 1 && recvs == NRANKS - 1)
        good++;
    cr_assert(last_op >= 1, "%s: %d operations", path, last_op + 1);
    return good;
}

Test(steptrace, ring_allgather_timeline, .timeout = 90)
{
    char dir[128], env[160], path[192];
    const char *envs[] = {env, "TACL_ALGO=allgather=ring", "TACL_FAST_MAX=0",
                          NULL};

    snprintf(dir, sizeof(dir), "%s/tacl-steptrace-XXXXXX", P_tmpdir);
    cr_assert_not_null(mkdtemp(dir));
    snprintf(env, sizeof(env), "TACL_STEP_TRACE=%s/t", dir);
    coll_run_expect_pass(NRANKS, body, NULL, envs);
    for (int r = 0; r < NRANKS; r++) {
        snprintf(path, sizeof(path), "%s/t.%d", dir, r);
        cr_assert_geq(check_file(path, r), 2, "rank %d: fewer than two "
                      "ring all-gathers in its timeline", r);
        unlink(path);
    }
    rmdir(dir);
}
