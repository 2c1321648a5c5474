/*
 * The ucx transport: tagged messages between nodes through UCX's ucp
 * layer.  DESIGN.md, "Transports": ucx serves peers on other nodes and
 * sleeps on the worker's event descriptor instead of spinning.
 *
 * This file holds the ops table and sits on top of the transport's other
 * files (none of them calls it).  Its send and recv hand a non-empty
 * device buffer to the staging (ucx_cuda.c) and any other to the host
 * data path (ucx_ops.c); its progress, wait and failure add the
 * staging's part to the host one.
 *
 * It also sets an instance up and tears it down.  Setup is collective
 * and takes two exchanges, done by every rank even when its own UCX setup
 * failed, so that none waits alone: first every rank's "ok" flag and
 * worker address length, then the addresses padded to the longest.  If
 * every rank is on the same node nobody needs UCX, and no UCX resource is
 * created (every rank sees the same node ids, so all take that branch).
 * Endpoints are created on first use (ucx_ep.c); close() flushes what
 * was sent and then closes them.
 *
 * An instance moves CUDA device memory too (staged through pinned host
 * chunks, ucx_cuda.c) when tacl is built with CUDA and a device is usable
 * at init; its ops are then a copy of tacl__tl_ucx_ops with that
 * capability, which tacl__tl_select reads from the instance.
 * UCX's own environment (UCX_TLS, UCX_NET_DEVICES, ...) is read as is,
 * with one default changed where no RDMA device exists (see
 * rndv_thresh).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common.h"
#include "config.h"
#include "log.h"
#include "ucx.h"

/* How long close() lets endpoints flush before it forces them shut. */
#define TACL_UCX_CLOSE_MAX_S 3.0
/* Longest sleep of wait() while device messages are being staged. */
#define TACL_UCX_STAGE_POLL_US 20

/** One rank's record in the first setup exchange. */
typedef struct {
    uint32_t ok;
    uint32_t addr_len;
} ucx_record_t;

static int any_remote_rank(const tacl__tl_params_t *params)
{
    for (int r = 1; r < params->nranks; ++r)
        if (strcmp(params->node_ids[r], params->node_ids[0]) != 0)
            return 1;
    return 0;
}

static tacl_status_t ucs_to_tacl(ucs_status_t status)
{
    return status == UCS_ERR_NO_MEMORY ? TACL_ERR_NO_MEMORY
                                       : TACL_ERR_INTERNAL;
}

/* Whether this machine has an RDMA device UCX could use. */
static int rdma_present(void)
{
    DIR *dir = opendir("/sys/class/infiniband");
    struct dirent *ent;
    int found = 0;

    if (dir == NULL)
        return 0;
    while (!found && (ent = readdir(dir)) != NULL)
        found = ent->d_name[0] != '.';
    closedir(dir);
    return found;
}

/*
 * Over TCP, UCX's rendezvous protocol stalls traffic in the other
 * direction: the receiver's reply (RTR) to a request travels on the same
 * byte stream as the data that receiver is itself sending, so it waits
 * behind every byte already queued, and two ranks exchanging large
 * messages take turns on a full-duplex link (seen at 1 Gbit/s: each rank
 * of a pair sent its 16 MB, then the other did, 1.5x the time of both at
 * once).  The eager protocol needs no reply, so without an RDMA device
 * (where rendezvous means zero-copy RDMA and is worth its handshake) tacl
 * raises the rendezvous threshold unless UCX_RNDV_THRESH says otherwise.
 * tacl's schedules post their receives ahead, so eager data rarely waits
 * unexpected.  TACL_UCX_RNDV_THRESH replaces tacl's choice with a value.
 *
 * UCX reads UCX_RNDV_THRESH itself, in ucp_config_read(), and offers no
 * way to ask whether a setting came from the environment or is its
 * default; so tacl asks the configuration module whether the variable is
 * set, and changes only UCX's default.
 */
static void rndv_thresh(ucp_config_t *config)
{
    const char *value = tacl__config_str(TACL_CFG_UCX_RNDV_THRESH);
    int auto_value = strcasecmp(value, "auto") == 0;
    ucs_status_t st;

    if (auto_value) {
        if (tacl__config_env("UCX_RNDV_THRESH") != NULL || rdma_present())
            return;
        value = "inf";
    }
    st = ucp_config_modify(config, "RNDV_THRESH", value);
    if (st != UCS_OK)
        TACL_WARN(NET, "cannot set UCX's rendezvous threshold to %s: %s; %s",
                  value, ucs_status_string(st),
                  auto_value ? "large messages may take turns on TCP links"
                             : "check TACL_UCX_RNDV_THRESH");
    else if (auto_value)
        TACL_INFO(NET, "no RDMA device: UCX_RNDV_THRESH=inf (eager "
                  "protocol over TCP)");
    else
        TACL_INFO(NET, "UCX_RNDV_THRESH=%s from TACL_UCX_RNDV_THRESH",
                  value);
}

/* Create the context and worker; leaves what it made for close. */
static tacl_status_t setup_worker(tacl__ucx_t *ucx, void **addr_p,
                                  size_t *len_p)
{
    ucp_params_t params = {0};
    ucp_worker_params_t wparams = {0};
    ucp_config_t *config;
    ucp_address_t *addr;
    ucs_status_t st;

    st = ucp_config_read(NULL, NULL, &config);
    if (st != UCS_OK)
        return tacl__error(ucs_to_tacl(st), NET, "cannot read the UCX "
                           "configuration: %s; check the UCX_* variables",
                           ucs_status_string(st));
    rndv_thresh(config);
    params.field_mask = UCP_PARAM_FIELD_FEATURES |
                        UCP_PARAM_FIELD_MT_WORKERS_SHARED |
                        UCP_PARAM_FIELD_ESTIMATED_NUM_EPS;
    params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
    params.mt_workers_shared = 0;
    params.estimated_num_eps = (size_t)ucx->base.nranks;
    st = ucp_init(&params, config, &ucx->context);
    ucp_config_release(config);
    if (st != UCS_OK) {
        ucx->context = NULL;
        return tacl__error(ucs_to_tacl(st), NET, "ucp_init failed: %s; "
                           "check UCX_TLS and UCX_NET_DEVICES",
                           ucs_status_string(st));
    }
    /*
     * Serialized rather than single: tacl calls a worker from one thread
     * at a time (under the context lock) but not always the same thread.
     */
    wparams.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wparams.thread_mode = UCS_THREAD_MODE_SERIALIZED;
    st = ucp_worker_create(ucx->context, &wparams, &ucx->worker);
    if (st != UCS_OK) {
        ucx->worker = NULL;
        return tacl__error(ucs_to_tacl(st), NET, "cannot create a UCX "
                           "worker: %s", ucs_status_string(st));
    }
    st = ucp_worker_get_efd(ucx->worker, &ucx->efd);
    if (st != UCS_OK)
        return tacl__error(ucs_to_tacl(st), NET, "the UCX worker has no "
                           "event descriptor: %s", ucs_status_string(st));
    st = ucp_worker_get_address(ucx->worker, &addr, len_p);
    if (st != UCS_OK)
        return tacl__error(ucs_to_tacl(st), NET, "cannot get the UCX "
                           "worker address: %s", ucs_status_string(st));
    *addr_p = addr;
    return TACL_OK;
}

/* The two exchanges; every rank does both unless the first fails. */
static tacl_status_t exchange_addresses(tacl__ucx_t *ucx,
                                        const tacl__tl_params_t *params,
                                        tacl_status_t local, void *addr,
                                        size_t len)
{
    size_t n = (uint32_t)ucx->base.nranks, stride = 8;
    ucx_record_t *recs;
    tacl_status_t status;

    recs = calloc(n, sizeof(*recs));
    if (!recs)
        return tacl__error(TACL_ERR_NO_MEMORY, NET, "out of memory");
    recs[ucx->base.rank].ok = local == TACL_OK;
    recs[ucx->base.rank].addr_len = local == TACL_OK ? (uint32_t)len : 0;
    status = params->exchange(params->exchange_ctx, recs, sizeof(*recs));
    if (status != TACL_OK)
        goto out_free;
    for (int r = 0; r < ucx->base.nranks; ++r) {
        if (!recs[r].ok) {
            status = local != TACL_OK ? local :
                tacl__error(TACL_ERR_REMOTE, NET, "rank %d could not set "
                            "up UCX; see its log", r);
            goto out_free;
        }
        stride = TACL_MAX(stride, (size_t)recs[r].addr_len);
    }
    stride = TACL_DIV_UP(stride, 8) * 8;
    ucx->addr_lens = calloc(n, sizeof(uint32_t));
    ucx->addrs = calloc(n, stride);
    if (!ucx->addr_lens || !ucx->addrs) {
        /* The others wait in the second exchange: a local failure here
         * cannot be told to them, so the bootstrap's timeout does. */
        status = tacl__error(TACL_ERR_NO_MEMORY, NET, "out of memory for "
                             "%d worker addresses", ucx->base.nranks);
        goto out_free;
    }
    for (int r = 0; r < ucx->base.nranks; ++r)
        ucx->addr_lens[r] = recs[r].addr_len;
    ucx->addr_stride = stride;
    memcpy(ucx->addrs + (size_t)ucx->base.rank * stride, addr, len);
    status = params->exchange(params->exchange_ctx, ucx->addrs, stride);

out_free:
    free(recs);
    return status;
}

/*
 * The send and recv slots.  A non-empty device buffer, once checked, goes
 * to the staging (ucx_cuda.c); any other buffer to the host data path
 * (ucx_ops.c), which checks it itself.
 */
/*
 * A message probe() claimed (ucp_tag_probe_nb with remove): UCX hands it
 * over by its handle to the receive posted next for its sender and tag
 * (ucp_tag_msg_recv_nbx), so no other probe or receive can see it again,
 * whenever UCX matches a receive against its unexpected queue.
 */
typedef struct {
    tacl__tl_msg_t link;       /* first: its sender and tag */
    ucp_tag_message_h msg;
    uint64_t len;
} ucx_claimed_t;

static void claimed_free(tacl__tl_msg_t *m)
{
    free(m);
}

/*
 * Messages claimed for receives that will never be posted (the transport
 * fails or closes): UCX frees a claimed message only when it is
 * received, so each is received into a scratch buffer (cancelled if it
 * has not arrived within half a second: a dead sender's rendezvous; a
 * cancel that does not end within another half second leaves the
 * buffer to UCX rather than wait on).
 */
static void claimed_release(tacl__ucx_t *ucx)
{
    tacl__tl_msg_t *m;

    while ((m = tacl__tl_msgq_pop(&ucx->claimed)) != NULL) {
        ucx_claimed_t *c = (ucx_claimed_t *)m;
        ucp_request_param_t param = {0};
        void *buf = malloc(c->len ? c->len : 1), *req;
        uint64_t deadline = tacl__now_ns() + 500000000ull;

        if (buf != NULL && ucx->worker != NULL) {
            req = ucp_tag_msg_recv_nbx(ucx->worker, buf, (size_t)c->len,
                                       c->msg, &param);
            if (UCS_PTR_IS_PTR(req)) {
                while (ucp_request_check_status(req) == UCS_INPROGRESS &&
                       tacl__now_ns() < deadline)
                    ucp_worker_progress(ucx->worker);
                if (ucp_request_check_status(req) == UCS_INPROGRESS) {
                    ucp_request_cancel(ucx->worker, req);
                    deadline = tacl__now_ns() + 500000000ull;
                    while (ucp_request_check_status(req) == UCS_INPROGRESS &&
                           tacl__now_ns() < deadline)
                        ucp_worker_progress(ucx->worker);
                }
                if (ucp_request_check_status(req) == UCS_INPROGRESS)
                    buf = NULL; /* UCX may still write it: left to UCX */
                ucp_request_free(req);
            }
        }
        free(buf);
        claimed_free(m);
    }
}

static int ucx_probe(tacl__tl_t *tl, uint64_t tag, int *peer, uint64_t *len)
{
    tacl__ucx_t *ucx = (tacl__ucx_t *)tl;
    ucp_tag_recv_info_t info;
    ucx_claimed_t *c;

    if (ucx->worker == NULL)
        return 0;
    /* The record first: a message taken out of UCX must be kept. */
    c = calloc(1, sizeof(*c));
    if (c == NULL)
        return 0;
    c->msg = ucp_tag_probe_nb(ucx->worker, tacl__ucx_tag(0, tag),
                              TACL__TL_WIRE_ANY_SRC, 1, &info);
    if (c->msg == NULL) {
        free(c);
        return 0;
    }
    c->link.peer = tacl__tl_wire_src(info.sender_tag);
    c->link.tag = tag;
    c->len = info.length;
    tacl__tl_msgq_push(&ucx->claimed, &c->link);
    *peer = c->link.peer;
    *len = info.length;
    return 1;
}

static tacl_status_t ucx_post(tacl__tl_t *tl, tacl__tl_op_t *op, int recv)
{
    tacl__ucx_t *ucx = (tacl__ucx_t *)tl;
    tacl_status_t status;

    if (recv && ucx->claimed.head != NULL) {
        ucx_claimed_t *c = (ucx_claimed_t *)tacl__tl_msgq_take(
            &ucx->claimed, op->peer, op->tag);

        if (c != NULL) {
            ucp_tag_message_h msg = c->msg;

            free(c);
            if (op->memtype == TACL_MEM_CUDA && op->len > 0)
                return tacl__error(TACL_ERR_UNSUPPORTED, NET,
                                   "rank %d: a receive from any source "
                                   "into device memory over ucx (receive "
                                   "into host memory and copy)",
                                   ucx->base.rank);
            return tacl__ucx_msg_recv(ucx, op, msg);
        }
    }
    if (op->memtype != TACL_MEM_CUDA || op->len == 0)
        return tacl__ucx_post(ucx, op, recv);
    status = tacl__ucx_check_op(ucx, op);
    if (status != TACL_OK)
        return status;
    return tacl__stage_post(ucx->stage, op, recv);
}

static tacl_status_t ucx_send(tacl__tl_t *tl, tacl__tl_op_t *op)
{
    return ucx_post(tl, op, 0);
}

static tacl_status_t ucx_recv(tacl__tl_t *tl, tacl__tl_op_t *op)
{
    return ucx_post(tl, op, 1);
}

/* The base's fail: staged device messages first, then the posted ops. */
static void ucx_fail_pending(tacl__tl_base_t *base, tacl_status_t status)
{
    tacl__ucx_t *ucx = (tacl__ucx_t *)base;

    tacl__stage_fail(ucx->stage, status);
    tacl__ucx_fail_pending(ucx, status);
    claimed_release(ucx);
}

static int ucx_progress(tacl__tl_t *tl)
{
    tacl__ucx_t *ucx = (tacl__ucx_t *)tl;
    int events = tacl__ucx_worker_progress(ucx);

    /* A failed instance has nothing staged any more. */
    if (ucx->base.failed == TACL_OK)
        events += tacl__stage_progress(ucx->stage);
    return tacl__tl_base_finish(&ucx->base, events);
}

static tacl_status_t ucx_wait(tacl__tl_t *tl, int64_t timeout_us)
{
    tacl__ucx_t *ucx = (tacl__ucx_t *)tl;
    ucs_status_t st;

    if (!ucx->worker)
        return TACL_OK;
    timeout_us = tacl__tl_base_wait_us(&ucx->base, timeout_us);
    /* The worker is armed under the instance's lock (another thread may
     * progress it); only the poll is outside. */
    tacl__tl_lock(ucx->base.lock);
    if (tacl__tl_base_ready(&ucx->base)) {
        tacl__tl_unlock(ucx->base.lock);
        return TACL_OK;
    }
    /* Staging copies finish without waking the worker: poll them. */
    if (tacl__stage_pending(ucx->stage, -1))
        timeout_us = TACL_MIN(timeout_us, TACL_UCX_STAGE_POLL_US);
    st = ucp_worker_arm(ucx->worker);
    tacl__tl_unlock(ucx->base.lock);
    return tacl__ucx_sleep(ucx, st, timeout_us);
}

static void ucx_cancel_all(tacl__tl_t *tl, tacl_status_t status)
{
    tacl__ucx_t *ucx = (tacl__ucx_t *)tl;

    /* Cancelling UCX's requests closes every endpoint by force: the
     * instance has failed from then on. */
    if (ucx->pending.head || tacl__stage_pending(ucx->stage, -1))
        tacl__tl_base_mark_failed(&ucx->base, status);
    tacl__tl_base_cancel_all(tl, status);
}

/* Progress until req completes or the deadline passes; frees req. */
static int wait_request(tacl__ucx_t *ucx, void *req, uint64_t deadline)
{
    int done;

    if (!UCS_PTR_IS_PTR(req))
        return !UCS_PTR_IS_ERR(req);
    while (ucp_request_check_status(req) == UCS_INPROGRESS &&
           tacl__now_ns() < deadline)
        ucp_worker_progress(ucx->worker);
    done = ucp_request_check_status(req) != UCS_INPROGRESS;
    ucp_request_free(req);
    return done;
}

/*
 * Flush what was sent, then close every endpoint by force.  A flush does
 * not need the peers to answer at once, while a graceful close waits for
 * them to progress, which a peer busy elsewhere (or gone) may not do; the
 * peers see the connection drop, which is harmless when nothing is
 * pending with us.
 */
static void shut_down_eps(tacl__ucx_t *ucx, double max_s)
{
    uint64_t deadline = tacl__now_ns() + (uint64_t)(max_s * 1e9);
    ucp_request_param_t param = {0};
    int left = 0;

    if (!wait_request(ucx, ucp_worker_flush_nbx(ucx->worker, &param),
                      deadline))
        TACL_INFO(NET, "rank %d: sends did not flush within %.1f s",
                  ucx->base.rank, max_s);
    tacl__ucx_close_eps(ucx, UCP_EP_CLOSE_FLAG_FORCE);
    for (int r = 0; r < ucx->base.nranks; ++r) {
        if (ucx->close_reqs[r])
            left += !wait_request(ucx, ucx->close_reqs[r], deadline);
        ucx->close_reqs[r] = NULL;
    }
    if (left)
        TACL_INFO(NET, "rank %d: %d connections did not close within "
                  "%.1f s; dropped them", ucx->base.rank, left, max_s);
}

static void ucx_close(tacl__tl_t *tl)
{
    tacl__ucx_t *ucx = (tacl__ucx_t *)tl;

    if (ucx->worker) {
        claimed_release(ucx);
        if (ucx->pending.head || tacl__stage_pending(ucx->stage, -1)) {
            TACL_WARN(NET, "rank %d: closing with %llu operations pending; "
                      "they end with TACL_ERR_INVALID_USAGE", ucx->base.rank,
                      (unsigned long long)ucx->npending);
            ucx_cancel_all(tl, TACL_ERR_INVALID_USAGE);
        }
        shut_down_eps(ucx, TACL_MIN(ucx->base.timeout_s, TACL_UCX_CLOSE_MAX_S));
        ucp_worker_destroy(ucx->worker);
    }
    tacl__stage_close(ucx->stage);
    ucx->stage = NULL;
    tacl__tl_msgq_drain(&ucx->claimed, claimed_free);
    if (ucx->context)
        ucp_cleanup(ucx->context);
    free(ucx->addrs);
    free(ucx->addr_lens);
    free(ucx->close_reqs);
    free(ucx->eps);
    free(ucx->ep_state);
    tacl__tl_base_free(&ucx->base);
}

static tacl_status_t alloc_tables(tacl__ucx_t *ucx)
{
    size_t n = (size_t)ucx->base.nranks;

    ucx->ep_state = calloc(n, 1);
    ucx->eps = calloc(n, sizeof(*ucx->eps));
    ucx->close_reqs = calloc(n, sizeof(*ucx->close_reqs));
    if (!ucx->ep_state || !ucx->eps || !ucx->close_reqs)
        return tacl__error(TACL_ERR_NO_MEMORY, NET, "out of memory for %d "
                           "ranks", ucx->base.nranks);
    return TACL_OK;
}

/*
 * The ops of an instance that also moves CUDA memory (ucx_cuda.c): those
 * of tacl__tl_ucx_ops with CUDA among the capabilities, made once.  An
 * instance takes them when tacl is built with CUDA and a device is
 * usable at its init.
 */
static tacl__transport_ops_t ucx_cuda_ops;
static pthread_once_t ucx_cuda_ops_once = PTHREAD_ONCE_INIT;

static void make_cuda_ops(void)
{
    ucx_cuda_ops = tacl__tl_ucx_ops;
    ucx_cuda_ops.caps |= TACL__TL_CAP_CUDA;
}

static tacl_status_t ucx_init(const tacl__tl_params_t *params,
                              tacl__tl_t **tl_p)
{
    tacl__tl_base_t *base;
    tacl__ucx_t *ucx;
    tacl_status_t status, local;
    void *addr = NULL;
    size_t len = 0;

    if (params->nranks < 1 || params->nranks > TACL_UCX_MAX_RANKS ||
        params->rank < 0 || params->rank >= params->nranks)
        return tacl__error(TACL_ERR_INVALID_ARG, NET, "ucx serves 1 to %d "
                           "ranks, not rank %d of %d", TACL_UCX_MAX_RANKS,
                           params->rank, params->nranks);
    status = tacl__tl_base_new(&tacl__tl_ucx_ops, sizeof(*ucx), params,
                               TACL_SUBSYS_NET, ucx_fail_pending,
                               &base);
    if (status != TACL_OK)
        return status;
    ucx = (tacl__ucx_t *)base;
    ucx->efd = -1;
    status = alloc_tables(ucx);
    if (status != TACL_OK)
        goto err_close;
    if (!any_remote_rank(params)) {
        TACL_INFO(NET, "rank %d: every rank is on this node; ucx idle",
                  ucx->base.rank);
        *tl_p = &ucx->base.super;
        return TACL_OK;
    }
    local = setup_worker(ucx, &addr, &len);
    status = exchange_addresses(ucx, params, local, addr, len);
    if (addr)
        ucp_worker_release_address(ucx->worker, addr);
    if (status != TACL_OK)
        goto err_close;
    if (tacl__ucx_stage_init(ucx)) {
        pthread_once(&ucx_cuda_ops_once, make_cuda_ops);
        ucx->base.super.ops = &ucx_cuda_ops;
    }
    TACL_INFO(NET, "rank %d: ucx ready, %zu-byte worker address",
              ucx->base.rank, len);
    *tl_p = &ucx->base.super;
    return TACL_OK;

err_close:
    ucx_close(&ucx->base.super);
    return status;
}

static int ucx_reachable(tacl__tl_t *tl, int peer)
{
    tacl__ucx_t *ucx = (tacl__ucx_t *)tl;

    return ucx->worker &&
           tacl__tl_base_where(&ucx->base, peer) == TACL__TL_PEER_NET;
}

const tacl__transport_ops_t tacl__tl_ucx_ops = {
    .size = sizeof(tacl__transport_ops_t),
    .name = "ucx",
    .caps = TACL__TL_CAP_HOST | TACL__TL_CAP_PROBE,
    .reach = TACL__TL_PEER_NET,
    .init = ucx_init,
    .reachable = ucx_reachable,
    .send = ucx_send,
    .recv = ucx_recv,
    .progress = ucx_progress,
    .wait = ucx_wait,
    .probe = ucx_probe,
    .cancel_all = ucx_cancel_all,
    .close = ucx_close,
};
