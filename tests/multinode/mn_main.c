/*
 * mn_check: the multi-node conformance program, run as every rank of a
 * tacl-cluster job.
 *
 *   mn_check check LAYOUT [DIR]   topology, every collective, counters,
 *                                 split communicators
 *   mn_check ring LAYOUT          ring bytes (TACL_ALGO forces the ring)
 *   mn_check p2p LAYOUT           tagged messages and receives from any
 *                                 source (MPI's rules); ends by aborting
 *   mn_check p2pdead LAYOUT       the last rank dies: receives from any
 *                                 source elsewhere fail, not hang
 *   mn_check badtopo LAYOUT FILE  init must fail on the malformed FILE
 *
 * LAYOUT is the ranks per node as tacl-cluster's --ranks-per-node-list
 * takes it ("2,2", "2,1").  DIR is a directory all nodes see, used by the
 * barrier check.  When TACL_TOPO_DUMP_FILE is set, rank 0 also checks that
 * the file the library wrote at init describes the layout.  Exit status 0
 * when every check passed, 1 otherwise, with one "FAIL:" line per problem.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mn.h"

#define MN_NAME_LEN 64

/*
 * What each rank tells the others about itself.  The numbers come first:
 * with host at offset 0, gcc 12 at -O3 with -fsanitize=undefined refused
 * to build the mismatch message below (-Wformat-overflow: "'%s' directive
 * argument is null").  UBSan's check that strcmp's arguments are not
 * null makes a path on which &card->host, the card's own address, is
 * null; at a non-zero offset the field's address is never null.
 */
typedef struct {
    int32_t node;
    int32_t local_rank;
    int32_t local_size;
    int32_t n_nodes;
    char host[MN_NAME_LEN];
    char node_id[MN_NAME_LEN];
} mn_card_t;

static int parse_layout(const char *text, mn_t *mn)
{
    char *copy = strdup(text), *save = NULL, *tok;
    int n = 0, r = 0;

    if (copy == NULL)
        return -1;
    mn->rpn = calloc(strlen(text) + 1, sizeof(int));
    for (tok = strtok_r(copy, ",", &save); tok && mn->rpn;
         tok = strtok_r(NULL, ",", &save)) {
        char *end;
        long v = strtol(tok, &end, 10);
        if (*end != '\0' || v < 1 || v > 1024) {
            free(copy);
            return -1;
        }
        mn->rpn[n++] = (int)v;
        r += (int)v;
    }
    free(copy);
    if (mn->rpn == NULL || n == 0)
        return -1;
    mn->n_nodes = n;
    mn->node_of = calloc((size_t)r, sizeof(int));
    if (mn->node_of == NULL)
        return -1;
    r = 0;
    for (int i = 0; i < n; i++)
        for (int l = 0; l < mn->rpn[i]; l++)
            mn->node_of[r++] = i;
    mn->nranks = r;
    return 0;
}

/* The first rank of a node by the layout. */
static int first_rank(const mn_t *mn, int node)
{
    int r = 0;

    for (int i = 0; i < node; i++)
        r += mn->rpn[i];
    return r;
}

static void check_int(mn_t *mn, const char *what, int got, int want)
{
    if (got != want)
        mn_fail(mn, "%s is %d, the layout implies %d", what, got, want);
}

/*
 * The queries against the layout, then every rank's card against every
 * other's: ranks share a host name and a node id exactly when the layout
 * puts them on one node.
 */
static mn_card_t *check_topology(mn_t *mn)
{
    mn_place_t pl;
    mn_card_t me, *all;
    int rank, size, expected_node;

    mn_place(mn, &pl);
    rank = pl.rank;
    size = pl.size;
    if (size != mn->nranks || rank < 0 || rank >= size) {
        fprintf(stderr, "mn_check rank %d: FAIL: %d ranks, the layout has "
                "%d\n", rank, size, mn->nranks);
        exit(1);
    }
    mn->rank = rank;
    expected_node = mn->node_of[rank];
    check_int(mn, "tacl_comm_n_nodes", pl.n_nodes, mn->n_nodes);
    check_int(mn, "tacl_comm_node", pl.node, expected_node);
    check_int(mn, "tacl_comm_local_rank", pl.local_rank,
              rank - first_rank(mn, expected_node));
    check_int(mn, "tacl_comm_local_size", pl.local_size,
              mn->rpn[expected_node]);

    memset(&me, 0, sizeof(me));
    gethostname(me.host, sizeof(me.host) - 1);
    snprintf(me.node_id, sizeof(me.node_id), "%s",
             getenv("TACL_NODE_ID") ? getenv("TACL_NODE_ID") : "");
    me.node = pl.node;
    me.local_rank = pl.local_rank;
    me.local_size = pl.local_size;
    me.n_nodes = pl.n_nodes;
    all = mn_alloc((size_t)size, sizeof(me));
    mn_ok(mn, tacl_allgather(&me, all, sizeof(me), TACL_UINT8, mn->comm,
                             NULL), "tacl_allgather of the node cards");
    for (int a = 0; a < size; a++) {
        if (all[a].node != mn->node_of[a] ||
            all[a].local_size != mn->rpn[mn->node_of[a]] ||
            all[a].n_nodes != mn->n_nodes)
            mn_fail(mn, "rank %d reports node %d of %d, local size %d; "
                    "the layout implies node %d of %d, local size %d", a,
                    all[a].node, all[a].n_nodes, all[a].local_size,
                    mn->node_of[a], mn->n_nodes, mn->rpn[mn->node_of[a]]);
        for (int b = 0; b < a; b++) {
            int same = mn->node_of[a] == mn->node_of[b];
            if (same != (strcmp(all[a].host, all[b].host) == 0) ||
                same != (strcmp(all[a].node_id, all[b].node_id) == 0))
                mn_fail(mn, "ranks %d (%s, id %s) and %d (%s, id %s) %s "
                        "on one node by the layout", a, all[a].host,
                        all[a].node_id, b, all[b].host, all[b].node_id,
                        same ? "are" : "are not");
        }
    }
    mn->cases++;
    return all;
}

/* The node id of node n's ranks ("?" past the last node). */
static const char *node_name(const mn_t *mn, const mn_card_t *cards, int n)
{
    return n < mn->n_nodes ? cards[first_rank(mn, n)].node_id : "?";
}

/* The "ranks" line the dump should hold for node n. */
static void ranks_line(const mn_t *mn, int n, const char *name, char *line,
                       size_t len)
{
    int lo = first_rank(mn, n), hi = lo + mn->rpn[n] - 1;

    if (hi > lo)
        snprintf(line, len, "ranks %s %d-%d\n", name, lo, hi);
    else
        snprintf(line, len, "ranks %s %d\n", name, lo);
}

/*
 * Rank 0 reads the topology file the library dumped at init: the format
 * header, one node line per node in node order, named after the node id
 * of its ranks, and the ranks of each node as the layout places them.
 */
static void check_dump(mn_t *mn, const mn_card_t *cards, const char *path)
{
    char line[512], want[256], name[MN_NAME_LEN + 2];
    int nodes = 0, ranks = 0, lineno = 0;
    FILE *f = fopen(path, "r");

    mn->cases++;
    if (f == NULL) {
        mn_fail(mn, "cannot read the dumped topology %s", path);
        return;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        lineno++;
        if (lineno == 1 && strcmp(line, "tacl-topology 1\n") != 0)
            mn_fail(mn, "%s:1: header is \"%s\"", path, line);
        if (strncmp(line, "node ", 5) == 0) {
            snprintf(name, sizeof(name), "%s ",
                     node_name(mn, cards, nodes));
            if (strncmp(line + 5, name, strlen(name)) != 0)
                mn_fail(mn, "%s:%d: node line %d is \"%.*s\", expected "
                        "the node id %s", path, lineno, nodes,
                        (int)strcspn(line, "\n"), line,
                        node_name(mn, cards, nodes));
            nodes++;
        } else if (strncmp(line, "ranks ", 6) == 0) {
            snprintf(name, sizeof(name), "%s", node_name(mn, cards, ranks));
            ranks_line(mn, ranks < mn->n_nodes ? ranks : 0, name, want,
                       sizeof(want));
            if (strcmp(line, want) != 0)
                mn_fail(mn, "%s:%d: \"%.*s\", expected \"%.*s\"", path,
                        lineno, (int)strcspn(line, "\n"), line,
                        (int)strcspn(want, "\n"), want);
            ranks++;
        }
    }
    fclose(f);
    if (nodes != mn->n_nodes || ranks != mn->n_nodes)
        mn_fail(mn, "%s: %d node and %d ranks lines for %d nodes", path,
                nodes, ranks, mn->n_nodes);
}

/* Init must fail with an invalid argument naming the file and line 3. */
static int run_badtopo(mn_t *mn, const char *file)
{
    tacl_comm_t comm = NULL;
    tacl_status_t status = tacl_comm_init_env(&comm);
    const char *msg = tacl_last_error();
    char where[512];

    snprintf(where, sizeof(where), "%s:3:", file);
    if (status != TACL_ERR_INVALID_ARG) {
        mn_fail(mn, "init with malformed topology %s returned %s (%s), "
                "expected %s", file, tacl_status_string(status), msg,
                tacl_status_string(TACL_ERR_INVALID_ARG));
    } else if (strstr(msg, where) == NULL) {
        mn_fail(mn, "init error message \"%s\" does not name \"%s\"", msg,
                where);
    }
    if (status == TACL_OK)
        tacl_comm_destroy(comm);
    else if (comm != NULL)
        mn_fail(mn, "a failed init set the communicator");
    if (mn->failures == 0)
        printf("mn_check: malformed topology refused: %s\n", msg);
    return mn->failures ? 1 : 0;
}

static void usage(void)
{
    fprintf(stderr, "usage: mn_check check LAYOUT [DIR] | ring LAYOUT | "
                    "p2p LAYOUT | p2pdead LAYOUT | badtopo LAYOUT FILE\n");
    exit(2);
}

int main(int argc, char **argv)
{
    mn_t mn;
    mn_card_t *cards;
    const char *dump;
    int rc;

    memset(&mn, 0, sizeof(mn));
    mn.rank = -1;
    if (argc < 3 || parse_layout(argv[2], &mn) != 0)
        usage();
    if (strcmp(argv[1], "badtopo") == 0) {
        if (argc != 4)
            usage();
        rc = run_badtopo(&mn, argv[3]);
        free(mn.rpn);
        free(mn.node_of);
        return rc;
    }
    if (strcmp(argv[1], "check") != 0 && strcmp(argv[1], "ring") != 0 &&
        strcmp(argv[1], "p2p") != 0 && strcmp(argv[1], "p2pdead") != 0)
        usage();
    mn.dir = argc > 3 ? argv[3] : NULL;
    mn_ok(&mn, tacl_comm_init_env(&mn.comm), "tacl_comm_init_env");
    cards = check_topology(&mn);
    dump = getenv("TACL_TOPO_DUMP_FILE");
    if (mn.rank == 0 && dump != NULL && dump[0] != '\0')
        check_dump(&mn, cards, dump);
    free(cards);
    if (strcmp(argv[1], "check") == 0) {
        mn_run_collectives(&mn);
        mn_run_splits(&mn);
    } else if (strcmp(argv[1], "p2p") == 0) {
        mn_run_p2p(&mn);
    } else if (strcmp(argv[1], "p2pdead") == 0) {
        mn_run_p2p_dead(&mn);
    } else {
        mn_run_ring(&mn);
    }
    /* p2p ends by aborting the communicator: nothing left to destroy. */
    if (mn.comm != NULL)
        mn_ok(&mn, tacl_comm_destroy(mn.comm), "tacl_comm_destroy");
    rc = mn.failures ? 1 : 0;
    printf("mn_check rank %d: %s %s: %d cases, %d failures\n", mn.rank,
           argv[1], argv[2], mn.cases, mn.failures);
    free(mn.rpn);
    free(mn.node_of);
    return rc;
}
