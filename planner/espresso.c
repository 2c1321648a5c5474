/*
 * Espresso's per-tensor compression decisions (thesis chapter 4, section
 * 4.7): the device pass of Algorithm 4.1 with the three properties of
 * section 4.7.2, then the CPU-offload counts of Algorithm 4.2 (Lemma 4.1,
 * Theorem 4.1), where "CPU" is the library's progress thread.  planner.h
 * states the model; this file keeps one collective a tensor, as Espresso
 * does, and leaves fusion to Cupcake's search (fusion.c).
 *
 * Espresso's decision tree also chooses the scheme (gather or shuffle)
 * and which hops carry encoded data.  The options here are codec
 * profiles on the device or on the progress thread; a consumer offers a
 * codec over each scheme and hops as an option of its own, priced by its
 * call (perf/replay does), and the choice of option is then that one.
 */
#define _GNU_SOURCE /* qsort_r */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "planner_int.h"

/* Most offload-count vectors tried exhaustively (Theorem 4.1's product). */
#define OFFLOAD_MAX_VECTORS 4096

/* The timeline with one group a tensor (model.c). */
static double decided_time(const tacl_planner_t *p, const int *codec,
                           const int *on_cpu, int *gap_before)
{
    return tacl__planner_timeline(p, p->n, NULL, codec, on_cpu, gap_before);
}

double tacl_planner_time_decided(const tacl_planner_t *planner,
                                 const int *codec, const int *on_cpu)
{
    return decided_time(planner, codec, on_cpu, NULL);
}

/* Property 2: tensors by size, largest first, then nearer the output
 * layer (earlier in gradient-ready order).  For qsort_r. */
static int by_size_then_output(const void *a, const void *b, void *arg)
{
    const tacl_planner_t *p = arg;
    int i = *(const int *)a, j = *(const int *)b;
    double si = planner_bytes(p, i, i), sj = planner_bytes(p, j, j);

    if (si != sj)
        return si > sj ? -1 : 1;
    return i - j;
}

/* Property 1: uncompressed tensors communicated before the last bubble
 * leave the candidates. */
static void remove_before_bubbles(const tacl_planner_t *p, const int *codec,
                                  const int *on_cpu, int *gap, int *removed)
{
    int last_gap = 0;

    decided_time(p, codec, on_cpu, gap);
    for (int i = 0; i < p->n; i++)
        if (gap[i])
            last_gap = i;
    for (int i = 0; i < last_gap; i++)
        if (codec[i] == TACL_PLANNER_NONE)
            removed[i] = 1;
}

/* Whether a codec has an encoder on the progress thread. */
static int has_cpu(const tacl_planner_t *p, int codec)
{
    const tacl_planner_codec_t *k = &p->codecs[codec];
    return k->cpu_encode_fixed != 0.0 || k->cpu_encode_per_byte != 0.0;
}

/*
 * Algorithm 4.1: each candidate tensor takes its best option, the others
 * kept.  with_cpu adds the progress thread to the options (the second
 * sweep, after the offload counts; see tacl_planner_decide).
 */
static double option_pass(const tacl_planner_t *p, const int *order,
                          int with_cpu, int *codec, int *on_cpu, int *gap,
                          int *removed)
{
    double best = decided_time(p, codec, on_cpu, NULL);

    remove_before_bubbles(p, codec, on_cpu, gap, removed);
    for (int r = 0; r < p->n; r++) {
        int i = order[r], keep = codec[i], keep_cpu = on_cpu[i];
        if (removed[i])
            continue;
        for (int c = TACL_PLANNER_NONE; c < p->ncodecs; c++)
            for (int cpu = 0; cpu <= (with_cpu && c >= 0 && has_cpu(p, c));
                 cpu++) {
                double t;
                codec[i] = c;
                on_cpu[i] = cpu;
                t = decided_time(p, codec, on_cpu, NULL);
                if (t < best) {
                    best = t;
                    keep = c;
                    keep_cpu = cpu;
                }
            }
        codec[i] = keep;
        on_cpu[i] = keep_cpu;
        remove_before_bubbles(p, codec, on_cpu, gap, removed);
    }
    return best;
}

typedef struct {
    int *members; /* tensor indices, farthest from the output first */
    int size;
    int u; /* how many go to the progress thread */
} offload_group_t;

/* Put the first u of each group on the CPU, the rest on the device. */
static double offload_apply(const tacl_planner_t *p, offload_group_t *g,
                            int ng, const int *codec, int *on_cpu)
{
    for (int gi = 0; gi < ng; gi++)
        for (int m = 0; m < g[gi].size; m++)
            on_cpu[g[gi].members[m]] = m < g[gi].u;
    return decided_time(p, codec, on_cpu, NULL);
}

/* Every vector of counts (an odometer), or one group at a time when the
 * vectors are too many; leaves the best counts applied. */
static double offload_search(const tacl_planner_t *p, offload_group_t *g,
                             int ng, const int *codec, int *on_cpu)
{
    double vectors = 1.0, best = INFINITY;
    int *best_u = calloc((size_t)ng + 1, sizeof(int));

    for (int gi = 0; gi < ng; gi++)
        vectors *= g[gi].size + 1;
    for (int gi = 0; gi < ng; gi++)
        g[gi].u = 0;
    if (vectors <= OFFLOAD_MAX_VECTORS) {
        for (;;) {
            double t = offload_apply(p, g, ng, codec, on_cpu);
            int gi = 0;
            if (t < best) {
                best = t;
                for (int k = 0; k < ng; k++)
                    best_u[k] = g[k].u;
            }
            while (gi < ng && g[gi].u == g[gi].size)
                g[gi++].u = 0;
            if (gi == ng)
                break;
            g[gi].u++;
        }
    } else {
        for (int gi = 0; gi < ng; gi++) {
            for (int u = 0; u <= g[gi].size; u++) {
                double t;
                for (int k = 0; k < ng; k++)
                    g[k].u = k == gi ? u : best_u[k];
                t = offload_apply(p, g, ng, codec, on_cpu);
                if (t < best) {
                    best = t;
                    best_u[gi] = u;
                }
            }
        }
    }
    for (int k = 0; k < ng; k++)
        g[k].u = best_u[k];
    best = offload_apply(p, g, ng, codec, on_cpu);
    free(best_u);
    return best;
}

/* Algorithm 4.2: group the device-compressed tensors that have a CPU
 * kernel by (size, codec), farthest from the output layer first. */
static double offload_pass(const tacl_planner_t *p, const int *codec,
                           int *on_cpu, int *scratch, double best)
{
    offload_group_t *g = calloc((size_t)p->n, sizeof(*g));
    int *before = malloc((size_t)p->n * sizeof(int));
    int ng = 0, nm = 0;
    double t;

    if (g == NULL || before == NULL) {
        free(g);
        free(before);
        return best;
    }
    memcpy(before, on_cpu, (size_t)p->n * sizeof(int));
    for (int i = p->n - 1; i >= 0; i--) {
        int gi;
        if (codec[i] == TACL_PLANNER_NONE)
            continue;
        if (!has_cpu(p, codec[i]))
            continue;
        for (gi = 0; gi < ng; gi++) {
            int j = g[gi].members[0];
            if (codec[j] == codec[i] &&
                planner_bytes(p, j, j) == planner_bytes(p, i, i))
                break;
        }
        if (gi == ng) { /* a new group: its members follow in scratch */
            g[ng].members = scratch + nm;
            ng++;
        }
        /* Members of a group are contiguous: move later groups up. */
        memmove(g[gi].members + g[gi].size + 1, g[gi].members + g[gi].size,
                (size_t)(scratch + nm - (g[gi].members + g[gi].size)) *
                    sizeof(int));
        for (int k2 = gi + 1; k2 < ng; k2++)
            g[k2].members++;
        g[gi].members[g[gi].size++] = i;
        nm++;
    }
    t = offload_search(p, g, ng, codec, on_cpu);
    if (t < best) /* else the placement it started from stays */
        best = t;
    else
        memcpy(on_cpu, before, (size_t)p->n * sizeof(int));
    free(g);
    free(before);
    return best;
}

tacl_status_t tacl_planner_decide(tacl_planner_t *p, int *codec, int *on_cpu,
                                  double *time_p)
{
    int *order, *gap, *removed, *scratch;
    double best;

    if (p == NULL || codec == NULL || on_cpu == NULL || time_p == NULL)
        return tacl__planner_fail(TACL_ERR_INVALID_ARG,
                                  "planner_decide: a NULL argument");
    order = malloc(4 * (size_t)p->n * sizeof(int));
    if (order == NULL)
        return tacl__planner_fail(TACL_ERR_NO_MEMORY,
                                  "planner_decide: no memory for %d tensors",
                                  p->n);
    gap = order + p->n;
    removed = gap + p->n;
    scratch = removed + p->n;
    for (int i = 0; i < p->n; i++) {
        order[i] = i;
        codec[i] = TACL_PLANNER_NONE;
        on_cpu[i] = 0;
        removed[i] = 0;
    }
    qsort_r(order, (size_t)p->n, sizeof(int), by_size_then_output, p);
    best = option_pass(p, order, 0, codec, on_cpu, gap, removed);
    best = offload_pass(p, codec, on_cpu, scratch, best);
    /* A second sweep: tensors the device pass left uncompressed (its
     * encode delayed the backward too much) may gain on the progress
     * thread, which Algorithm 4.2 alone never offers them; then the
     * counts again. */
    for (int i = 0; i < p->n; i++)
        removed[i] = 0;
    best = fmin(best, option_pass(p, order, 1, codec, on_cpu, gap, removed));
    best = offload_pass(p, codec, on_cpu, scratch, best);
    tacl__planner_settle(p, p->n, NULL, codec, on_cpu);
    *time_p = best;
    free(order);
    return TACL_OK;
}
