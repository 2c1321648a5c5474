/*
 * Bad input on every entry point of the public API.
 *
 * Each call must return the documented status (TACL_ERR_INVALID_ARG for
 * a bad argument, TACL_ERR_INVALID_USAGE for a call out of order), leave
 * its output parameters alone, and leave a non-empty message behind in
 * tacl_comm_last_error() and tacl_last_error().  Afterwards the
 * communicator still works.  Almost everything runs on one rank, inside
 * the test process; the rank-count overflow needs two.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "harness.h"
#include "values.h"

#define BAD_DTYPE ((tacl_dtype_t)99)
#define NEG_DTYPE ((tacl_dtype_t)-1)
#define BAD_OP ((tacl_op_t)99)

/* Assert a status and that both last-error messages say something. */
#define EXPECT_STATUS(call, want, comm)                                      \
    do {                                                                     \
        tacl_status_t st_ = (call);                                          \
        const char *cmsg_ = tacl_comm_last_error(comm);                      \
        const char *tmsg_ = tacl_last_error();                               \
        cr_assert_eq(st_, (want), "%s returned %s (%d), expected %s", #call, \
                     tacl_status_string(st_), (int)st_,                      \
                     tacl_status_string(want));                              \
        cr_assert(cmsg_ != NULL && cmsg_[0] != '\0',                         \
                  "%s: tacl_comm_last_error() is empty", #call);             \
        cr_assert(tmsg_ != NULL && tmsg_[0] != '\0',                         \
                  "%s: tacl_last_error() is empty", #call);                  \
    } while (0)

#define EXPECT_ARG(call, comm) EXPECT_STATUS(call, TACL_ERR_INVALID_ARG, comm)
#define EXPECT_USAGE(call, comm)                                             \
    EXPECT_STATUS(call, TACL_ERR_INVALID_USAGE, comm)

static tacl_comm_t comm;
static float sbuf[64], rbuf[64];

static void comm_up(void)
{
    tacl_unique_id_t id;
    tacl_status_t st;

    st = tacl_get_unique_id(&id);
    cr_assert_eq(st, TACL_OK, "tacl_get_unique_id: %s", tacl_last_error());
    st = tacl_comm_init_rank(1, &id, 0, &comm);
    cr_assert_eq(st, TACL_OK, "tacl_comm_init_rank: %s", tacl_last_error());
    for (int i = 0; i < 64; i++)
        sbuf[i] = (float)i;
}

static void comm_down(void)
{
    if (comm != NULL)
        tacl_comm_destroy(comm);
    comm = NULL;
}

/* The communicator must still give right answers after the errors. */
static void expect_comm_works(void)
{
    tacl_status_t st;

    memset(rbuf, 0, sizeof(rbuf));
    st = tacl_allreduce(sbuf, rbuf, 64, TACL_FLOAT32, TACL_SUM, comm, NULL);
    cr_assert_eq(st, TACL_OK, "allreduce after errors: %s",
                 tacl_comm_last_error(comm));
    cr_assert(memcmp(sbuf, rbuf, sizeof(rbuf)) == 0,
              "allreduce on one rank must copy its input");
}

TestSuite(errors, .init = comm_up, .fini = comm_down, .timeout = 60);

Test(errors, init_arguments)
{
    tacl_unique_id_t id;
    tacl_comm_t c = (tacl_comm_t)&c;

    EXPECT_ARG(tacl_get_unique_id(NULL), NULL);
    cr_assert_eq(tacl_get_unique_id(&id), TACL_OK);
    EXPECT_ARG(tacl_comm_init_rank(0, &id, 0, &c), NULL);
    EXPECT_ARG(tacl_comm_init_rank(-1, &id, 0, &c), NULL);
    EXPECT_ARG(tacl_comm_init_rank(2, &id, 2, &c), NULL);
    EXPECT_ARG(tacl_comm_init_rank(2, &id, 5, &c), NULL);
    EXPECT_ARG(tacl_comm_init_rank(2, &id, -1, &c), NULL);
    EXPECT_ARG(tacl_comm_init_rank(1, NULL, 0, &c), NULL);
    EXPECT_ARG(tacl_comm_init_rank(1, &id, 0, NULL), NULL);
    cr_assert(c == (tacl_comm_t)&c, "a failed init wrote *comm_p");
    EXPECT_ARG(tacl_comm_init_env(NULL), NULL);
    /* The id is still good for a real communicator. */
    cr_assert_eq(tacl_comm_init_rank(1, &id, 0, &c), TACL_OK, "%s",
                 tacl_last_error());
    cr_assert_eq(tacl_comm_destroy(c), TACL_OK);
}

Test(errors, null_comm)
{
    tacl_request_t req = NULL;
    tacl_status_t err;
    tacl_counters_t cnt;
    tacl_comm_t nc = NULL, out = NULL;
    int v;

    EXPECT_ARG(tacl_comm_split(NULL, 0, 0, &out), NULL);
    EXPECT_ARG(tacl_comm_destroy(NULL), NULL);
    EXPECT_ARG(tacl_comm_abort(NULL), NULL);
    EXPECT_ARG(tacl_comm_get_async_error(NULL, &err), NULL);
    EXPECT_ARG(tacl_comm_rank(NULL, &v), NULL);
    EXPECT_ARG(tacl_comm_size(NULL, &v), NULL);
    EXPECT_ARG(tacl_comm_node(NULL, &v), NULL);
    EXPECT_ARG(tacl_comm_n_nodes(NULL, &v), NULL);
    EXPECT_ARG(tacl_comm_local_rank(NULL, &v), NULL);
    EXPECT_ARG(tacl_comm_local_size(NULL, &v), NULL);
    EXPECT_ARG(tacl_comm_get_counters(NULL, &cnt), NULL);
    EXPECT_ARG(tacl_comm_reset_counters(NULL), NULL);
    EXPECT_ARG(tacl_allgather(sbuf, rbuf, 1, TACL_FLOAT32, nc, NULL), NULL);
    EXPECT_ARG(tacl_reduce_scatter(sbuf, rbuf, 1, TACL_FLOAT32, TACL_SUM, nc,
                                   NULL), NULL);
    EXPECT_ARG(tacl_allreduce(sbuf, rbuf, 1, TACL_FLOAT32, TACL_SUM, nc,
                              NULL), NULL);
    EXPECT_ARG(tacl_broadcast(sbuf, rbuf, 1, TACL_FLOAT32, 0, nc, NULL),
               NULL);
    EXPECT_ARG(tacl_reduce(sbuf, rbuf, 1, TACL_FLOAT32, TACL_SUM, 0, nc,
                           NULL), NULL);
    EXPECT_ARG(tacl_alltoall(sbuf, rbuf, 1, TACL_FLOAT32, nc, NULL), NULL);
    EXPECT_ARG(tacl_send(sbuf, 1, TACL_FLOAT32, 0, nc, NULL), NULL);
    EXPECT_ARG(tacl_recv(rbuf, 1, TACL_FLOAT32, 0, nc, NULL), NULL);
    EXPECT_ARG(tacl_barrier(nc, NULL), NULL);
    EXPECT_ARG(tacl_allreduce_nb(sbuf, rbuf, 1, TACL_FLOAT32, TACL_SUM, nc,
                                 NULL, &req), NULL);
    EXPECT_ARG(tacl_barrier_nb(nc, NULL, &req), NULL);
    cr_assert(req == NULL, "a failed _nb call wrote *req_p");
    cr_assert(out == NULL, "a failed split wrote *newcomm_p");
    expect_comm_works();
}

Test(errors, null_outputs)
{
    tacl_request_t req = NULL;
    int done;

    EXPECT_ARG(tacl_get_version(NULL), NULL);
    EXPECT_ARG(tacl_comm_rank(comm, NULL), comm);
    EXPECT_ARG(tacl_comm_size(comm, NULL), comm);
    EXPECT_ARG(tacl_comm_node(comm, NULL), comm);
    EXPECT_ARG(tacl_comm_n_nodes(comm, NULL), comm);
    EXPECT_ARG(tacl_comm_local_rank(comm, NULL), comm);
    EXPECT_ARG(tacl_comm_local_size(comm, NULL), comm);
    EXPECT_ARG(tacl_comm_get_async_error(comm, NULL), comm);
    EXPECT_ARG(tacl_comm_get_counters(comm, NULL), comm);
    EXPECT_ARG(tacl_comm_split(comm, 0, 0, NULL), comm);
    EXPECT_ARG(tacl_allgather_nb(sbuf, rbuf, 1, TACL_FLOAT32, comm, NULL,
                                 NULL), comm);
    EXPECT_ARG(tacl_reduce_scatter_nb(sbuf, rbuf, 1, TACL_FLOAT32, TACL_SUM,
                                      comm, NULL, NULL), comm);
    EXPECT_ARG(tacl_allreduce_nb(sbuf, rbuf, 1, TACL_FLOAT32, TACL_SUM, comm,
                                 NULL, NULL), comm);
    EXPECT_ARG(tacl_broadcast_nb(sbuf, rbuf, 1, TACL_FLOAT32, 0, comm, NULL,
                                 NULL), comm);
    EXPECT_ARG(tacl_reduce_nb(sbuf, rbuf, 1, TACL_FLOAT32, TACL_SUM, 0, comm,
                              NULL, NULL), comm);
    EXPECT_ARG(tacl_alltoall_nb(sbuf, rbuf, 1, TACL_FLOAT32, comm, NULL,
                                NULL), comm);
    EXPECT_ARG(tacl_send_nb(sbuf, 1, TACL_FLOAT32, 0, comm, NULL, NULL),
               comm);
    EXPECT_ARG(tacl_recv_nb(rbuf, 1, TACL_FLOAT32, 0, comm, NULL, NULL),
               comm);
    EXPECT_ARG(tacl_barrier_nb(comm, NULL, NULL), comm);
    EXPECT_ARG(tacl_group_end_nb(NULL), NULL);
    EXPECT_ARG(tacl_request_test(NULL, &done), NULL);
    EXPECT_ARG(tacl_request_wait(NULL), NULL);
    EXPECT_ARG(tacl_request_free(NULL), NULL);

    cr_assert_eq(tacl_barrier_nb(comm, NULL, &req), TACL_OK, "%s",
                 tacl_comm_last_error(comm));
    EXPECT_ARG(tacl_request_test(req, NULL), NULL);
    cr_assert_eq(tacl_request_wait(req), TACL_OK);
    cr_assert_eq(tacl_request_free(req), TACL_OK);
    expect_comm_works();
}

Test(errors, null_buffers)
{
    float *s = sbuf, *r = rbuf;

    EXPECT_ARG(tacl_allgather(NULL, r, 1, TACL_FLOAT32, comm, NULL), comm);
    EXPECT_ARG(tacl_allgather(s, NULL, 1, TACL_FLOAT32, comm, NULL), comm);
    EXPECT_ARG(tacl_reduce_scatter(NULL, r, 1, TACL_FLOAT32, TACL_SUM, comm,
                                   NULL), comm);
    EXPECT_ARG(tacl_reduce_scatter(s, NULL, 1, TACL_FLOAT32, TACL_SUM, comm,
                                   NULL), comm);
    EXPECT_ARG(tacl_allreduce(NULL, r, 1, TACL_FLOAT32, TACL_SUM, comm,
                              NULL), comm);
    EXPECT_ARG(tacl_allreduce(s, NULL, 1, TACL_FLOAT32, TACL_SUM, comm,
                              NULL), comm);
    /* On the root (rank 0 of one) both buffers matter. */
    EXPECT_ARG(tacl_broadcast(NULL, r, 1, TACL_FLOAT32, 0, comm, NULL),
               comm);
    EXPECT_ARG(tacl_broadcast(s, NULL, 1, TACL_FLOAT32, 0, comm, NULL),
               comm);
    EXPECT_ARG(tacl_reduce(NULL, r, 1, TACL_FLOAT32, TACL_SUM, 0, comm,
                           NULL), comm);
    EXPECT_ARG(tacl_reduce(s, NULL, 1, TACL_FLOAT32, TACL_SUM, 0, comm,
                           NULL), comm);
    EXPECT_ARG(tacl_alltoall(NULL, r, 1, TACL_FLOAT32, comm, NULL), comm);
    EXPECT_ARG(tacl_alltoall(s, NULL, 1, TACL_FLOAT32, comm, NULL), comm);
    EXPECT_ARG(tacl_send(NULL, 1, TACL_FLOAT32, 0, comm, NULL), comm);
    EXPECT_ARG(tacl_recv(NULL, 1, TACL_FLOAT32, 0, comm, NULL), comm);
    expect_comm_works();
}

Test(errors, bad_dtype)
{
    const tacl_dtype_t bad[2] = {BAD_DTYPE, NEG_DTYPE};

    for (int i = 0; i < 2; i++) {
        tacl_dtype_t d = bad[i];

        EXPECT_ARG(tacl_allgather(sbuf, rbuf, 1, d, comm, NULL), comm);
        EXPECT_ARG(tacl_reduce_scatter(sbuf, rbuf, 1, d, TACL_SUM, comm,
                                       NULL), comm);
        EXPECT_ARG(tacl_allreduce(sbuf, rbuf, 1, d, TACL_SUM, comm, NULL),
                   comm);
        EXPECT_ARG(tacl_broadcast(sbuf, rbuf, 1, d, 0, comm, NULL), comm);
        EXPECT_ARG(tacl_reduce(sbuf, rbuf, 1, d, TACL_SUM, 0, comm, NULL),
                   comm);
        EXPECT_ARG(tacl_alltoall(sbuf, rbuf, 1, d, comm, NULL), comm);
        EXPECT_ARG(tacl_send(sbuf, 1, d, 0, comm, NULL), comm);
        EXPECT_ARG(tacl_recv(rbuf, 1, d, 0, comm, NULL), comm);
        cr_assert_eq(tacl_dtype_size(d), 0);
        cr_assert_str_eq(tacl_dtype_name(d), "invalid");
    }
    expect_comm_works();
}

Test(errors, bad_op)
{
    const tacl_op_t bad[2] = {BAD_OP, (tacl_op_t)-1};

    for (int i = 0; i < 2; i++) {
        tacl_op_t op = bad[i];

        EXPECT_ARG(tacl_reduce_scatter(sbuf, rbuf, 1, TACL_FLOAT32, op, comm,
                                       NULL), comm);
        EXPECT_ARG(tacl_allreduce(sbuf, rbuf, 1, TACL_FLOAT32, op, comm,
                                  NULL), comm);
        EXPECT_ARG(tacl_reduce(sbuf, rbuf, 1, TACL_FLOAT32, op, 0, comm,
                               NULL), comm);
        cr_assert_str_eq(tacl_op_name(op), "invalid");
    }
    expect_comm_works();
}

/* The bitwise ops take integers: every float dtype is refused, alone,
 * coalesced and inside a group, and the message names op and dtype. */
Test(errors, bitwise_op_on_float)
{
    const void *sp[1] = {sbuf};
    void *rp[1] = {rbuf};
    size_t one = 1;
    int32_t is[4] = {6, 5, 3, 9}, ir[4] = {0};

    for (int op = TACL_BAND; op <= TACL_BXOR; op++) {
        for (int d = TACL_FLOAT16; d <= TACL_FLOAT64; d++) {
            tacl_dtype_t dt = (tacl_dtype_t)d;
            tacl_op_t o = (tacl_op_t)op;

            EXPECT_ARG(tacl_allreduce(sbuf, rbuf, 1, dt, o, comm, NULL),
                       comm);
            cr_assert(strstr(tacl_comm_last_error(comm), tacl_op_name(o)) &&
                      strstr(tacl_comm_last_error(comm), tacl_dtype_name(dt)),
                      "message must name op and dtype: %s",
                      tacl_comm_last_error(comm));
            EXPECT_ARG(tacl_reduce_scatter(sbuf, rbuf, 1, dt, o, comm, NULL),
                       comm);
            EXPECT_ARG(tacl_reduce(sbuf, rbuf, 1, dt, o, 0, comm, NULL),
                       comm);
            EXPECT_ARG(tacl_reduce_scatter_coalesced(sp, rp, &one, 1, dt, o,
                                                     comm, NULL), comm);
        }
    }
    cr_assert_eq(tacl_group_start(), TACL_OK);
    EXPECT_ARG(tacl_allreduce(sbuf, rbuf, 1, TACL_FLOAT32, TACL_BXOR, comm,
                              NULL), comm);
    cr_assert_eq(tacl_group_end(), TACL_OK, "%s", tacl_comm_last_error(comm));
    /* The same ops on an integer type are fine. */
    cr_assert_eq(tacl_allreduce(is, ir, 4, TACL_INT32, TACL_BXOR, comm, NULL),
                 TACL_OK, "%s", tacl_comm_last_error(comm));
    cr_assert(memcmp(is, ir, sizeof(is)) == 0,
              "bxor on one rank must copy its input");
    expect_comm_works();
}

Test(errors, bad_root_and_peer)
{
    const int bad[3] = {-1, 1, 1000};

    for (int i = 0; i < 3; i++) {
        EXPECT_ARG(tacl_broadcast(sbuf, rbuf, 1, TACL_FLOAT32, bad[i], comm,
                                  NULL), comm);
        EXPECT_ARG(tacl_reduce(sbuf, rbuf, 1, TACL_FLOAT32, TACL_SUM, bad[i],
                               comm, NULL), comm);
        EXPECT_ARG(tacl_send(sbuf, 1, TACL_FLOAT32, bad[i], comm, NULL),
                   comm);
        /* -1 is TACL_ANY_SOURCE for a receive; -2 is no rank. */
        EXPECT_ARG(tacl_recv(rbuf, 1, TACL_FLOAT32,
                             bad[i] == TACL_ANY_SOURCE ? -2 : bad[i], comm,
                             NULL),
                   comm);
    }
    EXPECT_ARG(tacl_send_tag(sbuf, 1, TACL_FLOAT32, 0, -1, comm, NULL), comm);
    EXPECT_ARG(tacl_recv_tag(rbuf, 1, TACL_FLOAT32, TACL_ANY_SOURCE, -5,
                             NULL, comm, NULL),
               comm);
    expect_comm_works();
}

/* Counts whose byte size overflows size_t must be refused up front. */
Test(errors, count_overflow)
{
    const size_t big[3] = {SIZE_MAX, SIZE_MAX / 2, SIZE_MAX / 4 + 1};

    for (int i = 0; i < 3; i++) {
        size_t c = big[i];

        EXPECT_ARG(tacl_allgather(sbuf, rbuf, c, TACL_FLOAT32, comm, NULL),
                   comm);
        EXPECT_ARG(tacl_reduce_scatter(sbuf, rbuf, c, TACL_FLOAT32, TACL_SUM,
                                       comm, NULL), comm);
        EXPECT_ARG(tacl_allreduce(sbuf, rbuf, c, TACL_FLOAT32, TACL_SUM,
                                  comm, NULL), comm);
        EXPECT_ARG(tacl_broadcast(sbuf, rbuf, c, TACL_FLOAT32, 0, comm,
                                  NULL), comm);
        EXPECT_ARG(tacl_reduce(sbuf, rbuf, c, TACL_FLOAT32, TACL_SUM, 0,
                               comm, NULL), comm);
        EXPECT_ARG(tacl_alltoall(sbuf, rbuf, c, TACL_FLOAT32, comm, NULL),
                   comm);
        EXPECT_ARG(tacl_send(sbuf, c, TACL_FLOAT32, 0, comm, NULL), comm);
        EXPECT_ARG(tacl_recv(rbuf, c, TACL_FLOAT32, 0, comm, NULL), comm);
    }
    expect_comm_works();
}

/* Buffers that overlap without following the in-place conventions. */
Test(errors, overlap_not_in_place)
{
    float b[64];

    memset(b, 0, sizeof(b));
    EXPECT_ARG(tacl_allgather(b + 1, b, 8, TACL_FLOAT32, comm, NULL), comm);
    EXPECT_ARG(tacl_reduce_scatter(b, b + 1, 8, TACL_FLOAT32, TACL_SUM, comm,
                                   NULL), comm);
    EXPECT_ARG(tacl_allreduce(b, b + 1, 8, TACL_FLOAT32, TACL_SUM, comm,
                              NULL), comm);
    EXPECT_ARG(tacl_broadcast(b, b + 2, 8, TACL_FLOAT32, 0, comm, NULL),
               comm);
    EXPECT_ARG(tacl_reduce(b + 3, b, 8, TACL_FLOAT32, TACL_SUM, 0, comm,
                           NULL), comm);
    EXPECT_ARG(tacl_alltoall(b, b + 1, 8, TACL_FLOAT32, comm, NULL), comm);
    expect_comm_works();
}

/*
 * A stream is accepted only with device buffers: with host buffers the
 * call is refused as an invalid argument, saying the buffers are host
 * memory (on every build, with CUDA or without, device or none).
 */
Test(errors, stream_with_host_buffers)
{
    tacl_stream_t stream = (tacl_stream_t)(uintptr_t)0x1000;
    tacl_status_t st[4];

    st[0] = tacl_allreduce(sbuf, rbuf, 8, TACL_FLOAT32, TACL_SUM, comm,
                           stream);
    st[1] = tacl_allgather(sbuf, rbuf, 8, TACL_FLOAT32, comm, stream);
    st[2] = tacl_send(sbuf, 8, TACL_FLOAT32, 0, comm, stream);
    st[3] = tacl_barrier(comm, stream);
    for (int i = 0; i < 4; i++)
        cr_assert(st[i] == TACL_ERR_INVALID_ARG,
                  "call %d with a stream and host buffers gave %s", i,
                  tacl_status_string(st[i]));
    cr_assert(strstr(tacl_comm_last_error(comm), "buffers are host memory"),
              "%s", tacl_comm_last_error(comm));
    expect_comm_works();
}

/* A bad argument inside a group is refused at the call. */
Test(errors, bad_argument_in_group)
{
    cr_assert_eq(tacl_group_start(), TACL_OK);
    EXPECT_ARG(tacl_allreduce(NULL, rbuf, 8, TACL_FLOAT32, TACL_SUM, comm,
                              NULL), comm);
    EXPECT_ARG(tacl_send(sbuf, 8, BAD_DTYPE, 0, comm, NULL), comm);
    cr_assert_eq(tacl_allreduce(sbuf, rbuf, 64, TACL_FLOAT32, TACL_SUM, comm,
                                NULL), TACL_OK, "%s",
                 tacl_comm_last_error(comm));
    memset(rbuf, 0, sizeof(rbuf));
    cr_assert_eq(tacl_group_end(), TACL_OK, "%s", tacl_comm_last_error(comm));
    cr_assert(memcmp(sbuf, rbuf, sizeof(rbuf)) == 0,
              "the valid call of the group did not run");
}

Test(errors, use_after_destroy)
{
    tacl_comm_t dead = comm;
    int v = -7;

    cr_assert_eq(tacl_comm_destroy(comm), TACL_OK);
    comm = NULL;
    EXPECT_USAGE(tacl_comm_rank(dead, &v), dead);
    cr_assert_eq(v, -7, "a failed call wrote *rank_p");
    EXPECT_USAGE(tacl_comm_size(dead, &v), dead);
    EXPECT_USAGE(tacl_allreduce(sbuf, rbuf, 1, TACL_FLOAT32, TACL_SUM, dead,
                                NULL), dead);
    EXPECT_USAGE(tacl_allgather(sbuf, rbuf, 1, TACL_FLOAT32, dead, NULL),
                 dead);
    EXPECT_USAGE(tacl_send(sbuf, 1, TACL_FLOAT32, 0, dead, NULL), dead);
    EXPECT_USAGE(tacl_barrier(dead, NULL), dead);
    EXPECT_USAGE(tacl_comm_reset_counters(dead), dead);
    EXPECT_USAGE(tacl_comm_destroy(dead), dead);
    EXPECT_USAGE(tacl_comm_abort(dead), dead);
}

Test(errors, request_free_pending)
{
    tacl_request_t rreq = NULL, sreq = NULL;
    float in[8], out[8];
    int done = 1;

    for (int i = 0; i < 8; i++) {
        in[i] = (float)(i + 1);
        out[i] = -1.0f;
    }
    /* A receive from oneself stays pending until the send is posted. */
    cr_assert_eq(tacl_recv_nb(out, 8, TACL_FLOAT32, 0, comm, NULL, &rreq),
                 TACL_OK, "%s", tacl_comm_last_error(comm));
    cr_assert_eq(tacl_request_test(rreq, &done), TACL_OK);
    cr_assert_eq(done, 0, "a receive with no send completed");
    EXPECT_USAGE(tacl_request_free(rreq), comm);
    cr_assert_eq(tacl_send_nb(in, 8, TACL_FLOAT32, 0, comm, NULL, &sreq),
                 TACL_OK, "%s", tacl_comm_last_error(comm));
    cr_assert_eq(tacl_request_wait(sreq), TACL_OK);
    cr_assert_eq(tacl_request_wait(rreq), TACL_OK);
    cr_assert(memcmp(in, out, sizeof(in)) == 0, "self send/recv data");
    cr_assert_eq(tacl_request_free(sreq), TACL_OK);
    cr_assert_eq(tacl_request_free(rreq), TACL_OK);
    expect_comm_works();
}

Test(errors, group_misuse)
{
    tacl_request_t req = (tacl_request_t)&req;

    EXPECT_USAGE(tacl_group_end(), NULL);
    EXPECT_USAGE(tacl_group_end_nb(&req), NULL);
    cr_assert(req == (tacl_request_t)&req, "a failed call wrote *req_p");
    /* A balanced empty group is fine, and nothing is left open. */
    cr_assert_eq(tacl_group_start(), TACL_OK);
    cr_assert_eq(tacl_group_end(), TACL_OK);
    EXPECT_USAGE(tacl_group_end(), NULL);
    expect_comm_works();
}

Test(errors, healthy_state)
{
    tacl_status_t err = TACL_ERR_INTERNAL;

    cr_assert_eq(tacl_comm_get_async_error(comm, &err), TACL_OK);
    cr_assert_eq(err, TACL_OK, "async error %d on a healthy comm", err);
}

Test(errors, names_and_sizes)
{
    for (int d = 0; d < TACL_NUM_DTYPES; d++) {
        cr_assert_eq(tacl_dtype_size((tacl_dtype_t)d),
                     val_size((tacl_dtype_t)d), "dtype %d", d);
        cr_assert_str_neq(tacl_dtype_name((tacl_dtype_t)d), "invalid");
    }
    for (int o = 0; o < TACL_NUM_OPS; o++)
        cr_assert_str_neq(tacl_op_name((tacl_op_t)o), "invalid");
    cr_assert_str_eq(tacl_dtype_name(TACL_FLOAT32), "float32");
    cr_assert_str_eq(tacl_op_name(TACL_SUM), "sum");
    for (int s = -8; s <= 1; s++) {
        const char *m = tacl_status_string((tacl_status_t)s);

        cr_assert(m != NULL && m[0] != '\0', "status %d has no string", s);
    }
    cr_assert_not_null(tacl_status_string((tacl_status_t)-99));
}

/*
 * Two ranks: count * element size fits, but count * size * nranks does
 * not.  Both ranks must refuse before any communication.
 */
static int body_rank_overflow(coll_ctx_t *ctx)
{
    const size_t c = SIZE_MAX / 2 + 1;
    char s[16] = {0}, r[16] = {0};
    tacl_status_t st;

    st = tacl_allgather(s, r, c, TACL_INT8, ctx->comm, NULL);
    COLL_CHECK(ctx, st == TACL_ERR_INVALID_ARG, "allgather gave %s",
               tacl_status_string(st));
    st = tacl_reduce_scatter(s, r, c, TACL_INT8, TACL_SUM, ctx->comm, NULL);
    COLL_CHECK(ctx, st == TACL_ERR_INVALID_ARG, "reduce_scatter gave %s",
               tacl_status_string(st));
    st = tacl_alltoall(s, r, c, TACL_INT8, ctx->comm, NULL);
    COLL_CHECK(ctx, st == TACL_ERR_INVALID_ARG, "alltoall gave %s",
               tacl_status_string(st));
    COLL_CHECK(ctx, tacl_comm_last_error(ctx->comm)[0] != '\0',
               "empty last error");
    /* The communicator still works. */
    s[0] = (char)(ctx->rank + 1);
    COLL_CHECK_OK(ctx, tacl_allreduce(s, r, 1, TACL_INT8, TACL_SUM,
                                      ctx->comm, NULL));
    COLL_CHECK(ctx, r[0] == 3, "allreduce gave %d", r[0]);
    return 0;
}

Test(errors_multi, rank_count_overflow, .timeout = 60)
{
    coll_run_expect_pass(2, body_rank_overflow, NULL, NULL);
}

/* tacl_comm_init_env with no variable set: a clear error, no hang. */
static int body_init_env_missing(coll_ctx_t *ctx)
{
    tacl_comm_t c = (tacl_comm_t)&c;
    tacl_status_t st;

    unsetenv("TACL_ROOT_ADDR");
    unsetenv("TACL_RANK");
    unsetenv("TACL_NRANKS");
    unsetenv("MASTER_ADDR");
    unsetenv("MASTER_PORT");
    unsetenv("RANK");
    unsetenv("WORLD_SIZE");
    st = tacl_comm_init_env(&c);
    COLL_CHECK(ctx, st == TACL_ERR_INVALID_ARG ||
               st == TACL_ERR_INVALID_USAGE,
               "init_env with no environment gave %s",
               tacl_status_string(st));
    COLL_CHECK(ctx, c == (tacl_comm_t)&c, "failed init_env wrote *comm_p");
    COLL_CHECK(ctx, tacl_last_error()[0] != '\0', "empty last error");
    return 0;
}

Test(errors_multi, init_env_missing, .timeout = 60)
{
    coll_opts_t opts = {.nranks = 1, .deadline_s = 30,
                        .init = COLL_INIT_NONE};
    coll_result_t *res = malloc(sizeof(*res));

    cr_assert_not_null(res);
    coll_run(&opts, body_init_env_missing, res);
    coll_expect_pass(res);
    free(res);
}

/* The test's own float16/bfloat16 encoders, against known bit patterns. */
Test(values, half_and_bf16_encoding)
{
    cr_assert_eq(val_half_from_int(0), 0x0000);
    cr_assert_eq(val_half_from_int(1), 0x3c00);
    cr_assert_eq(val_half_from_int(2), 0x4000);
    cr_assert_eq(val_half_from_int(3), 0x4200);
    cr_assert_eq(val_half_from_int(-2), 0xc000);
    cr_assert_eq(val_half_from_int(1000), 0x63d0);
    cr_assert_eq(val_half_from_int(2047), 0x67ff);
    cr_assert_eq(val_bf16_from_int(1), 0x3f80);
    cr_assert_eq(val_bf16_from_int(-3), 0xc040);
    for (int v = -250; v <= 250; v++) {
        uint16_t h = val_half_from_int(v), b = val_bf16_from_int(v);

        cr_assert_eq(val_load(TACL_FLOAT16, &h, 0), (double)v, "half %d", v);
        cr_assert_eq(val_load(TACL_BFLOAT16, &b, 0), (double)v, "bf16 %d", v);
    }
}
