/*
 * The cost model's constants and the helpers the algorithms' cost()
 * functions share (cost.h).
 */
#include "cost.h"
#include "common.h"
#include "topo.h"

/*
 * Shared memory inside a node, a network between nodes.  The self and
 * GPU classes are not modelled: no cost() falls back to them.
 */
const tacl__cost_link_t tacl__cost_links[TACL_NUM_LINK_CLASSES] = {
    [TACL_LINK_SELF] = {0, 0},
    [TACL_LINK_HOST] = {2e-6, 1.0 / 10e9},
    [TACL_LINK_GPU] = {0, 0},
    [TACL_LINK_NET] = {10e-6, 1.0 / 1.25e9},
};

void tacl__cost_print(FILE *f)
{
    int c;

    fprintf(f, "# tacl cost model: a message of m bytes costs alpha + "
               "m / bw\n");
    fprintf(f, "%-6s %12s %12s\n", "link", "alpha_us", "bw_GBps");
    for (c = 0; c < TACL_NUM_LINK_CLASSES; c++) {
        const tacl__cost_link_t *l = &tacl__cost_links[c];
        const char *name = tacl__link_class_name((tacl_link_class_t)c);

        if (l->beta > 0)
            fprintf(f, "%-6s %12.3g %12.3g\n", name, l->alpha * 1e6,
                    1.0 / l->beta / 1e9);
        else
            fprintf(f, "%-6s %12s %12s\n", name, "-", "-");
    }
    fprintf(f, "reduction gamma %.3g GB/s, spread penalty %.3g\n",
            1.0 / TACL__COST_GAMMA_HOST / 1e9, TACL__COST_SPREAD_PENALTY);
    fprintf(f, "host: each further message of a step adds %.3g alpha\n",
            TACL__COST_MSG_SHARE);
    fprintf(f, "net: one flow at min(net bw, its NIC port's bw / the "
               "port's flows); inside a node the gpu class for device "
               "buffers\n");
    fprintf(f,
            "net: each further flow crossing a port at once adds %.3g "
            "of the port's time (flat exchanges across nodes)\n",
            TACL__COST_FLOW_SHARE);
}

/* NICs of view's node and the bytes per second of one. */
static int view_nics(const tacl__topo_view_t *view, double beta,
                     double *nic_bw)
{
    if (view->nics > 0 && view->nic_bw > 0) {
        *nic_bw = view->nic_bw * 1e9;
        return view->nics;
    }
    *nic_bw = 1.0 / tacl__link_beta(view, TACL_LINK_NET, beta);
    return 1;
}

double tacl__cost_port_bw(const tacl__topo_view_t *view, double beta, int g)
{
    double nic;
    int k = view_nics(view, beta, &nic);

    return k >= g ? nic * k / TACL_MAX(g, 1) : nic;
}

int tacl__cost_port_ranks(const tacl__topo_view_t *view, int g)
{
    double nic;
    int k = view_nics(view, 1, &nic);

    return k >= g ? 1 : (g + k - 1) / k;
}

double tacl__cost_flow_bw(const tacl__topo_view_t *view, double beta, int g,
                          int flows)
{
    double flow = 1.0 / tacl__link_beta(view, TACL_LINK_NET, beta);

    return TACL_MIN(flow, tacl__cost_port_bw(view, beta, g) /
                              TACL_MAX(flows, 1));
}

double tacl__cost_contention(double flows)
{
    return 1 + TACL__COST_FLOW_SHARE * TACL_MAX(flows - 1, 0);
}

/* Ranks of node m among the first n. */
static int node_ranks(const tacl__topo_view_t *view, int n, int m)
{
    int r, g = 0;

    for (r = 0; r < n; r++)
        g += view->node_of[r] == m;
    return g;
}

/*
 * One step in which each rank r < n sends bytes to peer(r, n, d): its
 * slowest flow's transfer time, and in *alpha_p the latency of its
 * slowest link class (0, 0 when no rank sends).
 */
static double step_scan(const tacl__coll_args_t *args,
                        const tacl__topo_view_t *view, int n,
                        int (*peer)(int r, int n, int d), int d,
                        double bytes, double alpha, double beta,
                        double *alpha_p)
{
    double rate = 0, x = 0, nic;
    int k = view_nics(view, beta, &nic), intra = 0, r, m;

    if (view->node_of == NULL)
        rate = tacl__cost_flow_bw(view, beta, 1, 1);
    for (m = 0; view->node_of != NULL && m < view->n_nodes; m++) {
        int g = node_ranks(view, n, m), l = 0, port = -1, on_port = 0;

        /* Local ranks in rank order, so a port's ranks are consecutive. */
        for (r = 0; r < n; r++) {
            int q = peer(r, n, d), pt;
            double bw;

            if (view->node_of[r] != m)
                continue;
            pt = k >= g ? l : (int)((long)l * k / g);
            l++;
            if (pt != port) {
                port = pt;
                on_port = 0;
            }
            if (q < 0 || q >= n)
                continue;
            if (view->node_of[q] == m) {
                intra = 1;
                continue;
            }
            bw = tacl__cost_flow_bw(view, beta, g, ++on_port);
            rate = rate > 0 ? TACL_MIN(rate, bw) : bw;
        }
    }
    *alpha_p = 0;
    if (rate > 0) {
        x = bytes / rate;
        *alpha_p = tacl__link_alpha(view, TACL_LINK_NET, alpha);
    }
    if (intra) {
        x = TACL_MAX(x, bytes * tacl__cost_intra_beta(args, view));
        *alpha_p = TACL_MAX(*alpha_p, tacl__cost_intra_alpha(args, view));
    }
    return x;
}

double tacl__cost_step_time(const tacl__coll_args_t *args,
                            const tacl__topo_view_t *view, int n,
                            int (*peer)(int r, int n, int d), int d,
                            double bytes, double alpha, double beta)
{
    double a, x = step_scan(args, view, n, peer, d, bytes, alpha, beta, &a);

    return a + x;
}

double tacl__cost_step_xfer(const tacl__coll_args_t *args,
                            const tacl__topo_view_t *view, int n,
                            int (*peer)(int r, int n, int d), int d,
                            double bytes, double beta)
{
    double a;

    return step_scan(args, view, n, peer, d, bytes, 0, beta, &a);
}

double tacl__cost_path_alpha(const tacl__coll_args_t *args,
                             const tacl__topo_view_t *view, int n,
                             int (*peer)(int r, int n, int d), int d,
                             double alpha)
{
    double sum = 0;
    int r, q;

    for (r = 0; r < n; r++) {
        q = peer(r, n, d);
        if (q < 0 || q >= n)
            continue;
        sum += view->node_of != NULL && view->node_of[q] == view->node_of[r]
                   ? tacl__cost_intra_alpha(args, view)
                   : tacl__link_alpha(view, TACL_LINK_NET, alpha);
    }
    return n > 0 ? sum * (n - 1) / n : 0;
}
