/*
 * Shared stubs for the slots a transport does not fill.  Every ops table
 * points its missing slots here, so callers never test a slot for NULL:
 * an operation a transport cannot do fails with TACL_ERR_UNSUPPORTED, a
 * transport that reaches nobody says so, and a transport with no way to
 * sleep yields the processor instead.
 */
#include <sched.h>

#include "log.h"
#include "transport.h"

int tacl__tl_reachable_none(tacl__tl_t *tl, int peer)
{
    return 0;
}

tacl_status_t tacl__tl_post_unsupported(tacl__tl_t *tl, tacl__tl_op_t *op)
{
    return tacl__error(TACL_ERR_UNSUPPORTED, INIT,
                       "transport %s cannot post operations; pick another "
                       "transport for peer %d", tl->ops->name, op->peer);
}

tacl_status_t tacl__tl_wait_yield(tacl__tl_t *tl, int64_t timeout_us)
{
    sched_yield();
    return TACL_OK;
}
