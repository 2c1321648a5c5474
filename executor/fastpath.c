/*
 * The small-message fast path (fastpath.h): the shared area and the
 * collectives that run in it.
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
#include "fastpath.h"
#include "log.h"
#include "wait.h"
#include "reduce.h"

#define FAST_MAGIC 0x7461636c66617374ull /* "taclfast" */
#define FAST_LINE 64u
/* Longest sleep on a peer's flag before the wait looks around again. */
#define FAST_SLEEP_NS 1000000L

/* The area's first page. */
typedef struct {
    uint64_t magic;
    uint64_t size;             /* ranks */
    uint64_t cap;              /* bytes of each slot */
} fast_hdr_t;

/* Large slots (cap bytes) per rank, used in turn: a call whose input does
 * not fit a record may run this many calls minus one ahead of a peer
 * that does not wait for it. */
#define FAST_DEPTH 4
/* Records per rank, one per call in turn (n % FAST_RING): each holds the
 * call's stamp and signature, and its input when that has at most
 * FAST_SMALL bytes, so a small call may run FAST_RING - 1 calls ahead. */
#define FAST_RING 64
/* Bytes of one record (four cache lines). */
#define FAST_REC 256u

typedef struct {
    _Alignas(FAST_LINE) _Atomic uint64_t seq; /* last call published */
} fast_flag_t;

/* Call n's record: the stamp is written (release) after the signature
 * and the data, and before the flag, so a reader that sees the stamp at
 * n has both -- and data of up to 48 bytes in the same cache line.  The
 * whole signature, at the record's end, is read only when the hashes
 * differ, to say how. */
typedef struct {
    _Alignas(FAST_LINE) _Atomic uint64_t stamp;
    uint32_t sig;              /* the signature's hash, low half */
    uint32_t pad;
    uint8_t data[FAST_REC - 16 - sizeof(tacl__op_sig_t)];
    tacl__op_sig_t full;       /* the signature itself */
} fast_rec_t;

#define FAST_SMALL (FAST_REC - 16u - (unsigned)sizeof(tacl__op_sig_t))

_Static_assert(sizeof(fast_flag_t) == FAST_LINE,
               "a fast-path flag fills one cache line");
_Static_assert(sizeof(fast_rec_t) == FAST_REC,
               "a fast-path record has FAST_REC bytes");

/* Peers asleep on a rank's flag (apart from the flag, which only its
 * owner writes): the owner wakes them when it publishes a call at or past
 * the least one they wait for (want), not at every call: a broadcast's
 * root asleep until its receivers freed half its ring costs them no
 * system call per call. */
typedef struct {
    _Alignas(FAST_LINE) _Atomic uint32_t sleepers;
    _Atomic uint64_t want;     /* least call a sleeper waits for */
} fast_sleep_t;

struct tacl__fast {
    void *base;
    size_t len;
    int rank, size;
    size_t cap;
    fast_flag_t *flags;        /* size of them */
    fast_sleep_t *sleep;       /* size of them */
    fast_rec_t *recs;          /* [rank][FAST_RING] */
    uint8_t *data;             /* [rank][FAST_DEPTH][cap] */
    uint64_t n;                /* calls run so far */
    uint64_t all_seen;         /* every flag was seen at this or above */
    int light;                 /* publish with a release store (every
                                  rank may use the global fence) */
    int owner;                 /* created it: removes the name */
    int linked;                /* the name still exists */
    char name[TACL__FAST_NAME_LEN];
};

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

static fast_rec_t *rec(const tacl__fast_t *f, int rank, uint64_t n)
{
    return &f->recs[(size_t)rank * FAST_RING + n % FAST_RING];
}

/* Where rank's input of call n lies: its record when it has at most
 * FAST_SMALL bytes (the same size on every rank), else its large slot. */
static uint8_t *slot(const tacl__fast_t *f, int rank, uint64_t n,
                     size_t bytes)
{
    if (bytes <= FAST_SMALL)
        return rec(f, rank, n)->data;
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

/* How one call waits: the wait policy's state (wait.h), from the first
 * poll without an answer. */
typedef struct {
    tacl__fast_t *f;
    tacl__xcomm_t *xc;
    uint64_t n;                /* the call */
    const tacl__op_sig_t *sig; /* its signature on this rank */
    uint32_t hash;             /* the signature's hash, low half */
    int waiting;               /* pol started */
    tacl__waiter_t pol;
} fast_wait_t;

static void wait_init(fast_wait_t *w, tacl__fast_t *f, tacl__xcomm_t *xc)
{
    w->f = f;
    w->xc = xc;
    w->waiting = 0;
}

/* The context failed (abort, a peer's failure): its error, recorded. */
static tacl_status_t fatal_error(tacl__ctx_t *ctx)
{
    tacl_status_t status = ctx->fatal;

    return tacl__error(status, COLL, "%s", ctx->fatal_msg);
}

/* The flag's low half: what a futex waits on (little-endian). */
static uint32_t *flag_word(const tacl__fast_t *f, int rank)
{
    return (uint32_t *)&f->flags[rank].seq;
}

/* Sleep until rank's flag reaches n (or 1 ms passes, or a wake for a
 * lower call of another sleeper: the caller looks again). */
static void sleep_on(const tacl__fast_t *f, int rank, uint64_t n)
{
    struct timespec ts = {0, FAST_SLEEP_NS};
    fast_sleep_t *s = &f->sleep[rank];
    uint64_t seen, want;

    /* The seq_cst increment and want's lowering order them before the
     * flag's read; the owner's publishing must order its flag before
     * reading sleepers and want, so that one of the two sees the other.
     * With f->light the owner's flag store is a plain release store (no
     * fence per call): the global expedited membarrier here makes every
     * running thread of the registered processes (the owner's among
     * them) execute a full fence, so either its flag store came before
     * that fence and the read below sees it, or its reads of sleepers
     * and want come after it and see ours.  (A wake that resets want
     * just as a sleeper with a later call found it low enough may leave
     * that sleeper to its 1 ms timeout.) */
    atomic_fetch_add(&s->sleepers, 1);
    want = atomic_load(&s->want);
    while (want > n && !atomic_compare_exchange_weak(&s->want, &want, n))
        ;
    if (f->light)
        syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL_EXPEDITED, 0, 0);
    seen = atomic_load(&f->flags[rank].seq);
    if (seen < n)
        syscall(SYS_futex, flag_word(f, rank), FUTEX_WAIT, (uint32_t)seen,
                &ts, NULL, 0);
    atomic_fetch_sub(&s->sleepers, 1);
}

/* Publish call n (w's signature) as this rank's, its input in place:
 * stamp its record, move the flag, wake the peers asleep on it. */
static void publish(tacl__fast_t *f, uint64_t n, const fast_wait_t *w)
{
    fast_rec_t *r = rec(f, f->rank, n);
    fast_sleep_t *s = &f->sleep[f->rank];
    uint64_t want;

    r->sig = w->hash;
    r->full = *w->sig;
    atomic_store_explicit(&r->stamp, n, memory_order_release);
    /* Readers need only release (they acquire the stamp or the flag);
     * the store-load order against a sleeper (sleep_on) comes from the
     * sleeper's membarrier when f->light, else from this seq_cst store,
     * a full fence that waits for the record's stores to drain. */
    if (f->light)
        atomic_store_explicit(&f->flags[f->rank].seq, n,
                              memory_order_release);
    else
        atomic_store(&f->flags[f->rank].seq, n);
    if (atomic_load_explicit(&s->sleepers, memory_order_relaxed) == 0)
        return;
    want = atomic_load(&s->want);
    if (want > n)
        return;
    /* The sleepers still short of their call lower want again. */
    atomic_compare_exchange_strong(&s->want, &want, UINT64_MAX);
    syscall(SYS_futex, flag_word(f, f->rank), FUTEX_WAKE, INT_MAX, NULL,
            NULL, 0);
}

/*
 * Nothing to read yet (rank's flag is below n): wait as the policy says
 * (wait.h), progressing the context's schedules meanwhile, and sleep on
 * rank's flag once it says sleep, after asking whether the wait must end
 * (a dead peer, the communicator's timeout).
 */
static tacl_status_t wait_idle(fast_wait_t *w, int rank, uint64_t n,
                               uint64_t sleep_to)
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
    sleep_on(w->f, rank, sleep_to);
    return TACL_OK;
}

static uint64_t flag_of(const tacl__fast_t *f, int rank)
{
    return atomic_load_explicit(&f->flags[rank].seq, memory_order_acquire);
}

/* A peer called something else in this call: the caller's error, as a
 * message of the wrong length is on the normal path. */
static tacl_status_t mismatch(fast_wait_t *w, int rank)
{
    const tacl__op_sig_t *theirs = &rec(w->f, rank, w->n)->full;
    tacl__sig_field_t f = tacl__op_sig_diff(theirs, w->sig);
    tacl__ctx_t *ctx = w->xc->ctx;
    char a[32], b[32];

    tacl__error(TACL_ERR_INVALID_USAGE, COLL,
                "%s: rank %d called it with %s %s where this rank has %s: "
                "the ranks made different calls (TACL_CHECK=1 names the "
                "difference on every path)",
                tacl_coll_name((tacl_coll_t)w->sig->coll), rank,
                tacl__sig_field_name(f),
                tacl__sig_field_value(theirs, f, a, sizeof(a)),
                tacl__sig_field_value(w->sig, f, b, sizeof(b)));
    pthread_mutex_lock(&ctx->lock);
    tacl__ctx_set_fatal(ctx, TACL_ERR_INVALID_USAGE);
    pthread_mutex_unlock(&ctx->lock);
    return TACL_ERR_INVALID_USAGE;
}

static uint64_t stamp_of(const tacl__fast_t *f, int rank, uint64_t n)
{
    return atomic_load_explicit(&rec(f, rank, n)->stamp,
                                memory_order_acquire);
}

/*
 * Wait until rank's flag reached n (a slot's reuse), or for this call
 * until rank's record of it is stamped, and check what rank called.  The
 * stamp lies in the record's first line, with the signature and a small
 * input: one line to bring over.  It is stamped before the flag moves,
 * so sleeping on the flag (wait_idle) cannot miss it.  Returns the flag
 * seen (at least n) through seen_p when not NULL.
 */
static tacl_status_t wait_one(fast_wait_t *w, int rank, uint64_t n,
                              uint64_t *seen_p)
{
    uint64_t seen;
    uint32_t theirs;

    if (n != w->n) {
        /* A slot's reuse: a rank that must sleep for it sleeps until the
         * peer is halfway from n to this call, so that it then runs many
         * calls without waiting (and without waking) again. */
        uint64_t sleep_to = n + (w->n - n) / 2;

        while ((seen = flag_of(w->f, rank)) < n) {
            tacl_status_t status = wait_idle(w, rank, n, sleep_to);
            if (status != TACL_OK)
                return status;
        }
        if (seen_p != NULL)
            *seen_p = seen;
        return TACL_OK;
    }
    /* A record is not stamped again before this rank passed call n (its
     * owner waits for that), so a stamp below n is an older call's. */
    while (stamp_of(w->f, rank, n) < n) {
        tacl_status_t status = wait_idle(w, rank, n, n);
        if (status != TACL_OK)
            return status;
    }
    if (seen_p != NULL)
        *seen_p = n;
    theirs = rec(w->f, rank, n)->sig;
    return theirs == w->hash ? TACL_OK : mismatch(w, rank);
}

/* Wait until every rank's flag reached n (for this call: every record
 * of it is stamped).  What the flags showed is kept, so that a rank far
 * ahead (a broadcast's root) reads its peers' flags rarely. */
static tacl_status_t wait_all(fast_wait_t *w, uint64_t n)
{
    tacl__fast_t *f = w->f;
    uint64_t least = UINT64_MAX;

    if (f->all_seen >= n)
        return TACL_OK;
    for (int r = 0; r < f->size; r++) {
        uint64_t seen = UINT64_MAX; /* this rank: past every call */
        tacl_status_t status = r == f->rank ? TACL_OK
                                            : wait_one(w, r, n, &seen);
        if (status != TACL_OK)
            return status;
        least = TACL_MIN(least, seen);
    }
    f->all_seen = TACL_MAX(least, n);
    return TACL_OK;
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

tacl_status_t tacl__fast_run(tacl__fast_t *f, tacl__xcomm_t *xc,
                             const tacl__fast_op_t *op)
{
    uint64_t n = ++f->n;
    int me = f->rank;
    size_t in = tacl__fast_in_bytes(op, me, f->size);
    size_t block = elem_bytes(op);
    uint64_t depth;
    fast_wait_t w;
    tacl_status_t status = TACL_OK;

    wait_init(&w, f, xc);
    w.n = n;
    w.sig = &op->sig;
    w.hash = op->hash;
    /* The record (and a large slot) this call writes was last read in
     * call n - FAST_RING (n - FAST_DEPTH): every peer is past it once it
     * began the call after.  A large slot is reused sooner than a record,
     * so the record is free too once it is. */
    depth = in > FAST_SMALL ? FAST_DEPTH : FAST_RING;
    status = n > depth ? wait_all(&w, n - depth + 1) : TACL_OK;
    if (status != TACL_OK)
        return status;
    if (in > 0)
        memcpy(slot(f, me, n, in), op->sendbuf, in);
    publish(f, n, &w);
    switch (op->coll) {
    case TACL_COLL_BARRIER:
        status = wait_all(&w, n);
        break;
    case TACL_COLL_ALLREDUCE:
        status = wait_all(&w, n);
        if (status == TACL_OK)
            status = reduce_slots(f, n, in, 0, op->recvbuf, op);
        break;
    case TACL_COLL_REDUCE:
        if (me != op->root)
            break;
        status = wait_all(&w, n);
        if (status == TACL_OK)
            status = reduce_slots(f, n, in, 0, op->recvbuf, op);
        break;
    case TACL_COLL_REDUCE_SCATTER:
        status = wait_all(&w, n);
        if (status == TACL_OK)
            status = reduce_slots(f, n, in, (size_t)me * block,
                                  op->recvbuf, op);
        break;
    case TACL_COLL_ALLGATHER:
        status = wait_all(&w, n);
        for (int r = 0; r < f->size && status == TACL_OK && block > 0; r++)
            memcpy((char *)op->recvbuf + (size_t)r * block,
                   slot(f, r, n, block), block);
        break;
    case TACL_COLL_BROADCAST:
        if (me == op->root) {
            if (op->recvbuf != op->sendbuf && block > 0)
                memcpy(op->recvbuf, op->sendbuf, block);
            break;
        }
        status = wait_one(&w, op->root, n, NULL);
        if (status == TACL_OK && block > 0)
            memcpy(op->recvbuf, slot(f, op->root, n, block), block);
        break;
        default:
        status = tacl__error(TACL_ERR_INTERNAL, COLL,
                             "the fast path does not run %s",
                             tacl_coll_name(op->coll));
        break;
    }
    return status;
}
