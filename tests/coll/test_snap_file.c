/*
 * The file tier of snapshots (tacl.h, tacl_snapshot_flush and
 * tacl_snapshot_restore_file): forked ranks save versions and flush them,
 * every node-local store is then purged (the whole job's memory lost),
 * and a new set restores from the files byte for byte; with memory intact
 * the newer version in memory wins over an older file; when one
 * placement group loses its memory, only its ranks read their files (the
 * others' files are gone, and the restore still succeeds from their
 * memory); a file with a flipped byte, a truncated file and files of
 * different versions each fail the restore on every rank, naming the
 * file, the rank and the version, and write nothing into the regions.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "harness.h"
#include "snap_store.h"

#define NRANKS 4
#define PARAM_BYTES 9000u
#define STEP_BYTES 8u

typedef enum {
    DAMAGE_NONE,
    DAMAGE_FLIP,     /* a byte of rank 2's data flipped */
    DAMAGE_TRUNCATE, /* rank 2's file cut short */
    DAMAGE_STALE     /* rank 1's file of an older version */
} damage_t;

typedef struct {
    char key[32];
    char dir[256];
    int keep_memory; /* restore with the stores intact */
    int lose_group;  /* only ranks 0 and 1 (a placement group) lose them */
    int others_no_file; /* ranks 2 and 3 lose their files too */
    int flush_last;  /* the newest version flushed */
    int no_file;     /* nothing flushed at all */
    int flush_nb;    /* flushed in the background, waited for after the
                        two saves that follow it */
    damage_t damage;
} file_case_t;

typedef struct {
    uint8_t param[PARAM_BYTES];
    uint64_t step;
} state_t;

static void fill(state_t *s, int rank, uint64_t version)
{
    for (size_t i = 0; i < PARAM_BYTES; i++)
        s->param[i] = (uint8_t)(i * 5 + (size_t)rank * 17 + version * 41);
    s->step = version * 100 + (uint64_t)rank;
}

static int holds(const state_t *s, int rank, uint64_t version)
{
    state_t want;

    fill(&want, rank, version);
    return memcmp(s, &want, sizeof(want)) == 0;
}

static void file_of(const file_case_t *c, int rank, char *out, size_t len)
{
    snprintf(out, len, "%s/rank%d.snap", c->dir, rank);
}

static int open_set(coll_ctx_t *ctx, const file_case_t *c, state_t *s,
                    tacl_snapshot_t *snap_p)
{
    tacl_snapshot_config_t cfg = {.domain = TACL_SNAPSHOT_DOMAIN_RANK,
                                  .staging_bytes = 4096,
                                  .staging_parts = 4,
                                  .job_key = c->key};

    COLL_CHECK_OK(ctx, tacl_snapshot_create(ctx->comm, &cfg, snap_p));
    COLL_CHECK_OK(ctx, tacl_snapshot_register(*snap_p, "param", s->param,
                                              PARAM_BYTES));
    COLL_CHECK_OK(ctx, tacl_snapshot_register(*snap_p, "step", &s->step,
                                              STEP_BYTES));
    return 0;
}

/* Damage this rank's file as c says. */
static int damage(coll_ctx_t *ctx, const file_case_t *c, const char *path)
{
    FILE *f;

    if (c->damage == DAMAGE_FLIP && ctx->rank == 2) {
        int b;

        f = fopen(path, "r+b");
        COLL_CHECK(ctx, f != NULL, "open %s", path);
        /* Past the header and CRCs: inside the parameter data. */
        fseek(f, -1000, SEEK_END);
        b = fgetc(f);
        fseek(f, -1000, SEEK_END);
        fputc(b ^ 0x10, f);
        fclose(f);
    }
    if (c->damage == DAMAGE_TRUNCATE && ctx->rank == 2)
        COLL_CHECK(ctx, truncate(path, 5000) == 0, "truncate %s", path);
    return 0;
}

static int body(coll_ctx_t *ctx)
{
    const file_case_t *c = ctx->arg;
    tacl_snapshot_t snap;
    tacl_request_t flush = NULL;
    state_t s;
    char path[300];
    uint64_t version = 0;
    int found = 0, fails = c->damage != DAMAGE_NONE;
    tacl_status_t st;

    file_of(c, ctx->rank, path, sizeof(path));
    if (open_set(ctx, c, &s, &snap) != 0)
        return 1;
    COLL_CHECK(ctx,
               tacl_snapshot_flush(snap, 1, path) == TACL_ERR_INVALID_ARG &&
                   strstr(tacl_last_error(), "version 1") != NULL,
               "flushing an unsaved version is refused: %s",
               tacl_last_error());
    COLL_CHECK(ctx,
               tacl_snapshot_flush(snap, 1, NULL) == TACL_ERR_INVALID_ARG,
               "a NULL path is refused");
    COLL_CHECK(ctx,
               tacl_snapshot_restore_file(snap, path, NULL, &version) ==
                   TACL_ERR_INVALID_ARG,
               "a NULL found_p is refused");
    /* A rank without a path where the others have one is named. */
    COLL_CHECK(ctx,
               tacl_snapshot_restore_file(snap, ctx->rank == 3 ? NULL : path,
                                          &found,
                                          &version) == TACL_ERR_INVALID_ARG &&
                   strstr(tacl_last_error(), "rank 3 passed no path") != NULL,
               "a path on some ranks only: %s", tacl_last_error());
    COLL_CHECK(ctx,
               tacl_snapshot_flush_nb(snap, 1, path, NULL) ==
                       TACL_ERR_INVALID_ARG &&
                   tacl_snapshot_flush_nb(snap, 1, path, &flush) ==
                       TACL_ERR_INVALID_ARG &&
                   strstr(tacl_last_error(), "version 1") != NULL,
               "a background flush of nothing, or with no request, is "
               "refused: %s",
               tacl_last_error());
    for (uint64_t v = 1; v <= 3; v++) {
        tacl_request_t req;

        fill(&s, ctx->rank, v);
        COLL_CHECK_OK(ctx, tacl_snapshot_save_nb(snap, v, &req));
        /* The own copy is committed already: flushing may overlap. */
        if (!c->no_file && v == (c->damage == DAMAGE_STALE && ctx->rank == 1
                                     ? 2u
                                     : (uint64_t)c->flush_last)) {
            if (c->flush_nb)
                COLL_CHECK_OK(ctx,
                              tacl_snapshot_flush_nb(snap, v, path, &flush));
            else
                COLL_CHECK_OK(ctx, tacl_snapshot_flush(snap, v, path));
        }
        COLL_CHECK_OK(ctx, tacl_request_wait(req));
        COLL_CHECK_OK(ctx, tacl_request_free(req));
    }
    /* Versions 2 and 3 were saved meanwhile, 3 into the slot the flush
     * reads (that save waited for it if it still ran): the file holds 1. */
    if (flush != NULL) {
        COLL_CHECK_OK(ctx, tacl_request_wait(flush));
        COLL_CHECK_OK(ctx, tacl_request_free(flush));
    }
    fill(&s, ctx->rank, 99);
    /* With purge, every store goes: the job's memory is lost. */
    COLL_CHECK_OK(ctx, tacl_snapshot_destroy(snap, c->lose_group
                                                       ? ctx->rank < 2
                                                       : !c->keep_memory));
    if (!c->no_file && damage(ctx, c, path) != 0)
        return 1;
    if (c->others_no_file && ctx->rank >= 2)
        COLL_CHECK(ctx, unlink(path) == 0, "unlink %s", path);
    memset(&s, 0, sizeof(s));
    COLL_CHECK_OK(ctx, tacl_barrier(ctx->comm, NULL));
    if (open_set(ctx, c, &s, &snap) != 0)
        return 1;
    st = tacl_snapshot_restore_file(snap, path, &found, &version);
    if (fails) {
        const char *msg = tacl_last_error();
        int named = c->damage == DAMAGE_STALE
                        ? strstr(msg, "different versions") != NULL &&
                              strstr(msg, "rank 1 version 2") != NULL
                        : ctx->rank != 2 ||
                              (strstr(msg, "rank2.snap") != NULL &&
                               strstr(msg, "rank 2") != NULL &&
                               strstr(msg, "version 3") != NULL);
        state_t zero;

        memset(&zero, 0, sizeof(zero));
        COLL_CHECK(ctx, st != TACL_OK, "a damaged file was restored");
        COLL_CHECK(ctx, named, "rank %d's message: %s", ctx->rank, msg);
        if (c->damage == DAMAGE_FLIP && ctx->rank == 2)
            COLL_CHECK(ctx,
                       strstr(msg, "'param'") != NULL &&
                           strstr(msg, "checksum") != NULL,
                       "the flipped byte's region is named: %s", msg);
        COLL_CHECK(ctx, memcmp(&s, &zero, sizeof(s)) == 0,
                   "a failed restore wrote rank %d's regions", ctx->rank);
    } else if (c->no_file) {
        COLL_CHECK_OK(ctx, st);
        COLL_CHECK(ctx, !found, "nothing saved, yet version %llu found",
                   (unsigned long long)version);
    } else {
        uint64_t want = c->keep_memory ? 3 : (uint64_t)c->flush_last;

        COLL_CHECK_OK(ctx, st);
        COLL_CHECK(ctx, found && version == want,
                   "found %d version %llu, want %llu", found,
                   (unsigned long long)version, (unsigned long long)want);
        COLL_CHECK(ctx, holds(&s, ctx->rank, want),
                   "rank %d's bytes differ from version %llu", ctx->rank,
                   (unsigned long long)want);
        /* Saving goes on after a restore from the file. */
        fill(&s, ctx->rank, want + 1);
        COLL_CHECK_OK(ctx, tacl_snapshot_save(snap, want + 1));
        COLL_CHECK_OK(ctx, tacl_snapshot_latest(snap, &found, &version));
        COLL_CHECK(ctx, found && version == want + 1, "latest %llu",
                   (unsigned long long)version);
    }
    COLL_CHECK_OK(ctx, tacl_snapshot_destroy(snap, 1));
    if (!c->no_file)
        unlink(path);
    return 0;
}

static void run_case(file_case_t *c, const char *tag)
{
    const char *tmp = getenv("TMPDIR");
    coll_opts_t opts = {.nranks = NRANKS, .deadline_s = 60, .arg = c};
    static coll_result_t res;
    char path[300];
    int left;

    snprintf(c->key, sizeof(c->key), "f%d-%s", (int)getpid(), tag);
    snprintf(c->dir, sizeof(c->dir), "%s/tacl-snapfile-XXXXXX",
             tmp != NULL && tmp[0] != '\0' ? tmp : P_tmpdir);
    cr_assert_not_null(mkdtemp(c->dir));
    coll_run(&opts, body, &res);
    /* A failed rank leaves its stores and file behind: none may
     * outlive the test. */
    for (int h = 0; h < NRANKS; h++)
        for (int s = 0; s < NRANKS; s++)
            tacl__snap_store_unlink(c->key, h, s);
    for (int r = 0; r < NRANKS; r++) {
        file_of(c, r, path, sizeof(path));
        unlink(path);
    }
    left = rmdir(c->dir);
    coll_expect_pass(&res);
    cr_assert_eq(left, 0, "the folder held more than the ranks' files");
}

Test(snap_file, memory_lost_restores_from_file, .timeout = 120)
{
    file_case_t c = {.flush_last = 2};

    run_case(&c, "lost");
}

Test(snap_file, background_flush_restores_from_file, .timeout = 120)
{
    file_case_t c = {.flush_last = 1, .flush_nb = 1};

    run_case(&c, "bgflush");
}

Test(snap_file, lost_group_falls_back_to_file, .timeout = 120)
{
    file_case_t c = {.flush_last = 2, .lose_group = 1};

    run_case(&c, "group");
}

/* Ranks 2 and 3 still hold version 2 in memory: they must not need the
 * files they lost; ranks 0 and 1 read theirs. */
Test(snap_file, lost_group_alone_reads_files, .timeout = 120)
{
    file_case_t c = {.flush_last = 2, .lose_group = 1, .others_no_file = 1};

    run_case(&c, "alone");
}

Test(snap_file, memory_first, .timeout = 120)
{
    file_case_t c = {.flush_last = 2, .keep_memory = 1};

    run_case(&c, "memfirst");
}

Test(snap_file, flipped_byte_is_named, .timeout = 120)
{
    file_case_t c = {.flush_last = 3, .damage = DAMAGE_FLIP};

    run_case(&c, "flip");
}

Test(snap_file, truncated_file_is_named, .timeout = 120)
{
    file_case_t c = {.flush_last = 3, .damage = DAMAGE_TRUNCATE};

    run_case(&c, "trunc");
}

Test(snap_file, files_of_different_versions, .timeout = 120)
{
    file_case_t c = {.flush_last = 3, .damage = DAMAGE_STALE};

    run_case(&c, "stale");
}

Test(snap_file, nothing_saved_finds_nothing, .timeout = 120)
{
    file_case_t c = {.flush_last = 3, .no_file = 1};

    run_case(&c, "none");
}
