/*
 * The hierarchical compressed all-reduce (tacl.h,
 * tacl_comp_allreduce_hops): Espresso's choice of which hops carry
 * encoded data (thesis section 4.4, the two-level strategies), for the
 * case that matters on a cluster: fast links inside a node stay dense,
 * the slow ones between nodes carry the codec's encoding.
 *
 * Inside each node a dense reduce-scatter leaves local rank l with share
 * l of the node's sum (the input padded with zeros to L equal shares);
 * the ranks of rail l (one per node) run the flat compressed all-reduce
 * (compcoll.c) on that share, with the caller's scheme and codec; a dense
 * all-gather inside each node puts the shares together.  Every rank of a
 * rail gets the same bits, and the all-gather copies them, so every rank
 * of the communicator does.  The node's partial sums are taken in the
 * dense reduce-scatter's order, not rank order.
 *
 * Each step is a public call (on comm, its local communicator or its
 * rail), as in sparse.c and compcoll.c.
 */
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "compcoll.h"
#include "log.h"

static tacl_status_t run_inter(const float *send, float *recv, size_t count,
                               const tacl_codec_t *codec,
                               const tacl_codec_params_t *params, float *err,
                               tacl_comp_scheme_t scheme, tacl_comm_t comm)
{
    tacl_comm_t local, rail;
    size_t nl, share, lr, valid;
    float *padded = NULL, *mine = NULL;
    tacl_status_t st;

    /* Every rank agrees on the call before the nodes' steps, which
     * would otherwise wait on one another's messages of other sizes. */
    st = tacl__comp_agree(comm, count, codec, params, scheme,
                          TACL_COMP_HOPS_INTER);
    if (st != TACL_OK || count == 0)
        return st;
    if (comm->view.n_nodes == 1)
        return tacl_allreduce(send, recv, count, TACL_FLOAT32, TACL_SUM, comm,
                              NULL);
    st = tacl__comm_need_even_nodes(comm, "comp_allreduce: hops inter");
    if (st == TACL_OK)
        st = tacl_comm_get_local(comm, &local);
    if (st == TACL_OK)
        st = tacl_comm_get_rail(comm, &rail);
    if (st != TACL_OK)
        return st;
    nl = (size_t)comm->view.local_size;
    lr = (size_t)comm->view.local_rank;
    share = (count + nl - 1) / nl;
    valid = lr * share >= count          ? 0
            : count - lr * share < share ? count - lr * share
                                         : share;
    padded = calloc(share * nl, sizeof(float));
    mine = malloc(share * sizeof(float));
    if (padded == NULL || mine == NULL) {
        st = tacl__error(TACL_ERR_NO_MEMORY, COLL,
                         "comp_allreduce: no memory for %zu shares of %zu "
                         "values",
                         nl, share);
        goto out;
    }
    memcpy(padded, send, count * sizeof(float));
    st = tacl_reduce_scatter(padded, mine, share, TACL_FLOAT32, TACL_SUM,
                             local, NULL);
    /* Only the share's values that exist are encoded: the padding (zeros,
     * at the end of the last shares) stays out of the codec and of err. */
    if (st == TACL_OK)
        st = tacl_comp_allreduce(mine, mine, valid, codec, params,
                                 err != NULL ? err + lr * share : NULL,
                                 scheme, rail);
    if (st == TACL_OK)
        st = tacl_allgather(mine, padded, share, TACL_FLOAT32, local, NULL);
    if (st == TACL_OK)
        memcpy(recv, padded, count * sizeof(float));
out:
    free(padded);
    free(mine);
    return st;
}

tacl_status_t tacl__comp_check_hops(const float *send, const float *recv,
                                    size_t count, const tacl_codec_t *codec,
                                    const tacl_codec_params_t *params,
                                    tacl_comp_scheme_t scheme,
                                    tacl_comp_hops_t hops)
{
    if (hops != TACL_COMP_HOPS_INTER)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "comp_allreduce: unknown hops %d (all or inter)",
                           (int)hops);
    if (count > 0 && (send == NULL || recv == NULL))
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "comp_allreduce: %s is NULL with count %zu",
                           send == NULL ? "sendbuf" : "recvbuf", count);
    return tacl__comp_check("comp_allreduce", codec, params, scheme);
}

TACL_EXPORT tacl_status_t tacl_comp_allreduce_hops(
    const float *sendbuf, float *recvbuf, size_t count,
    const tacl_codec_t *codec, const tacl_codec_params_t *params, float *err,
    tacl_comp_scheme_t scheme, tacl_comp_hops_t hops, tacl_comm_t comm)
{
    tacl_status_t st;

    if (hops == TACL_COMP_HOPS_ALL)
        return tacl_comp_allreduce(sendbuf, recvbuf, count, codec, params,
                                   err, scheme, comm);
    tacl__last_error_clear();
    st = tacl__comm_enter(comm);
    if (st != TACL_OK)
        return st;
    st = tacl__comp_check_hops(sendbuf, recvbuf, count, codec, params,
                               scheme, hops);
    if (st == TACL_OK)
        st = run_inter(sendbuf, recvbuf, count, codec, params, err, scheme,
                       comm);
    tacl__comm_leave(comm);
    return st == TACL_OK ? TACL_OK : tacl__comm_fail(comm, st);
}
