/*
 * The ofi transport's registrations.  DESIGN.md, "Transports": where
 * the network needs memory registered, registering must not cost every
 * message, and a registration must never outlive its memory.
 *
 * Who registers is settled when the provider is chosen (ofi_info.c):
 * tacl asks first without FI_MR_LOCAL, and a provider that takes that
 * (EFA) registers what it needs itself, through its own cache, which a
 * memory monitor keeps true.  Where tacl must register (the provider
 * wants FI_MR_LOCAL, device buffers go to it with FI_MR_HMEM, or
 * TACL_OFI_REGISTER=always), this file does, in one of two ways:
 *
 * - Memory whose end tacl sees is registered whole, once per rail, and
 *   kept: a tacl_mem_alloc segment (host), or a device allocation.
 *   Before each lookup the cache reads core's release log (memseg.h),
 *   where tacl_mem_free notes every range it gives back, and drops the
 *   registrations inside one (at once, or when the last message using
 *   it completes).  A device allocation made by cudaMalloc is not
 *   tacl's, so its entry keeps the driver's buffer id, which is never
 *   reused, and asks it again at each use: an allocation freed and
 *   another made at the same address is never taken for the old.  The
 *   cache holds TACL_OFI_MR_CACHE entries, the least recently used
 *   unused one going first.
 * - Any other host buffer is registered for the time its message is
 *   posted: tacl cannot see when malloc's memory goes back to the
 *   system, and a registration that outlived it would pin pages the
 *   buffer no longer has.
 *
 * Everything here runs in the transport's thread (FI_THREAD_DOMAIN):
 * the release log is read, not called back into.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "common.h"
#include "config.h"
#include "cu_driver.h"
#include "log.h"
#include "memseg.h"
#include "ofi.h"

struct tacl__ofi_mr_entry {
    tacl__ofi_mr_entry_t *next;
    uintptr_t base;            /* the whole segment or allocation */
    uint64_t len;
    int device;                /* -1: host memory */
    uint64_t buffer_id;        /* device: the driver's id of it */
    uint64_t used;             /* the cache's tick at its last use */
    uint32_t refs;             /* requests using it */
    int dropped;               /* its memory went: closed at refs 0 */
    struct fid_mr *mr[TACL_OFI_MAX_RAILS];
};

void tacl__ofi_mr_init(tacl__ofi_t *ofi)
{
    tacl__ofi_mr_cache_t *c = &ofi->mrs;

    memset(c, 0, sizeof(*c));
    c->max = (uint32_t)TACL_MAX(0, tacl__config_int(TACL_CFG_OFI_MR_CACHE));
    c->cursor = tacl__mem_released_count();
}

static void entry_close(tacl__ofi_mr_entry_t *e)
{
    for (int r = 0; r < TACL_OFI_MAX_RAILS; ++r)
        if (e->mr[r] != NULL)
            fi_close(&e->mr[r]->fid);
    free(e);
}

/* Take e off the cache: closed now, or by the last request using it. */
static void drop(tacl__ofi_mr_cache_t *c, tacl__ofi_mr_entry_t **link)
{
    tacl__ofi_mr_entry_t *e = *link;

    *link = e->next;
    --c->count;
    if (e->refs == 0) {
        entry_close(e);
        return;
    }
    e->dropped = 1;
    e->next = c->dropped;
    c->dropped = e;
}

/* Drop what lies in memory tacl_mem_free gave back since last asked. */
static void read_releases(tacl__ofi_mr_cache_t *c)
{
    tacl__mem_range_t r[16];
    int n;

    while ((n = tacl__mem_released(&c->cursor, r, 16)) != 0) {
        for (tacl__ofi_mr_entry_t **link = &c->head; *link;) {
            tacl__ofi_mr_entry_t *e = *link;
            int hit = n < 0;

            for (int i = 0; i < n && !hit; ++i)
                hit = e->base < r[i].base + r[i].len &&
                      r[i].base < e->base + e->len;
            if (!hit) {
                link = &e->next;
                continue;
            }
            ++c->stats.released;
            drop(c, link);
        }
        if (n < 0)
            break;
    }
}

/* Room for one more entry: the least recently used unused one goes. */
static int make_room(tacl__ofi_mr_cache_t *c)
{
    tacl__ofi_mr_entry_t **oldest = NULL;

    if (c->count < c->max)
        return 1;
    for (tacl__ofi_mr_entry_t **link = &c->head; *link;
         link = &(*link)->next)
        if ((*link)->refs == 0 &&
            (oldest == NULL || (*link)->used < (*oldest)->used))
            oldest = link;
    if (oldest == NULL)
        return 0;
    ++c->stats.evicted;
    drop(c, oldest);
    return 1;
}

/* Register [base, base + len) on rail's domain; device -1: host. */
static int reg(tacl__ofi_t *ofi, int rail, uintptr_t base, uint64_t len,
               int device, uint64_t access, struct fid_mr **mr_p)
{
    struct fid_domain *domain = ofi->rails[rail].domain;
    /* Unless the provider makes keys (FI_MR_PROV_KEY) each registration
     * of a domain asks for its own; tacl's never leave this process. */
    uint64_t key = ++ofi->mrs.keys;
    struct iovec iov = {.iov_base = (void *)base, .iov_len = len};
    struct fi_mr_attr attr;

    if (device < 0)
        return fi_mr_reg(domain, (void *)base, len, access, 0, key, 0, mr_p,
                         NULL);
    memset(&attr, 0, sizeof(attr));
    attr.mr_iov = &iov;
    attr.iov_count = 1;
    attr.access = access;
    attr.requested_key = key;
    attr.iface = FI_HMEM_CUDA;
    attr.device.cuda = device;
    return fi_mr_regattr(domain, &attr, 0, mr_p);
}

/*
 * The allocation [*base_p, + *len_p) holding req's buffer whose end
 * tacl can tell (see the top): 1, or 0 when there is none.  Device
 * memory also gives its device and buffer id.
 */
static int whole_of(const tacl__ofi_req_t *req, int device_mem,
                    uintptr_t *base_p, uint64_t *len_p, int *device_p,
                    uint64_t *id_p)
{
    *device_p = -1;
    *id_p = 0;
    if (!device_mem)
        return tacl__memseg_range(req->buf, req->len, base_p, len_p);
#if TACL_HAVE_CUDA
    {
        const tacl__cu_t *cu = tacl__cu();
        CUdeviceptr base = 0;
        size_t size = 0;
        unsigned long long id = 0;
        CUdeviceptr p = (CUdeviceptr)(uintptr_t)req->buf;

        if (cu == NULL ||
            cu->cuMemGetAddressRange(&base, &size, p) != CUDA_SUCCESS ||
            cu->cuPointerGetAttribute(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID,
                                      p) != CUDA_SUCCESS)
            return 0;
        *device_p = tacl__cu_device_of(req->buf, NULL);
        if (*device_p < 0 || (uint64_t)(p - base) + req->len > size)
            return 0;
        *base_p = (uintptr_t)base;
        *len_p = size;
        *id_p = id;
        return 1;
    }
#else
    return 0;
#endif
}

/* The cached entry for req's buffer, registered on its rail; NULL when
 * the buffer is not such memory or the cache cannot hold it. */
static tacl__ofi_mr_entry_t *cached(tacl__ofi_t *ofi, tacl__ofi_req_t *req,
                                    int device_mem, int *rc_p)
{
    tacl__ofi_mr_cache_t *c = &ofi->mrs;
    tacl__ofi_mr_entry_t *e = NULL, **link;
    uintptr_t base;
    uint64_t len, id;
    int device;

    *rc_p = 0;
    read_releases(c);
    if (c->max == 0 ||
        !whole_of(req, device_mem, &base, &len, &device, &id))
        return NULL;
    for (link = &c->head; *link; link = &(*link)->next)
        if ((*link)->base == base && (*link)->len == len &&
            (*link)->device == device)
            break;
    if (*link != NULL && (*link)->buffer_id != id) {
        /* Freed and allocated again at the same address. */
        ++c->stats.stale;
        drop(c, link);
    } else {
        e = *link;
    }
    if (e == NULL) {
        if (!make_room(c))
            return NULL;
        e = calloc(1, sizeof(*e));
        if (e == NULL)
            return NULL;
        e->base = base;
        e->len = len;
        e->device = device;
        e->buffer_id = id;
        e->next = c->head;
        c->head = e;
        ++c->count;
    }
    if (e->mr[req->rail] == NULL) {
        *rc_p = reg(ofi, req->rail, base, len, device, FI_SEND | FI_RECV,
                    &e->mr[req->rail]);
        if (*rc_p != 0) {
            e->mr[req->rail] = NULL;
            return NULL;
        }
        ++c->stats.regs;
    } else {
        ++c->stats.hits;
    }
    e->used = ++c->tick;
    return e;
}

tacl_status_t tacl__ofi_mr_get(tacl__ofi_t *ofi, tacl__ofi_req_t *req,
                               int device_mem)
{
    int rc;

    if ((!ofi->need_mr && !device_mem) || req->mr != NULL ||
        req->mr_entry != NULL || req->len == 0)
        return TACL_OK;
    req->mr_entry = cached(ofi, req, device_mem, &rc);
    if (req->mr_entry != NULL) {
        ++req->mr_entry->refs;
        return TACL_OK;
    }
    if (rc == 0) {
        rc = reg(ofi, req->rail, (uintptr_t)req->buf, req->len,
                 device_mem ? tacl__cu_device_of(req->buf, NULL) : -1,
                 req->kind == TACL_OFI_REQ_SEND ||
                         req->kind == TACL_OFI_REQ_CTRL_SEND
                     ? FI_SEND
                     : FI_RECV,
                 &req->mr);
        if (rc == 0)
            ++ofi->mrs.stats.per_msg;
    }
    if (rc == 0)
        return TACL_OK;
    req->mr = NULL;
    return tacl__error(rc == -FI_ENOMEM ? TACL_ERR_NO_MEMORY
                                        : TACL_ERR_SYSTEM,
                       NET, "rank %d cannot register %llu bytes of %s "
                       "memory at %p for a message with rank %d: %s",
                       ofi->base.rank, (unsigned long long)req->len,
                       device_mem ? "device" : "host", req->buf, req->peer,
                       tacl__ofi_strerror(rc));
}

void *tacl__ofi_mr_desc(const tacl__ofi_req_t *req)
{
    if (req->mr_entry != NULL)
        return fi_mr_desc(req->mr_entry->mr[req->rail]);
    return req->mr != NULL ? fi_mr_desc(req->mr) : NULL;
}

void tacl__ofi_mr_put(tacl__ofi_t *ofi, tacl__ofi_req_t *req)
{
    tacl__ofi_mr_entry_t *e = req->mr_entry;

    if (req->mr != NULL)
        fi_close(&req->mr->fid);
    req->mr = NULL;
    req->mr_entry = NULL;
    if (e == NULL || --e->refs > 0 || !e->dropped)
        return;
    for (tacl__ofi_mr_entry_t **link = &ofi->mrs.dropped; *link;
         link = &(*link)->next)
        if (*link == e) {
            *link = e->next;
            entry_close(e);
            return;
        }
}

void tacl__ofi_mr_forget(tacl__ofi_t *ofi)
{
    tacl__ofi_mr_cache_t *c = &ofi->mrs;
    tacl__ofi_mr_entry_t *e;

    if (c->stats.regs + c->stats.per_msg > 0)
        TACL_INFO(NET, "rank %d: ofi registrations: %llu cached (%llu "
                  "uses found them), %llu per message; %llu dropped as "
                  "their memory was freed, %llu replaced, %llu evicted",
                  ofi->base.rank, (unsigned long long)c->stats.regs,
                  (unsigned long long)c->stats.hits,
                  (unsigned long long)c->stats.per_msg,
                  (unsigned long long)c->stats.released,
                  (unsigned long long)c->stats.stale,
                  (unsigned long long)c->stats.evicted);
    while ((e = c->head) != NULL) {
        c->head = e->next;
        entry_close(e);
    }
    while ((e = c->dropped) != NULL) {
        c->dropped = e->next;
        entry_close(e);
    }
    c->count = 0;
}
