/*
 * The base of a transport instance (tl_base.h): making it, the ranks of
 * this node, and the failure and completion frame of progress().
 *
 * DESIGN.md, "Transports": shm and cuda_ipc serve the ranks of this node,
 * ucx those of other nodes; each instance learns which is which once, at
 * init, from the node identities in its params, and keeps the answer in
 * its base (local_of), where reachable() and the peer tables read it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tl_base.h"

/*
 * The ranks of this rank's node (by params' node identities), numbered
 * in world order: base->local_of gets a new array of nranks entries,
 * each a rank's local index or -1 for a rank of another node.
 */
static tacl_status_t find_local_ranks(tacl__tl_base_t *base,
                                      const tacl__tl_params_t *params)
{
    int *local_of = malloc(sizeof(int) * (size_t)params->nranks);
    int n = 0;

    if (local_of == NULL)
        return tacl__error(TACL_ERR_NO_MEMORY, INIT, "out of memory");
    for (int r = 0; r < params->nranks; ++r) {
        local_of[r] = -1;
        if (r != params->rank &&
            strcmp(params->node_ids[r], params->node_id) != 0)
            continue;
        if (r == params->rank)
            base->my_local = n;
        local_of[r] = n++;
    }
    base->local_of = local_of;
    base->nlocal = n;
    return TACL_OK;
}

tacl_status_t tacl__tl_base_new(const tacl__transport_ops_t *ops, size_t size,
                                const tacl__tl_params_t *params,
                                tacl__subsys_t subsys,
                                tacl__tl_fail_fn_t fail_pending,
                                tacl__tl_base_t **base_p)
{
    tacl__tl_base_t *base = calloc(1, size);
    tacl_status_t status;

    if (base == NULL)
        return tacl__error_record(TACL_ERR_NO_MEMORY, subsys, __FILE__,
                                  __LINE__, "cannot allocate the %s "
                                  "transport", ops->name);
    base->super.ops = ops;
    base->rank = params->rank;
    base->nranks = params->nranks;
    base->timeout_s = params->timeout_s > 0 ? params->timeout_s : 60.0;
    base->lock = params->lock;
    base->subsys = subsys;
    base->fail_pending = fail_pending;
    status = find_local_ranks(base, params);
    if (status != TACL_OK) {
        free(base);
        return status;
    }
    *base_p = base;
    return TACL_OK;
}

void tacl__tl_base_free(tacl__tl_base_t *base)
{
    free(base->local_of);
    free(base);
}

void *tacl__tl_base_peers(const tacl__tl_base_t *base, size_t size,
                          size_t rank_offset)
{
    char *peers = calloc((size_t)base->nlocal, size);

    if (peers == NULL) {
        tacl__error_record(TACL_ERR_NO_MEMORY, base->subsys, __FILE__,
                           __LINE__, "out of memory");
        return NULL;
    }
    for (int r = 0; r < base->nranks; ++r)
        if (base->local_of[r] >= 0)
            memcpy(peers + (size_t)base->local_of[r] * size + rank_offset,
                   &r, sizeof(r));
    return peers;
}

int tacl__tl_base_reachable(tacl__tl_t *tl, int peer)
{
    return (tl->ops->reach &
            tacl__tl_base_where((const tacl__tl_base_t *)tl, peer)) != 0;
}

int tacl__tl_base_probe_peers(const tacl__tl_base_t *base, const void *peers,
                              size_t stride, size_t qoff, size_t len_off,
                              uint64_t tag, int *peer, uint64_t *len)
{
    for (int i = 0; i < base->nlocal; i++) {
        const tacl__tl_msgq_t *q =
            (const tacl__tl_msgq_t *)((const char *)peers + i * stride +
                                      qoff);
        const tacl__tl_msg_t *msg = tacl__tl_msgq_find_tag(q, tag);

        if (msg != NULL) {
            *peer = msg->peer;
            memcpy(len, (const char *)msg + len_off, sizeof(*len));
            return 1;
        }
    }
    return 0;
}

tacl_status_t tacl__tl_base_sleep_fds(const tacl__tl_base_t *base,
                                      const int *fds, int n,
                                      int64_t timeout_us, const char *what)
{
    struct pollfd pfd[8];
    struct timespec ts = {(time_t)(timeout_us / 1000000),
                          (long)(timeout_us % 1000000) * 1000};

    if (n < 1 || n > (int)(sizeof(pfd) / sizeof(pfd[0])))
        return tacl__error_record(TACL_ERR_INTERNAL, base->subsys, __FILE__,
                                  __LINE__, "cannot sleep on %d descriptors "
                                  "of %s", n, what);
    for (int i = 0; i < n; ++i)
        pfd[i] = (struct pollfd){.fd = fds[i], .events = POLLIN};
    if (ppoll(pfd, (nfds_t)n, &ts, NULL) < 0 && errno != EINTR)
        return tacl__error_record(TACL_ERR_SYSTEM, base->subsys, __FILE__,
                                  __LINE__, "poll on %s failed: %m", what);
    return TACL_OK;
}

tacl_status_t tacl__tl_base_sleep_fd(const tacl__tl_base_t *base, int fd,
                                     int64_t timeout_us, const char *what)
{
    return tacl__tl_base_sleep_fds(base, &fd, 1, timeout_us, what);
}

tacl_status_t tacl__tl_base_check(tacl__tl_base_t *base,
                                  const tacl__tl_op_t *op)
{
    tacl_status_t status = tacl__tl_check_op(&base->super, op, base->rank,
                                             base->subsys);

    return status != TACL_OK ? status : base->failed;
}

void tacl__tl_base_fail(tacl__tl_base_t *base, tacl_status_t status)
{
    tacl__tl_base_mark_failed(base, status);
    base->fail_pending(base, status);
}

int tacl__tl_base_finish(tacl__tl_base_t *base, int events)
{
    if (base->failed != TACL_OK)
        base->fail_pending(base, base->failed);
    events += tacl__tl_opq_run(&base->done);
    return base->failed != TACL_OK ? base->failed : events;
}

void tacl__tl_base_cancel_all(tacl__tl_t *tl, tacl_status_t status)
{
    tacl__tl_base_t *base = (tacl__tl_base_t *)tl;

    base->fail_pending(base, status);
    tacl__tl_opq_run(&base->done);
}
