/*
 * The schedule executor.
 *
 * A schedule arrives as steps in topological order with their dependency
 * lists.  At start the executor inverts the lists into dependents (CSR
 * arrays), counts each step's unmet dependencies and queues the steps that
 * have none.  Draining the queue posts sends and receives to the
 * transports and runs copies and reductions inline; a transport's
 * completion callback, or an inline step finishing, releases the step's
 * dependents.  Because every ready step starts at once, independent parts
 * of a schedule (the chunks of a pipelined ring, the intra- and inter-node
 * rings of HO-Ring, the two hops of qgZ) overlap without the algorithms
 * doing anything special.
 *
 * Failure model: any transport error, dead peer or timeout makes the whole
 * context fatal (as an NCCL communicator becomes after an async error):
 * every pending transport operation is cancelled with the error, so each
 * execution finishes, with that status, once its posted operations are
 * back.
 *
 * Any source: a receive from any peer (TACL__PEER_ANY) is not posted but
 * held on the context's list, in the order receives were started; after
 * each round of the transports' progress the oldest held receive of each
 * tag asks every transport for a message with its tag (probe), and once
 * one has come posts a receive for that sender, which takes exactly that
 * message, and writes the sender's rank where the step says.  A receive
 * for a named peer with the tag of a held one is held behind it, so that
 * receives take messages in the order they were posted, as MPI's
 * matching rule says.  An execution that fails drops its held receives.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "config.h"
#include "executor.h"
#include "wait.h"
#include "log.h"
#include "copy.h"
#include "quant.h"
#include "reduce.h"

struct tacl__exec {
    tacl__sched_t sched;
    tacl__xcomm_t *xc;
    tacl__ctx_t *ctx;         /* xc's context, referenced until freed: a
                                 request may outlive its communicator */
    uint32_t *waiting;        /* unmet dependencies per step */
    uint32_t *out_start;      /* dependents of step i: out[out_start[i] ..
                                 out_start[i + 1]) */
    uint32_t *out;
    uint32_t *ready;          /* FIFO of runnable local steps */
    uint32_t rhead, rtail;
    uint32_t *ready_msg;      /* FIFO of runnable sends and receives */
    uint32_t mhead, mtail;    /* (each step enters one FIFO once) */
    tacl__tl_op_t *ops;       /* one per step, used by SEND and RECV */
    uint8_t **bufptr;         /* resolved base pointer per buffer */
    uint32_t ncomplete;
    uint32_t inflight;        /* posted transport operations */
    uint32_t bg_sends;        /* of them, background bulk sends */
    uint64_t bg_held_ns;      /* when a background send was first held
                                 since one last started; 0: none held */
    uint32_t held;            /* receives on the context's held list */
    tacl_status_t status;
    _Atomic int finished;     /* set last, read without the lock */
    int linked;
    uint64_t flight;          /* its flight record's ordinal, or ~0 */
    tacl__exec_done_fn done_fn; /* called once when it finishes */
    void *done_arg;
    tacl__exec_t *next, *prev;
    tacl__dev_exec_t *dev;    /* device part (device.h), NULL on host */
    int detached;             /* freed by the context when it ends */
    int counted;              /* its caller counts among the context's
                                 waiters from its start to its free
                                 (tacl__exec_start_on's waited) */
    uint64_t *trace;          /* TACL_STEP_TRACE: TACL__TRACE_MARKS times
                                 (ns) per step, else NULL */
    /* An execution another engine runs (tacl__exec_start_engine): no
     * schedule, the engine's drain progresses it, and it finishes once
     * the engine ended it (engine_ended) and its own round came. */
    const tacl__engine_ops_t *engine;
    void *engine_arg;
    int engine_ended;
};

/* TACL_STEP_TRACE's file of this process, opened at the first write
 * (tried once: a file that cannot be opened is warned about once). */
static pthread_mutex_t trace_lock = PTHREAD_MUTEX_INITIALIZER;
static FILE *trace_file;
static int trace_tried;
static uint64_t trace_ops;

static inline void trace_mark(tacl__exec_t *e, uint32_t id, int mark)
{
    if (tacl_unlikely(e->trace != NULL))
        e->trace[(size_t)id * TACL__TRACE_MARKS + (size_t)mark] =
            tacl__now_ns();
}

/* Append a finished execution's timeline to TACL_STEP_TRACE.<rank>. */
static void trace_write(const tacl__exec_t *e)
{
    size_t n = (size_t)e->sched.nsteps * TACL__TRACE_MARKS;
    double *us = malloc((n + 1) * sizeof(*us));

    if (us == NULL)
        return;
    for (size_t i = 0; i < n; i++)
        us[i] = (double)e->trace[i] / 1e3;
    pthread_mutex_lock(&trace_lock);
    if (trace_file == NULL && !trace_tried) {
        char path[512];

        trace_tried = 1;
        snprintf(path, sizeof(path), "%s.%d",
                 tacl__config_str(TACL_CFG_STEP_TRACE), e->ctx->rank);
        trace_file = fopen(path, "a");
        if (trace_file == NULL)
            TACL_WARN(COLL, "cannot open TACL_STEP_TRACE file \"%s\": %m",
                      path);
    }
    if (trace_file != NULL) {
        tacl__sched_trace_write(trace_file, trace_ops++, &e->sched, us);
        fflush(trace_file);
    }
    pthread_mutex_unlock(&trace_lock);
    free(us);
}

static int sched_active(const tacl__ctx_t *ctx)
{
    return atomic_load_explicit(&ctx->sched_active, memory_order_relaxed);
}

/*
 * The context's record of network use (tacl__exec_net_idle), while
 * someone asks: a foreground send of bytes to another node starts
 * (busy 1; its bytes take the link bytes / rate after what it carries
 * already) or the last one in flight ended (busy 0).  A send over TCP
 * may end once its bytes are queued, long before the link has carried
 * them, so an interval lasts while sends are in flight and while the
 * link still carries their bytes at the rate.  Lock held.
 */
/* Nanoseconds a byte takes on the node's link to other nodes, its rate
 * shared by the node's ranks; 0 when the topology gives no rate. */
static double link_ns_per_byte(const tacl__ctx_t *ctx)
{
    double bw = ctx->topo.link[TACL_LINK_NET].bw;

    return bw > 0 ? ctx->local_ranks / bw : 0;
}

/* bytes more on the link after what it carries until *free_ns. */
static void link_charge(const tacl__ctx_t *ctx, uint64_t *free_ns,
                        uint64_t bytes)
{
    *free_ns = TACL_MAX(*free_ns, tacl__now_ns()) +
               (uint64_t)((double)bytes * link_ns_per_byte(ctx));
}

static void netlog_mark(tacl__ctx_t *ctx, int busy, uint64_t bytes)
{
    uint64_t now, *iv;

    if (ctx->netlog_users == 0)
        return;
    now = tacl__now_ns();
    iv = ctx->netlog[(ctx->netlog_n + TACL__NETLOG - 1) % TACL__NETLOG];
    if (busy && (ctx->netlog_n == 0 ||
                 (!ctx->netlog_open && iv[1] < now))) {
        iv = ctx->netlog[ctx->netlog_n++ % TACL__NETLOG];
        iv[0] = iv[1] = now;
    }
    if (busy) {
        link_charge(ctx, &ctx->netlog_carry_ns, bytes);
        iv[1] = TACL_MAX(iv[1], ctx->netlog_carry_ns);
    } else {
        iv[1] = TACL_MAX(iv[1], now);
    }
    ctx->netlog_open = busy;
}

static void exec_unlink(tacl__exec_t *e)
{
    tacl__ctx_t *ctx = e->ctx;

    if (!e->linked)
        return;
    if (e->prev != NULL)
        e->prev->next = e->next;
    else
        ctx->active = e->next;
    if (e->engine == NULL)
        atomic_fetch_sub_explicit(&ctx->sched_active, 1,
                                  memory_order_relaxed);
    if (!e->xc->background)
        ctx->fg_active--;
    if (e->next != NULL)
        e->next->prev = e->prev;
    e->linked = 0;
}

static void held_drop(tacl__exec_t *e);

static void exec_check_finished(tacl__exec_t *e)
{
    if (atomic_load(&e->finished))
        return;
    if (e->status != TACL_OK && e->held > 0)
        held_drop(e);
    if ((e->status != TACL_OK && e->inflight == 0) ||
        (e->status == TACL_OK && e->ncomplete == e->sched.nsteps &&
         (e->engine == NULL || e->engine_ended))) {
        e->xc->inflight--;
        tacl__flight_end(&e->xc->flight, e->flight, e->status);
        if (e->trace != NULL && e->status == TACL_OK)
            trace_write(e);
        exec_unlink(e);
        if (e->dev != NULL) {
            tacl__dev_exec_end(e->dev); /* release the caller's streams */
            e->ctx->dev_active--;
        }
        /* The hook first: whoever sees finished (read without the lock)
         * also sees what the hook did, such as a request's status. */
        if (e->done_fn != NULL)
            e->done_fn(e->done_arg, e->status);
        atomic_store(&e->finished, 1);
        if (e->detached) {
            e->next = e->ctx->reap;
            e->ctx->reap = e;
        }
    }
}

static void exec_fail(tacl__exec_t *e, tacl_status_t status)
{
    if (e->status == TACL_OK)
        e->status = status;
}

static void make_ready(tacl__exec_t *e, uint32_t id)
{
    int kind = e->sched.steps[id].kind;

    trace_mark(e, id, TACL__TRACE_READY);
    if (kind == TACL__STEP_SEND || kind == TACL__STEP_RECV)
        e->ready_msg[e->mtail++] = id;
    else
        e->ready[e->rtail++] = id;
}

/* waiting[] of a finished step: no dependent decrements it any more. */
#define STEP_DONE UINT32_MAX

static void step_complete(tacl__exec_t *e, uint32_t id)
{
    e->ncomplete++;
    e->waiting[id] = STEP_DONE;
    trace_mark(e, id, TACL__TRACE_DONE);
    for (uint32_t k = e->out_start[id]; k < e->out_start[id + 1]; k++) {
        uint32_t d = e->out[k];
        if (--e->waiting[d] == 0)
            make_ready(e, d);
    }
}

/*
 * Background traffic (tacl__xcomm_t.background): its bulk sends yield to
 * the foreground traffic of the context, as the thesis' section 6.5
 * sends snapshot chunks in the gaps of training traffic.  A send of at
 * least TACL__BG_BULK_BYTES waits while background depth sends of its
 * execution are in flight (the pipeline of staging parts), and while its
 * link is busy with foreground traffic:
 * - to another node: while a foreground send to another node is in
 *   flight, or ended less than TACL_BG_QUIET_US ago (the gaps between a
 *   collective's steps are shorter; the compute between collectives,
 *   the idle link time a snapshot fills, is longer).  A foreground
 *   execution that only waits, for a peer or a receive, leaves the
 *   uplink idle and does not hold the send;
 * - inside the node: while any foreground execution is in flight;
 * for TACL_BG_MAX_HOLD_MS at most either way (a foreground operation
 * that waits on a peer which waits on this data cannot hold it for
 * ever).  Receives, local steps and small sends (headers, agreements)
 * never wait.
 */
#define TACL__BG_BULK_BYTES (16u << 10)

static int bg_bulk(const tacl__exec_t *e, uint32_t id)
{
    const tacl__step_t *st = &e->sched.steps[id];

    return e->xc->background && st->kind == TACL__STEP_SEND &&
           st->bytes >= TACL__BG_BULK_BYTES;
}

/* Whether a send of step st to world rank world is foreground traffic
 * on this node's network link. */
static int fg_net_send(const tacl__exec_t *e, const tacl__step_t *st,
                       int world)
{
    const tacl__ctx_t *ctx = e->ctx;

    return !e->xc->background && st->kind == TACL__STEP_SEND &&
           ctx->node_of[world] != ctx->node_of[ctx->rank];
}

/* Whether foreground traffic occupies the link to world rank world:
 * to another node, also while the link still carries the bytes of
 * sends already ended. */
static int fg_link_busy(const tacl__ctx_t *ctx, int world)
{
    uint64_t now;

    if (ctx->node_of[world] == ctx->node_of[ctx->rank])
        return ctx->fg_active > 0;
    now = tacl__now_ns();
    return ctx->fg_net_sends > 0 ||
           now - ctx->fg_net_quiet_ns < ctx->bg_quiet_ns ||
           now < ctx->fg_link_free_ns;
}

/*
 * On a plan (tacl__bg_plan_t): whether a send of bytes waits for a later
 * span; one that may go is charged to its span.
 */
static int bg_plan_held(tacl__bg_plan_t *p, uint64_t bytes)
{
    uint64_t now = tacl__now_ns();

    for (int i = 0; i < p->n; i++) {
        if (now < p->start_ns[i])
            return 1;
        if (i == p->n - 1)
            return 0;
        if (now >= p->end_ns[i] || p->left[i] < bytes)
            continue;
        p->left[i] -= bytes;
        return 0;
    }
    return 1;
}

static int bg_send_held(tacl__exec_t *e, uint32_t id)
{
    uint64_t now;
    int world;

    if (!bg_bulk(e, id))
        return 0;
    if (e->bg_sends >= (uint32_t)e->xc->background)
        return 1;
    if (e->xc->bg_plan != NULL && e->xc->bg_plan->n > 0)
        return bg_plan_held(e->xc->bg_plan, e->sched.steps[id].bytes);
    world = e->xc->world[e->sched.steps[id].peer];
    /* One part at a time on the link to another node: the next waits
     * until the last one's bytes have left, so a foreground message
     * never queues behind more than one part.  Both waits are bounded
     * by the hold below: a link rate set far too low cannot stall a
     * save. */
    if (!(e->ctx->node_of[world] != e->ctx->node_of[e->ctx->rank] &&
          tacl__now_ns() < e->ctx->bg_link_free_ns) &&
        !fg_link_busy(e->ctx, world))
        return 0;
    now = tacl__now_coarse_ns();
    if (e->bg_held_ns == 0)
        e->bg_held_ns = now;
    return now - e->bg_held_ns < e->ctx->bg_max_hold_ns;
}

static void op_done(tacl__tl_op_t *op, tacl_status_t status)
{
    tacl__exec_t *e = op->arg;

    e->inflight--;
    if (bg_bulk(e, (uint32_t)(op - e->ops)))
        e->bg_sends--;
    if (fg_net_send(e, &e->sched.steps[op - e->ops], op->peer) &&
        --e->ctx->fg_net_sends == 0) {
        e->ctx->fg_net_quiet_ns = tacl__now_ns();
        netlog_mark(e->ctx, 0, 0);
    }
    if (status != TACL_OK) {
        exec_fail(e, status);
        /* A failed message leaves the peers' schedules out of step with
         * ours: the communicator cannot be used any more. */
        tacl__ctx_set_fatal(e->ctx, status);
    } else {
        step_complete(e, (uint32_t)(op - e->ops));
    }
    exec_check_finished(e);
}

static inline void *bref_ptr(const tacl__exec_t *e, tacl__bref_t r)
{
    return e->bufptr[r.buf] + r.off;
}

/* Post message step id to (or from) world rank world, with wire tag. */
static tacl_status_t post_to(tacl__exec_t *e, uint32_t id, int world,
                             uint64_t tag)
{
    const tacl__step_t *st = &e->sched.steps[id];
    tacl__xcomm_t *xc = e->xc;
    tacl__ctx_t *ctx = e->ctx;
    tacl__tl_op_t *op = &e->ops[id];
    /* A message of no bytes (a send or receive of count 0) has none. */
    uint8_t memtype =
        st->bytes == 0 ? TACL_MEM_HOST
                       : e->sched.bufs[st->kind == TACL__STEP_SEND
                                           ? st->src.buf
                                           : st->dst.buf]
                             .memtype;
    int tl = ctx->tl_of[world];
    tacl__tl_why_t why;
    tacl_status_t status;

    /* tl_of holds the choice for host memory; other memory chooses here. */
    if (tl < 0 || memtype != TACL_MEM_HOST) {
        tl = tacl__tl_select(ctx->tls, ctx->ntl,
                             tacl__tl_where(world, ctx->rank,
                                            ctx->node_of[world] ==
                                                ctx->node_of[ctx->rank]),
                             (tacl_memtype_t)memtype, &why);
        if (tl < 0)
            return tacl__error(TACL_ERR_UNSUPPORTED, COLL,
                               "world rank %d cannot reach world rank %d "
                               "(node %s): %s", ctx->rank, world,
                               ctx->node_ids[world], why.text);
    }
    op->peer = world;
    op->tag = tag;
    op->len = st->bytes;
    op->memtype = memtype;
    op->hints = 0;
    op->cb = op_done;
    op->arg = e;
    if (st->kind == TACL__STEP_SEND) {
        op->buf = st->bytes ? bref_ptr(e, st->src) : NULL;
        /* Counted before the send, which may complete inside it. */
        if (fg_net_send(e, st, world)) {
            ctx->fg_net_sends++;
            link_charge(ctx, &ctx->fg_link_free_ns, st->bytes);
            netlog_mark(ctx, 1, st->bytes);
        }
        status = tacl__tl_send(ctx->tls[tl], op);
        if (status != TACL_OK && fg_net_send(e, st, world) &&
            --ctx->fg_net_sends == 0)
            netlog_mark(ctx, 0, 0);
        if (status == TACL_OK) {
            int cls = xc->link_of[st->peer];
            xc->counters.transports[tl].bytes += st->bytes;
            xc->counters.transports[tl].messages++;
            xc->counters.links[cls].bytes += st->bytes;
            xc->counters.links[cls].messages++;
        }
    } else {
        const tacl__sched_buf_t *buf = &e->sched.bufs[st->dst.buf];

        op->buf = st->bytes ? bref_ptr(e, st->dst) : NULL;
        if (st->bytes && buf->role == TACL__BUF_SCRATCH &&
            tacl__scratch_pinnable(buf->size))
            op->hints = TACL__TL_HINT_PINNABLE;
        if (st->arg & TACL__COPY_STREAM)
            op->hints |= TACL__TL_HINT_STREAM;
        status = tacl__tl_recv(ctx->tls[tl], op);
    }
    if (status == TACL_OK) {
        e->inflight++;
        if (bg_bulk(e, id)) {
            e->bg_sends++;
            e->bg_held_ns = 0;
            if (ctx->node_of[world] != ctx->node_of[ctx->rank])
                link_charge(ctx, &ctx->bg_link_free_ns, st->bytes);
        }
    }
    return status;
}

/* Whether a receive with wire tag tag is held on ctx's list. */
static int held_tag(const tacl__ctx_t *ctx, const tacl__tl_op_t *until,
                    uint64_t tag)
{
    for (const tacl__tl_op_t *h = ctx->held_head; h != until; h = h->tl_next)
        if (h->tag == tag)
            return 1;
    return 0;
}

static tacl_status_t post_message(tacl__exec_t *e, uint32_t id)
{
    const tacl__step_t *st = &e->sched.steps[id];
    tacl__ctx_t *ctx = e->ctx;
    uint64_t tag = ((uint64_t)e->xc->id << TACL__TAG_COMM_SHIFT) | st->tag;
    tacl__tl_op_t *op = &e->ops[id];

    if (st->kind == TACL__STEP_SEND ||
        (st->peer != TACL__PEER_ANY &&
         (ctx->held_head == NULL || !held_tag(ctx, NULL, tag))))
        return post_to(e, id, e->xc->world[st->peer], tag);
    if (st->peer == TACL__PEER_ANY) {
        for (int t = 0; t < ctx->ntl; t++)
            if (!(ctx->tls[t]->ops->caps & TACL__TL_CAP_PROBE))
                return tacl__error(TACL_ERR_UNSUPPORTED, COLL,
                                   "a receive from any source: transport "
                                   "%s, which this communicator's ranks "
                                   "use, cannot serve one yet (name the "
                                   "peer, or choose another transport "
                                   "with TACL_NET)",
                                   tacl__tl_name(ctx->tls[t]));
    }
    /* Held (see the top of this file): the op is nobody's yet. */
    op->peer = st->peer == TACL__PEER_ANY ? -1 : e->xc->world[st->peer];
    op->tag = tag;
    op->arg = e;
    op->tl_next = NULL;
    if (ctx->held_tail != NULL)
        ctx->held_tail->tl_next = op;
    else
        ctx->held_head = op;
    ctx->held_tail = op;
    e->held++;
    return TACL_OK;
}

/* Unlink held op, whose predecessor is prev (NULL: the head). */
static void held_unlink(tacl__ctx_t *ctx, tacl__tl_op_t *prev,
                        tacl__tl_op_t *op)
{
    if (prev != NULL)
        prev->tl_next = op->tl_next;
    else
        ctx->held_head = op->tl_next;
    if (ctx->held_tail == op)
        ctx->held_tail = prev;
    op->tl_next = NULL;
    ((tacl__exec_t *)op->arg)->held--;
}

static void held_drop(tacl__exec_t *e)
{
    tacl__ctx_t *ctx = e->ctx;
    tacl__tl_op_t *prev = NULL, *op, *next;

    for (op = ctx->held_head; op != NULL && e->held > 0; op = next) {
        next = op->tl_next;
        if (op->arg == e)
            held_unlink(ctx, prev, op);
        else
            prev = op;
    }
}

/*
 * A held receive from any peer: whether a transport has a message with
 * its tag; then op->peer is its sender and the step's source word (if
 * any) gets the sender's rank in the communicator.  A negative status:
 * a transport can never answer (the receive fails with it).
 */
static int held_probe(tacl__exec_t *e, tacl__tl_op_t *op)
{
    const tacl__step_t *st = &e->sched.steps[op - e->ops];
    uint64_t len;
    int world = -1;

    for (int t = 0; t < e->ctx->ntl && world < 0; t++) {
        int found = tacl__tl_probe(e->ctx->tls[t], op->tag, &world, &len);

        if (found < 0)
            return found;
        if (found == 0)
            world = -1;
    }
    if (world < 0)
        return 0;
    op->peer = world;
    if (st->arg & TACL__RECV_SOURCE) {
        for (int r = 0; r < e->sched.nranks; r++)
            if (e->xc->world[r] == world)
                *(int *)bref_ptr(e, st->src) = r;
    }
    return 1;
}

/* Post the held receives that may go now; returns how many went. */
static int held_progress(tacl__ctx_t *ctx)
{
    tacl__tl_op_t *prev = NULL, *op, *next;
    int events = 0;

    for (op = ctx->held_head; op != NULL; op = next) {
        tacl__exec_t *e = op->arg;
        tacl_status_t status;
        int found;

        next = op->tl_next;
        if (held_tag(ctx, op, op->tag))
            found = 0;
        else
            found = op->peer < 0 ? held_probe(e, op) : 1;
        if (found == 0) {
            prev = op;
            continue;
        }
        held_unlink(ctx, prev, op);
        if (found < 0) {
            /* Its execution's other held receives go with it. */
            exec_fail(e, (tacl_status_t)found);
            exec_check_finished(e);
            return events + 1;
        }
        status = post_to(e, (uint32_t)(op - e->ops), op->peer, op->tag);
        if (status != TACL_OK) {
            exec_fail(e, status);
            tacl__ctx_set_fatal(ctx, status);
            return events;
        }
        events++;
    }
    return events;
}

/* A quantization step: the kernels take an array of input pointers. */
static tacl_status_t run_quant_step(tacl__exec_t *e, const tacl__step_t *st)
{
    const void *srcs_local[16], **srcs = srcs_local;
    uint8_t *src = bref_ptr(e, st->src);
    void *dst = bref_ptr(e, st->dst);
    tacl_status_t status;

    if (st->kind == TACL__STEP_QUANT)
        return tacl__quantize(src, st->count, st->dtype, st->qblock,
                              st->qbits, dst);
    if (st->nsrc > TACL_ARRAY_SIZE(srcs_local)) {
        srcs = malloc(st->nsrc * sizeof(*srcs));
        if (srcs == NULL)
            return tacl__error(TACL_ERR_NO_MEMORY, COLL, "out of memory");
    }
    for (int i = 0; i < st->nsrc; i++)
        srcs[i] = src + (uint64_t)i * st->stride;
    if (st->kind == TACL__STEP_DEQUANT)
        status = tacl__dequant_reduce(srcs, st->nsrc, st->count, st->qblock,
                                      st->qbits, st->dtype, dst, st->arg);
    else
        status = tacl__dequant_reduce_quant(srcs, st->nsrc, st->count,
                                            st->qblock, st->qbits, dst);
    if (srcs != srcs_local)
        free(srcs);
    return status;
}

/* Bytes of output a reduction of several sources finishes at a time. */
#define EXEC_REDUCE_BLOCK 8192

/*
 * A reduction step.  With several second sources the output is walked in
 * blocks small enough to stay in the first-level cache while every
 * source is folded into it, so the output is written to memory once.
 */
static tacl_status_t run_reduce_step(tacl__exec_t *e, const tacl__step_t *st)
{
    size_t esize = tacl_dtype_size(st->dtype), count = st->bytes / esize;
    size_t block = EXEC_REDUCE_BLOCK / esize;
    uint8_t *dst = bref_ptr(e, st->dst), *src = bref_ptr(e, st->src);
    uint8_t *src2 = bref_ptr(e, st->src2);
    tacl_status_t s = TACL_OK;

    if (st->nsrc <= 1)
        return tacl__reduce_cpu(dst, src, src2, count, st->dtype, st->op);
    for (size_t at = 0; at < count && s == TACL_OK; at += block) {
        size_t n = TACL_MIN(block, count - at), off = at * esize;

        s = tacl__reduce_cpu(dst + off, src + off, src2 + off, n, st->dtype,
                             st->op);
        for (uint32_t i = 1; i < st->nsrc && s == TACL_OK; i++)
            s = tacl__reduce_cpu(dst + off, dst + off,
                                 src2 + i * st->stride + off, n, st->dtype,
                                 st->op);
    }
    return s;
}

/*
 * A local step of a schedule on device memory: enqueued on the context's
 * stream; it completes when exec_dev_poll sees its event fire.
 */
static tacl_status_t run_dev_step(tacl__exec_t *e, uint32_t id)
{
    int queued;
    tacl_status_t s = tacl__dev_step(e->dev, id, &e->sched.steps[id],
                                     e->bufptr, &queued);

    if (s != TACL_OK)
        return s;
    if (queued)
        e->inflight++;
    else
        step_complete(e, id);
    return TACL_OK;
}

/* Complete the device steps whose kernels finished. */
static int exec_dev_poll(tacl__exec_t *e)
{
    uint32_t ids[32];
    int n, total = 0;

    do {
        tacl_status_t status = TACL_OK;

        n = tacl__dev_poll(e->dev, ids, (int)TACL_ARRAY_SIZE(ids), &status);
        if (status != TACL_OK) {
            exec_fail(e, status);
            tacl__ctx_set_fatal(e->ctx, status);
        }
        for (int i = 0; i < n; i++) {
            e->inflight--;
            if (e->status == TACL_OK)
                step_complete(e, ids[i]);
        }
        total += n;
    } while (n == (int)TACL_ARRAY_SIZE(ids));
    return total;
}

static tacl_status_t run_step(tacl__exec_t *e, uint32_t id)
{
    const tacl__step_t *st = &e->sched.steps[id];
    size_t esize;

    trace_mark(e, id, TACL__TRACE_START);
    if (e->dev != NULL && st->kind != TACL__STEP_SEND &&
        st->kind != TACL__STEP_RECV)
        return run_dev_step(e, id);
    switch (st->kind) {
    case TACL__STEP_SEND:
    case TACL__STEP_RECV:
        return post_message(e, id);
    case TACL__STEP_COPY:
        if (st->arg & TACL__COPY_STREAM)
            tacl__copy_stream(bref_ptr(e, st->dst), bref_ptr(e, st->src),
                              st->bytes);
        else if (st->bytes > 0)
            memcpy(bref_ptr(e, st->dst), bref_ptr(e, st->src), st->bytes);
        break;
    case TACL__STEP_REDUCE: {
        tacl_status_t s = run_reduce_step(e, st);
        if (s != TACL_OK)
            return s;
        break;
    }
    case TACL__STEP_DIV: {
        tacl_status_t s;
        esize = tacl_dtype_size(st->dtype);
        s = tacl__div_cpu(bref_ptr(e, st->dst), bref_ptr(e, st->src),
                          st->bytes / esize, st->dtype, st->arg);
        if (s != TACL_OK)
            return s;
        break;
    }
    case TACL__STEP_QUANT:
    case TACL__STEP_DEQUANT:
    case TACL__STEP_DQRQ: {
        tacl_status_t s = run_quant_step(e, st);
        if (s != TACL_OK)
            return s;
        break;
    }
    case TACL__STEP_NOP:
        break;
    default:
        return tacl__error(TACL_ERR_INTERNAL, SCHED, "step %u has kind %d",
                           id, st->kind);
    }
    step_complete(e, id);
    return TACL_OK;
}

/*
 * Run every ready step; returns how many ran.  Messages are posted before
 * any local work runs, so a peer can pull from this rank while it copies
 * or reduces: a copy or reduction runs only when no send or receive is
 * ready, and a message it releases goes before the next one.
 */
/* A step that cannot start fails its execution and the context: the
 * peers' schedules are out of step with ours. */
static void start_step(tacl__exec_t *e, uint32_t id)
{
    tacl_status_t status = run_step(e, id);

    if (status != TACL_OK) {
        exec_fail(e, status);
        tacl__ctx_set_fatal(e->ctx, status);
    }
}

/*
 * The ready messages of a background execution: every one that is not
 * held starts, the held ones stay queued in order (the FIFO is
 * compacted; a send completing at once may append while this runs).
 * Returns the steps started.
 */
static int bg_drain_msgs(tacl__exec_t *e)
{
    uint32_t keep = e->mhead;
    int n = 0, held = 0;

    for (uint32_t i = e->mhead; i < e->mtail; i++) {
        uint32_t id = e->ready_msg[i];

        /* Behind a held send, every send waits too: parts of one copy
         * share a tag, so they must start in order, also a shorter last
         * part, and also when a send completing at once frees a place in
         * the pipeline. */
        if (e->status != TACL_OK ||
            (e->sched.steps[id].kind == TACL__STEP_SEND && held) ||
            bg_send_held(e, id)) {
            held |= e->sched.steps[id].kind == TACL__STEP_SEND;
            e->ready_msg[keep++] = id;
            continue;
        }
        start_step(e, id);
        n++;
    }
    e->mtail = keep;
    return n;
}

static int exec_drain(tacl__exec_t *e)
{
    int n = 0;

    if (e->engine != NULL) {
        if (e->status == TACL_OK && !e->engine_ended)
            n = e->engine->drain(e->engine_arg);
        exec_check_finished(e);
        return n;
    }
    if (e->dev != NULL) {
        int gated;

        n += exec_dev_poll(e);
        /* Nothing starts before the caller's earlier stream work ends. */
        gated = e->status == TACL_OK ? tacl__dev_exec_gated(e->dev) : 0;
        if (gated < 0) {
            exec_fail(e, (tacl_status_t)gated);
            tacl__ctx_set_fatal(e->ctx, (tacl_status_t)gated);
        }
        if (gated != 0) {
            exec_check_finished(e);
            return n;
        }
    }
    while (e->status == TACL_OK) {
        uint32_t id;

        if (e->mhead != e->mtail && !e->xc->background)
            id = e->ready_msg[e->mhead++];
        else if (e->rhead != e->rtail)
            id = e->ready[e->rhead++];
        else if (e->xc->background && e->mhead != e->mtail) {
            int k = bg_drain_msgs(e);

            if (k == 0)
                break;
            n += k;
            continue;
        } else
            break;
        start_step(e, id);
        n++;
    }
    exec_check_finished(e);
    return n;
}

/* The pool's kind of scratch for a schedule buffer. */
static int scratch_kind(const tacl__sched_buf_t *buf)
{
    return buf->memtype == TACL_MEM_CUDA ? TACL__SCRATCH_DEVICE
                                         : buf->shared;
}

/* Give the execution's scratch buffers back to the pool. */
static void exec_put_scratch(tacl__exec_t *e)
{
    for (uint32_t b = 0; b < e->sched.nbufs; b++)
        if (e->sched.bufs[b].role == TACL__BUF_SCRATCH && e->bufptr[b])
            tacl__scratch_put(&e->xc->scratch, e->bufptr[b],
                              scratch_kind(&e->sched.bufs[b]));
}

/* Free the execution's own arrays and itself (not the schedule): one
 * allocation holds them all (exec_alloc). */
static void exec_dealloc(tacl__exec_t *e)
{
    free(e->trace);
    free(e);
}

/* Bytes of n elements of size elem, rounded up to keep 16-byte alignment. */
static size_t exec_span(size_t n, size_t elem)
{
    return (n * elem + 15) & ~(size_t)15;
}

/*
 * The execution and its per-step arrays in one zeroed allocation: a small
 * operation's start is then one allocation rather than eight.
 */
static tacl__exec_t *exec_alloc(const tacl__sched_t *sched)
{
    size_t n = sched->nsteps, head = exec_span(1, sizeof(tacl__exec_t));
    size_t ops = exec_span(n + 1, sizeof(tacl__tl_op_t));
    size_t bufptr = exec_span(sched->nbufs + 1, sizeof(uint8_t *));
    size_t steps = exec_span(n + 1, sizeof(uint32_t));
    size_t out_start = exec_span(n + 2, sizeof(uint32_t));
    size_t out = exec_span((size_t)sched->ndeps + 1, sizeof(uint32_t));
    uint8_t *p = calloc(1, head + ops + bufptr + 3 * steps + out_start +
                               out);
    tacl__exec_t *e = (tacl__exec_t *)p;

    if (p == NULL)
        return NULL;
    p += head;
    e->ops = (tacl__tl_op_t *)p;
    p += ops;
    e->bufptr = (uint8_t **)p;
    p += bufptr;
    e->waiting = (uint32_t *)p;
    p += steps;
    e->ready = (uint32_t *)p;
    p += steps;
    e->ready_msg = (uint32_t *)p;
    p += steps;
    e->out_start = (uint32_t *)p;
    p += out_start;
    e->out = (uint32_t *)p;
    return e;
}

tacl_status_t tacl__exec_start(tacl__xcomm_t *xc, tacl__sched_t *sched,
                               tacl__exec_t **exec_p)
{
    return tacl__exec_start_on(xc, sched, NULL, 0, exec_p);
}

/*
 * The device part of an execution whose schedule has a device buffer
 * (the scratch pool learns the context's device on the way).
 */
static tacl_status_t exec_dev_new(tacl__exec_t *e,
                                  const tacl__dev_streams_t *streams)
{
    tacl__ctx_t *ctx = e->ctx;
    tacl_status_t status;

    for (uint32_t b = 0; b < e->sched.nbufs; b++)
        if (e->sched.bufs[b].memtype == TACL_MEM_CUDA)
            goto device;
    return streams != NULL && streams->n > 0
               ? tacl__error(TACL_ERR_INVALID_ARG, COLL, "a stream was "
                             "given for an operation on host memory")
               : TACL_OK;
device:
    if (ctx->cuda_device < 0)
        return tacl__error(TACL_ERR_UNSUPPORTED, COLL, "device memory, but "
                           "the communicator has no CUDA device (%s)",
                           ctx->cuda_why);
    e->xc->scratch.device = ctx->cuda_device;
    status = tacl__dev_get(&ctx->dev, ctx->cuda_device);
    if (status == TACL_OK)
        status = tacl__dev_exec_new(ctx->dev, e->sched.nsteps, streams,
                                    &e->dev);
    return status;
}

/*
 * n waiters of ctx leave (lock held): the last one wakes the progress
 * thread if executions are still in flight (progress.c).
 */
static void waiters_leave_locked(tacl__ctx_t *ctx, int n)
{
    ctx->waiters -= n;
    if (ctx->waiters == 0 && ctx->active != NULL && ctx->progress_users > 0)
        pthread_cond_signal(&ctx->progress_cv);
}

/*
 * Make e ready to run from its first step: every step waits for its
 * dependencies again and those with none are queued, e joins the
 * context's active list and runs what it can.  Lock held.
 *
 * The progress thread is woken for it unless a thread drives the
 * context's rounds already or will (waited: e's caller, a blocking
 * call, counts as a waiter from now).  Woken only to stand aside, it
 * switched 138 times in 200 blocking calls (tests/coll/progress_threads.c),
 * each time taking the lock from its caller and asking for a core that
 * on a node with more ranks than cores a rank needs.
 */
static void exec_arm(tacl__exec_t *e, int waited)
{
    tacl__xcomm_t *xc = e->xc;
    uint32_t n = e->sched.nsteps;

    e->rhead = e->rtail = e->mhead = e->mtail = 0;
    e->ncomplete = 0;
    e->inflight = 0;
    e->held = 0;
    e->status = TACL_OK;
    for (uint32_t i = 0; i < n; i++) {
        e->waiting[i] = e->sched.steps[i].ndeps;
        if (e->waiting[i] == 0)
            make_ready(e, i);
    }
    atomic_store(&e->finished, 0);
    xc->inflight++;
    if (e->dev != NULL)
        e->ctx->dev_active++;
    e->flight = tacl__flight_claim(&xc->flight, e, tacl__exec_describe);
    e->next = e->ctx->active;
    e->prev = NULL;
    if (e->next != NULL)
        e->next->prev = e;
    e->ctx->active = e;
    e->linked = 1;
    if (!xc->background)
        e->ctx->fg_active++;
    if (e->engine == NULL)
        atomic_fetch_add_explicit(&e->ctx->sched_active, 1,
                                  memory_order_relaxed);
    if (waited && !tacl__exec_streamed(e)) {
        e->counted = 1;
        e->ctx->waiters++;
    }
    if (e->ctx->progress_users > 0 && e->ctx->waiters == 0)
        pthread_cond_signal(&e->ctx->progress_cv);
    if (e->ctx->fatal != TACL_OK)
        exec_fail(e, e->ctx->fatal);
    exec_drain(e);
}

/*
 * An execution of sched (taken over) on xc, with its scratch and its
 * dependents lists, not started: it reads as finished until exec_arm.
 */
static tacl_status_t exec_prepare(tacl__xcomm_t *xc, tacl__sched_t *sched,
                                  const tacl__dev_streams_t *streams,
                                  tacl__exec_t **exec_p)
{
    uint32_t n = sched->nsteps;
    tacl__exec_t *e;
    tacl_status_t status;

    /* Every step was checked when it was built (sched.c rejects a buffer
     * reference outside its buffer and a peer outside the communicator),
     * so the schedule is run as it is. */
    e = exec_alloc(sched);
    if (e == NULL) {
        status = tacl__error(TACL_ERR_NO_MEMORY, COLL,
                             "out of memory for a schedule of %u steps", n);
        tacl__flight_end(&xc->flight,
                         tacl__flight_claim(&xc->flight, NULL, NULL), status);
        return status;
    }
    e->sched = *sched;
    e->xc = xc;
    e->ctx = xc->ctx;
    e->flight = UINT64_MAX;
    atomic_init(&e->finished, 1);
    if (tacl__config_str(TACL_CFG_STEP_TRACE)[0] != '\0') {
        e->trace = calloc((size_t)n * TACL__TRACE_MARKS + 1,
                          sizeof(*e->trace));
        if (e->trace == NULL) {
            status = tacl__error(TACL_ERR_NO_MEMORY, COLL, "out of memory "
                                 "for TACL_STEP_TRACE's timeline");
            goto err_scratch;
        }
    }
    status = exec_dev_new(e, streams);
    if (status != TACL_OK)
        goto err_scratch;
    for (uint32_t b = 0; b < sched->nbufs; b++) {
        tacl__sched_buf_t *buf = &sched->bufs[b];
        if (buf->role == TACL__BUF_SCRATCH) {
            e->bufptr[b] = tacl__scratch_get(&xc->scratch, buf->size,
                                             scratch_kind(buf));
            if (e->bufptr[b] == NULL && buf->size > 0) {
                status = tacl__error(TACL_ERR_NO_MEMORY, ALLOC,
                                     "cannot allocate %llu bytes of scratch",
                                     (unsigned long long)buf->size);
                goto err_scratch;
            }
        } else {
            e->bufptr[b] = buf->ptr;
        }
    }
    /* Invert the dependency lists. */
    for (uint32_t i = 0; i < n; i++) {
        const uint32_t *d = tacl__sched_deps(sched, i);
        for (uint32_t k = 0; k < sched->steps[i].ndeps; k++)
            e->out_start[d[k] + 1]++;
    }
    for (uint32_t i = 0; i < n; i++)
        e->out_start[i + 1] += e->out_start[i];
    {
        /* The ready FIFO, still zero and not used before make_ready,
         * counts the dependents placed so far. */
        uint32_t *fill = e->ready;
        for (uint32_t i = 0; i < n; i++) {
            const uint32_t *d = tacl__sched_deps(sched, i);
            for (uint32_t k = 0; k < sched->steps[i].ndeps; k++)
                e->out[e->out_start[d[k]] + fill[d[k]]++] = i;
        }
    }
    e->ctx->refcount++; /* the caller holds the lock */
    sched->steps = NULL; /* ownership moved */
    sched->deps = NULL;
    sched->bufs = NULL;
    *exec_p = e;
    return TACL_OK;

err_scratch:
    exec_put_scratch(e);
    tacl__dev_exec_free(e->dev);
    tacl__flight_end(&xc->flight, tacl__flight_claim(&xc->flight, NULL, NULL),
                     status);
    exec_dealloc(e);
    return status;
}

tacl_status_t tacl__exec_start_on(tacl__xcomm_t *xc, tacl__sched_t *sched,
                                  const tacl__dev_streams_t *streams,
                                  int waited, tacl__exec_t **exec_p)
{
    tacl_status_t status = exec_prepare(xc, sched, streams, exec_p);

    if (status == TACL_OK)
        exec_arm(*exec_p, waited);
    return status;
}

tacl_status_t tacl__exec_prepare(tacl__xcomm_t *xc, tacl__sched_t *sched,
                                 tacl__exec_t **exec_p)
{
    return exec_prepare(xc, sched, NULL, exec_p);
}

tacl_status_t tacl__exec_start_engine(tacl__xcomm_t *xc,
                                      const tacl__engine_ops_t *ops,
                                      void *arg, tacl__exec_t **exec_p)
{
    tacl__exec_t *e = xc->ctx->engine_spare;

    if (e != NULL) {
        xc->ctx->engine_spare = NULL;
        memset(e, 0, sizeof(*e));
    } else {
        e = calloc(1, sizeof(*e));
    }
    if (e == NULL) {
        tacl_status_t status = tacl__error(TACL_ERR_NO_MEMORY, COLL,
                                           "out of memory");

        tacl__flight_end(&xc->flight,
                         tacl__flight_claim(&xc->flight, NULL, NULL), status);
        return status;
    }
    tacl__sched_init(&e->sched, 0, 1);
    e->xc = xc;
    e->ctx = xc->ctx;
    e->engine = ops;
    e->engine_arg = arg;
    e->ctx->refcount++; /* the caller holds the lock */
    exec_arm(e, 0);
    *exec_p = e;
    return TACL_OK;
}

void tacl__exec_engine_end(tacl__exec_t *e, tacl_status_t status)
{
    if (status != TACL_OK)
        exec_fail(e, status);
    e->engine_ended = 1;
}

tacl_status_t tacl__exec_restart(tacl__exec_t *e, uint64_t seq,
                                 tacl__exec_done_fn fn, void *arg)
{
    if (!atomic_load(&e->finished) || e->dev != NULL)
        return tacl__error(TACL_ERR_INTERNAL, COLL, "restart of an "
                           "execution that is %s",
                           e->dev != NULL ? "on a device" : "running");
    for (uint32_t i = 0; i < e->sched.nsteps; i++) {
        tacl__step_t *st = &e->sched.steps[i];

        if (st->kind == TACL__STEP_SEND || st->kind == TACL__STEP_RECV) {
            st->tag = TACL__TAG_RESTAMP(st->tag, seq);
            e->ops[i].cb = NULL; /* not posted (tacl__exec_describe) */
        }
    }
    e->done_fn = fn;
    e->done_arg = arg;
    exec_arm(e, 0);
    return TACL_OK;
}

void tacl__exec_describe(const tacl__exec_t *e, char *buf, size_t len)
{
    uint64_t left = 0;
    size_t o;
    int nwait = 0;

    if (e->engine != NULL) {
        e->engine->describe(e->engine_arg, e, buf, len);
        return;
    }
    for (uint32_t i = 0; i < e->sched.nsteps; i++) {
        int kind = e->sched.steps[i].kind;
        if (e->waiting[i] != STEP_DONE &&
            (kind == TACL__STEP_SEND || kind == TACL__STEP_RECV))
            left += e->sched.steps[i].bytes;
    }
    o = (size_t)snprintf(buf, len, " steps=%u/%u bytes_left=%llu",
                         e->ncomplete, e->sched.nsteps,
                         (unsigned long long)left);
    /* Posted messages: ready (no unmet dependency), given to a transport
     * (its callback is set) and not complete. */
    for (uint32_t i = 0; i < e->sched.nsteps && o < len; i++) {
        const tacl__step_t *st = &e->sched.steps[i];

        if (e->waiting[i] != 0 || e->ops[i].cb == NULL)
            continue;
        if (nwait == 0)
            o += (size_t)snprintf(buf + o, len - o, " step=%u peer=%d wait=",
                                  i, st->peer);
        if (o < len)
            o += (size_t)snprintf(buf + o, len - o, "%s%s:%d:%llu",
                                  nwait ? "," : "",
                                  st->kind == TACL__STEP_SEND ? "send"
                                                              : "recv",
                                  st->peer, (unsigned long long)st->bytes);
        nwait++;
    }
}

int tacl__exec_done(const tacl__exec_t *exec, tacl_status_t *status_p)
{
    if (!atomic_load(&exec->finished))
        return 0;
    *status_p = exec->status;
    return 1;
}

int tacl__exec_on_done_locked(tacl__exec_t *exec, tacl__exec_done_fn fn,
                              void *arg)
{
    int finished = atomic_load(&exec->finished);

    if (!finished) {
        exec->done_fn = fn;
        exec->done_arg = arg;
    }
    return finished;
}

int tacl__exec_on_done(tacl__exec_t *exec, tacl__exec_done_fn fn, void *arg)
{
    int finished;

    pthread_mutex_lock(&exec->ctx->lock);
    finished = tacl__exec_on_done_locked(exec, fn, arg);
    pthread_mutex_unlock(&exec->ctx->lock);
    return finished;
}

const char *tacl__exec_failure(const tacl__exec_t *exec)
{
    return exec->ctx->fatal != TACL_OK ? exec->ctx->fatal_msg : NULL;
}

tacl__xcomm_t *tacl__exec_xcomm(const tacl__exec_t *exec)
{
    return exec->xc;
}

int tacl__exec_progress(tacl__exec_t *exec)
{
    return tacl__ctx_progress(exec->ctx);
}

void tacl__exec_free(tacl__exec_t *e)
{
    if (e == NULL)
        return;
    /* The execution's own reference keeps the context alive even when
     * its communicator was destroyed or aborted meanwhile (its handle is
     * then a tombstone whose scratch pool is empty, so the buffers are
     * freed rather than pooled). */
    pthread_mutex_lock(&e->ctx->lock);
    exec_unlink(e);
    if (e->counted)
        waiters_leave_locked(e->ctx, 1);
    exec_put_scratch(e);
    tacl__dev_exec_free(e->dev);
    /* An engine's execution (one allocation, no schedule) is kept for
     * the context's next one. */
    if (e->engine != NULL) {
        const tacl__engine_ops_t *ops = e->engine;
        void *arg = e->engine_arg;
        tacl__ctx_t *ctx = e->ctx;
        int kept = ctx->engine_spare == NULL;

        /* The execution's reference on the context goes in this same
         * round trip of the lock unless it is the last. */
        int last_ref = ctx->refcount == 1;

        if (kept)
            ctx->engine_spare = e;
        if (!last_ref)
            ctx->refcount--;
        pthread_mutex_unlock(&ctx->lock);
        ops->release(arg);
        if (last_ref)
            tacl__ctx_release(ctx);
        if (!kept)
            exec_dealloc(e);
        return;
    }
    pthread_mutex_unlock(&e->ctx->lock);
    tacl__ctx_release(e->ctx);
    tacl__sched_fini(&e->sched);
    exec_dealloc(e);
}

int tacl__exec_streamed(const tacl__exec_t *e)
{
    return e->dev != NULL && tacl__dev_exec_streamed(e->dev);
}

void tacl__exec_detach(tacl__exec_t *e)
{
    int finished;

    pthread_mutex_lock(&e->ctx->lock);
    finished = atomic_load(&e->finished);
    if (!finished)
        e->detached = 1;
    pthread_mutex_unlock(&e->ctx->lock);
    if (finished)
        tacl__exec_free(e);
}

void tacl__ctx_reap(tacl__ctx_t *ctx)
{
    tacl__exec_t *list;

    pthread_mutex_lock(&ctx->lock);
    list = ctx->reap;
    ctx->reap = NULL;
    pthread_mutex_unlock(&ctx->lock);
    while (list != NULL) {
        tacl__exec_t *next = list->next;
        tacl__exec_free(list);
        list = next;
    }
}

/*
 * The wait's bound (wait.h): a dead peer or the deadline, which fail the
 * context, so they live here, beside the failure.
 */
void tacl__ctx_check_liveness(tacl__ctx_t *ctx, uint64_t now)
{
    tacl_status_t status;

    if (ctx->fatal != TACL_OK || ctx->bs == NULL ||
        now < ctx->last_check_ns + 1000000ull)
        return;
    ctx->last_check_ns = now;
    status = tacl__bootstrap_check(ctx->bs);
    if (status != TACL_OK)
        tacl__ctx_set_fatal(ctx, status);
}

tacl_status_t tacl__wait_bound(tacl__waiter_t *w, tacl__ctx_t *ctx,
                               const tacl__xcomm_t *xc)
{
    /* Marks are coarse (never ahead of now): elapsed times never go
     * negative. */
    uint64_t now = tacl__now_ns(), last = w->last_event;

    tacl__ctx_check_liveness(ctx, tacl__now_coarse_ns());
    /* Progress another thread of the context made counts too (the
     * progress thread and a waiting thread share the events). */
    if (ctx->last_event_ns > last)
        last = ctx->last_event_ns;
    if (ctx->fatal == TACL_OK &&
        now - last > (uint64_t)(xc->timeout_s * 1e9))
        tacl__ctx_timed_out(ctx, xc);
    if (ctx->fatal != TACL_OK)
        return tacl__error(ctx->fatal, COLL, "%s", ctx->fatal_msg);
    return TACL_OK;
}

/* One round; quick: the engines' executions only. */
static int progress_round(tacl__ctx_t *ctx, int quick)
{
    int events = 0;
    uint64_t now;

    for (tacl__exec_t *e = ctx->active, *next; e != NULL; e = next) {
        next = e->next;
        events += exec_drain(e);
    }
    if (quick)
        return events;
    for (int t = 0; t < ctx->ntl; t++) {
        int n = tacl__tl_progress(ctx->tls[t]);
        if (n < 0)
            tacl__ctx_set_fatal(ctx, (tacl_status_t)n);
        else
            events += n;
    }
    if (ctx->held_head != NULL)
        events += held_progress(ctx);
    for (tacl__exec_t *e = ctx->active, *next; e != NULL; e = next) {
        next = e->next;
        events += exec_drain(e);
    }
    /* The coarse clock (a tick behind at most): these marks only bound
     * waits of milliseconds and more, and a round reads it every time. */
    now = tacl__now_coarse_ns();
    if (events > 0)
        ctx->last_event_ns = now;
    tacl__ctx_check_liveness(ctx, now);
    tacl__ctx_flight_poll(ctx);
    return events;
}

int tacl__ctx_progress_locked(tacl__ctx_t *ctx)
{
    return progress_round(ctx, 0);
}

int tacl__ctx_progress_wait(tacl__ctx_t *ctx, int spinning)
{
    return progress_round(ctx, spinning && !sched_active(ctx));
}

int tacl__ctx_progress(tacl__ctx_t *ctx)
{
    int events;

    pthread_mutex_lock(&ctx->lock);
    events = tacl__ctx_progress_locked(ctx);
    pthread_mutex_unlock(&ctx->lock);
    return events;
}

/*
 * Dump the flight records of every communicator with an operation in
 * flight, once each, before the failure cancels what they wait for.
 */
static void flight_dump_active(tacl__ctx_t *ctx, tacl_status_t status)
{
    const char *why = status == TACL_ERR_TIMEOUT ? "timeout" : "failure";

    for (tacl__exec_t *e = ctx->active; e != NULL; e = e->next) {
        int seen = 0;
        for (tacl__exec_t *p = ctx->active; p != e && !seen; p = p->next)
            seen = p->xc == e->xc;
        if (!seen)
            tacl__flight_dump_auto(e->xc, why);
    }
}

void tacl__ctx_set_fatal(tacl__ctx_t *ctx, tacl_status_t status)
{
    /* The peer a transport saw fail, if that is what status reports. */
    int victim = tacl__error_take_failed_rank();
    int told = 0;
    /* What the questions below may add to the failure's time: a twentieth
     * of the timeout, so that a timeout is reported within 10% of it
     * (torch's tests hold backends to that), and never more than their
     * own bounds. */
    double grace = 0.05 * ctx->timeout_s;

    if (ctx->fatal != TACL_OK || status == TACL_OK)
        return;
    /* A timeout: ask the ring which rank hangs (the ranks stuck behind it
     * time out too and say so; it cannot), and name it. */
    if (status == TACL_ERR_TIMEOUT && ctx->bs != NULL &&
        tacl__bootstrap_check(ctx->bs) == TACL_OK) {
        char local[TACL__ERROR_LEN];
        tacl_status_t st;
        int hung;

        snprintf(local, sizeof(local), "%s", tacl__last_error());
        st = tacl__bootstrap_timeout(ctx->bs, TACL_MIN(0.5, grace), &hung);
        if (st == TACL_ERR_REMOTE) {
            status = TACL_ERR_REMOTE;
            told = 1;
        } else if (hung >= 0) {
            char why[TACL__ERROR_LEN];

            snprintf(why, sizeof(why), "%s", tacl__last_error());
            tacl__error(status, COLL, "%s; %s", why, local);
            told = 1;
        } else {
            tacl__error(status, COLL, "%s", local);
        }
    }
    /* A local error is often the echo of a dead peer (a read from its
     * memory faults, a socket resets), and a peer a transport saw die may
     * only have exited after an earlier failure elsewhere: give the
     * bootstrap, which sees deaths directly and hears of the first one
     * around the ring, a moment to say so, and report the cause.  (A
     * failed bootstrap has said so already, or was failed by the caller:
     * an abort or a revoke.) */
    if (!told && ctx->bs != NULL && tacl__bootstrap_check(ctx->bs) == TACL_OK) {
        char local[TACL__ERROR_LEN];
        uint64_t until =
            tacl__now_ns() + (uint64_t)(TACL_MIN(0.2, grace) * 1e9);
        snprintf(local, sizeof(local), "%s", tacl__last_error());
        while (tacl__bootstrap_check(ctx->bs) == TACL_OK &&
               tacl__now_ns() < until) {
            struct timespec ts = {0, 5000000};
            nanosleep(&ts, NULL);
        }
        if (tacl__bootstrap_check(ctx->bs) == TACL_ERR_REMOTE) {
            status = TACL_ERR_REMOTE;
            told = 1;
        } else {
            tacl__error(status, COLL, "%s", local);
        }
    }
    /* The message first: fatal is read without the lock, and whoever
     * sees it set reads the message next. */
    snprintf(ctx->fatal_msg, sizeof(ctx->fatal_msg), "%s",
             tacl__last_error());
    ctx->fatal = status;
    TACL_WARN(COLL, "rank %d: communicator failed: %s (%s); pending "
              "operations end with this error", ctx->rank, ctx->fatal_msg,
              tacl_status_string(status));
    /* Tell the others unless they told us: that the peer a transport saw
     * fail failed, else that this rank gives up. */
    if (!told && ctx->bs != NULL && status == TACL_ERR_REMOTE && victim >= 0)
        tacl__bootstrap_fail(ctx->bs, victim);
    else if (status != TACL_ERR_REMOTE && ctx->bs != NULL)
        tacl__bootstrap_abort(ctx->bs);
    flight_dump_active(ctx, status);
    for (tacl__exec_t *e = ctx->active; e != NULL; e = e->next)
        exec_fail(e, status);
    for (int t = 0; t < ctx->ntl; t++)
        tacl__tl_cancel_all(ctx->tls[t], status);
    for (tacl__exec_t *e = ctx->active, *next; e != NULL; e = next) {
        next = e->next;
        exec_check_finished(e);
    }
}

static int all_done(tacl__exec_t **execs, int nexec, tacl_status_t *st_p)
{
    tacl_status_t first = TACL_OK, s;

    for (int i = 0; i < nexec; i++) {
        if (!tacl__exec_done(execs[i], &s))
            return 0;
        if (first == TACL_OK)
            first = s;
    }
    *st_p = first;
    return 1;
}

void tacl__ctx_idle_wait(tacl__ctx_t *ctx)
{
    /* Kernels and the caller's streams are polled: no message wakes a
     * sleeper when they finish. */
    if (ctx->dev_active > 0) {
        sched_yield();
        return;
    }
    /* Another engine's events come where it says: it sleeps there.  The
     * list is walked under the lock (another thread links and frees its
     * executions); the sleep, which reads only the engine's own state,
     * outside it, holding that state: the execution may be freed, and
     * with it the last hold of the state, while this thread sleeps. */
    const tacl__engine_ops_t *engine = NULL;
    void *engine_arg = NULL;

    pthread_mutex_lock(&ctx->lock);
    for (const tacl__exec_t *e = ctx->active; e != NULL; e = e->next) {
        if (e->engine != NULL) {
            engine = e->engine;
            engine_arg = e->engine_arg;
            engine->hold(engine_arg);
            break;
        }
    }
    pthread_mutex_unlock(&ctx->lock);
    if (engine != NULL) {
        engine->sleep(engine_arg);
        engine->release(engine_arg);
        return;
    }
    /* Sleep in the transports (shm sleeps on a futex that senders ring);
     * a millisecond at most so liveness is still checked often. */
    for (int t = 0; t < ctx->ntl; t++)
        tacl__tl_wait(ctx->tls[t], 1000 / ctx->ntl);
}

/* The distinct contexts of a set of executions (a group may span several). */
static int distinct_ctxs(tacl__exec_t **execs, int nexec, tacl__ctx_t **ctxs)
{
    int n = 0;

    for (int i = 0; i < nexec; i++) {
        tacl__ctx_t *c = execs[i]->ctx;
        int seen = 0;
        for (int k = 0; k < n; k++)
            seen |= ctxs[k] == c;
        if (!seen)
            ctxs[n++] = c;
    }
    return n;
}

/* The execution whose communicator has the shortest timeout. */
static const tacl__exec_t *shortest_timeout(tacl__exec_t **execs, int nexec)
{
    const tacl__exec_t *best = execs[0];

    for (int i = 1; i < nexec; i++)
        if (execs[i]->xc->timeout_s < best->xc->timeout_s)
            best = execs[i];
    return best;
}

const tacl__exec_t *tacl__ctx_shortest_timeout(const tacl__ctx_t *ctx)
{
    const tacl__exec_t *best = ctx->active;

    for (const tacl__exec_t *e = ctx->active; e != NULL; e = e->next)
        if (e->xc->timeout_s < best->xc->timeout_s)
            best = e;
    return best;
}

void tacl__ctx_check_timeout(tacl__ctx_t *ctx, const tacl__exec_t *exec,
                             uint64_t last_event)
{
    const tacl__xcomm_t *xc = exec->xc;

    /* Progress made by another thread of the context counts too (the
     * progress thread and a waiting thread share the events). */
    if (ctx->last_event_ns > last_event)
        last_event = ctx->last_event_ns;
    if (ctx->fatal != TACL_OK ||
        tacl__now_ns() - last_event <= (uint64_t)(xc->timeout_s * 1e9))
        return;
    tacl__ctx_timed_out(ctx, xc);
}

void tacl__ctx_timed_out(tacl__ctx_t *ctx, const tacl__xcomm_t *xc)
{
    tacl__error(TACL_ERR_TIMEOUT, COLL,
                "%s%s%srank %d: Timed out with no progress for %.1f s (the "
                "communicator's timeout, TACL_TIMEOUT unless its "
                "configuration set one); a peer is hung, dead or not calling "
                "this operation",
                xc->name[0] ? "communicator \"" : "", xc->name,
                xc->name[0] ? "\": " : "", ctx->rank, xc->timeout_s);
    tacl__ctx_set_fatal(ctx, TACL_ERR_TIMEOUT);
}

/*
 * Whether nothing the waiter drives can move now, by hints read without
 * the locks: every execution it waits for that has not finished is an
 * engine's that says so (its ready hook), and no schedule is in flight
 * on ctxs (a blocking fast-engine call's own wait is the same: it
 * spins on its peers' flags, fastpath.c).
 */
static int engines_stuck(tacl__exec_t **execs, int nexec,
                         tacl__ctx_t **ctxs, int nctx)
{
    for (int c = 0; c < nctx; c++)
        if (sched_active(ctxs[c]))
            return 0;
    for (int i = 0; i < nexec; i++) {
        const tacl__exec_t *e = execs[i];

        if (atomic_load(&e->finished))
            continue;
        if (e->engine == NULL || e->engine->ready == NULL ||
            e->engine->ready(e->engine_arg))
            return 0;
    }
    return 1;
}

/*
 * Count this thread out of the waiters of ctxs (it counted itself in at
 * its first round): the progress thread stands aside while a thread
 * waits (progress.c), and takes over again, woken here, when the last
 * one leaves with executions still in flight.
 */
static void waiters_leave(tacl__ctx_t **ctxs, int nctx)
{
    for (int c = 0; c < nctx; c++) {
        pthread_mutex_lock(&ctxs[c]->lock);
        waiters_leave_locked(ctxs[c], 1);
        pthread_mutex_unlock(&ctxs[c]->lock);
    }
}

tacl_status_t tacl__exec_wait(tacl__exec_t **execs, int nexec)
{
    tacl_status_t status = TACL_OK;
    tacl__ctx_t *ctx_local[8], **ctxs = ctx_local;
    const tacl__exec_t *bound;
    tacl__waiter_t w;
    int nctx;

    if (nexec == 0)
        return TACL_OK;
    if ((size_t)nexec > TACL_ARRAY_SIZE(ctx_local))
        ctxs = malloc((size_t)nexec * sizeof(*ctxs));
    if (ctxs == NULL)
        return tacl__error(TACL_ERR_NO_MEMORY, COLL, "out of memory");
    bound = shortest_timeout(execs, nexec);
    nctx = distinct_ctxs(execs, nexec, ctxs);
    tacl__wait_init(&w, ctxs[0]);
    for (int c = 1; c < nctx; c++)
        if (ctxs[c]->oversubscribed)
            w.spin = 0;
    /* The rounds count this thread in and out of the waiters (the
     * first round, and the last one when it holds the only lock). */
    for (int round = 0, left = 0;; round++) {
        int events = 0, done = 0, spinning = w.idle < w.spin;

        for (int c = 0; c < nctx; c++) {
            tacl__ctx_t *ctx = ctxs[c];

            pthread_mutex_lock(&ctx->lock);
            if (round == 0)
                ctx->waiters++;
            events += tacl__ctx_progress_wait(ctx, spinning);
            if (c == nctx - 1)
                done = all_done(execs, nexec, &status);
            if (done && nctx == 1) {
                waiters_leave_locked(ctx, 1);
                left = 1;
            }
            /* The bound reads the clock: not while the waiter spins. */
            if (!done && events == 0 && !spinning)
                (void)tacl__wait_bound(&w, ctx, bound->xc);
            pthread_mutex_unlock(&ctx->lock);
        }
        if (done) {
            if (!left)
                waiters_leave(ctxs, nctx);
            break;
        }
        if (events > 0) {
            tacl__wait_moved(&w);
        } else if (spinning && engines_stuck(execs, nexec, ctxs, nctx)) {
            /* Poll the engines' hints, not the locks, while spinning: a
             * round costs several times a poll, and the peer's answer
             * is seen that much later. */
            while (tacl__wait_idle(&w) == TACL__WAIT_SPIN &&
                   engines_stuck(execs, nexec, ctxs, nctx))
                ;
        } else if (tacl__wait_idle(&w) == TACL__WAIT_SLEEP) {
            for (int c = 0; c < nctx; c++)
                tacl__ctx_idle_wait(ctxs[c]);
        }
    }
    if (status != TACL_OK) {
        for (int c = 0; c < nctx; c++) {
            if (ctxs[c]->fatal != TACL_OK) {
                tacl__error(status, COLL, "%s", ctxs[c]->fatal_msg);
                break;
            }
        }
    }
    if (ctxs != ctx_local)
        free(ctxs);
    return status;
}

void tacl__exec_bg_plan(tacl__xcomm_t *xc, tacl__bg_plan_t *plan,
                        const tacl__bg_plan_t *src)
{
    pthread_mutex_lock(&xc->ctx->lock);
    if (plan != NULL && src != NULL)
        *plan = *src;
    xc->bg_plan = plan;
    pthread_mutex_unlock(&xc->ctx->lock);
}

void tacl__exec_netlog_use(tacl__ctx_t *ctx, int on)
{
    pthread_mutex_lock(&ctx->lock);
    if (on > 0 && ctx->netlog_users++ == 0) {
        /* A fresh record. */
        ctx->netlog_n = 0;
        ctx->netlog_open = 0;
        ctx->netlog_carry_ns = 0;
        if (ctx->fg_net_sends > 0)
            netlog_mark(ctx, 1, 0);
    } else if (on < 0 && ctx->netlog_users > 0) {
        ctx->netlog_users--;
    }
    pthread_mutex_unlock(&ctx->lock);
}

/* Add the span [s, s + l) to n in time order, keeping the max longest. */
static void add_span(uint64_t *start, uint64_t *len, int *n, int max,
                     uint64_t s, uint64_t l)
{
    int k = 0;

    if (*n == max) {
        for (int i = 1; i < max; i++)
            if (len[i] < len[k])
                k = i;
        if (len[k] >= l)
            return;
        for (int i = k; i + 1 < max; i++) {
            start[i] = start[i + 1];
            len[i] = len[i + 1];
        }
        (*n)--;
    }
    start[*n] = s;
    len[*n] = l;
    (*n)++;
}

int tacl__exec_net_idle(tacl__ctx_t *ctx, uint64_t from, uint64_t to,
                        uint64_t min_ns, uint64_t *start, uint64_t *len,
                        int max)
{
    uint64_t cursor = from, first, last;
    int n = 0;

    pthread_mutex_lock(&ctx->lock);
    last = ctx->netlog_n;
    first = last > TACL__NETLOG ? last - TACL__NETLOG : 0;
    /* Overwritten intervals may have ended after from. */
    if (first > 0 && ctx->netlog[first % TACL__NETLOG][0] > from) {
        pthread_mutex_unlock(&ctx->lock);
        return -1;
    }
    for (uint64_t k = first; k < last && cursor < to; k++) {
        const uint64_t *iv = ctx->netlog[k % TACL__NETLOG];
        uint64_t b = iv[0], e = iv[1];

        /* The last interval lasts while sends are in flight. */
        if (k + 1 == last && ctx->netlog_open)
            e = TACL_MAX(e, to);
        if (e <= cursor)
            continue;
        if (b > cursor && (b < to ? b : to) - cursor > min_ns)
            add_span(start, len, &n, max, cursor, (b < to ? b : to) - cursor);
        cursor = e;
    }
    pthread_mutex_unlock(&ctx->lock);
    if (cursor < to && to - cursor > min_ns)
        add_span(start, len, &n, max, cursor, to - cursor);
    return n;
}
