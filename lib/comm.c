/*
 * Communicators: creation from a unique id or the environment, split,
 * destroy and abort, queries, counters and the scratch pool.
 *
 * Creation runs the bootstrap, exchanges node identities (TACL_NODE_ID,
 * else host name and boot id), numbers the nodes in order of their lowest
 * rank, and creates the transports (self for the rank itself, shm for the
 * ranks of the same node).  Destroyed handles are kept as small tombstones
 * so that a later use is reported as TACL_ERR_INVALID_USAGE rather than
 * touching freed memory.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>

#include "common.h"
#include "config.h"
#include "executor.h"
#include "log.h"

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
    return TACL_OK;
}

tacl_status_t tacl__comm_fail(tacl_comm_t comm, tacl_status_t status)
{
    if (status < 0 && comm != NULL && comm->magic == TACL__COMM_ALIVE)
        snprintf(comm->last_error, sizeof(comm->last_error), "%s",
                 tacl__last_error());
    return status;
}

/* Node identity: TACL_NODE_ID, else host name plus boot id. */
static void node_identity(char *buf, size_t len)
{
    char host[64] = "", boot[64] = "";
    FILE *f;

    if (tacl__config_is_set(TACL_CFG_NODE_ID) &&
        tacl__config_str(TACL_CFG_NODE_ID)[0] != '\0') {
        snprintf(buf, len, "%s", tacl__config_str(TACL_CFG_NODE_ID));
        return;
    }
    gethostname(host, sizeof(host) - 1);
    f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f != NULL) {
        if (fgets(boot, sizeof(boot), f) == NULL)
            boot[0] = '\0';
        fclose(f);
        boot[strcspn(boot, "\n")] = '\0';
    }
    snprintf(buf, len, "%.40s:%.8s", host, boot);
}

static tacl_status_t exchange_cb(void *arg, void *all, size_t size)
{
    return tacl__bootstrap_allgather(arg, all, size);
}

static void ctx_free(tacl__ctx_t *ctx)
{
    for (int t = ctx->ntl - 1; t >= 0; t--)
        tacl__tl_close(ctx->tls[t]);
    if (ctx->bs != NULL)
        tacl__bootstrap_fini(ctx->bs);
    pthread_mutex_destroy(&ctx->lock);
    tacl__topo_fini(&ctx->topo);
    free(ctx->node_ids);
    free(ctx->node_of);
    free(ctx->tl_of);
    free(ctx);
}

static tacl_status_t ctx_transports(tacl__ctx_t *ctx)
{
    /* In order of preference: the first that reaches a peer serves it,
     * so shm keeps intra-node traffic and the network takes the rest. */
    static const tacl__transport_ops_t *const builtin[] = {
        &tacl__tl_self_ops,
        &tacl__tl_shm_ops,
#ifdef TACL_HAVE_UCX
        &tacl__tl_ucx_ops,
#endif
    };
    const char *net = tacl__config_str(TACL_CFG_NET);
    const char **ids;
    tacl__tl_params_t params;
    tacl_status_t status = TACL_OK;

    ids = calloc((size_t)ctx->nranks, sizeof(*ids));
    if (ids == NULL)
        return tacl__error(TACL_ERR_NO_MEMORY, INIT, "out of memory");
    for (int r = 0; r < ctx->nranks; r++)
        ids[r] = ctx->node_ids[r];
    params = (tacl__tl_params_t){
        .rank = ctx->rank,
        .nranks = ctx->nranks,
        .node_id = ctx->node_ids[ctx->rank],
        .node_ids = ids,
        .timeout_s = ctx->timeout_s,
        .exchange = exchange_cb,
        .exchange_ctx = ctx->bs,
    };
    if (strcmp(net, "none") != 0 && strcmp(net, "ucx") != 0) {
        free(ids);
        return tacl__error(TACL_ERR_INVALID_ARG, INIT,
                           "TACL_NET=\"%s\": the network transports built "
                           "in are: ucx, none", net);
    }
    for (size_t i = 0; i < TACL_ARRAY_SIZE(builtin); i++) {
        if (strcmp(builtin[i]->name, "ucx") == 0 && strcmp(net, "ucx") != 0)
            continue;
        status = builtin[i]->init(&params, &ctx->tls[ctx->ntl]);
        if (status != TACL_OK)
            break;
        ctx->ntl++;
    }
    free(ids);
    if (status != TACL_OK)
        return status;
    /* The first transport that reaches a peer serves it. */
    for (int r = 0; r < ctx->nranks; r++) {
        ctx->tl_of[r] = -1;
        for (int t = 0; t < ctx->ntl; t++) {
            if (tacl__tl_reachable(ctx->tls[t], r)) {
                ctx->tl_of[r] = (int8_t)t;
                break;
            }
        }
    }
    return TACL_OK;
}

/*
 * The context's topology: every rank's detected node description is
 * exchanged, the description of a node's lowest rank stands for the node,
 * and a topology file (TACL_TOPO_FILE) may replace the links and node
 * descriptions.  Rank 0 writes the result to TACL_TOPO_DUMP_FILE.
 */
static tacl_status_t ctx_topology(tacl__ctx_t *ctx)
{
    tacl__topo_t *topo = &ctx->topo;
    tacl__node_desc_t *all;
    tacl_status_t status;

    all = calloc((size_t)ctx->nranks, sizeof(*all));
    topo->nodes = calloc((size_t)ctx->n_nodes, sizeof(*topo->nodes));
    topo->node_of = malloc((size_t)ctx->nranks * sizeof(int));
    if (all == NULL || topo->nodes == NULL || topo->node_of == NULL) {
        free(all);
        return tacl__error(TACL_ERR_NO_MEMORY, TOPO, "out of memory");
    }
    status = tacl__topo_detect_node(&all[ctx->rank]);
    if (status == TACL_OK)
        status = tacl__bootstrap_allgather(ctx->bs, all, sizeof(*all));
    if (status != TACL_OK) {
        free(all);
        return status;
    }
    topo->n_nodes = ctx->n_nodes;
    topo->nranks = ctx->nranks;
    for (int r = ctx->nranks - 1; r >= 0; r--) {
        topo->node_of[r] = ctx->node_of[r];
        topo->nodes[ctx->node_of[r]] = all[r];
        snprintf(topo->nodes[ctx->node_of[r]].name, TACL__TOPO_NAME_LEN,
                 "%s", ctx->node_ids[r]);
    }
    free(all);
    if (tacl__config_str(TACL_CFG_TOPO_FILE)[0] != '\0') {
        tacl__topo_t file;
        status = tacl__topo_load(tacl__config_str(TACL_CFG_TOPO_FILE), &file);
        if (status != TACL_OK)
            return status;
        memcpy(topo->machine, file.machine, sizeof(topo->machine));
        memcpy(topo->link, file.link, sizeof(topo->link));
        for (int n = 0; n < topo->n_nodes && n < file.n_nodes; n++) {
            tacl__node_desc_t d = file.nodes[n];
            memcpy(d.name, topo->nodes[n].name, sizeof(d.name));
            /* Files describe links and counts, not caches. */
            if (d.llc_bytes == 0)
                d.llc_bytes = topo->nodes[n].llc_bytes;
            topo->nodes[n] = d;
        }
        tacl__topo_fini(&file);
    }
    status = tacl__topo_set_links(topo);
    if (status != TACL_OK)
        return status;
    if (ctx->rank == 0 && tacl__config_str(TACL_CFG_TOPO_DUMP_FILE)[0]) {
        status = tacl__topo_dump(topo,
                                 tacl__config_str(TACL_CFG_TOPO_DUMP_FILE));
        if (status != TACL_OK)
            return status;
    }
    tacl__topo_log(topo, ctx->rank);
    return TACL_OK;
}

static tacl_status_t ctx_create(const tacl_unique_id_t *id, int rank,
                                int nranks, tacl__ctx_t **ctx_p)
{
    tacl__ctx_t *ctx;
    tacl_status_t status;

    ctx = calloc(1, sizeof(*ctx));
    if (ctx == NULL)
        return tacl__error(TACL_ERR_NO_MEMORY, INIT, "out of memory");
    ctx->refcount = 1;
    ctx->rank = rank;
    ctx->nranks = nranks;
    ctx->timeout_s = tacl__config_double(TACL_CFG_TIMEOUT);
    if (ctx->timeout_s <= 0)
        ctx->timeout_s = 60;
    pthread_mutex_init(&ctx->lock, NULL);
    ctx->node_ids = calloc((size_t)nranks, TACL__NODE_ID_LEN);
    ctx->node_of = calloc((size_t)nranks, sizeof(int));
    ctx->tl_of = calloc((size_t)nranks, sizeof(int8_t));
    if (!ctx->node_ids || !ctx->node_of || !ctx->tl_of) {
        status = tacl__error(TACL_ERR_NO_MEMORY, INIT, "out of memory");
        goto err_free;
    }
    status = tacl__bootstrap_init(id, rank, nranks, ctx->timeout_s, &ctx->bs);
    if (status != TACL_OK)
        goto err_free;
    node_identity(ctx->node_ids[rank], TACL__NODE_ID_LEN);
    status = tacl__bootstrap_allgather(ctx->bs, ctx->node_ids,
                                       TACL__NODE_ID_LEN);
    if (status != TACL_OK)
        goto err_free;
    /* Nodes numbered in order of their lowest rank. */
    for (int r = 0; r < nranks; r++) {
        ctx->node_of[r] = -1;
        for (int q = 0; q < r; q++) {
            if (strcmp(ctx->node_ids[q], ctx->node_ids[r]) == 0) {
                ctx->node_of[r] = ctx->node_of[q];
                break;
            }
        }
        if (ctx->node_of[r] < 0)
            ctx->node_of[r] = ctx->n_nodes++;
    }
    status = ctx_topology(ctx);
    if (status != TACL_OK)
        goto err_free;
    status = ctx_transports(ctx);
    if (status != TACL_OK)
        goto err_free;
    TACL_INFO(INIT, "rank %d of %d on node %d of %d (%s), %d transports",
              rank, nranks, ctx->node_of[rank], ctx->n_nodes,
              ctx->node_ids[rank], ctx->ntl);
    *ctx_p = ctx;
    return TACL_OK;

err_free:
    ctx_free(ctx);
    return status;
}

/* Fill the communicator's topology view from its ranks' nodes. */
static tacl_status_t comm_topology(tacl_comm_t comm)
{
    tacl__ctx_t *ctx = comm->ctx;
    int *first = calloc((size_t)ctx->n_nodes, sizeof(int));
    int n_nodes = 0;

    if (first == NULL)
        return tacl__error(TACL_ERR_NO_MEMORY, INIT, "out of memory");
    for (int i = 0; i < ctx->n_nodes; i++)
        first[i] = -1;
    for (int r = 0; r < comm->size; r++) {
        int wnode = ctx->node_of[comm->world[r]];
        if (first[wnode] < 0)
            first[wnode] = n_nodes++;
        comm->node_of[r] = first[wnode];
    }
    free(first);
    for (int r = 0; r < comm->size; r++)
        comm->link_of[r] = (uint8_t)tacl__topo_link_class(
            &ctx->topo, comm->world[comm->rank], comm->world[r], 0);
    for (int c = 0; c < TACL_NUM_LINK_CLASSES; c++) {
        comm->view.link_bw[c] = ctx->topo.link[c].bw;
        comm->view.link_lat[c] = ctx->topo.link[c].lat;
    }
    comm->view.rank = comm->rank;
    comm->view.nranks = comm->size;
    comm->view.n_nodes = n_nodes;
    comm->view.node_of = comm->node_of;
    comm->view.node = comm->node_of[comm->rank];
    comm->view.local_rank = 0;
    comm->view.local_size = 0;
    for (int r = 0; r < comm->size; r++) {
        if (comm->node_of[r] != comm->view.node)
            continue;
        if (r < comm->rank)
            comm->view.local_rank++;
        comm->view.local_size++;
    }
    comm->view.stream_bytes = tacl__topo_stream_bytes(
        &ctx->topo.nodes[ctx->node_of[comm->world[comm->rank]]]);
    return TACL_OK;
}

static tacl_status_t comm_create(tacl__ctx_t *ctx, int rank, int size,
                                 const int *world, uint32_t id,
                                 tacl_comm_t *comm_p)
{
    tacl_comm_t comm = calloc(1, sizeof(*comm));
    tacl_status_t status;

    if (comm == NULL)
        return tacl__error(TACL_ERR_NO_MEMORY, INIT, "out of memory");
    comm->ctx = ctx;
    comm->rank = rank;
    comm->size = size;
    comm->id = id & ((1u << (64 - TACL__TAG_COMM_SHIFT)) - 1);
    comm->world = malloc((size_t)size * sizeof(int));
    comm->node_of = calloc((size_t)size, sizeof(int));
    comm->link_of = calloc((size_t)size, sizeof(uint8_t));
    comm->p2p_send = calloc((size_t)size, sizeof(uint64_t));
    comm->p2p_recv = calloc((size_t)size, sizeof(uint64_t));
    if (!comm->world || !comm->node_of || !comm->link_of ||
        !comm->p2p_send || !comm->p2p_recv) {
        status = tacl__error(TACL_ERR_NO_MEMORY, INIT, "out of memory");
        goto err_free;
    }
    memcpy(comm->world, world, (size_t)size * sizeof(int));
    status = comm_topology(comm);
    if (status != TACL_OK)
        goto err_free;
    comm->counters.n_transports = ctx->ntl;
    for (int t = 0; t < ctx->ntl; t++)
        snprintf(comm->counters.transports[t].name,
                 sizeof(comm->counters.transports[t].name), "%s",
                 tacl__tl_name(ctx->tls[t]));
    for (int c = 0; c < TACL_NUM_LINK_CLASSES; c++)
        snprintf(comm->counters.links[c].name,
                 sizeof(comm->counters.links[c].name), "%s",
                 tacl__link_class_name((tacl_link_class_t)c));
    comm->magic = TACL__COMM_ALIVE;
    *comm_p = comm;
    return TACL_OK;

err_free:
    free(comm->world);
    free(comm->node_of);
    free(comm->link_of);
    free(comm->p2p_send);
    free(comm->p2p_recv);
    free(comm);
    return status;
}

TACL_EXPORT tacl_status_t tacl_get_unique_id(tacl_unique_id_t *id_p)
{
    tacl__last_error_clear();
    if (id_p == NULL)
        return tacl__error(TACL_ERR_INVALID_ARG, INIT, "id_p is NULL");
    return tacl__bootstrap_unique_id(id_p);
}

TACL_EXPORT tacl_status_t tacl_comm_init_rank(int nranks,
                                              const tacl_unique_id_t *id,
                                              int rank, tacl_comm_t *comm_p)
{
    tacl__ctx_t *ctx = NULL;
    tacl_comm_t comm = NULL;
    tacl_status_t status;
    int *world;

    tacl__last_error_clear();
    if (id == NULL || comm_p == NULL)
        return tacl__error(TACL_ERR_INVALID_ARG, INIT,
                           "%s is NULL", id == NULL ? "id" : "comm_p");
    if (nranks < 1 || rank < 0 || rank >= nranks)
        return tacl__error(TACL_ERR_INVALID_ARG, INIT,
                           "rank %d is not within 0..nranks-1 (nranks %d)",
                           rank, nranks);
    /* A misspelt TACL_ALGO would silently measure the wrong thing. */
    status = tacl__algo_spec_check(tacl__config_str(TACL_CFG_ALGO));
    if (status != TACL_OK)
        return status;
    world = malloc((size_t)nranks * sizeof(int));
    if (world == NULL)
        return tacl__error(TACL_ERR_NO_MEMORY, INIT, "out of memory");
    for (int r = 0; r < nranks; r++)
        world[r] = r;
    status = ctx_create(id, rank, nranks, &ctx);
    if (status != TACL_OK)
        goto out;
    status = comm_create(ctx, rank, nranks, world, 1, &comm);
    if (status != TACL_OK) {
        ctx_free(ctx);
        goto out;
    }
    *comm_p = comm;
out:
    free(world);
    return status;
}

static tacl_status_t env_int(tacl__cfg_t cfg, const char *fallback,
                             int *value_p)
{
    const char *s = tacl__config_is_set(cfg) ? tacl__config_str(cfg)
                                             : tacl__config_env(fallback);
    char *end;
    long v;

    if (s == NULL || s[0] == '\0')
        return tacl__error(TACL_ERR_INVALID_USAGE, INIT,
                           "neither TACL_%s nor %s is set; start the ranks "
                           "with tacl-run, torchrun or set them",
                           cfg == TACL_CFG_RANK ? "RANK" : "NRANKS", fallback);
    errno = 0;
    v = strtol(s, &end, 10);
    if (errno != 0 || *end != '\0' || v < 0 || v > (1 << 24))
        return tacl__error(TACL_ERR_INVALID_ARG, INIT,
                           "%s=\"%s\" is not a valid number", fallback, s);
    *value_p = (int)v;
    return TACL_OK;
}

TACL_EXPORT tacl_status_t tacl_comm_init_env(tacl_comm_t *comm_p)
{
    char host[256];
    const char *addr, *port_s;
    tacl_unique_id_t id;
    tacl_status_t status;
    int rank, nranks;
    long port;

    tacl__last_error_clear();
    if (comm_p == NULL)
        return tacl__error(TACL_ERR_INVALID_ARG, INIT, "comm_p is NULL");
    status = env_int(TACL_CFG_RANK, "RANK", &rank);
    if (status == TACL_OK)
        status = env_int(TACL_CFG_NRANKS, "WORLD_SIZE", &nranks);
    if (status != TACL_OK)
        return status;
    addr = tacl__config_str(TACL_CFG_ROOT_ADDR);
    if (addr[0] != '\0') {
        const char *colon = strrchr(addr, ':');
        if (colon == NULL || colon == addr ||
            (size_t)(colon - addr) >= sizeof(host))
            return tacl__error(TACL_ERR_INVALID_ARG, INIT,
                               "TACL_ROOT_ADDR=\"%s\" is not host:port",
                               addr);
        memcpy(host, addr, (size_t)(colon - addr));
        host[colon - addr] = '\0';
        port_s = colon + 1;
    } else {
        const char *a = tacl__config_env("MASTER_ADDR");
        port_s = tacl__config_env("MASTER_PORT");
        if (a == NULL || port_s == NULL)
            return tacl__error(TACL_ERR_INVALID_USAGE, INIT,
                               "no root address: set TACL_ROOT_ADDR=host:port "
                               "or MASTER_ADDR and MASTER_PORT");
        snprintf(host, sizeof(host), "%s", a);
    }
    port = strtol(port_s, NULL, 10);
    if (port <= 0 || port > 65535)
        return tacl__error(TACL_ERR_INVALID_ARG, INIT,
                           "root port \"%s\" is not a valid port", port_s);
    status = tacl__bootstrap_id_from_addr(host, (int)port, &id);
    if (status != TACL_OK)
        return status;
    return tacl_comm_init_rank(nranks, &id, rank, comm_p);
}

/* Small allgather over a communicator through the executor. */
static tacl_status_t comm_allgather_small(tacl_comm_t comm, const void *mine,
                                          void *all, size_t bytes)
{
    tacl__op_t op = {
        .comm = comm,
        .args = {
            .type = TACL__COLL_ALLGATHER,
            .sendbuf = mine,
            .recvbuf = all,
            .count = bytes,
            .dtype = TACL_UINT8,
            .memtype = TACL_MEM_HOST,
            .seq = comm->seq++,
            .chunk_bytes = (uint64_t)tacl__config_int(TACL_CFG_CHUNK_SIZE),
        },
    };
    tacl__exec_t *exec;
    tacl_status_t status;

    pthread_mutex_lock(&comm->ctx->lock);
    status = tacl__ops_start(comm, &op, 1, &exec);
    pthread_mutex_unlock(&comm->ctx->lock);
    if (status != TACL_OK)
        return status;
    status = tacl__exec_wait(&exec, 1);
    tacl__exec_free(exec);
    return status;
}

TACL_EXPORT tacl_status_t tacl_comm_split(tacl_comm_t comm, int color,
                                          int key, tacl_comm_t *newcomm_p)
{
    int mine[3], *all = NULL, *world = NULL, *order = NULL;
    int n = 0, my_index = -1;
    tacl_status_t status;
    uint64_t split;

    tacl__last_error_clear();
    status = tacl__comm_check(comm);
    if (status != TACL_OK)
        return status;
    if (newcomm_p == NULL)
        return tacl__comm_fail(comm, tacl__error(TACL_ERR_INVALID_ARG, INIT,
                                                 "newcomm_p is NULL"));
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
    status = comm_allgather_small(comm, mine, all, sizeof(mine));
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
        world[i] = comm->world[order[i]];
        if (order[i] == comm->rank)
            my_index = i;
    }
    {
        uint32_t id = comm->id * 2654435761u ^ (uint32_t)(split * 40503u) ^
                      (uint32_t)color * 97u;
        id = (id ^ (id >> 15)) * 2246822519u;
        id ^= id >> 13;
        pthread_mutex_lock(&comm->ctx->lock);
        comm->ctx->refcount++;
        pthread_mutex_unlock(&comm->ctx->lock);
        status = comm_create(comm->ctx, my_index, n, world, id | 2u,
                             newcomm_p);
        if (status != TACL_OK) {
            pthread_mutex_lock(&comm->ctx->lock);
            comm->ctx->refcount--;
            pthread_mutex_unlock(&comm->ctx->lock);
        }
    }
out:
    free(all);
    free(world);
    free(order);
    return tacl__comm_fail(comm, status);
}

static void bury_derived(tacl_comm_t comm);

static void scratch_free(void *ptr, int shared);

static void comm_bury(tacl_comm_t comm)
{
    tacl__ctx_t *ctx = comm->ctx;

    bury_derived(comm);
    int last;

    /* A slot still in use belongs to a finished execution whose request
     * is not freed yet; that free returns it (as an unpooled buffer). */
    for (int i = 0; i < TACL__SCRATCH_SLOTS; i++)
        if (!comm->scratch[i].in_use)
            scratch_free(comm->scratch[i].ptr, comm->scratch[i].shared);
    free(comm->world);
    free(comm->node_of);
    free(comm->link_of);
    free(comm->p2p_send);
    free(comm->p2p_recv);
    pthread_mutex_lock(&ctx->lock);
    last = --ctx->refcount == 0;
    pthread_mutex_unlock(&ctx->lock);
    if (last)
        ctx_free(ctx);
    /* Keep the handle itself so later calls see a destroyed comm. */
    memset(comm, 0, sizeof(*comm));
    comm->magic = TACL__COMM_DEAD;
    pthread_mutex_lock(&grave_lock);
    comm->grave_next = graveyard;
    graveyard = comm;
    pthread_mutex_unlock(&grave_lock);
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

    tacl__last_error_clear();
    status = tacl__comm_check(comm);
    if (status != TACL_OK)
        return status;
    if (comm->is_derived)
        return tacl__comm_fail(comm, tacl__error(TACL_ERR_INVALID_USAGE,
                               INIT, "this communicator came from "
                               "tacl_comm_get_local/rail and is destroyed "
                               "with its parent"));
    if ((comm->local && comm->local->inflight > 0) ||
        (comm->rail && comm->rail->inflight > 0))
        return tacl__comm_fail(comm, tacl__error(TACL_ERR_INVALID_USAGE,
                               INIT, "operations of a derived communicator "
                               "are still in flight; wait for them first"));
    if (comm->inflight > 0)
        return tacl__comm_fail(comm, tacl__error(TACL_ERR_INVALID_USAGE,
                               INIT, "%d operations of this communicator are "
                               "still in flight; wait for their requests "
                               "first (or call tacl_comm_abort)",
                               comm->inflight));
    comm_bury(comm);
    return TACL_OK;
}

TACL_EXPORT tacl_status_t tacl_comm_abort(tacl_comm_t comm)
{
    tacl_status_t status;
    tacl__ctx_t *ctx;

    tacl__last_error_clear();
    status = tacl__comm_check(comm);
    if (status != TACL_OK)
        return status;
    ctx = comm->ctx;
    pthread_mutex_lock(&ctx->lock);
    tacl__error(TACL_ERR_REMOTE, INIT, "rank %d aborted the communicator",
                ctx->rank);
    if (ctx->bs != NULL)
        tacl__bootstrap_abort(ctx->bs);
    tacl__ctx_set_fatal(ctx, TACL_ERR_REMOTE);
    pthread_mutex_unlock(&ctx->lock);
    /* Requests the caller still holds keep their executions; the context
     * is freed with its last communicator. */
    if (comm->inflight == 0)
        comm_bury(comm);
    else
        comm->magic = TACL__COMM_DEAD;
    return TACL_OK;
}

/* Make (once) and return a cached derived communicator. */
static tacl_status_t comm_derived(tacl_comm_t comm, int rail,
                                  tacl_comm_t *out_p)
{
    tacl_comm_t *slot;
    tacl_status_t status;

    tacl__last_error_clear();
    status = tacl__comm_check(comm);
    if (status != TACL_OK)
        return status;
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

    if (status != TACL_OK)
        return status;
    if (error_p == NULL)
        return tacl__comm_fail(comm, tacl__error(TACL_ERR_INVALID_ARG, INIT,
                                                 "error_p is NULL"));
    tacl__ctx_progress(comm->ctx);
    *error_p = comm->ctx->fatal != TACL_OK ? comm->ctx->fatal
                                           : comm->async_error;
    return TACL_OK;
}

TACL_EXPORT const char *tacl_comm_last_error(tacl_comm_t comm)
{
    if (comm == NULL || comm->magic != TACL__COMM_ALIVE)
        return tacl__last_error();
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
    pthread_mutex_lock(&comm->ctx->lock);
    *counters_p = comm->counters;
    pthread_mutex_unlock(&comm->ctx->lock);
    return TACL_OK;
}

TACL_EXPORT tacl_status_t tacl_comm_reset_counters(tacl_comm_t comm)
{
    tacl_status_t status = tacl__comm_check(comm);

    if (status != TACL_OK)
        return status;
    pthread_mutex_lock(&comm->ctx->lock);
    for (int t = 0; t < comm->counters.n_transports; t++) {
        comm->counters.transports[t].bytes = 0;
        comm->counters.transports[t].messages = 0;
    }
    for (int c = 0; c < TACL_NUM_LINK_CLASSES; c++) {
        comm->counters.links[c].bytes = 0;
        comm->counters.links[c].messages = 0;
    }
    pthread_mutex_unlock(&comm->ctx->lock);
    return TACL_OK;
}

TACL_EXPORT void tacl_config_print(void *file)
{
    tacl__config_print(file != NULL ? (FILE *)file : stdout);
}

/*
 * Scratch pool: a few buffers per communicator, reused across operations
 * so large collectives do not fault in fresh pages every call.
 *
 * Buffers of a huge page or more are aligned to it and advised huge:
 * peers pin scratch pages for every cross-memory transfer, and a 2 MB
 * page is pinned (and walked by the copy's TLB) once instead of 512
 * times.
 */
#define SCRATCH_HUGE (2u << 20)

/* Whether the kernel gives huge pages to memory advised so: not "never". */
static int thp_available(void)
{
    static _Atomic int known = -1;
    int v = atomic_load(&known);

    if (v < 0) {
        char line[128] = "";
        FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");

        if (f) {
            if (!fgets(line, sizeof(line), f))
                line[0] = '\0';
            fclose(f);
        }
        v = line[0] != '\0' && strstr(line, "[never]") == NULL;
        atomic_store(&known, v);
    }
    return v;
}

static void *scratch_alloc(uint64_t size)
{
    size_t align = size >= SCRATCH_HUGE ? SCRATCH_HUGE : 4096;
    void *ptr;

    if (posix_memalign(&ptr, align, size) != 0)
        return NULL;
#ifdef MADV_HUGEPAGE
    /* Advice only: without transparent huge pages it changes nothing. */
    if (align == SCRATCH_HUGE)
        (void)madvise(ptr, size, MADV_HUGEPAGE);
#endif
    return ptr;
}

static void scratch_free(void *ptr, int shared)
{
    if (shared)
        tacl_mem_free(ptr);
    else
        free(ptr);
}

int tacl__comm_scratch_pinnable(uint64_t size)
{
#ifdef MADV_HUGEPAGE
    return size >= SCRATCH_HUGE && thp_available();
#else
    (void)size;
    return 0;
#endif
}

/* Scratch peers can map, or ordinary scratch. */
static void *scratch_new(uint64_t size, int shared)
{
    void *ptr = NULL;

    if (!shared)
        return scratch_alloc(size);
    return tacl_mem_alloc(&ptr, size, TACL_MEM_HOST) == TACL_OK ? ptr : NULL;
}

void *tacl__comm_scratch_get(tacl_comm_t comm, uint64_t size, int shared)
{
    tacl__scratch_t *best = NULL, *spare = NULL;
    void *ptr;

    if (size == 0)
        size = 64;
    for (int i = 0; i < TACL__SCRATCH_SLOTS; i++) {
        tacl__scratch_t *s = &comm->scratch[i];
        if (s->in_use)
            continue;
        if (s->shared == shared && s->size >= size &&
            (best == NULL || s->size < best->size))
            best = s;
        else if (spare == NULL || s->size < spare->size)
            spare = s;
    }
    if (best == NULL && spare != NULL) {
        scratch_free(spare->ptr, spare->shared);
        spare->ptr = NULL;
        spare->size = 0;
        if ((ptr = scratch_new(size, shared)) == NULL)
            return NULL;
        spare->ptr = ptr;
        spare->size = size;
        spare->shared = shared;
        best = spare;
    }
    if (best != NULL) {
        best->in_use = 1;
        return best->ptr;
    }
    /* Every slot busy: an unpooled buffer, freed on put. */
    return scratch_new(size, shared);
}

void tacl__comm_scratch_put(tacl_comm_t comm, void *ptr, int shared)
{
    for (int i = 0; i < TACL__SCRATCH_SLOTS; i++) {
        if (comm->scratch[i].ptr == ptr && comm->scratch[i].in_use) {
            comm->scratch[i].in_use = 0;
            return;
        }
    }
    scratch_free(ptr, shared);
}
