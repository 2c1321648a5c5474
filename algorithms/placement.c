/*
 * Snapshot placement (the thesis' chapter 6, section 6.4: Algorithm 6.1,
 * Theorem 6.1, Corollary 6.1).
 *
 * Every unit keeps its own copy and sends m - 1 more.  Group placement
 * cuts the N units into N/m groups of m that hold one another's copies:
 * only N/m distinct holder sets exist, the fewest that can cover N units,
 * so at k = m lost units it is optimal.  When m does not divide N the
 * thesis' mixed placement keeps floor(N/m) - 1 groups and runs a ring over
 * the last m + (N mod m) units, each sending to the next m - 1 of that
 * ring; it has m + q - 2 more holder sets than the bound allows, hence
 * the (2m - 3)/C(N, m) gap.  Ring placement over all units is kept for
 * comparison.
 *
 * Recovery is counted exactly rather than bounded: a set of lost units is
 * fatal when it contains some unit's whole holder set, and every k-subset
 * is visited (Gosper's next-subset step on a 64-bit mask).  The thesis'
 * Figure 6.9 text puts ring 25.0 points below group at N = 16, m = 2,
 * k = 3; counting gives 80.0% and 62.9% (208 of 560 sets fatal for ring,
 * 112 for group), 17.1 points, which the tests hold.
 */
#include <stdlib.h>

#include "log.h"
#include "placement.h"

const char *tacl__place_kind_name(tacl__place_kind_t kind)
{
    switch (kind) {
    case TACL__PLACE_AUTO:
        return "auto";
    case TACL__PLACE_GROUP:
        return "group";
    case TACL__PLACE_RING:
        return "ring";
    case TACL__PLACE_MIXED:
        return "mixed";
    }
    return "unknown";
}

/* Units [first, first + len) as one ring: u holds u .. u + m - 1. */
static void place_ring(tacl__placement_t *p, int first, int len)
{
    for (int i = 0; i < len; i++)
        for (int j = 0; j < p->m; j++)
            p->holders[(size_t)(first + i) * (size_t)p->m + (size_t)j] =
                first + (i + j) % len;
}

/* Units [first, first + m) as one group: u holds itself, then the rest. */
static void place_group(tacl__placement_t *p, int first)
{
    for (int i = 0; i < p->m; i++)
        for (int j = 0; j < p->m; j++)
            p->holders[(size_t)(first + i) * (size_t)p->m + (size_t)j] =
                first + (i + j) % p->m;
}

tacl_status_t tacl__place_build(int units, int m, tacl__place_kind_t kind,
                                tacl__placement_t *p_p)
{
    tacl__placement_t p = {.units = units, .m = m, .kind = kind};
    int groups;

    if (units < 1 || m < 1 || m > units)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "snapshot placement: %d copies cannot be placed "
                           "on %d units (need 1 <= copies <= units)",
                           m, units);
    if (kind == TACL__PLACE_AUTO)
        kind = units % m == 0 ? TACL__PLACE_GROUP : TACL__PLACE_MIXED;
    if (kind == TACL__PLACE_GROUP && units % m != 0)
        return tacl__error(
            TACL_ERR_INVALID_ARG, COLL,
            "snapshot placement: group placement needs the copies (%d) to "
            "divide the units (%d); use auto or mixed",
            m, units);
    p.kind = kind;
    p.holders = malloc((size_t)units * (size_t)m * sizeof(int));
    if (p.holders == NULL)
        return tacl__error(TACL_ERR_SYSTEM, COLL,
                           "snapshot placement: out of memory");
    groups = units / m;
    switch (kind) {
    case TACL__PLACE_GROUP:
        for (int g = 0; g < groups; g++)
            place_group(&p, g * m);
        break;
    case TACL__PLACE_MIXED:
        /* Algorithm 6.1: floor(N/m) - 1 groups, then one ring. */
        for (int g = 0; g + 1 < groups; g++)
            place_group(&p, g * m);
        place_ring(&p, (groups - 1) * m, units - (groups - 1) * m);
        break;
    default:
        place_ring(&p, 0, units);
        break;
    }
    *p_p = p;
    return TACL_OK;
}

void tacl__place_free(tacl__placement_t *p)
{
    free(p->holders);
    p->holders = NULL;
}

/* The distinct holder sets of p as masks; returns how many. */
static int holder_masks(const tacl__placement_t *p, uint64_t *masks)
{
    int n = 0;

    for (int u = 0; u < p->units; u++) {
        const int *h = tacl__place_holders(p, u);
        uint64_t mask = 0;
        int seen = 0;

        for (int j = 0; j < p->m; j++)
            mask |= 1ull << h[j];
        for (int i = 0; i < n && !seen; i++)
            seen = masks[i] == mask;
        if (!seen)
            masks[n++] = mask;
    }
    return n;
}

tacl_status_t tacl__place_recovery(const tacl__placement_t *p, int k,
                                   uint64_t *ok_p, uint64_t *total_p)
{
    uint64_t masks[62], set, limit, ok = 0, total = 0;
    int nmasks;

    if (p->units > 62)
        return tacl__error(TACL_ERR_UNSUPPORTED, COLL,
                           "snapshot placement: exact recovery counts at "
                           "most 62 units, not %d",
                           p->units);
    if (k < 0 || k > p->units)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "snapshot placement: %d lost units out of %d", k,
                           p->units);
    nmasks = holder_masks(p, masks);
    limit = 1ull << p->units;
    set = k == 0 ? 0 : (1ull << k) - 1;
    for (;;) {
        int fatal = 0;

        for (int i = 0; i < nmasks && !fatal; i++)
            fatal = (set & masks[i]) == masks[i];
        ok += !fatal;
        total++;
        if (set == 0)
            break;
        /* Gosper: the next larger set with the same number of bits. */
        uint64_t low = set & -set, up = set + low;
        set = (((up ^ set) >> 2) / low) | up;
        if (set >= limit)
            break;
    }
    *ok_p = ok;
    *total_p = total;
    return TACL_OK;
}

double tacl__place_choose(int n, int k)
{
    double c = 1;

    if (k < 0 || k > n)
        return 0;
    if (k > n - k)
        k = n - k;
    for (int i = 1; i <= k; i++)
        c = c * (n - k + i) / i;
    return c;
}

double tacl__place_corollary(int n, int m, int k)
{
    double lost;

    if (k < m)
        return 1;
    lost = n * tacl__place_choose(n - m, k - m) /
           (m * tacl__place_choose(n, k));
    return lost >= 1 ? 0 : 1 - lost;
}

double tacl__place_upper_bound(int n, int m)
{
    return 1 - (double)((n + m - 1) / m) / tacl__place_choose(n, m);
}

int tacl__place_rank_holder(const tacl__placement_t *p, int nranks,
                            const int *node_of, const int *local_of, int rank,
                            int j)
{
    int unit, hnode, count = 0, want;

    if (node_of == NULL)
        return tacl__place_holders(p, rank)[j];
    unit = node_of[rank];
    hnode = tacl__place_holders(p, unit)[j];
    for (int r = 0; r < nranks; r++)
        count += node_of[r] == hnode;
    if (count == 0)
        return -1;
    want = local_of[rank] % count;
    for (int r = 0; r < nranks; r++)
        if (node_of[r] == hnode && local_of[r] == want)
            return r;
    return -1;
}

/* The members of rank r's group on node (all members without nodes):
 * how many, into out; *at_p gets r's place among them when r is one. */
static int members_on(int nranks, const int *group_of, const int *node_of,
                      int r, int node, int *out, int *at_p)
{
    int n = 0;

    for (int q = 0; q < nranks; q++) {
        if (group_of[q] != group_of[r] ||
            (node_of != NULL && node_of[q] != node))
            continue;
        if (q == r && at_p != NULL)
            *at_p = n;
        out[n++] = q;
    }
    return n;
}

/* One group's holders, r its first member; units[] and its length count
 * the group's units (nodes, or members), mem[] is room for its members. */
static tacl_status_t place_one_group(int nranks, const int *group_of,
                                     const int *node_of, const int *local_of,
                                     int m, tacl__place_kind_t kind,
                                     const int *units, int nunits, int *mem,
                                     int *holders, int *shared, int first)
{
    tacl__placement_t p;
    tacl_status_t status;

    if (kind == TACL__PLACE_GROUP && nunits % m != 0)
        kind = TACL__PLACE_AUTO;
    status = tacl__place_build(nunits, m, kind, &p);
    if (status != TACL_OK)
        return status;
    for (int r = first; r < nranks; r++) {
        int u = 0, at = 0;

        if (group_of[r] != group_of[first])
            continue;
        while (units[u] != (node_of != NULL ? node_of[r] : r))
            u++;
        if (node_of != NULL)
            members_on(nranks, group_of, node_of, r, node_of[r], mem, &at);
        shared[r] = 1;
        holders[(size_t)r * (size_t)m] = r;
        for (int j = 1; j < m; j++) {
            int hu = tacl__place_holders(&p, u)[j], n, pick;

            if (node_of == NULL) {
                holders[(size_t)r * (size_t)m + (size_t)j] = units[hu];
                continue;
            }
            n = members_on(nranks, group_of, node_of, r, units[hu], mem,
                           NULL);
            pick = mem[at % n];
            for (int i = 0; i < n; i++)
                if (local_of[mem[i]] == local_of[r])
                    pick = mem[i];
            holders[(size_t)r * (size_t)m + (size_t)j] = pick;
        }
    }
    tacl__place_free(&p);
    return TACL_OK;
}

tacl_status_t tacl__place_shared(int nranks, const int *group_of,
                                 const int *node_of, const int *local_of,
                                 int m, tacl__place_kind_t kind, int *holders,
                                 int *shared)
{
    int *units = malloc((size_t)nranks * sizeof(int)),
        *mem = malloc((size_t)nranks * sizeof(int));
    tacl_status_t status = TACL_OK;

    if (units == NULL || mem == NULL) {
        free(units);
        free(mem);
        return tacl__error(TACL_ERR_NO_MEMORY, COLL,
                           "snapshot placement: out of memory");
    }
    for (int r = 0; r < nranks; r++)
        shared[r] = 0;
    for (int r = 0; r < nranks && status == TACL_OK; r++) {
        int first = 1, nunits = 0;

        for (int q = 0; q < r && first; q++)
            first = group_of[q] != group_of[r];
        if (group_of[r] < 0 || !first)
            continue;
        /* The group's units, in the order of their first member. */
        for (int q = r; q < nranks; q++) {
            int unit = node_of != NULL ? node_of[q] : q, seen = 0;

            if (group_of[q] != group_of[r])
                continue;
            for (int i = 0; i < nunits && !seen; i++)
                seen = units[i] == unit;
            if (!seen)
                units[nunits++] = unit;
        }
        if (nunits >= m)
            status = place_one_group(nranks, group_of, node_of, local_of, m,
                                     kind, units, nunits, mem, holders,
                                     shared, r);
    }
    free(units);
    free(mem);
    return status;
}
