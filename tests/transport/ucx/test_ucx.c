/*
 * Tests of the ucx transport: the network transports' cases
 * (net/net_cases.c) on ucx, and its own tag encoding.  UCX is pinned to
 * loopback (UCX_NET_DEVICES=lo) and, unless a case says otherwise, to
 * tcp.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <sys/mman.h>

#include <criterion/criterion.h>

#include "net_cases.h"
#include "ucx/ucx.h"

const tacl__transport_ops_t *const net_ops = &tacl__tl_ucx_ops;

/* ---------------------------------------------------------------- */

Test(ucx, tag_encoding)
{
    uint64_t t = ((uint64_t)0xabc123 << 40) | TACL__TAG(0x54321, 0x9876f);

    cr_assert_eq(tacl__ucx_tag(0, 0), 0);
    cr_assert_eq(tacl__ucx_tag(65535, 0), 0xffffull << 48);
    cr_assert_eq(tacl__ucx_tag(7, t), (7ull << 48) | (0x123ull << 36) |
                                          (0x4321ull << 20) | 0x9876full);
    /* The source separates tags that are otherwise equal. */
    cr_assert_neq(tacl__ucx_tag(1, t), tacl__ucx_tag(2, t));
}

Test(ucx, one_node_is_idle)
{
    one_node_is_idle();
}

Test(ucx, bad_arguments)
{
    bad_arguments();
}

/* ------------------------------------------------------------------ */

NET_CASE(ucx, sizes_tcp, ucx_env("tcp"), 2, sizes_rank, NULL)

NET_CASE(ucx, sizes_default_transports, ucx_env(NULL), 2, sizes_rank, NULL)


/* ------------------------------------------------------------------ */

Test(ucx, bandwidth_64mb_tcp, .timeout = 60)
{
    shared_t *sh;

    ucx_env("tcp");
    run_ranks(2, bw_rank, NULL, &sh);
    cr_assert_gt(sh->bw_gbs, 0.0);
    fprintf(stderr,
            "ucx tcp loopback: one 64 MB message at %.2f GB/s "
            "(best of 2)\n",
            sh->bw_gbs);
    munmap(sh, sizeof(*sh));
}


/* ------------------------------------------------------------------ */

NET_CASE(ucx, many_concurrent_4_ranks, ucx_env("tcp"), 4, many_rank, NULL)

NET_CASE(ucx, many_concurrent_default_transports, ucx_env(NULL), 3, many_rank,
         NULL)
NET_CASE(ucx, same_source_and_tag_in_order, ucx_env("tcp"), 2, fifo_rank,
         NULL)
NET_CASE(ucx, length_mismatch_is_internal_error, ucx_env("tcp"), 2,
         mismatch_rank, NULL)
NET_CASE(ucx, killed_receiver_fails_send, ucx_env("tcp"), 2, killed_send_rank,
         kill_rank1)

Test(ucx, killed_midway_sender_fails_receive, .timeout = 60)
{
    ucx_env("tcp");
    /* Small socket buffers keep what is in flight small: with the
     * defaults an idle machine moved the rest of the 64 MB between the
     * first bytes' arrival and the sender's death, and the receive
     * completed (29 of 30 runs of the suite alone). */
    setenv("UCX_TCP_SNDBUF", "65536", 1);
    setenv("UCX_TCP_RCVBUF", "65536", 1);
    run_ranks(2, killed_midway_sender_rank, kill_rank1, NULL);
}

NET_CASE(ucx, killed_sender_fails_receive, ucx_env("tcp"), 2,
         killed_recv_rank, kill_rank1)
NET_CASE(ucx, peer_leaving_idle_is_not_an_error, ucx_env("tcp"), 3,
         leave_rank, NULL)
NET_CASE(ucx, cancel_all_completes_everything, ucx_env("tcp"), 2, cancel_rank,
         NULL)
NET_CASE(ucx, wait_sleeps_and_wakes, ucx_env("tcp"), 2, wait_rank, NULL)

/* No quiet_peer_is_no_progress here: ucx's progress reports its own
 * events now and then (2 in 2.5 s in one loaded CI run), so the case
 * is ofi's, whose pings it is about. */

NET_CASE(ucx, any_source_by_probe_in_order, ucx_env("tcp"), 3,
         any_source_rank, NULL)
