/*
 * tacl-info: what this build of tacl is and what it would do here.
 *
 * Sections, in order (--section NAME prints one): version, build (the
 * options of tacl_build_config.h), transports (the built-in table),
 * config (every configuration variable with its value and where that
 * came from: default, environment, or invalid and replaced by the
 * default), algorithms (the registry and the cost model's link table),
 * topology (this machine as detected, or a topology file given with
 * --topo), tuner (the algorithm the tuner picks per collective and size
 * on a layout of NODES x RANKS ranks, rank 0's view).
 *
 * It is a tool of the tree, like the tests: it links the static library
 * and reads the internal headers, so it shows the tables the library
 * itself uses rather than a copy of them.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tacl.h"
#include "algo.h"
#include "comm.h"
#include "config.h"
#include "cost.h"
#include "log.h"
#include "netsel.h"
#include "parse.h"
#include "tacl_build_config.h"
#include "topo.h"
#include "transport.h"

#define INFO_MAX_SIZES 32
#define INFO_MAX_RANKS 4096

typedef struct {
    const char *topo_file;
    const char *section;
    int nodes;
    int ranks_per_node;
    size_t sizes[INFO_MAX_SIZES];
    int nsizes;
} info_opts_t;

static void usage(FILE *f)
{
    fprintf(f,
        "usage: tacl-info [--topo FILE] [--layout NODESxRANKS]\n"
        "                 [--sizes LIST] [--section NAME] [--version]\n"
        "\n"
        "Prints tacl's version, build options, transports, every\n"
        "configuration variable with its value and source, the algorithm\n"
        "registry with the cost model's table, the topology of this\n"
        "machine (or of FILE) and the algorithm the tuner would pick per\n"
        "collective and size on a layout of NODES nodes of RANKS ranks\n"
        "(default 2x4).\n"
        "\n"
        "  --topo FILE          describe a topology file instead of this\n"
        "                       machine (its links also feed the tuner)\n"
        "  --layout NxR         N nodes of R ranks for the tuner (2x4)\n"
        "  --sizes LIST         comma list of buffer sizes, K/M/G suffixes\n"
        "                       (default 4K,64K,1M,16M,128M), as the perf\n"
        "                       binaries' -b: the larger buffer of a call\n"
        "  --section NAME       only one of: version build transports\n"
        "                       config algorithms topology tuner\n"
        "  --version            print the version only\n"
        "  -h, --help           print this help\n");
}

/* A comma list of sizes above 0 (parse.h's grammar, as the perf
 * binaries' -b); 0, or -1 after naming a bad item and why. */
static int parse_sizes(const char *list, info_opts_t *o)
{
    char buf[512], *tok, *save = NULL;

    if (strlen(list) >= sizeof(buf))
        return -1;
    snprintf(buf, sizeof(buf), "%s", list);
    o->nsizes = 0;
    for (tok = strtok_r(buf, ",", &save); tok != NULL;
         tok = strtok_r(NULL, ",", &save)) {
        uint64_t v;
        tacl__parse_err_t err = tacl__parse_size(tok, 1, SIZE_MAX, &v);

        if (o->nsizes == INFO_MAX_SIZES)
            return -1;
        if (err != TACL_PARSE_OK) {
            fprintf(stderr, "tacl-info: bad size '%s' in --sizes: %s\n",
                    tok, err == TACL_PARSE_RANGE ? "a size is above 0"
                                                 : tacl__parse_strerror(err));
            return -1;
        }
        o->sizes[o->nsizes++] = (size_t)v;
    }
    return o->nsizes > 0 ? 0 : -1;
}

/* NODESxRANKS, each a number of parse.h's grammar. */
static int parse_layout(const char *s, info_opts_t *o)
{
    const char *x = strpbrk(s, "xX");
    char nodes[16];
    int n, r;

    if (x == NULL || (size_t)(x - s) >= sizeof(nodes))
        return -1;
    snprintf(nodes, sizeof(nodes), "%.*s", (int)(x - s), s);
    if (tacl__parse_int(nodes, 1, INFO_MAX_RANKS, &n) != TACL_PARSE_OK ||
        tacl__parse_int(x + 1, 1, INFO_MAX_RANKS, &r) != TACL_PARSE_OK ||
        n * r > INFO_MAX_RANKS)
        return -1;
    o->nodes = n;
    o->ranks_per_node = r;
    return 0;
}

static int want(const info_opts_t *o, const char *section)
{
    if (o->section != NULL && strcmp(o->section, section) != 0)
        return 0;
    printf("%s== %s\n", o->section == NULL && strcmp(section, "version")
                            ? "\n" : "", section);
    return 1;
}

static void print_build(void)
{
    printf("version          %s\n", TACL_VERSION_STRING);
    printf("CUDA kernels     %s\n", TACL_HAVE_CUDA ? "yes" : "no");
    printf("UCX transport    %s%s%s\n", TACL_BUILD_UCX ? "yes" : "no",
           TACL_BUILD_UCX ? ", UCX " : "", TACL_BUILD_UCX_VERSION);
    printf("ofi transport    %s%s%s\n", TACL_BUILD_OFI ? "yes" : "no",
           TACL_BUILD_OFI ? ", libfabric " : "", TACL_BUILD_OFI_VERSION);
    printf("hwloc            %s\n", TACL_BUILD_HWLOC_VERSION);
    printf("fuzz harnesses   %s\n", TACL_BUILD_FUZZ ? "yes" : "no");
    printf("build type       %s\n", TACL_BUILD_TYPE);
    printf("compiler         %s\n", TACL_BUILD_CC);
}

static void print_transports(void)
{
    /* In executor/context.c's order of preference; the network last. */
    static const tacl__transport_ops_t *const tls[] = {
        &tacl__tl_self_ops,
        &tacl__tl_shm_ops,
#if TACL_BUILD_UCX
        &tacl__tl_ucx_ops,
#endif
#if TACL_BUILD_OFI
        &tacl__tl_ofi_ops,
#endif
    };
    tacl__net_choice_t net;
    char what[1024];

    printf("%-6s %-26s %s\n", "name", "reaches", "memory");
    for (size_t i = 0; i < sizeof(tls) / sizeof(tls[0]); i++) {
        const tacl__transport_ops_t *t = tls[i];
        char reach[64];

        snprintf(reach, sizeof(reach), "%s%s%s",
                 t->reach & TACL__TL_PEER_SELF ? "self " : "",
                 t->reach & TACL__TL_PEER_NODE ? "same-node " : "",
                 t->reach & TACL__TL_PEER_NET ? "other-nodes" : "");
        printf("%-6s %-26s %s%s\n", t->name, reach,
               t->caps & TACL__TL_CAP_HOST ? "host " : "",
               t->caps & TACL__TL_CAP_CUDA ? "cuda" : "");
    }
    if (!TACL_BUILD_UCX && !TACL_BUILD_OFI)
        printf("(no UCX and no libfabric: this build runs on one node "
               "only)\n");
    /* The network transport a communicator across nodes would take. */
    if (tacl__net_choose(&net) != TACL_OK) {
        printf("network: refused: %s\n", tacl__last_error());
        return;
    }
    tacl__net_describe(&net, what, sizeof(what));
    printf("network: %s, because %s\n", tacl__net_name(net.net), net.why);
    printf("  uses:  %s\n", what);
}

static void print_config(void)
{
    int invalid = 0;

    printf("%-24s %-13s %-20s %s\n", "variable", "source", "value",
           "default");
    for (int i = 0; i < TACL_CFG_COUNT; i++) {
        tacl__cfg_t id = (tacl__cfg_t)i;
        tacl__cfg_src_t src = tacl__config_source(id);
        char name[64];

        snprintf(name, sizeof(name), "TACL_%s", tacl__config_name(id));
        printf("%-24s %-13s \"%s\"", name, tacl__config_source_name(src),
               tacl__config_str(id));
        if (src == TACL_CFG_SRC_INVALID) {
            printf("  (\"%s\" refused, default used)",
                   tacl__config_raw(id));
            invalid++;
        } else if (src == TACL_CFG_SRC_ENV) {
            printf("  (default \"%s\")", tacl__config_default(id));
        }
        printf("\n");
    }
    printf("%d invalid; the warnings went to the log (stderr or "
           "TACL_DEBUG_FILE).  Each variable's meaning: tacl_config_print() "
           "or the README's table.\n", invalid);
}

static void print_algorithms(void)
{
    printf("%-14s %-8s %s\n", "collective", "name", "properties");
    for (const tacl__algo_t *a = tacl__algos; a->name != NULL; a++)
        printf("%-14s %-8s %s\n", tacl_coll_name(a->coll), a->name,
               a->flags & TACL__ALGO_FLAG_HIER ? "hierarchical"
               : a->flags & TACL__ALGO_FLAG_EXPLICIT
                   ? "explicit only (quantized calls)" : "-");
    printf("\ncost model (algorithms/cost.c):\n");
    tacl__cost_print(stdout);
}

/* This machine's node, its links from the defaults and TACL_LINK_*. */
static tacl_status_t detect_topology(tacl__topo_t *topo)
{
    tacl_status_t st;

    memset(topo, 0, sizeof(*topo));
    topo->nodes = calloc(1, sizeof(*topo->nodes));
    if (topo->nodes == NULL)
        return TACL_ERR_NO_MEMORY;
    topo->n_nodes = 1;
    st = tacl__topo_detect_node(&topo->nodes[0]);
    if (st == TACL_OK)
        st = tacl__topo_set_links(topo);
    return st;
}

static tacl_status_t load_topology(const info_opts_t *o, tacl__topo_t *topo)
{
    tacl_status_t st;

    if (o->topo_file == NULL)
        return detect_topology(topo);
    st = tacl__topo_load(o->topo_file, topo);
    if (st != TACL_OK)
        return st;
    return tacl__topo_set_links(topo);
}

static const struct {
    tacl_coll_t type;
    int per_rank;       /* count is per rank (the buffer over nranks) */
} tuner_colls[] = {
    {TACL_COLL_ALLGATHER, 1},
    {TACL_COLL_REDUCE_SCATTER, 1},
    {TACL_COLL_ALLREDUCE, 0},
    {TACL_COLL_BROADCAST, 0},
    {TACL_COLL_REDUCE, 0},
    {TACL_COLL_ALLTOALL, 1},
    {TACL_COLL_ALLTOALLV, 1},   /* even blocks, as an estimate prices */
    {TACL_COLL_ALLGATHERV, 1},
};

/*
 * The decider's answer per collective and size, for a blocking call
 * alone on the layout: the same tacl__algo_choose a real call asks, with
 * TACL_ALGO's table; the fast engine where one node of 2 to
 * TACL__FAST_MAX_RANKS ranks would have an area of TACL_FAST_MAX bytes.
 */
static void print_tuner(const info_opts_t *o, const tacl__topo_t *topo)
{
    int nranks = o->nodes * o->ranks_per_node;
    int *node_of = calloc((size_t)nranks, sizeof(int));
    tacl__topo_view_t view;
    const size_t ncoll = sizeof(tuner_colls) / sizeof(tuner_colls[0]);

    if (node_of == NULL) {
        printf("out of memory\n");
        return;
    }
    for (int r = 0; r < nranks; r++)
        node_of[r] = r / o->ranks_per_node;
    tacl__topo_view_make(&view, 0, nranks, node_of, topo->link,
                         topo->n_nodes > 0 ? &topo->nodes[0] : NULL);
    if (o->nodes == 1 && nranks >= 2 && nranks <= TACL__FAST_MAX_RANKS)
        view.fast_max = TACL_MIN(tacl__config_size(TACL_CFG_FAST_MAX),
                                 TACL__FAST_CAP_MAX);
    printf("layout %d nodes x %d ranks, float32, links of the topology "
           "above; TACL_ALGO \"%s\"; a blocking call alone (\"fast\": the "
           "small-message engine)\n", o->nodes, o->ranks_per_node,
           tacl__config_str(TACL_CFG_ALGO));
    printf("%12s", "size (B)");
    for (size_t c = 0; c < ncoll; c++)
        printf("  %-14s", tacl_coll_name(tuner_colls[c].type));
    printf("\n");
    for (int s = 0; s < o->nsizes; s++) {
        printf("%12zu", o->sizes[s]);
        for (size_t c = 0; c < ncoll; c++) {
            tacl__coll_args_t args;
            tacl__choice_t choice;

            memset(&args, 0, sizeof(args));
            args.type = tuner_colls[c].type;
            args.count = o->sizes[s] / 4 /
                         (tuner_colls[c].per_rank ? (size_t)nranks : 1);
            args.dtype = TACL_FLOAT32;
            args.op = TACL_SUM;
            args.memtype = TACL_MEM_HOST;
            tacl__coll_mark(&args);
            if (args.count == 0 ||
                tacl__algo_choose(&view, &args, tacl__choose_force(), NULL,
                                  TACL__CHOOSE_ALONE, &choice) != TACL_OK)
                printf("  %-14s", "-");
            else
                printf("  %-14s", choice.algo->name);
        }
        printf("\n");
    }
    free(node_of);
}

int main(int argc, char **argv)
{
    info_opts_t o = {.nodes = 2, .ranks_per_node = 4};
    tacl__topo_t topo;
    tacl_status_t st;
    char desc[256];
    int version = 0;

    (void)parse_sizes("4K,64K,1M,16M,128M", &o);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--version") == 0) {
            tacl_get_version(&version);
            printf("tacl-info (tacl) %d.%d.%d\n", version / 10000,
                   version / 100 % 100, version % 100);
            return 0;
        } else if (strcmp(a, "--topo") == 0 && v != NULL) {
            o.topo_file = v;
            i++;
        } else if (strcmp(a, "--layout") == 0 && v != NULL) {
            if (parse_layout(v, &o) != 0) {
                fprintf(stderr, "tacl-info: --layout %s: expected "
                        "NODESxRANKS such as 2x4 (at most %d ranks)\n", v,
                        INFO_MAX_RANKS);
                return 2;
            }
            i++;
        } else if (strcmp(a, "--sizes") == 0 && v != NULL) {
            if (parse_sizes(v, &o) != 0) {
                fprintf(stderr, "tacl-info: --sizes %s: expected a comma "
                        "list of up to %d sizes such as 4K,1M,64M\n", v,
                        INFO_MAX_SIZES);
                return 2;
            }
            i++;
        } else if (strcmp(a, "--section") == 0 && v != NULL) {
            o.section = v;
            i++;
        } else {
            fprintf(stderr, "tacl-info: unknown or incomplete option '%s' "
                    "(see --help)\n", a);
            return 2;
        }
    }
    if (o.section != NULL && strcmp(o.section, "version") &&
        strcmp(o.section, "build") && strcmp(o.section, "transports") &&
        strcmp(o.section, "config") && strcmp(o.section, "algorithms") &&
        strcmp(o.section, "topology") && strcmp(o.section, "tuner")) {
        fprintf(stderr, "tacl-info: no section '%s': version build "
                "transports config algorithms topology tuner\n", o.section);
        return 2;
    }
    /* Log the configuration's warnings now, before any output. */
    tacl__config_report_once();
    st = load_topology(&o, &topo);
    if (st != TACL_OK) {
        fprintf(stderr, "tacl-info: %s: %s\n",
                o.topo_file != NULL ? o.topo_file : "topology detection",
                tacl_last_error());
        return 1;
    }
    if (want(&o, "version")) {
        tacl__build_describe(desc, sizeof(desc));
        printf("%s\n", desc);
    }
    if (want(&o, "build"))
        print_build();
    if (want(&o, "transports"))
        print_transports();
    if (want(&o, "config"))
        print_config();
    if (want(&o, "algorithms"))
        print_algorithms();
    if (want(&o, "topology")) {
        printf("# %s\n", o.topo_file != NULL ? o.topo_file
                                             : "this machine, as detected");
        tacl__topo_write(&topo, stdout);
    }
    if (want(&o, "tuner"))
        print_tuner(&o, &topo);
    tacl__topo_fini(&topo);
    return 0;
}
