/*
 * Tests of the ofi transport: the network transports' cases
 * (net/net_cases.c) on ofi over libfabric's tcp provider on loopback
 * (TACL_OFI_PROVIDER=tcp, FI_TCP_IFACE=lo), and its choice of a
 * provider.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <criterion/criterion.h>

#include "config.h"
#include "net_cases.h"
#include "ofi/ofi.h"

const tacl__transport_ops_t *const net_ops = &tacl__tl_ofi_ops;

/* ------------------------------------------------------------------ */

Test(ofi, one_node_is_idle)
{
    one_node_is_idle();
}

Test(ofi, bad_arguments)
{
    bad_arguments();
}

Test(ofi, tcp_provider_chosen)
{
    tacl__ofi_choice_t c;

    ofi_env();
    cr_assert_eq(tacl__ofi_choose(NULL, &c), TACL_OK, "%s",
                 tacl__last_error());
    cr_assert_str_eq(c.provider, "tcp;ofi_rxm");
    cr_assert_str_eq(c.domain, "lo");
}

Test(ofi, unknown_provider_refused)
{
    tacl__ofi_choice_t c;

    setenv("TACL_OFI_PROVIDER", "no-such-provider", 1);
    tacl__config_reload();
    cr_assert_eq(tacl__ofi_choose(NULL, &c), TACL_ERR_UNSUPPORTED);
    cr_assert(strstr(tacl__last_error(), "\"no-such-provider\" is not "
                                         "available") != NULL,
              "%s", tacl__last_error());
}

/* What a provider lacks is named by the entry closest to tacl's needs. */
Test(ofi, missing_capability_named)
{
    struct fi_info *a = fi_allocinfo(), *b = fi_allocinfo();

    cr_assert(a && b);
    a->ep_attr->type = FI_EP_DGRAM;
    a->caps = FI_MSG | FI_TAGGED;
    cr_assert_str_eq(tacl__ofi_missing(a), "FI_EP_RDM");
    b->ep_attr->type = FI_EP_RDM;
    b->caps = FI_MSG;
    a->next = b;
    cr_assert_str_eq(tacl__ofi_missing(a), "FI_TAGGED");
    b->caps = FI_MSG | FI_TAGGED;
    cr_assert_str_eq(tacl__ofi_missing(a), "FI_ORDER_SAS");
    b->tx_attr->msg_order = FI_ORDER_SAS;
    b->rx_attr->msg_order = FI_ORDER_SAS;
    cr_assert_null(tacl__ofi_missing(a));
    fi_freeinfo(a);
}

/* ------------------------------------------------------------------ */

NET_CASE(ofi, sizes_0_to_64mb, ofi_env(), 2, sizes_rank, NULL)

Test(ofi, bandwidth_64mb, .timeout = 60)
{
    shared_t *sh;

    ofi_env();
    run_ranks(2, bw_rank, NULL, &sh);
    cr_assert_gt(sh->bw_gbs, 0.0);
    fprintf(stderr,
            "ofi tcp loopback: one 64 MB message at %.2f GB/s "
            "(best of 2)\n",
            sh->bw_gbs);
    munmap(sh, sizeof(*sh));
}

NET_CASE(ofi, many_concurrent_4_ranks, ofi_env(), 4, many_rank, NULL)

NET_CASE(ofi, same_source_and_tag_in_order, ofi_env(), 2, fifo_rank, NULL)

NET_CASE(ofi, length_mismatch_fails_the_receive_alone, ofi_env(), 2,
         mismatch_rank, NULL)

NET_CASE(ofi, killed_receiver_fails_send, ofi_env(), 2, killed_send_rank,
         kill_rank1)

NET_CASE(ofi, killed_midway_sender_fails_receive, ofi_env(), 2,
         killed_midway_sender_rank, kill_rank1)

NET_CASE(ofi, killed_sender_fails_receive, ofi_env(), 2, killed_recv_rank,
         kill_rank1)

NET_CASE(ofi, peer_leaving_idle_is_not_an_error, ofi_env(), 3, leave_rank,
         NULL)

NET_CASE(ofi, cancel_all_completes_everything, ofi_env(), 2, cancel_rank,
         NULL)

NET_CASE(ofi, wait_sleeps_and_wakes, ofi_env(), 2, wait_rank, NULL)

NET_CASE(ofi, quiet_peer_is_no_progress, ofi_env(), 2, quiet_peer_rank,
         NULL)

NET_CASE(ofi, any_source_by_probe_in_order, ofi_env(), 3, any_source_rank,
         NULL)

/*
 * The staging of device memory waits for a message's first chunk by
 * asking tacl__ofi_arrived, with no receive posted: rank 0 waits so on
 * rank 1, which dies before it sends.  The wait must end with an error
 * naming rank 1 (the peer is pinged as for a posted receive), not run
 * on until the communicator's timeout.
 */
static void staged_wait_rank(shared_t *sh, int rank)
{
    xctx_t x;
    tacl__tl_t *tl = rank_init(sh, rank, &x);
    tacl__ofi_t *ofi = (tacl__ofi_t *)tl;
    uint64_t len = 0, t0;
    int got = 0;

    /* They talk once, so rank 0 has a connection to lose. */
    ping(tl, rank, 1, 0, TACL__TAG(8, 0));
    if (rank == 1) {
        CHECK(barrier(sh) == 0, "barrier");
        raise(SIGKILL);
    }
    CHECK(barrier(sh) == 0, "barrier");
    t0 = tacl__now_ns();
    while (got == 0 && tacl__now_ns() - t0 < 8000000000ull) {
        got = tacl__ofi_arrived(ofi, 1, TACL__TAG(8, 1), &len);
        if (got == 0 && tacl__tl_progress(tl) < 0)
            got = tacl__ofi_arrived(ofi, 1, TACL__TAG(8, 1), &len);
        if (got == 0)
            tacl__tl_wait(tl, 1000);
    }
    CHECK(got < 0, "after %.1f s the wait on a dead peer still %s",
          (tacl__now_ns() - t0) * 1e-9, got == 0 ? "waits" : "found one");
    CHECK(strstr(tacl__last_error(), "rank 1") != NULL, "the error does "
          "not name rank 1: %s", tacl__last_error());
    fprintf(stderr, "ofi: dead peer of a staged wait noticed after %.3f s\n",
            (tacl__now_ns() - t0) * 1e-9);
    tacl__tl_close(tl);
}

NET_CASE(ofi, killed_sender_fails_a_staged_wait, ofi_env(), 2,
         staged_wait_rank, kill_rank1)
