/*
 * The cuda_ipc transport's connections (cuda_ipc.h): one pair at a time,
 * at the pair's first device message (tacl__cipc_want): the rank of lower
 * local index connects to its peer's abstract Unix socket and names
 * itself in a hello; the higher one accepts when one of its posts waits
 * for the pair.  Below the protocol (cuda_ipc_proto.c) and the setup
 * (cuda_ipc.c), which both call it; it calls neither.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common.h"
#include "cuda_ipc.h"
#include "cuda_mem.h"
#include "log.h"

/** What a connecting rank sends first. */
typedef struct {
    int32_t rank;
    int32_t pad;
    uint64_t nonce;            /* the listener's, as the exchange said */
} cipc_hello_t;

/* How long an accepted connection may take to name itself. */
#define CIPC_HELLO_MS 1000

socklen_t tacl__cipc_sock_addr(struct sockaddr_un *addr, uint64_t nonce,
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

/* A listening socket named after nonce and our rank; -1 (logged). */
/* Whether this process's CUDA driver works, asked once. */
static void peer_connected(tacl__cipc_t *c, tacl__cipc_peer_t *peer, int fd)
{
    peer->fd = fd;
    if (peer->want) {
        peer->want = 0;
        c->nwant--;
    }
    TACL_INFO(IPC, "cuda_ipc: rank %d connected to rank %d", c->base.rank,
              peer->rank);
}

/* Connect to a neighbour of higher local index: 1 connected, 0 try again
 * later (its backlog is full), or a negative status. */
static int connect_peer(tacl__cipc_t *c, tacl__cipc_peer_t *peer)
{
    struct sockaddr_un addr;
    socklen_t len = tacl__cipc_sock_addr(&addr, peer->nonce, peer->rank);
    cipc_hello_t hello = {.rank = c->base.rank, .nonce = peer->nonce};
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK,
                    0);
    int ok = fd >= 0;

    if (ok && connect(fd, (struct sockaddr *)&addr, len) != 0) {
        if (errno == EAGAIN) {
            close(fd);
            return 0;
        }
        ok = 0;
    }
    /* A fresh connection has room for its first message. */
    if (ok && send(fd, &hello, sizeof(hello), MSG_NOSIGNAL) !=
                  (ssize_t)sizeof(hello))
        ok = 0;
    if (!ok) {
        tacl_status_t st = tacl__error_peer(peer->rank, IPC,
                                            "rank %d cannot connect to rank "
                                            "%d's cuda_ipc socket: %m (did "
                                            "it exit?)", c->base.rank,
                                            peer->rank);
        if (fd >= 0)
            close(fd);
        return st;
    }
    peer_connected(c, peer, fd);
    return 1;
}

/* Take the connections waiting on our socket: how many, or a status. */
static int accept_peers(tacl__cipc_t *c)
{
    int got = 0;

    for (;;) {
        struct pollfd p;
        cipc_hello_t hello;
        int fd, local;

        fd = accept4(c->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            return got;   /* EAGAIN: nobody else waits */
        }
        /* The hello follows the connect at once. */
        p = (struct pollfd){.fd = fd, .events = POLLIN};
        if (poll(&p, 1, CIPC_HELLO_MS) <= 0 ||
            recv(fd, &hello, sizeof(hello), MSG_DONTWAIT) !=
                (ssize_t)sizeof(hello) ||
            hello.nonce != c->nonce || hello.rank < 0 ||
            hello.rank >= c->base.nranks ||
            (local = c->base.local_of[hello.rank]) < 0 ||
            local >= c->base.my_local || c->peers[local].fd >= 0) {
            close(fd);
            continue;   /* not one of ours: ignore it */
        }
        peer_connected(c, &c->peers[local], fd);
        got++;
    }
}

tacl_status_t tacl__cipc_want(tacl__cipc_t *c, tacl__cipc_peer_t *peer)
{
    int n;

    if (peer->fd >= 0 || peer->want || peer->hung_up)
        return TACL_OK;
    peer->want = 1;
    c->nwant++;
    n = tacl__cipc_connect_pending(c);
    return n < 0 ? (tacl_status_t)n : TACL_OK;
}

int tacl__cipc_connect_pending(tacl__cipc_t *c)
{
    int events = 0, accept = 0;

    for (int i = 0; i < c->base.nlocal && c->nwant > 0; i++) {
        tacl__cipc_peer_t *peer = &c->peers[i];
        int n;

        if (!peer->want)
            continue;
        if (i < c->base.my_local) {
            accept = 1;
            continue;
        }
        n = connect_peer(c, peer);
        if (n < 0)
            return n;
        events += n;
    }
    if (accept && c->lfd >= 0)
        events += accept_peers(c);
    return events;
}

