/*
 * Running operations as schedules: the decider's choice (through the
 * plan cache for a single operation) built into one schedule per call or
 * group, started on the executor with its flight record, and the small
 * all-gather the library itself runs (split's, TACL_CHECK's, the fast
 * engine's set-up).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "config.h"
#include "comm.h"
#include "log.h"
#include "memseg.h"
#include "plan.h"

/*
 * What the builders may assume about the node's memory: whether its
 * processes map one another's shared memory at all, and whether the buffer
 * peers read from this rank is memory they map.  Decided here so that a
 * builder's schedule depends on its arguments and topology only.
 */
void tacl__coll_mark(tacl__coll_args_t *a)
{
    size_t bytes = a->count * tacl_dtype_size(a->dtype);
    const void *read = a->type == TACL_COLL_ALLREDUCE ? a->recvbuf
                                                       : a->sendbuf;
    tacl__memseg_ref_t ref;

    a->chunk_bytes = tacl__config_size(TACL_CFG_CHUNK_SIZE);
    a->shm_map = tacl__config_bool(TACL_CFG_SHM_MAP);
    /* No builder of a variable-count call reads its peers' memory. */
    a->send_mapped = read != NULL && bytes > 0 &&
                     !tacl__coll_vcounted(a->type) &&
                     tacl__memseg_find(read, bytes, &ref);
}

static int step_overlaps(const tacl__sched_t *s, tacl__bref_t a,
                         tacl__bref_t b, uint64_t bytes_a, uint64_t bytes_b)
{
    const char *pa = (const char *)s->bufs[a.buf].ptr + a.off;
    const char *pb = (const char *)s->bufs[b.buf].ptr + b.off;

    if (s->bufs[a.buf].role == TACL__BUF_SCRATCH ||
        s->bufs[b.buf].role == TACL__BUF_SCRATCH)
        return a.buf == b.buf &&
               tacl__ranges_overlap(pa, bytes_a, pb, bytes_b);
    return tacl__ranges_overlap(pa, bytes_a, pb, bytes_b);
}

/*
 * A group may send from and receive into the same memory (nccl-tests'
 * in-place send/recv does).  A receive that nothing depends on and whose
 * destination overlaps a send's source lands in scratch instead, and is
 * copied in once both the receive and those sends are done.
 */
static tacl_status_t stage_aliased_recvs(tacl__sched_t *s)
{
    uint32_t n = s->nsteps;
    uint8_t *has_dependents;
    tacl_status_t status = TACL_OK;

    has_dependents = calloc(n + 1, 1);
    if (has_dependents == NULL)
        return tacl__error(TACL_ERR_NO_MEMORY, COLL, "out of memory");
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t k = 0; k < s->steps[i].ndeps; k++)
            has_dependents[tacl__sched_deps(s, i)[k]] = 1;
    for (uint32_t r = 0; r < n && status == TACL_OK; r++) {
        tacl__step_t recv = s->steps[r];
        int32_t deps[TACL__MAX_DEPS], nd = 0, scratch;
        tacl__bref_t tmp;

        if (recv.kind != TACL__STEP_RECV || has_dependents[r] ||
            recv.bytes == 0)
            continue;
        deps[nd++] = (int32_t)r;
        for (uint32_t q = 0; q < n && nd < TACL__MAX_DEPS; q++) {
            const tacl__step_t *send = &s->steps[q];
            if (send->kind == TACL__STEP_SEND &&
                step_overlaps(s, recv.dst, send->src, recv.bytes,
                              send->bytes))
                deps[nd++] = (int32_t)q;
        }
        if (nd == 1)
            continue;
        scratch = tacl__sched_scratch(s, recv.bytes,
                                      (tacl_memtype_t)
                                          s->bufs[recv.dst.buf].memtype);
        if (scratch < 0)
            break;
        tmp = tacl__bref(scratch, 0);
        s->steps[r].dst = tmp;
        tacl__sched_copy(s, recv.dst, tmp, recv.bytes, deps, nd);
    }
    free(has_dependents);
    return status != TACL_OK ? status : tacl__sched_status(s);
}

tacl_status_t tacl__ops_build(tacl_comm_t comm, const tacl__op_t *ops,
                              int nops, tacl__sched_t *sched_p)
{
    tacl__sched_t sched;
    tacl_status_t status = TACL_OK;

    tacl__sched_init(&sched, comm->rank, comm->size);
    for (int i = 0; i < nops && status == TACL_OK; i++) {
        tacl__choice_t choice;

        if (nops == 1) {
            status = tacl__plan_build(comm, &ops[i].args, 0, &sched, &choice);
        } else {
            status = tacl__choose(comm, &ops[i].args, 0, &choice);
            if (status == TACL_OK)
                status = tacl__algo_build(&sched, &ops[i].args, &comm->view,
                                          &choice);
        }
        if (status == TACL_OK &&
            strcmp(comm->last_algo, choice.algo->name) != 0)
            snprintf(comm->last_algo, sizeof(comm->last_algo), "%s",
                     choice.algo->name);
        if (status == TACL_OK)
            TACL_INFO(COLL, "rank %d: %s of %zu x %s with %s (seq %llu)",
                      comm->rank, tacl_coll_name(ops[i].args.type),
                      ops[i].args.count, tacl_dtype_name(ops[i].args.dtype),
                      choice.algo->name, (unsigned long long)ops[i].args.seq);
    }
    if (status == TACL_OK)
        status = tacl__sched_status(&sched);
    if (status == TACL_OK && nops > 1)
        status = stage_aliased_recvs(&sched);
    if (status != TACL_OK)
        tacl__sched_fini(&sched);
    *sched_p = sched;
    return status;
}

tacl_status_t tacl__ops_start(tacl_comm_t comm, const tacl__op_t *ops,
                              int nops, int waited, tacl__exec_t **exec_p)
{
    tacl__sched_t sched;
    tacl__dev_streams_t streams;
    tacl_status_t status = tacl__stream_collect(ops, nops, &streams);

    if (status == TACL_OK)
        status = tacl__ops_build(comm, ops, nops, &sched);
    if (status != TACL_OK)
        return status;
    tacl__flight_note(comm, ops, nops);
    status = tacl__exec_start_on(&comm->x, &sched, &streams, waited, exec_p);
    tacl__sched_fini(&sched);
    return status;
}

/* Small allgather over a communicator through the executor: the
 * library's own, so the user's last algorithm stays as it was. */
tacl_status_t tacl__comm_allgather_small(tacl_comm_t comm, uint64_t seq,
                                         const void *mine, void *all,
                                         size_t bytes)
{
    char last_algo[sizeof(comm->last_algo)];
    tacl__op_t op = {
        .comm = comm,
        .args = {
            .type = TACL_COLL_ALLGATHER,
            .sendbuf = mine,
            .recvbuf = all,
            .count = bytes,
            .dtype = TACL_UINT8,
            .memtype = TACL_MEM_HOST,
            .seq = seq,
            .chunk_bytes = tacl__config_size(TACL_CFG_CHUNK_SIZE),
        },
    };
    tacl__exec_t *exec;
    tacl_status_t status;

    pthread_mutex_lock(&comm->x.ctx->lock);
    memcpy(last_algo, comm->last_algo, sizeof(last_algo));
    status = tacl__ops_start(comm, &op, 1, 1, &exec);
    memcpy(comm->last_algo, last_algo, sizeof(last_algo));
    pthread_mutex_unlock(&comm->x.ctx->lock);
    if (status != TACL_OK)
        return status;
    status = tacl__exec_wait(&exec, 1);
    tacl__exec_free(exec);
    return status;
}

