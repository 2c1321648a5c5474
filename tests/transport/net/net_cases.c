/*
 * The cases every network transport's tests run (ucx, ofi): each
 * multi-rank case forks 2 to 4 processes that claim different node ids,
 * so the transport under test (net_ops) serves every pair; the test
 * programs pin it to loopback first (ucx_env, ofi_env).
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <criterion/criterion.h>

#include "net_cases.h"

/* An exchange that must not be called: every rank is on one node. */
static tacl_status_t no_exchange(void *arg, void *all, size_t size)
{
    (void)all;
    (void)size;
    ++*(int *)arg;
    return TACL_ERR_INTERNAL;
}

void one_node_is_idle(void)
{
    static const char *const same[2] = {"node-a", "node-a"};
    tacl__tl_params_t params = {0};
    tacl__tl_op_t op = {0};
    tacl__tl_t *tl = NULL;
    char byte = 0;
    int calls = 0;

    params.rank = 0;
    params.nranks = 2;
    params.node_id = same[0];
    params.node_ids = same;
    params.timeout_s = 5;
    params.exchange = no_exchange;
    params.exchange_ctx = &calls;
    cr_assert_eq(net_ops->init(&params, &tl), TACL_OK);
    cr_assert_eq(calls, 0, "init exchanged with nobody to reach");
    cr_assert_eq(tacl__tl_reachable(tl, 0), 0);
    cr_assert_eq(tacl__tl_reachable(tl, 1), 0);
    op.peer = 1;
    op.buf = &byte;
    op.len = 1;
    cr_assert_eq(post(tl, &op, 1), TACL_ERR_INVALID_ARG);
    cr_assert_eq(tacl__tl_progress(tl), 0);
    cr_assert_eq(tacl__tl_wait(tl, 1000), TACL_OK);
    tacl__tl_close(tl);
}

void bad_arguments(void)
{
    tacl__tl_params_t params = {0};
    tacl__tl_t *tl = NULL;

    params.rank = 3;
    params.nranks = 2;
    params.node_id = node_names[0];
    params.node_ids = node_names;
    cr_assert_eq(net_ops->init(&params, &tl), TACL_ERR_INVALID_ARG);
    cr_assert_null(tl, "output set on failure");
}

/* ------------------------------------------------------------------ */


static const uint64_t sizes[] = {0, 1, 8192, 1 << 20, 64ull << 20};
#define NSIZES TACL_ARRAY_SIZE(sizes)

void sizes_rank(shared_t *sh, int rank)
{
    tacl__tl_op_t sends[NSIZES] = {{0}}, recvs[NSIZES] = {{0}};
    int peer = 1 - rank;
    xctx_t x;
    tacl__tl_t *tl = rank_init(sh, rank, &x);
    tacl_status_t st;

    for (size_t i = 0; i < NSIZES; ++i) {
        size_t k = NSIZES - 1 - i;     /* receives in reverse order */

        recvs[k].peer = peer;
        recvs[k].tag = TACL__TAG(3, k);
        recvs[k].len = sizes[k];
        recvs[k].buf = sizes[k] ? malloc(sizes[k]) : NULL;
        CHECK(!sizes[k] || recvs[k].buf, "malloc");
        st = post(tl, &recvs[k], 0);
        CHECK(st == TACL_OK, "recv %zu: %s", k, tacl_status_string(st));
    }
    for (size_t i = 0; i < NSIZES; ++i) {
        sends[i].peer = peer;
        sends[i].tag = TACL__TAG(3, i);
        sends[i].len = sizes[i];
        sends[i].buf = sizes[i] ? malloc(sizes[i]) : NULL;
        CHECK(!sizes[i] || sends[i].buf, "malloc");
        fill(sends[i].buf, sizes[i], rank, sends[i].tag);
        st = post(tl, &sends[i], 1);
        CHECK(st == TACL_OK, "send %zu: %s", i, tacl_status_string(st));
    }
    st = drive(tl, 2 * NSIZES, 20);
    CHECK(st == TACL_OK, "drive: %s", tacl_status_string(st));
    for (size_t i = 0; i < NSIZES; ++i) {
        CHECK(op_result(&sends[i]) == TACL_OK, "send %zu", i);
        CHECK(op_result(&recvs[i]) == TACL_OK, "recv %zu", i);
        CHECK(verify(recvs[i].buf, sizes[i], peer, recvs[i].tag),
              "%llu bytes from rank %d corrupted",
              (unsigned long long)sizes[i], peer);
        free(sends[i].buf);
        free(recvs[i].buf);
    }
    CHECK(barrier(sh) == 0, "barrier");
    tacl__tl_close(tl);
}

/* ------------------------------------------------------------------ */


void bw_rank(shared_t *sh, int rank)
{
    tacl__tl_op_t op = {0};
    xctx_t x;
    tacl__tl_t *tl = rank_init(sh, rank, &x);
    uint8_t *buf = malloc(BW_BYTES);
    uint64_t t0 = 0;
    tacl_status_t st;

    CHECK(buf, "malloc");
    if (rank == 0)
        fill(buf, BW_BYTES, 0, 9);
    else
        memset(buf, 0, BW_BYTES);
    /* The first round warms up the connection and the pages. */
    for (int round = 0; round < 3; ++round) {
        done_count = 0;
        op.peer = 1 - rank;
        op.tag = TACL__TAG(round, 0);
        op.buf = buf;
        op.len = BW_BYTES;
        if (rank == 1) {
            st = post(tl, &op, 0);
            CHECK(st == TACL_OK, "recv: %s", tacl_status_string(st));
        }
        CHECK(barrier(sh) == 0, "barrier");
        t0 = tacl__now_ns();
        if (rank == 0) {
            st = post(tl, &op, 1);
            CHECK(st == TACL_OK, "send: %s", tacl_status_string(st));
        }
        st = drive(tl, 1, 20);
        CHECK(st == TACL_OK && op_result(&op) == TACL_OK, "transfer: %s",
              tacl_status_string(st));
        if (rank == 1 && round > 0) {
            double gbs = BW_BYTES / ((tacl__now_ns() - t0) * 1e-9) / 1e9;

            sh->bw_gbs = TACL_MAX(sh->bw_gbs, gbs);
        }
    }
    if (rank == 1)
        CHECK(verify(buf, BW_BYTES, 0, 9), "64 MB message corrupted");
    free(buf);
    CHECK(barrier(sh) == 0, "barrier");
    tacl__tl_close(tl);
}

/* ------------------------------------------------------------------ */

#define NMSG 40

/* The length of message i from src to dst: 0 to 200 KB, eager and not. */
static uint64_t msg_len(int src, int dst, int i)
{
    uint64_t h = (uint64_t)(src * 7919 + dst * 104729 + i * 1299709);

    h ^= h >> 7;
    h *= 0x9e3779b97f4a7c15ull;
    switch ((h >> 32) % 4) {
    case 0:
        return 0;
    case 1:
        return (h >> 40) % 256;
    case 2:
        return (h >> 40) % 16384;
    default:
        return (h >> 40) % 200000;
    }
}

void many_rank(shared_t *sh, int rank)
{
    int n = sh->nranks, nops = 2 * NMSG * (n - 1), k = 0;
    tacl__tl_op_t *ops = calloc((size_t)nops, sizeof(*ops));
    int *order = calloc((size_t)nops, sizeof(int));
    unsigned seed = 12345u + (unsigned)rank;
    xctx_t x;
    tacl__tl_t *tl = rank_init(sh, rank, &x);
    tacl_status_t st;

    CHECK(ops && order, "calloc");
    for (int p = 0; p < n; ++p) {
        if (p == rank)
            continue;
        for (int i = 0; i < NMSG; ++i) {
            for (int s = 0; s < 2; ++s) {
                tacl__tl_op_t *op = &ops[k++];

                op->peer = p;
                /* Several messages per (seq), distinct steps. */
                op->tag = ((uint64_t)5 << 40) | TACL__TAG(i % 3, i);
                op->len = s ? msg_len(rank, p, i) : msg_len(p, rank, i);
                op->buf = malloc(op->len + 1);
                CHECK(op->buf, "malloc");
                if (s)
                    fill(op->buf, op->len, rank, op->tag);
                op->tl_priv[5] = (uint64_t)s; /* overwritten by post */
            }
        }
    }
    for (int i = 0; i < nops; ++i)
        order[i] = i;
    for (int i = nops - 1; i > 0; --i) {
        int j = (int)(rand_r(&seed) % (unsigned)(i + 1)), t = order[i];

        order[i] = order[j];
        order[j] = t;
    }
    CHECK(barrier(sh) == 0, "barrier");
    for (int i = 0; i < nops; ++i) {
        tacl__tl_op_t *op = &ops[order[i]];
        int is_send = order[i] % 2;

        st = post(tl, op, is_send);
        CHECK(st == TACL_OK, "post: %s", tacl_status_string(st));
        /* Progress now and then, so some messages arrive unexpected. */
        if (i % 7 == 0)
            tacl__tl_progress(tl);
    }
    st = drive(tl, nops, 20);
    CHECK(st == TACL_OK, "drive: %s (%d of %d done)",
          tacl_status_string(st), done_count, nops);
    for (int i = 0; i < nops; ++i) {
        tacl__tl_op_t *op = &ops[i];

        CHECK(op_result(op) == TACL_OK, "op %d to/from %d: %s", i, op->peer,
              tacl_status_string(op_result(op)));
        if (i % 2 == 0)
            CHECK(verify(op->buf, op->len, op->peer, op->tag),
                  "message from %d tag 0x%llx corrupted", op->peer,
                  (unsigned long long)op->tag);
        free(op->buf);
    }
    free(ops);
    free(order);
    CHECK(barrier(sh) == 0, "barrier");
    tacl__tl_close(tl);
}

/* ------------------------------------------------------------------ */

#define NFIFO 64

static uint64_t fifo_len(int i)
{
    return i % 4 == 0 ? 100000 + (uint64_t)i : (uint64_t)i * 10;
}

void fifo_rank(shared_t *sh, int rank)
{
    tacl__tl_op_t ops[NFIFO] = {{0}};
    const uint64_t tag = TACL__TAG(1, 1);
    xctx_t x;
    tacl__tl_t *tl = rank_init(sh, rank, &x);
    tacl_status_t st;

    for (int i = 0; i < NFIFO; ++i) {
        ops[i].peer = 1 - rank;
        ops[i].tag = tag;
        ops[i].len = fifo_len(i);
        ops[i].buf = malloc(ops[i].len + 1);
        CHECK(ops[i].buf, "malloc");
        if (rank == 0)
            fill(ops[i].buf, ops[i].len, 0, (uint64_t)i);
    }
    /* Half the receives wait for their messages, half find them here. */
    for (int i = 0; rank == 1 && i < NFIFO / 2; ++i)
        CHECK(post(tl, &ops[i], 0) == TACL_OK, "recv %d", i);
    CHECK(barrier(sh) == 0, "barrier");
    for (int i = 0; rank == 0 && i < NFIFO; ++i)
        CHECK(post(tl, &ops[i], 1) == TACL_OK, "send %d", i);
    if (rank == 1) {
        st = drive(tl, NFIFO / 4, 10);
        CHECK(st == TACL_OK, "drive: %s", tacl_status_string(st));
        for (int i = NFIFO / 2; i < NFIFO; ++i)
            CHECK(post(tl, &ops[i], 0) == TACL_OK, "recv %d", i);
    }
    st = drive(tl, NFIFO, 20);
    CHECK(st == TACL_OK, "drive: %s", tacl_status_string(st));
    for (int i = 0; i < NFIFO; ++i) {
        CHECK(op_result(&ops[i]) == TACL_OK, "op %d: %s", i,
              tacl_status_string(op_result(&ops[i])));
        if (rank == 1)
            CHECK(verify(ops[i].buf, ops[i].len, 0, (uint64_t)i),
                  "message %d out of order or corrupted", i);
        free(ops[i].buf);
    }
    CHECK(barrier(sh) == 0, "barrier");
    tacl__tl_close(tl);
}

/* ------------------------------------------------------------------ */

void mismatch_rank(shared_t *sh, int rank)
{
    static const uint64_t send_len[3] = {100, 100, 4096};
    static const uint64_t recv_len[3] = {50, 200, 4000};
    tacl__tl_op_t ops[4] = {{0}};
    static uint8_t buf[4][8192];
    xctx_t x;
    tacl__tl_t *tl = rank_init(sh, rank, &x);
    tacl_status_t st;

    for (int i = 0; i < 3; ++i) {
        ops[i].peer = 1 - rank;
        ops[i].tag = TACL__TAG(0, i);
        ops[i].buf = buf[i];
        ops[i].len = rank == 0 ? send_len[i] : recv_len[i];
        CHECK(post(tl, &ops[i], rank == 0) == TACL_OK, "post %d", i);
    }
    st = drive(tl, 3, 10);
    for (int i = 0; i < 3; ++i)
        CHECK(op_result(&ops[i]) ==
                  (rank == 0 ? TACL_OK : TACL_ERR_INVALID_USAGE),
              "op %d ended with %s", i,
              tacl_status_string(op_result(&ops[i])));
    CHECK(st == TACL_OK, "a length mismatch failed the instance: %s",
          tacl_status_string(st));
    /* The instance still works afterwards. */
    ops[3].peer = 1 - rank;
    ops[3].tag = TACL__TAG(0, 9);
    ops[3].buf = buf[3];
    ops[3].len = 8;
    CHECK(post(tl, &ops[3], rank == 0) == TACL_OK, "post");
    st = drive(tl, 4, 10);
    CHECK(st == TACL_OK && op_result(&ops[3]) == TACL_OK, "after: %s",
          tacl_status_string(st));
    CHECK(barrier(sh) == 0, "barrier");
    tacl__tl_close(tl);
}

/* ------------------------------------------------------------------ */

#define KILL_BYTES (64ull << 20)
/* A dead peer must be noticed well within this. */
#define KILL_NOTICE_S 5.0

/* Rank 1 dies while rank 0's 64 MB send to it is under way. */
void killed_send_rank(shared_t *sh, int rank)
{
    tacl__tl_op_t op = {0};
    xctx_t x;
    tacl__tl_t *tl = rank_init(sh, rank, &x);
    uint8_t *buf = malloc(KILL_BYTES);
    uint64_t t0;
    tacl_status_t st;

    CHECK(buf, "malloc");
    memset(buf, rank, KILL_BYTES);
    op.peer = 1 - rank;
    op.tag = TACL__TAG(1, 2);
    op.buf = buf;
    op.len = KILL_BYTES;
    if (rank == 1) {
        CHECK(post(tl, &op, 0) == TACL_OK, "recv");
        CHECK(barrier(sh) == 0, "barrier");
        /* Die once the first bytes are in and the last are not. */
        for (uint64_t end = tacl__now_ns() + 5000000000ull;
             tacl__now_ns() < end && buf[KILL_BYTES - 1] == 1;) {
            tacl__tl_progress(tl);
            if (buf[0] == 0 && buf[KILL_BYTES - 1] == 1)
                atomic_store(&sh->midway, 1);
            if (buf[0] == 0)
                break;
        }
        raise(SIGKILL);
    }
    CHECK(barrier(sh) == 0, "barrier");
    t0 = tacl__now_ns();
    CHECK(post(tl, &op, 1) == TACL_OK, "send");
    st = drive(tl, 1, KILL_NOTICE_S);
    CHECK(atomic_load(&sh->midway), "rank 1 did not die mid-transfer");
    CHECK(st == TACL_ERR_REMOTE, "drive ended with %s after %.2f s",
          tacl_status_string(st), (tacl__now_ns() - t0) * 1e-9);
    CHECK(op_result(&op) == TACL_ERR_REMOTE, "send ended with %s",
          tacl_status_string(op_result(&op)));
    /* The instance stays failed. */
    CHECK(tacl__tl_progress(tl) == TACL_ERR_REMOTE, "progress after");
    CHECK(post(tl, &op, 1) == TACL_ERR_REMOTE, "post after");
    fprintf(stderr, "%s: dead receiver noticed after %.3f s\n",
            net_ops->name, (tacl__now_ns() - t0) * 1e-9);
    tacl__tl_close(tl);
    free(buf);
}

/* Rank 1 dies while rank 0 waits to receive from it. */
void killed_recv_rank(shared_t *sh, int rank)
{
    tacl__tl_op_t ops[2] = {{0}};
    static uint8_t buf[2][4096];
    xctx_t x;
    tacl__tl_t *tl = rank_init(sh, rank, &x);
    uint64_t t0;
    tacl_status_t st;

    if (rank == 1) {
        CHECK(barrier(sh) == 0, "barrier");
        usleep(100000);
        raise(SIGKILL);
    }
    for (int i = 0; i < 2; ++i) {
        ops[i].peer = 1;
        ops[i].tag = TACL__TAG(0, i);
        ops[i].buf = buf[i];
        ops[i].len = i ? 4096 : 0;
        CHECK(post(tl, &ops[i], 0) == TACL_OK, "recv %d", i);
    }
    CHECK(barrier(sh) == 0, "barrier");
    t0 = tacl__now_ns();
    st = drive(tl, 2, KILL_NOTICE_S);
    CHECK(st == TACL_ERR_REMOTE, "drive ended with %s after %.2f s",
          tacl_status_string(st), (tacl__now_ns() - t0) * 1e-9);
    for (int i = 0; i < 2; ++i)
        CHECK(op_result(&ops[i]) == TACL_ERR_REMOTE, "recv %d ended with %s",
              i, tacl_status_string(op_result(&ops[i])));
    fprintf(stderr, "%s: dead sender noticed after %.3f s\n",
            net_ops->name, (tacl__now_ns() - t0) * 1e-9);
    tacl__tl_close(tl);
}

/* Rank 1 dies in the middle of its 64 MB send to rank 0. */
void killed_midway_sender_rank(shared_t *sh, int rank)
{
    tacl__tl_op_t op = {0};
    xctx_t x;
    tacl__tl_t *tl = rank_init(sh, rank, &x);
    uint8_t *buf = malloc(KILL_BYTES);
    uint64_t t0, end;
    tacl_status_t st = TACL_OK;

    CHECK(buf, "malloc");
    memset(buf, rank, KILL_BYTES);
    op.peer = 1 - rank;
    op.tag = TACL__TAG(1, 3);
    op.buf = buf;
    op.len = KILL_BYTES;
    CHECK(post(tl, &op, rank == 1) == TACL_OK, "post");
    CHECK(barrier(sh) == 0, "barrier");
    end = tacl__now_ns() + 5000000000ull;
    if (rank == 1) {
        while (!atomic_load(&sh->midway) && tacl__now_ns() < end)
            tacl__tl_progress(tl);
        raise(SIGKILL);
    }
    t0 = tacl__now_ns();
    while (done_count == 0 && tacl__now_ns() < end) {
        int n = tacl__tl_progress(tl);

        if (n < 0)
            st = n;
        if (buf[0] == 1 && done_count == 0 && !atomic_load(&sh->midway)) {
            atomic_store(&sh->midway, 1);
            /* No progress until rank 1 is dead: ofi's receiver pulls a
             * rendezvous, and the rest could otherwise arrive between
             * the first bytes and the kill (seen 1 run in 6). */
            usleep(200000);
        }
    }
    CHECK(atomic_load(&sh->midway), "rank 1 did not die mid-transfer");
    CHECK(st == TACL_ERR_REMOTE && op_result(&op) == TACL_ERR_REMOTE,
          "progress %s, recv %s after %.2f s", tacl_status_string(st),
          tacl_status_string(op_result(&op)),
          (tacl__now_ns() - t0) * 1e-9);
    fprintf(stderr, "%s: sender dead mid-transfer noticed after %.3f s\n",
            net_ops->name, (tacl__now_ns() - t0) * 1e-9);
    tacl__tl_close(tl);
    free(buf);
}

const int kill_rank1[2] = {0, 1};

/* ------------------------------------------------------------------ */

/* Rank 0 closes and leaves; ranks 1 and 2 carry on undisturbed. */
void leave_rank(shared_t *sh, int rank)
{
    xctx_t x;
    tacl__tl_t *tl = rank_init(sh, rank, &x);

    ping(tl, rank, 0, 1, 1);
    ping(tl, rank, 2, 0, 2);
    ping(tl, rank, 1, 2, 3);
    CHECK(barrier(sh) == 0, "barrier");
    if (rank == 0) {
        tacl__tl_close(tl);
        CHECK(barrier(sh) == 0, "barrier");
        _exit(0);
    }
    CHECK(barrier(sh) == 0, "barrier");
    /* Let the departure reach the others. */
    for (uint64_t end = tacl__now_ns() + 300000000ull;
         tacl__now_ns() < end;) {
        int n = tacl__tl_progress(tl);

        CHECK(n >= 0, "rank 0 leaving failed rank %d: %s", rank,
              tacl_status_string(n));
        tacl__tl_wait(tl, 10000);
    }
    ping(tl, rank, 2, 1, 4);
    ping(tl, rank, 1, 2, 5);
    if (rank == 1) {
        /* Operations naming the rank that left fail, and only they. */
        tacl__tl_op_t op = {0};
        uint8_t byte;
        tacl_status_t st;

        done_count = 0;
        op.peer = 0;
        op.tag = 6;
        op.buf = &byte;
        op.len = 1;
        CHECK(post(tl, &op, 1) == TACL_ERR_REMOTE, "send to a rank gone");
        CHECK(post(tl, &op, 0) == TACL_OK, "recv");
        st = drive(tl, 1, 5);
        CHECK(st == TACL_OK && op_result(&op) == TACL_ERR_REMOTE,
              "recv from a rank gone: %s, %s", tacl_status_string(st),
              tacl_status_string(op_result(&op)));
    }
    tacl__tl_close(tl);
}

/* ------------------------------------------------------------------ */

void cancel_rank(shared_t *sh, int rank)
{
    tacl__tl_op_t ops[4] = {{0}};
    static uint8_t buf[4][1 << 20];
    xctx_t x;
    tacl__tl_t *tl = rank_init(sh, rank, &x);
    int n;

    if (rank == 0) {
        /* Three receives nobody sends to, one send nobody receives. */
        for (int i = 0; i < 4; ++i) {
            ops[i].peer = 1;
            ops[i].tag = TACL__TAG(2, i);
            ops[i].buf = buf[i];
            ops[i].len = i == 3 ? sizeof(buf[i]) : (uint64_t)i * 100;
            CHECK(post(tl, &ops[i], i == 3) == TACL_OK, "post %d", i);
        }
        for (int i = 0; i < 5; ++i)
            CHECK(tacl__tl_progress(tl) >= 0, "progress failed");
        CHECK(done_count == 0, "%d ops completed early", done_count);
        tacl__tl_cancel_all(tl, TACL_ERR_TIMEOUT);
        CHECK(done_count == 4, "cancel_all completed %d of 4", done_count);
        for (int i = 0; i < 4; ++i)
            CHECK(op_result(&ops[i]) == TACL_ERR_TIMEOUT, "op %d: %s", i,
                  tacl_status_string(op_result(&ops[i])));
        n = tacl__tl_progress(tl);
        CHECK(n == TACL_ERR_TIMEOUT, "progress after cancel: %d", n);
        CHECK(done_count == 4, "a callback ran twice");
    }
    CHECK(barrier(sh) == 0, "barrier");
    tacl__tl_close(tl);
}

/* ------------------------------------------------------------------ */

/*
 * Two ranks connected both ways, op set up as one 8-byte word of tag
 * (0, 1) to or from the other rank, done_count reset, and receiver's
 * receive posted.
 */
static tacl__tl_t *connected_pair(shared_t *sh, int rank, xctx_t *x,
                                  tacl__tl_op_t *op, uint64_t *word,
                                  int receiver)
{
    tacl__tl_t *tl = rank_init(sh, rank, x);

    op->peer = 1 - rank;
    op->tag = TACL__TAG(0, 1);
    op->buf = word;
    op->len = sizeof(*word);
    ping(tl, rank, 0, 1, 7);            /* connect both ways first */
    ping(tl, rank, 1, 0, 8);
    done_count = 0;
    if (rank == receiver)
        CHECK(post(tl, op, 0) == TACL_OK, "recv");
    return tl;
}

void wait_rank(shared_t *sh, int rank)
{
    tacl__tl_op_t op = {0};
    uint64_t word = 0, t0, sent_at;
    int loops = 0;
    xctx_t x;
    tacl__tl_t *tl = connected_pair(sh, rank, &x, &op, &word, 1);

    CHECK(barrier(sh) == 0, "barrier");
    if (rank == 0) {
        usleep(300000);
        word = tacl__now_ns();
        CHECK(post(tl, &op, 1) == TACL_OK, "send");
        CHECK(drive(tl, 1, 10) == TACL_OK, "send");
    } else {
        /* Sleeping, not spinning: few loops in 300 ms. */
        t0 = tacl__now_ns();
        while (done_count == 0 && tacl__now_ns() - t0 < 5000000000ull) {
            CHECK(tacl__tl_progress(tl) >= 0, "progress");
            if (done_count == 0)
                CHECK(tacl__tl_wait(tl, 2000000) == TACL_OK, "wait");
            ++loops;
        }
        CHECK(done_count == 1, "nothing arrived");
        sent_at = word;
        CHECK(tacl__now_ns() - sent_at < 100000000ull,
              "woke %.3f s after the message was sent",
              (tacl__now_ns() - sent_at) * 1e-9);
        CHECK(loops < 100, "%d loops while idle: wait() does not sleep",
              loops);
        /* A wait with nothing coming lasts about its timeout. */
        t0 = tacl__now_ns();
        for (int i = 0; i < 3; ++i) {
            tacl__tl_progress(tl);
            tacl__tl_wait(tl, 50000);
        }
        CHECK(tacl__now_ns() - t0 < 1000000000ull, "wait overslept");
    }
    CHECK(barrier(sh) == 0, "barrier");
    tacl__tl_close(tl);
}

/*
 * Rank 1 stays connected but moves nothing for 2.5 s, while rank 0 waits
 * on a receive from it: progress() must report no events, since the
 * executor's no-progress timeout is what turns a hung peer or a cut link
 * into an error.  (ofi's pings to the peer completed every ping period
 * and were counted, so that timeout never fired.)  Then the message
 * comes and the receive ends.
 */
void quiet_peer_rank(shared_t *sh, int rank)
{
    tacl__tl_op_t op = {0};
    uint64_t word = 0, t0;
    int events = 0;
    xctx_t x;
    tacl__tl_t *tl = connected_pair(sh, rank, &x, &op, &word, 0);

    CHECK(barrier(sh) == 0, "barrier");
    if (rank == 0) {
        t0 = tacl__now_ns();
        while (tacl__now_ns() - t0 < 2500000000ull) {
            int n = tacl__tl_progress(tl);

            CHECK(n >= 0, "progress failed: %s", tacl__last_error());
            events += n;
            tacl__tl_wait(tl, 20000);
        }
        CHECK(events == 0 && done_count == 0, "%d progress events in 2.5 "
              "s while the peer moved nothing (%d operations done)",
              events, done_count);
    } else {
        usleep(2600000);
    }
    CHECK(barrier(sh) == 0, "barrier");
    if (rank == 1) {
        word = 42;
        CHECK(post(tl, &op, 1) == TACL_OK, "send");
    }
    CHECK(drive(tl, 1, 10) == TACL_OK, "the message after the quiet spell");
    if (rank == 0)
        CHECK(word == 42, "received %llu", (unsigned long long)word);
    CHECK(barrier(sh) == 0, "barrier");
    tacl__tl_close(tl);
}


/* ------------------------------------------------------------------ */

#define NANY 8

/* Message i of sender src: eager and rendezvous sizes, one empty. */
static uint64_t any_len(int src, int i)
{
    return i == 4       ? 0
           : i % 3 == 0 ? 70000 + (uint64_t)src
                        : (uint64_t)(10 * i + src);
}

/*
 * Rank 0 receives from any source what ranks 1 and 2 send with one tag:
 * it probes, then posts a receive for the sender and length the probe
 * reported.  Each sender's messages must come in the order sent (each
 * is filled by its sequence number), every one once; a message with
 * another tag is never reported, nor one a receive posted before took.
 */
static void any_source_receiver(tacl__tl_t *tl, uint64_t tag, uint64_t other)
{
    tacl__tl_op_t others[3] = {{0}};
    tacl__tl_op_t ops[3][NANY] = {{{0}}};
    int next[3] = {0, 1, 0}, got = 0, peer, found;
    uint64_t len, deadline = tacl__now_ns() + 20000000000ull;
    tacl_status_t st;

    for (int src = 1; src < 3; ++src) {
        others[src].peer = src;
        others[src].tag = other;
        others[src].len = 64;
        others[src].buf = malloc(64);
        CHECK(others[src].buf, "malloc");
    }
    while (got < 2 * NANY - 1 && tacl__now_ns() < deadline) {
        CHECK(tacl__tl_progress(tl) >= 0, "progress failed");
        found = tacl__tl_probe(tl, tag, &peer, &len);
        CHECK(found >= 0, "probe: %s", tacl_status_string(found));
        if (found == 0) {
            tacl__tl_wait(tl, 1000);
            continue;
        }
        CHECK(peer == 1 || peer == 2, "probe reported rank %d", peer);
        CHECK(next[peer] < NANY, "rank %d: more messages than sent", peer);
        CHECK(len == any_len(peer, next[peer]),
              "rank %d message %d: probe says %llu bytes, %llu sent",
              peer, next[peer], (unsigned long long)len,
              (unsigned long long)any_len(peer, next[peer]));
        tacl__tl_op_t *op = &ops[peer][next[peer]];

        op->peer = peer;
        op->tag = tag;
        op->len = len;
        op->buf = malloc(len + 1);
        CHECK(op->buf, "malloc");
        CHECK(post(tl, op, 0) == TACL_OK, "recv");
        ++next[peer];
        ++got;
    }
    CHECK(got == 2 * NANY - 1, "%d of %d messages found by probe", got,
          2 * NANY - 1);
    for (int src = 1; src < 3; ++src)
        CHECK(post(tl, &others[src], 0) == TACL_OK, "recv other");
    st = drive(tl, 2 * NANY + 2, 20);
    CHECK(st == TACL_OK, "drive: %s", tacl_status_string(st));
    CHECK(tacl__tl_probe(tl, tag, &peer, &len) == 0,
          "probe found a message after all were received");
    for (int src = 1; src < 3; ++src) {
        for (int i = src == 1; i < NANY; ++i) {
            CHECK(op_result(&ops[src][i]) == TACL_OK, "recv %d of %d", i,
                  src);
            CHECK(verify(ops[src][i].buf, any_len(src, i), src, (uint64_t)i),
                  "rank %d message %d out of order or corrupted", src, i);
            free(ops[src][i].buf);
        }
        CHECK(verify(others[src].buf, 64, src, other), "other tag");
        free(others[src].buf);
    }
}

void any_source_rank(shared_t *sh, int rank)
{
    const uint64_t tag = TACL__TAG(5, 1), other = TACL__TAG(5, 2);
    tacl__tl_op_t first = {0}, sends[NANY + 1] = {{0}};
    xctx_t x;
    tacl__tl_t *tl = rank_init(sh, rank, &x);
    tacl_status_t st;

    if (rank == 0) {
        /* Rank 1's first message goes to the receive posted for it. */
        first.peer = 1;
        first.tag = tag;
        first.len = any_len(1, 0);
        first.buf = malloc(first.len);
        CHECK(first.buf, "malloc");
        CHECK(post(tl, &first, 0) == TACL_OK, "recv");
    }
    CHECK(barrier(sh) == 0, "barrier");
    if (rank == 0) {
        any_source_receiver(tl, tag, other);
        CHECK(op_result(&first) == TACL_OK, "the named receive");
        CHECK(verify(first.buf, first.len, 1, 0),
              "the named receive got another message");
        free(first.buf);
    } else {
        /* The other tag first: probe must pass it over. */
        for (int i = 0; i <= NANY; ++i) {
            sends[i].peer = 0;
            sends[i].tag = i == 0 ? other : tag;
            sends[i].len = i == 0 ? 64 : any_len(rank, i - 1);
            sends[i].buf = malloc(sends[i].len + 1);
            CHECK(sends[i].buf, "malloc");
            fill(sends[i].buf, sends[i].len, rank,
                 i == 0 ? other : (uint64_t)(i - 1));
            CHECK(post(tl, &sends[i], 1) == TACL_OK, "send %d", i);
        }
        st = drive(tl, NANY + 1, 20);
        CHECK(st == TACL_OK, "drive: %s", tacl_status_string(st));
        for (int i = 0; i <= NANY; ++i)
            free(sends[i].buf);
    }
    CHECK(barrier(sh) == 0, "barrier");
    tacl__tl_close(tl);
}
