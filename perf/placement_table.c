/*
 * The snapshot placement tables: for each N, m and k, the exact share of
 * the C(N, k) sets of k lost units (nodes in the node failure domain)
 * after which every unit still has a copy, with group (when m divides N),
 * ring and mixed (the thesis' Algorithm 6.1) placement, beside the bound:
 * Theorem 6.1's best for any placement at k = m, Corollary 6.1's for
 * group placement beyond.
 * Usage: placement_table [max_n [max_m]] (defaults 16 and 3).
 */
#include <stdio.h>
#include <stdlib.h>

#include "placement.h"

/* Recovery in percent, or -1 where the placement does not exist. */
static double percent(int n, int m, tacl__place_kind_t kind, int k)
{
    tacl__placement_t p;
    uint64_t ok, total;
    double r = -1;

    if (tacl__place_build(n, m, kind, &p) != TACL_OK)
        return -1;
    if (tacl__place_recovery(&p, k, &ok, &total) == TACL_OK)
        r = 100.0 * (double)ok / (double)total;
    tacl__place_free(&p);
    return r;
}

static void cell(double v)
{
    if (v < 0)
        printf(" %8s", "-");
    else
        printf(" %7.1f%%", v);
}

int main(int argc, char **argv)
{
    int max_n = argc > 1 ? atoi(argv[1]) : 16;
    int max_m = argc > 2 ? atoi(argv[2]) : 3;

    if (max_n < 1 || max_n > 24 || max_m < 1) {
        fprintf(stderr, "usage: %s [max_n (1-24) [max_m]]\n", argv[0]);
        return 2;
    }
    printf("%4s %3s %3s %9s %9s %9s %9s\n", "N", "m", "k", "group", "ring",
           "mixed", "bound");
    for (int m = 2; m <= max_m; m++)
        for (int n = m; n <= max_n; n++)
            for (int k = m; k <= 2 * m && k <= n; k++) {
                printf("%4d %3d %3d", n, m, k);
                cell(n % m == 0 ? percent(n, m, TACL__PLACE_GROUP, k) : -1);
                cell(percent(n, m, TACL__PLACE_RING, k));
                cell(percent(n, m, TACL__PLACE_MIXED, k));
                cell(100.0 * (k == m ? tacl__place_upper_bound(n, m)
                                     : tacl__place_corollary(n, m, k)));
                printf("\n");
            }
    return 0;
}
