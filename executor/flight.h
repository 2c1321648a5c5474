/*
 * The flight recorder: per communicator, a ring of the last
 * TACL_FLIGHT_RECORDS operations (0 turns it off).  The API layer fills a
 * record when it starts an operation (what it is: sequence number,
 * collective, count, type, root, algorithm); the execution that runs it
 * keeps its state (pending, done, failed).  A dump writes one key=value
 * line per record, and for a pending operation asks the execution which
 * steps are done and which messages it still waits for, so it costs
 * nothing while nobody looks.
 *
 * Dumps happen when a context fails (a timeout, a dead peer), when the
 * user asks (tacl_comm_dump_flight), and on TACL_FLIGHT_SIGNAL: the
 * handler only bumps a counter, and the next progress call of each
 * context dumps its communicators, so no stdio runs in the handler.
 * tools/tacl-flight reads the dumps of every rank.
 *
 * Everything here runs under the context lock of the communicator, except
 * tacl__flight_end() of a record whose execution never leaves its caller
 * (the small-message fast path's): its stores are atomic, and a dump
 * reads the state, status and execution with atomic loads.
 */
#ifndef TACL_EXECUTOR_FLIGHT_H
#define TACL_EXECUTOR_FLIGHT_H

#include <stdint.h>
#include <stdio.h>

#include "tacl.h"
#include "op.h"

typedef struct tacl__exec tacl__exec_t;
typedef struct tacl__xcomm tacl__xcomm_t;

typedef enum {
    TACL__FLIGHT_PENDING = 0,
    TACL__FLIGHT_DONE,
    TACL__FLIGHT_FAILED
} tacl__flight_state_t;

/** What the API layer knows of an operation when it starts it. */
typedef struct {
    uint64_t seq;          /* collective sequence number, or p2p count */
    tacl__op_sig_t sig;    /* the (first) operation's signature */
    const char *algo;      /* copied into the record */
    int nops;              /* operations fused into this one (groups) */
} tacl__flight_op_t;

typedef struct {
    tacl__flight_op_t op;
    char algo[16];
    uint64_t ord;          /* operations begun on this recorder before it */
    uint64_t start_ns;     /* when it began, to the kernel tick */
    tacl__exec_t *exec;    /* the execution while it is pending */
    tacl_status_t status;
    uint8_t state;
} tacl__flight_rec_t;

/** Appends what a pending execution waits for (tacl__exec_describe). */
typedef void (*tacl__flight_describe_fn)(const tacl__exec_t *exec,
                                         char *buf, size_t len);

typedef struct tacl__flight {
    tacl__flight_rec_t *recs; /* NULL when off */
    tacl__flight_describe_fn describe; /* the executor's, from the first
                                          claim (so this file calls
                                          nothing of it) */
    uint32_t cap;             /* records kept, a power of two */
    uint64_t n;               /* records begun so far */
    int open;                 /* the latest record awaits its execution */
    int rank, size;           /* in the communicator */
    unsigned signal_gen;      /* last signal this recorder was dumped for */
    struct tacl__flight *next; /* every live recorder, for signal dumps */
} tacl__flight_t;

/** Size the ring from TACL_FLIGHT_RECORDS (rounded up to a power of
 * two); off when 0. */
tacl_status_t tacl__flight_init(tacl__flight_t *f, int rank, int size);
void tacl__flight_fini(tacl__flight_t *f);

/** Record the start of op; the next execution started claims it. */
void tacl__flight_begin(tacl__flight_t *f, const tacl__flight_op_t *op);

/**
 * Record the start of op, an operation run without an execution (the
 * fast path's): tacl__flight_begin and tacl__flight_claim in one.
 * Returns the record's ordinal for tacl__flight_end, or ~0 when off.
 */
uint64_t tacl__flight_open(tacl__flight_t *f, const tacl__flight_op_t *op);

/** Hand the open record (if any) to exec, which describe describes in
 *  dumps; returns its ordinal or ~0. */
uint64_t tacl__flight_claim(tacl__flight_t *f, tacl__exec_t *exec,
                            tacl__flight_describe_fn describe);

/**
 * The execution of record ord ended with status (or never started).
 * Without the context lock only from the thread that began record ord
 * and holds a call on its communicator (so the ring is not torn down).
 */
void tacl__flight_end(tacl__flight_t *f, uint64_t ord, tacl_status_t status);

/**
 * Write xc's records, oldest first, to file (when not NULL) and to the
 * log at WARN (when to_log), each line prefixed "TACL_FLIGHT"; reason
 * says why ("timeout", "request", "signal").
 */
void tacl__flight_dump(tacl__xcomm_t *xc, const char *reason, FILE *file,
                       int to_log);

/**
 * Dump xc to the log and to TACL_FLIGHT_DUMP_FILE (when set), for a
 * failure or a signal.
 */
void tacl__flight_dump_auto(tacl__xcomm_t *xc, const char *reason);

/** Signals received so far (TACL_FLIGHT_SIGNAL); one load. */
unsigned tacl__flight_signal_gen(void);

/** Dump every recorder on ctx not yet dumped for signal gen. */
void tacl__flight_dump_signalled(const void *ctx, unsigned gen);

#endif /* TACL_EXECUTOR_FLIGHT_H */
