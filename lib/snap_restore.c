/*
 * Restoring a snapshot set (tacl.h, tacl_snapshot_restore and
 * tacl_snapshot_restore_file).
 *
 * Every rank lists the versions it holds intact, its own and those it
 * keeps for peers (a copy failing its checks is left out, its message
 * naming rank, region and version), and, when restoring with files, the
 * version its own file holds (only the header is read here).  The lists
 * are all-gathered, so every rank decides the same thing alone: the
 * newest version that every rank's state has somewhere, in a peer's
 * memory or in its own file.  A rank lacking it locally (a replaced
 * node, a purged or damaged store) receives it from its first holder
 * that has it, and only a rank whose state survives in no memory reads
 * its file: a lost placement group costs the file tier its own ranks'
 * reads, not the whole job's (the thesis' section 6.3: peers' memory
 * first, the persistent tier for what it lost).  A rank whose state
 * survives nowhere fails the restore with the holders named, never a
 * partial load.  The ranks agree that every rank has the version before
 * any writes it into its regions, checked against their layout, and
 * then that every rank did.
 *
 * That careful restore is the second attempt.  The first lists copies by
 * their headers and verifies only those the chosen version uses, as they
 * are used (restore_attempt), so an intact set of copies costs no pass
 * over every slot before the first byte moves; anything it finds wrong
 * sends every rank alike to the careful one before a region is written.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm.h"
#include "log.h"
#include "snapshot.h"

/* One intact stored version: rank source's state at version. */
typedef struct {
    int64_t source; /* -1: an unused entry; SOURCE_OTHER_SIZE: below */
    uint64_t version;
    uint64_t matched; /* the own copy matched its replicas' at the save */
} inv_entry_t;

/* inv_entry_t in 64-bit words, as it is all-gathered. */
#define INV_WORDS 3
_Static_assert(sizeof(inv_entry_t) == INV_WORDS * sizeof(uint64_t),
               "inventory entries are all-gathered as 64-bit words");

/* An entry saying a copy was saved by a job of `version` ranks, not this
 * communicator's size. */
#define SOURCE_OTHER_SIZE (-2)

/* A rank's last entry says what its file offers: its version (FILE), no
 * usable file though it passed a path (-1), or no path (NO_PATH). */
#define SOURCE_FILE (-3)
#define SOURCE_NO_PATH (-4)

/* provider()'s answer for a state that only its own file holds. */
#define FROM_FILE (-2)

/* The list of one rank: per memory entries, then its file's entry. */
typedef struct {
    int per;      /* memory entries a rank */
    int stride;   /* entries a rank: per + 1 */
    const char *path;
} inv_shape_t;

/* How many ranks' states rank r keeps, the most over all ranks. */
static int max_held(const struct tacl_snapshot *snap)
{
    int most = 0;

    for (int r = 0; r < snap->size; r++) {
        int n = 0;

        for (int s = 0; s < snap->size; s++)
            for (int j = 0; j < snap->m; j++)
                n += tacl__snap_holder(snap, s, j) == r;
        most = TACL_MAX(most, n);
    }
    return most;
}

/* This rank's intact versions into mine (room for per entries): with
 * full every chunk checked, else the headers only. */
static void inventory(struct tacl_snapshot *snap, inv_entry_t *mine, int per,
                      int full)
{
    int n = 0;

    for (int i = 0; i < per; i++)
        mine[i] = (inv_entry_t){.source = -1};
    for (int s = 0; s < snap->size; s++) {
        /* A replica's copy is its holder's own: no store of it here. */
        if (!tacl__snap_holds(snap, s) ||
            (s != snap->rank && tacl__snap_shared(snap, s)))
            continue;
        if (snap->stores[s] == NULL &&
            tacl__snap_store_open(snap->key, snap->rank, s, 0, 0,
                                  &snap->stores[s]) != TACL_OK)
            continue;
        for (int slot = 0; slot < TACL__SNAP_SLOTS && n < per; slot++) {
            const tacl__snap_slot_t *d =
                tacl__snap_store_slot(snap->stores[s], slot);

            if (d->state == TACL__SNAP_EMPTY)
                continue;
            if ((full ? tacl__snap_store_verify(snap->stores[s], slot)
                      : tacl__snap_store_verify_header(snap->stores[s],
                                                       slot)) != TACL_OK) {
                TACL_INFO(COLL,
                          "snapshot restore: rank %d skips its copy of rank "
                          "%d's version %llu: %s",
                          snap->rank, s, (unsigned long long)d->version,
                          tacl_last_error());
                continue;
            }
            if (d->nranks != (uint32_t)snap->size) {
                /* Another size of job: placed otherwise, not restorable
                 * here; every rank must hear of it (SOURCE_OTHER_SIZE). */
                mine[n++] = (inv_entry_t){.source = SOURCE_OTHER_SIZE,
                                          .version = d->nranks};
                continue;
            }
            mine[n++] = (inv_entry_t){
                .source = s,
                .version = d->version,
                .matched = s == snap->rank &&
                           tacl__snap_store_matched(snap->stores[s], slot)};
        }
    }
}

/* Whether entry e of holder h offers copy j of rank s's state: a copy
 * of s's, or for replicas h's own copy, matched at its save. */
static int holds_for(const struct tacl_snapshot *snap, const inv_entry_t *e,
                     int s, int j, int h)
{
    if (j == 0 || !tacl__snap_shared(snap, s))
        return e->source == s;
    return e->source == h && e->matched;
}

/* The rank holding s's state at version in memory, preferring s itself
 * and then its holders in order; else FROM_FILE when s's own file holds
 * it; -1 if none. */
static int provider(const struct tacl_snapshot *snap, const inv_entry_t *all,
                    const inv_shape_t *sh, int s, uint64_t version)
{
    const inv_entry_t *file = &all[s * sh->stride + sh->per];

    for (int j = 0; j < snap->m; j++) {
        int h = tacl__snap_holder(snap, s, j);

        for (int i = 0; i < sh->per; i++)
            if (holds_for(snap, &all[h * sh->stride + i], s, j, h) &&
                all[h * sh->stride + i].version == version)
                return h;
    }
    return file->source == SOURCE_FILE && file->version == version
               ? FROM_FILE
               : -1;
}

/* Whether any entry offers rank s's state, in memory or its file. */
static int offered(const struct tacl_snapshot *snap, const inv_entry_t *all,
                   const inv_shape_t *sh, int s)
{
    for (int r = 0; r < snap->size; r++)
        for (int i = 0; i < sh->per; i++)
            if (all[r * sh->stride + i].source == s)
                return 1;
    for (int j = 1; j < snap->m; j++) {
        int h = tacl__snap_holder(snap, s, j);

        for (int i = 0; i < sh->per; i++)
            if (holds_for(snap, &all[h * sh->stride + i], s, j, h))
                return 1;
    }
    return all[s * sh->stride + sh->per].source == SOURCE_FILE;
}

/* The error for no complete version: when the files hold different
 * versions, the first two that differ are named. */
static tacl_status_t none_complete(const struct tacl_snapshot *snap,
                                   const inv_entry_t *all,
                                   const inv_shape_t *sh)
{
    const inv_entry_t *first = NULL;

    for (int r = 0; r < snap->size; r++) {
        const inv_entry_t *f = &all[r * sh->stride + sh->per];

        if (f->source != SOURCE_FILE)
            continue;
        if (first == NULL) {
            first = f;
        } else if (f->version != first->version) {
            return tacl__error(
                TACL_ERR_INTERNAL, COLL,
                "snapshot restore: no version is complete in peer memory "
                "and the files, and the files hold different versions "
                "(rank %d version %llu, rank %d version %llu); flush one "
                "version on every rank",
                (int)((first - all) / sh->stride),
                (unsigned long long)first->version, r,
                (unsigned long long)f->version);
        }
    }
    return tacl__error(TACL_ERR_INTERNAL, COLL,
                       "snapshot restore: no version survives intact for "
                       "every rank (the ranks hold copies of different "
                       "versions)%s",
                       sh->path != NULL ? ", in memory or in the files"
                                        : "; restore from a file checkpoint");
}

/* The newest version every rank's state has somewhere (*version_p), or
 * the error naming a rank whose state survives nowhere. */
static tacl_status_t choose(const struct tacl_snapshot *snap,
                            const inv_entry_t *all, const inv_shape_t *sh,
                            uint64_t *version_p)
{
    int total = snap->size * sh->stride, found = 0;
    uint64_t best = 0;

    for (int s = 0; s < snap->size; s++) {
        char where[256];
        size_t used = 0;

        if (offered(snap, all, sh, s))
            continue;
        where[0] = '\0';
        for (int j = 0; j < snap->m && used < sizeof(where); j++)
            used += (size_t)snprintf(where + used, sizeof(where) - used,
                                     "%s%d", j > 0 ? ", " : "",
                                     tacl__snap_holder(snap, s, j));
        return tacl__error(
            TACL_ERR_INTERNAL, COLL,
            "snapshot restore: no intact copy of rank %d's state survives: "
            "its placement group (ranks %s) lost every copy%s",
            s, where,
            sh->path != NULL ? ", and its file offers none"
                             : "; restore from a file checkpoint");
    }
    /* Candidates newest first: any version some rank holds or a file. */
    for (int i = 0; i < total; i++) {
        int complete = (all[i].source >= 0 || all[i].source == SOURCE_FILE) &&
                       (!found || all[i].version > best);

        for (int s = 0; s < snap->size && complete; s++)
            complete = provider(snap, all, sh, s, all[i].version) != -1;
        if (complete) {
            best = all[i].version;
            found = 1;
        }
    }
    if (!found)
        return none_complete(snap, all, sh);
    *version_p = best;
    return TACL_OK;
}

tacl_status_t tacl__snap_write_regions(struct tacl_snapshot *snap,
                                      uint64_t version)
{
    tacl__snap_store_t *st = snap->stores[snap->rank];
    int slot = st != NULL ? tacl__snap_store_find(st, version) : -1;
    const tacl__snap_slot_t *d;
    const uint8_t *data;

    if (slot < 0)
        return tacl__error(TACL_ERR_INTERNAL, COLL,
                           "snapshot restore: rank %d has no copy of its "
                           "version %llu after the exchange",
                           snap->rank, (unsigned long long)version);
    d = tacl__snap_store_slot(st, slot);
    data = tacl__snap_store_data(st, slot);
    for (int i = 0; i < snap->nregions || i < (int)d->nregions; i++) {
        const tacl__snap_user_region_t *r = &snap->regions[i];

        if (i >= snap->nregions || i >= (int)d->nregions ||
            strcmp(r->name, d->regions[i].name) != 0 ||
            r->bytes != d->regions[i].bytes)
            return tacl__error(
                TACL_ERR_INVALID_USAGE, COLL,
                "snapshot restore: rank %d version %llu does not match the "
                "registered regions: region %d is '%.47s' of %llu bytes in "
                "the snapshot, '%s' of %llu bytes registered",
                snap->rank, (unsigned long long)version, i,
                i < (int)d->nregions ? d->regions[i].name : "(none)",
                (unsigned long long)(i < (int)d->nregions
                                         ? d->regions[i].bytes
                                         : 0),
                i < snap->nregions ? r->name : "(none)",
                (unsigned long long)(i < snap->nregions ? r->bytes : 0));
    }
    for (int i = 0; i < snap->nregions; i++) {
        memcpy(snap->regions[i].ptr, data, snap->regions[i].bytes);
        data += snap->regions[i].bytes;
    }
    return TACL_OK;
}

/* Who sends whom what, the same on every rank; then the exchange. */
/* Every rank gets version into its own store: from memory (its own, or
 * its first holder's), or, only where no memory holds it, its file. */
static tacl_status_t fetch(struct tacl_snapshot *snap, const inv_entry_t *all,
                           const inv_shape_t *sh, uint64_t version, int full,
                           int *damaged_p)
{
    tacl__snap_send_t *sends = calloc((size_t)snap->size, sizeof(*sends));
    tacl__snap_recv_t recv = {.damaged = 0};
    int nsends = 0, nrecvs = 0, from_file = 0, own = 0;
    tacl_status_t status;

    if (sends == NULL)
        return tacl__error(TACL_ERR_NO_MEMORY, COLL,
                           "snapshot restore: out of memory");
    for (int s = 0; s < snap->size; s++) {
        int from = provider(snap, all, sh, s, version);

        own |= from == s && s == snap->rank;
        if (from == s)
            continue;
        if (from == FROM_FILE) {
            from_file += s == snap->rank;
            continue;
        }
        if (from == snap->rank) {
            /* A replica's copy is this rank's own. */
            tacl__snap_store_t *st =
                snap->stores[tacl__snap_shared(snap, s) ? snap->rank : s];

            sends[nsends++] = (tacl__snap_send_t){
                .peer = s, .st = st, .slot = tacl__snap_store_find(st, version)};
        }
        if (s == snap->rank) {
            recv = (tacl__snap_recv_t){.peer = from, .source = s};
            nrecvs = 1;
            TACL_INFO(COLL,
                      "snapshot restore: rank %d fetches its version %llu "
                      "from rank %d",
                      s, (unsigned long long)version, from);
        }
    }
    status = tacl__snap_move(snap, sends, nsends, &recv, nrecvs, "restore",
                             version);
    free(sends);
    *damaged_p = recv.damaged;
    if (status == TACL_OK && own && !full) {
        /* The quick attempt's own copy, checked while peers check what
         * they fetched. */
        uint64_t t = tacl__now_ns();
        tacl__snap_store_t *mine = snap->stores[snap->rank];

        status = tacl__snap_store_verify(
            mine, tacl__snap_store_find(mine, version));
        *damaged_p = status != TACL_OK;
        snap->stats.restore_verify_seconds += tacl__snap_lap(&t);
    }
    if (status == TACL_OK && from_file) {
        uint64_t t = tacl__now_ns();

        TACL_INFO(COLL,
                  "snapshot restore: rank %d reads its version %llu from "
                  "'%s' (no peer's memory holds it)",
                  snap->rank, (unsigned long long)version, sh->path);
        status = tacl__snap_file_load(snap, sh->path, version);
        snap->stats.restore_fetch_seconds += tacl__snap_lap(&t);
    }
    return status;
}

void tacl__snap_restored(struct tacl_snapshot *snap, uint64_t version)
{
    /* Later versions are abandoned: the next saves reuse their numbers,
     * and must not meet a damaged or partial old copy. */
    for (int s = 0; s < snap->size; s++)
        if (snap->stores[s] != NULL)
            tacl__snap_store_drop_after(snap->stores[s], version);
    snap->have_latest = 1;
    snap->latest = version;
}

/* This rank's file entry: the version its file's header holds, no
 * usable file (its reason kept in why), or no path. */
static inv_entry_t file_entry(struct tacl_snapshot *snap, const char *path,
                              char *why, size_t why_len)
{
    uint64_t version;

    why[0] = '\0';
    if (path == NULL)
        return (inv_entry_t){.source = SOURCE_NO_PATH};
    if (access(path, F_OK) != 0)
        return (inv_entry_t){.source = -1};
    if (tacl__snap_file_version(snap, path, &version) != TACL_OK) {
        snprintf(why, why_len, "%s", tacl_last_error());
        TACL_WARN(COLL, "snapshot restore: rank %d cannot use its file: %s",
                  snap->rank, why);
        return (inv_entry_t){.source = -1};
    }
    return (inv_entry_t){.source = SOURCE_FILE, .version = version};
}

/* A rank passing no path where others did is refused, naming it. */
static tacl_status_t check_paths(const struct tacl_snapshot *snap,
                                 const inv_entry_t *all,
                                 const inv_shape_t *sh)
{
    int no_path0 = all[sh->per].source == SOURCE_NO_PATH;

    for (int r = 0; r < snap->size; r++) {
        int no_path = all[r * sh->stride + sh->per].source == SOURCE_NO_PATH;

        if (no_path != no_path0)
            return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                               "snapshot restore_file: rank %d passed %s "
                               "path, rank 0 %s; every rank passes its own "
                               "path, or none does",
                               r, no_path ? "no" : "a",
                               no_path0 ? "did not" : "did");
    }
    return TACL_OK;
}

/* Copies saved by a job of another size are refused, naming a rank
 * holding them; with files they are only ignored while the files serve
 * (see tacl__snap_restore_from). */
static tacl_status_t other_size(const struct tacl_snapshot *snap,
                                const inv_entry_t *all,
                                const inv_shape_t *sh)
{
    for (int i = 0; i < sh->stride * snap->size; i++)
        if (all[i].source == SOURCE_OTHER_SIZE)
            return tacl__error(
                TACL_ERR_UNSUPPORTED, COLL,
                "snapshot restore: rank %d holds snapshots '%s' saved by a "
                "job of %llu ranks; this communicator has %d, and restoring "
                "onto another size is not supported yet: restore from a file "
                "checkpoint, or purge the old snapshots",
                i / sh->stride, snap->key,
                (unsigned long long)all[i].version, snap->size);
    return TACL_OK;
}

/* Whether any rank offers anything: a memory copy or a file. */
static int anything(const struct tacl_snapshot *snap, const inv_entry_t *all,
                    const inv_shape_t *sh)
{
    for (int i = 0; i < sh->stride * snap->size; i++)
        if (all[i].source >= 0 || all[i].source == SOURCE_FILE)
            return 1;
    return 0;
}

/* With why set (this rank's file was unusable), say so beside status's
 * message. */
static tacl_status_t with_file_why(tacl_status_t status, const char *why)
{
    char msg[TACL__ERROR_LEN];

    if (status == TACL_OK || why[0] == '\0')
        return status;
    snprintf(msg, sizeof(msg), "%s", tacl_last_error());
    return tacl__error(status, COLL, "%s; this rank's file: %s", msg, why);
}

/*
 * One attempt at the restore.  A careful one (full) lists only copies
 * whose every chunk passes its CRC, as the header comment says.  A quick
 * one lists every copy whose header is intact and verifies only what
 * the chosen version uses, where it is used: a fetched copy against its
 * sender's CRCs as it lands (tacl__snap_move), a rank's own copy after
 * the fetch; a damaged one, or a refusal decided from the lists (which
 * the careful lists might decide otherwise), sets *again_p on every rank
 * alike, before any rank writes its regions.
 */
static tacl_status_t restore_attempt(struct tacl_snapshot *snap,
                                     const char *path, int full,
                                     int *again_p, int *found_p,
                                     uint64_t *version_p)
{
    inv_shape_t sh = {.path = path};
    inv_entry_t *mine, *all;
    tacl_snapshot_stats_t *st = &snap->stats;
    uint64_t version = 0, t = tacl__now_ns();
    char why[TACL__ERROR_LEN];
    tacl_status_t status;
    int damaged = 0;

    *again_p = 0;
    sh.per = 2 * max_held(snap);
    sh.stride = sh.per + 1;
    mine = malloc((size_t)sh.stride * sizeof(*mine));
    all = malloc((size_t)sh.stride * (size_t)snap->size * sizeof(*all));
    if (mine == NULL || all == NULL) {
        status = tacl__error(TACL_ERR_NO_MEMORY, COLL,
                             "snapshot restore: out of memory");
        goto out;
    }
    inventory(snap, mine, sh.per, full);
    mine[sh.per] = file_entry(snap, path, why, sizeof(why));
    st->restore_inventory_seconds += tacl__snap_lap(&t);
    status = tacl_allgather(mine, all, (size_t)sh.stride * INV_WORDS,
                            TACL_UINT64, snap->comm, NULL);
    if (status != TACL_OK)
        goto out;
    status = check_paths(snap, all, &sh);
    if (status == TACL_OK && path == NULL)
        status = other_size(snap, all, &sh);
    if (status != TACL_OK)
        goto refused;
    if (!anything(snap, all, &sh)) {
        status = other_size(snap, all, &sh);
        *found_p = 0;
        goto out;
    }
    status = choose(snap, all, &sh, &version);
    if (status != TACL_OK) {
        /* Copies of another size explain it best; else this rank's
         * unusable file, beside choose's message. */
        tacl_status_t resized = other_size(snap, all, &sh);

        status = resized != TACL_OK ? resized : with_file_why(status, why);
        goto refused;
    }
    st->restore_gather_seconds += tacl__snap_lap(&t);
    status = fetch(snap, all, &sh, version, full, &damaged);
    t = tacl__now_ns();
    /* Nothing is written until every rank has the version. */
    status = tacl__snap_agree_flag(snap, status, damaged, "restore", version,
                                   again_p);
    st->restore_agree_seconds += tacl__snap_lap(&t);
    if (*again_p)
        goto out;
    if (status == TACL_OK)
        status = tacl__snap_write_regions(snap, version);
    st->restore_write_seconds += tacl__snap_lap(&t);
    status = tacl__snap_agree(snap, status, "restore", version);
    st->restore_agree_seconds += tacl__snap_lap(&t);
    if (status == TACL_OK) {
        tacl__snap_restored(snap, version);
        *found_p = 1;
        *version_p = version;
    }
    goto out;
refused:
    /* Every rank decided it from the same lists. */
    *again_p = !full;
out:
    free(mine);
    free(all);
    return status;
}

/* The quick attempt, and the careful one when it asks (see above). */
tacl_status_t tacl__snap_restore_from(struct tacl_snapshot *snap,
                                      const char *path, int *found_p,
                                      uint64_t *version_p)
{
    int again;
    tacl_status_t status =
        restore_attempt(snap, path, 0, &again, found_p, version_p);

    if (!again)
        return status;
    TACL_INFO(COLL,
              "snapshot restore: rank %d restores again, verifying every "
              "copy it holds first (%s)",
              snap->rank, tacl_last_error());
    return restore_attempt(snap, path, 1, &again, found_p, version_p);
}

/* Both entry points: the arguments, the save in flight, the restore. */
static tacl_status_t restore_entry(tacl_snapshot_t snap, const char *path,
                                   int *found_p, uint64_t *version_p,
                                   const char *name)
{
    tacl_snapshot_stats_t *st;
    uint64_t t0 = tacl__now_ns();
    tacl_status_t status;
    int background;

    if (snap == NULL || found_p == NULL || version_p == NULL)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "snapshot %s: the set, found_p and version_p are "
                           "required",
                           name);
    status = tacl__snap_settle(snap, "restore");
    if (status != TACL_OK)
        return status;
    snap->used = 1;
    /* A restore may rewrite the own store: the flush reading it first. */
    tacl__snap_flush_wait(snap, -1);
    /* The breakdown is the last restore's: its phases start at zero. */
    st = &snap->stats;
    st->restore_inventory_seconds = st->restore_gather_seconds = 0;
    st->restore_header_seconds = st->restore_fetch_seconds = 0;
    st->restore_verify_seconds = st->restore_agree_seconds = 0;
    st->restore_write_seconds = 0;
    st->restore_bytes_fetched = 0;
    /* The job does nothing else while it restores: the fetched copies
     * are foreground traffic, at the link's full rate rather than
     * paced behind a foreground that is not there. */
    background = snap->comm->x.background;
    snap->comm->x.background = 0;
    status = tacl__snap_restore_from(snap, path, found_p, version_p);
    snap->comm->x.background = background;
    st->restore_seconds = tacl__snap_lap(&t0);
    return status;
}

TACL_EXPORT tacl_status_t tacl_snapshot_restore(tacl_snapshot_t snap,
                                                int *found_p,
                                                uint64_t *version_p)
{
    return restore_entry(snap, NULL, found_p, version_p, "restore");
}

TACL_EXPORT tacl_status_t tacl_snapshot_restore_file(tacl_snapshot_t snap,
                                                     const char *path,
                                                     int *found_p,
                                                     uint64_t *version_p)
{
    return restore_entry(snap, path != NULL && path[0] != '\0' ? path : NULL,
                         found_p, version_p, "restore_file");
}
