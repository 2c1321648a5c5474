/*
 * Schedules: what an algorithm compiles one operation (or one group of
 * operations) into, for one rank.
 *
 * A schedule is a DAG of steps (send, recv, copy, reduce, div, nop).  Each
 * step names its dependencies, which are earlier steps, so the step list is
 * already in a topological order.  Steps address memory through buffer
 * references (buffer index + byte offset) rather than raw pointers, so the
 * same schedule can be executed on real transports, run by the simulator,
 * or checked symbolically (every send has its receive, every output byte
 * written exactly once) without any transport.
 *
 * Builders never fail half way silently: an allocation failure makes the
 * schedule's error sticky and every later call a no-op returning -1, so a
 * builder can chain calls and check tacl__sched_status() once at the end.
 */
#ifndef TACL_CORE_SCHED_H
#define TACL_CORE_SCHED_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tacl.h"

typedef enum {
    TACL__STEP_SEND = 0, /* send bytes at src to peer, matched by tag */
    TACL__STEP_RECV,     /* receive bytes from peer into dst, by tag;
                            arg TACL__COPY_STREAM as for COPY */
    TACL__STEP_COPY,     /* dst = src, bytes long (regions may not overlap);
                            arg TACL__COPY_STREAM writes around the cache */
    TACL__STEP_REDUCE,   /* dst = src op src2 [op src2 + stride ...]:
                            nsrc (1 when 0) second sources, count elements
                            of dtype; dst may equal src or the first */
    TACL__STEP_DIV,      /* dst = src / arg, count elements (AVG finish) */
    TACL__STEP_NOP,      /* a join point: completes when its deps do */
    TACL__STEP_QUANT,    /* dst (quantized) = quantize(src), count elements
                            of dtype, blocks of qblock, qbits bits */
    TACL__STEP_DEQUANT,  /* dst (dtype) = (dst +) sum over nsrc quantized
                            inputs at src, src + stride, ...; arg = 1 adds
                            to dst */
    TACL__STEP_DQRQ,     /* dst (quantized) = quantize(sum of the nsrc
                            dequantized inputs at src + i * stride) */
    TACL__STEP_NUM_KINDS
} tacl__step_kind_t;

/** Roles of a schedule buffer. */
typedef enum {
    TACL__BUF_INPUT = 0, /* caller's send buffer: read only */
    TACL__BUF_OUTPUT,    /* caller's receive buffer */
    TACL__BUF_SCRATCH    /* allocated by whoever runs the schedule */
} tacl__buf_role_t;

typedef struct {
    void *ptr;        /* NULL for scratch until the executor allocates it */
    uint64_t size;    /* bytes */
    uint8_t role;     /* tacl__buf_role_t */
    uint8_t memtype;  /* tacl_memtype_t, never AUTO */
    uint8_t shared;   /* scratch the node's other processes can map */
} tacl__sched_buf_t;

/** A place in a schedule buffer. */
typedef struct {
    uint32_t buf;     /* index into tacl__sched_t.bufs */
    uint64_t off;     /* byte offset */
} tacl__bref_t;

/**
 * Tags.  A step's tag identifies a message within one communicator: the
 * receiving rank matches (sender, tag).  Builders make tags with
 * TACL__TAG(seq, step) where seq is the operation's sequence number
 * (tacl__coll_args_t.seq) and step a number unique among the messages one
 * rank sends to one peer within the operation.  The executor adds the
 * communicator's id on the wire.
 */
#define TACL__TAG_STEP_BITS 20
#define TACL__TAG_SEQ_BITS 20
#define TACL__TAG(seq, step)                                                 \
    ((((uint64_t)(seq) & ((1ull << TACL__TAG_SEQ_BITS) - 1))                 \
      << TACL__TAG_STEP_BITS) |                                              \
     ((uint64_t)(step) & ((1ull << TACL__TAG_STEP_BITS) - 1)))
/** tag, made with TACL__TAG, with its sequence number replaced by seq. */
#define TACL__TAG_RESTAMP(tag, seq)                                          \
    TACL__TAG((seq), (tag) & ((1ull << TACL__TAG_STEP_BITS) - 1))
/** The bits a communicator id occupies above a step tag. */
#define TACL__TAG_COMM_SHIFT (TACL__TAG_STEP_BITS + TACL__TAG_SEQ_BITS)

typedef struct {
    uint8_t kind;     /* tacl__step_kind_t */
    uint8_t dtype;    /* tacl_dtype_t, REDUCE and DIV */
    uint8_t op;       /* tacl_op_t, REDUCE (never AVG: builders use SUM
                         then DIV) */
    int32_t peer;     /* communicator rank, SEND and RECV */
    uint64_t tag;     /* SEND and RECV */
    tacl__bref_t dst; /* RECV, COPY, REDUCE, DIV */
    tacl__bref_t src; /* SEND, COPY, REDUCE, DIV */
    tacl__bref_t src2;/* REDUCE */
    uint64_t bytes;   /* SEND, RECV, COPY: bytes; REDUCE, DIV: bytes of
                         dst (count * dtype size) */
    uint32_t arg;     /* DIV: the divisor; DEQUANT: 1 to accumulate;
                         COPY: flags */
    uint64_t count;   /* QUANT, DEQUANT, DQRQ: elements */
    uint64_t stride;  /* DEQUANT, DQRQ: bytes from one quantized input to
                         the next; REDUCE: from one second source to the
                         next */
    uint32_t qblock;  /* QUANT, DEQUANT, DQRQ: elements per block */
    uint8_t qbits;    /* 8 or 4 */
    uint16_t nsrc;    /* DEQUANT, DQRQ: quantized inputs; REDUCE: second
                         sources (0 means 1) */
    uint32_t dep_start; /* first dependency in tacl__sched_t.deps */
    uint32_t ndeps;
} tacl__step_t;

typedef struct tacl__sched {
    int rank;               /* rank the schedule is for */
    int nranks;             /* communicator size */
    tacl__step_t *steps;
    uint32_t nsteps, steps_cap;
    uint32_t *deps;         /* dependency lists, indices of earlier steps */
    uint32_t ndeps, deps_cap;
    tacl__sched_buf_t *bufs;
    uint32_t nbufs, bufs_cap;
    tacl_status_t status;   /* sticky builder error */
} tacl__sched_t;

/** Up to this many dependencies may be passed to one step. */
#define TACL__MAX_DEPS 64

/**
 * Dependency lists for the step constructors:
 * tacl__sched_copy(s, dst, src, n, TACL__DEPS(a, b)).  A negative id means
 * "no dependency" and is skipped, so a builder can start a chain with -1.
 */
#define TACL__DEPS(...)                                                      \
    (const int32_t[]){__VA_ARGS__},                                          \
        (int)(sizeof((const int32_t[]){__VA_ARGS__}) / sizeof(int32_t))
#define TACL__NO_DEPS NULL, 0

void tacl__sched_init(tacl__sched_t *s, int rank, int nranks);
void tacl__sched_fini(tacl__sched_t *s);
/** Drop the steps and buffers but keep the allocations, for reuse. */
void tacl__sched_reset(tacl__sched_t *s);
static inline tacl_status_t tacl__sched_status(const tacl__sched_t *s)
{
    return s->status;
}

/**
 * Register a caller buffer (INPUT or OUTPUT).  Returns its index, or -1
 * after an error.  The same pointer may be registered twice (in-place
 * operations register one buffer with role OUTPUT and refer to it as
 * their input too).
 */
int32_t tacl__sched_buf(tacl__sched_t *s, const void *ptr, uint64_t size,
                        tacl__buf_role_t role, tacl_memtype_t memtype);
/** Register a scratch buffer of size bytes, allocated by the runner. */
int32_t tacl__sched_scratch(tacl__sched_t *s, uint64_t size,
                            tacl_memtype_t memtype);
/**
 * Scratch host memory that the other processes of the node can map
 * (tacl_mem_alloc): messages sent from it reach them without
 * cross-memory system calls.
 */
int32_t tacl__sched_scratch_shared(tacl__sched_t *s, uint64_t size);

static inline tacl__bref_t tacl__bref(int32_t buf, uint64_t off)
{
    tacl__bref_t r = {(uint32_t)buf, off};
    return r;
}

/*
 * Step constructors.  Each returns the new step's id (>= 0), or -1 once
 * the schedule is in error.
 */
int32_t tacl__sched_send(tacl__sched_t *s, int peer, tacl__bref_t src,
                         uint64_t bytes, uint64_t tag, const int32_t *deps,
                         int ndeps);
int32_t tacl__sched_recv(tacl__sched_t *s, int peer, tacl__bref_t dst,
                         uint64_t bytes, uint64_t tag, const int32_t *deps,
                         int ndeps);
/**
 * The peer of a receive from any peer (the public TACL_ANY_SOURCE): the
 * executor holds it until a message with its tag has come from some
 * rank, then receives that one (executor.c, "Any source").
 */
#define TACL__PEER_ANY (-1)
/** RECV flag: src refers to an int that gets the sender's rank. */
#define TACL__RECV_SOURCE 2u
/**
 * A receive from any peer; source, when not NULL, is where the sender's
 * rank is written (an int).
 */
int32_t tacl__sched_recv_any(tacl__sched_t *s, tacl__bref_t dst,
                             uint64_t bytes, uint64_t tag,
                             const tacl__bref_t *source, const int32_t *deps,
                             int ndeps);
/** A receive with TACL__COPY_STREAM when stream is nonzero. */
int32_t tacl__sched_recv_stream(tacl__sched_t *s, int peer, tacl__bref_t dst,
                                uint64_t bytes, uint64_t tag, int stream,
                                const int32_t *deps, int ndeps);
int32_t tacl__sched_copy(tacl__sched_t *s, tacl__bref_t dst, tacl__bref_t src,
                         uint64_t bytes, const int32_t *deps, int ndeps);
/** COPY flag: nothing in the schedule reads dst soon; stream past cache. */
#define TACL__COPY_STREAM 1u
/** A copy with TACL__COPY_STREAM when stream is nonzero. */
int32_t tacl__sched_copy_stream(tacl__sched_t *s, tacl__bref_t dst,
                                tacl__bref_t src, uint64_t bytes, int stream,
                                const int32_t *deps, int ndeps);
int32_t tacl__sched_reduce(tacl__sched_t *s, tacl__bref_t dst,
                           tacl__bref_t src, tacl__bref_t src2, size_t count,
                           tacl_dtype_t dtype, tacl_op_t op,
                           const int32_t *deps, int ndeps);
/**
 * dst = src op src2 op (src2 + stride) ... over nsrc second sources, in
 * that order, count elements each: one pass over the output where a chain
 * of two-source reductions would make nsrc.  The second sources may not
 * overlap one another; dst may equal src or the first of them.
 */
int32_t tacl__sched_reduce_n(tacl__sched_t *s, tacl__bref_t dst,
                             tacl__bref_t src, tacl__bref_t src2, int nsrc,
                             uint64_t stride, size_t count,
                             tacl_dtype_t dtype, tacl_op_t op,
                             const int32_t *deps, int ndeps);
int32_t tacl__sched_div(tacl__sched_t *s, tacl__bref_t dst, tacl__bref_t src,
                        size_t count, tacl_dtype_t dtype, uint32_t divisor,
                        const int32_t *deps, int ndeps);
int32_t tacl__sched_nop(tacl__sched_t *s, const int32_t *deps, int ndeps);
/**
 * Fold a dependency list longer than a step may carry into NOP steps, in
 * place: groups of TACL__MAX_DEPS ids become one NOP each, round after
 * round, until at most TACL__MAX_DEPS remain.  Afterwards ids[0..n) (n
 * returned) stand for all of them; a shorter list is left as it is.
 */
int tacl__sched_fold(tacl__sched_t *s, int32_t *ids, int n);

/*
 * Quantization steps (ZeRO++ qwZ/qgZ).  Quantized buffers follow
 * quant_layout.h: tacl__quant_bytes(count, qblock, qbits) bytes each.
 * dtype is the full-precision type: float32, float16 or bfloat16.
 */
int32_t tacl__sched_quant(tacl__sched_t *s, tacl__bref_t dst,
                          tacl__bref_t src, size_t count, tacl_dtype_t dtype,
                          uint32_t qblock, int qbits, const int32_t *deps,
                          int ndeps);
int32_t tacl__sched_dequant(tacl__sched_t *s, tacl__bref_t dst,
                            tacl__bref_t src, int nsrc, uint64_t stride,
                            size_t count, tacl_dtype_t dtype,
                            uint32_t qblock, int qbits, int accumulate,
                            const int32_t *deps, int ndeps);
int32_t tacl__sched_dqrq(tacl__sched_t *s, tacl__bref_t dst, tacl__bref_t src,
                         int nsrc, uint64_t stride, size_t count,
                         uint32_t qblock, int qbits, const int32_t *deps,
                         int ndeps);

/*
 * Composition: a whole sub-schedule (another operation built on its own,
 * as qwZ builds the all-gather that moves its quantized payload) appended
 * to a schedule, its buffers mapped onto places in that schedule.
 */
/** A map entry that makes the sub-schedule's buffer a new one of s. */
#define TACL__SCHED_NEW UINT32_MAX

/** Where buffer i of a sub-schedule lives in the schedule it joins. */
typedef struct {
    tacl__bref_t at;  /* its byte 0 in s; at.buf TACL__SCHED_NEW: a new
                         buffer of s with the same size, role and kind */
    int32_t ready;    /* step of s that fills it: every appended step that
                         reads the buffer waits for it; -1 for none */
} tacl__sched_map_t;

/**
 * Append every step of sub to s, in order: references to buffer i of sub
 * become references into map[i].at, dependencies on sub's steps become
 * dependencies on their copies, and a copy the map turns onto itself
 * becomes a NOP.  sub must be for the same rank and communicator size.
 * ids_p, if not NULL, receives for each step of sub (sub->nsteps
 * entries) the id of its copy in s.  Returns s's status; a reference the
 * map places outside a buffer of s is an error like any other.
 */
tacl_status_t tacl__sched_append(tacl__sched_t *s, const tacl__sched_t *sub,
                                 const tacl__sched_map_t *map,
                                 int32_t *ids_p);

/** The dependencies of step id. */
static inline const uint32_t *tacl__sched_deps(const tacl__sched_t *s,
                                               uint32_t id)
{
    return s->deps + s->steps[id].dep_start;
}

/**
 * Pairs every send with its receive over the schedules s[0..n-1] of n
 * ranks: the k-th send a -> b of a tag with the k-th receive from a on b
 * of that tag, as transports deliver them (in order per pair and tag).
 * Steps are numbered over all ranks: step j of rank r is off[r] + j, with
 * off[r + 1] = off[r] + s[r]->nsteps.  partner[g] gets the number of the
 * partner of every send and receive g; other entries are left alone.  A
 * send or receive without a partner, or a pair whose lengths differ, is
 * TACL_ERR_INTERNAL naming the first such message in (sender, receiver,
 * tag) order.  The simulator and the tests' schedule runner share it.
 */
tacl_status_t tacl__sched_match(const tacl__sched_t *const *s, int n,
                                const uint32_t *off, uint32_t *partner);

/** A one-line human description of a step, for logs and test failures. */
void tacl__sched_step_str(const tacl__sched_t *s, uint32_t id, char *buf,
                          size_t len);
/** Log every step at TRACE under SCHED. */
void tacl__sched_dump(const tacl__sched_t *s);

/** Where a step's timeline mark goes in a tacl__sched_trace_write array. */
enum { TACL__TRACE_READY, TACL__TRACE_START, TACL__TRACE_DONE,
       TACL__TRACE_MARKS };

/**
 * Write the timeline of one operation of s, one line per step:
 * "op rank step kind peer bytes ready_us start_us done_us" (peer -1 for
 * local work), where t_us holds TACL__TRACE_MARKS times per step in
 * microseconds: when the step became runnable, when it started (a
 * message: was posted) and when it completed.  The executor writes it
 * for TACL_STEP_TRACE (times on the machine's monotonic clock), tacl-sim
 * for --trace (times from the operation's start), so that a measured and
 * a simulated run of one schedule compare step by step.
 */
void tacl__sched_trace_write(FILE *f, uint64_t op, const tacl__sched_t *s,
                             const double *t_us);

#endif /* TACL_CORE_SCHED_H */
