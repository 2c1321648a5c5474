/*
 * The shm transport's cache of peers' mapped segments (see shm_map.h).
 * A lookup walks the entries once: it finds the segment, unmaps on the
 * way those the peer has freed, and keeps the entry a new mapping would
 * take: a free one before any eviction, else the least recently used one
 * that no pull reads.
 */
#include <string.h>

#include "shm_map.h"

static void unmap_entry(tacl__shm_map_t *m)
{
    tacl__memseg_detach(m->base, m->size);
    memset(m, 0, sizeof(*m));
}

int tacl__shm_maps_get(tacl__shm_maps_t *maps, pid_t pid,
                       const tacl__memseg_ref_t *seg, uint32_t busy_mask)
{
    tacl__shm_map_t *e = maps->entries;
    int hit = -1, spare = -1;
    void *base;

    if (maps->failed)
        return -1;
    for (int i = 0; i < TACL_SHM_MAPS; i++) {
        tacl__shm_map_t *m = &e[i];
        int busy;

        if (m->id == seg->id && m->size == seg->size) {
            hit = i;
            continue;
        }
        busy = m->id && (busy_mask >> i & 1u);
        if (m->id && !busy && tacl__memseg_freed(m->base, m->size))
            unmap_entry(m);
        if (m->id == 0) {
            if (spare < 0 || e[spare].id != 0)
                spare = i;      /* a free entry before any eviction */
        } else if (!busy && (spare < 0 || (e[spare].id != 0 &&
                                           m->used < e[spare].used))) {
            spare = i;
        }
    }
    if (hit < 0) {
        if (spare < 0)
            return -1;
        base = tacl__memseg_attach(pid, seg);
        if (base == NULL) {
            maps->failed = 1;
            return -1;
        }
        if (e[spare].id)
            unmap_entry(&e[spare]);
        e[spare].id = seg->id;
        e[spare].size = seg->size;
        e[spare].base = base;
        hit = spare;
    }
    e[hit].used = ++maps->clock;
    return hit;
}

void tacl__shm_maps_clear(tacl__shm_maps_t *maps)
{
    for (int i = 0; i < TACL_SHM_MAPS; i++)
        if (maps->entries[i].id)
            unmap_entry(&maps->entries[i]);
}
