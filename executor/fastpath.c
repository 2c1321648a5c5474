/*
 * The fast engine (fastpath.h): the shared area, its publishing protocol,
 * and a call run alone, without the context lock.  Calls queued behind
 * split ones are fast_queue.c's.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "config.h"
#include "fast_int.h"
#include "log.h"
#include "reduce.h"
#include "wait.h"

#define FAST_MAGIC 0x7461636c66617374ull /* "taclfast" */
/* Longest sleep on a peer before the wait looks around again. */
#define FAST_SLEEP_NS 1000000L

/* The area's first page. */
typedef struct {
    uint64_t magic;
    uint64_t size;             /* ranks */
    uint64_t cap;              /* bytes of each slot */
} fast_hdr_t;

static size_t round_line(size_t x)
{
    return (x + FAST_LINE - 1) / FAST_LINE * FAST_LINE;
}

static size_t area_len(int size, size_t cap)
{
    return 4096 + (size_t)size * (sizeof(fast_flag_t) +
                                  sizeof(fast_sleep_t) +
                                  FAST_RING * sizeof(fast_rec_t)) +
           (size_t)size * FAST_DEPTH * round_line(cap);
}

static void lay_out(tacl__fast_t *f)
{
    f->flags = (fast_flag_t *)((char *)f->base + 4096);
    f->sleep = (fast_sleep_t *)(f->flags + f->size);
    f->recs = (fast_rec_t *)(f->sleep + f->size);
    f->data = (uint8_t *)(f->recs + (size_t)f->size * FAST_RING);
}

/* Where rank's input of call n lies: its record when it has at most
 * FAST_SMALL bytes (the same size on every rank), else its large slot. */
static uint8_t *slot(const tacl__fast_t *f, int rank, uint64_t n,
                     size_t bytes)
{
    if (bytes <= FAST_SMALL)
        return fast_rec(f, rank, n)->data;
    return f->data +
           ((size_t)rank * FAST_DEPTH + n % FAST_DEPTH) * round_line(f->cap);
}

static tacl_status_t map_area(tacl__fast_t *f, int fd, int create)
{
    if (create && ftruncate(fd, (off_t)f->len) != 0)
        return tacl__error(TACL_ERR_SYSTEM, SHM,
                           "sizing the fast-path area %s (%zu bytes) failed: "
                           "%m; check /dev/shm", f->name, f->len);
    f->base = mmap(NULL, f->len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (f->base == MAP_FAILED) {
        f->base = NULL;
        return tacl__error(TACL_ERR_SYSTEM, SHM,
                           "mapping the fast-path area %s failed: %m",
                           f->name);
    }
    lay_out(f);
    return TACL_OK;
}

tacl_status_t tacl__fast_create(int rank, int size, size_t cap,
                                char name[TACL__FAST_NAME_LEN],
                                tacl__fast_t **fast_p)
{
    static _Atomic unsigned serial;
    tacl__fast_t *f = calloc(1, sizeof(*f));
    fast_hdr_t *hdr;
    tacl_status_t status;
    int fd;

    *fast_p = NULL;
    if (f == NULL)
        return tacl__error(TACL_ERR_NO_MEMORY, SHM, "out of memory");
    f->rank = rank;
    f->size = size;
    f->cap = cap;
    f->len = area_len(size, cap);
    f->owner = 1;
    atomic_init(&f->refs, 1);
    snprintf(f->name, sizeof(f->name), "/tacl-fast-%d-%u-%llx", (int)getpid(),
             atomic_fetch_add(&serial, 1),
             (unsigned long long)(tacl__now_ns() & 0xffffffffull));
    fd = shm_open(f->name, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0) {
        status = tacl__error(TACL_ERR_SYSTEM, SHM,
                             "shm_open(%s) failed: %m; check /dev/shm",
                             f->name);
        free(f);
        return status;
    }
    f->linked = 1;
    status = map_area(f, fd, 1);
    close(fd);
    if (status != TACL_OK) {
        tacl__fast_free(f);
        return status;
    }
    hdr = f->base;
    hdr->size = (uint64_t)size;
    hdr->cap = cap;
    atomic_store_explicit((_Atomic uint64_t *)&hdr->magic, FAST_MAGIC,
                          memory_order_release);
    memcpy(name, f->name, TACL__FAST_NAME_LEN);
    *fast_p = f;
    return TACL_OK;
}

tacl_status_t tacl__fast_attach(const char *name, int rank, int size,
                                tacl__fast_t **fast_p)
{
    tacl__fast_t *f = calloc(1, sizeof(*f));
    fast_hdr_t hdr;
    tacl_status_t status;
    int fd;

    *fast_p = NULL;
    if (f == NULL)
        return tacl__error(TACL_ERR_NO_MEMORY, SHM, "out of memory");
    snprintf(f->name, sizeof(f->name), "%s", name);
    fd = shm_open(f->name, O_RDWR, 0);
    if (fd < 0) {
        status = tacl__error(TACL_ERR_SYSTEM, SHM,
                             "shm_open(%s) failed: %m", f->name);
        free(f);
        return status;
    }
    if (pread(fd, &hdr, sizeof(hdr), 0) != (ssize_t)sizeof(hdr) ||
        hdr.magic != FAST_MAGIC || hdr.size != (uint64_t)size ||
        hdr.cap == 0 || hdr.cap > (1u << 30)) {
        close(fd);
        free(f);
        return tacl__error(TACL_ERR_SYSTEM, SHM,
                           "the fast-path area %s is not one of %d ranks",
                           name, size);
    }
    f->rank = rank;
    f->size = size;
    atomic_init(&f->refs, 1);
    f->cap = (size_t)hdr.cap;
    f->len = area_len(size, f->cap);
    status = map_area(f, fd, 0);
    close(fd);
    if (status != TACL_OK) {
        free(f);
        return status;
    }
    *fast_p = f;
    return TACL_OK;
}

void tacl__fast_unlink(tacl__fast_t *fast)
{
    if (fast != NULL && fast->owner && fast->linked) {
        shm_unlink(fast->name);
        fast->linked = 0;
    }
}

void tacl__fast_free(tacl__fast_t *fast)
{
    if (fast == NULL)
        return;
    tacl__fast_unlink(fast);
    /* Split calls' executions hold the area too: the last one unmaps. */
    if (atomic_fetch_sub(&fast->refs, 1) > 1)
        return;
    if (fast->base != NULL)
        munmap(fast->base, fast->len);
    free(fast);
}

int tacl__fast_light_ready(void)
{
    /* Registering twice is harmless; the test call says it works. */
    return syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED,
                   0, 0) == 0 &&
           syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL_EXPEDITED, 0,
                   0) == 0;
}

void tacl__fast_set_light(tacl__fast_t *fast, int on)
{
    fast->light = on;
}

size_t tacl__fast_cap(const tacl__fast_t *fast)
{
    return fast->cap;
}

tacl__fast_op_t tacl__fast_op_of(const tacl__coll_args_t *a)
{
    tacl__fast_op_t op = {.coll = a->type, .sendbuf = a->sendbuf,
                          .recvbuf = a->recvbuf, .count = a->count,
                          .esize = tacl_dtype_size(a->dtype),
                          .dtype = a->dtype, .op = a->op, .root = a->root,
                          .sig = tacl__op_sig_of(a)};

    op.hash = (uint32_t)tacl__op_sig_hash(&op.sig);
    return op;
}

static size_t elem_bytes(const tacl__fast_op_t *op)
{
    return op->count * op->esize;
}

size_t tacl__fast_msg_bytes(const tacl__fast_op_t *op, int size)
{
    switch (op->coll) {
    case TACL_COLL_BARRIER:
        return 0;
    case TACL_COLL_REDUCE_SCATTER:
        return elem_bytes(op) * (size_t)size;
    default:
        return elem_bytes(op);
    }
}

size_t tacl__fast_in_bytes(const tacl__fast_op_t *op, int rank, int size)
{
    if (op->coll == TACL_COLL_BROADCAST && rank != op->root)
        return 0;
    return tacl__fast_msg_bytes(op, size);
}

void tacl__fast_count(tacl__xcomm_t *xc, int tl, const tacl__fast_op_t *op,
                      int rank, int size)
{
    uint64_t bytes = tacl__fast_in_bytes(op, rank, size);
    uint64_t readers;

    if (bytes == 0)
        return;
    /* The peers that read this rank's slot. */
    readers = op->coll == TACL_COLL_REDUCE ? (rank != op->root)
                                            : (uint64_t)size - 1;
    if (readers == 0)
        return;
    if (tl >= 0 && tl < TACL_MAX_TRANSPORTS) {
        xc->counters.transports[tl].bytes += bytes * readers;
        xc->counters.transports[tl].messages += readers;
    }
    xc->counters.links[TACL_LINK_HOST].bytes += bytes * readers;
    xc->counters.links[TACL_LINK_HOST].messages += readers;
}

/*
 * Publishing and sleeping.  A sleeper registers (sleepers, want), runs a
 * full fence, reads wake_seq, and only then reads the flag or stamp it
 * waits for, sleeping on wake_seq's value when they are still short.  A
 * publisher stores its flag or stamp, runs a full fence, and when it
 * sees a sleeper waiting for a call up to what it published, bumps
 * wake_seq and wakes the futex.  Either the publisher's fence came first
 * and the sleeper reads the new flag or stamp, or the sleeper's did and
 * the publisher sees the sleeper; a bump between the sleeper's read of
 * wake_seq and its sleep makes the futex return at once.  With f->light
 * the publisher runs no fence per call: the sleeper's global expedited
 * membarrier makes every running thread of the registered processes
 * (the publisher's among them) execute one, which serves the same.
 */
static void wake_sleepers(tacl__fast_t *f, uint64_t n)
{
    fast_sleep_t *s = &f->sleep[f->rank];
    uint64_t want;

    if (!f->light) {
#ifdef __SANITIZE_THREAD__
        /* ThreadSanitizer has no fences (gcc refuses them, -Wtsan): a
         * seq_cst read-modify-write of the word read next orders the
         * publication before that read the same way. */
        atomic_fetch_add_explicit(&s->sleepers, 0, memory_order_seq_cst);
#else
        atomic_thread_fence(memory_order_seq_cst);
#endif
    }
    if (atomic_load_explicit(&s->sleepers, memory_order_relaxed) == 0)
        return;
    want = atomic_load(&s->want);
    if (want > n)
        return;
    /* The sleepers still short of their call lower want again. */
    atomic_compare_exchange_strong(&s->want, &want, UINT64_MAX);
    atomic_fetch_add_explicit(&s->wake_seq, 1, memory_order_release);
    syscall(SYS_futex, &s->wake_seq, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

void tacl__fast_stamp(tacl__fast_t *f, uint64_t n, const tacl__fast_op_t *op)
{
    fast_rec_t *r = fast_rec(f, f->rank, n);
    size_t in = tacl__fast_in_bytes(op, f->rank, f->size);

    if (in > 0)
        memcpy(slot(f, f->rank, n, in), op->sendbuf, in);
    r->sig = op->hash;
    r->full = op->sig;
    atomic_store_explicit(&r->stamp, n, memory_order_release);
    f->stamped = n;
}

void tacl__fast_announce(tacl__fast_t *f)
{
    uint64_t flag = TACL_MIN(f->stamped, f->done + 1);

    /* Readers need only release (they acquire the stamp or the flag). */
    if (flag > atomic_load_explicit(&f->flags[f->rank].seq,
                                    memory_order_relaxed))
        atomic_store_explicit(&f->flags[f->rank].seq, flag,
                              memory_order_release);
    wake_sleepers(f, f->stamped);
}

void tacl__fast_sleep_on(const tacl__fast_t *f, int rank, uint64_t n,
                         int data)
{
    struct timespec ts = {0, FAST_SLEEP_NS};
    fast_sleep_t *s = &f->sleep[rank];
    uint64_t want;
    uint32_t seq;

    atomic_fetch_add(&s->sleepers, 1);
    want = atomic_load(&s->want);
    while (want > n && !atomic_compare_exchange_weak(&s->want, &want, n))
        ;
    if (f->light)
        syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL_EXPEDITED, 0, 0);
    seq = atomic_load_explicit(&s->wake_seq, memory_order_acquire);
    if (!fast_peer_moved(f, rank, n, data))
        syscall(SYS_futex, &s->wake_seq, FUTEX_WAIT, seq, &ts, NULL, 0);
    atomic_fetch_sub(&s->sleepers, 1);
}

int tacl__fast_flags_at(tacl__fast_t *f, uint64_t n, int *rank_p)
{
    uint64_t least = UINT64_MAX;

    if (f->all_seen >= n)
        return 1;
    for (int r = 0; r < f->size; r++) {
        uint64_t seen;

        if (r == f->rank)
            continue;
        seen = fast_flag_of(f, r);
        if (seen < n) {
            *rank_p = r;
            return 0;
        }
        least = TACL_MIN(least, seen);
    }
    f->all_seen = TACL_MAX(least, n);
    return 1;
}

/* The ranks whose input call n of op reads here: all, one, or none. */
static int reads_from(const tacl__fast_t *f, const tacl__fast_op_t *op,
                      int *one_p)
{
    *one_p = -1;
    switch (op->coll) {
    case TACL_COLL_BROADCAST:
        if (f->rank == op->root)
            return 0;
        *one_p = op->root;
        return 1;
    case TACL_COLL_REDUCE:
        return f->rank == op->root ? f->size - 1 : 0;
    default:
        return f->size - 1;
    }
}

/* 1 when rank's call n is stamped with op's signature, 0 not yet, -1
 * stamped with another. */
static int input_ready(const tacl__fast_t *f, int rank, uint64_t n,
                       const tacl__fast_op_t *op)
{
    /* A record is not stamped again before this rank passed call n (its
     * owner waits for that), so a stamp below n is an older call's. */
    if (fast_stamp_of(f, rank, n) < n)
        return 0;
    return fast_rec(f, rank, n)->sig == op->hash ? 1 : -1;
}

int tacl__fast_inputs_ready(const tacl__fast_t *f, uint64_t n,
                            const tacl__fast_op_t *op, int *rank_p)
{
    int one, nreads = reads_from(f, op, &one);

    if (nreads == 0)
        return 1;
    for (int r = 0; r < f->size; r++) {
        int ready;

        if (r == f->rank || (one >= 0 && r != one))
            continue;
        ready = input_ready(f, r, n, op);
        if (ready <= 0) {
            *rank_p = r;
            return ready;
        }
    }
    return 1;
}

/* A peer called something else in this call: the caller's error, as a
 * message of the wrong length is on the normal path. */
tacl_status_t tacl__fast_mismatch(const tacl__fast_t *f, uint64_t n,
                                  const tacl__fast_op_t *op, int rank)
{
    const tacl__op_sig_t *theirs = &fast_rec(f, rank, n)->full;
    tacl__sig_field_t field = tacl__op_sig_diff(theirs, &op->sig);
    char a[32], b[32];

    return tacl__error(TACL_ERR_INVALID_USAGE, COLL,
                       "%s: rank %d called it with %s %s where this rank "
                       "has %s: the ranks made different calls "
                       "(TACL_CHECK=1 names the difference on every path)",
                       tacl_coll_name(op->coll), rank,
                       tacl__sig_field_name(field),
                       tacl__sig_field_value(theirs, field, a, sizeof(a)),
                       tacl__sig_field_value(&op->sig, field, b, sizeof(b)));
}

/* dst = the rank-ordered reduction of every slot's bytes at off. */
static tacl_status_t reduce_slots(const tacl__fast_t *f, uint64_t n,
                                  size_t in, size_t off, void *dst,
                                  const tacl__fast_op_t *op)
{
    tacl_op_t eop = op->op == TACL_AVG ? TACL_SUM : op->op;
    tacl_status_t status;

    if (op->count == 0)
        return TACL_OK;

    status = tacl__reduce_cpu(dst, slot(f, 0, n, in) + off,
                              slot(f, 1, n, in) + off,
                              op->count, op->dtype, eop);
    for (int r = 2; r < f->size && status == TACL_OK; r++)
        status = tacl__reduce_cpu(dst, dst, slot(f, r, n, in) + off,
                                  op->count,
                                  op->dtype, eop);
    if (status == TACL_OK && op->op == TACL_AVG)
        status = tacl__div_cpu(dst, dst, op->count, op->dtype,
                               (uint32_t)f->size);
    return status;
}

tacl_status_t tacl__fast_compute(const tacl__fast_t *f, uint64_t n,
                                 const tacl__fast_op_t *op)
{
    size_t in = tacl__fast_in_bytes(op, f->rank, f->size);
    size_t block = elem_bytes(op);
    int me = f->rank;

    switch (op->coll) {
    case TACL_COLL_BARRIER:
        return TACL_OK;
    case TACL_COLL_ALLREDUCE:
        return reduce_slots(f, n, in, 0, op->recvbuf, op);
    case TACL_COLL_REDUCE:
        return me == op->root ? reduce_slots(f, n, in, 0, op->recvbuf, op)
                              : TACL_OK;
    case TACL_COLL_REDUCE_SCATTER:
        return reduce_slots(f, n, in, (size_t)me * block, op->recvbuf, op);
    case TACL_COLL_ALLGATHER:
        for (int r = 0; r < f->size && block > 0; r++)
            memcpy((char *)op->recvbuf + (size_t)r * block,
                   slot(f, r, n, block), block);
        return TACL_OK;
    case TACL_COLL_BROADCAST:
        if (block == 0)
            return TACL_OK;
        if (me != op->root)
            memcpy(op->recvbuf, slot(f, op->root, n, block), block);
        else if (op->recvbuf != op->sendbuf)
            memcpy(op->recvbuf, op->sendbuf, block);
        return TACL_OK;
    default:
        return tacl__error(TACL_ERR_INTERNAL, COLL,
                           "the fast engine does not run %s",
                           tacl_coll_name(op->coll));
    }
}

/*
 * A call run alone: every earlier call of this rank is done, and nobody
 * else touches the area's state of this rank until it returns (the
 * caller saw no queued call under the context lock).
 */
typedef struct {
    tacl__fast_t *f;
    tacl__xcomm_t *xc;
    int waiting;               /* pol started: the first poll without an
                                  answer */
    tacl__waiter_t pol;
} fast_wait_t;

/* The context failed (abort, a peer's failure): its error, recorded. */
static tacl_status_t fatal_error(tacl__ctx_t *ctx)
{
    return tacl__error(ctx->fatal, COLL, "%s", ctx->fatal_msg);
}

/*
 * Nothing to read yet: wait as the policy says (wait.h), progressing the
 * context's schedules meanwhile, and sleep on rank once it says sleep,
 * after asking whether the wait must end (a dead peer, the
 * communicator's timeout).
 */
static tacl_status_t wait_idle(fast_wait_t *w, int rank, uint64_t n,
                               int data)
{
    tacl__ctx_t *ctx = w->xc->ctx;
    tacl__wait_step_t step;
    tacl_status_t status;

    if (ctx->fatal != TACL_OK)
        return fatal_error(ctx);
    if (!w->waiting) {
        tacl__wait_init(&w->pol, ctx);
        w->waiting = 1;
    }
    step = tacl__wait_idle(&w->pol);
    if (step == TACL__WAIT_SPIN)
        return TACL_OK;
    /* Operations of the normal path in flight on the context (_nb calls
     * of this or another communicator) move on meanwhile: a peer may
     * need them to reach this call. */
    if (pthread_mutex_trylock(&ctx->lock) == 0) {
        if (ctx->active != NULL)
            tacl__ctx_progress_locked(ctx);
        pthread_mutex_unlock(&ctx->lock);
    }
    if (step == TACL__WAIT_YIELD)
        return TACL_OK;
    pthread_mutex_lock(&ctx->lock);
    status = tacl__wait_bound(&w->pol, ctx, w->xc);
    pthread_mutex_unlock(&ctx->lock);
    if (status != TACL_OK)
        return status;
    tacl__fast_sleep_on(w->f, rank, n, data);
    return TACL_OK;
}

tacl_status_t tacl__fast_run(tacl__fast_t *f, tacl__xcomm_t *xc,
                             const tacl__fast_op_t *op, uint64_t n)
{
    fast_wait_t w = {.f = f, .xc = xc};
    uint64_t depth = fast_depth(f, op);
    tacl_status_t status;
    int rank, ready;

    /* The record (and a large slot) this call writes was last read in
     * call n - FAST_RING (n - FAST_DEPTH): every peer is past it once its
     * flag reached the call after.  A rank that must sleep for it sleeps
     * until the peer is halfway from there to this call, so that it then
     * runs many calls without waiting (and without waking) again. */
    while (n > depth && !tacl__fast_flags_at(f, n - depth + 1, &rank)) {
        uint64_t need = n - depth + 1;

        status = wait_idle(&w, rank, need + (n - need) / 2, 0);
        if (status != TACL_OK)
            return status;
    }
    tacl__fast_stamp(f, n, op);
    tacl__fast_announce(f);
    while ((ready = tacl__fast_inputs_ready(f, n, op, &rank)) == 0) {
        status = wait_idle(&w, rank, n, 1);
        if (status != TACL_OK)
            return status;
    }
    if (ready < 0) {
        tacl__ctx_t *ctx = xc->ctx;

        status = tacl__fast_mismatch(f, n, op, rank);
        pthread_mutex_lock(&ctx->lock);
        tacl__ctx_set_fatal(ctx, status);
        pthread_mutex_unlock(&ctx->lock);
        return status;
    }
    status = tacl__fast_compute(f, n, op);
    f->done = n;
    return status;
}
