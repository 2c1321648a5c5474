/*
 * The replay harness' profiles and policies: reading a model profile and
 * turning it into the groupings the harness times.  Nothing here talks
 * to a communicator, so every policy is the same pure function of the
 * profile on every rank.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay.h"

static int add_tensor(replay_profile_t *pf, int *cap, double bytes,
                      double back)
{
    if (pf->n == *cap) {
        int c = *cap ? 2 * *cap : 256;
        double *b = realloc(pf->bytes, (size_t)c * sizeof(double));
        double *t;

        if (b == NULL)
            return -1;
        pf->bytes = b;
        t = realloc(pf->back, (size_t)c * sizeof(double));
        if (t == NULL)
            return -1;
        pf->back = t;
        *cap = c;
    }
    pf->bytes[pf->n] = bytes;
    pf->back[pf->n++] = back;
    return 0;
}

/* One line; NULL when it is understood, else why not. */
static const char *read_line(replay_profile_t *pf, int *cap, const char *line,
                             int *seen_forward)
{
    double a, b;
    int used = 0;
    const char *rest;

    line += strspn(line, " \t");
    if (line[0] == '#' || line[0] == '\0' || line[0] == '\n')
        return NULL;
    if (sscanf(line, "forward %lf %n", &a, &used) == 1) {
        if (!(a >= 0))
            return "the forward seconds must be a number >= 0";
        pf->forward = a;
        *seen_forward = 1;
    } else if (sscanf(line, "tensor %lf %lf %n", &a, &b, &used) == 2) {
        if (!(a >= 4) || a != 4 * (double)(long long)(a / 4) || a > 1e12)
            return "the bytes must be a positive multiple of 4 (float32)";
        if (!(b >= 0) || b > 1e6)
            return "the backward seconds must be a number >= 0";
        if (add_tensor(pf, cap, a, b) != 0)
            return "no memory";
    } else {
        return "expected 'forward SECONDS' or 'tensor BYTES SECONDS'";
    }
    rest = line + used;
    if (rest[0] != '\0' && rest[0] != '#')
        return "unexpected text after the values";
    return NULL;
}

int replay_profile_read(const char *path, const char *name,
                        replay_profile_t *pf)
{
    replay_profile_t p = {0};
    char line[512];
    int lineno = 0, cap = 0, seen_forward = 0;
    const char *why = NULL;
    FILE *f = fopen(path, "r");

    if (f == NULL) {
        fprintf(stderr, "replay: cannot open profile %s: %m\n", path);
        return -1;
    }
    while (why == NULL && fgets(line, sizeof(line), f) != NULL) {
        lineno++;
        why = read_line(&p, &cap, line, &seen_forward);
    }
    fclose(f);
    if (why == NULL && p.n == 0)
        why = "no tensor lines";
    if (why == NULL && !seen_forward)
        why = "no forward line";
    if (why != NULL) {
        fprintf(stderr, "replay: profile %s:%d: %s\n", path, lineno, why);
        replay_profile_free(&p);
        return -1;
    }
    snprintf(p.name, sizeof(p.name), "%s", name);
    *pf = p;
    return 0;
}

void replay_profile_free(replay_profile_t *pf)
{
    free(pf->bytes);
    free(pf->back);
    memset(pf, 0, sizeof(*pf));
}

/* Room for n groups; every option TACL_PLANNER_NONE. */
static int policy_alloc(replay_policy_t *pol, int n)
{
    memset(pol, 0, sizeof(*pol));
    pol->first = malloc((size_t)n * sizeof(int));
    pol->option = malloc((size_t)n * sizeof(int));
    if (pol->first == NULL || pol->option == NULL) {
        replay_policy_free(pol);
        fprintf(stderr, "replay: no memory for %d groups\n", n);
        return -1;
    }
    for (int g = 0; g < n; g++)
        pol->option[g] = TACL_PLANNER_NONE;
    return 0;
}

void replay_policy_free(replay_policy_t *pol)
{
    free(pol->first);
    free(pol->option);
    pol->first = pol->option = NULL;
    pol->ngroups = 0;
}

int replay_policy_buckets(const replay_profile_t *pf, double first_cap,
                          double cap, replay_policy_t *pol)
{
    double held = 0;

    if (policy_alloc(pol, pf->n) != 0)
        return -1;
    for (int i = 0; i < pf->n; i++) {
        if (i == 0 || held >= (pol->ngroups == 1 ? first_cap : cap)) {
            pol->first[pol->ngroups++] = i;
            held = 0;
        }
        held += pf->bytes[i];
    }
    return 0;
}

int replay_policy_even(const replay_profile_t *pf, int ngroups,
                       replay_policy_t *pol)
{
    double total = 0, done = 0;

    if (policy_alloc(pol, pf->n) != 0)
        return -1;
    for (int i = 0; i < pf->n; i++)
        total += pf->bytes[i];
    /* A tensor starts group k when the bytes before it reach k shares;
     * the groups then differ by at most one tensor from equal. */
    for (int i = 0; i < pf->n; i++) {
        if (i == 0 || (pol->ngroups < ngroups &&
                       done >= total * pol->ngroups / ngroups))
            pol->first[pol->ngroups++] = i;
        done += pf->bytes[i];
    }
    return 0;
}

int replay_policy_layerwise(const replay_profile_t *pf, double threshold,
                            replay_policy_t *pol)
{
    if (policy_alloc(pol, pf->n) != 0)
        return -1;
    for (int i = 0; i < pf->n; i++) {
        pol->first[i] = i;
        pol->option[i] = pf->bytes[i] > threshold ? 0 : TACL_PLANNER_NONE;
    }
    pol->ngroups = pf->n;
    return 0;
}

int replay_policy_from_plan(const tacl_planner_plan_t *plan,
                            replay_policy_t *pol)
{
    if (policy_alloc(pol, plan->ngroups) != 0)
        return -1;
    pol->ngroups = plan->ngroups;
    memcpy(pol->first, plan->first, (size_t)plan->ngroups * sizeof(int));
    memcpy(pol->option, plan->option, (size_t)plan->ngroups * sizeof(int));
    return 0;
}
