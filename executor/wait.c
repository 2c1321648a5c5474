/*
 * The wait policy (wait.h): the spin and yield windows.  It calls
 * nothing else of the executor; the wait's bound, which fails the
 * context, is executor.c's.
 */
#include <sched.h>

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
