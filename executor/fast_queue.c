/*
 * The fast engine's split calls (fastpath.h): an _nb call stamps its
 * input when its record is free and returns; its peers' inputs are read
 * later, in call order, by whoever progresses the context (a wait, a
 * test, the progress thread), as an execution of the executor's, so
 * requests, callbacks, failures and flight records treat it as any
 * other operation.
 *
 * A rank's calls stay in order: call k is stamped after call k - 1 and
 * done after it too, and the rank's flag says min(stamped, done + 1), so
 * a flag at k still means "done reading every call before k", which is
 * what a peer reusing its records waits for.  Calls that wait behind a
 * split one are moved here under the context lock, a blocking one too
 * (its caller then waits for its turn); a blocking call with nothing
 * before it runs alone, without the lock (fastpath.c).
 */
#include <pthread.h>
#include <stdio.h>

#include "common.h"
#include "executor.h"
#include "fast_int.h"
#include "log.h"
#include "wait.h"

/*
 * Stamp and finish the queued calls in order as far as the peers allow;
 * lock held.  Returns how many moved; what the oldest waits for is left
 * in f->blocked, for the sleep and the waiters' polls.
 */
static int queue_pass(tacl__fast_t *f)
{
    tacl__ctx_t *ctx = f->xc->ctx;
    int events = 0, rank;
    uint64_t blocked = 0;

    if (ctx->fatal != TACL_OK)
        return 0;
    while (f->stamped < f->n) {
        uint64_t k = f->stamped + 1;
        const tacl__fast_op_t *op = &f->pend[k % FAST_RING].op;
        uint64_t depth = fast_depth(f, op);

        /* This rank reads its own slots too: the record or slot is free
         * once its own call k - depth is done as well. */
        if (k > depth && f->done < k - depth)
            break;
        if (k > depth && !tacl__fast_flags_at(f, k - depth + 1, &rank)) {
            blocked = fast_blocked(rank, k - depth + 1, 0);
            break;
        }
        tacl__fast_stamp(f, k, op);
        tacl__fast_announce(f);
        events++;
    }
    while (f->done < f->stamped) {
        uint64_t k = f->done + 1;
        fast_pend_t *p = &f->pend[k % FAST_RING];
        tacl_status_t status;
        int ready = tacl__fast_inputs_ready(f, k, &p->op, &rank);

        if (ready == 0) {
            if (blocked == 0)
                blocked = fast_blocked(rank, k, 1);
            break;
        }
        if (ready < 0) {
            /* Every pending execution fails with it. */
            tacl__ctx_set_fatal(ctx, tacl__fast_mismatch(f, k, &p->op,
                                                         rank));
            blocked = 0;
            break;
        }
        status = tacl__fast_compute(f, k, &p->op);
        f->done = k;
        tacl__fast_announce(f);
        if (p->exec != NULL)
            tacl__exec_engine_end(p->exec, status);
        else if (status != TACL_OK)
            tacl__ctx_set_fatal(ctx, status);
        p->exec = NULL;
        events++;
    }
    atomic_store_explicit(&f->blocked, blocked, memory_order_relaxed);
    return events;
}

/* Passes until nothing moves: a call done frees a slot for the next. */
static int queue_drain(tacl__fast_t *f)
{
    int events = 0, moved;

    while ((moved = queue_pass(f)) > 0)
        events += moved;
    return events;
}

static int engine_drain(void *arg)
{
    return queue_drain(arg);
}

static void engine_sleep(void *arg)
{
    const tacl__fast_t *f = arg;
    uint64_t b = atomic_load_explicit(&f->blocked, memory_order_relaxed);

    /* Read without the lock: a stale answer costs one short sleep. */
    if (b != 0)
        tacl__fast_sleep_on(f, fast_blocked_rank(b), fast_blocked_call(b),
                            (int)(b & 1));
    else
        sched_yield();
}

/* Whether what the oldest queued call waited for at the last drain has
 * come (or nothing is known): without the lock, a hint. */
static int engine_ready(void *arg)
{
    const tacl__fast_t *f = arg;
    uint64_t b = atomic_load_explicit(&f->blocked, memory_order_relaxed);

    return b == 0 || fast_peer_moved(f, fast_blocked_rank(b),
                                     fast_blocked_call(b), (int)(b & 1));
}

static void engine_describe(void *arg, const tacl__exec_t *exec, char *buf,
                            size_t len)
{
    const tacl__fast_t *f = arg;
    uint64_t k = 0, b = atomic_load_explicit(&f->blocked,
                                             memory_order_relaxed);

    for (uint64_t c = f->done + 1; c <= f->n && k == 0; c++)
        if (f->pend[c % FAST_RING].exec == exec)
            k = c;
    snprintf(buf, len, " fast_call=%llu done=%llu stamped=%llu "
             "wait=%s:%d:%llu", (unsigned long long)k,
             (unsigned long long)f->done, (unsigned long long)f->stamped,
             b & 1 ? "stamp" : "flag", b != 0 ? fast_blocked_rank(b) : -1,
             (unsigned long long)fast_blocked_call(b));
}

/* A split call's execution holds the area until it is freed; so does a
 * sleep on it outside the lock (engine_hold). */
static void engine_release(void *arg)
{
    tacl__fast_free(arg);
}

static void engine_hold(void *arg)
{
    tacl__fast_t *f = arg;

    atomic_fetch_add(&f->refs, 1);
}

static const tacl__engine_ops_t fast_engine = {
    .drain = engine_drain,
    .sleep = engine_sleep,
    .ready = engine_ready,
    .describe = engine_describe,
    .release = engine_release,
    .hold = engine_hold,
};

/* Room for one more call: wait, with the lock released in turns, until
 * fewer than FAST_RING are queued. */
static tacl_status_t queue_room(tacl__fast_t *f)
{
    tacl__ctx_t *ctx = f->xc->ctx;
    tacl__waiter_t w;

    if (f->n - f->done < FAST_RING)
        return TACL_OK;
    tacl__wait_init(&w, ctx);
    while (f->n - f->done >= FAST_RING) {
        tacl_status_t status;

        if (tacl__ctx_progress_locked(ctx) > 0) {
            tacl__wait_moved(&w);
            continue;
        }
        status = tacl__wait_bound(&w, ctx, f->xc);
        if (status != TACL_OK)
            return status;
        pthread_mutex_unlock(&ctx->lock);
        if (tacl__wait_idle(&w) == TACL__WAIT_SLEEP)
            tacl__ctx_idle_wait(ctx);
        pthread_mutex_lock(&ctx->lock);
    }
    return TACL_OK;
}

int tacl__fast_begin(tacl__fast_t *f, tacl__xcomm_t *xc,
                     const tacl__fast_op_t *op, uint64_t *n_p)
{
    f->xc = xc;
    if (f->done == f->n) {
        *n_p = ++f->n;
        return 1;
    }
    /* A queue of FAST_RING calls is rare (split calls nobody waits for):
     * the call waits for room with the lock released in turns. */
    if (queue_room(f) != TACL_OK)
        return -1;
    *n_p = ++f->n;
    f->pend[*n_p % FAST_RING] = (fast_pend_t){*op, NULL};
    queue_drain(f);
    return 0;
}

tacl_status_t tacl__fast_wait_queued(tacl__fast_t *f, tacl__xcomm_t *xc,
                                     uint64_t n)
{
    tacl__ctx_t *ctx = xc->ctx;
    tacl_status_t status = TACL_OK;
    tacl__waiter_t w;

    tacl__wait_init(&w, ctx);
    pthread_mutex_lock(&ctx->lock);
    while (f->done < n) {
        int spinning = w.idle < w.spin;

        if (ctx->fatal != TACL_OK) {
            status = tacl__error(ctx->fatal, COLL, "%s", ctx->fatal_msg);
            break;
        }
        if (tacl__ctx_progress_wait(ctx, spinning) + queue_drain(f) > 0) {
            tacl__wait_moved(&w);
            continue;
        }
        /* The bound reads the clock: not while the waiter spins. */
        if (!spinning &&
            (status = tacl__wait_bound(&w, ctx, xc)) != TACL_OK)
            break;
        pthread_mutex_unlock(&ctx->lock);
        if (tacl__wait_idle(&w) == TACL__WAIT_SLEEP)
            engine_sleep(f);
        pthread_mutex_lock(&ctx->lock);
    }
    pthread_mutex_unlock(&ctx->lock);
    return status;
}

tacl_status_t tacl__fast_start_nb(tacl__fast_t *f, tacl__xcomm_t *xc,
                                  const tacl__fast_op_t *op,
                                  tacl__exec_t **exec_p)
{
    tacl_status_t status;
    uint64_t k;

    f->xc = xc;
    status = queue_room(f);
    if (status != TACL_OK)
        return status;
    atomic_fetch_add(&f->refs, 1);
    status = tacl__exec_start_engine(xc, &fast_engine, f, exec_p);
    if (status != TACL_OK) {
        atomic_fetch_sub(&f->refs, 1);
        return status;
    }
    k = ++f->n;
    f->pend[k % FAST_RING] = (fast_pend_t){*op, *exec_p};
    queue_drain(f);
    return TACL_OK;
}
