/*
 * Communicators made from another: split (tacl_comm_split), groups of
 * some ranks (tacl_comm_create_group) and the cached node and rail
 * communicators (tacl_comm_get_local/rail).  Each reuses its parent's
 * context, so a new communicator is only a list of the context's ranks
 * and an id its messages' tags carry.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "comm.h"
#include "log.h"

static tacl_status_t split_held(tacl_comm_t comm, int color, int key,
                                const tacl_config_t *config,
                                tacl_comm_t *newcomm_p)
{
    int mine[3], *all = NULL, *world = NULL, *order = NULL;
    int n = 0, my_index = -1;
    tacl_status_t status;
    tacl__comm_conf_t conf;
    uint64_t split;

    if (newcomm_p == NULL)
        return tacl__comm_fail(comm, tacl__error(TACL_ERR_INVALID_ARG, INIT,
                                                 "newcomm_p is NULL"));
    /* Checked before anything is exchanged, so that a bad config fails
     * alike on every rank that passes it. */
    status = tacl__comm_conf_resolve(config, comm, &conf);
    if (status != TACL_OK)
        return tacl__comm_fail(comm, status);
    if (color < 0 && color != TACL_SPLIT_NOCOLOR)
        return tacl__comm_fail(comm, tacl__error(TACL_ERR_INVALID_ARG, INIT,
                               "color %d is negative and not "
                               "TACL_SPLIT_NOCOLOR", color));
    mine[0] = color;
    mine[1] = key;
    mine[2] = comm->rank;
    all = malloc((size_t)comm->size * sizeof(mine));
    world = malloc((size_t)comm->size * sizeof(int));
    order = malloc((size_t)comm->size * sizeof(int));
    if (!all || !world || !order) {
        status = tacl__error(TACL_ERR_NO_MEMORY, INIT, "out of memory");
        goto out;
    }
    split = comm->splits++;
    status = tacl__comm_allgather_small(comm, comm->seq++, mine, all,
                                        sizeof(mine));
    if (status != TACL_OK)
        goto out;
    if (color == TACL_SPLIT_NOCOLOR) {
        *newcomm_p = NULL;
        goto out;
    }
    /* Members of my color, sorted by (key, old rank): insertion sort. */
    for (int r = 0; r < comm->size; r++) {
        int j;
        if (all[3 * r] != color)
            continue;
        for (j = n; j > 0; j--) {
            int q = order[j - 1];
            if (all[3 * q + 1] < all[3 * r + 1] ||
                (all[3 * q + 1] == all[3 * r + 1] && q < r))
                break;
            order[j] = order[j - 1];
        }
        order[j] = r;
        n++;
    }
    for (int i = 0; i < n; i++) {
        world[i] = comm->x.world[order[i]];
        if (order[i] == comm->rank)
            my_index = i;
    }
    {
        uint32_t id = comm->x.id * 2654435761u ^ (uint32_t)(split * 40503u) ^
                      (uint32_t)color * 97u;
        id = (id ^ (id >> 15)) * 2246822519u;
        id ^= id >> 13;
        tacl_comm_t made = calloc(1, sizeof(*made));

        if (made == NULL) {
            status = tacl__error(TACL_ERR_NO_MEMORY, INIT, "out of memory");
            goto out;
        }
        tacl__ctx_retain(comm->x.ctx);
        status = tacl__comm_create_on(made, comm->x.ctx, my_index, n, world,
                                id | 2u, &conf);
        if (status != TACL_OK) {
            tacl__ctx_release(comm->x.ctx);
            free(made);
            goto out;
        }
        made->magic = TACL__COMM_ALIVE;
        tacl__comm_conf_log(made, &conf, "split");
        *newcomm_p = made;
    }
out:
    free(all);
    free(world);
    free(order);
    return tacl__comm_fail(comm, status);
}

TACL_EXPORT tacl_status_t tacl_comm_split_config(tacl_comm_t comm, int color,
                                                 int key,
                                                 const tacl_config_t *config,
                                                 tacl_comm_t *newcomm_p)
{
    TACL__COMM_HELD(comm, split_held(comm, color, key, config, newcomm_p));
}

TACL_EXPORT tacl_status_t tacl_comm_split(tacl_comm_t comm, int color,
                                          int key, tacl_comm_t *newcomm_p)
{
    return tacl_comm_split_config(comm, color, key, NULL, newcomm_p);
}

/* FNV-1a over bytes, continuing from h. */
static uint64_t group_hash(uint64_t h, const void *p, size_t len)
{
    const unsigned char *b = p;

    for (size_t i = 0; i < len; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

/* Check a member list: my index in it, or an error recorded. */
static tacl_status_t group_check(tacl_comm_t comm, int nranks,
                                 const int *ranks, int *me_p)
{
    unsigned char *seen;

    if (ranks == NULL)
        return tacl__error(TACL_ERR_INVALID_ARG, INIT, "ranks is NULL");
    if (nranks < 1 || nranks > comm->size)
        return tacl__error(TACL_ERR_INVALID_ARG, INIT,
                           "nranks %d is not within 1..%d (the "
                           "communicator's size)", nranks, comm->size);
    seen = calloc((size_t)comm->size, 1);
    if (seen == NULL)
        return tacl__error(TACL_ERR_NO_MEMORY, INIT, "out of memory");
    *me_p = -1;
    for (int i = 0; i < nranks; i++) {
        int r = ranks[i];

        if (r < 0 || r >= comm->size || seen[r]) {
            free(seen);
            return tacl__error(TACL_ERR_INVALID_ARG, INIT,
                               "ranks[%d] = %d is %s", i, r,
                               r < 0 || r >= comm->size
                                   ? "not a rank of the communicator"
                                   : "listed twice");
        }
        seen[r] = 1;
        if (r == comm->rank)
            *me_p = i;
    }
    free(seen);
    if (*me_p < 0)
        return tacl__error(TACL_ERR_INVALID_ARG, INIT,
                           "rank %d calls tacl_comm_create_group but is "
                           "not in its list of %d ranks", comm->rank,
                           nranks);
    return TACL_OK;
}

static tacl_status_t create_group_held(tacl_comm_t comm, int nranks,
                                       const int *ranks, int tag,
                                       const tacl_config_t *config,
                                       tacl_comm_t *newcomm_p)
{
    uint64_t check, key, value;
    tacl_comm_t made = NULL;
    tacl_status_t status;
    tacl__comm_conf_t conf;
    int me = -1, *world;

    if (newcomm_p == NULL)
        return tacl__comm_fail(comm, tacl__error(TACL_ERR_INVALID_ARG, INIT,
                                                 "newcomm_p is NULL"));
    status = group_check(comm, nranks, ranks, &me);
    if (status == TACL_OK)
        status = tacl__comm_conf_resolve(config, comm, &conf);
    if (status == TACL_OK && comm->x.ctx->fatal != TACL_OK)
        status = tacl__error(comm->x.ctx->fatal, INIT,
                             "the communicator has failed (%s); shrink or "
                             "destroy it", comm->x.ctx->fatal_msg);
    if (status != TACL_OK)
        return tacl__comm_fail(comm, status);
    world = malloc((size_t)nranks * sizeof(int));
    made = calloc(1, sizeof(*made));
    if (world == NULL || made == NULL) {
        status = tacl__error(TACL_ERR_NO_MEMORY, INIT, "out of memory");
        goto out;
    }
    for (int i = 0; i < nranks; i++)
        world[i] = comm->x.world[ranks[i]];
    /* The list, the meeting (the parent and the tag) and, from the
     * leader, the new communicator's id: its parent, the list, and which
     * of the leader's groups it is. */
    check = group_hash(0xcbf29ce484222325ull, &nranks, sizeof(nranks));
    check = group_hash(check, ranks, (size_t)nranks * sizeof(int));
    key = group_hash(0x6772707300000000ull ^ comm->x.id, &tag, sizeof(tag));
    value = group_hash(check ^ key, &comm->groups, sizeof(comm->groups));
    value = group_hash(value, &comm->rank, sizeof(comm->rank));
    comm->groups++;
    status = tacl__bootstrap_meet(comm->x.ctx->bs, world, nranks, me, key,
                                  check, comm->x.timeout_s, &value);
    if (status != TACL_OK)
        goto out;
    tacl__ctx_retain(comm->x.ctx);
    status = tacl__comm_create_on(made, comm->x.ctx, me, nranks, world,
                            (uint32_t)(value ^ (value >> 32)) | 2u, &conf);
    if (status != TACL_OK) {
        tacl__ctx_release(comm->x.ctx);
        goto out;
    }
    made->magic = TACL__COMM_ALIVE;
    tacl__comm_conf_log(made, &conf, "group");
    *newcomm_p = made;
    made = NULL;
out:
    free(made);
    free(world);
    return tacl__comm_fail(comm, status);
}

TACL_EXPORT tacl_status_t tacl_comm_create_group_config(
    tacl_comm_t comm, int nranks, const int *ranks, int tag,
    const tacl_config_t *config, tacl_comm_t *newcomm_p)
{
    TACL__COMM_HELD(comm, create_group_held(comm, nranks, ranks, tag, config,
                                            newcomm_p));
}

TACL_EXPORT tacl_status_t tacl_comm_create_group(tacl_comm_t comm,
                                                 int nranks, const int *ranks,
                                                 int tag,
                                                 tacl_comm_t *newcomm_p)
{
    return tacl_comm_create_group_config(comm, nranks, ranks, tag, NULL,
                                         newcomm_p);
}

int tacl__comm_nodes_even(tacl_comm_t comm)
{
    int nodes = comm->view.n_nodes, per = comm->size / nodes;
    int *count = calloc((size_t)nodes, sizeof(*count));
    int even = count != NULL && comm->size % nodes == 0;

    for (int r = 0; even && r < comm->size; r++)
        count[comm->node_of[r]]++;
    for (int j = 0; even && j < nodes; j++)
        even = count[j] == per;
    free(count);
    return even;
}

tacl_status_t tacl__comm_need_even_nodes(tacl_comm_t comm, const char *what)
{
    if (tacl__comm_nodes_even(comm))
        return TACL_OK;
    return tacl__error(TACL_ERR_UNSUPPORTED, COLL,
                       "%s needs the same number of ranks on every node "
                       "(%d ranks on %d nodes)",
                       what, comm->size, comm->view.n_nodes);
}

/* Make (once) and return a cached derived communicator. */
static tacl_status_t comm_derived_held(tacl_comm_t comm, int rail,
                                       tacl_comm_t *out_p)
{
    tacl_comm_t *slot;
    tacl_status_t status;

    if (out_p == NULL)
        return tacl__comm_fail(comm, tacl__error(TACL_ERR_INVALID_ARG, INIT,
                                                 "output pointer is NULL"));
    slot = rail ? &comm->rail : &comm->local;
    if (*slot == NULL) {
        tacl_comm_t made;
        status = tacl_comm_split(comm,
                                 rail ? comm->view.local_rank
                                      : comm->view.node,
                                 comm->rank, &made);
        if (status != TACL_OK)
            return tacl__comm_fail(comm, status);
        made->is_derived = 1;
        *slot = made;
        TACL_INFO(TOPO, "rank %d: %s communicator of %d ranks (rank %d)",
                  comm->rank, rail ? "rail" : "node", made->size,
                  made->rank);
    }
    *out_p = *slot;
    return TACL_OK;
}

static tacl_status_t comm_derived(tacl_comm_t comm, int rail,
                                  tacl_comm_t *out_p)
{
    TACL__COMM_HELD(comm, comm_derived_held(comm, rail, out_p));
}

TACL_EXPORT tacl_status_t tacl_comm_get_local(tacl_comm_t comm,
                                              tacl_comm_t *local_p)
{
    return comm_derived(comm, 0, local_p);
}

TACL_EXPORT tacl_status_t tacl_comm_get_rail(tacl_comm_t comm,
                                             tacl_comm_t *rail_p)
{
    return comm_derived(comm, 1, rail_p);
}

