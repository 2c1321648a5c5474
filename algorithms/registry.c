/*
 * The algorithm registry and tuner.
 *
 * Every algorithm of every collective is one row of tacl__algos.  The
 * tuner honours a TACL_ALGO-style spec ("allgather=ring,allreduce=rd",
 * names in any case) when the forced algorithm supports the operation;
 * a forced hierarchical algorithm that cannot serve the layout (one node,
 * one rank per node, unequal nodes) gives way to the flat ring.
 * Otherwise it picks the supported row of lowest cost under an alpha-beta
 * model (Hockney: a message of m bytes costs alpha + m * beta) whose
 * alpha and beta are per link class (the view's host and network
 * figures, else cost.h's): latency-bound algorithms (recursive
 * doubling, Bruck, trees) win for small messages, the bandwidth-optimal
 * pipelined ring for large ones on one node, and the hierarchical
 * algorithms (MiCS, HO-Ring, the hierarchical all-reduce) for large ones
 * across nodes, where they keep traffic off the shared uplinks.  Every
 * choice is logged at INFO (TUNE).  Rows carry their properties as flags:
 * hierarchical, or reached only explicitly (the quantized qwZ and qgZ).
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "toolbox.h"
#include "cost.h"
#include "hier.h"
#include "log.h"
#include "quant_algos.h"

/*
 * The names of TACL__ALGO_ID_LIST as the members of one constant struct,
 * so that a row can point at its name in a static initializer and every
 * name is written once, in the list.
 */
static const struct {
#define ALGO_NAME_FIELD_(id, str) char id[sizeof(str)];
    TACL__ALGO_ID_LIST(ALGO_NAME_FIELD_)
#undef ALGO_NAME_FIELD_
} algo_names = {
#define ALGO_NAME_INIT_(id, str) str,
    TACL__ALGO_ID_LIST(ALGO_NAME_INIT_)
#undef ALGO_NAME_INIT_
};

#define ALGO_ROW_(id, coll, prefix, flags)                                   \
    {TACL__ALGO_##id, algo_names.id, TACL_COLL_##coll, flags,              \
     tacl__##prefix##_supports, tacl__##prefix##_cost,                      \
     tacl__##prefix##_build}
#define HIER_ TACL__ALGO_FLAG_HIER
#define EXPLICIT_ TACL__ALGO_FLAG_EXPLICIT

const tacl__algo_t tacl__algos[] = {
    ALGO_ROW_(RING, ALLGATHER, ring, 0),
    ALGO_ROW_(BRUCK, ALLGATHER, bruck, 0),
    ALGO_ROW_(RD, ALLGATHER, rd, 0),
    ALGO_ROW_(MICS, ALLGATHER, mics, HIER_),
    ALGO_ROW_(HORING, ALLGATHER, horing, HIER_),
    ALGO_ROW_(HRING, ALLGATHER, hring, HIER_),
    ALGO_ROW_(DIRECT, ALLGATHER, direct, 0),
    ALGO_ROW_(QWZ, ALLGATHER, qwz, EXPLICIT_),
    ALGO_ROW_(RING, REDUCE_SCATTER, ring, 0),
    ALGO_ROW_(RD, REDUCE_SCATTER, rd, 0),
    ALGO_ROW_(MICS, REDUCE_SCATTER, mics, HIER_),
    ALGO_ROW_(HORING, REDUCE_SCATTER, horing, HIER_),
    ALGO_ROW_(HRING, REDUCE_SCATTER, hring, HIER_),
    ALGO_ROW_(DIRECT, REDUCE_SCATTER, direct, 0),
    ALGO_ROW_(QGZ, REDUCE_SCATTER, qgz, EXPLICIT_),
    ALGO_ROW_(RING, ALLREDUCE, ring, 0),
    ALGO_ROW_(RD, ALLREDUCE, rd, 0),
    ALGO_ROW_(HIER, ALLREDUCE, hier, HIER_),
    ALGO_ROW_(DIRECT, ALLREDUCE, direct, 0),
    ALGO_ROW_(TREE, BROADCAST, tree, 0),
    ALGO_ROW_(TREE, REDUCE, tree, 0),
    ALGO_ROW_(DIRECT, ALLTOALL, direct, 0),
    ALGO_ROW_(P2P, SEND, p2p, 0),
    ALGO_ROW_(P2P, RECV, p2p, 0),
    ALGO_ROW_(BRUCK, BARRIER, bruck, 0),
    {TACL__ALGO_COUNT, NULL, TACL_NUM_COLLS, 0, NULL, NULL, NULL},
};

const tacl__algo_t *tacl__algo_find(tacl_coll_t coll, const char *name)
{
    const tacl__algo_t *a;

    if (name == NULL)
        return NULL;
    for (a = tacl__algos; a->name != NULL; a++)
        if (a->coll == coll && !(a->flags & TACL__ALGO_FLAG_EXPLICIT) &&
            strcasecmp(a->name, name) == 0)
            return a;
    return NULL;
}

const tacl__algo_t *tacl__algo_row(tacl__algo_id_t id, tacl_coll_t coll)
{
    const tacl__algo_t *a;

    for (a = tacl__algos; a->name != NULL; a++)
        if (a->id == id && a->coll == coll)
            return a;
    return NULL;
}

void tacl__algo_names(tacl_coll_t coll, char *buf, size_t len)
{
    size_t o = 0;

    buf[0] = '\0';
    for (const tacl__algo_t *a = tacl__algos; a->name != NULL; a++)
        if (a->coll == coll && !(a->flags & TACL__ALGO_FLAG_EXPLICIT) &&
            o < len)
            o += (size_t)snprintf(buf + o, len - o, "%s%s", o ? ", " : "",
                                  a->name);
}

/*
 * Spec parsing.  A spec is a comma-separated list of coll=algo pairs;
 * blanks around names are ignored, as are empty items.
 */
#define SPEC_NAME_MAX 32

typedef struct {
    char coll[SPEC_NAME_MAX];
    char algo[SPEC_NAME_MAX];
} spec_item_t;

/* Copies [p, end) without surrounding blanks; -1 if it does not fit. */
static int spec_trim(const char *p, const char *end, char *out)
{
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    while (end > p && (end[-1] == ' ' || end[-1] == '\t'))
        end--;
    if (end - p >= SPEC_NAME_MAX)
        return -1;
    memcpy(out, p, (size_t)(end - p));
    out[end - p] = '\0';
    return 0;
}

/*
 * Parses the item starting at *pos into item and advances *pos past it.
 * Returns 1 for an item, 0 at the end, -1 for a malformed item (whose
 * text is left in item->coll, cut to fit).
 */
static int spec_next(const char **pos, spec_item_t *item)
{
    const char *p = *pos, *end, *eq;

    while (*p == ',')
        p++;
    if (*p == '\0')
        return 0;
    end = strchr(p, ',');
    if (end == NULL)
        end = p + strlen(p);
    *pos = end;
    eq = memchr(p, '=', (size_t)(end - p));
    if (eq == NULL || spec_trim(p, eq, item->coll) != 0 ||
        spec_trim(eq + 1, end, item->algo) != 0 || item->coll[0] == '\0' ||
        item->algo[0] == '\0') {
        size_t n = TACL_MIN((size_t)(end - p), (size_t)SPEC_NAME_MAX - 1);

        memcpy(item->coll, p, n);
        item->coll[n] = '\0';
        item->algo[0] = '\0';
        return -1;
    }
    return 1;
}

static int spec_coll(const char *name)
{
    return tacl__coll_from_name(name);
}

tacl_status_t tacl__algo_spec_check(const char *spec)
{
    const char *pos = spec;
    spec_item_t item;
    int rc, coll;

    if (spec == NULL)
        return TACL_OK;
    while ((rc = spec_next(&pos, &item)) != 0) {
        if (rc < 0)
            return tacl__error(TACL_ERR_INVALID_ARG, TUNE,
                               "bad algorithm spec item '%s': write "
                               "collective=algorithm, e.g. allgather=ring",
                               item.coll);
        coll = spec_coll(item.coll);
        if (coll < 0)
            return tacl__error(TACL_ERR_INVALID_ARG, TUNE,
                               "unknown collective '%s' in algorithm spec; "
                               "use allgather, reducescatter, allreduce, "
                               "broadcast, reduce, alltoall, send, recv or "
                               "barrier", item.coll);
        if (tacl__algo_find((tacl_coll_t)coll, item.algo) == NULL) {
            char names[256];

            tacl__algo_names((tacl_coll_t)coll, names, sizeof(names));
            return tacl__error(TACL_ERR_INVALID_ARG, TUNE,
                               "unknown algorithm '%s' for %s in algorithm "
                               "spec; %s has: %s", item.algo, item.coll,
                               item.coll, names);
        }
    }
    return TACL_OK;
}

/* The algorithm the spec forces for coll, NULL if none (or bad). */
static const tacl__algo_t *spec_forced(const char *spec,
                                       tacl_coll_t coll)
{
    const tacl__algo_t *found = NULL;
    const char *pos = spec;
    spec_item_t item;
    int rc;

    if (spec == NULL)
        return NULL;
    while ((rc = spec_next(&pos, &item)) != 0) {
        /* The last valid item for a collective wins. */
        if (rc > 0 && spec_coll(item.coll) == (int)coll &&
            tacl__algo_find(coll, item.algo) != NULL)
            found = tacl__algo_find(coll, item.algo);
    }
    return found;
}

/* Whether a is one of the hierarchical algorithms (hier.h). */
static int algo_is_hier(const tacl__algo_t *a)
{
    return (a->flags & TACL__ALGO_FLAG_HIER) != 0;
}

/* Why a hierarchical algorithm cannot serve view, for the log. */
static const char *algo_layout_why(const tacl__topo_view_t *view)
{
    if (view->n_nodes < 2)
        return "the ranks are on one node";
    if (view->nranks == view->n_nodes)
        return "every node has one rank";
    return "the nodes have unequal rank counts";
}

/*
 * Modelled cost of a on view.  The model's alpha and beta stand in for
 * the link an algorithm's costs fall back to where the view gives no
 * figures (cost() reads view->link_bw and link_lat first).
 */
static double algo_cost(const tacl__algo_t *a, const tacl__coll_args_t *args,
                        const tacl__topo_view_t *view)
{
    const tacl__cost_link_t *l =
        &tacl__cost_links[view->n_nodes > 1 ? TACL_LINK_NET : TACL_LINK_HOST];

    return a->cost(args, view, l->alpha, l->beta);
}

/* The supported row of lowest modelled cost; *cost_p its cost. */
static const tacl__algo_t *algo_cheapest(const tacl__coll_args_t *args,
                                         const tacl__topo_view_t *view,
                                         double *cost_p)
{
    const tacl__algo_t *a, *best = NULL;
    double best_cost = 0, c;

    for (a = tacl__algos; a->name != NULL; a++) {
        if (a->coll != args->type ||
            (a->flags & TACL__ALGO_FLAG_EXPLICIT) || !a->supports(args, view))
            continue;
        c = algo_cost(a, args, view);
        if (best == NULL || c < best_cost) {
            best = a;
            best_cost = c;
        }
    }
    *cost_p = best_cost;
    return best;
}

/* Whether this is the first fallback from forced in this process. */
static int fallback_first(const tacl__algo_t *forced)
{
    static unsigned warned[TACL_NUM_COLLS];
    unsigned bit = 1u << forced->id;

    return !(__atomic_fetch_or(&warned[forced->coll], bit, __ATOMIC_RELAXED) &
             bit);
}

const tacl__algo_t *tacl__algo_select(const tacl__coll_args_t *args,
                                      const tacl__topo_view_t *view,
                                      const char *spec)
{
    const tacl__algo_t *best, *forced;
    double best_cost = 0;

    forced = spec_forced(spec, args->type);
    if (forced != NULL && forced->supports(args, view)) {
        TACL_INFO(TUNE, "%s of %zu elements on %d ranks: %s (forced)",
                  tacl_coll_name(args->type), args->count, view->nranks,
                  forced->name);
        return forced;
    }
    /* A hierarchical algorithm that cannot serve the layout stands in
     * for its flat equivalent, the ring, when the ring can run it. */
    if (forced != NULL && algo_is_hier(forced) &&
        (best = tacl__algo_row(TACL__ALGO_RING, args->type)) != NULL &&
        best->supports(args, view))
        best_cost = algo_cost(best, args, view);
    else
        best = algo_cheapest(args, view, &best_cost);
    /* A forced algorithm that gives way is worth a warning (once per
     * collective and algorithm, not per call): the user asked for it. */
    if (forced != NULL && algo_is_hier(forced) && fallback_first(forced))
        TACL_WARN(TUNE, "%s: forced algorithm %s cannot serve this layout "
                  "(%d ranks on %d nodes: %s); using %s instead",
                  tacl_coll_name(args->type), forced->name, view->nranks,
                  view->n_nodes, algo_layout_why(view),
                  best != NULL ? best->name : "none");
    else if (forced != NULL && fallback_first(forced))
        TACL_WARN(TUNE, "%s: forced algorithm %s does not support this "
                  "operation; using %s instead",
                  tacl_coll_name(args->type), forced->name,
                  best != NULL ? best->name : "none");
    else if (view->n_nodes > 1 && !tacl__hier_layout_ok(view) &&
             best != NULL && (args->type == TACL_COLL_ALLGATHER ||
                              args->type == TACL_COLL_REDUCE_SCATTER ||
                              args->type == TACL_COLL_ALLREDUCE))
        TACL_INFO(TUNE, "%s: hierarchical algorithms cannot serve this "
                  "layout (%d ranks on %d nodes: %s); using %s instead",
                  tacl_coll_name(args->type), view->nranks, view->n_nodes,
                  algo_layout_why(view), best->name);
    if (best != NULL)
        TACL_INFO(TUNE, "%s of %zu elements on %d ranks, %d nodes: %s "
                  "(modelled %.3g us)", tacl_coll_name(args->type),
                  args->count, view->nranks, view->n_nodes, best->name,
                  best_cost * 1e6);
    return best;
}

tacl_status_t tacl__algo_build(tacl__sched_t *s, const tacl__coll_args_t *args,
                               const tacl__topo_view_t *view,
                               const char *spec, const tacl__algo_t **algo_p)
{
    const tacl__algo_t *a = tacl__algo_select(args, view, spec);
    tacl_status_t status;

    if (a == NULL)
        return tacl__error(TACL_ERR_UNSUPPORTED, TUNE,
                           "no algorithm supports %s on %d ranks",
                           tacl_coll_name(args->type), view->nranks);
    status = a->build(s, args, view);
    if (status == TACL_OK)
        status = tacl__sched_status(s);
    if (status != TACL_OK)
        return status;
    if (algo_p != NULL)
        *algo_p = a;
    return TACL_OK;
}
