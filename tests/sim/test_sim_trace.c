/*
 * The simulator's step timeline (tacl__sim_cluster_t.trace, what
 * tacl-sim --trace writes) against the closed form of a ring.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "sim.h"
#include "spec.h"

/* Every rank on its own node: each ring edge is a network link. */
static const char uniform[] =
    "tacl-topology 1\n"
    "link host bw=20 lat=1\n"
    "link net bw=4 lat=5\n"
    "node a cores=4 nics=1 nic_gbps=32\n"
    "fabric overhead=6\n";

static void assert_close(double got, double want, double rel,
                         const char *what)
{
    cr_assert(fabs(got - want) <= rel * want, "%s: %.12g, expected %.12g",
              what, got, want);
}

/*
 * The step timeline (cluster trace, tacl-sim --trace): on the uniform
 * one-rank-per-node ring all-gather in one chunk, rank r's k-th receive
 * ends at k (alpha + m / bw), each message starts alpha after both its
 * sides are runnable, every line keeps ready <= start <= done, the last
 * end is the predicted time, and the op number counts up per simulation.
 */
Test(sim_trace, ring_step_timeline)
{
    const double alpha_us = 5 + 6, step_us = alpha_us + 65536 * 4.0 / 4e3;
    const int p = 4;
    tacl__topo_t t;
    tacl__sim_cluster_t c;
    tacl__coll_args_t a;
    tacl__sim_result_t r;
    uint64_t ops = 0, lines = 0, nrecv[4] = {0};
    double last = 0;
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);

    cr_assert_not_null(f);
    memset(&a, 0, sizeof(a));
    a.type = TACL_COLL_ALLGATHER;
    a.count = 65536;
    a.dtype = TACL_FLOAT32;
    a.memtype = TACL_MEM_HOST;
    a.chunk_bytes = 1u << 30;
    cr_assert_eq(tacl__topo_parse(uniform, "test", &t), TACL_OK, "%s",
                 tacl__last_error());
    cr_assert_eq(tacl__sim_cluster_replicate(&c, &t, p, 1), TACL_OK);
    c.trace = f;
    c.trace_ops = &ops;
    for (int i = 0; i < 2; i++)
        cr_assert_eq(tacl__sim_run(&c, &a, spec_force("allgather=ring"), 0, &r), TACL_OK,
                     "%s", tacl__last_error());
    cr_assert_eq(ops, 2);
    cr_assert_eq(fclose(f), 0);
    for (char *l = text, *end; l != NULL && *l != '\0'; l = end) {
        unsigned long long op, step, bytes;
        int rank, peer;
        char kind[16];
        double ready, start, done;

        end = strchr(l, '\n');
        if (end != NULL)
            *end++ = '\0';
        cr_assert_eq(sscanf(l, "%llu %d %llu %15s %d %llu %lf %lf %lf", &op,
                            &rank, &step, kind, &peer, &bytes, &ready,
                            &start, &done), 9, "bad line: %s", l);
        cr_assert(op < 2 && rank >= 0 && rank < p, "%s", l);
        cr_assert(ready <= start && start <= done, "%s", l);
        lines++;
        if (op != 0)
            continue;
        last = fmax(last, done);
        if (strcmp(kind, "recv") == 0) {
            nrecv[rank]++;
            assert_close(done, (double)nrecv[rank] * step_us, 1e-9, l);
            cr_assert_eq(peer, (rank + p - 1) % p, "%s", l);
            cr_assert_eq(bytes, 65536 * 4, "%s", l);
        } else if (strcmp(kind, "send") == 0) {
            assert_close(start - ready, alpha_us, 1e-9, l);
        }
    }
    cr_assert_eq(lines, 2 * r.steps);
    for (int k = 0; k < p; k++)
        cr_assert_eq(nrecv[k], (uint64_t)(p - 1), "rank %d", k);
    assert_close(last, r.seconds * 1e6, 1e-12, "last end");
    free(text);
    tacl__sim_cluster_fini(&c);
    tacl__topo_fini(&t);
}
