/*
 * Schedules: growable arrays of steps, dependency indices and buffers.
 *
 * Builders append steps through the constructors below.  Every constructor
 * checks what a builder can get wrong (a dependency that is not an earlier
 * step, a buffer reference past the end of its buffer) and turns it into
 * the schedule's sticky error, so a faulty builder is caught when the
 * schedule is built rather than when it corrupts memory while it runs.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "log.h"
#include "quant_layout.h"
#include "sched.h"

void tacl__sched_init(tacl__sched_t *s, int rank, int nranks)
{
    memset(s, 0, sizeof(*s));
    s->rank = rank;
    s->nranks = nranks;
    s->status = TACL_OK;
}

void tacl__sched_fini(tacl__sched_t *s)
{
    free(s->steps);
    free(s->deps);
    free(s->bufs);
    tacl__sched_init(s, s->rank, s->nranks);
}

void tacl__sched_reset(tacl__sched_t *s)
{
    s->nsteps = 0;
    s->ndeps = 0;
    s->nbufs = 0;
    s->status = TACL_OK;
}

/* Records the first builder error; later calls see it and do nothing. */
static void sched_fail(tacl__sched_t *s, tacl_status_t status)
{
    if (s->status == TACL_OK)
        s->status = status;
}

/* Makes room for need elements of elem bytes in *arr (capacity *cap). */
static int sched_grow(tacl__sched_t *s, void **arr, uint32_t *cap,
                      uint64_t need, size_t elem)
{
    uint64_t ncap;
    void *p;

    if (need <= *cap)
        return 0;
    if (need > UINT32_MAX / 2) {
        sched_fail(s, tacl__error(TACL_ERR_NO_MEMORY, SCHED,
                                  "schedule too large (%" PRIu64
                                  " entries); use fewer ranks or larger "
                                  "chunks", need));
        return -1;
    }
    ncap = *cap ? *cap : 16;
    while (ncap < need)
        ncap *= 2;
    p = realloc(*arr, ncap * elem);
    if (p == NULL) {
        sched_fail(s, tacl__error(TACL_ERR_NO_MEMORY, SCHED,
                                  "cannot grow a schedule to %" PRIu64
                                  " entries", ncap));
        return -1;
    }
    *arr = p;
    *cap = (uint32_t)ncap;
    return 0;
}

static int32_t sched_add_buf(tacl__sched_t *s, const void *ptr, uint64_t size,
                             tacl__buf_role_t role, tacl_memtype_t memtype)
{
    tacl__sched_buf_t *b;

    if (s->status != TACL_OK)
        return -1;
    if (memtype == TACL_MEM_AUTO) {
        sched_fail(s, tacl__error(TACL_ERR_INTERNAL, SCHED,
                                  "schedule buffer registered with memory "
                                  "type auto; resolve it first"));
        return -1;
    }
    if (sched_grow(s, (void **)&s->bufs, &s->bufs_cap, s->nbufs + 1ull,
                   sizeof(*s->bufs)) != 0)
        return -1;
    b = &s->bufs[s->nbufs];
    b->ptr = (void *)(uintptr_t)ptr;
    b->size = size;
    b->role = (uint8_t)role;
    b->memtype = (uint8_t)memtype;
    b->shared = 0;
    return (int32_t)s->nbufs++;
}

int32_t tacl__sched_buf(tacl__sched_t *s, const void *ptr, uint64_t size,
                        tacl__buf_role_t role, tacl_memtype_t memtype)
{
    if (role == TACL__BUF_SCRATCH) {
        sched_fail(s, tacl__error(TACL_ERR_INTERNAL, SCHED,
                                  "scratch buffers come from "
                                  "tacl__sched_scratch"));
        return -1;
    }
    return sched_add_buf(s, ptr, size, role, memtype);
}

int32_t tacl__sched_scratch(tacl__sched_t *s, uint64_t size,
                            tacl_memtype_t memtype)
{
    return sched_add_buf(s, NULL, size, TACL__BUF_SCRATCH, memtype);
}

int32_t tacl__sched_scratch_shared(tacl__sched_t *s, uint64_t size)
{
    int32_t b = sched_add_buf(s, NULL, size, TACL__BUF_SCRATCH,
                              TACL_MEM_HOST);

    if (b >= 0)
        s->bufs[b].shared = 1;
    return b;
}

/* Whether [ref.off, ref.off + bytes) lies inside a registered buffer. */
static int sched_ref_ok(const tacl__sched_t *s, tacl__bref_t ref,
                        uint64_t bytes)
{
    if (bytes == 0)
        return 1;
    if (ref.buf >= s->nbufs)
        return 0;
    return ref.off <= s->bufs[ref.buf].size &&
           bytes <= s->bufs[ref.buf].size - ref.off;
}

/*
 * Appends a step after checking its references and dependencies; the
 * common tail of every constructor.
 */
static int32_t sched_add_step(tacl__sched_t *s, const tacl__step_t *step,
                              const int32_t *deps, int ndeps)
{
    tacl__step_t *st;
    uint32_t start, n = 0;
    int i;

    if (s->status != TACL_OK)
        return -1;
    if (ndeps < 0 || ndeps > TACL__MAX_DEPS) {
        sched_fail(s, tacl__error(TACL_ERR_INTERNAL, SCHED,
                                  "step given %d dependencies (at most %d)",
                                  ndeps, TACL__MAX_DEPS));
        return -1;
    }
    if (sched_grow(s, (void **)&s->steps, &s->steps_cap, s->nsteps + 1ull,
                   sizeof(*s->steps)) != 0 ||
        sched_grow(s, (void **)&s->deps, &s->deps_cap,
                   (uint64_t)s->ndeps + (uint64_t)ndeps,
                   sizeof(*s->deps)) != 0)
        return -1;

    start = s->ndeps;
    for (i = 0; i < ndeps; i++) {
        uint32_t j;
        int dup = 0;

        if (deps[i] < 0)
            continue;
        if ((uint32_t)deps[i] >= s->nsteps) {
            sched_fail(s, tacl__error(TACL_ERR_INTERNAL, SCHED,
                                      "step %u depends on step %d, which "
                                      "is not an earlier step", s->nsteps,
                                      deps[i]));
            return -1;
        }
        for (j = 0; j < n; j++)
            dup |= s->deps[start + j] == (uint32_t)deps[i];
        if (!dup)
            s->deps[start + n++] = (uint32_t)deps[i];
    }

    st = &s->steps[s->nsteps];
    *st = *step;
    st->dep_start = start;
    st->ndeps = n;
    s->ndeps += n;
    return (int32_t)s->nsteps++;
}

/*
 * Fails the schedule when a reference falls outside its buffer; what and
 * role name it in the message ("copy" "source").
 */
static int sched_check_ref(tacl__sched_t *s, const char *what,
                           const char *role, tacl__bref_t ref,
                           uint64_t bytes)
{
    if (s->status != TACL_OK)
        return -1;
    if (sched_ref_ok(s, ref, bytes))
        return 0;
    sched_fail(s, tacl__error(TACL_ERR_INTERNAL, SCHED,
                              "step %u: %s %s [buf %u + %" PRIu64
                              ", %" PRIu64 " bytes] is outside its buffer",
                              s->nsteps, what, role, ref.buf, ref.off,
                              bytes));
    return -1;
}

/* The destination and the source of a step of what, bytes each. */
static int sched_check_dst_src(tacl__sched_t *s, const char *what,
                               tacl__bref_t dst, tacl__bref_t src,
                               uint64_t bytes)
{
    if (sched_check_ref(s, what, "destination", dst, bytes) != 0)
        return -1;
    return sched_check_ref(s, what, "source", src, bytes);
}

static int sched_check_peer(tacl__sched_t *s, int peer)
{
    if (peer >= 0 && peer < s->nranks)
        return 0;
    sched_fail(s, tacl__error(TACL_ERR_INTERNAL, SCHED,
                              "step %u: peer %d outside 0..%d", s->nsteps,
                              peer, s->nranks - 1));
    return -1;
}

/* A SEND (from buf) or RECV (into buf) step of bytes with peer. */
static int32_t sched_message(tacl__sched_t *s, uint8_t kind, int peer,
                             tacl__bref_t buf, uint64_t bytes, uint64_t tag,
                             uint32_t arg, const int32_t *deps, int ndeps)
{
    int send = kind == TACL__STEP_SEND;
    tacl__step_t st = {0};

    if (sched_check_ref(s, send ? "send" : "receive",
                        send ? "source" : "destination", buf, bytes) != 0 ||
        (peer != TACL__PEER_ANY && sched_check_peer(s, peer) != 0))
        return -1;
    st.kind = kind;
    st.peer = peer;
    st.tag = tag;
    if (send)
        st.src = buf;
    else
        st.dst = buf;
    st.bytes = bytes;
    st.arg = arg;
    return sched_add_step(s, &st, deps, ndeps);
}

int32_t tacl__sched_send(tacl__sched_t *s, int peer, tacl__bref_t src,
                         uint64_t bytes, uint64_t tag, const int32_t *deps,
                         int ndeps)
{
    if (peer == TACL__PEER_ANY)
        return sched_check_peer(s, peer);
    return sched_message(s, TACL__STEP_SEND, peer, src, bytes, tag, 0, deps,
                         ndeps);
}

int32_t tacl__sched_recv(tacl__sched_t *s, int peer, tacl__bref_t dst,
                         uint64_t bytes, uint64_t tag, const int32_t *deps,
                         int ndeps)
{
    return tacl__sched_recv_stream(s, peer, dst, bytes, tag, 0, deps, ndeps);
}

int32_t tacl__sched_recv_stream(tacl__sched_t *s, int peer, tacl__bref_t dst,
                                uint64_t bytes, uint64_t tag, int stream,
                                const int32_t *deps, int ndeps)
{
    if (peer == TACL__PEER_ANY)
        return sched_check_peer(s, peer);
    return sched_message(s, TACL__STEP_RECV, peer, dst, bytes, tag,
                         stream ? TACL__COPY_STREAM : 0, deps, ndeps);
}

int32_t tacl__sched_recv_any(tacl__sched_t *s, tacl__bref_t dst,
                             uint64_t bytes, uint64_t tag,
                             const tacl__bref_t *source, const int32_t *deps,
                             int ndeps)
{
    int32_t id;

    if (source != NULL &&
        sched_check_ref(s, "receive", "source rank", *source,
                        sizeof(int)) != 0)
        return -1;
    id = sched_message(s, TACL__STEP_RECV, TACL__PEER_ANY, dst, bytes, tag,
                       source != NULL ? TACL__RECV_SOURCE : 0, deps, ndeps);
    if (id >= 0 && source != NULL)
        s->steps[id].src = *source;
    return id;
}

int32_t tacl__sched_copy(tacl__sched_t *s, tacl__bref_t dst, tacl__bref_t src,
                         uint64_t bytes, const int32_t *deps, int ndeps)
{
    return tacl__sched_copy_stream(s, dst, src, bytes, 0, deps, ndeps);
}

int32_t tacl__sched_copy_stream(tacl__sched_t *s, tacl__bref_t dst,
                                tacl__bref_t src, uint64_t bytes, int stream,
                                const int32_t *deps, int ndeps)
{
    tacl__step_t st = {0};

    if (sched_check_dst_src(s, "copy", dst, src, bytes) != 0)
        return -1;
    st.kind = TACL__STEP_COPY;
    st.dst = dst;
    st.src = src;
    st.bytes = bytes;
    st.arg = stream ? TACL__COPY_STREAM : 0;
    return sched_add_step(s, &st, deps, ndeps);
}

/* The byte length of count elements of dtype, failing on a bad dtype. */
static int sched_elems(tacl__sched_t *s, size_t count, tacl_dtype_t dtype,
                       uint64_t *bytes_p)
{
    size_t es = tacl_dtype_size(dtype);

    if (s->status != TACL_OK)
        return -1;
    if (es == 0) {
        sched_fail(s, tacl__error(TACL_ERR_INTERNAL, SCHED,
                                  "step %u: invalid dtype %d", s->nsteps,
                                  (int)dtype));
        return -1;
    }
    *bytes_p = (uint64_t)count * es;
    return 0;
}

/* A run of nsrc inputs of each bytes, stride apart, must not overlap. */
static int sched_check_sources(tacl__sched_t *s, const char *what, int nsrc,
                               uint64_t stride, uint64_t each)
{
    if (nsrc >= 1 && nsrc <= UINT16_MAX && (nsrc == 1 || stride >= each))
        return 0;
    sched_fail(s, tacl__error(TACL_ERR_INTERNAL, SCHED,
                              "step %u: %d %s %llu bytes apart", s->nsteps,
                              nsrc, what, (unsigned long long)stride));
    return -1;
}

int32_t tacl__sched_reduce_n(tacl__sched_t *s, tacl__bref_t dst,
                             tacl__bref_t src, tacl__bref_t src2, int nsrc,
                             uint64_t stride, size_t count,
                             tacl_dtype_t dtype, tacl_op_t op,
                             const int32_t *deps, int ndeps)
{
    tacl__step_t st = {0};
    uint64_t bytes;

    if (sched_elems(s, count, dtype, &bytes) != 0 ||
        sched_check_dst_src(s, "reduce", dst, src, bytes) != 0)
        return -1;
    if (sched_check_sources(s, "second sources", nsrc, stride, bytes) != 0)
        return -1;
    if (sched_check_ref(s, "reduce", "second sources", src2,
                        (uint64_t)(nsrc - 1) * stride + bytes) != 0)
        return -1;
    /* The output is written block by block before the later sources of
     * the same block are read: it may only be the first. */
    if (nsrc > 1 && dst.buf == src2.buf && dst.off < src2.off +
        (uint64_t)(nsrc - 1) * stride + bytes && src2.off + stride <
        dst.off + bytes) {
        sched_fail(s, tacl__error(TACL_ERR_INTERNAL, SCHED,
                                  "step %u: reduce output overlaps a second "
                                  "source other than the first", s->nsteps));
        return -1;
    }
    if (op == TACL_AVG || op < 0 || op >= TACL_NUM_OPS) {
        sched_fail(s, tacl__error(TACL_ERR_INTERNAL, SCHED,
                                  "step %u: reduce with op %d; builders "
                                  "turn avg into sum and div", s->nsteps,
                                  (int)op));
        return -1;
    }
    st.kind = TACL__STEP_REDUCE;
    st.dtype = (uint8_t)dtype;
    st.op = (uint8_t)op;
    st.dst = dst;
    st.src = src;
    st.src2 = src2;
    st.bytes = bytes;
    st.nsrc = (uint16_t)nsrc;
    st.stride = nsrc > 1 ? stride : 0;
    return sched_add_step(s, &st, deps, ndeps);
}

int32_t tacl__sched_reduce(tacl__sched_t *s, tacl__bref_t dst,
                           tacl__bref_t src, tacl__bref_t src2, size_t count,
                           tacl_dtype_t dtype, tacl_op_t op,
                           const int32_t *deps, int ndeps)
{
    return tacl__sched_reduce_n(s, dst, src, src2, 1, 0, count, dtype, op,
                                deps, ndeps);
}

int32_t tacl__sched_div(tacl__sched_t *s, tacl__bref_t dst, tacl__bref_t src,
                        size_t count, tacl_dtype_t dtype, uint32_t divisor,
                        const int32_t *deps, int ndeps)
{
    tacl__step_t st = {0};
    uint64_t bytes;

    if (sched_elems(s, count, dtype, &bytes) != 0 ||
        sched_check_dst_src(s, "div", dst, src, bytes) != 0)
        return -1;
    if (divisor == 0) {
        sched_fail(s, tacl__error(TACL_ERR_INTERNAL, SCHED,
                                  "step %u: division by zero", s->nsteps));
        return -1;
    }
    st.kind = TACL__STEP_DIV;
    st.dtype = (uint8_t)dtype;
    st.dst = dst;
    st.src = src;
    st.bytes = bytes;
    st.arg = divisor;
    return sched_add_step(s, &st, deps, ndeps);
}

/* The quantized size of count elements, failing the schedule if the
 * quantization parameters or the full-precision type are not usable. */
static int sched_qbytes(tacl__sched_t *s, size_t count, tacl_dtype_t dtype,
                        uint32_t qblock, int qbits, uint64_t *qbytes_p)
{
    if (s->status != TACL_OK)
        return -1;
    if ((qbits != 8 && qbits != 4) || qblock == 0 ||
        (dtype != TACL_FLOAT32 && dtype != TACL_FLOAT16 &&
         dtype != TACL_BFLOAT16)) {
        sched_fail(s, tacl__error(TACL_ERR_INTERNAL, SCHED,
                                  "step %u: cannot quantize %s to %d bits "
                                  "in blocks of %u", s->nsteps,
                                  tacl_dtype_name(dtype), qbits, qblock));
        return -1;
    }
    *qbytes_p = tacl__quant_bytes(count, qblock, qbits);
    return 0;
}

static int32_t sched_quant_step(tacl__sched_t *s, uint8_t kind,
                                tacl__bref_t dst, tacl__bref_t src, int nsrc,
                                uint64_t stride, size_t count,
                                tacl_dtype_t dtype, uint32_t qblock,
                                int qbits, uint32_t arg, const int32_t *deps,
                                int ndeps)
{
    tacl__step_t st = {0};
    uint64_t bytes, qbytes, in_bytes, out_bytes;

    if (sched_elems(s, count, dtype, &bytes) != 0 ||
        sched_qbytes(s, count, dtype, qblock, qbits, &qbytes) != 0)
        return -1;
    if (sched_check_sources(s, "quantized inputs", nsrc, stride, qbytes) !=
        0)
        return -1;
    in_bytes = kind == TACL__STEP_QUANT ? bytes
                                        : (uint64_t)(nsrc - 1) * stride + qbytes;
    out_bytes = kind == TACL__STEP_DEQUANT ? bytes : qbytes;
    if (sched_check_ref(s, "quantization", "input", src, in_bytes) != 0 ||
        sched_check_ref(s, "quantization", "output", dst, out_bytes) != 0)
        return -1;
    st.kind = kind;
    st.dtype = (uint8_t)dtype;
    st.dst = dst;
    st.src = src;
    st.bytes = bytes;
    st.count = count;
    st.stride = stride;
    st.qblock = qblock;
    st.qbits = (uint8_t)qbits;
    st.nsrc = (uint16_t)nsrc;
    st.arg = arg;
    return sched_add_step(s, &st, deps, ndeps);
}

int32_t tacl__sched_quant(tacl__sched_t *s, tacl__bref_t dst,
                          tacl__bref_t src, size_t count, tacl_dtype_t dtype,
                          uint32_t qblock, int qbits, const int32_t *deps,
                          int ndeps)
{
    return sched_quant_step(s, TACL__STEP_QUANT, dst, src, 1, 0, count, dtype,
                            qblock, qbits, 0, deps, ndeps);
}

int32_t tacl__sched_dequant(tacl__sched_t *s, tacl__bref_t dst,
                            tacl__bref_t src, int nsrc, uint64_t stride,
                            size_t count, tacl_dtype_t dtype,
                            uint32_t qblock, int qbits, int accumulate,
                            const int32_t *deps, int ndeps)
{
    return sched_quant_step(s, TACL__STEP_DEQUANT, dst, src, nsrc, stride,
                            count, dtype, qblock, qbits, accumulate ? 1 : 0,
                            deps, ndeps);
}

int32_t tacl__sched_dqrq(tacl__sched_t *s, tacl__bref_t dst, tacl__bref_t src,
                         int nsrc, uint64_t stride, size_t count,
                         uint32_t qblock, int qbits, const int32_t *deps,
                         int ndeps)
{
    /* The requantized sum's full-precision type does not matter; float32
     * is what the kernel sums in. */
    return sched_quant_step(s, TACL__STEP_DQRQ, dst, src, nsrc, stride,
                            count, TACL_FLOAT32, qblock, qbits, 0, deps,
                            ndeps);
}

int32_t tacl__sched_nop(tacl__sched_t *s, const int32_t *deps, int ndeps)
{
    tacl__step_t st = {0};

    st.kind = TACL__STEP_NOP;
    return sched_add_step(s, &st, deps, ndeps);
}

int tacl__sched_fold(tacl__sched_t *s, int32_t *ids, int n)
{
    while (n > TACL__MAX_DEPS) {
        int out = 0, i;

        for (i = 0; i < n; i += TACL__MAX_DEPS)
            ids[out++] = tacl__sched_nop(s, ids + i,
                                         TACL_MIN(n - i, TACL__MAX_DEPS));
        n = out;
    }
    return n;
}

/* A reference of a sub-schedule moved to where base[] puts its buffer. */
static tacl__bref_t sched_moved(const tacl__bref_t *base, tacl__bref_t r)
{
    return tacl__bref((int32_t)base[r.buf].buf, base[r.buf].off + r.off);
}

/* Adds to deps the readiness of each buffer step st of sub reads. */
static int sched_read_deps(const tacl__step_t *st,
                           const tacl__sched_map_t *map, int32_t *deps,
                           int n)
{
    switch (st->kind) {
    case TACL__STEP_SEND:
    case TACL__STEP_COPY:
    case TACL__STEP_DIV:
    case TACL__STEP_QUANT:
    case TACL__STEP_DQRQ:
        deps[n++] = map[st->src.buf].ready;
        break;
    case TACL__STEP_REDUCE:
        deps[n++] = map[st->src.buf].ready;
        deps[n++] = map[st->src2.buf].ready;
        break;
    case TACL__STEP_DEQUANT:
        deps[n++] = map[st->src.buf].ready;
        if (st->arg)
            deps[n++] = map[st->dst.buf].ready;
        break;
    default:
        break;
    }
    return n;
}

/* Appends step st of a sub-schedule, its references moved by base. */
static int32_t sched_append_step(tacl__sched_t *s, const tacl__step_t *st,
                                 const tacl__bref_t *base,
                                 const int32_t *deps, int n)
{
    tacl__bref_t dst = sched_moved(base, st->dst);
    tacl__bref_t src = sched_moved(base, st->src);
    tacl_dtype_t dt = (tacl_dtype_t)st->dtype;
    size_t es = tacl_dtype_size(dt), count = es ? st->bytes / es : 0;
    int stream = (st->arg & TACL__COPY_STREAM) != 0;

    switch (st->kind) {
    case TACL__STEP_SEND:
        return tacl__sched_send(s, st->peer, src, st->bytes, st->tag, deps,
                                n);
    case TACL__STEP_RECV:
        if (st->peer == TACL__PEER_ANY)
            return tacl__sched_recv_any(s, dst, st->bytes, st->tag,
                                        st->arg & TACL__RECV_SOURCE ? &src
                                                                    : NULL,
                                        deps, n);
        return tacl__sched_recv_stream(s, st->peer, dst, st->bytes, st->tag,
                                       stream, deps, n);
    case TACL__STEP_COPY:
        if (dst.buf == src.buf && dst.off == src.off)
            return tacl__sched_nop(s, deps, n);
        return tacl__sched_copy_stream(s, dst, src, st->bytes, stream, deps,
                                       n);
    case TACL__STEP_REDUCE:
        return tacl__sched_reduce_n(s, dst, src, sched_moved(base, st->src2),
                                    st->nsrc ? st->nsrc : 1, st->stride,
                                    count, dt, (tacl_op_t)st->op, deps, n);
    case TACL__STEP_DIV:
        return tacl__sched_div(s, dst, src, count, dt, st->arg, deps, n);
    case TACL__STEP_NOP:
        return tacl__sched_nop(s, deps, n);
    case TACL__STEP_QUANT:
        return tacl__sched_quant(s, dst, src, st->count, dt, st->qblock,
                                 st->qbits, deps, n);
    case TACL__STEP_DEQUANT:
        return tacl__sched_dequant(s, dst, src, st->nsrc, st->stride,
                                   st->count, dt, st->qblock, st->qbits,
                                   (int)st->arg, deps, n);
    case TACL__STEP_DQRQ:
        return tacl__sched_dqrq(s, dst, src, st->nsrc, st->stride, st->count,
                                st->qblock, st->qbits, deps, n);
    default:
        sched_fail(s, tacl__error(TACL_ERR_INTERNAL, SCHED,
                                  "appended step of kind %d", (int)st->kind));
        return -1;
    }
}

tacl_status_t tacl__sched_append(tacl__sched_t *s, const tacl__sched_t *sub,
                                 const tacl__sched_map_t *map,
                                 int32_t *ids_p)
{
    int32_t deps[TACL__MAX_DEPS + 3], *ids = ids_p;
    tacl__bref_t *base;
    uint32_t i, d;

    if (s->status != TACL_OK)
        return s->status;
    if (sub->status != TACL_OK || sub->rank != s->rank ||
        sub->nranks != s->nranks) {
        sched_fail(s, sub->status != TACL_OK
                          ? sub->status
                          : tacl__error(TACL_ERR_INTERNAL, SCHED,
                                        "appended a schedule of rank %d/%d "
                                        "to one of rank %d/%d", sub->rank,
                                        sub->nranks, s->rank, s->nranks));
        return s->status;
    }
    base = malloc((sub->nbufs + 1) * sizeof(*base));
    if (ids == NULL)
        ids = malloc((sub->nsteps + 1) * sizeof(*ids));
    if (base == NULL || ids == NULL) {
        sched_fail(s, tacl__error(TACL_ERR_NO_MEMORY, SCHED,
                                  "cannot append a schedule of %u steps",
                                  sub->nsteps));
        goto out;
    }
    for (i = 0; i < sub->nbufs; i++) {
        const tacl__sched_buf_t *b = &sub->bufs[i];
        int32_t id;

        base[i] = map[i].at;
        if (map[i].at.buf != TACL__SCHED_NEW)
            continue;
        id = sched_add_buf(s, b->ptr, b->size, (tacl__buf_role_t)b->role,
                           (tacl_memtype_t)b->memtype);
        if (id < 0)
            goto out;
        s->bufs[id].shared = b->shared;
        base[i] = tacl__bref(id, 0);
    }
    for (i = 0; i < sub->nsteps && s->status == TACL_OK; i++) {
        const tacl__step_t *st = &sub->steps[i];
        int n = 0;

        for (d = 0; d < st->ndeps; d++)
            deps[n++] = ids[tacl__sched_deps(sub, i)[d]];
        n = sched_read_deps(st, map, deps, n);
        n = tacl__sched_fold(s, deps, n);
        ids[i] = sched_append_step(s, st, base, deps, n);
    }
out:
    if (ids != ids_p)
        free(ids);
    free(base);
    return s->status;
}

static const char *const step_kind_names[TACL__STEP_NUM_KINDS] = {
    "send", "recv", "copy", "reduce", "div", "nop", "quant", "dequant",
    "dqrq",
};

/* A message as its send or its receive sees it. */
typedef struct {
    int a, b;          /* sender, receiver */
    int owner;         /* the rank whose step it is */
    uint32_t step;     /* its index there */
    uint64_t tag;
} sched_msg_t;

/* By sender, receiver, tag, then the owner's step order. */
static int sched_msg_cmp(const void *x, const void *y)
{
    const sched_msg_t *p = x, *q = y;

    if (p->a != q->a)
        return p->a < q->a ? -1 : 1;
    if (p->b != q->b)
        return p->b < q->b ? -1 : 1;
    if (p->tag != q->tag)
        return p->tag < q->tag ? -1 : 1;
    return p->step < q->step ? -1 : p->step > q->step;
}

/* Whether message p sorts before q, steps aside. */
static int sched_msg_before(const sched_msg_t *p, const sched_msg_t *q)
{
    return p->a < q->a ||
           (p->a == q->a && (p->b < q->b || (p->b == q->b && p->tag < q->tag)));
}

static tacl_status_t sched_unmatched(const tacl__sched_t *const *s,
                                     const sched_msg_t *m, const char *what)
{
    char line[256];

    tacl__sched_step_str(s[m->owner], m->step, line, sizeof(line));
    return tacl__error(TACL_ERR_INTERNAL, COLL,
                       "schedules do not match: rank %d has an unmatched "
                       "%s (%s)", m->owner, what, line);
}

tacl_status_t tacl__sched_match(const tacl__sched_t *const *s, int n,
                                const uint32_t *off, uint32_t *partner)
{
    uint64_t total = off[n];
    sched_msg_t *sends = malloc((total + 1) * sizeof(*sends));
    sched_msg_t *recvs = malloc((total + 1) * sizeof(*recvs));
    size_t ns = 0, nr = 0, i = 0, j = 0;
    tacl_status_t status = TACL_OK;

    if (sends == NULL || recvs == NULL) {
        free(sends);
        free(recvs);
        return tacl__error(TACL_ERR_NO_MEMORY, COLL,
                           "cannot match the messages of %llu steps",
                           (unsigned long long)total);
    }
    for (int r = 0; r < n; r++)
        for (uint32_t k = 0; k < s[r]->nsteps; k++) {
            const tacl__step_t *st = &s[r]->steps[k];
            sched_msg_t m = {r, st->peer, r, k, st->tag};

            if (st->kind == TACL__STEP_SEND) {
                sends[ns++] = m;
            } else if (st->kind == TACL__STEP_RECV) {
                m.a = st->peer;
                m.b = r;
                recvs[nr++] = m;
            }
        }
    qsort(sends, ns, sizeof(*sends), sched_msg_cmp);
    qsort(recvs, nr, sizeof(*recvs), sched_msg_cmp);
    while (status == TACL_OK && (i < ns || j < nr)) {
        const sched_msg_t *x = &sends[i], *v = &recvs[j];
        uint64_t sb, rb;

        if (j == nr || (i < ns && sched_msg_before(x, v))) {
            status = sched_unmatched(s, x, "send");
            break;
        }
        if (i == ns || sched_msg_before(v, x)) {
            status = sched_unmatched(s, v, "receive");
            break;
        }
        sb = s[x->owner]->steps[x->step].bytes;
        rb = s[v->owner]->steps[v->step].bytes;
        if (sb != rb) {
            status = tacl__error(TACL_ERR_INTERNAL, COLL,
                                 "schedules do not match: message %d -> %d "
                                 "tag 0x%" PRIx64 ": send of %" PRIu64
                                 " bytes, receive of %" PRIu64, x->a, x->b,
                                 x->tag, sb, rb);
            break;
        }
        partner[off[x->owner] + x->step] = off[v->owner] + v->step;
        partner[off[v->owner] + v->step] = off[x->owner] + x->step;
        i++;
        j++;
    }
    free(sends);
    free(recvs);
    return status;
}

void tacl__sched_step_str(const tacl__sched_t *s, uint32_t id, char *buf,
                          size_t len)
{
    const tacl__step_t *st;
    const uint32_t *deps;
    size_t used;
    int n;
    uint32_t i;

    if (len == 0)
        return;
    if (id >= s->nsteps) {
        snprintf(buf, len, "step %u: no such step", id);
        return;
    }
    st = &s->steps[id];
    switch (st->kind) {
    case TACL__STEP_SEND:
    case TACL__STEP_RECV:
        n = snprintf(buf, len,
                     "step %u: %s peer %d tag 0x%" PRIx64 " %s b%u+%" PRIu64
                     " %" PRIu64 " bytes", id, step_kind_names[st->kind],
                     st->peer, st->tag,
                     st->kind == TACL__STEP_SEND ? "src" : "dst",
                     st->kind == TACL__STEP_SEND ? st->src.buf : st->dst.buf,
                     st->kind == TACL__STEP_SEND ? st->src.off : st->dst.off,
                     st->bytes);
        break;
    case TACL__STEP_COPY:
    case TACL__STEP_DIV:
        n = snprintf(buf, len,
                     "step %u: %s dst b%u+%" PRIu64 " src b%u+%" PRIu64
                     " %" PRIu64 " bytes", id, step_kind_names[st->kind],
                     st->dst.buf, st->dst.off, st->src.buf, st->src.off,
                     st->bytes);
        break;
    case TACL__STEP_REDUCE:
        n = snprintf(buf, len,
                     "step %u: reduce %s %s dst b%u+%" PRIu64
                     " src b%u+%" PRIu64 " src2 b%u+%" PRIu64 " x%u/%" PRIu64
                     " %" PRIu64 " bytes", id, tacl_op_name((tacl_op_t)st->op),
                     tacl_dtype_name((tacl_dtype_t)st->dtype), st->dst.buf,
                     st->dst.off, st->src.buf, st->src.off, st->src2.buf,
                     st->src2.off, st->nsrc ? st->nsrc : 1u, st->stride,
                     st->bytes);
        break;
    default:
        n = snprintf(buf, len, "step %u: %s", id,
                     st->kind < TACL__STEP_NUM_KINDS
                         ? step_kind_names[st->kind] : "invalid");
        break;
    }
    used = n < 0 ? 0 : TACL_MIN((size_t)n, len - 1);
    deps = tacl__sched_deps(s, id);
    for (i = 0; i < st->ndeps && used + 1 < len; i++) {
        n = snprintf(buf + used, len - used, "%s%u", i ? "," : " deps ",
                     deps[i]);
        if (n < 0)
            break;
        used = TACL_MIN(used + (size_t)n, len - 1);
    }
}

void tacl__sched_trace_write(FILE *f, uint64_t op, const tacl__sched_t *s,
                             const double *t_us)
{
    for (uint32_t i = 0; i < s->nsteps; i++) {
        const tacl__step_t *st = &s->steps[i];
        int msg = st->kind == TACL__STEP_SEND || st->kind == TACL__STEP_RECV;
        const char *kind = st->kind < TACL__STEP_NUM_KINDS
                               ? step_kind_names[st->kind]
                               : "invalid";
        const double *t = t_us + (size_t)i * TACL__TRACE_MARKS;

        fprintf(f, "%" PRIu64 " %d %u %s %d %" PRIu64 " %.3f %.3f %.3f\n",
                op, s->rank, i, kind, msg ? st->peer : -1, st->bytes,
                t[TACL__TRACE_READY], t[TACL__TRACE_START],
                t[TACL__TRACE_DONE]);
    }
}

void tacl__sched_dump(const tacl__sched_t *s)
{
    char line[256];
    uint32_t i;

    if (!tacl__log_enabled(TACL_LOG_TRACE, TACL_SUBSYS_SCHED))
        return;
    TACL_TRACE(SCHED, "schedule of rank %d/%d: %u steps, %u buffers",
               s->rank, s->nranks, s->nsteps, s->nbufs);
    for (i = 0; i < s->nbufs; i++)
        TACL_TRACE(SCHED, "  buffer %u: %s %" PRIu64 " bytes", i,
                   s->bufs[i].role == TACL__BUF_INPUT    ? "input"
                   : s->bufs[i].role == TACL__BUF_OUTPUT ? "output"
                                                         : "scratch",
                   s->bufs[i].size);
    for (i = 0; i < s->nsteps; i++) {
        tacl__sched_step_str(s, i, line, sizeof(line));
        TACL_TRACE(SCHED, "  %s", line);
    }
}
