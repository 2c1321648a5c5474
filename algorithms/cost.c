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
}

int tacl__cost_ring_share(const tacl__topo_view_t *view)
{
    int p = view->nranks, r, m, best = 1;

    if (view->node_of == NULL || view->n_nodes < 2)
        return 1;
    for (m = 0; m < view->n_nodes; m++) {
        int out = 0;

        for (r = 0; r < p; r++)
            out += view->node_of[r] == m &&
                   view->node_of[tacl__ring_next(r, p)] != m;
        best = TACL_MAX(best, out);
    }
    return best;
}

double tacl__cost_step_time(const tacl__topo_view_t *view, int n,
                            int (*peer)(int r, int n, int d), int d,
                            double bytes, double alpha, double beta)
{
    int r, m, share = 0;

    for (m = 0; view->node_of != NULL && m < view->n_nodes; m++) {
        int out = 0;

        for (r = 0; r < n; r++) {
            int q = peer(r, n, d);

            out += q >= 0 && q < n && view->node_of[r] == m &&
                   view->node_of[q] != m;
        }
        share = TACL_MAX(share, out);
    }
    if (view->node_of == NULL)
        share = 1;
    if (share == 0)
        return tacl__cost_host_alpha(view) +
               bytes * tacl__cost_host_beta(view);
    return tacl__link_alpha(view, TACL_LINK_NET, alpha) +
           share * bytes * tacl__link_beta(view, TACL_LINK_NET, beta);
}
