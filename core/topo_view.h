/*
 * The view of a communicator's topology that algorithms and the tuner see:
 * ranks, and which node each rank is on.  The topology detector fills it;
 * tests and the simulator fill it by hand.
 */
#ifndef TACL_CORE_TOPO_VIEW_H
#define TACL_CORE_TOPO_VIEW_H

#include <stdint.h>

#include "tacl.h"

typedef struct {
    int rank;            /* the caller's rank */
    int nranks;
    int n_nodes;
    const int *node_of;  /* node index of each rank, nranks entries; nodes
                            numbered 0.. in order of their lowest rank */
    int node;            /* node_of[rank] */
    int local_rank;      /* rank among the ranks of this node */
    int local_size;      /* ranks on this node */
    double link_bw[TACL_NUM_LINK_CLASSES];  /* GB/s per tacl_link_class_t */
    double link_lat[TACL_NUM_LINK_CLASSES]; /* microseconds per class */
    uint64_t stream_bytes; /* a collective whose ranks on this node write
                              this many bytes together or more streams its
                              large local copies past the cache; 0: never */
} tacl__topo_view_t;

#endif /* TACL_CORE_TOPO_VIEW_H */
