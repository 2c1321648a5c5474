/*
 * The hierarchical algorithms (MiCS, H-Ring, HO-Ring, hierarchical
 * all-reduce) and the topology-aware tuner, checked without a transport.
 *
 * Every rank's schedule is built through the tuner with the algorithm
 * forced, on regular layouts (2x2, 4x2, PaRO Figure 4's 3x3), on ranks
 * not numbered node by node, and on an unequal 2+1 layout where the
 * tuner must fall back; simrun runs them all together and the results
 * must be exact, every output byte written once, inputs untouched.
 * Byte counters sum the SEND steps whose peer is on another node and
 * compare each node's uplink traffic with the papers' formulas.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hier.h"
#include "log.h"
#include "suite.h"
#include "spec.h"

typedef suite_layout_t layout_t;

static const layout_t layouts[] = {
    {"2x2", 4, 2, {0, 0, 1, 1}, 1},
    {"4x2", 8, 4, {0, 0, 1, 1, 2, 2, 3, 3}, 1},
    {"3x3", 9, 3, {0, 0, 0, 1, 1, 1, 2, 2, 2}, 1},
    {"2+1", 3, 2, {0, 0, 1}, 0},
    {"alternating 2x2", 4, 2, {0, 1, 0, 1}, 1},
    {"alternating 3x2", 6, 3, {0, 1, 2, 0, 1, 2}, 1},
};
#define NLAYOUTS ((int)(sizeof(layouts) / sizeof(layouts[0])))

typedef struct {
    const layout_t *lay;
    tacl_coll_t coll;
    const char *algo;
    size_t count;
    int in_place;
    tacl_dtype_t dtype;
    tacl_op_t op;
    uint64_t chunk;
} cfg_t;

typedef simrun_bufs_t rbufs_t;

/* What every rank of c runs. */
static suite_op_t op_of(const cfg_t *c)
{
    suite_op_t op = {c->coll, c->lay->n, c->count, c->dtype, c->op, 0,
                     c->in_place, c->chunk, 0, 0};

    return op;
}

static void cfg_str(const cfg_t *c, char *buf, size_t len)
{
    snprintf(buf, len, "%s/%s on %s count=%zu %s %s %s chunk=%llu",
             tacl_coll_name(c->coll), c->algo, c->lay->name, c->count,
             c->in_place ? "in-place" : "out-of-place",
             tacl_dtype_name(c->dtype), tacl_op_name(c->op),
             (unsigned long long)c->chunk);
}

/* Input element i of rank q: small integers, exact in every dtype. */
static long long gen(int q, size_t i)
{
    return (long long)(((size_t)q * 131 + i * 7) % 9) - 4;
}

static void put(tacl_dtype_t dt, void *buf, size_t i, long long v)
{
    if (dt == TACL_INT32)
        ((int32_t *)buf)[i] = (int32_t)v;
    else if (dt == TACL_INT8)
        ((int8_t *)buf)[i] = (int8_t)v;
    else
        ((float *)buf)[i] = (float)v;
}

static void reference(const cfg_t *c, size_t i, void *dst, size_t j)
{
    long long acc = gen(0, i);
    int q, n = c->lay->n;

    for (q = 1; q < n; q++) {
        long long v = gen(q, i);

        acc = c->op == TACL_MAX ? (v > acc ? v : acc) : acc + v;
    }
    if (c->op == TACL_AVG && c->dtype == TACL_FLOAT32) {
        ((float *)dst)[j] = (float)acc / (float)n;
        return;
    }
    if (c->op == TACL_AVG)
        acc /= n;
    put(c->dtype, dst, j, acc);
}

static void fill(const void *ctx, int r, void *send, size_t n)
{
    const cfg_t *c = ctx;

    for (size_t i = 0; i < n; i++)
        put(c->dtype, send, i, gen(r, i));
}

static void expected(const cfg_t *c, int r, char *exp)
{
    size_t n = (size_t)c->lay->n, i, j, cnt = c->count;

    if (c->coll == TACL_COLL_ALLGATHER) {
        for (j = 0; j < n; j++)
            for (i = 0; i < cnt; i++)
                put(c->dtype, exp, j * cnt + i, gen((int)j, i));
    } else if (c->coll == TACL_COLL_REDUCE_SCATTER) {
        for (i = 0; i < cnt; i++)
            reference(c, (size_t)r * cnt + i, exp, i);
    } else {
        for (i = 0; i < cnt; i++)
            reference(c, i, exp, i);
    }
}

static tacl__coll_args_t args_of(const cfg_t *c, const rbufs_t *b,
                                 uint64_t seq)
{
    suite_op_t op = op_of(c);

    return suite_args(&op, b, seq);
}

/* The algorithm the tuner runs for c with c->algo forced. */
static const tacl__algo_t *forced_pick(const cfg_t *c, int r,
                                       const tacl__coll_args_t *a)
{
    tacl__topo_view_t v = suite_view(c->lay, r);
    char spec[64];

    snprintf(spec, sizeof(spec), "%s=%s", tacl_coll_name(c->coll),
             c->algo);
    return tacl__algo_select(a, &v, spec_row(spec, a));
}

/*
 * Rank r's buffers and its schedule, built by the algorithm the tuner
 * runs with c->algo forced: c->algo itself on a regular layout, another
 * on an unequal one (where, built directly, c->algo falls back by itself).
 */
static void build_rank(const void *cfg, simrun_t *sr, int r, rbufs_t *b,
                       uint64_t seq, const char *name)
{
    const cfg_t *c = cfg;
    suite_op_t op = op_of(c);
    tacl__topo_view_t v = suite_view(c->lay, r);
    const tacl__algo_t *algo;
    tacl__coll_args_t a;
    tacl_status_t st;

    suite_bufs(sr, &op, r, b, fill, c);
    a = suite_args(&op, b, seq);
    algo = forced_pick(c, r, &a);
    cr_assert_not_null(algo, "%s: no algorithm", name);
    if (!c->lay->regular && c->in_place) {
        algo = tacl__algo_find(c->coll, c->algo);
        cr_assert_not(algo->supports(&a, &v), "%s: supported", name);
    } else if (c->lay->regular)
        cr_assert_str_eq(algo->name, c->algo, "%s: tuner chose %s", name,
                         algo->name);
    else
        cr_assert_str_neq(algo->name, c->algo,
                          "%s: unequal layout not refused", name);
    st = algo->build(simrun_sched(sr, r), &a, &v);
    cr_assert_eq(st, TACL_OK, "%s: rank %d build failed: %s", name, r,
                 tacl__last_error());
}

/* In place, an all-gather's own block is right before it starts. */
static int own_block(const void *cfg, int r, size_t k)
{
    const cfg_t *c = cfg;

    return c->in_place && c->coll == TACL_COLL_ALLGATHER &&
           k / (c->count * tacl_dtype_size(c->dtype)) == (size_t)r;
}

static void check_rank(const void *cfg, simrun_t *sr, int r,
                       const rbufs_t *b, const char *name)
{
    const cfg_t *c = cfg;
    suite_op_t op = op_of(c);
    char *exp = malloc(b->out_bytes + 1);

    cr_assert_not_null(exp);
    expected(c, r, exp);
    suite_check_output(b, r, exp, name);
    suite_check_writes(sr, &op, r, b, own_block, c, name);
    free(exp);
}

static const suite_t hier_suite = {build_rank, check_rank};

static void run_cfg(const cfg_t *c, unsigned seed)
{
    char name[200];

    cfg_str(c, name, sizeof(name));
    suite_run(&hier_suite, c, c->lay->n, 100 + seed, seed, name);
}

/* The matrix of one algorithm of one collective over every layout. */
static void run_matrix(tacl_coll_t coll, const char *algo)
{
    static const size_t counts[] = {0, 1, 7, 1000, 65537};
    static const tacl_dtype_t dtypes[] = {TACL_INT32, TACL_FLOAT32,
                                          TACL_INT8};
    static const tacl_op_t ops[] = {TACL_SUM, TACL_AVG, TACL_MAX};
    int nops = coll == TACL_COLL_ALLGATHER ? 1 : 3, li, oi, ip;
    size_t ci, di;
    unsigned seed = 1;

    for (li = 0; li < NLAYOUTS; li++)
        for (ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++)
            for (di = 0; di < 3; di++)
                for (oi = 0; oi < nops; oi++)
                    for (ip = 0; ip < 2; ip++) {
                        cfg_t c = {&layouts[li], coll, algo, counts[ci], ip,
                                   dtypes[di], ops[oi], 256};

                        /* The large count: big chunks, and not every
                         * combination, to keep the run short. */
                        if (counts[ci] == 65537) {
                            if (di != (size_t)(li % 3) ||
                                oi != ip % nops)
                                continue;
                            c.chunk = 1 << 16;
                        }
                        run_cfg(&c, seed++);
                    }
}

Test(hier, mics_allgather) { run_matrix(TACL_COLL_ALLGATHER, "mics"); }
Test(hier, mics_reduce_scatter)
{
    run_matrix(TACL_COLL_REDUCE_SCATTER, "mics");
}
Test(hier, hring_allgather) { run_matrix(TACL_COLL_ALLGATHER, "hring"); }
Test(hier, hring_reduce_scatter)
{
    run_matrix(TACL_COLL_REDUCE_SCATTER, "hring");
}
Test(hier, horing_allgather) { run_matrix(TACL_COLL_ALLGATHER, "horing"); }
Test(hier, horing_reduce_scatter)
{
    run_matrix(TACL_COLL_REDUCE_SCATTER, "horing");
}
Test(hier, hier_allreduce) { run_matrix(TACL_COLL_ALLREDUCE, "hier"); }

/*
 * Byte counters: the bytes of the SEND steps of every rank of node m
 * whose peer is on another node, i.e. what node m's uplink carries.
 */
static void uplink_bytes(const layout_t *lay, const cfg_t *c,
                         const char *algo_name, uint64_t *per_node)
{
    suite_op_t op = op_of(c);
    int r, m;

    for (m = 0; m < lay->n_nodes; m++)
        per_node[m] = 0;
    for (r = 0; r < lay->n; r++) {
        tacl__topo_view_t v = suite_view(lay, r);
        const tacl__algo_t *algo = tacl__algo_find(c->coll, algo_name);
        rbufs_t b;
        tacl__coll_args_t a;
        tacl__sched_t s;

        simrun_bufs_alloc(&b, c->coll, r, 0,
                          simrun_send_elems(c->coll, c->count, lay->n) *
                              tacl_dtype_size(c->dtype),
                          simrun_recv_elems(c->coll, c->count, lay->n) *
                              tacl_dtype_size(c->dtype), 1, 1);
        a = suite_args(&op, &b, 1);
        cr_assert_not_null(algo);
        cr_assert(algo->supports(&a, &v), "%s does not support %s",
                  algo_name, lay->name);
        tacl__sched_init(&s, r, lay->n);
        cr_assert_eq(algo->build(&s, &a, &v), TACL_OK);
        per_node[lay->node_of[r]] += suite_inter_bytes(&s, lay->node_of);
        tacl__sched_fini(&s);
        simrun_bufs_free(&b);
    }
}

/* Layouts numbered node by node, where a flat ring crosses once. */
static const int contiguous[] = {0, 1, 2};

Test(hier_bytes, allgather_and_reduce_scatter_uplinks)
{
    static const char *const hier_algos[] = {"mics", "hring", "horing"};
    static const tacl_coll_t colls[] = {TACL_COLL_ALLGATHER,
                                              TACL_COLL_REDUCE_SCATTER};
    uint64_t up[9];
    size_t ci, ai, li;

    for (li = 0; li < 3; li++)
        for (ci = 0; ci < 2; ci++) {
            const layout_t *lay = &layouts[contiguous[li]];
            uint64_t p = (uint64_t)lay->n, g = (uint64_t)lay->n_nodes;
            uint64_t k = p / g, count = 1001, es = 4;
            /* M: the whole output of all-gather, the whole input of
             * reduce-scatter; p blocks of count elements. */
            uint64_t M = p * count * es;
            cfg_t c = {lay, colls[ci], "ring", count, 0, TACL_INT32,
                       TACL_SUM, 1 << 12};
            int m;

            /* Flat ring: each node's last rank sends every block but
             * the one it receives last through the uplink: (p-1) M / p
             * (MiCS section 3.3). */
            uplink_bytes(lay, &c, "ring", up);
            for (m = 0; m < lay->n_nodes; m++)
                cr_expect_eq(up[m], (p - 1) * M / p,
                             "ring %s on %s: node %d sent %llu",
                             tacl_coll_name(c.coll), lay->name, m,
                             (unsigned long long)up[m]);
            for (ai = 0; ai < 3; ai++) {
                /* Hierarchical: each of the k ranks sends g - 1 blocks
                 * along its rail: k (g-1) M / p = (p - k) M / p. */
                uplink_bytes(lay, &c, hier_algos[ai], up);
                for (m = 0; m < lay->n_nodes; m++)
                    cr_expect_eq(up[m], (p - k) * M / p,
                                 "%s %s on %s: node %d sent %llu, "
                                 "expected (p-k)M/p = %llu",
                                 hier_algos[ai], tacl_coll_name(c.coll),
                                 lay->name, m, (unsigned long long)up[m],
                                 (unsigned long long)((p - k) * M / p));
            }
        }
}

Test(hier_bytes, allreduce_uplinks)
{
    static const size_t counts[] = {7 * 9 * 8 * 5, 1001};
    uint64_t up[9];
    size_t li, ci;

    for (li = 0; li < 3; li++)
        for (ci = 0; ci < 2; ci++) {
            const layout_t *lay = &layouts[contiguous[li]];
            int p = lay->n, g = lay->n_nodes, k = p / g, m, l;
            uint64_t es = 4, M = counts[ci] * es;
            cfg_t c = {lay, TACL_COLL_ALLREDUCE, "hier", counts[ci], 0,
                       TACL_FLOAT32, TACL_SUM, 1 << 12};

            uplink_bytes(lay, &c, "hier", up);
            for (m = 0; m < g; m++) {
                /* Rank (m, l) sends along its rail every piece (m', l)
                 * of shard l but its own in the reduce-scatter, and all
                 * but piece (m + 1, l) in the all-gather: summed over l,
                 * 2M minus node m's and node m+1's pieces, which is
                 * 2 (g-1) M / g when the pieces are equal. */
                uint64_t want = 2 * M, off, cnt;

                for (l = 0; l < k; l++) {
                    tacl__block_range(counts[ci], p, l * g + m, &off, &cnt);
                    want -= cnt * es;
                    tacl__block_range(counts[ci], p, l * g + (m + 1) % g,
                                      &off, &cnt);
                    want -= cnt * es;
                }
                cr_expect_eq(up[m], want, "hier allreduce on %s count %zu: "
                             "node %d sent %llu, expected %llu", lay->name,
                             counts[ci], m, (unsigned long long)up[m],
                             (unsigned long long)want);
                if (counts[ci] % (size_t)p == 0)
                    cr_expect_eq(up[m], 2 * (uint64_t)(g - 1) * M / g);
            }
            /* The flat ring all-reduce: 2 (p-1) M / p out of each node
             * (count divisible by p: equal blocks). */
            if (counts[ci] % (size_t)p == 0) {
                uplink_bytes(lay, &c, "ring", up);
                for (m = 0; m < g; m++)
                    cr_expect_eq(up[m], 2 * (uint64_t)(p - 1) * M / p);
            }
        }
}

/*
 * The tuner, with a 10 GB/s host link and a 1 Gbit/s network.
 */
static const char *tuned(const layout_t *lay, tacl_coll_t coll,
                         size_t bytes, const char *spec)
{
    cfg_t c = {lay, coll, "", 0, 0, TACL_FLOAT32, TACL_SUM, 1 << 20};
    tacl__topo_view_t v = suite_view(lay, 0);
    tacl__coll_args_t a;
    const tacl__algo_t *algo;

    c.count = bytes / 4 / (coll == TACL_COLL_ALLREDUCE ? 1 : lay->n);
    a = args_of(&c, NULL, 1);
    algo = tacl__algo_select(&a, &v, spec_row(spec, &a));
    cr_assert_not_null(algo);
    return algo->name;
}

static int is_hier(const char *name)
{
    return strcmp(name, "mics") == 0 || strcmp(name, "hring") == 0 ||
           strcmp(name, "horing") == 0 || strcmp(name, "hier") == 0;
}

Test(hier_tune, large_collectives_go_hierarchical)
{
    static const size_t sizes[] = {16u << 20, 64u << 20, 256u << 20};
    size_t li, si;

    for (li = 0; li < 2; li++)
        for (si = 0; si < 3; si++) {
            const layout_t *lay = &layouts[li];
            const char *ag = tuned(lay, TACL_COLL_ALLGATHER, sizes[si],
                                   NULL);
            const char *rs = tuned(lay, TACL_COLL_REDUCE_SCATTER,
                                   sizes[si], NULL);
            const char *ar = tuned(lay, TACL_COLL_ALLREDUCE, sizes[si],
                                   NULL);

            cr_expect(strcmp(ag, "mics") == 0 || strcmp(ag, "horing") == 0,
                      "allgather of %zu bytes on %s chose %s", sizes[si],
                      lay->name, ag);
            cr_expect(is_hier(rs), "reducescatter of %zu bytes on %s "
                      "chose %s", sizes[si], lay->name, rs);
            cr_expect_str_eq(ar, "hier", "allreduce of %zu bytes on %s",
                             sizes[si], lay->name);
        }
}

Test(hier_tune, spec_is_honoured)
{
    const char *spec = "allgather=horing,reducescatter=mics";
    int li;

    for (li = 0; li < 3; li++) {
        cr_expect_str_eq(tuned(&layouts[li], TACL_COLL_ALLGATHER, 64 << 20,
                               spec), "horing");
        cr_expect_str_eq(tuned(&layouts[li], TACL_COLL_REDUCE_SCATTER,
                               64 << 20, spec), "mics");
        cr_expect_str_eq(tuned(&layouts[li], TACL_COLL_ALLGATHER, 64 << 20,
                               "allgather=hring"), "hring");
        cr_expect_str_eq(tuned(&layouts[li], TACL_COLL_ALLREDUCE, 64 << 20,
                               "allreduce=ring"), "ring");
    }
}

Test(hier_tune, unequal_layout_falls_back_to_ring)
{
    const layout_t *lay = &layouts[3];
    tacl__topo_view_t v = suite_view(lay, 0);
    tacl__coll_args_t a = {0};
    const char *name;

    cr_assert_str_eq(lay->name, "2+1");
    name = tuned(lay, TACL_COLL_ALLGATHER, 64 << 20, "allgather=mics");
    cr_expect_str_eq(name, "ring");
    name = tuned(lay, TACL_COLL_REDUCE_SCATTER, 64 << 20,
                 "reducescatter=horing");
    cr_expect_str_eq(name, "ring");
    name = tuned(lay, TACL_COLL_ALLREDUCE, 64 << 20, "allreduce=hier");
    cr_expect_str_eq(name, "ring");
    /* And nothing hierarchical supports it, nor one node, nor k = 1. */
    a.type = TACL_COLL_ALLGATHER;
    cr_expect_not(tacl__mics_supports(&a, &v));
    v = suite_view(&layouts[0], 0);
    v.n_nodes = 1;
    cr_expect_not(tacl__mics_supports(&a, &v));
    v.node_of = NULL;
    cr_expect_not(
        tacl__algo_row(TACL__ALGO_HORING, TACL_COLL_ALLGATHER)->supports(&a,
                                                                        &v));
}

Test(hier_tune, ring_cost_sees_shared_uplinks)
{
    tacl__topo_view_t contig = suite_view(&layouts[0], 0);
    tacl__topo_view_t alt = suite_view(&layouts[4], 0);
    cfg_t c = {&layouts[0], TACL_COLL_ALLGATHER, "", 1 << 20, 0,
               TACL_FLOAT32, TACL_SUM, 1 << 20};
    tacl__coll_args_t a = args_of(&c, NULL, 1);

    /* Alternating nodes: every ring edge crosses, two per node's one
     * NIC. */
    cr_expect_gt(tacl__ring_cost(&a, &alt, 10e-6, 1 / 1.25e9),
                 1.9 * tacl__ring_cost(&a, &contig, 10e-6, 1 / 1.25e9));
    /* A NIC per rank: each edge out has a port of its own. */
    contig.nics = alt.nics = 2;
    contig.nic_bw = alt.nic_bw = 1.25;
    cr_expect_float_eq(tacl__ring_cost(&a, &alt, 10e-6, 1 / 1.25e9),
                       tacl__ring_cost(&a, &contig, 10e-6, 1 / 1.25e9),
                       1e-9);
}

Test(hier_helpers, member_lists_and_rails)
{
    const layout_t *lay = &layouts[5]; /* node_of = {0,1,2,0,1,2} */
    tacl__topo_view_t v = suite_view(lay, 4);
    tacl__hier_t h;
    int rail[3];

    cr_assert_eq(tacl__hier_init(&h, &v), TACL_OK);
    cr_expect(h.regular);
    cr_expect_eq(h.k, 2);
    cr_expect_eq(tacl__hier_rank(&h, 0, 1), 3);
    cr_expect_eq(tacl__hier_rank(&h, 2, 0), 2);
    cr_expect_eq(h.local[4], 1);
    tacl__hier_rail(&h, 1, rail);
    cr_expect_eq(rail[0], 3);
    cr_expect_eq(rail[1], 4);
    cr_expect_eq(rail[2], 5);
    tacl__hier_fini(&h);
    v = suite_view(&layouts[3], 0);
    cr_assert_eq(tacl__hier_init(&h, &v), TACL_OK);
    cr_expect_not(h.regular);
    cr_expect_eq(tacl__hier_node_size(&h, 1), 1);
    tacl__hier_fini(&h);
}
