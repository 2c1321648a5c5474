/*
 * tacl_comm_estimate against a real run: on 4 ranks in two emulated
 * nodes (TACL_NODE_ID), the bytes per link class the estimate predicts
 * for this rank equal what the executor's counters count when the same
 * all-gather and reduce-scatter run, for each algorithm; the algorithm
 * named is the one that ran; bad arguments get errors; and TACL_TUNER=sim
 * runs the simulator's choice.  And on 2, 4 and 8 ranks of one node, for
 * every collective at 8 B, 64 KB and 64 MB, the estimate names the engine
 * and algorithm a real blocking call then reports (the fast engine's
 * "fast" included): one decider answers both; and the same on two
 * emulated nodes of two ranks each, there with all-to-all-v and
 * all-gather-v of even counts too (the flat row or the hierarchical
 * one, by the cost model's price of their flows across nodes).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "harness.h"

#define COUNT 65536

static int same_bytes(coll_ctx_t *ctx, tacl_comm_t comm, const char *what,
                      const tacl_sim_info_t *info)
{
    tacl_counters_t c;

    COLL_CHECK_OK(ctx, tacl_comm_get_counters(comm, &c));
    for (int k = 0; k < TACL_NUM_LINK_CLASSES; k++)
        COLL_CHECK(ctx, c.links[k].bytes == info->bytes[k] &&
                            c.links[k].messages == info->messages[k],
                   "%s: %s link: ran %llu bytes in %llu messages, "
                   "estimated %llu in %llu", what, c.links[k].name,
                   (unsigned long long)c.links[k].bytes,
                   (unsigned long long)c.links[k].messages,
                   (unsigned long long)info->bytes[k],
                   (unsigned long long)info->messages[k]);
    COLL_CHECK(ctx, strcmp(tacl_comm_last_algorithm(comm),
                           info->algorithm) == 0,
               "%s: ran %s, estimated %s", what,
               tacl_comm_last_algorithm(comm), info->algorithm);
    /* A rank of a ring may send on one class only: both count. */
    COLL_CHECK(ctx, info->seconds > 0 && info->bytes[TACL_LINK_NET] +
                                             info->bytes[TACL_LINK_HOST] > 0,
               "%s: estimated %g s, %llu bytes over the network, %llu "
               "inside the node", what, info->seconds,
               (unsigned long long)info->bytes[TACL_LINK_NET],
               (unsigned long long)info->bytes[TACL_LINK_HOST]);
    return 0;
}

static int body_estimate(coll_ctx_t *ctx)
{
    static const char *const algos[] = {"ring", "mics", "hring", "horing",
                                        "direct", "rd"};
    float *send = calloc((size_t)COUNT * 4, sizeof(float));
    float *recv = calloc((size_t)COUNT * 4, sizeof(float));
    char node[32], spec[64];
    tacl_comm_t comm;
    tacl_sim_info_t info;

    snprintf(node, sizeof(node), "est-node-%d", ctx->rank / 2);
    setenv("TACL_NODE_ID", node, 1);
    setenv("UCX_NET_DEVICES", "lo", 1);
    tacl__config_reload();
    COLL_CHECK(ctx, send != NULL && recv != NULL, "out of memory");
    COLL_CHECK_OK(ctx, tacl_comm_init_rank(ctx->nranks, ctx->id, ctx->rank,
                                           &comm));
    for (size_t i = 0; i < sizeof(algos) / sizeof(algos[0]); i++) {
        snprintf(spec, sizeof(spec), "allgather=%s,reducescatter=%s",
                 algos[i], algos[i]);
        setenv("TACL_ALGO", spec, 1);
        tacl__config_reload();
        COLL_CHECK_OK(ctx, tacl_comm_reset_counters(comm));
        COLL_CHECK_OK(ctx, tacl_allgather(send, recv, COUNT, TACL_FLOAT32,
                                          comm, NULL));
        COLL_CHECK_OK(ctx, tacl_comm_estimate(comm, TACL_COLL_ALLGATHER,
                                              COUNT, TACL_FLOAT32, TACL_SUM,
                                              0, &info));
        if (same_bytes(ctx, comm, spec, &info) != 0)
            return 1;
        if (strcmp(algos[i], "horing") == 0)
            continue; /* no reduce-scatter of its own here */
        COLL_CHECK_OK(ctx, tacl_comm_reset_counters(comm));
        COLL_CHECK_OK(ctx, tacl_reduce_scatter(send, recv, COUNT,
                                               TACL_FLOAT32, TACL_SUM, comm,
                                               NULL));
        COLL_CHECK_OK(ctx, tacl_comm_estimate(
                               comm, TACL_COLL_REDUCE_SCATTER, COUNT,
                               TACL_FLOAT32, TACL_SUM, 0, &info));
        if (same_bytes(ctx, comm, spec, &info) != 0)
            return 1;
    }
    /* The simulation tuner: the estimate and the run agree on its pick. */
    unsetenv("TACL_ALGO");
    setenv("TACL_TUNER", "sim", 1);
    tacl__config_reload();
    COLL_CHECK_OK(ctx, tacl_comm_reset_counters(comm));
    COLL_CHECK_OK(ctx, tacl_allgather(send, recv, COUNT, TACL_FLOAT32, comm,
                                      NULL));
    COLL_CHECK_OK(ctx, tacl_comm_estimate(comm, TACL_COLL_ALLGATHER, COUNT,
                                          TACL_FLOAT32, TACL_SUM, 0, &info));
    if (same_bytes(ctx, comm, "TACL_TUNER=sim", &info) != 0)
        return 1;
    /* Bad arguments. */
    COLL_CHECK(ctx, tacl_comm_estimate(comm, (tacl_coll_t)99, COUNT,
                                       TACL_FLOAT32, TACL_SUM, 0, &info) ==
                        TACL_ERR_INVALID_ARG,
               "a bad collective was accepted");
    COLL_CHECK(ctx, tacl_comm_estimate(comm, TACL_COLL_BROADCAST, COUNT,
                                       TACL_FLOAT32, TACL_SUM, 7, &info) ==
                        TACL_ERR_INVALID_ARG,
               "a bad root was accepted");
    COLL_CHECK(ctx, tacl_comm_estimate(comm, TACL_COLL_ALLGATHER, COUNT,
                                       TACL_FLOAT32, TACL_SUM, 0, NULL) ==
                        TACL_ERR_INVALID_ARG,
               "a NULL info_p was accepted");
    COLL_CHECK_OK(ctx, tacl_comm_destroy(comm));
    free(send);
    free(recv);
    return 0;
}

Test(estimate, matches_the_executors_counters)
{
    coll_opts_t opts = {.nranks = 4, .deadline_s = 120,
                        .init = COLL_INIT_MANUAL};
    coll_result_t *res = malloc(sizeof(*res));

    cr_assert_not_null(res);
    coll_run(&opts, body_estimate, res);
    coll_expect_pass(res);
    free(res);
}

/* The collectives a blocking call takes, with their call's count for a
 * call that moves bytes (its largest buffer: per rank ones split it). */
static size_t call_count(tacl_coll_t coll, size_t bytes, int n)
{
    size_t count = bytes / sizeof(float);

    if (coll == TACL_COLL_BARRIER)
        return 0;
    if (coll == TACL_COLL_ALLGATHER || coll == TACL_COLL_REDUCE_SCATTER ||
        coll == TACL_COLL_ALLTOALL || coll == TACL_COLL_ALLTOALLV ||
        coll == TACL_COLL_ALLGATHERV)
        count /= (size_t)n;
    return count > 0 ? count : 1;
}

static int vcounted(tacl_coll_t coll)
{
    return coll == TACL_COLL_ALLTOALLV || coll == TACL_COLL_ALLGATHERV;
}

/* The variable-count calls with count elements per block, as an
 * estimate prices them: even counts, blocks in rank order. */
static tacl_status_t run_even_v(tacl_coll_t coll, const float *send,
                                float *recv, size_t count, tacl_comm_t c)
{
    size_t counts[8], displs[8];
    int n = 0;

    if (tacl_comm_size(c, &n) != TACL_OK || n > 8)
        return TACL_ERR_INVALID_ARG;
    for (int i = 0; i < n; i++) {
        counts[i] = count;
        displs[i] = (size_t)i * count;
    }
    if (coll == TACL_COLL_ALLGATHERV)
        return tacl_allgatherv(send, count, recv, counts, displs,
                               TACL_FLOAT32, c, NULL);
    return tacl_alltoallv(send, counts, displs, recv, counts, displs,
                          TACL_FLOAT32, c, NULL);
}

static tacl_status_t run_blocking(tacl_coll_t coll, const float *send,
                                  float *recv, size_t count, tacl_comm_t c)
{
    switch (coll) {
    case TACL_COLL_ALLTOALLV:
    case TACL_COLL_ALLGATHERV:
        return run_even_v(coll, send, recv, count, c);
    case TACL_COLL_ALLGATHER:
        return tacl_allgather(send, recv, count, TACL_FLOAT32, c, NULL);
    case TACL_COLL_REDUCE_SCATTER:
        return tacl_reduce_scatter(send, recv, count, TACL_FLOAT32, TACL_SUM,
                                   c, NULL);
    case TACL_COLL_ALLREDUCE:
        return tacl_allreduce(send, recv, count, TACL_FLOAT32, TACL_SUM, c,
                              NULL);
    case TACL_COLL_BROADCAST:
        return tacl_broadcast(send, recv, count, TACL_FLOAT32, 0, c, NULL);
    case TACL_COLL_REDUCE:
        return tacl_reduce(send, recv, count, TACL_FLOAT32, TACL_SUM, 0, c,
                           NULL);
    case TACL_COLL_ALLTOALL:
        return tacl_alltoall(send, recv, count, TACL_FLOAT32, c, NULL);
    default:
        return tacl_barrier(c, NULL);
    }
}

/* Every collective at 8 B, 64 KB and 64 MB on comm: the estimate names
 * what the blocking call then reports.  fast_min: how many of those
 * calls the fast engine must have taken at least (0 across nodes, where
 * no engine maps every peer's memory: then none may).  With vcounts,
 * the variable-count calls too, at 8 B, 64 KB, 1 MB and 64 MB (where
 * the flat and hierarchical rows trade places across nodes). */
static int names_what_runs(coll_ctx_t *ctx, tacl_comm_t comm, int fast_min,
                           int vcounts)
{
    static const tacl_coll_t colls[] =
        {TACL_COLL_ALLGATHER, TACL_COLL_REDUCE_SCATTER, TACL_COLL_ALLREDUCE,
         TACL_COLL_BROADCAST, TACL_COLL_REDUCE,         TACL_COLL_ALLTOALL,
         TACL_COLL_BARRIER,   TACL_COLL_ALLTOALLV,      TACL_COLL_ALLGATHERV};
    static const size_t sizes[] = {8, 64 << 10, 1 << 20, 64 << 20};
    int n = ctx->nranks, fast_seen = 0;
    float *send = calloc((size_t)(64 << 20) / sizeof(float) + 16,
                         sizeof(float));
    float *recv = calloc((size_t)(64 << 20) / sizeof(float) + 16,
                         sizeof(float));

    COLL_CHECK(ctx, send != NULL && recv != NULL, "out of memory");
    for (size_t i = 0; i < sizeof(colls) / sizeof(colls[0]); i++) {
        for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
            size_t count = call_count(colls[i], sizes[k], n);
            tacl_sim_info_t info;
            const char *ran;

            if (colls[i] == TACL_COLL_BARRIER && k > 0)
                break;
            if (sizes[k] == 1 << 20 && !vcounted(colls[i]))
                continue;
            if (vcounted(colls[i]) && !vcounts)
                break;
            COLL_CHECK_OK(ctx, tacl_comm_estimate(comm, colls[i], count,
                                                  TACL_FLOAT32, TACL_SUM, 0,
                                                  &info));
            COLL_CHECK_OK(ctx, run_blocking(colls[i], send, recv, count,
                                            comm));
            ran = tacl_comm_last_algorithm(comm);
            COLL_CHECK(ctx, strcmp(ran, info.algorithm) == 0,
                       "%s of %zu floats on %d ranks: estimated %s (%s "
                       "engine), ran %s", tacl_coll_name(colls[i]), count, n,
                       info.algorithm, info.engine, ran);
            COLL_CHECK(ctx, strcmp(info.engine, strcmp(ran, "fast") == 0
                                                    ? "fast"
                                                    : "schedule") == 0,
                       "%s: engine %s for algorithm %s",
                       tacl_coll_name(colls[i]), info.engine, ran);
            fast_seen += strcmp(ran, "fast") == 0;
        }
    }
    COLL_CHECK(ctx, fast_min > 0 ? fast_seen >= fast_min : fast_seen == 0,
               "the fast engine ran %d calls, expected %s %d", fast_seen,
               fast_min > 0 ? "at least" : "exactly", fast_min);
    free(send);
    free(recv);
    return 0;
}

static int body_names_what_runs(coll_ctx_t *ctx)
{
    /* The 8-byte calls of every collective but alltoall take the engine
     * (and, on 4 and 8 ranks, the 64 KB all-gather's 16 KB per rank). */
    return names_what_runs(ctx, ctx->comm, 6, 0);
}

/* Each variable-count row forced by TACL_ALGO (the flat one, which
 * the cost model no longer picks here, and the hierarchical one): the
 * estimate names it, and so does the call. */
static int forced_v_rows(coll_ctx_t *ctx, tacl_comm_t comm)
{
    static const char *const rows[] = {"direct", "hier"};
    static const tacl_coll_t colls[] = {TACL_COLL_ALLTOALLV,
                                        TACL_COLL_ALLGATHERV};
    size_t count = call_count(TACL_COLL_ALLTOALLV, 64 << 10, ctx->nranks);
    float *send = calloc(count * (size_t)ctx->nranks, sizeof(float));
    float *recv = calloc(count * (size_t)ctx->nranks, sizeof(float));
    char spec[64];

    COLL_CHECK(ctx, send != NULL && recv != NULL, "out of memory");
    for (size_t r = 0; r < sizeof(rows) / sizeof(rows[0]); r++) {
        snprintf(spec, sizeof(spec), "alltoallv=%s,allgatherv=%s", rows[r],
                 rows[r]);
        setenv("TACL_ALGO", spec, 1);
        tacl__config_reload();
        for (size_t i = 0; i < sizeof(colls) / sizeof(colls[0]); i++) {
            tacl_sim_info_t info;

            COLL_CHECK_OK(ctx, tacl_comm_estimate(comm, colls[i], count,
                                                  TACL_FLOAT32, TACL_SUM, 0,
                                                  &info));
            COLL_CHECK_OK(ctx,
                          run_blocking(colls[i], send, recv, count, comm));
            COLL_CHECK(ctx,
                       strcmp(info.algorithm, rows[r]) == 0 &&
                           strcmp(tacl_comm_last_algorithm(comm), rows[r]) ==
                               0,
                       "%s: %s estimated %s, ran %s", spec,
                       tacl_coll_name(colls[i]), info.algorithm,
                       tacl_comm_last_algorithm(comm));
        }
    }
    unsetenv("TACL_ALGO");
    tacl__config_reload();
    free(send);
    free(recv);
    return 0;
}

/* The same on two emulated nodes of two ranks (TACL_NODE_ID; UCX over
 * loopback between them): hierarchical algorithms, and no fast engine. */
static int body_names_what_runs_2x2(coll_ctx_t *ctx)
{
    tacl_comm_t comm;
    int failed;

    COLL_CHECK_OK(ctx, coll_join_node(ctx, "est2x2-node", 2, &comm));
    failed = names_what_runs(ctx, comm, 0, 1);
    if (failed == 0)
        failed = forced_v_rows(ctx, comm);
    COLL_CHECK_OK(ctx, tacl_comm_destroy(comm));
    return failed;
}

Test(estimate, names_what_a_blocking_call_runs, .timeout = 600)
{
    static const int ranks[] = {2, 4, 8};

    for (size_t i = 0; i < sizeof(ranks) / sizeof(ranks[0]); i++) {
        coll_opts_t opts = {.nranks = ranks[i], .deadline_s = 300};
        coll_result_t *res = malloc(sizeof(*res));

        cr_assert_not_null(res);
        coll_run(&opts, body_names_what_runs, res);
        coll_expect_pass(res);
        free(res);
    }
}

Test(estimate, names_what_runs_on_two_nodes_of_two, .timeout = 600)
{
    coll_opts_t opts = {.nranks = 4, .deadline_s = 300,
                        .init = COLL_INIT_MANUAL};
    coll_result_t *res = malloc(sizeof(*res));

    cr_assert_not_null(res);
    coll_run(&opts, body_names_what_runs_2x2, res);
    coll_expect_pass(res);
    free(res);
}
