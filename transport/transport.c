/*
 * What the transports share: the choice of a transport for a message,
 * and the stubs for the slots a transport does not fill.
 *
 * DESIGN.md, "Transports": each transport lists the memory types it can
 * read and write, and serves a class of peers (shm host memory inside a
 * node, cuda_ipc device memory there, ucx and verbs other nodes).
 * tacl__tl_select() turns that into the choice for one message, by where
 * its peer is and by its memory type.
 *
 * Every ops table points its missing slots at the stubs, so callers never
 * test a slot for NULL: an operation a transport cannot do fails with
 * TACL_ERR_UNSUPPORTED, a transport that reaches nobody says so, and a
 * transport with no way to sleep yields the processor instead.
 */
#include <sched.h>
#include <stdio.h>

#include "log.h"
#include "transport.h"

/* The capability bit of a memory type; 0 for one no transport can list. */
static unsigned memtype_cap(tacl_memtype_t memtype)
{
    switch (memtype) {
    case TACL_MEM_HOST:
        return TACL__TL_CAP_HOST;
    case TACL_MEM_CUDA:
        return TACL__TL_CAP_CUDA;
    default:
        return 0;
    }
}

static const char *memtype_name(tacl_memtype_t memtype)
{
    return memtype == TACL_MEM_HOST ? "host"
           : memtype == TACL_MEM_CUDA ? "CUDA" : "unresolved (AUTO)";
}

/* The memory types a transport's capabilities list, in words. */
static const char *caps_memory(unsigned caps)
{
    switch (caps & (TACL__TL_CAP_HOST | TACL__TL_CAP_CUDA)) {
    case TACL__TL_CAP_HOST:
        return "host";
    case TACL__TL_CAP_CUDA:
        return "CUDA";
    case TACL__TL_CAP_HOST | TACL__TL_CAP_CUDA:
        return "host and CUDA";
    default:
        return "no";
    }
}

/* The peers of a reach, in words. */
static const char *where_name(unsigned where)
{
    switch (where) {
    case TACL__TL_PEER_SELF:
        return "this rank itself";
    case TACL__TL_PEER_NODE:
        return "other ranks of this node";
    case TACL__TL_PEER_NET:
        return "ranks of other nodes";
    default:
        return "the peers it was set up for";
    }
}

int tacl__tl_select(tacl__tl_t *const *tls, int ntl, tacl__tl_where_t where,
                    tacl_memtype_t memtype, tacl__tl_why_t *why_p)
{
    unsigned cap = memtype_cap(memtype);
    size_t len;
    int reach = 0;

    for (int t = 0; t < ntl; ++t) {
        const tacl__transport_ops_t *ops = tls[t]->ops;

        if (!(ops->reach & where))
            continue;
        if (cap && (ops->caps & cap))
            return t;
        ++reach;
    }
    if (!reach) {
        snprintf(why_p->text, sizeof(why_p->text), "no transport here "
                 "reaches %s%s", where_name(where),
                 where == TACL__TL_PEER_NET
                     ? "; is a network transport built in, and TACL_NET "
                       "not none?" : "");
        return -1;
    }
    len = (size_t)snprintf(why_p->text, sizeof(why_p->text), "no transport "
                           "here moves %s memory to %s:",
                           memtype_name(memtype), where_name(where));
    for (int t = 0; t < ntl && len < sizeof(why_p->text); ++t) {
        const tacl__transport_ops_t *ops = tls[t]->ops;

        if (!(ops->reach & where))
            continue;
        len += (size_t)snprintf(why_p->text + len, sizeof(why_p->text) - len,
                                " %s moves %s memory only%s", ops->name,
                                caps_memory(ops->caps), --reach ? "," : "");
    }
    return -1;
}

tacl_status_t tacl__tl_check_op(tacl__tl_t *tl, const tacl__tl_op_t *op,
                                int rank, tacl__subsys_t subsys)
{
    const tacl__transport_ops_t *ops = tl->ops;

    if (!tacl__tl_reachable(tl, op->peer))
        return tacl__error_record(TACL_ERR_INVALID_ARG, subsys, __FILE__,
                                  __LINE__, "%s cannot reach rank %d from "
                                  "rank %d; it serves %s", ops->name,
                                  op->peer, rank, where_name(ops->reach));
    if (!(ops->caps & memtype_cap((tacl_memtype_t)op->memtype)))
        return tacl__error_record(TACL_ERR_UNSUPPORTED, subsys, __FILE__,
                                  __LINE__, "%s moves %s memory only",
                                  ops->name, caps_memory(ops->caps));
    if (op->len && !op->buf)
        return tacl__error_record(TACL_ERR_INVALID_ARG, subsys, __FILE__,
                                  __LINE__, "NULL buffer for a %llu-byte "
                                  "message", (unsigned long long)op->len);
    return TACL_OK;
}

tacl_status_t tacl__tl_length_error(int peer, uint64_t tag, uint64_t got,
                                    int more, uint64_t want,
                                    tacl__subsys_t subsys)
{
    return tacl__error_record(TACL_ERR_INVALID_USAGE, subsys, __FILE__,
                              __LINE__, "rank %d's message of tag 0x%llx has "
                              "%s%llu bytes where this rank's receive "
                              "expects %llu: the ranks called the operation "
                              "with different counts or dtypes (TACL_CHECK=1 "
                              "names the difference)", peer,
                              (unsigned long long)tag, more ? "more than " : "",
                              (unsigned long long)got,
                              (unsigned long long)want);
}

int tacl__tl_reachable_none(tacl__tl_t *tl, int peer)
{
    return 0;
}

tacl_status_t tacl__tl_post_unsupported(tacl__tl_t *tl, tacl__tl_op_t *op)
{
    return tacl__error(TACL_ERR_UNSUPPORTED, INIT,
                       "transport %s cannot post operations; pick another "
                       "transport for peer %d", tl->ops->name, op->peer);
}

tacl_status_t tacl__tl_wait_yield(tacl__tl_t *tl, int64_t timeout_us)
{
    sched_yield();
    return TACL_OK;
}

int tacl__tl_probe_none(tacl__tl_t *tl, uint64_t tag, int *peer,
                        uint64_t *len)
{
    return 0;
}
