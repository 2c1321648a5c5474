/*
 * Snapshots across processes (tacl.h, tacl_snapshot_*): one run of
 * forked ranks saves versions and is killed; a second run (every process
 * new, as after a job restart) restores and must get the newest version's
 * bytes back exactly, also when a rank's stores are gone (a replaced
 * node) and it fetches its state from a peer, falling back to the
 * previous version when that peer's copy is damaged.  A whole placement
 * group lost and regions that do not match are errors that name them.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "config.h"
#include "harness.h"
#include "snap_store.h"

#define NRANKS 4
#define VERSIONS 3
#define OPTIM_BYTES 70000u

typedef struct {
    char key[32];
    int replicas;
    int lose;          /* bit r: rank r's stores vanish before restore */
    int lose_own;      /* bit r: only rank r's store of its own state
                          vanishes (it still holds its peers' copies) */
    int corrupt_from;  /* a rank that damages its copy of rank 1's newest
                          version, or -1 */
    int corrupt_own;   /* a rank that damages its own newest version, or
                          -1: its peer's copy serves */
    int kill_rank;     /* a rank killed after saving, or -1 */
    int nodes;         /* emulated nodes (node domain), 0: rank domain */
    int nb;            /* save with tacl_snapshot_save_nb */
    int grow_rank;     /* a rank registering a bigger region to restore */
    int restore_ranks; /* ranks of the restoring job, 0: NRANKS */
    int restoring;     /* set by run_case for the second run */
    int replicas_of;   /* 2: ranks r and r + 2 hold the same state and
                          say so (tacl_snapshot_replicated); 0: none */
    int differ_rank;   /* such a rank whose newest version differs from
                          its replica's, or -1 */
} snap_case_t;

static uint8_t pattern(int rank, uint64_t version, size_t i)
{
    return (uint8_t)(i * 13 + (size_t)rank * 71 + version * 29 + (i >> 10));
}

/* Whose state a rank holds: its own, or its replica group's. */
static int who(const coll_ctx_t *ctx)
{
    const snap_case_t *c = ctx->arg;

    return c->replicas_of > 0 ? ctx->rank % c->replicas_of : ctx->rank;
}

static size_t weights_bytes(int rank)
{
    return 1000 + 37 * (size_t)rank;
}

typedef struct {
    uint8_t *weights, *optim;
    size_t wbytes, obytes;
} state_t;

static void fill(state_t *s, int rank, uint64_t version)
{
    for (size_t i = 0; i < s->wbytes; i++)
        s->weights[i] = pattern(rank, version, i);
    for (size_t i = 0; i < s->obytes; i++)
        s->optim[i] = pattern(rank, version, i + 5000);
}

static int matches(const state_t *s, int rank, uint64_t version)
{
    for (size_t i = 0; i < s->wbytes; i++)
        if (s->weights[i] != pattern(rank, version, i))
            return 0;
    for (size_t i = 0; i < s->obytes; i++)
        if (s->optim[i] != pattern(rank, version, i + 5000))
            return 0;
    return 1;
}

/* With emulated nodes, this rank's node identity, then the communicator
 * (the harness leaves it to the body and destroys it after). */
static int join(coll_ctx_t *ctx, const snap_case_t *c)
{
    char node[64];

    if (c->nodes == 0)
        return 0;
    snprintf(node, sizeof(node), "%s-node%d", c->key,
             ctx->rank / (ctx->nranks / c->nodes));
    setenv("TACL_NODE_ID", node, 1);
    setenv("UCX_NET_DEVICES", "lo", 1);
    tacl__config_reload();
    COLL_CHECK_OK(ctx, tacl_comm_init_rank(ctx->nranks, ctx->id, ctx->rank,
                                           &ctx->comm));
    return 0;
}

/* A set of c's configuration with this rank's two regions. */
static int open_set(coll_ctx_t *ctx, const snap_case_t *c, state_t *s,
                    tacl_snapshot_t *snap_p)
{
    tacl_snapshot_config_t cfg = {.replicas = c->replicas,
                                  .domain = c->nodes > 0
                                                ? TACL_SNAPSHOT_DOMAIN_NODE
                                                : TACL_SNAPSHOT_DOMAIN_RANK,
                                  .staging_bytes = 16384,
                                  .staging_parts = 4,
                                  .job_key = c->key};

    s->wbytes = weights_bytes(who(ctx));
    s->obytes = OPTIM_BYTES +
                (c->restoring && ctx->rank == c->grow_rank ? 8 : 0);
    s->weights = calloc(1, s->wbytes);
    s->optim = calloc(1, s->obytes);
    COLL_CHECK(ctx, s->weights != NULL && s->optim != NULL, "no memory");
    COLL_CHECK_OK(ctx, tacl_snapshot_create(ctx->comm, &cfg, snap_p));
    COLL_CHECK_OK(ctx, tacl_snapshot_register(*snap_p, "weights", s->weights,
                                              s->wbytes));
    COLL_CHECK_OK(ctx, tacl_snapshot_register(*snap_p, "optim", s->optim,
                                              s->obytes));
    if (c->replicas_of > 0)
        COLL_CHECK_OK(ctx, tacl_snapshot_replicated(*snap_p, who(ctx)));
    return 0;
}

/*
 * What a blocking save sent: the whole copy to its one peer, or for a
 * replica its header and CRCs only (its peer keeps its own copy).
 */
static int sent_check(coll_ctx_t *ctx, tacl_snapshot_t snap,
                      const state_t *s)
{
    const snap_case_t *c = ctx->arg;
    tacl_snapshot_stats_t st;
    uint64_t bytes = s->wbytes + s->obytes,
             want = c->replicas_of > 0
                        ? sizeof(tacl__snap_slot_t) + 4 * ((bytes + 4095) / 4096)
                        : bytes;

    COLL_CHECK_OK(ctx, tacl_snapshot_stats(snap, &st));
    COLL_CHECK(ctx, c->replicas != 2 || st.bytes_sent == want,
               "rank %d sent %llu bytes for a save, want %llu", ctx->rank,
               (unsigned long long)st.bytes_sent, (unsigned long long)want);
    return 0;
}

/*
 * The newest version with differ_rank's state off by a byte: the save
 * fails on every rank, the two replicas naming each other, the region
 * and the version; the previous version stays the latest.
 */
static int save_differs(coll_ctx_t *ctx, tacl_snapshot_t snap, state_t *s)
{
    const snap_case_t *c = ctx->arg;
    int twin = (c->differ_rank + c->replicas_of) % ctx->nranks, found;
    char want[96];
    uint64_t latest;
    tacl_status_t st;

    if (ctx->rank == c->differ_rank)
        s->optim[20000] ^= 1;
    st = tacl_snapshot_save(snap, VERSIONS);
    snprintf(want, sizeof(want),
             "ranks %d and %d are declared replicas but differ at version "
             "%d in region 'optim'",
             c->differ_rank < twin ? c->differ_rank : twin,
             c->differ_rank < twin ? twin : c->differ_rank,
             VERSIONS);
    COLL_CHECK(ctx, st != TACL_OK, "a save of differing replicas passed");
    if (ctx->rank == c->differ_rank || ctx->rank == twin)
        COLL_CHECK(ctx, strstr(tacl_last_error(), want) != NULL,
                   "message: %s", tacl_last_error());
    COLL_CHECK_OK(ctx, tacl_snapshot_latest(snap, &found, &latest));
    COLL_CHECK(ctx, found && latest == VERSIONS - 1, "latest %llu",
               (unsigned long long)latest);
    return 0;
}

static int body_save(coll_ctx_t *ctx)
{
    const snap_case_t *c = ctx->arg;
    tacl_snapshot_t snap;
    state_t s;
    uint64_t latest;
    int found;

    if (join(ctx, c) != 0)
        return 1;
    if (open_set(ctx, c, &s, &snap) != 0)
        return 1;
    for (uint64_t v = 1; v <= VERSIONS; v++) {
        tacl_request_t req;

        fill(&s, who(ctx), v);
        if (!c->nb && c->differ_rank >= 0 && v == VERSIONS) {
            if (save_differs(ctx, snap, &s) != 0)
                return 1;
            continue;
        }
        if (!c->nb) {
            COLL_CHECK_OK(ctx, tacl_snapshot_save(snap, v));
            if (sent_check(ctx, snap, &s) != 0)
                return 1;
        } else {
            /* The regions may change as soon as the call returns; the
             * previous version is reported once this save agreed it. */
            COLL_CHECK_OK(ctx, tacl_snapshot_save_nb(snap, v, &req));
            fill(&s, who(ctx), 1000 + v);
            COLL_CHECK_OK(ctx, tacl_request_wait(req));
            COLL_CHECK_OK(ctx, tacl_request_free(req));
        }
        COLL_CHECK_OK(ctx, tacl_snapshot_latest(snap, &found, &latest));
        COLL_CHECK(ctx,
                   c->nb ? found == (v > 1) && latest == v - 1
                         : found && latest == v,
                   "latest %llu (found %d) after saving %llu",
                   (unsigned long long)latest, found, (unsigned long long)v);
    }
    COLL_CHECK(ctx,
               tacl_snapshot_register(snap, "late", s.optim, 1) ==
                   TACL_ERR_INVALID_USAGE,
               "a region registered after the first save is refused");
    if (!c->nb)
        COLL_CHECK(ctx, tacl_snapshot_save(snap, 2) == TACL_ERR_INVALID_ARG,
                   "an older version is refused");
    /* The training goes on past the snapshot, then dies. */
    fill(&s, who(ctx), 99);
    COLL_CHECK_OK(ctx, tacl_barrier(ctx->comm, NULL));
    /* Nobody leaves before every rank is past the barrier: a peer still
     * in it would take a death or a departure for the barrier's failure. */
    __atomic_fetch_add((int *)ctx->scratch, 1, __ATOMIC_SEQ_CST);
    while (__atomic_load_n((int *)ctx->scratch, __ATOMIC_SEQ_CST) <
           ctx->nranks)
        coll_sleep_ms(1);
    if (ctx->rank == c->kill_rank)
        raise(SIGKILL);
    if (c->kill_rank < 0)
        COLL_CHECK_OK(ctx, tacl_snapshot_destroy(snap, 0));
    return 0;
}

/* This rank's stores vanish if c says so, as a dead node's memory. */
static void lose_stores(coll_ctx_t *ctx, const snap_case_t *c)
{
    if (c->lose & (1 << ctx->rank))
        for (int src = 0; src < ctx->nranks; src++)
            tacl__snap_store_unlink(c->key, ctx->rank, src);
    if (c->lose_own & (1 << ctx->rank))
        tacl__snap_store_unlink(c->key, ctx->rank, ctx->rank);
}

/* Damage rank source's newest version in this rank's copy of it. */
static int corrupt_copy(coll_ctx_t *ctx, const snap_case_t *c, int source)
{
    tacl__snap_store_t *st;
    int slot;

    COLL_CHECK_OK(ctx, tacl__snap_store_open(c->key, ctx->rank, source, 0,
                                             0, &st));
    slot = tacl__snap_store_find(st, VERSIONS);
    COLL_CHECK(ctx, slot >= 0,
               "rank %d holds no copy of rank %d's version "
               "%d",
               ctx->rank, source, VERSIONS);
    tacl__snap_store_data(st, slot)[3000] ^= 0x40;
    tacl__snap_store_close(st, 0);
    return 0;
}

/*
 * The last restore's breakdown (tacl_snapshot_stats): every phase within
 * the whole, and the bytes fetched this rank's state times fetches: once
 * when it lost its stores, twice when the first copy fetched was damaged
 * (the restore verifies what it fetched, then falls back), else none.
 */
static int restore_stats_check(coll_ctx_t *ctx, tacl_snapshot_t snap,
                               const state_t *s, int fetches)
{
    tacl_snapshot_stats_t st;
    uint64_t want = (uint64_t)fetches * (s->wbytes + s->obytes);
    double phases[] = {0, 0, 0, 0, 0, 0, 0}, sum = 0;

    COLL_CHECK_OK(ctx, tacl_snapshot_stats(snap, &st));
    phases[0] = st.restore_inventory_seconds;
    phases[1] = st.restore_gather_seconds;
    phases[2] = st.restore_header_seconds;
    phases[3] = st.restore_fetch_seconds;
    phases[4] = st.restore_verify_seconds;
    phases[5] = st.restore_agree_seconds;
    phases[6] = st.restore_write_seconds;
    for (int i = 0; i < 7; i++) {
        COLL_CHECK(ctx, phases[i] >= 0, "restore phase %d took %g s", i,
                   phases[i]);
        sum += phases[i];
    }
    COLL_CHECK(ctx, st.restore_seconds > 0 && sum <= st.restore_seconds,
               "restore phases %.6f s against the whole %.6f s", sum,
               st.restore_seconds);
    COLL_CHECK(ctx, st.restore_bytes_fetched == want,
               "rank %d fetched %llu bytes, want %llu", ctx->rank,
               (unsigned long long)st.restore_bytes_fetched,
               (unsigned long long)want);
    return 0;
}

static int body_restore(coll_ctx_t *ctx)
{
    const snap_case_t *c = ctx->arg;
    tacl_snapshot_t snap;
    state_t s;
    uint64_t version = 0;
    int found = 0;
    uint64_t want = c->corrupt_from >= 0 || c->differ_rank >= 0
                        ? VERSIONS - 1
                        : VERSIONS;

    if (join(ctx, c) != 0)
        return 1;
    lose_stores(ctx, c);
    if (ctx->rank == c->corrupt_from && corrupt_copy(ctx, c, 1) != 0)
        return 1;
    if (ctx->rank == c->corrupt_own && corrupt_copy(ctx, c, ctx->rank) != 0)
        return 1;
    COLL_CHECK_OK(ctx, tacl_barrier(ctx->comm, NULL));
    if (open_set(ctx, c, &s, &snap) != 0)
        return 1;
    COLL_CHECK_OK(ctx, tacl_snapshot_restore(snap, &found, &version));
    COLL_CHECK(ctx, found && version == want,
               "found %d version %llu, want "
               "%llu",
               found, (unsigned long long)version, (unsigned long long)want);
    COLL_CHECK(ctx, matches(&s, who(ctx), want),
               "rank %d's bytes differ "
               "from version %llu",
               ctx->rank, (unsigned long long)want);
    if (restore_stats_check(ctx, snap, &s,
                            (((c->lose | c->lose_own) >> ctx->rank) & 1) *
                                    (c->corrupt_from >= 0 ? 2 : 1) +
                                (ctx->rank == c->corrupt_own)) != 0)
        return 1;
    /* Saving goes on from the restored version, and so does a restore. */
    fill(&s, who(ctx), want + 1);
    COLL_CHECK_OK(ctx, tacl_snapshot_save(snap, want + 1));
    fill(&s, who(ctx), 0);
    COLL_CHECK_OK(ctx, tacl_snapshot_restore(snap, &found, &version));
    COLL_CHECK(ctx,
               found && version == want + 1 &&
                   matches(&s, who(ctx), want + 1),
               "the second restore got version %llu",
               (unsigned long long)version);
    /* Every store holds that version now: nothing is fetched. */
    if (restore_stats_check(ctx, snap, &s, 0) != 0)
        return 1;
    COLL_CHECK_OK(ctx, tacl_snapshot_destroy(snap, 1));
    free(s.weights);
    free(s.optim);
    return 0;
}

/* The restore must fail on every rank; expect names what the failing
 * rank's message must contain. */
static int body_restore_fails(coll_ctx_t *ctx)
{
    const snap_case_t *c = ctx->arg;
    tacl_snapshot_t snap;
    state_t s;
    uint64_t version;
    int found;
    tacl_status_t st;
    const char *msg;

    lose_stores(ctx, c);
    COLL_CHECK_OK(ctx, tacl_barrier(ctx->comm, NULL));
    if (open_set(ctx, c, &s, &snap) != 0)
        return 1;
    st = tacl_snapshot_restore(snap, &found, &version);
    msg = tacl_last_error();
    COLL_CHECK(ctx, st != TACL_OK, "the restore passed");
    if (c->grow_rank >= 0 && ctx->rank == c->grow_rank)
        COLL_CHECK(ctx,
                   strstr(msg, "rank 2 version 3") != NULL &&
                       strstr(msg, "'optim' of 70000 bytes") != NULL,
                   "message: %s", msg);
    else if (c->grow_rank >= 0)
        COLL_CHECK(ctx, strstr(msg, "failed on rank 2") != NULL,
                   "message: %s", msg);
    else
        COLL_CHECK(ctx, strstr(msg, "placement group (ranks 0, 1)") != NULL,
                   "message: %s", msg);
    for (size_t i = 0; i < s.obytes && c->grow_rank < 0; i++)
        COLL_CHECK(ctx, s.optim[i] == 0,
                   "a failed restore wrote rank %d's "
                   "regions",
                   ctx->rank);
    COLL_CHECK_OK(ctx, tacl_snapshot_destroy(snap, 0));
    free(s.weights);
    free(s.optim);
    return 0;
}

static void purge_all(const snap_case_t *c)
{
    for (int h = 0; h < NRANKS; h++)
        for (int s = 0; s < NRANKS; s++)
            tacl__snap_store_unlink(c->key, h, s);
}

/* Save in one run, restore (or fail to) in another. */
static void run_case(snap_case_t *c, const char *tag, coll_body_t restore)
{
    coll_opts_t opts = {.nranks = NRANKS,
                        .deadline_s = 60,
                        .arg = c,
                        .destroy_may_fail = c->kill_rank >= 0,
                        .init = c->nodes > 0 ? COLL_INIT_MANUAL
                                             : COLL_INIT_AUTO};
    static coll_result_t saved, restored;

    snprintf(c->key, sizeof(c->key), "t%d-%s", (int)getpid(), tag);
    purge_all(c);
    c->restoring = 0;
    coll_run(&opts, body_save, &saved);
    opts.destroy_may_fail = 0;
    opts.nranks = c->restore_ranks > 0 ? c->restore_ranks : NRANKS;
    c->restoring = 1;
    coll_run(&opts, restore, &restored);
    purge_all(c);
    coll_expect_pass_but(&saved, c->kill_rank, SIGKILL);
    coll_expect_pass(&restored);
}

/* A case: copies, the ranks whose stores vanish, the rank damaging rank
 * 1's copy, the rank killed after saving (-1: none). */
static snap_case_t case_of(int replicas, int lose, int corrupt_from,
                           int kill_rank)
{
    return (snap_case_t){.replicas = replicas,
                         .lose = lose,
                         .corrupt_from = corrupt_from,
                         .corrupt_own = -1,
                         .grow_rank = -1,
                         .differ_rank = -1,
                         .kill_rank = kill_rank};
}

Test(snapshot, restart_restores_newest, .timeout = 120)
{
    snap_case_t c = case_of(2, 0, -1, 1);

    run_case(&c, "restart", body_restore);
}

/* Non-blocking saves: the newest one, never agreed before the kill, is
 * what the restore finds, and a rank without its stores fetches it. */
Test(snapshot, nonblocking_saves_restore, .timeout = 120)
{
    snap_case_t c = case_of(2, 1 << 2, -1, 1);

    c.nb = 1;
    run_case(&c, "nb", body_restore);
}

Test(snapshot, lost_stores_fetched_from_peer, .timeout = 120)
{
    snap_case_t c = case_of(2, 1 << 1, -1, 1);

    run_case(&c, "lost", body_restore);
}

Test(snapshot, three_copies_ring_two_lost, .timeout = 120)
{
    /* m = 3 on 4 ranks: mixed placement (a ring of all four). */
    snap_case_t c = case_of(3, (1 << 1) | (1 << 2), -1, -1);

    run_case(&c, "ring", body_restore);
}

Test(snapshot, damaged_copy_falls_back, .timeout = 120)
{
    /* Group placement: rank 0 holds rank 1's only other copy. */
    snap_case_t c = case_of(2, 1 << 1, 0, -1);

    run_case(&c, "damaged", body_restore);
}

/* m = 3 on 4 ranks (a ring of all four): ranks 0 and 1 lose their own
 * states only, so rank 1 sends rank 0's copy while it fetches its own
 * from rank 2 in the same exchange. */
Test(snapshot, fetching_rank_also_sends, .timeout = 120)
{
    snap_case_t c = case_of(3, 0, -1, -1);

    c.lose_own = (1 << 0) | (1 << 1);
    run_case(&c, "both", body_restore);
}

/* A rank's own newest copy damaged: it is found before any region is
 * written, and the rank fetches that version from its peer instead. */
Test(snapshot, damaged_own_copy_fetched_from_peer, .timeout = 120)
{
    snap_case_t c = case_of(2, 0, -1, -1);

    c.corrupt_own = 1;
    run_case(&c, "own", body_restore);
}

/* Two emulated nodes of two ranks, node domain: every copy lives on the
 * other node (same local rank), so losing a whole node loses nothing. */
Test(snapshot, node_domain_survives_a_lost_node, .timeout = 180)
{
    snap_case_t c = case_of(2, (1 << 2) | (1 << 3), -1, 3);

    c.nodes = 2;
    run_case(&c, "node", body_restore);
}

/* Ranks 0 and 2, and 1 and 3, are replicas on two emulated nodes: a
 * save sends headers and CRCs only, and the lost node's ranks fetch
 * their state from their replicas' own copies. */
Test(snapshot, replicas_serve_a_lost_node, .timeout = 180)
{
    snap_case_t c = case_of(2, (1 << 2) | (1 << 3), -1, 3);

    c.nodes = 2;
    c.replicas_of = 2;
    run_case(&c, "twins", body_restore);
}

/* The same in the rank domain, saving non-blocking. */
Test(snapshot, replicas_nonblocking_rank_domain, .timeout = 120)
{
    snap_case_t c = case_of(2, 1 << 1, -1, 1);

    c.nb = 1;
    c.replicas_of = 2;
    run_case(&c, "twins-nb", body_restore);
}

/* Replicas that differ fail the save, and that version is never handed
 * to the rank that lost its own: every rank restores the one before. */
Test(snapshot, replicas_that_differ_fall_back, .timeout = 180)
{
    snap_case_t c = case_of(2, (1 << 2) | (1 << 3), -1, -1);

    c.nodes = 2;
    c.replicas_of = 2;
    c.differ_rank = 0;
    run_case(&c, "twins-differ", body_restore);
}

Test(snapshot, whole_group_lost_is_named, .timeout = 120)
{
    snap_case_t c = case_of(2, (1 << 0) | (1 << 1), -1, -1);

    run_case(&c, "group", body_restore_fails);
}

Test(snapshot, region_mismatch_is_named, .timeout = 120)
{
    snap_case_t c = case_of(2, 0, -1, -1);

    c.grow_rank = 2;
    run_case(&c, "mismatch", body_restore_fails);
}

/* Snapshots of a 4-rank job, restored by 2 ranks: refused, named. */
static int body_restore_other_size(coll_ctx_t *ctx)
{
    const snap_case_t *c = ctx->arg;
    tacl_snapshot_t snap;
    state_t s;
    uint64_t version;
    int found;

    if (open_set(ctx, c, &s, &snap) != 0)
        return 1;
    COLL_CHECK(ctx,
               tacl_snapshot_restore(snap, &found, &version) ==
                   TACL_ERR_UNSUPPORTED,
               "a restore onto another size must be refused");
    COLL_CHECK(ctx, strstr(tacl_last_error(), "job of 4 ranks") != NULL,
               "message: %s", tacl_last_error());
    COLL_CHECK_OK(ctx, tacl_snapshot_destroy(snap, 0));
    free(s.weights);
    free(s.optim);
    return 0;
}

Test(snapshot, other_job_size_refused, .timeout = 120)
{
    snap_case_t c = case_of(2, 0, -1, -1);

    c.restore_ranks = 2;
    run_case(&c, "size", body_restore_other_size);
}

static int body_fresh(coll_ctx_t *ctx)
{
    snap_case_t *c = ctx->arg;
    tacl_snapshot_t snap;
    tacl_snapshot_config_t bad = {.job_key = "no/slash"};
    state_t s;
    uint64_t version = 7;
    int found = 1;

    COLL_CHECK(ctx,
               tacl_snapshot_create(ctx->comm, &bad, &snap) ==
                   TACL_ERR_INVALID_ARG,
               "a bad key is refused");
    bad = (tacl_snapshot_config_t){.job_key = "k",
                                   .replicas = 3,
                                   .placement = TACL_SNAPSHOT_PLACE_GROUP,
                                   .domain = TACL_SNAPSHOT_DOMAIN_RANK};
    COLL_CHECK(ctx,
               tacl_snapshot_create(ctx->comm, &bad, &snap) ==
                   TACL_ERR_INVALID_ARG,
               "group placement of 3 copies on 4 ranks is refused");
    /* The default domain puts copies on other nodes: one node has none. */
    bad = (tacl_snapshot_config_t){.job_key = "k"};
    COLL_CHECK(ctx,
               tacl_snapshot_create(ctx->comm, &bad, &snap) ==
                       TACL_ERR_INVALID_ARG &&
                   strstr(tacl_last_error(), "need 2 nodes") != NULL,
               "the node domain on one node is refused: %s",
               tacl_last_error());
    if (open_set(ctx, c, &s, &snap) != 0)
        return 1;
    COLL_CHECK(ctx,
               tacl_snapshot_register(snap, "weights", s.weights, 1) ==
                   TACL_ERR_INVALID_USAGE,
               "a second 'weights'");
    COLL_CHECK_OK(ctx, tacl_snapshot_restore(snap, &found, &version));
    COLL_CHECK(ctx, !found, "a fresh job found version %llu",
               (unsigned long long)version);
    COLL_CHECK_OK(ctx, tacl_snapshot_latest(snap, &found, &version));
    COLL_CHECK(ctx, !found, "latest found on a fresh set");
    COLL_CHECK(ctx,
               tacl_snapshot_replicated(snap, 0) == TACL_ERR_INVALID_USAGE &&
                   strstr(tacl_last_error(), "before its first save") != NULL,
               "replicas declared after a restore: %s", tacl_last_error());
    COLL_CHECK(ctx,
               tacl_snapshot_replicated(NULL, 0) == TACL_ERR_INVALID_ARG &&
                   tacl_snapshot_replicated(snap, -2) == TACL_ERR_INVALID_ARG,
               "a NULL set or group -2 is refused");
    COLL_CHECK_OK(ctx, tacl_snapshot_destroy(snap, 1));
    free(s.weights);
    free(s.optim);
    return 0;
}

Test(snapshot, fresh_job_finds_nothing, .timeout = 60)
{
    snap_case_t c = case_of(2, 0, -1, -1);
    coll_opts_t opts = {.nranks = NRANKS, .deadline_s = 30, .arg = &c};

    snprintf(c.key, sizeof(c.key), "t%d-fresh", (int)getpid());
    coll_run_opts_expect_pass(&opts, body_fresh);
}
