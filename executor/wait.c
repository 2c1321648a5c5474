/*
 * The wait policy (wait.h).
 */
#include <sched.h>

#include "config.h"
#include "executor.h"
#include "log.h"
#include "wait.h"

void tacl__wait_init(tacl__waiter_t *w, const tacl__ctx_t *ctx)
{
    w->spin = ctx->oversubscribed ? 0 : ctx->wait_spin;
    w->yield_ns = ctx->wait_yield_ns;
    w->idle = 0;
    w->yield_until = 0;
    w->last_event = tacl__now_coarse_ns();
}

tacl__wait_step_t tacl__wait_idle(tacl__waiter_t *w)
{
    if (w->idle++ < w->spin) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
        return TACL__WAIT_SPIN;
    }
    /* The first idle poll past the spin opens the yield window. */
    if (w->idle == w->spin + 1)
        w->yield_until = tacl__now_ns() + w->yield_ns;
    if (tacl__now_ns() < w->yield_until) {
        sched_yield();
        return TACL__WAIT_YIELD;
    }
    return TACL__WAIT_SLEEP;
}

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
