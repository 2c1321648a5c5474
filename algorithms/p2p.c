/*
 * Point-to-point: a send or a receive is one message, also of zero bytes
 * (a receive from any peer must have one to match).  Its tag is the
 * user's tag under the point-to-point half of the sequence field
 * (lib/comm.h's TACL__SEQ_HALF): the tag's bits above the step field in
 * the sequence field, the rest in the step field.  It carries no count:
 * the transports match messages of one (source, tag) in the order they
 * were sent, so the n-th send from a to b with tag t matches the n-th
 * receive on b from a with tag t, as MPI's non-overtaking rule says, and
 * a receive from any peer takes the next message with its tag from
 * whichever peer sent one (the executor holds it until one has come).
 */
#include "toolbox.h"
#include "log.h"

_Static_assert(TACL__PEER_ANY == TACL_ANY_SOURCE,
               "the schedule's any-peer is the API's");

int tacl__p2p_supports(const tacl__coll_args_t *args,
                       const tacl__topo_view_t *view)
{
    if (args->type == TACL_COLL_RECV && args->root == TACL__PEER_ANY)
        return 1;
    return (args->type == TACL_COLL_SEND || args->type == TACL_COLL_RECV) &&
           args->root >= 0 && args->root < view->nranks;
}

/* The step tag of the user's tag (0 or more). */
static uint64_t p2p_tag(int tag)
{
    uint64_t t = (uint64_t)(uint32_t)tag;

    return TACL__TAG((1ull << (TACL__TAG_SEQ_BITS - 1)) |
                         (t >> TACL__TAG_STEP_BITS),
                     t & ((1ull << TACL__TAG_STEP_BITS) - 1));
}

double tacl__p2p_cost(const tacl__coll_args_t *args,
                      const tacl__topo_view_t *view, double alpha,
                      double beta)
{
    return alpha +
           (double)args->count * (double)tacl_dtype_size(args->dtype) * beta;
}

tacl_status_t tacl__p2p_build(tacl__sched_t *s, const tacl__coll_args_t *args,
                              const tacl__topo_view_t *view)
{
    uint64_t m = (uint64_t)args->count * tacl_dtype_size(args->dtype);
    uint64_t tag = p2p_tag(args->tag);
    tacl__algo_io_t io;
    tacl_status_t status;

    if (args->type == TACL_COLL_SEND) {
        status = tacl__algo_io(s, args, m, 0, &io);
        if (status == TACL_OK)
            tacl__sched_send(s, args->root, io.in, m, tag, TACL__NO_DEPS);
    } else if (args->type == TACL_COLL_RECV && args->root == TACL__PEER_ANY) {
        status = tacl__algo_io(s, args, 0, m, &io);
        if (status == TACL_OK && args->source != NULL) {
            tacl__bref_t src = tacl__bref(
                tacl__sched_buf(s, args->source, sizeof(int),
                                TACL__BUF_OUTPUT, TACL_MEM_HOST),
                0);

            tacl__sched_recv_any(s, io.out, m, tag, &src, TACL__NO_DEPS);
        } else if (status == TACL_OK) {
            tacl__sched_recv_any(s, io.out, m, tag, NULL, TACL__NO_DEPS);
        }
    } else if (args->type == TACL_COLL_RECV) {
        status = tacl__algo_io(s, args, 0, m, &io);
        if (status == TACL_OK)
            tacl__sched_recv(s, args->root, io.out, m, tag, TACL__NO_DEPS);
    } else {
        return tacl__error(TACL_ERR_UNSUPPORTED, COLL, "p2p does not run %s",
                           tacl_coll_name(args->type));
    }
    if (status != TACL_OK)
        return status;
    return tacl__sched_status(s);
}
