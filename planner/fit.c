/*
 * Communication lines from tacl's own cost model: tacl_comm_estimate
 * prices an all-reduce and an all-gather on the communicator at sizes
 * from 64 KiB to 64 MiB, and a least-squares line through each gives the
 * planner's alpha and betas.  The search then stays exact for the fitted
 * lines (planner.h); the estimate itself, which knows the topology and
 * the algorithm a real call takes, is what the lines follow.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "planner_int.h"

#define FIT_SIZES 6

/* Least squares of seconds = a + b * bytes over the sizes. */
static void fit_line(const double *x, const double *y, int n, double *a_p,
                     double *b_p)
{
    double sx = 0, sy = 0, sxx = 0, sxy = 0, b;

    for (int i = 0; i < n; i++) {
        sx += x[i];
        sy += y[i];
        sxx += x[i] * x[i];
        sxy += x[i] * y[i];
    }
    b = (n * sxy - sx * sy) / (n * sxx - sx * sx);
    b = b > 0.0 ? b : 0.0;
    *b_p = b;
    *a_p = fmax(0.0, (sy - b * sx) / n);
}

tacl_status_t tacl_planner_comm_fit(tacl_comm_t comm,
                                    tacl_planner_comm_t *comm_p)
{
    double x[FIT_SIZES], ar[FIT_SIZES], ag[FIT_SIZES], a_ar, a_ag;
    tacl_planner_comm_t c = {0};
    tacl_status_t st;

    if (comm_p == NULL)
        return tacl__planner_fail(TACL_ERR_INVALID_ARG,
                                  "planner_comm_fit: comm_p is NULL");
    st = tacl_comm_size(comm, &c.ranks);
    for (int i = 0; i < FIT_SIZES && st == TACL_OK; i++) {
        size_t bytes = (size_t)65536 << (2 * i);
        tacl_sim_info_t info;
        x[i] = (double)bytes;
        st = tacl_comm_estimate(comm, TACL_COLL_ALLREDUCE, bytes / 4,
                                TACL_FLOAT32, TACL_SUM, 0, &info);
        ar[i] = info.seconds;
        if (st == TACL_OK)
            st = tacl_comm_estimate(comm, TACL_COLL_ALLGATHER, bytes,
                                    TACL_UINT8, TACL_SUM, 0, &info);
        ag[i] = info.seconds;
    }
    if (st != TACL_OK)
        return tacl__planner_fail(st,
                                  "planner_comm_fit: the estimate "
                                  "failed: %s",
                                  tacl_comm_last_error(comm));
    fit_line(x, ar, FIT_SIZES, &a_ar, &c.beta_allreduce);
    fit_line(x, ag, FIT_SIZES, &a_ag, &c.beta_allgather);
    c.alpha = fmin(a_ar, a_ag);
    *comm_p = c;
    return TACL_OK;
}

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

/* The line through the two sizes: the fixed cost from the smaller, the
 * cost per byte from both (a least-squares line through many would let
 * the large sizes' noise swamp the fixed cost). */
tacl_status_t tacl_planner_time_call(tacl_comm_t comm,
                                     tacl_planner_call_fn call, void *arg,
                                     const size_t counts[2],
                                     size_t elem_size, double *a_p,
                                     double *b_p)
{
    enum { REPS = 4 };
    double t[2][REPS], x[2], y[2], b;
    tacl_status_t st = TACL_OK;
    int worst;

    if (call == NULL || counts == NULL || a_p == NULL || b_p == NULL ||
        elem_size == 0 || counts[0] >= counts[1])
        return tacl__planner_fail(TACL_ERR_INVALID_ARG,
                                  "planner_time_call: a NULL argument, "
                                  "elem_size 0 or counts not increasing");
    for (int s = 0; s < 2; s++) {
        for (int r = 0; r < REPS; r++) {
            double t0 = now_s();

            if (st == TACL_OK)
                st = call(arg, counts[s]);
            t[s][r] = now_s() - t0;
        }
        /* Every rank learns whether any call failed (statuses are
         * negative), so that none goes on to the next size's
         * collectives alone. */
        worst = (int)st;
        if (tacl_allreduce(&worst, &worst, 1, TACL_INT32, TACL_MIN, comm,
                           NULL) != TACL_OK)
            return tacl__planner_fail(TACL_ERR_INTERNAL,
                                      "planner_time_call: %s",
                                      tacl_comm_last_error(comm));
        if (worst != TACL_OK)
            return tacl__planner_fail(st != TACL_OK ? st
                                                    : (tacl_status_t)worst,
                                      "planner_time_call: the call failed "
                                      "at %zu elements%s", counts[s],
                                      st != TACL_OK ? "" : " on a peer");
        if (tacl_allreduce(t[s], t[s], REPS, TACL_FLOAT64, TACL_MAX, comm,
                           NULL) != TACL_OK)
            return tacl__planner_fail(TACL_ERR_INTERNAL,
                                      "planner_time_call: %s",
                                      tacl_comm_last_error(comm));
        qsort(t[s] + 1, REPS - 1, sizeof(double), cmp_double);
        x[s] = (double)elem_size * (double)counts[s];
        y[s] = t[s][1 + (REPS - 1) / 2];
    }
    b = fmax(0.0, (y[1] - y[0]) / (x[1] - x[0]));
    *b_p = b;
    *a_p = fmax(0.0, y[0] - b * x[0]);
    return TACL_OK;
}

tacl_status_t tacl_planner_codec_from_call(const char *name, int summable,
                                           double ratio, double call_a,
                                           double call_b,
                                           const tacl_planner_comm_t *lines,
                                           tacl_planner_codec_t *codec_p)
{
    tacl_planner_codec_t pc = {.ratio = ratio, .summable = summable != 0};
    double m, beta;

    if (name == NULL || lines == NULL || codec_p == NULL)
        return tacl__planner_fail(TACL_ERR_INVALID_ARG,
                                  "planner_codec_from_call: a NULL name, "
                                  "lines or codec_p");
    if (!(ratio > 0.0) || !isfinite(ratio) || !(call_a >= 0.0) ||
        !isfinite(call_a) || !(call_b >= 0.0) || !isfinite(call_b))
        return tacl__planner_fail(TACL_ERR_INVALID_ARG,
                                  "planner_codec_from_call: codec %s: ratio "
                                  "%g (above 0) or call line %g s + %g s/B "
                                  "(finite, not negative)",
                                  name, ratio, call_a, call_b);
    m = summable ? 1 : lines->ranks;
    beta = summable ? lines->beta_allreduce : lines->beta_allgather;
    snprintf(pc.name, sizeof(pc.name), "%s", name);
    pc.min_bytes = tacl_planner_min_bytes_default(pc.name);
    pc.decode_fixed = fmax(0.0, (call_a - lines->alpha) / m);
    pc.decode_per_byte = fmax(0.0, (call_b - beta * ratio) / m);
    *codec_p = pc;
    return TACL_OK;
}
