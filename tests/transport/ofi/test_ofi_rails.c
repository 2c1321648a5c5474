/*
 * Tests of the ofi transport's rails and striping (ofi_ops.c): several
 * endpoints on loopback (TACL_NICS=lo,lo), messages from
 * TACL_OFI_STRIPE_MIN up split one piece per rail, the network cases of
 * net/net_cases.c run again with two rails, peers with different rail
 * counts, messages split into pieces of TACL_OFI_MAX_MSG, receives from
 * any source of split messages, and refusals of bad settings.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "config.h"
#include "net_cases.h"
#include "ofi/ofi.h"

const tacl__transport_ops_t *const net_ops = &tacl__tl_ofi_ops;

#define STRIPE_MIN (256u << 10)

/* Two rails on loopback, striped from the lowest size allowed. */
static void rails_env(const char *nics)
{
    ofi_env();
    setenv("TACL_NICS", nics, 1);
    setenv("TACL_OFI_STRIPE_MIN", "256K", 1);
    tacl__config_reload();
}

/* ------------------------------------------------------------------ */

/* Pieces are contiguous, cover the message, start aligned, none empty. */
Test(ofi_rails, pieces_cover_the_message)
{
    static const uint64_t lens[] = {STRIPE_MIN, STRIPE_MIN + 1,
                                    (1u << 20) + 7, (3u << 20) + 4095,
                                    64ull << 20};

    for (size_t k = 0; k < TACL_ARRAY_SIZE(lens); ++k)
        for (int n = 2; n <= TACL_OFI_MAX_RAILS; ++n) {
            uint64_t next = 0, off, len, lo = UINT64_MAX, hi = 0;

            for (int i = 0; i < n; ++i) {
                tacl__ofi_piece(lens[k], n, i, &off, &len);
                cr_assert_eq(off, next, "len %llu, piece %d of %d at %llu",
                             (unsigned long long)lens[k], i, n,
                             (unsigned long long)off);
                cr_assert_eq(off % TACL_OFI_PIECE_ALIGN, 0);
                cr_assert_gt(len, 0, "piece %d of %d empty", i, n);
                lo = TACL_MIN(lo, len);
                hi = TACL_MAX(hi, len);
                next = off + len;
            }
            cr_assert_eq(next, lens[k]);
            /* Even: only alignment makes pieces differ. */
            cr_assert_leq(hi - lo, (uint64_t)n * TACL_OFI_PIECE_ALIGN);
        }
}

/*
 * Split for a provider's limit (pieces_of in ofi_ops.c: enough pieces
 * for the limit, a multiple of the rails): every piece fits it and none
 * is empty.
 */
Test(ofi_rails, pieces_fit_the_limit)
{
    static const uint64_t lens[] = {(64u << 10) + 1, (5u << 20) + 3,
                                    (64ull << 20) - 1};
    const uint64_t max = 64u << 10;

    for (size_t j = 0; j < TACL_ARRAY_SIZE(lens); ++j)
        for (uint64_t n = 1; n <= TACL_OFI_MAX_RAILS; ++n) {
            uint64_t k = TACL_DIV_UP(TACL_DIV_UP(lens[j], max), n) * n;
            uint64_t off, len, next = 0;

            for (uint64_t i = 0; i < k; ++i) {
                tacl__ofi_piece(lens[j], k, i, &off, &len);
                cr_assert_eq(off, next);
                cr_assert(len > 0 && len <= max, "len %llu, piece %llu of "
                          "%llu: %llu bytes", (unsigned long long)lens[j],
                          (unsigned long long)i, (unsigned long long)k,
                          (unsigned long long)len);
                next = off + len;
            }
            cr_assert_eq(next, lens[j]);
        }
}

/* ------------------------------------------------------------------ */

/* Lengths around the threshold, odd ones, and 0 B. */
static const uint64_t stripe_sizes[] = {
    0, STRIPE_MIN - 1, STRIPE_MIN, STRIPE_MIN + 1, (1u << 20) + 7,
    (3u << 20) + 4095, (8u << 20) + 1};
#define NSTRIPE TACL_ARRAY_SIZE(stripe_sizes)
/* Then this many 1 MB messages each way: half of one tag (in order),
 * half of distinct tags whose receives are posted in reverse. */
#define NFLIGHT 16
#define NOPS (NSTRIPE + NFLIGHT)

static uint64_t op_len(size_t i)
{
    return i < NSTRIPE ? stripe_sizes[i] : (1u << 20) + 64 * (i - NSTRIPE);
}

static uint64_t op_tag(size_t i)
{
    if (i < NSTRIPE)
        return TACL__TAG(5, i);
    return i - NSTRIPE < NFLIGHT / 2 ? TACL__TAG(6, 0) : TACL__TAG(7, i);
}

/* Post receives (k reversed for distinct tags) or sends of every op. */
static void post_all(tacl__tl_t *tl, tacl__tl_op_t *ops, int peer,
                     int rank, int is_send)
{
    for (size_t j = 0; j < NOPS; ++j) {
        size_t i = j;
        tacl_status_t st;

        /* Receives of distinct tags in reverse; a tag's own in order. */
        if (!is_send && j >= NSTRIPE + NFLIGHT / 2)
            i = NOPS - 1 - (j - (NSTRIPE + NFLIGHT / 2));
        ops[i].peer = peer;
        ops[i].tag = op_tag(i);
        ops[i].len = op_len(i);
        ops[i].buf = ops[i].len ? malloc(ops[i].len) : NULL;
        CHECK(!ops[i].len || ops[i].buf, "malloc");
        if (is_send)
            fill(ops[i].buf, ops[i].len, rank, ops[i].tag + i);
        else if (ops[i].len)
            memset(ops[i].buf, 0, ops[i].len);
        st = post(tl, &ops[i], is_send);
        CHECK(st == TACL_OK, "post %zu: %s", i, tacl_status_string(st));
    }
}

/*
 * Both ways at once between ranks 0 and 1, data checked byte for byte,
 * and rail 1 carried bytes when both ranks have it.  Rank 2 (if any)
 * has one rail: it and rank 0 exchange the same on rail 0 alone.
 */
static void stripe_pair(tacl__tl_t *tl, int rank, int peer)
{
    tacl__tl_op_t sends[NOPS] = {{0}}, recvs[NOPS] = {{0}};
    tacl_status_t st;

    done_count = 0;
    post_all(tl, recvs, peer, rank, 0);
    post_all(tl, sends, peer, rank, 1);
    st = drive(tl, 2 * NOPS, 30);
    CHECK(st == TACL_OK, "drive: %s", tacl_status_string(st));
    for (size_t i = 0; i < NOPS; ++i) {
        CHECK(op_result(&sends[i]) == TACL_OK, "send %zu", i);
        CHECK(op_result(&recvs[i]) == TACL_OK, "recv %zu", i);
        CHECK(verify(recvs[i].buf, recvs[i].len, peer, recvs[i].tag + i),
              "message %zu, %llu bytes from rank %d, corrupted", i,
              (unsigned long long)recvs[i].len, peer);
        free(sends[i].buf);
        free(recvs[i].buf);
    }
}

static void stripe_rank(shared_t *sh, int rank)
{
    xctx_t x;
    tacl__tl_t *tl;
    tacl__ofi_t *ofi;
    uint64_t before;

    /* Rank 0 has three rails, rank 1 two, rank 2 one. */
    rails_env(rank == 0 ? "lo,lo,lo" : rank == 1 ? "lo,lo" : "lo");
    tl = rank_init(sh, rank, &x);
    ofi = (tacl__ofi_t *)tl;
    CHECK(ofi->nrails == 3 - rank, "rank %d opened %d rails", rank,
          ofi->nrails);
    if (rank < 2) {
        stripe_pair(tl, rank, 1 - rank);
        /* Two rails shared: each carried about half. */
        CHECK(ofi->rails[1].bytes > ofi->rails[0].bytes / 2,
              "rail 1 moved %llu bytes, rail 0 %llu",
              (unsigned long long)ofi->rails[1].bytes,
              (unsigned long long)ofi->rails[0].bytes);
    }
    if (rank == 0)
        CHECK(ofi->rails[2].bytes == 0, "rail 2 has no peer, yet moved "
              "%llu bytes", (unsigned long long)ofi->rails[2].bytes);
    CHECK(barrier(sh) == 0, "barrier");
    before = ofi->rails[1].bytes;
    if (rank != 1)
        stripe_pair(tl, rank, 2 - rank);
    if (rank == 0)
        CHECK(ofi->rails[1].bytes == before, "a peer with one rail was "
              "reached on rail 1");
    CHECK(barrier(sh) == 0, "barrier");
    tacl__tl_close(tl);
}

Test(ofi_rails, striped_both_ways_uneven_rails, .timeout = 90)
{
    run_ranks(3, stripe_rank, NULL, NULL);
}

/*
 * Over ofi_rxm nothing longer than its eager size reaches the provider
 * unless TACL_OFI_MAX_MSG says so (ofi_info.c says why): with one rail,
 * every message both ways goes as ceil(len / WANT_PIECE) pieces, which
 * the rail's completions count exactly, and arrives intact.
 */
static void eager_pieces_rank(shared_t *sh, int rank)
{
    const uint64_t piece = strtoull(getenv("WANT_PIECE"), NULL, 0);
    xctx_t x;
    tacl__tl_t *tl = rank_init(sh, rank, &x);
    tacl__ofi_t *ofi = (tacl__ofi_t *)tl;
    uint64_t want = 0;

    CHECK(ofi->piece_max == piece, "pieces of %llu bytes at most, not "
          "%llu", (unsigned long long)ofi->piece_max,
          (unsigned long long)piece);
    stripe_pair(tl, rank, 1 - rank);
    for (size_t i = 0; i < NOPS; ++i)
        want += 2 * TACL_MAX(TACL_DIV_UP(op_len(i), piece), 1);
    CHECK(ofi->rails[0].msgs == want, "%llu messages and pieces, %llu "
          "expected", (unsigned long long)ofi->rails[0].msgs,
          (unsigned long long)want);
    CHECK(barrier(sh) == 0, "barrier");
    tacl__tl_close(tl);
}

Test(ofi_rails, pieces_of_the_eager_size, .timeout = 60)
{
    rails_env("lo");
    setenv("WANT_PIECE", "16384", 1);
    run_ranks(2, eager_pieces_rank, NULL, NULL);
}

Test(ofi_rails, pieces_of_the_eager_size_asked, .timeout = 60)
{
    rails_env("lo");
    setenv("FI_OFI_RXM_BUFFER_SIZE", "32768", 1);
    setenv("WANT_PIECE", "32768", 1);
    run_ranks(2, eager_pieces_rank, NULL, NULL);
}

Test(ofi_rails, pieces_of_max_msg_asked, .timeout = 60)
{
    rails_env("lo");
    setenv("TACL_OFI_MAX_MSG", "1M", 1);
    setenv("WANT_PIECE", "1048576", 1);
    tacl__config_reload();
    run_ranks(2, eager_pieces_rank, NULL, NULL);
}

/*
 * A chain: rank 1 sends message i only once rank 0 has acknowledged
 * message i-1, and rank 0 posted the receives latest first, with more
 * pieces than the provider has receive slots (FI_OFI_RXM_RX_SIZE=64,
 * 1 MB messages of 64 pieces).  Slots held by messages still to come
 * must not keep the receive of the one arriving on the backlog: posted
 * whole, the last message's pieces filled the slots and the chain
 * stalled until the deadline.
 */
#define CHAIN 6
#define CHAIN_LEN (1u << 20)

/* Progress until op ends or 20 s pass; its result. */
static tacl_status_t wait_op(tacl__tl_t *tl, const tacl__tl_op_t *op)
{
    uint64_t deadline = tacl__now_ns() + 20000000000ull;

    while (op_result(op) == TACL_IN_PROGRESS && tacl__now_ns() < deadline)
        if (tacl__tl_progress(tl) == 0)
            tacl__tl_wait(tl, 1000);
    return op_result(op);
}

static void chain_rank(shared_t *sh, int rank)
{
    tacl__tl_op_t msgs[CHAIN] = {{0}}, acks[CHAIN] = {{0}};
    uint64_t ackbuf[CHAIN] = {0};
    xctx_t x;
    tacl__tl_t *tl = rank_init(sh, rank, &x);
    tacl__ofi_t *ofi = (tacl__ofi_t *)tl;

    CHECK(ofi->rx_size == 64, "%llu receive slots, not 64",
          (unsigned long long)ofi->rx_size);
    for (int j = 0; j < CHAIN; ++j) {
        int i = rank == 0 ? CHAIN - 1 - j : j;

        msgs[i].peer = acks[i].peer = 1 - rank;
        msgs[i].tag = TACL__TAG(11, i);
        msgs[i].len = CHAIN_LEN;
        msgs[i].buf = calloc(1, CHAIN_LEN);
        acks[i].tag = TACL__TAG(12, i);
        acks[i].len = sizeof(ackbuf[i]);
        acks[i].buf = &ackbuf[i];
        CHECK(msgs[i].buf, "malloc");
        if (rank == 0)
            CHECK(post(tl, &msgs[i], 0) == TACL_OK, "recv %d", i);
    }
    for (int i = 0; i < CHAIN; ++i) {
        tacl__tl_op_t *first = rank == 0 ? &msgs[i] : &acks[i];

        if (rank == 1) {
            fill(msgs[i].buf, CHAIN_LEN, 1, msgs[i].tag);
            CHECK(post(tl, &msgs[i], 1) == TACL_OK, "send %d", i);
            CHECK(post(tl, &acks[i], 0) == TACL_OK, "ack recv %d", i);
        }
        CHECK(wait_op(tl, first) == TACL_OK, "rank %d: %s %d: %s", rank,
              rank == 0 ? "message" : "acknowledgement", i,
              tacl_status_string(op_result(first)));
        if (rank == 0) {
            CHECK(verify(msgs[i].buf, CHAIN_LEN, 1, msgs[i].tag),
                  "message %d corrupted", i);
            CHECK(post(tl, &acks[i], 1) == TACL_OK, "ack %d", i);
        }
    }
    for (int i = 0; i < CHAIN; ++i) {
        CHECK(wait_op(tl, rank == 0 ? &acks[i] : &msgs[i]) == TACL_OK,
              "rank %d: op %d", rank, i);
        free(msgs[i].buf);
    }
    CHECK(barrier(sh) == 0, "barrier");
    tacl__tl_close(tl);
}

Test(ofi_rails, receive_slots_held_by_later_messages, .timeout = 90)
{
    rails_env("lo");
    setenv("FI_OFI_RXM_RX_SIZE", "64", 1);
    run_ranks(2, chain_rank, NULL, NULL);
}

/* ------------------------------------------------------------------ */

/*
 * Receives from any source of messages sent in pieces: ranks 1 and 2
 * each send rank 0 the messages of any_lens, one tag; rank 0 probes,
 * then receives each from the sender and of the length the probe
 * reported.  Each sender's messages must come in the order sent, whole
 * and intact, and rank 0's rails must have completed at least
 * min_msgs messages and pieces (so that the messages were split).
 */
static const uint64_t *any_lens;
static size_t nany_lens;
static uint64_t min_msgs;

#define ANY_SENDERS 2
#define ANY_MAX 8

/* Probe for tag until a message is found or 20 s pass; its sender. */
static int probe_next(tacl__tl_t *tl, uint64_t tag, uint64_t *len)
{
    int peer = -1, found = 0;

    for (uint64_t t0 = tacl__now_ns();
         !found && tacl__now_ns() - t0 < 20000000000ull;) {
        CHECK(tacl__tl_progress(tl) >= 0, "progress failed");
        found = tacl__tl_probe(tl, tag, &peer, len);
        CHECK(found >= 0, "probe: %s", tacl_status_string(found));
        if (!found)
            tacl__tl_wait(tl, 1000);
    }
    CHECK(found == 1, "no message found by probe in 20 s");
    CHECK(peer >= 1 && peer <= ANY_SENDERS, "probe reported rank %d", peer);
    return peer;
}

static void any_pieces_receiver(tacl__tl_t *tl, uint64_t tag)
{
    tacl__tl_op_t ops[ANY_SENDERS + 1][ANY_MAX] = {{{0}}};
    int next[ANY_SENDERS + 1] = {0};
    tacl__ofi_t *ofi = (tacl__ofi_t *)tl;
    uint64_t msgs = 0, len;
    tacl_status_t st;

    for (size_t got = 0; got < ANY_SENDERS * nany_lens; ++got) {
        int peer = probe_next(tl, tag, &len);
        tacl__tl_op_t *op = &ops[peer][next[peer]];

        CHECK((size_t)next[peer] < nany_lens, "rank %d: more messages "
              "than sent", peer);
        CHECK(len == any_lens[next[peer]], "rank %d message %d: probe "
              "says %llu bytes, %llu sent", peer, next[peer],
              (unsigned long long)len,
              (unsigned long long)any_lens[next[peer]]);
        op->peer = peer;
        op->tag = tag;
        op->len = len;
        op->buf = calloc(1, len + 1);
        CHECK(op->buf, "malloc");
        CHECK(post(tl, op, 0) == TACL_OK, "recv");
        ++next[peer];
    }
    st = drive(tl, (int)(ANY_SENDERS * nany_lens), 30);
    CHECK(st == TACL_OK, "drive: %s", tacl_status_string(st));
    for (int src = 1; src <= ANY_SENDERS; ++src)
        for (size_t i = 0; i < nany_lens; ++i) {
            CHECK(op_result(&ops[src][i]) == TACL_OK, "recv %zu of %d", i,
                  src);
            CHECK(verify(ops[src][i].buf, any_lens[i], src, tag + i),
                  "rank %d message %zu (%llu bytes) out of order or "
                  "corrupted", src, i, (unsigned long long)any_lens[i]);
            free(ops[src][i].buf);
        }
    for (int r = 0; r < ofi->nrails; ++r)
        msgs += ofi->rails[r].msgs;
    CHECK(msgs >= min_msgs, "%llu messages and pieces completed, %llu "
          "expected at least", (unsigned long long)msgs,
          (unsigned long long)min_msgs);
}

static void any_pieces_rank(shared_t *sh, int rank)
{
    const uint64_t tag = TACL__TAG(9, 1);
    tacl__tl_op_t sends[ANY_MAX] = {{0}};
    xctx_t x;
    tacl__tl_t *tl = rank_init(sh, rank, &x);
    tacl_status_t st;

    done_count = 0;
    if (rank == 0) {
        any_pieces_receiver(tl, tag);
    } else {
        for (size_t i = 0; i < nany_lens; ++i) {
            sends[i].peer = 0;
            sends[i].tag = tag;
            sends[i].len = any_lens[i];
            sends[i].buf = malloc(any_lens[i]);
            CHECK(sends[i].buf, "malloc");
            fill(sends[i].buf, any_lens[i], rank, tag + i);
            CHECK(post(tl, &sends[i], 1) == TACL_OK, "send %zu", i);
        }
        st = drive(tl, (int)nany_lens, 30);
        CHECK(st == TACL_OK, "drive: %s", tacl_status_string(st));
        for (size_t i = 0; i < nany_lens; ++i)
            free(sends[i].buf);
    }
    CHECK(barrier(sh) == 0, "barrier");
    tacl__tl_close(tl);
}

/* Striped messages (several MB, odd sizes) among whole ones. */
static const uint64_t striped_lens[] = {(5u << 20) + 3, 100,
                                        (3u << 20) + 4095, 70000, 8u << 20};

static void any_striped_env(void)
{
    rails_env("lo,lo");
    any_lens = striped_lens;
    nany_lens = TACL_ARRAY_SIZE(striped_lens);
    /* Each of both senders' 3 striped messages went as 2 pieces. */
    min_msgs = ANY_SENDERS * (2 * 3 + 2);
}

NET_CASE(ofi_rails, any_source_of_striped_messages, any_striped_env(), 3,
         any_pieces_rank, NULL)

/*
 * A receive of another length than the striped message a probe found
 * is refused with a length error, and the message stays for a receive
 * of its length, which gets it whole.
 */
static void any_wrong_length_rank(shared_t *sh, int rank)
{
    const uint64_t tag = TACL__TAG(9, 2), big = (3u << 20) + 5;
    tacl__tl_op_t op = {0};
    uint64_t len = 0;
    xctx_t x;
    tacl__tl_t *tl = rank_init(sh, rank, &x);
    tacl_status_t st;

    op.peer = 1 - rank;
    op.tag = tag;
    op.len = big;
    op.buf = calloc(1, big);
    CHECK(op.buf, "malloc");
    done_count = 0;
    if (rank == 1) {
        fill(op.buf, big, 1, tag);
        CHECK(post(tl, &op, 1) == TACL_OK, "send");
    } else {
        CHECK(probe_next(tl, tag, &len) == 1 && len == big, "probe "
              "reported %llu bytes", (unsigned long long)len);
        op.len = big - 1;
        st = post(tl, &op, 0);
        CHECK(st == TACL_ERR_INVALID_USAGE, "a receive a byte short was "
              "posted: %s", tacl_status_string(st));
        op.len = big;
        CHECK(post(tl, &op, 0) == TACL_OK, "receive");
    }
    st = drive(tl, 1, 20);
    CHECK(st == TACL_OK && op_result(&op) == TACL_OK, "drive: %s",
          tacl_status_string(st));
    CHECK(rank == 1 || verify(op.buf, big, 1, tag), "message corrupted");
    CHECK(barrier(sh) == 0, "barrier");
    free(op.buf);
    tacl__tl_close(tl);
}

NET_CASE(ofi_rails, any_source_receive_of_another_length_refused,
         rails_env("lo,lo"), 2, any_wrong_length_rank, NULL)

/*
 * Messages longer than the provider takes at once (TACL_OFI_MAX_MSG
 * lowered to 64K) go in pieces of at most that: 1 byte, the limit,
 * one more, several MB, on one rail and striped over two.
 */
#define PIECE_MAX (64u << 10)
static const uint64_t limit_lens[] = {1, PIECE_MAX, PIECE_MAX + 1,
                                      (5u << 20) + 3};

static void pieces_env(const char *nics)
{
    rails_env(nics);
    setenv("TACL_OFI_MAX_MSG", "64K", 1);
    tacl__config_reload();
    any_lens = limit_lens;
    nany_lens = TACL_ARRAY_SIZE(limit_lens);
    min_msgs = 0;
    for (size_t i = 0; i < nany_lens; ++i)
        min_msgs += ANY_SENDERS * TACL_DIV_UP(limit_lens[i], PIECE_MAX);
}

NET_CASE(ofi_rails, any_source_above_max_msg_one_rail, pieces_env("lo"), 3,
         any_pieces_rank, NULL)

NET_CASE(ofi_rails, any_source_above_max_msg_two_rails,
         pieces_env("lo,lo"), 3, any_pieces_rank, NULL)

/* Named receives of every size from 0 B to 64 MB in 64K pieces. */
NET_CASE(ofi_rails, sizes_0_to_64mb_in_64k_pieces, pieces_env("lo"), 2,
         sizes_rank, NULL)

/* ------------------------------------------------------------------ */

/* Both ranks' init fails with status and a message containing words. */
static void refused_rank(shared_t *sh, int rank)
{
    xctx_t x;
    tacl__tl_t *tl = NULL;
    tacl_status_t st = rank_try_init(sh, rank, &x, &tl);

    CHECK(st != TACL_OK && tl == NULL, "init took a bad setting");
    CHECK(strstr(tacl__last_error(), getenv("WANT_ERROR")) != NULL ||
              rank != 0,
          "rank 0's error: %s", tacl__last_error());
}

Test(ofi_rails, bad_stripe_min_refused)
{
    rails_env("lo,lo");
    setenv("TACL_OFI_STRIPE_MIN", "12K", 1);
    setenv("WANT_ERROR", "TACL_OFI_STRIPE_MIN='12K' is not a size", 1);
    tacl__config_reload();
    run_ranks(2, refused_rank, NULL, NULL);
}

Test(ofi_rails, bad_max_msg_refused)
{
    rails_env("lo,lo");
    setenv("TACL_OFI_MAX_MSG", "12K", 1);
    setenv("WANT_ERROR", "TACL_OFI_MAX_MSG='12K' is not auto or a size", 1);
    tacl__config_reload();
    run_ranks(2, refused_rank, NULL, NULL);
}

/* Ranks whose pieces would differ in size are refused alike. */
static void unequal_max_msg_rank(shared_t *sh, int rank)
{
    setenv("TACL_OFI_MAX_MSG", rank == 0 ? "64K" : "128K", 1);
    tacl__config_reload();
    refused_rank(sh, rank);
}

Test(ofi_rails, unequal_max_msg_refused)
{
    rails_env("lo");
    setenv("WANT_ERROR", "set TACL_OFI_MAX_MSG and FI_OFI_RXM_BUFFER_SIZE alike", 1);
    run_ranks(2, unequal_max_msg_rank, NULL, NULL);
}

Test(ofi_rails, unknown_rail_refused)
{
    rails_env("lo,no-such-if");
    setenv("WANT_ERROR", "rail 'no-such-if'", 1);
    run_ranks(2, refused_rank, NULL, NULL);
}

Test(ofi_rails, too_many_rails_refused)
{
    rails_env("lo,lo,lo,lo,lo,lo,lo,lo,lo");
    setenv("WANT_ERROR", "more than 8 rails", 1);
    run_ranks(2, refused_rank, NULL, NULL);
}

/*
 * A provider whose domains are not interfaces (shm here, EFA on AWS)
 * opens one endpoint with TACL_NICS set, as before rails, and works.
 */
static void one_endpoint_rank(shared_t *sh, int rank)
{
    xctx_t x;
    tacl__tl_t *tl;

    rails_env("lo,lo");
    setenv("TACL_OFI_PROVIDER", "shm", 1);
    tacl__config_reload();
    tl = rank_init(sh, rank, &x);
    CHECK(((tacl__ofi_t *)tl)->nrails == 1, "provider shm opened %d rails",
          ((tacl__ofi_t *)tl)->nrails);
    ping(tl, rank, 0, 1, TACL__TAG(1, 1));
    CHECK(barrier(sh) == 0, "barrier");
    tacl__tl_close(tl);
}

Test(ofi_rails, other_providers_open_one_endpoint, .timeout = 60)
{
    run_ranks(2, one_endpoint_rank, NULL, NULL);
}

/* ------------------------------------------------------------------ */

/* The network cases with two rails: 1 MB and 64 MB messages striped. */
NET_CASE(ofi_rails, sizes_0_to_64mb, rails_env("lo,lo"), 2, sizes_rank,
         NULL)

NET_CASE(ofi_rails, many_concurrent_4_ranks, rails_env("lo,lo"), 4,
         many_rank, NULL)

NET_CASE(ofi_rails, same_source_and_tag_in_order, rails_env("lo,lo"), 2,
         fifo_rank, NULL)

NET_CASE(ofi_rails, length_mismatch_fails_the_receive_alone,
         rails_env("lo,lo"), 2, mismatch_rank, NULL)

NET_CASE(ofi_rails, killed_receiver_fails_send, rails_env("lo,lo"), 2,
         killed_send_rank, kill_rank1)

NET_CASE(ofi_rails, killed_midway_sender_fails_receive, rails_env("lo,lo"),
         2, killed_midway_sender_rank, kill_rank1)

NET_CASE(ofi_rails, killed_sender_fails_receive, rails_env("lo,lo"), 2,
         killed_recv_rank, kill_rank1)

NET_CASE(ofi_rails, peer_leaving_idle_is_not_an_error, rails_env("lo,lo"),
         3, leave_rank, NULL)

NET_CASE(ofi_rails, cancel_all_completes_everything, rails_env("lo,lo"), 2,
         cancel_rank, NULL)

NET_CASE(ofi_rails, wait_sleeps_and_wakes, rails_env("lo,lo"), 2,
         wait_rank, NULL)

NET_CASE(ofi_rails, quiet_peer_is_no_progress, rails_env("lo,lo"), 2,
         quiet_peer_rank, NULL)

NET_CASE(ofi_rails, any_source_by_probe_in_order, rails_env("lo,lo"), 3,
         any_source_rank, NULL)
