/*
 * The API side of the flight recorder (executor/flight.h): what an
 * operation is, recorded when it starts, and dumps on request.
 */
#include <stdio.h>

#include "common.h"
#include "comm.h"
#include "log.h"

void tacl__flight_note(tacl_comm_t comm, const tacl__op_t *ops, int nops)
{
    tacl__flight_note_args(comm, &ops[0].args, nops);
}

void tacl__flight_op_of(tacl_comm_t comm, const tacl__coll_args_t *a,
                        int nops, tacl__flight_op_t *rec)
{
    /* Collective and p2p numbers live in the two halves of the tag's
     * sequence field (coll.c); the record keeps the number within. */
    uint64_t half = 1ull << (TACL__TAG_SEQ_BITS - 1);

    *rec = (tacl__flight_op_t){
        .seq = a->seq % half,
        .sig = tacl__op_sig_of(a),
        .algo = comm->last_algo,
        .nops = nops,
    };
}

void tacl__flight_note_args(tacl_comm_t comm, const tacl__coll_args_t *a,
                            int nops)
{
    tacl__flight_op_t rec;

    tacl__flight_op_of(comm, a, nops, &rec);
    tacl__flight_begin(&comm->x.flight, &rec);
}

static tacl_status_t dump_flight_held(tacl_comm_t comm, void *file)
{
    pthread_mutex_lock(&comm->x.ctx->lock);
    tacl__flight_dump(&comm->x, "request", (FILE *)file, file == NULL);
    pthread_mutex_unlock(&comm->x.ctx->lock);
    return TACL_OK;
}

TACL_EXPORT tacl_status_t tacl_comm_dump_flight(tacl_comm_t comm, void *file)
{
    TACL__COMM_HELD(comm, dump_flight_held(comm, file));
}
