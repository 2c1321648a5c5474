/*
 * The planner: Cupcake's search (with its prunings and the dominance
 * pruning) against exhaustive search of every contiguous grouping, in the
 * same timeline model, on 1,000 random profiles of at most 20 tensors, for
 * each option; the plan never predicted slower than uncompressed; bad
 * profiles refused with a message naming what is wrong.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "planner.h"
#include "rng.h"

#define NPROFILES 1000
#define MAX_TENSORS 20

static tt_rng_t rng = {0x9e3779b97f4a7c15ull};

static double uniform(double lo, double hi)
{
    return lo + (hi - lo) * (double)(tt_rng_next(&rng) >> 11) * 0x1p-53;
}

/* log-uniform in [lo, hi] */
static double spread(double lo, double hi)
{
    return lo * pow(hi / lo, uniform(0, 1));
}

typedef struct {
    double bytes[MAX_TENSORS], back[MAX_TENSORS];
    tacl_planner_model_t model;
    tacl_planner_comm_t comm;
    tacl_planner_codec_t codecs[2];
} profile_t;

/* A random profile: sizes, backward times, network and two codecs (a
 * summable cast and a gathered sparsifier) over wide ranges, so that
 * compression wins in some and loses in others. */
static void random_profile(profile_t *pf, int n)
{
    for (int i = 0; i < n; i++) {
        pf->bytes[i] = floor(spread(1e3, 64e6));
        pf->back[i] = spread(1e-5, 5e-3);
    }
    pf->model = (tacl_planner_model_t){n, pf->bytes, pf->back,
                                       spread(1e-3, 3e-2)};
    pf->comm =
        (tacl_planner_comm_t){.ranks = 2 + (int)(tt_rng_next(&rng) % 15),
                              .alpha = spread(5e-6, 1e-3),
                              .beta_allreduce = 2.0 / spread(1e8, 1e11),
                              .beta_allgather = 1.0 / spread(1e8, 1e11)};
    pf->codecs[0] = (tacl_planner_codec_t){"fp16",
                                           spread(5e-6, 2e-4),
                                           1.0 / spread(1e10, 1e12),
                                           spread(5e-6, 2e-4),
                                           1.0 / spread(1e10, 1e12),
                                           0.5,
                                           1,
                                           0,
                                           0,
                                           0};
    pf->codecs[1] = (tacl_planner_codec_t){"topk",
                                           spread(5e-5, 2e-3),
                                           1.0 / spread(1e9, 1e11),
                                           spread(5e-6, 5e-4),
                                           1.0 / spread(1e10, 1e12),
                                           spread(0.005, 0.1),
                                           0,
                                           0,
                                           0,
                                           0};
}

/* The best end of every grouping of tensors k.. from a state: all of the
 * 2^(n-1) contiguous groupings, each group under option. */
static void exhaustive(const tacl_planner_t *p, const profile_t *pf, int opt,
                       int k, double cmp, double q, double *best)
{
    int n = pf->model.ntensors;
    double back = 0.0;

    if (k == n) {
        *best = fmin(*best, fmax(cmp, q));
        return;
    }
    for (int i = k; i < n; i++) {
        double h, g, ready;
        back += pf->back[i];
        tacl_planner_group_cost(p, opt, k, i, &h, &g);
        ready = cmp + back + h;
        exhaustive(p, pf, opt, i + 1, ready, fmax(ready, q) + g, best);
    }
}

static int same_time(double a, double b)
{
    return fabs(a - b) <= 1e-9 * fmax(fabs(a), fabs(b));
}

Test(planner, cupcake_equals_exhaustive_search, .timeout = 300)
{
    int compressed = 0, refused = 0, options[MAX_TENSORS], first[MAX_TENSORS];

    for (int pi = 0; pi < NPROFILES; pi++) {
        int n = 1 + (int)(tt_rng_next(&rng) % MAX_TENSORS), ngroups;
        tacl_planner_plan_t plan;
        tacl_planner_t *p;
        profile_t pf;
        double best_none = INFINITY, best_any = INFINITY;

        random_profile(&pf, n);
        cr_assert_eq(tacl_planner_create(&pf.model, &pf.comm, pf.codecs, 2,
                                         &p),
                     TACL_OK, "%s", tacl_planner_last_error());
        for (int o = TACL_PLANNER_NONE; o < 2; o++) {
            double t, best = INFINITY;
            cr_assert_eq(tacl_planner_fuse(p, o, first, &ngroups, &t, NULL),
                         TACL_OK);
            exhaustive(p, &pf, o, 0, 0.0, 0.0, &best);
            best += pf.model.forward;
            cr_assert(same_time(t, best),
                      "profile %d (%d tensors), option %d: cupcake %.12g, "
                      "exhaustive %.12g",
                      pi, n, o, t, best);
            for (int gi = 0; gi < ngroups; gi++)
                options[gi] = o;
            cr_assert(same_time(tacl_planner_time(p, ngroups, first, options,
                                                  NULL),
                                t),
                      "the grouping returned takes the time returned");
            if (o == TACL_PLANNER_NONE)
                best_none = best;
            best_any = fmin(best_any, best);
        }
        cr_assert_eq(tacl_planner_plan(p, &plan), TACL_OK);
        cr_assert(same_time(plan.uncompressed_time, best_none));
        cr_assert_leq(plan.step_time, plan.uncompressed_time,
                      "profile %d: the plan is slower than uncompressed", pi);
        cr_assert_leq(plan.step_time, best_any * (1 + 1e-9),
                      "profile %d: the plan misses the best option", pi);
        cr_assert_leq(plan.uncompressed_time,
                      plan.layerwise_time * 1.0000001);
        cr_assert(same_time(plan.step_time,
                            tacl_planner_time(p, plan.ngroups, plan.first,
                                              plan.option, plan.on_cpu)));
        for (int gi = 0; gi < plan.ngroups; gi++)
            if (plan.option[gi] != TACL_PLANNER_NONE) {
                compressed++;
                break;
            }
        refused += plan.step_time == plan.uncompressed_time;
        tacl_planner_plan_free(&plan);
        tacl_planner_destroy(p);
    }
    /* The profiles cover both sides: compression wins in some. */
    cr_assert(compressed > 50 && refused > 50, "compressed %d, refused %d",
              compressed, refused);
}

Test(planner, bad_profiles_are_refused_by_name)
{
    double bytes[2] = {100, -1}, back[2] = {1e-3, 1e-3};
    tacl_planner_model_t m = {2, bytes, back, 1e-3};
    tacl_planner_comm_t c = {.ranks = 2,
                             .alpha = 1e-5,
                             .beta_allreduce = 1e-9,
                             .beta_allgather = 1e-9};
    tacl_planner_codec_t k = {"z", 0, 0, 0, 0, 0.0, 0, 0, 0, 0};
    tacl_planner_t *p = NULL;

    cr_assert_eq(tacl_planner_create(&m, &c, NULL, 0, &p),
                 TACL_ERR_INVALID_ARG);
    cr_assert(strstr(tacl_planner_last_error(), "tensor 1") != NULL, "%s",
              tacl_planner_last_error());
    bytes[1] = 5;
    cr_assert_eq(tacl_planner_create(&m, &c, &k, 1, &p),
                 TACL_ERR_INVALID_ARG);
    cr_assert(strstr(tacl_planner_last_error(), "codec 0 (z)") != NULL);
    k.ratio = 0.5;
    cr_assert_eq(tacl_planner_create(&m, &c, &k, 1, &p),
                 TACL_ERR_INVALID_ARG);
    cr_assert(strstr(tacl_planner_last_error(), "(z) is not a codec") != NULL,
              "%s", tacl_planner_last_error());
    m.ntensors = 0;
    cr_assert_eq(tacl_planner_create(&m, &c, NULL, 0, &p),
                 TACL_ERR_INVALID_ARG);
    cr_assert(strstr(tacl_planner_last_error(), "0 tensors") != NULL);
    cr_assert_null(p, "the output is set only on success");
    m.ntensors = 2;
    cr_assert_eq(tacl_planner_create(&m, &c, NULL, 0, &p), TACL_OK);
    int first[2], ng;
    double t;
    cr_assert_eq(tacl_planner_fuse(p, 0, first, &ng, &t, NULL),
                 TACL_ERR_INVALID_ARG);
    cr_assert(strstr(tacl_planner_last_error(), "option 0") != NULL);
    tacl_planner_destroy(p);
}

/* Bytes of group gi of a plan over n tensors. */
static double group_bytes(const profile_t *pf, const tacl_planner_plan_t *pl,
                          int gi)
{
    int end = gi + 1 < pl->ngroups ? pl->first[gi + 1]
                                   : pf->model.ntensors;
    double x = 0;

    for (int i = pl->first[gi]; i < end; i++)
        x += pf->bytes[i];
    return x;
}

/*
 * A codec's min_bytes: no group (plan) or tensor (decisions) smaller than
 * it is labelled with that codec, the prediction is the timeline's of
 * what is returned, and the refusal still holds; one small tensor whose
 * compression wins is compressed below the minimum only.
 */
Test(planner, min_bytes_keeps_small_groups_uncompressed, .timeout = 300)
{
    int compressed = 0, kept_dense = 0;

    for (int t = 0; t < 300; t++) {
        profile_t pf;
        tacl_planner_t *p;
        tacl_planner_plan_t pl;
        int n = 1 + (int)(tt_rng_next(&rng) % 12), codec[MAX_TENSORS],
            on_cpu[MAX_TENSORS];
        double tdec;

        random_profile(&pf, n);
        pf.codecs[1].min_bytes = spread(1e3, 64e6);
        cr_assert_eq(tacl_planner_create(&pf.model, &pf.comm, pf.codecs, 2,
                                         &p),
                     TACL_OK, "%s", tacl_planner_last_error());
        cr_assert_eq(tacl_planner_plan(p, &pl), TACL_OK);
        for (int gi = 0; gi < pl.ngroups; gi++) {
            double x = group_bytes(&pf, &pl, gi);
            if (pl.option[gi] == 1) {
                cr_assert_geq(x, pf.codecs[1].min_bytes,
                              "profile %d: group %d of %.0f bytes under topk",
                              t, gi, x);
                compressed++;
            }
            if (pl.option[gi] == 1 || x >= pf.codecs[1].min_bytes)
                continue;
            kept_dense++;
        }
        cr_assert_float_eq(pl.step_time,
                           tacl_planner_time(p, pl.ngroups, pl.first,
                                             pl.option, pl.on_cpu),
                           1e-9 * pl.step_time, "profile %d", t);
        cr_assert_leq(pl.step_time, pl.uncompressed_time * (1 + 1e-12));
        cr_assert_eq(tacl_planner_decide(p, codec, on_cpu, &tdec), TACL_OK);
        for (int i = 0; i < n; i++)
            cr_assert(codec[i] != 1 || pf.bytes[i] >= pf.codecs[1].min_bytes,
                      "profile %d: tensor %d of %.0f bytes under topk", t, i,
                      pf.bytes[i]);
        cr_assert_float_eq(tdec, tacl_planner_time_decided(p, codec, on_cpu),
                           1e-9 * tdec);
        tacl_planner_plan_free(&pl);
        tacl_planner_destroy(p);
    }
    cr_assert_gt(compressed, 0, "no profile compressed a group");
    cr_assert_gt(kept_dense, 0, "no profile had a small group");

    /* One 32 KiB tensor on a slow link: topk wins, unless its minimum is
     * above the tensor. */
    double bytes[1] = {32768}, back[1] = {1e-3};
    tacl_planner_model_t m = {1, bytes, back, 1e-3};
    tacl_planner_comm_t c = {.ranks = 4,
                             .alpha = 1e-5,
                             .beta_allreduce = 2e-8,
                             .beta_allgather = 1e-8};
    tacl_planner_codec_t k = {"topk", 0, 1e-11, 0, 1e-11, 0.02, 0, 0, 0, 0};
    for (int above = 0; above < 2; above++) {
        tacl_planner_t *p;
        tacl_planner_plan_t pl;
        k.min_bytes = above ? 65536 : 0;
        cr_assert_eq(tacl_planner_create(&m, &c, &k, 1, &p), TACL_OK);
        cr_assert_eq(tacl_planner_plan(p, &pl), TACL_OK);
        cr_assert_eq(pl.ngroups, 1);
        cr_assert_eq(pl.option[0], above ? TACL_PLANNER_NONE : 0,
                     "min_bytes %.0f", k.min_bytes);
        tacl_planner_plan_free(&pl);
        tacl_planner_destroy(p);
    }
    k.min_bytes = -1;
    cr_assert_eq(tacl_planner_create(&m, &c, &k, 1, &(tacl_planner_t *){0}),
                 TACL_ERR_INVALID_ARG);
    cr_assert(strstr(tacl_planner_last_error(), "codec 0 (topk)") != NULL,
              "%s", tacl_planner_last_error());
    cr_assert_eq(tacl_planner_min_bytes_default("topk"), 65536.0);
    cr_assert_eq(tacl_planner_min_bytes_default("fp16"), 0.0);
}

/* Two ranks as threads of this process: the fitted lines follow
 * tacl_comm_estimate at a size between the fitted ones.  The threads
 * record; the test's own thread asserts. */
static tacl_unique_id_t fit_id;

typedef struct {
    int rank;
    tacl_status_t st;
    tacl_planner_comm_t c;
    tacl_sim_info_t ar, ag;
} fit_rank_t;

#define FIT_BYTES ((size_t)3 << 20)

static void *fit_rank(void *arg)
{
    fit_rank_t *f = arg;
    tacl_comm_t comm;

    f->st = tacl_comm_init_rank(2, &fit_id, f->rank, &comm);
    if (f->st != TACL_OK)
        return NULL;
    f->st = tacl_planner_comm_fit(comm, &f->c);
    if (f->st == TACL_OK)
        f->st = tacl_comm_estimate(comm, TACL_COLL_ALLREDUCE, FIT_BYTES / 4,
                                   TACL_FLOAT32, TACL_SUM, 0, &f->ar);
    if (f->st == TACL_OK)
        f->st = tacl_comm_estimate(comm, TACL_COLL_ALLGATHER, FIT_BYTES,
                                   TACL_UINT8, TACL_SUM, 0, &f->ag);
    tacl_comm_destroy(comm);
    return NULL;
}

Test(planner, comm_lines_fit_the_estimate, .timeout = 120)
{
    fit_rank_t f[2] = {{.rank = 0}, {.rank = 1}};
    pthread_t t[2];

    cr_assert_eq(tacl_get_unique_id(&fit_id), TACL_OK);
    for (int r = 0; r < 2; r++)
        cr_assert_eq(pthread_create(&t[r], NULL, fit_rank, &f[r]), 0);
    for (int r = 0; r < 2; r++) {
        const tacl_planner_comm_t *c = &f[r].c;
        pthread_join(t[r], NULL);
        cr_assert_eq(f[r].st, TACL_OK, "rank %d: %s / %s", r,
                     tacl_last_error(), tacl_planner_last_error());
        cr_assert_eq(c->ranks, 2);
        cr_assert(c->beta_allreduce > 0 && c->beta_allgather > 0);
        cr_assert_float_eq(c->alpha + c->beta_allreduce * (double)FIT_BYTES,
                           f[r].ar.seconds, 0.1 * f[r].ar.seconds);
        cr_assert_float_eq(c->alpha + c->beta_allgather * (double)FIT_BYTES,
                           f[r].ag.seconds, 0.1 * f[r].ag.seconds);
    }
}

/*
 * Espresso's decisions against brute force over the reduced option set
 * {uncompressed, one codec on the device, that codec on the progress
 * thread} for every tensor (3^n plans), n <= 12: within 5%, and never
 * slower than uncompressed.
 */
#define ESPRESSO_PROFILES 200
#define ESPRESSO_MAX 12

static double brute_decided(const tacl_planner_t *p, int n, int *codec,
                            int *on_cpu)
{
    int digit[ESPRESSO_MAX] = {0};
    double best = INFINITY;

    for (;;) {
        int i = 0;
        for (int k = 0; k < n; k++) {
            codec[k] = digit[k] == 0 ? TACL_PLANNER_NONE : 0;
            on_cpu[k] = digit[k] == 2;
        }
        best = fmin(best, tacl_planner_time_decided(p, codec, on_cpu));
        while (i < n && digit[i] == 2)
            digit[i++] = 0;
        if (i == n)
            return best;
        digit[i]++;
    }
}

Test(planner, espresso_within_five_percent_of_brute_force, .timeout = 300)
{
    int codec[ESPRESSO_MAX], on_cpu[ESPRESSO_MAX], first[ESPRESSO_MAX];
    int compressed = 0, offloaded = 0;
    double worst = 1.0;

    for (int pi = 0; pi < ESPRESSO_PROFILES; pi++) {
        int n = 1 + (int)(tt_rng_next(&rng) % ESPRESSO_MAX);
        double t, brute, none;
        tacl_planner_t *p;
        profile_t pf;

        random_profile(&pf, n);
        pf.codecs[1].cpu_encode_fixed = spread(2e-6, 5e-5);
        pf.codecs[1].cpu_encode_per_byte = pf.codecs[1].encode_per_byte *
                                           spread(1, 20);
        cr_assert_eq(tacl_planner_create(&pf.model, &pf.comm, &pf.codecs[1],
                                         1, &p),
                     TACL_OK);
        cr_assert_eq(tacl_planner_decide(p, codec, on_cpu, &t), TACL_OK);
        cr_assert(same_time(t, tacl_planner_time_decided(p, codec, on_cpu)));
        for (int i = 0; i < n; i++) {
            compressed += codec[i] != TACL_PLANNER_NONE;
            offloaded += codec[i] != TACL_PLANNER_NONE && on_cpu[i];
        }
        /* On the device only, one call a tensor is the fusion model's
         * layer-wise plan: the two timelines agree. */
        for (int i = 0; i < n; i++) {
            first[i] = i;
            on_cpu[i] = 0;
        }
        cr_assert(same_time(tacl_planner_time_decided(p, codec, on_cpu),
                            tacl_planner_time(p, n, first, codec, NULL)));
        brute = brute_decided(p, n, codec, on_cpu);
        for (int i = 0; i < n; i++)
            codec[i] = TACL_PLANNER_NONE;
        none = tacl_planner_time_decided(p, codec, on_cpu);
        cr_assert_leq(t, none, "profile %d: slower than uncompressed", pi);
        cr_assert_leq(t, brute * 1.05,
                      "profile %d (%d tensors): espresso %.9g, brute force "
                      "%.9g",
                      pi, n, t, brute);
        worst = fmax(worst, t / brute);
        /* The plan weighs these decisions against fusion (a fusion within
         * a millionth of them is kept: fewer calls). */
        tacl_planner_plan_t plan;
        cr_assert_eq(tacl_planner_plan(p, &plan), TACL_OK);
        cr_assert_leq(plan.step_time, t * (1 + 1e-6));
        cr_assert(same_time(plan.step_time,
                            tacl_planner_time(p, plan.ngroups, plan.first,
                                              plan.option, plan.on_cpu)));
        tacl_planner_plan_free(&plan);
        tacl_planner_destroy(p);
    }
    cr_log_info("espresso: worst ratio to brute force %.4f; %d tensors "
                "compressed, %d of them on the progress thread",
                worst, compressed, offloaded);
    cr_assert(compressed > 0 && offloaded > 0, "compressed %d, offloaded %d",
              compressed, offloaded);
}

/*
 * tacl_planner_time_call on two ranks (threads) whose call sleeps a known
 * line, rank 1 twice rank 0's: every rank gets the slowest rank's line.
 * Then a call that fails on rank 1 alone at the larger count: both ranks
 * get its status, and neither waits for the other past the agreement.
 */
static tacl_unique_id_t time_id;

#define SLEEP_FIXED 2e-3
#define SLEEP_PER_BYTE 1e-9

typedef struct {
    int rank;
    size_t fail_at; /* a count this rank's call fails at, or 0 */
    tacl_status_t st, st_fail;
    double a, b;
    char why[256];
} time_rank_t;

static tacl_status_t sleep_call(void *arg, size_t count)
{
    const time_rank_t *t = arg;
    double s = (1 + t->rank) * (SLEEP_FIXED + SLEEP_PER_BYTE * 4.0 *
                                                  (double)count);
    struct timespec ts = {(time_t)s, (long)((s - floor(s)) * 1e9)};

    if (count == t->fail_at)
        return TACL_ERR_INVALID_ARG;
    nanosleep(&ts, NULL);
    return TACL_OK;
}

static void *time_rank(void *arg)
{
    time_rank_t *t = arg;
    const size_t counts[2] = {1 << 20, 1 << 22};
    double a, b;
    tacl_comm_t comm;

    t->st = tacl_comm_init_rank(2, &time_id, t->rank, &comm);
    if (t->st != TACL_OK)
        return NULL;
    t->st = tacl_planner_time_call(comm, sleep_call, t, counts, 4, &t->a,
                                   &t->b);
    t->fail_at = t->rank == 1 ? counts[1] : 0;
    t->st_fail = tacl_planner_time_call(comm, sleep_call, t, counts, 4, &a,
                                        &b);
    snprintf(t->why, sizeof(t->why), "%s", tacl_planner_last_error());
    tacl_comm_destroy(comm);
    return NULL;
}

Test(planner, time_call_takes_the_slowest_ranks_line, .timeout = 120)
{
    time_rank_t t[2] = {{.rank = 0}, {.rank = 1}};
    pthread_t th[2];

    cr_assert_eq(tacl_get_unique_id(&time_id), TACL_OK);
    for (int r = 0; r < 2; r++)
        cr_assert_eq(pthread_create(&th[r], NULL, time_rank, &t[r]), 0);
    for (int r = 0; r < 2; r++)
        pthread_join(th[r], NULL);
    for (int r = 0; r < 2; r++) {
        cr_assert_eq(t[r].st, TACL_OK, "rank %d: %s", r, t[r].why);
        /* Rank 1's line: 4 ms + 2 ns a byte.  Sleeps overshoot, by
         * about the same at both sizes, so the slope is the tighter. */
        cr_expect(t[r].b > 2 * SLEEP_PER_BYTE * 0.9 &&
                      t[r].b < 2 * SLEEP_PER_BYTE * 1.25,
                  "rank %d: %g s a byte, not rank 1's %g", r, t[r].b,
                  2 * SLEEP_PER_BYTE);
        cr_expect(t[r].a > 2 * SLEEP_FIXED * 0.9 &&
                      t[r].a < 2 * SLEEP_FIXED + 3e-3,
                  "rank %d: %g s fixed, not rank 1's %g", r, t[r].a,
                  2 * SLEEP_FIXED);
        cr_expect_eq(t[r].st_fail, TACL_ERR_INVALID_ARG,
                     "rank %d: a call failing on rank 1 gave %d", r,
                     t[r].st_fail);
        cr_expect(strstr(t[r].why, "failed at 4194304 elements") != NULL,
                  "rank %d: '%s'", r, t[r].why);
    }
    cr_expect(strstr(t[0].why, "on a peer") != NULL, "'%s'", t[0].why);
    cr_expect(t[0].a == t[1].a && t[0].b == t[1].b,
              "the ranks' lines differ");
}

/*
 * A codec priced by its timed call: a group of one tensor compressed
 * costs, after the backward, exactly the call's line, for a summable
 * codec (all-reduced as encoded) and for a gathered one (the ranks'
 * decodes counted); nothing is encoded on the compute stream.
 */
Test(planner, codec_from_call_prices_the_call)
{
    const tacl_planner_comm_t comm = {4, 1e-4, 8e-9, 6e-9};
    const char *names[2] = {"fp16", "topk"};
    const double ratio[2] = {0.5, 0.02}, call_a = 3e-3, call_b = 9e-9;

    for (int k = 0; k < 2; k++) {
        double bytes = 8e6, back = 0.05, fwd = 0.02;
        tacl_planner_model_t m = {1, &bytes, &back, fwd};
        tacl_planner_codec_t pc;
        tacl_planner_t *p = NULL;
        int first = 0, opt = 0;
        double t;

        cr_assert_eq(tacl_planner_codec_from_call(names[k], k == 0, ratio[k],
                                                  call_a, call_b, &comm, &pc),
                     TACL_OK, "%s", tacl_planner_last_error());

        cr_assert_str_eq(pc.name, names[k]);
        cr_assert_eq(pc.summable, k == 0);
        cr_assert_eq(pc.encode_fixed + pc.encode_per_byte, 0.0);
        cr_assert_eq(pc.min_bytes, tacl_planner_min_bytes_default(names[k]));
        cr_assert_eq(tacl_planner_create(&m, &comm, &pc, 1, &p), TACL_OK,
                     "%s", tacl_planner_last_error());
        t = tacl_planner_time(p, 1, &first, &opt, NULL);
        cr_expect_float_eq(t, fwd + back + call_a + call_b * bytes, 1e-12,
                           "%s: %.9g s, the call %.9g s", names[k], t,
                           fwd + back + call_a + call_b * bytes);
        tacl_planner_destroy(p);
    }
}

/* Bad input to tacl_planner_codec_from_call is refused by name. */
Test(planner, codec_from_call_refuses_bad_input)
{
    const tacl_planner_comm_t comm = {4, 1e-4, 8e-9, 6e-9};
    tacl_planner_codec_t pc;
    struct {
        const char *name;
        double ratio, a, b;
        const tacl_planner_comm_t *lines;
        tacl_planner_codec_t *out;
        const char *says;
    } bad[] = {
        {NULL, 0.5, 1e-3, 1e-9, &comm, &pc, "NULL"},
        {"fp16", 0.5, 1e-3, 1e-9, NULL, &pc, "NULL"},
        {"fp16", 0.5, 1e-3, 1e-9, &comm, NULL, "NULL"},
        {"fp16", 0.0, 1e-3, 1e-9, &comm, &pc, "ratio 0"},
        {"fp16", 0.5, -1e-3, 1e-9, &comm, &pc, "-0.001 s"},
        {"fp16", 0.5, 1e-3, NAN, &comm, &pc, "nan s/B"},
        {"fp16", INFINITY, 1e-3, 1e-9, &comm, &pc, "ratio inf"},
    };

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cr_expect_eq(tacl_planner_codec_from_call(bad[i].name, 1,
                                                  bad[i].ratio, bad[i].a,
                                                  bad[i].b, bad[i].lines,
                                                  bad[i].out),
                     TACL_ERR_INVALID_ARG, "case %zu accepted", i);
        cr_expect(strstr(tacl_planner_last_error(), bad[i].says) != NULL,
                  "case %zu: '%s' does not say '%s'", i,
                  tacl_planner_last_error(), bad[i].says);
    }
}
