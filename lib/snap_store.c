/*
 * The node-local snapshot store (see snap_store.h).
 *
 * Layout of one object: a header page (magic, format, holder and source
 * ranks, capacity, chunk size, the two slots' descriptions), then each
 * slot's CRC array (max_chunks words), then each slot's data (capacity
 * bytes).  Only the object's real size is mapped, so a truncated object
 * is found by comparing sizes, never by touching a missing page (which
 * would be SIGBUS).  A slot's state becomes COMPLETE with a release store
 * after its data and CRCs, and WRITING before anything of it changes, so
 * a process killed in the middle leaves the other slot intact.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "crc32c.h"
#include "log.h"
#include "snap_store.h"

#define SNAP_MAGIC 0x31504e534c434154ull /* "TACLSNP1" */
#define SNAP_FORMAT 2u
#define SNAP_HEADER_BYTES 8192u

typedef struct {
    uint64_t magic;
    uint32_t format;
    int32_t holder;
    int32_t source;
    uint32_t chunk_bytes;
    uint64_t capacity;   /* data bytes per slot */
    uint64_t max_chunks; /* CRC words per slot */
    uint64_t total;      /* bytes of the whole object */
    tacl__snap_slot_t slot[TACL__SNAP_SLOTS];
    /* Per slot: its version + 1 once found equal to the replicas' copies
     * (tacl__snap_store_mark_matched), else 0. */
    uint64_t matched[TACL__SNAP_SLOTS];
} store_header_t;

_Static_assert(sizeof(store_header_t) <= SNAP_HEADER_BYTES,
               "the store header fits its page");

struct tacl__snap_store {
    char name[128];
    int holder, source;
    store_header_t *hdr;
    uint8_t *base;
    size_t mapped; /* bytes mapped: the object's size at open */
};

static void store_name(char *out, size_t len, const char *key, int holder,
                       int source)
{
    snprintf(out, len, "/tacl-snap-%s-h%d-s%d", key, holder, source);
}

static uint64_t layout_total(uint64_t capacity, uint64_t max_chunks)
{
    return SNAP_HEADER_BYTES + TACL__SNAP_SLOTS * (max_chunks * 4 + capacity);
}

static uint64_t crc_offset(const store_header_t *h, int slot)
{
    return SNAP_HEADER_BYTES + (uint64_t)slot * h->max_chunks * 4;
}

static uint64_t data_offset(const store_header_t *h, int slot)
{
    return SNAP_HEADER_BYTES + TACL__SNAP_SLOTS * h->max_chunks * 4 +
           (uint64_t)slot * h->capacity;
}

static uint32_t slot_meta_crc(const tacl__snap_slot_t *s)
{
    tacl__snap_slot_t c = *s;

    c.state = 0;
    c.meta_crc = 0;
    return tacl__crc32c(0, &c, sizeof(c));
}

static uint32_t slot_state(const tacl__snap_slot_t *s)
{
    return __atomic_load_n(&s->state, __ATOMIC_ACQUIRE);
}

/* A fresh layout for capacity bytes a slot; both slots empty. */
static tacl_status_t store_format(int fd, const char *name, int holder,
                                  int source, uint64_t capacity,
                                  uint32_t chunk_bytes)
{
    uint64_t max_chunks = TACL_DIV_UP(capacity, chunk_bytes);
    store_header_t h = {.magic = SNAP_MAGIC,
                        .format = SNAP_FORMAT,
                        .holder = holder,
                        .source = source,
                        .chunk_bytes = chunk_bytes,
                        .capacity = capacity,
                        .max_chunks = max_chunks,
                        .total = layout_total(capacity, max_chunks)};

    if (ftruncate(fd, 0) != 0 || ftruncate(fd, (off_t)h.total) != 0 ||
        pwrite(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h))
        return tacl__error(TACL_ERR_SYSTEM, SHM,
                           "snapshot store %s: cannot size it to %llu bytes: "
                           "%m (is /dev/shm full?)",
                           name, (unsigned long long)h.total);
    return TACL_OK;
}

/* What is wrong with a header read from an object of size bytes: NULL
 * when it is ours and whole. */
static const char *header_fault(const store_header_t *h, size_t size,
                                int holder, int source)
{
    if (size < sizeof(*h))
        return "is truncated before the end of its header";
    if (h->magic != SNAP_MAGIC)
        return "is not a tacl snapshot store";
    if (h->format != SNAP_FORMAT)
        return "has another format";
    if (h->holder != holder || h->source != source || h->chunk_bytes == 0 ||
        h->max_chunks < TACL_DIV_UP(h->capacity, h->chunk_bytes) ||
        h->total != layout_total(h->capacity, h->max_chunks))
        return "has a header describing another copy";
    return NULL;
}

static tacl_status_t header_check(const store_header_t *h, size_t size,
                                  const char *name, int holder, int source)
{
    const char *fault = header_fault(h, size, holder, source);

    if (fault == NULL)
        return TACL_OK;
    return tacl__error(TACL_ERR_INTERNAL, SHM,
                       "snapshot store %s (rank %d's copy held by rank %d, "
                       "%zu bytes, format %u; this library writes format %u) "
                       "%s: remove it or purge the job's snapshots",
                       name, source, holder, size,
                       size >= sizeof(*h) ? h->format : 0, SNAP_FORMAT,
                       fault);
}

tacl_status_t tacl__snap_store_open_as(const char *key, int holder,
                                       int source, uint64_t capacity,
                                       uint32_t chunk_bytes, int populate,
                                       tacl__snap_store_t **store_p)
{
    tacl__snap_store_t *st = calloc(1, sizeof(*st));
    store_header_t h;
    struct stat sb;
    tacl_status_t status;
    int fd;

    if (st == NULL)
        return tacl__error(TACL_ERR_NO_MEMORY, SHM,
                           "snapshot store: out of memory");
    store_name(st->name, sizeof(st->name), key, holder, source);
    st->holder = holder;
    st->source = source;
    fd = shm_open(st->name, O_RDWR | (capacity > 0 ? O_CREAT : 0), 0600);
    if (fd < 0 && errno == ENOENT && capacity == 0) {
        free(st);
        *store_p = NULL;
        return TACL_ERR_INVALID_USAGE;
    }
    if (fd < 0) {
        status = tacl__error(TACL_ERR_SYSTEM, SHM,
                             "snapshot store %s: shm_open failed: %m",
                             st->name);
        goto err_free;
    }
    if (fstat(fd, &sb) != 0) {
        status = tacl__error(TACL_ERR_SYSTEM, SHM,
                             "snapshot store %s: fstat failed: %m", st->name);
        goto err_close;
    }
    memset(&h, 0, sizeof(h));
    if ((size_t)sb.st_size >= sizeof(h) &&
        pread(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h))
        memset(&h, 0, sizeof(h));
    if (capacity > 0) {
        /* Keep what it holds when it fits; make it anew otherwise. */
        if (header_fault(&h, (size_t)sb.st_size, holder, source) != NULL ||
            h.capacity < capacity || h.chunk_bytes != chunk_bytes ||
            (uint64_t)sb.st_size < h.total) {
            TACL_INFO(SHM,
                      "snapshot store %s: made anew for %llu bytes a version",
                      st->name, (unsigned long long)capacity);
            status = store_format(fd, st->name, holder, source, capacity,
                                  chunk_bytes);
            if (status != TACL_OK)
                goto err_close;
            if (fstat(fd, &sb) != 0) {
                status = tacl__error(TACL_ERR_SYSTEM, SHM,
                                     "snapshot store %s: fstat failed: %m",
                                     st->name);
                goto err_close;
            }
        }
    } else {
        status = header_check(&h, (size_t)sb.st_size, st->name, holder,
                              source);
        if (status != TACL_OK)
            goto err_close;
    }
    st->mapped = (size_t)sb.st_size;
    /* Populated at once: otherwise the first two saves into a new store
     * (one a slot) take a page fault every 4 KiB in their copies, in the
     * caller's thread (issue 29's breakdown). */
    st->base = mmap(NULL, st->mapped, PROT_READ | PROT_WRITE,
                    MAP_SHARED | (populate ? MAP_POPULATE : 0), fd, 0);
    if (st->base == MAP_FAILED) {
        status =
            tacl__error(TACL_ERR_SYSTEM, SHM,
                        "snapshot store %s: mmap of %zu bytes failed: %m",
                        st->name, st->mapped);
        goto err_close;
    }
    close(fd);
    st->hdr = (store_header_t *)st->base;
    *store_p = st;
    return TACL_OK;

err_close:
    close(fd);
err_free:
    free(st);
    return status;
}

tacl_status_t tacl__snap_store_open(const char *key, int holder, int source,
                                    uint64_t capacity, uint32_t chunk_bytes,
                                    tacl__snap_store_t **store_p)
{
    return tacl__snap_store_open_as(key, holder, source, capacity,
                                    chunk_bytes, 1, store_p);
}

uint64_t tacl__snap_store_capacity(const tacl__snap_store_t *st)
{
    return st->hdr->capacity;
}

void tacl__snap_store_close(tacl__snap_store_t *st, int purge)
{
    if (st == NULL)
        return;
    munmap(st->base, st->mapped);
    if (purge)
        shm_unlink(st->name);
    free(st);
}

void tacl__snap_store_unlink(const char *key, int holder, int source)
{
    char name[128];

    store_name(name, sizeof(name), key, holder, source);
    shm_unlink(name);
}

/* The slot version goes to: one holding that version or a later one (a
 * version abandoned by a restore), else not the newest complete one. */
static int slot_to_write(const store_header_t *h, uint64_t version)
{
    int newest = -1;

    for (int s = 0; s < TACL__SNAP_SLOTS; s++)
        if (slot_state(&h->slot[s]) != TACL__SNAP_EMPTY &&
            h->slot[s].version >= version)
            return s;
    for (int s = 0; s < TACL__SNAP_SLOTS; s++)
        if (slot_state(&h->slot[s]) == TACL__SNAP_COMPLETE &&
            (newest < 0 || h->slot[s].version > h->slot[newest].version))
            newest = s;
    return newest == 0 ? 1 : 0;
}

void tacl__snap_store_drop_after(tacl__snap_store_t *st, uint64_t version)
{
    for (int s = 0; s < TACL__SNAP_SLOTS; s++)
        if (st->hdr->slot[s].version > version)
            __atomic_store_n(&st->hdr->slot[s].state, TACL__SNAP_EMPTY,
                             __ATOMIC_RELEASE);
}

tacl_status_t tacl__snap_store_begin_copy(tacl__snap_store_t *st,
                                          const tacl__snap_slot_t *desc,
                                          int *slot_p)
{
    store_header_t *h = st->hdr;
    int slot = slot_to_write(h, desc->version);
    tacl__snap_slot_t *s = &h->slot[slot];

    if (desc->bytes > h->capacity || desc->nchunks > h->max_chunks ||
        desc->chunk_bytes != h->chunk_bytes ||
        desc->nregions > TACL__SNAP_MAX_REGIONS)
        return tacl__error(
            TACL_ERR_INVALID_USAGE, SHM,
            "snapshot of rank %d version %llu: %llu bytes in %u chunks of %u "
            "do not fit the store held by rank %d (%llu bytes, chunks of %u)",
            st->source, (unsigned long long)desc->version,
            (unsigned long long)desc->bytes, desc->nchunks, desc->chunk_bytes,
            st->holder, (unsigned long long)h->capacity, h->chunk_bytes);
    __atomic_store_n(&s->state, TACL__SNAP_WRITING, __ATOMIC_RELEASE);
    __atomic_store_n(&h->matched[slot], 0, __ATOMIC_RELEASE);
    atomic_thread_fence(memory_order_seq_cst);
    tacl__snap_store_describe(st, slot, desc);
    *slot_p = slot;
    return TACL_OK;
}

void tacl__snap_store_describe(tacl__snap_store_t *st, int slot,
                               const tacl__snap_slot_t *desc)
{
    tacl__snap_slot_t *s = &st->hdr->slot[slot];

    memcpy((uint8_t *)s + sizeof(s->version) + sizeof(s->state),
           (const uint8_t *)desc + sizeof(s->version) + sizeof(s->state),
           sizeof(*s) - sizeof(s->version) - sizeof(s->state));
    s->version = desc->version;
}

void tacl__snap_store_discard(tacl__snap_store_t *st, int slot)
{
    __atomic_store_n(&st->hdr->slot[slot].state, TACL__SNAP_EMPTY,
                     __ATOMIC_RELEASE);
}

void tacl__snap_store_mark_matched(tacl__snap_store_t *st, int slot)
{
    __atomic_store_n(&st->hdr->matched[slot], st->hdr->slot[slot].version + 1,
                     __ATOMIC_RELEASE);
}

int tacl__snap_store_matched(tacl__snap_store_t *st, int slot)
{
    const tacl__snap_slot_t *s = &st->hdr->slot[slot];

    return slot_state(s) == TACL__SNAP_COMPLETE &&
           __atomic_load_n(&st->hdr->matched[slot], __ATOMIC_ACQUIRE) ==
               s->version + 1;
}

void tacl__snap_store_commit_unchecked(tacl__snap_store_t *st, int slot)
{
    __atomic_store_n(&st->hdr->slot[slot].state, TACL__SNAP_COMPLETE,
                     __ATOMIC_RELEASE);
}

int tacl__snap_store_next_slot(tacl__snap_store_t *st, uint64_t version)
{
    return slot_to_write(st->hdr, version);
}

tacl_status_t tacl__snap_store_begin(tacl__snap_store_t *st, uint64_t version,
                                     uint32_t nranks,
                                     const tacl__snap_region_t *regions,
                                     int nregions, int *slot_p)
{
    tacl__snap_slot_t d = {.version = version,
                           .nregions = (uint32_t)nregions,
                           .nranks = nranks,
                           .chunk_bytes = st->hdr->chunk_bytes};

    for (int i = 0; i < nregions; i++) {
        d.regions[i] = regions[i];
        d.bytes += regions[i].bytes;
    }
    d.nchunks = (uint32_t)TACL_DIV_UP(d.bytes, d.chunk_bytes);
    d.meta_crc = slot_meta_crc(&d);
    return tacl__snap_store_begin_copy(st, &d, slot_p);
}

uint8_t *tacl__snap_store_data(tacl__snap_store_t *st, int slot)
{
    return st->base + data_offset(st->hdr, slot);
}

uint32_t *tacl__snap_store_crcs(tacl__snap_store_t *st, int slot)
{
    return (uint32_t *)(st->base + crc_offset(st->hdr, slot));
}

const tacl__snap_slot_t *tacl__snap_store_slot(tacl__snap_store_t *st,
                                               int slot)
{
    return &st->hdr->slot[slot];
}

static uint32_t chunk_crc(tacl__snap_store_t *st, int slot, uint32_t c)
{
    const tacl__snap_slot_t *s = &st->hdr->slot[slot];
    uint64_t off = (uint64_t)c * s->chunk_bytes;

    return tacl__crc32c(0, tacl__snap_store_data(st, slot) + off,
                        TACL_MIN(s->chunk_bytes, s->bytes - off));
}

void tacl__snap_store_write(tacl__snap_store_t *st, int slot, uint64_t off,
                            const void *src, uint64_t len)
{
    uint64_t chunk = st->hdr->slot[slot].chunk_bytes;
    uint32_t *crcs = tacl__snap_store_crcs(st, slot);
    uint8_t *data = tacl__snap_store_data(st, slot);
    const uint8_t *p = src;

    while (len > 0) {
        uint64_t c = off / chunk, in = off % chunk;
        uint64_t n = TACL_MIN(len, chunk - in);

        crcs[c] = tacl__crc32c_copy(in == 0 ? 0 : crcs[c], data + off, p, n);
        off += n;
        p += n;
        len -= n;
    }
}

void tacl__snap_store_commit(tacl__snap_store_t *st, int slot)
{
    tacl__snap_slot_t *s = &st->hdr->slot[slot];
    uint32_t *crcs = tacl__snap_store_crcs(st, slot);

    for (uint32_t c = 0; c < s->nchunks; c++)
        crcs[c] = chunk_crc(st, slot, c);
    __atomic_store_n(&s->state, TACL__SNAP_COMPLETE, __ATOMIC_RELEASE);
}

/* The regions bytes [off, off + len) of a slot's data overlap, as
 * "region 'a'" or "regions 'a' to 'b'", in out. */
static const char *region_span(const tacl__snap_slot_t *s, uint64_t off,
                               uint64_t len, char *out, size_t outlen)
{
    const char *first = NULL, *last = NULL;
    uint64_t start = 0;

    for (uint32_t i = 0; i < s->nregions && i < TACL__SNAP_MAX_REGIONS; i++) {
        uint64_t end = start + s->regions[i].bytes;

        if (off < end && off + len > start && s->regions[i].bytes > 0) {
            first = first != NULL ? first : s->regions[i].name;
            last = s->regions[i].name;
        }
        start = end;
    }
    if (first == NULL)
        snprintf(out, outlen, "no region");
    else if (first == last)
        snprintf(out, outlen, "region '%.47s'", first);
    else
        snprintf(out, outlen, "regions '%.47s' to '%.47s'", first, last);
    return out;
}

/* The regions a slot's header names, as "'a' (n bytes), ..." in out. */
static const char *region_list(const tacl__snap_slot_t *s, char *out,
                               size_t len)
{
    size_t used = 0;

    out[0] = '\0';
    for (uint32_t i = 0;
         i < s->nregions && i < TACL__SNAP_MAX_REGIONS && used < len; i++)
        used += (size_t)snprintf(out + used, len - used,
                                 "%s'%.47s' (%llu bytes)", i > 0 ? ", " : "",
                                 s->regions[i].name,
                                 (unsigned long long)s->regions[i].bytes);
    return out;
}

const char *tacl__snap_store_chunk_regions(tacl__snap_store_t *st, int slot,
                                          uint32_t c, char *out,
                                          size_t len)
{
    const tacl__snap_slot_t *s = &st->hdr->slot[slot];

    return region_span(s, (uint64_t)c * s->chunk_bytes, s->chunk_bytes, out,
                       len);
}

tacl_status_t tacl__snap_store_check_chunk(tacl__snap_store_t *st, int slot,
                                          uint32_t c)
{
    const tacl__snap_slot_t *s = &st->hdr->slot[slot];
    uint32_t got = chunk_crc(st, slot, c), want = tacl__snap_store_crcs(
                                                      st, slot)[c];
    uint64_t off = (uint64_t)c * s->chunk_bytes;
    char where[128];

    if (got == want)
        return TACL_OK;
    return tacl__error(
        TACL_ERR_INTERNAL, SHM,
        "snapshot of rank %d held by rank %d, version %llu, %s: chunk %u "
        "(bytes %llu to %llu) fails its checksum (stored 0x%08x, computed "
        "0x%08x)",
        st->source, st->holder, (unsigned long long)s->version,
        region_span(s, off, s->chunk_bytes, where, sizeof(where)), c,
        (unsigned long long)off,
        (unsigned long long)TACL_MIN(off + s->chunk_bytes, s->bytes) - 1,
        want, got);
}

/* Every chunk against its stored CRC; the first bad one decides. */
static tacl_status_t check_chunks(tacl__snap_store_t *st, int slot)
{
    tacl_status_t status = TACL_OK;

    for (uint32_t c = 0; c < st->hdr->slot[slot].nchunks && status == TACL_OK;
         c++)
        status = tacl__snap_store_check_chunk(st, slot, c);
    return status;
}

tacl_status_t tacl__snap_store_commit_checked(tacl__snap_store_t *st,
                                              int slot)
{
    tacl_status_t status = check_chunks(st, slot);

    if (status == TACL_OK)
        __atomic_store_n(&st->hdr->slot[slot].state, TACL__SNAP_COMPLETE,
                         __ATOMIC_RELEASE);
    return status;
}

tacl_status_t tacl__snap_store_verify_header(tacl__snap_store_t *st,
                                             int slot)
{
    const store_header_t *h = st->hdr;
    const tacl__snap_slot_t *s = &h->slot[slot];
    uint64_t end = data_offset(h, slot) + s->bytes;
    char list[512];

    if (slot_state(s) != TACL__SNAP_COMPLETE)
        return tacl__error(TACL_ERR_INTERNAL, SHM,
                           "snapshot of rank %d held by rank %d, version "
                           "%llu: slot %d was never completed",
                           st->source, st->holder,
                           (unsigned long long)s->version, slot);
    if (slot_meta_crc(s) != s->meta_crc || s->bytes > h->capacity ||
        s->nchunks != TACL_DIV_UP(s->bytes, s->chunk_bytes) ||
        s->chunk_bytes != h->chunk_bytes)
        return tacl__error(
            TACL_ERR_INTERNAL, SHM,
            "snapshot of rank %d held by rank %d, version %llu: its header "
            "fails its checksum (it names regions %s)",
            st->source, st->holder, (unsigned long long)s->version,
            region_list(s, list, sizeof(list)));
    if (end > st->mapped) {
        uint64_t kept = st->mapped > data_offset(h, slot)
                            ? st->mapped - data_offset(h, slot)
                            : 0;

        return tacl__error(
            TACL_ERR_INTERNAL, SHM,
            "snapshot of rank %d held by rank %d, version %llu, %s: the "
            "store is truncated (%zu of %llu bytes)",
            st->source, st->holder, (unsigned long long)s->version,
            region_span(s, kept, s->bytes - kept, list, sizeof(list)),
            st->mapped, (unsigned long long)end);
    }
    return TACL_OK;
}

tacl_status_t tacl__snap_store_verify(tacl__snap_store_t *st, int slot)
{
    tacl_status_t status = tacl__snap_store_verify_header(st, slot);

    return status == TACL_OK ? check_chunks(st, slot) : status;
}

int tacl__snap_store_find(tacl__snap_store_t *st, uint64_t version)
{
    for (int s = 0; s < TACL__SNAP_SLOTS; s++)
        if (slot_state(&st->hdr->slot[s]) == TACL__SNAP_COMPLETE &&
            st->hdr->slot[s].version == version)
            return s;
    return -1;
}
