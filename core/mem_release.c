/*
 * The release log of tacl_mem_free (memseg.h): host and device frees
 * note here the ranges they give back, and readers catch up on them.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "memseg.h"

/* The last ranges, and how many ever. */
static pthread_mutex_t released_lock = PTHREAD_MUTEX_INITIALIZER;
static tacl__mem_range_t released[TACL__MEM_RELEASED_RING];
static _Atomic uint64_t released_count;

void tacl__mem_released_note(const void *base, uint64_t len)
{
    uint64_t n;

    pthread_mutex_lock(&released_lock);
    n = atomic_load(&released_count);
    released[n % TACL__MEM_RELEASED_RING].base = (uintptr_t)base;
    released[n % TACL__MEM_RELEASED_RING].len = len;
    atomic_store(&released_count, n + 1);
    pthread_mutex_unlock(&released_lock);
}

uint64_t tacl__mem_released_count(void)
{
    return atomic_load(&released_count);
}

int tacl__mem_released(uint64_t *cursor, tacl__mem_range_t *out, int max)
{
    uint64_t end;
    int n = 0;

    if (atomic_load(&released_count) == *cursor)
        return 0;
    pthread_mutex_lock(&released_lock);
    end = atomic_load(&released_count);
    if (end - *cursor > TACL__MEM_RELEASED_RING) {
        *cursor = end;
        n = -1;
    }
    while (n >= 0 && *cursor < end && n < max)
        out[n++] = released[(*cursor)++ % TACL__MEM_RELEASED_RING];
    pthread_mutex_unlock(&released_lock);
    return n;
}
