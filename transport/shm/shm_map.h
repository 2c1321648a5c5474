/*
 * The shm transport's cache of a peer's tacl_mem_alloc segments mapped
 * here, so that a receive pulls from such a segment with its own loads
 * and stores: no system call and no pinning per message (shm_proto.c).
 *
 * Each peer has one cache of TACL_SHM_MAPS entries.  A segment is mapped
 * the first time a request to send names it and stays mapped while it is
 * used; when every entry is taken, the least recently used one that no
 * pull reads is unmapped.  Segments the peer has freed (the allocator
 * marks them, see memseg.h) are unmapped when the cache is next looked
 * at, so a freed segment's memory is not held here.  If mapping fails
 * once, the cache stops trying and pulls go by cross-memory attach.
 */
#ifndef TACL_TRANSPORT_SHM_SHM_MAP_H
#define TACL_TRANSPORT_SHM_SHM_MAP_H

#include <stdint.h>
#include <sys/types.h>

#include "memseg.h"

/* Segments of one peer kept mapped at once. */
#define TACL_SHM_MAPS 16

/** A peer's segment mapped here. */
typedef struct {
    uint64_t id;               /* 0: the entry is free */
    uint64_t size;
    uint8_t *base;
    uint64_t used;             /* when last used, for eviction */
} tacl__shm_map_t;

/** One peer's mapped segments. */
typedef struct {
    tacl__shm_map_t entries[TACL_SHM_MAPS];
    uint64_t clock;            /* orders the uses of the entries */
    int failed;                /* mapping failed once: stop trying */
} tacl__shm_maps_t;

/**
 * The entry holding segment seg of process pid, mapping it if needed, or
 * -1 when it cannot be mapped.  Bit i of busy_mask says that a pull in flight
 * reads entry i, which is then neither evicted nor unmapped.
 */
int tacl__shm_maps_get(tacl__shm_maps_t *maps, pid_t pid,
                       const tacl__memseg_ref_t *seg, uint32_t busy_mask);

/** Unmap every segment of the cache. */
void tacl__shm_maps_clear(tacl__shm_maps_t *maps);

_Static_assert(TACL_SHM_MAPS <= 32, "busy_mask is a 32-bit mask of entries");

#endif /* TACL_TRANSPORT_SHM_SHM_MAP_H */
