/*
 * Configuration.  Every tunable is one entry of TACL_CONFIG_LIST: a name,
 * a default and a line of documentation.  Values come from the environment
 * variable TACL_<NAME>, read once on first use; this module is the only
 * place that calls getenv().
 *
 * Entries with a type (config.c's type table: integer, number, size,
 * boolean, one of a list of words) are validated once, when read: a value
 * that does not parse counts as unset, and tacl__config_report() reports it
 * (naming the variable, the value and the default used instead), like a
 * TACL_ variable of the environment that is no entry of the table.
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
    X(DEBUG_SUBSYS, "INIT,ENV",                                              \
      "subsystems logged at INFO and TRACE (warnings always are): ALL or a " \
      "comma list of INIT,ENV,BOOT,TOPO,SHM,IPC,NET,COLL,SCHED,TUNE,"       \
      "ALLOC; ^NAME excludes one")                                           \
    X(DEBUG_FILE, "",                                                        \
      "log to this file instead of stderr; %h is the host, %p the pid")      \
    X(ROOT_ADDR, "",                                                         \
      "host:port of rank 0's bootstrap listener, for tacl_comm_init_env "    \
      "(default: MASTER_ADDR:MASTER_PORT, + 1 under torchrun; the first "   \
      "node of a Slurm step; loopback when an MPI job has one node)")      \
    X(RANK, "", "this process's rank, for tacl_comm_init_env (default: "    \
      "the launcher's: RANK, OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID)") \
    X(NRANKS, "",                                                            \
      "number of ranks, for tacl_comm_init_env (default: the launcher's: "  \
      "WORLD_SIZE, OMPI_COMM_WORLD_SIZE, PMI_SIZE, SLURM_NTASKS)")           \
    X(LOCAL_RANK, "", "rank on this node as the launcher numbered it "       \
      "(default: LOCAL_RANK); informational")                                \
    X(LOCAL_SIZE, "", "ranks on this node as the launcher counted them; "    \
      "informational")                                                       \
    X(CLUSTER_NNODES, "", "nodes of the cluster tacl-cluster emulates, "     \
      "which it sets for its ranks; informational")                          \
    X(CLUSTER_PHASE, "", "the phase of a tacl-cluster job (1, or 2 after "   \
      "--replace-node), which it sets for its ranks; informational")         \
    X(CLUSTER_REPLACED, "", "the nodes tacl-cluster --replace-node "         \
      "replaces, which it sets for its ranks; informational")                \
    X(CLUSTER_STORAGE, "", "the address of tacl-cluster's storage node "     \
      "(--storage-rate), which it sets for its ranks; informational")        \
    X(SOCKET_IFNAME, "",                                                     \
      "network interface the bootstrap listens on (default: the first up "   \
      "non-loopback interface, else loopback)")                              \
    X(NICS, "",                                                              \
      "the node's network interfaces, one per rail, as a comma list of "     \
      "NAME or NAME@<Gbit/s> (eth0@100,eth1@100); set, it replaces the "     \
      "PCI network adapters the topology detects (tacl-cluster --rails)")    \
    X(NODE_ID, "",                                                           \
      "identity of this node; ranks with equal ids share memory (default: "  \
      "host name and boot id)")                                              \
    X(NET, "auto",                                                           \
      "network transport between nodes: auto (ofi when an EFA device is "    \
      "present, else ucx, else ofi over libfabric's tcp provider), ucx, "   \
      "ofi, or none (single node only)")                                     \
    X(OFI_PROVIDER, "auto",                                                  \
      "libfabric provider of the ofi transport: auto (efa when present, "   \
      "else tcp) or a name fi_info lists, such as efa, tcp or shm")          \
    X(OFI_STRIPE_MIN, "1M",                                                  \
      "messages of at least this many bytes (256K or more) go over ofi as "  \
      "one piece per rail shared with the peer (TACL_NICS names the "        \
      "rails); it must be equal on every rank")                              \
    X(OFI_MAX_MSG, "auto",                                                   \
      "largest message ofi hands libfabric at once: auto (over ofi_rxm, "   \
      "its eager size, FI_OFI_RXM_BUFFER_SIZE or 16K; "                      \
      "else the provider's max_msg_size) or a size of at least 64K; a "     \
      "longer message goes as "                                              \
      "pieces of at most this, so it must be equal on every rank (lower it " \
      "to test splitting)")                                                  \
    X(OFI_REGISTER, "auto",                                                  \
      "who registers ofi's buffers: auto (the provider where it can, so "    \
      "its own cache serves, as EFA's does; tacl where it must, "            \
      "FI_MR_LOCAL) or always (tacl registers every buffer, through its "    \
      "cache; for providers whose cache is off, and for tests)")             \
    X(OFI_MR_CACHE, "256",                                                   \
      "registrations tacl's ofi cache keeps (tacl_mem_alloc segments and "   \
      "device allocations, each whole, per rail), the least recently used "  \
      "going first; 0: register each buffer for its message only")           \
    X(OFI_HMEM, "auto",                                                      \
      "device buffers straight to the network where the provider offers "    \
      "FI_HMEM for CUDA: auto (when offered, else staged through pinned "    \
      "host chunks), on (refuse a provider without it), off (always "        \
      "staged)")                                                             \
    X(UCX_RNDV_THRESH, "auto",                                               \
      "message size from which ucx uses UCX's rendezvous protocol: auto "    \
      "(inf, always eager, where no RDMA device exists and UCX_RNDV_THRESH " \
      "is not set; else UCX's own) or a value UCX accepts, such as 64K")     \
    X(NET_CUDA_CHUNK, "2M",                                                  \
      "bytes of one pinned host chunk through which ucx and ofi stage CUDA " \
      "device memory between nodes; a device message travels as chunks of " \
      "this "                                                                \
      "size, so it must be equal on every rank (formerly "                   \
      "TACL_UCX_CUDA_CHUNK, still read)")                                    \
    X(NET_CUDA_CHUNKS, "8",                                                  \
      "pinned staging chunks per ucx or ofi instance, half for sends and "  \
      "half for "                                                            \
      "receives: how many chunks of device messages are in flight at once "  \
      "(formerly TACL_UCX_CUDA_CHUNKS, still read)")                         \
    X(SHM_MODE, "auto",                                                      \
      "how shm moves large messages: cma (single copy through cross-memory " \
      "attach), copy (through shared staging buffers) or auto")              \
    X(SHM_MAP, "1",                                                          \
      "1: a receiver maps the sender's tacl_mem_alloc segments and copies "  \
      "from them itself; 0: such buffers go by cross-memory attach too")     \
    X(SHM_EAGER_LIMIT, "16384",                                              \
      "messages up to this many bytes go inline through the shm queue")      \
    X(SHM_SPIN, "2000",                                                      \
      "polls without progress before a waiting rank starts yielding its "   \
      "core between polls")                                                  \
    X(BG_MAX_HOLD_MS, "50",                                                  \
      "milliseconds a background send (a snapshot's part) waits at most "   \
      "for the foreground operations in flight to end before it starts "    \
      "anyway")                                                              \
    X(BG_QUIET_US, "2000",                                                   \
      "microseconds without a foreground send in flight to another node "   \
      "before a background send to another node may start: the gap "       \
      "between the steps of one collective is shorter, the compute "       \
      "between collectives longer")                                          \
    X(SNAP_FUSED_CRC, "1",                                                   \
      "1: a snapshot's own copy takes its CRC32C checksums while copying, "  \
      "one pass over the regions; 0: a copy, then a second pass for the "    \
      "checksums (to compare the two in tacl_snapshot_stats)")               \
    X(SHM_YIELD_US, "50",                                                    \
      "microseconds a waiting rank then polls and yields its core before "  \
      "it sleeps until a peer wakes it")                                     \
    X(FAST_MAX, "16384",                                                     \
      "bytes of input per rank up to which a blocking collective whose "    \
      "ranks share one node runs in the communicator's shared-memory "      \
      "area instead of a schedule (the fast path; at most 1M); 0: never. " \
      "Rank 0's value applies to every rank (the others warn if theirs "   \
      "differs)")                                                            \
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
    X(TUNER, "model",                                                        \
      "how the tuner ranks algorithms: model (the closed-form cost "        \
      "model) or sim (the simulator over every rank's schedule, once per "  \
      "collective and power-of-two size bucket per communicator)")          \
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
      "operations each communicator's flight recorder keeps, rounded up "   \
      "to a power of two (0: off)")                                          \
    X(FLIGHT_DUMP_FILE, "",                                                  \
      "also append flight dumps (on failure or signal) to this file; %h "   \
      "is the host, %p the pid, %r the world rank")                          \
    X(FLIGHT_SIGNAL, "",                                                     \
      "signal (SIGUSR1, SIGUSR2 or a number) on which every communicator "  \
      "dumps its flight records at its next progress call")                \
    X(STEP_TRACE, "",                                                        \
      "append every operation's per-step timeline (when each step became "  \
      "runnable, started and ended) to this file followed by .<world "      \
      "rank>; slows operations down, for analysis only")

typedef enum {
#define TACL_CONFIG_ENUM_(name, def, doc) TACL_CFG_##name,
    TACL_CONFIG_LIST(TACL_CONFIG_ENUM_)
#undef TACL_CONFIG_ENUM_
    TACL_CFG_COUNT
} tacl__cfg_t;

/** The value of TACL_<NAME> if valid, else its default; never NULL. */
const char *tacl__config_str(tacl__cfg_t id);
/**
 * The value as an integer (parse.h's size grammar: K, M and G suffixes
 * allowed, powers of 1024); the default if the variable is invalid.
 */
long long tacl__config_int(tacl__cfg_t id);
/** The value as a floating-point number, likewise. */
double tacl__config_double(tacl__cfg_t id);
/** A size in bytes (K, M, G suffixes), likewise. */
unsigned long long tacl__config_size(tacl__cfg_t id);
/** A boolean (1/0, true/false, yes/no, on/off), likewise. */
int tacl__config_bool(tacl__cfg_t id);
/**
 * For an entry typed with a list of words: the index in that list of the
 * value (case ignored), or -1 when it is none of them (a size, say, for
 * an entry that takes a size or a word).
 */
int tacl__config_word(tacl__cfg_t id);
/** Whether the user set TACL_<NAME> (as opposed to the default). */
int tacl__config_is_set(tacl__cfg_t id);

/** Where an entry's value comes from. */
typedef enum {
    TACL_CFG_SRC_DEFAULT = 0, /* unset: the default */
    TACL_CFG_SRC_ENV,         /* the environment's value */
    TACL_CFG_SRC_INVALID      /* set but invalid: the default is used */
} tacl__cfg_src_t;

tacl__cfg_src_t tacl__config_source(tacl__cfg_t id);
/** "default", "environment" or "invalid". */
const char *tacl__config_source_name(tacl__cfg_src_t src);
/** Name without the TACL_ prefix, default, documentation; NULL if bad id. */
const char *tacl__config_name(tacl__cfg_t id);
const char *tacl__config_default(tacl__cfg_t id);
const char *tacl__config_doc(tacl__cfg_t id);
/** The environment's raw value of TACL_<NAME> (even invalid), or NULL. */
const char *tacl__config_raw(tacl__cfg_t id);

/**
 * Log, subsystem ENV, each value set by the environment (INFO), each
 * invalid value and each TACL_ variable of the environment that is no
 * configuration entry, suggesting the closest entry's name (WARN).
 * Returns the number of warnings (config_report.c).
 */
int tacl__config_report(void);
/** tacl__config_report, once per process (a communicator's creation and
 *  tacl-info ask for it). */
void tacl__config_report_once(void);
/** What entry id takes ("a size >= 0 (K, M, G suffixes)", ...). */
void tacl__config_describe(tacl__cfg_t id, char *buf, size_t len);
/** The i-th TACL_ variable of the environment no entry knows, or NULL. */
const char *tacl__config_unknown(int i);

/**
 * An environment variable outside tacl's namespace (MASTER_ADDR, RANK, ...,
 * or a launcher's), or NULL.  Lives here so getenv() has one home.
 */
const char *tacl__config_env(const char *name);

/** Re-read every variable from the environment (for tests). */
void tacl__config_reload(void);

/**
 * How many times the variables were read (1 after the first use, one
 * more per tacl__config_reload): a reader that parses a value once keeps
 * the generation it parsed and parses again when it changed.
 */
unsigned tacl__config_generation(void);

/**
 * Print every variable with its value, where it came from (default,
 * environment or invalid), its default and documentation.
 */
void tacl__config_print(FILE *file);

#endif /* TACL_CORE_CONFIG_H */
