/*
 * Making a world communicator: its configuration (tacl_config_t, each
 * field left unset taking the environment's value), the context it runs
 * on (executor/context.c: bootstrap, node table, topology, transports)
 * and its view of that context; blocking, or in a thread of its own
 * (tacl_config_t.blocking = 0).  Split and group communicators reuse
 * tacl__comm_create_on (comm_derive.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "config.h"
#include "comm.h"
#include "launch.h"
#include "log.h"

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
    comm->p2p_recv = calloc((size_t)size + 1, sizeof(uint64_t));
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
    /* Last, collectively: the fast engine's area (the communicator runs
     * the exchanges it needs). */
    status = tacl__fast_comm_init(comm);
    if (status == TACL_OK)
        return TACL_OK;
    for (int i = 0; i < TACL__EXT_COUNT; i++) {
        if (comm->ext[i] != NULL)
            comm->ext[i]->free(comm->ext[i]);
        comm->ext[i] = NULL;
    }
    tacl__flight_fini(&comm->x.flight);

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

tacl_status_t tacl__comm_conf_resolve(const tacl_config_t *cfg,
                                  tacl_comm_t parent, tacl__comm_conf_t *out)
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

tacl_status_t tacl__comm_create_on(tacl_comm_t comm, tacl__ctx_t *ctx,
                                   int rank, int size, const int *world,
                                   uint32_t id, const tacl__comm_conf_t *conf)
{
    tacl_status_t status;

    if (conf->progress_thread) {
        status = tacl__ctx_progress_hold(ctx);
        if (status != TACL_OK)
            return status;
    }
    /* The settings first: making the communicator runs exchanges on it,
     * bounded by its timeout. */
    comm->progress_thread = conf->progress_thread;
    comm->x.timeout_s = conf->timeout_s;
    memcpy(comm->x.name, conf->name, sizeof(comm->x.name));
    comm->check = conf->check;
    status = comm_create(comm, ctx, rank, size, world, id);
    if (status != TACL_OK) {
        if (conf->progress_thread)
            tacl__ctx_progress_drop(ctx);
        comm->progress_thread = 0;
        return status;
    }
    return TACL_OK;
}

void tacl__comm_conf_log(tacl_comm_t comm, const tacl__comm_conf_t *conf,
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
                               const tacl__comm_conf_t *conf)
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
        status = tacl__comm_create_on(comm, ctx, rank, nranks, world, 1, conf);
        if (status != TACL_OK)
            tacl__ctx_release(ctx);
    }
    free(world);
    if (status != TACL_OK)
        return status;
    tacl__comm_conf_log(comm, conf, "init");
    return TACL_OK;
}

/* A new world communicator, complete on return. */
static tacl_status_t comm_init_blocking(int nranks,
                                        const tacl_unique_id_t *id, int rank,
                                        const tacl__comm_conf_t *conf,
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
    tacl__comm_conf_t conf;
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
    tacl__comm_conf_t conf;
    tacl_status_t status;
    init_job_t *job;
    int err;

    tacl__last_error_clear();
    tacl__log_banner();
    tacl__config_report_once();
    if (id == NULL || comm_p == NULL)
        return tacl__error(TACL_ERR_INVALID_ARG, INIT,
                           "%s is NULL", id == NULL ? "id" : "comm_p");
    if (nranks < 1 || rank < 0 || rank >= nranks)
        return tacl__error(TACL_ERR_INVALID_ARG, INIT,
                           "rank %d is not within 0..nranks-1 (nranks %d)",
                           rank, nranks);
    status = tacl__comm_conf_resolve(config, NULL, &conf);
    if (status != TACL_OK)
        return status;
    /* A misspelt TACL_ALGO would silently measure the wrong thing. */
    {
        tacl__algo_force_t force;

        status = tacl__algo_force_parse(tacl__config_str(TACL_CFG_ALGO),
                                        &force);
        if (status != TACL_OK)
            return status;
    }
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
    tacl__comm_conf_t conf;

    tacl__comm_conf_resolve(NULL, like, &conf); /* inherits: cannot fail */
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

