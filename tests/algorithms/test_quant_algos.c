/*
 * The quantized collectives of ZeRO++ (qwZ all-gather, qgZ
 * reduce-scatter), checked without a transport.
 *
 * Every rank's schedule comes from tacl__quant_build; simrun runs them
 * all together (quantization steps through the CPU kernels) on one node,
 * on regular layouts (2x2, 4x2, 3x3), on ranks not numbered node by node
 * and on an unequal layout, and every output element is compared with a
 * float64 reference within a bound derived from the quantization steps
 * on its way (see qwz_bound and qgz_bound).  Every output byte is written
 * once, inputs are untouched.  Byte counters sum the SEND steps whose
 * peer is on another node and compare them with a float16 ring's; the
 * dependency graph shows the chunks of qgZ pipeline.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "float_bits.h"
#include "hier.h"
#include "log.h"
#include "quant.h"
#include "quant_algos.h"
#include "suite.h"
#include "spec.h"

typedef suite_layout_t layout_t;

static const layout_t layouts[] = {
    {"1x4", 4, 1, {0, 0, 0, 0}, 0},
    {"2x2", 4, 2, {0, 0, 1, 1}, 1},
    {"4x2", 8, 4, {0, 0, 1, 1, 2, 2, 3, 3}, 1},
    {"3x3", 9, 3, {0, 0, 0, 1, 1, 1, 2, 2, 2}, 1},
    {"scattered 2x3", 6, 2, {0, 1, 1, 0, 0, 1}, 1},
    {"unequal 2+1", 3, 2, {0, 0, 1}, 0},
};
#define NLAYOUTS ((int)(sizeof(layouts) / sizeof(layouts[0])))

typedef struct {
    const layout_t *lay;
    tacl_coll_t coll;
    size_t count;
    tacl_dtype_t dtype;
    int qbits;
    uint32_t qblock;
    tacl_op_t op;
    int in_place;
    uint64_t chunk;
    const char *spec;
} cfg_t;

typedef simrun_bufs_t rbufs_t;

/* What every rank of c runs. */
static suite_op_t op_of(const cfg_t *c)
{
    suite_op_t op = {c->coll, c->lay->n, c->count, c->dtype, c->op, 0,
                     c->in_place, c->chunk, c->qbits, c->qblock};

    return op;
}

static void cfg_str(const cfg_t *c, char *buf, size_t len)
{
    snprintf(buf, len, "%s on %s count=%zu %s int%d block=%u %s %s chunk=%llu "
             "spec=%s", c->coll == TACL_COLL_ALLGATHER ? "qwz" : "qgz",
             c->lay->name, c->count, tacl_dtype_name(c->dtype), c->qbits,
             c->qblock, tacl_op_name(c->op),
             c->in_place ? "in-place" : "out-of-place",
             (unsigned long long)c->chunk, c->spec ? c->spec : "-");
}

/* v rounded to dtype (nearest-even), as a double. */
static double rnd(tacl_dtype_t dt, double v)
{
    float f = (float)v;

    if (dt == TACL_FLOAT16)
        return tacl__half_to_float_inl(tacl__float_to_half_inl(f));
    if (dt == TACL_BFLOAT16)
        return tacl__bf16_to_float_inl(tacl__float_to_bf16_inl(f));
    return f;
}

static void put(tacl_dtype_t dt, void *buf, size_t i, double v)
{
    float f = (float)v;

    if (dt == TACL_FLOAT16)
        ((uint16_t *)buf)[i] = tacl__float_to_half_inl(f);
    else if (dt == TACL_BFLOAT16)
        ((uint16_t *)buf)[i] = tacl__float_to_bf16_inl(f);
    else
        ((float *)buf)[i] = f;
}

static double get(tacl_dtype_t dt, const void *buf, size_t i)
{
    if (dt == TACL_FLOAT16)
        return tacl__half_to_float_inl(((const uint16_t *)buf)[i]);
    if (dt == TACL_BFLOAT16)
        return tacl__bf16_to_float_inl(((const uint16_t *)buf)[i]);
    return ((const float *)buf)[i];
}

/* Unit roundoff of dtype, and half its smallest subnormal step. */
static double unit(tacl_dtype_t dt)
{
    return dt == TACL_FLOAT16 ? 0x1p-11 : dt == TACL_BFLOAT16 ? 0x1p-8
                                                              : 0x1p-24;
}

static double tiny(tacl_dtype_t dt)
{
    return dt == TACL_FLOAT16 ? 0x1p-25 : 0x1p-140;
}

/*
 * Input element i of rank q, rounded to dtype: uniform in [-1, 1) times
 * a magnitude that changes every 50 elements, so blocks get different
 * scales.
 */
static double gen(tacl_dtype_t dt, int q, size_t i)
{
    uint64_t h = ((uint64_t)q * 0x9e3779b97f4a7c15ull) ^
                 ((uint64_t)i * 0xbf58476d1ce4e5b9ull);
    double u;

    h ^= h >> 31;
    h *= 0x94d049bb133111ebull;
    h ^= h >> 29;
    u = (double)(h >> 11) * 0x1p-53 * 2.0 - 1.0;
    return rnd(dt, u * ldexp(1.0, (int)((i / 50) % 5) - 2));
}

static size_t send_elems(const cfg_t *c)
{
    return simrun_send_elems(c->coll, c->count, c->lay->n);
}

static size_t recv_elems(const cfg_t *c)
{
    return simrun_recv_elems(c->coll, c->count, c->lay->n);
}

static void fill(const void *ctx, int r, void *send, size_t n)
{
    const cfg_t *c = ctx;

    for (size_t i = 0; i < n; i++)
        put(c->dtype, send, i, gen(c->dtype, r, i));
}

static tacl__coll_args_t args_of(const cfg_t *c, const rbufs_t *b)
{
    suite_op_t op = op_of(c);

    return suite_args(&op, b, 7);
}

/* The float32 scale the kernels give a block of largest magnitude amax. */
static double scale_of(double amax, int bits)
{
    return (double)((float)amax / (float)TACL_QUANT_QMAX(bits));
}

/* Largest magnitude of rank q's input at [base + lo, base + hi). */
static double amax_of(const cfg_t *c, int q, size_t base, size_t lo,
                      size_t hi)
{
    double a = 0;
    size_t i;

    for (i = lo; i < hi; i++)
        a = fmax(a, fabs(gen(c->dtype, q, base + i)));
    return a;
}

/*
 * qwZ, element i of rank j's block: one quantization, half a step of its
 * block's scale (clamping at qmax moves a value by less than the float32
 * rounding of the scale, hence the 1e-6), then the product q * scale
 * rounded once to dtype.  qwz_block_err gives the first part for the
 * block [lo, hi) of rank j, qwz_bound the whole.
 */
static double qwz_block_err(const cfg_t *c, int j, size_t lo, size_t hi)
{
    return 0.5 * scale_of(amax_of(c, j, 0, lo, hi), c->qbits) * (1 + 1e-6);
}

static double qwz_bound(const cfg_t *c, double e, double x)
{
    return e + unit(c->dtype) * (fabs(x) + e) + tiny(c->dtype);
}

/* The quantization block of qgZ around element i of a block. */
static void qgz_block(const cfg_t *c, size_t i, size_t *lo_p, size_t *hi_p)
{
    tacl__coll_args_t a = args_of(c, NULL);
    size_t cs, ci;
    uint32_t nch;

    tacl__qgz_grid(&a, &cs, &nch);
    ci = i / cs * cs;
    *lo_p = ci + (i - ci) / c->qblock * c->qblock;
    *hi_p = TACL_MIN(TACL_MIN(*lo_p + c->qblock, ci + cs), c->count);
}

/*
 * qgZ, elements [lo, hi) (one quantization block) of rank d's block.  The
 * chain: each rank q quantizes its slice once (half a step of its
 * block's scale s1_q); 2-hop: on each node m the k dequantized values are
 * summed in float32 and requantized (half a step of the partial's scale,
 * which is at most (the largest over the block of the sum over m's ranks
 * of |x_q| + their errors) / qmax), the g partials are dequantized and
 * summed in float32.  1-hop: the p quantized inputs are summed.  Float32
 * sums add 2^-22 of the magnitudes summed.  qgz_bound adds the final
 * rounding to dtype, and for AVG the division by p rounded again.
 */
static double qgz_block_err(const cfg_t *c, int d, size_t lo, size_t hi,
                            int two_hop)
{
    const layout_t *lay = c->lay;
    size_t base = (size_t)d * c->count, t;
    double err = 0, mag = 0, e1[9] = {0};
    int q, m;

    for (q = 0; q < lay->n; q++) {
        double am = amax_of(c, q, base, lo, hi);

        e1[q] = 0.5 * scale_of(am, c->qbits) * (1 + 1e-6);
        err += e1[q];
        mag += am + e1[q];
    }
    if (two_hop) {
        for (m = 0; m < lay->n_nodes; m++) {
            double pmax = 0;

            for (t = lo; t < hi; t++) {
                double sum = 0;

                for (q = 0; q < lay->n; q++)
                    if (lay->node_of[q] == m)
                        sum += fabs(gen(c->dtype, q, base + t)) + e1[q];
                pmax = fmax(pmax, sum);
            }
            err += 0.5 * scale_of(pmax * (1 + 1e-5), c->qbits) * (1 + 1e-6);
        }
        mag *= 2;
    }
    return err + 0x1p-22 * mag * lay->n;
}

static double qgz_bound(const cfg_t *c, double err, double ref)
{
    double u = unit(c->dtype), n = c->lay->n;
    double sum = c->op == TACL_AVG ? ref * n : ref;
    double bound = err + u * (fabs(sum) + err) + tiny(c->dtype);

    if (c->op == TACL_AVG)
        bound = bound / n + u * (fabs(ref) + bound / n) + tiny(c->dtype);
    return bound;
}

static void build_rank(const void *cfg, simrun_t *sr, int r, rbufs_t *b,
                       uint64_t seq, const char *name)
{
    const cfg_t *c = cfg;
    suite_op_t op = op_of(c);
    tacl__topo_view_t v = suite_view(c->lay, r);
    const tacl__algo_t *algo = NULL;
    tacl__coll_args_t a;
    tacl_status_t st;

    suite_bufs(sr, &op, r, b, fill, c);
    a = suite_args(&op, b, seq);
    st = spec_build(simrun_sched(sr, r), &a, &v, c->spec, &algo);
    cr_assert_eq(st, TACL_OK, "%s: rank %d build failed: %s", name, r,
                 tacl__last_error());
    cr_assert_not_null(algo, "%s: no algorithm", name);
    cr_assert_str_eq(algo->name,
                     c->coll == TACL_COLL_ALLGATHER ? "qwz" : "qgz",
                     "%s: built with %s", name, algo->name);
}

/* In place, an all-gather's own block is right before it starts. */
static int own_block(const void *cfg, int r, size_t k)
{
    const cfg_t *c = cfg;

    return c->in_place && c->coll == TACL_COLL_ALLGATHER &&
           k / (c->count * tacl_dtype_size(c->dtype)) == (size_t)r;
}

static void check_qwz(const cfg_t *c, const rbufs_t *b, int r,
                      const char *name)
{
    double e = 0;
    size_t i;
    int j;

    for (j = 0; j < c->lay->n; j++)
        for (i = 0; i < c->count; i++) {
            double x = gen(c->dtype, j, i);
            double y = get(c->dtype, b->recv, (size_t)j * c->count + i);

            if (j == r) {
                cr_assert(y == x, "%s: rank %d own element %zu is %.9g, "
                          "not exactly %.9g", name, r, i, y, x);
                continue;
            }
            if (i % c->qblock == 0)
                e = qwz_block_err(c, j, i, TACL_MIN(i + c->qblock,
                                                    c->count));
            cr_assert(fabs(y - x) <= qwz_bound(c, e, x),
                      "%s: rank %d element %zu of block %d is %.9g, "
                      "expected %.9g within %.3g", name, r, i, j, y, x,
                      qwz_bound(c, e, x));
        }
}

static void check_qgz(const cfg_t *c, const rbufs_t *b, int r, int two_hop,
                      const char *name)
{
    size_t i, lo = 0, hi = 0;
    double err = 0;
    int q;

    for (i = 0; i < c->count; i++) {
        double ref = 0, y = get(c->dtype, b->recv, i), bound;

        if (i >= hi) {
            qgz_block(c, i, &lo, &hi);
            err = qgz_block_err(c, r, lo, hi, two_hop);
        }
        for (q = 0; q < c->lay->n; q++)
            ref += gen(c->dtype, q, (size_t)r * c->count + i);
        if (c->op == TACL_AVG)
            ref /= c->lay->n;
        bound = qgz_bound(c, err, ref);
        cr_assert(fabs(y - ref) <= bound, "%s: rank %d element %zu is "
                  "%.9g, expected %.9g within %.3g", name, r, i, y, ref,
                  bound);
    }
}

static void check_rank(const void *cfg, simrun_t *sr, int r,
                       const rbufs_t *b, const char *name)
{
    const cfg_t *c = cfg;
    suite_op_t op = op_of(c);
    tacl__topo_view_t v0 = suite_view(c->lay, 0);

    if (c->coll == TACL_COLL_ALLGATHER)
        check_qwz(c, b, r, name);
    else
        check_qgz(c, b, r, tacl__qgz_two_hop(&v0), name);
    suite_check_writes(sr, &op, r, b, own_block, c, name);
}

static const suite_t quant_suite = {build_rank, check_rank};

static void run_cfg(const cfg_t *c, unsigned seed)
{
    char name[256];

    cfg_str(c, name, sizeof(name));
    suite_run(&quant_suite, c, c->lay->n, 7, seed, name);
}

/*
 * The matrix: every layout, the odd counts, three dtypes, 8 and 4 bits,
 * blocks of 64 and 256, in place and not (reduce-scatter: SUM and AVG).
 * The two large counts run every third combination, to keep the run
 * short (the full matrix passes too, in about four times as long).
 */
static void run_matrix(tacl_coll_t coll, const char *spec)
{
    static const size_t counts[] = {1, 7, 1001, 4099};
    static const tacl_dtype_t dtypes[] = {TACL_FLOAT32, TACL_FLOAT16,
                                          TACL_BFLOAT16};
    static const int bits[] = {8, 4};
    static const uint32_t blocks[] = {64, 256};
    int nops = coll == TACL_COLL_REDUCE_SCATTER ? 2 : 1;
    size_t li, ci, di, bi, ki, oi, ip;
    unsigned seed = 1, combo = 0;

    for (li = 0; li < NLAYOUTS; li++)
        for (ci = 0; ci < 4; ci++)
            for (di = 0; di < 3; di++)
                for (bi = 0; bi < 2; bi++)
                    for (ki = 0; ki < 2; ki++)
                        for (oi = 0; oi < (size_t)nops; oi++)
                            for (ip = 0; ip < 2; ip++) {
                                cfg_t c = {&layouts[li], coll, counts[ci],
                                           dtypes[di], bits[bi], blocks[ki],
                                           oi ? TACL_AVG : TACL_SUM, (int)ip,
                                           256, spec};

                                combo++;
                                if (counts[ci] >= 1001 && combo % 3 != 0)
                                    continue;
                                if (counts[ci] == 4099)
                                    c.chunk = 4096;
                                run_cfg(&c, seed++);
                            }
}

Test(quant_algos, qwz_allgather) { run_matrix(TACL_COLL_ALLGATHER, NULL); }
Test(quant_algos, qwz_over_forced_algorithms)
{
    static const char *const specs[] = {"allgather=ring", "allgather=bruck",
                                        "allgather=rd", "allgather=mics",
                                        "allgather=horing"};
    size_t si, li;

    for (si = 0; si < sizeof(specs) / sizeof(specs[0]); si++)
        for (li = 0; li < NLAYOUTS; li++) {
            cfg_t c = {&layouts[li], TACL_COLL_ALLGATHER, 1001,
                       TACL_FLOAT16, 8, 64, TACL_SUM, (int)(li % 2), 512,
                       specs[si]};

            run_cfg(&c, (unsigned)(si * 10 + li));
        }
}
Test(quant_algos, qgz_reduce_scatter)
{
    run_matrix(TACL_COLL_REDUCE_SCATTER, NULL);
}

/* Bytes the SEND steps of every rank send to ranks on other nodes. */
static uint64_t inter_bytes(const layout_t *lay, const cfg_t *c,
                            const tacl__algo_t *flat)
{
    uint64_t total = 0;
    int r;

    for (r = 0; r < lay->n; r++) {
        tacl__topo_view_t v = suite_view(lay, r);
        tacl__coll_args_t a = args_of(c, NULL);
        size_t es = tacl_dtype_size(c->dtype);
        char *send = calloc(send_elems(c) * es + 1, 1);
        char *recv = calloc(recv_elems(c) * es + 1, 1);
        tacl__sched_t s;
        tacl_status_t st;

        a.sendbuf = send;
        a.recvbuf = recv;
        tacl__sched_init(&s, r, lay->n);
        if (flat != NULL) {
            a.qbits = 0;
            st = flat->build(&s, &a, &v);
        } else {
            st = spec_build(&s, &a, &v, c->spec, NULL);
        }
        cr_assert_eq(st, TACL_OK, "build failed: %s", tacl__last_error());
        total += suite_inter_bytes(&s, lay->node_of);
        tacl__sched_fini(&s);
        free(send);
        free(recv);
    }
    return total;
}

/*
 * qgZ at 4 bits sends each rank's g - 1 quantized partials between nodes:
 * p (g - 1) quant_bytes(count) in all (per chunk), against a float16
 * ring's (p - 1) blocks of 2 count bytes out of every node; at most a
 * quarter of it plus the scales (and half a byte per odd message).
 */
Test(quant_bytes, qgz_inter_node_quarter_of_fp16_ring)
{
    static const int multi[] = {1, 2, 3, 4};
    const tacl__algo_t *ring =
        tacl__algo_find(TACL_COLL_REDUCE_SCATTER, "ring");
    size_t li, ci;

    for (li = 0; li < 4; li++)
        for (ci = 0; ci < 2; ci++) {
            const layout_t *lay = &layouts[multi[li]];
            cfg_t c = {lay, TACL_COLL_REDUCE_SCATTER, ci ? 4099 : 1001,
                       TACL_FLOAT16, 4, 64, TACL_SUM, 0, 1024, NULL};
            tacl__coll_args_t a = args_of(&c, NULL);
            uint64_t p = (uint64_t)lay->n, g = (uint64_t)lay->n_nodes;
            uint64_t q = inter_bytes(lay, &c, NULL);
            uint64_t f = inter_bytes(lay, &c, ring), want = 0, over = 0;
            size_t cs;
            uint32_t nch, k;

            tacl__qgz_grid(&a, &cs, &nch);
            cr_assert_gt(nch, 1, "%s: one chunk", lay->name);
            for (k = 0; k < nch; k++) {
                size_t len = tacl__chunk_len(c.count, cs, k);

                want += p * (g - 1) * tacl__quant_bytes(len, 64, 4);
                over += p * (g - 1) * (4 * TACL_DIV_UP(len, 64) + 1);
            }
            cr_expect_eq(q, want, "qgz on %s: %llu inter-node bytes, "
                         "formula %llu", lay->name, (unsigned long long)q,
                         (unsigned long long)want);
            cr_expect_leq(q, f / 4 + over, "qgz on %s: %llu inter-node "
                          "bytes, float16 ring %llu", lay->name,
                          (unsigned long long)q, (unsigned long long)f);
            cr_expect_lt(q, f / 3, "qgz on %s: %llu vs ring %llu",
                         lay->name, (unsigned long long)q,
                         (unsigned long long)f);
        }
}

/*
 * qwZ at 8 bits over the ring moves the ring's blocks, each
 * quant_bytes(count) instead of 2 count bytes: half a float16 ring's
 * bytes plus a 4-byte scale per block of 64.
 */
Test(quant_bytes, qwz_inter_node_half_of_fp16_ring)
{
    static const int multi[] = {1, 2, 3, 4};
    const tacl__algo_t *ring = tacl__algo_find(TACL_COLL_ALLGATHER, "ring");
    size_t li;

    for (li = 0; li < 4; li++) {
        const layout_t *lay = &layouts[multi[li]];
        cfg_t c = {lay, TACL_COLL_ALLGATHER, 1001, TACL_FLOAT16, 8, 64,
                   TACL_SUM, 0, 1024, "allgather=ring"};
        uint64_t q = inter_bytes(lay, &c, NULL);
        uint64_t f = inter_bytes(lay, &c, ring);
        uint64_t qb = tacl__quant_bytes(c.count, 64, 8);

        cr_assert_gt(f, 0);
        cr_expect_eq(q * 2 * c.count, f * qb, "qwz on %s: %llu inter-node "
                     "bytes, float16 ring %llu", lay->name,
                     (unsigned long long)q, (unsigned long long)f);
        cr_expect_leq(q, f / 2 + f / 2 * 4 * TACL_DIV_UP(c.count, 64) /
                                     c.count + 1,
                      "qwz on %s: %llu vs ring %llu", lay->name,
                      (unsigned long long)q, (unsigned long long)f);
    }
}

/* The chunk a message of qgZ belongs to: its tag numbers 2 per chunk. */
static uint32_t msg_chunk(const tacl__step_t *st)
{
    return (uint32_t)((st->tag & ((1ull << TACL__TAG_STEP_BITS) - 1)) / 2);
}

/* Marks in anc every step id transitively depends on. */
static void ancestors(const tacl__sched_t *s, uint32_t id, uint8_t *anc)
{
    const uint32_t *deps = tacl__sched_deps(s, id);
    uint32_t d;

    for (d = 0; d < s->steps[id].ndeps; d++)
        if (!anc[deps[d]]) {
            anc[deps[d]] = 1;
            ancestors(s, deps[d], anc);
        }
}

/*
 * Section 4.1.2's pipeline: on every rank, the first inter-node send of
 * chunk 0 depends on no message of another chunk, so it can go while
 * chunk 1's intra-node hop runs; and chunk 1 has intra-node messages.
 */
Test(quant_pipeline, qgz_chunks_overlap)
{
    static const int multi[] = {1, 3, 4};
    size_t li;

    for (li = 0; li < 3; li++) {
        const layout_t *lay = &layouts[multi[li]];
        cfg_t c = {lay, TACL_COLL_REDUCE_SCATTER, 1001, TACL_FLOAT32, 4, 64,
                   TACL_SUM, 0, 512, NULL};
        int r;

        for (r = 0; r < lay->n; r++) {
            tacl__topo_view_t v = suite_view(lay, r);
            tacl__coll_args_t a = args_of(&c, NULL);
            char *send = calloc(send_elems(&c) * 4, 1);
            char *recv = calloc(recv_elems(&c) * 4, 1);
            int intra1 = 0, me = lay->node_of[r];
            uint8_t *anc;
            tacl__sched_t s;
            uint32_t j, first = UINT32_MAX;

            a.sendbuf = send;
            a.recvbuf = recv;
            tacl__sched_init(&s, r, lay->n);
            cr_assert_eq(spec_build(&s, &a, &v, NULL, NULL), TACL_OK);
            for (j = 0; j < s.nsteps; j++) {
                const tacl__step_t *t = &s.steps[j];
                int msg = t->kind == TACL__STEP_SEND ||
                          t->kind == TACL__STEP_RECV;

                if (msg && lay->node_of[t->peer] == me && msg_chunk(t) == 1)
                    intra1++;
                if (first == UINT32_MAX && t->kind == TACL__STEP_SEND &&
                    lay->node_of[t->peer] != me && msg_chunk(t) == 0)
                    first = j;
            }
            cr_assert_neq(first, UINT32_MAX, "%s rank %d: no inter-node "
                          "send of chunk 0", lay->name, r);
            cr_assert_gt(intra1, 0, "%s rank %d: chunk 1 has no intra-node "
                         "messages", lay->name, r);
            anc = calloc(s.nsteps, 1);
            ancestors(&s, first, anc);
            for (j = 0; j < s.nsteps; j++) {
                const tacl__step_t *t = &s.steps[j];

                if (anc[j] && (t->kind == TACL__STEP_SEND ||
                               t->kind == TACL__STEP_RECV))
                    cr_assert_eq(msg_chunk(t), 0, "%s rank %d: the first "
                                 "inter-node send waits for a message of "
                                 "chunk %u", lay->name, r, msg_chunk(t));
                if (anc[j] && t->kind == TACL__STEP_QUANT)
                    cr_assert_lt(t->src.off % (c.count * 4), 512,
                                 "%s rank %d: the first inter-node send "
                                 "waits for a later chunk's quantization",
                                 lay->name, r);
            }
            free(anc);
            tacl__sched_fini(&s);
            free(send);
            free(recv);
        }
    }
}

/*
 * The slice reordering helper: for every rank, a bijection of the other
 * local peers' slices onto the send slots, each peer's g slices one
 * contiguous run in node order; with the own group put back it is the
 * paper's Equation 2 (position l * g + m holds slice m * k + l).
 */
Test(quant_pipeline, slice_reordering)
{
    static const int shapes[][2] = {{2, 2}, {3, 3}, {4, 2}, {2, 5}, {1, 4}};
    size_t si;

    for (si = 0; si < sizeof(shapes) / sizeof(shapes[0]); si++) {
        int g = shapes[si][0], k = shapes[si][1], l, dm, dl;

        for (l = 0; l < k; l++) {
            int *seen = calloc((size_t)(g * k), sizeof(int));

            for (dl = 0; dl < k; dl++)
                for (dm = 0; dm < g; dm++) {
                    int slot = tacl__qgz_slot(dm, dl, l, g);

                    if (dl == l) {
                        cr_assert_eq(slot, -1);
                        continue;
                    }
                    cr_assert(slot >= 0 && slot < (k - 1) * g);
                    cr_assert_eq(seen[slot]++, 0, "slot %d twice", slot);
                    cr_assert_eq(slot - tacl__qgz_slot(0, dl, l, g), dm);
                    cr_assert_eq(slot + (dl > l ? g : 0), dl * g + dm);
                }
            free(seen);
        }
    }
}

Test(quant_algos, rejects_what_it_cannot_build)
{
    const layout_t *lay = &layouts[1];
    tacl__topo_view_t v = suite_view(lay, 0);
    cfg_t c = {lay, TACL_COLL_ALLGATHER, 16, TACL_FLOAT32, 3, 64, TACL_SUM,
               0, 0, NULL};
    tacl__coll_args_t a = args_of(&c, NULL);
    const tacl__algo_t *algo = NULL;
    float send[64], recv[64];
    tacl__sched_t s;

    a.sendbuf = send;
    a.recvbuf = recv;
    tacl__sched_init(&s, 0, lay->n);
    cr_assert_neq(spec_build(&s, &a, &v, NULL, &algo), TACL_OK);
    cr_assert_null(algo);
    a.qbits = 8;
    a.type = TACL_COLL_ALLREDUCE;
    cr_assert_eq(spec_build(&s, &a, &v, NULL, &algo),
                 TACL_ERR_UNSUPPORTED);
    cr_assert_null(algo);
    tacl__sched_fini(&s);
}
