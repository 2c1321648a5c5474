/*
 * Variable-count collectives (tacl_alltoallv, tacl_allgatherv) against
 * a reference computed here: every count pattern (zeros everywhere, one
 * rank sending everything, everything to one rank, random with zeros,
 * even), displacements out of rank order with gaps (which must stay
 * untouched), blocking, _nb and inside a group, on 1 to 8 ranks and on
 * two emulated nodes of two ranks.  The count arrays are poisoned and
 * freed right after each call, before the operation completes, since
 * the library copies them.  Bad tables fail with a message naming what
 * is wrong; with TACL_CHECK, counts that disagree across ranks fail on
 * every rank with a message naming both ranks and both counts.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "config.h"
#include "harness.h"

/* Elements rank i sends rank j under each pattern. */
typedef enum {
    P_ZERO = 0,  /* nothing anywhere */
    P_EVEN,      /* 3 elements each way */
    P_ONE_SENDS, /* rank 0 sends everything: j + 2 to rank j */
    P_TO_ONE,    /* everyone sends rank 0 only (a hot expert) */
    P_RANDOM,    /* 0 to 6, a hash of the pair */
    P_COUNT
} pattern_t;

typedef enum { M_BLOCKING = 0, M_NB, M_GROUP, M_MODES } vmode_t;

#define GAP 2          /* elements left between regions */
#define SENTINEL (-7)  /* what the gaps hold before and after */

static size_t pair_count(pattern_t p, int i, int j)
{
    switch (p) {
    case P_ZERO:
        return 0;
    case P_EVEN:
        return 3;
    case P_ONE_SENDS:
        return i == 0 ? (size_t)j + 2 : 0;
    case P_TO_ONE:
        return j == 0 ? (size_t)i + 1 : 0;
    default: {
        unsigned h = (unsigned)(i * 7919 + j * 104729 + 17);

        h ^= h >> 7;
        h *= 2654435761u;
        return (h >> 13) % 7;
    }
    }
}

/* The value element k of rank i's block for rank j carries. */
static int32_t value(int i, int j, size_t k)
{
    return (int32_t)(i * 1000000 + j * 1000 + (int)k);
}

/* Regions laid out from the last rank down, GAP apart; the span. */
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
    size_t *sc, *sd, *rc, *rd; /* the caller's arrays, freed after posting */
    int32_t *send, *recv;
    size_t send_len, recv_len;
    int gatherv;
} vcall_t;

/* rank's call of pattern p (gatherv: rank i sends pair_count(p, i, 0)). */
static int vcall_make(vcall_t *c, pattern_t p, int rank, int n, int gatherv)
{
    memset(c, 0, sizeof(*c));
    c->gatherv = gatherv;
    c->sc = calloc((size_t)n, sizeof(size_t));
    c->sd = calloc((size_t)n, sizeof(size_t));
    c->rc = calloc((size_t)n, sizeof(size_t));
    c->rd = calloc((size_t)n, sizeof(size_t));
    if (!c->sc || !c->sd || !c->rc || !c->rd)
        return -1;
    for (int j = 0; j < n; j++) {
        c->sc[j] = pair_count(p, rank, gatherv ? 0 : j);
        c->rc[j] = pair_count(p, j, gatherv ? 0 : rank);
    }
    c->send_len = gatherv ? c->sc[0] + 1 : layout(c->sc, n, c->sd);
    c->recv_len = layout(c->rc, n, c->rd);
    c->send = malloc(c->send_len * sizeof(int32_t));
    c->recv = malloc(c->recv_len * sizeof(int32_t));
    if (!c->send || !c->recv)
        return -1;
    for (size_t k = 0; k < c->send_len; k++)
        c->send[k] = SENTINEL;
    for (size_t k = 0; k < c->recv_len; k++)
        c->recv[k] = SENTINEL;
    for (int j = 0; j < n; j++)
        for (size_t k = 0; k < c->sc[j]; k++)
            c->send[(gatherv ? 0 : c->sd[j]) + k] =
                value(rank, gatherv ? 0 : j, k);
    return 0;
}

/* Post c (its arrays poisoned and freed at once), nb: a request. */
static tacl_status_t vcall_post(vcall_t *c, tacl_comm_t comm, int nb,
                                tacl_request_t *req)
{
    tacl_status_t st;

    if (c->gatherv)
        st = nb ? tacl_allgatherv_nb(c->send, c->sc[0], c->recv, c->rc,
                                     c->rd, TACL_INT32, comm, NULL, req)
                : tacl_allgatherv(c->send, c->sc[0], c->recv, c->rc, c->rd,
                                  TACL_INT32, comm, NULL);
    else
        st = nb ? tacl_alltoallv_nb(c->send, c->sc, c->sd, c->recv, c->rc,
                                    c->rd, TACL_INT32, comm, NULL, req)
                : tacl_alltoallv(c->send, c->sc, c->sd, c->recv, c->rc,
                                 c->rd, TACL_INT32, comm, NULL);
    return st;
}

/* Poison and free the arrays: the library must have copied them. */
static void vcall_drop_tables(vcall_t *c, int n)
{
    size_t *arrays[4] = {c->sc, c->sd, c->rc, c->rd};

    for (int i = 0; i < 4; i++) {
        memset(arrays[i], 0xff, (size_t)n * sizeof(size_t));
        free(arrays[i]);
    }
    c->sc = c->sd = c->rc = c->rd = NULL;
}

/* Every received element is the reference's, every gap untouched. */
static int vcall_verify(coll_ctx_t *ctx, const vcall_t *c, pattern_t p,
                        const char *what)
{
    int n = ctx->nranks, me = ctx->rank;
    size_t *rc = calloc((size_t)n, sizeof(size_t));
    size_t *rd = calloc((size_t)n, sizeof(size_t));
    char *seen = calloc(c->recv_len, 1);
    int bad = 0;

    COLL_CHECK(ctx, rc && rd && seen, "out of memory");
    for (int j = 0; j < n; j++)
        rc[j] = pair_count(p, j, c->gatherv ? 0 : me);
    layout(rc, n, rd);
    for (int j = 0; j < n && !bad; j++)
        for (size_t k = 0; k < rc[j] && !bad; k++) {
            int32_t want = value(j, c->gatherv ? 0 : me, k);

            seen[rd[j] + k] = 1;
            if (c->recv[rd[j] + k] != want) {
                coll_fail(ctx, "%s pattern %d: element %zu from rank %d is "
                          "%d, want %d", what, (int)p, k, j,
                          c->recv[rd[j] + k], want);
                bad = 1;
            }
        }
    for (size_t k = 0; k < c->recv_len && !bad; k++)
        if (!seen[k] && c->recv[k] != SENTINEL) {
            coll_fail(ctx, "%s pattern %d: gap element %zu was written "
                      "(%d)", what, (int)p, k, c->recv[k]);
            bad = 1;
        }
    free(rc);
    free(rd);
    free(seen);
    return bad;
}

static void vcall_free(vcall_t *c)
{
    free(c->sc);
    free(c->sd);
    free(c->rc);
    free(c->rd);
    free(c->send);
    free(c->recv);
}

/* One pattern in one mode: an all-to-all-v and an all-gather-v. */
static int run_pattern(coll_ctx_t *ctx, tacl_comm_t comm, pattern_t p,
                       vmode_t mode)
{
    static const char *const mode_names[M_MODES] = {"blocking", "nb",
                                                    "group"};
    vcall_t calls[2];
    tacl_request_t reqs[2] = {NULL, NULL};
    int failed = 0;

    for (int g = 0; g < 2; g++)
        COLL_CHECK(ctx, vcall_make(&calls[g], p, ctx->rank, ctx->nranks,
                                   g) == 0, "out of memory");
    if (mode == M_GROUP)
        COLL_CHECK_OK(ctx, tacl_group_start());
    for (int g = 0; g < 2; g++) {
        tacl_status_t st = vcall_post(&calls[g], comm, mode == M_NB,
                                      &reqs[g]);

        vcall_drop_tables(&calls[g], ctx->nranks);
        COLL_CHECK(ctx, st == TACL_OK, "%s %s pattern %d: %s: %s",
                   g ? "allgatherv" : "alltoallv", mode_names[mode], (int)p,
                   tacl_status_string(st), tacl_comm_last_error(comm));
    }
    if (mode == M_GROUP)
        COLL_CHECK_OK(ctx, tacl_group_end());
    for (int g = 0; mode == M_NB && g < 2; g++) {
        COLL_CHECK_OK(ctx, tacl_request_wait(reqs[g]));
        tacl_request_free(reqs[g]);
    }
    for (int g = 0; g < 2 && !failed; g++) {
        char what[48];

        snprintf(what, sizeof(what), "%s %s",
                 g ? "allgatherv" : "alltoallv", mode_names[mode]);
        failed = vcall_verify(ctx, &calls[g], p, what);
    }
    for (int g = 0; g < 2; g++)
        vcall_free(&calls[g]);
    return failed;
}

static int run_all(coll_ctx_t *ctx, tacl_comm_t comm)
{
    for (int m = 0; m < M_MODES; m++)
        for (int p = 0; p < P_COUNT; p++)
            if (run_pattern(ctx, comm, (pattern_t)p, (vmode_t)m))
                return 1;
    /* Once more, as the plan cache serves it the second time. */
    return run_pattern(ctx, comm, P_RANDOM, M_BLOCKING);
}

static int body_patterns(coll_ctx_t *ctx)
{
    return run_all(ctx, ctx->comm);
}

/*
 * An even exchange of 100 elements a peer, as tacl_comm_estimate prices
 * it: the estimate names the algorithm the call ran, and this rank's
 * bytes across the network are what the call sent there, but for the
 * counts it gathered first.
 */
static int estimate_matches(coll_ctx_t *ctx, tacl_comm_t comm,
                            const char *forced)
{
    int n = ctx->nranks;
    size_t c[COLL_MAX_RANKS], d[COLL_MAX_RANKS];
    int32_t *send = calloc((size_t)n * 100, sizeof(int32_t));
    int32_t *recv = calloc((size_t)n * 100, sizeof(int32_t));
    tacl_counters_t counters;
    tacl_sim_info_t info;
    const char *ran;
    uint64_t sent;

    COLL_CHECK(ctx, send != NULL && recv != NULL, "out of memory");
    for (int j = 0; j < n; j++) {
        c[j] = 100;
        d[j] = (size_t)j * 100;
    }
    COLL_CHECK_OK(ctx, tacl_comm_estimate(comm, TACL_COLL_ALLTOALLV, 100,
                                          TACL_INT32, TACL_SUM, 0, &info));
    COLL_CHECK_OK(ctx, tacl_comm_reset_counters(comm));
    COLL_CHECK_OK(ctx, tacl_alltoallv(send, c, d, recv, c, d, TACL_INT32,
                                      comm, NULL));
    COLL_CHECK_OK(ctx, tacl_comm_get_counters(comm, &counters));
    ran = tacl_comm_last_algorithm(comm);
    COLL_CHECK(ctx, forced == NULL || strcmp(ran, forced) == 0,
               "forced %s, ran %s", forced, ran);
    COLL_CHECK(ctx, strcmp(info.algorithm, ran) == 0 && info.seconds > 0,
               "estimate names %s (%g s), the call ran %s", info.algorithm,
               info.seconds, ran);
    /* The call also gathered every rank's counts (n * n of them, at
     * most that many bytes of this rank's across), which the estimate
     * leaves out. */
    sent = counters.links[TACL_LINK_NET].bytes;
    COLL_CHECK(ctx, sent >= info.bytes[TACL_LINK_NET] &&
                        sent - info.bytes[TACL_LINK_NET] <=
                            (uint64_t)n * (uint64_t)n * sizeof(uint64_t),
               "estimate: %llu bytes across, the call sent %llu",
               (unsigned long long)info.bytes[TACL_LINK_NET],
               (unsigned long long)sent);
    /* An all-gather-v of 100 elements a rank gathers nothing first. */
    COLL_CHECK_OK(ctx, tacl_comm_estimate(comm, TACL_COLL_ALLGATHERV, 100,
                                          TACL_INT32, TACL_SUM, 0, &info));
    COLL_CHECK_OK(ctx, tacl_comm_reset_counters(comm));
    COLL_CHECK_OK(ctx, tacl_allgatherv(send, 100, recv, c, d, TACL_INT32,
                                       comm, NULL));
    COLL_CHECK_OK(ctx, tacl_comm_get_counters(comm, &counters));
    ran = tacl_comm_last_algorithm(comm);
    COLL_CHECK(ctx, (forced == NULL || strcmp(ran, forced) == 0) &&
                        strcmp(info.algorithm, ran) == 0,
               "allgatherv: forced %s, estimate names %s, ran %s",
               forced ? forced : "nothing", info.algorithm, ran);
    COLL_CHECK(ctx, info.bytes[TACL_LINK_NET] ==
                        counters.links[TACL_LINK_NET].bytes,
               "allgatherv estimate: %llu bytes across, the call sent %llu",
               (unsigned long long)info.bytes[TACL_LINK_NET],
               (unsigned long long)counters.links[TACL_LINK_NET].bytes);
    free(send);
    free(recv);
    return 0;
}

/*
 * Two emulated nodes of two ranks: as the decider chooses, then each
 * row forced (TACL_ALGO), the call names the row that ran, the messages
 * to the other node crossed the network, and the estimate agrees.
 */
static int body_patterns_2x2(coll_ctx_t *ctx)
{
    static const char *const rows[] = {NULL, "hier", "direct"};
    tacl_counters_t counters;
    tacl_comm_t comm;
    int failed = 0;

    COLL_CHECK_OK(ctx, coll_join_node(ctx, "vcoll-node", 2, &comm));
    ctx->comm = comm;
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]) && !failed; i++) {
        char spec[64];

        snprintf(spec, sizeof(spec), "alltoallv=%s,allgatherv=%s", rows[i],
                 rows[i]);
        if (rows[i] != NULL)
            setenv("TACL_ALGO", spec, 1);
        tacl__config_reload();
        COLL_CHECK_OK(ctx, tacl_comm_reset_counters(comm));
        failed = run_all(ctx, comm);
        if (failed)
            break;
        COLL_CHECK_OK(ctx, tacl_comm_get_counters(comm, &counters));
        COLL_CHECK(ctx, counters.links[TACL_LINK_NET].bytes > 0,
                   "nothing crossed the network between the two nodes");
        /* run_all's last call is an all-gather-v. */
        COLL_CHECK(ctx, rows[i] == NULL ||
                   strcmp(tacl_comm_last_algorithm(comm), rows[i]) == 0,
                   "allgatherv forced to %s ran %s", rows[i],
                   tacl_comm_last_algorithm(comm));
        failed = estimate_matches(ctx, comm, rows[i]);
    }
    unsetenv("TACL_ALGO");
    tacl__config_reload();
    ctx->comm = NULL;
    COLL_CHECK_OK(ctx, tacl_comm_destroy(comm));
    return failed;
}

#define RANKS_TEST(n, t)                                                     \
    Test(vcoll, ranks##n, .timeout = t)                                      \
    {                                                                        \
        coll_run_expect_pass(n, body_patterns, NULL, NULL);                  \
    }
RANKS_TEST(1, 120)
RANKS_TEST(2, 120)
RANKS_TEST(3, 120)
RANKS_TEST(4, 180)
RANKS_TEST(5, 180)
RANKS_TEST(8, 240)

Test(vcoll, two_nodes_of_two, .timeout = 240)
{
    coll_opts_t opts = {.nranks = 4, .deadline_s = 200,
                        .init = COLL_INIT_MANUAL};

    coll_run_opts_expect_pass(&opts, body_patterns_2x2);
}

/* One bad call: its arguments and what its message must hold. */
typedef struct {
    int gatherv;
    int send_is_recv, null_send;  /* sendbuf: recvbuf, or NULL */
    size_t sendcount;             /* all-gather-v */
    int sc, sd, rc, rd;           /* which table below each array is */
    const char *want;
} bad_call_t;

enum { T_NULL = -1, T_ONES, T_AT, T_SAME, T_TWICE, T_APART, T_TABLES };

static int body_bad_input(coll_ctx_t *ctx)
{
    static const bad_call_t calls[] = {
        {0, 0, 0, 0, T_NULL, T_AT, T_ONES, T_AT,
         "alltoallv: sendcounts is NULL"},
        {0, 0, 0, 0, T_ONES, T_NULL, T_ONES, T_AT, "sdispls is NULL"},
        {0, 0, 0, 0, T_ONES, T_AT, T_NULL, T_AT, "recvcounts is NULL"},
        {1, 0, 0, 1, 0, 0, T_ONES, T_NULL, "allgatherv: displs is NULL"},
        /* Both peers' blocks into one place. */
        {0, 0, 0, 0, T_ONES, T_AT, T_ONES, T_SAME,
         "receive regions of ranks"},
        {1, 0, 0, 1, 0, 0, T_ONES, T_SAME, "overlap (displs 0 and 0"},
        /* What a rank sends itself it must receive. */
        {0, 0, 0, 0, T_TWICE, T_APART, T_ONES, T_AT,
         "what a rank sends itself it must receive"},
        {1, 0, 0, 3, 0, 0, T_ONES, T_AT, "sendcount is 3"},
        /* No in-place form; no buffer for what is sent. */
        {0, 1, 0, 0, T_ONES, T_AT, T_ONES, T_AT, "no in-place form"},
        {0, 0, 1, 0, T_ONES, T_AT, T_ONES, T_AT, "sendbuf is NULL"},
    };
    size_t tables[T_TABLES][2] = {{1, 1}, {0, 1}, {0, 0}, {1, 1}, {0, 2}};
    int32_t send[8] = {0}, recv[8] = {0};
    tacl_comm_t c = ctx->comm;

    tables[T_TWICE][ctx->rank] = 2;
    for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++) {
        const bad_call_t *k = &calls[i];
        const void *sb = k->null_send ? NULL : k->send_is_recv ? recv : send;
#define TABLE_(t) ((t) == T_NULL ? NULL : tables[t])
        tacl_status_t st =
            k->gatherv ? tacl_allgatherv(sb, k->sendcount, recv,
                                         TABLE_(k->rc), TABLE_(k->rd),
                                         TACL_INT32, c, NULL)
                       : tacl_alltoallv(sb, TABLE_(k->sc), TABLE_(k->sd),
                                        recv, TABLE_(k->rc), TABLE_(k->rd),
                                        TACL_INT32, c, NULL);
#undef TABLE_
        const char *msg = tacl_comm_last_error(c);

        COLL_CHECK(ctx, st == TACL_ERR_INVALID_ARG,
                   "want invalid argument for '%s', got %s: %s", k->want,
                   tacl_status_string(st), msg);
        COLL_CHECK(ctx, strstr(msg, k->want) != NULL,
                   "message '%s' lacks '%s'", msg, k->want);
    }
    /* Nothing to move: NULL buffers are fine. */
    COLL_CHECK_OK(ctx, tacl_alltoallv(NULL, tables[T_SAME], tables[T_SAME],
                                      NULL, tables[T_SAME], tables[T_SAME],
                                      TACL_INT32, c, NULL));
    return 0;
}

Test(vcoll, bad_input_is_refused, .timeout = 120)
{
    coll_run_expect_pass(2, body_bad_input, NULL, NULL);
}

/*
 * TACL_CHECK: rank 2 expects two elements from rank 0, which sends one;
 * every rank fails naming both, and the communicator works afterwards.
 */
static int body_check_mismatch(coll_ctx_t *ctx)
{
    int n = ctx->nranks, me = ctx->rank, gatherv = *(int *)ctx->arg;
    size_t sc[3] = {1, 1, 1}, d[3] = {0, 2, 4}, rc[3] = {1, 1, 1};
    int32_t send[8], recv[8] = {0};
    const char *msg, *want;
    tacl_status_t st;

    for (int k = 0; k < 8; k++)
        send[k] = me;

    COLL_CHECK(ctx, n == 3, "three ranks");
    COLL_CHECK_OK(ctx, tacl_comm_set_check(ctx->comm, 1));
    if (me == 2)
        rc[0] = 2;
    st = gatherv ? tacl_allgatherv(send, 1, recv, rc, d, TACL_INT32,
                                   ctx->comm, NULL)
                 : tacl_alltoallv(send, sc, d, recv, rc, d, TACL_INT32,
                                  ctx->comm, NULL);
    msg = tacl_comm_last_error(ctx->comm);
    want = "rank 0 sends 1 elements to rank 2, which expects 2 from rank 0";
    COLL_CHECK(ctx, st == TACL_ERR_INVALID_USAGE, "got %s: %s",
               tacl_status_string(st), msg);
    COLL_CHECK(ctx, strstr(msg, want) != NULL && strstr(msg, "TACL_CHECK"),
               "message '%s' lacks '%s'", msg, want);
    /* Matching counts run, checked. */
    rc[0] = 1;
    COLL_CHECK_OK(ctx, tacl_alltoallv(send, sc, d, recv, rc, d, TACL_INT32,
                                      ctx->comm, NULL));
    for (int j = 0; j < n; j++)
        COLL_CHECK(ctx, recv[d[j]] == j, "element from %d is %d", j,
                   recv[d[j]]);
    return 0;
}

Test(vcoll, check_names_mismatched_counts, .timeout = 120)
{
    for (int gatherv = 0; gatherv < 2; gatherv++)
        coll_run_expect_pass(3, body_check_mismatch, &gatherv, NULL);
}
