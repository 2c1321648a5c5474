/*
 * all_gather_perf: tacl_allgather(), timed and checked like nccl-tests'
 * all_gather_perf. The harness (common.c, tacl_harness.c) does the rest;
 * run it under tacl-run, e.g. "tacl-run -n 4 all_gather_perf -b 1M -e 128M
 * -f 4".
 */
#include "common.h"

static tacl_status_t post(const tacl__perf_call_t *c, tacl_request_t *req_p)
{
    if (c->quant != NULL && req_p == NULL) {
        return tacl_allgather_quantized(c->sendbuf, c->recvbuf, c->count,
                                        c->dtype, c->quant, c->comm,
                                        c->stream);
    }
    if (c->quant != NULL) {
        return tacl_allgather_quantized_nb(c->sendbuf, c->recvbuf, c->count,
                                           c->dtype, c->quant, c->comm,
                                           c->stream, req_p);
    }
    if (req_p == NULL) {
        return tacl_allgather(c->sendbuf, c->recvbuf, c->count, c->dtype,
                              c->comm, c->stream);
    }
    return tacl_allgather_nb(c->sendbuf, c->recvbuf, c->count, c->dtype,
                             c->comm, c->stream, req_p);
}

int main(int argc, char **argv)
{
    static const tacl__perf_coll_t coll = {TACL_COLL_ALLGATHER, post};

    return tacl__perf_main(argc, argv, &coll);
}
