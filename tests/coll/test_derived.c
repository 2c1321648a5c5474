/*
 * Derived communicators: tacl_comm_get_local / tacl_comm_get_rail are
 * cached, have the ranks the topology implies, work for collectives, are
 * destroyed with their parent and refuse to be destroyed on their own.
 * Here all ranks share one node; the multi-node suite checks node and
 * rail communicators across emulated nodes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "harness.h"

static int body_single_node(coll_ctx_t *ctx)
{
    tacl_comm_t local, local2, rail;
    int size, rank, v;

    COLL_CHECK_OK(ctx, tacl_comm_get_local(ctx->comm, &local));
    COLL_CHECK_OK(ctx, tacl_comm_get_local(ctx->comm, &local2));
    COLL_CHECK(ctx, local == local2, "the local communicator is not cached");
    COLL_CHECK_OK(ctx, tacl_comm_size(local, &size));
    COLL_CHECK_OK(ctx, tacl_comm_rank(local, &rank));
    COLL_CHECK(ctx, size == ctx->nranks && rank == ctx->rank,
               "local comm: size %d rank %d", size, rank);
    COLL_CHECK_OK(ctx, tacl_comm_get_rail(ctx->comm, &rail));
    COLL_CHECK_OK(ctx, tacl_comm_size(rail, &size));
    COLL_CHECK(ctx, size == 1, "one node: rail size %d", size);
    /* Collectives on the derived communicators. */
    v = ctx->rank + 1;
    COLL_CHECK_OK(ctx, tacl_allreduce(&v, &v, 1, TACL_INT32, TACL_SUM, local,
                                      NULL));
    COLL_CHECK(ctx, v == ctx->nranks * (ctx->nranks + 1) / 2, "sum %d", v);
    COLL_CHECK(ctx, strlen(tacl_comm_last_algorithm(local)) > 0,
               "no algorithm recorded");
    COLL_CHECK_OK(ctx, tacl_allreduce(&v, &v, 1, TACL_INT32, TACL_SUM, rail,
                                      NULL));
    /* Not the user's to destroy. */
    COLL_CHECK(ctx, tacl_comm_destroy(local) == TACL_ERR_INVALID_USAGE,
               "destroying a derived communicator was accepted");
    COLL_CHECK(ctx, strlen(tacl_comm_last_error(local)) > 0, "no message");
    /* The harness destroys the parent; the derived ones go with it. */
    return 0;
}

static int body_last_algorithm(coll_ctx_t *ctx)
{
    float buf[1024] = {0};

    COLL_CHECK(ctx, strcmp(tacl_comm_last_algorithm(ctx->comm), "") == 0,
               "an algorithm before the first operation");
    COLL_CHECK_OK(ctx, tacl_allreduce(buf, buf, 1024, TACL_FLOAT32, TACL_SUM,
                                      ctx->comm, NULL));
    COLL_CHECK(ctx, strcmp(tacl_comm_last_algorithm(ctx->comm), "rd") == 0,
               "forced rd, got \"%s\"", tacl_comm_last_algorithm(ctx->comm));
    return 0;
}

Test(derived, single_node)
{
    coll_opts_t opts = {.nranks = 3, .deadline_s = 60};

    coll_run_opts_expect_pass(&opts, body_single_node);
}

Test(derived, last_algorithm)
{
    static const char *const env[] = {"TACL_ALGO=allreduce=rd", NULL};
    coll_opts_t opts = {.nranks = 2, .deadline_s = 60, .env = env};

    coll_run_opts_expect_pass(&opts, body_last_algorithm);
}
