/*
 * CUDA device memory across nodes: the ucx transport stages it through
 * pinned host chunks.
 *
 * A device message of len bytes travels as ceil(len / C) UCX messages of
 * C bytes (the last shorter), C = TACL_UCX_CUDA_CHUNK, all with the
 * message's tag: UCX matches messages of one sender and tag in the order
 * they were sent, and the executor never has two messages with the same
 * tag in flight between two ranks, so chunk k meets chunk k.  A message
 * of at most C bytes is one UCX message, as from host memory.
 *
 * The sender copies a chunk from the device into a free pinned chunk
 * (cudaMemcpyAsync on the instance's own stream, then an event), and once
 * the event has fired sends it; the receiver receives a chunk into a free
 * pinned chunk and copies it to the device the same way.  progress()
 * polls the events (cudaEventQuery: it never blocks) and starts the next
 * chunks, so copies and network transfers of consecutive chunks overlap.
 * TACL_UCX_CUDA_CHUNKS chunks are allocated once per instance, at its
 * first device message (cudaHostAlloc), half for sends and half for
 * receives.
 *
 * No deadlock from the bounded pool: a send chunk is held only until UCX
 * has sent it, and a receive chunk is taken only for a chunk that has
 * arrived (ucp_tag_probe_nb finds it), so it is freed by a local copy
 * alone.  A receive therefore never holds chunks waiting for a peer that
 * itself waits for chunks.
 *
 * The CUDA runtime is the static one every CUDA build of tacl links (it
 * opens the driver itself, at its first call), so this needs no shared
 * libcudart on the loader path, and the library still loads on machines
 * without CUDA; without a usable device at init the instance keeps the
 * host-only capabilities and a device buffer is refused by the
 * capability check.  Host messages never come here:
 * ucx.c's send and recv, the only callers of this file, keep them.  This
 * file builds on the endpoints (ucx_ep.c) and posts its chunks through
 * the host data path (ucx_ops.c).
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "config.h"
#include "log.h"
#include "tacl_build_config.h"
#include "ucx.h"

#if TACL_HAVE_CUDA
#include <cuda_runtime_api.h>

/* The CUDA runtime's names as this file uses them. */
typedef cudaError_t cu_err_t;
typedef cudaStream_t cu_stream_t;
typedef cudaEvent_t cu_event_t;

enum { SLOT_FREE = 0, SLOT_COPY, SLOT_NET };

typedef struct stage_msg stage_msg_t;

/* One pinned chunk and the chunk of a message it carries. */
typedef struct {
    tacl__tl_op_t net;         /* the chunk's UCX message */
    tacl__ucx_t *ucx;
    uint8_t *host;             /* chunk bytes of pinned memory */
    void *drain;               /* heap buffer for a too long message */
    cu_event_t ev;
    stage_msg_t *msg;          /* NULL once its message ended early */
    uint64_t off;              /* the chunk's offset in the message */
    int state;                 /* SLOT_* */
} slot_t;

/* A device message being staged. */
struct stage_msg {
    tacl__tl_msg_t link;       /* first: its peer, tag and place in
                                  ucx->staged */
    tacl__tl_op_t *op;
    uint64_t nchunks;
    uint64_t issued;           /* chunks started */
    uint64_t done;             /* chunks finished */
    int inflight;              /* started, not finished */
    int recv;
    tacl_status_t status;
};

struct tacl__ucx_stage {
    int device;                /* the device current at init */
    int ready;                 /* chunks, stream and events made */
    tacl_status_t broken;      /* their setup failed (sticky) */
    uint64_t chunk;            /* bytes per chunk */
    int nslots;                /* per direction */
    slot_t *slots;             /* sends [0, nslots), receives after */
    cu_stream_t stream;
    slot_t **copies;           /* ring of slots copying, in issue order */
    int copy_head;
    int ncopies;
};

static tacl_status_t cuda_error(tacl__ucx_t *ucx, const char *what,
                                cu_err_t err)
{
    return tacl__error(TACL_ERR_SYSTEM, NET, "rank %d: %s failed while "
                       "staging device memory: %s", ucx->base.rank, what,
                       cudaGetErrorString(err));
}

/* Make the instance's device current; returns the one to restore. */
static int enter_device(tacl__ucx_stage_t *st)
{
    int prev = st->device;

    if (cudaGetDevice(&prev) == cudaSuccess && prev != st->device)
        cudaSetDevice(st->device);
    return prev;
}

static void leave_device(tacl__ucx_stage_t *st, int prev)
{
    if (prev != st->device)
        cudaSetDevice(prev);
}

int tacl__ucx_stage_init(tacl__ucx_t *ucx)
{
    tacl__ucx_stage_t *st;
    int n = 0, dev = 0;
    cu_err_t err;

    err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess || n < 1) {
        TACL_INFO(NET, "rank %d: ucx moves host memory only: %s",
                  ucx->base.rank,
                  err != cudaSuccess ? cudaGetErrorString(err)
                                    : "no CUDA device");
        return 0;
    }
    if (cudaGetDevice(&dev) != cudaSuccess)
        return 0;
    st = calloc(1, sizeof(*st));
    if (!st)
        return 0;
    st->device = dev;
    st->chunk = tacl__config_size(TACL_CFG_UCX_CUDA_CHUNK);
    st->nslots = (int)TACL_MAX(1, tacl__config_int(TACL_CFG_UCX_CUDA_CHUNKS)
                                      / 2);
    ucx->stage = st;
    TACL_INFO(NET, "rank %d: ucx stages CUDA memory of device %d through "
              "%d + %d pinned chunks of %llu bytes", ucx->base.rank, dev,
              st->nslots, st->nslots, (unsigned long long)st->chunk);
    return 1;
}

/* The pinned chunks, the stream and the events, made once. */
static tacl_status_t stage_setup(tacl__ucx_t *ucx, tacl__ucx_stage_t *st)
{
    int total = 2 * st->nslots;
    cu_err_t err;

    if (st->ready || st->broken != TACL_OK)
        return st->broken;
    st->broken = TACL_ERR_SYSTEM;
    st->slots = calloc((size_t)total, sizeof(*st->slots));
    st->copies = calloc((size_t)total, sizeof(*st->copies));
    if (!st->slots || !st->copies)
        return st->broken = tacl__error(TACL_ERR_NO_MEMORY, NET, "out of "
                                        "memory for %d staging chunks",
                                        total);
    err = cudaStreamCreateWithFlags(&st->stream, cudaStreamNonBlocking);
    if (err != cudaSuccess)
        return st->broken = cuda_error(ucx, "cudaStreamCreate", err);
    for (int i = 0; i < total; ++i) {
        slot_t *s = &st->slots[i];

        s->ucx = ucx;
        err = cudaHostAlloc((void **)&s->host, st->chunk,
                            cudaHostAllocPortable);
        if (err != cudaSuccess)
            return st->broken = cuda_error(ucx, "cudaHostAlloc", err);
        err = cudaEventCreateWithFlags(&s->ev, cudaEventDisableTiming);
        if (err != cudaSuccess)
            return st->broken = cuda_error(ucx, "cudaEventCreate", err);
    }
    st->ready = 1;
    st->broken = TACL_OK;
    return TACL_OK;
}

/* Complete the message once nothing of it is in flight any more. */
static int msg_maybe_done(tacl__ucx_t *ucx, stage_msg_t *m)
{
    if (m->inflight > 0 || (m->status == TACL_OK && m->done < m->nchunks))
        return 0;
    tacl__tl_msgq_remove(&ucx->staged, &m->link);
    tacl__tl_complete(&ucx->base, m->op, m->status);
    free(m);
    return 1;
}

static void msg_fail(stage_msg_t *m, tacl_status_t status)
{
    if (m->status == TACL_OK)
        m->status = status;
}

static uint64_t chunk_len(const tacl__ucx_stage_t *st, const stage_msg_t *m,
                          uint64_t off)
{
    return TACL_MIN(st->chunk, m->op->len - off);
}

static slot_t *free_slot(tacl__ucx_stage_t *st, int recv)
{
    slot_t *s = st->slots + (recv ? st->nslots : 0);

    for (int i = 0; i < st->nslots; ++i)
        if (s[i].state == SLOT_FREE)
            return &s[i];
    return NULL;
}

/*
 * A chunk slot is done with its message's chunk.  finish: complete the
 * message if that was its last chunk (else the caller, which still uses
 * the message, does).
 */
static void slot_release(tacl__ucx_t *ucx, slot_t *s, tacl_status_t status,
                         int finish)
{
    stage_msg_t *m = s->msg;

    free(s->drain);
    s->drain = NULL;
    s->state = SLOT_FREE;
    s->msg = NULL;
    if (!m)
        return;
    --m->inflight;
    if (status == TACL_OK)
        ++m->done;
    else
        msg_fail(m, status);
    if (finish)
        msg_maybe_done(ucx, m);
}

/* Start the copy of a slot's chunk; it joins the ring of copies. */
static tacl_status_t start_copy(tacl__ucx_t *ucx, slot_t *s,
                                enum cudaMemcpyKind kind)
{
    tacl__ucx_stage_t *st = ucx->stage;
    uint8_t *dev = (uint8_t *)s->msg->op->buf + s->off;
    size_t len = (size_t)s->net.len;
    cu_err_t err;

    err = kind == cudaMemcpyDeviceToHost
              ? cudaMemcpyAsync(s->host, dev, len, kind, st->stream)
              : cudaMemcpyAsync(dev, s->host, len, kind, st->stream);
    if (err == cudaSuccess)
        err = cudaEventRecord(s->ev, st->stream);
    if (err != cudaSuccess)
        return cuda_error(ucx, "cudaMemcpyAsync", err);
    s->state = SLOT_COPY;
    st->copies[(st->copy_head + st->ncopies) % (2 * st->nslots)] = s;
    ++st->ncopies;
    return TACL_OK;
}

/* A chunk's UCX message finished (from the done queue's run). */
static void chunk_net_done(tacl__tl_op_t *op, tacl_status_t status)
{
    slot_t *s = op->arg;
    tacl__ucx_t *ucx = s->ucx;
    int recv = s >= ucx->stage->slots + ucx->stage->nslots;

    if (!recv || status != TACL_OK || !s->msg ||
        s->msg->status != TACL_OK) {
        slot_release(ucx, s, status, 1);
        return;
    }
    int prev = enter_device(ucx->stage);
    status = start_copy(ucx, s, cudaMemcpyHostToDevice);
    leave_device(ucx->stage, prev);
    if (status != TACL_OK)
        slot_release(ucx, s, status, 1);
}

static void slot_bind(slot_t *s, stage_msg_t *m, uint64_t off,
                      uint64_t len)
{
    memset(&s->net, 0, sizeof(s->net));
    s->net.peer = m->op->peer;
    s->net.tag = m->op->tag;
    s->net.buf = s->host;
    s->net.len = len;
    s->net.memtype = TACL_MEM_HOST;
    s->net.cb = chunk_net_done;
    s->net.arg = s;
    s->msg = m;
    s->off = off;
    ++m->inflight;
    ++m->issued;
}

/* Receive the next chunk of m if it has arrived; 1 when one was taken. */
static int take_chunk(tacl__ucx_t *ucx, stage_msg_t *m, slot_t *s)
{
    tacl__ucx_stage_t *st = ucx->stage;
    uint64_t off = m->issued * st->chunk, want = chunk_len(st, m, off);
    ucp_tag_recv_info_t info;
    ucp_tag_message_h msg;
    tacl_status_t status;

    msg = ucp_tag_probe_nb(ucx->worker, tacl__ucx_tag(m->op->peer,
                                                      m->op->tag),
                           TACL_UCX_TAG_MASK, 1, &info);
    if (msg == NULL) {
        if (ucx->ep_state[m->op->peer] != TACL_UCX_EP_OPEN)
            msg_fail(m, tacl__error_peer(m->op->peer, NET, "rank %d: "
                                         "receive from rank %d, whose "
                                         "connection was lost", ucx->base.rank,
                                         m->op->peer));
        return 0;
    }
    slot_bind(s, m, off, want);
    if (info.length != want) {
        /* Received all the same, to take it off UCX's queue. */
        msg_fail(m, tacl__tl_length_error(m->op->peer, m->op->tag,
                                          info.length, 0, want,
                                          TACL_SUBSYS_NET));
        s->net.len = info.length;
        if (info.length > st->chunk) {
            s->drain = malloc(info.length);
            s->net.buf = s->drain;
        }
    }
    s->state = SLOT_NET;
    status = s->net.buf ? tacl__ucx_msg_recv(ucx, &s->net, msg)
                        : TACL_ERR_NO_MEMORY;
    if (status != TACL_OK)
        slot_release(ucx, s, status, 0);
    return 1;
}

/* Start every chunk a free slot can take, messages in posting order. */
static int issue(tacl__ucx_t *ucx)
{
    tacl__ucx_stage_t *st = ucx->stage;
    stage_msg_t *m = (stage_msg_t *)ucx->staged.head, *next;
    int events = 0;

    for (; m; m = next) {
        next = (stage_msg_t *)m->link.next;
        while (m->status == TACL_OK && m->issued < m->nchunks) {
            slot_t *s = free_slot(st, m->recv);
            uint64_t off = m->issued * st->chunk;
            tacl_status_t status;

            if (!s)
                break;
            if (m->recv) {
                if (!take_chunk(ucx, m, s))
                    break;
                ++events;
                continue;
            }
            slot_bind(s, m, off, chunk_len(st, m, off));
            status = start_copy(ucx, s, cudaMemcpyDeviceToHost);
            if (status != TACL_OK)
                slot_release(ucx, s, status, 0);
            ++events;
        }
        msg_maybe_done(ucx, m);
    }
    return events;
}

/* Finish the copies whose events have fired, oldest first. */
static int poll_copies(tacl__ucx_t *ucx)
{
    tacl__ucx_stage_t *st = ucx->stage;
    int events = 0;

    while (st->ncopies > 0) {
        slot_t *s = st->copies[st->copy_head];
        cu_err_t err = cudaEventQuery(s->ev);
        int recv = s >= st->slots + st->nslots;
        tacl_status_t status = TACL_OK;

        if (err == cudaErrorNotReady)
            break;
        st->copy_head = (st->copy_head + 1) % (2 * st->nslots);
        --st->ncopies;
        ++events;
        if (err != cudaSuccess)
            status = cuda_error(ucx, "a staging copy", err);
        if (recv || status != TACL_OK || !s->msg ||
            s->msg->status != TACL_OK) {
            slot_release(ucx, s, status, 1);
            continue;
        }
        /* A send chunk is in pinned memory: send it. */
        s->state = SLOT_NET;
        status = tacl__ucx_post(ucx, &s->net, 0);
        if (status != TACL_OK)
            slot_release(ucx, s, status, 1);
    }
    return events;
}

tacl_status_t tacl__ucx_stage_post(tacl__ucx_t *ucx, tacl__tl_op_t *op,
                                   int recv)
{
    tacl__ucx_stage_t *st = ucx->stage;
    tacl_status_t status;
    stage_msg_t *m;
    ucp_ep_h ep;

    /* The capability check let it through only with a stage. */
    if (!st)
        return tacl__error(TACL_ERR_INTERNAL, NET, "rank %d: a device "
                           "message without CUDA staging", ucx->base.rank);
    status = tacl__ucx_get_ep(ucx, op->peer, &ep);
    if (status != TACL_OK && !recv)
        return status;
    int prev = enter_device(st);
    status = stage_setup(ucx, st);
    leave_device(st, prev);
    if (status != TACL_OK)
        return status;
    m = calloc(1, sizeof(*m));
    if (!m)
        return tacl__error(TACL_ERR_NO_MEMORY, NET, "out of memory");
    m->link.peer = op->peer;
    m->link.tag = op->tag;
    m->op = op;
    m->recv = recv;
    m->nchunks = TACL_DIV_UP(op->len, st->chunk);
    tacl__tl_msgq_push(&ucx->staged, &m->link);
    /* Start what can start now; completion waits for progress(). */
    prev = enter_device(st);
    issue(ucx);
    leave_device(st, prev);
    return TACL_OK;
}

int tacl__ucx_stage_progress(tacl__ucx_t *ucx)
{
    tacl__ucx_stage_t *st = ucx->stage;
    int events, prev;

    if (!st || (!ucx->staged.head && !st->ncopies))
        return 0;
    prev = enter_device(st);
    events = poll_copies(ucx);
    events += issue(ucx);
    leave_device(st, prev);
    return events;
}

int tacl__ucx_stage_pending(const tacl__ucx_t *ucx, int peer)
{
    const tacl__ucx_stage_t *st = ucx->stage;

    if (!st)
        return 0;
    for (const tacl__tl_msg_t *m = ucx->staged.head; m; m = m->next)
        if (peer < 0 || m->peer == peer)
            return 1;
    return peer < 0 && st->ncopies > 0;
}

/*
 * End every staged message with status.  Copies in flight read or write
 * the callers' buffers, so they are waited for first (bounded: they are
 * local copies of at most all the chunks); chunks whose UCX message is
 * still pending stay taken until its callback runs, which frees them.
 */
void tacl__ucx_stage_fail(tacl__ucx_t *ucx, tacl_status_t status)
{
    tacl__ucx_stage_t *st = ucx->stage;
    stage_msg_t *m;

    if (!st || (!ucx->staged.head && !st->ncopies))
        return;
    if (st->ncopies) {
        int prev = enter_device(st);

        cudaStreamSynchronize(st->stream);
        leave_device(st, prev);
        for (; st->ncopies; --st->ncopies) {
            slot_t *s = st->copies[st->copy_head];

            st->copy_head = (st->copy_head + 1) % (2 * st->nslots);
            s->state = SLOT_FREE;
            s->msg = NULL;
        }
    }
    for (int i = 0; st->slots && i < 2 * st->nslots; ++i)
        st->slots[i].msg = NULL;
    while ((m = (stage_msg_t *)tacl__tl_msgq_pop(&ucx->staged))) {
        tacl__tl_complete(&ucx->base, m->op,
                          m->status != TACL_OK ? m->status : status);
        free(m);
    }
}

void tacl__ucx_stage_close(tacl__ucx_t *ucx)
{
    tacl__ucx_stage_t *st = ucx->stage;

    if (!st)
        return;
    if (st->slots) {
        int prev = enter_device(st);

        if (st->stream)
            cudaStreamSynchronize(st->stream);
        for (int i = 0; i < 2 * st->nslots; ++i) {
            free(st->slots[i].drain);
            if (st->slots[i].host)
                cudaFreeHost(st->slots[i].host);
            if (st->slots[i].ev)
                cudaEventDestroy(st->slots[i].ev);
        }
        if (st->stream)
            cudaStreamDestroy(st->stream);
        leave_device(st, prev);
    }
    free(st->slots);
    free(st->copies);
    free(st);
    ucx->stage = NULL;
}

#else /* !TACL_HAVE_CUDA: the instance moves host memory only. */

int tacl__ucx_stage_init(tacl__ucx_t *ucx)
{
    (void)ucx;
    return 0;
}

tacl_status_t tacl__ucx_stage_post(tacl__ucx_t *ucx, tacl__tl_op_t *op,
                                   int recv)
{
    (void)op;
    (void)recv;
    return tacl__error(TACL_ERR_UNSUPPORTED, NET, "rank %d: this tacl was "
                       "built without CUDA", ucx->base.rank);
}

int tacl__ucx_stage_progress(tacl__ucx_t *ucx)
{
    (void)ucx;
    return 0;
}

int tacl__ucx_stage_pending(const tacl__ucx_t *ucx, int peer)
{
    (void)ucx;
    (void)peer;
    return 0;
}

void tacl__ucx_stage_fail(tacl__ucx_t *ucx, tacl_status_t status)
{
    (void)ucx;
    (void)status;
}

void tacl__ucx_stage_close(tacl__ucx_t *ucx)
{
    (void)ucx;
}

#endif /* TACL_HAVE_CUDA */
