/*
 * The emulation host of the simulator: `fabric ... host_bw=R` says the
 * nodes are emulated on one machine whose cores carry at most R GB/s
 * across the emulated network, all messages together.  Every network
 * message then also crosses one shared host link of R GB/s.
 *
 * Closed forms: a ring all-gather on p nodes of one rank keeps p network
 * messages moving at once; with R below p times the uplink rate each gets
 * R / p and the ring takes (p - 1) (alpha + m p / R), and with R above it
 * nothing changes.  The shipped emulated-1gbit topology: its 2x2 layout
 * (at most 4 messages of half an uplink each) is predicted as without the
 * host, its 4x2 flat ring is slowed by 4 uplinks' rate over host_bw where
 * that is above 1 (the calibrated host_bw has been on either side of it).
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "sim.h"
#include "spec.h"

static void topo_text(tacl__topo_t *t, const char *text)
{
    cr_assert_eq(tacl__topo_parse(text, "test", t), TACL_OK, "%s",
                 tacl__last_error());
}

static void assert_close(double got, double want, double rel,
                         const char *what)
{
    cr_assert(fabs(got - want) <= rel * want, "%s: %.12g, expected %.12g",
              what, got, want);
}

static tacl__sim_result_t ring_ag(const tacl__topo_t *t, int nodes, int rpn,
                                  size_t count)
{
    tacl__sim_cluster_t c;
    tacl__sim_result_t r;
    const tacl__coll_args_t a = {.type = TACL_COLL_ALLGATHER,
                                 .count = count,
                                 .dtype = TACL_FLOAT32,
                                 .op = TACL_SUM,
                                 .memtype = TACL_MEM_HOST,
                                 .chunk_bytes = 1u << 20};

    cr_assert_eq(tacl__sim_cluster_replicate(&c, t, nodes, rpn), TACL_OK);
    cr_assert_eq(tacl__sim_run(&c, &a, spec_force("allgather=ring"), 0, &r), TACL_OK, "%s",
                 tacl__last_error());
    tacl__sim_cluster_fini(&c);
    return r;
}

#define UNIFORM                                                              \
    "tacl-topology 1\n"                                                      \
    "link self bw=1000 lat=0\n"                                              \
    "link host bw=10 lat=1\n"                                                \
    "link net bw=2 lat=7\n"                                                  \
    "node a cores=8 gpus=0 nics=1 nic_gbps=16\n"

Test(sim_host, shared_host_closed_forms)
{
    tacl__topo_t real, emu;
    const double alpha = (7 + 3) * 1e-6, m = 65536 * 4.0;

    topo_text(&real, UNIFORM "fabric oversub=1 overhead=3\n");
    topo_text(&emu, UNIFORM "fabric oversub=1 overhead=3 host_bw=4\n");
    for (int p = 2; p <= 8; p++) {
        /* One chunk per block: each ring step is one message a rank. */
        tacl__sim_result_t r0 = ring_ag(&real, p, 1, 65536);
        tacl__sim_result_t r1 = ring_ag(&emu, p, 1, 65536);
        double rate = p * 2e9 <= 4e9 ? 2e9 : 4e9 / p;
        char what[64];

        snprintf(what, sizeof(what), "ring on %d emulated nodes", p);
        assert_close(r0.seconds, (p - 1) * (alpha + m / 2e9), 1e-9,
                     "ring on real nodes");
        assert_close(r1.seconds, (p - 1) * (alpha + m / rate), 1e-9, what);
        /* The host slows messages, it moves no byte more. */
        cr_assert_eq(r1.bytes[TACL_LINK_NET], r0.bytes[TACL_LINK_NET]);
        cr_assert_eq(r1.msgs[TACL_LINK_NET], r0.msgs[TACL_LINK_NET]);
        if (p > 2)
            cr_assert(r1.seconds > r0.seconds * 1.2, "%s: %g not above %g",
                      what, r1.seconds, r0.seconds);
    }
    /* Inside one node nothing crosses the emulated network. */
    assert_close(ring_ag(&emu, 1, 4, 65536).seconds,
                 ring_ag(&real, 1, 4, 65536).seconds, 1e-12,
                 "one node");
    tacl__topo_fini(&emu);
    tacl__topo_fini(&real);
}

/* The shipped file's text with its host_bw key cut out. */
static char *without_host_bw(const char *text)
{
    char *copy = strdup(text), *at;

    cr_assert_not_null(copy);
    at = strstr(copy, " host_bw=");
    cr_assert_not_null(at, "the emulated topology has no host_bw");
    memmove(at, at + strcspn(at + 1, " \n") + 1,
            strlen(at + strcspn(at + 1, " \n") + 1) + 1);
    return copy;
}

static char *read_all(const char *path)
{
    FILE *f = fopen(path, "r");
    char *text;
    long n;

    cr_assert_not_null(f, "%s", path);
    cr_assert_eq(fseek(f, 0, SEEK_END), 0);
    n = ftell(f);
    cr_assert(n > 0);
    rewind(f);
    text = calloc((size_t)n + 1, 1);
    cr_assert_not_null(text);
    cr_assert_eq(fread(text, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    return text;
}

Test(sim_host, emulated_cluster_topology)
{
    char *text = read_all(TOPO_DIR "/emulated-1gbit.topo");
    char *plain = without_host_bw(text);
    tacl__topo_t emu, real;
    /* 256 MB all-gathered over 8 ranks: 32 MB a rank. */
    const size_t count = (256u << 20) / 4 / 8;
    double uplinks;

    topo_text(&emu, text);
    topo_text(&real, plain);
    cr_assert(emu.host_bw > 0 && real.host_bw == 0, "%g %g", emu.host_bw,
              real.host_bw);
    uplinks = 4 * real.link[TACL_LINK_NET].bw;
    /* 2x2: four uplinks' worth is above the host's; the ring's two
     * network messages at a time and the rails are not slowed. */
    assert_close(ring_ag(&emu, 2, 2, count).seconds,
                 ring_ag(&real, 2, 2, count).seconds, 1e-12,
                 "2x2 ring");
    /* 4x2: the flat ring's four network hops share the host. */
    assert_close(ring_ag(&emu, 4, 2, count).seconds,
                 ring_ag(&real, 4, 2, count).seconds *
                     fmax(1.0, uplinks / emu.host_bw),
                 0.01, "4x2 ring against uplinks / host_bw");
    tacl__topo_fini(&real);
    tacl__topo_fini(&emu);
    free(plain);
    free(text);
}
