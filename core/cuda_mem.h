/*
 * Device memory the processes of a node can map: what
 * tacl_mem_alloc(..., TACL_MEM_CUDA) hands out, as ncclMemAlloc.
 *
 * An allocation is cuMem (virtual memory management) memory: physical
 * memory made with cuMemCreate on the calling thread's current device
 * (device 0 when no context is current), requesting a POSIX file
 * descriptor handle, mapped at a reserved range and accessible from that
 * device.  The owner exports the descriptor once, at allocation; the
 * cuda_ipc transport passes it to a peer process over a Unix socket
 * (SCM_RIGHTS) with each message from the allocation, and the peer imports
 * and maps it once and keeps the mapping (transport/cuda_ipc).
 *
 * Each allocation has an id, unique in the process, so that a peer's
 * cached mapping is never taken for a later allocation at the same
 * address.  Freeing one that was ever shared is noted in a short ring
 * that the transport reads (tacl__cuda_mem_freed) to tell its peers to
 * drop their mappings; until they do the physical memory stays allocated.
 */
#ifndef TACL_CORE_CUDA_MEM_H
#define TACL_CORE_CUDA_MEM_H

#include <stddef.h>
#include <stdint.h>

#include "tacl.h"

/** Where a range lies in one of this process's device allocations. */
typedef struct {
    uint64_t id;       /* the allocation, unique in its process; 0: none */
    uint64_t size;     /* bytes of the allocation (granularity-rounded) */
    uint64_t offset;   /* of the range from the allocation's base */
    int device;        /* the device it lives on */
    int fd;            /* a new descriptor of it; the caller closes it */
} tacl__cuda_mem_ref_t;

/** Allocate size bytes of shareable device memory (tacl_mem_alloc). */
tacl_status_t tacl__cuda_mem_alloc(size_t size, void **ptr_p);

/**
 * Free ptr if it is one of these allocations' base: returns 1 and sets
 * *status_p; 0 when ptr is none of them (nothing is logged).
 */
int tacl__cuda_mem_free(void *ptr, tacl_status_t *status_p);

/**
 * Whether [ptr, ptr + len) lies in one allocation; fills *ref (with a
 * descriptor duplicated for the caller) when it does, and marks the
 * allocation shared, so that its free is announced.  0 also when the
 * descriptor cannot be duplicated (logged).
 */
int tacl__cuda_mem_find(const void *ptr, uint64_t len,
                        tacl__cuda_mem_ref_t *ref);

/**
 * The ids of shared allocations freed since *cursor (0 at first): up to
 * max into ids, the count returned, *cursor advanced past them.  Frees
 * older than the ring's last TACL__CUDA_MEM_FREED_RING are lost.
 */
#define TACL__CUDA_MEM_FREED_RING 256
int tacl__cuda_mem_freed(uint64_t *cursor, uint64_t *ids, int max);

/** How many frees the ring has seen: a cheap check for news. */
uint64_t tacl__cuda_mem_free_count(void);

#endif /* TACL_CORE_CUDA_MEM_H */
