/*
 * The schedule runner of simrun.h.  Static checks (buffers, matching,
 * races) run once, on the first run; every run then resets scratch and
 * the byte states and executes the schedules in a seeded random order.
 * Quantization steps run through the CPU kernels of quant.h.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "log.h"
#include "quant.h"
#include "reduce.h"
#include "rng.h"
#include "topo.h"
#include "simrun.h"

typedef struct {
    int rank;
    char *ptr;
    size_t size, def_off, def_len;
    uint8_t *defined;
    uint8_t *writes;
} region_t;

typedef struct {
    tacl__sched_t s;
    char **mem;          /* per buffer: where its bytes are */
    uint8_t **defined;   /* per buffer: defined flags of its bytes */
    uint8_t **writes;    /* per buffer: write counts (NULL for scratch) */
    char **scratch;      /* per buffer: scratch allocations */
    uint8_t **scratch_def;
    int64_t *match;      /* per step: partner as rank << 32 | step */
    uint32_t *dep_of;    /* dependents, CSR: dep_start/dep_list */
    uint32_t *dep_start;
    uint32_t *pending;   /* per step: unfinished dependencies */
    uint8_t *ready;      /* per step: dependencies done */
    uint64_t *know;      /* per step: ranks it causally follows */
    uint64_t bytes, msgs, knows;
} rank_t;

struct simrun {
    int n;
    rank_t *ranks;
    region_t *regions;
    int nregions, cap;
    int prepared;
    char *err;
    size_t errlen;
};

static int fail(simrun_t *sr, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static int fail(simrun_t *sr, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(sr->err, sr->errlen, fmt, ap);
    va_end(ap);
    return -1;
}

simrun_t *simrun_new(int nranks)
{
    simrun_t *sr = calloc(1, sizeof(*sr));
    int r;

    sr->n = nranks;
    sr->ranks = calloc((size_t)nranks, sizeof(*sr->ranks));
    for (r = 0; r < nranks; r++)
        tacl__sched_init(&sr->ranks[r].s, r, nranks);
    return sr;
}

void simrun_free(simrun_t *sr)
{
    int r, i;
    uint32_t b;

    for (r = 0; r < sr->n; r++) {
        rank_t *rk = &sr->ranks[r];

        for (b = 0; rk->scratch && b < rk->s.nbufs; b++) {
            free(rk->scratch[b]);
            free(rk->scratch_def[b]);
        }
        free(rk->mem);
        free(rk->defined);
        free(rk->writes);
        free(rk->scratch);
        free(rk->scratch_def);
        free(rk->match);
        free(rk->dep_of);
        free(rk->dep_start);
        free(rk->pending);
        free(rk->ready);
        free(rk->know);
        tacl__sched_fini(&rk->s);
    }
    for (i = 0; i < sr->nregions; i++) {
        free(sr->regions[i].defined);
        free(sr->regions[i].writes);
    }
    free(sr->regions);
    free(sr->ranks);
    free(sr);
}

tacl__sched_t *simrun_sched(simrun_t *sr, int rank)
{
    return &sr->ranks[rank].s;
}

void simrun_region(simrun_t *sr, int rank, void *ptr, size_t size,
                   size_t def_off, size_t def_len)
{
    region_t *g;

    if (sr->nregions == sr->cap) {
        sr->cap = sr->cap ? sr->cap * 2 : 8;
        sr->regions = realloc(sr->regions, (size_t)sr->cap * sizeof(*g));
    }
    g = &sr->regions[sr->nregions++];
    g->rank = rank;
    g->ptr = ptr;
    g->size = size;
    g->def_off = def_off;
    g->def_len = def_len;
    g->defined = calloc(size + 1, 1);
    g->writes = calloc(size + 1, 1);
}

const uint8_t *simrun_writes(const simrun_t *sr, int rank, const void *ptr)
{
    int i;

    for (i = 0; i < sr->nregions; i++)
        if (sr->regions[i].rank == rank && sr->regions[i].ptr == ptr)
            return sr->regions[i].writes;
    return NULL;
}

uint64_t simrun_bytes_sent(const simrun_t *sr, int rank)
{
    return sr->ranks[rank].bytes;
}

uint64_t simrun_msgs_sent(const simrun_t *sr, int rank)
{
    return sr->ranks[rank].msgs;
}

uint64_t simrun_knows(const simrun_t *sr, int rank)
{
    return sr->ranks[rank].knows;
}

uint64_t simrun_steps(const simrun_t *sr)
{
    uint64_t t = 0;
    int r;

    for (r = 0; r < sr->n; r++)
        t += sr->ranks[r].s.nsteps;
    return t;
}

/* Maps every buffer of every rank to memory; allocates scratch. */
static int prepare_bufs(simrun_t *sr)
{
    int r, i;
    uint32_t b;

    for (r = 0; r < sr->n; r++) {
        rank_t *rk = &sr->ranks[r];
        uint32_t nb = rk->s.nbufs + 1;

        rk->mem = calloc(nb, sizeof(*rk->mem));
        rk->defined = calloc(nb, sizeof(*rk->defined));
        rk->writes = calloc(nb, sizeof(*rk->writes));
        rk->scratch = calloc(nb, sizeof(*rk->scratch));
        rk->scratch_def = calloc(nb, sizeof(*rk->scratch_def));
        for (b = 0; b < rk->s.nbufs; b++) {
            tacl__sched_buf_t *buf = &rk->s.bufs[b];

            if (buf->role == TACL__BUF_SCRATCH) {
                rk->scratch[b] = malloc(buf->size + 1);
                rk->scratch_def[b] = calloc(buf->size + 1, 1);
                rk->mem[b] = rk->scratch[b];
                rk->defined[b] = rk->scratch_def[b];
                continue;
            }
            for (i = 0; i < sr->nregions; i++) {
                region_t *g = &sr->regions[i];
                char *p = buf->ptr;

                if (g->rank == r && p >= g->ptr &&
                    buf->size <= g->size &&
                    (size_t)(p - g->ptr) <= g->size - buf->size) {
                    rk->mem[b] = p;
                    rk->defined[b] = g->defined + (p - g->ptr);
                    rk->writes[b] = g->writes + (p - g->ptr);
                    break;
                }
            }
            if (i == sr->nregions)
                return fail(sr, "rank %d buffer %u (%p, %" PRIu64
                            " bytes) is not memory the test declared", r,
                            b, buf->ptr, buf->size);
        }
    }
    return 0;
}

/* Pairs every send with its receive: core's matcher, the simulator's. */
static int prepare_match(simrun_t *sr)
{
    const tacl__sched_t **v = malloc(((size_t)sr->n + 1) * sizeof(*v));
    uint32_t *off = malloc(((size_t)sr->n + 1) * sizeof(*off));
    uint32_t *partner = NULL, *rank_of = NULL, g;
    uint64_t total = simrun_steps(sr);
    int r, rc = 0;

    if (v == NULL || off == NULL || total >= UINT32_MAX) {
        rc = fail(sr, "cannot match the messages of %" PRIu64 " steps",
                  total);
        goto out;
    }
    off[0] = 0;
    for (r = 0; r < sr->n; r++) {
        v[r] = &sr->ranks[r].s;
        off[r + 1] = off[r] + sr->ranks[r].s.nsteps;
    }
    partner = malloc((total + 1) * sizeof(*partner));
    rank_of = malloc((total + 1) * sizeof(*rank_of));
    if (partner == NULL || rank_of == NULL) {
        rc = fail(sr, "cannot match the messages of %" PRIu64 " steps",
                  total);
        goto out;
    }
    for (r = 0; r < sr->n; r++) {
        rank_t *rk = &sr->ranks[r];

        rk->match = malloc((rk->s.nsteps + 1) * sizeof(*rk->match));
        for (g = off[r]; g < off[r + 1]; g++) {
            rank_of[g] = (uint32_t)r;
            partner[g] = UINT32_MAX;
        }
    }
    if (tacl__sched_match(v, sr->n, off, partner) != TACL_OK) {
        rc = fail(sr, "%s", tacl__last_error());
        goto out;
    }
    for (r = 0; r < sr->n; r++)
        for (g = off[r]; g < off[r + 1]; g++) {
            uint32_t p = partner[g];

            sr->ranks[r].match[g - off[r]] =
                p == UINT32_MAX ? -1
                                : ((int64_t)rank_of[p] << 32) |
                                      (p - off[rank_of[p]]);
        }
out:
    free(v);
    free(off);
    free(partner);
    free(rank_of);
    return rc;
}

typedef struct {
    uintptr_t lo, hi;
    uint32_t step;
    int write;
} access_t;

static int access_cmp(const void *x, const void *y)
{
    const access_t *p = x, *q = y;

    return p->lo < q->lo ? -1 : p->lo > q->lo ? 1 : 0;
}

static void add_access(rank_t *rk, access_t *acc, size_t *na, uint32_t step,
                       tacl__bref_t ref, uint64_t bytes, int write)
{
    if (bytes == 0)
        return;
    acc[*na].lo = (uintptr_t)(rk->mem[ref.buf] + ref.off);
    acc[*na].hi = acc[*na].lo + bytes;
    acc[*na].step = step;
    acc[*na].write = write;
    (*na)++;
}

/*
 * Quantization steps (QUANT, DEQUANT, DQRQ).  Their inputs and outputs
 * are not st->bytes long (that is the full-precision length) and DEQUANT
 * and DQRQ read nsrc inputs stride bytes apart, so they have their own
 * access lists, checks and execution, kept here in one place.
 */
static int is_quant(const tacl__step_t *st)
{
    return st->kind == TACL__STEP_QUANT || st->kind == TACL__STEP_DEQUANT ||
           st->kind == TACL__STEP_DQRQ;
}

/* Bytes of one quantized input or output of st. */
static uint64_t quant_qbytes(const tacl__step_t *st)
{
    return tacl__quant_bytes(st->count, st->qblock, st->qbits);
}

static uint64_t quant_out_bytes(const tacl__step_t *st)
{
    return st->kind == TACL__STEP_DEQUANT ? st->bytes : quant_qbytes(st);
}

/* The i-th input of st and its length. */
static tacl__bref_t quant_src(const tacl__step_t *st, int i,
                              uint64_t *bytes_p)
{
    tacl__bref_t r = st->src;

    if (st->kind == TACL__STEP_QUANT) {
        *bytes_p = st->bytes;
        return r;
    }
    r.off += (uint64_t)i * st->stride;
    *bytes_p = quant_qbytes(st);
    return r;
}

static int quant_nsrc(const tacl__step_t *st)
{
    return st->kind == TACL__STEP_QUANT ? 1 : st->nsrc;
}

/* Accesses a quantization step makes, for check_races. */
static size_t quant_naccess(const tacl__step_t *st)
{
    return is_quant(st) ? (size_t)quant_nsrc(st) + 2 : 0;
}

static void quant_accesses(rank_t *rk, access_t *acc, size_t *na, uint32_t j)
{
    const tacl__step_t *st = &rk->s.steps[j];
    uint64_t bytes;
    int i;

    for (i = 0; i < quant_nsrc(st); i++) {
        tacl__bref_t r = quant_src(st, i, &bytes);

        add_access(rk, acc, na, j, r, bytes, 0);
    }
    if (st->kind == TACL__STEP_DEQUANT && st->arg)
        add_access(rk, acc, na, j, st->dst, st->bytes, 0);
    add_access(rk, acc, na, j, st->dst, quant_out_bytes(st), 1);
}

/* No writes through inputs, no output overlapping an input. */
static int quant_check_step(simrun_t *sr, int r, uint32_t j)
{
    rank_t *rk = &sr->ranks[r];
    tacl__step_t *st = &rk->s.steps[j];
    char *d = rk->mem[st->dst.buf] + st->dst.off, *a;
    uint64_t out = quant_out_bytes(st), bytes;
    char line[256];
    int i;

    if (st->count == 0)
        return 0;
    tacl__sched_step_str(&rk->s, j, line, sizeof(line));
    if (rk->s.bufs[st->dst.buf].role == TACL__BUF_INPUT)
        return fail(sr, "rank %d writes an input buffer: %s", r, line);
    for (i = 0; i < quant_nsrc(st); i++) {
        tacl__bref_t ref = quant_src(st, i, &bytes);

        a = rk->mem[ref.buf] + ref.off;
        if (d < a + bytes && a < d + out)
            return fail(sr, "rank %d: quantization output overlaps its "
                        "input %d: %s", r, i, line);
    }
    return 0;
}

/*
 * Every two steps of a rank that touch a byte, one of them writing, must
 * be ordered by dependencies; the executor may run them in either order
 * otherwise.
 */
static int check_races(simrun_t *sr, int r)
{
    rank_t *rk = &sr->ranks[r];
    uint32_t n = rk->s.nsteps, words = (n + 63) / 64, j, d;
    uint64_t *reach = calloc((size_t)n * words + 1, sizeof(*reach));
    size_t na = 0, i, a, nact = 0, nacc = 3 * (size_t)n;
    access_t *acc;
    size_t *act;
    char l1[256], l2[256];
    int rc = 0;

    for (j = 0; j < n; j++) {
        const tacl__step_t *st = &rk->s.steps[j];

        nacc += quant_naccess(st);
        if (st->kind == TACL__STEP_REDUCE && st->nsrc > 1)
            nacc += st->nsrc - 1u;
    }
    acc = malloc((nacc + 1) * sizeof(*acc));
    act = malloc((nacc + 1) * sizeof(*act));
    for (j = 0; j < n; j++) {
        tacl__step_t *st = &rk->s.steps[j];
        const uint32_t *deps = tacl__sched_deps(&rk->s, j);

        for (d = 0; d < st->ndeps; d++) {
            uint64_t *dst = reach + (size_t)j * words;
            uint64_t *src = reach + (size_t)deps[d] * words;

            for (i = 0; i < words; i++)
                dst[i] |= src[i];
            dst[deps[d] / 64] |= 1ull << (deps[d] % 64);
        }
        switch (st->kind) {
        case TACL__STEP_SEND:
            add_access(rk, acc, &na, j, st->src, st->bytes, 0);
            break;
        case TACL__STEP_RECV:
            add_access(rk, acc, &na, j, st->dst, st->bytes, 1);
            break;
        case TACL__STEP_REDUCE:
            for (i = 0; i < (st->nsrc ? st->nsrc : 1u); i++)
                add_access(rk, acc, &na, j,
                           tacl__bref(st->src2.buf,
                                      st->src2.off + i * st->stride),
                           st->bytes, 0);
            /* fall through */
        case TACL__STEP_COPY:
        case TACL__STEP_DIV:
            add_access(rk, acc, &na, j, st->src, st->bytes, 0);
            add_access(rk, acc, &na, j, st->dst, st->bytes, 1);
            break;
        case TACL__STEP_QUANT:
        case TACL__STEP_DEQUANT:
        case TACL__STEP_DQRQ:
            quant_accesses(rk, acc, &na, j);
            break;
        default:
            break;
        }
    }
    qsort(acc, na, sizeof(*acc), access_cmp);
    for (i = 0; i < na && rc == 0; i++) {
        size_t keep = 0;

        for (a = 0; a < nact; a++) {
            access_t *o = &acc[act[a]];
            uint32_t lo, hi;

            if (o->hi <= acc[i].lo)
                continue;
            act[keep++] = act[a];
            if (o->step == acc[i].step || (!o->write && !acc[i].write))
                continue;
            lo = TACL_MIN(o->step, acc[i].step);
            hi = TACL_MAX(o->step, acc[i].step);
            if (reach[(size_t)hi * words + lo / 64] & (1ull << (lo % 64)))
                continue;
            tacl__sched_step_str(&rk->s, lo, l1, sizeof(l1));
            tacl__sched_step_str(&rk->s, hi, l2, sizeof(l2));
            rc = fail(sr, "rank %d: unordered steps touch the same bytes: "
                      "[%s] and [%s]", r, l1, l2);
            break;
        }
        nact = keep;
        act[nact++] = i;
    }
    free(reach);
    free(acc);
    free(act);
    return rc;
}

/* Checks a step's own references: overlap rules and input writes. */
static int check_step(simrun_t *sr, int r, uint32_t j)
{
    rank_t *rk = &sr->ranks[r];
    tacl__step_t *st = &rk->s.steps[j];
    char line[256];
    char *d, *s1, *s2;
    int writes = st->kind == TACL__STEP_RECV || st->kind == TACL__STEP_COPY ||
                 st->kind == TACL__STEP_REDUCE || st->kind == TACL__STEP_DIV;

    if (is_quant(st))
        return quant_check_step(sr, r, j);
    if (st->bytes == 0 || !writes)
        return 0;
    tacl__sched_step_str(&rk->s, j, line, sizeof(line));
    if (rk->s.bufs[st->dst.buf].role == TACL__BUF_INPUT)
        return fail(sr, "rank %d writes an input buffer: %s", r, line);
    d = rk->mem[st->dst.buf] + st->dst.off;
    s1 = rk->mem[st->src.buf] + st->src.off;
    s2 = rk->mem[st->src2.buf] + st->src2.off;
    if (st->kind == TACL__STEP_COPY && d < s1 + st->bytes &&
        s1 < d + st->bytes)
        return fail(sr, "rank %d copies between overlapping regions: %s", r,
                    line);
    if ((st->kind == TACL__STEP_REDUCE || st->kind == TACL__STEP_DIV) &&
        d != s1 && d < s1 + st->bytes && s1 < d + st->bytes)
        return fail(sr, "rank %d: partial overlap of dst and src: %s", r,
                    line);
    if (st->kind == TACL__STEP_REDUCE && d != s2 && d < s2 + st->bytes &&
        s2 < d + st->bytes)
        return fail(sr, "rank %d: partial overlap of dst and src2: %s", r,
                    line);
    return 0;
}

/* Dependents lists, for releasing steps as their dependencies finish. */
static void prepare_dependents(rank_t *rk)
{
    uint32_t n = rk->s.nsteps, j, d, *fill;

    rk->dep_start = calloc(n + 2, sizeof(*rk->dep_start));
    rk->dep_of = malloc((rk->s.ndeps + 1) * sizeof(*rk->dep_of));
    fill = calloc(n + 1, sizeof(*fill));
    for (j = 0; j < n; j++)
        for (d = 0; d < rk->s.steps[j].ndeps; d++)
            rk->dep_start[tacl__sched_deps(&rk->s, j)[d] + 1]++;
    for (j = 0; j < n; j++)
        rk->dep_start[j + 1] += rk->dep_start[j];
    for (j = 0; j < n; j++)
        for (d = 0; d < rk->s.steps[j].ndeps; d++) {
            uint32_t p = tacl__sched_deps(&rk->s, j)[d];

            rk->dep_of[rk->dep_start[p] + fill[p]++] = j;
        }
    free(fill);
    rk->pending = malloc((n + 1) * sizeof(*rk->pending));
    rk->ready = malloc(n + 1);
    rk->know = malloc((n + 1) * sizeof(*rk->know));
}

static int prepare(simrun_t *sr)
{
    int r;
    uint32_t j;

    for (r = 0; r < sr->n; r++)
        if (tacl__sched_status(&sr->ranks[r].s) != TACL_OK)
            return fail(sr, "rank %d: schedule in error %d", r,
                        (int)tacl__sched_status(&sr->ranks[r].s));
    if (prepare_bufs(sr) != 0 || prepare_match(sr) != 0)
        return -1;
    for (r = 0; r < sr->n; r++) {
        for (j = 0; j < sr->ranks[r].s.nsteps; j++)
            if (check_step(sr, r, j) != 0)
                return -1;
        if (check_races(sr, r) != 0)
            return -1;
        prepare_dependents(&sr->ranks[r]);
    }
    sr->prepared = 1;
    return 0;
}

typedef struct {
    int rank;
    uint32_t step;
} item_t;

typedef struct {
    item_t *items;
    size_t n;
    tt_rng_t rng;
} pool_t;

/* A step's dependencies are done: queue it (a message once both ends are). */
static void make_ready(simrun_t *sr, pool_t *p, int r, uint32_t j)
{
    rank_t *rk = &sr->ranks[r];
    tacl__step_t *st = &rk->s.steps[j];
    int64_t m;

    rk->ready[j] = 1;
    if (st->kind == TACL__STEP_SEND || st->kind == TACL__STEP_RECV) {
        m = rk->match[j];
        if (!sr->ranks[m >> 32].ready[(uint32_t)m])
            return;
        if (st->kind == TACL__STEP_RECV) {
            r = (int)(m >> 32);
            j = (uint32_t)m;
        }
    }
    p->items[p->n].rank = r;
    p->items[p->n].step = j;
    p->n++;
}

static void finish_step(simrun_t *sr, pool_t *p, int r, uint32_t j,
                        uint64_t know)
{
    rank_t *rk = &sr->ranks[r];
    uint32_t i;

    rk->ready[j] = 2;
    rk->know[j] |= know;
    rk->knows |= rk->know[j];
    for (i = rk->dep_start[j]; i < rk->dep_start[j + 1]; i++) {
        uint32_t t = rk->dep_of[i];

        rk->know[t] |= rk->know[j];
        if (--rk->pending[t] == 0)
            make_ready(sr, p, r, t);
    }
}

/* Checks that bytes are defined before a step reads them. */
static int read_ok(simrun_t *sr, int r, uint32_t j, tacl__bref_t ref,
                   uint64_t bytes)
{
    rank_t *rk = &sr->ranks[r];
    const uint8_t *def = rk->defined[ref.buf] + ref.off;
    char line[256];
    uint64_t i;

    for (i = 0; i < bytes; i++)
        if (!def[i]) {
            tacl__sched_step_str(&rk->s, j, line, sizeof(line));
            return fail(sr, "rank %d reads byte %" PRIu64 " never written: "
                        "%s", r, ref.off + i, line);
        }
    return 0;
}

static void mark_written(rank_t *rk, tacl__bref_t ref, uint64_t bytes)
{
    uint8_t *w = rk->writes[ref.buf];
    uint64_t i;

    memset(rk->defined[ref.buf] + ref.off, 1, bytes);
    if (w == NULL)
        return;
    for (i = 0; i < bytes; i++)
        if (w[ref.off + i] < 255)
            w[ref.off + i]++;
}

static char *at(rank_t *rk, tacl__bref_t ref)
{
    return rk->mem[ref.buf] + ref.off;
}

/* Runs a quantization step with the CPU kernels. */
static int quant_execute(simrun_t *sr, pool_t *p, int r, uint32_t j)
{
    rank_t *rk = &sr->ranks[r];
    tacl__step_t *st = &rk->s.steps[j];
    const void **srcs = calloc((size_t)quant_nsrc(st) + 1, sizeof(*srcs));
    void *dst = rk->mem[st->dst.buf] + st->dst.off;
    tacl_status_t status;
    uint64_t bytes;
    int i;

    for (i = 0; i < quant_nsrc(st); i++) {
        tacl__bref_t ref = quant_src(st, i, &bytes);

        if (read_ok(sr, r, j, ref, bytes) != 0) {
            free(srcs);
            return -1;
        }
        srcs[i] = rk->mem[ref.buf] + ref.off;
    }
    if (st->kind == TACL__STEP_DEQUANT && st->arg &&
        read_ok(sr, r, j, st->dst, st->bytes) != 0) {
        free(srcs);
        return -1;
    }
    if (st->kind == TACL__STEP_QUANT)
        status = tacl__quantize(srcs[0], st->count, (tacl_dtype_t)st->dtype,
                                st->qblock, st->qbits, dst);
    else if (st->kind == TACL__STEP_DEQUANT)
        status = tacl__dequant_reduce(srcs, st->nsrc, st->count, st->qblock,
                                      st->qbits, (tacl_dtype_t)st->dtype,
                                      dst, st->arg);
    else
        status = tacl__dequant_reduce_quant(srcs, st->nsrc, st->count,
                                            st->qblock, st->qbits, dst);
    free(srcs);
    if (status != TACL_OK)
        return fail(sr, "rank %d step %u: quantization kernel failed with "
                    "%d", r, j, (int)status);
    if (st->count)
        mark_written(rk, st->dst, quant_out_bytes(st));
    finish_step(sr, p, r, j, 0);
    return 0;
}

static int execute(simrun_t *sr, pool_t *p, item_t it)
{
    rank_t *rk = &sr->ranks[it.rank];
    tacl__step_t *st = &rk->s.steps[it.step];
    size_t es = tacl_dtype_size((tacl_dtype_t)st->dtype);
    tacl_status_t status = TACL_OK;

    switch (st->kind) {
    case TACL__STEP_SEND: {
        int64_t m = rk->match[it.step];
        rank_t *to = &sr->ranks[m >> 32];
        tacl__step_t *rv = &to->s.steps[(uint32_t)m];

        if (read_ok(sr, it.rank, it.step, st->src, st->bytes) != 0)
            return -1;
        if (st->bytes) {
            memcpy(at(to, rv->dst), at(rk, st->src), st->bytes);
            mark_written(to, rv->dst, st->bytes);
        }
        rk->bytes += st->bytes;
        rk->msgs++;
        finish_step(sr, p, it.rank, it.step, 0);
        finish_step(sr, p, (int)(m >> 32), (uint32_t)m, rk->know[it.step]);
        return 0;
    }
    case TACL__STEP_QUANT:
    case TACL__STEP_DEQUANT:
    case TACL__STEP_DQRQ:
        return quant_execute(sr, p, it.rank, it.step);
    case TACL__STEP_COPY:
        if (read_ok(sr, it.rank, it.step, st->src, st->bytes) != 0)
            return -1;
        memcpy(at(rk, st->dst), at(rk, st->src), st->bytes);
        break;
    case TACL__STEP_REDUCE: {
        uint32_t k, nsrc = st->nsrc ? st->nsrc : 1u;

        if (read_ok(sr, it.rank, it.step, st->src, st->bytes) != 0)
            return -1;
        for (k = 0; k < nsrc; k++)
            if (read_ok(sr, it.rank, it.step,
                        tacl__bref(st->src2.buf,
                                   st->src2.off + k * st->stride),
                        st->bytes) != 0)
                return -1;
        /* Source by source over the whole length: the same order, so the
         * same bits, as the executor's blocks. */
        status = tacl__reduce_cpu(at(rk, st->dst), at(rk, st->src),
                                  at(rk, st->src2), st->bytes / es,
                                  (tacl_dtype_t)st->dtype,
                                  (tacl_op_t)st->op);
        for (k = 1; k < nsrc && status == TACL_OK; k++)
            status = tacl__reduce_cpu(
                at(rk, st->dst), at(rk, st->dst),
                at(rk, st->src2) + k * st->stride, st->bytes / es,
                (tacl_dtype_t)st->dtype, (tacl_op_t)st->op);
        break;
    }
    case TACL__STEP_DIV:
        if (read_ok(sr, it.rank, it.step, st->src, st->bytes) != 0)
            return -1;
        status = tacl__div_cpu(at(rk, st->dst), at(rk, st->src),
                               st->bytes / es, (tacl_dtype_t)st->dtype,
                               st->arg);
        break;
    default:
        break;
    }
    if (status != TACL_OK)
        return fail(sr, "rank %d step %u: kernel failed with %d", it.rank,
                    it.step, (int)status);
    if (st->kind != TACL__STEP_NOP && st->bytes)
        mark_written(rk, st->dst, st->bytes);
    finish_step(sr, p, it.rank, it.step, 0);
    return 0;
}

/* Resets scratch, byte states and counters for a new run. */
static void reset_run(simrun_t *sr)
{
    int r, i;
    uint32_t b, j;

    for (i = 0; i < sr->nregions; i++) {
        region_t *g = &sr->regions[i];

        memset(g->defined, 0, g->size);
        memset(g->defined + g->def_off, 1, g->def_len);
        memset(g->writes, 0, g->size);
    }
    for (r = 0; r < sr->n; r++) {
        rank_t *rk = &sr->ranks[r];

        for (b = 0; b < rk->s.nbufs; b++)
            if (rk->scratch[b] != NULL) {
                memset(rk->scratch[b], 0xa5, rk->s.bufs[b].size);
                memset(rk->scratch_def[b], 0, rk->s.bufs[b].size);
            }
        for (j = 0; j < rk->s.nsteps; j++) {
            rk->pending[j] = rk->s.steps[j].ndeps;
            rk->ready[j] = 0;
            rk->know[j] = r < 64 ? 1ull << r : 0;
        }
        rk->bytes = rk->msgs = 0;
        rk->knows = r < 64 ? 1ull << r : 0;
    }
}

int simrun_run(simrun_t *sr, unsigned seed, char *err, size_t errlen)
{
    pool_t p = {NULL, 0, {0x9e3779b97f4a7c15ull ^ ((uint64_t)seed << 17)}};
    uint64_t done = 0, total = simrun_steps(sr);
    char line[256];
    int r, rc = 0;
    uint32_t j = 0; /* gcc -fsanitize=address cannot prove it set */

    sr->err = err;
    sr->errlen = errlen;
    err[0] = '\0';
    if (!sr->prepared && prepare(sr) != 0)
        return -1;
    reset_run(sr);
    p.items = malloc((total + 1) * sizeof(*p.items));
    for (r = 0; r < sr->n; r++)
        for (j = 0; j < sr->ranks[r].s.nsteps; j++)
            if (sr->ranks[r].pending[j] == 0)
                make_ready(sr, &p, r, j);
    while (p.n > 0) {
        size_t k = tt_rng_next(&p.rng) % p.n;
        item_t it = p.items[k];
        int kind = sr->ranks[it.rank].s.steps[it.step].kind;

        p.items[k] = p.items[--p.n];
        if (execute(sr, &p, it) != 0) {
            rc = -1;
            break;
        }
        done += kind == TACL__STEP_SEND ? 2 : 1;
    }
    if (rc == 0 && done != total) {
        for (r = 0; r < sr->n; r++)
            for (j = 0; j < sr->ranks[r].s.nsteps; j++)
                if (sr->ranks[r].ready[j] != 2)
                    goto found;
    found:
        line[0] = '\0';
        if (r < sr->n)
            tacl__sched_step_str(&sr->ranks[r].s, j, line, sizeof(line));
        rc = fail(sr, "deadlock: %" PRIu64 " of %" PRIu64 " steps ran; "
                  "rank %d waits at [%s]", done, total, r, line);
    }
    free(p.items);
    return rc;
}

tacl__topo_view_t simrun_view(const int *node_of, int n, int rank)
{
    /* Figures of a plain cluster: only their ratios steer the tuner. */
    static const tacl__link_t links[TACL_NUM_LINK_CLASSES] = {
        [TACL_LINK_SELF] = {.bw = 20, .lat = 0.2},
        [TACL_LINK_HOST] = {.bw = 10, .lat = 1},
        [TACL_LINK_GPU] = {.bw = 200, .lat = 3},
        [TACL_LINK_NET] = {.bw = 0.125, .lat = 15},
    };
    tacl__topo_view_t v;

    tacl__topo_view_make(&v, rank, n, node_of, links, NULL);
    return v;
}

void simrun_bufs_alloc(simrun_bufs_t *b, tacl_coll_t coll, int rank,
                       int in_place, size_t sbytes, size_t rbytes,
                       int has_send, int has_recv)
{
    memset(b, 0, sizeof(*b));
    b->sbytes = sbytes;
    b->rbytes = rbytes;
    if (in_place && coll == TACL_COLL_REDUCE_SCATTER) {
        b->salloc = malloc(sbytes + 1);
        b->send = b->salloc;
        b->recv = b->send + (size_t)rank * rbytes;
        b->region = b->send;
        b->out_off = (size_t)rank * rbytes;
    } else if (in_place) {
        b->ralloc = malloc(rbytes + 1);
        b->recv = b->ralloc;
        b->send = b->recv + (coll == TACL_COLL_ALLGATHER
                                 ? (size_t)rank * sbytes : 0);
        b->region = b->recv;
    } else {
        if (has_send)
            b->salloc = malloc(sbytes + 1);
        if (has_recv)
            b->ralloc = malloc(rbytes + 1);
        b->send = b->salloc;
        b->recv = b->ralloc;
        b->region = b->recv;
    }
    b->out_bytes = has_recv && b->recv != NULL ? rbytes : 0;
    if (b->recv != NULL)
        memset(b->recv, 0xee, rbytes);
}

void simrun_bufs_declare(simrun_t *sr, int rank, const simrun_bufs_t *b,
                         tacl_coll_t coll, int in_place)
{
    if (in_place && coll == TACL_COLL_REDUCE_SCATTER)
        simrun_region(sr, rank, b->send, b->sbytes, 0, b->sbytes);
    else if (in_place && coll == TACL_COLL_ALLGATHER)
        simrun_region(sr, rank, b->recv, b->rbytes,
                      (size_t)rank * b->sbytes, b->sbytes);
    else if (in_place)
        simrun_region(sr, rank, b->recv, b->rbytes, 0, b->rbytes);
    else {
        if (b->send != NULL)
            simrun_region(sr, rank, b->send, b->sbytes, 0, b->sbytes);
        if (b->recv != NULL)
            simrun_region(sr, rank, b->recv, b->rbytes, 0, 0);
    }
}

void simrun_bufs_free(simrun_bufs_t *b)
{
    free(b->salloc);
    free(b->ralloc);
    b->salloc = b->ralloc = NULL;
}

size_t simrun_send_elems(tacl_coll_t coll, size_t count, int nranks)
{
    return coll == TACL_COLL_REDUCE_SCATTER || coll == TACL_COLL_ALLTOALL
               ? count * (size_t)nranks
               : count;
}

size_t simrun_recv_elems(tacl_coll_t coll, size_t count, int nranks)
{
    return coll == TACL_COLL_ALLGATHER || coll == TACL_COLL_ALLTOALL
               ? count * (size_t)nranks
               : count;
}
