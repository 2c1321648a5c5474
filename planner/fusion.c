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
 * so a state no earlier in either than another at the same k cannot lead
 * to a better step.  The recursion is therefore unrolled forward in k:
 * every state reaching tensor k comes from a front before k, so front k
 * is complete, and cut down to its Pareto set, before it is expanded, and
 * each state is expanded once (the recursive form re-expanded a state
 * each time a better way to it turned up: 318,701 states against 3,867
 * on 314 equal tensors).  A third bound joins the optimistic outcome
 * (the group holding the last tensor communicates after all compute),
 * and the best step starts from simple plans (one group a tensor; even
 * splits by bytes), as the thesis suggests bootstrapping
 * global_opt_time.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "planner_int.h"

/* Relative slack of the dominance test: sums of the same costs taken in
 * another order differ in their last bits, and such states are equal. */
#define DOMINANCE_SLACK 1e-12

/* Where the streams stand after some groups; the last group began at
 * tensor from_k, after state from_i of front from_k. */
typedef struct {
    double cmp, q;
    int from_k, from_i;
} fuse_state_t;

/* The states that reach one tensor index, none dominating another once
 * filtered. */
typedef struct {
    fuse_state_t *v;
    int n, cap;
} fuse_front_t;

typedef struct {
    const tacl_planner_t *p;
    int option;
    double best; /* best end of backward and communication */
    int *cur;    /* scratch: first tensor of each group */
    int *best_first;
    int best_n;
    fuse_front_t *front; /* p->n + 1 fronts */
    int best_k, best_i;  /* the best completion's last state, or -1 */
    long visited;
} fuse_search_t;

static int dominates(const fuse_state_t *a, double cmp, double q)
{
    return a->cmp <= cmp + DOMINANCE_SLACK * cmp &&
           a->q <= q + DOMINANCE_SLACK * q;
}

/* Add a state to front k unless one there dominates it; -1: no memory. */
static int front_push(fuse_front_t *f, double cmp, double q, int from_k,
                      int from_i)
{
    for (int i = 0; i < f->n; i++)
        if (dominates(&f->v[i], cmp, q))
            return 0;
    if (f->n == f->cap) {
        int cap = f->cap ? 2 * f->cap : 16;
        fuse_state_t *v = realloc(f->v, (size_t)cap * sizeof(*v));
        if (v == NULL)
            return -1;
        f->v = v;
        f->cap = cap;
    }
    f->v[f->n++] = (fuse_state_t){cmp, q, from_k, from_i};
    return 0;
}

static int by_cmp_then_q(const void *a, const void *b)
{
    const fuse_state_t *x = a, *y = b;

    if (x->cmp != y->cmp)
        return x->cmp < y->cmp ? -1 : 1;
    return (x->q > y->q) - (x->q < y->q);
}

/* Keep the states no other dominates (a Pareto front), before the front
 * is expanded, so that its children's parent indices stay valid. */
static void front_filter(fuse_front_t *f)
{
    double qmin = INFINITY;
    int kept = 0;

    if (f->n == 0)
        return;
    qsort(f->v, (size_t)f->n, sizeof(*f->v), by_cmp_then_q);
    for (int i = 0; i < f->n; i++)
        if (kept == 0 || f->v[i].q < qmin - DOMINANCE_SLACK * qmin) {
            qmin = f->v[i].q;
            f->v[kept++] = f->v[i];
        }
    f->n = kept;
}

/*
 * Expand one state of front k: every first group k..i that survives both
 * prunings leads to front i + 1, or ends the step when i = n - 1.
 */
static int fuse_expand(fuse_search_t *s, int k, int si)
{
    const tacl_planner_t *p = s->p;
    double cmp = s->front[k].v[si].cmp, q = s->front[k].v[si].q;
    double delay = q - cmp;
    int n = p->n, jstar = k;

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
        if (i + 1 == n) { /* bound is then the step's end itself */
            s->best = bound;
            s->best_k = k;
            s->best_i = si;
        } else if (front_push(&s->front[i + 1], ready, start + g, k, si)) {
            return -1;
        }
    }
    return 0;
}

/* The groups of the best completion found, into best_first. */
static void fuse_trace(fuse_search_t *s)
{
    int k = s->best_k, i = s->best_i, m = 0;

    while (k > 0 || (k == 0 && s->front[0].v[i].from_k >= 0)) {
        const fuse_state_t *st = &s->front[k].v[i];
        s->cur[m++] = k;
        k = st->from_k;
        i = st->from_i;
    }
    s->cur[m++] = 0;
    for (int g = 0; g < m; g++)
        s->best_first[g] = s->cur[m - 1 - g];
    s->best_n = m;
}

/*
 * Algorithm 5.1's recursion unrolled forward: the states that reach
 * tensor k all come from fronts before k, so front k is complete, and is
 * filtered, before any of its states is expanded; a state is expanded
 * once, never again for a later, better way to reach it.
 */
static int fuse_search(fuse_search_t *s)
{
    s->best_k = -1;
    if (front_push(&s->front[0], 0.0, 0.0, -1, -1))
        return -1;
    for (int k = 0; k < s->p->n; k++) {
        front_filter(&s->front[k]);
        for (int i = 0; i < s->front[k].n; i++)
            if (fuse_expand(s, k, i))
                return -1;
    }
    if (s->best_k >= 0)
        fuse_trace(s);
    return 0;
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

/*
 * Start from the best of even splits into 1 to BOOT_SPLITS groups and one
 * group a tensor, so the optimistic outcome prunes from the start.  One
 * group a tensor is taken only if strictly quicker: where communication
 * hides under compute it ties with other plans at the compute's end, and
 * the search keeps its start among equals, so a start of many calls
 * would be kept (ResNet101 on 2x2 was planned as 314 calls, measured 7%
 * slower than predicted).
 */
#define BOOT_SPLITS 64
static void fuse_bootstrap(fuse_search_t *s, int *opt)
{
    const tacl_planner_t *p = s->p;
    double t;

    for (int i = 0; i < p->n; i++)
        opt[i] = s->option;
    s->best = INFINITY;
    for (int m = 1; m <= BOOT_SPLITS && m < p->n; m++) {
        int ng = even_split(s, m);
        t = tacl_planner_time(p, ng, s->cur, opt, NULL) - p->forward;
        if (t < s->best) {
            s->best = t;
            s->best_n = ng;
            memcpy(s->best_first, s->cur, (size_t)ng * sizeof(int));
        }
    }
    for (int i = 0; i < p->n; i++)
        s->cur[i] = i;
    t = tacl_planner_time(p, p->n, s->cur, opt, NULL) - p->forward;
    if (t < s->best) {
        s->best = t;
        s->best_n = p->n;
        memcpy(s->best_first, s->cur, (size_t)p->n * sizeof(int));
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
    tacl_status_t st = TACL_OK;
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
    s.front = calloc((size_t)n + 1, sizeof(*s.front));
    if (!s.cur || !s.best_first || !s.front)
        goto err_nomem;
    fuse_bootstrap(&s, first); /* first serves as the options' scratch */
    if (cutoff - planner->forward < s.best) {
        s.best = cutoff - planner->forward;
        s.best_n = 0;
    }
    if (fuse_search(&s))
        goto err_nomem;
    memcpy(first, s.best_first, (size_t)s.best_n * sizeof(int));
    *ngroups_p = s.best_n;
    *time_p = s.best_n ? planner->forward + s.best : INFINITY;
    if (visited_p != NULL)
        *visited_p = s.visited;
    goto out;
err_nomem:
    st = tacl__planner_fail(TACL_ERR_NO_MEMORY,
                            "planner_fuse: no memory for %d tensors", n);
out:
    for (int k = 0; s.front && k <= n; k++)
        free(s.front[k].v);
    free(s.front);
    free(s.cur);
    free(s.best_first);
    return st;
}
