/*
 * The hierarchical compressed collectives (tacl.h,
 * tacl_comp_allreduce_hops, _reduce_scatter_hops, _allgather_hops):
 * Espresso's choice of which hops carry encoded data (thesis section
 * 4.4, the two-level strategies), for the case that matters on a
 * cluster: fast links inside a node stay dense, the slow ones between
 * nodes carry the codec's encoding.
 *
 * All-reduce: inside each node a dense reduce-scatter leaves local rank l
 * with share l of the node's sum (the input padded with zeros to L equal
 * shares); the ranks of rail l (one per node) run the flat compressed
 * all-reduce (compcoll.c) on that share, with the caller's scheme and
 * codec; a dense all-gather inside each node puts the shares together.
 *
 * Reduce-scatter: rank r's block must end at rank r, and rank r is on
 * rail l(r).  Inside each node a dense reduce-scatter leaves local rank l
 * with the node's sum of the blocks of rail l's ranks, in rail order
 * (the input permuted so that each rail's blocks are one share); the
 * rail's flat compressed reduce-scatter then leaves each of its ranks
 * its own block.  All-gather, the mirror: the rail's flat compressed
 * all-gather gives each rank its rail's blocks, a dense all-gather inside
 * the node the other rails', and a permutation puts every block at its
 * rank's place.
 *
 * Every rank of a rail gets the same bits, and the dense steps copy them
 * (all-reduce, all-gather), so every rank of the communicator does.  The
 * node's partial sums are taken in the dense reduce-scatter's order, not
 * rank order.  Each step is a public call (on comm, its local
 * communicator or its rail), as in sparse.c and compcoll.c.
 */
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "compcoll.h"
#include "cost.h"
#include "log.h"

/* What a hierarchical call needs of comm: its node and rail
 * communicators, the node count N and ranks a node L. */
typedef struct {
    tacl_comm_t local, rail;
    size_t n_nodes, per_node, local_rank;
} hier_t;

/* Agree on the call (every rank, before the nodes' steps, which would
 * otherwise wait on one another's messages of other sizes); *flat_p 1
 * when there is nothing between nodes to do hierarchically (count 0 or
 * one node: the caller runs the dense collective or nothing). */
static tacl_status_t hier_begin(tacl_comm_t comm, tacl_coll_t coll,
                                size_t count, const tacl_codec_t *codec,
                                const tacl_codec_params_t *params,
                                tacl_comp_scheme_t scheme, hier_t *h,
                                int *flat_p)
{
    tacl_status_t st = tacl__comp_agree(comm, coll, count, codec, params,
                                        scheme, TACL_COMP_HOPS_INTER);

    *flat_p = 1;
    if (st != TACL_OK || count == 0 || comm->view.n_nodes == 1)
        return st;
    *flat_p = 0;
    st = tacl__comm_need_even_nodes(comm, tacl__comp_name(coll));
    if (st == TACL_OK)
        st = tacl_comm_get_local(comm, &h->local);
    if (st == TACL_OK)
        st = tacl_comm_get_rail(comm, &h->rail);
    h->n_nodes = (size_t)comm->view.n_nodes;
    h->per_node = (size_t)comm->view.local_size;
    h->local_rank = (size_t)comm->view.local_rank;
    return st;
}

/* order[l * N + j]: the rank that is rail l's j-th (rails and nodes
 * order ranks by rank, as tacl_comm_get_local/rail split them). */
static int *rail_order(tacl_comm_t comm, const hier_t *h)
{
    int *order = malloc((size_t)comm->size * sizeof(*order));
    size_t *seen = calloc(h->n_nodes, sizeof(*seen));
    size_t *filled = calloc(h->per_node, sizeof(*filled));

    if (order != NULL && seen != NULL && filled != NULL) {
        for (int r = 0; r < comm->size; r++) {
            size_t l = seen[comm->view.node_of[r]]++;

            order[l * h->n_nodes + filled[l]++] = r;
        }
    } else {
        free(order);
        order = NULL;
        tacl__error(TACL_ERR_NO_MEMORY, COLL, "no memory for the order of "
                    "%d ranks' blocks", comm->size);
    }
    free(seen);
    free(filled);
    return order;
}

/* A reduce-scatter's or all-gather's scratch between nodes: the rail
 * order, every rank's block in rail order, and one rail's N blocks. */
typedef struct {
    int *order;
    float *staged, *part;
} blocks_t;

static tacl_status_t blocks_get(tacl_comm_t comm, const hier_t *h, size_t c,
                                tacl_coll_t coll, blocks_t *b)
{
    b->order = rail_order(comm, h);
    b->staged = tacl__comp_scratch(comm, (size_t)comm->size * c *
                                             sizeof(float));
    b->part = tacl__comp_scratch(comm, h->n_nodes * c * sizeof(float));
    if (b->order == NULL)
        return TACL_ERR_NO_MEMORY; /* rail_order said so */
    if (b->staged == NULL || b->part == NULL)
        return tacl__error(TACL_ERR_NO_MEMORY, COLL,
                           "%s: no memory for %d blocks of %zu values",
                           tacl__comp_name(coll), comm->size, c);
    return TACL_OK;
}

static void blocks_put(tacl_comm_t comm, blocks_t *b)
{
    free(b->order);
    tacl__comp_scratch_put(comm, b->staged);
    tacl__comp_scratch_put(comm, b->part);
}

/* Blocks of c values from rank order to rail order: block order[i] of
 * ranks to block i of rails. */
static void to_rails(const float *ranks, float *rails, const int *order,
                     int n, size_t c)
{
    for (int i = 0; i < n; i++)
        memcpy(rails + (size_t)i * c, ranks + (size_t)order[i] * c,
               c * sizeof(float));
}

/* The inverse: block i of rails to block order[i] of ranks. */
static void to_ranks(const float *rails, float *ranks, const int *order,
                     int n, size_t c)
{
    for (int i = 0; i < n; i++)
        memcpy(ranks + (size_t)order[i] * c, rails + (size_t)i * c,
               c * sizeof(float));
}

static tacl_status_t allreduce_inter(const float *send, float *recv,
                                     size_t count, const tacl_codec_t *codec,
                                     const tacl_codec_params_t *params,
                                     float *err, tacl_comp_scheme_t scheme,
                                     tacl_comm_t comm)
{
    hier_t h;
    size_t share, valid;
    float *padded = NULL, *mine = NULL;
    int flat;
    tacl_status_t st = hier_begin(comm, TACL_COLL_ALLREDUCE, count, codec,
                                  params, scheme, &h, &flat);

    if (st != TACL_OK || count == 0)
        return st;
    if (flat)
        return tacl_allreduce(send, recv, count, TACL_FLOAT32, TACL_SUM, comm,
                              NULL);
    share = (count + h.per_node - 1) / h.per_node;
    valid = h.local_rank * share >= count ? 0
            : count - h.local_rank * share < share
                ? count - h.local_rank * share
                : share;
    padded = tacl__comp_scratch(comm, share * h.per_node * sizeof(float));
    mine = tacl__comp_scratch(comm, share * sizeof(float));
    if (padded == NULL || mine == NULL) {
        st = tacl__error(TACL_ERR_NO_MEMORY, COLL,
                         "comp_allreduce: no memory for %zu shares of %zu "
                         "values",
                         h.per_node, share);
        goto out;
    }
    memcpy(padded, send, count * sizeof(float));
    memset(padded + count, 0, (share * h.per_node - count) * sizeof(float));
    st = tacl_reduce_scatter(padded, mine, share, TACL_FLOAT32, TACL_SUM,
                             h.local, NULL);
    /* Only the share's values that exist are encoded: the padding (zeros,
     * at the end of the last shares) stays out of the codec and of err. */
    if (st == TACL_OK)
        st = tacl_comp_allreduce(mine, mine, valid, codec, params,
                                 err != NULL ? err + h.local_rank * share
                                             : NULL,
                                 scheme, h.rail);
    if (st == TACL_OK)
        st = tacl_allgather(mine, padded, share, TACL_FLOAT32, h.local, NULL);
    if (st == TACL_OK)
        memcpy(recv, padded, count * sizeof(float));
out:
    tacl__comp_scratch_put(comm, padded);
    tacl__comp_scratch_put(comm, mine);
    return st;
}

static tacl_status_t reduce_scatter_inter(const float *send, float *recv,
                                          size_t c, const tacl_codec_t *codec,
                                          const tacl_codec_params_t *params,
                                          float *err,
                                          tacl_comp_scheme_t scheme,
                                          tacl_comm_t comm)
{
    hier_t h;
    blocks_t b = {0};
    int flat;
    float *rail_err = NULL;
    const int *mine;
    tacl_status_t st = hier_begin(comm, TACL_COLL_REDUCE_SCATTER, c, codec,
                                  params, scheme, &h, &flat);

    if (st != TACL_OK || c == 0)
        return st;
    if (flat)
        return tacl_reduce_scatter(send, recv, c, TACL_FLOAT32, TACL_SUM,
                                   comm, NULL);
    st = blocks_get(comm, &h, c, TACL_COLL_REDUCE_SCATTER, &b);
    if (st == TACL_OK && err != NULL &&
        (rail_err = tacl__comp_scratch(comm, h.n_nodes * c *
                                                 sizeof(float))) == NULL)
        st = tacl__error(TACL_ERR_NO_MEMORY, COLL, "comp_reduce_scatter: no "
                         "memory for the residual of %zu blocks", h.n_nodes);
    if (st != TACL_OK)
        goto out;
    /* This rank's rail's ranks: their residuals are its node's. */
    mine = b.order + h.local_rank * h.n_nodes;
    to_rails(send, b.staged, b.order, comm->size, c);
    st = tacl_reduce_scatter(b.staged, b.part, h.n_nodes * c, TACL_FLOAT32,
                             TACL_SUM, h.local, NULL);
    if (rail_err != NULL)
        to_rails(err, rail_err, mine, (int)h.n_nodes, c);
    if (st == TACL_OK)
        st = tacl_comp_reduce_scatter(b.part, recv, c, codec, params,
                                      rail_err, scheme, h.rail);
    if (st == TACL_OK && rail_err != NULL)
        to_ranks(rail_err, err, mine, (int)h.n_nodes, c);
out:
    blocks_put(comm, &b);
    tacl__comp_scratch_put(comm, rail_err);
    return st;
}

static tacl_status_t allgather_inter(const float *send, float *recv,
                                     size_t c, const tacl_codec_t *codec,
                                     const tacl_codec_params_t *params,
                                     float *err, tacl_comm_t comm)
{
    hier_t h;
    blocks_t b = {0};
    int flat;
    tacl_status_t st = hier_begin(comm, TACL_COLL_ALLGATHER, c, codec,
                                  params, TACL_COMP_GATHER, &h, &flat);

    if (st != TACL_OK || c == 0)
        return st;
    if (flat)
        return tacl_allgather(send, recv, c, TACL_FLOAT32, comm, NULL);
    st = blocks_get(comm, &h, c, TACL_COLL_ALLGATHER, &b);
    if (st == TACL_OK)
        st = tacl_comp_allgather(send, b.part, c, codec, params, err, h.rail);
    if (st == TACL_OK)
        st = tacl_allgather(b.part, b.staged, h.n_nodes * c, TACL_FLOAT32,
                            h.local, NULL);
    if (st == TACL_OK)
        to_ranks(b.staged, recv, b.order, comm->size, c);
    blocks_put(comm, &b);
    return st;
}

tacl_status_t tacl__comp_check_hops(tacl_coll_t coll, const float *send,
                                    const float *recv, size_t count,
                                    const tacl_codec_t *codec,
                                    const tacl_codec_params_t *params,
                                    tacl_comp_scheme_t scheme,
                                    tacl_comp_hops_t hops)
{
    const char *name = tacl__comp_name(coll);

    if (hops != TACL_COMP_HOPS_INTER)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "%s: unknown hops %d (all or inter)", name,
                           (int)hops);
    if (count > 0 && (send == NULL || recv == NULL))
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "%s: %s is NULL with count %zu", name,
                           send == NULL ? "sendbuf" : "recvbuf", count);
    return tacl__comp_check(name, codec, params,
                            coll == TACL_COLL_ALLGATHER ? TACL_COMP_GATHER
                                                        : scheme);
}

/* An entry point with hops other than ALL: checks, then the call. */
static tacl_status_t hops_entry(tacl_coll_t coll, const float *send,
                                float *recv, size_t count,
                                const tacl_codec_t *codec,
                                const tacl_codec_params_t *params, float *err,
                                tacl_comp_scheme_t scheme,
                                tacl_comp_hops_t hops, tacl_comm_t comm)
{
    tacl_status_t st;

    tacl__last_error_clear();
    st = tacl__comm_enter(comm);
    if (st != TACL_OK)
        return st;
    st = tacl__comp_check_hops(coll, send, recv, count, codec, params,
                               scheme, hops);
    if (st == TACL_OK && coll == TACL_COLL_REDUCE_SCATTER)
        st = reduce_scatter_inter(send, recv, count, codec, params, err,
                                  scheme, comm);
    else if (st == TACL_OK && coll == TACL_COLL_ALLGATHER)
        st = allgather_inter(send, recv, count, codec, params, err, comm);
    else if (st == TACL_OK)
        st = allreduce_inter(send, recv, count, codec, params, err, scheme,
                             comm);
    tacl__comm_leave(comm);
    return st == TACL_OK ? TACL_OK : tacl__comm_fail(comm, st);
}

TACL_EXPORT tacl_status_t tacl_comp_allreduce_hops(
    const float *sendbuf, float *recvbuf, size_t count,
    const tacl_codec_t *codec, const tacl_codec_params_t *params, float *err,
    tacl_comp_scheme_t scheme, tacl_comp_hops_t hops, tacl_comm_t comm)
{
    if (hops == TACL_COMP_HOPS_ALL)
        return tacl_comp_allreduce(sendbuf, recvbuf, count, codec, params,
                                   err, scheme, comm);
    return hops_entry(TACL_COLL_ALLREDUCE, sendbuf, recvbuf, count, codec,
                      params, err, scheme, hops, comm);
}

TACL_EXPORT tacl_status_t tacl_comp_reduce_scatter_hops(
    const float *sendbuf, float *recvbuf, size_t recvcount,
    const tacl_codec_t *codec, const tacl_codec_params_t *params, float *err,
    tacl_comp_scheme_t scheme, tacl_comp_hops_t hops, tacl_comm_t comm)
{
    if (hops == TACL_COMP_HOPS_ALL)
        return tacl_comp_reduce_scatter(sendbuf, recvbuf, recvcount, codec,
                                        params, err, scheme, comm);
    return hops_entry(TACL_COLL_REDUCE_SCATTER, sendbuf, recvbuf, recvcount,
                      codec, params, err, scheme, hops, comm);
}

TACL_EXPORT tacl_status_t tacl_comp_allgather_hops(
    const float *sendbuf, float *recvbuf, size_t sendcount,
    const tacl_codec_t *codec, const tacl_codec_params_t *params, float *err,
    tacl_comp_hops_t hops, tacl_comm_t comm)
{
    if (hops == TACL_COMP_HOPS_ALL)
        return tacl_comp_allgather(sendbuf, recvbuf, sendcount, codec, params,
                                   err, comm);
    return hops_entry(TACL_COLL_ALLGATHER, sendbuf, recvbuf, sendcount, codec,
                      params, err, TACL_COMP_GATHER, hops, comm);
}

/*
 * ---- The estimate (tacl_comp_estimate_hops). ----
 *
 * The node and rail communicators a hierarchical call runs on are made
 * by its first call; an estimate may not make them (it is local), so the
 * dense steps inside the node and the rails' compressed call are priced
 * by bytes per link class, as the sparse estimate prices its
 * hierarchical schemes: inside the node ring steps at the host link's
 * alpha and beta; on the rails the flat call's steps on N ranks
 * (tacl__comp_flat_bytes), the L rails of a node at once, each flow at
 * its share of the node's NIC port (tacl__cost_flow_bw).  The header the
 * ranks agree on first is tacl_comm_estimate's all-gather on comm.
 */

/* Adds one phase: bytes and messages a rank sends on link class cls. */
static void add_phase(tacl_sim_info_t *info, tacl_link_class_t cls,
                      double bytes, int messages, double alpha,
                      double bytes_per_s)
{
    if (messages == 0)
        return;
    info->seconds += messages * alpha + bytes / bytes_per_s;
    info->bytes[cls] += (uint64_t)bytes;
    info->messages[cls] += (uint64_t)messages;
}

static tacl_status_t estimate_inter(tacl_comm_t comm, tacl_coll_t coll,
                                    size_t count, const tacl_codec_t *codec,
                                    const tacl_codec_params_t *params,
                                    tacl_comp_scheme_t scheme,
                                    tacl_sim_info_t *info_p)
{
    const tacl__topo_view_t *v = &comm->view;
    size_t N = (size_t)v->n_nodes, L = (size_t)v->local_size;
    /* Values a rank holds inside the node after the dense reduce-scatter
     * (before the dense all-gather), and the rail call's count. */
    size_t local = coll == TACL_COLL_ALLREDUCE ? (count + L - 1) / L
                                               : count * N;
    size_t rail = coll == TACL_COLL_ALLREDUCE ? local : count;
    int dense_steps = coll == TACL_COLL_ALLREDUCE ? 2 : 1, rail_msgs;
    double rail_bytes, host_bw = 1.0 / tacl__cost_host_beta(v);
    double net_beta = tacl__cost_links[TACL_LINK_NET].beta;
    double flow_bw = tacl__cost_flow_bw(v, net_beta, (int)L,
                                        tacl__cost_port_ranks(v, (int)L));
    tacl_sim_info_t hdr;
    tacl_status_t st;

    st = tacl__comm_need_even_nodes(comm, "comp_estimate");
    if (st == TACL_OK)
        st = tacl_comm_estimate(comm, TACL_COLL_ALLGATHER, 6, TACL_UINT64,
                                TACL_SUM, 0, &hdr);
    if (st == TACL_OK)
        st = tacl__comp_flat_bytes(coll, rail, codec, params, scheme, (int)N,
                                   &rail_bytes, &rail_msgs);
    if (st != TACL_OK)
        return st;
    *info_p = hdr;
    add_phase(info_p, TACL_LINK_HOST,
              (double)dense_steps * (double)(L - 1) * (double)local * 4.0,
              dense_steps * (int)(L - 1), tacl__cost_host_alpha(v), host_bw);
    add_phase(info_p, TACL_LINK_NET, rail_bytes, rail_msgs,
              tacl__link_alpha(v, TACL_LINK_NET,
                               tacl__cost_links[TACL_LINK_NET].alpha),
              flow_bw);
    snprintf(info_p->algorithm, sizeof(info_p->algorithm), "%s/inter",
             tacl_comp_scheme_name(coll == TACL_COLL_ALLGATHER
                                       ? TACL_COMP_GATHER
                                       : scheme));
    snprintf(info_p->engine, sizeof(info_p->engine), "schedule");
    return TACL_OK;
}

TACL_EXPORT tacl_status_t tacl_comp_estimate_hops(
    tacl_comm_t comm, tacl_coll_t coll, size_t count,
    const tacl_codec_t *codec, const tacl_codec_params_t *params,
    tacl_comp_scheme_t scheme, tacl_comp_hops_t hops,
    tacl_sim_info_t *info_p)
{
    tacl_status_t st;

    if (hops == TACL_COMP_HOPS_ALL)
        return tacl_comp_estimate(comm, coll, count, codec, params, scheme,
                                  info_p);
    tacl__last_error_clear();
    st = tacl__comm_enter(comm);
    if (st != TACL_OK)
        return st;
    if (info_p == NULL)
        st = tacl__error(TACL_ERR_INVALID_ARG, COLL,
                         "comp_estimate: info_p is NULL");
    else if (coll != TACL_COLL_ALLREDUCE &&
             coll != TACL_COLL_REDUCE_SCATTER &&
             coll != TACL_COLL_ALLGATHER)
        st = tacl__error(TACL_ERR_INVALID_ARG, COLL,
                         "comp_estimate: coll %s is not a compressed "
                         "collective (allreduce, reduce_scatter, "
                         "allgather)",
                         tacl_coll_name(coll));
    else /* the call's own checks; no buffers with count 0 */
        st = tacl__comp_check_hops(coll, NULL, NULL, 0, codec, params,
                                   scheme, hops);
    /* One node (or nothing to send): the call is the dense collective. */
    if (st == TACL_OK && (comm->view.n_nodes == 1 || count == 0))
        st = tacl_comm_estimate(comm, coll, count, TACL_FLOAT32, TACL_SUM, 0,
                                info_p);
    else if (st == TACL_OK)
        st = estimate_inter(comm, coll, count, codec, params, scheme,
                            info_p);
    tacl__comm_leave(comm);
    return st == TACL_OK ? TACL_OK : tacl__comm_fail(comm, st);
}
