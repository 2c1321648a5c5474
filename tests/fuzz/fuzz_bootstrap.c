/*
 * libFuzzer harness: the bootstrap ring's wire messages (frames of
 * core/bootstrap_ring.c: headers, DATA payloads, ABORT, GOODBYE and
 * REVOKE).  Rank 1 of a three-rank ring is built around two socket pairs
 * (bootstrap_int.h is the harness's only way in: the ring is otherwise
 * made by a TCP rendezvous); the input arrives from its predecessor and
 * its successor, then the rank checks liveness and may run an allgather
 * with a short timeout.  Whatever arrives, every call must return a
 * status (a failure naming a rank in range), never crash, never wait
 * past its timeout.
 *
 * Input: byte 0 holds flags (bit 0: the predecessor closes after
 * sending, bit 1: the successor does, bit 2: run an allgather, bit 3: a
 * second check, bits 4-7: the allgather's record size in 4-byte units);
 * byte 1 says how many of the remaining bytes go to the successor, the
 * rest go to the predecessor.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fuzz.h"
#include "bootstrap.h"
#include "bootstrap_int.h"

#define NRANKS 3
#define MY_RANK 1

/* Send what fits into the socket buffer; the rest is dropped. */
static void feed(int fd, const uint8_t *data, size_t size)
{
    while (size > 0) {
        ssize_t n = send(fd, data, size, MSG_DONTWAIT | MSG_NOSIGNAL);

        if (n <= 0)
            return;
        data += n;
        size -= (size_t)n;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int pred[2], succ[2];
    tacl__bootstrap_t *bs;
    uint8_t flags;
    size_t to_succ, rec;
    char all[NRANKS * 64];
    tacl_status_t st;

    if (size < 2)
        return 0;
    flags = data[0];
    to_succ = data[1];
    data += 2;
    size -= 2;
    if (to_succ > size)
        to_succ = size;
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, pred) != 0)
        return 0;
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, succ) != 0) {
        close(pred[0]);
        close(pred[1]);
        return 0;
    }
    bs = calloc(1, sizeof(*bs));
    if (bs == NULL)
        abort();
    bs->rank = MY_RANK;
    bs->nranks = NRANKS;
    bs->timeout_s = 0.002;
    bs->failed_rank = -1;
    bs->listen_fd = -1;
    bs->root_fd = -1;
    bs->timed_out = calloc(NRANKS, 1);
    bs->link[TACL_BOOT_PRED] = (tacl__boot_link_t){.fd = pred[0], .peer = 0};
    bs->link[TACL_BOOT_SUCC] = (tacl__boot_link_t){.fd = succ[0], .peer = 2};
    feed(succ[1], data, to_succ);
    feed(pred[1], data + to_succ, size - to_succ);
    if (flags & 1) {
        close(pred[1]);
        pred[1] = -1;
    }
    if (flags & 2) {
        close(succ[1]);
        succ[1] = -1;
    }
    st = tacl__bootstrap_check(bs);
    if (st != TACL_OK && st != TACL_ERR_REMOTE && st != TACL_ERR_SYSTEM)
        abort();
    if (flags & 8)
        (void)tacl__bootstrap_check(bs);
    if (flags & 4) {
        rec = (size_t)(flags >> 4) * 4;
        memset(all, 0x11, sizeof(all));
        (void)tacl__bootstrap_allgather(bs, all, rec);
    }
    /* A failure names a rank of the ring. */
    if (bs->failed && (bs->failed_rank < 0 || bs->failed_rank >= NRANKS)) {
        fprintf(stderr, "failed rank %d out of range\n", bs->failed_rank);
        abort();
    }
    tacl__bootstrap_fini(bs);
    if (pred[1] >= 0)
        close(pred[1]);
    if (succ[1] >= 0)
        close(succ[1]);
    return 0;
}
