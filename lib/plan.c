/*
 * The plan cache (plan.h).
 *
 * Each communicator has a few entries, replaced least recently used
 * first.  An entry is the operation's arguments with the sequence number
 * cleared, the flags and configuration load it was chosen under, the
 * choice (registry rows, never names) and the schedule built.  A hit
 * copies the schedule (the executor owns and frees what it runs) and
 * rewrites the sequence-number field of every message tag: builders make
 * every tag with TACL__TAG(args->seq, step) (toolbox.h), so the step part
 * is the same for every call of one signature; sends and receives, whose
 * tags are the user's, are built each time.  Whatever else the
 * decider and a builder read is in the key: the arguments, TACL_ALGO and
 * TACL_TUNER (the configuration load), and the communicator's topology
 * view, which does not change for schedules (its fast_max only steers
 * the fast engine, which no entry holds).  A variable-count call's key
 * holds a copy of its count table, compared by content.
 */
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "config.h"
#include "log.h"
#include "plan.h"

/* Distinct operations a communicator remembers. */
#define PLAN_SLOTS 8

typedef struct {
    int used;
    uint64_t last_use;
    tacl__coll_args_t key;   /* seq 0 */
    unsigned flags;          /* tacl__choose's */
    unsigned gen;            /* the configuration load */
    tacl__choice_t choice;
    tacl__sched_t sched;
} plan_entry_t;

typedef struct {
    tacl__comm_ext_t ext;    /* comm->ext[TACL__EXT_PLANS] */
    plan_entry_t entries[PLAN_SLOTS];
    uint64_t clock;
    uint64_t hits, misses;
} plan_cache_t;

static void plan_cache_free(tacl__comm_ext_t *ext)
{
    plan_cache_t *c = (plan_cache_t *)ext;

    for (int i = 0; i < PLAN_SLOTS; i++)
        if (c->entries[i].used) {
            tacl__sched_fini(&c->entries[i].sched);
            tacl__vcounts_free((tacl__vcounts_t *)c->entries[i].key.v);
        }
    free(c);
}

/* A copy of src into dst (empty) with its tags stamped with seq. */
static tacl_status_t plan_copy(tacl__sched_t *dst, const tacl__sched_t *src,
                               uint64_t seq)
{
    size_t steps = (size_t)src->nsteps * sizeof(*src->steps);
    size_t deps = (size_t)src->ndeps * sizeof(*src->deps);
    size_t bufs = (size_t)src->nbufs * sizeof(*src->bufs);

    dst->steps = malloc(steps ? steps : 1);
    dst->deps = malloc(deps ? deps : 1);
    dst->bufs = malloc(bufs ? bufs : 1);
    if (dst->steps == NULL || dst->deps == NULL || dst->bufs == NULL) {
        tacl__sched_fini(dst);
        return tacl__error(TACL_ERR_NO_MEMORY, COLL,
                           "out of memory for a schedule of %u steps",
                           src->nsteps);
    }
    /* An empty schedule (a zero count) has NULL arrays. */
    if (steps != 0)
        memcpy(dst->steps, src->steps, steps);
    if (deps != 0)
        memcpy(dst->deps, src->deps, deps);
    if (bufs != 0)
        memcpy(dst->bufs, src->bufs, bufs);
    dst->nsteps = dst->steps_cap = src->nsteps;
    dst->ndeps = dst->deps_cap = src->ndeps;
    dst->nbufs = dst->bufs_cap = src->nbufs;
    for (uint32_t i = 0; i < dst->nsteps; i++) {
        tacl__step_t *st = &dst->steps[i];

        if (st->kind == TACL__STEP_SEND || st->kind == TACL__STEP_RECV)
            st->tag = TACL__TAG_RESTAMP(st->tag, seq);
    }
    return TACL_OK;
}

static tacl_status_t plan_build_new(tacl_comm_t comm,
                                    const tacl__coll_args_t *args,
                                    unsigned flags, tacl__sched_t *s,
                                    tacl__choice_t *choice_p)
{
    tacl_status_t status = tacl__choose(comm, args, flags, choice_p);

    if (status == TACL_OK)
        status = tacl__algo_build(s, args, &comm->view, choice_p);
    return status;
}

tacl_status_t tacl__plan_build(tacl_comm_t comm, const tacl__coll_args_t *args,
                               unsigned flags, tacl__sched_t *s,
                               tacl__choice_t *choice_p)
{
    plan_cache_t *c = tacl__comm_ext(comm, TACL__EXT_PLANS);
    plan_entry_t *e, *victim;
    tacl__coll_args_t key = *args;
    unsigned gen = tacl__config_generation();
    tacl_status_t status;

    key.seq = 0;
    /* A send's or receive's tag is the user's, not made from seq
     * (p2p.c), and its one step is no work to build: not cached. */
    if (tacl__coll_p2p(args->type))
        return plan_build_new(comm, args, flags, s, choice_p);
    if (c == NULL) {
        c = calloc(1, sizeof(*c));
        /* Without memory for a cache, operations are built each time. */
        if (c == NULL)
            return plan_build_new(comm, args, flags, s, choice_p);
        c->ext.free = plan_cache_free;
        comm->ext[TACL__EXT_PLANS] = &c->ext;
    }
    victim = &c->entries[0];
    for (e = c->entries; e < c->entries + PLAN_SLOTS; e++) {
        if (e->used && tacl__coll_args_same(&e->key, &key) &&
            e->flags == flags && e->gen == gen) {
            e->last_use = ++c->clock;
            c->hits++;
            *choice_p = e->choice;
            return plan_copy(s, &e->sched, args->seq);
        }
        if (!e->used || (victim->used && e->last_use < victim->last_use))
            victim = e;
    }
    c->misses++;
    status = plan_build_new(comm, args, flags, s, choice_p);
    if (status != TACL_OK)
        return status;
    /* Remember it; a copy that cannot be made only costs the next call
     * a build. */
    if (victim->used) {
        tacl__sched_fini(&victim->sched);
        tacl__vcounts_free((tacl__vcounts_t *)victim->key.v);
    }
    victim->used = 0;
    tacl__sched_init(&victim->sched, s->rank, s->nranks);
    /* A variable-count call's table is the caller's: the key keeps its
     * own copy. */
    key.v = tacl__vcounts_dup(args->v);
    if ((args->v != NULL && key.v == NULL) ||
        plan_copy(&victim->sched, s, 0) != TACL_OK) {
        tacl__vcounts_free((tacl__vcounts_t *)key.v);
        tacl__sched_fini(&victim->sched);
        tacl__last_error_clear();
        return TACL_OK;
    }
    victim->used = 1;
    victim->last_use = ++c->clock;
    victim->key = key;
    victim->flags = flags;
    victim->gen = gen;
    victim->choice = *choice_p;
    return TACL_OK;
}

void tacl__plan_stats(tacl_comm_t comm, uint64_t *hits_p, uint64_t *misses_p)
{
    const plan_cache_t *c = tacl__comm_ext(comm, TACL__EXT_PLANS);

    *hits_p = c != NULL ? c->hits : 0;
    *misses_p = c != NULL ? c->misses : 0;
}
