/*
 * qwZ: the quantized weight all-gather of ZeRO++ (Wang et al., "ZeRO++:
 * Extremely efficient collective communication for giant model
 * training", 2023, section 3.1).
 *
 * Each rank quantizes its block once (QUANT into its slot of a scratch
 * array of p quantized blocks), the p quantized blocks are all-gathered
 * as a uint8 payload, and every other rank's block is dequantized into
 * recvbuf.  The caller's own block is copied exactly (in place it is
 * already there), so only the others carry quantization error.
 *
 * The payload moves with whichever all-gather algorithm the spec or the
 * tuner picks for it (ring, Bruck, MiCS, ...): that algorithm builds a
 * sub-schedule of its own with no caller buffers (NULL pointers: an
 * operation is never in place without them, tacl__algo_in_place), which
 * tacl__sched_append adds to this schedule with its input mapped onto
 * this rank's quantized slot, read once the quantization is done, and its
 * output onto the scratch array; its scratch becomes ours, and its copy
 * of the input onto its own place in the output a NOP.  The payload is
 * read as soon as it lands, so the sub-schedule is built for a view that
 * never streams past the cache.  The dequantization of block j depends
 * only on the steps that wrote block j of the array, so blocks are
 * dequantized as they arrive.
 */
#include <stdlib.h>

#include "log.h"
#include "quant_algos.h"

typedef struct {
    tacl__sched_t *s;
    const tacl__sched_t *t;  /* the inner all-gather's schedule */
    int32_t qall;            /* the array of p quantized blocks */
    int32_t *ids;            /* per inner step: its copy in s */
} qwz_t;

/*
 * Where the inner all-gather's buffers go: its input is this rank's slot
 * of the array, read once the quantization has filled it; its output is
 * the array; its scratch becomes ours.
 */
static tacl_status_t qwz_map(const qwz_t *x, uint64_t qb, int p,
                             int32_t quant, tacl__sched_map_t *map)
{
    uint32_t b;

    for (b = 0; b < x->t->nbufs; b++) {
        const tacl__sched_buf_t *buf = &x->t->bufs[b];
        int in = buf->role == TACL__BUF_INPUT;
        uint64_t want = in ? qb : qb * (uint64_t)p;

        map[b].at = tacl__bref(x->qall, in ? (uint64_t)x->s->rank * qb : 0);
        map[b].ready = in ? quant : -1;
        if (buf->role == TACL__BUF_SCRATCH) {
            map[b].at.buf = TACL__SCHED_NEW;
            continue;
        }
        if (buf->size != want)
            return tacl__error(TACL_ERR_INTERNAL, COLL,
                               "qwz: the inner all-gather registered a "
                               "buffer of %llu bytes, expected %llu",
                               (unsigned long long)buf->size,
                               (unsigned long long)want);
    }
    return TACL_OK;
}

/* Whether our step id writes bytes of [lo, hi) of the array. */
static int qwz_writes(const tacl__sched_t *s, int32_t id, int32_t qall,
                      uint64_t lo, uint64_t hi)
{
    const tacl__step_t *st = &s->steps[id];
    uint64_t n;

    if (st->kind == TACL__STEP_RECV || st->kind == TACL__STEP_COPY ||
        st->kind == TACL__STEP_REDUCE || st->kind == TACL__STEP_DIV)
        n = st->bytes;
    else
        return 0;
    return st->dst.buf == (uint32_t)qall && n > 0 && st->dst.off < hi &&
           lo < st->dst.off + n;
}

/*
 * Dequantizes block j of the array into its place in the output, after
 * every appended step that wrote it.
 */
static void qwz_dequant(qwz_t *x, const tacl__coll_args_t *args,
                        tacl__bref_t out, int j, uint64_t qb, int32_t *deps)
{
    uint64_t lo = (uint64_t)j * qb, hi = lo + qb;
    size_t es = tacl_dtype_size(args->dtype);
    uint32_t i;
    int n = 0;

    for (i = 0; i < x->t->nsteps; i++) {
        if (x->ids[i] >= 0 && qwz_writes(x->s, x->ids[i], x->qall, lo, hi))
            deps[n++] = x->ids[i];
    }
    n = tacl__sched_fold(x->s, deps, n);
    tacl__sched_dequant(x->s,
                        tacl__bref_add(out, (uint64_t)j * args->count * es),
                        tacl__bref(x->qall, lo), 1, 0, args->count,
                        args->dtype, args->qblock, args->qbits, 0, deps, n);
}

void tacl__qwz_payload(const tacl__coll_args_t *args,
                       const tacl__topo_view_t *view,
                       tacl__coll_args_t *ia_p, tacl__topo_view_t *iv_p)
{
    tacl__coll_args_t ia = *args;
    tacl__topo_view_t iv = *view;

    ia.sendbuf = NULL;
    ia.recvbuf = NULL;
    ia.count = (size_t)tacl__quant_bytes(args->count, args->qblock,
                                         args->qbits);
    ia.dtype = TACL_UINT8;
    ia.op = TACL_SUM;
    ia.qbits = 0;
    ia.qblock = 0;
    ia.send_mapped = 0;  /* the payload lives in private scratch */
    iv.stream_bytes = 0; /* and is dequantized as soon as it lands */
    iv.fast_max = 0;     /* it is part of a schedule */
    *ia_p = ia;
    *iv_p = iv;
}

/* Builds the inner all-gather of p blocks of the payload into t. */
static tacl_status_t qwz_inner(tacl__sched_t *t, const tacl__coll_args_t *args,
                               const tacl__topo_view_t *view,
                               const tacl__algo_t *inner)
{
    tacl__coll_args_t ia;
    tacl__topo_view_t iv;
    tacl_status_t status;

    tacl__qwz_payload(args, view, &ia, &iv);
    status = inner != NULL ? inner->build(t, &ia, &iv)
                           : tacl__ring_build(t, &ia, &iv);
    return status == TACL_OK ? tacl__sched_status(t) : status;
}

tacl_status_t tacl__qwz_build_over(tacl__sched_t *s,
                                   const tacl__coll_args_t *args,
                                   const tacl__topo_view_t *view,
                                   const tacl__algo_t *inner)
{
    size_t es = tacl_dtype_size(args->dtype), n = args->count;
    int p = s->nranks, r = s->rank, j;
    tacl__sched_map_t *map = NULL;
    qwz_t x = {0};
    tacl__algo_io_t io;
    tacl__sched_t t;
    tacl_status_t status;
    int32_t *deps = NULL, quant;
    uint64_t qb;

    if (n == 0)
        return TACL_OK;
    status = tacl__algo_io(s, args, n * es, (uint64_t)p * n * es, &io);
    if (status != TACL_OK)
        return status;
    /* The own block, exactly. */
    tacl__algo_own_block(s, &io, r, n * es);
    if (p == 1)
        return tacl__sched_status(s);

    qb = tacl__quant_bytes(n, args->qblock, args->qbits);
    x.s = s;
    x.qall = tacl__sched_scratch(s, qb * (uint64_t)p, args->memtype);
    quant = tacl__sched_quant(s, tacl__bref(x.qall, (uint64_t)r * qb), io.in,
                              n, args->dtype, args->qblock, args->qbits,
                              TACL__NO_DEPS);
    status = tacl__sched_status(s);
    if (status != TACL_OK)
        return status;

    tacl__sched_init(&t, r, p);
    status = qwz_inner(&t, args, view, inner);
    if (status != TACL_OK)
        goto err_fini;
    x.t = &t;
    map = malloc((t.nbufs + 1) * sizeof(*map));
    x.ids = malloc((t.nsteps + 1) * sizeof(*x.ids));
    deps = malloc((t.nsteps + 1) * sizeof(*deps));
    if (map == NULL || x.ids == NULL || deps == NULL) {
        status = tacl__error(TACL_ERR_NO_MEMORY, COLL,
                             "qwz: cannot append a schedule of %u steps",
                             t.nsteps);
        goto err_free;
    }
    status = qwz_map(&x, qb, p, quant, map);
    if (status == TACL_OK)
        status = tacl__sched_append(s, &t, map, x.ids);
    for (j = 0; j < p && status == TACL_OK; j++) {
        if (j == r)
            continue;
        qwz_dequant(&x, args, io.out, j, qb, deps);
        status = tacl__sched_status(s);
    }

err_free:
    free(deps);
    free(x.ids);
    free(map);
err_fini:
    tacl__sched_fini(&t);
    return status;
}
