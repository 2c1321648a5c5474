/*
 * The library-independent half of the perf harness: nccl-tests' command
 * line, buffer sizes, bandwidth formulas and output table (the data and
 * the exact check are in data.c).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "parse.h"

/* nccl-tests' names, which its output and its binaries carry. */
static const char *const kind_names[TACL_NUM_COLLS] = {
    [TACL_COLL_ALLGATHER] = "all_gather",
    [TACL_COLL_REDUCE_SCATTER] = "reduce_scatter",
    [TACL_COLL_ALLREDUCE] = "all_reduce",
    [TACL_COLL_BROADCAST] = "broadcast",
    [TACL_COLL_REDUCE] = "reduce",
    [TACL_COLL_ALLTOALL] = "alltoall",
    [TACL_COLL_SEND] = "sendrecv",
    [TACL_COLL_ALLTOALLV] = "alltoallv",
};

/* tacl's names (TACL_ALGO's keys) from tacl.h's list: this file links
 * no library, so it cannot call tacl_coll_name. */
static const char *const coll_keys[TACL_NUM_COLLS] = {
#define COLL_KEY_(name, value, str) [name] = str,
    TACL_COLL_LIST(COLL_KEY_)
#undef COLL_KEY_
};

const char *tacl__perf_kind_name(tacl_coll_t kind)
{
    return (unsigned)kind < TACL_NUM_COLLS && kind_names[kind] != NULL
               ? kind_names[kind]
               : "invalid";
}

int tacl__perf_compared_kind(const char *name, tacl_coll_t *kind_p)
{
    static const tacl_coll_t compared[] = {
        TACL_COLL_ALLGATHER, TACL_COLL_REDUCE_SCATTER, TACL_COLL_ALLREDUCE,
        TACL_COLL_ALLTOALLV,
    };
    size_t i;

    for (i = 0; i < sizeof(compared) / sizeof(compared[0]); i++) {
        if (strcmp(name, kind_names[compared[i]]) == 0 ||
            strcmp(name, coll_keys[compared[i]]) == 0) {
            *kind_p = compared[i];
            return 0;
        }
    }
    return -1;
}

int tacl__perf_has_op(tacl_coll_t kind)
{
    return kind == TACL_COLL_REDUCE_SCATTER ||
           kind == TACL_COLL_ALLREDUCE || kind == TACL_COLL_REDUCE;
}

int tacl__perf_has_root(tacl_coll_t kind)
{
    return kind == TACL_COLL_BROADCAST || kind == TACL_COLL_REDUCE;
}

/* Dtypes as nccl-tests names them, then the aliases accepted. */
static const struct {
    const char *name;
    tacl_dtype_t dtype;
} dtype_names[] = {
    {"int8", TACL_INT8},       {"uint8", TACL_UINT8},
    {"int32", TACL_INT32},     {"uint32", TACL_UINT32},
    {"int64", TACL_INT64},     {"uint64", TACL_UINT64},
    {"half", TACL_FLOAT16},    {"bfloat16", TACL_BFLOAT16},
    {"float", TACL_FLOAT32},   {"double", TACL_FLOAT64},
    {"int", TACL_INT32},       {"char", TACL_INT8},
    {"float16", TACL_FLOAT16}, {"fp16", TACL_FLOAT16},
    {"bf16", TACL_BFLOAT16},   {"float32", TACL_FLOAT32},
    {"fp32", TACL_FLOAT32},    {"float64", TACL_FLOAT64},
    {"fp64", TACL_FLOAT64},
};

static const char *const op_names[TACL_NUM_OPS] = {
    "sum", "prod", "max", "min", "avg", "band", "bor", "bxor",
};

/* The dtypes -d all steps through, in nccl-tests' order. */
static const tacl_dtype_t all_dtypes[] = {
    TACL_INT8, TACL_UINT8, TACL_INT32, TACL_UINT32, TACL_INT64,
    TACL_UINT64, TACL_FLOAT16, TACL_FLOAT32, TACL_FLOAT64, TACL_BFLOAT16,
};

int tacl__perf_dtypes(const tacl__perf_opts_t *opts, tacl_dtype_t *out)
{
    size_t i;

    if (!opts->dtype_all) {
        out[0] = opts->dtype;
        return 1;
    }
    for (i = 0; i < sizeof(all_dtypes) / sizeof(all_dtypes[0]); i++) {
        out[i] = all_dtypes[i];
    }
    return (int)i;
}

static int dtype_is_float(tacl_dtype_t dtype)
{
    return dtype == TACL_FLOAT16 || dtype == TACL_BFLOAT16 ||
           dtype == TACL_FLOAT32 || dtype == TACL_FLOAT64;
}

int tacl__perf_ops(tacl_coll_t kind, const tacl__perf_opts_t *opts,
                   tacl_dtype_t dtype, tacl_op_t *out)
{
    int i, n = 0;

    if (!opts->op_all || !tacl__perf_has_op(kind)) {
        /* -o band -d all: the bitwise op on the integer types only. */
        if (opts->op > TACL_AVG && tacl__perf_has_op(kind) &&
            dtype_is_float(dtype))
            return 0;
        out[0] = opts->op;
        return 1;
    }
    /* The arithmetic ops apply to every dtype, any other (bitwise) op to
     * the integer ones; an op the harness cannot name is left out. */
    for (i = 0; i < TACL_NUM_OPS; i++) {
        if (op_names[i] == NULL ||
            (i > TACL_AVG && dtype_is_float(dtype))) {
            continue;
        }
        out[n++] = (tacl_op_t)i;
    }
    return n;
}

int tacl__perf_refuse_all(const char *prog, const tacl__perf_opts_t *opts)
{
    if (opts->dtype_all || opts->op_all) {
        fprintf(stderr, "%s: -d all and -o all are for tacl's perf "
                "binaries; name one dtype and op here\n", prog);
        return -1;
    }
    if (opts->mem_cuda) {
        fprintf(stderr, "%s: --mem cuda is for tacl's perf binaries\n",
                prog);
        return -1;
    }
    return 0;
}

const char *tacl__perf_dtype_name(tacl_dtype_t dtype)
{
    size_t i;

    for (i = 0; i < sizeof(dtype_names) / sizeof(dtype_names[0]); i++) {
        if (dtype_names[i].dtype == dtype) {
            return dtype_names[i].name;
        }
    }
    return "invalid";
}

size_t tacl__perf_dtype_size(tacl_dtype_t dtype)
{
    switch (dtype) {
    case TACL_INT8:
    case TACL_UINT8:
        return 1;
    case TACL_FLOAT16:
    case TACL_BFLOAT16:
        return 2;
    case TACL_INT32:
    case TACL_UINT32:
    case TACL_FLOAT32:
        return 4;
    case TACL_INT64:
    case TACL_UINT64:
    case TACL_FLOAT64:
        return 8;
    default:
        return 0;
    }
}

void tacl__perf_get_sizes(tacl_coll_t kind, size_t bytes, int nranks,
                          tacl_dtype_t dtype, tacl__perf_sizes_t *sizes_p)
{
    size_t ts = tacl__perf_dtype_size(dtype);
    size_t count = bytes / ts;
    size_t align = 16 / ts;
    size_t n = (size_t)nranks;
    size_t per = (count / n) & ~(align - 1);
    tacl__perf_sizes_t s;

    switch (kind) {
    case TACL_COLL_ALLGATHER:
        s.count = per;
        s.send_count = per;
        s.recv_count = per * n;
        break;
    case TACL_COLL_REDUCE_SCATTER:
        s.count = per;
        s.send_count = per * n;
        s.recv_count = per;
        break;
    case TACL_COLL_ALLTOALL:
        s.count = count / n;
        s.send_count = s.count * n;
        s.recv_count = s.count * n;
        break;
    case TACL_COLL_ALLTOALLV:
        /* The count column is the unit of tacl__perf_vblock. */
        s.count = count / tacl__perf_vunits(nranks);
        s.send_count = s.count * tacl__perf_vunits(nranks);
        s.recv_count = s.send_count;
        break;
    default:
        s.count = count;
        s.send_count = count;
        s.recv_count = count;
        break;
    }
    s.bytes = (s.send_count > s.recv_count ? s.send_count : s.recv_count) *
              ts;
    *sizes_p = s;
}

/* The exchange's weight of ring distance d (tacl__perf_vblock). */
static size_t vweight(int d)
{
    return d == 0 ? 1 : (size_t)(d % 3);
}

size_t tacl__perf_vunits(int nranks)
{
    size_t units = 0;

    for (int d = 0; d < nranks; d++) {
        units += vweight(d);
    }
    return units;
}

size_t tacl__perf_vblock(int nranks, size_t unit, int from, int to,
                         size_t *sdispl_p, size_t *rdispl_p)
{
    size_t sd = 0, rd = 0;

    for (int k = 0; k < to; k++) {
        sd += vweight((k - from + nranks) % nranks);
    }
    for (int k = 0; k < from; k++) {
        rd += vweight((to - k + nranks) % nranks);
    }
    *sdispl_p = sd * unit;
    *rdispl_p = rd * unit;
    return vweight((to - from + nranks) % nranks) * unit;
}

void tacl__perf_inplace_offsets(tacl_coll_t kind,
                                const tacl__perf_sizes_t *sizes, int rank,
                                size_t *send_off_p, size_t *recv_off_p)
{
    *send_off_p = 0;
    *recv_off_p = 0;
    if (kind == TACL_COLL_ALLTOALLV) {
        /* No in-place form: one buffer, the input past the output. */
        *send_off_p = sizes->recv_count;
    } else if (kind == TACL_COLL_ALLGATHER) {
        *send_off_p = (size_t)rank * sizes->count;
    } else if (kind == TACL_COLL_REDUCE_SCATTER) {
        *recv_off_p = (size_t)rank * sizes->count;
    }
}

size_t tacl__perf_next_size(const tacl__perf_opts_t *opts, size_t bytes)
{
    if (opts->step_factor > 1) {
        if (bytes > SIZE_MAX / opts->step_factor) {
            return SIZE_MAX;
        }
        return bytes * opts->step_factor;
    }
    if (bytes > SIZE_MAX - opts->step_bytes) {
        return SIZE_MAX;
    }
    return bytes + opts->step_bytes;
}

void tacl__perf_max_buffers(tacl_coll_t kind,
                            const tacl__perf_opts_t *opts, int nranks,
                            size_t *send_bytes_p, size_t *recv_bytes_p)
{
    tacl_dtype_t dtypes[TACL_NUM_DTYPES];
    size_t ts, bytes, send = 0, recv = 0;
    tacl__perf_sizes_t s;
    int d, nd = tacl__perf_dtypes(opts, dtypes);

    for (d = 0; d < nd; d++) {
        ts = tacl__perf_dtype_size(dtypes[d]);
        for (bytes = opts->min_bytes; bytes <= opts->max_bytes;
             bytes = tacl__perf_next_size(opts, bytes)) {
            tacl__perf_get_sizes(kind, bytes, nranks, dtypes[d], &s);
            if (s.send_count * ts > send) {
                send = s.send_count * ts;
            }
            if (s.recv_count * ts > recv) {
                recv = s.recv_count * ts;
            }
            if (bytes == SIZE_MAX) {
                break;
            }
        }
    }
    *send_bytes_p = send;
    /* In place, the receive buffer also holds the whole input (beside
     * the output for an all-to-all-v, which has no in-place form). */
    *recv_bytes_p = kind == TACL_COLL_ALLTOALLV ? recv + send
                    : recv > send ? recv : send;
}

void tacl__perf_bandwidth(tacl_coll_t kind,
                          const tacl__perf_sizes_t *sizes, int nranks,
                          double time_us, double *algbw_p, double *busbw_p)
{
    double n = nranks, factor, algbw;

    algbw = time_us > 0 ? (double)sizes->bytes / 1e3 / time_us : 0;
    switch (kind) {
    case TACL_COLL_ALLGATHER:
    case TACL_COLL_REDUCE_SCATTER:
    case TACL_COLL_ALLTOALL:
        factor = (n - 1) / n;
        break;
    case TACL_COLL_ALLREDUCE:
        factor = 2 * (n - 1) / n;
        break;
    case TACL_COLL_ALLTOALLV:
        /* All but the unit each rank keeps crosses to a peer. */
        factor = ((double)tacl__perf_vunits(nranks) - 1) /
                 (double)tacl__perf_vunits(nranks);
        break;
    default:
        factor = 1;
        break;
    }
    *algbw_p = algbw;
    *busbw_p = algbw * factor;
}

/*
 * Command line.
 */
static void usage(FILE *f, const char *prog)
{
    fprintf(f,
        "usage: %s [options]\n"
        "  -b, --minbytes SIZE     smallest size (default 32M)\n"
        "  -e, --maxbytes SIZE     largest size (default 32M)\n"
        "  -i, --stepbytes SIZE    size increment (default 1M)\n"
        "  -f, --stepfactor N      size multiplier; overrides -i\n"
        "  -n, --iters N           timed iterations (default 20)\n"
        "  -w, --warmup_iters N    warmup iterations (default 5)\n"
        "  -m, --agg_iters N       operations per group (default 1)\n"
        "  -c, --check N           check results exactly (default 1;\n"
        "                          0: no check; above 1 checks once)\n"
        "  -o, --op OP             sum, prod, min, max, avg, band, bor, "
        "bxor,\n"
        "                          or all (default sum; the bitwise ones "
        "take\n"
        "                          integer types)\n"
        "  -d, --datatype TYPE     int8 uint8 int32 uint32 int64 uint64\n"
        "                          half bfloat16 float double, or all\n"
        "                          (default float)\n"
        "  -r, --root N            root of broadcast and reduce (0)\n"
        "  -z, --blocking 0|1      0: _nb calls and wait, 1: blocking\n"
        "  -a, --average 0..3      time reported: 0 rank 0, 1 mean,\n"
        "                          2 min, 3 max over ranks (default 1)\n"
        "  -J, --output_file FILE  also write the results as JSON\n"
        "  -R, --local_register 0|1 1: buffers from tacl_mem_alloc (tacl)\n"
        "                          or MPI_Alloc_mem (mpi), as nccl-tests'\n"
        "                          ncclMemAlloc (default 0: malloc)\n"
        "  -A, --algo SPEC         force an algorithm (TACL_ALGO syntax,\n"
        "                          or just a name for this collective)\n"
        "  -Q, --quant BITS[:BLOCK] quantized all-gather (qwZ) or\n"
        "                          reduce-scatter (qgZ): 8 or 4 bits, BLOCK\n"
        "                          values per scale (default 256); results\n"
        "                          are checked against the error bound\n"
        "  -N, --run_cycles N      run the whole sweep N times (default\n"
        "                          1; 0: until interrupted)\n"
        "  -T, --timeout S         seconds an operation may wait: sets\n"
        "                          TACL_TIMEOUT unless already set\n"
        "      --mem host|cuda     where the buffers live (default host;\n"
        "                          tacl binaries only): cuda allocates them\n"
        "                          with cudaMalloc on device LOCAL_RANK\n"
        "                          modulo the devices, fills and checks\n"
        "                          them through cudaMemcpy, and posts on a\n"
        "                          stream of its own (as nccl-tests);\n"
        "                          exits 77 when no device is usable\n"
        "  -t -g -p -G -C -y -M -u -I N   nccl-tests' flags, accepted so\n"
        "                          its command lines run; each given is\n"
        "                          noted in the header with why it has no\n"
        "                          effect (-t and -g allow only 1: tacl\n"
        "                          runs one rank per process)\n"
        "  -h, --help              print this help\n"
        "      --version           print tacl's version\n"
        "SIZE takes a K, M or G suffix (powers of 1024), then an optional\n"
        "B: 512, 4K, 4KB, 1G.\n"
        "Ranks come from tacl-run, torchrun's variables, or mpirun with\n"
        "TACL_ROOT_ADDR=host:port set.\n", prog);
}

/*
 * Numbers and sizes in parse.h's grammar.  On a bad value they return -1
 * and point *why_p at the reason, which the option loop prints after the
 * flag and the value.
 */
static int parse_size(const char *s, size_t *v_p, const char **why_p)
{
    uint64_t v;
    tacl__parse_err_t err = tacl__parse_size(s, 0, SIZE_MAX, &v);

    if (err != TACL_PARSE_OK) {
        *why_p = tacl__parse_strerror(err);
        return -1;
    }
    *v_p = (size_t)v;
    return 0;
}

static int parse_int(const char *s, int lo, int hi, int *v_p,
                     const char **why_p)
{
    static char range[64];
    tacl__parse_err_t err = tacl__parse_int(s, lo, hi, v_p);

    if (err == TACL_PARSE_RANGE) {
        snprintf(range, sizeof(range), "out of range (%d to %d)", lo, hi);
        *why_p = range;
    } else if (err != TACL_PARSE_OK) {
        *why_p = tacl__parse_strerror(err);
    }
    return err == TACL_PARSE_OK ? 0 : -1;
}

/* -Q BITS[:BLOCK]: only all-gather and reduce-scatter have quantized
 * forms.  Returns 0, or -1 after printing why. */
static int parse_quant(const char *s, tacl_coll_t kind,
                       tacl__perf_opts_t *o)
{
    const char *colon = strchr(s, ':');
    size_t bits_len = colon != NULL ? (size_t)(colon - s) : strlen(s);
    char bits_s[8];
    int bits = 0, block = 256;

    if (kind != TACL_COLL_ALLGATHER && kind != TACL_COLL_REDUCE_SCATTER) {
        fprintf(stderr, "-Q: only all_gather_perf (qwZ) and "
                "reduce_scatter_perf (qgZ) have quantized forms\n");
        return -1;
    }
    if (bits_len < sizeof(bits_s)) {
        snprintf(bits_s, sizeof(bits_s), "%.*s", (int)bits_len, s);
    }
    if (bits_len >= sizeof(bits_s) ||
        tacl__parse_int(bits_s, 4, 8, &bits) != TACL_PARSE_OK ||
        (bits != 8 && bits != 4) ||
        (colon != NULL &&
         tacl__parse_int(colon + 1, 1, 1 << 24, &block) != TACL_PARSE_OK)) {
        fprintf(stderr, "-Q %s: expected 8 or 4 bits, optionally :BLOCK "
                "(1..16777216 values per scale)\n", s);
        return -1;
    }
    o->qbits = bits;
    o->qblock = (uint32_t)block;
    return 0;
}

static int parse_dtype(const char *s, tacl_dtype_t *v_p)
{
    size_t i;

    for (i = 0; i < sizeof(dtype_names) / sizeof(dtype_names[0]); i++) {
        if (strcmp(s, dtype_names[i].name) == 0) {
            *v_p = dtype_names[i].dtype;
            return 0;
        }
    }
    return -1;
}

static int parse_op(const char *s, tacl_op_t *v_p)
{
    int i;

    for (i = 0; i < TACL_NUM_OPS; i++) {
        if (op_names[i] != NULL && strcmp(s, op_names[i]) == 0) {
            *v_p = (tacl_op_t)i;
            return 0;
        }
    }
    return -1;
}

enum { OPT_INJECT_ERROR = 1000, OPT_VERSION, OPT_MEM };

/*
 * nccl-tests' flags that have no effect here, and why: each one given is
 * added to the header's note.  -t and -g take only 1.
 */
static const struct {
    char flag;
    const char *why;
} noop_flags[] = {
    {'t', "one rank per process, no threads"},
    {'g', "one rank per process"},
    {'p', "one communicator per process: no parallel init"},
    {'G', "no CUDA graphs: host buffers"},
    {'C', "times are CPU wall-clock times already"},
    {'y', "no streams: host buffers"},
    {'M', "no device memory to report"},
    {'u', "buffers are page aligned"},
    {'I', "no such setting in tacl"},
    {'c', "one exact check says as much as several"},
};

/* Record a no-op flag in o->notes; -1 for a -t or -g other than 1. */
static int note_noop(tacl__perf_opts_t *o, int c, const char *arg)
{
    size_t i, len = strlen(o->notes);
    int v;

    if ((c == 't' || c == 'g') &&
        tacl__parse_int(arg, 1, 1, &v) != TACL_PARSE_OK) {
        fprintf(stderr, "-%c %s: tacl runs one rank per process; start "
                "one process per rank (tacl-run -n N) and give -%c 1\n",
                c, arg, c);
        return -1;
    }
    for (i = 0; i < sizeof(noop_flags) / sizeof(noop_flags[0]); i++) {
        if (noop_flags[i].flag == c && len < sizeof(o->notes)) {
            snprintf(o->notes + len, sizeof(o->notes) - len, "%s-%c %s (%s)",
                     len ? ", " : "", c, arg, noop_flags[i].why);
        }
    }
    return 0;
}

static const struct option long_opts[] = {
    {"minbytes", required_argument, NULL, 'b'},
    {"maxbytes", required_argument, NULL, 'e'},
    {"stepbytes", required_argument, NULL, 'i'},
    {"stepfactor", required_argument, NULL, 'f'},
    {"iters", required_argument, NULL, 'n'},
    {"warmup_iters", required_argument, NULL, 'w'},
    {"agg_iters", required_argument, NULL, 'm'},
    {"check", required_argument, NULL, 'c'},
    {"op", required_argument, NULL, 'o'},
    {"datatype", required_argument, NULL, 'd'},
    {"root", required_argument, NULL, 'r'},
    {"blocking", required_argument, NULL, 'z'},
    {"average", required_argument, NULL, 'a'},
    {"output_file", required_argument, NULL, 'J'},
    {"local_register", required_argument, NULL, 'R'},
    {"algo", required_argument, NULL, 'A'},
    {"quant", required_argument, NULL, 'Q'},
    {"run_cycles", required_argument, NULL, 'N'},
    {"timeout", required_argument, NULL, 'T'},
    {"nthreads", required_argument, NULL, 't'},
    {"ngpus", required_argument, NULL, 'g'},
    {"parallel_init", required_argument, NULL, 'p'},
    {"cudagraph", required_argument, NULL, 'G'},
    {"report_cputime", required_argument, NULL, 'C'},
    {"stream_null", required_argument, NULL, 'y'},
    {"memory_report", required_argument, NULL, 'M'},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, OPT_VERSION},
    {"inject-error", no_argument, NULL, OPT_INJECT_ERROR},
    {"mem", required_argument, NULL, OPT_MEM},
    {NULL, 0, NULL, 0},
};

int tacl__perf_parse(int argc, char **argv, tacl_coll_t kind,
                     tacl__perf_opts_t *opts_p, int *exit_p)
{
    tacl__perf_opts_t o;
    const char *prog = argv[0], *why = NULL;
    int c, bad = 0, factor = 1, timeout = 0;

    memset(&o, 0, sizeof(o));
    o.min_bytes = o.max_bytes = 32u << 20;
    o.step_bytes = 1u << 20;
    o.step_factor = 1;
    o.iters = 20;
    o.warmup = 5;
    o.check = 1;
    o.op = TACL_SUM;
    o.dtype = TACL_FLOAT32;
    o.average = 1;
    o.agg = 1;
    o.cycles = 1;
    optind = 1;
    while (!bad && (c = getopt_long(argc, argv,
                                    "b:e:i:f:n:w:m:c:o:d:r:z:a:J:R:A:Q:hN:T:"
                                    "t:g:p:G:C:y:M:u:I:",
                                    long_opts, NULL)) != -1) {
        switch (c) {
        case 'b':
            bad = parse_size(optarg, &o.min_bytes, &why);
            break;
        case 'e':
            bad = parse_size(optarg, &o.max_bytes, &why);
            break;
        case 'i':
            bad = parse_size(optarg, &o.step_bytes, &why);
            break;
        case 'f':
            bad = parse_int(optarg, 1, 1 << 20, &factor, &why);
            o.step_factor = (size_t)factor;
            break;
        case 'n':
            bad = parse_int(optarg, 1, 1 << 30, &o.iters, &why);
            break;
        case 'w':
            bad = parse_int(optarg, 0, 1 << 30, &o.warmup, &why);
            break;
        case 'm':
            bad = parse_int(optarg, 1, 1 << 20, &o.agg, &why);
            break;
        case 'c':
            /* nccl-tests' -c is a count of checked iterations; one
             * exact check says as much here. */
            bad = parse_int(optarg, 0, 1 << 30, &o.check, &why);
            if (!bad && o.check > 1) {
                note_noop(&o, 'c', optarg);
                o.check = 1;
            }
            break;
        case 'o':
            o.op_all = strcmp(optarg, "all") == 0;
            bad = o.op_all ? 0 : parse_op(optarg, &o.op);
            break;
        case 'd':
            o.dtype_all = strcmp(optarg, "all") == 0;
            bad = o.dtype_all ? 0 : parse_dtype(optarg, &o.dtype);
            break;
        case 'N':
            bad = parse_int(optarg, 0, 1 << 30, &o.cycles, &why);
            break;
        case 'T':
            bad = parse_int(optarg, 1, 1 << 30, &timeout, &why);
            o.timeout_s = timeout;
            break;
        case 't':
        case 'g':
        case 'p':
        case 'G':
        case 'C':
        case 'y':
        case 'M':
        case 'u':
        case 'I':
            bad = note_noop(&o, c, optarg);
            break;
        case OPT_VERSION:
            printf("%s (tacl perf harness) tacl %d.%d.%d\n",
                   strrchr(prog, '/') ? strrchr(prog, '/') + 1 : prog,
                   TACL_VERSION_MAJOR, TACL_VERSION_MINOR,
                   TACL_VERSION_PATCH);
            *exit_p = 0;
            return 1;
        case 'r':
            bad = parse_int(optarg, 0, 1 << 30, &o.root, &why);
            break;
        case 'z':
            bad = parse_int(optarg, 0, 1, &o.blocking, &why);
            break;
        case 'a':
            bad = parse_int(optarg, 0, 3, &o.average, &why);
            break;
        case 'J':
            o.json_path = optarg;
            break;
        case 'R':
            bad = parse_int(optarg, 0, 1, &o.reg, &why);
            break;
        case 'A':
            o.algo = optarg;
            break;
        case 'Q':
            bad = parse_quant(optarg, kind, &o);
            break;
        case 'h':
            usage(stdout, prog);
            *exit_p = 0;
            return 1;
        case OPT_INJECT_ERROR:
            o.inject_error = 1;
            break;
        case OPT_MEM:
            o.mem_cuda = strcmp(optarg, "cuda") == 0;
            bad = !o.mem_cuda && strcmp(optarg, "host") != 0;
            break;
        default:
            usage(stderr, prog);
            *exit_p = 2;
            return 1;
        }
        if (bad && c == OPT_MEM) {
            fprintf(stderr, "%s: bad value '%s' for --mem\n", prog,
                    optarg);
        } else if (bad) {
            fprintf(stderr, "%s: bad value '%s' for -%c%s%s\n", prog,
                    optarg, c, why != NULL ? ": " : "",
                    why != NULL ? why : "");
        }
    }
    if (!bad && optind < argc) {
        fprintf(stderr, "%s: unexpected argument '%s'\n", prog,
                argv[optind]);
        bad = 1;
    }
    if (!bad && o.min_bytes > o.max_bytes) {
        fprintf(stderr, "%s: -b %zu is larger than -e %zu\n", prog,
                o.min_bytes, o.max_bytes);
        bad = 1;
    }
    if (!bad && o.step_factor <= 1 && o.step_bytes == 0 &&
        o.min_bytes != o.max_bytes) {
        fprintf(stderr, "%s: -i 0 needs -f > 1 to reach -e\n", prog);
        bad = 1;
    }
    if (!bad && o.qbits != 0 && o.dtype_all) {
        fprintf(stderr, "%s: -Q quantizes one float type; give -d float, "
                "half or bfloat16, not all\n", prog);
        bad = 1;
    }
    if (!bad && o.op > TACL_AVG && !o.op_all && !o.dtype_all &&
        dtype_is_float(o.dtype)) {
        fprintf(stderr, "%s: -o %s takes an integer type, not -d %s\n",
                prog, op_names[o.op], tacl__perf_dtype_name(o.dtype));
        bad = 1;
    }
    if (!bad && o.op != TACL_SUM && !tacl__perf_has_op(kind)) {
        fprintf(stderr, "%s: %s takes no reduction op (-o)\n", prog,
                tacl__perf_kind_name(kind));
        bad = 1;
    }
    if (bad) {
        usage(stderr, prog);
        *exit_p = 2;
        return 1;
    }
    *opts_p = o;
    return 0;
}

/*
 * Output, in nccl-tests' layout.
 */
static struct {
    double busbw_sum;
    int busbw_count;
    long long wrong;
    int checked;
} totals;

/* The dtype and op of the row printed last, which a JSON row repeats
 * (-d all and -o all vary them within one file). */
static const char *row_dtype = "float", *row_op = "none";

/* The algorithm spec names for this collective ("a=b" items), or NULL. */
static const char *forced_name(tacl_coll_t kind, const char *spec)
{
    static char name[64];
    const char *key = coll_keys[kind], *p, *found = NULL;
    size_t kl = strlen(key), n;

    for (p = spec; p != NULL && *p != '\0'; p = strchr(p, ',')) {
        p += *p == ',';
        if (strncasecmp(p, key, kl) == 0 && p[kl] == '=') {
            found = p + kl + 1;
        }
    }
    if (found == NULL) {
        return NULL;
    }
    n = strcspn(found, ",");
    snprintf(name, sizeof(name), "%.*s", (int)n, found);
    return name;
}

/* The last size the steps reach. */
static size_t last_size(const tacl__perf_opts_t *opts)
{
    size_t bytes = opts->min_bytes, next;

    while ((next = tacl__perf_next_size(opts, bytes)) <= opts->max_bytes &&
           next != bytes && bytes != SIZE_MAX) {
        bytes = next;
    }
    return bytes;
}

void tacl__perf_print_header(FILE *f, const char *prog, const char *library,
                             tacl_coll_t kind,
                             const tacl__perf_opts_t *opts, int nranks)
{
    char host[256] = "unknown";
    const char *base = strrchr(prog, '/');

    gethostname(host, sizeof(host) - 1);
    fprintf(f, "# %s (%s): nRanks %d minBytes %zu maxBytes %zu step: ",
            base ? base + 1 : prog, library, nranks, opts->min_bytes,
            opts->max_bytes);
    if (opts->step_factor > 1) {
        fprintf(f, "%zu(factor)", opts->step_factor);
    } else {
        fprintf(f, "%zu(bytes)", opts->step_bytes);
    }
    fprintf(f, " warmup iters: %d iters: %d agg iters: %d validation: %d "
            "blocking: %d registered: %d\n", opts->warmup, opts->iters,
            opts->agg, opts->check, opts->blocking, opts->reg);
    fprintf(f, "# collective: %s  algorithm: %s", tacl__perf_kind_name(kind),
            opts->algo ? opts->algo : "auto");
    if (opts->algo_run != NULL) {
        const char *forced = forced_name(kind, opts->algo);

        fprintf(f, " (ran: %s%s)", opts->algo_run,
                forced != NULL && strcasecmp(forced, opts->algo_run) != 0
                    ? ", the forced algorithm gave way"
                    : forced == NULL ? " at the first size" : "");
    }
    fprintf(f, "  time: %s over ranks\n",
            opts->average == 0 ? "rank 0" : opts->average == 1 ? "mean" :
            opts->average == 2 ? "min" : "max");
    if (opts->notes[0] != '\0') {
        fprintf(f, "# note: nccl-tests flags without effect here: %s\n",
                opts->notes);
    }
    if (last_size(opts) != opts->max_bytes) {
        fprintf(f, "# note: the steps do not reach -e %zu: the last size is "
                "%zu\n", opts->max_bytes, last_size(opts));
    }
    fprintf(f, "#\n# Using %d ranks, rank 0 pid %d on %s\n#\n", nranks,
            (int)getpid(), host);
    fprintf(f, "# %10s  %12s  %8s  %6s  %6s           out-of-place"
            "                       in-place          \n", "", "", "", "",
            "");
    fprintf(f, "# %10s  %12s  %8s  %6s  %6s", "size", "count", "type",
            "redop", "root");
    fprintf(f, "  %7s  %6s  %6s %6s", "time", "algbw", "busbw", "#wrong");
    fprintf(f, "  %7s  %6s  %6s %6s\n", "time", "algbw", "busbw", "#wrong");
    fprintf(f, "# %10s  %12s  %8s  %6s  %6s", "(B)", "(elements)", "", "",
            "");
    fprintf(f, "  %7s  %6s  %6s  %5s", "(us)", "(GB/s)", "(GB/s)", "");
    fprintf(f, "  %7s  %6s  %6s  %5s\n", "(us)", "(GB/s)", "(GB/s)", "");
    fflush(f);
    memset(&totals, 0, sizeof(totals));
}

void tacl__perf_print_row(FILE *f, tacl_coll_t kind,
                          const tacl__perf_opts_t *opts,
                          const tacl__perf_sizes_t *sizes,
                          const tacl__perf_result_t res[2])
{
    char time_str[32];
    int p;

    row_dtype = tacl__perf_dtype_name(opts->dtype);
    row_op = tacl__perf_has_op(kind) ? op_names[opts->op] : "none";
    fprintf(f, "%12zu  %12zu  %8s  %6s  %6d", sizes->bytes, sizes->count,
            row_dtype, row_op, tacl__perf_has_root(kind) ? opts->root : -1);
    for (p = 0; p < 2; p++) {
        double t = res[p].time_us;

        if (t >= 10000.0) {
            snprintf(time_str, sizeof(time_str), "%7.0f", t);
        } else if (t >= 100.0) {
            snprintf(time_str, sizeof(time_str), "%7.1f", t);
        } else {
            snprintf(time_str, sizeof(time_str), "%7.2f", t);
        }
        if (res[p].wrong >= 0) {
            fprintf(f, "  %7s  %6.2f  %6.2f  %5g", time_str, res[p].algbw,
                    res[p].busbw, (double)res[p].wrong);
            totals.wrong += res[p].wrong;
            totals.checked = 1;
        } else {
            fprintf(f, "  %7s  %6.2f  %6.2f  %5s", time_str, res[p].algbw,
                    res[p].busbw, "N/A");
        }
        totals.busbw_sum += res[p].busbw;
        totals.busbw_count++;
    }
    fprintf(f, "\n");
    fflush(f);
}

long long tacl__perf_print_footer(FILE *f)
{
    double avg = totals.busbw_count ?
                 totals.busbw_sum / totals.busbw_count : 0;

    fprintf(f, "# Out of bounds values : %lld %s\n", totals.wrong,
            totals.wrong ? "FAILED" : "OK");
    fprintf(f, "# Avg bus bandwidth    : %g \n", avg);
    fprintf(f, "#\n");
    fflush(f);
    return totals.wrong;
}

static void json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') {
            fprintf(f, "\\%c", *s);
        } else if ((unsigned char)*s < 0x20) {
            fprintf(f, "\\u%04x", *s);
        } else {
            fputc(*s, f);
        }
    }
    fputc('"', f);
}

FILE *tacl__perf_json_open(const char *path, const char *library,
                           tacl_coll_t kind,
                           const tacl__perf_opts_t *opts, int nranks)
{
    FILE *f = fopen(path, "w");

    if (f == NULL) {
        fprintf(stderr, "perf: cannot write %s: %s\n", path,
                strerror(errno));
        return NULL;
    }
    fprintf(f, "{\n  \"library\": ");
    json_string(f, library);
    fprintf(f, ",\n  \"collective\": \"%s\",\n  \"nranks\": %d,\n"
            "  \"datatype\": \"%s\",\n  \"op\": \"%s\",\n  \"root\": %d,\n"
            "  \"iters\": %d,\n  \"warmup_iters\": %d,\n  \"agg_iters\": %d,"
            "\n  \"blocking\": %d,\n  \"algorithm\": ",
            tacl__perf_kind_name(kind), nranks,
            opts->dtype_all ? "all" : tacl__perf_dtype_name(opts->dtype),
            !tacl__perf_has_op(kind) ? "none" : opts->op_all ? "all" :
            op_names[opts->op],
            tacl__perf_has_root(kind) ? opts->root : -1, opts->iters,
            opts->warmup, opts->agg, opts->blocking);
    json_string(f, opts->algo ? opts->algo : "auto");
    if (opts->algo_run != NULL) {
        fprintf(f, ",\n  \"algorithm_run\": ");
        json_string(f, opts->algo_run);
    }
    fprintf(f, ",\n  \"results\": [");
    return f;
}

static int json_rows;

void tacl__perf_json_row(FILE *f, const tacl__perf_sizes_t *sizes,
                         const tacl__perf_result_t res[2],
                         const char *extra)
{
    static const char *const place[2] = {"out_of_place", "in_place"};
    int p;

    fprintf(f, "%s\n    {\"size\": %zu, \"count\": %zu, \"datatype\": "
            "\"%s\", \"op\": \"%s\"", json_rows++ ? "," : "", sizes->bytes,
            sizes->count, row_dtype, row_op);
    for (p = 0; p < 2; p++) {
        /* Full precision (%.17g keeps every bit of a double). */
        fprintf(f, ", \"%s\": {\"time_us\": %.17g, \"algbw\": %.17g, "
                "\"busbw\": %.17g, \"wrong\": %lld}", place[p],
                res[p].time_us, res[p].algbw, res[p].busbw, res[p].wrong);
    }
    if (extra != NULL) {
        fprintf(f, ", \"counters\": %s", extra);
    }
    fprintf(f, "}");
}

void tacl__perf_json_close(FILE *f)
{
    double avg = totals.busbw_count ?
                 totals.busbw_sum / totals.busbw_count : 0;

    fprintf(f, "\n  ],\n  \"wrong\": %lld,\n  \"avg_busbw\": %.17g\n}\n",
            totals.wrong, avg);
    fclose(f);
    json_rows = 0;
}

double tacl__perf_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_seconds(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

double tacl__perf_median(double *values, int n)
{
    if (n <= 0)
        return 0;
    qsort(values, (size_t)n, sizeof(double), cmp_seconds);
    return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

int tacl__perf_first_contact(const char *opt, const char *prog,
                             const char *what, const char *usage)
{
    if (strcmp(opt, "--version") == 0) {
        printf("%s (%s) tacl %d.%d.%d\n", prog, what, TACL_VERSION_MAJOR,
               TACL_VERSION_MINOR, TACL_VERSION_PATCH);
        return 1;
    }
    if (strcmp(opt, "--help") == 0 || strcmp(opt, "-h") == 0) {
        printf("%s", usage);
        return 1;
    }
    return 0;
}
