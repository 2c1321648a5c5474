/*
 * Snapshot placement (algorithms/placement.h) against the thesis' section
 * 6.4: Theorem 6.1 and Corollary 6.1 checked by exact counting for N up
 * to 16 and m = 2, 3; optimality checked against every placement where
 * that is small enough to enumerate; group never worse than ring; and
 * Figure 6.9's N = 16, m = 2, k = 3 settled (80.0% against 62.9%).
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>

#include "placement.h"

#define PARTITION_SPANS 8

static double recovery(const tacl__placement_t *p, int k)
{
    uint64_t ok, total;

    cr_assert_eq(tacl__place_recovery(p, k, &ok, &total), TACL_OK);
    cr_assert_eq((double)total, tacl__place_choose(p->units, k));
    return (double)ok / (double)total;
}

static double recovery_of(int n, int m, tacl__place_kind_t kind, int k)
{
    tacl__placement_t p;
    double r;

    cr_assert_eq(tacl__place_build(n, m, kind, &p), TACL_OK, "n %d m %d %s",
                 n, m, tacl__place_kind_name(kind));
    r = recovery(&p, k);
    tacl__place_free(&p);
    return r;
}

/* Every unit holds its own copy first, and m distinct units hold each. */
Test(placement, shape)
{
    for (int n = 1; n <= 16; n++)
        for (int m = 1; m <= 3 && m <= n; m++)
            for (int kind = TACL__PLACE_AUTO; kind <= TACL__PLACE_MIXED;
                 kind++) {
                tacl__placement_t p;
                int *load = calloc((size_t)n, sizeof(int));

                if (kind == TACL__PLACE_GROUP && n % m != 0) {
                    cr_assert_eq(tacl__place_build(n, m, kind, &p),
                                 TACL_ERR_INVALID_ARG);
                    free(load);
                    continue;
                }
                cr_assert_eq(tacl__place_build(n, m, kind, &p), TACL_OK);
                cr_assert_neq(p.kind, TACL__PLACE_AUTO);
                for (int u = 0; u < n; u++) {
                    const int *h = tacl__place_holders(&p, u);

                    cr_assert_eq(h[0], u);
                    for (int j = 0; j < m; j++) {
                        cr_assert(h[j] >= 0 && h[j] < n);
                        load[h[j]]++;
                        for (int i = 0; i < j; i++)
                            cr_assert_neq(h[i], h[j], "n %d m %d u %d", n, m,
                                          u);
                    }
                }
                /* Every unit receives as many copies as it sends. */
                for (int u = 0; u < n; u++)
                    cr_assert_eq(load[u], m, "n %d m %d %s unit %d", n, m,
                                 tacl__place_kind_name(p.kind), u);
                tacl__place_free(&p);
                free(load);
            }
    cr_assert_eq(tacl__place_build(2, 3, TACL__PLACE_AUTO,
                                   &(tacl__placement_t){0}),
                 TACL_ERR_INVALID_ARG);
}

/* Corollary 6.1: exact for k < 2m, a lower bound beyond; and the
 * inclusion-exclusion count of group placement matches at every k. */
Test(placement, corollary_6_1)
{
    for (int m = 2; m <= 3; m++)
        for (int n = m; n <= 16; n += m)
            for (int k = 0; k <= n; k++) {
                double got = recovery_of(n, m, TACL__PLACE_GROUP, k);
                double cor = tacl__place_corollary(n, m, k);
                double fatal = 0;

                if (k < 2 * m)
                    cr_assert(fabs(got - cor) < 1e-12,
                              "n %d m %d k %d: %.15f vs %.15f", n, m, k, got,
                              cor);
                else
                    cr_assert(got >= cor - 1e-12, "n %d m %d k %d", n, m, k);
                for (int j = 1; j * m <= k && j <= n / m; j++)
                    fatal += (j % 2 ? 1 : -1) * tacl__place_choose(n / m, j) *
                             tacl__place_choose(n - j * m, k - j * m);
                cr_assert(fabs(got - (1 - fatal / tacl__place_choose(n, k))) <
                              1e-12,
                          "n %d m %d k %d", n, m, k);
            }
}

/* Theorem 6.1: group reaches the bound when m divides N; mixed stays
 * within (2m - 3)/C(N, m) of it otherwise; nothing exceeds it. */
Test(placement, theorem_6_1)
{
    for (int m = 2; m <= 3; m++)
        for (int n = m + 1; n <= 16; n++) {
            double bound = tacl__place_upper_bound(n, m);
            double mixed = recovery_of(n, m, TACL__PLACE_AUTO, m);
            double ring = recovery_of(n, m, TACL__PLACE_RING, m);

            cr_assert(mixed <= bound + 1e-12 && ring <= bound + 1e-12);
            if (n % m == 0)
                cr_assert(fabs(mixed - bound) < 1e-12, "n %d m %d", n, m);
            else
                cr_assert(bound - mixed <=
                              (2 * m - 3) / tacl__place_choose(n, m) + 1e-12,
                          "n %d m %d: mixed %.6f bound %.6f", n, m, mixed,
                          bound);
        }
}

/* Every placement with one own copy of n units and m copies, counted
 * exactly: the best recovery at k = m. */
static double best_of_all(int n, int m)
{
    int others[64][2], nopt = 0, choice[8] = {0};
    double best = 0;
    tacl__placement_t p = {.units = n, .m = m, .kind = TACL__PLACE_RING};

    p.holders = malloc((size_t)n * (size_t)m * sizeof(int));
    for (int a = 0; a < n; a++)
        for (int b = m == 3 ? a + 1 : a; b < n; b++)
            if (m == 2 || a != b) {
                others[nopt][0] = a;
                others[nopt][1] = b;
                nopt++;
            }
    for (;;) {
        int valid = 1, u;

        for (u = 0; u < n; u++) {
            const int *o = others[choice[u]];

            p.holders[u * m] = u;
            p.holders[u * m + 1] = o[0];
            if (m == 3)
                p.holders[u * m + 2] = o[1];
            valid &= o[0] != u && (m == 2 || o[1] != u);
        }
        if (valid) {
            double r = recovery(&p, m);
            best = r > best ? r : best;
        }
        for (u = 0; u < n && ++choice[u] == nopt; u++)
            choice[u] = 0;
        if (u == n)
            break;
    }
    free(p.holders);
    return best;
}

Test(placement, optimal_among_all_small)
{
    static const int cases[][2] = {{4, 2}, {5, 2}, {6, 2}, {5, 3}};

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int n = cases[i][0], m = cases[i][1];
        double best = best_of_all(n, m);
        double ours = recovery_of(n, m, TACL__PLACE_AUTO, m);

        cr_assert(best <= tacl__place_upper_bound(n, m) + 1e-12);
        if (n % m == 0)
            cr_assert(fabs(ours - best) < 1e-12, "n %d m %d", n, m);
        cr_assert(best - ours <=
                      (2 * m - 3) / tacl__place_choose(n, m) + 1e-12,
                  "n %d m %d: ours %.6f best %.6f", n, m, ours, best);
    }
}

/* Group beats ring at every k >= m (strictly while both can recover),
 * and is never worse at any k. */
Test(placement, group_beats_ring)
{
    for (int m = 2; m <= 3; m++)
        for (int n = 2 * m; n <= 16; n += m)
            for (int k = 0; k <= n; k++) {
                double g = recovery_of(n, m, TACL__PLACE_GROUP, k);
                double r = recovery_of(n, m, TACL__PLACE_RING, k);

                if (k < m)
                    cr_assert(g == 1 && r == 1);
                else if (r > 0)
                    cr_assert(g > r, "n %d m %d k %d: group %.6f ring %.6f",
                              n, m, k, g, r);
                else
                    cr_assert(g >= r);
            }
}

/* The thesis' Figure 6.9 settled: at N = 16, m = 2 it quotes 93.3% at
 * k = 2 and 80.0% at k = 3 for group, and ring 25.0 points below; exact
 * counting gives ring 62.9% (352 of 560), 17.1 points below. */
Test(placement, figure_6_9)
{
    tacl__placement_t g, r;
    uint64_t ok, total;

    cr_assert_eq(tacl__place_build(16, 2, TACL__PLACE_GROUP, &g), TACL_OK);
    cr_assert_eq(tacl__place_build(16, 2, TACL__PLACE_RING, &r), TACL_OK);
    cr_assert_eq(tacl__place_recovery(&g, 2, &ok, &total), TACL_OK);
    cr_assert_eq(ok, 112u);
    cr_assert_eq(total, 120u);
    cr_assert(fabs(100.0 * ok / total - 93.3) < 0.05);
    cr_assert_eq(tacl__place_recovery(&g, 3, &ok, &total), TACL_OK);
    cr_assert_eq(ok, 448u);
    cr_assert_eq(total, 560u);
    cr_assert(fabs(100.0 * ok / total - 80.0) < 0.05);
    cr_assert_eq(tacl__place_recovery(&r, 3, &ok, &total), TACL_OK);
    cr_assert_eq(ok, 352u);
    cr_assert(fabs(100.0 * ok / total - 62.9) < 0.05);
    cr_assert(fabs(100.0 * (448.0 - 352.0) / 560 - 17.1) < 0.05);
    tacl__place_free(&g);
    tacl__place_free(&r);
}

/* Node domain: every copy on another node, on the same rail. */
Test(placement, node_domain_rails)
{
    enum { NODES = 5, PER = 4, RANKS = NODES * PER };
    int node_of[RANKS], local_of[RANKS];

    for (int r = 0; r < RANKS; r++) {
        node_of[r] = r / PER;
        local_of[r] = r % PER;
    }
    for (int m = 2; m <= 3; m++)
        for (int kind = TACL__PLACE_AUTO; kind <= TACL__PLACE_MIXED; kind++) {
            tacl__placement_t p;

            if (kind == TACL__PLACE_GROUP)
                continue;
            cr_assert_eq(tacl__place_build(NODES, m, kind, &p), TACL_OK);
            for (int r = 0; r < RANKS; r++) {
                cr_assert_eq(tacl__place_rank_holder(&p, RANKS, node_of,
                                                     local_of, r, 0),
                             r);
                for (int j = 1; j < m; j++) {
                    int h = tacl__place_rank_holder(&p, RANKS, node_of,
                                                    local_of, r, j);

                    cr_assert(h >= 0);
                    cr_assert_neq(node_of[h], node_of[r],
                                  "rank %d copy %d on its own node", r, j);
                    cr_assert_eq(local_of[h], local_of[r]);
                }
            }
            tacl__place_free(&p);
        }
}

Test(placement, bad_arguments)
{
    tacl__placement_t p;
    uint64_t ok, total;

    cr_assert_eq(tacl__place_build(0, 1, TACL__PLACE_AUTO, &p),
                 TACL_ERR_INVALID_ARG);
    cr_assert_eq(tacl__place_build(6, 4, TACL__PLACE_GROUP, &p),
                 TACL_ERR_INVALID_ARG);
    cr_assert_eq(tacl__place_build(64, 2, TACL__PLACE_GROUP, &p), TACL_OK);
    cr_assert_eq(tacl__place_recovery(&p, 2, &ok, &total),
                 TACL_ERR_UNSUPPORTED);
    tacl__place_free(&p);
    cr_assert_eq(tacl__place_build(4, 2, TACL__PLACE_GROUP, &p), TACL_OK);
    cr_assert_eq(tacl__place_recovery(&p, 5, &ok, &total),
                 TACL_ERR_INVALID_ARG);
    tacl__place_free(&p);
}

/*
 * The thesis' Algorithm 6.2, worked by hand: a 100 MB/s link with 0.1 ms
 * of latency, parts of 256 KiB (f = 2.72144 ms), 0.9 of each span.
 */
static const tacl__partition_in_t link_in = {.copy_bytes = 1000000,
                                             .copies = 1,
                                             .part_bytes = 262144,
                                             .alpha_s = 1e-4,
                                             .bytes_per_s = 1e8,
                                             .mu = 0.9};

/* Within a byte: a span's cut partition is (rest - alpha) B, rounded. */
#define NEAR(a, b) (llabs((long long)(a) - (long long)(b)) <= 1)

Test(partition, spans_take_whole_parts_then_what_is_left_of_them)
{
    /* 9 ms: three parts (8.16 ms), then (0.836 - 0.1) ms = 73568 bytes;
     * 1.8 ms: the copy's last 140000; 45 ms: nothing left. */
    double spans[3] = {0.010, 0.002, 0.050};
    uint64_t b[3];

    cr_assert_eq(tacl__snap_partition(spans, 3, &link_in, b), 0);
    cr_assert(NEAR(b[0], 3 * 262144 + 73568), "span 0: %llu",
              (unsigned long long)b[0]);
    cr_assert(NEAR(b[1], 140000), "span 1: %llu", (unsigned long long)b[1]);
    cr_assert_eq(b[2], 0);
}

Test(partition, copies_follow_one_another)
{
    /* Two copies: span 1 ends the first (140000 bytes, 1.5 ms) and starts
     * the second with (0.3 - 0.1) ms = 20000 bytes; span 2 takes the
     * second's other 980000 in three parts and 193568. */
    double spans[3] = {0.010, 0.002, 0.050};
    tacl__partition_in_t in = link_in;
    uint64_t b[3];

    in.copies = 2;
    cr_assert_eq(tacl__snap_partition(spans, 3, &in, b), 0);
    cr_assert(NEAR(b[1], 160000), "span 1: %llu", (unsigned long long)b[1]);
    cr_assert(NEAR(b[2], 980000), "span 2: %llu", (unsigned long long)b[2]);
    cr_assert_eq(b[0] + b[1] + b[2], 2000000);
}

Test(partition, what_the_spans_cannot_hold_goes_last)
{
    /* 0.9 ms carries 80000 bytes, 0.45 ms 35000; a span under alpha
     * (45 us) none; the rest is beyond, in the last span. */
    double spans[3] = {0.001, 0.00005, 0.0005};
    uint64_t b[3], beyond = tacl__snap_partition(spans, 3, &link_in, b);

    cr_assert(NEAR(b[0], 80000), "span 0: %llu", (unsigned long long)b[0]);
    cr_assert_eq(b[1], 0);
    cr_assert(NEAR(beyond, 1000000 - 80000 - 35000), "beyond %llu",
              (unsigned long long)beyond);
    cr_assert_eq(b[2], 35000 + beyond);
}

Test(partition, every_byte_of_every_copy_is_planned_once)
{
    srand(7);
    for (int t = 0; t < 2000; t++) {
        double spans[PARTITION_SPANS];
        int n = 1 + rand() % PARTITION_SPANS;
        tacl__partition_in_t in = link_in;
        uint64_t b[PARTITION_SPANS], sum = 0, beyond;

        in.copies = 1 + rand() % 3;
        in.copy_bytes = (uint64_t)(rand() % 5000000);
        in.part_bytes = 4096 + (uint64_t)(rand() % 1000000);
        in.mu = 0.1 + 0.9 * (rand() / (double)RAND_MAX);
        in.whole_parts = rand() % 2;
        for (int i = 0; i < n; i++)
            spans[i] = (rand() % 100) * 1e-3;
        beyond = tacl__snap_partition(spans, n, &in, b);
        for (int i = 0; i < n; i++)
            sum += b[i];
        cr_assert_eq(sum, in.copy_bytes * (uint64_t)in.copies);
        cr_assert_leq(beyond, b[n - 1]);
        /* No span but the last holds more than mu of it carries; with
         * whole parts, every one holds whole parts and copies' ends. */
        for (int i = 0; i + 1 < n; i++) {
            cr_assert_leq((double)b[i],
                          in.mu * spans[i] * in.bytes_per_s + 1,
                          "span %d of %g s: %llu bytes", i, spans[i],
                          (unsigned long long)b[i]);
            if (in.whole_parts && in.copy_bytes % in.part_bytes == 0)
                cr_assert_eq(b[i] % in.part_bytes, 0);
        }
    }
}

Test(partition, whole_parts_leave_no_cut_part_in_a_span)
{
    /* The first case's spans in whole parts: 9 ms holds three, 1.8 ms
     * none (the copy's last 213568 bytes need 2.24 ms), 45 ms takes
     * them. */
    double spans[3] = {0.010, 0.002, 0.050};
    tacl__partition_in_t in = link_in;
    uint64_t b[3];

    in.whole_parts = 1;
    cr_assert_eq(tacl__snap_partition(spans, 3, &in, b), 0);
    cr_assert_eq(b[0], 3 * 262144);
    cr_assert_eq(b[1], 0);
    cr_assert_eq(b[2], 1000000 - 3 * 262144);
    /* A span that holds the shorter last part takes it. */
    spans[1] = 0.0026;
    cr_assert_eq(tacl__snap_partition(spans, 3, &in, b), 0);
    cr_assert_eq(b[1], 1000000 - 3 * 262144);
    cr_assert_eq(b[2], 0);
}

/* Declared replicas hold one another's copies, inside their group. */
Test(placement, shared_groups_hold_each_other)
{
    /* MiCS on 2x2: replicas are the same local index on either node. */
    int node_of[8] = {0, 0, 1, 1}, local_of[8] = {0, 1, 0, 1};
    /* MiCS's groups (auto placement), then DDP's one (group). */
    int groups[2][8] = {{0, 1, 0, 1}, {0, 0, 0, 0}};
    int per_node[8] = {0, 0, 1, 1}, holders[16], shared[8];
    const int want[8] = {0, 2, 1, 3, 2, 0, 3, 1};

    for (int g = 0; g < 2; g++) {
        cr_assert_eq(tacl__place_shared(4, groups[g], node_of, local_of, 2,
                                        g ? TACL__PLACE_GROUP
                                          : TACL__PLACE_AUTO,
                                        holders, shared),
                     TACL_OK);
        for (int i = 0; i < 8; i++)
            cr_assert_eq(holders[i], want[i], "groups %d holder %d: %d", g,
                         i, holders[i]);
        for (int r = 0; r < 4; r++)
            cr_assert_eq(shared[r], 1);
    }
    /* Groups inside one node cannot hold a node-domain copy: left. */
    for (int i = 0; i < 8; i++)
        holders[i] = -7;
    cr_assert_eq(tacl__place_shared(4, per_node, node_of, local_of, 2,
                                    TACL__PLACE_AUTO, holders, shared),
                 TACL_OK);
    for (int r = 0; r < 4; r++)
        cr_assert_eq(shared[r], 0);
    for (int i = 0; i < 8; i++)
        cr_assert_eq(holders[i], -7);
}

Test(placement, shared_rank_domain_and_uneven_nodes)
{
    int groups[4] = {0, 0, 0, -1}, holders[8] = {0}, shared[4];
    int node_of[3] = {0, 0, 1}, local_of[3] = {0, 1, 0}, all[3] = {5, 5, 5};

    /* Ranks as units: three replicas, m = 2, a ring of three. */
    cr_assert_eq(tacl__place_shared(4, groups, NULL, NULL, 2,
                                    TACL__PLACE_AUTO, holders, shared),
                 TACL_OK);
    for (int r = 0; r < 3; r++)
        cr_assert(shared[r] && holders[2 * r + 1] == (r + 1) % 3);
    cr_assert_eq(shared[3], 0);
    /* Two replicas on node 0, one on node 1: both send to rank 2. */
    cr_assert_eq(tacl__place_shared(3, all, node_of, local_of, 2,
                                    TACL__PLACE_RING, holders, shared),
                 TACL_OK);
    for (int r = 0; r < 3; r++)
        cr_assert_eq(holders[2 * r + 1], r < 2 ? 2 : 0);
}

/* MiCS on 4x2 and 8x1, every kind and m: holders are the rank's
 * replicas, on m distinct nodes, never its own but for copy 0. */
Test(placement, shared_properties)
{
    enum { RANKS = 8 };
    int node_of[RANKS], local_of[RANKS], group_of[RANKS];
    int holders[RANKS * 4], shared[RANKS];

    for (int per = 1; per <= 2; per++)
        for (int m = 2; m <= 4; m++)
            for (int kind = TACL__PLACE_AUTO; kind <= TACL__PLACE_MIXED;
                 kind++) {
                for (int r = 0; r < RANKS; r++) {
                    node_of[r] = r / per;
                    local_of[r] = r % per;
                    group_of[r] = r % per;
                }
                cr_assert_eq(tacl__place_shared(RANKS, group_of, node_of,
                                                local_of, m,
                                                (tacl__place_kind_t)kind,
                                                holders, shared),
                             TACL_OK);
                for (int r = 0; r < RANKS; r++) {
                    cr_assert(shared[r]);
                    cr_assert_eq(holders[r * m], r);
                    for (int j = 1; j < m; j++) {
                        int h = holders[r * m + j];

                        cr_assert_eq(group_of[h], group_of[r]);
                        for (int i = 0; i < j; i++)
                            cr_assert_neq(node_of[h],
                                          node_of[holders[r * m + i]],
                                          "per %d m %d kind %d rank %d",
                                          per, m, kind, r);
                    }
                }
            }
}
