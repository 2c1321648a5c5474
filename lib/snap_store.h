/*
 * The node-local snapshot store (snap_store.c): one named POSIX shared
 * memory object per (job key, holder rank, source rank) keeping the two
 * newest versions of the source's registered regions, so that it outlives
 * the process that wrote it (a restarted process, or a peer restoring,
 * finds it) but not the node (a lost node takes its stores along).
 *
 * Every slot has a header (version, region names and sizes, a state and a
 * checksum of the header itself) and a CRC32C per chunk of its data, so a
 * flipped byte, a truncated object or a slot of another version or layout
 * is detected with a message naming the source rank, the region and the
 * version.  Writing a version goes to the slot that does not hold the
 * newest complete one, so the previous complete version stays readable
 * until the new one is committed.
 */
#ifndef TACL_LIB_SNAP_STORE_H
#define TACL_LIB_SNAP_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "tacl.h"

#define TACL__SNAP_NAME_LEN 48
#define TACL__SNAP_MAX_REGIONS 32
#define TACL__SNAP_SLOTS 2

/** A region of a version as the store records it. */
typedef struct {
    char name[TACL__SNAP_NAME_LEN];
    uint64_t bytes;
} tacl__snap_region_t;

/** The description of one slot, as stored and as sent to a peer. */
typedef struct {
    uint64_t version; /* the step the caller saved */
    uint32_t state;   /* TACL__SNAP_EMPTY, _WRITING or _COMPLETE */
    uint32_t nregions;
    uint64_t bytes;       /* data bytes: the regions one after another */
    uint32_t chunk_bytes; /* CRC granularity */
    uint32_t nchunks;
    uint32_t meta_crc; /* CRC32C of this header with state, meta_crc 0 */
    uint32_t nranks;   /* the size of the job that saved it */
    tacl__snap_region_t regions[TACL__SNAP_MAX_REGIONS];
} tacl__snap_slot_t;

enum {
    TACL__SNAP_EMPTY = 0,
    TACL__SNAP_WRITING = 1,
    TACL__SNAP_COMPLETE = 2
};

typedef struct tacl__snap_store tacl__snap_store_t;

/**
 * Open the store of source's state kept by holder under key.  With
 * capacity > 0 it is created when absent (or remade when it cannot hold
 * capacity bytes per version), keeping what it holds otherwise; with
 * capacity 0 an absent store is TACL_ERR_INVALID_USAGE (quietly: *store_p
 * NULL), a damaged header TACL_ERR_INTERNAL with the reason.
 */
tacl_status_t tacl__snap_store_open(const char *key, int holder, int source,
                                    uint64_t capacity, uint32_t chunk_bytes,
                                    tacl__snap_store_t **store_p);

/**
 * tacl__snap_store_open, its pages populated at once (populate 1, as a
 * save wants: its copy runs in the caller's thread) or on first touch
 * (0, as a restore's fetch wants: the receives touch them as the bytes
 * arrive, while the link is the bound, instead of zeroing two slots
 * before the first byte may come).
 */
tacl_status_t tacl__snap_store_open_as(const char *key, int holder,
                                       int source, uint64_t capacity,
                                       uint32_t chunk_bytes, int populate,
                                       tacl__snap_store_t **store_p);

/** Data bytes a version may have in this store. */
uint64_t tacl__snap_store_capacity(const tacl__snap_store_t *st);

/** Unmap and close; with purge also remove the shared memory object. */
void tacl__snap_store_close(tacl__snap_store_t *st, int purge);

/** Remove the object of (key, holder, source) whether open or not. */
void tacl__snap_store_unlink(const char *key, int holder, int source);

/**
 * Start writing version, saved by a job of nranks ranks, into a slot
 * holding that version or a later one (abandoned by a restore), else the
 * slot not holding the newest complete version, with the given regions
 * (the bytes and chunks follow from them and the store's chunk size);
 * *slot_p gets the slot.
 */
/** The slot tacl__snap_store_begin would take for version. */
int tacl__snap_store_next_slot(tacl__snap_store_t *st, uint64_t version);

tacl_status_t tacl__snap_store_begin(tacl__snap_store_t *st, uint64_t version,
                                     uint32_t nranks,
                                     const tacl__snap_region_t *regions,
                                     int nregions, int *slot_p);

/**
 * Start writing a copy of a peer's slot exactly as described by desc
 * (the header the peer sent); *slot_p gets the slot.
 */
tacl_status_t tacl__snap_store_begin_copy(tacl__snap_store_t *st,
                                          const tacl__snap_slot_t *desc,
                                          int *slot_p);

/** Replace the description of a slot being written; its state stays. */
void tacl__snap_store_describe(tacl__snap_store_t *st, int slot,
                               const tacl__snap_slot_t *desc);

/** Empty a slot (a copy found bad before use). */
void tacl__snap_store_discard(tacl__snap_store_t *st, int slot);

/**
 * Commit a slot whose CRCs are in place without checking them now: a
 * peer's copy (a restore verifies every copy before using it), or the
 * own copy written by tacl__snap_store_write.
 */
void tacl__snap_store_commit_unchecked(tacl__snap_store_t *st, int slot);

/** The slot's data (desc->bytes) and its per-chunk CRCs (nchunks). */
uint8_t *tacl__snap_store_data(tacl__snap_store_t *st, int slot);
uint32_t *tacl__snap_store_crcs(tacl__snap_store_t *st, int slot);

/** The slot's header. */
const tacl__snap_slot_t *tacl__snap_store_slot(tacl__snap_store_t *st,
                                               int slot);

/**
 * Copy len bytes from src to offset off of a slot's data and take its
 * chunks' CRCs as it goes (one pass, tacl__crc32c_copy).  A slot is
 * written so from offset 0 on, each call where the last ended, and then
 * committed with tacl__snap_store_commit_unchecked: a chunk's CRC
 * continues from the one the previous call left.
 */
void tacl__snap_store_write(tacl__snap_store_t *st, int slot, uint64_t off,
                            const void *src, uint64_t len);

/** Compute the chunk CRCs of a slot written in place, and commit it. */
void tacl__snap_store_commit(tacl__snap_store_t *st, int slot);

/** The region or regions chunk c of a slot covers, as "region 'a'" or
 * "regions 'a' to 'b'", in out (len bytes); returns out. */
const char *tacl__snap_store_chunk_regions(tacl__snap_store_t *st, int slot,
                                          uint32_t c, char *out,
                                          size_t len);

/**
 * Check chunk c of a slot against its CRC (in tacl__snap_store_crcs);
 * the message names the source rank, the region(s) and the version.
 */
tacl_status_t tacl__snap_store_check_chunk(tacl__snap_store_t *st, int slot,
                                          uint32_t c);

/**
 * Check a slot written from a peer's data against the CRCs it sent (in
 * tacl__snap_store_crcs already), and commit it when they agree.
 */
tacl_status_t tacl__snap_store_commit_checked(tacl__snap_store_t *st,
                                              int slot);

/**
 * Whether slot holds a complete, intact copy: its header checksum, its
 * size within the object, and every chunk's CRC.  On failure the message
 * names the source rank, the region and the version; TACL_ERR_INTERNAL.
 */
tacl_status_t tacl__snap_store_verify(tacl__snap_store_t *st, int slot);

/**
 * tacl__snap_store_verify without the chunks' CRCs: the slot is complete,
 * its header intact and its data within the object, so it may be read
 * (and sent, the receiver checking the CRCs).
 */
tacl_status_t tacl__snap_store_verify_header(tacl__snap_store_t *st,
                                             int slot);

/**
 * Record that slot's version was found equal to the copies of the
 * ranks declared its replicas (tacl_snapshot_replicated), so that a
 * restore may hand it to them; rewriting the slot forgets it.
 */
void tacl__snap_store_mark_matched(tacl__snap_store_t *st, int slot);

/** Whether slot holds a complete version marked matched. */
int tacl__snap_store_matched(tacl__snap_store_t *st, int slot);

/** Forget every version after version (a restore abandoned them). */
void tacl__snap_store_drop_after(tacl__snap_store_t *st, uint64_t version);

/** The slot holding version complete (not verified), or -1. */
int tacl__snap_store_find(tacl__snap_store_t *st, uint64_t version);

#endif /* TACL_LIB_SNAP_STORE_H */
