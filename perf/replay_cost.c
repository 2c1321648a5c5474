/*
 * The replay harness' costs: the gradient values every rank holds, and
 * the codec and compressed call timed in the job, turned into the
 * planner's codec profile.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "common.h"
#include "replay.h"

/*
 * The gradient values: rank r's value j is an integer in [-2^10, 2^10)
 * times 2^-12, so the sum over up to 2^12 ranks is exact in float32 in
 * any order and the uncompressed result can be checked bit for bit.
 */
float replay_value(int rank, size_t j)
{
    uint64_t h = ((uint64_t)rank << 40) + j + 0x9e3779b97f4a7c15ull;

    h = (h ^ (h >> 31)) * 0xd6e8feb86659fd93ull;
    h = (h ^ (h >> 32)) * 0xd6e8feb86659fd93ull;
    return (float)((int)((h >> 40) & 2047) - 1024) / 4096.0f;
}

void replay_fill(float *v, size_t n, int rank)
{
    for (size_t j = 0; j < n; j++)
        v[j] = replay_value(rank, j);
}

/*
 * The codec's costs on this machine: encode (with error feedback) and
 * decode timed at a few sizes, the best of three each, and a line
 * through the smallest and largest; the slowest rank's numbers, so
 * every rank plans alike.
 */
/* The line through the smallest and the largest size: the fixed cost
 * from the first, the cost per byte from the two (a least-squares line
 * would let the large sizes' noise swamp the fixed cost). */
static void fit(const double *x, const double *y, int n, double *a_p,
                double *b_p)
{
    double b = fmax(0.0, (y[n - 1] - y[0]) / (x[n - 1] - x[0]));

    *b_p = b;
    *a_p = fmax(0.0, y[0] - b * x[0]);
}

int replay_time_codec(const tacl_codec_t *codec,
                      const tacl_codec_params_t *params, tacl_comm_t comm,
                      replay_codec_cost_t *cost_p)
{
    enum { SIZES = 4 };
    const size_t counts[SIZES] = {1024, 65536, 1 << 20, 1 << 22};
    double x[SIZES], enc[SIZES], dec[SIZES], out[5];
    size_t cap = 0, bytes = 0;
    float *v = malloc(counts[SIZES - 1] * sizeof(float));
    float *err = calloc(counts[SIZES - 1], sizeof(float));
    void *buf = NULL;
    tacl_status_t st;

    st = tacl_codec_encoded_bound(codec, params, 1, &counts[SIZES - 1], &cap);
    if (st == TACL_OK)
        buf = malloc(cap);
    if (v != NULL)
        replay_fill(v, counts[SIZES - 1], 7);
    for (int s = 0; s < SIZES && st == TACL_OK && buf && v && err; s++) {
        const float *src = v;
        float *dst = v;

        x[s] = 4.0 * (double)counts[s];
        enc[s] = dec[s] = 1e30;
        /* The first round warms the buffers and is not counted. */
        for (int r = 0; r < 4 && st == TACL_OK; r++) {
            double t0 = tacl__perf_now(), t1;

            st = tacl_codec_encode(codec, params, 1, &src, &counts[s], &err,
                                   buf, cap, &bytes);
            t1 = tacl__perf_now();
            if (st == TACL_OK)
                st = tacl_codec_decode(codec, params, buf, bytes, 1, &dst,
                                       &counts[s]);
            if (r > 0) {
                enc[s] = fmin(enc[s], t1 - t0);
                dec[s] = fmin(dec[s], tacl__perf_now() - t1);
            }
        }
    }
    free(v);
    free(err);
    free(buf);
    if (st != TACL_OK || cap == 0) {
        fprintf(stderr, "replay: timing codec %s failed: %s\n", codec->name,
                tacl_last_error());
        return -1;
    }
    fit(x, enc, SIZES, &out[0], &out[1]);
    fit(x, dec, SIZES, &out[2], &out[3]);
    out[4] = (double)bytes / x[SIZES - 1];
    if (tacl_allreduce(out, out, 5, TACL_FLOAT64, TACL_MAX, comm, NULL) !=
        TACL_OK) {
        fprintf(stderr, "replay: %s\n", tacl_comm_last_error(comm));
        return -1;
    }
    *cost_p = (replay_codec_cost_t){out[0], out[1], out[2], out[3], out[4]};
    return 0;
}

void replay_route_name(const replay_route_t *r, char *buf, size_t size)
{
    snprintf(buf, size, "%s/%s", tacl_comp_scheme_name(r->scheme),
             r->hops == TACL_COMP_HOPS_INTER ? "inter" : "all");
}

/* One compressed call of the route on the harness' buffers. */
typedef struct {
    const tacl_codec_t *codec;
    const tacl_codec_params_t *params;
    const replay_route_t *route;
    tacl_comm_t comm;
    float *v, *out, *err;
} call_arg_t;

static tacl_status_t run_call(void *arg, size_t count)
{
    call_arg_t *c = arg;

    return tacl_comp_allreduce_hops(c->v, c->out, count, c->codec,
                                    c->params, c->err, c->route->scheme,
                                    c->route->hops, c->comm);
}

/*
 * The whole compressed call as the harness makes it (tacl_comp_allreduce
 * with error feedback, over the route's scheme and hops) timed at two
 * sizes by tacl_planner_time_call: seconds = *a_p + *b_p * bytes.  This
 * is what the planner's codec terms are fitted to
 * (tacl_planner_codec_from_call), so that they carry the call's extra
 * collectives (its header, a sparsifier's size exchange) and the encode,
 * which the harness runs on its communication thread.
 */
int replay_time_call(const tacl_codec_t *codec,
                     const tacl_codec_params_t *params,
                     const replay_route_t *route, tacl_comm_t comm,
                     double *a_p, double *b_p)
{
    const size_t counts[2] = {16384, 1 << 21};
    call_arg_t c = {codec, params, route, comm,
                    malloc(counts[1] * sizeof(float)),
                    malloc(counts[1] * sizeof(float)),
                    calloc(counts[1], sizeof(float))};
    tacl_status_t st = c.v && c.out && c.err ? TACL_OK : TACL_ERR_NO_MEMORY;
    int rank = 0;

    /* Each rank its own values, as in the steps: a sparsifier keeps
     * different indices on each, which the decodes pay for. */
    if (st == TACL_OK)
        st = tacl_comm_rank(comm, &rank);
    if (st == TACL_OK) {
        replay_fill(c.v, counts[1], rank);
        st = tacl_planner_time_call(comm, run_call, &c, counts,
                                    sizeof(float), a_p, b_p);
    }
    free(c.v);
    free(c.out);
    free(c.err);
    if (st != TACL_OK) {
        fprintf(stderr, "replay: timing the compressed call failed: %s\n",
                tacl_planner_last_error());
        return -1;
    }
    return 0;
}
