/*
 * The algorithm registry: every algorithm of every collective is one row
 * of tacl__algos, with its properties as flags (hierarchical, reached
 * only explicitly as the quantized qwZ and qgZ, or run by the fast
 * engine).  This file only lists and finds rows; choosing among them is
 * select.c's, parsing TACL_ALGO force.c's.  It refers to every builder
 * and nothing refers to it but through the table, so no file-level call
 * circle runs through it.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "toolbox.h"
#include "hier.h"
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

/*
 * A row whose supports, cost and build are those of the files prefixed
 * sup, cost and build; ALGO_ROW_ when one file has all three.
 */
#define ALGO_ROW_OF_(id, coll, sup, cost, build, flags)                      \
    {TACL__ALGO_##id, algo_names.id, TACL_COLL_##coll, flags,              \
     tacl__##sup##_supports, tacl__##cost##_cost, tacl__##build##_build}
#define ALGO_ROW_(id, coll, prefix, flags)                                   \
    ALGO_ROW_OF_(id, coll, prefix, prefix, prefix, flags)
#define HIER_ TACL__ALGO_FLAG_HIER
#define EXPLICIT_ TACL__ALGO_FLAG_EXPLICIT
#define FAST_ TACL__ALGO_FLAG_FAST

const tacl__algo_t tacl__algos[] = {
    ALGO_ROW_(RING, ALLGATHER, ring, 0),
    ALGO_ROW_(BRUCK, ALLGATHER, bruck, 0),
    ALGO_ROW_(RD, ALLGATHER, rd, 0),
    ALGO_ROW_(MICS, ALLGATHER, mics, HIER_),
    ALGO_ROW_OF_(HORING, ALLGATHER, mics, horing, horing, HIER_),
    ALGO_ROW_OF_(HRING, ALLGATHER, mics, hring, hring, HIER_),
    ALGO_ROW_(DIRECT, ALLGATHER, direct, 0),
    ALGO_ROW_(QWZ, ALLGATHER, qwz, EXPLICIT_),
    ALGO_ROW_(RING, REDUCE_SCATTER, ring, 0),
    ALGO_ROW_(RD, REDUCE_SCATTER, rd, 0),
    ALGO_ROW_(MICS, REDUCE_SCATTER, mics, HIER_),
    ALGO_ROW_OF_(HORING, REDUCE_SCATTER, mics, horing, horing, HIER_),
    ALGO_ROW_OF_(HRING, REDUCE_SCATTER, mics, hring, hring, HIER_),
    ALGO_ROW_(DIRECT, REDUCE_SCATTER, direct, 0),
    ALGO_ROW_OF_(QGZ, REDUCE_SCATTER, qwz, qwz, qgz, EXPLICIT_),
    ALGO_ROW_(RING, ALLREDUCE, ring, 0),
    ALGO_ROW_(RD, ALLREDUCE, rd, 0),
    ALGO_ROW_(HIER, ALLREDUCE, hier, HIER_),
    ALGO_ROW_(DIRECT, ALLREDUCE, direct, 0),
    ALGO_ROW_(TREE, BROADCAST, tree, 0),
    ALGO_ROW_(TREE, REDUCE, tree, 0),
    ALGO_ROW_(DIRECT, ALLTOALL, direct, 0),
    ALGO_ROW_(DIRECT, ALLTOALLV, directv, 0),
    ALGO_ROW_(HIER, ALLTOALLV, hierv, HIER_),
    ALGO_ROW_(DIRECT, ALLGATHERV, directv, 0),
    ALGO_ROW_(HIER, ALLGATHERV, hierv, HIER_),
    ALGO_ROW_(P2P, SEND, p2p, 0),
    ALGO_ROW_(P2P, RECV, p2p, 0),
    ALGO_ROW_(BRUCK, BARRIER, bruck, 0),
    ALGO_ROW_(FAST, ALLGATHER, fast, FAST_),
    ALGO_ROW_(FAST, REDUCE_SCATTER, fast, FAST_),
    ALGO_ROW_(FAST, ALLREDUCE, fast, FAST_),
    ALGO_ROW_(FAST, BROADCAST, fast, FAST_),
    ALGO_ROW_(FAST, REDUCE, fast, FAST_),
    ALGO_ROW_(FAST, BARRIER, fast, FAST_),
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

/* Rows by id and collective, made once: the fast engine's decision asks
 * for its row on every call. */
static const tacl__algo_t *row_index[TACL__ALGO_COUNT][TACL_NUM_COLLS];
static pthread_once_t row_once = PTHREAD_ONCE_INIT;

static void row_index_make(void)
{
    for (const tacl__algo_t *a = tacl__algos; a->name != NULL; a++)
        if (row_index[a->id][a->coll] == NULL)
            row_index[a->id][a->coll] = a;
}

const tacl__algo_t *tacl__algo_row(tacl__algo_id_t id, tacl_coll_t coll)
{
    if ((unsigned)id >= TACL__ALGO_COUNT || (unsigned)coll >= TACL_NUM_COLLS)
        return NULL;
    pthread_once(&row_once, row_index_make);
    return row_index[id][coll];
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
