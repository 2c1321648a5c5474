/*
 * tacl_mem_alloc(): host memory in shared segments, and the table that
 * tells the shm transport a buffer lies in one.  See memseg.h.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "cuda_mem.h"
#include "log.h"
#include "memseg.h"
#include "tacl.h"

#define MEMSEG_MAGIC 0x7461636c6d656d31ull /* "taclmem1" */
/* Segments this large start on a huge-page boundary, so that where the
 * system backs shared memory with huge pages, they can be. */
#define MEMSEG_HUGE ((uint64_t)2 << 20)

/** The last page of a segment. */
typedef struct {
    uint64_t magic;
    uint64_t id;
    _Atomic uint32_t freed;
} memseg_hdr_t;

typedef struct memseg {
    struct memseg *next;
    uint8_t *base;
    uint64_t data;     /* bytes for the caller, a whole number of pages */
    uint64_t size;     /* mapped: data and the header page */
    uint64_t id;
    int fd;            /* -1: private memory no peer can map */
} memseg_t;

static pthread_mutex_t memseg_lock = PTHREAD_MUTEX_INITIALIZER;
static memseg_t *memseg_list;
static uint64_t memseg_next_id;

static uint64_t page_size(void)
{
    long page = sysconf(_SC_PAGESIZE);

    return page > 0 ? (uint64_t)page : 4096;
}

static memseg_hdr_t *header_of(const void *base, uint64_t size)
{
    return (memseg_hdr_t *)((uint8_t *)base + size - page_size());
}

/* Map fd's size bytes shared, on a huge-page boundary when that large. */
static void *map_aligned(int fd, uint64_t size)
{
    uint64_t align = size >= MEMSEG_HUGE ? MEMSEG_HUGE : page_size();
    uint8_t *area, *at;
    void *ptr;

    area = mmap(NULL, size + align, PROT_NONE,
                MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (area == MAP_FAILED)
        return NULL;
    at = (uint8_t *)(TACL_DIV_UP((uintptr_t)area, align) * align);
    ptr = mmap(at, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd,
               0);
    if (ptr == MAP_FAILED) {
        munmap(area, size + align);
        return NULL;
    }
    if (at > area)
        munmap(area, (size_t)(at - area));
    if (area + align > at)
        munmap(at + size, (size_t)(area + align - at));
#ifdef MADV_HUGEPAGE
    if (align == MEMSEG_HUGE)
        (void)madvise(ptr, size, MADV_HUGEPAGE);  /* advice only */
#endif
    return ptr;
}

/* A memfd of size bytes with its pages allocated; -1 with errno if not. */
/* One value from a file of "NAME: VALUE kB" lines, in bytes; 0 if absent. */
static uint64_t meminfo_bytes(const char *text, const char *name)
{
    const char *at = strstr(text, name);
    unsigned long long kb;

    if (at == NULL || sscanf(at + strlen(name), ": %llu", &kb) != 1)
        return 0;
    return (uint64_t)kb << 10;
}

/* A cgroup file's number, UINT64_MAX when it says "max" or is absent. */
static uint64_t cgroup_value(const char *dir, const char *name)
{
    char path[512], buf[64] = "";
    FILE *f;
    unsigned long long v;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    if ((f = fopen(path, "r")) == NULL)
        return UINT64_MAX;
    if (fgets(buf, sizeof(buf), f) == NULL || sscanf(buf, "%llu", &v) != 1)
        v = UINT64_MAX;
    fclose(f);
    return (uint64_t)v;
}

/*
 * What the memory cgroup of this process still allows, UINT64_MAX if it
 * has no limit or none can be read: cgroup v2 (memory.max) or v1
 * (memory.limit_in_bytes), in the process's own cgroup.
 */
static uint64_t cgroup_headroom(void)
{
    char line[512], dir[600] = "";
    const char *limit_file = NULL, *usage_file = NULL;
    FILE *f = fopen("/proc/self/cgroup", "r");
    uint64_t limit, used;

    if (f == NULL)
        return UINT64_MAX;
    while (fgets(line, sizeof(line), f) != NULL) {
        char *path;
        line[strcspn(line, "\n")] = '\0';
        if ((path = strstr(line, ":memory:")) != NULL) {
            snprintf(dir, sizeof(dir), "/sys/fs/cgroup/memory%s", path + 8);
            limit_file = "memory.limit_in_bytes";
            usage_file = "memory.usage_in_bytes";
            break;
        }
        if (strncmp(line, "0::", 3) == 0) {
            snprintf(dir, sizeof(dir), "/sys/fs/cgroup%s", line + 3);
            limit_file = "memory.max";
            usage_file = "memory.current";
        }
    }
    fclose(f);
    if (limit_file == NULL)
        return UINT64_MAX;
    limit = cgroup_value(dir, limit_file);
    used = cgroup_value(dir, usage_file);
    if (limit == UINT64_MAX || used == UINT64_MAX)
        return UINT64_MAX;
    return limit > used ? limit - used : 0;
}

/*
 * Bytes this process could still reserve without the kernel's
 * out-of-memory killer stepping in: what /proc/meminfo calls available
 * plus free swap, and no more than the memory cgroup leaves.  UINT64_MAX
 * when nothing can be read.  A memfd's pages are reserved up front
 * (fallocate) and no tmpfs size limit applies to it, so without this
 * check a request larger than the machine is granted page by page until
 * the OOM killer ends some process.
 */
static uint64_t memory_available(void)
{
    char text[4096];
    FILE *f = fopen("/proc/meminfo", "r");
    size_t n;
    uint64_t avail = UINT64_MAX;

    if (f != NULL) {
        n = fread(text, 1, sizeof(text) - 1, f);
        fclose(f);
        text[n] = '\0';
        if (strstr(text, "MemAvailable") != NULL)
            avail = meminfo_bytes(text, "MemAvailable") +
                    meminfo_bytes(text, "SwapFree");
    }
    return TACL_MIN(avail, cgroup_headroom());
}

static int make_memfd(uint64_t id, uint64_t size)
{
    char name[48];
    int fd, err;

    snprintf(name, sizeof(name), "tacl-mem-%llu", (unsigned long long)id);
    fd = memfd_create(name, MFD_CLOEXEC);
    if (fd < 0)
        return -1;
    /* Allocate now: memory that runs out later would be a SIGBUS on first
     * touch instead of an error here. */
    err = fallocate(fd, 0, 0, (off_t)size);
    if (err != 0 && (errno == EOPNOTSUPP || errno == ENOSYS))
        err = ftruncate(fd, (off_t)size);
    if (err != 0) {
        int saved = errno;

        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}

TACL_EXPORT tacl_status_t tacl_mem_alloc(void **ptr_p, size_t size,
                                         tacl_memtype_t memtype)
{
    uint64_t page = page_size(), data, total, avail;
    memseg_t *seg;
    tacl_status_t status = TACL_OK;

    if (ptr_p == NULL)
        return tacl__error(TACL_ERR_INVALID_ARG, ALLOC,
                           "tacl_mem_alloc: NULL ptr_p");
    *ptr_p = NULL;
    if (memtype == TACL_MEM_CUDA && size == 0)
        return tacl__error(TACL_ERR_INVALID_ARG, ALLOC,
                           "tacl_mem_alloc: size 0");
    if (memtype == TACL_MEM_CUDA)
        return tacl__cuda_mem_alloc(size, ptr_p);
    if (memtype != TACL_MEM_AUTO && memtype != TACL_MEM_HOST)
        return tacl__error(TACL_ERR_INVALID_ARG, ALLOC,
                           "tacl_mem_alloc: invalid memory type %d",
                           (int)memtype);
    if (size == 0)
        return tacl__error(TACL_ERR_INVALID_ARG, ALLOC,
                           "tacl_mem_alloc: size 0");
    if ((uint64_t)size > UINT64_MAX / 2 - 2 * MEMSEG_HUGE)
        return tacl__error(TACL_ERR_INVALID_ARG, ALLOC,
                           "tacl_mem_alloc: size %zu is too large", size);
    data = TACL_DIV_UP((uint64_t)size, page) * page;
    total = data + page;
    avail = memory_available();
    if (total > avail)
        return tacl__error(TACL_ERR_NO_MEMORY, ALLOC,
                           "tacl_mem_alloc: %zu bytes asked for, %llu "
                           "available (memory the kernel can still give, "
                           "swap and cgroup limit counted)",
                           size, (unsigned long long)avail);
    seg = calloc(1, sizeof(*seg));
    if (seg == NULL)
        return tacl__error(TACL_ERR_NO_MEMORY, ALLOC,
                           "tacl_mem_alloc: out of memory");

    pthread_mutex_lock(&memseg_lock);
    seg->id = ++memseg_next_id;
    pthread_mutex_unlock(&memseg_lock);
    seg->data = data;
    seg->size = total;
    seg->fd = make_memfd(seg->id, total);
    if (seg->fd >= 0) {
        seg->base = map_aligned(seg->fd, total);
        if (seg->base == NULL) {
            close(seg->fd);
            seg->fd = -1;
        }
    } else if (errno == ENOSPC || errno == ENOMEM) {
        status = tacl__error(TACL_ERR_NO_MEMORY, ALLOC,
                             "tacl_mem_alloc: cannot allocate %zu bytes of "
                             "shared memory: %m", size);
    }
    if (seg->base == NULL && status == TACL_OK) {
        /* No shareable memory here: still memory, which peers copy by
         * cross-memory attach like any other. */
        TACL_INFO(ALLOC, "tacl_mem_alloc: no shared segment (%m); "
                  "allocating private memory");
        seg->base = mmap(NULL, total, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (seg->base == MAP_FAILED) {
            seg->base = NULL;
            status = tacl__error(TACL_ERR_NO_MEMORY, ALLOC,
                                 "tacl_mem_alloc: cannot allocate %zu "
                                 "bytes: %m", size);
        }
    }
    if (status != TACL_OK) {
        free(seg);
        return status;
    }
    header_of(seg->base, total)->magic = MEMSEG_MAGIC;
    header_of(seg->base, total)->id = seg->id;
    pthread_mutex_lock(&memseg_lock);
    seg->next = memseg_list;
    memseg_list = seg;
    pthread_mutex_unlock(&memseg_lock);
    TACL_INFO(ALLOC, "tacl_mem_alloc: %zu bytes at %p (segment %llu%s)",
              size, (void *)seg->base, (unsigned long long)seg->id,
              seg->fd < 0 ? ", private" : "");
    *ptr_p = seg->base;
    return TACL_OK;
}

TACL_EXPORT tacl_status_t tacl_mem_free(void *ptr)
{
    memseg_t **link, *seg = NULL;
    tacl_status_t status;

    if (ptr == NULL)
        return TACL_OK;
    if (tacl__cuda_mem_free(ptr, &status))
        return status;
    pthread_mutex_lock(&memseg_lock);
    for (link = &memseg_list; *link; link = &(*link)->next) {
        if ((*link)->base == ptr) {
            seg = *link;
            *link = seg->next;
            break;
        }
    }
    pthread_mutex_unlock(&memseg_lock);
    if (seg == NULL)
        return tacl__error(TACL_ERR_INVALID_ARG, ALLOC,
                           "tacl_mem_free: %p was not returned by "
                           "tacl_mem_alloc (or is already freed)", ptr);
    /* Peers that mapped it drop their mapping when they see this. */
    atomic_store(&header_of(seg->base, seg->size)->freed, 1);
    tacl__mem_released_note(seg->base, seg->data);
    munmap(seg->base, seg->size);
    if (seg->fd >= 0)
        close(seg->fd);
    free(seg);
    return TACL_OK;
}

int tacl__memseg_find(const void *ptr, uint64_t len, tacl__memseg_ref_t *ref)
{
    const uint8_t *p = ptr;
    int found = 0;

    ref->id = 0;
    pthread_mutex_lock(&memseg_lock);
    for (const memseg_t *seg = memseg_list; seg; seg = seg->next) {
        if (seg->fd < 0 || p < seg->base || p >= seg->base + seg->data ||
            len > (uint64_t)(seg->base + seg->data - p))
            continue;
        ref->id = seg->id;
        ref->size = seg->size;
        ref->offset = (uint64_t)(p - seg->base);
        ref->fd = seg->fd;
        found = 1;
        break;
    }
    pthread_mutex_unlock(&memseg_lock);
    return found;
}

void *tacl__memseg_attach(pid_t pid, const tacl__memseg_ref_t *ref)
{
    char path[64];
    struct stat st;
    const memseg_hdr_t *hdr;
    void *base;
    int fd;

    if (ref->id == 0 || ref->size < page_size() || ref->fd < 0)
        return NULL;
    snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)pid, (int)ref->fd);
    fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        TACL_INFO(ALLOC, "cannot open segment %llu of pid %d (%s: %m); "
                  "copying by cross-memory attach",
                  (unsigned long long)ref->id, (int)pid, path);
        return NULL;
    }
    /* The descriptor may have been closed and reused since the message
     * named it: check the size before mapping, then the header. */
    if (fstat(fd, &st) != 0 || (uint64_t)st.st_size != ref->size) {
        close(fd);
        TACL_INFO(ALLOC, "descriptor %d of pid %d is not segment %llu",
                  (int)ref->fd, (int)pid, (unsigned long long)ref->id);
        return NULL;
    }
    base = mmap(NULL, ref->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (base == MAP_FAILED) {
        TACL_INFO(ALLOC, "cannot map segment %llu of pid %d: %m",
                  (unsigned long long)ref->id, (int)pid);
        return NULL;
    }
    hdr = header_of(base, ref->size);
    if (hdr->magic != MEMSEG_MAGIC || hdr->id != ref->id ||
        atomic_load(&hdr->freed)) {
        munmap(base, ref->size);
        TACL_INFO(ALLOC, "descriptor %d of pid %d is not segment %llu",
                  (int)ref->fd, (int)pid, (unsigned long long)ref->id);
        return NULL;
    }
    TACL_INFO(ALLOC, "mapped segment %llu of pid %d (%llu bytes)",
              (unsigned long long)ref->id, (int)pid,
              (unsigned long long)ref->size);
    return base;
}

int tacl__memseg_freed(const void *base, uint64_t size)
{
    return atomic_load(&header_of(base, size)->freed) != 0;
}

void tacl__memseg_detach(void *base, uint64_t size)
{
    munmap(base, size);
}

int tacl__memseg_range(const void *ptr, uint64_t len, uintptr_t *base_p,
                       uint64_t *bytes_p)
{
    const uint8_t *p = ptr;
    int found = 0;

    pthread_mutex_lock(&memseg_lock);
    for (const memseg_t *seg = memseg_list; seg && !found; seg = seg->next) {
        if (p < seg->base || p >= seg->base + seg->data ||
            len > (uint64_t)(seg->base + seg->data - p))
            continue;
        *base_p = (uintptr_t)seg->base;
        *bytes_p = seg->data;
        found = 1;
    }
    pthread_mutex_unlock(&memseg_lock);
    return found;
}
