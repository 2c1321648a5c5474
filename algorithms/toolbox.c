/*
 * The builders' toolbox (toolbox.h): block ranges, in-place detection,
 * buffer registration, pipeline chunking and the finishing copy every
 * builder shares.  Pure functions of their arguments; nothing here picks
 * an algorithm.
 */
#include "toolbox.h"

void tacl__block_range(size_t count, int nblocks, int block, size_t *off_p,
                       size_t *count_p)
{
    size_t base = count / (size_t)nblocks, rem = count % (size_t)nblocks;
    size_t b = (size_t)block;

    *off_p = b * base + TACL_MIN(b, rem);
    *count_p = base + (b < rem ? 1 : 0);
}

int tacl__algo_in_place(const tacl__coll_args_t *args, int rank)
{
    size_t es = tacl_dtype_size(args->dtype);
    size_t shift = (size_t)rank * args->count * es;

    if (args->sendbuf == NULL || args->recvbuf == NULL ||
        tacl__coll_vcounted(args->type))
        return 0;
    switch (args->type) {
    case TACL_COLL_ALLGATHER:
        return (const char *)args->sendbuf ==
               (const char *)args->recvbuf + shift;
    case TACL_COLL_REDUCE_SCATTER:
        return (const char *)args->recvbuf ==
               (const char *)args->sendbuf + shift;
    default:
        return args->sendbuf == args->recvbuf;
    }
}

tacl_status_t tacl__algo_io(tacl__sched_t *s, const tacl__coll_args_t *args,
                            uint64_t in_bytes, uint64_t out_bytes,
                            tacl__algo_io_t *io_p)
{
    tacl__algo_io_t io = {{0, 0}, {0, 0}, 0, 0, 0, 0};
    int rank = s->rank;
    size_t shift;
    int32_t b;

    io.esize = tacl_dtype_size(args->dtype);
    shift = (size_t)rank * args->count * io.esize;
    io.in_place = in_bytes && out_bytes && tacl__algo_in_place(args, rank);
    if (io.in_place && args->type == TACL_COLL_REDUCE_SCATTER) {
        /* One buffer: the whole sendbuf, the output a block of it. */
        b = tacl__sched_buf(s, args->sendbuf, in_bytes, TACL__BUF_OUTPUT,
                            args->memtype);
        io.in = tacl__bref(b, 0);
        io.out = tacl__bref(b, shift);
    } else if (io.in_place) {
        b = tacl__sched_buf(s, args->recvbuf, out_bytes, TACL__BUF_OUTPUT,
                            args->memtype);
        io.out = tacl__bref(b, 0);
        io.in = tacl__bref(b, args->type == TACL_COLL_ALLGATHER ? shift
                                                                 : 0);
    } else {
        if (in_bytes) {
            b = tacl__sched_buf(s, args->sendbuf, in_bytes, TACL__BUF_INPUT,
                                args->memtype);
            io.in = tacl__bref(b, 0);
        }
        if (out_bytes) {
            b = tacl__sched_buf(s, args->recvbuf, out_bytes,
                                TACL__BUF_OUTPUT, args->memtype);
            io.out = tacl__bref(b, 0);
        }
    }
    io.has_in = in_bytes != 0;
    io.has_out = out_bytes != 0;
    if (tacl__sched_status(s) != TACL_OK)
        return tacl__sched_status(s);
    *io_p = io;
    return TACL_OK;
}

tacl_status_t tacl__algo_blocks_io(tacl__sched_t *s,
                                   const tacl__coll_args_t *args,
                                   tacl__algo_io_t *io_p, size_t *total_p,
                                   int *done_p)
{
    int ag = args->type == TACL_COLL_ALLGATHER;
    int ar = args->type == TACL_COLL_ALLREDUCE;
    size_t es = tacl_dtype_size(args->dtype);
    size_t total = ar ? args->count : args->count * (size_t)s->nranks;
    tacl_status_t status;

    *total_p = total;
    *done_p = 0;
    status = tacl__algo_io(s, args, (uint64_t)(ag ? args->count : total) * es,
                           (uint64_t)(ag || ar ? total : args->count) * es,
                           io_p);
    if (status != TACL_OK || s->nranks > 1)
        return status;
    *done_p = 1;
    return tacl__algo_alone(s, args, io_p);
}

#define ALGO_MAX_CHUNKS 16

uint32_t tacl__algo_nchunks_max(const tacl__coll_args_t *args,
                                size_t max_elems, size_t esize,
                                uint64_t msgs_per_chunk, uint32_t max_chunks)
{
    uint64_t bytes = (uint64_t)max_elems * esize, c = 1, cap;

    if (args->chunk_bytes > 0)
        c = TACL_DIV_UP(bytes, args->chunk_bytes);
    cap = (1ull << TACL__TAG_STEP_BITS) / (msgs_per_chunk ? msgs_per_chunk
                                                          : 1);
    c = TACL_MIN(c, TACL_MIN(cap, (uint64_t)max_chunks));
    c = TACL_MIN(c, (uint64_t)max_elems);
    return c ? (uint32_t)c : 1;
}

uint32_t tacl__algo_nchunks(const tacl__coll_args_t *args, size_t max_elems,
                            size_t esize, uint64_t msgs_per_chunk)
{
    return tacl__algo_nchunks_max(args, max_elems, esize, msgs_per_chunk,
                                  ALGO_MAX_CHUNKS);
}

int tacl__algo_stream(const tacl__topo_view_t *view, uint64_t bytes)
{
    uint64_t local = view->local_size > 0 ? (uint64_t)view->local_size : 1;

    return view->stream_bytes > 0 &&
           bytes >= TACL_DIV_UP(view->stream_bytes, local);
}

int32_t tacl__algo_finish(tacl__sched_t *s, const tacl__coll_args_t *args,
                          tacl__bref_t dst, tacl__bref_t src, size_t count,
                          const int32_t *deps, int ndeps)
{
    if (args->op == TACL_AVG && args->type != TACL_COLL_ALLGATHER &&
        args->type != TACL_COLL_BROADCAST &&
        args->type != TACL_COLL_ALLTOALL)
        return tacl__sched_div(s, dst, src, count, args->dtype,
                               (uint32_t)s->nranks, deps, ndeps);
    return tacl__sched_copy(s, dst, src,
                            (uint64_t)count * tacl_dtype_size(args->dtype),
                            deps, ndeps);
}

tacl_status_t tacl__algo_alone(tacl__sched_t *s, const tacl__coll_args_t *args,
                               const tacl__algo_io_t *io)
{
    if (!io->in_place)
        tacl__algo_finish(s, args, io->out, io->in, args->count,
                          TACL__NO_DEPS);
    return tacl__sched_status(s);
}

int32_t tacl__algo_own_block(tacl__sched_t *s, const tacl__algo_io_t *io,
                             int rank, uint64_t blk)
{
    if (io->in_place)
        return -1;
    return tacl__sched_copy(s, tacl__bref_add(io->out, blk * (uint64_t)rank),
                            io->in, blk, TACL__NO_DEPS);
}
