/*
 * The scratch pool.  See scratch.h.
 */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "tacl.h"
#include "device.h"
#include "scratch.h"

#define SCRATCH_HUGE (2u << 20)

/* Whether the kernel gives huge pages to memory advised so: not "never". */
static int thp_available(void)
{
    static _Atomic int known = -1;
    int v = atomic_load(&known);

    if (v < 0) {
        char line[128] = "";
        FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");

        if (f) {
            if (!fgets(line, sizeof(line), f))
                line[0] = '\0';
            fclose(f);
        }
        v = line[0] != '\0' && strstr(line, "[never]") == NULL;
        atomic_store(&known, v);
    }
    return v;
}

static void *scratch_alloc(uint64_t size)
{
    size_t align = size >= SCRATCH_HUGE ? SCRATCH_HUGE : 4096;
    void *ptr;

    if (posix_memalign(&ptr, align, size) != 0)
        return NULL;
#ifdef MADV_HUGEPAGE
    /* Advice only: without transparent huge pages it changes nothing. */
    if (align == SCRATCH_HUGE)
        (void)madvise(ptr, size, MADV_HUGEPAGE);
#endif
    return ptr;
}

static void scratch_free(const tacl__scratch_pool_t *pool, void *ptr,
                         int shared)
{
    if (shared == TACL__SCRATCH_DEVICE)
        tacl__dev_free(ptr, pool->device);
    else if (shared)
        tacl_mem_free(ptr);
    else
        free(ptr);
}

int tacl__scratch_pinnable(uint64_t size)
{
#ifdef MADV_HUGEPAGE
    return size >= SCRATCH_HUGE && thp_available();
#else
    (void)size;
    return 0;
#endif
}

/* Scratch peers can map, device scratch, or ordinary scratch. */
static void *scratch_new(const tacl__scratch_pool_t *pool, uint64_t size,
                         int shared)
{
    void *ptr = NULL;

    if (shared == TACL__SCRATCH_DEVICE)
        return tacl__dev_malloc(size, pool->device);
    if (!shared)
        return scratch_alloc(size);
    return tacl_mem_alloc(&ptr, size, TACL_MEM_HOST) == TACL_OK ? ptr : NULL;
}

/*
 * Device scratch is never cudaFree'd while operations run: cudaFree waits
 * for the whole device, which may be waiting (a caller's stream) for an
 * operation that needs this thread or the lock it holds.  A device buffer
 * that leaves the pool is kept on a list freed by tacl__scratch_fini;
 * device sizes are powers of two, so a slot's discarded buffers add up to
 * less than its current one.
 */
static void retire(tacl__scratch_pool_t *pool, void *ptr, int shared)
{
    tacl__scratch_retired_t *r;

    if (shared != TACL__SCRATCH_DEVICE || ptr == NULL) {
        scratch_free(pool, ptr, shared);
        return;
    }
    r = malloc(sizeof(*r));
    if (r == NULL)
        return; /* lost until exit rather than a device-wide wait */
    r->ptr = ptr;
    r->next = pool->retired;
    pool->retired = r;
}

static uint64_t device_size(uint64_t size)
{
    uint64_t p = 65536;

    while (p < size && p < (1ull << 62))
        p <<= 1;
    return p;
}

void *tacl__scratch_get(tacl__scratch_pool_t *pool, uint64_t size,
                        int shared)
{
    tacl__scratch_t *best = NULL, *spare = NULL;
    void *ptr;

    if (size == 0)
        size = 64;
    if (shared == TACL__SCRATCH_DEVICE)
        size = device_size(size);
    for (int i = 0; i < TACL__SCRATCH_SLOTS; i++) {
        tacl__scratch_t *s = &pool->slot[i];
        if (s->in_use)
            continue;
        if (s->shared == shared && s->size >= size &&
            (best == NULL || s->size < best->size))
            best = s;
        else if (spare == NULL || s->size < spare->size)
            spare = s;
    }
    if (best == NULL && spare != NULL) {
        retire(pool, spare->ptr, spare->shared);
        spare->ptr = NULL;
        spare->size = 0;
        if ((ptr = scratch_new(pool, size, shared)) == NULL)
            return NULL;
        spare->ptr = ptr;
        spare->size = size;
        spare->shared = shared;
        best = spare;
    }
    if (best != NULL) {
        best->in_use = 1;
        return best->ptr;
    }
    /* Every slot busy: an unpooled buffer, freed on put. */
    return scratch_new(pool, size, shared);
}

void tacl__scratch_put(tacl__scratch_pool_t *pool, void *ptr, int shared)
{
    for (int i = 0; i < TACL__SCRATCH_SLOTS; i++) {
        if (pool->slot[i].ptr == ptr && pool->slot[i].in_use) {
            pool->slot[i].in_use = 0;
            return;
        }
    }
    retire(pool, ptr, shared);
}

void tacl__scratch_fini(tacl__scratch_pool_t *pool)
{
    /* A slot still in use belongs to a finished execution whose request
     * is not freed yet; that put returns it (as an unpooled buffer). */
    for (int i = 0; i < TACL__SCRATCH_SLOTS; i++) {
        if (!pool->slot[i].in_use)
            scratch_free(pool, pool->slot[i].ptr, pool->slot[i].shared);
        pool->slot[i] = (tacl__scratch_t){0};
    }
    while (pool->retired != NULL) {
        tacl__scratch_retired_t *r = pool->retired;
        pool->retired = r->next;
        tacl__dev_free(r->ptr, pool->device);
        free(r);
    }
}
