/*
 * Snapshots (tacl.h, tacl_snapshot_*): in-memory peer checkpoints, after
 * the thesis' chapter 6 (Gemini): section 6.4's placement
 * (algorithms/placement.c), a node-local store of two versions with a
 * CRC32C per chunk (snap_store.c), and the copies moved with tacl's own
 * tagged point-to-point on a communicator split for the set, so they
 * never match the caller's messages.
 *
 * Create splits the set's communicator and places the copies; saving is
 * snap_save.c's, restoring snap_restore.c's.  Both move versions with the
 * helpers here: tacl__snap_post_body sends or receives a stored
 * version's CRCs and data in parts of R/p bytes, tacl__snap_move moves
 * versions whose sizes the receivers learn from a header sent first, and
 * tacl__snap_agree ends a collective step with every rank's status.  The
 * set's communicator is background traffic (the executor's
 * tacl__xcomm_t.background) unless the configuration says otherwise.
 * Device memory is not built yet.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "config.h"
#include "log.h"
#include "snapshot.h"

static tacl_status_t config_check(tacl_comm_t comm,
                                  const tacl_snapshot_config_t *c)
{
    size_t len;

    if (comm == NULL || c == NULL)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "snapshot create: the communicator and "
                           "configuration are required");
    if (c->job_key == NULL || (len = strlen(c->job_key)) == 0 || len > 64 ||
        strspn(c->job_key, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVW"
                           "XYZ0123456789._-") != len)
        return tacl__error(
            TACL_ERR_INVALID_ARG, COLL,
            "snapshot create: the job key must be 1 to 64 letters, digits, "
            "'.', '_' or '-' (it names the node-local store)");
    if (c->replicas < 0 || c->replicas > 8 || c->staging_parts < 0 ||
        (unsigned)c->placement > TACL_SNAPSHOT_PLACE_RING ||
        (unsigned)c->domain > TACL_SNAPSHOT_DOMAIN_RANK ||
        (unsigned)c->traffic > TACL_SNAPSHOT_TRAFFIC_SCHEDULED)
        return tacl__error(
            TACL_ERR_INVALID_ARG, COLL,
            "snapshot create: replicas must be 0 (default 2) to 8, staging "
            "parts 0 or more, placement, domain and traffic one of "
            "tacl.h's values");
    if (!(c->max_step_overhead >= 0 && c->max_step_overhead < 1))
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "snapshot create: max_step_overhead %g is not a "
                           "share in [0, 1) (0: no bound)",
                           c->max_step_overhead);
    if (c->profile_steps != 0 &&
        (c->profile_steps < 2 || c->profile_steps > TACL__SNAP_PROFILE_MAX))
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "snapshot create: profile_steps %d is not 2 to "
                           "%d (0: 10)",
                           c->profile_steps, TACL__SNAP_PROFILE_MAX);
    if (!(c->span_share >= 0 && c->span_share <= 1))
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "snapshot create: span_share %g is not a share "
                           "in (0, 1] (0: 0.8)",
                           c->span_share);
    return TACL_OK;
}

/*
 * The set's own communicator, with the parent's timeout and checks.  Its
 * copies as background traffic move while the caller computes, when no
 * call of the caller's drives progress, so it has a progress thread.
 */
static tacl_status_t split_comm(struct tacl_snapshot *snap, tacl_comm_t comm,
                                const tacl_snapshot_config_t *c)
{
    tacl_config_t cfg = TACL_CONFIG_INIT;
    char name[64];

    snprintf(name, sizeof(name), "snapshot %s", c->job_key);
    cfg.timeout = comm->x.timeout_s;
    cfg.check = comm->check;
    cfg.progress_thread = c->traffic == TACL_SNAPSHOT_TRAFFIC_BACKGROUND
                              ? 1
                              : comm->progress_thread;
    cfg.name = name;
    return tacl_comm_split_config(comm, 0, snap->rank, &cfg, &snap->comm);
}

/* Every rank's node and local index (node domain), then the placement
 * and every rank's holders. */
static tacl_status_t place(struct tacl_snapshot *snap,
                           const tacl_snapshot_config_t *c)
{
    static const tacl__place_kind_t kinds[] =
        {[TACL_SNAPSHOT_PLACE_AUTO] = TACL__PLACE_AUTO,
         [TACL_SNAPSHOT_PLACE_GROUP] = TACL__PLACE_GROUP,
         [TACL_SNAPSHOT_PLACE_RING] = TACL__PLACE_RING};
    int units = snap->size, mine[2], *all;
    tacl_status_t status;

    if (snap->domain == TACL_SNAPSHOT_DOMAIN_NODE) {
        all = malloc(2 * (size_t)snap->size * sizeof(int));
        snap->node_of = malloc((size_t)snap->size * sizeof(int));
        snap->local_of = malloc((size_t)snap->size * sizeof(int));
        if (all == NULL || snap->node_of == NULL || snap->local_of == NULL) {
            free(all);
            return tacl__error(TACL_ERR_NO_MEMORY, COLL,
                               "snapshot create: out of memory");
        }
        status = tacl_comm_node(snap->comm, &mine[0]);
        if (status == TACL_OK)
            status = tacl_comm_local_rank(snap->comm, &mine[1]);
        if (status == TACL_OK)
            status = tacl_allgather(mine, all, 2, TACL_INT32, snap->comm,
                                    NULL);
        if (status == TACL_OK)
            status = tacl_comm_n_nodes(snap->comm, &units);
        for (int r = 0; r < snap->size && status == TACL_OK; r++) {
            snap->node_of[r] = all[2 * r];
            snap->local_of[r] = all[2 * r + 1];
        }
        free(all);
        if (status != TACL_OK)
            return status;
        if (units < snap->m)
            return tacl__error(
                TACL_ERR_INVALID_ARG, COLL,
                "snapshot create: %d copies in the node domain need %d "
                "nodes, this communicator spans %d; use "
                "TACL_SNAPSHOT_DOMAIN_RANK or fewer replicas",
                snap->m, snap->m, units);
    }
    snap->asked = kinds[c->placement];
    status = tacl__place_build(units, snap->m, snap->asked, &snap->place);
    if (status != TACL_OK)
        return status;
    snap->holders = malloc((size_t)snap->size * (size_t)snap->m *
                           sizeof(int));
    if (snap->holders == NULL)
        return tacl__error(TACL_ERR_NO_MEMORY, COLL,
                           "snapshot create: out of memory");
    for (int r = 0; r < snap->size; r++)
        for (int j = 0; j < snap->m; j++) {
            int h = tacl__place_rank_holder(&snap->place, snap->size,
                                            snap->node_of, snap->local_of, r,
                                            j);
            if (h < 0)
                return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                                   "snapshot create: rank %d's copy %d has "
                                   "no rank on its holder node",
                                   r, j);
            snap->holders[r * snap->m + j] = h;
        }
    return TACL_OK;
}

static void snap_free(struct tacl_snapshot *snap, int purge)
{
    tacl__snap_sched_free(snap);
    if (snap->stores != NULL)
        for (int s = 0; s < snap->size; s++) {
            tacl__snap_store_close(snap->stores[s], purge);
            if (purge && snap->stores[s] == NULL && tacl__snap_holds(snap, s))
                tacl__snap_store_unlink(snap->key, snap->rank, s);
        }
    if (snap->comm != NULL)
        tacl_comm_destroy(snap->comm);
    tacl__place_free(&snap->place);
    free(snap->stores);
    free(snap->peer_bytes);
    free(snap->incoming);
    free(snap->in_slot);
    free(snap->holders);
    free(snap->shared);
    if (snap->replica_crcs != NULL)
        for (int s = 0; s < snap->size; s++)
            free(snap->replica_crcs[s]);
    free(snap->replica_crcs);
    free(snap->node_of);
    free(snap->local_of);
    free(snap);
}

TACL_EXPORT tacl_status_t
tacl_snapshot_create(tacl_comm_t comm, const tacl_snapshot_config_t *config,
                     tacl_snapshot_t *snap_p)
{
    struct tacl_snapshot *snap;
    tacl_status_t status = config_check(comm, config);
    size_t staging, parts;
    char why[TACL__ERROR_LEN];

    if (status != TACL_OK)
        return status;
    if (snap_p == NULL)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "snapshot create: snap_p is NULL");
    snap = calloc(1, sizeof(*snap));
    if (snap == NULL)
        return tacl__error(TACL_ERR_NO_MEMORY, COLL,
                           "snapshot create: out of memory");
    snap->m = config->replicas > 0 ? config->replicas : 2;
    snap->domain = config->domain;
    snap->max_overhead = config->max_step_overhead;
    snap->fused_crc = tacl__config_bool(TACL_CFG_SNAP_FUSED_CRC);
    strcpy(snap->key, config->job_key);
    staging = config->staging_bytes > 0 ? config->staging_bytes : 1 << 20;
    parts = config->staging_parts > 0 ? (size_t)config->staging_parts : 4;
    snap->chunk = (uint32_t)TACL_MIN(TACL_MAX(staging / parts, 64),
                                     (size_t)1 << 30);
    status = tacl_comm_rank(comm, &snap->rank);
    if (status == TACL_OK)
        status = tacl_comm_size(comm, &snap->size);
    if (status == TACL_OK)
        status = split_comm(snap, comm, config);
    if (status != TACL_OK)
        goto err_free;
    if (snap->m > snap->size && snap->domain == TACL_SNAPSHOT_DOMAIN_RANK) {
        status = tacl__error(TACL_ERR_INVALID_ARG, COLL,
                             "snapshot create: %d copies need %d ranks, the "
                             "communicator has %d",
                             snap->m, snap->m, snap->size);
        goto err_free;
    }
    status = place(snap, config);
    if (status != TACL_OK)
        goto err_free;
    /* From here on the set's copies are background traffic. */
    if (config->traffic != TACL_SNAPSHOT_TRAFFIC_FOREGROUND)
        snap->comm->x.background = (int)parts;
    if (config->traffic == TACL_SNAPSHOT_TRAFFIC_SCHEDULED)
        status = tacl__snap_sched_init(snap, config);
    if (status != TACL_OK)
        goto err_free;
    snap->stores = calloc((size_t)snap->size, sizeof(*snap->stores));
    if (snap->stores == NULL) {
        status = tacl__error(TACL_ERR_NO_MEMORY, COLL,
                             "snapshot create: out of memory");
        goto err_free;
    }
    TACL_INFO(COLL,
              "snapshot set '%s': %d copies, %s placement over %d %s, parts "
              "of %u bytes, %s traffic",
              snap->key, snap->m, tacl__place_kind_name(snap->place.kind),
              snap->place.units,
              snap->domain == TACL_SNAPSHOT_DOMAIN_NODE ? "nodes" : "ranks",
              snap->chunk,
              snap->sched != NULL         ? "scheduled"
              : snap->comm->x.background ? "background"
                                         : "foreground");
    *snap_p = snap;
    return TACL_OK;

err_free:
    /* Destroying the split communicator clears the thread's last error:
     * the reason the set was refused must outlive it. */
    snprintf(why, sizeof(why), "%s", tacl_last_error());
    snap_free(snap, 0);
    return tacl__error(status, COLL, "%s", why);
}

TACL_EXPORT tacl_status_t tacl_snapshot_register(tacl_snapshot_t snap,
                                                 const char *name, void *ptr,
                                                 size_t bytes)
{
    tacl__snap_user_region_t *r;

    if (snap == NULL || name == NULL || name[0] == '\0' ||
        strlen(name) >= TACL__SNAP_NAME_LEN || (ptr == NULL && bytes > 0))
        return tacl__error(
            TACL_ERR_INVALID_ARG, COLL,
            "snapshot register: a set, a name of 1 to %d characters and a "
            "pointer (unless bytes is 0) are required",
            TACL__SNAP_NAME_LEN - 1);
    if (snap->peer_bytes != NULL)
        return tacl__error(
            TACL_ERR_INVALID_USAGE, COLL,
            "snapshot register: region '%s': the regions are fixed by the "
            "set's first save; create a new set to change them",
            name);
    if (snap->nregions == TACL__SNAP_MAX_REGIONS)
        return tacl__error(
            TACL_ERR_INVALID_USAGE, COLL,
            "snapshot register: region '%s': a set holds at most %d regions",
            name, TACL__SNAP_MAX_REGIONS);
    for (int i = 0; i < snap->nregions; i++)
        if (strcmp(snap->regions[i].name, name) == 0)
            return tacl__error(
                TACL_ERR_INVALID_USAGE, COLL,
                "snapshot register: region '%s' is registered already", name);
    if (bytes > 0 && tacl__memtype_detect(ptr) == TACL_MEM_CUDA)
        return tacl__error(
            TACL_ERR_UNSUPPORTED, COLL,
            "snapshot register: region '%s' is device memory, which "
            "snapshots do not take yet; register a host copy",
            name);
    r = &snap->regions[snap->nregions++];
    strcpy(r->name, name);
    r->ptr = ptr;
    r->bytes = bytes;
    return TACL_OK;
}

/*
 * Replicas' own copies serve as one another's copies: every rank's group
 * all-gathered, then each rank whose group spans m units (nodes or ranks,
 * as the domain says) is placed inside it (tacl__place_shared); the
 * others keep the placement create made.
 */
TACL_EXPORT tacl_status_t tacl_snapshot_replicated(tacl_snapshot_t snap,
                                                   int group)
{
    int32_t mine = group, *all;
    int *holders, *shared, nshared = 0;
    tacl_status_t status;

    if (snap == NULL || group < -1)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "snapshot replicated: a set and a group of -1 "
                           "(state of its own) or more are required, not "
                           "%d",
                           group);
    if (snap->used)
        return tacl__error(TACL_ERR_INVALID_USAGE, COLL,
                           "snapshot replicated: the set '%s' has saved or "
                           "restored already; declare replicas before its "
                           "first save or restore",
                           snap->key);
    all = malloc((size_t)snap->size * sizeof(*all));
    holders = malloc((size_t)snap->size * (size_t)snap->m * sizeof(int));
    shared = malloc((size_t)snap->size * sizeof(int));
    if (all == NULL || holders == NULL || shared == NULL) {
        status = tacl__error(TACL_ERR_NO_MEMORY, COLL,
                             "snapshot replicated: out of memory");
        goto out;
    }
    status = tacl_allgather(&mine, all, 1, TACL_INT32, snap->comm, NULL);
    if (status != TACL_OK)
        goto out;
    memcpy(holders, snap->holders,
           (size_t)snap->size * (size_t)snap->m * sizeof(int));
    status = tacl__place_shared(snap->size, all, snap->node_of,
                                snap->local_of, snap->m, snap->asked, holders,
                                shared);
    if (status != TACL_OK)
        goto out;
    for (int r = 0; r < snap->size; r++)
        nshared += shared[r];
    TACL_INFO(COLL,
              "snapshot set '%s': %d of %d ranks have their copies in their "
              "replicas' own (group %d here%s)",
              snap->key, nshared, snap->size, group,
              group >= 0 && !shared[snap->rank]
                  ? ": too few replicas, copies sent"
                  : "");
    free(snap->holders);
    free(snap->shared);
    snap->holders = holders;
    snap->shared = nshared > 0 ? shared : NULL;
    holders = NULL;
    if (nshared > 0)
        shared = NULL;
out:
    free(all);
    free(holders);
    free(shared);
    return status;
}

int tacl__snap_holds(const struct tacl_snapshot *snap, int source)
{
    for (int j = 0; j < snap->m; j++)
        if (tacl__snap_holder(snap, source, j) == snap->rank)
            return 1;
    return 0;
}

/* This rank's store of source, opened (and sized) for bytes a version. */
tacl_status_t tacl__snap_store_for(struct tacl_snapshot *snap, int source,
                                   uint64_t bytes, int populate)
{
    tacl__snap_store_t **st = &snap->stores[source];

    if (*st != NULL && tacl__snap_store_capacity(*st) >= bytes)
        return TACL_OK;
    tacl__snap_store_close(*st, 0);
    *st = NULL;
    return tacl__snap_store_open_as(snap->key, snap->rank, source,
                                    TACL_MAX(bytes, 1), snap->chunk, populate,
                                    st);
}

/* Post one message of the set (inside a group). */
tacl_status_t tacl__snap_post(struct tacl_snapshot *snap, int send, void *buf,
                              uint64_t bytes, int peer, int tag)
{
    if (send)
        return tacl_send_tag(buf, bytes, TACL_UINT8, peer, tag, snap->comm,
                             NULL);
    return tacl_recv_tag(buf, bytes, TACL_UINT8, peer, tag, NULL, snap->comm,
                         NULL);
}

tacl_status_t tacl__snap_post_body(struct tacl_snapshot *snap, int send,
                                   tacl__snap_store_t *st, int slot, int peer)
{
    const tacl__snap_slot_t *d = tacl__snap_store_slot(st, slot);
    uint8_t *data = tacl__snap_store_data(st, slot);
    tacl_status_t status = TACL_OK;

    if (d->nchunks > 0)
        status = tacl__snap_post(snap, send, tacl__snap_store_crcs(st, slot),
                                 4ull * d->nchunks, peer,
                                 TACL__SNAP_TAG_CRCS);
    for (uint64_t off = 0; off < d->bytes && status == TACL_OK;
         off += d->chunk_bytes)
        status = tacl__snap_post(snap, send, data + off,
                                 TACL_MIN(d->chunk_bytes, d->bytes - off),
                                 peer, TACL__SNAP_TAG_DATA);
    return status;
}

/* The receives of recv's version into its slot: the CRCs, then a
 * request a part.  Those posted are counted, for recv_finish. */
static tacl_status_t recv_post(struct tacl_snapshot *snap,
                               tacl__snap_recv_t *recv)
{
    tacl__snap_store_t *st = snap->stores[recv->source];
    const tacl__snap_slot_t *d = tacl__snap_store_slot(st, recv->slot);
    uint8_t *data = tacl__snap_store_data(st, recv->slot);
    tacl_status_t status = TACL_OK;

    if (d->nchunks == 0)
        return TACL_OK;
    recv->reqs = calloc((size_t)d->nchunks + 1, sizeof(*recv->reqs));
    if (recv->reqs == NULL)
        return tacl__error(TACL_ERR_NO_MEMORY, COLL,
                           "snapshot: out of memory");
    status = tacl_recv_tag_nb(tacl__snap_store_crcs(st, recv->slot),
                              4ull * d->nchunks, TACL_UINT8, recv->peer,
                              TACL__SNAP_TAG_CRCS, NULL, snap->comm, NULL,
                              &recv->reqs[0]);
    recv->nreqs += status == TACL_OK;
    for (uint64_t off = 0; off < d->bytes && status == TACL_OK;
         off += d->chunk_bytes) {
        status = tacl_recv_tag_nb(data + off,
                                  TACL_MIN(d->chunk_bytes, d->bytes - off),
                                  TACL_UINT8, recv->peer, TACL__SNAP_TAG_DATA,
                                  NULL, snap->comm, NULL,
                                  &recv->reqs[recv->nreqs]);
        recv->nreqs += status == TACL_OK;
    }
    return status;
}

/*
 * Wait for recv's requests in order, checking each part against its CRC
 * once it is in; every request is waited for, also after a failure.
 * The copy is committed when every part passed; a part that fails marks
 * it damaged (its message names rank, region and version).
 */
static tacl_status_t recv_finish(struct tacl_snapshot *snap,
                                 tacl__snap_recv_t *recv)
{
    tacl__snap_store_t *st = snap->stores[recv->source];
    tacl_status_t status = TACL_OK, checked = TACL_OK;
    int nchunks = (int)tacl__snap_store_slot(st, recv->slot)->nchunks;

    for (int i = 0; i < recv->nreqs; i++) {
        tacl_status_t got = tacl_request_wait(recv->reqs[i]);

        tacl_request_free(recv->reqs[i]);
        status = status != TACL_OK ? status : got;
        if (i > 0 && status == TACL_OK && checked == TACL_OK)
            checked = tacl__snap_store_check_chunk(st, recv->slot,
                                                   (uint32_t)(i - 1));
    }
    free(recv->reqs);
    recv->reqs = NULL;
    if (status == TACL_OK && recv->nreqs < (nchunks > 0 ? nchunks + 1 : 0))
        status = TACL_ERR_INTERNAL; /* a post failed: its error is set */
    recv->damaged = status == TACL_OK && checked != TACL_OK;
    if (status != TACL_OK || checked != TACL_OK)
        return status != TACL_OK ? status : checked;
    tacl__snap_store_commit_unchecked(st, recv->slot);
    return TACL_OK;
}

/* A group of posts: the posts' failure wins over the end's status. */
static tacl_status_t group_end(tacl_status_t posted)
{
    tacl_status_t ended = tacl_group_end();

    return posted != TACL_OK ? posted : ended;
}

tacl_status_t tacl__snap_move(struct tacl_snapshot *snap,
                              const tacl__snap_send_t *sends, int nsends,
                              tacl__snap_recv_t *recvs, int nrecvs,
                              const char *what, uint64_t version)
{
    tacl_snapshot_stats_t *st = &snap->stats;
    tacl_status_t status = TACL_OK;
    uint64_t t = tacl__now_ns();

    /* The headers first: a receiver sizes its store from them. */
    tacl_group_start();
    for (int i = 0; i < nsends && status == TACL_OK; i++)
        status = tacl__snap_post(snap, 1,
                                 (void *)tacl__snap_store_slot(sends[i].st,
                                                               sends[i].slot),
                                 sizeof(tacl__snap_slot_t), sends[i].peer,
                                 TACL__SNAP_TAG_HEADER);
    for (int i = 0; i < nrecvs && status == TACL_OK; i++)
        status = tacl__snap_post(snap, 0, &recvs[i].desc,
                                 sizeof(recvs[i].desc), recvs[i].peer,
                                 TACL__SNAP_TAG_HEADER);
    status = group_end(status);
    for (int i = 0; i < nrecvs && status == TACL_OK; i++) {
        status = tacl__snap_store_for(snap, recvs[i].source,
                                      recvs[i].desc.bytes, 0);
        if (status == TACL_OK)
            status =
                tacl__snap_store_begin_copy(snap->stores[recvs[i].source],
                                            &recvs[i].desc, &recvs[i].slot);
    }
    /* The bodies only if every receiver has room: a sender would wait
     * for a receive that never comes. */
    status = tacl__snap_agree(snap, status, what, version);
    st->restore_header_seconds += tacl__snap_lap(&t);
    if (status != TACL_OK)
        return status;
    /* Each received part is its own request, so that it is checked as
     * it lands while the next ones travel; they are posted before this
     * rank's sends start. */
    for (int i = 0; i < nrecvs; i++) {
        recvs[i].reqs = NULL;
        recvs[i].nreqs = 0;
    }
    for (int i = 0; i < nrecvs && status == TACL_OK; i++)
        status = recv_post(snap, &recvs[i]);
    if (nsends > 0) {
        tacl_group_start();
        for (int i = 0; i < nsends && status == TACL_OK; i++)
            status = tacl__snap_post_body(snap, 1, sends[i].st,
                                          sends[i].slot, sends[i].peer);
        status = group_end(status);
    }
    for (int i = 0; i < nrecvs; i++) {
        tacl_status_t got = recv_finish(snap, &recvs[i]);

        status = status != TACL_OK ? status : got;
        st->restore_bytes_fetched += recvs[i].desc.bytes;
    }
    st->restore_fetch_seconds += tacl__snap_lap(&t);
    return status;
}

tacl_status_t tacl__snap_agree_flag(struct tacl_snapshot *snap,
                                   tacl_status_t mine, int flag,
                                   const char *what, uint64_t version,
                                   int *any_p)
{
    int32_t me[2] = {mine, flag != 0},
            *all = malloc(2 * (size_t)snap->size * sizeof(*all));
    char why[TACL__ERROR_LEN];
    tacl_status_t status;
    int any = 0;

    if (all == NULL)
        return tacl__error(TACL_ERR_NO_MEMORY, COLL,
                           "snapshot %s: out of memory", what);
    /* The all-gather clears the thread's last error: keep this rank's. */
    snprintf(why, sizeof(why), "%s", tacl_last_error());
    status = tacl_allgather(me, all, 2, TACL_INT32, snap->comm, NULL);
    for (int r = 0; r < snap->size && status == TACL_OK; r++) {
        any |= all[2 * r + 1];
        if (all[2 * r] != TACL_OK && mine == TACL_OK)
            status = tacl__error(TACL_ERR_REMOTE, COLL,
                                 "snapshot %s of version %llu failed on rank "
                                 "%d (%s); see its message",
                                 what, (unsigned long long)version, r,
                                 tacl_status_string(all[2 * r]));
    }
    free(all);
    if (any_p != NULL)
        *any_p = any;
    if (mine != TACL_OK)
        return tacl__error(mine, COLL, "%s", why);
    return status;
}

tacl_status_t tacl__snap_agree(struct tacl_snapshot *snap, tacl_status_t mine,
                               const char *what, uint64_t version)
{
    return tacl__snap_agree_flag(snap, mine, 0, what, version, NULL);
}

TACL_EXPORT tacl_status_t tacl_snapshot_latest(tacl_snapshot_t snap,
                                               int *found_p,
                                               uint64_t *version_p)
{
    if (snap == NULL || found_p == NULL || version_p == NULL)
        return tacl__error(
            TACL_ERR_INVALID_ARG, COLL,
            "snapshot latest: the set, found_p and version_p are required");
    *found_p = snap->have_latest;
    *version_p = snap->have_latest ? snap->latest : 0;
    return TACL_OK;
}

TACL_EXPORT tacl_status_t tacl_snapshot_destroy(tacl_snapshot_t snap,
                                                int purge)
{
    tacl_status_t status;

    if (snap == NULL)
        return TACL_OK;
    if (snap->inflight_on && !atomic_load(&snap->inflight_done))
        return tacl__error(TACL_ERR_INVALID_USAGE, COLL,
                           "snapshot destroy: the save of version %llu is in "
                           "flight; wait for its request first",
                           (unsigned long long)snap->inflight);
    if (tacl__snap_flush_running(snap))
        return tacl__error(TACL_ERR_INVALID_USAGE, COLL,
                           "snapshot destroy: a background flush is in "
                           "flight; wait for its request first");
    tacl__snap_flush_wait(snap, -1);
    /* Nobody purges a store a peer may still be reading. */
    status = tacl_barrier(snap->comm, NULL);
    snap_free(snap, purge);
    return status;
}
