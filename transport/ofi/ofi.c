/*
 * The ofi transport: tagged messages between nodes through libfabric's
 * reliable-datagram endpoints.  DESIGN.md, "Transports": ofi serves
 * peers on other nodes (AWS EFA; libfabric's tcp provider anywhere) and
 * sleeps on the completion queue's file descriptor instead of spinning.
 *
 * This file holds the ops table and sits on top of the transport's other
 * files (none of them calls it): it sets an instance up and tears it
 * down, and its progress and wait drive ofi_ops.c and ofi_peer.c.
 *
 * Setup is collective and takes two exchanges, done by every rank even
 * when its own setup failed, so that none waits alone: first every
 * rank's "ok" flag, the length of its endpoint name and the provider it
 * chose, then the names, padded to the longest, which go into the
 * address vector in rank order.  Ranks that chose different providers
 * cannot talk: every rank fails, naming the first that differs.  If
 * every rank is on the same node nobody needs the network, and no
 * libfabric resource is made (every rank sees the same node ids, so all
 * take that branch).
 *
 * The completion queue is opened with a file descriptor to wait on
 * (FI_WAIT_FD); wait() asks fi_trywait() whether sleeping is safe, under
 * the instance's lock, and sleeps in poll() without it.  A provider
 * without one gets naps of TACL_OFI_NAP_US instead.
 *
 * Receives from any source (the probe slot, ofi_ops.c): libfabric's
 * tagged peek and claim, which ofi_rxm over tcp (libfabric 1.17) serves
 * from its queue of unexpected messages.  A peek (fi_trecvmsg with
 * FI_PEEK | FI_CLAIM, the source bits of the wire tag ignored) takes the
 * oldest message with the tag from any sender out of the provider's
 * matching, so no receive can take it meanwhile; its completion carries
 * the wire tag, hence the sender's rank, and the length.  The message
 * waits on the claimed list until a receive for its sender and tag is
 * posted, which names the peek's fi_context with FI_CLAIM to take it.
 * A peek answers through the completion queue; ofi_rxm writes the
 * answer as the peek is posted, so probe() reads the queue right after
 * and reports a message found in the same round, and the queue is left
 * empty for wait() to sleep on (a provider that answers later is read
 * by the next progress, and probed again the round after).  The
 * oldest message of each sender and tag is the one claimed (FI_ORDER_SAS
 * and the executor, which posts no receive for a sender and tag held
 * behind one from any source), so (source, tag) order holds.  A
 * provider that refuses FI_PEEK (it has no capability bit to ask
 * fi_getinfo for) fails each receive from any source with
 * TACL_ERR_UNSUPPORTED and a message, never a hang; a failure of the
 * instance drops what was claimed with the endpoint.  Device memory is
 * not served yet: the instance lists host memory only, and the choice of
 * a transport sends device buffers elsewhere or refuses them.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h"
#include "config.h"
#include "log.h"
#include "ofi.h"

/* How long close() lets goodbyes go out. */
#define TACL_OFI_CLOSE_MAX_S 1.0
/* Longest sleep while the backlog waits, or without a wait descriptor. */
#define TACL_OFI_NAP_US 200
/* Queue sizes assumed where a provider reports none. */
#define TACL_OFI_DEFAULT_SIZE 256

/** One rank's record in the first setup exchange. */
typedef struct {
    uint32_t ok;
    uint32_t name_len;
    char provider[64];
} ofi_record_t;

static int any_remote_rank(const tacl__tl_params_t *params)
{
    for (int r = 1; r < params->nranks; ++r)
        if (strcmp(params->node_ids[r], params->node_ids[0]) != 0)
            return 1;
    return 0;
}

static tacl_status_t fi_error(tacl__ofi_t *ofi, const char *what, int rc)
{
    return tacl__error(rc == -FI_ENOMEM ? TACL_ERR_NO_MEMORY
                                        : TACL_ERR_SYSTEM,
                       NET, "rank %d: %s failed with provider %s: %s",
                       ofi->base.rank, what, ofi->choice.provider,
                       tacl__ofi_strerror(rc));
}

/* The completion queue, with a descriptor to sleep on where possible. */
static tacl_status_t open_cq(tacl__ofi_t *ofi)
{
    struct fi_cq_attr attr = {0};
    int rc;

    attr.format = FI_CQ_FORMAT_TAGGED;
    attr.size = (size_t)(ofi->tx_size + ofi->rx_size + 64);
    attr.wait_obj = FI_WAIT_FD;
    rc = fi_cq_open(ofi->domain, &attr, &ofi->cq, NULL);
    if (rc == 0 &&
        fi_control(&ofi->cq->fid, FI_GETWAIT, &ofi->cq_fd) == 0)
        return TACL_OK;
    if (rc == 0)
        fi_close(&ofi->cq->fid);
    TACL_INFO(NET, "rank %d: provider %s has no completion descriptor to "
              "sleep on; waits nap %d us", ofi->base.rank,
              ofi->choice.provider, TACL_OFI_NAP_US);
    ofi->cq_fd = -1;
    attr.wait_obj = FI_WAIT_NONE;
    rc = fi_cq_open(ofi->domain, &attr, &ofi->cq, NULL);
    if (rc != 0) {
        ofi->cq = NULL;
        return fi_error(ofi, "fi_cq_open", rc);
    }
    return TACL_OK;
}

/* Fabric, domain, queue, address vector and endpoint; the endpoint's
 * name goes to name/len_p.  Leaves what it made for close. */
static tacl_status_t setup_endpoint(tacl__ofi_t *ofi, void *name,
                                    size_t *len_p)
{
    struct fi_info *info;
    struct fi_av_attr av_attr = {0};
    tacl_status_t status;
    int rc;

    status = tacl__ofi_choose(&ofi->info, &ofi->choice);
    if (status != TACL_OK)
        return status;
    info = ofi->info;
    ofi->need_mr = (info->domain_attr->mr_mode & FI_MR_LOCAL) != 0 ||
                   (info->mode & FI_LOCAL_MR) != 0;
    ofi->tx_size = info->tx_attr->size ? info->tx_attr->size
                                       : TACL_OFI_DEFAULT_SIZE;
    ofi->rx_size = info->rx_attr->size ? info->rx_attr->size
                                       : TACL_OFI_DEFAULT_SIZE;
    ofi->max_msg = info->ep_attr->max_msg_size;
    rc = fi_fabric(info->fabric_attr, &ofi->fabric, NULL);
    if (rc != 0) {
        ofi->fabric = NULL;
        return fi_error(ofi, "fi_fabric", rc);
    }
    rc = fi_domain(ofi->fabric, info, &ofi->domain, NULL);
    if (rc != 0) {
        ofi->domain = NULL;
        return fi_error(ofi, "fi_domain", rc);
    }
    status = open_cq(ofi);
    if (status != TACL_OK)
        return status;
    av_attr.type = FI_AV_TABLE;
    av_attr.count = (size_t)ofi->base.nranks;
    rc = fi_av_open(ofi->domain, &av_attr, &ofi->av, NULL);
    if (rc != 0) {
        ofi->av = NULL;
        return fi_error(ofi, "fi_av_open", rc);
    }
    rc = fi_endpoint(ofi->domain, info, &ofi->ep, NULL);
    if (rc != 0) {
        ofi->ep = NULL;
        return fi_error(ofi, "fi_endpoint", rc);
    }
    rc = fi_ep_bind(ofi->ep, &ofi->cq->fid, FI_TRANSMIT | FI_RECV);
    if (rc == 0)
        rc = fi_ep_bind(ofi->ep, &ofi->av->fid, 0);
    if (rc == 0)
        rc = fi_enable(ofi->ep);
    if (rc != 0)
        return fi_error(ofi, "binding and enabling the endpoint", rc);
    rc = fi_getname(&ofi->ep->fid, name, len_p);
    if (rc != 0)
        return fi_error(ofi, "fi_getname", rc);
    return TACL_OK;
}

/* Every rank's name into the address vector, at index = rank. */
static tacl_status_t insert_names(tacl__ofi_t *ofi, const uint8_t *names,
                                  size_t stride)
{
    for (int r = 0; r < ofi->base.nranks; ++r) {
        int rc = fi_av_insert(ofi->av, names + (size_t)r * stride, 1,
                              &ofi->peers[r].addr, 0, NULL);

        if (rc != 1)
            return tacl__error(TACL_ERR_SYSTEM, NET, "rank %d cannot add "
                               "rank %d's address (provider %s): %s",
                               ofi->base.rank, r, ofi->choice.provider,
                               tacl__ofi_strerror(rc < 0 ? rc : -FI_EINVAL));
    }
    return TACL_OK;
}

/* The two exchanges; every rank does both unless the first fails. */
static tacl_status_t exchange_names(tacl__ofi_t *ofi,
                                    const tacl__tl_params_t *params,
                                    tacl_status_t local, const void *name,
                                    size_t len)
{
    size_t n = (size_t)ofi->base.nranks, stride = 8;
    ofi_record_t *recs;
    uint8_t *names = NULL;
    tacl_status_t status;
    int me = ofi->base.rank;

    recs = calloc(n, sizeof(*recs));
    if (!recs)
        return tacl__error(TACL_ERR_NO_MEMORY, NET, "out of memory");
    recs[me].ok = local == TACL_OK;
    recs[me].name_len = local == TACL_OK ? (uint32_t)len : 0;
    snprintf(recs[me].provider, sizeof(recs[me].provider), "%s",
             ofi->choice.provider);
    status = params->exchange(params->exchange_ctx, recs, sizeof(*recs));
    if (status != TACL_OK)
        goto out_free;
    for (int r = 0; r < ofi->base.nranks; ++r) {
        if (!recs[r].ok) {
            status = local != TACL_OK ? local :
                tacl__error(TACL_ERR_REMOTE, NET, "rank %d could not set "
                            "up libfabric; see its log", r);
            goto out_free;
        }
        if (strcmp(recs[r].provider, recs[me].provider) != 0) {
            status = tacl__error(TACL_ERR_INVALID_USAGE, NET, "rank %d "
                                 "chose libfabric provider %s, rank %d %s; "
                                 "set TACL_OFI_PROVIDER alike on every "
                                 "node", r, recs[r].provider, me,
                                 recs[me].provider);
            goto out_free;
        }
        stride = TACL_MAX(stride, (size_t)recs[r].name_len);
    }
    stride = TACL_DIV_UP(stride, 8) * 8;
    names = calloc(n, stride);
    if (!names) {
        /* The others wait in the second exchange: a local failure here
         * cannot be told to them, so the bootstrap's timeout does. */
        status = tacl__error(TACL_ERR_NO_MEMORY, NET, "out of memory for "
                             "%d endpoint names", ofi->base.nranks);
        goto out_free;
    }
    memcpy(names + (size_t)me * stride, name, len);
    status = params->exchange(params->exchange_ctx, names, stride);
    if (status == TACL_OK)
        status = insert_names(ofi, names, stride);

out_free:
    free(names);
    free(recs);
    return status;
}

static tacl_status_t ofi_send(tacl__tl_t *tl, tacl__tl_op_t *op)
{
    return tacl__ofi_post_op((tacl__ofi_t *)tl, op, 0);
}

static tacl_status_t ofi_recv(tacl__tl_t *tl, tacl__tl_op_t *op)
{
    return tacl__ofi_post_op((tacl__ofi_t *)tl, op, 1);
}

static int ofi_probe(tacl__tl_t *tl, uint64_t tag, int *peer, uint64_t *len)
{
    return tacl__ofi_probe((tacl__ofi_t *)tl, tag, peer, len);
}

static void ofi_fail_pending(tacl__tl_base_t *base, tacl_status_t status)
{
    tacl__ofi_fail_pending((tacl__ofi_t *)base, status);
}

static int ofi_progress(tacl__tl_t *tl)
{
    tacl__ofi_t *ofi = (tacl__ofi_t *)tl;
    int events = tacl__ofi_poll(ofi);

    events += tacl__ofi_check_peers(ofi);
    return tacl__tl_base_finish(&ofi->base, events);
}

static tacl_status_t ofi_wait(tacl__tl_t *tl, int64_t timeout_us)
{
    tacl__ofi_t *ofi = (tacl__ofi_t *)tl;
    struct timespec ts;
    struct fid *fids[1];
    int rc;

    if (!ofi->info)
        return TACL_OK;
    timeout_us = tacl__tl_base_wait_us(&ofi->base, timeout_us);
    /* Armed under the instance's lock (another thread may progress the
     * queue); only the poll is outside. */
    tacl__tl_lock(ofi->base.lock);
    if (tacl__tl_base_ready(&ofi->base) || ofi->ep == NULL) {
        tacl__tl_unlock(ofi->base.lock);
        return TACL_OK;
    }
    /* Peers are checked (and pinged) on a clock, not on an event. */
    if (ofi->nops > 0)
        timeout_us = TACL_MIN(timeout_us, (int64_t)(ofi->ping_ns / 4000));
    if (ofi->backlog_tx.head || ofi->backlog_rx.head || ofi->cq_fd < 0) {
        tacl__tl_unlock(ofi->base.lock);
        timeout_us = TACL_MIN(timeout_us, TACL_OFI_NAP_US);
        ts.tv_sec = 0;
        ts.tv_nsec = (long)timeout_us * 1000;
        nanosleep(&ts, NULL);
        return TACL_OK;
    }
    fids[0] = &ofi->cq->fid;
    rc = fi_trywait(ofi->fabric, fids, 1);
    tacl__tl_unlock(ofi->base.lock);
    if (rc == -FI_EAGAIN)
        return TACL_OK;
    if (rc != 0) {
        /* ofi_rxm refuses while a connection it waits on is broken: the
         * peers are checked on the clock, so nap instead. */
        timeout_us = TACL_MIN(timeout_us, TACL_OFI_NAP_US);
        ts.tv_sec = 0;
        ts.tv_nsec = (long)timeout_us * 1000;
        nanosleep(&ts, NULL);
        return TACL_OK;
    }
    return tacl__tl_base_sleep_fd(&ofi->base, ofi->cq_fd, timeout_us,
                                  "the completion queue");
}

static void ofi_cancel_all(tacl__tl_t *tl, tacl_status_t status)
{
    tacl__ofi_t *ofi = (tacl__ofi_t *)tl;

    /* Ending what the provider holds closes the endpoint: the instance
     * has failed from then on. */
    if (ofi->nops > 0)
        tacl__tl_base_mark_failed(&ofi->base, status);
    tacl__tl_base_cancel_all(tl, status);
}

/*
 * Endpoints a failure abandoned (ofi_ops.c, tacl__ofi_fail_pending), kept
 * reachable to the end of the process: they are not leaks but resources
 * held on purpose.  Under a mutex, as instances close on any thread.
 */
typedef struct abandoned {
    struct abandoned *next;
    struct fid_ep *ep;
} abandoned_t;

static abandoned_t *abandoned_eps;
static pthread_mutex_t abandoned_lock = PTHREAD_MUTEX_INITIALIZER;

static void keep_abandoned(struct fid_ep *ep)
{
    abandoned_t *a = malloc(sizeof(*a));

    if (a == NULL)
        return; /* unreachable then, but still never closed */
    a->ep = ep;
    pthread_mutex_lock(&abandoned_lock);
    a->next = abandoned_eps;
    abandoned_eps = a;
    pthread_mutex_unlock(&abandoned_lock);
}

static void ofi_close(tacl__tl_t *tl)
{
    tacl__ofi_t *ofi = (tacl__ofi_t *)tl;
    tacl__ofi_req_t *req;

    if (ofi->ep != NULL && ofi->nops > 0) {
        TACL_WARN(NET, "rank %d: closing with %llu operations pending; "
                  "they end with TACL_ERR_INVALID_USAGE", ofi->base.rank,
                  (unsigned long long)ofi->nops);
        ofi_cancel_all(tl, TACL_ERR_INVALID_USAGE);
    }
    if (ofi->ep != NULL)
        tacl__ofi_say_goodbye(ofi, TACL_MIN(ofi->base.timeout_s,
                                            TACL_OFI_CLOSE_MAX_S));
    /* Control receives still posted end with the endpoint. */
    ofi->closing = 1;
    tacl__ofi_fail_pending(ofi, TACL_ERR_INVALID_USAGE);
    tacl__tl_opq_run(&ofi->base.done);
    if (ofi->abandoned != NULL) {
        /* What the open endpoint uses stays too (ofi_ops.c says why). */
        TACL_INFO(NET, "rank %d: the failed endpoint and its resources "
                  "are left to the end of the process", ofi->base.rank);
        keep_abandoned(ofi->abandoned);
        ofi->av = NULL;
        ofi->cq = NULL;
        ofi->domain = NULL;
        ofi->fabric = NULL;
    }
    if (ofi->av)
        fi_close(&ofi->av->fid);
    if (ofi->cq)
        fi_close(&ofi->cq->fid);
    if (ofi->domain)
        fi_close(&ofi->domain->fid);
    if (ofi->fabric)
        fi_close(&ofi->fabric->fid);
    if (ofi->info)
        fi_freeinfo(ofi->info);
    while ((req = ofi->free_reqs) != NULL) {
        ofi->free_reqs = req->next;
        free(req);
    }
    free(ofi->peers);
    tacl__tl_base_free(&ofi->base);
}

static tacl_status_t ofi_init(const tacl__tl_params_t *params,
                              tacl__tl_t **tl_p)
{
    tacl__tl_base_t *base;
    tacl__ofi_t *ofi;
    tacl_status_t status, local;
    uint8_t name[256];
    size_t len = sizeof(name);
    double ping_s;

    if (params->nranks < 1 || params->nranks > TACL__TL_WIRE_MAX_RANKS ||
        params->rank < 0 || params->rank >= params->nranks)
        return tacl__error(TACL_ERR_INVALID_ARG, NET, "ofi serves 1 to %d "
                           "ranks, not rank %d of %d",
                           TACL__TL_WIRE_MAX_RANKS, params->rank,
                           params->nranks);
    status = tacl__tl_base_new(&tacl__tl_ofi_ops, sizeof(*ofi), params,
                               TACL_SUBSYS_NET, ofi_fail_pending, &base);
    if (status != TACL_OK)
        return status;
    ofi = (tacl__ofi_t *)base;
    ofi->cq_fd = -1;
    ofi->peers = calloc((size_t)params->nranks, sizeof(*ofi->peers));
    if (!ofi->peers) {
        status = tacl__error(TACL_ERR_NO_MEMORY, NET, "out of memory for "
                             "%d peers", params->nranks);
        goto err_close;
    }
    ping_s = TACL_MIN(1.0, TACL_MAX(0.1, ofi->base.timeout_s / 10));
    ofi->ping_ns = (uint64_t)(ping_s * 1e9);
    ofi->dead_ns = (uint64_t)(ofi->base.timeout_s / 4 * 1e9);
    if (!any_remote_rank(params)) {
        TACL_INFO(NET, "rank %d: every rank is on this node; ofi idle",
                  ofi->base.rank);
        *tl_p = &ofi->base.super;
        return TACL_OK;
    }
    local = setup_endpoint(ofi, name, &len);
    if (local == TACL_OK && len > sizeof(name))
        local = tacl__error(TACL_ERR_INTERNAL, NET, "provider %s has "
                            "endpoint names of %zu bytes",
                            ofi->choice.provider, len);
    status = exchange_names(ofi, params, local, name, len);
    if (status == TACL_OK)
        status = tacl__ofi_ctrl_start(ofi);
    if (status != TACL_OK)
        goto err_close;
    TACL_INFO(NET, "rank %d: ofi ready: provider %s, fabric %s, domain %s "
              "(%s); queues %llu/%llu, %s registration, %zu-byte names",
              ofi->base.rank, ofi->choice.provider, ofi->choice.fabric,
              ofi->choice.domain, ofi->choice.why,
              (unsigned long long)ofi->tx_size,
              (unsigned long long)ofi->rx_size,
              ofi->need_mr ? "with" : "no", len);
    *tl_p = &ofi->base.super;
    return TACL_OK;

err_close:
    ofi_close(&ofi->base.super);
    return status;
}

static int ofi_reachable(tacl__tl_t *tl, int peer)
{
    tacl__ofi_t *ofi = (tacl__ofi_t *)tl;

    return ofi->info &&
           tacl__tl_base_where(&ofi->base, peer) == TACL__TL_PEER_NET;
}

const tacl__transport_ops_t tacl__tl_ofi_ops = {
    .size = sizeof(tacl__transport_ops_t),
    .name = "ofi",
    .caps = TACL__TL_CAP_HOST | TACL__TL_CAP_PROBE,
    .reach = TACL__TL_PEER_NET,
    .init = ofi_init,
    .reachable = ofi_reachable,
    .send = ofi_send,
    .recv = ofi_recv,
    .progress = ofi_progress,
    .wait = ofi_wait,
    .probe = ofi_probe,
    .cancel_all = ofi_cancel_all,
    .close = ofi_close,
};
