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
    return args->type == TACL__COLL_ALLREDUCE ||
                   args->type == TACL__COLL_REDUCE_SCATTER
               ? bytes
               : 0;
}

/**
 * The most ring edges (rank r to rank r + 1) that leave one node: how
 * many of a node's ranks share its uplink at each step of a flat ring.
 * 1 when the view has no node map.
 */
int tacl__cost_ring_share(const tacl__topo_view_t *view);

/**
 * Modelled time of one step of a flat algorithm on several nodes in which
 * each rank r < n sends bytes to peer(r, n, d) (negative: to no one): the
 * network, shared by the ranks of a node whose peers are elsewhere, when
 * any peer is on another node; the host link otherwise.  alpha and beta
 * are the network fallback, as for cost().
 */
double tacl__cost_step_time(const tacl__topo_view_t *view, int n,
                            int (*peer)(int r, int n, int d), int d,
                            double bytes, double alpha, double beta);

/** Write the model's constants as a table, one row per link class. */
void tacl__cost_print(FILE *f);

#endif /* TACL_ALGORITHMS_COST_H */
