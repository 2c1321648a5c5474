/*
 * Members-only rendezvous (see bootstrap.h) at the listeners every rank
 * kept open after init, without the ring: the shrink, where the survivors
 * of a failure meet (a death has cut the ring), and the group meeting of
 * tacl_comm_create_group, where some ranks of a communicator meet while
 * the others go on with their own work.
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
 * Group meeting.  The same machinery with every member needed: the
 * leader is the list's first member (a refusal there is an error, not a
 * reason to try the next), a member that dies is an error, and the
 * leader hands out a value (the new communicator's id) instead of a
 * unique id.  The hello carries a hash of the caller's list: a hello with
 * the meeting's key and another hash may belong to a later group made
 * with the same tag (a member that ran ahead), so it waits; when the
 * leader's wait ends without the member it names the different list.
 *
 * Stash.  Hellos that reach a leader for another meeting (a member of a
 * later group whose leader is still busy with an earlier one) are kept
 * on the bootstrap, read or not, until the meeting they belong to takes
 * them: several groups may be in the making at once.
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
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
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
#define GROUP_MAGIC 0x50525247u  /* "GRRP" */
/* How long one connection attempt to a member may take. */
#define SHRINK_CONNECT_NS (500 * 1000000ull)
/* Refusals in a row, this far apart, that make a member dead. */
#define SHRINK_REFUSALS 4
#define SHRINK_REFUSAL_GAP_NS (25 * 1000000L)
/* How much longer a group's member waits for its leader's answer. */
#define MEET_GRACE_NS (1000 * 1000000ull)
/* How often the leader wakes to retry members that did not answer. */
#define SHRINK_POLL_MS 20

typedef struct {
    uint32_t magic;
    int32_t index; /* the sender's position in the member list */
    int32_t from;  /* the sender's bootstrap rank */
    int32_t reserved;
    uint64_t key;
    uint64_t check; /* group: hash of the sender's member list */
} meet_hello_t;

typedef struct {
    uint32_t magic;
    int32_t new_rank;
    int32_t new_size;
    int32_t status;      /* group: TACL_OK or what every member returns */
    uint64_t value;      /* group: what the leader hands out */
    tacl_unique_id_t id; /* shrink: the new communicator's unique id */
    char why[160];       /* group: the leader's message on failure */
} meet_reply_t;

/* A connection accepted on the listener whose hello no meeting took yet. */
struct tacl__boot_pending {
    int fd;
    size_t got;
    meet_hello_t hello;
};

/* One lock for every bootstrap's stash: meetings are rare. */
static pthread_mutex_t stash_lock = PTHREAD_MUTEX_INITIALIZER;

/* What one rendezvous is. */
typedef struct {
    const int *members; /* bootstrap ranks, in the list's order */
    int n, me;
    uint32_t magic;     /* SHRINK_MAGIC or GROUP_MAGIC */
    uint64_t key, check;
    int all;            /* group: every member needed, leader is the first */
    double timeout_s;
    uint64_t deadline;
    int mismatch;       /* group: bootstrap rank that sent another list */
    const char *call;   /* what the log calls the meeting */
    const char *api;    /* the call every member must make */
} meet_t;

/* What the leader knows of a member above it. */
enum { MEMBER_UNKNOWN = 0, MEMBER_WATCHED, MEMBER_JOINED, MEMBER_DEAD };

typedef struct {
    int state;
    int fd;     /* WATCHED: our probe; JOINED: its hello's connection */
} shrink_member_t;

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
static void leader_probe(const tacl__bootstrap_t *bs, const meet_t *mt,
                         shrink_member_t *m)
{
    for (int i = 0; i < mt->n; i++) {
        probe_t p;
        int fd;

        if (m[i].state != MEMBER_UNKNOWN)
            continue;
        p = shrink_probe_sure(bs, mt->members[i],
                              shrink_attempt_deadline(mt->deadline), &fd);
        if (p == PROBE_DEAD) {
            TACL_INFO(BOOT, "%s: rank %d of the communicator refuses "
                      "connections: it is gone", mt->call, i);
            m[i].state = MEMBER_DEAD;
        }
        if (p == PROBE_ALIVE)
            m[i] = (shrink_member_t){.state = MEMBER_WATCHED, .fd = fd};
    }
}

/* Remove stash entry k (under stash_lock); its fd is the caller's. */
static void stash_take(tacl__bootstrap_t *bs, int k)
{
    bs->stash[k] = bs->stash[--bs->nstash];
}

/* Add an accepted connection to the stash (under stash_lock). */
static int stash_add(tacl__bootstrap_t *bs, int fd)
{
    if (bs->nstash == bs->stash_cap) {
        int cap = bs->stash_cap ? 2 * bs->stash_cap : 8;
        struct tacl__boot_pending *p =
            realloc(bs->stash, (size_t)cap * sizeof(*p));

        if (p == NULL)
            return -1;
        bs->stash = p;
        bs->stash_cap = cap;
    }
    bs->stash[bs->nstash++] = (struct tacl__boot_pending){.fd = fd};
    return 0;
}

void tacl__boot_stash_free(tacl__bootstrap_t *bs)
{
    for (int k = 0; k < bs->nstash; k++)
        close(bs->stash[k].fd);
    free(bs->stash);
    bs->stash = NULL;
    bs->nstash = bs->stash_cap = 0;
}

/*
 * A complete hello in the stash: 1 when the meeting took it (the member
 * joined), -1 when it is dropped (closed), 0 when it stays for another
 * meeting.
 */
static int leader_hello(meet_t *mt, shrink_member_t *m,
                        struct tacl__boot_pending *p)
{
    const meet_hello_t *h = &p->hello;
    int i = h->index;

    if (h->magic != mt->magic || h->key != mt->key)
        /* A stale shrink attempt's hello is dropped: its sender goes on
         * to the next candidate.  Anything else waits for its meeting. */
        return h->magic == SHRINK_MAGIC && mt->magic == SHRINK_MAGIC ? -1
                                                                     : 0;
    if (h->check != mt->check) {
        if (mt->mismatch < 0)
            TACL_INFO(BOOT, "%s: bootstrap rank %d came with another list "
                      "of ranks (or for a later group with this tag)",
                      mt->call, h->from);
        mt->mismatch = h->from;
        return 0;
    }
    if (i <= mt->me || i >= mt->n || m[i].state == MEMBER_JOINED ||
        m[i].state == MEMBER_DEAD ||
        (mt->all && h->from != mt->members[i])) {
        TACL_INFO(BOOT, "%s: the leader drops a hello from rank %d "
                  "(state %d)", mt->call, i,
                  i > mt->me && i < mt->n ? m[i].state : -1);
        return -1;
    }
    if (m[i].state == MEMBER_WATCHED)
        close(m[i].fd);
    m[i] = (shrink_member_t){.state = MEMBER_JOINED, .fd = p->fd};
    return 1;
}

/* Read what the stash's connections sent and hand out complete hellos. */
static tacl_status_t leader_stash(tacl__bootstrap_t *bs, meet_t *mt,
                                  shrink_member_t *m)
{
    int fd;

    pthread_mutex_lock(&stash_lock);
    for (;;) {
        if (tacl__sock_accept(bs->listen_fd, &fd) != TACL_OK || fd < 0)
            break;
        if (stash_add(bs, fd) != 0) {
            close(fd);
            break;
        }
    }
    for (int k = bs->nstash - 1; k >= 0; k--) {
        struct tacl__boot_pending *p = &bs->stash[k];
        size_t got = 0;
        int took;

        if (p->got < sizeof(p->hello) &&
            tacl__sock_recv_some(p->fd, (char *)&p->hello + p->got,
                                 sizeof(p->hello) - p->got, &got) !=
                TACL_OK) {
            close(p->fd);
            stash_take(bs, k);
            continue;
        }
        p->got += got;
        if (p->got < sizeof(p->hello))
            continue;
        took = leader_hello(mt, m, p);
        if (took < 0)
            close(p->fd);
        if (took != 0)
            stash_take(bs, k);
    }
    pthread_mutex_unlock(&stash_lock);
    return TACL_OK;
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
static tacl_status_t leader_round(tacl__bootstrap_t *bs, meet_t *mt,
                                  shrink_member_t *m)
{
    struct pollfd *pfds;
    int n = mt->n, rc, nst;
    tacl_status_t status = TACL_OK;

    pthread_mutex_lock(&stash_lock);
    nst = bs->nstash;
    pfds = malloc(sizeof(*pfds) * (size_t)(n + nst + 1));
    for (int k = 0; pfds != NULL && k < nst; k++)
        pfds[n + k] = (struct pollfd){.fd = bs->stash[k].fd,
                                      .events = POLLIN};
    pthread_mutex_unlock(&stash_lock);
    if (pfds == NULL)
        return tacl__error(TACL_ERR_NO_MEMORY, BOOT, "out of memory");
    for (int i = 0; i < n; i++)
        pfds[i] = (struct pollfd){
            .fd = (i != mt->me && (m[i].state == MEMBER_WATCHED ||
                                   m[i].state == MEMBER_JOINED)) ? m[i].fd
                                                                 : -1,
            .events = POLLIN};
    pfds[n + nst] = (struct pollfd){.fd = bs->listen_fd, .events = POLLIN};
    rc = poll(pfds, (nfds_t)(n + nst + 1), SHRINK_POLL_MS);
    if (rc < 0 && errno != EINTR)
        status = tacl__error(TACL_ERR_SYSTEM, BOOT, "poll() failed: %m");
    for (int i = 0; rc > 0 && i < n; i++) {
        if (pfds[i].revents == 0 || !shrink_hung_up(m[i].fd))
            continue;
        TACL_INFO(BOOT, "%s: rank %d of the communicator is gone",
                  mt->call, i);
        close(m[i].fd);
        m[i] = (shrink_member_t){.state = MEMBER_DEAD, .fd = -1};
    }
    free(pfds);
    if (status == TACL_OK)
        status = leader_stash(bs, mt, m);
    return status;
}

/* Send a reply to a member, best effort within the attempt's time. */
static void leader_send(tacl__bootstrap_t *bs, const meet_t *mt, int fd,
                        const meet_reply_t *reply, int who)
{
    /* A survivor that died since makes the new init fail for all. */
    if (tacl__sock_send_all(fd, reply, sizeof(*reply),
                            shrink_attempt_deadline(mt->deadline)) !=
        TACL_OK)
        TACL_WARN(BOOT, "rank %d could not answer rank %d of the %s",
                  bs->rank, who, mt->call);
}

/* Answer every member: a shrink's survivors get a fresh unique id. */
static tacl_status_t leader_answer(tacl__bootstrap_t *bs, const meet_t *mt,
                                   shrink_member_t *m, uint64_t value,
                                   tacl_unique_id_t *id_p, int *size_p)
{
    meet_reply_t reply = {.magic = mt->magic, .value = value};
    tacl_status_t status;
    int size = 0;

    for (int i = 0; i < mt->n; i++)
        size += i == mt->me || m[i].state == MEMBER_JOINED;
    if (!mt->all) {
        status = tacl__bootstrap_unique_id(&reply.id);
        if (status != TACL_OK)
            return status;
        *id_p = reply.id;
    }
    reply.new_size = size;
    reply.new_rank = 1;
    for (int i = mt->me + 1; i < mt->n; i++) {
        if (m[i].state != MEMBER_JOINED)
            continue;
        leader_send(bs, mt, m[i].fd, &reply, i);
        reply.new_rank++;
    }
    *size_p = size;
    return TACL_OK;
}

/*
 * A group meeting failed at its leader: tell every member that joined,
 * and every one that came with another list, why.
 */
static void leader_refuse(tacl__bootstrap_t *bs, const meet_t *mt,
                          shrink_member_t *m, tacl_status_t status)
{
    meet_reply_t reply = {.magic = mt->magic, .status = status};

    snprintf(reply.why, sizeof(reply.why), "%s", tacl__last_error());
    for (int i = mt->me + 1; i < mt->n; i++)
        if (m[i].state == MEMBER_JOINED)
            leader_send(bs, mt, m[i].fd, &reply, i);
    pthread_mutex_lock(&stash_lock);
    for (int k = bs->nstash - 1; k >= 0; k--) {
        struct tacl__boot_pending *p = &bs->stash[k];

        if (p->got != sizeof(p->hello) || p->hello.magic != mt->magic ||
            p->hello.key != mt->key)
            continue;
        leader_send(bs, mt, p->fd, &reply, p->hello.index);
        close(p->fd);
        stash_take(bs, k);
    }
    pthread_mutex_unlock(&stash_lock);
}

/* A group fails when a member is gone: TACL_OK, or that error. */
static tacl_status_t leader_dead(const meet_t *mt, const shrink_member_t *m)
{
    for (int i = 0; mt->all && i < mt->n; i++)
        if (m[i].state == MEMBER_DEAD)
            return tacl__error(TACL_ERR_REMOTE, BOOT,
                               "%s: rank %d of the group (bootstrap rank "
                               "%d) is gone", mt->call, i, mt->members[i]);
    return TACL_OK;
}

/* Why the leader stops waiting: TACL_OK to go on, else the error. */
static tacl_status_t leader_check(const meet_t *mt, const shrink_member_t *m,
                                  int missing)
{
    tacl_status_t status = leader_dead(mt, m);

    if (status != TACL_OK || tacl__now_ns() < mt->deadline)
        return status;
    if (mt->mismatch >= 0)
        return tacl__error(TACL_ERR_INVALID_USAGE, BOOT,
                           "%s: rank %d of the group did not come within "
                           "%.1f s, and bootstrap rank %d called with "
                           "another list of ranks under this tag; every "
                           "member must pass the same list", mt->call,
                           missing, mt->timeout_s, mt->mismatch);
    return tacl__error(TACL_ERR_TIMEOUT, BOOT,
                       "%s: rank %d of the %s neither joined nor died "
                       "within %.1f s; every %s must call %s", mt->call,
                       missing, mt->all ? "group" : "communicator",
                       mt->timeout_s, mt->all ? "member" : "survivor",
                       mt->api);
}

static tacl_status_t meet_lead(tacl__bootstrap_t *bs, meet_t *mt,
                               uint64_t value, tacl_unique_id_t *id_p,
                               int *size_p)
{
    int n = mt->n, me = mt->me, missing;
    shrink_member_t *m = calloc((size_t)n, sizeof(*m));
    tacl_status_t status = TACL_OK;

    if (m == NULL)
        return tacl__error(TACL_ERR_NO_MEMORY, BOOT, "out of memory");
    for (int i = 0; i <= me; i++)
        m[i] = (shrink_member_t){.state = MEMBER_DEAD, .fd = -1};
    m[me].state = MEMBER_JOINED;
    TACL_INFO(BOOT, "rank %d leads the %s of %d ranks", bs->rank, mt->call,
              n);
    while ((missing = leader_waiting(m, n)) >= 0) {
        status = leader_check(mt, m, missing);
        if (status == TACL_OK) {
            leader_probe(bs, mt, m);
            status = leader_round(bs, mt, m);
        }
        if (status != TACL_OK)
            break;
    }
    if (status == TACL_OK)
        status = leader_dead(mt, m); /* a death in the last round */
    if (status == TACL_OK)
        status = leader_answer(bs, mt, m, value, id_p, size_p);
    else if (mt->all)
        leader_refuse(bs, mt, m, status);
    for (int i = 0; i < n; i++)
        if (i != me && (m[i].state == MEMBER_WATCHED ||
                        m[i].state == MEMBER_JOINED))
            close(m[i].fd);
    free(m);
    return status;
}

/*
 * Ask leader candidate c: TACL_OK with the reply, TACL_ERR_REMOTE when it
 * is dead or died before answering (try the next), else an error.
 */
static tacl_status_t meet_ask(tacl__bootstrap_t *bs, const meet_t *mt,
                              int c, meet_reply_t *reply)
{
    meet_hello_t hello = {.magic = mt->magic, .index = mt->me,
                          .from = bs->rank, .key = mt->key,
                          .check = mt->check};
    tacl_status_t status;
    probe_t p;
    int fd;

    do {
        if (tacl__now_ns() >= mt->deadline)
            return tacl__error(TACL_ERR_TIMEOUT, BOOT,
                               "%s: rank %d of the %s neither answered nor "
                               "died within %.1f s", mt->call, c,
                               mt->all ? "group" : "communicator",
                               mt->timeout_s);
        p = shrink_probe_sure(bs, mt->members[c],
                              shrink_attempt_deadline(mt->deadline), &fd);
    } while (p == PROBE_SILENT);
    if (p == PROBE_DEAD)
        return TACL_ERR_REMOTE;
    status = tacl__sock_send_all(fd, &hello, sizeof(hello), mt->deadline);
    /* A group's leader says why it gave up when its own wait ends, which
     * began about when ours did: wait a little longer for its word. */
    if (status == TACL_OK)
        status = tacl__sock_recv_all(
            fd, reply, sizeof(*reply),
            mt->deadline + (mt->all ? MEET_GRACE_NS : 0));
    close(fd);
    if (status == TACL_ERR_TIMEOUT)
        return tacl__error(status, BOOT,
                           "%s: rank %d of the %s did not answer rank %d "
                           "within %.1f s; every %s must call %s",
                           mt->call, c, mt->all ? "group" : "communicator",
                           mt->me, mt->timeout_s,
                           mt->all ? "member" : "survivor", mt->api);
    if (status != TACL_OK) {
        TACL_INFO(BOOT, "%s: rank %d of the communicator hung up on "
                  "rank %d", mt->call, c, mt->me);
        return TACL_ERR_REMOTE;
    }
    if (reply->magic != mt->magic)
        return tacl__error(TACL_ERR_INTERNAL, BOOT,
                           "%s: rank %d sent a malformed answer", mt->call,
                           c);
    if (mt->all && reply->status != TACL_OK) {
        reply->why[sizeof(reply->why) - 1] = '\0';
        return tacl__error((tacl_status_t)reply->status, BOOT,
                           "%s (said rank %d of the group, its leader)",
                           reply->why, c);
    }
    if (reply->new_rank <= 0 || reply->new_rank >= reply->new_size ||
        (mt->all && (reply->new_rank != mt->me || reply->new_size != mt->n)))
        return tacl__error(TACL_ERR_INTERNAL, BOOT,
                           "%s: rank %d of the communicator sent a "
                           "malformed answer", mt->call, c);
    return TACL_OK;
}

/* Checks both meetings share. */
static tacl_status_t meet_check(const tacl__bootstrap_t *bs,
                                const int *members, int n, int me)
{
    if (bs == NULL || members == NULL || n < 1 || me < 0 || me >= n)
        return tacl__error(TACL_ERR_INVALID_ARG, BOOT,
                           "rendezvous: invalid bootstrap or members");
    if (n > 1 && (bs->table == NULL || bs->listen_fd < 0))
        return tacl__error(TACL_ERR_INTERNAL, BOOT,
                           "rendezvous: the bootstrap kept no listeners");
    return TACL_OK;
}

tacl_status_t tacl__bootstrap_shrink(tacl__bootstrap_t *bs,
                                     const int *members, int n, int me,
                                     uint64_t key, tacl_unique_id_t *id_p,
                                     int *new_rank_p, int *new_size_p)
{
    meet_t mt = {.members = members, .n = n, .me = me,
                 .magic = SHRINK_MAGIC, .mismatch = -1, .call = "shrink",
                 .api = "tacl_comm_shrink"};
    meet_reply_t reply;
    tacl_status_t status;
    int size = 0;

    status = meet_check(bs, members, n, me);
    if (status != TACL_OK)
        return status;
    mt.timeout_s = bs->timeout_s;
    mt.deadline = tacl__now_ns() + (uint64_t)(bs->timeout_s * 1e9);
    mt.key = key ^ bs->nonce;
    for (int c = 0; c < me; c++) {
        status = meet_ask(bs, &mt, c, &reply);
        if (status == TACL_ERR_REMOTE)
            continue;
        if (status != TACL_OK)
            return status;
        *id_p = reply.id;
        *new_rank_p = reply.new_rank;
        *new_size_p = reply.new_size;
        return TACL_OK;
    }
    status = meet_lead(bs, &mt, 0, id_p, &size);
    if (status != TACL_OK)
        return status;
    *new_rank_p = 0;
    *new_size_p = size;
    return TACL_OK;
}

tacl_status_t tacl__bootstrap_meet(tacl__bootstrap_t *bs, const int *members,
                                   int n, int me, uint64_t key,
                                   uint64_t check, double timeout_s,
                                   uint64_t *value_p)
{
    meet_t mt = {.members = members, .n = n, .me = me,
                 .magic = GROUP_MAGIC, .check = check, .all = 1,
                 .timeout_s = timeout_s, .mismatch = -1,
                 .call = "tacl_comm_create_group",
                 .api = "tacl_comm_create_group"};
    meet_reply_t reply;
    tacl_status_t status;
    int size;

    if (n == 1 && me == 0)
        return TACL_OK; /* a group of one meets nobody */
    status = meet_check(bs, members, n, me);
    if (status != TACL_OK)
        return status;
    mt.deadline = tacl__now_ns() + (uint64_t)(timeout_s * 1e9);
    mt.key = key ^ bs->nonce;
    if (me == 0)
        return meet_lead(bs, &mt, *value_p, NULL, &size);
    status = meet_ask(bs, &mt, 0, &reply);
    if (status == TACL_ERR_REMOTE)
        return tacl__error(TACL_ERR_REMOTE, BOOT,
                           "tacl_comm_create_group: rank 0 of the group "
                           "(bootstrap rank %d) is gone", members[0]);
    if (status == TACL_OK)
        *value_p = reply.value;
    return status;
}
