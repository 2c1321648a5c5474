/*
 * TCP bootstrap.  The unique id carries the root's address (IPv4 address
 * and port) and a random nonce.  tacl__bootstrap_init() connects every rank
 * to the root, which hands out the table of all ranks' listening
 * addresses; then each rank connects to its ring successor and accepts its
 * predecessor.  The ring carries allgather and barrier traffic and watches
 * liveness: a neighbor whose socket closes without a goodbye is a failure,
 * and the failure is forwarded around the ring so every rank learns of it.
 *
 * Every wait is bounded by the timeout given at init.
 */
#ifndef TACL_CORE_BOOTSTRAP_H
#define TACL_CORE_BOOTSTRAP_H

#include <stddef.h>
#include <stdint.h>

#include "tacl.h"

typedef struct tacl__bootstrap tacl__bootstrap_t;

/**
 * Fill a unique id: open a listener (on TACL_SOCKET_IFNAME's address, the
 * first up non-loopback interface, else loopback) that the rank which
 * later calls init with this id and rank 0 will serve from.  The process
 * that creates the id must be rank 0 of that communicator.
 */
tacl_status_t tacl__bootstrap_unique_id(tacl_unique_id_t *id_p);

/**
 * Make a unique id for a known root address "host:port" (torchrun's
 * MASTER_ADDR/MASTER_PORT); the rank that will be rank 0 binds that port
 * in init.
 */
tacl_status_t tacl__bootstrap_id_from_addr(const char *host, int port,
                                           tacl_unique_id_t *id_p);

/** Join: returns once all nranks ranks are connected. */
tacl_status_t tacl__bootstrap_init(const tacl_unique_id_t *id, int rank,
                                   int nranks, double timeout_s,
                                   tacl__bootstrap_t **bs_p);

/**
 * Allgather: all holds nranks records of size bytes; the caller's own
 * record is at all + rank * size; on return every record is filled.
 * Collective over all ranks of the bootstrap.
 */
tacl_status_t tacl__bootstrap_allgather(tacl__bootstrap_t *bs, void *all,
                                        size_t size);

/** Collective barrier over all ranks. */
tacl_status_t tacl__bootstrap_barrier(tacl__bootstrap_t *bs);

/**
 * Non-blocking liveness check, cheap enough to call from a progress loop:
 * TACL_OK, or TACL_ERR_REMOTE once any rank has failed (seen directly or
 * forwarded), with tacl__error() recording which.
 */
tacl_status_t tacl__bootstrap_check(tacl__bootstrap_t *bs);

/**
 * Declare this rank failed to the others (on abort): they will see
 * TACL_ERR_REMOTE from tacl__bootstrap_check().
 */
void tacl__bootstrap_abort(tacl__bootstrap_t *bs);

/**
 * Fail the bootstrap because rank failed (this rank learned it some other
 * way, such as a transport seeing that peer die) and pass ABORT(rank)
 * around the ring, so every rank reports that rank rather than whichever
 * rank later exits because of it.  Out of range names this rank.
 */
void tacl__bootstrap_fail(tacl__bootstrap_t *bs, int rank);

/**
 * This rank timed out in an operation: find the rank that hangs.  Sends
 * TIMEOUT(this rank) round the ring both ways and listens for wait_s for
 * the others' (every rank passes each on once): live ranks stuck behind
 * a hung or cut-off one time out too and say so, the hung one cannot.
 * The first rank never heard from is declared failed (ABORT round the
 * ring, *hung_p set, the error recorded naming it) and TACL_ERR_TIMEOUT
 * returned; TACL_ERR_REMOTE when a failure is reported meanwhile (that
 * error recorded); TACL_OK with *hung_p = -1 when every rank timed out.
 */
tacl_status_t tacl__bootstrap_timeout(tacl__bootstrap_t *bs, double wait_s,
                                      int *hung_p);

/**
 * Revoke (recovery from a failure): fail this bootstrap like an abort,
 * but tell the others, around the ring, that rank revoked it; their
 * tacl__bootstrap_check() returns TACL_ERR_REMOTE saying so.  This rank
 * stays alive and can still take part in tacl__bootstrap_shrink().
 */
void tacl__bootstrap_revoke(tacl__bootstrap_t *bs);

/**
 * Shrink rendezvous (bootstrap_shrink.c): every survivor of a failure
 * calls it.  members lists the bootstrap ranks of a communicator in its
 * rank order, me is this rank's index there, and key names the
 * communicator and the attempt (the same on every survivor).  A member
 * whose process is gone (its listener refuses or resets connections)
 * is left out; the lowest survivor makes a fresh unique id and hands it
 * to the others with their new ranks (survivors keep their order).
 * Works after the ring broke; bounded by the timeout given at init.
 */
tacl_status_t tacl__bootstrap_shrink(tacl__bootstrap_t *bs,
                                     const int *members, int n, int me,
                                     uint64_t key, tacl_unique_id_t *id_p,
                                     int *new_rank_p, int *new_size_p);

/**
 * Group rendezvous (bootstrap_shrink.c) for tacl_comm_create_group: the n
 * members (bootstrap ranks in the group's order; me is this rank's index)
 * meet at members[0]'s listener while the other ranks do as they please.
 * key names the meeting (the same on every member; meetings with other
 * keys may be pending at once), check is a hash of the caller's list.
 * members[0] hands its *value_p to the others, which get it back in
 * *value_p.  Every member is needed: one that is gone fails it with
 * TACL_ERR_REMOTE, one that does not come within timeout_s with
 * TACL_ERR_TIMEOUT (TACL_ERR_INVALID_USAGE when a member came with
 * another check meanwhile); the leader's error reaches every member that
 * came.
 */
tacl_status_t tacl__bootstrap_meet(tacl__bootstrap_t *bs, const int *members,
                                   int n, int me, uint64_t key,
                                   uint64_t check, double timeout_s,
                                   uint64_t *value_p);

/** Say goodbye to the neighbors and close; not collective. */
void tacl__bootstrap_fini(tacl__bootstrap_t *bs);

int tacl__bootstrap_rank(const tacl__bootstrap_t *bs);
int tacl__bootstrap_nranks(const tacl__bootstrap_t *bs);

#endif /* TACL_CORE_BOOTSTRAP_H */
