/*
 * snap_node: snapshots on the emulated cluster (tacl-cluster), run as
 * every rank of a job whose ranks join with tacl_comm_init_env.
 *
 *   snap_node replace KEY DIR [group|ring]
 *       Under `tacl-cluster --replace-node`: in phase 1 every rank saves
 *       VERSIONS versions of two regions (node failure domain, m = 2,
 *       group placement unless ring is named) and writes the newest
 *       version's bytes to DIR/rank<r>.bin (DIR is seen by every node).
 *       In phase 2, after the replacement, each rank checks that its
 *       node's /dev/shm holds its stores for KEY exactly when its node
 *       was not replaced and restores on the fresh job.  When the
 *       placement leaves every rank a copy off the replaced nodes, the
 *       regions must equal DIR/rank<r>.bin byte for byte; otherwise the
 *       restore must fail on every rank and leave the regions alone.
 *
 *   snap_node trials KEY SEED SAMPLES
 *       Fault injection against the exact recovery probability, one node
 *       per failure unit (node domain, m = 2).  For k = 1 .. min(3,
 *       nodes - 1) and each of group and ring placement, every k-set of
 *       nodes is lost
 *       once, then SAMPLES more k-sets drawn uniformly at random (seeded
 *       by SEED, the same on every rank).  A trial saves a version, makes
 *       the lost nodes' stores vanish (each rank of a lost node removes
 *       its node's files of the trial's key from the node's private
 *       /dev/shm, which is what a dead node's memory does), restores, and
 *       records whether every rank got its bytes back.  Each outcome must
 *       be what the placement says of that set; the fraction over every
 *       set must equal tacl__place_recovery's exactly, and the sampled
 *       fraction must lie within a binomial bound of it.  Rank 0 prints
 *       the table.
 *
 * Exit status 0 when every check passed, 1 otherwise, with a "FAIL:" line
 * per problem.
 */
#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "placement.h"
#include "tacl.h"

#define VERSIONS 3
#define WEIGHT_BYTES 40000u
#define OPTIM_BYTES 90000u
#define TRIAL_BYTES 20000u
#define MAX_NODES 62
/* Trials lose 1 .. MAX_LOST nodes (fewer than the nodes). */
#define MAX_LOST 3
/* Two-sided 99.9% normal quantile: a sampled fraction outside this many
 * standard errors of the exact probability fails the check. */
#define Z_BOUND 3.29

static int failures;

#define FAIL(...)                                                            \
    do {                                                                     \
        printf("FAIL: " __VA_ARGS__);                                        \
        printf("\n");                                                        \
        fflush(stdout);                                                      \
        failures++;                                                          \
    } while (0)

#define CHECK_OK(call)                                                       \
    do {                                                                     \
        tacl_status_t st_ = (call);                                          \
        if (st_ != TACL_OK) {                                                \
            FAIL("%s: %s (%s)", #call, tacl_status_string(st_),              \
                 tacl_last_error());                                         \
            return 1;                                                        \
        }                                                                    \
    } while (0)

/* splitmix64: the same stream on every rank for the same seed. */
static uint64_t next_rand(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void fill_random(uint8_t *p, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(next_rand(&seed) >> 56);
}

/* Remove this node's stores of key from its /dev/shm (the node's own
 * memory on the emulated cluster); returns how many there were. */
static int drop_node_stores(const char *key, int unlink_them)
{
    char prefix[128], path[512];
    struct dirent *e;
    DIR *d = opendir("/dev/shm");
    int n = 0;

    if (d == NULL)
        return -1;
    snprintf(prefix, sizeof(prefix), "tacl-snap-%s-h", key);
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, prefix, strlen(prefix)) != 0)
            continue;
        n++;
        if (unlink_them) {
            snprintf(path, sizeof(path), "/dev/shm/%s", e->d_name);
            unlink(path);
        }
    }
    closedir(d);
    return n;
}

static int env_int(const char *name)
{
    const char *v = getenv(name);

    return v != NULL ? atoi(v) : -1;
}

/* tacl-cluster's comma list of replaced nodes as a bit mask. */
static uint64_t replaced_nodes(void)
{
    const char *list = getenv("TACL_CLUSTER_REPLACED");
    uint64_t mask = 0;

    for (const char *p = list; p != NULL && *p != '\0';) {
        char *end;
        long v = strtol(p, &end, 10);

        if (end == p || v < 0 || v >= MAX_NODES)
            break;
        mask |= 1ull << v;
        p = *end == ',' ? end + 1 : end;
    }
    return mask;
}

/* Whether every node keeps a copy when the nodes in lost are gone. */
static int survives(const tacl__placement_t *p, uint64_t lost)
{
    for (int u = 0; u < p->units; u++) {
        const int *h = tacl__place_holders(p, u);
        int kept = 0;

        for (int j = 0; j < p->m; j++)
            kept |= !(lost >> h[j] & 1);
        if (!kept)
            return 0;
    }
    return 1;
}


static int write_file(const char *path, const void *a, size_t na,
                      const void *b, size_t nb)
{
    FILE *f = fopen(path, "wb");
    int ok = f != NULL && fwrite(a, 1, na, f) == na &&
             fwrite(b, 1, nb, f) == nb;

    if (f != NULL && fclose(f) != 0)
        ok = 0;
    return ok ? 0 : -1;
}

static int same_as_file(const char *path, const uint8_t *a, size_t na,
                        const uint8_t *b, size_t nb)
{
    uint8_t *want = malloc(na + nb);
    FILE *f = fopen(path, "rb");
    int same = 0;

    if (want != NULL && f != NULL && fread(want, 1, na + nb, f) == na + nb &&
        fgetc(f) == EOF)
        same = memcmp(want, a, na) == 0 && memcmp(want + na, b, nb) == 0;
    if (f != NULL)
        fclose(f);
    free(want);
    return same;
}

static int run_replace(tacl_comm_t comm, const char *key, const char *dir,
                       tacl__place_kind_t kind)
{
    int rank = env_int("TACL_RANK"), node = env_int("GROUP_RANK");
    int phase = env_int("TACL_CLUSTER_PHASE");
    uint64_t lost = replaced_nodes();
    int replaced = (int)(lost >> node & 1);
    tacl_snapshot_config_t cfg =
        {.replicas = 2,
         .placement = kind == TACL__PLACE_RING ? TACL_SNAPSHOT_PLACE_RING
                                               : TACL_SNAPSHOT_PLACE_GROUP,
         .domain = TACL_SNAPSHOT_DOMAIN_NODE,
         .staging_bytes = 65536,
         .staging_parts = 4,
         .job_key = key};
    uint8_t *w = calloc(1, WEIGHT_BYTES), *o = calloc(1, OPTIM_BYTES);
    char path[512];
    tacl__placement_t place = {0};
    tacl_snapshot_t snap;
    tacl_status_t st;
    uint64_t version = 0;
    int found = 0, held, can;

    if (w == NULL || o == NULL) {
        FAIL("no memory");
        return 1;
    }
    snprintf(path, sizeof(path), "%s/rank%d.bin", dir, rank);
    CHECK_OK(tacl_snapshot_create(comm, &cfg, &snap));
    CHECK_OK(tacl_snapshot_register(snap, "weights", w, WEIGHT_BYTES));
    CHECK_OK(tacl_snapshot_register(snap, "optim", o, OPTIM_BYTES));
    if (phase == 1) {
        for (uint64_t v = 1; v <= VERSIONS; v++) {
            fill_random(w, WEIGHT_BYTES, v * 1000 + (uint64_t)rank);
            fill_random(o, OPTIM_BYTES, v * 1000 + 500 + (uint64_t)rank);
            CHECK_OK(tacl_snapshot_save(snap, v));
        }
        if (write_file(path, w, WEIGHT_BYTES, o, OPTIM_BYTES) != 0)
            FAIL("rank %d: cannot write %s", rank, path);
        /* Training goes on past the snapshot, then the node dies. */
        memset(w, 0xee, WEIGHT_BYTES);
        CHECK_OK(tacl_snapshot_destroy(snap, 0));
        printf("rank %d node %d: saved versions 1..%d\n", rank, node,
               VERSIONS);
        free(w);
        free(o);
        return failures != 0;
    }
    held = drop_node_stores(key, 0);
    if (replaced ? held != 0 : held <= 0)
        FAIL("rank %d: node %d (%s) holds %d store(s) of key %s", rank, node,
             replaced ? "replaced" : "kept", held, key);
    /* What the placement says of losing the replaced nodes' memory. */
    CHECK_OK(
        tacl__place_build(env_int("TACL_CLUSTER_NNODES"), 2, kind, &place));
    can = survives(&place, lost);
    tacl__place_free(&place);
    CHECK_OK(tacl_barrier(comm, NULL));
    memset(w, 0, WEIGHT_BYTES);
    st = tacl_snapshot_restore(snap, &found, &version);
    if (!can) {
        /* Some rank's every copy was on the replaced nodes: the restore
         * must fail everywhere, name the placement group and write
         * nothing. */
        if (st == TACL_OK)
            FAIL("rank %d: restored version %llu, but nodes 0x%llx held "
                 "every copy of some rank",
                 rank, (unsigned long long)version, (unsigned long long)lost);
        else if (w[0] != 0 || memcmp(w, w + 1, WEIGHT_BYTES - 1) != 0)
            FAIL("rank %d: a failed restore wrote the regions", rank);
        else
            printf("rank %d node %d: restore refused as the placement "
                   "predicts: %s\n",
                   rank, node, tacl_last_error());
    } else if (st != TACL_OK)
        FAIL("rank %d: restore: %s (%s)", rank, tacl_status_string(st),
             tacl_last_error());
    else if (!found || version != VERSIONS)
        FAIL("rank %d: restored found %d version %llu, want %d", rank, found,
             (unsigned long long)version, VERSIONS);
    else if (!same_as_file(path, w, WEIGHT_BYTES, o, OPTIM_BYTES))
        FAIL("rank %d: restored bytes differ from version %d's", rank,
             VERSIONS);
    else
        printf("rank %d node %d: restored version %llu, %u bytes "
               "identical%s\n",
               rank, node, (unsigned long long)version,
               WEIGHT_BYTES + OPTIM_BYTES,
               replaced ? " (fetched from a peer)" : "");
    CHECK_OK(tacl_snapshot_destroy(snap, 1));
    free(w);
    free(o);
    return failures != 0;
}

/* One trial: save, lose the nodes in lost (a bit mask), restore.  Sets
 * *ok_p to whether every rank restored its bytes. */
static int trial(tacl_comm_t comm, tacl_snapshot_placement_t placement,
                 const char *key, uint64_t lost, int node, int *ok_p)
{
    tacl_snapshot_config_t cfg = {.replicas = 2,
                                  .placement = placement,
                                  .domain = TACL_SNAPSHOT_DOMAIN_NODE,
                                  .staging_bytes = 65536,
                                  .staging_parts = 2,
                                  .job_key = key};
    uint8_t buf[TRIAL_BYTES], want[TRIAL_BYTES];
    uint64_t seed = (uint64_t)env_int("TACL_RANK") * 7919 + lost, version;
    int found = 0, mine, all;
    tacl_snapshot_t snap;
    tacl_status_t st;

    fill_random(want, sizeof(want), seed);
    memcpy(buf, want, sizeof(buf));
    CHECK_OK(tacl_snapshot_create(comm, &cfg, &snap));
    CHECK_OK(tacl_snapshot_register(snap, "state", buf, sizeof(buf)));
    CHECK_OK(tacl_snapshot_save(snap, 1));
    CHECK_OK(tacl_snapshot_destroy(snap, 0));
    /* The lost nodes' memory vanishes; every rank waits for it. */
    if (lost >> node & 1)
        drop_node_stores(key, 1);
    CHECK_OK(tacl_barrier(comm, NULL));
    memset(buf, 0, sizeof(buf));
    CHECK_OK(tacl_snapshot_create(comm, &cfg, &snap));
    CHECK_OK(tacl_snapshot_register(snap, "state", buf, sizeof(buf)));
    st = tacl_snapshot_restore(snap, &found, &version);
    mine = st == TACL_OK && found && version == 1 &&
           memcmp(buf, want, sizeof(buf)) == 0;
    CHECK_OK(
        tacl_allreduce(&mine, &all, 1, TACL_INT32, TACL_MIN, comm, NULL));
    if (all != mine || (st != TACL_OK) != !all)
        FAIL("rank %d: lost nodes 0x%llx: restore %s, bytes %s, but the "
             "job's verdict is %d",
             env_int("TACL_RANK"), (unsigned long long)lost,
             tacl_status_string(st), mine ? "right" : "wrong", all);
    CHECK_OK(tacl_snapshot_destroy(snap, 1));
    drop_node_stores(key, 1);
    *ok_p = all;
    return 0;
}

/* The next k-subset of n after *s in colex order (Gosper's hack); 0 when
 * there is none. */
static int next_subset(uint64_t *s, int n)
{
    uint64_t c = *s & (~*s + 1), r = *s + c;

    *s = (((r ^ *s) >> 2) / c) | r;
    return *s < (1ull << n);
}

static uint64_t random_subset(uint64_t *rng, int n, int k)
{
    int order[MAX_NODES];
    uint64_t set = 0;

    for (int i = 0; i < n; i++)
        order[i] = i;
    for (int i = 0; i < k; i++) {
        int j = i + (int)(next_rand(rng) % (uint64_t)(n - i));
        int t = order[i];

        order[i] = order[j];
        order[j] = t;
        set |= 1ull << order[i];
    }
    return set;
}

typedef struct {
    int trials, ok;
} tally_t;

/* Run one trial on lost and count it; a wrong prediction is a failure. */
static int count_trial(tacl_comm_t comm, const tacl__placement_t *p,
                       tacl_snapshot_placement_t pk, const char *key,
                       int *seq, uint64_t lost, int node, tally_t *t)
{
    char tkey[64];
    int ok;

    snprintf(tkey, sizeof(tkey), "%s-%d", key, (*seq)++);
    if (trial(comm, pk, tkey, lost, node, &ok) != 0)
        return 1;
    if (ok != survives(p, lost))
        FAIL("%s placement, lost nodes 0x%llx: restore %s, the placement "
             "says it %s",
             tacl__place_kind_name(p->kind), (unsigned long long)lost,
             ok ? "succeeded" : "failed",
             survives(p, lost) ? "can" : "cannot");
    t->trials++;
    t->ok += ok;
    return 0;
}

static int run_trials(tacl_comm_t comm, const char *key, uint64_t seed,
                      int samples)
{
    static const struct {
        tacl__place_kind_t kind;
        tacl_snapshot_placement_t api;
    } kinds[] = {{TACL__PLACE_GROUP, TACL_SNAPSHOT_PLACE_GROUP},
                 {TACL__PLACE_RING, TACL_SNAPSHOT_PLACE_RING}};
    int nodes = env_int("TACL_CLUSTER_NNODES"), node = env_int("GROUP_RANK");
    int rank = env_int("TACL_RANK"), seq = 0;
    uint64_t rng = seed;

    if (nodes < 3 || nodes > MAX_NODES) {
        FAIL("trials need 3 to %d nodes, not %d", MAX_NODES, nodes);
        return 1;
    }
    if (rank == 0)
        printf("%2s %-6s %8s %9s %8s %9s %8s %8s\n", "k", "place", "sets",
               "restored", "trials", "restored", "exact", "bound");
    for (int k = 1; k < nodes && k <= MAX_LOST; k++) {
        for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
            tacl__placement_t p = {0};
            tally_t all = {0}, drawn = {0};
            uint64_t good, total, set = (1ull << k) - 1;
            double exact, bound;

            CHECK_OK(tacl__place_build(nodes, 2, kinds[i].kind, &p));
            CHECK_OK(tacl__place_recovery(&p, k, &good, &total));
            exact = (double)good / (double)total;
            do {
                if (count_trial(comm, &p, kinds[i].api, key, &seq, set, node,
                                &all) != 0)
                    return 1;
            } while (next_subset(&set, nodes));
            for (int s = 0; s < samples; s++)
                if (count_trial(comm, &p, kinds[i].api, key, &seq,
                                random_subset(&rng, nodes, k), node,
                                &drawn) != 0)
                    return 1;
            bound = Z_BOUND * sqrt(exact * (1 - exact) / samples);
            if ((uint64_t)all.trials != total || (uint64_t)all.ok != good)
                FAIL("k %d %s: %d of %d sets restored, exact %llu of %llu", k,
                     tacl__place_kind_name(p.kind), all.ok, all.trials,
                     (unsigned long long)good, (unsigned long long)total);
            if (fabs((double)drawn.ok / samples - exact) > bound + 1e-12)
                FAIL("k %d %s: %d of %d random sets restored (%.3f), "
                     "exact %.3f +- %.3f",
                     k, tacl__place_kind_name(p.kind), drawn.ok, samples,
                     (double)drawn.ok / samples, exact, bound);
            if (rank == 0)
                printf("%2d %-6s %8d %9.3f %8d %9.3f %8.3f %8.3f\n", k,
                       tacl__place_kind_name(p.kind), all.trials,
                       (double)all.ok / all.trials, drawn.trials,
                       (double)drawn.ok / samples, exact, bound);
            tacl__place_free(&p);
        }
    }
    return failures != 0;
}

int main(int argc, char **argv)
{
    tacl_comm_t comm;
    int rc;

    if (argc < 3 ||
        (strcmp(argv[1], "replace") == 0 && argc != 4 && argc != 5) ||
        (strcmp(argv[1], "trials") == 0 &&
         (argc != 5 || atoi(argv[4]) < 1))) {
        fprintf(stderr, "usage: snap_node replace KEY DIR [group|ring]\n"
                        "       snap_node trials KEY SEED SAMPLES\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    CHECK_OK(tacl_comm_init_env(&comm));
    if (strcmp(argv[1], "replace") == 0)
        rc = run_replace(comm, argv[2], argv[3],
                         argc == 5 && strcmp(argv[4], "ring") == 0
                             ? TACL__PLACE_RING
                             : TACL__PLACE_GROUP);
    else if (strcmp(argv[1], "trials") == 0)
        rc = run_trials(comm, argv[2], strtoull(argv[3], NULL, 0),
                        atoi(argv[4]));
    else {
        FAIL("unknown mode '%s'", argv[1]);
        rc = 1;
    }
    if (tacl_comm_destroy(comm) != TACL_OK && rc == 0)
        FAIL("tacl_comm_destroy: %s", tacl_last_error());
    return rc != 0 || failures != 0;
}
