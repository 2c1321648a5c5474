/*
 * How a thread waits for its peers: the one policy that the executor's
 * waits (tacl__exec_wait) and the fast engine's (fastpath.c) share.
 *
 * While nothing moves, a waiter first polls (TACL_SHM_SPIN polls: a peer
 * that is running answers within that window and nobody pays a system
 * call); then polls and yields its core between polls for up to
 * TACL_SHM_YIELD_US, which stays runnable (a peer sharing this core runs
 * at once, and no futex wake-up is needed, which would also tend to pull
 * both ranks onto one core); only then does it sleep where its events
 * arrive (the transports' descriptors and futexes, or a fast-engine
 * peer's flag), a millisecond at most.  An oversubscribed node skips the
 * pure polls: the rank it waits for may need this core.  Both windows
 * are short by default: on a machine busy with other work a longer spin
 * takes the core from the peer that is moving the data (a 16 MB
 * all-gather on 2 ranks lost a third of its bandwidth with 20,000 polls
 * and 1 ms of yielding).  Sleeping, a waiter asks whether its wait must
 * end: a peer died (the bootstrap's liveness check, at most once a
 * millisecond per context) or nothing moved for the communicator's
 * timeout (then the context fails with TACL_ERR_TIMEOUT, naming it).
 */
#ifndef TACL_EXECUTOR_WAIT_H
#define TACL_EXECUTOR_WAIT_H

#include <stdint.h>

#include "common.h"
#include "context.h"

typedef struct tacl__xcomm tacl__xcomm_t;

/** What a waiter does when nothing moved. */
typedef enum {
    TACL__WAIT_SPIN = 0,   /* it paused the core briefly: poll again */
    TACL__WAIT_YIELD,      /* it yielded the core: poll again */
    TACL__WAIT_SLEEP       /* the caller sleeps where its events arrive */
} tacl__wait_step_t;

typedef struct {
    long long spin;        /* polls before yielding, 0 oversubscribed */
    uint64_t yield_ns;     /* then yield for this long */
    long long idle;        /* polls since something last moved */
    uint64_t yield_until;
    uint64_t last_event;   /* tacl__now_coarse_ns() when something last
                              moved (a tick late at most: it bounds waits
                              of seconds) */
} tacl__waiter_t;

/** Start a wait on ctx's executions or area: the policy's settings. */
void tacl__wait_init(tacl__waiter_t *w, const tacl__ctx_t *ctx);

/** Something moved: the wait starts over. */
static inline void tacl__wait_moved(tacl__waiter_t *w)
{
    w->idle = 0;
    w->last_event = tacl__now_coarse_ns();
}

/** Nothing moved: pause, yield, or tell the caller to sleep. */
tacl__wait_step_t tacl__wait_idle(tacl__waiter_t *w);

/**
 * Whether the wait must end, with ctx's lock held (executor.c, beside the
 * context's failure): a peer died (the
 * bootstrap's liveness, checked at most once a millisecond per context)
 * or nothing moved on ctx for xc's timeout since w's last event (ctx
 * fails with TACL_ERR_TIMEOUT naming xc).  TACL_OK, or the context's
 * failure (recorded as the thread's error).
 */
tacl_status_t tacl__wait_bound(tacl__waiter_t *w, tacl__ctx_t *ctx,
                               const tacl__xcomm_t *xc);

/** The liveness half of tacl__wait_bound, for every progress round
 *  (lock held): the bootstrap asked at most once a millisecond of now
 *  (tacl__now_coarse_ns(), as every caller reads it); executor.c. */
void tacl__ctx_check_liveness(tacl__ctx_t *ctx, uint64_t now);

#endif /* TACL_EXECUTOR_WAIT_H */
