/*
 * Tests of the shm transport with real processes: the harness forks the
 * ranks (tl_harness.h).  Every data-moving case runs in each way of
 * moving large messages: cma (the receiver pulls), push (cma, with half
 * the receives hinted PINNABLE so their senders write them) and copy.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "config.h"
#include "shm/shm.h"
#include "tl_harness.h"

#define EAGER 16384u

/*
 * One case over every way of moving large messages: tests name_cma,
 * name_push and name_copy each run fn on nranks ranks in that mode, with
 * the mode's name as fn's argument (kill_rank as tlh_run takes it).
 */
#define TEST_EACH_MODE(name, nranks, fn, kill_rank, timeout_s)               \
    Test(transport_shm, name##_cma, .timeout = timeout_s)                    \
    {                                                                        \
        cr_assert_eq(tlh_run(nranks, "cma", fn, "cma", kill_rank), 0);       \
    }                                                                        \
    Test(transport_shm, name##_push, .timeout = timeout_s)                   \
    {                                                                        \
        cr_assert_eq(tlh_run(nranks, "push", fn, "push", kill_rank), 0);     \
    }                                                                        \
    Test(transport_shm, name##_copy, .timeout = timeout_s)                   \
    {                                                                        \
        cr_assert_eq(tlh_run(nranks, "copy", fn, "copy", kill_rank), 0);     \
    }

/* The mode a rank was started with, as the transport must have chosen. */
static void check_mode(tacl__tl_t *tl, const char *mode)
{
    tacl__shm_t *shm = (tacl__shm_t *)tl;

    CHECK(strcmp(tacl__tl_name(tl), "shm") == 0);
    if (mode && !strcmp(mode, "copy"))
        CHECK(!shm->use_cma);
    if (mode && (!strcmp(mode, "cma") || !strcmp(mode, "push")))
        CHECK(shm->use_cma);
    CHECK(shm->eager_limit == EAGER);
}

/* No name of this job may remain in /dev/shm once init returned. */
static void check_unlinked(tacl__tl_t *tl)
{
    char prefix[32];
    struct dirent *de;
    DIR *dir = opendir("/dev/shm");

    if (!dir)
        return;
    snprintf(prefix, sizeof(prefix), "tacl-%016llx-",
             (unsigned long long)((tacl__shm_t *)tl)->hdr->nonce);
    while ((de = readdir(dir)))
        CHECK(strncmp(de->d_name, prefix, strlen(prefix)) != 0);
    closedir(dir);
}

static int opq_len(const tacl__tl_opq_t *q)
{
    int n = 0;

    for (const tacl__tl_op_t *op = q->head; op; op = op->tl_next)
        ++n;
    return n;
}

/* Print the transport's state, to explain a drive that timed out. */
static void dump_state(tacl__tl_t *tl)
{
    tacl__shm_t *shm = (tacl__shm_t *)tl;

    for (int i = 0; i < shm->base.nlocal; ++i) {
        tacl__shm_peer_t *p = &shm->peers[i];
        int nux = 0;

        if (i == shm->base.my_local)
            continue;
        for (tacl__tl_msg_t *m = p->ux.head; m; m = m->next)
            ++nux;
        fprintf(stderr, "rank %d peer %d: sends %d rts_wait %d recvs %d "
                "pulls %d ux %d in_kind %d ctls %zu out_space %u "
                "in_pending %d\n", shm->base.rank, p->rank, opq_len(&p->sends),
                opq_len(&p->rts_wait), opq_len(&p->recvs),
                opq_len(&p->pulls), nux, p->in_kind, p->nctls,
                tacl__shm_out_space(p), tacl__shm_in_pending(p));
        for (tacl__tl_op_t *op = p->recvs.head; op; op = op->tl_next)
            fprintf(stderr, "  recv tag %llu len %llu\n",
                    (unsigned long long)op->tag,
                    (unsigned long long)op->len);
        for (tacl__tl_msg_t *m = p->ux.head; m; m = m->next)
            fprintf(stderr, "  ux kind %u tag %llu len %llu\n",
                    ((tacl__shm_ux_t *)m)->kind, (unsigned long long)m->tag,
                    (unsigned long long)((tacl__shm_ux_t *)m)->len);
    }
}

/* Drive, explaining the state if it does not finish. */
static int drive(tacl__tl_t *tl, int *pending, long spin, double timeout_s)
{
    int rc = tlh_drive(tl, pending, spin, timeout_s);

    if (rc != 0)
        dump_state(tl);
    return rc;
}

/* ---- Every size class, both directions at once, and a bad length. ---- */

static const size_t sizes[] = {0, 1, EAGER, EAGER + 1, 1u << 20, 64u << 20};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

static int sizes_rank(int rank, int nranks, void *arg)
{
    const char *mode = arg;
    tacl__tl_t *tl = tlh_init(&tacl__tl_shm_ops, rank, nranks, NULL);
    int peer = !rank, pending = 0;
    uint8_t *out[NSIZES], *in[NSIZES];
    tlh_op_t s[NSIZES], r[NSIZES], bad_s[2], bad_r[2];
    char small[200] = {0}, big[EAGER * 4] = {0};

    check_mode(tl, mode);
    tlh_barrier();
    check_unlinked(tl);
    CHECK(tacl__tl_reachable(tl, peer));
    CHECK(!tacl__tl_reachable(tl, rank));
    for (size_t i = 0; i < NSIZES; ++i) {
        out[i] = malloc(sizes[i] + 1);
        in[i] = malloc(sizes[i] + 1);
        CHECK(out[i] && in[i]);
        tlh_fill(out[i], sizes[i], 100 * (uint64_t)rank + i);
        memset(in[i], 0xee, sizes[i]);
        tlh_op(&r[i], peer, i, in[i], sizes[i], &pending);
        /* Push mode: pulls and pushes in the same stream. */
        if (i % 2)
            r[i].op.hints = 0;
        CHECK(tacl__tl_recv(tl, &r[i].op) == TACL_OK);
        CHECK(tacl__tl_send(tl, tlh_op(&s[i], peer, i, out[i], sizes[i],
                                       &pending)) == TACL_OK);
    }
    CHECK(drive(tl, &pending, 100, 30) == 0);
    for (size_t i = 0; i < NSIZES; ++i) {
        CHECK(s[i].status == TACL_OK && s[i].calls == 1);
        CHECK(r[i].status == TACL_OK && r[i].calls == 1);
        CHECK(tlh_check(in[i], sizes[i], 100 * (uint64_t)peer + i));
        free(out[i]);
        free(in[i]);
    }
    /* A receive of the wrong length fails; the stream goes on after it. */
    if (rank == 0) {
        CHECK(tacl__tl_send(tl, tlh_op(&bad_s[0], 1, 50, small, 100,
                                       &pending)) == TACL_OK);
        CHECK(tacl__tl_send(tl, tlh_op(&bad_s[1], 1, 51, big, sizeof(big),
                                       &pending)) == TACL_OK);
    } else {
        CHECK(tacl__tl_recv(tl, tlh_op(&bad_r[0], 0, 50, small, 50,
                                       &pending)) == TACL_OK);
        CHECK(tacl__tl_recv(tl, tlh_op(&bad_r[1], 0, 51, big, EAGER * 2,
                                       &pending)) == TACL_OK);
    }
    CHECK(drive(tl, &pending, 100, 30) == 0);
    if (rank == 1) {
        CHECK(bad_r[0].status == TACL_ERR_INVALID_USAGE);
        CHECK(bad_r[1].status == TACL_ERR_INVALID_USAGE);
    }
    tlh_fill(small, sizeof(small), 7);
    if (rank == 0)
        CHECK(tacl__tl_send(tl, tlh_op(&s[0], 1, 52, small, sizeof(small),
                                       &pending)) == TACL_OK);
    else
        CHECK(tacl__tl_recv(tl, tlh_op(&r[0], 0, 52, small, sizeof(small),
                                       &pending)) == TACL_OK);
    CHECK(drive(tl, &pending, 100, 30) == 0);
    CHECK(tlh_check(small, sizeof(small), 7));
    tlh_barrier();
    tacl__tl_close(tl);
    return 0;
}

TEST_EACH_MODE(sizes, 2, sizes_rank, -1, 120)

/* ---- Many tagged messages, everything posted in random order. ---- */

#define MANY 60

static size_t many_size(int src, int dst, int j)
{
    uint64_t x = (uint64_t)(src * 7919 + dst * 104729 + j * 1299709);

    return j % 10 == 0 ? 0 : (size_t)(x % 90000);
}

static int many_rank(int rank, int nranks, void *arg)
{
    tacl__tl_t *tl = tlh_init(&tacl__tl_shm_ops, rank, nranks, NULL);
    int nops = 2 * (nranks - 1) * MANY, k = 0, pending = 0;
    tlh_op_t *ops = calloc((size_t)nops, sizeof(*ops));
    uint8_t **bufs = calloc((size_t)nops, sizeof(*bufs));
    int *order = calloc((size_t)nops, sizeof(*order));
    unsigned seed = (unsigned)rank * 7 + 1;

    CHECK(ops && bufs && order);
    for (int peer = 0; peer < nranks; ++peer) {
        if (peer == rank)
            continue;
        for (int j = 0; j < MANY; ++j) {
            for (int dir = 0; dir < 2; ++dir, ++k) {
                int src = dir ? peer : rank, dst = dir ? rank : peer;
                size_t len = many_size(src, dst, j);

                bufs[k] = malloc(len + 1);
                CHECK(bufs[k]);
                if (dir == 0)
                    tlh_fill(bufs[k], len, (uint64_t)(src * 1000 + dst) *
                             1000 + (uint64_t)j);
                tlh_op(&ops[k], peer, (uint64_t)j * 3 + 1, bufs[k], len,
                       &pending);
                order[k] = k;
            }
        }
    }
    for (int i = nops - 1; i > 0; --i) {
        int j = rand_r(&seed) % (i + 1), t = order[i];

        order[i] = order[j];
        order[j] = t;
    }
    for (int i = 0; i < nops; ++i) {
        tlh_op_t *t = &ops[order[i]];

        /* Even slots of each pair are sends, odd ones receives. */
        CHECK((order[i] % 2 ? tacl__tl_recv : tacl__tl_send)(tl, &t->op) ==
              TACL_OK);
    }
    CHECK(drive(tl, &pending, 100, 40) == 0);
    for (int i = 0; i < nops; ++i) {
        CHECK(ops[i].status == TACL_OK && ops[i].calls == 1);
        if (i % 2) {
            int src = ops[i].op.peer, j = (int)(ops[i].op.tag - 1) / 3;

            CHECK(tlh_check(bufs[i], ops[i].op.len,
                            (uint64_t)(src * 1000 + rank) * 1000 +
                            (uint64_t)j));
        }
        free(bufs[i]);
    }
    free(bufs);
    free(ops);
    free(order);
    tlh_barrier();
    tacl__tl_close(tl);
    return 0;
}

TEST_EACH_MODE(many_tagged, 3, many_rank, -1, 120)

/* ---- Same source and tag: receives match in sending order. ---- */

#define FIFO_N 40

static size_t fifo_size(int i)
{
    return i % 3 == 0 ? 3 * EAGER + (size_t)i : (size_t)(100 + i);
}

static int fifo_rank(int rank, int nranks, void *arg)
{
    tacl__tl_t *tl = tlh_init(&tacl__tl_shm_ops, rank, nranks, NULL);
    tlh_op_t ops[FIFO_N];
    uint8_t *bufs[FIFO_N];
    int pending = 0;

    for (int i = 0; i < FIFO_N; ++i) {
        bufs[i] = malloc(fifo_size(i));
        CHECK(bufs[i]);
        tlh_op(&ops[i], !rank, 7, bufs[i], fifo_size(i), &pending);
        if (rank == 0) {
            tlh_fill(bufs[i], fifo_size(i), (uint64_t)i);
            CHECK(tacl__tl_send(tl, &ops[i].op) == TACL_OK);
        } else {
            CHECK(tacl__tl_recv(tl, &ops[i].op) == TACL_OK);
            /* Half the receives are posted while messages flow. */
            if (i < FIFO_N / 2)
                tacl__tl_progress(tl);
        }
    }
    CHECK(drive(tl, &pending, 100, 30) == 0);
    for (int i = 0; i < FIFO_N; ++i) {
        CHECK(ops[i].status == TACL_OK);
        if (rank == 1)
            CHECK(tlh_check(bufs[i], fifo_size(i), (uint64_t)i));
        free(bufs[i]);
    }
    tlh_barrier();
    tacl__tl_close(tl);
    return 0;
}

TEST_EACH_MODE(fifo, 2, fifo_rank, -1, 60)

/* ---- Messages sent long before their receives are posted. ---- */

#define UX_N 41                /* 40 eager messages and a 4 MB one */

static size_t ux_size(int i)
{
    return i == UX_N - 1 ? 4u << 20 : EAGER;
}

static int unexpected_rank(int rank, int nranks, void *arg)
{
    tacl__tl_t *tl = tlh_init(&tacl__tl_shm_ops, rank, nranks, NULL);
    tlh_op_t ops[UX_N];
    uint8_t *bufs[UX_N];
    int pending = 0;
    uint64_t deadline = tacl__now_ns() + 20ull * 1000000000;

    for (int i = 0; i < UX_N; ++i) {
        bufs[i] = malloc(ux_size(i));
        CHECK(bufs[i]);
    }
    if (rank == 0) {
        int eager_pending = 0;

        for (int i = 0; i < UX_N; ++i) {
            tlh_fill(bufs[i], ux_size(i), (uint64_t)i + 500);
            CHECK(tacl__tl_send(tl, tlh_op(&ops[i], 1, (uint64_t)i, bufs[i],
                                           ux_size(i), i < UX_N - 1 ?
                                           &eager_pending : &pending)) ==
                  TACL_OK);
        }
        /* The eager sends complete with no receive posted yet. */
        CHECK(drive(tl, &eager_pending, 100, 20) == 0);
        atomic_store(&tlh_shared->flags[1], 1);
    } else {
        /* Progress without receives until the sender is done. */
        while (!atomic_load(&tlh_shared->flags[1])) {
            CHECK(tacl__tl_progress(tl) >= 0);
            CHECK(tacl__now_ns() < deadline);
        }
        for (int i = UX_N - 1; i >= 0; --i)
            CHECK(tacl__tl_recv(tl, tlh_op(&ops[i], 0, (uint64_t)i, bufs[i],
                                           ux_size(i), &pending)) ==
                  TACL_OK);
    }
    CHECK(drive(tl, &pending, 100, 30) == 0);
    for (int i = 0; i < UX_N; ++i) {
        CHECK(ops[i].status == TACL_OK);
        if (rank == 1)
            CHECK(tlh_check(bufs[i], ux_size(i), (uint64_t)i + 500));
        free(bufs[i]);
    }
    tlh_barrier();
    tacl__tl_close(tl);
    return 0;
}

TEST_EACH_MODE(unexpected, 2, unexpected_rank, -1, 60)

/*
 * ---- A receive that takes a message while it arrives, then is
 * cancelled: the message waits again and the next receive gets it. ----
 */

/* More fragments than one progress call takes (TACL_SHM_POLL_BUDGET): the
 * receiver sees the message while it is still arriving. */
#define TAKEN_LEN (4u * TACL_SHM_POLL_BUDGET * TACL_SHM_SLOT_SIZE)

static int taken_rank(int rank, int nranks, void *arg)
{
    tacl__tl_t *tl = tlh_init(&tacl__tl_shm_ops, rank, nranks, NULL);
    tacl__shm_t *shm = (tacl__shm_t *)tl;
    tacl__shm_peer_t *peer = &shm->peers[shm->base.local_of[!rank]];
    uint8_t *buf = malloc(TAKEN_LEN);
    uint64_t deadline = tacl__now_ns() + 20ull * 1000000000;
    tlh_op_t first, second;
    int pending = 0;

    CHECK(buf);
    if (rank == 0) {
        tlh_fill(buf, TAKEN_LEN, 9);
        CHECK(tacl__tl_send(tl, tlh_op(&first, 1, 9, buf, TAKEN_LEN,
                                       &pending)) == TACL_OK);
        CHECK(drive(tl, &pending, 100, 20) == 0);
        CHECK(first.status == TACL_OK);
    } else {
        /* Some fragments in, no receive yet: an unexpected message. */
        while (peer->in_kind != TACL_SHM_IN_UX) {
            CHECK(tacl__tl_progress(tl) >= 0);
            CHECK(tacl__now_ns() < deadline);
        }
        CHECK(peer->ux.head == &peer->in_ux->link);
        CHECK(tacl__tl_recv(tl, tlh_op(&first, 0, 9, buf, TAKEN_LEN,
                                       &pending)) == TACL_OK);
        CHECK(peer->in_ux->recv == &first.op && peer->ux.head == NULL);
        tacl__tl_cancel_all(tl, TACL_ERR_INVALID_USAGE);
        CHECK(first.calls == 1 && first.status == TACL_ERR_INVALID_USAGE);
        CHECK(pending == 0 && peer->ux.head == &peer->in_ux->link);
        CHECK(tacl__tl_recv(tl, tlh_op(&second, 0, 9, buf, TAKEN_LEN,
                                       &pending)) == TACL_OK);
        CHECK(drive(tl, &pending, 100, 20) == 0);
        CHECK(second.calls == 1 && second.status == TACL_OK);
        CHECK(first.calls == 1 && peer->ux.head == NULL);
        CHECK(tlh_check(buf, TAKEN_LEN, 9));
    }
    free(buf);
    tlh_barrier();
    tacl__tl_close(tl);
    return 0;
}

Test(transport_shm, taken_while_arriving_then_cancelled, .timeout = 60)
{
    cr_assert_eq(tlh_run(2, "copy", taken_rank, NULL, -1), 0);
}

/* ---- 8 ranks all-to-all, sleeping in wait() on 2 cores. ---- */

static const size_t a2a_sizes[] = {1000, 100000, 1u << 20};
#define A2A_K (sizeof(a2a_sizes) / sizeof(a2a_sizes[0]))

static int alltoall_rank(int rank, int nranks, void *arg)
{
    tacl__tl_t *tl = tlh_init(&tacl__tl_shm_ops, rank, nranks, NULL);
    int n = 2 * (nranks - 1) * (int)A2A_K, k = 0, pending = 0;
    tlh_op_t *ops = calloc((size_t)n, sizeof(*ops));
    uint8_t **bufs = calloc((size_t)n, sizeof(*bufs));

    CHECK(ops && bufs);
    for (int d = 1; d < nranks; ++d) {
        int to = (rank + d) % nranks, from = (rank - d + nranks) % nranks;

        for (size_t j = 0; j < A2A_K; ++j, k += 2) {
            bufs[k] = malloc(a2a_sizes[j]);
            bufs[k + 1] = malloc(a2a_sizes[j]);
            CHECK(bufs[k] && bufs[k + 1]);
            tlh_fill(bufs[k], a2a_sizes[j],
                     (uint64_t)(rank * 100 + to) * 10 + j);
            CHECK(tacl__tl_recv(tl, tlh_op(&ops[k + 1], from, j, bufs[k + 1],
                                           a2a_sizes[j], &pending)) ==
                  TACL_OK);
            CHECK(tacl__tl_send(tl, tlh_op(&ops[k], to, j, bufs[k],
                                           a2a_sizes[j], &pending)) ==
                  TACL_OK);
        }
    }
    /* Spin only briefly, so ranks mostly sleep in wait(). */
    CHECK(drive(tl, &pending, 5, 40) == 0);
    for (int i = 0; i < n; ++i) {
        CHECK(ops[i].status == TACL_OK);
        if (i % 2) {
            int from = ops[i].op.peer;

            CHECK(tlh_check(bufs[i], ops[i].op.len,
                            (uint64_t)(from * 100 + rank) * 10 +
                            ops[i].op.tag));
        }
        free(bufs[i]);
    }
    free(ops);
    free(bufs);
    tlh_barrier();
    tacl__tl_close(tl);
    return 0;
}

TEST_EACH_MODE(alltoall8, 8, alltoall_rank, -1, 120)

/* ---- wait() sleeps until a delivery rings, and not when work waits. ---- */

static int wake_rank(int rank, int nranks, void *arg)
{
    tacl__tl_t *tl = tlh_init(&tacl__tl_shm_ops, rank, nranks, NULL);
    uint64_t msg[2] = {0, 0}, t0, slept_ns;
    tlh_op_t ops[2];
    int pending = 0;

    tlh_barrier();
    if (rank == 0) {
        msg[0] = 11;
        msg[1] = 22;
        usleep(200000);
        CHECK(tacl__tl_send(tl, tlh_op(&ops[0], 1, 0, &msg[0], 8,
                                       &pending)) == TACL_OK);
        CHECK(drive(tl, &pending, 100, 10) == 0);
        CHECK(tacl__tl_send(tl, tlh_op(&ops[1], 1, 1, &msg[1], 8,
                                       &pending)) == TACL_OK);
        CHECK(drive(tl, &pending, 100, 10) == 0);
        atomic_store(&tlh_shared->flags[2], 1);
    } else {
        /* Nothing posted, nothing pending: only the doorbell ends this. */
        t0 = tacl__now_ns();
        CHECK(tacl__tl_wait(tl, 5000000) == TACL_OK);
        slept_ns = tacl__now_ns() - t0;
        CHECK(slept_ns > 100000000ull);     /* it did sleep */
        CHECK(slept_ns < 2000000000ull);    /* the doorbell woke it */
        CHECK(tacl__tl_recv(tl, tlh_op(&ops[0], 0, 0, &msg[0], 8,
                                       &pending)) == TACL_OK);
        CHECK(drive(tl, &pending, 100, 10) == 0);
        CHECK(msg[0] == 11);
        /*
         * The second message is in the queue or, if the last drive read
         * it, kept as unexpected and delivered when its receive is posted:
         * either way wait() has work and must not sleep.
         */
        while (!atomic_load(&tlh_shared->flags[2]))
            usleep(1000);
        CHECK(tacl__tl_recv(tl, tlh_op(&ops[1], 0, 1, &msg[1], 8,
                                       &pending)) == TACL_OK);
        t0 = tacl__now_ns();
        CHECK(tacl__tl_wait(tl, 5000000) == TACL_OK);
        CHECK(tacl__now_ns() - t0 < 500000000ull);
        CHECK(drive(tl, &pending, 100, 10) == 0);
        CHECK(msg[1] == 22);
    }
    tlh_barrier();
    tacl__tl_close(tl);
    return 0;
}

Test(transport_shm, wait_sleeps_and_wakes, .timeout = 60)
{
    cr_assert_eq(tlh_run(2, NULL, wake_rank, NULL, -1), 0);
}

/* ---- A receiver that stops after its last receive strands no sender. */

#define STALL_EAGER TACL_SHM_NSLOTS  /* enough to fill a queue */

static int stall_rank(int rank, int nranks, void *arg)
{
    tacl__tl_t *tl = tlh_init(&tacl__tl_shm_ops, rank, nranks, NULL);
    static uint8_t big[1 << 20], small[STALL_EAGER][1000];
    tlh_op_t big_op, ops[STALL_EAGER];
    int pending = 0, eager_pending = 0;
    uint64_t deadline = tacl__now_ns() + 10ull * 1000000000;

    tlh_barrier();
    if (rank == 0) {
        tlh_fill(big, sizeof(big), 77);
        CHECK(tacl__tl_send(tl, tlh_op(&big_op, 1, 1, big, sizeof(big),
                                       &pending)) == TACL_OK);
        for (int i = 0; i < STALL_EAGER; ++i)
            CHECK(tacl__tl_recv(tl, tlh_op(&ops[i], 1, 2 + (uint64_t)i,
                                           small[i], sizeof(small[i]),
                                           &pending)) == TACL_OK);
        /* Send the request, then fall silent while rank 1 fills our queue. */
        CHECK(tacl__tl_progress(tl) >= 0);
        atomic_store(&tlh_shared->flags[3], 1);
        usleep(300000);
        CHECK(drive(tl, &pending, 100, 10) == 0);
        CHECK(big_op.status == TACL_OK);
        atomic_store(&tlh_shared->flags[5], 1);
    } else {
        while (!atomic_load(&tlh_shared->flags[3]))
            usleep(1000);
        /* Eager sends complete once in the slots: our queue to 0 is full. */
        for (int i = 0; i < STALL_EAGER; ++i)
            CHECK(tacl__tl_send(tl, tlh_op(&ops[i], 0, 2 + (uint64_t)i,
                                           small[i], sizeof(small[i]),
                                           &eager_pending)) == TACL_OK);
        CHECK(drive(tl, &eager_pending, 100, 10) == 0);
        CHECK(tacl__tl_recv(tl, tlh_op(&big_op, 0, 1, big, sizeof(big),
                                       &pending)) == TACL_OK);
        CHECK(drive(tl, &pending, 100, 10) == 0);
        CHECK(big_op.status == TACL_OK && tlh_check(big, sizeof(big), 77));
        /* No more progress here: rank 0's send must complete anyway. */
        while (!atomic_load(&tlh_shared->flags[5]))
            CHECK(tacl__now_ns() < deadline);
    }
    tlh_barrier();
    tacl__tl_close(tl);
    return 0;
}

TEST_EACH_MODE(receiver_stops, 2, stall_rank, -1, 60)

/* ---- A peer killed while another waits for it. ---- */

static int killed_rank(int rank, int nranks, void *arg)
{
    tacl__tl_t *tl = tlh_init(&tacl__tl_shm_ops, rank, nranks, NULL);
    static uint8_t in[1 << 20], out[4 << 20];
    tlh_op_t r, s;
    int pending = 0, rc;
    uint64_t elapsed_ns;

    tlh_barrier();
    if (rank == 0) {
        /* Never answers: the parent kills it. */
        for (;;)
            pause();
    }
    CHECK(tacl__tl_recv(tl, tlh_op(&r, 0, 1, in, sizeof(in), &pending)) ==
          TACL_OK);
    /* Too big for the slots in copy mode, an RTS in cma mode. */
    CHECK(tacl__tl_send(tl, tlh_op(&s, 0, 2, out, sizeof(out), &pending)) ==
          TACL_OK);
    CHECK(tacl__tl_progress(tl) >= 0);
    atomic_store(&tlh_shared->flags[0], 1);
    rc = tlh_drive(tl, &pending, 5, 10);
    elapsed_ns = tacl__now_ns() - atomic_load(&tlh_shared->stamp);
    CHECK(rc == -1);
    CHECK(pending == 0);
    CHECK(r.status == TACL_ERR_REMOTE && r.calls == 1);
    CHECK(s.status == TACL_ERR_REMOTE && s.calls == 1);
    CHECK(elapsed_ns < 2000000000ull);
    /* The instance stays failed. */
    CHECK(tacl__tl_progress(tl) == TACL_ERR_REMOTE);
    CHECK(tacl__tl_send(tl, tlh_op(&s, 0, 3, out, 8, &pending)) ==
          TACL_ERR_REMOTE);
    tacl__tl_close(tl);
    return 0;
}

TEST_EACH_MODE(peer_killed, 2, killed_rank, 0, 60)

/*
 * A peer killed in the middle of a pushed message: the receiver waits for
 * the sender's FIN, the sender writes into the receiver.  arg: the rank
 * that dies (0 the sender, 1 the receiver).  The survivor's operation
 * ends within the liveness interval, once: with TACL_ERR_REMOTE when the
 * sender died; a sender whose receiver died may have finished writing
 * first, so OK is correct there too.
 */
static int push_killed_rank(int rank, int nranks, void *arg)
{
    tacl__tl_t *tl = tlh_init(&tacl__tl_shm_ops, rank, nranks, NULL);
    tacl__shm_peer_t *peer = &((tacl__shm_t *)tl)->peers[!rank];
    int victim = (int)(intptr_t)arg, pending = 0, rc;
    size_t len = 256u << 20;
    uint8_t *buf = malloc(len);
    uint64_t elapsed_ns, give_up = tacl__now_ns() + 10ull * 1000000000;
    tlh_op_t op;

    CHECK(buf);
    memset(buf, rank, len);
    tlh_barrier();
    if (rank == 0)
        CHECK(tacl__tl_send(tl, tlh_op(&op, 1, 4, buf, len, &pending)) ==
              TACL_OK);
    else
        CHECK(tacl__tl_recv(tl, tlh_op(&op, 0, 4, buf, len, &pending)) ==
              TACL_OK);
    /* Until the push is under way: the CTS is out (receiver) or the first
     * chunk written (sender). */
    while (rank == 0 ? TACL_SHM_OP_OFFSET(&op.op) == 0 ||
                           peer->pushes.head != &op.op
                     : peer->push_wait.head != &op.op) {
        CHECK(tacl__tl_progress(tl) >= 0);
        CHECK(tacl__now_ns() < give_up);
    }
    atomic_store(&tlh_shared->flags[1 + rank], 1);
    if (rank == victim) {
        /* Both sides under way (no progress here meanwhile): die. */
        while (!atomic_load(&tlh_shared->flags[1 + !rank]))
            CHECK(tacl__now_ns() < give_up);
        atomic_store(&tlh_shared->flags[0], 1);
        for (;;)
            pause();
    }
    rc = tlh_drive(tl, &pending, 5, 10);
    elapsed_ns = tacl__now_ns() - atomic_load(&tlh_shared->stamp);
    CHECK(pending == 0 && op.calls == 1);
    if (rank == 1) {
        CHECK(rc == -1 && op.status == TACL_ERR_REMOTE);
        CHECK(elapsed_ns < 2000000000ull);
    } else {
        CHECK(op.status == TACL_ERR_REMOTE || op.status == TACL_OK);
    }
    free(buf);
    tacl__tl_close(tl);
    return 0;
}

Test(transport_shm, push_sender_killed, .timeout = 60)
{
    cr_assert_eq(tlh_run(2, "push", push_killed_rank, (void *)0, 0), 0);
}

Test(transport_shm, push_receiver_killed, .timeout = 60)
{
    cr_assert_eq(tlh_run(2, "push", push_killed_rank, (void *)1, 1), 0);
}

/* ---- Reachability follows the node ids. ---- */

static int reach_rank(int rank, int nranks, void *arg)
{
    static const char *const ids[3] = {"n0", "n0", "n1"};
    tacl__tl_t *tl = tlh_init(&tacl__tl_shm_ops, rank, nranks, ids);
    char buf[64] = {0};
    tlh_op_t op;
    int pending = 0;

    for (int peer = 0; peer < nranks; ++peer)
        CHECK(tacl__tl_reachable(tl, peer) ==
              (peer != rank && rank < 2 && peer < 2));
    CHECK(!tacl__tl_reachable(tl, -1) && !tacl__tl_reachable(tl, 3));
    if (rank == 0) {
        CHECK(tacl__tl_send(tl, tlh_op(&op, 2, 0, buf, 8, &pending)) ==
              TACL_ERR_INVALID_ARG);
        pending = 0;
        strcpy(buf, "hello from rank 0");
        CHECK(tacl__tl_send(tl, tlh_op(&op, 1, 0, buf, sizeof(buf),
                                       &pending)) == TACL_OK);
    } else if (rank == 1) {
        CHECK(tacl__tl_recv(tl, tlh_op(&op, 0, 0, buf, sizeof(buf),
                                       &pending)) == TACL_OK);
    } else {
        /* A rank alone on its node has nothing to wait for. */
        CHECK(tacl__tl_wait(tl, 1000000) == TACL_OK);
        CHECK(tacl__tl_progress(tl) == 0);
    }
    CHECK(drive(tl, &pending, 100, 10) == 0);
    if (rank == 1)
        CHECK(strcmp(buf, "hello from rank 0") == 0);
    tlh_barrier();
    tacl__tl_close(tl);
    return 0;
}

Test(transport_shm, reachable_by_node_id, .timeout = 60)
{
    cr_assert_eq(tlh_run(3, NULL, reach_rank, NULL, -1), 0);
}

/* ---- Sends from tacl_mem_alloc segments: the receiver maps them. ---- */

#define NSEGS 20     /* TACL_SHM_MAPS + 4 */

static size_t seg_len(int i)
{
    return 3 * EAGER + (size_t)i * 4096 + 17;
}

/* The entries of rank 1's maps of rank 0's segments that are taken. */
static int maps_taken(tacl__tl_t *tl, int *freed_p)
{
    tacl__shm_t *shm = (tacl__shm_t *)tl;
    tacl__shm_peer_t *peer = &shm->peers[shm->base.local_of[0]];
    int taken = 0;

    *freed_p = 0;
    for (int i = 0; i < TACL_SHM_MAPS; i++) {
        if (peer->maps.entries[i].id == 0)
            continue;
        ++taken;
        *freed_p += tacl__memseg_freed(peer->maps.entries[i].base,
                                       peer->maps.entries[i].size);
    }
    return taken;
}

/*
 * Rank 0 sends one message from inside each of NSEGS segments (more than
 * rank 1 keeps mapped), then frees half of them and sends from a new
 * one.  Rank 1 posts half its receives before the messages come and half
 * after (so those requests wait unexpected), hints some PINNABLE (a
 * mapped sender is still pulled from) and some STREAM (non-temporal
 * copies), and checks every byte, that it kept at most TACL_SHM_MAPS
 * segments mapped and, after the second round, none its peer had freed.
 * arg "off" runs it with TACL_SHM_MAP=0: nothing may be mapped.
 */
_Static_assert(NSEGS == TACL_SHM_MAPS + 4, "the counts below assume it");

static int mapped_rank(int rank, int nranks, void *arg)
{
    int map = arg == NULL;
    tacl__tl_t *tl;
    uint8_t *seg[NSEGS + 1] = {0}, *in[NSEGS + 1] = {0};
    tlh_op_t ops[NSEGS + 1];
    int pending = 0, taken, freed;

    setenv("TACL_SHM_MAP", map ? "1" : "0", 1);
    tacl__config_reload();
    tl = tlh_init(&tacl__tl_shm_ops, rank, nranks, NULL);
    CHECK(((tacl__shm_t *)tl)->use_map == map);
    for (int i = 0; i <= NSEGS; i++) {
        size_t len = seg_len(i);

        if (rank == 0) {
            CHECK(tacl_mem_alloc((void **)&seg[i], len + 200,
                                 TACL_MEM_HOST) == TACL_OK);
            tlh_fill(seg[i] + 100, len, (uint64_t)i + 1);
        } else {
            in[i] = malloc(len);
            CHECK(in[i] != NULL);
            memset(in[i], 0xee, len);
        }
    }
    for (int i = 0; i < NSEGS; i++) {
        tlh_op_t *t = &ops[i];

        if (rank == 0) {
            CHECK(tacl__tl_send(tl, tlh_op(t, 1, (uint64_t)i, seg[i] + 100,
                                           seg_len(i), &pending)) ==
                  TACL_OK);
            continue;
        }
        if (i == NSEGS / 2)
            CHECK(drive(tl, &pending, 100, 30) == 0);
        tlh_op(t, 0, (uint64_t)i, in[i], seg_len(i), &pending);
        t->op.hints = i % 3 == 1   ? TACL__TL_HINT_PINNABLE
                      : i % 3 == 2 ? TACL__TL_HINT_STREAM
                                   : 0;
        CHECK(tacl__tl_recv(tl, &t->op) == TACL_OK);
    }
    CHECK(drive(tl, &pending, 100, 30) == 0);
    if (rank == 1) {
        for (int i = 0; i < NSEGS; i++) {
            CHECK(ops[i].status == TACL_OK);
            CHECK(tlh_check(in[i], seg_len(i), (uint64_t)i + 1));
        }
        taken = maps_taken(tl, &freed);
        CHECK(taken == (map ? TACL_SHM_MAPS : 0));
        CHECK(freed == 0);
    }
    tlh_barrier();
    /* Round two: half the segments freed, a new one sent from. */
    if (rank == 0) {
        for (int i = 0; i < NSEGS; i += 2)
            CHECK(tacl_mem_free(seg[i]) == TACL_OK);
        CHECK(tacl__tl_send(tl, tlh_op(&ops[NSEGS], 1, NSEGS,
                                       seg[NSEGS] + 100, seg_len(NSEGS),
                                       &pending)) == TACL_OK);
    } else {
        CHECK(tacl__tl_recv(tl, tlh_op(&ops[NSEGS], 0, NSEGS, in[NSEGS],
                                       seg_len(NSEGS), &pending)) ==
              TACL_OK);
    }
    CHECK(drive(tl, &pending, 100, 30) == 0);
    if (rank == 1) {
        CHECK(tlh_check(in[NSEGS], seg_len(NSEGS), NSEGS + 1));
        taken = maps_taken(tl, &freed);
        CHECK(freed == 0);
        /* Segments 0-3 were evicted in round one (least recently
         * used); of 4-19, the 8 even ones were freed and are unmapped
         * now; the new one is mapped. */
        CHECK(taken == (map ? TACL_SHM_MAPS - 8 + 1 : 0));
    }
    tlh_barrier();
    for (int i = 0; i <= NSEGS; i++) {
        if (rank == 0 && (i % 2 || i == NSEGS))
            CHECK(tacl_mem_free(seg[i]) == TACL_OK);
        if (rank == 1)
            free(in[i]);
    }
    tacl__tl_close(tl);
    return 0;
}

Test(transport_shm, mapped_segments, .timeout = 60)
{
    cr_assert_eq(tlh_run(2, "cma", mapped_rank, NULL, -1), 0);
}

Test(transport_shm, mapped_segments_off, .timeout = 60)
{
    cr_assert_eq(tlh_run(2, "cma", mapped_rank, "off", -1), 0);
}
