/*
 * The long-term tier of a snapshot set (tacl.h, tacl_snapshot_flush and
 * tacl_snapshot_restore_file): one file per rank holding one committed
 * version of the rank's own state, read back by the restore
 * (snap_restore.c, tacl_snapshot_restore_file) where no peer's memory
 * holds the chosen version.
 *
 * A file is the store's own slot written out: a small header (magic,
 * format, the rank), the slot's description (version, the job's size,
 * region names and sizes, chunk size, its own checksum), a CRC32C per
 * chunk, then the data.  It is written under a temporary name, synced and
 * renamed, so a crash leaves the old file or the new one, never half of
 * one.  Reading it back loads it into the rank's own store and checks it
 * there with the store's checks (header checksum, every chunk), so a
 * damaged file fails with a message naming the file, the rank, the region
 * and the version and is never loaded.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "comm.h"
#include "log.h"
#include "snapshot.h"

#define FILE_MAGIC "TACLSNAP"
#define FILE_FORMAT 1

typedef struct {
    char magic[8];
    uint32_t format;
    int32_t rank;
    tacl__snap_slot_t desc;
} file_header_t;

static tacl_status_t write_all(int fd, const void *buf, uint64_t bytes,
                               const char *path)
{
    const uint8_t *p = buf;

    while (bytes > 0) {
        ssize_t n = write(fd, p, TACL_MIN(bytes, (uint64_t)1 << 30));

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return tacl__error(TACL_ERR_SYSTEM, COLL,
                               "snapshot flush: writing '%s' failed: %m",
                               path);
        p += n;
        bytes -= (uint64_t)n;
    }
    return TACL_OK;
}

/* Read exactly bytes; a short file is *short_p 1 (not an error here). */
static tacl_status_t read_all(int fd, void *buf, uint64_t bytes,
                              const char *path, int *short_p)
{
    uint8_t *p = buf;

    while (bytes > 0) {
        ssize_t n = read(fd, p, TACL_MIN(bytes, (uint64_t)1 << 30));

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return tacl__error(TACL_ERR_SYSTEM, COLL,
                               "snapshot file '%s': reading failed: %m",
                               path);
        if (n == 0) {
            *short_p = 1;
            return TACL_OK;
        }
        p += n;
        bytes -= (uint64_t)n;
    }
    return TACL_OK;
}

/* Sync the folder holding path, so the rename itself is durable. */
static void sync_dir(const char *path)
{
    char *copy = strdup(path);
    int fd = copy != NULL ? open(dirname(copy), O_RDONLY | O_DIRECTORY) : -1;

    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
    free(copy);
}

/* The temporary name a flush writes first: path.tmp.<pid>. */
static tacl_status_t tmp_name(const char *path, char *tmp, size_t len)
{
    if ((size_t)snprintf(tmp, len, "%s.tmp.%ld", path, (long)getpid()) >=
        len)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "snapshot flush: path is too long (%zu bytes)",
                           strlen(path));
    return TACL_OK;
}

tacl_status_t tacl__snap_file_slot(struct tacl_snapshot *snap,
                                   uint64_t version, const char *path,
                                   int *slot_p)
{
    tacl__snap_store_t *st;
    char tmp[4096];
    tacl_status_t status;
    int slot;

    if (snap == NULL || path == NULL || path[0] == '\0')
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "snapshot flush: the set and a path are required");
    status = tmp_name(path, tmp, sizeof(tmp));
    if (status != TACL_OK)
        return status;
    st = snap->stores[snap->rank];
    slot = st != NULL ? tacl__snap_store_find(st, version) : -1;
    if (slot < 0)
        return tacl__error(TACL_ERR_INVALID_ARG, COLL,
                           "snapshot flush: version %llu is not committed in "
                           "rank %d's store; save it first",
                           (unsigned long long)version, snap->rank);
    *slot_p = slot;
    return TACL_OK;
}

tacl_status_t tacl__snap_file_write(struct tacl_snapshot *snap, int slot,
                                    const char *path)
{
    tacl__snap_store_t *st = snap->stores[snap->rank];
    file_header_t h = {.magic = FILE_MAGIC, .format = FILE_FORMAT};
    char tmp[4096];
    tacl_status_t status = tmp_name(path, tmp, sizeof(tmp));
    int fd;

    /* Never carry a damaged copy into the long-term tier. */
    if (status == TACL_OK)
        status = tacl__snap_store_verify(st, slot);
    if (status != TACL_OK)
        return status;
    h.rank = snap->rank;
    h.desc = *tacl__snap_store_slot(st, slot);
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return tacl__error(TACL_ERR_SYSTEM, COLL,
                           "snapshot flush: creating '%s' failed: %m", tmp);
    status = write_all(fd, &h, sizeof(h), tmp);
    if (status == TACL_OK)
        status = write_all(fd, tacl__snap_store_crcs(st, slot),
                           4ull * h.desc.nchunks, tmp);
    if (status == TACL_OK)
        status = write_all(fd, tacl__snap_store_data(st, slot), h.desc.bytes,
                           tmp);
    if (status == TACL_OK && fsync(fd) != 0)
        status = tacl__error(TACL_ERR_SYSTEM, COLL,
                             "snapshot flush: syncing '%s' failed: %m", tmp);
    close(fd);
    if (status == TACL_OK && rename(tmp, path) != 0)
        status = tacl__error(TACL_ERR_SYSTEM, COLL,
                             "snapshot flush: renaming '%s' to '%s' failed: "
                             "%m",
                             tmp, path);
    if (status != TACL_OK) {
        unlink(tmp);
        return status;
    }
    sync_dir(path);
    TACL_INFO(COLL, "snapshot flush: rank %d wrote version %llu to '%s'",
              snap->rank, (unsigned long long)h.desc.version, path);
    return TACL_OK;
}

/* The header of path, checked against this rank and job. */
static tacl_status_t header_read(struct tacl_snapshot *snap, int fd,
                                 const char *path, file_header_t *h)
{
    struct stat sb;
    int short_read = 0;
    uint64_t want;
    tacl_status_t status = read_all(fd, h, sizeof(*h), path, &short_read);

    if (status != TACL_OK)
        return status;
    if (short_read || memcmp(h->magic, FILE_MAGIC, 8) != 0 ||
        h->format != FILE_FORMAT)
        return tacl__error(TACL_ERR_INTERNAL, COLL,
                           "snapshot file '%s' (rank %d): not a snapshot "
                           "file of format %d, or its header is cut short",
                           path, snap->rank, FILE_FORMAT);
    if (h->rank != snap->rank || h->desc.nranks != (uint32_t)snap->size)
        return tacl__error(TACL_ERR_INVALID_USAGE, COLL,
                           "snapshot file '%s' holds rank %d of %u ranks' "
                           "version %llu; this is rank %d of %d",
                           path, h->rank, h->desc.nranks,
                           (unsigned long long)h->desc.version, snap->rank,
                           snap->size);
    want = sizeof(*h) + 4ull * h->desc.nchunks + h->desc.bytes;
    if (fstat(fd, &sb) != 0)
        return tacl__error(TACL_ERR_SYSTEM, COLL,
                           "snapshot file '%s': fstat failed: %m", path);
    if ((uint64_t)sb.st_size != want)
        return tacl__error(TACL_ERR_INTERNAL, COLL,
                           "snapshot file '%s' (rank %d, version %llu) has "
                           "%lld bytes, its header says %llu: truncated or "
                           "damaged",
                           path, snap->rank,
                           (unsigned long long)h->desc.version,
                           (long long)sb.st_size, (unsigned long long)want);
    return TACL_OK;
}

/* path opened (*fd_p) and its header read and checked into *h; on
 * failure nothing stays open. */
static tacl_status_t header_open(struct tacl_snapshot *snap, const char *path,
                                 int *fd_p, file_header_t *h)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    tacl_status_t status;

    if (fd < 0)
        return tacl__error(errno == ENOENT ? TACL_ERR_INVALID_USAGE
                                           : TACL_ERR_SYSTEM,
                           COLL, "snapshot file '%s' (rank %d): %m", path,
                           snap->rank);
    status = header_read(snap, fd, path, h);
    if (status != TACL_OK)
        close(fd);
    else
        *fd_p = fd;
    return status;
}

tacl_status_t tacl__snap_file_version(struct tacl_snapshot *snap,
                                      const char *path, uint64_t *version_p)
{
    file_header_t h;
    int fd;
    tacl_status_t status = header_open(snap, path, &fd, &h);

    if (status != TACL_OK)
        return status;
    close(fd);
    *version_p = h.desc.version;
    return TACL_OK;
}

tacl_status_t tacl__snap_file_load(struct tacl_snapshot *snap,
                                   const char *path, uint64_t version)
{
    file_header_t h;
    tacl__snap_store_t **st = &snap->stores[snap->rank];
    int fd, slot, short_read = 0;
    tacl_status_t status = header_open(snap, path, &fd, &h);

    if (status != TACL_OK)
        return status;
    if (h.desc.version != version)
        status = tacl__error(TACL_ERR_INTERNAL, COLL,
                             "snapshot file '%s' (rank %d) now holds version "
                             "%llu, not the version %llu it held a moment "
                             "ago: written meanwhile?",
                             path, snap->rank,
                             (unsigned long long)h.desc.version,
                             (unsigned long long)version);
    if (status == TACL_OK)
        status = tacl__snap_store_for(snap, snap->rank, h.desc.bytes, 0);
    if (status == TACL_OK)
        status = tacl__snap_store_begin_copy(*st, &h.desc, &slot);
    if (status != TACL_OK)
        goto err_close;
    status = read_all(fd, tacl__snap_store_crcs(*st, slot),
                      4ull * h.desc.nchunks, path, &short_read);
    if (status == TACL_OK)
        status = read_all(fd, tacl__snap_store_data(*st, slot), h.desc.bytes,
                          path, &short_read);
    if (status == TACL_OK) {
        /* The store's checks: header checksum, size, every chunk. */
        tacl__snap_store_commit_unchecked(*st, slot);
        status = tacl__snap_store_verify(*st, slot);
        if (status != TACL_OK) {
            char why[TACL__ERROR_LEN];

            snprintf(why, sizeof(why), "%s", tacl_last_error());
            status = tacl__error(status, COLL, "snapshot file '%s': %s", path,
                                 why);
        }
    }
    if (status != TACL_OK) {
        tacl__snap_store_discard(*st, slot);
        goto err_close;
    }
    close(fd);
    return TACL_OK;

err_close:
    close(fd);
    return status;
}
