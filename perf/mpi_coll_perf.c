/*
 * mpi_coll_perf: the MPI library's collectives, measured like tacl's.
 *
 * It shares common.c with the tacl perf binaries, so sizes, data, exact
 * checks, timing (warmup, barrier, timed loop, per-operation mean over
 * ranks) and the output table are the same and runs compare side by side.
 *
 * Usage: mpirun -n N mpi_coll_perf COLL [perf options]
 * COLL is allgather, reduce_scatter (MPI_Reduce_scatter_block),
 * allreduce or alltoallv (MPI_Alltoallv on alltoallv_perf's exchange; its
 * "in-place" columns, like alltoallv_perf's, send from beside the output
 * in one buffer).  -z 0 uses the non-blocking MPI calls and MPI_Wait; -m runs
 * that many operations back to back per iteration (MPI has no groups).
 * float16, bfloat16 and avg are not MPI types or ops and are refused.
 */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

typedef struct {
    tacl_coll_t kind;
    MPI_Datatype type;
    MPI_Op op;
    MPI_Comm comm;
    int rank, nranks;
} mpi_ctx_t;

/* The MPI types and ops of tacl's; the others are not MPI's. */
static const struct {
    tacl_dtype_t dtype;
    MPI_Datatype type;
} mpi_types[] = {
    {TACL_INT8, MPI_INT8_T},     {TACL_UINT8, MPI_UINT8_T},
    {TACL_INT32, MPI_INT32_T},   {TACL_UINT32, MPI_UINT32_T},
    {TACL_INT64, MPI_INT64_T},   {TACL_UINT64, MPI_UINT64_T},
    {TACL_FLOAT32, MPI_FLOAT},   {TACL_FLOAT64, MPI_DOUBLE},
};

static const struct {
    tacl_op_t op;
    MPI_Op mpi;
} mpi_ops[] = {
    {TACL_SUM, MPI_SUM},   {TACL_PROD, MPI_PROD}, {TACL_MAX, MPI_MAX},
    {TACL_MIN, MPI_MIN},   {TACL_BAND, MPI_BAND}, {TACL_BOR, MPI_BOR},
    {TACL_BXOR, MPI_BXOR},
};

static int mpi_type(tacl_dtype_t dtype, MPI_Datatype *type_p)
{
    for (size_t i = 0; i < sizeof(mpi_types) / sizeof(mpi_types[0]); i++)
        if (mpi_types[i].dtype == dtype) {
            *type_p = mpi_types[i].type;
            return 0;
        }
    return -1;
}

static int mpi_op(tacl_op_t op, MPI_Op *op_p)
{
    for (size_t i = 0; i < sizeof(mpi_ops) / sizeof(mpi_ops[0]); i++)
        if (mpi_ops[i].op == op) {
            *op_p = mpi_ops[i].mpi;
            return 0;
        }
    return -1;
}

/* MPI_Alltoallv's tables (int) of the exchange with this unit. */
static int vtables(const mpi_ctx_t *c, size_t unit, int **tables_p)
{
    static int *t, made;
    static size_t made_for;
    size_t n = (size_t)c->nranks;

    if (t == NULL) {
        t = malloc(4 * n * sizeof(int));
        if (t == NULL) {
            return MPI_ERR_NO_MEM;
        }
    }
    if (!made || made_for != unit) {
        for (int j = 0; j < c->nranks; j++) {
            size_t sd, rd, ignored;

            t[j] = (int)tacl__perf_vblock(c->nranks, unit, c->rank, j, &sd,
                                          &ignored);
            t[n + j] = (int)sd;
            t[2 * n + j] = (int)tacl__perf_vblock(c->nranks, unit, j,
                                                  c->rank, &ignored, &rd);
            t[3 * n + j] = (int)rd;
        }
        made_for = unit;
        made = 1;
    }
    *tables_p = t;
    return MPI_SUCCESS;
}

/* One operation; in place when sendbuf is MPI_IN_PLACE. */
static int post(const mpi_ctx_t *c, const void *sendbuf, void *recvbuf,
                size_t count, int blocking)
{
    MPI_Request req;
    int rc, n = (int)count, *t;

    switch (c->kind) {
    case TACL_COLL_ALLTOALLV:
        rc = vtables(c, count, &t);
        if (rc != MPI_SUCCESS) {
            return rc;
        }
        rc = blocking ?
             MPI_Alltoallv(sendbuf, t, t + c->nranks, c->type, recvbuf,
                           t + 2 * c->nranks, t + 3 * c->nranks, c->type,
                           c->comm) :
             MPI_Ialltoallv(sendbuf, t, t + c->nranks, c->type, recvbuf,
                            t + 2 * c->nranks, t + 3 * c->nranks, c->type,
                            c->comm, &req);
        break;
    case TACL_COLL_ALLGATHER:
        rc = blocking ?
             MPI_Allgather(sendbuf, n, c->type, recvbuf, n, c->type,
                           c->comm) :
             MPI_Iallgather(sendbuf, n, c->type, recvbuf, n, c->type,
                            c->comm, &req);
        break;
    case TACL_COLL_REDUCE_SCATTER:
        rc = blocking ?
             MPI_Reduce_scatter_block(sendbuf, recvbuf, n, c->type, c->op,
                                      c->comm) :
             MPI_Ireduce_scatter_block(sendbuf, recvbuf, n, c->type, c->op,
                                       c->comm, &req);
        break;
    default:
        rc = blocking ?
             MPI_Allreduce(sendbuf, recvbuf, n, c->type, c->op, c->comm) :
             MPI_Iallreduce(sendbuf, recvbuf, n, c->type, c->op, c->comm,
                            &req);
        break;
    }
    if (rc == MPI_SUCCESS && !blocking) {
        rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
    }
    return rc;
}

/* Runs one size, one placement; fills *res. */
static int run_one(const mpi_ctx_t *c, const tacl__perf_opts_t *o,
                   const tacl__perf_sizes_t *s, char *sendbuf,
                   char *recvbuf, int in_place, tacl__perf_result_t *res)
{
    size_t ts = tacl__perf_dtype_size(o->dtype), send_off, recv_off;
    const void *src = in_place ? MPI_IN_PLACE : sendbuf;
    double t0, t, agg_t;
    long long wrong = 0, all_wrong = 0;
    int i, j, rc = MPI_SUCCESS;

    tacl__perf_inplace_offsets(c->kind, s, c->rank, &send_off, &recv_off);
    if (in_place && c->kind == TACL_COLL_ALLTOALLV) {
        src = recvbuf + send_off * ts;
    }
    /* Real data, as tacl's harness times (see there). */
    tacl__perf_fill(c->kind, o, s, c->rank, c->nranks, sendbuf, recvbuf,
                    in_place);
    for (i = 0; i < o->warmup && rc == MPI_SUCCESS; i++) {
        rc = post(c, src, recvbuf, s->count, o->blocking);
    }
    MPI_Barrier(c->comm);
    t0 = tacl__perf_now();
    for (i = 0; i < o->iters && rc == MPI_SUCCESS; i++) {
        for (j = 0; j < o->agg && rc == MPI_SUCCESS; j++) {
            rc = post(c, src, recvbuf, s->count, o->blocking);
        }
    }
    t = (tacl__perf_now() - t0) * 1e6 / ((double)o->iters * o->agg);
    if (rc != MPI_SUCCESS) {
        return rc;
    }
    MPI_Allreduce(&t, &agg_t, 1, MPI_DOUBLE, o->average == 2 ? MPI_MIN :
                  o->average == 3 ? MPI_MAX : MPI_SUM, c->comm);
    res->time_us = o->average == 0 ? t :
                   o->average == 1 ? agg_t / c->nranks : agg_t;
    tacl__perf_bandwidth(c->kind, s, c->nranks, res->time_us, &res->algbw,
                         &res->busbw);
    res->wrong = -1;
    if (!o->check) {
        return MPI_SUCCESS;
    }
    tacl__perf_fill(c->kind, o, s, c->rank, c->nranks, sendbuf, recvbuf,
                    in_place);
    rc = post(c, src, recvbuf, s->count, 1);
    if (rc != MPI_SUCCESS) {
        return rc;
    }
    /* MPI leaves an in-place reduce-scatter result at the buffer start. */
    if (in_place && recv_off != 0) {
        memmove(recvbuf + recv_off * ts, recvbuf, s->recv_count * ts);
    }
    if (o->inject_error && c->rank == 0) {
        tacl__perf_corrupt(c->kind, o, s, c->rank, recvbuf, in_place);
    }
    wrong = tacl__perf_check(c->kind, o, s, c->rank, c->nranks, recvbuf,
                             in_place);
    MPI_Allreduce(&wrong, &all_wrong, 1, MPI_LONG_LONG, MPI_SUM, c->comm);
    res->wrong = all_wrong;
    return MPI_SUCCESS;
}

int main(int argc, char **argv)
{
    tacl__perf_opts_t o;
    tacl__perf_sizes_t s;
    tacl__perf_result_t res[2];
    mpi_ctx_t c;
    size_t bytes, send_bytes, recv_bytes;
    char *sendbuf = NULL, *recvbuf = NULL;
    int code = 0, p, rc = MPI_SUCCESS;
    long long wrong = 0;
    FILE *json = NULL;

    /* --version comes alone, without a collective. */
    if (argc == 2 && strcmp(argv[1], "--version") == 0 &&
        tacl__perf_parse(argc, argv, TACL_COLL_ALLREDUCE, &o, &code) != 0) {
        return code;
    }
    if (argc < 2 || tacl__perf_compared_kind(argv[1], &c.kind) != 0) {
        fprintf(stderr, "usage: mpi_coll_perf allgather|reduce_scatter|"
                "allreduce [perf options, -h for the list]\n");
        return 2;
    }
    argv[1] = argv[0];
    if (tacl__perf_parse(argc - 1, argv + 1, c.kind, &o, &code) != 0) {
        return code;
    }
    if (tacl__perf_refuse_all(argv[0], &o) != 0) {
        return 2;
    }
    if (mpi_type(o.dtype, &c.type) != 0 ||
        (tacl__perf_has_op(c.kind) && mpi_op(o.op, &c.op) != 0)) {
        fprintf(stderr, "mpi_coll_perf: MPI has no %s %s; use float, "
                "double or an integer type and sum, prod, min, max or a bitwise op\n",
                tacl__perf_dtype_name(o.dtype),
                o.op == TACL_AVG ? "avg" : "type");
        return 2;
    }
    MPI_Init(&argc, &argv);
    c.comm = MPI_COMM_WORLD;
    MPI_Comm_rank(c.comm, &c.rank);
    MPI_Comm_size(c.comm, &c.nranks);
    tacl__perf_max_buffers(c.kind, &o, c.nranks, &send_bytes, &recv_bytes);
    if (o.reg) {
        if (MPI_Alloc_mem((MPI_Aint)(send_bytes ? send_bytes : 1),
                          MPI_INFO_NULL, &sendbuf) != MPI_SUCCESS ||
            MPI_Alloc_mem((MPI_Aint)(recv_bytes ? recv_bytes : 1),
                          MPI_INFO_NULL, &recvbuf) != MPI_SUCCESS)
            sendbuf = recvbuf = NULL;
    } else {
        sendbuf = malloc(send_bytes ? send_bytes : 1);
        recvbuf = malloc(recv_bytes ? recv_bytes : 1);
    }
    if (sendbuf == NULL || recvbuf == NULL) {
        fprintf(stderr, "mpi_coll_perf: cannot allocate %zu + %zu bytes\n",
                send_bytes, recv_bytes);
        MPI_Abort(c.comm, 1);
    }
    /* Touch the buffers so page faults stay out of the first timing. */
    memset(sendbuf, 0, send_bytes);
    memset(recvbuf, 0, recv_bytes);
    if (c.rank == 0) {
        tacl__perf_print_header(stdout, "mpi_coll_perf", "mpi", c.kind, &o,
                                c.nranks);
        if (o.json_path != NULL) {
            json = tacl__perf_json_open(o.json_path, "mpi", c.kind, &o,
                                        c.nranks);
        }
    }
    for (bytes = o.min_bytes; bytes <= o.max_bytes && rc == MPI_SUCCESS;
         bytes = tacl__perf_next_size(&o, bytes)) {
        tacl__perf_get_sizes(c.kind, bytes, c.nranks, o.dtype, &s);
        for (p = 0; p < 2 && rc == MPI_SUCCESS; p++) {
            rc = run_one(&c, &o, &s, sendbuf, recvbuf, p, &res[p]);
        }
        if (rc == MPI_SUCCESS && c.rank == 0) {
            tacl__perf_print_row(stdout, c.kind, &o, &s, res);
            if (json != NULL) {
                tacl__perf_json_row(json, &s, res, NULL);
            }
        }
        if (bytes == SIZE_MAX) {
            break;
        }
    }
    if (rc != MPI_SUCCESS) {
        fprintf(stderr, "mpi_coll_perf: rank %d: MPI call failed (%d)\n",
                c.rank, rc);
        MPI_Abort(c.comm, 1);
    }
    if (c.rank == 0) {
        wrong = tacl__perf_print_footer(stdout);
        if (json != NULL) {
            tacl__perf_json_close(json);
        }
    }
    MPI_Bcast(&wrong, 1, MPI_LONG_LONG, 0, c.comm);
    if (o.reg) {
        MPI_Free_mem(sendbuf);
        MPI_Free_mem(recvbuf);
    } else {
        free(sendbuf);
        free(recvbuf);
    }
    MPI_Finalize();
    return wrong != 0 ? 1 : 0;
}
