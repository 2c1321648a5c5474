/*
 * Contexts: creation (bootstrap, node identities, topology, transports)
 * and their reference count.  See context.h.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "config.h"
#include "context.h"
#include "log.h"
#include "netsel.h"
#include "tacl_build_config.h"

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
    tacl__dev_destroy(ctx->dev);
    if (ctx->bs != NULL)
        tacl__bootstrap_fini(ctx->bs);
    pthread_cond_destroy(&ctx->progress_cv);
    pthread_mutex_destroy(&ctx->lock);
    tacl__topo_fini(&ctx->topo);
    free(ctx->node_ids);
    free(ctx->node_of);
    free(ctx->tl_of);
    free(ctx->engine_spare);
    free(ctx);
}

/*
 * The network transport (netsel.h), agreed by every rank: ranks that
 * chose differently could not talk, so they fail, naming the first rank
 * that differs.  Only a context with ranks on several nodes asks.
 */
static tacl_status_t ctx_network(tacl__ctx_t *ctx,
                                 const tacl__transport_ops_t **ops_p)
{
    tacl__net_choice_t choice = {TACL__NET_NONE, "one node"};
    tacl_status_t status = TACL_OK;
    int32_t *all;

    if (ctx->n_nodes > 1)
        status = tacl__net_choose(&choice);
    all = calloc((size_t)ctx->nranks, sizeof(*all));
    if (all == NULL)
        return tacl__error(TACL_ERR_NO_MEMORY, INIT, "out of memory");
    /* A failed choice still joins the exchange, as -1. */
    all[ctx->rank] = status == TACL_OK ? (int32_t)choice.net : -1;
    if (ctx->n_nodes > 1) {
        tacl_status_t ex = tacl__bootstrap_allgather(ctx->bs, all,
                                                     sizeof(*all));
        if (status == TACL_OK)
            status = ex;
    }
    for (int r = 0; status == TACL_OK && r < ctx->nranks; r++) {
        if (all[r] == all[ctx->rank])
            continue;
        status = all[r] < 0
            ? tacl__error(TACL_ERR_REMOTE, INIT, "rank %d could not choose "
                          "a network transport; see its log", r)
            : tacl__error(TACL_ERR_INVALID_USAGE, INIT, "rank %d chose "
                          "network transport %s, rank %d %s (%s); set "
                          "TACL_NET alike on every node", r,
                          tacl__net_name((tacl__net_t)all[r]), ctx->rank,
                          tacl__net_name(choice.net), choice.why);
    }
    free(all);
    if (status != TACL_OK)
        return status;
    if (ctx->n_nodes > 1)
        TACL_INFO(INIT, "rank %d: network transport %s (%s)", ctx->rank,
                  tacl__net_name(choice.net), choice.why);
    *ops_p = tacl__net_ops(choice.net);
    return TACL_OK;
}

static tacl_status_t ctx_transports(tacl__ctx_t *ctx)
{
    /* In order of preference: the first that reaches a peer and moves
     * the message's memory type serves it, so shm keeps intra-node host
     * traffic, cuda_ipc (CUDA memory only) intra-node device traffic, and
     * the network (netsel.h's choice, last) takes the rest. */
    static const tacl__transport_ops_t *const builtin[] = {
        &tacl__tl_self_ops,
#if TACL_HAVE_CUDA
        &tacl__tl_cuda_ipc_ops,
#endif
        &tacl__tl_shm_ops,
    };
    const tacl__transport_ops_t *net = NULL;
    const char **ids;
    tacl__tl_params_t params;
    tacl_status_t status;

    status = ctx_network(ctx, &net);
    if (status != TACL_OK)
        return status;
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
        .lock = &ctx->lock,
    };
    for (size_t i = 0; i <= TACL_ARRAY_SIZE(builtin); i++) {
        const tacl__transport_ops_t *ops =
            i < TACL_ARRAY_SIZE(builtin) ? builtin[i] : net;

        if (ops == NULL)
            continue;
        status = ops->init(&params, &ctx->tls[ctx->ntl]);
        if (status != TACL_OK)
            break;
        ctx->ntl++;
    }
    free(ids);
    if (status != TACL_OK)
        return status;
    /* The transport of each peer for host memory; -1: none reaches it. */
    for (int r = 0; r < ctx->nranks; r++) {
        tacl__tl_why_t why;
        int same = ctx->node_of[r] == ctx->node_of[ctx->rank];

        ctx->tl_of[r] = (int8_t)tacl__tl_select(
            ctx->tls, ctx->ntl, tacl__tl_where(r, ctx->rank, same),
            TACL_MEM_HOST, &why);
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
        if (status != TACL_OK) {
            /* The parser's reason is an argument error, logged at INFO
             * only: a file the user named deserves a warning. */
            TACL_WARN(TOPO, "TACL_TOPO_FILE \"%s\" cannot be used: %s",
                      tacl__config_str(TACL_CFG_TOPO_FILE),
                      tacl__last_error());
            return status;
        }
        memcpy(topo->machine, file.machine, sizeof(topo->machine));
        memcpy(topo->link, file.link, sizeof(topo->link));
        /* The simulator's figures (fabric and kernel lines). */
        topo->fabric_oversub = file.fabric_oversub;
        topo->msg_overhead = file.msg_overhead;
        memcpy(topo->kernel_bw, file.kernel_bw, sizeof(topo->kernel_bw));
        topo->has_fabric = file.has_fabric;
        topo->has_kernel = file.has_kernel;
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

/*
 * The wait policy's settings (wait.h), read once: whether this node runs
 * more ranks than it has cores (a waiting rank must then give its core
 * away at once, since the rank it waits for may be the one that needs
 * it), TACL_SHM_SPIN and TACL_SHM_YIELD_US.
 */
static void ctx_wait_settings(tacl__ctx_t *ctx)
{
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int local = 0;

    for (int r = 0; r < ctx->nranks; r++)
        local += ctx->node_of[r] == ctx->node_of[ctx->rank];
    ctx->local_ranks = local;
    ctx->oversubscribed = ncpu > 0 && local > ncpu;
    ctx->wait_spin = TACL_MAX(tacl__config_int(TACL_CFG_SHM_SPIN), 0);
    ctx->bg_max_hold_ns =
        (uint64_t)TACL_MAX(tacl__config_int(TACL_CFG_BG_MAX_HOLD_MS), 0) *
        1000000ull;
    ctx->bg_quiet_ns =
        (uint64_t)TACL_MAX(tacl__config_int(TACL_CFG_BG_QUIET_US), 0) * 1000u;
    ctx->wait_yield_ns =
        (uint64_t)TACL_MAX(tacl__config_int(TACL_CFG_SHM_YIELD_US), 0) *
        1000u;
}

tacl_status_t tacl__ctx_create(const tacl_unique_id_t *id, int rank,
                               int nranks, double timeout_s,
                               tacl__ctx_t **ctx_p)
{
    tacl__ctx_t *ctx;
    tacl_status_t status;

    ctx = calloc(1, sizeof(*ctx));
    if (ctx == NULL)
        return tacl__error(TACL_ERR_NO_MEMORY, INIT, "out of memory");
    ctx->refcount = 1;
    ctx->rank = rank;
    /* The communicator's device, as NCCL's: current in this thread. */
    ctx->cuda_device = tacl__dev_current(ctx->cuda_why,
                                         sizeof(ctx->cuda_why));
    ctx->nranks = nranks;
    ctx->timeout_s = timeout_s > 0 ? timeout_s
                                   : tacl__config_double(TACL_CFG_TIMEOUT);
    if (!(ctx->timeout_s > 0))
        ctx->timeout_s = 60;
    pthread_mutex_init(&ctx->lock, NULL);
    {
        /* Timed waits of the progress thread count on the monotonic
         * clock, as every other deadline here. */
        pthread_condattr_t ca;

        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&ctx->progress_cv, &ca);
        pthread_condattr_destroy(&ca);
    }
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
    ctx_wait_settings(ctx);
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

void tacl__ctx_retain(tacl__ctx_t *ctx)
{
    pthread_mutex_lock(&ctx->lock);
    ctx->refcount++;
    pthread_mutex_unlock(&ctx->lock);
}

void tacl__ctx_release(tacl__ctx_t *ctx)
{
    int last;

    pthread_mutex_lock(&ctx->lock);
    last = --ctx->refcount == 0;
    pthread_mutex_unlock(&ctx->lock);
    if (last)
        ctx_free(ctx);
}
