/*
 * The shrink rendezvous (see bootstrap.h): the survivors of a failure meet
 * at the listeners every rank kept open after init, without the ring,
 * which a death has cut.
 *
 * Death is read from the kernel: a process that is gone has no listener,
 * so a connection to its address is refused, and a connection that waited
 * in its listener's queue is reset when it died.  A live process keeps
 * its listener, so a connection to it is accepted by the kernel even
 * before the process looks.  That is the same knowledge ULFM's failure
 * detector needs, without a heartbeat.
 *
 * Client.  A member tries the members below it in rank order: refused
 * means dead, go on; accepted means the lowest live member, the leader:
 * send a hello {magic, index, key} and wait for the reply.  An end of
 * file instead of a reply means the leader died meanwhile: go on to the
 * next.  A member with no live member below it leads.
 *
 * Leader.  It connects once to every member above it: refused means
 * dead, accepted is kept open as a watch that a later death resets.  It
 * accepts hellos on its listener until every member above it either said
 * hello or is dead (a member that said hello and then hung up is dead
 * too), then makes a fresh unique id (it is the new rank 0, so the id's
 * listener is its own) and sends each survivor the id, its new rank (its
 * position among the survivors, old order kept) and the new size.
 *
 * Limits.  A host that is down (rather than a process) neither refuses
 * nor accepts: the connection attempts go on until the deadline and the
 * shrink fails with TACL_ERR_TIMEOUT.  A survivor that dies after the
 * leader answered makes the new communicator's init fail instead.  Every
 * wait is bounded by the bootstrap's timeout.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bootstrap.h"
#include "bootstrap_int.h"
#include "common.h"
#include "log.h"
#include "socket.h"

#define SHRINK_MAGIC 0x4b524853u /* "SHRK" in little-endian memory */
/* How long one connection attempt to a member may take. */
#define SHRINK_CONNECT_NS (500 * 1000000ull)
/* Refusals in a row, this far apart, that make a member dead. */
#define SHRINK_REFUSALS 4
#define SHRINK_REFUSAL_GAP_NS (25 * 1000000L)
/* How often the leader wakes to retry members that did not answer. */
#define SHRINK_POLL_MS 20

typedef struct {
    uint32_t magic;
    int32_t index; /* the sender's rank in the old communicator */
    uint64_t key;
} shrink_hello_t;

typedef struct {
    uint32_t magic;
    int32_t new_rank;
    int32_t new_size;
    int32_t reserved;
    tacl_unique_id_t id;
} shrink_reply_t;

/* What the leader knows of a member above it. */
enum { MEMBER_UNKNOWN = 0, MEMBER_WATCHED, MEMBER_JOINED, MEMBER_DEAD };

typedef struct {
    int state;
    int fd;     /* WATCHED: our probe; JOINED: its hello's connection */
} shrink_member_t;

/* An accepted connection whose hello is not complete yet. */
typedef struct {
    int fd;
    size_t got;
    shrink_hello_t hello;
} shrink_pending_t;

typedef enum { PROBE_ALIVE, PROBE_DEAD, PROBE_SILENT } probe_t;

/*
 * Connect to a member's listener: ALIVE with *fd_p, DEAD when refused or
 * reset, SILENT when nothing answered in time.
 */
static probe_t shrink_probe(const tacl__bootstrap_t *bs, int brank,
                            uint64_t deadline, int *fd_p)
{
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_addr.s_addr = bs->table[brank].addr,
                             .sin_port = bs->table[brank].port};
    socklen_t len = sizeof(int);
    int fd, err = 0;

    fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return PROBE_SILENT;
    if (connect(fd, (const struct sockaddr *)&sa, sizeof(sa)) != 0) {
        err = errno;
        if (err == EINPROGRESS || err == EINTR) {
            if (tacl__sock_wait(fd, POLLOUT, deadline) != TACL_OK)
                err = ETIMEDOUT;
            else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
                err = errno;
        }
    }
    if (err == 0) {
        *fd_p = fd;
        return PROBE_ALIVE;
    }
    close(fd);
    return err == ECONNREFUSED || err == ECONNRESET ? PROBE_DEAD
                                                    : PROBE_SILENT;
}

/*
 * A refusal is death only when it repeats, SHRINK_REFUSALS times over
 * about 75 ms: a wrong verdict would split the survivors into two
 * communicators, and the repeat costs a live rank nothing (its listener
 * accepts at once), only a dead one.
 */
static probe_t shrink_probe_sure(const tacl__bootstrap_t *bs, int brank,
                                 uint64_t deadline, int *fd_p)
{
    const struct timespec pause = {.tv_nsec = SHRINK_REFUSAL_GAP_NS};
    probe_t p = PROBE_DEAD;

    for (int k = 0; k < SHRINK_REFUSALS && p == PROBE_DEAD; k++) {
        if (k > 0)
            nanosleep(&pause, NULL);
        p = shrink_probe(bs, brank, deadline, fd_p);
    }
    return p;
}

/* Whether a connection we only read from has ended (or sent junk). */
static int shrink_hung_up(int fd)
{
    char c;
    size_t n;

    return tacl__sock_recv_some(fd, &c, 1, &n) != TACL_OK || n > 0;
}

static uint64_t shrink_attempt_deadline(uint64_t deadline)
{
    return TACL_MIN(deadline, tacl__now_ns() + SHRINK_CONNECT_NS);
}

/* Probe every member still unknown; the live ones become watched. */
static void leader_probe(const tacl__bootstrap_t *bs, const int *members,
                         shrink_member_t *m, int n, uint64_t deadline)
{
    for (int i = 0; i < n; i++) {
        probe_t p;
        int fd;

        if (m[i].state != MEMBER_UNKNOWN)
            continue;
        p = shrink_probe_sure(bs, members[i],
                              shrink_attempt_deadline(deadline), &fd);
        if (p == PROBE_DEAD) {
            TACL_INFO(BOOT, "shrink: rank %d of the communicator refuses "
                      "connections: it is gone", i);
            m[i].state = MEMBER_DEAD;
        }
        if (p == PROBE_ALIVE)
            m[i] = (shrink_member_t){.state = MEMBER_WATCHED, .fd = fd};
    }
}

/* A complete hello: a member joins, or the connection is dropped. */
static void leader_hello(shrink_member_t *m, int n, int me, uint64_t key,
                         shrink_pending_t *p)
{
    int i = p->hello.index;

    if (p->hello.magic != SHRINK_MAGIC || p->hello.key != key || i <= me ||
        i >= n || m[i].state == MEMBER_JOINED || m[i].state == MEMBER_DEAD) {
        TACL_INFO(BOOT, "shrink: the leader drops a hello from rank %d "
                  "(state %d)", i, i > me && i < n ? m[i].state : -1);
        close(p->fd);
        return;
    }
    if (m[i].state == MEMBER_WATCHED)
        close(m[i].fd);
    m[i] = (shrink_member_t){.state = MEMBER_JOINED, .fd = p->fd};
}

static int leader_waiting(const shrink_member_t *m, int n)
{
    int first = -1;

    for (int i = n - 1; i >= 0; i--)
        if (m[i].state == MEMBER_UNKNOWN || m[i].state == MEMBER_WATCHED)
            first = i;
    return first;
}

/* One round: wait for events, accept hellos, notice deaths. */
static tacl_status_t leader_round(tacl__bootstrap_t *bs, shrink_member_t *m,
                                  int n, int me, uint64_t key,
                                  shrink_pending_t *pend, int *npend_p)
{
    struct pollfd *pfds = malloc(sizeof(*pfds) * (size_t)(n + *npend_p + 1));
    int nm = 0, lidx, rc, fd;
    tacl_status_t status = TACL_OK;

    if (pfds == NULL)
        return tacl__error(TACL_ERR_NO_MEMORY, BOOT, "out of memory");
    for (int i = 0; i < n; i++)
        pfds[i] = (struct pollfd){
            .fd = (i != me && (m[i].state == MEMBER_WATCHED ||
                               m[i].state == MEMBER_JOINED)) ? m[i].fd : -1,
            .events = POLLIN};
    nm = n;
    for (int k = 0; k < *npend_p; k++)
        pfds[nm + k] = (struct pollfd){.fd = pend[k].fd, .events = POLLIN};
    pfds[nm + *npend_p] = (struct pollfd){.fd = bs->listen_fd,
                                          .events = POLLIN};
    lidx = nm + *npend_p;
    rc = poll(pfds, (nfds_t)(lidx + 1), SHRINK_POLL_MS);
    if (rc < 0 && errno != EINTR)
        status = tacl__error(TACL_ERR_SYSTEM, BOOT, "poll() failed: %m");
    for (int i = 0; rc > 0 && i < n; i++) {
        if (pfds[i].revents == 0 || !shrink_hung_up(m[i].fd))
            continue;
        TACL_INFO(BOOT, "shrink: rank %d of the communicator is gone", i);
        close(m[i].fd);
        m[i] = (shrink_member_t){.state = MEMBER_DEAD, .fd = -1};
    }
    for (int k = *npend_p - 1; rc > 0 && k >= 0; k--) {
        shrink_pending_t *p = &pend[k];
        size_t got;

        if (pfds[nm + k].revents == 0)
            continue;
        if (tacl__sock_recv_some(p->fd, (char *)&p->hello + p->got,
                                 sizeof(p->hello) - p->got, &got) != TACL_OK)
            close(p->fd);
        else if ((p->got += got) == sizeof(p->hello))
            leader_hello(m, n, me, key, p);
        else
            continue;
        pend[k] = pend[--*npend_p];
    }
    while (rc > 0 && pfds[lidx].revents != 0 && *npend_p < n) {
        if (tacl__sock_accept(bs->listen_fd, &fd) != TACL_OK || fd < 0)
            break;
        pend[(*npend_p)++] = (shrink_pending_t){.fd = fd};
    }
    free(pfds);
    return status;
}

/* Answer every survivor; returns the new size. */
static tacl_status_t leader_answer(tacl__bootstrap_t *bs, shrink_member_t *m,
                                   int n, int me, uint64_t deadline,
                                   tacl_unique_id_t *id_p, int *size_p)
{
    shrink_reply_t reply = {.magic = SHRINK_MAGIC};
    tacl_status_t status;
    int size = 0;

    for (int i = 0; i < n; i++)
        size += i == me || m[i].state == MEMBER_JOINED;
    status = tacl__bootstrap_unique_id(&reply.id);
    if (status != TACL_OK)
        return status;
    reply.new_size = size;
    reply.new_rank = 1;
    for (int i = me + 1; i < n; i++) {
        if (m[i].state != MEMBER_JOINED)
            continue;
        /* A survivor that died since makes the new init fail for all. */
        if (tacl__sock_send_all(m[i].fd, &reply, sizeof(reply),
                                shrink_attempt_deadline(deadline)) !=
            TACL_OK)
            TACL_WARN(BOOT, "rank %d could not tell survivor %d of the "
                      "shrink its new rank", bs->rank, i);
        reply.new_rank++;
    }
    *id_p = reply.id;
    *size_p = size;
    return TACL_OK;
}

static tacl_status_t shrink_lead(tacl__bootstrap_t *bs, const int *members,
                                 int n, int me, uint64_t key,
                                 uint64_t deadline, tacl_unique_id_t *id_p,
                                 int *size_p)
{
    shrink_member_t *m = calloc((size_t)n, sizeof(*m));
    shrink_pending_t *pend = calloc((size_t)n, sizeof(*pend));
    tacl_status_t status = TACL_OK;
    int npend = 0, missing;

    if (m == NULL || pend == NULL) {
        status = tacl__error(TACL_ERR_NO_MEMORY, BOOT, "out of memory");
        goto out;
    }
    for (int i = 0; i <= me; i++)
        m[i] = (shrink_member_t){.state = MEMBER_DEAD, .fd = -1};
    m[me].state = MEMBER_JOINED;
    TACL_INFO(BOOT, "rank %d leads the shrink of %d ranks", bs->rank, n);
    while ((missing = leader_waiting(m, n)) >= 0) {
        if (tacl__now_ns() >= deadline) {
            status = tacl__error(TACL_ERR_TIMEOUT, BOOT,
                                 "shrink: rank %d of the communicator "
                                 "neither joined the shrink nor died within "
                                 "%.1f s; every survivor must call "
                                 "tacl_comm_shrink", missing,
                                 bs->timeout_s);
            break;
        }
        leader_probe(bs, members, m, n, deadline);
        status = leader_round(bs, m, n, me, key, pend, &npend);
        if (status != TACL_OK)
            break;
    }
    if (status == TACL_OK)
        status = leader_answer(bs, m, n, me, deadline, id_p, size_p);
out:
    for (int i = 0; m != NULL && i < n; i++)
        if (i != me && (m[i].state == MEMBER_WATCHED ||
                        m[i].state == MEMBER_JOINED))
            close(m[i].fd);
    for (int k = 0; k < npend; k++)
        close(pend[k].fd);
    free(m);
    free(pend);
    return status;
}

/*
 * Ask leader candidate c: TACL_OK with the reply, TACL_ERR_REMOTE when it
 * is dead or died before answering (try the next), else an error.
 */
static tacl_status_t shrink_ask(tacl__bootstrap_t *bs, const int *members,
                                int c, int me, uint64_t key,
                                uint64_t deadline, shrink_reply_t *reply)
{
    shrink_hello_t hello = {.magic = SHRINK_MAGIC, .index = me, .key = key};
    tacl_status_t status;
    probe_t p;
    int fd;

    do {
        if (tacl__now_ns() >= deadline)
            return tacl__error(TACL_ERR_TIMEOUT, BOOT,
                               "shrink: rank %d of the communicator neither "
                               "answered nor died within %.1f s", c,
                               bs->timeout_s);
        p = shrink_probe_sure(bs, members[c],
                              shrink_attempt_deadline(deadline), &fd);
    } while (p == PROBE_SILENT);
    if (p == PROBE_DEAD)
        return TACL_ERR_REMOTE;
    status = tacl__sock_send_all(fd, &hello, sizeof(hello), deadline);
    if (status == TACL_OK)
        status = tacl__sock_recv_all(fd, reply, sizeof(*reply), deadline);
    close(fd);
    if (status == TACL_ERR_TIMEOUT)
        return tacl__error(status, BOOT,
                           "shrink: rank %d of the communicator did not "
                           "answer rank %d within %.1f s; every survivor "
                           "must call tacl_comm_shrink", c, me,
                           bs->timeout_s);
    if (status != TACL_OK) {
        TACL_INFO(BOOT, "shrink: rank %d of the communicator hung up on "
                  "rank %d", c, me);
        return TACL_ERR_REMOTE;
    }
    if (reply->magic != SHRINK_MAGIC || reply->new_rank <= 0 ||
        reply->new_rank >= reply->new_size)
        return tacl__error(TACL_ERR_INTERNAL, BOOT,
                           "shrink: rank %d of the communicator sent a "
                           "malformed answer", c);
    return TACL_OK;
}

tacl_status_t tacl__bootstrap_shrink(tacl__bootstrap_t *bs,
                                     const int *members, int n, int me,
                                     uint64_t key, tacl_unique_id_t *id_p,
                                     int *new_rank_p, int *new_size_p)
{
    uint64_t deadline;
    shrink_reply_t reply;
    tacl_status_t status;
    int size = 0;

    if (bs == NULL || members == NULL || n < 1 || me < 0 || me >= n)
        return tacl__error(TACL_ERR_INVALID_ARG, BOOT,
                           "shrink: invalid bootstrap or members");
    if (n > 1 && (bs->table == NULL || bs->listen_fd < 0))
        return tacl__error(TACL_ERR_INTERNAL, BOOT,
                           "shrink: the bootstrap kept no listeners");
    deadline = tacl__now_ns() + (uint64_t)(bs->timeout_s * 1e9);
    key ^= bs->nonce;
    for (int c = 0; c < me; c++) {
        status = shrink_ask(bs, members, c, me, key, deadline, &reply);
        if (status == TACL_ERR_REMOTE)
            continue;
        if (status != TACL_OK)
            return status;
        *id_p = reply.id;
        *new_rank_p = reply.new_rank;
        *new_size_p = reply.new_size;
        return TACL_OK;
    }
    status = shrink_lead(bs, members, n, me, key, deadline, id_p, &size);
    if (status != TACL_OK)
        return status;
    *new_rank_p = 0;
    *new_size_p = size;
    return TACL_OK;
}
