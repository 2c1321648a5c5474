/*
 * The tuner's cost model, in one place: a Hockney alpha-beta figure per
 * link class (a message of m bytes costs alpha + m * beta), the gamma of
 * a CPU reduction (Thakur, Rabenseifner and Gropp, IJHPCA 2005, section
 * 3), the bandwidth penalty of algorithms that talk to distant peers, and
 * the helpers every algorithm's cost() uses to read a topology view's own
 * figures, falling back to the model's.  tacl__cost_print writes it all
 * as one table (NCCL prints its tuning model the same way).
 */
#ifndef TACL_ALGORITHMS_COST_H
#define TACL_ALGORITHMS_COST_H

#include <stdio.h>

#include "algo.h"

/** The model's figures for one link class. */
typedef struct {
    double alpha;  /* seconds per message; 0: not modelled */
    double beta;   /* seconds per byte; 0: not modelled */
} tacl__cost_link_t;

/**
 * Per link class, the figures the model uses where a topology view gives
 * none.  Only their ratios matter for the choice.  The tuner passes the
 * network's (several nodes) or the host's (one node) to cost() as its
 * alpha and beta.
 */
extern const tacl__cost_link_t tacl__cost_links[TACL_NUM_LINK_CLASSES];

/** Bandwidth penalty of algorithms that talk to distant peers. */
#define TACL__COST_SPREAD_PENALTY 1.5

/**
 * Seconds per byte a CPU reduction costs (the gamma of Thakur et al.):
 * reading two operands and writing one runs at about half the speed of a
 * copy.  On one node, where moving a byte costs about as much as reducing
 * it, this is what separates an algorithm that reduces the whole vector
 * at every step (recursive doubling) from one that reduces each block
 * once.
 */
#define TACL__COST_GAMMA_HOST (1.0 / 5e9)

/**
 * What each further message of one step adds to the step's time on the
 * host link, as a share of that link's alpha: posting, matching and
 * completing a small message, without the hand-off between cores that
 * makes up most of alpha.  Measured with perf/micro/shm_bench -m (msg_us
 * over step_us; docs/bench/shm-message-cost.md).  The direct algorithms,
 * which post a message to every peer in one step, pay it for every
 * message but the first.
 */
#define TACL__COST_MSG_SHARE 0.3

/**
 * What each further flow that crosses one NIC port at the same time adds
 * to the time the port takes for its bytes, as a share of that time:
 * the flows' congestion windows, losses and retransmissions in the
 * port's queue, which one flow does not pay (cost.c,
 * tacl__cost_contention).  The model takes the host link's per-message
 * share (TACL__COST_MSG_SHARE) rather than a figure of its own.  The
 * one measurement that separates the two is the sparse all-reduce's
 * push on the emulated 4x2 cluster at 1 Gbit/s (docs/bench/sparse.md):
 * the flat all-to-all-v (12 flows on each node's uplink) against the
 * hierarchical one (3), whose time difference over the push's bytes at
 * the link's rate gives a share of about 0.26 at 0.1% density, 0.74 at
 * 1% (a retransmission timeout's stall) and none at 10% (within the
 * noise); 0.3 is the low end, enough to rank the two rows as the
 * measurement does without fitting one stall.
 */
#define TACL__COST_FLOW_SHARE TACL__COST_MSG_SHARE

/**
 * The fast engine (executor/fastpath.h), as one call costs there: a
 * fixed part (publishing the input, the call's bookkeeping) and a part
 * per peer whose record a rank reads (a cache line brought over); the
 * bytes move at the host link's rate, a reduction's at
 * TACL__COST_GAMMA_HOST.  Their sum for one peer is what an 8-byte
 * blocking all-reduce takes on 2 ranks (all_reduce_perf -b 8 -e 8 -z 1:
 * 0.30-0.40 us, docs/design/fastpath.md); the split between them is an
 * estimate, since ranks that outnumber the cores (4 or more on the
 * project's 2-core machine) measure the scheduler, not the engine.
 */
#define TACL__COST_FAST_ALPHA 0.25e-6
#define TACL__COST_FAST_PEER 0.05e-6

/**
 * alpha (s) and beta (s/byte) of link class cls: the view's figures when
 * it has them, else fallback.
 */
static inline double tacl__link_alpha(const tacl__topo_view_t *v,
                                      tacl_link_class_t cls, double fallback)
{
    return v->link_bw[cls] > 0 ? v->link_lat[cls] * 1e-6 : fallback;
}

static inline double tacl__link_beta(const tacl__topo_view_t *v,
                                     tacl_link_class_t cls, double fallback)
{
    return v->link_bw[cls] > 0 ? 1.0 / (v->link_bw[cls] * 1e9) : fallback;
}

/** The host link's alpha and beta: the view's, else the model's. */
static inline double tacl__cost_host_alpha(const tacl__topo_view_t *v)
{
    return tacl__link_alpha(v, TACL_LINK_HOST,
                            tacl__cost_links[TACL_LINK_HOST].alpha);
}

static inline double tacl__cost_host_beta(const tacl__topo_view_t *v)
{
    return tacl__link_beta(v, TACL_LINK_HOST,
                           tacl__cost_links[TACL_LINK_HOST].beta);
}

/** Seconds each further message of a step adds on the host link. */
static inline double tacl__cost_host_msg(const tacl__topo_view_t *v)
{
    return TACL__COST_MSG_SHARE * tacl__cost_host_alpha(v);
}

/** Bytes of the vector a reduction collective reduces: 0 otherwise. */
static inline double tacl__cost_reduced(const tacl__coll_args_t *args,
                                        double bytes)
{
    return args->type == TACL_COLL_ALLREDUCE ||
                   args->type == TACL_COLL_REDUCE_SCATTER
               ? bytes
               : 0;
}

/**
 * The link class messages between two ranks of one node of view take
 * for args: the GPUs' peer links for device buffers on a node whose GPUs
 * reach one another (as the simulator and the transport move them), the
 * host link otherwise.
 */
static inline tacl_link_class_t tacl__cost_intra_class(
    const tacl__coll_args_t *args, const tacl__topo_view_t *view)
{
    return args->memtype == TACL_MEM_CUDA && view->gpu_peer &&
                   view->link_bw[TACL_LINK_GPU] > 0
               ? TACL_LINK_GPU
               : TACL_LINK_HOST;
}

/** alpha (s) of a message inside a node (tacl__cost_intra_class). */
static inline double tacl__cost_intra_alpha(const tacl__coll_args_t *args,
                                            const tacl__topo_view_t *view)
{
    return tacl__link_alpha(view, tacl__cost_intra_class(args, view),
                            tacl__cost_links[TACL_LINK_HOST].alpha);
}

/** beta (s/byte) of a message inside a node. */
static inline double tacl__cost_intra_beta(const tacl__coll_args_t *args,
                                           const tacl__topo_view_t *view)
{
    return tacl__link_beta(view, tacl__cost_intra_class(args, view),
                           tacl__cost_links[TACL_LINK_HOST].beta);
}

/*
 * The network as one flow sees it.  A rank reaches other nodes through
 * the NIC port of its rail (core/topo.h): on a node of g ranks and K
 * NICs, K >= g gives each rank its own port of K / g NICs, K < g makes
 * ceil(g / K) ranks share one NIC; a view without NICs has one NIC of the
 * net class's bandwidth for the whole node.  One flow never moves faster
 * than the net class's bandwidth, and the flows on one port share it.
 * So a flow between nodes runs at min(net bw, port bw / flows on its
 * port): a flat ring's one edge out of a node gets one rail, not the
 * node's aggregate, and an algorithm whose flows crowd few ports pays
 * for it.  beta is the network fallback, as for cost().
 */
/** Bytes per second of the NIC port a rank of a g-rank node uses. */
double tacl__cost_port_bw(const tacl__topo_view_t *view, double beta, int g);

/** The most ranks of a g-rank node that share one NIC port. */
int tacl__cost_port_ranks(const tacl__topo_view_t *view, int g);

/**
 * Bytes per second of one flow out of a g-rank node when flows share
 * its port.
 */
double tacl__cost_flow_bw(const tacl__topo_view_t *view, double beta, int g,
                          int flows);

/**
 * The factor by which flows concurrent flows on one NIC port stretch
 * the port's time for their bytes: 1 + TACL__COST_FLOW_SHARE * (flows -
 * 1), 1 for one flow (or none).  A flat exchange across nodes (every
 * rank to every remote rank at once) puts a flow per remote rank on
 * each of its ranks' ports; a hierarchical one a flow per other node.
 */
double tacl__cost_contention(double flows);

/**
 * Modelled time of one step of a flat algorithm on several nodes in which
 * each rank r < n sends bytes to peer(r, n, d) (negative: to no one): the
 * slower of its flows between nodes (a latency and the bytes at
 * tacl__cost_flow_bw, counting the senders on each NIC port) and its
 * flows inside nodes (on tacl__cost_intra_class); 0 when no rank sends.
 * alpha and beta are the network fallback, as for cost().
 */
double tacl__cost_step_time(const tacl__coll_args_t *args,
                            const tacl__topo_view_t *view, int n,
                            int (*peer)(int r, int n, int d), int d,
                            double bytes, double alpha, double beta);

/** The transfer time alone of such a step: without its latency. */
double tacl__cost_step_xfer(const tacl__coll_args_t *args,
                            const tacl__topo_view_t *view, int n,
                            int (*peer)(int r, int n, int d), int d,
                            double bytes, double beta);

/**
 * The latency a block pays on its way through n - 1 hops of a chain in
 * which rank r forwards to peer(r, n, d) (a ring): the mean latency of
 * the edges (the network's for an edge between nodes, the intra-node
 * class's otherwise) times n - 1.  A pipelined ring pays it once, not
 * n - 1 times its slowest edge.
 */
double tacl__cost_path_alpha(const tacl__coll_args_t *args,
                             const tacl__topo_view_t *view, int n,
                             int (*peer)(int r, int n, int d), int d,
                             double alpha);

/** Write the model's constants as a table, one row per link class. */
void tacl__cost_print(FILE *f);

#endif /* TACL_ALGORITHMS_COST_H */
