/*
 * TCP bootstrap (see bootstrap.h): rendezvous at rank 0, then a ring.
 *
 * Rendezvous.  The unique id holds a magic, a version, rank 0's IPv4
 * address and port, and a 64-bit nonce naming the communicator.  Rank 0
 * listens there (on the listener tacl__bootstrap_unique_id() opened, kept
 * in a process-wide registry keyed by the nonce, or on a port it binds for
 * an id made from an address).  Every other rank opens its own listener,
 * connects to rank 0 and sends a hello {magic, type, nonce, rank, nranks,
 * listening address}.  Rank 0 multiplexes the connections with poll(),
 * refuses a hello with a wrong magic or nonce or a different rank count
 * (that process gets a reply saying why; rank 0 keeps waiting for a proper
 * one), and once every rank has joined sends each of them the table of
 * listening addresses.  A rank that joins twice means the launcher gave
 * two processes one rank, so the rank it left out will never come: rank 0
 * then stops at once and tells the duplicate and every rank already
 * joined that rank R joined twice.  Rank 0 lists a listener of its
 * own there.  After the gather it closes the root listener of an id made
 * from an address, so that port (a torchrun MASTER_PORT) is free again;
 * the listener of an id it made itself is nobody else's port and stays
 * open until fini, so that a duplicate arriving after every rank joined
 * is told "rank R joined twice" (tacl__bootstrap_check answers it)
 * instead of being refused connections until its timeout.  Every rank
 * keeps its listener until fini: a shrink (bootstrap_shrink.c) meets the
 * survivors there.
 *
 * Ring.  Each rank connects to its successor, sends a ring hello, accepts
 * its predecessor and answers it; the acceptor checks the nonce and that
 * the hello comes from its predecessor.  bootstrap_ring.c runs the ring.
 *
 * Every wait polls against one deadline, timeout_s after init began: a
 * rank that never arrives makes rank 0 answer every waiting rank with a
 * timeout, and a missing rank 0 makes the others give up connecting.
 *
 * Threads: a bootstrap is used by one thread at a time; the caller
 * serializes calls on one bootstrap.  Distinct bootstraps are independent,
 * and the listener registry has its own lock.  All ranks of a job share
 * one byte order: messages are in host order except addresses and ports.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bootstrap.h"
#include "bootstrap_int.h"
#include "common.h"
#include "config.h"
#include "log.h"
#include "socket.h"

#define BOOT_MAGIC 0x4c434154u /* "TACL" in little-endian memory */
#define BOOT_VERSION 1
#define BOOT_ID_FROM_ADDR 0x1
/* Connections rank 0 reads hellos from at once. */
#define BOOT_MAX_PENDING 64

/* The unique id, stored at the start of tacl_unique_id_t.internal. */
typedef struct {
    uint32_t magic;
    uint16_t version;
    uint16_t flags;
    uint32_t addr; /* network byte order */
    uint16_t port; /* network byte order */
    uint16_t reserved;
    uint64_t nonce;
} boot_id_t;

_Static_assert(sizeof(boot_id_t) <= TACL_UNIQUE_ID_BYTES,
               "the bootstrap id must fit in tacl_unique_id_t");

enum { BOOT_HELLO_ROOT = 1, BOOT_HELLO_RING = 2 };

typedef struct {
    uint32_t magic;
    uint32_t type;
    uint64_t nonce;
    int32_t rank;
    int32_t nranks;
    uint32_t addr; /* listening address, network byte order */
    uint16_t port;
    uint16_t reserved;
} boot_hello_t;

/* Why a hello was refused, the status the refused rank returns, and what
 * it is told. */
#define BOOT_REASON_LIST(X)                                                  \
    X(NONE, TACL_OK, "accepted")                                             \
    X(MAGIC, TACL_ERR_INVALID_ARG, "the hello did not come from tacl")       \
    X(NONCE, TACL_ERR_INVALID_ARG,                                           \
      "its unique id belongs to another communicator")                      \
    X(NRANKS, TACL_ERR_INVALID_ARG, "it gave a different number of ranks")  \
    X(RANK, TACL_ERR_INVALID_ARG, "its rank is out of range")               \
    X(DUP, TACL_ERR_INVALID_USAGE,                                           \
      "another process already joined with the same rank")                  \
    X(TWICE, TACL_ERR_INVALID_USAGE,                                         \
      "a rank joined twice, so rank 0 stopped the init")                    \
    X(LATE, TACL_ERR_INVALID_USAGE, "every rank had already joined")        \
    X(PEER, TACL_ERR_INTERNAL, "it is not the expected ring neighbor")      \
    X(TIMEOUT, TACL_ERR_TIMEOUT,                                             \
      "rank 0 timed out waiting for the other ranks to join")

typedef enum {
#define BOOT_REASON_ENUM_(name, status, msg) BOOT_R_##name,
    BOOT_REASON_LIST(BOOT_REASON_ENUM_)
#undef BOOT_REASON_ENUM_
    BOOT_R_COUNT
} boot_reason_t;

static const struct {
    tacl_status_t status;
    const char *msg;
} boot_reasons[BOOT_R_COUNT] = {
#define BOOT_REASON_ENTRY_(name, status, msg) {status, msg},
    BOOT_REASON_LIST(BOOT_REASON_ENTRY_)
#undef BOOT_REASON_ENTRY_
};

typedef struct {
    uint32_t magic;
    int32_t reason;
    int32_t nranks;
    int32_t rank; /* DUP and TWICE: the rank that joined twice */
} boot_reply_t;

typedef tacl__boot_addr_t boot_addr_t;

/*
 * Listener registry: listeners opened by tacl__bootstrap_unique_id() wait
 * here until rank 0 of their communicator takes them in init.
 */
typedef struct boot_listener {
    struct boot_listener *next;
    uint64_t nonce;
    int fd;
} boot_listener_t;

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static boot_listener_t *registry;

static int registry_take(uint64_t nonce)
{
    boot_listener_t **pp, *l;
    int fd = -1;

    pthread_mutex_lock(&registry_lock);
    for (pp = &registry; *pp != NULL; pp = &(*pp)->next) {
        if ((*pp)->nonce == nonce) {
            l = *pp;
            *pp = l->next;
            fd = l->fd;
            free(l);
            break;
        }
    }
    pthread_mutex_unlock(&registry_lock);
    return fd;
}

static uint64_t boot_random_nonce(void)
{
    uint64_t nonce = 0;

    if (getrandom(&nonce, sizeof(nonce), GRND_NONBLOCK) != sizeof(nonce))
        nonce = tacl__now_ns() ^ ((uint64_t)getpid() << 32);
    return nonce;
}

/* Every process derives the same nonce from the same root address. */
static uint64_t boot_addr_nonce(uint32_t addr, uint16_t port)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    uint8_t bytes[6];

    memcpy(bytes, &addr, 4);
    memcpy(bytes + 4, &port, 2);
    for (size_t i = 0; i < sizeof(bytes); i++)
        h = (h ^ bytes[i]) * 0x100000001b3ull;
    return h;
}

static void boot_id_store(tacl_unique_id_t *id_p, const boot_id_t *id)
{
    memset(id_p, 0, sizeof(*id_p));
    memcpy(id_p->internal, id, sizeof(*id));
}

static void boot_id_addr(const boot_id_t *id, struct sockaddr_in *sa)
{
    memset(sa, 0, sizeof(*sa));
    sa->sin_family = AF_INET;
    sa->sin_addr.s_addr = id->addr;
    sa->sin_port = id->port;
}

tacl_status_t tacl__bootstrap_unique_id(tacl_unique_id_t *id_p)
{
    struct sockaddr_in sa = {.sin_family = AF_INET}, bound;
    boot_listener_t *l;
    boot_id_t id;
    tacl_status_t status;
    int fd;

    if (id_p == NULL)
        return tacl__error(TACL_ERR_INVALID_ARG, BOOT,
                           "the unique id pointer is NULL");
    status = tacl__sock_pick_addr(&sa.sin_addr);
    if (status != TACL_OK)
        return status;
    status = tacl__sock_listen(&sa, 0, &fd, &bound);
    if (status != TACL_OK)
        return status;
    l = malloc(sizeof(*l));
    if (l == NULL) {
        status = tacl__error(TACL_ERR_NO_MEMORY, BOOT,
                             "out of memory for a bootstrap listener");
        goto err_close_fd;
    }
    memset(&id, 0, sizeof(id));
    id.magic = BOOT_MAGIC;
    id.version = BOOT_VERSION;
    id.addr = bound.sin_addr.s_addr;
    id.port = bound.sin_port;
    id.nonce = boot_random_nonce();
    l->nonce = id.nonce;
    l->fd = fd;
    pthread_mutex_lock(&registry_lock);
    l->next = registry;
    registry = l;
    pthread_mutex_unlock(&registry_lock);
    boot_id_store(id_p, &id);
    return TACL_OK;

err_close_fd:
    close(fd);
    return status;
}

tacl_status_t tacl__bootstrap_id_from_addr(const char *host, int port,
                                           tacl_unique_id_t *id_p)
{
    struct in_addr addr;
    boot_id_t id;
    tacl_status_t status;

    if (host == NULL || id_p == NULL)
        return tacl__error(TACL_ERR_INVALID_ARG, BOOT,
                           "the host or the unique id pointer is NULL");
    if (port <= 0 || port > 65535)
        return tacl__error(TACL_ERR_INVALID_ARG, BOOT,
                           "root port %d is not in 1..65535", port);
    status = tacl__sock_resolve(host, &addr);
    if (status != TACL_OK)
        return status;
    memset(&id, 0, sizeof(id));
    id.magic = BOOT_MAGIC;
    id.version = BOOT_VERSION;
    id.flags = BOOT_ID_FROM_ADDR;
    id.addr = addr.s_addr;
    id.port = htons((uint16_t)port);
    id.nonce = boot_addr_nonce(id.addr, id.port);
    boot_id_store(id_p, &id);
    return TACL_OK;
}

/* A connection rank 0 (or a ring acceptor) reads a hello from. */
typedef struct {
    int fd;
    size_t got;
    boot_hello_t hello;
} boot_pending_t;

/* What one round of accepting hellos is for. */
typedef struct {
    const tacl__bootstrap_t *bs;
    uint32_t type;      /* BOOT_HELLO_ROOT or BOOT_HELLO_RING */
    int *fds;           /* ROOT: accepted socket per rank; RING: fds[0] */
    boot_addr_t *table; /* ROOT: listening address per rank */
    int want;           /* hellos still to accept */
    int twice;          /* ROOT: a rank that joined twice, or -1 */
    uint64_t deadline;
} boot_gather_t;

static void boot_reply(int fd, boot_reason_t reason, int nranks, int rank,
                       uint64_t deadline)
{
    boot_reply_t reply = {.magic = BOOT_MAGIC, .reason = (int32_t)reason,
                          .nranks = nranks, .rank = rank};

    /* Best effort: a peer that does not read its refusal learns by the
     * close that follows. */
    (void)tacl__sock_send_all(fd, &reply, sizeof(reply), deadline);
}

static boot_reason_t boot_judge(const boot_gather_t *g,
                                const boot_hello_t *h)
{
    const tacl__bootstrap_t *bs = g->bs;

    if (h->magic != BOOT_MAGIC)
        return BOOT_R_MAGIC;
    if (h->nonce != bs->nonce)
        return BOOT_R_NONCE;
    if (h->type != g->type)
        return h->type == BOOT_HELLO_ROOT ? BOOT_R_LATE : BOOT_R_PEER;
    if (h->nranks != bs->nranks)
        return BOOT_R_NRANKS;
    if (g->type == BOOT_HELLO_RING)
        return h->rank == (bs->rank + bs->nranks - 1) % bs->nranks
                   ? BOOT_R_NONE
                   : BOOT_R_PEER;
    if (h->rank <= 0 || h->rank >= bs->nranks)
        return BOOT_R_RANK;
    return g->fds[h->rank] >= 0 ? BOOT_R_DUP : BOOT_R_NONE;
}

/* A complete hello arrived on fd: keep the connection or refuse it. */
static void boot_decide(boot_gather_t *g, int fd, const boot_hello_t *h)
{
    boot_reason_t reason = boot_judge(g, h);
    uint64_t short_deadline = TACL_MIN(g->deadline,
                                       tacl__now_ns() + TACL_BOOT_SHORT_NS);

    if (reason != BOOT_R_NONE) {
        TACL_WARN(BOOT, "rank %d refused a connection that claims rank %d "
                  "of %d: %s", g->bs->rank, h->rank, h->nranks,
                  boot_reasons[reason].msg);
        boot_reply(fd, reason, g->bs->nranks, h->rank, short_deadline);
        close(fd);
        if (reason == BOOT_R_DUP)
            g->twice = h->rank;
        return;
    }
    if (g->type == BOOT_HELLO_RING) {
        g->fds[0] = fd;
        boot_reply(fd, BOOT_R_NONE, g->bs->nranks, -1, g->deadline);
    } else {
        g->fds[h->rank] = fd;
        g->table[h->rank].addr = h->addr;
        g->table[h->rank].port = h->port;
    }
    g->want--;
}

/* Read from the connections poll() found ready; drop closed ones. */
static void boot_read_pending(boot_gather_t *g, boot_pending_t *pend,
                              int *npend_p, const struct pollfd *pfds)
{
    tacl_status_t status;
    size_t n;

    for (int i = *npend_p - 1; i >= 0; i--) {
        boot_pending_t *p = &pend[i];

        if (pfds[i].revents == 0)
            continue;
        status = tacl__sock_recv_some(p->fd, (char *)&p->hello + p->got,
                                      sizeof(p->hello) - p->got, &n);
        p->got += status == TACL_OK ? n : 0;
        if (status == TACL_OK && p->got < sizeof(p->hello))
            continue;
        if (status == TACL_OK && g->want > 0 && g->twice < 0)
            boot_decide(g, p->fd, &p->hello);
        else
            close(p->fd);
        pend[i] = pend[--*npend_p];
    }
}

/*
 * Accept connections on listen_fd and read their hellos until g->want
 * hellos were accepted.  Returns TACL_ERR_TIMEOUT unrecorded.
 */
static tacl_status_t boot_gather(int listen_fd, boot_gather_t *g)
{
    boot_pending_t pend[BOOT_MAX_PENDING];
    struct pollfd pfds[BOOT_MAX_PENDING + 1];
    tacl_status_t status = TACL_OK;
    int npend = 0, lidx, fd, rc;

    while (g->want > 0 && g->twice < 0) {
        for (int i = 0; i < npend; i++)
            pfds[i] = (struct pollfd){.fd = pend[i].fd, .events = POLLIN};
        /* A full table stops accepting until a slot frees. */
        lidx = npend;
        pfds[lidx] = (struct pollfd){
            .fd = npend < BOOT_MAX_PENDING ? listen_fd : -1,
            .events = POLLIN};
        rc = poll(pfds, (nfds_t)lidx + 1, tacl__sock_ms_left(g->deadline));
        if (rc < 0 && errno != EINTR) {
            status = tacl__error(TACL_ERR_SYSTEM, BOOT, "poll() failed: %m");
            break;
        }
        if (rc <= 0) {
            if (tacl__now_ns() >= g->deadline) {
                status = TACL_ERR_TIMEOUT;
                break;
            }
            continue;
        }
        boot_read_pending(g, pend, &npend, pfds);
        if (pfds[lidx].revents == 0 || g->want == 0 || g->twice >= 0)
            continue;
        while (npend < BOOT_MAX_PENDING) {
            status = tacl__sock_accept(listen_fd, &fd);
            if (status != TACL_OK || fd < 0)
                break;
            pend[npend++] = (boot_pending_t){.fd = fd};
        }
        if (status != TACL_OK)
            break;
    }
    for (int i = 0; i < npend; i++)
        close(pend[i].fd);
    return status;
}

static void boot_close_all(int *fds, int count)
{
    for (int i = 0; i < count; i++) {
        if (fds[i] >= 0)
            close(fds[i]);
        fds[i] = -1;
    }
}

/* Rank 0: collect every rank's hello, then send each the address table. */
static tacl_status_t boot_root_gather(tacl__bootstrap_t *bs, int listen_fd,
                                      boot_addr_t *table, uint64_t deadline)
{
    boot_reply_t reply = {.magic = BOOT_MAGIC, .reason = BOOT_R_NONE,
                          .nranks = bs->nranks};
    boot_gather_t g = {.bs = bs, .type = BOOT_HELLO_ROOT, .table = table,
                       .want = bs->nranks - 1, .twice = -1,
                       .deadline = deadline};
    tacl_status_t status;
    int missing = -1;

    g.fds = malloc(sizeof(int) * (size_t)bs->nranks);
    if (g.fds == NULL)
        return tacl__error(TACL_ERR_NO_MEMORY, BOOT,
                           "out of memory for %d bootstrap peers",
                           bs->nranks);
    for (int r = 0; r < bs->nranks; r++)
        g.fds[r] = -1;
    status = boot_gather(listen_fd, &g);
    if (status == TACL_OK && g.twice >= 0) {
        for (int r = 1; r < bs->nranks; r++)
            if (g.fds[r] >= 0)
                boot_reply(g.fds[r], BOOT_R_TWICE, bs->nranks, g.twice,
                           tacl__now_ns() + TACL_BOOT_SHORT_NS);
        status = tacl__error(TACL_ERR_INVALID_USAGE, BOOT,
                             "rank %d joined twice: two processes claim "
                             "rank %d of %d, so rank 0 stops the init (give "
                             "every process its own rank)", g.twice,
                             g.twice, bs->nranks);
        goto out_close;
    }
    if (status == TACL_ERR_TIMEOUT) {
        for (int r = 1; r < bs->nranks && missing < 0; r++)
            missing = g.fds[r] < 0 ? r : -1;
        for (int r = 1; r < bs->nranks; r++)
            if (g.fds[r] >= 0)
                boot_reply(g.fds[r], BOOT_R_TIMEOUT, bs->nranks, -1,
                           tacl__now_ns() + TACL_BOOT_SHORT_NS);
        status = tacl__error(TACL_ERR_TIMEOUT, BOOT,
                             "rank 0 timed out after %.1f s with %d of %d "
                             "ranks joined (rank %d is missing); start "
                             "every rank or raise TACL_TIMEOUT",
                             bs->timeout_s, bs->nranks - g.want, bs->nranks,
                             missing);
        goto out_close;
    }
    if (status != TACL_OK)
        goto out_close;
    for (int r = 1; r < bs->nranks; r++) {
        status = tacl__sock_send_all(g.fds[r], &reply, sizeof(reply),
                                     deadline);
        if (status == TACL_OK)
            status = tacl__sock_send_all(g.fds[r], table,
                                         sizeof(*table) *
                                             (size_t)bs->nranks,
                                         deadline);
        if (status != TACL_OK) {
            status = tacl__error(status, BOOT,
                                 "rank 0 could not send the address table "
                                 "to rank %d (%s)", r,
                                 tacl_status_string(status));
            goto out_close;
        }
    }
out_close:
    boot_close_all(g.fds, bs->nranks);
    free(g.fds);
    return status;
}

/* Read a reply and turn a refusal into the status it carries. */
static tacl_status_t boot_read_reply(tacl__bootstrap_t *bs, int fd,
                                     int peer, uint64_t deadline)
{
    boot_reply_t reply;
    tacl_status_t status;

    status = tacl__sock_recv_all(fd, &reply, sizeof(reply), deadline);
    if (status == TACL_ERR_TIMEOUT)
        return tacl__error(status, BOOT,
                           "rank %d timed out after %.1f s waiting for rank "
                           "%d; start every rank or raise TACL_TIMEOUT",
                           bs->rank, bs->timeout_s, peer);
    if (status != TACL_OK)
        return tacl__error(status, BOOT,
                           "rank %d closed the connection while rank %d "
                           "was joining", peer, bs->rank);
    if (reply.magic != BOOT_MAGIC || reply.reason < 0 ||
        reply.reason >= BOOT_R_COUNT)
        return tacl__error(TACL_ERR_REMOTE, BOOT,
                           "rank %d answered rank %d with a malformed "
                           "reply", peer, bs->rank);
    if ((reply.reason == BOOT_R_DUP || reply.reason == BOOT_R_TWICE) &&
        reply.rank >= 0 && reply.rank < bs->nranks)
        return tacl__error(boot_reasons[reply.reason].status, BOOT,
                           "rank %d joined twice: rank 0 %s rank %d of %d "
                           "(give every process its own rank)", reply.rank,
                           reply.reason == BOOT_R_DUP
                               ? "already has a process with"
                               : "saw two processes claim",
                           reply.rank, bs->nranks);
    if (reply.reason != BOOT_R_NONE)
        return tacl__error(boot_reasons[reply.reason].status, BOOT,
                           "rank %d refused rank %d of %d (it has %d "
                           "ranks): %s", peer, bs->rank, bs->nranks,
                           reply.nranks, boot_reasons[reply.reason].msg);
    return TACL_OK;
}

/* Rank > 0: join at rank 0, receive the address table. */
static tacl_status_t boot_join(tacl__bootstrap_t *bs, const boot_id_t *id,
                               int *listen_fd_p, boot_addr_t *table,
                               uint64_t deadline)
{
    struct sockaddr_in root, local, bound;
    socklen_t len = sizeof(local);
    boot_hello_t hello;
    tacl_status_t status;
    int fd, listen_fd;

    boot_id_addr(id, &root);
    status = tacl__sock_connect(&root, 1, deadline, &fd);
    if (status != TACL_OK)
        return status;
    /* Listen on the address this host uses to reach rank 0. */
    if (getsockname(fd, (struct sockaddr *)&local, &len) != 0) {
        status = tacl__error(TACL_ERR_SYSTEM, BOOT,
                             "getsockname() failed: %m");
        goto err_close_fd;
    }
    local.sin_port = 0;
    status = tacl__sock_listen(&local, 0, &listen_fd, &bound);
    if (status != TACL_OK)
        goto err_close_fd;
    hello = (boot_hello_t){.magic = BOOT_MAGIC, .type = BOOT_HELLO_ROOT,
                           .nonce = bs->nonce, .rank = bs->rank,
                           .nranks = bs->nranks,
                           .addr = bound.sin_addr.s_addr,
                           .port = bound.sin_port};
    status = tacl__sock_send_all(fd, &hello, sizeof(hello), deadline);
    if (status != TACL_OK) {
        status = tacl__error(status, BOOT,
                             "rank %d lost rank 0 while sending its hello",
                             bs->rank);
        goto err_close_listen;
    }
    status = boot_read_reply(bs, fd, 0, deadline);
    if (status != TACL_OK)
        goto err_close_listen;
    status = tacl__sock_recv_all(fd, table,
                                 sizeof(*table) * (size_t)bs->nranks,
                                 deadline);
    if (status != TACL_OK) {
        status = tacl__error(status, BOOT,
                             "rank %d did not receive the address table "
                             "from rank 0 (%s)", bs->rank,
                             tacl_status_string(status));
        goto err_close_listen;
    }
    close(fd);
    *listen_fd_p = listen_fd;
    return TACL_OK;

err_close_listen:
    close(listen_fd);
err_close_fd:
    close(fd);
    return status;
}

/* Connect to the successor, accept the predecessor, check both ways. */
static tacl_status_t boot_ring(tacl__bootstrap_t *bs, int listen_fd,
                               const boot_addr_t *table, uint64_t deadline)
{
    int succ = (bs->rank + 1) % bs->nranks;
    int pred = (bs->rank + bs->nranks - 1) % bs->nranks;
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_addr.s_addr = table[succ].addr,
                             .sin_port = table[succ].port};
    boot_hello_t hello = {.magic = BOOT_MAGIC, .type = BOOT_HELLO_RING,
                          .nonce = bs->nonce, .rank = bs->rank,
                          .nranks = bs->nranks};
    int succ_fd, pred_fd = -1;
    boot_gather_t g = {.bs = bs, .type = BOOT_HELLO_RING, .fds = &pred_fd,
                       .want = 1, .twice = -1, .deadline = deadline};
    tacl_status_t status;

    status = tacl__sock_connect(&sa, 0, deadline, &succ_fd);
    if (status != TACL_OK)
        return status;
    status = tacl__sock_send_all(succ_fd, &hello, sizeof(hello), deadline);
    if (status != TACL_OK) {
        status = tacl__error(status, BOOT,
                             "rank %d lost its ring successor rank %d",
                             bs->rank, succ);
        goto err_close_succ;
    }
    status = boot_gather(listen_fd, &g);
    if (status == TACL_ERR_TIMEOUT)
        status = tacl__error(status, BOOT,
                             "rank %d timed out waiting for its ring "
                             "predecessor rank %d", bs->rank, pred);
    if (status != TACL_OK)
        goto err_close_succ;
    status = boot_read_reply(bs, succ_fd, succ, deadline);
    if (status != TACL_OK)
        goto err_close_pred;
    bs->link[TACL_BOOT_PRED] = (tacl__boot_link_t){.fd = pred_fd, .peer = pred};
    bs->link[TACL_BOOT_SUCC] = (tacl__boot_link_t){.fd = succ_fd, .peer = succ};
    return TACL_OK;

err_close_pred:
    close(pred_fd);
err_close_succ:
    close(succ_fd);
    return status;
}

/* Rank 0's listener: the one the unique id opened, or a fresh bind. */
static tacl_status_t boot_root_listener(const boot_id_t *id, int *fd_p)
{
    struct sockaddr_in sa, bound;
    int fd = registry_take(id->nonce);

    if (fd >= 0) {
        *fd_p = fd;
        return TACL_OK;
    }
    if (!(id->flags & BOOT_ID_FROM_ADDR))
        TACL_INFO(BOOT, "this process did not create the unique id; rank 0 "
                  "binds its address again");
    boot_id_addr(id, &sa);
    return tacl__sock_listen(&sa, 1, fd_p, &bound);
}

/*
 * Rank 0 gathers at the root listener but puts a listener of its own in
 * the table: the ring and a later shrink meet rank 0 there, and the root
 * address (a torchrun MASTER_PORT) is free again once init returns.
 */
static tacl_status_t boot_own_listener(const boot_id_t *id,
                                       boot_addr_t *mine, int *fd_p)
{
    struct sockaddr_in sa, bound;
    tacl_status_t status;

    boot_id_addr(id, &sa);
    sa.sin_port = 0;
    status = tacl__sock_listen(&sa, 0, fd_p, &bound);
    if (status == TACL_OK)
        *mine = (boot_addr_t){.addr = bound.sin_addr.s_addr,
                              .port = bound.sin_port};
    return status;
}

tacl_status_t tacl__bootstrap_init(const tacl_unique_id_t *id, int rank,
                                   int nranks, double timeout_s,
                                   tacl__bootstrap_t **bs_p)
{
    char str[TACL_SOCK_ADDR_STRLEN];
    struct sockaddr_in root;
    boot_addr_t *table = NULL;
    tacl__bootstrap_t *bs;
    tacl_status_t status;
    uint64_t start = tacl__now_ns(), deadline;
    int listen_fd = -1;
    boot_id_t bid;

    if (id == NULL || bs_p == NULL)
        return tacl__error(TACL_ERR_INVALID_ARG, BOOT,
                           "the unique id or the bootstrap pointer is NULL");
    if (nranks < 1 || rank < 0 || rank >= nranks)
        return tacl__error(TACL_ERR_INVALID_ARG, BOOT,
                           "rank %d of %d ranks is invalid: need nranks >= "
                           "1 and 0 <= rank < nranks", rank, nranks);
    memcpy(&bid, id->internal, sizeof(bid));
    if (bid.magic != BOOT_MAGIC || bid.version != BOOT_VERSION ||
        bid.port == 0)
        return tacl__error(TACL_ERR_INVALID_ARG, BOOT,
                           "the unique id is not valid (no tacl magic or a "
                           "different version); pass the id that "
                           "tacl_get_unique_id() produced on rank 0");
    if (!(timeout_s > 0))
        timeout_s = tacl__config_double(TACL_CFG_TIMEOUT);
    /* A year is forever here, and keeps the deadline arithmetic sane. */
    timeout_s = TACL_MIN(timeout_s, 365.0 * 86400.0);
    deadline = start + (uint64_t)(timeout_s * 1e9);
    bs = calloc(1, sizeof(*bs));
    if (bs == NULL)
        return tacl__error(TACL_ERR_NO_MEMORY, BOOT,
                           "out of memory for a bootstrap");
    bs->rank = rank;
    bs->nranks = nranks;
    bs->timeout_s = timeout_s;
    bs->nonce = bid.nonce;
    bs->failed_rank = -1;
    bs->listen_fd = -1;
    bs->root_fd = -1;
    bs->timed_out = calloc((size_t)nranks, 1);
    if (bs->timed_out == NULL) {
        status = tacl__error(TACL_ERR_NO_MEMORY, BOOT,
                             "out of memory for a bootstrap");
        goto err_free_bs;
    }
    bs->link[TACL_BOOT_PRED].fd = bs->link[TACL_BOOT_SUCC].fd = -1;
    if (rank == 0) {
        status = boot_root_listener(&bid, &listen_fd);
        if (status != TACL_OK)
            goto err_free_bs;
    }
    if (nranks == 1) {
        /* Nobody to meet, now or in a shrink. */
        close(listen_fd);
        listen_fd = -1;
        goto out_done;
    }
    table = calloc((size_t)nranks, sizeof(*table));
    if (table == NULL) {
        status = tacl__error(TACL_ERR_NO_MEMORY, BOOT,
                             "out of memory for %d addresses", nranks);
        goto err_close_listen;
    }
    if (rank == 0) {
        int own_fd = -1;

        status = boot_own_listener(&bid, &table[0], &own_fd);
        if (status == TACL_OK)
            status = boot_root_gather(bs, listen_fd, table, deadline);
        /* An id's own listener is nobody else's port: keep it to tell a
         * late duplicate what it is; a root address is freed again. */
        if (status == TACL_OK && !(bid.flags & BOOT_ID_FROM_ADDR))
            bs->root_fd = listen_fd;
        else
            close(listen_fd);
        listen_fd = own_fd;
    } else {
        status = boot_join(bs, &bid, &listen_fd, table, deadline);
    }
    if (status != TACL_OK)
        goto err_free_table;
    status = boot_ring(bs, listen_fd, table, deadline);
    if (status != TACL_OK) {
        if (bs->root_fd >= 0)
            close(bs->root_fd);
        goto err_free_table;
    }
out_done:
    /* A shrink meets the survivors at these listeners. */
    bs->listen_fd = listen_fd;
    bs->table = table;
    boot_id_addr(&bid, &root);
    TACL_INFO(BOOT, "rank %d of %d joined the bootstrap at %s in %.3f s",
              rank, nranks, tacl__sock_addr_str(&root, str),
              (double)(tacl__now_ns() - start) / 1e9);
    *bs_p = bs;
    return TACL_OK;

err_free_table:
    free(table);
err_close_listen:
    if (listen_fd >= 0)
        close(listen_fd);
err_free_bs:
    free(bs->timed_out);
    free(bs);
    return status;
}

void tacl__boot_refuse_late(tacl__bootstrap_t *bs)
{
    boot_hello_t h;
    boot_reason_t reason;
    uint64_t deadline = tacl__now_ns() + TACL_BOOT_SHORT_NS;
    int fd;

    if (bs->root_fd < 0 || tacl__sock_accept(bs->root_fd, &fd) != TACL_OK ||
        fd < 0)
        return;
    if (tacl__sock_recv_all(fd, &h, sizeof(h), deadline) == TACL_OK) {
        if (h.magic != BOOT_MAGIC)
            reason = BOOT_R_MAGIC;
        else if (h.nonce != bs->nonce)
            reason = BOOT_R_NONCE;
        else if (h.nranks != bs->nranks)
            reason = BOOT_R_NRANKS;
        else if (h.rank <= 0 || h.rank >= bs->nranks)
            reason = BOOT_R_RANK;
        else
            reason = BOOT_R_DUP; /* every rank joined: it has one already */
        TACL_WARN(BOOT, "rank 0 refused a process that claims rank %d of "
                  "%d after every rank joined: %s", h.rank, h.nranks,
                  boot_reasons[reason].msg);
        boot_reply(fd, reason, bs->nranks, h.rank, deadline);
    }
    close(fd);
}

int tacl__bootstrap_rank(const tacl__bootstrap_t *bs)
{
    return bs->rank;
}

int tacl__bootstrap_nranks(const tacl__bootstrap_t *bs)
{
    return bs->nranks;
}
