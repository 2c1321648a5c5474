/*
 * Cupcake's optimal fusion search (thesis section 5.3.2, Algorithm 5.1),
 * for one option under which every group runs.
 *
 * The search walks the first group from tensor k, given the state the
 * groups before it leave: cmp, when the compute stream is done with them
 * (the thesis' M.comp) and q, when the communication stream is free
 * (M.delay = q - cmp).  Its two prunings, as Theorem 5.1 states them:
 *
 *  - the optimistic outcome (Insight 1, lines 76-82): a first group k..i
 *    cannot end the step before max(every backward and encode done, its
 *    communication done followed by the rest's as one group); a case
 *    whose bound is no better than the best step found so far is
 *    skipped.  The rest as one group is a true lower bound because the
 *    costs are affine with non-negative intercepts, so splitting never
 *    costs less (the thesis' subadditivity);
 *  - the delay (Insight 2, lines 68-74): groups k..j that are encoded
 *    before the communication stream frees are no better than the
 *    largest such group j*, so the first group ends at j* or later.
 *
 * Beyond the thesis, one exact pruning that makes the search fast on 314
 * tensors: the future depends only on (k, cmp, q) and grows with both,
 * so a state no earlier in either than one already expanded at the same
 * k cannot lead to a better step (a small Pareto front per k).  The
 * best step is started from two obvious plans (one group; one group a
 * tensor), as the thesis suggests bootstrapping global_opt_time.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "planner_int.h"

/* States kept per tensor index for the dominance pruning. */
#define FRONT_MAX 512

typedef struct {
    const tacl_planner_t *p;
    int option;
    double best; /* best end of backward and communication */
    int *cur;    /* first tensor of each group on the path */
    int *best_first;
    int best_n;
    double (*front)[2]; /* p->n * FRONT_MAX states (cmp, q) */
    int *front_n;
    long visited;
} fuse_search_t;

/* Whether (cmp, q) at k is dominated; if not, remember it. */
static int dominated(fuse_search_t *s, int k, double cmp, double q)
{
    double(*f)[2] = s->front + (size_t)k * FRONT_MAX;
    int *n = &s->front_n[k];

    for (int i = 0; i < *n; i++)
        if (f[i][0] <= cmp && f[i][1] <= q)
            return 1;
    for (int i = 0; i < *n; i++)
        if (cmp <= f[i][0] && q <= f[i][1]) { /* replaces one it beats */
            f[i][0] = cmp;
            f[i][1] = q;
            return 0;
        }
    if (*n < FRONT_MAX) {
        f[*n][0] = cmp;
        f[*n][1] = q;
        (*n)++;
    }
    return 0;
}

static void fuse_from(fuse_search_t *s, int k, int depth, double cmp,
                      double q)
{
    const tacl_planner_t *p = s->p;
    int n = p->n, jstar = k;
    double delay = q - cmp;

    if (k == n) {
        double end = fmax(cmp, q);
        if (end < s->best) {
            s->best = end;
            s->best_n = depth;
            memcpy(s->best_first, s->cur, (size_t)depth * sizeof(int));
        }
        return;
    }
    if (dominated(s, k, cmp, q))
        return;
    s->visited++;
    /* Insight 2: the largest first group encoded before q. */
    for (int i = k; i < n; i++) {
        double h, g;
        tacl_planner_group_cost(p, s->option, k, i, &h, &g);
        if (planner_back(p, k, i) + h > delay)
            break;
        jstar = i;
    }
    for (int i = jstar; i < n; i++) {
        double h, g, hr = 0.0, gr = 0.0, gl = 0.0, hl, ready, start, bound;
        tacl_planner_group_cost(p, s->option, k, i, &h, &g);
        if (i + 1 < n) {
            tacl_planner_group_cost(p, s->option, i + 1, n - 1, &hr, &gr);
            tacl_planner_group_cost(p, s->option, n - 1, n - 1, &hl, &gl);
        }
        ready = cmp + planner_back(p, k, i) + h;
        start = fmax(ready, q);
        /* Insight 1: the optimistic outcome of this first group, and one
         * more bound: the group holding the last tensor communicates
         * after all compute, for at least that tensor's time alone. */
        bound = fmax(cmp + planner_back(p, k, n - 1) + h + hr + gl,
                     start + g + gr);
        if (bound >= s->best) {
            /* For i < n - 1 the bound only grows with i (h + hr and
             * g + gr are fixed, ready grows): skip to the last case. */
            if (i < n - 2)
                i = n - 2;
            continue;
        }
        s->cur[depth] = k;
        fuse_from(s, i + 1, depth + 1, ready, start + g);
    }
}

/* Groups of about total / m bytes each into s->cur; their count. */
static int even_split(fuse_search_t *s, int m)
{
    const tacl_planner_t *p = s->p;
    double share = planner_bytes(p, 0, p->n - 1) / m;
    int ng = 1;

    s->cur[0] = 0;
    for (int i = 1; i < p->n; i++)
        if (planner_bytes(p, s->cur[ng - 1], i - 1) >= share)
            s->cur[ng++] = i;
    return ng;
}

/* Start from the best of one group a tensor and even splits into 1 to
 * BOOT_SPLITS groups, so the optimistic outcome prunes from the start. */
#define BOOT_SPLITS 64
static void fuse_bootstrap(fuse_search_t *s, int *opt)
{
    const tacl_planner_t *p = s->p;

    for (int i = 0; i < p->n; i++) {
        s->cur[i] = i;
        opt[i] = s->option;
    }
    s->best = tacl_planner_time(p, p->n, s->cur, opt, NULL) - p->forward;
    s->best_n = p->n;
    memcpy(s->best_first, s->cur, (size_t)p->n * sizeof(int));
    for (int m = 1; m <= BOOT_SPLITS && m < p->n; m++) {
        int ng = even_split(s, m);
        double t = tacl_planner_time(p, ng, s->cur, opt, NULL) - p->forward;
        if (t < s->best) {
            s->best = t;
            s->best_n = ng;
            memcpy(s->best_first, s->cur, (size_t)ng * sizeof(int));
        }
    }
}

tacl_status_t tacl_planner_fuse(tacl_planner_t *planner, int option,
                                int *first, int *ngroups_p, double *time_p,
                                long *visited_p)
{
    return tacl__planner_fuse_below(planner, option, INFINITY, first,
                                    ngroups_p, time_p, visited_p);
}

tacl_status_t tacl__planner_fuse_below(tacl_planner_t *planner, int option,
                                       double cutoff, int *first,
                                       int *ngroups_p, double *time_p,
                                       long *visited_p)
{
    fuse_search_t s = {.p = planner, .option = option};
    int n;

    if (planner == NULL || first == NULL || ngroups_p == NULL ||
        time_p == NULL)
        return tacl__planner_fail(TACL_ERR_INVALID_ARG,
                                  "planner_fuse: a NULL argument");
    if (option < TACL_PLANNER_NONE || option >= planner->ncodecs)
        return tacl__planner_fail(TACL_ERR_INVALID_ARG,
                                  "planner_fuse: option %d is not -1 or a "
                                  "codec index below %d",
                                  option, planner->ncodecs);
    n = planner->n;
    s.cur = malloc((size_t)n * sizeof(int));
    s.best_first = malloc((size_t)n * sizeof(int));
    s.front = malloc((size_t)n * FRONT_MAX * sizeof(*s.front));
    s.front_n = calloc((size_t)n, sizeof(int));
    if (!s.cur || !s.best_first || !s.front || !s.front_n) {
        free(s.cur);
        free(s.best_first);
        free(s.front);
        free(s.front_n);
        return tacl__planner_fail(TACL_ERR_NO_MEMORY,
                                  "planner_fuse: no memory for %d tensors",
                                  n);
    }
    fuse_bootstrap(&s, first); /* first serves as the options' scratch */
    if (cutoff - planner->forward < s.best) {
        s.best = cutoff - planner->forward;
        s.best_n = 0;
    }
    fuse_from(&s, 0, 0, 0.0, 0.0);
    memcpy(first, s.best_first, (size_t)s.best_n * sizeof(int));
    *ngroups_p = s.best_n;
    *time_p = s.best_n ? planner->forward + s.best : INFINITY;
    if (visited_p != NULL)
        *visited_p = s.visited;
    free(s.cur);
    free(s.best_first);
    free(s.front);
    free(s.front_n);
    return TACL_OK;
}
