/*
 * Configuration.  Every tunable is one entry of TACL_CONFIG_LIST: a name,
 * a default and a line of documentation.  Values come from the environment
 * variable TACL_<NAME>, read once on first use; this module is the only
 * place that calls getenv().
 */
#ifndef TACL_CORE_CONFIG_H
#define TACL_CORE_CONFIG_H

#include <stdio.h>

#include "tacl.h"

#define TACL_CONFIG_LIST(X)                                                  \
    X(TIMEOUT, "60",                                                         \
      "seconds any wait (bootstrap, collective, request) may last before "   \
      "it fails with a timeout; a tacl_config_t's timeout overrides it "    \
      "per communicator")                                                    \
    X(BLOCKING, "1",                                                         \
      "0: tacl_comm_init_rank/init_env return TACL_IN_PROGRESS at once and " \
      "finish in the background (poll tacl_comm_get_async_error); a "       \
      "tacl_config_t's blocking field overrides it")                         \
    X(PROGRESS_THREAD, "0",                                                  \
      "1: a thread of the library progresses each communicator's _nb "      \
      "operations, so they complete without tacl_request_test/wait; a "     \
      "tacl_config_t's progress_thread field overrides it")                  \
    X(DEBUG, "WARN", "log level: NONE, WARN, INFO or TRACE")                 \
    X(DEBUG_SUBSYS, "ALL",                                                   \
      "subsystems to log: ALL or a comma list of INIT,BOOT,TOPO,SHM,NET,"    \
      "COLL,SCHED,TUNE,ALLOC; ^NAME excludes one")                           \
    X(DEBUG_FILE, "",                                                        \
      "log to this file instead of stderr; %h is the host, %p the pid")      \
    X(ROOT_ADDR, "",                                                         \
      "host:port of rank 0's bootstrap listener, for tacl_comm_init_env "    \
      "(default: MASTER_ADDR:MASTER_PORT)")                                  \
    X(RANK, "", "this process's rank, for tacl_comm_init_env (default: RANK)")\
    X(NRANKS, "",                                                            \
      "number of ranks, for tacl_comm_init_env (default: WORLD_SIZE)")       \
    X(LOCAL_RANK, "", "rank on this node as the launcher numbered it "       \
      "(default: LOCAL_RANK); informational")                                \
    X(SOCKET_IFNAME, "",                                                     \
      "network interface the bootstrap listens on (default: the first up "   \
      "non-loopback interface, else loopback)")                              \
    X(NODE_ID, "",                                                           \
      "identity of this node; ranks with equal ids share memory (default: "  \
      "host name and boot id)")                                              \
    X(NET, "ucx",                                                            \
      "network transport between nodes: ucx, or none (single node only)")   \
    X(UCX_RNDV_THRESH, "auto",                                               \
      "message size from which ucx uses UCX's rendezvous protocol: auto "    \
      "(inf, always eager, where no RDMA device exists and UCX_RNDV_THRESH " \
      "is not set; else UCX's own) or a value UCX accepts, such as 64K")     \
    X(SHM_MODE, "auto",                                                      \
      "how shm moves large messages: cma (single copy through cross-memory " \
      "attach), copy (through shared staging buffers) or auto")              \
    X(SHM_MAP, "1",                                                          \
      "1: a receiver maps the sender's tacl_mem_alloc segments and copies "  \
      "from them itself; 0: such buffers go by cross-memory attach too")     \
    X(SHM_EAGER_LIMIT, "16384",                                              \
      "messages up to this many bytes go inline through the shm queue")      \
    X(SHM_SPIN, "2000",                                                      \
      "polls without progress before a rank sleeps instead of spinning")     \
    X(CHUNK_SIZE, "1048576",                                                 \
      "pipeline chunk, in bytes, of ring algorithms")                        \
    X(STREAM_MIN, "auto",                                                    \
      "bytes the ranks of one node write in one collective from which its "  \
      "large local copies bypass the cache (non-temporal stores): auto "     \
      "(half the last-level cache), a size such as 16M, or never")           \
    X(CHECK, "0",                                                            \
      "1: every collective first exchanges a small signature (collective, " \
      "count, dtype, op, root, operations) with its peers and fails on "    \
      "every rank, naming the rank and field, when they differ; each "      \
      "call then waits for its peers to reach it")                          \
    X(ALGO, "",                                                              \
      "force algorithms per collective, e.g. allgather=ring,allreduce=rd")   \
    X(TOPO_FILE, "",                                                         \
      "read link bandwidths, latencies and node descriptions from this "     \
      "topology file instead of detecting them")                             \
    X(TOPO_DUMP_FILE, "",                                                    \
      "rank 0 writes the communicator's topology to this file at init")      \
    X(LINK_SELF, "", "override the self link: \"bw=<GB/s>,lat=<us>\"")        \
    X(LINK_HOST, "",                                                         \
      "override the intra-node host-memory link: \"bw=<GB/s>,lat=<us>\"")     \
    X(LINK_GPU, "",                                                          \
      "override the intra-node GPU peer link: \"bw=<GB/s>,lat=<us>\"")        \
    X(LINK_NET, "",                                                          \
      "override the inter-node network link: \"bw=<GB/s>,lat=<us>\"")     \
    X(FLIGHT_RECORDS, "64",                                                  \
      "operations each communicator's flight recorder keeps (0: off)")       \
    X(FLIGHT_DUMP_FILE, "",                                                  \
      "also append flight dumps (on failure or signal) to this file; %h "   \
      "is the host, %p the pid, %r the world rank")                          \
    X(FLIGHT_SIGNAL, "",                                                     \
      "signal (SIGUSR1, SIGUSR2 or a number) on which every communicator "  \
      "dumps its flight records at its next progress call")

typedef enum {
#define TACL_CONFIG_ENUM_(name, def, doc) TACL_CFG_##name,
    TACL_CONFIG_LIST(TACL_CONFIG_ENUM_)
#undef TACL_CONFIG_ENUM_
    TACL_CFG_COUNT
} tacl__cfg_t;

/** The value of TACL_<NAME>, or its default; never NULL. */
const char *tacl__config_str(tacl__cfg_t id);
/** The value as an integer; the default if the variable does not parse. */
long long tacl__config_int(tacl__cfg_t id);
/** The value as a floating-point number, likewise. */
double tacl__config_double(tacl__cfg_t id);
/** Whether the user set TACL_<NAME> (as opposed to the default). */
int tacl__config_is_set(tacl__cfg_t id);

/**
 * An environment variable outside tacl's namespace (MASTER_ADDR, RANK, ...,
 * or a launcher's), or NULL.  Lives here so getenv() has one home.
 */
const char *tacl__config_env(const char *name);

/** Re-read every variable from the environment (for tests). */
void tacl__config_reload(void);

/** Print every variable with its default, value and documentation. */
void tacl__config_print(FILE *file);

#endif /* TACL_CORE_CONFIG_H */
