/*
 * sendrecv_perf: every rank sends to the next rank and receives from the
 * previous one in a group (tacl_send() and tacl_recv()), timed and checked
 * like nccl-tests' sendrecv_perf.  Run it under tacl-run, e.g.
 * "tacl-run -n 4 sendrecv_perf -b 1M -e 128M -f 4".
 */
#include "common.h"

static tacl_status_t post(const tacl__perf_call_t *c, tacl_request_t *req_p)
{
    int next = (c->rank + 1) % c->nranks;
    int prev = (c->rank + c->nranks - 1) % c->nranks;
    tacl_status_t st, st_end;

    st = tacl_group_start();
    if (st != TACL_OK) {
        return st;
    }
    st = tacl_send(c->sendbuf, c->count, c->dtype, next, c->comm,
                   c->stream);
    if (st == TACL_OK) {
        st = tacl_recv(c->recvbuf, c->count, c->dtype, prev, c->comm,
                       c->stream);
    }
    st_end = req_p == NULL ? tacl_group_end() : tacl_group_end_nb(req_p);
    return st != TACL_OK ? st : st_end;
}

int main(int argc, char **argv)
{
    static const tacl__perf_coll_t coll = {TACL_COLL_SEND, post};

    return tacl__perf_main(argc, argv, &coll);
}
