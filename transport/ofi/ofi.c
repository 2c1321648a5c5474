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
 * rank's "ok" flag, its number of rails, the length of its longest
 * endpoint name, its TACL_OFI_STRIPE_MIN and the provider it chose, then
 * the names of each rank's rails, padded to the longest, which go into
 * each rail's address vector.  Ranks that chose different providers, or
 * stripe from different sizes, cannot talk: every rank fails, naming
 * the first that differs.  Rails (ofi.h): one endpoint per TACL_NICS
 * entry, on the fi_info whose domain is that interface; rail i of one
 * rank talks to rail i of another, so a peer with fewer rails is reached
 * on the first ones.  If
 * every rank is on the same node nobody needs the network, and no
 * libfabric resource is made (every rank sees the same node ids, so all
 * take that branch).
 *
 * Each rail's completion queue is opened with a file descriptor to wait
 * on (FI_WAIT_FD); wait() asks fi_trywait() of every rail whether
 * sleeping is safe, under the instance's lock, and sleeps in poll() on
 * all of their descriptors without it.  A provider
 * without one gets naps of TACL_OFI_NAP_US instead.
 *
 * Receives from any source (the probe slot, ofi_ops.c): libfabric's
 * tagged peek, which ofi_rxm over tcp (libfabric 1.17) serves from its
 * queue of unexpected messages.  A peek (fi_trecvmsg with FI_PEEK, the
 * source bits of the wire tag ignored) names the oldest message with the
 * tag from any sender and leaves it there; its completion carries the
 * wire tag, hence the sender's rank, and the length, which wait on the
 * found list until a receive for that sender and tag is posted, and that
 * receive matches the message by (source, tag) order (FI_ORDER_SAS).
 * Nothing else takes it meanwhile: the executor posts the receive right
 * after the probe reports, and no receive for a tag held behind one
 * from any source; a peek posted while receives wait on the backlog
 * reaches the provider after them.  A peek does not claim (FI_CLAIM):
 * ofi_rxm 1.17 hands a claimed message over as one buffer, and of a
 * message sent by segments (SAR, ofi_info.c) the later segments then
 * stay behind as messages of their own.
 * A peek answers through the completion queue; ofi_rxm writes the
 * answer as the peek is posted, so probe() reads the queue right after
 * and reports a message found in the same round, and the queue is left
 * empty for wait() to sleep on (a provider that answers later is read
 * by the next progress, and probed again the round after).  A message
 * sent in pieces (ofi_ops.c) is found by its first piece, which carries
 * the message's length as completion data; the receive that takes it
 * posts the other pieces from the sender the peek named.  A
 * provider that refuses FI_PEEK (it has no capability bit to ask
 * fi_getinfo for) fails each receive from any source with
 * TACL_ERR_UNSUPPORTED and a message, never a hang; a failure of the
 * instance forgets what peeks found.
 *
 * Device memory: built with CUDA and with a device usable at init, the
 * instance lists CUDA memory too and hands device buffers to the staging
 * through pinned host chunks that ucx uses (transport/stage.c), lending
 * it its host data path: a chunk goes as a host message of the same
 * tag, and a receive chunk is taken once a peek for its sender and tag
 * (tacl__ofi_arrived) finds it.  FI_HMEM (device buffers straight to an
 * EFA NIC) is not used yet.
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
    uint32_t nrails;
    uint32_t name_len;         /* of its longest endpoint name */
    uint32_t pad;
    uint64_t stripe_min;
    uint64_t piece_max;
    char provider[64];
} ofi_record_t;

/* The longest endpoint name tacl takes. */
#define TACL_OFI_NAME_MAX 256

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

/* Rail's completion queue, with a descriptor to sleep on if possible. */
static tacl_status_t open_cq(tacl__ofi_t *ofi, tacl__ofi_rail_t *rail)
{
    struct fi_cq_attr attr = {0};
    int rc;

    attr.format = FI_CQ_FORMAT_TAGGED;
    attr.size = (size_t)(ofi->tx_size + ofi->rx_size + 64);
    attr.wait_obj = FI_WAIT_FD;
    rc = fi_cq_open(rail->domain, &attr, &rail->cq, NULL);
    if (rc == 0 &&
        fi_control(&rail->cq->fid, FI_GETWAIT, &rail->cq_fd) == 0)
        return TACL_OK;
    if (rc == 0)
        fi_close(&rail->cq->fid);
    TACL_INFO(NET, "rank %d: provider %s has no completion descriptor to "
              "sleep on; waits nap %d us", ofi->base.rank,
              ofi->choice.provider, TACL_OFI_NAP_US);
    rail->cq_fd = -1;
    attr.wait_obj = FI_WAIT_NONE;
    rc = fi_cq_open(rail->domain, &attr, &rail->cq, NULL);
    if (rc != 0) {
        rail->cq = NULL;
        return fi_error(ofi, "fi_cq_open", rc);
    }
    return TACL_OK;
}

/* Sizes and modes from rail 0's fi_info; the rails share one provider. */
static void take_limits(tacl__ofi_t *ofi, const struct fi_info *info)
{
    ofi->need_mr = tacl__ofi_registers(info);
    ofi->tx_size = info->tx_attr->size ? info->tx_attr->size
                                       : TACL_OFI_DEFAULT_SIZE;
    ofi->rx_size = info->rx_attr->size ? info->rx_attr->size
                                       : TACL_OFI_DEFAULT_SIZE;
    ofi->max_msg = info->ep_attr->max_msg_size;
    /* A first piece's length travels as completion data, which a
     * provider that wants receive buffers for it cannot take. */
    if (info->domain_attr->cq_data_size == 0 || (info->mode & FI_RX_CQ_DATA))
        ofi->data_max = 0;
    else if (info->domain_attr->cq_data_size >= sizeof(uint64_t))
        ofi->data_max = UINT64_MAX;
    else
        ofi->data_max = (1ull << (8 * info->domain_attr->cq_data_size)) - 1;
}

/* Fabric, domain, queue, address vector and endpoint of rail (its info
 * set); the endpoint's name goes to name/len_p.  Leaves what it made
 * for close. */
static tacl_status_t setup_rail(tacl__ofi_t *ofi, tacl__ofi_rail_t *rail,
                                void *name, size_t *len_p)
{
    struct fi_info *info = rail->info;
    struct fi_av_attr av_attr = {0};
    tacl_status_t status;
    int rc;

    rc = fi_fabric(info->fabric_attr, &rail->fabric, NULL);
    if (rc != 0) {
        rail->fabric = NULL;
        return fi_error(ofi, "fi_fabric", rc);
    }
    rc = fi_domain(rail->fabric, info, &rail->domain, NULL);
    if (rc != 0) {
        rail->domain = NULL;
        return fi_error(ofi, "fi_domain", rc);
    }
    status = open_cq(ofi, rail);
    if (status != TACL_OK)
        return status;
    av_attr.type = FI_AV_TABLE;
    av_attr.count = (size_t)ofi->base.nranks;
    rc = fi_av_open(rail->domain, &av_attr, &rail->av, NULL);
    if (rc != 0) {
        rail->av = NULL;
        return fi_error(ofi, "fi_av_open", rc);
    }
    rc = fi_endpoint(rail->domain, info, &rail->ep, NULL);
    if (rc != 0) {
        rail->ep = NULL;
        return fi_error(ofi, "fi_endpoint", rc);
    }
    rc = fi_ep_bind(rail->ep, &rail->cq->fid, FI_TRANSMIT | FI_RECV);
    if (rc == 0)
        rc = fi_ep_bind(rail->ep, &rail->av->fid, 0);
    if (rc == 0)
        rc = fi_enable(rail->ep);
    if (rc != 0)
        return fi_error(ofi, "binding and enabling the endpoint", rc);
    rc = fi_getname(&rail->ep->fid, name, len_p);
    if (rc != 0)
        return fi_error(ofi, "fi_getname", rc);
    if (*len_p > TACL_OFI_NAME_MAX)
        return tacl__error(TACL_ERR_INTERNAL, NET, "provider %s has "
                           "endpoint names of %zu bytes",
                           ofi->choice.provider, *len_p);
    return TACL_OK;
}

/* Rail r: iface's fi_info (NULL: the provider's first), its endpoint,
 * no peer's address yet. */
static tacl_status_t open_rail(tacl__ofi_t *ofi, int r, const char *iface,
                               void *name, size_t *len_p)
{
    tacl__ofi_rail_t *rail = &ofi->rails[r];
    tacl_status_t status;

    rail->addrs = malloc((size_t)ofi->base.nranks * sizeof(*rail->addrs));
    if (rail->addrs == NULL)
        return tacl__error(TACL_ERR_NO_MEMORY, NET, "out of memory");
    for (int p = 0; p < ofi->base.nranks; ++p)
        rail->addrs[p] = FI_ADDR_NOTAVAIL;
    status = tacl__ofi_choose_rail(iface, &rail->info, &ofi->choice);
    if (status != TACL_OK)
        return status;
    if (r == 0)
        take_limits(ofi, rail->info);
    if (iface == NULL)
        snprintf(ofi->rail_names[0], sizeof(ofi->rail_names[0]), "%.31s",
                 ofi->choice.domain);
    return setup_rail(ofi, rail, name, len_p);
}

/*
 * Every rail of this rank: TACL_NICS's interfaces, or the provider's
 * first choice when it is unset.  Their names go to names, one per
 * TACL_OFI_NAME_MAX bytes, the longest's length to *len_p.
 */
static tacl_status_t setup_endpoints(tacl__ofi_t *ofi, uint8_t *names,
                                     size_t *len_p)
{
    int n = tacl__ofi_rail_names(ofi->rail_names);
    tacl__ofi_choice_t c;

    if (n < 0)
        return (tacl_status_t)n;
    /* Only tcp names its domains after interfaces; EFA's are devices,
     * which TACL_NICS (interfaces, for the topology) cannot name. */
    if (n > 0 && tacl__ofi_choose(NULL, &c) == TACL_OK &&
        strncmp(c.provider, "tcp", 3) != 0) {
        TACL_WARN(NET, "rank %d: TACL_NICS names %d rails, but provider "
                  "%s does not name its domains after interfaces; ofi "
                  "opens one endpoint", ofi->base.rank, n, c.provider);
        n = 0;
    }
    *len_p = 0;
    for (int r = 0; r < TACL_OFI_MAX_RAILS; ++r)
        ofi->rails[r].cq_fd = -1;
    for (int r = 0; r < TACL_MAX(n, 1); ++r) {
        size_t len = TACL_OFI_NAME_MAX;
        tacl_status_t status =
            open_rail(ofi, r, n > 0 ? ofi->rail_names[r] : NULL,
                      names + (size_t)r * TACL_OFI_NAME_MAX, &len);

        /* Only whole rails are polled; close takes the rest apart. */
        if (status != TACL_OK)
            return status;
        ofi->nrails = r + 1;
        *len_p = TACL_MAX(*len_p, len);
    }
    return TACL_OK;
}

/*
 * Every rank's names into the rails' address vectors: rail i's vector
 * holds rail i of every rank that has one.  names holds each rank's
 * block of maxrails names, stride bytes apart.
 */
static tacl_status_t insert_names(tacl__ofi_t *ofi, const uint8_t *names,
                                  size_t stride, int maxrails)
{
    for (int r = 0; r < ofi->base.nranks; ++r)
        for (int i = 0; i < TACL_MIN(ofi->nrails, ofi->peers[r].nrails);
             ++i) {
            const uint8_t *name =
                names + ((size_t)r * (size_t)maxrails + (size_t)i) * stride;
            int rc = fi_av_insert(ofi->rails[i].av, name, 1,
                                  &ofi->rails[i].addrs[r], 0, NULL);

            if (rc != 1)
                return tacl__error(TACL_ERR_SYSTEM, NET, "rank %d cannot "
                                   "add rank %d's address on rail %d "
                                   "(provider %s): %s", ofi->base.rank, r,
                                   i, ofi->choice.provider,
                                   tacl__ofi_strerror(rc < 0 ? rc
                                                             : -FI_EINVAL));
        }
    return TACL_OK;
}

/* Whether rank r's size setting (what it does, set by knob) is this
 * rank's; an error naming both if not: pieces would not match. */
static tacl_status_t same_size(const tacl__ofi_t *ofi, int r,
                               const char *what, uint64_t theirs,
                               uint64_t mine, const char *knob)
{
    if (theirs == mine)
        return TACL_OK;
    return tacl__error(TACL_ERR_INVALID_USAGE, NET, "rank %d %s %llu "
                       "bytes, rank %d %s %llu; set %s alike on every node",
                       r, what, (unsigned long long)theirs, ofi->base.rank,
                       what, (unsigned long long)mine, knob);
}

/* Whether every rank's record agrees with this one's; an error if not. */
static tacl_status_t check_records(tacl__ofi_t *ofi, const ofi_record_t *recs,
                                   tacl_status_t local)
{
    const ofi_record_t *mine = &recs[ofi->base.rank];
    tacl_status_t status;

    for (int r = 0; r < ofi->base.nranks; ++r) {
        if (!recs[r].ok)
            return local != TACL_OK ? local :
                tacl__error(TACL_ERR_REMOTE, NET, "rank %d could not set "
                            "up libfabric; see its log", r);
        if (strcmp(recs[r].provider, mine->provider) != 0)
            return tacl__error(TACL_ERR_INVALID_USAGE, NET, "rank %d "
                               "chose libfabric provider %s, rank %d %s; "
                               "set TACL_OFI_PROVIDER alike on every "
                               "node", r, recs[r].provider, ofi->base.rank,
                               mine->provider);
        status = same_size(ofi, r, "stripes messages from",
                           recs[r].stripe_min, mine->stripe_min,
                           "TACL_OFI_STRIPE_MIN");
        if (status == TACL_OK)
            status = same_size(ofi, r, "splits messages into pieces of",
                               recs[r].piece_max, mine->piece_max,
                               "TACL_OFI_MAX_MSG and FI_OFI_RXM_BUFFER_SIZE");
        if (status != TACL_OK)
            return status;
        ofi->peers[r].nrails = (uint8_t)recs[r].nrails;
    }
    return TACL_OK;
}

/* The two exchanges; every rank does both unless the first fails.  names
 * holds this rank's rails' names, TACL_OFI_NAME_MAX bytes apart. */
static tacl_status_t exchange_names(tacl__ofi_t *ofi,
                                    const tacl__tl_params_t *params,
                                    tacl_status_t local,
                                    const uint8_t *names, size_t len)
{
    size_t n = (size_t)ofi->base.nranks, stride = 8;
    ofi_record_t *recs;
    uint8_t *all = NULL;
    tacl_status_t status;
    int me = ofi->base.rank, maxrails = 1;

    recs = calloc(n, sizeof(*recs));
    if (!recs)
        return tacl__error(TACL_ERR_NO_MEMORY, NET, "out of memory");
    recs[me].ok = local == TACL_OK;
    recs[me].nrails = local == TACL_OK ? (uint32_t)ofi->nrails : 0;
    recs[me].name_len = local == TACL_OK ? (uint32_t)len : 0;
    recs[me].stripe_min = ofi->stripe_min;
    recs[me].piece_max = ofi->piece_max;
    snprintf(recs[me].provider, sizeof(recs[me].provider), "%s",
             ofi->choice.provider);
    status = params->exchange(params->exchange_ctx, recs, sizeof(*recs));
    if (status == TACL_OK)
        status = check_records(ofi, recs, local);
    if (status != TACL_OK)
        goto out_free;
    for (size_t r = 0; r < n; ++r) {
        stride = TACL_MAX(stride, (size_t)recs[r].name_len);
        maxrails = TACL_MAX(maxrails, (int)recs[r].nrails);
    }
    stride = TACL_DIV_UP(stride, 8) * 8;
    all = calloc(n * (size_t)maxrails, stride);
    if (!all) {
        /* The others wait in the second exchange: a local failure here
         * cannot be told to them, so the bootstrap's timeout does. */
        status = tacl__error(TACL_ERR_NO_MEMORY, NET, "out of memory for "
                             "%d ranks' endpoint names", ofi->base.nranks);
        goto out_free;
    }
    for (int i = 0; i < ofi->nrails; ++i)
        memcpy(all + ((size_t)me * (size_t)maxrails + (size_t)i) * stride,
               names + (size_t)i * TACL_OFI_NAME_MAX, len);
    status = params->exchange(params->exchange_ctx, all,
                              (size_t)maxrails * stride);
    if (status == TACL_OK)
        status = insert_names(ofi, all, stride, maxrails);

out_free:
    free(all);
    free(recs);
    return status;
}

/* A device buffer goes to the provider as it is where it offers FI_HMEM
 * (registered by ofi_mr.c), else to the staging (transport/stage.c),
 * which posts its chunks as host messages through tacl__ofi_post_op. */
static tacl_status_t ofi_post(tacl__ofi_t *ofi, tacl__tl_op_t *op, int recv)
{
    tacl_status_t status;

    if (op->memtype != TACL_MEM_CUDA || op->len == 0 || ofi->hmem)
        return tacl__ofi_post_op(ofi, op, recv);
    status = tacl__tl_base_check(&ofi->base, op);
    if (status != TACL_OK)
        return status;
    return tacl__stage_post(ofi->stage, op, recv);
}

static tacl_status_t ofi_send(tacl__tl_t *tl, tacl__tl_op_t *op)
{
    return ofi_post((tacl__ofi_t *)tl, op, 0);
}

static tacl_status_t ofi_recv(tacl__tl_t *tl, tacl__tl_op_t *op)
{
    return ofi_post((tacl__ofi_t *)tl, op, 1);
}

static int ofi_probe(tacl__tl_t *tl, uint64_t tag, int *peer, uint64_t *len)
{
    return tacl__ofi_probe((tacl__ofi_t *)tl, tag, peer, len);
}

/* The base's fail: staged device messages first, then the posted ops. */
static void ofi_fail_pending(tacl__tl_base_t *base, tacl_status_t status)
{
    tacl__ofi_t *ofi = (tacl__ofi_t *)base;

    tacl__stage_fail(ofi->stage, status);
    tacl__ofi_fail_pending(ofi, status);
}

static int ofi_progress(tacl__tl_t *tl)
{
    tacl__ofi_t *ofi = (tacl__ofi_t *)tl;
    int events = tacl__ofi_poll(ofi);

    events += tacl__ofi_check_peers(ofi);
    /* A failed instance has nothing staged any more. */
    if (ofi->base.failed == TACL_OK)
        events += tacl__stage_progress(ofi->stage);
    return tacl__tl_base_finish(&ofi->base, events);
}

/* A nap of timeout_us at most, TACL_OFI_NAP_US at longest. */
static tacl_status_t nap(int64_t timeout_us)
{
    struct timespec ts;

    timeout_us = TACL_MIN(timeout_us, TACL_OFI_NAP_US);
    ts.tv_sec = 0;
    ts.tv_nsec = (long)timeout_us * 1000;
    nanosleep(&ts, NULL);
    return TACL_OK;
}

/*
 * fi_trywait on every rail's queue, their descriptors into fds: 0 when
 * all may be slept on, -FI_EAGAIN when one has completions, another
 * refusal otherwise.  A queue is asked within its own fabric.
 */
static int try_wait_rails(tacl__ofi_t *ofi, int *fds)
{
    for (int r = 0; r < ofi->nrails; ++r) {
        struct fid *fid = &ofi->rails[r].cq->fid;
        int rc = fi_trywait(ofi->rails[r].fabric, &fid, 1);

        if (rc != 0)
            return rc;
        fds[r] = ofi->rails[r].cq_fd;
    }
    return 0;
}

static tacl_status_t ofi_wait(tacl__tl_t *tl, int64_t timeout_us)
{
    tacl__ofi_t *ofi = (tacl__ofi_t *)tl;
    int fds[TACL_OFI_MAX_RAILS];
    int rc, no_fd = 0;

    if (ofi->nrails == 0)
        return TACL_OK;
    timeout_us = tacl__tl_base_wait_us(&ofi->base, timeout_us);
    /* Armed under the instance's lock (another thread may progress the
     * queues); only the poll is outside. */
    tacl__tl_lock(ofi->base.lock);
    if (tacl__tl_base_ready(&ofi->base) || !tacl__ofi_live(ofi)) {
        tacl__tl_unlock(ofi->base.lock);
        return TACL_OK;
    }
    /* Peers are checked (and pinged) on a clock, not on an event. */
    if (ofi->nops > 0)
        timeout_us = TACL_MIN(timeout_us, (int64_t)(ofi->ping_ns / 4000));
    for (int r = 0; r < ofi->nrails; ++r)
        no_fd |= ofi->rails[r].cq_fd < 0;
    /* Staging copies finish without waking the queues: nap. */
    if (ofi->backlog_tx.head || ofi->backlog_rx.head || no_fd ||
        tacl__stage_pending(ofi->stage, -1)) {
        tacl__tl_unlock(ofi->base.lock);
        return nap(timeout_us);
    }
    rc = try_wait_rails(ofi, fds);
    tacl__tl_unlock(ofi->base.lock);
    if (rc == -FI_EAGAIN)
        return TACL_OK;
    /* ofi_rxm refuses while a connection it waits on is broken: the
     * peers are checked on the clock, so nap instead. */
    if (rc != 0)
        return nap(timeout_us);
    return tacl__tl_base_sleep_fds(&ofi->base, fds, ofi->nrails, timeout_us,
                                   "the completion queues");
}

static void ofi_cancel_all(tacl__tl_t *tl, tacl_status_t status)
{
    tacl__ofi_t *ofi = (tacl__ofi_t *)tl;

    /* Ending what the provider holds closes the endpoint: the instance
     * has failed from then on. */
    if (ofi->nops > 0 || tacl__stage_pending(ofi->stage, -1))
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

/* What rail holds, closed, or kept where a failure abandoned its
 * endpoint (ofi_ops.c says why). */
static void close_rail(tacl__ofi_t *ofi, tacl__ofi_rail_t *rail)
{
    if (rail->abandoned != NULL) {
        TACL_INFO(NET, "rank %d: the failed endpoint and its resources "
                  "are left to the end of the process", ofi->base.rank);
        keep_abandoned(rail->abandoned);
        rail->av = NULL;
        rail->cq = NULL;
        rail->domain = NULL;
        rail->fabric = NULL;
    }
    /* An endpoint a failed setup made is still here; a live one was
     * closed with its operations (tacl__ofi_fail_pending). */
    if (rail->ep)
        fi_close(&rail->ep->fid);
    if (rail->av)
        fi_close(&rail->av->fid);
    if (rail->cq)
        fi_close(&rail->cq->fid);
    if (rail->domain)
        fi_close(&rail->domain->fid);
    if (rail->fabric)
        fi_close(&rail->fabric->fid);
    if (rail->info)
        fi_freeinfo(rail->info);
    free(rail->addrs);
}

static void ofi_close(tacl__tl_t *tl)
{
    tacl__ofi_t *ofi = (tacl__ofi_t *)tl;
    tacl__ofi_req_t *req;

    if (tacl__ofi_live(ofi) &&
        (ofi->nops > 0 || tacl__stage_pending(ofi->stage, -1))) {
        TACL_WARN(NET, "rank %d: closing with %llu operations pending; "
                  "they end with TACL_ERR_INVALID_USAGE", ofi->base.rank,
                  (unsigned long long)ofi->nops);
        ofi_cancel_all(tl, TACL_ERR_INVALID_USAGE);
    }
    if (tacl__ofi_live(ofi))
        tacl__ofi_say_goodbye(ofi, TACL_MIN(ofi->base.timeout_s,
                                            TACL_OFI_CLOSE_MAX_S));
    /* Control receives still posted end with the endpoint. */
    ofi->closing = 1;
    tacl__ofi_fail_pending(ofi, TACL_ERR_INVALID_USAGE);
    tacl__tl_opq_run(&ofi->base.done);
    tacl__ofi_mr_forget(ofi);
    for (int r = 0; r < TACL_OFI_MAX_RAILS; ++r)
        close_rail(ofi, &ofi->rails[r]);
    tacl__stage_close(ofi->stage);
    ofi->stage = NULL;
    while ((req = ofi->free_reqs) != NULL) {
        ofi->free_reqs = req->next;
        free(req);
    }
    free(ofi->peers);
    tacl__tl_base_free(&ofi->base);
}

/*
 * TACL_OFI_STRIPE_MIN refused when invalid (the configuration would
 * take the default quietly, and ranks that differ cannot match pieces),
 * and the ranks a piece's tag bit leaves room for.
 */
static tacl_status_t stripe_setting(tacl__ofi_t *ofi)
{
    if (tacl__config_source(TACL_CFG_OFI_STRIPE_MIN) ==
        TACL_CFG_SRC_INVALID)
        return tacl__error(TACL_ERR_INVALID_ARG, NET, "TACL_OFI_STRIPE_MIN="
                           "'%s' is not a size of at least %llu bytes (such "
                           "as 1M or 4194304)",
                           tacl__config_raw(TACL_CFG_OFI_STRIPE_MIN),
                           TACL_OFI_STRIPE_FLOOR);
    if (ofi->base.nranks > (1 << 15) &&
        tacl__config_str(TACL_CFG_NICS)[0] != '\0')
        return tacl__error(TACL_ERR_INVALID_ARG, NET, "ofi serves at most "
                           "%d ranks with TACL_NICS set (rails), not %d",
                           1 << 15, ofi->base.nranks);
    return TACL_OK;
}

/* The registration and device-memory settings refused when invalid
 * (the configuration would take the default quietly). */
static tacl_status_t memory_settings(void)
{
    static const struct {
        int entry;
        const char *name, *want;
    } settings[] = {
        {TACL_CFG_OFI_REGISTER, "TACL_OFI_REGISTER", "auto or always"},
        {TACL_CFG_OFI_HMEM, "TACL_OFI_HMEM", "auto, on or off"},
        {TACL_CFG_OFI_MR_CACHE, "TACL_OFI_MR_CACHE",
         "a count of registrations (0: none kept)"},
    };

    for (size_t i = 0; i < TACL_ARRAY_SIZE(settings); ++i)
        if (tacl__config_source(settings[i].entry) == TACL_CFG_SRC_INVALID)
            return tacl__error(TACL_ERR_INVALID_ARG, NET, "%s='%s' is not "
                               "%s", settings[i].name,
                               tacl__config_raw(settings[i].entry),
                               settings[i].want);
    return TACL_OK;
}

/*
 * The longest message or piece handed to the provider: its max_msg_size,
 * or TACL_OFI_MAX_MSG where lower (a bad value refused), rounded down
 * to TACL_OFI_PIECE_ALIGN so that pieces of a split message, aligned,
 * stay within it.  With TACL_OFI_MAX_MSG=auto over ofi_rxm, its eager
 * size, where that is a whole number of TACL_OFI_PIECE_ALIGN units:
 * longer messages would go by segments or a rendezvous (ofi_info.c).
 */
static tacl_status_t piece_setting(tacl__ofi_t *ofi)
{
    uint64_t max = ofi->max_msg;
    uint64_t eager = tacl__ofi_rxm_eager(ofi->choice.provider);

    if (tacl__config_source(TACL_CFG_OFI_MAX_MSG) == TACL_CFG_SRC_INVALID)
        return tacl__error(TACL_ERR_INVALID_ARG, NET, "TACL_OFI_MAX_MSG="
                           "'%s' is not auto or a size of at least %llu "
                           "bytes (such as 64K or 1G)",
                           tacl__config_raw(TACL_CFG_OFI_MAX_MSG),
                           TACL_OFI_PIECE_FLOOR);
    if (tacl__config_word(TACL_CFG_OFI_MAX_MSG) != 0)
        max = TACL_MIN(max, tacl__config_size(TACL_CFG_OFI_MAX_MSG));
    else if (eager >= TACL_OFI_PIECE_ALIGN)
        max = TACL_MIN(max, eager);
    if (max < TACL_OFI_PIECE_ALIGN)
        return tacl__error(TACL_ERR_UNSUPPORTED, NET, "rank %d: provider "
                           "%s takes messages of %llu bytes at most; ofi "
                           "needs %llu", ofi->base.rank,
                           ofi->choice.provider, (unsigned long long)max,
                           TACL_OFI_PIECE_ALIGN);
    ofi->piece_max = max / TACL_OFI_PIECE_ALIGN * TACL_OFI_PIECE_ALIGN;
    return TACL_OK;
}

/* What the staging of device memory borrows (transport/stage.h). */
static tacl_status_t net_post(tacl__tl_base_t *tl, tacl__tl_op_t *op,
                              int recv)
{
    return tacl__ofi_post_op((tacl__ofi_t *)tl, op, recv);
}

static int net_arrived(tacl__tl_base_t *tl, int peer, uint64_t tag,
                       uint64_t *len, void **handle)
{
    *handle = NULL;
    return tacl__ofi_arrived((tacl__ofi_t *)tl, peer, tag, len);
}

/* The receive posted next takes the message the peek found. */
static tacl_status_t net_take(tacl__tl_base_t *tl, tacl__tl_op_t *op,
                              void *handle)
{
    (void)handle;
    return tacl__ofi_post_op((tacl__ofi_t *)tl, op, 1);
}

static tacl_status_t net_can_send(tacl__tl_base_t *tl, int peer)
{
    const tacl__ofi_t *ofi = (const tacl__ofi_t *)tl;

    if (ofi->peers[peer].state == TACL_OFI_PEER_GONE)
        return tacl__error_peer(peer, NET, "rank %d: send to rank %d, "
                                "which closed its transport",
                                ofi->base.rank, peer);
    return TACL_OK;
}

static const tacl__stage_net_t ofi_net = {
    .post = net_post,
    .arrived = net_arrived,
    .take = net_take,
    .can_send = net_can_send,
    .name = "ofi",
};

/*
 * The ops of an instance that also moves CUDA memory through the
 * staging: those of tacl__tl_ofi_ops with CUDA among the capabilities,
 * made once.
 */
static tacl__transport_ops_t ofi_cuda_ops;
static pthread_once_t ofi_cuda_ops_once = PTHREAD_ONCE_INIT;

static void make_cuda_ops(void)
{
    ofi_cuda_ops = tacl__tl_ofi_ops;
    ofi_cuda_ops.caps |= TACL__TL_CAP_CUDA;
}

static tacl_status_t ofi_init(const tacl__tl_params_t *params,
                              tacl__tl_t **tl_p)
{
    tacl__tl_base_t *base;
    tacl__ofi_t *ofi;
    tacl_status_t status, local;
    uint8_t names[TACL_OFI_MAX_RAILS * TACL_OFI_NAME_MAX] = {0};
    size_t len = 0;
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
    tacl__ofi_mr_init(ofi);
    ofi->stripe_min = tacl__config_size(TACL_CFG_OFI_STRIPE_MIN);
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
    local = memory_settings();
    if (local == TACL_OK)
        local = stripe_setting(ofi);
    if (local == TACL_OK)
        local = setup_endpoints(ofi, names, &len);
    if (local == TACL_OK)
        local = piece_setting(ofi);
    status = exchange_names(ofi, params, local, names, len);
    if (status == TACL_OK)
        status = tacl__ofi_ctrl_start(ofi);
    if (status != TACL_OK)
        goto err_close;
    ofi->hmem = (ofi->choice.ask & TACL_OFI_ASK_HMEM) != 0;
    if (!ofi->hmem)
        ofi->stage = tacl__stage_new(
            &ofi->base, &ofi_net, tacl__config_size(TACL_CFG_NET_CUDA_CHUNK),
            tacl__config_int(TACL_CFG_NET_CUDA_CHUNKS));
    if (ofi->stage != NULL || ofi->hmem) {
        pthread_once(&ofi_cuda_ops_once, make_cuda_ops);
        ofi->base.super.ops = &ofi_cuda_ops;
    }
    TACL_INFO(NET, "rank %d: ofi ready: provider %s, fabric %s, domain %s "
              "(%s); queues %llu/%llu; %s; %zu-byte names; "
              "%d rail%s, striped from %llu bytes, pieces of %llu at most",
              ofi->base.rank,
              ofi->choice.provider, ofi->choice.fabric, ofi->choice.domain,
              ofi->choice.why, (unsigned long long)ofi->tx_size,
              (unsigned long long)ofi->rx_size,
              ofi->choice.memory, len, ofi->nrails,
              ofi->nrails > 1 ? "s" : "",
              (unsigned long long)ofi->stripe_min,
              (unsigned long long)ofi->piece_max);
    *tl_p = &ofi->base.super;
    return TACL_OK;

err_close:
    ofi_close(&ofi->base.super);
    return status;
}

static int ofi_reachable(tacl__tl_t *tl, int peer)
{
    tacl__ofi_t *ofi = (tacl__ofi_t *)tl;

    return ofi->nrails > 0 &&
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
