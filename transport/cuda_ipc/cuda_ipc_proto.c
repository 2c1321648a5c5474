/*
 * The cuda_ipc protocol: posting, matching, copies and progress (see
 * cuda_ipc.h for the messages).
 *
 * A send posts its RTS at once (or queues it behind earlier messages the
 * socket had no room for, keeping their order) and completes on the
 * receiver's FIN.  RTSs from one peer arrive in sending order, so matching
 * each with the oldest posted receive of its tag (and each receive with
 * the oldest unexpected RTS of its tag) keeps (source, tag) order.  A
 * matched receive opens the sender's allocation through the cache and
 * joins the pulls: progress() queues their copies in TACL_CIPC_CHUNK
 * pieces on the stream of the receive's device, up to TACL_CIPC_INFLIGHT
 * at once, each followed by an event, and polls the events oldest first
 * (cuEventQuery: it never blocks).  When a receive's last chunk is done
 * its FIN goes and it completes; a copy that failed completes both sides
 * with the driver's error.  Callbacks run from the done queue at the end
 * of progress().  A peer that hangs up while operations with it are
 * pending fails the whole instance, as in shm.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "cuda_ipc.h"
#include "cuda_mem.h"
#include "log.h"

#if TACL_HAVE_CUDA
static tacl__cipc_peer_t *peer_of(tacl__cipc_t *c, int rank)
{
    return &c->peers[c->base.local_of[rank]];
}

static void close_fd(int fd)
{
    if (fd >= 0)
        close(fd);
}

/* Write one message (and fd) now; 1 sent, 0 no room, -1 error (errno). */
static int write_msg(int sock, const tacl__cipc_msg_t *msg, int fd)
{
    union {
        struct cmsghdr hdr;
        char buf[CMSG_SPACE(sizeof(int))];
    } ctl;
    struct iovec iov = {(void *)msg, sizeof(*msg)};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    ssize_t n;

    if (fd >= 0) {
        memset(&ctl, 0, sizeof(ctl));
        mh.msg_control = ctl.buf;
        mh.msg_controllen = sizeof(ctl.buf);
        CMSG_FIRSTHDR(&mh)->cmsg_level = SOL_SOCKET;
        CMSG_FIRSTHDR(&mh)->cmsg_type = SCM_RIGHTS;
        CMSG_FIRSTHDR(&mh)->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(CMSG_FIRSTHDR(&mh)), &fd, sizeof(int));
    }
    do {
        n = sendmsg(sock, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return 0;
    return n == (ssize_t)sizeof(*msg) ? 1 : -1;
}

/* Send what waits for room, in order; fails when the peer is gone. */
static tacl_status_t flush_out(tacl__cipc_peer_t *peer)
{
    size_t sent = 0;
    tacl_status_t status = TACL_OK;

    while (sent < peer->nout) {
        tacl__cipc_out_t *o = &peer->out[sent];
        int r;

        if (peer->fd < 0 && !peer->hung_up)
            break;  /* not connected yet: they wait for the connection */
        r = peer->fd < 0 ? -1 : write_msg(peer->fd, &o->msg, o->fd);

        if (r == 0)
            break;
        if (r < 0) {
            status = tacl__error_peer(peer->rank, IPC,
                                      "rank %d closed its cuda_ipc "
                                      "connection (it exited or died); "
                                      "check that process's output",
                                      peer->rank);
            break;
        }
        close_fd(o->fd);
        sent++;
    }
    if (sent) {
        peer->nout -= sent;
        memmove(peer->out, peer->out + sent, peer->nout * sizeof(*peer->out));
    }
    return status;
}

/*
 * Send msg to the peer, with fd (-1: none) which is closed here in any
 * case: now, or queued behind what waits for room or for the connection.
 */
static tacl_status_t send_msg(tacl__cipc_peer_t *peer,
                              const tacl__cipc_msg_t *msg, int fd)
{
    if (peer->nout == 0 && peer->fd >= 0) {
        int r = write_msg(peer->fd, msg, fd);

        if (r > 0) {
            close_fd(fd);
            return TACL_OK;
        }
        if (r < 0) {
            close_fd(fd);
            return tacl__error_peer(peer->rank, IPC,
                                    "rank %d closed its cuda_ipc connection "
                                    "(it exited or died); check that "
                                    "process's output", peer->rank);
        }
    }
    if (peer->nout == peer->out_cap) {
        size_t cap = peer->out_cap ? 2 * peer->out_cap : 16;
        tacl__cipc_out_t *out = realloc(peer->out, cap * sizeof(*out));

        if (out == NULL) {
            close_fd(fd);
            return tacl__error(TACL_ERR_NO_MEMORY, IPC,
                               "cannot queue a message to rank %d",
                               peer->rank);
        }
        peer->out = out;
        peer->out_cap = cap;
    }
    peer->out[peer->nout].msg = *msg;
    peer->out[peer->nout].fd = fd;
    peer->nout++;
    return TACL_OK;
}

static tacl_status_t send_fin(tacl__cipc_peer_t *peer, uint64_t op_id,
                              tacl_status_t status)
{
    tacl__cipc_msg_t fin;

    memset(&fin, 0, sizeof(fin));
    fin.kind = TACL_CIPC_MSG_FIN;
    fin.op_id = op_id;
    fin.status = status;
    return send_msg(peer, &fin, -1);
}

/*
 * A pull ends early: its copies still on the stream finish on their own,
 * so their ring entries forget it; the mapping they read is released
 * only if none was in flight (else it stays busy until close, which
 * waits for the streams), so no copy ever reads an unmapped range.
 */
static void forget_pull(tacl__cipc_t *c, tacl__tl_op_t *op)
{
    int inflight = 0;

    for (int d = 0; d < TACL_CIPC_MAX_DEVICES; d++)
        for (unsigned k = 0; k < TACL_CIPC_INFLIGHT; k++)
            if (c->devs[d].ring[k].op == op) {
                c->devs[d].ring[k].op = NULL;
                inflight = 1;
            }
    if (!inflight)
        tacl__cipc_map_release(peer_of(c, op->peer), TACL_CIPC_OP_MAP(op));
}

void tacl__cipc_fail_pending(tacl__tl_base_t *base, tacl_status_t status)
{
    tacl__cipc_t *c = (tacl__cipc_t *)base;
    tacl__tl_op_t *op;

    while ((op = tacl__tl_opq_pop(&c->pulls))) {
        forget_pull(c, op);
        tacl__tl_complete(&c->base, op, status);
    }
    for (int i = 0; i < c->base.nlocal; i++) {
        tacl__cipc_peer_t *peer = &c->peers[i];

        tacl__tl_opq_fail(&c->base.done, &peer->rts_wait, status);
        tacl__tl_opq_fail(&c->base.done, &peer->recvs, status);
    }
}

/* The checks of every post, and the device of op's buffer (-1 none). */
static tacl_status_t check_op(tacl__cipc_t *c, const tacl__tl_op_t *op,
                              const char *what, int *device_p)
{
    tacl_status_t status = tacl__tl_base_check(&c->base, op);
    int res;

    *device_p = -1;
    if (status != TACL_OK)
        return status;
    if (op->len == 0)
        return TACL_OK;
    *device_p = tacl__cu_device_of(op->buf, &res);
    if (*device_p < 0)
        return tacl__error(TACL_ERR_INVALID_ARG, IPC,
                           "rank %d: the %s buffer %p of a message with rank "
                           "%d is not CUDA device memory (host memory, or "
                           "device memory already freed)%s%s", c->base.rank,
                           what, op->buf, op->peer, res ? ": " : "",
                           res ? tacl__cu_str(res) : "");
    if (*device_p >= TACL_CIPC_MAX_DEVICES)
        return tacl__error(TACL_ERR_UNSUPPORTED, IPC,
                           "rank %d: device %d is beyond the %d devices "
                           "cuda_ipc copies on", c->base.rank, *device_p,
                           TACL_CIPC_MAX_DEVICES);
    return TACL_OK;
}

/* Describe the allocation holding op's buffer in rts; *fd_p its fd. */
static tacl_status_t export_buffer(tacl__cipc_t *c, const tacl__tl_op_t *op,
                                   int device, tacl__cipc_msg_t *rts,
                                   int *fd_p)
{
    const tacl__cu_t *cu = tacl__cu();
    tacl__cuda_mem_ref_t ref;
    CUdeviceptr ptr = (CUdeviceptr)(uintptr_t)op->buf, base = 0;
    unsigned long long buffer_id = 0;
    size_t size = 0;
    CUipcMemHandle h;
    const char *what = "cuMemGetAddressRange";
    CUresult res;

    *fd_p = -1;
    if (tacl__cuda_mem_find(op->buf, op->len, &ref)) {
        rts->mem = TACL_CIPC_MEM_VMM;
        rts->alloc_id = ref.id;
        rts->alloc_size = ref.size;
        rts->offset = ref.offset;
        *fd_p = ref.fd;
        return TACL_OK;
    }
    res = (CUresult)tacl__cu_push(device);
    if (res == CUDA_SUCCESS) {
        res = cu->cuMemGetAddressRange(&base, &size, ptr);
        if (res == CUDA_SUCCESS) {
            what = "cuPointerGetAttribute(BUFFER_ID)";
            res = cu->cuPointerGetAttribute(
                &buffer_id, CU_POINTER_ATTRIBUTE_BUFFER_ID, ptr);
        }
        if (res == CUDA_SUCCESS) {
            what = "cuIpcGetMemHandle";
            res = cu->cuIpcGetMemHandle(&h, base);
        }
        tacl__cu_pop();
    } else {
        what = "making the device's context current";
    }
    if (res != CUDA_SUCCESS)
        return tacl__error(TACL_ERR_INVALID_ARG, IPC,
                           "rank %d cannot share its send buffer %p (device "
                           "%d) with rank %d: %s failed: %s; memory from "
                           "cuMemCreate must come from tacl_mem_alloc to be "
                           "shared", c->base.rank, op->buf, device, op->peer,
                           what, tacl__cu_str(res));
    if (ptr - base > size || op->len > size - (ptr - base))
        return tacl__error(TACL_ERR_INVALID_ARG, IPC,
                           "rank %d: the send buffer %p of %llu bytes "
                           "overruns its device allocation", c->base.rank,
                           op->buf, (unsigned long long)op->len);
    rts->mem = TACL_CIPC_MEM_LEGACY;
    rts->alloc_id = buffer_id;
    rts->alloc_size = size;
    rts->offset = ptr - base;
    memcpy(rts->handle, &h, sizeof(h));
    return TACL_OK;
}

tacl_status_t tacl__cipc_send(tacl__tl_t *tl, tacl__tl_op_t *op)
{
    tacl__cipc_t *c = (tacl__cipc_t *)tl;
    tacl__cipc_peer_t *peer;
    tacl__cipc_msg_t rts;
    tacl_status_t status;
    int device, fd = -1;

    status = check_op(c, op, "send", &device);
    if (status == TACL_OK)
        status = tacl__cipc_want(c, peer_of(c, op->peer));
    if (status != TACL_OK)
        return status;
    memset(&rts, 0, sizeof(rts));
    rts.kind = TACL_CIPC_MSG_RTS;
    rts.tag = op->tag;
    rts.len = op->len;
    rts.op_id = ++c->next_op_id;
    if (op->len > 0) {
        status = export_buffer(c, op, device, &rts, &fd);
        if (status != TACL_OK)
            return status;
    }
    peer = peer_of(c, op->peer);
    status = send_msg(peer, &rts, fd);
    if (status != TACL_OK)
        return status;
    TACL_CIPC_OP_ID(op) = rts.op_id;
    tacl__tl_opq_push(&peer->rts_wait, op);
    return TACL_OK;
}

/*
 * Start moving the message of rts (with fd) into recv: open its
 * allocation and queue the copy; or finish at once (empty, wrong
 * length, cannot open), answering the sender.
 */
static tacl_status_t start_pull(tacl__cipc_t *c, tacl__cipc_peer_t *peer,
                                tacl__tl_op_t *recv,
                                const tacl__cipc_msg_t *rts, int fd)
{
    tacl_status_t status = TACL_OK;
    int map = -1;

    if (rts->len != recv->len)
        status = tacl__tl_length_error(peer->rank, recv->tag, rts->len, 0,
                                       recv->len, TACL_SUBSYS_IPC);
    else if (rts->len > 0 && (rts->offset > rts->alloc_size ||
                              rts->len > rts->alloc_size - rts->offset))
        status = tacl__error(TACL_ERR_INTERNAL, IPC,
                             "rank %d sent a message beyond its allocation",
                             peer->rank);
    else if (rts->len > 0)
        map = tacl__cipc_map_get(peer, rts, fd, TACL_CIPC_OP_DEVICE(recv),
                                 &status);
    close_fd(fd);
    if (rts->len == 0 || status != TACL_OK) {
        tacl_status_t sent = send_fin(peer, rts->op_id, status);

        tacl__tl_complete(&c->base, recv, status);
        return sent;
    }
    TACL_CIPC_OP_ID(recv) = rts->op_id;
    TACL_CIPC_OP_ISSUED(recv) = 0;
    TACL_CIPC_OP_DONE(recv) = 0;
    TACL_CIPC_OP_SRC(recv) = peer->maps[map].base + rts->offset;
    TACL_CIPC_OP_WHERE(recv) =
        (uint64_t)TACL_CIPC_OP_DEVICE(recv) << 16 | (uint64_t)map;
    tacl__tl_opq_push(&c->pulls, recv);
    return TACL_OK;
}

int tacl__cipc_probe(tacl__tl_t *tl, uint64_t tag, int *peer, uint64_t *len)
{
    tacl__cipc_t *c = (tacl__cipc_t *)tl;

    return tacl__tl_base_probe_peers(&c->base, c->peers, sizeof(*c->peers),
                                     offsetof(tacl__cipc_peer_t, ux),
                                     offsetof(tacl__cipc_ux_t, msg.len), tag,
                                     peer, len);
}

tacl_status_t tacl__cipc_recv(tacl__tl_t *tl, tacl__tl_op_t *op)
{
    tacl__cipc_t *c = (tacl__cipc_t *)tl;
    tacl__cipc_peer_t *peer;
    tacl__cipc_ux_t *ux;
    tacl_status_t status;
    int device;

    status = check_op(c, op, "receive", &device);
    if (status == TACL_OK)
        status = tacl__cipc_want(c, peer_of(c, op->peer));
    if (status != TACL_OK)
        return status;
    /* The device rides with the receive until it is matched. */
    TACL_CIPC_OP_WHERE(op) = (uint64_t)(device < 0 ? 0 : device) << 16;
    peer = peer_of(c, op->peer);
    ux = (tacl__cipc_ux_t *)tacl__tl_msgq_take(&peer->ux, op->peer, op->tag);
    if (ux == NULL) {
        tacl__tl_opq_push(&peer->recvs, op);
        return TACL_OK;
    }
    status = start_pull(c, peer, op, &ux->msg, ux->fd);
    free(ux);
    if (status != TACL_OK)
        tacl__tl_base_fail(&c->base, status);
    return TACL_OK;
}

static tacl_status_t on_rts(tacl__cipc_t *c, tacl__cipc_peer_t *peer,
                            const tacl__cipc_msg_t *msg, int fd)
{
    tacl__tl_op_t *recv = tacl__tl_opq_take(&peer->recvs, peer->rank,
                                            msg->tag);
    tacl__cipc_ux_t *ux;

    if (recv)
        return start_pull(c, peer, recv, msg, fd);
    ux = calloc(1, sizeof(*ux));
    if (ux == NULL) {
        close_fd(fd);
        return tacl__error(TACL_ERR_NO_MEMORY, IPC,
                           "cannot keep a request to send from rank %d",
                           peer->rank);
    }
    ux->link.peer = peer->rank;
    ux->link.tag = msg->tag;
    ux->msg = *msg;
    ux->fd = fd;
    tacl__tl_msgq_push(&peer->ux, &ux->link);
    return TACL_OK;
}

static void on_fin(tacl__cipc_t *c, tacl__cipc_peer_t *peer,
                   const tacl__cipc_msg_t *msg)
{
    tacl__tl_op_t *prev = NULL, *op;

    for (op = peer->rts_wait.head; op; prev = op, op = op->tl_next)
        if (TACL_CIPC_OP_ID(op) == msg->op_id)
            break;
    if (op == NULL) {
        TACL_WARN(IPC, "rank %d acknowledged unknown operation %llu; "
                  "ignored", peer->rank, (unsigned long long)msg->op_id);
        return;
    }
    tacl__tl_opq_unlink(&peer->rts_wait, prev, op);
    tacl__tl_complete(&c->base, op, (tacl_status_t)msg->status);
}

/* Read one message and its descriptor: 1, 0 nothing yet, -1 hung up. */
static int read_msg(int sock, tacl__cipc_msg_t *msg, int *fd_p)
{
    union {
        struct cmsghdr hdr;
        char buf[CMSG_SPACE(sizeof(int))];
    } ctl;
    struct iovec iov = {msg, sizeof(*msg)};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1,
                        .msg_control = ctl.buf,
                        .msg_controllen = sizeof(ctl.buf)};
    struct cmsghdr *cm;
    ssize_t n;

    *fd_p = -1;
    do {
        n = recvmsg(sock, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    } while (n < 0 && errno == EINTR);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return 0;
    for (cm = n > 0 ? CMSG_FIRSTHDR(&mh) : NULL; cm;
         cm = CMSG_NXTHDR(&mh, cm))
        if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS &&
            cm->cmsg_len >= CMSG_LEN(sizeof(int)))
            memcpy(fd_p, CMSG_DATA(cm), sizeof(int));
    if (n != (ssize_t)sizeof(*msg)) {
        close_fd(*fd_p);
        *fd_p = -1;
        return -1;
    }
    return 1;
}

/* Whether an operation of ours waits for the peer. */
static int peer_busy(const tacl__cipc_t *c, const tacl__cipc_peer_t *peer)
{
    if (peer->rts_wait.head || peer->recvs.head)
        return 1;
    for (const tacl__tl_op_t *op = c->pulls.head; op; op = op->tl_next)
        if (op->peer == peer->rank)
            return 1;
    return 0;
}

/* The peer hung up: forget its socket and what waits to go there. */
static void hang_up(tacl__cipc_peer_t *peer)
{
    if (peer->fd >= 0)
        close(peer->fd);
    peer->fd = -1;
    peer->hung_up = 1;
    for (size_t i = 0; i < peer->nout; i++)
        close_fd(peer->out[i].fd);
    peer->nout = 0;
}

/* Handle what the peer sent; messages handled, or a negative status. */
static int poll_in(tacl__cipc_t *c, tacl__cipc_peer_t *peer)
{
    tacl_status_t status = TACL_OK;
    tacl__cipc_msg_t msg;
    int n = 0, fd, r = 0;

    while (peer->fd >= 0 && n < TACL_CIPC_POLL_BUDGET &&
           (r = read_msg(peer->fd, &msg, &fd)) > 0) {
        ++n;
        if (msg.kind == TACL_CIPC_MSG_RTS) {
            status = on_rts(c, peer, &msg, fd);
            fd = -1;
        } else if (msg.kind == TACL_CIPC_MSG_FIN) {
            on_fin(c, peer, &msg);
        } else if (msg.kind == TACL_CIPC_MSG_FREED) {
            tacl__cipc_map_freed(peer, msg.alloc_id);
        } else {
            status = tacl__error(TACL_ERR_INTERNAL, IPC,
                                 "unknown message kind %u from rank %d",
                                 msg.kind, peer->rank);
        }
        close_fd(fd);
        if (status != TACL_OK)
            return status;
    }
    if (r < 0) {
        /* The peer exited or died: an error only if we wait for it. */
        hang_up(peer);
        if (peer_busy(c, peer))
            return tacl__error_peer(peer->rank, IPC,
                                    "rank %d closed its cuda_ipc connection "
                                    "with operations pending (it exited or "
                                    "died); check that process's output",
                                    peer->rank);
    }
    return n;
}

/* Tell every peer about our shared allocations freed since last time. */
static tacl_status_t announce_frees(tacl__cipc_t *c)
{
    uint64_t ids[32];
    tacl_status_t status = TACL_OK;
    int n;

    if (tacl__cuda_mem_free_count() == c->freed_cursor)
        return TACL_OK;
    while ((n = tacl__cuda_mem_freed(&c->freed_cursor, ids, 32)) > 0) {
        for (int i = 0; i < c->base.nlocal; i++) {
            tacl__cipc_peer_t *peer = &c->peers[i];

            for (int k = 0; k < n && peer->fd >= 0; k++) {
                tacl__cipc_msg_t msg;

                memset(&msg, 0, sizeof(msg));
                msg.kind = TACL_CIPC_MSG_FREED;
                msg.alloc_id = ids[k];
                status = send_msg(peer, &msg, -1);
                /* A peer gone needs no news; its own error shows. */
                if (status != TACL_OK && status != TACL_ERR_REMOTE)
                    return status;
            }
        }
    }
    return TACL_OK;
}

/* The stream and events of device d, made on first use. */
static tacl_status_t dev_ready(tacl__cipc_t *c, int d)
{
    const tacl__cu_t *cu = tacl__cu();
    tacl__cipc_dev_t *dev = &c->devs[d];
    CUresult res;
    unsigned k = 0;

    if (dev->ready)
        return TACL_OK;
    res = (CUresult)tacl__cu_push(d);
    if (res != CUDA_SUCCESS)
        return tacl__error(TACL_ERR_SYSTEM, IPC,
                           "cannot use CUDA device %d: %s", d,
                           tacl__cu_str(res));
    res = cu->cuStreamCreate(&dev->stream, CU_STREAM_NON_BLOCKING);
    for (; res == CUDA_SUCCESS && k < TACL_CIPC_INFLIGHT; k++)
        res = cu->cuEventCreate(&dev->ring[k].event, CU_EVENT_DISABLE_TIMING);
    if (res != CUDA_SUCCESS) {
        while (k-- > 0)
            if (dev->ring[k].event)
                cu->cuEventDestroy(dev->ring[k].event);
        if (dev->stream)
            cu->cuStreamDestroy(dev->stream);
        memset(dev, 0, sizeof(*dev));
    } else {
        dev->ready = 1;
    }
    tacl__cu_pop();
    if (res != CUDA_SUCCESS)
        return tacl__error(TACL_ERR_SYSTEM, IPC,
                           "cannot create cuda_ipc's stream on device %d: "
                           "%s", d, tacl__cu_str(res));
    return TACL_OK;
}

/* End a pull: its FIN goes, it completes, its mapping is released. */
static tacl_status_t finish_pull(tacl__cipc_t *c, tacl__tl_op_t *op,
                                 tacl_status_t status)
{
    tacl__cipc_peer_t *peer = peer_of(c, op->peer);

    tacl__tl_opq_remove(&c->pulls, op);
    forget_pull(c, op);
    tacl__tl_complete(&c->base, op, status);
    return send_fin(peer, TACL_CIPC_OP_ID(op), status);
}

/* Poll device d's copies, oldest first; events handled or a status. */
static int poll_copies(tacl__cipc_t *c, int d)
{
    const tacl__cu_t *cu = tacl__cu();
    tacl__cipc_dev_t *dev = &c->devs[d];
    int events = 0;

    while (dev->count > 0) {
        tacl__cipc_chunk_t *ch = &dev->ring[dev->head];
        CUresult res = cu->cuEventQuery(ch->event);
        tacl__tl_op_t *op = ch->op;
        tacl_status_t status;

        if (res == CUDA_ERROR_NOT_READY)
            break;
        dev->head = (dev->head + 1) % TACL_CIPC_INFLIGHT;
        dev->count--;
        ch->op = NULL;
        ++events;
        if (op == NULL)
            continue;
        if (res != CUDA_SUCCESS) {
            status = tacl__error(TACL_ERR_SYSTEM, IPC,
                                 "a copy from rank %d on device %d failed: "
                                 "%s", op->peer, d, tacl__cu_str(res));
        } else {
            TACL_CIPC_OP_DONE(op) = ch->end;
            if (ch->end < op->len)
                continue;
            status = TACL_OK;
        }
        status = finish_pull(c, op, status);
        if (status != TACL_OK)
            return status;
    }
    return events;
}

/* Queue copies of the pulls on their devices' streams while there is
 * room, oldest first; chunks queued, or a negative status. */
static int issue_copies(tacl__cipc_t *c)
{
    const tacl__cu_t *cu = tacl__cu();
    tacl__tl_op_t *op, *next;
    int issued = 0;

    for (op = c->pulls.head; op; op = next) {
        int d = TACL_CIPC_OP_DEVICE(op);
        tacl__cipc_dev_t *dev = &c->devs[d];
        tacl_status_t status;

        next = op->tl_next;
        if (TACL_CIPC_OP_ISSUED(op) == op->len)
            continue;
        status = dev_ready(c, d);
        if (status != TACL_OK) {
            status = finish_pull(c, op, status);
            if (status != TACL_OK)
                return status;
            continue;
        }
        if (tacl__cu_push(d) != 0)
            continue;   /* dev_ready just pushed it: not reached */
        while (dev->count < TACL_CIPC_INFLIGHT &&
               TACL_CIPC_OP_ISSUED(op) < op->len) {
            uint64_t off = TACL_CIPC_OP_ISSUED(op);
            uint64_t n = TACL_MIN(op->len - off, (uint64_t)TACL_CIPC_CHUNK);
            tacl__cipc_chunk_t *ch =
                &dev->ring[(dev->head + dev->count) % TACL_CIPC_INFLIGHT];
            CUresult res = cu->cuMemcpyAsync(
                (CUdeviceptr)(uintptr_t)op->buf + off,
                (CUdeviceptr)TACL_CIPC_OP_SRC(op) + off, n, dev->stream);

            if (res == CUDA_SUCCESS)
                res = cu->cuEventRecord(ch->event, dev->stream);
            if (res != CUDA_SUCCESS) {
                tacl__cu_pop();
                status = tacl__error(TACL_ERR_SYSTEM, IPC,
                                     "queuing a copy of %llu bytes from rank "
                                     "%d on device %d failed: %s",
                                     (unsigned long long)n, op->peer, d,
                                     tacl__cu_str(res));
                status = finish_pull(c, op, status);
                if (status != TACL_OK)
                    return status;
                goto next_op;
            }
            ch->op = op;
            ch->end = off + n;
            dev->count++;
            TACL_CIPC_OP_ISSUED(op) = off + n;
            ++issued;
        }
        tacl__cu_pop();
next_op:;
    }
    return issued;
}

int tacl__cipc_progress(tacl__tl_t *tl)
{
    tacl__cipc_t *c = (tacl__cipc_t *)tl;
    tacl_status_t status = TACL_OK;
    int events = 0, n;

    if (c->nwant > 0 && c->base.failed == TACL_OK) {
        n = tacl__cipc_connect_pending(c);
        if (n < 0)
            tacl__tl_base_fail(&c->base, n);
        else
            events += n;
    }
    for (int i = 0; i < c->base.nlocal && c->base.failed == TACL_OK;
         i++) {
        tacl__cipc_peer_t *peer = &c->peers[i];

        if (i == c->base.my_local || (peer->fd < 0 && !peer->nout))
            continue;
        status = flush_out(peer);
        if (status != TACL_OK && !peer_busy(c, peer)) {
            /* Only news (FREED, a late FIN) was left for it. */
            hang_up(peer);
            status = TACL_OK;
        }
        n = status != TACL_OK ? status : poll_in(c, peer);
        if (n < 0) {
            tacl__tl_base_fail(&c->base, n);
            break;
        }
        events += n;
    }
    if (c->base.failed == TACL_OK)
        status = announce_frees(c);
    for (int d = 0; d < TACL_CIPC_MAX_DEVICES && c->base.failed == TACL_OK &&
                    status == TACL_OK; d++) {
        n = c->devs[d].count ? poll_copies(c, d) : 0;
        if (n < 0)
            status = n;
        else
            events += n;
    }
    if (c->base.failed == TACL_OK && status == TACL_OK && c->pulls.head) {
        n = issue_copies(c);
        if (n < 0)
            status = n;
        else
            events += n;
    }
    if (status != TACL_OK)
        tacl__tl_base_fail(&c->base, status);
    return tacl__tl_base_finish(&c->base, events);
}

tacl_status_t tacl__cipc_wait(tacl__tl_t *tl, int64_t timeout_us)
{
    tacl__cipc_t *c = (tacl__cipc_t *)tl;
    struct pollfd *fds;
    int nfds = 0, busy = 0;

    timeout_us = tacl__tl_base_wait_us(&c->base, timeout_us);
    fds = calloc((size_t)c->base.nlocal + 1, sizeof(*fds));
    if (fds == NULL)
        return TACL_OK;
    tacl__tl_lock(c->base.lock);
    /* Copies on the GPU are polled, not slept on. */
    busy = tacl__tl_base_ready(&c->base) || c->pulls.head;
    for (int i = 0; i < c->base.nlocal && !busy; i++) {
        tacl__cipc_peer_t *peer = &c->peers[i];

        /* A connection we make waits for room in the peer's backlog. */
        if (peer->want && i > c->base.my_local) {
            busy = 1;
            continue;
        }
        if (i == c->base.my_local || peer->fd < 0)
            continue;
        busy = peer->nout > 0;
        fds[nfds].fd = peer->fd;
        fds[nfds++].events = POLLIN;
    }
    /* A connection we accept arrives on our socket. */
    if (c->nwant > 0 && c->lfd >= 0) {
        fds[nfds].fd = c->lfd;
        fds[nfds++].events = POLLIN;
    }
    tacl__tl_unlock(c->base.lock);
    if (!busy && nfds > 0) {
        struct timespec ts = {(time_t)(timeout_us / 1000000),
                              (long)(timeout_us % 1000000) * 1000};

        ppoll(fds, (nfds_t)nfds, &ts, NULL);
    }
    free(fds);
    return TACL_OK;
}

static void ux_free(tacl__tl_msg_t *msg)
{
    tacl__cipc_ux_t *ux = (tacl__cipc_ux_t *)msg;

    close_fd(ux->fd);
    free(ux);
}

void tacl__cipc_peer_cleanup(tacl__cipc_peer_t *peer)
{
    tacl__tl_msgq_drain(&peer->ux, ux_free);
    for (size_t i = 0; i < peer->nout; i++)
        close_fd(peer->out[i].fd);
    free(peer->out);
    peer->out = NULL;
    peer->nout = peer->out_cap = 0;
    tacl__cipc_map_clear(peer);
}

void tacl__cipc_devs_fini(tacl__cipc_t *c)
{
    const tacl__cu_t *cu = tacl__cu();

    for (int d = 0; d < TACL_CIPC_MAX_DEVICES; d++) {
        tacl__cipc_dev_t *dev = &c->devs[d];

        if (!dev->ready || tacl__cu_push(d) != 0)
            continue;
        /* Copies still queued read peers' mappings: let them end. */
        cu->cuStreamSynchronize(dev->stream);
        for (unsigned k = 0; k < TACL_CIPC_INFLIGHT; k++)
            cu->cuEventDestroy(dev->ring[k].event);
        cu->cuStreamDestroy(dev->stream);
        tacl__cu_pop();
        memset(dev, 0, sizeof(*dev));
    }
}
#endif
