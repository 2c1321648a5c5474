/*
 * Local topology discovery with hwloc: packages, NUMA nodes, cores and
 * hardware threads, NVIDIA GPUs and network adapters on the PCI bus.  Link
 * defaults follow from what was found and can be overridden per class
 * with TACL_LINK_<CLASS>="bw=<GB/s>,lat=<us>".
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <hwloc.h>
#include <float.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "common.h"
#include "config.h"
#include "log.h"
#include "parse.h"
#include "tacl_build_config.h"
#include "topo.h"

#define PCI_VENDOR_NVIDIA 0x10de
#define PCI_CLASS_DISPLAY 0x03
#define PCI_CLASS_NETWORK 0x02

static int count_type(hwloc_topology_t t, hwloc_obj_type_t type)
{
    int n = hwloc_get_nbobjs_by_type(t, type);
    return n > 0 ? n : 0;
}

static void count_pci(hwloc_topology_t t, tacl__node_desc_t *node)
{
    for (hwloc_obj_t obj = hwloc_get_next_pcidev(t, NULL); obj != NULL;
         obj = hwloc_get_next_pcidev(t, obj)) {
        unsigned cls = obj->attr->pcidev.class_id >> 8;

        if (cls == PCI_CLASS_DISPLAY &&
            obj->attr->pcidev.vendor_id == PCI_VENDOR_NVIDIA)
            node->gpus++;
        else if (cls == PCI_CLASS_NETWORK) {
            double gbps = obj->attr->pcidev.linkspeed * 8; /* GB/s->Gb/s */
            node->nics++;
            if (gbps > node->nic_gbps)
                node->nic_gbps = gbps;
        }
    }
}

/*
 * An interface's line rate in Gbit/s as the kernel reports it (sysfs
 * speed, in Mbit/s), 0 when it reports none (down, or a virtual device).
 */
static double sysfs_nic_gbps(const char *name)
{
    char path[64 + IF_NAMESIZE];
    FILE *f;
    long mbps = 0;

    snprintf(path, sizeof(path), "/sys/class/net/%s/speed", name);
    f = fopen(path, "r");
    if (f == NULL)
        return 0;
    if (fscanf(f, "%ld", &mbps) != 1 || mbps < 0)
        mbps = 0;
    fclose(f);
    return mbps / 1000.0;
}

/* One entry of TACL_NICS, NAME or NAME@<Gbit/s>, into the node. */
static tacl_status_t add_named_nic(char *entry, tacl__node_desc_t *node)
{
    char *at = strchr(entry, '@');
    double gbps;

    if (at != NULL)
        *at = '\0';
    if (entry[0] == '\0' || if_nametoindex(entry) == 0)
        return tacl__error(TACL_ERR_INVALID_ARG, TOPO,
                           "TACL_NICS: '%s' is no network interface of this "
                           "node (ip link lists them)", entry);
    if (at == NULL)
        gbps = sysfs_nic_gbps(entry);
    else if (tacl__parse_double(at + 1, DBL_MIN, DBL_MAX, &gbps) !=
             TACL_PARSE_OK)
        return tacl__error(TACL_ERR_INVALID_ARG, TOPO,
                           "TACL_NICS: '%s@%s': the speed after '@' must "
                           "be a positive Gbit/s figure", entry, at + 1);
    node->nics++;
    if (gbps > node->nic_gbps)
        node->nic_gbps = gbps;
    return TACL_OK;
}

/*
 * TACL_NICS names the rails where hwloc cannot see them: emulated nodes'
 * veth uplinks are on no PCI bus, and a host may hold adapters its ranks
 * must not use.  Set, the list replaces what count_pci found.
 */
static tacl_status_t named_nics(tacl__node_desc_t *node)
{
    const char *list = tacl__config_str(TACL_CFG_NICS);
    char buf[512], *tok, *save = NULL;
    tacl_status_t st = TACL_OK;

    if (list[0] == '\0')
        return TACL_OK;
    snprintf(buf, sizeof(buf), "%s", list);
    node->nics = 0;
    node->nic_gbps = 0;
    for (tok = strtok_r(buf, ",", &save); tok != NULL && st == TACL_OK;
         tok = strtok_r(NULL, ",", &save))
        st = add_named_nic(tok, node);
    if (st == TACL_OK && node->nics == 0)
        st = tacl__error(TACL_ERR_INVALID_ARG, TOPO,
                         "TACL_NICS is set but names no interface");
    return st;
}

/*
 * The size of one cache of the outermost level (one L3 of one package or
 * core complex on today's CPUs), 0 if hwloc reports no cache.
 */
static uint64_t last_level_cache(hwloc_topology_t t)
{
    static const hwloc_obj_type_t levels[] = {
        HWLOC_OBJ_L5CACHE, HWLOC_OBJ_L4CACHE, HWLOC_OBJ_L3CACHE,
        HWLOC_OBJ_L2CACHE, HWLOC_OBJ_L1CACHE};

    for (size_t i = 0; i < sizeof(levels) / sizeof(levels[0]); i++) {
        hwloc_obj_t obj = hwloc_get_obj_by_type(t, levels[i], 0);

        if (obj != NULL && obj->attr != NULL && obj->attr->cache.size > 0)
            return obj->attr->cache.size;
    }
    return 0;
}

/*
 * Peer access between the GPUs, asked of the CUDA runtime, opened at run
 * time so that nodes without it (or without a driver: every call fails
 * cleanly) simply report none.  Returns the device count CUDA sees.
 */
static int cuda_peer_access(int *all_peer_p)
{
#if TACL_HAVE_CUDA
    typedef int (*count_fn)(int *);
    typedef int (*peer_fn)(int *, int, int);
    void *h = dlopen("libcudart.so", RTLD_NOW | RTLD_LOCAL);
    count_fn get_count;
    peer_fn can_peer;
    int n = 0, all = 1;

    if (h == NULL)
        h = dlopen("libcudart.so.13", RTLD_NOW | RTLD_LOCAL);
    if (h == NULL)
        h = dlopen("libcudart.so.12", RTLD_NOW | RTLD_LOCAL);
    if (h == NULL)
        return 0;
    get_count = (count_fn)dlsym(h, "cudaGetDeviceCount");
    can_peer = (peer_fn)dlsym(h, "cudaDeviceCanAccessPeer");
    if (get_count == NULL || can_peer == NULL || get_count(&n) != 0)
        n = 0;
    for (int a = 0; a < n && all; a++)
        for (int b = 0; b < n && all; b++) {
            int ok = 0;
            if (a != b && (can_peer(&ok, a, b) != 0 || !ok))
                all = 0;
        }
    *all_peer_p = n > 1 && all;
    dlclose(h);
    return n;
#else
    *all_peer_p = 0;
    return 0;
#endif
}

/*
 * How the node's GPUs are joined, asked of NVML (opened at run time; a
 * node without it answers unknown): NVLink when every GPU has an active
 * NVLink, PCIe when NVML answers and some GPU has none.  Fewer than two
 * GPUs: unknown, as no link joins them.
 */
static int nvml_gpu_link(void)
{
#if TACL_HAVE_CUDA
    /* NVML's C API: an int result (0 success), opaque device handles. */
    typedef int (*init_fn)(void);
    typedef int (*count_fn)(unsigned *);
    typedef int (*handle_fn)(unsigned, void **);
    typedef int (*link_fn)(void *, unsigned, int *);
    enum { NVML_MAX_LINKS = 18 };   /* NVML_NVLINK_MAX_LINKS */
    void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    init_fn init, shutdown;
    count_fn count;
    handle_fn handle;
    link_fn state;
    unsigned n = 0, with_link = 0;
    int link = TACL__GPU_LINK_UNKNOWN;

    if (h == NULL)
        return link;
    init = (init_fn)dlsym(h, "nvmlInit_v2");
    shutdown = (init_fn)dlsym(h, "nvmlShutdown");
    count = (count_fn)dlsym(h, "nvmlDeviceGetCount_v2");
    handle = (handle_fn)dlsym(h, "nvmlDeviceGetHandleByIndex_v2");
    state = (link_fn)dlsym(h, "nvmlDeviceGetNvLinkState");
    if (init && shutdown && count && handle && state && init() == 0) {
        if (count(&n) == 0 && n >= 2) {
            for (unsigned d = 0; d < n; d++) {
                void *dev = NULL;
                int active = 0;

                if (handle(d, &dev) != 0)
                    continue;
                for (unsigned l = 0; l < NVML_MAX_LINKS && !active; l++)
                    if (state(dev, l, &active) != 0)
                        active = 0;
                with_link += active != 0;
            }
            link = with_link == n ? TACL__GPU_LINK_NVLINK
                                  : TACL__GPU_LINK_PCIE;
        }
        shutdown();
    }
    dlclose(h);
    return link;
#else
    return TACL__GPU_LINK_UNKNOWN;
#endif
}

tacl_status_t tacl__topo_detect_node(tacl__node_desc_t *node)
{
    hwloc_topology_t t;
    tacl_status_t st;

    memset(node, 0, sizeof(*node));
    gethostname(node->name, sizeof(node->name) - 1);
    if (hwloc_topology_init(&t) != 0)
        return tacl__error(TACL_ERR_SYSTEM, TOPO,
                           "hwloc_topology_init failed: %m");
    hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    if (hwloc_topology_load(t) != 0) {
        hwloc_topology_destroy(t);
        return tacl__error(TACL_ERR_SYSTEM, TOPO,
                           "hwloc_topology_load failed: %m");
    }
    node->packages = count_type(t, HWLOC_OBJ_PACKAGE);
    node->numa_nodes = count_type(t, HWLOC_OBJ_NUMANODE);
    node->cores = count_type(t, HWLOC_OBJ_CORE);
    node->pus = count_type(t, HWLOC_OBJ_PU);
    node->llc_bytes = last_level_cache(t);
    count_pci(t, node);
    st = named_nics(node);
    if (st != TACL_OK) {
        hwloc_topology_destroy(t);
        return st;
    }
    {
        int peer = 0, cuda = cuda_peer_access(&peer);
        if (cuda > node->gpus)
            node->gpus = cuda;
        node->gpu_peer = peer;
        node->gpu_link = cuda > 1 ? nvml_gpu_link() : TACL__GPU_LINK_UNKNOWN;
    }
    hwloc_topology_destroy(t);
    TACL_INFO(TOPO, "detected %s: %d packages, %d NUMA nodes, %d cores, "
              "%d threads, %d GPUs (%s%s), %d NICs, last-level cache %llu KB",
              node->name, node->packages, node->numa_nodes, node->cores,
              node->pus, node->gpus,
              node->gpu_peer ? "peer access, " : "",
              node->gpu_link == TACL__GPU_LINK_NVLINK ? "NVLink"
              : node->gpu_link == TACL__GPU_LINK_PCIE ? "PCIe" : "link unknown",
              node->nics,
              (unsigned long long)(node->llc_bytes >> 10));
    return TACL_OK;
}

/* The threshold when the node's cache size is unknown: half of 32 MB. */
#define TOPO_STREAM_DEFAULT (16ull << 20)

/*
 * Copying more than the cache holds, ordinary stores gain nothing from it
 * and evict what peers are about to read: see kernels/cpu/copy.h.
 */
uint64_t tacl__topo_stream_bytes(const tacl__node_desc_t *node)
{
    /* TACL_STREAM_MIN's words: 0 auto, 1 never; -1: a size. */
    int word = tacl__config_word(TACL_CFG_STREAM_MIN);

    if (word == 1)
        return 0;
    if (word < 0)
        return TACL_MAX(tacl__config_size(TACL_CFG_STREAM_MIN), 1ull);
    return node->llc_bytes ? node->llc_bytes / 2 : TOPO_STREAM_DEFAULT;
}

static tacl_status_t parse_link_override(const char *spec, const char *var,
                                         tacl__link_t *link)
{
    char buf[128], *tok, *save = NULL;

    snprintf(buf, sizeof(buf), "%s", spec);
    for (tok = strtok_r(buf, ", ", &save); tok != NULL;
         tok = strtok_r(NULL, ", ", &save)) {
        /* Bandwidth above 0 (DBL_MIN), latency from 0. */
        if (strncmp(tok, "bw=", 3) == 0) {
            if (tacl__parse_double(tok + 3, DBL_MIN, DBL_MAX, &link->bw) !=
                TACL_PARSE_OK)
                goto err_bad;
        } else if (strncmp(tok, "lat=", 4) == 0) {
            if (tacl__parse_double(tok + 4, 0, DBL_MAX, &link->lat) !=
                TACL_PARSE_OK)
                goto err_bad;
        } else {
            goto err_bad;
        }
    }
    return TACL_OK;

err_bad:
    return tacl__error(TACL_ERR_INVALID_ARG, TOPO,
                       "%s=\"%s\": expected \"bw=<GB/s>,lat=<us>\"", var,
                       spec);
}

tacl_status_t tacl__topo_set_links(tacl__topo_t *topo)
{
    static const tacl__cfg_t cfg[TACL_NUM_LINK_CLASSES] = {
        [TACL_LINK_SELF] = TACL_CFG_LINK_SELF,
        [TACL_LINK_HOST] = TACL_CFG_LINK_HOST,
        [TACL_LINK_GPU] = TACL_CFG_LINK_GPU,
        [TACL_LINK_NET] = TACL_CFG_LINK_NET,
    };
    double nic = 0;
    int nics = 0, pcie = 0, nvlink = 0;

    for (int n = 0; n < topo->n_nodes; n++) {
        pcie |= topo->nodes[n].gpu_link == TACL__GPU_LINK_PCIE;
        nvlink |= topo->nodes[n].gpu_link == TACL__GPU_LINK_NVLINK;
        if (topo->nodes[n].nic_gbps > nic)
            nic = topo->nodes[n].nic_gbps;
        if (topo->nodes[n].nics > nics)
            nics = topo->nodes[n].nics;
    }
    /* Defaults: a memcpy-class host link, NVLink-class GPU peers (PCIe
     * Gen4 x16's practical rate when every node that says is joined by
     * PCIe only), and the NICs' line rate (10 Gbit/s when unknown) for
     * the network. */
    if (topo->link[TACL_LINK_SELF].bw == 0)
        topo->link[TACL_LINK_SELF] = (tacl__link_t){20.0, 0.2};
    if (topo->link[TACL_LINK_HOST].bw == 0)
        topo->link[TACL_LINK_HOST] = (tacl__link_t){10.0, 1.0};
    if (topo->link[TACL_LINK_GPU].bw == 0)
        topo->link[TACL_LINK_GPU] = pcie && !nvlink
                                        ? (tacl__link_t){24.0, 5.0}
                                        : (tacl__link_t){200.0, 3.0};
    if (topo->link[TACL_LINK_NET].bw == 0)
        topo->link[TACL_LINK_NET] = (tacl__link_t){
            nic > 0 ? nic * (nics > 0 ? nics : 1) / 8.0 : 1.25, 15.0};
    for (int c = 0; c < TACL_NUM_LINK_CLASSES; c++) {
        char var[32];
        tacl_status_t status;

        if (!tacl__config_is_set(cfg[c]))
            continue;
        snprintf(var, sizeof(var), "TACL_LINK_%s",
                 c == TACL_LINK_SELF ? "SELF" : c == TACL_LINK_HOST ? "HOST"
                 : c == TACL_LINK_GPU ? "GPU" : "NET");
        status = parse_link_override(tacl__config_str(cfg[c]), var,
                                     &topo->link[c]);
        if (status != TACL_OK)
            return status;
    }
    return TACL_OK;
}
