/*
 * Topology files: parse, write and summarise (the format is described in
 * topo.h).  Parsing is strict: an unknown statement, key or malformed
 * number is an error that names the file and line, since a silently
 * misread machine description would mislead the tuner.
 */
#define _GNU_SOURCE
#include <float.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "parse.h"
#include "topo.h"

static const char *const link_names[TACL_NUM_LINK_CLASSES] = {
    [TACL_LINK_SELF] = "self",
    [TACL_LINK_HOST] = "host",
    [TACL_LINK_GPU] = "gpu",
    [TACL_LINK_NET] = "net",
};

const char *tacl__link_class_name(tacl_link_class_t cls)
{
    return (unsigned)cls < TACL_NUM_LINK_CLASSES ? link_names[cls] : "invalid";
}

void tacl__topo_fini(tacl__topo_t *topo)
{
    free(topo->nodes);
    free(topo->node_of);
    memset(topo, 0, sizeof(*topo));
}

tacl_link_class_t tacl__topo_link_class(const tacl__topo_t *topo, int a,
                                        int b, int device_memory)
{
    const tacl__node_desc_t *node;

    if (a == b)
        return TACL_LINK_SELF;
    if (topo->node_of[a] != topo->node_of[b])
        return TACL_LINK_NET;
    /* Host memory inside a node moves through host memory whatever GPUs
     * the node has; only device buffers use the GPUs' peer links. */
    node = &topo->nodes[topo->node_of[a]];
    return device_memory && node->gpus > 0 && node->gpu_peer
               ? TACL_LINK_GPU
               : TACL_LINK_HOST;
}

typedef struct {
    const char *name;
    int line;
} where_t;

#define PARSE_ERROR(w, ...)                                                  \
    parse_error((w), __VA_ARGS__)

static tacl_status_t parse_error(const where_t *w, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static tacl_status_t parse_error(const where_t *w, const char *fmt, ...)
{
    char msg[256];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return tacl__error(TACL_ERR_INVALID_ARG, TOPO, "%s:%d: %s", w->name,
                       w->line, msg);
}

static tacl_status_t parse_double(const where_t *w, const char *key,
                                  const char *s, double *v_p)
{
    /* Finite: "nan" and "inf" would poison every cost the tuner
     * computes from this link (parse.h refuses them). */
    if (tacl__parse_double(s, 0, DBL_MAX, v_p) != TACL_PARSE_OK)
        return PARSE_ERROR(w, "%s=\"%s\" is not a finite non-negative "
                           "number", key, s);
    return TACL_OK;
}

static tacl_status_t parse_int(const where_t *w, const char *key,
                               const char *s, int *v_p)
{
    if (tacl__parse_int(s, 0, 1 << 20, v_p) != TACL_PARSE_OK)
        return PARSE_ERROR(w, "%s=\"%s\" is not a count", key, s);
    return TACL_OK;
}

/*
 * Names are stored in TACL__TOPO_NAME_LEN bytes.  A longer one is refused
 * rather than cut: two long names sharing a prefix would become one node,
 * and the dumped file would no longer load.
 */
static tacl_status_t name_too_long(const where_t *w, const char *what,
                                   const char *name)
{
    return PARSE_ERROR(w, "%s name \"%.16s...\" has %zu characters; at "
                       "most %d are allowed", what, name, strlen(name),
                       TACL__TOPO_NAME_LEN - 1);
}

/* Split "key=value"; the value points into tok. */
static tacl_status_t split_kv(const where_t *w, char *tok, char **value_p)
{
    char *eq = strchr(tok, '=');

    if (eq == NULL || eq == tok || eq[1] == '\0')
        return PARSE_ERROR(w, "\"%s\" is not key=value", tok);
    *eq = '\0';
    *value_p = eq + 1;
    return TACL_OK;
}

static tacl_status_t parse_link(const where_t *w, char **save,
                                tacl__topo_t *topo)
{
    char *cls = strtok_r(NULL, " \t", save), *tok;
    int c;

    if (cls == NULL)
        return PARSE_ERROR(w, "link needs a class (self, host, gpu, net)");
    for (c = 0; c < TACL_NUM_LINK_CLASSES; c++)
        if (strcmp(cls, link_names[c]) == 0)
            break;
    if (c == TACL_NUM_LINK_CLASSES)
        return PARSE_ERROR(w, "unknown link class \"%s\" (self, host, gpu, "
                           "net)", cls);
    while ((tok = strtok_r(NULL, " \t", save)) != NULL) {
        char *value = NULL;
        tacl_status_t st = split_kv(w, tok, &value);

        if (st != TACL_OK)
            return st;
        if (strcmp(tok, "bw") == 0)
            st = parse_double(w, tok, value, &topo->link[c].bw);
        /* A latency may be 0 (an ideal link); a bandwidth must not. */
        else if (strcmp(tok, "lat") == 0)
            st = parse_double(w, tok, value, &topo->link[c].lat);
        else
            st = PARSE_ERROR(w, "unknown link key \"%s\" (bw, lat)", tok);
        if (st != TACL_OK)
            return st;
    }
    if (topo->link[c].bw <= 0)
        return PARSE_ERROR(w, "link %s needs bw=<GB/s> greater than 0", cls);
    return TACL_OK;
}

static tacl_status_t parse_node(const where_t *w, char **save,
                                tacl__topo_t *topo)
{
    char *name = strtok_r(NULL, " \t", save), *tok;
    tacl__node_desc_t *nodes, *node;

    if (name == NULL)
        return PARSE_ERROR(w, "node needs a name");
    if (strlen(name) >= TACL__TOPO_NAME_LEN)
        return name_too_long(w, "node", name);
    for (int n = 0; n < topo->n_nodes; n++)
        if (strcmp(topo->nodes[n].name, name) == 0)
            return PARSE_ERROR(w, "node \"%s\" is described twice", name);
    nodes = realloc(topo->nodes, (size_t)(topo->n_nodes + 1) * sizeof(*nodes));
    if (nodes == NULL)
        return tacl__error(TACL_ERR_NO_MEMORY, TOPO, "out of memory");
    topo->nodes = nodes;
    node = &nodes[topo->n_nodes++];
    memset(node, 0, sizeof(*node));
    snprintf(node->name, sizeof(node->name), "%s", name);
    while ((tok = strtok_r(NULL, " \t", save)) != NULL) {
        char *value = NULL;
        tacl_status_t st = split_kv(w, tok, &value);

        if (st != TACL_OK)
            return st;
        if (strcmp(tok, "packages") == 0)
            st = parse_int(w, tok, value, &node->packages);
        else if (strcmp(tok, "numa") == 0)
            st = parse_int(w, tok, value, &node->numa_nodes);
        else if (strcmp(tok, "cores") == 0)
            st = parse_int(w, tok, value, &node->cores);
        else if (strcmp(tok, "threads") == 0)
            st = parse_int(w, tok, value, &node->pus);
        else if (strcmp(tok, "gpus") == 0)
            st = parse_int(w, tok, value, &node->gpus);
        else if (strcmp(tok, "gpu_peer") == 0)
            st = parse_int(w, tok, value, &node->gpu_peer);
        else if (strcmp(tok, "gpu_link") == 0)
            st = strcmp(value, "pcie") == 0
                     ? (node->gpu_link = TACL__GPU_LINK_PCIE, TACL_OK)
                 : strcmp(value, "nvlink") == 0
                     ? (node->gpu_link = TACL__GPU_LINK_NVLINK, TACL_OK)
                     : PARSE_ERROR(w, "gpu_link is pcie or nvlink, not "
                                   "\"%s\"", value);
        else if (strcmp(tok, "nics") == 0)
            st = parse_int(w, tok, value, &node->nics);
        else if (strcmp(tok, "nic_gbps") == 0)
            st = parse_double(w, tok, value, &node->nic_gbps);
        else
            st = PARSE_ERROR(w, "unknown node key \"%s\" (packages, numa, "
                             "cores, threads, gpus, gpu_peer, gpu_link, "
                             "nics, nic_gbps)", tok);
        if (st != TACL_OK)
            return st;
    }
    return TACL_OK;
}

static const char *const kernel_names[TACL__TOPO_KERNELS] = {
    [TACL__TOPO_KERNEL_COPY] = "copy",
    [TACL__TOPO_KERNEL_REDUCE] = "reduce",
    [TACL__TOPO_KERNEL_QUANT] = "quant",
};

/* "fabric oversub=2 overhead=1.5 host_bw=0.4": the network between
 * nodes; host_bw, for nodes emulated on one machine, is what its cores
 * carry across the emulated network, all links together. */
static tacl_status_t parse_fabric(const where_t *w, char **save,
                                  tacl__topo_t *topo)
{
    char *tok;

    topo->has_fabric = 1;
    if (topo->fabric_oversub == 0)
        topo->fabric_oversub = 1;
    while ((tok = strtok_r(NULL, " \t\r", save)) != NULL) {
        char *value = NULL;
        tacl_status_t st = split_kv(w, tok, &value);

        if (st == TACL_OK && strcmp(tok, "oversub") == 0) {
            st = parse_double(w, tok, value, &topo->fabric_oversub);
            if (st == TACL_OK && topo->fabric_oversub < 1)
                st = PARSE_ERROR(w, "oversub=%s: a fabric's "
                                 "oversubscription is 1 or more", value);
        } else if (st == TACL_OK && strcmp(tok, "overhead") == 0)
            st = parse_double(w, tok, value, &topo->msg_overhead);
        else if (st == TACL_OK && strcmp(tok, "host_bw") == 0) {
            st = parse_double(w, tok, value, &topo->host_bw);
            if (st == TACL_OK && !(topo->host_bw > 0))
                st = PARSE_ERROR(w, "host_bw=%s: an emulation host's "
                                 "rate is above 0 GB/s", value);
        } else if (st == TACL_OK)
            st = PARSE_ERROR(w, "unknown fabric key \"%s\" (oversub, "
                             "overhead, host_bw)", tok);
        if (st != TACL_OK)
            return st;
    }
    return TACL_OK;
}

/* "kernel copy=300 reduce=150 quant=100": kernel rates in GB/s. */
static tacl_status_t parse_kernel(const where_t *w, char **save,
                                  tacl__topo_t *topo)
{
    char *tok;

    topo->has_kernel = 1;
    while ((tok = strtok_r(NULL, " \t\r", save)) != NULL) {
        char *value = NULL;
        tacl_status_t st = split_kv(w, tok, &value);
        int k;

        if (st != TACL_OK)
            return st;
        for (k = 0; k < TACL__TOPO_KERNELS; k++)
            if (strcmp(tok, kernel_names[k]) == 0)
                break;
        if (k == TACL__TOPO_KERNELS)
            return PARSE_ERROR(w, "unknown kernel \"%s\" (copy, reduce, "
                               "quant)", tok);
        st = parse_double(w, tok, value, &topo->kernel_bw[k]);
        if (st != TACL_OK)
            return st;
    }
    return TACL_OK;
}

/* "ranks <node> 0-7 9 12-13": place ranks on a described node. */
static tacl_status_t parse_ranks(const where_t *w, char **save,
                                 tacl__topo_t *topo)
{
    char *name = strtok_r(NULL, " \t", save), *tok;
    int node = -1;

    if (name == NULL)
        return PARSE_ERROR(w, "ranks needs a node name");
    for (int n = 0; n < topo->n_nodes; n++)
        if (strcmp(topo->nodes[n].name, name) == 0)
            node = n;
    if (node < 0)
        return PARSE_ERROR(w, "ranks names node \"%s\", which no earlier "
                           "node line describes", name);
    while ((tok = strtok_r(NULL, " \t", save)) != NULL) {
        char *dash = strchr(tok, '-'), *end;
        long lo, hi;

        lo = strtol(tok, &end, 10);
        if (end == tok || (dash ? end != dash : *end != '\0') || lo < 0)
            return PARSE_ERROR(w, "\"%s\" is not a rank or a range a-b", tok);
        hi = lo;
        if (dash != NULL) {
            hi = strtol(dash + 1, &end, 10);
            if (end == dash + 1 || *end != '\0' || hi < lo)
                return PARSE_ERROR(w, "\"%s\" is not a range a-b", tok);
        }
        if (hi >= 1 << 20)
            return PARSE_ERROR(w, "rank %ld is too large", hi);
        if (hi >= topo->nranks) {
            int *no = realloc(topo->node_of, (size_t)(hi + 1) * sizeof(int));
            if (no == NULL)
                return tacl__error(TACL_ERR_NO_MEMORY, TOPO, "out of memory");
            for (long r = topo->nranks; r <= hi; r++)
                no[r] = -1;
            topo->node_of = no;
            topo->nranks = (int)hi + 1;
        }
        for (long r = lo; r <= hi; r++) {
            if (topo->node_of[r] >= 0)
                return PARSE_ERROR(w, "rank %ld is placed twice", r);
            topo->node_of[r] = node;
        }
    }
    return TACL_OK;
}

static tacl_status_t parse_line(const where_t *w, char *line,
                                tacl__topo_t *topo, int *seen_header)
{
    char *save = NULL, *word;

    line[strcspn(line, "#")] = '\0';
    word = strtok_r(line, " \t\r", &save);
    if (word == NULL)
        return TACL_OK;
    if (!*seen_header) {
        char *ver = strtok_r(NULL, " \t\r", &save);
        if (strcmp(word, "tacl-topology") != 0 || ver == NULL ||
            strcmp(ver, "1") != 0)
            return PARSE_ERROR(w, "expected the header \"tacl-topology 1\"");
        *seen_header = 1;
        return TACL_OK;
    }
    if (strcmp(word, "machine") == 0) {
        char *name = strtok_r(NULL, " \t\r", &save);
        if (name == NULL)
            return PARSE_ERROR(w, "machine needs a name");
        if (strlen(name) >= TACL__TOPO_NAME_LEN)
            return name_too_long(w, "machine", name);
        snprintf(topo->machine, sizeof(topo->machine), "%s", name);
        return TACL_OK;
    }
    if (strcmp(word, "link") == 0)
        return parse_link(w, &save, topo);
    if (strcmp(word, "node") == 0)
        return parse_node(w, &save, topo);
    if (strcmp(word, "ranks") == 0)
        return parse_ranks(w, &save, topo);
    if (strcmp(word, "fabric") == 0)
        return parse_fabric(w, &save, topo);
    if (strcmp(word, "kernel") == 0)
        return parse_kernel(w, &save, topo);
    return PARSE_ERROR(w, "unknown statement \"%s\" (machine, link, node, "
                       "ranks, fabric, kernel)", word);
}

tacl_status_t tacl__topo_parse(const char *text, const char *name,
                               tacl__topo_t *topo_p)
{
    tacl__topo_t topo;
    where_t w = {name, 0};
    tacl_status_t status = TACL_OK;
    int seen_header = 0;
    char *copy = strdup(text), *line, *save = NULL;

    if (copy == NULL)
        return tacl__error(TACL_ERR_NO_MEMORY, TOPO, "out of memory");
    memset(&topo, 0, sizeof(topo));
    /* strtok_r would merge empty lines and miscount: split by hand. */
    for (line = copy; line != NULL && status == TACL_OK; line = save) {
        char *nl = strchr(line, '\n');
        save = nl ? nl + 1 : NULL;
        if (nl)
            *nl = '\0';
        w.line++;
        status = parse_line(&w, line, &topo, &seen_header);
    }
    free(copy);
    if (status == TACL_OK && !seen_header) {
        w.line = 1;
        status = PARSE_ERROR(&w, "empty file: expected \"tacl-topology 1\"");
    }
    for (int r = 0; status == TACL_OK && r < topo.nranks; r++)
        if (topo.node_of[r] < 0)
            status = tacl__error(TACL_ERR_INVALID_ARG, TOPO,
                                 "%s: rank %d is not placed on any node, "
                                 "but higher ranks are", name, r);
    if (status != TACL_OK) {
        tacl__topo_fini(&topo);
        return status;
    }
    *topo_p = topo;
    return TACL_OK;
}

tacl_status_t tacl__topo_load(const char *path, tacl__topo_t *topo)
{
    FILE *f = fopen(path, "r");
    char *text = NULL;
    size_t len = 0;
    tacl_status_t status;

    if (f == NULL)
        return tacl__error(TACL_ERR_INVALID_ARG, TOPO,
                           "cannot open topology file %s: %m", path);
    {
        FILE *mem = open_memstream(&text, &len);
        char buf[4096];
        size_t n;
        if (mem == NULL) {
            fclose(f);
            return tacl__error(TACL_ERR_NO_MEMORY, TOPO, "out of memory");
        }
        while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
            fwrite(buf, 1, n, mem);
        fclose(mem);
    }
    fclose(f);
    status = tacl__topo_parse(text, path, topo);
    free(text);
    return status;
}

tacl_status_t tacl__topo_write(const tacl__topo_t *topo, FILE *f)
{
    fprintf(f, "tacl-topology 1\n");
    if (topo->machine[0] != '\0')
        fprintf(f, "machine %s\n", topo->machine);
    fprintf(f, "# bandwidth in GB/s, latency in microseconds\n");
    /* A class with no bandwidth is unset (the defaults will fill it), and
     * the parser refuses bw=0: leave it out so the file loads again. */
    for (int c = 0; c < TACL_NUM_LINK_CLASSES; c++)
        if (topo->link[c].bw > 0)
            fprintf(f, "link %s bw=%.15g lat=%.15g\n", link_names[c],
                    topo->link[c].bw, topo->link[c].lat);
    if (topo->has_fabric) {
        fprintf(f, "fabric oversub=%.15g overhead=%.15g",
                topo->fabric_oversub, topo->msg_overhead);
        if (topo->host_bw > 0)
            fprintf(f, " host_bw=%.15g", topo->host_bw);
        fprintf(f, "\n");
    }
    if (topo->has_kernel) {
        fprintf(f, "kernel");
        for (int k = 0; k < TACL__TOPO_KERNELS; k++)
            fprintf(f, " %s=%.15g", kernel_names[k], topo->kernel_bw[k]);
        fprintf(f, "\n");
    }
    for (int n = 0; n < topo->n_nodes; n++) {
        const tacl__node_desc_t *d = &topo->nodes[n];
        fprintf(f, "node %s packages=%d numa=%d cores=%d threads=%d gpus=%d "
                "gpu_peer=%d%s nics=%d nic_gbps=%g\n", d->name, d->packages,
                d->numa_nodes, d->cores, d->pus, d->gpus, d->gpu_peer,
                d->gpu_link == TACL__GPU_LINK_NVLINK ? " gpu_link=nvlink"
                : d->gpu_link == TACL__GPU_LINK_PCIE ? " gpu_link=pcie" : "",
                d->nics, d->nic_gbps);
    }
    for (int n = 0; n < topo->n_nodes && topo->nranks > 0; n++) {
        fprintf(f, "ranks %s", topo->nodes[n].name);
        for (int r = 0; r < topo->nranks; r++) {
            int end = r;
            if (topo->node_of[r] != n)
                continue;
            while (end + 1 < topo->nranks && topo->node_of[end + 1] == n)
                end++;
            if (end > r)
                fprintf(f, " %d-%d", r, end);
            else
                fprintf(f, " %d", r);
            r = end;
        }
        fprintf(f, "\n");
    }
    return ferror(f) ? tacl__error(TACL_ERR_SYSTEM, TOPO,
                                   "writing the topology failed")
                     : TACL_OK;
}

tacl_status_t tacl__topo_dump(const tacl__topo_t *topo, const char *path)
{
    FILE *f = fopen(path, "w");
    tacl_status_t status;

    if (f == NULL)
        return tacl__error(TACL_ERR_SYSTEM, TOPO,
                           "cannot write topology file %s: %m", path);
    status = tacl__topo_write(topo, f);
    if (fclose(f) != 0 && status == TACL_OK)
        status = tacl__error(TACL_ERR_SYSTEM, TOPO, "closing %s: %m", path);
    return status;
}

void tacl__topo_log(const tacl__topo_t *topo, int rank)
{
    if (!tacl__log_enabled(TACL_LOG_INFO, TACL_SUBSYS_TOPO))
        return;
    TACL_INFO(TOPO, "rank %d: %d ranks on %d nodes%s%s", rank, topo->nranks,
              topo->n_nodes, topo->machine[0] ? ", machine " : "",
              topo->machine);
    for (int c = 0; c < TACL_NUM_LINK_CLASSES; c++)
        TACL_INFO(TOPO, "  link %-4s %8.2f GB/s %7.2f us", link_names[c],
                  topo->link[c].bw, topo->link[c].lat);
    for (int n = 0; n < topo->n_nodes; n++) {
        const tacl__node_desc_t *d = &topo->nodes[n];
        char ranks[256];
        size_t o = 0;

        ranks[0] = '\0';
        for (int r = 0; r < topo->nranks && o + 12 < sizeof(ranks); r++)
            if (topo->node_of[r] == n)
                o += (size_t)snprintf(ranks + o, sizeof(ranks) - o, " %d", r);
        TACL_INFO(TOPO, "  node %d %s: %d cores, %d NUMA, %d GPUs, %d NICs; "
                  "ranks%s", n, d->name, d->cores, d->numa_nodes, d->gpus,
                  d->nics, ranks);
    }
}
