/*
 * Hierarchical all-to-all-v: aggregate per node before crossing, as
 * mixture-of-experts dispatch on slow links wants (the two-level
 * all-to-all of Tutel's 2DH and DeepSpeed-MoE's hierarchical all-to-all,
 * with a relay per node pair instead of a rail per local index, so that
 * one message crosses per ordered pair of nodes).
 *
 * Node a's traffic for node b goes through two relays: its out-relay,
 * the rank of local index b mod k on node a, and node b's in-relay for
 * it, the rank of local index a mod k on node b (k ranks per node), so
 * the relays of different node pairs are spread over the ranks.
 *   1. Every rank of node a sends each of its blocks for node b to the
 *      out-relay, which stages them by (source local, destination local).
 *   2. Once all have arrived, the out-relay sends the whole staging, one
 *      message, to the in-relay.
 *   3. The in-relay sends each block to its destination rank, straight
 *      into its receive region.
 * Traffic within a node is sent directly, as the flat exchange does.
 * Every message of steps 1 and 3 stays on the node: the network carries
 * the same bytes as the flat exchange in n_nodes * (n_nodes - 1)
 * messages instead of nranks * (nranks - k), which is what pays on a
 * slow network with small and uneven blocks.  A relay must know the
 * sizes of other ranks' blocks, which only their senders' tables hold:
 * the builder needs every rank's counts (tacl__vpairs_known), which the
 * ranks of a call on several nodes gather first (lib/vmatrix.c), or none
 * (an estimate: count elements everywhere).  Regular layouts only
 * (tacl__hier_layout_ok); elsewhere the flat row serves.
 *
 * Hierarchical all-gather-v, the same relays (gather per node, exchange
 * between nodes, broadcast within, as MiCS section 3.3's hierarchical
 * all-gather does with fixed counts): the ranks of a node first
 * exchange their blocks directly; each out-relay packs its node's
 * blocks, in local order, into one stage and sends it to its in-relay
 * on the other node, which forwards it to the other ranks of its node;
 * every rank unpacks the stages it gets into its own displacements.
 * Every rank knows every rank's count (recvcounts), so nothing is
 * gathered first.  Node a's blocks cross to each other node once, in one
 * message, instead of once per remote rank.
 */
#include <stdlib.h>
#include <string.h>

#include "hier.h"
#include "log.h"

/* Message tags' step numbers: one message per pair and purpose. */
#define HV_STEP_CROSS 0
#define HV_STEP_LOCAL 1
#define HV_STEP_GATHER(b, k, m) (2 + (uint64_t)(b) * (k) + (m))
#define HV_STEP_SCATTER(n, a, k, l)                                          \
    (2 + (uint64_t)(n) + (uint64_t)(a) * (k) + (l))
#define HV_STEP_FORWARD(a) (2 + (uint64_t)(a))

typedef struct {
    tacl__sched_t *s;
    const tacl__coll_args_t *args;
    tacl__hier_t h;
    tacl__algo_io_t io;
    int n, g, k;          /* ranks, nodes, ranks per node */
    int node, loc;        /* this rank's */
    size_t es;
    uint64_t *off;        /* k * k + 1: one node pair's staging layout */
} hv_t;

/* Elements rank (a, l) sends rank (b, m). */
static size_t hv_pair(const hv_t *x, int a, int l, int b, int m)
{
    return tacl__vpair(x->args, x->n, tacl__hier_rank(&x->h, a, l),
                       tacl__hier_rank(&x->h, b, m));
}

/*
 * The staging of node a's blocks for node b, in elements: piece (l, m)
 * at off[l * k + m], the total at off[k * k].
 */
static uint64_t hv_layout(hv_t *x, int a, int b)
{
    uint64_t at = 0;

    for (int l = 0; l < x->k; l++)
        for (int m = 0; m < x->k; m++) {
            x->off[l * x->k + m] = at;
            at += hv_pair(x, a, l, b, m);
        }
    x->off[x->k * x->k] = at;
    return at;
}

static tacl__bref_t hv_in(const hv_t *x, int peer)
{
    size_t d;

    tacl__vsend(x->args, peer, &d);
    return tacl__bref_add(x->io.in, (uint64_t)d * x->es);
}

static tacl__bref_t hv_out(const hv_t *x, int peer)
{
    size_t d;

    tacl__vrecv(x->args, peer, &d);
    return tacl__bref_add(x->io.out, (uint64_t)d * x->es);
}

/* This rank's own block and its exchange with the ranks of its node. */
static void hv_local(hv_t *x, uint64_t tag)
{
    for (int m = 0; m < x->k; m++) {
        int peer = tacl__hier_rank(&x->h, x->node, m);
        size_t d, sn = tacl__vsend(x->args, peer, &d);
        size_t rn = tacl__vrecv(x->args, peer, &d);

        if (m == x->loc && sn > 0)
            tacl__sched_copy(x->s, hv_out(x, peer), hv_in(x, peer),
                             (uint64_t)sn * x->es, TACL__NO_DEPS);
        if (m == x->loc)
            continue;
        if (sn > 0)
            tacl__sched_send(x->s, peer, hv_in(x, peer),
                             (uint64_t)sn * x->es, tag + HV_STEP_LOCAL,
                             TACL__NO_DEPS);
        if (rn > 0)
            tacl__sched_recv(x->s, peer, hv_out(x, peer),
                             (uint64_t)rn * x->es, tag + HV_STEP_LOCAL,
                             TACL__NO_DEPS);
    }
}

/* Steps 1 and 2 for node b, this rank its out-relay: stage, then cross. */
static tacl_status_t hv_relay_out(hv_t *x, int b, uint64_t tag, int32_t *ids)
{
    uint64_t total = hv_layout(x, x->node, b);
    int32_t stage;
    int nids = 0;

    if (total == 0)
        return TACL_OK;
    stage = tacl__sched_scratch(x->s, total * x->es, x->args->memtype);
    for (int l = 0; l < x->k; l++) {
        int from = tacl__hier_rank(&x->h, x->node, l);

        for (int m = 0; m < x->k; m++) {
            size_t c = hv_pair(x, x->node, l, b, m);
            tacl__bref_t at =
                tacl__bref(stage, x->off[l * x->k + m] * x->es);
            int to = tacl__hier_rank(&x->h, b, m);

            if (c == 0)
                continue;
            if (l == x->loc)
                ids[nids++] = tacl__sched_copy(x->s, at, hv_in(x, to),
                                               (uint64_t)c * x->es,
                                               TACL__NO_DEPS);
            else
                ids[nids++] = tacl__sched_recv(
                    x->s, from, at, (uint64_t)c * x->es,
                    tag + HV_STEP_GATHER(b, x->k, m), TACL__NO_DEPS);
        }
    }
    nids = tacl__sched_fold(x->s, ids, nids);
    tacl__sched_send(x->s, tacl__hier_rank(&x->h, b, x->node % x->k),
                     tacl__bref(stage, 0), total * x->es,
                     tag + HV_STEP_CROSS, ids, nids);
    return tacl__sched_status(x->s);
}

/* Step 1 from this rank: its blocks for node b to the out-relay. */
static void hv_to_relay(hv_t *x, int b, uint64_t tag)
{
    int relay = tacl__hier_rank(&x->h, x->node, b % x->k);

    for (int m = 0; m < x->k; m++) {
        int to = tacl__hier_rank(&x->h, b, m);
        size_t d, c = tacl__vsend(x->args, to, &d);

        if (c > 0)
            tacl__sched_send(x->s, relay, hv_in(x, to), (uint64_t)c * x->es,
                             tag + HV_STEP_GATHER(b, x->k, m),
                             TACL__NO_DEPS);
    }
}

/* Step 3 for node a, this rank its in-relay: receive, then scatter. */
static void hv_relay_in(hv_t *x, int a, uint64_t tag)
{
    uint64_t total = hv_layout(x, a, x->node);
    int32_t stage, got;

    if (total == 0)
        return;
    stage = tacl__sched_scratch(x->s, total * x->es, x->args->memtype);
    got = tacl__sched_recv(x->s, tacl__hier_rank(&x->h, a, x->node % x->k),
                           tacl__bref(stage, 0), total * x->es,
                           tag + HV_STEP_CROSS, TACL__NO_DEPS);
    for (int l = 0; l < x->k; l++)
        for (int m = 0; m < x->k; m++) {
            size_t c = hv_pair(x, a, l, x->node, m);
            tacl__bref_t at =
                tacl__bref(stage, x->off[l * x->k + m] * x->es);
            int from = tacl__hier_rank(&x->h, a, l);

            if (c == 0)
                continue;
            if (m == x->loc)
                tacl__sched_copy(x->s, hv_out(x, from), at,
                                 (uint64_t)c * x->es, TACL__DEPS(got));
            else
                tacl__sched_send(x->s, tacl__hier_rank(&x->h, x->node, m),
                                 at, (uint64_t)c * x->es,
                                 tag + HV_STEP_SCATTER(x->n, a, x->k, l),
                                 TACL__DEPS(got));
        }
}

/* Step 3 to this rank from node a's blocks, through its in-relay. */
static void hv_from_relay(hv_t *x, int a, uint64_t tag)
{
    int relay = tacl__hier_rank(&x->h, x->node, a % x->k);

    for (int l = 0; l < x->k; l++) {
        int from = tacl__hier_rank(&x->h, a, l);
        size_t d, c = tacl__vrecv(x->args, from, &d);

        if (c > 0)
            tacl__sched_recv(x->s, relay, hv_out(x, from),
                             (uint64_t)c * x->es,
                             tag + HV_STEP_SCATTER(x->n, a, x->k, l),
                             TACL__NO_DEPS);
    }
}

/* Elements of rank (a, l)'s block of an all-gather-v. */
static size_t hg_count(const hv_t *x, int a, int l)
{
    size_t d;

    return tacl__vrecv(x->args, tacl__hier_rank(&x->h, a, l), &d);
}

/* Node a's stage: block l at off[l], the total at off[k]. */
static uint64_t hg_layout(hv_t *x, int a)
{
    uint64_t at = 0;

    for (int l = 0; l < x->k; l++) {
        x->off[l] = at;
        at += hg_count(x, a, l);
    }
    x->off[x->k] = at;
    return at;
}

/* Node a's stage, got by step id got, into this rank's output. */
static void hg_unpack(hv_t *x, int a, int32_t stage, int32_t got)
{
    hg_layout(x, a);
    for (int l = 0; l < x->k; l++) {
        size_t c = hg_count(x, a, l);

        if (c > 0)
            tacl__sched_copy(x->s, hv_out(x, tacl__hier_rank(&x->h, a, l)),
                             tacl__bref(stage, x->off[l] * x->es),
                             (uint64_t)c * x->es, TACL__DEPS(got));
    }
}

static tacl_status_t hg_build(hv_t *x, uint64_t tag, int32_t *ids)
{
    int me = x->s->rank, nids = 0;
    size_t mine = hg_count(x, x->node, x->loc);
    int32_t stage = -1;
    uint64_t total;

    /* This node's blocks, directly among its ranks. */
    if (mine > 0)
        ids[nids++] = tacl__sched_copy(x->s, hv_out(x, me), x->io.in,
                                       (uint64_t)mine * x->es,
                                       TACL__NO_DEPS);
    for (int m = 0; m < x->k; m++) {
        int peer = tacl__hier_rank(&x->h, x->node, m);
        size_t c = hg_count(x, x->node, m);

        if (m == x->loc)
            continue;
        if (mine > 0)
            tacl__sched_send(x->s, peer, x->io.in, (uint64_t)mine * x->es,
                             tag + HV_STEP_LOCAL, TACL__NO_DEPS);
        if (c > 0)
            ids[nids++] = tacl__sched_recv(x->s, peer, hv_out(x, peer),
                                           (uint64_t)c * x->es,
                                           tag + HV_STEP_LOCAL,
                                           TACL__NO_DEPS);
    }
    /* Out-relay: the node's stage, packed once, to each node it serves. */
    total = hg_layout(x, x->node);
    for (int b = 0; b < x->g && total > 0; b++) {
        if (b == x->node || b % x->k != x->loc)
            continue;
        if (stage < 0) {
            int32_t packs[TACL__MAX_DEPS];
            int np = 0;

            nids = tacl__sched_fold(x->s, ids, nids);
            stage = tacl__sched_scratch(x->s, total * x->es,
                                        x->args->memtype);
            for (int l = 0; l < x->k; l++) {
                int from = tacl__hier_rank(&x->h, x->node, l);
                size_t c = hg_count(x, x->node, l);

                if (c > 0)
                    packs[np++] = tacl__sched_copy(
                        x->s, tacl__bref(stage, x->off[l] * x->es),
                        hv_out(x, from), (uint64_t)c * x->es, ids, nids);
                if (np == TACL__MAX_DEPS)
                    np = tacl__sched_fold(x->s, packs, np);
            }
            memcpy(ids, packs, (size_t)np * sizeof(*ids));
            nids = np;
        }
        tacl__sched_send(x->s, tacl__hier_rank(&x->h, b, x->node % x->k),
                         tacl__bref(stage, 0), total * x->es,
                         tag + HV_STEP_CROSS, ids, nids);
    }
    /* Other nodes' stages: from the other node (in-relay, which
     * forwards them) or from this node's in-relay. */
    for (int a = 0; a < x->g; a++) {
        uint64_t size = a == x->node ? 0 : hg_layout(x, a);
        int32_t in, got;

        if (size == 0)
            continue;
        in = tacl__sched_scratch(x->s, size * x->es, x->args->memtype);
        if (a % x->k == x->loc) {
            got = tacl__sched_recv(
                x->s, tacl__hier_rank(&x->h, a, x->node % x->k),
                tacl__bref(in, 0), size * x->es, tag + HV_STEP_CROSS,
                TACL__NO_DEPS);
            for (int m = 0; m < x->k; m++)
                if (m != x->loc)
                    tacl__sched_send(
                        x->s, tacl__hier_rank(&x->h, x->node, m),
                        tacl__bref(in, 0), size * x->es,
                        tag + HV_STEP_FORWARD(a), TACL__DEPS(got));
        } else {
            got = tacl__sched_recv(
                x->s, tacl__hier_rank(&x->h, x->node, a % x->k),
                tacl__bref(in, 0), size * x->es, tag + HV_STEP_FORWARD(a),
                TACL__NO_DEPS);
        }
        hg_unpack(x, a, in, got);
    }
    return tacl__sched_status(x->s);
}

/*
 * Relays that share one NIC port: the relays are local indices 0 to
 * relays - 1, and a port serves tacl__cost_port_ranks consecutive ones;
 * ranks that relay nothing leave the port to those that do.
 */
static int hv_port_relays(const tacl__topo_view_t *view, int k, int relays)
{
    return TACL_MIN(relays, tacl__cost_port_ranks(view, k));
}

/*
 * Flows crossing one of the relays' NIC ports at once: the node's
 * n_nodes - 1 messages out, over the ports its relays use; what
 * tacl__cost_contention charges.
 */
static double hv_port_flows(const tacl__topo_view_t *view, int g, int k,
                            int relays)
{
    int on_port = hv_port_relays(view, k, relays);

    return (double)(g - 1) / ((relays + on_port - 1) / on_port);
}

/*
 * The all-gather-v's modelled time, from its mean block (count, which
 * every rank shares): the node's blocks among its ranks, each node's
 * stage across to the other nodes through the relays, then the other
 * nodes' stages within the node.
 */
static double hg_cost(const tacl__coll_args_t *args,
                      const tacl__topo_view_t *view, double alpha,
                      double beta)
{
    int n = view->nranks, g = view->n_nodes, k = g > 0 ? n / g : 1;
    int relays = TACL_MAX(1, TACL_MIN(k, g - 1));
    double m = (double)args->count * (double)tacl_dtype_size(args->dtype);
    double an = tacl__link_alpha(view, TACL_LINK_NET, alpha);
    double ah = tacl__cost_intra_alpha(args, view);
    double bh = tacl__cost_intra_beta(args, view);
    double msg = tacl__cost_host_msg(view);
    double local = ah + (k - 2) * msg + (k - 1) * m * bh;
    double cross = ((g - 1 + relays - 1) / relays) * an +
                   (double)(g - 1) * k * m / relays *
                       hv_port_relays(view, k, relays) /
                       tacl__cost_port_bw(view, beta, k) *
                       tacl__cost_contention(
                           hv_port_flows(view, g, k, relays));
    double within = ah + (g - 2) * msg + (double)(n - k) * m * bh;

    return local + cross + within;
}

/*
 * Modelled time: the gather to the out-relays and the scatter from the
 * in-relays each move a rank's remote traffic over the node's links in
 * k - 1 messages or so, and between them the node's bytes for other
 * nodes leave through its relays, n_nodes - 1 messages spread over
 * min(k, n_nodes - 1) of them, on their NIC ports, a flow per other
 * node (cost.h's contention: a flat exchange has one per remote rank
 * and local rank on the port).  Priced
 * from every rank's counts, so every rank prices alike.
 */
static double hv_cost(const tacl__coll_args_t *args,
                      const tacl__topo_view_t *view, double alpha,
                      double beta)
{
    int n = view->nranks, g = view->n_nodes, k = g > 0 ? n / g : 1;
    int relays = TACL_MAX(1, TACL_MIN(k, g - 1));
    double es = (double)tacl_dtype_size(args->dtype), node_out = 0, mine = 0;
    double *out = calloc((size_t)g + 1, sizeof(*out));
    double an = tacl__link_alpha(view, TACL_LINK_NET, alpha);
    double ah = tacl__cost_intra_alpha(args, view);
    double bh = tacl__cost_intra_beta(args, view);
    double net, intra;

    if (out == NULL || !tacl__vpairs_known(args)) {
        free(out);
        return 1e30; /* unpriceable: never the cheapest */
    }
    for (int i = 0; i < n; i++) {
        double sent = 0, got = 0;

        for (int j = 0; j < n; j++) {
            if (view->node_of[i] == view->node_of[j])
                continue;
            sent += (double)tacl__vpair(args, n, i, j) * es;
            got += (double)tacl__vpair(args, n, j, i) * es;
        }
        out[view->node_of[i]] += sent;
        mine = TACL_MAX(mine, TACL_MAX(sent, got));
    }
    for (int a = 0; a < g; a++)
        node_out = TACL_MAX(node_out, out[a]);
    free(out);
    net = ((g - 1 + relays - 1) / relays) * an +
          node_out / relays * hv_port_relays(view, k, relays) /
              tacl__cost_port_bw(view, beta, k) *
              tacl__cost_contention(hv_port_flows(view, g, k, relays));
    intra = ah + (k - 1) * tacl__cost_host_msg(view) + mine * bh;
    return 2 * intra + net;
}

double tacl__hierv_cost(const tacl__coll_args_t *args,
                        const tacl__topo_view_t *view, double alpha,
                        double beta)
{
    return args->type == TACL_COLL_ALLGATHERV
               ? hg_cost(args, view, alpha, beta)
               : hv_cost(args, view, alpha, beta);
}

int tacl__hierv_supports(const tacl__coll_args_t *args,
                         const tacl__topo_view_t *view)
{
    return ((args->type == TACL_COLL_ALLTOALLV && tacl__vpairs_known(args)) ||
            args->type == TACL_COLL_ALLGATHERV) &&
           tacl__hier_layout_ok(view);
}

tacl_status_t tacl__hierv_build(tacl__sched_t *s,
                                const tacl__coll_args_t *args,
                                const tacl__topo_view_t *view)
{
    hv_t x = {.s = s, .args = args, .n = s->nranks,
              .es = tacl_dtype_size(args->dtype)};
    uint64_t send, recv, tag = tacl__algo_tag(args, 0);
    int32_t *ids = NULL;
    tacl_status_t status;

    if (!tacl__hierv_supports(args, view))
        return tacl__error(TACL_ERR_UNSUPPORTED, COLL,
                           "hier does not run %s on this layout without "
                           "every rank's counts", tacl_coll_name(args->type));
    if (tacl__coll_bytes(args, s->rank, x.n, UINT64_MAX, &send, &recv) != 0)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "%s: the buffers overflow",
                           tacl_coll_name(args->type));
    status = tacl__hier_init(&x.h, view);
    if (status != TACL_OK)
        return status;
    x.g = x.h.n_nodes;
    x.k = x.h.k;
    x.node = view->node;
    x.loc = x.h.local[s->rank];
    x.off = malloc(((size_t)x.k * (size_t)x.k + 1) * sizeof(*x.off));
    ids = malloc((size_t)x.k * (size_t)x.k * sizeof(*ids) + 1);
    if (x.off == NULL || ids == NULL) {
        status = tacl__error(TACL_ERR_NO_MEMORY, COLL,
                             "out of memory for a hierarchical all-to-all-v "
                             "of %d ranks", x.n);
        goto out;
    }
    status = tacl__algo_io(s, args, send, recv, &x.io);
    if (status != TACL_OK)
        goto out;
    if (args->type == TACL_COLL_ALLGATHERV) {
        status = hg_build(&x, tag, ids);
        goto out;
    }
    hv_local(&x, tag);
    for (int b = 0; b < x.g && status == TACL_OK; b++) {
        if (b == x.node)
            continue;
        if (b % x.k == x.loc)
            status = hv_relay_out(&x, b, tag, ids);
        else
            hv_to_relay(&x, b, tag);
    }
    for (int a = 0; a < x.g && status == TACL_OK; a++) {
        if (a == x.node)
            continue;
        if (a % x.k == x.loc)
            hv_relay_in(&x, a, tag);
        else
            hv_from_relay(&x, a, tag);
    }
    if (status == TACL_OK)
        status = tacl__sched_status(s);
out:
    free(ids);
    free(x.off);
    tacl__hier_fini(&x.h);
    return status;
}
