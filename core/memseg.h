/*
 * Host memory the processes of a node can map: what tacl_mem_alloc()
 * hands out, and how a peer maps it.
 *
 * A segment is a memfd mapped shared, its data first and one page of
 * header after it (so the data keeps the mapping's alignment).  The
 * owner keeps a table of its segments; a send from inside one tells the
 * receiving process the segment's id, the owner's descriptor number and
 * the offset, and the receiver opens the descriptor through /proc (the
 * same permission as a cross-memory copy), maps the segment once and
 * copies with its own loads and stores: no pinning, no system call per
 * message, and non-temporal stores where the output is not read soon.
 *
 * The header's `freed` word lets a peer drop its mapping of a segment the
 * owner has freed; until it does, the memory stays allocated.
 */
#ifndef TACL_CORE_MEMSEG_H
#define TACL_CORE_MEMSEG_H

#include <stdint.h>
#include <sys/types.h>

/** Where a range of a process's memory lies in one of its segments. */
typedef struct {
    uint64_t id;       /* the segment, unique in its process; 0: none */
    uint64_t size;     /* bytes a peer maps (data and header) */
    uint64_t offset;   /* of the range from the segment's start */
    int32_t fd;        /* the owner's descriptor of the memfd */
} tacl__memseg_ref_t;

/**
 * Whether [ptr, ptr + len) lies inside one of this process's segments;
 * fills *ref when it does.  A range crossing a segment's end does not.
 */
int tacl__memseg_find(const void *ptr, uint64_t len, tacl__memseg_ref_t *ref);

/**
 * Map process pid's segment ref (read and write): its base, or NULL when
 * it cannot be mapped (no permission, the descriptor is not that segment
 * any more), with the reason logged at INFO.
 */
void *tacl__memseg_attach(pid_t pid, const tacl__memseg_ref_t *ref);

/** Whether the owner of a segment mapped by attach has freed it. */
int tacl__memseg_freed(const void *base, uint64_t size);

/** Unmap a segment mapped by attach. */
void tacl__memseg_detach(void *base, uint64_t size);

/**
 * Whether [ptr, ptr + len) lies inside one of this process's segments,
 * shared or private: the segment's data (its base and bytes) into
 * *base_p and *bytes_p when it does.
 */
int tacl__memseg_range(const void *ptr, uint64_t len, uintptr_t *base_p,
                       uint64_t *bytes_p);

/*
 * The release log: every tacl_mem_free, of host or device memory, notes
 * the range it gives back before the memory goes, so that a transport
 * caching something about that memory (ofi's registrations) learns it
 * went, in its own thread, by reading the log.  Reading costs one atomic
 * load while nothing was freed.
 */
typedef struct {
    uintptr_t base;
    uint64_t len;
} tacl__mem_range_t;

#define TACL__MEM_RELEASED_RING 128

/** Note that [base, base + len) is being given back (core's frees). */
void tacl__mem_released_note(const void *base, uint64_t len);

/** How many ranges were ever noted: a cursor at the present. */
uint64_t tacl__mem_released_count(void);

/**
 * The ranges noted since *cursor: up to max into out, their count
 * returned, *cursor advanced past them; -1 (and *cursor brought to the
 * present) when some were lost, being older than the ring's last
 * TACL__MEM_RELEASED_RING: the reader must then forget all it knows.
 */
int tacl__mem_released(uint64_t *cursor, tacl__mem_range_t *out, int max);

#endif /* TACL_CORE_MEMSEG_H */
