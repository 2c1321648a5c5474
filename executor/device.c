/*
 * CUDA device memory in the executor.  See device.h for what it does;
 * here is why it is done this way and what it costs.
 *
 * Joining the caller's stream to the progress engine, at the start: an
 * event recorded on the caller's stream at the call (an enqueue, a few
 * microseconds of CPU) and queried from progress rounds (cudaEventQuery,
 * well under a microsecond; the thread never blocks).  The alternative,
 * cudaStreamWaitEvent of tacl's stream on it, would order tacl's kernels
 * but not its messages, which peers read straight out of the caller's
 * buffers: the host has to know anyway.  The query adds the gap between
 * the GPU reaching the event and the next progress round, at most a
 * transport wait (1 ms) with the progress thread asleep, a few
 * microseconds while it polls.
 *
 * At the end: cuStreamWaitValue32 on a word of host-mapped pinned memory,
 * enqueued on the caller's stream at the call, released by a store from
 * whichever thread ends the execution.  The GPU's front end polls the word
 * over the bus; nothing on the host waits, and no CUDA call is made at the
 * end (a host store).  Its cost is the enqueue at the call (a few
 * microseconds of CPU) plus the front end's poll latency after the store
 * (about a bus round trip).  Where the driver refuses stream memory
 * operations, a host function (cudaLaunchHostFunc) enqueued on the
 * caller's stream waits for the end instead: it occupies the CUDA
 * runtime's callback thread while it waits (so it delays other host
 * functions of the process) and costs the runtime's host-function
 * latency, tens of microseconds; it is the fallback, never the default.
 * Both are driver entry points and runtime calls resolved at run time
 * (cudaGetDriverEntryPoint), so tacl needs no libcuda at link time.
 *
 * Kernel steps run on one non-blocking stream per context, so they run in
 * the order the executor started them; each is followed by an event from
 * a per-context pool, and completes when progress sees the event fired.
 * The executor's host path never comes here: a schedule without a device
 * buffer has no device part.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tacl_build_config.h"
#include "common.h"
#include "cu_driver.h"
#include "cu_entry.h"
#include "device.h"
#include "log.h"

#if TACL_HAVE_CUDA
#include <cuda.h>
#include <cuda_runtime_api.h>

#include "quant_cuda.h"
#include "reduce_cuda.h"

/* Completion words a context keeps in host-mapped memory. */
#define DEV_WORDS 1024

/* The driver entry point of the stream joins, resolved at run time. */
typedef CUresult (*wait32_fn)(CUstream, CUdeviceptr, cuuint32_t, unsigned);

static pthread_once_t drv_once = PTHREAD_ONCE_INIT;
static wait32_fn drv_wait32;
static char cuda_why[160] = "no CUDA driver is loaded in this process yet "
                            "(nothing here made CUDA memory or a context)";

/* The runtime's part, at a context's first device execution only. */
static void drv_open(void)
{
    drv_wait32 = (wait32_fn)tacl__cu_entry("cuStreamWaitValue32");
}

/*
 * Whether a device is usable, asked of the driver (never the runtime, so
 * no context is made): 0 without asking while the process has not loaded
 * the driver (tacl__cu_loaded), since no pointer can be device memory
 * then; decided for good at the first answer once it has.
 */
static int cuda_usable(void)
{
    static int usable = -1;
    int u = __atomic_load_n(&usable, __ATOMIC_ACQUIRE);
    const tacl__cu_t *cu;
    int n = 0;

    if (u >= 0)
        return u;
    if (!tacl__cu_loaded())
        return 0;
    cu = tacl__cu();
    if (cu == NULL) {
        snprintf(cuda_why, sizeof(cuda_why), "%s", tacl__cu_why());
        u = 0;
    } else if (cu->cuDeviceGetCount(&n) != CUDA_SUCCESS || n < 1) {
        snprintf(cuda_why, sizeof(cuda_why), "the CUDA driver counts no "
                 "device");
        u = 0;
    } else {
        u = 1;
    }
    __atomic_store_n(&usable, u, __ATOMIC_RELEASE);
    return u;
}

int tacl__dev_usable(void)
{
    return cuda_usable();
}

tacl_memtype_t tacl__dev_ptr_type(const void *ptr, int *device_p)
{
    int device;

    *device_p = -1;
    if (ptr == NULL || !cuda_usable())
        return TACL_MEM_HOST;
    device = tacl__cu_device_of(ptr, NULL);
    if (device < 0)
        return TACL_MEM_HOST;
    *device_p = device;
    return TACL_MEM_CUDA;
}

int tacl__dev_current(char *why, size_t len)
{
    CUdevice dev;

    /* Nothing in the process has used CUDA: the runtime's current device
     * is its default, 0, and asking would initialise CUDA. */
    if (!tacl__cu_loaded())
        return 0;
    if (!cuda_usable()) {
        snprintf(why, len, "%s", cuda_why);
        return -1;
    }
    /* The runtime's current device is that of the thread's current
     * context, else its default. */
    return tacl__cu()->cuCtxGetDevice(&dev) == CUDA_SUCCESS ? (int)dev : 0;
}

void tacl__dev_set_current(int device)
{
    if (device >= 0 && tacl__cu_loaded() && cuda_usable() &&
        cudaSetDevice(device) != cudaSuccess)
        (void)cudaGetLastError();
}

tacl_status_t tacl__dev_check_stream(void *stream, int device,
                                     const char *what)
{
    cudaError_t e;

#if CUDART_VERSION >= 12080
    int sd = -1;

    e = cudaStreamGetDevice((cudaStream_t)stream, &sd);
    if (e == cudaSuccess && sd != device)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "%s: stream %p belongs to CUDA device %d, but "
                           "the communicator's device is %d", what, stream,
                           sd, device);
#else
    (void)device;
    e = cudaStreamQuery((cudaStream_t)stream);
    if (e == cudaErrorNotReady)
        e = cudaSuccess;
#endif
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "%s: stream %p is not a CUDA stream the runtime "
                           "knows (%s)", what, stream, cudaGetErrorString(e));
    }
    return TACL_OK;
}

/* Run on device in the calling thread; returns the device to go back to. */
static int dev_enter(int device)
{
    int old = -1;

    if (cudaGetDevice(&old) != cudaSuccess)
        old = -1;
    if (old != device)
        (void)cudaSetDevice(device);
    return old;
}

static void dev_leave(int device, int old)
{
    if (old >= 0 && old != device)
        (void)cudaSetDevice(old);
}

static tacl_status_t cuda_fail(const char *what, cudaError_t e)
{
    (void)cudaGetLastError();
    return tacl__error(TACL_ERR_SYSTEM, COLL, "%s: %s", what,
                       cudaGetErrorString(e));
}

void *tacl__dev_malloc(uint64_t size, int device)
{
    void *ptr = NULL;
    int old;

    if (!cuda_usable() || device < 0)
        return NULL;
    old = dev_enter(device);
    if (cudaMalloc(&ptr, size) != cudaSuccess) {
        (void)cudaGetLastError();
        ptr = NULL;
    }
    dev_leave(device, old);
    return ptr;
}

void tacl__dev_free(void *ptr, int device)
{
    int old;

    if (ptr == NULL || !cuda_usable())
        return;
    old = dev_enter(device);
    if (cudaFree(ptr) != cudaSuccess)
        (void)cudaGetLastError();
    dev_leave(device, old);
}

struct tacl__dev {
    int device;
    cudaStream_t stream;      /* tacl's own, non-blocking */
    cudaEvent_t *ev_free;     /* the event pool */
    int nfree, cap;
    volatile uint32_t *words; /* completion words, host-mapped */
    CUdeviceptr words_dev;    /* the same, as the device sees them */
    uint32_t last[DEV_WORDS]; /* the value each word was last given */
    int word_free[DEV_WORDS]; /* free words, a stack */
    int nword_free;
    int memops;               /* 1: cuStreamWaitValue32 works; 0: host
                                 functions */
};

/* A host function's wait for an execution's end (the fallback). */
typedef struct {
    _Atomic int refs;
    _Atomic int done;
} ticket_t;

struct tacl__dev_exec {
    tacl__dev_t *d;
    cudaEvent_t gate[TACL__DEV_MAX_STREAMS]; /* NULL once fired */
    int ngate;
    int streamed;             /* joined caller streams */
    int word;                 /* its completion word, -1 none */
    uint32_t value;
    ticket_t *ticket;         /* host-function joins, NULL none */
    int ended;
    int npend;                /* kernel steps in flight */
    uint32_t *pend;
    cudaEvent_t *pend_ev;
};

static void ticket_drop(ticket_t *t)
{
    if (atomic_fetch_sub(&t->refs, 1) == 1)
        free(t);
}

/* The host function: wait for the end.  It may not call CUDA. */
static void CUDART_CB ticket_wait(void *arg)
{
    ticket_t *t = arg;
    struct timespec ts = {0, 20000};

    while (!atomic_load(&t->done))
        nanosleep(&ts, NULL);
    ticket_drop(t);
}

static tacl_status_t ev_get(tacl__dev_t *d, cudaEvent_t *ev_p)
{
    cudaError_t e;

    if (d->nfree > 0) {
        *ev_p = d->ev_free[--d->nfree];
        return TACL_OK;
    }
    e = cudaEventCreateWithFlags(ev_p, cudaEventDisableTiming);
    return e == cudaSuccess ? TACL_OK : cuda_fail("cudaEventCreate", e);
}

static void ev_put(tacl__dev_t *d, cudaEvent_t ev)
{
    if (d->nfree == d->cap) {
        int cap = d->cap ? 2 * d->cap : 64;
        cudaEvent_t *p = realloc(d->ev_free, (size_t)cap * sizeof(*p));
        if (p == NULL) {
            (void)cudaEventDestroy(ev);
            return;
        }
        d->ev_free = p;
        d->cap = cap;
    }
    d->ev_free[d->nfree++] = ev;
}

tacl_status_t tacl__dev_get(tacl__dev_t **d_p, int device)
{
    tacl__dev_t *d;
    cudaError_t e;
    void *words = NULL, *words_dev = NULL;
    int old;

    if (*d_p != NULL)
        return TACL_OK;
    if (device < 0 || !cuda_usable())
        return tacl__error(TACL_ERR_UNSUPPORTED, COLL, "no usable CUDA "
                           "device: %s", cuda_why);
    pthread_once(&drv_once, drv_open);
    d = calloc(1, sizeof(*d));
    if (d == NULL)
        return tacl__error(TACL_ERR_NO_MEMORY, COLL, "out of memory");
    d->device = device;
    old = dev_enter(device);
    e = cudaStreamCreateWithFlags(&d->stream, cudaStreamNonBlocking);
    if (e == cudaSuccess)
        e = cudaHostAlloc(&words, DEV_WORDS * sizeof(uint32_t),
                          cudaHostAllocMapped | cudaHostAllocPortable);
    if (e == cudaSuccess)
        e = cudaHostGetDevicePointer(&words_dev, words, 0);
    dev_leave(device, old);
    if (e != cudaSuccess) {
        tacl_status_t st = cuda_fail("setting up tacl's CUDA stream", e);
        if (words != NULL)
            (void)cudaFreeHost(words);
        if (d->stream != NULL)
            (void)cudaStreamDestroy(d->stream);
        free(d);
        return st;
    }
    memset(words, 0, DEV_WORDS * sizeof(uint32_t));
    d->words = words;
    d->words_dev = (CUdeviceptr)(uintptr_t)words_dev;
    for (int i = 0; i < DEV_WORDS; i++)
        d->word_free[i] = DEV_WORDS - 1 - i;
    d->nword_free = DEV_WORDS;
    d->memops = drv_wait32 != NULL;
    TACL_INFO(COLL, "CUDA device %d: tacl's stream ready; caller streams "
              "wait through %s", device,
              d->memops ? "cuStreamWaitValue32" : "host functions");
    *d_p = d;
    return TACL_OK;
}

void tacl__dev_destroy(tacl__dev_t *d)
{
    int old;

    if (d == NULL)
        return;
    old = dev_enter(d->device);
    (void)cudaStreamSynchronize(d->stream);
    for (int i = 0; i < d->nfree; i++)
        (void)cudaEventDestroy(d->ev_free[i]);
    (void)cudaStreamDestroy(d->stream);
    (void)cudaFreeHost((void *)d->words);
    (void)cudaGetLastError();
    dev_leave(d->device, old);
    free(d->ev_free);
    free(d);
}

/* Make stream wait until dx's word holds its value (or its ticket). */
static tacl_status_t join_stream(tacl__dev_exec_t *dx, cudaStream_t stream)
{
    tacl__dev_t *d = dx->d;
    cudaError_t e;

    if (d->memops) {
        CUresult r = drv_wait32((CUstream)stream,
                                d->words_dev + (CUdeviceptr)dx->word * 4,
                                dx->value, CU_STREAM_WAIT_VALUE_GEQ);
        if (r == CUDA_SUCCESS)
            return TACL_OK;
        TACL_WARN(COLL, "cuStreamWaitValue32 failed (CUresult %d): caller "
                  "streams wait through host functions from now on",
                  (int)r);
        d->memops = 0;
    }
    if (dx->ticket == NULL) {
        dx->ticket = calloc(1, sizeof(*dx->ticket));
        if (dx->ticket == NULL)
            return tacl__error(TACL_ERR_NO_MEMORY, COLL, "out of memory");
        atomic_store(&dx->ticket->refs, 1);
    }
    atomic_fetch_add(&dx->ticket->refs, 1);
    e = cudaLaunchHostFunc(stream, ticket_wait, dx->ticket);
    if (e != cudaSuccess) {
        atomic_fetch_sub(&dx->ticket->refs, 1);
        return cuda_fail("cudaLaunchHostFunc on the caller's stream", e);
    }
    return TACL_OK;
}

tacl_status_t tacl__dev_exec_new(tacl__dev_t *d, uint32_t nsteps,
                                 const tacl__dev_streams_t *streams,
                                 tacl__dev_exec_t **dx_p)
{
    size_t n = (size_t)nsteps + 1;
    tacl__dev_exec_t *dx = calloc(1, sizeof(*dx) + n * sizeof(uint32_t) +
                                         n * sizeof(cudaEvent_t));
    tacl_status_t status = TACL_OK;
    int old, ns = streams != NULL ? streams->n : 0;

    if (dx == NULL)
        return tacl__error(TACL_ERR_NO_MEMORY, COLL, "out of memory");
    dx->d = d;
    dx->word = -1;
    dx->pend_ev = (cudaEvent_t *)(dx + 1);
    dx->pend = (uint32_t *)(dx->pend_ev + n);
    old = dev_enter(d->device);
    for (int i = 0; i < (ns > 0 ? ns : 1) && status == TACL_OK; i++) {
        cudaStream_t s = ns > 0 ? (cudaStream_t)streams->s[i]
                                : cudaStreamLegacy;
        cudaError_t e;

        status = ev_get(d, &dx->gate[i]);
        if (status != TACL_OK)
            break;
        dx->ngate = i + 1;
        e = cudaEventRecord(dx->gate[i], s);
        if (e != cudaSuccess)
            status = cuda_fail("cudaEventRecord on the caller's stream", e);
    }
    if (status == TACL_OK && ns > 0) {
        if (d->nword_free == 0) {
            status = tacl__error(TACL_ERR_UNSUPPORTED, COLL,
                                 "more than %d operations on streams in "
                                 "flight on one context", DEV_WORDS);
        } else {
            dx->word = d->word_free[--d->nword_free];
            dx->value = ++d->last[dx->word];
            dx->streamed = 1;
        }
        for (int i = 0; i < ns && status == TACL_OK; i++)
            status = join_stream(dx, (cudaStream_t)streams->s[i]);
    }
    dev_leave(d->device, old);
    if (status != TACL_OK) {
        /* Streams already joined are released at once. */
        tacl__dev_exec_end(dx);
        tacl__dev_exec_free(dx);
        return status;
    }
    *dx_p = dx;
    return TACL_OK;
}

int tacl__dev_exec_gated(tacl__dev_exec_t *dx)
{
    for (int i = 0; i < dx->ngate; i++) {
        cudaError_t e;

        if (dx->gate[i] == NULL)
            continue;
        e = cudaEventQuery(dx->gate[i]);
        if (e == cudaErrorNotReady)
            return 1;
        if (e != cudaSuccess)
            return (int)cuda_fail("the caller's stream before the operation",
                                  e);
        ev_put(dx->d, dx->gate[i]);
        dx->gate[i] = NULL;
    }
    return 0;
}

static inline void *bptr(uint8_t *const *bufptr, tacl__bref_t r)
{
    return bufptr[r.buf] + r.off;
}

/* The kernels of a reduction step (see executor.c's run_reduce_step). */
static tacl_status_t dev_reduce(const tacl__step_t *st,
                                uint8_t *const *bufptr, cudaStream_t s)
{
    size_t count = st->bytes / tacl_dtype_size((tacl_dtype_t)st->dtype);
    uint8_t *dst = bptr(bufptr, st->dst), *src2 = bptr(bufptr, st->src2);
    tacl_status_t status;

    status = tacl__reduce_cuda(dst, bptr(bufptr, st->src), src2, count,
                               (tacl_dtype_t)st->dtype, (tacl_op_t)st->op, s);
    for (uint32_t i = 1; i < st->nsrc && status == TACL_OK; i++)
        status = tacl__reduce_cuda(dst, dst, src2 + i * st->stride, count,
                                   (tacl_dtype_t)st->dtype,
                                   (tacl_op_t)st->op, s);
    return status;
}

/* The kernels of a dequantize or dqrq step: an array of input pointers
 * in host memory, which the launch copies. */
static tacl_status_t dev_dequant(const tacl__step_t *st,
                                 uint8_t *const *bufptr, cudaStream_t s)
{
    const void *srcs[TACL_QUANT_CUDA_MAX_SRCS];
    uint8_t *src = bptr(bufptr, st->src);

    if (st->nsrc > TACL_QUANT_CUDA_MAX_SRCS)
        return tacl__error(TACL_ERR_UNSUPPORTED, COLL, "a dequantize step "
                           "of %u inputs on device memory (at most %d)",
                           st->nsrc, TACL_QUANT_CUDA_MAX_SRCS);
    for (int i = 0; i < st->nsrc; i++)
        srcs[i] = src + (uint64_t)i * st->stride;
    if (st->kind == TACL__STEP_DEQUANT)
        return tacl__dequant_reduce_cuda(srcs, st->nsrc, st->count,
                                         st->qblock, st->qbits,
                                         (tacl_dtype_t)st->dtype,
                                         bptr(bufptr, st->dst), st->arg, s);
    return tacl__dequant_reduce_quant_cuda(srcs, st->nsrc, st->count,
                                           st->qblock, st->qbits,
                                           bptr(bufptr, st->dst), s);
}

tacl_status_t tacl__dev_step(tacl__dev_exec_t *dx, uint32_t id,
                             const tacl__step_t *st, uint8_t *const *bufptr,
                             int *queued)
{
    tacl__dev_t *d = dx->d;
    cudaStream_t s = d->stream;
    tacl_status_t status = TACL_OK;
    cudaError_t e;
    int old;

    *queued = 0;
    if (st->kind == TACL__STEP_NOP ||
        (st->kind != TACL__STEP_QUANT && st->kind != TACL__STEP_DEQUANT &&
         st->kind != TACL__STEP_DQRQ && st->bytes == 0) ||
        (st->kind == TACL__STEP_COPY &&
         bptr(bufptr, st->dst) == bptr(bufptr, st->src)))
        return TACL_OK;
    old = dev_enter(d->device);
    switch (st->kind) {
    case TACL__STEP_COPY:
        e = cudaMemcpyAsync(bptr(bufptr, st->dst), bptr(bufptr, st->src),
                            st->bytes, cudaMemcpyDefault, s);
        if (e != cudaSuccess)
            status = cuda_fail("cudaMemcpyAsync of a copy step", e);
        break;
    case TACL__STEP_REDUCE:
        status = dev_reduce(st, bufptr, s);
        break;
    case TACL__STEP_DIV:
        status = tacl__div_cuda(bptr(bufptr, st->dst), bptr(bufptr, st->src),
                                st->bytes /
                                    tacl_dtype_size((tacl_dtype_t)st->dtype),
                                (tacl_dtype_t)st->dtype, st->arg, s);
        break;
    case TACL__STEP_QUANT:
        status = tacl__quantize_cuda(bptr(bufptr, st->src), st->count,
                                     (tacl_dtype_t)st->dtype, st->qblock,
                                     st->qbits, bptr(bufptr, st->dst), s);
        break;
    case TACL__STEP_DEQUANT:
    case TACL__STEP_DQRQ:
        status = dev_dequant(st, bufptr, s);
        break;
    default:
        status = tacl__error(TACL_ERR_INTERNAL, SCHED, "step %u of kind %d "
                             "is not a local step", id, st->kind);
        break;
    }
    if (status == TACL_OK) {
        cudaEvent_t ev;

        status = ev_get(d, &ev);
        if (status == TACL_OK) {
            e = cudaEventRecord(ev, s);
            if (e != cudaSuccess) {
                ev_put(d, ev);
                status = cuda_fail("cudaEventRecord after a kernel step", e);
            } else {
                dx->pend[dx->npend] = id;
                dx->pend_ev[dx->npend++] = ev;
                *queued = 1;
            }
        }
    }
    dev_leave(d->device, old);
    return status;
}

int tacl__dev_poll(tacl__dev_exec_t *dx, uint32_t *ids, int max,
                   tacl_status_t *status_p)
{
    int n = 0;

    for (int i = 0; i < dx->npend && n < max;) {
        cudaError_t e = cudaEventQuery(dx->pend_ev[i]);

        if (e == cudaErrorNotReady) {
            i++;
            continue;
        }
        if (e != cudaSuccess)
            *status_p = tacl__error(TACL_ERR_SYSTEM, COLL, "kernel step %u "
                                    "on CUDA device %d: %s", dx->pend[i],
                                    dx->d->device, cudaGetErrorString(e));
        (void)cudaGetLastError();
        ids[n++] = dx->pend[i];
        ev_put(dx->d, dx->pend_ev[i]);
        /* Keep the order of the rest: a stream runs them in order. */
        dx->npend--;
        memmove(&dx->pend[i], &dx->pend[i + 1],
                (size_t)(dx->npend - i) * sizeof(*dx->pend));
        memmove(&dx->pend_ev[i], &dx->pend_ev[i + 1],
                (size_t)(dx->npend - i) * sizeof(*dx->pend_ev));
    }
    return n;
}

void tacl__dev_exec_end(tacl__dev_exec_t *dx)
{
    if (dx->ended)
        return;
    dx->ended = 1;
    if (dx->word >= 0)
        __atomic_store_n(&dx->d->words[dx->word], dx->value,
                         __ATOMIC_RELEASE);
    if (dx->ticket != NULL)
        atomic_store(&dx->ticket->done, 1);
}

int tacl__dev_exec_streamed(const tacl__dev_exec_t *dx)
{
    return dx->streamed;
}

void tacl__dev_exec_free(tacl__dev_exec_t *dx)
{
    tacl__dev_t *d;

    if (dx == NULL)
        return;
    d = dx->d;
    tacl__dev_exec_end(dx);
    for (int i = 0; i < dx->ngate; i++)
        if (dx->gate[i] != NULL)
            ev_put(d, dx->gate[i]);
    /* Kernels still in flight (a failed execution) keep their events out
     * of the pool: they are destroyed, which CUDA defers until they fire. */
    for (int i = 0; i < dx->npend; i++)
        (void)cudaEventDestroy(dx->pend_ev[i]);
    if (dx->word >= 0)
        d->word_free[d->nword_free++] = dx->word;
    if (dx->ticket != NULL)
        ticket_drop(dx->ticket);
    free(dx);
}

#else /* !TACL_HAVE_CUDA */

/* Without CUDA: every pointer is host memory and nothing here runs. */
int tacl__dev_usable(void)
{
    return 0;
}

static tacl_status_t no_cuda(void)
{
    return tacl__error(TACL_ERR_UNSUPPORTED, COLL, "tacl was built without "
                       "CUDA");
}

tacl_memtype_t tacl__dev_ptr_type(const void *ptr, int *device_p)
{
    (void)ptr;
    *device_p = -1;
    return TACL_MEM_HOST;
}

int tacl__dev_current(char *why, size_t len)
{
    snprintf(why, len, "tacl was built without CUDA");
    return -1;
}

void tacl__dev_set_current(int device)
{
    (void)device;
}

tacl_status_t tacl__dev_check_stream(void *stream, int device,
                                     const char *what)
{
    (void)stream;
    (void)device;
    (void)what;
    return no_cuda();
}

void *tacl__dev_malloc(uint64_t size, int device)
{
    (void)size;
    (void)device;
    return NULL;
}

void tacl__dev_free(void *ptr, int device)
{
    (void)ptr;
    (void)device;
}

tacl_status_t tacl__dev_get(tacl__dev_t **d_p, int device)
{
    (void)d_p;
    (void)device;
    return no_cuda();
}

void tacl__dev_destroy(tacl__dev_t *d)
{
    (void)d;
}

tacl_status_t tacl__dev_exec_new(tacl__dev_t *d, uint32_t nsteps,
                                 const tacl__dev_streams_t *streams,
                                 tacl__dev_exec_t **dx_p)
{
    (void)d;
    (void)nsteps;
    (void)streams;
    (void)dx_p;
    return no_cuda();
}

int tacl__dev_exec_gated(tacl__dev_exec_t *dx)
{
    (void)dx;
    return 0;
}

tacl_status_t tacl__dev_step(tacl__dev_exec_t *dx, uint32_t id,
                             const tacl__step_t *st, uint8_t *const *bufptr,
                             int *queued)
{
    (void)dx;
    (void)id;
    (void)st;
    (void)bufptr;
    *queued = 0;
    return no_cuda();
}

int tacl__dev_poll(tacl__dev_exec_t *dx, uint32_t *ids, int max,
                   tacl_status_t *status_p)
{
    (void)dx;
    (void)ids;
    (void)max;
    (void)status_p;
    return 0;
}

void tacl__dev_exec_end(tacl__dev_exec_t *dx)
{
    (void)dx;
}

int tacl__dev_exec_streamed(const tacl__dev_exec_t *dx)
{
    (void)dx;
    return 0;
}

void tacl__dev_exec_free(tacl__dev_exec_t *dx)
{
    (void)dx;
}

#endif /* TACL_HAVE_CUDA */
