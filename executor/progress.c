/*
 * The progress thread of a context (see context.h).
 *
 * It runs the same rounds as a thread waiting in tacl__exec_wait, under
 * the same lock, so it may race with user threads testing or posting,
 * and with an abort: each round is one lock hold, and between rounds it
 * holds nothing.  What completes in a round runs its hooks (request
 * completion and callbacks) in this thread.  While a thread waits in
 * tacl__exec_wait it sleeps as if idle and leaves the rounds to that
 * thread, which is what a blocking caller without a progress thread
 * runs; the last waiter to leave wakes it if work remains.
 *
 * Idle, it sleeps on the condition variable that tacl__exec_start
 * signals; the wait is timed (a second) so that a missed signal costs a
 * second, never a hang.  With executions in flight, a round that moved
 * nothing is followed by a sleep in the transports (1 ms at most, cut
 * short by an arriving message), not by spinning.  It is stopped and
 * joined by the last hold's drop, which destroy and abort reach; it runs
 * while the context's generation is the one it started in, so a hold
 * right after a drop starts a new thread without reviving the old one.
 */
#define _GNU_SOURCE /* pthread_setname_np */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h"
#include "context.h"
#include "log.h"

/* Sleep on the condition variable for at most a second; lock held. */
static void idle_sleep(tacl__ctx_t *ctx)
{
    struct timespec until;

    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += 1;
    pthread_cond_timedwait(&ctx->progress_cv, &ctx->lock, &until);
}

/* A thread runs until the generation it was started in ends. */
typedef struct {
    tacl__ctx_t *ctx;
    unsigned gen;
} progress_arg_t;

static void *progress_main(void *arg)
{
    progress_arg_t a = *(progress_arg_t *)arg;
    tacl__ctx_t *ctx = a.ctx;
    uint64_t last_event = tacl__now_ns();
    int was_idle = 1, on_device = 0;

    free(arg);
    /* Named, so that per-thread profiles (top -H, perf, /proc) tell it
     * from the application's threads. */
    pthread_setname_np(pthread_self(), "tacl-progress");
    pthread_mutex_lock(&ctx->lock);
    while (ctx->progress_gen == a.gen) {
        int events;

        /* The communicator's device, current here from the context's
         * first device execution on (never before: a context that moves
         * host memory only must not make a CUDA context): the driver
         * calls of the transports and the executor's runtime calls then
         * run on it, as in the caller's thread. */
        if (!on_device && ctx->dev != NULL) {
            tacl__dev_set_current(ctx->cuda_device);
            on_device = 1;
        }
        if (ctx->reap != NULL) {
            /* Detached executions that ended (operations on streams). */
            pthread_mutex_unlock(&ctx->lock);
            tacl__ctx_reap(ctx);
            pthread_mutex_lock(&ctx->lock);
            continue;
        }
        /* A thread waiting in tacl__exec_wait drives the rounds itself:
         * a second thread taking turns with it on the lock only adds
         * hand-offs, and on a node with more ranks than cores it takes
         * a core from a rank that has data to move.  The last waiter to
         * leave signals the condition variable. */
        if (ctx->active == NULL || ctx->waiters > 0) {
            was_idle = 1;
            idle_sleep(ctx);
            continue;
        }
        /* Time without progress counts from when work arrived. */
        if (was_idle)
            last_event = tacl__now_ns();
        was_idle = 0;
        events = tacl__ctx_progress_locked(ctx);
        if (events > 0) {
            last_event = tacl__now_ns();
        } else if (ctx->active != NULL) {
            tacl__ctx_check_timeout(ctx, tacl__ctx_shortest_timeout(ctx),
                                    last_event);
        }
        pthread_mutex_unlock(&ctx->lock);
        if (events == 0)
            tacl__ctx_idle_wait(ctx);
        pthread_mutex_lock(&ctx->lock);
    }
    pthread_mutex_unlock(&ctx->lock);
    return NULL;
}

tacl_status_t tacl__ctx_progress_hold(tacl__ctx_t *ctx)
{
    tacl_status_t status = TACL_OK;
    int err;

    progress_arg_t *arg = malloc(sizeof(*arg));

    if (arg == NULL)
        return tacl__error(TACL_ERR_NO_MEMORY, INIT, "out of memory");
    pthread_mutex_lock(&ctx->lock);
    if (ctx->progress_users++ == 0) {
        arg->ctx = ctx;
        arg->gen = ctx->progress_gen;
        err = pthread_create(&ctx->progress_tid, NULL, progress_main, arg);
        if (err == 0)
            arg = NULL;
        if (err != 0) {
            ctx->progress_users--;
            status = tacl__error(TACL_ERR_SYSTEM, INIT,
                                 "cannot start the progress thread: %s",
                                 strerror(err));
        } else {
            ctx->progress_running = 1;
            TACL_INFO(INIT, "rank %d: progress thread started", ctx->rank);
        }
    }
    pthread_mutex_unlock(&ctx->lock);
    free(arg);
    return status;
}

void tacl__ctx_progress_drop(tacl__ctx_t *ctx)
{
    int join = 0;
    pthread_t tid;

    pthread_mutex_lock(&ctx->lock);
    if (ctx->progress_users > 0 && --ctx->progress_users == 0 &&
        ctx->progress_running) {
        ctx->progress_gen++;
        ctx->progress_running = 0;
        tid = ctx->progress_tid;
        join = 1;
        pthread_cond_signal(&ctx->progress_cv);
    }
    pthread_mutex_unlock(&ctx->lock);
    /* Bounded: a round ends within a transport wait (1 ms) or the
     * condition wait, which the signal ends. */
    if (join)
        pthread_join(tid, NULL);
}
