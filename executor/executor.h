/*
 * The executor: runs any schedule on the context's transports and the
 * CPU kernels.  It starts every step whose dependencies are met, so
 * independent steps overlap; progress never blocks and picks up where it
 * stopped.  Waiting spins briefly, then sleeps in the transports, and is
 * bounded by the context's timeout.
 *
 * The executor sees a communicator only through tacl__xcomm_t, the part
 * of it that running a schedule needs; the API layer embeds one in each
 * communicator.
 */
#ifndef TACL_EXECUTOR_EXECUTOR_H
#define TACL_EXECUTOR_EXECUTOR_H

#include "tacl.h"
#include "common.h"
#include "context.h"
#include "flight.h"
#include "sched.h"
#include "scratch.h"

/** Bytes of a communicator's name, its terminating NUL included. */
#define TACL__COMM_NAME_LEN 128

/** The most idle spans a background plan holds (tacl__bg_plan_t). */
#define TACL__BG_SPANS 32

/*
 * When a background communicator's bulk sends may start, planned (the
 * thesis' Algorithm 6.2, lib/snap_sched.c) instead of the quiet-link
 * gate: only inside a span, each span releasing at most left[] bytes
 * (a send larger than what is left waits for the next span); the last
 * span never closes and has no bound, so every send starts at last.
 * Times are tacl__now_ns().
 */
typedef struct {
    int n;                             /* spans; 0: no plan */
    uint64_t start_ns[TACL__BG_SPANS]; /* in order */
    uint64_t end_ns[TACL__BG_SPANS];
    uint64_t left[TACL__BG_SPANS];
} tacl__bg_plan_t;

/** What the executor needs of a communicator. */
typedef struct tacl__xcomm {
    tacl__ctx_t *ctx;
    double timeout_s;          /* bound on any wait for its operations */
    char name[TACL__COMM_NAME_LEN]; /* for messages and dumps; "" none */
    int *world;                /* comm rank -> world rank */
    uint32_t id;               /* on the wire above every tag */
    uint8_t *link_of;          /* link class to each comm rank */
    tacl_counters_t counters;  /* bytes and messages sent */
    tacl__scratch_pool_t scratch;
    int inflight;              /* executions not yet completed */
    /* Background traffic (tacl__exec_bg_send_held): 0, foreground; else
     * the most bulk sends an execution of it keeps in flight, each
     * started only while no foreground traffic of the context occupies
     * its link (executor.c, "Background traffic"; or after
     * TACL_BG_MAX_HOLD_MS held). */
    int background;
    tacl__bg_plan_t *bg_plan;  /* background sends on a plan instead of
                                  the gate, or NULL; owned by whoever set
                                  it (tacl__exec_bg_plan), read and
                                  changed under the lock */
    tacl__flight_t flight;     /* the last operations, for dumps */
} tacl__xcomm_t;

/**
 * Dump ctx's flight recorders if TACL_FLIGHT_SIGNAL arrived since the
 * last dump: every progress round and fast-path call does it; lock held.
 */
static inline void tacl__ctx_flight_poll(tacl__ctx_t *ctx)
{
    if (tacl_unlikely(tacl__flight_signal_gen() != ctx->flight_gen)) {
        ctx->flight_gen = tacl__flight_signal_gen();
        tacl__flight_dump_signalled(ctx, ctx->flight_gen);
    }
}

/**
 * Put xc's background sends on plan (NULL: back to the quiet-link
 * gate).  The executor keeps the pointer and spends the spans' bytes in
 * it; its owner changes it only through this call, which copies from
 * src into plan under the lock (src NULL: leaves it as it is), and keeps
 * it until the call with NULL.
 */
void tacl__exec_bg_plan(tacl__xcomm_t *xc, tacl__bg_plan_t *plan,
                        const tacl__bg_plan_t *src);

/**
 * Record (on > 0) or stop recording (on < 0; counted) when the caller's
 * operations keep the network busy: foreground sends to other nodes in
 * flight, and the time the node's link (its topology rate shared by the
 * node's ranks) takes to carry their bytes.  The idle spans of
 * [from, to) longer than min_ns go to start[] and len[] (at most max,
 * the longest kept, in time order); returns their number, or -1 when
 * the record no longer reaches back to from.  Takes the lock.
 */
void tacl__exec_netlog_use(tacl__ctx_t *ctx, int on);
int tacl__exec_net_idle(tacl__ctx_t *ctx, uint64_t from, uint64_t to,
                        uint64_t min_ns, uint64_t *start, uint64_t *len,
                        int max);

/**
 * Take ownership of a built schedule and start it on xc.  The caller
 * must hold the context lock.
 */
tacl_status_t tacl__exec_start(tacl__xcomm_t *xc, tacl__sched_t *sched,
                               tacl__exec_t **exec_p);

/**
 * tacl__exec_start for a call naming CUDA streams (streams->n of them;
 * NULL or none: the NULL stream).  A schedule with a device buffer runs
 * its local steps on the device (device.h): it starts once the work
 * enqueued on those streams before now has run, and, for non-NULL
 * streams, the work enqueued on them after now waits for its end.  A
 * stream with a schedule on host memory only is TACL_ERR_INVALID_ARG.
 * waited: the caller waits for exec itself (tacl__exec_wait) and frees
 * it: from now until tacl__exec_free it counts as a waiter of the
 * context, so the progress thread is not woken for it (unless it joined
 * caller streams, which a blocking call does not wait for).
 */
tacl_status_t tacl__exec_start_on(tacl__xcomm_t *xc, tacl__sched_t *sched,
                                  const tacl__dev_streams_t *streams,
                                  int waited, tacl__exec_t **exec_p);

/**
 * Another engine (the fast engine's split calls) whose operations run as
 * executions without a schedule, so that requests, waits, the progress
 * thread, failures and flight records treat them as any other.
 */
typedef struct {
    /** Progress the engine's operations; lock held; returns events. */
    int (*drain)(void *arg);
    /** Nothing moved: sleep where the engine's events arrive, 1 ms at
     *  most; lock not held. */
    void (*sleep)(void *arg);
    /** Without the lock, a hint: 0 when a drain now would surely move
     *  nothing (what the engine waits for has not come), else 1.  A
     *  waiter spinning on the engine's executions alone polls it rather
     *  than taking the lock for rounds. */
    int (*ready)(void *arg);
    /** Append what exec still waits for to buf (flight dumps). */
    void (*describe)(void *arg, const tacl__exec_t *exec, char *buf,
                     size_t len);
    /** exec is freed: let go of what it held of arg (no lock held). */
    void (*release)(void *arg);
    /** One more hold of arg (lock held), let go with release: a sleep
     *  outside the lock holds arg, since the execution it was found on
     *  may be freed, and arg with it, meanwhile (an abort). */
    void (*hold)(void *arg);
} tacl__engine_ops_t;

/**
 * Start an execution of ops' engine on xc (lock held), claiming the open
 * flight record: progress rounds call ops->drain(arg) until the engine
 * ends it with tacl__exec_engine_end; then it finishes as any execution
 * (its hook, its request).  A failure of the context fails it too.
 */
tacl_status_t tacl__exec_start_engine(tacl__xcomm_t *xc,
                                      const tacl__engine_ops_t *ops,
                                      void *arg, tacl__exec_t **exec_p);

/** The engine ended exec with status (lock held); it finishes at its next
 *  round. */
void tacl__exec_engine_end(tacl__exec_t *exec, tacl_status_t status);

/** Whether exec joined caller streams (a blocking call need not wait). */
int tacl__exec_streamed(const tacl__exec_t *exec);

/**
 * Hand exec over to its context: it is freed once it ends (now, if it
 * has), by tacl__ctx_reap.  Its failure reaches the caller as the
 * context's failure.  Takes the lock: call it without.
 */
void tacl__exec_detach(tacl__exec_t *exec);

/**
 * Fail ctx with TACL_ERR_TIMEOUT: nothing moved on xc for its timeout
 * (the error recorded names xc and the timeout); lock held.
 */
void tacl__ctx_timed_out(tacl__ctx_t *ctx, const tacl__xcomm_t *xc);

/** Called once, under the context lock, when an execution finishes. */
typedef void (*tacl__exec_done_fn)(void *arg, tacl_status_t status);

/**
 * Have fn(arg, status) called when exec finishes, by whichever thread
 * finishes it (with the context lock held: fn must not take it).
 * Returns 0 when the hook is set, 1 when exec had finished already (fn
 * is then not called).  Takes the lock: call it without.
 */
int tacl__exec_on_done(tacl__exec_t *exec, tacl__exec_done_fn fn, void *arg);

/** tacl__exec_on_done with exec's context lock held. */
int tacl__exec_on_done_locked(tacl__exec_t *exec, tacl__exec_done_fn fn,
                              void *arg);

/**
 * A persistent execution: take ownership of a built schedule (host
 * memory only) and make an execution of it on xc that does not run
 * until tacl__exec_restart; until then it reads as finished.  Its
 * scratch buffers and dependents lists stay with it until it is freed.
 * Lock held.
 */
tacl_status_t tacl__exec_prepare(tacl__xcomm_t *xc, tacl__sched_t *sched,
                                 tacl__exec_t **exec_p);

/**
 * Run a finished (or prepared) execution again from its first step, its
 * message tags stamped with sequence number seq, calling fn(arg, status)
 * when it finishes (as tacl__exec_on_done).  Nothing is allocated or
 * copied.  Lock held.
 */
tacl_status_t tacl__exec_restart(tacl__exec_t *exec, uint64_t seq,
                                 tacl__exec_done_fn fn, void *arg);

/** Whether exec finished; *status_p gets its result when it did. */
int tacl__exec_done(const tacl__exec_t *exec, tacl_status_t *status_p);

/**
 * Wait until every execution in execs is done, or the smallest timeout of
 * their communicators passes without progress; returns the first error.
 */
tacl_status_t tacl__exec_wait(tacl__exec_t **execs, int nexec);

/**
 * Progress exec's context once (takes the lock).  An execution keeps its
 * context alive until it is freed, so this is safe after its
 * communicator was destroyed or aborted.
 */
int tacl__exec_progress(tacl__exec_t *exec);

/**
 * Why exec's context failed (its failure message), or NULL while it has
 * not: readable after exec's communicator is gone (exec keeps the
 * context).
 */
const char *tacl__exec_failure(const tacl__exec_t *exec);

/** The communicator part an execution runs on. */
tacl__xcomm_t *tacl__exec_xcomm(const tacl__exec_t *exec);

/**
 * Append " steps=<done>/<total> bytes_left=<n>" to buf for a running
 * execution, and for the messages it has posted and not seen complete
 * " step=<id> peer=<comm rank> wait=<kind>:<peer>:<bytes>,...": what a
 * flight dump shows of a pending operation.
 */
void tacl__exec_describe(const tacl__exec_t *exec, char *buf, size_t len);

/** Free a finished execution. */
void tacl__exec_free(tacl__exec_t *exec);

#endif /* TACL_EXECUTOR_EXECUTOR_H */
