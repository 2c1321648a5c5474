/*
 * all_reduce_perf: tacl_allreduce(), timed and checked like nccl-tests'
 * all_reduce_perf. The harness (common.c, tacl_harness.c) does the rest;
 * run it under tacl-run, e.g. "tacl-run -n 4 all_reduce_perf -b 1M -e 128M
 * -f 4".
 */
#include "common.h"

static tacl_status_t post(const tacl__perf_call_t *c, tacl_request_t *req_p)
{
    if (req_p == NULL) {
        return tacl_allreduce(c->sendbuf, c->recvbuf, c->count, c->dtype,
                              c->op, c->comm, c->stream);
    }
    return tacl_allreduce_nb(c->sendbuf, c->recvbuf, c->count, c->dtype, c->op,
                             c->comm, c->stream, req_p);
}

int main(int argc, char **argv)
{
    static const tacl__perf_coll_t coll = {TACL_COLL_ALLREDUCE, post};

    return tacl__perf_main(argc, argv, &coll);
}
