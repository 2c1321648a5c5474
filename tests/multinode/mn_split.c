/*
 * Split communicators across nodes.  Three splits of the job:
 *   by node (key rank): one communicator per node, all shm;
 *   by local rank (key: reversed rank): one rank per node, all network,
 *     with the new ranks in the reverse order of the old ones;
 *   even ranks only (odd ranks pass TACL_SPLIT_NOCOLOR, equal keys).
 * Each part's node queries must match the layout the split implies
 * (nodes numbered in order of their lowest new rank), and each part runs
 * one count of every collective with the usual exact and counter checks.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mn.h"

typedef enum { SPLIT_NODE, SPLIT_LOCAL_RANK, SPLIT_EVEN } split_kind_t;

static const char *const split_names[] = {"node", "local rank", "even"};

/* Color and key of rank r for a split; color -1 stands for no color. */
static void color_key(const mn_t *mn, split_kind_t kind, int r, int *color,
                      int *key)
{
    int lr = 0;

    for (int j = 0; j < r; j++)
        lr += mn->node_of[j] == mn->node_of[r];
    switch (kind) {
    case SPLIT_NODE:
        *color = mn->node_of[r];
        *key = r;
        break;
    case SPLIT_LOCAL_RANK:
        *color = lr;
        *key = mn->nranks - r;
        break;
    default:
        *color = r % 2 == 0 ? 0 : -1;
        *key = 0;
        break;
    }
}

/*
 * The expected part of the caller: its members in new-rank order, their
 * nodes renumbered by first appearance.  Returns 0 when the caller has no
 * color.
 */
static int sub_layout(const mn_t *mn, split_kind_t kind, mn_t *sub)
{
    int p = mn->nranks, color, key, n = 0;
    int *members = calloc((size_t)p, sizeof(int));
    int *keys = calloc((size_t)p, sizeof(int));
    int *renum = calloc((size_t)mn->n_nodes, sizeof(int));
    int mine, mykey;

    memset(sub, 0, sizeof(*sub));
    color_key(mn, kind, mn->rank, &mine, &mykey);
    if (members == NULL || keys == NULL || renum == NULL || mine < 0) {
        free(members), free(keys), free(renum);
        return 0;
    }
    /* Insertion by (key, old rank), which is the split's order. */
    for (int r = 0; r < p; r++) {
        int at;
        color_key(mn, kind, r, &color, &key);
        if (color != mine)
            continue;
        for (at = n; at > 0 && keys[at - 1] > key; at--) {
            keys[at] = keys[at - 1];
            members[at] = members[at - 1];
        }
        keys[at] = key;
        members[at] = r;
        n++;
    }
    sub->nranks = n;
    sub->node_of = calloc((size_t)n, sizeof(int));
    sub->rpn = calloc((size_t)n, sizeof(int));
    for (int i = 0; i < mn->n_nodes; i++)
        renum[i] = -1;
    for (int i = 0; i < n && sub->node_of && sub->rpn; i++) {
        int old = mn->node_of[members[i]];
        if (renum[old] < 0)
            renum[old] = sub->n_nodes++;
        sub->node_of[i] = renum[old];
        sub->rpn[renum[old]]++;
        if (members[i] == mn->rank)
            sub->rank = i;
    }
    free(members), free(keys), free(renum);
    if (sub->node_of == NULL || sub->rpn == NULL) {
        fprintf(stderr, "mn_check: out of memory\n");
        exit(1);
    }
    return 1;
}

static void check_part(mn_t *mn, mn_t *sub, const char *name)
{
    mn_place_t pl;
    int want_lrank = 0;

    mn_place(sub, &pl);
    for (int j = 0; j < sub->rank; j++)
        want_lrank += sub->node_of[j] == sub->node_of[sub->rank];
    if (pl.rank != sub->rank || pl.size != sub->nranks) {
        mn_fail(mn, "split by %s: rank %d of %d, expected %d of %d", name,
                pl.rank, pl.size, sub->rank, sub->nranks);
        exit(1);
    }
    if (pl.node != sub->node_of[pl.rank] || pl.n_nodes != sub->n_nodes ||
        pl.local_rank != want_lrank ||
        pl.local_size != sub->rpn[sub->node_of[pl.rank]]) {
        mn_fail(mn, "split by %s: rank %d has node %d of %d, local rank %d "
                "of %d; expected node %d of %d, local rank %d of %d", name,
                pl.rank, pl.node, pl.n_nodes, pl.local_rank, pl.local_size,
                sub->node_of[pl.rank], sub->n_nodes, want_lrank,
                sub->rpn[sub->node_of[pl.rank]]);
    }
    mn_run_basic(sub);
}

void mn_run_splits(mn_t *mn)
{
    for (int kind = SPLIT_NODE; kind <= SPLIT_EVEN; kind++) {
        tacl_comm_t part = NULL;
        int color, key, member;
        char label[96];
        mn_t sub;

        color_key(mn, (split_kind_t)kind, mn->rank, &color, &key);
        mn_ok(mn, tacl_comm_split(mn->comm,
                                  color < 0 ? TACL_SPLIT_NOCOLOR : color,
                                  key, &part), "tacl_comm_split");
        member = sub_layout(mn, (split_kind_t)kind, &sub);
        if (!member) {
            if (part != NULL)
                mn_fail(mn, "split %s: a rank without color got a "
                        "communicator", split_names[kind]);
            continue;
        }
        if (part == NULL) {
            mn_fail(mn, "split %s: no communicator", split_names[kind]);
            exit(1);
        }
        snprintf(label, sizeof(label), "rank %d, split by %s, new rank %d",
                 mn->rank, split_names[kind], sub.rank);
        sub.label = label;
        sub.comm = part;
        check_part(mn, &sub, split_names[kind]);
        mn->failures += sub.failures;
        mn->cases += sub.cases + 1;
        mn_ok(mn, tacl_comm_destroy(part), "split: tacl_comm_destroy");
        free(sub.node_of);
        free(sub.rpn);
    }
}
