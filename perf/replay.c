/*
 * replay: a model's training step replayed on a tacl job, with compute
 * stand-ins, real codecs and real collectives, so that the gradient
 * policies of issue 30 run side by side on one communicator:
 *
 *   tools/tacl-cluster --nodes 2 --ranks-per-node 2 --inter-rate 1gbit -- \
 *       build/perf/replay --model bert-base [--steps 10] [--codec topk]
 *
 * Each rank holds one flat float32 gradient buffer of random values (on a
 * grid whose sums are exact, so --check can compare bit for bit), reduced
 * in place as DDP reduces its buckets and refilled before each step, out
 * of the step's time: with no second copy, VGG16 (553 MB of gradients)
 * runs 8 ranks on one 24 GB machine.  A step
 * waits the forward seconds, then each tensor's backward seconds in
 * gradient-ready order (sleeping, or spinning with --compute spin); when
 * the last tensor of a group is ready, the group is handed to the
 * harness' communication thread, which runs the groups in order on the
 * communicator: an uncompressed group is posted with tacl_allreduce_nb
 * (progressed by the library's progress thread) and a compressed one runs
 * the blocking tacl_comp_allreduce_hops over its route, with the group's
 * slice of an error-feedback buffer, allocated while a policy that
 * compresses runs.  So compute overlaps both kinds.
 * A compressed group's route is the call's scheme (the codec's own,
 * gather or sum, or shuffle: Espresso's indivisible and divisible
 * schemes) and its hops (encoded on every hop, or only between nodes
 * with dense hops inside each node).  Every route asked for (--schemes,
 * --hops; on one node only every hop) is timed, and each is a codec
 * option of its own to the planner, which so chooses a route per group,
 * as Espresso's decision tree does per tensor.  The layer-wise and
 * threshold policies take one route for all: the codec's own scheme
 * over the hops quicker for a group of a sixteenth of the model.
 * The step ends when every group is done; its time is the median over
 * the steps after the warm-up of the slowest rank's.
 *
 * The compute-to-communication ratio (--ratio, default 0.86): the
 * profile's times are rescaled so that forward plus backward equals ratio
 * times the predicted uncompressed all-reduce of the whole model on this
 * communicator.  The thesis' Cupcake testbed (section 5.2: ResNet50 on 8
 * GPUs over PCIe) measured a 48 ms single-GPU iteration against 56 ms of
 * uncompressed communication, 0.86; Espresso's testbeds (Table 4.1:
 * scaling factors 0.51 to 0.58 for GPT-2 and BERT-base) are of the same
 * order, communication a little above compute.
 *
 * Policies: uncompressed (DDP's default buckets, 25 MB after a first of
 * 1 MB), layerwise (every tensor compressed alone), threshold (HiPress:
 * tensors above --threshold compressed, layer-wise), bucket-N (N MB DDP
 * buckets, uncompressed, N = 2..64), even-N (N groups of equal bytes,
 * uncompressed, N = 2..32) and planned (tacl_planner_plan on codec costs
 * timed in this job and communication lines from tacl_planner_comm_fit).
 */
#define _GNU_SOURCE
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "common.h"
#include "parse.h"
#include "replay.h"

#define USAGE                                                                \
    "usage: replay (--model NAME | --profile FILE) [options]\n"              \
    "  started by a launcher: tools/tacl-run -n 4 replay --model "           \
    "bert-base\n"                                                            \
    "  --model NAME       resnet50, resnet101, bert-base, vgg16, "           \
    "gpt2-small\n"                                                           \
    "  --profiles DIR     where the models' profiles are (default: the\n"    \
    "                     source tree's perf/profiles)\n"                    \
    "  --profile FILE     a profile in tacl-plan's format instead\n"         \
    "  --steps N          measured steps per policy (default 10)\n"          \
    "  --warmup N         steps before them (default 2)\n"                   \
    "  --codec NAME       codec of compressed groups (default topk):\n"      \
    "                     fp16, bf16, int8, int4, topk, threshold, randk, "  \
    "sign\n"                                                                 \
    "  --density D        topk/threshold/randk share kept (default 0.01)\n"  \
    "  --threshold SIZE   the threshold policy's size (default 1M)\n"        \
    "  --ratio R          compute seconds per uncompressed communication\n"  \
    "                     second (default 0.86, the thesis' testbed)\n"      \
    "  --policies LIST    comma list of uncompressed, layerwise, "           \
    "threshold,\n"                                                           \
    "                     bucket, even, planned (default: all)\n"            \
    "  --hops H           all, inter or auto (default): the hops that carry\n" \
    "                     encoded data in compressed groups\n"             \
    "  --schemes S        own (the codec's: gather, or sum if summable) or\n" \
    "                     all (default: also shuffle) for planned groups\n" \
    "  --compute MODE     sleep (default) or spin for compute stand-ins\n"   \
    "  --check            compare results: uncompressed against a local\n"   \
    "                     reference, every policy across ranks\n"            \
    "  --inject-error     --check with one value made wrong (tests)\n"       \
    "  --version, --help\n"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#ifndef REPLAY_PROFILE_DIR
#define REPLAY_PROFILE_DIR "perf/profiles"
#endif

static const char *const models[] = {"resnet50", "resnet101", "bert-base",
                                     "vgg16", "gpt2-small"};
static const char *const policy_names[] = {"uncompressed", "layerwise",
                                           "threshold",    "bucket",
                                           "even",         "planned"};
enum { P_UNCOMP, P_LAYER, P_THRESH, P_BUCKET, P_EVEN, P_PLANNED, P_COUNT };
static const int bucket_mb[] = {2, 4, 8, 16, 32, 64};
static const int even_groups[] = {2, 4, 8, 16, 32};

typedef struct {
    const char *model, *profile, *profiles, *codec;
    replay_steps_t run;
    double density, threshold, ratio;
    int hops;    /* a tacl_comp_hops_t, or -1: auto */
    int shuffle; /* planned groups may take the shuffle scheme */
    int want[P_COUNT];
} options_t;

/* The options that take a value. */
static int takes_value(const char *opt)
{
    static const char *const opts[] = {
        "--model", "--profile", "--profiles", "--codec",
        "--steps", "--warmup",  "--density",  "--threshold",
        "--ratio", "--compute", "--policies", "--hops",
        "--schemes",
    };

    for (size_t k = 0; k < ARRAY_LEN(opts); k++)
        if (strcmp(opt, opts[k]) == 0)
            return 1;
    return 0;
}

/* Why a value is refused, naming the option; 2 (the exit code). */
static int bad(const char *opt, const char *val, const char *why)
{
    fprintf(stderr, "replay: bad value '%s' for %s: %s\n%s", val, opt, why,
            USAGE);
    return 2;
}

static int parse_policies(char *list, options_t *o)
{
    memset(o->want, 0, sizeof(o->want));
    for (char *s = strtok(list, ","); s != NULL; s = strtok(NULL, ",")) {
        int p = 0;

        while (p < P_COUNT && strcmp(s, policy_names[p]) != 0)
            p++;
        if (p == P_COUNT)
            return -1;
        o->want[p] = 1;
    }
    return 0;
}

/* 0 to run, else the exit code (0 after --help and --version). */
static int parse(int argc, char **argv, options_t *o, int *exit_p)
{
    static char policies[256];
    tacl__parse_err_t e = TACL_PARSE_OK;

    for (int p = 0; p < P_COUNT; p++)
        o->want[p] = 1;
    for (int i = 1; i < argc; i++) {
        const char *opt = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        uint64_t n = 0;

        *exit_p = 0;
        if (tacl__perf_first_contact(opt, "replay", "tacl replay harness",
                                     USAGE))
            return 1;
        *exit_p = 2;
        if (strcmp(opt, "--check") == 0 ||
            strcmp(opt, "--inject-error") == 0) {
            o->run.check = 1;
            o->run.inject_error |= opt[2] == 'i';
            continue;
        }
        if (!takes_value(opt)) {
            fprintf(stderr, "replay: unknown option '%s'\n%s", opt, USAGE);
            return 1;
        }
        if (val == NULL) {
            fprintf(stderr, "replay: %s needs a value\n%s", opt, USAGE);
            return 1;
        }
        i++;
        if (strcmp(opt, "--model") == 0) {
            size_t m = 0;

            while (m < ARRAY_LEN(models) && strcmp(val, models[m]))
                m++;
            if (m == ARRAY_LEN(models))
                return bad(opt, val,
                           "no such model (resnet50, "
                           "resnet101, bert-base, vgg16, "
                           "gpt2-small)") != 0;
            o->model = val;
        } else if (strcmp(opt, "--profile") == 0) {
            o->profile = val;
        } else if (strcmp(opt, "--profiles") == 0) {
            o->profiles = val;
        } else if (strcmp(opt, "--codec") == 0) {
            const tacl_codec_t *c;

            if (tacl_codec_find(val, &c) != TACL_OK)
                return bad(opt, val,
                           "tacl_codec_find knows no such "
                           "codec") != 0;
            o->codec = val;
        } else if (strcmp(opt, "--steps") == 0) {
            e = tacl__parse_int(val, 1, 100000, &o->run.steps);
        } else if (strcmp(opt, "--warmup") == 0) {
            e = tacl__parse_int(val, 0, 100000, &o->run.warmup);
        } else if (strcmp(opt, "--density") == 0) {
            e = tacl__parse_double(val, 1e-6, 1, &o->density);
        } else if (strcmp(opt, "--ratio") == 0) {
            e = tacl__parse_double(val, 0, 1000, &o->ratio);
        } else if (strcmp(opt, "--threshold") == 0) {
            e = tacl__parse_size(val, 0, (uint64_t)1 << 40, &n);
            o->threshold = (double)n;
        } else if (strcmp(opt, "--compute") == 0) {
            if (strcmp(val, "sleep") != 0 && strcmp(val, "spin") != 0)
                return bad(opt, val, "expected sleep or spin") != 0;
            o->run.spin = strcmp(val, "spin") == 0;
        } else if (strcmp(opt, "--hops") == 0) {
            if (strcmp(val, "all") != 0 && strcmp(val, "inter") != 0 &&
                strcmp(val, "auto") != 0)
                return bad(opt, val, "expected all, inter or auto") != 0;
            o->hops = strcmp(val, "all") == 0     ? TACL_COMP_HOPS_ALL
                      : strcmp(val, "inter") == 0 ? TACL_COMP_HOPS_INTER
                                                  : -1;
        } else if (strcmp(opt, "--schemes") == 0) {
            if (strcmp(val, "own") != 0 && strcmp(val, "all") != 0)
                return bad(opt, val, "expected own or all") != 0;
            o->shuffle = strcmp(val, "all") == 0;
        } else if (strcmp(opt, "--policies") == 0) {
            snprintf(policies, sizeof(policies), "%s", val);
            if (strlen(val) >= sizeof(policies) ||
                parse_policies(policies, o) != 0)
                return bad(opt, val,
                           "a comma list of uncompressed, "
                           "layerwise, threshold, bucket, even, "
                           "planned") != 0;
        }
        if (e != TACL_PARSE_OK)
            return bad(opt, val, tacl__parse_strerror(e)) != 0;
    }
    if ((o->model == NULL) == (o->profile == NULL)) {
        fprintf(stderr, "replay: name one of --model and --profile\n%s",
                USAGE);
        return 1;
    }
    return 0;
}

/* Rank 0's plan to every rank, so that all run the same groups even if
 * their planners were to differ in the last bit. */
static int share_plan(tacl_comm_t comm, int n, tacl_planner_plan_t *plan)
{
    int *first = realloc(plan->first, (size_t)n * sizeof(int));
    int *option = first ? realloc(plan->option, (size_t)n * sizeof(int))
                        : NULL;

    if (first != NULL)
        plan->first = first;
    if (option == NULL)
        return -1;
    plan->option = option;
    return tacl_broadcast(&plan->ngroups, &plan->ngroups, 1, TACL_INT32, 0,
                          comm, NULL) != TACL_OK ||
                   tacl_broadcast(first, first, (size_t)plan->ngroups,
                                  TACL_INT32, 0, comm, NULL) != TACL_OK ||
                   tacl_broadcast(option, option, (size_t)plan->ngroups,
                                  TACL_INT32, 0, comm, NULL) != TACL_OK
               ? -1
               : 0;
}

/* Every policy asked for, the planned one from plan. */
static int build_policies(const replay_profile_t *pf, const options_t *o,
                          const tacl_planner_plan_t *plan,
                          replay_result_t *res, int *count_p)
{
    int k = 0, rc = 0;

    if (o->want[P_UNCOMP]) {
        rc |= replay_policy_buckets(pf, 1e6, 25e6, &res[k].pol);
        snprintf(res[k++].pol.name, 32, "uncompressed");
    }
    if (o->want[P_LAYER]) {
        rc |= replay_policy_layerwise(pf, 0, &res[k].pol);
        snprintf(res[k++].pol.name, 32, "layerwise");
    }
    if (o->want[P_THRESH]) {
        rc |= replay_policy_layerwise(pf, o->threshold, &res[k].pol);
        snprintf(res[k++].pol.name, 32, "threshold");
    }
    for (size_t b = 0; o->want[P_BUCKET] && b < ARRAY_LEN(bucket_mb); b++) {
        double cap = bucket_mb[b] * 1e6;

        rc |= replay_policy_buckets(pf, cap, cap, &res[k].pol);
        snprintf(res[k].pol.name, 32, "bucket-%dMB", bucket_mb[b]);
        snprintf(res[k++].pol.family, 16, "bucket");
    }
    for (size_t e = 0; o->want[P_EVEN] && e < ARRAY_LEN(even_groups); e++) {
        rc |= replay_policy_even(pf, even_groups[e], &res[k].pol);
        snprintf(res[k].pol.name, 32, "even-%d", even_groups[e]);
        snprintf(res[k++].pol.family, 16, "even");
    }
    if (o->want[P_PLANNED]) {
        rc |= replay_policy_from_plan(plan, &res[k].pol);
        snprintf(res[k++].pol.name, 32, "planned");
    }
    *count_p = k;
    return rc;
}

/* The fastest measured policy of a family; NULL when none ran. */
static const replay_result_t *best_of(const replay_result_t *res, int n,
                                      const char *fam)
{
    const replay_result_t *best = NULL;

    for (int k = 0; k < n; k++)
        if (strcmp(res[k].pol.family, fam) == 0 &&
            (best == NULL || res[k].measured < best->measured))
            best = &res[k];
    return best;
}

static void print_ratio(double base, double t)
{
    if (base > 0)
        printf(" %8.3fx |", base / t);
    else
        printf(" %9s |", "-");
}

static void print_table(const replay_result_t *res, int n)
{
    const replay_result_t *bb = best_of(res, n, "bucket");
    const replay_result_t *be = best_of(res, n, "even");
    double un = 0;

    for (int k = 0; k < n; k++)
        if (strcmp(res[k].pol.name, "uncompressed") == 0)
            un = res[k].measured;
    printf("\n| policy | groups | compressed | measured ms | predicted ms "
           "| pred/meas | vs uncompressed | vs best bucket | vs best even "
           "|\n|---|---|---|---|---|---|---|---|---|\n");
    for (int k = 0; k < n; k++) {
        printf("| %-12s | %6d | %6d | %10.2f | %10.2f | %7.3f |",
               res[k].pol.name, res[k].pol.ngroups, res[k].compressed,
               1e3 * res[k].measured, 1e3 * res[k].predicted,
               res[k].predicted / res[k].measured);
        print_ratio(un, res[k].measured);
        print_ratio(bb ? bb->measured : 0, res[k].measured);
        print_ratio(be ? be->measured : 0, res[k].measured);
        printf("\n");
    }
    if (bb != NULL)
        printf("\nbest bucket: %s, %.2f ms\n", bb->pol.name,
               1e3 * bb->measured);
    if (be != NULL)
        printf("best even split: %s, %.2f ms\n", be->pol.name,
               1e3 * be->measured);
}

/* Scale the profile's compute to ratio times the predicted uncompressed
 * all-reduce of the whole model; returns the factor. */
static double scale_compute(replay_profile_t *pf,
                            const tacl_planner_comm_t *lines, double ratio,
                            double *comm_p)
{
    double bytes = 0, compute = pf->forward, f;

    for (int i = 0; i < pf->n; i++) {
        bytes += pf->bytes[i];
        compute += pf->back[i];
    }
    *comm_p = lines->alpha + lines->beta_allreduce * bytes;
    f = compute > 0 ? ratio * *comm_p / compute : 0;
    pf->forward *= f;
    for (int i = 0; i < pf->n; i++)
        pf->back[i] *= f;
    return f;
}

/* Most routes offered: two schemes over two choices of hops. */
enum { MAX_ROUTES = 4 };

/* Swap routes i and j with their lines. */
static void swap_routes(replay_route_t *routes, double line[][2], int i,
                        int j)
{
    replay_route_t r = routes[i];
    double l0 = line[i][0], l1 = line[i][1];

    routes[i] = routes[j];
    line[i][0] = line[j][0];
    line[i][1] = line[j][1];
    routes[j] = r;
    line[j][0] = l0;
    line[j][1] = l1;
}

/* Each route's timed call, the planner's view of it and the planned
 * groups under it (the first noffered were offered); route 0 is the
 * layer-wise policies'. */
static void print_routes(const replay_route_t *routes, int n, int noffered,
                         double line[][2], const tacl_planner_codec_t *pc,
                         const tacl_planner_plan_t *plan)
{
    for (int k = 0; k < n; k++) {
        char name[32];
        int groups = 0;

        for (int g = 0; g < plan->ngroups; g++)
            groups += plan->option[g] == k;
        replay_route_name(&routes[k], name, sizeof(name));
        printf("- route %s%s: the compressed call %.4g s + %.4g s/B; ",
               name, k == 0 ? " (layer-wise policies)" : "", line[k][0],
               line[k][1]);
        if (k < noffered)
            printf("as the planner sees it: codec %s 0 0 %.4g %.4g %.4g %d; "
                   "planned groups %d\n",
                   pc[k].name, pc[k].decode_fixed, pc[k].decode_per_byte,
                   pc[k].ratio, pc[k].summable, groups);
        else
            printf("not offered (never the quickest call for a group of "
                   "the model's sizes)\n");
    }
}

/* Whether line k is the lowest of the n lines (seconds = fixed + per
 * byte * x) somewhere in [lo, hi]: at an end or where two lines cross. */
static int ever_lowest(double line[][2], int n, int k, double lo,
                       double hi)
{
    double x[2 + MAX_ROUTES * MAX_ROUTES];
    int nx = 0;

    x[nx++] = lo;
    x[nx++] = hi;
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++) {
            double db = line[i][1] - line[j][1];
            double c = db != 0 ? (line[j][0] - line[i][0]) / db : -1;

            if (c > lo && c < hi)
                x[nx++] = c;
        }
    for (int t = 0; t < nx; t++) {
        double mine = line[k][0] + line[k][1] * x[t];
        int lowest = 1;

        for (int j = 0; j < n && lowest; j++)
            lowest = j == k || mine <= line[j][0] + line[j][1] * x[t];
        if (lowest)
            return 1;
    }
    return 0;
}

/*
 * The routes offered to the planner moved to the front, route 0 kept
 * first (the layer-wise policies' groups are under it); returns how many.
 * The routes differ only in their calls' lines (the same codec, ratio and
 * minimum), so a group under a route whose line is above another's at
 * its size is never quicker in any timeline: a route that is the lowest
 * at no size from the codec's minimum group to the whole model is left
 * out, which keeps the plan and shortens the search.
 */
static int offer_routes(replay_route_t *routes, double line[][2], int n,
                        double lo, double hi)
{
    int m = 1;

    for (int k = 1; k < n; k++) {
        if (ever_lowest(line, n, k, lo, hi))
            swap_routes(routes, line, m++, k);
    }
    return m;
}

/* Plan (timed) and share rank 0's plan; its wall seconds to *ms_p. */
static int make_plan(tacl_planner_t *planner, tacl_comm_t comm, int n,
                     tacl_planner_plan_t *plan, double *ms_p)
{
    double t0 = tacl__perf_now();

    if (tacl_planner_plan(planner, plan) != TACL_OK) {
        fprintf(stderr, "replay: planner: %s\n", tacl_planner_last_error());
        return -1;
    }
    *ms_p = 1e3 * (tacl__perf_now() - t0);
    return share_plan(comm, n, plan);
}

/*
 * The routes asked for, each timed (line[k]: fixed seconds and seconds a
 * byte).  Route 0 is the one for every compressed group of the layer-wise
 * policies: the codec's own scheme over the hops asked for, or with auto
 * the hops quicker for a group of a sixteenth of the model's bytes.  Both
 * hops are tried only on a communicator of several nodes (on one, inter
 * is the dense call).  The number of routes, or -1 after a message.
 */
static int time_routes(const options_t *o, const tacl_codec_t *codec,
                       const tacl_codec_params_t *params, tacl_comm_t comm,
                       double model_bytes, replay_route_t *routes,
                       double line[][2])
{
    tacl_comp_scheme_t own = (codec->flags & TACL_CODEC_SUMMABLE)
                                 ? TACL_COMP_SUM
                                 : TACL_COMP_GATHER;
    tacl_comp_hops_t hops[2] = {TACL_COMP_HOPS_ALL, TACL_COMP_HOPS_INTER};
    int nhops = 2, nodes = 1, n = 0;
    double x = model_bytes / 16;

    if (tacl_comm_n_nodes(comm, &nodes) != TACL_OK)
        return -1;
    if (o->hops >= 0) {
        hops[0] = (tacl_comp_hops_t)o->hops;
        nhops = 1;
    } else if (nodes == 1) {
        nhops = 1;
    }
    for (int s = 0; s < 1 + o->shuffle; s++)
        for (int h = 0; h < nhops; h++) {
            routes[n] = (replay_route_t){s ? TACL_COMP_SHUFFLE : own,
                                         hops[h]};
            if (replay_time_call(codec, params, &routes[n], comm,
                                 &line[n][0], &line[n][1]) != 0)
                return -1;
            n++;
        }
    /* Route 0 first: the own scheme over the quicker hops. */
    if (nhops == 2 && line[1][0] + line[1][1] * x <
                          line[0][0] + line[0][1] * x)
        swap_routes(routes, line, 0, 1);
    return n;
}

/* This process' peak resident memory in MB, 0 when unknown. */
static double peak_rss_mb(void)
{
    struct rusage ru;

    /* Linux gives ru_maxrss in kilobytes. */
    return getrusage(RUSAGE_SELF, &ru) == 0
               ? (double)ru.ru_maxrss * 1024 / 1e6
               : 0;
}

/* The ranks' peak resident memory beside what the harness holds; every
 * rank calls it, rank 0 prints. */
static int print_memory(tacl_comm_t comm, int rank, size_t values)
{
    double mb[2] = {peak_rss_mb(), 0}, buf = (double)values * 4 / 1e6;

    mb[1] = -mb[0];
    if (tacl_allreduce(mb, mb, 2, TACL_FLOAT64, TACL_MAX, comm, NULL) !=
        TACL_OK) {
        fprintf(stderr, "replay: %s\n", tacl_comm_last_error(comm));
        return -1;
    }
    if (rank == 0)
        printf("\nmemory: peak RSS %.0f to %.0f MB a rank; the harness "
               "holds %.0f MB of gradients (reduced in place) and, while a "
               "policy compresses, at most as many residuals\n",
               -mb[1], mb[0], buf);
    return 0;
}

static int run_all(const options_t *o, replay_profile_t *pf,
                   const tacl_codec_t *codec,
                   const tacl_codec_params_t *params, tacl_comm_t comm)
{
    replay_comm_t ct = {.mu = PTHREAD_MUTEX_INITIALIZER,
                        .cv = PTHREAD_COND_INITIALIZER,
                        .comm = comm,
                        .codec = codec,
                        .params = *params,
                        .done = 1,
                        .ntensors = pf->n};
    tacl_planner_comm_t lines;
    tacl_planner_codec_t pc[MAX_ROUTES];
    replay_route_t routes[MAX_ROUTES];
    tacl_planner_model_t model;
    tacl_planner_plan_t plan = {0};
    tacl_planner_t *planner = NULL;
    replay_result_t
        res[P_COUNT + ARRAY_LEN(bucket_mb) + ARRAY_LEN(even_groups)];
    replay_codec_cost_t cost;
    size_t *off = malloc(((size_t)pf->n + 1) * sizeof(size_t));
    int rank, nranks, npol = 0, rc = 1;
    double comm_s, factor, plan_ms = 0, line[MAX_ROUTES][2];
    int nroutes = 0, noffered = 0;
    tacl_status_t st = TACL_OK;
    pthread_t thread;

    memset(res, 0, sizeof(res));
    if (off == NULL || tacl_comm_rank(comm, &rank) != TACL_OK ||
        tacl_comm_size(comm, &nranks) != TACL_OK)
        goto out;
    off[0] = 0;
    for (int i = 0; i < pf->n; i++)
        off[i + 1] = off[i] + (size_t)(pf->bytes[i] / 4);
    if (tacl_planner_comm_fit(comm, &lines) != TACL_OK) {
        fprintf(stderr, "replay: %s\n", tacl_planner_last_error());
        goto out;
    }
    factor = scale_compute(pf, &lines, o->ratio, &comm_s);
    if (replay_time_codec(codec, params, comm, &cost) != 0 ||
        (nroutes = time_routes(o, codec, params, comm,
                               (double)off[pf->n] * 4.0, routes, line)) < 0)
        goto out;
    ct.routes = routes;
    noffered = offer_routes(routes, line, nroutes,
                            tacl_planner_min_bytes_default(codec->name),
                            (double)off[pf->n] * 4.0);
    model = (tacl_planner_model_t){pf->n, pf->bytes, pf->back, pf->forward};
    for (int k = 0; k < noffered && st == TACL_OK; k++)
        st = tacl_planner_codec_from_call(
            codec->name, (codec->flags & TACL_CODEC_SUMMABLE) != 0,
            cost.ratio, line[k][0], line[k][1], &lines, &pc[k]);
    /* The layer-wise policies' groups are under option 0 (route 0); the
     * planned policy's under any route. */
    if (st != TACL_OK ||
        tacl_planner_create(&model, &lines, pc, noffered, &planner) !=
            TACL_OK) {
        fprintf(stderr, "replay: planner: %s\n", tacl_planner_last_error());
        goto out;
    }
    if (make_plan(planner, comm, pf->n, &plan, &plan_ms) != 0 ||
        build_policies(pf, o, &plan, res, &npol) != 0)
        goto out;
    for (int k = 0; k < npol; k++) {
        for (int g = 0; g < res[k].pol.ngroups; g++)
            res[k].compressed += res[k].pol.option[g] != TACL_PLANNER_NONE;
        res[k].predicted = tacl_planner_time(planner, res[k].pol.ngroups,
                                             res[k].pol.first,
                                             res[k].pol.option, NULL);
    }
    if (rank == 0) {
        printf("## %s on %d ranks, codec %s", pf->name, nranks, codec->name);
        if (strcmp(codec->name, "topk") == 0 ||
            strcmp(codec->name, "threshold") == 0 ||
            strcmp(codec->name, "randk") == 0)
            printf(" density %g", params->density);
        printf(", error feedback\n\n");
        printf("- profile: %d tensors, %.1f M parameters; compute scaled "
               "by %.4g to %.2f x the predicted uncompressed all-reduce "
               "(%.1f ms): forward %.2f ms\n",
               pf->n, (double)off[pf->n] / 1e6, factor, o->ratio,
               1e3 * comm_s, 1e3 * pf->forward);
        printf("- comm lines (tacl_planner_comm_fit): comm %d %.4g %.4g "
               "%.4g\n",
               lines.ranks, lines.alpha, lines.beta_allreduce,
               lines.beta_allgather);
        printf("- codec timed here: encode %.4g s + %.4g s/B, decode %.4g "
               "s + %.4g s/B, ratio %.4g\n",
               cost.enc_fixed, cost.enc_per_byte, cost.dec_fixed,
               cost.dec_per_byte, cost.ratio);
        print_routes(routes, nroutes, noffered, line, pc, &plan);
        printf("- planner: %d tensors, %d groups, %.2f ms (fusion and "
               "decisions), %ld search states\n",
               pf->n, plan.ngroups, plan_ms, plan.visited);
        fflush(stdout);
    }
    ct.off = off;
    ct.grad = malloc(off[pf->n] * sizeof(float));
    ct.reqs = calloc((size_t)pf->n, sizeof(tacl_request_t));
    if (ct.grad == NULL || ct.reqs == NULL) {
        fprintf(stderr, "replay: no memory for %zu values\n", off[pf->n]);
        goto out_free;
    }
    if (pthread_create(&thread, NULL, replay_comm_main, &ct) != 0) {
        fprintf(stderr, "replay: cannot start the communication thread\n");
        goto out_free;
    }
    rc = 0;
    for (int k = 0; k < npol && rc == 0; k++)
        rc = replay_run_policy(&ct, pf, &o->run, rank, nranks, &res[k]) != 0;
    pthread_mutex_lock(&ct.mu);
    ct.quit = 1;
    pthread_cond_broadcast(&ct.cv);
    pthread_mutex_unlock(&ct.mu);
    pthread_join(thread, NULL);
    if (rc == 0 && rank == 0)
        print_table(res, npol);
    if (rc == 0)
        rc = print_memory(comm, rank, off[pf->n]) != 0;
    if (rc == 0 && o->run.check && rank == 0)
        printf("\ncheck: every policy's result is the same on all %d "
               "ranks; uncompressed ones equal the exact sum\n",
               nranks);
out_free:
    free(ct.grad);
    free(ct.reqs);
out:
    for (int k = 0; k < npol; k++)
        replay_policy_free(&res[k].pol);
    tacl_planner_plan_free(&plan);
    tacl_planner_destroy(planner);
    free(off);
    return rc;
}

int main(int argc, char **argv)
{
    options_t o = {.profiles = REPLAY_PROFILE_DIR,
                   .codec = "topk",
                   .run = {.steps = 10, .warmup = 2},
                   .density = 0.01,
                   .threshold = 1 << 20,
                   .ratio = 0.86,
                   .hops = -1,
                   .shuffle = 1};
    tacl_config_t config = TACL_CONFIG_INIT;
    tacl_codec_params_t params = {.bits = 8, .seed = 1};
    const tacl_codec_t *codec;
    replay_profile_t pf;
    tacl_comm_t comm;
    char path[4096];
    int ex = 0, rc;

    if (parse(argc, argv, &o, &ex) != 0)
        return ex;
    params.density = o.density;
    if (strcmp(o.codec, "int4") == 0)
        params.bits = 4;
    if (tacl_codec_find(o.codec, &codec) != TACL_OK ||
        tacl_codec_check(codec, &params) != TACL_OK) {
        fprintf(stderr, "replay: --codec %s with --density %g: %s\n", o.codec,
                o.density, tacl_last_error());
        return 2;
    }
    if (o.profile != NULL)
        snprintf(path, sizeof(path), "%s", o.profile);
    else
        snprintf(path, sizeof(path), "%s/%s.profile", o.profiles, o.model);
    if (replay_profile_read(path, o.model ? o.model : o.profile, &pf) != 0)
        return 2;
    /* The progress thread completes the _nb all-reduces while the
     * compute side sleeps and the communication thread waits. */
    config.progress_thread = 1;
    config.name = "replay";
    if (tacl_comm_init_env_config(&config, &comm) != TACL_OK) {
        fprintf(stderr,
                "replay: needs a launcher (tools/tacl-run -n 4 "
                "replay ...): %s\n",
                tacl_last_error());
        replay_profile_free(&pf);
        return 1;
    }
    rc = run_all(&o, &pf, codec, &params, comm);
    tacl_comm_destroy(comm);
    replay_profile_free(&pf);
    return rc;
}
