/*
 * The cuda_ipc transport: setup, reach and teardown (the protocol is in
 * cuda_ipc_proto.c, the opened allocations in cuda_ipc_cache.c; the
 * design in cuda_ipc.h).
 *
 * Setup is collective over the context and never fails for want of CUDA:
 *   1. every rank says whether it can serve (the CUDA driver works and it
 *      has neighbours) and, if so, listens on an abstract Unix socket
 *      named after a random nonce and its rank;
 *   2. when any rank can: on each node where every rank can, each rank
 *      connects to its neighbours of higher local index (sending a hello
 *      naming itself and the nonce it was told) and accepts those of lower
 *      index, each wait bounded by the timeout; every rank then says
 *      whether all its connections stand.
 * A node where any rank could not serve, or any connection failed, has no
 * cuda_ipc peers (reachable() says so, logged at INFO): its device
 * messages fail with the transport's "does not reach" error rather than
 * its host messages with the context's creation.  Without a driver (this
 * is what CPU-only machines see) the cost is one exchange.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
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

/** One rank's record in the setup exchanges. */
typedef struct {
    uint64_t nonce;            /* names its listening socket */
    int32_t usable;            /* it can serve and listens */
    int32_t ok;                /* step 2: all its connections stand */
} cipc_record_t;

/** What a connecting rank sends first. */
typedef struct {
    int32_t rank;
    int32_t pad;
    uint64_t nonce;            /* the listener's, as the exchange said */
} cipc_hello_t;

static socklen_t sock_addr(struct sockaddr_un *addr, uint64_t nonce,
                           int rank)
{
    int n;

    memset(addr, 0, sizeof(*addr));
    addr->sun_family = AF_UNIX;
    /* Abstract: sun_path[0] is NUL, nothing appears in the file system. */
    n = snprintf(addr->sun_path + 1, sizeof(addr->sun_path) - 1,
                 "tacl-cipc-%016llx-%d", (unsigned long long)nonce, rank);
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
                       (size_t)n);
}

static int set_nonblock(int fd)
{
    int flags = fcntl(fd, F_GETFL);

    return flags < 0 ? -1 : fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

/* A listening socket named after nonce and our rank; -1 (logged). */
static int make_listener(int rank, uint64_t nonce, int backlog)
{
    struct sockaddr_un addr;
    socklen_t len = sock_addr(&addr, nonce, rank);
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

/* Milliseconds left until deadline_ns, at least 0. */
static int ms_left(uint64_t deadline_ns)
{
    uint64_t now = tacl__now_ns();

    return now >= deadline_ns ? 0
                              : (int)TACL_MIN((deadline_ns - now) / 1000000 + 1,
                                              (uint64_t)1 << 30);
}

static int connect_peer(tacl__cipc_t *c, tacl__cipc_peer_t *peer,
                        uint64_t nonce)
{
    struct sockaddr_un addr;
    socklen_t len = sock_addr(&addr, nonce, peer->rank);
    cipc_hello_t hello = {.rank = c->base.rank, .nonce = nonce};
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

    if (fd < 0 || connect(fd, (struct sockaddr *)&addr, len) != 0 ||
        send(fd, &hello, sizeof(hello), MSG_NOSIGNAL) !=
            (ssize_t)sizeof(hello) ||
        set_nonblock(fd) != 0) {
        TACL_INFO(IPC, "cuda_ipc: rank %d cannot connect to rank %d: %m",
                  c->base.rank, peer->rank);
        if (fd >= 0)
            close(fd);
        return 0;
    }
    peer->fd = fd;
    return 1;
}

/* Accept the neighbours of lower local index; whether all came. */
static int accept_peers(tacl__cipc_t *c, int lfd, uint64_t nonce)
{
    uint64_t deadline = tacl__now_ns() + (uint64_t)(c->base.timeout_s * 1e9);
    int want = c->base.my_local, got = 0;

    while (got < want) {
        struct pollfd p = {.fd = lfd, .events = POLLIN};
        cipc_hello_t hello;
        tacl__cipc_peer_t *peer;
        int fd, local;

        if (poll(&p, 1, ms_left(deadline)) <= 0)
            break;
        fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0)
            continue;
        p = (struct pollfd){.fd = fd, .events = POLLIN};
        if (poll(&p, 1, ms_left(deadline)) <= 0 ||
            recv(fd, &hello, sizeof(hello), MSG_DONTWAIT) !=
                (ssize_t)sizeof(hello) ||
            hello.nonce != nonce || hello.rank < 0 ||
            hello.rank >= c->base.nranks ||
            (local = c->base.local_of[hello.rank]) < 0 ||
            local >= c->base.my_local ||
            c->peers[local].fd >= 0) {
            close(fd);
            continue;   /* not one of ours: ignore it */
        }
        peer = &c->peers[local];
        peer->fd = fd;
        got++;
    }
    if (got < want)
        TACL_INFO(IPC, "cuda_ipc: rank %d: %d of its %d lower neighbours "
                  "connected within the timeout", c->base.rank, got, want);
    return got == want;
}

static void drop_connections(tacl__cipc_t *c)
{
    for (int i = 0; i < c->base.nlocal; i++) {
        if (c->peers[i].fd >= 0)
            close(c->peers[i].fd);
        c->peers[i].fd = -1;
    }
}

static tacl_status_t setup(tacl__cipc_t *c, const tacl__tl_params_t *params)
{
    cipc_record_t *all = calloc((size_t)params->nranks, sizeof(*all));
    cipc_record_t mine = {0};
    tacl_status_t status;
    int lfd = -1, any = 0, node_ok = 1, ok = 1;

    if (all == NULL)
        return tacl__error(TACL_ERR_NO_MEMORY, IPC, "out of memory");
    if (getrandom(&mine.nonce, sizeof(mine.nonce), GRND_NONBLOCK) !=
        (ssize_t)sizeof(mine.nonce))
        mine.nonce = tacl__now_ns() ^ ((uint64_t)getpid() << 32);
    if (c->base.nlocal > 1 && tacl__cu() != NULL)
        lfd = make_listener(c->base.rank, mine.nonce, c->base.nlocal);
    else if (c->base.nlocal > 1)
        TACL_INFO(IPC, "cuda_ipc: rank %d serves no device memory: %s",
                  c->base.rank, tacl__cu_why());
    mine.usable = lfd >= 0;
    all[c->base.rank] = mine;
    status = params->exchange(params->exchange_ctx, all, sizeof(*all));
    if (status != TACL_OK)
        goto out;
    for (int r = 0; r < params->nranks; r++) {
        any |= all[r].usable;
        if (c->base.local_of[r] >= 0)
            node_ok &= all[r].usable;
    }
    if (!any)
        goto out;
    if (node_ok && c->base.nlocal > 1) {
        for (int i = c->base.my_local + 1; i < c->base.nlocal; i++)
            ok &= connect_peer(c, &c->peers[i],
                               all[c->peers[i].rank].nonce);
        ok &= accept_peers(c, lfd, mine.nonce);
    }
    mine.ok = ok;
    all[c->base.rank] = mine;
    status = params->exchange(params->exchange_ctx, all, sizeof(*all));
    if (status != TACL_OK)
        goto out;
    for (int r = 0; r < params->nranks; r++)
        if (c->base.local_of[r] >= 0 && !all[r].ok)
            ok = 0;
    if (!ok && node_ok)
        TACL_INFO(IPC, "cuda_ipc: a rank of this node could not connect to "
                  "its neighbours; device memory has no cuda_ipc here");
    if (!ok || !node_ok)
        drop_connections(c);
out:
    if (lfd >= 0)
        close(lfd);
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
    tacl__tl_base_free(&c->base);
}

static tacl_status_t cipc_init(const tacl__tl_params_t *params,
                               tacl__tl_t **tl_p)
{
    tacl__tl_base_t *base;
    tacl__cipc_t *c;
    tacl_status_t status;
    int connected = 0;

    status = tacl__tl_base_new(&tacl__tl_cuda_ipc_ops, sizeof(*c), params,
                               TACL_SUBSYS_IPC, tacl__cipc_fail_pending,
                               &base);
    if (status != TACL_OK)
        return status;
    c = (tacl__cipc_t *)base;
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
        connected += c->peers[i].fd >= 0;
    TACL_INFO(IPC, "rank %d: cuda_ipc reaches %d of its %d neighbours",
              c->base.rank, connected, c->base.nlocal - 1);
    *tl_p = &c->base.super;
    return TACL_OK;
}

/* A neighbour is reached only through a connection that stands. */
static int cipc_reachable(tacl__tl_t *tl, int peer)
{
    tacl__cipc_t *c = (tacl__cipc_t *)tl;

    return tacl__tl_base_where(&c->base, peer) == TACL__TL_PEER_NODE &&
           c->peers[c->base.local_of[peer]].fd >= 0;
}

const tacl__transport_ops_t tacl__tl_cuda_ipc_ops = {
    .size = sizeof(tacl__transport_ops_t),
    .name = "cuda_ipc",
    .caps = TACL__TL_CAP_CUDA,
    .reach = TACL__TL_PEER_NODE,
    .init = cipc_init,
    .reachable = cipc_reachable,
    .send = tacl__cipc_send,
    .recv = tacl__cipc_recv,
    .progress = tacl__cipc_progress,
    .wait = tacl__cipc_wait,
    .cancel_all = tacl__tl_base_cancel_all,
    .close = cipc_close,
};
