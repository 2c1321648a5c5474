/*
 * tacl_sparse_estimate: a sparse all-reduce predicted without running
 * it.  The scheme is AUTO's pick (algorithms/sparse.c's
 * tacl__sparse_auto_pick, which the real call asks too) or the one
 * named; its time is the sum of tacl_comm_estimate's predictions for the
 * collectives lib/sparse.c runs for it, so each phase is priced by the
 * decider's own row on the communicator's cluster (Zen's push by the
 * flat or the hierarchical all-to-all-v, whichever the cost model
 * picks).  Blocks are even: every rank gives nnz rows, an n-th of them
 * to each owner, and each owner holds an n-th of the union.
 */
#include <string.h>

#include "comm.h"
#include "log.h"
#include "sparse.h"

/* Adds the estimate of one collective of count elements to *t (none
 * for no elements: rows that move nothing). */
static tacl_status_t phase(tacl_comm_t comm, tacl_coll_t coll, size_t count,
                           tacl_dtype_t dtype, double *t)
{
    tacl_sim_info_t info;
    tacl_status_t st;

    if (count == 0)
        return TACL_OK;
    st = tacl_comm_estimate(comm, coll, count, dtype, TACL_SUM, 0, &info);
    if (st == TACL_OK)
        *t += info.seconds;
    return st;
}

static tacl_status_t sparse_estimate(tacl_comm_t comm, size_t nnz,
                                     size_t nrows, size_t row_len,
                                     tacl_dtype_t dtype,
                                     tacl_dtype_t index_type, size_t u,
                                     tacl_sparse_scheme_t scheme,
                                     tacl_sparse_estimate_t *est_p)
{
    int n = comm->size;
    int automatic = scheme == TACL_SPARSE_AUTO;
    size_t ib, rb, own, dom, most;
    double t = 0;
    tacl_status_t st = TACL_OK;

    if (est_p == NULL)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "sparse estimate: est_p is NULL");
    if ((unsigned)dtype >= TACL_NUM_DTYPES)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "sparse estimate: dtype %d is not a "
                           "tacl_dtype_t",
                           (int)dtype);
    if (index_type != TACL_INT32 && index_type != TACL_INT64)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "sparse estimate: index_type %s is not "
                           "TACL_INT32 or TACL_INT64",
                           tacl_dtype_name(index_type));
    if (row_len == 0 || nrows == 0 || nnz > nrows)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "sparse estimate: nnz %zu, nrows %zu, row_len "
                           "%zu: want 0 < row_len, nnz <= nrows",
                           nnz, nrows, row_len);
    if (row_len > SIZE_MAX / tacl_dtype_size(dtype) / nrows)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "sparse estimate: a table of %zu rows of %zu "
                           "elements overflows",
                           nrows, row_len);
    most = nnz > nrows / (size_t)n ? nrows : (size_t)n * nnz;
    if (u == 0)
        u = most;
    if (u < nnz || u > most)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "sparse estimate: expected_union %zu is not "
                           "between nnz %zu and min(nranks * nnz, nrows "
                           "%zu)",
                           u, nnz, nrows);
    ib = index_type == TACL_INT64 ? 8 : 4;
    rb = row_len * tacl_dtype_size(dtype);
    /* AUTO first sums the ranks' row counts, then picks. */
    if (automatic) {
        scheme = tacl__sparse_auto_pick(n, (uint64_t)n * nnz, nrows, ib, rb);
        if (n > 1)
            st = phase(comm, TACL_COLL_ALLREDUCE, 1, TACL_UINT64, &t);
    }
    switch (scheme) {
    case TACL_SPARSE_DENSE:
        if (st == TACL_OK)
            st = phase(comm, TACL_COLL_ALLREDUCE, nrows * row_len, dtype, &t);
        break;
    case TACL_SPARSE_AGSPARSE:
        /* The ranks' row counts, then their rows. */
        if (st == TACL_OK && n > 1)
            st = phase(comm, TACL_COLL_ALLGATHER, 1, TACL_UINT64, &t);
        if (st == TACL_OK && n > 1)
            st = phase(comm, TACL_COLL_ALLGATHERV, nnz * (ib + rb),
                       TACL_UINT8, &t);
        break;
    case TACL_SPARSE_ZEN:
        /* An owner's rows and domain; its pull by the byte rule. */
        own = (u + (size_t)n - 1) / (size_t)n;
        dom = (nrows + (size_t)n - 1) / (size_t)n;
        /* Counts to owners, the push, owners' counts, the pull. */
        if (st == TACL_OK && n > 1)
            st = phase(comm, TACL_COLL_ALLTOALL, 1, TACL_UINT64, &t);
        if (st == TACL_OK && n > 1)
            st = phase(comm, TACL_COLL_ALLTOALLV, nnz * (ib + rb) / (size_t)n,
                       TACL_UINT8, &t);
        if (st == TACL_OK && n > 1)
            st = phase(comm, TACL_COLL_ALLGATHER, 1, TACL_UINT64, &t);
        if (st == TACL_OK && n > 1)
            st = phase(comm, TACL_COLL_ALLGATHERV,
                       own * rb + (tacl__sparse_pull_bitmap(own, dom, ib)
                                       ? tacl__sparse_bitmap_bytes(dom)
                                       : own * ib),
                       TACL_UINT8, &t);
        break;
    default:
        return tacl__error(TACL_ERR_UNSUPPORTED, COLL,
                           "sparse estimate: scheme %s is not priced; "
                           "AUTO, ZEN, AGSPARSE and DENSE are",
                           tacl_sparse_scheme_name(scheme));
    }
    if (st != TACL_OK)
        return st;
    est_p->scheme = scheme;
    est_p->seconds = t;
    return TACL_OK;
}

TACL_EXPORT tacl_status_t tacl_sparse_estimate(
    tacl_comm_t comm, size_t nnz, size_t nrows, size_t row_len,
    tacl_dtype_t dtype, tacl_dtype_t index_type, size_t expected_union,
    tacl_sparse_scheme_t scheme, tacl_sparse_estimate_t *est_p)
{
    TACL__COMM_HELD(comm,
                    tacl__comm_fail(comm,
                                    sparse_estimate(comm, nnz, nrows, row_len,
                                                    dtype, index_type,
                                                    expected_union, scheme,
                                                    est_p)));
}
