/*
 * The cuda_ipc transport: setup, reach and teardown (the connections are
 * in cuda_ipc_conn.c, the protocol in cuda_ipc_proto.c, the opened
 * allocations in cuda_ipc_cache.c; the design in cuda_ipc.h).
 *
 * Setup is collective over the context, costs no CUDA and never fails for
 * want of it: every rank with neighbours listens on an abstract Unix
 * socket named after a random nonce and its rank, and one exchange tells
 * every rank its neighbours' nonces.  Connections come later, one pair at
 * a time, at the pair's first device message (tacl__cipc_want): the rank
 * of lower local index connects and names itself in a hello; the higher
 * one accepts when one of its posts waits for the pair.  A device
 * message is reachable when both ranks listen and this rank's CUDA
 * driver works, asked at the first device message (so a process moving
 * host memory only never initialises CUDA here); without a driver (what
 * CPU-only machines see) device messages fail with the transport's "does
 * not reach" error.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common.h"
#include "cuda_ipc.h"
#include "cuda_mem.h"
#include "log.h"

/** One rank's record in the setup exchange. */
typedef struct {
    uint64_t nonce;            /* names its listening socket */
    int32_t listens;
    int32_t pad;
} cipc_record_t;

static int make_listener(int rank, uint64_t nonce, int backlog)
{
    struct sockaddr_un addr;
    socklen_t len = tacl__cipc_sock_addr(&addr, nonce, rank);
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK,
                    0);

    if (fd < 0 || bind(fd, (struct sockaddr *)&addr, len) != 0 ||
        listen(fd, backlog) != 0) {
        TACL_INFO(IPC, "cuda_ipc: rank %d cannot listen on a Unix socket: "
                  "%m", rank);
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

static int driver_ok(tacl__cipc_t *c)
{
    if (c->driver == 0) {
        c->driver = tacl__cu() != NULL ? 1 : -1;
        if (c->driver < 0)
            TACL_INFO(IPC, "cuda_ipc: rank %d serves no device memory: %s",
                      c->base.rank, tacl__cu_why());
    }
    return c->driver > 0;
}

static tacl_status_t setup(tacl__cipc_t *c, const tacl__tl_params_t *params)
{
    cipc_record_t *all = calloc((size_t)params->nranks, sizeof(*all));
    cipc_record_t mine = {0};
    tacl_status_t status;
    int listening = 0;

    if (all == NULL)
        return tacl__error(TACL_ERR_NO_MEMORY, IPC, "out of memory");
    if (getrandom(&mine.nonce, sizeof(mine.nonce), GRND_NONBLOCK) !=
        (ssize_t)sizeof(mine.nonce))
        mine.nonce = tacl__now_ns() ^ ((uint64_t)getpid() << 32);
    c->nonce = mine.nonce;
    if (c->base.nlocal > 1)
        c->lfd = make_listener(c->base.rank, mine.nonce, c->base.nlocal);
    mine.listens = c->lfd >= 0;
    all[c->base.rank] = mine;
    status = params->exchange(params->exchange_ctx, all, sizeof(*all));
    if (status != TACL_OK)
        goto out;
    for (int i = 0; i < c->base.nlocal; i++) {
        tacl__cipc_peer_t *peer = &c->peers[i];

        if (i == c->base.my_local)
            continue;
        peer->listens = all[peer->rank].listens && c->lfd >= 0;
        peer->nonce = all[peer->rank].nonce;
        listening += peer->listens;
    }
    if (listening == 0 && c->lfd >= 0) {
        close(c->lfd);
        c->lfd = -1;
    }
out:
    free(all);
    return status;
}

static void cipc_close(tacl__tl_t *tl)
{
    tacl__cipc_t *c = (tacl__cipc_t *)tl;

    tacl__cipc_devs_fini(c);
    for (int i = 0; c->peers && i < c->base.nlocal; i++) {
        tacl__cipc_peer_cleanup(&c->peers[i]);
        if (c->peers[i].fd >= 0)
            close(c->peers[i].fd);
    }
    free(c->peers);
    if (c->lfd >= 0)
        close(c->lfd);
    tacl__tl_base_free(&c->base);
}

static tacl_status_t cipc_init(const tacl__tl_params_t *params,
                               tacl__tl_t **tl_p)
{
    tacl__tl_base_t *base;
    tacl__cipc_t *c;
    tacl_status_t status;
    int listening = 0;

    status = tacl__tl_base_new(&tacl__tl_cuda_ipc_ops, sizeof(*c), params,
                               TACL_SUBSYS_IPC, tacl__cipc_fail_pending,
                               &base);
    if (status != TACL_OK)
        return status;
    c = (tacl__cipc_t *)base;
    c->lfd = -1;
    c->freed_cursor = tacl__cuda_mem_free_count();
    c->peers = tacl__tl_base_peers(base, sizeof(*c->peers),
                                   offsetof(tacl__cipc_peer_t, rank));
    if (c->peers == NULL) {
        cipc_close(&c->base.super);
        return TACL_ERR_NO_MEMORY;
    }
    for (int i = 0; i < c->base.nlocal; i++)
        c->peers[i].fd = -1;
    status = setup(c, params);
    if (status != TACL_OK) {
        cipc_close(&c->base.super);
        return status;
    }
    for (int i = 0; i < c->base.nlocal; i++)
        listening += c->peers[i].listens;
    TACL_INFO(IPC, "rank %d: cuda_ipc may reach %d of its %d neighbours "
              "(connected at the first device message with each)",
              c->base.rank, listening, c->base.nlocal - 1);
    *tl_p = &c->base.super;
    return TACL_OK;
}

/*
 * A neighbour that listens, while it has not hung up, when our driver
 * works: asked only for device messages, so this is where a process
 * first asks for CUDA here.
 */
static int cipc_reachable(tacl__tl_t *tl, int peer)
{
    tacl__cipc_t *c = (tacl__cipc_t *)tl;
    const tacl__cipc_peer_t *p;

    if (tacl__tl_base_where(&c->base, peer) != TACL__TL_PEER_NODE)
        return 0;
    p = &c->peers[c->base.local_of[peer]];
    return p->listens && !p->hung_up && driver_ok(c);
}

const tacl__transport_ops_t tacl__tl_cuda_ipc_ops = {
    .size = sizeof(tacl__transport_ops_t),
    .name = "cuda_ipc",
    .caps = TACL__TL_CAP_CUDA | TACL__TL_CAP_PROBE,
    .reach = TACL__TL_PEER_NODE,
    .init = cipc_init,
    .reachable = cipc_reachable,
    .send = tacl__cipc_send,
    .recv = tacl__cipc_recv,
    .progress = tacl__cipc_progress,
    .wait = tacl__cipc_wait,
    .probe = tacl__cipc_probe,
    .cancel_all = tacl__tl_base_cancel_all,
    .close = cipc_close,
};
