/*
 * Coalesced all-gather and reduce-scatter: a list of buffers of different
 * sizes (including empty ones) in one call, blocking and non-blocking, in
 * place and out of place, checked exactly; a bad entry anywhere in the
 * list is rejected before anything runs.
 */
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "harness.h"

#define NBUF 5
static const size_t counts[NBUF] = {1, 0, 1000, 7, 4099};

/* Element i of rank r's contribution to buffer b. */
static int32_t value(int b, int r, size_t i)
{
    return (int32_t)(b * 100000 + r * 1000 + (int32_t)(i % 997));
}

/*
 * The NBUF buffers of each side of a call on n ranks, zeroed: outer ones
 * of n blocks, inner ones of one block, which in place is block r of the
 * outer one.  Each buffer has one element to spare.
 */
static void alloc_buffers(int32_t *outer[NBUF], int32_t *inner[NBUF], int n,
                          int r, int in_place)
{
    for (int b = 0; b < NBUF; b++) {
        outer[b] = calloc(counts[b] * (size_t)n + 1, sizeof(int32_t));
        inner[b] = in_place ? outer[b] + counts[b] * (size_t)r
                            : calloc(counts[b] + 1, sizeof(int32_t));
    }
}

/* Free what alloc_buffers gave. */
static void free_buffers(int32_t *outer[NBUF], int32_t *inner[NBUF],
                         int in_place)
{
    for (int b = 0; b < NBUF; b++) {
        if (!in_place)
            free(inner[b]);
        free(outer[b]);
    }
}

/*
 * The coalesced all-gather (else reduce-scatter, with sum) of the NBUF
 * buffers, blocking or, with nb & 2, non-blocking and waited for.
 */
static int coalesced_call(coll_ctx_t *ctx, int allgather,
                          int32_t *send[NBUF], int32_t *recv[NBUF], int nb)
{
    const void *sp[NBUF];
    void *rp[NBUF];
    tacl_request_t req;

    for (int b = 0; b < NBUF; b++) {
        sp[b] = send[b];
        rp[b] = recv[b];
    }
    if (nb & 2) {
        COLL_CHECK_OK(ctx, allgather ? tacl_allgather_coalesced_nb(
                                           sp, rp, counts, NBUF, TACL_INT32,
                                           ctx->comm, NULL, &req)
                                     : tacl_reduce_scatter_coalesced_nb(
                                           sp, rp, counts, NBUF, TACL_INT32,
                                           TACL_SUM, ctx->comm, NULL, &req));
        COLL_CHECK_OK(ctx, tacl_request_wait(req));
        COLL_CHECK_OK(ctx, tacl_request_free(req));
    } else {
        COLL_CHECK_OK(ctx, allgather ? tacl_allgather_coalesced(
                                           sp, rp, counts, NBUF, TACL_INT32,
                                           ctx->comm, NULL)
                                     : tacl_reduce_scatter_coalesced(
                                           sp, rp, counts, NBUF, TACL_INT32,
                                           TACL_SUM, ctx->comm, NULL));
    }
    return 0;
}

static int body_allgather(coll_ctx_t *ctx)
{
    int n = ctx->nranks, r = ctx->rank, nb = *(int *)ctx->arg;
    int32_t *send[NBUF], *recv[NBUF];
    int in_place = nb & 1;
    int rc = 0;

    alloc_buffers(recv, send, n, r, in_place);
    for (int b = 0; b < NBUF; b++)
        for (size_t i = 0; i < counts[b]; i++)
            send[b][i] = value(b, r, i);
    if (coalesced_call(ctx, 1, send, recv, nb))
        return 1;
    for (int b = 0; b < NBUF && rc == 0; b++)
        for (int q = 0; q < n && rc == 0; q++)
            for (size_t i = 0; i < counts[b]; i++)
                if (recv[b][counts[b] * (size_t)q + i] != value(b, q, i)) {
                    rc = coll_fail(ctx, "buffer %d block %d element %zu: "
                                   "got %d want %d", b, q, i,
                                   recv[b][counts[b] * (size_t)q + i],
                                   value(b, q, i));
                    break;
                }
    free_buffers(recv, send, in_place);
    return rc;
}

static int body_reduce_scatter(coll_ctx_t *ctx)
{
    int n = ctx->nranks, r = ctx->rank, nb = *(int *)ctx->arg;
    int32_t *send[NBUF], *recv[NBUF];
    int in_place = nb & 1;
    int rc = 0;

    alloc_buffers(send, recv, n, r, in_place);
    for (int b = 0; b < NBUF; b++)
        for (int q = 0; q < n; q++)
            for (size_t i = 0; i < counts[b]; i++)
                send[b][counts[b] * (size_t)q + i] = value(b, r, i) + q;
    if (coalesced_call(ctx, 0, send, recv, nb))
        return 1;
    for (int b = 0; b < NBUF && rc == 0; b++)
        for (size_t i = 0; i < counts[b]; i++) {
            int32_t want = 0;
            for (int q = 0; q < n; q++)
                want += value(b, q, i) + r;
            if (recv[b][i] != want) {
                rc = coll_fail(ctx, "buffer %d element %zu: got %d want %d",
                               b, i, recv[b][i], want);
                break;
            }
        }
    free_buffers(send, recv, in_place);
    return rc;
}

/* One bad entry (a NULL buffer in the middle) is rejected up front, and
 * the communicator still works afterwards. */
static int body_bad_entry(coll_ctx_t *ctx)
{
    int32_t a[4] = {0}, b[16] = {0};
    const void *sp[3] = {a, NULL, a};
    void *rp[3] = {b, b, b};
    size_t c[3] = {1, 1, 1};
    tacl_status_t st;

    st = tacl_allgather_coalesced(sp, rp, c, 3, TACL_INT32, ctx->comm, NULL);
    COLL_CHECK(ctx, st == TACL_ERR_INVALID_ARG, "status %d", (int)st);
    COLL_CHECK(ctx, strstr(tacl_comm_last_error(ctx->comm), "buffer 1"),
               "message \"%s\" does not name buffer 1",
               tacl_comm_last_error(ctx->comm));
    st = tacl_allgather_coalesced(sp, rp, NULL, 3, TACL_INT32, ctx->comm,
                                  NULL);
    COLL_CHECK(ctx, st == TACL_ERR_INVALID_ARG, "status %d", (int)st);
    st = tacl_allgather_coalesced(sp, rp, c, -1, TACL_INT32, ctx->comm, NULL);
    COLL_CHECK(ctx, st == TACL_ERR_INVALID_ARG, "status %d", (int)st);
    /* Nothing half-recorded: a real collective still matches up. */
    a[0] = ctx->rank + 1;
    COLL_CHECK_OK(ctx, tacl_allreduce(a, a, 1, TACL_INT32, TACL_SUM,
                                      ctx->comm, NULL));
    COLL_CHECK(ctx, a[0] == ctx->nranks * (ctx->nranks + 1) / 2, "sum %d",
               a[0]);
    return 0;
}

static void run(int nranks, coll_body_t body, int mode)
{
    coll_opts_t opts = {.nranks = nranks, .deadline_s = 60, .arg = &mode};

    coll_run_opts_expect_pass(&opts, body);
}

Test(coalesced, allgather)
{
    for (int mode = 0; mode < 4; mode++) {
        run(1, body_allgather, mode);
        run(3, body_allgather, mode);
        run(4, body_allgather, mode);
    }
}

Test(coalesced, reduce_scatter)
{
    for (int mode = 0; mode < 4; mode++) {
        run(2, body_reduce_scatter, mode);
        run(3, body_reduce_scatter, mode);
    }
}

Test(coalesced, bad_entry)
{
    run(2, body_bad_entry, 0);
}
