/*
 * The scratch pool: a few buffers per communicator, reused across
 * operations so large collectives do not fault in fresh pages every call.
 * The executor takes a schedule's scratch buffers from it when the
 * schedule starts and gives them back when it is freed.
 *
 * Buffers of a huge page or more are aligned to it and advised huge:
 * peers pin scratch pages for every cross-memory transfer, and a 2 MB
 * page is pinned (and walked by the copy's TLB) once instead of 512
 * times.  Shared buffers come from tacl_mem_alloc, so the peers of the
 * node can map them.
 */
#ifndef TACL_EXECUTOR_SCRATCH_H
#define TACL_EXECUTOR_SCRATCH_H

#include <stdint.h>

typedef struct {
    void *ptr;
    uint64_t size;
    int in_use;
    int shared;        /* 1: from tacl_mem_alloc: peers can map it;
                          TACL__SCRATCH_DEVICE: CUDA device memory */
} tacl__scratch_t;

/** The shared argument for scratch in CUDA device memory (cudaMalloc). */
#define TACL__SCRATCH_DEVICE 2

#define TACL__SCRATCH_SLOTS 8

/* A device buffer out of the pool, freed by tacl__scratch_fini. */
typedef struct tacl__scratch_retired {
    void *ptr;
    struct tacl__scratch_retired *next;
} tacl__scratch_retired_t;

typedef struct {
    tacl__scratch_t slot[TACL__SCRATCH_SLOTS];
    int device;        /* the CUDA device of device scratch */
    tacl__scratch_retired_t *retired;
} tacl__scratch_pool_t;

/**
 * Scratch of size bytes from pool, NULL if out of memory.  shared: memory
 * peers can map (tacl_mem_alloc), or TACL__SCRATCH_DEVICE for device
 * memory of pool->device (cudaMalloc'd, kept, freed by fini).  When
 * every slot is busy the buffer is allocated outside the pool and freed
 * when it is put back.
 */
void *tacl__scratch_get(tacl__scratch_pool_t *pool, uint64_t size,
                        int shared);

/** Give back what tacl__scratch_get(pool, size, shared) returned. */
void tacl__scratch_put(tacl__scratch_pool_t *pool, void *ptr, int shared);

/** Whether scratch of size bytes is backed by huge pages (cheap to pin). */
int tacl__scratch_pinnable(uint64_t size);

/** Free the pool's idle buffers; buffers still out are freed on put. */
void tacl__scratch_fini(tacl__scratch_pool_t *pool);

#endif /* TACL_EXECUTOR_SCRATCH_H */
