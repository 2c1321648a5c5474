/*
 * Saving a snapshot set (tacl.h, tacl_snapshot_save and _save_nb).
 *
 * The first save fixes the regions and all-gathers every rank's bytes a
 * version, so that from then on a rank can post the receives of the
 * copies it keeps before they arrive: a save is then one group of
 * messages (to each holder: the version's header, its CRCs, its data in
 * parts of R/p bytes; from each source the same, straight into a slot of
 * this rank's store for it).  The own copy is written and checksummed
 * before the group starts, so the caller may change its regions as soon
 * as the call returns, also for the non-blocking form.
 *
 * The blocking form then checks every received copy against its CRCs,
 * commits it, and agrees with the other ranks (one small all-gather) that
 * all did.  The non-blocking form hands back the group's request; its
 * callback (which must not call tacl, nor take long) checks each received
 * header and commits the copy unchecked, the restore verifying every copy
 * before use; the agreement that every rank's request completed waits
 * for the set's next save or restore, which is when tacl_snapshot_latest
 * starts to report the version.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "log.h"
#include "snapshot.h"

/* Replicas keep as many bytes as one another; room for the CRCs of
 * each replica this rank holds (a save compares them with its own). */
static tacl_status_t replicas_fix(struct tacl_snapshot *snap)
{
    if (snap->shared == NULL)
        return TACL_OK;
    /* A first save that failed may have made some already. */
    for (int s = 0; snap->replica_crcs != NULL && s < snap->size; s++)
        free(snap->replica_crcs[s]);
    free(snap->replica_crcs);
    snap->replica_crcs = NULL;
    for (int r = 0; r < snap->size; r++)
        for (int j = 1; j < snap->m && tacl__snap_shared(snap, r); j++) {
            int h = tacl__snap_holder(snap, r, j);

            if (snap->peer_bytes[h] != snap->peer_bytes[r])
                return tacl__error(
                    TACL_ERR_INVALID_USAGE, COLL,
                    "snapshot save: ranks %d and %d are declared replicas "
                    "(tacl_snapshot_replicated) but register %llu and %llu "
                    "bytes",
                    r, h, (unsigned long long)snap->peer_bytes[r],
                    (unsigned long long)snap->peer_bytes[h]);
        }
    snap->replica_crcs = calloc((unsigned)snap->size, sizeof(*snap->replica_crcs));
    if (snap->replica_crcs == NULL)
        return tacl__error(TACL_ERR_NO_MEMORY, COLL,
                           "snapshot save: out of memory");
    for (int s = 0; s < snap->size; s++) {
        uint64_t n = TACL_DIV_UP(snap->peer_bytes[s], snap->chunk);

        if (s == snap->rank || !tacl__snap_shared(snap, s) ||
            !tacl__snap_holds(snap, s))
            continue;
        snap->replica_crcs[s] = malloc((size_t)TACL_MAX(n, 1) * 4);
        if (snap->replica_crcs[s] == NULL)
            return tacl__error(TACL_ERR_NO_MEMORY, COLL,
                               "snapshot save: out of memory");
    }
    return TACL_OK;
}

/* Every rank's bytes a version, once: the regions are fixed from now. */
static tacl_status_t layout_fix(struct tacl_snapshot *snap)
{
    uint64_t mine = 0;
    tacl_status_t status;

    if (snap->peer_bytes != NULL)
        return TACL_OK;
    for (int i = 0; i < snap->nregions; i++)
        mine += snap->regions[i].bytes;
    snap->peer_bytes = malloc((size_t)snap->size * sizeof(uint64_t));
    snap->incoming = calloc((size_t)snap->size, sizeof(*snap->incoming));
    snap->in_slot = calloc((size_t)snap->size, sizeof(int));
    if (snap->peer_bytes == NULL || snap->incoming == NULL ||
        snap->in_slot == NULL)
        status = tacl__error(TACL_ERR_NO_MEMORY, COLL,
                             "snapshot save: out of memory");
    else
        status = tacl_allgather(&mine, snap->peer_bytes, 1, TACL_UINT64,
                                snap->comm, NULL);
    if (status == TACL_OK)
        status = replicas_fix(snap);
    if (status != TACL_OK) {
        free(snap->peer_bytes);
        snap->peer_bytes = NULL;
    }
    return status;
}

/*
 * The regions into the own slot, one after the other, and its chunks'
 * CRCs: taken while copying (one pass over the data, the fused kernel),
 * or with TACL_SNAP_FUSED_CRC 0 in a second pass over the copy; either
 * way the slot is committed.  The phases' times are kept for the stats.
 */
static void copy_regions(struct tacl_snapshot *snap, tacl__snap_store_t *st,
                         int slot)
{
    uint8_t *data = tacl__snap_store_data(st, slot);
    uint64_t off = 0, t0 = tacl__now_ns(), t1;

    for (int i = 0; i < snap->nregions; i++) {
        const tacl__snap_user_region_t *r = &snap->regions[i];

        if (snap->fused_crc)
            tacl__snap_store_write(st, slot, off, r->ptr, r->bytes);
        else if (r->bytes > 0)
            memcpy(data + off, r->ptr, r->bytes);
        off += r->bytes;
    }
    t1 = tacl__now_ns();
    if (snap->fused_crc)
        tacl__snap_store_commit_unchecked(st, slot);
    else
        tacl__snap_store_commit(st, slot);
    snap->copy_ns = t1 - t0;
    snap->checksum_ns = snap->fused_crc ? 0 : tacl__now_ns() - t1;
}

/* The own copy: the regions into this rank's store, checksummed. */
static tacl_status_t save_own(struct tacl_snapshot *snap, uint64_t version,
                              int *slot_p)
{
    tacl__snap_region_t desc[TACL__SNAP_MAX_REGIONS];
    tacl_status_t status;

    for (int i = 0; i < snap->nregions; i++) {
        memset(desc[i].name, 0, sizeof(desc[i].name));
        strcpy(desc[i].name, snap->regions[i].name);
        desc[i].bytes = snap->regions[i].bytes;
    }
    status = tacl__snap_store_for(snap, snap->rank,
                                  snap->peer_bytes[snap->rank], 1);
    /* Not over the version a background flush is writing out. */
    if (status == TACL_OK)
        tacl__snap_flush_wait(
            snap, tacl__snap_store_next_slot(snap->stores[snap->rank],
                                             version));
    if (status == TACL_OK)
        status = tacl__snap_store_begin(snap->stores[snap->rank], version,
                                        (uint32_t)snap->size, desc,
                                        snap->nregions, slot_p);
    if (status != TACL_OK)
        return status;
    copy_regions(snap, snap->stores[snap->rank], *slot_p);
    return TACL_OK;
}

/* A slot for each copy this rank keeps, described by what it expects. */
static tacl_status_t prepare_receives(struct tacl_snapshot *snap,
                                      uint64_t version)
{
    tacl_status_t status = TACL_OK;

    for (int s = 0; s < snap->size && status == TACL_OK; s++) {
        tacl__snap_slot_t d = {.version = version,
                               .bytes = snap->peer_bytes[s],
                               .chunk_bytes = snap->chunk,
                               .nranks = (uint32_t)snap->size};

        if (s == snap->rank || !tacl__snap_holds(snap, s) ||
            tacl__snap_shared(snap, s))
            continue;
        d.nchunks = (uint32_t)TACL_DIV_UP(d.bytes, d.chunk_bytes);
        status = tacl__snap_store_for(snap, s, d.bytes, 1);
        if (status == TACL_OK)
            status = tacl__snap_store_begin_copy(snap->stores[s], &d,
                                                 &snap->in_slot[s]);
    }
    return status;
}

/* The version's one group: the own copy out, the kept copies in.  A
 * replica's holders keep their own copy: they get its header and CRCs
 * only, to hold against theirs. */
static tacl_status_t post_version(struct tacl_snapshot *snap, int own_slot,
                                  tacl_request_t *req_p)
{
    tacl__snap_store_t *own = snap->stores[snap->rank];
    const tacl__snap_slot_t *d = tacl__snap_store_slot(own, own_slot);
    int shared = tacl__snap_shared(snap, snap->rank);
    tacl_status_t status = TACL_OK, ended;

    snap->sent_bytes = 0;
    tacl_group_start();
    for (int j = 1; j < snap->m && status == TACL_OK; j++) {
        int h = tacl__snap_holder(snap, snap->rank, j);

        snap->sent_bytes += shared ? sizeof(*d) + 4ull * d->nchunks
                                   : d->bytes;
        status = tacl__snap_post(snap, 1, (void *)d, sizeof(*d), h,
                                 TACL__SNAP_TAG_HEADER);
        if (status == TACL_OK && !shared)
            status = tacl__snap_post_body(snap, 1, own, own_slot, h);
        else if (status == TACL_OK && d->nchunks > 0)
            status = tacl__snap_post(snap, 1,
                                     tacl__snap_store_crcs(own, own_slot),
                                     4ull * d->nchunks, h,
                                     TACL__SNAP_TAG_CRCS);
    }
    for (int s = 0; s < snap->size && status == TACL_OK; s++) {
        uint64_t nchunks = TACL_DIV_UP(snap->peer_bytes[s], snap->chunk);

        if (s == snap->rank || !tacl__snap_holds(snap, s))
            continue;
        status = tacl__snap_post(snap, 0, &snap->incoming[s],
                                 sizeof(tacl__snap_slot_t), s,
                                 TACL__SNAP_TAG_HEADER);
        if (status == TACL_OK && !tacl__snap_shared(snap, s))
            status = tacl__snap_post_body(snap, 0, snap->stores[s],
                                          snap->in_slot[s], s);
        else if (status == TACL_OK && nchunks > 0)
            status = tacl__snap_post(snap, 0, snap->replica_crcs[s],
                                     4 * nchunks, s, TACL__SNAP_TAG_CRCS);
    }
    ended = req_p != NULL ? tacl_group_end_nb(req_p) : tacl_group_end();
    return status != TACL_OK ? status : ended;
}

/*
 * A replica s's header and CRCs against this rank's own copy: the same
 * regions and every chunk's CRC, else the first difference goes to
 * replica_why (a request callback may not log) and TACL_ERR_INTERNAL.
 */
static tacl_status_t replica_compare(struct tacl_snapshot *snap, int s)
{
    tacl__snap_store_t *own = snap->stores[snap->rank];
    const tacl__snap_slot_t *d = tacl__snap_store_slot(own, snap->own_slot),
                            *in = &snap->incoming[s];
    const uint32_t *mine = tacl__snap_store_crcs(own, snap->own_slot);
    char where[128];
    uint32_t c = 0;
    int i;

    for (i = 0; i < (int)d->nregions; i++)
        if (in->nregions != d->nregions ||
            strcmp(in->regions[i].name, d->regions[i].name) != 0 ||
            in->regions[i].bytes != d->regions[i].bytes)
            break;
    if (in->nregions != d->nregions || i < (int)d->nregions) {
        snprintf(snap->replica_why, sizeof(snap->replica_why),
                 "ranks %d and %d are declared replicas but register "
                 "different regions (region %d)",
                 TACL_MIN(s, snap->rank), TACL_MAX(s, snap->rank), i);
        return TACL_ERR_INTERNAL;
    }
    while (c < d->nchunks && mine[c] == snap->replica_crcs[s][c])
        c++;
    if (c == d->nchunks)
        return TACL_OK;
    snprintf(snap->replica_why, sizeof(snap->replica_why),
             "ranks %d and %d are declared replicas but differ at version "
             "%llu in %s (chunk %u)",
             TACL_MIN(s, snap->rank), TACL_MAX(s, snap->rank),
             (unsigned long long)d->version,
             tacl__snap_store_chunk_regions(own, snap->own_slot, c, where,
                                            sizeof(where)),
             c);
    return TACL_ERR_INTERNAL;
}

/*
 * Commit the copies received of version: each header must describe what
 * was expected; check also verifies the CRCs (and may log).  Without
 * check it calls nothing of tacl, as a request callback must not.  A
 * replica's CRCs are held against the own copy instead, which is marked
 * matched when every replica this rank holds agrees.
 */
static tacl_status_t finish_received(struct tacl_snapshot *snap,
                                     uint64_t version, int check)
{
    tacl_status_t status = TACL_OK;
    int replicas = 0;

    for (int s = 0; s < snap->size && status == TACL_OK; s++) {
        const tacl__snap_slot_t *in = &snap->incoming[s];

        if (s == snap->rank || !tacl__snap_holds(snap, s))
            continue;
        if (in->version != version || in->bytes != snap->peer_bytes[s] ||
            in->chunk_bytes != snap->chunk ||
            in->nchunks != TACL_DIV_UP(in->bytes, in->chunk_bytes) ||
            in->nregions > TACL__SNAP_MAX_REGIONS) {
            status = TACL_ERR_INTERNAL;
            if (check)
                tacl__error(
                    status, COLL,
                    "snapshot save: rank %d's copy of version %llu arrived "
                    "with a header for version %llu of %llu bytes",
                    s, (unsigned long long)version,
                    (unsigned long long)in->version,
                    (unsigned long long)in->bytes);
            break;
        }
        if (tacl__snap_shared(snap, s)) {
            status = replica_compare(snap, s);
            replicas += status == TACL_OK;
            if (status != TACL_OK && check)
                tacl__error(status, COLL, "snapshot save: %s",
                            snap->replica_why);
            continue;
        }
        tacl__snap_store_describe(snap->stores[s], snap->in_slot[s], in);
        if (check)
            status = tacl__snap_store_commit_checked(snap->stores[s],
                                                     snap->in_slot[s]);
        else
            tacl__snap_store_commit_unchecked(snap->stores[s],
                                              snap->in_slot[s]);
    }
    if (status == TACL_OK && replicas > 0)
        tacl__snap_store_mark_matched(snap->stores[snap->rank],
                                      snap->own_slot);
    return status;
}

/* The non-blocking save's request completed (see the header comment). */
static void save_done(tacl_request_t req, tacl_status_t status, void *arg)
{
    struct tacl_snapshot *snap = arg;

    (void)req;
    if (status == TACL_OK)
        status = finish_received(snap, snap->inflight, 0);
    snap->xfer_ns = tacl__now_ns() - snap->xfer_start_ns;
    atomic_store(&snap->inflight_status, status);
    atomic_store(&snap->inflight_done, 1);
}

/* The transfer of the save in flight, its request completed, into st. */
static void add_transfer(const struct tacl_snapshot *snap,
                         tacl_snapshot_stats_t *st)
{
    st->transfer_seconds = (double)snap->xfer_ns * 1e-9;
    st->total_transfer_seconds += st->transfer_seconds;
}

/* The caller's-thread phases of the save just posted, into the stats. */
static void add_save(struct tacl_snapshot *snap)
{
    tacl_snapshot_stats_t *st = &snap->stats;

    st->saves++;
    st->agree_seconds = (double)snap->agree_ns * 1e-9;
    st->total_agree_seconds += st->agree_seconds;
    st->copy_seconds = (double)snap->copy_ns * 1e-9;
    st->checksum_seconds = (double)snap->checksum_ns * 1e-9;
    st->bytes_sent = snap->sent_bytes;
    st->total_save_seconds += (double)snap->save_ns * 1e-9;
    st->total_copy_seconds += st->copy_seconds;
    st->total_checksum_seconds += st->checksum_seconds;
    st->total_bytes_sent += st->bytes_sent;
}

tacl_status_t tacl__snap_settle(struct tacl_snapshot *snap, const char *what)
{
    tacl_status_t mine;

    if (!snap->inflight_on)
        return TACL_OK;
    if (!atomic_load(&snap->inflight_done))
        return tacl__error(TACL_ERR_INVALID_USAGE, COLL,
                           "snapshot %s: the save of version %llu is in "
                           "flight; wait for its request first",
                           what, (unsigned long long)snap->inflight);
    snap->inflight_on = 0;
    add_transfer(snap, &snap->stats);
    mine = atomic_load(&snap->inflight_status);
    if (mine != TACL_OK)
        tacl__error(mine, COLL,
                    "snapshot save of version %llu failed on rank %d (%s): "
                    "its copies are not all committed%s%s",
                    (unsigned long long)snap->inflight, snap->rank,
                    tacl_status_string(mine),
                    snap->replica_why[0] != '\0' ? ": " : "", snap->replica_why);
    mine = tacl__snap_agree(snap, mine, "save", snap->inflight);
    if (mine == TACL_OK) {
        snap->have_latest = 1;
        snap->latest = snap->inflight;
    }
    return mine;
}

/*
 * What both forms check before anything else: the set, the save in
 * flight (agreed here), the version.  Every rank decides the same, so a
 * refusal returns at once on every rank.
 */
static tacl_status_t save_check(struct tacl_snapshot *snap, uint64_t version,
                                const char *what)
{
    tacl_status_t status;

    if (snap == NULL)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "snapshot %s: the set is NULL", what);
    status = tacl__snap_settle(snap, what);
    if (status != TACL_OK)
        return status;
    if (snap->have_latest && version <= snap->latest)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "snapshot %s: version %llu is not after the last "
                           "complete one, %llu",
                           what, (unsigned long long)version,
                           (unsigned long long)snap->latest);
    return TACL_OK;
}

/* Then the own copy and the slots of the kept ones; *slot_p: the own. */
static tacl_status_t save_prepare(struct tacl_snapshot *snap,
                                  uint64_t version, int *slot_p)
{
    tacl_status_t status;

    snap->used = 1;
    snap->replica_why[0] = '\0';
    status = layout_fix(snap);
    if (status == TACL_OK)
        status = save_own(snap, version, slot_p);
    if (status == TACL_OK)
        snap->own_slot = *slot_p;
    if (status == TACL_OK)
        status = prepare_receives(snap, version);
    return status;
}

TACL_EXPORT tacl_status_t tacl_snapshot_save(tacl_snapshot_t snap,
                                             uint64_t version)
{
    int slot = 0;
    tacl_status_t status = save_check(snap, version, "save");

    if (status != TACL_OK)
        return status;
    status = save_prepare(snap, version, &slot);
    if (status == TACL_OK) {
        status = post_version(snap, slot, NULL);
        snap->stats.bytes_sent = snap->sent_bytes;
        snap->stats.total_bytes_sent += snap->sent_bytes;
    }
    if (status == TACL_OK)
        status = finish_received(snap, version, 1);
    status = tacl__snap_agree(snap, status, "save", version);
    if (status == TACL_OK) {
        snap->have_latest = 1;
        snap->latest = version;
    }
    return status;
}

TACL_EXPORT tacl_status_t tacl_snapshot_save_nb(tacl_snapshot_t snap,
                                                uint64_t version,
                                                tacl_request_t *req_p)
{
    int slot = 0;
    uint64_t t0 = tacl__now_ns();
    tacl_status_t status;

    if (req_p == NULL)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "snapshot save_nb: req_p is NULL");
    status = save_check(snap, version, "save_nb");
    if (status != TACL_OK)
        return status;
    /* A caller that never marks its steps marks them by its saves. */
    if (snap->due_calls == 0 && snap->step_calls == 0)
        tacl__snap_sched_mark(snap);
    snap->agree_ns = tacl__now_ns() - t0;
    /* A failure from here leaves the peers' requests to end with the
     * communicator's timeout: the form has no agreement of its own. */
    status = save_prepare(snap, version, &slot);
    if (status == TACL_OK)
        status = post_version(snap, slot, req_p);
    if (status != TACL_OK)
        return status;
    snap->inflight = version;
    snap->inflight_on = 1;
    snap->save_ns = tacl__now_ns() - t0;
    snap->since_save = 0;
    add_save(snap);
    snap->xfer_start_ns = t0;
    atomic_store(&snap->inflight_done, 0);
    atomic_store(&snap->inflight_status, TACL_OK);
    /* From here the callback may run at once, on any thread. */
    status = tacl_request_set_callback(*req_p, save_done, snap);
    if (status != TACL_OK) {
        /* Nothing will commit the copies: the version fails at settle. */
        snap->xfer_ns = 0;
        atomic_store(&snap->inflight_status, status);
        atomic_store(&snap->inflight_done, 1);
    }
    return TACL_OK;
}

/*
 * Steps a save must be apart for its cost in the caller's thread to stay
 * within max_overhead of the step time: cost / (bound x step), at least 1.
 */
static uint64_t steps_for_overhead(const struct tacl_snapshot *snap)
{
    double k;

    if (snap->max_overhead <= 0 || snap->step_ns == 0 || snap->save_ns == 0)
        return 1;
    k = (double)snap->save_ns / (snap->max_overhead * (double)snap->step_ns);
    return k <= 1 ? 1 : (uint64_t)k + (k > (double)(uint64_t)k);
}

/* Count a skipped save; the first of each reason is logged. */
static void note_skip(struct tacl_snapshot *snap, int busy, uint64_t need)
{
    if (busy) {
        snap->stats.skipped_busy++;
        if (!snap->warned_busy++)
            TACL_WARN(COLL, "snapshot %s: the copies of version %llu are "
                      "still in flight on a rank: saves now start when the "
                      "previous one has completed everywhere (no more often "
                      "than its copies take, Equation 6.2)",
                      snap->key, (unsigned long long)snap->inflight);
        return;
    }
    snap->stats.skipped_overhead++;
    if (!snap->warned_overhead++)
        TACL_WARN(COLL, "snapshot %s: a save costs %.3f s in the caller's "
                  "thread against a step of %.3f s: saving every %llu steps "
                  "to stay within the step-overhead bound of %.1f%%",
                  snap->key, (double)snap->save_ns * 1e-9,
                  (double)snap->step_ns * 1e-9, (unsigned long long)need,
                  100 * snap->max_overhead);
}

/*
 * The thesis saves no more often than a checkpoint takes (section 6.2,
 * Equation 6.2: 1/f >= max(t_ckpt, T_iter)), from offline profiles; here
 * each step asks every rank whether its previous save's request has
 * completed (MAX of the flags), and how many steps apart its own cost
 * wants saves (MAX again), so every rank answers the same.
 */
TACL_EXPORT tacl_status_t tacl_snapshot_due(tacl_snapshot_t snap, int *due_p)
{
    uint64_t now = tacl__now_ns(), want[2];
    tacl_status_t status;

    if (snap == NULL || due_p == NULL)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "snapshot due: the set and due_p are required");
    *due_p = 0;
    if (snap->last_due_ns != 0)
        snap->step_ns = now - snap->last_due_ns;
    snap->last_due_ns = now;
    snap->since_save++;
    want[0] = snap->inflight_on && !atomic_load(&snap->inflight_done);
    want[1] = steps_for_overhead(snap);
    status = tacl_allreduce(want, want, 2, TACL_UINT64, TACL_MAX, snap->comm,
                            NULL);
    if (status != TACL_OK)
        return status;
    snap->due_calls++;
    if (snap->step_calls == 0)
        tacl__snap_sched_mark(snap);
    if (want[0] || snap->since_save < want[1]) {
        note_skip(snap, want[0] != 0, want[1]);
        return TACL_OK;
    }
    *due_p = 1;
    return TACL_OK;
}

TACL_EXPORT tacl_status_t tacl_snapshot_step(tacl_snapshot_t snap)
{
    if (snap == NULL)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "snapshot step: the set is NULL");
    snap->step_calls++;
    tacl__snap_sched_mark(snap);
    return TACL_OK;
}

TACL_EXPORT tacl_status_t tacl_snapshot_stats(tacl_snapshot_t snap,
                                              tacl_snapshot_stats_t *stats_p)
{
    if (snap == NULL || stats_p == NULL)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "snapshot stats: the set and stats_p are "
                           "required");
    *stats_p = snap->stats;
    /* A completed request's transfer counts before the next save's
     * agreement folds it in. */
    if (snap->inflight_on && atomic_load(&snap->inflight_done))
        add_transfer(snap, stats_p);
    tacl__snap_sched_stats(snap, stats_p);
    stats_p->save_seconds = (double)snap->save_ns * 1e-9;
    stats_p->step_seconds = (double)snap->step_ns * 1e-9;
    return TACL_OK;
}
