/*
 * The engine's profiler and its use of the planner (see profile.h).
 *
 * Cupcake's planner (thesis chapter 5) needs a profile of the job it
 * plans for: each tensor's bytes and backward time in gradient-ready
 * order, the forward time, and what a group costs to reduce.  The engine
 * times its own forward and backward (engine_profile: the least time of
 * a micro-step over the profiled steps, which on a shared machine is the
 * one least disturbed); every rank then times the plan's calls itself,
 * dense and encoded, as a step runs them (time_lines), which prices the
 * groups.  Rank 0 plans alone and broadcasts its plan, so that every
 * rank runs the same collectives even when their timings differ.  The
 * model is one group after another, each running on while the layers
 * below compute, as the planner's timeline; MiCS's all-reduces across
 * groups, priced with their group, run after the backward instead.
 */
#define _GNU_SOURCE
#include "profile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner.h"

static const char *const plan_names[] = {"none", "fusion", "full"};

int engine_plan_parse(const char *name, engine_plan_kind_t *kind_p)
{
    for (int k = 0; k < 3; k++)
        if (strcmp(name, plan_names[k]) == 0) {
            *kind_p = (engine_plan_kind_t)k;
            return 0;
        }
    return -1;
}

const char *engine_plan_name(engine_plan_kind_t kind)
{
    return (unsigned)kind < 3 ? plan_names[kind] : "invalid";
}

tacl_status_t engine_plan_layerwise(engine_t *e, const gcomp_codec_t *codec)
{
    int L = engine_model(e)->n_layers;
    int first[L], compress[L];

    for (int i = 0; i < L; i++) {
        first[i] = i;
        compress[i] = 1;
    }
    return engine_set_plan(e, codec, L, first, compress);
}

/* n synthetic gradient values in [-5e-4, 5e-4), the hash of i + salt. */
static void synthetic_grads(float *v, size_t n, size_t salt)
{
    for (size_t i = 0; i < n; i++)
        v[i] = (float)((double)(model_hash64(i + salt) >> 11) /
                           9007199254740992.0 -
                       0.5) *
               1e-3f;
}

/*
 * The codec's encoded bytes per input byte on n synthetic gradient
 * values, error feedback on as in training, into *ratio_p.
 */
static tacl_status_t codec_ratio(const gcomp_codec_t *c, double *ratio_p)
{
    const size_t n = 262144;
    float *src = malloc(n * sizeof(float)), *err = calloc(n, sizeof(float));
    const float *srcs[1] = {src};
    float *errs[1] = {err};
    size_t cap = 0, bytes = 0;
    void *enc = NULL;
    tacl_status_t st = TACL_ERR_NO_MEMORY;

    if (src == NULL || err == NULL)
        goto out;
    synthetic_grads(src, n, 0);
    st = tacl_codec_encoded_bound(c->codec, &c->params, 1, &n, &cap);
    if (st == TACL_OK && (enc = malloc(cap ? cap : 1)) == NULL)
        st = TACL_ERR_NO_MEMORY;
    if (st != TACL_OK)
        goto out;
    st = tacl_codec_encode(c->codec, &c->params, 1, srcs, &n, errs, enc, cap,
                           &bytes);
    *ratio_p = (double)bytes / (4.0 * (double)n);
out:
    free(src);
    free(err);
    free(enc);
    return st;
}

/* One call of the plan as a step runs it, on scratch buffers: the
 * reduce-scatter (started, waited for, its block added into dst) or the
 * all-reduce across groups (MiCS's second hop, in place in grad). */
typedef struct {
    const gcomp_codec_t *codec;
    int compress, size;
    gcomp_route_t route;
    tacl_comm_t comm;
    float *grad, *dst, *err, *pack, *shard;
} plan_call_t;

static tacl_status_t rs_call(void *arg, size_t count)
{
    plan_call_t *c = arg;
    tacl_request_t req = NULL;
    tacl_status_t st;

    st = gcomp_reduce_scatter(c->codec, c->compress, c->route, c->comm,
                              c->size, 1, &c->grad, &count, &c->dst, c->err,
                              c->pack, c->shard, &req);
    if (st == TACL_OK) {
        st = tacl_request_wait(req);
        tacl_request_free(req);
    }
    if (st == TACL_OK)
        gcomp_unpack_add(c->size, 1, &count, c->shard, &c->dst);
    return st;
}

static tacl_status_t ar_call(void *arg, size_t count)
{
    plan_call_t *c = arg;

    return gcomp_allreduce(c->codec, c->compress, c->route, c->comm, 1,
                           &c->grad, &count, c->err, c->pack);
}

/* Lines (seconds = [0] + [1] * bytes) of the plan's calls, dense [0] and
 * encoded [1]: the reduce-scatter's of a group's bytes, and the
 * all-reduce's across groups of its shard (ar_div 0: none). */
typedef struct {
    double rs[2][2], ar[2][2];
    int ar_div;
} plan_lines_t;

/* Time call dense and encoded on c->comm at counts into line[2][2]. */
static tacl_status_t time_pair(plan_call_t *c, tacl_planner_call_fn call,
                               const size_t *counts, double line[2][2],
                               const char *what, char *err, size_t errlen)
{
    tacl_status_t st = TACL_OK;

    for (int k = 0; k < 2 && st == TACL_OK; k++) {
        c->compress = k;
        st = tacl_planner_time_call(c->comm, call, c, counts, sizeof(float),
                                    &line[k][0], &line[k][1]);
        if (st != TACL_OK)
            snprintf(err, errlen, "timing the %s %s: %s",
                     k ? "compressed" : "dense", what,
                     tacl_planner_last_error());
    }
    return st;
}

/*
 * The plan's calls timed on every rank (tacl_planner_time_call: the
 * slowest rank's), dense and encoded along their routes, at the model's
 * smallest layer and at the whole model: these are what a plan's groups
 * cost in a step, where lines fitted to tacl_comm_estimate would price
 * an all-reduce on the world, which the engine does not run.  All zero
 * on a partition of one rank.  Collective on world, the engine's.
 */
static tacl_status_t time_lines(engine_t *e, tacl_comm_t world,
                                const gcomp_codec_t *codec, plan_lines_t *pl,
                                char *err, size_t errlen)
{
    const model_t *md = engine_model(e);
    size_t counts[2] = {SIZE_MAX, model_total_padded(md)}, n;
    engine_plan_comms_t pc;
    plan_call_t c = {.codec = codec};
    tacl_status_t st;
    int rank = 0, bad;

    memset(pl, 0, sizeof(*pl));
    st = engine_plan_comms(e, codec, &pc);
    if (st != TACL_OK) {
        snprintf(err, errlen, "%s", engine_error(e));
        return st;
    }
    if (pc.rs_size == 1 && pc.ar_comm == NULL)
        return TACL_OK;
    for (int l = 0; l < md->n_layers; l++)
        if (md->padded[l] < counts[0])
            counts[0] = md->padded[l];
    if (counts[0] >= counts[1]) {
        counts[0] = counts[1] / 16 / (size_t)pc.rs_size *
                    (size_t)pc.rs_size;
        counts[0] = counts[0] ? counts[0] : (size_t)pc.rs_size;
    }
    n = counts[1];
    c.grad = malloc(n * sizeof(float));
    c.dst = calloc(n, sizeof(float));
    c.err = calloc(n, sizeof(float));
    c.pack = malloc(n * sizeof(float));
    c.shard = malloc(n * sizeof(float));
    /* Every rank learns whether any is short of memory, so that none
     * times a collective alone. */
    bad = !(c.grad && c.dst && c.err && c.pack && c.shard);
    st = tacl_allreduce(&bad, &bad, 1, TACL_INT32, TACL_MAX, world,
                        NULL);
    if (st != TACL_OK)
        snprintf(err, errlen, "timing the plan's calls: %s",
                 tacl_comm_last_error(world));
    else if (bad) {
        st = TACL_ERR_NO_MEMORY;
        snprintf(err, errlen, "out of memory for timing the plan's calls "
                 "(%zu floats, here or on a peer)", n);
    }
    /* Each rank its own values, as in a step: a sparsifier keeps other
     * places on each, which the decodes pay for. */
    if (st == TACL_OK)
        st = tacl_comm_rank(world, &rank);
    if (st == TACL_OK)
        synthetic_grads(c.grad, n, n * (size_t)rank);
    if (st == TACL_OK && pc.rs_size > 1) {
        c.comm = pc.rs_comm;
        c.size = pc.rs_size;
        c.route = pc.rs_route;
        st = time_pair(&c, rs_call, counts, pl->rs, "reduce-scatter", err,
                       errlen);
    }
    /* MiCS's second hop: each group's shard, 1/ar_div of its bytes. */
    if (st == TACL_OK && pc.ar_comm != NULL) {
        const size_t shard[2] = {counts[0] / (size_t)pc.ar_div,
                                 counts[1] / (size_t)pc.ar_div};

        c.comm = pc.ar_comm;
        c.route = pc.ar_route;
        pl->ar_div = pc.ar_div;
        st = time_pair(&c, ar_call, shard, pl->ar, "all-reduce across groups",
                       err, errlen);
    }
    free(c.grad);
    free(c.dst);
    free(c.err);
    free(c.pack);
    free(c.shard);
    return st;
}

/* The planner's price of a group's calls, dense (k 0) or encoded (k 1):
 * the reduce-scatter's line and the all-reduce's of its shard. */
static void group_line(const plan_lines_t *pl, int k, double *line)
{
    line[0] = pl->rs[k][0] + pl->ar[k][0];
    line[1] = pl->rs[k][1] + (pl->ar_div ? pl->ar[k][1] / pl->ar_div : 0.0);
}

/*
 * Rank 0's plan into first[] and compress[] (L entries each) and the
 * group count into *ngroups_p; the predicted times into times[3] (plan,
 * best uncompressed fusion, layer-wise).  A group is priced by the
 * timed lines of time_lines: uncompressed as the dense reduce-scatter,
 * compressed as the encoded call, which encodes in the library's worker
 * and so takes nothing from the compute stream
 * (tacl_planner_codec_from_call).
 */
static tacl_status_t plan_on_root(engine_t *e, tacl_comm_t comm,
                                  const gcomp_codec_t *codec,
                                  const plan_lines_t *pl,
                                  engine_plan_kind_t kind, int *first,
                                  int *compress, int *ngroups_p,
                                  double *times, char *err, size_t errlen)
{
    const model_t *md = engine_model(e);
    int L = md->n_layers, ng = 0;
    double bytes[L], bwd[L], bwd_layer[L], fwd;
    tacl_planner_model_t pm = {L, bytes, bwd, 0.0};
    tacl_planner_comm_t pcomm;
    tacl_planner_codec_t pc;
    tacl_planner_t *planner = NULL;
    double ratio = 0.0, dense[2], comp[2];
    tacl_planner_plan_t plan;
    tacl_status_t st;

    engine_profile(e, &fwd, bwd_layer);
    pm.forward = fwd;
    for (int i = 0; i < L; i++) {
        bytes[i] = (double)md->padded[L - 1 - i] * sizeof(float);
        bwd[i] = bwd_layer[L - 1 - i];
    }
    st = codec_ratio(codec, &ratio);
    if (st != TACL_OK) {
        snprintf(err, errlen, "encoding with codec %s: %s",
                 codec->codec->name, tacl_last_error());
        return st;
    }
    group_line(pl, 0, dense);
    group_line(pl, 1, comp);
    st = tacl_planner_comm_fit(comm, &pcomm);
    /* On a partition of one rank nothing travels and the lines are 0. */
    if (dense[0] > 0.0 || dense[1] > 0.0) {
        pcomm.alpha = dense[0];
        pcomm.beta_allreduce = dense[1];
    }
    if (st == TACL_OK)
        st = tacl_planner_codec_from_call(
            codec->codec->name,
            (codec->codec->flags & TACL_CODEC_SUMMABLE) != 0, ratio, comp[0],
            comp[1], &pcomm, &pc);
    if (st == TACL_OK)
        st = tacl_planner_create(&pm, &pcomm, &pc, 1, &planner);
    if (st != TACL_OK) {
        snprintf(err, errlen, "planner: %s", tacl_planner_last_error());
        return st;
    }
    st = tacl_planner_fuse(planner, TACL_PLANNER_NONE, first, &ng, &times[1],
                           NULL);
    for (int i = 0; i < L; i++) {
        first[i] = i;
        compress[i] = TACL_PLANNER_NONE;
    }
    times[2] = tacl_planner_time(planner, L, first, compress, NULL);
    if (st == TACL_OK && kind == ENGINE_PLAN_FUSION) {
        st = tacl_planner_fuse(planner, 0, first, &ng, &times[0], NULL);
        for (int k = 0; k < ng; k++)
            compress[k] = 1;
    } else if (st == TACL_OK) {
        st = tacl_planner_plan(planner, &plan);
        if (st == TACL_OK) {
            ng = plan.ngroups;
            for (int k = 0; k < ng; k++) {
                first[k] = plan.first[k];
                compress[k] = plan.option[k] != TACL_PLANNER_NONE;
            }
            times[0] = plan.step_time;
            tacl_planner_plan_free(&plan);
        }
    }
    if (st != TACL_OK)
        snprintf(err, errlen, "planner: %s", tacl_planner_last_error());
    tacl_planner_destroy(planner);
    *ngroups_p = ng;
    return st;
}

static void print_lines(const plan_lines_t *pl, const char *codec)
{
    printf("plan lines: reduce-scatter dense %.4g s + %.4g s/B, %s %.4g s "
           "+ %.4g s/B\n",
           pl->rs[0][0], pl->rs[0][1], codec, pl->rs[1][0], pl->rs[1][1]);
    if (pl->ar_div > 0)
        printf("plan lines across groups: all-reduce of a group's shard "
               "(1/%d of its bytes) dense %.4g s + %.4g s/B, %s %.4g s + "
               "%.4g s/B\n",
               pl->ar_div, pl->ar[0][0], pl->ar[0][1], codec, pl->ar[1][0],
               pl->ar[1][1]);
}

static void print_plan(const engine_t *e, const gcomp_codec_t *codec,
                       engine_plan_kind_t kind, int ng, const int *first,
                       const int *compress, const double *times)
{
    int L = engine_model(e)->n_layers;

    printf("plan %s codec %s groups %d:", engine_plan_name(kind),
           codec->codec->name, ng);
    for (int k = 0; k < ng; k++) {
        int end = k + 1 < ng ? first[k + 1] : L;

        printf(" layers %d-%d %s", L - 1 - first[k], L - end,
               compress[k] ? codec->codec->name : "none");
    }
    printf("\nplan predicted %.3f ms a micro-step, uncompressed %.3f ms "
           "(best fusion) %.3f ms (layer-wise)\n",
           times[0] * 1e3, times[1] * 1e3, times[2] * 1e3);
    fflush(stdout);
}

tacl_status_t engine_plan_profiled(engine_t *e, tacl_comm_t comm,
                                   const gcomp_codec_t *codec,
                                   engine_plan_kind_t kind, int verbose,
                                   char *err, size_t errlen)
{
    int L = engine_model(e)->n_layers, rank;
    int msg[2 * L + 1], ng = -1;
    double times[3] = {0, 0, 0};
    plan_lines_t pl;
    tacl_status_t st;

    tacl_comm_rank(comm, &rank);
    st = time_lines(e, comm, codec, &pl, err, errlen);
    if (st != TACL_OK)
        return st;
    if (rank == 0 && verbose)
        print_lines(&pl, codec->codec->name);
    snprintf(err, errlen, "rank 0 could not plan (its message says why)");
    if (rank == 0 &&
        plan_on_root(e, comm, codec, &pl, kind, msg + 1,
                     msg + 1 + L, &ng, times, err, errlen) != TACL_OK)
        ng = -1;
    msg[0] = ng;
    st = tacl_broadcast(msg, msg, (size_t)(2 * L + 1), TACL_INT32, 0, comm,
                        NULL);
    if (st != TACL_OK) {
        snprintf(err, errlen, "broadcast of the plan: %s (%s)",
                 tacl_status_string(st), tacl_comm_last_error(comm));
        return st;
    }
    if (msg[0] < 1)
        return TACL_ERR_INTERNAL;
    if (rank == 0 && verbose)
        print_plan(e, codec, kind, msg[0], msg + 1, msg + 1 + L, times);
    st = engine_set_plan(e, codec, msg[0], msg + 1, msg + 1 + L);
    if (st != TACL_OK)
        snprintf(err, errlen, "%s", engine_error(e));
    return st;
}
