/*
 * The view of a communicator's topology that algorithms and the tuner see:
 * ranks, and which node each rank is on.  The topology detector fills it;
 * tests and the simulator fill it by hand.
 */
#ifndef TACL_CORE_TOPO_VIEW_H
#define TACL_CORE_TOPO_VIEW_H

#include <stdint.h>

#include "tacl.h"

/** The most ranks a communicator may have for the fast engine (with more,
 * each reads too many slots per call: the schedules do better). */
#define TACL__FAST_MAX_RANKS 32
/** The fast engine's largest slot (TACL_FAST_MAX beyond it counts as
 * this). */
#define TACL__FAST_CAP_MAX (1u << 20)

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
    /* The node's network and GPU links, as the cost model prices them
       (algorithms/cost.h) and the simulator moves messages on them: a
       rank reaches other nodes through the NIC of its rail (topo.h). */
    int nics;              /* NICs of this node; 0: unknown (one NIC of the
                              net class's bandwidth, shared by the node) */
    double nic_bw;         /* GB/s of one NIC; 0: unknown */
    int gpu_peer;          /* 1: device buffers move between this node's
                              ranks on the gpu link class */
    uint64_t fast_max;     /* the most bytes of input per rank the fast
                              engine takes on this communicator (its
                              area's slot; the ranks, 2 to
                              TACL__FAST_MAX_RANKS of them on one node,
                              all map it); 0: no fast engine.  Set by the
                              communicator (or the simulator's cluster),
                              not the maker. */
} tacl__topo_view_t;

#endif /* TACL_CORE_TOPO_VIEW_H */
