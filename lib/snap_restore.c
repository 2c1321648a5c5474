/*
 * Restoring a snapshot set (tacl.h, tacl_snapshot_restore).
 *
 * Every rank lists the versions it holds intact, its own and those it
 * keeps for peers (a copy failing its checks is left out, its message
 * naming rank, region and version), and the lists are all-gathered, so
 * every rank decides the same thing alone: the newest version that every
 * rank's state has somewhere.  A rank lacking it locally (a replaced
 * node, a purged or damaged store) receives it from its first holder that
 * has it; a rank whose state survives nowhere fails the restore with the
 * holders named, never a partial load.  The version is then checked
 * against the registered regions and written into them, and the ranks
 * agree that every rank did.
 */
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "log.h"
#include "snapshot.h"

/* One intact stored version: rank source's state at version. */
typedef struct {
    int64_t source; /* -1: an unused entry; SOURCE_OTHER_SIZE: below */
    uint64_t version;
} inv_entry_t;

/* An entry saying a copy was saved by a job of `version` ranks, not this
 * communicator's size. */
#define SOURCE_OTHER_SIZE (-2)

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

/* This rank's intact versions into mine (room for per entries). */
static void inventory(struct tacl_snapshot *snap, inv_entry_t *mine, int per)
{
    int n = 0;

    for (int i = 0; i < per; i++)
        mine[i].source = -1;
    for (int s = 0; s < snap->size; s++) {
        if (!tacl__snap_holds(snap, s))
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
            if (tacl__snap_store_verify(snap->stores[s], slot) != TACL_OK) {
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
            mine[n++] = (inv_entry_t){.source = s, .version = d->version};
        }
    }
}

/* The rank holding s's state at version, preferring s itself and then
 * its holders in order; -1 if none. */
static int provider(const struct tacl_snapshot *snap, const inv_entry_t *all,
                    int per, int s, uint64_t version)
{
    for (int j = 0; j < snap->m; j++) {
        int h = tacl__snap_holder(snap, s, j);

        for (int i = 0; i < per; i++)
            if (all[h * per + i].source == s &&
                all[h * per + i].version == version)
                return h;
    }
    return -1;
}

/* The newest version every rank's state has somewhere (*version_p), or
 * the error naming a rank whose state survives nowhere. */
static tacl_status_t choose(const struct tacl_snapshot *snap,
                            const inv_entry_t *all, int per,
                            uint64_t *version_p)
{
    int total = snap->size * per, best = -1;

    for (int s = 0; s < snap->size; s++) {
        int any = 0;

        for (int i = 0; i < total && !any; i++)
            any = all[i].source == s;
        if (!any) {
            char where[256];
            size_t used = 0;

            where[0] = '\0';
            for (int j = 0; j < snap->m && used < sizeof(where); j++)
                used += (size_t)snprintf(where + used, sizeof(where) - used,
                                         "%s%d", j > 0 ? ", " : "",
                                         tacl__snap_holder(snap, s, j));
            return tacl__error(
                TACL_ERR_INTERNAL, COLL,
                "snapshot restore: no intact copy of rank %d's state "
                "survives: its placement group (ranks %s) lost every copy; "
                "restore from a file checkpoint",
                s, where);
        }
    }
    /* Candidates newest first: any version some rank holds. */
    for (int i = 0; i < total; i++) {
        int complete = all[i].source >= 0 &&
                       (best < 0 || all[i].version > all[best].version);

        for (int s = 0; s < snap->size && complete; s++)
            complete = provider(snap, all, per, s, all[i].version) >= 0;
        if (complete)
            best = i;
    }
    if (best < 0)
        return tacl__error(TACL_ERR_INTERNAL, COLL,
                           "snapshot restore: no version survives intact for "
                           "every rank (the ranks hold copies of different "
                           "versions); restore from a file checkpoint");
    *version_p = all[best].version;
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
static tacl_status_t fetch(struct tacl_snapshot *snap, const inv_entry_t *all,
                           int per, uint64_t version)
{
    tacl__snap_send_t *sends = calloc((size_t)snap->size, sizeof(*sends));
    tacl__snap_recv_t recv;
    int nsends = 0, nrecvs = 0;
    tacl_status_t status;

    if (sends == NULL)
        return tacl__error(TACL_ERR_NO_MEMORY, COLL,
                           "snapshot restore: out of memory");
    for (int s = 0; s < snap->size; s++) {
        int from = provider(snap, all, per, s, version);

        if (from == s)
            continue;
        if (from == snap->rank)
            sends[nsends++] = (tacl__snap_send_t){
                .peer = s,
                .st = snap->stores[s],
                .slot = tacl__snap_store_find(snap->stores[s], version)};
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

tacl_status_t tacl__snap_restore_memory(struct tacl_snapshot *snap,
                                        int *found_p, uint64_t *version_p)
{
    int per, any = 0;
    inv_entry_t *mine, *all;
    uint64_t version = 0;
    tacl_status_t status;

    per = 2 * max_held(snap);
    mine = malloc((size_t)per * sizeof(*mine));
    all = malloc((size_t)per * (size_t)snap->size * sizeof(*all));
    if (mine == NULL || all == NULL) {
        status = tacl__error(TACL_ERR_NO_MEMORY, COLL,
                             "snapshot restore: out of memory");
        goto out;
    }
    inventory(snap, mine, per);
    status = tacl_allgather(mine, all, (size_t)per * 2, TACL_UINT64,
                            snap->comm, NULL);
    if (status != TACL_OK)
        goto out;
    for (int i = 0; i < per * snap->size && status == TACL_OK; i++) {
        any |= all[i].source >= 0;
        if (all[i].source == SOURCE_OTHER_SIZE)
            status = tacl__error(
                TACL_ERR_UNSUPPORTED, COLL,
                "snapshot restore: rank %d holds snapshots '%s' saved by a "
                "job of %llu ranks; this communicator has %d, and restoring "
                "onto another size is not supported yet: restore from a file "
                "checkpoint, or purge the old snapshots",
                i / per, snap->key, (unsigned long long)all[i].version,
                snap->size);
    }
    if (status != TACL_OK)
        goto out;
    if (!any) {
        *found_p = 0;
        goto out;
    }
    status = choose(snap, all, per, &version);
    if (status != TACL_OK)
        goto out;
    status = fetch(snap, all, per, version);
    if (status == TACL_OK)
        status = tacl__snap_write_regions(snap, version);
    status = tacl__snap_agree(snap, status, "restore", version);
    if (status == TACL_OK) {
        tacl__snap_restored(snap, version);
        *found_p = 1;
        *version_p = version;
    }
out:
    free(mine);
    free(all);
    return status;
}

TACL_EXPORT tacl_status_t tacl_snapshot_restore(tacl_snapshot_t snap,
                                                int *found_p,
                                                uint64_t *version_p)
{
    tacl_status_t status;

    if (snap == NULL || found_p == NULL || version_p == NULL)
        return tacl__error(
            TACL_ERR_INVALID_ARG, COLL,
            "snapshot restore: the set, found_p and version_p are required");
    status = tacl__snap_settle(snap, "restore");
    if (status != TACL_OK)
        return status;
    return tacl__snap_restore_memory(snap, found_p, version_p);
}
