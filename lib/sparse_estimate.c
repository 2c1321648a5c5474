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
#include "cost.h"
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

/* Zen's phases on comm (or PS's: hashed 0, no bitmap): counts to
 * owners, the push of an n-th of nnz rows of ib + rb bytes to each, the
 * owners' counts, the pull of an n-th of the union u (indices or a
 * bitmap over an n-th of the table's nrows rows). */
static tacl_status_t owners_phases(tacl_comm_t comm, int hashed, size_t nnz,
                                   size_t nrows, size_t ib, size_t rb,
                                   size_t u, double *t)
{
    size_t n = (size_t)comm->size, own = (u + n - 1) / n;
    size_t dom = (nrows + n - 1) / n;
    int bitmap = hashed && tacl__sparse_pull_bitmap(own, dom, ib);
    tacl_status_t st;

    st = phase(comm, TACL_COLL_ALLTOALL, 1, TACL_UINT64, t);
    if (st == TACL_OK)
        st = phase(comm, TACL_COLL_ALLTOALLV, nnz * (ib + rb) / n, TACL_UINT8,
                   t);
    if (st == TACL_OK)
        st = phase(comm, TACL_COLL_ALLGATHER, 1, TACL_UINT64, t);
    if (st == TACL_OK)
        st = phase(comm, TACL_COLL_ALLGATHERV,
                   own * rb +
                       (bitmap ? tacl__sparse_bitmap_bytes(dom) : own * ib),
                   TACL_UINT8, t);
    return st;
}

/*
 * A scheme no one communicator's collectives describe (SparCML's rounds
 * of pairs; the hierarchical schemes' steps on node and rail
 * communicators, which an estimate may not create): its bytes per link
 * class (tacl__sparse_bytes) at the links' rates, and a latency per step
 * on each.
 */
static double by_links(tacl_comm_t comm, tacl_sparse_scheme_t scheme,
                       size_t nnz, size_t nrows, size_t row_len, size_t ib,
                       size_t rb, size_t u, int steps_in, int steps_out)
{
    const tacl__topo_view_t *v = &comm->view;
    int n = comm->size, even = tacl__comm_nodes_even(comm);
    int nodes = even ? v->n_nodes : 1;
    tacl__sparse_shape_t sh;
    tacl__sparse_link_bytes_t b[TACL_NUM_SPARSE_SCHEMES];

    tacl__sparse_shape_largest(&sh, n, nodes, even, (double)n * nnz,
                               (double)nrows, (double)row_len, (double)ib,
                               (double)rb);
    sh.u = (double)u;
    tacl__sparse_bytes(&sh, b);
    return steps_in *
               tacl__link_alpha(v, TACL_LINK_HOST,
                                tacl__cost_links[TACL_LINK_HOST].alpha) +
           b[scheme].intra *
               tacl__link_beta(v, TACL_LINK_HOST,
                               tacl__cost_links[TACL_LINK_HOST].beta) +
           steps_out *
               tacl__link_alpha(v, TACL_LINK_NET,
                                tacl__cost_links[TACL_LINK_NET].alpha) +
           b[scheme].inter *
               tacl__link_beta(v, TACL_LINK_NET,
                               tacl__cost_links[TACL_LINK_NET].beta);
}

/* Rounds of SparCML's recursive doubling inside a node of L ranks and
 * between nodes (a header and a part each). */
static void sparcml_rounds(int n, int L, int *in_p, int *out_p)
{
    *in_p = *out_p = 0;
    for (int d = 1; 2 * d <= n; d *= 2)
        *(d < L ? in_p : out_p) += 2;
}

/* Adds the time of the scheme's phases to *t (on one rank only DENSE
 * runs a collective). */
static tacl_status_t price(tacl_comm_t comm, tacl_sparse_scheme_t scheme,
                           size_t nnz, size_t nrows, size_t row_len,
                           tacl_dtype_t dtype, size_t ib, size_t rb, size_t u,
                           double *t)
{
    int L = comm->size / comm->view.n_nodes, in, out;
    size_t bl = (row_len + 255) / 256, bb = 256 * tacl_dtype_size(dtype);
    size_t nb = (nrows * row_len + 255) / 256;
    tacl_status_t st;

    switch (scheme) {
    case TACL_SPARSE_DENSE:
        return phase(comm, TACL_COLL_ALLREDUCE, nrows * row_len, dtype, t);
    case TACL_SPARSE_AGSPARSE:
    case TACL_SPARSE_AGPADDED:
        /* The ranks' row counts, then their rows (padded: one size). */
        st = phase(comm, TACL_COLL_ALLGATHER, 1, TACL_UINT64, t);
        if (st == TACL_OK)
            st = phase(comm,
                       scheme == TACL_SPARSE_AGSPARSE ? TACL_COLL_ALLGATHERV
                                                      : TACL_COLL_ALLGATHER,
                       nnz * (ib + rb), TACL_UINT8, t);
        return st;
    case TACL_SPARSE_ZEN:
    case TACL_SPARSE_PS:
        return owners_phases(comm, scheme == TACL_SPARSE_ZEN, nnz, nrows, ib,
                             rb, u, t);
    case TACL_SPARSE_OMNI:
        /* PS on blocks of 256 values with 8-byte ids. */
        nnz = nnz * bl < nb ? nnz * bl : nb;
        u = u * bl < nb ? u * bl : nb;
        return owners_phases(comm, 0, nnz, nb, 8, bb, u, t);
    case TACL_SPARSE_SPARCML:
        sparcml_rounds(comm->size, L, &in, &out);
        *t += by_links(comm, scheme, nnz, nrows, row_len, ib, rb, u, in, out);
        return TACL_OK;
    case TACL_SPARSE_ZEN_HIER:
    case TACL_SPARSE_DENSE_ZEN:
        st = tacl__comm_need_even_nodes(comm, "sparse estimate: a "
                                              "hierarchical scheme");
        if (st != TACL_OK)
            return st;
        /* Counts and rows both ways inside (DENSE_ZEN: two
         * reduce-scatters, one all-gather) and on the rail. */
        *t += by_links(comm, scheme, nnz, nrows, row_len, ib, rb, u,
                       scheme == TACL_SPARSE_ZEN_HIER ? 4 : 3, 4);
        return TACL_OK;
    default:
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "sparse estimate: invalid scheme %d", (int)scheme);
    }
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
    size_t ib, rb, most;
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
    if ((unsigned)scheme >= TACL_NUM_SPARSE_SCHEMES)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "sparse estimate: invalid scheme %d", (int)scheme);
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
        scheme = tacl__sparse_auto_pick(n, comm->view.n_nodes,
                                        tacl__comm_nodes_even(comm),
                                        (uint64_t)n * nnz, nrows, row_len, ib,
                                        rb,
                                        tacl__sparse_intra_weight(
                                            &comm->view));
        if (n > 1)
            st = phase(comm, TACL_COLL_ALLREDUCE, 1, TACL_UINT64, &t);
    }
    if (st == TACL_OK && (n > 1 || scheme == TACL_SPARSE_DENSE))
        st = price(comm, scheme, nnz, nrows, row_len, dtype, ib, rb, u, &t);
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
