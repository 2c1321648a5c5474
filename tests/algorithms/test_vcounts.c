/*
 * The variable-count collectives' schedules (all-to-all-v and
 * all-gather-v), checked without a transport on 1, 2, 3, 5, 8, 11 and 16
 * ranks: each rank's table differs, as in a real call; every message
 * is matched with its receive, every byte of every receive region is
 * written once and every gap never, the values are the reference's,
 * and each rank sends exactly the bytes of its table to its peers, one
 * message per peer it has anything for.  The hierarchical all-to-all-v
 * on 2 to 4 nodes of 2 to 4 ranks: the same checks, with every rank's
 * counts known, and what each node sends across the network equal to
 * the closed form: the bytes of the flat exchange in one message per
 * node it has anything for.  Also the vocabulary: the signature and the
 * plan cache's identity cover the table.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algo.h"
#include "simrun.h"

static const int nranks_list[] = {1, 2, 3, 5, 8, 11, 16};

#define GAP 3 /* elements between two regions */

typedef enum { P_RANDOM = 0, P_ONE_SENDS, P_ZERO, P_PATTERNS } pattern_t;

/* Elements rank i sends rank j (all-gather-v: rank i's sendcount). */
static size_t pair_count(pattern_t p, int gatherv, int i, int j)
{
    unsigned h;

    if (gatherv)
        j = 0;
    if (p == P_ZERO)
        return 0;
    if (p == P_ONE_SENDS)
        return i == 0 ? (size_t)j + 1 : 0;
    h = (unsigned)(i * 31 + j * 17 + 5) * 2654435761u;
    return (h >> 15) % 5;
}

static int32_t value(int i, int j, size_t k)
{
    return (int32_t)(i * 100000 + j * 100 + (int)k);
}

/* Regions from the last rank down, GAP apart; returns the span. */
static size_t layout(const size_t *counts, int n, size_t *displs)
{
    size_t at = GAP;

    for (int j = n - 1; j >= 0; j--) {
        displs[j] = at;
        at += counts[j] + GAP;
    }
    return at;
}

typedef struct {
    size_t *sc, *sd, *rc, *rd;
    int32_t *send, *recv;
    size_t slen, rlen;
    tacl__vcounts_t *v;
} rank_t;

/* What each node sends to other nodes, by the schedules' sends. */
static void inter_node(simrun_t *sr, int n, const int *node_of,
                       uint64_t *bytes, uint64_t *msgs)
{
    for (int r = 0; r < n; r++) {
        const tacl__sched_t *s = simrun_sched(sr, r);

        for (uint32_t i = 0; i < s->nsteps; i++)
            if (s->steps[i].kind == TACL__STEP_SEND &&
                node_of[s->steps[i].peer] != node_of[r]) {
                bytes[node_of[r]] += s->steps[i].bytes;
                msgs[node_of[r]]++;
            }
    }
}

/* The closed form: node a's bytes for other nodes, and the nodes it has
 * anything for (the hierarchical row's messages across). */
static void inter_node_want(pattern_t p, int gatherv, int n,
                            const int *node_of, int g, uint64_t *bytes,
                            uint64_t *msgs)
{
    for (int a = 0; a < g; a++)
        for (int b = 0; b < g; b++) {
            uint64_t t = 0;

            for (int i = 0; i < n; i++)
                for (int j = 0; j < n; j++)
                    if (node_of[i] == a && node_of[j] == b && a != b)
                        t += pair_count(p, gatherv, i, j) * sizeof(int32_t);
            /* An all-gather-v's node sends its blocks once per node, not
             * once per rank there. */
            if (gatherv)
                t /= (uint64_t)(n / g);
            bytes[a] += t;
            msgs[a] += t > 0;
        }
}

/*
 * coll by row algo on n ranks, k to a node (0: one node), every rank's
 * counts given to the builder when matrix is set.
 */
static void run_case_on(tacl_coll_t coll, tacl__algo_id_t algo, int n,
                        int per_node, pattern_t p, int matrix)
{
    int gatherv = coll == TACL_COLL_ALLGATHERV;
    const tacl__algo_t *row = tacl__algo_row(algo, coll);
    rank_t *rk = calloc((size_t)n, sizeof(*rk));
    simrun_t *sr = simrun_new(n);
    int *node_of = calloc((size_t)n, sizeof(int));
    uint64_t *rows = calloc((size_t)n * (size_t)n + 1, sizeof(uint64_t));
    char err[256];

    cr_assert(row != NULL && rk != NULL && sr != NULL && node_of != NULL &&
              rows != NULL);
    for (int r = 0; r < n; r++) {
        node_of[r] = per_node > 0 ? r / per_node : 0;
        for (int j = 0; j < n; j++)
            rows[(size_t)r * n + j] = pair_count(p, gatherv, r, j);
    }
    for (int r = 0; r < n; r++) {
        rank_t *x = &rk[r];
        tacl__coll_args_t a = {.type = coll, .dtype = TACL_INT32,
                               .memtype = TACL_MEM_HOST, .seq = 7};
        tacl__topo_view_t view = simrun_view(node_of, n, r);

        x->sc = calloc((size_t)n, sizeof(size_t));
        x->sd = calloc((size_t)n, sizeof(size_t));
        x->rc = calloc((size_t)n, sizeof(size_t));
        x->rd = calloc((size_t)n, sizeof(size_t));
        for (int j = 0; j < n; j++) {
            x->sc[j] = pair_count(p, gatherv, r, j);
            x->rc[j] = pair_count(p, gatherv, j, r);
        }
        x->slen = gatherv ? x->sc[0] + 1 : layout(x->sc, n, x->sd);
        x->rlen = layout(x->rc, n, x->rd);
        x->send = calloc(x->slen, sizeof(int32_t));
        x->recv = calloc(x->rlen, sizeof(int32_t));
        cr_assert(x->send != NULL && x->recv != NULL);
        for (int j = 0; j < n; j++)
            for (size_t k = 0; k < x->sc[j]; k++)
                x->send[(gatherv ? 0 : x->sd[j]) + k] =
                    value(r, gatherv ? 0 : j, k);
        x->v = tacl__vcounts_new(n, gatherv ? NULL : x->sc,
                                 gatherv ? NULL : x->sd, x->sc[0], x->rc,
                                 x->rd);
        cr_assert_not_null(x->v);
        if (matrix) {
            tacl__vcounts_t *with = tacl__vcounts_with(x->v, rows);

            cr_assert_not_null(with);
            tacl__vcounts_free(x->v);
            x->v = with;
        }
        a.v = x->v;
        a.sendbuf = x->send;
        a.recvbuf = x->recv;
        simrun_region(sr, r, x->send, x->slen * sizeof(int32_t), 0,
                      x->slen * sizeof(int32_t));
        simrun_region(sr, r, x->recv, x->rlen * sizeof(int32_t), 0, 0);
        cr_assert_eq(row->build(simrun_sched(sr, r), &a, &view), TACL_OK,
                     "%s n=%d pattern %d: rank %d's build failed",
                     tacl_coll_name(coll), n, (int)p, r);
    }
    cr_assert_eq(simrun_run(sr, 1, err, sizeof(err)), 0,
                 "%s n=%d pattern %d: %s", tacl_coll_name(coll), n, (int)p,
                 err);
    for (int r = 0; r < n; r++) {
        rank_t *x = &rk[r];
        const uint8_t *w = simrun_writes(sr, r, x->recv);
        uint64_t bytes = 0, msgs = 0;
        char *inside = calloc(x->rlen, 1);

        for (int j = 0; j < n; j++) {
            for (size_t k = 0; k < x->rc[j]; k++) {
                inside[x->rd[j] + k] = 1;
                cr_expect_eq(x->recv[x->rd[j] + k],
                             value(j, gatherv ? 0 : r, k),
                             "%s n=%d: rank %d element %zu from %d",
                             tacl_coll_name(coll), n, r, k, j);
            }
            if (j != r && x->sc[j] > 0) {
                bytes += x->sc[j] * sizeof(int32_t);
                msgs++;
            }
        }
        for (size_t e = 0; e < x->rlen; e++)
            for (size_t b = 0; b < sizeof(int32_t); b++)
                cr_expect_eq(w[e * sizeof(int32_t) + b], inside[e],
                             "%s n=%d: rank %d byte %zu of element %zu "
                             "written %u times", tacl_coll_name(coll), n,
                             r, b, e, w[e * sizeof(int32_t) + b]);
        /* The flat exchange sends its table, a message a peer. */
        if (algo == TACL__ALGO_DIRECT) {
            cr_expect_eq(simrun_bytes_sent(sr, r), bytes,
                         "%s n=%d: rank %d sent %llu bytes, its table %llu",
                         tacl_coll_name(coll), n, r,
                         (unsigned long long)simrun_bytes_sent(sr, r),
                         (unsigned long long)bytes);
            cr_expect_eq(simrun_msgs_sent(sr, r), msgs,
                         "%s n=%d: rank %d sent %llu messages, want %llu",
                         tacl_coll_name(coll), n, r,
                         (unsigned long long)simrun_msgs_sent(sr, r),
                         (unsigned long long)msgs);
        }
        free(inside);
        free(x->sc);
        free(x->sd);
        free(x->rc);
        free(x->rd);
        free(x->send);
        free(x->recv);
        tacl__vcounts_free(x->v);
    }
    if (algo == TACL__ALGO_HIER) {
        int k = per_node, g = n / k;
        uint64_t got[16] = {0}, got_msgs[16] = {0};
        uint64_t want[16] = {0}, want_msgs[16] = {0};

        inter_node(sr, n, node_of, got, got_msgs);
        inter_node_want(p, gatherv, n, node_of, g, want, want_msgs);
        for (int a = 0; a < g; a++) {
            cr_expect_eq(got[a], want[a], "hier %dx%d pattern %d: node %d "
                         "sent %llu bytes across, the flat exchange's %llu",
                         g, k, (int)p, a, (unsigned long long)got[a],
                         (unsigned long long)want[a]);
            cr_expect_eq(got_msgs[a], want_msgs[a], "hier %dx%d pattern "
                         "%d: node %d sent %llu messages across, want %llu",
                         g, k, (int)p, a, (unsigned long long)got_msgs[a],
                         (unsigned long long)want_msgs[a]);
        }
    }
    simrun_free(sr);
    free(rows);
    free(node_of);
    free(rk);
}

static void run_case(tacl_coll_t coll, int n, pattern_t p)
{
    run_case_on(coll, TACL__ALGO_DIRECT, n, 0, p, 0);
}

Test(vcounts, alltoallv_every_rank_count)
{
    for (size_t i = 0; i < sizeof(nranks_list) / sizeof(int); i++)
        for (int p = 0; p < P_PATTERNS; p++)
            run_case(TACL_COLL_ALLTOALLV, nranks_list[i], (pattern_t)p);
}

Test(vcounts, allgatherv_every_rank_count)
{
    for (size_t i = 0; i < sizeof(nranks_list) / sizeof(int); i++)
        for (int p = 0; p < P_PATTERNS; p++)
            run_case(TACL_COLL_ALLGATHERV, nranks_list[i], (pattern_t)p);
}

/* Nodes x ranks per node: regular layouts the hierarchical rows serve. */
Test(vcounts, hier_on_nodes)
{
    static const int layouts[][2] = {{2, 2}, {3, 2}, {2, 4}, {4, 3},
                                     {3, 4}};

    for (size_t i = 0; i < sizeof(layouts) / sizeof(layouts[0]); i++)
        for (int p = 0; p < P_PATTERNS; p++) {
            int g = layouts[i][0], k = layouts[i][1];

            run_case_on(TACL_COLL_ALLTOALLV, TACL__ALGO_HIER, g * k, k,
                        (pattern_t)p, 1);
            run_case_on(TACL_COLL_ALLGATHERV, TACL__ALGO_HIER, g * k, k,
                        (pattern_t)p, 0);
            /* The flat row's nodes send a message per remote peer. */
            run_case_on(TACL_COLL_ALLTOALLV, TACL__ALGO_DIRECT, g * k, k,
                        (pattern_t)p, 1);
        }
}

/* Without every rank's counts the hierarchical row cannot serve. */
Test(vcounts, hier_needs_every_rank_counts)
{
    int node_of[4] = {0, 0, 1, 1};
    size_t c[4] = {1, 1, 1, 1}, d[4] = {0, 1, 2, 3};
    uint64_t rows[16];
    tacl__vcounts_t *v = tacl__vcounts_new(4, c, d, 0, c, d);
    tacl__vcounts_t *with;
    tacl__coll_args_t a = {.type = TACL_COLL_ALLTOALLV, .dtype = TACL_INT32,
                           .v = v};
    tacl__topo_view_t view = simrun_view(node_of, 4, 0);
    const tacl__algo_t *hier = tacl__algo_row(TACL__ALGO_HIER,
                                              TACL_COLL_ALLTOALLV);

    for (int i = 0; i < 16; i++)
        rows[i] = 1;
    with = tacl__vcounts_with(v, rows);
    cr_assert(v != NULL && with != NULL && hier != NULL);
    cr_expect_not(hier->supports(&a, &view));
    a.v = with;
    cr_expect(hier->supports(&a, &view));
    cr_expect_not(tacl__vcounts_same(v, with));
    /* An estimate: no table, count elements everywhere. */
    a.v = NULL;
    a.count = 100;
    cr_expect(hier->supports(&a, &view));
    tacl__vcounts_free(v);
    tacl__vcounts_free(with);
}

/* The signature, the flight record's words and the plan cache's key
 * tell two tables apart, and one table from its copy not. */
Test(vcounts, signature_covers_the_table)
{
    size_t sc[3] = {1, 2, 3}, sd[3] = {0, 1, 3}, other[3] = {1, 2, 4};
    tacl__vcounts_t *v = tacl__vcounts_new(3, sc, sd, 0, sc, sd);
    tacl__vcounts_t *w = tacl__vcounts_new(3, sc, sd, 0, other, sd);
    tacl__vcounts_t *copy = tacl__vcounts_dup(v);
    tacl__coll_args_t a = {.type = TACL_COLL_ALLTOALLV, .dtype = TACL_INT32,
                           .v = v};
    tacl__coll_args_t b = a, c = a;
    tacl__op_sig_t sa, sb, sc_;
    char words[256];

    cr_assert(v != NULL && w != NULL && copy != NULL);
    b.v = w;
    c.v = copy;
    sa = tacl__op_sig_of(&a);
    sb = tacl__op_sig_of(&b);
    sc_ = tacl__op_sig_of(&c);
    cr_expect_neq(tacl__op_sig_hash(&sa), tacl__op_sig_hash(&sb));
    cr_expect_eq(tacl__op_sig_hash(&sa), tacl__op_sig_hash(&sc_));
    cr_expect_not(tacl__coll_args_same(&a, &b));
    cr_expect(tacl__coll_args_same(&a, &c));
    tacl__op_sig_format(&sa, words, sizeof(words));
    cr_expect(strstr(words, "coll=alltoallv") != NULL, "%s", words);
    cr_expect(strstr(words, "vcounts=") != NULL, "%s", words);
    /* Ranks' tables differ in a correct call: not a mismatch. */
    cr_expect_eq(tacl__op_sig_diff(&sa, &sb), TACL__SIG_SAME);
    tacl__vcounts_free(v);
    tacl__vcounts_free(w);
    tacl__vcounts_free(copy);
}
