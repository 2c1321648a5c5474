/*
 * The algorithm suites' shared scaffolding (suite.h).
 */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "suite.h"

tacl__topo_view_t suite_view(const suite_layout_t *lay, int rank)
{
    return simrun_view(lay->node_of, lay->n, rank);
}

tacl__coll_args_t suite_args(const suite_op_t *op, const simrun_bufs_t *b,
                             uint64_t seq)
{
    tacl__coll_args_t a = {0};

    a.type = op->coll;
    a.sendbuf = b != NULL ? b->send : NULL;
    a.recvbuf = b != NULL ? b->recv : NULL;
    a.count = op->count;
    a.dtype = op->dtype;
    a.op = op->op;
    a.root = op->root;
    a.memtype = TACL_MEM_HOST;
    a.seq = seq;
    a.chunk_bytes = op->chunk;
    a.qbits = op->qbits;
    a.qblock = op->qblock;
    return a;
}

void suite_bufs(simrun_t *sr, const suite_op_t *op, int r, simrun_bufs_t *b,
                void (*fill)(const void *ctx, int r, void *send, size_t n),
                const void *ctx)
{
    size_t es = tacl_dtype_size(op->dtype);
    size_t ns = simrun_send_elems(op->coll, op->count, op->n);
    int rooted = r != op->root;

    /* A broadcast reads only the root's input, a reduce writes only the
     * root's output. */
    simrun_bufs_alloc(b, op->coll, r, op->in_place, ns * es,
                      simrun_recv_elems(op->coll, op->count, op->n) * es,
                      !(op->coll == TACL_COLL_BROADCAST && rooted),
                      !(op->coll == TACL_COLL_REDUCE && rooted));
    if (b->send != NULL)
        fill(ctx, r, b->send, ns);
    simrun_bufs_declare(sr, r, b, op->coll, op->in_place);
}

void suite_check_output(const simrun_bufs_t *b, int r, const char *exp,
                        const char *name)
{
    for (size_t k = 0; k < b->out_bytes; k++)
        cr_assert_eq((unsigned char)b->region[b->out_off + k],
                     (unsigned char)exp[k],
                     "%s: rank %d output byte %zu is 0x%02x, expected "
                     "0x%02x", name, r, k,
                     (unsigned char)b->region[b->out_off + k],
                     (unsigned char)exp[k]);
}

void suite_check_writes(simrun_t *sr, const suite_op_t *op, int r,
                        const simrun_bufs_t *b,
                        int (*right)(const void *ctx, int r, size_t k),
                        const void *ctx, const char *name)
{
    if (b->region != NULL) {
        const uint8_t *w = simrun_writes(sr, r, b->region);
        size_t rsize = b->region == b->recv ? b->rbytes : b->sbytes;

        cr_assert_not_null(w, "%s: no write counts", name);
        for (size_t k = 0; k < rsize; k++) {
            int in_out = k >= b->out_off && k < b->out_off + b->out_bytes;
            int want = in_out && !(right != NULL &&
                                   right(ctx, r, k - b->out_off));

            cr_assert_eq(w[k], want, "%s: rank %d byte %zu written %d "
                         "times, expected %d", name, r, k, w[k], want);
        }
    }
    if (!op->in_place && b->send != NULL) {
        const uint8_t *ws = simrun_writes(sr, r, b->send);

        for (size_t k = 0; k < b->sbytes; k++)
            cr_assert_eq(ws[k], 0, "%s: rank %d wrote its input", name, r);
    }
}

uint64_t suite_inter_bytes(const tacl__sched_t *s, const int *node_of)
{
    uint64_t total = 0;

    for (uint32_t j = 0; j < s->nsteps; j++) {
        const tacl__step_t *st = &s->steps[j];

        if (st->kind == TACL__STEP_SEND &&
            node_of[st->peer] != node_of[s->rank])
            total += st->bytes;
    }
    return total;
}

void suite_run(const suite_t *suite, const void *cfg, int n, uint64_t seq,
               unsigned seed, const char *name)
{
    simrun_bufs_t *b = calloc((size_t)n, sizeof(*b));
    simrun_t *sr = simrun_new(n);
    char err[512];
    int r;

    cr_assert(b != NULL && sr != NULL);
    for (r = 0; r < n; r++)
        suite->build(cfg, sr, r, &b[r], seq, name);
    cr_assert_eq(simrun_run(sr, seed, err, sizeof(err)), 0, "%s seed %u: %s",
                 name, seed, err);
    for (r = 0; r < n; r++) {
        suite->check(cfg, sr, r, &b[r], name);
        simrun_bufs_free(&b[r]);
    }
    simrun_free(sr);
    free(b);
}
