/*
 * Bytes of the ring all-gather and reduce-scatter (the driver runs this
 * mode with TACL_ALGO=allgather=ring,reducescatter=ring).  On a ring of p
 * ranks in rank order, each rank sends (p - 1) / p of the M-byte vector,
 * that is p - 1 blocks, to its successor and nothing to anyone else
 * (Patarasuk and Yuan, section 3).  So the bytes each rank sent on the
 * link class of (rank, rank + 1) equal (p - 1) * block bytes, and zero on
 * the other classes between ranks: only ranks whose successor is on
 * another node send net bytes.  Results are checked exactly as well.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mn.h"

static void check_ring_bytes(mn_t *mn, const char *what,
                             const tacl_counters_t *before, size_t block)
{
    int p = mn->nranks, next = (mn->rank + 1) % p;
    int cls = mn_link_class(mn, mn->rank, next);
    uint64_t want_host = 0, want_net = 0;
    mn_delta_t d;

    if (cls == TACL_LINK_NET)
        want_net = (uint64_t)(p - 1) * block;
    else if (cls == TACL_LINK_HOST)
        want_host = (uint64_t)(p - 1) * block;
    mn_delta_check(mn, what, before, &d);
    if (d.link[TACL_LINK_NET] != want_net)
        mn_fail(mn, "%s: sent %" PRIu64 " net bytes, the ring formula "
                "gives %" PRIu64 " (successor %d on node %d, mine %d)", what,
                d.link[TACL_LINK_NET], want_net, next, mn->node_of[next],
                mn->node_of[mn->rank]);
    if (d.link[TACL_LINK_HOST] != want_host)
        mn_fail(mn, "%s: sent %" PRIu64 " host bytes, the ring formula "
                "gives %" PRIu64 " (successor %d)", what,
                d.link[TACL_LINK_HOST], want_host, next);
    mn->cases++;
}

static void ring_allgather(mn_t *mn, tacl_dtype_t dt, size_t count,
                           int inplace, int salt)
{
    size_t es = tacl_dtype_size(dt), p = (size_t)mn->nranks;
    char *recv = mn_alloc(p * count, es), *want = mn_alloc(p * count, es);
    char *send = inplace ? recv + (size_t)mn->rank * count * es
                         : mn_alloc(count, es);
    tacl_counters_t before;
    char what[128];

    snprintf(what, sizeof(what), "ring allgather %s count=%zu %s",
             tacl_dtype_name(dt), count, inplace ? "in-place"
                                                 : "out-of-place");
    mn_fill(send, dt, count, mn->rank, 0, salt);
    for (size_t b = 0; b < p; b++)
        mn_fill(want + b * count * es, dt, count, (int)b, 0, salt);
    mn_counters(mn, &before);
    mn_ok(mn, tacl_allgather(send, recv, count, dt, mn->comm, NULL), what);
    check_ring_bytes(mn, what, &before, count * es);
    mn_compare(mn, what, want, recv, p * count, dt);
    if (!inplace)
        free(send);
    free(recv);
    free(want);
}

static void ring_reduce_scatter(mn_t *mn, tacl_dtype_t dt, size_t count,
                                int inplace, int salt)
{
    size_t es = tacl_dtype_size(dt), p = (size_t)mn->nranks;
    char *send = mn_alloc(p * count, es), *want = mn_alloc(count, es);
    char *recv = inplace ? send + (size_t)mn->rank * count * es
                         : mn_alloc(count, es);
    char *got = mn_alloc(count, es);
    tacl_counters_t before;
    char what[128];

    snprintf(what, sizeof(what), "ring reduce_scatter %s count=%zu %s",
             tacl_dtype_name(dt), count, inplace ? "in-place"
                                                 : "out-of-place");
    mn_fill(send, dt, p * count, mn->rank, 0, salt);
    for (size_t i = 0; i < count; i++) {
        int64_t s = 0;
        for (size_t r = 0; r < p; r++)
            s += mn_val((int)r, (size_t)mn->rank * count + i, salt);
        mn_store(want, dt, i, s);
    }
    mn_counters(mn, &before);
    mn_ok(mn, tacl_reduce_scatter(send, recv, count, dt, TACL_SUM, mn->comm,
                                  NULL), what);
    check_ring_bytes(mn, what, &before, count * es);
    memcpy(got, recv, count * es);
    mn_compare(mn, what, want, got, count, dt);
    if (!inplace)
        free(recv);
    free(send);
    free(want);
    free(got);
}

void mn_run_ring(mn_t *mn)
{
    /* Sizes around the 1 MiB pipeline chunk, one of them 4 MiB per rank. */
    static const size_t counts[] = {0, 1, 1001, 262147, 1u << 20};
    int salt = 1000;

    for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++) {
        for (int inplace = 0; inplace < 2; inplace++) {
            ring_allgather(mn, TACL_FLOAT32, counts[ci], inplace, ++salt);
            ring_reduce_scatter(mn, TACL_INT32, counts[ci], inplace, ++salt);
        }
    }
}
