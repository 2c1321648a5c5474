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
 * tuner picks for it (ring, Bruck, MiCS, ...): that algorithm builds into
 * a temporary schedule with no caller buffers of its own (NULL pointers,
 * so it never takes its in-place path), and the steps are merged into
 * this schedule with its input mapped onto this rank's quantized slot
 * and its output onto the scratch array; its scratch becomes ours.  A
 * copy of the input onto its own place in the output becomes a NOP.  The
 * dequantization of block j depends only on the steps that wrote block
 * j of the array, so blocks are dequantized as they arrive.
 */
#include <stdlib.h>

#include "log.h"
#include "quant_algos.h"

typedef struct {
    tacl__sched_t *s;
    const tacl__sched_t *t;  /* the inner all-gather's schedule */
    int32_t qall;            /* the array of p quantized blocks */
    uint64_t own_off;        /* this rank's slot in it */
    int32_t quant;           /* the step that fills the slot */
    uint32_t *bufmap;        /* per inner buffer: our buffer */
    uint64_t *offmap;        /* per inner buffer: offset in ours */
    int32_t *ids;            /* per inner step: our step */
} qwz_merge_t;

static tacl__bref_t qwz_ref(const qwz_merge_t *x, tacl__bref_t r)
{
    return tacl__bref((int32_t)x->bufmap[r.buf], x->offmap[r.buf] + r.off);
}

/* Maps the inner schedule's buffers onto ours. */
static tacl_status_t qwz_map_bufs(qwz_merge_t *x, uint64_t qb, int p)
{
    uint32_t b;

    for (b = 0; b < x->t->nbufs; b++) {
        const tacl__sched_buf_t *buf = &x->t->bufs[b];
        uint64_t want = buf->role == TACL__BUF_INPUT ? qb : qb * (uint64_t)p;

        if (buf->role == TACL__BUF_SCRATCH) {
            int32_t id = tacl__sched_scratch(x->s, buf->size,
                                             (tacl_memtype_t)buf->memtype);

            x->bufmap[b] = (uint32_t)(id < 0 ? 0 : id);
            x->offmap[b] = 0;
            continue;
        }
        if (buf->size != want)
            return tacl__error(TACL_ERR_INTERNAL, COLL,
                               "qwz: the inner all-gather registered a "
                               "buffer of %llu bytes, expected %llu",
                               (unsigned long long)buf->size,
                               (unsigned long long)want);
        x->bufmap[b] = (uint32_t)x->qall;
        x->offmap[b] = buf->role == TACL__BUF_INPUT ? x->own_off : 0;
    }
    return tacl__sched_status(x->s);
}

/* Whether inner step st refers to the inner input buffer. */
static int qwz_reads_input(const tacl__sched_t *t, const tacl__step_t *st)
{
    switch (st->kind) {
    case TACL__STEP_SEND:
    case TACL__STEP_COPY:
    case TACL__STEP_DIV:
        return t->bufs[st->src.buf].role == TACL__BUF_INPUT;
    case TACL__STEP_REDUCE:
        return t->bufs[st->src.buf].role == TACL__BUF_INPUT ||
               t->bufs[st->src2.buf].role == TACL__BUF_INPUT;
    default:
        return 0;
    }
}

/* Appends inner step j with its references and dependencies remapped. */
static tacl_status_t qwz_merge_step(qwz_merge_t *x, uint32_t j)
{
    const tacl__step_t *st = &x->t->steps[j];
    const uint32_t *tdeps = tacl__sched_deps(x->t, j);
    int32_t deps[TACL__MAX_DEPS + 1];
    tacl__bref_t dst = qwz_ref(x, st->dst), src = qwz_ref(x, st->src);
    tacl__sched_t *s = x->s;
    int n = 0;
    uint32_t d;

    for (d = 0; d < st->ndeps; d++)
        deps[n++] = x->ids[tdeps[d]];
    /* Whatever reads the quantized block waits for its quantization. */
    if (qwz_reads_input(x->t, st))
        deps[n++] = x->quant;
    n = tacl__sched_fold(s, deps, n);
    switch (st->kind) {
    case TACL__STEP_SEND:
        x->ids[j] = tacl__sched_send(s, st->peer, src, st->bytes, st->tag,
                                     deps, n);
        break;
    case TACL__STEP_RECV:
        x->ids[j] = tacl__sched_recv(s, st->peer, dst, st->bytes, st->tag,
                                     deps, n);
        break;
    case TACL__STEP_COPY:
        if (dst.buf == src.buf && dst.off == src.off)
            x->ids[j] = tacl__sched_nop(s, deps, n);
        else
            x->ids[j] = tacl__sched_copy(s, dst, src, st->bytes, deps, n);
        break;
    case TACL__STEP_REDUCE:
        x->ids[j] = tacl__sched_reduce(
            s, dst, src, qwz_ref(x, st->src2),
            st->bytes / tacl_dtype_size((tacl_dtype_t)st->dtype),
            (tacl_dtype_t)st->dtype, (tacl_op_t)st->op, deps, n);
        break;
    case TACL__STEP_DIV:
        x->ids[j] = tacl__sched_div(
            s, dst, src, st->bytes / tacl_dtype_size((tacl_dtype_t)st->dtype),
            (tacl_dtype_t)st->dtype, st->arg, deps, n);
        break;
    case TACL__STEP_NOP:
        x->ids[j] = tacl__sched_nop(s, deps, n);
        break;
    default:
        return tacl__error(TACL_ERR_INTERNAL, COLL,
                           "qwz: the inner all-gather has a step of kind "
                           "%d", (int)st->kind);
    }
    return tacl__sched_status(s);
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
 * every merged step that wrote it.
 */
static void qwz_dequant(qwz_merge_t *x, const tacl__coll_args_t *args,
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

/* Builds the inner all-gather of p blocks of qb bytes into t. */
static tacl_status_t qwz_inner(tacl__sched_t *t, const tacl__coll_args_t *args,
                               const tacl__topo_view_t *view, const char *spec,
                               uint64_t qb, const tacl__algo_t **algo_p)
{
    tacl__coll_args_t ia = *args;
    const tacl__algo_t *algo;
    tacl_status_t status;

    ia.sendbuf = NULL;
    ia.recvbuf = NULL;
    ia.count = (size_t)qb;
    ia.dtype = TACL_UINT8;
    ia.op = TACL_SUM;
    ia.qbits = 0;
    ia.send_mapped = 0;  /* the payload lives in private scratch */
    ia.qblock = 0;
    algo = tacl__algo_select(&ia, view, spec);
    if (algo == NULL)
        return tacl__error(TACL_ERR_UNSUPPORTED, COLL,
                           "qwz: no all-gather algorithm can move the "
                           "quantized payload on %d ranks", view->nranks);
    status = algo->build(t, &ia, view);
    if (status == TACL_OK)
        status = tacl__sched_status(t);
    if (status != TACL_OK)
        return status;
    *algo_p = algo;
    return TACL_OK;
}

tacl_status_t tacl__qwz_build_over(tacl__sched_t *s,
                                   const tacl__coll_args_t *args,
                                   const tacl__topo_view_t *view,
                                   const char *spec,
                                   const tacl__algo_t **inner_p)
{
    size_t es = tacl_dtype_size(args->dtype), n = args->count;
    int p = s->nranks, r = s->rank, j;
    const tacl__algo_t *algo = NULL;
    qwz_merge_t x = {0};
    tacl__algo_io_t io;
    tacl__sched_t t;
    tacl_status_t status;
    int32_t *deps = NULL;
    uint64_t qb;
    uint32_t i;

    if (n == 0)
        return TACL_OK;
    status = tacl__algo_io(s, args, n * es, (uint64_t)p * n * es, &io);
    if (status != TACL_OK)
        return status;
    /* The own block, exactly. */
    if (!io.in_place)
        tacl__sched_copy(s, tacl__bref_add(io.out, (uint64_t)r * n * es),
                         io.in, n * es, TACL__NO_DEPS);
    if (p == 1)
        return tacl__sched_status(s);

    qb = tacl__quant_bytes(n, args->qblock, args->qbits);
    x.s = s;
    x.own_off = (uint64_t)r * qb;
    x.qall = tacl__sched_scratch(s, qb * (uint64_t)p, args->memtype);
    x.quant = tacl__sched_quant(s, tacl__bref(x.qall, x.own_off), io.in, n,
                                args->dtype, args->qblock, args->qbits,
                                TACL__NO_DEPS);
    status = tacl__sched_status(s);
    if (status != TACL_OK)
        return status;

    tacl__sched_init(&t, r, p);
    status = qwz_inner(&t, args, view, spec, qb, &algo);
    if (status != TACL_OK)
        goto err_fini;
    x.t = &t;
    x.bufmap = malloc((t.nbufs + 1) * sizeof(*x.bufmap));
    x.offmap = malloc((t.nbufs + 1) * sizeof(*x.offmap));
    x.ids = malloc((t.nsteps + 1) * sizeof(*x.ids));
    deps = malloc((t.nsteps + 1) * sizeof(*deps));
    if (x.bufmap == NULL || x.offmap == NULL || x.ids == NULL ||
        deps == NULL) {
        status = tacl__error(TACL_ERR_NO_MEMORY, COLL,
                             "qwz: cannot merge a schedule of %u steps",
                             t.nsteps);
        goto err_free;
    }
    status = qwz_map_bufs(&x, qb, p);
    for (i = 0; i < t.nsteps && status == TACL_OK; i++)
        status = qwz_merge_step(&x, i);
    for (j = 0; j < p && status == TACL_OK; j++) {
        if (j == r)
            continue;
        qwz_dequant(&x, args, io.out, j, qb, deps);
        status = tacl__sched_status(s);
    }
    if (status == TACL_OK && inner_p != NULL)
        *inner_p = algo;

err_free:
    free(deps);
    free(x.ids);
    free(x.offmap);
    free(x.bufmap);
err_fini:
    tacl__sched_fini(&t);
    return status;
}
