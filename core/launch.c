/*
 * Launcher detection for tacl_comm_init_env().
 *
 * A launcher is a table row: the variables that carry the rank, the rank
 * count and the rank's place on its node, and where rank 0's address
 * comes from.  The first row whose rank variable is set wins; every other
 * variable of that row must then be valid, and an error names the
 * launcher, the variable and what to set instead.
 *
 * Rank 0's address, in order: TACL_ROOT_ADDR (host:port) always; then
 * MASTER_ADDR and MASTER_PORT; then what the launcher knows.  torchrun's
 * agent (or torch's own store) holds MASTER_PORT, so under torchrun tacl
 * listens on MASTER_PORT + 1.  MPI launchers name no address: on one
 * node rank 0 listens on the loopback address, across nodes MASTER_ADDR
 * or TACL_ROOT_ADDR must say where rank 0 runs.  Slurm names the step's
 * nodes, and rank 0 runs on the first.  Where no port is given it is
 * derived from the launcher's job id, so every rank of a job derives the
 * same one and two jobs on one node rarely meet.
 */
#include "launch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "config.h"
#include "log.h"
#include "parse.h"

typedef struct {
    const char *name;
    const char *rank;        /* its presence selects the row */
    const char *size;
    const char *local_rank;  /* NULL: not given */
    const char *local_size;  /* NULL: not given */
    const char *job_keys[3]; /* variables that identify the job, in order */
    const char *nodelist[3]; /* Slurm: host lists, rank 0 on the first */
} launcher_t;

static const launcher_t launchers[] = {
    {"tacl", "TACL_RANK", "TACL_NRANKS", "TACL_LOCAL_RANK", "TACL_LOCAL_SIZE",
     {NULL}, {NULL}},
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
     {NULL}, {NULL}},
    {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
     "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
     {"PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid", NULL}, {NULL}},
    {"Hydra (MPICH, Intel MPI)", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID",
     "MPI_LOCALNRANKS", {"PMI_JOBID", "PMIX_NAMESPACE", NULL}, {NULL}},
    {"Slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", NULL,
     {"SLURM_JOB_ID", "SLURM_JOBID", NULL},
     {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"}},
};

#define N_LAUNCHERS (sizeof(launchers) / sizeof(launchers[0]))

/* tacl's own variables go through the configuration table (so
 * tacl-info and the config print show them); the launchers' directly. */
static const char *launch_env(const char *name)
{
    static const struct {
        const char *name;
        tacl__cfg_t cfg;
    } own[] = {
        {"TACL_RANK", TACL_CFG_RANK},
        {"TACL_NRANKS", TACL_CFG_NRANKS},
        {"TACL_LOCAL_RANK", TACL_CFG_LOCAL_RANK},
        {"TACL_LOCAL_SIZE", TACL_CFG_LOCAL_SIZE},
        {"TACL_ROOT_ADDR", TACL_CFG_ROOT_ADDR},
    };
    const char *v;

    for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++)
        if (strcmp(own[i].name, name) == 0)
            return tacl__config_is_set(own[i].cfg)
                       ? tacl__config_str(own[i].cfg)
                       : NULL;
    v = tacl__config_env(name);
    return v != NULL && v[0] != '\0' ? v : NULL;
}

/* A non-negative number below 2^24 from variable name, or an error. */
static tacl_status_t launch_int(const launcher_t *ln, const char *name,
                                int required, int *value_p)
{
    const char *s = launch_env(name);
    tacl__parse_err_t err;

    if (s == NULL) {
        if (!required) {
            *value_p = -1;
            return TACL_OK;
        }
        return tacl__error(TACL_ERR_INVALID_USAGE, INIT,
                           "launcher %s (%s is set): %s is not set",
                           ln->name, ln->rank, name);
    }
    err = tacl__parse_int(s, 0, 1 << 24, value_p);
    if (err != TACL_PARSE_OK)
        return tacl__error(TACL_ERR_INVALID_ARG, INIT,
                           "launcher %s: %s=\"%s\" is not a valid count "
                           "(%s)", ln->name, name, s,
                           tacl__parse_strerror(err));
    return TACL_OK;
}

int tacl__launch_port(const char *key)
{
    uint64_t h = tacl__fnv1a(TACL__FNV1A_SEED, key, strlen(key));

    return TACL__LAUNCH_PORT_BASE + (int)(h % TACL__LAUNCH_PORT_SPAN);
}

tacl_status_t tacl__launch_first_host(const char *list, char *out,
                                      size_t size)
{
    size_t n = strcspn(list, ",[");
    size_t used;

    if (n == 0)
        goto bad;
    if (n >= size)
        goto too_long;
    memcpy(out, list, n);
    used = n;
    if (list[n] == '[') {
        /* The range's first number keeps its zero padding. */
        const char *num = list + n + 1;
        size_t digits = strspn(num, "0123456789");
        const char *after = strchr(num, ']');

        if (digits == 0 || after == NULL)
            goto bad;
        if (used + digits >= size)
            goto too_long;
        memcpy(out + used, num, digits);
        used += digits;
        after++;
        n = strcspn(after, ",[");
        if (used + n >= size)
            goto too_long;
        memcpy(out + used, after, n);
        used += n;
    }
    out[used] = '\0';
    return TACL_OK;
bad:
    return tacl__error(TACL_ERR_INVALID_ARG, INIT,
                       "\"%s\" is not a host list", list);
too_long:
    return tacl__error(TACL_ERR_INVALID_ARG, INIT,
                       "the first host of \"%s\" is longer than %zu "
                       "characters", list, size - 1);
}

/* Split "host:port" into l->host and l->port. */
static tacl_status_t launch_hostport(tacl__launch_t *l, const char *addr,
                                     const char *what)
{
    const char *colon = strrchr(addr, ':');
    int port;

    if (colon == NULL || colon == addr ||
        (size_t)(colon - addr) >= sizeof(l->host))
        return tacl__error(TACL_ERR_INVALID_ARG, INIT,
                           "%s=\"%s\" is not host:port", what, addr);
    memcpy(l->host, addr, (size_t)(colon - addr));
    l->host[colon - addr] = '\0';
    if (tacl__parse_int(colon + 1, 1, 65535, &port) != TACL_PARSE_OK)
        return tacl__error(TACL_ERR_INVALID_ARG, INIT,
                           "%s=\"%s\": \"%s\" is not a port in 1..65535",
                           what, addr, colon + 1);
    l->port = port;
    l->addr_from = what;
    return TACL_OK;
}

/* The job's key for a derived port: its id variable, else the parent
 * process (the launcher's daemon on this node, for every rank). */
static void launch_job_key(const launcher_t *ln, char *key, size_t size)
{
    for (int i = 0; i < 3 && ln->job_keys[i] != NULL; i++) {
        const char *v = launch_env(ln->job_keys[i]);
        if (v != NULL) {
            const char *step = launch_env("SLURM_STEP_ID");
            snprintf(key, size, "%s/%s/%s", ln->name, v,
                     step != NULL ? step : "");
            return;
        }
    }
    snprintf(key, size, "%s/ppid %ld", ln->name, (long)getppid());
}

static tacl_status_t launch_addr(const launcher_t *ln, tacl__launch_t *l)
{
    const char *root = launch_env("TACL_ROOT_ADDR");
    const char *maddr = launch_env("MASTER_ADDR");
    const char *mport = launch_env("MASTER_PORT");
    int under_torchrun = launch_env("TORCHELASTIC_RUN_ID") != NULL;
    int one_node = l->local_size > 0 && l->local_size == l->nranks;
    char key[512];

    if (root != NULL)
        return launch_hostport(l, root, "TACL_ROOT_ADDR");
    launch_job_key(ln, key, sizeof(key));
    if (maddr != NULL) {
        char buf[sizeof(l->host) + 16];
        tacl_status_t status;

        if (mport == NULL && ln == &launchers[1])
            return tacl__error(TACL_ERR_INVALID_USAGE, INIT,
                               "launcher torchrun (RANK is set): "
                               "MASTER_ADDR is set but MASTER_PORT is not; "
                               "set it, or TACL_ROOT_ADDR=host:port");
        snprintf(buf, sizeof(buf), "%s:%s", maddr,
                 mport != NULL ? mport : "1");
        status = launch_hostport(l, buf, "MASTER_ADDR and MASTER_PORT");
        if (status != TACL_OK)
            return status;
        if (mport == NULL) {
            l->port = tacl__launch_port(key);
            l->addr_from = "MASTER_ADDR and a port from the job id";
        } else if (under_torchrun) {
            if (l->port >= 65535)
                return tacl__error(TACL_ERR_INVALID_ARG, INIT,
                                   "under torchrun tacl listens on "
                                   "MASTER_PORT + 1, and MASTER_PORT is "
                                   "65535; set TACL_ROOT_ADDR=host:port");
            l->port++;
            l->addr_from = "MASTER_ADDR and MASTER_PORT + 1 (torchrun's "
                           "store holds MASTER_PORT)";
        }
        return TACL_OK;
    }
    if (ln->nodelist[0] != NULL) {
        for (int i = 0; i < 3; i++) {
            const char *list = launch_env(ln->nodelist[i]);
            if (list == NULL)
                continue;
            l->port = tacl__launch_port(key);
            l->addr_from = ln->nodelist[i];
            return tacl__launch_first_host(list, l->host, sizeof(l->host));
        }
    }
    if (one_node) {
        snprintf(l->host, sizeof(l->host), "127.0.0.1");
        l->port = tacl__launch_port(key);
        l->addr_from = "loopback (one node) and a port from the job id";
        return TACL_OK;
    }
    if (ln == &launchers[0] || ln == &launchers[1])
        return tacl__error(TACL_ERR_INVALID_USAGE, INIT,
                           "launcher %s (%s is set): no root address: set "
                           "TACL_ROOT_ADDR=host:port, or MASTER_ADDR and "
                           "MASTER_PORT", ln->name, ln->rank);
    return tacl__error(TACL_ERR_INVALID_USAGE, INIT,
                       "launcher %s (%s is set): %s, so rank 0's address "
                       "is needed and %s gives none: set "
                       "TACL_ROOT_ADDR=host:port (or MASTER_ADDR) to rank "
                       "0's host",
                       ln->name, ln->rank,
                       l->local_size < 0 ? "it does not say whether all "
                                           "ranks share one node"
                                         : "the ranks span several nodes",
                       ln->name);
}

tacl_status_t tacl__launch_detect(tacl__launch_t *l)
{
    const launcher_t *ln = NULL;
    tacl_status_t status;

    memset(l, 0, sizeof(*l));
    for (size_t i = 0; i < N_LAUNCHERS && ln == NULL; i++)
        if (launch_env(launchers[i].rank) != NULL)
            ln = &launchers[i];
    if (ln == NULL)
        return tacl__error(TACL_ERR_INVALID_USAGE, INIT,
                           "no launcher found: none of TACL_RANK (tacl-run), "
                           "RANK (torchrun), OMPI_COMM_WORLD_RANK (Open "
                           "MPI), PMI_RANK (Hydra) or SLURM_PROCID (srun) is set; start the ranks "
                           "with one of those, or set TACL_RANK, "
                           "TACL_NRANKS and TACL_ROOT_ADDR");
    l->launcher = ln->name;
    l->rank_var = ln->rank;
    status = launch_int(ln, ln->rank, 1, &l->rank);
    if (status == TACL_OK)
        status = launch_int(ln, ln->size, 1, &l->nranks);
    if (status == TACL_OK && ln->local_rank != NULL)
        status = launch_int(ln, ln->local_rank, 0, &l->local_rank);
    else
        l->local_rank = -1;
    if (status == TACL_OK && ln->local_size != NULL)
        status = launch_int(ln, ln->local_size, 0, &l->local_size);
    else
        l->local_size = -1;
    if (status != TACL_OK)
        return status;
    if (l->rank >= l->nranks)
        return tacl__error(TACL_ERR_INVALID_ARG, INIT,
                           "launcher %s: %s=%d is not below %s=%d",
                           ln->name, ln->rank, l->rank, ln->size, l->nranks);
    status = launch_addr(ln, l);
    if (status != TACL_OK)
        return status;
    TACL_INFO(INIT, "launcher %s: rank %d of %d, root %s:%d from %s",
              ln->name, l->rank, l->nranks, l->host, l->port, l->addr_from);
    return TACL_OK;
}
