/*
 * tacl_mem_alloc's device memory: cuMem allocations with POSIX file
 * descriptor handles, and the table the cuda_ipc transport reads.  See
 * cuda_mem.h.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "cu_driver.h"
#include "cuda_mem.h"
#include "memseg.h"
#include "log.h"

#if TACL_HAVE_CUDA
typedef struct cuda_alloc {
    struct cuda_alloc *next;
    CUdeviceptr base;
    uint64_t size;
    uint64_t id;
    CUmemGenericAllocationHandle handle;
    int device;
    int fd;
    int shared;        /* found for a message at least once */
} cuda_alloc_t;

static pthread_mutex_t cm_lock = PTHREAD_MUTEX_INITIALIZER;
static cuda_alloc_t *cm_list;
static uint64_t cm_next_id;
/* Shared allocations freed, by free number modulo the ring's size. */
static uint64_t cm_freed[TACL__CUDA_MEM_FREED_RING];
static _Atomic uint64_t cm_free_count;

/* An error of the driver call named what, with the driver's text. */
static tacl_status_t cu_error(CUresult res, const char *what, size_t size)
{
    return tacl__error(res == CUDA_ERROR_OUT_OF_MEMORY ? TACL_ERR_NO_MEMORY
                                                       : TACL_ERR_SYSTEM,
                       ALLOC, "tacl_mem_alloc: %s for %zu bytes of device "
                       "memory failed: %s", what, size, tacl__cu_str(res));
}

/* The calling thread's current device, or 0 when none is current. */
static int current_device(const tacl__cu_t *cu)
{
    CUdevice dev;

    return cu->cuCtxGetDevice(&dev) == CUDA_SUCCESS ? (int)dev : 0;
}

/* Create, map and export; undoes what it did on failure. */
static tacl_status_t make_alloc(const tacl__cu_t *cu, cuda_alloc_t *a,
                                size_t asked)
{
    CUmemAllocationProp prop;
    CUmemAccessDesc access;
    size_t gran = 0;
    CUresult res;
    int step = 0;

    memset(&prop, 0, sizeof(prop));
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = a->device;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    res = cu->cuMemGetAllocationGranularity(
        &gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
    if (res != CUDA_SUCCESS)
        return cu_error(res, "cuMemGetAllocationGranularity", asked);
    if (gran == 0)
        gran = 2u << 20;
    if (asked > UINT64_MAX - gran)
        return tacl__error(TACL_ERR_INVALID_ARG, ALLOC,
                           "tacl_mem_alloc: size %zu is too large", asked);
    a->size = TACL_DIV_UP((uint64_t)asked, gran) * gran;
    res = cu->cuMemCreate(&a->handle, a->size, &prop, 0);
    if (res == CUDA_SUCCESS && ++step)
        res = cu->cuMemAddressReserve(&a->base, a->size, gran, 0, 0);
    if (res == CUDA_SUCCESS && ++step)
        res = cu->cuMemMap(a->base, a->size, 0, a->handle, 0);
    if (res == CUDA_SUCCESS && ++step) {
        memset(&access, 0, sizeof(access));
        access.location = prop.location;
        access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
        res = cu->cuMemSetAccess(a->base, a->size, &access, 1);
    }
    if (res == CUDA_SUCCESS && ++step)
        res = cu->cuMemExportToShareableHandle(
            &a->fd, a->handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
    if (res == CUDA_SUCCESS)
        return TACL_OK;
    {
        static const char *const what[] = {
            "cuMemCreate", "cuMemAddressReserve", "cuMemMap",
            "cuMemSetAccess", "cuMemExportToShareableHandle"};
        tacl_status_t status = cu_error(res, what[step], asked);

        if (step >= 2)
            cu->cuMemUnmap(a->base, a->size);
        if (step >= 1)
            cu->cuMemAddressFree(a->base, a->size);
        cu->cuMemRelease(a->handle);
        return status;
    }
}

tacl_status_t tacl__cuda_mem_alloc(size_t size, void **ptr_p)
{
    const tacl__cu_t *cu = tacl__cu();
    cuda_alloc_t *a;
    tacl_status_t status;
    int res;

    *ptr_p = NULL;
    if (cu == NULL)
        return tacl__error(TACL_ERR_UNSUPPORTED, ALLOC,
                           "tacl_mem_alloc: device memory needs the CUDA "
                           "driver: %s", tacl__cu_why());
    a = calloc(1, sizeof(*a));
    if (a == NULL)
        return tacl__error(TACL_ERR_NO_MEMORY, ALLOC,
                           "tacl_mem_alloc: out of memory");
    a->fd = -1;
    a->device = current_device(cu);
    res = tacl__cu_push(a->device);
    if (res != 0) {
        status = tacl__error(TACL_ERR_SYSTEM, ALLOC,
                             "tacl_mem_alloc: cannot use CUDA device %d: %s",
                             a->device, tacl__cu_str(res));
        free(a);
        return status;
    }
    status = make_alloc(cu, a, size);
    tacl__cu_pop();
    if (status != TACL_OK) {
        free(a);
        return status;
    }
    pthread_mutex_lock(&cm_lock);
    a->id = ++cm_next_id;
    a->next = cm_list;
    cm_list = a;
    pthread_mutex_unlock(&cm_lock);
    TACL_INFO(ALLOC, "tacl_mem_alloc: %zu bytes of device memory on device "
              "%d at %p (allocation %llu, %llu bytes mapped)", size,
              a->device, (void *)(uintptr_t)a->base,
              (unsigned long long)a->id, (unsigned long long)a->size);
    *ptr_p = (void *)(uintptr_t)a->base;
    return TACL_OK;
}

int tacl__cuda_mem_free(void *ptr, tacl_status_t *status_p)
{
    const tacl__cu_t *cu = tacl__cu();
    cuda_alloc_t **link, *a = NULL;
    CUresult res = CUDA_SUCCESS;
    int pushed;

    pthread_mutex_lock(&cm_lock);
    for (link = &cm_list; *link; link = &(*link)->next) {
        if ((*link)->base == (CUdeviceptr)(uintptr_t)ptr) {
            a = *link;
            *link = a->next;
            break;
        }
    }
    if (a != NULL && a->shared) {
        uint64_t n = atomic_load(&cm_free_count);

        cm_freed[n % TACL__CUDA_MEM_FREED_RING] = a->id;
        atomic_store(&cm_free_count, n + 1);
    }
    pthread_mutex_unlock(&cm_lock);
    if (a == NULL)
        return 0;
    tacl__mem_released_note(ptr, a->size);
    /* Peers' imported handles keep the physical memory until they unmap. */
    pushed = tacl__cu_push(a->device) == 0;
    res = cu->cuMemUnmap(a->base, a->size);
    if (res == CUDA_SUCCESS)
        res = cu->cuMemAddressFree(a->base, a->size);
    if (res == CUDA_SUCCESS)
        res = cu->cuMemRelease(a->handle);
    if (pushed)
        tacl__cu_pop();
    close(a->fd);
    *status_p = res == CUDA_SUCCESS
                    ? TACL_OK
                    : tacl__error(TACL_ERR_SYSTEM, ALLOC,
                                  "tacl_mem_free: releasing device memory "
                                  "at %p failed: %s", ptr,
                                  tacl__cu_str(res));
    free(a);
    return 1;
}

int tacl__cuda_mem_find(const void *ptr, uint64_t len,
                        tacl__cuda_mem_ref_t *ref)
{
    CUdeviceptr p = (CUdeviceptr)(uintptr_t)ptr;
    int found = 0;

    ref->id = 0;
    ref->fd = -1;
    pthread_mutex_lock(&cm_lock);
    for (cuda_alloc_t *a = cm_list; a; a = a->next) {
        if (p < a->base || p >= a->base + a->size ||
            len > a->base + a->size - p)
            continue;
        ref->fd = fcntl(a->fd, F_DUPFD_CLOEXEC, 0);
        if (ref->fd < 0) {
            TACL_INFO(ALLOC, "cannot duplicate the descriptor of device "
                      "allocation %llu: %m", (unsigned long long)a->id);
            break;
        }
        ref->id = a->id;
        ref->size = a->size;
        ref->offset = p - a->base;
        ref->device = a->device;
        a->shared = 1;
        found = 1;
        break;
    }
    pthread_mutex_unlock(&cm_lock);
    return found;
}

int tacl__cuda_mem_freed(uint64_t *cursor, uint64_t *ids, int max)
{
    uint64_t end, n = 0;

    pthread_mutex_lock(&cm_lock);
    end = atomic_load(&cm_free_count);
    if (end - *cursor > TACL__CUDA_MEM_FREED_RING)
        *cursor = end - TACL__CUDA_MEM_FREED_RING;
    while (*cursor < end && n < (uint64_t)max)
        ids[n++] = cm_freed[(*cursor)++ % TACL__CUDA_MEM_FREED_RING];
    pthread_mutex_unlock(&cm_lock);
    return (int)n;
}

uint64_t tacl__cuda_mem_free_count(void)
{
    return atomic_load(&cm_free_count);
}

#else /* !TACL_HAVE_CUDA */

tacl_status_t tacl__cuda_mem_alloc(size_t size, void **ptr_p)
{
    (void)size;
    *ptr_p = NULL;
    return tacl__error(TACL_ERR_UNSUPPORTED, ALLOC,
                       "tacl_mem_alloc: device memory needs a build of "
                       "tacl with CUDA");
}

int tacl__cuda_mem_free(void *ptr, tacl_status_t *status_p)
{
    (void)ptr;
    (void)status_p;
    return 0;
}

int tacl__cuda_mem_find(const void *ptr, uint64_t len,
                        tacl__cuda_mem_ref_t *ref)
{
    (void)ptr;
    (void)len;
    ref->id = 0;
    ref->fd = -1;
    return 0;
}

int tacl__cuda_mem_freed(uint64_t *cursor, uint64_t *ids, int max)
{
    (void)cursor;
    (void)ids;
    (void)max;
    return 0;
}

uint64_t tacl__cuda_mem_free_count(void)
{
    return 0;
}
#endif
