/*
 * Communicators: creation from a unique id or the environment, split,
 * groups of some ranks (tacl_comm_create_group), destroy and abort,
 * queries and counters.
 *
 * Creation makes a context (executor/context.c: bootstrap, node table,
 * topology, transports) and the communicator's view of it.  Destroyed
 * handles are kept as small tombstones so that a later use is reported as
 * TACL_ERR_INVALID_USAGE rather than touching freed memory.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/membarrier.h>
#include <sys/syscall.h>

#include "common.h"
#include "config.h"
#include "comm.h"
#include "launch.h"
#include "log.h"
#include "plan.h"

static pthread_mutex_t grave_lock = PTHREAD_MUTEX_INITIALIZER;
static struct tacl_comm *graveyard;

tacl_status_t tacl__comm_check(tacl_comm_t comm)
{
    if (comm == NULL)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "the communicator is NULL");
    if (comm->magic == TACL__COMM_DEAD)
        return tacl__error(TACL_ERR_INVALID_USAGE, COLL,
                           "the communicator was destroyed; it cannot be "
                           "used any more");
    if (comm->magic != TACL__COMM_ALIVE)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "not a communicator handle");
    /* Non-blocking init: NCCL's rule, every call says "in progress". */
    if (atomic_load(&comm->initializing))
        return TACL_IN_PROGRESS;
    /* A load first: the exchange is an atomic read-modify-write, which
     * every call would pay. */
    if (atomic_load_explicit(&comm->init_joinable, memory_order_acquire) &&
        atomic_exchange(&comm->init_joinable, 0))
        pthread_join(comm->init_thread, NULL);
    if (comm->init_status != TACL_OK)
        return tacl__error(comm->init_status, INIT,
                           "the communicator's initialisation failed (%s); "
                           "destroy it", comm->last_error);
    return TACL_OK;
}

/*
 * Holding a communicator for a call.
 *
 * abort and destroy (comm_close, comm_wait_calls) set closing, then wait
 * until no call holds the communicator; a call takes its hold, then reads
 * closing.  Each side writes one word and reads the other's, which needs
 * a store-load fence between the two on both sides, or a call could miss
 * closing while the closer misses its hold.  An atomic read-modify-write
 * per call (calls) gives it, at the price of draining the caller's store
 * buffer twice per call: a tenth of a small collective.
 *
 * So the communicator's owner -- the first thread that calls on it, in
 * practice the only one -- holds it with plain stores instead: it writes
 * owner_calls and reads closing with only a compiler barrier between,
 * and the closer, after setting closing, runs membarrier()'s private
 * expedited command, which makes every running thread of the process
 * execute a full fence (a thread not running has one at its next
 * switch).  For the owner, either its store of owner_calls came before
 * that fence, and the closer (which reads owner_calls after the system
 * call) sees the hold and waits; or its read of closing came after it,
 * and sees closing.  Leaving is a release store, which the closer's
 * acquire load pairs with: the call's accesses happen before the free.
 * Threads other than the owner use calls as before.  Where membarrier is
 * missing (old kernels, some sandboxes) nobody becomes owner.
 */
static pthread_once_t fence_once = PTHREAD_ONCE_INIT;
static int fence_usable;

static void fence_setup(void)
{
    int usable =
        syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED,
                0, 0) == 0 &&
        syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0;

    __atomic_store_n(&fence_usable, usable, __ATOMIC_RELEASE);
    if (!usable)
        TACL_INFO(INIT, "membarrier() is unavailable (%m): every call "
                  "holds its communicator with an atomic increment");
}

/* A full fence on every running thread of the process (owners). */
static void heavy_fence(void)
{
    /* Settled first: a thread may be claiming the first ownership right
     * now, and it does so only once fence_setup() found membarrier
     * usable, so from here on either nobody can own a communicator or
     * the fence below covers the claimer. */
    pthread_once(&fence_once, fence_setup);
    if (!__atomic_load_n(&fence_usable, __ATOMIC_ACQUIRE))
        return; /* nobody owns a communicator */
    if (syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) ==
        0)
        return;
    /* Registered before any owner existed, so this should not happen;
     * the global command needs no registration (and is slower). */
    if (syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0) != 0)
        TACL_WARN(INIT, "membarrier() failed (%m); a call of the "
                  "communicator's owner thread may race with this abort "
                  "or destroy");
}

/* Whether the calling thread holds comm as its owner, claiming comm for
 * it when nobody owns it yet. */
static int owner_of(tacl_comm_t comm)
{
    uintptr_t self = (uintptr_t)pthread_self();
    uintptr_t owner = __atomic_load_n(&comm->owner, __ATOMIC_RELAXED);

    if (owner == self)
        return 1;
    if (owner != 0)
        return 0;
    pthread_once(&fence_once, fence_setup);
    return fence_usable &&
           __atomic_compare_exchange_n(&comm->owner, &owner, self, 0,
                                       __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}

static tacl_status_t closed_error(void)
{
    return tacl__error(TACL_ERR_INVALID_USAGE, COLL,
                       "the communicator is being aborted or destroyed (by "
                       "another thread); it cannot be used any more");
}

tacl_status_t tacl__comm_enter(tacl_comm_t comm)
{
    tacl_status_t status = tacl__comm_check(comm);

    if (status != TACL_OK)
        return status;
    if (owner_of(comm)) {
        int held = __atomic_load_n(&comm->owner_calls, __ATOMIC_RELAXED);

        __atomic_store_n(&comm->owner_calls, held + 1, __ATOMIC_RELAXED);
        /* The compiler keeps the store before the loads; heavy_fence()
         * on the closer's side does the processor's part. */
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        if (!__atomic_load_n(&comm->closing, __ATOMIC_RELAXED) &&
            __atomic_load_n(&comm->magic, __ATOMIC_RELAXED) ==
                TACL__COMM_ALIVE)
            return TACL_OK;
        __atomic_store_n(&comm->owner_calls, held, __ATOMIC_RELEASE);
        return closed_error();
    }
    /* Pairs with comm_close(): it sets closing, then reads calls; we add
     * to calls, then read closing (and the magic, which a burial clears):
     * one of the two sees the other. */
    __atomic_add_fetch(&comm->calls, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&comm->closing, __ATOMIC_SEQ_CST) ||
        __atomic_load_n(&comm->magic, __ATOMIC_SEQ_CST) != TACL__COMM_ALIVE) {
        __atomic_sub_fetch(&comm->calls, 1, __ATOMIC_SEQ_CST);
        return closed_error();
    }
    return TACL_OK;
}

void tacl__comm_leave(tacl_comm_t comm)
{
    if (tacl__comm_is_owner(comm)) {
        int held = __atomic_load_n(&comm->owner_calls, __ATOMIC_RELAXED);

        /* Release: what the call did happens before the closer's free. */
        __atomic_store_n(&comm->owner_calls, held - 1, __ATOMIC_RELEASE);
        return;
    }
    __atomic_sub_fetch(&comm->calls, 1, __ATOMIC_SEQ_CST);
}

/*
 * Close comm (and its derived communicators) to new calls, first: an
 * abort or destroy that finds it closed already leaves it to the thread
 * that closed it (which may free it).
 */
static tacl_status_t comm_close(tacl_comm_t comm)
{
    if (__atomic_exchange_n(&comm->closing, 1, __ATOMIC_SEQ_CST))
        return tacl__error(TACL_ERR_INVALID_USAGE, INIT,
                           "another thread is already aborting or "
                           "destroying this communicator");
    if (comm->local != NULL)
        __atomic_store_n(&comm->local->closing, 1, __ATOMIC_SEQ_CST);
    if (comm->rail != NULL)
        __atomic_store_n(&comm->rail->closing, 1, __ATOMIC_SEQ_CST);
    /* The owners' side of the pairing (see tacl__comm_enter). */
    heavy_fence();
    return TACL_OK;
}

/*
 * Wait for the calls other threads are in on a closed comm to leave, at
 * most timeout_s (an abort has failed their operations, so they return
 * promptly): TACL_OK, or TACL_ERR_TIMEOUT with a call still inside.
 */
static tacl_status_t comm_wait_calls(tacl_comm_t comm, double timeout_s)
{
    tacl_comm_t all[3] = {comm, comm->local, comm->rail};
    uint64_t until = tacl__now_ns() + (uint64_t)(timeout_s * 1e9);
    int busy;

    for (;;) {
        busy = 0;
        for (int i = 0; i < 3; i++)
            busy |= all[i] != NULL &&
                    (__atomic_load_n(&all[i]->calls, __ATOMIC_SEQ_CST) > 0 ||
                     __atomic_load_n(&all[i]->owner_calls,
                                     __ATOMIC_ACQUIRE) > 0);
        if (!busy || tacl__now_ns() >= until)
            break;
        sched_yield();
    }
    if (busy)
        return tacl__error(TACL_ERR_TIMEOUT, INIT,
                           "a call of another thread on this communicator "
                           "did not return within %.1f s", timeout_s);
    return TACL_OK;
}

/* Undo comm_close() for a destroy that refuses. */
static void comm_reopen(tacl_comm_t comm)
{
    tacl_comm_t all[3] = {comm, comm->local, comm->rail};

    for (int i = 0; i < 3; i++)
        if (all[i] != NULL)
            __atomic_store_n(&all[i]->closing, 0, __ATOMIC_SEQ_CST);
}

tacl_status_t tacl__comm_fail(tacl_comm_t comm, tacl_status_t status)
{
    const char *msg, *name;

    if (status >= 0 || comm == NULL || comm->magic != TACL__COMM_ALIVE ||
        atomic_load(&comm->initializing))
        return status;
    msg = tacl__last_error();
    name = comm->x.name;
    if (name[0] != '\0' && strstr(msg, name) == NULL)
        snprintf(comm->last_error, sizeof(comm->last_error),
                 "communicator \"%s\": %s", name, msg);
    else
        snprintf(comm->last_error, sizeof(comm->last_error), "%s", msg);
    return status;
}

/* Fill the communicator's topology view from its ranks' nodes. */
static tacl_status_t comm_topology(tacl_comm_t comm)
{
    tacl__ctx_t *ctx = comm->x.ctx;
    int *first = calloc((size_t)ctx->n_nodes, sizeof(int));
    int n_nodes = 0;

    if (first == NULL)
        return tacl__error(TACL_ERR_NO_MEMORY, INIT, "out of memory");
    for (int i = 0; i < ctx->n_nodes; i++)
        first[i] = -1;
    for (int r = 0; r < comm->size; r++) {
        int wnode = ctx->node_of[comm->x.world[r]];
        if (first[wnode] < 0)
            first[wnode] = n_nodes++;
        comm->node_of[r] = first[wnode];
    }
    free(first);
    for (int r = 0; r < comm->size; r++)
        comm->x.link_of[r] = (uint8_t)tacl__topo_link_class(
            &ctx->topo, comm->x.world[comm->rank], comm->x.world[r], 0);
    tacl__topo_view_make(
        &comm->view, comm->rank, comm->size, comm->node_of, ctx->topo.link,
        &ctx->topo.nodes[ctx->node_of[comm->x.world[comm->rank]]]);
    return TACL_OK;
}

/*
 * Fill comm (zeroed, not yet marked alive) as rank of size on ctx; on
 * failure what was allocated is freed again, comm itself is not.
 */
static tacl_status_t comm_create(tacl_comm_t comm, tacl__ctx_t *ctx,
                                 int rank, int size, const int *world,
                                 uint32_t id)
{
    tacl_status_t status;

    comm->x.ctx = ctx;
    comm->rank = rank;
    comm->size = size;
    comm->x.id = id & ((1u << (64 - TACL__TAG_COMM_SHIFT)) - 1);
    comm->x.world = malloc((size_t)size * sizeof(int));
    comm->node_of = calloc((size_t)size, sizeof(int));
    comm->x.link_of = calloc((size_t)size, sizeof(uint8_t));
    comm->p2p_send = calloc((size_t)size, sizeof(uint64_t));
    comm->p2p_recv = calloc((size_t)size, sizeof(uint64_t));
    if (!comm->x.world || !comm->node_of || !comm->x.link_of ||
        !comm->p2p_send || !comm->p2p_recv) {
        status = tacl__error(TACL_ERR_NO_MEMORY, INIT, "out of memory");
        goto err_free;
    }
    memcpy(comm->x.world, world, (size_t)size * sizeof(int));
    status = comm_topology(comm);
    if (status == TACL_OK)
        status = tacl__flight_init(&comm->x.flight, rank, size);
    if (status != TACL_OK)
        goto err_free;
    comm->x.counters.n_transports = ctx->ntl;
    for (int t = 0; t < ctx->ntl; t++)
        snprintf(comm->x.counters.transports[t].name,
                 sizeof(comm->x.counters.transports[t].name), "%s",
                 tacl__tl_name(ctx->tls[t]));
    for (int c = 0; c < TACL_NUM_LINK_CLASSES; c++)
        snprintf(comm->x.counters.links[c].name,
                 sizeof(comm->x.counters.links[c].name), "%s",
                 tacl__link_class_name((tacl_link_class_t)c));
    return TACL_OK;

err_free:
    free(comm->x.world);
    free(comm->node_of);
    free(comm->x.link_of);
    free(comm->p2p_send);
    free(comm->p2p_recv);
    comm->x.world = NULL;
    comm->node_of = NULL;
    comm->x.link_of = NULL;
    comm->p2p_send = comm->p2p_recv = NULL;
    return status;
}

/* A communicator's configuration with every default resolved. */
typedef struct {
    double timeout_s;
    int blocking;
    int check;
    int progress_thread;
    char name[TACL__COMM_NAME_LEN];
} comm_conf_t;

/* A config field that is 0 or 1, or -1 for the variable cfg. */
static tacl_status_t conf_flag(int v, const char *field, tacl__cfg_t cfg,
                               int *out_p)
{
    if (v == -1) {
        *out_p = tacl__config_bool(cfg);
        return TACL_OK;
    }
    if (v != 0 && v != 1)
        return tacl__error(TACL_ERR_INVALID_ARG, INIT,
                           "config: %s is %d; it takes 0, 1 or -1 (the "
                           "environment's setting)", field, v);
    *out_p = v;
    return TACL_OK;
}

/*
 * Resolve and check cfg.  NULL takes parent's settings when there is a
 * parent (a split), else the environment's.
 */
static tacl_status_t conf_resolve(const tacl_config_t *cfg,
                                  tacl_comm_t parent, comm_conf_t *out)
{
    const char *name;
    tacl_status_t status;

    memset(out, 0, sizeof(*out));
    out->blocking = 1;
    if (cfg == NULL && parent != NULL) {
        out->timeout_s = parent->x.timeout_s;
        out->check = parent->check;
        out->progress_thread = parent->progress_thread;
        memcpy(out->name, parent->x.name, sizeof(out->name));
        return TACL_OK;
    }
    if (cfg == NULL) {
        static const tacl_config_t defaults = TACL_CONFIG_INIT;
        cfg = &defaults;
    }
    if (cfg->size != sizeof(tacl_config_t))
        return tacl__error(TACL_ERR_INVALID_ARG, INIT,
                           "config: size is %zu, this library's "
                           "tacl_config_t has %zu bytes; start from "
                           "TACL_CONFIG_INIT", cfg->size,
                           sizeof(tacl_config_t));
    if (cfg->version == 0 || cfg->version > TACL_VERSION_CODE)
        return tacl__error(TACL_ERR_INVALID_ARG, INIT,
                           "config: version %u is not one this library "
                           "(%d) knows; start from TACL_CONFIG_INIT",
                           cfg->version, TACL_VERSION_CODE);
    if (!(cfg->timeout >= 0) || cfg->timeout > 365.0 * 86400.0)
        return tacl__error(TACL_ERR_INVALID_ARG, INIT,
                           "config: timeout %g s is not within 0 (the "
                           "environment's TACL_TIMEOUT) .. one year",
                           cfg->timeout);
    out->timeout_s = cfg->timeout > 0 ? cfg->timeout
                                      : tacl__config_double(TACL_CFG_TIMEOUT);
    if (!(out->timeout_s > 0))
        out->timeout_s = 60;
    status = conf_flag(cfg->blocking, "blocking", TACL_CFG_BLOCKING,
                       &out->blocking);
    if (status == TACL_OK)
        status = conf_flag(cfg->check, "check", TACL_CFG_CHECK, &out->check);
    if (status == TACL_OK)
        status = conf_flag(cfg->progress_thread, "progress_thread",
                           TACL_CFG_PROGRESS_THREAD, &out->progress_thread);
    if (status != TACL_OK)
        return status;
    name = cfg->name != NULL ? cfg->name : "";
    if (strlen(name) >= sizeof(out->name))
        return tacl__error(TACL_ERR_INVALID_ARG, INIT,
                           "config: name of %zu characters; at most %zu",
                           strlen(name), sizeof(out->name) - 1);
    /* Blanks and '=' would break the key=value lines of flight dumps. */
    for (size_t i = 0; name[i] != '\0'; i++)
        out->name[i] = name[i] <= ' ' || name[i] == '=' || name[i] == 0x7f
                       ? '_' : name[i];
    return TACL_OK;
}

/*
 * comm_create() with a configuration: the settings, and a hold on the
 * context's progress thread when it asks for one.  The caller keeps its
 * own reference to ctx either way.
 */
static tacl_status_t comm_create_on(tacl_comm_t comm, tacl__ctx_t *ctx,
                                    int rank, int size, const int *world,
                                    uint32_t id, const comm_conf_t *conf)
{
    tacl_status_t status;

    if (conf->progress_thread) {
        status = tacl__ctx_progress_hold(ctx);
        if (status != TACL_OK)
            return status;
    }
    status = comm_create(comm, ctx, rank, size, world, id);
    if (status != TACL_OK) {
        if (conf->progress_thread)
            tacl__ctx_progress_drop(ctx);
        return status;
    }
    comm->progress_thread = conf->progress_thread;
    comm->x.timeout_s = conf->timeout_s;
    memcpy(comm->x.name, conf->name, sizeof(comm->x.name));
    comm->check = conf->check;
    return TACL_OK;
}

static void conf_log(tacl_comm_t comm, const comm_conf_t *conf,
                     const char *how)
{
    TACL_INFO(INIT, "communicator %s%s%s(%s): rank %d of %d, timeout %.1f s, "
              "check %d, progress thread %d", conf->name[0] ? "\"" : "",
              conf->name, conf->name[0] ? "\" " : "", how, comm->rank,
              comm->size, conf->timeout_s, conf->check,
              conf->progress_thread);
}

TACL_EXPORT tacl_status_t tacl_get_unique_id(tacl_unique_id_t *id_p)
{
    tacl__last_error_clear();
    if (id_p == NULL)
        return tacl__error(TACL_ERR_INVALID_ARG, INIT, "id_p is NULL");
    return tacl__bootstrap_unique_id(id_p);
}

/* Join the world communicator comm (zeroed) with a resolved config. */
static tacl_status_t comm_init(tacl_comm_t comm, int nranks,
                               const tacl_unique_id_t *id, int rank,
                               const comm_conf_t *conf)
{
    tacl__ctx_t *ctx = NULL;
    tacl_status_t status;
    int *world;

    world = malloc((size_t)nranks * sizeof(int));
    if (world == NULL)
        return tacl__error(TACL_ERR_NO_MEMORY, INIT, "out of memory");
    for (int r = 0; r < nranks; r++)
        world[r] = r;
    status = tacl__ctx_create(id, rank, nranks, conf->timeout_s, &ctx);
    if (status == TACL_OK) {
        status = comm_create_on(comm, ctx, rank, nranks, world, 1, conf);
        if (status != TACL_OK)
            tacl__ctx_release(ctx);
    }
    free(world);
    if (status != TACL_OK)
        return status;
    conf_log(comm, conf, "init");
    return TACL_OK;
}

/* A new world communicator, complete on return. */
static tacl_status_t comm_init_blocking(int nranks,
                                        const tacl_unique_id_t *id, int rank,
                                        const comm_conf_t *conf,
                                        tacl_comm_t *comm_p)
{
    tacl_comm_t comm = calloc(1, sizeof(*comm));
    tacl_status_t status;

    if (comm == NULL)
        return tacl__error(TACL_ERR_NO_MEMORY, INIT, "out of memory");
    status = comm_init(comm, nranks, id, rank, conf);
    if (status != TACL_OK) {
        free(comm);
        return status;
    }
    comm->magic = TACL__COMM_ALIVE;
    *comm_p = comm;
    return TACL_OK;
}

/* What a non-blocking init's thread needs. */
typedef struct {
    tacl_comm_t comm;
    int nranks;
    int rank;
    tacl_unique_id_t id;
    comm_conf_t conf;
    int cuda_device;     /* the caller's current CUDA device, or -1 */
} init_job_t;

static void *init_thread_main(void *arg)
{
    init_job_t *job = arg;
    tacl_comm_t comm = job->comm;
    tacl_status_t status;

    /* The communicator's device is the caller's, not this thread's. */
    tacl__dev_set_current(job->cuda_device);
    status = comm_init(comm, job->nranks, &job->id, job->rank, &job->conf);
    if (status != TACL_OK)
        snprintf(comm->last_error, sizeof(comm->last_error), "%s%s%s%s",
                 job->conf.name[0] ? "communicator \"" : "", job->conf.name,
                 job->conf.name[0] ? "\": " : "", tacl__last_error());
    comm->init_status = status;
    free(job);
    /* Last: from here on other threads read the communicator. */
    atomic_store(&comm->initializing, 0);
    return NULL;
}

TACL_EXPORT tacl_status_t tacl_comm_init_rank_config(
    int nranks, const tacl_unique_id_t *id, int rank,
    const tacl_config_t *config, tacl_comm_t *comm_p)
{
    tacl_comm_t comm;
    comm_conf_t conf;
    tacl_status_t status;
    init_job_t *job;
    int err;

    tacl__last_error_clear();
    tacl__log_banner();
    if (id == NULL || comm_p == NULL)
        return tacl__error(TACL_ERR_INVALID_ARG, INIT,
                           "%s is NULL", id == NULL ? "id" : "comm_p");
    if (nranks < 1 || rank < 0 || rank >= nranks)
        return tacl__error(TACL_ERR_INVALID_ARG, INIT,
                           "rank %d is not within 0..nranks-1 (nranks %d)",
                           rank, nranks);
    status = conf_resolve(config, NULL, &conf);
    if (status != TACL_OK)
        return status;
    /* A misspelt TACL_ALGO would silently measure the wrong thing. */
    status = tacl__algo_spec_check(tacl__config_str(TACL_CFG_ALGO));
    if (status != TACL_OK)
        return status;
    if (conf.blocking)
        return comm_init_blocking(nranks, id, rank, &conf, comm_p);
    comm = calloc(1, sizeof(*comm));
    job = calloc(1, sizeof(*job));
    if (comm == NULL || job == NULL) {
        free(comm);
        free(job);
        return tacl__error(TACL_ERR_NO_MEMORY, INIT, "out of memory");
    }
    {
        char why[160];
        *job = (init_job_t){comm, nranks, rank, *id, conf,
                            tacl__dev_current(why, sizeof(why))};
    }
    comm->magic = TACL__COMM_ALIVE;
    atomic_init(&comm->initializing, 1);
    atomic_init(&comm->init_joinable, 1);
    err = pthread_create(&comm->init_thread, NULL, init_thread_main, job);
    if (err != 0) {
        free(job);
        free(comm);
        return tacl__error(TACL_ERR_SYSTEM, INIT,
                           "cannot start the initialisation thread: %s",
                           strerror(err));
    }
    *comm_p = comm;
    return TACL_IN_PROGRESS;
}

tacl_status_t tacl__comm_init_as(tacl_comm_t like, int nranks,
                                 const tacl_unique_id_t *id, int rank,
                                 tacl_comm_t *comm_p)
{
    comm_conf_t conf;

    conf_resolve(NULL, like, &conf); /* inherits: cannot fail */
    return comm_init_blocking(nranks, id, rank, &conf, comm_p);
}

TACL_EXPORT tacl_status_t tacl_comm_init_rank(int nranks,
                                              const tacl_unique_id_t *id,
                                              int rank, tacl_comm_t *comm_p)
{
    return tacl_comm_init_rank_config(nranks, id, rank, NULL, comm_p);
}

TACL_EXPORT tacl_status_t tacl_comm_init_env(tacl_comm_t *comm_p)
{
    return tacl_comm_init_env_config(NULL, comm_p);
}

TACL_EXPORT tacl_status_t tacl_comm_init_env_config(
    const tacl_config_t *config, tacl_comm_t *comm_p)
{
    tacl__launch_t launch;
    tacl_unique_id_t id;
    tacl_status_t status;

    tacl__last_error_clear();
    if (comm_p == NULL)
        return tacl__error(TACL_ERR_INVALID_ARG, INIT, "comm_p is NULL");
    status = tacl__launch_detect(&launch);
    if (status != TACL_OK)
        return status;
    status = tacl__bootstrap_id_from_addr(launch.host, launch.port, &id);
    if (status != TACL_OK)
        return status;
    return tacl_comm_init_rank_config(launch.nranks, &id, launch.rank,
                                      config, comm_p);
}

/* Small allgather over a communicator through the executor. */
tacl_status_t tacl__comm_allgather_small(tacl_comm_t comm, uint64_t seq,
                                         const void *mine, void *all,
                                         size_t bytes)
{
    tacl__op_t op = {
        .comm = comm,
        .args = {
            .type = TACL_COLL_ALLGATHER,
            .sendbuf = mine,
            .recvbuf = all,
            .count = bytes,
            .dtype = TACL_UINT8,
            .memtype = TACL_MEM_HOST,
            .seq = seq,
            .chunk_bytes = tacl__config_size(TACL_CFG_CHUNK_SIZE),
        },
    };
    tacl__exec_t *exec;
    tacl_status_t status;

    pthread_mutex_lock(&comm->x.ctx->lock);
    status = tacl__ops_start(comm, &op, 1, 1, &exec);
    pthread_mutex_unlock(&comm->x.ctx->lock);
    if (status != TACL_OK)
        return status;
    status = tacl__exec_wait(&exec, 1);
    tacl__exec_free(exec);
    return status;
}

static tacl_status_t split_held(tacl_comm_t comm, int color, int key,
                                const tacl_config_t *config,
                                tacl_comm_t *newcomm_p)
{
    int mine[3], *all = NULL, *world = NULL, *order = NULL;
    int n = 0, my_index = -1;
    tacl_status_t status;
    comm_conf_t conf;
    uint64_t split;

    if (newcomm_p == NULL)
        return tacl__comm_fail(comm, tacl__error(TACL_ERR_INVALID_ARG, INIT,
                                                 "newcomm_p is NULL"));
    /* Checked before anything is exchanged, so that a bad config fails
     * alike on every rank that passes it. */
    status = conf_resolve(config, comm, &conf);
    if (status != TACL_OK)
        return tacl__comm_fail(comm, status);
    if (color < 0 && color != TACL_SPLIT_NOCOLOR)
        return tacl__comm_fail(comm, tacl__error(TACL_ERR_INVALID_ARG, INIT,
                               "color %d is negative and not "
                               "TACL_SPLIT_NOCOLOR", color));
    mine[0] = color;
    mine[1] = key;
    mine[2] = comm->rank;
    all = malloc((size_t)comm->size * sizeof(mine));
    world = malloc((size_t)comm->size * sizeof(int));
    order = malloc((size_t)comm->size * sizeof(int));
    if (!all || !world || !order) {
        status = tacl__error(TACL_ERR_NO_MEMORY, INIT, "out of memory");
        goto out;
    }
    split = comm->splits++;
    status = tacl__comm_allgather_small(comm, comm->seq++, mine, all,
                                        sizeof(mine));
    if (status != TACL_OK)
        goto out;
    if (color == TACL_SPLIT_NOCOLOR) {
        *newcomm_p = NULL;
        goto out;
    }
    /* Members of my color, sorted by (key, old rank): insertion sort. */
    for (int r = 0; r < comm->size; r++) {
        int j;
        if (all[3 * r] != color)
            continue;
        for (j = n; j > 0; j--) {
            int q = order[j - 1];
            if (all[3 * q + 1] < all[3 * r + 1] ||
                (all[3 * q + 1] == all[3 * r + 1] && q < r))
                break;
            order[j] = order[j - 1];
        }
        order[j] = r;
        n++;
    }
    for (int i = 0; i < n; i++) {
        world[i] = comm->x.world[order[i]];
        if (order[i] == comm->rank)
            my_index = i;
    }
    {
        uint32_t id = comm->x.id * 2654435761u ^ (uint32_t)(split * 40503u) ^
                      (uint32_t)color * 97u;
        id = (id ^ (id >> 15)) * 2246822519u;
        id ^= id >> 13;
        tacl_comm_t made = calloc(1, sizeof(*made));

        if (made == NULL) {
            status = tacl__error(TACL_ERR_NO_MEMORY, INIT, "out of memory");
            goto out;
        }
        tacl__ctx_retain(comm->x.ctx);
        status = comm_create_on(made, comm->x.ctx, my_index, n, world,
                                id | 2u, &conf);
        if (status != TACL_OK) {
            tacl__ctx_release(comm->x.ctx);
            free(made);
            goto out;
        }
        made->magic = TACL__COMM_ALIVE;
        conf_log(made, &conf, "split");
        *newcomm_p = made;
    }
out:
    free(all);
    free(world);
    free(order);
    return tacl__comm_fail(comm, status);
}

TACL_EXPORT tacl_status_t tacl_comm_split_config(tacl_comm_t comm, int color,
                                                 int key,
                                                 const tacl_config_t *config,
                                                 tacl_comm_t *newcomm_p)
{
    TACL__COMM_HELD(comm, split_held(comm, color, key, config, newcomm_p));
}

TACL_EXPORT tacl_status_t tacl_comm_split(tacl_comm_t comm, int color,
                                          int key, tacl_comm_t *newcomm_p)
{
    return tacl_comm_split_config(comm, color, key, NULL, newcomm_p);
}

/* FNV-1a over bytes, continuing from h. */
static uint64_t group_hash(uint64_t h, const void *p, size_t len)
{
    const unsigned char *b = p;

    for (size_t i = 0; i < len; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

/* Check a member list: my index in it, or an error recorded. */
static tacl_status_t group_check(tacl_comm_t comm, int nranks,
                                 const int *ranks, int *me_p)
{
    unsigned char *seen;

    if (ranks == NULL)
        return tacl__error(TACL_ERR_INVALID_ARG, INIT, "ranks is NULL");
    if (nranks < 1 || nranks > comm->size)
        return tacl__error(TACL_ERR_INVALID_ARG, INIT,
                           "nranks %d is not within 1..%d (the "
                           "communicator's size)", nranks, comm->size);
    seen = calloc((size_t)comm->size, 1);
    if (seen == NULL)
        return tacl__error(TACL_ERR_NO_MEMORY, INIT, "out of memory");
    *me_p = -1;
    for (int i = 0; i < nranks; i++) {
        int r = ranks[i];

        if (r < 0 || r >= comm->size || seen[r]) {
            free(seen);
            return tacl__error(TACL_ERR_INVALID_ARG, INIT,
                               "ranks[%d] = %d is %s", i, r,
                               r < 0 || r >= comm->size
                                   ? "not a rank of the communicator"
                                   : "listed twice");
        }
        seen[r] = 1;
        if (r == comm->rank)
            *me_p = i;
    }
    free(seen);
    if (*me_p < 0)
        return tacl__error(TACL_ERR_INVALID_ARG, INIT,
                           "rank %d calls tacl_comm_create_group but is "
                           "not in its list of %d ranks", comm->rank,
                           nranks);
    return TACL_OK;
}

static tacl_status_t create_group_held(tacl_comm_t comm, int nranks,
                                       const int *ranks, int tag,
                                       const tacl_config_t *config,
                                       tacl_comm_t *newcomm_p)
{
    uint64_t check, key, value;
    tacl_comm_t made = NULL;
    tacl_status_t status;
    comm_conf_t conf;
    int me = -1, *world;

    if (newcomm_p == NULL)
        return tacl__comm_fail(comm, tacl__error(TACL_ERR_INVALID_ARG, INIT,
                                                 "newcomm_p is NULL"));
    status = group_check(comm, nranks, ranks, &me);
    if (status == TACL_OK)
        status = conf_resolve(config, comm, &conf);
    if (status == TACL_OK && comm->x.ctx->fatal != TACL_OK)
        status = tacl__error(comm->x.ctx->fatal, INIT,
                             "the communicator has failed (%s); shrink or "
                             "destroy it", comm->x.ctx->fatal_msg);
    if (status != TACL_OK)
        return tacl__comm_fail(comm, status);
    world = malloc((size_t)nranks * sizeof(int));
    made = calloc(1, sizeof(*made));
    if (world == NULL || made == NULL) {
        status = tacl__error(TACL_ERR_NO_MEMORY, INIT, "out of memory");
        goto out;
    }
    for (int i = 0; i < nranks; i++)
        world[i] = comm->x.world[ranks[i]];
    /* The list, the meeting (the parent and the tag) and, from the
     * leader, the new communicator's id: its parent, the list, and which
     * of the leader's groups it is. */
    check = group_hash(0xcbf29ce484222325ull, &nranks, sizeof(nranks));
    check = group_hash(check, ranks, (size_t)nranks * sizeof(int));
    key = group_hash(0x6772707300000000ull ^ comm->x.id, &tag, sizeof(tag));
    value = group_hash(check ^ key, &comm->groups, sizeof(comm->groups));
    value = group_hash(value, &comm->rank, sizeof(comm->rank));
    comm->groups++;
    status = tacl__bootstrap_meet(comm->x.ctx->bs, world, nranks, me, key,
                                  check, comm->x.timeout_s, &value);
    if (status != TACL_OK)
        goto out;
    tacl__ctx_retain(comm->x.ctx);
    status = comm_create_on(made, comm->x.ctx, me, nranks, world,
                            (uint32_t)(value ^ (value >> 32)) | 2u, &conf);
    if (status != TACL_OK) {
        tacl__ctx_release(comm->x.ctx);
        goto out;
    }
    made->magic = TACL__COMM_ALIVE;
    conf_log(made, &conf, "group");
    *newcomm_p = made;
    made = NULL;
out:
    free(made);
    free(world);
    return tacl__comm_fail(comm, status);
}

TACL_EXPORT tacl_status_t tacl_comm_create_group_config(
    tacl_comm_t comm, int nranks, const int *ranks, int tag,
    const tacl_config_t *config, tacl_comm_t *newcomm_p)
{
    TACL__COMM_HELD(comm, create_group_held(comm, nranks, ranks, tag, config,
                                            newcomm_p));
}

TACL_EXPORT tacl_status_t tacl_comm_create_group(tacl_comm_t comm,
                                                 int nranks, const int *ranks,
                                                 int tag,
                                                 tacl_comm_t *newcomm_p)
{
    return tacl_comm_create_group_config(comm, nranks, ranks, tag, NULL,
                                         newcomm_p);
}

static void bury_derived(tacl_comm_t comm);

/* Keep the (zeroed) handle so that later calls see a destroyed comm. */
static void comm_tombstone(tacl_comm_t comm)
{
    /* Keep the handle itself so later calls see a destroyed comm (and a
     * late tacl__comm_enter() or comm_close() a closed one). */
    __atomic_store_n(&comm->magic, TACL__COMM_DEAD, __ATOMIC_SEQ_CST);
    memset((char *)comm + offsetof(struct tacl_comm, rank), 0,
           sizeof(*comm) - offsetof(struct tacl_comm, rank));
    comm->closing = 1;
    pthread_mutex_lock(&grave_lock);
    comm->grave_next = graveyard;
    graveyard = comm;
    pthread_mutex_unlock(&grave_lock);
}

/*
 * Destroy and abort accept a communicator whose non-blocking init is
 * still running (they wait for it: it is bounded by the timeout) or
 * failed (nothing to release).  Returns 1 when comm was such a failed
 * one and is now a tombstone.
 */
static int comm_settle_init(tacl_comm_t comm)
{
    if (comm == NULL || comm->magic != TACL__COMM_ALIVE)
        return 0;
    if (atomic_exchange(&comm->init_joinable, 0))
        pthread_join(comm->init_thread, NULL);
    if (comm->init_status == TACL_OK)
        return 0;
    comm_tombstone(comm);
    return 1;
}

/* The communicator's executions in flight (under the context lock). */
static int comm_inflight(tacl_comm_t comm)
{
    int n;

    if (comm == NULL)
        return 0;
    pthread_mutex_lock(&comm->x.ctx->lock);
    n = comm->x.inflight;
    pthread_mutex_unlock(&comm->x.ctx->lock);
    return n;
}

static void comm_bury(tacl_comm_t comm)
{
    tacl__ctx_t *ctx = comm->x.ctx;

    bury_derived(comm);
    /* The progress thread first: nothing runs on what goes next. */
    if (comm->progress_thread)
        tacl__ctx_progress_drop(ctx);
    if (comm->stream_hold)
        tacl__ctx_progress_drop(ctx);
    /* Ended operations on streams still waiting to be freed. */
    tacl__ctx_reap(ctx);
    tacl__scratch_fini(&comm->x.scratch);
    tacl__flight_fini(&comm->x.flight);
    tacl__plan_cache_free(comm->plans);
    tacl__fast_comm_free(comm);
    free(comm->x.world);
    free(comm->node_of);
    free(comm->x.link_of);
    free(comm->p2p_send);
    free(comm->p2p_recv);
    tacl__est_free(comm);
    tacl__ctx_release(ctx);
    comm_tombstone(comm);
}

/* Derived communicators go with their parent. */
static void bury_derived(tacl_comm_t comm)
{
    if (comm->local != NULL && comm->local->magic == TACL__COMM_ALIVE)
        comm_bury(comm->local);
    if (comm->rail != NULL && comm->rail->magic == TACL__COMM_ALIVE)
        comm_bury(comm->rail);
    comm->local = comm->rail = NULL;
}

TACL_EXPORT tacl_status_t tacl_comm_destroy(tacl_comm_t comm)
{
    tacl_status_t status;
    int inflight;

    tacl__last_error_clear();
    if (comm_settle_init(comm))
        return TACL_OK;
    status = tacl__comm_check(comm);
    if (status != TACL_OK)
        return status;
    if (comm->is_derived)
        return tacl__comm_fail(comm, tacl__error(TACL_ERR_INVALID_USAGE,
                               INIT, "this communicator came from "
                               "tacl_comm_get_local/rail and is destroyed "
                               "with its parent"));
    /* A thread still inside a call makes the destroy fail, as in-flight
     * operations do: waiting for it is bounded by the timeout. */
    status = comm_close(comm);
    if (status != TACL_OK)
        return status;
    status = comm_wait_calls(comm, comm->x.timeout_s);
    if (status != TACL_OK) {
        comm_reopen(comm);
        return tacl__comm_fail(comm, status);
    }
    inflight = comm_inflight(comm);
    if (comm_inflight(comm->local) > 0 || comm_inflight(comm->rail) > 0)
        status = tacl__error(TACL_ERR_INVALID_USAGE, INIT, "operations of "
                             "a derived communicator are still in flight; "
                             "wait for them first");
    else if (inflight > 0)
        status = tacl__error(TACL_ERR_INVALID_USAGE, INIT, "%d operations "
                             "of this communicator are still in flight; "
                             "wait for their requests first (or call "
                             "tacl_comm_abort)", inflight);
    if (status != TACL_OK) {
        comm_reopen(comm);
        return tacl__comm_fail(comm, status);
    }
    comm_bury(comm);
    return TACL_OK;
}

TACL_EXPORT tacl_status_t tacl_comm_abort(tacl_comm_t comm)
{
    tacl_status_t status;
    tacl__ctx_t *ctx;

    tacl__last_error_clear();
    if (comm_settle_init(comm))
        return TACL_OK;
    status = tacl__comm_check(comm);
    if (status != TACL_OK)
        return status;
    /* New calls fail from here on. */
    status = comm_close(comm);
    if (status != TACL_OK)
        return status;
    ctx = comm->x.ctx;
    pthread_mutex_lock(&ctx->lock);
    tacl__error(TACL_ERR_REMOTE, INIT, "rank %d aborted the communicator",
                ctx->rank);
    if (ctx->bs != NULL)
        tacl__bootstrap_abort(ctx->bs);
    tacl__ctx_set_fatal(ctx, TACL_ERR_REMOTE);
    pthread_mutex_unlock(&ctx->lock);
    /* The calls other threads are in fail promptly now: wait for them to
     * leave before freeing what they use.  One that does not keeps the
     * communicator's memory (it is only marked dead). */
    status = comm_wait_calls(comm, comm->x.timeout_s);
    /* Requests the caller still holds keep their executions; the context
     * is freed with its last communicator. */
    if (status == TACL_OK && comm_inflight(comm) == 0) {
        comm_bury(comm);
    } else {
        if (comm->progress_thread)
            tacl__ctx_progress_drop(ctx);
        if (comm->stream_hold)
            tacl__ctx_progress_drop(ctx);
        comm->progress_thread = comm->stream_hold = 0;
        tacl__ctx_reap(ctx);
        __atomic_store_n(&comm->magic, TACL__COMM_DEAD, __ATOMIC_SEQ_CST);
    }
    return TACL_OK;
}

/* Make (once) and return a cached derived communicator. */
static tacl_status_t comm_derived_held(tacl_comm_t comm, int rail,
                                       tacl_comm_t *out_p)
{
    tacl_comm_t *slot;
    tacl_status_t status;

    if (out_p == NULL)
        return tacl__comm_fail(comm, tacl__error(TACL_ERR_INVALID_ARG, INIT,
                                                 "output pointer is NULL"));
    slot = rail ? &comm->rail : &comm->local;
    if (*slot == NULL) {
        tacl_comm_t made;
        status = tacl_comm_split(comm,
                                 rail ? comm->view.local_rank
                                      : comm->view.node,
                                 comm->rank, &made);
        if (status != TACL_OK)
            return tacl__comm_fail(comm, status);
        made->is_derived = 1;
        *slot = made;
        TACL_INFO(TOPO, "rank %d: %s communicator of %d ranks (rank %d)",
                  comm->rank, rail ? "rail" : "node", made->size,
                  made->rank);
    }
    *out_p = *slot;
    return TACL_OK;
}

static tacl_status_t comm_derived(tacl_comm_t comm, int rail,
                                  tacl_comm_t *out_p)
{
    TACL__COMM_HELD(comm, comm_derived_held(comm, rail, out_p));
}

TACL_EXPORT tacl_status_t tacl_comm_get_local(tacl_comm_t comm,
                                              tacl_comm_t *local_p)
{
    return comm_derived(comm, 0, local_p);
}

TACL_EXPORT tacl_status_t tacl_comm_get_rail(tacl_comm_t comm,
                                             tacl_comm_t *rail_p)
{
    return comm_derived(comm, 1, rail_p);
}

TACL_EXPORT const char *tacl_comm_last_algorithm(tacl_comm_t comm)
{
    if (comm == NULL || comm->magic != TACL__COMM_ALIVE)
        return "";
    return comm->last_algo;
}

TACL_EXPORT tacl_status_t tacl_comm_get_async_error(tacl_comm_t comm,
                                                    tacl_status_t *error_p)
{
    tacl_status_t status = tacl__comm_check(comm);

    if (status == TACL_IN_PROGRESS || (status < 0 && comm != NULL &&
                                       comm->magic == TACL__COMM_ALIVE)) {
        /* Still initialising, or the initialisation failed: that is the
         * answer, not an error of this call. */
        if (error_p == NULL)
            return tacl__error(TACL_ERR_INVALID_ARG, INIT,
                               "error_p is NULL");
        *error_p = status;
        return TACL_OK;
    }
    if (status != TACL_OK)
        return status;
    if (error_p == NULL)
        return tacl__comm_fail(comm, tacl__error(TACL_ERR_INVALID_ARG, INIT,
                                                 "error_p is NULL"));
    status = tacl__comm_enter(comm);
    if (status != TACL_OK)
        return status;
    tacl__ctx_progress(comm->x.ctx);
    *error_p = comm->x.ctx->fatal != TACL_OK ? comm->x.ctx->fatal
                                           : comm->async_error;
    tacl__comm_leave(comm);
    return TACL_OK;
}

TACL_EXPORT const char *tacl_comm_last_error(tacl_comm_t comm)
{
    if (comm == NULL || comm->magic != TACL__COMM_ALIVE)
        return tacl__last_error();
    if (atomic_load(&comm->initializing))
        return "";
    return comm->last_error;
}

TACL_EXPORT const char *tacl_last_error(void)
{
    return tacl__last_error();
}

#define COMM_QUERY(fn, field)                                                \
    TACL_EXPORT tacl_status_t fn(tacl_comm_t comm, int *value_p)             \
    {                                                                        \
        tacl_status_t status = tacl__comm_check(comm);                       \
        if (status != TACL_OK)                                               \
            return status;                                                   \
        if (value_p == NULL)                                                 \
            return tacl__comm_fail(comm, tacl__error(TACL_ERR_INVALID_ARG,   \
                                   INIT, "output pointer is NULL"));         \
        *value_p = (field);                                                  \
        return TACL_OK;                                                      \
    }

COMM_QUERY(tacl_comm_rank, comm->rank)
COMM_QUERY(tacl_comm_size, comm->size)
COMM_QUERY(tacl_comm_node, comm->view.node)
COMM_QUERY(tacl_comm_n_nodes, comm->view.n_nodes)
COMM_QUERY(tacl_comm_local_rank, comm->view.local_rank)
COMM_QUERY(tacl_comm_local_size, comm->view.local_size)

TACL_EXPORT tacl_status_t tacl_comm_get_counters(tacl_comm_t comm,
                                                 tacl_counters_t *counters_p)
{
    tacl_status_t status = tacl__comm_check(comm);

    if (status != TACL_OK)
        return status;
    if (counters_p == NULL)
        return tacl__comm_fail(comm, tacl__error(TACL_ERR_INVALID_ARG, INIT,
                                                 "counters_p is NULL"));
    status = tacl__comm_enter(comm);
    if (status != TACL_OK)
        return status;
    pthread_mutex_lock(&comm->x.ctx->lock);
    *counters_p = comm->x.counters;
    pthread_mutex_unlock(&comm->x.ctx->lock);
    tacl__comm_leave(comm);
    return TACL_OK;
}

TACL_EXPORT tacl_status_t tacl_comm_reset_counters(tacl_comm_t comm)
{
    tacl_status_t status = tacl__comm_enter(comm);

    if (status != TACL_OK)
        return status;
    pthread_mutex_lock(&comm->x.ctx->lock);
    for (int t = 0; t < comm->x.counters.n_transports; t++) {
        comm->x.counters.transports[t].bytes = 0;
        comm->x.counters.transports[t].messages = 0;
    }
    for (int c = 0; c < TACL_NUM_LINK_CLASSES; c++) {
        comm->x.counters.links[c].bytes = 0;
        comm->x.counters.links[c].messages = 0;
    }
    pthread_mutex_unlock(&comm->x.ctx->lock);
    tacl__comm_leave(comm);
    return TACL_OK;
}

TACL_EXPORT void tacl_config_print(void *file)
{
    tacl__config_print(file != NULL ? (FILE *)file : stdout);
}

