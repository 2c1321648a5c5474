/*
 * alltoallv_perf: tacl_alltoallv(), timed and checked like the other
 * perf binaries, on an uneven exchange with a third of the peers
 * skipped (tacl__perf_vblock; the count column is its unit).  The
 * "in-place" columns run with the input beside the output in one
 * buffer: the call has no in-place form.  Run it under tacl-run, e.g.
 * "tacl-run -n 4 alltoallv_perf -b 1M -e 64M -f 4"; mpi_coll_perf
 * alltoallv runs MPI_Alltoallv on the same exchange.
 */
#include <stdlib.h>

#include "common.h"

/* The call's tables, made again when the unit or the layout changes. */
typedef struct {
    int nranks, rank;
    size_t unit;
    size_t *sc, *sd, *rc, *rd;
} tables_t;

static int tables_for(tables_t *t, const tacl__perf_call_t *c)
{
    size_t n = (size_t)c->nranks;

    if (t->sc != NULL && t->nranks == c->nranks && t->rank == c->rank &&
        t->unit == c->count)
        return 0;
    free(t->sc);
    t->sc = malloc(4 * n * sizeof(size_t));
    if (t->sc == NULL)
        return -1;
    t->sd = t->sc + n;
    t->rc = t->sd + n;
    t->rd = t->rc + n;
    for (int j = 0; j < c->nranks; j++) {
        size_t ignored;

        t->sc[j] = tacl__perf_vblock(c->nranks, c->count, c->rank, j,
                                     &t->sd[j], &ignored);
        t->rc[j] = tacl__perf_vblock(c->nranks, c->count, j, c->rank,
                                     &ignored, &t->rd[j]);
    }
    t->nranks = c->nranks;
    t->rank = c->rank;
    t->unit = c->count;
    return 0;
}

static tacl_status_t post(const tacl__perf_call_t *c, tacl_request_t *req_p)
{
    static tables_t t;

    if (tables_for(&t, c) != 0)
        return TACL_ERR_NO_MEMORY;
    if (req_p == NULL) {
        return tacl_alltoallv(c->sendbuf, t.sc, t.sd, c->recvbuf, t.rc,
                              t.rd, c->dtype, c->comm, c->stream);
    }
    return tacl_alltoallv_nb(c->sendbuf, t.sc, t.sd, c->recvbuf, t.rc, t.rd,
                             c->dtype, c->comm, c->stream, req_p);
}

int main(int argc, char **argv)
{
    static const tacl__perf_coll_t coll = {TACL_COLL_ALLTOALLV, post};

    return tacl__perf_main(argc, argv, &coll);
}
