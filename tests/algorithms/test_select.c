/*
 * The registry and tuner (cost-based choice, forced specs, spec errors),
 * peer arithmetic, and the schedules test_algos.c does not cover: send and
 * receive, the barrier, fused groups, bitwise agreement of all-reduce
 * results across ranks, and the size of ring schedules.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost.h"
#include "toolbox.h"
#include "topo.h"
#include "log.h"
#include "simrun.h"
#include "spec.h"

static const int nranks_list[] = {1, 2, 3, 5, 8, 11, 16};
#define NN ((int)(sizeof(nranks_list) / sizeof(nranks_list[0])))

static tacl__topo_view_t view_of(int rank, int n)
{
    tacl__topo_view_t v = {0};

    v.rank = rank;
    v.nranks = n;
    v.n_nodes = 1;
    v.local_rank = rank;
    v.local_size = n;
    return v;
}

static tacl__coll_args_t args_of(tacl_coll_t type, size_t count)
{
    tacl__coll_args_t a = {0};

    a.type = type;
    a.count = count;
    a.dtype = TACL_FLOAT32;
    a.op = TACL_SUM;
    a.memtype = TACL_MEM_HOST;
    a.chunk_bytes = 1 << 20;
    return a;
}

static const char *pick(tacl_coll_t type, size_t count, int n,
                        const char *spec)
{
    tacl__coll_args_t a = args_of(type, count);
    tacl__topo_view_t v = view_of(0, n);
    const tacl__algo_t *algo = tacl__algo_select(&a, &v, spec_row(spec, &a));

    cr_assert_not_null(algo, "no algorithm for %s", tacl_coll_name(type));
    cr_assert_eq(algo->coll, type);
    return algo->name;
}

/*
 * On one node a step costs one latency and each further message of a
 * step TACL__COST_MSG_SHARE of one (cost.h): direct, one step with a
 * message to every peer, wins a small all-gather or reduce-scatter while
 * its n - 2 further messages cost less than the log2(n) - 1 steps it
 * saves; past that the log-step algorithms win.  A small all-reduce on a
 * power of two takes recursive doubling: log2(n) steps against direct's
 * two phases of n - 1 messages.
 */
Test(select, small_messages_pick_latency_algorithms)
{
    int i;

    for (i = 1; i < NN; i++) {
        int n = nranks_list[i], steps = tacl__log2_ceil(n);
        int direct_wins = 1 + (n - 2) * TACL__COST_MSG_SHARE < steps;
        const char *ag = pick(TACL_COLL_ALLGATHER, 1, n, NULL);
        const char *rs = pick(TACL_COLL_REDUCE_SCATTER, 1, n, NULL);

        if ((n & (n - 1)) == 0)
            cr_expect_str_eq(pick(TACL_COLL_ALLREDUCE, 1, n, NULL), "rd",
                             "allreduce of 4 bytes on %d ranks", n);
        /* Up to 3 ranks the ring takes as few steps as anything. */
        if (steps == n - 1)
            continue;
        if (direct_wins) {
            cr_expect_str_eq(ag, "direct", "allgather on %d ranks", n);
            cr_expect_str_eq(rs, "direct", "reducescatter on %d ranks", n);
            continue;
        }
        cr_expect(strcmp(ag, "bruck") == 0 || strcmp(ag, "rd") == 0,
                  "allgather of 4 bytes on %d ranks chose %s", n, ag);
        if ((n & (n - 1)) == 0)
            cr_expect_str_eq(rs, "rd", "reducescatter on %d ranks", n);
        else
            cr_expect_str_eq(rs, "ring", "reducescatter on %d ranks", n);
    }
    /* Many ranks: the log-step algorithms again. */
    cr_expect_str_eq(pick(TACL_COLL_ALLGATHER, 1, 64, NULL), "bruck");
}

Test(select, large_messages_on_one_node_pick_direct)
{
    int i;

    /* Every block moves once and nothing is forwarded; the reductions
     * read what arrives while it is in cache (see direct.c). */
    for (i = 1; i < NN; i++) {
        int n = nranks_list[i];

        cr_expect_str_eq(pick(TACL_COLL_ALLGATHER, 1 << 24, n, NULL),
                         "direct", "allgather of 64 MiB per rank, %d ranks",
                         n);
        cr_expect_str_eq(pick(TACL_COLL_REDUCE_SCATTER, 1 << 24, n, NULL),
                         "direct", "reducescatter of 64 MiB, %d ranks", n);
        cr_expect_str_eq(pick(TACL_COLL_ALLREDUCE, 1 << 26, n, NULL),
                         "direct", "allreduce of 256 MiB, %d ranks", n);
    }
}

Test(select, allreduce_on_two_ranks_reduces_each_half_once)
{
    /* Recursive doubling reduces the whole vector on both ranks; past a
     * few kilobytes the halves are cheaper. */
    cr_expect_str_eq(pick(TACL_COLL_ALLREDUCE, 1, 2, NULL), "rd");
    cr_expect_str_eq(pick(TACL_COLL_ALLREDUCE, 1 << 20, 2, NULL),
                     "direct");
}

Test(select, every_collective_has_an_algorithm)
{
    int c, i;

    for (c = 0; c < TACL_NUM_COLLS; c++)
        for (i = 0; i < NN; i++) {
            tacl__coll_args_t a = args_of((tacl_coll_t)c, 100);
            tacl__topo_view_t v = view_of(0, nranks_list[i]);

            a.root = nranks_list[i] - 1;
            cr_expect_not_null(tacl__algo_select(&a, &v, NULL),
                               "%s on %d ranks", tacl_coll_name(c),
                               nranks_list[i]);
        }
}

Test(select, forced_spec_is_honoured)
{
    cr_expect_str_eq(pick(TACL_COLL_ALLGATHER, 1, 8, "allgather=ring"),
                     "ring");
    cr_expect_str_eq(pick(TACL_COLL_ALLREDUCE, 1 << 26, 8,
                          " allgather = bruck , allreduce=rd"), "rd");
    cr_expect_str_eq(pick(TACL_COLL_ALLGATHER, 1 << 24, 8,
                          "allgather=bruck,allreduce=ring"), "bruck");
    /* A spec for other collectives leaves this one to the tuner. */
    cr_expect_str_eq(pick(TACL_COLL_ALLREDUCE, 1 << 26, 8,
                          "allgather=bruck"), "direct");
    /* rd reduce-scatter needs a power of two: the tuner takes over. */
    cr_expect_str_eq(pick(TACL_COLL_REDUCE_SCATTER, 1, 5,
                          "reducescatter=rd"), "direct");
    cr_expect_str_eq(pick(TACL_COLL_REDUCE_SCATTER, 1 << 20, 6,
                          "reducescatter=rd"),
                     pick(TACL_COLL_REDUCE_SCATTER, 1 << 20, 6, NULL));
}

static tacl_status_t spec_check(const char *spec)
{
    tacl__algo_force_t force;

    return tacl__algo_force_parse(spec, &force);
}

Test(select, bad_specs_are_rejected)
{
    static const struct {
        const char *spec, *token;
    } bad[] = {
        {"allgather=foo", "foo"},
        {"bogus=ring", "bogus"},
        {"allgather", "allgather"},
        {"allreduce=ring,reduce=ring", "ring"},
        {"allgather=", "allgather="},
        {"allreduce:16k-4k=rd", "16k-4k"},
        {"allreduce:4k=rd", "4k"},
        {"allreduce:x-=rd", "x-"},
        {"allreduce:-1-=rd", "-1-"},
    };
    size_t i;

    cr_expect_eq(spec_check(NULL), TACL_OK);
    cr_expect_eq(spec_check(""), TACL_OK);
    cr_expect_eq(spec_check("allgather=ring, allreduce=rd,"), TACL_OK);
    cr_expect_eq(spec_check("barrier=bruck,send=p2p"), TACL_OK);
    cr_expect_eq(spec_check("AllGather=RING"), TACL_OK);
    cr_expect_eq(spec_check("reducescatter=ring,reduce_scatter:-1M=rd"),
                 TACL_OK);
    cr_expect_eq(spec_check("allreduce=fast"), TACL_OK);
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        tacl__last_error_clear();
        cr_expect_eq(spec_check(bad[i].spec), TACL_ERR_INVALID_ARG,
                     "spec '%s' accepted", bad[i].spec);
        cr_expect(strstr(tacl__last_error(), bad[i].token) != NULL,
                  "message '%s' does not name '%s'", tacl__last_error(),
                  bad[i].token);
    }
}

/* Size ranges: [lo, hi) of count * dtype bytes, the last item wins. */
Test(select, forced_ranges)
{
    const char *spec = "allreduce:0-16k=rd, allreduce:16K-=ring, "
                       "allgather=bruck, allgather:1m-2m=ring";
    tacl__coll_args_t a = args_of(TACL_COLL_ALLREDUCE, 0);
    static const struct {
        tacl_coll_t coll;
        size_t count;
        const char *row;
    } cases[] = {
        {TACL_COLL_ALLREDUCE, 1, "rd"},
        {TACL_COLL_ALLREDUCE, 4095, "rd"},
        {TACL_COLL_ALLREDUCE, 4096, "ring"},
        {TACL_COLL_ALLREDUCE, 1 << 24, "ring"},
        {TACL_COLL_ALLGATHER, 1, "bruck"},
        {TACL_COLL_ALLGATHER, 1 << 18, "ring"},
        {TACL_COLL_ALLGATHER, (1 << 19) - 1, "ring"},
        {TACL_COLL_ALLGATHER, 1 << 19, "bruck"},
        {TACL_COLL_BROADCAST, 1, NULL},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const tacl__algo_t *row;

        a.type = cases[i].coll;
        a.count = cases[i].count;
        row = spec_row(spec, &a);
        if (cases[i].row == NULL)
            cr_expect_null(row, "case %zu forced %s", i, row->name);
        else
            cr_expect(row != NULL && strcmp(row->name, cases[i].row) == 0,
                      "case %zu: %s, want %s", i, row ? row->name : "none",
                      cases[i].row);
    }
}

Test(select, build_reports_the_algorithm)
{
    tacl__coll_args_t a = args_of(TACL_COLL_ALLGATHER, 4);
    tacl__topo_view_t v = view_of(1, 4);
    const tacl__algo_t *algo = NULL;
    float send[4] = {0}, recv[16];
    tacl__sched_t s;

    a.sendbuf = send;
    a.recvbuf = recv;
    tacl__sched_init(&s, 1, 4);
    cr_assert_eq(spec_build(&s, &a, &v, "allgather=ring", &algo),
                 TACL_OK);
    cr_assert_not_null(algo);
    cr_expect_str_eq(algo->name, "ring");
    cr_expect_gt(s.nsteps, 0);
    tacl__sched_fini(&s);
}

Test(select, names)
{
    cr_expect_str_eq(tacl_coll_name(TACL_COLL_ALLGATHER), "allgather");
    cr_expect_str_eq(tacl_coll_name(TACL_COLL_REDUCE_SCATTER),
                     "reduce_scatter");
    /* A user's spelling of a name: case, '_' and '-' do not matter. */
    cr_expect_eq(tacl__coll_from_name("reducescatter"),
                 TACL_COLL_REDUCE_SCATTER);
    cr_expect_eq(tacl__coll_from_name("Reduce-Scatter"),
                 TACL_COLL_REDUCE_SCATTER);
    cr_expect_eq(tacl__coll_from_name("reduce"), TACL_COLL_REDUCE);
    cr_expect_eq(tacl__coll_from_name("reduce_"), TACL_COLL_REDUCE);
    cr_expect_eq(tacl__coll_from_name("scatter"), -1);
    cr_expect_str_eq(tacl_coll_name(TACL_COLL_BARRIER), "barrier");
    cr_expect_str_eq(tacl_coll_name(TACL_NUM_COLLS), "invalid");
    cr_expect_not_null(tacl__algo_find(TACL_COLL_BARRIER, "bruck"));
    cr_expect_null(tacl__algo_find(TACL_COLL_BARRIER, "ring"));
}

Test(peers, block_range_covers_the_vector)
{
    static const size_t counts[] = {0, 1, 7, 16, 17, 1000};
    size_t ci, off, cnt, next;
    int i, b;

    for (ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++)
        for (i = 0; i < NN; i++) {
            int n = nranks_list[i];
            size_t lo = counts[ci] / (size_t)n;

            next = 0;
            for (b = 0; b < n; b++) {
                tacl__block_range(counts[ci], n, b, &off, &cnt);
                cr_expect_eq(off, next, "count %zu n %d block %d",
                             counts[ci], n, b);
                cr_expect(cnt == lo || cnt == lo + 1);
                next = off + cnt;
            }
            cr_expect_eq(next, counts[ci]);
        }
    cr_expect_eq(tacl__ring_next(4, 5), 0);
    cr_expect_eq(tacl__ring_prev(0, 5), 4);
}

/*
 * Runs one schedule per rank built by build(), which registers its own
 * memory as regions; fails the test on any runner error.
 */
static void run_all(simrun_t *sr, const char *what)
{
    char err[512];
    unsigned seed;

    for (seed = 1; seed <= 3; seed++)
        cr_assert_eq(simrun_run(sr, seed, err, sizeof(err)), 0,
                     "%s seed %u: %s", what, seed, err);
}

Test(p2p, ring_shift_of_sends_and_receives)
{
    int i, r;

    for (i = 0; i < NN; i++) {
        int n = nranks_list[i];
        simrun_t *sr = simrun_new(n);
        int32_t (*sbuf)[5] = calloc((size_t)n, sizeof(*sbuf));
        int32_t (*rbuf)[5] = calloc((size_t)n, sizeof(*rbuf));

        for (r = 0; r < n; r++) {
            tacl__coll_args_t a = args_of(TACL_COLL_SEND, 5);
            tacl__topo_view_t v = view_of(r, n);
            const tacl__algo_t *algo = NULL;
            int k;

            for (k = 0; k < 5; k++)
                sbuf[r][k] = r * 100 + k;
            simrun_region(sr, r, sbuf[r], sizeof(sbuf[r]), 0,
                          sizeof(sbuf[r]));
            simrun_region(sr, r, rbuf[r], sizeof(rbuf[r]), 0, 0);
            a.dtype = TACL_INT32;
            a.sendbuf = sbuf[r];
            a.root = (r + 1) % n;
            a.seq = 9;
            cr_assert_eq(spec_build(simrun_sched(sr, r), &a, &v, NULL,
                                          &algo), TACL_OK);
            cr_expect_str_eq(algo->name, "p2p");
            /* The receive joins the same schedule, as in a group. */
            a.type = TACL_COLL_RECV;
            a.sendbuf = NULL;
            a.recvbuf = rbuf[r];
            a.root = (r + n - 1) % n;
            cr_assert_eq(spec_build(simrun_sched(sr, r), &a, &v, NULL,
                                          NULL), TACL_OK);
        }
        run_all(sr, "send/recv");
        for (r = 0; r < n; r++) {
            int from = (r + n - 1) % n, k;

            for (k = 0; k < 5; k++)
                cr_expect_eq(rbuf[r][k], from * 100 + k, "n %d rank %d", n,
                             r);
            cr_expect_eq(simrun_bytes_sent(sr, r), sizeof(sbuf[r]));
        }
        simrun_free(sr);
        free(sbuf);
        free(rbuf);
    }
}

Test(barrier, every_rank_hears_from_every_rank)
{
    int i, r;

    for (i = 0; i < NN; i++) {
        int n = nranks_list[i], rounds = 0;
        simrun_t *sr = simrun_new(n);
        uint64_t all = n == 64 ? ~0ull : (1ull << n) - 1;

        while ((1 << rounds) < n)
            rounds++;
        for (r = 0; r < n; r++) {
            tacl__coll_args_t a = args_of(TACL_COLL_BARRIER, 0);
            tacl__topo_view_t v = view_of(r, n);

            cr_assert_eq(spec_build(simrun_sched(sr, r), &a, &v, NULL,
                                          NULL), TACL_OK);
        }
        run_all(sr, "barrier");
        for (r = 0; r < n; r++) {
            cr_expect_eq(simrun_knows(sr, r), all,
                         "n %d: rank %d left the barrier knowing only "
                         "0x%llx", n, r,
                         (unsigned long long)simrun_knows(sr, r));
            cr_expect_eq(simrun_msgs_sent(sr, r), (uint64_t)rounds);
            cr_expect_eq(simrun_bytes_sent(sr, r), 0);
        }
        simrun_free(sr);
    }
}

/*
 * An all-reduce of arbitrary floats must give every rank the same bits,
 * whatever order the sums were formed in.
 */
Test(allreduce, results_agree_bitwise_across_ranks)
{
    static const char *const algos[] = {"ring", "rd"};
    const size_t count = 777;
    size_t ai, k;
    int i, r;

    for (ai = 0; ai < 2; ai++)
        for (i = 1; i < NN; i++) {
            int n = nranks_list[i];
            simrun_t *sr = simrun_new(n);
            float *in = malloc((size_t)n * count * sizeof(float));
            float *out = malloc((size_t)n * count * sizeof(float));
            const tacl__algo_t *algo =
                tacl__algo_find(TACL_COLL_ALLREDUCE, algos[ai]);

            srand(7);
            for (k = 0; k < (size_t)n * count; k++)
                in[k] = (float)rand() / (float)RAND_MAX - 0.5f;
            for (r = 0; r < n; r++) {
                tacl__coll_args_t a = args_of(TACL_COLL_ALLREDUCE, count);
                tacl__topo_view_t v = view_of(r, n);

                a.sendbuf = in + (size_t)r * count;
                a.recvbuf = out + (size_t)r * count;
                a.chunk_bytes = 256;
                simrun_region(sr, r, in + (size_t)r * count,
                              count * sizeof(float), 0,
                              count * sizeof(float));
                simrun_region(sr, r, out + (size_t)r * count,
                              count * sizeof(float), 0, 0);
                cr_assert_eq(algo->build(simrun_sched(sr, r), &a, &v),
                             TACL_OK);
            }
            run_all(sr, algos[ai]);
            for (r = 1; r < n; r++)
                cr_expect_eq(memcmp(out, out + (size_t)r * count,
                                    count * sizeof(float)), 0,
                             "%s n %d: rank %d differs from rank 0",
                             algos[ai], n, r);
            for (k = 0; k < count; k++) {
                double ref = 0;

                for (r = 0; r < n; r++)
                    ref += in[(size_t)r * count + k];
                cr_expect(out[k] - ref < 1e-4 && ref - out[k] < 1e-4,
                          "%s n %d element %zu: %g vs %g", algos[ai], n, k,
                          (double)out[k], ref);
            }
            simrun_free(sr);
            free(in);
            free(out);
        }
}

/*
 * Two operations fused into one schedule per rank (a group): their tags
 * must not collide and both results must be right.
 */
Test(group, allgather_and_allreduce_fused)
{
    const size_t count = 10;
    int i, r, j;
    size_t k;

    for (i = 0; i < NN; i++) {
        int n = nranks_list[i];
        simrun_t *sr = simrun_new(n);
        int32_t *in = malloc((size_t)n * count * sizeof(int32_t));
        int32_t *ag = malloc((size_t)n * n * count * sizeof(int32_t));
        int32_t *ar = malloc((size_t)n * count * sizeof(int32_t));

        for (k = 0; k < (size_t)n * count; k++)
            in[k] = (int32_t)k;
        for (r = 0; r < n; r++) {
            tacl__topo_view_t v = view_of(r, n);
            tacl__coll_args_t a = args_of(TACL_COLL_ALLGATHER, count);
            int32_t *mine = in + (size_t)r * count;

            a.dtype = TACL_INT32;
            simrun_region(sr, r, mine, count * 4, 0, count * 4);
            simrun_region(sr, r, ag + (size_t)r * n * count,
                          (size_t)n * count * 4, 0, 0);
            simrun_region(sr, r, ar + (size_t)r * count, count * 4, 0, 0);
            a.sendbuf = mine;
            a.recvbuf = ag + (size_t)r * n * count;
            a.seq = 1;
            a.chunk_bytes = 8;
            cr_assert_eq(spec_build(simrun_sched(sr, r), &a, &v,
                                          "allgather=ring", NULL), TACL_OK);
            a.type = TACL_COLL_ALLREDUCE;
            a.recvbuf = ar + (size_t)r * count;
            a.seq = 2;
            cr_assert_eq(spec_build(simrun_sched(sr, r), &a, &v,
                                          "allreduce=ring", NULL), TACL_OK);
        }
        run_all(sr, "group");
        for (r = 0; r < n; r++)
            for (k = 0; k < count; k++) {
                int64_t sum = 0;

                for (j = 0; j < n; j++) {
                    sum += in[(size_t)j * count + k];
                    cr_expect_eq(ag[((size_t)r * n + j) * count + k],
                                 in[(size_t)j * count + k]);
                }
                cr_expect_eq(ar[(size_t)r * count + k], sum);
            }
        simrun_free(sr);
        free(in);
        free(ag);
        free(ar);
    }
}

/* Ring schedules grow with ranks times chunks, never ranks squared. */
Test(ring, schedule_stays_compact)
{
    static const int ns[] = {16, 64, 256};
    size_t i;

    for (i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
        int n = ns[i];
        tacl__coll_args_t a = args_of(TACL_COLL_ALLREDUCE, (size_t)n * 64);
        tacl__topo_view_t v = view_of(n / 2, n);
        float *buf = calloc((size_t)n * 64, sizeof(float));
        tacl__sched_t s;
        uint32_t j, maxdeps = 0;

        a.sendbuf = buf;
        a.recvbuf = buf;
        a.chunk_bytes = 64; /* four chunks per block */
        tacl__sched_init(&s, n / 2, n);
        cr_assert_eq(tacl__ring_build(&s, &a, &v), TACL_OK);
        for (j = 0; j < s.nsteps; j++)
            maxdeps = s.steps[j].ndeps > maxdeps ? s.steps[j].ndeps
                                                 : maxdeps;
        /* RS: send, recv, reduce per chunk; AG: send, recv per chunk. */
        cr_expect_leq(s.nsteps, (uint32_t)(5 * (n - 1) * 4 + 8),
                      "n %d: %u steps", n, s.nsteps);
        cr_expect_leq(maxdeps, 2, "n %d: a step has %u dependencies", n,
                      maxdeps);
        tacl__sched_fini(&s);
        free(buf);
    }
}

/*
 * In a fresh schedule over the 64 bytes at buf: reduce 4 floats at 0 and
 * nsrc runs of 4 floats from byte 16, stride apart, into byte dst.
 */
static int32_t reduce_n_in(tacl__sched_t *s, char *buf, uint64_t dst,
                           int nsrc, uint64_t stride)
{
    int32_t b;

    tacl__sched_reset(s);
    b = tacl__sched_buf(s, buf, 64, TACL__BUF_OUTPUT, TACL_MEM_HOST);
    return tacl__sched_reduce_n(s, tacl__bref(b, dst), tacl__bref(b, 0),
                                tacl__bref(b, 16), nsrc, stride, 4,
                                TACL_FLOAT32, TACL_SUM, TACL__NO_DEPS);
}

/* Builder mistakes become the schedule's sticky error, never a crash. */
Test(sched, builder_errors_are_sticky)
{
    char buf[64], line[160];
    tacl__sched_t s;
    int32_t b, a, c;

    tacl__sched_init(&s, 0, 2);
    b = tacl__sched_buf(&s, buf, sizeof(buf), TACL__BUF_OUTPUT,
                        TACL_MEM_HOST);
    a = tacl__sched_copy(&s, tacl__bref(b, 0), tacl__bref(b, 32), 32,
                         TACL__NO_DEPS);
    c = tacl__sched_send(&s, 1, tacl__bref(b, 0), 64, 5,
                         TACL__DEPS(a, -1, a));
    cr_assert_eq(a, 0);
    cr_assert_eq(c, 1);
    cr_expect_eq(s.steps[c].ndeps, 1, "duplicate dependencies kept");
    cr_expect_eq(tacl__sched_deps(&s, c)[0], (uint32_t)a);
    tacl__sched_step_str(&s, (uint32_t)c, line, sizeof(line));
    cr_expect(strstr(line, "send peer 1") != NULL, "%s", line);
    /* Past the end of the buffer. */
    cr_expect_eq(tacl__sched_recv(&s, 1, tacl__bref(b, 40), 32, 6,
                                  TACL__NO_DEPS), -1);
    cr_expect_eq(tacl__sched_status(&s), TACL_ERR_INTERNAL);
    /* Sticky: a valid step is refused now. */
    cr_expect_eq(tacl__sched_nop(&s, TACL__NO_DEPS), -1);
    tacl__sched_reset(&s);
    cr_expect_eq(tacl__sched_status(&s), TACL_OK);
    cr_expect_eq(s.nsteps, 0);
    /* A dependency that is not an earlier step; a bad peer; avg. */
    b = tacl__sched_buf(&s, buf, sizeof(buf), TACL__BUF_OUTPUT,
                        TACL_MEM_HOST);
    cr_expect_eq(tacl__sched_nop(&s, TACL__DEPS(0)), -1);
    tacl__sched_reset(&s);
    b = tacl__sched_buf(&s, buf, sizeof(buf), TACL__BUF_OUTPUT,
                        TACL_MEM_HOST);
    cr_expect_eq(tacl__sched_send(&s, 2, tacl__bref(b, 0), 1, 0,
                                  TACL__NO_DEPS), -1);
    tacl__sched_reset(&s);
    b = tacl__sched_buf(&s, buf, sizeof(buf), TACL__BUF_OUTPUT,
                        TACL_MEM_HOST);
    cr_expect_eq(tacl__sched_reduce(&s, tacl__bref(b, 0), tacl__bref(b, 0),
                                    tacl__bref(b, 16), 4, TACL_FLOAT32,
                                    TACL_AVG, TACL__NO_DEPS), -1);
    /* Several second sources: overlapping ones, one past the end, and an
     * output on a later one are refused; the output on the first is not. */
    tacl__sched_reset(&s);
    cr_expect_eq(reduce_n_in(&s, buf, 0, 3, 16), 0);
    cr_expect_eq(reduce_n_in(&s, buf, 16, 3, 16), 0);
    cr_expect_eq(reduce_n_in(&s, buf, 32, 3, 16), -1,
                 "output on the second source");
    cr_expect_eq(reduce_n_in(&s, buf, 0, 2, 8), -1, "sources 8 bytes apart");
    cr_expect_eq(reduce_n_in(&s, buf, 0, 4, 16), -1,
                 "last source past the buffer");
    tacl__sched_fini(&s);
}

/*
 * A small sub-schedule for the composition tests: an input of 32 bytes,
 * an output of 64 and 16 bytes of shared scratch; the input copied to
 * the output's start, sent from there, a receive into scratch reduced
 * into the output's second half, and a NOP joining the send and the
 * reduction.
 */
static void sub_schedule(tacl__sched_t *t)
{
    int32_t in, out, scr, cp, snd, rcv, red;

    tacl__sched_init(t, 0, 2);
    in = tacl__sched_buf(t, NULL, 32, TACL__BUF_INPUT, TACL_MEM_HOST);
    out = tacl__sched_buf(t, NULL, 64, TACL__BUF_OUTPUT, TACL_MEM_HOST);
    scr = tacl__sched_scratch_shared(t, 16);
    cp = tacl__sched_copy(t, tacl__bref(out, 0), tacl__bref(in, 0), 32,
                          TACL__NO_DEPS);
    snd = tacl__sched_send(t, 1, tacl__bref(out, 0), 32, 7, TACL__DEPS(cp));
    rcv = tacl__sched_recv(t, 1, tacl__bref(scr, 0), 16, 8, TACL__NO_DEPS);
    red = tacl__sched_reduce(t, tacl__bref(out, 32), tacl__bref(out, 32),
                             tacl__bref(scr, 0), 4, TACL_FLOAT32, TACL_SUM,
                             TACL__DEPS(rcv));
    tacl__sched_nop(t, TACL__DEPS(snd, red));
    cr_assert_eq(tacl__sched_status(t), TACL_OK);
}

static int has_dep(const tacl__sched_t *s, int32_t id, int32_t dep)
{
    for (uint32_t k = 0; k < s->steps[id].ndeps; k++)
        if (tacl__sched_deps(s, (uint32_t)id)[k] == (uint32_t)dep)
            return 1;
    return 0;
}

static void assert_ref(tacl__bref_t r, int32_t buf, uint64_t off,
                       const char *what)
{
    cr_assert(r.buf == (uint32_t)buf && r.off == off,
              "%s at b%u+%llu, expected b%d+%llu", what, r.buf,
              (unsigned long long)r.off, buf, (unsigned long long)off);
}

/*
 * Appending a sub-schedule moves every reference to where the map puts
 * its buffer, plus the buffer's offset; keeps its dependencies between
 * the copies of its steps; makes the steps that read a buffer wait for
 * the step that fills it, and no others; and gives its scratch a buffer
 * of its own.
 */
Test(sched, append_maps_buffers_and_dependencies)
{
    char mem[256];
    tacl__sched_t s, t;
    tacl__sched_map_t map[3];
    int32_t big, ids[5], fill, first;

    sub_schedule(&t);
    tacl__sched_init(&s, 0, 2);
    big = tacl__sched_buf(&s, mem, sizeof(mem), TACL__BUF_OUTPUT,
                          TACL_MEM_HOST);
    first = tacl__sched_nop(&s, TACL__NO_DEPS);
    fill = tacl__sched_nop(&s, TACL__NO_DEPS);
    map[0] = (tacl__sched_map_t){tacl__bref(big, 100), fill};
    map[1] = (tacl__sched_map_t){tacl__bref(big, 128), -1};
    map[2] = (tacl__sched_map_t){tacl__bref(TACL__SCHED_NEW, 0), -1};
    cr_assert_eq(tacl__sched_append(&s, &t, map, ids), TACL_OK, "%s",
                 tacl__last_error());
    cr_assert_eq(s.nsteps, 2 + t.nsteps);
    cr_assert_eq(s.nbufs, 2, "the scratch did not get a buffer of its own");
    cr_expect(s.bufs[1].role == TACL__BUF_SCRATCH && s.bufs[1].size == 16 &&
                  s.bufs[1].shared,
              "the scratch changed kind: role %d, %llu bytes, shared %d",
              s.bufs[1].role, (unsigned long long)s.bufs[1].size,
              s.bufs[1].shared);
    for (int i = 0; i < 5; i++)
        cr_expect_eq(s.steps[ids[i]].kind, t.steps[i].kind, "step %d", i);
    assert_ref(s.steps[ids[0]].dst, big, 128, "the copy's output");
    assert_ref(s.steps[ids[0]].src, big, 100, "the copy's input");
    assert_ref(s.steps[ids[1]].src, big, 128, "the send's source");
    assert_ref(s.steps[ids[2]].dst, 1, 0, "the receive's destination");
    assert_ref(s.steps[ids[3]].dst, big, 160, "the reduction's output");
    assert_ref(s.steps[ids[3]].src2, 1, 0, "the reduction's scratch");
    cr_expect(s.steps[ids[0]].ndeps == 1 && has_dep(&s, ids[0], fill),
              "the copy of the input does not wait for it to be filled");
    cr_expect(s.steps[ids[1]].ndeps == 1 && has_dep(&s, ids[1], ids[0]),
              "the send lost its dependency on the copy");
    cr_expect_eq(s.steps[ids[2]].ndeps, 0, "the receive reads nothing and "
                 "waits for something");
    cr_expect(s.steps[ids[3]].ndeps == 1 && has_dep(&s, ids[3], ids[2]));
    cr_expect(s.steps[ids[4]].ndeps == 2 && has_dep(&s, ids[4], ids[1]) &&
                  has_dep(&s, ids[4], ids[3]));
    cr_expect(!has_dep(&s, ids[0], first));
    tacl__sched_fini(&t);
    tacl__sched_fini(&s);
}

/*
 * A copy the map turns onto itself becomes a NOP with the copy's
 * dependencies; a map that places a buffer where it does not fit, or a
 * sub-schedule of another rank, is the schedule's error.
 */
Test(sched, append_folds_self_copies_and_rejects_bad_maps)
{
    char mem[256];
    tacl__sched_t s, t;
    tacl__sched_map_t map[3];
    int32_t big, ids[5], fill;

    sub_schedule(&t);
    tacl__sched_init(&s, 0, 2);
    big = tacl__sched_buf(&s, mem, sizeof(mem), TACL__BUF_OUTPUT,
                          TACL_MEM_HOST);
    fill = tacl__sched_nop(&s, TACL__NO_DEPS);
    map[0] = (tacl__sched_map_t){tacl__bref(big, 64), fill};
    map[1] = (tacl__sched_map_t){tacl__bref(big, 64), -1};
    map[2] = (tacl__sched_map_t){tacl__bref(big, 0), -1};
    cr_assert_eq(tacl__sched_append(&s, &t, map, ids), TACL_OK);
    cr_expect_eq(s.steps[ids[0]].kind, TACL__STEP_NOP);
    cr_expect(has_dep(&s, ids[0], fill));
    assert_ref(s.steps[ids[2]].dst, big, 0, "the mapped scratch");
    cr_expect_eq(s.nbufs, 1);

    tacl__sched_reset(&s);
    big = tacl__sched_buf(&s, mem, sizeof(mem), TACL__BUF_OUTPUT,
                          TACL_MEM_HOST);
    map[0] = (tacl__sched_map_t){tacl__bref(big, 0), -1};
    map[1] = (tacl__sched_map_t){tacl__bref(big, 224), -1};
    cr_expect_eq(tacl__sched_append(&s, &t, map, NULL), TACL_ERR_INTERNAL,
                 "an output mapped past the end of its buffer");

    tacl__sched_fini(&s);
    tacl__sched_init(&s, 1, 2);
    big = tacl__sched_buf(&s, mem, sizeof(mem), TACL__BUF_OUTPUT,
                          TACL_MEM_HOST);
    map[1] = (tacl__sched_map_t){tacl__bref(big, 64), -1};
    cr_expect_eq(tacl__sched_append(&s, &t, map, NULL), TACL_ERR_INTERNAL,
                 "a sub-schedule of rank 0 appended for rank 1");
    tacl__sched_fini(&t);
    tacl__sched_fini(&s);
}

/*
 * The cost model's table names every link class, with figures for the
 * host and the network the tuner falls back to.
 */
Test(select, cost_table_prints_every_link_class)
{
    char *text = NULL, line[64];
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);

    cr_assert_not_null(f);
    tacl__cost_print(f);
    cr_assert_eq(fclose(f), 0);
    for (int c = 0; c < TACL_NUM_LINK_CLASSES; c++) {
        const char *name = tacl__link_class_name((tacl_link_class_t)c);

        snprintf(line, sizeof(line), "\n%-6s ", name);
        cr_assert_not_null(strstr(text, line), "no row for link class %s "
                           "in:\n%s", name, text);
    }
    snprintf(line, sizeof(line), "\n%-6s %12.3g %12.3g\n", "net", 10.0, 1.25);
    cr_assert_not_null(strstr(text, line), "network row missing in:\n%s",
                       text);
    free(text);
}
