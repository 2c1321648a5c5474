/*
 * The topology view's one maker (topo.h, tacl__topo_view_make).
 */
#include <string.h>

#include "topo.h"

void tacl__topo_view_make(tacl__topo_view_t *view, int rank, int nranks,
                          const int *node_of, const tacl__link_t *links,
                          const tacl__node_desc_t *node)
{
    memset(view, 0, sizeof(*view));
    view->rank = rank;
    view->nranks = nranks;
    view->node_of = node_of;
    view->node = node_of[rank];
    for (int r = 0; r < nranks; r++) {
        if (node_of[r] >= view->n_nodes)
            view->n_nodes = node_of[r] + 1;
        if (node_of[r] != view->node)
            continue;
        view->local_rank += r < rank;
        view->local_size++;
    }
    for (int c = 0; links != NULL && c < TACL_NUM_LINK_CLASSES; c++) {
        view->link_bw[c] = links[c].bw;
        view->link_lat[c] = links[c].lat;
    }
    if (node == NULL)
        return;
    view->stream_bytes = tacl__topo_stream_bytes(node);
    view->nics = node->nic_gbps > 0 ? node->nics : 0;
    view->nic_bw = node->nic_gbps > 0 ? node->nic_gbps / 8 : 0;
    view->gpu_peer = node->gpus > 0 && node->gpu_peer && links != NULL &&
                     links[TACL_LINK_GPU].bw > 0;
}
