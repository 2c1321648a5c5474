/*
 * The node-local snapshot store (lib/snap_store.h) without a
 * communicator: a version written by one process is found and read back
 * by another; a flipped byte, a truncated object and a store of another
 * format are each detected with a message naming the rank, the region and
 * the version, and the previous complete version is still there to fall
 * back to.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "snap_store.h"
#include "tacl.h"

#define HOLDER 1
#define SOURCE 3
#define CHUNK 4096u

static char key[64];
static const tacl__snap_region_t regions[] = {{"weights", 10000},
                                              {"optimizer", 30000}};
#define BYTES 40000u

static void setup(void)
{
    snprintf(key, sizeof(key), "test%d", (int)getpid());
}

static void teardown(void)
{
    tacl__snap_store_unlink(key, HOLDER, SOURCE);
}

static uint8_t pattern(uint64_t version, size_t i)
{
    return (uint8_t)(i * 7 + version * 131 + (i >> 9));
}

/* Write version into st from the pattern and commit it. */
static void write_version(tacl__snap_store_t *st, uint64_t version)
{
    int slot;
    uint8_t *d;

    cr_assert_eq(tacl__snap_store_begin(st, version, 8, regions, 2, &slot),
                 TACL_OK);
    d = tacl__snap_store_data(st, slot);
    for (size_t i = 0; i < BYTES; i++)
        d[i] = pattern(version, i);
    tacl__snap_store_commit(st, slot);
}

/* Versions 1 and 2 written by a child process that then exits. */
static void write_in_child(void)
{
    pid_t pid = fork();
    int ws;

    cr_assert(pid >= 0);
    if (pid == 0) {
        tacl__snap_store_t *st;

        if (tacl__snap_store_open(key, HOLDER, SOURCE, BYTES, CHUNK, &st) !=
            TACL_OK)
            _exit(1);
        write_version(st, 1);
        write_version(st, 2);
        tacl__snap_store_close(st, 0);
        _exit(0);
    }
    cr_assert_eq(waitpid(pid, &ws, 0), pid);
    cr_assert(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
}

/* The store's object opened behind its back, as damage would reach it. */
static int open_object(void)
{
    char name[128];
    int fd;

    snprintf(name, sizeof(name), "/tacl-snap-%s-h%d-s%d", key, HOLDER,
             SOURCE);
    fd = shm_open(name, O_RDWR, 0);
    cr_assert(fd >= 0);
    return fd;
}

static tacl__snap_store_t *reopen(void)
{
    tacl__snap_store_t *st = NULL;

    cr_assert_eq(tacl__snap_store_open(key, HOLDER, SOURCE, 0, 0, &st),
                 TACL_OK, "%s", tacl_last_error());
    return st;
}

static void assert_reads(tacl__snap_store_t *st, uint64_t version)
{
    int slot = tacl__snap_store_find(st, version);
    const uint8_t *d;

    cr_assert(slot >= 0, "version %llu not found",
              (unsigned long long)version);
    cr_assert_eq(tacl__snap_store_verify(st, slot), TACL_OK, "%s",
                 tacl_last_error());
    cr_assert_eq(tacl__snap_store_slot(st, slot)->bytes, BYTES);
    cr_assert_str_eq(tacl__snap_store_slot(st, slot)->regions[1].name,
                     "optimizer");
    d = tacl__snap_store_data(st, slot);
    for (size_t i = 0; i < BYTES; i++)
        cr_assert_eq(d[i], pattern(version, i), "byte %zu", i);
}

static void assert_error_names(const char *what)
{
    const char *msg = tacl_last_error();

    cr_assert(strstr(msg, "rank 3") != NULL, "%s: %s", what, msg);
    cr_assert(strstr(msg, "version 2") != NULL, "%s: %s", what, msg);
    cr_assert(strstr(msg, "region 'optimizer'") != NULL, "%s: %s", what, msg);
}

TestSuite(snap_store, .init = setup, .fini = teardown);

Test(snap_store, another_process_reads_back)
{
    tacl__snap_store_t *st;

    write_in_child();
    st = reopen();
    assert_reads(st, 2);
    assert_reads(st, 1);
    /* A third version replaces the older one and keeps the newer. */
    write_version(st, 3);
    cr_assert_eq(tacl__snap_store_find(st, 1), -1);
    assert_reads(st, 2);
    assert_reads(st, 3);
    tacl__snap_store_close(st, 1);
    cr_assert_eq(tacl__snap_store_open(key, HOLDER, SOURCE, 0, 0, &st),
                 TACL_ERR_INVALID_USAGE);
    cr_assert_null(st);
}

Test(snap_store, flipped_byte_detected_previous_survives)
{
    tacl__snap_store_t *st;
    int slot;

    write_in_child();
    st = reopen();
    slot = tacl__snap_store_find(st, 2);
    tacl__snap_store_data(st, slot)[25000] ^= 0x10;
    cr_assert_eq(tacl__snap_store_verify(st, slot), TACL_ERR_INTERNAL);
    assert_error_names("flipped byte");
    assert_reads(st, 1);
    tacl__snap_store_close(st, 0);
}

Test(snap_store, truncated_store_detected_previous_survives)
{
    tacl__snap_store_t *st;
    struct stat sb;
    int fd;

    write_in_child();
    fd = open_object();
    cr_assert_eq(fstat(fd, &sb), 0);
    cr_assert_eq(ftruncate(fd, sb.st_size - 1000), 0);
    close(fd);
    st = reopen();
    cr_assert_eq(tacl__snap_store_verify(st, tacl__snap_store_find(st, 2)),
                 TACL_ERR_INTERNAL);
    assert_error_names("truncated");
    cr_assert(strstr(tacl_last_error(), "truncated") != NULL);
    assert_reads(st, 1);
    tacl__snap_store_close(st, 0);
}

Test(snap_store, damaged_header_detected)
{
    tacl__snap_store_t *st;
    tacl__snap_slot_t *s;
    int slot;

    write_in_child();
    st = reopen();
    slot = tacl__snap_store_find(st, 2);
    s = (tacl__snap_slot_t *)tacl__snap_store_slot(st, slot);
    s->regions[1].bytes += 1;
    cr_assert_eq(tacl__snap_store_verify(st, slot), TACL_ERR_INTERNAL);
    cr_assert(strstr(tacl_last_error(), "rank 3") != NULL &&
                  strstr(tacl_last_error(), "version 2") != NULL &&
                  strstr(tacl_last_error(), "'optimizer' (30001 bytes)") !=
                      NULL,
              "%s", tacl_last_error());
    assert_reads(st, 1);
    tacl__snap_store_close(st, 0);
}

Test(snap_store, other_format_refused)
{
    tacl__snap_store_t *st;
    uint32_t format = 99;
    int fd;

    write_in_child();
    fd = open_object();
    cr_assert_eq(pwrite(fd, &format, sizeof(format), 8), 4);
    close(fd);
    cr_assert_eq(tacl__snap_store_open(key, HOLDER, SOURCE, 0, 0, &st),
                 TACL_ERR_INTERNAL);
    cr_assert(strstr(tacl_last_error(), "format 99") != NULL, "%s",
              tacl_last_error());
    cr_assert(strstr(tacl_last_error(), "rank 3") != NULL);
}

Test(snap_store, copy_from_peer_checked)
{
    tacl__snap_store_t *st, *peer;
    int slot, pslot;

    write_in_child();
    st = reopen();
    cr_assert_eq(tacl__snap_store_open(key, HOLDER + 1, SOURCE, BYTES, CHUNK,
                                       &peer),
                 TACL_OK);
    slot = tacl__snap_store_find(st, 2);
    cr_assert_eq(tacl__snap_store_begin_copy(peer,
                                             tacl__snap_store_slot(st, slot),
                                             &pslot),
                 TACL_OK);
    memcpy(tacl__snap_store_crcs(peer, pslot),
           tacl__snap_store_crcs(st, slot),
           4 * tacl__snap_store_slot(st, slot)->nchunks);
    memcpy(tacl__snap_store_data(peer, pslot),
           tacl__snap_store_data(st, slot), BYTES);
    tacl__snap_store_data(peer, pslot)[5] ^= 1;
    cr_assert_eq(tacl__snap_store_commit_checked(peer, pslot),
                 TACL_ERR_INTERNAL);
    cr_assert(strstr(tacl_last_error(), "region 'weights'") != NULL);
    cr_assert_eq(tacl__snap_store_find(peer, 2), -1);
    tacl__snap_store_data(peer, pslot)[5] ^= 1;
    cr_assert_eq(tacl__snap_store_commit_checked(peer, pslot), TACL_OK);
    cr_assert_eq(tacl__snap_store_find(peer, 2), pslot);
    tacl__snap_store_close(peer, 1);
    tacl__snap_store_close(st, 0);
}
