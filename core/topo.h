/*
 * Topology: what each node holds (packages, NUMA nodes, cores, GPUs, NICs),
 * which node each rank is on, and the link class of every pair of ranks
 * with a bandwidth and a latency per class.
 *
 * Each rank detects its own node with hwloc (tacl__topo_detect_node); the
 * communicator's creation exchanges the descriptions so every rank knows
 * them all.  A topology can be written to and read from a text file
 * (TACL_TOPO_DUMP_FILE, TACL_TOPO_FILE) so that a described cloud machine
 * can stand in for the real one in the tuner and the simulator.
 *
 * The file format, one statement per line, '#' starting a comment:
 *
 *   tacl-topology 1
 *   machine p4d.24xlarge
 *   link host bw=20 lat=0.7        # GB/s and microseconds per class:
 *   link gpu bw=240 lat=3          #   self, host, gpu, net
 *   link net bw=50 lat=12
 *   node n0 packages=2 numa=2 cores=48 gpus=8 nics=4 nic_gbps=100
 *                                  # optional keys: gpu_peer=0|1 and
 *                                  #   gpu_link=pcie|nvlink
 *   ranks n0 0-7                   # optional: ranks on node n0
 *   fabric oversub=2 overhead=1.5  # optional, for the simulator: the
 *                                  #   switch fabric's oversubscription
 *                                  #   (1: full bisection) and a
 *                                  #   per-message overhead (us); and
 *                                  #   host_bw=R (GB/s) when the nodes
 *                                  #   are emulated on one machine:
 *                                  #   its cores carry at most R across
 *                                  #   the emulated network, all links
 *                                  #   together (absent: real nodes)
 *   kernel copy=300 reduce=150 quant=100   # optional: kernel rates in
 *                                  #   GB/s of output (0: free)
 *
 * The simulator (sim/sim.h) reads more of a node line than the tuner:
 * each rank reaches other nodes through the NIC of its rail (rank g of a
 * node with G ranks and K NICs uses NIC g * K / G; with K >= G a rank
 * owns K / G of them), each NIC at nic_gbps; inside a node each rank has
 * one port of the gpu class's bandwidth (device memory on a node with
 * gpu_peer=1) or the host class's.  Files without the optional lines
 * load as before; tacl__topo_write writes them only when set.
 */
#ifndef TACL_CORE_TOPO_H
#define TACL_CORE_TOPO_H

#include <stdio.h>

#include "tacl.h"
#include "topo_view.h"

/* Link classes are tacl.h's tacl_link_class_t. */

/** Name of a link class as the topology file spells it. */
const char *tacl__link_class_name(tacl_link_class_t cls);

typedef struct {
    double bw;             /* GB/s (1e9 bytes per second) */
    double lat;            /* microseconds */
} tacl__link_t;

#define TACL__TOPO_NAME_LEN 64

/** Kernels whose rate a topology file may give ("kernel" line). */
typedef enum {
    TACL__TOPO_KERNEL_COPY = 0,
    TACL__TOPO_KERNEL_REDUCE,
    TACL__TOPO_KERNEL_QUANT,
    TACL__TOPO_KERNELS
} tacl__topo_kernel_t;

/*
 * How the GPUs of a node are joined (node key gpu_link=pcie|nvlink):
 * NVLink when NVML reports an active NVLink on every GPU, else PCIe;
 * unknown without NVML, with fewer than two GPUs, or in a file without
 * the key.  The gpu link class's default bandwidth follows it
 * (tacl__topo_set_links).
 */
enum {
    TACL__GPU_LINK_UNKNOWN = 0,
    TACL__GPU_LINK_PCIE,
    TACL__GPU_LINK_NVLINK
};

/** One node, as detected or described.  Fixed size so it can be sent. */
typedef struct {
    char name[TACL__TOPO_NAME_LEN];
    int packages;
    int numa_nodes;
    int cores;
    int pus;
    int gpus;
    int gpu_peer;          /* 1 when every GPU pair has peer access */
    int gpu_link;          /* how its GPUs are joined: TACL__GPU_LINK_* */
    int nics;
    double nic_gbps;       /* speed of one NIC in Gbit/s, 0 if unknown */
    uint64_t llc_bytes;    /* last-level cache of one package, 0 if
                              unknown */
} tacl__node_desc_t;

typedef struct tacl__topo {
    char machine[TACL__TOPO_NAME_LEN];
    tacl__link_t link[TACL_NUM_LINK_CLASSES];
    int n_nodes;
    tacl__node_desc_t *nodes;
    int nranks;            /* 0 when the file places no ranks */
    int *node_of;          /* node index per rank */
    /* The optional fabric and kernel lines (0: not given). */
    double fabric_oversub; /* >= 1 when given */
    double msg_overhead;   /* microseconds per message */
    double host_bw;        /* GB/s: emulated nodes' shared host (0: none) */
    double kernel_bw[TACL__TOPO_KERNELS]; /* GB/s: copy, reduce, quant */
    int has_fabric, has_kernel;
} tacl__topo_t;

/**
 * TACL_STREAM_MIN for a rank on node: the bytes a collective's ranks on
 * the node write together from which its local copies stream past the
 * cache (a topology view's stream_bytes; 0 never).  "auto" (the default,
 * also when empty, and what an unparsable value falls back to, with a
 * warning) is half the node's last-level cache, or 16 MiB when it is
 * unknown; "never" is 0; a size (K, M, G suffixes) is itself, 0 as 1.
 */
uint64_t tacl__topo_stream_bytes(const tacl__node_desc_t *node);

/**
 * The one maker of a topology view: rank's view of nranks ranks on the
 * nodes node_of names (numbered from 0 in order of their lowest rank),
 * its node, local rank and size; the link classes' figures of links
 * (NULL: none, every cost then falls back to the model's); and the
 * figures of the node its rank is on from node (NULL: none):
 * stream_bytes, the NICs and their speed, and whether device buffers
 * move on the gpu link class (the node's GPUs reach one another and
 * links gives the class a bandwidth).  The communicator, the simulator
 * and the tests all call it, so their views never drift apart; a caller
 * sets afterwards only what it knows besides (fast_max, peers_map).
 */
void tacl__topo_view_make(tacl__topo_view_t *view, int rank, int nranks,
                          const int *node_of, const tacl__link_t *links,
                          const tacl__node_desc_t *node);

/** Detect this node with hwloc (and CUDA when built with it). */
tacl_status_t tacl__topo_detect_node(tacl__node_desc_t *node);

/**
 * Default bandwidth and latency per link class from the detected nodes,
 * then TACL_LINK_<CLASS> overrides ("bw=GB/s,lat=us").
 */
tacl_status_t tacl__topo_set_links(tacl__topo_t *topo);

/**
 * Link class between two ranks of a topology with ranks placed, for
 * buffers in device memory (device_memory != 0) or host memory.
 */
tacl_link_class_t tacl__topo_link_class(const tacl__topo_t *topo, int a,
                                        int b, int device_memory);

/**
 * Read a topology file.  A malformed line gives TACL_ERR_INVALID_ARG with
 * a message naming the file and line.
 */
tacl_status_t tacl__topo_load(const char *path, tacl__topo_t *topo);
/** Parse topology text (what tacl__topo_load reads); name is for errors. */
tacl_status_t tacl__topo_parse(const char *text, const char *name,
                               tacl__topo_t *topo);
/** Write a topology in the file format. */
tacl_status_t tacl__topo_write(const tacl__topo_t *topo, FILE *file);
tacl_status_t tacl__topo_dump(const tacl__topo_t *topo, const char *path);

/** Log a readable summary under TOPO at INFO. */
void tacl__topo_log(const tacl__topo_t *topo, int rank);

void tacl__topo_fini(tacl__topo_t *topo);

#endif /* TACL_CORE_TOPO_H */
