/*
 * reduce_perf: tacl_reduce(), timed and checked like nccl-tests'
 * reduce_perf. The harness (common.c, tacl_harness.c) does the rest; run it
 * under tacl-run, e.g. "tacl-run -n 4 reduce_perf -b 1M -e 128M -f 4".
 */
#include "common.h"

static tacl_status_t post(const tacl__perf_call_t *c, tacl_request_t *req_p)
{
    if (req_p == NULL) {
        return tacl_reduce(c->sendbuf, c->recvbuf, c->count, c->dtype, c->op,
                           c->root, c->comm, c->stream);
    }
    return tacl_reduce_nb(c->sendbuf, c->recvbuf, c->count, c->dtype, c->op,
                          c->root, c->comm, c->stream, req_p);
}

int main(int argc, char **argv)
{
    static const tacl__perf_coll_t coll = {TACL_COLL_REDUCE, post};

    return tacl__perf_main(argc, argv, &coll);
}
