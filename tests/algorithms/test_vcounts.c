/*
 * The variable-count collectives' schedules (all-to-all-v and
 * all-gather-v), checked without a transport on 1, 2, 3, 5, 8, 11 and 16
 * ranks: each rank's table differs, as in a real call; every message
 * is matched with its receive, every byte of every receive region is
 * written once and every gap never, the values are the reference's,
 * and each rank sends exactly the bytes of its table to its peers, one
 * message per peer it has anything for.  Also the vocabulary: the
 * signature and the plan cache's identity cover the table.
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

static void run_case(tacl_coll_t coll, int n, pattern_t p)
{
    int gatherv = coll == TACL_COLL_ALLGATHERV;
    const tacl__algo_t *row = tacl__algo_row(TACL__ALGO_DIRECT, coll);
    rank_t *rk = calloc((size_t)n, sizeof(*rk));
    simrun_t *sr = simrun_new(n);
    int *node_of = calloc((size_t)n, sizeof(int));
    char err[256];

    cr_assert(row != NULL && rk != NULL && sr != NULL && node_of != NULL);
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
        free(inside);
        free(x->sc);
        free(x->sd);
        free(x->rc);
        free(x->rd);
        free(x->send);
        free(x->recv);
        tacl__vcounts_free(x->v);
    }
    simrun_free(sr);
    free(node_of);
    free(rk);
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
