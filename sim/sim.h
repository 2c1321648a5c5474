/*
 * The simulator: predicted time of one collective on a modelled cluster,
 * from the schedules the real builders make for every rank.
 *
 * A cluster is nodes of ranks with the links of the topology file
 * (core/topo.h): each rank has one port out and one port in for messages
 * inside its node (the gpu class's bandwidth for device memory on nodes
 * with gpu_peer, the host class's otherwise), each node its NICs (a rank
 * uses the NIC of its rail, see topo.h) and, when the fabric is
 * oversubscribed, one uplink and one downlink into the switch fabric of
 * nics * nic_bw / oversub.  A message between two ranks occupies every
 * link of its path while it moves, after a start-up delay of its link
 * class's latency plus the fabric's per-message overhead.  When the
 * topology describes an emulation (fabric host_bw=R: every node on one
 * machine, whose cores do the kernel's TCP, veth and shaping work for all
 * of them), every network message also crosses one host link of R GB/s
 * that all nodes share; real clusters have no such link.
 *
 * Sharing is equal share with a per-link bottleneck: messages between
 * one pair of ranks queue on their connection, one at a time in the
 * order they started (as a transport sends them), and a busy connection
 * moves at the smallest, over the links of its path, of the link's
 * bandwidth divided by the busy connections on it, never faster than
 * its link class's bandwidth.  (Max-min fairness would hand a message's unused share on a
 * link to the others; the equal share is simpler, never faster, and
 * exact for the symmetric patterns collectives make, where the messages
 * sharing a link share the same bottleneck.)  Rates change only when a
 * message starts or ends on a link, so the simulation is event driven:
 * the only events are a step becoming runnable, a message's start-up
 * delay ending and a message or kernel finishing.
 *
 * A compute step (copy, reduce, divide, quantize) runs on its rank's
 * engine at the kernel rate of the topology's kernel line (0: free),
 * one at a time in the order they became runnable.  A message starts
 * when both its send and its receive are runnable (rendezvous, as
 * simrun checks schedules) and completes both.
 *
 * Everything is deterministic: ties are broken by the order events were
 * made, never by addresses or clocks.
 *
 * With a trace file, each simulation writes every rank's steps with the
 * times they became runnable, started and completed, in the format the
 * executor writes for TACL_STEP_TRACE, so that a run and its prediction
 * compare step by step.  Here a message starts when it joins its
 * connection's queue (both sides runnable and the start-up delay over;
 * the executor's start is when it posted it) and a compute step when it
 * joins its rank's engine queue.
 */
#ifndef TACL_SIM_SIM_H
#define TACL_SIM_SIM_H

#include <stdint.h>
#include <stdio.h>

#include "algo.h"
#include "topo.h"

/** A modelled cluster. */
typedef struct {
    int nranks;
    int n_nodes;
    int *node_of;          /* node of each rank, nodes numbered in order
                              of their lowest rank */
    int *local_of;         /* rank among its node's ranks */
    int *local_size;       /* ranks of each node */
    int *nics;             /* NICs of each node (at least 1) */
    double *nic_bw;        /* GB/s of one NIC of each node */
    tacl__node_desc_t *desc; /* each node's description, for its view */
    int *gpu_peer;         /* per node: device memory uses the gpu class */
    tacl__link_t link[TACL_NUM_LINK_CLASSES]; /* GB/s and us per class */
    double oversub;        /* fabric oversubscription, 1: none */
    double overhead;       /* us per message */
    double host_bw;        /* GB/s: nodes emulated on one host carry at
                              most this across the network, all messages
                              together; 0: real nodes, no such bound */
    double kernel_bw[TACL__TOPO_KERNELS];   /* GB/s, 0: free */
    uint64_t fast_max;     /* the views' fast_max (topo_view.h) when the
                              ranks are 2 to TACL__FAST_MAX_RANKS on one
                              node; 0 (the default): no fast engine */
    int watch;             /* the rank whose own sends a result also
                              counts (0 unless the caller sets it) */
    uint64_t budget;       /* most rate updates one simulation may make
                              before it gives up (TACL_ERR_UNSUPPORTED);
                              0: no limit */
    FILE *trace;           /* when set, each simulation appends every
                              rank's step timeline here
                              (tacl__sched_trace_write; NULL unless the
                              caller sets it) */
    uint64_t *trace_ops;   /* with trace: the op number to write, counted
                              up by each simulation */
} tacl__sim_cluster_t;

/**
 * A cluster of nranks ranks: rank r on node node_id[r] (any numbering
 * from 0: a communicator's ranks keep the world's node numbers), a node
 * described by topo's node desc_of[r].  A topology
 * without host or net bandwidth is refused (the simulator needs
 * figures).
 */
tacl_status_t tacl__sim_cluster_init(tacl__sim_cluster_t *c,
                                     const tacl__topo_t *topo, int nranks,
                                     const int *node_id, const int *desc_of);
/**
 * nodes nodes of rpn ranks each (rpn 0: the first node's GPUs, else its
 * cores), node m described by topo's node m modulo its node count.
 */
tacl_status_t tacl__sim_cluster_replicate(tacl__sim_cluster_t *c,
                                          const tacl__topo_t *topo,
                                          int nodes, int rpn);
void tacl__sim_cluster_fini(tacl__sim_cluster_t *c);

/** The topology view rank has of the cluster (node_of points into c). */
tacl__topo_view_t tacl__sim_view(const tacl__sim_cluster_t *c, int rank);

typedef struct {
    double seconds;        /* predicted time of the operation */
    uint64_t bytes[TACL_NUM_LINK_CLASSES]; /* sent, all ranks, per class */
    uint64_t msgs[TACL_NUM_LINK_CLASSES];
    uint64_t watch_bytes[TACL_NUM_LINK_CLASSES]; /* the cluster's watch
                                                    rank's alone */
    uint64_t watch_msgs[TACL_NUM_LINK_CLASSES];
    uint64_t steps;        /* schedule steps of all ranks */
    uint64_t events;       /* events the simulation processed */
    tacl__choice_t choice; /* how rank 0 ran it */
    const tacl__algo_t *algo; /* choice.algo */
} tacl__sim_result_t;

/**
 * Simulate one operation (args as a caller would pass them; the buffers
 * are not touched: equal non-NULL sendbuf and recvbuf ask for the
 * in-place form, anything else out of place; a variable-count exchange
 * without a table moves count elements between every pair, one whose
 * table holds every rank's counts (tacl__vcounts_with) moves those,
 * each rank's regions packed) as the decider chooses it
 * on every rank (tacl__algo_choose with force, NULL for none, and flags:
 * TACL__CHOOSE_ALONE for a blocking call alone).  Every rank's schedule
 * is built with the real builder; a choice of the fast engine, which
 * runs without one, is priced by its row's model and counts the bytes
 * each rank publishes once per peer that reads them, as the engine's
 * counters do.
 */
tacl_status_t tacl__sim_run(const tacl__sim_cluster_t *c,
                            const tacl__coll_args_t *args,
                            const tacl__algo_force_t *force, unsigned flags,
                            tacl__sim_result_t *res);

/**
 * Simulate every algorithm the tuner may choose for args (supported,
 * not explicit-only) and return the fastest in *best_p with its result;
 * ties go to the earlier registry row.  A candidate that runs past the
 * cluster's budget is passed over.  *best_p is NULL (and TACL_OK
 * returned) when none supports the operation.
 */
tacl_status_t tacl__sim_best(const tacl__sim_cluster_t *c,
                             const tacl__coll_args_t *args,
                             const tacl__algo_t **best_p,
                             tacl__sim_result_t *res);

#endif /* TACL_SIM_SIM_H */
