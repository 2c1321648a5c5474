/*
 * Recovery after a rank died: tacl_comm_revoke and tacl_comm_shrink.
 *
 * Revoke fails the communicator's context on this rank and sends a REVOKE
 * notice around the bootstrap ring (core/bootstrap_ring.c), which fails
 * the context of every rank it reaches: their pending and later
 * operations end with TACL_ERR_REMOTE.  The unit is the context, not the
 * communicator: communicators from split share their parent's
 * connections and sequence of ring messages, and one failed connection
 * cannot be told apart per communicator, so a revoke reaches them all.
 * Shrink starts with a revoke, so that survivors still blocked in an
 * operation on the old communicator are released at once (a death seen
 * by one transport does not by itself reach ranks further round the
 * ring) and join the shrink in time.
 *
 * A death leaves the context failed for good (executor/context.h): its
 * transports may hold half-sent messages from the dead rank.  So the
 * survivors do not mend it; they meet through the bootstrap's listeners
 * (core/bootstrap_shrink.c, which needs no working ring), agree on who is
 * left, and build a fresh context and communicator as tacl_comm_init_rank
 * does, with the lowest survivor as the new rank 0.
 */
#include <pthread.h>
#include <stdint.h>

#include "common.h"
#include "comm.h"
#include "log.h"

/* Fail the context here and tell every rank; once is enough. */
static void comm_revoke(tacl_comm_t comm)
{
    tacl__ctx_t *ctx = comm->x.ctx;

    pthread_mutex_lock(&ctx->lock);
    if (ctx->fatal == TACL_OK) {
        tacl__error(TACL_ERR_REMOTE, INIT, "rank %d revoked the "
                    "communicator: every operation on it fails; shrink "
                    "it (tacl_comm_shrink) to go on", ctx->rank);
        tacl__bootstrap_revoke(ctx->bs);
        tacl__ctx_set_fatal(ctx, TACL_ERR_REMOTE);
    } else if (ctx->bs != NULL) {
        /* Failed already (a peer died): still pass the news on. */
        tacl__bootstrap_revoke(ctx->bs);
    }
    pthread_mutex_unlock(&ctx->lock);
}

TACL_EXPORT tacl_status_t tacl_comm_revoke(tacl_comm_t comm)
{
    tacl_status_t status;

    tacl__last_error_clear();
    status = tacl__comm_enter(comm);
    if (status != TACL_OK)
        return status;
    comm_revoke(comm);
    tacl__comm_leave(comm);
    return TACL_OK;
}

static tacl_status_t shrink_held(tacl_comm_t comm, tacl_comm_t *newcomm_p)
{
    tacl_unique_id_t id;
    tacl_status_t status;
    uint64_t key, start = tacl__now_ns();
    int new_rank, new_size;

    if (newcomm_p == NULL)
        return tacl__comm_fail(comm, tacl__error(TACL_ERR_INVALID_ARG, INIT,
                                                 "newcomm_p is NULL"));
    if (comm->is_derived)
        return tacl__comm_fail(comm, tacl__error(TACL_ERR_INVALID_USAGE,
                               INIT, "this communicator came from "
                               "tacl_comm_get_local/rail; shrink its "
                               "parent instead"));
    comm_revoke(comm);
    /* The same on every survivor: the communicator and the attempt. */
    key = ((uint64_t)comm->x.id << 32) ^ comm->shrinks++;
    status = tacl__bootstrap_shrink(comm->x.ctx->bs, comm->x.world,
                                    comm->size, comm->rank, key, &id,
                                    &new_rank, &new_size);
    if (status != TACL_OK)
        return tacl__comm_fail(comm, status);
    TACL_INFO(INIT, "shrink: rank %d of %d is rank %d of %d survivors",
              comm->rank, comm->size, new_rank, new_size);
    status = tacl__comm_init_as(comm, new_size, &id, new_rank, newcomm_p);
    if (status != TACL_OK)
        return tacl__comm_fail(comm, status);
    TACL_INFO(INIT, "shrink: rank %d rebuilt in %.3f s", new_rank,
              (double)(tacl__now_ns() - start) / 1e9);
    return TACL_OK;
}

TACL_EXPORT tacl_status_t tacl_comm_shrink(tacl_comm_t comm,
                                           tacl_comm_t *newcomm_p)
{
    TACL__COMM_HELD(comm, shrink_held(comm, newcomm_p));
}
