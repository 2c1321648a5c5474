/*
 * Tests of the cuda_ipc transport with real processes sharing one GPU:
 * the harness forks the ranks (tl_harness.h), each rank allocates device
 * memory (cudaMalloc, or tacl_mem_alloc's cuMem memory) and the
 * transport moves it between them; the bytes are checked on the host.
 *
 * The parent never touches CUDA (a CUDA runtime does not survive fork):
 * whether a device is usable is asked of a forked child.  Without one the
 * device cases skip and the program exits 77 (tt_cuda_test_main), after
 * the cases that need no device have run: setup makes no connection and
 * asks nothing of CUDA, and what a machine without a device sees (the
 * transport reaches no peer, tacl_mem_alloc says why), which runs on
 * every machine with the devices hidden.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "cuda_device.h"
#include "cuda_ipc/cuda_ipc.h"
#include "tl_harness.h"

#define MB (1u << 20)

static void need_device(void)
{
    tt_skip_without_device_forked();
}

/* How a rank gets its device buffers. */
typedef enum { MEM_CUDAMALLOC, MEM_TACL } mem_kind_t;

static void *dev_alloc(mem_kind_t kind, size_t len)
{
    void *p = NULL;

    if (len == 0)
        len = 1;
    if (kind == MEM_TACL) {
        tacl_status_t st = tacl_mem_alloc(&p, len, TACL_MEM_CUDA);

        CHECK(st == TACL_OK, "tacl_mem_alloc: %s", tacl__last_error());
    } else {
        CHECK(cudaMalloc(&p, len) == cudaSuccess);
    }
    return p;
}

static void dev_free(mem_kind_t kind, void *p)
{
    if (kind == MEM_TACL)
        CHECK(tacl_mem_free(p) == TACL_OK, "%s", tacl__last_error());
    else
        CHECK(cudaFree(p) == cudaSuccess);
}

/* Fill len bytes of device memory with tlh_fill's pattern for seed. */
static void dev_fill(void *dst, size_t len, uint64_t seed)
{
    void *host = malloc(len ? len : 1);

    CHECK(host != NULL);
    tlh_fill(host, len, seed);
    CHECK(cudaMemcpy(dst, host, len, cudaMemcpyHostToDevice) == cudaSuccess);
    free(host);
}

/* Whether len bytes of device memory hold the pattern for seed. */
static int dev_check(const void *src, size_t len, uint64_t seed)
{
    void *host = malloc(len ? len : 1);
    int ok;

    CHECK(host != NULL);
    CHECK(cudaMemcpy(host, src, len, cudaMemcpyDeviceToHost) == cudaSuccess);
    ok = tlh_check(host, len, seed);
    free(host);
    return ok;
}

static tacl__tl_op_t *dev_op(tlh_op_t *t, int peer, uint64_t tag, void *buf,
                             uint64_t len, int *pending)
{
    tacl__tl_op_t *op = tlh_op(t, peer, tag, buf, len, pending);

    op->memtype = TACL_MEM_CUDA;
    return op;
}

static tacl__tl_t *dev_init(int rank, int nranks, const char *const *ids)
{
    CHECK(cudaSetDevice(0) == cudaSuccess);
    return tlh_init(&tacl__tl_cuda_ipc_ops, rank, nranks, ids);
}

static const size_t sizes[] = {0, 1, 4096, MB, 64 * MB};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

/* Every rank sends every size to every other rank; all bytes checked. */
static int all_sizes_rank(int rank, int nranks, void *arg)
{
    mem_kind_t kind = (mem_kind_t)(intptr_t)arg;
    tacl__tl_t *tl = dev_init(rank, nranks, NULL);

    for (size_t s = 0; s < NSIZES; s++) {
        size_t len = sizes[s];
        tlh_op_t sends[TLH_MAX_RANKS], recvs[TLH_MAX_RANKS];
        void *rbuf[TLH_MAX_RANKS];
        void *sbuf = dev_alloc(kind, len);
        int pending = 0;

        dev_fill(sbuf, len, (uint64_t)rank * 100 + s);
        for (int p = 0; p < nranks; p++) {
            if (p == rank)
                continue;
            rbuf[p] = dev_alloc(kind, len);
            CHECK(tacl__tl_recv(tl, dev_op(&recvs[p], p, s, rbuf[p], len,
                                           &pending)) == TACL_OK,
                  "%s", tacl__last_error());
        }
        for (int p = 0; p < nranks; p++)
            if (p != rank)
                CHECK(tacl__tl_send(tl, dev_op(&sends[p], p, s, sbuf, len,
                                               &pending)) == TACL_OK,
                      "%s", tacl__last_error());
        CHECK(tlh_drive(tl, &pending, 100, 30) == 0, "size %zu", len);
        for (int p = 0; p < nranks; p++) {
            if (p == rank)
                continue;
            CHECK(sends[p].status == TACL_OK && sends[p].calls == 1);
            CHECK(recvs[p].status == TACL_OK && recvs[p].calls == 1);
            CHECK(dev_check(rbuf[p], len, (uint64_t)p * 100 + s),
                  "%zu bytes from rank %d", len, p);
            dev_free(kind, rbuf[p]);
        }
        tlh_barrier();   /* nobody reads sbuf any more */
        dev_free(kind, sbuf);
    }
    tacl__tl_close(tl);
    return 0;
}

Test(transport_cuda_ipc, sizes_cudamalloc_2)
{
    need_device();
    cr_assert_eq(tlh_run(2, NULL, all_sizes_rank,
                         (void *)(intptr_t)MEM_CUDAMALLOC, -1), 0);
}

Test(transport_cuda_ipc, sizes_cudamalloc_4)
{
    need_device();
    cr_assert_eq(tlh_run(4, NULL, all_sizes_rank,
                         (void *)(intptr_t)MEM_CUDAMALLOC, -1), 0);
}

Test(transport_cuda_ipc, sizes_tacl_mem_2)
{
    need_device();
    cr_assert_eq(tlh_run(2, NULL, all_sizes_rank, (void *)(intptr_t)MEM_TACL,
                         -1), 0);
}

Test(transport_cuda_ipc, sizes_tacl_mem_4)
{
    need_device();
    cr_assert_eq(tlh_run(4, NULL, all_sizes_rank, (void *)(intptr_t)MEM_TACL,
                         -1), 0);
}

/* Live entries of the cache of rank 1's peer 0. */
static int live_maps(tacl__tl_t *tl, int peer)
{
    tacl__cipc_t *c = (tacl__cipc_t *)tl;
    const tacl__cipc_peer_t *p = &c->peers[c->base.local_of[peer]];
    int n = 0;

    for (int i = 0; i < TACL_CIPC_MAPS; i++)
        n += p->maps[i].mem != TACL_CIPC_MEM_NONE;
    return n;
}

/* One message from rank 0 to rank 1, checked there. */
static void one_message(tacl__tl_t *tl, int rank, void *buf, size_t len,
                        uint64_t tag, uint64_t seed)
{
    tlh_op_t t;
    int pending = 0;

    if (rank == 0)
        CHECK(tacl__tl_send(tl, dev_op(&t, 1, tag, buf, len, &pending)) ==
                  TACL_OK, "%s", tacl__last_error());
    else
        CHECK(tacl__tl_recv(tl, dev_op(&t, 0, tag, buf, len, &pending)) ==
                  TACL_OK, "%s", tacl__last_error());
    CHECK(tlh_drive(tl, &pending, 100, 30) == 0);
    CHECK(t.status == TACL_OK);
    if (rank == 1)
        CHECK(dev_check(buf, len, seed), "tag %llu", (unsigned long long)tag);
}

/*
 * How long a peer's allocation stays mapped here (the rule of cuda_ipc.h).
 * cudaMalloc memory: only while a copy reads it, so every message opens
 * it anew, nothing is mapped once a receive has completed, and the owner
 * frees the buffer as soon as its send has completed (no barrier: the
 * receiver closed its mapping before answering).  tacl_mem_alloc memory:
 * two messages from one allocation (at two offsets) open it once, and
 * after the owner frees it and allocates again (perhaps at the same
 * address) the next message opens the new allocation, and the old
 * mapping goes once the owner's news arrives.
 */
static int cache_rank(int rank, int nranks, void *arg)
{
    mem_kind_t kind = (mem_kind_t)(intptr_t)arg;
    tacl__tl_t *tl = dev_init(rank, nranks, NULL);
    size_t len = 3 * MB;
    void *buf = dev_alloc(kind, 2 * len);
    uint64_t opens = tacl__cipc_open_count();
    int kept = kind == MEM_TACL;
    uint64_t deadline;

    if (rank == 0) {
        dev_fill(buf, len, 1);
        dev_fill((char *)buf + len, len, 2);
    }
    one_message(tl, rank, buf, len, 1, 1);
    if (rank == 1) {
        CHECK(tacl__cipc_open_count() == opens + 1);
        CHECK(live_maps(tl, 0) == kept, "%d mappings after a message",
              live_maps(tl, 0));
    }
    one_message(tl, rank, (char *)buf + (rank == 0 ? len : 0), len, 2, 2);
    if (rank == 1) {
        CHECK(tacl__cipc_open_count() == opens + (kept ? 1 : 2),
              "the second message %s the allocation",
              kept ? "reopened" : "did not reopen");
        CHECK(live_maps(tl, 0) == kept);
    }
    if (rank == 0) {
        /* The send completed: free at once (no barrier for cudaMalloc). */
        if (kind == MEM_TACL)
            tlh_barrier();
        dev_free(kind, buf);
        buf = dev_alloc(kind, 2 * len);
        dev_fill(buf, len, 3);
    } else if (kind == MEM_TACL) {
        tlh_barrier();
    }
    one_message(tl, rank, buf, len, 3, 3);
    if (rank == 1) {
        CHECK(tacl__cipc_open_count() == opens + (kept ? 2 : 3),
              "the new allocation was not opened");
        /* The old mapping goes when the free's news arrives (cuMem). */
        deadline = tacl__now_ns() + 10ull * 1000000000;
        while (kind == MEM_TACL && live_maps(tl, 0) != 1 &&
               tacl__now_ns() < deadline)
            CHECK(tacl__tl_progress(tl) >= 0);
        CHECK(live_maps(tl, 0) == kept, "%d mappings", live_maps(tl, 0));
    }
    tlh_barrier();
    dev_free(kind, buf);
    tacl__tl_close(tl);
    return 0;
}

Test(transport_cuda_ipc, cache_cudamalloc)
{
    need_device();
    cr_assert_eq(tlh_run(2, NULL, cache_rank,
                         (void *)(intptr_t)MEM_CUDAMALLOC, -1), 0);
}

Test(transport_cuda_ipc, cache_tacl_mem)
{
    need_device();
    cr_assert_eq(tlh_run(2, NULL, cache_rank, (void *)(intptr_t)MEM_TACL,
                         -1), 0);
}

/*
 * Freed device memory and host memory posted as device memory are
 * errors of the post, with a message; the transport still works after.
 */
static int bad_buffer_rank(int rank, int nranks, void *arg)
{
    tacl__tl_t *tl = dev_init(rank, nranks, NULL);
    void *gone = dev_alloc(MEM_CUDAMALLOC, MB);
    void *gone_tacl = dev_alloc(MEM_TACL, MB);
    char host[64];
    tlh_op_t t;
    int pending = 0;
    void *ok;

    dev_free(MEM_CUDAMALLOC, gone);
    dev_free(MEM_TACL, gone_tacl);
    tacl__last_error_clear();
    CHECK(tacl__tl_send(tl, dev_op(&t, 1 - rank, 9, gone, MB, &pending)) !=
          TACL_OK);
    CHECK(strstr(tacl__last_error(), "not CUDA device memory") != NULL,
          "%s", tacl__last_error());
    CHECK(tacl__tl_recv(tl, dev_op(&t, 1 - rank, 9, gone_tacl, MB,
                                   &pending)) != TACL_OK);
    CHECK(tacl__tl_send(tl, dev_op(&t, 1 - rank, 9, host, sizeof(host),
                                   &pending)) != TACL_OK);
    /* A good message still goes both ways. */
    ok = dev_alloc(MEM_CUDAMALLOC, MB);
    dev_fill(ok, MB, 7);
    pending = 0;
    {
        tlh_op_t s, r;
        void *in = dev_alloc(MEM_CUDAMALLOC, MB);

        CHECK(tacl__tl_recv(tl, dev_op(&r, 1 - rank, 10, in, MB,
                                       &pending)) == TACL_OK);
        CHECK(tacl__tl_send(tl, dev_op(&s, 1 - rank, 10, ok, MB,
                                       &pending)) == TACL_OK);
        CHECK(tlh_drive(tl, &pending, 100, 30) == 0);
        CHECK(r.status == TACL_OK && s.status == TACL_OK);
        CHECK(dev_check(in, MB, 7));
        tlh_barrier();
        dev_free(MEM_CUDAMALLOC, in);
    }
    dev_free(MEM_CUDAMALLOC, ok);
    tacl__tl_close(tl);
    return 0;
}

Test(transport_cuda_ipc, freed_pointer_is_an_error)
{
    need_device();
    cr_assert_eq(tlh_run(2, NULL, bad_buffer_rank, NULL, -1), 0);
}

/* A receive of the wrong length fails on both sides with the message. */
static int length_rank(int rank, int nranks, void *arg)
{
    tacl__tl_t *tl = dev_init(rank, nranks, NULL);
    void *buf = dev_alloc(MEM_CUDAMALLOC, 2 * MB);
    tlh_op_t t;
    int pending = 0;

    if (rank == 0)
        CHECK(tacl__tl_send(tl, dev_op(&t, 1, 4, buf, 2 * MB, &pending)) ==
              TACL_OK);
    else
        CHECK(tacl__tl_recv(tl, dev_op(&t, 0, 4, buf, MB, &pending)) ==
              TACL_OK);
    CHECK(tlh_drive(tl, &pending, 100, 30) == 0);
    CHECK(t.status == TACL_ERR_INVALID_USAGE, "%d", (int)t.status);
    CHECK(t.calls == 1);
    tlh_barrier();
    dev_free(MEM_CUDAMALLOC, buf);
    tacl__tl_close(tl);
    return 0;
}

Test(transport_cuda_ipc, length_mismatch)
{
    need_device();
    cr_assert_eq(tlh_run(2, NULL, length_rank, NULL, -1), 0);
}

/* Fenced by node identity: ranks 0 and 1 share a node, rank 2 does not. */
static int fence_rank(int rank, int nranks, void *arg)
{
    static const char *const ids[] = {"n0", "n0", "n1"};
    tacl__tl_t *tl = dev_init(rank, nranks, ids);

    CHECK(!tacl__tl_reachable(tl, rank));
    for (int p = 0; p < nranks; p++)
        if (p != rank)
            CHECK(tacl__tl_reachable(tl, p) == (rank < 2 && p < 2),
                  "rank %d reaches %d", rank, p);
    tacl__tl_close(tl);
    return 0;
}

Test(transport_cuda_ipc, fenced_by_node_id)
{
    need_device();
    cr_assert_eq(tlh_run(3, NULL, fence_rank, NULL, -1), 0);
}

/*
 * The killed peer: a send whose receiver dies before answering fails
 * with an error naming that rank, not a hang.
 */
static int killed_rank(int rank, int nranks, void *arg)
{
    tacl__tl_t *tl = dev_init(rank, nranks, NULL);
    void *buf = dev_alloc(MEM_CUDAMALLOC, MB);
    tacl_status_t st;
    tlh_op_t t;
    int pending = 0;

    if (rank == 1) {
        atomic_store(&tlh_shared->flags[0], 1);
        pause();   /* killed by the parent */
    }
    /* The kill may come before the post (which then fails at once) or
     * after it (and the send completes with the error). */
    st = tacl__tl_send(tl, dev_op(&t, 1, 5, buf, MB, &pending));
    if (st == TACL_OK) {
        CHECK(tlh_drive(tl, &pending, 100, 20) != 0);
        CHECK(t.calls == 1 && t.status == TACL_ERR_REMOTE, "%d",
              (int)t.status);
    } else {
        CHECK(st == TACL_ERR_REMOTE, "%d", (int)st);
    }
    CHECK(strstr(tacl__last_error(), "rank 1") != NULL, "%s",
          tacl__last_error());
    tacl__tl_close(tl);
    return 0;
}

Test(transport_cuda_ipc, dead_peer_fails)
{
    need_device();
    cr_assert_eq(tlh_run(2, NULL, killed_rank, NULL, 1), 0);
}

/*
 * What a machine without a usable device sees (here with the devices
 * hidden, so the case runs on every machine): the transport is created
 * but reaches nobody, so a device message fails to post instead of
 * hanging, and tacl_mem_alloc of device memory says what is missing.
 */
static int no_device_rank(int rank, int nranks, void *arg)
{
    tacl__tl_t *tl;

    tt_hide_devices();
    tl = tlh_init(&tacl__tl_cuda_ipc_ops, rank, nranks, NULL);
    char buf[16];
    void *p = buf;
    tlh_op_t t;
    int pending = 0;

    CHECK(!tacl__tl_reachable(tl, 1 - rank));
    CHECK(tacl__tl_send(tl, dev_op(&t, 1 - rank, 1, buf, sizeof(buf),
                                   &pending)) == TACL_ERR_INVALID_ARG);
    CHECK(strstr(tacl__last_error(), "cuda_ipc cannot reach") != NULL,
          "%s", tacl__last_error());
    CHECK(tacl__tl_progress(tl) == 0);
    CHECK(tacl_mem_alloc(&p, 4096, TACL_MEM_CUDA) == TACL_ERR_UNSUPPORTED);
    CHECK(p == NULL);
    CHECK(strstr(tacl__last_error(), "CUDA") != NULL, "%s",
          tacl__last_error());
    tacl__tl_close(tl);
    return 0;
}

Test(transport_cuda_ipc, without_device_reaches_nobody)
{
    cr_assert_eq(tlh_run(2, NULL, no_device_rank, NULL, -1), 0);
}

/*
 * Setup costs no CUDA and no connection (cuda_ipc.h): after init every
 * neighbour listens, none is connected, and the driver was not asked;
 * closing such an instance is clean.  Needs no device.
 */
static int lazy_setup_rank(int rank, int nranks, void *arg)
{
    tacl__tl_t *tl = tlh_init(&tacl__tl_cuda_ipc_ops, rank, nranks, NULL);
    tacl__cipc_t *c = (tacl__cipc_t *)tl;

    CHECK(c->driver == 0, "setup asked for the CUDA driver");
    CHECK(c->nwant == 0);
    for (int p = 0; p < nranks; p++) {
        const tacl__cipc_peer_t *peer = &c->peers[c->base.local_of[p]];

        if (p == rank)
            continue;
        CHECK(peer->listens, "rank %d does not listen", p);
        CHECK(peer->fd < 0, "rank %d is connected at setup", p);
    }
    CHECK(tacl__tl_progress(tl) == 0);
    tlh_barrier();
    tacl__tl_close(tl);
    return 0;
}

Test(transport_cuda_ipc, setup_connects_nobody)
{
    cr_assert_eq(tlh_run(3, NULL, lazy_setup_rank, NULL, -1), 0);
}

/*
 * The connection comes with the first message, whichever side posts
 * first: here the rank that accepts (the higher) sends first and the one
 * that connects posts its receive a while later; then the other way.
 */
static int late_peer_rank(int rank, int nranks, void *arg)
{
    tacl__tl_t *tl = dev_init(rank, nranks, NULL);
    void *buf = dev_alloc(MEM_CUDAMALLOC, MB);
    tlh_op_t t;
    int pending = 0;

    if (rank == 1) {
        dev_fill(buf, MB, 11);
        CHECK(tacl__tl_send(tl, dev_op(&t, 0, 1, buf, MB, &pending)) ==
              TACL_OK, "%s", tacl__last_error());
    } else {
        usleep(200 * 1000);
        CHECK(tacl__tl_recv(tl, dev_op(&t, 1, 1, buf, MB, &pending)) ==
              TACL_OK, "%s", tacl__last_error());
    }
    CHECK(tlh_drive(tl, &pending, 100, 30) == 0);
    CHECK(t.status == TACL_OK);
    if (rank == 0)
        CHECK(dev_check(buf, MB, 11));
    else
        CHECK(cudaMemset(buf, 0, MB) == cudaSuccess);
    tlh_barrier();
    /* The pair is connected: the other way needs nothing new. */
    one_message(tl, rank, buf, MB, 2, 11);
    tlh_barrier();
    dev_free(MEM_CUDAMALLOC, buf);
    tacl__tl_close(tl);
    return 0;
}

Test(transport_cuda_ipc, first_message_connects)
{
    need_device();
    cr_assert_eq(tlh_run(2, NULL, late_peer_rank, NULL, -1), 0);
}

TT_CUDA_TEST_MAIN()
