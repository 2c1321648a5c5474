/*
 * comp_perf: the compressed all-reduce (tacl_comp_allreduce_hops), or with
 * --coll reduce_scatter the compressed reduce-scatter, against the dense
 * float32 collective, one line per codec, scheme and hops, with
 * the median time of the iterations (the slowest rank's) beside
 * tacl_comp_estimate_hops' seconds, the bytes it says a rank sends
 * between nodes and in all.  Started by a launcher:
 *
 *   tacl-run -n 4 build/perf/comp_perf [--count N] [--iters K]
 *            [--codecs fp16,int8,topk] [--density D]
 *            [--coll allreduce|reduce_scatter]
 *
 * N is the values each rank sends (a reduce-scatter's input, whose
 * block is N / ranks).
 *
 * Inputs are random normals; error feedback is on (caller's residual),
 * as training would run it.  Timings include encoding and decoding.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h"
#include "parse.h"
#include "tacl.h"

#define USAGE                                                             \
    "usage: comp_perf [--count N] [--iters K] [--density D] "            \
    "[--codecs fp16,int8,...]\n"                                         \
    "                 [--coll allreduce|reduce_scatter]\n"                \
    "  started by a launcher (tacl-run -n 4 comp_perf ...)\n"

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

/* One call of coll: dense without a codec; count as the call's. */
static tacl_status_t call_once(tacl_comm_t comm, tacl_coll_t coll,
                               const float *x, float *y, size_t count,
                               const tacl_codec_t *codec,
                               const tacl_codec_params_t *p, float *err,
                               tacl_comp_scheme_t scheme,
                               tacl_comp_hops_t hops)
{
    if (coll == TACL_COLL_REDUCE_SCATTER)
        return codec == NULL
                   ? tacl_reduce_scatter(x, y, count, TACL_FLOAT32, TACL_SUM,
                                         comm, NULL)
                   : tacl_comp_reduce_scatter_hops(x, y, count, codec, p, err,
                                                   scheme, hops, comm);
    return codec == NULL ? tacl_allreduce(x, y, count, TACL_FLOAT32, TACL_SUM,
                                          comm, NULL)
                         : tacl_comp_allreduce_hops(x, y, count, codec, p,
                                                    err, scheme, hops, comm);
}

/* The median over iterations of the slowest rank's time; -1 on error. */
static double time_calls(tacl_comm_t comm, tacl_coll_t coll, int iters,
                         const float *x, float *y, size_t count,
                         const tacl_codec_t *codec,
                         const tacl_codec_params_t *p, float *err,
                         tacl_comp_scheme_t scheme, tacl_comp_hops_t hops)
{
    double *t = malloc((size_t)iters * sizeof(*t)), med;

    for (int i = 0; i < iters; i++) {
        double t0 = now();
        tacl_status_t st = call_once(comm, coll, x, y, count, codec, p, err,
                                     scheme, hops);

        t[i] = now() - t0;
        if (st != TACL_OK) {
            fprintf(stderr, "comp_perf: %s\n", tacl_comm_last_error(comm));
            free(t);
            return -1;
        }
        if (tacl_allreduce(&t[i], &t[i], 1, TACL_FLOAT64, TACL_MAX, comm,
                           NULL) != TACL_OK) {
            free(t);
            return -1;
        }
    }
    qsort(t, (size_t)iters, sizeof(*t), cmp_double);
    med = t[iters / 2];
    free(t);
    return med;
}

static uint64_t sent_bytes(const tacl_sim_info_t *info)
{
    uint64_t sum = 0;

    for (int l = 0; l < TACL_NUM_LINK_CLASSES; l++)
        sum += info->bytes[l];
    return sum;
}

int main(int argc, char **argv)
{
    size_t count = 1 << 22, call_count;
    tacl_coll_t coll = TACL_COLL_ALLREDUCE;
    int iters = 20, rank, size, rc = 0;
    double density = 0.01, dense;
    char codecs[256] = "fp16,bf16,int8,int4,topk,threshold,randk,sign";
    tacl_comm_t comm;
    float *x, *y, *err;

    for (int i = 1; i < argc; i++) {
        const char *opt = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        tacl__parse_err_t perr = TACL_PARSE_OK;
        uint64_t n = 0;

        if (tacl__perf_first_contact(opt, "comp_perf",
                                     "tacl compressed all-reduce", USAGE))
            return 0;
        if (val == NULL) {
            fprintf(stderr, "comp_perf: %s needs a value\n%s", opt, USAGE);
            return 2;
        }
        i++;
        if (strcmp(opt, "--count") == 0) {
            perr = tacl__parse_size(val, 1, (uint64_t)1 << 40, &n);
            count = (size_t)n;
        } else if (strcmp(opt, "--iters") == 0) {
            perr = tacl__parse_int(val, 1, 1 << 24, &iters);
        } else if (strcmp(opt, "--density") == 0) {
            perr = tacl__parse_double(val, 0, 1, &density);
        } else if (strcmp(opt, "--coll") == 0) {
            if (strcmp(val, "allreduce") == 0)
                coll = TACL_COLL_ALLREDUCE;
            else if (strcmp(val, "reduce_scatter") == 0)
                coll = TACL_COLL_REDUCE_SCATTER;
            else
                perr = TACL_PARSE_RANGE;
        } else if (strcmp(opt, "--codecs") == 0) {
            if (strlen(val) >= sizeof(codecs))
                perr = TACL_PARSE_RANGE;
            else
                snprintf(codecs, sizeof(codecs), "%s", val);
        } else {
            fprintf(stderr, "comp_perf: unknown option %s\n%s", opt, USAGE);
            return 2;
        }
        if (perr != TACL_PARSE_OK) {
            fprintf(stderr, "comp_perf: %s \"%s\": %s\n", opt, val,
                    tacl__parse_strerror(perr));
            return 2;
        }
    }
    if (iters < 1 || count == 0) {
        fprintf(stderr, "comp_perf: --iters and --count must be positive\n");
        return 2;
    }
    if (tacl_comm_init_env(&comm) != TACL_OK) {
        fprintf(stderr, "comp_perf: %s\n", tacl_comm_last_error(NULL));
        return 1;
    }
    tacl_comm_rank(comm, &rank);
    tacl_comm_size(comm, &size);
    call_count = coll == TACL_COLL_REDUCE_SCATTER ? count / (size_t)size
                                                  : count;
    if (call_count == 0) {
        fprintf(stderr, "comp_perf: --count %zu is below the %d ranks\n",
                count, size);
        return 2;
    }
    x = malloc(count * sizeof(float));
    y = malloc(count * sizeof(float));
    err = calloc(count, sizeof(float));
    if (x == NULL || y == NULL || err == NULL) {
        fprintf(stderr, "comp_perf: no memory for %zu values\n", count);
        return 1;
    }
    srand(1234 + (unsigned)rank);
    for (size_t i = 0; i < count; i++)
        x[i] = (float)(((double)rand() / RAND_MAX - 0.5) * 2e-3);
    dense = time_calls(comm, coll, iters, x, y, call_count, NULL, NULL, NULL,
                       0, 0);
    if (rank == 0)
        printf("# %s of %zu values a rank\n", tacl_coll_name(coll), count);
    if (rank == 0)
        printf("%-10s %-8s %-6s %12s %8s %12s %14s %14s\n", "codec",
               "scheme", "hops", "median_s", "speedup", "est_s",
               "est_net_bytes", "est_bytes_sent");
    if (rank == 0)
        printf("%-10s %-8s %-6s %12.6f %8.2f %12s %14s %14s\n", "none", "-",
               "-", dense, 1.0, "-", "-", "-");
    for (char *name = strtok(codecs, ","); name != NULL && dense > 0;
         name = strtok(NULL, ",")) {
        const tacl_codec_t *codec;
        tacl_codec_params_t p = {.density = density, .bits = 8, .seed = 1};

        if (tacl_codec_find(name, &codec) != TACL_OK) {
            fprintf(stderr, "comp_perf: no codec %s\n", name);
            rc = 1;
            continue;
        }
        if (strcmp(name, "int4") == 0)
            p.bits = 4;
        for (int s = 0; s < TACL_NUM_COMP_SCHEMES; s++) {
            for (int h = 0; h < TACL_NUM_COMP_HOPS; h++) {
                tacl_sim_info_t info;
                double t;

                /* qgz is a reduce-scatter scheme only. */
                if ((s == TACL_COMP_SUM &&
                     !(codec->flags & TACL_CODEC_SUMMABLE)) ||
                    s == TACL_COMP_QUANT_A2A)
                    continue;
                memset(err, 0, count * sizeof(float));
                t = time_calls(comm, coll, iters, x, y, call_count, codec,
                               &p, err, (tacl_comp_scheme_t)s,
                               (tacl_comp_hops_t)h);
                if (t < 0) {
                    rc = 1;
                    continue;
                }
                if (rank != 0)
                    continue;
                if (tacl_comp_estimate_hops(comm, coll, call_count,
                                            codec, &p, (tacl_comp_scheme_t)s,
                                            (tacl_comp_hops_t)h,
                                            &info) != TACL_OK)
                    memset(&info, 0, sizeof(info));
                printf("%-10s %-8s %-6s %12.6f %8.2f %12.6f %14llu %14llu\n",
                       name, tacl_comp_scheme_name((tacl_comp_scheme_t)s),
                       h == TACL_COMP_HOPS_ALL ? "all" : "inter", t,
                       dense / t, info.seconds,
                       (unsigned long long)info.bytes[TACL_LINK_NET],
                       (unsigned long long)sent_bytes(&info));
            }
        }
    }
    free(x);
    free(y);
    free(err);
    tacl_comm_destroy(comm);
    return rc;
}
