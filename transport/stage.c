/*
 * CUDA device memory across nodes, staged through pinned host chunks:
 * the one staging module of the network transports (ucx, ofi), which
 * lend it their host data path (stage.h's tacl__stage_net_t).
 *
 * A device message of len bytes travels as ceil(len / C) host messages
 * of C bytes (the last shorter), C the chunk size the transport gives
 * (TACL_NET_CUDA_CHUNK), all with the message's tag: the transports
 * match messages of one sender and tag in the order they were sent, and
 * the executor never has two messages with the same tag in flight
 * between two ranks, so chunk k meets chunk k.  A message of at most C
 * bytes is one host message.
 *
 * The sender copies a chunk from the device into a free pinned chunk
 * (cudaMemcpyAsync on the stage's own stream, then an event), and once
 * the event has fired sends it; the receiver receives a chunk into a free
 * pinned chunk and copies it to the device the same way.  progress()
 * polls the events (cudaEventQuery: it never blocks) and starts the next
 * chunks, so copies and network transfers of consecutive chunks overlap.
 * The chunks (TACL_NET_CUDA_CHUNKS of them) are allocated once per
 * instance, at its first device message (cudaHostAlloc), half for sends
 * and half for receives.
 *
 * No deadlock from the bounded pool: a send chunk is held only until the
 * transport has sent it, and a receive chunk is taken only for a chunk
 * that has arrived (the transport's arrived(): UCX's tag probe, ofi's
 * peek), so it is freed by a local copy alone.  A receive therefore
 * never holds chunks waiting for a peer that itself waits for chunks.
 *
 * The CUDA runtime is the static one every CUDA build of tacl links (it
 * opens the driver itself, at its first call), so this needs no shared
 * libcudart on the loader path, and the library still loads on machines
 * without CUDA; without a usable device at init the transport keeps its
 * host-only capabilities and a device buffer is refused by the
 * capability check.  Host messages never come here.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "log.h"
#include "stage.h"
#include "tacl_build_config.h"

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
    tacl__tl_op_t net;         /* the chunk's host message */
    tacl__stage_t *st;
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
                                  the stage's queue */
    tacl__tl_op_t *op;
    uint64_t nchunks;
    uint64_t issued;           /* chunks started */
    uint64_t done;             /* chunks finished */
    int inflight;              /* started, not finished */
    int recv;
    tacl_status_t status;
};

struct tacl__stage {
    tacl__tl_base_t *tl;       /* the transport */
    tacl__stage_net_t net;     /* its host data path */
    tacl__tl_msgq_t staged;    /* device messages, in posting order */
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

static tacl_status_t cuda_error(const tacl__stage_t *st, const char *what,
                                cu_err_t err)
{
    return tacl__error(TACL_ERR_SYSTEM, NET, "rank %d: %s failed while "
                       "%s staged device memory: %s", st->tl->rank, what,
                       st->net.name, cudaGetErrorString(err));
}

/* Make the stage's device current; returns the one to restore. */
static int enter_device(const tacl__stage_t *st)
{
    int prev = st->device;

    if (cudaGetDevice(&prev) == cudaSuccess && prev != st->device)
        cudaSetDevice(st->device);
    return prev;
}

static void leave_device(const tacl__stage_t *st, int prev)
{
    if (prev != st->device)
        cudaSetDevice(prev);
}

tacl__stage_t *tacl__stage_new(tacl__tl_base_t *tl,
                               const tacl__stage_net_t *net, uint64_t chunk,
                               int nchunks)
{
    tacl__stage_t *st;
    int n = 0, dev = 0;
    cu_err_t err;

    err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess || n < 1) {
        TACL_INFO(NET, "rank %d: %s moves host memory only: %s", tl->rank,
                  net->name,
                  err != cudaSuccess ? cudaGetErrorString(err)
                                    : "no CUDA device");
        return NULL;
    }
    if (cudaGetDevice(&dev) != cudaSuccess)
        return NULL;
    st = calloc(1, sizeof(*st));
    if (!st)
        return NULL;
    st->tl = tl;
    st->net = *net;
    st->device = dev;
    st->chunk = chunk;
    st->nslots = TACL_MAX(1, nchunks / 2);
    TACL_INFO(NET, "rank %d: %s stages CUDA memory of device %d through "
              "%d + %d pinned chunks of %llu bytes", tl->rank, net->name,
              dev, st->nslots, st->nslots, (unsigned long long)st->chunk);
    return st;
}

/* The pinned chunks, the stream and the events, made once. */
static tacl_status_t stage_setup(tacl__stage_t *st)
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
        return st->broken = cuda_error(st, "cudaStreamCreate", err);
    for (int i = 0; i < total; ++i) {
        slot_t *s = &st->slots[i];

        s->st = st;
        err = cudaHostAlloc((void **)&s->host, st->chunk,
                            cudaHostAllocPortable);
        if (err != cudaSuccess)
            return st->broken = cuda_error(st, "cudaHostAlloc", err);
        err = cudaEventCreateWithFlags(&s->ev, cudaEventDisableTiming);
        if (err != cudaSuccess)
            return st->broken = cuda_error(st, "cudaEventCreate", err);
    }
    st->ready = 1;
    st->broken = TACL_OK;
    return TACL_OK;
}

/* Complete the message once nothing of it is in flight any more. */
static int msg_maybe_done(tacl__stage_t *st, stage_msg_t *m)
{
    if (m->inflight > 0 || (m->status == TACL_OK && m->done < m->nchunks))
        return 0;
    tacl__tl_msgq_remove(&st->staged, &m->link);
    tacl__tl_complete(st->tl, m->op, m->status);
    free(m);
    return 1;
}

static void msg_fail(stage_msg_t *m, tacl_status_t status)
{
    if (m->status == TACL_OK)
        m->status = status;
}

static uint64_t chunk_len(const tacl__stage_t *st, const stage_msg_t *m,
                          uint64_t off)
{
    return TACL_MIN(st->chunk, m->op->len - off);
}

static int slot_is_recv(const tacl__stage_t *st, const slot_t *s)
{
    return s >= st->slots + st->nslots;
}

static slot_t *free_slot(tacl__stage_t *st, int recv)
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
static void slot_release(tacl__stage_t *st, slot_t *s, tacl_status_t status,
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
        msg_maybe_done(st, m);
}

/* Start the copy of a slot's chunk; it joins the ring of copies. */
static tacl_status_t start_copy(tacl__stage_t *st, slot_t *s,
                                enum cudaMemcpyKind kind)
{
    uint8_t *dev = (uint8_t *)s->msg->op->buf + s->off;
    size_t len = (size_t)s->net.len;
    cu_err_t err;

    err = kind == cudaMemcpyDeviceToHost
              ? cudaMemcpyAsync(s->host, dev, len, kind, st->stream)
              : cudaMemcpyAsync(dev, s->host, len, kind, st->stream);
    if (err == cudaSuccess)
        err = cudaEventRecord(s->ev, st->stream);
    if (err != cudaSuccess)
        return cuda_error(st, "cudaMemcpyAsync", err);
    s->state = SLOT_COPY;
    st->copies[(st->copy_head + st->ncopies) % (2 * st->nslots)] = s;
    ++st->ncopies;
    return TACL_OK;
}

/* A chunk's host message finished (from the done queue's run). */
static void chunk_net_done(tacl__tl_op_t *op, tacl_status_t status)
{
    slot_t *s = op->arg;
    tacl__stage_t *st = s->st;
    int prev;

    if (!slot_is_recv(st, s) || status != TACL_OK || !s->msg ||
        s->msg->status != TACL_OK) {
        slot_release(st, s, status, 1);
        return;
    }
    prev = enter_device(st);
    status = start_copy(st, s, cudaMemcpyHostToDevice);
    leave_device(st, prev);
    if (status != TACL_OK)
        slot_release(st, s, status, 1);
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
static int take_chunk(tacl__stage_t *st, stage_msg_t *m, slot_t *s)
{
    uint64_t off = m->issued * st->chunk, want = chunk_len(st, m, off);
    uint64_t len = 0;
    void *handle = NULL;
    tacl_status_t status;
    int found;

    found = st->net.arrived(st->tl, m->op->peer, m->op->tag, &len,
                            &handle);
    if (found <= 0) {
        if (found < 0)
            msg_fail(m, (tacl_status_t)found);
        return 0;
    }
    slot_bind(s, m, off, want);
    if (len != want) {
        /* Received all the same, to take it off the transport's queue. */
        msg_fail(m, tacl__tl_length_error(m->op->peer, m->op->tag, len, 0,
                                          want, TACL_SUBSYS_NET));
        s->net.len = len;
        if (len > st->chunk) {
            s->drain = malloc(len);
            s->net.buf = s->drain;
        }
    }
    s->state = SLOT_NET;
    status = s->net.buf ? st->net.take(st->tl, &s->net, handle)
                        : TACL_ERR_NO_MEMORY;
    if (status != TACL_OK)
        slot_release(st, s, status, 0);
    return 1;
}

/* Start every chunk a free slot can take, messages in posting order. */
static int issue(tacl__stage_t *st)
{
    stage_msg_t *m = (stage_msg_t *)st->staged.head, *next;
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
                if (!take_chunk(st, m, s))
                    break;
                ++events;
                continue;
            }
            slot_bind(s, m, off, chunk_len(st, m, off));
            status = start_copy(st, s, cudaMemcpyDeviceToHost);
            if (status != TACL_OK)
                slot_release(st, s, status, 0);
            ++events;
        }
        msg_maybe_done(st, m);
    }
    return events;
}

/* Finish the copies whose events have fired, oldest first. */
static int poll_copies(tacl__stage_t *st)
{
    int events = 0;

    while (st->ncopies > 0) {
        slot_t *s = st->copies[st->copy_head];
        cu_err_t err = cudaEventQuery(s->ev);
        tacl_status_t status = TACL_OK;

        if (err == cudaErrorNotReady)
            break;
        st->copy_head = (st->copy_head + 1) % (2 * st->nslots);
        --st->ncopies;
        ++events;
        if (err != cudaSuccess)
            status = cuda_error(st, "a staging copy", err);
        if (slot_is_recv(st, s) || status != TACL_OK || !s->msg ||
            s->msg->status != TACL_OK) {
            slot_release(st, s, status, 1);
            continue;
        }
        /* A send chunk is in pinned memory: send it. */
        s->state = SLOT_NET;
        status = st->net.post(st->tl, &s->net, 0);
        if (status != TACL_OK)
            slot_release(st, s, status, 1);
    }
    return events;
}

tacl_status_t tacl__stage_post(tacl__stage_t *st, tacl__tl_op_t *op,
                               int recv)
{
    tacl_status_t status;
    stage_msg_t *m;
    int prev;

    /* The capability check let it through only with a stage. */
    if (!st)
        return tacl__error(TACL_ERR_INTERNAL, NET, "a device message "
                           "without CUDA staging");
    status = st->net.can_send(st->tl, op->peer);
    if (status != TACL_OK && !recv)
        return status;
    prev = enter_device(st);
    status = stage_setup(st);
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
    tacl__tl_msgq_push(&st->staged, &m->link);
    /* Start what can start now; completion waits for progress(). */
    prev = enter_device(st);
    issue(st);
    leave_device(st, prev);
    return TACL_OK;
}

int tacl__stage_progress(tacl__stage_t *st)
{
    int events, prev;

    if (!st || (!st->staged.head && !st->ncopies))
        return 0;
    prev = enter_device(st);
    events = poll_copies(st);
    events += issue(st);
    leave_device(st, prev);
    return events;
}

int tacl__stage_pending(const tacl__stage_t *st, int peer)
{
    if (!st)
        return 0;
    for (const tacl__tl_msg_t *m = st->staged.head; m; m = m->next)
        if (peer < 0 || m->peer == peer)
            return 1;
    return peer < 0 && st->ncopies > 0;
}

/*
 * End every staged message with status.  Copies in flight read or write
 * the callers' buffers, so they are waited for first (bounded: they are
 * local copies of at most all the chunks); chunks whose host message is
 * still pending stay taken until its callback runs, which frees them.
 */
void tacl__stage_fail(tacl__stage_t *st, tacl_status_t status)
{
    stage_msg_t *m;

    if (!st || (!st->staged.head && !st->ncopies))
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
    while ((m = (stage_msg_t *)tacl__tl_msgq_pop(&st->staged))) {
        tacl__tl_complete(st->tl, m->op,
                          m->status != TACL_OK ? m->status : status);
        free(m);
    }
}

void tacl__stage_close(tacl__stage_t *st)
{
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
}

#else /* !TACL_HAVE_CUDA: the transports move host memory only. */

tacl__stage_t *tacl__stage_new(tacl__tl_base_t *tl,
                               const tacl__stage_net_t *net, uint64_t chunk,
                               int nchunks)
{
    (void)chunk;
    (void)nchunks;
    TACL_INFO(NET, "rank %d: %s moves host memory only: tacl was built "
              "without CUDA", tl->rank, net->name);
    return NULL;
}

tacl_status_t tacl__stage_post(tacl__stage_t *st, tacl__tl_op_t *op,
                               int recv)
{
    (void)st;
    (void)op;
    (void)recv;
    return tacl__error(TACL_ERR_UNSUPPORTED, NET, "this tacl was built "
                       "without CUDA");
}

int tacl__stage_progress(tacl__stage_t *st)
{
    (void)st;
    return 0;
}

int tacl__stage_pending(const tacl__stage_t *st, int peer)
{
    (void)st;
    (void)peer;
    return 0;
}

void tacl__stage_fail(tacl__stage_t *st, tacl_status_t status)
{
    (void)st;
    (void)status;
}

void tacl__stage_close(tacl__stage_t *st)
{
    (void)st;
}

#endif /* TACL_HAVE_CUDA */
