/*
 * The perf harness shared by the nccl-tests-style binaries.
 *
 * common.c and data.c hold everything that does not talk to a
 * communication library: the command line (nccl-tests' flags), buffer
 * sizes per collective, the deterministic data each rank sends, the exact
 * check of what it received, bandwidth formulas and the output table.
 * The tacl runner (tacl_harness.c) and the Open MPI comparison
 * (mpi_coll_perf.c) both build on them, so their figures come from the
 * same sizes, timing and formulas.
 *
 * A perf binary is a descriptor (which collective, how to post it) and a
 * main() that calls tacl__perf_main().
 */
#ifndef TACL_PERF_COMMON_H
#define TACL_PERF_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tacl.h"

/*
 * The collectives the harness sizes, fills and checks are tacl.h's
 * tacl_coll_t: allgather .. alltoall, and TACL_COLL_SEND for sendrecv (a
 * send and a receive between ring neighbours in one group).
 */

/** Command-line options, as nccl-tests spells them. */
typedef struct {
    size_t min_bytes;       /* -b */
    size_t max_bytes;       /* -e */
    size_t step_bytes;      /* -i, used when step_factor is 1 */
    size_t step_factor;     /* -f */
    int iters;              /* -n */
    int warmup;             /* -w */
    int check;              /* -c */
    tacl_op_t op;           /* -o */
    tacl_dtype_t dtype;     /* -d */
    int root;               /* -r */
    int blocking;           /* -z: 1 blocking calls, 0 _nb + wait */
    int average;            /* -a: 0 rank 0, 1 mean, 2 min, 3 max */
    int agg;                /* -m: operations per group */
    const char *json_path;  /* -J, NULL for none */
    const char *algo;       /* -A, NULL for auto */
    int reg;                /* -R: 1 buffers from the library's allocator */
    int mem_cuda;           /* --mem cuda: device buffers (tacl only) */
    int inject_error;       /* --inject-error (tests only) */
    int qbits;              /* -Q bits[:block]: 0 exact, 8 or 4 */
    uint32_t qblock;        /* values per quantization scale */
    int dtype_all;          /* -d all: every dtype in turn */
    int op_all;             /* -o all: every op that applies, in turn */
    int cycles;             /* -N: sweeps to run, 0 without end (1) */
    double timeout_s;       /* -T: TACL_TIMEOUT for the run, 0 unset */
    char notes[512];        /* nccl-tests flags taken without effect */
    const char *algo_run;   /* set by the runner: what the first size
                               ran, for the header */
} tacl__perf_opts_t;

/** Buffer layout of one size of one collective, in elements. */
typedef struct {
    size_t bytes;           /* the "size" column: the larger buffer */
    size_t count;           /* the "count" column: the call's count */
    size_t send_count;      /* elements of the send buffer */
    size_t recv_count;      /* elements of the receive buffer */
} tacl__perf_sizes_t;

/** Timing and check of one size, one placement. */
typedef struct {
    double time_us;         /* per operation, aggregated over ranks */
    double algbw;           /* GB/s */
    double busbw;           /* GB/s */
    long long wrong;        /* wrong elements over all ranks, -1: no check */
    double max_error;       /* -Q: largest absolute error over all ranks */
} tacl__perf_result_t;

/** nccl-tests' name of the collective, used in the output
 *  ("all_gather", ..., "sendrecv"). */
const char *tacl__perf_kind_name(tacl_coll_t kind);
/**
 * The collective a comparison program (MPI, Gloo) is asked for by name:
 * all-gather, reduce-scatter or all-reduce, by their output name
 * ("all_gather") or their TACL_ALGO key ("allgather").  Returns 0, or -1
 * for any other name.
 */
int tacl__perf_compared_kind(const char *name, tacl_coll_t *kind_p);
/** Whether the collective takes a reduction op / a root. */
int tacl__perf_has_op(tacl_coll_t kind);
int tacl__perf_has_root(tacl_coll_t kind);

/** nccl-tests' name of a dtype ("float", "half", ...). */
const char *tacl__perf_dtype_name(tacl_dtype_t dtype);
/** Bytes per element; 0 for an invalid dtype. */
size_t tacl__perf_dtype_size(tacl_dtype_t dtype);

/**
 * The dtypes a run steps through (-d all: every one, else -d's), into
 * out (TACL_NUM_DTYPES entries); returns how many.
 */
int tacl__perf_dtypes(const tacl__perf_opts_t *opts, tacl_dtype_t *out);
/**
 * The ops a run steps through for one dtype (-o all: every op that
 * applies to it; a collective without op: just -o's), into out
 * (TACL_NUM_OPS entries); returns how many.
 */
int tacl__perf_ops(tacl_coll_t kind, const tacl__perf_opts_t *opts,
                   tacl_dtype_t dtype, tacl_op_t *out);
/**
 * For a comparison program that runs one dtype and op: 0, or -1 after
 * printing that -d all / -o all are for the tacl binaries.
 */
int tacl__perf_refuse_all(const char *prog, const tacl__perf_opts_t *opts);

/**
 * Parse argv into *opts_p.  Returns 0 when the program should run; else
 * 1 with *exit_p set to the exit code (0 after --help or --version, 2
 * after a bad command line, with the reason and the usage printed).
 */
int tacl__perf_parse(int argc, char **argv, tacl_coll_t kind,
                     tacl__perf_opts_t *opts_p, int *exit_p);

/** The sizes the run steps through: first, then next until past max. */
size_t tacl__perf_next_size(const tacl__perf_opts_t *opts, size_t bytes);

/**
 * The exchange alltoallv_perf (and mpi_coll_perf alltoallv) measures:
 * rank `from` sends rank `to` unit * w elements, w of their ring distance
 * d = (to - from) mod nranks: 1 for itself, else d % 3, so a third of
 * the peers get nothing and the others one or two units, while every
 * rank sends and receives the same total (tacl__perf_vunits units).
 * Returns the elements; *sdispl_p is where they start in from's send
 * buffer, *rdispl_p in to's receive buffer (both packed in rank order).
 */
size_t tacl__perf_vblock(int nranks, size_t unit, int from, int to,
                         size_t *sdispl_p, size_t *rdispl_p);
/** The units every rank sends (and receives) in that exchange. */
size_t tacl__perf_vunits(int nranks);

/** Buffer layout of one size (bytes as -b/-e give it) on nranks ranks. */
void tacl__perf_get_sizes(tacl_coll_t kind, size_t bytes, int nranks,
                          tacl_dtype_t dtype, tacl__perf_sizes_t *sizes_p);

/**
 * In place, where the send and receive data lie inside the one buffer
 * (elements from its start): all-gather sends from rank * count,
 * reduce-scatter receives at rank * count, the others use offset 0.
 */
void tacl__perf_inplace_offsets(tacl_coll_t kind,
                                const tacl__perf_sizes_t *sizes, int rank,
                                size_t *send_off_p, size_t *recv_off_p);

/** The largest send and receive buffers of the run, in bytes. */
void tacl__perf_max_buffers(tacl_coll_t kind,
                            const tacl__perf_opts_t *opts, int nranks,
                            size_t *send_bytes_p, size_t *recv_bytes_p);

/** algbw and busbw (GB/s) of one operation that took time_us. */
void tacl__perf_bandwidth(tacl_coll_t kind,
                          const tacl__perf_sizes_t *sizes, int nranks,
                          double time_us, double *algbw_p, double *busbw_p);

/**
 * Fill this rank's input with its deterministic values and poison its
 * output.  In place, sendbuf is ignored and recvbuf is the one buffer:
 * the input is written where the in-place convention puts it.
 */
void tacl__perf_fill(tacl_coll_t kind, const tacl__perf_opts_t *opts,
                     const tacl__perf_sizes_t *sizes, int rank, int nranks,
                     void *sendbuf, void *recvbuf, int in_place);

/**
 * Number of elements of this rank's output that differ from the exact
 * expected values (recvbuf as tacl__perf_fill() got it).  With -Q an
 * element counts as wrong only beyond the quantization bound (see
 * tacl__perf_quant_bound()).
 */
long long tacl__perf_check(tacl_coll_t kind,
                           const tacl__perf_opts_t *opts,
                           const tacl__perf_sizes_t *sizes, int rank,
                           int nranks, const void *recvbuf, int in_place);

/**
 * The error bound of a quantized run for an expected value want: a
 * quantization step is vmax / qmax (vmax the largest input magnitude the
 * generator makes, qmax 127 or 7); an all-gather value is quantized once
 * (half a step); a reduce-scatter sums nranks quantized inputs and
 * requantizes per node partials, at most nranks steps in all; plus the
 * output type's rounding, relative 2^-8 (bfloat16's).
 */
double tacl__perf_quant_bound(tacl_coll_t kind,
                              const tacl__perf_opts_t *opts, int nranks,
                              double want);
/** Largest absolute error the last tacl__perf_check() saw. */
double tacl__perf_last_max_error(void);

/** Make one output element wrong (for --inject-error). */
void tacl__perf_corrupt(tacl_coll_t kind,
                        const tacl__perf_opts_t *opts,
                        const tacl__perf_sizes_t *sizes, int rank,
                        void *recvbuf, int in_place);

/** Output in nccl-tests' layout; only rank 0 calls these. */
void tacl__perf_print_header(FILE *f, const char *prog, const char *library,
                             tacl_coll_t kind,
                             const tacl__perf_opts_t *opts, int nranks);
void tacl__perf_print_row(FILE *f, tacl_coll_t kind,
                          const tacl__perf_opts_t *opts,
                          const tacl__perf_sizes_t *sizes,
                          const tacl__perf_result_t res[2]);
/** Prints the footer; returns the number of wrong elements in total. */
long long tacl__perf_print_footer(FILE *f);

/*
 * JSON results (-J): rank 0 opens the file, adds one entry per size and
 * closes it.  extra, if not NULL, is a JSON object text added to the
 * entry as "counters".
 */
FILE *tacl__perf_json_open(const char *path, const char *library,
                           tacl_coll_t kind,
                           const tacl__perf_opts_t *opts, int nranks);
void tacl__perf_json_row(FILE *f, const tacl__perf_sizes_t *sizes,
                         const tacl__perf_result_t res[2],
                         const char *extra);
void tacl__perf_json_close(FILE *f);

/** Wall-clock seconds from a monotonic clock. */
double tacl__perf_now(void);
/**
 * --version ("PROG (WHAT) tacl X.Y.Z") and --help / -h (usage) for the
 * perf tools that parse their own options: 1 when opt was one of them
 * and its answer is printed (exit 0), else 0.
 */
int tacl__perf_first_contact(const char *opt, const char *prog,
                             const char *what, const char *usage);
/** The median of n values (sorted in place); 0 when n is 0. */
double tacl__perf_median(double *values, int n);

/*
 * The tacl runner (tacl_harness.c).
 */

/** One call as a perf binary posts it. */
typedef struct {
    const void *sendbuf;
    void *recvbuf;
    const tacl_quant_t *quant; /* -Q: the quantized form, else NULL */
    size_t count;
    tacl_dtype_t dtype;
    tacl_op_t op;
    int root;
    int rank;
    int nranks;
    tacl_comm_t comm;
    void *stream;              /* cudaStream_t with --mem cuda, else NULL */
} tacl__perf_call_t;

/**
 * Post one operation: with req_p NULL the blocking form (recorded, not
 * run, inside a group), else the "_nb" form.
 */
typedef tacl_status_t (*tacl__perf_post_fn_t)(const tacl__perf_call_t *call,
                                              tacl_request_t *req_p);

typedef struct {
    tacl_coll_t kind;
    tacl__perf_post_fn_t post;
} tacl__perf_coll_t;

/** The whole program: parse, init from the environment, run, report. */
int tacl__perf_main(int argc, char **argv, const tacl__perf_coll_t *coll);

#endif /* TACL_PERF_COMMON_H */
