/*
 * The engine's profiler and its use of the planner (see profile.h).
 *
 * Cupcake's planner (thesis chapter 5) needs a profile of the job it
 * plans for: each tensor's bytes and backward time in gradient-ready
 * order, the forward time, the codec's costs on this machine and the
 * network's cost lines.  The engine times its own forward and backward
 * (engine_profile: the least time of a micro-step over the profiled
 * steps, which on a shared machine is the one least disturbed); the
 * codec is timed here on two sizes of synthetic gradients, a line through
 * the two giving the fixed and per-byte costs; the communication lines
 * are fitted to tacl_comm_estimate.  Rank 0 plans alone and broadcasts
 * its plan, so that every rank runs the same collectives even when their
 * timings differ.  The model is one group after another on one
 * communicator, as the planner's timeline; MiCS's second hop, once a
 * step, is not in it.
 */
#define _GNU_SOURCE
#include "profile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

static double clock_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#define PROFILE_TRIES 7

/*
 * Least seconds of encoding (and of decoding) n synthetic gradient
 * values with the codec, error feedback on as in training; *bytes_p the
 * encoded bytes.
 */
static tacl_status_t time_codec(const gcomp_codec_t *c, size_t n,
                                double *enc_p, double *dec_p, size_t *bytes_p)
{
    float *src = malloc(n * sizeof(float)), *err = calloc(n, sizeof(float));
    float *out = malloc(n * sizeof(float));
    const float *srcs[1];
    float *errs[1], *outs[1];
    size_t cap = 0, bytes = 0;
    void *enc = NULL;
    tacl_status_t st = TACL_ERR_NO_MEMORY;

    srcs[0] = src;
    errs[0] = err;
    outs[0] = out;
    if (src == NULL || err == NULL || out == NULL)
        goto out;
    for (size_t i = 0; i < n; i++)
        src[i] = (float)((double)(model_hash64(i) >> 11) /
                             9007199254740992.0 -
                         0.5) *
                 1e-3f;
    st = tacl_codec_encoded_bound(c->codec, &c->params, 1, &n, &cap);
    if (st != TACL_OK || (enc = malloc(cap ? cap : 1)) == NULL)
        goto out;
    *enc_p = *dec_p = 1e30;
    for (int t = 0; t < PROFILE_TRIES && st == TACL_OK; t++) {
        double t0 = clock_s(), t1, t2;

        st = tacl_codec_encode(c->codec, &c->params, 1, srcs, &n, errs, enc,
                               cap, &bytes);
        t1 = clock_s();
        if (st == TACL_OK)
            st = tacl_codec_decode(c->codec, &c->params, enc, bytes, 1, outs,
                                   &n);
        t2 = clock_s();
        *enc_p = t1 - t0 < *enc_p ? t1 - t0 : *enc_p;
        *dec_p = t2 - t1 < *dec_p ? t2 - t1 : *dec_p;
    }
    *bytes_p = bytes;
out:
    free(src);
    free(err);
    free(out);
    free(enc);
    return st;
}

/* The codec's line through two sizes: fixed and per-byte costs. */
static tacl_status_t profile_codec(const gcomp_codec_t *c,
                                   tacl_planner_codec_t *pc)
{
    const size_t n[2] = {4096, 262144};
    double enc[2], dec[2], x0 = n[0] * 4.0, x1 = n[1] * 4.0;
    size_t bytes[2];
    tacl_status_t st;

    memset(pc, 0, sizeof(*pc));
    for (int i = 0; i < 2; i++) {
        st = time_codec(c, n[i], &enc[i], &dec[i], &bytes[i]);
        if (st != TACL_OK)
            return st;
    }
    snprintf(pc->name, sizeof(pc->name), "%s", c->codec->name);
    pc->encode_per_byte = enc[1] > enc[0] ? (enc[1] - enc[0]) / (x1 - x0)
                                          : 0.0;
    pc->encode_fixed = enc[0] > pc->encode_per_byte * x0
                           ? enc[0] - pc->encode_per_byte * x0
                           : 0.0;
    pc->decode_per_byte = dec[1] > dec[0] ? (dec[1] - dec[0]) / (x1 - x0)
                                          : 0.0;
    pc->decode_fixed = dec[0] > pc->decode_per_byte * x0
                           ? dec[0] - pc->decode_per_byte * x0
                           : 0.0;
    pc->ratio = (double)bytes[1] / x1;
    pc->summable = (c->codec->flags & TACL_CODEC_SUMMABLE) != 0;
    pc->min_bytes = tacl_planner_min_bytes_default(pc->name);
    return TACL_OK;
}

/*
 * Rank 0's plan into first[] and compress[] (L entries each) and the
 * group count into *ngroups_p; the predicted times into times[3] (plan,
 * best uncompressed fusion, layer-wise).
 */
static tacl_status_t plan_on_root(engine_t *e, tacl_comm_t comm,
                                  const gcomp_codec_t *codec,
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
    tacl_planner_plan_t plan;
    tacl_status_t st;

    engine_profile(e, &fwd, bwd_layer);
    pm.forward = fwd;
    for (int i = 0; i < L; i++) {
        bytes[i] = (double)md->padded[L - 1 - i] * sizeof(float);
        bwd[i] = bwd_layer[L - 1 - i];
    }
    st = profile_codec(codec, &pc);
    if (st != TACL_OK) {
        snprintf(err, errlen, "timing codec %s: %s", codec->codec->name,
                 tacl_last_error());
        return st;
    }
    st = tacl_planner_comm_fit(comm, &pcomm);
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
    tacl_status_t st;

    tacl_comm_rank(comm, &rank);
    snprintf(err, errlen, "rank 0 could not plan (its message says why)");
    if (rank == 0 && plan_on_root(e, comm, codec, kind, msg + 1, msg + 1 + L,
                                  &ng, times, err, errlen) != TACL_OK)
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
