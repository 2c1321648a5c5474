/*
 * qgZ: the quantized gradient reduce-scatter of ZeRO++ (Wang et al.,
 * "ZeRO++: Extremely efficient collective communication for giant model
 * training", 2023, sections 3.3, 4.1.2 and 4.2).
 *
 * The input of p blocks (block d for rank d) is cut on a chunk grid
 * (tacl__qgz_grid); every chunk runs the whole algorithm on its own
 * buffers, so chunk c's inter-node hop overlaps chunk c + 1's intra-node
 * hop (section 4.1.2) and nothing orders one chunk after another.
 *
 * 2-hop form (section 3.3.2), on g nodes of k ranks; rank (m, l) is the
 * rank of local index l on node m, and ranks need not be numbered node by
 * node.  Per chunk:
 *   1. QUANT each slice once, written straight into the place the
 *      intra-node all-to-all sends it from (section 3.3.3's reordering,
 *      fused with quantization as in section 4.2; tacl__qgz_slot): the g
 *      slices for local peer l' are one contiguous run; the slices for
 *      this rank's own rail go straight to the receive buffer.
 *   2. Intra-node all-to-all: one message of g slices to each local peer.
 *   3. DQRQ per node m': dequantize the k contributions for rank (m', l),
 *      sum them in float32 and requantize (section 4.2's fused kernel).
 *   4. Inter-node all-to-all along the rail: the partial for (m', l) goes
 *      to it.
 *   5. DEQUANT the g partials, summed in float32, into recvbuf.  AVG
 *      dequantizes into scratch and divides by p into recvbuf, so every
 *      output byte is written once and the division rounds once.
 * Each value thus goes through two quantizations, and each rank sends
 * (g - 1) quantized partials between nodes instead of a ring's p - 1
 * full-precision blocks: at 4 bits a quarter of float16's (plus scales).
 *
 * 1-hop form (one node, one rank per node, or unequal nodes): QUANT every
 * slice, all-to-all over all ranks, DEQUANT the p contributions.
 */
#include <stdlib.h>

#include "hier.h"
#include "log.h"
#include "quant_algos.h"

typedef struct {
    tacl__sched_t *s;
    const tacl__coll_args_t *args;
    tacl__algo_io_t io;
    tacl__hier_t h;
    int p, r, g, k, m, l;
    size_t es, cs;
    uint32_t C;
    uint64_t qfull;       /* quantized bytes of a full chunk */
    int32_t qin, mid, part, fin, tmp;
    int32_t *ids;         /* working list of step ids */
    int32_t *quant;       /* per slice of a chunk: its QUANT step */
} qgz_t;

/* Message numbers: two per chunk, the intra-node one and the rail one. */
static uint64_t qgz_tag(const qgz_t *x, uint32_t c, int hop)
{
    return tacl__algo_tag(x->args, (uint64_t)c * 2 + (uint64_t)hop);
}

/* Slot i of chunk c of a per-chunk array of nslots slots of qs bytes. */
static tacl__bref_t qgz_at(const qgz_t *x, int32_t buf, int nslots,
                           uint32_t c, uint64_t qs, int i)
{
    return tacl__bref(buf, (uint64_t)nslots * c * x->qfull +
                               (uint64_t)i * qs);
}

/* Bytes of a per-chunk array of nslots slots over every chunk. */
static uint64_t qgz_array_bytes(const qgz_t *x, int nslots)
{
    size_t last = tacl__chunk_len(x->args->count, x->cs, x->C - 1);

    return (uint64_t)nslots *
           ((uint64_t)(x->C - 1) * x->qfull +
            tacl__quant_bytes(last, x->args->qblock, x->args->qbits));
}

/* Input elements of chunk c of the slice for rank d. */
static tacl__bref_t qgz_in(const qgz_t *x, int d, uint32_t c)
{
    return tacl__bref_add(x->io.in, ((uint64_t)d * x->args->count +
                                     (uint64_t)c * x->cs) * x->es);
}

/* Quantizes chunk c of the slice for rank d into dst. */
static int32_t qgz_quant(qgz_t *x, int d, uint32_t c, size_t len,
                         tacl__bref_t dst)
{
    return tacl__sched_quant(x->s, dst, qgz_in(x, d, c), len,
                             x->args->dtype, x->args->qblock,
                             x->args->qbits, TACL__NO_DEPS);
}

/*
 * The last step of a chunk: dequantize nsrc quantized values at src
 * (stride apart) and sum them into the output; AVG through scratch.
 */
static void qgz_finish(qgz_t *x, uint32_t c, size_t len, tacl__bref_t src,
                       int nsrc, uint64_t stride, int nids)
{
    const tacl__coll_args_t *a = x->args;
    tacl__bref_t out = tacl__bref_add(x->io.out, (uint64_t)c * x->cs * x->es);
    tacl__bref_t tmp = tacl__bref(x->tmp, (uint64_t)c * x->cs * x->es);
    int avg = a->op == TACL_AVG;
    int32_t id;

    nids = tacl__sched_fold(x->s, x->ids, nids);
    id = tacl__sched_dequant(x->s, avg ? tmp : out, src, nsrc, stride, len,
                             a->dtype, a->qblock, a->qbits, 0, x->ids, nids);
    if (avg)
        tacl__sched_div(x->s, out, tmp, len, a->dtype, (uint32_t)x->p,
                        TACL__DEPS(id));
}

/* One chunk of the 1-hop form: a quantized all-to-all over all ranks. */
static void qgz_one_hop_chunk(qgz_t *x, uint32_t c)
{
    size_t len = tacl__chunk_len(x->args->count, x->cs, c);
    uint64_t qs = tacl__quant_bytes(len, x->args->qblock, x->args->qbits);
    int p = x->p, r = x->r, d, n = 0;

    for (d = 0; d < p; d++) {
        int slot = d < r ? d : d - 1;
        tacl__bref_t dst = d == r ? qgz_at(x, x->fin, p, c, qs, r)
                                  : qgz_at(x, x->qin, p - 1, c, qs, slot);
        int32_t q = qgz_quant(x, d, c, len, dst);

        if (d != r)
            tacl__sched_send(x->s, d, dst, qs, qgz_tag(x, c, 0),
                             TACL__DEPS(q));
        else
            x->ids[n++] = q;
    }
    for (d = 0; d < p; d++)
        if (d != r)
            x->ids[n++] = tacl__sched_recv(x->s, d,
                                           qgz_at(x, x->fin, p, c, qs, d),
                                           qs, qgz_tag(x, c, 0),
                                           TACL__NO_DEPS);
    qgz_finish(x, c, len, qgz_at(x, x->fin, p, c, qs, 0), p, qs, n);
}

/* One chunk of the 2-hop form (see the top of the file). */
static void qgz_two_hop_chunk(qgz_t *x, uint32_t c)
{
    size_t len = tacl__chunk_len(x->args->count, x->cs, c);
    uint64_t qs = tacl__quant_bytes(len, x->args->qblock, x->args->qbits);
    int g = x->g, k = x->k, m = x->m, l = x->l, dm, dl, i, n;
    tacl__sched_t *s = x->s;
    int32_t *quant = x->quant, *dqrq = x->quant + (size_t)g * k, id;

    /* 1: quantize each slice into its place; 2: intra-node all-to-all. */
    for (dl = 0; dl < k; dl++) {
        for (dm = 0; dm < g; dm++) {
            int slot = tacl__qgz_slot(dm, dl, l, g);
            tacl__bref_t dst = slot < 0
                                   ? qgz_at(x, x->mid, g * k, c, qs,
                                            l * g + dm)
                                   : qgz_at(x, x->qin, g * (k - 1), c, qs,
                                            slot);

            quant[dl * g + dm] = qgz_quant(
                x, tacl__hier_rank(&x->h, dm, dl), c, len, dst);
        }
        if (dl == l)
            continue;
        for (n = 0; n < g; n++)
            x->ids[n] = quant[dl * g + n];
        n = tacl__sched_fold(s, x->ids, g);
        tacl__sched_send(s, tacl__hier_rank(&x->h, m, dl),
                         qgz_at(x, x->qin, g * (k - 1), c, qs,
                                tacl__qgz_slot(0, dl, l, g)),
                         (uint64_t)g * qs, qgz_tag(x, c, 0), x->ids, n);
    }
    n = 0;
    for (i = 0; i < k; i++)
        if (i != l)
            x->ids[n++] = tacl__sched_recv(
                s, tacl__hier_rank(&x->h, m, i),
                qgz_at(x, x->mid, g * k, c, qs, i * g), (uint64_t)g * qs,
                qgz_tag(x, c, 0), TACL__NO_DEPS);

    /* 3: the k contributions for (dm, l), reduced and requantized. */
    if (n >= TACL__MAX_DEPS) {
        n = tacl__sched_fold(s, x->ids, n);
        x->ids[0] = tacl__sched_nop(s, x->ids, n);
        n = 1;
    }
    for (dm = 0; dm < g; dm++) {
        x->ids[n] = quant[l * g + dm];
        dqrq[dm] = tacl__sched_dqrq(
            s, dm == m ? qgz_at(x, x->fin, g, c, qs, m)
                       : qgz_at(x, x->part, g, c, qs, dm),
            qgz_at(x, x->mid, g * k, c, qs, dm), k, (uint64_t)g * qs, len,
            x->args->qblock, x->args->qbits, x->ids, n + 1);
    }

    /* 4: inter-node all-to-all along the rail; 5: the final sum. */
    n = 0;
    for (dm = 0; dm < g; dm++) {
        if (dm == m) {
            x->ids[n++] = dqrq[m];
            continue;
        }
        tacl__sched_send(s, tacl__hier_rank(&x->h, dm, l),
                         qgz_at(x, x->part, g, c, qs, dm), qs,
                         qgz_tag(x, c, 1), TACL__DEPS(dqrq[dm]));
        id = tacl__sched_recv(s, tacl__hier_rank(&x->h, dm, l),
                              qgz_at(x, x->fin, g, c, qs, dm), qs,
                              qgz_tag(x, c, 1), TACL__NO_DEPS);
        x->ids[n++] = id;
    }
    qgz_finish(x, c, len, qgz_at(x, x->fin, g, c, qs, 0), g, qs, n);
}

int tacl__qgz_two_hop(const tacl__topo_view_t *view)
{
    return tacl__hier_layout_ok(view);
}

void tacl__qgz_grid(const tacl__coll_args_t *args, size_t *cs_p,
                    uint32_t *nchunks_p)
{
    size_t es = tacl_dtype_size(args->dtype), n = args->count, cs;
    uint32_t c = tacl__algo_nchunks(args, n, es, 2);
    size_t b = args->qblock ? args->qblock : 1;

    cs = TACL_MAX(TACL_DIV_UP(n, (size_t)c), (size_t)1);
    if (n > b)
        cs = TACL_DIV_UP(cs, b) * b;
    *cs_p = cs;
    *nchunks_p = (uint32_t)TACL_MAX(TACL_DIV_UP(n, cs), (size_t)1);
}

/* Registers the scratch arrays of the form the layout takes. */
static void qgz_scratch(qgz_t *x, int two_hop)
{
    tacl_memtype_t mt = x->args->memtype;
    int p = x->p, g = x->g, k = x->k;

    if (two_hop) {
        x->qin = tacl__sched_scratch(x->s, qgz_array_bytes(x, g * (k - 1)),
                                     mt);
        x->mid = tacl__sched_scratch(x->s, qgz_array_bytes(x, g * k), mt);
        x->part = tacl__sched_scratch(x->s, qgz_array_bytes(x, g), mt);
        x->fin = tacl__sched_scratch(x->s, qgz_array_bytes(x, g), mt);
    } else {
        x->qin = tacl__sched_scratch(x->s, qgz_array_bytes(x, p - 1), mt);
        x->fin = tacl__sched_scratch(x->s, qgz_array_bytes(x, p), mt);
    }
    if (x->args->op == TACL_AVG)
        x->tmp = tacl__sched_scratch(x->s, (uint64_t)x->args->count * x->es,
                                     mt);
}

tacl_status_t tacl__qgz_build(tacl__sched_t *s, const tacl__coll_args_t *args,
                              const tacl__topo_view_t *view)
{
    qgz_t x = {0};
    int two_hop = tacl__qgz_two_hop(view);
    tacl_status_t status;
    uint32_t c;

    x.s = s;
    x.args = args;
    x.p = s->nranks;
    x.r = s->rank;
    x.es = tacl_dtype_size(args->dtype);
    if (args->count == 0)
        return TACL_OK;
    status = tacl__algo_io(s, args, (uint64_t)x.p * args->count * x.es,
                           (uint64_t)args->count * x.es, &x.io);
    if (status != TACL_OK)
        return status;
    if (x.p == 1) {
        /* Nothing to exchange: no reason to lose precision. */
        if (!x.io.in_place)
            tacl__algo_finish(s, args, x.io.out, x.io.in, args->count,
                              TACL__NO_DEPS);
        return tacl__sched_status(s);
    }
    if (two_hop) {
        status = tacl__hier_init(&x.h, view);
        if (status != TACL_OK)
            return status;
        x.g = x.h.n_nodes;
        x.k = x.h.k;
        x.m = view->node_of[x.r];
        x.l = x.h.local[x.r];
    } else {
        x.g = x.p;
        x.k = 1;
    }
    tacl__qgz_grid(args, &x.cs, &x.C);
    x.qfull = tacl__quant_bytes(x.cs, args->qblock, args->qbits);
    x.ids = malloc(((size_t)x.p * 2 + 2) * sizeof(*x.ids));
    x.quant = malloc(((size_t)x.p + (size_t)x.g + 1) * sizeof(*x.quant));
    if (x.ids == NULL || x.quant == NULL) {
        status = tacl__error(TACL_ERR_NO_MEMORY, COLL,
                             "qgz: cannot allocate a schedule of %d ranks",
                             x.p);
        goto err_free;
    }
    qgz_scratch(&x, two_hop);
    for (c = 0; c < x.C && tacl__sched_status(s) == TACL_OK; c++) {
        if (two_hop)
            qgz_two_hop_chunk(&x, c);
        else
            qgz_one_hop_chunk(&x, c);
    }
    status = tacl__sched_status(s);

err_free:
    free(x.ids);
    free(x.quant);
    if (two_hop)
        tacl__hier_fini(&x.h);
    return status;
}
