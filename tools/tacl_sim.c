/*
 * tacl-sim: predicted times of collectives on a modelled cluster, from
 * the schedules the real builders make for every rank (sim/sim.h), in
 * the perf binaries' nccl-tests table (perf/common.c prints it).
 *
 *   tacl-sim --topo topologies/p4d.24xlarge.topo --nodes 32 \
 *            -b 1M -e 1G -f 4 -A ring,mics,hring,horing --tuner
 *
 * Its own options come first out of argv; the rest (-b -e -i -f -d -o
 * -A -Q -J) are the perf binaries' and mean the same.  -A takes a list
 * of algorithm names for the collective ("auto" is the closed-form
 * tuner's choice); each gets a table.  --tuner adds, per size, the
 * closed-form tuner's choice, the fastest algorithm by simulation and
 * how much slower the former is.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../perf/common.h" /* core has a common.h too */
#include "config.h"
#include "log.h"
#include "parse.h"
#include "sim.h"
#include "sparse.h"
#include "sparse_sim.h"
#include "sparse_trace.h"

/* The most nodes, and ranks per node, a simulation takes. */
#define SIM_MAX_COUNT (1 << 20)

typedef struct {
    const char *topo;
    const char *trace;
    const char *sparse;
    int nodes, rpn, device, tuner;
    const char *coll;
    tacl_coll_t kind;
} sim_opts_t;

static const tacl_coll_t coll_of_kind[TACL_NUM_COLLS] = {
    TACL_COLL_ALLGATHER, TACL_COLL_REDUCE_SCATTER, TACL_COLL_ALLREDUCE,
    TACL_COLL_BROADCAST, TACL_COLL_REDUCE, TACL_COLL_ALLTOALL,
    TACL_COLL_SEND,
};

static void usage(FILE *f)
{
    fprintf(f,
        "usage: tacl-sim --topo FILE [--nodes N] [--ranks-per-node G]\n"
        "                [--coll NAME] [--mem host|device] [--tuner]\n"
        "                [--trace FILE] [--sparse SPEC]\n"
        "                [perf options: -b -e -i -f -d -o -A -Q -J]\n"
        "  --topo FILE           topology file (topologies/*.topo, or a\n"
        "                        TACL_TOPO_DUMP_FILE dump); its first node\n"
        "                        line describes every node\n"
        "  --nodes N             nodes (default: the file's node count)\n"
        "  --ranks-per-node G    ranks per node (default: the node's GPUs,\n"
        "                        else its cores)\n"
        "  --coll NAME           all_gather (default), reduce_scatter,\n"
        "                        all_reduce, broadcast, reduce, alltoall\n"
        "  --mem host|device     buffers' memory (default: device when the\n"
        "                        nodes have GPUs)\n"
        "  --tuner               per size: the closed-form tuner's choice,\n"
        "                        the simulated best, and their gap\n"
        "  --trace FILE          write every simulated operation's step\n"
        "                        timeline of every rank to FILE (the\n"
        "                        format of TACL_STEP_TRACE; operations\n"
        "                        numbered from 0 in the order simulated:\n"
        "                        per algorithm and size out of place,\n"
        "                        then in place)\n"
        "  --sparse SPEC         the sparse all-reduce's schemes on rows of\n"
        "                        the trace generator instead: SPEC is\n"
        "                        density=D[,rows=N][,row-len=L][,zipf=S]\n"
        "                        [,seed=X] (defaults 1048576 rows of 64\n"
        "                        float32, Zipf 1, seed 1)\n"
        "  -A a,b,...            algorithms to compare (names for the\n"
        "                        collective; auto: the tuner's choice)\n"
        "Times are predictions of the model in sim/sim.h, not measurements.\n");
}

static int kind_by_name(const char *name, tacl_coll_t *kind_p)
{
    for (int k = 0; k < TACL_COLL_SEND; k++)
        if (strcmp(name, tacl__perf_kind_name((tacl_coll_t)k)) == 0 ||
            strcmp(name, tacl_coll_name((tacl_coll_t)k)) == 0) {
            *kind_p = (tacl_coll_t)k;
            return 0;
        }
    return -1;
}

/*
 * Takes tacl-sim's own options out of argv (compacting it); returns 0,
 * or 2 after printing why the command line is bad, 1 after --help.
 */
static int own_options(int *argc, char **argv, sim_opts_t *o)
{
    int out = 1;

    o->device = -1;
    o->coll = "all_gather";
    for (int i = 1; i < *argc; i++) {
        const char *a = argv[i], *v = i + 1 < *argc ? argv[i + 1] : NULL;
        tacl__parse_err_t err = TACL_PARSE_OK;
        int bad = 0;

        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 1;
        }
        if (strcmp(a, "--tuner") == 0) {
            o->tuner = 1;
            continue;
        }
        if (strcmp(a, "--topo") != 0 && strcmp(a, "--nodes") != 0 &&
            strcmp(a, "--ranks-per-node") != 0 &&
            strcmp(a, "--coll") != 0 && strcmp(a, "--mem") != 0 &&
            strcmp(a, "--trace") != 0 && strcmp(a, "--sparse") != 0) {
            argv[out++] = argv[i];
            continue;
        }
        if (v == NULL) {
            fprintf(stderr, "tacl-sim: %s needs a value\n", a);
            return 2;
        }
        i++;
        if (strcmp(a, "--topo") == 0)
            o->topo = v;
        else if (strcmp(a, "--nodes") == 0)
            err = tacl__parse_int(v, 1, SIM_MAX_COUNT, &o->nodes);
        else if (strcmp(a, "--ranks-per-node") == 0)
            err = tacl__parse_int(v, 1, SIM_MAX_COUNT, &o->rpn);
        else if (strcmp(a, "--coll") == 0)
            o->coll = v;
        else if (strcmp(a, "--trace") == 0)
            o->trace = v;
        else if (strcmp(a, "--sparse") == 0)
            o->sparse = v;
        else if (strcmp(v, "host") == 0 || strcmp(v, "device") == 0)
            o->device = strcmp(v, "device") == 0;
        else
            bad = 1;
        if (err != TACL_PARSE_OK) {
            fprintf(stderr, "tacl-sim: bad value '%s' for %s: %s (1 to "
                    "%d)\n", v, a, tacl__parse_strerror(err), SIM_MAX_COUNT);
            return 2;
        }
        if (bad) {
            fprintf(stderr, "tacl-sim: bad value '%s' for %s (host or "
                    "device)\n", v, a);
            return 2;
        }
    }
    *argc = out;
    argv[out] = NULL;
    if (o->topo == NULL) {
        fprintf(stderr, "tacl-sim: --topo FILE is required\n");
        usage(stderr);
        return 2;
    }
    if (kind_by_name(o->coll, &o->kind) != 0) {
        fprintf(stderr, "tacl-sim: unknown collective '%s'\n", o->coll);
        return 2;
    }
    return 0;
}

/* The operation of one size as a caller would post it. */
static tacl__coll_args_t op_args(const sim_opts_t *so,
                                 const tacl__perf_opts_t *po,
                                 const tacl__perf_sizes_t *sz, int in_place)
{
    static char buf;
    tacl__coll_args_t a;

    memset(&a, 0, sizeof(a));
    a.type = coll_of_kind[so->kind];
    a.count = sz->count;
    a.dtype = po->dtype;
    a.op = po->op;
    a.root = po->root;
    a.memtype = so->device ? TACL_MEM_CUDA : TACL_MEM_HOST;
    a.chunk_bytes = (uint64_t)tacl__config_int(TACL_CFG_CHUNK_SIZE);
    a.qbits = po->qbits;
    a.qblock = po->qblock ? po->qblock : 256;
    a.shm_map = tacl__config_int(TACL_CFG_SHM_MAP) != 0;
    a.sendbuf = in_place ? &buf : NULL;
    a.recvbuf = in_place ? &buf : NULL;
    return a;
}

static void fail_msg(const char *what)
{
    fprintf(stderr, "tacl-sim: %s: %s\n", what, tacl__last_error());
}

/*
 * "ring" or "auto" into the table the decider reads: the named row for
 * the collective, or for auto TACL_ALGO's (and the fast engine, as a
 * blocking call alone would take it).  0, or -1 after the parser's
 * message.
 */
static int algo_force(const sim_opts_t *so, const char *name,
                      tacl__algo_force_t *force, unsigned *flags_p)
{
    char spec[96];

    *flags_p = 0;
    if (strcmp(name, "auto") == 0) {
        *flags_p = TACL__CHOOSE_ALONE;
        return tacl__algo_force_parse(tacl__config_str(TACL_CFG_ALGO),
                                      force) == TACL_OK ? 0 : -1;
    }
    snprintf(spec, sizeof(spec), "%s=%s", tacl_coll_name(so->kind), name);
    return tacl__algo_force_parse(spec, force) == TACL_OK ? 0 : -1;
}

/* One algorithm's table over every size; 0, or 1 after an error. */
static int run_algo(const sim_opts_t *so, tacl__perf_opts_t po,
                    const tacl__sim_cluster_t *c, const char *name,
                    FILE *json)
{
    tacl__algo_force_t force;
    unsigned flags;
    size_t bytes;
    uint64_t sizes_bytes[TACL_NUM_LINK_CLASSES];
    tacl__perf_sizes_t sz;

    if (algo_force(so, name, &force, &flags) != 0) {
        fail_msg(name);
        return 1;
    }
    po.algo = name;
    printf("# simulated on %d nodes of %d ranks (%s memory)\n", c->n_nodes,
           c->nranks / c->n_nodes, so->device ? "device" : "host");
    tacl__perf_print_header(stdout, "tacl-sim", "tacl-sim", so->kind, &po,
                            c->nranks);
    for (bytes = po.min_bytes; bytes <= po.max_bytes;
         bytes = tacl__perf_next_size(&po, bytes)) {
        tacl__perf_result_t res[2];
        tacl__sim_result_t sr[2];
        char extra[512];

        tacl__perf_get_sizes(so->kind, bytes, c->nranks, po.dtype, &sz);
        for (int p = 0; p < 2; p++) {
            tacl__coll_args_t a = op_args(so, &po, &sz, p);

            if (tacl__sim_run(c, &a, &force, flags, &sr[p]) != TACL_OK) {
                fail_msg(name);
                return 1;
            }
            res[p].time_us = sr[p].seconds * 1e6;
            res[p].wrong = -1;
            res[p].max_error = 0;
            tacl__perf_bandwidth(so->kind, &sz, c->nranks, res[p].time_us,
                                 &res[p].algbw, &res[p].busbw);
        }
        tacl__perf_print_row(stdout, so->kind, &po, &sz, res);
        for (int k = 0; k < TACL_NUM_LINK_CLASSES; k++)
            sizes_bytes[k] = sr[0].bytes[k];
        printf("#   %s: bytes self %llu host %llu gpu %llu net %llu; "
               "%llu steps, %llu events\n",
               sr[0].algo ? sr[0].algo->name : "?",
               (unsigned long long)sizes_bytes[0],
               (unsigned long long)sizes_bytes[1],
               (unsigned long long)sizes_bytes[2],
               (unsigned long long)sizes_bytes[3],
               (unsigned long long)sr[0].steps,
               (unsigned long long)sr[0].events);
        if (json != NULL) {
            snprintf(extra, sizeof(extra),
                     "{\"algorithm\": \"%s\", \"nodes\": %d, \"bytes\": "
                     "{\"self\": %llu, \"host\": %llu, \"gpu\": %llu, "
                     "\"net\": %llu}}",
                     sr[0].algo ? sr[0].algo->name : "?", c->n_nodes,
                     (unsigned long long)sizes_bytes[0],
                     (unsigned long long)sizes_bytes[1],
                     (unsigned long long)sizes_bytes[2],
                     (unsigned long long)sizes_bytes[3]);
            tacl__perf_json_row(json, &sz, res, extra);
        }
        if (bytes == SIZE_MAX)
            break;
    }
    tacl__perf_print_footer(stdout);
    return 0;
}

/* The sparse case SPEC names; 0, or 2 after saying why it is bad. */
static int sparse_spec(const char *spec, uint64_t *rows, size_t *row_len,
                       double *density, double *zipf, uint64_t *seed)
{
    char *copy = strdup(spec), *save = NULL;
    int rc = copy == NULL;

    for (char *kv = strtok_r(copy, ",", &save); kv != NULL && rc == 0;
         kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '='), *end = NULL;

        if (eq == NULL) {
            rc = 2;
            break;
        }
        *eq++ = '\0';
        if (strcmp(kv, "density") == 0)
            *density = strtod(eq, &end);
        else if (strcmp(kv, "zipf") == 0)
            *zipf = strtod(eq, &end);
        else if (strcmp(kv, "rows") == 0)
            *rows = strtoull(eq, &end, 0);
        else if (strcmp(kv, "row-len") == 0)
            *row_len = (size_t)strtoull(eq, &end, 0);
        else if (strcmp(kv, "seed") == 0)
            *seed = strtoull(eq, &end, 0);
        rc = end == NULL || *end != '\0' || end == eq ? 2 : 0;
    }
    free(copy);
    if (rc == 0 && (!(*density > 0 && *density <= 1) || *rows == 0 ||
                    *rows > UINT32_MAX || *row_len == 0))
        rc = 2;
    if (rc != 0)
        fprintf(stderr, "tacl-sim: bad --sparse '%s' (density=D in (0, 1]"
                "[,rows=N][,row-len=L][,zipf=S][,seed=X])\n", spec);
    return rc;
}

/*
 * Every sparse scheme on the trace's rows: predicted time, against
 * dense, and Zen's speed-up over it; the trace's densification and
 * Zen's and even ranges' imbalance (Definition 3.6).
 */
static int run_sparse(const sim_opts_t *so, const tacl__sim_cluster_t *c)
{
    uint64_t rows = 1u << 20, seed = 1;
    size_t row_len = 64, nnz, got, nunion = 0;
    double density = 0, zipf = 1.0, t[TACL__SSIM_COUNT];
    int n = c->nranks, rc = sparse_spec(so->sparse, &rows, &row_len,
                                        &density, &zipf, &seed);
    int64_t **idx;
    size_t *cnt;
    tacl__sparse_trace_t tr;

    if (rc != 0)
        return rc;
    nnz = (size_t)(density * (double)rows + 0.5);
    idx = calloc((size_t)n, sizeof(*idx));
    cnt = calloc((size_t)n, sizeof(*cnt));
    if (idx == NULL || cnt == NULL ||
        tacl__sparse_trace_init(&tr, rows, zipf, seed) != TACL_OK) {
        fail_msg("sparse trace");
        free(idx);
        free(cnt);
        return 1;
    }
    for (int r = 0; r < n && rc == 0; r++) {
        idx[r] = malloc((nnz ? nnz : 1) * sizeof(int64_t));
        if (idx[r] == NULL) {
            rc = 1;
            break;
        }
        tacl__sparse_trace_rank(&tr, r, nnz, idx[r], &got);
        cnt[r] = got;
    }
    tacl__sparse_trace_fini(&tr);
    printf("# sparse all-reduce simulated on %d nodes of %d ranks: %llu "
           "rows of %zu float32, density %g, Zipf %g\n", c->n_nodes,
           n / c->n_nodes, (unsigned long long)rows, row_len, density,
           zipf);
    for (int o = 0; o < 2 && rc == 0; o++) {
        tacl__owner_t own;
        double push, pull;

        tacl__owner_init(&own, o ? TACL__OWNER_RANGE : TACL__OWNER_HASH, n,
                         rows, TACL__SPARSE_OWNER_SEED);
        if (tacl__sparse_imbalance(&own, (const void *const *)idx, 1, cnt, n,
                                   &push, &pull, &nunion) != TACL_OK) {
            rc = 1;
            break;
        }
        printf("# %s owners: push imbalance %.3f, pull %.3f\n",
               o ? "even-range" : "hashed (zen)", push, pull);
    }
    if (rc == 0)
        printf("# union %zu rows, densification %.2f, n/(1+d) %.2f\n",
               nunion, (double)nunion / (double)nnz,
               n / (1.0 + (double)nunion / (double)nnz));
    tacl__ssim_case_t k = {.nrows = rows, .row_len = row_len, .elem = 4,
                           .index_bytes = 4, .nranks = n,
                           .idx = (const int64_t *const *)idx, .nnz = cnt};

    printf("%-10s %12s %10s %10s\n", "scheme", "time_ms", "x_dense",
           "zen_x");
    for (int s = 0; s < TACL__SSIM_COUNT && rc == 0; s++) {
        tacl__ssim_result_t res;
        tacl_status_t st = tacl__sim_sparse(c, &k, (tacl__ssim_scheme_t)s,
                                            &res);

        /* The hierarchical schemes do not run on uneven nodes. */
        t[s] = st == TACL_OK ? res.seconds : 0;
        if (st != TACL_OK && st != TACL_ERR_UNSUPPORTED) {
            fail_msg(tacl__ssim_name((tacl__ssim_scheme_t)s));
            rc = 1;
        }
    }
    for (int s = 0; s < TACL__SSIM_COUNT && rc == 0; s++) {
        if (t[s] == 0)
            printf("%-10s %12s (needs as many ranks on every node)\n",
                   tacl__ssim_name((tacl__ssim_scheme_t)s), "-");
        else
            printf("%-10s %12.3f %10.2f %10.2f\n",
                   tacl__ssim_name((tacl__ssim_scheme_t)s), t[s] * 1e3,
                   t[TACL__SSIM_DENSE] / t[s], t[s] / t[TACL__SSIM_ZEN]);
    }
    for (int r = 0; r < n; r++)
        free(idx[r]);
    free(idx);
    free(cnt);
    return rc;
}

/* Per size: the closed-form choice, the simulated best and their gap. */
static int run_tuner(const sim_opts_t *so, const tacl__perf_opts_t *po,
                     const tacl__sim_cluster_t *c)
{
    tacl__topo_view_t v = tacl__sim_view(c, 0);
    size_t bytes;

    printf("# tuner: closed-form choice against the simulated best "
           "(out of place)\n");
    printf("# %10s  %-8s %10s  %-8s %10s  %6s\n", "size", "model",
           "time(us)", "sim-best", "time(us)", "gap%");
    for (bytes = po->min_bytes; bytes <= po->max_bytes;
         bytes = tacl__perf_next_size(po, bytes)) {
        tacl__perf_sizes_t sz;
        tacl__coll_args_t a;
        const tacl__algo_t *model, *best;
        tacl__sim_result_t rm, rb;

        tacl__perf_get_sizes(so->kind, bytes, c->nranks, po->dtype, &sz);
        a = op_args(so, po, &sz, 0);
        model = tacl__algo_select(&a, &v, NULL);
        if (tacl__sim_run(c, &a, NULL, 0, &rm) != TACL_OK ||
            tacl__sim_best(c, &a, &best, &rb) != TACL_OK || best == NULL) {
            fail_msg("tuner");
            return 1;
        }
        printf("  %10zu  %-8s %10.1f  %-8s %10.1f  %6.1f\n", sz.bytes,
               model ? model->name : "-", rm.seconds * 1e6, best->name,
               rb.seconds * 1e6,
               rb.seconds > 0 ? (rm.seconds / rb.seconds - 1) * 100 : 0.0);
        if (bytes == SIZE_MAX)
            break;
    }
    return 0;
}

int main(int argc, char **argv)
{
    sim_opts_t so;
    tacl__perf_opts_t po;
    tacl__topo_t topo;
    tacl__sim_cluster_t c;
    FILE *json = NULL;
    uint64_t trace_ops = 0;
    int rc, ex = 0;
    char *list, *save = NULL, *name;

    memset(&so, 0, sizeof(so));
    rc = own_options(&argc, argv, &so);
    if (rc != 0)
        return rc == 1 ? 0 : 2;
    if (tacl__perf_parse(argc, argv, so.kind, &po, &ex) != 0)
        return ex;
    if (tacl__topo_load(so.topo, &topo) != TACL_OK) {
        fail_msg(so.topo);
        return 1;
    }
    if (so.nodes == 0)
        so.nodes = topo.n_nodes;
    if (so.device < 0)
        so.device = topo.n_nodes > 0 && topo.nodes[0].gpus > 0;
    if (tacl__sim_cluster_replicate(&c, &topo, so.nodes, so.rpn) !=
        TACL_OK) {
        fail_msg("cluster");
        tacl__topo_fini(&topo);
        return 1;
    }
    tacl__topo_fini(&topo);
    /* A real communicator's fast engine: an area of TACL_FAST_MAX (the
     * views use it on one node of 2 to TACL__FAST_MAX_RANKS ranks). */
    c.fast_max = tacl__config_size(TACL_CFG_FAST_MAX);
    if (c.fast_max > TACL__FAST_CAP_MAX)
        c.fast_max = TACL__FAST_CAP_MAX;
    if (so.trace != NULL) {
        c.trace = fopen(so.trace, "w");
        c.trace_ops = &trace_ops;
        if (c.trace == NULL) {
            fprintf(stderr, "tacl-sim: cannot write %s: %s\n", so.trace,
                    strerror(errno));
            tacl__sim_cluster_fini(&c);
            return 1;
        }
        fprintf(c.trace, "# op rank step kind peer bytes ready_us "
                "start_us done_us\n");
    }
    if (po.json_path != NULL) {
        json = tacl__perf_json_open(po.json_path, "tacl-sim", so.kind, &po,
                                    c.nranks);
        if (json == NULL) {
            tacl__sim_cluster_fini(&c);
            return 1;
        }
    }
    if (so.sparse != NULL) {
        rc = run_sparse(&so, &c);
        tacl__sim_cluster_fini(&c);
        return rc;
    }
    list = strdup(po.algo != NULL ? po.algo : "auto");
    rc = list == NULL;
    for (name = strtok_r(list, ",", &save); name != NULL && rc == 0;
         name = strtok_r(NULL, ",", &save))
        rc = run_algo(&so, po, &c, name, json);
    if (rc == 0 && so.tuner)
        rc = run_tuner(&so, &po, &c);
    free(list);
    if (json != NULL)
        tacl__perf_json_close(json);
    if (c.trace != NULL && fclose(c.trace) != 0 && rc == 0) {
        fprintf(stderr, "tacl-sim: cannot write %s: %s\n", so.trace,
                strerror(errno));
        rc = 1;
    }
    tacl__sim_cluster_fini(&c);
    return rc;
}
