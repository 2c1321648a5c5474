/*
 * Communication lines from tacl's own cost model: tacl_comm_estimate
 * prices an all-reduce and an all-gather on the communicator at sizes
 * from 64 KiB to 64 MiB, and a least-squares line through each gives the
 * planner's alpha and betas.  The search then stays exact for the fitted
 * lines (planner.h); the estimate itself, which knows the topology and
 * the algorithm a real call takes, is what the lines follow.
 */
#include <math.h>

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
