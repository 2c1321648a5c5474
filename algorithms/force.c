/*
 * TACL_ALGO, parsed (algo.h): a comma-separated list of items
 * "coll=algo" or "coll:lo-hi=algo", blanks around names ignored, empty
 * items skipped.  Collective names are tacl_coll_name's in any case, with
 * '_' and '-' ignored ("reducescatter" names reduce_scatter); sizes take
 * K, M and G suffixes (powers of 1024) and an optional B.  Parsed once
 * per configuration load by the communicator's chooser (lib/choose.c),
 * checked at communicator creation, and built by tests and tools from
 * their own strings: the rows it names travel as pointers, never as text.
 */
#include <stdio.h>
#include <string.h>

#include "algo.h"
#include "common.h"
#include "parse.h"
#include "log.h"

#define ITEM_MAX 48

/* Copies [p, end) without surrounding blanks into out (ITEM_MAX bytes);
 * -1 when it does not fit. */
static int trim(const char *p, const char *end, char *out)
{
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    while (end > p && (end[-1] == ' ' || end[-1] == '\t'))
        end--;
    if (end - p >= ITEM_MAX)
        return -1;
    memcpy(out, p, (size_t)(end - p));
    out[end - p] = '\0';
    return 0;
}

/* A size of a range's side: "" is open (dflt), else a number. */
static int range_side(const char *text, uint64_t dflt, uint64_t *out)
{
    if (text[0] == '\0') {
        *out = dflt;
        return 0;
    }
    return tacl__parse_size(text, 0, UINT64_MAX, out) == TACL_PARSE_OK ? 0
                                                                        : -1;
}

/* "lo-hi" (either side may be empty) into [*lo, *hi). */
static int parse_range(const char *text, uint64_t *lo, uint64_t *hi)
{
    const char *dash = strchr(text, '-');
    char a[ITEM_MAX], b[ITEM_MAX];

    if (dash == NULL || trim(text, dash, a) != 0 ||
        trim(dash + 1, text + strlen(text), b) != 0)
        return -1;
    if (range_side(a, 0, lo) != 0 || range_side(b, UINT64_MAX, hi) != 0)
        return -1;
    return *lo < *hi ? 0 : -1;
}

static tacl_status_t bad_item(const char *p, const char *end, const char *why)
{
    int n = (int)TACL_MIN((size_t)(end - p), (size_t)80);

    return tacl__error(TACL_ERR_INVALID_ARG, TUNE,
                       "bad algorithm spec item '%.*s': %s", n, p, why);
}

/* Parse the item [p, end) into force's next slot. */
static tacl_status_t parse_item(const char *p, const char *end,
                                tacl__algo_force_t *force)
{
    const char *eq = memchr(p, '=', (size_t)(end - p)), *colon;
    char coll_name[ITEM_MAX], algo_name[ITEM_MAX], range[ITEM_MAX];
    uint64_t lo = 0, hi = UINT64_MAX;
    const tacl__algo_t *row;
    int coll;

    if (eq == NULL)
        return bad_item(p, end, "write collective=algorithm, e.g. "
                                "allgather=ring, or allreduce:0-16k=rd");
    colon = memchr(p, ':', (size_t)(eq - p));
    if (trim(p, colon != NULL ? colon : eq, coll_name) != 0 ||
        trim(eq + 1, end, algo_name) != 0 || coll_name[0] == '\0' ||
        algo_name[0] == '\0')
        return bad_item(p, end, "write collective=algorithm, e.g. "
                                "allgather=ring, or allreduce:0-16k=rd");
    if (colon != NULL &&
        (trim(colon + 1, eq, range) != 0 || parse_range(range, &lo, &hi)))
        return bad_item(p, end, "a size range is lo-hi in bytes (K, M, G "
                                "suffixes; either side may be left out, "
                                "lo < hi), e.g. 0-16k or 16k-");
    coll = tacl__coll_from_name(coll_name);
    if (coll < 0)
        return tacl__error(TACL_ERR_INVALID_ARG, TUNE,
                           "unknown collective '%s' in algorithm spec; use "
                           "allgather, reduce_scatter, allreduce, "
                           "broadcast, reduce, alltoall, send, recv or "
                           "barrier", coll_name);
    row = tacl__algo_find((tacl_coll_t)coll, algo_name);
    if (row == NULL) {
        char names[256];

        tacl__algo_names((tacl_coll_t)coll, names, sizeof(names));
        return tacl__error(TACL_ERR_INVALID_ARG, TUNE,
                           "unknown algorithm '%s' for %s in algorithm "
                           "spec; %s has: %s", algo_name,
                           tacl_coll_name((tacl_coll_t)coll),
                           tacl_coll_name((tacl_coll_t)coll), names);
    }
    if (force->n == TACL__FORCE_MAX)
        return tacl__error(TACL_ERR_INVALID_ARG, TUNE,
                           "algorithm spec has more than %d items",
                           TACL__FORCE_MAX);
    force->item[force->n].coll = (tacl_coll_t)coll;
    force->item[force->n].lo = lo;
    force->item[force->n].hi = hi;
    force->item[force->n].row = row;
    force->n++;
    return TACL_OK;
}

tacl_status_t tacl__algo_force_parse(const char *spec,
                                     tacl__algo_force_t *force)
{
    const char *p = spec;

    force->n = 0;
    while (p != NULL && *p != '\0') {
        const char *end = strchr(p, ',');
        tacl_status_t status;

        if (end == NULL)
            end = p + strlen(p);
        if (end > p) {
            status = parse_item(p, end, force);
            if (status != TACL_OK) {
                force->n = 0;
                return status;
            }
        }
        p = *end == ',' ? end + 1 : end;
    }
    return TACL_OK;
}

void tacl__algo_force_one(tacl__algo_force_t *force, const tacl__algo_t *row)
{
    force->n = 1;
    force->item[0].coll = row->coll;
    force->item[0].lo = 0;
    force->item[0].hi = UINT64_MAX;
    force->item[0].row = row;
}

const tacl__algo_t *tacl__algo_forced(const tacl__algo_force_t *force,
                                      const tacl__coll_args_t *args)
{
    uint64_t bytes;

    if (force == NULL || force->n == 0)
        return NULL;
    bytes = tacl__algo_bytes(args);
    /* The last item that covers the operation wins. */
    for (int i = force->n - 1; i >= 0; i--)
        if (force->item[i].coll == args->type && force->item[i].lo <= bytes &&
            bytes < force->item[i].hi)
            return force->item[i].row;
    return NULL;
}
