/*
 * Holding a communicator for a call, and the last-error rule: the floor
 * of lib/.  Every entry point checks its handle and holds the
 * communicator here for the call, and every error it returns leaves its
 * message here (comm.h, tacl__comm_fail).  This file calls nothing else
 * in lib/.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <linux/membarrier.h>
#include <sys/syscall.h>

#include "common.h"
#include "comm.h"
#include "log.h"

tacl_status_t tacl__comm_check(tacl_comm_t comm)
{
    if (comm == NULL)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "the communicator is NULL");
    if (comm->magic == TACL__COMM_DEAD)
        return tacl__error(TACL_ERR_INVALID_USAGE, COLL,
                           "the communicator was destroyed; it cannot be "
                           "used any more");
    if (comm->magic != TACL__COMM_ALIVE)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "not a communicator handle");
    /* Non-blocking init: NCCL's rule, every call says "in progress". */
    if (atomic_load(&comm->initializing))
        return TACL_IN_PROGRESS;
    /* A load first: the exchange is an atomic read-modify-write, which
     * every call would pay. */
    if (atomic_load_explicit(&comm->init_joinable, memory_order_acquire) &&
        atomic_exchange(&comm->init_joinable, 0))
        pthread_join(comm->init_thread, NULL);
    if (comm->init_status != TACL_OK)
        return tacl__error(comm->init_status, INIT,
                           "the communicator's initialisation failed (%s); "
                           "destroy it", comm->last_error);
    return TACL_OK;
}

/*
 * Holding a communicator for a call.
 *
 * abort and destroy (tacl__comm_close, tacl__comm_wait_calls) set closing, then wait
 * until no call holds the communicator; a call takes its hold, then reads
 * closing.  Each side writes one word and reads the other's, which needs
 * a store-load fence between the two on both sides, or a call could miss
 * closing while the closer misses its hold.  An atomic read-modify-write
 * per call (calls) gives it, at the price of draining the caller's store
 * buffer twice per call: a tenth of a small collective.
 *
 * So the communicator's owner -- the first thread that calls on it, in
 * practice the only one -- holds it with plain stores instead: it writes
 * owner_calls and reads closing with only a compiler barrier between,
 * and the closer, after setting closing, runs membarrier()'s private
 * expedited command, which makes every running thread of the process
 * execute a full fence (a thread not running has one at its next
 * switch).  For the owner, either its store of owner_calls came before
 * that fence, and the closer (which reads owner_calls after the system
 * call) sees the hold and waits; or its read of closing came after it,
 * and sees closing.  Leaving is a release store, which the closer's
 * acquire load pairs with: the call's accesses happen before the free.
 * Threads other than the owner use calls as before.  Where membarrier is
 * missing (old kernels, some sandboxes) nobody becomes owner.
 */
static pthread_once_t fence_once = PTHREAD_ONCE_INIT;
static int fence_usable;

static void fence_setup(void)
{
    int usable =
        syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED,
                0, 0) == 0 &&
        syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0;

    __atomic_store_n(&fence_usable, usable, __ATOMIC_RELEASE);
    if (!usable)
        TACL_INFO(INIT, "membarrier() is unavailable (%m): every call "
                  "holds its communicator with an atomic increment");
}

/* A full fence on every running thread of the process (owners). */
static void heavy_fence(void)
{
    /* Settled first: a thread may be claiming the first ownership right
     * now, and it does so only once fence_setup() found membarrier
     * usable, so from here on either nobody can own a communicator or
     * the fence below covers the claimer. */
    pthread_once(&fence_once, fence_setup);
    if (!__atomic_load_n(&fence_usable, __ATOMIC_ACQUIRE))
        return; /* nobody owns a communicator */
    if (syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) ==
        0)
        return;
    /* Registered before any owner existed, so this should not happen;
     * the global command needs no registration (and is slower). */
    if (syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0) != 0)
        TACL_WARN(INIT, "membarrier() failed (%m); a call of the "
                  "communicator's owner thread may race with this abort "
                  "or destroy");
}

/* Whether the calling thread holds comm as its owner, claiming comm for
 * it when nobody owns it yet. */
static int owner_of(tacl_comm_t comm)
{
    uintptr_t self = (uintptr_t)pthread_self();
    uintptr_t owner = __atomic_load_n(&comm->owner, __ATOMIC_RELAXED);

    if (owner == self)
        return 1;
    if (owner != 0)
        return 0;
    pthread_once(&fence_once, fence_setup);
    return fence_usable &&
           __atomic_compare_exchange_n(&comm->owner, &owner, self, 0,
                                       __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}

static tacl_status_t closed_error(void)
{
    return tacl__error(TACL_ERR_INVALID_USAGE, COLL,
                       "the communicator is being aborted or destroyed (by "
                       "another thread); it cannot be used any more");
}

tacl_status_t tacl__comm_enter(tacl_comm_t comm)
{
    tacl_status_t status = tacl__comm_check(comm);

    if (status != TACL_OK)
        return status;
    if (owner_of(comm)) {
        int held = __atomic_load_n(&comm->owner_calls, __ATOMIC_RELAXED);

        __atomic_store_n(&comm->owner_calls, held + 1, __ATOMIC_RELAXED);
        /* The compiler keeps the store before the loads; heavy_fence()
         * on the closer's side does the processor's part. */
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        if (!__atomic_load_n(&comm->closing, __ATOMIC_RELAXED) &&
            __atomic_load_n(&comm->magic, __ATOMIC_RELAXED) ==
                TACL__COMM_ALIVE)
            return TACL_OK;
        __atomic_store_n(&comm->owner_calls, held, __ATOMIC_RELEASE);
        return closed_error();
    }
    /* Pairs with tacl__comm_close(): it sets closing, then reads calls; we add
     * to calls, then read closing (and the magic, which a burial clears):
     * one of the two sees the other. */
    __atomic_add_fetch(&comm->calls, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&comm->closing, __ATOMIC_SEQ_CST) ||
        __atomic_load_n(&comm->magic, __ATOMIC_SEQ_CST) != TACL__COMM_ALIVE) {
        __atomic_sub_fetch(&comm->calls, 1, __ATOMIC_SEQ_CST);
        return closed_error();
    }
    return TACL_OK;
}

void tacl__comm_leave(tacl_comm_t comm)
{
    if (tacl__comm_is_owner(comm)) {
        int held = __atomic_load_n(&comm->owner_calls, __ATOMIC_RELAXED);

        /* Release: what the call did happens before the closer's free. */
        __atomic_store_n(&comm->owner_calls, held - 1, __ATOMIC_RELEASE);
        return;
    }
    __atomic_sub_fetch(&comm->calls, 1, __ATOMIC_SEQ_CST);
}

/*
 * Closing (comm.h): an abort or destroy that finds comm closed already
 * leaves it to the thread that closed it (which may free it).
 */
tacl_status_t tacl__comm_close(tacl_comm_t comm)
{
    if (__atomic_exchange_n(&comm->closing, 1, __ATOMIC_SEQ_CST))
        return tacl__error(TACL_ERR_INVALID_USAGE, INIT,
                           "another thread is already aborting or "
                           "destroying this communicator");
    if (comm->local != NULL)
        __atomic_store_n(&comm->local->closing, 1, __ATOMIC_SEQ_CST);
    if (comm->rail != NULL)
        __atomic_store_n(&comm->rail->closing, 1, __ATOMIC_SEQ_CST);
    /* The owners' side of the pairing (see tacl__comm_enter). */
    heavy_fence();
    return TACL_OK;
}

/* An abort has failed the calls' operations: they return promptly. */
tacl_status_t tacl__comm_wait_calls(tacl_comm_t comm, double timeout_s)
{
    tacl_comm_t all[3] = {comm, comm->local, comm->rail};
    uint64_t until = tacl__now_ns() + (uint64_t)(timeout_s * 1e9);
    int busy;

    for (;;) {
        busy = 0;
        for (int i = 0; i < 3; i++)
            busy |= all[i] != NULL &&
                    (__atomic_load_n(&all[i]->calls, __ATOMIC_SEQ_CST) > 0 ||
                     __atomic_load_n(&all[i]->owner_calls,
                                     __ATOMIC_ACQUIRE) > 0);
        if (!busy || tacl__now_ns() >= until)
            break;
        sched_yield();
    }
    if (busy)
        return tacl__error(TACL_ERR_TIMEOUT, INIT,
                           "a call of another thread on this communicator "
                           "did not return within %.1f s", timeout_s);
    return TACL_OK;
}

void tacl__comm_reopen(tacl_comm_t comm)
{
    tacl_comm_t all[3] = {comm, comm->local, comm->rail};

    for (int i = 0; i < 3; i++)
        if (all[i] != NULL)
            __atomic_store_n(&all[i]->closing, 0, __ATOMIC_SEQ_CST);
}

/*
 * The message a failed call leaves: the one recorded where the error was
 * decided; else (an error that came from another thread) the context's
 * failure; else the status's words.
 */
static const char *fail_message(tacl_comm_t comm, tacl_status_t status)
{
    const char *msg = tacl__last_error();

    if (msg[0] != '\0')
        return msg;
    if (comm != NULL && comm->x.ctx != NULL &&
        comm->x.ctx->fatal != TACL_OK && comm->x.ctx->fatal_msg[0] != '\0')
        tacl__error(status, COLL, "%s", comm->x.ctx->fatal_msg);
    else
        tacl__error(status, COLL, "%s", tacl_status_string(status));
    return tacl__last_error();
}

tacl_status_t tacl__comm_fail(tacl_comm_t comm, tacl_status_t status)
{
    const char *msg, *name;

    if (status >= 0)
        return status;
    if (comm == NULL || __atomic_load_n(&comm->magic, __ATOMIC_ACQUIRE) !=
                            TACL__COMM_ALIVE ||
        atomic_load(&comm->initializing)) {
        fail_message(NULL, status);
        return status;
    }
    msg = fail_message(comm, status);
    name = comm->x.name;
    if (name[0] != '\0' && strstr(msg, name) == NULL)
        snprintf(comm->last_error, sizeof(comm->last_error),
                 "communicator \"%s\": %s", name, msg);
    else
        snprintf(comm->last_error, sizeof(comm->last_error), "%s", msg);
    return status;
}

/*
 * A communicator being aborted or destroyed by another thread refuses
 * this thread's calls with a message for the thread: its last error is
 * the thread's from then on.
 */
TACL_EXPORT const char *tacl_comm_last_error(tacl_comm_t comm)
{
    if (comm == NULL || comm->magic != TACL__COMM_ALIVE ||
        __atomic_load_n(&comm->closing, __ATOMIC_ACQUIRE))
        return tacl__last_error();
    if (atomic_load(&comm->initializing))
        return "";
    return comm->last_error;
}

TACL_EXPORT const char *tacl_last_error(void)
{
    return tacl__last_error();
}
