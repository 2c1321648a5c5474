/*
 * Tests of the topology file parser and of the TACL_LINK_<CLASS>
 * overrides: values that are not finite, or not positive where a
 * bandwidth is needed, are refused; a name too long to store is refused
 * rather than cut; and what tacl__topo_write writes loads back the same.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "topo.h"

#define HEADER "tacl-topology 1\n"

static tacl_status_t parse(const char *text, tacl__topo_t *topo)
{
    memset(topo, 0, sizeof(*topo));
    return tacl__topo_parse(text, "test.topo", topo);
}

static void expect_refused(const char *text)
{
    tacl__topo_t topo;
    tacl_status_t st = parse(text, &topo);

    cr_expect_eq(st, TACL_ERR_INVALID_ARG, "accepted:\n%s(status %d)", text,
                 st);
    if (st == TACL_OK)
        tacl__topo_fini(&topo);
}

Test(topo_file, refuses_non_finite_link_values)
{
    expect_refused(HEADER "link host bw=nan lat=1\n");
    expect_refused(HEADER "link host bw=inf lat=1\n");
    expect_refused(HEADER "link host bw=-inf lat=1\n");
    expect_refused(HEADER "link host bw=10 lat=nan\n");
    expect_refused(HEADER "link host bw=10 lat=inf\n");
    expect_refused(HEADER "link net bw=1e999 lat=1\n");
    expect_refused(HEADER "node a nic_gbps=nan\n");
    expect_refused(HEADER "node a nic_gbps=infinity\n");
}

Test(topo_file, refuses_non_positive_bandwidth)
{
    expect_refused(HEADER "link host bw=0 lat=1\n");
    expect_refused(HEADER "link host bw=-1 lat=1\n");
    expect_refused(HEADER "link host lat=1\n");
    expect_refused(HEADER "link host bw=10 lat=-1\n");
}

Test(topo_file, accepts_zero_latency)
{
    tacl__topo_t topo;

    cr_assert_eq(parse(HEADER "link host bw=10 lat=0\n", &topo), TACL_OK);
    cr_expect_eq(topo.link[TACL_LINK_HOST].bw, 10.0);
    cr_expect_eq(topo.link[TACL_LINK_HOST].lat, 0.0);
    tacl__topo_fini(&topo);
}

/* A name of n characters, 'x' then digits of tag. */
static void make_name(char *buf, size_t n, char tag)
{
    memset(buf, 'x', n);
    buf[n - 1] = tag;
    buf[n] = '\0';
}

Test(topo_file, refuses_names_too_long_to_store)
{
    char name[TACL__TOPO_NAME_LEN + 8], text[512];

    make_name(name, TACL__TOPO_NAME_LEN, 'a');
    snprintf(text, sizeof(text), HEADER "node %s\n", name);
    expect_refused(text);
    snprintf(text, sizeof(text), HEADER "machine %s\n", name);
    expect_refused(text);
}

Test(topo_file, longest_names_round_trip)
{
    char a[TACL__TOPO_NAME_LEN], b[TACL__TOPO_NAME_LEN], text[512];
    tacl__topo_t topo, again;
    char *out = NULL;
    size_t len = 0;
    FILE *f;

    make_name(a, TACL__TOPO_NAME_LEN - 1, 'a');
    make_name(b, TACL__TOPO_NAME_LEN - 1, 'b');
    snprintf(text, sizeof(text), HEADER "machine %s\nlink host bw=12.5 "
             "lat=0.5\nnode %s cores=4\nnode %s cores=8\nranks %s 0-1\n"
             "ranks %s 2\n", a, a, b, a, b);
    cr_assert_eq(parse(text, &topo), TACL_OK);
    cr_assert_eq(topo.n_nodes, 2);

    f = open_memstream(&out, &len);
    cr_assert_not_null(f);
    cr_assert_eq(tacl__topo_write(&topo, f), TACL_OK);
    fclose(f);
    cr_assert_eq(parse(out, &again), TACL_OK, "the dump did not load:\n%s",
                 out);
    cr_expect_str_eq(again.machine, a);
    cr_expect_eq(again.n_nodes, 2);
    cr_expect_str_eq(again.nodes[0].name, a);
    cr_expect_str_eq(again.nodes[1].name, b);
    cr_expect_eq(again.nodes[1].cores, 8);
    cr_expect_eq(again.nranks, 3);
    cr_expect_eq(again.node_of[2], 1);
    cr_expect_eq(again.link[TACL_LINK_HOST].bw, 12.5);
    free(out);
    tacl__topo_fini(&topo);
    tacl__topo_fini(&again);
}

/* Set TACL_LINK_HOST, then fill a topology's links from it. */
static tacl_status_t override_host(const char *value)
{
    tacl__topo_t topo;
    tacl_status_t st;

    memset(&topo, 0, sizeof(topo));
    setenv("TACL_LINK_HOST", value, 1);
    tacl__config_reload();
    st = tacl__topo_set_links(&topo);
    unsetenv("TACL_LINK_HOST");
    tacl__config_reload();
    return st;
}

Test(topo_file, link_override_refuses_bad_values)
{
    static const char *const bad[] = {
        "bw=nan", "bw=inf", "bw=0", "bw=-2", "lat=nan", "lat=inf",
        "lat=-1", "bw=10x", "bw=", "speed=3",
    };

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        cr_expect_eq(override_host(bad[i]), TACL_ERR_INVALID_ARG,
                     "TACL_LINK_HOST=%s was accepted", bad[i]);
    cr_expect_eq(override_host("bw=5,lat=0"), TACL_OK);
}

/* The simulator's optional lines: parsed, checked, written back. */
Test(topo_file, fabric_and_kernel_lines)
{
    tacl__topo_t topo, again;
    char *text = NULL;
    size_t len = 0;
    FILE *f;

    cr_assert_eq(parse(HEADER "link host bw=10 lat=1\n"
                       "fabric oversub=2.5 overhead=1.5 host_bw=0.5\n"
                       "kernel copy=300 reduce=150\n", &topo), TACL_OK);
    cr_expect(topo.has_fabric && topo.has_kernel);
    cr_expect_eq(topo.fabric_oversub, 2.5);
    cr_expect_eq(topo.msg_overhead, 1.5);
    cr_expect_eq(topo.host_bw, 0.5);
    cr_expect_eq(topo.kernel_bw[TACL__TOPO_KERNEL_COPY], 300);
    cr_expect_eq(topo.kernel_bw[TACL__TOPO_KERNEL_REDUCE], 150);
    cr_expect_eq(topo.kernel_bw[TACL__TOPO_KERNEL_QUANT], 0);
    f = open_memstream(&text, &len);
    cr_assert_not_null(f);
    cr_assert_eq(tacl__topo_write(&topo, f), TACL_OK);
    fclose(f);
    cr_assert_eq(parse(text, &again), TACL_OK, "%s", text);
    cr_expect_eq(again.fabric_oversub, 2.5);
    cr_expect_eq(again.host_bw, 0.5);
    cr_expect_eq(again.kernel_bw[TACL__TOPO_KERNEL_REDUCE], 150);
    tacl__topo_fini(&again);
    tacl__topo_fini(&topo);
    free(text);
    /* A file without them writes none: old readers still load it. */
    cr_assert_eq(parse(HEADER "link host bw=10 lat=1\n", &topo), TACL_OK);
    f = open_memstream(&text, &len);
    cr_assert_eq(tacl__topo_write(&topo, f), TACL_OK);
    fclose(f);
    cr_expect(strstr(text, "fabric") == NULL && strstr(text, "kernel") ==
              NULL, "%s", text);
    tacl__topo_fini(&topo);
    free(text);
    expect_refused(HEADER "fabric oversub=0.5\n");
    expect_refused(HEADER "fabric oversub=nan\n");
    expect_refused(HEADER "fabric speed=2\n");
    expect_refused(HEADER "fabric host_bw=0\n");
    expect_refused(HEADER "fabric host_bw=-0.5\n");
    expect_refused(HEADER "fabric host_bw=inf\n");
    expect_refused(HEADER "kernel gemm=100\n");
    expect_refused(HEADER "kernel copy=-1\n");
    expect_refused(HEADER "kernel copy\n");
}

/*
 * gpu_link: how a node's GPUs are joined, which the detector fills from
 * NVML; it round-trips through a file, a wrong value is refused, and the
 * gpu class's default bandwidth follows it: PCIe's when every node that
 * says is PCIe-only, NVLink's when one says NVLink or none says.
 */
Test(topo_file, gpu_link_round_trip_and_default)
{
    static const struct {
        const char *nodes;
        double gpu_bw;
    } cases[] = {
        {"node a gpus=2 gpu_peer=1\n", 200.0},
        {"node a gpus=2 gpu_peer=1 gpu_link=pcie\n", 24.0},
        {"node a gpus=2 gpu_link=pcie\nnode b gpus=2\n", 24.0},
        {"node a gpus=8 gpu_peer=1 gpu_link=nvlink\n", 200.0},
        {"node a gpus=2 gpu_link=pcie\nnode b gpus=8 gpu_link=nvlink\n",
         200.0},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char text[256], *out = NULL;
        tacl__topo_t topo, again;
        size_t len = 0;
        FILE *f;

        snprintf(text, sizeof(text), HEADER "%s", cases[i].nodes);
        cr_assert_eq(parse(text, &topo), TACL_OK, "%s", text);
        cr_assert_eq(tacl__topo_set_links(&topo), TACL_OK);
        cr_expect_eq(topo.link[TACL_LINK_GPU].bw, cases[i].gpu_bw, "%s",
                     text);
        f = open_memstream(&out, &len);
        cr_assert_not_null(f);
        cr_assert_eq(tacl__topo_write(&topo, f), TACL_OK);
        fclose(f);
        cr_assert_eq(parse(out, &again), TACL_OK, "%s", out);
        for (int n = 0; n < topo.n_nodes; n++)
            cr_expect_eq(again.nodes[n].gpu_link, topo.nodes[n].gpu_link,
                         "%s", out);
        free(out);
        tacl__topo_fini(&topo);
        tacl__topo_fini(&again);
    }
    expect_refused(HEADER "node a gpus=2 gpu_link=infiniband\n");
}
