/*
 * A snapshot set's state and the helpers its entry points share
 * (snapshot.c: create, register, save, destroy, and moving a stored
 * version between ranks; snap_restore.c: restore).  Internal to lib/.
 */
#ifndef TACL_LIB_SNAPSHOT_H
#define TACL_LIB_SNAPSHOT_H

#include <pthread.h>
#include <stdatomic.h>

#include "placement.h"
#include "snap_store.h"
#include "tacl.h"

typedef struct {
    char name[TACL__SNAP_NAME_LEN];
    void *ptr;
    uint64_t bytes;
} tacl__snap_user_region_t;

struct tacl_snapshot {
    tacl_comm_t comm; /* the set's own, split from the user's */
    int rank, size;
    int m;
    tacl_snapshot_domain_t domain;
    char key[65];
    uint32_t chunk;          /* R / p: message and checksum unit */
    tacl__placement_t place; /* over nodes or ranks */
    tacl__place_kind_t asked; /* the configuration's placement */
    int *node_of, *local_of; /* every rank's; NULL in the rank domain */
    int *holders;            /* size * m: rank r's copies at r * m */
    int *shared;             /* size: rank r's holders are its replicas,
                                whose own copies serve as its copies
                                (tacl_snapshot_replicated); NULL: none */
    int used;                /* a save or restore ran: placement fixed */
    tacl__snap_user_region_t regions[TACL__SNAP_MAX_REGIONS];
    int nregions;
    tacl__snap_store_t **stores; /* this rank's store of each source, or
                                    NULL */
    int have_latest;
    uint64_t latest;
    /* Saving (snap_save.c).  Every rank's bytes a version, fixed by the
     * first save (NULL before it); the version in flight and what its
     * request's callback found; the headers it receives, and the slot
     * each source's copy goes to. */
    uint64_t *peer_bytes;
    int inflight_on; /* a save's version not yet agreed */
    uint64_t inflight;
    atomic_int inflight_done;   /* its request completed */
    atomic_int inflight_status; /* TACL_OK, or why it failed */
    tacl__snap_slot_t *incoming;
    int *in_slot;
    /* Replicas (shared): the CRCs each sends, the own slot they are held
     * against, and why a comparison failed (the callback cannot log). */
    uint32_t **replica_crcs;
    int own_slot;
    char replica_why[256];
    /* Pacing (tacl_snapshot_due): the bound, the last due call, the
     * steps since the last save, what it cost, and the counts. */
    double max_overhead;
    uint64_t last_due_ns, step_ns, save_ns, since_save;
    tacl_snapshot_stats_t stats;
    /* The breakdown of the last save (tacl_snapshot_stats): its own
     * copy's phases and bytes sent, set by the caller's thread; the
     * transfer's start, and its time set by the request's callback
     * before inflight_done. */
    int fused_crc; /* TACL_SNAP_FUSED_CRC */
    uint64_t agree_ns, copy_ns, checksum_ns, sent_bytes;
    uint64_t xfer_start_ns, xfer_ns;
    int warned_busy, warned_overhead;
    /* A background flush (snap_flush.c), in the caller's thread only: a
     * thread started and not yet joined, and the own slot it reads. */
    int flush_busy;
    int flush_slot;
    pthread_t flush_thread;
    atomic_int flush_ended; /* set by the thread before its request ends */
    /* SCHEDULED traffic (snap_sched.c), or NULL; step marks come from
     * tacl_snapshot_step, else from tacl_snapshot_due, else from the
     * saves (the calls counted). */
    struct tacl__snap_sched *sched;
    uint64_t step_calls, due_calls;
};

/* The most steps SCHEDULED traffic watches before its plan. */
#define TACL__SNAP_PROFILE_MAX 64

/** Set up SCHEDULED traffic (snapshot create), recording network use. */
tacl_status_t tacl__snap_sched_init(struct tacl_snapshot *snap,
                                    const tacl_snapshot_config_t *config);

/**
 * A step of the caller starts now: watch the one that ended, plan once
 * enough were watched, and open this step's spans (caller's thread).
 */
void tacl__snap_sched_mark(struct tacl_snapshot *snap);

/** The plan's figures into st (tacl_snapshot_stats). */
void tacl__snap_sched_stats(const struct tacl_snapshot *snap,
                            tacl_snapshot_stats_t *st);

/** Stop recording and drop the plan (NULL sched: nothing). */
void tacl__snap_sched_free(struct tacl_snapshot *snap);

/* Tags of the set's messages, on its own communicator. */
#define TACL__SNAP_TAG_HEADER 1
#define TACL__SNAP_TAG_CRCS 2
#define TACL__SNAP_TAG_DATA 3

/** Seconds since *t, which moves on to now: one phase of a breakdown. */
static inline double tacl__snap_lap(uint64_t *t)
{
    uint64_t now = tacl__now_ns(), then = *t;

    *t = now;
    return (double)(now - then) * 1e-9;
}

/** The rank holding copy j of rank r's state (j = 0: r itself). */
static inline int tacl__snap_holder(const struct tacl_snapshot *snap, int r,
                                    int j)
{
    return snap->holders[r * snap->m + j];
}

/** Whether rank r's copies are its replicas' own ones (no bodies move). */
static inline int tacl__snap_shared(const struct tacl_snapshot *snap, int r)
{
    return snap->shared != NULL && snap->shared[r];
}

/** Whether this rank keeps a copy of rank source's state. */
int tacl__snap_holds(const struct tacl_snapshot *snap, int source);

/** This rank's store of source, opened and sized for bytes a version;
 * when made anew, its pages populated at once or not (see
 * tacl__snap_store_open_as). */
tacl_status_t tacl__snap_store_for(struct tacl_snapshot *snap, int source,
                                   uint64_t bytes, int populate);

/** Post one message of bytes with tag to or from peer (in a group). */
tacl_status_t tacl__snap_post(struct tacl_snapshot *snap, int send, void *buf,
                              uint64_t bytes, int peer, int tag);

/** Post a stored version's CRCs and data, in parts of the set's chunk. */
tacl_status_t tacl__snap_post_body(struct tacl_snapshot *snap, int send,
                                   tacl__snap_store_t *st, int slot,
                                   int peer);

/** One stored version to send to a peer. */
typedef struct {
    int peer;
    tacl__snap_store_t *st;
    int slot;
} tacl__snap_send_t;

/** One version to receive from peer into this rank's store of source. */
typedef struct {
    int peer;
    int source;
    tacl__snap_slot_t desc; /* filled by tacl__snap_move */
    int slot;               /* filled by tacl__snap_move */
    int damaged;            /* set by tacl__snap_move: the copy arrived
                               whole but failed its CRCs */
    tacl_request_t *reqs;   /* tacl__snap_move's: its CRCs and parts */
    int nreqs;
} tacl__snap_recv_t;

/**
 * Move stored versions between ranks (collective): every rank passes
 * what it sends and receives (the two sides must agree).  Headers go
 * first, so receivers learn the sizes; the ranks then agree that every
 * receiver has room (what and version name the step in the messages)
 * before the bodies follow.  A received version lands in
 * snap->stores[source] (opened or grown as needed) and is committed only
 * if its chunks match the sender's CRCs.  Returns the first failure.
 * The phases' times go to the set's restore stats (header, fetch,
 * verify) and the bytes received to restore_bytes_fetched.
 */
tacl_status_t tacl__snap_move(struct tacl_snapshot *snap,
                              const tacl__snap_send_t *sends, int nsends,
                              tacl__snap_recv_t *recvs, int nrecvs,
                              const char *what, uint64_t version);

/**
 * Finish a collective step: every rank passes its own status; returns it
 * if it failed, else TACL_ERR_REMOTE naming the first rank that failed,
 * else TACL_OK.  what names the step in that message.
 */
tacl_status_t tacl__snap_agree(struct tacl_snapshot *snap, tacl_status_t mine,
                               const char *what, uint64_t version);

/**
 * tacl__snap_agree carrying a flag of each rank's: *any_p (when not
 * NULL) is 1 on every rank when some rank passed it set, whatever the
 * statuses (only an all-gather failure leaves it 0).
 */
tacl_status_t tacl__snap_agree_flag(struct tacl_snapshot *snap,
                                   tacl_status_t mine, int flag,
                                   const char *what, uint64_t version,
                                   int *any_p);

/**
 * Before a save or restore: agree on the non-blocking save in flight, if
 * any (snap_save.c).  Its request must have completed on this rank, else
 * TACL_ERR_INVALID_USAGE naming what (the calling entry point).
 */
tacl_status_t tacl__snap_settle(struct tacl_snapshot *snap, const char *what);

/**
 * Restore (snap_restore.c; collective, the in-flight save settled) the
 * newest version every rank's state has in peer memory or, with path
 * (every rank its own, or every rank NULL), in its own file: *found_p 0
 * when no rank holds a snapshot or file, else the version written into
 * the regions, or the error.
 */
tacl_status_t tacl__snap_restore_from(struct tacl_snapshot *snap,
                                      const char *path, int *found_p,
                                      uint64_t *version_p);

/**
 * The slot of this rank's own store holding version committed, for a
 * flush to path (snap_file.c); TACL_ERR_INVALID_ARG naming what is wrong
 * (no path, too long a path, a version not committed).
 */
tacl_status_t tacl__snap_file_slot(struct tacl_snapshot *snap,
                                   uint64_t version, const char *path,
                                   int *slot_p);

/**
 * Write this rank's own store's slot to path (snap_file.c): its CRCs
 * checked first, then a temporary file, synced and renamed over path.
 * Reads the slot only, so it may run in a thread of its own while the
 * caller's thread writes the other slot.
 */
tacl_status_t tacl__snap_file_write(struct tacl_snapshot *snap, int slot,
                                    const char *path);

/**
 * Wait for the background flush in flight (snap_flush.c), if it reads
 * slot of the own store (slot -1: whichever it reads): what may write
 * that slot (a save reusing it, a restore, another flush) must not
 * overwrite what the flush is writing out.  Returns at once otherwise.
 * Inline, so every file may ask without a call into snap_flush.c.
 */
static inline void tacl__snap_flush_wait(struct tacl_snapshot *snap, int slot)
{
    if (!snap->flush_busy || (slot >= 0 && slot != snap->flush_slot))
        return;
    pthread_join(snap->flush_thread, NULL);
    snap->flush_busy = 0;
}

/** Whether a background flush is started and its thread not ended. */
static inline int tacl__snap_flush_running(struct tacl_snapshot *snap)
{
    return snap->flush_busy && !atomic_load(&snap->flush_ended);
}

/**
 * The version the snapshot file at path holds, from its header, checked
 * against this set and the file's size (snap_file.c).
 */
tacl_status_t tacl__snap_file_version(struct tacl_snapshot *snap,
                                      const char *path, uint64_t *version_p);

/**
 * This rank's file into its own store, every chunk checked; a file of
 * another version than version is TACL_ERR_INTERNAL naming both.
 */
tacl_status_t tacl__snap_file_load(struct tacl_snapshot *snap,
                                   const char *path, uint64_t version);

/**
 * The own store's committed version into the registered regions, after
 * checking they have the saved layout (the message names rank, region
 * and version).
 */
tacl_status_t tacl__snap_write_regions(struct tacl_snapshot *snap,
                                      uint64_t version);

/** After every rank restored version: drop later ones, report it. */
void tacl__snap_restored(struct tacl_snapshot *snap, uint64_t version);

#endif /* TACL_LIB_SNAPSHOT_H */
