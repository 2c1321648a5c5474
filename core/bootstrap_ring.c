/*
 * The bootstrap ring once built (see bootstrap.c for how): framing,
 * liveness, allgather and barrier.
 *
 * Framing.  Everything on the ring sockets is a frame: a 16-byte header
 * {magic, type, arg, length} and, for DATA only, a payload.  ABORT(rank)
 * and GOODBYE are control frames with no payload.  tacl__bootstrap_check()
 * reads headers only and stops at a DATA header, which the next allgather
 * consumes; the allgather handles control frames that arrive in between.
 * A header is read whole before it is trusted, a DATA header must name the
 * step and size the reader expects, and anything else malformed counts as
 * a failure of the peer that sent it.
 *
 * Timeouts.  A rank that times out sends TIMEOUT(rank) both ways; every
 * rank notes it and passes it on once, and it fails nothing: the rank
 * that timed out then names the rank it did not hear from (see
 * tacl__bootstrap_timeout in bootstrap.h).
 *
 * Revoke.  REVOKE(rank) travels like ABORT and fails the bootstrap the
 * same way, but says that a live rank revoked the communicator (to
 * recover from a failure) rather than that it died.
 *
 * Liveness.  End of file or a reset on a ring socket before the peer said
 * GOODBYE, an ABORT, or a malformed frame marks the bootstrap failed; the
 * rank then sends ABORT(failed rank) once to its other neighbor, so the
 * news travels around the ring both ways.  A failed bootstrap stays failed.
 *
 * Allgather.  nranks - 1 steps; in step s a rank sends record rank - s to
 * its successor and receives record rank - s - 1 from its predecessor,
 * both at once with poll(), so records larger than the socket buffers
 * cannot deadlock the ring.  A barrier is an allgather of empty records:
 * no rank leaves it before every rank entered it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "bootstrap.h"
#include "bootstrap_int.h"
#include "common.h"
#include "log.h"
#include "socket.h"

static const char *const boot_link_names[2] = {"predecessor", "successor"};

/*
 * Send a control frame, best effort.  When it cannot go whole (a frame is
 * partly sent, or the peer stopped reading), shut the socket down instead:
 * the peer then sees an end of file, which it also treats as a failure.
 */
static void boot_send_ctrl(tacl__boot_link_t *l, uint16_t type, int arg)
{
    tacl__boot_frame_t f = {.magic = TACL_BOOT_FRAME_MAGIC, .type = type,
                            .arg = arg};
    tacl_status_t status;

    if (l->fd < 0)
        return;
    if (!l->tx_partial) {
        status = tacl__sock_send_all(l->fd, &f, sizeof(f),
                                     tacl__now_ns() + TACL_BOOT_SHORT_NS);
        if (status == TACL_OK)
            return;
    }
    shutdown(l->fd, SHUT_RDWR);
}

/* Mark the bootstrap failed and pass `type` (ABORT or REVOKE) on to the
 * neighbors other than `from`. */
static void boot_mark_failed_as(tacl__bootstrap_t *bs, int failed_rank,
                                int from, uint16_t type)
{
    if (bs->failed)
        return;
    bs->failed = 1;
    bs->failed_rank = failed_rank;
    for (int i = 0; i < 2; i++)
        if (i != from)
            boot_send_ctrl(&bs->link[i], type, failed_rank);
}

static void boot_mark_failed(tacl__bootstrap_t *bs, int failed_rank,
                             int from)
{
    boot_mark_failed_as(bs, failed_rank, from, TACL_BOOT_FRAME_ABORT);
}

/* A neighbor (link `from`) broke or reported a failure: record it once. */
static tacl_status_t boot_fail(tacl__bootstrap_t *bs, int failed_rank,
                               int from, const char *what)
{
    const tacl__boot_link_t *l = &bs->link[from];

    if (bs->failed)
        return TACL_ERR_REMOTE;
    boot_mark_failed(bs, failed_rank, from);
    if (failed_rank == l->peer)
        return tacl__error(TACL_ERR_REMOTE, BOOT,
                           "rank %d (ring %s of rank %d) %s; the job "
                           "cannot continue", failed_rank,
                           boot_link_names[from], bs->rank, what);
    return tacl__error(TACL_ERR_REMOTE, BOOT,
                       "rank %d failed (reported to rank %d by rank %d); "
                       "the job cannot continue", failed_rank, bs->rank,
                       l->peer);
}

static void boot_link_close(tacl__boot_link_t *l)
{
    char sink[4096];
    size_t n;

    if (l->fd < 0)
        return;
    /* Read what is waiting so close() sends an orderly end of file
     * rather than a reset that could overtake our last frame. */
    shutdown(l->fd, SHUT_WR);
    for (int i = 0; i < 16; i++)
        if (tacl__sock_recv_some(l->fd, sink, sizeof(sink), &n) !=
                TACL_OK || n == 0)
            break;
    close(l->fd);
    l->fd = -1;
}

/* A whole header is in l->hdr: handle a control frame. */
static tacl_status_t boot_frame(tacl__bootstrap_t *bs, int which)
{
    tacl__boot_link_t *l = &bs->link[which];
    const tacl__boot_frame_t *h = &l->hdr;
    int failed_rank;

    if (h->magic != TACL_BOOT_FRAME_MAGIC ||
        (h->type != TACL_BOOT_FRAME_DATA && h->len != 0) || l->goodbye)
        return boot_fail(bs, l->peer, which, "sent a malformed frame");
    switch (h->type) {
    case TACL_BOOT_FRAME_DATA:
        return TACL_OK; /* Left for the allgather. */
    case TACL_BOOT_FRAME_GOODBYE:
        l->goodbye = 1;
        l->hdr_got = 0;
        TACL_INFO(BOOT, "rank %d: ring %s rank %d said goodbye", bs->rank,
                  boot_link_names[which], l->peer);
        return TACL_OK;
    case TACL_BOOT_FRAME_REVOKE:
        failed_rank = h->arg;
        l->hdr_got = 0;
        if (bs->failed)
            return TACL_ERR_REMOTE;
        if (failed_rank < 0 || failed_rank >= bs->nranks)
            failed_rank = l->peer;
        boot_mark_failed_as(bs, failed_rank, which, TACL_BOOT_FRAME_REVOKE);
        return tacl__error(TACL_ERR_REMOTE, BOOT,
                           "rank %d revoked the communicator: every "
                           "operation on it fails; shrink it "
                           "(tacl_comm_shrink) to go on", failed_rank);
    case TACL_BOOT_FRAME_TIMEOUT:
        l->hdr_got = 0;
        if (h->arg >= 0 && h->arg < bs->nranks && bs->timed_out != NULL &&
            !bs->timed_out[h->arg]) {
            bs->timed_out[h->arg] = 1;
            boot_send_ctrl(&bs->link[1 - which], TACL_BOOT_FRAME_TIMEOUT,
                           h->arg);
        }
        return TACL_OK;
    case TACL_BOOT_FRAME_ABORT:
        failed_rank = h->arg;
        l->hdr_got = 0;
        if (failed_rank < 0 || failed_rank >= bs->nranks)
            failed_rank = l->peer;
        return boot_fail(bs, failed_rank, which, "aborted");
    default:
        return boot_fail(bs, l->peer, which, "sent a malformed frame");
    }
}

/*
 * Read frame headers from a link without blocking and handle control
 * frames, until nothing is waiting or a DATA header is complete (it stays
 * in l->hdr).  An end of file after a goodbye closes the link quietly.
 */
static tacl_status_t boot_pump(tacl__bootstrap_t *bs, int which)
{
    tacl__boot_link_t *l = &bs->link[which];
    tacl_status_t status;
    size_t n;

    while (l->fd >= 0 && l->hdr_got < sizeof(l->hdr)) {
        status = tacl__sock_recv_some(l->fd, (char *)&l->hdr + l->hdr_got,
                                      sizeof(l->hdr) - l->hdr_got, &n);
        if (status == TACL_ERR_REMOTE && l->goodbye && l->hdr_got == 0) {
            boot_link_close(l);
            return TACL_OK;
        }
        if (status == TACL_ERR_REMOTE)
            return boot_fail(bs, l->peer, which,
                             "closed its connection without saying "
                             "goodbye: it exited or crashed");
        if (status != TACL_OK || n == 0)
            return status;
        l->hdr_got += n;
        if (l->hdr_got == sizeof(l->hdr)) {
            status = boot_frame(bs, which);
            if (status != TACL_OK)
                return status;
        }
    }
    return TACL_OK;
}

static int boot_data_waiting(const tacl__boot_link_t *l)
{
    return l->hdr_got == sizeof(l->hdr);
}

tacl_status_t tacl__bootstrap_check(tacl__bootstrap_t *bs)
{
    struct pollfd pfds[3];
    tacl_status_t status;
    int rc;

    if (bs == NULL)
        return tacl__error(TACL_ERR_INVALID_ARG, BOOT,
                           "the bootstrap is NULL");
    if (bs->failed)
        return TACL_ERR_REMOTE;
    for (int i = 0; i < 2; i++) {
        const tacl__boot_link_t *l = &bs->link[i];

        /* A waiting DATA header belongs to the next allgather. */
        pfds[i].fd = boot_data_waiting(l) ? -1 : l->fd;
        pfds[i].events = POLLIN;
        pfds[i].revents = 0;
    }
    pfds[2] = (struct pollfd){.fd = bs->root_fd, .events = POLLIN};
    do {
        rc = poll(pfds, 3, 0);
    } while (rc < 0 && errno == EINTR);
    if (rc < 0)
        return tacl__error(TACL_ERR_SYSTEM, BOOT, "poll() failed: %m");
    for (int i = 0; i < 2 && rc > 0; i++) {
        if (pfds[i].revents == 0)
            continue;
        status = boot_pump(bs, i);
        if (status != TACL_OK)
            return status;
    }
    if (rc > 0 && pfds[2].revents != 0)
        tacl__boot_refuse_late(bs);
    return TACL_OK;
}

void tacl__bootstrap_abort(tacl__bootstrap_t *bs)
{
    if (bs != NULL)
        tacl__bootstrap_fail(bs, bs->rank);
}

void tacl__bootstrap_fail(tacl__bootstrap_t *bs, int rank)
{
    if (bs == NULL || bs->failed)
        return;
    if (rank < 0 || rank >= bs->nranks)
        rank = bs->rank;
    if (rank == bs->rank)
        TACL_INFO(BOOT, "rank %d aborts the bootstrap", bs->rank);
    else
        TACL_INFO(BOOT, "rank %d tells the others that rank %d failed",
                  bs->rank, rank);
    boot_mark_failed(bs, rank, -1);
}

tacl_status_t tacl__bootstrap_timeout(tacl__bootstrap_t *bs, double wait_s,
                                      int *hung_p)
{
    uint64_t until = tacl__now_ns() + (uint64_t)(wait_s * 1e9);
    tacl_status_t status = TACL_OK;
    int hung = -1, heard;

    *hung_p = -1;
    if (bs == NULL || bs->nranks == 1 || bs->timed_out == NULL)
        return TACL_OK;
    if (bs->failed)
        return TACL_ERR_REMOTE;
    bs->timed_out[bs->rank] = 1;
    for (int i = 0; i < 2; i++)
        boot_send_ctrl(&bs->link[i], TACL_BOOT_FRAME_TIMEOUT, bs->rank);
    for (;;) {
        status = tacl__bootstrap_check(bs);
        if (status != TACL_OK)
            return status;
        heard = 0;
        for (int r = 0; r < bs->nranks; r++)
            heard += bs->timed_out[r];
        if (heard == bs->nranks || tacl__now_ns() >= until)
            break;
        struct pollfd pfds[2] = {{.fd = bs->link[0].fd, .events = POLLIN},
                                 {.fd = bs->link[1].fd, .events = POLLIN}};
        (void)poll(pfds, 2, 10);
    }
    /* Look from our successor on: the first rank that kept quiet. */
    for (int k = 1; k < bs->nranks && hung < 0; k++) {
        int r = (bs->rank + k) % bs->nranks;

        if (!bs->timed_out[r])
            hung = r;
    }
    if (hung < 0)
        return TACL_OK;
    *hung_p = hung;
    boot_mark_failed(bs, hung, -1);
    return tacl__error(TACL_ERR_TIMEOUT, BOOT,
                       "rank %d is hung or cut off: rank %d and %d other "
                       "rank(s) timed out, and rank %d did not say so within "
                       "%.1f s", hung, bs->rank, heard - 1, hung, wait_s);
}

void tacl__bootstrap_revoke(tacl__bootstrap_t *bs)
{
    if (bs == NULL || bs->failed)
        return;
    TACL_INFO(BOOT, "rank %d revokes the bootstrap", bs->rank);
    boot_mark_failed_as(bs, bs->rank, -1, TACL_BOOT_FRAME_REVOKE);
}

void tacl__bootstrap_fini(tacl__bootstrap_t *bs)
{
    if (bs == NULL)
        return;
    for (int i = 0; i < 2; i++) {
        /* A failed rank has nothing to say: its neighbors know. */
        if (!bs->failed)
            boot_send_ctrl(&bs->link[i], TACL_BOOT_FRAME_GOODBYE, bs->rank);
        boot_link_close(&bs->link[i]);
    }
    if (bs->listen_fd >= 0)
        close(bs->listen_fd);
    tacl__boot_stash_free(bs);
    if (bs->root_fd >= 0)
        close(bs->root_fd);
    free(bs->table);
    free(bs->timed_out);
    free(bs);
}

/* One allgather step in progress. */
typedef struct {
    tacl__boot_frame_t out; /* header of the frame we send */
    const char *sbuf;       /* its payload */
    size_t tx_off;          /* bytes of header + payload sent */
    char *rbuf;             /* where the received record goes */
    size_t rx_off;          /* payload bytes received */
    int rx_done;
    size_t size;
    int step;
} boot_step_t;

/* The status of a step's I/O on link side: a peer that closed it failed. */
static tacl_status_t boot_step_io(tacl__bootstrap_t *bs, int side,
                                  tacl_status_t status)
{
    if (status == TACL_ERR_REMOTE)
        return boot_fail(bs, bs->link[side].peer, side,
                         "closed its connection during an allgather");
    return status;
}

static tacl_status_t boot_step_send(tacl__bootstrap_t *bs, boot_step_t *s)
{
    tacl__boot_link_t *l = &bs->link[TACL_BOOT_SUCC];
    size_t total = sizeof(s->out) + s->size, n;
    struct iovec iov[2];
    int cnt = 0;
    tacl_status_t status;

    if (s->tx_off < sizeof(s->out)) {
        iov[cnt++] = (struct iovec){(char *)&s->out + s->tx_off,
                                    sizeof(s->out) - s->tx_off};
        if (s->size > 0)
            iov[cnt++] = (struct iovec){(void *)s->sbuf, s->size};
    } else {
        size_t off = s->tx_off - sizeof(s->out);

        iov[cnt++] = (struct iovec){(void *)(s->sbuf + off), s->size - off};
    }
    status = boot_step_io(bs, TACL_BOOT_SUCC,
                          tacl__sock_sendv_some(l->fd, iov, cnt, &n));
    if (status != TACL_OK)
        return status;
    s->tx_off += n;
    l->tx_partial = s->tx_off > 0 && s->tx_off < total;
    return TACL_OK;
}

/* A DATA header that does not match this step ruins the stream. */
static tacl_status_t boot_mismatch(tacl__bootstrap_t *bs,
                                   const boot_step_t *s)
{
    const tacl__boot_link_t *l = &bs->link[TACL_BOOT_PRED];

    boot_mark_failed(bs, bs->rank, -1);
    return tacl__error(TACL_ERR_INVALID_USAGE, BOOT,
                       "rank %d sent a %llu-byte record for step %d where "
                       "rank %d expected %zu bytes for step %d: every rank "
                       "must make the same bootstrap calls with the same "
                       "sizes", l->peer, (unsigned long long)l->hdr.len,
                       (int)l->hdr.arg, bs->rank, s->size, s->step);
}

static tacl_status_t boot_step_recv(tacl__bootstrap_t *bs, boot_step_t *s)
{
    tacl__boot_link_t *l = &bs->link[TACL_BOOT_PRED];
    tacl_status_t status;
    size_t n;

    if (!boot_data_waiting(l)) {
        status = boot_pump(bs, TACL_BOOT_PRED);
        if (status != TACL_OK || !boot_data_waiting(l))
            return status;
    }
    /* The header may have waited since a check() before this call. */
    if (l->hdr.len != s->size || l->hdr.arg != s->step)
        return boot_mismatch(bs, s);
    if (s->rx_off < s->size) {
        status = boot_step_io(bs, TACL_BOOT_PRED,
                              tacl__sock_recv_some(l->fd,
                                                   s->rbuf + s->rx_off,
                                                   s->size - s->rx_off, &n));
        if (status != TACL_OK)
            return status;
        s->rx_off += n;
    }
    if (s->rx_off == s->size) {
        s->rx_done = 1;
        l->hdr_got = 0;
    }
    return TACL_OK;
}

static tacl_status_t boot_timeout(tacl__bootstrap_t *bs, int step)
{
    /* The streams are now cut mid-frame: nothing can follow. */
    boot_mark_failed(bs, bs->rank, -1);
    return tacl__error(TACL_ERR_TIMEOUT, BOOT,
                       "rank %d timed out after %.1f s in step %d of a "
                       "bootstrap allgather; a rank did not join it",
                       bs->rank, bs->timeout_s, step);
}

/* Whether a neighbor this rank still needs (need[PRED], need[SUCC]) left. */
static tacl_status_t boot_left(tacl__bootstrap_t *bs, const int need[2])
{
    for (int i = 0; i < 2; i++)
        if (need[i] && (bs->link[i].fd < 0 || bs->link[i].goodbye))
            return tacl__error(TACL_ERR_INVALID_USAGE, BOOT,
                               "rank %d left the bootstrap (it called "
                               "fini), so rank %d cannot run a bootstrap "
                               "collective", bs->link[i].peer, bs->rank);
    return TACL_OK;
}

static tacl_status_t boot_step(tacl__bootstrap_t *bs, boot_step_t *s,
                               uint64_t deadline)
{
    tacl__boot_link_t *pred = &bs->link[TACL_BOOT_PRED];
    tacl__boot_link_t *succ = &bs->link[TACL_BOOT_SUCC];
    size_t total = sizeof(s->out) + s->size;
    struct pollfd pfds[2];
    tacl_status_t status;
    int need[2], rc;

    for (;;) {
        if (s->tx_off < total) {
            status = boot_step_send(bs, s);
            if (status != TACL_OK)
                return status;
        }
        if (!s->rx_done) {
            status = boot_step_recv(bs, s);
            if (status != TACL_OK)
                return status;
        }
        /* The successor sends us control frames only. */
        status = boot_pump(bs, TACL_BOOT_SUCC);
        if (status == TACL_OK && boot_data_waiting(succ))
            status = boot_fail(bs, succ->peer, TACL_BOOT_SUCC,
                               "sent data the wrong way round the ring");
        if (status != TACL_OK)
            return status;
        if (s->tx_off == total && s->rx_done)
            return TACL_OK;
        need[TACL_BOOT_PRED] = !s->rx_done;
        need[TACL_BOOT_SUCC] = s->tx_off < total;
        status = boot_left(bs, need);
        if (status != TACL_OK)
            return status;
        pfds[0] = (struct pollfd){.fd = s->rx_done ? -1 : pred->fd,
                                  .events = POLLIN};
        pfds[1] = (struct pollfd){
            .fd = succ->fd,
            .events = POLLIN | (s->tx_off < total ? POLLOUT : 0)};
        rc = poll(pfds, 2, tacl__sock_ms_left(deadline));
        if (rc < 0 && errno != EINTR)
            return tacl__error(TACL_ERR_SYSTEM, BOOT, "poll() failed: %m");
        if (rc == 0 && tacl__now_ns() >= deadline)
            return boot_timeout(bs, s->step);
    }
}

tacl_status_t tacl__bootstrap_allgather(tacl__bootstrap_t *bs, void *all,
                                        size_t size)
{
    uint64_t deadline;
    tacl_status_t status;
    int n, r;

    if (bs == NULL || (all == NULL && size > 0))
        return tacl__error(TACL_ERR_INVALID_ARG, BOOT,
                           "the bootstrap or the allgather buffer is NULL");
    n = bs->nranks;
    r = bs->rank;
    if (size > SIZE_MAX / (size_t)n)
        return tacl__error(TACL_ERR_INVALID_ARG, BOOT,
                           "%d records of %zu bytes overflow", n, size);
    if (bs->failed)
        return tacl__error(TACL_ERR_REMOTE, BOOT,
                           "the bootstrap of rank %d already failed (rank "
                           "%d); no collective can run", r,
                           bs->failed_rank);
    if (n == 1)
        return TACL_OK;
    status = boot_left(bs, (const int[2]){1, 1});
    if (status != TACL_OK)
        return status;
    deadline = tacl__now_ns() + (uint64_t)(bs->timeout_s * 1e9);
    for (int step = 0; step < n - 1; step++) {
        boot_step_t s = {
            .out = {.magic = TACL_BOOT_FRAME_MAGIC,
                    .type = TACL_BOOT_FRAME_DATA, .arg = step, .len = size},
            .sbuf = (const char *)all + (size_t)((r - step + n) % n) * size,
            .rbuf = (char *)all + (size_t)((r - step - 1 + n) % n) * size,
            .size = size,
            .step = step,
        };

        status = boot_step(bs, &s, deadline);
        if (status != TACL_OK)
            return status;
    }
    return TACL_OK;
}

tacl_status_t tacl__bootstrap_barrier(tacl__bootstrap_t *bs)
{
    return tacl__bootstrap_allgather(bs, NULL, 0);
}
