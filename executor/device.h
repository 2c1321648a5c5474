/*
 * CUDA device memory in the executor: what a pointer is, a context's
 * device, its stream and events, the kernel steps of a schedule on device
 * buffers, and the join with the caller's stream.  Built with CUDA this is
 * the only executor code that calls the CUDA runtime; built without, every
 * pointer is host memory and every device call says that the build has no
 * CUDA.
 *
 * Design (see device.c's opening comment for the costs):
 *  - A context records the calling thread's current device when it is
 *    created (as NCCL's communicator does), or why none is usable.
 *  - An execution whose schedule has a device buffer gets a device part.
 *    Before it runs any step it waits, in progress rounds, for an event
 *    recorded at the call on each stream the call named (the legacy
 *    default stream for NULL): the operation starts after the work the
 *    caller enqueued before the call, and no thread blocks on the GPU.
 *  - Its local steps (copy, reduce, div, quantize, dequantize, dqrq) are
 *    enqueued on the context's own stream; each completes when the event
 *    recorded after it has fired, polled from progress like a message.
 *  - For non-NULL streams the call enqueues, on each stream, a wait for a
 *    word of host-mapped memory that the executor sets when the
 *    execution ends (cuStreamWaitValue32; a host function that waits for
 *    the word where stream memory operations are unavailable): the work
 *    enqueued after the call sees the results.
 * Every function here but the pointer queries is called with the context
 * lock held.
 */
#ifndef TACL_EXECUTOR_DEVICE_H
#define TACL_EXECUTOR_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include "tacl.h"
#include "sched.h"

/** Most distinct caller streams one execution joins. */
#define TACL__DEV_MAX_STREAMS 8

/** A context's device state (its stream, events, completion words). */
typedef struct tacl__dev tacl__dev_t;
/** The device part of one execution. */
typedef struct tacl__dev_exec tacl__dev_exec_t;

/** The caller streams of one call or group (none: a NULL stream). */
typedef struct {
    int n;
    void *s[TACL__DEV_MAX_STREAMS];
} tacl__dev_streams_t;

/**
 * Whether this process has a usable CUDA device, asked of the driver,
 * never the runtime, so that no context is made: 0, without asking,
 * while nothing in the process has loaded the CUDA driver (no pointer can
 * be device memory then); decided for good once it has.  Without one no
 * pointer is device memory, so callers may skip tacl__dev_ptr_type().
 */
int tacl__dev_usable(void);

/**
 * What ptr points to: TACL_MEM_CUDA for device memory (cudaMalloc, cuMem
 * VMM mappings, managed memory), with its device ordinal in *device_p;
 * TACL_MEM_HOST otherwise (and always without CUDA or a driver).  One
 * driver query (tacl__cu_device_of), no context needed.
 */
tacl_memtype_t tacl__dev_ptr_type(const void *ptr, int *device_p);

/**
 * The calling thread's current device, or -1 with the reason in why (len
 * bytes) when no device is usable (no CUDA in the build, no driver, no
 * device).  While nothing in the process has loaded the CUDA driver this
 * is 0, the runtime's default, found without initialising CUDA.
 */
int tacl__dev_current(char *why, size_t len);

/**
 * Make device current in the calling thread (a no-op for -1, and while
 * nothing in the process has loaded the CUDA driver).
 */
void tacl__dev_set_current(int device);

/**
 * Check a caller's stream: that it is a stream the runtime knows and,
 * where the runtime can tell, that it belongs to device.  what names the
 * call in the message.
 */
tacl_status_t tacl__dev_check_stream(void *stream, int device,
                                     const char *what);

/** Device memory for scratch on device (NULL when out of memory). */
void *tacl__dev_malloc(uint64_t size, int device);
void tacl__dev_free(void *ptr, int device);

/** A context's device state for device, made on first use (*d_p). */
tacl_status_t tacl__dev_get(tacl__dev_t **d_p, int device);
/** Free it: waits for the work on its stream (destroy only). */
void tacl__dev_destroy(tacl__dev_t *d);

/**
 * The device part of an execution of nsteps steps: records an event on
 * each caller stream (the legacy default stream when streams->n is 0)
 * and, when streams->n > 0, enqueues each stream's wait for the
 * execution's end.
 */
tacl_status_t tacl__dev_exec_new(tacl__dev_t *d, uint32_t nsteps,
                                 const tacl__dev_streams_t *streams,
                                 tacl__dev_exec_t **dx_p);

/**
 * Whether the caller's earlier work is still running: 1 while it is, 0
 * once every recorded event has fired, a negative status on a CUDA error.
 */
int tacl__dev_exec_gated(tacl__dev_exec_t *dx);

/**
 * Enqueue local step id (st, its buffers resolved through bufptr) on the
 * context's stream.  *queued is 1 when it completes later (through
 * tacl__dev_poll), 0 when there was nothing to do.
 */
tacl_status_t tacl__dev_step(tacl__dev_exec_t *dx, uint32_t id,
                             const tacl__step_t *st, uint8_t *const *bufptr,
                             int *queued);

/**
 * Steps of dx whose kernels finished since the last call: up to max ids
 * into ids; returns how many.  A failed kernel sets *status_p (which is
 * otherwise left alone) and its step is returned as done.
 */
int tacl__dev_poll(tacl__dev_exec_t *dx, uint32_t *ids, int max,
                   tacl_status_t *status_p);

/** The execution ended: release the caller streams waiting for it. */
void tacl__dev_exec_end(tacl__dev_exec_t *dx);

/** Whether dx joined caller streams (a non-NULL stream was given). */
int tacl__dev_exec_streamed(const tacl__dev_exec_t *dx);

/** Free an ended execution's device part. */
void tacl__dev_exec_free(tacl__dev_exec_t *dx);

#endif /* TACL_EXECUTOR_DEVICE_H */
