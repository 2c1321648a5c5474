/*
 * Tests of the ofi transport's registrations (ofi_mr.c) over libfabric's
 * tcp provider on loopback, which needs none: TACL_OFI_REGISTER=always
 * makes tacl register every buffer anyway, so the cache runs for real
 * (fi_mr_reg on rxm's domain) and its counts are checked exactly:
 * a tacl_mem_alloc segment registered once and found by every later
 * message (each 1 MB message is 64 pieces of 16 KB over ofi_rxm), other
 * memory registered per message, a freed segment's registration dropped
 * and never taken for a new segment at the same place, the least
 * recently used entry evicted, and nothing registered by tacl where the
 * provider registers itself.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "config.h"
#include "net_cases.h"
#include "ofi/ofi.h"
#include "tacl.h"

const tacl__transport_ops_t *const net_ops = &tacl__tl_ofi_ops;

#define MSG (1u << 20)
#define SEG (4u << 20)
/* ofi_rxm's eager size: the pieces of one message. */
#define PIECES (MSG / (16u << 10))

static void mr_env(const char *always, const char *cache)
{
    ofi_env();
    if (always != NULL)
        setenv("TACL_OFI_REGISTER", always, 1);
    else
        unsetenv("TACL_OFI_REGISTER");
    setenv("TACL_OFI_MR_CACHE", cache, 1);
    tacl__config_reload();
}

/* One message of MSG bytes from rank 0's buf to rank 1's, checked. */
static void one_message(tacl__tl_t *tl, int rank, uint8_t *buf, int round)
{
    tacl__tl_op_t op = {0};
    uint64_t tag = TACL__TAG(3, round);

    op.peer = 1 - rank;
    op.tag = tag;
    op.len = MSG;
    op.buf = buf;
    if (rank == 0)
        fill(buf, MSG, 0, tag);
    else
        memset(buf, 0, MSG);
    done_count = 0;
    CHECK(post(tl, &op, rank == 0) == TACL_OK, "post");
    CHECK(drive(tl, 1, 20) == 0, "round %d did not complete", round);
    CHECK(op_result(&op) == TACL_OK, "round %d: status %d", round,
          op_result(&op));
    if (rank == 1)
        CHECK(verify(buf, MSG, 0, tag), "round %d arrived wrong", round);
}

static uint8_t *segment(void)
{
    void *p = NULL;

    CHECK(tacl_mem_alloc(&p, SEG, TACL_MEM_HOST) == TACL_OK,
          "tacl_mem_alloc");
    return p;
}

#define STATS(ofi) (&(ofi)->mrs.stats)

/* This rank's instance, as the ofi transport's own. */
static tacl__ofi_t *start(shared_t *sh, int rank)
{
    xctx_t x;

    return (tacl__ofi_t *)rank_init(sh, rank, &x);
}

/* The ranks meet, then close. */
static void finish(shared_t *sh, tacl__ofi_t *ofi)
{
    CHECK(barrier(sh) == 0, "barrier");
    tacl__tl_close(&ofi->base.super);
}

/*
 * Ten messages from one segment, at other offsets each: one
 * registration, found by every other piece; a malloc'd buffer then
 * registers each of its pieces for itself.  Freed, the segment's
 * registration is dropped, and a new segment, wherever it lands (often
 * at the same address), is registered anew.
 */
static void segment_rank(shared_t *sh, int rank)
{
    tacl__ofi_t *ofi = start(sh, rank);
    tacl__tl_t *tl = &ofi->base.super;
    const tacl__ofi_mr_stats_t *st = STATS(ofi);
    uint8_t *seg = segment(), *seg2, *heap = malloc(MSG);
    uint64_t per_msg;

    CHECK(ofi->need_mr, "TACL_OFI_REGISTER=always, yet tacl does not "
          "register");
    for (int i = 0; i < 10; ++i)
        one_message(tl, rank, seg + (uint64_t)i * (SEG - MSG) / 9, i);
    CHECK(st->regs == 1, "%llu registrations of one segment",
          (unsigned long long)st->regs);
    CHECK(st->hits == 10 * PIECES - 1, "%llu pieces found it, not %u",
          (unsigned long long)st->hits, 10 * PIECES - 1);

    per_msg = st->per_msg;
    one_message(tl, rank, heap, 10);
    CHECK(st->per_msg - per_msg >= PIECES &&
              st->per_msg - per_msg < PIECES + 8,
          "a malloc'd message registered %llu times, not about %u",
          (unsigned long long)(st->per_msg - per_msg), PIECES);
    CHECK(st->regs == 1 && st->released == 0, "the heap went to the cache");

    CHECK(tacl_mem_free(seg) == TACL_OK, "tacl_mem_free");
    seg2 = segment();
    one_message(tl, rank, seg2, 11);
    CHECK(st->released == 1, "%llu registrations dropped after the free, "
          "not 1 (segment at %p, then at %p)",
          (unsigned long long)st->released, (void *)seg, (void *)seg2);
    CHECK(st->regs == 2, "%llu registrations, not 2: the new segment "
          "(%s address) took the old one's",
          (unsigned long long)st->regs, seg == seg2 ? "same" : "another");
    CHECK(ofi->mrs.count == 1, "%u entries cached", ofi->mrs.count);
    finish(sh, ofi);
    tacl_mem_free(seg2);
    free(heap);
}

Test(ofi_mr, segment_registered_once_dropped_on_free, .timeout = 60)
{
    mr_env("always", "256");
    run_ranks(2, segment_rank, NULL, NULL);
}

/* Three segments in turn, twice, through a cache of two: each use
 * evicts the least recently used, so every use registers. */
static void evict_rank(shared_t *sh, int rank)
{
    tacl__ofi_t *ofi = start(sh, rank);
    tacl__tl_t *tl = &ofi->base.super;
    const tacl__ofi_mr_stats_t *st = STATS(ofi);
    uint8_t *segs[3] = {segment(), segment(), segment()};

    for (int i = 0; i < 6; ++i) {
        one_message(tl, rank, segs[i % 3], i);
        CHECK(ofi->mrs.count <= 2, "%u entries in a cache of 2",
              ofi->mrs.count);
    }
    CHECK(st->regs == 6 && st->evicted == 4, "%llu registrations and %llu "
          "evictions, not 6 and 4", (unsigned long long)st->regs,
          (unsigned long long)st->evicted);
    /* The two most recent stay: using them again registers nothing. */
    one_message(tl, rank, segs[2], 6);
    one_message(tl, rank, segs[1], 7);
    CHECK(st->regs == 6, "%llu registrations after reuse",
          (unsigned long long)st->regs);
    finish(sh, ofi);
    for (int i = 0; i < 3; ++i)
        tacl_mem_free(segs[i]);
}

Test(ofi_mr, least_recently_used_evicted, .timeout = 60)
{
    mr_env("always", "2");
    run_ranks(2, evict_rank, NULL, NULL);
}

/* TACL_OFI_MR_CACHE=0: a segment is registered per message too. */
static void off_rank(shared_t *sh, int rank)
{
    tacl__ofi_t *ofi = start(sh, rank);
    tacl__tl_t *tl = &ofi->base.super;
    uint8_t *seg = segment();
    uint64_t per_msg = STATS(ofi)->per_msg;

    one_message(tl, rank, seg, 0);
    one_message(tl, rank, seg, 1);
    CHECK(STATS(ofi)->regs == 0 && ofi->mrs.count == 0, "cached with the "
          "cache off");
    CHECK(STATS(ofi)->per_msg - per_msg >= 2 * PIECES,
          "%llu registrations for two messages",
          (unsigned long long)(STATS(ofi)->per_msg - per_msg));
    finish(sh, ofi);
    tacl_mem_free(seg);
}

Test(ofi_mr, cache_off_registers_per_message, .timeout = 60)
{
    mr_env("always", "0");
    run_ranks(2, off_rank, NULL, NULL);
}

/* By default over tcp the provider needs nothing and tacl registers
 * nothing, segment or not. */
static void auto_rank(shared_t *sh, int rank)
{
    tacl__ofi_t *ofi = start(sh, rank);
    tacl__tl_t *tl = &ofi->base.super;
    uint8_t *seg = segment(), *heap = malloc(MSG);

    CHECK(!ofi->need_mr, "tcp asked for registration");
    CHECK(!(ofi->choice.ask & TACL_OFI_ASK_MR_LOCAL), "FI_MR_LOCAL was "
          "offered although the provider took the query without it");
    one_message(tl, rank, seg, 0);
    one_message(tl, rank, heap, 1);
    CHECK(STATS(ofi)->regs + STATS(ofi)->per_msg == 0,
          "%llu registrations", (unsigned long long)(STATS(ofi)->regs +
                                                     STATS(ofi)->per_msg));
    finish(sh, ofi);
    tacl_mem_free(seg);
    free(heap);
}

Test(ofi_mr, provider_registers_by_default, .timeout = 60)
{
    mr_env(NULL, "256");
    run_ranks(2, auto_rank, NULL, NULL);
}

/* Both ranks' init fails, rank 0's message containing WANT_ERROR. */
static void refused_rank(shared_t *sh, int rank)
{
    xctx_t x;
    tacl__tl_t *tl = NULL;
    tacl_status_t st = rank_try_init(sh, rank, &x, &tl);

    CHECK(st == TACL_ERR_INVALID_ARG && tl == NULL, "init took a bad "
          "setting (status %d)", st);
    CHECK(strstr(tacl__last_error(), getenv("WANT_ERROR")) != NULL ||
              rank != 0,
          "rank 0's error: %s", tacl__last_error());
}

Test(ofi_mr, bad_register_refused)
{
    mr_env("sometimes", "256");
    setenv("WANT_ERROR", "TACL_OFI_REGISTER='sometimes' is not auto or "
           "always", 1);
    run_ranks(2, refused_rank, NULL, NULL);
}

Test(ofi_mr, bad_cache_size_refused)
{
    mr_env("always", "many");
    setenv("WANT_ERROR", "TACL_OFI_MR_CACHE='many' is not a count", 1);
    run_ranks(2, refused_rank, NULL, NULL);
}

Test(ofi_mr, bad_hmem_refused)
{
    mr_env(NULL, "256");
    setenv("TACL_OFI_HMEM", "maybe", 1);
    setenv("WANT_ERROR", "TACL_OFI_HMEM='maybe' is not auto, on or off", 1);
    tacl__config_reload();
    run_ranks(2, refused_rank, NULL, NULL);
    unsetenv("TACL_OFI_HMEM");
}

/* The queries' order: without FI_MR_LOCAL first unless tacl must
 * register everything; with TACL_OFI_HMEM=on and no device, none, and
 * the choice says why. */
Test(ofi_mr, queries_in_order_and_hmem_refused_without_device)
{
    int ask[4], n;
    tacl__ofi_choice_t c;

    mr_env(NULL, "256");
    n = tacl__ofi_asks(ask);
    if (n > 0 && (ask[0] & TACL_OFI_ASK_HMEM))
        cr_skip_test("a CUDA device is usable here");
    cr_assert_eq(n, 2);
    cr_assert_eq(ask[0], 0);
    cr_assert_eq(ask[1], TACL_OFI_ASK_MR_LOCAL);
    mr_env("always", "256");
    n = tacl__ofi_asks(ask);
    cr_assert_eq(n, 1);
    cr_assert_eq(ask[0], TACL_OFI_ASK_MR_LOCAL);

    setenv("TACL_OFI_HMEM", "on", 1);
    tacl__config_reload();
    cr_assert_eq(tacl__ofi_asks(ask), 0);
    cr_assert_eq(tacl__ofi_choose(NULL, &c), TACL_ERR_UNSUPPORTED);
    cr_assert(strstr(tacl__last_error(), "TACL_OFI_HMEM=on, but no CUDA "
                     "device is usable here") != NULL, "%s",
              tacl__last_error());
    unsetenv("TACL_OFI_HMEM");
}
