/*
 * Internals shared by the two halves of the bootstrap: bootstrap.c (ids
 * and the rendezvous that builds the ring) and bootstrap_ring.c (frames,
 * liveness and collectives on the ring).  Nothing outside them includes
 * this header.
 */
#ifndef TACL_CORE_BOOTSTRAP_INT_H
#define TACL_CORE_BOOTSTRAP_INT_H

#include <stddef.h>
#include <stdint.h>

#include "bootstrap.h"

/* How long a best-effort message (a refusal, an abort) may take. */
#define TACL_BOOT_SHORT_NS (200 * 1000000ull)

#define TACL_BOOT_FRAME_MAGIC 0x7462u

enum {
    TACL_BOOT_FRAME_DATA = 1,
    TACL_BOOT_FRAME_ABORT = 2,
    TACL_BOOT_FRAME_GOODBYE = 3,
    TACL_BOOT_FRAME_REVOKE = 4,
    TACL_BOOT_FRAME_TIMEOUT = 5
};

/* The header of every frame on a ring socket; 16 bytes, host order. */
typedef struct {
    uint16_t magic;
    uint16_t type;
    int32_t arg;  /* DATA: the step; ABORT: the failed rank; REVOKE: the
                     rank that revoked; TIMEOUT: the rank that timed out */
    uint64_t len; /* payload bytes, 0 for control frames */
} tacl__boot_frame_t;

/* The two ring links: data comes from PRED and goes to SUCC. */
enum { TACL_BOOT_PRED = 0, TACL_BOOT_SUCC = 1 };

typedef struct {
    int fd;          /* -1 once closed */
    int peer;        /* the rank at the other end */
    int goodbye;     /* the peer said goodbye: its end of file is normal */
    int tx_partial;  /* a frame is partly sent: a control frame cannot go */
    size_t hdr_got;  /* header bytes read; a full DATA header waits here */
    tacl__boot_frame_t hdr;
} tacl__boot_link_t;

/* A rank's listening address, in network byte order. */
typedef struct {
    uint32_t addr;
    uint16_t port;
    uint16_t reserved;
} tacl__boot_addr_t;

struct tacl__bootstrap {
    int rank;
    int nranks;
    double timeout_s;
    uint64_t nonce;
    tacl__boot_link_t link[2];
    int failed;      /* set once, never cleared */
    int failed_rank; /* the rank that failed first, as far as we know */
    int listen_fd;   /* kept open: a shrink probes and meets ranks here */
    unsigned char *timed_out; /* per rank: said it timed out (TIMEOUT) */
    int root_fd;     /* rank 0: the root listener of an id from
                        tacl__bootstrap_unique_id, kept to refuse late
                        joiners; -1 otherwise */
    tacl__boot_addr_t *table; /* every rank's listener; NULL for one rank */
    /* Connections accepted on listen_fd whose hello waits for its
     * meeting (bootstrap_shrink.c), under that file's lock. */
    struct tacl__boot_pending *stash;
    int nstash, stash_cap;
};

/*
 * Rank 0: answer one connection waiting on root_fd (a process that joins
 * after every rank did) with a refusal that says why, and close it.
 */
void tacl__boot_refuse_late(tacl__bootstrap_t *bs);

/* Close and free the stash of waiting hellos (bootstrap_shrink.c). */
void tacl__boot_stash_free(tacl__bootstrap_t *bs);

#endif /* TACL_CORE_BOOTSTRAP_INT_H */
