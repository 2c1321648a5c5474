/*
 * The planner's timeline model (planner.h): the profile checked and
 * turned into prefix sums, a group's costs under an option, and the
 * predicted step time of a whole plan.  The floor of planner/: it calls
 * nothing else of the folder.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner_int.h"

static _Thread_local char planner_error[512];

tacl_status_t tacl__planner_fail(tacl_status_t status, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(planner_error, sizeof(planner_error), fmt, ap);
    va_end(ap);
    return status;
}

const char *tacl_planner_last_error(void)
{
    return planner_error;
}

/* 1 when v is a finite, non-negative cost. */
static int cost_ok(double v)
{
    return isfinite(v) && v >= 0.0;
}

static tacl_status_t check_codecs(const tacl_planner_codec_t *codecs,
                                  int ncodecs)
{
    for (int c = 0; c < ncodecs; c++) {
        const tacl_planner_codec_t *k = &codecs[c];
        const tacl_codec_t *found;
        if (!cost_ok(k->encode_fixed) || !cost_ok(k->encode_per_byte) ||
            !cost_ok(k->decode_fixed) || !cost_ok(k->decode_per_byte) ||
            !cost_ok(k->min_bytes) || !(k->ratio > 0.0) ||
            !isfinite(k->ratio))
            return tacl__planner_fail(
                TACL_ERR_INVALID_ARG,
                "planner: codec %d (%s) has a negative or non-finite cost "
                "or min_bytes, or a ratio that is not positive",
                c, k->name);
        if (tacl_codec_find(k->name, &found) != TACL_OK)
            return tacl__planner_fail(TACL_ERR_INVALID_ARG,
                                      "planner: codec %d (%s) is not a codec "
                                      "of tacl's: register it first",
                                      c, k->name);
    }
    return TACL_OK;
}

static tacl_status_t check_profile(const tacl_planner_model_t *m,
                                   const tacl_planner_comm_t *comm,
                                   const tacl_planner_codec_t *codecs,
                                   int ncodecs)
{
    if (m == NULL || comm == NULL || (codecs == NULL && ncodecs > 0) ||
        ncodecs < 0)
        return tacl__planner_fail(TACL_ERR_INVALID_ARG,
                                  "planner: the model, comm or codecs is "
                                  "NULL (or ncodecs %d < 0)",
                                  ncodecs);
    if (m->ntensors < 1 || m->bytes == NULL || m->backward == NULL)
        return tacl__planner_fail(TACL_ERR_INVALID_ARG,
                                  "planner: the model has %d tensors or NULL "
                                  "arrays; it needs at least one tensor",
                                  m->ntensors);
    for (int i = 0; i < m->ntensors; i++)
        if (!cost_ok(m->bytes[i]) || !cost_ok(m->backward[i]))
            return tacl__planner_fail(TACL_ERR_INVALID_ARG,
                                      "planner: tensor %d has bytes %g and "
                                      "backward %g; both must be finite and "
                                      "non-negative",
                                      i, m->bytes[i], m->backward[i]);
    if (!cost_ok(m->forward) || !cost_ok(comm->alpha) ||
        !cost_ok(comm->beta_allreduce) || !cost_ok(comm->beta_allgather) ||
        comm->ranks < 1)
        return tacl__planner_fail(TACL_ERR_INVALID_ARG,
                                  "planner: forward %g, alpha %g, betas %g "
                                  "and %g must be finite and non-negative, "
                                  "ranks %d at least 1",
                                  m->forward, comm->alpha,
                                  comm->beta_allreduce, comm->beta_allgather,
                                  comm->ranks);
    return check_codecs(codecs, ncodecs);
}

tacl_status_t tacl_planner_create(const tacl_planner_model_t *model,
                                  const tacl_planner_comm_t *comm,
                                  const tacl_planner_codec_t *codecs,
                                  int ncodecs, tacl_planner_t **planner_p)
{
    tacl_status_t st = check_profile(model, comm, codecs, ncodecs);
    tacl_planner_t *p;
    int n;

    if (st != TACL_OK)
        return st;
    if (planner_p == NULL)
        return tacl__planner_fail(TACL_ERR_INVALID_ARG,
                                  "planner: planner_p is NULL");
    n = model->ntensors;
    p = calloc(1, sizeof(*p));
    if (p == NULL)
        goto err_nomem;
    p->pre_bytes = malloc((size_t)(n + 1) * sizeof(double));
    p->pre_back = malloc((size_t)(n + 1) * sizeof(double));
    p->codecs = malloc((size_t)(ncodecs + 1) * sizeof(*codecs));
    if (!p->pre_bytes || !p->pre_back || !p->codecs)
        goto err_free;
    p->n = n;
    p->ncodecs = ncodecs;
    p->forward = model->forward;
    p->comm = *comm;
    if (ncodecs > 0)
        memcpy(p->codecs, codecs, (size_t)ncodecs * sizeof(*codecs));
    p->pre_bytes[0] = p->pre_back[0] = 0.0;
    for (int i = 0; i < n; i++) {
        p->pre_bytes[i + 1] = p->pre_bytes[i] + model->bytes[i];
        p->pre_back[i + 1] = p->pre_back[i] + model->backward[i];
    }
    *planner_p = p;
    return TACL_OK;
err_free:
    tacl_planner_destroy(p);
err_nomem:
    return tacl__planner_fail(TACL_ERR_NO_MEMORY,
                              "planner: no memory for %d tensors", n);
}

void tacl_planner_destroy(tacl_planner_t *planner)
{
    if (planner == NULL)
        return;
    free(planner->pre_bytes);
    free(planner->pre_back);
    free(planner->codecs);
    free(planner);
}

void tacl_planner_group_cost(const tacl_planner_t *p, int option, int first,
                             int last, double *h_p, double *g_p)
{
    const tacl_planner_comm_t *c = &p->comm;
    double x = planner_bytes(p, first, last);
    const tacl_planner_codec_t *k;
    double dec;

    if (!planner_encodes(p, option, first, last)) {
        *h_p = 0.0;
        *g_p = c->alpha + c->beta_allreduce * x;
        return;
    }
    k = &p->codecs[option];
    dec = k->decode_fixed + k->decode_per_byte * x;
    *h_p = k->encode_fixed + k->encode_per_byte * x;
    if (k->summable)
        *g_p = c->alpha + c->beta_allreduce * k->ratio * x + dec;
    else
        *g_p = c->alpha + c->beta_allgather * k->ratio * x + c->ranks * dec;
}

double tacl__planner_timeline(const tacl_planner_t *p, int ngroups,
                              const int *first, const int *option,
                              const int *on_cpu, int *gap_before)
{
    double cmp = 0.0, cpu = 0.0, q = 0.0;

    for (int gi = 0; gi < ngroups; gi++) {
        int f, last;
        double h, g, ready;
        planner_group(p, ngroups, first, gi, &f, &last);
        tacl_planner_group_cost(p, option[gi], f, last, &h, &g);
        cmp += planner_back(p, f, last);
        if (on_cpu && on_cpu[gi] && planner_encodes(p, option[gi], f, last)) {
            const tacl_planner_codec_t *k = &p->codecs[option[gi]];
            cpu = fmax(cpu, cmp) + k->cpu_encode_fixed +
                  k->cpu_encode_per_byte * planner_bytes(p, f, last);
            ready = cpu;
        } else {
            cmp += h;
            ready = cmp;
        }
        if (gap_before != NULL)
            gap_before[gi] = gi > 0 && ready > q;
        q = fmax(ready, q) + g;
    }
    return p->forward + fmax(fmax(cmp, cpu), q);
}

void tacl__planner_settle(const tacl_planner_t *p, int ngroups,
                          const int *first, int *option, int *on_cpu)
{
    for (int gi = 0; gi < ngroups; gi++) {
        int f, last;
        planner_group(p, ngroups, first, gi, &f, &last);
        if (planner_encodes(p, option[gi], f, last))
            continue;
        option[gi] = TACL_PLANNER_NONE;
        if (on_cpu != NULL)
            on_cpu[gi] = 0;
    }
}

double tacl_planner_min_bytes_default(const char *name)
{
    static const char *const sparse[] = {"topk", "threshold", "randk",
                                         "sign"};

    for (size_t i = 0; name != NULL && i < sizeof(sparse) / sizeof(*sparse);
         i++)
        if (strcmp(name, sparse[i]) == 0)
            return 65536.0;
    return 0.0;
}

double tacl_planner_time(const tacl_planner_t *p, int ngroups,
                         const int *first, const int *option,
                         const int *on_cpu)
{
    return tacl__planner_timeline(p, ngroups, first, option, on_cpu, NULL);
}
